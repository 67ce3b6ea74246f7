/*
 * The queue's history (history.h): the counts a process gathers, added to
 * the stored minute and hour by one script call per queue per flush
 * period while there is activity (history.lua), and rjq_queue_get_history
 * (histread.lua). The per-job cost is a few additions in memory: the job
 * scripts write nothing for it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "history.h"

/* ---- the writers ---------------------------------------------------------- */

typedef struct hpart {
    rjq_queue *q;
    rjq__timer flush;   /* armed while counts wait to be flushed */
    long long v[RJQ__H_COUNT];
} hpart;

static void ignore(rjq_client *c, int status, redisReply *r, void *priv) {
    (void)r, (void)priv;
    rjq__background_failed(c, status, "history");
}

/* Send p's counts (zeroed once sent; kept when nothing could be sent). */
static void flush(hpart *p) {
    rjq_client *c = rjq_queue_get_client(p->q);
    if (rjq__closing(c)) return;
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, p->q, RJQ__S_HISTORY);
    rjq__argv_ll(&a, RJQ__H_COUNT);
    for (int k = 0; k < RJQ__H_COUNT; k++) rjq__argv_ll(&a, p->v[k]);
    rjq__argv_ll(&a, RJQ__H_MINUTE_TTL_MS);
    rjq__argv_ll(&a, RJQ__H_HOUR_TTL_MS);
    int rc = a.oom ? RJQ_ENOMEM : rjq__script(c, RJQ__S_HISTORY, 0, ignore, NULL, a.n, a.v, a.len);
    rjq__argv_free(&a);
    if (rc == RJQ_OK) memset(p->v, 0, sizeof p->v);
    else rjq__timer_start(c, &p->flush, (uint64_t)rjq__queue_history_ms(p->q));
}

static void on_flush(rjq__timer *t) {
    flush(t->owner);
}

static int any(const hpart *p) {
    for (int k = 0; k < RJQ__H_COUNT; k++)
        if (p->v[k]) return 1;
    return 0;
}

/* The handle was closed and nothing holds it: what it counted goes now. */
static void part_release(rjq_queue *q, void *state) {
    hpart *p = state;
    (void)q;
    if (any(p)) flush(p);
}

static void part_close(rjq_queue *q, void *state) {
    hpart *p = state;
    rjq__timer_teardown(rjq_queue_get_client(q), &p->flush);
    free(p);
}

static const rjq__part_ops part_ops = {NULL, NULL, NULL, part_close, part_release};

/* A graceful close (rjq_client_close) began: every queue's counts go now
 * (the close waits for the flushes' replies), so a short-lived producer
 * (the rjq tool) loses none. */
static void on_drain(rjq_client *c, void *state) {
    (void)state;
    for (rjq_queue *q = rjq__queue_first(c); q; q = rjq__queue_next(q)) {
        hpart *p = rjq__queue_part(q, RJQ__PART_HISTORY);
        if (p && any(p)) {
            rjq__timer_stop(c, &p->flush);
            flush(p);
        }
    }
}

static void on_close(rjq_client *c, void *state) {
    (void)c;
    free(state); /* (rjq__feature_ensure's bytes: nothing in them) */
}

static const rjq__feature history_feature = {.name = "history", .close = on_close,
                                             .drain = on_drain};

/* q's counts, made with the first; NULL when the handle writes no history
 * or out of memory (the counts are dropped). */
static hpart *part_of(rjq_queue *q) {
    if (rjq__queue_history_ms(q) < 0) return NULL;
    hpart *p = rjq__queue_part(q, RJQ__PART_HISTORY);
    if (p) return p;
    if (rjq__feature_ensure(rjq_queue_get_client(q), &history_feature, 1) == NULL ||
        (p = calloc(1, sizeof *p)) == NULL)
        return NULL;
    p->q = q;
    if (rjq__timer_setup(rjq_queue_get_client(q), &p->flush, on_flush, p) != RJQ_OK) {
        free(p);
        return NULL;
    }
    rjq__queue_set_part(q, RJQ__PART_HISTORY, &part_ops, p);
    return p;
}

static void due(hpart *p) {
    if (!rjq__timer_armed(&p->flush))
        rjq__timer_start(rjq_queue_get_client(p->q), &p->flush,
                         (uint64_t)rjq__queue_history_ms(p->q));
}

static void bump(long long *v, long long n) {
    *v = *v > RJQ__TIME_MAX - n ? RJQ__TIME_MAX : *v + n;
}

void rjq__history_enqueued(rjq_queue *q, long long n) {
    hpart *p = n > 0 ? part_of(q) : NULL;
    if (p == NULL) return;
    bump(&p->v[RJQ__H_ENQUEUED], n);
    due(p);
}

void rjq__history_finished(rjq_queue *q, int completed, long long run_ms, long long wait_ms) {
    hpart *p = part_of(q);
    if (p == NULL) return;
    if (run_ms < 0) run_ms = 0;
    bump(&p->v[completed ? RJQ__H_COMPLETED : RJQ__H_FAILED], 1);
    bump(&p->v[RJQ__H_RUN_SUM], run_ms);
    bump(&p->v[RJQ__H_RUN + rjq__history_bucket(run_ms)], 1);
    if (wait_ms >= 0) {
        bump(&p->v[RJQ__H_WAIT_SUM], wait_ms);
        bump(&p->v[RJQ__H_WAIT + rjq__history_bucket(wait_ms)], 1);
    }
    due(p);
}
