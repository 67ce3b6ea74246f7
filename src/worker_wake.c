/*
 * Wake-ups (worker layer): the doorbell, the poll timer (the next delayed
 * job, a failed claim retried), a resync after a reconnect.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker_private.h"

/* Work is ready: claim (with the registered slots too, see rjq__w_claim())
 * on the queue's tick, behind the completions of this loop turn: a claim
 * sent at once could reach Redis ahead of a completion made earlier in the
 * turn, find its slot still taken under a concurrency limit and be held
 * back with nothing to wake it, while that completion's batch offers
 * nothing (a claim was owed). A doorbell that no claim could answer yet
 * stays pending. */
void rjq__w_poke(rjq_worker *w) {
    rjq__w_wake(w, WE_RING);
    rjq__w_want_claim(w);
}

void rjq__w_resync(rjq_worker *w) {
    rjq__reg_resync(w->reg);
    rjq__w_poke(w);
}

void rjq__w_on_doorbell(rjq_client *c, const char *channel, const char *msg, size_t len,
                        void *arg) {
    part *p = rjq__queue_part(arg, RJQ__PART_WORKERS);
    (void)c, (void)channel, (void)len;
    for (rjq_worker *w = p->workers, *next; w; w = next) {
        next = w->next;
        if (msg == NULL) rjq__w_resync(w); /* (re)subscribed: doorbells may have been missed */
        else rjq__w_poke(w);
    }
}

/* The next delayed job is due, or a failed claim is retried. */
void rjq__w_on_poll_timer(rjq__timer *t) {
    rjq_worker *w = t->owner;
    rjq__w_check(w);
    w->refused_until = 0;
    rjq__reg_resync(w->reg);
    rjq__w_want_claim(w); /* on the tick, as rjq__w_poke's */
}
