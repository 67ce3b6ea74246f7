/* Rates from counters read twice (rate.h). */
#include "rate.h"

#include <stdio.h>

long long counter_increase(long long prev, long long cur) {
    if (cur < prev) return cur > 0 ? cur : 0; /* a reset: counted from 0 */
    return cur - prev;
}

double counter_rate(long long prev, long long cur, double dt) {
    return dt > 0 ? (double)counter_increase(prev, cur) / dt : 0.0;
}

stats_rates stats_rates_between(const rjq_stats *prev, const rjq_stats *cur, double dt) {
    return (stats_rates){counter_rate(prev->enqueued, cur->enqueued, dt),
                         counter_rate(prev->completed, cur->completed, dt),
                         counter_rate(prev->failed, cur->failed, dt)};
}

const char *rate_limit_text(char *buf, size_t size, long long n, long long window_ms) {
    if (size == 0) return buf;
    if (n <= 0 || window_ms <= 0)
        snprintf(buf, size, "none");
    else if (window_ms % 60000 == 0)
        snprintf(buf, size, "%lld/%lldmin", n, window_ms / 60000);
    else if (window_ms % 1000 == 0)
        snprintf(buf, size, "%lld/%llds", n, window_ms / 1000);
    else
        snprintf(buf, size, "%lld/%lldms", n, window_ms);
    return buf;
}
