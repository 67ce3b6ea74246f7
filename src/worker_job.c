/*
 * The job handle's public API (worker layer): its accessors, and
 * complete, fail and progress. The worker owns the handle from the moment
 * it is made to the moment it is freed; finishing a job is one hand-over:
 * the handle is checked here, job.c is given the job's id, token and
 * attempt (rjq__finish, copied) and formats and sends the request, and the
 * handle leaves its worker's list and is freed here at once (finish_handle).
 * job.c then reports the request's end through rjq__w_finish_ops, once per
 * request: the worker counts it out of `finishing` (finish_replied).
 *
 * One ownership rule (rjq.h): complete and fail given a handle always
 * release it. A request that cannot be sent (out of memory) leaves the
 * handle on its worker's refused list, whose callbacks the queue's tick
 * calls (refuse); a result that cannot be stored (too big, NULL) or a
 * failure with bad arguments fails the attempt under the job's retry
 * policy, its callback told the cause (rjq__finish.cause). A handle whose
 * client is gone or going (the worker let go of it: w NULL, or a free is
 * pending) is only freed: complete and fail return RJQ_ECLOSED.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "history.h"
#include "worker_private.h"

const char *rjq_job_get_id(const rjq_job *job) {
    return job->id;
}

const void *rjq_job_get_payload(const rjq_job *job, size_t *len) {
    if (len) *len = job->len;
    return job->payload;
}

int rjq_job_get_attempt(const rjq_job *job) {
    return job->attempt;
}

int rjq_job_get_max_attempts(const rjq_job *job) {
    return job->max_attempts;
}

const char *rjq_job_get_token(const rjq_job *job) {
    return job->token;
}

/* The handle the user knows w by: its group's, or its own. */
rjq_worker *rjq_job_get_worker(const rjq_job *job) {
    if (job->w == NULL) return NULL;
    return job->w->g ? job->w->g->m[0] : job->w;
}

rjq_queue *rjq_job_get_queue(const rjq_job *job) {
    return job->w ? job->w->q : NULL;
}

int rjq_job_get_notice(const rjq_job *job) {
    return job->notice;
}

const char *rjq_job_get_header(const rjq_job *job, const char *key) {
    for (size_t i = 0; key && i < job->nheaders; i++)
        if (strcmp(job->headers[i].key, key) == 0) return job->headers[i].value;
    return NULL;
}

int rjq_job_get_header_at(const rjq_job *job, size_t i, const char **key, const char **value) {
    if (i >= job->nheaders) return 0;
    if (key) *key = job->headers[i].key;
    if (value) *value = job->headers[i].value;
    return 1;
}

/* The attempt ends for the handler: rjq_worker_options.on_job_finish, once
 * (the job handle still whole). */
static void finish_hook(rjq_job *job, int failed) {
    void (*fn)(rjq_job *, int, long long, void *) = job->on_finish;
    if (fn == NULL) return;
    job->on_finish = NULL;
    fn(job, failed, (long long)(rjq__now_ms() - job->made_ms), job->hook_data);
}

/* ---- the hand-over ------------------------------------------------------- */

/* The user finished job: it leaves its worker's lists (LOOSE, its token let
 * go of), the worker counts one finish in flight, and claims or offers the
 * slot it freed on the queue's tick (the caller kicks it). An expired job
 * had no slot: its place goes to a job that timed out while the expired
 * were too many. The caller frees the handle or keeps it as refused. */
static void leave_worker(rjq_job *job) {
    rjq_worker *w = job->w;
    RJQ_ASSERT(w != NULL && (job->place == RJQ__JOB_RUNNING || job->place == RJQ__JOB_EXPIRED));
    rjq__w_check(w);
    int expired = job->place == RJQ__JOB_EXPIRED;
    rjq__w_unlink_job(w, job);
    w->finishing++;
    if (expired) {
        for (rjq_job *j = w->jobs; j; j = j->next)
            if (j->notice == RJQ_ETIMEDOUT) {
                rjq__w_expire(w, j);
                break;
            }
        return;
    }
    rjq__w_slot_freed(w);
}

/* Its request is with job.c: the handle is freed at once. */
static void finish_handle(rjq_job *job) {
    leave_worker(job);
    rjq__w_free_job(job);
}

/* Nothing could be sent for job (out of memory): the handle leaves the
 * user all the same, and waits on its worker's refused list for the
 * queue's tick to call cb with code (never from inside the call). The job
 * itself stays active in Redis and comes back after its lease. */
static void refuse(rjq_job *job, int code, rjq_done_cb *cb, void *data) {
    rjq_worker *w = job->w;
    leave_worker(job);
    job->refused = code;
    job->cb = cb;
    job->cb_data = data;
    job->next = w->refused;
    w->refused = job;
    rjq__queue_kick(w->q);
}

void rjq__w_report_refused(rjq_worker *w) {
    rjq_client *c = client_of(w);
    while (w->refused) {
        rjq_job *job = w->refused;
        w->refused = job->next;
        job->next = NULL;
        rjq_done_cb *cb = job->cb;
        void *data = job->cb_data;
        int code = job->refused;
        rjq__w_free_job(job);
        RJQ_ASSERT(w->finishing > 0);
        w->finishing--; /* (the worker is freed by its stop's check, later) */
        if (cb) cb(c, code, data); /* (a free it asks for waits: c stays) */
    }
}

/* (rjq__finish_ops) A finish request of w got its reply. */
static void finish_replied(rjq_worker *w) {
    RJQ_ASSERT(w->finishing > 0);
    w->finishing--;
    if (!rjq__closing(client_of(w))) rjq__w_check_stopped(w);
}

const rjq__finish_ops rjq__w_finish_ops = {finish_replied, rjq__w_offer, rjq__w_offer_done};

/* What job.c is told of job. */
static rjq__finish finish_of(const rjq_job *job) {
    return (rjq__finish){.q = job->w->q, .w = job->w, .ops = &rjq__w_finish_ops,
                         .id = job->id, .token = job->token, .attempt = job->attempt};
}

/* A job whose client is gone or going: release it and say so. */
static int release_closed(rjq_job *job) {
    if (job->w) rjq__w_drop_job(job->w, job);
    else rjq__w_free_job(job);
    return RJQ_ECLOSED;
}

static int closed(const rjq_job *job) {
    RJQ_ASSERT(job->w != NULL || job->place == RJQ__JOB_LOOSE); /* detached: loose */
    return job->w == NULL || !rjq__accepting(client_of(job->w));
}

/* Send the failure of job (cause: see rjq__finish) and release the
 * handle. Sending may flush enqueues, whose callbacks may free the
 * client: then RJQ_ECLOSED (released, cb never called). */
static int send_fail(rjq_job *job, const char *error, int flags, long long retry_delay_ms,
                     int cause, rjq_done_cb *cb, void *data) {
    rjq_queue *q = job->w->q;
    rjq_client *c = rjq_queue_get_client(q);
    rjq__enter(c);
    rjq__finish f = finish_of(job);
    f.cause = cause;
    int rc = rjq__finish_fail(&f, error, flags, retry_delay_ms, cb, data);
    if (rc == RJQ_OK) {
        rjq__history_finished(q, 0, (long long)(rjq__now_ms() - job->made_ms), job->wait_ms);
        finish_handle(job);
        rjq__queue_kick(q);
    } else if (!rjq__accepting(c)) {
        rc = release_closed(job); /* a flushed callback freed the client */
    } else {
        refuse(job, cause ? cause : rc, cb, data);
        rc = RJQ_OK;
    }
    rjq__leave(c);
    return rc;
}

/* ---- the API ------------------------------------------------------------- */

int rjq_job_complete(rjq_job *job, const void *result, size_t len, rjq_done_cb *cb,
                     void *data) {
    if (job == NULL) return RJQ_EINVAL;
    finish_hook(job, (result == NULL && len > 0) ||
                         (job->w && len > rjq__client_max_payload(rjq_queue_get_client(job->w->q))));
    if (closed(job)) return release_closed(job);
    rjq_queue *q = job->w->q;
    rjq_client *c = rjq_queue_get_client(q);
    char why[160];
    int cause = 0; /* a result that cannot be stored: the attempt fails instead */
    if (result == NULL && len > 0) {
        cause = RJQ_EINVAL;
        snprintf(why, sizeof why, "rjq_job_complete: result NULL with length %zu", len);
    } else if (len > rjq__client_max_payload(c)) {
        cause = RJQ_ETOOBIG;
        snprintf(why, sizeof why, "rjq_job_complete: result of %zu bytes exceeds max_payload %zu",
                 len, rjq__client_max_payload(c));
    }
    if (cause) {
        rjq__errmsg(c, "%s", why);
        return send_fail(job, why, RJQ_FAIL_RETRY, -1, cause, cb, data);
    }
    rjq__finish f = finish_of(job);
    int rc = rjq__finish_complete(&f, result, len, cb, data);
    if (rc != RJQ_OK) {
        rjq__errmsg(c, "complete: %s", rjq_strerror(rc));
        refuse(job, rc, cb, data);
        return RJQ_OK;
    }
    rjq__history_finished(q, 1, (long long)(rjq__now_ms() - job->made_ms), job->wait_ms);
    finish_handle(job);
    rjq__queue_kick(q);
    return RJQ_OK;
}

int rjq_job_fail(rjq_job *job, const char *error, int flags, long long retry_delay_ms,
                 rjq_done_cb *cb, void *data) {
    if (job == NULL) return RJQ_EINVAL;
    finish_hook(job, 1);
    if (closed(job)) return release_closed(job);
    int bad_flags = (flags & ~RJQ_FAIL_FATAL) != 0;
    if (bad_flags || retry_delay_ms > RJQ_DELAY_MAX) {
        rjq__errmsg(rjq_queue_get_client(job->w->q),
                    "rjq_job_fail: %s %lld invalid: failed under its retry policy",
                    bad_flags ? "flags" : "retry_delay_ms",
                    bad_flags ? (long long)flags : retry_delay_ms);
        return send_fail(job, error, RJQ_FAIL_RETRY, -1, RJQ_EINVAL, cb, data);
    }
    return send_fail(job, error, flags, retry_delay_ms, 0, cb, data);
}

int rjq_job_report_progress(rjq_job *job, const void *progress, size_t len) {
    if (job == NULL || (progress == NULL && len > 0)) return RJQ_EINVAL;
    if (job->w == NULL) return RJQ_ECLOSED;
    rjq_queue *q = job->w->q;
    rjq_client *c = rjq_queue_get_client(q);
    if (len > rjq__client_max_payload(c)) return RJQ_ETOOBIG;
    rjq__enter(c);
    int rc = rjq__finish_progress(q, job->id, job->token, progress, len);
    rjq__leave(c);
    return rc;
}
