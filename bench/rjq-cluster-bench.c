/*
 * rjq-cluster-bench: what a Redis Cluster costs rjq (issue 34, bench/cluster.sh).
 *
 *   rjq-cluster-bench drain | awaited | idle
 *
 * One process, one client, the URL of $REDIS_URL (a cluster node or a
 * standalone server: the same program). Redis' side is read per master
 * through the library's own rjq_client_send_to_masters() (INFO cpu, INFO
 * commandstats, INFO stats) before and after the measured phase, so the
 * numbers are summed over every master the cluster has.
 *
 * drain:   QUEUES (30) queues, N (60000) jobs spread evenly, enqueued in
 *          batches of 1000, then one worker per queue (CONC, 8) completes
 *          them all. Measured: both phases.
 * awaited: the same queues, workers running, WINDOW (200) rjq_enqueue_await
 *          in flight round-robin over the queues until N (20000) are
 *          answered. RATE (0: as fast as answers come) paces the awaits at
 *          RATE a second (a 1 ms tick sends the ones due, within WINDOW):
 *          the same offered load on a standalone server and a cluster.
 * idle:    QUEUES (1000) queues with a worker each (concurrency 1, nothing
 *          to do), SETTLE (5) s to settle, then commands over IDLE_SECS (30).
 * flow:    the drain at a fixed offered load (issue 35): QUEUES (1) queues,
 *          workers running (CONC, 8), N (30000) plain jobs enqueued with
 *          rjq_enqueue_batch at RATE a second (a 1 ms tick sends the jobs due
 *          as one batch, at most 1000; RATE 0: as fast as the workers take
 *          them), at most BACKLOG (20000) enqueued and not yet completed;
 *          measured until the last is completed. The same jobs as the drain
 *          (one enqueue call for many jobs, claims and completions of
 *          several), spread over time instead of a backlog.
 *
 * Prints one JSON line: the case, masters, jobs, seconds, Redis CPU summed
 * (s) and per job (us), commands per job, each master's share of the
 * commands and of the CPU (and for idle: commands per second in all).
 * Queue names "cb<i>", key prefix $PREFIX (rjqcb): their keys are left
 * behind (use a scratch server).
 *
 * CG_HOOK (bench/cluster.sh VALGRIND=1): a command run with "zero" right
 * after the first snapshot and with "dump" right before the second, so a
 * redis-server under callgrind counts the measured phase only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <event2/event.h>
#include <rjq/libevent.h>

#include "rjq.h"

#define MASTERS_MAX 64

static long env_long(const char *name, long def) {
    const char *s = getenv(name);
    return s && *s ? atol(s) : def;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, int rc) {
    fprintf(stderr, "rjq-cluster-bench: %s: %s\n", what, rjq_strerror(rc));
    exit(1);
}

static struct event_base *base;
static rjq_client *cl;

/* ---- per master snapshots ------------------------------------------------------ */

typedef struct snap {
    size_t n;
    char addr[MASTERS_MAX][64];
    double cpu[MASTERS_MAX];
    double cpu_sys[MASTERS_MAX]; /* used_cpu_sys: the kernel's share */
    long long cmds[MASTERS_MAX]; /* total_commands_processed */
    char cmd[64][32];             /* INFO commandstats: calls per command, summed */
    long long calls[64];
    size_t ncmd;
    long long bus_pub[MASTERS_MAX]; /* CLUSTER INFO: publish messages received on the bus */
    double self_cpu;              /* this process's CPU (the client side), s */
    int done;
} snap;

static double field(const char *text, const char *name) {
    const char *p = strstr(text, name);
    return p ? atof(p + strlen(name)) : -1;
}

static void on_info(rjq_client *c, int status, const rjq_master *list, size_t n, void *data) {
    snap *s = data;
    (void)c;
    if (status != RJQ_OK) die("INFO on the masters", status);
    s->n = n < MASTERS_MAX ? n : MASTERS_MAX;
    for (size_t i = 0; i < s->n; i++) {
        const rjq_master *m = rjq_master_get(list, i);
        if (m->status != RJQ_OK || m->reply == NULL) die(m->address, m->status);
        const char *t = m->reply;
        snprintf(s->addr[i], sizeof s->addr[i], "%s", m->address);
        s->cpu[i] = field(t, "used_cpu_sys:") + field(t, "used_cpu_user:");
        s->cpu_sys[i] = field(t, "used_cpu_sys:");
        s->cmds[i] = (long long)field(t, "total_commands_processed:");
        for (const char *p = strstr(t, "cmdstat_"); p; p = strstr(p + 1, "cmdstat_")) {
            char name[32];
            size_t len = strcspn(p + 8, ":");
            if (len >= sizeof name) continue;
            snprintf(name, sizeof name, "%.*s", (int)len, p + 8);
            size_t k = 0;
            while (k < s->ncmd && strcmp(s->cmd[k], name) != 0) k++;
            if (k == s->ncmd) {
                if (k == 64) continue;
                snprintf(s->cmd[s->ncmd++], sizeof s->cmd[0], "%s", name);
            }
            s->calls[k] += (long long)field(p, "calls=");
        }
    }
    s->done++;
}

static void on_cluster_info(rjq_client *c, int status, const rjq_master *list, size_t n,
                            void *data) {
    snap *s = data;
    (void)c;
    for (size_t i = 0; status == RJQ_OK && i < n && i < s->n; i++) {
        const rjq_master *m = rjq_master_get(list, i);
        if (m->status == RJQ_OK && m->reply) /* (a standalone server: an error) */
            s->bus_pub[i] = (long long)field(m->reply, "cluster_stats_messages_publish_received:");
    }
    s->done++;
}

static void take_snap(snap *s) {
    /* (INFO with several sections: Redis 7) */
    const char *argv[] = {"INFO", "cpu", "stats", "commandstats"};
    const char *ci[] = {"CLUSTER", "INFO"};
    memset(s, 0, sizeof *s);
    int rc = rjq_client_send_to_masters(cl, 4, argv, NULL, on_info, s);
    if (rc != RJQ_OK) die("rjq_client_send_to_masters", rc);
    while (s->done < 1) event_base_loop(base, EVLOOP_ONCE);
    if ((rc = rjq_client_send_to_masters(cl, 2, ci, NULL, on_cluster_info, s)) != RJQ_OK)
        die("rjq_client_send_to_masters", rc);
    while (s->done < 2) event_base_loop(base, EVLOOP_ONCE);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    s->self_cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                  (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void cg_hook(const char *what) {
    const char *hook = getenv("CG_HOOK");
    char cmd[1024];
    if (hook == NULL || *hook == '\0') return;
    snprintf(cmd, sizeof cmd, "%s %s", hook, what);
    if (system(cmd) != 0) fprintf(stderr, "rjq-cluster-bench: %s failed\n", cmd);
}

static void report(const char *mode, long jobs, double secs, const snap *a, const snap *b) {
    double cpu = 0, sys = 0;
    long long cmds = 0, bus = 0;
    for (size_t i = 0; i < b->n; i++) {
        cpu += b->cpu[i] - a->cpu[i];
        sys += b->cpu_sys[i] - a->cpu_sys[i];
        cmds += b->cmds[i] - a->cmds[i];
        bus += b->bus_pub[i] - a->bus_pub[i];
    }
    printf("{\"case\":\"%s\",\"masters\":%zu,\"jobs\":%ld,\"secs\":%.2f,\"redis_cpu_s\":%.3f,", mode,
           b->n, jobs, secs, cpu);
    if (jobs > 0) {
        printf("\"jobs_per_s\":%.0f,\"redis_cpu_us_per_job\":%.2f,\"redis_sys_us_per_job\":%.2f,"
               "\"commands_per_job\":%.3f,"
               "\"bus_publish_per_job\":%.3f,\"client_cpu_us_per_job\":%.2f,",
               (double)jobs / secs, cpu * 1e6 / (double)jobs, sys * 1e6 / (double)jobs,
               (double)cmds / (double)jobs,
               (double)bus / (double)jobs, (b->self_cpu - a->self_cpu) * 1e6 / (double)jobs);
    /* the commands by calls in the phase (summed over the masters) */
    printf("\"calls\":{");
    for (size_t k = 0, first = 1; k < b->ncmd; k++) {
        long long before = 0;
        for (size_t j = 0; j < a->ncmd; j++)
            if (strcmp(a->cmd[j], b->cmd[k]) == 0) before = a->calls[j];
        if (b->calls[k] - before <= 0) continue;
        printf("%s\"%s\":%lld", first ? "" : ",", b->cmd[k], b->calls[k] - before);
        first = 0;
    }
        printf("},");
    } else {
        printf("\"commands_per_s\":%.1f,", (double)cmds / secs);
    }
    printf("\"commands\":%lld,\"per_master\":[", cmds);
    for (size_t i = 0; i < b->n; i++)
        printf("%s{\"address\":\"%s\",\"commands_share\":%.3f,\"cpu_share\":%.3f,"
               "\"cpu_us_per_job\":%.2f,\"sys_us_per_job\":%.2f}", i ? "," : "",
               b->addr[i], cmds ? (double)(b->cmds[i] - a->cmds[i]) / (double)cmds : 0,
               cpu > 0 ? (b->cpu[i] - a->cpu[i]) / cpu : 0,
               jobs > 0 ? (b->cpu[i] - a->cpu[i]) * 1e6 / (double)jobs : 0,
               jobs > 0 ? (b->cpu_sys[i] - a->cpu_sys[i]) * 1e6 / (double)jobs : 0);
    printf("]}\n");
    fflush(stdout);
}

/* ---- queues, workers ----------------------------------------------------------- */

static rjq_queue **qs;
static long nq;
static long completed, enq_ok, enq_bad, awaited_ok, awaited_bad;

static void on_tick(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what, (void)arg; /* (it only wakes the loop) */
}

static void on_job(rjq_job *job, void *data) {
    (void)data;
    int rc = rjq_job_complete(job, "", 0, NULL, NULL);
    if (rc != RJQ_OK) die("rjq_job_complete", rc);
    completed++;
}

/* The masters' slot ranges (for EVEN=1). */
typedef struct ranges {
    size_t n;
    int *r[MASTERS_MAX];
    size_t nr[MASTERS_MAX];
    int done;
} ranges;

static void on_ranges(rjq_client *c, int status, const rjq_master *list, size_t n, void *data) {
    ranges *g = data;
    (void)c;
    if (status != RJQ_OK) die("masters", status);
    g->n = n < MASTERS_MAX ? n : MASTERS_MAX;
    for (size_t i = 0; i < g->n; i++) {
        const rjq_master *m = rjq_master_get(list, i);
        g->nr[i] = m->nranges;
        g->r[i] = malloc((2 * m->nranges + 1) * sizeof(int));
        memcpy(g->r[i], m->ranges, 2 * m->nranges * sizeof(int));
    }
    g->done = 1;
}

static size_t master_of(const ranges *g, int slot) {
    for (size_t i = 0; i < g->n; i++)
        for (size_t k = 0; k < g->nr[i]; k++)
            if (slot >= g->r[i][2 * k] && slot <= g->r[i][2 * k + 1]) return i;
    return 0; /* (a standalone server: no ranges) */
}

static long declared, declare_bad;

static void on_declared(rjq_client *c, int status, long long n, void *data) {
    (void)n, (void)data;
    if (status != RJQ_OK && declare_bad++ == 0)
        fprintf(stderr, "rjq-cluster-bench: rjq_queue_shard: %s (%s)\n", rjq_strerror(status),
                rjq_client_get_errmsg(c));
    declared++;
}

static void declare_shards(int n) {
    for (long i = 0; i < nq; i++) {
        int rc = rjq_queue_shard(qs[i], n, on_declared, NULL);
        if (rc != RJQ_OK) die("rjq_queue_shard", rc);
    }
    while (declared < nq) event_base_loop(base, EVLOOP_ONCE);
    if (declare_bad) die("declaring shards", RJQ_EREDIS);
}

/* Queues "cb<i>"; EVEN=1: only names that put as many queues on each
 * master (rjq_queue_get_slot against each master's ranges). */
static void open_queues(long n) {
    ranges g = {0};
    int even = (int)env_long("EVEN", 0);
    if (even) {
        const char *ping[] = {"PING"};
        int rc = rjq_client_send_to_masters(cl, 1, ping, NULL, on_ranges, &g);
        if (rc != RJQ_OK) die("rjq_client_send_to_masters", rc);
        while (!g.done) event_base_loop(base, EVLOOP_ONCE);
    }
    long per[MASTERS_MAX] = {0};
    nq = n;
    qs = calloc((size_t)n, sizeof *qs);
    for (long i = 0, k = 0; k < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "cb%ld", i);
        int rc = rjq_queue_open(cl, name, NULL, &qs[k]);
        if (rc != RJQ_OK) die("rjq_queue_open", rc);
        if (even && g.n > 1) {
            size_t m = master_of(&g, rjq_queue_get_slot(qs[k]));
            if (per[m] >= (n + (long)g.n - 1) / (long)g.n) {
                rjq_queue_close(qs[k]);
                continue;
            }
            per[m]++;
        }
        k++;
    }
    for (size_t i = 0; i < g.n; i++) free(g.r[i]);
    /* SHARDS=N (> 1): each queue declared with N shards (rjq_queue_shard:
     * on a cluster shard i is placed on master i mod M); the handle is then
     * the sharded queue's, which every call below spans */
    long shards = env_long("SHARDS", 0);
    if (shards > 1) declare_shards((int)shards);
}

static void start_workers(int conc) {
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = conc;
    for (long i = 0; i < nq; i++) {
        rjq_worker *w;
        int rc = rjq_worker_start(qs[i], &wo, on_job, NULL, &w);
        if (rc != RJQ_OK) die("rjq_worker_start", rc);
    }
}

static void on_batch(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs, (void)data;
    if (status == RJQ_OK) enq_ok += (long)n;
    else enq_bad++;
}

static void on_awaited(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)o, (void)data;
    if (status == RJQ_OK) {
        awaited_ok++;
    } else if (awaited_bad++ == 0) {
        fprintf(stderr, "rjq-cluster-bench: an await: %s (%s)\n", rjq_strerror(status),
                rjq_client_get_errmsg(c));
    }
}

/* ---- place: which shard an anonymous job goes to (issue 35) -------------------- */

/* POLICY=rr: rjq_enqueue on the sharded handle (the library's round robin);
 * POLICY=least: the shard with the fewest of this client's enqueues awaiting
 * their reply (what a client knows without asking: a slow master answers
 * late, so its count grows), ties in turn; the bench picks it and enqueues
 * on that shard's handle (rjq_queue_get_shard). */
static long inflight[RJQ_SHARDS_MAX], placed[RJQ_SHARDS_MAX];
static int nshards;

static void on_placed(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs;
    inflight[(long)(intptr_t)data]--;
    if (status == RJQ_OK) enq_ok += (long)n;
    else enq_bad++;
}

static int pick_least(void) {
    static unsigned turn;
    int best = -1;
    for (int k = 0; k < nshards; k++) {
        int i = (int)((turn + (unsigned)k) % (unsigned)nshards);
        if (best < 0 || inflight[i] < inflight[best]) best = i;
    }
    turn++;
    return best;
}

static rjq_stats depth[RJQ_SHARDS_MAX];
static int depth_waiting;

static void on_depth(rjq_client *c, int status, const rjq_stats *st, void *data) {
    (void)c;
    if (status != RJQ_OK) die("rjq_queue_get_stats", status);
    depth[(long)(intptr_t)data] = *st;
    depth_waiting--;
}

/* each shard's ready jobs now; returns max - min */
static long long depth_spread(void) {
    depth_waiting = nshards;
    for (int i = 0; i < nshards; i++) {
        int rc = rjq_queue_get_stats(rjq_queue_get_shard(qs[0], i), on_depth, (void *)(intptr_t)i);
        if (rc != RJQ_OK) die("rjq_queue_get_stats", rc);
    }
    while (depth_waiting > 0) event_base_loop(base, EVLOOP_ONCE);
    long long lo = depth[0].ready, hi = depth[0].ready;
    for (int i = 1; i < nshards; i++) {
        if (depth[i].ready < lo) lo = depth[i].ready;
        if (depth[i].ready > hi) hi = depth[i].ready;
    }
    return hi - lo;
}

static void place(void) {
    long n = env_long("N", 30000), window = env_long("WINDOW", 500);
    const char *policy = getenv("POLICY") ? getenv("POLICY") : "rr";
    int least = strcmp(policy, "least") == 0;
    if (!least && strcmp(policy, "rr") != 0) die("POLICY: rr or least", RJQ_EINVAL);
    if (env_long("SHARDS", 0) < 2) die("place needs SHARDS=N (2 or more)", RJQ_EINVAL);
    open_queues(1);
    nshards = rjq_queue_count_shards(qs[0]);
    start_workers((int)env_long("CONC", 8));
    static char payload[] = "payload-of-a-bench-job";
    long long spread_max = 0, spread_sum = 0;
    int samples = 0;
    snap a, b;
    take_snap(&a);
    double t0 = now_s();
    long sent = 0;
    while (sent < n) {
        while (sent < n && sent - enq_ok - enq_bad < window) {
            int rc, i = least ? pick_least() : -1;
            if (least) {
                rc = rjq_enqueue(rjq_queue_get_shard(qs[0], i), payload, sizeof payload - 1, NULL,
                                 on_placed, (void *)(intptr_t)i);
                inflight[i]++, placed[i]++;
            } else {
                rc = rjq_enqueue(qs[0], payload, sizeof payload - 1, NULL, on_batch, NULL);
            }
            if (rc != RJQ_OK) die("rjq_enqueue", rc);
            /* (a tenth of the jobs sent: each shard's depth) */
            if (++sent % (n / 10 ? n / 10 : 1) == 0) {
                long long sp = depth_spread();
                spread_sum += sp, samples++;
                if (sp > spread_max) spread_max = sp;
            }
        }
        event_base_loop(base, EVLOOP_ONCE);
    }
    while (enq_ok + enq_bad < n) event_base_loop(base, EVLOOP_ONCE);
    double t_enq = now_s() - t0;
    if (enq_bad) die("enqueue", RJQ_EREDIS);
    long long spread_end = depth_spread();
    long long ready_end[RJQ_SHARDS_MAX];
    for (int i = 0; i < nshards; i++) ready_end[i] = depth[i].ready;
    while (completed < n) event_base_loop(base, EVLOOP_ONCE);
    double secs = now_s() - t0;
    take_snap(&b);
    printf("{\"case\":\"place\",\"policy\":\"%s\",\"shards\":%d,\"jobs\":%ld,\"window\":%ld,"
           "\"secs\":%.2f,\"jobs_per_s\":%.0f,\"enqueue_secs\":%.2f,\"enqueued_per_s\":%.0f,"
           "\"depth_spread_max\":%lld,\"depth_spread_mean\":%.0f,\"depth_spread_end\":%lld,"
           "\"ready_at_end_of_enqueue\":[",
           policy, nshards, n, window, secs, (double)n / secs, t_enq, (double)n / t_enq, spread_max,
           samples ? (double)spread_sum / samples : 0.0, spread_end);
    for (int i = 0; i < nshards; i++) printf("%s%lld", i ? "," : "", ready_end[i]);
    printf("],\"placed\":[");
    for (int i = 0; i < nshards; i++) printf("%s%ld", i ? "," : "", least ? placed[i] : -1L);
    double cpu = 0;
    for (size_t i = 0; i < b.n; i++) cpu += b.cpu[i] - a.cpu[i];
    printf("],\"redis_cpu_us_per_job\":%.2f,\"per_master_cpu_share\":[", cpu * 1e6 / (double)n);
    for (size_t i = 0; i < b.n; i++)
        printf("%s%.3f", i ? "," : "", cpu > 0 ? (b.cpu[i] - a.cpu[i]) / cpu : 0);
    printf("]}\n");
    fflush(stdout);
}

/* ---- flow: the drain at a fixed offered load (issue 35) ----------------------- */

static void flow(void) {
    long n = env_long("N", 30000), backlog = env_long("BACKLOG", 20000);
    double rate = (double)env_long("RATE", 0);
    int rc;
    open_queues(env_long("QUEUES", 1));
    start_workers((int)env_long("CONC", 8));
    static char payload[] = "payload-of-a-bench-job";
    static rjq_enqueue_item items[1000];
    for (int i = 0; i < 1000; i++)
        items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), payload, sizeof payload - 1, NULL};
    /* warm: a batch per queue run through (links, subscriptions, scripts) */
    for (long i = 0; i < nq; i++)
        if ((rc = rjq_enqueue_batch(qs[i], items, 10, on_batch, NULL)) != RJQ_OK)
            die("rjq_enqueue_batch", rc);
    while (completed < 10 * nq && !enq_bad) event_base_loop(base, EVLOOP_ONCE);
    if (enq_bad) die("enqueue", RJQ_EREDIS);
    completed = enq_ok = 0;
    snap a, b;
    take_snap(&a);
    cg_hook("zero");
    struct event *tick = NULL;
    if (rate > 0) {
        struct timeval ms = {0, 1000};
        tick = event_new(base, -1, EV_PERSIST, on_tick, NULL);
        if (tick == NULL || event_add(tick, &ms) != 0) die("the pacing tick", RJQ_ENOMEM);
    }
    double t0 = now_s();
    long sent = 0, late = 0, qi = 0;
    while (completed < n) {
        long due = rate > 0 ? (long)((now_s() - t0) * rate) + 1 : n;
        if (due > n) due = n;
        if (rate > 0 && sent < due && sent - completed >= backlog) late++;
        while (sent < due && sent - completed < backlog) {
            long m = due - sent;
            if (m > 1000) m = 1000;
            if (m > backlog - (sent - completed)) m = backlog - (sent - completed);
            if ((rc = rjq_enqueue_batch(qs[qi++ % nq], items, (size_t)m, on_batch, NULL)) != RJQ_OK)
                die("rjq_enqueue_batch", rc);
            sent += m;
        }
        if (enq_bad) die("enqueue", RJQ_EREDIS);
        event_base_loop(base, EVLOOP_ONCE);
    }
    double secs = now_s() - t0;
    cg_hook("dump");
    if (tick) event_free(tick);
    if (late)
        fprintf(stderr, "rjq-cluster-bench: RATE %.0f/s not kept: the backlog (%ld) was full %ld times\n",
                rate, backlog, late);
    take_snap(&b);
    report("flow", n, secs, &a, &b);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "drain";
    const char *url = getenv("REDIS_URL");
    base = event_base_new();
    rjq_client_options o = RJQ_CLIENT_OPTIONS_INIT;
    o.url = url ? url : "redis://127.0.0.1:6379";
    o.prefix = getenv("PREFIX") ? getenv("PREFIX") : "rjqcb";
    /* (CMD_TIMEOUT_MS: Redis under callgrind answers slowly) */
    if (env_long("CMD_TIMEOUT_MS", 0) > 0) o.command_timeout_ms = env_long("CMD_TIMEOUT_MS", 0);
    int rc = rjq_libevent_client_new(&cl, base, &o);
    if (rc != RJQ_OK) die("client", rc);
    snap a, b;
    if (strcmp(mode, "drain") == 0) {
        long n = env_long("N", 60000);
        open_queues(env_long("QUEUES", 30));
        n -= n % nq;
        static char payload[] = "payload-of-a-bench-job";
        rjq_enqueue_item items[1000];
        for (int i = 0; i < 1000; i++) items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), payload, sizeof payload - 1, NULL};
        take_snap(&a);
        cg_hook("zero");
        double t0 = now_s();
        long sent = 0, per = n / nq;
        for (long qi = 0; qi < nq; qi++)
            for (long k = 0; k < per; k += 1000) {
                size_t m = (size_t)(per - k < 1000 ? per - k : 1000);
                if ((rc = rjq_enqueue_batch(qs[qi], items, m, on_batch, NULL)) != RJQ_OK)
                    die("rjq_enqueue_batch", rc);
                sent += (long)m;
                while (sent - enq_ok > 8000 && !enq_bad) event_base_loop(base, EVLOOP_ONCE);
            }
        while (enq_ok < sent && !enq_bad) event_base_loop(base, EVLOOP_ONCE);
        if (enq_bad) die("enqueue", RJQ_EREDIS);
        start_workers((int)env_long("CONC", 8));
        while (completed < n) event_base_loop(base, EVLOOP_ONCE);
        double secs = now_s() - t0;
        cg_hook("dump");
        take_snap(&b);
        report("drain", n, secs, &a, &b);
    } else if (strcmp(mode, "awaited") == 0) {
        long n = env_long("N", 20000), window = env_long("WINDOW", 200);
        open_queues(env_long("QUEUES", 30));
        start_workers((int)env_long("CONC", 8));
        /* warm: one await per queue (subscriptions, links) */
        for (long i = 0; i < nq; i++)
            if ((rc = rjq_enqueue_await(qs[i], "w", 1, NULL, NULL, on_awaited, NULL, NULL)))
                die("rjq_enqueue_await", rc);
        while (awaited_ok + awaited_bad < nq) event_base_loop(base, EVLOOP_ONCE);
        awaited_ok = awaited_bad = 0;
        take_snap(&a);
        cg_hook("zero");
        double rate = (double)env_long("RATE", 0);
        struct event *tick = NULL;
        if (rate > 0) {
            struct timeval ms = {0, 1000};
            tick = event_new(base, -1, EV_PERSIST, on_tick, NULL);
            if (tick == NULL || event_add(tick, &ms) != 0) die("the pacing tick", RJQ_ENOMEM);
        }
        double t0 = now_s();
        long sent = 0, late = 0;
        while (awaited_ok + awaited_bad < n) {
            long due = rate > 0 ? (long)((now_s() - t0) * rate) + 1 : n;
            if (due > n) due = n;
            if (rate > 0 && sent < due && sent - awaited_ok - awaited_bad >= window) late++;
            while (sent < due && sent - awaited_ok - awaited_bad < window) {
                if ((rc = rjq_enqueue_await(qs[sent % nq], "p", 1, NULL, NULL, on_awaited, NULL,
                                            NULL)))
                    die("rjq_enqueue_await", rc);
                sent++;
            }
            event_base_loop(base, EVLOOP_ONCE);
        }
        double secs = now_s() - t0;
        cg_hook("dump");
        if (tick) event_free(tick);
        if (late)
            fprintf(stderr, "rjq-cluster-bench: RATE %.0f/s not kept: the window (%ld) was full %ld times\n",
                    rate, window, late);
        take_snap(&b);
        if (awaited_bad) die("awaits failed", RJQ_EREDIS);
        report("awaited", n, secs, &a, &b);
    } else if (strcmp(mode, "idle") == 0) {
        open_queues(env_long("QUEUES", 1000));
        start_workers(1);
        double settle = now_s() + (double)env_long("SETTLE", 5);
        while (now_s() < settle) event_base_loop(base, EVLOOP_ONCE);
        take_snap(&a);
        cg_hook("zero");
        double t0 = now_s(), end = t0 + (double)env_long("IDLE_SECS", 30);
        while (now_s() < end) event_base_loop(base, EVLOOP_ONCE);
        double secs = now_s() - t0;
        cg_hook("dump");
        take_snap(&b);
        report("idle", 0, secs, &a, &b);
    } else if (strcmp(mode, "flow") == 0) {
        flow();
    } else if (strcmp(mode, "place") == 0) {
        place();
    } else {
        fprintf(stderr, "usage: rjq-cluster-bench drain|awaited|idle|flow|place\n");
        return 2;
    }
    rjq_client_free(cl);
    event_base_free(base);
    return 0;
}
