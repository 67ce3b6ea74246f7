/* The history's bucket math and stored values (history.h): pure. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "history.h"

int rjq__history_bucket(long long ms) {
    int i = 0;
    long long bound = 1;
    while (i < RJQ_HISTORY_BUCKETS - 1 && ms > bound) {
        bound *= 2;
        i++;
    }
    return i;
}

double rjq_history_bound(int i) {
    if (i < 0 || i >= RJQ_HISTORY_BUCKETS) return NAN;
    if (i == RJQ_HISTORY_BUCKETS - 1) return INFINITY;
    return 0.001 * (double)(1LL << i);
}

double rjq_history_quantile(const long long *b, double q) {
    if (b == NULL || !(q > 0 && q <= 1)) return -1;
    double total = 0;
    for (int i = 0; i < RJQ_HISTORY_BUCKETS; i++) total += (double)(b[i] > 0 ? b[i] : 0);
    if (total == 0) return -1;
    double want = q * total, cum = 0;
    for (int i = 0; i < RJQ_HISTORY_BUCKETS - 1; i++) {
        double n = (double)(b[i] > 0 ? b[i] : 0);
        if (n > 0 && cum + n >= want) {
            double lo = i == 0 ? 0 : rjq_history_bound(i - 1), hi = rjq_history_bound(i);
            return lo + (hi - lo) * (want - cum) / n;
        }
        cum += n;
    }
    return rjq_history_bound(RJQ_HISTORY_BUCKETS - 2);
}

const rjq_history_point *rjq_history_point_get(const rjq_history_point *list, size_t i) {
    return list ? &list[i] : NULL;
}

/* The next decimal number of v[*at..len) (one space before it unless
 * first): 0, or -1 when there is none or it is out of 0..2^62. */
static int next_num(const char *v, size_t len, size_t *at, int first, long long *out) {
    size_t i = *at;
    if (!first) {
        if (i >= len || v[i] != ' ') return -1;
        i++;
    }
    if (i >= len || v[i] < '0' || v[i] > '9') return -1;
    long long n = 0;
    while (i < len && v[i] >= '0' && v[i] <= '9') {
        if (n > (RJQ__TIME_MAX - (v[i] - '0')) / 10) return -1;
        n = n * 10 + (v[i] - '0');
        i++;
    }
    *at = i;
    *out = n;
    return 0;
}

int rjq__history_num(const char *v, size_t len, long long *out) {
    size_t i = 0;
    return next_num(v, len, &i, 1, out) == 0 && i == len ? 0 : -1;
}

static long long *field_of(rjq_history_point *p, int k) {
    switch (k) {
    case RJQ__H_ENQUEUED: return &p->enqueued;
    case RJQ__H_COMPLETED: return &p->completed;
    case RJQ__H_FAILED: return &p->failed;
    case RJQ__H_WAIT_SUM: return &p->wait_sum_ms;
    case RJQ__H_RUN_SUM: return &p->run_sum_ms;
    default: return k < RJQ__H_RUN ? &p->wait[k - RJQ__H_WAIT] : &p->run[k - RJQ__H_RUN];
    }
}

int rjq__history_parse(const char *v, size_t len, long long at, long long step_ms,
                       rjq_history_point *p) {
    memset(p, 0, sizeof *p);
    p->at_ms = at * step_ms;
    size_t i = 0;
    long long got;
    if (next_num(v, len, &i, 1, &got) != 0) return -1;
    rjq_history_point tmp;
    memset(&tmp, 0, sizeof tmp);
    for (int k = 0; k < RJQ__H_COUNT; k++)
        if (next_num(v, len, &i, 0, field_of(&tmp, k)) != 0) return -1;
    if (i != len) return -1;
    if (got != at) return 0;
    tmp.at_ms = p->at_ms;
    *p = tmp;
    return 1;
}

void rjq__history_add(rjq_history_point *p, const rjq_history_point *add) {
    for (int k = 0; k < RJQ__H_COUNT; k++) {
        long long s = *field_of(p, k) + *field_of((rjq_history_point *)add, k);
        *field_of(p, k) = s > RJQ__TIME_MAX ? RJQ__TIME_MAX : s;
    }
}
