/*
 * rjq_queue_open's gate (docs/sharding.md section 2) holds the calls that
 * used to act on the queue's own keys at once, before its layout is read:
 * rjq_worker_start_queues, and rjq_enqueue_await / rjq_queue_await with an
 * out handle (the handle is returned at once, a reserved await). Held, they
 * are made once every queue named knows its layout, routed to the right
 * shard; nothing goes to the unsharded keys of a sharded queue.
 */
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "shard.h"
#include "waits.h"

/* The keys under the unsharded queue's tag: only its declaration. */
typedef struct runs {
    long done;
    int seen[8];
} runs;

static void count_handler(rjq_job *job, void *data) {
    runs *r = data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    int n = -1;
    ASSERT(sscanf(p, "p-%d", &n) == 1 && n >= 0 && n < 8);
    r->seen[n]++;
    ASSERT_OK(rjq_job_complete(job, NULL, 0, on_done_ok, &r->done));
}

/* Run the loop until neither handle is reading its layout. */
static void wait_learnt(struct event_base *base, rjq_queue *a, rjq_queue *b) {
    wait_layout_known(base, a);
    if (b) wait_layout_known(base, b);
}

/* rjq_worker_start_queues on rjq_queue_open handles, made at once: a
 * plain queue and a sharded one. The worker waits for both layouts; one
 * being sharded, it is never started (no job of the plain queue runs,
 * nothing is written under the sharded queue's own tag) and ends when
 * stopped, its stop callback once. */
TEST(start_queues_right_after_open_never_acts_on_a_sharded_queues_own_keys) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *decl = open_learnt(e.base, e.c, "sgw");
    ASSERT_OK(declare_shards(e.base, decl, 3));
    rjq_queue *plain = open_learnt(e.base, e.c, "sgp");
    enqueue_x_ok(e.base, plain, "j1", 0, 0);

    rjq_client_options o = client_options(e.s.url);
    rjq_client *wc = client_new(e.base, &o);
    rjq_queue *qs[2];
    ASSERT_OK(rjq_queue_open(wc, "sgp", NULL, &qs[0]));
    ASSERT_OK(rjq_queue_open(wc, "sgw", NULL, &qs[1]));
    int weights[2] = {1, 1};
    rjq_worker_options wo = quiet_worker_options(2);
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start_queues(qs, 2, RJQ_WORKER_WEIGHTED, weights, &wo, never_runs, NULL, &w));
    ASSERT(w != NULL);
    ASSERT_EQ(RJQ_EBUSY, rjq_queue_close(qs[1])); /* (the held worker uses both) */
    wait_learnt(e.base, qs[0], qs[1]);
    ASSERT_EQ(3, rjq_queue_count_shards(qs[1]));
    ASSERT(strstr(rjq_client_get_errmsg(wc), "sharded") != NULL);
    /* a round trip on the worker's client after the layouts: nothing ran */
    ASSERT_EQ(1, get_stats(e.base, qs[0]).ready);
    ASSERT_EQ(0, rjq_worker_count_running(w));
    server_assert_only_declaration(e.rc, "sgw");
    stop_wait s = {0};
    ASSERT_OK(rjq_worker_stop(w, on_stop_wait, &s));
    ASSERT(loop_until(e.base, &s.done, 20000));
    ASSERT_OK(s.status);
    loop_turn(e.base);
    ASSERT_EQ(1, s.done);
    ASSERT_OK(rjq_queue_close(qs[0]));
    ASSERT_OK(rjq_queue_close(qs[1]));
    server_assert_only_declaration(e.rc, "sgw");
    rjq_client_free(wc);
    env_stop(&e);
}

/* Two plain queues opened with rjq_queue_open and a worker of both made at
 * once (strict order): held until both layouts are read, then started;
 * the jobs of both run once each. */
TEST(start_queues_right_after_open_of_plain_queues_runs_both) {
    test_env e;
    env_start(&e, NULL);
    rjq_client_options o = client_options(e.s.url);
    rjq_client *wc = client_new(e.base, &o);
    rjq_queue *qs[2];
    ASSERT_OK(rjq_queue_open(wc, "sga1", NULL, &qs[0]));
    ASSERT_OK(rjq_queue_open(wc, "sga2", NULL, &qs[1]));
    static runs r;
    memset(&r, 0, sizeof r);
    rjq_worker_options wo = quiet_worker_options(2);
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start_queues(qs, 2, RJQ_WORKER_STRICT, NULL, &wo, count_handler, &r, &w));
    enqueue_wait ew = {0};
    for (int i = 0; i < 4; i++) {
        char p[8];
        snprintf(p, sizeof p, "p-%d", i);
        ASSERT_OK(rjq_enqueue(qs[i % 2], p, strlen(p), NULL, on_enqueue_wait, &ew));
    }
    ASSERT(loop_until_count(e.base, &r.done, 4, 20000));
    for (int i = 0; i < 4; i++) ASSERT_EQ(1, r.seen[i]);
    worker_stop_wait(e.base, w);
    rjq_client_free(wc);
    env_stop(&e);
}

typedef struct awaited {
    int done, status;
    char id[64];
} awaited;

static void on_awaited(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    awaited *a = data;
    (void)c;
    a->done++;
    a->status = status;
    if (o && o->id) snprintf(a->id, sizeof a->id, "%s", o->id);
}

static void complete_handler(rjq_job *job, void *data) {
    ASSERT_OK(rjq_job_complete(job, "r", 1, on_done_ok, data));
}

/* Awaits with an out handle made at once on an rjq_queue_open handle of a
 * 3-shard queue: each routed to its id's shard once the layout is read
 * and answered once; one cancelled before the read ends at once and its
 * job is still enqueued (on its shard); an all-digit id ends
 * RJQ_ESHARDED. Nothing under the unsharded tag. */
TEST(awaits_with_out_right_after_open_are_routed_to_their_shards) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *decl = open_learnt(e.base, e.c, "sgq");
    ASSERT_OK(declare_shards(e.base, decl, 3));
    enqueue_x_ok(e.base, decl, "job-b", 0, 0); /* (on its shard) */

    rjq_client_options o = client_options(e.s.url);
    rjq_client *p = client_new(e.base, &o);
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(p, "sgq", NULL, &q));
    awaited a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0};
    rjq_await *h1 = NULL, *h2 = NULL, *h3 = NULL, *h4 = NULL;
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.id = "job-a";
    ASSERT_OK(rjq_enqueue_await(q, "x", 1, &jo, NULL, on_awaited, &a1, &h1));
    ASSERT_OK(rjq_queue_await(q, "job-b", NULL, on_awaited, &a2, &h2));
    rjq_job_options jc = RJQ_JOB_OPTIONS_INIT;
    jc.id = "job-c";
    ASSERT_OK(rjq_enqueue_await(q, "y", 1, &jc, NULL, on_awaited, &a3, &h3));
    ASSERT_OK(rjq_queue_await(q, "42", NULL, on_awaited, &a4, &h4));
    ASSERT(h1 && h2 && h3 && h4);
    ASSERT_EQ(4, (long)rjq_client_count_awaits(p));
    ASSERT_OK(rjq_await_cancel(h3));
    ASSERT_EQ(1, a3.done);
    ASSERT_EQ(RJQ_ECANCELED, a3.status);
    ASSERT(rjq__queue_learning(q));

    ASSERT(loop_until(e.base, &a4.done, 20000));
    ASSERT_EQ(RJQ_ESHARDED, a4.status);
    /* the cancelled await's job is enqueued, on its shard */
    rjq_client *wc = client_new(e.base, &o);
    rjq_queue *wq = open_learnt(e.base, wc, "sgq");
    long done = 0;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(wq, NULL, complete_handler, &done, &w));
    ASSERT(loop_until(e.base, &a1.done, 30000));
    ASSERT(loop_until(e.base, &a2.done, 30000));
    ASSERT_OK(a1.status);
    ASSERT_STREQ("job-a", a1.id);
    ASSERT_OK(a2.status);
    ASSERT_STREQ("job-b", a2.id);
    ASSERT(loop_until_count(e.base, &done, 3, 30000));
    ASSERT(shard_holding(e.base, decl, "job-a") >= 0);
    ASSERT(shard_holding(e.base, decl, "job-c") >= 0);
    loop_turn(e.base);
    ASSERT_EQ(1, a1.done);
    ASSERT_EQ(1, a2.done);
    ASSERT_EQ(1, a3.done);
    ASSERT_EQ(1, a4.done);
    ASSERT_EQ(0, (long)rjq_client_count_awaits(p));
    server_assert_only_declaration(e.rc, "sgq");
    worker_stop_wait(e.base, w);
    rjq_client_free(wc);
    rjq_client_free(p);
    env_stop(&e);
}

/* Held awaits with out handles end once each: with the read's error when
 * the declaration cannot be read, with RJQ_ECANCELED when the client goes
 * during the read (a held start_queues worker too, its stop callback). */
TEST(awaits_with_out_and_start_queues_held_end_once_on_failure_or_free) {
    test_env e;
    env_start(&e, NULL);
    redisReply *r = server_cmd(e.rc, "SET t:{sgbad}:shards %s", "rjq-shards 1 3 a b");
    freeReplyObject(r);
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(e.c, "sgbad", NULL, &q));
    awaited a1 = {0}, a2 = {0};
    rjq_await *h1 = NULL, *h2 = NULL;
    ASSERT_OK(rjq_enqueue_await(q, "x", 1, NULL, NULL, on_awaited, &a1, &h1));
    ASSERT_OK(rjq_queue_await(q, "id-1", NULL, on_awaited, &a2, &h2));
    ASSERT(loop_until(e.base, &a1.done, 20000));
    ASSERT(loop_until(e.base, &a2.done, 20000));
    ASSERT_EQ(RJQ_EPROTO, a1.status);
    ASSERT_EQ(RJQ_EPROTO, a2.status);
    loop_turn(e.base);
    ASSERT_EQ(1, a1.done);
    ASSERT_EQ(1, a2.done);
    r = server_cmd(e.rc, "KEYS t:{sgbad}:*");
    ASSERT_EQ(1, (long)r->elements);
    freeReplyObject(r);

    rjq_client_options o = client_options(e.s.url);
    rjq_client *c = client_new(e.base, &o);
    rjq_queue *qs[2];
    ASSERT_OK(rjq_queue_open(c, "sgf1", NULL, &qs[0]));
    ASSERT_OK(rjq_queue_open(c, "sgf2", NULL, &qs[1]));
    awaited b1 = {0}, b2 = {0};
    rjq_await *g1 = NULL, *g2 = NULL;
    ASSERT_OK(rjq_enqueue_await(qs[0], "x", 1, NULL, NULL, on_awaited, &b1, &g1));
    ASSERT_OK(rjq_queue_await(qs[1], "id-2", NULL, on_awaited, &b2, &g2));
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start_queues(qs, 2, RJQ_WORKER_STRICT, NULL, NULL, never_runs, NULL, &w));
    stop_wait s = {0};
    ASSERT_OK(rjq_worker_stop(w, on_stop_wait, &s));
    rjq_client_free(c);
    ASSERT_EQ(1, b1.done);
    ASSERT_EQ(RJQ_ECANCELED, b1.status);
    ASSERT_EQ(1, b2.done);
    ASSERT_EQ(RJQ_ECANCELED, b2.status);
    ASSERT_EQ(1, s.done);
    ASSERT_EQ(RJQ_ECANCELED, s.status);
    ASSERT_OK(rjq_queue_close(q));
    env_stop(&e);
}
