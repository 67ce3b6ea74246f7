/*
 * rjq_queue_close (issue 37): a queue handle can go before its client.
 * Refused (RJQ_EBUSY) while a worker, monitor or scheduler runs on it;
 * what was asked of it before ends, each callback exactly once, and the
 * handle is freed after the last of them (also when closed from inside
 * one of its own callbacks: ASan and valgrind watch); the name opened
 * again is a fresh, working handle, and another handle of the queue
 * takes over the push channel the closed one listened on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>

#include "fixture.h"
#include "harness.h"
#include "queue.h"
#include "server.h"
#include "waits.h"

/* The handles the client still has (closed ones not yet freed included). */
static int handles(const rjq_client *c) {
    int n = 0;
    for (rjq_queue *q = rjq__queue_first(c); q; q = rjq__queue_next(q)) n++;
    return n;
}

/* Run the loop until the client has n handles (the timeout a safety net). */
static void wait_handles(test_env *e, int n) {
    WAIT_FOR(e->base, handles(e->c) == n, 40000);
    ASSERT_EQ(n, handles(e->c));
}

/* A handler that completes its job with "r". */
static long completed;
static void complete_r(rjq_job *job, void *data) {
    (void)data;
    ASSERT_OK(rjq_job_complete(job, "r", 1, on_done_ok, &completed));
}

typedef struct stop_close {
    int calls, rc;
    rjq_queue *q;
} stop_close;

static void close_when_stopped(rjq_worker *w, int status, void *data) {
    stop_close *sc = data;
    (void)w;
    ASSERT_OK(status);
    sc->calls++;
    sc->rc = rjq_queue_close(sc->q);
}

TEST(close_is_refused_while_a_worker_runs_and_allowed_from_its_stop_callback) {
    test_env e;
    env_start(&e, "qc1");
    rjq_worker *w;
    rjq_worker_options wo = quiet_worker_options(1);
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_r, NULL, &w));
    wait_worker_started(e.base, e.c, e.q, e.rc, "qc1");
    ASSERT_EQ(RJQ_EBUSY, rjq_queue_close(e.q));
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "stop it first") != NULL);
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_close(NULL));
    ASSERT_EQ(1, handles(e.c));

    stop_close sc = {0, -1, e.q};
    ASSERT_OK(rjq_worker_stop(w, close_when_stopped, &sc));
    ASSERT(loop_until(e.base, &sc.calls, 5000));
    ASSERT_OK(sc.rc);
    e.q = NULL;
    wait_handles(&e, 0);
    /* its doorbell and push channel have no listener any more: what is
     * published there now reaches nothing (ASan: nothing freed is read) */
    freeReplyObject(server_cmd(e.rc, "PUBLISH t:{qc1}:wake 1"));
    rjq_queue *again;
    ASSERT_OK(rjq_queue_open(e.c, "qc1", NULL, &again));
    get_stats(e.base, again);
    ASSERT_EQ(1, sc.calls);
    env_stop(&e);
}

static void no_event(rjq_client *c, const char *event, const char *id, void *data) {
    (void)c, (void)event, (void)id, (void)data;
}

TEST(close_is_refused_while_a_monitor_or_scheduler_runs_on_the_handle) {
    test_env e;
    env_start(&e, "qc2");
    rjq_monitor *m;
    ASSERT_OK(rjq_queue_monitor(e.q, no_event, NULL, &m));
    ASSERT_EQ(RJQ_EBUSY, rjq_queue_close(e.q));
    ASSERT_OK(rjq_monitor_stop(m));
    rjq_scheduler *s;
    ASSERT_OK(rjq_scheduler_start(e.q, 0, &s));
    ASSERT_EQ(RJQ_EBUSY, rjq_queue_close(e.q));
    ASSERT_OK(rjq_scheduler_stop(s)); /* (its first tick may still be out: held, not used) */
    ASSERT_OK(rjq_queue_close(e.q));
    e.q = NULL;
    wait_handles(&e, 0);
    env_stop(&e);
}

/* ---- what was asked before the close ends, once each ---------------------- */

typedef struct tally {
    int enqueued, awaited, stats;
    int bad;
} tally;

static void count_enqueued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n,
                           void *data) {
    tally *t = data;
    (void)c, (void)jobs;
    if (status != RJQ_OK || n != 1) t->bad++;
    t->enqueued++;
}

static void count_awaited(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    tally *t = data;
    (void)c;
    if (status != RJQ_OK || o == NULL || o->result_len != 1 || memcmp(o->result, "r", 1) != 0)
        t->bad++;
    t->awaited++;
}

static void count_stats(rjq_client *c, int status, const rjq_stats *st, void *data) {
    tally *t = data;
    (void)c, (void)st;
    if (status != RJQ_OK) t->bad++;
    t->stats++;
}

TEST(work_asked_before_close_ends_once_each_and_then_the_handle_is_freed) {
    test_env e;
    env_start(&e, "qc3"); /* e.q runs the worker; q is closed */
    completed = 0;
    rjq_worker *w;
    rjq_worker_options wo = quiet_worker_options(4);
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_r, NULL, &w));
    wait_worker_started(e.base, e.c, e.q, e.rc, "qc3");
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(e.c, "qc3", NULL, &q));
    tally t = {0};
    for (int i = 0; i < 3; i++) ASSERT_OK(rjq_enqueue(q, "x", 1, NULL, count_enqueued, &t));
    /* (payloads of 2 KiB: their batch's reply asks for numbers to send the
     * next batches' payloads ahead, a request that uses the handle again) */
    static char big[2048];
    memset(big, 'b', sizeof big);
    for (int i = 0; i < 2; i++)
        ASSERT_OK(rjq_enqueue(q, big, sizeof big, NULL, count_enqueued, &t));
    for (int i = 0; i < 2; i++)
        ASSERT_OK(rjq_enqueue_await(q, "y", 1, NULL, NULL, count_awaited, &t, NULL));
    ASSERT_OK(rjq_queue_get_stats(q, count_stats, &t));
    ASSERT_OK(rjq_queue_close(q)); /* nothing of it sent yet */
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_close(q)); /* (still there: its work holds it) */
    ASSERT_EQ(2, handles(e.c));
    WAIT_FOR(e.base, t.enqueued + t.awaited + t.stats >= 8, 40000);
    ASSERT_EQ(5, t.enqueued);
    ASSERT_EQ(2, t.awaited);
    ASSERT_EQ(1, t.stats);
    ASSERT_EQ(0, t.bad);
    wait_handles(&e, 1);
    /* every job of it ran, and no callback came twice */
    ASSERT(loop_until_count(e.base, &completed, 7, 10000));
    rjq_stats st = get_stats(e.base, e.q);
    ASSERT_EQ(7, st.enqueued);
    ASSERT_EQ(8, t.enqueued + t.awaited + t.stats);
    env_stop(&e);
}

TEST(enqueues_of_a_closed_handle_end_once_each_before_it_is_freed) {
    test_env e;
    env_start(&e, "qc6");
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(e.c, "qc6", NULL, &q));
    tally t = {0};
    static char big[2048];
    memset(big, 'b', sizeof big);
    /* turn 1: their reply asks for numbers to send payloads ahead (the
     * pool of q's next batches), a request that uses the handle again */
    for (int i = 0; i < 4; i++)
        ASSERT_OK(rjq_enqueue(q, big, sizeof big, NULL, count_enqueued, &t));
    ASSERT_OK(rjq_queue_close(q));
    WAIT_FOR(e.base, t.enqueued >= 4, 40000);
    ASSERT_EQ(4, t.enqueued);
    ASSERT_EQ(0, t.bad);
    wait_handles(&e, 1);
    ASSERT_EQ(4, get_stats(e.base, e.q).ready);
    env_stop(&e);
}

/* ---- closed from inside its own callbacks ----------------------------------- */

typedef struct inside {
    rjq_queue *q;
    int calls, closes, rc;
} inside;

static void close_in_enqueue_cb(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n,
                                void *data) {
    inside *in = data;
    (void)c, (void)jobs, (void)n;
    ASSERT_OK(status);
    if (in->calls++ == 0) {
        in->rc = rjq_queue_close(in->q);
        in->closes++;
    }
}

static void close_in_await_cb(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    inside *in = data;
    (void)c, (void)o;
    ASSERT_OK(status);
    in->calls++;
    if (in->calls == 1) { /* the first of its two awaits */
        in->rc = rjq_queue_close(in->q);
        in->closes++;
    }
}

TEST(closing_a_handle_from_inside_its_own_callbacks_is_safe) {
    test_env e;
    env_start(&e, "qc4");
    completed = 0;
    rjq_worker *w;
    rjq_worker_options wo = quiet_worker_options(2);
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_r, NULL, &w));
    wait_worker_started(e.base, e.c, e.q, e.rc, "qc4");

    /* an enqueue callback closes it: the batch's other callbacks still come */
    inside a = {0, 0, 0, -1};
    ASSERT_OK(rjq_queue_open(e.c, "qc4", NULL, &a.q));
    for (int i = 0; i < 3; i++) ASSERT_OK(rjq_enqueue(a.q, "x", 1, NULL, close_in_enqueue_cb, &a));
    WAIT_FOR(e.base, a.calls >= 3, 40000);
    ASSERT_EQ(3, a.calls);
    ASSERT_EQ(1, a.closes);
    ASSERT_OK(a.rc);
    wait_handles(&e, 1);

    /* an await callback closes it: its other await still ends */
    inside b = {0, 0, 0, -1};
    ASSERT_OK(rjq_queue_open(e.c, "qc4", NULL, &b.q));
    for (int i = 0; i < 2; i++)
        ASSERT_OK(rjq_enqueue_await(b.q, "y", 1, NULL, NULL, close_in_await_cb, &b, NULL));
    WAIT_FOR(e.base, b.calls >= 2, 40000);
    ASSERT_EQ(2, b.calls);
    ASSERT_OK(b.rc);
    wait_handles(&e, 1);
    ASSERT(loop_until_count(e.base, &completed, 5, 10000));
    env_stop(&e);
}

/* ---- the name again; the push channel goes to another handle ----------------- */

static void count_stopped(rjq_worker *w, int status, void *data) {
    (void)w;
    ASSERT_OK(status);
    (*(int *)data)++;
}

/* Stop w, the worker of e.q, wait for its stop, then close e.q: one
 * handle (the other's) is left. */
static void stop_and_close_first(test_env *e, rjq_worker *w) {
    int stopped = 0;
    ASSERT_OK(rjq_worker_stop(w, count_stopped, &stopped));
    ASSERT(loop_until(e->base, &stopped, 5000));
    ASSERT_OK(rjq_queue_close(e->q));
    e->q = NULL;
    wait_handles(e, 1);
}

TEST(reopened_name_is_a_fresh_handle_and_pushes_reach_the_other_handle_of_the_queue) {
    test_env e;
    env_start(&e, "qc5"); /* e.q: the handle that listens on the push channel */
    completed = 0;
    rjq_worker *w1, *w2;
    rjq_worker_options wo = quiet_worker_options(2); /* poll and reclaim: a minute away */
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_r, NULL, &w1));
    wait_worker_started(e.base, e.c, e.q, e.rc, "qc5");
    rjq_queue *h2;
    ASSERT_OK(rjq_queue_open(e.c, "qc5", NULL, &h2));
    ASSERT_OK(rjq_worker_start(h2, &wo, complete_r, NULL, &w2));
    wait_worker_started(e.base, e.c, h2, e.rc, "qc5");
    stop_and_close_first(&e, w1);

    /* h2's idle worker has registered slots: enqueues push to them, on the
     * channel the closed handle listened on (without a listener they would
     * wait a minute for the poll) */
    rjq_queue *again;
    ASSERT_OK(rjq_queue_open(e.c, "qc5", NULL, &again));
    for (int i = 0; i < 2; i++) enqueue_x_ok(e.base, again, NULL, 0, 0);
    ASSERT(loop_until_count(e.base, &completed, 2, 20000));
    rjq_stats st = get_stats(e.base, again);
    ASSERT_EQ(2, st.completed);
    env_stop(&e);
}

/* ---- the upkeep visits of a closed handle stop ---------------------------------- */

static long long script_calls(redisContext *rc) {
    return server_calls(rc, "fcall") + server_calls(rc, "evalsha");
}

TEST(a_closed_handle_is_no_longer_visited_by_the_upkeep) {
    test_env e;
    env_start(&e, "qc7a");
    rjq_worker *wa, *wb;
    rjq_worker_options wo = quiet_worker_options(1);
    wo.reclaim_ms = 50; /* visits every 50 ms */
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_r, NULL, &wa));
    rjq_queue *qb;
    ASSERT_OK(rjq_queue_open(e.c, "qc7b", NULL, &qb));
    ASSERT_OK(rjq_worker_start(qb, &wo, complete_r, NULL, &wb));
    wait_worker_started(e.base, e.c, qb, e.rc, "qc7b");
    stop_and_close_first(&e, wa);
    /* qb's visits go on (each looks at every queue the upkeep visits: ASan
     * and valgrind see none of the freed one's memory read) */
    long long before = script_calls(e.rc);
    WAIT_FOR(e.base, script_calls(e.rc) >= before + 10, 40000);
    env_stop(&e);
}

/* ---- a worker of several queues; the client freed first; an await's timeout --- */

TEST(close_is_refused_on_each_queue_of_a_worker_of_several_until_its_stop) {
    test_env e;
    env_start(&e, "qc8a");
    rjq_queue *qb;
    ASSERT_OK(rjq_queue_open(e.c, "qc8b", NULL, &qb));
    rjq_queue *qs[2] = {e.q, qb};
    rjq_worker *w;
    rjq_worker_options wo = quiet_worker_options(1);
    ASSERT_OK(rjq_worker_start_queues(qs, 2, RJQ_WORKER_STRICT, NULL, &wo, complete_r, NULL, &w));
    ASSERT_EQ(RJQ_EBUSY, rjq_queue_close(e.q));
    ASSERT_EQ(RJQ_EBUSY, rjq_queue_close(qb));
    ASSERT_EQ(2, handles(e.c));
    int stopped = 0;
    ASSERT_OK(rjq_worker_stop(w, count_stopped, &stopped));
    ASSERT(loop_until(e.base, &stopped, 5000));
    ASSERT_OK(rjq_queue_close(e.q));
    ASSERT_OK(rjq_queue_close(qb));
    e.q = NULL;
    wait_handles(&e, 0);
    env_stop(&e);
}

typedef struct ended {
    int calls, status;
} ended;

static void on_ended(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    ended *x = data;
    (void)c, (void)o;
    x->status = status;
    x->calls++;
}

TEST(freeing_the_client_ends_the_awaits_of_a_closed_handle_once_each) {
    test_env e;
    env_start(&e, "qc9"); /* no worker: the awaits wait */
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(e.c, "qc9", NULL, &q));
    ended x[2] = {{0, -1}, {0, -1}};
    for (int i = 0; i < 2; i++)
        ASSERT_OK(rjq_enqueue_await(q, "z", 1, NULL, NULL, on_ended, &x[i], NULL));
    ASSERT_OK(rjq_queue_close(q));
    WAIT_FOR(e.base, get_stats(e.base, e.q).ready == 2, 5000); /* sent, waiting */
    ASSERT_EQ(2, handles(e.c)); /* the closed one lives on: its awaits hold it */
    ASSERT_EQ(0, x[0].calls + x[1].calls);
    rjq_client_free(e.c); /* ASan: the closed handle freed with it, nothing leaked */
    e.c = NULL;
    for (int i = 0; i < 2; i++) {
        ASSERT_EQ(1, x[i].calls);
        ASSERT_EQ(RJQ_ECANCELED, x[i].status);
    }
    env_stop(&e);
}

TEST(an_await_of_a_closed_handle_times_out_once_and_then_the_handle_is_freed) {
    test_env e;
    env_start(&e, "qc10"); /* no worker: the job waits */
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(e.c, "qc10", NULL, &q));
    rjq_await_options ao = RJQ_AWAIT_OPTIONS_INIT;
    ao.timeout_ms = 200;
    ended x = {0, -1};
    ASSERT_OK(rjq_enqueue_await(q, "z", 1, NULL, &ao, on_ended, &x, NULL));
    ASSERT_OK(rjq_queue_close(q));
    ASSERT(loop_until(e.base, &x.calls, 5000));
    ASSERT_EQ(RJQ_ETIMEDOUT, x.status);
    wait_handles(&e, 1);
    ASSERT_EQ(1, x.calls);
    env_stop(&e);
}
