/*
 * Job handles and how they finish: completions are batched per queue and
 * per loop turn into one script call (the queue's tick); failures go out
 * at once. Both are token-checked on the server and retried across a
 * reconnect (a repeat with the same token is recognised as done).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

const char *rjq_job_id(const rjq_job *job) {
    return job->id;
}

const void *rjq_job_payload(const rjq_job *job, size_t *len) {
    if (len) *len = job->len;
    return job->payload;
}

int rjq_job_attempt(const rjq_job *job) {
    return job->attempt;
}

int rjq_job_max_attempts(const rjq_job *job) {
    return job->max_attempts;
}

const char *rjq_job_token(const rjq_job *job) {
    return job->token;
}

rjq_worker *rjq_job_worker(const rjq_job *job) {
    return job->w;
}

/* ---- complete ------------------------------------------------------------ */

typedef struct complete_batch {
    size_t n, noffers;
    rjq__offer *offers;       /* freed slots offered for push delivery */
    rjq__complete_item items[];
} complete_batch;

static void finish_items(rjq_client *c, rjq__complete_item *items, size_t n, int status,
                         redisReply *r) {
    for (size_t i = 0; i < n; i++) {
        int code = status;
        if (status == RJQ_OK) code = r->element[i]->integer == 1 ? RJQ_OK : RJQ_ELEASELOST;
        if (items[i].cb) items[i].cb(c, code, items[i].data);
        rjq__worker_finish_replied(items[i].w);
        free(items[i].id);
    }
}

static void on_completed(rjq_client *c, int status, redisReply *r, void *priv) {
    complete_batch *b = priv;
    if (status == RJQ_OK && (r->type != REDIS_REPLY_ARRAY || r->elements != b->n + b->noffers))
        status = RJQ_EPROTO;
    /* before the callbacks: they may stop the workers */
    for (size_t i = 0; i < b->noffers && !c->closing; i++)
        rjq__worker_offer_done(&b->offers[i], status,
                               status == RJQ_OK && r->element[b->n + i]->integer == 1);
    finish_items(c, b->items, b->n, status, r);
    free(b->offers);
    free(b);
}

/* How many queued completions go in one script call: up to
 * RJQ__COMPLETE_BATCH jobs and RJQ__COMPLETE_BYTES of results (at least
 * one), so a batch of big results stays far below Redis' query limits. */
static size_t batch_size(const rjq_queue *q) {
    size_t n = 0, bytes = 0;
    while (n < q->npending && n < RJQ__COMPLETE_BATCH) {
        bytes += q->pending[n].result_len;
        if (n > 0 && bytes > RJQ__COMPLETE_BYTES) break;
        n++;
    }
    return n;
}

/* Send the first n queued completions as one script call. */
static int send_batch(rjq_queue *q, complete_batch *b) {
    rjq__argv a;
    rjq__argv_init(&a);
    RJQ__KEYS(&a, q, RJQ__K_ACTIVE, RJQ__K_COMPLETED, RJQ__K_STATS, RJQ__K_READY, RJQ__K_PRIO,
              RJQ__K_IDLE, RJQ__K_COLUMNS, RJQ__K_MONITORED);
    rjq__argv_key(&a, q, RJQ__K_JOB);
    rjq__argv_ll(&a, q->retention_ms);
    rjq__argv_ll(&a, q->completed_max);
    rjq__argv_ll(&a, (long long)b->noffers);
    for (size_t i = 0; i < b->noffers; i++) {
        rjq__argv_str(&a, b->offers[i].w->field);
        rjq__argv_ll(&a, b->offers[i].epoch);
        rjq__argv_ll(&a, b->offers[i].w->lease_ms);
        rjq__argv_ll(&a, b->offers[i].slots);
    }
    for (size_t i = 0; i < b->n; i++) {
        rjq__argv_str(&a, b->items[i].id);
        rjq__argv_str(&a, b->items[i].tail);
        rjq__argv_add(&a, b->items[i].result, b->items[i].result_len);
    }
    int rc = a.oom ? RJQ_ENOMEM
                   : rjq__script(q->c, RJQ__S_COMPLETE, RJQ__REQ_RETRY, on_completed, b, a.n, a.v,
                                 a.len);
    rjq__argv_free(&a);
    return rc;
}

static void flush_some(rjq_queue *q) {
    rjq_client *c = q->c;
    size_t n = batch_size(q);
    complete_batch *b = malloc(sizeof *b + n * sizeof b->items[0]);
    int rc = RJQ_ENOMEM;
    if (b) {
        b->n = n;
        memcpy(b->items, q->pending, n * sizeof b->items[0]);
        b->offers = malloc(n * sizeof *b->offers);
        b->noffers = b->offers ? rjq__worker_offers(b->items, n, b->offers) : 0;
        rc = send_batch(q, b);
    }
    if (rc != RJQ_OK) {
        rjq__errmsg(c, "complete: %s", rjq_strerror(rc));
        for (size_t i = 0; b && i < b->noffers; i++) rjq__worker_offer_done(&b->offers[i], rc, 0);
        finish_items(c, q->pending, n, rc, NULL); /* before they are shifted out */
        if (b) free(b->offers);
        free(b);
    }
    q->npending -= n;
    memmove(q->pending, q->pending + n, q->npending * sizeof q->pending[0]);
}

void rjq__complete_flush(rjq_queue *q) {
    while (q->npending > 0 && !q->c->closing) flush_some(q);
}

void rjq__complete_cancel_pending(rjq_queue *q) {
    size_t n = q->npending;
    q->npending = 0;
    finish_items(q->c, q->pending, n, RJQ_ECANCELED, NULL);
}

static int queue_completion(rjq_queue *q, rjq_job *job, const void *result, size_t len,
                            rjq_done_cb *cb, void *data) {
    if (q->npending == q->cap_pending) {
        size_t cap = q->cap_pending ? q->cap_pending * 2 : 64;
        rjq__complete_item *p = realloc(q->pending, cap * sizeof *p);
        if (p == NULL) return RJQ_ENOMEM;
        q->pending = p;
        q->cap_pending = cap;
    }
    size_t idlen = strlen(job->id);
    char tail[16 + sizeof job->token]; /* an int, a space and the token */
    int taillen = snprintf(tail, sizeof tail, "%d %s", job->attempt, job->token);
    if (taillen < 0 || (size_t)taillen >= sizeof tail) return RJQ_EINVAL;
    char *mem = malloc(idlen + (size_t)taillen + len + 3);
    if (mem == NULL) return RJQ_ENOMEM;
    rjq__complete_item *it = &q->pending[q->npending++];
    it->w = job->w;
    it->id = mem;
    memcpy(mem, job->id, idlen + 1);
    it->tail = mem + idlen + 1;
    memcpy(it->tail, tail, (size_t)taillen + 1);
    it->result = it->tail + taillen + 1;
    if (len) memcpy(it->result, result, len);
    it->result[len] = '\0';
    it->result_len = len;
    it->cb = cb;
    it->data = data;
    return RJQ_OK;
}

/* A job whose client is gone or going: release it and say so. */
static int release_closed(rjq_job *job) {
    if (job->w) rjq__worker_job_dropped(job->w, job);
    else free(job);
    return RJQ_ECLOSED;
}

static int closed(const rjq_job *job) {
    return job->w == NULL || job->w->q->c->closing;
}

int rjq_job_complete(rjq_job *job, const void *result, size_t len, rjq_done_cb *cb,
                     void *data) {
    if (job == NULL || (result == NULL && len > 0)) return RJQ_EINVAL;
    if (closed(job)) return release_closed(job);
    rjq_queue *q = job->w->q;
    if (len > q->c->max_payload) {
        rjq__errmsg(q->c, "result of %zu bytes exceeds max_payload %zu", len, q->c->max_payload);
        return RJQ_ETOOBIG;
    }
    int rc = queue_completion(q, job, result, len, cb, data);
    if (rc != RJQ_OK) return rc;
    rjq__worker_job_done(job->w, job);
    rjq__queue_kick(q);
    return RJQ_OK;
}

/* ---- fail ---------------------------------------------------------------- */

typedef struct fail_ctx {
    rjq_worker *w;
    rjq_done_cb *cb;
    void *data;
} fail_ctx;

static void on_failed(rjq_client *c, int status, redisReply *r, void *priv) {
    fail_ctx *f = priv;
    if (status == RJQ_OK)
        status = r->type != REDIS_REPLY_INTEGER ? RJQ_EPROTO
                 : r->integer == 0             ? RJQ_ELEASELOST
                                               : RJQ_OK;
    if (f->cb) f->cb(c, status, f->data);
    rjq__worker_finish_replied(f->w);
    free(f);
}

int rjq_job_fail(rjq_job *job, const char *error, int flags, long long retry_delay_ms,
                 rjq_done_cb *cb, void *data) {
    if (job == NULL || (flags & ~RJQ_FAIL_FATAL) != 0) return RJQ_EINVAL;
    if (closed(job)) return release_closed(job);
    if (retry_delay_ms > RJQ_DELAY_MAX) return RJQ_EINVAL;
    rjq_worker *w = job->w;
    rjq_queue *q = w->q;
    rjq_client *c = q->c;
    char jitter[32];
    snprintf(jitter, sizeof jitter, "%.6f", (double)(rjq__random(c) >> 11) / 9007199254740992.0);
    fail_ctx *f = malloc(sizeof *f);
    if (f == NULL) return RJQ_ENOMEM;
    f->w = w;
    f->cb = cb;
    f->data = data;
    rjq__argv a;
    rjq__argv_init(&a);
    RJQ__KEYS(&a, q, RJQ__K_ACTIVE, RJQ__K_READY, RJQ__K_PRIO, RJQ__K_DELAYED, RJQ__K_DEAD, RJQ__K_STATS,
              RJQ__K_COLUMNS, RJQ__K_MONITORED);
    rjq__argv_key(&a, q, RJQ__K_JOB);
    rjq__argv_key(&a, q, RJQ__K_WAKE);
    rjq__argv_str(&a, job->id);
    rjq__argv_str(&a, job->token);
    rjq__argv_str(&a, error ? error : "failed");
    rjq__argv_str(&a, flags & RJQ_FAIL_FATAL ? "1" : "0");
    rjq__argv_ll(&a, retry_delay_ms < 0 ? -1 : retry_delay_ms);
    rjq__argv_str(&a, jitter);
    rjq__argv_ll(&a, q->dead_max);
    int rc = a.oom ? RJQ_ENOMEM
                   : rjq__script(c, RJQ__S_FAIL, RJQ__REQ_RETRY, on_failed, f, a.n, a.v, a.len);
    rjq__argv_free(&a);
    if (rc != RJQ_OK) {
        free(f);
        return rc;
    }
    rjq__worker_job_done(w, job);
    rjq__queue_kick(q);
    return RJQ_OK;
}
