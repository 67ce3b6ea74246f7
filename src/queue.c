/*
 * Queue handles (key names, settings, the per-queue tick) and enqueue.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char *const key_suffix[RJQ__K_COUNT] = {
    [RJQ__K_READY] = "ready",         [RJQ__K_PRIO] = "prio",
    [RJQ__K_DELAYED] = "delayed",     [RJQ__K_ACTIVE] = "active",
    [RJQ__K_DEAD] = "dead",           [RJQ__K_COMPLETED] = "completed",
    [RJQ__K_STATS] = "stats",         [RJQ__K_GUARD] = "sweep",
    [RJQ__K_JOB] = "job:",            [RJQ__K_WAKE] = "wake",
    [RJQ__K_EVENTS] = "events",       [RJQ__K_MONITORED] = "monitored",
};

static void on_tick(rjq__timer *t) {
    rjq_queue *q = t->owner;
    rjq__complete_flush(q);
    rjq__workers_tick(q);
}

void rjq__queue_kick(rjq_queue *q) {
    if (!rjq__timer_armed(&q->tick)) rjq__timer_start(q->c, &q->tick, 0);
}

void rjq__queue_free(rjq_queue *q) {
    rjq__timer_stop(q->c, &q->tick);
    for (int i = 0; i < RJQ__K_COUNT; i++) free(q->keys[i]);
    free(q->pending);
    free(q->name);
    free(q);
}

static int make_keys(rjq_queue *q, const char *prefix) {
    for (int i = 0; i < RJQ__K_COUNT; i++) {
        int n = snprintf(NULL, 0, "%s:{%s}:%s", prefix, q->name, key_suffix[i]);
        q->keys[i] = malloc((size_t)n + 1);
        if (q->keys[i] == NULL) return RJQ_ENOMEM;
        snprintf(q->keys[i], (size_t)n + 1, "%s:{%s}:%s", prefix, q->name, key_suffix[i]);
        q->key_lens[i] = (size_t)n;
    }
    return RJQ_OK;
}

int rjq_queue_open(rjq_client *c, const char *name, const rjq_queue_options *opts,
                   rjq_queue **out) {
    if (c == NULL || out == NULL) return RJQ_EINVAL;
    *out = NULL;
    if (c->closing) return RJQ_ECLOSED;
    if (!rjq__valid_queue_name(name)) {
        rjq__errmsg(c, "queue names are 1..%d bytes without '{', '}', spaces or control characters",
                    RJQ__QUEUE_NAME_MAX);
        return RJQ_EQUEUENAME;
    }
    if (opts && (opts->retention_ms < -1 || opts->completed_max < -1 || opts->dead_max < 0))
        return RJQ_EINVAL;
    rjq_queue *q = calloc(1, sizeof *q);
    if (q == NULL) return RJQ_ENOMEM;
    q->c = c;
    q->retention_ms = opts && opts->retention_ms ? opts->retention_ms : 3600000;
    q->completed_max = opts && opts->completed_max ? opts->completed_max : 1000;
    q->dead_max = opts && opts->dead_max ? opts->dead_max : 100000;
    rjq__timer_init(&q->tick, on_tick, q);
    if ((q->name = strdup(name)) == NULL || make_keys(q, c->prefix) != RJQ_OK) {
        rjq__queue_free(q);
        return RJQ_ENOMEM;
    }
    q->next = c->queues;
    c->queues = q;
    *out = q;
    return RJQ_OK;
}

const char *rjq_queue_name(const rjq_queue *q) {
    return q->name;
}

rjq_client *rjq_queue_client(const rjq_queue *q) {
    return q->c;
}

/* ---- enqueue -------------------------------------------------------------- */

typedef struct enqueue_ctx {
    rjq_enqueue_cb *cb;
    void *data;
    size_t n;
} enqueue_ctx;

static void on_enqueued(rjq_client *c, int status, redisReply *r, void *priv) {
    enqueue_ctx *ctx = priv;
    rjq_enqueued one, *jobs = &one;
    size_t n = 0;
    if (status == RJQ_OK &&
        (r->type != REDIS_REPLY_ARRAY || r->elements != 2 * ctx->n)) {
        rjq__errmsg(c, "enqueue: unexpected reply");
        status = RJQ_EPROTO;
    }
    if (status == RJQ_OK && ctx->n > 1 && (jobs = malloc(ctx->n * sizeof *jobs)) == NULL)
        status = RJQ_ENOMEM;
    if (status == RJQ_OK) {
        for (n = 0; n < ctx->n; n++) {
            jobs[n].id = r->element[2 * n]->str;
            jobs[n].existed = r->element[2 * n + 1]->integer == 1;
        }
    }
    if (ctx->cb) ctx->cb(c, status, status == RJQ_OK ? jobs : NULL, n, ctx->data);
    if (jobs != &one) free(jobs);
    free(ctx);
}

int rjq__enqueue_check(rjq_client *c, const rjq_enqueue_item *it, char *opts) {
    if (it->payload == NULL && it->len > 0) return RJQ_EINVAL;
    if (it->len > c->max_payload) {
        rjq__errmsg(c, "payload of %zu bytes exceeds max_payload %zu", it->len, c->max_payload);
        return RJQ_ETOOBIG;
    }
    if (it->opts && it->opts->id && !rjq__valid_job_id(it->opts->id)) {
        rjq__errmsg(c, "job ids are 1..%d bytes without spaces or control characters, "
                       "and not all digits", RJQ_JOB_ID_MAX);
        return RJQ_EJOBID;
    }
    if (rjq__encode_job_options(it->opts, opts) != RJQ_OK) {
        rjq__errmsg(c, "invalid job options (delay, priority, attempts or backoff)");
        return RJQ_EINVAL;
    }
    return RJQ_OK;
}

int rjq__enqueue_send(rjq_queue *q, const rjq_enqueue_item *items, size_t n, const char *notify,
                      rjq__reply_fn *fn, void *priv) {
    rjq_client *c = q->c;
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_str(&a, "4");
    rjq__argv_key(&a, q, RJQ__K_READY);
    rjq__argv_key(&a, q, RJQ__K_PRIO);
    rjq__argv_key(&a, q, RJQ__K_DELAYED);
    rjq__argv_key(&a, q, RJQ__K_STATS);
    rjq__argv_key(&a, q, RJQ__K_JOB);
    rjq__argv_key(&a, q, RJQ__K_WAKE);
    rjq__argv_str(&a, notify ? notify : "");
    int rc = RJQ_OK;
    for (size_t i = 0; i < n && rc == RJQ_OK; i++) {
        char opts[RJQ__OPTS_MAX];
        if ((rc = rjq__enqueue_check(c, &items[i], opts)) != RJQ_OK) break;
        const rjq_job_options *o = items[i].opts;
        rjq__argv_str(&a, o && o->id ? o->id : "");
        rjq__argv_add(&a, items[i].payload, items[i].len);
        if (opts[0]) rjq__argv_copy(&a, opts);
        else rjq__argv_str(&a, "");
    }
    if (rc == RJQ_OK) rc = a.oom ? RJQ_ENOMEM : rjq__script(c, RJQ__S_ENQUEUE, 0, fn, priv, a.n, a.v, a.len);
    rjq__argv_free(&a);
    return rc;
}

int rjq_enqueue_batch(rjq_queue *q, const rjq_enqueue_item *items, size_t n,
                      rjq_enqueue_cb *cb, void *data) {
    if (q == NULL || items == NULL || n == 0 || n > RJQ_BATCH_MAX) return RJQ_EINVAL;
    if (q->c->closing) return RJQ_ECLOSED;
    enqueue_ctx *ctx = malloc(sizeof *ctx);
    if (ctx == NULL) return RJQ_ENOMEM;
    ctx->cb = cb;
    ctx->data = data;
    ctx->n = n;
    int rc = rjq__enqueue_send(q, items, n, NULL, on_enqueued, ctx);
    if (rc != RJQ_OK) free(ctx);
    return rc;
}

int rjq_enqueue(rjq_queue *q, const void *payload, size_t len, const rjq_job_options *opts,
                rjq_enqueue_cb *cb, void *data) {
    rjq_enqueue_item it = {payload, len, opts};
    return rjq_enqueue_batch(q, &it, 1, cb, data);
}
