/*
 * Returning lost jobs (reclaim.c): active jobs whose lease ended, or whose
 * client was found dead, go back to ready (or dead when their attempts
 * are spent). Sent by the client's
 * periodic visits of its queues (upkeep.c) and by rjq_queue_reclaim().
 */
#ifndef RJQ_RECLAIM_H
#define RJQ_RECLAIM_H

#include "queue.h"

/* Send the reclaim script for q (guard_ms 0: no sweeper guard). look: the
 * reply is { reclaimed, jobs ready or due } instead of the count alone. */
int rjq__reclaim_send(rjq_queue *q, long guard_ms, int look, rjq__reply_fn *fn, void *priv);

/* Send the orphan sweep for q: the jobs held by the client whose token
 * prefix is who ("<client id>.") go back at once (orphans.lua; the reply
 * is { returned, more }), unless the sweep's lease (until, server ms) ended. */
int rjq__orphans_send(rjq_queue *q, const char *who, long long until, rjq__reply_fn *fn,
                      void *priv);

#endif
