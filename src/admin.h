/*
 * Administration (admin.c): the calls on one queue's keys. shard.c's
 * public calls pick the queue (a sharded queue's shards, or q itself).
 */
#ifndef RJQ_ADMIN_H
#define RJQ_ADMIN_H

#include "queue.h"

/* rjq_queue_get_stats on one queue (refuses a front: RJQ_ESHARDED). */
int rjq__queue_stats_one(rjq_queue *q, rjq_stats_cb *cb, void *data);

/* The public calls of the same names (rjq.h) on one queue (each refuses a
 * front: RJQ_ESHARDED); shard.c routes a sharded queue's to its shards. */
int rjq__queue_cancel_one(rjq_queue *q, const char *id, rjq_cancel_cb *cb, void *data);
int rjq__queue_job_one(rjq_queue *q, const char *id, rjq_job_info_cb *cb, void *data);
int rjq__queue_replay_one(rjq_queue *q, const char *id, long limit, rjq_count_cb *cb,
                          void *data);
int rjq__queue_delete_one(rjq_queue *q, const char *id, rjq_count_cb *cb, void *data);
int rjq__queue_promote_one(rjq_queue *q, const char *id, rjq_count_cb *cb, void *data);
int rjq__queue_purge_one(rjq_queue *q, rjq_job_state state, long limit, rjq_count_cb *cb,
                         void *data);
int rjq__queue_reclaim_one(rjq_queue *q, rjq_count_cb *cb, void *data);
int rjq__queue_pause_one(rjq_queue *q, rjq_count_cb *cb, void *data);
int rjq__queue_resume_one(rjq_queue *q, rjq_count_cb *cb, void *data);
/* rjq_queue_set_format on one queue (or shard): qformat.lua */
int rjq__queue_format_one(rjq_queue *q, int format, rjq_count_cb *cb, void *data);
int rjq__queue_limits_one(rjq_queue *q, const rjq_limits *l, rjq_count_cb *cb, void *data);
/* The same on a shard, fenced by epoch (>= 0; -1: none, as _one): refused
 * by the shard when it holds a newer epoch (limits.lua), cb's n then 0
 * (1 when written). */
int rjq__queue_limits_fenced(rjq_queue *q, const rjq_limits *l, long long epoch, rjq_count_cb *cb,
                             void *data);
int rjq__queue_jobs_one(rjq_queue *q, rjq_job_state state, long offset, long limit,
                        rjq_ids_cb *cb, void *data);
int rjq__queue_dead_one(rjq_queue *q, long offset, long limit, rjq_ids_cb *cb, void *data);

/* A cursor of HSCAN (search.lua, index.lua fill): 1..20 digits (its
 * cursors are unsigned 64-bit). */
int rjq__hscan_cursor_ok(const char *s, size_t len);

/* The matches of a search or find reply: r->element[3..] as id, state
 * pairs (each id 1..RJQ_JOB_ID_MAX bytes without a NUL, each state a
 * state word), checked and put in *out (malloc'ed, NULL when none; the
 * strings point into r). RJQ_OK, RJQ_EPROTO (the pairs are not that) or
 * RJQ_ENOMEM. */
int rjq__search_matches(const redisReply *r, rjq_search_match **out, size_t *n);

#endif
