/*
 * Enqueue (enqueue.c), as the await feature uses it: one job added to its
 * queue's batch with an internal callback for its result.
 */
#ifndef RJQ_ENQUEUE_H
#define RJQ_ENQUEUE_H

#include "queue.h"
#include "validate.h"

/* Bytes of arguments one enqueue script call carries at most, unless a
 * single rjq_enqueue_batch() needs more (a batch lands whole). 1 MiB: with
 * 16 KiB payloads, calls of 4 MiB took 17% more Redis CPU per job than
 * calls of 1 MiB or 256 KiB (memory churn of big calls; bench, issue 18). */
#define RJQ__ENQUEUE_BYTES (1u << 20)

/* One job's enqueue result, for internal callers. */
typedef void rjq__enqueued_fn(rjq_client *c, int status, const char *id, size_t idlen,
                              int existed, void *priv);

/* Check one enqueue item for queue q; opts receives its encoded options
 * (RJQ__OPTS_MAX bytes; the queue's job_timeout_ms for a job that gives
 * none). Sets the client's errmsg on failure. */
int rjq__enqueue_check(rjq_queue *q, const rjq_enqueue_item *it, char *opts);

/* rjq__enqueue_check of a job that may have a group (an item of a batch,
 * an rjq_enqueue()): its group must be a valid name, without a debounce
 * or dependencies (else RJQ_EINVAL, errmsg set); the rest is checked as
 * rjq__enqueue_check does. */
int rjq__enqueue_check_grouped(rjq_queue *q, const rjq_enqueue_item *it, char *opts);
/* The caller's job options (NULL: defaults) as this library reads them
 * (rjq.h "Extensible structs"): *out is NULL or copy. RJQ_EINVAL (errmsg
 * set) for a size it does not read. */
int rjq__job_options_in(rjq_client *c, const rjq_job_options *given, rjq_job_options *copy,
                        const rjq_job_options **out);
/* Add one job to this tick's batch. reply_channel: where the finishing
 * script publishes its outcome (NULL: nowhere). fn(priv) gets the result
 * once. RJQ_OK, or an error with nothing added and fn never called. */
/* rjq_enqueue and rjq_enqueue_batch on one queue (shard.c's public calls
 * pick the queue: a shard of a sharded queue, or q itself). */
int rjq__enqueue_one(rjq_queue *q, const void *payload, size_t len, const rjq_job_options *opts,
                     rjq_enqueue_cb *cb, void *data);
int rjq__enqueue_batch_one(rjq_queue *q, const rjq_enqueue_item *items, size_t n,
                           rjq_enqueue_cb *cb, void *data);
int rjq__enqueue_add(rjq_queue *q, const rjq_enqueue_item *it, const char *reply_channel,
                     rjq__enqueued_fn *fn, void *priv);

/* Whether one of q's enqueue calls is in flight (an enqueue on q made now
 * is held back for its reply and goes in the call after *sent: "Self-
 * clocking" in src/enqueue.c), and in *sent how many enqueue calls q's
 * handle has made. */
int rjq__enqueue_calls(rjq_queue *q, unsigned long *sent);

/* Made ids (docs/sharding.md 6a): the jobs added until the next call whose
 * ids are ids[0], ids[stride], ... ids[(n - 1) * stride] (n 1: any equal
 * copy, as an await's) have ids the library made for them alone (a
 * sharded queue's anonymous jobs), so the script writes them as new
 * without looking them up (src/enqueue.c "Made ids"). ids NULL: none.
 * The caller says none again before those ids' memory goes. */
void rjq__enqueue_made_ids(rjq_client *c, const char *ids, size_t n, size_t stride);

/* q's producers learnt the index declaration `fields` (len bytes, as
 * stored: rjq__valid_index_fields; rjq_queue_set_index's own handle).
 * Nothing on a handle that never enqueued (its first enqueue reads it). */
void rjq__enqueue_index_learnt(rjq_queue *q, const char *fields, size_t len);

#endif /* RJQ_ENQUEUE_H */
