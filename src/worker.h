/*
 * Workers (worker.c), as job.c sees them: the worker made the job handle
 * (job.h) and is told when the user finishes it; completions carry the
 * slots an idle worker offers for push delivery.
 */
#ifndef RJQ_WORKER_H
#define RJQ_WORKER_H

#include "job.h"
#include "queue.h"

rjq_queue *rjq__worker_queue(const rjq_worker *w);
/* The handle the user knows w by (a worker of several queues: its first
 * queue's member). */
rjq_worker *rjq__worker_handle(rjq_worker *w);

/* The user finished job (its finish request is queued): it stops running
 * and is freed; the worker counts one finish in flight. */
void rjq__worker_job_done(rjq_job *job);
/* A job handle given back while the client closes: forget and free it. */
void rjq__worker_job_dropped(rjq_worker *w, rjq_job *job);
/* A finish request of w got its reply. */
void rjq__worker_finish_replied(rjq_worker *w);

/* Slots an idle worker offers along with a completion batch. */
typedef struct rjq__offer {
    rjq_worker *w;
    const char *field;        /* its registration (valid while w lives) */
    unsigned epoch;
    long lease_ms;
    int slots;
} rjq__offer;
/* Fill *o and return 1 when w, idle with finished jobs since the last
 * offer, offers its free slots now (they count as registered). */
int rjq__worker_offer(rjq_worker *w, rjq__offer *o);
/* An offer's outcome: status of the call, registered 1/0. */
void rjq__worker_offer_done(const rjq__offer *o, int status, int registered);

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
