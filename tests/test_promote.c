/*
 * rjq_queue_promote: "run now" for a delayed job (issue 38). A delayed job
 * (or one waiting for a retry) becomes ready at once, its attempts and
 * error kept; a job in any other state is refused with RJQ_ESTATE and
 * left as it was; an unknown id is RJQ_ENOTFOUND.
 */
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

static count_wait promote(test_env *e, const char *id) {
    count_wait w = {0};
    ASSERT_OK(rjq_queue_promote(e->q, id, on_count, &w));
    ASSERT(loop_until(e->base, &w.done, 5000));
    ASSERT_EQ(1, w.done);
    return w;
}

TEST(promote_makes_a_delayed_job_ready_at_once_and_refuses_other_states) {
    test_env e;
    env_start(&e, "pm");
    enqueue_x_ok(e.base, e.q, "d", 3600000, 0); /* an hour away */
    enqueue_x_ok(e.base, e.q, "p", 3600000, 5); /* a priority one */
    enqueue_x_ok(e.base, e.q, "r", 0, 0);       /* ready already */
    ASSERT_STREQ("delayed", get_info(e.base, e.q, "d").state);
    count_wait w = promote(&e, "d");
    ASSERT_OK(w.status);
    ASSERT_EQ(1, w.n);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "d").state);
    ASSERT_EQ(0, server_int(e.rc, "ZSCORE t:{pm}:delayed d"));
    ASSERT_EQ(2, server_int(e.rc, "LLEN t:{pm}:ready"));
    ASSERT_EQ(0, server_int(e.rc, "LPOS t:{pm}:ready r")); /* last of its class */
    ASSERT_EQ(1, server_int(e.rc, "LPOS t:{pm}:ready d"));
    ASSERT_OK(promote(&e, "p").status);
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{pm}:prio"));
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{pm}:delayed"));
    /* again: it is ready now, refused, nothing moves */
    w = promote(&e, "d");
    ASSERT_EQ(RJQ_ESTATE, w.status);
    ASSERT_EQ(2, server_int(e.rc, "LLEN t:{pm}:ready"));
    ASSERT_EQ(RJQ_ESTATE, promote(&e, "r").status);
    ASSERT_EQ(RJQ_ENOTFOUND, promote(&e, "nope").status);
    ASSERT_EQ(RJQ_EJOBID, rjq_queue_promote(e.q, "a b", on_count, NULL));
    ASSERT_EQ(RJQ_EJOBID, rjq_queue_promote(e.q, "", on_count, NULL));
    rjq_stats st = get_stats(e.base, e.q);
    ASSERT_EQ(3, st.ready);
    ASSERT_EQ(0, st.delayed);
    env_stop(&e);
}

/* A job waiting for its retry's backoff runs now, its attempt count and
 * error kept; the worker takes it at once. */
TEST(promote_runs_a_job_waiting_for_a_retry_now_keeping_its_attempts) {
    test_env e;
    env_start(&e, "pr");
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "j";
    ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    last_held held = {0};
    ASSERT_OK(rjq_worker_start(e.q, &wo, hold_last_handler, &held, &w));
    ASSERT(loop_until_count(e.base, &held.started, 1, 5000));
    long fails = 0;
    ASSERT_OK(rjq_job_fail(held.job, "boom", RJQ_FAIL_RETRY, 3600000, on_done_ok, &fails));
    ASSERT(loop_until_count(e.base, &fails, 1, 5000));
    info_wait i = get_info(e.base, e.q, "j");
    ASSERT_STREQ("delayed", i.state);
    ASSERT_EQ(1, i.attempts);
    ASSERT_OK(promote(&e, "j").status);
    ASSERT(loop_until_count(e.base, &held.started, 2, 5000));
    i = get_info(e.base, e.q, "j");
    ASSERT_STREQ("active", i.state);
    ASSERT_EQ(2, i.attempts);
    ASSERT_STREQ("boom", i.error);
    long done = 0;
    ASSERT_OK(rjq_job_complete(held.job, "", 0, on_done_ok, &done));
    ASSERT(loop_until_count(e.base, &done, 1, 5000));
    worker_stop_wait(e.base, w);
    env_stop(&e);
}
