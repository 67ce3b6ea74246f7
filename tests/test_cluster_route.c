/*
 * rjq on a Redis Cluster (issue 34, docs/cluster.md 3.1-3.4), on the test
 * cluster of tests/cluster.c (3 masters, 3 replicas): one client given one
 * node's URL routes each queue's commands to the master owning the queue's
 * slot, follows MOVED and ASK while a slot migrates, and goes on after a
 * master is killed and its replica promoted. Before routing, every queue
 * whose slot was on another node than the URL's got MOVED errors.
 *
 * Every wait waits for the event it checks (answers, completions), bounded
 * so that a broken build fails instead of hanging.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <event2/event.h>
#include <rjq/libevent.h>

#include "cluster.h"
#include "harness.h"
#include "server.h"
#include "slot.h"
#include "waits.h"

#define NQ 12

typedef struct tally {
    long ok, bad, done;
    char first_id[64];
    int last_status;
    char last_error[256];
} tally;

static void on_awaited(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    tally *t = data;
    t->done++;
    if (status == RJQ_OK) {
        if (t->ok++ == 0) snprintf(t->first_id, sizeof t->first_id, "%s", o->id);
    } else {
        t->bad++;
        t->last_status = status;
        snprintf(t->last_error, sizeof t->last_error, "%s", rjq_client_get_errmsg(c));
    }
}

static void on_job(rjq_job *job, void *data) {
    long *handled = data;
    size_t len;
    const void *p = rjq_job_get_payload(job, &len);
    (*handled)++;
    rjq_job_complete(job, p, len, NULL, NULL);
}

static void await_n(rjq_queue *q, int n, const char *tag, tally *t) {
    for (int i = 0; i < n; i++) {
        char payload[64];
        snprintf(payload, sizeof payload, "%s-%d", tag, i);
        ASSERT_OK(rjq_enqueue_await(q, payload, strlen(payload), NULL, NULL, on_awaited, t, NULL));
    }
}

typedef struct cancel_wait {
    int done, status;
} cancel_wait;

static void on_cancelled(rjq_client *c, int status, const char *state, void *data) {
    cancel_wait *w = data;
    (void)c, (void)state;
    w->status = status;
    w->done = 1;
}

static void on_paused(rjq_client *c, int status, long long n, void *data) {
    long *count = data;
    (void)c, (void)n;
    ASSERT_OK(status);
    (*count)++;
}

static long long master_calls(test_cluster *cl, int node, const char *cmd) {
    redisContext *rc = cluster_connect(cl, node);
    long long n = server_calls(rc, cmd);
    redisFree(rc);
    return n;
}

/* 12 queues, 4 on each master, through one client given node 0's URL:
 * enqueues, awaits, workers, cancel, pause and resume, stats. */
TEST(twelve_queues_over_three_masters_through_one_node_url) {
    test_cluster cl;
    cluster_start(&cl, 0);
    char names[NQ][32];
    cluster_spread_names(&cl, "cq", names, NQ / CLUSTER_MASTERS);
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(cl.url);
    rjq_client *c = client_new(base, &o);
    rjq_queue *q[NQ];
    rjq_worker *w[NQ];
    long handled = 0;
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 4;
    for (int i = 0; i < NQ; i++) {
        ASSERT_OK(rjq_queue_open(c, names[i], NULL, &q[i]));
        ASSERT_OK(rjq_worker_start(q[i], &wo, on_job, &handled, &w[i]));
    }
    long long before[CLUSTER_MASTERS];
    for (int m = 0; m < CLUSTER_MASTERS; m++) before[m] = master_calls(&cl, m, "fcall");

    /* awaits on every queue, answered by the workers */
    tally t = {0};
    for (int i = 0; i < NQ; i++) await_n(q[i], 10, names[i], &t);
    if (!loop_until_count(base, &t.done, NQ * 10, 60000))
        FAIL_AT(__FILE__, __LINE__, "%ld of %d awaits answered", t.done, NQ * 10);
    if (t.bad) FAIL_AT(__FILE__, __LINE__, "%ld awaits failed: %s (%s)", t.bad,
                       rjq_strerror(t.last_status), t.last_error);
    /* each master ran scripts of its own queues */
    for (int m = 0; m < CLUSTER_MASTERS; m++) {
        long long now = master_calls(&cl, m, "fcall");
        if (now < before[m] + 4 * 3) /* at least a claim and a completion per queue */
            FAIL_AT(__FILE__, __LINE__, "master %d ran %lld scripts", m, now - before[m]);
    }

    /* stats of every queue: its 10 jobs completed, read from its master */
    for (int i = 0; i < NQ; i++) {
        rjq_stats s = get_stats(base, q[i]);
        ASSERT_EQ(10, s.enqueued);
        ASSERT_EQ(10, s.completed);
    }

    /* cancel: a delayed job on every queue */
    for (int i = 0; i < NQ; i++) {
        rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
        char id[32];
        snprintf(id, sizeof id, "later-%d", i);
        jo.id = id;
        jo.delay_ms = 600000;
        enqueue_wait e = enqueue_job(base, q[i], "x", &jo);
        ASSERT_OK(e.status);
        cancel_wait cw = {0};
        ASSERT_OK(rjq_queue_cancel(q[i], id, on_cancelled, &cw));
        ASSERT(loop_until(base, &cw.done, 20000));
        ASSERT_OK(cw.status);
    }

    /* pause every queue: a job enqueued then waits; resume: it runs */
    long paused = 0;
    for (int i = 0; i < NQ; i++) ASSERT_OK(rjq_queue_pause(q[i], on_paused, &paused));
    ASSERT(loop_until_count(base, &paused, NQ, 20000));
    for (int i = 0; i < NQ; i++) {
        enqueue_wait e = enqueue_job(base, q[i], "paused", NULL);
        ASSERT_OK(e.status);
    }
    for (int i = 0; i < NQ; i++) {
        rjq_stats s = get_stats(base, q[i]);
        ASSERT_EQ(1, s.paused);
        ASSERT_EQ(1, s.ready);
        ASSERT_EQ(1, s.cancelled);
    }
    long resumed = 0, target = handled + NQ; /* (counted before any can run) */
    for (int i = 0; i < NQ; i++) ASSERT_OK(rjq_queue_resume(q[i], on_paused, &resumed));
    ASSERT(loop_until_count(base, &resumed, NQ, 20000));
    if (!loop_until_count(base, &handled, target, 60000))
        FAIL_AT(__FILE__, __LINE__, "%ld of %ld jobs handled after resume", handled, target);

    rjq_client_free(c);
    event_base_free(base);

    /* a database other than 0 is refused with words that say why */
    base = event_base_new();
    char url[96];
    snprintf(url, sizeof url, "%s/2", cl.url);
    o = client_options(url);
    c = client_new(base, &o);
    rjq_queue *q1 = NULL;
    ASSERT_OK(rjq_queue_open(c, names[0], NULL, &q1));
    enqueue_wait e = enqueue_job(base, q1, "x", NULL);
    ASSERT(e.status != RJQ_OK);
    if (strstr(rjq_client_get_errmsg(c), "database 0 only") == NULL)
        FAIL_AT(__FILE__, __LINE__, "errmsg: %s", rjq_client_get_errmsg(c));
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}

/* A queue's slot migrated (by hand, in a resharding's steps) while awaited
 * jobs flow: ASK during the migration, MOVED after it; every await answered
 * with its result, no job lost. */
TEST(slot_migrated_mid_run_moved_and_ask_followed) {
    test_cluster cl;
    cluster_start(&cl, 0);
    char names[CLUSTER_MASTERS][32];
    cluster_spread_names(&cl, "cq", names, 1);
    const char *name = names[1]; /* on master 1: not the URL's node */
    int slot = rjq__key_slot(name, strlen(name));
    int from = cluster_owner(&cl, 0, slot), to = (from + 1) % CLUSTER_MASTERS;
    ASSERT_EQ(1, from); /* (cluster_spread_names: by master) */
    /* the helper groups by master whatever order it finds the names in
     * (two per master: "cq3" on master 2 is found before "cq4" on master 0) */
    char two[2 * CLUSTER_MASTERS][32];
    cluster_spread_names(&cl, "cq", two, 2);
    for (int i = 0; i < 2 * CLUSTER_MASTERS; i++) ASSERT_EQ(i / 2, cluster_node_of_key(&cl, two[i]));
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(cl.url);
    rjq_client *c = client_new(base, &o);
    rjq_queue *q = NULL, *other = NULL;
    ASSERT_OK(rjq_queue_open(c, name, NULL, &q));
    ASSERT_OK(rjq_queue_open(c, names[2], NULL, &other));
    long handled = 0;
    rjq_worker *w = NULL, *w2 = NULL;
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 8;
    ASSERT_OK(rjq_worker_start(q, &wo, on_job, &handled, &w));
    ASSERT_OK(rjq_worker_start(other, &wo, on_job, &handled, &w2));
    tally t = {0};
    await_n(q, 50, "before", &t);
    ASSERT(loop_until_count(base, &t.done, 50, 60000));

    /* While the slot migrates: its keys are moved under the client's feet
     * (another master goes on meanwhile); once they are all on the target,
     * the source answers ASK, and the client sends ASKING and the request to
     * the target, which answers TRYAGAIN while a script's keys are not all
     * there (a new job's are nowhere yet): those wait for the end with the
     * transient backoff, as Redis means them to. */
    cluster_migrate_begin(&cl, slot, from, to);
    await_n(other, 10, "other", &t);
    long long moved = cluster_migrate_keys(&cl, slot, from, to);
    ASSERT(moved > 0);
    await_n(q, 50, "asked", &t);
    redisContext *rt = cluster_connect(&cl, to);
    /* the event: ASKING reaches the target */
    WAIT_FOR(base, server_calls(rt, "asking") > 0, 30000);
    ASSERT(server_info_number(rt, "errorstats", "errorstat_TRYAGAIN:count=") > 0);
    ASSERT_EQ(0, server_info_number(rt, "errorstats", "errorstat_MOVED:count="));
    redisFree(rt);
    /* meanwhile another queue's requests are not held up behind them */
    tally t2 = {0};
    await_n(other, 10, "other-meanwhile", &t2);
    if (!loop_until_count(base, &t2.done, 10, 30000))
        FAIL_AT(__FILE__, __LINE__, "%ld of 10 awaits of another queue answered while a slot migrates",
                t2.done);
    ASSERT_EQ(0, t2.bad);
    cluster_migrate_end(&cl, slot, from, to);
    await_n(q, 50, "after", &t); /* the table changed: MOVED */
    if (!loop_until_count(base, &t.done, 160, 60000))
        FAIL_AT(__FILE__, __LINE__, "%ld of 160 awaits answered", t.done);
    if (t.bad) FAIL_AT(__FILE__, __LINE__, "%ld awaits failed: %s (%s)", t.bad,
                       rjq_strerror(t.last_status), t.last_error);
    /* the redirects were answered (and followed) */
    redisContext *rc = cluster_connect(&cl, from);
    long long asks = server_info_number(rc, "errorstats", "errorstat_ASK:count=");
    long long moves = server_info_number(rc, "errorstats", "errorstat_MOVED:count=");
    redisFree(rc);
    ASSERT(asks > 0);
    ASSERT(moves > 0);
    /* a job read after the move, where the table says now */
    info_wait i = get_info(base, q, t.first_id);
    ASSERT_OK(i.status);
    ASSERT_STREQ("completed", i.state);
    /* every job completed once, on the new owner */
    rjq_stats s = get_stats(base, q);
    ASSERT_EQ(150, s.enqueued);
    ASSERT_EQ(150, s.completed);
    ASSERT_EQ(0, s.ready + s.active + s.delayed);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}

static void on_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    long *lost = data;
    (void)c, (void)detail;
    if (ev == RJQ_EVENT_DISCONNECTED && conn == RJQ_CONN_COMMAND) (*lost)++;
}

/* A master SIGKILLed: the queues on the other masters answer during the
 * failover; awaits on the dead master's queue wait for the failover and
 * are answered by the promoted replica (which loads the library before
 * its first request). */
TEST(master_killed_replica_promoted_work_resumes_and_others_go_on) {
    test_cluster cl;
    cluster_start(&cl, 0);
    char names[CLUSTER_MASTERS][32];
    cluster_spread_names(&cl, "cq", names, 1);
    struct event_base *base = event_base_new();
    /* every node as a seed: the subscriber connection finds a live one */
    char url[512];
    int len = snprintf(url, sizeof url, "redis://");
    for (int i = 0; i < CLUSTER_NODES; i++)
        len += snprintf(url + len, sizeof url - (size_t)len, "%s127.0.0.1:%d", i ? "," : "",
                        cl.node[i].port);
    rjq_client_options o = client_options(url);
    long lost = 0;
    o.on_event = on_event;
    o.event_data = &lost;
    rjq_client *c = client_new(base, &o);
    rjq_queue *q[CLUSTER_MASTERS];
    rjq_worker *w[CLUSTER_MASTERS];
    long handled = 0;
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 4;
    for (int i = 0; i < CLUSTER_MASTERS; i++) {
        ASSERT_OK(rjq_queue_open(c, names[i], NULL, &q[i]));
        ASSERT_OK(rjq_worker_start(q[i], &wo, on_job, &handled, &w[i]));
    }
    tally t = {0};
    for (int i = 0; i < CLUSTER_MASTERS; i++) await_n(q[i], 10, "warm", &t);
    ASSERT(loop_until_count(base, &t.done, 30, 60000));
    ASSERT_EQ(0, t.bad);

    const int victim = 1; /* names[1]'s master; the URL's first node stays */
    int victim_node = cluster_owner(&cl, 0, rjq__key_slot(names[victim], strlen(names[victim])));
    ASSERT_EQ(victim, victim_node);
    int promoted = cluster_replica_of(&cl, victim_node);
    ASSERT(promoted >= 0);
    cluster_kill_node(&cl, victim_node);
    /* the other masters answer while the failover is under way */
    tally others = {0}, resumed = {0};
    await_n(q[0], 10, "other0", &others);
    await_n(q[2], 10, "other2", &others);
    if (!loop_until_count(base, &others.done, 20, 30000))
        FAIL_AT(__FILE__, __LINE__, "%ld of 20 awaits on the other masters answered", others.done);
    ASSERT_EQ(0, others.bad);
    /* the dead master's queue: awaited now, answered once its replica took
     * over and the client read the new table */
    await_n(q[victim], 10, "victim", &resumed);
    WAIT_FOR(base, cluster_is_master(&cl, promoted), 60000);
    if (!loop_until_count(base, &resumed.done, 10, 60000))
        FAIL_AT(__FILE__, __LINE__, "%ld of 10 awaits on the failed-over queue answered", resumed.done);
    if (resumed.bad) FAIL_AT(__FILE__, __LINE__, "%ld awaits failed: %s (%s)", resumed.bad,
                             rjq_strerror(resumed.last_status), resumed.last_error);
    ASSERT(lost >= 1); /* (the client saw its connection to the dead master go) */
    /* the promoted replica ran the queue's scripts */
    ASSERT(master_calls(&cl, promoted, "fcall") > 0);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}

/* A seed list's host names need a glue that resolves names, as the URL's
 * one host does: a glue without a resolver refuses the URL at once (it
 * would otherwise connect to the wrong place), naming the seed. */
TEST(seed_node_names_need_a_resolving_glue) {
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options("redis://127.0.0.1:7000,nowhere.test:7001");
    rjq_client *c = NULL;
    ASSERT_EQ(RJQ_EURL, rjq_libevent_client_new(&c, base, &o));
    ASSERT(c == NULL);
    if (strstr(rjq_client_get_errmsg(NULL), "seed node nowhere.test is a name") == NULL)
        FAIL_AT(__FILE__, __LINE__, "errmsg: %s", rjq_client_get_errmsg(NULL));
    o = client_options("redis://127.0.0.1:7000,localhost:7001,[::1]:7002");
    ASSERT_OK(rjq_libevent_client_new(&c, base, &o));
    rjq_client_free(c);
    event_base_free(base);
}

typedef struct ordered {
    long done, bad;
    long long id[64];
} ordered;

typedef struct ordered_one {
    ordered *o;
    int i;
} ordered_one;

static void on_ordered(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    ordered_one *one = data;
    (void)c;
    one->o->done++;
    if (status != RJQ_OK || n != 1) {
        one->o->bad++;
        return;
    }
    one->o->id[one->i] = atoll(jobs[0].id);
}

/* Enqueues of one queue, each its own request, made while the client's
 * table still names the queue's old master: they are answered MOVED in
 * turn, and those made after the first MOVED wait for the earlier ones, so
 * the server numbers them in the order they were made. */
TEST(a_queues_enqueues_keep_their_order_through_moved) {
    test_cluster cl;
    cluster_start(&cl, 0);
    char names[CLUSTER_MASTERS][32];
    cluster_spread_names(&cl, "cq", names, 1);
    int slot = rjq__key_slot(names[1], strlen(names[1]));
    int from = cluster_owner(&cl, 0, slot), to = cluster_owner(&cl, 0,
                                                              rjq__key_slot(names[2], strlen(names[2])));
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(cl.url);
    rjq_client *c = client_new(base, &o);
    rjq_queue *q = NULL, *q2 = NULL;
    ASSERT_OK(rjq_queue_open(c, names[1], NULL, &q));
    ASSERT_OK(rjq_queue_open(c, names[2], NULL, &q2));
    /* both masters' connections up, the table current */
    ASSERT_OK(enqueue_job(base, q, "first", NULL).status);
    ASSERT_OK(enqueue_job(base, q2, "first", NULL).status);
    cluster_migrate_slot(&cl, slot, from, to); /* the client does not know yet */
    ordered ord = {0};
    ordered_one one[60];
    for (int i = 0; i < 60; i++) {
        one[i].o = &ord;
        one[i].i = i;
        char payload[16];
        snprintf(payload, sizeof payload, "%d", i);
        ASSERT_OK(rjq_enqueue(q, payload, strlen(payload), NULL, on_ordered, &one[i]));
        event_base_loop(base, EVLOOP_NONBLOCK); /* sent now: one request each */
    }
    ASSERT(loop_until_count(base, &ord.done, 60, 30000));
    ASSERT_EQ(0, ord.bad);
    for (int i = 1; i < 60; i++)
        if (ord.id[i] <= ord.id[i - 1])
            FAIL_AT(__FILE__, __LINE__, "enqueue %d got id %lld after enqueue %d's %lld", i, ord.id[i],
                    i - 1, ord.id[i - 1]);
    redisContext *rc = cluster_connect(&cl, from);
    ASSERT(server_info_number(rc, "errorstats", "errorstat_MOVED:count=") > 0);
    redisFree(rc);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}
