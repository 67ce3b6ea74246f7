/*
 * Sharded queues (shard.c): what code outside the public API may ask of a
 * handle's layout.
 */
#ifndef RJQ_SHARD_H
#define RJQ_SHARD_H

#include "rjq.h"

/* 1 when q knows whether its queue is sharded (rjq_queue_open_async, or
 * rjq_queue_open's declaration read answered), so its calls go out at
 * once; 0 while they are held for the read (or after it failed). The tests
 * wait on it before stopping Redis, so that their first calls are sent. */
int rjq__queue_layout_known(const rjq_queue *q);

#endif
