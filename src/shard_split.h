/*
 * Re-splitting a sharded queue's whole-queue limit (a concurrency C, or a
 * rate's R per window) over its shards by demand: the plan only, pure
 * (shard_split.c, docs/sharding.md 6b). The one re-splitter that applies
 * it (under a lease in the queue's own slot) lowers shares first
 * (rjq__split_lower), waits until every lowering is answered, re-reads the
 * shards' use, then raises (rjq__split_raise), which hands out only what
 * the lowered shards actually gave back, so that the shares and what each
 * shard still uses never add up to more than the whole.
 */
#ifndef RJQ_SHARD_SPLIT_H
#define RJQ_SHARD_SPLIT_H

/* The shares a re-split aims at: the shards with demand (demand[i] > 0:
 * jobs ready or delayed) split total less one for each shard without
 * (total / k, the first total % k of them one more); a shard without demand
 * keeps 1 (a share of 0 is no limit). No demand anywhere: the static split
 * (total / n, the first total % n one more). total >= n >= 1. */
void rjq__split_targets(long total, int n, const long *demand, long *target);

/* The lowering: each share above its target goes down to it, the others
 * stay (out[i] = min(share[i], target[i])). Returns how many went down. */
int rjq__split_lower(int n, const long *share, const long *target, long *out);

/* The raise, once every lowering was answered: used[i] is shard i's use
 * read after that (its active jobs; for a rate, its starts in the current
 * window). A shard whose use is above its share admits nothing until it
 * falls below, so shard i holds at most max(share[i], used[i]) from then
 * on; what is left of total after those, the headroom, goes to the shards
 * below their targets, in shard order, each up to its target. Then
 * sum over i of max(out[i], used[i]) <= total whenever it held for
 * share (a raise of x adds at most x to that sum). Returns the headroom
 * left over (0 or more; -1 when share and used already exceed total,
 * then nothing is raised). */
long rjq__split_raise(long total, int n, const long *share, const long *used, const long *target,
                      long *out);

#endif /* RJQ_SHARD_SPLIT_H */
