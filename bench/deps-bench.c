/*
 * deps-bench: the Redis cost of job dependencies (bench/deps.sh measures
 * the server around it). Modes:
 *   plain N   N jobs enqueued (batches of 1000), then run and completed
 *   single N  N jobs as plain, and N more enqueued one call each (ids p<i>)
 *   dep N     N children enqueued as plain, N parents each after one child
 *             (ids c<i>, p<i>), then both run: (dep - plain) / N is the
 *             cost of a job with one dependency, (single - plain) / N that
 *             of a job enqueued alone
 *   same N    as dep, the parents in the children's queue (ids c<i>,
 *             p<i>): deps_add registers them, the children's completions
 *             release them (no deps_watch, deps_release, deps_done calls)
 *   fanin N   N children (N <= 10 000), joins of 100 children each, one
 *             parent after the joins (RJQ_AFTER_MAX per job): the parent
 *             runs once every child ran
 *   idle N    N children delayed an hour, N parents each after one of
 *             them, then a worker of the children's queue idles 5 s
 *             (reclaim_ms 100): the periodic visits' dependents sweep,
 *             with N dependents entries of unfinished jobs recorded
 * REDIS_URL as the examples. Prints the wall time. DEPS_BENCH_ENQUEUE_ONLY=1:
 * stop after the enqueue (no worker runs): what a mode's enqueue costs
 * apart from its run (bench/README.md, the dep1 section).
 * DEPS_BENCH_RUN_ONLY=1: print "enqueued" after the enqueue and wait for a
 * line on stdin before the run (bench/deps_callgrind.sh zeroes its
 * counters there), the workers' reclaim_ms 600 000 (their visits, which
 * go by the clock, out of the count).
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <rjq/libevent.h>

typedef struct app {
    struct event_base *base;
    rjq_client *c;
    long pending, ran, want;
    int failed;
} app;

static void on_enqueued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    app *a = data;
    (void)jobs, (void)n;
    if (status != RJQ_OK) {
        fprintf(stderr, "deps-bench: enqueue: %s (%s)\n", rjq_strerror(status),
                rjq_client_get_errmsg(c));
        a->failed = 1;
    }
    if (--a->pending == 0) event_base_loopbreak(a->base);
}

static void handler(rjq_job *job, void *data) {
    app *a = data;
    if (rjq_job_complete(job, "", 0, NULL, NULL) != RJQ_OK) a->failed = 1;
    if (++a->ran == a->want) event_base_loopbreak(a->base);
}

static long long child_delay_ms; /* (idle) */

static void plain_batch(app *a, rjq_queue *q, long n, const char *prefix) {
    static rjq_enqueue_item items[1000];
    static rjq_job_options opts[1000];
    static char ids[1000][32];
    for (long i = 0; i < n; i += 1000) {
        long k = n - i < 1000 ? n - i : 1000;
        for (long j = 0; j < k; j++) {
            rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
            rjq_enqueue_item it = RJQ_ENQUEUE_ITEM_INIT;
            snprintf(ids[j], sizeof ids[j], "%s%ld", prefix, i + j);
            opts[j] = o;
            opts[j].id = ids[j];
            opts[j].delay_ms = child_delay_ms;
            items[j] = it;
            items[j].payload = "x";
            items[j].len = 1;
            items[j].opts = prefix ? &opts[j] : NULL;
        }
        if (rjq_enqueue_batch(q, items, (size_t)k, on_enqueued, a) != RJQ_OK) exit(1);
        a->pending++;
        event_base_dispatch(a->base);
    }
}

static void after(app *a, rjq_queue *q, const char *id, const rjq_dep *on, size_t n) {
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = id;
    o.after = on;
    o.n_after = n;
    if (rjq_enqueue(q, "x", 1, &o, on_enqueued, a) != RJQ_OK) exit(1);
    if (++a->pending >= 500) event_base_dispatch(a->base); /* (a window of 500) */
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: deps-bench plain|single|dep|same|fanin|idle N\n");
        return 2;
    }
    const char *mode = argv[1];
    long n = atol(argv[2]);
    if (n < 1 || (strcmp(mode, "fanin") == 0 && (n > 10000 || n % 100))) return 2;
    app a = {0};
    a.base = event_base_new();
    rjq_client_options co = RJQ_CLIENT_OPTIONS_INIT;
    co.url = getenv("REDIS_URL");
    if (rjq_libevent_client_new(&a.c, a.base, &co) != RJQ_OK) return 1;
    rjq_queue *qc, *qp;
    rjq_queue_open(a.c, "bc", NULL, &qc);
    rjq_queue_open(a.c, "bp", NULL, &qp);
    double t0 = now_s();
    char id[32], id2[32];
    if (strcmp(mode, "plain") == 0) {
        plain_batch(&a, qc, n, "c");
        a.want = n;
    } else if (strcmp(mode, "single") == 0) {
        plain_batch(&a, qc, n, "c");
        for (long i = 0; i < n; i++) {
            rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
            snprintf(id2, sizeof id2, "p%ld", i);
            o.id = id2;
            if (rjq_enqueue(qp, "x", 1, &o, on_enqueued, &a) != RJQ_OK) exit(1);
            if (++a.pending >= 500) event_base_dispatch(a.base);
        }
        a.want = 2 * n;
    } else if (strcmp(mode, "dep") == 0 || strcmp(mode, "idle") == 0 ||
               strcmp(mode, "same") == 0) {
        if (strcmp(mode, "idle") == 0) child_delay_ms = 3600000;
        plain_batch(&a, qc, n, "c");
        for (long i = 0; i < n; i++) {
            snprintf(id, sizeof id, "c%ld", i);
            snprintf(id2, sizeof id2, "p%ld", i);
            rjq_dep on = {"bc", id};
            after(&a, strcmp(mode, "same") == 0 ? qc : qp, id2, &on, 1);
        }
        a.want = 2 * n;
    } else {
        plain_batch(&a, qc, n, "c");
        static char cid[10000][32];
        static rjq_dep on[100];
        for (long j = 0; j < n / 100; j++) {
            for (long k = 0; k < 100; k++) {
                snprintf(cid[j * 100 + k], sizeof cid[0], "c%ld", j * 100 + k);
                on[k] = (rjq_dep){"bc", cid[j * 100 + k]};
            }
            snprintf(id, sizeof id, "j%ld", j);
            after(&a, qp, id, on, 100);
        }
        if (a.pending) event_base_dispatch(a.base);
        static char jid[100][32];
        for (long j = 0; j < n / 100; j++) {
            snprintf(jid[j], sizeof jid[j], "j%ld", j);
            on[j] = (rjq_dep){"bp", jid[j]};
        }
        after(&a, qp, "root", on, (size_t)(n / 100));
        a.want = n + n / 100 + 1;
    }
    if (a.pending) event_base_dispatch(a.base);
    double t1 = now_s();
    const char *only = getenv("DEPS_BENCH_ENQUEUE_ONLY");
    if (only && strcmp(only, "1") == 0) {
        printf("%s %ld: enqueue %.3f s (enqueue only)%s\n", mode, n, t1 - t0, a.failed ? " (FAILURES)" : "");
        rjq_client_free(a.c);
        event_base_free(a.base);
        return a.failed;
    }
    if (strcmp(mode, "idle") == 0) {
        rjq_worker_options wi = RJQ_WORKER_OPTIONS_INIT;
        wi.reclaim_ms = 100;
        rjq_worker *w;
        if (rjq_worker_start(qc, &wi, handler, &a, &w) != RJQ_OK) return 1;
        struct timeval idle = {5, 0};
        event_base_loopexit(a.base, &idle);
        event_base_dispatch(a.base);
        printf("idle %ld: enqueue %.3f s, idle %.3f s%s\n", n, t1 - t0, now_s() - t1,
               a.failed ? " (FAILURES)" : "");
        rjq_client_free(a.c);
        event_base_free(a.base);
        return a.failed;
    }
    const char *run_only = getenv("DEPS_BENCH_RUN_ONLY");
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 64;
    if (run_only && strcmp(run_only, "1") == 0) {
        wo.reclaim_ms = 600000;
        printf("enqueued\n");
        fflush(stdout);
        char line[16];
        if (!fgets(line, sizeof line, stdin)) return 1;
        t1 = now_s();
    }
    rjq_worker *w1, *w2;
    if (rjq_worker_start(qc, &wo, handler, &a, &w1) != RJQ_OK ||
        rjq_worker_start(qp, &wo, handler, &a, &w2) != RJQ_OK)
        return 1;
    event_base_dispatch(a.base);
    double t2 = now_s();
    struct timeval settle = {0, 300000}; /* (the last releases' bookkeeping) */
    event_base_loopexit(a.base, &settle);
    event_base_dispatch(a.base);
    printf("%s %ld: enqueue %.3f s, run %.3f s, jobs run %ld%s\n", mode, n, t1 - t0, t2 - t1, a.ran,
           a.failed ? " (FAILURES)" : "");
    rjq_client_free(a.c);
    event_base_free(a.base);
    return a.failed;
}
