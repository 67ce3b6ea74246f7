/*
 * A Redis Cluster whose nodes are named by a host name (issue 34:
 * cluster-announce-hostname with cluster-preferred-endpoint-type
 * hostname): CLUSTER SLOTS and the MOVED redirects name every node
 * "rjq-node.test", a name only the client's loop glue resolves (libevent's
 * evdns with a hosts file of the test's own), so nothing may resolve it
 * behind the glue's back (hiredis' blocking getaddrinfo would not know it).
 * Queues on every master run (command links and sharded pub/sub links to
 * the named nodes), a MOVED naming the host is followed, and a glue that
 * cannot resolve says so instead of connecting anywhere.
 *
 * Every wait waits for the event it checks, bounded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <rjq/libevent.h>

#include "cluster.h"
#include "harness.h"
#include "server.h"
#include "slot.h"

#define HOST "rjq-node.test"

typedef struct tally {
    long ok, bad, done;
    char last_error[256];
} tally;

static void on_awaited(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    tally *t = data;
    (void)o;
    t->done++;
    if (status == RJQ_OK) {
        t->ok++;
    } else {
        t->bad++;
        snprintf(t->last_error, sizeof t->last_error, "%s: %s", rjq_strerror(status),
                 rjq_client_get_errmsg(c));
    }
}

static void on_job(rjq_job *job, void *data) {
    (void)data;
    size_t len;
    const void *p = rjq_job_get_payload(job, &len);
    rjq_job_complete(job, p, len, NULL, NULL);
}

static void await_n(rjq_queue *q, int n, tally *t) {
    for (int i = 0; i < n; i++)
        ASSERT_OK(rjq_enqueue_await(q, "x", 1, NULL, NULL, on_awaited, t, NULL));
}

static void awaits_answered(struct event_base *base, tally *t, long n) {
    if (!loop_until_count(base, &t->done, n, 60000))
        FAIL_AT(__FILE__, __LINE__, "%ld of %ld awaits answered", t->done, n);
    if (t->bad) FAIL_AT(__FILE__, __LINE__, "%ld awaits failed: %s", t->bad, t->last_error);
}

/* Does node i hold a sharded pub/sub connection of the client ("...:ssub")? */
static int has_ssub_client(const test_cluster *cl, int i) {
    redisContext *rc = cluster_connect(cl, i);
    redisReply *r = server_cmd(rc, "CLIENT LIST");
    int found = r->type == REDIS_REPLY_STRING && strstr(r->str, ":ssub ") != NULL;
    freeReplyObject(r);
    redisFree(rc);
    return found;
}

static void on_enqueued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs, (void)n;
    if (status == RJQ_OK) (*(long *)data)++;
}

static char events[4096];
static void on_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    (void)c, (void)conn, (void)data;
    size_t len = strlen(events);
    if (ev == RJQ_EVENT_ERROR && len + strlen(detail) + 2 < sizeof events)
        snprintf(events + len, sizeof events - len, "%s\n", detail);
}

/* A queue on each master (names[m]) with a worker, 10 awaits on each,
 * all answered; then each master holds the client's sharded pub/sub
 * connection. */
static void run_on_every_master(struct event_base *base, const test_cluster *cl, rjq_client *c,
                                char names[][32], rjq_queue **q, rjq_worker **w, tally *t) {
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 4;
    for (int m = 0; m < CLUSTER_MASTERS; m++) {
        ASSERT_OK(rjq_queue_open(c, names[m], NULL, &q[m]));
        ASSERT_OK(rjq_worker_start(q[m], &wo, on_job, NULL, &w[m]));
        await_n(q[m], 10, t);
    }
    awaits_answered(base, t, 3 * 10);
    double until = wait_deadline(30000);
    for (int m = 0; m < CLUSTER_MASTERS; m++)
        while (!has_ssub_client(cl, m))
            if (!wait_step(base, until))
                FAIL_AT(__FILE__, __LINE__, "no sharded pub/sub connection on master %d; errors:\n%s",
                        m, events);
}

TEST(host_named_nodes_queues_on_every_master_run_and_moved_to_a_host_name_is_followed) {
    char hosts[] = "/tmp/rjq-hosts-XXXXXX";
    temp_file(hosts, "127.0.0.1 " HOST "\n");

    test_cluster cl;
    cluster_start_named(&cl, 0, HOST);
    char names[CLUSTER_MASTERS][32];
    cluster_spread_names(&cl, "hq", names, 1);
    /* the server names its nodes by the host name only */
    redisContext *rc = cluster_connect(&cl, 0);
    redisReply *r = server_cmd(rc, "CLUSTER SLOTS");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements >= 3);
    ASSERT_STREQ(HOST, r->element[0]->element[2]->element[0]->str);
    freeReplyObject(r);
    redisFree(rc);

    struct event_base *base = event_base_new();
    struct evdns_base *dns = evdns_base_new(base, 0); /* no name server: the hosts file only */
    ASSERT(dns != NULL);
    ASSERT_EQ(0, evdns_base_load_hosts(dns, hosts));
    rjq_client_options o = client_options(cl.url);
    o.on_event = on_event;
    rjq_client *c = NULL;
    ASSERT_OK(rjq_libevent_client_new_dns(&c, base, dns, &o));
    rjq_queue *q[CLUSTER_MASTERS];
    rjq_worker *w[CLUSTER_MASTERS];
    tally t = {0};
    /* (each master gets the client's sharded pub/sub connection, made to
     * the host name through the glue) */
    run_on_every_master(base, &cl, c, names, q, w, &t);

    /* a MOVED that names the host: the slot of master 1's queue goes to
     * master 2 behind the client's back */
    int slot = rjq__key_slot(names[1], strlen(names[1]));
    ASSERT_EQ(1, cluster_owner(&cl, 0, slot));
    cluster_migrate_slot(&cl, slot, 1, 2);
    rc = cluster_connect(&cl, 1);
    r = cluster_cmd(&cl, rc, "GET {%s}", names[1]);
    char moved[96];
    snprintf(moved, sizeof moved, "MOVED %d %s:%d", slot, HOST, cl.node[2].port);
    ASSERT(r->type == REDIS_REPLY_ERROR);
    ASSERT_STREQ(moved, r->str);
    freeReplyObject(r);
    long long moves_before = server_info_number(rc, "errorstats", "errorstat_MOVED:count=");
    await_n(q[1], 10, &t);
    awaits_answered(base, &t, 4 * 10);
    ASSERT(server_info_number(rc, "errorstats", "errorstat_MOVED:count=") > moves_before);
    redisFree(rc);

    /* a glue that resolves nothing: the named masters cannot be reached,
     * and the client's command link says why (it never guesses an
     * address); a plain enqueue: no sharded pub/sub link is made */
    events[0] = '\0';
    rjq_client *plain = client_new(base, &o);
    rjq_queue *pq = NULL;
    ASSERT_OK(rjq_queue_open(plain, names[2], NULL, &pq));
    long enqueued = 0;
    ASSERT_OK(rjq_enqueue(pq, "y", 1, NULL, on_enqueued, &enqueued));
    char want[96];
    snprintf(want, sizeof want, "cannot resolve %s", HOST);
    double until = wait_deadline(30000);
    while (strstr(events, want) == NULL && wait_step(base, until)) {
    }
    if (strstr(events, want) == NULL)
        FAIL_AT(__FILE__, __LINE__, "enqueued: %ld; errors:\n%s", enqueued, events);
    ASSERT_EQ(0, enqueued);
    rjq_client_free(plain); /* (its enqueue is answered: RJQ_ECLOSED) */

    for (int m = 0; m < CLUSTER_MASTERS; m++) rjq_worker_stop(w[m], NULL, NULL);
    rjq_client_free(c);
    evdns_base_free(dns, 0);
    event_base_free(base);
    cluster_stop(&cl);
    unlink(hosts);
}

/* Set cluster-preferred-endpoint-type on every running node. */
static void endpoint_type(const test_cluster *cl, const char *type) {
    for (int i = 0; i < cl->nnodes; i++) {
        if (cl->node[i].pid <= 0) continue;
        redisContext *rc = cluster_connect(cl, i);
        redisReply *r = server_cmd(rc, "CONFIG SET cluster-preferred-endpoint-type %s", type);
        ASSERT(r->type == REDIS_REPLY_STATUS);
        freeReplyObject(r);
        redisFree(rc);
    }
}

/* The MOVED node `from` answers for a key of names's slot, checked to be
 * "MOVED <slot> <endpoint>:<port of node to>". */
static void moved_reads(test_cluster *cl, int from, const char *name, int slot, const char *endpoint,
                        int to) {
    redisReply *r = cluster_node_cmd(cl, from, "GET {%s}", name);
    char moved[96];
    snprintf(moved, sizeof moved, "MOVED %d %s:%d", slot, endpoint, cl->node[to].port);
    ASSERT(r->type == REDIS_REPLY_ERROR);
    ASSERT_STREQ(moved, r->str);
    freeReplyObject(r);
}

/* Host names preferred but none announced: Redis names every node "?" in
 * CLUSTER SLOTS (with its IP in the entry's metadata) and in the MOVED
 * redirects ("MOVED <slot> ?:<port>"); unknown-endpoint: a nil endpoint
 * and "MOVED <slot> :<port>". Queues on every master run, and both MOVEDs
 * are followed. */
TEST(nodes_announced_as_question_mark_are_reached_at_their_ip_and_moved_to_them_is_followed) {
    test_cluster cl;
    cluster_start(&cl, 0);
    char names[CLUSTER_MASTERS][32];
    cluster_spread_names(&cl, "uq", names, 1);
    endpoint_type(&cl, "hostname"); /* (no cluster-announce-hostname) */
    redisContext *rc = cluster_connect(&cl, 0);
    redisReply *r = server_cmd(rc, "CLUSTER SLOTS");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements >= 3);
    ASSERT_STREQ("?", r->element[0]->element[2]->element[0]->str);
    freeReplyObject(r);
    redisFree(rc);

    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(cl.url);
    o.on_event = on_event;
    events[0] = '\0';
    rjq_client *c = client_new(base, &o);
    rjq_queue *q[CLUSTER_MASTERS];
    rjq_worker *w[CLUSTER_MASTERS];
    tally t = {0};
    run_on_every_master(base, &cl, c, names, q, w, &t);

    /* "MOVED <slot> ?:<port>": master 1's queue's slot goes to master 2 */
    int slot = rjq__key_slot(names[1], strlen(names[1]));
    ASSERT_EQ(1, cluster_owner(&cl, 0, slot));
    cluster_migrate_slot(&cl, slot, 1, 2);
    moved_reads(&cl, 1, names[1], slot, "?", 2);
    rc = cluster_connect(&cl, 1);
    long long moves_before = server_info_number(rc, "errorstats", "errorstat_MOVED:count=");
    await_n(q[1], 10, &t);
    awaits_answered(base, &t, 4 * 10);
    ASSERT(server_info_number(rc, "errorstats", "errorstat_MOVED:count=") > moves_before);
    redisFree(rc);

    /* unknown-endpoint: "MOVED <slot> :<port>" (the address the client
     * reached the answering node on) */
    endpoint_type(&cl, "unknown-endpoint");
    slot = rjq__key_slot(names[2], strlen(names[2]));
    cluster_migrate_slot(&cl, slot, 2, 0);
    moved_reads(&cl, 2, names[2], slot, "", 0);
    await_n(q[2], 10, &t);
    awaits_answered(base, &t, 5 * 10);

    for (int m = 0; m < CLUSTER_MASTERS; m++) rjq_worker_stop(w[m], NULL, NULL);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}
