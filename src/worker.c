/*
 * Workers: the claim loop, doorbell wake-ups, lease extension and the
 * reclaim sweep timer.
 *
 * A worker claims while it has free capacity and its last claim filled
 * everything it asked for (`hungry`). When a claim comes back short, the
 * queue had nothing more ready at that instant, so the worker waits for:
 * the doorbell (rung by any script that makes the queue non-empty), a
 * timer for the next delayed job, or the slow safety poll. A doorbell
 * heard while a claim is in flight triggers one more claim. Claims ride
 * the queue's tick, behind the completions of the same loop turn, so the
 * capacity they free is claimed in the same round trip. A hungry worker
 * keeps two claims (of half its capacity each) in flight, so Redis works
 * on one while the worker runs the other's jobs.
 *
 * Push delivery (lib.lua push_to_idle): a claim that comes back short
 * registers the slots it could not fill in the queue's idle hash, and
 * enqueue then hands new jobs straight to the worker on its push channel
 * (push.c): no doorbell, no claim round trip. The worker keeps the ledger
 *     running + asked + offered <= concurrency
 * where `offered` counts its registered slots not yet used by a push: a
 * short claim adds the slots it registered, a push moves one from offered
 * to running, a job finished while idle offers its slot again with the
 * completion batch (job.c). Whenever the ledger may be out of step with
 * Redis (a reconnect, a lost reply, the safety poll) or the offered slots
 * are wanted for claiming (the doorbell), the next claim replaces the
 * registration under a new epoch; jobs pushed under an older epoch are
 * only started if there is room, else handed back (release.lua).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define RECLAIM_LIMIT 1000
#define CLAIMS_IN_FLIGHT 2
/* Jobs per claim script call: well inside Lua's unpack limit (~8000
 * values; the claim unpacks two per job). Larger capacity takes more calls. */
#define CLAIM_MAX 1000

static void claim(rjq_worker *w);

static rjq_client *client_of(rjq_worker *w) {
    return w->q->c;
}

/* ---- lifetime ----------------------------------------------------------- */

static void unlink_worker(rjq_worker *w) {
    for (rjq_worker **p = &w->q->workers; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            break;
        }
}

static void stop_timers(rjq_worker *w) {
    rjq_client *c = client_of(w);
    rjq__timer_stop(c, &w->poll_timer);
    rjq__timer_stop(c, &w->extend_timer);
    rjq__timer_stop(c, &w->reclaim_timer);
}

/* Finish a stop once nothing of the worker is in flight. */
static void check_stopped(rjq_worker *w) {
    if (!w->stopping || w->running || w->finishing || w->claiming || w->sweep.busy ||
        w->extend.busy || w->deregister.busy)
        return;
    rjq_stopped_cb *cb = w->stop_cb;
    void *data = w->stop_data;
    unlink_worker(w);
    stop_timers(w);
    if (cb) cb(w, RJQ_OK, data);
    free(w->field);
    free(w);
}

void rjq__worker_destroy(rjq_worker *w) {
    unlink_worker(w);
    stop_timers(w);
    for (rjq_job *j = w->jobs, *next; j; j = next) {
        next = j->next;
        j->w = NULL; /* the user still holds it; complete/fail release it */
        j->prev = j->next = NULL;
    }
    if (w->stopping && w->stop_cb) w->stop_cb(w, RJQ_ECANCELED, w->stop_data);
    free(w->field);
    free(w);
}

/* ---- doorbell and timers ------------------------------------------------ */

int rjq__worker_free_slots(const rjq_worker *w) {
    return w->concurrency - w->running - w->asked - w->offered;
}

/* Work is ready: claim (with the registered slots too, see claim()). A
 * doorbell that no claim could answer yet stays pending. */
void rjq__worker_poke(rjq_worker *w) {
    w->wake_pending = 1;
    claim(w);
}

void rjq__worker_resync(rjq_worker *w) {
    w->reset_pending = 1;
    rjq__worker_poke(w);
}

void rjq__workers_resync(rjq_queue *q) {
    for (rjq_worker *w = q->workers, *next; w; w = next) {
        next = w->next;
        rjq__worker_resync(w);
    }
}

static void on_doorbell(rjq_client *c, const char *channel, const char *msg, size_t len,
                        void *arg) {
    rjq_queue *q = arg;
    (void)c, (void)channel, (void)len;
    if (msg == NULL) { /* (re)subscribed: doorbells may have been missed */
        rjq__workers_resync(q);
        return;
    }
    for (rjq_worker *w = q->workers, *next; w; w = next) {
        next = w->next;
        rjq__worker_poke(w);
    }
}

static void on_poll_timer(rjq__timer *t) {
    rjq_worker *w = t->owner;
    w->reset_pending = 1;
    claim(w);
}

void rjq__workers_tick(rjq_queue *q) {
    for (rjq_worker *w = q->workers, *next; w; w = next) {
        next = w->next;
        if (w->want_claim || w->want_offer) {
            w->want_claim = w->want_offer = 0;
            claim(w);
        }
        check_stopped(w);
    }
}

static void want_claim(rjq_worker *w) {
    w->want_claim = 1;
    rjq__queue_kick(w->q);
}

/* ---- claim ------------------------------------------------------------ */

/* A job from one entry of a claim reply (id, payload, attempt,
 * max_attempts) and the reply's token; 0 on success. */
static int reply_job(redisReply **e, const redisReply *token, rjq__pushed *d) {
    if (e[0]->type != REDIS_REPLY_STRING || e[1]->type != REDIS_REPLY_STRING) return -1;
    d->id = e[0]->str, d->idlen = e[0]->len;
    d->token = token->str, d->toklen = token->len;
    d->payload = e[1]->str, d->len = e[1]->len;
    d->attempt = (int)e[2]->integer;
    d->max_attempts = (int)e[3]->integer;
    return 0;
}

static rjq_job *new_job(rjq_worker *w, const rjq__pushed *d) {
    if (d->toklen >= sizeof(((rjq_job *)0)->token)) return NULL;
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
    j->attempt = d->attempt;
    j->max_attempts = d->max_attempts;
    j->prev = NULL;
    j->next = w->jobs;
    if (w->jobs) w->jobs->prev = j;
    w->jobs = j;
    w->running++;
    return j;
}

static void unlink_job(rjq_worker *w, rjq_job *job) {
    if (job->prev) job->prev->next = job->next;
    else w->jobs = job->next;
    if (job->next) job->next->prev = job->prev;
    w->running--;
}

/* A job never handed to the handler, or handed back while the client
 * closes: forget and free it (its lease brings it back). */
void rjq__worker_job_dropped(rjq_worker *w, rjq_job *job) {
    unlink_job(w, job);
    free(job);
}

/* Idle: wait for the doorbell, the next delayed job, or the safety poll. */
static void go_idle(rjq_worker *w, long long next_due) {
    long long wait = w->poll_ms;
    if (next_due >= 0 && next_due + 1 < wait) wait = next_due + 1;
    rjq__timer_start(client_of(w), &w->poll_timer, (uint64_t)wait);
}

/* Hand jobs to the handler; once the client is being freed, leave the
 * rest to their lease. */
static void run_jobs(rjq_worker *w, rjq_job **jobs, size_t n) {
    rjq_client *c = client_of(w);
    size_t i = 0;
    for (; i < n && !c->free_pending; i++) w->handler(jobs[i], w->data);
    for (; i < n; i++) rjq__worker_job_dropped(w, jobs[i]);
}

typedef struct claim_ctx {
    rjq_worker *w;
    int asked;
    unsigned epoch;
} claim_ctx;

static void on_claimed(rjq_client *c, int status, redisReply *r, void *priv) {
    claim_ctx *ctx = priv;
    rjq_worker *w = ctx->w;
    int asked = ctx->asked;
    unsigned ctx_epoch = ctx->epoch;
    free(ctx);
    w->claiming--;
    w->asked -= asked;
    if (c->closing) return;
    if (status == RJQ_OK && (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
                             (r->elements - 3) % 4 != 0 ||
                             r->element[1]->type != REDIS_REPLY_INTEGER ||
                             r->element[2]->type != REDIS_REPLY_STRING)) {
        rjq__errmsg(c, "claim: unexpected reply");
        status = RJQ_EPROTO;
    }
    if (status != RJQ_OK) {
        /* ECONN: the reconnect pokes us; anything else: the poll retries.
         * Whether it registered slots is unknown: replace the registration. */
        w->hungry = 0;
        w->reset_pending = 1;
        go_idle(w, -1);
        check_stopped(w);
        return;
    }
    if (ctx_epoch == w->epoch) w->offered += (int)r->element[1]->integer;
    size_t got = (r->elements - 3) / 4;
    rjq_job **jobs = got ? malloc(got * sizeof *jobs) : NULL;
    size_t made = 0;
    for (size_t i = 0; i < got && jobs; i++) {
        rjq__pushed d;
        rjq_job *j =
            reply_job(&r->element[3 + 4 * i], r->element[2], &d) == 0 ? new_job(w, &d) : NULL;
        if (j) jobs[made++] = j;
    }
    /* Jobs that could not be handed out (out of memory) are left to their
     * lease: they come back through the reclaim sweep. */
    w->hungry = (int)got == asked;
    if (w->hungry) rjq__timer_stop(c, &w->poll_timer);
    else go_idle(w, r->element[0]->integer);
    run_jobs(w, jobs, made);
    free(jobs);
    if (w->wake_pending || w->hungry || w->reset_pending) want_claim(w);
    check_stopped(w);
}

/* Send one claim for up to `want` jobs; reset: under a new epoch, its
 * unfilled slots replace the registration. */
static int send_claim(rjq_worker *w, int want, int reset) {
    rjq_client *c = client_of(w);
    rjq_queue *q = w->q;
    claim_ctx *ctx = malloc(sizeof *ctx);
    if (ctx == NULL) return RJQ_ENOMEM;
    ctx->w = w;
    ctx->asked = want;
    ctx->epoch = reset ? w->epoch + 1 : w->epoch;
    char token[24];
    snprintf(token, sizeof token, "%016llx", (unsigned long long)rjq__random(c));
    rjq__argv a;
    rjq__argv_init(&a);
    RJQ__KEYS(&a, q, RJQ__K_READY, RJQ__K_PRIO, RJQ__K_DELAYED, RJQ__K_ACTIVE, RJQ__K_STATS,
              RJQ__K_IDLE, RJQ__K_COLUMNS, RJQ__K_MONITORED);
    rjq__argv_key(&a, q, RJQ__K_JOB);
    rjq__argv_ll(&a, want);
    rjq__argv_ll(&a, w->lease_ms);
    rjq__argv_str(&a, token);
    rjq__argv_key(&a, q, RJQ__K_WAKE);
    rjq__argv_str(&a, w->field);
    rjq__argv_ll(&a, ctx->epoch);
    rjq__argv_str(&a, reset ? "1" : "0");
    int rc = a.oom ? RJQ_ENOMEM : rjq__script(c, RJQ__S_CLAIM, 0, on_claimed, ctx, a.n, a.v, a.len);
    rjq__argv_free(&a);
    if (rc != RJQ_OK) {
        free(ctx);
        return rc;
    }
    if (reset) {
        w->epoch = ctx->epoch;
        w->offered = 0;
        w->reset_pending = 0;
    }
    w->claiming++;
    w->asked += want;
    return RJQ_OK;
}

/* Claim up to the free capacity: one claim when waking up, two halves in
 * flight while the queue has a backlog. A claim that replaces the
 * registration waits for those in flight and takes the offered slots too. */
static void claim(rjq_worker *w) {
    rjq_client *c = client_of(w);
    int limit = w->hungry ? CLAIMS_IN_FLIGHT : 1;
    int chunk = w->hungry && w->concurrency >= 4 ? w->concurrency / 2 + w->concurrency % 2
                                                 : w->concurrency;
    if (chunk > CLAIM_MAX) chunk = CLAIM_MAX;
    /* Woken for work that was not pushed: take the offered slots back. */
    if (w->wake_pending && w->offered != 0) w->reset_pending = 1;
    while (!w->stopping && !c->closing && w->claiming < limit) {
        int reset = w->reset_pending;
        if (reset && w->claiming) return; /* on_claimed comes back here */
        int free_slots = rjq__worker_free_slots(w) + (reset ? w->offered : 0);
        if (free_slots <= 0) return;
        if (send_claim(w, free_slots < chunk ? free_slots : chunk, reset) != RJQ_OK) {
            go_idle(w, -1);
            return;
        }
        /* Only a claim that went out after the doorbell answers it: a
         * doorbell heard while nothing could be sent stays pending. */
        w->wake_pending = 0;
    }
}

/* ---- push delivery ------------------------------------------------------ */

/* Room for one pushed job: one of the registration's slots (epoch is the
 * current one), or any free slot for a job pushed under an older epoch. */
static int room_for_push(rjq_worker *w, unsigned epoch) {
    if (w->stopping) return 0;
    if (epoch != w->epoch) return rjq__worker_free_slots(w) > 0;
    if (w->running < w->concurrency) {
        w->offered--; /* below 0 until the reply of the claim that registered it */
        return 1;
    }
    w->reset_pending = 1; /* pushed beyond what we registered: out of step */
    return 0;
}

void rjq__worker_take_pushed(rjq_worker *w, unsigned epoch, const rjq__pushed *d, size_t n) {
    rjq_job **jobs = malloc(n * sizeof *jobs);
    rjq__pushed *back = malloc(n * sizeof *back);
    size_t made = 0, nback = 0;
    for (size_t i = 0; i < n; i++) {
        rjq_job *j = jobs && back && room_for_push(w, epoch) ? new_job(w, &d[i]) : NULL;
        if (j) jobs[made++] = j;
        else if (back) back[nback++] = d[i];
    }
    /* Out of memory for the list itself: the jobs wait for their lease. */
    if (nback) rjq__push_release(w->q, NULL, back, nback);
    free(back);
    run_jobs(w, jobs, made);
    free(jobs);
    if (w->reset_pending) want_claim(w);
    check_stopped(w);
}

size_t rjq__worker_offers(const rjq__complete_item *items, size_t n, rjq__offer *out) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        rjq_worker *w = items[i].w;
        if (!w->want_offer || w->hungry || w->stopping || w->reset_pending || w->wake_pending)
            continue; /* left to the tick: it claims */
        w->want_offer = 0;
        int slots = rjq__worker_free_slots(w);
        if (slots <= 0) continue;
        w->offered += slots;
        out[k].w = w;
        out[k].epoch = w->epoch;
        out[k].slots = slots;
        k++;
    }
    return k;
}

void rjq__worker_offer_done(const rjq__offer *o, int status, int registered) {
    rjq_worker *w = o->w;
    if (status == RJQ_OK && registered) return;
    /* Work is waiting, or the registration changed: claim instead. */
    if (o->epoch == w->epoch) w->offered -= o->slots;
    if (status != RJQ_OK) w->reset_pending = 1; /* it may have been registered */
    if (!w->stopping && !client_of(w)->closing) want_claim(w);
}

/* ---- finishing jobs --------------------------------------------------- */

void rjq__worker_job_done(rjq_worker *w, rjq_job *job) {
    unlink_job(w, job);
    free(job);
    w->finishing++;
    /* the caller kicks the tick */
    if (w->hungry || w->wake_pending) w->want_claim = 1;
    else w->want_offer = 1;
}

void rjq__worker_finish_replied(rjq_worker *w) {
    w->finishing--;
    if (!client_of(w)->closing) check_stopped(w);
}

/* A background request (priv: its rjq__background) was answered: report
 * a failure, and see whether a stopping worker is done. */
static void on_background_done(rjq_client *c, int status, redisReply *r, void *priv) {
    rjq__background *b = priv;
    (void)r;
    b->busy = 0;
    rjq__background_failed(c, status, b->what);
    if (!c->closing) check_stopped(b->w);
}

static void background_init(rjq__background *b, rjq_worker *w, const char *what) {
    b->w = w;
    b->what = what;
}

/* ---- lease extension ---------------------------------------------------- */

static void on_extend_timer(rjq__timer *t) {
    rjq_worker *w = t->owner;
    rjq_client *c = client_of(w);
    rjq__timer_start(c, &w->extend_timer, (uint64_t)(w->lease_ms / 3));
    if (w->jobs == NULL || w->extend.busy) return;
    rjq__argv a;
    rjq__argv_init(&a);
    RJQ__KEYS(&a, w->q, RJQ__K_ACTIVE, RJQ__K_COLUMNS);
    rjq__argv_ll(&a, w->lease_ms);
    for (rjq_job *j = w->jobs; j; j = j->next) {
        rjq__argv_str(&a, j->id);
        rjq__argv_str(&a, j->token);
    }
    if (!a.oom &&
        rjq__script(c, RJQ__S_EXTEND, 0, on_background_done, &w->extend, a.n, a.v, a.len) == RJQ_OK)
        w->extend.busy = 1;
    rjq__argv_free(&a);
}

/* ---- reclaim sweep ------------------------------------------------------ */

/* Build the reclaim script call for queue q (shared with rjq_queue_reclaim). */
int rjq__reclaim_send(rjq_queue *q, long guard_ms, rjq__reply_fn *fn, void *priv) {
    rjq__argv a;
    rjq__argv_init(&a);
    RJQ__KEYS(&a, q, RJQ__K_ACTIVE, RJQ__K_READY, RJQ__K_PRIO, RJQ__K_DEAD, RJQ__K_STATS, RJQ__K_GUARD,
              RJQ__K_COMPLETED, RJQ__K_COLUMNS, RJQ__K_MONITORED);
    rjq__argv_key(&a, q, RJQ__K_JOB);
    rjq__argv_key(&a, q, RJQ__K_WAKE);
    rjq__argv_ll(&a, guard_ms);
    rjq__argv_ll(&a, RECLAIM_LIMIT);
    rjq__argv_ll(&a, q->dead_max);
    rjq__argv_ll(&a, q->retention_ms);
    rjq__argv_ll(&a, q->completed_max);
    int rc = a.oom ? RJQ_ENOMEM : rjq__script(q->c, RJQ__S_RECLAIM, 0, fn, priv, a.n, a.v, a.len);
    rjq__argv_free(&a);
    return rc;
}

static void on_reclaim_timer(rjq__timer *t) {
    rjq_worker *w = t->owner;
    rjq__timer_start(client_of(w), &w->reclaim_timer, (uint64_t)w->reclaim_ms);
    if (!w->sweep.busy &&
        rjq__reclaim_send(w->q, w->reclaim_ms, on_background_done, &w->sweep) == RJQ_OK)
        w->sweep.busy = 1;
}

/* ---- public API ---------------------------------------------------------- */

int rjq_worker_start(rjq_queue *q, const rjq_worker_options *o, rjq_handler_fn *handler,
                     void *data, rjq_worker **out) {
    if (q == NULL || handler == NULL || out == NULL) return RJQ_EINVAL;
    *out = NULL;
    rjq_client *c = q->c;
    if (c->closing) return RJQ_ECLOSED;
    if (o && (o->concurrency < 0 || o->lease_ms < 0 || o->poll_ms < 0 || o->reclaim_ms < 0))
        return RJQ_EINVAL;
    if (o && o->lease_ms > 0 && o->lease_ms < 30) {
        rjq__errmsg(c, "lease_ms must be at least 30");
        return RJQ_EINVAL;
    }
    rjq_worker *w = calloc(1, sizeof *w);
    if (w == NULL) return RJQ_ENOMEM;
    w->q = q;
    w->handler = handler;
    w->data = data;
    w->concurrency = o && o->concurrency ? o->concurrency : 1;
    w->lease_ms = o && o->lease_ms ? o->lease_ms : 30000;
    w->poll_ms = o && o->poll_ms ? o->poll_ms : 5000;
    w->reclaim_ms = o && o->reclaim_ms ? o->reclaim_ms : 1000;
    w->reset_pending = 1; /* the first claim registers from scratch */
    background_init(&w->extend, w, "lease extension");
    background_init(&w->sweep, w, "reclaim");
    background_init(&w->deregister, w, "worker stop");
    rjq__timer_init(&w->poll_timer, on_poll_timer, w);
    rjq__timer_init(&w->extend_timer, on_extend_timer, w);
    rjq__timer_init(&w->reclaim_timer, on_reclaim_timer, w);
    int rc = RJQ_OK;
    if (!q->wake_subscribed) {
        rc = rjq__subscribe(c, q->keys[RJQ__K_WAKE], on_doorbell, q);
        q->wake_subscribed = rc == RJQ_OK;
    }
    if (rc == RJQ_OK) rc = rjq__push_listen(q);
    if (rc == RJQ_OK) {
        w->id = ++q->next_worker_id;
        if ((w->field = rjq__push_field(q, w->id)) == NULL) rc = RJQ_ENOMEM;
    }
    if (rc != RJQ_OK) {
        free(w);
        return rc;
    }
    w->next = q->workers;
    q->workers = w;
    rjq__timer_start(c, &w->extend_timer, (uint64_t)(w->lease_ms / 3));
    rjq__timer_start(c, &w->reclaim_timer, (uint64_t)w->reclaim_ms);
    want_claim(w);
    *out = w;
    return RJQ_OK;
}

/* No more pushes: drop the registration (jobs pushed meanwhile are handed
 * back as they arrive). */
static void deregister(rjq_worker *w) {
    rjq_queue *q = w->q;
    const char *argv[3] = {"HDEL", q->keys[RJQ__K_IDLE], w->field};
    if (rjq__command(q->c, 0, on_background_done, &w->deregister, 3, argv, NULL) == RJQ_OK)
        w->deregister.busy = 1;
}

int rjq_worker_stop(rjq_worker *w, rjq_stopped_cb *cb, void *data) {
    if (w == NULL) return RJQ_EINVAL;
    if (w->stopping) return RJQ_EBUSY;
    if (client_of(w)->closing) return RJQ_ECLOSED;
    w->stopping = 1;
    w->stop_cb = cb;
    w->stop_data = data;
    deregister(w);
    /* Running jobs keep their lease extension until they finish. */
    rjq__timer_stop(client_of(w), &w->poll_timer);
    rjq__timer_stop(client_of(w), &w->reclaim_timer);
    rjq__queue_kick(w->q); /* the tick finishes the stop if nothing is in flight */
    return RJQ_OK;
}

int rjq_worker_running(const rjq_worker *w) {
    return w->running;
}
