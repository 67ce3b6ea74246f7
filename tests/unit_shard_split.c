/*
 * The plan of a sharded queue's limit re-split by demand (src/shard_split.c,
 * docs/sharding.md 6b), without a server: the targets, the lowering and the
 * raise, and simulations in steps (no clock) of shards admitting and
 * finishing jobs between the re-splitter's moves, where the whole-queue
 * concurrency (the jobs active on all shards) and rate (the starts in any
 * window) are checked after every single step, and a shard that alone has
 * work reaches the whole figure less one slot per idle shard.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "shard_split.h"

enum { N = 3 };

TEST(targets_give_the_shards_with_demand_all_but_one_per_idle_shard) {
    long t[N];
    rjq__split_targets(7, N, (const long[]){5, 0, 0}, t);
    ASSERT_EQ(5, t[0]);
    ASSERT_EQ(1, t[1]);
    ASSERT_EQ(1, t[2]);
    rjq__split_targets(1000, N, (const long[]){0, 3, 9}, t);
    ASSERT_EQ(1, t[0]);
    ASSERT_EQ(500, t[1]);
    ASSERT_EQ(499, t[2]);
    rjq__split_targets(1000, N, (const long[]){0, 0, 0}, t); /* the static split */
    ASSERT_EQ(334, t[0]);
    ASSERT_EQ(333, t[1]);
    ASSERT_EQ(333, t[2]);
    rjq__split_targets(3, N, (const long[]){1, 1, 0}, t); /* shares never 0 */
    ASSERT_EQ(1, t[0]);
    ASSERT_EQ(1, t[1]);
    ASSERT_EQ(1, t[2]);
}

TEST(a_raise_hands_out_only_what_the_lowered_shards_gave_back) {
    long share[N] = {3, 2, 2}, target[N], low[N], out[N];
    rjq__split_targets(7, N, (const long[]){9, 0, 0}, target);
    ASSERT_EQ(2, rjq__split_lower(N, share, target, low));
    ASSERT_EQ(1, low[1]);
    ASSERT_EQ(1, low[2]);
    /* the lowered shards still run their 2 jobs each: nothing to give */
    ASSERT_EQ(0, rjq__split_raise(7, N, low, (const long[]){3, 2, 2}, target, out));
    ASSERT_EQ(3, out[0]);
    /* one of them finished one: one slot more */
    ASSERT_EQ(0, rjq__split_raise(7, N, low, (const long[]){3, 1, 2}, target, out));
    ASSERT_EQ(4, out[0]);
    /* both idle: up to the target */
    ASSERT_EQ(0, rjq__split_raise(7, N, low, (const long[]){3, 0, 0}, target, out));
    ASSERT_EQ(5, out[0]);
    ASSERT_EQ(1, out[1]);
    /* already over the whole (shares never lowered first): nothing raised */
    ASSERT_EQ(-1, rjq__split_raise(7, N, (const long[]){1, 3, 3}, (const long[]){1, 3, 4}, target,
                                   out));
    ASSERT_EQ(1, out[0]);
}

/* ---- simulations ------------------------------------------------------------ */

static unsigned long long rng = 88172645463325252ULL;
static unsigned rnd(unsigned n) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (unsigned)(rng % n);
}

/* Concurrency: shard i holds active[i] jobs; a shard with work admits one
 * while active < share, any shard finishes one now and then. */
typedef struct conc_sim {
    long total, share[N], active[N], demand[N], most_on_0;
} conc_sim;

static void conc_check(const conc_sim *s) {
    long sum = 0;
    for (int i = 0; i < N; i++) {
        ASSERT(s->share[i] >= 1);
        sum += s->active[i];
    }
    ASSERT(sum <= s->total);
}

/* Some steps of the shards' own: admissions and finishes, one at a time,
 * each checked. */
static void conc_run(conc_sim *s, int steps) {
    for (int k = 0; k < steps; k++) {
        int i = (int)rnd(N);
        if (s->demand[i] && s->active[i] < s->share[i] && rnd(4)) s->active[i]++;
        else if (s->active[i] > 0 && rnd(3) == 0) s->active[i]--;
        conc_check(s);
        if (s->active[0] > s->most_on_0) s->most_on_0 = s->active[0];
    }
}

/* One re-split, the shards running between each share's change: every
 * lowering applied (and answered), the use re-read, then each raise. */
static void conc_resplit(conc_sim *s) {
    long target[N], low[N], out[N], used[N];
    rjq__split_targets(s->total, N, s->demand, target);
    rjq__split_lower(N, s->share, target, low);
    for (int i = 0; i < N; i++) {
        s->share[i] = low[i];
        conc_run(s, (int)rnd(4));
    }
    conc_run(s, (int)rnd(6));
    memcpy(used, s->active, sizeof used);
    ASSERT(rjq__split_raise(s->total, N, s->share, used, target, out) >= 0);
    for (int i = 0; i < N; i++) {
        conc_run(s, (int)rnd(4));
        s->share[i] = out[i];
        conc_check(s);
    }
}

TEST(a_concurrency_re_split_by_demand_never_exceeds_the_whole_and_follows_the_work) {
    conc_sim s = {.total = 7, .share = {3, 2, 2}};
    /* every shard busy at its static share */
    for (int i = 0; i < N; i++) s.demand[i] = 1;
    conc_run(&s, 200);
    /* then work on shard 0 only: it reaches 7 less one per idle shard */
    s.demand[1] = s.demand[2] = 0;
    for (int r = 0; r < 40; r++) {
        conc_resplit(&s);
        conc_run(&s, 50);
    }
    ASSERT_EQ(5, s.share[0]);
    ASSERT_EQ(5, s.most_on_0);
    /* the work moves about, re-split every few steps */
    for (int r = 0; r < 3000; r++) {
        if (rnd(10) == 0) s.demand[rnd(N)] ^= 1;
        conc_resplit(&s);
        conc_run(&s, (int)rnd(20));
    }
    /* all busy again: back to an even split */
    for (int i = 0; i < N; i++) s.demand[i] = 1;
    for (int r = 0; r < 40; r++) {
        conc_resplit(&s);
        conc_run(&s, 50);
    }
    ASSERT_EQ(3, s.share[0]);
    ASSERT_EQ(2, s.share[1]);
    ASSERT_EQ(2, s.share[2]);
}

/* Rate: R starts per window of W steps. Each shard keeps the steps of its
 * starts in the last window; a shard with work starts one at a step while
 * its count in the window is below its share. The starts of all shards in
 * every window of W steps are checked (not above R). */
enum { W = 50, STEPS = 20000 };
typedef struct rate_sim {
    long total, share[N], demand[N];
    int now;
    unsigned char started[N][STEPS]; /* starts at each step */
    long on_0;                       /* shard 0's starts in the last full window */
} rate_sim;

static long window_starts(const rate_sim *s, int i) {
    long n = 0;
    for (int t = s->now - W + 1; t <= s->now; t++)
        if (t >= 0) n += s->started[i][t];
    return n;
}

static void rate_step(rate_sim *s) {
    s->now++;
    ASSERT(s->now < STEPS);
    long all = 0;
    for (int i = 0; i < N; i++) {
        /* (up to 3 starts a step while below the share) */
        for (int k = 0; k < 3 && s->demand[i] && window_starts(s, i) < s->share[i]; k++)
            s->started[i][s->now]++;
        all += window_starts(s, i);
    }
    ASSERT(all <= s->total);
    s->on_0 = window_starts(s, 0);
}

static void rate_resplit(rate_sim *s) {
    long target[N], low[N], out[N], used[N];
    rjq__split_targets(s->total, N, s->demand, target);
    rjq__split_lower(N, s->share, target, low);
    for (int i = 0; i < N; i++) {
        s->share[i] = low[i];
        rate_step(s);
    }
    for (int i = 0; i < N; i++) used[i] = window_starts(s, i);
    ASSERT(rjq__split_raise(s->total, N, s->share, used, target, out) >= 0);
    for (int i = 0; i < N; i++) {
        rate_step(s);
        s->share[i] = out[i];
    }
}

TEST(a_rate_re_split_by_demand_never_starts_more_than_the_whole_in_a_window) {
    static rate_sim s;
    s.total = 100;
    s.share[0] = 34, s.share[1] = 33, s.share[2] = 33;
    for (int i = 0; i < N; i++) s.demand[i] = 1;
    for (int t = 0; t < 3 * W; t++) rate_step(&s);
    /* work on shard 0 only: within a few windows it starts 98 a window */
    s.demand[1] = s.demand[2] = 0;
    for (int r = 0; r < 4 * W / 10; r++) {
        rate_resplit(&s);
        for (int t = 0; t < 4; t++) rate_step(&s);
    }
    for (int t = 0; t < W; t++) rate_step(&s);
    ASSERT_EQ(98, s.share[0]);
    ASSERT_EQ(98, s.on_0);
    /* the work moves about */
    while (s.now < STEPS - 4 * W) {
        if (rnd(8) == 0) s.demand[rnd(N)] ^= 1;
        rate_resplit(&s);
        for (int t = 0, m = (int)rnd(10); t < m && s.now < STEPS - 4 * W; t++) rate_step(&s);
    }
}
