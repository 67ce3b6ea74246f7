/*
 * The plan of a re-split of a sharded queue's whole-queue limit by demand
 * (shard_split.h, docs/sharding.md 6b): targets, lowering, raise. Pure.
 */
#include "shard_split.h"

void rjq__split_targets(long total, int n, const long *demand, long *target) {
    int k = 0;
    for (int i = 0; i < n; i++) k += demand[i] > 0;
    if (k == 0) {
        for (int i = 0; i < n; i++) target[i] = total / n + (i < total % n);
        return;
    }
    long pool = total - (n - k), rank = 0;
    for (int i = 0; i < n; i++)
        target[i] = demand[i] > 0 ? pool / k + (rank++ < pool % k) : 1;
}

int rjq__split_lower(int n, const long *share, const long *target, long *out) {
    int lowered = 0;
    for (int i = 0; i < n; i++) {
        out[i] = share[i] > target[i] ? target[i] : share[i];
        lowered += out[i] < share[i];
    }
    return lowered;
}

long rjq__split_raise(long total, int n, const long *share, const long *used, const long *target,
                      long *out) {
    long held = 0;
    for (int i = 0; i < n; i++) {
        out[i] = share[i];
        held += share[i] > used[i] ? share[i] : used[i];
    }
    if (held > total) return -1;
    long left = total - held;
    for (int i = 0; i < n && left > 0; i++) {
        if (share[i] >= target[i]) continue;
        long x = target[i] - share[i];
        if (x > left) x = left;
        /* (max(share + x, used) - max(share, used) <= x) */
        out[i] = share[i] + x;
        left -= x;
    }
    return left;
}
