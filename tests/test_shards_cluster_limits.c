/*
 * Limits of a sharded queue hold for the whole queue on the test cluster
 * (issue 35 "Tests": limits for the whole queue; docs/sharding.md section
 * 4; the standalone figures are tests/test_shards_limits.c): a concurrency
 * of 7 over 3 shards, one on each master, split 3 + 2 + 2, with 2 worker
 * clients of 10 slots each: never more than 7 jobs active at once, more
 * than one shard's share at some moment, every job run once. And a rate of
 * 1000/s over the 3 shards, each on its own master, with 3 worker
 * processes: 1000 starts a second within 5%, never more than 1000 in any
 * second (the jobs' start times, each master's clock as its claim script
 * recorded it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "cluster.h"
#include "fixture.h"
#include "harness.h"
#include "rate_load.h"
#include "server.h"
#include "waits.h"

#define SHARDS 3
#define CONC 7
#define JOBS 120
#define HOLD_MS 20 /* each job's work (a timer), so that jobs overlap */

typedef struct conc_log {
    struct event_base *base;
    long active, most, started, done;
    int runs[JOBS];
} conc_log;

static conc_log held_log;

static void finish_held(evutil_socket_t fd, short what, void *arg) {
    rjq_job *job = arg;
    (void)fd, (void)what;
    held_log.active--; /* (before the completion is sent: inside its time active on the server) */
    ASSERT_OK(rjq_job_complete(job, NULL, 0, on_done_ok, &held_log.done));
}

static void held_handler(rjq_job *job, void *data) {
    conc_log *l = data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    int n = -1;
    ASSERT(sscanf(p, "j-%d", &n) == 1 && n >= 0 && n < JOBS);
    l->runs[n]++;
    l->started++;
    if (++l->active > l->most) l->most = l->active;
    struct timeval tv = {0, HOLD_MS * 1000};
    ASSERT(event_base_once(l->base, -1, EV_TIMEOUT, finish_held, job, &tv) == 0);
}

static void on_batch(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    long *got = data;
    (void)c, (void)jobs;
    ASSERT_OK(status);
    *got += (long)n;
}

/* The test cluster started (cl) and queue qname of SHARDS shards declared
 * on it through client *c (options *o, on *base), one shard on each
 * master. */
static rjq_queue *sharded_one_per_master(test_cluster *cl, struct event_base **base,
                                         rjq_client_options *o, rjq_client **c, const char *qname) {
    cluster_start(cl, 0);
    *base = event_base_new();
    *o = client_options(cl->url);
    *c = client_new(*base, o);
    rjq_queue *q = open_learnt(*base, *c, qname);
    ASSERT_OK(declare_shards(*base, q, SHARDS));
    int seen[CLUSTER_NODES] = {0};
    for (int i = 0; i < SHARDS; i++) ASSERT_EQ(0, seen[cluster_master_of_shard(cl, q, i)]++);
    return q;
}

TEST(concurrency_limit_of_a_sharded_queue_over_3_masters_holds_for_the_whole_queue) {
    test_cluster cl;
    struct event_base *base;
    rjq_client_options o;
    rjq_client *c;
    rjq_queue *q = sharded_one_per_master(&cl, &base, &o, &c, "shcl");
    limits_set(base, q, CONC, 0, 0);
    ASSERT_EQ(CONC, get_stats(base, q).limit_concurrency);

    conc_log *l = &held_log;
    memset(l, 0, sizeof *l);
    l->base = base;
    rjq_client *wc[2];
    rjq_worker *w[2];
    for (int k = 0; k < 2; k++) {
        wc[k] = client_new(base, &o);
        rjq_queue *qk = open_learnt(base, wc[k], "shcl");
        ASSERT_EQ(SHARDS, rjq_queue_count_shards(qk));
        rjq_worker_options wo = quiet_worker_options(10);
        ASSERT_OK(rjq_worker_start(qk, &wo, held_handler, l, &w[k]));
    }
    static rjq_enqueue_item it[JOBS];
    static char payload[JOBS][16];
    for (int i = 0; i < JOBS; i++) {
        snprintf(payload[i], sizeof payload[i], "j-%d", i);
        it[i] = (rjq_enqueue_item)RJQ_ENQUEUE_ITEM_INIT;
        it[i].payload = payload[i];
        it[i].len = strlen(payload[i]);
    }
    long queued = 0;
    ASSERT_OK(rjq_enqueue_batch(q, it, JOBS, on_batch, &queued));
    ASSERT(loop_until_count(base, &queued, JOBS, 20000));
    ASSERT(loop_until_count(base, &l->done, JOBS, 90000));
    for (int k = 0; k < 2; k++) worker_stop_wait(base, w[k]);
    fprintf(stderr, "concurrency %d over %d shards on 3 masters, 2 workers of 10: at most %ld active\n",
            CONC, SHARDS, l->most);
    ASSERT_EQ(JOBS, l->started);
    for (int i = 0; i < JOBS; i++) ASSERT_EQ(1, l->runs[i]);
    ASSERT(l->most <= CONC);
    ASSERT(l->most > CONC / SHARDS + 1); /* the shares add up */
    rjq_stats st = get_stats(base, q);
    ASSERT_EQ(JOBS, st.completed);
    ASSERT_EQ(0, st.ready + st.active + st.delayed);
    for (int k = 0; k < 2; k++) rjq_client_free(wc[k]);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}

TEST(rate_limit_of_a_sharded_queue_over_3_masters_holds_for_the_whole_queue) {
    test_cluster cl;
    struct event_base *base;
    rjq_client_options o;
    rjq_client *c;
    rjq_queue *q = sharded_one_per_master(&cl, &base, &o, &c, "shcr");
    ASSERT_EQ(1, limits_set(base, q, 0, RATE, 1000));
    ASSERT_EQ(RATE, get_stats(base, q).limit_rate);
    /* load on every shard (ids: each on its id's shard), then 3 worker
     * processes of the whole queue (each with its re-splitter) */
    static char ids[RATE_JOBS][RATE_ID_MAX];
    rate_enqueue_ids(base, q, ids, RATE_JOBS);
    enum { WORKERS = 3 };
    pid_t pids[WORKERS];
    for (int k = 0; k < WORKERS; k++) pids[k] = rate_spawn_worker(&cl.node[0], "shcr", SHARDS);
    double end = wait_deadline(120000);
    while (get_stats(base, q).completed < RATE_JOBS) ASSERT(wait_poll(base, end, 50));
    rate_kill_workers(pids, WORKERS);
    char what[80];
    snprintf(what, sizeof what, "rate limit %d/s over %d shards on 3 masters", RATE, SHARDS);
    rate_figures f = rate_measure(base, q, ids, RATE_JOBS, 0, RATE_WINDOW_MS, what);
    ASSERT(f.most <= RATE); /* the shares add up to the whole: never more, in any second */
    ASSERT(f.per_s >= RATE * 0.95 && f.per_s <= RATE * 1.05);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}
