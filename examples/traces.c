/*
 * rjq-traces: W3C trace context through a job, end to end (rjq.h: job
 * headers and the worker's on_job_start / on_job_finish hooks).
 *
 *     REDIS_URL=redis://127.0.0.1:6379 rjq-traces [N]
 *
 * The producer starts a trace (a random trace id and span id), and
 * enqueues N jobs (default 3) on the queue "traces-example" with the
 * header `traceparent` ("00-<trace id>-<span id>-01") and a header of its
 * own (`tenant`). A worker on the same client takes them: its
 * on_job_start hook reads the job's traceparent, makes a child span (a
 * new span id under the same trace id) and prints
 *
 *     start job=<id> attempt=<n> trace=<trace id> parent=<span id> span=<child> wait_ms=<ms>
 *
 * the handler completes the job, and on_job_finish ends the child span:
 *
 *     finish job=<id> trace=<trace id> span=<child> outcome=completed run_ms=<ms>
 *
 * That is where an application creates and ends its OpenTelemetry span
 * (a SpanContext from the traceparent as the parent, the wait and run
 * times as attributes), or writes its log lines, without patching rjq.
 * The producer awaits each job (rjq_enqueue_await): the outcome hands the
 * job's headers back (rjq_outcome_get_header), so the producer's side
 * closes under the same trace:
 *
 *     outcome job=<id> trace=<trace id> parent=<span id> status=completed tenant=<tenant>
 *
 * Prints "producer trace=<trace id> span=<span id>" first. Exits 0 once
 * every job finished and its outcome came back, 1 on an error.
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <rjq/libevent.h> /* header-only glue: rjq on a libevent loop */

#define QUEUE "traces-example"
#define MAX_RUNNING 8

typedef struct span {
    rjq_job *job; /* NULL: a free entry */
    char trace[33], span[17];
} span;

typedef struct app {
    struct event_base *base;
    rjq_client *client;
    rjq_worker *worker;
    long jobs, finished, outcomes;
    int failed;
    span running[MAX_RUNNING]; /* the child span of each running job */
} app;

/* n random lowercase hex digits into out (NUL-terminated), not all zero
 * (an all-zero id is invalid in W3C trace context). */
static void random_hex(char *out, size_t n) {
    static const char digits[] = "0123456789abcdef";
    int zero = 1;
    for (size_t i = 0; i < n; i++) {
        out[i] = digits[rand() & 15];
        if (out[i] != '0') zero = 0;
    }
    if (zero) out[n - 1] = '1';
    out[n] = '\0';
}

static int all_hex(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

/* traceparent "00-<32 hex>-<16 hex>-<2 hex>": its trace id and parent id,
 * or -1 (an invalid one starts a new trace, as W3C asks). */
static int parse_traceparent(const char *tp, char trace[33], char parent[17]) {
    if (tp == NULL || strlen(tp) < 55 || strncmp(tp, "00-", 3) != 0 || tp[35] != '-' ||
        tp[52] != '-' || !all_hex(tp + 3, 32) || !all_hex(tp + 36, 16) || !all_hex(tp + 53, 2))
        return -1;
    memcpy(trace, tp + 3, 32);
    trace[32] = '\0';
    memcpy(parent, tp + 36, 16);
    parent[16] = '\0';
    return 0;
}

static void on_job_start(rjq_job *job, long long wait_ms, void *data) {
    app *a = data;
    span *s = NULL;
    for (int i = 0; i < MAX_RUNNING && s == NULL; i++)
        if (a->running[i].job == NULL) s = &a->running[i];
    if (s == NULL) return; /* (more running than this example keeps) */
    s->job = job;
    char parent[17] = "-";
    if (parse_traceparent(rjq_job_get_header(job, "traceparent"), s->trace, parent) != 0)
        random_hex(s->trace, 32); /* none, or invalid: a new trace */
    random_hex(s->span, 16);
    const char *tenant = rjq_job_get_header(job, "tenant");
    printf("start job=%s attempt=%d trace=%s parent=%s span=%s wait_ms=%lld tenant=%s\n",
           rjq_job_get_id(job), rjq_job_get_attempt(job), s->trace, parent, s->span, wait_ms,
           tenant ? tenant : "-");
}

static void on_job_finish(rjq_job *job, int failed, long long run_ms, void *data) {
    app *a = data;
    for (int i = 0; i < MAX_RUNNING; i++) {
        span *s = &a->running[i];
        if (s->job != job) continue;
        printf("finish job=%s trace=%s span=%s outcome=%s run_ms=%lld\n", rjq_job_get_id(job),
               s->trace, s->span, failed ? "failed" : "completed", run_ms);
        s->job = NULL;
    }
}

static void on_stopped(rjq_worker *w, int status, void *data);

/* every job completed by the worker and awaited by the producer: stop */
static void maybe_stop(app *a) {
    if (a->finished == a->jobs && a->outcomes == a->jobs && a->worker)
        rjq_worker_stop(a->worker, on_stopped, a);
}

static void on_stopped(rjq_worker *w, int status, void *data) {
    app *a = data;
    (void)w;
    if (status != RJQ_OK) a->failed = 1;
    a->worker = NULL;
    rjq_client_free(a->client);
    a->client = NULL;
    event_base_loopexit(a->base, NULL);
}

static void on_completed(rjq_client *c, int status, void *data) {
    app *a = data;
    (void)c;
    if (status != RJQ_OK) {
        fprintf(stderr, "rjq-traces: complete: %s\n", rjq_strerror(status));
        a->failed = 1;
    }
    a->finished++;
    maybe_stop(a);
}

static void handler(rjq_job *job, void *data) {
    /* the work; a real handler would pass the child span's traceparent
     * ("00-<trace>-<span>-01") on to what it calls */
    rjq_job_complete(job, "done", 4, on_completed, data);
}

/* The producer's await: the job's outcome, with the headers it was
 * enqueued with (the trace the producer started). */
static void on_outcome(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    app *a = data;
    char trace[33] = "-", parent[17] = "-";
    if (o == NULL || status != RJQ_OK) {
        fprintf(stderr, "rjq-traces: await: %s (%s)\n", rjq_strerror(status),
                rjq_client_get_errmsg(c));
        a->failed = 1;
        event_base_loopexit(a->base, NULL);
        return;
    }
    parse_traceparent(rjq_outcome_get_header(o, "traceparent"), trace, parent);
    const char *tenant = rjq_outcome_get_header(o, "tenant");
    printf("outcome job=%s trace=%s parent=%s status=completed tenant=%s\n", o->id, trace, parent,
           tenant ? tenant : "-");
    a->outcomes++;
    maybe_stop(a);
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    srand((unsigned)(ts.tv_nsec ^ ts.tv_sec));
    app a;
    memset(&a, 0, sizeof a);
    a.jobs = argc > 1 ? atol(argv[1]) : 3;
    if (a.jobs < 1 || a.jobs > 1000) {
        fprintf(stderr, "usage: rjq-traces [N]   (1..1000 jobs; Redis: env REDIS_URL)\n");
        return 2;
    }
    if ((a.base = event_base_new()) == NULL) return 1;
    rjq_client_options co = RJQ_CLIENT_OPTIONS_INIT;
    co.url = getenv("REDIS_URL");
    rjq_queue *q;
    int rc = rjq_libevent_client_new(&a.client, a.base, &co);
    if (rc == RJQ_OK) rc = rjq_queue_open(a.client, QUEUE, NULL, &q);
    if (rc != RJQ_OK) {
        fprintf(stderr, "rjq-traces: %s\n", rjq_strerror(rc));
        return 1;
    }

    /* the producer's trace: its traceparent goes with every job */
    char trace[33], parent[17], traceparent[56];
    random_hex(trace, 32);
    random_hex(parent, 16);
    snprintf(traceparent, sizeof traceparent, "00-%s-%s-01", trace, parent);
    printf("producer trace=%s span=%s\n", trace, parent);
    rjq_header headers[] = {{"traceparent", traceparent}, {"tenant", "acme"}};
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.headers = headers;
    jo.nheaders = 2;
    for (long i = 0; i < a.jobs && rc == RJQ_OK; i++)
        rc = rjq_enqueue_await(q, "work", 4, &jo, NULL, on_outcome, &a, NULL);

    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 2;
    wo.on_job_start = on_job_start;
    wo.on_job_finish = on_job_finish;
    if (rc == RJQ_OK) rc = rjq_worker_start(q, &wo, handler, &a, &a.worker);
    if (rc != RJQ_OK) {
        fprintf(stderr, "rjq-traces: %s\n", rjq_strerror(rc));
        rjq_client_free(a.client);
        event_base_free(a.base);
        return 1;
    }
    event_base_dispatch(a.base);
    if (a.client) rjq_client_free(a.client);
    event_base_free(a.base);
    fflush(stdout);
    return a.failed || a.finished != a.jobs || a.outcomes != a.jobs ? 1 : 0;
}
