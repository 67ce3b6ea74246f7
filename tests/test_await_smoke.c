/* Smoke test of awaits: enqueue+await, await by id, dead outcome. */
#include "fixture.h"
#include "harness.h"
#include "server.h"

static long resolved;
static int last_status;
static char last_body[64];

static void handler(rjq_job *job, void *data) {
    (void)data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    if (len == 4 && memcmp(p, "fail", 4) == 0) ASSERT_OK(rjq_job_fail(job, "boom", RJQ_FAIL_FATAL, -1, NULL, NULL));
    else ASSERT_OK(rjq_job_complete(job, p, len, NULL, NULL));
}

static void on_outcome(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)c, (void)data;
    last_status = status;
    ASSERT(o != NULL);
    if (status == RJQ_OK) snprintf(last_body, sizeof last_body, "%.*s", (int)o->result_len, (const char *)o->result);
    else if (status == RJQ_EJOBDEAD) snprintf(last_body, sizeof last_body, "%s", o->error);
    resolved++;
}

TEST(await_smoke_complete_dead_and_by_id) {
    test_env e;
    env_open(&e, "aw", NULL); /* the worker and awaits start before the connection is up */
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, NULL, handler, NULL, &w));
    ASSERT_OK(rjq_enqueue_await(e.q, "hi", 2, NULL, NULL, on_outcome, NULL, NULL));
    ASSERT(loop_until_count(e.base, &resolved, 1, 5000));
    ASSERT_EQ(RJQ_OK, last_status);
    ASSERT_STREQ("hi", last_body);
    ASSERT_OK(rjq_enqueue_await(e.q, "fail", 4, NULL, NULL, on_outcome, NULL, NULL));
    ASSERT(loop_until_count(e.base, &resolved, 2, 5000));
    ASSERT_EQ(RJQ_EJOBDEAD, last_status);
    ASSERT_STREQ("boom", last_body);
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "known-1";
    ASSERT_OK(rjq_enqueue(e.q, "x", 1, &o, NULL, NULL));
    ASSERT_OK(rjq_queue_await(e.q, "known-1", NULL, on_outcome, NULL, NULL));
    ASSERT(loop_until_count(e.base, &resolved, 3, 5000));
    ASSERT_EQ(RJQ_OK, last_status);
    ASSERT_STREQ("x", last_body);
    ASSERT_EQ(0, rjq_client_count_awaits(e.c));
    env_stop(&e);
}
