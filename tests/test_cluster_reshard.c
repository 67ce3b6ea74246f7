/*
 * A Redis Cluster's topology changed under rjq by the tools an operator
 * uses (issue 34, "Failover and resharding"), on the test cluster of
 * tests/cluster.c (3 masters, 3 replicas): `redis-cli --cluster reshard`
 * moving the slots of busy queues while producers enqueue and workers
 * run, a master added with `redis-cli --cluster add-node` and given a
 * queue's slot, and a master restarted with its data. Each test has its
 * own cluster (it changes the topology).
 *
 * Every wait waits for the event it checks (answers, completions, the
 * cluster's state as its nodes say), bounded so that a broken build fails
 * instead of hanging.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <rjq/libevent.h>

#include "cluster.h"
#include "harness.h"
#include "server.h"
#include "slot.h"
#include "waits.h"

/* What the producers, awaits and workers of a test saw. */
typedef struct flow {
    long enq_made, enq_done, enq_bad;       /* rjq_enqueue calls and their answers */
    long await_made, await_done, await_bad; /* rjq_enqueue_await calls and answers */
    long handled;                           /* handler calls */
    char (*ran)[32];                        /* each handler call's payload */
    size_t ran_cap;
    int last_status;
    char last_error[256];
} flow;

/* One await: answered exactly once. */
typedef struct one_await {
    flow *f;
    int answers;
    char payload[32];
} one_await;

static void failed(flow *f, rjq_client *c, int status) {
    f->last_status = status;
    snprintf(f->last_error, sizeof f->last_error, "%s", rjq_client_get_errmsg(c));
}

static void on_enqueued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    flow *f = data;
    (void)jobs;
    f->enq_done++;
    if (status != RJQ_OK || n != 1) {
        f->enq_bad++;
        failed(f, c, status);
    }
}

static void on_awaited(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    one_await *a = data;
    a->answers++;
    a->f->await_done++;
    if (status != RJQ_OK || o->result_len != strlen(a->payload) ||
        memcmp(o->result, a->payload, o->result_len) != 0) {
        a->f->await_bad++;
        failed(a->f, c, status);
    }
}

/* Completes each job with its payload as the result; records the payload
 * (unique per job) to find a job run twice. */
static void on_job(rjq_job *job, void *data) {
    flow *f = data;
    size_t len;
    const void *p = rjq_job_get_payload(job, &len);
    if ((size_t)f->handled == f->ran_cap) {
        f->ran_cap = f->ran_cap ? 2 * f->ran_cap : 1024;
        f->ran = realloc(f->ran, f->ran_cap * sizeof *f->ran);
        ASSERT(f->ran != NULL);
    }
    ASSERT(len < sizeof f->ran[0]);
    memcpy(f->ran[f->handled], p, len);
    f->ran[f->handled][len] = '\0';
    f->handled++;
    rjq_job_complete(job, p, len, NULL, NULL);
}

static int by_text(const void *a, const void *b) {
    return strcmp(a, b);
}

/* No payload ran twice (and the handler ran want times). */
static void each_ran_once(flow *f, long want) {
    ASSERT_EQ(want, f->handled);
    qsort(f->ran, (size_t)f->handled, sizeof *f->ran, by_text);
    for (long k = 1; k < f->handled; k++)
        if (strcmp(f->ran[k], f->ran[k - 1]) == 0) FAIL_AT(__FILE__, __LINE__, "job %s ran twice", f->ran[k]);
}

static one_await *await_one(rjq_queue *q, flow *f, one_await ***list, long *cap, const char *payload) {
    if (f->await_made == *cap) {
        *cap = *cap ? 2 * *cap : 256;
        /* (the callbacks hold pointers: a list of separately allocated ones) */
        *list = realloc(*list, (size_t)*cap * sizeof **list);
        ASSERT(*list != NULL);
    }
    one_await *a = calloc(1, sizeof *a);
    ASSERT(a != NULL);
    a->f = f;
    snprintf(a->payload, sizeof a->payload, "%s", payload);
    ASSERT_OK(rjq_enqueue_await(q, payload, strlen(payload), NULL, NULL, on_awaited, a, NULL));
    (*list)[f->await_made++] = a;
    return a;
}

/* Queue names "<prefix><i>" whose slots are in [first, first + n). */
static void names_in_slots(const char *prefix, int first, int n, char names[][32], int count) {
    int found = 0;
    for (int i = 0; found < count && i < 10000000; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s%d", prefix, i);
        int s = rjq__key_slot(name, strlen(name));
        if (s >= first && s < first + n) snprintf(names[found++], 32, "%s", name);
    }
    ASSERT_EQ(count, found);
}

/* PUBSUB SHARDNUMSUB of channel on node i. */
static long long shardnumsub(test_cluster *cl, int node, const char *channel) {
    redisContext *rc = cluster_connect(cl, node);
    redisReply *r = server_cmd(rc, "PUBSUB SHARDNUMSUB %s", channel);
    long long n = -1;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->type == REDIS_REPLY_INTEGER)
        n = r->element[1]->integer;
    freeReplyObject(r);
    redisFree(rc);
    return n;
}

typedef struct sub_poll {
    test_cluster *cl;
    int node;
    const char *channel;
    long long want;
} sub_poll;

static int sub_seen(void *arg) {
    sub_poll *p = arg;
    return shardnumsub(p->cl, p->node, p->channel) == p->want;
}

static void wait_subs(struct event_base *base, test_cluster *cl, int node, const char *channel, long long want) {
    sub_poll p = {cl, node, channel, want};
    if (!loop_until_cond(base, sub_seen, &p, 30000))
        FAIL_AT(__FILE__, __LINE__, "node %d: SHARDNUMSUB %s: %lld, not %lld", node, channel,
                shardnumsub(cl, node, channel), want);
}

/* The worker options of these tests: the client's visit of a queue (which
 * finds jobs no doorbell or push announced) comes once in ten minutes,
 * so a job that starts within the tests' bounds was announced. */
static rjq_worker_options busy_worker(void) {
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 8;
    wo.reclaim_ms = 600000;
    return wo;
}

#define BUSY 3        /* queues whose slots the reshard moves */
#define MOVED 64      /* slots it moves: master 1's lowest */
#define MAX_JOBS 3000 /* the producers' bound */

/* `redis-cli --cluster reshard` moves the slots of three busy queues from
 * master 1 to master 2 while producers enqueue (with ids and without) and
 * await, and workers (and a queue on another master) run: every
 * enqueue and await is answered once and OK, every job ran exactly once,
 * none is left; the queues' sharded subscriptions followed the move (their
 * doorbells subscribed at the new master only), and a job enqueued after
 * the move starts without the client's periodic visit. */
TEST(reshard_of_busy_queues_loses_no_job_runs_none_twice_and_leaves_no_await_stuck) {
    test_cluster cl;
    cluster_start(&cl, 0);
    const int from = 1, to = 2;
    int first = cluster_first_slot(&cl, from);
    ASSERT(first > 0);
    char names[BUSY + 1][32];
    names_in_slots("rs", first, MOVED, names, BUSY);
    char other[CLUSTER_MASTERS][32];
    cluster_spread_names(&cl, "ro", other, 1);
    for (int m = 0; m < CLUSTER_MASTERS; m++) /* one on master 0, the URL's node: not moved */
        if (cluster_owner(&cl, 0, rjq__key_slot(other[m], strlen(other[m]))) == 0)
            snprintf(names[BUSY], 32, "%s", other[m]);
    int slot[BUSY + 1];
    for (int i = 0; i <= BUSY; i++) {
        slot[i] = rjq__key_slot(names[i], strlen(names[i]));
        int want = i < BUSY ? from : 0;
        ASSERT_EQ(want, cluster_owner(&cl, 0, slot[i]));
    }

    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(cl.url);
    rjq_client *c = client_new(base, &o);
    rjq_queue *q[BUSY + 1];
    rjq_worker *w[BUSY + 1];
    flow f = {0};
    rjq_worker_options wo = busy_worker();
    for (int i = 0; i <= BUSY; i++) {
        ASSERT_OK(rjq_queue_open(c, names[i], NULL, &q[i]));
        ASSERT_OK(rjq_worker_start(q[i], &wo, on_job, &f, &w[i]));
    }
    for (int i = 0; i <= BUSY; i++) {
        char wake[160];
        snprintf(wake, sizeof wake, "t:{%s}:wake", names[i]);
        wait_subs(base, &cl, i < BUSY ? from : 0, wake, 1);
    }

    /* producers: each pass, on each queue, an enqueue with an id, one
     * without, and an awaited one; until the reshard is over (and a while
     * before it, so jobs flow when it starts) */
    one_await **awaits = NULL;
    long await_cap = 0, seq = 0, per_queue[BUSY + 1] = {0};
    pid_t reshard = 0;
    int done = 0;
    long long moving_from = 0;
    redisContext *src = cluster_connect(&cl, from);
    double end = mono_ms() + 90000; /* (a bound: jobs that never flow fail the test) */
    while (!done) {
        if (mono_ms() > end)
            FAIL_AT(__FILE__, __LINE__, "%ld of %ld jobs ran; the reshard %s", f.handled, seq,
                    reshard ? "did not end" : "never started");
        if (seq < MAX_JOBS) {
            for (int i = 0; i <= BUSY; i++) {
                char payload[32], id[32];
                rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
                snprintf(id, sizeof id, "id-%ld", seq);
                snprintf(payload, sizeof payload, "%d:%ld", i, seq++);
                jo.id = id;
                f.enq_made++;
                ASSERT_OK(rjq_enqueue(q[i], payload, strlen(payload), &jo, on_enqueued, &f));
                snprintf(payload, sizeof payload, "%d:%ld", i, seq++);
                f.enq_made++;
                ASSERT_OK(rjq_enqueue(q[i], payload, strlen(payload), NULL, on_enqueued, &f));
                snprintf(payload, sizeof payload, "%d:%ld", i, seq++);
                await_one(q[i], &f, &awaits, &await_cap, payload);
                per_queue[i] += 3;
            }
        }
        loop_for(base, 5);
        if (reshard == 0 && f.handled >= 60) { /* jobs flow: move the slots */
            moving_from = server_info_number(src, "errorstats", "errorstat_ASK:count=") +
                          server_info_number(src, "errorstats", "errorstat_MOVED:count=");
            reshard = cluster_reshard_start(&cl, from, to, MOVED);
        } else if (reshard) {
            done = cluster_reshard_done(&cl, reshard);
        }
    }
    for (int i = 0; i <= BUSY; i++) {
        int want = i < BUSY ? to : 0;
        ASSERT_EQ(want, cluster_owner(&cl, 0, slot[i]));
    }
    fprintf(stderr, "%ld jobs made, %ld handled when the reshard ended\n", seq, f.handled);
    /* the client was redirected by the old master (its requests followed) */
    long long redirects = server_info_number(src, "errorstats", "errorstat_ASK:count=") +
                          server_info_number(src, "errorstats", "errorstat_MOVED:count=") - moving_from;
    redisFree(src);
    ASSERT(redirects > 0);

    /* every enqueue and await answered, OK, once; every job ran once */
    if (!loop_until_count(base, &f.enq_done, f.enq_made, 60000))
        FAIL_AT(__FILE__, __LINE__, "%ld of %ld enqueues answered", f.enq_done, f.enq_made);
    if (!loop_until_count(base, &f.await_done, f.await_made, 60000))
        FAIL_AT(__FILE__, __LINE__, "%ld of %ld awaits answered (stuck)", f.await_done, f.await_made);
    if (f.enq_bad || f.await_bad)
        FAIL_AT(__FILE__, __LINE__, "%ld enqueues and %ld awaits failed: %s (%s)", f.enq_bad, f.await_bad,
                rjq_strerror(f.last_status), f.last_error);
    if (!loop_until_count(base, &f.handled, seq, 60000))
        FAIL_AT(__FILE__, __LINE__, "%ld of %ld jobs ran", f.handled, seq);
    for (long k = 0; k < f.await_made; k++) ASSERT_EQ(1, awaits[k]->answers);
    for (int i = 0; i <= BUSY; i++) {
        rjq_stats s = get_stats(base, q[i]);
        ASSERT_EQ(per_queue[i], s.enqueued);
        ASSERT_EQ(per_queue[i], s.completed);
        ASSERT_EQ(0, s.ready + s.active + s.delayed);
    }

    /* the moved queues' doorbells are subscribed at the new master only */
    for (int i = 0; i < BUSY; i++) {
        char wake[160];
        snprintf(wake, sizeof wake, "t:{%s}:wake", names[i]);
        wait_subs(base, &cl, to, wake, 1);
        ASSERT_EQ(0, shardnumsub(&cl, from, wake));
    }
    /* a job enqueued now starts on an announcement, not on a visit */
    for (int i = 0; i < BUSY; i++) {
        char payload[32];
        snprintf(payload, sizeof payload, "%d:after", i);
        f.enq_made++;
        ASSERT_OK(rjq_enqueue(q[i], payload, strlen(payload), NULL, on_enqueued, &f));
    }
    if (!loop_until_count(base, &f.handled, seq + BUSY, 30000))
        FAIL_AT(__FILE__, __LINE__, "%ld of %d jobs enqueued after the move ran", f.handled - seq, BUSY);
    ASSERT_EQ(0, f.enq_bad);
    each_ran_once(&f, seq + BUSY);

    for (long k = 0; k < f.await_made; k++) free(awaits[k]);
    free(awaits);
    free(f.ran);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}

/* Libraries (FUNCTION LIST) on node i. */
static long long libraries(test_cluster *cl, int i) {
    redisContext *rc = cluster_connect(cl, i);
    redisReply *r = server_cmd(rc, "FUNCTION LIST");
    ASSERT(r->type == REDIS_REPLY_ARRAY);
    long long n = (long long)r->elements;
    freeReplyObject(r);
    redisFree(rc);
    return n;
}

static void await_wave(struct event_base *base, rjq_queue *q, flow *f, one_await ***list, long *cap,
                       const char *tag, int n) {
    long want = f->await_done + n;
    for (int k = 0; k < n; k++) {
        char payload[32];
        snprintf(payload, sizeof payload, "%s:%d", tag, k);
        await_one(q, f, list, cap, payload);
    }
    if (!loop_until_count(base, &f->await_done, want, 60000)) {
        stats_wait s = stats_of(base, q); /* (what the queue holds, to tell why) */
        FAIL_AT(__FILE__, __LINE__, "%s: %ld of %ld awaits answered; stats: %s, ready %lld active %lld "
                "completed %lld", tag, f->await_done, want, rjq_strerror(s.status), s.s.ready,
                s.s.active, s.s.completed);
    }
    if (f->await_bad)
        FAIL_AT(__FILE__, __LINE__, "%s: %ld awaits failed: %s (%s)", tag, f->await_bad,
                rjq_strerror(f->last_status), f->last_error);
}

/* A master added with `redis-cli --cluster add-node` (its function library
 * flushed: it has none) is given a busy queue's slot by a reshard: the
 * client loads the library there itself and the queue's work runs there,
 * its doorbell subscribed there. */
TEST(master_added_later_gets_the_library_and_runs_a_resharded_queue) {
    test_cluster cl;
    cluster_start(&cl, 0);
    const int from = 1;
    int first = cluster_first_slot(&cl, from);
    char names[1][32];
    names_in_slots("ra", first, 16, names, 1);
    int slot = rjq__key_slot(names[0], strlen(names[0]));

    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(cl.url);
    rjq_client *c = client_new(base, &o);
    rjq_queue *q;
    rjq_worker *w;
    flow f = {0};
    rjq_worker_options wo = busy_worker();
    ASSERT_OK(rjq_queue_open(c, names[0], NULL, &q));
    ASSERT_OK(rjq_worker_start(q, &wo, on_job, &f, &w));
    one_await **awaits = NULL;
    long cap = 0;
    await_wave(base, q, &f, &awaits, &cap, "before", 10);

    int added = cluster_add_master(&cl);
    ASSERT_EQ(CLUSTER_NODES, added);
    redisContext *rc = cluster_connect(&cl, added);
    freeReplyObject(server_cmd(rc, "FUNCTION FLUSH")); /* (whatever add-node copied) */
    redisFree(rc);
    ASSERT_EQ(0, libraries(&cl, added));
    pid_t pid = cluster_reshard_start(&cl, from, added, 16);
    WAIT_FOR(base, cluster_reshard_done(&cl, pid), 120000);
    ASSERT_EQ(added, cluster_owner(&cl, 0, slot));

    /* the work goes on, on the new master, with the library the client loaded */
    await_wave(base, q, &f, &awaits, &cap, "after", 20);
    ASSERT(libraries(&cl, added) >= 1);
    ASSERT(cluster_node_calls(&cl, added, "fcall") > 0);
    char wake[160];
    snprintf(wake, sizeof wake, "t:{%s}:wake", names[0]);
    wait_subs(base, &cl, added, wake, 1);
    /* a job enqueued now starts on an announcement, not on a visit */
    f.enq_made++;
    ASSERT_OK(rjq_enqueue(q, "late", 4, NULL, on_enqueued, &f));
    ASSERT(loop_until_count(base, &f.handled, 31, 30000));
    ASSERT_EQ(0, f.enq_bad);
    rjq_stats s = get_stats(base, q);
    ASSERT_EQ(31, s.enqueued);
    ASSERT_EQ(31, s.completed);
    each_ran_once(&f, 31);

    for (long k = 0; k < f.await_made; k++) free(awaits[k]);
    free(awaits);
    free(f.ran);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}

/* Does node `asked` flag node i as failed (CLUSTER NODES: "fail")? */
typedef struct fail_poll {
    test_cluster *cl;
    int asked, node;
} fail_poll;

static int flagged_failed(void *arg) {
    fail_poll *p = arg;
    redisContext *rc = cluster_connect(p->cl, p->asked);
    redisReply *r = server_cmd(rc, "CLUSTER NODES");
    ASSERT(r->type == REDIS_REPLY_STRING);
    const char *line = r->str; /* (the line that begins with its id) */
    while (line && strncmp(line, p->cl->id[p->node], 40) != 0) {
        line = strchr(line, '\n');
        if (line) line++;
    }
    ASSERT(line != NULL);
    /* "<id> <addr> <flags> ...": flags such as "master,fail" ("fail?" is
     * only suspected) */
    char id[48], addr[64], flags[128] = "";
    ASSERT_EQ(3, sscanf(line, "%47s %63s %127s", id, addr, flags));
    int failed = 0;
    for (char *save = NULL, *t = strtok_r(flags, ",", &save); t; t = strtok_r(NULL, ",", &save))
        failed |= strcmp(t, "fail") == 0;
    freeReplyObject(r);
    redisFree(rc);
    return failed;
}

static void config_set(test_cluster *cl, int i, const char *name, const char *value) {
    redisContext *rc = cluster_connect(cl, i);
    redisReply *r = server_cmd(rc, "CONFIG SET %s %s", name, value);
    ASSERT(r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(rc);
}

/* A master stopped (SHUTDOWN SAVE) and started again with its data, its
 * replica told not to take over and the cluster serving the slots it still
 * has (cluster-require-full-coverage no): the queues on the other masters
 * never stop, also once the cluster flags it failed; the awaits made
 * before the stop and during it are answered by the jobs its data kept,
 * run on it once it is back. */
TEST(master_restarted_with_its_data_work_resumes_and_others_never_stop) {
    test_cluster cl;
    cluster_start(&cl, 0);
    const int victim = 1;
    int replica = cluster_replica_of(&cl, victim);
    ASSERT(replica >= 0);
    for (int i = 0; i < CLUSTER_NODES; i++) config_set(&cl, i, "cluster-require-full-coverage", "no");
    config_set(&cl, replica, "cluster-replica-no-failover", "yes");
    char found[CLUSTER_MASTERS][32], names[CLUSTER_MASTERS][32]; /* names[m]: on master m */
    cluster_spread_names(&cl, "rr", found, 1);
    for (int i = 0; i < CLUSTER_MASTERS; i++)
        snprintf(names[cluster_owner(&cl, 0, rjq__key_slot(found[i], strlen(found[i])))], 32, "%s", found[i]);

    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(cl.url);
    rjq_client *c = client_new(base, &o);
    rjq_queue *q[CLUSTER_MASTERS];
    rjq_worker *w[CLUSTER_MASTERS];
    flow f = {0};
    rjq_worker_options wo = busy_worker();
    for (int i = 0; i < CLUSTER_MASTERS; i++) ASSERT_OK(rjq_queue_open(c, names[i], NULL, &q[i]));
    for (int i = 0; i < CLUSTER_MASTERS; i++)
        if (i != victim) ASSERT_OK(rjq_worker_start(q[i], &wo, on_job, &f, &w[i]));
    one_await **awaits = NULL;
    long cap = 0;
    await_wave(base, q[0], &f, &awaits, &cap, "warm0", 10);
    await_wave(base, q[2], &f, &awaits, &cap, "warm2", 10);
    /* 10 awaited jobs stored on the victim (no worker of its queue yet) */
    for (int k = 0; k < 10; k++) {
        char payload[32];
        snprintf(payload, sizeof payload, "kept:%d", k);
        await_one(q[victim], &f, &awaits, &cap, payload);
    }
    WAIT_FOR(base, get_stats(base, q[victim]).ready == 10, 60000);

    cluster_shutdown_node(&cl, victim);
    /* the others go on, also once the cluster says the victim failed */
    await_wave(base, q[0], &f, &awaits, &cap, "down0", 10);
    fail_poll fp = {&cl, 0, victim};
    if (!loop_until_cond(base, flagged_failed, &fp, 60000))
        FAIL_AT(__FILE__, __LINE__, "node 0 never flagged node %d failed", victim);
    await_wave(base, q[0], &f, &awaits, &cap, "failed0", 10);
    await_wave(base, q[2], &f, &awaits, &cap, "failed2", 10);
    /* awaited meanwhile on the victim's queue: answered once it is back */
    long victim_done = f.await_done;
    for (int k = 0; k < 5; k++) {
        char payload[32];
        snprintf(payload, sizeof payload, "while:%d", k);
        await_one(q[victim], &f, &awaits, &cap, payload);
    }

    cluster_restart_node(&cl, victim);
    ASSERT(cluster_is_master(&cl, victim));
    ASSERT_OK(rjq_worker_start(q[victim], &wo, on_job, &f, &w[victim]));
    if (!loop_until_count(base, &f.await_done, victim_done + 15, 60000))
        FAIL_AT(__FILE__, __LINE__, "%ld of 15 awaits on the restarted master answered",
                f.await_done - victim_done);
    if (f.await_bad)
        FAIL_AT(__FILE__, __LINE__, "%ld awaits failed: %s (%s)", f.await_bad, rjq_strerror(f.last_status),
                f.last_error);
    await_wave(base, q[victim], &f, &awaits, &cap, "back", 10);
    for (long k = 0; k < f.await_made; k++) ASSERT_EQ(1, awaits[k]->answers);
    rjq_stats s = get_stats(base, q[victim]);
    ASSERT_EQ(25, s.enqueued);
    ASSERT_EQ(25, s.completed);
    each_ran_once(&f, f.await_made);

    for (long k = 0; k < f.await_made; k++) free(awaits[k]);
    free(awaits);
    free(f.ran);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}
