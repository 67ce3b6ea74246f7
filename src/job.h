/*
 * Job records (plain data, no behaviour): a job as read from a claim reply
 * or a push message (rjq__pushed), and the handle a handler gets (struct
 * rjq_job), made and listed by its worker (worker_state.c) and finished by
 * job.c (complete, fail, progress).
 */
#ifndef RJQ_JOB_H
#define RJQ_JOB_H

#include <stddef.h>

#include "rjq.h"

/* The most attempts a claim reply or push message may give a job (more:
 * malformed); server times are bounded by RJQ__TIME_MAX (core.h). */
#define RJQ__ATTEMPTS_MAX 1000000

/* A job as Redis handed it out (pointers into the reply or message). */
typedef struct rjq__pushed {
    const char *id, *token, *payload;
    size_t idlen, toklen, len;
    int attempt, max_attempts;
    long long deadline;       /* its lease's end, server time (ms) */
} rjq__pushed;

/* A job handle's place in its worker, changed only by the worker's
 * rjq__w_job_move (worker_state.c), which asserts the transition:
 *   NEW     -> RUNNING (handed out)
 *   RUNNING -> EXPIRED (its attempt timed out: its slot freed), LOOSE
 *   EXPIRED -> LOOSE
 *   LOOSE: none (the user finished it, or its worker let go of it: then
 *          w is NULL, or the handle is freed at once) */
typedef enum rjq__job_place {
    RJQ__JOB_NEW,             /* being made: on no list */
    RJQ__JOB_RUNNING,         /* on its worker's running list, in a slot */
    RJQ__JOB_EXPIRED,         /* on its worker's expired list, no slot */
    RJQ__JOB_LOOSE,           /* on no list any more */
} rjq__job_place;

struct rjq_job {
    rjq_worker *w;            /* NULL once detached (client freed) */
    char *id;
    char token[64];
    const char *payload;
    size_t len;
    int attempt, max_attempts;
    long long deadline;       /* its lease's end when it was handed out, server time (ms) */
    int notice;               /* why it must stop (rjq_job_notice), 0: it may run on */
    rjq__job_place place;     /* which of its worker's lists holds it (rjq__w_job_move) */
    struct rjq__tok *tok;     /* its token's record (held.h), while its worker has it */
    struct rjq_job *prev, *next; /* the worker's running jobs */
};

#endif /* RJQ_JOB_H */
