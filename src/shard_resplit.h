/*
 * One re-split of a sharded queue's whole-queue concurrency over its
 * shards by demand (shard_resplit.c, docs/sharding.md 6b), made through
 * the shards' own calls: the step a re-splitter repeats.
 */
#ifndef RJQ_SHARD_RESPLIT_H
#define RJQ_SHARD_RESPLIT_H

#include "rjq.h"

/* Re-split the concurrency `whole` (>= the shard count) of the sharded
 * queue q (a handle that knows its layout) over its shards by demand:
 * read every shard's stats (its share: limit_concurrency; its demand:
 * ready + delayed), lower the shares above their targets
 * (rjq__split_lower), once every lowering was answered read the shards
 * again and raise by what their active counts leave (rjq__split_raise).
 * Each shard's rate limit is set again as it was read. Not to be run by
 * two clients at once (the caller holds the queue's re-split lease). cb
 * once: RJQ_OK and the shares changed, or the first error (a shard
 * with no concurrency limit: RJQ_EINVAL). Returns RJQ_OK, RJQ_EINVAL
 * (not a sharded handle, whole below the count), RJQ_ENOMEM, or a send's
 * error (cb not called). */
int rjq__shard_resplit(rjq_queue *q, long whole, rjq_count_cb *cb, void *data);

#endif /* RJQ_SHARD_RESPLIT_H */
