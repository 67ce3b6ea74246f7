/* The queue event stream for monitors. */
#include "fixture.h"
#include "harness.h"
#include "server.h"

static char seen[64][32];
static long long seen_at[64];
static long nseen, completed;
static rjq_monitor *the_monitor;

static void on_event(rjq_client *c, const char *event, const char *id, void *data) {
    (void)c, (void)data;
    if (nseen < 64) {
        seen_at[nseen] = rjq_monitor_time(the_monitor);
        snprintf(seen[nseen++], sizeof seen[0], "%s %s", event, id);
    }
}

static void handler(rjq_job *job, void *data) {
    (void)data;
    int attempt = rjq_job_attempt(job); /* the handle is gone after fail/complete */
    if (attempt == 1) ASSERT_OK(rjq_job_fail(job, "once", 0, 0, NULL, NULL));
    else ASSERT_OK(rjq_job_complete(job, "", 0, NULL, NULL));
    completed += attempt == 2;
}

static int has(const char *what) {
    for (long i = 0; i < nseen; i++)
        if (strcmp(seen[i], what) == 0) return 1;
    return 0;
}

TEST(monitor_sees_each_transition_of_a_retried_job) {
    test_env e;
    env_open(&e, "mon", NULL); /* the monitor starts before the connection is up */
    rjq_monitor *m;
    ASSERT_OK(rjq_queue_monitor(e.q, on_event, NULL, &m));
    the_monitor = m;
    long long before = server_now_ms(e.rc);
    for (int i = 0; i < 200 && server_int(e.rc, "EXISTS t:{mon}:monitored") == 0; i++) loop_for(e.base, 10);
    ASSERT_EQ(1, server_int(e.rc, "EXISTS t:{mon}:monitored"));
    loop_for(e.base, 50); /* let the SUBSCRIBE be confirmed */
    rjq_job_options o = {0};
    o.id = "job-a";
    ASSERT_OK(rjq_enqueue(e.q, "x", 1, &o, NULL, NULL));
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, NULL, handler, NULL, &w));
    ASSERT(loop_until_count(e.base, &completed, 1, 5000));
    for (int i = 0; i < 100 && !has("completed job-a"); i++) loop_for(e.base, 10);
    ASSERT(has("enqueued job-a"));
    ASSERT(has("active job-a"));
    ASSERT(has("failed job-a"));
    ASSERT(has("retried job-a"));
    ASSERT(has("completed job-a"));
    /* each event carries its script's server time, in order */
    long long after = server_now_ms(e.rc);
    for (long i = 0; i < nseen; i++) {
        ASSERT(seen_at[i] >= before && seen_at[i] <= after);
        if (i > 0) ASSERT(seen_at[i] >= seen_at[i - 1]);
    }
    /* once stopped (and the flag gone), scripts publish nothing */
    ASSERT_OK(rjq_monitor_stop(m));
    freeReplyObject(server_cmd(e.rc, "DEL t:{mon}:monitored"));
    o.id = "job-b";
    ASSERT_OK(rjq_enqueue(e.q, "y", 1, &o, NULL, NULL));
    ASSERT(loop_until_count(e.base, &completed, 2, 5000));
    loop_for(e.base, 50);
    ASSERT(!has("enqueued job-b"));
    env_stop(&e);
}
