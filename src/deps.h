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

/* The client's handle of queue `name` (len bytes), opened when it has
 * none (the library's own, freed with the client); NULL when it is no
 * queue name or out of memory. */
rjq_queue *rjq__deps_queue(rjq_client *c, const char *name, size_t len);

#endif /* RJQ_DEPS_H */
