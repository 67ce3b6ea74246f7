/*
 * Push delivery, the worker's side (worker layer): jobs pushed to its
 * registration (push.c) started or handed back, and the slots an idle
 * worker offers with a completion batch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker_private.h"

/* Jobs pushed under epoch: start those there is room for, hand back the
 * others. */
static void take_pushed(void *arg, unsigned epoch, const rjq__pushed *d, size_t n) {
    rjq_worker *w = arg;
    rjq__w_check(w);
    /* registered with the worker's lease: the push was made at deadline - lease */
    if (n) rjq__server_time_sample(client_of(w), d[0].deadline - w->lease_ms);
    rjq_job **jobs = malloc(n * sizeof *jobs);
    rjq__pushed *back = malloc(n * sizeof *back);
    /* jobs pushed without their payload (too big to push): read, as a
     * claim's without payloads are (fetch); those of an unconfirmed push
     * are lease-checked first (a checked fetch) */
    size_t big = 0;
    for (size_t i = 0; i < n; i++) big += d[i].payload == NULL || d[i].check;
    rjq__pushed *f = big ? malloc(big * sizeof *f) : NULL;
    /* the jobs of a message share their token */
    rjq__tok *tok = n ? rjq__tok_new(w->held, d[0].token, d[0].toklen) : NULL;
    if (tok) rjq__tok_pushed(tok); /* (no member in the held index) */
    size_t made = 0, nback = 0, nfetch = 0;
    for (size_t i = 0; i < n; i++) {
        /* (those to read count as running: they take a slot) */
        int can_run = w->running + (int)nfetch < w->concurrency &&
                      (w->g == NULL || rjq__w_group_free(w->g) - (int)nfetch > 0);
        int room = jobs && back && tok && (f || !big) && w->state == W_ACTIVE &&
                   rjq__reg_accept(w->reg, epoch, rjq__w_free_slots(w) - (int)nfetch, can_run);
        if (room && (d[i].payload == NULL || d[i].check)) { /* (unconfirmed: a lease check) */
            f[nfetch++] = d[i];
            continue;
        }
        /* a payload that came as a message of its own (push format 8),
         * the last of its message's, is read in place: the handle takes
         * its bytes rather than a copy (rjq__message_reply) */
        rjq_job *j = room ? rjq__w_new_job_from(w, &d[i], tok, rjq__message_reply(client_of(w), d[i].payload))
                          : NULL;
        if (j) jobs[made++] = j;
        else if (back) back[nback++] = d[i];
    }
    rjq__w_check(w);
    /* (not sent, out of memory: they go back) */
    if (nfetch && rjq__w_fetch(w, tok, f, nfetch) != 0) rjq__push_release(w->q, NULL, f, nfetch);
    free(f);
    /* Out of memory for the list itself: the jobs wait for their lease. */
    if (nback) rjq__push_release(w->q, NULL, back, nback);
    if (tok) rjq__tok_drop(tok); /* the arrival */
    free(back);
    rjq__w_run_jobs(w, jobs, made, 0);
    free(jobs);
    if (rjq__reg_out_of_step(w->reg)) rjq__w_want_claim(w);
    rjq__w_check_stopped(w);
}

static void reg_resync(void *arg) {
    rjq__w_poke(arg); /* the push module marked the registration out of step */
}

static void reg_notice(void *arg, int reason, const char *token, size_t toklen, const char *id,
                       size_t idlen) {
    rjq__w_notice(arg, reason, token, toklen, id, idlen);
}

const rjq__reg_ops rjq__w_reg_ops = {take_pushed, reg_resync, reg_notice};

int rjq__w_offer(rjq_worker *w, rjq__offer *o) {
    rjq__w_check(w);
    /* (a group's member claims instead, its scheduler decides; but a
     * shards group's: group.shards) */
    if (w->wake != WK_OFFER || w->mode == CL_HUNGRY || w->state != W_ACTIVE ||
        rjq__reg_out_of_step(w->reg))
        return 0; /* left to the tick: it claims (WK_OFFER: not rung, no group) */
    rjq__w_wake(w, WE_OFFERED);
    int slots = rjq__w_free_slots(w);
    if (w->g) {
        /* A shard's member: back to its shard's registration go the slots
         * its completions freed, no more (each shard keeps what it had
         * offered). While another member would claim (work waiting, a
         * doorbell heard, its registration in doubt), this one claims as
         * any group's member does (the tick, after this batch): the
         * scheduler gives the freed slots by turns, so a shard whose offers
         * are used up still gets slots. No slot to offer (another
         * member's claim took it meanwhile): it claims too, so a shard
         * whose work waits (held back by a limit: woken by its worker's
         * own completion) is claimed from once a slot frees. */
        if (slots > w->freed) slots = w->freed;
        if (slots <= 0 || rjq__w_group_wants(w->g, w)) {
            rjq__w_want_claim(w);
            return 0;
        }
    }
    if (slots <= 0) return 0;
    o->w = w;
    o->field = rjq__reg_field(w->reg);
    o->lease_ms = w->lease_ms;
    o->slots = slots;
    o->epoch = rjq__reg_offer(w->reg, slots);
    rjq__w_check(w);
    return 1;
}

void rjq__w_offer_done(const rjq__offer *o, int status, int registered) {
    rjq_worker *w = o->w;
    if (rjq__reg_offer_done(w->reg, o->epoch, o->slots, status, registered) &&
        w->state == W_ACTIVE && !rjq__closing(client_of(w)))
        rjq__w_want_claim(w);
}
