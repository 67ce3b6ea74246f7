/*
 * Job groups (groups.c; README "Groups", rjq.h "Job groups"): the enqueue
 * of a job with a group, and the groups' settings and listing. A feature:
 * enqueue.c hands it a job with a group; the claims that serve the groups
 * are the queue's own (claim.lua, groups_lib.lua).
 */
#ifndef RJQ_GROUPS_H
#define RJQ_GROUPS_H

#include "queue.h"

/* rjq_enqueue() of a job with a group (o->group set; o is this library's
 * copy). Codes as rjq_enqueue's. */
int rjq__groups_enqueue(rjq_queue *q, const void *payload, size_t len, const rjq_job_options *o,
                        rjq_enqueue_cb *cb, void *data);

#endif /* RJQ_GROUPS_H */
