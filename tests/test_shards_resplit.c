/*
 * One re-split of a sharded queue's whole-queue concurrency by demand
 * (src/shard_resplit.c, docs/sharding.md 6b), on a standalone server with
 * a worker holding every job it starts: with work on one shard only, that
 * shard gets the whole less one slot per idle shard; a lowered shard
 * still running jobs gives back only what it no longer runs; the work
 * moving to another shard follows it; never more active than the whole,
 * counted at every start.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "shard_resplit.h"
#include "waits.h"

enum { SHARDS = 3, WHOLE = 7, HOLD_MAX = 64 };

typedef struct holder {
    rjq_job *held[HOLD_MAX];
    int shard[HOLD_MAX];
    long nheld, active, most;
    long on[SHARDS];
    rjq_queue *q;
} holder;

static void hold(rjq_job *job, void *data) {
    holder *h = data;
    ASSERT(h->nheld < HOLD_MAX);
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    ASSERT(len == 1 && p[0] >= '0' && p[0] < '0' + SHARDS);
    int s = p[0] - '0';
    h->shard[h->nheld] = s;
    h->held[h->nheld++] = job;
    h->on[s]++;
    if (++h->active > h->most) h->most = h->active;
}

/* Complete the held jobs of shard s. */
static void finish_shard(test_env *e, holder *h, int s) {
    for (long i = 0; i < h->nheld; i++)
        if (h->held[i] && h->shard[i] == s) {
            ASSERT_OK(rjq_job_complete(h->held[i], NULL, 0, NULL, NULL));
            h->held[i] = NULL;
            h->active--;
            h->on[s]--;
        }
    loop_turn(e->base);
}

static void on_queued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    long *got = data;
    (void)c, (void)jobs;
    ASSERT_OK(status);
    *got += (long)n;
}

static void enqueue_on(test_env *e, rjq_queue *q, int s, int n) {
    rjq_enqueue_item it[32];
    char payload[2] = {(char)('0' + s), 0};
    ASSERT(n <= 32);
    for (int i = 0; i < n; i++) {
        it[i] = (rjq_enqueue_item)RJQ_ENQUEUE_ITEM_INIT;
        it[i].payload = payload;
        it[i].len = 1;
    }
    long queued = 0;
    ASSERT_OK(rjq_enqueue_batch(rjq_queue_get_shard(q, s), it, (size_t)n, on_queued, &queued));
    ASSERT(loop_until_count(e->base, &queued, n, 10000));
}

static long long resplit(test_env *e, rjq_queue *q) {
    count_wait w = {0};
    ASSERT_OK(rjq__shard_resplit(q, WHOLE, on_count, &w));
    ASSERT(loop_until(e->base, &w.done, 10000));
    ASSERT_EQ(1, w.done);
    ASSERT_OK(w.status);
    return w.n;
}

static long share_of_shard(test_env *e, rjq_queue *q, int s) {
    return (long)get_stats(e->base, rjq_queue_get_shard(q, s)).limit_concurrency;
}

TEST(a_concurrency_re_split_follows_the_work_and_never_exceeds_the_whole) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "rs_conc");
    ASSERT_OK(declare_shards(e.base, q, SHARDS));
    rjq_limits l = RJQ_LIMITS_INIT;
    l.concurrency = WHOLE;
    count_wait lw = {0};
    ASSERT_OK(rjq_queue_set_limits(q, &l, on_count, &lw));
    ASSERT(loop_until(e.base, &lw.done, 10000));
    ASSERT_OK(lw.status);
    holder h = {.q = q};
    rjq_worker_options wo = quiet_worker_options(10);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, hold, &h, &w));
    /* shard 1 runs 2 (its static share), then has no more work */
    enqueue_on(&e, q, 1, 2);
    ASSERT(loop_until_count(e.base, &h.on[1], 2, 10000));
    /* work on shard 0 only: 3 run (its static share) */
    enqueue_on(&e, q, 0, 20);
    ASSERT(loop_until_count(e.base, &h.on[0], 3, 10000));
    /* shards 1 and 2 lowered to 1; shard 1 still runs 2: shard 0 gets
     * only the one slot shard 2 gave back */
    ASSERT_EQ(3, resplit(&e, q));
    ASSERT_EQ(4, share_of_shard(&e, q, 0));
    ASSERT_EQ(1, share_of_shard(&e, q, 1));
    ASSERT(loop_until_count(e.base, &h.on[0], 4, 10000));
    /* shard 1's jobs finish: the next re-split gives shard 0 the rest */
    finish_shard(&e, &h, 1);
    ASSERT_EQ(1, resplit(&e, q));
    ASSERT_EQ(WHOLE - (SHARDS - 1), share_of_shard(&e, q, 0));
    ASSERT(loop_until_count(e.base, &h.on[0], WHOLE - (SHARDS - 1), 10000));
    /* the work moves to shard 2: shard 0's jobs finish and it has none
     * waiting once they are gone (its ready ones run and are finished) */
    enqueue_on(&e, q, 2, 20);
    while (1) {
        finish_shard(&e, &h, 0);
        rjq_stats st = get_stats(e.base, rjq_queue_get_shard(q, 0));
        if (st.ready == 0 && st.active == 0) break;
        loop_turn(e.base);
    }
    ASSERT(resplit(&e, q) >= 1);
    ASSERT_EQ(1, share_of_shard(&e, q, 0));
    ASSERT_EQ(WHOLE - (SHARDS - 1), share_of_shard(&e, q, 2));
    ASSERT(loop_until_count(e.base, &h.on[2], WHOLE - (SHARDS - 1), 10000));
    /* nothing more to move: a re-split changes nothing */
    ASSERT_EQ(0, resplit(&e, q));
    ASSERT(h.most <= WHOLE);
    for (int s = 0; s < SHARDS; s++) finish_shard(&e, &h, s);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

TEST(a_re_split_of_a_queue_without_a_concurrency_limit_is_refused) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "rs_none");
    ASSERT_OK(declare_shards(e.base, q, SHARDS));
    count_wait w = {0};
    ASSERT_EQ(RJQ_EINVAL, rjq__shard_resplit(q, SHARDS - 1, on_count, &w));
    ASSERT_OK(rjq__shard_resplit(q, WHOLE, on_count, &w));
    ASSERT(loop_until(e.base, &w.done, 10000));
    ASSERT_EQ(1, w.done);
    ASSERT_EQ(RJQ_EINVAL, w.status);
    env_stop(&e);
}
