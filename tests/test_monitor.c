/* The queue event stream for monitors. */
#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

static char seen[64][32];
static long long seen_at[64];
static long nseen, completed;
static rjq_monitor *the_monitor;

static void on_event(rjq_client *c, const char *event, const char *id, void *data) {
    (void)c, (void)data;
    if (nseen < 64) {
        seen_at[nseen] = rjq_monitor_get_time(the_monitor);
        snprintf(seen[nseen++], sizeof seen[0], "%s %s", event, id);
    }
}

static void handler(rjq_job *job, void *data) {
    (void)data;
    int attempt = rjq_job_get_attempt(job); /* the handle is gone after fail/complete */
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
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{mon}:monitored") == 1, 5000);
    WAIT_FOR(e.base, server_numsub(e.rc, "t:{mon}:events") == 1, 5000);
    ASSERT_EQ(1, server_numsub(e.rc, "t:{mon}:events")); /* subscribed: no event is missed */
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "job-a";
    ASSERT_OK(rjq_enqueue(e.q, "x", 1, &o, NULL, NULL));
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, NULL, handler, NULL, &w));
    ASSERT(loop_until_count(e.base, &completed, 1, 5000));
    WAIT_FOR(e.base, has("completed job-a"), 5000);
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
    subscriber_barrier(e.base, e.c, e.rc); /* anything job-b's scripts published has come */
    ASSERT(!has("enqueued job-b"));
    env_stop(&e);
}

/* env_start on queue, and a monitor of it (the_monitor) with callback cb,
 * once its flag is set and its subscription confirmed. */
static void start_monitored(test_env *e, const char *queue, rjq_monitor_cb *cb) {
    env_start(e, queue);
    rjq_monitor *m;
    ASSERT_OK(rjq_queue_monitor(e->q, cb, NULL, &m));
    WAIT_FOR(e->base, server_int(e->rc, "EXISTS t:{%s}:monitored", queue) == 1, 5000);
    wait_monitoring(e->base, e->c, queue);
    the_monitor = m;
}

static long done_jobs;
static void complete_handler(rjq_job *job, void *data) {
    (void)data;
    ASSERT_OK(rjq_job_complete(job, "", 0, NULL, NULL));
    done_jobs++;
}

/* Enqueue and complete learn that a monitor listens from the one EXISTS
 * that also asks for waiting jobs and run-time limits (enqueue.lua,
 * complete.lua): with jobs waiting and a job with a timeout (the keys
 * ready and deadlines exist too), the events still come. */
TEST(monitor_sees_events_with_jobs_waiting_and_run_time_limits) {
    test_env e;
    start_monitored(&e, "mbk", on_event);
    nseen = 0;
    ASSERT_OK(rjq_enqueue(e.q, "a", 1, NULL, NULL, NULL)); /* job 1 waits: ready exists */
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.timeout_ms = 60000; /* deadlines exists once it runs */
    ASSERT_OK(rjq_enqueue(e.q, "b", 1, &o, NULL, NULL));
    ASSERT_OK(rjq_enqueue(e.q, "c", 1, NULL, NULL, NULL));
    WAIT_FOR(e.base, has("enqueued 3"), 5000);
    ASSERT(has("enqueued 1"));
    ASSERT(has("enqueued 2"));
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 1; /* one job at a time: the others wait meanwhile */
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_handler, NULL, &w));
    ASSERT(loop_until_count(e.base, &done_jobs, 3, 10000));
    WAIT_FOR(e.base, has("completed 3"), 5000);
    ASSERT(has("completed 1"));
    ASSERT(has("completed 2"));
    env_stop(&e);
}

/* The events of one script call travel as one message (one event a line):
 * a batch of 20 enqueues is one PUBLISH of events (and one of the doorbell),
 * not one per job, and every event still reaches the monitor, in order. */
TEST(events_of_one_script_call_travel_in_one_message) {
    test_env e;
    nseen = 0;
    start_monitored(&e, "mon1", on_event);
    rjq_enqueue_item items[20];
    static char ids[20][8];
    rjq_job_options o[20];
    for (int i = 0; i < 20; i++) {
        snprintf(ids[i], sizeof ids[i], "j%d", i);
        o[i] = (rjq_job_options){.size = sizeof(rjq_job_options), .id = ids[i]};
        items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), "x", 1, &o[i]};
    }
    long long publishes = server_calls(e.rc, "publish");
    ASSERT_OK(rjq_enqueue_batch(e.q, items, 20, NULL, NULL));
    WAIT_FOR(e.base, nseen >= 20, 5000);
    ASSERT_EQ(20, nseen);
    for (int i = 0; i < 20; i++) {
        char want[32];
        snprintf(want, sizeof want, "enqueued j%d", i);
        ASSERT_STREQ(want, seen[i]);
        ASSERT(seen_at[i] > 0);
    }
    ASSERT(server_calls(e.rc, "publish") - publishes <= 2);
    env_stop(&e);
}

static long stop_calls;

static void stop_on_first(rjq_client *c, const char *event, const char *id, void *data) {
    (void)c, (void)event, (void)id, (void)data;
    stop_calls++;
    ASSERT_OK(rjq_monitor_stop(the_monitor));
}

/* A callback that stops its monitor on the first event of a message gets
 * none of the message's others (its monitor is freed). */
TEST(monitor_stopped_by_its_callback_mid_message_gets_no_more_events) {
    test_env e;
    stop_calls = 0;
    start_monitored(&e, "mon2", stop_on_first);
    rjq_enqueue_item items[5];
    for (int i = 0; i < 5; i++) items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), "x", 1, NULL};
    enqueue_wait w = {0};
    ASSERT_OK(rjq_enqueue_batch(e.q, items, 5, on_enqueue_wait, &w));
    ASSERT(loop_until(e.base, &w.done, 5000));
    ASSERT(loop_until_count(e.base, &stop_calls, 1, 5000));
    subscriber_barrier(e.base, e.c, e.rc); /* the batch's events have all come */
    ASSERT_EQ(1, stop_calls);
    env_stop(&e);
}

static long resyncs;

static void count_resyncs(rjq_client *c, const char *event, const char *id, void *data) {
    on_event(c, event, id, data);
    if (strcmp(event, "resync") == 0) {
        ASSERT_STREQ("", id);
        resyncs++;
    }
}

/* rjq_monitor_enable_resyncs: "resync" after the subscription is confirmed, again
 * after the subscriber connection was cut (its events meanwhile lost), and
 * after a refresh found the flag lapsed (nothing published meanwhile);
 * events after each resync arrive. A monitor without it never gets one. */
TEST(monitor_resync_follows_each_gap_of_subscription_or_flag) {
    test_env e;
    nseen = 0;
    resyncs = 0;
    start_monitored(&e, "mon3", count_resyncs);
    ASSERT_EQ(0, resyncs); /* not asked for */
    ASSERT_OK(rjq_monitor_enable_resyncs(the_monitor));
    ASSERT(loop_until_count(e.base, &resyncs, 1, 5000)); /* confirmed already: one soon */
    /* the subscriber connection cut: a resync once it is back */
    freeReplyObject(server_cmd(e.rc, "CLIENT KILL TYPE pubsub"));
    ASSERT(loop_until_count(e.base, &resyncs, 2, 10000));
    rjq_job_options o = {.size = sizeof(rjq_job_options), .id = "after-cut"};
    ASSERT_OK(rjq_enqueue(e.q, "x", 1, &o, NULL, NULL));
    WAIT_FOR(e.base, has("enqueued after-cut"), 20000);
    /* the flag lapsed: the next refresh finds it gone and says so */
    freeReplyObject(server_cmd(e.rc, "DEL t:{mon3}:monitored"));
    ASSERT(loop_until_count(e.base, &resyncs, 3, 15000));
    ASSERT_EQ(1, server_int(e.rc, "EXISTS t:{mon3}:monitored"));
    o.id = "after-lapse";
    ASSERT_OK(rjq_enqueue(e.q, "x", 1, &o, NULL, NULL));
    WAIT_FOR(e.base, has("enqueued after-lapse"), 20000);
    ASSERT_EQ(3, resyncs);
    env_stop(&e);
}
