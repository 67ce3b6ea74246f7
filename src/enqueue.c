/*
 * Enqueue. Every enqueue made during one loop turn on one queue goes out
 * as a single script call at the queue's tick: a producer that calls
 * rjq_enqueue() a hundred times in a turn pays Redis one script call, not
 * a hundred (the per-call cost of a script dwarfs the per-job cost).
 * Inputs are copied at call time straight into RESP form. A batch from
 * rjq_enqueue_batch() always lands whole in one script call (atomic), and
 * enqueues keep their call order.
 *
 * Two batches per queue: [0] plain, [1] recording the client's reply
 * channel (enqueue + await).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

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

/* ---- replies ------------------------------------------------------------ */

typedef struct sent_batch {
    size_t n;
    rjq__enq_item items[];
} sent_batch;

/* Hand each entry its jobs' results (or the error). */
static void report(rjq_client *c, const rjq__enq_item *items, size_t n, int status, redisReply *r) {
    size_t i = 0;
    while (i < n) {
        const rjq__enq_item *it = &items[i];
        size_t g = it->group ? it->group : 1;
        if (it->fn) {
            redisReply *id = status == RJQ_OK ? r->element[2 * i] : NULL;
            it->fn(c, status, id ? id->str : NULL, id ? id->len : 0,
                   id ? r->element[2 * i + 1]->integer == 1 : 0, it->data);
        } else if (it->cb) {
            rjq_enqueued one, *jobs = &one;
            int st = status;
            if (st == RJQ_OK && g > 1 && (jobs = malloc(g * sizeof *jobs)) == NULL) st = RJQ_ENOMEM;
            for (size_t j = 0; st == RJQ_OK && j < g; j++) {
                jobs[j].id = r->element[2 * (i + j)]->str;
                jobs[j].existed = r->element[2 * (i + j) + 1]->integer == 1;
            }
            it->cb(c, st, st == RJQ_OK ? jobs : NULL, st == RJQ_OK ? g : 0, it->data);
            if (jobs != &one) free(jobs);
        }
        i += g;
    }
}

static void on_enqueued(rjq_client *c, int status, redisReply *r, void *priv) {
    sent_batch *b = priv;
    if (status == RJQ_OK && (r->type != REDIS_REPLY_ARRAY || r->elements != 2 * b->n)) {
        rjq__errmsg(c, "enqueue: unexpected reply");
        status = RJQ_EPROTO;
    }
    report(c, b->items, b->n, status, r);
    free(b);
}

/* ---- the per-tick batch -------------------------------------------------- */

static void reset(rjq_client *c, rjq__enq_batch *b) {
    c->enq_pending -= b->n;
    b->args.len = 0;
    b->args.oom = 0;
    b->nargs = 0;
    b->n = 0;
}

static void flush_batch(rjq_queue *q, rjq__enq_batch *b) {
    if (b->n == 0) return;
    rjq_client *c = q->c;
    sent_batch *s = malloc(sizeof *s + b->n * sizeof s->items[0]);
    int rc = RJQ_ENOMEM;
    if (s) {
        s->n = b->n;
        memcpy(s->items, b->items, b->n * sizeof s->items[0]);
        rc = rjq__script_buf(c, RJQ__S_ENQUEUE, 0, on_enqueued, s, b->nargs, &b->args);
    }
    if (rc != RJQ_OK) {
        rjq__errmsg(c, "enqueue: %s", rjq_strerror(rc));
        report(c, s ? s->items : b->items, b->n, rc, NULL);
        free(s);
    }
    reset(q->c, b);
    if (b->args.cap > (1u << 20)) rjq__buf_free(&b->args); /* don't hoard a big batch's memory */
}

void rjq__enqueue_flush(rjq_queue *q) {
    flush_batch(q, &q->enq[0]);
    flush_batch(q, &q->enq[1]);
}

void rjq__enqueue_flush_all(rjq_client *c) {
    for (rjq_queue *q = c->queues; q && c->enq_pending; q = q->next) rjq__enqueue_flush(q);
}

void rjq__enqueue_cancel_pending(rjq_queue *q) {
    for (int i = 0; i < 2; i++) {
        rjq__enq_batch *b = &q->enq[i];
        size_t n = b->n;
        reset(q->c, b);
        report(q->c, b->items, n, RJQ_ECANCELED, NULL);
    }
}

void rjq__enqueue_batch_free(rjq__enq_batch *b) {
    rjq__buf_free(&b->args);
    free(b->items);
    memset(b, 0, sizeof *b);
}

/* The script's fixed arguments, written when a batch starts. */
static void start_batch(rjq_queue *q, rjq__enq_batch *b, int notify) {
    static const int keys[] = {RJQ__K_READY,  RJQ__K_PRIO, RJQ__K_DELAYED, RJQ__K_STATS,
                               RJQ__K_ACTIVE, RJQ__K_IDLE, RJQ__K_COLUMNS, RJQ__K_MONITORED};
    const int nkeys = (int)(sizeof keys / sizeof keys[0]);
    rjq__buf *a = &b->args;
    char num[16];
    snprintf(num, sizeof num, "%d", nkeys);
    rjq__buf_arg_str(a, num);
    for (int i = 0; i < nkeys; i++) rjq__buf_arg(a, q->keys[keys[i]], q->key_lens[keys[i]]);
    rjq__buf_arg(a, q->keys[RJQ__K_JOB], q->key_lens[RJQ__K_JOB]);
    rjq__buf_arg(a, q->keys[RJQ__K_WAKE], q->key_lens[RJQ__K_WAKE]);
    rjq__buf_arg_str(a, notify ? q->c->aw.channel : "");
    char tbase[24]; /* tokens of jobs pushed to idle workers */
    snprintf(tbase, sizeof tbase, "%016llxp", (unsigned long long)rjq__random(q->c));
    rjq__buf_arg_str(a, tbase);
    b->nargs = 1 + nkeys + 4;
}

static int reserve_items(rjq__enq_batch *b, size_t more) {
    if (b->n + more <= b->cap) return RJQ_OK;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + more) cap *= 2;
    rjq__enq_item *p = realloc(b->items, cap * sizeof *p);
    if (p == NULL) return RJQ_ENOMEM;
    b->items = p;
    b->cap = cap;
    return RJQ_OK;
}

/* Append n jobs reported to one entry (cb or fn); all or nothing. */
static int add_group(rjq_queue *q, const rjq_enqueue_item *items, size_t n, int notify,
                     rjq_enqueue_cb *cb, rjq__enqueued_fn *fn, void *data) {
    rjq_client *c = q->c;
    if (c->closing) return RJQ_ECLOSED;
    rjq__enq_batch *b = &q->enq[notify];
    if (b->n + n > RJQ_BATCH_MAX) flush_batch(q, b); /* a batch lands whole in one call */
    if (reserve_items(b, n) != RJQ_OK) return RJQ_ENOMEM;
    size_t save_len = b->args.len, save_n = b->n;
    int save_nargs = b->nargs, rc = RJQ_OK;
    if (b->n == 0) start_batch(q, b, notify);
    for (size_t i = 0; i < n && rc == RJQ_OK; i++) {
        char opts[RJQ__OPTS_MAX];
        if ((rc = rjq__enqueue_check(c, &items[i], opts)) != RJQ_OK) break;
        const rjq_job_options *o = items[i].opts;
        rjq__buf_arg_str(&b->args, o && o->id ? o->id : "");
        rjq__buf_arg(&b->args, items[i].payload, items[i].len);
        rjq__buf_arg_str(&b->args, opts);
        rjq__enq_item *it = &b->items[b->n++];
        it->cb = cb;
        it->fn = fn;
        it->data = data;
        it->group = i == 0 ? n : 0;
    }
    if (rc == RJQ_OK && b->args.oom) rc = RJQ_ENOMEM;
    if (rc != RJQ_OK) { /* undo: nothing of this call is sent */
        b->args.len = save_len;
        b->args.oom = 0;
        b->nargs = save_nargs;
        b->n = save_n;
        return rc;
    }
    b->nargs += 3 * (int)n;
    c->enq_pending += n;
    rjq__queue_kick(q);
    return RJQ_OK;
}

int rjq__enqueue_add(rjq_queue *q, const rjq_enqueue_item *it, int notify, rjq__enqueued_fn *fn,
                     void *priv) {
    return add_group(q, it, 1, notify ? 1 : 0, NULL, fn, priv);
}

int rjq_enqueue_batch(rjq_queue *q, const rjq_enqueue_item *items, size_t n, rjq_enqueue_cb *cb,
                      void *data) {
    if (q == NULL || items == NULL || n == 0 || n > RJQ_BATCH_MAX) return RJQ_EINVAL;
    return add_group(q, items, n, 0, cb, NULL, data);
}

int rjq_enqueue(rjq_queue *q, const void *payload, size_t len, const rjq_job_options *opts,
                rjq_enqueue_cb *cb, void *data) {
    if (q == NULL) return RJQ_EINVAL;
    rjq_enqueue_item it = {payload, len, opts};
    return add_group(q, &it, 1, 0, cb, NULL, data);
}
