/* The limits and load of the sharded queues' tests (rate_load.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "fixture.h"
#include "harness.h"
#include "rate_load.h"
#include "waits.h"

long long limits_set(struct event_base *base, rjq_queue *q, long concurrency, long rate,
                     long window_ms) {
    rjq_limits l = RJQ_LIMITS_INIT;
    l.concurrency = concurrency;
    l.rate = rate;
    l.rate_window_ms = window_ms;
    count_wait w = {0};
    ASSERT_OK(rjq_queue_set_limits(q, &l, on_count, &w));
    ASSERT(loop_until(base, &w.done, 10000));
    loop_turn(base);
    ASSERT_EQ(1, w.done);
    ASSERT_OK(w.status);
    return w.n;
}

static void on_queued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    long *got = data;
    (void)c, (void)jobs;
    ASSERT_OK(status);
    *got += (long)n;
}

void enqueue_on_shard(struct event_base *base, rjq_queue *q, int s, int n) {
    static rjq_enqueue_item it[500];
    char payload[2] = {(char)('0' + s), 0};
    ASSERT(n <= 500);
    for (int i = 0; i < n; i++) {
        it[i] = (rjq_enqueue_item)RJQ_ENQUEUE_ITEM_INIT;
        it[i].payload = payload;
        it[i].len = 1;
    }
    long queued = 0;
    ASSERT_OK(rjq_enqueue_batch(rjq_queue_get_shard(q, s), it, (size_t)n, on_queued, &queued));
    ASSERT(loop_until_count(base, &queued, n, 10000));
}

void on_enqueue_count(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    long *counts = data; /* [0] answers, [1] taken, [2] refused full */
    (void)c, (void)jobs, (void)n;
    counts[0]++;
    if (status == RJQ_OK) counts[1]++;
    else if (status == RJQ_EFULL) counts[2]++;
    else FAIL_AT(__FILE__, __LINE__, "enqueue: %s", rjq_strerror(status));
}

static long batches;

static void on_batched(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs, (void)data;
    ASSERT_OK(status);
    ASSERT(n > 0);
    batches++;
}

void rate_enqueue_ids(struct event_base *base, rjq_queue *q, char (*ids)[RATE_ID_MAX], int n) {
    static rjq_job_options o[1000];
    static rjq_enqueue_item items[1000];
    for (int at = 0; at < n; at += 1000) {
        int k = n - at < 1000 ? n - at : 1000;
        for (int i = 0; i < k; i++) {
            items[i] = (rjq_enqueue_item)RJQ_ENQUEUE_ITEM_INIT;
            items[i].payload = "x";
            items[i].len = 1;
            if (ids == NULL) continue; /* (anonymous) */
            snprintf(ids[at + i], RATE_ID_MAX, "r-%d", at + i);
            o[i] = (rjq_job_options)RJQ_JOB_OPTIONS_INIT;
            o[i].id = ids[at + i];
            items[i].opts = &o[i];
        }
        long target = batches + 1;
        ASSERT_OK(rjq_enqueue_batch(q, items, (size_t)k, on_batched, NULL));
        ASSERT(loop_until_count(base, &batches, target, 20000));
    }
}

static void complete_now(rjq_job *job, void *data) {
    (void)data;
    ASSERT_OK(rjq_job_complete(job, NULL, 0, NULL, NULL));
}

pid_t rate_spawn_worker(const test_server *s, const char *name, int shards) {
    pid_t pid = fork_child();
    if (pid != 0) return pid;
    struct event_base *base = event_base_new();
    rjq_client *c = client_for(base, s);
    rjq_queue *q = open_learnt(base, c, name);
    ASSERT_EQ(shards, rjq_queue_count_shards(q));
    rjq_worker_options wo = quiet_worker_options(100);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, complete_now, NULL, &w));
    serve_until_killed(base, 120000);
}

static int by_time(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

void rate_kill_workers(const pid_t *pids, int n) {
    for (int k = 0; k < n; k++) {
        kill(pids[k], SIGKILL);
        reap(pids[k], 5000);
    }
}

rate_figures rate_measure(struct event_base *base, rjq_queue *q, char (*ids)[RATE_ID_MAX], int n,
                          long from_ms, long window_ms, const char *what) {
    long long *t = malloc((size_t)n * sizeof *t);
    ASSERT(t && n > 0);
    for (int i = 0; i < n; i++) {
        info_wait w = get_info(base, q, ids[i]);
        ASSERT_OK(w.status);
        ASSERT_STREQ("completed", w.state);
        ASSERT(w.started_ms > 0);
        t[i] = w.started_ms;
    }
    qsort(t, (size_t)n, sizeof t[0], by_time);
    rate_figures f = {0};
    for (long i = 0, j = 0; i < n; i++) {
        if (t[i] >= t[0] + from_ms && t[i] < t[0] + from_ms + window_ms) f.in_window++;
        while (t[j] <= t[i] - 1000) j++;
        if (i - j + 1 > f.most) f.most = i - j + 1;
    }
    free(t);
    f.per_s = (double)f.in_window * 1000.0 / (double)window_ms;
    fprintf(stderr, "%s: %ld starts in the %ld ms from %ld ms after the first, %.1f/s; most in "
                    "any 1000 ms: %ld\n", what, f.in_window, window_ms, from_ms, f.per_s, f.most);
    return f;
}
