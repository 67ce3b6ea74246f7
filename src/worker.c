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
 *           handled (on_claimed, worker_claim.c), so two replies read together do not
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
 * turn, so the capacity they free is claimed in the same round trip; a
 * doorbell's or the poll timer's claim too, so it never overtakes a
 * completion made earlier in the turn (held back by a concurrency limit
 * whose slot that completion frees, it would wait for the poll timer).
 * Its lifecycle (w->state, changed only by rjq__w_set_state): ACTIVE, then
 * STOPPING after rjq_worker_stop() or when the client closes gracefully
 * (no more claims; jobs that still arrive, by a claim in flight or a push,
 * are handed back, their attempt not counted; running jobs finish, or are
 * handed back at the close's deadline), then FINAL once its one last
 * recovering claim went out (see rjq__w_check_stopped), until nothing of it is
 * in flight, when it is freed. Its mode (w->mode, rjq__w_set_mode) is the claim
 * loop's; a job handle's place in it (j->place, rjq__w_job_move) says which list
 * holds it; what its wake-ups owe (w->wake, rjq__w_wake: a doorbell not yet
 * answered by a claim, a claim or an offer owed to the queue's next tick)
 * and its group scheduler's (g->sched, rjq__w_group_sched: running, a run
 * owed to a tick) are enums too, each changed by one function that asserts
 * the transition (worker_private.h has the tables).
 *
 * A worker of several queues is a group of such workers, one per queue,
 * under one slot budget; rjq__w_claim() asks the group's scheduler
 * (worker_group.c), which decides which member claims.
 *
 * Invariants (rjq__w_check, RJQ_ASSERTed at every step and at the
 * entry points the loop calls):
 *   0 <= claiming <= CLAIMS_IN_FLIGHT; asked == 0 when claiming == 0;
 *   claiming, asked, fetching and ids_only are what the lists of claims and
 *   fetches in flight add up to; running and expired are the lengths of
 *   the lists of running and expired jobs, each job on its place's list;
 *   running + asked + registering + fetching + offered <= concurrency
 *   (offered: the push ledger's; registering: the slots a shards group's
 *   member's claims in flight register beyond those they leave unfilled;
 *   fetching: claimed jobs whose payloads are on the way);
 *   0 <= expired <= concurrency (timed-out handles the user still holds,
 *   their slots freed: see rjq__w_expire());
 *   a stopping worker sends no claim but its last recovering one;
 *   a group's members: sum of running + asked + fetching <= its concurrency.
 *
 * The worker layer is several files (worker_private.h lists them, lowest
 * first); this one is its top: the queue's part (its tick), the
 * client's feature (drain, hand back, reconnect), the queue's visit, and
 * the public API of workers (the job handle's is worker_job.c's).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker_private.h"

static void background_init(background *b, rjq_worker *w, const char *what) {
    b->w = w;
    b->what = what;
}

static void part_tick(rjq_queue *q, void *state) {
    part *p = state;
    (void)q;
    RJQ_ASSERT(!p->ticking); /* (a worker's claims and stops below do not tick) */
    p->ticking = 1;
    for (rjq_worker *w = p->workers, *next; w; w = next) {
        next = w->next;
        rjq__w_check(w);
        rjq__w_report_refused(w);
        if (rjq__w_wake(w, WE_TICK)) rjq__w_claim(w);
        if (w->g && rjq__w_group_sched(w->g, GE_TICK)) rjq__w_schedule(w->g);
        rjq__w_check_stopped(w);
    }
    p->ticking = 0; /* (the client's free waits for the tick: p is still here) */
}

static void part_cancel(rjq_queue *q, void *state) {
    part *p = state;
    (void)q;
    while (p->workers) {
        rjq__w_report_refused(p->workers); /* (their callbacks may refuse more) */
        rjq__w_destroy(p->workers);
    }
}

static void part_close(rjq_queue *q, void *state) {
    (void)q;
    free(state);
}

/* The handle was closed (no worker left on it): its doorbell and visits go. */
static void part_release(rjq_queue *q, void *state) {
    (void)state;
    rjq__unsubscribe(rjq_queue_get_client(q), rjq__queue_key(q, RJQ__K_WAKE, NULL), q);
    rjq__upkeep_leave(q);
}

static const rjq__part_ops part_ops = {part_tick, NULL, part_cancel, part_close, part_release};

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
    if (w->state == W_ACTIVE && rjq__accepting(client_of(w))) rjq__w_stop(w, NULL, NULL);
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
    return each_worker(c, rjq__w_hand_back);
}

/* A connection is back: doorbells, pushes or replies may have been lost;
 * every worker claims and registers afresh. */
static void workers_ready(rjq_client *c, void *state, int kind) {
    (void)state, (void)kind;
    for (rjq_queue *q = rjq__queue_first(c); q; q = rjq__queue_next(q)) {
        part *p = rjq__queue_part(q, RJQ__PART_WORKERS);
        for (rjq_worker *w = p ? p->workers : NULL, *next; w; w = next) {
            next = w->next;
            rjq__w_resync(w);
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
        if (w->mode == CL_IDLE && !w->claiming) rjq__w_resync(w);
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
    rjq_client *c = rjq_queue_get_client(q);
    /* The feature has no state of its own: a marker that it is registered. */
    static char registered;
    if (rjq__feature_add(c, &workers_feature, &registered) != RJQ_OK) return NULL;
    if ((p = calloc(1, sizeof *p)) == NULL) return NULL;
    if (rjq__subscribe(c, rjq__queue_key(q, RJQ__K_WAKE, NULL), rjq__w_on_doorbell, q) != RJQ_OK) {
        free(p);
        return NULL;
    }
    rjq__queue_set_part(q, RJQ__PART_WORKERS, &part_ops, p);
    return p;
}

static int setup_timers(rjq_client *c, rjq_worker *w) {
    if (rjq__timer_setup(c, &w->poll_timer, rjq__w_on_poll_timer, w) != RJQ_OK) return RJQ_ENOMEM;
    if (rjq__timer_setup(c, &w->extend_timer, rjq__w_on_extend_timer, w) != RJQ_OK) {
        rjq__timer_teardown(c, &w->poll_timer);
        return RJQ_ENOMEM;
    }
    return RJQ_OK;
}

/* Options checked, as rjq_worker_start() documents, into *o (the caller's
 * as this library knows them: rjq.h "Extensible structs"; NULL: defaults). */
static int check_options(rjq_client *c, const rjq_worker_options *given, rjq_worker_options *o) {
    *o = (rjq_worker_options)RJQ_WORKER_OPTIONS_INIT;
    if (given && rjq__sized_in(c, o, sizeof *o, given, "rjq_worker_options") != RJQ_OK)
        return RJQ_EINVAL;
    if (o->concurrency < 0 || o->lease_ms < 0 || o->poll_ms < 0 || o->reclaim_ms < 0)
        return RJQ_EINVAL;
    if (o->lease_ms > 0 && o->lease_ms < 30) {
        rjq__errmsg(c, "lease_ms must be at least 30");
        return RJQ_EINVAL;
    }
    return RJQ_OK;
}

/* A worker on q, made and linked but not yet claiming (see go_live); o as
 * check_options made it. In new memory (given NULL) or in given's (zeroed
 * first; not freed when out of memory). */
static rjq_worker *make_worker(rjq_worker *given, rjq_queue *q, const rjq_worker_options *o,
                               rjq_handler_fn *handler, void *data) {
    rjq_client *c = rjq_queue_get_client(q);
    part *p = part_of(q);
    rjq_worker *w = p ? given ? given : calloc(1, sizeof *w) : NULL;
    if (w == NULL) return NULL;
    memset(w, 0, sizeof *w);
    w->q = q;
    w->handler = handler;
    w->on_notice = o->on_notice;
    w->on_job_start = o->on_job_start;
    w->on_job_finish = o->on_job_finish;
    w->data = data;
    w->concurrency = o->concurrency ? o->concurrency : 1;
    w->lease_ms = o->lease_ms ? o->lease_ms : 30000;
    w->poll_ms = o->poll_ms ? o->poll_ms : 5000;
    w->reclaim_ms = o->reclaim_ms ? o->reclaim_ms : 1000;
    w->state = W_ACTIVE;
    w->mode = CL_IDLE;
    w->recover = rjq__w_recover;
    background_init(&w->extend, w, "lease extension");
    background_init(&w->deregister, w, "worker stop");
    if (setup_timers(c, w) != RJQ_OK) {
        if (w != given) free(w);
        return NULL;
    }
    if ((w->reg = rjq__push_join(q, &rjq__w_reg_ops, w)) == NULL ||
        (w->held = rjq__held_join(q, rjq__reg_id(w->reg))) == NULL) {
        rjq__push_free(w->reg);
        rjq__timer_teardown(c, &w->poll_timer);
        rjq__timer_teardown(c, &w->extend_timer);
        if (w != given) free(w);
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

/* Undo make_worker (nothing of it was sent); given's memory is not freed. */
static void unmake_worker(rjq_worker *w, const rjq_worker *given) {
    rjq__w_detach(w);
    if (w != given) free(w);
}

/* Start its lease extension and its first claim. */
static void go_live(rjq_worker *w) {
    rjq__timer_start(client_of(w), &w->extend_timer, (uint64_t)(w->lease_ms / 3));
    rjq__w_want_claim(w);
    rjq__queue_register(w->q);
}

int rjq__worker_start_one(rjq_queue *q, const rjq_worker_options *given, rjq_handler_fn *handler,
                          void *data, rjq_worker **out) {
    if (q == NULL || handler == NULL || out == NULL) return RJQ_EINVAL;
    *out = NULL;
    rjq_client *c = rjq_queue_get_client(q);
    if (!rjq__accepting(c) || rjq__draining(c)) return RJQ_ECLOSED;
    rjq_worker_options o;
    int rc = check_options(c, given, &o);
    if (rc != RJQ_OK) return rc;
    rjq_worker *w = make_worker(NULL, q, &o, handler, data);
    if (w == NULL) return RJQ_ENOMEM;
    go_live(w);
    *out = w;
    return RJQ_OK;
}

/* A worker of queues[0..n-1] under one slot budget (options checked);
 * its first member in first's memory when given (rjq__worker_start_reserved). */
static int start_group(rjq_worker *first, rjq_queue *const *queues, size_t n,
                       rjq_worker_order order, const int *weights, const rjq_worker_options *o,
                       rjq_handler_fn *handler, void *data, rjq_worker **out) {
    group *g = calloc(1, sizeof *g);
    if (g == NULL) return RJQ_ENOMEM;
    g->shards = order == RJQ__WORKER_SHARDS;
    g->order = g->shards ? RJQ_WORKER_WEIGHTED : order;
    if (g->shards) order = RJQ_WORKER_WEIGHTED;
    g->concurrency = o->concurrency ? o->concurrency : 1;
    for (size_t i = 0; i < n; i++) {
        rjq_worker *w = make_worker(i == 0 ? first : NULL, queues[i], o, handler, data);
        if (w == NULL) {
            for (int k = 0; k < g->n; k++) unmake_worker(g->m[k], first);
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


int rjq__worker_queues_ok(rjq_queue *const *queues, size_t n, rjq_worker_order order,
                          const int *weights, rjq_handler_fn *handler, rjq_worker **out) {
    if (out) *out = NULL;
    if (queues == NULL || n == 0 || n > RJQ_WORKER_QUEUES_MAX || handler == NULL || out == NULL ||
        (order != RJQ_WORKER_STRICT && order != RJQ_WORKER_WEIGHTED) ||
        (order == RJQ_WORKER_WEIGHTED && weights == NULL))
        return RJQ_EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (queues[i] == NULL || rjq_queue_get_client(queues[i]) != rjq_queue_get_client(queues[0]))
            return RJQ_EINVAL;
        if (rjq__queue_refuse_front(queues[i], "rjq_worker_start_queues") != RJQ_OK)
            return RJQ_ESHARDED;
        for (size_t k = 0; k < i; k++)
            if (queues[k] == queues[i]) return RJQ_EINVAL;
        if (order == RJQ_WORKER_WEIGHTED &&
            (weights[i] < 1 || weights[i] > RJQ_WORKER_WEIGHT_MAX))
            return RJQ_EINVAL;
    }
    return RJQ_OK;
}

int rjq__worker_start_queues_now(rjq_queue *const *queues, size_t n, rjq_worker_order order,
                                 const int *weights, const rjq_worker_options *given,
                                 rjq_handler_fn *handler, void *data, rjq_worker **out) {
    int rc = rjq__worker_queues_ok(queues, n, order == RJQ__WORKER_SHARDS ? RJQ_WORKER_WEIGHTED : order,
                                   weights, handler, out);
    if (rc != RJQ_OK) return rc;
    rjq_client *c = rjq_queue_get_client(queues[0]);
    if (!rjq__accepting(c) || rjq__draining(c)) return RJQ_ECLOSED;
    rjq_worker_options o;
    rc = check_options(c, given, &o);
    if (rc != RJQ_OK) return rc;
    return start_group(NULL, queues, n, order, weights, &o, handler, data, out);
}

/* ---- a worker whose queues are not known yet (shard.c) ------------------------ */

/* Make w (zeroed) a reserved worker of q: a use of q. */
static void reserve_in(rjq_worker *w, rjq_queue *q, rjq_handler_fn *handler, void *data) {
    w->q = q;
    w->reserved = 1;
    w->handler = handler;
    w->data = data;
    w->state = W_ACTIVE;
    w->mode = CL_IDLE;
    rjq__queue_use(q); /* (rjq_queue_close refuses while it is) */
}

int rjq__worker_reserve(rjq_queue *q, const rjq_worker_options *given, rjq_handler_fn *handler,
                        void *data, rjq_worker_options *o, rjq_worker **out) {
    if (q == NULL || handler == NULL || out == NULL) return RJQ_EINVAL;
    *out = NULL;
    rjq_client *c = rjq_queue_get_client(q);
    if (!rjq__accepting(c) || rjq__draining(c)) return RJQ_ECLOSED;
    int rc = check_options(c, given, o);
    if (rc != RJQ_OK) return rc;
    rjq_worker *w = calloc(1, sizeof *w);
    if (w == NULL) return RJQ_ENOMEM;
    reserve_in(w, q, handler, data);
    *out = w;
    return RJQ_OK;
}

int rjq__worker_reserved_stopped(const rjq_worker *w) {
    RJQ_ASSERT(w->reserved);
    return w->state != W_ACTIVE;
}

void rjq__worker_unreserve(rjq_worker *w, int status) {
    RJQ_ASSERT(w->reserved);
    rjq__queue_unuse(w->q);
    if (w->state != W_ACTIVE && w->stop_cb) w->stop_cb(w, status, w->stop_data);
    free(w);
}

void rjq__worker_reserved_move(rjq_worker *w, rjq_queue *q) {
    RJQ_ASSERT(w->reserved);
    rjq__queue_use(q);
    rjq__queue_unuse(w->q);
    w->q = q;
}

int rjq__worker_start_reserved(rjq_worker *w, rjq_queue *const *queues, size_t n,
                               rjq_worker_order order, const int *weights,
                               const rjq_worker_options *o) {
    RJQ_ASSERT(w->reserved && w->state == W_ACTIVE && n >= 1 && n <= RJQ_WORKER_QUEUES_MAX);
    rjq_client *c = rjq_queue_get_client(queues[0]);
    if (!rjq__accepting(c) || rjq__draining(c)) return RJQ_ECLOSED;
    rjq_queue *was = w->q;
    rjq_handler_fn *handler = w->handler;
    void *data = w->data;
    rjq__queue_unuse(was);
    int rc;
    if (n == 1) {
        rc = make_worker(w, queues[0], o, handler, data) ? RJQ_OK : RJQ_ENOMEM;
        if (rc == RJQ_OK) go_live(w);
    } else {
        int equal[RJQ_WORKER_QUEUES_MAX];
        for (size_t i = 0; i < n; i++) equal[i] = 1;
        rjq_worker *out;
        rc = start_group(w, queues, n, order, weights ? weights : equal, o, handler, data, &out);
    }
    if (rc != RJQ_OK) { /* (still reserved, on its first queue) */
        memset(w, 0, sizeof *w);
        reserve_in(w, was, handler, data);
    }
    return rc;
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
    for (int i = 0; i < g->n && rjq__accepting(c); i++) rjq__w_stop(g->m[i], NULL, NULL);
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
    if (w->reserved) { /* (ended by its queue's layout: shard.c, at its tick or later) */
        if (w->state != W_ACTIVE) return RJQ_EBUSY;
        if (!rjq__accepting(client_of(w))) return RJQ_ECLOSED;
        rjq__w_set_state(w, W_STOPPING);
        w->stop_cb = cb;
        w->stop_data = data;
        rjq__queue_kick(w->q);
        return RJQ_OK;
    }
    if (w->g) return stop_group(w->g, cb, data);
    if (w->state != W_ACTIVE) return RJQ_EBUSY;
    rjq_client *c = client_of(w);
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    rjq__enter(c); /* the HDEL may flush enqueues, whose callbacks may free c */
    rjq__w_stop(w, cb, data);
    if (!rjq__accepting(c)) { /* a flushed callback freed the client */
        w->stop_cb = NULL;    /* cb is never called; the worker goes with c */
        rjq__leave(c);
        return RJQ_ECLOSED;
    }
    rjq__leave(c);
    return RJQ_OK;
}

int rjq_worker_count_running(const rjq_worker *w) {
    if (w->g == NULL) return w->running + w->expired;
    int n = 0;
    for (int i = 0; i < w->g->n; i++) n += w->g->m[i]->running + w->g->m[i]->expired;
    return n;
}
