/*
 * Job timings from a queue's event stream (no I/O; only timing_sweep_now
 * reads the clock), shared by rjq serve and rjq top: how long
 * jobs waited from their enqueue to their first start, and how long each
 * run took, as Prometheus-style cumulative histograms.
 *
 * Events travel at most once, and jobs enqueued before the stream was
 * watched have no enqueue time: a job is measured for what was seen of
 * it. The map of jobs in flight is bounded (a job past the bound is not
 * measured) and forgets jobs whose end was never seen (timing_sweep).
 */
#ifndef RJQ_TOOLS_TIMING_H
#define RJQ_TOOLS_TIMING_H

#include <stddef.h>

#define TIMING_BUCKETS 17 /* finite upper bounds; +Inf is one more */
#define TIMING_JOBS 100000          /* a map's bound for rjq serve and rjq top */
#define TIMING_MAX_AGE_MS 3600000   /* timing_sweep_now: a job unseen this long goes */

/* The buckets' upper bounds, seconds, increasing. */
extern const double timing_bounds[TIMING_BUCKETS];

typedef struct timing_hist {
    unsigned long long le[TIMING_BUCKETS + 1]; /* observations <= bound (not cumulative) */
    unsigned long long count;
    double sum;                                /* seconds */
} timing_hist;

void timing_observe(timing_hist *h, double seconds);

/* The upper bound (seconds) of the bucket holding the q-quantile (0 < q
 * <= 1) of h's observations: at least that fraction of them took at most
 * this long. -1 when h is empty; INFINITY when it lies past the last
 * bound. */
double timing_quantile(const timing_hist *h, double q);

typedef struct timing_entry timing_entry;

typedef struct timing_map {
    timing_entry **buckets;
    size_t nbuckets, n, max;
    unsigned long long dropped; /* jobs not measured: the map was full */
} timing_map;

/* 0, or -1 when out of memory. max: entries at most. */
int timing_map_init(timing_map *m, size_t max);
void timing_map_free(timing_map *m);

/* One event of a job of queue `owner` at server time t_ms. *wait_s gets
 * the enqueue-to-start time when this event is the job's first start seen
 * after its enqueue, *run_s the run time when it ends a run seen started
 * ("completed", "failed"); both -1 otherwise. */
void timing_event(timing_map *m, const void *owner, const char *event, const char *id,
                  long long t_ms, double *wait_s, double *run_s);

/* A queue's timings: its histograms, and what they held at the last
 * timing_queue_means (both for rjq serve and rjq top). */
typedef struct timing_queue {
    timing_hist wait, run;           /* enqueue-to-start, run time */
    timing_hist wait_seen, run_seen; /* at the last timing_queue_means */
} timing_queue;

/* timing_event for queue q (the owner), its wait or run time observed. */
void timing_queue_event(timing_map *m, timing_queue *q, const char *event, const char *id,
                        long long t_ms);
/* The same for a job of `owner` (its ids apart from q's other owners':
 * rjq top's shard of a sharded queue), observed in q. */
void timing_queue_event_of(timing_map *m, const void *owner, timing_queue *q, const char *event,
                           const char *id, long long t_ms);

/* The mean wait and run time (ms) of the jobs observed since the last
 * call, -1 for none; they count as seen from now on. */
void timing_queue_means(timing_queue *q, double *wait_ms, double *run_ms);

/* Forget the jobs of owner (its queue is no longer served). */
void timing_forget_owner(timing_map *m, const void *owner);

/* Forget jobs last seen before now_ms - max_age_ms (their end was lost). */
void timing_sweep(timing_map *m, long long now_ms, long long max_age_ms);
/* The same for now (the wall clock: events carry server time) and
 * TIMING_MAX_AGE_MS. */
void timing_sweep_now(timing_map *m);

#endif
