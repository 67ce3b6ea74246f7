/*
 * The periodic re-splitter of a sharded queue's limit shares
 * (src/shard_resplitter.c, docs/sharding.md 6b) on a standalone server:
 * the whole-queue figure stored with the declaration by one client is the
 * one another client's workers re-split and obey; with work on one shard
 * only, that shard reaches the whole less one per idle shard with nobody
 * calling anything, never more active than the whole (summed on the
 * server at every poll); the process holding the re-split lease killed
 * mid-run: another takes the lease over once it ran out, goes on
 * re-splitting, and the whole still holds; a rate with work on one shard
 * re-split by the workers alone; a bound's static split kept.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>

#include "core.h"
#include "fixture.h"
#include "harness.h"
#include "rate_load.h"
#include "server.h"
#include "shard.h"
#include "slot.h"
#include "waits.h"

enum { SHARDS = 3, HOLD_MAX = 64 };

#define PERIOD_MS 50
#define LEASE_MS 600
#define HOLD_MS 20 /* a job's work in the worker processes (a timer) */

static long shard_active(redisContext *rc, rjq_queue *q, int s) {
    return (long)server_active_jobs(rc, rjq_queue_get_name(rjq_queue_get_shard(q, s)));
}

/* Every shard's active jobs summed, read on the server. */
static long server_active(redisContext *rc, rjq_queue *q) {
    long n = 0;
    for (int i = 0; i < SHARDS; i++) n += shard_active(rc, q, i);
    return n;
}

/* ---- two clients: the figure stored, learnt, obeyed ------------------------------- */

typedef struct holder {
    rjq_job *held[HOLD_MAX];
    long nheld, active, most;
    long on[SHARDS];
} holder;

static void hold(rjq_job *job, void *data) {
    holder *h = data;
    ASSERT(h->nheld < HOLD_MAX);
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    ASSERT(len == 1 && p[0] >= '0' && p[0] < '0' + SHARDS);
    h->held[h->nheld++] = job;
    h->on[p[0] - '0']++;
    if (++h->active > h->most) h->most = h->active;
}

/* One sample of the active jobs on the server: the most of all the shards'
 * sum (never above whole) in *most, the most of shard s's in *most_s. */
static void sample_active(redisContext *rc, rjq_queue *q, int s, long whole, long *most,
                          long *most_s) {
    long a = server_active(rc, q), as = shard_active(rc, q, s);
    if (a > *most) *most = a;
    if (as > *most_s) *most_s = as;
    ASSERT(a <= whole);
}

/* Run until h runs `want` jobs of shard s, the server's active sum read at
 * every poll and never above whole; then a few more periods, still at
 * want (no more is ever given). */
static void reach(test_env *e, rjq_queue *q, holder *h, int s, long want, long whole) {
    double end = wait_deadline(20000);
    while (h->on[s] < want) {
        ASSERT(wait_poll(e->base, end, 5));
        ASSERT(server_active(e->rc, q) <= whole);
    }
    double settle = wait_deadline(10 * PERIOD_MS);
    while (wait_poll(e->base, settle, 5)) ASSERT(server_active(e->rc, q) <= whole);
    ASSERT_EQ(want, h->on[s]);
    ASSERT(h->most <= whole);
}

TEST(a_whole_queue_limit_set_by_one_client_is_obeyed_by_anothers_workers) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "rsd_two");
    ASSERT_OK(declare_shards(e.base, q, SHARDS));
    /* client b opens the queue before any limit exists, and works it */
    rjq_client_options o = client_options(e.s.url);
    rjq_client *b = client_new(e.base, &o);
    rjq_queue *qb = open_learnt(e.base, b, "rsd_two");
    ASSERT_OK(rjq__queue_resplit_every(qb, PERIOD_MS, LEASE_MS));
    holder h = {0};
    rjq_worker_options wo = quiet_worker_options(20);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(qb, &wo, hold, &h, &w));
    /* client a sets the whole-queue figure: stored with the declaration */
    limits_set(e.base, q, 6, 0, 0);
    redisReply *r = server_cmd(e.rc, "GET t:{rsd_two}:shardlimits");
    ASSERT(r && r->type == REDIS_REPLY_STRING);
    ASSERT_STREQ("1 6 0 1000 1", r->str); /* (the first change: epoch 1) */
    freeReplyObject(r);
    /* work on shard 0 only: b's re-splitter, reading 6 from the store,
     * gives it 6 less one per idle shard (its static share: 2) */
    enqueue_on_shard(e.base, q, 0, 40);
    reach(&e, q, &h, 0, 6 - (SHARDS - 1), 6);
    ASSERT(server_int(e.rc, "EXISTS t:{rsd_two}:resplit") == 1);
    ASSERT(rjq__queue_resplit_leading(qb));
    /* a changes the figure: b's workers follow the new one */
    limits_set(e.base, q, 9, 0, 0);
    reach(&e, q, &h, 0, 9 - (SHARDS - 1), 9);
    rjq_stats st = get_stats(e.base, q);
    ASSERT_EQ(9, st.limit_concurrency);
    for (long i = 0; i < h.nheld; i++) ASSERT_OK(rjq_job_complete(h.held[i], NULL, 0, NULL, NULL));
    worker_stop_wait(e.base, w);
    rjq_client_free(b);
    env_stop(&e);
}

/* ---- worker processes: no call, the lease holder killed --------------------------- */

typedef struct child_log {
    struct event_base *base;
} child_log;

static child_log child;

static void finish_held(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    ASSERT_OK(rjq_job_complete(arg, NULL, 0, NULL, NULL));
}

static void hold_a_while(rjq_job *job, void *data) {
    (void)data;
    struct timeval tv = {0, HOLD_MS * 1000};
    ASSERT(event_base_once(child.base, -1, EV_TIMEOUT, finish_held, job, &tv) == 0);
}

/* A child process with a worker of the sharded queue `name` (its jobs take
 * HOLD_MS), re-splitting every PERIOD_MS under a lease of LEASE_MS; it
 * writes "t:pid:<its client id>" = its pid (which process holds the
 * lease: the lease's token starts with the client id). */
static pid_t spawn_worker(const test_server *s, const char *name) {
    pid_t pid = fork_child();
    if (pid != 0) return pid;
    struct event_base *base = event_base_new();
    child.base = base;
    rjq_client *c = client_for(base, s);
    rjq_queue *q = open_learnt(base, c, name);
    ASSERT_EQ(SHARDS, rjq_queue_count_shards(q));
    ASSERT_OK(rjq__queue_resplit_every(q, PERIOD_MS, LEASE_MS));
    redisContext *rc = redisConnect("127.0.0.1", s->port);
    ASSERT(rc && !rc->err);
    freeReplyObject(server_cmd(rc, "SET t:pid:%s %d", rjq__client_id(c), (int)getpid()));
    redisFree(rc);
    rjq_worker_options wo = quiet_worker_options(10);
    wo.lease_ms = 1000; /* (the killed process' jobs come back soon) */
    wo.reclaim_ms = 300;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, hold_a_while, NULL, &w));
    serve_until_killed(base, 120000);
}

/* The pid of the process holding the re-split lease of `name` (0: none). */
static pid_t lease_holder(redisContext *rc, const char *name) {
    redisReply *r = server_cmd(rc, "GET t:{%s}:resplit", name);
    ASSERT(r);
    pid_t pid = 0;
    if (r->type == REDIS_REPLY_STRING) {
        char id[128];
        snprintf(id, sizeof id, "%s", r->str);
        char *dot = strrchr(id, '.');
        ASSERT(dot);
        *dot = '\0';
        pid = (pid_t)server_int(rc, "GET t:pid:%s", id);
    }
    freeReplyObject(r);
    return pid;
}

static long retained(redisContext *rc, rjq_queue *q, int s) {
    return (long)server_int(rc, "HGET t:{%s}:stats retained",
                            rjq_queue_get_name(rjq_queue_get_shard(q, s)));
}

TEST(the_re_split_lease_holder_killed_mid_run_is_taken_over_and_the_whole_holds) {
    /* (shard 1's work outlasts shard 0's, its orphans' return included:
     * shard 1 gets the whole less 2 only once shard 0 has nothing left) */
    enum { WHOLE = 6, JOBS0 = 300, JOBS1 = 1000 };
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "rsd_kill");
    ASSERT_OK(declare_shards(e.base, q, SHARDS));
    limits_set(e.base, q, WHOLE, 0, 0);
    pid_t pids[2];
    for (int k = 0; k < 2; k++) pids[k] = spawn_worker(&e.s, "rsd_kill");
    /* work on shard 0 only: with nobody calling anything, it reaches the
     * whole less one per idle shard (static: 2), never more in all */
    enqueue_on_shard(e.base, q, 0, JOBS0);
    long most = 0, most0 = 0;
    double end = wait_deadline(30000);
    while (most0 < WHOLE - (SHARDS - 1)) {
        ASSERT(wait_poll(e.base, end, 2));
        sample_active(e.rc, q, 0, WHOLE, &most, &most0);
    }
    /* the lease holder killed mid-run (its jobs still active) */
    pid_t leader = lease_holder(e.rc, "rsd_kill");
    ASSERT(leader == pids[0] || leader == pids[1]);
    ASSERT(retained(e.rc, q, 0) < JOBS0);
    kill(leader, SIGKILL);
    ASSERT(reap(leader, 5000));
    pid_t other = leader == pids[0] ? pids[1] : pids[0];
    /* the work moves to shard 1: the other process takes the lease over
     * once it ran out and gives shard 1 the whole less one per idle shard */
    for (int k = 0; k < JOBS1; k += 500) enqueue_on_shard(e.base, q, 1, 500);
    long most1 = 0;
    end = wait_deadline(60000);
    while (most1 < WHOLE - (SHARDS - 1) || lease_holder(e.rc, "rsd_kill") != other ||
           retained(e.rc, q, 0) + retained(e.rc, q, 1) < JOBS0 + JOBS1) {
        if (!wait_poll(e.base, end, 2))
            FAIL_AT(__FILE__, __LINE__, "shard 1 reached %ld, lease holder %d (other %d), "
                    "retained %ld + %ld, active %ld + %ld", most1,
                    (int)lease_holder(e.rc, "rsd_kill"), (int)other, retained(e.rc, q, 0),
                    retained(e.rc, q, 1), shard_active(e.rc, q, 0), shard_active(e.rc, q, 1));
        sample_active(e.rc, q, 1, WHOLE, &most, &most1);
    }
    fprintf(stderr, "most active: %ld (whole %d); shard 0 reached %ld, shard 1 %ld after the "
                    "takeover\n", most, WHOLE, most0, most1);
    kill(other, SIGKILL);
    reap(other, 5000);
    env_stop(&e);
}

/* ---- bounds: the static split kept ------------------------------------------------ */

/* The bound (a producer's max_waiting) is not re-split (docs/sharding.md
 * section 4): with the re-splitter moving the concurrency shares to the
 * one shard with work, a producer's bound of 10 over 3 shards still takes
 * 4 jobs whose ids route to shard 0 and refuses the rest (RJQ_EFULL) while
 * the other shards are empty; anonymous jobs fill those: 10 in all. */
TEST(a_bound_keeps_its_static_split_while_the_limits_are_re_split) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "rsd_bound");
    ASSERT_OK(declare_shards(e.base, q, SHARDS));
    limits_set(e.base, q, 6, 0, 0);
    count_wait pw = {0};
    ASSERT_OK(rjq_queue_pause(q, on_count, &pw)); /* (the jobs stay waiting) */
    ASSERT(loop_until(e.base, &pw.done, 10000));
    ASSERT_OK(rjq__queue_resplit_every(q, PERIOD_MS, LEASE_MS));
    rjq_worker_options wo = quiet_worker_options(10);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, never_runs, NULL, &w));
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.max_waiting = 10;
    open_wait ow = {0};
    ASSERT_OK(rjq_queue_open_async(e.c, "rsd_bound", &qo, on_open_wait, &ow));
    ASSERT(loop_until(e.base, &ow.done, 20000));
    ASSERT_OK(ow.status);
    /* 10 jobs whose ids route to shard 0: its share of the bound, 4, taken */
    char ids[10][16];
    rjq_job_options jo[10];
    long counts[3] = {0};
    for (int i = 0, k = 0; i < 10; k++) {
        snprintf(ids[i], sizeof ids[i], "b-%d", k);
        if (rjq__crc16(ids[i], strlen(ids[i])) % SHARDS != 0) continue;
        jo[i] = (rjq_job_options)RJQ_JOB_OPTIONS_INIT;
        jo[i].id = ids[i];
        ASSERT_OK(rjq_enqueue(ow.q, "x", 1, &jo[i], on_enqueue_count, counts));
        i++;
    }
    ASSERT(loop_until_count(e.base, &counts[0], 10, 20000));
    ASSERT_EQ(4, counts[1]);
    ASSERT_EQ(6, counts[2]);
    /* the re-splitter gives shard 0 the concurrency (6 less one per idle
     * shard): the bound's shares stay, shard 0 still full */
    ASSERT(loop_until_server_int(e.base, e.rc, 4, 20000, "HGET t:{%s}:meta concurrency",
                                 rjq_queue_get_name(rjq_queue_get_shard(q, 0))));
    memset(counts, 0, sizeof counts);
    ASSERT_OK(rjq_enqueue(ow.q, "x", 1, &jo[9], on_enqueue_count, counts));
    ASSERT(loop_until_count(e.base, &counts[0], 1, 20000));
    ASSERT_EQ(1, counts[2]);
    /* anonymous jobs fill the other shards' shares: 10 waiting in all */
    memset(counts, 0, sizeof counts);
    for (int i = 0; i < 10; i++)
        ASSERT_OK(rjq_enqueue(ow.q, "x", 1, NULL, on_enqueue_count, counts));
    ASSERT(loop_until_count(e.base, &counts[0], 10, 20000));
    ASSERT_EQ(6, counts[1]);
    ASSERT_EQ(10, get_stats(e.base, q).ready);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* ---- rate: no call -------------------------------------------------------------- */

/* A rate of RATE/s over 3 shards with every job on shard 0 and 3 worker
 * processes (each re-splitting on its default period, one at a time):
 * nobody calls anything, yet once the first window has passed shard 0
 * starts the whole less one per idle shard within 5%, and never more
 * than RATE in any second (the jobs' start times, the server's clock). */
TEST(a_rate_is_re_split_to_the_one_busy_shard_without_a_call) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "rsd_rate");
    ASSERT_OK(declare_shards(e.base, q, SHARDS));
    limits_set(e.base, q, 0, RATE, 1000);
    rjq_queue *s0 = rjq_queue_get_shard(q, 0);
    static char ids[RATE_JOBS][RATE_ID_MAX];
    rate_enqueue_ids(e.base, s0, ids, RATE_JOBS);
    long share0 = (long)get_stats(e.base, s0).limit_rate;
    ASSERT_EQ(RATE / SHARDS + (RATE % SHARDS > 0), share0); /* (the static split) */
    pid_t pids[3];
    for (int k = 0; k < 3; k++) pids[k] = rate_spawn_worker(&e.s, "rsd_rate", SHARDS);
    /* shard 0's share, read while it has work (once it has none the
     * shares go back to the static split) */
    double end = wait_deadline(120000);
    long most_share = 0;
    while (server_int(e.rc, "HGET t:{%s}:stats retained", rjq_queue_get_name(s0)) < RATE_JOBS) {
        ASSERT(wait_poll(e.base, end, 50));
        redisReply *r = server_cmd(e.rc, "HGET t:{%s}:meta rate", rjq_queue_get_name(s0));
        long share = r && r->type == REDIS_REPLY_STRING ? atol(r->str) : 0;
        freeReplyObject(r);
        if (share > most_share) most_share = share;
    }
    rate_kill_workers(pids, 3);
    ASSERT_EQ(RATE - (SHARDS - 1), most_share);
    char what[80];
    snprintf(what, sizeof what, "rate %d/s over %d shards, work on one, re-split by the workers",
             RATE, SHARDS);
    rate_figures f = rate_measure(e.base, s0, ids, RATE_JOBS, 1000, RATE_WINDOW_MS, what);
    ASSERT(f.most <= RATE);
    ASSERT(f.per_s >= (RATE - (SHARDS - 1)) * 0.95 && f.per_s <= RATE * 1.05);
    env_stop(&e);
}

/* ---- lifetime ------------------------------------------------------------------- */

/* A re-splitter whose handle is closed while its call is in flight is
 * freed by that call's end, also when the client goes before the reply
 * (the sanitized build's leak check guards it): a re-splitter every
 * millisecond, so that one is nearly always in flight. */
TEST(a_re_splitter_closed_with_its_handle_mid_call_is_freed_once) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "rsd_life");
    ASSERT_OK(declare_shards(e.base, q, SHARDS));
    limits_set(e.base, q, 6, 0, 0);
    rjq_client_options o = client_options(e.s.url);
    for (int round = 0; round < 6; round++) {
        rjq_client *b = client_new(e.base, &o);
        rjq_queue *qb = open_learnt(e.base, b, "rsd_life");
        ASSERT_OK(rjq__queue_resplit_every(qb, 1, 0));
        rjq_worker_options wo = quiet_worker_options(2);
        rjq_worker *w;
        ASSERT_OK(rjq_worker_start(qb, &wo, never_runs, NULL, &w));
        double end = wait_deadline(10000);
        while (!rjq__queue_resplit_leading(qb)) ASSERT(wait_poll(e.base, end, 1));
        loop_for(e.base, round * 3);
        worker_stop_wait(e.base, w);
        ASSERT_OK(rjq_queue_close(qb));
        if (round % 2) loop_turn(e.base); /* (odd rounds: the reply may come first) */
        rjq_client_free(b);
    }
    env_stop(&e);
}
