/*
 * A rate from two reads of a counter (no I/O), shared by rjq serve and
 * rjq top. A counter that went down was reset (Redis restarted empty, or
 * the queue's keys were deleted): as Prometheus' rate() does, the increase
 * since the reset is the counter's new value, never a negative number.
 */
#ifndef RJQ_TOOLS_RATE_H
#define RJQ_TOOLS_RATE_H

#include <stddef.h>

#include "rjq.h"

/* The increase of a counter read as prev then cur: cur - prev, or cur
 * when it went down (a reset; 0 when cur is negative too). */
long long counter_increase(long long prev, long long cur);

/* counter_increase(prev, cur) per second over dt seconds; 0 when dt <= 0. */
double counter_rate(long long prev, long long cur, double dt);

/* A queue's rates (per second) between two reads of its stats dt seconds
 * apart: enqueued, completed and failed, each by counter_rate. */
typedef struct stats_rates {
    double in, done, fail;
} stats_rates;
stats_rates stats_rates_between(const rjq_stats *prev, const rjq_stats *cur, double dt);

/* A rate limit of n starts per window_ms as users read it, as the
 * dashboard prints it: "50/1s", "3/250ms", "2/1min" (whole minutes in min,
 * whole seconds in s, else ms; n <= 0 or window_ms <= 0: "none"), written
 * to buf (size bytes, truncated); returns buf. rjq groups and rjq top. */
const char *rate_limit_text(char *buf, size_t size, long long n, long long window_ms);

#endif
