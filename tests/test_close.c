/*
 * Graceful close (issue 13): rjq_client_close() lets running jobs finish
 * until its deadline, hands back the rest with their attempt not counted,
 * sends what was already asked for, then frees the client. Before, the
 * only way out was rjq_client_free(): a failure sent in the same callback
 * never went out, and every running job waited for its lease.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>

#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

typedef struct close_wait {
    int calls;
    rjq_close_report r;
} close_wait;

static void on_closed(const rjq_close_report *r, void *data) {
    close_wait *w = data;
    w->calls++;
    w->r = *r;
}

/* The job's state column ("<state> <attempts> [token]"). */
static void job_state(redisContext *rc, const char *q, const char *id, char *out, size_t cap) {
    redisReply *r = server_cmd(rc, "HGET t:{%s}:state %s", q, id);
    snprintf(out, cap, "%s", r->type == REDIS_REPLY_STRING ? r->str : "(none)");
    freeReplyObject(r);
}

static void assert_state(redisContext *rc, const char *q, const char *id, const char *want) {
    char got[128];
    job_state(rc, q, id, got, sizeof got);
    if (strncmp(got, want, strlen(want)) != 0)
        FAIL_AT(__FILE__, __LINE__, "job %s: state \"%s\", want \"%s...\"", id, got, want);
}

static void enqueue_ids(rjq_queue *q, int n) {
    for (int i = 1; i <= n; i++) {
        char id[16];
        snprintf(id, sizeof id, "j%d", i);
        rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
        jo.id = id;
        ASSERT_OK(rjq_enqueue(q, id, strlen(id), &jo, NULL, NULL));
    }
}

/* ---- running jobs finish until the deadline, the rest is handed back ---- */

static rjq_job *held[8];
static int nheld;
static long done_ok;

static void hold(rjq_job *job, void *data) {
    (void)data;
    held[nheld++] = job;
}

/* A worker of concurrency k that holds what it gets, n jobs j1..jn, and
 * the loop run until it holds k of them. */
static void start_holding(test_env *e, const char *queue, int k, int n) {
    env_start(e, queue);
    nheld = 0;
    rjq_worker *w;
    rjq_worker_options wo = quiet_worker_options(k);
    ASSERT_OK(rjq_worker_start(e->q, &wo, hold, NULL, &w));
    enqueue_ids(e->q, n);
    WAIT_FOR(e->base, nheld >= k, 5000);
    ASSERT_EQ(k, nheld);
}

static void finish_first(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what, (void)arg;
    ASSERT_OK(rjq_job_complete(held[0], "done", 4, on_done_ok, &done_ok));
}

TEST(close_lets_running_jobs_finish_and_hands_back_the_rest) {
    test_env e;
    done_ok = 0;
    start_holding(&e, "close", 3, 5);

    close_wait cw = {0};
    ASSERT_OK(rjq_client_close(e.c, 400, on_closed, &cw));
    ASSERT_EQ(RJQ_EBUSY, rjq_client_close(e.c, 400, on_closed, &cw));
    struct timeval tv = {0, 100 * 1000};
    event_base_once(e.base, -1, EV_TIMEOUT, finish_first, NULL, &tv); /* one finishes in time */
    ASSERT(loop_until(e.base, &cw.calls, 5000));
    e.c = NULL; /* freed */
    ASSERT_EQ(1, done_ok);
    ASSERT_OK(cw.r.status);
    ASSERT_EQ(2, (int)cw.r.handed_back);
    ASSERT_EQ(0, (int)cw.r.cancelled);

    /* The finished one is completed; the two still running and the two
     * never started wait, ready, no attempt spent; nothing waits for a lease. */
    int completed = 0, ready = 0;
    for (int i = 1; i <= 5; i++) {
        char id[16], st[128];
        snprintf(id, sizeof id, "j%d", i);
        job_state(e.rc, "close", id, st, sizeof st);
        if (strncmp(st, "completed 1", 11) == 0) completed++;
        else if (strcmp(st, "ready 0") == 0 || strncmp(st, "ready 0 @", 9) == 0 || /* (then its times) */
                 strcmp(st, "(none)") == 0)
            ready++; /* (none): never started */
        else FAIL_AT(__FILE__, __LINE__, "job %s: state \"%s\"", id, st);
    }
    ASSERT_EQ(1, completed);
    ASSERT_EQ(4, ready);
    ASSERT_EQ(0, server_active_jobs(e.rc, "close"));
    ASSERT_EQ(4, server_int(e.rc, "LLEN t:{close}:ready"));

    /* The handed-back handles are the caller's to drop. */
    ASSERT_EQ(RJQ_ECLOSED, rjq_job_complete(held[1], "late", 4, NULL, NULL));
    ASSERT_EQ(RJQ_ECLOSED, rjq_job_fail(held[2], "late", 0, -1, NULL, NULL));
    WAIT_FOR(e.base, loop_empty(e.base), 5000); /* nothing of the client runs any more */
    ASSERT_EQ(1, cw.calls);
    env_stop(&e);
}

/* ---- what was asked for before the close is sent ------------------------ */

static close_wait fail_close;
static int fail_status, fail_calls;

static void on_failed(rjq_client *c, int status, void *data) {
    (void)c, (void)data;
    fail_calls++;
    fail_status = status;
}

static void fail_and_close(rjq_job *job, void *data) {
    ASSERT_OK(rjq_job_fail(job, "boom", RJQ_FAIL_FATAL, -1, on_failed, NULL));
    ASSERT_OK(rjq_client_close(data, 5000, on_closed, &fail_close));
}

static int enq_calls, enq_status;

static void on_enq(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs, (void)n, (void)data;
    enq_calls++;
    enq_status = status;
}

/* A handler that fails its job and closes the client in the same callback
 * (with rjq_client_free() the failure never went out and the job waited
 * for its lease), and an enqueue made just before a close: both are sent
 * and answered before the client goes. */
TEST(close_sends_what_was_asked_for_before_it) {
    test_env e;
    env_start(&e, "cfail");
    memset(&fail_close, 0, sizeof fail_close);
    fail_calls = enq_calls = 0;
    rjq_worker *w;
    rjq_worker_options wo = quiet_worker_options(1);
    ASSERT_OK(rjq_worker_start(e.q, &wo, fail_and_close, e.c, &w));
    enqueue_ids(e.q, 1);
    ASSERT(loop_until(e.base, &fail_close.calls, 5000));
    e.c = NULL;
    ASSERT_EQ(1, fail_calls);
    ASSERT_OK(fail_status);
    ASSERT_OK(fail_close.r.status);
    ASSERT_EQ(0, (int)fail_close.r.handed_back);
    assert_state(e.rc, "cfail", "j1", "dead 1");
    ASSERT_EQ(0, server_active_jobs(e.rc, "cfail"));

    /* a producer: the enqueue made before the close is answered */
    rjq_client *c = client_for(e.base, &e.s);
    rjq_queue *q = queue_for(c, "cfail");
    close_wait cw = {0};
    ASSERT_OK(rjq_enqueue(q, "x", 1, NULL, on_enq, NULL));
    ASSERT_OK(rjq_client_close(c, 1000, on_closed, &cw));
    ASSERT(loop_until(e.base, &cw.calls, 5000));
    ASSERT_EQ(1, enq_calls);
    ASSERT_OK(enq_status);
    ASSERT_OK(cw.r.status);
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{cfail}:ready"));
    env_stop(&e);
}

/* rjq_client_free() during a close frees at once; the close's callback
 * still comes, once, with RJQ_ECANCELED. */
TEST(free_during_close_reports_ecanceled_once) {
    test_env e;
    start_holding(&e, "cfree", 1, 1);
    close_wait cw = {0};
    ASSERT_OK(rjq_client_close(e.c, 60000, on_closed, &cw));
    /* no event says "the close would have ended by now": it ends once its
     * job is done, or at its deadline a minute away */
    quiet_for(e.base, 50, "the close ends before its held job is done");
    ASSERT_EQ(0, cw.calls);
    rjq_client_free(e.c);
    e.c = NULL;
    ASSERT_EQ(1, cw.calls);
    ASSERT_EQ(RJQ_ECANCELED, cw.r.status);
    ASSERT_EQ(RJQ_ECLOSED, rjq_job_complete(held[0], "", 0, NULL, NULL));
    env_stop(&e);
}

/* An rjq_enqueue_await whose enqueue still waits for the reply channel's
 * subscription when the client closes: the job is sent anyway (the close
 * sends what was asked for); the await ends with RJQ_ECANCELED. Before,
 * the job was dropped and the close reported success. */
static int held_calls, held_status;

static void on_held_await(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)c, (void)o, (void)data;
    held_calls++;
    held_status = status;
}

TEST(close_sends_an_enqueue_still_held_by_its_await) {
    test_env e;
    env_start(&e, "cheld");
    held_calls = 0;
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.id = "held";
    /* the reply channel is subscribed with the first await: not yet confirmed */
    ASSERT_OK(rjq_enqueue_await(e.q, "x", 1, &jo, NULL, on_held_await, NULL, NULL));
    close_wait cw = {0};
    ASSERT_OK(rjq_client_close(e.c, 1000, on_closed, &cw));
    ASSERT(loop_until(e.base, &cw.calls, 5000));
    e.c = NULL;
    ASSERT_OK(cw.r.status);
    ASSERT_EQ(1, held_calls);
    ASSERT_EQ(RJQ_ECANCELED, held_status);
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{cheld}:payload held"));
    env_stop(&e);
}
