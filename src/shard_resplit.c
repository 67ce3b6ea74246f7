/*
 * One re-split of a sharded queue's whole-queue concurrency by demand
 * (shard_resplit.h): stats of every shard, the lowerings, stats again,
 * the raises; the plan is shard_split.c's.
 */
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "shard_resplit.h"
#include "shard_split.h"

/* Phases, in order; a phase's calls all answered leads to the next. */
enum { RS_READ, RS_LOWER, RS_REREAD, RS_RAISE, RS_DONE };

typedef struct resplit resplit;
typedef struct rs_part {
    resplit *r;
    int i;
} rs_part;

struct resplit {
    rjq_queue *q;
    int n, phase, waiting, status, changed;
    long whole;
    rjq_count_cb *cb;
    void *data;
    rs_part part[RJQ_SHARDS_MAX];
    long share[RJQ_SHARDS_MAX], demand[RJQ_SHARDS_MAX], used[RJQ_SHARDS_MAX],
        target[RJQ_SHARDS_MAX], next[RJQ_SHARDS_MAX], rate[RJQ_SHARDS_MAX],
        window[RJQ_SHARDS_MAX];
};

static void run_phase(rjq_client *c, resplit *r);

static void part_done(rjq_client *c, resplit *r, int status) {
    if (status != RJQ_OK && r->status == RJQ_OK) r->status = status; /* the first error */
    if (--r->waiting == 0) {
        r->phase++;
        run_phase(c, r);
    }
}

static void on_stats(rjq_client *c, int status, const rjq_stats *st, void *data) {
    rs_part *p = data;
    resplit *r = p->r;
    if (status == RJQ_OK) {
        /* (a share of 0 is no limit: not a split this can change) */
        if (st->limit_concurrency < 1 || st->limit_concurrency > r->whole) status = RJQ_EINVAL;
        if (r->phase == RS_READ) {
            r->share[p->i] = st->limit_concurrency;
            r->demand[p->i] = st->ready + st->delayed;
            r->rate[p->i] = st->limit_rate;
            r->window[p->i] = st->limit_rate_window_ms;
        } else {
            r->used[p->i] = st->active;
        }
    }
    part_done(c, r, status);
}

static void on_set(rjq_client *c, int status, long long n, void *data) {
    (void)n;
    part_done(c, ((rs_part *)data)->r, status);
}

/* Set shard i's concurrency share to next[i] (its rate as read). */
static int send_share(resplit *r, int i) {
    rjq_limits lim = RJQ_LIMITS_INIT;
    lim.concurrency = r->next[i];
    lim.rate = r->rate[i];
    lim.rate_window_ms = r->rate[i] ? r->window[i] : 0;
    return rjq__queue_limits_one(rjq_queue_get_shard(r->q, i), &lim, on_set, &r->part[i]);
}

/* Send the phase's calls (each shard's stats, or the changed shares);
 * none to send: on to the next phase. Once done, or a call failed, the
 * caller's callback and the end. */
static void run_phase(rjq_client *c, resplit *r) {
    for (;;) {
        if (r->status != RJQ_OK || r->phase == RS_DONE) {
            if (r->cb) r->cb(c, r->status, r->status == RJQ_OK ? r->changed : 0, r->data);
            free(r);
            return;
        }
        r->waiting = 1; /* (held while sending: a reply in the same turn ends nothing) */
        if (r->phase == RS_LOWER) {
            rjq__split_targets(r->whole, r->n, r->demand, r->target);
            rjq__split_lower(r->n, r->share, r->target, r->next);
        } else if (r->phase == RS_RAISE) {
            memcpy(r->share, r->next, sizeof r->share);
            if (rjq__split_raise(r->whole, r->n, r->share, r->used, r->target, r->next) < 0)
                memcpy(r->next, r->share, sizeof r->next); /* (over already: none) */
        }
        for (int i = 0; i < r->n && r->status == RJQ_OK; i++) {
            int rc = RJQ_OK;
            if (r->phase == RS_READ || r->phase == RS_REREAD) {
                rc = rjq__queue_stats_one(rjq_queue_get_shard(r->q, i), on_stats, &r->part[i]);
            } else if (r->next[i] != r->share[i]) {
                rc = send_share(r, i);
                if (rc == RJQ_OK) r->changed++;
            } else {
                continue;
            }
            if (rc != RJQ_OK) r->status = rc; /* (those sent still answer) */
            else r->waiting++;
        }
        if (--r->waiting > 0) return; /* their replies go on */
        r->phase++;
    }
}

int rjq__shard_resplit(rjq_queue *q, long whole, rjq_count_cb *cb, void *data) {
    int n = rjq_queue_count_shards(q);
    if (n < 2 || whole < n) return RJQ_EINVAL;
    resplit *r = calloc(1, sizeof *r);
    if (r == NULL) return RJQ_ENOMEM;
    r->q = q, r->n = n, r->whole = whole, r->cb = cb, r->data = data;
    for (int i = 0; i < n; i++) r->part[i] = (rs_part){r, i};
    /* the first reads: a send that fails before any went is the caller's */
    int rc = rjq__queue_stats_one(rjq_queue_get_shard(q, 0), on_stats, &r->part[0]);
    if (rc != RJQ_OK) {
        free(r);
        return rc;
    }
    r->waiting = 1;
    for (int i = 1; i < n; i++) {
        rc = rjq__queue_stats_one(rjq_queue_get_shard(q, i), on_stats, &r->part[i]);
        if (rc != RJQ_OK) {
            r->status = rc; /* (cb gets it once those sent answered) */
            break;
        }
        r->waiting++;
    }
    return RJQ_OK;
}
