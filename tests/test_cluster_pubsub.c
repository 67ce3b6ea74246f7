/*
 * Pub/sub on a Redis Cluster (issue 34, docs/cluster.md 6.1), on the test
 * cluster of tests/cluster.c (3 masters, 3 replicas): doorbells, push
 * delivery, outcomes, progress and cancel notices travel as sharded pub/sub
 * (SSUBSCRIBE on a link per master, SPUBLISH in the scripts), each queue's
 * channels on its own master; a slot migrated while awaits wait and a
 * master killed and replaced by its replica leave no await stuck.
 *
 * Every wait waits for the event it checks (answers, subscriptions seen by
 * the servers), bounded so that a broken build fails instead of hanging.
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

#define PER 2 /* queues per master */
#define NQ (PER * CLUSTER_MASTERS)

typedef struct tally {
    long ok, bad, done, cancelled, progress;
    int last_status;
    char last_error[256];
} tally;

static void on_awaited(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    tally *t = data;
    (void)o;
    t->done++;
    if (status == RJQ_OK) {
        t->ok++;
    } else if (status == RJQ_EJOBCANCELED) {
        t->cancelled++;
    } else {
        t->bad++;
        t->last_status = status;
        snprintf(t->last_error, sizeof t->last_error, "%s", rjq_client_get_errmsg(c));
    }
}

static void on_progress(rjq_client *c, const char *id, const void *p, size_t len, void *data) {
    tally *t = data;
    (void)c, (void)id, (void)p, (void)len;
    t->progress++;
}

/* A worker: "hold" jobs wait for their cancel notice; the others report
 * progress once and complete. */
typedef struct work {
    long handled, notices;
} work;

static void on_job(rjq_job *job, void *data) {
    work *w = data;
    size_t len;
    const void *p = rjq_job_get_payload(job, &len);
    w->handled++;
    if (len == 4 && memcmp(p, "hold", 4) == 0) return; /* finished by on_notice */
    ASSERT_OK(rjq_job_report_progress(job, "half", 4));
    rjq_job_complete(job, p, len, NULL, NULL);
}

static void on_notice(rjq_job *job, int reason, void *data) {
    work *w = data;
    ASSERT_EQ(RJQ_EJOBCANCELED, reason);
    w->notices++;
    rjq_job_complete(job, NULL, 0, NULL, NULL); /* (refused: it was cancelled) */
}

static void on_event(rjq_client *c, const char *event, const char *id, void *data) {
    long *completed = data;
    (void)c, (void)id;
    if (strcmp(event, "completed") == 0) (*completed)++;
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

/* Sharded channels matching pattern on node i (PUBSUB SHARDCHANNELS). */
static long long shardchannels(test_cluster *cl, int node, const char *pattern) {
    redisContext *rc = cluster_connect(cl, node);
    redisReply *r = server_cmd(rc, "PUBSUB SHARDCHANNELS %s", pattern);
    long long n = r->type == REDIS_REPLY_ARRAY ? (long long)r->elements : -1;
    freeReplyObject(r);
    redisFree(rc);
    return n;
}

typedef struct sub_poll {
    test_cluster *cl;
    int node;
    const char *channel; /* SHARDNUMSUB of it */
    const char *pattern; /* or: SHARDCHANNELS of it */
    long long want;
} sub_poll;

static int sub_seen(void *arg) {
    sub_poll *p = arg;
    long long n = p->channel ? shardnumsub(p->cl, p->node, p->channel)
                             : shardchannels(p->cl, p->node, p->pattern);
    return n == p->want;
}

static void wait_subs(struct event_base *base, test_cluster *cl, int node, const char *channel,
                      const char *pattern, long long want) {
    sub_poll p = {cl, node, channel, pattern, want};
    if (!loop_until_cond(base, sub_seen, &p, 30000))
        FAIL_AT(__FILE__, __LINE__, "node %d: %s %s: %lld subscribers, not %lld", node,
                channel ? "SHARDNUMSUB" : "SHARDCHANNELS", channel ? channel : pattern,
                channel ? shardnumsub(cl, node, channel) : shardchannels(cl, node, pattern), want);
}

/* An observer: a plain connection to node subscribed (SSUBSCRIBE) to the
 * sharded channel matching pattern there (exactly one). */
static redisContext *observe(test_cluster *cl, int node, const char *pattern) {
    redisContext *rc = cluster_connect(cl, node);
    redisReply *r = server_cmd(rc, "PUBSUB SHARDCHANNELS %s", pattern);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    redisReply *s = server_cmd(rc, "SSUBSCRIBE %s", r->element[0]->str);
    ASSERT(s->type == REDIS_REPLY_ARRAY && s->elements == 3);
    freeReplyObject(s);
    freeReplyObject(r);
    return rc;
}

/* The messages an observer has received (read until none is waiting). */
static long observed(redisContext *rc) {
    struct timeval tv = {0, 200000};
    redisSetTimeout(rc, tv);
    long n = 0;
    redisReply *r;
    while (redisGetReply(rc, (void **)&r) == REDIS_OK) {
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
            strcmp(r->element[0]->str, "smessage") == 0)
            n++;
        freeReplyObject(r);
    }
    return n;
}

static rjq_client *cluster_client(struct event_base *base, const char *url) {
    rjq_client_options o = client_options(url);
    o.ping_interval_ms = 0; /* (no liveness probe: a classic PUBLISH of the client's own) */
    return client_new(base, &o);
}

/* Awaits, progress, push delivery, doorbells and cancel notices on 6
 * queues over 3 masters through one client given node 0's URL: each
 * master holds its queues' subscriptions (wake, push, reply) as sharded
 * ones, and no script published a classic PUBLISH anywhere. */
TEST(awaits_push_doorbells_progress_and_cancel_over_three_masters_are_sharded) {
    test_cluster cl;
    cluster_start(&cl, 0);
    char names[NQ][32];
    cluster_spread_names(&cl, "pq", names, PER);
    struct event_base *base = event_base_new();
    rjq_client *c = cluster_client(base, cl.url);
    rjq_queue *q[NQ];
    rjq_worker *w[NQ];
    work wk = {0};
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 2;
    wo.on_notice = on_notice;
    for (int i = 0; i < NQ; i++) {
        ASSERT_OK(rjq_queue_open(c, names[i], NULL, &q[i]));
        ASSERT_OK(rjq_worker_start(q[i], &wo, on_job, &wk, &w[i]));
    }
    /* a monitor on every queue */
    rjq_monitor *mon[NQ];
    long completed_events = 0;
    for (int i = 0; i < NQ; i++) ASSERT_OK(rjq_queue_monitor(q[i], on_event, &completed_events, &mon[i]));
    for (int i = 0; i < NQ; i++) {
        char ev[256];
        snprintf(ev, sizeof ev, "t:{%s}:events", names[i]);
        wait_subs(base, &cl, cluster_node_of_key(&cl, ev), ev, NULL, 1);
    }
    /* every queue's doorbell is subscribed on its master, sharded */
    for (int i = 0; i < NQ; i++) {
        char ch[256];
        snprintf(ch, sizeof ch, "t:{%s}:wake", names[i]);
        int m = cluster_node_of_key(&cl, ch);
        wait_subs(base, &cl, m, ch, NULL, 1);
        for (int o = 0; o < CLUSTER_MASTERS; o++)
            if (o != m) ASSERT_EQ(0, shardnumsub(&cl, o, ch));
    }
    /* an observer of each worker's push channel */
    redisContext *obs[NQ];
    for (int i = 0; i < NQ; i++) {
        char pat[256], wake[256];
        snprintf(wake, sizeof wake, "t:{%s}:wake", names[i]);
        snprintf(pat, sizeof pat, "t:{%s}:push:*", names[i]);
        int m = cluster_node_of_key(&cl, wake);
        wait_subs(base, &cl, m, NULL, pat, 1);
        obs[i] = observe(&cl, m, pat);
    }
    long long spub[CLUSTER_MASTERS];
    for (int m = 0; m < CLUSTER_MASTERS; m++) spub[m] = cluster_node_calls(&cl, m, "spublish");

    /* awaits with progress on every queue (idle workers: pushed jobs) */
    tally t = {0};
    rjq_await_options ao = RJQ_AWAIT_OPTIONS_INIT;
    ao.on_progress = on_progress;
    for (int i = 0; i < NQ; i++)
        for (int k = 0; k < 10; k++)
            ASSERT_OK(rjq_enqueue_await(q[i], "job", 3, NULL, &ao, on_awaited, &t, NULL));
    if (!loop_until_count(base, &t.done, NQ * 10, 60000))
        FAIL_AT(__FILE__, __LINE__, "%ld of %d awaits answered", t.done, NQ * 10);
    if (t.bad) FAIL_AT(__FILE__, __LINE__, "%ld awaits failed: %s (%s)", t.bad,
                       rjq_strerror(t.last_status), t.last_error);
    ASSERT_EQ(NQ * 10, t.ok);
    ASSERT(loop_until_count(base, &t.progress, NQ * 10, 20000));
    /* the monitors heard every completion (monitor events, sharded) */
    if (!loop_until_count(base, &completed_events, NQ * 10, 20000))
        FAIL_AT(__FILE__, __LINE__, "%ld of %d completions heard by the monitors", completed_events,
                NQ * 10);
    /* each queue's reply channel and the workers' push channels are on
     * its master only */
    for (int i = 0; i < NQ; i++) {
        char pat[256], wake[256];
        snprintf(wake, sizeof wake, "t:{%s}:wake", names[i]);
        int m = cluster_node_of_key(&cl, wake);
        snprintf(pat, sizeof pat, "t:{%s}:reply:*", names[i]);
        wait_subs(base, &cl, m, NULL, pat, 1);
        snprintf(pat, sizeof pat, "t:{%s}:push:*", names[i]);
        wait_subs(base, &cl, m, NULL, pat, 1);
        for (int o = 0; o < CLUSTER_MASTERS; o++) {
            if (o == m) continue;
            snprintf(pat, sizeof pat, "t:{%s}:*", names[i]);
            ASSERT_EQ(0, shardchannels(&cl, o, pat));
        }
    }
    /* jobs were pushed to the idle workers (PUBSUB SHARDNUMSUB saw them) */
    for (int i = 0; i < NQ; i++) {
        long n = observed(obs[i]);
        if (n == 0) FAIL_AT(__FILE__, __LINE__, "queue %s: no push to its worker", names[i]);
        redisFree(obs[i]);
    }
    /* every master published its own queues' messages, sharded */
    for (int m = 0; m < CLUSTER_MASTERS; m++)
        if (cluster_node_calls(&cl, m, "spublish") < spub[m] + PER * 10)
            FAIL_AT(__FILE__, __LINE__, "master %d: %lld SPUBLISH", m,
                    cluster_node_calls(&cl, m, "spublish") - spub[m]);

    /* a running job cancelled on every queue: its worker hears the notice,
     * its await ends cancelled */
    tally tc = {0};
    long handled = wk.handled;
    for (int i = 0; i < NQ; i++) {
        rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
        char id[32];
        snprintf(id, sizeof id, "hold-%d", i);
        jo.id = id;
        ASSERT_OK(rjq_enqueue_await(q[i], "hold", 4, &jo, NULL, on_awaited, &tc, NULL));
    }
    ASSERT(loop_until_count(base, &wk.handled, handled + NQ, 30000));
    for (int i = 0; i < NQ; i++) {
        char id[32];
        snprintf(id, sizeof id, "hold-%d", i);
        ASSERT_OK(rjq_queue_cancel(q[i], id, NULL, NULL));
    }
    ASSERT(loop_until_count(base, &wk.notices, NQ, 30000));
    ASSERT(loop_until_count(base, &tc.cancelled, NQ, 30000));
    ASSERT_EQ(0, tc.bad);

    /* no classic PUBLISH on any node: scripts and the client used SPUBLISH;
     * one classic SUBSCRIBE at most, on the URL's node: the awaits'
     * client-wide channel, listened on before the client knew it was a
     * cluster (nothing publishes there) */
    for (int n = 0; n < CLUSTER_NODES; n++) ASSERT_EQ(0, cluster_node_calls(&cl, n, "publish"));
    ASSERT(cluster_node_calls(&cl, 0, "subscribe") <= 1);
    for (int n = 1; n < CLUSTER_MASTERS; n++) ASSERT_EQ(0, cluster_node_calls(&cl, n, "subscribe"));

    for (int i = 0; i < NQ; i++) rjq_monitor_stop(mon[i]);
    for (int i = 0; i < NQ; i++) rjq_worker_stop(w[i], NULL, NULL);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}

/* Awaits wait on a queue whose slot moves to another master (the server
 * drops the subscription; the client subscribes at the new master, where
 * the jobs then complete): every await answered, none stuck. */
TEST(slot_migrated_while_awaits_wait_no_await_is_stuck) {
    test_cluster cl;
    cluster_start(&cl, 0);
    char names[NQ][32];
    cluster_spread_names(&cl, "pq", names, PER);
    const char *name = names[0];
    int slot = rjq__key_slot(name, strlen(name));
    char wake[256], pat[64];
    snprintf(wake, sizeof wake, "t:{%s}:wake", name);
    snprintf(pat, sizeof pat, "t:{%s}:reply:*", name);
    int from = cluster_owner(&cl, 0, slot), to = (from + 1) % CLUSTER_MASTERS;
    struct event_base *base = event_base_new();
    rjq_client *c = cluster_client(base, cl.url);
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(c, name, NULL, &q));
    tally t = {0};
    for (int k = 0; k < 20; k++) ASSERT_OK(rjq_enqueue_await(q, "m", 1, NULL, NULL, on_awaited, &t, NULL));
    /* all enqueued (no worker yet), the reply channel subscribed at `from` */
    for (;;) {
        rjq_stats s = get_stats(base, q);
        if (s.ready == 20) break;
    }
    wait_subs(base, &cl, from, NULL, pat, 1);
    /* a worker of a queue on the third master: its channels stay put */
    int third = 3 - from - to;
    const char *other = NULL;
    for (int i = 0; i < NQ && other == NULL; i++)
        if (cluster_owner(&cl, 0, rjq__key_slot(names[i], strlen(names[i]))) == third) other = names[i];
    ASSERT(other != NULL);
    rjq_queue *oq;
    rjq_worker *ow;
    work owk = {0};
    ASSERT_OK(rjq_queue_open(c, other, NULL, &oq));
    ASSERT_OK(rjq_worker_start(oq, NULL, on_job, &owk, &ow));
    char owake[256];
    snprintf(owake, sizeof owake, "t:{%s}:wake", other);
    wait_subs(base, &cl, third, owake, NULL, 1);
    long long third_subs = cluster_node_calls(&cl, third, "ssubscribe");

    cluster_migrate_slot(&cl, slot, from, to);
    /* the client follows: its reply channel is subscribed at `to` */
    wait_subs(base, &cl, to, NULL, pat, 1);
    ASSERT_EQ(0, shardchannels(&cl, from, pat));

    work wk = {0};
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, NULL, on_job, &wk, &w));
    if (!loop_until_count(base, &t.done, 20, 60000))
        FAIL_AT(__FILE__, __LINE__, "%ld of 20 awaits answered", t.done);
    ASSERT_EQ(20, t.ok);
    /* a new await after the move: its outcome comes from `to` */
    ASSERT_OK(rjq_enqueue_await(q, "n", 1, NULL, NULL, on_awaited, &t, NULL));
    ASSERT(loop_until_count(base, &t.done, 21, 30000));
    ASSERT_EQ(21, t.ok);
    ASSERT_EQ(1, shardnumsub(&cl, to, wake));
    /* only the moved slot's channels were subscribed again: none on the
     * third master (a refresh read the new table meanwhile) */
    ASSERT_EQ(third_subs, cluster_node_calls(&cl, third, "ssubscribe"));
    ASSERT_EQ(1, shardnumsub(&cl, third, owake));
    rjq_worker_stop(ow, NULL, NULL);
    rjq_worker_stop(w, NULL, NULL);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}

/* The master of an awaited queue is SIGKILLed; its replica is promoted:
 * the client's sharded link finds the new master, and the awaits made
 * before the kill are answered by jobs run there. */
TEST(master_killed_replica_promoted_awaits_are_answered) {
    test_cluster cl;
    cluster_start(&cl, 0);
    char names[NQ][32];
    cluster_spread_names(&cl, "pq", names, PER);
    /* a queue whose master is not node 0 (the URL's) */
    const char *name = NULL;
    int m = -1;
    for (int i = 0; i < NQ && name == NULL; i++) {
        m = cluster_owner(&cl, 0, rjq__key_slot(names[i], strlen(names[i])));
        if (m != 0) name = names[i];
    }
    ASSERT(name != NULL);
    char pat[256], key[64];
    snprintf(pat, sizeof pat, "t:{%s}:reply:*", name);
    struct event_base *base = event_base_new();
    char url[512];
    int len = 0;
    for (int i = 0; i < CLUSTER_NODES; i++) /* (seeds: every node) */
        len += snprintf(url + len, sizeof url - (size_t)len, "%s127.0.0.1:%d", i ? "," : "redis://",
                        cl.node[i].port);
    rjq_client *c = cluster_client(base, url);
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(c, name, NULL, &q));
    tally t = {0};
    for (int k = 0; k < 10; k++) ASSERT_OK(rjq_enqueue_await(q, "m", 1, NULL, NULL, on_awaited, &t, NULL));
    for (;;) {
        rjq_stats s = get_stats(base, q);
        if (s.ready == 10) break;
    }
    wait_subs(base, &cl, m, NULL, pat, 1);
    /* the jobs reached the replica before the kill */
    int r = cluster_replica_of(&cl, m);
    ASSERT(r >= 0);
    snprintf(key, sizeof key, "t:{%s}:ready", name);
    redisContext *rc = cluster_connect(&cl, r);
    redisReply *ro = server_cmd(rc, "READONLY");
    freeReplyObject(ro);
    ASSERT(loop_until_server_int(base, rc, 10, 30000, "LLEN %s", key));
    redisFree(rc);

    int promoted = cluster_kill_master(&cl, m, NULL);
    ASSERT_EQ(r, promoted);
    /* the reply channel is subscribed on the promoted master */
    wait_subs(base, &cl, promoted, NULL, pat, 1);
    work wk = {0};
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, NULL, on_job, &wk, &w));
    if (!loop_until_count(base, &t.done, 10, 60000))
        FAIL_AT(__FILE__, __LINE__, "%ld of 10 awaits answered", t.done);
    ASSERT_EQ(10, t.ok);
    rjq_worker_stop(w, NULL, NULL);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}

/* The smessages an observer receives before the marker message (its
 * payload "marker"), which the test SPUBLISHes on the master after what it
 * checks: whatever the master published before reaches the observer
 * before it (one cluster bus link, in order), so no wait is timed. */
static long messages_before_marker(redisContext *rc) {
    struct timeval tv = {30, 0};
    redisSetTimeout(rc, tv);
    long n = 0;
    for (;;) {
        redisReply *r = NULL;
        if (redisGetReply(rc, (void **)&r) != REDIS_OK) FAIL_AT(__FILE__, __LINE__, "no marker heard");
        int marker = 0, msg = r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
                              strcmp(r->element[0]->str, "smessage") == 0;
        if (msg) marker = strcmp(r->element[2]->str, "marker") == 0;
        freeReplyObject(r);
        if (marker) return n;
        n += msg;
    }
}

static void count_and_complete(rjq_job *job, void *data) {
    (*(long *)data)++;
    rjq_job_complete(job, NULL, 0, NULL, NULL);
}

/* gpush2: a group enqueue's push (genqueue.lua) on a cluster asks PUBSUB
 * SHARDNUMSUB first and is never undone, as every push there (fef7b7d): a
 * SPUBLISH also reaches the subscribers of the shard's replicas and counts
 * the master's own only, so its 0 proves nothing. A registration whose
 * channel has a subscriber on the master's replica only (an observer
 * SSUBSCRIBEd there, as a worker left on a demoted master would be): the
 * group enqueue counts 0 subscribers on the master and publishes nothing
 * (the registration dropped, the job left ready in its group, nothing
 * active); the observer hears no push. (With one server's rule on a
 * cluster, no count and an undo of a push heard by nobody, the SPUBLISH
 * reaches the observer while the master counts 0 and undoes it: a worker
 * there would run a job that is pushed again.) Then a listening worker:
 * a group job is pushed to it after a SHARDNUMSUB, and runs once. */
TEST(group_push_on_a_cluster_asks_shardnumsub_and_is_never_undone) {
    test_cluster cl;
    cluster_start(&cl, 0);
    char name[32];
    cluster_name_on(&cl, 0, "gpc", name, sizeof name);
    int r = cluster_replica_of(&cl, 0);
    ASSERT(r >= 0);
    struct event_base *base = event_base_new();
    rjq_client *c = cluster_client(base, cl.url);
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(c, name, NULL, &q));
    redisContext *mc = cluster_connect(&cl, 0);

    /* a worker's registration, copied, the worker stopped */
    long ran = 0;
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 2;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, count_and_complete, &ran, &w));
    ASSERT(loop_until_server_int(base, mc, 1, 30000, "HLEN t:{%s}:idle", name));
    redisReply *h = cluster_cmd(&cl, mc, "HGETALL t:{%s}:idle", name);
    ASSERT(h->type == REDIS_REPLY_ARRAY && h->elements == 2);
    char wid[128], value[128];
    const char *sp = strchr(h->element[0]->str, ' ');
    ASSERT(sp != NULL && (size_t)(sp - h->element[0]->str) < sizeof wid);
    snprintf(wid, sizeof wid, "%.*s", (int)(sp - h->element[0]->str), h->element[0]->str);
    snprintf(value, sizeof value, "%s", h->element[1]->str);
    freeReplyObject(h);
    stop_wait sw = {0};
    ASSERT_OK(rjq_worker_stop(w, on_stop_wait, &sw));
    ASSERT(loop_until(base, &sw.done, 20000));
    ASSERT(loop_until_server_int(base, mc, 0, 20000, "HLEN t:{%s}:idle", name));

    /* the same registration on a channel heard on the replica only */
    char deaf[96];
    snprintf(deaf, sizeof deaf, "t:{%s}:push:deaf", name);
    redisContext *obs = cluster_connect(&cl, r);
    redisReply *s = server_cmd(obs, "SSUBSCRIBE %s", deaf);
    ASSERT(s->type == REDIS_REPLY_ARRAY && s->elements == 3);
    freeReplyObject(s);
    wait_subs(base, &cl, r, deaf, NULL, 1);
    ASSERT_EQ(0, shardnumsub(&cl, 0, deaf));
    char field[256];
    snprintf(field, sizeof field, "%s %s", wid, deaf);
    h = cluster_cmd(&cl, mc, "HSET t:{%s}:idle %s %s", name, field, value);
    ASSERT(h->type == REDIS_REPLY_INTEGER && h->integer == 1);
    freeReplyObject(h);
    long long asked = cluster_node_calls(&cl, 0, "pubsub|shardnumsub");
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.group = "ten";
    enqueue_wait ew = enqueue_job(base, q, "g1", &jo);
    ASSERT_OK(ew.status);
    ASSERT(cluster_node_calls(&cl, 0, "pubsub|shardnumsub") > asked);
    ASSERT_EQ(0, cluster_int(&cl, mc, "HLEN t:{%s}:idle", name)); /* the stale registration dropped */
    ASSERT_EQ(0, server_active_jobs(mc, name));
    ASSERT_EQ(1, cluster_int(&cl, mc, "LLEN t:{%s}:g:r:ten", name));
    h = cluster_cmd(&cl, mc, "HGET t:{%s}:state %s", name, ew.id);
    ASSERT(h->type == REDIS_REPLY_STRING && strncmp(h->str, "ready 0 @", 9) == 0);
    freeReplyObject(h);
    h = server_cmd(mc, "SPUBLISH %s marker", deaf);
    freeReplyObject(h);
    ASSERT_EQ(0, messages_before_marker(obs));
    redisFree(obs);

    /* a listening worker: it claims g1, registers, and g2 is pushed to it
     * after a SHARDNUMSUB */
    wo.concurrency = 1;
    ASSERT_OK(rjq_worker_start(q, &wo, count_and_complete, &ran, &w));
    ASSERT(loop_until_count(base, &ran, 1, 30000));
    ASSERT(loop_until_server_int(base, mc, 1, 30000, "HLEN t:{%s}:idle", name));
    char pat[64];
    snprintf(pat, sizeof pat, "t:{%s}:push:*", name);
    redisContext *seen = observe(&cl, 0, pat);
    asked = cluster_node_calls(&cl, 0, "pubsub|shardnumsub");
    ew = enqueue_job(base, q, "g2", &jo);
    ASSERT_OK(ew.status);
    ASSERT(loop_until_count(base, &ran, 2, 30000));
    ASSERT(cluster_node_calls(&cl, 0, "pubsub|shardnumsub") > asked);
    ASSERT(observed(seen) >= 1); /* pushed, not claimed */
    redisFree(seen);
    ASSERT_EQ(2, ran);
    WAIT_FOR(base, server_active_jobs(mc, name) == 0, 30000);
    rjq_worker_stop(w, NULL, NULL);
    redisFree(mc);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}
