/*
 * rjq-pg-bench: measures rjq-pg-bridge (tools/pg_bridge) on a running
 * PostgreSQL + Redis + bridge (bench/pg_bridge.sh starts all three).
 *
 *   rjq-pg-bench move N          N rows inserted in one statement, no
 *                                worker: rows/s from the insert's commit
 *                                to the last row's job in Redis (the
 *                                queue's "enqueued" counter)
 *   rjq-pg-bench latency RATE S  RATE rows/s, one INSERT each (from a
 *                                child process), for S seconds, with a
 *                                worker here: the time from each row's
 *                                insert to its job's start, p50/p99/max
 *                                in ms
 *   rjq-pg-bench backlog N TX BRIDGE ARGS...
 *                                with no bridge running: N rows inserted by
 *                                this client in transactions of TX rows
 *                                (nine tenths as one multi-row INSERT per
 *                                transaction, one tenth as TX single-row
 *                                INSERTs between BEGIN and COMMIT: the two
 *                                rates a client inserts at); then
 *                                the bridge started (BRIDGE ARGS, exec'd
 *                                here, stopped with SIGTERM at the end):
 *                                rows/s from its start until the last of
 *                                the N rows is a job in Redis (the queue's
 *                                "enqueued" counter) and no row is queued
 *                                in PostgreSQL (all marked)
 *   rjq-pg-bench lag RATE S      a bridge running: RATE rows/s, one INSERT
 *                                (autocommit) each from INSERTERS child
 *                                processes (default 8, each its own
 *                                connection, taking turns), for S seconds,
 *                                no worker: the time from
 *                                each INSERT's commit (its return to the
 *                                client) to its job's "enqueued" event
 *                                (queue monitor), p50/p99/max in ms
 *
 * RJQ_PG (libpq conninfo), RJQ_URL (Redis), PREFIX (default rjq), QUEUE
 * (default pgbench). Prints one JSON line. The table must start empty
 * (pg_bridge.sh truncates it, then flushes Redis, between runs).
 */
#include <dirent.h>
#include <event2/event.h>
#include <libpq-fe.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rjq/libevent.h>

#include "rjq.h"

static double wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void die(const char *what, const char *why) {
    fprintf(stderr, "rjq-pg-bench: %s: %s\n", what, why);
    exit(1);
}

static void exec_ok(PGconn *pg, const char *sql) {
    PGresult *r = PQexec(pg, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
        die(sql, PQresultErrorMessage(r));
    PQclear(r);
}

typedef struct bench {
    struct event_base *base;
    rjq_client *c;
    rjq_queue *q;
    PGconn *pg;
    const char *queue;
    /* move */
    long long enqueued0, target;
    int stats_pending, reached;
    double t0, t_end;
    /* latency */
    double *lat;
    long nlat, cap, total;
    double rate;
} bench;

static void on_stats(rjq_client *c, int status, const rjq_stats *s, void *data) {
    (void)c;
    bench *b = data;
    b->stats_pending = 0;
    if (status != RJQ_OK) die("stats", rjq_strerror(status));
    if (b->target == 0) {
        b->enqueued0 = s->enqueued;
        return;
    }
    if (s->enqueued - b->enqueued0 >= b->target && !b->reached) {
        b->reached = 1;
        b->t_end = wall_ms();
        event_base_loopbreak(b->base);
    }
}

static void poll_stats(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    bench *b = arg;
    if (!b->stats_pending && !b->reached) {
        b->stats_pending = 1;
        rjq_queue_get_stats(b->q, on_stats, b);
    }
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, c = *(const double *)y;
    return a < c ? -1 : a > c;
}

static void handler(rjq_job *job, void *data) {
    bench *b = data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    char buf[64];
    snprintf(buf, sizeof buf, "%.*s", (int)(len < 63 ? len : 63), p);
    double at = atof(buf);
    if (at <= 0) fprintf(stderr, "rjq-pg-bench: a job not of this run: %s \"%s\"\n", rjq_job_get_id(job), buf);
    if (b->nlat < b->cap) b->lat[b->nlat++] = wall_ms() - at;
    rjq_job_complete(job, "ok", 2, NULL, NULL);
    if (b->nlat >= b->total) event_base_loopbreak(b->base);
}

/* The inserting process: RATE rows/s, one INSERT (autocommit) each, its
 * own connection, paced by the clock (so the worker's loop never waits
 * for an insert). */
static void insert_at_rate(const char *conninfo, const char *queue, double rate, long total) {
    PGconn *pg = PQconnectdb(conninfo);
    if (PQstatus(pg) != CONNECTION_OK) die("PostgreSQL", PQerrorMessage(pg));
    char sql[256];
    /* the payload: the time of the insert by the server's clock (this
     * machine's), in ms */
    snprintf(sql, sizeof sql,
             "INSERT INTO rjq_jobs (queue, payload) VALUES ('%s', "
             "convert_to((extract(epoch FROM clock_timestamp()) * 1000)::text, 'UTF8'))",
             queue);
    double start = wall_ms();
    for (long i = 0; i < total; i++) {
        double due = start + (double)i * 1000.0 / rate, wait = due - wall_ms();
        if (wait > 0) {
            struct timespec ts = {(time_t)(wait / 1000), (long)(fmod(wait, 1000.0) * 1e6)};
            nanosleep(&ts, NULL);
        }
        exec_ok(pg, sql);
    }
    PQfinish(pg);
}

static double mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* CPU seconds of PostgreSQL (PG_PID: the postmaster's pid; -1 without):
 * the postmaster's own and its reaped children's, plus every live child's
 * (backends, WAL writer, checkpointer ...), from /proc. */
static double proc_ticks(const char *path, long *ppid, int children) {
    FILE *f = fopen(path, "r");
    if (f == NULL) return -1;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* after the command name */
    unsigned long long ut, st;
    long long cut, cst;
    char state;
    if (p == NULL || sscanf(p + 2, "%c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld",
                            &state, ppid, &ut, &st, &cut, &cst) != 6)
        return -1;
    return (double)(ut + st) + (children ? (double)(cut + cst) : 0);
}

/* PROFILE=1: each PostgreSQL process's CPU (by pid, with its title) at
 * the last call, printed as the difference at the next on stderr. */
typedef struct pcpu { long pid; double t; char title[96]; } pcpu;
static pcpu prof[512];
static int nprof;

static void prof_note(long pid, double ticks, int print) {
    char path[64], title[96] = "";
    snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(title, 1, sizeof title - 1, f);
        title[n] = '\0';
        fclose(f);
    }
    double was = 0;
    int i;
    for (i = 0; i < nprof && prof[i].pid != pid; i++) continue;
    if (i < nprof) was = prof[i].t;
    else if (nprof < 512) {
        nprof++;
        prof[i].pid = pid;
    } else return;
    prof[i].t = ticks;
    snprintf(prof[i].title, sizeof prof[i].title, "%s", title);
    double d = (ticks - was) / (double)sysconf(_SC_CLK_TCK);
    if (print && d >= 0.01) fprintf(stderr, "#   pg pid %ld %.2f s cpu: %s\n", pid, d, title);
}

static double pg_cpu_s_print(int print);
static double pg_cpu_s(void) { return pg_cpu_s_print(0); }

static double pg_cpu_s_print(int print) {
    const char *env = getenv("PG_PID");
    long pm = env ? atol(env) : 0;
    if (pm <= 0) return -1;
    char path[64];
    long ppid;
    snprintf(path, sizeof path, "/proc/%ld/stat", pm);
    double t = proc_ticks(path, &ppid, 1);
    if (t < 0) return -1;
    DIR *proc = opendir("/proc");
    struct dirent *de;
    while (proc && (de = readdir(proc)) != NULL) {
        long pid = atol(de->d_name);
        if (pid <= 0 || pid == pm) continue;
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        double c = proc_ticks(path, &ppid, 0);
        if (c >= 0 && ppid == pm) {
            t += c;
            if (getenv("PROFILE") && atoi(getenv("PROFILE")) == 1) prof_note(pid, c, print);
        }
    }
    if (proc) closedir(proc);
    return t / (double)sysconf(_SC_CLK_TCK);
}

static long long count_queued(PGconn *pg) {
    PGresult *r = PQexec(pg, "SELECT count(*) FROM rjq_jobs WHERE status = 'queued'");
    if (PQresultStatus(r) != PGRES_TUPLES_OK) die("count", PQresultErrorMessage(r));
    long long n = atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
    return n;
}

/* n rows inserted in transactions of tx rows: one multi-row INSERT per
 * transaction (single 0), or tx single-row INSERTs (parameters, as an
 * application sends them) between BEGIN and COMMIT (single 1). rows/s. */
static double insert_tx(PGconn *pg, const char *queue, long long n, int tx, int single) {
    size_t cap = (size_t)tx * 64 + 256;
    char *sql = malloc(cap);
    if (sql == NULL) die("insert", "out of memory");
    double t0 = mono_ms();
    for (long long done = 0; done < n;) {
        long long k = n - done < tx ? n - done : tx;
        if (single) {
            exec_ok(pg, "BEGIN");
            for (long long i = 0; i < k; i++) {
                char payload[32];
                snprintf(payload, sizeof payload, "job %lld", done + i);
                const char *v[2] = {queue, payload};
                PGresult *r = PQexecParams(pg, "INSERT INTO rjq_jobs (queue, payload) VALUES ($1, $2)",
                                           2, NULL, v, NULL, NULL, 0);
                if (PQresultStatus(r) != PGRES_COMMAND_OK) die("insert", PQresultErrorMessage(r));
                PQclear(r);
            }
            exec_ok(pg, "COMMIT");
        } else {
            size_t len = (size_t)snprintf(sql, cap, "INSERT INTO rjq_jobs (queue, payload) VALUES ");
            for (long long i = 0; i < k; i++)
                len += (size_t)snprintf(sql + len, cap - len, "%s('%s', 'job %lld')", i ? "," : "",
                                        queue, done + i);
            exec_ok(pg, sql);
        }
        done += k;
    }
    double ms = mono_ms() - t0;
    free(sql);
    return (double)n / (ms / 1000.0);
}

static double self_cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void bench_backlog(bench *b, long long n, int tx, char **bridge_argv) {
    long long tenth = n / 10; /* the slower way: a sample */
    double pg0 = pg_cpu_s(), me0 = self_cpu_s();
    double multi = insert_tx(b->pg, b->queue, n - tenth, tx, 0);
    double pg1 = pg_cpu_s(), me1 = self_cpu_s();
    double single = tenth > 0 ? insert_tx(b->pg, b->queue, tenth, tx, 1) : 0;
    if (count_queued(b->pg) != n) die("backlog", "the table did not start empty, or a bridge ran");
    b->target = n;
    struct event *poll = event_new(b->base, -1, EV_PERSIST, poll_stats, b);
    struct timeval tv = {0, 5000}; /* (each poll is a script call Redis runs) */
    event_add(poll, &tv);
    fflush(NULL);
    double pg2 = pg_cpu_s();
    double t0 = wall_ms();
    pid_t bridge = fork();
    if (bridge == 0) {
        execvp(bridge_argv[0], bridge_argv);
        _exit(127);
    }
    event_base_dispatch(b->base); /* until the enqueued counter says n */
    event_free(poll);
    double enq = b->t_end;
    while (count_queued(b->pg) > 0) { /* the last claim's mark */
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    double end = wall_ms();
    double pg3 = pg_cpu_s_print(1);
    kill(bridge, SIGTERM);
    waitpid(bridge, NULL, 0);
    struct rusage ru; /* the bridge's, up to its exit */
    getrusage(RUSAGE_CHILDREN, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                 (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    double s = (end - t0) / 1000.0;
    printf("{\"case\":\"pg-bridge-backlog\",\"rows\":%lld,\"tx_rows\":%d,"
           "\"insert_multirow_rows_per_s\":%.0f,\"insert_statements_rows_per_s\":%.0f,"
           "\"move_s\":%.3f,\"enqueued_s\":%.3f,\"move_rows_per_s\":%.0f,"
           "\"ratio_to_multirow\":%.3f,\"ratio_to_statements\":%.3f,\"bridge_cpu_s\":%.3f,"
           "\"client_cpu_us_per_row_multirow_insert\":%.1f,"
           "\"pg_cpu_us_per_row_multirow_insert\":%.1f,\"pg_cpu_us_per_row_move\":%.1f}\n",
           n, tx, multi, single, s, (enq - t0) / 1000.0, (double)n / s,
           (double)n / s / multi, single > 0 ? (double)n / s / single : 0, cpu,
           (me1 - me0) * 1e6 / (double)(n - tenth),
           pg0 >= 0 ? (pg1 - pg0) * 1e6 / (double)(n - tenth) : -1,
           pg0 >= 0 ? (pg3 - pg2) * 1e6 / (double)n : -1);
}

/* lag: commit times (the child's) and enqueued events (here) by row id */
typedef struct stamp {
    long long id;
    double t;
} stamp;

typedef struct lagrun {
    bench *b;
    stamp *enq;
    long n, cap, want;
    int warm; /* waiting for the warm-up row's event */
} lagrun;

static void on_lag_event(rjq_client *c, const char *event, const char *id, void *data) {
    (void)c;
    lagrun *l = data;
    if (strcmp(event, "enqueued") != 0 || strncmp(id, "pg-", 3) != 0) return;
    double t = mono_ms();
    if (l->warm) {
        l->warm = 0;
        event_base_loopbreak(l->b->base);
        return;
    }
    if (l->n < l->cap) {
        l->enq[l->n].id = atoll(id + 3);
        l->enq[l->n].t = t;
        l->n++;
    }
    if (l->n >= l->want) event_base_loopbreak(l->b->base);
}

static void on_lag_timeout(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    event_base_loopbreak(arg);
}

static int by_stamp_id(const void *x, const void *y) {
    const stamp *a = x, *c = y;
    return a->id < c->id ? -1 : a->id > c->id;
}

static void bench_lag(bench *b, const char *conninfo, double rate, double secs) {
    lagrun l = {0};
    l.b = b;
    l.want = (long)(rate * secs);
    l.cap = l.want;
    l.enq = calloc((size_t)l.cap + 1, sizeof *l.enq);
    stamp *commit = mmap(NULL, ((size_t)l.want + 1) * sizeof *commit, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (l.enq == NULL || commit == MAP_FAILED) die("lag", "out of memory");
    rjq_monitor *m;
    if (rjq_queue_monitor(b->q, on_lag_event, &l, &m) != RJQ_OK) die("monitor", b->queue);
    struct event *timeout = evtimer_new(b->base, on_lag_timeout, b->base);
    /* warm-up: one row, until its event is seen (the monitor is subscribed) */
    char sql[256];
    snprintf(sql, sizeof sql, "INSERT INTO rjq_jobs (queue, payload) VALUES ('%s', 'warm')", b->queue);
    l.warm = 1;
    struct timeval tv = {0, 50 * 1000};
    for (int tries = 0; l.warm && tries < 200; tries++) { /* a row every 50 ms until one is seen */
        exec_ok(b->pg, sql);
        evtimer_add(timeout, &tv);
        event_base_dispatch(b->base);
    }
    if (l.warm) die("lag", "no enqueued event from the bridge");
    struct timespec settle = {0, 300 * 1000 * 1000}; /* the warm-up rows' events pass */
    nanosleep(&settle, NULL);
    event_base_loop(b->base, EVLOOP_NONBLOCK);
    l.n = 0;
    fflush(NULL);
    /* INSERTERS processes (default 8), row i from process i % INSERTERS:
     * one connection commits a row per fsync at most (~150/s on a disk
     * with 7 ms fsyncs), several share the server's group commit */
    int ninserters = getenv("INSERTERS") ? atoi(getenv("INSERTERS")) : 8;
    if (ninserters < 1) ninserters = 1;
    pid_t *kids = calloc((size_t)ninserters, sizeof *kids);
    if (kids == NULL) die("lag", "out of memory");
    double start = mono_ms() + 100;
    for (int k = 0; k < ninserters; k++) {
        kids[k] = fork();
        if (kids[k] != 0) continue;
        PGconn *pg = PQconnectdb(conninfo);
        if (PQstatus(pg) != CONNECTION_OK) die("PostgreSQL", PQerrorMessage(pg));
        char ins[256];
        snprintf(ins, sizeof ins,
                 "INSERT INTO rjq_jobs (queue, payload) VALUES ('%s', 'live') RETURNING id", b->queue);
        for (long i = k; i < l.want; i += ninserters) {
            double due = start + (double)i * 1000.0 / rate, wait = due - mono_ms();
            if (wait > 0) {
                struct timespec ts = {(time_t)(wait / 1000), (long)(fmod(wait, 1000.0) * 1e6)};
                nanosleep(&ts, NULL);
            }
            PGresult *r = PQexec(pg, ins);
            double t = mono_ms(); /* committed: autocommit returns after the commit */
            if (PQresultStatus(r) != PGRES_TUPLES_OK) die("insert", PQresultErrorMessage(r));
            commit[i].id = atoll(PQgetvalue(r, 0, 0));
            commit[i].t = t;
            PQclear(r);
        }
        PQfinish(pg);
        _exit(0);
    }
    struct timeval limit = {(time_t)secs + 30, 0};
    evtimer_add(timeout, &limit);
    event_base_dispatch(b->base);
    for (int k = 0; k < ninserters; k++) waitpid(kids[k], NULL, 0);
    free(kids);
    event_free(timeout);
    rjq_monitor_stop(m);
    qsort(l.enq, (size_t)l.n, sizeof *l.enq, by_stamp_id);
    double *lag = calloc((size_t)l.want + 1, sizeof *lag);
    long nl = 0;
    double first = 0, last = 0; /* commits */
    for (long i = 0; i < l.want; i++) {
        if (commit[i].t <= 0) continue;
        if (first == 0 || commit[i].t < first) first = commit[i].t;
        if (commit[i].t > last) last = commit[i].t;
    }
    for (long i = 0; lag && i < l.want; i++) {
        stamp key = {commit[i].id, 0};
        stamp *e = bsearch(&key, l.enq, (size_t)l.n, sizeof *l.enq, by_stamp_id);
        if (e && commit[i].t > 0) lag[nl++] = e->t - commit[i].t;
    }
    if (nl == 0) die("lag", "no row's event was seen");
    qsort(lag, (size_t)nl, sizeof *lag, cmp_double);
    printf("{\"case\":\"pg-bridge-lag\",\"rate\":%.0f,\"inserters\":%d,\"rows\":%ld,"
           "\"inserted_per_s\":%.0f,\"seen\":%ld,\"p50_ms\":%.2f,\"p99_ms\":%.2f,\"max_ms\":%.2f}\n",
           rate, ninserters, l.want, last > first ? (double)(l.want - 1) * 1000.0 / (last - first) : 0, nl,
           lag[nl / 2], lag[(long)floor((double)nl * 0.99)], lag[nl - 1]);
    free(lag);
    free(l.enq);
    munmap(commit, ((size_t)l.want + 1) * sizeof *commit);
}

int main(int argc, char **argv) {
    int known = argc >= 3 && (strcmp(argv[1], "move") == 0 || strcmp(argv[1], "latency") == 0 ||
                              strcmp(argv[1], "lag") == 0 ||
                              (strcmp(argv[1], "backlog") == 0 && argc >= 5));
    if (!known) {
        fprintf(stderr, "usage: rjq-pg-bench move N | latency RATE SECONDS | lag RATE SECONDS |\n"
                        "       backlog N TX BRIDGE [ARGS...]\n");
        return 2;
    }
    bench b = {0};
    b.queue = getenv("QUEUE") ? getenv("QUEUE") : "pgbench";
    const char *pgc = getenv("RJQ_PG") ? getenv("RJQ_PG") : "";
    b.pg = PQconnectdb(pgc);
    if (PQstatus(b.pg) != CONNECTION_OK) die("PostgreSQL", PQerrorMessage(b.pg));
    b.base = event_base_new();
    rjq_client_options o = RJQ_CLIENT_OPTIONS_INIT;
    o.url = getenv("RJQ_URL");
    o.prefix = getenv("PREFIX");
    if (rjq_libevent_client_new(&b.c, b.base, &o) != RJQ_OK) die("Redis", rjq_client_get_errmsg(NULL));
    if (rjq_queue_open(b.c, b.queue, NULL, &b.q) != RJQ_OK) die("queue", b.queue);
    /* the counter before */
    b.stats_pending = 1;
    rjq_queue_get_stats(b.q, on_stats, &b);
    while (b.stats_pending) event_base_loop(b.base, EVLOOP_ONCE);
    if (strcmp(argv[1], "backlog") == 0) {
        bench_backlog(&b, atoll(argv[2]), atoi(argv[3]), &argv[4]);
    } else if (strcmp(argv[1], "lag") == 0) {
        bench_lag(&b, pgc, atof(argv[2]), atof(argv[3]));
    } else if (strcmp(argv[1], "move") == 0) {
        b.target = atoll(argv[2]);
        char sql[256];
        snprintf(sql, sizeof sql,
                 "INSERT INTO rjq_jobs (queue, payload) SELECT '%s', convert_to('job ' || g, 'UTF8') "
                 "FROM generate_series(1, %lld) g",
                 b.queue, b.target);
        struct event *poll = event_new(b.base, -1, EV_PERSIST, poll_stats, &b);
        struct timeval tv = {0, 2000};
        event_add(poll, &tv);
        b.t0 = wall_ms();
        exec_ok(b.pg, sql); /* returns once committed */
        double committed = wall_ms();
        event_base_dispatch(b.base);
        event_free(poll);
        double s = (b.t_end - committed) / 1000.0;
        printf("{\"case\":\"pg-bridge-move\",\"rows\":%lld,\"insert_s\":%.3f,\"move_s\":%.3f,"
               "\"rows_per_s\":%.0f}\n",
               b.target, (committed - b.t0) / 1000.0, s, (double)b.target / s);
    } else {
        b.rate = atof(argv[2]);
        double secs = argc > 3 ? atof(argv[3]) : 10;
        b.total = (long)(b.rate * secs);
        b.cap = b.total;
        b.lat = calloc((size_t)b.cap + 1, sizeof *b.lat);
        rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
        wo.concurrency = 16;
        rjq_worker *w;
        if (rjq_worker_start(b.q, &wo, handler, &b, &w) != RJQ_OK) die("worker", "start");
        fflush(NULL);
        pid_t child = fork();
        if (child == 0) {
            insert_at_rate(pgc, b.queue, b.rate, b.total);
            _exit(0);
        }
        event_base_dispatch(b.base);
        waitpid(child, NULL, 0);
        qsort(b.lat, (size_t)b.nlat, sizeof *b.lat, cmp_double);
        double p50 = b.lat[b.nlat / 2], p99 = b.lat[(long)floor((double)b.nlat * 0.99)];
        printf("{\"case\":\"pg-bridge-latency\",\"rate\":%.0f,\"rows\":%ld,\"p50_ms\":%.2f,"
               "\"p99_ms\":%.2f,\"max_ms\":%.2f}\n",
               b.rate, b.nlat, p50, p99, b.lat[b.nlat - 1]);
        free(b.lat);
    }
    rjq_client_free(b.c);
    event_base_free(b.base);
    PQfinish(b.pg);
    return 0;
}
