/*
 * An idle sharded queue's periodic traffic (issue 35: "a shard with no
 * work costs nothing when idle"). Idle workers cost Redis their client's
 * liveness beat (one a second per client and registry) and its visits
 * (one a second per client, the queues, shards included, in turn): what
 * each costs is counted (MONITOR: each script call and the commands it
 * ran), and the whole is compared per beat with a plain queue's, never
 * timed. And an expired lease on an idle shard still comes back.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "rjq_scripts.h"
#include "server.h"
#include "waits.h"

enum { BEATS = 12, SHARDS = 3 };

/* What a MONITOR connection saw: every command, and per script call kind
 * (beat, reclaim) the calls and the commands they ran. */
typedef struct tally {
    redisContext *mon;
    long all;
    long beats, beat_cmds;       /* beat.lua calls, and the commands inside them */
    long visits, visit_cmds;     /* reclaim.lua calls (the visits) */
    long claims;                 /* claim.lua calls */
    long resplits, resplit_cmds; /* resplit.lua calls (a sharded queue's re-splitters) */
    long long from_ms;           /* visits_after: reclaim calls run from this server time */
    long visits_after;
    long *in;                    /* the counter of the last script call seen */
} tally;

static void tally_start(tally *t, test_env *e) {
    memset(t, 0, sizeof *t);
    t->mon = server_connect(&e->s);
    redisReply *r = redisCommand(t->mon, "MONITOR");
    ASSERT(r != NULL && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
}

static void tally_read(tally *t) {
    struct pollfd pfd = {t->mon->fd, POLLIN, 0};
    while (poll(&pfd, 1, 0) == 1) ASSERT(redisBufferRead(t->mon) == REDIS_OK);
    redisReply *r;
    while (redisGetReplyFromReader(t->mon, (void **)&r) == REDIS_OK && r) {
        ASSERT(r->type == REDIS_REPLY_STATUS);
        t->all++;
        if (strstr(r->str, " lua]")) { /* run by a script: its caller's */
            if (t->in) (*t->in)++;
        } else if (strstr(r->str, "_beat\"")) {
            t->beats++;
            t->in = &t->beat_cmds;
        } else if (strstr(r->str, "_reclaim\"")) {
            t->visits++;
            /* (a line starts with the server time: seconds.microseconds) */
            if (t->from_ms && strtod(r->str, NULL) * 1000 >= (double)t->from_ms) t->visits_after++;
            t->in = &t->visit_cmds;
        } else if (strstr(r->str, "_resplit\"")) {
            t->resplits++;
            t->in = &t->resplit_cmds;
        } else {
            if (strstr(r->str, "_claim\"")) t->claims++;
            t->in = NULL;
        }
        freeReplyObject(r);
    }
}

static int beats_seen(void *arg) {
    tally *t = arg;
    tally_read(t);
    return t->beats >= BEATS;
}

/* Two clients on e's server, each with a worker of 4 slots (default
 * options: visits every second, liveness on) on queue name, sharded
 * into `shards` when more than 1; once they settled, the commands of the
 * next BEATS beats. */
static tally idle_cost(test_env *e, const char *name, int shards) {
    rjq_queue *q = open_learnt(e->base, e->c, name);
    if (shards > 1) ASSERT_OK(declare_shards(e->base, q, shards));
    rjq_client *c2 = client_for(e->base, &e->s);
    rjq_queue *q2 = open_learnt(e->base, c2, name);
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 4;
    rjq_worker *w1, *w2;
    ASSERT_OK(rjq_worker_start(q, &wo, never_runs, NULL, &w1));
    ASSERT_OK(rjq_worker_start(q2, &wo, never_runs, NULL, &w2));
    /* settled: both have beaten twice (names and info stored) */
    tally t;
    tally_start(&t, e);
    t.beats = BEATS - 4;
    ASSERT(loop_until_cond(e->base, beats_seen, &t, 60000));
    redisFree(t.mon);
    tally_start(&t, e);
    double t0 = mono_ms();
    ASSERT(loop_until_cond(e->base, beats_seen, &t, 60000));
    double secs = (mono_ms() - t0) / 1000;
    redisFree(t.mon);
    fprintf(stderr,
            "%s (%d shard%s), 2 idle workers: %ld commands in %.1f s (%.1f/s, %.1f per shard), "
            "%.1f per beat; %ld beats (%.2f commands each), %ld visits (%.2f each), %ld claims, "
            "%ld re-split reads (%ld commands)\n",
            name, shards, shards > 1 ? "s" : "", t.all, secs, t.all / secs, t.all / secs / shards,
            (double)t.all / t.beats, t.beats, (double)t.beat_cmds / t.beats + 1, t.visits,
            t.visits ? (double)t.visit_cmds / t.visits + 1 : 0.0, t.claims, t.resplits,
            t.resplits + t.resplit_cmds);
    worker_stop_wait(e->base, w1);
    worker_stop_wait(e->base, w2);
    rjq_client_free(c2);
    return t;
}

/* Before (2026-11-30): a beat ran 11 commands (4 of them TYPE) and a
 * visit 32, 33 with the ended batches' read (19 TYPE: every column's,
 * though an idle queue's visit writes none of them); 100 commands a second for a 3-shard queue with 2 idle
 * workers on one server, 88 for a plain queue. Now 7 per beat, at most 21
 * per visit, and the shards add no visits (one per client per period,
 * queues in turn): the sharded queue costs about the plain one's per beat
 * (its re-splitters' read aside), a third of it per shard. */
TEST(an_idle_sharded_queues_beats_and_visits_cost_a_plain_queues) {
    test_env e;
    env_start(&e, NULL);
    tally p = idle_cost(&e, "ic_plain", 1);
    tally s = idle_cost(&e, "ic_sharded", SHARDS);
    ASSERT(p.beats >= BEATS && s.beats >= BEATS);
    /* a beat: FCALL, TIME, HMGET, 2 HEXISTS, ZADD, ZRANGEBYSCORE (and
     * an HSET of the names or the process info when they changed: the
     * first client's, as the plain queue's worker stopped: a few) */
    ASSERT(s.beat_cmds + s.beats <= s.beats * 7 + 6);
    ASSERT(p.beat_cmds + p.beats <= p.beats * 7 + 6);
    /* an idle visit: 21 at most (15 when the other client holds the guard) */
    ASSERT(s.visits > 0 && s.visit_cmds + s.visits <= s.visits * 21);
    ASSERT(p.visits > 0 && p.visit_cmds + p.visits <= p.visits * 21);
    /* no claims while idle */
    ASSERT_EQ(0, s.claims);
    ASSERT_EQ(0, p.claims);
    /* visits do not grow with the shards: one per client per period, as
     * the beats (2 per beat would be a visit per shard and a half) */
    ASSERT(s.visits <= s.beats * 3 / 2 + 2);
    /* the whole, per beat, but for the re-splitters' reads of the
     * declaration (resplit.lua, a sharded queue's own: ~5 commands a
     * second per client, bench/README.md "Sharded queues"): within 1.25x
     * of the plain queue's, not 3x */
    long long s_own = s.all - s.resplits - s.resplit_cmds;
    ASSERT(s_own * 100 * p.beats <= p.all * 125 * s.beats);
    env_stop(&e);
}

static long ran;
static void count_run(rjq_job *job, void *data) {
    (void)data;
    ran++;
    ASSERT_OK(rjq_job_complete(job, NULL, 0, NULL, NULL));
}

/* A job of a sharded queue whose holder vanished (a claim under a token
 * of no live client, its lease 300 ms) comes back by the visits of an
 * idle worker's client: within the shards' turn (one visit per
 * reclaim_ms, each shard every SHARDS of them) of the lease's end, and
 * runs. Counted in visits, not timed. */
TEST(a_lease_expiring_on_an_idle_shard_is_reclaimed_within_the_shards_turn) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "il");
    ASSERT_OK(declare_shards(e.base, q, SHARDS));
    ASSERT_OK(enqueue_x(e.base, q, "lost", 0, 0).status);
    int k = shard_holding(e.base, q, "lost");
    ASSERT(k >= 0 && k < SHARDS);
    const char *sn = rjq_queue_get_name(rjq_queue_get_shard(q, k));
    char prefix[256], wake[256];
    snprintf(prefix, sizeof prefix, "t:{%s}:job:", sn);
    snprintf(wake, sizeof wake, "t:{%s}:wake", sn);
    tally t;
    tally_start(&t, &e);
    /* the lease ends 300 ms after the claim: visits from then are counted */
    t.from_ms = server_now_ms(e.rc) + 300;
    const char *claim[] = {prefix, "1", "300", "ghost.tok1", wake, "w ch", "1", "0", "0", "1"};
    redisReply *r = server_fcall(e.rc, RJQ__S_CLAIM, sn, claim, 10);
    ASSERT(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 4);
    freeReplyObject(r);
    ASSERT_EQ(1, get_stats(e.base, q).active);
    rjq_worker_options wo = quiet_worker_options(4);
    wo.reclaim_ms = 100;
    rjq_worker *w;
    ran = 0;
    ASSERT_OK(rjq_worker_start(q, &wo, count_run, NULL, &w));
    while (ran == 0) {
        loop_until_count(e.base, &ran, 1, 50);
        tally_read(&t);
        ASSERT(t.visits_after <= 3 * SHARDS + 2); /* (a failure guard: the job never came back) */
    }
    fprintf(stderr, "reclaimed and run after %ld visits past the lease's end (%ld in all)\n",
            t.visits_after, t.visits);
    /* each shard is visited every SHARDS visits (one may be in flight as
     * the lease ends) */
    ASSERT(t.visits_after >= 1 && t.visits_after <= SHARDS + 1);
    rjq_stats st = get_stats(e.base, q);
    ASSERT_EQ(1, st.reclaimed);
    ASSERT_EQ(1, st.completed);
    redisFree(t.mon);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}
