/*
 * Job groups (groups.c; README "Groups", rjq.h "Job groups"): the groups'
 * settings and listing. (The enqueue of jobs with a group is enqueue.c's,
 * batched into genqueue.lua calls; the claims that serve the groups are
 * the queue's own: claim.lua, groups_lib.lua.)
 */
#ifndef RJQ_GROUPS_H
#define RJQ_GROUPS_H

#include "queue.h"

/* rjq_queue_set_group_limits, rjq_queue_limit_group (l: the caller's
 * struct read in whole, rjq__sized_in), rjq_queue_pause_group and
 * rjq_queue_list_groups on one queue (a front refused: RJQ_ESHARDED);
 * shard_groups.c makes the public calls, routed over a sharded queue's
 * shards. Arguments and codes as theirs. */
int rjq__groups_set_limits(rjq_queue *q, const char *group, int concurrency, int weight,
                           rjq_count_cb *cb, void *data);
int rjq__groups_limit(rjq_queue *q, const char *group, const rjq_group_limits *l, rjq_count_cb *cb,
                      void *data);
int rjq__groups_pause(rjq_queue *q, const char *group, int paused, rjq_count_cb *cb, void *data);
int rjq__groups_list(rjq_queue *q, const char *group, long offset, long count, rjq_groups_cb *cb,
                     void *data);

#endif /* RJQ_GROUPS_H */
