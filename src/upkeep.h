/*
 * The client's upkeep (upkeep.c): one timer per client, whatever the
 * number of its queues, for what workers need done in the background:
 *   - the liveness beat: while it has workers, the client renews its
 *     liveness entry (beat.lua) and sweeps clients whose entry ran out,
 *     returning the jobs they held at once (orphans.lua);
 *   - visits: queue by queue, in turn, the reclaim sweep of expired leases,
 *     which also says whether jobs wait that no doorbell announced (the
 *     queue's idle workers then claim). At most one visit per period (the
 *     shortest its queues ask for, 1 s by default): the idle cost of a
 *     process does not grow with its queues.
 */
#ifndef RJQ_UPKEEP_H
#define RJQ_UPKEEP_H

#include "queue.h"

struct rjq__describe;

typedef struct rjq__visit_ops {
    /* Visit the queue at all (it has workers)? */
    int (*wanted)(rjq_queue *q, void *arg);
    /* A visit found jobs ready or due. */
    void (*waiting)(rjq_queue *q, void *arg);
    /* Optional, for the process registry: add the queue's workers'
     * concurrency and running jobs to d (ids: up to RJQ_PROCESS_JOBS_MAX
     * in all, valid until the caller returns). */
    void (*describe)(rjq_queue *q, void *arg, struct rjq__describe *d);
} rjq__visit_ops;

typedef struct rjq__describe {
    int concurrency, running;
    size_t nids;
    const char *ids[RJQ_PROCESS_JOBS_MAX];
} rjq__describe;

#define RJQ__DESCRIBE_MAX (64 + RJQ_PROCESS_JOBS_MAX * (RJQ_JOB_ID_MAX + 1))

/* Visit q at most every period_ms (a second call for q keeps its hooks and
 * the shorter period), and beat while q is wanted. RJQ_OK or RJQ_ENOMEM. */
int rjq__upkeep_join(rjq_queue *q, const rjq__visit_ops *ops, void *arg, long period_ms);

/* q's handle goes (rjq_queue_close): no more visits of it, and its name
 * leaves those the beat stores (unless another handle has it). */
void rjq__upkeep_leave(rjq_queue *q);

/* The server time (ms) the client's liveness entry for q runs out, as its
 * last answered beat set it (on a Redis Cluster the entry in the registry
 * of q's master: one per master); 0 when it has none (no beat yet, or
 * liveness off). Past it, other clients may have returned its jobs in q. */
long long rjq__upkeep_alive_until(rjq_queue *q);

#endif /* RJQ_UPKEEP_H */
