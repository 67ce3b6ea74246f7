/*
 * The re-splitter of a sharded queue (shard_resplitter.c, docs/sharding.md
 * 6b): in a process with a worker on the sharded queue, every period it
 * takes or keeps the queue's re-split lease (resplit.lua, in the queue's
 * own slot: one re-splitter at a time over every client) and, while it
 * holds it and the queue has whole-queue limits stored, runs one re-split
 * step (rjq__shard_resplit) with them.
 */
#ifndef RJQ_SHARD_RESPLITTER_H
#define RJQ_SHARD_RESPLITTER_H

#include "rjq.h"

typedef struct rjq__resplitter rjq__resplitter;

/* The defaults: a step every 250 ms under a lease of 2 s. */
#define RJQ__RESPLIT_PERIOD_MS 250
#define RJQ__RESPLIT_LEASE_MS 2000

/* A re-splitter of front (the sharded queue's handle: its lease and the
 * stored figures are in its slot), started at once (its first lease call
 * at the next timer turn), with no shards until rjq__resplitter_shards
 * gives them. period_ms, lease_ms: 0 for the defaults above; the lease
 * at least 2 periods. NULL: out of memory. */
rjq__resplitter *rjq__resplitter_new(rjq_queue *front, long period_ms, long lease_ms);

/* The shards' handles to re-split over (copied; n < 2: none, no step). */
void rjq__resplitter_shards(rjq__resplitter *d, rjq_queue *const *sub, int n);

/* 1 while it holds the lease (as of its last lease reply). */
int rjq__resplitter_leading(const rjq__resplitter *d);

/* Stop and free it: the lease given up when it holds it (another takes
 * over at once); a call in flight frees it when it answers (nothing of
 * front used then). During the client's end (rjq__closing): freed, no
 * call sent. */
void rjq__resplitter_free(rjq__resplitter *d);

/* The stored whole-queue limits "1 <concurrency> <rate> <window ms>
 * <epoch>" (src/keys.def SHARDLIMITS; no epoch: 0) of len bytes, never
 * trusted: RJQ_OK, *out and *epoch (when not NULL), or RJQ_EPROTO. */
int rjq__shard_limits_parse(const char *s, size_t len, rjq_limits *out, long long *epoch);

#endif /* RJQ_SHARD_RESPLITTER_H */
