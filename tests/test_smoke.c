/* End-to-end smoke: enqueue, work, complete, stats. */
#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

static long done_count, handled;

static void handler(rjq_job *job, void *data) {
    (void)data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    handled++;
    ASSERT_OK(rjq_job_complete(job, p, len, on_done_ok, &done_count));
}

static long enqueued;
static void on_enq(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs, (void)data;
    ASSERT_OK(status);
    enqueued += (long)n;
}

static int got_stats;
static rjq_stats last;
static void on_stats(rjq_client *c, int status, const rjq_stats *s, void *data) {
    (void)c, (void)data;
    ASSERT_OK(status);
    last = *s;
    got_stats = 1;
}

TEST(smoke_enqueue_work_complete) {
    test_env e;
    env_open(&e, "smoke", NULL); /* the enqueues wait for the connection */
    for (int i = 0; i < 100; i++) ASSERT_OK(rjq_enqueue(e.q, "hello", 5, NULL, on_enq, NULL));
    ASSERT(loop_until_count(e.base, &enqueued, 100, 5000));
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 10;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, handler, NULL, &w));
    ASSERT(loop_until_count(e.base, &done_count, 100, 5000));
    ASSERT_OK(rjq_queue_get_stats(e.q, on_stats, NULL));
    ASSERT(loop_until(e.base, &got_stats, 5000));
    ASSERT_EQ(100, last.enqueued);
    ASSERT_EQ(100, last.completed);
    ASSERT_EQ(0, last.ready);
    ASSERT_EQ(0, last.active);
    env_stop(&e);
}
