/*
 * A worker's stop and end (worker layer): rjq__w_stop, the check that
 * finishes a stop once nothing of the worker is in flight (with its last
 * recovering claim), the end of a worker with its client, handing running
 * jobs back, and its background requests' replies.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker_private.h"

static void unlink_worker(rjq_worker *w) {
    part *p = rjq__queue_part(w->q, RJQ__PART_WORKERS);
    for (rjq_worker **pp = &p->workers; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            break;
        }
}

/* Out of its queue's list, its timers and registration gone; the memory
 * itself is freed by the caller (after the stop callback). */
void rjq__w_detach(rjq_worker *w) {
    rjq_client *c = client_of(w);
    unlink_worker(w);
    rjq__queue_unuse(w->q); /* (used by make_worker) */
    rjq__timer_teardown(c, &w->poll_timer);
    rjq__timer_teardown(c, &w->extend_timer);
    rjq__push_free(w->reg);
    w->reg = NULL;
    rjq__held_leave(w->held);
    w->held = NULL;
}

/* A member has stopped (status RJQ_OK) or went with its client
 * (RJQ_ECANCELED), detached: once the last one has, the stop callback gets
 * the group's handle, then the members and the group are freed. */
static void group_gone(group *g, int status) {
    if (status != RJQ_OK) g->status = status;
    if (--g->alive > 0) return;
    if (g->stop_cb) g->stop_cb(g->m[0], g->status, g->stop_data);
    for (int i = 0; i < g->n; i++) free(g->m[i]);
    free(g);
}

/* Finish a stop once nothing of the worker is in flight. Once its
 * registration is gone (no push is made for it any more), a recovering
 * claim that takes nothing hands back every job pushed to it that it
 * never heard of (lost with the subscriber connection, or still on the
 * way: those are then handed back on arrival, token-checked), attempt
 * undone, instead of leaving them to their lease. */
void rjq__w_check_stopped(rjq_worker *w) {
    rjq__w_check(w);
    if (w->state == W_ACTIVE || w->claiming || w->fetching || w->deregister.busy) return;
    if (w->state == W_STOPPING && !rjq__closing(client_of(w))) {
        rjq__w_set_state(w, W_FINAL); /* once: a failed one leaves them to their lease */
        rjq__reg_lost(w->reg);
        if (w->recover(w) == RJQ_OK) return; /* its reply comes back here */
    }
    if (w->running || w->expired || w->finishing || w->extend.busy) return;
    rjq__w_detach(w);
    if (w->g) {
        group_gone(w->g, RJQ_OK);
        return;
    }
    if (w->stop_cb) w->stop_cb(w, RJQ_OK, w->stop_data);
    free(w);
}

/* Client destruction: running jobs are detached (the user still holds
 * them; complete/fail release them), a pending stop is cancelled. */
void rjq__w_destroy(rjq_worker *w) {
    rjq__w_let_go(w);
    rjq__w_detach(w);
    if (w->g) {
        group_gone(w->g, RJQ_ECANCELED);
        return;
    }
    if (w->state != W_ACTIVE && w->stop_cb) w->stop_cb(w, RJQ_ECANCELED, w->stop_data);
    free(w);
}

/* A background request (priv: its background) was answered: report a
 * failure, and see whether a stopping worker is done. */
void rjq__w_background_done(rjq_client *c, int status, redisReply *r, void *priv) {
    background *b = priv;
    (void)r;
    RJQ_ASSERT(b->busy > 0);
    b->busy--;
    rjq__background_failed(c, status, b->what);
    if (!rjq__closing(c)) rjq__w_check_stopped(b->w);
}

static void on_left_waiters(rjq_client *c, int status, redisReply *r, void *priv) {
    (void)r, (void)priv;
    rjq__background_failed(c, status, "worker stop");
}

/* Stop: no more claims or pushes; cb (may be NULL) once nothing is in flight. */
void rjq__w_stop(rjq_worker *w, rjq_stopped_cb *cb, void *data) {
    rjq_client *c = client_of(w);
    /* No more pushes: drop the registration (jobs pushed meanwhile are
     * handed back as they arrive). */
    if (rjq__push_leave(w->reg, rjq__w_background_done, &w->deregister) == RJQ_OK)
        w->deregister.busy++;
    /* Nor a place among the waiters for a slot of a limited queue
     * (claim.lua): the slots are not left to it */
    size_t klen;
    const char *key = rjq__queue_key(w->q, RJQ__K_WAITERS, &klen);
    const char *field = w->reg ? rjq__reg_field(w->reg) : NULL;
    const char *argv[3] = {"HDEL", key, field};
    size_t lens[3] = {4, klen, field ? strlen(field) : 0};
    if (field) rjq__command(c, 0, on_left_waiters, NULL, 3, argv, lens); /* (failed: its grace ends it) */
    rjq__w_set_state(w, W_STOPPING);
    w->stop_cb = cb;
    w->stop_data = data;
    /* Running jobs keep their lease extension until they finish. */
    rjq__timer_stop(c, &w->poll_timer);
    rjq__queue_kick(w->q); /* the tick finishes the stop if nothing is in flight */
}

/* Hand w's running jobs back to the queue (attempt not counted) and let
 * go of their handles: the user's complete/fail then returns ECLOSED. */
size_t rjq__w_hand_back(rjq_worker *w) {
    size_t n = 0;
    for (rjq_job *j = w->jobs; j; j = j->next) n++;
    rjq__pushed *back = n ? malloc(n * sizeof *back) : NULL;
    size_t k = 0;
    for (rjq_job *j = w->jobs; back && j; j = j->next) back[k++] = rjq__w_job_ref(j);
    size_t sent = k && rjq__push_release(w->q, NULL, back, k) == RJQ_OK ? k : 0;
    free(back); /* not sent (out of memory): they come back after their lease */
    /* expired ones are not handed back (their timeout's failure stands):
     * only let go of */
    rjq__w_let_go(w);
    rjq__w_check_stopped(w);
    return sent;
}
