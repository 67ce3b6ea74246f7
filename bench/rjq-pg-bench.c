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
 *
 * RJQ_PG (libpq conninfo), RJQ_URL (Redis), PREFIX (default rjq), QUEUE
 * (default pgbench). Prints one JSON line. The table must start empty
 * (pg_bridge.sh truncates it, then flushes Redis, between runs).
 */
#include <event2/event.h>
#include <libpq-fe.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
        rjq_queue_stats(b->q, on_stats, b);
    }
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, c = *(const double *)y;
    return a < c ? -1 : a > c;
}

static void handler(rjq_job *job, void *data) {
    bench *b = data;
    size_t len;
    const char *p = rjq_job_payload(job, &len);
    char buf[64];
    snprintf(buf, sizeof buf, "%.*s", (int)(len < 63 ? len : 63), p);
    double at = atof(buf);
    if (at <= 0) fprintf(stderr, "rjq-pg-bench: a job not of this run: %s \"%s\"\n", rjq_job_id(job), buf);
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

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[1], "move") != 0 && strcmp(argv[1], "latency") != 0)) {
        fprintf(stderr, "usage: rjq-pg-bench move N | latency RATE SECONDS\n");
        return 2;
    }
    bench b = {0};
    b.queue = getenv("QUEUE") ? getenv("QUEUE") : "pgbench";
    const char *pgc = getenv("RJQ_PG") ? getenv("RJQ_PG") : "";
    b.pg = PQconnectdb(pgc);
    if (PQstatus(b.pg) != CONNECTION_OK) die("PostgreSQL", PQerrorMessage(b.pg));
    b.base = event_base_new();
    rjq_client_options o = {0};
    o.url = getenv("RJQ_URL");
    o.prefix = getenv("PREFIX");
    if (rjq_libevent_client_new(&b.c, b.base, &o) != RJQ_OK) die("Redis", rjq_client_errmsg(NULL));
    if (rjq_queue_open(b.c, b.queue, NULL, &b.q) != RJQ_OK) die("queue", b.queue);
    /* the counter before */
    b.stats_pending = 1;
    rjq_queue_stats(b.q, on_stats, &b);
    while (b.stats_pending) event_base_loop(b.base, EVLOOP_ONCE);
    if (strcmp(argv[1], "move") == 0) {
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
        rjq_worker_options wo = {0};
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
