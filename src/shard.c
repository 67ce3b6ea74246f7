/*
 * Sharded queues (docs/sharding.md): a queue Q declared with N shards is
 * stored as N ordinary queues "<Q>~<i>-<k>", each its own hash tag, and
 * the calls on Q that span shards are made here, above the queue layer:
 * each shard is a queue to every script, key and channel below. A handle
 * learns Q's layout when opened with rjq_queue_open_async (one GET of the
 * declaration "<prefix>:{Q}:shards", in Q's slot); a handle that knows Q
 * is sharded is a front (rjq__queue_set_front), which the calls that do
 * not span shards yet refuse (RJQ_ESHARDED).
 *
 * The declaration: "rjq-shards 1 <N> <name 1> ... <name N>" (version 1).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "await.h"
#include "deps.h"
#include "enqueue.h"
#include "headers.h"
#include "shard.h"
#include "shard_ids.h"
#include "shard_resplitter.h"
#include "slot.h"
#include "validate.h"
#include "worker.h"

#define DECL_MAGIC "rjq-shards"
#define DECL_MAX (32 + RJQ_SHARDS_MAX * (RJQ__QUEUE_NAME_MAX + 1))
#define NAME_CAP (RJQ__QUEUE_NAME_MAX + 1)

typedef struct held held;

/* Where a handle is with its layout: learnt (rjq_queue_open_async, a
 * declaration written through it, or its read answered), being read
 * (rjq_queue_open: its routed calls are held meanwhile), or unknown (the
 * read failed: the next routed call, or the next connect when a worker
 * waits, reads it again). */
enum { L_LEARNT, L_READING, L_UNKNOWN };

/* A front's shards (the queue part RJQ__PART_SHARDS; n 0: not sharded). */
typedef struct layout {
    int n;
    rjq_queue *sub[RJQ_SHARDS_MAX];
    unsigned rr; /* the next anonymous job's shard */
    int stick;   /* the shard of the last anonymous job put by rr (anon_shard) */
    unsigned long stick_call; /* ... the last of its enqueue calls later jobs may join */
    int stick_jobs; /* ... jobs put there since (0: none) */
    unsigned long placed[RJQ_SHARDS_MAX]; /* anonymous jobs put on each shard */
    int state;   /* L_* */
    rjq_queue_options opts; /* the handle's, for its shards' handles */
    int has_opts;
    held *held, **held_end; /* calls made while it was not learnt, in call order */
    rjq__resplitter *rs;    /* made with its first worker (shard_resplitter.h) */
    long rs_period, rs_lease; /* its timing (0: the defaults) */
} layout;

static void held_end_all(rjq_queue *q, layout *l, int status);

static void layout_release(rjq_queue *q, void *state) {
    layout *l = state;
    (void)q;
    rjq__resplitter_free(l->rs);
    l->rs = NULL;
    for (int i = 0; i < l->n; i++) rjq_queue_close(l->sub[i]); /* (EBUSY: goes with the client) */
    l->n = 0;
}

static void layout_cancel(rjq_queue *q, void *state) {
    held_end_all(q, state, RJQ_ECANCELED);
}

static void layout_close(rjq_queue *q, void *state) {
    layout *l = state;
    (void)q;
    rjq__resplitter_free(l->rs);
    free(l);
}

static void layout_tick(rjq_queue *q, void *state);

static const rjq__part_ops layout_ops = {
    .tick = layout_tick, .cancel = layout_cancel, .release = layout_release, .close = layout_close};

static layout *layout_of(const rjq_queue *q) {
    layout *l = q ? rjq__queue_part(q, RJQ__PART_SHARDS) : NULL;
    return l && l->n > 0 ? l : NULL;
}

/* The layout part of q, made on first use (not learnt: L_UNKNOWN). */
static layout *layout_make(rjq_queue *q) {
    layout *l = rjq__queue_part(q, RJQ__PART_SHARDS);
    if (l) return l;
    if ((l = calloc(1, sizeof *l)) == NULL) return NULL;
    l->state = L_UNKNOWN;
    l->held_end = &l->held;
    /* (anonymous jobs start at a random shard: many short-lived
     * producers do not all begin with the first) */
    l->rr = (unsigned)(rjq__random(rjq_queue_get_client(q)) % RJQ_SHARDS_MAX);
    rjq__queue_set_part(q, RJQ__PART_SHARDS, &layout_ops, l);
    return l;
}

/* The declaration's key "<prefix>:{Q}:shards" (src/keys.def SHARDS). */
static const char *decl_key(const rjq_queue *q) {
    return rjq__queue_key(q, RJQ__K_SHARDS, NULL);
}

/* A parsed declaration: n 0 when there is none. */
typedef struct decl {
    int n;
    char names[RJQ_SHARDS_MAX][NAME_CAP];
} decl;

/* The GET's reply, never trusted: nil (no declaration) or the string of
 * the format above with 2..RJQ_SHARDS_MAX distinct valid queue names.
 * RJQ_OK or RJQ_EPROTO (errmsg set). */
static int decl_parse(rjq_client *c, const redisReply *r, const char *qname, decl *d) {
    memset(d, 0, sizeof *d);
    if (r->type == REDIS_REPLY_NIL) return RJQ_OK;
    if (r->type != REDIS_REPLY_STRING || r->len == 0 || r->len >= DECL_MAX) goto bad;
    char buf[DECL_MAX];
    memcpy(buf, r->str, r->len);
    buf[r->len] = '\0';
    if (strlen(buf) != r->len) goto bad; /* (a NUL inside) */
    char *save = NULL, *tok = strtok_r(buf, " ", &save);
    if (tok == NULL || strcmp(tok, DECL_MAGIC) != 0) goto bad;
    if ((tok = strtok_r(NULL, " ", &save)) == NULL || strcmp(tok, "1") != 0) goto bad;
    if ((tok = strtok_r(NULL, " ", &save)) == NULL) goto bad;
    char *end;
    long n = strtol(tok, &end, 10);
    if (*end != '\0' || n < 2 || n > RJQ_SHARDS_MAX) goto bad;
    for (int i = 0; i < n; i++) {
        if ((tok = strtok_r(NULL, " ", &save)) == NULL || !rjq__valid_queue_name(tok) ||
            strcmp(tok, qname) == 0)
            goto bad;
        for (int k = 0; k < i; k++)
            if (strcmp(d->names[k], tok) == 0) goto bad;
        snprintf(d->names[i], NAME_CAP, "%s", tok);
    }
    if (strtok_r(NULL, " ", &save) != NULL) goto bad;
    d->n = (int)n;
    return RJQ_OK;
bad:
    memset(d, 0, sizeof *d);
    rjq__errmsg(c, "queue %s: its shard declaration is not one this library reads", qname);
    return RJQ_EPROTO;
}

/* Shard i's share of a whole-queue figure: total / n, the first total % n
 * shards one more, so the shares add up to total (0 stays 0: none). */
static long share_of(long total, int n, int i) {
    return total / n + (i < total % n ? 1 : 0);
}

/* Make q a front of d's shards (or plain again when d has none), opening
 * a handle per shard with opts. RJQ_OK or RJQ_ENOMEM (q unchanged). */
static int layout_apply(rjq_queue *q, const decl *d, const rjq_queue_options *opts) {
    rjq_client *c = rjq_queue_get_client(q);
    layout *l = rjq__queue_part(q, RJQ__PART_SHARDS);
    if (l == NULL && d->n == 0) return RJQ_OK;
    if (l && l->n == d->n) { /* the same shards: keep the handles (workers may use them) */
        int same = 1;
        for (int i = 0; i < d->n && same; i++)
            same = strcmp(rjq_queue_get_name(l->sub[i]), d->names[i]) == 0;
        if (same && l->state == L_UNKNOWN) {
            l->state = L_LEARNT;
            rjq__queue_kick(q); /* (its tick starts the calls held) */
        }
        if (same) return RJQ_OK;
    }
    rjq_queue *sub[RJQ_SHARDS_MAX] = {0};
    /* a bounded queue's bound is split as its limits are (share_of), each
     * shard at least 1: the shards' bounds add up to the whole queue's (to
     * n when it is below n) */
    rjq_queue_options so = RJQ_QUEUE_OPTIONS_INIT;
    if (opts) so = *opts; /* (the whole struct: a sized-in copy of the caller's) */
    long bound = rjq__queue_max_waiting(q);
    for (int i = 0; i < d->n; i++) {
        so.max_waiting = bound ? share_of(bound, d->n, i) : 0;
        if (bound && so.max_waiting == 0) so.max_waiting = 1;
        if (rjq__queue_open(c, d->names[i], &so, &sub[i]) != RJQ_OK) {
            for (int k = 0; k < i; k++) rjq_queue_close(sub[k]);
            return RJQ_ENOMEM;
        }
    }
    if (l == NULL && (l = layout_make(q)) == NULL) {
        for (int k = 0; k < d->n; k++) rjq_queue_close(sub[k]);
        return RJQ_ENOMEM;
    }
    if (l->state == L_UNKNOWN) { /* (L_READING: its read's answer says) */
        l->state = L_LEARNT;
        rjq__queue_kick(q); /* (its tick starts the calls held) */
    }
    /* the old shards (empty: a change of N needs it) */
    for (int i = 0; i < l->n; i++) rjq_queue_close(l->sub[i]);
    for (int i = 0; i < d->n; i++) l->sub[i] = sub[i];
    l->n = d->n;
    memset(l->placed, 0, sizeof l->placed);
    l->stick_jobs = 0;
    if (l->rs) rjq__resplitter_shards(l->rs, l->sub, l->n);
    rjq__queue_set_front(q, d->n > 0);
    /* (named in the registry: rjq queues lists the sharded queue, its
     * shards too, as they are written to) */
    if (d->n > 0) rjq__queue_register(q);
    return RJQ_OK;
}

/* ---- opening: learn the layout first ---------------------------------------- */

typedef struct opening {
    rjq_queue *q;
    rjq_queue_options opts;
    int has_opts;
    rjq_queue_open_cb *cb;
    void *data;
} opening;

static int send_get(rjq_queue *q, rjq__reply_fn *fn, void *priv) {
    const char *argv[] = {"GET", decl_key(q)};
    return rjq__command_in(rjq_queue_get_client(q), rjq__queue_slot(q), 0, fn, priv, 2, argv, NULL);
}

static void on_opened(rjq_client *c, int status, redisReply *r, void *priv) {
    opening *o = priv;
    decl d;
    if (status == RJQ_OK) status = decl_parse(c, r, rjq_queue_get_name(o->q), &d);
    if (status == RJQ_OK) status = layout_apply(o->q, &d, o->has_opts ? &o->opts : NULL);
    if (status != RJQ_OK && status != RJQ_ECANCELED && rjq__accepting(c)) rjq_queue_close(o->q);
    o->cb(c, status, status == RJQ_OK ? o->q : NULL, o->data);
    free(o);
}

int rjq_queue_open_async(rjq_client *c, const char *name, const rjq_queue_options *opts,
                         rjq_queue_open_cb *cb, void *data) {
    if (c == NULL || cb == NULL) return RJQ_EINVAL;
    opening *o = calloc(1, sizeof *o);
    if (o == NULL) return RJQ_ENOMEM;
    int rc = rjq__queue_open(c, name, opts, &o->q);
    if (rc == RJQ_OK && opts) {
        rjq__sized_in(c, &o->opts, sizeof o->opts, opts, "rjq_queue_options"); /* (checked) */
        o->has_opts = 1;
    }
    o->cb = cb;
    o->data = data;
    if (rc == RJQ_OK && (rc = send_get(o->q, on_opened, o)) != RJQ_OK) rjq_queue_close(o->q);
    if (rc != RJQ_OK) free(o);
    return rc;
}

/* ---- rjq_queue_open: the gate until the layout is read --------------------------- */

/* A call made on a handle whose layout is not learnt: its arguments
 * copied, made again (routed) once it is, or its callback given the
 * read's error. */
typedef enum {
    H_ENQUEUE, H_BATCH, H_WORKER, H_STATS, H_CANCEL, H_GET_JOB, H_DELETE, H_PAUSE, H_RESUME,
    H_RECLAIM, H_REPLAY, H_PURGE, H_LIST_JOBS, H_LIST_DEAD, H_ENQUEUE_AWAIT, H_QUEUE_AWAIT,
    H_LIMITS, H_LEARNT, H_WORKERS, H_PROMOTE, H_GET_DEPS, H_GET_DEPENDENTS, H_FORMAT,
    H_GET_JOB_DEPS
} hkind;

typedef void any_fn(void);

struct held {
    held *next;
    hkind kind;
    any_fn *cb;
    void *data;
    char *payload; /* H_ENQUEUE */
    size_t len;
    rjq_job_options jo; /* H_ENQUEUE (jo.id a copy) */
    int has_jo;
    rjq_enqueue_item *items; /* H_BATCH: n items, each payload and opts (and id) a copy */
    rjq_job_options *jos;
    size_t n;
    char *id;               /* by id; NULL: none */
    long offset, limit;
    rjq_job_state jstate;
    rjq_await_options aw;   /* H_ENQUEUE_AWAIT, H_QUEUE_AWAIT (has_aw: given) */
    int has_aw;
    rjq_await *a;           /* ... with an out handle: a reserved await (rjq__await_reserve) */
    rjq_worker *w;          /* H_WORKER, H_WORKERS: a reserved worker (rjq__worker_reserve) */
    rjq_worker_options wo;
    rjq_queue *qs[RJQ_WORKER_QUEUES_MAX]; /* H_WORKERS: its queues, each a use but qs[at] */
    int weights[RJQ_WORKER_QUEUES_MAX];   /* (w's use) */
    size_t nq, at;
    rjq_worker_order order;
    int parked; /* H_WORKERS: a queue is sharded: never started, ends when stopped */
    rjq_limits lim;         /* H_LIMITS (the whole queue's) */
    rjq_queue *to;          /* H_ENQUEUE held on a dependency's queue (its layout
                             * unknown yet): the job's own queue (held) */
};

/* A held rjq_worker_start or rjq_worker_start_queues (h->w reserved). */
static int held_worker(const held *h) {
    return h->kind == H_WORKER || h->kind == H_WORKERS;
}

static void held_free(held *h) {
    for (size_t i = 0; i < h->nq; i++)
        if (i != h->at) rjq__queue_unuse(h->qs[i]);
    if (h->a) rjq__await_unreserve(h->a, RJQ_OK); /* (a call refused: no callback) */
    free(h->payload);
    free((char *)h->jo.id);
    free((char *)h->jo.group);
    free((void *)h->jo.headers);
    free((void *)h->jo.after);
    for (size_t i = 0; h->items && i < h->n; i++) {
        free((void *)h->items[i].payload);
        free((char *)h->jos[i].id);
        free((char *)h->jos[i].group);
        free((void *)h->jos[i].headers);
    }
    free(h->items);
    free(h->jos);
    free(h->id);
    if (h->to) rjq__queue_release(h->to);
    free(h);
}

/* h's callback gets status (it never ran): exactly once. */
static void held_fail(rjq_client *c, held *h, int status) {
    if (h->a) { /* (its callback is the await's) */
        rjq__await_unreserve(h->a, status);
        h->a = NULL;
        return;
    }
    if (h->cb == NULL) return;
    switch (h->kind) {
    case H_ENQUEUE:
    case H_BATCH: ((rjq_enqueue_cb *)h->cb)(c, status, NULL, 0, h->data); break;
    case H_STATS: ((rjq_stats_cb *)h->cb)(c, status, NULL, h->data); break;
    case H_CANCEL: ((rjq_cancel_cb *)h->cb)(c, status, NULL, h->data); break;
    case H_GET_JOB: ((rjq_job_info_cb *)h->cb)(c, status, NULL, h->data); break;
    case H_LIST_JOBS:
    case H_LIST_DEAD: ((rjq_ids_cb *)h->cb)(c, status, NULL, 0, h->data); break;
    case H_ENQUEUE_AWAIT:
    case H_QUEUE_AWAIT: ((rjq_await_cb *)h->cb)(c, status, NULL, h->data); break;
    case H_WORKER:
    case H_WORKERS: break;
    case H_LEARNT: ((rjq__learnt_fn *)h->cb)(c, status, h->data); break;
    case H_GET_DEPS: ((rjq_dependencies_cb *)h->cb)(c, status, NULL, 0, h->data); break;
    case H_GET_DEPENDENTS: ((rjq_dependents_cb *)h->cb)(c, status, NULL, 0, h->data); break;
    case H_GET_JOB_DEPS: ((rjq_job_deps_cb *)h->cb)(c, status, NULL, 0, NULL, 0, h->data); break;
    default: ((rjq_count_cb *)h->cb)(c, status, 0, h->data); break;
    }
}

static rjq_queue *shard_for(layout *l, const char *id);

/* Start h's reserved await on the queue its job routes to (q learnt now);
 * an enqueue's job whose await ended meanwhile is still enqueued (as a
 * cancelled await's held job is: rjq_await_cancel). */
static void held_start_await(rjq_queue *q, held *h) {
    rjq_await *a = h->a;
    h->a = NULL;
    layout *l = layout_of(q);
    const char *id = h->kind == H_QUEUE_AWAIT ? h->id : h->has_jo ? h->jo.id : NULL;
    if (h->kind == H_QUEUE_AWAIT && l && id[strspn(id, "0123456789")] == '\0') {
        rjq__errmsg(rjq_queue_get_client(q), "queue %s is sharded: a server-assigned id names a "
                    "job of one shard (await it on its shard: rjq_queue_get_shard)",
                    rjq_queue_get_name(q));
        rjq__await_unreserve(a, RJQ_ESHARDED);
        return;
    }
    rjq_queue *to = l ? shard_for(l, id) : q;
    if (h->kind == H_QUEUE_AWAIT) {
        (void)rjq__await_start_reserved(a, to, NULL, 0, NULL, id);
    } else if (rjq__await_start_reserved(a, to, h->payload, h->len, h->has_jo ? &h->jo : NULL,
                                         NULL) == 1) {
        (void)rjq__enqueue_one(to, h->payload, h->len, h->has_jo ? &h->jo : NULL, NULL, NULL);
    }
}

/* Make h's call on q (learnt now): its public call, routed; a synchronous
 * error goes to its callback. */
static void held_run(rjq_queue *q, held *h) {
    rjq_client *c = rjq_queue_get_client(q);
    int rc;
    switch (h->kind) {
    case H_ENQUEUE:
        rc = rjq_enqueue(h->to ? h->to : q, h->payload, h->len, h->has_jo ? &h->jo : NULL,
                         (rjq_enqueue_cb *)h->cb, h->data);
        break;
    case H_BATCH:
        rc = rjq_enqueue_batch(q, h->items, h->n, (rjq_enqueue_cb *)h->cb, h->data);
        break;
    case H_ENQUEUE_AWAIT:
        if (h->a) return held_start_await(q, h);
        rc = rjq_enqueue_await(q, h->payload, h->len, h->has_jo ? &h->jo : NULL,
                               h->has_aw ? &h->aw : NULL, (rjq_await_cb *)h->cb, h->data, NULL);
        break;
    case H_QUEUE_AWAIT:
        if (h->a) return held_start_await(q, h);
        rc = rjq_queue_await(q, h->id, h->has_aw ? &h->aw : NULL, (rjq_await_cb *)h->cb, h->data,
                             NULL);
        break;
    case H_STATS: rc = rjq_queue_get_stats(q, (rjq_stats_cb *)h->cb, h->data); break;
    case H_CANCEL: rc = rjq_queue_cancel(q, h->id, (rjq_cancel_cb *)h->cb, h->data); break;
    case H_GET_JOB: rc = rjq_queue_get_job(q, h->id, (rjq_job_info_cb *)h->cb, h->data); break;
    case H_DELETE: rc = rjq_queue_delete(q, h->id, (rjq_count_cb *)h->cb, h->data); break;
    case H_PROMOTE: rc = rjq_queue_promote(q, h->id, (rjq_count_cb *)h->cb, h->data); break;
    case H_PAUSE: rc = rjq_queue_pause(q, (rjq_count_cb *)h->cb, h->data); break;
    case H_RESUME: rc = rjq_queue_resume(q, (rjq_count_cb *)h->cb, h->data); break;
    case H_RECLAIM: rc = rjq_queue_reclaim(q, (rjq_count_cb *)h->cb, h->data); break;
    case H_FORMAT:
        rc = rjq_queue_set_format(q, (int)h->limit, (rjq_count_cb *)h->cb, h->data);
        break;
    case H_REPLAY:
        rc = rjq_queue_replay(q, h->id, h->limit, (rjq_count_cb *)h->cb, h->data);
        break;
    case H_PURGE:
        rc = rjq_queue_purge(q, h->jstate, h->limit, (rjq_count_cb *)h->cb, h->data);
        break;
    case H_LIST_JOBS:
        rc = rjq_queue_list_jobs(q, h->jstate, h->offset, h->limit, (rjq_ids_cb *)h->cb, h->data);
        break;
    case H_LIST_DEAD:
        rc = rjq_queue_list_dead(q, h->offset, h->limit, (rjq_ids_cb *)h->cb, h->data);
        break;
    case H_LIMITS: rc = rjq_queue_set_limits(q, &h->lim, (rjq_count_cb *)h->cb, h->data); break;
    case H_LEARNT: ((rjq__learnt_fn *)h->cb)(c, RJQ_OK, h->data); return;
    case H_GET_DEPS:
        rc = rjq_queue_get_dependencies(q, h->id, (rjq_dependencies_cb *)h->cb, h->data);
        break;
    case H_GET_DEPENDENTS:
        rc = rjq_queue_get_dependents(q, h->id, (rjq_dependents_cb *)h->cb, h->data);
        break;
    case H_GET_JOB_DEPS:
        rc = rjq_queue_get_job_deps(q, h->id, (rjq_job_deps_cb *)h->cb, h->data);
        break;
    default: rc = RJQ_EINVAL; break;
    }
    if (rc != RJQ_OK) held_fail(c, h, rc);
}

static int gated(rjq_queue *q);
static int layout_read(rjq_queue *q, layout *l);

/* H_WORKERS on q (learnt now): held on the next of its queues still
 * reading its layout (1: h is that queue's now), else started (RJQ_OK),
 * parked when one of them is sharded (RJQ_OK, h kept: it ends when
 * stopped), or an error with it still reserved. */
static int held_start_workers(held *h) {
    for (size_t i = 0; i < h->nq; i++) {
        layout *l = rjq__queue_part(h->qs[i], RJQ__PART_SHARDS);
        if (!gated(h->qs[i])) continue;
        if (l->state == L_UNKNOWN && layout_read(h->qs[i], l) != RJQ_OK)
            return RJQ_ECONN; /* (kept here: tried again at the next read) */
        rjq__queue_use(h->qs[h->at]); /* the worker's use moves to qs[i] */
        rjq__worker_reserved_move(h->w, h->qs[i]);
        rjq__queue_unuse(h->qs[i]);
        h->at = i;
        h->next = NULL;
        *l->held_end = h;
        l->held_end = &h->next;
        return 1;
    }
    for (size_t i = 0; i < h->nq; i++) {
        if (layout_of(h->qs[i])) {
            rjq__errmsg(rjq_queue_get_client(h->qs[i]), "rjq_worker_start_queues: queue %s is "
                        "sharded (the worker is not started: stop it, and start one on its "
                        "shards or with rjq_worker_start)", rjq_queue_get_name(h->qs[i]));
            h->parked = 1;
            return RJQ_OK;
        }
    }
    return rjq__worker_start_reserved(h->w, h->qs, h->nq, h->order, h->weights, &h->wo);
}

/* A worker starts on front q: from now on this process re-splits q's
 * limit shares by demand when it holds q's re-split lease (one
 * re-splitter per handle, made with its first worker; out of memory:
 * none, the shares stay as they are). */
static void resplitter_want(rjq_queue *q, layout *l) {
    if (l->rs_period < 0) return; /* (tests of the step alone: none) */
    if (l->rs || (l->rs = rjq__resplitter_new(q, l->rs_period, l->rs_lease)) == NULL) return;
    rjq__resplitter_shards(l->rs, l->sub, l->n);
}

int rjq__queue_resplit_every(rjq_queue *q, long period_ms, long lease_ms) {
    layout *l = layout_make(q);
    if (l == NULL) return RJQ_ENOMEM;
    l->rs_period = period_ms;
    l->rs_lease = lease_ms;
    return RJQ_OK;
}

int rjq__queue_resplit_leading(const rjq_queue *q) {
    const layout *l = rjq__queue_part(q, RJQ__PART_SHARDS);
    return l && l->rs ? rjq__resplitter_leading(l->rs) : 0;
}

/* Start reserved worker h->w on q's shards (or on q, plain; H_WORKERS:
 * held_start_workers, 1 too). RJQ_OK, or an error with it still reserved. */
static int held_start_worker(rjq_queue *q, held *h) {
    if (h->kind == H_WORKERS) return held_start_workers(h);
    layout *l = layout_of(q);
    if (l) {
        int rc = rjq__worker_start_reserved(h->w, l->sub, (size_t)l->n, RJQ__WORKER_SHARDS, NULL,
                                            &h->wo);
        if (rc == RJQ_OK) resplitter_want(q, l);
        return rc;
    }
    return rjq__worker_start_reserved(h->w, &q, 1, RJQ_WORKER_STRICT, NULL, &h->wo);
}

/* q learnt its layout (status RJQ_OK), or its read failed: make the held
 * calls in order, or give them status. A reserved worker waits across a
 * failure (the next read starts it); one stopped meanwhile ends (its stop
 * callback gets RJQ_OK, or RJQ_ECANCELED with the client). */
static void held_end_all(rjq_queue *q, layout *l, int status) {
    rjq_client *c = rjq_queue_get_client(q);
    held *keep = NULL, **keep_end = &keep;
    rjq__enter(c); /* a callback may free the client: its end waits for leave */
    while (l->held) {
        held *h = l->held;
        l->held = h->next;
        h->next = NULL;
        if (held_worker(h)) {
            int closing = rjq__closing(c) || !rjq__accepting(c), rc = RJQ_OK;
            if (closing || rjq__worker_reserved_stopped(h->w)) {
                rjq__worker_unreserve(h->w, closing ? RJQ_ECANCELED : RJQ_OK);
            } else if (h->parked || status != RJQ_OK || (rc = held_start_worker(q, h)) != RJQ_OK ||
                       h->parked) {
                if (rc == 1) continue; /* (held on another of its queues now) */
                *keep_end = h; /* (waits for the next read, or parked: for its stop) */
                keep_end = &h->next;
                continue;
            }
        } else if (h->kind == H_LEARNT && status != RJQ_OK && status != RJQ_ECANCELED &&
                   rjq__accepting(c)) {
            *keep_end = h; /* (waits for the next read, as a worker does) */
            keep_end = &h->next;
            continue;
        } else if (status == RJQ_OK && rjq__accepting(c)) {
            held_run(q, h);
        } else {
            held_fail(c, h, status == RJQ_OK ? RJQ_ECANCELED : status);
        }
        held_free(h);
    }
    l->held = keep;
    l->held_end = keep ? keep_end : &l->held;
    rjq__leave(c);
}

static void on_read(rjq_client *c, int status, redisReply *r, void *priv);

/* Read q's declaration (l->state L_READING until it answers; q held). */
static int layout_read(rjq_queue *q, layout *l) {
    const char *argv[] = {"GET", decl_key(q)};
    int rc = rjq__command_in(rjq_queue_get_client(q), rjq__queue_slot(q), 0, on_read, q, 2, argv,
                             NULL);
    if (rc != RJQ_OK) return rc;
    l->state = L_READING;
    rjq__queue_hold(q);
    return RJQ_OK;
}

static void on_read(rjq_client *c, int status, redisReply *r, void *priv) {
    rjq_queue *q = priv;
    layout *l = rjq__queue_part(q, RJQ__PART_SHARDS);
    decl d;
    if (status == RJQ_OK) status = decl_parse(c, r, rjq_queue_get_name(q), &d);
    if (status == RJQ_OK && rjq__accepting(c))
        status = layout_apply(q, &d, l->has_opts ? &l->opts : NULL);
    l->state = status == RJQ_OK ? L_LEARNT : L_UNKNOWN;
    held_end_all(q, l, status);
    rjq__queue_release(q);
}

/* The layout's tick: workers stopped before they started end; calls held
 * while a declaration was written through the handle start. */
static void layout_tick(rjq_queue *q, void *state) {
    layout *l = state;
    if (l->held == NULL) return;
    if (l->state == L_LEARNT) {
        held_end_all(q, l, RJQ_OK);
        return;
    }
    for (held **hp = &l->held; *hp;) {
        held *h = *hp;
        if (held_worker(h) && rjq__worker_reserved_stopped(h->w)) {
            *hp = h->next;
            if (*hp == NULL) l->held_end = hp;
            rjq__worker_unreserve(h->w, RJQ_OK);
            held_free(h);
        } else {
            hp = &h->next;
        }
    }
}

/* A read again at a connect, for the handles whose workers wait. */
static void shards_ready(rjq_client *c, void *state, int kind) {
    (void)state;
    if (kind != RJQ_CONN_COMMAND) return;
    for (rjq_queue *q = rjq__queue_first(c); q; q = rjq__queue_next(q)) {
        layout *l = rjq__queue_part(q, RJQ__PART_SHARDS);
        if (l && l->state == L_UNKNOWN && l->held) layout_read(q, l); /* (failed: next time) */
    }
}

static const rjq__feature shards_feature = {.name = "shards", .ready = shards_ready};

/* 1 when calls on q wait for its layout (L_UNKNOWN: a read is sent). */
static int gated(rjq_queue *q) {
    layout *l = q ? rjq__queue_part(q, RJQ__PART_SHARDS) : NULL;
    return l && l->state != L_LEARNT;
}

/* Hold call h on q (gated): RJQ_OK (h is q's), or an error (h freed). */
static int hold(rjq_queue *q, held *h) {
    layout *l = rjq__queue_part(q, RJQ__PART_SHARDS);
    rjq_client *c = rjq_queue_get_client(q);
    int rc = rjq__accepting(c) ? RJQ_OK : RJQ_ECLOSED;
    if (rc == RJQ_OK && l->state == L_UNKNOWN) rc = layout_read(q, l);
    if (rc != RJQ_OK) {
        if (held_worker(h)) rjq__worker_unreserve(h->w, RJQ_OK);
        held_free(h);
        return rc;
    }
    *l->held_end = h;
    l->held_end = &h->next;
    return RJQ_OK;
}

static held *held_new(hkind kind, any_fn *cb, void *data) {
    held *h = calloc(1, sizeof *h);
    if (h) {
        h->kind = kind;
        h->cb = cb;
        h->data = data;
    }
    return h;
}

/* A call with a callback only and an optional id, held. */
/* A new held call with a copy of id (NULL: none); NULL when out of memory. */
static held *held_new_id(hkind kind, any_fn *cb, void *data, const char *id) {
    held *h = held_new(kind, cb, data);
    if (h && id && (h->id = strdup(id)) == NULL) {
        held_free(h);
        h = NULL;
    }
    return h;
}

static int hold_call(rjq_queue *q, hkind kind, any_fn *cb, void *data, const char *id) {
    held *h = held_new_id(kind, cb, data, id);
    return h ? hold(q, h) : RJQ_ENOMEM;
}

int rjq_queue_open(rjq_client *c, const char *name, const rjq_queue_options *opts,
                   rjq_queue **out) {
    int rc = rjq__queue_open(c, name, opts, out);
    if (rc != RJQ_OK) return rc;
    rjq_queue *q = *out;
    static char registered; /* (the feature keeps no state: a marker) */
    layout *l = rjq__feature_add(c, &shards_feature, &registered) == RJQ_OK ? layout_make(q) : NULL;
    if (l == NULL) rc = RJQ_ENOMEM;
    if (rc == RJQ_OK && opts) {
        rjq__sized_in(c, &l->opts, sizeof l->opts, opts, "rjq_queue_options"); /* (checked) */
        l->has_opts = 1;
    }
    if (rc == RJQ_OK) rc = layout_read(q, l);
    if (rc != RJQ_OK) {
        rjq_queue_close(q);
        *out = NULL;
    }
    return rc;
}

/* RJQ_OK when aw is NULL or of a size this library reads (errmsg set). */
static int await_options_ok(rjq_queue *q, const rjq_await_options *aw) {
    rjq_await_options copy;
    if (aw == NULL) return RJQ_OK;
    return rjq__sized_in(rjq_queue_get_client(q), &copy, sizeof copy, aw, "rjq_await_options");
}

/* The call just held on q (the last) is an await: its kind, callback and
 * await options (copied as this library reads them). */
static int held_as_await(rjq_queue *q, hkind kind, const rjq_await_options *aw, rjq_await_cb *cb,
                         void *data, rjq_await *a) {
    layout *l = rjq__queue_part(q, RJQ__PART_SHARDS);
    /* the call just held is the last: held_end points at its next (no walk
     * over the calls held before it) */
    held *h = (held *)(void *)((char *)l->held_end - offsetof(held, next));
    h->kind = kind;
    h->cb = a ? NULL : (any_fn *)cb;
    h->data = data;
    h->a = a;
    if (aw && rjq__sized_in(rjq_queue_get_client(q), &h->aw, sizeof h->aw, aw,
                            "rjq_await_options") == RJQ_OK)
        h->has_aw = 1;
    return RJQ_OK;
}

int rjq__queue_learning(rjq_queue *q) {
    return gated(q);
}

int rjq__queue_when_learnt(rjq_queue *q, rjq__learnt_fn *fn, void *data) {
    if (!gated(q)) return 1;
    held *h = held_new(H_LEARNT, (any_fn *)fn, data);
    return h ? hold(q, h) : RJQ_ENOMEM;
}

/* A call with a page or a limit, held. */
static int hold_paged(rjq_queue *q, hkind kind, any_fn *cb, void *data, const char *id,
                      rjq_job_state state, long offset, long limit) {
    held *h = held_new_id(kind, cb, data, id);
    if (h == NULL) return RJQ_ENOMEM;
    h->jstate = state;
    h->offset = offset;
    h->limit = limit;
    return hold(q, h);
}

int rjq_queue_count_shards(const rjq_queue *q) {
    if (q == NULL) return RJQ_EINVAL;
    const layout *l = layout_of(q);
    return l ? l->n : 1;
}

rjq_queue *rjq_queue_get_shard(rjq_queue *q, int i) {
    layout *l = layout_of(q);
    if (l) return i >= 0 && i < l->n ? l->sub[i] : NULL;
    return q && i == 0 ? q : NULL;
}

/* ---- declaring ---------------------------------------------------------------- */

/* The names of n shards of queue `name` (docs/sharding.md section 2): on
 * a cluster shard i lands on master i mod M of the client's table, else
 * k is 0. RJQ_OK, RJQ_EQUEUENAME (a name would be too long) or RJQ_ECONN
 * (a cluster whose table names no master yet). */
static int make_names(rjq_client *c, const char *name, int n, decl *d) {
    int pins[RJQ__SLOTS / 64];
    size_t m = 0;
    if (rjq__route_mode(c) == RJQ__ROUTE_CLUSTER) {
        m = rjq__route_masters(c, pins, sizeof pins / sizeof pins[0]);
        if (m == 0) {
            rjq__errmsg(c, "queue %s: no master known to place its shards on", name);
            return RJQ_ECONN;
        }
    }
    memset(d, 0, sizeof *d);
    for (int i = 0; i < n; i++) {
        char base[NAME_CAP + 16], tag[NAME_CAP + 48];
        snprintf(base, sizeof base, "%s~%d", name, i);
        char first[sizeof base + 4];
        snprintf(first, sizeof first, "%s-0", base);
        int slot = m ? pins[(size_t)i % m] : rjq__key_slot(first, strlen(first));
        if (rjq__slot_tag(base, slot, tag, sizeof tag) != 0 || !rjq__valid_queue_name(tag)) {
            rjq__errmsg(c, "queue %s: its shard names would pass %d bytes", name,
                        RJQ__QUEUE_NAME_MAX);
            return RJQ_EQUEUENAME;
        }
        memcpy(d->names[i], tag, strlen(tag) + 1); /* (a valid name: it fits) */
    }
    d->n = n;
    return RJQ_OK;
}

typedef struct declaring {
    rjq_queue *q;
    int n, tries;
    rjq_count_cb *cb;
    void *data;
    decl old;                         /* as read */
    decl nw;                          /* as written */
    rjq_queue *check[RJQ_SHARDS_MAX + 1]; /* handles whose stats are read */
    int nchecks, waiting, status;
    long long jobs;                   /* ready + delayed + active of them all */
} declaring;

static void declare_end(declaring *x, int status) {
    rjq_client *c = rjq_queue_get_client(x->q);
    if (x->cb) x->cb(c, status, status == RJQ_OK ? x->n : 0, x->data);
    rjq__queue_release(x->q);
    free(x);
}

static void declare_read(declaring *x);

static void on_written(rjq_client *c, int status, redisReply *r, void *priv) {
    declaring *x = priv;
    if (status == RJQ_OK && r->type == REDIS_REPLY_NIL) { /* SET NX lost: declared meanwhile */
        if (++x->tries < 3) {
            declare_read(x);
            return;
        }
        rjq__errmsg(c, "queue %s: its shard declaration keeps changing", rjq_queue_get_name(x->q));
        status = RJQ_EBUSY;
    }
    if (status == RJQ_OK && r->type != REDIS_REPLY_STATUS && r->type != REDIS_REPLY_INTEGER)
        status = RJQ_EPROTO;
    if (status == RJQ_OK && rjq__accepting(c)) status = layout_apply(x->q, &x->nw, NULL);
    declare_end(x, status);
}

/* Every handle of the check answered: write the declaration when Q is empty. */
static void declare_write(declaring *x) {
    rjq_client *c = rjq_queue_get_client(x->q);
    for (int i = 0; i < x->nchecks; i++) rjq_queue_close(x->check[i]);
    x->nchecks = 0;
    if (x->status != RJQ_OK) {
        declare_end(x, x->status);
        return;
    }
    if (x->jobs > 0) {
        rjq__errmsg(c, "queue %s has %lld jobs ready, delayed or running: its shard count "
                       "changes only while it is empty", rjq_queue_get_name(x->q), x->jobs);
        declare_end(x, RJQ_EBUSY);
        return;
    }
    decl *d = &x->nw;
    memset(d, 0, sizeof *d);
    int rc = x->n > 1 ? make_names(c, rjq_queue_get_name(x->q), x->n, d) : RJQ_OK;
    const char *key = decl_key(x->q);
    char *val = rc == RJQ_OK ? malloc(DECL_MAX) : NULL;
    if (rc == RJQ_OK && val == NULL) rc = RJQ_ENOMEM;
    if (rc == RJQ_OK) {
        if (x->n > 1) {
            size_t at = (size_t)snprintf(val, DECL_MAX, "%s 1 %d", DECL_MAGIC, x->n);
            for (int i = 0; i < x->n; i++)
                at += (size_t)snprintf(val + at, DECL_MAX - at, " %s", d->names[i]);
            const char *set[] = {"SET", key, val, "NX"};
            rc = rjq__command_in(c, rjq__queue_slot(x->q), 0, on_written, x, x->old.n ? 3 : 4,
                                 set, NULL);
        } else {
            const char *del[] = {"DEL", key};
            rc = rjq__command_in(c, rjq__queue_slot(x->q), 0, on_written, x, 2, del, NULL);
        }
    }
    free(val);
    if (rc != RJQ_OK) declare_end(x, rc);
}

static void on_checked(rjq_client *c, int status, const rjq_stats *s, void *data) {
    declaring *x = data;
    (void)c;
    if (status != RJQ_OK && x->status == RJQ_OK) x->status = status;
    if (status == RJQ_OK) x->jobs += s->ready + s->delayed + s->active;
    if (--x->waiting == 0) declare_write(x);
}

static void on_declared(rjq_client *c, int status, redisReply *r, void *priv) {
    declaring *x = priv;
    if (status == RJQ_OK) status = decl_parse(c, r, rjq_queue_get_name(x->q), &x->old);
    if (status != RJQ_OK) {
        declare_end(x, status);
        return;
    }
    if (x->old.n == (x->n > 1 ? x->n : 0)) { /* as declared: keep its names */
        declare_end(x, rjq__accepting(c) ? layout_apply(x->q, &x->old, NULL) : RJQ_OK);
        return;
    }
    /* Q empty? its base queue and every recorded shard, each by its stats */
    const char *names[RJQ_SHARDS_MAX + 1];
    names[0] = rjq_queue_get_name(x->q);
    for (int i = 0; i < x->old.n; i++) names[1 + i] = x->old.names[i];
    x->status = RJQ_OK;
    x->jobs = 0;
    x->waiting = 1; /* (this loop's own, so that no answer ends it early) */
    for (int i = 0; i < 1 + x->old.n && rjq__accepting(c); i++) {
        rjq_queue *h;
        int rc = rjq__queue_open(c, names[i], NULL, &h);
        if (rc == RJQ_OK) {
            x->check[x->nchecks++] = h;
            x->waiting++;
            if ((rc = rjq__queue_stats_one(h, on_checked, x)) != RJQ_OK) x->waiting--;
        }
        if (rc != RJQ_OK) {
            x->status = rc;
            break;
        }
    }
    if (--x->waiting == 0) declare_write(x);
}

static void declare_read(declaring *x) {
    int rc = send_get(x->q, on_declared, x);
    if (rc != RJQ_OK) declare_end(x, rc);
}

static void declare_routed(rjq_client *c, int status, void *arg) {
    declaring *x = arg;
    (void)c;
    if (status != RJQ_OK) declare_end(x, status);
    else declare_read(x);
}

int rjq_queue_shard(rjq_queue *q, int n, rjq_count_cb *cb, void *data) {
    if (q == NULL || n < 1 || n > RJQ_SHARDS_MAX) return RJQ_EINVAL;
    rjq_client *c = rjq_queue_get_client(q);
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    decl probe;
    if (n > 1 && strlen(rjq_queue_get_name(q)) + 26 > RJQ__QUEUE_NAME_MAX &&
        make_names(c, rjq_queue_get_name(q), n, &probe) == RJQ_EQUEUENAME)
        return RJQ_EQUEUENAME;
    declaring *x = calloc(1, sizeof *x);
    if (x == NULL) return RJQ_ENOMEM;
    x->q = q;
    x->n = n;
    x->cb = cb;
    x->data = data;
    rjq__queue_hold(q);
    int rc = rjq__when_routed(c, declare_routed, x);
    if (rc != RJQ_OK) {
        rjq__queue_release(q);
        free(x);
    }
    return rc;
}

/* ---- enqueue ------------------------------------------------------------------ */

/* The shard of a job: by its id's hash (so an id always meets itself),
 * anonymous ones in turn. */
static rjq_queue *shard_for(layout *l, const char *id) {
    if (id) return l->sub[rjq__crc16(id, strlen(id)) % (unsigned)l->n];
    return l->sub[l->rr++ % (unsigned)l->n];
}

/* The shard of an anonymous job: the next in turn, but while the shard
 * the last one went to has an enqueue call in flight, that shard, until
 * the batch held back for that call's reply has gone (at most STICK_MAX
 * jobs). An enqueue made while its shard's call is in flight
 * joins the batch held back for that call's reply (src/enqueue.c "Self-
 * clocking"), so it costs no script call of its own; spread in turn, the
 * jobs of a producer making a job or two per loop turn each found their
 * shard with nothing in flight and went one per call (a 3-shard queue at
 * 3 000 jobs/s: 1.17 jobs an enqueue call against 4 unsharded, and as
 * many completion calls: bench/README.md "Anonymous jobs join the shard
 * whose call is in flight"). The jobs of one loop turn still go in turn
 * (a shard whose batch is gathering has no call in flight: one call per
 * shard), a shard keeps the jobs for about one round trip, and a bounded
 * queue's (whose shards each refuse past their share) go in turn. A new
 * round goes to the shard that has had the fewest anonymous jobs of the
 * handle (the next in turn among equals): a round lasts until its shard's
 * reply, so without it a slow shard kept longer rounds and its depth grew
 * away from the others' (bench/cluster.sh CASES=place: 1 706 jobs apart
 * against 8). */
#define STICK_MAX 16

static int anon_shard(rjq_queue *q, layout *l) {
    unsigned long sent;
    if (l->stick_jobs > 0 && l->stick_jobs < STICK_MAX && l->stick < l->n &&
        rjq__enqueue_calls(l->sub[l->stick], &sent) && sent <= l->stick_call) {
        l->stick_jobs++;
        l->placed[l->stick]++;
        return l->stick;
    }
    /* the next in turn that has had the fewest: a shard that kept jobs
     * longer (its reply came later) is passed over until the others have
     * as many, so the counts stay within STICK_MAX of each other */
    int i = (int)(l->rr++ % (unsigned)l->n);
    l->stick_jobs = 0;
    if (rjq__queue_max_waiting(q) == 0) {
        for (int k = 1; k < l->n; k++) {
            int j = (int)((l->rr - 1 + (unsigned)k) % (unsigned)l->n);
            if (l->placed[j] < l->placed[i]) i = j;
        }
        l->placed[i]++;
        /* the call this job goes in is the next, sent + 1: at its tick,
         * or with a call in flight, held back for its reply; later jobs
         * join the batch held back while that call is in flight (it went
         * at its tick: sent + 2), or that one itself (sent + 1) */
        int busy = rjq__enqueue_calls(l->sub[i], &sent);
        l->stick = i;
        l->stick_call = busy ? sent : sent + 1;
        l->stick_jobs = 1;
    }
    return i;
}

/* Where a job of a front goes, with the options it goes with (*o, NULL or
 * copy, as rjq__job_options_in gives them). A job with an id goes to its
 * id's shard (one with dedup_ms or debounce but no id too: that shard's
 * check refuses it, as on a plain queue). An anonymous job takes the next
 * shard and an id made for it that routes there (shard_ids.c), written to
 * idbuf and set in copy (*o becomes copy), so it goes as a caller id and
 * every by-id call on the front finds it (docs/sharding.md 6a). RJQ_OK or
 * RJQ_ENOMEM. */
static int route_job(rjq_queue *q, layout *l, rjq_job_options *copy, const rjq_job_options **o,
                     char *idbuf, rjq_queue **to) {
    const rjq_job_options *g = *o;
    if (g && (g->id || g->dedup_ms || g->debounce)) {
        *to = shard_for(l, g->id);
        return RJQ_OK;
    }
    int i = rjq__shard_id_make(rjq_queue_get_client(q), l->n, anon_shard(q, l), idbuf);
    if (i < 0) return i;
    if (g == NULL) {
        rjq_job_options init = RJQ_JOB_OPTIONS_INIT;
        *copy = init;
    } else if (g != copy) {
        *copy = *g;
    }
    copy->id = idbuf;
    *o = copy;
    *to = l->sub[i];
    return RJQ_OK;
}

rjq_queue *rjq__queue_id_shard(rjq_queue *q, const char *id) {
    layout *l = layout_of(q);
    return l && id && id[0] ? shard_for(l, id) : q;
}

/* The shard of a job group: by its name's hash, as a job id's (every job
 * of the group there, so the group's limits, pause and ring are one
 * shard's: exact; README "Groups", docs/sharding.md section 4). */
static int group_shard(const layout *l, const char *group) {
    return (int)(rjq__crc16(group, strlen(group)) % (unsigned)l->n);
}

rjq_queue *rjq__queue_group_shard(rjq_queue *q, const char *group) {
    layout *l = layout_of(q);
    return l && group ? l->sub[group_shard(l, group)] : q;
}

/* route_job for a job with a group (o->group set): its group's shard. A
 * caller id must route there too (every by-id call on the front goes to
 * its id's shard): else RJQ_EINVAL, nothing sent. An anonymous job gets a
 * made id that routes to the group's shard (shard_ids.c), as route_job
 * gives one to the next shard. (A dedup or debounce without an id goes
 * as it is: the shard's check refuses it, as on a plain queue.) RJQ_OK,
 * RJQ_EINVAL or RJQ_ENOMEM. */
static int route_group_job(rjq_queue *q, layout *l, rjq_job_options *copy,
                           const rjq_job_options **o, char *idbuf, rjq_queue **to) {
    const rjq_job_options *g = *o;
    rjq_client *c = rjq_queue_get_client(q);
    int i = group_shard(l, g->group);
    *to = l->sub[i];
    if (g->id) {
        if (shard_for(l, g->id) == *to) return RJQ_OK;
        rjq__errmsg(c, "enqueue: queue %s is sharded and group %s is on shard %d: a job id of "
                       "the group must route there too (crc16(id) mod %d == %d; or no id)",
                    rjq_queue_get_name(q), g->group, i, l->n, i);
        return RJQ_EINVAL;
    }
    if (g->dedup_ms || g->debounce) return RJQ_OK;
    int at = rjq__shard_id_make(c, l->n, i, idbuf);
    if (at < 0) return at;
    if (at != i) { /* (64 n ids tried in vain: less likely than e^-64) */
        rjq__errmsg(c, "enqueue: no id found for group %s's shard", g->group);
        return RJQ_EINVAL;
    }
    if (g != copy) *copy = *g;
    copy->id = idbuf;
    *o = copy;
    return RJQ_OK;
}

/* The job's id is the one route_job made (idbuf): tell the enqueue it
 * needs no look-up (rjq__enqueue_made_ids; said none again after the call). */
static void made_ids(rjq_client *c, const rjq_job_options *o, const char *idbuf) {
    if (o && o->id == idbuf) rjq__enqueue_made_ids(c, idbuf, 1, 0);
}

/* rjq_enqueue on q held on queue `on` (q itself, or a dependency's queue
 * whose layout is not known yet: then made on q once it is): checked now
 * as it would be, its inputs copied. */
static int hold_enqueue_on(rjq_queue *on, rjq_queue *q, const void *payload, size_t len,
                           const rjq_job_options *opts, rjq_enqueue_cb *cb, void *data) {
    rjq_client *c = rjq_queue_get_client(q);
    rjq_job_options copy;
    const rjq_job_options *o;
    if (rjq__job_options_in(c, opts, &copy, &o) != RJQ_OK) return RJQ_EINVAL;
    rjq_enqueue_item it = RJQ_ENQUEUE_ITEM_INIT;
    it.payload = payload;
    it.len = len;
    it.opts = o;
    rjq_job_options plain; /* (dependencies: checked by deps.c; a job group is
                            * checked when it is sent: enqueue.c's
                            * rjq__enqueue_check_grouped; the rest as any) */
    if (o && (o->after || o->n_after || o->group)) {
        if ((o->after || o->n_after) && rjq__deps_check(c, o) != RJQ_OK) return RJQ_EINVAL;
        plain = *o;
        plain.after = NULL;
        plain.n_after = 0;
        plain.after_policy = 0;
        plain.group = NULL;
        it.opts = &plain;
    }
    char enc[RJQ__OPTS_MAX + 1];
    int rc = rjq__enqueue_check(q, &it, enc);
    if (rc != RJQ_OK) return rc;
    held *h = held_new(H_ENQUEUE, (any_fn *)cb, data);
    if (h == NULL || (h->payload = malloc(len ? len : 1)) == NULL) goto oom;
    if (len) memcpy(h->payload, payload, len);
    h->len = len;
    if (o) {
        h->jo = *o;
        h->has_jo = 1;
        h->jo.headers = NULL; /* (a copy, as the id) */
        h->jo.after = NULL;   /* (a copy too) */
        h->jo.group = NULL;   /* (the same) */
        if (o->id && (h->jo.id = strdup(o->id)) == NULL) goto oom;
        if (o->n_after && (h->jo.after = rjq__deps_dup(o->after, o->n_after)) == NULL) goto oom;
        if (o->group && (h->jo.group = strdup(o->group)) == NULL) goto oom;
        if (o->nheaders && (h->jo.headers = rjq__headers_dup(o->headers, o->nheaders)) == NULL)
            goto oom;
    }
    if (on != q) {
        h->to = q;
        rjq__queue_hold(q);
    }
    return hold(on, h);
oom:
    if (h) held_free(h);
    return RJQ_ENOMEM;
}

/* ---- dependencies on a sharded queue ------------------------------------------ */

/* A handle of queue `name` that learns its layout: one of the client's
 * (a learnt one first), else one opened now (the library's, freed with the
 * client; its layout read once); NULL when out of memory. */
static rjq_queue *dep_front(rjq_client *c, const char *name) {
    rjq_queue *found = NULL;
    for (rjq_queue *x = rjq__queue_first(c); x; x = rjq__queue_next(x)) {
        if (rjq__queue_closed(x) || strcmp(rjq_queue_get_name(x), name) != 0 ||
            rjq__queue_part(x, RJQ__PART_SHARDS) == NULL)
            continue;
        if (!gated(x)) return x;
        if (found == NULL) found = x;
    }
    if (found == NULL && rjq_queue_open(c, name, NULL, &found) != RJQ_OK) found = NULL;
    return found;
}

/* A job's dependencies (o->after) as its enqueue registers them: one on a
 * sharded queue names the shard its id routes to, whose finisher releases
 * it (README "Sharded queues"); the others as they are. RJQ_OK with
 * *routed NULL (none is on a sharded queue) or out[] filled (o->n_after of
 * them, names the shards' handles'); 1 when a dependency's queue does not
 * know its layout yet (the enqueue is held on it: made again once it
 * does); RJQ_ESHARDED for a server-assigned id on a sharded queue (its
 * shard cannot be known), RJQ_ENOMEM, RJQ_ECLOSED. */
static int route_after(rjq_queue *q, const void *payload, size_t len, const rjq_job_options *o,
                       rjq_enqueue_cb *cb, void *data, rjq_dep *out, const rjq_dep **routed) {
    rjq_client *c = rjq_queue_get_client(q);
    *routed = NULL;
    for (size_t i = 0; i < o->n_after; i++) {
        const rjq_dep *d = &o->after[i];
        rjq_queue *f = dep_front(c, d->queue);
        if (f == NULL) return rjq__accepting(c) ? RJQ_ENOMEM : RJQ_ECLOSED;
        if (gated(f)) {
            int rc = hold_enqueue_on(f, q, payload, len, o, cb, data);
            return rc == RJQ_OK ? 1 : rc;
        }
        layout *l = layout_of(f);
        out[i] = *d;
        if (l == NULL) continue;
        if (d->id[strspn(d->id, "0123456789")] == '\0') {
            rjq__errmsg(c, "enqueue: dependency %s:%s (after's entry %zu): queue %s is sharded "
                           "and %s, an all-digits (server-assigned) id, names no shard: name "
                           "its shard's queue, %s~<i>-<k> (rjq shards %s lists them)",
                        d->queue, d->id, i + 1, d->queue, d->id, d->queue, d->queue);
            return RJQ_ESHARDED;
        }
        out[i].queue = rjq_queue_get_name(shard_for(l, d->id));
        *routed = out;
    }
    return RJQ_OK;
}

/* 1 when the caller's options (of its size: an older one may end before
 * the field) give dependencies. */
static int gives_after(const rjq_job_options *o) {
    return o && o->size >= offsetof(rjq_job_options, n_after) + sizeof o->n_after &&
           (o->after || o->n_after);
}

int rjq_enqueue(rjq_queue *q, const void *payload, size_t len, const rjq_job_options *opts,
                rjq_enqueue_cb *cb, void *data) {
    if (gated(q)) return hold_enqueue_on(q, q, payload, len, opts, cb, data);
    layout *l = layout_of(q);
    if (l == NULL && !gives_after(opts)) return rjq__enqueue_one(q, payload, len, opts, cb, data);
    rjq_client *c = rjq_queue_get_client(q);
    rjq_job_options copy;
    const rjq_job_options *o;
    if (rjq__job_options_in(c, opts, &copy, &o) != RJQ_OK) return RJQ_EINVAL;
    rjq_dep out[RJQ_AFTER_MAX];
    if (o && (o->after || o->n_after)) {
        if (rjq__deps_check(c, o) != RJQ_OK) return RJQ_EINVAL;
        const rjq_dep *routed;
        int rc = route_after(q, payload, len, o, cb, data, out, &routed);
        if (rc != RJQ_OK) return rc == 1 ? RJQ_OK : rc;
        if (routed) {
            if (o != &copy) copy = *o;
            copy.after = routed;
            o = &copy;
        }
    }
    if (l == NULL) return rjq__enqueue_one(q, payload, len, o, cb, data);
    char idbuf[RJQ__SHARD_ID_MAX];
    rjq_queue *to;
    int rc = o && o->group ? route_group_job(q, l, &copy, &o, idbuf, &to)
                           : route_job(q, l, &copy, &o, idbuf, &to);
    if (rc != RJQ_OK) return rc;
    rjq__enter(c); /* (a callback may free the client: not before the made id is let go) */
    made_ids(c, o, idbuf);
    rc = rjq__enqueue_one(to, payload, len, o, cb, data);
    rjq__enqueue_made_ids(c, NULL, 0, 0);
    rjq__leave(c);
    return rc;
}

/* A batch split over the shards: one call per shard; the caller's
 * callback once, with every item's result in its order. */
typedef struct split split;
typedef struct split_part {
    split *s;
    size_t n;
    size_t *idx; /* the caller's index of each of this part's items */
} split_part;

struct split {
    rjq_enqueue_cb *cb;
    void *data;
    size_t n;
    int waiting, status;
    rjq_enqueued *out; /* n of them; ids malloc'd */
    split_part part[RJQ_SHARDS_MAX];
};

static void split_free(split *s) {
    for (size_t i = 0; i < s->n; i++) free((char *)s->out[i].id);
    for (int k = 0; k < RJQ_SHARDS_MAX; k++) free(s->part[k].idx);
    free(s->out);
    free(s);
}

static void split_done(rjq_client *c, split *s) {
    if (s->cb) {
        if (s->status == RJQ_OK) s->cb(c, RJQ_OK, s->out, s->n, s->data);
        else s->cb(c, s->status, NULL, 0, s->data);
    }
    split_free(s);
}

static void on_split_part(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n,
                          void *data) {
    split_part *p = data;
    split *s = p->s;
    if (status == RJQ_OK && n != p->n) status = RJQ_EPROTO;
    for (size_t j = 0; status == RJQ_OK && j < n; j++) {
        const rjq_enqueued *e = rjq_enqueued_get(jobs, j);
        rjq_enqueued *o = &s->out[p->idx[j]];
        if ((o->id = strdup(e->id)) == NULL) status = RJQ_ENOMEM;
        o->existed = e->existed;
        o->replaced = e->replaced;
    }
    if (status != RJQ_OK && s->status == RJQ_OK) s->status = status;
    if (--s->waiting == 0) split_done(c, s);
}

/* rjq_enqueue_batch's array: its length, and item 0's size checked (the
 * stride between items, *stride); RJQ_EINVAL (the reason set) otherwise. */
static int batch_stride(rjq_queue *q, const rjq_enqueue_item *items, size_t n, size_t *stride) {
    if (items == NULL || n == 0 || n > RJQ_BATCH_MAX) return RJQ_EINVAL;
    char why[256];
    if (rjq__sized_check(items, sizeof *items, "rjq_enqueue_item", why, sizeof why) < 0) {
        rjq__errmsg(rjq_queue_get_client(q), "%s", why);
        return RJQ_EINVAL;
    }
    *stride = items->size;
    return RJQ_OK;
}

/* Item i of that array, or NULL (the reason set) when its size is not
 * item 0's. */
static const rjq_enqueue_item *batch_item(rjq_client *c, const rjq_enqueue_item *items,
                                          size_t stride, size_t i) {
    const rjq_enqueue_item *it = (const void *)((const char *)items + i * stride);
    char why[256];
    if (it->size != stride ||
        (i > 0 && rjq__sized_check(it, sizeof *it, "rjq_enqueue_item", why, sizeof why) < 0)) {
        rjq__errmsg(c, "rjq_enqueue_item: item %zu is not of item 0's size", i);
        return NULL;
    }
    return it;
}

/* rjq_enqueue_batch held: every item checked now as it would be (on q),
 * and copied. */
static int hold_batch(rjq_queue *q, const rjq_enqueue_item *items, size_t n, rjq_enqueue_cb *cb,
                      void *data) {
    size_t stride;
    if (batch_stride(q, items, n, &stride) != RJQ_OK) return RJQ_EINVAL;
    rjq_client *c = rjq_queue_get_client(q);
    held *h = held_new(H_BATCH, (any_fn *)cb, data);
    if (h == NULL || (h->items = calloc(n, sizeof *h->items)) == NULL ||
        (h->jos = calloc(n, sizeof *h->jos)) == NULL) {
        if (h) held_free(h);
        return RJQ_ENOMEM;
    }
    h->n = n;
    int rc = RJQ_OK, grouped = 0;
    for (size_t i = 0; i < n && rc == RJQ_OK; i++) {
        const rjq_enqueue_item *it = batch_item(c, items, stride, i);
        if (it == NULL) {
            rc = RJQ_EINVAL;
            break;
        }
        rjq_enqueue_item *to = &h->items[i];
        rjq__sized_copy(to, sizeof *to, it);
        const void *p = to->payload;
        to->payload = NULL; /* (copies only from here on: held_free frees them) */
        const rjq_job_options *o;
        rc = rjq__job_options_in(c, to->opts, &h->jos[i], &o) != RJQ_OK ? RJQ_EINVAL : RJQ_OK;
        if (rc == RJQ_OK && o) h->jos[i] = *o;
        const char *uid = rc == RJQ_OK && o ? o->id : NULL;
        const rjq_header *uh = rc == RJQ_OK && o ? o->headers : NULL;
        const char *ug = rc == RJQ_OK && o ? o->group : NULL;
        h->jos[i].id = NULL;
        h->jos[i].headers = NULL;
        h->jos[i].group = NULL;
        if (rc != RJQ_OK) break;
        if ((ug != NULL) != (grouped != 0) && i > 0) {
            rjq__errmsg(c, "enqueue: a batch's jobs all have a group, or none has one");
            rc = RJQ_EINVAL;
            break;
        }
        grouped = ug != NULL;
        rjq_enqueue_item check = *to;
        check.payload = p;
        check.opts = o ? &h->jos[i] : NULL;
        h->jos[i].id = uid;
        h->jos[i].headers = uh;
        h->jos[i].group = ug;
        char enc[RJQ__OPTS_MAX + 1];
        rc = rjq__enqueue_check_grouped(q, &check, enc);
        h->jos[i].id = NULL;
        h->jos[i].headers = NULL;
        h->jos[i].group = NULL;
        if (rc != RJQ_OK) break;
        if (ug && (h->jos[i].group = strdup(ug)) == NULL) {
            rc = RJQ_ENOMEM;
            break;
        }
        if (uh && h->jos[i].nheaders &&
            (h->jos[i].headers = rjq__headers_dup(uh, h->jos[i].nheaders)) == NULL) {
            rc = RJQ_ENOMEM;
            break;
        }
        to->opts = check.opts;
        if ((to->payload = malloc(to->len ? to->len : 1)) == NULL ||
            (uid && (h->jos[i].id = strdup(uid)) == NULL)) {
            rc = RJQ_ENOMEM;
            break;
        }
        if (to->len) memcpy((void *)to->payload, p, to->len);
    }
    if (rc != RJQ_OK) {
        held_free(h);
        return rc;
    }
    return hold(q, h);
}

int rjq_enqueue_batch(rjq_queue *q, const rjq_enqueue_item *items, size_t n, rjq_enqueue_cb *cb,
                      void *data) {
    if (gated(q)) return hold_batch(q, items, n, cb, data);
    layout *l = layout_of(q);
    if (l == NULL) return rjq__enqueue_batch_one(q, items, n, cb, data);
    size_t stride;
    if (batch_stride(q, items, n, &stride) != RJQ_OK) return RJQ_EINVAL;
    rjq_client *c = rjq_queue_get_client(q);
    /* every item as this library reads it, and its shard */
    rjq_enqueue_item *its = malloc(n * (sizeof *its + sizeof(rjq_job_options) + sizeof(int) +
                                        RJQ__SHARD_ID_MAX));
    split *s = calloc(1, sizeof *s);
    if (s) s->out = calloc(n, sizeof *s->out);
    if (its == NULL || s == NULL || s->out == NULL) {
        free(its);
        if (s) free(s->out);
        free(s);
        return RJQ_ENOMEM;
    }
    s->n = n;
    s->cb = cb;
    s->data = data;
    rjq_job_options *jos = (rjq_job_options *)(its + n);
    int *shard = (int *)(jos + n);
    char *idbufs = (char *)(shard + n); /* the ids made for anonymous items */
    int rc = RJQ_OK, grouped = 0;
    for (size_t i = 0; i < n && rc == RJQ_OK; i++) {
        const rjq_enqueue_item *it = batch_item(c, items, stride, i);
        if (it == NULL) {
            rc = RJQ_EINVAL;
            break;
        }
        rjq__sized_copy(&its[i], sizeof its[i], it);
        const rjq_job_options *o;
        if (rjq__job_options_in(c, its[i].opts, &jos[i], &o) != RJQ_OK) {
            rc = RJQ_EINVAL;
            break;
        }
        if (i > 0 && (o && o->group) != grouped) {
            rjq__errmsg(c, "enqueue: a batch's jobs all have a group, or none has one");
            rc = RJQ_EINVAL;
            break;
        }
        grouped = o && o->group;
        rjq_queue *to;
        char *idbuf = idbufs + i * RJQ__SHARD_ID_MAX;
        if ((rc = grouped ? route_group_job(q, l, &jos[i], &o, idbuf, &to)
                          : route_job(q, l, &jos[i], &o, idbuf, &to)) != RJQ_OK)
            break;
        its[i].opts = o;
        /* (the check each part would make, before any part is sent) */
        char enc[RJQ__OPTS_MAX + 1];
        if ((rc = rjq__enqueue_check_grouped(to, &its[i], enc)) != RJQ_OK) break;
        for (shard[i] = 0; l->sub[shard[i]] != to; shard[i]++) {}
        s->part[shard[i]].n++;
    }
    for (int k = 0; k < l->n && rc == RJQ_OK; k++) {
        s->part[k].s = s;
        if (s->part[k].n && (s->part[k].idx = malloc(s->part[k].n * sizeof(size_t))) == NULL)
            rc = RJQ_ENOMEM;
        s->part[k].n = 0;
    }
    for (size_t i = 0; i < n && rc == RJQ_OK; i++) {
        split_part *p = &s->part[shard[i]];
        p->idx[p->n++] = i;
    }
    if (rc != RJQ_OK) {
        free(its);
        split_free(s);
        return rc;
    }
    /* one call per shard, each of its items in the caller's order */
    rjq_enqueue_item *part = malloc(n * sizeof *part);
    if (part == NULL) {
        free(its);
        split_free(s);
        return RJQ_ENOMEM;
    }
    rjq__enter(c); /* a flush inside may run callbacks that free the client */
    s->waiting = 1;
    int sent = 0;
    rjq__enqueue_made_ids(c, idbufs, n, RJQ__SHARD_ID_MAX); /* (its items' made ids) */
    for (int k = 0; k < l->n && rjq__accepting(c); k++) {
        split_part *p = &s->part[k];
        if (p->n == 0) continue;
        for (size_t j = 0; j < p->n; j++) part[j] = its[p->idx[j]];
        s->waiting++;
        if ((rc = rjq__enqueue_batch_one(l->sub[k], part, p->n, on_split_part, p)) != RJQ_OK) {
            s->waiting--;
            if (s->status == RJQ_OK) s->status = rc;
            break;
        }
        sent++;
    }
    rjq__enqueue_made_ids(c, NULL, 0, 0);
    free(part);
    free(its);
    if (sent == 0) { /* nothing sent: the error is returned, cb never called */
        if (rc == RJQ_OK) rc = RJQ_ECLOSED;
        s->cb = NULL;
    } else {
        rc = RJQ_OK;
    }
    if (--s->waiting == 0) split_done(c, s);
    rjq__leave(c);
    return rc;
}

/* ---- workers, awaits, stats ------------------------------------------------------ */

int rjq_worker_start(rjq_queue *q, const rjq_worker_options *opts, rjq_handler_fn *handler,
                     void *data, rjq_worker **out) {
    if (gated(q)) { /* a worker handle now, started once the layout is learnt */
        held *h = held_new(H_WORKER, NULL, NULL);
        if (h == NULL) return RJQ_ENOMEM;
        int rc = rjq__worker_reserve(q, opts, handler, data, &h->wo, &h->w);
        if (rc == RJQ_OK) rc = hold(q, h);
        else held_free(h);
        if (rc == RJQ_OK) *out = h->w;
        return rc;
    }
    layout *l = layout_of(q);
    if (l == NULL) return rjq__worker_start_one(q, opts, handler, data, out);
    int weights[RJQ_SHARDS_MAX];
    for (int i = 0; i < l->n; i++) weights[i] = 1;
    int rc = rjq__worker_start_queues_now(l->sub, (size_t)l->n, RJQ__WORKER_SHARDS, weights, opts,
                                          handler, data, out);
    if (rc == RJQ_OK) resplitter_want(q, l);
    return rc;
}

int rjq_worker_start_queues(rjq_queue *const *queues, size_t n, rjq_worker_order order,
                            const int *weights, const rjq_worker_options *opts,
                            rjq_handler_fn *handler, void *data, rjq_worker **out) {
    int rc = rjq__worker_queues_ok(queues, n, order, weights, handler, out);
    size_t g = 0;
    while (rc == RJQ_OK && g < n && !gated(queues[g])) g++;
    if (rc != RJQ_OK || g == n)
        return rjq__worker_start_queues_now(queues, n, order, weights, opts, handler, data, out);
    /* a worker handle now, started once every queue's layout is learnt */
    held *h = held_new(H_WORKERS, NULL, NULL);
    if (h == NULL) return RJQ_ENOMEM;
    if ((rc = rjq__worker_reserve(queues[g], opts, handler, data, &h->wo, &h->w)) != RJQ_OK) {
        held_free(h);
        return rc;
    }
    h->order = order;
    h->nq = n;
    h->at = g;
    for (size_t i = 0; i < n; i++) {
        h->qs[i] = queues[i];
        h->weights[i] = order == RJQ_WORKER_WEIGHTED ? weights[i] : 1;
        if (i != g) rjq__queue_use(queues[i]); /* (rjq_queue_close refuses while held) */
    }
    if ((rc = hold(queues[g], h)) == RJQ_OK) *out = h->w;
    return rc;
}

int rjq_enqueue_await(rjq_queue *q, const void *payload, size_t len, const rjq_job_options *opts,
                      const rjq_await_options *aw, rjq_await_cb *cb, void *data,
                      rjq_await **out) {
    if (gated(q) && cb != NULL) { /* (with out: a reserved await, returned now) */
        if (await_options_ok(q, aw) != RJQ_OK) return RJQ_EINVAL;
        rjq_await *a = NULL;
        int rc = out ? rjq__await_reserve(q, aw, cb, data, &a) : RJQ_OK;
        if (rc == RJQ_OK) rc = hold_enqueue_on(q, q, payload, len, opts, NULL, NULL);
        if (rc == RJQ_OK) rc = held_as_await(q, H_ENQUEUE_AWAIT, aw, cb, data, a);
        else if (a) rjq__await_unreserve(a, RJQ_OK);
        if (rc == RJQ_OK && out) *out = a;
        return rc;
    }
    layout *l = layout_of(q);
    if (l == NULL) return rjq__enqueue_await_one(q, payload, len, opts, aw, cb, data, out);
    rjq_job_options copy;
    const rjq_job_options *o;
    if (rjq__job_options_in(rjq_queue_get_client(q), opts, &copy, &o) != RJQ_OK) return RJQ_EINVAL;
    char idbuf[RJQ__SHARD_ID_MAX];
    rjq_queue *to;
    int rc = o && o->group ? route_group_job(q, l, &copy, &o, idbuf, &to)
                           : route_job(q, l, &copy, &o, idbuf, &to);
    if (rc != RJQ_OK) return rc;
    rjq_client *c = rjq_queue_get_client(q);
    rjq__enter(c);
    made_ids(c, o, idbuf); /* (an await sent at once copies it: compared by value) */
    rc = rjq__enqueue_await_one(to, payload, len, o, aw, cb, data, out);
    rjq__enqueue_made_ids(c, NULL, 0, 0);
    rjq__leave(c);
    return rc;
}

int rjq_queue_await(rjq_queue *q, const char *id, const rjq_await_options *aw, rjq_await_cb *cb,
                    void *data, rjq_await **out) {
    if (gated(q) && cb != NULL) { /* (with out: a reserved await, returned now) */
        if (await_options_ok(q, aw) != RJQ_OK) return RJQ_EINVAL;
        if (id == NULL || id[0] == '\0' || strlen(id) > RJQ_JOB_ID_MAX) return RJQ_EJOBID;
        rjq_await *a = NULL;
        int rc = out ? rjq__await_reserve(q, aw, cb, data, &a) : RJQ_OK;
        if (rc == RJQ_OK) rc = hold_call(q, H_QUEUE_AWAIT, (any_fn *)cb, data, id);
        if (rc == RJQ_OK) rc = held_as_await(q, H_QUEUE_AWAIT, aw, cb, data, a);
        else if (a) rjq__await_unreserve(a, RJQ_OK);
        if (rc == RJQ_OK && out) *out = a;
        return rc;
    }
    layout *l = layout_of(q);
    if (l == NULL) return rjq__queue_await_one(q, id, aw, cb, data, out);
    if (id == NULL || id[0] == '\0') return RJQ_EJOBID;
    if (id[strspn(id, "0123456789")] == '\0') {
        rjq__errmsg(rjq_queue_get_client(q),
                    "queue %s is sharded: a server-assigned id names a job of one shard (await it "
                    "on its shard: rjq_queue_get_shard)",
                    rjq_queue_get_name(q));
        return RJQ_ESHARDED;
    }
    return rjq__queue_await_one(shard_for(l, id), id, aw, cb, data, out);
}

typedef struct summing {
    rjq_stats_cb *cb;
    void *data;
    int waiting, status, got;
    rjq_stats sum;
    int has_whole;    /* the whole-queue limits stored (rjq_queue_set_limits): */
    rjq_limits whole; /* shown instead of the shares' sum, which a re-split moves */
} summing;

static void sum_done(rjq_client *c, summing *s) {
    if (s->status == RJQ_OK && s->has_whole) {
        s->sum.limit_concurrency = s->whole.concurrency;
        s->sum.limit_rate = s->whole.rate;
        if (s->whole.rate) s->sum.limit_rate_window_ms = s->whole.rate_window_ms;
    }
    if (s->status == RJQ_OK) s->cb(c, RJQ_OK, &s->sum, s->data);
    else s->cb(c, s->status, NULL, s->data);
    free(s);
}

static void on_shard_stats(rjq_client *c, int status, const rjq_stats *st, void *data) {
    summing *s = data;
    if (status != RJQ_OK && s->status == RJQ_OK) s->status = status;
    if (status == RJQ_OK) {
        rjq_stats *t = &s->sum;
        long long *to[] = {&t->enqueued, &t->completed, &t->failed,     &t->retried,
                           &t->dead,     &t->reclaimed, &t->replayed,   &t->ready,
                           &t->delayed,  &t->active,    &t->dead_depth, &t->cancelled,
                           &t->cancelled_depth, &t->waiting};
        const long long from[] = {st->enqueued, st->completed, st->failed,     st->retried,
                                  st->dead,     st->reclaimed, st->replayed,   st->ready,
                                  st->delayed,  st->active,    st->dead_depth, st->cancelled,
                                  st->cancelled_depth, st->waiting};
        for (size_t i = 0; i < sizeof to / sizeof to[0]; i++) *to[i] += from[i];
        t->paused |= st->paused;
        t->exists |= st->exists;
        /* limits: split over the shards (rjq_queue_set_limits), so summed;
         * the window is shard 0's (the stored whole figures replace them:
         * on_whole_read) */
        t->limit_concurrency += st->limit_concurrency;
        t->limit_rate += st->limit_rate;
        if (s->got++ == 0) t->limit_rate_window_ms = st->limit_rate_window_ms;
        /* dedup: an id is on one shard; the earliest release of any */
        t->dedup_reserved += st->dedup_reserved;
        if (st->dedup_next_release_ms > 0 &&
            (t->dedup_next_release_ms == 0 || st->dedup_next_release_ms < t->dedup_next_release_ms))
            t->dedup_next_release_ms = st->dedup_next_release_ms;
    }
    if (--s->waiting == 0) sum_done(c, s);
}

/* The stored whole-queue limits (nil: none stored, the shares' sum). */
static void on_whole_read(rjq_client *c, int status, redisReply *r, void *priv) {
    summing *s = priv;
    if (status == RJQ_OK && r->type == REDIS_REPLY_STRING) {
        status = rjq__shard_limits_parse(r->str, r->len, &s->whole, NULL);
        s->has_whole = status == RJQ_OK;
        if (status != RJQ_OK) rjq__errmsg(c, "a sharded queue's stored limits are not readable");
    } else if (status == RJQ_OK && r->type != REDIS_REPLY_NIL) {
        status = RJQ_EPROTO;
    }
    if (status != RJQ_OK && s->status == RJQ_OK) s->status = status;
    if (--s->waiting == 0) sum_done(c, s);
}

int rjq_queue_get_stats(rjq_queue *q, rjq_stats_cb *cb, void *data) {
    if (gated(q)) return hold_call(q, H_STATS, (any_fn *)cb, data, NULL);
    layout *l = layout_of(q);
    if (l == NULL) return rjq__queue_stats_one(q, cb, data);
    if (cb == NULL) return RJQ_EINVAL;
    rjq_client *c = rjq_queue_get_client(q);
    summing *s = calloc(1, sizeof *s);
    if (s == NULL) return RJQ_ENOMEM;
    s->cb = cb;
    s->data = data;
    int rc = RJQ_OK, sent = 0;
    rjq__enter(c);
    s->waiting = 1;
    for (int k = 0; k < l->n && rjq__accepting(c); k++) {
        s->waiting++;
        if ((rc = rjq__queue_stats_one(l->sub[k], on_shard_stats, s)) != RJQ_OK) {
            s->waiting--;
            s->status = rc;
            break;
        }
        sent++;
    }
    if (sent == 0) {
        free(s);
        rjq__leave(c);
        return rc != RJQ_OK ? rc : RJQ_ECLOSED;
    }
    const char *argv[] = {"GET", rjq__queue_key(q, RJQ__K_SHARDLIMITS, NULL)};
    if (rc == RJQ_OK && rjq__accepting(c)) {
        s->waiting++;
        if ((rc = rjq__command_in(c, rjq__queue_slot(q), 0, on_whole_read, s, 2, argv, NULL)) !=
            RJQ_OK) {
            s->waiting--;
            s->status = rc;
        }
    }
    if (--s->waiting == 0) sum_done(c, s);
    rjq__leave(c);
    return RJQ_OK;
}

/* ---- calls by id: the id's shard ------------------------------------------------ */

/* The shard of job id on a sharded queue, as rjq_enqueue picks it; a
 * server-assigned (all digits) id repeats across shards, so its shard
 * cannot be known: RJQ_ESHARDED. */
static int shard_of_id(rjq_queue *q, layout *l, const char *id, rjq_queue **to) {
    *to = NULL; /* (none on an error: set on every path, for the compiler) */
    if (id[strspn(id, "0123456789")] == '\0') {
        rjq__errmsg(rjq_queue_get_client(q),
                    "queue %s is sharded: a server-assigned (all-digits) id names a job of one "
                    "shard, not which (use the call on its shard: rjq_queue_get_shard; the "
                    "shards' queues, %s~<i>-<k>, are listed by rjq shards %s)",
                    rjq_queue_get_name(q), rjq_queue_get_name(q), rjq_queue_get_name(q));
        return RJQ_ESHARDED;
    }
    *to = shard_for(l, id);
    return RJQ_OK;
}

/* The queue for a call by id on q (not gated): q itself when it is not
 * sharded, else the id's shard; an absent or empty id goes to any shard
 * (for the plain call's own answer to it). */
static int route_id(rjq_queue *q, const char *id, rjq_queue **to) {
    layout *l = layout_of(q);
    *to = l ? l->sub[0] : q;
    return l && id && id[0] ? shard_of_id(q, l, id, to) : RJQ_OK;
}

int rjq_queue_cancel(rjq_queue *q, const char *id, rjq_cancel_cb *cb, void *data) {
    if (gated(q)) return hold_call(q, H_CANCEL, (any_fn *)cb, data, id);
    rjq_queue *to;
    int rc = route_id(q, id, &to);
    return rc != RJQ_OK ? rc : rjq__queue_cancel_one(to, id, cb, data);
}

int rjq_queue_get_job(rjq_queue *q, const char *id, rjq_job_info_cb *cb, void *data) {
    if (gated(q)) return hold_call(q, H_GET_JOB, (any_fn *)cb, data, id);
    rjq_queue *to;
    int rc = route_id(q, id, &to);
    return rc != RJQ_OK ? rc : rjq__queue_job_one(to, id, cb, data);
}

int rjq_queue_delete(rjq_queue *q, const char *id, rjq_count_cb *cb, void *data) {
    if (gated(q)) return hold_call(q, H_DELETE, (any_fn *)cb, data, id);
    rjq_queue *to;
    int rc = route_id(q, id, &to);
    return rc != RJQ_OK ? rc : rjq__queue_delete_one(to, id, cb, data);
}

int rjq_queue_promote(rjq_queue *q, const char *id, rjq_count_cb *cb, void *data) {
    if (gated(q)) return hold_call(q, H_PROMOTE, (any_fn *)cb, data, id);
    rjq_queue *to;
    int rc = route_id(q, id, &to);
    return rc != RJQ_OK ? rc : rjq__queue_promote_one(to, id, cb, data);
}

/* The dependency reads by id (deps_read.c): the id's shard, as the job's
 * other reads (its list of dependencies and its dependents are kept with
 * it, on its shard). */
int rjq_queue_get_dependencies(rjq_queue *q, const char *id, rjq_dependencies_cb *cb,
                               void *data) {
    if (q == NULL || cb == NULL) return RJQ_EINVAL;
    if (!rjq__valid_job_ref(id)) return RJQ_EJOBID;
    if (gated(q)) return hold_call(q, H_GET_DEPS, (any_fn *)cb, data, id);
    rjq_queue *to;
    int rc = route_id(q, id, &to); /* (id checked: never empty) */
    return rc != RJQ_OK ? rc : rjq__queue_dependencies_one(to, id, cb, data);
}

int rjq_queue_get_dependents(rjq_queue *q, const char *id, rjq_dependents_cb *cb, void *data) {
    if (q == NULL || cb == NULL) return RJQ_EINVAL;
    if (!rjq__valid_job_ref(id)) return RJQ_EJOBID;
    if (gated(q)) return hold_call(q, H_GET_DEPENDENTS, (any_fn *)cb, data, id);
    rjq_queue *to;
    int rc = route_id(q, id, &to); /* (id checked: never empty) */
    return rc != RJQ_OK ? rc : rjq__queue_dependents_one(to, id, cb, data);
}

int rjq_queue_get_job_deps(rjq_queue *q, const char *id, rjq_job_deps_cb *cb, void *data) {
    if (q == NULL || cb == NULL) return RJQ_EINVAL;
    if (!rjq__valid_job_ref(id)) return RJQ_EJOBID;
    if (gated(q)) return hold_call(q, H_GET_JOB_DEPS, (any_fn *)cb, data, id);
    rjq_queue *to;
    int rc = route_id(q, id, &to); /* (id checked: never empty) */
    return rc != RJQ_OK ? rc : rjq__queue_job_deps_one(to, id, cb, data);
}

/* ---- whole-queue calls: every shard, one callback -------------------------------- */

typedef struct fan {
    rjq_count_cb *cb;
    void *data;
    int waiting, status;
    int any;     /* cb gets 1 when any shard's n was not 0 (pause, resume) */
    long long n; /* else the sum */
} fan;

static void fan_done(rjq_client *c, fan *f) {
    long long n = f->any ? f->n > 0 : f->n;
    if (f->cb) f->cb(c, f->status, f->status == RJQ_OK ? n : 0, f->data);
    free(f);
}

static void on_fan_part(rjq_client *c, int status, long long n, void *data) {
    fan *f = data;
    if (status != RJQ_OK && f->status == RJQ_OK) f->status = status; /* the first error */
    if (status == RJQ_OK) f->n += n;
    if (--f->waiting == 0) fan_done(c, f);
}

/* Send the call to every shard of l; cb once, when each has answered. A
 * call that cannot be sent ends the sending: nothing sent, its error is
 * returned (cb never called); else cb gets it. */
static int fan_out(rjq_queue *q, layout *l, rjq__fan_send_fn *send, const void *arg, int any,
                   rjq_count_cb *cb, void *data) {
    rjq_client *c = rjq_queue_get_client(q);
    fan *f = calloc(1, sizeof *f);
    if (f == NULL) return RJQ_ENOMEM;
    f->cb = cb;
    f->data = data;
    f->any = any;
    int rc = RJQ_OK, sent = 0;
    rjq__enter(c);
    f->waiting = 1;
    for (int k = 0; k < l->n && rjq__accepting(c) && rc == RJQ_OK; k++) {
        f->waiting++;
        if ((rc = send(l->sub[k], arg, on_fan_part, f)) != RJQ_OK) {
            f->waiting--;
            f->status = rc;
            break;
        }
        sent++;
    }
    if (sent == 0) {
        free(f);
        rjq__leave(c);
        return rc != RJQ_OK ? rc : RJQ_ECLOSED;
    }
    if (--f->waiting == 0) fan_done(c, f);
    rjq__leave(c);
    return RJQ_OK;
}

int rjq__queue_fan_out(rjq_queue *q, rjq__fan_send_fn *send, const void *arg, rjq_count_cb *cb,
                       void *data) {
    layout *l = layout_of(q);
    if (l == NULL) return send(q, arg, cb, data);
    return fan_out(q, l, send, arg, 0, cb, data);
}

static int send_pause(rjq_queue *sub, const void *arg, rjq_count_cb *cb, void *data) {
    (void)arg;
    return rjq__queue_pause_one(sub, cb, data);
}

static int send_resume(rjq_queue *sub, const void *arg, rjq_count_cb *cb, void *data) {
    (void)arg;
    return rjq__queue_resume_one(sub, cb, data);
}

static int send_reclaim(rjq_queue *sub, const void *arg, rjq_count_cb *cb, void *data) {
    (void)arg;
    return rjq__queue_reclaim_one(sub, cb, data);
}

typedef struct page_arg {
    rjq_job_state state;
    long limit;
} page_arg;

static int send_replay(rjq_queue *sub, const void *arg, rjq_count_cb *cb, void *data) {
    return rjq__queue_replay_one(sub, NULL, ((const page_arg *)arg)->limit, cb, data);
}

static int send_purge(rjq_queue *sub, const void *arg, rjq_count_cb *cb, void *data) {
    const page_arg *p = arg;
    return rjq__queue_purge_one(sub, p->state, p->limit, cb, data);
}

int rjq_queue_pause(rjq_queue *q, rjq_count_cb *cb, void *data) {
    if (gated(q)) return hold_call(q, H_PAUSE, (any_fn *)cb, data, NULL);
    layout *l = layout_of(q);
    if (l == NULL) return rjq__queue_pause_one(q, cb, data);
    return fan_out(q, l, send_pause, NULL, 1, cb, data);
}

int rjq_queue_resume(rjq_queue *q, rjq_count_cb *cb, void *data) {
    if (gated(q)) return hold_call(q, H_RESUME, (any_fn *)cb, data, NULL);
    layout *l = layout_of(q);
    if (l == NULL) return rjq__queue_resume_one(q, cb, data);
    return fan_out(q, l, send_resume, NULL, 1, cb, data);
}

static int send_format(rjq_queue *sub, const void *arg, rjq_count_cb *cb, void *data) {
    return rjq__queue_format_one(sub, *(const int *)arg, cb, data);
}

int rjq_queue_set_format(rjq_queue *q, int format, rjq_count_cb *cb, void *data) {
    if (format != 1 && format != 2) return RJQ_EINVAL;
    if (gated(q)) {
        held *h = held_new_id(H_FORMAT, (any_fn *)cb, data, NULL);
        if (h == NULL) return RJQ_ENOMEM;
        h->limit = format;
        return hold(q, h);
    }
    layout *l = layout_of(q);
    if (l == NULL) return rjq__queue_format_one(q, format, cb, data);
    return fan_out(q, l, send_format, &format, 1, cb, data);
}

int rjq_queue_reclaim(rjq_queue *q, rjq_count_cb *cb, void *data) {
    if (gated(q)) return hold_call(q, H_RECLAIM, (any_fn *)cb, data, NULL);
    layout *l = layout_of(q);
    if (l == NULL) return rjq__queue_reclaim_one(q, cb, data);
    if (cb == NULL) return RJQ_EINVAL;
    return fan_out(q, l, send_reclaim, NULL, 0, cb, data);
}

int rjq_queue_replay(rjq_queue *q, const char *id, long limit, rjq_count_cb *cb, void *data) {
    if (gated(q)) return hold_paged(q, H_REPLAY, (any_fn *)cb, data, id, 0, 0, limit);
    layout *l = layout_of(q);
    if (l == NULL) return rjq__queue_replay_one(q, id, limit, cb, data);
    if (cb == NULL) return RJQ_EINVAL;
    if (id && id[0]) { /* (an empty id is none, as for a plain queue: all) */
        rjq_queue *to;
        int rc = shard_of_id(q, l, id, &to);
        return rc != RJQ_OK ? rc : rjq__queue_replay_one(to, id, limit, cb, data);
    }
    page_arg p = {.limit = limit};
    return fan_out(q, l, send_replay, &p, 0, cb, data);
}

int rjq_queue_purge(rjq_queue *q, rjq_job_state state, long limit, rjq_count_cb *cb,
                    void *data) {
    if (gated(q)) return hold_paged(q, H_PURGE, (any_fn *)cb, data, NULL, state, 0, limit);
    layout *l = layout_of(q);
    if (l == NULL) return rjq__queue_purge_one(q, state, limit, cb, data);
    if (cb == NULL) return RJQ_EINVAL;
    page_arg p = {.state = state, .limit = limit};
    return fan_out(q, l, send_purge, &p, 0, cb, data);
}

/* ---- limits: the whole queue's, split over the shards ---------------------------- */

typedef struct limits_arg {
    const layout *l;
    rjq_limits lim;   /* the whole queue's */
    long long epoch;  /* the change's (wholelimits.lua) */
} limits_arg;

static int send_limits(rjq_queue *sub, const void *arg, rjq_count_cb *cb, void *data) {
    const limits_arg *a = arg;
    int i = 0;
    while (i < a->l->n - 1 && a->l->sub[i] != sub) i++;
    rjq_limits part = a->lim;
    part.concurrency = share_of(a->lim.concurrency, a->l->n, i);
    part.rate = share_of(a->lim.rate, a->l->n, i);
    return rjq__queue_limits_fenced(sub, &part, a->epoch, cb, data);
}

/* A change of the whole-queue figures (src/keys.def SHARDLIMITS, Q's own
 * slot, read by every client's re-splitter: shard_resplitter.c), fenced
 * against a re-split step in flight (docs/sharding.md 6b): wholelimits.lua
 * 'begin' gives the change its epoch; every shard's static share is
 * written with it (a shard holding a newer epoch refuses: a newer change
 * won there); then 'set' stores "1 <concurrency> <rate> <window ms>
 * <epoch>". A step writes with the epoch of the figures it read, so once
 * the change reached a shard a step that read older figures writes
 * nothing there, and a step that reads these figures finds every shard
 * already split for them. q held throughout. */
typedef struct limits_change {
    rjq_queue *q;
    rjq_limits lim;
    long long epoch;
    rjq_count_cb *cb;
    void *data;
} limits_change;

static void change_end(rjq_client *c, limits_change *ch, int status) {
    if (ch->cb) ch->cb(c, status, status == RJQ_OK, ch->data);
    if (!rjq__closing(c)) rjq__queue_release(ch->q);
    free(ch);
}

/* wholelimits.lua: 'begin' (set 0) or 'set' (1) the change's figures. */
static int send_whole(limits_change *ch, int set, rjq__reply_fn *fn) {
    rjq_client *c = rjq_queue_get_client(ch->q);
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, ch->q, RJQ__S_WHOLELIMITS);
    rjq__argv_str(&a, set ? "set" : "begin");
    if (set) {
        rjq__argv_ll(&a, ch->lim.concurrency);
        rjq__argv_ll(&a, ch->lim.rate);
        rjq__argv_ll(&a, ch->lim.rate_window_ms ? ch->lim.rate_window_ms : 1000);
        rjq__argv_ll(&a, ch->epoch);
    }
    int rc = a.oom ? RJQ_ENOMEM : rjq__script(c, RJQ__S_WHOLELIMITS, 0, fn, ch, a.n, a.v, a.len);
    rjq__argv_free(&a);
    return rc;
}

static void on_whole_stored(rjq_client *c, int status, redisReply *r, void *priv) {
    /* (0: a newer change stored its figures first: its shares won too) */
    if (status == RJQ_OK &&
        (r == NULL || r->type != REDIS_REPLY_INTEGER || r->integer < 0 || r->integer > 1))
        status = RJQ_EPROTO;
    change_end(c, priv, status);
}

static void on_shares_set(rjq_client *c, int status, long long n, void *data) {
    limits_change *ch = data;
    (void)n; /* (a shard that refused: a newer change wrote it; its figures follow) */
    if (status == RJQ_OK && !rjq__accepting(c)) status = RJQ_ECLOSED;
    if (status == RJQ_OK) status = send_whole(ch, 1, on_whole_stored);
    if (status != RJQ_OK) change_end(c, ch, status);
}

static void on_epoch(rjq_client *c, int status, redisReply *r, void *priv) {
    limits_change *ch = priv;
    if (status == RJQ_OK && (r == NULL || r->type != REDIS_REPLY_INTEGER || r->integer < 1 ||
                             r->integer > RJQ__TIME_MAX))
        status = RJQ_EPROTO;
    layout *l = status == RJQ_OK && !rjq__closing(c) ? layout_of(ch->q) : NULL;
    if (status == RJQ_OK && l == NULL) status = RJQ_ECLOSED; /* (its handle closed meanwhile) */
    if (status == RJQ_OK) {
        ch->epoch = r->integer;
        limits_arg a = {.l = l, .lim = ch->lim, .epoch = ch->epoch};
        status = fan_out(ch->q, l, send_limits, &a, 1, on_shares_set, ch);
    }
    if (status != RJQ_OK) change_end(c, ch, status);
}

/* A sharded queue's limits are stored whole with its declaration (read
 * by the re-splitter of whichever client holds the re-split lease) and
 * split statically over its shards (docs/sharding.md section 4), which
 * that re-splitter then moves by demand: each claim script still reads
 * its own shard's share, so nothing is added per job, and the shares add
 * up to the whole queue's figure. A figure below the shard count cannot
 * be split (a share of 0 is no limit): RJQ_EINVAL. */
int rjq_queue_set_limits(rjq_queue *q, const rjq_limits *lim, rjq_count_cb *cb, void *data) {
    if (gated(q)) { /* held, then split (or not) as on a handle that knows its layout */
        held *h = held_new(H_LIMITS, (any_fn *)cb, data);
        rjq_limits none = RJQ_LIMITS_INIT;
        if (h == NULL) return RJQ_ENOMEM;
        h->lim = none;
        if ((lim && rjq__sized_in(rjq_queue_get_client(q), &h->lim, sizeof h->lim, lim,
                                  "rjq_limits") != RJQ_OK) ||
            h->lim.concurrency < 0 || h->lim.rate < 0 || h->lim.rate_window_ms < 0 ||
            h->lim.rate_window_ms > RJQ_DELAY_MAX) {
            held_free(h);
            return RJQ_EINVAL;
        }
        return hold(q, h);
    }
    layout *l = layout_of(q);
    if (l == NULL) return rjq__queue_limits_one(q, lim, cb, data);
    rjq_client *c = rjq_queue_get_client(q);
    limits_arg a = {.l = l, .lim = RJQ_LIMITS_INIT};
    if (lim && rjq__sized_in(c, &a.lim, sizeof a.lim, lim, "rjq_limits") != RJQ_OK)
        return RJQ_EINVAL;
    if ((a.lim.concurrency > 0 && a.lim.concurrency < l->n) ||
        (a.lim.rate > 0 && a.lim.rate < l->n)) {
        rjq__errmsg(c, "queue %s has %d shards: a concurrency or rate limit below that cannot be "
                       "split among them", rjq_queue_get_name(q), l->n);
        return RJQ_EINVAL;
    }
    if (a.lim.concurrency < 0 || a.lim.rate < 0 || a.lim.rate_window_ms < 0 ||
        a.lim.rate_window_ms > RJQ_DELAY_MAX)
        return RJQ_EINVAL;
    /* the change's epoch, the static split with it (the shares a
     * re-splitter moves from), then the whole figures (what every
     * re-splitter reads): limits_change */
    limits_change *ch = calloc(1, sizeof *ch);
    if (ch == NULL) return RJQ_ENOMEM;
    *ch = (limits_change){.q = q, .lim = a.lim, .cb = cb, .data = data};
    rjq__queue_hold(q);
    int rc = send_whole(ch, 0, on_epoch);
    if (rc != RJQ_OK) {
        rjq__queue_release(q);
        free(ch);
    }
    return rc;
}

/* ---- listings: every shard's page, merged by enqueue time ------------------------ */

/* rjq_queue_list_jobs and rjq_queue_list_dead on a sharded queue: the first
 * offset + limit ids of each shard (in the shard's own order), each
 * job's enqueue time read (rjq_queue_get_job), then merged: the next id is
 * the head, among the shards' remaining ids, enqueued first (ties: the
 * lower shard), so each shard's order is kept and a page depends only on
 * the shards' first offset + limit ids; ids skip offset, limit of them. */
typedef struct listing listing;

typedef struct list_item {
    listing *g;
    char *id;
    long long enqueued_ms;
    int gone; /* no longer there when read: left out */
} list_item;

typedef struct list_part {
    listing *g;
    size_t n;
    list_item *items;
} list_part;

struct listing {
    rjq_ids_cb *cb;
    void *data;
    int n;
    rjq_queue *sub[RJQ_SHARDS_MAX];
    long offset, limit;
    int waiting, status;
    list_part part[RJQ_SHARDS_MAX];
};

static void listing_free(listing *g) {
    for (int k = 0; k < g->n; k++) {
        for (size_t i = 0; i < g->part[k].n; i++) free(g->part[k].items[i].id);
        free(g->part[k].items);
    }
    free(g);
}

static void listing_end(rjq_client *c, listing *g) {
    const char **out = NULL;
    size_t n = 0;
    if (g->status == RJQ_OK && (out = malloc((size_t)g->limit * sizeof *out)) == NULL)
        g->status = RJQ_ENOMEM;
    size_t at[RJQ_SHARDS_MAX] = {0};
    for (long rank = 0; g->status == RJQ_OK && rank < g->offset + g->limit; rank++) {
        int best = -1;
        for (int k = 0; k < g->n; k++) {
            list_part *p = &g->part[k];
            while (at[k] < p->n && p->items[at[k]].gone) at[k]++;
            if (at[k] < p->n && (best < 0 || p->items[at[k]].enqueued_ms <
                                                 g->part[best].items[at[best]].enqueued_ms))
                best = k;
        }
        if (best < 0) break;
        const char *id = g->part[best].items[at[best]++].id;
        if (rank >= g->offset) out[n++] = id;
    }
    if (g->status == RJQ_OK) g->cb(c, RJQ_OK, out, n, g->data);
    else g->cb(c, g->status, NULL, 0, g->data);
    free(out);
    listing_free(g);
}

static void on_item_read(rjq_client *c, int status, const rjq_job_info *info, void *data) {
    list_item *it = data;
    listing *g = it->g;
    if (status == RJQ_ENOTFOUND) it->gone = 1; /* (deleted or expired since listed) */
    else if (status != RJQ_OK && g->status == RJQ_OK) g->status = status;
    else if (status == RJQ_OK) it->enqueued_ms = info->enqueued_ms;
    if (--g->waiting == 0) listing_end(c, g);
}

/* Every shard's ids came: read each one's enqueue time. */
static void listing_read(rjq_client *c, listing *g) {
    rjq__enter(c); /* a flush inside may run callbacks that free the client */
    g->waiting = 1;
    for (int k = 0; k < g->n && g->status == RJQ_OK; k++) {
        list_part *p = &g->part[k];
        for (size_t i = 0; i < p->n && g->status == RJQ_OK; i++) {
            if (!rjq__accepting(c)) {
                g->status = RJQ_ECANCELED;
                break;
            }
            g->waiting++;
            int rc = rjq__queue_job_one(g->sub[k], p->items[i].id, on_item_read, &p->items[i]);
            if (rc != RJQ_OK) {
                g->waiting--;
                g->status = rc;
            }
        }
    }
    if (--g->waiting == 0) listing_end(c, g);
    rjq__leave(c);
}

static void on_list_part(rjq_client *c, int status, const char *const *ids, size_t n,
                         void *data) {
    list_part *p = data;
    listing *g = p->g;
    if (status == RJQ_OK && n > 0 && (p->items = calloc(n, sizeof *p->items)) == NULL)
        status = RJQ_ENOMEM;
    for (size_t i = 0; status == RJQ_OK && i < n; i++) {
        p->items[i].g = g;
        if ((p->items[i].id = strdup(ids[i])) == NULL) status = RJQ_ENOMEM;
        p->n = i + 1;
    }
    if (status != RJQ_OK && g->status == RJQ_OK) g->status = status;
    if (--g->waiting == 0) {
        if (g->status == RJQ_OK) listing_read(c, g);
        else listing_end(c, g);
    }
}

static int list_merged(rjq_queue *q, layout *l, rjq_job_state state, long offset, long limit,
                       rjq_ids_cb *cb, void *data) {
    if (cb == NULL || offset < 0 || limit <= 0 || limit > RJQ_JOBS_PAGE_MAX ||
        offset > RJQ_JOBS_PAGE_MAX - limit)
        return RJQ_EINVAL;
    rjq_client *c = rjq_queue_get_client(q);
    listing *g = calloc(1, sizeof *g);
    if (g == NULL) return RJQ_ENOMEM;
    g->cb = cb;
    g->data = data;
    g->offset = offset;
    g->limit = limit;
    int rc = RJQ_OK, sent = 0;
    rjq__enter(c);
    g->waiting = 1;
    for (int k = 0; k < l->n && rjq__accepting(c); k++) {
        g->sub[k] = l->sub[k];
        g->part[k].g = g;
        g->n = k + 1;
        g->waiting++;
        if ((rc = rjq__queue_jobs_one(l->sub[k], state, 0, offset + limit, on_list_part,
                                      &g->part[k])) != RJQ_OK) {
            g->waiting--;
            g->status = rc;
            break;
        }
        sent++;
    }
    if (sent == 0) {
        listing_free(g);
        rjq__leave(c);
        return rc != RJQ_OK ? rc : RJQ_ECLOSED;
    }
    if (--g->waiting == 0) {
        if (g->status == RJQ_OK) listing_read(c, g);
        else listing_end(c, g);
    }
    rjq__leave(c);
    return RJQ_OK;
}

int rjq_queue_list_jobs(rjq_queue *q, rjq_job_state state, long offset, long limit, rjq_ids_cb *cb,
                   void *data) {
    if (gated(q)) return hold_paged(q, H_LIST_JOBS, (any_fn *)cb, data, NULL, state, offset, limit);
    layout *l = layout_of(q);
    if (l == NULL) return rjq__queue_jobs_one(q, state, offset, limit, cb, data);
    return list_merged(q, l, state, offset, limit, cb, data);
}

int rjq_queue_list_dead(rjq_queue *q, long offset, long limit, rjq_ids_cb *cb, void *data) {
    if (gated(q)) return hold_paged(q, H_LIST_DEAD, (any_fn *)cb, data, NULL, 0, offset, limit);
    layout *l = layout_of(q);
    if (l == NULL) return rjq__queue_dead_one(q, offset, limit, cb, data);
    return list_merged(q, l, RJQ_STATE_DEAD, offset, limit, cb, data);
}
