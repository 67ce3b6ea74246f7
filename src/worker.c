/*
 * Workers: the claim loop, doorbell wake-ups, lease extension, and the
 * jobs a lost reply or push left with them (claims are re-sent by token;
 * a resubscribed push channel makes the next claim recover).
 *
 * The claim loop is a small state machine. Its mode says what the last
 * claim found:
 *   HUNGRY  it was filled: the queue has a backlog. The worker keeps up
 *           to two claims (of half its capacity each) in flight, so Redis
 *           works on one while the worker runs the other's jobs; what a
 *           claim reply's jobs free goes out as soon as that reply is
 *           handled (on_claimed), so two replies read together do not
 *           put the halves in step.
 *   IDLE    it came back short: the queue had nothing more ready. The
 *           unfilled slots were registered for push delivery (push.c), so
 *           enqueue hands new jobs straight to the worker; besides pushes
 *           the worker waits for the doorbell (rung by any script that
 *           makes the queue non-empty), a timer for the next delayed job,
 *           or the client's periodic visit of the queue (upkeep.c) finding
 *           jobs waiting. A doorbell heard while a claim is in flight
 *           triggers one more claim.
 * Claims ride the queue's tick, behind the completions of the same loop
 * turn, so the capacity they free is claimed in the same round trip.
 * Its lifecycle (w->state, changed only by set_state): ACTIVE, then
 * STOPPING after rjq_worker_stop() or when the client closes gracefully
 * (no more claims; jobs that still arrive, by a claim in flight or a push,
 * are handed back, their attempt not counted; running jobs finish, or are
 * handed back at the close's deadline), then FINAL once its one last
 * recovering claim went out (see check_stopped), until nothing of it is
 * in flight, when it is freed. Its mode (w->mode, set_mode) is the claim
 * loop's; a job handle's place in it (j->place, job_move) says which list
 * holds it.
 *
 * A worker of several queues is a group of such workers, one per queue,
 * under one slot budget; claim() asks the group's scheduler (see "several
 * queues" below), which decides which member claims.
 *
 * Invariants (check_invariants, RJQ_ASSERTed at every step and at the
 * entry points the loop calls):
 *   0 <= claiming <= CLAIMS_IN_FLIGHT; asked == 0 when claiming == 0;
 *   claiming, asked, fetching and ids_only are what the lists of claims and
 *   fetches in flight add up to; running and expired are the lengths of
 *   the lists of running and expired jobs, each job on its place's list;
 *   running + asked + fetching + offered <= concurrency (offered: the push
 *   ledger's; fetching: claimed jobs whose payloads are on the way);
 *   0 <= expired <= concurrency (timed-out handles the user still holds,
 *   their slots freed: see expire());
 *   a stopping worker sends no claim but its last recovering one;
 *   a group's members: sum of running + asked + fetching <= its concurrency.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "held.h"
#include "push.h"
#include "upkeep.h"
#include "worker.h"

#define CLAIMS_IN_FLIGHT 2
/* Jobs per claim script call: well inside Lua's unpack limit (~8000
 * values; the claim unpacks two per job). Larger capacity takes more calls. */
#define CLAIM_MAX 1000
/* A claim carries its jobs' payloads in its reply while the worker's
 * recent payloads average below this many bytes; above, it asks for ids
 * only and reads the payloads with one plain HMGET (see fetch below).
 * Every string that enters Redis' Lua is hashed byte by byte and copied,
 * so payloads that pass through the claim script cost Redis CPU per byte;
 * the read costs a round trip. Measured (drain, one worker of 50): at 1
 * KiB the round trip cost more than it saved (0.8x the jobs/s), at 4 KiB
 * it paid (1.27x, Redis CPU -35%), at 16 KiB 1.8x (-56%). */
#define CLAIM_INLINE_MAX 2048

/* A worker's lifecycle, changed only by set_state:
 *   ACTIVE   -> STOPPING (stop)
 *   STOPPING -> FINAL (check_stopped: its last recovering claim is tried)
 *   FINAL: none (freed once nothing of it is in flight) */
typedef enum wstate {
    W_ACTIVE,   /* claims and takes pushes */
    W_STOPPING, /* stopped: no more claims, arrivals handed back */
    W_FINAL,    /* stopped, its last recovering claim sent (or not possible) */
} wstate;
struct group;
/* The claim loop's mode (set_mode): what its last claim found. IDLE ->
 * HUNGRY only while ACTIVE; HUNGRY -> IDLE always. */
typedef enum cmode { CL_IDLE, CL_HUNGRY } cmode;

/* A worker's background request (lease extension, the stop's
 * deregistration): at most one of each kind in flight (extensions: more
 * while a payload is being read, see on_extend_timer); its reply callback
 * gets this as its data. */
typedef struct background {
    rjq_worker *w;
    const char *what;         /* names it in error messages */
    int busy;                 /* how many in flight */
} background;

struct rjq_worker {
    rjq_queue *q;
    rjq_handler_fn *handler;
    rjq_notice_fn *on_notice;
    void *data;
    int concurrency;
    long lease_ms, poll_ms, reclaim_ms;
    wstate state;             /* (set_state) */
    cmode mode;               /* (set_mode) */
    int running;              /* handed out, not yet finished by the user, in a slot */
    int expired;              /* handed out and timed out, not yet finished: no slot */
    int finishing;            /* finish requests in flight */
    int claiming;             /* claims in flight */
    int asked;                /* jobs those claims asked for */
    int fetching;             /* claimed jobs whose payloads are being read */
    int ids_only;             /* ids-only claims and fetches in flight */
    long payload_avg;         /* recent payloads' length (moving average) */
    struct fetch *fetches;    /* fetches in flight */
    struct claim_ctx *claims; /* claims in flight */
    int wake_pending;         /* doorbell heard, no claim sent since */
    int want_claim;           /* claim on the next queue tick */
    int want_offer;           /* slots were freed while idle: offer them */
    uint64_t refused_until;   /* a claim was refused for a permission: none before */
    rjq__reg *reg;            /* push delivery registration and ledger */
    rjq__holder *held;        /* the tokens it holds jobs of */
    background extend, deregister;
    rjq_stopped_cb *stop_cb;
    void *stop_data;
    rjq_job *jobs;            /* running jobs, for lease extension */
    rjq_job *expired_jobs;    /* its expired ones (their slots freed) */
    rjq__timer poll_timer, extend_timer;
    struct group *g;          /* its worker of several queues (NULL: none) */
    int g_want;               /* it would claim now: the group's scheduler decides */
    struct rjq_worker *next;
};

/* A worker of several queues (rjq_worker_start_queues): one member worker
 * per queue, each the claim loop above, under one budget of slots (their
 * running + asked + fetching jobs together), and a scheduler that decides
 * which member claims when slots are free. The members' registrations for
 * push delivery are not in the budget (each registers what its last claim
 * left, so an idle earlier queue does not keep later ones from claiming);
 * a job pushed to a member while the budget is full goes back to the
 * queue, attempt not counted, and marks the member out of step, so it
 * claims before any later member when a slot frees (strict order). The
 * user's handle is the first member; the members are freed together once
 * every one of them has stopped. */
typedef struct group {
    int n, order, concurrency;
    int scheduling;           /* schedule() is running (no re-entry) */
    int kick;                 /* schedule on the next tick of a member's queue */
    int alive;                /* members not yet stopped */
    int stopping;             /* rjq_worker_stop() was called */
    int status;               /* RJQ_ECANCELED once a member went with its client */
    rjq_stopped_cb *stop_cb;
    void *stop_data;
    rjq_worker *m[RJQ_WORKER_QUEUES_MAX];
    int weight[RJQ_WORKER_QUEUES_MAX];
    long credit[RJQ_WORKER_QUEUES_MAX]; /* smooth weighted round robin */
} group;

/* The queue's workers. */
typedef struct part {
    rjq_worker *workers;
    int ticking;              /* part_tick is running (not re-entered) */
} part;

static void claim(rjq_worker *w);

static rjq_client *client_of(const rjq_worker *w) {
    return rjq_queue_client(w->q);
}

/* The group's slots in use (registered ones excluded). */
static int group_used(const group *g) {
    int used = 0;
    for (int i = 0; i < g->n; i++) used += g->m[i]->running + g->m[i]->asked + g->m[i]->fetching;
    return used;
}

static void check_lists(const rjq_worker *w);

static void check_invariants(const rjq_worker *w) {
    RJQ_ASSERT(w->state == W_ACTIVE || w->state == W_STOPPING || w->state == W_FINAL);
    RJQ_ASSERT(w->mode == CL_IDLE || w->mode == CL_HUNGRY);
    RJQ_ASSERT(w->running >= 0 && w->finishing >= 0);
    RJQ_ASSERT(w->expired >= 0 && w->expired <= w->concurrency);
    RJQ_ASSERT(w->g == NULL || group_used(w->g) <= w->g->concurrency);
    RJQ_ASSERT(w->claiming >= 0 && w->claiming <= CLAIMS_IN_FLIGHT);
    RJQ_ASSERT(w->asked >= 0 && (w->claiming > 0 || w->asked == 0));
    RJQ_ASSERT(w->fetching >= 0 && w->ids_only >= 0);
    RJQ_ASSERT(w->running + w->asked + w->fetching + rjq__reg_offered(w->reg) <= w->concurrency);
    RJQ_ASSERT(w->extend.busy >= 0 && w->deregister.busy >= 0);
    RJQ_ASSERT(w->state != W_ACTIVE || w->deregister.busy == 0); /* (sent by stop) */
    RJQ_ASSERT(w->reg != NULL && w->held != NULL);               /* (until detach) */
    check_lists(w);
}

/* Change w's lifecycle state (see wstate for the legal transitions). */
static void set_state(rjq_worker *w, wstate to) {
    RJQ_ASSERT((w->state == W_ACTIVE && to == W_STOPPING) ||
               (w->state == W_STOPPING && to == W_FINAL));
    w->state = to;
}

/* Change the claim loop's mode: hungry only while active. */
static void set_mode(rjq_worker *w, cmode to) {
    RJQ_ASSERT(to == CL_IDLE || (to == CL_HUNGRY && w->state == W_ACTIVE));
    w->mode = to;
}

rjq_queue *rjq__worker_queue(const rjq_worker *w) {
    return w->q;
}

/* ---- lifetime ----------------------------------------------------------- */

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
static void detach(rjq_worker *w) {
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

static int send_claim(rjq_worker *w, int want, int reset);

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
static void check_stopped(rjq_worker *w) {
    check_invariants(w);
    if (w->state == W_ACTIVE || w->claiming || w->fetching || w->deregister.busy) return;
    if (w->state == W_STOPPING && !rjq__closing(client_of(w))) {
        set_state(w, W_FINAL); /* once: a failed one leaves them to their lease */
        rjq__reg_lost(w->reg);
        if (send_claim(w, 0, 1) == RJQ_OK) return; /* its reply comes back here */
    }
    if (w->running || w->expired || w->finishing || w->extend.busy) return;
    detach(w);
    if (w->g) {
        group_gone(w->g, RJQ_OK);
        return;
    }
    if (w->stop_cb) w->stop_cb(w, RJQ_OK, w->stop_data);
    free(w);
}

static void let_go(rjq_worker *w);

/* Client destruction: running jobs are detached (the user still holds
 * them; complete/fail release them), a pending stop is cancelled. */
static void destroy(rjq_worker *w) {
    let_go(w);
    detach(w);
    if (w->g) {
        group_gone(w->g, RJQ_ECANCELED);
        return;
    }
    if (w->state != W_ACTIVE && w->stop_cb) w->stop_cb(w, RJQ_ECANCELED, w->stop_data);
    free(w);
}

/* ---- wake-ups ------------------------------------------------------------- */

/* Its own free slots (its registered ones taken), not counting the group's. */
static int own_free(const rjq_worker *w) {
    return w->concurrency - w->running - w->asked - w->fetching - rjq__reg_offered(w->reg);
}

static int group_free(const group *g) {
    return g->concurrency - group_used(g);
}

static int free_slots(const rjq_worker *w) {
    int n = own_free(w);
    if (w->g && group_free(w->g) < n) n = group_free(w->g);
    return n;
}

/* Work is ready: claim (with the registered slots too, see claim()). A
 * doorbell that no claim could answer yet stays pending. */
static void poke(rjq_worker *w) {
    w->wake_pending = 1;
    claim(w);
}

static void resync(rjq_worker *w) {
    rjq__reg_resync(w->reg);
    poke(w);
}

static void on_doorbell(rjq_client *c, const char *channel, const char *msg, size_t len,
                        void *arg) {
    part *p = rjq__queue_part(arg, RJQ__PART_WORKERS);
    (void)c, (void)channel, (void)len;
    for (rjq_worker *w = p->workers, *next; w; w = next) {
        next = w->next;
        if (msg == NULL) resync(w); /* (re)subscribed: doorbells may have been missed */
        else poke(w);
    }
}

/* The next delayed job is due, or a failed claim is retried. */
static void on_poll_timer(rjq__timer *t) {
    rjq_worker *w = t->owner;
    check_invariants(w);
    w->refused_until = 0;
    rjq__reg_resync(w->reg);
    claim(w);
}

static void want_claim(rjq_worker *w) {
    w->want_claim = 1;
    rjq__queue_kick(w->q);
}

/* ---- jobs ------------------------------------------------------------------ */

/* [next due, slots registered, token, deadline, then 4 per job] (claim.lua) */
#define CLAIM_HEAD 4

/* (worker.h) Job i of a claim reply (id, payload, attempt, max_attempts)
 * with the reply's token and deadline, all checked by rjq__claim_reply_ok;
 * 0 on success, 1 when the payload was left out (nil: the worker reads
 * it, see fetch). */
int rjq__claim_reply_job(const redisReply *r, size_t i, rjq__pushed *d) {
    redisReply **e = &r->element[CLAIM_HEAD + 4 * i];
    d->id = e[0]->str, d->idlen = e[0]->len;
    d->token = r->element[2]->str, d->toklen = r->element[2]->len;
    d->payload = e[1]->str, d->len = e[1]->len;
    d->attempt = (int)e[2]->integer;
    d->max_attempts = (int)e[3]->integer;
    d->deadline = r->element[3]->integer;
    return e[1]->type == REDIS_REPLY_NIL;
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
static void job_move(rjq_worker *w, rjq_job *j, rjq__job_place to) {
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
static rjq_job *new_job(rjq_worker *w, const rjq__pushed *d, rjq__tok *tok) {
    if (tok == NULL || d->toklen >= sizeof(((rjq_job *)0)->token)) return NULL;
    rjq_job *j = malloc(sizeof *j + d->idlen + 1 + d->len + 1);
    if (j == NULL) return NULL;
    char *mem = (char *)(j + 1);
    j->w = w;
    j->id = mem;
    memcpy(mem, d->id, d->idlen);
    mem[d->idlen] = '\0';
    memcpy(j->token, d->token, d->toklen);
    j->token[d->toklen] = '\0';
    j->payload = mem + d->idlen + 1;
    memcpy(mem + d->idlen + 1, d->payload, d->len);
    mem[d->idlen + 1 + d->len] = '\0';
    j->len = d->len;
    w->payload_avg += ((long)(d->len > (1u << 30) ? 1u << 30 : d->len) - w->payload_avg) / 8;
    j->attempt = d->attempt;
    j->max_attempts = d->max_attempts;
    j->deadline = d->deadline;
    j->notice = 0;
    j->place = RJQ__JOB_NEW;
    j->prev = j->next = NULL;
    j->tok = tok;
    rjq__tok_hold(tok);
    job_move(w, j, RJQ__JOB_RUNNING);
    return j;
}

static void unlink_job(rjq_worker *w, rjq_job *job) {
    job_move(w, job, RJQ__JOB_LOOSE);
    rjq__tok_drop(job->tok); /* its last job: the token is forgotten */
    job->tok = NULL;
}

/* Let go of w's job handles, running and expired: the user still holds
 * them (complete/fail then return ECLOSED and free them). */
static void let_go(rjq_worker *w) {
    for (int k = 0; k < 2; k++) {
        rjq_job **head = k ? &w->expired_jobs : &w->jobs;
        while (*head) {
            rjq_job *j = *head;
            unlink_job(w, j);
            j->w = NULL;
        }
    }
    RJQ_ASSERT(w->running == 0 && w->expired == 0);
}

void rjq__worker_job_dropped(rjq_worker *w, rjq_job *job) {
    unlink_job(w, job);
    free(job);
}

/* Within this much of its liveness entry's end a client starts no job
 * (its estimate of the server's clock may be late by about that much). */
#define ALIVE_MARGIN_MS 500

/* The job must not start, by the server's clock: its lease has ended, or
 * the client's liveness entry may have run out (other clients may then
 * have returned its jobs). A worker paused longer than that, SIGSTOP or a
 * frozen VM, finds jobs handed to it before the pause; they were or will
 * be reclaimed and run elsewhere. */
static int stale(rjq_client *c, const rjq_job *j, long long until) {
    long long now = rjq__server_now(c), alive = rjq__upkeep_alive_until(c);
    long long end = until > j->deadline ? until : j->deadline;
    if (now <= 0) return 0;
    return (end > 0 && now >= end) || (alive > 0 && now + ALIVE_MARGIN_MS >= alive);
}

/* What a release needs of a job handle (its id and token). */
static rjq__pushed job_ref(const rjq_job *j) {
    return (rjq__pushed){.id = j->id, .idlen = strlen(j->id), .token = j->token,
                         .toklen = strlen(j->token)};
}

/* Hand jobs to the handler. Stale ones are handed back instead, in one
 * call (token-checked: one reclaimed meanwhile is left alone); until: a
 * later end of their lease, by extensions sent while their payloads were
 * read (0: none). Jobs of a batch are handed out even when an earlier
 * handler of it stopped the worker (rjq_worker_stop's contract). Once the
 * client is being freed, the rest are left to their lease. */
static void run_jobs(rjq_worker *w, rjq_job **jobs, size_t n, long long until) {
    rjq_client *c = client_of(w);
    rjq__pushed *back = NULL;
    size_t i = 0, nback = 0;
    for (; i < n && !rjq__free_pending(c); i++) {
        if (!stale(c, jobs[i], until)) {
            w->handler(jobs[i], w->data);
            continue;
        }
        if (back == NULL && (back = malloc((n - i) * sizeof *back)) == NULL) {
            rjq__worker_job_dropped(w, jobs[i]); /* out of memory: its lease */
            continue;
        }
        back[nback] = job_ref(jobs[i]);
        jobs[nback++] = jobs[i]; /* kept (slots before i are done with) until it is sent */
    }
    if (nback) {
        rjq__push_release(w->q, NULL, back, nback);
        rjq__server_time_doubt(c); /* unless the server clock went back */
    }
    free(back);
    for (size_t k = 0; k < nback; k++) rjq__worker_job_dropped(w, jobs[k]);
    for (; i < n; i++) rjq__worker_job_dropped(w, jobs[i]);
}

/* ---- claim ------------------------------------------------------------ */

/* Wait for a push, the doorbell, the next delayed job (next_due ms; -1:
 * none) or the queue's visit. */
static void go_idle(rjq_worker *w, long long next_due) {
    if (next_due >= 0) rjq__timer_start(client_of(w), &w->poll_timer, (uint64_t)next_due + 1);
    else rjq__timer_stop(client_of(w), &w->poll_timer);
}

/* A claim failed: try again after poll_ms (ECONN: the reconnect pokes
 * sooner). */
static void retry_later(rjq_worker *w) {
    rjq__timer_start(client_of(w), &w->poll_timer, (uint64_t)w->poll_ms);
}

/* ---- payload fetch --------------------------------------------------------- */

/* Jobs a claim started without their payloads (claim.lua, ARGV 10), or
 * that were pushed without them (too big to push, see PUSH_INLINE_MAX in
 * lib.lua): the worker reads those with one HMGET of the payload column,
 * sent as the claim's reply or the push comes in, and starts them when it
 * is answered. They count as `fetching` meanwhile; their leases are
 * extended as running jobs' are (on_extend_timer), so a read slower than
 * the lease still runs them once; their token is held (a recovering claim
 * leaves it alone), and a cancel notice for one of them
 * (notice_job) marks it, so it is not started. A job whose payload is gone by then (cancelled and
 * deleted, or its record deleted behind rjq's back) is not started either:
 * its lease ends it. A fetch that fails hands its jobs back (token-checked,
 * attempt undone), as does a worker that is stopping.
 * Order: while an ids-only claim or a fetch is in flight, every claim asks
 * for ids only (w->ids_only), so that no claim's jobs overtake those of an
 * earlier one by skipping its fetch. */
typedef struct fetch_job {
    const char *id;
    size_t idlen;
    int attempt, max_attempts;
    int cancelled;            /* a cancel notice came for it meanwhile */
} fetch_job;

typedef struct fetch {
    rjq_worker *w;
    rjq__tok *tok;
    long long deadline;
    long long until;          /* its lease's end, by the extensions sent (server ms) */
    struct fetch *prev, *next; /* the worker's fetches in flight */
    size_t n;
    fetch_job jobs[];         /* then their ids */
} fetch;

static void fetch_unlink(rjq_worker *w, fetch *f) {
    if (f->prev) f->prev->next = f->next;
    else w->fetches = f->next;
    if (f->next) f->next->prev = f->prev;
}

static void on_fetched(rjq_client *c, int status, redisReply *r, void *priv) {
    fetch *f = priv;
    rjq_worker *w = f->w;
    check_invariants(w); /* (f still among its fetches) */
    w->fetching -= (int)f->n;
    w->ids_only--;
    fetch_unlink(w, f);
    if (status == RJQ_OK && (r->type != REDIS_REPLY_ARRAY || r->elements != f->n)) {
        rjq__errmsg(c, "payload fetch: unexpected reply");
        status = RJQ_EPROTO;
    }
    int closing = rjq__closing(c);
    if (status != RJQ_OK && !closing) {
        rjq__background_failed(c, status, "payload fetch");
        /* the server refuses the read (not a lost connection, which the
         * request outlives): claim with payloads again */
        if (status != RJQ_ECONN) w->payload_avg = 0;
    }
    rjq_job **jobs = !closing ? malloc(f->n * sizeof *jobs) : NULL;
    rjq__pushed *back = jobs ? malloc(f->n * sizeof *back) : NULL;
    size_t made = 0, nback = 0;
    const char *tokstr = rjq__tok_str(f->tok);
    for (size_t i = 0; back && i < f->n; i++) {
        const redisReply *e = status == RJQ_OK ? r->element[i] : NULL;
        if (f->jobs[i].cancelled) continue; /* cancelled: nothing to run */
        if (e && e->type != REDIS_REPLY_STRING) continue; /* gone: its lease ends it */
        rjq__pushed d = {.id = f->jobs[i].id, .idlen = f->jobs[i].idlen, .token = tokstr,
                         .toklen = strlen(tokstr), .payload = e ? e->str : NULL,
                         .len = e ? e->len : 0, .attempt = f->jobs[i].attempt,
                         .max_attempts = f->jobs[i].max_attempts, .deadline = f->deadline};
        /* a stopping worker starts nothing more, a failed read nothing:
         * they go back */
        rjq_job *j = e && w->state == W_ACTIVE ? new_job(w, &d, f->tok) : NULL;
        if (j) jobs[made++] = j;
        else back[nback++] = d;
    }
    if (nback) rjq__push_release(w->q, NULL, back, nback);
    free(back);
    rjq__tok_drop(f->tok); /* the fetch's hold */
    size_t fetched = f->n;
    long long until = f->until;
    free(f);
    check_invariants(w);
    if (closing) {
        free(jobs);
        return;
    }
    run_jobs(w, jobs, made, until);
    free(jobs);
    if (w->state == W_ACTIVE) {
        /* slots of jobs not started are free again: claim, or offer them */
        if (w->wake_pending || w->mode == CL_HUNGRY || rjq__reg_out_of_step(w->reg))
            want_claim(w);
        else if (made < fetched) {
            w->want_offer = 1;
            rjq__queue_kick(w->q);
        }
    }
    check_stopped(w);
}

/* Read the payloads of the n jobs in d (all under tok); 0 when sent. */
static int fetch_payloads(rjq_worker *w, rjq__tok *tok, const rjq__pushed *d, size_t n) {
    size_t bytes = sizeof(fetch) + n * sizeof(fetch_job);
    for (size_t i = 0; i < n; i++) bytes += d[i].idlen;
    fetch *f = malloc(bytes);
    if (f == NULL) return -1;
    f->w = w;
    f->tok = tok;
    f->deadline = n ? d[0].deadline : 0;
    f->until = f->deadline;
    f->n = n;
    char *mem = (char *)&f->jobs[n];
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_str(&a, "HMGET");
    rjq__argv_key(&a, w->q, RJQ__K_PAYLOAD);
    for (size_t i = 0; i < n; i++) {
        memcpy(mem, d[i].id, d[i].idlen);
        f->jobs[i] = (fetch_job){mem, d[i].idlen, d[i].attempt, d[i].max_attempts, 0};
        rjq__argv_add(&a, mem, d[i].idlen);
        mem += d[i].idlen;
    }
    int rc = a.oom ? RJQ_ENOMEM
                   : rjq__command(client_of(w), RJQ__REQ_RETRY, on_fetched, f, a.n, a.v, a.len);
    rjq__argv_free(&a);
    if (rc != RJQ_OK) {
        free(f);
        return -1;
    }
    rjq__tok_hold(tok);
    w->fetching += (int)n;
    w->ids_only++;
    f->prev = NULL;
    f->next = w->fetches;
    if (w->fetches) w->fetches->prev = f;
    w->fetches = f;
    return 0;
}

/* A cancel notice for a job whose payload is being read: it is not started. */
static void fetch_notice(rjq_worker *w, const char *token, size_t toklen, const char *id,
                         size_t idlen) {
    for (fetch *f = w->fetches; f; f = f->next) {
        const char *t = rjq__tok_str(f->tok);
        if (strncmp(t, token, toklen) != 0 || t[toklen] != '\0') continue;
        for (size_t i = 0; i < f->n; i++)
            if (f->jobs[i].idlen == idlen && memcmp(f->jobs[i].id, id, idlen) == 0)
                f->jobs[i].cancelled = 1;
    }
}

typedef struct claim_ctx {
    rjq_worker *w;
    int asked;
    unsigned epoch;
    int recovers;             /* it recovers jobs pushed unheard */
    int ids_only;             /* it asked for ids only (payloads: fetch) */
    char token[64];
    long long until;          /* its jobs' lease end, by the extensions sent (server ms) */
    struct claim_ctx *prev, *next; /* the worker's claims in flight */
} claim_ctx;

/* The counts balance the lists: running and expired jobs, each on its
 * place's list; claims and fetches in flight (a walk: test builds only). */
static void check_lists(const rjq_worker *w) {
#ifdef RJQ_ASSERTS
    int n = 0, asked = 0, ids_only = 0, fetching = 0;
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
        ids_only += x->ids_only;
    }
    RJQ_ASSERT(n == w->claiming && asked == w->asked);
    for (const fetch *f = w->fetches; f; f = f->next, ids_only++) {
        RJQ_ASSERT(f->w == w && (f->next == NULL || f->next->prev == f));
        fetching += (int)f->n;
    }
    RJQ_ASSERT(fetching == w->fetching && ids_only == w->ids_only);
#else
    (void)w;
#endif
}

static int in_range(const redisReply *e, long long lo, long long hi) {
    return e->type == REDIS_REPLY_INTEGER && e->integer >= lo && e->integer <= hi;
}

/* (worker.h) A claim registers at most the slots it did not fill; next
 * due is -1 (nothing delayed), -2 (paused) or ms from now; the token is
 * one a job handle can hold. */
int rjq__claim_reply_ok(const redisReply *r, int asked) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements < CLAIM_HEAD ||
        (r->elements - CLAIM_HEAD) % 4 != 0 || !in_range(r->element[0], -2, RJQ__TIME_MAX) ||
        r->element[1]->type != REDIS_REPLY_INTEGER || r->element[2]->type != REDIS_REPLY_STRING ||
        r->element[2]->len == 0 || r->element[2]->len >= sizeof(((rjq_job *)0)->token) ||
        !in_range(r->element[3], 1, RJQ__TIME_MAX))
        return 0;
    long long got = (long long)(r->elements - CLAIM_HEAD) / 4, registered = r->element[1]->integer;
    if (got > asked || registered < 0 || registered > asked - got) return 0;
    for (size_t i = CLAIM_HEAD; i < r->elements; i += 4) {
        redisReply **e = &r->element[i];
        if (e[0]->type != REDIS_REPLY_STRING || e[0]->len == 0 ||
            (e[1]->type != REDIS_REPLY_STRING && e[1]->type != REDIS_REPLY_NIL) ||
            !in_range(e[2], 0, RJQ__ATTEMPTS_MAX) || !in_range(e[3], 0, RJQ__ATTEMPTS_MAX))
            return 0;
    }
    return 1;
}

static void on_claimed(rjq_client *c, int status, redisReply *r, void *priv) {
    claim_ctx x = *(claim_ctx *)priv;
    rjq_worker *w = x.w;
    check_invariants(w); /* (x still among its claims) */
    if (x.prev) x.prev->next = x.next;
    else w->claims = x.next;
    if (x.next) x.next->prev = x.prev;
    free(priv);
    rjq_queue *q = w->q;
    w->claiming--;
    w->asked -= x.asked;
    w->ids_only -= x.ids_only;
    if (rjq__closing(c)) return;
    if (status == RJQ_OK && !rjq__claim_reply_ok(r, x.asked)) {
        rjq__errmsg(c, "claim: unexpected reply");
        status = RJQ_EPROTO;
    }
    rjq__reg_claim_replied(w->reg, x.epoch, status, status == RJQ_OK ? r->element[1]->integer : 0,
                           x.recovers);
    if (status != RJQ_OK) {
        /* ECONN: the reconnect pokes us; anything else: retried later. A
         * permission refused (the request layer's RJQ_EVENT_ERROR named
         * it) is final until the ACL changes: no claim until the client's
         * reconnect span (backoff cap + connect timeout) is over, whatever
         * doorbells ring meanwhile. */
        set_mode(w, CL_IDLE);
        if (status == RJQ_EAUTH) {
            long span = rjq__client_reconnect_span_ms(c);
            w->refused_until = rjq__now_ms() + (uint64_t)span;
            rjq__timer_start(c, &w->poll_timer, (uint64_t)span);
        } else {
            retry_later(w);
        }
        check_stopped(w);
        return;
    }
    size_t got = (r->elements - CLAIM_HEAD) / 4, made = 0, nback = 0, nfetch = 0;

    /* the claim's time (a re-sent one's jobs: their first run's): an empty
     * claim tells it too, and the registration it made may bring pushes,
     * whose own time says little after a pause */
    long long deadline = r->element[3]->integer;
    rjq__server_time_sample(c, deadline - w->lease_ms);
    /* The token's record: the claim entered its jobs in the held index (a
     * recovering one its member even with none), the worker forgets it
     * once none of them is left with it. Out of memory: the jobs go back. */
    rjq__tok *tok = got || x.recovers ? rjq__tok_new(w->held, r->element[2]->str, r->element[2]->len)
                                      : NULL;
    rjq__pushed *d = got ? malloc(got * sizeof *d) : NULL;
    rjq_job **jobs = got ? malloc(got * sizeof *jobs) : NULL;
    rjq__pushed *f = got ? malloc(got * sizeof *f) : NULL; /* payloads to read */
    for (size_t i = 0; d && jobs && f && i < got; i++) {
        int rc = rjq__claim_reply_job(r, i, &d[nback]);
        if (rc == 1 && w->state == W_ACTIVE && tok) {
            f[nfetch++] = d[nback];
            continue;
        }
        /* a stopping worker starts nothing more: they go back */
        rjq_job *j = rc == 0 && w->state == W_ACTIVE ? new_job(w, &d[nback], tok) : NULL;
        if (j) jobs[made++] = j;
        else nback++;
    }
    /* (not sent, out of memory: they go back) */
    if (nfetch && fetch_payloads(w, tok, f, nfetch) != 0) rjq__push_release(w->q, NULL, f, nfetch);
    free(f);
    if (nback) rjq__push_release(w->q, NULL, d, nback);
    if (tok) rjq__tok_drop(tok); /* the arrival */
    free(d);
    check_invariants(w);
    if (w->state == W_ACTIVE) {
        if ((int)got == x.asked) {
            set_mode(w, CL_HUNGRY);
            rjq__timer_stop(c, &w->poll_timer);
        } else {
            set_mode(w, CL_IDLE);
            go_idle(w, r->element[0]->integer);
        }
    }
    run_jobs(w, jobs, made, x.until);
    free(jobs);
    int hungry = w->state == W_ACTIVE && w->mode == CL_HUNGRY;
    if (w->wake_pending || w->mode == CL_HUNGRY || rjq__reg_out_of_step(w->reg)) want_claim(w);
    if (w->g && w->state == W_ACTIVE) { /* later members may claim now */
        w->g->kick = 1;
        rjq__queue_kick(q);
    }
    check_stopped(w); /* (may free w) */
    /* A backlog: what these jobs freed (the completions of those that
     * finished at once, and the claim for their slots) goes out now, not
     * at the end of the loop turn. With the other half's claim reply in
     * the same read, both halves would otherwise reach Redis together and
     * come back together, and Redis would wait while the worker runs them
     * all (lockstep: Redis 80% busy in the drain of tiny jobs, 100% with
     * this). */
    if (hungry && rjq__accepting(c)) { /* (not once a handler freed the client) */
        rjq__queue_tick_now(q);
        if (rjq__accepting(c)) rjq__send_now(c);
    }
}

/* Send one claim for up to `want` jobs; reset: its unfilled slots replace
 * the registration (under a new epoch). It is re-sent after a reconnect:
 * its token makes it idempotent (claim.lua). */
static int send_claim(rjq_worker *w, int want, int reset) {
    rjq_client *c = client_of(w);
    rjq_queue *q = w->q;
    /* (want 0: a stopping worker's last recovery, see check_stopped()) */
    RJQ_ASSERT(want > 0 ? w->state == W_ACTIVE : reset && w->state == W_FINAL);
    RJQ_ASSERT(w->claiming < CLAIMS_IN_FLIGHT);
    claim_ctx *ctx = malloc(sizeof *ctx);
    if (ctx == NULL) return RJQ_ENOMEM;
    ctx->w = w;
    ctx->asked = want;
    ctx->epoch = rjq__reg_claim_epoch(w->reg, reset);
    ctx->recovers = rjq__reg_claim_recovers(w->reg, reset);
    ctx->ids_only = w->payload_avg >= CLAIM_INLINE_MAX || w->ids_only > 0;
    char *token = ctx->token, word[12];
    rjq__random_word(c, word, 10); /* ~59 bits: new for every call of this worker */
    snprintf(token, sizeof ctx->token, "%s%s", rjq__held_prefix(w->held), word);
    ctx->until = 0;
    rjq__argv a;
    rjq__argv_init(&a);
    RJQ__KEYS(&a, q, RJQ__K_READY, RJQ__K_PRIO, RJQ__K_DELAYED, RJQ__K_ACTIVE, RJQ__K_STATS,
              RJQ__K_IDLE, RJQ__K_COLUMNS, RJQ__K_MONITORED, RJQ__K_HELD, RJQ__K_META,
              RJQ__K_DEADLINES, RJQ__K_STARTS, RJQ__K_WAITERS);
    rjq__argv_key(&a, q, RJQ__K_JOB);
    rjq__argv_ll(&a, want);
    rjq__argv_ll(&a, w->lease_ms);
    rjq__argv_str(&a, token);
    rjq__argv_key(&a, q, RJQ__K_WAKE);
    rjq__argv_str(&a, rjq__reg_field(w->reg));
    rjq__argv_ll(&a, ctx->epoch);
    rjq__argv_str(&a, reset ? "1" : "0");
    rjq__argv_str(&a, ctx->recovers ? "1" : "0");
    rjq__argv_str(&a, ctx->ids_only ? "0" : "1");
    /* what it knows of: the tokens it holds jobs of, or has yet to forget */
    for (const rjq__tok *t = ctx->recovers ? rjq__held_first(w->held) : NULL; t;
         t = rjq__held_next(t))
        rjq__argv_str(&a, rjq__tok_str(t));
    int rc = a.oom ? RJQ_ENOMEM
                   : rjq__script(c, RJQ__S_CLAIM, RJQ__REQ_RETRY, on_claimed, ctx, a.n, a.v,
                                 a.len);
    rjq__argv_free(&a);
    if (rc != RJQ_OK) {
        free(ctx);
        return rc;
    }
    rjq__reg_claim_sent(w->reg, ctx->epoch, reset, ctx->recovers);
    ctx->prev = NULL;
    ctx->next = w->claims;
    if (w->claims) w->claims->prev = ctx;
    w->claims = ctx;
    w->claiming++;
    w->asked += want;
    w->ids_only += ctx->ids_only;
    check_invariants(w);
    return RJQ_OK;
}

/* Jobs per claim: all of the capacity when idle, half while hungry. */
static int claim_chunk(const rjq_worker *w) {
    int chunk = w->mode == CL_HUNGRY && w->concurrency >= 4
                    ? w->concurrency / 2 + w->concurrency % 2
                    : w->concurrency;
    return chunk > CLAIM_MAX ? CLAIM_MAX : chunk;
}

/* Claim up to the free capacity (at most cap jobs): one claim when idle,
 * two halves in flight while hungry. A claim that replaces the
 * registration waits for those in flight and takes the offered slots too. */
static void claim_up_to(rjq_worker *w, int cap) {
    rjq_client *c = client_of(w);
    if (w->refused_until && rjq__now_ms() < w->refused_until) return; /* (its timer claims) */
    int limit = w->mode == CL_HUNGRY ? CLAIMS_IN_FLIGHT : 1;
    int chunk = claim_chunk(w);
    /* Woken for work that was not pushed: take the offered slots back. */
    if (w->wake_pending && rjq__reg_offered(w->reg) != 0) rjq__reg_resync(w->reg);
    while (w->state == W_ACTIVE && !rjq__closing(c) && w->claiming < limit && cap > 0) {
        int reset = rjq__reg_out_of_step(w->reg);
        if (reset && w->claiming) return; /* on_claimed comes back here */
        int slots = own_free(w) + (reset ? rjq__reg_offered(w->reg) : 0);
        if (w->g && group_free(w->g) < slots) slots = group_free(w->g);
        if (slots > cap) slots = cap;
        if (slots <= 0) return;
        int want = slots < chunk ? slots : chunk;
        if (send_claim(w, want, reset) != RJQ_OK) {
            retry_later(w);
            return;
        }
        cap -= want;
        /* Only a claim that went out after the doorbell answers it: a
         * doorbell heard while nothing could be sent stays pending. */
        w->wake_pending = 0;
    }
}

/* ---- several queues --------------------------------------------------------- */

/* The member would claim: it has a backlog, heard of work, its
 * registration is in doubt, or its own loop asked to. */
static int m_wants(const rjq_worker *m) {
    return m->g_want || m->wake_pending || m->mode == CL_HUNGRY || rjq__reg_out_of_step(m->reg);
}

/* Nothing known waits in its queue: its last claim came back short, it
 * is registered for pushes, and no claim of it is in flight. */
static int m_settled(const rjq_worker *m) {
    return !m_wants(m) && m->claiming == 0;
}

/* How many jobs its claims could ask for now, by its claims in flight
 * (claim_up_to's limits). */
static int m_room(const rjq_worker *m) {
    if (rjq__reg_out_of_step(m->reg) && m->claiming) return 0;
    int limit = m->mode == CL_HUNGRY ? CLAIMS_IN_FLIGHT : 1;
    return m->claiming < limit ? (limit - m->claiming) * claim_chunk(m) : 0;
}

/* How many its own slots would let it claim (its registered ones are
 * kept for pushes unless the claim replaces the registration). */
static int m_own(const rjq_worker *m) {
    return own_free(m) + (rjq__reg_out_of_step(m->reg) ? rjq__reg_offered(m->reg) : 0);
}

/* Give the group's free slots to its members. Strict: in queue order, a
 * member claims what it can; a later member claims only once every
 * earlier one is settled (its queue had nothing more ready). Weighted:
 * each free slot goes to a member that would claim, by smooth weighted
 * round robin, so that starts follow the weights while queues have a
 * backlog. */
static void schedule(group *g) {
    if (g->scheduling) return;
    g->scheduling = 1;
    if (g->order == RJQ_WORKER_STRICT) {
        for (int i = 0; i < g->n; i++) {
            rjq_worker *m = g->m[i];
            if (m->state != W_ACTIVE) continue;
            if (m_wants(m)) {
                m->g_want = 0;
                claim_up_to(m, g->concurrency);
            }
            if (!m_settled(m)) break;
        }
    } else {
        /* A slot whose turn is a member's that cannot claim more now (its
         * claims in flight) stays free until that member's claim is
         * answered (on_claimed kicks this again): giving it to another
         * would skew the shares. */
        int alloc[RJQ_WORKER_QUEUES_MAX] = {0}, ok[RJQ_WORKER_QUEUES_MAX],
            room[RJQ_WORKER_QUEUES_MAX];
        long total = 0;
        for (int i = 0; i < g->n; i++) {
            rjq_worker *m = g->m[i];
            /* (one refused for a permission waits for its timer, out of turn) */
            ok[i] = m->state == W_ACTIVE && m_wants(m) &&
                    !(m->refused_until && rjq__now_ms() < m->refused_until);
            room[i] = ok[i] ? m_room(m) : 0;
            if (!ok[i]) g->credit[i] = 0; /* nothing ready: no credit */
            else total += g->weight[i];
        }
        for (int free = group_free(g); free > 0 && total > 0;) {
            int pick = -1;
            for (int i = 0; i < g->n; i++)
                if (ok[i] && (pick < 0 || g->credit[i] + g->weight[i] >
                                              g->credit[pick] + g->weight[pick]))
                    pick = i;
            if (alloc[pick] >= m_own(g->m[pick])) {
                /* its own slots are registered for pushes (they fill
                 * those): it takes no more now, the others take its turns */
                ok[pick] = 0;
                total -= g->weight[pick];
                continue;
            }
            if (alloc[pick] >= room[pick]) break;
            free--;
            for (int i = 0; i < g->n; i++)
                if (ok[i]) g->credit[i] += g->weight[i];
            g->credit[pick] -= total;
            alloc[pick]++;
        }
        for (int i = 0; i < g->n; i++)
            if (alloc[i]) {
                g->m[i]->g_want = 0;
                claim_up_to(g->m[i], alloc[i]);
            }
    }
    g->scheduling = 0;
}

/* Claim: a member asks its group's scheduler. */
static void claim(rjq_worker *w) {
    if (w->g == NULL) {
        claim_up_to(w, w->concurrency);
        return;
    }
    w->g_want = 1;
    schedule(w->g);
}

/* ---- push delivery --------------------------------------------------------- */

/* Jobs pushed under epoch: start those there is room for, hand back the
 * others. */
static void take_pushed(void *arg, unsigned epoch, const rjq__pushed *d, size_t n) {
    rjq_worker *w = arg;
    check_invariants(w);
    /* registered with the worker's lease: the push was made at deadline - lease */
    if (n) rjq__server_time_sample(client_of(w), d[0].deadline - w->lease_ms);
    rjq_job **jobs = malloc(n * sizeof *jobs);
    rjq__pushed *back = malloc(n * sizeof *back);
    /* jobs pushed without their payload (too big to push): read, as a
     * claim's without payloads are (fetch) */
    size_t big = 0;
    for (size_t i = 0; i < n; i++) big += d[i].payload == NULL;
    rjq__pushed *f = big ? malloc(big * sizeof *f) : NULL;
    /* the jobs of a message share their token */
    rjq__tok *tok = n ? rjq__tok_new(w->held, d[0].token, d[0].toklen) : NULL;
    size_t made = 0, nback = 0, nfetch = 0;
    for (size_t i = 0; i < n; i++) {
        /* (those to read count as running: they take a slot) */
        int can_run = w->running + (int)nfetch < w->concurrency &&
                      (w->g == NULL || group_free(w->g) - (int)nfetch > 0);
        int room = jobs && back && tok && (f || !big) && w->state == W_ACTIVE &&
                   rjq__reg_accept(w->reg, epoch, free_slots(w) - (int)nfetch, can_run);
        if (room && d[i].payload == NULL) {
            f[nfetch++] = d[i];
            continue;
        }
        rjq_job *j = room ? new_job(w, &d[i], tok) : NULL;
        if (j) jobs[made++] = j;
        else if (back) back[nback++] = d[i];
    }
    check_invariants(w);
    /* (not sent, out of memory: they go back) */
    if (nfetch && fetch_payloads(w, tok, f, nfetch) != 0) rjq__push_release(w->q, NULL, f, nfetch);
    free(f);
    /* Out of memory for the list itself: the jobs wait for their lease. */
    if (nback) rjq__push_release(w->q, NULL, back, nback);
    if (tok) rjq__tok_drop(tok); /* the arrival */
    free(back);
    run_jobs(w, jobs, made, 0);
    free(jobs);
    if (rjq__reg_out_of_step(w->reg)) want_claim(w);
    check_stopped(w);
}

static void reg_resync(void *arg) {
    poke(arg); /* the push module marked the registration out of step */
}

/* ---- notices ---------------------------------------------------------------- */

/* A running job's attempt timed out (its notice: the sweep failed it, or
 * will): it stops counting against the concurrency, so the worker claims
 * a replacement at once, while the handle stays the user's until they
 * finish it (refused then: RJQ_ELEASELOST). Its lease is no longer
 * extended (extend.lua would refuse it); its token stays held, so a
 * recovering claim leaves the job alone. Memory is bounded: at most
 * `concurrency` such handles are outstanding; a job timing out beyond
 * that keeps its slot until one of them is finished (then it is expired,
 * see rjq__worker_job_done). A stopping worker still waits for them. */
static void expire(rjq_worker *w, rjq_job *j) {
    if (j->place != RJQ__JOB_RUNNING || w->expired >= w->concurrency) return;
    job_move(w, j, RJQ__JOB_EXPIRED);
    check_invariants(w);
    if (w->state != W_ACTIVE || rjq__closing(client_of(w))) return;
    if (w->mode == CL_HUNGRY || w->wake_pending) w->want_claim = 1;
    else w->want_offer = 1;
    rjq__queue_kick(w->q);
}

/* The running job id held under token must stop: tell its handler, once.
 * (The callback may finish the job, stop the worker or free the client.) */
static void notice_job(rjq_worker *w, int reason, const char *token, size_t toklen,
                       const char *id, size_t idlen) {
    check_invariants(w);
    fetch_notice(w, token, toklen, id, idlen);
    for (rjq_job *j = w->jobs; j; j = j->next) {
        if (strncmp(j->token, token, toklen) != 0 || j->token[toklen] != '\0' ||
            strncmp(j->id, id, idlen) != 0 || j->id[idlen] != '\0')
            continue;
        if (j->notice) return;
        j->notice = reason;
        if (reason == RJQ_ETIMEDOUT) expire(w, j); /* before: on_notice may finish it */
        if (w->on_notice) w->on_notice(j, reason, w->data);
        return;
    }
}

static void reg_notice(void *arg, int reason, const char *token, size_t toklen, const char *id,
                       size_t idlen) {
    notice_job(arg, reason, token, toklen, id, idlen);
}

static const rjq__reg_ops reg_ops = {take_pushed, reg_resync, reg_notice};

int rjq__worker_offer(rjq_worker *w, rjq__offer *o) {
    check_invariants(w);
    /* (a group's member claims instead: its scheduler decides) */
    if (!w->want_offer || w->g || w->mode == CL_HUNGRY || w->state != W_ACTIVE ||
        rjq__reg_out_of_step(w->reg) || w->wake_pending)
        return 0; /* left to the tick: it claims */
    w->want_offer = 0;
    int slots = free_slots(w);
    if (slots <= 0) return 0;
    o->w = w;
    o->field = rjq__reg_field(w->reg);
    o->lease_ms = w->lease_ms;
    o->slots = slots;
    o->epoch = rjq__reg_offer(w->reg, slots);
    check_invariants(w);
    return 1;
}

void rjq__worker_offer_done(const rjq__offer *o, int status, int registered) {
    rjq_worker *w = o->w;
    if (rjq__reg_offer_done(w->reg, o->epoch, o->slots, status, registered) &&
        w->state == W_ACTIVE && !rjq__closing(client_of(w)))
        want_claim(w);
}

/* ---- finishing jobs --------------------------------------------------- */

void rjq__worker_job_done(rjq_job *job) {
    rjq_worker *w = job->w;
    RJQ_ASSERT(w != NULL);
    check_invariants(w);
    int expired = job->place == RJQ__JOB_EXPIRED;
    unlink_job(w, job);
    free(job);
    w->finishing++;
    if (expired) {
        /* its place: a job that timed out while the expired were too many */
        for (rjq_job *j = w->jobs; j; j = j->next)
            if (j->notice == RJQ_ETIMEDOUT) {
                expire(w, j);
                break;
            }
        return;
    }
    /* the caller kicks the tick */
    if (w->mode == CL_HUNGRY || w->wake_pending) w->want_claim = 1;
    else w->want_offer = 1;
}

void rjq__worker_finish_replied(rjq_worker *w) {
    RJQ_ASSERT(w->finishing > 0);
    w->finishing--;
    if (!rjq__closing(client_of(w))) check_stopped(w);
}

/* A background request (priv: its background) was answered: report a
 * failure, and see whether a stopping worker is done. */
static void on_background_done(rjq_client *c, int status, redisReply *r, void *priv) {
    background *b = priv;
    (void)r;
    RJQ_ASSERT(b->busy > 0);
    b->busy--;
    rjq__background_failed(c, status, b->what);
    if (!rjq__closing(c)) check_stopped(b->w);
}

static void background_init(background *b, rjq_worker *w, const char *what) {
    b->w = w;
    b->what = what;
}

/* ---- lease extension ------------------------------------------------------ */

/* An extension in flight: the ids and tokens it sent ("id\0token\0" n
 * times), to tell the handlers of jobs it finds cancelled. */
typedef struct extend_ctx {
    rjq_worker *w;
    size_t n;
    char sent[];
} extend_ctx;

static void on_extended(rjq_client *c, int status, redisReply *r, void *priv) {
    extend_ctx *x = priv;
    rjq_worker *w = x->w;
    RJQ_ASSERT(w->extend.busy > 0);
    if (status == RJQ_OK && (r->type != REDIS_REPLY_ARRAY || r->elements != x->n))
        status = RJQ_EPROTO;
    const char *p = x->sent;
    for (size_t i = 0; status == RJQ_OK && i < x->n && !rjq__closing(c) && !rjq__free_pending(c);
         i++) {
        const char *id = p, *token = id + strlen(id) + 1;
        p = token + strlen(token) + 1;
        /* 2: cancelled, 3: its run time is over (its timeout), and the
         * notice on the push channel was missed; 0: its lease was lost (a
         * job whose payload is still being read is then not started) */
        long long code = r->element[i]->type == REDIS_REPLY_INTEGER ? r->element[i]->integer : 0;
        if (id[0] == '\0') continue; /* a claim in flight's */
        if (code == 2 || code == 3)
            notice_job(w, code == 2 ? RJQ_EJOBCANCELED : RJQ_ETIMEDOUT, token, strlen(token), id,
                       strlen(id));
        else if (code == 0)
            fetch_notice(w, token, strlen(token), id, strlen(id));
    }
    free(x);
    on_background_done(c, status, r, &w->extend);
}

/* One job of an extension: its id, token and claim start in a, recorded
 * in *p. */
static void extend_add(rjq__argv *a, char **p, const char *id, size_t idlen, const char *token,
                       long long deadline, long lease_ms) {
    size_t tl = strlen(token) + 1;
    rjq__argv_add(a, id, idlen);
    rjq__argv_str(a, token);
    /* its claim's start as the lease's end tells it (extend.lua) */
    rjq__argv_ll(a, deadline > lease_ms ? deadline - lease_ms : 0);
    memcpy(*p, id, idlen);
    (*p)[idlen] = '\0';
    memcpy(*p + idlen + 1, token, tl);
    *p += idlen + 1 + tl;
}

/* Every lease_ms/3: extend the leases of the running jobs, of those whose
 * payloads are being read, and of those of the claims in flight (by their
 * tokens: extend.lua), so that a payload that takes longer than the lease
 * to arrive does not lose its job (to the sweep, or handed back as stale
 * on arrival: on_fetched and on_claimed count on the extensions sent). One
 * extension at a time, except while a payload may be being read: its
 * reply waits behind that payload's, so more go out meanwhile. */
static void on_extend_timer(rjq__timer *t) {
    rjq_worker *w = t->owner;
    rjq_client *c = client_of(w);
    check_invariants(w);
    rjq__timer_start(c, &w->extend_timer, (uint64_t)(w->lease_ms / 3));
    int reading = w->fetches != NULL || w->claims != NULL;
    if ((w->jobs == NULL && !reading) || (w->extend.busy && !reading)) return;
    size_t n = 0, size = 0;
    for (rjq_job *j = w->jobs; j; j = j->next, n++) size += strlen(j->id) + strlen(j->token) + 2;
    for (fetch *f = w->fetches; f; f = f->next)
        for (size_t i = 0; i < f->n; i++)
            if (!f->jobs[i].cancelled) {
                n++;
                size += f->jobs[i].idlen + strlen(rjq__tok_str(f->tok)) + 2;
            }
    for (claim_ctx *k = w->claims; k; k = k->next, n++) size += strlen(k->token) + 2;
    if (n == 0) return;
    extend_ctx *x = malloc(sizeof *x + size);
    if (x == NULL) return; /* tried again next period */
    x->w = w;
    x->n = n;
    char *p = x->sent;
    rjq__argv a;
    rjq__argv_init(&a);
    RJQ__KEYS(&a, w->q, RJQ__K_ACTIVE, RJQ__K_COLUMNS, RJQ__K_DEADLINES, RJQ__K_HELD);
    rjq__argv_ll(&a, w->lease_ms);
    for (rjq_job *j = w->jobs; j; j = j->next)
        extend_add(&a, &p, j->id, strlen(j->id), j->token, j->deadline, w->lease_ms);
    for (fetch *f = w->fetches; f; f = f->next)
        for (size_t i = 0; i < f->n; i++)
            if (!f->jobs[i].cancelled)
                extend_add(&a, &p, f->jobs[i].id, f->jobs[i].idlen, rjq__tok_str(f->tok),
                           f->deadline, w->lease_ms);
    for (claim_ctx *k = w->claims; k; k = k->next) /* (last: extend.lua) */
        extend_add(&a, &p, "", 0, k->token, 0, w->lease_ms);
    /* (the lease's end it asks for: no earlier than this, by the server's clock) */
    long long now = rjq__server_now(c);
    if (!a.oom && rjq__script(c, RJQ__S_EXTEND, 0, on_extended, x, a.n, a.v, a.len) == RJQ_OK) {
        w->extend.busy++;
        for (fetch *f = w->fetches; f && now > 0; f = f->next)
            if (now + w->lease_ms > f->until) f->until = now + w->lease_ms;
        for (claim_ctx *k = w->claims; k && now > 0; k = k->next)
            if (now + w->lease_ms > k->until) k->until = now + w->lease_ms;
    } else {
        free(x);
    }
    rjq__argv_free(&a);
}

/* ---- the queue's workers and the client's ------------------------------- */

static void part_tick(rjq_queue *q, void *state) {
    part *p = state;
    (void)q;
    RJQ_ASSERT(!p->ticking); /* (a worker's claims and stops below do not tick) */
    p->ticking = 1;
    for (rjq_worker *w = p->workers, *next; w; w = next) {
        next = w->next;
        check_invariants(w);
        if (w->want_claim || w->want_offer) {
            w->want_claim = w->want_offer = 0;
            claim(w);
        }
        if (w->g && w->g->kick) {
            w->g->kick = 0;
            schedule(w->g);
        }
        check_stopped(w);
    }
    p->ticking = 0; /* (the client's free waits for the tick: p is still here) */
}

static void part_cancel(rjq_queue *q, void *state) {
    part *p = state;
    (void)q;
    while (p->workers) destroy(p->workers);
}

static void part_close(rjq_queue *q, void *state) {
    (void)q;
    free(state);
}

/* The handle was closed (no worker left on it): its doorbell and visits go. */
static void part_release(rjq_queue *q, void *state) {
    (void)state;
    rjq__unsubscribe(rjq_queue_client(q), rjq__queue_key(q, RJQ__K_WAKE, NULL), q);
    rjq__upkeep_leave(q);
}

static const rjq__part_ops part_ops = {part_tick, NULL, part_cancel, part_close, part_release};

static void on_left_waiters(rjq_client *c, int status, redisReply *r, void *priv) {
    (void)r, (void)priv;
    rjq__background_failed(c, status, "worker stop");
}

/* Stop: no more claims or pushes; cb (may be NULL) once nothing is in flight. */
static void stop(rjq_worker *w, rjq_stopped_cb *cb, void *data) {
    rjq_client *c = client_of(w);
    /* No more pushes: drop the registration (jobs pushed meanwhile are
     * handed back as they arrive). */
    if (rjq__push_leave(w->reg, on_background_done, &w->deregister) == RJQ_OK)
        w->deregister.busy++;
    /* Nor a place among the waiters for a slot of a limited queue
     * (claim.lua): the slots are not left to it */
    size_t klen;
    const char *key = rjq__queue_key(w->q, RJQ__K_WAITERS, &klen);
    const char *field = w->reg ? rjq__reg_field(w->reg) : NULL;
    const char *argv[3] = {"HDEL", key, field};
    size_t lens[3] = {4, klen, field ? strlen(field) : 0};
    if (field) rjq__command(c, 0, on_left_waiters, NULL, 3, argv, lens); /* (failed: its grace ends it) */
    set_state(w, W_STOPPING);
    w->stop_cb = cb;
    w->stop_data = data;
    /* Running jobs keep their lease extension until they finish. */
    rjq__timer_stop(c, &w->poll_timer);
    rjq__queue_kick(w->q); /* the tick finishes the stop if nothing is in flight */
}

/* Hand w's running jobs back to the queue (attempt not counted) and let
 * go of their handles: the user's complete/fail then returns ECLOSED. */
static size_t hand_back(rjq_worker *w) {
    size_t n = 0;
    for (rjq_job *j = w->jobs; j; j = j->next) n++;
    rjq__pushed *back = n ? malloc(n * sizeof *back) : NULL;
    size_t k = 0;
    for (rjq_job *j = w->jobs; back && j; j = j->next) back[k++] = job_ref(j);
    size_t sent = k && rjq__push_release(w->q, NULL, back, k) == RJQ_OK ? k : 0;
    free(back); /* not sent (out of memory): they come back after their lease */
    /* expired ones are not handed back (their timeout's failure stands):
     * only let go of */
    let_go(w);
    check_stopped(w);
    return sent;
}

/* The client's workers, queue by queue (fn may free the worker it gets). */
static size_t each_worker(rjq_client *c, size_t (*fn)(rjq_worker *w)) {
    size_t n = 0;
    for (rjq_queue *q = rjq__queue_first(c); q && !rjq__closing(c); q = rjq__queue_next(q)) {
        part *p = rjq__queue_part(q, RJQ__PART_WORKERS);
        for (rjq_worker *w = p ? p->workers : NULL, *next; w; w = next) {
            next = w->next;
            n += fn(w);
        }
    }
    return n;
}

static size_t drain_one(rjq_worker *w) {
    if (w->state == W_ACTIVE && rjq__accepting(client_of(w))) stop(w, NULL, NULL);
    return 0;
}

static size_t count_one(rjq_worker *w) {
    (void)w;
    return 1; /* a worker exists until nothing of it is in flight */
}

static void workers_drain(rjq_client *c, void *state) {
    (void)state;
    each_worker(c, drain_one);
}

static size_t workers_busy(rjq_client *c, void *state) {
    (void)state;
    return each_worker(c, count_one);
}

static size_t workers_hand_back(rjq_client *c, void *state) {
    (void)state;
    return each_worker(c, hand_back);
}

/* A connection is back: doorbells, pushes or replies may have been lost;
 * every worker claims and registers afresh. */
static void workers_ready(rjq_client *c, void *state, int kind) {
    (void)state, (void)kind;
    for (rjq_queue *q = rjq__queue_first(c); q; q = rjq__queue_next(q)) {
        part *p = rjq__queue_part(q, RJQ__PART_WORKERS);
        for (rjq_worker *w = p ? p->workers : NULL, *next; w; w = next) {
            next = w->next;
            resync(w);
        }
    }
}

static const rjq__feature workers_feature = {.name = "workers",
                                             .ready = workers_ready,
                                             .drain = workers_drain,
                                             .busy = workers_busy,
                                             .hand_back = workers_hand_back};

/* The client's visit of the queue (upkeep.c). */
static int visit_wanted(rjq_queue *q, void *arg) {
    (void)q;
    return ((part *)arg)->workers != NULL;
}

/* The visit found jobs that no doorbell or push brought: claim. */
static void visit_waiting(rjq_queue *q, void *arg) {
    part *p = arg;
    (void)q;
    for (rjq_worker *w = p->workers, *next; w; w = next) {
        next = w->next;
        if (w->mode == CL_IDLE && !w->claiming) resync(w);
    }
}

/* The queue's workers for the process registry (upkeep.c). */
static void visit_describe(rjq_queue *q, void *arg, rjq__describe *d) {
    const part *p = arg;
    (void)q;
    for (const rjq_worker *w = p->workers; w; w = w->next) {
        d->concurrency += w->concurrency;
        d->running += w->running;
        for (const rjq_job *j = w->jobs; j && d->nids < RJQ_PROCESS_JOBS_MAX; j = j->next)
            d->ids[d->nids++] = j->id;
    }
}

static const rjq__visit_ops visit_ops = {visit_wanted, visit_waiting, visit_describe};

/* The queue's worker list, with its doorbell subscribed, made on first use. */
static part *part_of(rjq_queue *q) {
    part *p = rjq__queue_part(q, RJQ__PART_WORKERS);
    if (p) return p;
    rjq_client *c = rjq_queue_client(q);
    /* The feature has no state of its own: a marker that it is registered. */
    static char registered;
    if (rjq__feature_add(c, &workers_feature, &registered) != RJQ_OK) return NULL;
    if ((p = calloc(1, sizeof *p)) == NULL) return NULL;
    if (rjq__subscribe(c, rjq__queue_key(q, RJQ__K_WAKE, NULL), on_doorbell, q) != RJQ_OK) {
        free(p);
        return NULL;
    }
    rjq__queue_set_part(q, RJQ__PART_WORKERS, &part_ops, p);
    return p;
}

/* ---- public API ---------------------------------------------------------- */

static int setup_timers(rjq_client *c, rjq_worker *w) {
    if (rjq__timer_setup(c, &w->poll_timer, on_poll_timer, w) != RJQ_OK) return RJQ_ENOMEM;
    if (rjq__timer_setup(c, &w->extend_timer, on_extend_timer, w) != RJQ_OK) {
        rjq__timer_teardown(c, &w->poll_timer);
        return RJQ_ENOMEM;
    }
    return RJQ_OK;
}

/* Options checked, as rjq_worker_start() documents. */
static int check_options(rjq_client *c, const rjq_worker_options *o) {
    if (o && (o->concurrency < 0 || o->lease_ms < 0 || o->poll_ms < 0 || o->reclaim_ms < 0))
        return RJQ_EINVAL;
    if (o && o->lease_ms > 0 && o->lease_ms < 30) {
        rjq__errmsg(c, "lease_ms must be at least 30");
        return RJQ_EINVAL;
    }
    return RJQ_OK;
}

/* A worker on q, made and linked but not yet claiming (see go_live). */
static rjq_worker *make_worker(rjq_queue *q, const rjq_worker_options *o,
                               rjq_handler_fn *handler, void *data) {
    rjq_client *c = rjq_queue_client(q);
    part *p = part_of(q);
    rjq_worker *w = p ? calloc(1, sizeof *w) : NULL;
    if (w == NULL) return NULL;
    w->q = q;
    w->handler = handler;
    w->on_notice = o ? o->on_notice : NULL;
    w->data = data;
    w->concurrency = o && o->concurrency ? o->concurrency : 1;
    w->lease_ms = o && o->lease_ms ? o->lease_ms : 30000;
    w->poll_ms = o && o->poll_ms ? o->poll_ms : 5000;
    w->reclaim_ms = o && o->reclaim_ms ? o->reclaim_ms : 1000;
    w->state = W_ACTIVE;
    w->mode = CL_IDLE;
    background_init(&w->extend, w, "lease extension");
    background_init(&w->deregister, w, "worker stop");
    if (setup_timers(c, w) != RJQ_OK) {
        free(w);
        return NULL;
    }
    if ((w->reg = rjq__push_join(q, &reg_ops, w)) == NULL ||
        (w->held = rjq__held_join(q, rjq__reg_id(w->reg))) == NULL) {
        rjq__push_free(w->reg);
        rjq__timer_teardown(c, &w->poll_timer);
        rjq__timer_teardown(c, &w->extend_timer);
        free(w);
        return NULL;
    }
    w->next = p->workers;
    p->workers = w;
    rjq__queue_use(q); /* rjq_queue_close refuses until it stopped (detach) */
    /* (out of memory here: the queue is not visited; doorbells and pushes
     * still reach the worker) */
    rjq__upkeep_join(q, &visit_ops, p, w->reclaim_ms);
    return w;
}

/* Undo make_worker (nothing of it was sent). */
static void unmake_worker(rjq_worker *w) {
    detach(w);
    free(w);
}

/* Start its lease extension and its first claim. */
static void go_live(rjq_worker *w) {
    rjq__timer_start(client_of(w), &w->extend_timer, (uint64_t)(w->lease_ms / 3));
    want_claim(w);
    rjq__queue_register(w->q);
}

int rjq_worker_start(rjq_queue *q, const rjq_worker_options *o, rjq_handler_fn *handler,
                     void *data, rjq_worker **out) {
    if (q == NULL || handler == NULL || out == NULL) return RJQ_EINVAL;
    *out = NULL;
    rjq_client *c = rjq_queue_client(q);
    if (!rjq__accepting(c) || rjq__draining(c)) return RJQ_ECLOSED;
    int rc = check_options(c, o);
    if (rc != RJQ_OK) return rc;
    rjq_worker *w = make_worker(q, o, handler, data);
    if (w == NULL) return RJQ_ENOMEM;
    go_live(w);
    *out = w;
    return RJQ_OK;
}

int rjq_worker_start_queues(rjq_queue *const *queues, size_t n, rjq_worker_order order,
                            const int *weights, const rjq_worker_options *o,
                            rjq_handler_fn *handler, void *data, rjq_worker **out) {
    if (out) *out = NULL;
    if (queues == NULL || n == 0 || n > RJQ_WORKER_QUEUES_MAX || handler == NULL || out == NULL ||
        (order != RJQ_WORKER_STRICT && order != RJQ_WORKER_WEIGHTED) ||
        (order == RJQ_WORKER_WEIGHTED && weights == NULL))
        return RJQ_EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (queues[i] == NULL || rjq_queue_client(queues[i]) != rjq_queue_client(queues[0]))
            return RJQ_EINVAL;
        for (size_t k = 0; k < i; k++)
            if (queues[k] == queues[i]) return RJQ_EINVAL;
        if (order == RJQ_WORKER_WEIGHTED &&
            (weights[i] < 1 || weights[i] > RJQ_WORKER_WEIGHT_MAX))
            return RJQ_EINVAL;
    }
    rjq_client *c = rjq_queue_client(queues[0]);
    if (!rjq__accepting(c) || rjq__draining(c)) return RJQ_ECLOSED;
    int rc = check_options(c, o);
    if (rc != RJQ_OK) return rc;
    group *g = calloc(1, sizeof *g);
    if (g == NULL) return RJQ_ENOMEM;
    g->order = order;
    g->concurrency = o && o->concurrency ? o->concurrency : 1;
    for (size_t i = 0; i < n; i++) {
        rjq_worker *w = make_worker(queues[i], o, handler, data);
        if (w == NULL) {
            for (int k = 0; k < g->n; k++) unmake_worker(g->m[k]);
            free(g);
            return RJQ_ENOMEM;
        }
        w->g = g;
        g->weight[g->n] = order == RJQ_WORKER_WEIGHTED ? weights[i] : 1;
        g->m[g->n++] = w;
    }
    g->alive = g->n;
    for (int i = 0; i < g->n; i++) go_live(g->m[i]);
    *out = g->m[0];
    return RJQ_OK;
}

/* (worker.h) The handle the user knows w by: its group's, or its own. */
rjq_worker *rjq__worker_handle(rjq_worker *w) {
    return w->g ? w->g->m[0] : w;
}

static int stop_group(group *g, rjq_stopped_cb *cb, void *data) {
    for (int i = 0; i < g->n; i++)
        if (g->m[i]->state != W_ACTIVE) return RJQ_EBUSY;
    rjq_client *c = client_of(g->m[0]);
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    rjq__enter(c); /* the HDELs may flush enqueues, whose callbacks may free c */
    g->stopping = 1;
    g->stop_cb = cb;
    g->stop_data = data;
    for (int i = 0; i < g->n && rjq__accepting(c); i++) stop(g->m[i], NULL, NULL);
    if (!rjq__accepting(c)) { /* a flushed callback freed the client */
        g->stop_cb = NULL;    /* cb is never called; the worker goes with c */
        rjq__leave(c);
        return RJQ_ECLOSED;
    }
    rjq__leave(c);
    return RJQ_OK;
}

int rjq_worker_stop(rjq_worker *w, rjq_stopped_cb *cb, void *data) {
    if (w == NULL) return RJQ_EINVAL;
    if (w->g) return stop_group(w->g, cb, data);
    if (w->state != W_ACTIVE) return RJQ_EBUSY;
    rjq_client *c = client_of(w);
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    rjq__enter(c); /* the HDEL may flush enqueues, whose callbacks may free c */
    stop(w, cb, data);
    if (!rjq__accepting(c)) { /* a flushed callback freed the client */
        w->stop_cb = NULL;    /* cb is never called; the worker goes with c */
        rjq__leave(c);
        return RJQ_ECLOSED;
    }
    rjq__leave(c);
    return RJQ_OK;
}

int rjq_worker_running(const rjq_worker *w) {
    if (w->g == NULL) return w->running + w->expired;
    int n = 0;
    for (int i = 0; i < w->g->n; i++) n += w->g->m[i]->running + w->g->m[i]->expired;
    return n;
}
