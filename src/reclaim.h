/*
 * The reclaim sweep (reclaim.c): active jobs whose lease ended go back to
 * ready (or dead when their attempts are spent). Sent by each worker's
 * sweep timer and by rjq_queue_reclaim().
 */
#ifndef RJQ_RECLAIM_H
#define RJQ_RECLAIM_H

#include "queue.h"

/* Send the reclaim script for q (guard_ms 0: no sweeper guard). */
int rjq__reclaim_send(rjq_queue *q, long guard_ms, rjq__reply_fn *fn, void *priv);

#endif
