/*
 * rjq-demo: the whole life of a job queue in one program.
 *
 * One libevent loop, one rjq client, one queue. The program enqueues N jobs
 * (default 100000) in batches (rjq_enqueue_batch, a few batches in flight at
 * a time) while a worker on the same client runs them:
 *
 *   - most jobs complete at once with a small result;
 *   - about 1 job in 50 fails once on its first attempt (RJQ_FAIL_RETRY),
 *     waits out its fixed 20 ms backoff in the delayed set, runs again and
 *     completes;
 *   - with --dead K, K jobs fail fatally (RJQ_FAIL_FATAL) and go dead.
 *
 * A progress line shows what is happening (updated in place ~10 times a
 * second on a terminal, plain lines once a second otherwise). At the end the
 * demo stops the worker, reads the queue's counters and depths back from
 * Redis with rjq_queue_get_stats() and checks that they agree with what it did:
 * completed == N - dead, nothing left ready, delayed or active. It exits 0
 * only if they do.
 *
 * Each run uses its own queue (demo-<time>-<pid>), so runs against a shared
 * Redis do not see each other. Completed jobs are deleted after a minute;
 * dead jobs (only with --dead) stay in the queue's dead set for replay.
 *
 * Environment: REDIS_URL (default redis://127.0.0.1:6379), DEMO_N,
 * DEMO_CONCURRENCY, DEMO_DEAD. Run with --help for every option.
 */
/* clock_gettime: POSIX 2008 (the rjq build defines _GNU_SOURCE). */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <rjq/libevent.h>

#define PAYLOAD_MAX 32   /* "job 1234567890" and then some */
#define RATE_WINDOW 10   /* progress samples in the rate window (~1 s) */
#define TICK_MS 100

typedef struct config {
    const char *url;
    const char *queue;       /* NULL: demo-<time>-<pid> */
    long jobs;               /* N */
    int concurrency;
    long batch;              /* jobs per rjq_enqueue_batch() call */
    int inflight;            /* batches in flight at once */
    long fail_every;         /* 1 job in fail_every fails once (0: none) */
    long dead;               /* jobs that fail fatally */
    long backoff_ms;         /* fixed retry backoff */
    long stall_s;            /* give up after this long without progress */
    int progress;            /* -1 auto (isatty), 0 off, 1 on */
} config;

typedef struct demo {
    config cfg;
    char queue_name[64];
    struct event_base *base;
    struct event *tick, *sigint, *sigterm;
    rjq_client *c;
    rjq_queue *q;
    rjq_worker *w;
    rjq_job_options jopts;    /* the same options for every job */
    rjq_enqueue_item *items;  /* one batch */
    char *payloads;           /* one batch of payloads, PAYLOAD_MAX each */

    /* what we expect, from the job indexes */
    long expect_retried, expect_dead;

    /* progress, counted from the callbacks (so: acknowledged by Redis) */
    long next;                /* next job index to enqueue */
    int batches_inflight;
    long enqueued, completed, retried, dead, errors;
    double t0, t_enqueued, t_finished;

    /* progress display */
    int tty;
    long ticks;
    long window[RATE_WINDOW + 1];
    double window_t[RATE_WINDOW + 1];
    int window_n;
    long last_progress;       /* for the stall watchdog */
    double last_progress_t;
    int line_open;            /* a \r progress line is on screen */

    int finishing;            /* all jobs done: stopping the worker */
    int have_stats;
    rjq_stats stats;
    int exit_code;
} demo;

/* ---- small helpers ------------------------------------------------------ */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Finish the progress line so that the next output starts on a fresh line. */
static void end_line(demo *d) {
    if (d->line_open) {
        fputc('\n', stdout);
        fflush(stdout);
        d->line_open = 0;
    }
}

/* Report a fatal problem and leave the loop; main() frees everything. */
static void die(demo *d, const char *fmt, ...) {
    va_list ap;
    end_line(d);
    fputs("rjq-demo: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (d->exit_code == 0) d->exit_code = 1;
    event_base_loopbreak(d->base);
}

/* Which jobs fail, decided by their index (0..N-1) so that the checks at
 * the end know what to expect. */
static int is_dead(const demo *d, long i) {
    if (d->cfg.dead <= 0) return 0;
    long stride = d->cfg.jobs / d->cfg.dead;
    return i % stride == stride / 2 && i / stride < d->cfg.dead;
}

static int fails_once(const demo *d, long i) {
    return d->cfg.fail_every > 0 && i % d->cfg.fail_every == d->cfg.fail_every - 1 &&
           !is_dead(d, i);
}

/* The payload is "job <index>"; payloads are bytes, not strings. */
static long job_index(const void *payload, size_t len) {
    char buf[PAYLOAD_MAX];
    if (len < 5 || len >= sizeof buf || memcmp(payload, "job ", 4) != 0) return -1;
    memcpy(buf, payload, len);
    buf[len] = '\0';
    char *end;
    long i = strtol(buf + 4, &end, 10);
    return *end == '\0' ? i : -1;
}

/* ---- finishing: stop the worker, read the stats, check ------------------ */

static void print_summary(demo *d);

static void on_stats(rjq_client *c, int status, const rjq_stats *s, void *data) {
    demo *d = data;
    if (status == RJQ_ECANCELED) return; /* exiting early: rjq_client_free() */
    if (status != RJQ_OK) {
        die(d, "rjq_queue_get_stats: %s (%s)", rjq_strerror(status), rjq_client_get_errmsg(c));
        return;
    }
    d->stats = *s;
    d->have_stats = 1;
    print_summary(d);
    /* Leave the loop; main() frees the client outside of any callback
     * (rjq_client_free() right here would be just as fine). */
    event_base_loopbreak(d->base);
}

static void on_stopped(rjq_worker *w, int status, void *data) {
    demo *d = data;
    (void)w;
    d->w = NULL; /* freed by the library once we return */
    if (status == RJQ_ECANCELED) return; /* exiting early: rjq_client_free() */
    if (status != RJQ_OK) {
        die(d, "worker stop: %s", rjq_strerror(status));
        return;
    }
    int rc = rjq_queue_get_stats(d->q, on_stats, d);
    if (rc != RJQ_OK) die(d, "rjq_queue_get_stats: %s", rjq_strerror(rc));
}

/* Every job has an outcome acknowledged by Redis: stop the worker. It calls
 * on_stopped once nothing it handed out is still in flight. */
static void check_finished(demo *d) {
    if (d->finishing || d->completed + d->dead < d->cfg.jobs) return;
    d->finishing = 1;
    d->t_finished = now_s();
    int rc = rjq_worker_stop(d->w, on_stopped, d);
    if (rc != RJQ_OK) die(d, "rjq_worker_stop: %s", rjq_strerror(rc));
}

/* ---- the worker ----------------------------------------------------------- */

static void on_completed(rjq_client *c, int status, void *data) {
    demo *d = data;
    (void)c;
    if (status == RJQ_ECANCELED) return; /* exiting early: rjq_client_free() */
    if (status != RJQ_OK) {
        /* RJQ_ELEASELOST: the job was reclaimed (lease expired) and will run
         * again elsewhere; it would not happen in this demo. */
        d->errors++;
        die(d, "complete: %s", rjq_strerror(status));
        return;
    }
    d->completed++;
    check_finished(d);
}

static void on_retry_scheduled(rjq_client *c, int status, void *data) {
    demo *d = data;
    (void)c;
    if (status == RJQ_ECANCELED) return; /* exiting early: rjq_client_free() */
    if (status != RJQ_OK) {
        d->errors++;
        die(d, "fail (retry): %s", rjq_strerror(status));
        return;
    }
    d->retried++;
}

static void on_buried(rjq_client *c, int status, void *data) {
    demo *d = data;
    (void)c;
    if (status == RJQ_ECANCELED) return; /* exiting early: rjq_client_free() */
    if (status != RJQ_OK) {
        d->errors++;
        die(d, "fail (fatal): %s", rjq_strerror(status));
        return;
    }
    d->dead++;
    check_finished(d);
}

/*
 * The job handler: decide from the job's index what to do with it. The
 * handler owns `job` until it calls rjq_job_complete() or rjq_job_fail();
 * a real handler could also keep it and finish it later from another
 * callback (an HTTP reply, a timer, ...).
 */
static void handler(rjq_job *job, void *data) {
    demo *d = data;
    size_t len;
    const void *payload = rjq_job_get_payload(job, &len);
    long i = job_index(payload, len);
    int rc;

    if (i < 0) {
        rc = rjq_job_fail(job, "demo: unexpected payload", RJQ_FAIL_FATAL, 0, on_buried, d);
    } else if (is_dead(d, i)) {
        rc = rjq_job_fail(job, "demo: fatal failure", RJQ_FAIL_FATAL, 0, on_buried, d);
    } else if (fails_once(d, i) && rjq_job_get_attempt(job) == 1) {
        /* -1: wait the job's own backoff (fixed, set at enqueue time). */
        rc = rjq_job_fail(job, "demo: transient failure", RJQ_FAIL_RETRY, -1,
                          on_retry_scheduled, d);
    } else {
        char result[PAYLOAD_MAX];
        int n = snprintf(result, sizeof result, "done %ld", i);
        rc = rjq_job_complete(job, result, (size_t)n, on_completed, d);
    }
    if (rc != RJQ_OK) {
        /* RJQ_ECLOSED: the client is closing; the handle is released
         * whatever the call returns, and every other error comes to the
         * callback. */
        d->errors++;
        die(d, "finishing job %ld: %s", i, rjq_strerror(rc));
    }
}

/* ---- the producer --------------------------------------------------------- */

static void pump(demo *d);

static void on_enqueued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n,
                        void *data) {
    demo *d = data;
    (void)jobs; /* rjq_enqueued_get(jobs, i)->id is the server-assigned id of the i-th item */
    d->batches_inflight--;
    if (status == RJQ_ECANCELED) return; /* exiting early: rjq_client_free() */
    if (status != RJQ_OK) {
        /* RJQ_ECONN: the connection dropped with this batch in flight, so
         * whether it was written is unknown. Jobs with explicit ids
         * (rjq_job_options.id) could simply be enqueued again. */
        die(d, "enqueue: %s (%s)", rjq_strerror(status), rjq_client_get_errmsg(c));
        return;
    }
    d->enqueued += (long)n;
    if (d->enqueued == d->cfg.jobs) d->t_enqueued = now_s();
    pump(d);
}

/* Keep up to cfg.inflight batches on their way; the callbacks refill. */
static void pump(demo *d) {
    while (d->batches_inflight < d->cfg.inflight && d->next < d->cfg.jobs) {
        long k = d->cfg.jobs - d->next;
        if (k > d->cfg.batch) k = d->cfg.batch;
        for (long j = 0; j < k; j++) {
            char *p = d->payloads + j * PAYLOAD_MAX;
            int len = snprintf(p, PAYLOAD_MAX, "job %ld", d->next + j);
            d->items[j].size = sizeof d->items[j];
            d->items[j].payload = p;
            d->items[j].len = (size_t)len;
            d->items[j].opts = &d->jopts;
        }
        /* The items and payloads are copied during the call: the buffers
         * are reused for the next batch right away. */
        int rc = rjq_enqueue_batch(d->q, d->items, (size_t)k, on_enqueued, d);
        if (rc != RJQ_OK) {
            die(d, "rjq_enqueue_batch: %s (%s)", rjq_strerror(rc), rjq_client_get_errmsg(d->c));
            return;
        }
        d->next += k;
        d->batches_inflight++;
    }
}

/* ---- progress ------------------------------------------------------------ */

static void on_tick(evutil_socket_t fd, short what, void *arg) {
    demo *d = arg;
    (void)fd, (void)what;
    double t = now_s();
    long done = d->completed + d->dead;

    /* finished-per-second over the last ~1 s */
    if (d->window_n == RATE_WINDOW + 1) {
        memmove(d->window, d->window + 1, RATE_WINDOW * sizeof d->window[0]);
        memmove(d->window_t, d->window_t + 1, RATE_WINDOW * sizeof d->window_t[0]);
        d->window_n--;
    }
    d->window[d->window_n] = done;
    d->window_t[d->window_n] = t;
    d->window_n++;
    double rate = 0;
    if (d->window_n > 1) {
        double dt = t - d->window_t[0];
        if (dt > 0) rate = (double)(done - d->window[0]) / dt;
    }

    d->ticks++;
    int show = d->cfg.progress > 0 || (d->cfg.progress < 0 && (d->tty || d->ticks % 10 == 0));
    if (show && !d->finishing) {
        if (d->tty) {
            printf("\r\033[K  enqueued %ld/%ld  completed %ld  retried %ld  dead %ld  %.0f jobs/s",
                   d->enqueued, d->cfg.jobs, d->completed, d->retried, d->dead, rate);
            d->line_open = 1;
        } else {
            printf("[%6.1fs] enqueued %ld/%ld completed %ld retried %ld dead %ld rate %.0f jobs/s\n",
                   t - d->t0, d->enqueued, d->cfg.jobs, d->completed, d->retried, d->dead, rate);
        }
        fflush(stdout);
    }

    /* Watchdog: Redis unreachable, or something lost, shows up as no
     * progress at all. */
    long progress = d->enqueued + d->completed + d->retried + d->dead + d->have_stats +
                    d->finishing;
    if (progress != d->last_progress) {
        d->last_progress = progress;
        d->last_progress_t = t;
    } else if (t - d->last_progress_t > (double)d->cfg.stall_s) {
        die(d, "no progress for %ld s (%s to %s; last error: %s)", d->cfg.stall_s,
            rjq_client_is_connected(d->c) ? "connected" : "not connected", d->cfg.url,
            rjq_client_get_errmsg(d->c)[0] ? rjq_client_get_errmsg(d->c) : "none");
    }
}

static void on_signal(evutil_socket_t sig, short what, void *arg) {
    demo *d = arg;
    (void)what;
    end_line(d);
    fprintf(stderr, "rjq-demo: %s, stopping\n", sig == SIGINT ? "interrupted" : "terminated");
    d->exit_code = 130;
    event_base_loopbreak(d->base);
}

static void on_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    demo *d = data;
    (void)c;
    if (ev == RJQ_EVENT_CONNECTED) return;
    end_line(d);
    fprintf(stderr, "rjq-demo: %s connection %s: %s\n",
            conn == RJQ_CONN_COMMAND ? "command" : "subscriber",
            ev == RJQ_EVENT_DISCONNECTED ? "lost" : "error", detail ? detail : "");
}

/* ---- summary ------------------------------------------------------------- */

static int check(const char *what, long long got, long long want) {
    if (got == want) return 1;
    printf("  MISMATCH        %s is %lld, expected %lld\n", what, got, want);
    return 0;
}

static void print_summary(demo *d) {
    const rjq_stats *s = &d->stats;
    long n = d->cfg.jobs;
    double total = d->t_finished - d->t0;
    double enq = d->t_enqueued - d->t0;
    end_line(d);
    printf("\nrjq-demo: %ld jobs on queue %s\n", n, d->queue_name);
    printf("  total time      %.3f s (all enqueued after %.3f s, %.0f jobs/s)\n", total, enq,
           enq > 0 ? (double)n / enq : 0.0);
    printf("  throughput      %.0f jobs/s, enqueue to last outcome, concurrency %d\n",
           total > 0 ? (double)n / total : 0.0, d->cfg.concurrency);
    printf("  retried         %ld (failed once, then completed after a %ld ms backoff)\n",
           d->retried, d->cfg.backoff_ms);
    printf("  dead            %ld\n", d->dead);
    printf("  Redis counters  enqueued %lld  completed %lld  failed %lld  retried %lld  dead %lld"
           "  reclaimed %lld  replayed %lld\n",
           s->enqueued, s->completed, s->failed, s->retried, s->dead, s->reclaimed, s->replayed);
    printf("  Redis depths    ready %lld  delayed %lld  active %lld  dead %lld\n", s->ready,
           s->delayed, s->active, s->dead_depth);

    int ok = 1;
    ok &= check("enqueued", s->enqueued, n);
    ok &= check("completed", s->completed, n - d->expect_dead);
    ok &= check("completed (seen by the demo)", d->completed, s->completed);
    ok &= check("retried", s->retried, d->expect_retried);
    ok &= check("retried (seen by the demo)", d->retried, s->retried);
    ok &= check("dead", s->dead, d->expect_dead);
    ok &= check("dead (seen by the demo)", d->dead, s->dead);
    ok &= check("failed", s->failed, s->retried + s->dead);
    ok &= check("ready depth", s->ready, 0);
    ok &= check("delayed depth", s->delayed, 0);
    ok &= check("active depth", s->active, 0);
    ok &= check("dead depth", s->dead_depth, d->expect_dead);
    if (s->reclaimed != 0) printf("  note            %lld jobs were reclaimed (lease expired)\n", s->reclaimed);
    printf("  check           %s\n", ok ? "OK: Redis agrees with the demo" : "FAILED");
    fflush(stdout);
    d->exit_code = ok ? 0 : 1;
}

/* ---- options -------------------------------------------------------------- */

static void usage(FILE *f) {
    fprintf(f,
            "usage: rjq-demo [options]\n"
            "  -n, --jobs N          jobs to run (env DEMO_N; default 100000)\n"
            "  -c, --concurrency C   worker concurrency (env DEMO_CONCURRENCY; default 64)\n"
            "  -b, --batch B         jobs per enqueue batch (default 1000, max %d)\n"
            "  -i, --inflight K      enqueue batches in flight at once (default 4)\n"
            "  -f, --fail-every F    1 job in F fails once and is retried (default 50; 0: none)\n"
            "  -d, --dead D          D jobs fail fatally and go dead (env DEMO_DEAD; default 0)\n"
            "      --backoff-ms MS   fixed retry backoff (default 20)\n"
            "  -q, --queue NAME      queue name (default demo-<time>-<pid>; use a fresh one)\n"
            "      --stall-timeout S give up after S seconds without progress (default 30)\n"
            "      --progress / --no-progress   force the progress display on or off\n"
            "  -h, --help\n"
            "Redis: env REDIS_URL (default redis://127.0.0.1:6379).\n",
            RJQ_BATCH_MAX);
}

static int parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    if (s == NULL || *s == '\0') return -1;
    long v = strtol(s, &end, 10);
    if (*end != '\0' || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int env_long(const char *name, long lo, long hi, long *out) {
    const char *s = getenv(name);
    if (s == NULL || *s == '\0') return 0;
    if (parse_long(s, lo, hi, out) == 0) return 0;
    fprintf(stderr, "rjq-demo: bad %s=%s (want %ld..%ld)\n", name, s, lo, hi);
    return -1;
}

static int parse_args(int argc, char **argv, config *cfg) {
    enum { OPT_BACKOFF = 256, OPT_STALL, OPT_PROGRESS, OPT_NO_PROGRESS };
    static const struct option longopts[] = {
        {"jobs", required_argument, NULL, 'n'},
        {"concurrency", required_argument, NULL, 'c'},
        {"batch", required_argument, NULL, 'b'},
        {"inflight", required_argument, NULL, 'i'},
        {"fail-every", required_argument, NULL, 'f'},
        {"dead", required_argument, NULL, 'd'},
        {"queue", required_argument, NULL, 'q'},
        {"backoff-ms", required_argument, NULL, OPT_BACKOFF},
        {"stall-timeout", required_argument, NULL, OPT_STALL},
        {"progress", no_argument, NULL, OPT_PROGRESS},
        {"no-progress", no_argument, NULL, OPT_NO_PROGRESS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    long conc = 64, inflight = 4;
    cfg->url = getenv("REDIS_URL");
    if (cfg->url == NULL || *cfg->url == '\0') cfg->url = "redis://127.0.0.1:6379";
    cfg->queue = NULL;
    cfg->jobs = 100000;
    cfg->batch = 1000;
    cfg->fail_every = 50;
    cfg->dead = 0;
    cfg->backoff_ms = 20;
    cfg->stall_s = 30;
    cfg->progress = -1;
    if (env_long("DEMO_N", 1, 1000000000L, &cfg->jobs) || env_long("DEMO_CONCURRENCY", 1, 100000, &conc) ||
        env_long("DEMO_DEAD", 0, 1000000000L, &cfg->dead))
        return -1;

    int ch;
    while ((ch = getopt_long(argc, argv, "n:c:b:i:f:d:q:h", longopts, NULL)) != -1) {
        int bad = 0;
        switch (ch) {
        case 'n': bad = parse_long(optarg, 1, 1000000000L, &cfg->jobs); break;
        case 'c': bad = parse_long(optarg, 1, 100000, &conc); break;
        case 'b': bad = parse_long(optarg, 1, RJQ_BATCH_MAX, &cfg->batch); break;
        case 'i': bad = parse_long(optarg, 1, 1000, &inflight); break;
        case 'f': bad = parse_long(optarg, 0, 1000000000L, &cfg->fail_every); break;
        case 'd': bad = parse_long(optarg, 0, 1000000000L, &cfg->dead); break;
        case 'q': cfg->queue = optarg; break;
        case OPT_BACKOFF: bad = parse_long(optarg, 1, 3600000, &cfg->backoff_ms); break;
        case OPT_STALL: bad = parse_long(optarg, 1, 86400, &cfg->stall_s); break;
        case OPT_PROGRESS: cfg->progress = 1; break;
        case OPT_NO_PROGRESS: cfg->progress = 0; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return -1;
        }
        if (bad) {
            fprintf(stderr, "rjq-demo: bad value for -%c: %s\n", ch < 256 ? ch : '-', optarg);
            return -1;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return -1;
    }
    if (cfg->dead > cfg->jobs) {
        fprintf(stderr, "rjq-demo: --dead %ld is more than --jobs %ld\n", cfg->dead, cfg->jobs);
        return -1;
    }
    cfg->concurrency = (int)conc;
    cfg->inflight = (int)inflight;
    return 0;
}

/* ---- main ----------------------------------------------------------------- */

/* Create the loop, the client, the queue and the worker, and start the
 * producer. Returns 0, or -1 after printing why. */
static int setup(demo *d) {
    d->base = event_base_new();
    if (d->base == NULL) {
        fprintf(stderr, "rjq-demo: event_base_new failed\n");
        return -1;
    }

    rjq_client_options co = RJQ_CLIENT_OPTIONS_INIT;
    co.url = d->cfg.url;
    co.name = "rjq-demo";
    co.on_event = on_event;
    co.event_data = d;
    int rc = rjq_libevent_client_new(&d->c, d->base, &co);
    if (rc != RJQ_OK) {
        fprintf(stderr, "rjq-demo: cannot create client for %s: %s\n", d->cfg.url, rjq_strerror(rc));
        return -1;
    }

    if (d->cfg.queue) snprintf(d->queue_name, sizeof d->queue_name, "%s", d->cfg.queue);
    else snprintf(d->queue_name, sizeof d->queue_name, "demo-%ld-%ld", (long)time(NULL), (long)getpid());
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.retention_ms = 60000; /* completed jobs are deleted after a minute */
    if ((rc = rjq_queue_open(d->c, d->queue_name, &qo, &d->q)) != RJQ_OK) {
        fprintf(stderr, "rjq-demo: cannot open queue %s: %s\n", d->queue_name, rjq_strerror(rc));
        return -1;
    }

    /* Every job: 3 attempts, a fixed backoff between them. */
    d->jopts = (rjq_job_options)RJQ_JOB_OPTIONS_INIT;
    d->jopts.max_attempts = 3;
    d->jopts.backoff.type = RJQ_BACKOFF_FIXED;
    d->jopts.backoff.base_ms = d->cfg.backoff_ms;

    d->items = calloc((size_t)d->cfg.batch, sizeof *d->items);
    d->payloads = malloc((size_t)d->cfg.batch * PAYLOAD_MAX);
    if (d->items == NULL || d->payloads == NULL) {
        fprintf(stderr, "rjq-demo: out of memory\n");
        return -1;
    }
    for (long i = 0; i < d->cfg.jobs; i++) {
        d->expect_dead += is_dead(d, i);
        d->expect_retried += fails_once(d, i);
    }

    struct timeval tv = {0, TICK_MS * 1000};
    d->tick = event_new(d->base, -1, EV_PERSIST, on_tick, d);
    d->sigint = evsignal_new(d->base, SIGINT, on_signal, d);
    d->sigterm = evsignal_new(d->base, SIGTERM, on_signal, d);
    if (d->tick == NULL || d->sigint == NULL || d->sigterm == NULL || event_add(d->tick, &tv) ||
        event_add(d->sigint, NULL) || event_add(d->sigterm, NULL)) {
        fprintf(stderr, "rjq-demo: cannot set up libevent events\n");
        return -1;
    }

    printf("rjq-demo: %ld jobs, queue %s on %s\n", d->cfg.jobs, d->queue_name, d->cfg.url);
    printf("  worker concurrency %d; enqueue batches of %ld, %d in flight; "
           "%ld fail once (%ld ms backoff), %ld fail for good\n",
           d->cfg.concurrency, d->cfg.batch, d->cfg.inflight, d->expect_retried,
           d->cfg.backoff_ms, d->expect_dead);
    fflush(stdout);

    d->t0 = now_s();
    d->last_progress_t = d->t0;

    /* The worker and the producer share the client and its connections.
     * Commands issued before the connection is up are queued. */
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = d->cfg.concurrency;
    if ((rc = rjq_worker_start(d->q, &wo, handler, d, &d->w)) != RJQ_OK) {
        fprintf(stderr, "rjq-demo: cannot start the worker: %s\n", rjq_strerror(rc));
        return -1;
    }
    pump(d);
    return d->exit_code ? -1 : 0;
}

int main(int argc, char **argv) {
    static demo d; /* zeroed */
    if (parse_args(argc, argv, &d.cfg) != 0) return 2;
    d.tty = isatty(STDOUT_FILENO);
    signal(SIGPIPE, SIG_IGN); /* a dropped Redis connection must not kill us */

    if (setup(&d) == 0) event_base_dispatch(d.base);
    else d.exit_code = 1;
    end_line(&d);
    if (d.exit_code == 0 && !d.have_stats) d.exit_code = 1; /* the loop ran dry */

    /* Free the client outside of any callback: pending callbacks run with
     * RJQ_ECANCELED, a worker still running is stopped, connections close. */
    rjq_client_free(d.c);
    if (d.tick) event_free(d.tick);
    if (d.sigint) event_free(d.sigint);
    if (d.sigterm) event_free(d.sigterm);
    if (d.base) event_base_free(d.base);
    free(d.items);
    free(d.payloads);
    return d.exit_code;
}
