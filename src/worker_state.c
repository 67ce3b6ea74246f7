/*
 * A worker's state (worker layer, see worker_private.h): its lifecycle and
 * claim mode and a job handle's place, each changed by one function that
 * asserts the transition; the invariants (rjq__w_check); its slots; its
 * job handles, their lists, and handing them to the handler.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "headers.h"
#include "replyarena.h"
#include "worker_private.h"

/* The group's slots in use (registered ones excluded). */
int rjq__w_group_used(const group *g) {
    int used = 0;
    for (int i = 0; i < g->n; i++) used += g->m[i]->running + g->m[i]->asked + g->m[i]->fetching;
    return used;
}

/* The counts balance the lists: running and expired jobs, each on its
 * place's list; claims and fetches in flight (a walk: test builds only). */
static void check_lists(const rjq_worker *w) {
#ifdef RJQ_ASSERTS
    int n = 0, asked = 0, extra = 0, ids_only = 0, fetching = 0;
    for (int k = 0; k < 2; k++) {
        n = 0;
        for (const rjq_job *j = k ? w->expired_jobs : w->jobs; j; j = j->next, n++)
            RJQ_ASSERT(j->w == w && j->place == (k ? RJQ__JOB_EXPIRED : RJQ__JOB_RUNNING) &&
                       (j->next == NULL || j->next->prev == j));
        RJQ_ASSERT(n == (k ? w->expired : w->running));
    }
    n = 0;
    for (const claim_ctx *x = w->claims; x; x = x->next, n++) {
        RJQ_ASSERT(x->w == w && (x->next == NULL || x->next->prev == x));
        asked += x->asked;
        extra += x->extra;
        ids_only += x->ids_only;
    }
    RJQ_ASSERT(n == w->claiming && asked == w->asked && extra == w->registering);
    for (const fetch *f = w->fetches; f; f = f->next, ids_only++) {
        RJQ_ASSERT(f->w == w && (f->next == NULL || f->next->prev == f));
        fetching += (int)f->n;
    }
    RJQ_ASSERT(fetching == w->fetching && ids_only == w->ids_only);
#else
    (void)w;
#endif
}

void rjq__w_check(const rjq_worker *w) {
    RJQ_ASSERT(w->state == W_ACTIVE || w->state == W_STOPPING || w->state == W_FINAL);
    RJQ_ASSERT(w->mode == CL_IDLE || w->mode == CL_HUNGRY);
    RJQ_ASSERT(w->wake >= WK_NONE && w->wake <= WK_RUNG_CLAIM);
    /* (a group's scheduler claims; a shards group's members offer) */
    RJQ_ASSERT(w->wake != WK_OFFER || w->g == NULL || w->g->shards);
    RJQ_ASSERT(w->g == NULL || (w->g->sched >= GS_REST && w->g->sched <= GS_RUNNING_KICKED));
    RJQ_ASSERT(w->running >= 0 && w->finishing >= 0);
    RJQ_ASSERT(w->expired >= 0 && w->expired <= w->concurrency);
    RJQ_ASSERT(w->g == NULL || rjq__w_group_used(w->g) <= w->g->concurrency);
    RJQ_ASSERT(w->claiming >= 0 && w->claiming <= CLAIMS_IN_FLIGHT);
    RJQ_ASSERT(w->asked >= 0 && (w->claiming > 0 || w->asked == 0));
    RJQ_ASSERT(w->registering >= 0 && (w->claiming > 0 || w->registering == 0));
    RJQ_ASSERT(w->fetching >= 0 && w->ids_only >= 0);
    RJQ_ASSERT(w->running + w->asked + w->registering + w->fetching + rjq__reg_offered(w->reg) <=
               w->concurrency);
    RJQ_ASSERT(w->extend.busy >= 0 && w->deregister.busy >= 0);
    RJQ_ASSERT(w->state != W_ACTIVE || w->deregister.busy == 0); /* (sent by stop) */
    RJQ_ASSERT(w->reg != NULL && w->held != NULL);               /* (until detach) */
    check_lists(w);
}

/* Change w's lifecycle state (see wstate for the legal transitions). */
void rjq__w_set_state(rjq_worker *w, wstate to) {
    RJQ_ASSERT((w->state == W_ACTIVE && to == W_STOPPING) ||
               (w->state == W_STOPPING && to == W_FINAL));
    w->state = to;
}

/* Change the claim loop's mode: hungry only while active. */
void rjq__w_set_mode(rjq_worker *w, cmode to) {
    RJQ_ASSERT(to == CL_IDLE || (to == CL_HUNGRY && w->state == W_ACTIVE));
    w->mode = to;
}

/* Its own free slots (its registered ones taken, and those its claims in
 * flight register), not counting the group's. */
int rjq__w_own_free(const rjq_worker *w) {
    return w->concurrency - w->running - w->asked - w->registering - w->fetching -
           rjq__reg_offered(w->reg);
}

int rjq__w_group_free(const group *g) {
    return g->concurrency - rjq__w_group_used(g);
}

int rjq__w_free_slots(const rjq_worker *w) {
    int n = rjq__w_own_free(w);
    if (w->g && rjq__w_group_free(w->g) < n) n = rjq__w_group_free(w->g);
    return n;
}

int rjq__w_rung(const rjq_worker *w) {
    return w->wake == WK_RUNG || w->wake == WK_RUNG_CLAIM;
}

/* The state event ev leads to from `from` (wwake's table), -1: illegal. */
static int wake_next(const rjq_worker *w, wwake from, wevent ev) {
    int rung = from == WK_RUNG || from == WK_RUNG_CLAIM;
    switch (ev) {
    case WE_RING:
        return from == WK_NONE || from == WK_RUNG ? WK_RUNG : WK_RUNG_CLAIM;
    case WE_FREED:
        if (rung) return WK_RUNG_CLAIM;
        if (w->mode == CL_HUNGRY || (w->g != NULL && !w->g->shards)) return WK_CLAIM;
        return from == WK_NONE ? WK_OFFER : (int)from;
    case WE_WANT:
        return rung ? WK_RUNG_CLAIM : WK_CLAIM;
    case WE_SENT:
        return from == WK_RUNG ? WK_NONE : from == WK_RUNG_CLAIM ? WK_CLAIM : (int)from;
    case WE_TICK:
        return rung ? WK_RUNG : WK_NONE;
    case WE_OFFERED:
        return from == WK_OFFER ? WK_NONE : -1;
    }
    return -1;
}

int rjq__w_wake(rjq_worker *w, wevent ev) {
    wwake from = w->wake;
    int to = wake_next(w, from, ev);
    RJQ_ASSERT(to >= WK_NONE && to <= WK_RUNG_CLAIM);
    /* an offer only while nothing rang and no group's scheduler decides */
    RJQ_ASSERT(to != WK_OFFER || ((from == WK_NONE || from == WK_OFFER) &&
                                  (w->g == NULL || w->g->shards)));
    if (to == WK_OFFER && from != WK_OFFER) w->freed = 0;
    w->wake = (wwake)to;
    return ev == WE_TICK && from != WK_NONE && from != WK_RUNG;
}

int rjq__w_group_sched(group *g, gevent ev) {
    gsched from = g->sched;
    int running = from == GS_RUNNING || from == GS_RUNNING_KICKED;
    int kicked = from == GS_KICKED || from == GS_RUNNING_KICKED;
    switch (ev) {
    case GE_KICK:
        g->sched = running ? GS_RUNNING_KICKED : GS_KICKED;
        return 1;
    case GE_TICK:
        RJQ_ASSERT(!running); /* (the scheduler's claims do not tick) */
        g->sched = GS_REST;
        return kicked;
    case GE_ENTER:
        if (running) return 0; /* no re-entry: the run under way sees the change */
        g->sched = kicked ? GS_RUNNING_KICKED : GS_RUNNING;
        return 1;
    case GE_LEAVE:
        RJQ_ASSERT(running);
        g->sched = kicked ? GS_KICKED : GS_REST;
        return 1;
    }
    RJQ_ASSERT(0);
    return 0;
}

void rjq__w_want_claim(rjq_worker *w) {
    rjq__w_wake(w, WE_WANT);
    rjq__queue_kick(w->q);
}

void rjq__w_slot_freed(rjq_worker *w) {
    rjq__w_wake(w, WE_FREED);
    if (w->wake == WK_OFFER) w->freed++;
}

static void list_add(rjq_job **head, rjq_job *j) {
    RJQ_ASSERT(j->prev == NULL && j->next == NULL && *head != j); /* on no list */
    j->prev = NULL;
    j->next = *head;
    if (*head) (*head)->prev = j;
    *head = j;
}

static void list_remove(rjq_job **head, rjq_job *j) {
    /* j is on this list: its neighbours (or the head) point at it */
    RJQ_ASSERT(j->prev ? j->prev->next == j : *head == j);
    RJQ_ASSERT(j->next == NULL || j->next->prev == j);
    if (j->prev) j->prev->next = j->next;
    else *head = j->next;
    if (j->next) j->next->prev = j->prev;
    j->prev = j->next = NULL;
}

/* Move job j of w to place `to` (job.h: rjq__job_place has the legal
 * transitions): off its list and count, onto the new place's. */
void rjq__w_job_move(rjq_worker *w, rjq_job *j, rjq__job_place to) {
    RJQ_ASSERT(j->w == w);
    RJQ_ASSERT((j->place == RJQ__JOB_NEW && to == RJQ__JOB_RUNNING) ||
               (j->place == RJQ__JOB_RUNNING && (to == RJQ__JOB_EXPIRED || to == RJQ__JOB_LOOSE)) ||
               (j->place == RJQ__JOB_EXPIRED && to == RJQ__JOB_LOOSE));
    if (j->place == RJQ__JOB_RUNNING) {
        list_remove(&w->jobs, j);
        w->running--;
    } else if (j->place == RJQ__JOB_EXPIRED) {
        list_remove(&w->expired_jobs, j);
        w->expired--;
    }
    j->place = to;
    if (to == RJQ__JOB_RUNNING) {
        list_add(&w->jobs, j);
        w->running++;
    } else if (to == RJQ__JOB_EXPIRED) {
        list_add(&w->expired_jobs, j);
        w->expired++;
    }
}

/* A running job (tok: the record of its token, which it holds). */
rjq_job *rjq__w_new_job_from(rjq_worker *w, const rjq__pushed *d, rjq__tok *tok, redisReply *from) {
    if (tok == NULL || d->toklen >= sizeof(((rjq_job *)0)->token)) return NULL;
    /* (taken: a string of its own allocation, NUL-ended as the copies are;
     * only once the handle is made, so a failure leaves the reply whole) */
    int take = from && from->type == REDIS_REPLY_STRING && from->str == d->payload &&
               (size_t)from->len == d->len && d->len >= RJQ__REPLY_OWN_MIN;
    rjq_job *j = malloc(sizeof *j + d->idlen + 1 + (take ? 0 : d->len + 1));
    if (j == NULL) return NULL;
    char *mem = (char *)(j + 1);
    j->w = w;
    j->id = mem;
    memcpy(mem, d->id, d->idlen);
    mem[d->idlen] = '\0';
    memcpy(j->token, d->token, d->toklen);
    j->token[d->toklen] = '\0';
    j->own_payload = NULL;
    if (take) {
        /* (replyarena.h: such a string can be taken) */
        if ((j->own_payload = rjq__reply_take_str(from)) == NULL) {
            free(j);
            return NULL;
        }
        j->payload = j->own_payload;
    } else {
        j->payload = mem + d->idlen + 1;
        memcpy(mem + d->idlen + 1, d->payload, d->len);
        mem[d->idlen + 1 + d->len] = '\0';
    }
    j->len = d->len;
    w->payload_avg += ((long)(d->len > (1u << 30) ? 1u << 30 : d->len) - w->payload_avg) / 8;
    j->attempt = d->attempt;
    j->max_attempts = d->max_attempts;
    j->deadline = d->deadline;
    j->made_ms = rjq__now_ms();
    j->wait_ms = d->attempt == 1 ? d->wait_ms : -1;
    j->on_finish = NULL;
    j->hook_data = NULL;
    int oom = 0;
    j->headers = rjq__headers_read(d->headers, d->hlen, &j->nheaders, &oom);
    if (oom) {
        if (j->own_payload) rjq__hi_free(j->own_payload);
        free(j);
        return NULL;
    }
    j->notice = 0;
    j->place = RJQ__JOB_NEW;
    j->prev = j->next = NULL;
    j->tok = tok;
    rjq__tok_hold(tok);
    rjq__w_job_move(w, j, RJQ__JOB_RUNNING);
    return j;
}

rjq_job *rjq__w_new_job(rjq_worker *w, const rjq__pushed *d, rjq__tok *tok) {
    return rjq__w_new_job_from(w, d, tok, NULL);
}

void rjq__w_unlink_job(rjq_worker *w, rjq_job *job) {
    RJQ_ASSERT(job->w == w && job->tok != NULL); /* its worker's, holding its token */
    rjq__w_job_move(w, job, RJQ__JOB_LOOSE);
    rjq__tok_drop(job->tok); /* its last job: the token is forgotten */
    job->tok = NULL;
}

/* Let go of w's job handles, running and expired: the user still holds
 * them (complete/fail then return ECLOSED and free them). */
void rjq__w_let_go(rjq_worker *w) {
    for (int k = 0; k < 2; k++) {
        rjq_job **head = k ? &w->expired_jobs : &w->jobs;
        while (*head) {
            rjq_job *j = *head;
            rjq__w_unlink_job(w, j);
            j->w = NULL; /* the user's now: complete/fail free it */
        }
    }
    RJQ_ASSERT(w->running == 0 && w->expired == 0);
}

void rjq__w_free_job(rjq_job *job) {
    RJQ_ASSERT(job->place == RJQ__JOB_LOOSE && job->tok == NULL);
    RJQ_ASSERT(job->prev == NULL && job->next == NULL);
    if (job->own_payload) rjq__hi_free(job->own_payload);
    free(job->headers);
    free(job);
}

void rjq__w_drop_job(rjq_worker *w, rjq_job *job) {
    rjq__w_unlink_job(w, job);
    rjq__w_free_job(job);
}

/* Within this much of its liveness entry's end a client starts no job
 * (its estimate of the server's clock may be late by about that much). */
#define ALIVE_MARGIN_MS 500

/* The job must not start, by the server's clock: its lease has ended, or
 * the client's liveness entry may have run out (other clients may then
 * have returned its jobs). A worker paused longer than that, SIGSTOP or a
 * frozen VM, finds jobs handed to it before the pause; they were or will
 * be reclaimed and run elsewhere. */
static int stale(rjq_worker *w, const rjq_job *j, long long until) {
    rjq_client *c = client_of(w);
    long long now = rjq__server_now(c), alive = rjq__upkeep_alive_until(w->q);
    long long end = until > j->deadline ? until : j->deadline;
    if (now <= 0) return 0;
    return (end > 0 && now >= end) || (alive > 0 && now + ALIVE_MARGIN_MS >= alive);
}

/* What a release needs of a job handle (its id and token). */
rjq__pushed rjq__w_job_ref(const rjq_job *j) {
    return (rjq__pushed){.id = j->id, .idlen = strlen(j->id), .token = j->token, .wait_ms = j->wait_ms,
                         .toklen = strlen(j->token)};
}

/* Hand jobs to the handler. Stale ones are handed back instead, in one
 * call (token-checked: one reclaimed meanwhile is left alone); until: a
 * later end of their lease, by extensions sent while their payloads were
 * read (0: none). Jobs of a batch are handed out even when an earlier
 * handler of it stopped the worker (rjq_worker_stop's contract). Once the
 * client is being freed, the rest are left to their lease. */
void rjq__w_run_jobs(rjq_worker *w, rjq_job **jobs, size_t n, long long until) {
    rjq_client *c = client_of(w);
    rjq__pushed *back = NULL;
    size_t i = 0, nback = 0;
    for (; i < n && !rjq__free_pending(c); i++) {
        if (!stale(w, jobs[i], until)) {
            if (w->on_job_start || w->on_job_finish) { /* (rjq.h: once per attempt each) */
                jobs[i]->on_finish = w->on_job_finish;
                jobs[i]->hook_data = w->data;
                if (w->on_job_start) w->on_job_start(jobs[i], jobs[i]->wait_ms, w->data);
            }
            w->handler(jobs[i], w->data);
            continue;
        }
        if (back == NULL && (back = malloc((n - i) * sizeof *back)) == NULL) {
            rjq__w_drop_job(w, jobs[i]); /* out of memory: its lease */
            continue;
        }
        back[nback] = rjq__w_job_ref(jobs[i]);
        jobs[nback++] = jobs[i]; /* kept (slots before i are done with) until it is sent */
    }
    if (nback) {
        rjq__push_release(w->q, NULL, back, nback);
        rjq__server_time_doubt(c); /* unless the server clock went back */
    }
    free(back);
    for (size_t k = 0; k < nback; k++) rjq__w_drop_job(w, jobs[k]);
    for (; i < n; i++) rjq__w_drop_job(w, jobs[i]);
}
