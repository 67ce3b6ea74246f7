/*
 * Awaited jobs on a Redis Cluster share script calls (issue 34, bench/
 * README.md "Redis Cluster"). On a cluster every master link wakes the
 * loop on its own, so the one-connection convoy of a standalone server
 * never forms: what batches a queue's awaited jobs there is its
 * self-clock (src/enqueue.c, "Self-clocking": while one of its enqueue
 * calls is in flight the next batch gathers), and a held batch goes early
 * only ahead of a later request that may see it or that goes on its own
 * master's connection, never because of work on another master.
 *
 * The call in flight is made, not hoped for: its master is paused for
 * writes (CLIENT PAUSE WRITE, which holds every FCALL and EVALSHA), while
 * the other masters keep completing jobs. What is checked is counted
 * (FCALL calls in the paused master's INFO commandstats), never timed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <rjq/libevent.h>

#include "cluster.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

enum { JOBS = 50 };

typedef struct tally {
    long done, ok;
    int last_status;
} tally;

static void on_awaited(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    tally *t = data;
    (void)c, (void)o;
    t->done++;
    if (status == RJQ_OK) t->ok++;
    else t->last_status = status;
}

/* A worker completing at once; its completions counted when answered. */
static void on_job(rjq_job *job, void *data) {
    rjq_job_complete(job, NULL, 0, on_done_ok, data);
}

static void node_cmd(test_cluster *cl, int node, const char *cmd) {
    redisContext *rc = cluster_connect(cl, node);
    redisReply *r = server_cmd(rc, cmd);
    ASSERT(r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(rc);
}

/* JOBS awaits made on a queue one per loop turn while its first enqueue
 * call is in flight (its master paused), while a queue on another master
 * enqueues and completes a job each turn: the held awaits go as one call
 * once the first one is answered (before the self-clock: a call per turn,
 * JOBS calls), and the other master's completions, on their own
 * connection, never send them early. Every await is answered. */
TEST(awaits_on_one_master_share_a_call_while_other_masters_complete_jobs) {
    test_cluster cl;
    cluster_start(&cl, 0);
    char names[CLUSTER_MASTERS][32];
    cluster_spread_names(&cl, "bq", names, 1);
    char key[64];
    snprintf(key, sizeof key, "t:{%s}:ready", names[0]);
    int a = cluster_node_of_key(&cl, key);
    snprintf(key, sizeof key, "t:{%s}:ready", names[1]);
    int b = cluster_node_of_key(&cl, key);
    ASSERT(a >= 0 && b >= 0 && a != b);

    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(cl.url);
    o.ping_interval_ms = 0;        /* (no liveness writes beside the jobs) */
    o.command_timeout_ms = 120000; /* (the paused call must not time out) */
    rjq_client *c = client_new(base, &o);
    rjq_queue *qa, *qb;
    ASSERT_OK(rjq_queue_open(c, names[0], NULL, &qa));
    ASSERT_OK(rjq_queue_open(c, names[1], NULL, &qb));
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 64;
    long done_a = 0, done_b = 0;
    rjq_worker *wa, *wb;
    ASSERT_OK(rjq_worker_start(qa, &wo, on_job, &done_a, &wa));
    ASSERT_OK(rjq_worker_start(qb, &wo, on_job, &done_b, &wb));
    /* warm: one await on each (reply subscriptions, links, workers) */
    tally warm = {0};
    ASSERT_OK(rjq_enqueue_await(qa, "w", 1, NULL, NULL, on_awaited, &warm, NULL));
    ASSERT_OK(rjq_enqueue_await(qb, "w", 1, NULL, NULL, on_awaited, &warm, NULL));
    if (!loop_until_count(base, &warm.done, 2, 60000) || warm.ok != 2)
        FAIL_AT(__FILE__, __LINE__, "warm-up: %ld of 2 answered (%s)", warm.ok,
                rjq_strerror(warm.last_status));
    ASSERT(loop_until_count(base, &done_a, 1, 20000) && loop_until_count(base, &done_b, 1, 20000));

    node_cmd(&cl, a, "CLIENT PAUSE 100000 WRITE");
    long long before = cluster_node_calls(&cl, a, "fcall");
    tally t = {0};
    enqueue_wait ew = {0};
    for (int i = 0; i < JOBS; i++) {
        ASSERT_OK(rjq_enqueue_await(qa, "p", 1, NULL, NULL, on_awaited, &t, NULL));
        loop_turn(base); /* (its tick: the first goes, the others are held) */
        /* a job on the other master, run and completed (its completion
         * answered) before the next await */
        ASSERT_OK(rjq_enqueue(qb, "o", 1, NULL, on_enqueue_wait, &ew));
        if (!loop_until_count(base, &done_b, 2 + i, 60000))
            FAIL_AT(__FILE__, __LINE__, "%ld of %d completions on the other master", done_b - 1,
                    i + 1);
    }
    WAIT_FOR(base, ew.done == JOBS, 60000);
    ASSERT_OK(ew.status);
    ASSERT_EQ(0, t.done); /* (the paused master answered nothing) */
    node_cmd(&cl, a, "CLIENT UNPAUSE");
    if (!loop_until_count(base, &t.done, JOBS, 60000))
        FAIL_AT(__FILE__, __LINE__, "%ld of %d awaits answered", t.done, JOBS);
    if (t.ok != JOBS)
        FAIL_AT(__FILE__, __LINE__, "%ld of %d awaits failed: %s", JOBS - t.ok, JOBS,
                rjq_strerror(t.last_status));
    ASSERT(loop_until_count(base, &done_a, 1 + JOBS, 20000));
    /* the enqueues (2 calls: the first, then the held ones) and the
     * completions of JOBS jobs on the paused master */
    long long calls = cluster_node_calls(&cl, a, "fcall") - before;
    fprintf(stderr, "%d awaits made one per loop turn while the first was in flight: "
                    "%lld script calls on their master in all\n", JOBS, calls);
    if (calls >= JOBS / 2)
        FAIL_AT(__FILE__, __LINE__, "%lld script calls on the paused master for %d awaits", calls,
                JOBS);

    rjq_worker_stop(wa, NULL, NULL);
    rjq_worker_stop(wb, NULL, NULL);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}
