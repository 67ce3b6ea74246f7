/*
 * rjq serve: POST /v1/queues/{q}/jobs, the body is the job's payload.
 *
 * Options in the query: id (or the Idempotency-Key header), delay,
 * priority, attempts, timeout, dedup (ms), after (the job waits for these
 * jobs: "QUEUE:ID[,QUEUE:ID...]", not with wait) and after_policy (fail,
 * run or ignore: rjq_job_options.after_policy). Without ?wait it answers the
 * enqueue: 201 {"id"} (200 with "existed" when the id was there). With
 * ?wait=MS it answers when the job ends: 200 with the result bytes, 502
 * with the error when it died, 409 when it was cancelled, 202 {"id",
 * "finished": false, "detail"} when the wait ends first (the job still
 * runs; never before the enqueue's reply, however short the wait). Errors: 400 bad options,
 * 413 payload too large, 429 queue full (Retry-After), 503 Redis
 * unreachable or shutting down.
 *
 * A client that resets its connection mid-wait is noticed at once and its
 * await cancelled (the job runs on); one that half-closed still gets its
 * answer.
 *
 * Trace context: the request's `traceparent` and `tracestate` headers (W3C
 * Trace Context) become the job's headers of those names
 * (rjq_job_options.headers), so its handler continues the caller's trace;
 * one that is no job header value (over RJQ_HEADER_VALUE_MAX bytes, or not
 * printable ASCII) is ignored, as the W3C spec asks of an invalid one.
 */
#include "server.h"

#include "after.h"

#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

typedef struct waiter {
    held h;
    server *s;
    squeue *q;
    rjq_await *aw;        /* NULL once the await ended */
    char *given_id;       /* the request's job id (owned), NULL: Redis assigns one */
    struct waiter *prev, *next;
} waiter;

static void unlink_waiter(waiter *w) {
    server *s = w->s;
    if (w->prev) w->prev->next = w->next;
    else s->waiters = w->next;
    if (w->next) w->next->prev = w->prev;
    s->nwaiters--;
}

/* The request's trace context headers that can be job headers, into h
 * (room for 2); returns how many. */
static size_t trace_headers(struct evhttp_request *req, rjq_header *h) {
    static const char *const names[] = {"traceparent", "tracestate"};
    size_t n = 0;
    for (size_t i = 0; i < 2; i++) {
        const char *v = evhttp_find_header(evhttp_request_get_input_headers(req), names[i]);
        size_t len = v ? strlen(v) : 0;
        int ok = v && len <= RJQ_HEADER_VALUE_MAX;
        for (size_t k = 0; ok && k < len; k++) ok = v[k] >= 0x20 && v[k] <= 0x7e;
        if (ok) h[n++] = (rjq_header){names[i], v};
    }
    return n;
}

/* X-Job-Id, and where the job can be read while it goes on (location). */
static void add_job_headers(struct evhttp_request *req, const squeue *q, const char *id,
                            int location) {
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "X-Job-Id", id);
    if (!location) return;
    char *eq = evhttp_uriencode(q->name, -1, 0), *ei = evhttp_uriencode(id, -1, 0);
    if (eq && ei) {
        size_t n = strlen(eq) + strlen(ei) + 32;
        char *loc = malloc(n);
        if (loc) {
            snprintf(loc, n, "/v1/queues/%s/jobs/%s", eq, ei);
            evhttp_add_header(h, "Location", loc);
            free(loc);
        }
    }
    free(eq);
    free(ei);
}

static void on_outcome(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    waiter *w = data;
    (void)c;
    w->aw = NULL;
    struct evhttp_request *req = held_end(&w->h);
    if (req) {
        const char *id = o && o->id ? o->id : NULL;
        if (id) add_job_headers(req, w->q, id, status != RJQ_OK);
        if (status == RJQ_OK) {
            struct evbuffer *b = evbuffer_new();
            if (b) evbuffer_add(b, o->result, o->result_len);
            evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                              "application/octet-stream");
            evhttp_send_reply(req, 200, "OK", b);
            if (b) evbuffer_free(b);
        } else if (status == RJQ_EJOBDEAD) {
            reply_json(req, 502, json_pack("{so so}", "id", json_name(id), "error",
                                           json_bytes(o->error ? o->error : "",
                                                      o->error ? strlen(o->error) : 0)));
        } else if (status == RJQ_EJOBCANCELED) {
            reply_json(req, 409, json_pack("{so ss}", "id", json_name(id), "error",
                                           "the job was cancelled"));
        } else if (status == RJQ_ETIMEDOUT && id) {
            reply_json(req, 202, json_pack("{so sb ss}", "id", json_name(id), "finished", 0,
                                           "detail", "the wait ended first; the job goes on"));
        } else if (status == RJQ_ECANCELED && (id || w->given_id)) { /* shutdown: the job goes on */
            reply_json(req, 202, json_pack("{so sb ss}", "id", json_name(id ? id : w->given_id),
                                           "finished", 0, "detail",
                                           "the server stopped waiting; the job goes on"));
        } else if (status == RJQ_ECANCELED || status == RJQ_ECONN || status == RJQ_ETIMEDOUT) {
            /* the enqueue was sent, its answer never came: the job may exist */
            reply_error(req, 504, "the enqueue's outcome is unknown (%s): the job may exist; "
                                  "retry with an Idempotency-Key to be safe",
                        status == RJQ_ECANCELED ? "the server stopped" : rjq_strerror(status));
        } else { /* the enqueue failed */
            reply_rjq_error(req, status, rjq_client_get_errmsg(w->s->c));
        }
    }
    unlink_waiter(w);
    w->q->refs--;
    free(w->given_id);
    free(w);
}

/* The client went away: end the await (its callback frees w). */
static void waiter_gone(held *h) {
    waiter *w = (waiter *)h;
    if (w->aw) rjq_await_cancel(w->aw);
}

static void on_enqueued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n,
                        void *data) {
    waiter *w = data;
    (void)c;
    struct evhttp_request *req = held_end(&w->h);
    if (req && status == RJQ_OK && n == 1) {
        add_job_headers(req, w->q, jobs[0].id, 1);
        reply_json(req, jobs[0].existed ? 200 : 201,
                   json_pack("{so sb sb}", "id", json_name(jobs[0].id), "existed", jobs[0].existed,
                             "replaced", jobs[0].replaced));
    } else if (req && (status == RJQ_ECONN || status == RJQ_ETIMEDOUT || status == RJQ_ECANCELED)) {
        reply_error(req, 504, "the enqueue's outcome is unknown (%s): the job may exist; retry "
                              "with an Idempotency-Key to be safe", rjq_strerror(status));
    } else if (req) {
        reply_rjq_error(req, status, rjq_client_get_errmsg(w->s->c));
    }
    unlink_waiter(w);
    w->q->refs--;
    free(w->given_id);
    free(w);
}

/* A job id rjq takes (rjq.h, rjq_job_options.id), checked before the
 * queue is opened: a refused request must leave nothing behind. */
static int valid_id(const char *id) {
    size_t n = strlen(id);
    int digits = 1;
    if (n == 0 || n > RJQ_JOB_ID_MAX) return 0;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++) {
        if (*p <= 0x20 || *p == 0x7f) return 0;
        if (*p < '0' || *p > '9') digits = 0;
    }
    return !digits;
}

/* A group name rjq takes (rjq.h, rjq_job_options.group): 1..
 * RJQ_GROUP_NAME_MAX bytes of [A-Za-z0-9_.:@-], checked before the queue
 * is opened as the id is. */
static int valid_group(const char *g) {
    size_t n = strlen(g);
    return n >= 1 && n <= RJQ_GROUP_NAME_MAX &&
           strspn(g, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:@-") == n;
}

int enqueue_handle(server *s, struct evhttp_request *req, const char *name, squeue *q,
                   const struct evkeyvalq *args) {
    if (s->stopping) {
        reply_error(req, 503, "the server is shutting down");
        return 0;
    }
    if (!s->redis_up) { /* fail fast rather than time out */
        reply_error(req, 503, "redis unavailable");
        return 0;
    }
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    long long delay, prio, attempts, timeout, dedup, wait;
    if (query_only(req, args, ROUTE_ENQUEUE) ||
        query_ll(req, args, "delay", 0, RJQ_DELAY_MAX, 0, &delay) ||
        query_ll(req, args, "priority", RJQ_PRIORITY_MIN, RJQ_PRIORITY_MAX, 0, &prio) ||
        query_ll(req, args, "attempts", 1, 1000000, 0, &attempts) ||
        query_ll(req, args, "timeout", 0, RJQ_DELAY_MAX, 0, &timeout) ||
        query_ll(req, args, "dedup", 0, RJQ_DELAY_MAX, 0, &dedup) ||
        query_ll(req, args, "wait", 0, s->o.wait_max_ms, -1, &wait))
        return 0;
    const char *qid = query_get(args, "id");
    const char *hid =
        evhttp_find_header(evhttp_request_get_input_headers(req), "Idempotency-Key");
    if (qid && hid && strcmp(qid, hid) != 0) {
        reply_error(req, 400, "?id and Idempotency-Key differ");
        return 0;
    }
    jo.id = qid ? qid : hid;
    jo.delay_ms = delay;
    jo.priority = (int)prio;
    jo.max_attempts = (int)attempts;
    jo.timeout_ms = timeout;
    jo.dedup_ms = dedup;
    rjq_header trace[2];
    if ((jo.nheaders = trace_headers(req, trace)) > 0) jo.headers = trace;
    if (dedup && jo.id == NULL) {
        reply_error(req, 400, "dedup needs an id");
        return 0;
    }
    const char *after = query_get(args, "after"), *policy = query_get(args, "after_policy");
    jo.group = query_get(args, "group");
    if (jo.group && !valid_group(jo.group)) {
        reply_error(req, 400, "group must be 1..%d bytes of [A-Za-z0-9_.:@-]", RJQ_GROUP_NAME_MAX);
        return 0;
    }
    if (jo.group && (wait >= 0 || after)) { /* (rjq_enqueue_await and dependencies take none) */
        reply_error(req, 400, "group cannot be used with %s", wait >= 0 ? "wait" : "after");
        return 0;
    }
    after_list deps = {.n = 0};
    if (after || policy) {
        char why[160];
        if (after == NULL || wait >= 0) {
            reply_error(req, 400, after ? "after cannot be used with wait"
                                        : "after_policy needs after");
            return 0;
        }
        if (policy && after_policy_parse(policy, &jo.after_policy) != 0) {
            reply_error(req, 400, "after_policy: '%s' is none of fail, run, ignore", policy);
            return 0;
        }
        if (after_parse(after, &deps, why, sizeof why) != 0) {
            after_free(&deps);
            reply_error(req, 400, "after: %s", why);
            return 0;
        }
        jo.after = deps.deps;
        jo.n_after = deps.n;
    }
    int ret = 0;
    if (jo.id && !valid_id(jo.id)) {
        reply_rjq_error(req, RJQ_EJOBID, NULL);
        goto done;
    }
    int orc = q ? RJQ_OK : queues_get(s, name, &q);
    if (orc == RJQ_OK) queues_touch(q);
    if (orc == RJQ_EBUSY) {
        reply_error(req, 503, "too many queues served (--max-queues %ld)", s->o.max_queues);
        goto done;
    }
    if (orc != RJQ_OK) {
        reply_rjq_error(req, orc, NULL);
        goto done;
    }
    if (!q->known) { /* (its layout is being read: parked, routed again) */
        ret = 1;
        goto done;
    }
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    const unsigned char *body = len ? evbuffer_pullup(in, -1) : (const unsigned char *)"";
    waiter *w = calloc(1, sizeof *w);
    if (w == NULL || body == NULL) {
        free(w);
        reply_error(req, 503, "out of memory");
        goto done;
    }
    w->s = s;
    w->q = q;
    if (jo.id && (w->given_id = strdup(jo.id)) == NULL) {
        free(w);
        reply_error(req, 503, "out of memory");
        goto done;
    }
    int rc;
    if (wait >= 0) {
        rjq_await_options ao = RJQ_AWAIT_OPTIONS_INIT;
        ao.timeout_ms = wait ? wait : 1; /* ?wait=0: answer 202 at once unless already done */
        rc = rjq_enqueue_await(q->q, body, len, &jo, &ao, on_outcome, w, &w->aw);
    } else {
        rc = rjq_enqueue(q->q, body, len, &jo, on_enqueued, w);
    }
    if (rc != RJQ_OK) {
        free(w->given_id);
        free(w);
        reply_rjq_error(req, rc, rjq_client_get_errmsg(s->c));
        goto done;
    }
    /* (the callbacks never run inside the calls above: w is ours here) */
    q->refs++;
    w->next = s->waiters;
    if (w->next) w->next->prev = w;
    s->waiters = w;
    s->nwaiters++;
    /* (a plain enqueue's callback still comes and frees w) */
    held_start(s, &w->h, req, wait >= 0 ? waiter_gone : NULL, 0);
done:
    after_free(&deps); /* (the library copied them) */
    return ret;
}

void enqueue_cancel_all(server *s) {
    for (waiter *w = s->waiters, *next; w; w = next) {
        next = w->next;
        if (w->aw) rjq_await_cancel(w->aw); /* on_outcome answers 503, frees w */
    }
}
