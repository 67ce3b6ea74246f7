/*
 * rjq serve --demo: the redis docs' job-queue demo on the dashboard. A
 * worker pool in the server process runs the queue "demo" with a work
 * latency, a failure rate and a hang rate the page sets; the page enqueues
 * jobs of a kind and runs a reclaim sweep, so a newcomer watches jobs flow,
 * fail, retry, hang and come back.
 *
 *   GET  /v1/demo                        the pool's settings and counters
 *   POST /v1/demo/enqueue?kind=K&n=N     N jobs (1..1000) {"kind":K,"n":i}
 *   POST /v1/demo/pool?size=&latency_ms=&fail_pct=&hang_pct=
 *                                        the pool (size 0 stops it)
 *   POST /v1/demo/reclaim                a lease sweep of "demo" now
 *
 * The settings and counters also go to every event stream as "demo"
 * events when they change (demo_tick, every second).
 *
 * Demo jobs have a timeout (HANG_TIMEOUT_MS) and up to 3 attempts: a hung
 * job is failed as timed out by the next sweep past it (the pool's own,
 * every RECLAIM_MS, or the button) and retried, or dead when its attempts
 * are spent; a failed one is retried after its backoff.
 */
#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#define DEMO_QUEUE "demo"
#define HANG_TIMEOUT_MS 5000
#define RECLAIM_MS 15000
#define ENQUEUE_MAX 1000

typedef struct demo_job {
    struct demo *d;
    rjq_job *job;
    struct event *timer;  /* its work's end; NULL while it hangs */
    int fail;
    struct demo_job *prev, *next;
} demo_job;

typedef struct demo {
    server *s;
    squeue *q;
    rjq_worker *w;
    int size;
    long latency_ms;
    int fail_pct, hang_pct;
    unsigned seed;
    demo_job *jobs;
    long long done, failed, hung, dropped; /* since the server started */
    char *sent;           /* the last "demo" event (owned) */
    int closing;          /* the client closes: no pool change */
} demo;

static void unlink_job(demo_job *j) {
    demo *d = j->d;
    if (j->prev) j->prev->next = j->next;
    else d->jobs = j->next;
    if (j->next) j->next->prev = j->prev;
    if (j->timer) event_free(j->timer);
    free(j);
}

static void on_work_done(evutil_socket_t fd, short what, void *arg) {
    demo_job *j = arg;
    demo *d = j->d;
    (void)fd, (void)what;
    char result[160];
    if (j->fail) {
        d->failed++;
        rjq_job_fail(j->job, "demo failure (the pool's failure rate)", RJQ_FAIL_RETRY, -1, NULL,
                     NULL);
    } else {
        size_t len;
        const void *p = rjq_job_get_payload(j->job, &len);
        int n = snprintf(result, sizeof result, "{\"ok\":true,\"payload_bytes\":%zu}", len);
        (void)p;
        d->done++;
        rjq_job_complete(j->job, result, (size_t)n, NULL, NULL);
    }
    unlink_job(j);
}

static void handler(rjq_job *job, void *data) {
    demo *d = data;
    demo_job *j = calloc(1, sizeof *j);
    if (j == NULL) {
        rjq_job_fail(job, "out of memory", RJQ_FAIL_RETRY, 1000, NULL, NULL);
        return;
    }
    j->d = d;
    j->job = job;
    j->next = d->jobs;
    if (j->next) j->next->prev = j;
    d->jobs = j;
    int roll = (int)(rand_r(&d->seed) % 100);
    if (roll < d->hang_pct) { /* it never finishes: its timeout brings it back */
        d->hung++;
        return;
    }
    j->fail = (int)(rand_r(&d->seed) % 100) < d->fail_pct;
    /* the latency, give or take half of it */
    long ms = d->latency_ms / 2 + (d->latency_ms ? (long)(rand_r(&d->seed) % (unsigned)(d->latency_ms + 1)) : 0);
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    j->timer = evtimer_new(d->s->base, on_work_done, j);
    if (j->timer == NULL || event_add(j->timer, &tv) != 0) {
        rjq_job_fail(job, "out of memory", RJQ_FAIL_RETRY, 1000, NULL, NULL);
        unlink_job(j);
    }
}

/* A hung job timed out (or was cancelled): let go of it. Its finish is
 * refused (RJQ_ELEASELOST, RJQ_EJOBCANCELED) and changes nothing: the
 * queue has failed it as timed out already, or its next sweep will. */
static void on_notice(rjq_job *job, int reason, void *data) {
    demo *d = data;
    (void)reason;
    for (demo_job *j = d->jobs; j; j = j->next)
        if (j->job == job) {
            d->dropped++;
            rjq_job_complete(job, "", 0, NULL, NULL);
            unlink_job(j);
            return;
        }
}

static demo *demo_of(server *s) {
    if (s->demo) return s->demo;
    demo *d = calloc(1, sizeof *d);
    if (d == NULL) return NULL;
    d->s = s;
    d->seed = (unsigned)time(NULL);
    d->latency_ms = 200;
    if (queues_get(s, DEMO_QUEUE, &d->q) != RJQ_OK) {
        free(d);
        return NULL;
    }
    d->q->refs++; /* (its pool's queue is never let go) */
    s->demo = d;
    return d;
}

static json_t *demo_json(const demo *d) {
    long running = 0;
    for (const demo_job *j = d->jobs; j; j = j->next) running++;
    return json_pack("{ss si sI si si sI sI sI sI sI sI}", "queue", DEMO_QUEUE, "size", d->size,
                     "latency_ms", (json_int_t)d->latency_ms, "fail_pct", d->fail_pct, "hang_pct",
                     d->hang_pct, "running", (json_int_t)running, "done", (json_int_t)d->done,
                     "failed", (json_int_t)d->failed, "hung", (json_int_t)d->hung, "dropped",
                     (json_int_t)d->dropped, "timeout_ms", (json_int_t)HANG_TIMEOUT_MS);
}

/* (Re)start the pool at its size: a new size stops the worker (its
 * running jobs finish) and starts one of the new concurrency. */
static int set_size(demo *d, int size) {
    if (d->closing) return RJQ_ECLOSED;
    if (size == d->size && (d->w != NULL) == (size > 0)) return RJQ_OK;
    if (d->w) rjq_worker_stop(d->w, NULL, NULL);
    d->w = NULL;
    d->size = size;
    if (size == 0) return RJQ_OK;
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = size;
    wo.reclaim_ms = RECLAIM_MS;
    wo.on_notice = on_notice;
    return rjq_worker_start(d->q->q, &wo, handler, d, &d->w);
}

static void on_enqueued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    held *h = data;
    (void)c, (void)jobs;
    struct evhttp_request *req = held_end(h);
    if (req && status == RJQ_OK) reply_json(req, 200, json_pack("{ss sI}", "queue", DEMO_QUEUE,
                                                                "enqueued", (json_int_t)n));
    else if (req) reply_rjq_error(req, status, NULL);
    free(h);
}

static void enqueue(demo *d, struct evhttp_request *req, const struct evkeyvalq *args) {
    long long n;
    const char *kind = query_get(args, "kind");
    if (query_only(req, args, ROUTE_DEMO_ENQUEUE) || query_ll(req, args, "n", 1, ENQUEUE_MAX, 10, &n)) return;
    if (kind == NULL) kind = "email";
    if (strcmp(kind, "email") && strcmp(kind, "thumbnail") && strcmp(kind, "report")) {
        reply_error(req, 400, "kind must be email, thumbnail or report");
        return;
    }
    static rjq_enqueue_item items[ENQUEUE_MAX];
    static char payloads[ENQUEUE_MAX][64];
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.timeout_ms = HANG_TIMEOUT_MS;
    jo.max_attempts = 3;
    for (long long i = 0; i < n; i++) {
        int len = snprintf(payloads[i], sizeof payloads[i], "{\"kind\":\"%s\",\"n\":%lld}", kind, i + 1);
        items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), payloads[i], (size_t)len, &jo};
    }
    held *h = calloc(1, sizeof *h);
    if (h == NULL) {
        reply_error(req, 503, "out of memory");
        return;
    }
    int rc = rjq_enqueue_batch(d->q->q, items, (size_t)n, on_enqueued, h);
    if (rc != RJQ_OK) {
        free(h);
        reply_rjq_error(req, rc, NULL);
        return;
    }
    held_start(d->s, h, req, NULL, 0); /* (the callback frees h either way) */
}

static void on_reclaimed(rjq_client *c, int status, long long n, void *data) {
    held *h = data;
    (void)c;
    struct evhttp_request *req = held_end(h);
    if (req && status == RJQ_OK) reply_json(req, 200, json_pack("{ss sI}", "queue", DEMO_QUEUE,
                                                                "reclaimed", (json_int_t)n));
    else if (req) reply_rjq_error(req, status, NULL);
    free(h);
}

void demo_handle(server *s, struct evhttp_request *req, const char *rest,
                 const struct evkeyvalq *args) {
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    demo *d = demo_of(s);
    long long size, latency, fail, hang;
    if (d == NULL) {
        reply_error(req, 503, "the demo could not start (out of memory?)");
    } else if (rest[0] == '\0' && (m == EVHTTP_REQ_GET || m == EVHTTP_REQ_HEAD)) {
        if (query_only(req, args, ROUTE_DEMO) == 0) reply_json(req, 200, demo_json(d));
    } else if (m != EVHTTP_REQ_POST) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", rest[0] ? "POST" : "GET");
        reply_error(req, 405, "method not allowed here");
    } else if (strcmp(rest, "/enqueue") == 0) {
        enqueue(d, req, args);
    } else if (strcmp(rest, "/pool") == 0) {
        if (query_only(req, args, ROUTE_DEMO_POOL) == 0 &&
            query_ll(req, args, "size", 0, 1000, d->size, &size) == 0 &&
            query_ll(req, args, "latency_ms", 0, 60000, d->latency_ms, &latency) == 0 &&
            query_ll(req, args, "fail_pct", 0, 100, d->fail_pct, &fail) == 0 &&
            query_ll(req, args, "hang_pct", 0, 100, d->hang_pct, &hang) == 0) {
            d->latency_ms = (long)latency;
            d->fail_pct = (int)fail;
            d->hang_pct = (int)hang;
            int rc = set_size(d, (int)size);
            if (rc == RJQ_OK) reply_json(req, 200, demo_json(d));
            else reply_rjq_error(req, rc, NULL);
        }
    } else if (strcmp(rest, "/reclaim") == 0) {
        if (query_only(req, args, ROUTE_DEMO_RECLAIM)) return;
        held *h = calloc(1, sizeof *h);
        int rc = h ? rjq_queue_reclaim(d->q->q, on_reclaimed, h) : RJQ_ENOMEM;
        if (rc != RJQ_OK) {
            free(h);
            reply_rjq_error(req, rc, NULL);
        } else {
            held_start(s, h, req, NULL, 0);
        }
    } else {
        reply_error(req, 404, "no such route: /v1/demo, /enqueue, /pool, /reclaim");
    }
}

void demo_tick(server *s) {
    demo *d = s->demo;
    if (d == NULL || s->nsse == 0) return;
    sse_broadcast_changed(s, "demo", demo_json(d), &d->sent);
}

void demo_closing(server *s) {
    demo *d = s->demo;
    if (d == NULL) return;
    d->closing = 1;
    d->w = NULL; /* the client's close stops and frees it */
}

void demo_free(server *s) {
    demo *d = s->demo;
    if (d == NULL) return;
    free(d->sent);
    /* the handles of the jobs it still held: the client's close handed
     * them back (or, freed without a close, they come back after their
     * lease); failing one now frees it */
    while (d->jobs) {
        rjq_job_fail(d->jobs->job, "the demo server stopped", RJQ_FAIL_RETRY, 0, NULL, NULL);
        unlink_job(d->jobs);
    }
    free(d);
    s->demo = NULL;
}
