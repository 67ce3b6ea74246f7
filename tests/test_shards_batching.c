/*
 * A sharded queue's enqueues share script calls as a plain queue's do
 * (issue 35, bench/README.md "Anonymous jobs join the shard whose call is
 * in flight"): the enqueues of one loop turn go as one call per shard,
 * also while completions go on the same connection, and anonymous jobs
 * made one per loop turn while a shard's enqueue call is in flight join
 * the batch held back for its reply instead of opening a call on each of
 * the other shards (src/shard.c anon_shard; before: a 3-shard queue fed a
 * job or two per turn made one enqueue call per 1.17 jobs at 3 000
 * jobs/s, against 4 on the plain queue). Every enqueue call is counted
 * (SLOWLOG of every command, by function name), never timed; the call in
 * flight is made, not hoped for: the server is paused for writes (CLIENT
 * PAUSE WRITE holds every FCALL).
 */
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

enum { SHARDS = 3 };

static void slowlog_all(redisContext *rc) {
    freeReplyObject(server_cmd(rc, "CONFIG SET slowlog-log-slower-than 0"));
    freeReplyObject(server_cmd(rc, "CONFIG SET slowlog-max-len 4096"));
    freeReplyObject(server_cmd(rc, "SLOWLOG RESET"));
}

/* The enqueue script calls (enqueue.lua, enqueue_one.lua) the server ran
 * since slowlog_all. */
static int enqueue_calls(redisContext *rc) {
    redisReply *r = server_cmd(rc, "SLOWLOG GET 4096");
    ASSERT(r->type == REDIS_REPLY_ARRAY);
    int n = 0;
    for (size_t i = 0; i < r->elements; i++) {
        redisReply *e = r->element[i];
        ASSERT(e->type == REDIS_REPLY_ARRAY && e->elements >= 4);
        redisReply *argv = e->element[3];
        if (argv->type != REDIS_REPLY_ARRAY || argv->elements < 2) continue;
        if (strcasecmp(argv->element[0]->str, "FCALL") != 0) continue;
        const char *f = argv->element[1]->str;
        size_t len = strlen(f);
        if ((len >= 8 && strcmp(f + len - 8, "_enqueue") == 0) ||
            (len >= 12 && strcmp(f + len - 12, "_enqueue_one") == 0))
            n++;
    }
    freeReplyObject(r);
    return n;
}

static void on_queued_count(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    long *done = data;
    (void)c, (void)jobs, (void)n;
    ASSERT_OK(status);
    (*done)++;
}

enum { TURNS = 10 };

/* TURNS anonymous jobs, one per loop turn, the first one's call in flight
 * (the server paused for writes) all the while: the later ones join the
 * batch held back for its reply, on its shard, so TURNS jobs go in 2
 * calls. Before (each to the next shard in turn): the second and third
 * found their shards with nothing in flight and went at once, and the
 * rest were held on each of the 3 shards: 6 calls. */
TEST(anonymous_jobs_made_while_a_shards_enqueue_is_in_flight_join_its_held_batch) {
    test_env e;
    env_start(&e, NULL);
    rjq_client_options o = client_options(e.s.url);
    o.ping_interval_ms = 0;        /* (no liveness writes beside the jobs) */
    o.command_timeout_ms = 120000; /* (the paused call must not time out) */
    rjq_client *c = client_new(e.base, &o);
    rjq_queue *q = open_learnt(e.base, c, "sb_held");
    ASSERT_OK(declare_shards(e.base, q, SHARDS));
    ASSERT_EQ(SHARDS, rjq_queue_count_shards(q));
    /* warm: the enqueue's first use (the index declaration's read) */
    long warm = 0;
    ASSERT_OK(rjq_enqueue(q, "w", 1, NULL, on_queued_count, &warm));
    ASSERT(loop_until_count(e.base, &warm, 1, 20000));
    slowlog_all(e.rc);

    freeReplyObject(server_cmd(e.rc, "CLIENT PAUSE 100000 WRITE"));
    long done = 0;
    for (int i = 0; i < TURNS; i++) {
        ASSERT_OK(rjq_enqueue(q, "p", 1, NULL, on_queued_count, &done));
        loop_turn(e.base); /* (its tick: the first goes, the others are held) */
    }
    ASSERT_EQ(0, done); /* (the paused server answered nothing) */
    freeReplyObject(server_cmd(e.rc, "CLIENT UNPAUSE"));
    ASSERT(loop_until_count(e.base, &done, TURNS, 60000));
    int calls = enqueue_calls(e.rc);
    fprintf(stderr, "%d anonymous jobs made one per loop turn while the first's call was in "
                    "flight: %d enqueue calls\n", TURNS, calls);
    ASSERT_EQ(2, calls);
    /* all on the first one's shard (the round robin moves on after) */
    int on = 0;
    for (int s = 0; s < SHARDS; s++) {
        long long ready = get_stats(e.base, rjq_queue_get_shard(q, s)).ready;
        if (ready >= TURNS) on++;
    }
    ASSERT_EQ(1, on);
    ASSERT_EQ(TURNS + 1, get_stats(e.base, q).ready);
    rjq_client_free(c);
    env_stop(&e);
}

enum { HELD = 6, ENQUEUES = 30 };

typedef struct holder {
    rjq_job *jobs[64];
    long n;
} holder;

static void hold_job(rjq_job *job, void *data) {
    holder *h = data;
    ASSERT(h->n < 64);
    h->jobs[h->n++] = job;
}

/* ENQUEUES anonymous enqueues made in one loop turn between the
 * completions of HELD running jobs of the same queue (all shards on one
 * server: every completion goes on the enqueues' connection, and sends
 * the enqueues made before it first, src/enqueue.c before_send): at most
 * one enqueue call per shard. */
TEST(enqueues_of_a_sharded_queue_in_one_loop_turn_go_in_one_call_per_shard_among_completions) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "sb_turn");
    ASSERT_OK(declare_shards(e.base, q, SHARDS));
    holder h = {0};
    rjq_worker_options wo = quiet_worker_options(64);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, hold_job, &h, &w));
    long queued = 0;
    for (int i = 0; i < HELD; i++) ASSERT_OK(rjq_enqueue(q, "h", 1, NULL, on_queued_count, &queued));
    ASSERT(loop_until_count(e.base, &queued, HELD, 20000));
    ASSERT(loop_until_count(e.base, &h.n, HELD, 20000));
    slowlog_all(e.rc);

    long done = 0, completed = 0;
    for (int i = 0; i < ENQUEUES; i++) {
        if (i % (ENQUEUES / HELD) == 0)
            ASSERT_OK(rjq_job_complete(h.jobs[i / (ENQUEUES / HELD)], NULL, 0, on_done_ok,
                                       &completed));
        ASSERT_OK(rjq_enqueue(q, "p", 1, NULL, on_queued_count, &done));
    }
    ASSERT(loop_until_count(e.base, &done, ENQUEUES, 20000));
    ASSERT(loop_until_count(e.base, &completed, HELD, 20000));
    int calls = enqueue_calls(e.rc);
    fprintf(stderr, "%d enqueues in one loop turn among %d completions: %d enqueue calls\n",
            ENQUEUES, HELD, calls);
    ASSERT(calls >= 1 && calls <= SHARDS);
    ASSERT(loop_until_count(e.base, &h.n, HELD + ENQUEUES, 20000));
    for (long i = HELD; i < h.n; i++)
        ASSERT_OK(rjq_job_complete(h.jobs[i], NULL, 0, on_done_ok, &completed));
    ASSERT(loop_until_count(e.base, &completed, HELD + ENQUEUES, 20000));
    worker_stop_wait(e.base, w);
    env_stop(&e);
}
