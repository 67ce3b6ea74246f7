/*
 * Administration (admin.c): the calls on one queue's keys. shard.c's
 * public calls pick the queue (a sharded queue's shards, or q itself).
 */
#ifndef RJQ_ADMIN_H
#define RJQ_ADMIN_H

#include "queue.h"

/* rjq_queue_get_stats on one queue (refuses a front: RJQ_ESHARDED). */
int rjq__queue_stats_one(rjq_queue *q, rjq_stats_cb *cb, void *data);

#endif
