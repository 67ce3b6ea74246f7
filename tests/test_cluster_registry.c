/*
 * rjq's registries on a Redis Cluster (issue 34, docs/cluster.md 3.7 and
 * 5), on the test cluster of tests/cluster.c (3 masters, 3 replicas): the
 * queue registry and the process/liveness registry live per master (each
 * under the tag of the lowest slot the master serves: "<prefix>:{queues-
 * <n>}", "<prefix>:{clients-<n>}:live|queues|sweeps|info"), so each script
 * touches one slot and a master failing over stops nothing on the others;
 * the listings merge every master; durable writes are confirmed by a WAIT
 * on each master they went to; the watchdog pings each master's link.
 *
 * Every wait waits for the event it checks (answers, completions, a key's
 * state on a node), bounded so that a broken build fails instead of
 * hanging.
 */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>
#include <rjq/libevent.h>

#include "cluster.h"
#include "harness.h"
#include "server.h"
#include "slot.h"
#include "waits.h"

/* ---- helpers --------------------------------------------------------------- */

/* Each node's pin as node `asked` says: the lowest slot it serves (-1: a
 * replica, or not running). */
static void node_pins(const test_cluster *cl, int asked, int pin[CLUSTER_NODES]) {
    for (int i = 0; i < CLUSTER_NODES; i++) pin[i] = -1;
    redisContext *rc = cluster_connect(cl, asked);
    redisReply *r = server_cmd(rc, "CLUSTER SLOTS");
    ASSERT(r->type == REDIS_REPLY_ARRAY);
    for (size_t i = 0; i < r->elements; i++) {
        redisReply *e = r->element[i];
        ASSERT(e->elements >= 3 && e->element[2]->elements >= 2);
        int node = cluster_node_at(cl, (int)e->element[2]->element[1]->integer);
        ASSERT(node >= 0);
        int start = (int)e->element[0]->integer;
        if (pin[node] < 0 || start < pin[node]) pin[node] = start;
    }
    freeReplyObject(r);
    redisFree(rc);
}

/* "t:{<base>-<n>}<rest>": a registry's name in the master of pin. */
static void tagged(char *out, size_t size, const char *base, int pin, const char *rest) {
    char tag[64];
    ASSERT_EQ(0, rjq__slot_tag(base, pin, tag, sizeof tag));
    snprintf(out, size, "t:{%s}%s", tag, rest);
}

/* (a node refusing keys for a while, CLUSTERDOWN...: asked again once the
 * cluster is settled, as every read of a node here: cluster_node_int) */
static long long node_int(test_cluster *cl, int node, const char *cmd, const char *key) {
    return cluster_node_int(cl, node, "%s %s", cmd, key);
}

/* The latest entry end in a liveness set on node (0: none). */
static long long node_latest_entry(test_cluster *cl, int node, const char *key) {
    redisReply *r = cluster_node_cmd(cl, node, "ZREVRANGE %s 0 0 WITHSCORES", key);
    ASSERT(r->type == REDIS_REPLY_ARRAY);
    long long end = r->elements == 2 ? atoll(r->element[1]->str) : 0;
    freeReplyObject(r);
    return end;
}

static long long node_time(const test_cluster *cl, int node) {
    redisContext *rc = cluster_connect(cl, node);
    long long ms = server_now_ms(rc);
    redisFree(rc);
    return ms;
}

static void on_complete(rjq_job *job, void *data) {
    long *handled = data;
    size_t len;
    const void *p = rjq_job_get_payload(job, &len);
    (*handled)++;
    rjq_job_complete(job, p, len, NULL, NULL);
}

typedef struct tally {
    long ok, bad, done;
    int last_status;
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
        t->last_status = status;
        snprintf(t->last_error, sizeof t->last_error, "%s", rjq_client_get_errmsg(c));
    }
}

static void await_n(rjq_queue *q, int n, tally *t) {
    for (int i = 0; i < n; i++)
        ASSERT_OK(rjq_enqueue_await(q, "x", 1, NULL, NULL, on_awaited, t, NULL));
}

/* ---- listings --------------------------------------------------------------- */

typedef struct names_page {
    int done, status;
    char names[64][32];
    size_t n;
} names_page;

static void on_names(rjq_client *c, int status, const char *const *names, size_t n, void *data) {
    names_page *p = data;
    (void)c;
    p->status = status;
    p->n = 0;
    for (size_t i = 0; i < n && i < 64; i++) snprintf(p->names[p->n++], 32, "%s", names[i]);
    p->done = 1;
}

typedef struct procs_page {
    int done, status;
    size_t n;
    char name[64];
    size_t nqueues;
} procs_page;

static void on_procs(rjq_client *c, int status, const rjq_process *list, size_t n, void *data) {
    procs_page *p = data;
    (void)c;
    p->status = status;
    p->n = n;
    if (n) {
        snprintf(p->name, sizeof p->name, "%s", list[0].name);
        p->nqueues = list[0].nqueues;
    }
    p->done = 1;
}

static int by_name(const void *a, const void *b) {
    return strcmp(a, b);
}

/* Lines of a command's output (the rjq tool of this build). */
static int run_lines(const char *cmd, char lines[][128], int max) {
    FILE *p = popen(cmd, "r");
    ASSERT(p != NULL);
    int n = 0;
    char line[128];
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = '\0';
        if (n < max) snprintf(lines[n], 128, "%s", line);
        n++;
    }
    ASSERT_EQ(0, pclose(p));
    return n;
}

/* 12 queues, 4 per master, worked by one client: each master's registry
 * holds the names of its own queues and the client's liveness entry (no
 * registry key of another slot anywhere); rjq_client_list_queues lists the 12
 * once each in name order, also in pages and with a name left in a second
 * master's registry (a migrated queue); rjq_client_list_processes lists the
 * client once with its 12 queues; so do `rjq queues` and `rjq processes`. */
TEST(listings_merge_every_master_once_in_order) {
    test_cluster cl;
    cluster_start(&cl, 0);
    enum { NQ = 12 };
    char names[NQ][32];
    cluster_spread_names(&cl, "rq", names, NQ / CLUSTER_MASTERS);
    int pin[CLUSTER_NODES];
    node_pins(&cl, 0, pin);
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(cl.url);
    o.name = "lister-a";
    rjq_client *a = client_new(base, &o);
    rjq_queue *q[NQ];
    rjq_worker *w[NQ];
    long handled = 0;
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 1;
    for (int i = 0; i < NQ; i++) {
        ASSERT_OK(rjq_queue_open(a, names[i], NULL, &q[i]));
        ASSERT_OK(rjq_worker_start(q[i], &wo, on_complete, &handled, &w[i]));
        ASSERT_OK(rjq_enqueue(q[i], "x", 1, NULL, NULL, NULL));
    }
    ASSERT(loop_until_count(base, &handled, NQ, 60000));

    /* each master: its 4 names, and one liveness entry, in its own slot */
    for (int m = 0; m < CLUSTER_MASTERS; m++) {
        char reg[96], live[96];
        tagged(reg, sizeof reg, "queues", pin[m], "");
        tagged(live, sizeof live, "clients", pin[m], ":live");
        ASSERT_EQ(m, cluster_owner(&cl, 0, rjq__key_slot(reg, strlen(reg))));
        ASSERT_EQ(m, cluster_owner(&cl, 0, rjq__key_slot(live, strlen(live))));
        WAIT_FOR(base, node_int(&cl, m, "ZCARD", reg) == NQ / CLUSTER_MASTERS, 20000);
        WAIT_FOR(base, node_int(&cl, m, "ZCARD", live) == 1, 20000);
        for (int i = 0; i < NQ; i++) {
            int on_m = cluster_owner(&cl, 0, rjq__key_slot(names[i], strlen(names[i]))) == m;
            redisReply *r = cluster_node_cmd(&cl, m, "ZSCORE %s %s", reg, names[i]);
            ASSERT_EQ(on_m, r->type == REDIS_REPLY_STRING);
            freeReplyObject(r);
        }
    }
    /* nothing in the global names of a standalone server, asked where
     * their slots are (another master answered MOVED, which read as 0) */
    ASSERT_EQ(0, node_int(&cl, cluster_node_of_key(&cl, "t:queues"), "EXISTS", "t:queues"));
    ASSERT_EQ(0, node_int(&cl, cluster_node_of_key(&cl, "t:{clients}:live"), "EXISTS", "t:{clients}:live"));

    /* a name left in another master's registry (its slot moved): listed once */
    int other = (cluster_owner(&cl, 0, rjq__key_slot(names[0], strlen(names[0]))) + 1) %
                CLUSTER_MASTERS;
    char stray[96];
    tagged(stray, sizeof stray, "queues", pin[other], "");
    ASSERT_EQ(1, cluster_node_int(&cl, other, "ZADD %s 0 %s", stray, names[0]));

    char sorted[NQ][32];
    memcpy(sorted, names, sizeof sorted);
    qsort(sorted, NQ, sizeof sorted[0], by_name);

    rjq_client *b = client_new(base, &o); /* (not connected yet: waits to know) */
    names_page p = {0};
    ASSERT_OK(rjq_client_list_queues(b, NULL, 100, on_names, &p));
    ASSERT(loop_until(base, &p.done, 20000));
    ASSERT_OK(p.status);
    ASSERT_EQ(NQ, (long)p.n);
    for (int i = 0; i < NQ; i++) ASSERT_STREQ(sorted[i], p.names[i]);
    /* in pages of 5, each after the last name of the one before */
    int seen = 0;
    char after[32] = "";
    do {
        names_page pg = {0};
        ASSERT_OK(rjq_client_list_queues(b, seen ? after : NULL, 5, on_names, &pg));
        ASSERT(loop_until(base, &pg.done, 20000));
        ASSERT_OK(pg.status);
        ASSERT((int)pg.n <= 5);
        for (size_t i = 0; i < pg.n; i++) ASSERT_STREQ(sorted[seen + (int)i], pg.names[i]);
        seen += (int)pg.n;
        if (pg.n) snprintf(after, sizeof after, "%s", pg.names[pg.n - 1]);
        if (pg.n < 5) break;
    } while (seen < NQ + 5);
    ASSERT_EQ(NQ, seen);

    /* the process registry: a, once, with its 12 queues */
    procs_page pp = {0};
    ASSERT_OK(rjq_client_list_processes(b, 0, 100, on_procs, &pp));
    ASSERT(loop_until(base, &pp.done, 20000));
    ASSERT_OK(pp.status);
    ASSERT_EQ(1, (long)pp.n);
    ASSERT_STREQ("lister-a", pp.name);
    ASSERT_EQ(NQ, (long)pp.nqueues);

    /* the CLI, given the URL of one node */
    char cmd[512], lines[64][128];
    snprintf(cmd, sizeof cmd, "%s/rjq -u %s --prefix t queues", RJQ_BUILD_DIR, cl.url);
    ASSERT_EQ(NQ, run_lines(cmd, lines, 64));
    for (int i = 0; i < NQ; i++) ASSERT_STREQ(sorted[i], lines[i]);
    snprintf(cmd, sizeof cmd, "%s/rjq -u %s --prefix t processes", RJQ_BUILD_DIR, cl.url);
    int n = run_lines(cmd, lines, 64), heads = 0, queues = 0;
    for (int i = 0; i < n && i < 64; i++) {
        if (strncmp(lines[i], "  ", 2) == 0) queues++;
        else heads++;
    }
    ASSERT_EQ(1, heads);
    ASSERT(strstr(lines[0], "lister-a") != NULL);
    ASSERT_EQ(NQ, queues);

    rjq_client_free(b);
    rjq_client_free(a);
    event_base_free(base);
    cluster_stop(&cl);
}

/* ---- a master fails over ------------------------------------------------------ */

/* The master serving the slot the liveness registry of a standalone server
 * ("{clients}") would live in is SIGKILLed: the client's queues on the
 * other masters go on being beaten for (their registries renew the entry
 * past the time it would have run out) and their jobs go on starting
 * before the replica is promoted; once it is, the dead master's queue
 * resumes and its registry is beaten into on the promoted node. Before
 * the registries were per master, every beat went to that one master and
 * every worker of the client stopped starting jobs until the promotion. */
TEST(master_killed_other_masters_keep_beating_and_starting_jobs) {
    test_cluster cl;
    cluster_start(&cl, 5000); /* a failover of ~10 s: long beside a 1 s liveness */
    char names[CLUSTER_MASTERS][32];
    cluster_spread_names(&cl, "rq", names, 1);
    int victim = cluster_owner(&cl, 0, rjq__key_slot("clients", 7));
    ASSERT(victim >= 0 && victim < CLUSTER_MASTERS);
    int pin[CLUSTER_NODES];
    node_pins(&cl, 0, pin);
    struct event_base *base = event_base_new();
    char url[512];
    cluster_seed_url(&cl, url, sizeof url);
    rjq_client_options o = client_options(url);
    o.liveness_ms = 1000;
    rjq_client *c = client_new(base, &o);
    rjq_queue *q[CLUSTER_MASTERS];
    rjq_worker *w[CLUSTER_MASTERS];
    int of[CLUSTER_MASTERS]; /* each queue's master */
    long handled = 0;
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 2;
    for (int i = 0; i < CLUSTER_MASTERS; i++) {
        of[i] = cluster_owner(&cl, 0, rjq__key_slot(names[i], strlen(names[i])));
        ASSERT_OK(rjq_queue_open(c, names[i], NULL, &q[i]));
        ASSERT_OK(rjq_worker_start(q[i], &wo, on_complete, &handled, &w[i]));
    }
    tally warm = {0};
    for (int i = 0; i < CLUSTER_MASTERS; i++) await_n(q[i], 5, &warm);
    ASSERT(loop_until_count(base, &warm.done, 15, 60000));
    ASSERT_EQ(0, warm.bad);
    char live[CLUSTER_MASTERS][96];
    for (int m = 0; m < CLUSTER_MASTERS; m++) {
        tagged(live[m], sizeof live[m], "clients", pin[m], ":live");
        WAIT_FOR(base, node_latest_entry(&cl, m, live[m]) > 0, 20000);
    }

    int promoted = cluster_replica_of(&cl, victim);
    ASSERT(promoted >= 0);
    int survivor = (victim + 1) % CLUSTER_MASTERS;
    long long killed_at = node_time(&cl, survivor);
    cluster_kill_node(&cl, victim);

    /* the other masters' entries are renewed past when they would have
     * run out without a beat answered since the kill */
    for (int m = 0; m < CLUSTER_MASTERS; m++) {
        if (m == victim) continue;
        WAIT_FOR(base, node_latest_entry(&cl, m, live[m]) > killed_at + o.liveness_ms + 500, 20000);
    }
    /* ... and their jobs start: answered while the dead master's replica
     * is not promoted yet */
    tally others = {0};
    for (int i = 0; i < CLUSTER_MASTERS; i++)
        if (of[i] != victim) await_n(q[i], 10, &others);
    if (!loop_until_count(base, &others.done, 20, 30000))
        FAIL_AT(__FILE__, __LINE__, "%ld of 20 awaits on the other masters answered", others.done);
    ASSERT_EQ(0, others.bad);
    if (cluster_is_master(&cl, promoted))
        FAIL_AT(__FILE__, __LINE__, "the replica was promoted before the other masters' jobs ran");

    /* the promotion: the dead master's queue resumes, beaten into there */
    double promotion = wait_deadline(60000);
    while (!cluster_is_master(&cl, promoted))
        if (!wait_poll(base, promotion, 10)) FAIL_AT(__FILE__, __LINE__, "node %d not promoted", promoted);
    int vq = of[0] == victim ? 0 : of[1] == victim ? 1 : 2;
    ASSERT_EQ(victim, of[vq]);
    tally resumed = {0};
    await_n(q[vq], 10, &resumed);
    if (!loop_until_count(base, &resumed.done, 10, 60000))
        FAIL_AT(__FILE__, __LINE__, "%ld of 10 awaits on the failed-over queue answered", resumed.done);
    if (resumed.bad) FAIL_AT(__FILE__, __LINE__, "%ld awaits failed: %s (%s)", resumed.bad,
                             rjq_strerror(resumed.last_status), resumed.last_error);
    long long promoted_at = node_time(&cl, promoted);
    WAIT_FOR(base, node_latest_entry(&cl, promoted, live[victim]) > promoted_at, 20000);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}

/* ---- orphan recovery ------------------------------------------------------------ */

typedef struct holder {
    int fd;
    long held;
    long want;
} holder;

static void on_hold(rjq_job *job, void *data) { /* never finished: its client dies */
    holder *h = data;
    (void)job;
    if (++h->held == h->want) {
        char one = 1;
        ASSERT_EQ(1, (long)write(h->fd, &one, 1));
    }
}

typedef struct reran {
    long done;
    int attempt_min;
} reran;

static void on_rerun(rjq_job *job, void *data) {
    reran *r = data;
    if (r->attempt_min == 0 || rjq_job_get_attempt(job) < r->attempt_min)
        r->attempt_min = rjq_job_get_attempt(job);
    r->done++;
    rjq_job_complete(job, "", 0, NULL, NULL);
}

/* A worker process holding 2 jobs on a queue of each master is SIGKILLed:
 * another client with workers on the three queues returns all 6 in
 * seconds (each master's registry names the dead client with the queues
 * it had there; the jobs' lease is 300 s), runs them again (a second
 * attempt), and each master forgets the dead client. */
TEST(client_killed_with_jobs_on_three_masters_all_reclaimed) {
    test_cluster cl;
    cluster_start(&cl, 0);
    char names[CLUSTER_MASTERS][32];
    cluster_spread_names(&cl, "rq", names, 1);
    int pin[CLUSTER_NODES];
    node_pins(&cl, 0, pin);
    int fds[2];
    ASSERT_EQ(0, pipe(fds));
    pid_t child = fork_child();
    if (child == 0) { /* the doomed worker process */
        close(fds[0]);
        struct event_base *cb = event_base_new();
        rjq_client_options co = client_options(cl.url);
        co.liveness_ms = 1000;
        co.name = "doomed";
        rjq_client *dc = client_new(cb, &co);
        holder h = {fds[1], 0, 2 * CLUSTER_MASTERS};
        rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
        wo.concurrency = 2;
        wo.lease_ms = 300000;
        for (int i = 0; i < CLUSTER_MASTERS; i++) {
            rjq_worker *w = NULL;
            ASSERT_OK(rjq_worker_start(queue_for(dc, names[i]), &wo, on_hold, &h, &w));
        }
        serve_until_killed(cb, 120000);
    }
    close(fds[1]);
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(cl.url);
    o.liveness_ms = 1000;
    rjq_client *p = client_new(base, &o);
    rjq_queue *q[CLUSTER_MASTERS];
    for (int i = 0; i < CLUSTER_MASTERS; i++) {
        q[i] = queue_for(p, names[i]);
        for (int k = 0; k < 2; k++) ASSERT_OK(enqueue_job(base, q[i], "x", NULL).status);
    }
    struct pollfd pf = {fds[0], POLLIN, 0};
    ASSERT_EQ(1, poll(&pf, 1, 60000)); /* the child holds all 6 */
    char one;
    ASSERT_EQ(1, (long)read(fds[0], &one, 1));
    close(fds[0]);
    char live[CLUSTER_MASTERS][96];
    for (int m = 0; m < CLUSTER_MASTERS; m++) {
        tagged(live[m], sizeof live[m], "clients", pin[m], ":live");
        WAIT_FOR(base, node_int(&cl, m, "ZCARD", live[m]) == 1, 20000); /* its entry */
    }
    for (int i = 0; i < CLUSTER_MASTERS; i++) ASSERT_EQ(2, get_stats(base, q[i]).active);
    ASSERT(kill(child, SIGKILL) == 0);
    reap(child, 10000);

    /* p's workers on the three queues: p sweeps each master's registry */
    reran r = {0};
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 2;
    rjq_worker *w[CLUSTER_MASTERS];
    for (int i = 0; i < CLUSTER_MASTERS; i++)
        ASSERT_OK(rjq_worker_start(q[i], &wo, on_rerun, &r, &w[i]));
    if (!loop_until_count(base, &r.done, 2 * CLUSTER_MASTERS, 60000)) /* (lease: 300 s) */
        FAIL_AT(__FILE__, __LINE__, "%ld of 6 jobs of the dead client ran again", r.done);
    ASSERT_EQ(2, r.attempt_min); /* the dead client's run counted */
    for (int i = 0; i < CLUSTER_MASTERS; i++) {
        rjq_stats s = get_stats(base, q[i]);
        ASSERT_EQ(2, s.reclaimed);
        ASSERT_EQ(2, s.completed);
    }
    /* each master forgot the dead client once its jobs there were back */
    for (int m = 0; m < CLUSTER_MASTERS; m++) {
        char sweeps[96];
        tagged(sweeps, sizeof sweeps, "clients", pin[m], ":sweeps");
        WAIT_FOR(base, node_int(&cl, m, "ZCARD", live[m]) == 1 &&
                       node_int(&cl, m, "HLEN", sweeps) == 0, 20000);
    }
    rjq_client_free(p);
    event_base_free(base);
    cluster_stop(&cl);
}

/* ---- WAIT and the watchdog per master --------------------------------------------- */

static long confirmed, unconfirmed;
static void on_durable(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs, (void)n, (void)data;
    if (status == RJQ_OK) confirmed++;
    else unconfirmed++;
}

/* wait_replicas 1, enqueues on the three masters made together (one burst):
 * each is confirmed by a WAIT on its own master (each has a replica), none
 * is reported short. Before, the burst's WAIT went to the first write's
 * master and the others were reported RJQ_EREPLICAS. */
TEST(durable_writes_on_three_masters_each_confirmed_by_a_wait_there) {
    test_cluster cl;
    cluster_start(&cl, 0);
    char names[CLUSTER_MASTERS][32];
    cluster_spread_names(&cl, "rq", names, 1);
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(cl.url);
    o.wait_replicas = 1;
    o.wait_timeout_ms = 2000;
    o.command_timeout_ms = 5000;
    rjq_client *c = client_new(base, &o);
    rjq_queue *q[CLUSTER_MASTERS];
    for (int i = 0; i < CLUSTER_MASTERS; i++) q[i] = queue_for(c, names[i]);
    wait_connected(base, c);
    long long waits[CLUSTER_MASTERS];
    for (int m = 0; m < CLUSTER_MASTERS; m++) waits[m] = cluster_node_calls(&cl, m, "wait");
    for (int burst = 0; burst < 5; burst++) {
        for (int i = 0; i < CLUSTER_MASTERS; i++)
            ASSERT_OK(rjq_enqueue(q[i], "x", 1, NULL, on_durable, NULL));
        long target = (burst + 1) * CLUSTER_MASTERS;
        WAIT_FOR(base, confirmed + unconfirmed >= target, 30000);
        ASSERT_EQ(target, confirmed + unconfirmed);
    }
    if (unconfirmed)
        FAIL_AT(__FILE__, __LINE__, "%ld of %ld writes reported short: %s", unconfirmed,
                confirmed + unconfirmed, rjq_client_get_errmsg(c));
    for (int m = 0; m < CLUSTER_MASTERS; m++) ASSERT(cluster_node_calls(&cl, m, "wait") > waits[m]);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}

/* An idle client with queues on the three masters: the watchdog pings each
 * master's connection (TIME), not only the URL's node. */
TEST(watchdog_pings_every_master_link) {
    test_cluster cl;
    cluster_start(&cl, 0);
    char names[CLUSTER_MASTERS][32];
    cluster_spread_names(&cl, "rq", names, 1);
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(cl.url);
    o.ping_interval_ms = 100;
    rjq_client *c = client_new(base, &o);
    for (int i = 0; i < CLUSTER_MASTERS; i++) /* (a master link is made on first use) */
        (void)get_stats(base, queue_for(c, names[i]));
    long long before[CLUSTER_MASTERS];
    for (int m = 0; m < CLUSTER_MASTERS; m++) before[m] = cluster_node_calls(&cl, m, "time");
    for (int m = 0; m < CLUSTER_MASTERS; m++)
        WAIT_FOR(base, cluster_node_calls(&cl, m, "time") >= before[m] + 3, 20000);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}
