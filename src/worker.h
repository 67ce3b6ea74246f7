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

/* A claim's reply (claim.lua): [next due, slots registered, token,
 * deadline, then 4 per job: id, payload (nil: read later), attempt, max
 * attempts]. 1 when it is one for a claim of `asked` jobs with every
 * number and length in range, else 0 (the claim ends with RJQ_EPROTO).
 * Pure, for tests (unit_replies, tests/fuzz). */
int rjq__claim_reply_ok(const redisReply *r, int asked);
/* Job i of a reply rjq__claim_reply_ok accepted; 1 when its payload was
 * left out (nil), else 0. */
int rjq__claim_reply_job(const redisReply *r, size_t i, rjq__pushed *d);

#endif /* RJQ_WORKER_H */
