/*
 * Job records (plain data, no behaviour): a job as read from a claim reply
 * or a push message (rjq__pushed), and the handle a handler gets (struct
 * rjq_job), made and listed by its worker (worker.c) and finished by
 * job.c (complete, fail, progress).
 */
#ifndef RJQ_JOB_H
#define RJQ_JOB_H

#include <stddef.h>

#include "rjq.h"

/* Bounds of what a reply or message may say (anything else is malformed):
 * a server time or lease end in ms (2^62: no sum or difference with
 * another such time or a lease overflows), and a job's attempt count. */
#define RJQ__TIME_MAX (1LL << 62)
#define RJQ__ATTEMPTS_MAX 1000000

/* A job as Redis handed it out (pointers into the reply or message). */
typedef struct rjq__pushed {
    const char *id, *token, *payload;
    size_t idlen, toklen, len;
    int attempt, max_attempts;
    long long deadline;       /* its lease's end, server time (ms) */
} rjq__pushed;

struct rjq_job {
    rjq_worker *w;            /* NULL once detached (client freed) */
    char *id;
    char token[64];
    const char *payload;
    size_t len;
    int attempt, max_attempts;
    long long deadline;       /* its lease's end when it was handed out, server time (ms) */
    int notice;               /* why it must stop (rjq_job_notice), 0: it may run on */
    struct rjq__tok *tok;     /* its token's record (held.h), while its worker has it */
    struct rjq_job *prev, *next; /* the worker's running jobs */
};

#endif /* RJQ_JOB_H */
