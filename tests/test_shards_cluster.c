/*
 * Sharded queues on the test cluster (issue 35, docs/sharding.md; 3
 * masters, 3 replicas, tests/cluster.c): the shards of a 3-shard queue
 * land on the 3 masters, those of a 6-shard queue two on each; a second
 * client learns the declaration; ids dedup across retries from another
 * client (same id, same shard); one worker drains the 6-shard queue with
 * nothing lost or run twice and every master running its shards' jobs;
 * awaits are answered once; pause/resume span the masters, a cancel by id
 * reaches its shard, the ready jobs list merged; a failover keeps the placement (the shards
 * stay with their slots, on the promoted replica) and the work.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "cluster.h"
#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

static void declare(struct event_base *base, rjq_queue *q, int n) {
    ASSERT_OK(declare_shards(base, q, n));
    ASSERT_EQ(n, rjq_queue_count_shards(q));
}

#define JOBS 300

typedef struct drain_log {
    long done, started;
    int runs[JOBS];
    rjq_queue *q;
    int per_shard[6];
} drain_log;

static void handler(rjq_job *job, void *data) {
    drain_log *l = data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    int n = -1;
    ASSERT(sscanf(p, "j-%d", &n) == 1 && n >= 0 && n < JOBS);
    l->runs[n]++;
    for (int i = 0; i < 6; i++)
        if (rjq_job_get_queue(job) == rjq_queue_get_shard(l->q, i)) l->per_shard[i]++;
    l->started++;
    ASSERT_OK(rjq_job_complete(job, p, len, on_done_ok, &l->done));
}

typedef struct batch_wait {
    int done, status;
    size_t n, existed;
} batch_wait;

static void on_batch(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    batch_wait *w = data;
    (void)c;
    w->done++;
    w->status = status;
    w->n = n;
    for (size_t i = 0; i < n; i++) w->existed += (size_t)rjq_enqueued_get(jobs, i)->existed;
}

typedef struct await_log {
    long done, ok;
} await_log;

static void on_awaited(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    await_log *a = data;
    (void)c, (void)o;
    a->done++;
    if (status == RJQ_OK) a->ok++;
}

typedef struct cancel_wait {
    int done, status;
} cancel_wait;

static void on_cancel_state(rjq_client *c, int status, const char *state, void *data) {
    cancel_wait *w = data;
    (void)c, (void)state;
    w->done++;
    w->status = status;
}

typedef struct ids_wait {
    int done, status;
    size_t n;
} ids_wait;

static void on_ids(rjq_client *c, int status, const char *const *ids, size_t n, void *data) {
    ids_wait *w = data;
    (void)c, (void)ids;
    w->done++;
    w->status = status;
    w->n = n;
}

TEST(shards_on_distinct_masters_ids_dedup_and_one_worker_drains_them) {
    test_cluster cl;
    cluster_start(&cl, 0);
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(cl.url);
    rjq_client *c = client_new(base, &o), *c2 = client_new(base, &o);

    /* 3 shards on 3 masters */
    rjq_queue *q3 = open_learnt(base, c, "shc3");
    declare(base, q3, 3);
    int seen[CLUSTER_NODES] = {0};
    for (int i = 0; i < 3; i++) seen[cluster_master_of_shard(&cl, q3, i)]++;
    for (int m = 0; m < CLUSTER_NODES; m++) ASSERT(seen[m] == 0 || seen[m] == 1);

    /* 6 shards: two on each master */
    rjq_queue *q = open_learnt(base, c, "shc6");
    declare(base, q, 6);
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < 6; i++) seen[cluster_master_of_shard(&cl, q, i)]++;
    int masters = 0;
    for (int m = 0; m < CLUSTER_NODES; m++) {
        ASSERT(seen[m] == 0 || seen[m] == 2);
        masters += seen[m] == 2;
    }
    ASSERT_EQ(3, masters);

    /* a second client learns it */
    rjq_queue *q2 = open_learnt(base, c2, "shc6");
    ASSERT_EQ(6, rjq_queue_count_shards(q2));
    for (int i = 0; i < 6; i++)
        ASSERT_STREQ(rjq_queue_get_name(rjq_queue_get_shard(q, i)),
                     rjq_queue_get_name(rjq_queue_get_shard(q2, i)));

    /* jobs: every other one with an id; the id ones enqueued again from
     * the second client exist already */
    static char names[JOBS][16];
    static rjq_job_options jo[JOBS];
    static rjq_enqueue_item it[JOBS];
    for (int i = 0; i < JOBS; i++) {
        snprintf(names[i], sizeof names[i], "j-%d", i);
        jo[i] = (rjq_job_options)RJQ_JOB_OPTIONS_INIT;
        jo[i].id = names[i];
        it[i] = (rjq_enqueue_item)RJQ_ENQUEUE_ITEM_INIT;
        it[i].payload = names[i];
        it[i].len = strlen(names[i]);
        it[i].opts = i % 2 ? &jo[i] : NULL;
    }
    batch_wait b = {0};
    ASSERT_OK(rjq_enqueue_batch(q, it, JOBS, on_batch, &b));
    ASSERT(loop_until(base, &b.done, 20000));
    ASSERT_OK(b.status);
    ASSERT_EQ(JOBS, b.n);
    ASSERT_EQ(0, b.existed);
    static rjq_enqueue_item again[JOBS / 2];
    for (int i = 0; i < JOBS / 2; i++) again[i] = it[2 * i + 1];
    batch_wait b2 = {0};
    ASSERT_OK(rjq_enqueue_batch(q2, again, JOBS / 2, on_batch, &b2));
    ASSERT(loop_until(base, &b2.done, 20000));
    ASSERT_OK(b2.status);
    ASSERT_EQ(JOBS / 2, b2.existed);
    rjq_stats st = get_stats(base, q2);
    ASSERT_EQ(JOBS, st.ready);

    /* one worker drains them all, each once, from every shard */
    static drain_log l;
    memset(&l, 0, sizeof l);
    l.q = q;
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 8;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, handler, &l, &w));
    if (!loop_until_count(base, &l.done, JOBS, 60000))
        FAIL_AT(__FILE__, __LINE__, "%ld of %d jobs done", l.done, JOBS);
    for (int i = 0; i < JOBS; i++) ASSERT_EQ(1, l.runs[i]);
    for (int i = 0; i < 6; i++) ASSERT(l.per_shard[i] > 0);

    /* awaits through the other client, answered once by the worker */
    static await_log a;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < 30; i++) {
        char p[16];
        snprintf(p, sizeof p, "j-%d", i);
        rjq_job_options ao = RJQ_JOB_OPTIONS_INIT;
        char id[32];
        snprintf(id, sizeof id, "await-%d", i);
        ao.id = i % 2 ? id : NULL;
        ASSERT_OK(rjq_enqueue_await(q2, p, strlen(p), &ao, NULL, on_awaited, &a, NULL));
    }
    ASSERT(loop_until_count(base, &a.done, 30, 60000));
    ASSERT_EQ(30, a.ok);
    st = get_stats(base, q2);
    ASSERT_EQ(JOBS + 30, st.completed);
    ASSERT_EQ(0, st.ready + st.active + st.delayed);
    loop_turn(base);
    ASSERT_EQ(30, a.done);

    /* whole-queue and by-id calls over the 3 masters: paused on every
     * shard (the worker starts nothing), a job cancelled on its shard from
     * the other client, the ready ones listed merged, resumed: drained */
    count_wait pw = {0};
    ASSERT_OK(rjq_queue_pause(q, on_count, &pw));
    ASSERT(loop_until(base, &pw.done, 20000));
    ASSERT_OK(pw.status);
    ASSERT_EQ(1, pw.n);
    for (int i = 0; i < 6; i++) ASSERT_EQ(1, get_stats(base, rjq_queue_get_shard(q, i)).paused);
    for (int i = 0; i < 6; i++) {
        char id[16], p[16];
        snprintf(id, sizeof id, "p-%d", i);
        snprintf(p, sizeof p, "j-%d", i);
        rjq_job_options po = RJQ_JOB_OPTIONS_INIT;
        po.id = id;
        ASSERT_OK(enqueue_job(base, q2, p, &po).status);
    }
    ASSERT_EQ(6, get_stats(base, q).ready);
    cancel_wait cw = {0};
    ASSERT_OK(rjq_queue_cancel(q2, "p-0", on_cancel_state, &cw));
    ASSERT(loop_until(base, &cw.done, 20000));
    ASSERT_OK(cw.status);
    ASSERT_STREQ("cancelled", get_info(base, q, "p-0").state);
    ids_wait iw = {0};
    ASSERT_OK(rjq_queue_list_jobs(q, RJQ_STATE_READY, 0, 100, on_ids, &iw));
    ASSERT(loop_until(base, &iw.done, 20000));
    ASSERT_OK(iw.status);
    ASSERT_EQ(5, iw.n);
    memset(&pw, 0, sizeof pw);
    ASSERT_OK(rjq_queue_resume(q2, on_count, &pw));
    ASSERT(loop_until(base, &pw.done, 20000));
    ASSERT_OK(pw.status);
    ASSERT_EQ(1, pw.n);
    ASSERT(loop_until_count(base, &l.done, JOBS + 30 + 5, 60000));
    ASSERT_EQ(0, get_stats(base, q).paused);

    worker_stop_wait(base, w);
    rjq_client_free(c2);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}

static void echo(rjq_job *job, void *data) {
    size_t len;
    const void *p = rjq_job_get_payload(job, &len);
    (void)data;
    ASSERT_OK(rjq_job_complete(job, p, len, NULL, NULL));
}

/* n awaited jobs "<tag>-<i>" (with ids) on q. */
static void await_ids(rjq_queue *q, const char *tag, int n, await_log *a) {
    for (int i = 0; i < n; i++) {
        char id[32];
        snprintf(id, sizeof id, "%s-%d", tag, i);
        rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
        jo.id = id;
        ASSERT_OK(rjq_enqueue_await(q, id, strlen(id), &jo, NULL, on_awaited, a, NULL));
    }
}

/* A master killed and its replica promoted: the recorded shards stay
 * where their slots are (on the promoted node), a client that opens the
 * queue afterwards learns the same shards, still on 3 distinct masters,
 * and the work of every shard goes on. */
TEST(a_failover_keeps_the_shards_placement_and_their_work) {
    test_cluster cl;
    cluster_start(&cl, 0);
    struct event_base *base = event_base_new();
    char url[512];
    int len = snprintf(url, sizeof url, "redis://");
    for (int i = 0; i < CLUSTER_NODES; i++)
        len += snprintf(url + len, sizeof url - (size_t)len, "%s127.0.0.1:%d", i ? "," : "",
                        cl.node[i].port);
    rjq_client_options o = client_options(url);
    rjq_client *c = client_new(base, &o);
    rjq_queue *q = open_learnt(base, c, "shf");
    declare(base, q, 3);
    int before[3];
    for (int i = 0; i < 3; i++) before[i] = cluster_master_of_shard(&cl, q, i);
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 4;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, echo, NULL, &w));
    static await_log warm, after;
    memset(&warm, 0, sizeof warm);
    memset(&after, 0, sizeof after);
    await_ids(q, "warm", 30, &warm);
    ASSERT(loop_until_count(base, &warm.done, 30, 60000));
    ASSERT_EQ(30, warm.ok);

    int promoted = cluster_kill_master(&cl, before[1], NULL);
    ASSERT(promoted >= 0);
    /* a client opening the queue now learns the same shards */
    rjq_client *c2 = client_new(base, &o);
    rjq_queue *q2 = open_learnt(base, c2, "shf");
    ASSERT_EQ(3, rjq_queue_count_shards(q2));
    int seen[CLUSTER_NODES] = {0};
    for (int i = 0; i < 3; i++) {
        ASSERT_STREQ(rjq_queue_get_name(rjq_queue_get_shard(q, i)),
                     rjq_queue_get_name(rjq_queue_get_shard(q2, i)));
        int m = cluster_master_of_shard(&cl, q2, i);
        ASSERT_EQ(i == 1 ? promoted : before[i], m);
        seen[m]++;
    }
    for (int m = 0; m < CLUSTER_NODES; m++) ASSERT(seen[m] <= 1);
    /* every shard's work goes on, through the second client's producer */
    await_ids(q2, "after", 30, &after);
    if (!loop_until_count(base, &after.done, 30, 60000))
        FAIL_AT(__FILE__, __LINE__, "%ld of 30 awaits answered", after.done);
    ASSERT_EQ(30, after.ok);
    worker_stop_wait(base, w);
    rjq_client_free(c2);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}
