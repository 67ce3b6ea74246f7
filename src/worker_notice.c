/*
 * Notices (worker layer): a running job must stop (cancelled, timed out):
 * its handler is told once; a timed-out job's slot is freed (expired).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker_private.h"

/* A running job's attempt timed out (its notice: the sweep failed it, or
 * will): it stops counting against the concurrency, so the worker claims
 * a replacement at once, while the handle stays the user's until they
 * finish it (refused then: RJQ_ELEASELOST). Its lease is no longer
 * extended (extend.lua would refuse it); its token stays held, so a
 * recovering claim leaves the job alone. Memory is bounded: at most
 * `concurrency` such handles are outstanding; a job timing out beyond
 * that keeps its slot until one of them is finished (then it is expired,
 * see leave_worker, worker_job.c). A stopping worker still waits for them. */
void rjq__w_expire(rjq_worker *w, rjq_job *j) {
    if (j->place != RJQ__JOB_RUNNING || w->expired >= w->concurrency) return;
    rjq__w_job_move(w, j, RJQ__JOB_EXPIRED);
    rjq__w_check(w);
    if (w->state != W_ACTIVE || rjq__closing(client_of(w))) return;
    rjq__w_slot_freed(w);
    rjq__queue_kick(w->q);
}

/* The running job id held under token must stop: tell its handler, once.
 * (The callback may finish the job, stop the worker or free the client.) */
void rjq__w_notice(rjq_worker *w, int reason, const char *token, size_t toklen,
                       const char *id, size_t idlen) {
    rjq__w_check(w);
    rjq__w_fetch_notice(w, token, toklen, id, idlen);
    for (rjq_job *j = w->jobs; j; j = j->next) {
        if (strncmp(j->token, token, toklen) != 0 || j->token[toklen] != '\0' ||
            strncmp(j->id, id, idlen) != 0 || j->id[idlen] != '\0')
            continue;
        if (j->notice) return;
        j->notice = reason;
        if (reason == RJQ_ETIMEDOUT) rjq__w_expire(w, j); /* before: on_notice may finish it */
        if (w->on_notice) w->on_notice(j, reason, w->data);
        return;
    }
}
