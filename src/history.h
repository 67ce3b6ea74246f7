/*
 * A queue's history (rjq.h "History"; README "History"): per-minute and
 * per-hour counts and log-scale histograms kept in Redis, written by the
 * producers and workers that count in memory and flush on a timer
 * (history.c), read by rjq_queue_get_history. The bucket math and the
 * stored value's format are pure (history_math.c, unit-tested).
 */
#ifndef RJQ_HISTORY_H
#define RJQ_HISTORY_H

#include "queue.h"

/* The counts one flush adds and one stored value holds, in this order. */
enum {
    RJQ__H_ENQUEUED, RJQ__H_COMPLETED, RJQ__H_FAILED, RJQ__H_WAIT_SUM, RJQ__H_RUN_SUM,
    RJQ__H_WAIT, /* RJQ_HISTORY_BUCKETS of them */
    RJQ__H_RUN = RJQ__H_WAIT + RJQ_HISTORY_BUCKETS,
    RJQ__H_COUNT = RJQ__H_RUN + RJQ_HISTORY_BUCKETS
};

#define RJQ__H_MINUTE_TTL_MS (24LL * 3600000 + 3600000) /* a day, and the hour it ends in */
#define RJQ__H_HOUR_TTL_MS (30LL * 24 * 3600000 + 3600000)

/* ---- pure (history_math.c) ---- */

/* The bucket of a time of ms milliseconds (< 0 counts as 0). */
int rjq__history_bucket(long long ms);
/* A stored value ("<at> <RJQ__H_COUNT counts>") into p (its counts; at_ms
 * is at * step_ms). Returns 1 when the value is of minute/hour `at`, 0 when
 * it is of another (the ring's last lap: p zeroed), -1 when malformed. */
int rjq__history_parse(const char *v, size_t len, long long at, long long step_ms,
                       rjq_history_point *p);
/* A decimal number 0..2^62 that is all of v[0..len): 0, else -1. */
int rjq__history_num(const char *v, size_t len, long long *out);
/* p += add (counts and buckets). */
void rjq__history_add(rjq_history_point *p, const rjq_history_point *add);

/* ---- the writers (history.c) ---- */

/* n jobs were enqueued through q (new ones: not existing ids). */
void rjq__history_enqueued(rjq_queue *q, long long n);
/* A worker sent the outcome of a run of a job of q: completed (1) or
 * failed (0), run_ms its run time; wait_ms its wait (enqueue to first
 * start) when this outcome ends its first run and the wait is known, else
 * -1. */
void rjq__history_finished(rjq_queue *q, int completed, long long run_ms, long long wait_ms);

#endif
