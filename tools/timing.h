/*
 * Job timings from a queue's event stream (pure logic, no I/O): how long
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

/* Forget the jobs of owner (its queue is no longer served). */
void timing_forget_owner(timing_map *m, const void *owner);

/* Forget jobs last seen before now_ms - max_age_ms (their end was lost). */
void timing_sweep(timing_map *m, long long now_ms, long long max_age_ms);

#endif
