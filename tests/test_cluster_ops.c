/*
 * Operating rjq on a Redis Cluster (issue 34, "Tools"): the library call
 * behind `rjq cluster` (rjq_client_send_to_masters: each master, its slots and
 * replicas, one command's reply from each; rjq_queue_get_slot), on the test
 * cluster of tests/cluster.c (3 masters, 3 replicas) and on a standalone
 * server.
 *
 * Every wait waits for the event it checks (the callback), bounded so that
 * a broken build fails instead of hanging.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <event2/event.h>
#include <rjq/libevent.h>

#include "cluster.h"
#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "slot.h"
#include "waits.h"

#define MAX_M 8

/* What a rjq_client_send_to_masters callback saw (copied out of it). */
typedef struct seen {
    long calls;
    int status;
    size_t n;
    char address[MAX_M][64];
    int ranges[MAX_M][64];
    size_t nranges[MAX_M];
    char replica[MAX_M][64];
    size_t nreplicas[MAX_M];
    int mstatus[MAX_M];
    char reply[MAX_M][8192];
    int has_reply[MAX_M];
} seen;

static void on_masters(rjq_client *c, int status, const rjq_master *list, size_t n, void *data) {
    seen *s = data;
    (void)c;
    s->calls++;
    s->status = status;
    s->n = n;
    if (status != RJQ_OK) ASSERT(list == NULL && n == 0);
    for (size_t i = 0; i < n && i < MAX_M; i++) {
        const rjq_master *m = rjq_master_get(list, i);
        snprintf(s->address[i], sizeof s->address[i], "%s", m->address);
        ASSERT(m->nranges <= 32);
        ASSERT(m->ranges != NULL && m->replicas != NULL); /* (also when empty) */
        s->nranges[i] = m->nranges;
        for (size_t r = 0; r < 2 * m->nranges; r++) s->ranges[i][r] = m->ranges[r];
        s->nreplicas[i] = m->nreplicas;
        if (m->nreplicas) snprintf(s->replica[i], sizeof s->replica[i], "%s", m->replicas[0]);
        s->mstatus[i] = m->status;
        s->has_reply[i] = m->reply != NULL;
        if (m->reply) {
            ASSERT_EQ(strlen(m->reply), m->len);
            snprintf(s->reply[i], sizeof s->reply[i], "%.*s", (int)m->len, m->reply);
        }
    }
}

static seen asked;

static seen ask(struct event_base *base, rjq_client *c, int argc, const char *const *argv) {
    memset(&asked, 0, sizeof asked);
    ASSERT_OK(rjq_client_send_to_masters(c, argc, argv, NULL, on_masters, &asked));
    ASSERT(loop_until_count(base, &asked.calls, 1, 30000));
    return asked;
}

static int port_of(const char *address) {
    const char *p = strrchr(address, ':');
    return p ? atoi(p + 1) : -1;
}

/* Does master i of s serve slot? */
static int serves(const seen *s, size_t i, int slot) {
    for (size_t r = 0; r < s->nranges[i]; r++)
        if (slot >= s->ranges[i][2 * r] && slot <= s->ranges[i][2 * r + 1]) return 1;
    return 0;
}

/* One client given node 0's URL: the three masters, their slots (every
 * slot once, ranges ascending), their replicas, and each master's own
 * answer (INFO server names its port); errors per master; a queue's slot
 * is CLUSTER KEYSLOT's and its master's range holds it. */
TEST(masters_lists_each_master_its_slots_replicas_and_own_reply) {
    test_cluster cl;
    cluster_start(&cl, 0);
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(cl.url);
    rjq_client *c = client_new(base, &o);

    const char *info[] = {"INFO", "server"};
    static seen s;
    s = ask(base, c, 2, info);
    ASSERT_OK(s.status);
    ASSERT_EQ(CLUSTER_MASTERS, (long)s.n);
    static int covered[RJQ__SLOTS];
    int node_seen[CLUSTER_NODES] = {0};
    for (size_t i = 0; i < s.n; i++) {
        int node = cluster_node_at(&cl, port_of(s.address[i]));
        ASSERT(node >= 0 && node < CLUSTER_NODES);
        ASSERT(cluster_is_master(&cl, node));
        node_seen[node]++;
        ASSERT(s.nranges[i] >= 1);
        for (size_t r = 0; r < s.nranges[i]; r++) {
            int a = s.ranges[i][2 * r], b = s.ranges[i][2 * r + 1];
            ASSERT(a <= b && b < RJQ__SLOTS);
            if (r > 0) ASSERT(a > s.ranges[i][2 * r - 1] + 1); /* apart, ascending */
            for (int k = a; k <= b; k++) {
                covered[k]++;
                ASSERT_EQ(node, cluster_owner(&cl, 0, k));
            }
        }
        ASSERT_EQ(1, (long)s.nreplicas[i]);
        ASSERT_EQ(cluster_replica_of(&cl, node), cluster_node_at(&cl, port_of(s.replica[i])));
        /* the command ran on that master */
        ASSERT_OK(s.mstatus[i]);
        char want[32];
        snprintf(want, sizeof want, "tcp_port:%d", port_of(s.address[i]));
        if (strstr(s.reply[i], want) == NULL)
            FAIL_AT(__FILE__, __LINE__, "master %s answered %s", s.address[i], s.reply[i]);
    }
    for (int k = 0; k < RJQ__SLOTS; k++) ASSERT_EQ(1, covered[k]);
    for (int i = 0; i < CLUSTER_NODES; i++) ASSERT(node_seen[i] <= 1);

    /* each master answers for itself: its own port, its own role */
    const char *port[] = {"CONFIG", "GET", "port"}; /* an array: not text */
    s = ask(base, c, 3, port);
    ASSERT_OK(s.status);
    for (size_t i = 0; i < s.n; i++) {
        ASSERT_EQ(RJQ_EPROTO, s.mstatus[i]);
        ASSERT(!s.has_reply[i]);
    }
    const char *myid[] = {"CLUSTER", "MYID"};
    s = ask(base, c, 2, myid);
    ASSERT_OK(s.status);
    for (size_t i = 0; i < s.n; i++) {
        ASSERT_OK(s.mstatus[i]);
        int node = cluster_node_at(&cl, port_of(s.address[i]));
        if (strcmp(s.reply[i], cl.id[node]) != 0)
            FAIL_AT(__FILE__, __LINE__, "%s answered id %s, its id is %s", s.address[i],
                    s.reply[i], cl.id[node]);
    }
    /* an integer in decimal; an error's words with RJQ_EREDIS */
    const char *dbsize[] = {"DBSIZE"};
    s = ask(base, c, 1, dbsize);
    for (size_t i = 0; i < s.n; i++) {
        ASSERT_OK(s.mstatus[i]);
        ASSERT(s.reply[i][0] >= '0' && s.reply[i][0] <= '9');
    }
    const char *bad[] = {"NOSUCHCOMMAND"};
    s = ask(base, c, 1, bad);
    ASSERT_OK(s.status);
    ASSERT_EQ(CLUSTER_MASTERS, (long)s.n);
    for (size_t i = 0; i < s.n; i++) {
        ASSERT_EQ(RJQ_EREDIS, s.mstatus[i]);
        if (strstr(s.reply[i], "unknown command") == NULL)
            FAIL_AT(__FILE__, __LINE__, "error text: %s", s.reply[i]);
    }

    /* a queue's slot: CLUSTER KEYSLOT's, served by the master that owns it */
    redisContext *rc = cluster_connect(&cl, 0);
    const char *names[] = {"a", "orders", "cq17", "x y"};
    for (size_t k = 0; k < 3; k++) {
        rjq_queue *q = NULL;
        ASSERT_OK(rjq_queue_open(c, names[k], NULL, &q));
        redisReply *r = redisCommand(rc, "CLUSTER KEYSLOT rjq:{%s}:ready", names[k]);
        ASSERT(r && r->type == REDIS_REPLY_INTEGER);
        ASSERT_EQ(r->integer, rjq_queue_get_slot(q));
        freeReplyObject(r);
        int holders = 0;
        for (size_t i = 0; i < s.n; i++) holders += serves(&s, i, rjq_queue_get_slot(q));
        ASSERT_EQ(1, holders);
    }
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_get_slot(NULL));
    redisFree(rc);

    /* arguments */
    ASSERT_EQ(RJQ_EINVAL, rjq_client_send_to_masters(NULL, 1, dbsize, NULL, on_masters, &s));
    ASSERT_EQ(RJQ_EINVAL, rjq_client_send_to_masters(c, 1, dbsize, NULL, NULL, &s));
    ASSERT_EQ(RJQ_EINVAL, rjq_client_send_to_masters(c, 0, dbsize, NULL, on_masters, &s));
    ASSERT_EQ(RJQ_EINVAL, rjq_client_send_to_masters(c, 1, NULL, NULL, on_masters, &s));
    const char *holed[] = {"INFO", NULL};
    ASSERT_EQ(RJQ_EINVAL, rjq_client_send_to_masters(c, 2, holed, NULL, on_masters, &s));
    /* lens: binary-safe arguments of the given lengths */
    const char *echo[] = {"ECHOxx", "a\0b"};
    size_t lens[] = {4, 3};
    memset(&s, 0, sizeof s);
    ASSERT_OK(rjq_client_send_to_masters(c, 2, echo, lens, on_masters, &s));
    ASSERT(loop_until_count(base, &s.calls, 1, 30000));
    for (size_t i = 0; i < s.n; i++) ASSERT_OK(s.mstatus[i]);

    /* the client freed with the call in flight: called once, ECANCELED */
    memset(&s, 0, sizeof s);
    ASSERT_OK(rjq_client_send_to_masters(c, 1, dbsize, NULL, on_masters, &s));
    rjq_client_free(c);
    ASSERT_EQ(1, s.calls);
    ASSERT_EQ(RJQ_ECANCELED, s.status);
    event_base_free(base);
    cluster_stop(&cl);
}

/* The same call on a standalone server: the server alone, no slot ranges
 * (it serves every queue), its reply. */
TEST(masters_on_a_standalone_server_is_the_server_alone) {
    test_env e;
    env_start(&e, "q");
    const char *info[] = {"INFO", "server"};
    static seen s;
    s = ask(e.base, e.c, 2, info);
    ASSERT_OK(s.status);
    ASSERT_EQ(1, (long)s.n);
    ASSERT_EQ(0, (long)s.nranges[0]);
    ASSERT_EQ(0, (long)s.nreplicas[0]);
    ASSERT_EQ(e.s.port, port_of(s.address[0]));
    ASSERT_OK(s.mstatus[0]);
    char want[32];
    snprintf(want, sizeof want, "tcp_port:%d", e.s.port);
    if (strstr(s.reply[0], want) == NULL) FAIL_AT(__FILE__, __LINE__, "reply: %s", s.reply[0]);
    const char *nil[] = {"GET", "no-such-key"};
    s = ask(e.base, e.c, 2, nil);
    ASSERT_OK(s.mstatus[0]);
    ASSERT(!s.has_reply[0]);
    env_stop(&e);
}

/* No server ever answered: cb gets the request's error (the list NULL),
 * once, and nothing is taken for a standalone server. */
TEST(masters_without_a_server_ends_with_the_requests_error) {
    struct event_base *base = event_base_new();
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", free_port());
    rjq_client_options o = client_options(url);
    o.command_timeout_ms = 300;
    o.connect_timeout_ms = 100;
    rjq_client *c = client_new(base, &o);
    const char *ping[] = {"PING"};
    static seen s;
    memset(&s, 0, sizeof s);
    ASSERT_OK(rjq_client_send_to_masters(c, 1, ping, NULL, on_masters, &s));
    ASSERT(loop_until_count(base, &s.calls, 1, 30000));
    if (s.status != RJQ_ETIMEDOUT && s.status != RJQ_ECONN)
        FAIL_AT(__FILE__, __LINE__, "status %s", rjq_strerror(s.status));
    ASSERT_EQ(0, (long)s.n);
    rjq_client_free(c);
    ASSERT_EQ(1, s.calls);
    event_base_free(base);
}

/* ---- the rjq tool on a cluster URL -------------------------------------------- */

#define RJQ_TOOL RJQ_BUILD_DIR "/rjq"

/* Run a shell command line (stdout and stderr into out); its exit code. */
static int run_tool(char *out, size_t cap, const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    char full[4200];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    ASSERT(p != NULL);
    size_t n = 0;
    while (n + 1 < cap) {
        size_t got = fread(out + n, 1, cap - 1 - n, p);
        if (got == 0) break;
        n += got;
    }
    out[n] = '\0';
    char sink[4096];
    while (fread(sink, 1, sizeof sink, p) > 0) {}
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#define TOOL_OK(out, ...)                                                              \
    do {                                                                               \
        int rc_ = run_tool(out, sizeof out, __VA_ARGS__);                              \
        if (rc_ != 0) FAIL_AT(__FILE__, __LINE__, "exit %d: %s", rc_, out);            \
    } while (0)

#define HAS(out, needle)                                                               \
    do {                                                                               \
        if (strstr(out, needle) == NULL)                                               \
            FAIL_AT(__FILE__, __LINE__, "no '%s' in: %s", needle, out);                \
    } while (0)

/* The tool's everyday commands given node 0's URL, on queues of every
 * master: enqueue, stats, jobs, job, pause and resume, metrics, queues,
 * and rjq cluster putting each queue under the master serving it, with
 * every master's share of the work. */
TEST(cli_commands_on_a_cluster_url_reach_every_master) {
    test_cluster cl;
    cluster_start(&cl, 0);
    enum { PER = 2, N = PER * CLUSTER_MASTERS };
    char names[N][32];
    cluster_spread_names(&cl, "tq", names, PER);
    static char out[65536];
    char id[N][64];
    for (int i = 0; i < N; i++) {
        TOOL_OK(out, "%s -u %s enqueue %s payload-%d", RJQ_TOOL, cl.url, names[i], i);
        ASSERT(strlen(out) > 1 && strlen(out) < sizeof id[i]);
        snprintf(id[i], sizeof id[i], "%.*s", (int)strcspn(out, "\n"), out);
        TOOL_OK(out, "%s -u %s stats %s", RJQ_TOOL, cl.url, names[i]);
        HAS(out, "enqueued 1\n");
        HAS(out, "ready 1\n");
        TOOL_OK(out, "%s -u %s jobs %s ready", RJQ_TOOL, cl.url, names[i]);
        HAS(out, id[i]);
        TOOL_OK(out, "%s -u %s job %s %s", RJQ_TOOL, cl.url, names[i], id[i]);
        char want[64];
        snprintf(want, sizeof want, "payload payload-%d\n", i);
        HAS(out, want);
        TOOL_OK(out, "%s -u %s pause %s", RJQ_TOOL, cl.url, names[i]);
        TOOL_OK(out, "%s -u %s stats %s", RJQ_TOOL, cl.url, names[i]);
        HAS(out, "paused 1\n");
        TOOL_OK(out, "%s -u %s resume %s", RJQ_TOOL, cl.url, names[i]);
        TOOL_OK(out, "%s -u %s stats %s", RJQ_TOOL, cl.url, names[i]);
        HAS(out, "paused 0\n");
    }
    /* every queue's key lives on its own master (the tool routed there) */
    for (int i = 0; i < N; i++) {
        int node = cluster_owner(&cl, 0, rjq__key_slot(names[i], strlen(names[i])));
        if (cluster_node_int(&cl, node, "HEXISTS rjq:{%s}:payload %s", names[i], id[i]) != 1)
            FAIL_AT(__FILE__, __LINE__, "job %s not on node %d", id[i], node);
    }
    TOOL_OK(out, "%s -u %s metrics %s %s %s %s %s %s", RJQ_TOOL, cl.url, names[0], names[1],
            names[2], names[3], names[4], names[5]);
    for (int i = 0; i < N; i++) {
        char want[256];
        snprintf(want, sizeof want, "rjq_jobs_total{queue=\"%s\",outcome=\"enqueued\"} 1", names[i]);
        HAS(out, want);
    }
    TOOL_OK(out, "%s -u %s queues", RJQ_TOOL, cl.url);
    for (int i = 0; i < N; i++) HAS(out, names[i]);
    /* rjq cluster: three masters, each with its queues and a share */
    TOOL_OK(out, "%s -u %s cluster --json", RJQ_TOOL, cl.url);
    for (int i = 0; i < N; i++) {
        int node = cluster_owner(&cl, 0, rjq__key_slot(names[i], strlen(names[i])));
        char addr[64], quoted[80];
        snprintf(addr, sizeof addr, "{\"address\":\"127.0.0.1:%d\"", cl.node[node].port);
        snprintf(quoted, sizeof quoted, "\"%s\"", names[i]);
        const char *obj = strstr(out, addr);
        if (obj == NULL) FAIL_AT(__FILE__, __LINE__, "no master %s in %s", addr, out);
        const char *end = strstr(obj + 1, "{\"address\"");
        const char *at = strstr(obj, quoted);
        if (at == NULL || (end && at > end))
            FAIL_AT(__FILE__, __LINE__, "%s not under its master %s: %s", names[i], addr, out);
        HAS(obj, "\"commands\":");
    }
    int masters = 0;
    for (const char *p = strstr(out, "{\"address\""); p; p = strstr(p + 1, "{\"address\"")) masters++;
    ASSERT_EQ(CLUSTER_MASTERS, masters);
    TOOL_OK(out, "%s -u %s cluster --interval 100", RJQ_TOOL, cl.url);
    HAS(out, " slots ");
    HAS(out, " replicas 127.0.0.1:");
    HAS(out, "  work over the interval: ");
    cluster_stop(&cl);
}

/* One `rjq enqueue` on a cluster names its queue in the registry (3
 * queues on the registry key's master, 3 elsewhere): the tool's exit waits
 * for the library's own writes. The registration is not awaited; it was
 * still waiting for a connection's set-up (which loads the function
 * library: flushed before each run here, as on a first run) when the
 * enqueue was answered and the tool exited, and rjq queues, top and serve
 * did not list the queue. */
TEST(cli_enqueue_names_its_queue_in_the_registry_on_a_cluster) {
    static test_cluster cl;
    cluster_start(&cl, 0);
    int registry = cluster_node_of_key(&cl, "rjq:queues");
    ASSERT(registry >= 0);
    char names[6][32];
    int n = 0, on_registry = 0;
    for (int i = 0; n < 6 && i < 10000; i++) { /* 3 on the registry's master, 3 elsewhere */
        char name[32];
        snprintf(name, sizeof name, "rq%d", i);
        int here = cluster_owner(&cl, 0, rjq__key_slot(name, strlen(name))) == registry;
        if (here ? on_registry == 3 : n - on_registry == 3) continue;
        on_registry += here;
        snprintf(names[n++], sizeof names[0], "%s", name);
    }
    ASSERT_EQ(6, n);
    static char out[65536];
    for (int i = 0; i < n; i++) {
        /* each run as the first one: its connections' set-up loads the
         * function library (what kept the registry's connection from
         * being up when the enqueue was answered) */
        for (int m = 0; m < CLUSTER_MASTERS; m++) {
            redisContext *rc = cluster_connect(&cl, m);
            freeReplyObject(redisCommand(rc, "FUNCTION FLUSH"));
            redisFree(rc);
        }
        TOOL_OK(out, "%s -u %s enqueue %s one", RJQ_TOOL, cl.url, names[i]);
    }
    TOOL_OK(out, "%s -u %s queues", RJQ_TOOL, cl.url);
    for (int i = 0; i < n; i++) {
        char want[256];
        snprintf(want, sizeof want, "%s\n", names[i]);
        HAS(out, want);
    }
    cluster_stop(&cl);
}

/* ---- workers in a child process, the tool's long-running commands ---------------- */

static void on_worker_job(rjq_job *job, void *data) {
    size_t len;
    const void *p = rjq_job_get_payload(job, &len);
    (void)data;
    rjq_job_complete(job, p, len, NULL, NULL); /* the result is the payload */
}

/* A child process with its own loop and client on url (prefix "t"),
 * workers on the queues named, until it is killed. */
static pid_t spawn_workers(const char *url, char names[][32], int n) {
    pid_t pid = fork_child();
    if (pid != 0) return pid;
    for (int fd = 3; fd < 1024; fd++) close(fd);
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(url);
    rjq_client *c = client_new(base, &o);
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 4;
    for (int i = 0; i < n; i++) {
        rjq_queue *q = NULL;
        rjq_worker *w = NULL;
        ASSERT_OK(rjq_queue_open(c, names[i], NULL, &q));
        ASSERT_OK(rjq_worker_start(q, &wo, on_worker_job, NULL, &w));
    }
    event_base_dispatch(base);
    _exit(3);
}

/* Start the rjq tool with these arguments (NULL-ended), stdout and stderr
 * into log; its pid. */
static pid_t spawn_tool(const char *log, const char *const *args) {
    pid_t pid = fork_child();
    if (pid != 0) return pid;
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) _exit(98);
    dup2(fd, 1);
    dup2(fd, 2);
    for (int k = 3; k < 1024; k++) close(k);
    execv(RJQ_TOOL, (char *const *)args);
    _exit(97);
}

typedef struct awaited {
    long done, ok;
    char result[64];
} awaited;

static void on_awaited(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    awaited *a = data;
    (void)c;
    a->done++;
    if (status == RJQ_OK) {
        a->ok++;
        snprintf(a->result, sizeof a->result, "%.*s", (int)o->result_len, (const char *)o->result);
    }
}

/* rjq serve given a cluster URL: the API's enqueue-and-wait answers with
 * each job's result for queues on every master (run by workers of another
 * process), and the dashboard's data endpoints (the queues with their
 * stats, one queue, a job) read each queue from its master. */
TEST(serve_on_a_cluster_url_enqueue_and_wait_and_dashboard_data) {
    static test_cluster cl;
    cluster_start(&cl, 0);
    char names[CLUSTER_MASTERS][32];
    cluster_spread_names(&cl, "tq", names, 1);
    pid_t workers = spawn_workers(cl.url, names, CLUSTER_MASTERS);
    int port = free_port();
    char listen[64], log[256];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    snprintf(log, sizeof log, "%s/serve.log", cl.node[0].dir);
    const char *args[] = {"rjq", "-u", cl.url, "--prefix", "t", "serve", "--listen", listen,
                          "--queues", "tq*", NULL};
    pid_t serve = spawn_tool(log, args);
    static char out[65536];
    double end = wait_deadline(30000);
    while (run_tool(out, sizeof out, "curl -s http://%s/healthz", listen) != 0 ||
           strstr(out, "ok") == NULL) {
        if (mono_ms() > end) FAIL_AT(__FILE__, __LINE__, "rjq serve did not come up: %s", out);
        sleep_ms(20); /* (the server's start, in another process) */
    }
    char id[CLUSTER_MASTERS][64];
    for (int i = 0; i < CLUSTER_MASTERS; i++) {
        TOOL_OK(out, "curl -s -D - -X POST --data result-%d 'http://%s/v1/queues/%s/jobs?wait=20000'",
                i, listen, names[i]);
        HAS(out, "HTTP/1.1 200");
        char want[32];
        snprintf(want, sizeof want, "\r\n\r\nresult-%d", i);
        HAS(out, want);
        const char *h = strstr(out, "X-Job-Id: ");
        if (h == NULL) h = strstr(out, "x-job-id: ");
        ASSERT(h != NULL);
        snprintf(id[i], sizeof id[i], "%.*s", (int)strcspn(h + 10, "\r\n"), h + 10);
    }
    TOOL_OK(out, "curl -s http://%s/v1/queues", listen);
    for (int i = 0; i < CLUSTER_MASTERS; i++) {
        char want[128];
        snprintf(want, sizeof want, "\"%s\"", names[i]);
        HAS(out, want);
    }
    for (int i = 0; i < CLUSTER_MASTERS; i++) {
        TOOL_OK(out, "curl -s -w ' %%{http_code}' http://%s/v1/queues/%s", listen, names[i]);
        HAS(out, "\"completed\":1");
        HAS(out, " 200");
        TOOL_OK(out, "curl -s -w ' %%{http_code}' http://%s/v1/queues/%s/jobs/%s", listen, names[i],
                id[i]);
        HAS(out, "\"state\":\"completed\"");
        HAS(out, " 200");
    }
    ASSERT(kill(serve, SIGTERM) == 0);
    int st = reap(serve, 20000);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        run_tool(out, sizeof out, "cat %s", log);
        FAIL_AT(__FILE__, __LINE__, "rjq serve ended with 0x%x: %s", st, out);
    }
    ASSERT(kill(workers, SIGKILL) == 0);
    reap(workers, 5000);
    cluster_stop(&cl);
}

/* Send one ACL line (as rjq acl prints it, with pw for CHANGE-ME) to every
 * node: ACLs are per node. */
static void acl_everywhere(test_cluster *cl, const char *line, const char *pw) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", line);
    const char *argv[256];
    size_t lens[256];
    char pass[64];
    snprintf(pass, sizeof pass, ">%s", pw);
    int argc = 0;
    for (char *t = strtok(buf, " \n"); t && argc < 256; t = strtok(NULL, " \n")) {
        argv[argc] = strcmp(t, ">CHANGE-ME") == 0 ? pass : t;
        lens[argc] = strlen(argv[argc]);
        argc++;
    }
    for (int i = 0; i < CLUSTER_NODES; i++) {
        redisContext *rc = cluster_connect(cl, i);
        redisReply *r = redisCommandArgv(rc, argc, argv, lens);
        if (r == NULL || r->type != REDIS_REPLY_STATUS)
            FAIL_AT(__FILE__, __LINE__, "node %d: ACL SETUSER: %s", i,
                    r && r->str ? r->str : "no reply");
        freeReplyObject(r);
        redisFree(rc);
    }
}

/* rjq acl's worker role on a cluster: a user made on every node from the
 * printed line runs a worker on a queue of every master (each awaited job
 * completed); and rjq scheduler given the cluster URL enqueues a schedule's
 * fires on a queue of a master other than the URL's, and stops on SIGTERM. */
TEST(acl_worker_role_and_scheduler_on_a_cluster) {
    static test_cluster cl;
    cluster_start(&cl, 0);
    char names[CLUSTER_MASTERS][32];
    cluster_spread_names(&cl, "tq", names, 1);
    static char out[65536];
    TOOL_OK(out, "%s --prefix t acl --role worker --queues 'tq*'", RJQ_TOOL);
    const char *line = strstr(out, "ACL SETUSER rjq-worker ");
    ASSERT(line != NULL);
    char one[4096];
    snprintf(one, sizeof one, "%.*s", (int)strcspn(line, "\n"), line);
    acl_everywhere(&cl, one, "w-pass");
    char url[128];
    snprintf(url, sizeof url, "redis://rjq-worker:w-pass@127.0.0.1:%d", cl.node[0].port);
    pid_t workers = spawn_workers(url, names, CLUSTER_MASTERS);

    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(cl.url);
    rjq_client *c = client_new(base, &o);
    awaited a[CLUSTER_MASTERS];
    memset(a, 0, sizeof a);
    rjq_queue *q[CLUSTER_MASTERS];
    for (int i = 0; i < CLUSTER_MASTERS; i++) {
        ASSERT_OK(rjq_queue_open(c, names[i], NULL, &q[i]));
        char payload[32];
        snprintf(payload, sizeof payload, "by-role-%d", i);
        ASSERT_OK(rjq_enqueue_await(q[i], payload, strlen(payload), NULL, NULL, on_awaited, &a[i],
                                    NULL));
    }
    for (int i = 0; i < CLUSTER_MASTERS; i++) {
        ASSERT(loop_until_count(base, &a[i].done, 1, 60000));
        ASSERT_EQ(1, a[i].ok);
        char want[32];
        snprintf(want, sizeof want, "by-role-%d", i);
        ASSERT_STREQ(want, a[i].result);
    }
    ASSERT(kill(workers, SIGKILL) == 0);
    reap(workers, 5000);

    /* the scheduler, on a queue the URL's node does not serve */
    int k = 0;
    while (k < CLUSTER_MASTERS &&
           cluster_owner(&cl, 0, rjq__key_slot(names[k], strlen(names[k]))) == 0)
        k++;
    ASSERT(k < CLUSTER_MASTERS);
    TOOL_OK(out, "%s -u %s --prefix t schedule %s tick --every 200", RJQ_TOOL, cl.url, names[k]);
    char log[256];
    snprintf(log, sizeof log, "%s/scheduler.log", cl.node[0].dir);
    const char *args[] = {"rjq", "-u", cl.url, "--prefix", "t", "scheduler", names[k], NULL};
    pid_t sched = spawn_tool(log, args);
    long long before = get_stats(base, q[k]).enqueued;
    double end = wait_deadline(30000);
    while (get_stats(base, q[k]).enqueued < before + 3)
        if (!wait_poll(base, end, 50)) FAIL_AT(__FILE__, __LINE__, "the scheduler enqueued nothing");
    ASSERT(kill(sched, SIGTERM) == 0);
    int st = reap(sched, 20000);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        run_tool(out, sizeof out, "cat %s", log);
        FAIL_AT(__FILE__, __LINE__, "rjq scheduler ended with 0x%x: %s", st, out);
    }
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}

/* rjq top given a cluster URL (driven in a private tmux server, as
 * tests/tool_top.sh does): the queues of every master with their numbers,
 * which follow enqueues on a master other than the URL's. */
TEST(top_on_a_cluster_url_shows_the_queues_of_every_master) {
    static test_cluster cl;
    cluster_start(&cl, 0);
    char names[CLUSTER_MASTERS][32];
    cluster_spread_names(&cl, "tq", names, 1);
    static char out[65536];
    for (int i = 0; i < CLUSTER_MASTERS; i++)
        for (int k = 0; k <= i; k++) TOOL_OK(out, "%s -u %s enqueue %s p%d", RJQ_TOOL, cl.url, names[i], k);
    char sock[256];
    snprintf(sock, sizeof sock, "%s/tmux.sock", cl.node[0].dir);
    TOOL_OK(out, "tmux -S %s new-session -d -s top -x 150 -y 24 '%s -u %s top --interval 300'", sock,
            RJQ_TOOL, cl.url);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < CLUSTER_MASTERS; i++) {
            char want[64];
            int ready = round == 0 ? i + 1 : i + 1 + (i == 1 ? 5 : 0);
            snprintf(want, sizeof want, "%s +%d +0 ", names[i], ready);
            double end = wait_deadline(20000);
            for (;;) { /* the screen, until the row shows (it refreshes every 300 ms) */
                run_tool(out, sizeof out, "tmux -S %s capture-pane -p -t top | grep -E '^%s'", sock,
                         want);
                if (strncmp(out, names[i], strlen(names[i])) == 0) break;
                if (mono_ms() > end) {
                    run_tool(out, sizeof out, "tmux -S %s capture-pane -p -t top", sock);
                    FAIL_AT(__FILE__, __LINE__, "no row /%s/ on the screen:\n%s", want, out);
                }
                sleep_ms(50);
            }
        }
        if (round == 0) /* more jobs on the second queue's master */
            for (int k = 0; k < 5; k++)
                TOOL_OK(out, "%s -u %s enqueue %s more%d", RJQ_TOOL, cl.url, names[1], k);
    }
    run_tool(out, sizeof out, "tmux -S %s capture-pane -p -t top", sock);
    HAS(out, "3 queues");
    run_tool(out, sizeof out, "tmux -S %s kill-server", sock);
    cluster_stop(&cl);
}
