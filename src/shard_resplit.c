/*
 * One re-split of a sharded queue's whole-queue concurrency and rate by
 * demand (shard_resplit.h): stats of every shard, the lowerings, stats
 * (and the rate's starts) again, the raises; the plan is shard_split.c's.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "core.h"
#include "queue.h"
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
    rjq_client *c;
    rjq_queue *sub[RJQ_SHARDS_MAX]; /* the shards' handles, held during the step */
    uint64_t raise_by;              /* no raise sent after this (rjq__now_ms; 0: none) */
    long long epoch;                /* the figures' (wholelimits.lua), each write's fence; -1 */
    int n, phase, waiting, status, changed, lowered;
    long whole, whole_rate;
    rjq_count_cb *cb;
    void *data;
    rs_part part[RJQ_SHARDS_MAX];
    long share[RJQ_SHARDS_MAX], demand[RJQ_SHARDS_MAX], used[RJQ_SHARDS_MAX],
        target[RJQ_SHARDS_MAX], next[RJQ_SHARDS_MAX], rate[RJQ_SHARDS_MAX],
        window[RJQ_SHARDS_MAX];
    /* the rate's (whole_rate > 0): shares, starts in the window, targets */
    long rused[RJQ_SHARDS_MAX], rtarget[RJQ_SHARDS_MAX], rnext[RJQ_SHARDS_MAX];
};

static void run_phase(rjq_client *c, resplit *r);

static void resplit_free(resplit *r) {
    if (!rjq__closing(r->c)) /* (during the client's end everything goes with it) */
        for (int i = 0; i < r->n; i++) rjq__queue_release(r->sub[i]);
    free(r);
}

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
        if ((r->whole && (st->limit_concurrency < 1 || st->limit_concurrency > r->whole)) ||
            (r->whole_rate && (st->limit_rate < 1 || st->limit_rate > r->whole_rate)))
            status = RJQ_EINVAL;
        if (r->phase == RS_READ) {
            r->share[p->i] = st->limit_concurrency;
            r->demand[p->i] = st->ready + st->delayed;
            r->rate[p->i] = st->limit_rate;
            r->window[p->i] = st->limit_rate_window_ms;
        }
        r->used[p->i] = st->active; /* (read with the share it runs under) */
    }
    part_done(c, r, status);
}

/* A shard's starts in the rate's window (ZCOUNT): its rate use. */
static void on_starts(rjq_client *c, int status, redisReply *rep, void *data) {
    rs_part *p = data;
    if (status == RJQ_OK) {
        if (rep == NULL || rep->type != REDIS_REPLY_INTEGER || rep->integer < 0 ||
            rep->integer > RJQ__TIME_MAX)
            status = RJQ_EPROTO;
        else
            p->r->rused[p->i] = (long)rep->integer;
    }
    part_done(c, p->r, status);
}

/* Count shard i's starts in its rate's window: those since the server's
 * time less the window and a second (more than the window holds: a raise
 * never hands out what a start still in it took); no time known: all. */
static int send_starts(rjq_client *c, resplit *r, int i) {
    rjq_queue *sub = r->sub[i];
    size_t klen;
    const char *key = rjq__queue_key(sub, RJQ__K_STARTS, &klen);
    long long now = rjq__server_now(c);
    long w = r->window[i] > 0 ? r->window[i] : 1000;
    char from[32];
    if (now > 0) snprintf(from, sizeof from, "%lld", now - w - 1000);
    else snprintf(from, sizeof from, "-inf");
    const char *argv[] = {"ZCOUNT", key, from, "+inf"};
    return rjq__command_in(c, rjq__queue_slot(sub), 0, on_starts, &r->part[i], 4, argv, NULL);
}

static void on_set(rjq_client *c, int status, long long n, void *data) {
    resplit *r = ((rs_part *)data)->r;
    /* refused for its epoch: a change of the figures reached the shard
     * after this step read them; no more writes (the change's split stands) */
    if (status == RJQ_OK && n == 0 && r->epoch >= 0) status = RJQ_ECANCELED;
    part_done(c, r, status);
}

/* Set shard i's concurrency share to next[i] (its rate as read). */
static int send_share(resplit *r, int i) {
    rjq_limits lim = RJQ_LIMITS_INIT;
    lim.concurrency = r->whole ? r->next[i] : r->share[i];
    lim.rate = r->whole_rate ? r->rnext[i] : r->rate[i];
    lim.rate_window_ms = r->rate[i] ? r->window[i] : 0;
    return rjq__queue_limits_fenced(r->sub[i], &lim, r->epoch, on_set, &r->part[i]);
}

/* Send the phase's calls (each shard's stats, or the changed shares);
 * none to send: on to the next phase. Once done, or a call failed, the
 * caller's callback and the end. */
static void run_phase(rjq_client *c, resplit *r) {
    for (;;) {
        if (r->phase == RS_RAISE && r->raise_by && rjq__now_ms() > r->raise_by &&
            r->status == RJQ_OK)
            r->status = RJQ_ETIMEDOUT; /* (the lease may be another's by now: lowerings only) */
        if (r->status != RJQ_OK || r->phase == RS_DONE) {
            if (r->cb) r->cb(c, r->status, r->status == RJQ_OK ? r->changed : 0, r->data);
            resplit_free(r);
            return;
        }
        r->waiting = 1; /* (held while sending: a reply in the same turn ends nothing) */
        if (r->phase == RS_LOWER) {
            memcpy(r->next, r->share, sizeof r->next);
            memcpy(r->rnext, r->rate, sizeof r->rnext);
            if (r->whole) {
                rjq__split_targets(r->whole, r->n, r->demand, r->target);
                rjq__split_lower(r->n, r->share, r->target, r->next);
            }
            if (r->whole_rate) {
                rjq__split_targets(r->whole_rate, r->n, r->demand, r->rtarget);
                rjq__split_lower(r->n, r->rate, r->rtarget, r->rnext);
            }
        } else if (r->phase == RS_RAISE) {
            memcpy(r->share, r->next, sizeof r->share);
            memcpy(r->rate, r->rnext, sizeof r->rate);
            if (r->whole &&
                rjq__split_raise(r->whole, r->n, r->share, r->used, r->target, r->next) < 0)
                memcpy(r->next, r->share, sizeof r->next); /* (over already: none) */
            if (r->whole_rate &&
                rjq__split_raise(r->whole_rate, r->n, r->rate, r->rused, r->rtarget, r->rnext) < 0)
                memcpy(r->rnext, r->rate, sizeof r->rnext);
        }
        /* nothing lowered: the first reads' active counts, each read with
         * the share it still has, bound each shard's use as a re-read
         * would (only this step changes shares); the rate's starts are
         * read in the re-read only */
        int skip = r->phase == RS_REREAD && r->lowered == 0 && r->whole_rate == 0;
        for (int i = 0; i < r->n && r->status == RJQ_OK && !skip; i++) {
            int rc = RJQ_OK;
            if (r->phase == RS_READ || r->phase == RS_REREAD) {
                rc = rjq__queue_stats_one(r->sub[i], on_stats, &r->part[i]);
                if (rc == RJQ_OK && r->phase == RS_REREAD && r->whole_rate) {
                    r->waiting++;
                    rc = send_starts(c, r, i);
                }
            } else if (r->next[i] != r->share[i] || r->rnext[i] != r->rate[i]) {
                rc = send_share(r, i);
                if (rc == RJQ_OK) r->changed++, r->lowered += r->phase == RS_LOWER;
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

int rjq__shard_resplit(rjq_queue *const *shards, int n, const rjq_limits *whole, long long epoch,
                       uint64_t raise_by, rjq_count_cb *cb, void *data) {
    if (shards == NULL || n < 2 || n > RJQ_SHARDS_MAX || whole == NULL ||
        whole->concurrency < 0 || whole->rate < 0 ||
        (whole->concurrency == 0 && whole->rate == 0) ||
        (whole->concurrency && whole->concurrency < n) || (whole->rate && whole->rate < n))
        return RJQ_EINVAL;
    for (int i = 0; i < n; i++)
        if (shards[i] == NULL) return RJQ_EINVAL;
    rjq_client *c = rjq_queue_get_client(shards[0]);
    resplit *r = calloc(1, sizeof *r);
    if (r == NULL) return RJQ_ENOMEM;
    r->c = c, r->n = n, r->whole = whole->concurrency, r->whole_rate = whole->rate;
    r->raise_by = raise_by, r->cb = cb, r->data = data, r->epoch = epoch < 0 ? -1 : epoch;
    for (int i = 0; i < n; i++) r->part[i] = (rs_part){r, i}, r->sub[i] = shards[i];
    /* the first reads: a send that fails before any went is the caller's */
    int rc = rjq__queue_stats_one(r->sub[0], on_stats, &r->part[0]);
    if (rc != RJQ_OK) {
        free(r);
        return rc;
    }
    /* (held: a layout changed meanwhile closes its shards' handles) */
    for (int i = 0; i < n; i++) rjq__queue_hold(r->sub[i]);
    r->waiting = 1;
    for (int i = 1; i < n; i++) {
        rc = rjq__queue_stats_one(r->sub[i], on_stats, &r->part[i]);
        if (rc != RJQ_OK) {
            r->status = rc; /* (cb gets it once those sent answered) */
            break;
        }
        r->waiting++;
    }
    return RJQ_OK;
}
