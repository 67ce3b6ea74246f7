/*
 * Sharded queues (shard.c): what other features need of a handle's layout.
 */
#ifndef RJQ_SHARD_H
#define RJQ_SHARD_H

#include "rjq.h"

/* 1 while q (an rjq_queue_open handle) is reading its layout, its routed
 * calls held; else 0. (The tests wait for 0 before they stop Redis, so that
 * their first calls are sent, not held.) */
int rjq__queue_learning(rjq_queue *q);

/* Called once q knows its layout (status RJQ_OK: rjq_queue_count_shards
 * and rjq_queue_get_shard answer for it), or with an error (RJQ_ECANCELED)
 * when q or its client goes first. A failed read does not call it: it waits for the
 * next read, as a held worker does. */
typedef void rjq__learnt_fn(rjq_client *c, int status, void *data);

/* 1 when q knows its layout now (fn not called); RJQ_OK when fn is held
 * until it does (rjq_queue_open's gate, in call order with the calls
 * held); RJQ_ENOMEM or RJQ_ECLOSED (fn not called). */
int rjq__queue_when_learnt(rjq_queue *q, rjq__learnt_fn *fn, void *data);

/* The queue that holds job group `group`'s jobs and keys: on a sharded
 * queue's handle that knows its layout the shard crc16(group) mod N (as
 * rjq_enqueue routes a job of the group); else q itself. */
rjq_queue *rjq__queue_group_shard(rjq_queue *q, const char *group);

#endif /* RJQ_SHARD_H */
