/*
 * Job records and finish requests. A job as read from a claim reply or a
 * push message (rjq__pushed, plain data); and job.c, the finisher: it
 * formats and sends a job's finish request (complete, batched per queue
 * and loop turn; fail; progress) and reports its outcome to the job's
 * owner through one hook set (rjq__finish_ops). The job handle itself
 * (struct rjq_job) has one owner, its worker (worker_private.h,
 * worker_job.c): job.c never sees it.
 */
#ifndef RJQ_JOB_H
#define RJQ_JOB_H

#include <stddef.h>

#include "rjq.h"

/* The most attempts a claim reply or push message may give a job (more:
 * malformed); server times are bounded by RJQ__TIME_MAX (core.h). */
#define RJQ__ATTEMPTS_MAX 1000000

/* A job handle's token, with its NUL, is shorter than this (a longer
 * one is refused when the handle is made: rjq__w_new_job). */
#define RJQ__TOKEN_MAX 64

/* A job as Redis handed it out (pointers into the reply or message). */
typedef struct rjq__pushed {
    const char *id, *token, *payload;
    size_t idlen, toklen, len;
    int attempt, max_attempts;
    long long deadline;       /* its lease's end, server time (ms) */
    int check;                /* a push marked unconfirmed (" ?" in its head): the
                               * worker starts it only once the server's state says
                               * its token holds it (worker_fetch.c) */
    long long wait_ms;        /* enqueue to this first start (ms); -1: a later run, or
                                 not known (the history's wait, src/history.c) */
    const char *headers;      /* its headers' text (src/headers.h), as received: */
    size_t hlen;              /* ... read when the handle is made; 0: none */
} rjq__pushed;

/* Slots an idle worker offers along with a completion batch. */
typedef struct rjq__offer {
    rjq_worker *w;
    const char *field;        /* its registration (valid while w lives) */
    unsigned epoch;
    long lease_ms;
    int slots;
} rjq__offer;

/* How job.c reports to the owner of the jobs it finishes (the worker
 * layer), the owner given as w:
 *   replied     a finish request of w got its reply (or failed), once per
 *               request sent, after the user's callback;
 *   offer       a completion of w's joins a batch: fill *o and return 1
 *               when w offers free slots with it (they count as registered);
 *   offer_done  that offer's outcome: status of the call, registered 1/0. */
typedef struct rjq__finish_ops {
    void (*replied)(rjq_worker *w);
    int (*offer)(rjq_worker *w, rjq__offer *o);
    void (*offer_done)(const rjq__offer *o, int status, int registered);
} rjq__finish_ops;

/* One job's finish: which attempt of which job of q (under token), and
 * whom to tell (ops, w). The strings are copied. */
typedef struct rjq__finish {
    rjq_queue *q;
    rjq_worker *w;
    const rjq__finish_ops *ops;
    const char *id, *token;
    int attempt;
    /* A failure that stands in for a refused call (a completion whose
     * result cannot be stored, a failure with bad arguments): its callback
     * gets this code, whatever the failure's outcome. 0: the outcome. */
    int cause;
} rjq__finish;

/* Queue the completion of f's job with its result for the queue's next
 * tick (the caller kicks it); cb as rjq_job_complete() says. A queue's
 * completions all give the same f->ops (asserted: one batch, one owner).
 * RJQ_OK, or RJQ_ENOMEM / RJQ_EINVAL (nothing queued, cb never called). */
int rjq__finish_complete(const rjq__finish *f, const void *result, size_t len, rjq_done_cb *cb,
                         void *data);
/* Send the failure of f's job now (as rjq_job_fail() says). RJQ_OK, or
 * the code the send failed with (nothing sent, cb never called). */
int rjq__finish_fail(const rjq__finish *f, const char *error, int flags, long long retry_delay_ms,
                     rjq_done_cb *cb, void *data);
/* Record progress for job id of q under token (no reply awaited). */
int rjq__finish_progress(rjq_queue *q, const char *id, const char *token, const void *progress,
                         size_t len);

#endif /* RJQ_JOB_H */
