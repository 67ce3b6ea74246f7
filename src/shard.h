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

/* One shard's part of a call sent to every shard: the per-queue call on
 * sub, with arg; RJQ_OK when sent (cb then called once), else its error. */
typedef int rjq__fan_send_fn(rjq_queue *sub, const void *arg, rjq_count_cb *cb, void *data);

/* send(shard, arg, ...) to every shard of q (a handle that knows its
 * layout; a plain queue's handle: send(q, arg, cb, data) alone); cb once,
 * when each sent call has answered: the first error, or the sum of their
 * counts. A call that cannot be sent ends the sending: none sent, its error
 * (RJQ_ECLOSED when the client stops accepting) is returned and cb never
 * called; else RJQ_OK (or RJQ_ENOMEM, cb not called). */
int rjq__queue_fan_out(rjq_queue *q, rjq__fan_send_fn *send, const void *arg, rjq_count_cb *cb,
                       void *data);

/* The queue that holds job group `group`'s jobs and keys: on a sharded
 * queue's handle that knows its layout the shard crc16(group) mod N (as
 * rjq_enqueue routes a job of the group); else q itself. */
rjq_queue *rjq__queue_group_shard(rjq_queue *q, const char *group);

/* The queue that holds job `id` of q: on a sharded queue's handle that
 * knows its layout the shard its id routes to (as rjq_enqueue routes a
 * job with that id, or the id it made for an anonymous one); else q. */
rjq_queue *rjq__queue_id_shard(rjq_queue *q, const char *id);

/* The timing of the re-splitter a worker on q (a sharded queue's handle)
 * starts (shard_resplitter.h: 0, 0 for the defaults; a period below 0:
 * none), set before the worker starts (tests). RJQ_OK or RJQ_ENOMEM. */
int rjq__queue_resplit_every(rjq_queue *q, long period_ms, long lease_ms);

/* 1 when q's re-splitter holds q's re-split lease (as of its last call). */
int rjq__queue_resplit_leading(const rjq_queue *q);

#endif /* RJQ_SHARD_H */
