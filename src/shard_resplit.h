/*
 * One re-split of a sharded queue's whole-queue concurrency over its
 * shards by demand (shard_resplit.c, docs/sharding.md 6b), made through
 * the shards' own calls: the step a re-splitter repeats.
 */
#ifndef RJQ_SHARD_RESPLIT_H
#define RJQ_SHARD_RESPLIT_H

#include <stdint.h>

#include "rjq.h"

/* Re-split the whole-queue concurrency and rate of `whole` (each 0: not
 * re-split, kept as read; else at least the shard count; the rate's
 * window is each shard's own) of a sharded queue over its n shards (the
 * handles of shards[], held until the step ends) by demand: read every
 * shard's stats (its shares: limit_concurrency, limit_rate; its demand:
 * ready + delayed), lower the shares above their targets
 * (rjq__split_lower), once every lowering was answered read the shards
 * again (active; for the rate its starts in the window and a second more,
 * ZCOUNT of its starts) and raise by what that leaves (rjq__split_raise).
 * Not to be run by two clients at once (the caller holds the queue's
 * re-split lease): epoch (>= 0) is the stored figures' (wholelimits.lua),
 * sent with every share written: a shard that a newer change of the
 * figures has written refuses it, and the step ends there with
 * RJQ_ECANCELED (its other writes stand or are the change's to
 * overwrite); -1: writes not fenced. raise_by (rjq__now_ms; 0: none) is when that lease may
 * no longer be the caller's, past which no raise is sent (cb gets
 * RJQ_ETIMEDOUT; the lowerings made stand: still a valid split). cb once:
 * RJQ_OK and the shards whose shares changed, or the first error (a shard
 * without the limit re-split, or with a share above the whole:
 * RJQ_EINVAL). Returns RJQ_OK, RJQ_EINVAL (not 2..RJQ_SHARDS_MAX shards, no
 * figure, a figure below the count), RJQ_ENOMEM, or a send's error (cb
 * not called). */
int rjq__shard_resplit(rjq_queue *const *shards, int n, const rjq_limits *whole, long long epoch,
                       uint64_t raise_by, rjq_count_cb *cb, void *data);

#endif /* RJQ_SHARD_RESPLIT_H */
