/*
 * One ownership rule for rjq_job_complete() and rjq_job_fail() (issue 37,
 * rjq.h): given a handle, the call releases it whatever happens; every
 * error found before sending comes through the callback, exactly once and
 * never from inside the call; the job is not left to wait out its lease
 * silently where something can be done (a result that cannot be stored, a
 * failure with bad arguments: the attempt is failed under the job's retry
 * policy). A test per promise: the call's return, the callback's code and
 * count, the worker's count of handles (the handle left it), and the job's
 * state in Redis afterwards. Leaks and uses after release show under
 * ASan/valgrind.
 *
 * Linked with the allocation-failure injector (failalloc.h) for the
 * out-of-memory paths: every allocation inside the call fails.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "failalloc.h"
#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

#define MAX_PAYLOAD 100

typedef struct rule_ctx {
    rjq_worker *w;
    int mode;              /* what the handler does with the job */
    int in_call;           /* the handler is inside complete/fail */
    int rc;                /* what complete/fail returned */
    int running_after;     /* rjq_worker_count_running() right after the call */
    long handled;          /* handler runs */
    int last_attempt;
    long cb_calls;
    long retry_done;       /* the retry's completion answered */
    int retry_status;
    int cb_status;
    int cb_inside;         /* callbacks made from inside the call */
    int free_after;        /* free the client right after the call */
    rjq_client *c;
} rule_ctx;

enum { M_TOO_BIG, M_NULL_RESULT, M_BAD_FLAGS, M_BAD_DELAY, M_COMPLETE_NOMEM, M_FAIL_NOMEM, M_CLOSING };

static void on_done(rjq_client *c, int status, void *data) {
    (void)c;
    rule_ctx *x = data;
    x->cb_calls++;
    x->cb_status = status;
    x->cb_inside += x->in_call;
}

static void on_retry_done(rjq_client *c, int status, void *data) {
    (void)c;
    rule_ctx *x = data;
    x->retry_status = status;
    x->retry_done++;
}

static void rule_handler(rjq_job *job, void *data) {
    rule_ctx *x = data;
    x->handled++;
    x->last_attempt = rjq_job_get_attempt(job);
    if (x->handled > 1) { /* the retry the rule's failure scheduled */
        ASSERT_OK(rjq_job_complete(job, "ok", 2, on_retry_done, x));
        return;
    }
    char res[MAX_PAYLOAD + 1];
    memset(res, 'r', sizeof res);
    x->in_call = 1;
    switch (x->mode) {
    case M_TOO_BIG:
        x->rc = rjq_job_complete(job, res, sizeof res, on_done, x);
        break;
    case M_NULL_RESULT:
        x->rc = rjq_job_complete(job, NULL, 5, on_done, x);
        break;
    case M_BAD_FLAGS: /* the FATAL bit among bad ones: still its retry policy */
        x->rc = rjq_job_fail(job, "my failure", RJQ_FAIL_FATAL | 0x40, -1, on_done, x);
        break;
    case M_BAD_DELAY:
        x->rc = rjq_job_fail(job, "my failure", RJQ_FAIL_RETRY, RJQ_DELAY_MAX + 1, on_done, x);
        break;
    case M_COMPLETE_NOMEM:
        failalloc_arm_from(0); /* every allocation of the call fails */
        x->rc = rjq_job_complete(job, "ok", 2, on_done, x);
        failalloc_disarm();
        break;
    case M_CLOSING: /* a free pending: the call is refused, the handle released */
        rjq_client_free(x->c); /* deferred: this is the worker's callback */
        x->c = NULL;
        x->rc = rjq_job_complete(job, "ok", 2, on_done, x);
        break;
    case M_FAIL_NOMEM:
        failalloc_arm_from(0);
        x->rc = rjq_job_fail(job, "no", RJQ_FAIL_RETRY, -1, on_done, x);
        failalloc_disarm();
        break;
    }
    x->in_call = 0;
    x->running_after = rjq_worker_count_running(x->w);
    if (x->free_after) {
        rjq_client_free(x->c); /* deferred: this is the worker's callback */
        x->c = NULL;
    }
}

static rjq_client *client_small(struct event_base *base, const test_server *s) {
    rjq_client_options o = client_options(s->url);
    o.max_payload = MAX_PAYLOAD;
    return client_new(base, &o);
}

typedef struct run {
    test_server s;
    struct event_base *base;
    rjq_client *c;
    rjq_queue *q;
    rule_ctx x;
} run;

/* One job "j1" (max_attempts attempts, 1 ms fixed backoff), a worker whose
 * handler finishes it as mode says; returns once the callback came. */
static void run_mode(run *r, int mode, int max_attempts, int free_after) {
    server_start_guarded(&r->s, NULL);
    r->base = event_base_new();
    r->c = client_small(r->base, &r->s);
    r->q = queue_for(r->c, "rule");
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "j1";
    o.max_attempts = max_attempts;
    o.backoff.type = RJQ_BACKOFF_FIXED;
    o.backoff.base_ms = 1;
    enqueue_wait e = enqueue_job(r->base, r->q, "in", &o);
    ASSERT_OK(e.status);
    memset(&r->x, 0, sizeof r->x);
    r->x.mode = mode;
    r->x.free_after = free_after;
    r->x.c = r->c;
    ASSERT_OK(rjq_worker_start(r->q, NULL, rule_handler, &r->x, &r->x.w));
    if (mode == M_CLOSING) {
        ASSERT(loop_until_count(r->base, &r->x.handled, 1, 10000));
        return;
    }
    ASSERT(loop_until_count(r->base, &r->x.cb_calls, 1, 10000));
    /* the promises of the call itself */
    ASSERT_EQ(1, r->x.cb_calls);
    ASSERT_EQ(0, r->x.cb_inside);
    ASSERT_OK(r->x.rc);
    if (!free_after) ASSERT_EQ(0, r->x.running_after); /* the handle left the worker */
}

static void run_end(run *r) {
    if (r->x.c) rjq_client_free(r->x.c);
    event_base_free(r->base);
    server_stop_guarded(&r->s);
}

/* The job's state and error text in Redis, read by a fresh client. */
static info_wait job_info(run *r) {
    rjq_client *c = client_small(r->base, &r->s);
    rjq_queue *q = queue_for(c, "rule");
    info_wait i = get_info(r->base, q, "j1");
    ASSERT_OK(i.status);
    rjq_client_free(c);
    return i;
}

TEST(complete_and_fail_of_null_job_return_einval) {
    ASSERT_EQ(RJQ_EINVAL, rjq_job_complete(NULL, "", 0, NULL, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_job_fail(NULL, "x", RJQ_FAIL_RETRY, -1, NULL, NULL));
}

/* A result over max_payload: released, cb RJQ_ETOOBIG once, and the
 * attempt failed (its last one: dead) with a text naming the cause. */
TEST(complete_too_big_result_releases_and_fails_the_attempt) {
    run r;
    run_mode(&r, M_TOO_BIG, 1, 0);
    ASSERT_EQ(RJQ_ETOOBIG, r.x.cb_status);
    info_wait i = job_info(&r);
    ASSERT_STREQ("dead", i.state);
    ASSERT(strstr(i.error, "result of 101 bytes exceeds max_payload 100") != NULL);
    ASSERT(!i.has_result);
    ASSERT_EQ(1, (int)r.x.handled);
    run_end(&r);
}

/* The failed attempt was retried: the job ran a second time, and that run's
 * completion went through. */
static void assert_ran_again_and_completed(run *r) {
    ASSERT(loop_until_count(r->base, &r->x.handled, 2, 10000));
    ASSERT_EQ(2, r->x.last_attempt);
    ASSERT(loop_until_count(r->base, &r->x.retry_done, 1, 10000));
    ASSERT_OK(r->x.retry_status);
    ASSERT_STREQ("completed", job_info(r).state);
}

/* ... under the job's retry policy: with attempts left it runs again. */
TEST(complete_too_big_result_is_retried_under_the_retry_policy) {
    run r;
    run_mode(&r, M_TOO_BIG, 2, 0);
    ASSERT_EQ(RJQ_ETOOBIG, r.x.cb_status);
    assert_ran_again_and_completed(&r);
    run_end(&r);
}

TEST(complete_null_result_with_length_releases_and_fails_the_attempt) {
    run r;
    run_mode(&r, M_NULL_RESULT, 1, 0);
    ASSERT_EQ(RJQ_EINVAL, r.x.cb_status);
    info_wait i = job_info(&r);
    ASSERT_STREQ("dead", i.state);
    ASSERT(strstr(i.error, "result NULL with length 5") != NULL);
    run_end(&r);
}

/* Bad flags (even with the FATAL bit): cb RJQ_EINVAL, the job failed with
 * its text under its retry policy, so it runs again, not dead. */
TEST(fail_with_bad_flags_releases_and_fails_under_the_retry_policy) {
    run r;
    run_mode(&r, M_BAD_FLAGS, 2, 0);
    ASSERT_EQ(RJQ_EINVAL, r.x.cb_status);
    assert_ran_again_and_completed(&r);
    run_end(&r);
}

TEST(fail_with_delay_over_max_releases_and_fails_under_the_retry_policy) {
    run r;
    run_mode(&r, M_BAD_DELAY, 1, 0);
    ASSERT_EQ(RJQ_EINVAL, r.x.cb_status);
    info_wait i = job_info(&r);
    ASSERT_STREQ("dead", i.state); /* its one attempt spent */
    ASSERT_STREQ("my failure", i.error);
    run_end(&r);
}

/* Out of memory queueing the completion: released, cb RJQ_ENOMEM from the
 * loop (the queue's tick), nothing sent: the job is still active in Redis
 * (it comes back after its lease). */
TEST(complete_out_of_memory_releases_and_reports_through_cb) {
    run r;
    run_mode(&r, M_COMPLETE_NOMEM, 1, 0);
    ASSERT_EQ(RJQ_ENOMEM, r.x.cb_status);
    ASSERT(failalloc_failures() >= 1);
    info_wait i = job_info(&r);
    ASSERT_STREQ("active", i.state);
    run_end(&r);
}

TEST(fail_out_of_memory_releases_and_reports_through_cb) {
    run r;
    run_mode(&r, M_FAIL_NOMEM, 1, 0);
    ASSERT_EQ(RJQ_ENOMEM, r.x.cb_status);
    ASSERT(failalloc_failures() >= 1);
    info_wait i = job_info(&r);
    ASSERT_STREQ("active", i.state);
    run_end(&r);
}

/* A refused finish not yet reported when the client is freed: the free
 * reports it (once, after the call returned), nothing leaks. */
TEST(refused_finish_reported_once_when_the_client_is_freed_first) {
    run r;
    run_mode(&r, M_COMPLETE_NOMEM, 1, 1);
    ASSERT_EQ(RJQ_ENOMEM, r.x.cb_status);
    ASSERT(r.x.c == NULL); /* freed, and the call had returned */
    run_end(&r);
}

/* The client's free is pending: RJQ_ECLOSED returned, the handle released
 * (LeakSanitizer/valgrind: nothing left), cb never called (not even by
 * the free that follows). */
TEST(finish_while_the_client_is_being_freed_returns_eclosed_and_releases) {
    run r;
    run_mode(&r, M_CLOSING, 1, 0);
    ASSERT_EQ(RJQ_ECLOSED, r.x.rc);
    ASSERT(r.x.c == NULL);
    ASSERT_EQ(0, r.x.cb_calls);
    run_end(&r);
}
