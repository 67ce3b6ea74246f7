/*
 * Finish requests (job.h): complete, fail, progress, as the handle's
 * owner (the worker layer, worker_job.c) asks for them. Completions are
 * batched per queue and per loop turn into one script call (the queue's
 * tick); failures go out at once. Both are token-checked on the server and
 * retried across a reconnect (a repeat with the same token is recognised
 * as done). A completion batch also carries the slots its idle workers
 * offer for push delivery. job.c never sees a job handle: it is told a
 * job's id, token and attempt, and reports each request's end to its
 * owner through the owner's rjq__finish_ops, once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deps.h"
#include "held.h"
#include "job.h"

#define COMPLETE_BATCH 500           /* jobs per complete script call */
#define COMPLETE_BYTES (8u << 20)    /* result bytes per complete script call */
#define ARGS_KEPT (1u << 20)         /* pending arguments' buffer kept when empty */

/* ---- complete ------------------------------------------------------------ */

typedef struct item {
    rjq_worker *w;            /* the job's owner, told through its part's ops */
    size_t bytes;             /* its three arguments in its part's args */
    size_t tail_bytes;        /* ... of which its tail, the first, */
    size_t id_bytes;          /* ... and its id, the second (then its result) */
    size_t result_len;
    rjq_done_cb *cb;
    void *data;
} item;

/* The queue's completions waiting for its tick. Each one's arguments of
 * the complete script ("<attempt> <token>": how the job's state ends
 * while this claim holds it, complete.lua; its id; its result) are written
 * in RESP form when it is made, the pending ones' one after the other in
 * args from `start` on: no allocation per job, the result copied once
 * before the request's own buffer. A request takes them in its own order:
 * complete.lua each run of one tail as the tail once, the run's count,
 * then id and result per job; complete_one.lua id, tail, result. */
typedef struct part {
    item *pending;
    size_t n, cap;
    rjq__buf args;
    size_t start;
    const rjq__finish_ops *ops; /* their owner's hooks (one owner: the worker layer) */
    uint64_t lean_off_until;  /* complete_one.lua answered -1: complete.lua until then */
} part;

typedef struct complete_batch {
    const rjq__finish_ops *ops; /* (part.ops) */
    rjq_queue *q;             /* (for the releases of dependents: deps.c) */
    size_t n, noffers;
    rjq__offer *offers;       /* freed slots offered for push delivery */
    char *again;              /* sent to complete_one.lua: its job's arguments, */
    size_t again_len;         /* ... for complete.lua when that one answers < 0 */
    item items[];
} complete_batch;

/* Nothing pending: args are written from the start again; a buffer grown
 * past ARGS_KEPT (big results) is let go of. */
static void args_reset(part *p) {
    p->args.len = p->start = 0;
    if (p->args.cap > ARGS_KEPT) rjq__buf_free(&p->args);
}

/* items must not be a live list: the callbacks may complete more jobs. */
static void finish_items(rjq_client *c, const rjq__finish_ops *ops, item *items, size_t n,
                         int status, redisReply *r) {
    RJQ_ASSERT(status != RJQ_OK || (r != NULL && r->elements >= n)); /* (reply_ok) */
    for (size_t i = 0; i < n; i++) {
        int code = status;
        if (status == RJQ_OK)
            code = r->element[i]->integer == 1 || r->element[i]->integer == 3 ? RJQ_OK
                   : r->element[i]->integer == 2 ? RJQ_EJOBCANCELED
                                                 : RJQ_ELEASELOST;
        if (code == RJQ_OK && rjq__write_short(c)) code = RJQ_EREPLICAS;
        if (items[i].cb) items[i].cb(c, code, items[i].data);
        ops->replied(items[i].w);
    }
}

/* One code per job (0 lease lost, 1 done, 2 cancelled, 3 done with
 * dependents to release), then one per offer (0 or 1), then for each job
 * of code 3 its id and its dependents entry: any other reply is of the
 * wrong shape. */
static int reply_ok(const redisReply *r, size_t n, size_t noffers) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements < n + noffers) return 0;
    size_t with_deps = 0;
    for (size_t i = 0; i < n + noffers; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER || r->element[i]->integer < 0 ||
            r->element[i]->integer > (i < n ? 3 : 1))
            return 0;
        if (i < n && r->element[i]->integer == 3) with_deps++;
    }
    return r->elements == n + noffers + 2 * with_deps && rjq__deps_entries_ok(r, n + noffers);
}

static int send_general(rjq_queue *q, complete_batch *b, const char *args, size_t alen);

/* After complete_one.lua answered -1: the queue's completions go to
 * complete.lua for this long (ms) before the lean call is tried again. */
#define LEAN_OFF_MS 2000

static void on_completed(rjq_client *c, int status, redisReply *r, void *priv) {
    complete_batch *b = priv;
    if (b->again != NULL && status == RJQ_OK && r->type == REDIS_REPLY_INTEGER &&
        (r->integer == -1 || r->integer == -2)) {
        /* not for the lean call (complete_one.lua): the same completion
         * to complete.lua */
        part *p = rjq__queue_part(b->q, RJQ__PART_FINISH);
        if (r->integer == -1 && p != NULL) p->lean_off_until = rjq__now_ms() + LEAN_OFF_MS;
        char *args = b->again;
        b->again = NULL;
        status = rjq__closing(c) ? RJQ_ECANCELED : send_general(b->q, b, args, b->again_len);
        free(args);
        if (status == RJQ_OK) return;
        rjq__errmsg(c, "complete: %s", rjq_strerror(status));
        r = NULL;
    }
    free(b->again);
    b->again = NULL;
    if (status == RJQ_OK && !reply_ok(r, b->n, b->noffers)) {
        rjq__errmsg(c, "complete: unexpected reply");
        status = RJQ_EPROTO;
    }
    if (status == RJQ_OK && r->elements > b->n + b->noffers && !rjq__closing(c))
        rjq__deps_release_entries(b->q, r, b->n + b->noffers, (size_t)-1, "completed");
    /* before the callbacks: they may stop the workers */
    for (size_t i = 0; i < b->noffers && !rjq__closing(c); i++)
        b->ops->offer_done(&b->offers[i], status,
                               status == RJQ_OK && r->element[b->n + i]->integer == 1);
    finish_items(c, b->ops, b->items, b->n, status, r);
    free(b->offers);
    free(b);
}

/* How many queued completions go in one script call: up to
 * COMPLETE_BATCH jobs and COMPLETE_BYTES of results (at least one), so a
 * batch of big results stays far below Redis' query limits. */
static size_t batch_size(const part *p) {
    size_t n = 0, bytes = 0;
    while (n < p->n && n < COMPLETE_BATCH) {
        bytes += p->pending[n].result_len;
        if (n > 0 && bytes > COMPLETE_BYTES) break;
        n++;
    }
    return n;
}

/* The lean call (complete_one.lua, docs/scripts.md "The lean pair") for a
 * batch of one job with at most one offer and no tokens to forget, unless
 * the queue's last answer sent its completions to complete.lua for a
 * while: returns 1 when it is not for this batch, else the send's status. */
static int send_one(rjq_queue *q, complete_batch *b, const char *args, size_t alen) {
    part *p = rjq__queue_part(q, RJQ__PART_FINISH);
    if (b->n != 1 || b->noffers > 1 || rjq__held_pending(q) != 0 ||
        (p != NULL && p->lean_off_until > rjq__now_ms()))
        return 1;
    if ((b->again = malloc(alen)) == NULL) return RJQ_ENOMEM;
    memcpy(b->again, args, alen);
    b->again_len = alen;
    rjq__buf a = {0};
    int argc = 1 + rjq__script_keys[RJQ__S_COMPLETE_ONE].n + 10;
    rjq__buf_script_keys(&a, q, RJQ__S_COMPLETE_ONE);
    rjq__buf_key(&a, q, RJQ__K_JOB);
    rjq__buf_ll(&a, rjq__queue_retention_ms(q));
    rjq__buf_ll(&a, rjq__queue_completed_max(q));
    if (b->noffers == 1) {
        rjq__buf_arg_str(&a, b->offers[0].field);
        rjq__buf_ll(&a, b->offers[0].epoch);
        rjq__buf_ll(&a, b->offers[0].lease_ms);
        rjq__buf_ll(&a, b->offers[0].slots);
    } else {
        for (int i = 0; i < 4; i++) rjq__buf_arg_str(&a, "");
    }
    const item *it = &b->items[0]; /* (args: its tail, id, result) */
    rjq__buf_raw(&a, args + it->tail_bytes, it->id_bytes);
    rjq__buf_raw(&a, args, it->tail_bytes);
    rjq__buf_raw(&a, args + it->tail_bytes + it->id_bytes, alen - it->tail_bytes - it->id_bytes);
    int rc = rjq__script_resp(rjq_queue_get_client(q), RJQ__S_COMPLETE_ONE,
                              RJQ__REQ_RETRY | RJQ__REQ_DURABLE, on_completed, b, argc, &a);
    rjq__buf_free(&a);
    if (rc != RJQ_OK) {
        free(b->again);
        b->again = NULL;
    }
    return rc;
}

/* (args: the items' arguments, in RESP form: see part) */
static int send_batch(rjq_queue *q, complete_batch *b, const char *args, size_t alen) {
    int rc = send_one(q, b, args, alen);
    return rc == 1 ? send_general(q, b, args, alen) : rc;
}

static int send_general(rjq_queue *q, complete_batch *b, const char *args, size_t alen) {
    rjq__buf a = {0}; /* the arguments in RESP form: no argv, no printf */
    int argc = 1 + rjq__script_keys[RJQ__S_COMPLETE].n;
    rjq__buf_script_keys(&a, q, RJQ__S_COMPLETE);
    rjq__buf_key(&a, q, RJQ__K_JOB);
    rjq__buf_ll(&a, rjq__queue_retention_ms(q));
    rjq__buf_ll(&a, rjq__queue_completed_max(q));
    rjq__buf_ll(&a, (long long)b->noffers);
    /* the tokens these completions (and earlier finishes) left nothing of */
    size_t forgets = rjq__held_pending(q);
    if (forgets > COMPLETE_BATCH) forgets = COMPLETE_BATCH;
    rjq__buf_ll(&a, (long long)forgets);
    argc += 5;
    for (size_t i = 0; i < b->noffers; i++) {
        rjq__buf_arg_str(&a, b->offers[i].field);
        rjq__buf_ll(&a, b->offers[i].epoch);
        rjq__buf_ll(&a, b->offers[i].lease_ms);
        rjq__buf_ll(&a, b->offers[i].slots);
        argc += 4;
    }
    rjq__argv held;
    rjq__argv_init(&held);
    rjq__held_take(q, &held, forgets);
    for (int i = 0; i < held.n; i++) rjq__buf_arg(&a, held.v[i], held.len[i]);
    argc += held.n;
    if (held.oom) a.oom = 1;
    rjq__argv_free(&held);
    /* the jobs in runs of one tail (a claim's jobs share it: sent once) */
    size_t at = 0;
    for (size_t i = 0; i < b->n;) {
        const item *first = &b->items[i];
        size_t j = i + 1, end = at + first->bytes;
        while (j < b->n && b->items[j].tail_bytes == first->tail_bytes &&
               memcmp(args + end, args + at, first->tail_bytes) == 0)
            end += b->items[j++].bytes;
        rjq__buf_raw(&a, args + at, first->tail_bytes);
        rjq__buf_ll(&a, (long long)(j - i));
        for (size_t o = at; i < j; o += b->items[i++].bytes)
            rjq__buf_raw(&a, args + o + b->items[i].tail_bytes, b->items[i].bytes - b->items[i].tail_bytes);
        argc += 2;
        at = end;
    }
    RJQ_ASSERT(at == alen);
    argc += 2 * (int)b->n;
    int rc = rjq__script_resp(rjq_queue_get_client(q), RJQ__S_COMPLETE,
                              RJQ__REQ_RETRY | RJQ__REQ_DURABLE, on_completed, b, argc, &a);
    rjq__buf_free(&a);
    return rc;
}

/* End every queued completion with status. The list is detached first:
 * callbacks that complete more jobs start a new one. */
static void fail_pending(rjq_queue *q, part *p, int status) {
    item *items = p->pending;
    size_t n = p->n;
    p->pending = NULL;
    p->n = p->cap = 0;
    args_reset(p);
    finish_items(rjq_queue_get_client(q), p->ops, items, n, status, NULL);
    free(items);
}

/* Send the first queued completions as one script call. They leave the
 * queue's list before anything is reported, so callbacks that complete
 * more jobs append to a list nobody is walking. */
static void flush_some(rjq_queue *q, part *p) {
    rjq_client *c = rjq_queue_get_client(q);
    size_t n = batch_size(p);
    RJQ_ASSERT(n >= 1 && n <= p->n); /* (part_tick: some are queued) */
    complete_batch *b = malloc(sizeof *b + n * sizeof b->items[0]);
    if (b == NULL) {
        rjq__errmsg(c, "complete: %s", rjq_strerror(RJQ_ENOMEM));
        fail_pending(q, p, RJQ_ENOMEM);
        return;
    }
    b->ops = p->ops;
    b->q = q;
    b->n = n;
    b->again = NULL;
    memcpy(b->items, p->pending, n * sizeof b->items[0]);
    p->n -= n;
    memmove(p->pending, p->pending + n, p->n * sizeof p->pending[0]);
    /* their arguments leave args: the rest go first, sent by a later turn */
    size_t alen = 0, at = p->start;
    for (size_t i = 0; i < n; i++) alen += b->items[i].bytes;
    p->start += alen;
    b->noffers = 0;
    b->offers = malloc(n * sizeof *b->offers);
    for (size_t i = 0; b->offers && i < n; i++)
        b->noffers += (size_t)b->ops->offer(b->items[i].w, &b->offers[b->noffers]);
    RJQ_ASSERT(b->noffers <= n); /* at most one offer per completion */
    int rc = send_batch(q, b, p->args.p + at, alen);
    /* (sent: copied into the request; nothing pending: args from the start) */
    if (p->n == 0) args_reset(p);
    if (rc != RJQ_OK) {
        rjq__errmsg(c, "complete: %s", rjq_strerror(rc));
        for (size_t i = 0; i < b->noffers; i++) b->ops->offer_done(&b->offers[i], rc, 0);
        finish_items(c, b->ops, b->items, b->n, rc, NULL);
        free(b->offers);
        free(b);
    }
}

static void part_tick(rjq_queue *q, void *state) {
    part *p = state;
    while (p->n > 0 && !rjq__closing(rjq_queue_get_client(q))) flush_some(q, p);
}

static void part_abort(rjq_queue *q, void *state) {
    fail_pending(q, state, RJQ_ECANCELED);
}

static void part_close(rjq_queue *q, void *state) {
    part *p = state;
    (void)q;
    free(p->pending);
    rjq__buf_free(&p->args);
    free(p);
}

static const rjq__part_ops part_ops = {part_tick, part_abort, NULL, part_close, NULL};

static part *part_of(rjq_queue *q) {
    part *p = rjq__queue_part(q, RJQ__PART_FINISH);
    if (p == NULL && (p = calloc(1, sizeof *p)) != NULL)
        rjq__queue_set_part(q, RJQ__PART_FINISH, &part_ops, p);
    return p;
}

int rjq__finish_complete(const rjq__finish *f, const void *result, size_t len, rjq_done_cb *cb,
                         void *data) {
    RJQ_ASSERT(f->w != NULL && f->ops != NULL && f->id != NULL && f->token != NULL);
    part *p = part_of(f->q);
    if (p == NULL) return RJQ_ENOMEM;
    RJQ_ASSERT(p->ops == NULL || p->ops == f->ops); /* one owner of the queue's completions */
    p->ops = f->ops;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        item *grown = realloc(p->pending, cap * sizeof *grown);
        if (grown == NULL) return RJQ_ENOMEM;
        p->pending = grown;
        p->cap = cap;
    }
    RJQ_ASSERT(p->n < p->cap);
    char tail[RJQ__DEC_MAX + 1 + RJQ__TOKEN_MAX]; /* an int, a space and the token */
    size_t toklen = strlen(f->token), taillen = rjq__dec(tail, f->attempt);
    if (taillen + 1 + toklen >= sizeof tail) return RJQ_EINVAL;
    tail[taillen++] = ' ';
    memcpy(tail + taillen, f->token, toklen + 1);
    taillen += toklen;
    /* its arguments in RESP form, the result copied once */
    size_t at = p->args.len;
    rjq__buf_arg(&p->args, tail, taillen);
    size_t tail_at = p->args.len;
    rjq__buf_arg_str(&p->args, f->id);
    size_t id_at = p->args.len;
    rjq__buf_arg(&p->args, result, len);
    if (p->args.oom) { /* (what was written of it is dropped) */
        p->args.oom = 0;
        p->args.len = at;
        return RJQ_ENOMEM;
    }
    item *it = &p->pending[p->n++];
    it->w = f->w;
    it->bytes = p->args.len - at;
    it->tail_bytes = tail_at - at;
    it->id_bytes = id_at - tail_at;
    it->result_len = len;
    it->cb = cb;
    it->data = data;
    return RJQ_OK;
}

/* ---- fail ---------------------------------------------------------------- */

typedef struct fail_ctx {
    rjq_worker *w;            /* the job's owner, told through ops */
    const rjq__finish_ops *ops;
    rjq_done_cb *cb;
    void *data;
    int cause;                /* (rjq__finish.cause) */
    rjq_queue *q;
    char id[];                /* (for the releases of dependents: deps.c) */
} fail_ctx;

/* fail.lua's array reply: 5, then (id, dependents entry) pairs, at least
 * one; any other array is of the wrong shape. */
static int fail_entries_ok(const redisReply *r) {
    return r->type == REDIS_REPLY_ARRAY && r->elements >= 3 && r->elements % 2 == 1 &&
           r->element[0]->type == REDIS_REPLY_INTEGER && r->element[0]->integer == 5 &&
           rjq__deps_entries_ok(r, 1);
}

static void on_failed(rjq_client *c, int status, redisReply *r, void *priv) {
    fail_ctx *f = priv;
    RJQ_ASSERT(status != RJQ_OK || r != NULL); /* a success comes with its reply */
    /* fail.lua: 0 lease lost, 1 retry scheduled, 2 dead, 3 already
     * failed with this token, 4 cancelled, 5 dead with dependents to
     * release (deps_due reads them); or { 5, (id, dependents entry)... }:
     * dead, with the entries of it and of the jobs its death buried; any
     * other reply is no answer */
    long long code = status == RJQ_OK && r->type == REDIS_REPLY_INTEGER ? r->integer
                     : status == RJQ_OK && fail_entries_ok(r)           ? 5
                                                                      : -1;
    if (status == RJQ_OK && (code < 0 || code > 5)) {
        rjq__errmsg(c, "fail: unexpected reply");
        status = RJQ_EPROTO;
    }
    if (status == RJQ_OK && code == 5 && r->type == REDIS_REPLY_INTEGER && !rjq__closing(c)) {
        const char *id = f->id;
        size_t len = strlen(id);
        rjq__deps_notify(f->q, &id, &len, 1);
    } else if (status == RJQ_OK && code == 5 && !rjq__closing(c)) {
        /* the dead: its own, and those its death buried by their policy 'fail' */
        rjq__deps_release_entries(f->q, r, 1, 0, "dead");
    }
    if (status == RJQ_OK)
        status = code == 0                   ? RJQ_ELEASELOST
                 : code == 4                   ? RJQ_EJOBCANCELED
                 : rjq__write_short(c)         ? RJQ_EREPLICAS
                                               : RJQ_OK;
    if (f->cause) status = f->cause;
    if (f->cb) f->cb(c, status, f->data);
    f->ops->replied(f->w);
    free(f);
}

int rjq__finish_fail(const rjq__finish *job, const char *error, int flags, long long retry_delay_ms,
                     rjq_done_cb *cb, void *data) {
    RJQ_ASSERT(job->w != NULL && job->ops != NULL && job->id != NULL && job->token != NULL);
    rjq_queue *q = job->q;
    rjq_client *c = rjq_queue_get_client(q);
    char jitter[32];
    rjq__random_fraction(c, jitter, sizeof jitter);
    size_t idlen = strlen(job->id);
    fail_ctx *f = malloc(sizeof *f + idlen + 1);
    if (f == NULL) return RJQ_ENOMEM;
    f->q = q;
    memcpy(f->id, job->id, idlen + 1);
    f->w = job->w;
    f->ops = job->ops;
    f->cb = cb;
    f->data = data;
    f->cause = job->cause;
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_FAIL);
    rjq__argv_key(&a, q, RJQ__K_JOB);
    rjq__argv_key(&a, q, RJQ__K_WAKE);
    rjq__argv_str(&a, job->id);
    rjq__argv_str(&a, job->token);
    rjq__argv_str(&a, error ? error : "failed");
    rjq__argv_str(&a, flags & RJQ_FAIL_FATAL ? "1" : "0");
    rjq__argv_ll(&a, retry_delay_ms < 0 ? -1 : retry_delay_ms);
    rjq__argv_str(&a, jitter);
    rjq__argv_ll(&a, rjq__queue_dead_max(q));
    int rc = a.oom ? RJQ_ENOMEM
                   : rjq__script(c, RJQ__S_FAIL, RJQ__REQ_RETRY | RJQ__REQ_DURABLE, on_failed, f,
                                 a.n, a.v, a.len);
    rjq__argv_free(&a);
    if (rc != RJQ_OK) free(f);
    return rc;
}

/* ---- progress ------------------------------------------------------------ */

static void ignore(rjq_client *c, int status, redisReply *r, void *priv) {
    (void)c, (void)status, (void)r, (void)priv;
}

int rjq__finish_progress(rjq_queue *q, const char *id, const char *token, const void *progress,
                         size_t len) {
    rjq_client *c = rjq_queue_get_client(q);
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_PROGRESS);
    rjq__argv_key(&a, q, RJQ__K_JOB);
    rjq__argv_str(&a, id);
    rjq__argv_str(&a, token);
    rjq__argv_add(&a, progress ? progress : "", len);
    int rc = a.oom ? RJQ_ENOMEM : rjq__script(c, RJQ__S_PROGRESS, 0, ignore, NULL, a.n, a.v, a.len);
    rjq__argv_free(&a);
    return rc;
}
