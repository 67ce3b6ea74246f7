/*
 * One re-split of a sharded queue's whole-queue concurrency by demand
 * (src/shard_resplit.c, docs/sharding.md 6b), on a standalone server with
 * a worker holding every job it starts: with work on one shard only, that
 * shard gets the whole less one slot per idle shard; a lowered shard
 * still running jobs gives back only what it no longer runs; the work
 * moving to another shard follows it; never more active than the whole,
 * counted at every start. And a rate of 1000/s over 3 shards with work on
 * one shard only, re-split: that shard starts 998/s (1000 less one per
 * idle shard) within 5%, never more than 1000 in any second, by the
 * jobs' start times on the server's clock.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "rate_load.h"
#include "server.h"
#include "shard.h"
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

static void shards_of(rjq_queue *q, rjq_queue **sub) {
    ASSERT_EQ(SHARDS, rjq_queue_count_shards(q));
    for (int i = 0; i < SHARDS; i++) sub[i] = rjq_queue_get_shard(q, i);
}

static long long resplit_to(test_env *e, rjq_queue *q, long concurrency, long rate) {
    rjq_limits whole = RJQ_LIMITS_INIT;
    whole.concurrency = concurrency;
    whole.rate = rate;
    count_wait w = {0};
    rjq_queue *sub[SHARDS];
    shards_of(q, sub);
    ASSERT_OK(rjq__shard_resplit(sub, SHARDS, &whole, 0, on_count, &w));
    ASSERT(loop_until(e->base, &w.done, 10000));
    ASSERT_EQ(1, w.done);
    ASSERT_OK(w.status);
    return w.n;
}

static long long resplit(test_env *e, rjq_queue *q) {
    return resplit_to(e, q, WHOLE, 0);
}

static long share_of_shard(test_env *e, rjq_queue *q, int s) {
    return (long)get_stats(e->base, rjq_queue_get_shard(q, s)).limit_concurrency;
}

TEST(a_concurrency_re_split_follows_the_work_and_never_exceeds_the_whole) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "rs_conc");
    ASSERT_OK(declare_shards(e.base, q, SHARDS));
    limits_set(e.base, q, WHOLE, 0, 0);
    holder h = {.q = q};
    ASSERT_OK(rjq__queue_resplit_every(q, -1, 0)); /* (the step alone: no periodic re-splitter) */
    rjq_worker_options wo = quiet_worker_options(10);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, hold, &h, &w));
    /* shard 1 runs 2 (its static share), then has no more work */
    enqueue_on_shard(e.base, q, 1, 2);
    ASSERT(loop_until_count(e.base, &h.on[1], 2, 10000));
    /* work on shard 0 only: 3 run (its static share) */
    enqueue_on_shard(e.base, q, 0, 20);
    ASSERT(loop_until_count(e.base, &h.on[0], 3, 10000));
    /* shards 1 and 2 lowered to 1; shard 1 still runs 2: shard 0 gets
     * only the one slot shard 2 gave back */
    ASSERT_EQ(3, resplit(&e, q));
    ASSERT_EQ(4, share_of_shard(&e, q, 0));
    ASSERT_EQ(1, share_of_shard(&e, q, 1));
    /* the queue's stats show the whole figure stored, not the shares' 6 */
    ASSERT_EQ(WHOLE, get_stats(e.base, q).limit_concurrency);
    ASSERT(loop_until_count(e.base, &h.on[0], 4, 10000));
    /* shard 1's jobs finish: the next re-split gives shard 0 the rest */
    finish_shard(&e, &h, 1);
    ASSERT_EQ(1, resplit(&e, q));
    ASSERT_EQ(WHOLE - (SHARDS - 1), share_of_shard(&e, q, 0));
    ASSERT(loop_until_count(e.base, &h.on[0], WHOLE - (SHARDS - 1), 10000));
    /* the work moves to shard 2: shard 0's jobs finish and it has none
     * waiting once they are gone (its ready ones run and are finished) */
    enqueue_on_shard(e.base, q, 2, 20);
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
    rjq_limits whole = RJQ_LIMITS_INIT;
    rjq_queue *sub[SHARDS];
    shards_of(q, sub);
    ASSERT_EQ(RJQ_EINVAL, rjq__shard_resplit(sub, SHARDS, &whole, 0, on_count, &w)); /* no figure */
    whole.concurrency = SHARDS - 1;
    ASSERT_EQ(RJQ_EINVAL, rjq__shard_resplit(sub, SHARDS, &whole, 0, on_count, &w));
    whole.concurrency = WHOLE;
    ASSERT_EQ(RJQ_EINVAL, rjq__shard_resplit(sub, 1, &whole, 0, on_count, &w)); /* one shard */
    ASSERT_OK(rjq__shard_resplit(sub, SHARDS, &whole, 0, on_count, &w));
    ASSERT(loop_until(e.base, &w.done, 10000));
    ASSERT_EQ(1, w.done);
    ASSERT_EQ(RJQ_EINVAL, w.status);
    env_stop(&e);
}

/* ---- rate ------------------------------------------------------------------------ */

#define RATE_WORKERS 3

TEST(a_rate_re_split_gives_the_one_busy_shard_the_whole_rate_and_never_more) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "rs_rate");
    ASSERT_OK(declare_shards(e.base, q, SHARDS));
    limits_set(e.base, q, 0, RATE, 1000);
    /* every job on shard 0 */
    rjq_queue *s0 = rjq_queue_get_shard(q, 0);
    static char ids[RATE_JOBS][RATE_ID_MAX];
    rate_enqueue_ids(e.base, s0, ids, RATE_JOBS);
    /* the re-split: shards 1 and 2 down to 1, shard 0 up to the rest */
    ASSERT_EQ(SHARDS, resplit_to(&e, q, 0, RATE));
    ASSERT_EQ(RATE - (SHARDS - 1), (long)get_stats(e.base, s0).limit_rate);
    ASSERT_EQ(1, (long)get_stats(e.base, rjq_queue_get_shard(q, 1)).limit_rate);
    ASSERT_EQ(RATE, (long)get_stats(e.base, q).limit_rate);
    pid_t pids[RATE_WORKERS];
    for (int k = 0; k < RATE_WORKERS; k++) pids[k] = rate_spawn_worker(&e.s, "rs_rate", SHARDS);
    double end = wait_deadline(120000);
    while (server_int(e.rc, "HGET t:{%s}:stats retained", rjq_queue_get_name(s0)) < RATE_JOBS)
        ASSERT(wait_poll(e.base, end, 50));
    rate_kill_workers(pids, RATE_WORKERS);
    char what[80];
    snprintf(what, sizeof what, "rate %d/s over %d shards re-split to one", RATE, SHARDS);
    rate_figures f = rate_measure(e.base, s0, ids, RATE_JOBS, 0, RATE_WINDOW_MS, what);
    ASSERT(f.most <= RATE);
    ASSERT(f.per_s >= RATE * 0.95 && f.per_s <= RATE * 1.05);
    env_stop(&e);
}
