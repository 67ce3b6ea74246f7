/*
 * rjq_progress_cb's promise (rjq.h): progress reported before a job's
 * outcome reaches on_progress before the outcome reaches the await's
 * callback, also when both beat the enqueue's reply. Before, an early
 * outcome was kept for the await but early progress was dropped: under
 * load (the loop reading the subscriber's messages before the command
 * connection's reply) awaits lost progress, as
 * test_cluster_pubsub.awaits_push_doorbells_progress_and_cancel... once
 * did under ASan. The order is made here, not hoped for: a proxy holds
 * the enqueue's reply while the job runs on another client.
 */
#include <stdio.h>
#include <string.h>

#include <event2/event.h>

#include "await.h" /* white-box: the early list's count */
#include "fixture.h"
#include "harness.h"
#include "proxy.h"
#include "server.h"
#include "waits.h"

static char seen[256]; /* what the producer heard, in order */
static long answered;

static void note(const char *what, size_t len) {
    size_t n = strlen(seen);
    if (n + len + 2 < sizeof seen) snprintf(seen + n, sizeof seen - n, "%.*s ", (int)len, what);
}

static void on_progress(rjq_client *c, const char *id, const void *p, size_t len, void *data) {
    (void)c, (void)id, (void)data;
    note(p, len);
}

static void on_awaited(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)c, (void)data;
    ASSERT_OK(status);
    note(o->result, o->result_len);
    answered++;
}

static void handler(rjq_job *job, void *data) {
    (void)data;
    ASSERT_OK(rjq_job_report_progress(job, "p1", 2));
    ASSERT_OK(rjq_job_report_progress(job, "p2", 2));
    ASSERT_OK(rjq_job_complete(job, "R", 1, on_done_ok, NULL));
}

static size_t early(const rjq_client *c) {
    const char *channel;
    size_t inflight, n;
    unsigned long long dropped;
    rjq__awaits_inspect(c, &channel, &inflight, &n, &dropped);
    return n;
}

TEST(progress_that_beats_the_enqueue_reply_is_delivered_before_the_outcome) {
    test_env e;
    proxy p;
    env_start_proxied(&e, &p, "porder", NULL);
    rjq_client *c = e.c;
    /* the worker: a second client, straight to Redis */
    rjq_client *c2 = client_for(e.base, &e.s);
    rjq_queue *q2 = queue_for(c2, "porder");
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w2;
    ASSERT_OK(rjq_worker_start(q2, &wo, handler, NULL, &w2));
    wait_worker_started(e.base, c2, q2, e.rc, "porder"); /* idle: the job is pushed to it */

    proxy_hold(&p, 1); /* the enqueue's reply waits in the proxy */
    seen[0] = '\0';
    answered = 0;
    rjq_await_options ao = RJQ_AWAIT_OPTIONS_INIT;
    ao.on_progress = on_progress;
    ASSERT_OK(rjq_enqueue_await(e.q, "x", 1, NULL, &ao, on_awaited, NULL, NULL));
    /* the job runs: its two progress messages and its outcome reach the
     * producer before the enqueue's reply (kept early: 3) */
    double until = wait_deadline(5000);
    while (early(c) < 3 && wait_step(e.base, until)) {
    }
    ASSERT_EQ(0, answered);
    proxy_hold(&p, 0);
    ASSERT(loop_until_count(e.base, &answered, 1, 10000));
    ASSERT_STREQ("p1 p2 R ", seen);

    rjq_client_free(c2);
    rjq_client_free(c);
    e.c = NULL;
    proxy_stop(&p);
    env_stop(&e);
}
