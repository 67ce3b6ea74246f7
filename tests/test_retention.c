/*
 * Retention of completed jobs: their records (every column of
 * src/lua/lib.lua) are deleted oldest first beyond the queue's
 * completed_max, and past its retention_ms, by completion calls and by the
 * reclaim sweep (so an idle queue is cleaned up too); jobs that have not
 * completed are never touched, and -1/-1 keeps everything.
 *
 * No timing assertion: waits are safety nets; "past the retention time" is
 * a retention of 1 ms and a 20 ms pause before the sweep is asked for.
 */
#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

static const char *const columns[] = {"payload", "state",     "options", "result",
                                      "error",   "failtoken", "watchers"};

/* Job ids in the retention index of queue q (entries "<time> <id> ..."). */
static long long indexed(redisContext *rc, const char *q) {
    redisReply *r = server_cmd(rc, "LRANGE t:{%s}:completed 0 -1", q);
    long long n = 0;
    for (size_t i = 0; i < r->elements; i++)
        for (const char *p = r->element[i]->str; *p; p++) n += *p == ' ';
    freeReplyObject(r);
    return n;
}

/* Most entries any job column of queue q holds. */
static long long max_column_len(redisContext *rc, const char *q) {
    long long most = 0;
    for (size_t i = 0; i < sizeof columns / sizeof columns[0]; i++) {
        long long n = server_int(rc, "HLEN t:{%s}:%s", q, columns[i]);
        if (n > most) most = n;
    }
    return most;
}

static void complete_handler(rjq_job *job, void *data) {
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    char res[64];
    int n = snprintf(res, sizeof res, "r:%.*s", (int)len, p);
    ASSERT_OK(rjq_job_complete(job, res, (size_t)n, on_done_ok, data));
}

/* The shared environment (test_env) with queue `name` under the given
 * retention limits. */
static void ret_start(test_env *e, const char *name, long long retention_ms, long completed_max) {
    rjq_queue_options o = {.size = sizeof(rjq_queue_options), .retention_ms = retention_ms, .completed_max = completed_max};
    env_start_queue(e, name, &o);
}

/* Enqueue jobs id<NN> (payload p<NN>) for NN in 1..n and wait for the
 * replies. Zero-padded ids sort like their completion order, so ties of
 * completion time (same ms) cannot reorder them. */
static void enqueue_ids(struct event_base *base, rjq_queue *q, const char *id, int n) {
    for (int i = 1; i <= n; i++) {
        char jid[32], payload[32];
        snprintf(jid, sizeof jid, "%s%02d", id, i);
        snprintf(payload, sizeof payload, "p%02d", i);
        rjq_job_options o = {.size = sizeof(rjq_job_options), .id = jid};
        ASSERT_OK(rjq_enqueue(q, payload, strlen(payload), &o, NULL, NULL));
    }
    get_stats(base, q); /* a round trip: the enqueues are done */
}

static void on_stopped(rjq_worker *w, int status, void *data) {
    (void)w;
    ASSERT_OK(status);
    *(int *)data = 1;
}

/* Run a worker (concurrency 1: completions in enqueue order, one per
 * completion call) until n jobs completed, then stop it. reclaim_ms: its
 * sweep period (0: the default). */
static void run_worker_with(struct event_base *base, rjq_queue *q, long n, long reclaim_ms) {
    long done = 0;
    rjq_worker_options wo = {.size = sizeof(rjq_worker_options), .concurrency = 1, .reclaim_ms = reclaim_ms};
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, complete_handler, &done, &w));
    ASSERT(loop_until_count(base, &done, n, 20000));
    int stopped = 0;
    ASSERT_OK(rjq_worker_stop(w, on_stopped, &stopped));
    ASSERT(loop_until(base, &stopped, 10000));
}

static void run_worker(struct event_base *base, rjq_queue *q, long n) {
    run_worker_with(base, q, n, 0);
}

static long long sweep(struct event_base *base, rjq_queue *q) {
    count_wait cw = {0};
    ASSERT_OK(rjq_queue_reclaim(q, on_count, &cw));
    ASSERT(loop_until(base, &cw.done, 10000));
    ASSERT_OK(cw.status);
    return cw.n;
}

TEST(completed_beyond_count_cap_deleted_oldest_first) {
    test_env e;
    ret_start(&e, "cap", -1, 5);

    enqueue_ids(e.base, e.q, "c", 12);
    run_worker(e.base, e.q, 12);

    ASSERT_EQ(12, get_stats(e.base, e.q).completed);
    ASSERT_EQ(5, indexed(e.rc, "cap"));
    ASSERT_EQ(5, server_int(e.rc, "HLEN t:{cap}:result"));
    ASSERT_EQ(5, max_column_len(e.rc, "cap")); /* no column keeps a deleted job */
    for (int i = 1; i <= 12; i++) {
        char id[8];
        snprintf(id, sizeof id, "c%02d", i);
        info_wait iw = get_info(e.base, e.q, id);
        if (i <= 7) {
            ASSERT_EQ(RJQ_ENOTFOUND, iw.status);
        } else {
            char want[8];
            snprintf(want, sizeof want, "r:p%02d", i);
            ASSERT_OK(iw.status);
            ASSERT_STREQ("completed", iw.state);
            ASSERT_STREQ(want, iw.result);
        }
    }
    env_stop(&e);
}

TEST(completed_past_retention_deleted_by_sweep_on_idle_queue) {
    test_env e;
    ret_start(&e, "age", 1, -1);

    enqueue_ids(e.base, e.q, "a", 3);
    run_worker(e.base, e.q, 3);
    /* The last completion call cannot have deleted its own job (completed
     * "now", not 1 ms ago) and no completion comes after it. */
    enqueue_ids(e.base, e.q, "waiting", 1); /* no worker: it stays ready */
    wait_server_clock(e.base, e.rc, 2); /* the a jobs are past the 1 ms retention */
    sweep(e.base, e.q);

    ASSERT_EQ(0, indexed(e.rc, "age"));
    ASSERT_EQ(0, server_int(e.rc, "HLEN t:{age}:result"));
    ASSERT_EQ(1, server_int(e.rc, "HLEN t:{age}:payload")); /* the waiting job */
    ASSERT_EQ(1, max_column_len(e.rc, "age"));
    ASSERT_EQ(RJQ_ENOTFOUND, get_info(e.base, e.q, "a03").status);
    info_wait iw = get_info(e.base, e.q, "waiting01");
    ASSERT_OK(iw.status);
    ASSERT_STREQ("ready", iw.state);
    ASSERT_EQ(1, get_stats(e.base, e.q).ready);
    env_stop(&e);
}

TEST(no_retention_limits_keep_every_completed_job) {
    test_env e;
    ret_start(&e, "keep", -1, -1);

    enqueue_ids(e.base, e.q, "k", 20);
    run_worker(e.base, e.q, 20);
    wait_server_clock(e.base, e.rc, 2); /* past any age limit there might be */
    sweep(e.base, e.q);

    ASSERT_EQ(20, indexed(e.rc, "keep"));
    ASSERT_EQ(20, server_int(e.rc, "HLEN t:{keep}:result"));
    info_wait iw = get_info(e.base, e.q, "k01");
    ASSERT_OK(iw.status);
    ASSERT_STREQ("r:p01", iw.result);
    env_stop(&e);
}

/* Completion calls apply the age limit in batches: a record past its time
 * is deleted once 64 more jobs completed (lib.lua, sweep_due), without
 * the workers' reclaim sweep (its period here is far beyond the test). */
TEST(completion_calls_delete_records_past_retention_within_64_jobs) {
    test_env e;
    ret_start(&e, "batch", 1, -1);

    enqueue_ids(e.base, e.q, "a", 10);
    run_worker_with(e.base, e.q, 10, 600000);
    wait_server_clock(e.base, e.rc, 2); /* the a jobs are now past the 1 ms retention */
    enqueue_ids(e.base, e.q, "b", 64);
    run_worker_with(e.base, e.q, 64, 600000);

    for (int i = 1; i <= 10; i++) {
        char id[8];
        snprintf(id, sizeof id, "a%02d", i);
        ASSERT_EQ(RJQ_ENOTFOUND, get_info(e.base, e.q, id).status);
    }
    ASSERT(indexed(e.rc, "batch") < 64);
    ASSERT_EQ(74, get_stats(e.base, e.q).completed); /* deleted, still counted */
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{batch}:sweep")); /* no reclaim sweep ran */
    env_stop(&e);
}

/* A count cap of 64 jobs or more is applied in batches: past the cap, the
 * oldest go down to 1/64 of the cap below it (at most 64), so the index
 * stays within [cap - cap/64, cap]. Here the sweeps come at 641 kept and
 * then every 11 jobs, and the 700th job leaves 634 (640 would mean a
 * sweep on every call). */
TEST(large_count_cap_kept_within_one_64th_below_it) {
    test_env e;
    ret_start(&e, "bigcap", -1, 640); /* slack 10 */

    enqueue_ids(e.base, e.q, "j", 700);
    run_worker(e.base, e.q, 700);

    long long kept = indexed(e.rc, "bigcap");
    ASSERT(kept >= 630 && kept < 640);
    ASSERT_EQ(kept, server_int(e.rc, "HLEN t:{bigcap}:result"));
    ASSERT_EQ(kept, max_column_len(e.rc, "bigcap"));
    ASSERT_EQ(RJQ_ENOTFOUND, get_info(e.base, e.q, "j01").status);
    ASSERT_EQ(RJQ_OK, get_info(e.base, e.q, "j700").status);
    ASSERT_EQ(700, get_stats(e.base, e.q).completed);
    env_stop(&e);
}
