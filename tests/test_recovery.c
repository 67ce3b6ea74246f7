/*
 * Recovery without waiting for leases (issue 13): a claim reply lost to a
 * killed connection, a push message lost with the subscriber connection,
 * a worker's client that died holding jobs with a long lease. The jobs run
 * promptly, and no attempt is spent by a lost reply or message. The held
 * index that makes this possible is left empty by finished work.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "core.h" /* white-box: rjq__channel_confirmed */
#include "worker_private.h" /* white-box: a registration's pushes lost */
#include "fixture.h"
#include "harness.h"
#include "proxy.h"
#include "server.h"
#include "waits.h"
#include "rjq_scripts.h"

/* Jobs a handler got: their attempts, and whether to finish them. */
typedef struct runs {
    long ran;
    int attempt_max;
    int keep;                 /* hold the jobs (never finish them) */
    rjq_job *held[64];
    long nheld;
    long done;
    struct starts *starts;    /* (on_job_start's, when set) */
} runs;

static void on_run(rjq_job *job, void *data) {
    runs *r = data;
    r->ran++;
    if (rjq_job_get_attempt(job) > r->attempt_max) r->attempt_max = rjq_job_get_attempt(job);
    if (r->keep && r->nheld < 64) {
        r->held[r->nheld++] = job;
        return;
    }
    ASSERT_OK(rjq_job_complete(job, "ok", 2, on_done_ok, &r->done));
}

static void on_stopped(rjq_worker *w, int status, void *data) {
    (void)w;
    ASSERT_OK(status);
    *(int *)data = 1;
}

/* on_job_start: the starts the handler's jobs got, and the last one's
 * wait_ms. */
typedef struct starts {
    long n;
    long long wait_ms;
    long unknown;             /* starts with wait_ms -1 */
} starts;

static void note_start(rjq_job *job, long long wait_ms, void *data) {
    (void)job;
    starts *s = ((runs *)data)->starts;
    s->n++;
    s->wait_ms = wait_ms;
    if (wait_ms < 0) s->unknown++;
}

/* Worker options of the given concurrency whose on_job_start notes into st
 * (wait_ms -2 until a start) for a handler on_run running into r (both
 * cleared first). */
static rjq_worker_options noting_starts(runs *r, starts *st, int concurrency) {
    *st = (starts){0, -2, 0};
    *r = (runs){0};
    r->starts = st;
    rjq_worker_options wo = quiet_worker_options(concurrency);
    wo.on_job_start = note_start;
    return wo;
}

static void enqueue_n(test_env *e, rjq_queue *q, int n) {
    for (int i = 0; i < n; i++) ASSERT_OK(rjq_enqueue(q, "x", 1, NULL, NULL, NULL));
    (void)get_stats(e->base, q); /* a round trip: they ran */
}

/* The client's command (or subscriber) connection through the proxy is
 * gone. */
static int pairs_open(const proxy *p, int sub) {
    int open = 0;
    for (int k = 0; k < PROXY_PAIRS; k++)
        if (p->pairs[k].cli && p->pairs[k].is_sub == sub) open++;
    return open;
}

static void wait_pair_closed(test_env *e, proxy *p, int sub) {
    WAIT_FOR(e->base, pairs_open(p, sub) == 0, 5000);
}

/* 1 when every registration in queue's idle hash names a push channel
 * that Redis has a subscriber on. (A worker's first claim may register
 * before its subscriber connection has subscribed; a push to a channel
 * without one drops the registration, and the job waits for a claim.) */
static int registrations_subscribed(test_env *e, const char *queue) {
    redisReply *r = server_cmd(e->rc, "HKEYS t:{%s}:idle", queue);
    int ok = r->type == REDIS_REPLY_ARRAY;
    for (size_t i = 0; ok && i < r->elements; i++) {
        const char *ch = strchr(r->element[i]->str, ' ');
        ok = ch != NULL && server_numsub(e->rc, ch + 1) >= 1;
    }
    freeReplyObject(r);
    return ok;
}

/* Run the loop until queue has n registrations for pushes (idle workers)
 * whose push channels are subscribed. */
static void wait_registered(test_env *e, const char *queue, long long n) {
    WAIT_FOR(e->base,
             server_int(e->rc, "HLEN t:{%s}:idle", queue) >= n && registrations_subscribed(e, queue),
             5000);
    ASSERT_EQ(n, server_int(e->rc, "HLEN t:{%s}:idle", queue));
    ASSERT(registrations_subscribed(e, queue));
    wait_worker_started(e->base, e->c, e->q, e->rc, queue);
    ASSERT_EQ(n, server_int(e->rc, "HLEN t:{%s}:idle", queue));
}

/* Run the loop until queue has n jobs active (claimed or pushed in Redis). */
static void wait_active(test_env *e, const char *queue, long long n) {
    WAIT_FOR(e->base, server_active_jobs(e->rc, queue) >= n, 5000);
    ASSERT_EQ(n, server_active_jobs(e->rc, queue));
}

/* Kill the client's proxied connections of one kind (sub: the subscriber
 * connection) from the server side, wait until the proxy closed them, and
 * stop holding what Redis sends on them. */
static void kill_held(test_env *e, proxy *p, int sub) {
    freeReplyObject(server_cmd(e->rc, "CLIENT KILL TYPE %s SKIPME yes", sub ? "pubsub" : "normal"));
    wait_pair_closed(e, p, sub);
    if (sub) proxy_hold_sub(p, 0);
    else proxy_hold(p, 0);
}

/* A first worker (options wo, handler on_run into r) registers for pushes
 * on queue and stops: the queue's push channel is subscribed, so that the
 * worker started next has nothing to recover (only a claim's re-send can
 * bring its jobs back). */
static void stop_a_first_worker(test_env *e, const char *queue, const rjq_worker_options *wo,
                                runs *r) {
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(e->q, wo, on_run, r, &w));
    wait_registered(e, queue, 1);
    int stopped = 0;
    ASSERT_OK(rjq_worker_stop(w, on_stopped, &stopped));
    ASSERT(loop_until(e->base, &stopped, 20000));
}

/* Start a worker (options wo, handler on_run into r) whose first claim
 * takes the n jobs of queue in Redis while its reply is held by the proxy
 * and then lost with the connection (CLIENT KILL): the claim is re-sent. */
static void start_with_claim_reply_lost(test_env *e, proxy *p, const char *queue, long long n,
                                        const rjq_worker_options *wo, runs *r) {
    rjq_worker *w = NULL;
    proxy_hold(p, 1);
    ASSERT_OK(rjq_worker_start(e->q, wo, on_run, r, &w));
    wait_active(e, queue, n);
    ASSERT_EQ(0, r->ran); /* the reply is held */
    kill_held(e, p, 0);
}

static long long state_attempts(test_env *e, const char *queue, long long id) {
    redisReply *r = server_cmd(e->rc, "HGET t:{%s}:state %lld", queue, id);
    long long a = -1;
    if (r->type == REDIS_REPLY_STRING) sscanf(r->str, "%*s %lld", &a);
    freeReplyObject(r);
    return a;
}

/* A claim ran in Redis; its reply was held by the proxy and lost with the
 * connection (CLIENT KILL). The claim is re-sent on the new connection and,
 * by its token, returns the jobs its first run started: they run at once,
 * with the attempt they were claimed with and the wait that run gave them
 * (on_job_start; it was -1). (Without it they sat in active
 * under a token nobody held until the lease ended, and the reclaim spent
 * an attempt.) */
TEST(claim_whose_reply_was_lost_runs_its_jobs_with_their_attempt) {
    test_env e;
    proxy p;
    env_start_proxied(&e, &p, "lostclaim", NULL);
    /* A first worker makes the queue's push channel subscribed, so that the
     * worker under test starts with nothing to recover: only the claim's
     * re-send can bring its jobs back. */
    starts st;
    runs r;
    rjq_worker_options wo = noting_starts(&r, &st, 5);
    stop_a_first_worker(&e, "lostclaim", &wo, &r);
    enqueue_n(&e, e.q, 5);

    start_with_claim_reply_lost(&e, &p, "lostclaim", 5, &wo, &r);

    ASSERT(loop_until_count(e.base, &r.done, 5, 5000));
    ASSERT_EQ(5, r.ran);
    ASSERT_EQ(1, r.attempt_max);
    ASSERT_EQ(5, st.n);
    ASSERT_EQ(0, st.unknown); /* their waits, from the first run */
    for (long long id = 1; id <= 5; id++) ASSERT_EQ(1, state_attempts(&e, "lostclaim", id));
    ASSERT_EQ(0, server_held_members(e.rc, "lostclaim"));

    env_stop_proxied(&e, &p);
}

/* The notices of jobs "a" and "b" (by their id's letter). */
static int notice_of[2];
static long notices_seen;

static void on_done_any(rjq_client *c, int status, void *data) {
    (void)c, (void)status;
    (*(long *)data)++;
}

static void note_notice(rjq_job *job, int reason, void *data) {
    (void)data;
    notice_of[rjq_job_get_id(job)[0] == 'b'] = reason;
    notices_seen++;
}

/* Regression: a claim re-sent after its reply was lost returns its jobs
 * with the lease's end its first run gave them, not a lease end capped by
 * one of its jobs' run time (b's, 1 s into a 6 s lease), which the worker
 * took for a claim made 5 s earlier: a, whose run time is 5.5 s, was then
 * handed back as stale, or, when its lease was lost (another worker
 * finished it), its holder's extension said "timed out" (RJQ_ETIMEDOUT
 * notice) instead of "lease lost" (no notice). b's run time is over: the
 * extension tells its holder so. */
TEST(resent_claim_returns_its_lease_end_uncapped_so_a_lost_lease_is_not_told_as_a_timeout) {
    test_env e;
    proxy p;
    env_start_proxied(&e, &p, "capped", NULL);
    /* nothing to recover for the worker under test (see the test above) */
    runs r = {0};
    r.keep = 1;
    rjq_worker_options wo = quiet_worker_options(2);
    stop_a_first_worker(&e, "capped", &wo, &r);
    rjq_job_options oa = RJQ_JOB_OPTIONS_INIT, ob = RJQ_JOB_OPTIONS_INIT;
    oa.id = "a";
    oa.timeout_ms = 5500;
    oa.max_attempts = 1;
    ob.id = "b";
    ob.timeout_ms = 1000;
    ob.max_attempts = 1;
    ASSERT_OK(rjq_enqueue(e.q, "x", 1, &oa, NULL, NULL));
    ASSERT_OK(rjq_enqueue(e.q, "x", 1, &ob, NULL, NULL));
    (void)get_stats(e.base, e.q);

    wo.lease_ms = 6000; /* extended every 2 s; nothing sweeps */
    wo.on_notice = note_notice;
    memset(notice_of, 0, sizeof notice_of);
    notices_seen = 0;
    start_with_claim_reply_lost(&e, &p, "capped", 2, &wo, &r);
    ASSERT(loop_until_count(e.base, &r.ran, 2, 5000)); /* the re-send brought both */
    ASSERT_EQ(2, r.nheld);
    rjq_job *a = strcmp(rjq_job_get_id(r.held[0]), "a") == 0 ? r.held[0] : r.held[1];
    rjq_job *b = a == r.held[0] ? r.held[1] : r.held[0];
    ASSERT_STREQ("b", rjq_job_get_id(b));

    /* a's lease is lost: another worker finished it */
    freeReplyObject(server_cmd(e.rc, "ZREM t:{capped}:active a"));
    freeReplyObject(server_cmd(e.rc, "HSET t:{capped}:state a %s", "completed 1 zz.9.other"));
    /* b's run time ends: an extension tells its holder (no sweep runs) */
    ASSERT(loop_until_count(e.base, &notices_seen, 1, 8000));
    ASSERT_EQ(RJQ_ETIMEDOUT, notice_of[1]);
    (void)get_stats(e.base, e.q); /* the rest of that extension's reply is handled */
    ASSERT_EQ(0, notice_of[0]); /* a: lease lost, its run time not over */
    ASSERT_EQ(0, rjq_job_get_notice(a));
    ASSERT_EQ(1, notices_seen);

    long finished = 0;
    ASSERT_OK(rjq_job_complete(a, "", 0, on_done_any, &finished));
    ASSERT_OK(rjq_job_complete(b, "", 0, on_done_any, &finished));
    ASSERT(loop_until_count(e.base, &finished, 2, 5000));
    env_stop_proxied(&e, &p);
}

/* A job pushed to an idle worker whose message was lost with the
 * subscriber connection: the worker's next claim after resubscribing
 * recovers it (it runs with its attempt unchanged, and on_job_start gets
 * the push's wait), instead of it waiting out its lease. */
TEST(push_lost_with_the_subscriber_connection_is_recovered) {
    test_env e;
    proxy p;
    env_start_proxied(&e, &p, "lostpush", NULL);
    starts st;
    runs r;
    rjq_worker_options wo = noting_starts(&r, &st, 2);
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(e.q, &wo, on_run, &r, &w));
    wait_registered(&e, "lostpush", 1); /* idle and registered for pushes */

    proxy_hold_sub(&p, 1);
    ASSERT_OK(rjq_enqueue(e.q, "x", 1, NULL, NULL, NULL));
    wait_active(&e, "lostpush", 1); /* pushed: claimed for the worker */
    ASSERT_EQ(0, r.ran);
    /* a push writes no member of the held index: the recovering claim
     * finds the job by its state (a scan of active) */
    ASSERT_EQ(0, server_held_members(e.rc, "lostpush"));
    kill_held(&e, &p, 1);

    ASSERT(loop_until_count(e.base, &r.done, 1, 5000));
    ASSERT_EQ(1, r.ran);
    ASSERT_EQ(1, r.attempt_max);
    ASSERT_EQ(1, state_attempts(&e, "lostpush", 1));
    ASSERT_EQ(1, st.n);
    ASSERT(st.wait_ms >= 0); /* the lost push's, kept */
    /* its member of the held index goes (with the completion, or a forget) */
    WAIT_FOR(e.base, server_held_members(e.rc, "lostpush") == 0, 5000);
    ASSERT_EQ(0, server_held_members(e.rc, "lostpush"));

    env_stop_proxied(&e, &p);
}

/* A job pushed at enqueue to an idle worker while the worker's recovering
 * claim is on its way (as after a worker's start, when the confirmation of
 * its push channel's subscription arrives after its first claim registered
 * its slots: pushes may have been lost, the next claim recovers). The
 * order is made: the enqueue goes ahead of the recovering claim on the
 * client's command connection, and the push message is held by the proxy
 * until the claim's reply is in. The claim takes the pushed job over under
 * its own token (the worker had not heard of the push); the push message
 * then arrives and is left alone (its epoch is older than the recovering
 * claim's). The job runs once, under the claim's token, its completion is
 * accepted, its attempt is spent once, and its wait is the push's (the
 * claim reply used to give -1: the wait was missing from on_job_start and
 * the history). */
TEST(job_pushed_while_a_recovering_claim_is_in_flight_runs_once_with_its_wait) {
    test_env e;
    proxy p;
    env_start_proxied(&e, &p, "pushwait", NULL);
    starts st;
    runs r;
    rjq_worker_options wo = noting_starts(&r, &st, 2);
    rjq_worker *w = NULL;
    proxy_hold_sub(&p, 1); /* the subscription's confirmation waits */
    ASSERT_OK(rjq_worker_start(e.q, &wo, on_run, &r, &w));
    /* the first claim registered the worker's slots; Redis has the
     * subscriber (its confirmation is held) */
    WAIT_FOR(e.base,
             server_int(e.rc, "HLEN t:{pushwait}:idle") >= 1 && registrations_subscribed(&e, "pushwait"),
             5000);
    long long claims = server_script_calls(e.rc);
    ASSERT_OK(rjq_enqueue(e.q, "x", 1, NULL, NULL, NULL));
    /* (white-box) what the confirmation does to the registration, now:
     * its next claim recovers; it is sent after the enqueue */
    rjq__reg_lost(w->reg);
    rjq__w_poke(w);
    ASSERT(loop_until_count(e.base, &r.done, 1, 5000)); /* (on_done_ok: accepted) */
    ASSERT(server_script_calls(e.rc) >= claims + 2); /* the enqueue, the claim */
    ASSERT_EQ(1, r.ran);
    ASSERT_EQ(1, st.n);
    ASSERT_EQ(1, r.attempt_max);
    ASSERT(st.wait_ms >= 0);
    ASSERT_EQ(1, state_attempts(&e, "pushwait", 1));

    proxy_hold_sub(&p, 0); /* the confirmation, then the push message: run nothing */
    wait_worker_started(e.base, e.c, e.q, e.rc, "pushwait"); /* the claims settled */
    ASSERT_EQ(1, r.ran);
    ASSERT_EQ(1, st.n);
    ASSERT_EQ(0, server_active_jobs(e.rc, "pushwait"));
    ASSERT_EQ(1, state_attempts(&e, "pushwait", 1));
    WAIT_FOR(e.base, server_held_members(e.rc, "pushwait") == 0, 5000);
    ASSERT_EQ(0, server_held_members(e.rc, "pushwait"));
    env_stop_proxied(&e, &p);
}

static void on_outcome_count(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)c, (void)o;
    ASSERT_OK(status);
    (*(long *)data)++;
}

/* A probe channel's listener (white-box): at its confirmation, which
 * arrives right behind the worker's push channel's, whether the worker's
 * next claim would recover. */
typedef struct probe {
    rjq_worker *w;
    int confirmed;
    int recovers;
} probe;

static void on_probe(rjq_client *c, const char *ch, const char *msg, size_t len, void *arg) {
    probe *pr = arg;
    (void)c, (void)ch, (void)len;
    if (msg != NULL || pr->confirmed++) return;
    pr->recovers = rjq__reg_claim_recovers(pr->w->reg, 1);
}

/* The reply channels (of awaits) Redis has subscribers on. */
static size_t reply_channels(test_env *e) {
    redisReply *r = server_cmd(e->rc, "PUBSUB CHANNELS *reply*");
    size_t n = r->type == REDIS_REPLY_ARRAY ? r->elements : 0;
    freeReplyObject(r);
    return n;
}

/* A worker starts and a producer awaits a job at once (examples/traces.c):
 * the worker's first claim registers its slots before its push channel's
 * subscription is confirmed, and the await's enqueue goes out when its
 * reply channel's confirmation arrives, right behind the push channel's.
 * The job is pushed to the worker. The push channel's first confirmation
 * tells of nothing missed (no push to it can have been made before its
 * subscription reached Redis: a push needs a subscriber), so the claim it
 * makes the worker send replaces the registration without recovering (no
 * scan of active; it leaves the pushed job alone). The job runs once, in
 * its first attempt, with its wait. (Every confirmation used to make the
 * next claim recover: sent right behind the enqueue, it took the job over
 * under its own token before the worker read the push.) */
TEST(first_subscription_of_a_push_channel_makes_no_recovering_claim) {
    test_env e;
    proxy p;
    env_start_proxied(&e, &p, "firstsub", NULL);
    starts st;
    runs r;
    rjq_worker_options wo = noting_starts(&r, &st, 2);
    rjq_worker *w = NULL;
    proxy_hold_sub(&p, 1); /* the confirmations wait */
    ASSERT_OK(rjq_worker_start(e.q, &wo, on_run, &r, &w));
    probe pr = {w, 0, -1};
    ASSERT_OK(rjq__subscribe(e.c, "t:{firstsub}:probe", on_probe, &pr));
    WAIT_FOR(e.base,
             server_int(e.rc, "HLEN t:{firstsub}:idle") >= 1 && registrations_subscribed(&e, "firstsub") &&
                 server_numsub(e.rc, "t:{firstsub}:probe") == 1,
             5000);
    long outcomes = 0;
    ASSERT_OK(rjq_enqueue_await(e.q, "x", 1, NULL, NULL, on_outcome_count, &outcomes, NULL));
    /* its reply channel subscribed in Redis (the confirmation held) */
    WAIT_FOR(e.base, reply_channels(&e) >= 1, 5000);
    ASSERT_EQ(0, server_active_jobs(e.rc, "firstsub"));
    proxy_hold_sub(&p, 0);

    ASSERT(loop_until_count(e.base, &outcomes, 1, 5000));
    ASSERT(loop_until_count(e.base, &r.done, 1, 5000)); /* (on_done_ok: accepted) */
    ASSERT_EQ(1, pr.confirmed);
    ASSERT_EQ(0, pr.recovers); /* (it was 1) */
    ASSERT_EQ(1, r.ran);
    ASSERT_EQ(1, st.n);
    /* (under its push's token, unless the claim the confirmation made
     * held the worker's slots when the push arrived: then it was handed
     * back and claimed again, its attempt undone, its wait kept) */
    ASSERT(st.wait_ms >= 0);
    ASSERT_EQ(1, state_attempts(&e, "firstsub", 1));
    env_stop_proxied(&e, &p);
}

/* A job pushed to an idle worker whose message is still on the way (held
 * by the proxy) when the worker is stopped, and then lost with the
 * subscriber connection: the stop's last, recovering claim has handed it
 * back (attempt undone), so another worker runs it at once instead of
 * after its lease. */
TEST(push_unheard_by_a_stopped_worker_goes_back_at_once) {
    test_env e;
    proxy p;
    env_start_proxied(&e, &p, "stoppush", NULL);
    runs r = {0};
    rjq_worker_options wo = quiet_worker_options(2);
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(e.q, &wo, on_run, &r, &w));
    wait_registered(&e, "stoppush", 1);

    proxy_hold_sub(&p, 1);
    ASSERT_OK(rjq_enqueue(e.q, "x", 1, NULL, NULL, NULL));
    wait_active(&e, "stoppush", 1); /* pushed: the message waits in the proxy */
    int stopped = 0;
    ASSERT_OK(rjq_worker_stop(w, on_stopped, &stopped));
    ASSERT(loop_until(e.base, &stopped, 5000));
    ASSERT_EQ(0, server_active_jobs(e.rc, "stoppush")); /* handed back */
    kill_held(&e, &p, 1); /* the message is lost */

    ASSERT_OK(rjq_worker_start(e.q, &wo, on_run, &r, &w));
    ASSERT(loop_until_count(e.base, &r.done, 1, 5000));
    ASSERT_EQ(1, r.ran);
    ASSERT_EQ(1, r.attempt_max);
    /* its member of the held index goes (with the completion, or a forget) */
    WAIT_FOR(e.base, server_held_members(e.rc, "stoppush") == 0, 5000);
    ASSERT_EQ(0, server_held_members(e.rc, "stoppush"));
    env_stop_proxied(&e, &p);
}

/* The client options of a client that dies: its liveness entry runs out
 * 1 s after its last beat. */
static rjq_client_options dying_client_options(test_env *e) {
    rjq_client_options o = client_options(e->s.url);
    o.liveness_ms = 1000;
    return o;
}

/* The worker options of the jobs held there: 3 at a time, five-minute lease. */
static rjq_worker_options long_lease_worker_options(void) {
    rjq_worker_options wo = quiet_worker_options(3);
    wo.lease_ms = 300000;
    return wo;
}

/* A client of its own (dying_client_options) with a worker on queue q
 * holding the jobs it runs (ra: keep) under a five-minute lease, started
 * and idle: enqueues push to it. The client, to free as a death. */
static rjq_client *dying_pushed_worker(test_env *e, const char *q, runs *ra) {
    rjq_client_options o = dying_client_options(e);
    rjq_client *a = client_new(e->base, &o);
    rjq_queue *qa = queue_for(a, q);
    wait_connected(e->base, a);
    rjq_worker_options wo = long_lease_worker_options();
    rjq_worker *wa = NULL;
    ASSERT_OK(rjq_worker_start(qa, &wo, on_run, ra, &wa));
    wait_worker_started(e->base, a, qa, e->rc, q);
    return a;
}

/* Client a (dying_pushed_worker's, its jobs held in ra) dies: freed, its
 * jobs stay active under its tokens. Another such client's worker on q
 * runs what it finds (rb). That client, to free. */
static rjq_client *after_its_death(test_env *e, rjq_client *a, const char *q, runs *ra, runs *rb) {
    rjq_client_free(a);
    for (long i = 0; i < ra->nheld; i++) rjq_job_fail(ra->held[i], "x", 0, -1, NULL, NULL);
    rjq_client_options o = dying_client_options(e);
    rjq_client *b = client_new(e->base, &o);
    rjq_queue *qb = queue_for(b, q);
    rjq_worker_options wo = long_lease_worker_options();
    rjq_worker *wb = NULL;
    ASSERT_OK(rjq_worker_start(qb, &wo, on_run, rb, &wb));
    return b;
}

/* Jobs pushed to an idle worker (no member of the held index: a push
 * writes none) whose client then dies: the orphan sweep finds them by
 * their states (a scan of active) and they run elsewhere at once, not
 * after their five-minute lease. */
TEST(pushed_jobs_of_a_dead_client_are_found_by_their_state_and_run_elsewhere) {
    test_env e;
    env_start(&e, "orphanpush");
    runs ra = {.keep = 1};
    rjq_client *a = dying_pushed_worker(&e, "orphanpush", &ra); /* idle: enqueues push to it */
    ASSERT_EQ(1, server_int(e.rc, "HLEN t:{orphanpush}:idle"));
    enqueue_n(&e, e.q, 3);
    ASSERT(loop_until_count(e.base, &ra.ran, 3, 5000));
    ASSERT_EQ(0, server_held_members(e.rc, "orphanpush")); /* pushed: no member */
    ASSERT_EQ(3, server_active_jobs(e.rc, "orphanpush"));
    WAIT_FOR(e.base, server_int(e.rc, "ZCARD t:{clients}:live") > 0, 5000);
    runs rb = {0};
    rjq_client *b = after_its_death(&e, a, "orphanpush", &ra, &rb);
    ASSERT(loop_until_count(e.base, &rb.done, 3, 10000)); /* (their lease: 300 s) */
    ASSERT_EQ(2, rb.attempt_max); /* the dead client's run counts */
    rjq_stats st = get_stats(e.base, e.q);
    ASSERT_EQ(3, st.reclaimed);
    WAIT_FOR(e.base, server_int(e.rc, "ZCARD t:{clients}:live") == 1, 5000);
    ASSERT_EQ(0, server_active_jobs(e.rc, "orphanpush"));
    ASSERT_EQ(0, server_held_members(e.rc, "orphanpush"));
    rjq_client_free(b);
    env_stop(&e);
}

static void on_format(rjq_client *c, int status, long long n, void *data) {
    (void)c, (void)n;
    ASSERT_OK(status);
    (*(long *)data)++;
}

static void on_told(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)c, (void)o;
    ASSERT_OK(status);
    (*(long *)data)++;
}

/* e's queue (named q) set to format 2; its producer learns the format with
 * its first enqueue (a job for later). */
static void set_format_2_known(test_env *e, const char *q) {
    long set = 0;
    ASSERT_OK(rjq_queue_set_format(e->q, 2, on_format, &set));
    ASSERT(loop_until_count(e->base, &set, 1, 5000));
    rjq_job_options later = RJQ_JOB_OPTIONS_INIT;
    later.delay_ms = 3600000;
    ASSERT_OK(rjq_enqueue(e->q, "later", 5, &later, NULL, NULL));
    ASSERT(loop_until_server_int(e->base, e->rc, 1, 5000, "ZCARD t:{%s}:delayed", q));
}

/* The same on a queue of format 2 (docs/scripts.md "Queue format 2"),
 * with awaited jobs: their reply channels are in their states when their
 * client dies; the orphan sweep moves them to the watchers column
 * (orphans.lua, channels_out) before it writes the states, so the
 * completions elsewhere tell the producer. */
TEST(awaited_pushed_jobs_of_a_dead_client_on_a_format_2_queue_still_tell_their_producer) {
    test_env e;
    env_start(&e, "orphanf2");
    long told = 0;
    set_format_2_known(&e, "orphanf2");
    runs ra = {.keep = 1};
    rjq_client *a = dying_pushed_worker(&e, "orphanf2", &ra); /* idle: enqueues push to it */
    for (int i = 0; i < 2; i++) { /* (one a loop turn: the lean enqueue takes a batch of one) */
        ASSERT_OK(rjq_enqueue_await(e.q, "x", 1, NULL, NULL, on_told, &told, NULL));
        ASSERT(loop_until_count(e.base, &ra.ran, i + 1, 5000));
    }
    /* their channels are in their states, none in the watchers column */
    redisReply *r = server_cmd(e.rc, "HVALS t:{orphanf2}:state");
    ASSERT(r->type == REDIS_REPLY_ARRAY);
    int in_state = 0;
    for (size_t i = 0; i < r->elements; i++) in_state += strstr(r->element[i]->str, ":reply:") != NULL;
    freeReplyObject(r);
    ASSERT_EQ(2, in_state);
    ASSERT(server_int(e.rc, "HLEN t:{orphanf2}:watchers") <= 1); /* (its pin at most) */
    WAIT_FOR(e.base, server_int(e.rc, "ZCARD t:{clients}:live") > 0, 5000);
    runs rb = {0};
    rjq_client *b = after_its_death(&e, a, "orphanf2", &ra, &rb);
    ASSERT(loop_until_count(e.base, &rb.done, 2, 10000)); /* (their lease: 300 s) */
    ASSERT(loop_until_count(e.base, &told, 2, 5000));
    rjq_client_free(b);
    env_stop(&e);
}

/* Connection events of the client whose subscriber connection is killed:
 * its subscriber connection's drops. */
static void count_sub_drops(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    (void)c, (void)detail;
    if (ev == RJQ_EVENT_DISCONNECTED && conn == RJQ_CONN_SUBSCRIBER) (*(long *)data)++;
}

/* A worker of `slots` slots on queue q, on its own client named name,
 * whose subscriber connection is then killed (CLIENT KILL) while its client
 * waits a minute before reconnecting: its registration is left in idle (its
 * field and value copied out), its channel without a subscriber. Its runs
 * count in *ra; free *client at the end. */
static void start_deaf_worker(test_env *e, const char *q, const char *name, int slots, runs *ra,
                              rjq_client **client, char *field, size_t fsize, char *value, size_t vsize) {
    static long drops;
    drops = 0;
    rjq_client_options o = client_options(e->s.url);
    o.name = name;
    o.reconnect_min_ms = 60000;
    o.reconnect_max_ms = 60000;
    o.on_event = count_sub_drops;
    o.event_data = &drops;
    rjq_client *a = client_new(e->base, &o);
    rjq_queue *qa = queue_for(a, q);
    wait_connected(e->base, a);
    rjq_worker_options wo = quiet_worker_options(slots);
    rjq_worker *wa = NULL;
    ASSERT_OK(rjq_worker_start(qa, &wo, on_run, ra, &wa));
    wait_worker_started(e->base, a, qa, e->rc, q);
    ASSERT_EQ(1, server_int(e->rc, "HLEN t:{%s}:idle", q));

    char sub_name[96];
    snprintf(sub_name, sizeof sub_name, "%s:sub", name);
    long long sub = client_id_named(e->rc, sub_name);
    ASSERT(sub > 0);
    ASSERT_EQ(1, server_int(e->rc, "CLIENT KILL ID %lld", sub));
    ASSERT(loop_until_count(e->base, &drops, 1, 5000));
    /* the registration is left, nobody listens on its channel */
    redisReply *r = server_cmd(e->rc, "HGETALL t:{%s}:idle", q);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    snprintf(field, fsize, "%s", r->element[0]->str);
    snprintf(value, vsize, "%s", r->element[1]->str);
    freeReplyObject(r);
    const char *ch = strchr(field, ' ');
    ASSERT(ch != NULL);
    ASSERT_EQ(0, server_numsub(e->rc, ch + 1));
    *client = a;
}

/* The jobs of queue q whose push nobody heard, run by another worker
 * (options wo, runs counted in rb): rb's runs reach want, each a first
 * attempt, none on the deaf worker (ra), and told (NULL: not counted)
 * reaches want too; the worker stops and its registration goes. */
static void run_undone_elsewhere(test_env *e, const char *q, const rjq_worker_options *wo, runs *rb,
                                 long want, const long *told, const runs *ra) {
    rjq_worker *wb = NULL;
    ASSERT_OK(rjq_worker_start(e->q, wo, on_run, rb, &wb));
    ASSERT(loop_until_count(e->base, &rb->done, want, 5000));
    if (told) ASSERT(loop_until_count(e->base, told, want, 5000));
    ASSERT_EQ(want, rb->ran);
    ASSERT_EQ(1, rb->attempt_max);
    ASSERT_EQ(0, ra->ran);
    int stopped = 0;
    ASSERT_OK(rjq_worker_stop(wb, on_stopped, &stopped));
    ASSERT(loop_until(e->base, &stopped, 20000));
    ASSERT_EQ(0, server_int(e->rc, "HLEN t:{%s}:idle", q));
}

/* nsub36: the lean enqueue sends no PUBSUB NUMSUB; its push's own PUBLISH
 * reply (the subscribers it reached) proves the registered worker listens.
 * A worker's subscriber connection is killed (CLIENT KILL) and its client
 * waits a minute before reconnecting: its registration is left in idle,
 * its channel without a subscriber. An awaited job enqueued on a format-2
 * queue is pushed to it, reaches nobody, and is undone in the same call:
 * the job ready (attempt not spent), no lease, the stale registration
 * dropped, its reply channel moved from the state to the watchers column;
 * another worker then runs it once, its producer is told, and nothing is
 * left in active. (With the undo left out, the job stays active under the
 * dead push's token until its lease ends: the wait for the other worker's
 * run fails.) */
TEST(push_heard_by_nobody_is_undone_and_the_job_runs_once_on_another_worker) {
    test_env e;
    env_start(&e, "unheard");
    long told = 0;
    set_format_2_known(&e, "unheard");

    runs ra = {0};
    rjq_client *a;
    char field[256], value[128];
    start_deaf_worker(&e, "unheard", "unheardwkr", 1, &ra, &a, field, sizeof field, value, sizeof value);
    rjq_worker_options wo = quiet_worker_options(1);
    redisReply *r;

    /* a payload in the message, and one of its own (>= 2 KiB: two
     * PUBLISHes, the second only after a heard first) */
    static char big[5000];
    memset(big, 'b', sizeof big);
    const char *payload[2] = {"x", big};
    size_t len[2] = {1, sizeof big};
    runs rb = {0};
    for (int k = 0; k < 2; k++) {
        if (k > 0) { /* the same stale registration again */
            redisReply *h = server_cmd(e.rc, "HSET t:{unheard}:idle %s %s", field, value);
            freeReplyObject(h);
        }
        ASSERT_OK(rjq_enqueue_await(e.q, payload[k], len[k], NULL, NULL, on_told, &told, NULL));
        ASSERT(loop_until_server_int(e.base, e.rc, 1, 5000, "LLEN t:{unheard}:ready"));
        ASSERT_EQ(0, server_int(e.rc, "HLEN t:{unheard}:idle")); /* the stale registration dropped */
        ASSERT_EQ(0, server_active_jobs(e.rc, "unheard"));
        r = server_cmd(e.rc, "LINDEX t:{unheard}:ready 0");
        ASSERT(r->type == REDIS_REPLY_STRING);
        char id[32];
        snprintf(id, sizeof id, "%s", r->str);
        freeReplyObject(r);
        r = server_cmd(e.rc, "HGET t:{unheard}:state %s", id);
        ASSERT(r->type == REDIS_REPLY_STRING && strncmp(r->str, "ready 0 @", 9) == 0);
        ASSERT(strstr(r->str, ":reply:") == NULL); /* a ready job's state holds no channel */
        freeReplyObject(r);
        r = server_cmd(e.rc, "HGET t:{unheard}:watchers %s", id);
        ASSERT(r->type == REDIS_REPLY_STRING && strstr(r->str, ":reply:") != NULL);
        freeReplyObject(r);
        ASSERT_EQ(k, told);

        /* another worker runs it, once; its producer is told; the worker
         * stops (its registration goes) */
        run_undone_elsewhere(&e, "unheard", &wo, &rb, k + 1, &told, &ra);
    }
    ASSERT_EQ(0, server_active_jobs(e.rc, "unheard"));
    rjq_client_free(a);
    env_stop(&e);
}

static void on_enqueued_ok(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs, (void)n;
    ASSERT_OK(status);
    (*(long *)data)++;
}

/* State column of job id on queue q starts "ready 0 @" (no attempt spent). */
static void assert_ready_unspent(test_env *e, const char *q, const char *id) {
    redisReply *r = server_cmd(e->rc, "HGET t:{%s}:state %s", q, id);
    ASSERT(r->type == REDIS_REPLY_STRING && strncmp(r->str, "ready 0 @", 9) == 0);
    freeReplyObject(r);
}

/* npush36: the general enqueue's push (lib.lua push_to_idle: a batch, a job
 * with an id, a priority job) sends no PUBSUB NUMSUB either: each message's
 * PUBLISH reply proves its worker listens, and a message heard by nobody is
 * undone in the same call, each of its jobs back where it was (new jobs of
 * priority 0 at the tail of ready, in order; a priority job in prio, with its
 * score), its lease gone, its state ready with the attempt unspent, the stale
 * registration dropped. A worker with 4 slots has its subscriber connection
 * killed and its client held off; each case re-writes its registration,
 * enqueues, finds the jobs undone, and another worker runs them once. (With
 * the undo left out, the jobs stay active under the dead push's token.) */
TEST(general_push_heard_by_nobody_is_undone_for_batches_ids_and_priorities) {
    test_env e;
    env_start(&e, "unheardg");
    runs ra = {0};
    rjq_client *a;
    char field[256], value[128];
    start_deaf_worker(&e, "unheardg", "unheardgwkr", 4, &ra, &a, field, sizeof field, value, sizeof value);
    ASSERT(strncmp(value, "4 ", 2) == 0);
    redisReply *r;

    runs rb = {0};
    long enq = 0, want = 0;
    rjq_worker_options wob = quiet_worker_options(1);
    for (int k = 0; k < 3; k++) {
        if (k > 0) { /* the same stale registration again */
            redisReply *h = server_cmd(e.rc, "HSET t:{unheardg}:idle %s %s", field, value);
            freeReplyObject(h);
        }
        if (k == 0) { /* a batch of three new jobs: one message */
            rjq_enqueue_item items[3] = {{sizeof(rjq_enqueue_item), "1", 1, NULL},
                                         {sizeof(rjq_enqueue_item), "2", 1, NULL},
                                         {sizeof(rjq_enqueue_item), "3", 1, NULL}};
            ASSERT_OK(rjq_enqueue_batch(e.q, items, 3, on_enqueued_ok, &enq));
            ASSERT(loop_until_count(e.base, &enq, 1, 5000));
            want += 3;
            ASSERT_EQ(3, server_int(e.rc, "LLEN t:{unheardg}:ready"));
            for (int i = 0; i < 3; i++) { /* in their order */
                r = server_cmd(e.rc, "LINDEX t:{unheardg}:ready %d", i);
                ASSERT(r->type == REDIS_REPLY_STRING);
                char id[32];
                snprintf(id, sizeof id, "%s", r->str);
                freeReplyObject(r);
                ASSERT_EQ(i + 1, atoll(id));
                assert_ready_unspent(&e, "unheardg", id);
            }
        } else if (k == 1) { /* a job with an id */
            rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
            jo.id = "named";
            ASSERT_OK(rjq_enqueue(e.q, "n", 1, &jo, on_enqueued_ok, &enq));
            ASSERT(loop_until_count(e.base, &enq, 2, 5000));
            want += 1;
            ASSERT_EQ(1, server_int(e.rc, "LLEN t:{unheardg}:ready"));
            assert_ready_unspent(&e, "unheardg", "named");
        } else { /* a priority job: taken from prio, put back with its score */
            rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
            jo.priority = 5;
            jo.id = "prio5";
            ASSERT_OK(rjq_enqueue(e.q, "p", 1, &jo, on_enqueued_ok, &enq));
            ASSERT(loop_until_count(e.base, &enq, 3, 5000));
            want += 1;
            ASSERT_EQ(0, server_int(e.rc, "LLEN t:{unheardg}:ready"));
            ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{unheardg}:prio"));
            ASSERT_EQ(1, server_int(e.rc, "ZCOUNT t:{unheardg}:prio -inf (0"));
            assert_ready_unspent(&e, "unheardg", "prio5");
        }
        ASSERT_EQ(0, server_int(e.rc, "HLEN t:{unheardg}:idle")); /* the stale registration dropped */
        ASSERT_EQ(0, server_active_jobs(e.rc, "unheardg"));

        /* another worker runs them, once each; it stops (its registration goes) */
        run_undone_elsewhere(&e, "unheardg", &wob, &rb, want, NULL, &ra);
    }
    ASSERT_EQ(0, server_active_jobs(e.rc, "unheardg"));
    rjq_client_free(a);
    env_stop(&e);
}

static void on_limited(rjq_client *c, int status, long long n, void *data) {
    (void)c, (void)n;
    ASSERT(status >= 0);
    (*(long *)data)++;
}

/* gpushundo: a group enqueue's push (genqueue.lua, GROUPS.take) asks no
 * PUBSUB NUMSUB either, and a message heard by nobody is undone in the same
 * call (GROUPS.untake): two groups, "c" with a concurrency limit of 1 and
 * "r" with a rate of 2 starts a minute, two jobs each, one loop turn (one
 * call) pushed to a deaf worker's 4 slots: the take starts c's first and
 * both of r's (r then waits for its window, c is at its limit), the message
 * reaches nobody. Afterwards every job is ready in its group again (its
 * attempt unspent, in order), the groups' active counts and slot set are
 * empty, r's rate log holds none of the starts and r waits for no window,
 * the depth index counts 2 each, both groups are in the ring in their
 * order, the stale
 * registration is dropped and nothing is active. Another worker then runs
 * each job once within the limits (c's second only after its first is
 * done). (With the undo left out, the jobs stay active under the dead
 * push's token and the groups' counts hold them.) */
TEST(group_push_heard_by_nobody_is_undone_within_the_groups_limits) {
    test_env e;
    env_start(&e, "unheardgr");
    long lim = 0;
    rjq_group_limits l = RJQ_GROUP_LIMITS_INIT;
    l.concurrency = 1;
    ASSERT_OK(rjq_queue_limit_group(e.q, "c", &l, on_limited, &lim));
    l = (rjq_group_limits)RJQ_GROUP_LIMITS_INIT;
    l.rate = 2;
    l.rate_window_ms = 60000;
    ASSERT_OK(rjq_queue_limit_group(e.q, "r", &l, on_limited, &lim));
    ASSERT(loop_until_count(e.base, &lim, 2, 5000));

    runs ra = {0};
    rjq_client *a;
    char field[256], value[128];
    start_deaf_worker(&e, "unheardgr", "unheardgrwkr", 4, &ra, &a, field, sizeof field, value, sizeof value);
    long long numsub = server_calls(e.rc, "pubsub|numsub");
    long enq = 0;
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    const char *ids[4] = {"c1", "r1", "c2", "r2"};
    for (int i = 0; i < 4; i++) { /* (one loop turn: one genqueue call) */
        jo.id = ids[i];
        jo.group = ids[i][0] == 'c' ? "c" : "r";
        ASSERT_OK(rjq_enqueue(e.q, "g", 1, &jo, on_enqueued_ok, &enq));
    }
    ASSERT(loop_until_count(e.base, &enq, 4, 5000));
    ASSERT_EQ(numsub, server_calls(e.rc, "pubsub|numsub"));
    ASSERT_EQ(0, server_int(e.rc, "HLEN t:{unheardgr}:idle")); /* the stale registration dropped */
    ASSERT_EQ(0, server_active_jobs(e.rc, "unheardgr"));
    for (int i = 0; i < 4; i++) assert_ready_unspent(&e, "unheardgr", ids[i]);
    const char *grp[2] = {"c", "r"};
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 2; i++) { /* in their order */
            redisReply *r = server_cmd(e.rc, "LINDEX t:{unheardgr}:g:r:%s %d", grp[k], i);
            ASSERT(r->type == REDIS_REPLY_STRING);
            ASSERT(r->str[0] == grp[k][0] && r->str[1] == '1' + i);
            freeReplyObject(r);
        }
        ASSERT_EQ(-2, server_int(e.rc, "ZSCORE t:{unheardgr}:g:depth %s", grp[k]));
        ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{unheardgr}:g:act %s", grp[k]));
        char sf[8]; /* (its started counter: the undone starts taken back, GROUPS.untake) */
        snprintf(sf, sizeof sf, "%s s", grp[k]);
        ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{unheardgr}:g:act %s", sf));
    }
    redisReply *ring = server_cmd(e.rc, "ZRANGE t:{unheardgr}:g:ring 0 -1"); /* in the ring, in order */
    ASSERT(ring->type == REDIS_REPLY_ARRAY && ring->elements == 2);
    ASSERT(strcmp(ring->element[0]->str, "c") == 0 && strcmp(ring->element[1]->str, "r") == 0);
    freeReplyObject(ring);
    ASSERT_EQ(0, server_int(e.rc, "SCARD t:{unheardgr}:g:a:c"));
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{unheardgr}:g:s:r"));
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{unheardgr}:g:rated"));
    ASSERT_EQ(4, server_int(e.rc, "HGET t:{unheardgr}:stats gready"));

    /* another worker (4 slots, holding its jobs) starts c1, r1, r2: c2
     * waits for c's slot */
    runs rb = {.keep = 1};
    rjq_worker_options wo = quiet_worker_options(4);
    rjq_worker *wb = NULL;
    ASSERT_OK(rjq_worker_start(e.q, &wo, on_run, &rb, &wb));
    ASSERT(loop_until_count(e.base, &rb.ran, 3, 5000));
    ASSERT_EQ(1, server_int(e.rc, "HGET t:{unheardgr}:g:act c"));
    ASSERT_EQ(2, server_int(e.rc, "HGET t:{unheardgr}:g:act r"));
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{unheardgr}:g:r:c"));
    ASSERT_EQ(3, rb.ran);
    for (long i = 0; i < rb.nheld; i++) {
        ASSERT(strcmp(rjq_job_get_id(rb.held[i]), "c2") != 0);
        ASSERT_OK(rjq_job_complete(rb.held[i], "ok", 2, on_done_ok, &rb.done));
    }
    rb.nheld = 0;
    ASSERT(loop_until_count(e.base, &rb.ran, 4, 5000)); /* c2, once c's slot is free */
    ASSERT_EQ(1, rb.attempt_max);
    for (long i = 0; i < rb.nheld; i++) ASSERT_OK(rjq_job_complete(rb.held[i], "ok", 2, on_done_ok, &rb.done));
    ASSERT(loop_until_count(e.base, &rb.done, 4, 5000));
    ASSERT_EQ(4, rb.ran);
    ASSERT_EQ(0, ra.ran);
    ASSERT_EQ(0, server_active_jobs(e.rc, "unheardgr"));
    int stopped = 0;
    ASSERT_OK(rjq_worker_stop(wb, on_stopped, &stopped));
    ASSERT(loop_until(e.base, &stopped, 20000));
    rjq_client_free(a);
    env_stop(&e);
}

/* The same for a weighted group's turn and a priority job (GROUPS.untake's
 * credit and priority set): group "w" of weight 3 with four jobs (w2 of
 * priority 5) and group "v" with one, one call, pushed to a deaf worker's
 * 2 slots: the take starts w2 and w1 (w's turn goes on: its credit
 * written, it keeps the ring's head); undone, w2 is back in w's priority
 * set with its score, w1 at the head of w's list before w3 and w4, w's
 * credit gone again, the ring's order w then v, nothing active; another
 * worker then runs each of the five once. */
TEST(group_push_heard_by_nobody_puts_back_a_weighted_turn_and_a_priority_job) {
    test_env e;
    env_start(&e, "unheardgw");
    long lim = 0;
    ASSERT_OK(rjq_queue_set_group_limits(e.q, "w", 0, 3, on_limited, &lim));
    ASSERT(loop_until_count(e.base, &lim, 1, 5000));
    runs ra = {0};
    rjq_client *a;
    char field[256], value[128];
    start_deaf_worker(&e, "unheardgw", "unheardgwwkr", 2, &ra, &a, field, sizeof field, value, sizeof value);
    long enq = 0;
    const char *ids[5] = {"w1", "w2", "w3", "w4", "v1"};
    for (int i = 0; i < 5; i++) { /* (one loop turn: one genqueue call) */
        rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
        jo.id = ids[i];
        jo.group = i < 4 ? "w" : "v";
        if (i == 1) jo.priority = 5;
        ASSERT_OK(rjq_enqueue(e.q, "g", 1, &jo, on_enqueued_ok, &enq));
    }
    ASSERT(loop_until_count(e.base, &enq, 5, 5000));
    ASSERT_EQ(0, server_int(e.rc, "HLEN t:{unheardgw}:idle"));
    ASSERT_EQ(0, server_active_jobs(e.rc, "unheardgw"));
    for (int i = 0; i < 5; i++) assert_ready_unspent(&e, "unheardgw", ids[i]);
    const char *order[3] = {"w1", "w3", "w4"};
    ASSERT_EQ(3, server_int(e.rc, "LLEN t:{unheardgw}:g:r:w"));
    for (int i = 0; i < 3; i++) {
        redisReply *r = server_cmd(e.rc, "LINDEX t:{unheardgw}:g:r:w %d", i);
        ASSERT(r->type == REDIS_REPLY_STRING && strcmp(r->str, order[i]) == 0);
        freeReplyObject(r);
    }
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{unheardgw}:g:p:w"));
    ASSERT_EQ(1, server_int(e.rc, "ZCOUNT t:{unheardgw}:g:p:w -inf (0")); /* its score: priority 5's */
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{unheardgw}:g:credit w"));
    ASSERT_EQ(-4, server_int(e.rc, "ZSCORE t:{unheardgw}:g:depth w"));
    redisReply *r = server_cmd(e.rc, "ZRANGE t:{unheardgw}:g:ring 0 -1");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    ASSERT(strcmp(r->element[0]->str, "w") == 0 && strcmp(r->element[1]->str, "v") == 0);
    freeReplyObject(r);
    ASSERT_EQ(5, server_int(e.rc, "HGET t:{unheardgw}:stats gready"));

    runs rb = {0};
    rjq_worker_options wo = quiet_worker_options(2);
    run_undone_elsewhere(&e, "unheardgw", &wo, &rb, 5, NULL, &ra);
    ASSERT_EQ(0, server_active_jobs(e.rc, "unheardgw"));
    rjq_client_free(a);
    env_stop(&e);
}

/* A monitor's view of a push heard by nobody: the events it gets (any
 * script's, in order) as "<event> <id>". */
static char unheard_seen[32][320];
static long unheard_nseen;

static void note_event(rjq_client *c, const char *event, const char *id, void *data) {
    (void)c, (void)data;
    if (unheard_nseen < 32) snprintf(unheard_seen[unheard_nseen++], sizeof unheard_seen[0], "%s %s", event, id);
}

static int unheard_has(const char *event, const char *id) {
    size_t n = strlen(event);
    for (long i = 0; i < unheard_nseen; i++)
        if (strncmp(unheard_seen[i], event, n) == 0 && unheard_seen[i][n] == ' ' &&
            strcmp(unheard_seen[i] + n + 1, id) == 0)
            return 1;
    return 0;
}

/* A push heard by nobody sends a monitor no "active" event, only
 * "enqueued": the undone push's events are held until its PUBLISH counted
 * a subscriber (enqueue_one.lua's emit after the count; lib.lua
 * push_to_idle's evs, for enqueue.lua's and genqueue.lua's pushes), and
 * events reach monitors when the call ends. A monitored queue and a deaf
 * worker (its subscriber connection killed, its registration left): a
 * plain job (enqueue_one.lua), a job with an id (enqueue.lua) and a group
 * job (genqueue.lua) are each pushed to it (its registration written back
 * each time) and undone; the monitor, once a barrier on its subscriber
 * connection passed, saw "enqueued" for each and no "active". (An undo
 * that emitted "active" fails here.) */
TEST(push_heard_by_nobody_sends_monitors_enqueued_and_no_active) {
    test_env e;
    env_start(&e, "unheardmon");
    rjq_monitor *m;
    ASSERT_OK(rjq_queue_monitor(e.q, note_event, NULL, &m));
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{unheardmon}:monitored") == 1, 5000);
    wait_monitoring(e.base, e.c, "unheardmon");
    /* (the handle's first enqueue learns the queue's index fields, so the
     * plain job below takes the lean call: a job delayed an hour) */
    enqueue_x_ok(e.base, e.q, "later", 3600000, 0);
    runs ra = {0};
    rjq_client *a;
    char field[256], value[128];
    start_deaf_worker(&e, "unheardmon", "unheardmonwkr", 2, &ra, &a, field, sizeof field, value, sizeof value);

    char ids[3][256];
    for (int k = 0; k < 3; k++) {
        if (k > 0) { /* the same stale registration again */
            redisReply *h = server_cmd(e.rc, "HSET t:{unheardmon}:idle %s %s", field, value);
            freeReplyObject(h);
        }
        rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
        if (k == 1) jo.id = "named";
        if (k == 2) jo.group = "ten";
        enqueue_wait ew = enqueue_job(e.base, e.q, "x", &jo);
        ASSERT_OK(ew.status);
        snprintf(ids[k], sizeof ids[k], "%s", ew.id);
        /* undone: the stale registration dropped, the job ready */
        ASSERT_EQ(0, server_int(e.rc, "HLEN t:{unheardmon}:idle"));
        ASSERT_EQ(0, server_active_jobs(e.rc, "unheardmon"));
        assert_ready_unspent(&e, "unheardmon", ids[k]);
    }
    ASSERT_EQ(2, server_int(e.rc, "LLEN t:{unheardmon}:ready"));
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{unheardmon}:g:r:ten"));
    subscriber_barrier(e.base, e.c, e.rc); /* every event of those calls has come */
    for (int k = 0; k < 3; k++) {
        if (!unheard_has("enqueued", ids[k])) FAIL_AT(__FILE__, __LINE__, "no \"enqueued %s\"", ids[k]);
        if (unheard_has("active", ids[k])) FAIL_AT(__FILE__, __LINE__, "\"active %s\" of an undone push", ids[k]);
    }
    ASSERT_OK(rjq_monitor_stop(m));
    ASSERT_EQ(0, ra.ran);
    rjq_client_free(a);
    env_stop(&e);
}

/* A client holding jobs under a five-minute lease dies (freed without a
 * graceful close: to Redis the same as a SIGKILL): another client's beat
 * finds its liveness entry run out and returns its jobs at once, and they
 * run there within seconds, not minutes. The dead client is forgotten. */
TEST(jobs_of_a_dead_client_run_elsewhere_long_before_their_lease_ends) {
    test_env e;
    env_start(&e, "orphan");
    rjq_client_options o = client_options(e.s.url);
    o.liveness_ms = 1000;
    rjq_client *a = client_new(e.base, &o);
    rjq_queue *qa = queue_for(a, "orphan");
    wait_connected(e.base, a);
    enqueue_n(&e, e.q, 3);

    runs ra = {.keep = 1};
    rjq_worker_options wo = quiet_worker_options(3);
    wo.lease_ms = 300000;
    rjq_worker *wa = NULL;
    ASSERT_OK(rjq_worker_start(qa, &wo, on_run, &ra, &wa));
    ASSERT(loop_until_count(e.base, &ra.ran, 3, 5000));
    WAIT_FOR(e.base, server_int(e.rc, "ZCARD t:{clients}:live") > 0, 5000);
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{clients}:live"));
    rjq_client_free(a); /* its jobs stay active under its tokens */
    for (long i = 0; i < ra.nheld; i++) rjq_job_fail(ra.held[i], "x", 0, -1, NULL, NULL);

    /* b sweeps once its beats were answered for its liveness_ms plus its
     * reconnect span (3.2 s here) */
    rjq_client *b = client_new(e.base, &o);
    rjq_queue *qb = queue_for(b, "orphan");
    runs rb = {0};
    rjq_worker *wb = NULL;
    ASSERT_OK(rjq_worker_start(qb, &wo, on_run, &rb, &wb));
    if (!loop_until_count(e.base, &rb.done, 3, 10000)) { /* (their lease: 300 s) */
        fprintf(stderr, "errmsg: %s; live %lld held %lld active %lld ran %ld\n", rjq_client_get_errmsg(e.c),
                server_int(e.rc, "ZCARD t:{clients}:live"), server_held_members(e.rc, "orphan"),
                server_active_jobs(e.rc, "orphan"), rb.ran);
        ASSERT(0);
    }
    ASSERT_EQ(2, rb.attempt_max); /* the dead client's run counts */
    rjq_stats s = get_stats(e.base, e.q);
    ASSERT_EQ(3, s.reclaimed);
    /* the dead client is forgotten once its jobs are back; b stays */
    WAIT_FOR(e.base, server_int(e.rc, "ZCARD t:{clients}:live") == 1, 5000);
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{clients}:live"));
    ASSERT_EQ(1, server_int(e.rc, "HLEN t:{clients}:queues"));
    ASSERT_EQ(0, server_held_members(e.rc, "orphan"));
    ASSERT_EQ(0, server_int(e.rc, "HLEN t:{clients}:sweeps"));
    rjq_client_free(b);
    env_stop(&e);
}

/* Claims, pushes, failures with retries, hand-backs of pushes beyond a
 * worker's room: once every job is finished the held index is empty (each
 * token forgotten once no job of it is left with its worker). */
static void fail_odd_once(rjq_job *job, void *data) {
    runs *r = data;
    r->ran++;
    if (rjq_job_get_attempt(job) == 1 && atoi(rjq_job_get_id(job)) % 2 == 1)
        ASSERT_OK(rjq_job_fail(job, "again", 0, 0, NULL, NULL));
    else
        ASSERT_OK(rjq_job_complete(job, "ok", 2, on_done_ok, &r->done));
}

TEST(held_index_is_empty_once_all_work_is_finished) {
    test_env e;
    env_start(&e, "heldempty");
    runs r = {0};
    rjq_worker_options wo = quiet_worker_options(4);
    rjq_worker *w1 = NULL, *w2 = NULL;
    ASSERT_OK(rjq_worker_start(e.q, &wo, fail_odd_once, &r, &w1));
    ASSERT_OK(rjq_worker_start(e.q, &wo, fail_odd_once, &r, &w2));
    wait_worker_started(e.base, e.c, e.q, e.rc, "heldempty"); /* idle: enqueues push to them */
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < 10; i++) ASSERT_OK(rjq_enqueue(e.q, "x", 1, NULL, NULL, NULL));
        (void)get_stats(e.base, e.q); /* a round trip: pushed while the last round runs */
    }
    ASSERT(loop_until_count(e.base, &r.done, 200, 20000));
    WAIT_FOR(e.base, server_held_members(e.rc, "heldempty") == 0, 5000); /* the last forgets */
    (void)get_stats(e.base, e.q);
    ASSERT_EQ(0, server_held_members(e.rc, "heldempty"));
    ASSERT_EQ(0, server_active_jobs(e.rc, "heldempty"));
    env_stop(&e);
}

/* Redis stops answering (SIGSTOP) for longer than the clients' liveness_ms
 * but shorter than their command timeout: every entry runs out meanwhile,
 * and each client's beats wait in the server. When it resumes, the first
 * beat it runs must not take the others for dead: they had no chance to
 * renew. Nothing is reclaimed, the held jobs stay with their worker. */
/* The earliest end among the entries of the live clients (ms). */
static long long oldest_entry(redisContext *rc) {
    redisReply *r = server_cmd(rc, "ZRANGE t:{clients}:live 0 0 WITHSCORES");
    long long v = r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? atoll(r->element[1]->str) : 0;
    freeReplyObject(r);
    return v;
}

TEST(a_stalled_server_makes_no_live_client_look_dead) {
    test_env e;
    env_start(&e, "stall");
    rjq_client_options o = client_options(e.s.url);
    o.liveness_ms = 1000;
    rjq_client *a = client_new(e.base, &o), *b = client_new(e.base, &o);
    rjq_queue *qa = queue_for(a, "stall"), *qb = queue_for(b, "stall");
    wait_connected(e.base, a);
    wait_connected(e.base, b);
    enqueue_n(&e, e.q, 4);
    runs ra = {.keep = 1}, rb = {.keep = 1};
    rjq_worker_options wo = quiet_worker_options(2);
    rjq_worker *wa = NULL, *wb = NULL;
    ASSERT_OK(rjq_worker_start(qa, &wo, on_run, &ra, &wa));
    ASSERT_OK(rjq_worker_start(qb, &wo, on_run, &rb, &wb));
    ASSERT(loop_until_count(e.base, &ra.ran, 2, 5000));
    ASSERT(loop_until_count(e.base, &rb.ran, 2, 5000));
    /* both beat steadily (each entry renewed twice): either may sweep the other */
    for (int k = 0; k < 2; k++) {
        long long oldest = oldest_entry(e.rc);
        WAIT_FOR(e.base, oldest_entry(e.rc) > oldest, 10000);
    }

    ASSERT(kill(e.s.pid, SIGSTOP) == 0);
    /* no event: the server is stopped longer than liveness_ms (1 s) for
     * every entry to run out, while the beats wait in it */
    quiet_for(e.base, 2500, "the server is stopped past every entry's end");
    ASSERT(kill(e.s.pid, SIGCONT) == 0);
    /* the beats that waited have run: a round trip on each client's
     * connection behind them, and both entries renewed past now */
    (void)get_stats(e.base, qa);
    (void)get_stats(e.base, qb);
    WAIT_FOR(e.base, oldest_entry(e.rc) > server_now_ms(e.rc), 10000);

    rjq_stats s = get_stats(e.base, e.q);
    ASSERT_EQ(0, s.reclaimed);
    ASSERT_EQ(4, s.active);
    ASSERT_EQ(2, ra.ran);
    ASSERT_EQ(2, rb.ran);
    ASSERT_EQ(2, server_int(e.rc, "ZCARD t:{clients}:live"));
    for (long i = 0; i < ra.nheld; i++) ASSERT_OK(rjq_job_complete(ra.held[i], "ok", 2, on_done_ok, &ra.done));
    for (long i = 0; i < rb.nheld; i++) ASSERT_OK(rjq_job_complete(rb.held[i], "ok", 2, on_done_ok, &rb.done));
    ASSERT(loop_until_count(e.base, &ra.done, 2, 5000));
    ASSERT(loop_until_count(e.base, &rb.done, 2, 5000));
    rjq_client_free(a);
    rjq_client_free(b);
    env_stop(&e);
}

/* The claim script itself (as the library embeds it, lib.lua included),
 * run with EVAL on queue "lua" for worker "c1.1." with token tok. */
static redisReply *claim_eval(redisContext *rc, const char *tok, int want, int recover) {
    const char *body = rjq__scripts[RJQ__S_CLAIM].body;
    char wants[16];
    snprintf(wants, sizeof wants, "%d", want);
    const char *argv[48];
    layout_keys lk;
    argv[0] = "EVAL", argv[1] = body;
    int n = layout_script_keys(&lk, RJQ__S_CLAIM, "t", "lua", argv, 2);
    const char *args[] = {"t:{lua}:job:", wants, "30000", tok, "t:{lua}:wake",
                          "1 t:{lua}:push:c1", "7", "1", recover ? "1" : "0", "1"};
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) argv[n++] = args[i];
    redisReply *r = redisCommandArgv(rc, n, argv, NULL);
    ASSERT(r != NULL && r->type == REDIS_REPLY_ARRAY);
    return r;
}

/* A recovering claim (sent after its push channel was resubscribed) whose
 * reply was lost is sent again. Meanwhile a job was pushed to the worker
 * under the registration that claim made, and the worker runs it. The
 * re-sent claim must not recover a second time with its list of known
 * tokens from back then: it would take the running job as never heard of
 * and hand it over again (it would run twice). It returns what its first
 * run took, nothing more. */
TEST(resent_recovering_claim_does_not_recover_what_was_pushed_after_it) {
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *rc = server_connect(&s);
    redisReply *r = claim_eval(rc, "c1.1.C", 2, 1); /* first run: nothing to take */
    ASSERT_EQ(4, r->elements);
    freeReplyObject(r);
    /* then a push: job j1 under token c1.1.P1, as push_to_idle leaves it */
    freeReplyObject(server_cmd(rc, "HSET t:{lua}:payload j1 x"));
    freeReplyObject(server_cmd(rc, "HSET t:{lua}:state j1 %s", "active 1 c1.1.P1"));
    freeReplyObject(server_cmd(rc, "ZADD t:{lua}:active 9999999999999 j1"));
    freeReplyObject(server_cmd(rc, "ZADD t:{lua}:held 0 %s", "c1.1.P1 j1"));

    r = claim_eval(rc, "c1.1.C", 2, 1); /* the re-send */
    ASSERT_EQ(4, r->elements);         /* no job */
    freeReplyObject(r);
    redisReply *st = server_cmd(rc, "HGET t:{lua}:state j1");
    ASSERT_STREQ("active 1 c1.1.P1", st->str); /* still the push's */
    freeReplyObject(st);

    /* A new recovering claim that does not know the push does take it. */
    r = claim_eval(rc, "c1.1.D", 2, 1);
    ASSERT_EQ(9, r->elements); /* one job (5 per job) */
    ASSERT_STREQ("j1", r->element[4]->str);
    freeReplyObject(r);
    redisFree(rc);
    server_stop_guarded(&s);
}

/* The orphan sweep script on queue "lua" for client prefix who, with the
 * sweep's lease ending at until (server ms). */
static redisReply *orphans_eval(redisContext *rc, const char *who, long long until) {
    char u[32];
    snprintf(u, sizeof u, "%lld", until);
    const char *argv[48];
    layout_keys lk;
    argv[0] = "EVAL", argv[1] = rjq__scripts[RJQ__S_ORPHANS].body;
    int n = layout_script_keys(&lk, RJQ__S_ORPHANS, "t", "lua", argv, 2);
    const char *args[] = {"t:{lua}:job:", "t:{lua}:wake", who, "100", "1000", u};
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) argv[n++] = args[i];
    redisReply *r = redisCommandArgv(rc, n, argv, NULL);
    ASSERT(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    return r;
}

/* An orphan sweep call that runs after its sweep's lease ended does
 * nothing: the swept client may be back (it was paused or cut off) and
 * hold new jobs under the same id; the beat told it to start none until
 * the lease's end, not later. Within the lease, the jobs go back. */
TEST(orphan_sweep_past_its_lease_returns_nothing) {
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *rc = server_connect(&s);
    freeReplyObject(server_cmd(rc, "HSET t:{lua}:payload j1 x"));
    freeReplyObject(server_cmd(rc, "HSET t:{lua}:state j1 %s", "active 1 c9.1.T"));
    freeReplyObject(server_cmd(rc, "ZADD t:{lua}:active 9999999999999 j1"));
    freeReplyObject(server_cmd(rc, "ZADD t:{lua}:held 0 %s", "c9.1.T j1"));
    long long now = server_now_ms(rc);

    redisReply *r = orphans_eval(rc, "c9.", now - 1);
    ASSERT_EQ(0, r->element[0]->integer);
    freeReplyObject(r);
    ASSERT_EQ(1, server_int(rc, "ZCOUNT t:{lua}:active -inf +inf"));

    r = orphans_eval(rc, "c9.", now + 60000);
    ASSERT_EQ(1, r->element[0]->integer);
    freeReplyObject(r);
    ASSERT_EQ(0, server_int(rc, "ZCOUNT t:{lua}:active -inf +inf"));
    ASSERT_EQ(1, server_int(rc, "LLEN t:{lua}:ready"));
    redisFree(rc);
    server_stop_guarded(&s);
}

/* The sweep of client c9: its pushed jobs (no held member) are found by
 * their states, its claimed ones (an older client's pushes alike) by their
 * held members, each returned once; another client's (c90, whose id c9 is
 * a prefix of), a job whose state moved on, and one under a claim's token
 * whose member was forgotten (its worker let it go: left to its lease)
 * stay. Push tokens have their real shape: token base (10 characters and
 * 'p', enqueue.c) and the message's number. */
TEST(orphan_sweep_returns_pushed_jobs_by_their_state_and_held_ones_once) {
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *rc = server_connect(&s);
    const char *jobs[][2] = {{"p1", "active 1 c9.1.Aa0Bb1Cc2Dp1"},
                             {"p2", "active 2 c9.2.Aa0Bb1Cc2Dp2"},
                             {"h1", "active 1 c9.1.T"},
                             {"o1", "active 1 c90.1.Aa0Bb1Cc2Dp1"},
                             {"m1", "ready 1"},
                             {"f1", "active 1 c9.1.Ab0p1Cc2Dx"}};
    for (int i = 0; i < 6; i++) {
        freeReplyObject(server_cmd(rc, "HSET t:{lua}:payload %s x", jobs[i][0]));
        freeReplyObject(server_cmd(rc, "HSET t:{lua}:state %s %s", jobs[i][0], jobs[i][1]));
        freeReplyObject(server_cmd(rc, "ZADD t:{lua}:active 9999999999999 %s", jobs[i][0]));
    }
    freeReplyObject(server_cmd(rc, "ZADD t:{lua}:held 0 %s", "c9.1.T h1"));
    redisReply *r = orphans_eval(rc, "c9.", server_now_ms(rc) + 60000);
    ASSERT_EQ(3, r->element[0]->integer);
    ASSERT_EQ(0, r->element[1]->integer);
    freeReplyObject(r);
    ASSERT_EQ(3, server_int(rc, "LLEN t:{lua}:ready"));
    ASSERT_EQ(0, server_int(rc, "ZCARD t:{lua}:held"));
    ASSERT_EQ(3, server_int(rc, "ZCOUNT t:{lua}:active -inf +inf")); /* o1, m1, f1 */
    redisReply *st = server_cmd(rc, "HGET t:{lua}:state o1");
    ASSERT_STREQ("active 1 c90.1.Aa0Bb1Cc2Dp1", st->str);
    freeReplyObject(st);
    st = server_cmd(rc, "HGET t:{lua}:state f1");
    ASSERT_STREQ("active 1 c9.1.Ab0p1Cc2Dx", st->str);
    freeReplyObject(st);
    redisFree(rc);
    server_stop_guarded(&s);
}

/* A recovering claim takes over the jobs pushed to its worker (no held
 * member) that it does not know of, found by their states; another
 * worker's pushed job stays with it, and so does a job under one of its
 * worker's claim tokens whose member was forgotten (let go after a refused
 * completion: left to its lease, never started again at once). */
TEST(recovering_claim_finds_pushed_jobs_by_their_state) {
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *rc = server_connect(&s);
    freeReplyObject(server_cmd(rc, "HSET t:{lua}:payload j1 x j2 y j3 z"));
    freeReplyObject(server_cmd(rc, "HSET t:{lua}:state j1 %s", "active 1 c1.1.Aa0Bb1Cc2Dp1"));
    freeReplyObject(server_cmd(rc, "HSET t:{lua}:state j2 %s", "active 1 c1.2.Aa0Bb1Cc2Dp1"));
    freeReplyObject(server_cmd(rc, "HSET t:{lua}:state j3 %s", "active 1 c1.1.Ab0p1Cc2Dx"));
    freeReplyObject(server_cmd(rc, "ZADD t:{lua}:active 9999999999999 j1 9999999999999 j2 "
                                   "9999999999999 j3"));
    redisReply *r = claim_eval(rc, "c1.1.D", 2, 1);
    ASSERT_EQ(9, r->elements); /* one job (5 per job) */
    ASSERT_STREQ("j1", r->element[4]->str);
    ASSERT_EQ(1, r->element[6]->integer); /* its attempt unchanged */
    freeReplyObject(r);
    redisReply *st = server_cmd(rc, "HGET t:{lua}:state j2");
    ASSERT_STREQ("active 1 c1.2.Aa0Bb1Cc2Dp1", st->str); /* the other worker's */
    freeReplyObject(st);
    st = server_cmd(rc, "HGET t:{lua}:state j3");
    ASSERT_STREQ("active 1 c1.1.Ab0p1Cc2Dx", st->str); /* a forgotten claim's */
    freeReplyObject(st);
    st = server_cmd(rc, "HGET t:{lua}:state j1");
    ASSERT(strncmp(st->str, "active 1 c1.1.D", 15) == 0);
    freeReplyObject(st);
    redisFree(rc);
    server_stop_guarded(&s);
}

/* A recovering claim that takes over a pushed job gives it the wait the
 * push gave it (ms from its enqueue to that start, from the job's times,
 * which stay), when the push was its first run: the worker counts it in
 * on_job_start and the history as it would have counted the push's. A
 * later attempt's wait, or one whose times are not known (or make no
 * sense: a start after the claim's time), is -1. */
TEST(recovering_claim_gives_a_taken_over_push_its_wait) {
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *rc = server_connect(&s);
    long long now = server_now_ms(rc);
    freeReplyObject(server_cmd(rc, "HSET t:{lua}:payload j1 x j2 y j3 z j4 w"));
    char v[4][96];
    snprintf(v[0], sizeof v[0], "active 1 c1.1.Aa0Bb1Cc2Dp1 @%lld,%lld,", now - 900, now - 650);
    snprintf(v[1], sizeof v[1], "active 2 c1.1.Aa0Bb1Cc2Dp2 @%lld,%lld,%lld", now - 900, now - 100,
             now - 500);
    snprintf(v[2], sizeof v[2], "active 1 c1.1.Aa0Bb1Cc2Dp3");
    snprintf(v[3], sizeof v[3], "active 1 c1.1.Aa0Bb1Cc2Dp4 @%lld,%lld,", now - 900, now + 3600000);
    for (int i = 0; i < 4; i++) freeReplyObject(server_cmd(rc, "HSET t:{lua}:state j%d %s", i + 1, v[i]));
    freeReplyObject(server_cmd(rc, "ZADD t:{lua}:active 9999999999999 j1 9999999999999 j2 "
                                   "9999999999999 j3 9999999999999 j4"));
    redisReply *r = claim_eval(rc, "c1.1.D", 4, 1);
    ASSERT_EQ(4 + 4 * 5, r->elements);
    for (size_t i = 4; i < r->elements; i += 5) {
        const char *id = r->element[i]->str;
        long long wait = r->element[i + 4]->integer;
        if (strcmp(id, "j1") == 0) ASSERT_EQ(250, wait);
        else ASSERT_EQ(-1, wait); /* a later attempt, no times, a start yet to come */
    }
    freeReplyObject(r);
    redisReply *st = server_cmd(rc, "HGET t:{lua}:state j1");
    char want[128];
    snprintf(want, sizeof want, "active 1 c1.1.D @%lld,%lld,", now - 900, now - 650); /* its times stay */
    ASSERT(strncmp(st->str, "active 1 c1.1.D", 15) == 0);
    ASSERT(strstr(st->str, want + 15) != NULL);
    freeReplyObject(st);
    redisFree(rc);
    server_stop_guarded(&s);
}
