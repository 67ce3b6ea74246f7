/*
 * Workers, as the rest of the library and the tests see them: the claim
 * reply's checks (pure). The worker layer (worker_private.h) owns the job
 * handles; job.c finishes jobs for it and reports through its hooks.
 */
#ifndef RJQ_WORKER_H
#define RJQ_WORKER_H

#include "job.h"
#include "queue.h"

/* rjq_worker_start on one queue (shard.c's public call: a sharded queue
 * gets a worker of its shards, rjq_worker_start_queues). */
int rjq__worker_start_one(rjq_queue *q, const rjq_worker_options *opts, rjq_handler_fn *handler,
                          void *data, rjq_worker **out);

/* A worker handle for q whose queues are not known yet (shard.c: q's
 * layout is being read): handler, data and options checked as
 * rjq_worker_start does (*o: the options as this library reads them),
 * nothing made or sent; it counts as a use of q (rjq__queue_use).
 * rjq_worker_stop on it only marks it stopped (and kicks q's tick):
 * rjq__worker_reserved_stopped then says 1. Returns rjq_worker_start's
 * synchronous codes. */
int rjq__worker_reserve(rjq_queue *q, const rjq_worker_options *given, rjq_handler_fn *handler,
                        void *data, rjq_worker_options *o, rjq_worker **out);
int rjq__worker_reserved_stopped(const rjq_worker *w);
/* The order of a sharded queue's worker (shard.c), given to
 * rjq__worker_start_reserved and rjq__worker_start_queues_now: weighted
 * (the weights given), and a member offers back the slots its completions
 * free to its own shard's registration instead of claiming (worker_private.h,
 * group.shards). Never a public order (rjq_worker_start_queues refuses it). */
#define RJQ__WORKER_SHARDS ((rjq_worker_order)2)

/* Start reserved w on queues[0..n-1] (n 1: a worker of that queue; more:
 * of all, in order, weights as rjq_worker_start_queues takes them, NULL:
 * equal), the same handle. RJQ_OK, or RJQ_ENOMEM/RJQ_ECLOSED with w still
 * reserved. */
int rjq__worker_start_reserved(rjq_worker *w, rjq_queue *const *queues, size_t n,
                               rjq_worker_order order, const int *weights,
                               const rjq_worker_options *o);
/* Reserved w becomes a use of q instead of the queue it was reserved on
 * (rjq_worker_stop on it kicks q's tick from now on). */
void rjq__worker_reserved_move(rjq_worker *w, rjq_queue *q);

/* rjq_worker_start_queues' argument checks but the options' (a queue
 * that is a front: RJQ_ESHARDED): RJQ_OK or its code; *out NULL. */
int rjq__worker_queues_ok(rjq_queue *const *queues, size_t n, rjq_worker_order order,
                          const int *weights, rjq_handler_fn *handler, rjq_worker **out);
/* rjq_worker_start_queues on queues whose layouts are known (shard.c's
 * public call holds it while one is being read). */
int rjq__worker_start_queues_now(rjq_queue *const *queues, size_t n, rjq_worker_order order,
                                 const int *weights, const rjq_worker_options *given,
                                 rjq_handler_fn *handler, void *data, rjq_worker **out);
/* End reserved w, never started: its stop callback (when stopped) gets
 * status; freed. */
void rjq__worker_unreserve(rjq_worker *w, int status);

/* A claim's reply (claim.lua, its jobs in runs: ARGV 10 of 2 or 3):
 * [next due, slots registered, token, deadline, then per run of jobs its
 * number of jobs (at least 1), attempt, max attempts (with headers the
 * string "<max>\n<headers>"), wait, then per job of the run: id, payload
 * (nil: read later)]. 1 when it is one for a claim of `asked` jobs that
 * may register `extra` slots beyond those it did not fill, with every
 * number and length in range, else 0 (the claim ends with RJQ_EPROTO).
 * Pure, for tests (unit_replies, tests/fuzz). */
int rjq__claim_reply_ok(const redisReply *r, int asked, int extra);
/* The jobs of a reply rjq__claim_reply_ok accepted. */
size_t rjq__claim_reply_count(const redisReply *r);
/* Where rjq__claim_reply_job is in a reply: zeroed ({0}) before its
 * first job. */
typedef struct rjq__claim_at {
    size_t at, run, left;
} rjq__claim_at;
/* The next job of a reply rjq__claim_reply_ok accepted (call it at most
 * rjq__claim_reply_count times); 1 when its payload was left out (nil),
 * else 0. */
int rjq__claim_reply_job(const redisReply *r, rjq__claim_at *k, rjq__pushed *d);

#endif /* RJQ_WORKER_H */
