/*
 * Self-clocked enqueue batches (src/enqueue.c, "Self-clocking"): while one
 * of a queue's enqueue calls is in flight, the jobs enqueued on it wait
 * for its reply and then go together, one script call for all that came
 * during the round trip, instead of one call per loop pass. A proxy holds
 * the replies back, so "a call is in flight" is made, not hoped for; what
 * is checked is counted (script calls in INFO commandstats), never timed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "fixture.h"
#include "harness.h"
#include "proxy.h"
#include "server.h"
#include "waits.h"

enum { JOBS = 50 };

typedef struct order {
    int calls, bad, out_of_order;
    long long last_id;        /* anonymous ids are numbers, in call order */
    int last_status;
} order;

static void on_ordered(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    order *o = data;
    (void)c;
    o->calls++;
    o->last_status = status;
    if (status != RJQ_OK || n != 1) {
        o->bad++;
        return;
    }
    long long id = atoll(rjq_enqueued_get(jobs, 0)->id);
    if (id <= o->last_id) o->out_of_order++;
    o->last_id = id;
}

/* One enqueue goes out and runs in Redis; its reply waits in the proxy. */
static void first_call_out(test_env *e, proxy *p, const char *ready, order *o) {
    proxy_hold(p, 1);
    ASSERT_OK(rjq_enqueue(e->q, "j0", 2, NULL, on_ordered, o));
    ASSERT(loop_until_server_int(e->base, e->rc, 1, 5000, "LLEN %s", ready));
}

/* JOBS jobs enqueued one per loop turn (each turn runs the queue's tick)
 * while the first one's call is in flight go in far fewer script calls
 * than jobs (before: one call per turn, JOBS calls), each reported once,
 * in call order. */
TEST(enqueues_made_while_their_queues_call_is_in_flight_share_a_call) {
    test_env e;
    proxy p;
    env_start_proxied(&e, &p, "clocked", NULL);
    order o = {0};
    long long before = server_script_calls(e.rc);
    first_call_out(&e, &p, "t:{clocked}:ready", &o);
    for (int i = 1; i < JOBS; i++) {
        char payload[16];
        snprintf(payload, sizeof payload, "j%d", i);
        ASSERT_OK(rjq_enqueue(e.q, payload, strlen(payload), NULL, on_ordered, &o));
        loop_turn(e.base);
    }
    proxy_hold(&p, 0);
    WAIT_FOR(e.base, o.calls == JOBS, 10000);
    ASSERT_EQ(0, o.bad);
    ASSERT_EQ(0, o.out_of_order);
    ASSERT_EQ(JOBS, server_int(e.rc, "LLEN t:{clocked}:ready"));
    long long calls = server_script_calls(e.rc) - before;
    fprintf(stderr, "%d jobs enqueued one per loop turn: %lld script calls\n", JOBS, calls);
    ASSERT(calls < JOBS / 2);
    env_stop_proxied(&e, &p);
}

typedef struct read_wait {
    int done, status;
    char state[32];
} read_wait;

static void on_read(rjq_client *c, int status, const rjq_job_info *info, void *data) {
    read_wait *w = data;
    (void)c;
    w->done++;
    w->status = status;
    if (status == RJQ_OK && info) snprintf(w->state, sizeof w->state, "%s", info->state);
}

/* A batch held back for the call in flight still goes ahead of a later
 * request that may see it: a read of its job finds it. */
TEST(a_read_made_while_a_batch_is_held_back_sees_its_job) {
    test_env e;
    proxy p;
    env_start_proxied(&e, &p, "seen", NULL);
    order o = {0};
    first_call_out(&e, &p, "t:{seen}:ready", &o);
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.id = "held";
    enqueue_wait ew = {0};
    ASSERT_OK(rjq_enqueue(e.q, "h", 1, &jo, on_enqueue_wait, &ew));
    loop_turn(e.base); /* (its tick holds it back) */
    read_wait r = {0};
    ASSERT_OK(rjq_queue_get_job(e.q, "held", on_read, &r));
    proxy_hold(&p, 0);
    WAIT_FOR(e.base, r.done && ew.done && o.calls == 1, 10000);
    ASSERT_EQ(1, r.done);
    ASSERT_OK(r.status);
    ASSERT_STREQ("ready", r.state);
    ASSERT_OK(ew.status);
    env_stop_proxied(&e, &p);
}

static rjq_job *kept;

static void keep_job(rjq_job *job, void *data) {
    (void)data;
    kept = job;
}

/* A completion made after an enqueue never overtakes it on the wire, even
 * in another queue's slot: the batch held back for the call in flight
 * goes ahead of it ("enqueue the next step, then complete this one"). */
TEST(a_completion_made_after_a_held_enqueue_does_not_overtake_it) {
    test_env e;
    proxy p;
    env_start_proxied(&e, &p, "next", NULL);
    rjq_queue *done_q = queue_for(e.c, "step");
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(done_q, &wo, keep_job, NULL, &w));
    wait_worker_started(e.base, e.c, done_q, e.rc, "step");
    enqueue_job(e.base, done_q, "s", NULL);
    WAIT_FOR(e.base, kept != NULL, 10000);
    order o = {0}, held = {0};
    first_call_out(&e, &p, "t:{next}:ready", &o);
    ASSERT_OK(rjq_enqueue(e.q, "n1", 2, NULL, on_ordered, &held));
    loop_turn(e.base); /* (its tick holds it back) */
    long done = 0;
    ASSERT_OK(rjq_job_complete(kept, "", 0, on_done_ok, &done));
    kept = NULL;
    /* the completion ran in Redis (its reply is held): the enqueue made
     * before it had run already */
    ASSERT(loop_until_server_int(e.base, e.rc, 1, 10000, "LLEN t:{step}:completed"));
    ASSERT_EQ(2, server_int(e.rc, "LLEN t:{next}:ready"));
    proxy_hold(&p, 0);
    WAIT_FOR(e.base, done == 1 && o.calls == 1 && held.calls == 1, 10000);
    ASSERT_EQ(0, o.bad + held.bad);
    worker_stop_wait(e.base, w);
    env_stop_proxied(&e, &p);
}

/* A reply that never comes ends with the command timeout, and the batch
 * held back for it then goes (and ends) too: nothing is held forever. */
TEST(a_batch_held_back_goes_when_the_call_before_it_times_out) {
    test_env e;
    proxy p;
    rjq_client_options co = client_options("");
    co.command_timeout_ms = 300;
    env_start_proxied_opts(&e, &p, "lapsed", &co);
    order first = {0}, second = {0};
    first_call_out(&e, &p, "t:{lapsed}:ready", &first);
    ASSERT_OK(rjq_enqueue(e.q, "j1", 2, NULL, on_ordered, &second));
    loop_turn(e.base); /* (its tick holds it back) */
    WAIT_FOR(e.base, first.calls == 1 && second.calls == 1, 20000); /* (the proxy still holds) */
    ASSERT(first.last_status != RJQ_OK);
    ASSERT(second.last_status != RJQ_OK);
    proxy_hold(&p, 0);
    env_stop_proxied(&e, &p);
}
