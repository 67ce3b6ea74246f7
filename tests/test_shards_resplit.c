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
#include "proxy.h"
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
    ASSERT_OK(rjq__shard_resplit(sub, SHARDS, &whole, -1, 0, on_count, &w));
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
    ASSERT_EQ(RJQ_EINVAL, rjq__shard_resplit(sub, SHARDS, &whole, -1, 0, on_count, &w)); /* no figure */
    whole.concurrency = SHARDS - 1;
    ASSERT_EQ(RJQ_EINVAL, rjq__shard_resplit(sub, SHARDS, &whole, -1, 0, on_count, &w));
    whole.concurrency = WHOLE;
    ASSERT_EQ(RJQ_EINVAL, rjq__shard_resplit(sub, 1, &whole, -1, 0, on_count, &w)); /* one shard */
    ASSERT_OK(rjq__shard_resplit(sub, SHARDS, &whole, -1, 0, on_count, &w));
    ASSERT(loop_until(e.base, &w.done, 10000));
    ASSERT_EQ(1, w.done);
    ASSERT_EQ(RJQ_EINVAL, w.status);
    env_stop(&e);
}

/* A whole-queue limit lowered while a re-split step is in flight: the
 * step read the old figure (30, the change's epoch 1) and, its replies
 * held in a proxy, writes after the change to 9 (epoch 2) answered. Its
 * writes carry epoch 1 and every shard, written by the change with 2,
 * refuses them: the step ends RJQ_ECANCELED and the shares stay the
 * change's 3 + 3 + 3. (Whether the step's reads ran before or after the
 * change, unfenced it would lower shards 1 and 2 to 1 and raise shard 0
 * to 28: the queue then ran 28 + 2 active.) A step with the new figure
 * then moves them, and a worker with room for 40 runs 7 on shard 0, the
 * server's active jobs never above 9 at any start. */
TEST(a_limit_lowered_while_a_re_split_step_is_in_flight_is_never_exceeded) {
    test_env e;
    proxy p;
    env_start_proxied(&e, &p, "rs_fence_env", NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "rs_fence"); /* (the step's client: proxied) */
    ASSERT_OK(declare_shards(e.base, q, SHARDS));
    limits_set(e.base, q, 30, 0, 0);
    ASSERT_EQ(30, get_stats(e.base, q).limit_concurrency);
    enqueue_on_shard(e.base, q, 0, 40); /* (work on shard 0 only) */
    rjq_queue *sub[SHARDS];
    shards_of(q, sub);
    for (int i = 0; i < SHARDS; i++) ASSERT_EQ(10, share_of_shard(&e, q, i));
    /* the changer: another client, straight to the server */
    rjq_client_options o = client_options(e.s.url);
    rjq_client *d = client_new(e.base, &o);
    rjq_queue *qd = open_learnt(e.base, d, "rs_fence");
    ASSERT_OK(rjq__queue_resplit_every(qd, -1, 0)); /* (no periodic re-splitter) */
    /* the step reads the shards (their replies held) with the old figure */
    long long calls = server_script_calls(e.rc);
    proxy_hold(&p, 1);
    rjq_limits old = RJQ_LIMITS_INIT;
    old.concurrency = 30;
    count_wait w = {0};
    ASSERT_OK(rjq__shard_resplit(sub, SHARDS, &old, 1, 0, on_count, &w));
    ASSERT(loop_until_script_calls(e.base, e.rc, calls + SHARDS, 10000)); /* (read) */
    /* the figure lowered meanwhile, by the other client */
    limits_set(e.base, qd, 9, 0, 0);
    ASSERT(!w.done);
    proxy_hold(&p, 0);
    ASSERT(loop_until(e.base, &w.done, 10000));
    ASSERT_EQ(RJQ_ECANCELED, w.status);
    long sum = 0;
    for (int i = 0; i < SHARDS; i++) {
        ASSERT_EQ(3, share_of_shard(&e, qd, i));
        sum += share_of_shard(&e, qd, i);
    }
    ASSERT_EQ(9, sum);
    redisReply *r = server_cmd(e.rc, "GET t:{rs_fence}:shardlimits");
    ASSERT(r && r->type == REDIS_REPLY_STRING);
    ASSERT_STREQ("1 9 0 1000 2", r->str);
    freeReplyObject(r);
    /* a step with the new figure (epoch 2) is not refused: 7 + 1 + 1 */
    rjq_queue *subd[SHARDS];
    shards_of(qd, subd);
    rjq_limits now = RJQ_LIMITS_INIT;
    now.concurrency = 9;
    count_wait w2 = {0};
    ASSERT_OK(rjq__shard_resplit(subd, SHARDS, &now, 2, 0, on_count, &w2));
    ASSERT(loop_until(e.base, &w2.done, 10000));
    ASSERT_OK(w2.status);
    ASSERT_EQ(7, share_of_shard(&e, qd, 0));
    /* a stale step again (epoch 1, after the change): refused at its
     * first write, nothing moved */
    count_wait w3 = {0};
    ASSERT_OK(rjq__shard_resplit(subd, SHARDS, &old, 1, 0, on_count, &w3));
    ASSERT(loop_until(e.base, &w3.done, 10000));
    ASSERT_EQ(RJQ_ECANCELED, w3.status);
    ASSERT_EQ(7, share_of_shard(&e, qd, 0));
    ASSERT_EQ(1, share_of_shard(&e, qd, 1));
    /* the server runs what the new figure allows, never more */
    holder h = {.q = qd};
    rjq_worker_options wo = quiet_worker_options(40);
    rjq_worker *wk;
    ASSERT_OK(rjq_worker_start(qd, &wo, hold, &h, &wk));
    ASSERT(loop_until_count(e.base, &h.on[0], 7, 10000));
    long long active = 0;
    for (int i = 0; i < SHARDS; i++) active += server_active_jobs(e.rc, rjq_queue_get_name(subd[i]));
    ASSERT(active <= 9);
    ASSERT(h.most <= 9);
    finish_shard(&e, &h, 0);
    worker_stop_wait(e.base, wk);
    rjq_client_free(d);
    env_stop_proxied(&e, &p);
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
