/*
 * rjq-worker: a minimal rjq worker to copy from.
 *
 *     REDIS_URL=redis://127.0.0.1:6379 rjq-worker QUEUE [CONCURRENCY]
 *
 * Runs jobs from QUEUE, up to CONCURRENCY (default 4) at a time: prints
 * each job's payload and completes it with the result "ok" after JOB_MS
 * milliseconds (env, default 0: a job that takes time, as real ones do).
 *
 * SIGINT (Ctrl-C) or SIGTERM closes it gracefully (rjq_client_close): it
 * takes no more jobs, lets the running ones finish for up to CLOSE_MS
 * (env, default 10000), hands back those still running then (first in
 * line, their attempt not counted: nothing waits for a lease), sends every
 * completion, and returns from the event loop. A second signal quits at
 * once (rjq_client_free); jobs still running then come back when their
 * lease runs out.
 *
 * A program that runs rjq must ignore SIGPIPE (a connection dropped while
 * writing would otherwise kill it): see main().
 *
 * Try it with rjq-producer:
 *
 *     rjq-worker emails &
 *     rjq-producer emails hello world
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <event2/event.h>
#include <rjq/libevent.h> /* header-only glue: rjq on a libevent loop */

struct app;

/* A job being worked on (JOB_MS > 0): it completes when its timer fires. */
typedef struct work {
    struct app *app;
    rjq_job *job;
    struct event *timer;
    struct work *prev, *next;
} work;

typedef struct app {
    struct event_base *base;
    struct event *sigint, *sigterm;
    rjq_client *client;
    int closing;
    long job_ms;
    work *working;            /* jobs being worked on */
} app;

static void work_unlink(app *a, work *w) {
    if (w->prev) w->prev->next = w->next;
    else a->working = w->next;
    if (w->next) w->next->prev = w->prev;
    event_free(w->timer);
    free(w);
}

/* Print bytes, escaping anything that is not printable ASCII (payloads are
 * binary-safe bytes, not strings). */
static void print_bytes(const unsigned char *p, size_t len) {
    for (size_t i = 0; i < len; i++) {
        if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\') putchar(p[i]);
        else printf("\\x%02x", p[i]);
    }
}

/* Called once rjq knows the outcome of a completion. */
static void on_completed(rjq_client *c, int status, void *data) {
    (void)c, (void)data;
    /* RJQ_ELEASELOST: the job's lease expired and it was handed to another
     * worker; our result was not stored. RJQ_ECANCELED: the client was
     * freed first (second Ctrl-C). */
    if (status != RJQ_OK && status != RJQ_ECANCELED)
        fprintf(stderr, "rjq-worker: complete: %s\n", rjq_strerror(status));
}

static void complete(rjq_job *job) {
    /* The handle is released whatever this returns. RJQ_ECLOSED: the
     * client is closing (handed back at the close's deadline); any other
     * error comes to on_completed. */
    (void)rjq_job_complete(job, "ok", 2, on_completed, NULL);
}

static void on_work_done(evutil_socket_t fd, short what, void *arg) {
    work *w = arg;
    (void)fd, (void)what;
    complete(w->job);
    work_unlink(w->app, w);
}

/*
 * The job handler. The job is ours until we call rjq_job_complete() or
 * rjq_job_fail(), exactly once: here, or later from any callback (rjq keeps
 * extending the job's lease meanwhile). The payload is valid until then.
 */
static void handle_job(rjq_job *job, void *data) {
    app *a = data;
    size_t len;
    const void *payload = rjq_job_get_payload(job, &len);

    printf("job %s (attempt %d of %d): ", rjq_job_get_id(job), rjq_job_get_attempt(job),
           rjq_job_get_max_attempts(job));
    print_bytes(payload, len);
    putchar('\n');
    fflush(stdout);

    /* To fail it instead, and have it retried after its backoff:
     *     rjq_job_fail(job, "reason", RJQ_FAIL_RETRY, -1, NULL, NULL); */
    work *w = a->job_ms > 0 ? malloc(sizeof *w) : NULL;
    if (w == NULL) {
        complete(job);
        return;
    }
    w->app = a;
    w->job = job;
    w->prev = NULL;
    w->next = a->working;
    if (a->working) a->working->prev = w;
    a->working = w;
    w->timer = evtimer_new(a->base, on_work_done, w);
    struct timeval tv = {a->job_ms / 1000, (a->job_ms % 1000) * 1000};
    evtimer_add(w->timer, &tv);
}

/* Leave the loop (jobs whose timers are still pending are abandoned with
 * it: the close handed them back). */
static void leave_loop(app *a) {
    a->client = NULL;
    event_del(a->sigint);
    event_del(a->sigterm);
    event_base_loopexit(a->base, NULL);
}

/* The close is done and the client freed. */
static void on_closed(const rjq_close_report *r, void *data) {
    app *a = data;
    fprintf(stderr, "rjq-worker: closed (%s; %zu running jobs handed back)\n",
            rjq_strerror(r->status), r->handed_back);
    leave_loop(a);
}

static void on_signal(evutil_socket_t sig, short what, void *arg) {
    app *a = arg;
    (void)sig, (void)what;
    if (a->closing) {
        fprintf(stderr, "rjq-worker: quitting now\n");
        rjq_client_free(a->client); /* on_closed comes, with RJQ_ECANCELED */
        return;
    }
    a->closing = 1;
    const char *env = getenv("CLOSE_MS");
    long deadline = env ? atol(env) : 10000;
    fprintf(stderr, "rjq-worker: closing (running jobs get %ld ms; signal again to quit now)\n",
            deadline);
    if (rjq_client_close(a->client, deadline, on_closed, a) != RJQ_OK) {
        rjq_client_free(a->client);
        leave_loop(a);
    }
}

/* Connection news: rjq reconnects by itself, this is only for the log. */
static void on_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    (void)c, (void)data;
    const char *which = conn == RJQ_CONN_COMMAND ? "command" : "subscriber";
    if (ev == RJQ_EVENT_CONNECTED) fprintf(stderr, "rjq-worker: %s connection up\n", which);
    else fprintf(stderr, "rjq-worker: %s connection %s: %s\n", which,
                 ev == RJQ_EVENT_DISCONNECTED ? "lost, reconnecting" : "error",
                 detail ? detail : "");
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: rjq-worker QUEUE [CONCURRENCY]   (Redis: env REDIS_URL)\n");
        return 2;
    }
    int concurrency = argc == 3 ? atoi(argv[2]) : 4;
    if (concurrency < 1) {
        fprintf(stderr, "rjq-worker: CONCURRENCY must be at least 1\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN); /* a dropped connection must not kill us */

    app a = {0};
    a.job_ms = getenv("JOB_MS") ? atol(getenv("JOB_MS")) : 0;
    a.base = event_base_new();
    if (a.base == NULL) return 1;

    /* 1. A client: two connections (commands, pub/sub) shared by every
     *    queue and worker of the program. NULL url: redis://127.0.0.1:6379. */
    rjq_client_options co = RJQ_CLIENT_OPTIONS_INIT;
    co.url = getenv("REDIS_URL");
    co.on_event = on_event;
    int rc = rjq_libevent_client_new(&a.client, a.base, &co);
    if (rc != RJQ_OK) {
        fprintf(stderr, "rjq-worker: %s\n", rjq_strerror(rc));
        event_base_free(a.base);
        return 1;
    }

    /* 2. The queue, and a worker on it. */
    rjq_queue *q;
    rc = rjq_queue_open(a.client, argv[1], NULL, &q);
    if (rc == RJQ_OK) {
        rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
        wo.concurrency = concurrency;
        rjq_worker *w; /* freed by the close */
        rc = rjq_worker_start(q, &wo, handle_job, &a, &w);
    }
    if (rc != RJQ_OK) {
        fprintf(stderr, "rjq-worker: %s: %s\n", argv[1], rjq_strerror(rc));
        rjq_client_free(a.client);
        event_base_free(a.base);
        return 1;
    }

    /* 3. Signals through the loop, so that stopping runs as a normal loop
     *    callback (rjq functions are not async-signal-safe). */
    a.sigint = evsignal_new(a.base, SIGINT, on_signal, &a);
    a.sigterm = evsignal_new(a.base, SIGTERM, on_signal, &a);
    event_add(a.sigint, NULL);
    event_add(a.sigterm, NULL);

    fprintf(stderr, "rjq-worker: queue %s, concurrency %d\n", argv[1], concurrency);
    event_base_dispatch(a.base);

    rjq_client_free(a.client); /* NULL (already freed) is a no-op */
    /* Jobs still being worked on were handed back by the close: drop them
     * (completing a handle of a freed client only frees it). */
    while (a.working) {
        rjq_job_complete(a.working->job, NULL, 0, NULL, NULL);
        work_unlink(&a, a.working);
    }
    event_free(a.sigint);
    event_free(a.sigterm);
    event_base_free(a.base);
    return 0;
}
