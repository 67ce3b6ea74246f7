/*
 * Job dependencies (deps.c; rjq.h "Dependencies"): the enqueue of a job
 * with `after`, and the releases a finishing client carries to the
 * dependents of the jobs it finished. A feature: job.c and admin.c tell
 * it which jobs finished with dependents; it calls nothing of theirs.
 */
#ifndef RJQ_DEPS_H
#define RJQ_DEPS_H

#include "queue.h"

/* rjq_enqueue() of a job with dependencies (o->n_after > 0; o is this
 * library's copy). Codes as rjq_enqueue's. */
int rjq__deps_enqueue(rjq_queue *q, const void *payload, size_t len, const rjq_job_options *o,
                      rjq_enqueue_cb *cb, void *data);

/* RJQ_OK when o's dependencies (o->after, n_after, after_policy) are
 * well formed, else RJQ_EINVAL with the client's errmsg saying why. */
int rjq__deps_check(rjq_client *c, const rjq_job_options *o);

/* A copy of the n dependencies a (names and ids included) in one block
 * (free() it); NULL when out of memory. */
rjq_dep *rjq__deps_dup(const rjq_dep *a, size_t n);

/* Jobs ids (lens[i] bytes each) of q finished and have dependents to
 * release: release them (fire and forget: what fails stays recorded in
 * q's dependents column, for the sweep). */
void rjq__deps_notify(rjq_queue *q, const char *const *ids, const size_t *lens, size_t n);

/* A finished job with dependents, as its finishing script told it: its id
 * (idlen bytes), how it ended ("completed", "dead", "cancelled" or
 * "missing"), its dependents entry ("<queue> <id>" lines, llen bytes). */
typedef struct rjq__deps_finished {
    const char *id;
    size_t idlen;
    const char *outcome;
    const char *list;
    size_t llen;
} rjq__deps_finished;

/* Release the dependents of the n finished jobs f of q (a call per
 * dependents' queue, then deps_done for the jobs all of whose releases
 * went through; fire and forget: what fails stays recorded, for the
 * sweep). For a completion, whose reply carries the entries. */
void rjq__deps_release(rjq_queue *q, const rjq__deps_finished *f, size_t n);

/* Whether reply r's elements from `first` on are (id, dependents entry)
 * pairs, to its end: an even count of them, each id a string of 1 to
 * RJQ_JOB_ID_MAX bytes, each entry a string (r: an array). 0 otherwise. */
int rjq__deps_entries_ok(const redisReply *r, size_t first);

/* Release the dependents of the jobs whose (id, entry) pairs reply r
 * carries from element `first` on (rjq__deps_entries_ok checked them): the
 * first `nown` pairs' jobs ended `outcome`, the rest "dead" (jobs the
 * finishing script buried by their policy 'fail'). As rjq__deps_release:
 * for the scripts that finish or delete jobs (complete, fail, cancel,
 * reclaim, orphans, delete) and carry those of other queues in their
 * replies (nown (size_t)-1: every pair's job ended `outcome`). */
void rjq__deps_release_entries(rjq_queue *q, const redisReply *r, size_t first, size_t nown,
                               const char *outcome);

/* The sweep: release the dependents of every finished job of q whose
 * list is still recorded (its finisher died before it told them, or a
 * release failed): a scan of q's dependents column, a page per call. Run
 * by the periodic visit of a queue (upkeep.c) when the reclaim sweep says
 * the column exists (the sweeper that holds its guard: one per period;
 * a long scan that overlaps the next one repeats releases, which change
 * nothing). */
void rjq__deps_sweep(rjq_queue *q);

/* The resume sweep: register again the jobs of q waiting for their
 * dependencies whose registration is due (deps_resume.lua: their
 * enqueuing client may have died before it registered them), a page of
 * 100 per call. Run by the periodic visit of q (upkeep.c) when the reclaim
 * sweep says some are due. */
void rjq__deps_resume(rjq_queue *q);

/* How a registration (rjq__deps_watch) went: status RJQ_OK with outcome
 * NULL (registered: the job's finisher will tell the dependent) or how
 * the job had ended ("completed", "dead", "cancelled", "missing": the
 * caller counts it), or an error (nothing known). */
typedef void rjq__deps_watch_cb(rjq_client *c, int status, const char *outcome, void *priv);

/* Register dependent dep_id of `entry` (its queue's name, or "{b}<batch
 * queue>" for a batch: batch.c) with job did of queue on (deps_watch.lua).
 * Gathered: the registrations of one loop turn go in one call per queue
 * on (before any later request of the client). RJQ_OK (cb called once
 * later) or RJQ_ENOMEM / RJQ_ECLOSED (never called). */
int rjq__deps_watch(rjq_queue *on, const char *did, const char *entry, const char *dep_id,
                    rjq__deps_watch_cb *cb, void *priv);

/* The client's handle of queue `name` (len bytes), opened when it has
 * none (the library's own, freed with the client); NULL when it is no
 * queue name or out of memory. */
rjq_queue *rjq__deps_queue(rjq_client *c, const char *name, size_t len);

/* rjq_queue_get_dependencies and rjq_queue_get_dependents on one queue
 * (deps_read.c; a front refused: RJQ_ESHARDED); shard.c routes a sharded
 * queue's to the id's shard, after it checked q, cb and id. Codes as
 * theirs. */
int rjq__queue_dependencies_one(rjq_queue *q, const char *id, rjq_dependencies_cb *cb,
                                void *data);
int rjq__queue_dependents_one(rjq_queue *q, const char *id, rjq_dependents_cb *cb, void *data);
/* (rjq_queue_get_job_deps on one queue, likewise) */
int rjq__queue_job_deps_one(rjq_queue *q, const char *id, rjq_job_deps_cb *cb, void *data);

#endif /* RJQ_DEPS_H */
