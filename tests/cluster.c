#include "cluster.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "slot.h"

/* The longest any wait of the fixture may take before the test fails: a
 * failover takes about two node timeouts, a loaded machine more. */
static long settle_bound_ms(const test_cluster *c) {
    return 20 * c->node_timeout_ms + 30000;
}

/* The arguments every node starts with (the strings live in *c). The bus
 * port is Redis' default, port + 10000: free_port() checks it with the
 * port, and a start retried on another port (spawn_on_free_port) moves it
 * too; a bus port picked once and passed as --cluster-port made every
 * retry fail on it when it was taken ("no free port in 20 tries"). */
static void node_args(const test_cluster *c, const char **argv, char *nt) {
    snprintf(nt, 16, "%ld", c->node_timeout_ms);
    const char *a[] = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                       "--cluster-node-timeout", nt,
                       /* a replica may always take over, and stays where it is */
                       "--cluster-replica-validity-factor", "0",
                       "--cluster-allow-replica-migration", "no",
                       /* a replica syncs at once, and its master's pings move
                        * its offset within a second: CLUSTER SLOTS lists a
                        * replica once its offset is not 0 (Redis 7), which
                        * the default 10 s period made cluster_start wait
                        * for (~6 s of each start) */
                       "--repl-diskless-sync-delay", "0", "--repl-ping-replica-period", "1", NULL};
    _Static_assert(sizeof a + 4 * sizeof *argv <= 24 * sizeof *argv, "node_args: the callers' argv[24]");
    memcpy(argv, a, sizeof a);
    if (c->hostname[0]) { /* (in place of the NULL, and a new one) */
        size_t n = sizeof a / sizeof *a - 1;
        argv[n++] = "--cluster-announce-hostname";
        argv[n++] = c->hostname;
        argv[n++] = "--cluster-preferred-endpoint-type";
        argv[n++] = "hostname";
        argv[n] = NULL;
    }
}

redisContext *cluster_connect(const test_cluster *c, int i) {
    ASSERT(i >= 0 && i < c->nnodes && c->node[i].pid > 0);
    return server_connect(&c->node[i]);
}

int cluster_transient(const redisReply *r) {
    static const char *const refusals[] = {"CLUSTERDOWN", "LOADING", "MASTERDOWN"};
    if (r == NULL || r->type != REDIS_REPLY_ERROR || r->str == NULL) return 0;
    for (size_t k = 0; k < sizeof refusals / sizeof refusals[0]; k++)
        if (strncmp(r->str, refusals[k], strlen(refusals[k])) == 0) return 1;
    return 0;
}

/* After the tries'th transient refusal r of `what` on node (-1: unknown):
 * fails the test after the fifth, else prints it, frees it and waits until
 * the cluster is settled. */
static void refused(test_cluster *c, int node, const char *what, redisReply *r, int tries) {
    if (tries >= 5) FAIL_AT(__FILE__, __LINE__, "node %d, %s: still %s", node, what, r->str);
    fprintf(stderr, "node %d, %s: %s; again once the cluster is settled\n", node, what, r->str);
    freeReplyObject(r);
    cluster_wait_settled(c);
}

redisReply *cluster_send(test_cluster *c, int i, int asking, int argc, const char **argv) {
    char what[128];
    snprintf(what, sizeof what, "%s %s", argv[0], argc > 1 ? argv[1] : "");
    for (int tries = 1;; tries++) {
        redisContext *rc = cluster_connect(c, i);
        redisReply *r = NULL;
        if (asking) {
            r = server_cmd(rc, "ASKING");
            if (r->type == REDIS_REPLY_STATUS) freeReplyObject(r), r = NULL;
        }
        if (r == NULL) r = redisCommandArgv(rc, argc, argv, NULL);
        ASSERT(r != NULL);
        redisFree(rc);
        if (!cluster_transient(r)) return r;
        refused(c, i, what, r, tries);
    }
}

static redisReply *vcmd(test_cluster *c, redisContext *rc, const char *fmt, va_list ap) {
    char what[128];
    for (int tries = 1;; tries++) {
        va_list aq;
        va_copy(aq, ap);
        redisReply *r = redisvCommand(rc, fmt, aq);
        va_end(aq);
        ASSERT(r != NULL);
        if (!cluster_transient(r)) return r;
        va_copy(aq, ap);
        vsnprintf(what, sizeof what, fmt, aq);
        va_end(aq);
        refused(c, cluster_node_at(c, rc->tcp.port), what, r, tries);
    }
}

/* The integer of a reply of cluster_int (freed). */
static long long int_of(const char *fmt, redisReply *r) {
    if (r->type == REDIS_REPLY_ERROR) FAIL_AT(__FILE__, __LINE__, "%s: %s", fmt, r->str);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
    freeReplyObject(r);
    return v;
}

redisReply *cluster_cmd(test_cluster *c, redisContext *rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = vcmd(c, rc, fmt, ap);
    va_end(ap);
    return r;
}

long long cluster_int(test_cluster *c, redisContext *rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = vcmd(c, rc, fmt, ap);
    va_end(ap);
    return int_of(fmt, r);
}

/* vcmd on a connection of its own to node i. */
static redisReply *node_vcmd(test_cluster *c, int i, const char *fmt, va_list ap) {
    redisContext *rc = cluster_connect(c, i);
    redisReply *r = vcmd(c, rc, fmt, ap);
    redisFree(rc);
    return r;
}

redisReply *cluster_node_cmd(test_cluster *c, int i, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = node_vcmd(c, i, fmt, ap);
    va_end(ap);
    return r;
}

long long cluster_node_int(test_cluster *c, int i, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = node_vcmd(c, i, fmt, ap);
    va_end(ap);
    return int_of(fmt, r);
}

long long cluster_node_calls(const test_cluster *c, int i, const char *cmd) {
    redisContext *rc = cluster_connect(c, i);
    long long n = server_calls(rc, cmd);
    redisFree(rc);
    return n;
}

void cluster_seed_url(const test_cluster *c, char *url, size_t size) {
    int len = snprintf(url, size, "redis://");
    for (int i = 0; i < c->nnodes; i++)
        len += snprintf(url + len, size - (size_t)len, "%s127.0.0.1:%d", i ? "," : "",
                        c->node[i].port);
}

int cluster_node_at(const test_cluster *c, int port) {
    for (int i = 0; i < c->nnodes; i++)
        if (c->node[i].port == port) return i;
    return -1;
}

/* Node i's ROLE: "master", "slave", ...; for a replica, *master_port. */
static int role(const test_cluster *c, int i, char *out, size_t size, int *master_port) {
    redisContext *rc = cluster_connect(c, i);
    redisReply *r = server_cmd(rc, "ROLE");
    int ok = r->type == REDIS_REPLY_ARRAY && r->elements >= 1 && r->element[0]->type == REDIS_REPLY_STRING;
    if (ok) {
        snprintf(out, size, "%s", r->element[0]->str);
        if (master_port && r->elements >= 3 && r->element[2]->type == REDIS_REPLY_INTEGER)
            *master_port = (int)r->element[2]->integer;
    }
    freeReplyObject(r);
    redisFree(rc);
    return ok;
}

int cluster_is_master(const test_cluster *c, int i) {
    char r[16] = "";
    return role(c, i, r, sizeof r, NULL) && strcmp(r, "master") == 0;
}

int cluster_replica_of(const test_cluster *c, int m) {
    for (int i = 0; i < c->nnodes; i++) {
        if (i == m || c->node[i].pid <= 0) continue;
        char r[16] = "";
        int port = 0;
        if (role(c, i, r, sizeof r, &port) && strcmp(r, "slave") == 0 && port == c->node[m].port) return i;
    }
    return -1;
}

/* The owner of every slot as node `asked` says (CLUSTER SLOTS), as node
 * indices (-1: none, -2: a node not of this cluster); replicas (if not
 * NULL): how many replicas it lists for each node. Returns 0 when the
 * reply could not be read. */
static int owners_replicas(const test_cluster *c, int asked, int *owner, int *replicas) {
    for (int s = 0; s < 16384; s++) owner[s] = -1;
    if (replicas)
        for (int i = 0; i < c->nnodes; i++) replicas[i] = 0;
    redisContext *rc = cluster_connect(c, asked);
    redisReply *r = server_cmd(rc, "CLUSTER SLOTS");
    int ok = r->type == REDIS_REPLY_ARRAY;
    for (size_t k = 0; ok && k < r->elements; k++) {
        redisReply *e = r->element[k];
        ok = e->type == REDIS_REPLY_ARRAY && e->elements >= 3 && e->element[0]->type == REDIS_REPLY_INTEGER &&
             e->element[1]->type == REDIS_REPLY_INTEGER && e->element[2]->type == REDIS_REPLY_ARRAY &&
             e->element[2]->elements >= 2 && e->element[2]->element[1]->type == REDIS_REPLY_INTEGER;
        if (!ok) break;
        long long from = e->element[0]->integer, to = e->element[1]->integer;
        ok = from >= 0 && to < 16384 && from <= to;
        int node = cluster_node_at(c, (int)e->element[2]->element[1]->integer);
        for (long long s = from; ok && s <= to; s++) owner[s] = node < 0 ? -2 : node;
        if (ok && node >= 0 && replicas) replicas[node] = (int)e->elements - 3;
    }
    freeReplyObject(r);
    redisFree(rc);
    return ok;
}

static int owners(const test_cluster *c, int asked, int *owner) {
    return owners_replicas(c, asked, owner, NULL);
}

int cluster_owner(const test_cluster *c, int asked, int slot) {
    static int owner[16384];
    ASSERT(slot >= 0 && slot < 16384);
    ASSERT(owners(c, asked, owner));
    return owner[slot];
}

static int first_running(const test_cluster *c) {
    for (int i = 0; i < c->nnodes; i++)
        if (c->node[i].pid > 0) return i;
    FAIL_AT(__FILE__, __LINE__, "no node of the cluster is running");
    return -1;
}

int cluster_node_of_key(const test_cluster *c, const char *key) {
    int asked = first_running(c);
    redisContext *rc = cluster_connect(c, asked);
    long long slot = server_int(rc, "CLUSTER KEYSLOT %s", key);
    redisFree(rc);
    return cluster_owner(c, asked, (int)slot);
}

void cluster_name_on(const test_cluster *c, int m, const char *prefix, char *out, size_t size) {
    for (int k = 0; k < 1000; k++) {
        char key[64];
        snprintf(out, size, "%s%d", prefix, k);
        snprintf(key, sizeof key, "{%s}", out);
        if (cluster_node_of_key(c, key) == m) return;
    }
    FAIL_AT(__FILE__, __LINE__, "no queue name on master %d", m);
}

int cluster_master_of_shard(const test_cluster *c, rjq_queue *q, int i) {
    char key[128];
    snprintf(key, sizeof key, "{%s}", rjq_queue_get_name(rjq_queue_get_shard(q, i)));
    int node = cluster_node_of_key(c, key);
    ASSERT(node >= 0 && cluster_is_master(c, node));
    return node;
}

/* Is the cluster settled, as the running nodes say? (see the header) */
static int settled(const test_cluster *c, char *why, size_t size) {
    static int first[16384], other[16384];
    int base = -1, expected[CLUSTER_NODES_MAX] = {0}, listed[CLUSTER_NODES_MAX];
    /* the replicas each master has, as their ROLE says */
    for (int i = 0; i < c->nnodes; i++) {
        char rl[16] = "";
        int port = 0;
        if (c->node[i].pid > 0 && role(c, i, rl, sizeof rl, &port) && strcmp(rl, "slave") == 0 &&
            cluster_node_at(c, port) >= 0)
            expected[cluster_node_at(c, port)]++;
    }
    for (int i = 0; i < c->nnodes; i++) {
        if (c->node[i].pid <= 0) continue;
        redisContext *rc = cluster_connect(c, i);
        redisReply *r = server_cmd(rc, "CLUSTER INFO");
        int ok = r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_state:ok") != NULL;
        const char *known = ok ? strstr(r->str, "cluster_known_nodes:") : NULL;
        ok = known && atoi(known + strlen("cluster_known_nodes:")) == c->nnodes;
        freeReplyObject(r);
        char rl[16] = "";
        if (ok && role(c, i, rl, sizeof rl, NULL) && strcmp(rl, "slave") == 0) {
            r = server_cmd(rc, "INFO replication");
            ok = r->type == REDIS_REPLY_STRING && strstr(r->str, "master_link_status:up") != NULL;
            freeReplyObject(r);
            if (!ok) snprintf(why, size, "node %d: its link to its master is not up", i);
        } else if (!ok) {
            snprintf(why, size, "node %d: cluster_state is not ok, or it does not know all nodes", i);
        }
        redisFree(rc);
        if (!ok) return 0;
        if (!owners_replicas(c, i, base < 0 ? first : other, listed)) {
            snprintf(why, size, "node %d: CLUSTER SLOTS unreadable", i);
            return 0;
        }
        /* each master serving slots lists as many replicas as it has (a
         * node serving none is not in CLUSTER SLOTS) */
        const int *own = base < 0 ? first : other;
        for (int k = 0; k < c->nnodes; k++) {
            if (c->node[k].pid <= 0 || listed[k] == expected[k]) continue;
            int serves = 0;
            for (int s = 0; s < 16384 && !serves; s++) serves = own[s] == k;
            if (!serves) continue;
            snprintf(why, size, "node %d lists %d replicas of node %d, which has %d", i, listed[k], k,
                     expected[k]);
            return 0;
        }
        if (base < 0) {
            base = i;
            continue;
        }
        for (int s = 0; s < 16384; s++)
            if (first[s] != other[s]) {
                snprintf(why, size, "nodes %d and %d disagree on slot %d (%d vs %d)", base, i, s, first[s],
                         other[s]);
                return 0;
            }
    }
    for (int s = 0; s < 16384; s++)
        if (first[s] < 0 || c->node[first[s]].pid <= 0) {
            snprintf(why, size, "slot %d is served by no running node (%d)", s, first[s]);
            return 0;
        }
    return 1;
}

void cluster_wait_settled(test_cluster *c) {
    char why[200] = "";
    double end = mono_ms() + (double)settle_bound_ms(c);
    while (!settled(c, why, sizeof why)) {
        if (mono_ms() > end) FAIL_AT(__FILE__, __LINE__, "the cluster did not settle: %s", why);
        sleep_ms(20);
    }
}

static void print_file(const char *path) {
    char line[512];
    FILE *f = fopen(path, "r");
    if (f == NULL) return;
    while (fgets(line, sizeof line, f)) fputs(line, stderr);
    fclose(f);
}

/* Node i's id (CLUSTER MYID). */
static void read_id(test_cluster *c, int i) {
    redisContext *rc = server_connect(&c->node[i]);
    redisReply *r = server_cmd(rc, "CLUSTER MYID");
    ASSERT(r->type == REDIS_REPLY_STRING && r->len == 40);
    memcpy(c->id[i], r->str, 41);
    freeReplyObject(r);
    redisFree(rc);
}

/* Start nodes from..to-1 (new ones: their own directories, ports and bus
 * ports), side by side, and read their ids. */
static void nodes_start(test_cluster *c, int from, int to) {
    const char *argv[CLUSTER_NODES_MAX][24];
    const char *const *extra[CLUSTER_NODES_MAX] = {0};
    char nt[CLUSTER_NODES_MAX][16];
    for (int i = from; i < to; i++) {
        node_args(c, argv[i], nt[i]);
        extra[i] = argv[i];
    }
    server_start_many_guarded(&c->node[from], to - from, &extra[from]);
    for (int i = from; i < to; i++) read_id(c, i);
}

/* Start `redis-cli --cluster <argv...>` (NULL-terminated, after
 * "redis-cli --cluster"), its output in log (a file of node 0's
 * directory named name). Returns its pid (killed if the test aborts). */
static pid_t cli_start(const test_cluster *c, const char *const *args, const char *name, char *log,
                       size_t size) {
    const char *argv[32];
    int n = 0;
    argv[n++] = "redis-cli";
    argv[n++] = "--cluster";
    for (int k = 0; args[k] && n < 31; k++) argv[n++] = args[k];
    argv[n] = NULL;
    snprintf(log, size, "%s/%s", c->node[0].dir, name);
    pid_t pid = fork_child();
    if (pid == 0) {
        FILE *out = freopen(log, "w", stdout);
        if (out == NULL || dup2(fileno(stdout), 2) < 0) _exit(126);
        execvp("redis-cli", (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* The end of a redis-cli of cli_start: it must have exited 0. */
static void cli_exited(pid_t pid, int status, const char *what, const char *log) {
    forget_on_abort(pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        print_file(log);
        FAIL_AT(__FILE__, __LINE__, "redis-cli --cluster %s failed (status %d)", what, status);
    }
}

/* Run redis-cli --cluster <args...> to its end. */
static void cli_run(const test_cluster *c, const char *const *args, const char *name) {
    char log[300];
    pid_t pid = cli_start(c, args, name, log, sizeof log);
    cli_exited(pid, reap(pid, 120000), args[0], log);
}

/* Does every node entry of node i's CLUSTER SLOTS name its node by
 * c->hostname? */
static int slots_named(const test_cluster *c, int i) {
    redisContext *rc = cluster_connect(c, i);
    redisReply *r = server_cmd(rc, "CLUSTER SLOTS");
    int ok = r->type == REDIS_REPLY_ARRAY && r->elements > 0;
    for (size_t k = 0; ok && k < r->elements; k++) {
        const redisReply *e = r->element[k];
        ok = e->type == REDIS_REPLY_ARRAY && e->elements >= 3;
        for (size_t n = 2; ok && n < e->elements; n++) {
            const redisReply *node = e->element[n];
            ok = node->type == REDIS_REPLY_ARRAY && node->elements >= 2 &&
                 node->element[0]->type == REDIS_REPLY_STRING &&
                 strcmp(node->element[0]->str, c->hostname) == 0;
        }
    }
    freeReplyObject(r);
    redisFree(rc);
    return ok;
}

static void start_cluster(test_cluster *c, long node_timeout_ms, const char *hostname);

void cluster_start(test_cluster *c, long node_timeout_ms) {
    start_cluster(c, node_timeout_ms, "");
}

void cluster_start_named(test_cluster *c, long node_timeout_ms, const char *hostname) {
    start_cluster(c, node_timeout_ms, hostname);
    double end = mono_ms() + (double)settle_bound_ms(c);
    for (int i = 0; i < c->nnodes; i++)
        while (!slots_named(c, i)) {
            if (mono_ms() > end)
                FAIL_AT(__FILE__, __LINE__, "node %d's CLUSTER SLOTS does not name every node %s", i,
                        c->hostname);
            sleep_ms(20);
        }
}

static void start_cluster(test_cluster *c, long node_timeout_ms, const char *hostname) {
    memset(c, 0, sizeof *c);
    ASSERT(strlen(hostname) < sizeof c->hostname);
    snprintf(c->hostname, sizeof c->hostname, "%s", hostname);
    c->nnodes = CLUSTER_NODES;
    c->node_timeout_ms = node_timeout_ms > 0 ? node_timeout_ms : 2000;
    nodes_start(c, 0, c->nnodes);
    snprintf(c->url, sizeof c->url, "%s", c->node[0].url);

    /* redis-cli --cluster create: the first 3 nodes are the masters */
    char addr[CLUSTER_NODES][32];
    const char *args[CLUSTER_NODES + 8];
    int n = 0;
    args[n++] = "create";
    for (int i = 0; i < CLUSTER_NODES; i++) {
        snprintf(addr[i], sizeof addr[i], "127.0.0.1:%d", c->node[i].port);
        args[n++] = addr[i];
    }
    args[n++] = "--cluster-replicas";
    args[n++] = "1";
    args[n++] = "--cluster-yes";
    args[n] = NULL;
    cli_run(c, args, "cluster-create.log");
    cluster_wait_settled(c);
    for (int i = 0; i < c->nnodes; i++)
        if (cluster_is_master(c, i) != (i < CLUSTER_MASTERS)) {
            print_file(server_file(&c->node[0], "cluster-create.log"));
            FAIL_AT(__FILE__, __LINE__, "node %d: not the role redis-cli was asked for", i);
        }
    for (int m = 0; m < CLUSTER_MASTERS; m++) ASSERT(cluster_replica_of(c, m) >= CLUSTER_MASTERS);
}

int cluster_add_master(test_cluster *c) {
    ASSERT(c->nnodes < CLUSTER_NODES_MAX);
    int i = c->nnodes, seed = first_running(c);
    nodes_start(c, i, i + 1);
    c->nnodes++;
    char added[32], known[32];
    snprintf(added, sizeof added, "127.0.0.1:%d", c->node[i].port);
    snprintf(known, sizeof known, "127.0.0.1:%d", c->node[seed].port);
    const char *args[] = {"add-node", added, known, NULL};
    cli_run(c, args, "cluster-add-node.log");
    cluster_wait_settled(c); /* (every node knows c->nnodes nodes) */
    ASSERT(cluster_is_master(c, i));
    return i;
}

int cluster_first_slot(const test_cluster *c, int m) {
    static int owner[16384];
    ASSERT(owners(c, first_running(c), owner));
    for (int s = 0; s < 16384; s++)
        if (owner[s] == m) return s;
    return -1;
}

pid_t cluster_reshard_start(test_cluster *c, int from, int to, int nslots) {
    char seed[32], n[16];
    snprintf(seed, sizeof seed, "127.0.0.1:%d", c->node[first_running(c)].port);
    snprintf(n, sizeof n, "%d", nslots);
    const char *args[] = {"reshard", seed, "--cluster-from", c->id[from], "--cluster-to", c->id[to],
                          "--cluster-slots", n, "--cluster-yes", NULL};
    return cli_start(c, args, "cluster-reshard.log", c->cli_log, sizeof c->cli_log);
}

int cluster_reshard_done(test_cluster *c, pid_t pid) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == 0) return 0;
    ASSERT(r == pid);
    cli_exited(pid, status, "reshard", c->cli_log);
    cluster_wait_settled(c);
    return 1;
}

void cluster_reshard(test_cluster *c, int from, int to, int nslots) {
    pid_t pid = cluster_reshard_start(c, from, to, nslots);
    cli_exited(pid, reap(pid, 120000), "reshard", c->cli_log);
    cluster_wait_settled(c);
}

void cluster_shutdown_node(test_cluster *c, int i) {
    pid_t pid = c->node[i].pid;
    ASSERT(pid > 0);
    redisContext *rc = cluster_connect(c, i);
    redisReply *r = redisCommand(rc, "SHUTDOWN SAVE"); /* (no reply: the server is gone) */
    if (r != NULL) FAIL_AT(__FILE__, __LINE__, "node %d: SHUTDOWN SAVE: %s", i, r->str ? r->str : "?");
    redisFree(rc);
    int status = reap(pid, 60000);
    forget_on_abort(pid);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    c->node[i].pid = 0;
}

void cluster_stop(test_cluster *c) {
    for (int i = 0; i < c->nnodes; i++) /* (all told first: they stop side by side) */
        if (c->node[i].pid > 0) kill(c->node[i].pid, SIGTERM);
    for (int i = 0; i < c->nnodes; i++)
        if (c->node[i].dir[0]) server_stop_guarded(&c->node[i]);
}

/* Send a command given as argv to node i; the reply must be +OK. */
static void node_ok(const test_cluster *c, int i, int argc, const char **argv) {
    redisContext *rc = cluster_connect(c, i);
    redisReply *r = redisCommandArgv(rc, argc, argv, NULL);
    ASSERT(r != NULL);
    if (r->type != REDIS_REPLY_STATUS || strcmp(r->str, "OK") != 0)
        FAIL_AT(__FILE__, __LINE__, "node %d: %s %s: %s", i, argv[0], argc > 1 ? argv[1] : "",
                r->str ? r->str : "(not OK)");
    freeReplyObject(r);
    redisFree(rc);
}

static void setslot(const test_cluster *c, int i, int slot, const char *how, int node) {
    char s[16];
    snprintf(s, sizeof s, "%d", slot);
    const char *argv[] = {"CLUSTER", "SETSLOT", s, how, c->id[node]};
    node_ok(c, i, 5, argv);
}

void cluster_migrate_begin(test_cluster *c, int slot, int from, int to) {
    ASSERT(from != to);
    setslot(c, to, slot, "IMPORTING", from);
    setslot(c, from, slot, "MIGRATING", to);
}

long cluster_migrate_keys(test_cluster *c, int slot, int from, int to) {
    long moved = 0;
    int refusals = 0;
    char port[16];
    snprintf(port, sizeof port, "%d", c->node[to].port);
    redisContext *rc = cluster_connect(c, from);
    for (;;) {
        redisReply *keys = server_cmd(rc, "CLUSTER GETKEYSINSLOT %d 100", slot);
        ASSERT(keys->type == REDIS_REPLY_ARRAY);
        if (keys->elements == 0) {
            freeReplyObject(keys);
            break;
        }
        size_t argc = 7 + keys->elements; /* the head, KEYS, the keys */
        const char **argv = calloc(argc, sizeof *argv);
        size_t *len = calloc(argc, sizeof *len);
        ASSERT(argv != NULL && len != NULL);
        const char *head[] = {"MIGRATE", "127.0.0.1", port, "", "0", "5000"};
        for (size_t k = 0; k < 6; k++) argv[k] = head[k], len[k] = strlen(head[k]);
        argv[6] = "KEYS", len[6] = 4;
        argc = 7;
        for (size_t k = 0; k < keys->elements; k++)
            argv[argc] = keys->element[k]->str, len[argc++] = keys->element[k]->len;
        redisReply *r = redisCommandArgv(rc, (int)argc, argv, len);
        ASSERT(r != NULL);
        /* the target (or the source) refusing keys for a while (CLUSTERDOWN,
         * LOADING: see cluster_send): the keys not moved are on the source
         * still, read again once the cluster is settled */
        if (r->type == REDIS_REPLY_ERROR && (strstr(r->str, "CLUSTERDOWN") || strstr(r->str, "LOADING")) &&
            ++refusals <= 5) {
            fprintf(stderr, "slot %d, MIGRATE to node %d: %s; again once the cluster is settled\n", slot, to,
                    r->str);
            freeReplyObject(r);
            free(argv);
            free(len);
            freeReplyObject(keys);
            cluster_wait_settled(c);
            continue;
        }
        if (r->type != REDIS_REPLY_STATUS)
            FAIL_AT(__FILE__, __LINE__, "MIGRATE: %s", r->str ? r->str : "(not OK)");
        moved += (long)keys->elements;
        freeReplyObject(r);
        free(argv);
        free(len);
        freeReplyObject(keys);
    }
    redisFree(rc);
    return moved;
}

void cluster_migrate_end(test_cluster *c, int slot, int from, int to) {
    setslot(c, to, slot, "NODE", to);
    setslot(c, from, slot, "NODE", to);
    for (int i = 0; i < c->nnodes; i++)
        if (i != to && i != from && c->node[i].pid > 0 && cluster_is_master(c, i)) setslot(c, i, slot, "NODE", to);
    double end = mono_ms() + (double)settle_bound_ms(c);
    for (int i = 0; i < c->nnodes; i++) {
        while (c->node[i].pid > 0 && cluster_owner(c, i, slot) != to) {
            if (mono_ms() > end) FAIL_AT(__FILE__, __LINE__, "node %d does not see slot %d on node %d", i, slot, to);
            sleep_ms(20);
        }
    }
}

void cluster_migrate_slot(test_cluster *c, int slot, int from, int to) {
    cluster_migrate_begin(c, slot, from, to);
    cluster_migrate_keys(c, slot, from, to);
    cluster_migrate_end(c, slot, from, to);
}

void cluster_kill_node(test_cluster *c, int i) {
    pid_t pid = c->node[i].pid;
    ASSERT(pid > 0);
    ASSERT(kill(pid, SIGKILL) == 0);
    ASSERT(waitpid(pid, NULL, 0) == pid);
    forget_on_abort(pid);
    c->node[i].pid = 0;
}

int cluster_kill_master(test_cluster *c, int m, double *took_ms) {
    ASSERT(cluster_is_master(c, m));
    int r = cluster_replica_of(c, m);
    ASSERT(r >= 0);
    double t0 = mono_ms();
    cluster_kill_node(c, m);
    double end = t0 + (double)settle_bound_ms(c);
    while (!cluster_is_master(c, r)) {
        if (mono_ms() > end) FAIL_AT(__FILE__, __LINE__, "node %d was not promoted after node %d died", r, m);
        sleep_ms(10);
    }
    if (took_ms) *took_ms = mono_ms() - t0;
    cluster_wait_settled(c);
    return r;
}

void cluster_restart_node(test_cluster *c, int i) {
    const char *argv[24];
    char nt[16];
    ASSERT(c->node[i].pid <= 0);
    node_args(c, argv, nt);
    server_restart(&c->node[i], argv);
    kill_on_abort(c->node[i].pid);
    cluster_wait_settled(c);
}

void cluster_spread_names(const test_cluster *c, const char *prefix, char names[][32], int per) {
    int count[CLUSTER_MASTERS] = {0}, n = 0;
    for (int i = 0; n < per * CLUSTER_MASTERS && i < 10000; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s%d", prefix, i);
        int owner = cluster_owner(c, 0, rjq__key_slot(name, strlen(name)));
        ASSERT(owner >= 0 && owner < CLUSTER_MASTERS);
        if (count[owner] == per) continue;
        /* by master, whatever order the names are found in */
        snprintf(names[owner * per + count[owner]++], 32, "%s", name);
        n++;
    }
    ASSERT_EQ(per * CLUSTER_MASTERS, n);
}
