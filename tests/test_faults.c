/*
 * Fault injection: workers killed with SIGKILL, zombie workers whose lease
 * was reclaimed, several worker processes racing on one queue, SCRIPT FLUSH
 * and CLIENT KILL in the middle of a run, and a server restart.
 *
 * Worker processes are forked before any libevent/hiredis state exists in
 * the process that forks them (or after it was freed): each child builds
 * its own event_base and client, the parent only uses synchronous hiredis
 * connections or a client it creates after forking. Children die with the
 * parent (PR_SET_PDEATHSIG), and an aborting test kills the processes it
 * started (redis-server included), so a failure leaves nothing behind.
 *
 * Timeouts below are safety nets only: nothing asserts how long anything
 * took.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rjq/libevent.h>
#include <hiredis/adapters/libevent.h> /* the chaos connection: plain hiredis */

#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

/* ---- child processes ----------------------------------------------------- */


/* ---- synchronous inspection (prefix "t", see src/lua/lib.lua) ------------ */

static long long qcount(redisContext *rc, const char *cmd, const char *q, const char *key) {
    return server_int(rc, "%s t:{%s}:%s", cmd, q, key);
}

/* A counter of q's stats hash, read directly (rjq_queue_get_stats needs a
 * loop). enqueued and completed are derived from two fields each (see
 * "stats" in src/lua/lib.lua). */
static long long stat_field(redisContext *rc, const char *q, const char *field) {
    if (strcmp(field, "enqueued") == 0)
        return server_int(rc, "HGET t:{%s}:stats seq", q) - server_int(rc, "HGET t:{%s}:stats skipped", q);
    if (strcmp(field, "completed") == 0)
        return server_int(rc, "HGET t:{%s}:stats retained", q) + server_int(rc, "HGET t:{%s}:stats swept", q);
    return server_int(rc, "HGET t:{%s}:stats %s", q, field);
}

/* FUNCTION LOAD calls the server refused before running them (LOADING). */
static long long function_load_rejected(redisContext *rc) {
    redisReply *r = server_cmd(rc, "INFO commandstats");
    long long v = 0;
    const char *line = r->type == REDIS_REPLY_STRING ? strstr(r->str, "cmdstat_function|load:") : NULL;
    const char *p = line ? strstr(line, "rejected_calls=") : NULL;
    const char *eol = line ? strchr(line, '\n') : NULL;
    if (p && (eol == NULL || p < eol)) v = atoll(p + strlen("rejected_calls="));
    freeReplyObject(r);
    return v;
}

static int client_list_has(redisContext *rc, const char *needle) {
    redisReply *r = server_cmd(rc, "CLIENT LIST");
    int found = r->type == REDIS_REPLY_STRING && strstr(r->str, needle) != NULL;
    freeReplyObject(r);
    return found;
}

/* Pipelined HGET of the state of each job; every one must be "completed"
 * ("completed <attempts> <token>", see src/lua/lib.lua). */
static void assert_states_completed(redisContext *rc, const char *q, char **ids, long n) {
    for (long base = 0; base < n; base += 1000) {
        long end = base + 1000 < n ? base + 1000 : n;
        for (long i = base; i < end; i++)
            ASSERT(redisAppendCommand(rc, "HGET t:{%s}:state %s", q, ids[i]) == REDIS_OK);
        for (long i = base; i < end; i++) {
            redisReply *r = NULL;
            ASSERT(redisGetReply(rc, (void **)&r) == REDIS_OK && r != NULL);
            if (r->type != REDIS_REPLY_STRING || strncmp(r->str, "completed ", 10) != 0)
                FAIL_AT(__FILE__, __LINE__, "job %s is in state \"%s\", not completed", ids[i],
                        r->type == REDIS_REPLY_STRING ? r->str : "(nil)");
            freeReplyObject(r);
        }
    }
}

/* ---- a small id -> record map ----------------------------------------------- */

typedef struct idrec {
    char *id;
    int handled;   /* handler calls */
    int attempt;   /* attempt seen by the last handler call */
    int done_ok;   /* completion callbacks with RJQ_OK */
    int done_err;  /* completion callbacks with anything else */
    int last_err;
} idrec;

typedef struct idmap {
    idrec *v;
    size_t cap, n;
} idmap;

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static idrec *idmap_find(idmap *m, const char *id, int insert) {
    if (insert && (m->n + 1) * 2 > m->cap) {
        idmap old = *m;
        m->cap = old.cap ? old.cap * 2 : 64;
        m->v = calloc(m->cap, sizeof *m->v);
        ASSERT(m->v != NULL);
        m->n = 0;
        for (size_t i = 0; i < old.cap; i++)
            if (old.v[i].id) {
                idrec *r = idmap_find(m, old.v[i].id, 1);
                char *keep = r->id;
                *r = old.v[i];
                free(keep);
            }
        free(old.v);
    }
    if (m->cap == 0) return NULL;
    for (size_t i = hash_str(id) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->v[i].id == NULL) {
            if (!insert) return NULL;
            m->v[i].id = strdup(id);
            ASSERT(m->v[i].id != NULL);
            m->n++;
            return &m->v[i];
        }
        if (strcmp(m->v[i].id, id) == 0) return &m->v[i];
    }
}

static void idmap_free(idmap *m) {
    for (size_t i = 0; i < m->cap; i++) free(m->v[i].id);
    free(m->v);
    memset(m, 0, sizeof *m);
}

/* Every job of the map was handled once and completed once with RJQ_OK. */
static void assert_exactly_once(idmap *m) {
    for (size_t i = 0; i < m->cap; i++) {
        idrec *r = &m->v[i];
        if (r->id == NULL) continue;
        if (r->handled != 1 || r->done_ok != 1 || r->done_err != 0)
            FAIL_AT(__FILE__, __LINE__,
                    "job %s: handled %d times, completed ok %d, failed %d (last error %s)", r->id,
                    r->handled, r->done_ok, r->done_err, rjq_strerror(r->last_err));
    }
}

/* ---- clients with connection events ------------------------------------------ */

typedef struct conn_events {
    long connected[2], disconnected[2], errors[2];
} conn_events;

static void on_conn_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    conn_events *e = data;
    (void)c, (void)detail;
    ASSERT(conn == RJQ_CONN_COMMAND || conn == RJQ_CONN_SUBSCRIBER);
    if (ev == RJQ_EVENT_CONNECTED) e->connected[conn]++;
    else if (ev == RJQ_EVENT_DISCONNECTED) e->disconnected[conn]++;
    else e->errors[conn]++;
}

static rjq_client *client_with_events(struct event_base *base, const test_server *s,
                                      conn_events *ev) {
    rjq_client_options o = client_options(s->url);
    o.on_event = on_conn_event;
    o.event_data = ev;
    return client_new(base, &o);
}

/* ---- small callback records ------------------------------------------------- */

typedef struct enq_res {
    long ok_jobs;   /* jobs reported by successful callbacks */
    long calls, errors;
    int last_status;
    char **ids;     /* optional: collects the ids (ids_cap entries) */
    long ids_n, ids_cap;
} enq_res;

static void on_enq(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    enq_res *e = data;
    (void)c;
    e->calls++;
    e->last_status = status;
    if (status != RJQ_OK) {
        e->errors++;
        return;
    }
    e->ok_jobs += (long)n;
    for (size_t i = 0; i < n && e->ids; i++) {
        ASSERT(rjq_enqueued_get(jobs, i)->existed == 0);
        ASSERT(e->ids_n < e->ids_cap);
        e->ids[e->ids_n] = strdup(rjq_enqueued_get(jobs, i)->id);
        ASSERT(e->ids[e->ids_n] != NULL);
        e->ids_n++;
    }
}

typedef struct status_res {
    int done, status, calls;
} status_res;

static void on_status(rjq_client *c, int status, void *data) {
    status_res *r = data;
    (void)c;
    r->calls++;
    r->status = status;
    r->done = 1;
}

/* A job read with get_info that must have been answered with RJQ_OK. */
static info_wait get_job(struct event_base *base, rjq_queue *q, const char *id) {
    info_wait r = get_info(base, q, id);
    ASSERT_OK(r.status);
    return r;
}

/* ---- a worker context that records every job --------------------------------- */

typedef struct work_ctx {
    idmap ids;
    long handled, done_ok, done_err;
    int defer;             /* 0: complete at once; 1: odd ids later; 2: all later */
    rjq_job **pending;     /* deferred jobs, completed by the flush timer */
    size_t npending, cap;
    struct event *flush_ev;
} work_ctx;

typedef struct done_ref {
    work_ctx *w;
    char id[];
} done_ref;

static void on_work_done(rjq_client *c, int status, void *data) {
    done_ref *d = data;
    (void)c;
    idrec *r = idmap_find(&d->w->ids, d->id, 1);
    if (status == RJQ_OK) {
        r->done_ok++;
        d->w->done_ok++;
    } else {
        r->done_err++;
        r->last_err = status;
        d->w->done_err++;
    }
    free(d);
}

static void finish_job(work_ctx *w, rjq_job *job) {
    const char *id = rjq_job_get_id(job);
    done_ref *d = malloc(sizeof *d + strlen(id) + 1);
    ASSERT(d != NULL);
    d->w = w;
    strcpy(d->id, id);
    ASSERT_OK(rjq_job_complete(job, "ok", 2, on_work_done, d));
}

static void work_handler(rjq_job *job, void *data) {
    work_ctx *w = data;
    const char *id = rjq_job_get_id(job);
    idrec *r = idmap_find(&w->ids, id, 1);
    r->handled++;
    r->attempt = rjq_job_get_attempt(job);
    w->handled++;
    size_t len = strlen(id);
    int later = w->defer == 2 || (w->defer == 1 && len > 0 && (id[len - 1] - '0') % 2 == 1);
    if (!later) {
        finish_job(w, job);
        return;
    }
    if (w->npending == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 64;
        w->pending = realloc(w->pending, w->cap * sizeof *w->pending);
        ASSERT(w->pending != NULL);
    }
    w->pending[w->npending++] = job;
}

static void on_flush_timer(evutil_socket_t fd, short what, void *arg) {
    work_ctx *w = arg;
    (void)fd, (void)what;
    size_t n = w->npending;
    rjq_job **jobs = w->pending;
    w->pending = NULL;
    w->npending = w->cap = 0;
    for (size_t i = 0; i < n; i++) finish_job(w, jobs[i]);
    free(jobs);
}

static void work_init(work_ctx *w, struct event_base *base, int defer, long flush_ms) {
    memset(w, 0, sizeof *w);
    w->defer = defer;
    if (defer) {
        struct timeval tv = {flush_ms / 1000, (flush_ms % 1000) * 1000};
        w->flush_ev = event_new(base, -1, EV_PERSIST, on_flush_timer, w);
        ASSERT(w->flush_ev != NULL);
        event_add(w->flush_ev, &tv);
    }
}

static void work_free(work_ctx *w) {
    if (w->flush_ev) event_free(w->flush_ev);
    free(w->pending); /* jobs still listed here were released by rjq_client_free */
    idmap_free(&w->ids);
}

/* A worker on q that records every job in w, with the options in o but its
 * safety poll ten minutes away: only the doorbell and reconnects wake it. */
static rjq_worker *start_doorbell_worker(rjq_queue *q, rjq_worker_options o, work_ctx *w) {
    rjq_worker *wk;
    o.poll_ms = 600000;
    ASSERT_OK(rjq_worker_start(q, &o, work_handler, w, &wk));
    return wk;
}

/* =========================================================================
 * 1. A worker process killed with SIGKILL while holding jobs: their leases
 *    expire, the sweep of another worker reclaims them, and that worker
 *    completes every job exactly once.
 * ========================================================================= */

#define KILL_JOBS 30
#define KILL_HELD 20

static int queue_empty(struct event_base *base, rjq_queue *q) {
    rjq_stats s = get_stats(base, q);
    return s.ready + s.delayed + s.active == 0;
}

/* A barrier for "no wrong extra run or callback": the queue holds no job
 * waiting or running (none can run again), every message published to c
 * before has been handed to its listeners, every reply to what it sent
 * before has come (a stats call is a round trip). */
static void settle_queue(struct event_base *base, rjq_client *c, rjq_queue *q, redisContext *rc) {
    WAIT_FOR(base, queue_empty(base, q), 10000);
    subscriber_barrier(base, c, rc);
    (void)get_stats(base, q);
}

static void holding_handler(rjq_job *job, void *data) {
    (void)job, (void)data; /* never completes: the process is killed holding it */
}

static void run_holding_child(const test_server *s, const char *qname) {
    struct event_base *base = event_base_new();
    rjq_client *c = client_for(base, s);
    rjq_queue *q = queue_for(c, qname);
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    rjq_worker *w;
    wo.concurrency = KILL_HELD;
    wo.lease_ms = 300000; /* five minutes: only its liveness entry brings them back soon */
    wo.reclaim_ms = 100;
    ASSERT_OK(rjq_worker_start(q, &wo, holding_handler, NULL, &w));
    event_base_dispatch(base); /* until the parent kills us */
    _exit(3);
}

TEST(worker_killed_sigkill_jobs_reclaimed) {
    const char *qname = "killed";
    test_server s;
    server_start_guarded(&s, NULL);

    /* Enqueue with a client that is gone before the fork. */
    char *ids[KILL_JOBS];
    enq_res e = {0};
    e.ids = ids;
    e.ids_cap = KILL_JOBS;
    {
        struct event_base *base = event_base_new();
        rjq_client *c = client_for(base, &s);
        rjq_queue *q = queue_for(c, qname);
        rjq_enqueue_item items[KILL_JOBS];
        for (int i = 0; i < KILL_JOBS; i++) items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), "payload", 7, NULL};
        ASSERT_OK(rjq_enqueue_batch(q, items, KILL_JOBS, on_enq, &e));
        ASSERT(loop_until_count(base, &e.ok_jobs, KILL_JOBS, 10000));
        rjq_client_free(c);
        event_base_free(base);
    }

    pid_t child = fork_child();
    if (child == 0) run_holding_child(&s, qname);

    /* The child holds KILL_HELD jobs (its handler never finishes them). */
    redisContext *rc = server_connect(&s);
    double end = mono_ms() + 30000;
    while (server_active_jobs(rc, qname) < KILL_HELD) {
        ASSERT(mono_ms() < end);
        ASSERT(waitpid(child, NULL, WNOHANG) == 0); /* still alive */
        sleep_ms(10);
    }
    ASSERT_EQ(KILL_HELD, server_active_jobs(rc, qname));
    ASSERT_EQ(KILL_JOBS - KILL_HELD, qcount(rc, "LLEN", qname, "ready"));
    redisReply *r = server_cmd(rc, "ZRANGEBYSCORE t:{%s}:active -inf (+inf", qname);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == KILL_HELD);
    idmap held = {0};
    for (size_t i = 0; i < r->elements; i++) idmap_find(&held, r->element[i]->str, 1);
    freeReplyObject(r);

    ASSERT(kill(child, SIGKILL) == 0);
    int status = reap(child, 10000);
    ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    /* Nothing came back on its own: the jobs are still held by the dead worker. */
    ASSERT_EQ(0, stat_field(rc, qname, "completed"));

    /* Another worker (created after the fork) recovers everything, within
     * seconds (the killed client's liveness entry runs out after 5 s, and
     * a client sweeps others once it has beaten steadily for as long), not
     * after the five-minute lease: the wait below is bounded well below it. */
    struct event_base *base = event_base_new();
    rjq_client *c = client_for(base, &s);
    rjq_queue *q = queue_for(c, qname);
    work_ctx w;
    work_init(&w, base, 0, 0);
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    rjq_worker *wk;
    wo.concurrency = 5;
    wo.reclaim_ms = 100;
    ASSERT_OK(rjq_worker_start(q, &wo, work_handler, &w, &wk));
    ASSERT(loop_until_count(base, &w.done_ok, KILL_JOBS, 30000));
    settle_queue(base, c, q, rc); /* a wrong extra run or callback would show now */

    ASSERT_EQ(KILL_JOBS, (long)w.ids.n);
    assert_exactly_once(&w.ids);
    for (int i = 0; i < KILL_JOBS; i++) {
        idrec *jr = idmap_find(&w.ids, ids[i], 0);
        ASSERT(jr != NULL);
        /* held jobs ran a second time (the killed worker's run counts) */
        ASSERT_EQ(idmap_find(&held, ids[i], 0) ? 2 : 1, jr->attempt);
    }
    rjq_stats st = get_stats(base, q);
    ASSERT_EQ(KILL_JOBS, st.enqueued);
    ASSERT_EQ(KILL_JOBS, st.completed);
    ASSERT(st.reclaimed >= KILL_HELD);
    ASSERT_EQ(0, st.failed);
    ASSERT_EQ(0, st.dead);
    ASSERT_EQ(0, st.ready);
    ASSERT_EQ(0, st.active);
    ASSERT_EQ(0, st.delayed);
    ASSERT_EQ(0, server_active_jobs(rc, qname));
    assert_states_completed(rc, qname, ids, KILL_JOBS);

    rjq_client_free(c);
    work_free(&w);
    event_base_free(base);
    idmap_free(&held);
    for (int i = 0; i < KILL_JOBS; i++) free(ids[i]);
    redisFree(rc);
    server_stop_guarded(&s);
}

/* =========================================================================
 * 2. Fencing: a worker whose lease was reclaimed (it hung: its loop did not
 *    run) finishes late; the job was meanwhile claimed and completed by
 *    another worker. The late complete/fail gets RJQ_ELEASELOST and
 *    changes nothing.
 * ========================================================================= */

typedef struct hold_one {
    rjq_job *job;
    int got, attempt;
    char token[48];
} hold_one;

static void hold_one_handler(rjq_job *job, void *data) {
    hold_one *h = data;
    ASSERT(h->job == NULL);
    h->job = job;
    h->attempt = rjq_job_get_attempt(job);
    snprintf(h->token, sizeof h->token, "%s", rjq_job_get_token(job));
    h->got = 1;
}

typedef struct complete_as {
    const char *result;
    int got, attempt;
    char token[48];
    status_res done;
} complete_as;

static void complete_as_handler(rjq_job *job, void *data) {
    complete_as *b = data;
    ASSERT(!b->got);
    b->got = 1;
    b->attempt = rjq_job_get_attempt(job);
    snprintf(b->token, sizeof b->token, "%s", rjq_job_get_token(job));
    ASSERT_OK(rjq_job_complete(job, b->result, strlen(b->result), on_status, &b->done));
}

enum fence_kind { FENCE_COMPLETE, FENCE_FAIL_RETRY, FENCE_FAIL_FATAL };

/* Worker A on its own loop claims job `id` and holds it; A's loop is then
 * not run, so nothing extends its lease. */
static void claim_and_hang(struct event_base *ba, rjq_queue *qa, hold_one *a, rjq_worker **wa) {
    rjq_worker_options o = RJQ_WORKER_OPTIONS_INIT;
    o.concurrency = 1;
    o.lease_ms = 150;
    o.reclaim_ms = 600000; /* A never sweeps: the reclaim is done elsewhere */
    o.poll_ms = 600000;
    ASSERT_OK(rjq_worker_start(qa, &o, hold_one_handler, a, wa));
    ASSERT(loop_until(ba, &a->got, 10000));
    ASSERT_EQ(1, a->attempt);
}

/* Sweep from client B until the expired lease is reclaimed. */
static int reclaimed_one(struct event_base *bb, rjq_queue *qb) {
    count_wait cr = {0};
    ASSERT_OK(rjq_queue_reclaim(qb, on_count, &cr));
    ASSERT(loop_until(bb, &cr.done, 10000));
    ASSERT_OK(cr.status);
    if (cr.n != 1) ASSERT_EQ(0, cr.n);
    return cr.n == 1;
}

static void reclaim_from(struct event_base *bb, rjq_queue *qb) {
    WAIT_FOR(bb, reclaimed_one(bb, qb), 20000); /* (the lease ends by the server's clock) */
}

/* A's late finish of its stale copy. */
static void finish_late(struct event_base *ba, rjq_queue *qa, hold_one *a, enum fence_kind kind) {
    status_res late = {0};
    if (kind == FENCE_COMPLETE)
        ASSERT_OK(rjq_job_complete(a->job, "A", 1, on_status, &late));
    else
        ASSERT_OK(rjq_job_fail(a->job, "A failed late",
                               kind == FENCE_FAIL_FATAL ? RJQ_FAIL_FATAL : RJQ_FAIL_RETRY, 0,
                               on_status, &late));
    ASSERT(loop_until(ba, &late.done, 10000));
    ASSERT_EQ(RJQ_ELEASELOST, late.status);
    (void)get_stats(ba, qa); /* a round trip: a second answer would have come */
    ASSERT_EQ(1, late.calls);
}

/* Two clients on queue qname: B enqueues job `id`, A claims it and hangs,
 * and B's reclaim sweep takes A's expired lease back. A still holds its
 * stale copy (a, wa). */
typedef struct fence_pair {
    struct event_base *ba, *bb;
    rjq_client *ca, *cb;
    rjq_queue *qa, *qb;
    hold_one a;
    rjq_worker *wa;
} fence_pair;

static void fence_pair_open(fence_pair *f, const test_server *s, const char *qname, const char *id) {
    memset(f, 0, sizeof *f);
    f->ba = event_base_new();
    f->bb = event_base_new();
    f->ca = client_for(f->ba, s);
    f->cb = client_for(f->bb, s);
    f->qa = queue_for(f->ca, qname);
    f->qb = queue_for(f->cb, qname);
    wait_connected(f->ba, f->ca);
    wait_connected(f->bb, f->cb);

    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.id = id;
    enq_res e = {0};
    ASSERT_OK(rjq_enqueue(f->qb, "work", 4, &jo, on_enq, &e));
    ASSERT(loop_until_count(f->bb, &e.ok_jobs, 1, 10000));

    claim_and_hang(f->ba, f->qa, &f->a, &f->wa);
    reclaim_from(f->bb, f->qb);
}

static void fence_pair_close(fence_pair *f) {
    rjq_client_free(f->ca);
    rjq_client_free(f->cb);
    event_base_free(f->ba);
    event_base_free(f->bb);
}

/*
 * One round on queue qname: A claims and hangs, its lease is reclaimed, B
 * claims the job. b_holds 0: B completes it with "B", then A finishes
 * late. b_holds 1: A finishes late while B still holds the job (so only
 * the token tells them apart), then B completes it.
 */
static void fence_round(const test_server *s, const char *qname, enum fence_kind kind, int b_holds) {
    fence_pair f;
    fence_pair_open(&f, s, qname, "fenced");
    struct event_base *ba = f.ba, *bb = f.bb;
    rjq_queue *qb = f.qb;
    hold_one *a = &f.a;
    info_wait ir = get_job(bb, qb, "fenced");
    ASSERT_STREQ("ready", ir.state);

    rjq_worker *wb;
    rjq_worker_options o = RJQ_WORKER_OPTIONS_INIT;
    o.poll_ms = 600000;
    if (b_holds) {
        hold_one b = {0};
        ASSERT_OK(rjq_worker_start(qb, &o, hold_one_handler, &b, &wb));
        ASSERT(loop_until(bb, &b.got, 10000));
        ASSERT_EQ(2, b.attempt);
        ASSERT(strcmp(a->token, b.token) != 0);
        info_wait before = get_job(bb, qb, "fenced");
        ASSERT_STREQ("active", before.state);

        finish_late(ba, f.qa, a, kind);

        info_wait after = get_job(bb, qb, "fenced");
        ASSERT_STREQ("active", after.state);
        ASSERT(!after.has_result);
        ASSERT_EQ(before.attempts, after.attempts);
        ASSERT_EQ(before.has_error, after.has_error);
        if (before.has_error) ASSERT_STREQ(before.error, after.error);
        rjq_stats st = get_stats(bb, qb);
        ASSERT_EQ(0, st.failed);
        ASSERT_EQ(0, st.completed);
        ASSERT_EQ(1, st.active);
        ASSERT_EQ(0, st.ready);
        ASSERT_EQ(0, st.delayed);
        ASSERT_EQ(0, st.dead_depth);

        /* B's own lease is intact: its completion goes through. */
        status_res bdone = {0};
        ASSERT_OK(rjq_job_complete(b.job, "B", 1, on_status, &bdone));
        ASSERT(loop_until(bb, &bdone.done, 10000));
        ASSERT_OK(bdone.status);
    } else {
        complete_as b = {0};
        b.result = "B";
        ASSERT_OK(rjq_worker_start(qb, &o, complete_as_handler, &b, &wb));
        ASSERT(loop_until(bb, &b.done.done, 10000));
        ASSERT_OK(b.done.status);
        ASSERT_EQ(2, b.attempt);
        ASSERT(strcmp(a->token, b.token) != 0);
    }
    info_wait before = get_job(bb, qb, "fenced");
    ASSERT_STREQ("completed", before.state);
    ASSERT_STREQ("B", before.result);

    if (!b_holds) finish_late(ba, f.qa, a, kind);

    info_wait after = get_job(bb, qb, "fenced");
    ASSERT_STREQ("completed", after.state);
    ASSERT(after.has_result);
    ASSERT_EQ(1, (long)after.result_len);
    ASSERT_STREQ("B", after.result);
    ASSERT_EQ(2, after.attempts);
    ASSERT_EQ(before.has_error, after.has_error);
    if (before.has_error) ASSERT_STREQ(before.error, after.error);
    rjq_stats st = get_stats(bb, qb);
    ASSERT_EQ(1, st.completed);
    ASSERT_EQ(0, st.failed);
    ASSERT_EQ(0, st.retried);
    ASSERT_EQ(0, st.dead);
    ASSERT_EQ(0, st.ready);
    ASSERT_EQ(0, st.delayed);
    ASSERT_EQ(0, st.active);
    ASSERT_EQ(0, st.dead_depth);

    fence_pair_close(&f);
}

TEST(lease_lost_after_reclaim_is_fenced) {
    test_server s;
    server_start_guarded(&s, NULL);
    fence_round(&s, "fence-complete", FENCE_COMPLETE, 0);
    fence_round(&s, "fence-fail", FENCE_FAIL_RETRY, 0);
    fence_round(&s, "fence-fatal", FENCE_FAIL_FATAL, 0);
    fence_round(&s, "fence-complete-held", FENCE_COMPLETE, 1);
    fence_round(&s, "fence-fail-held", FENCE_FAIL_RETRY, 1);
    fence_round(&s, "fence-fatal-held", FENCE_FAIL_FATAL, 1);
    server_stop_guarded(&s);
}

/* A stale completion that arrives while the reclaimed job waits in ready
 * is refused too; the job then runs normally. */
TEST(stale_completion_of_requeued_job_is_fenced) {
    const char *qname = "fence-ready";
    test_server s;
    server_start_guarded(&s, NULL);
    fence_pair f;
    fence_pair_open(&f, &s, qname, "requeued");
    struct event_base *ba = f.ba, *bb = f.bb;
    rjq_queue *qb = f.qb;
    /* A stops claiming (it would take the requeued job again), but still
     * holds its stale copy. */
    ASSERT_OK(rjq_worker_stop(f.wa, NULL, NULL));

    status_res late = {0};
    ASSERT_OK(rjq_job_complete(f.a.job, "A", 1, on_status, &late));
    ASSERT(loop_until(ba, &late.done, 10000));
    ASSERT_EQ(RJQ_ELEASELOST, late.status);
    info_wait ir = get_job(bb, qb, "requeued");
    ASSERT_STREQ("ready", ir.state);
    ASSERT(!ir.has_result);
    rjq_stats st = get_stats(bb, qb);
    ASSERT_EQ(0, st.completed);
    ASSERT_EQ(1, st.ready);

    complete_as b = {0};
    b.result = "B";
    rjq_worker *wb;
    ASSERT_OK(rjq_worker_start(qb, NULL, complete_as_handler, &b, &wb));
    ASSERT(loop_until(bb, &b.done.done, 10000));
    ASSERT_OK(b.done.status);
    ASSERT_EQ(2, b.attempt);
    ir = get_job(bb, qb, "requeued");
    ASSERT_STREQ("completed", ir.state);
    ASSERT_STREQ("B", ir.result);
    st = get_stats(bb, qb);
    ASSERT_EQ(1, st.completed);
    ASSERT_EQ(0, st.active);

    fence_pair_close(&f);
    server_stop_guarded(&s);
}

/* =========================================================================
 * 3. 10000 jobs, three worker processes racing on one queue: every job is
 *    handed out once and completed once.
 * ========================================================================= */

#define RACE_JOBS 10000
#define RACE_PROCS 3

typedef struct race_child {
    FILE *out;
    long handled, done_ok, done_err;
    int stop_requested, stopped;
    struct event *ctl_ev;
} race_child;

static void race_done(rjq_client *c, int status, void *data) {
    race_child *rc = data;
    (void)c;
    if (status == RJQ_OK) rc->done_ok++;
    else rc->done_err++;
}

static void race_handler(rjq_job *job, void *data) {
    race_child *rc = data;
    rc->handled++;
    fprintf(rc->out, "H %s %d\n", rjq_job_get_id(job), rjq_job_get_attempt(job));
    ASSERT_OK(rjq_job_complete(job, "ok", 2, race_done, rc));
}

static void race_ctl(evutil_socket_t fd, short what, void *arg) {
    race_child *rc = arg;
    char buf[16];
    (void)what;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0 && !(n < 0 && errno == EINTR)) {
        rc->stop_requested = 1;
        event_del(rc->ctl_ev);
    }
}

static void race_stopped(rjq_worker *w, int status, void *data) {
    race_child *rc = data;
    (void)w;
    ASSERT_OK(status);
    rc->stopped = 1;
}

static void run_race_child(const test_server *s, const char *qname, int ctl_fd, const char *path) {
    race_child rc = {0};
    rc.out = fopen(path, "w");
    ASSERT(rc.out != NULL);
    struct event_base *base = event_base_new();
    rc.ctl_ev = event_new(base, ctl_fd, EV_READ | EV_PERSIST, race_ctl, &rc);
    event_add(rc.ctl_ev, NULL);
    rjq_client *c = client_for(base, s);
    rjq_queue *q = queue_for(c, qname);
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    rjq_worker *w;
    wo.concurrency = 20;
    wo.reclaim_ms = 500;
    ASSERT_OK(rjq_worker_start(q, &wo, race_handler, &rc, &w));
    ASSERT(loop_until(base, &rc.stop_requested, 115000));
    ASSERT_OK(rjq_worker_stop(w, race_stopped, &rc));
    ASSERT(loop_until(base, &rc.stopped, 30000));
    fprintf(rc.out, "S %ld %ld %ld\n", rc.handled, rc.done_ok, rc.done_err);
    rjq_client_free(c);
    event_free(rc.ctl_ev);
    event_base_free(base);
    ASSERT(fclose(rc.out) == 0);
    close(ctl_fd);
    exit(0);
}

TEST(ten_thousand_jobs_three_worker_processes_exactly_once) {
    const char *qname = "race";
    test_server s;
    server_start_guarded(&s, NULL);

    pid_t pids[RACE_PROCS];
    int ctl[RACE_PROCS];
    char paths[RACE_PROCS][200];
    for (int k = 0; k < RACE_PROCS; k++) {
        int p[2];
        ASSERT(pipe(p) == 0);
        snprintf(paths[k], sizeof paths[k], "%s/race-%d.txt", s.dir, k);
        pids[k] = fork_child();
        if (pids[k] == 0) {
            close(p[1]);
            for (int j = 0; j < k; j++) close(ctl[j]);
            run_race_child(&s, qname, p[0], paths[k]);
        }
        close(p[0]);
        ctl[k] = p[1];
    }

    /* Wait for the three workers to listen on the doorbell, then enqueue. */
    redisContext *rc = server_connect(&s);
    char wake[64];
    snprintf(wake, sizeof wake, "t:{%s}:wake", qname);
    double end = mono_ms() + 30000;
    while (server_numsub(rc, wake) < RACE_PROCS) {
        ASSERT(mono_ms() < end);
        for (int k = 0; k < RACE_PROCS; k++) ASSERT(waitpid(pids[k], NULL, WNOHANG) == 0);
        sleep_ms(10);
    }

    char **ids = calloc(RACE_JOBS, sizeof *ids);
    ASSERT(ids != NULL);
    {
        struct event_base *base = event_base_new();
        rjq_client *c = client_for(base, &s);
        rjq_queue *q = queue_for(c, qname);
        enq_res e = {0};
        e.ids = ids;
        e.ids_cap = RACE_JOBS;
        static rjq_enqueue_item items[1000];
        for (int i = 0; i < 1000; i++) items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), "x", 1, NULL};
        for (int b = 0; b < RACE_JOBS / 1000; b++) ASSERT_OK(rjq_enqueue_batch(q, items, 1000, on_enq, &e));
        ASSERT(loop_until_count(base, &e.ok_jobs, RACE_JOBS, 60000));
        ASSERT_EQ(0, e.errors);
        rjq_client_free(c);
        event_base_free(base);
    }

    /* Ids are the server's numbers: each of 1..N once. */
    char *seen_id = calloc(RACE_JOBS + 1, 1);
    ASSERT(seen_id != NULL);
    for (long i = 0; i < RACE_JOBS; i++) {
        long n = atol(ids[i]);
        ASSERT(n >= 1 && n <= RACE_JOBS && !seen_id[n]);
        seen_id[n] = 1;
    }
    free(seen_id);

    end = mono_ms() + 100000;
    while (stat_field(rc, qname, "completed") < RACE_JOBS) {
        ASSERT(mono_ms() < end);
        for (int k = 0; k < RACE_PROCS; k++) ASSERT(waitpid(pids[k], NULL, WNOHANG) == 0);
        sleep_ms(20);
    }
    for (int k = 0; k < RACE_PROCS; k++) close(ctl[k]); /* EOF: stop */
    for (int k = 0; k < RACE_PROCS; k++) {
        int status = reap(pids[k], 30000);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            FAIL_AT(__FILE__, __LINE__, "worker process %d ended with status 0x%x", k, status);
    }

    /* Every job was handed out exactly once, across the processes. */
    int *runs = calloc(RACE_JOBS + 1, sizeof *runs);
    ASSERT(runs != NULL);
    long total_ok = 0;
    for (int k = 0; k < RACE_PROCS; k++) {
        FILE *f = fopen(paths[k], "r");
        ASSERT(f != NULL);
        char line[256];
        long handled = 0, summary = 0;
        while (fgets(line, sizeof line, f)) {
            long id, attempt, h, ok, err;
            if (sscanf(line, "H %ld %ld", &id, &attempt) == 2) {
                ASSERT(id >= 1 && id <= RACE_JOBS);
                ASSERT_EQ(1, attempt);
                runs[id]++;
                handled++;
            } else if (sscanf(line, "S %ld %ld %ld", &h, &ok, &err) == 3) {
                ASSERT_EQ(handled, h);
                ASSERT_EQ(h, ok); /* every completion callback: RJQ_OK */
                ASSERT_EQ(0, err);
                total_ok += ok;
                summary = 1;
            } else {
                FAIL_AT(__FILE__, __LINE__, "bad line in %s: %s", paths[k], line);
            }
        }
        fclose(f);
        ASSERT(summary);
        ASSERT(handled > 0); /* the doorbell woke every process */
        fprintf(stderr, "worker process %d ran %ld jobs\n", k, handled);
    }
    for (long id = 1; id <= RACE_JOBS; id++)
        if (runs[id] != 1) FAIL_AT(__FILE__, __LINE__, "job %ld ran %d times", id, runs[id]);
    ASSERT_EQ(RACE_JOBS, total_ok);
    free(runs);

    ASSERT_EQ(RACE_JOBS, stat_field(rc, qname, "enqueued"));
    ASSERT_EQ(RACE_JOBS, stat_field(rc, qname, "completed"));
    ASSERT_EQ(0, stat_field(rc, qname, "reclaimed"));
    ASSERT_EQ(0, stat_field(rc, qname, "failed"));
    ASSERT_EQ(0, qcount(rc, "LLEN", qname, "ready"));
    ASSERT_EQ(0, qcount(rc, "ZCARD", qname, "prio"));
    ASSERT_EQ(0, server_active_jobs(rc, qname));
    ASSERT_EQ(0, qcount(rc, "ZCARD", qname, "delayed"));
    ASSERT_EQ(0, qcount(rc, "ZCARD", qname, "dead"));
    assert_states_completed(rc, qname, ids, RACE_JOBS);

    for (long i = 0; i < RACE_JOBS; i++) free(ids[i]);
    free(ids);
    redisFree(rc);
    server_stop_guarded(&s);
}

/* =========================================================================
 * 4. FUNCTION FLUSH (or SCRIPT FLUSH, where the client runs its scripts
 *    with EVALSHA), then CLIENT KILL of the command and the subscriber
 *    connections while a worker drains a backlog: nothing is lost, nothing
 *    runs twice, and the client comes back on its own.
 * ========================================================================= */

#define FLUSH_JOBS 5000

/* An async connection on the test's own loop for SCRIPT FLUSH and CLIENT
 * KILL: the rjq client keeps running while the server executes them, so
 * they land between (or in the same server turn as) its requests. */
typedef struct chaos {
    redisAsyncContext *ac;
    int done, type;
    long long integer;
} chaos;

static void on_chaos_reply(redisAsyncContext *ac, void *reply, void *priv) {
    chaos *ch = priv;
    redisReply *r = reply;
    (void)ac;
    ASSERT(r != NULL);
    ch->type = r->type;
    ch->integer = r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
    if (r->type == REDIS_REPLY_ERROR) fprintf(stderr, "chaos command: %s\n", r->str);
    ch->done = 1;
}

static void chaos_open(chaos *ch, struct event_base *base, const test_server *s) {
    memset(ch, 0, sizeof *ch);
    ch->ac = redisAsyncConnect("127.0.0.1", s->port);
    ASSERT(ch->ac != NULL && ch->ac->err == 0);
    ASSERT(redisLibeventAttach(ch->ac, base) == REDIS_OK);
}

/* Run one command while the loop (and so the rjq client) keeps going. */
static void chaos_run(chaos *ch, struct event_base *base, const char *cmd) {
    ch->done = 0;
    ASSERT(redisAsyncCommand(ch->ac, on_chaos_reply, ch, cmd) == REDIS_OK);
    ASSERT(loop_until(base, &ch->done, 10000));
    ASSERT(ch->type != REDIS_REPLY_ERROR);
}

/* The scenario in one of the two ways scripts run: from rjq's function
 * library (FCALL; the fault is FUNCTION FLUSH, answered "Function not
 * found"), or, for a user the server does not let use functions, with
 * EVALSHA (the fault is SCRIPT FLUSH, answered NOSCRIPT). */
static void flush_and_kill_scenario(int evalsha) {
    const char *qname = "chaos";
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *rc = server_connect(&s);
    struct event_base *base = event_base_new();
    conn_events ev = {0};
    rjq_client_options o = client_options(s.url);
    char url[128];
    if (evalsha) {
        redisReply *r = server_cmd(rc, "ACL SETUSER noscripts on >pw ~* &* +@all -function -fcall -fcall_ro");
        freeReplyObject(r);
        snprintf(url, sizeof url, "redis://noscripts:pw@%s", s.url + strlen("redis://"));
        o.url = url;
    }
    o.on_event = on_conn_event;
    o.event_data = &ev;
    rjq_client *c = client_new(base, &o);
    rjq_queue *q = queue_for(c, qname);
    wait_connected(base, c);

    char **ids = calloc(FLUSH_JOBS + 2, sizeof *ids);
    ASSERT(ids != NULL);
    enq_res e = {0};
    e.ids = ids;
    e.ids_cap = FLUSH_JOBS;
    static rjq_enqueue_item items[500];
    for (int i = 0; i < 500; i++) items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), "chaos", 5, NULL};
    for (int b = 0; b < FLUSH_JOBS / 500; b++) ASSERT_OK(rjq_enqueue_batch(q, items, 500, on_enq, &e));
    ASSERT(loop_until_count(base, &e.ok_jobs, FLUSH_JOBS, 30000));

    /* Odd ids complete on a later loop turn, so completions, claims and
     * extensions are in flight at any moment. The lease is short so jobs
     * of a claim whose reply is lost come back soon, yet longer than this
     * process can stall: the test asserts each job ran once, and a job
     * whose lease ran out is rightly run again. A lease of 1 s (extended
     * every 333 ms) was lost under ASan on a loaded machine, where the
     * reconnect after the CLIENT KILL and the starved loop took longer
     * than its last two thirds: "job 2071: handled 2 times, completed ok
     * 1, failed 1 (lease lost)". The safety poll is long, so only the
     * doorbell and reconnects wake the worker. */
    work_ctx w;
    work_init(&w, base, 1, 2);
    rjq_worker_options wo = {.size = sizeof(rjq_worker_options), .concurrency = 20, .lease_ms = 5000, .reclaim_ms = 100};
    rjq_worker *wk = start_doorbell_worker(q, wo, &w);

    ASSERT(loop_until_count(base, &w.done_ok, 1000, 60000));
    ASSERT_EQ(0, server_info_number(rc, "errorstats", "errorstat_NOSCRIPT:count="));
    long long loads = server_calls(rc, "function|load");
    ASSERT_EQ(evalsha ? 0 : 1, server_calls(rc, "fcall") > 0);
    ASSERT_EQ(evalsha ? 1 : 0, server_calls(rc, "evalsha") > 0);
    chaos ch;
    chaos_open(&ch, base, &s);
    chaos_run(&ch, base, evalsha ? "SCRIPT FLUSH" : "FUNCTION FLUSH");
    ASSERT_EQ(REDIS_REPLY_STATUS, ch.type);
    long at_flush = w.done_ok;
    ASSERT(loop_until_count(base, &w.done_ok, at_flush + 1000, 60000));
    /* the worker really met the flushed scripts, and recovered */
    if (evalsha) ASSERT(server_info_number(rc, "errorstats", "errorstat_NOSCRIPT:count=") >= 1);
    else ASSERT(server_calls(rc, "function|load") > loads);

    /* Kill the command connection mid-run. */
    long disc = ev.disconnected[RJQ_CONN_COMMAND], conn = ev.connected[RJQ_CONN_COMMAND];
    long at_kill = w.done_ok;
    chaos_run(&ch, base, "CLIENT KILL TYPE normal");
    ASSERT(ch.integer >= 2); /* rjq's command connection and our sync one */
    redisFree(rc);
    rc = server_connect(&s);
    ASSERT(loop_until_count(base, &ev.disconnected[RJQ_CONN_COMMAND], disc + 1, 10000));
    /* Issued while the client knows it is down: sent once reconnected. */
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.id = "after-kill";
    enq_res after = {0};
    ASSERT_OK(rjq_enqueue(q, "late", 4, &jo, on_enq, &after));
    ASSERT(loop_until_count(base, &after.calls, 1, 10000));
    ASSERT_OK(after.last_status);
    ASSERT_EQ(1, after.ok_jobs);
    ASSERT(ev.connected[RJQ_CONN_COMMAND] > conn);

    /* Kill the subscriber connection mid-run. */
    ASSERT(loop_until_count(base, &w.done_ok, at_kill + 500, 60000));
    long sdisc = ev.disconnected[RJQ_CONN_SUBSCRIBER];
    long at_sub_kill = w.done_ok;
    chaos_run(&ch, base, "CLIENT KILL TYPE pubsub");
    ASSERT(ch.integer >= 1);
    ASSERT(loop_until_count(base, &ev.disconnected[RJQ_CONN_SUBSCRIBER], sdisc + 1, 10000));
    /* all three faults hit the run, not its end */
    ASSERT(at_sub_kill < FLUSH_JOBS);
    fprintf(stderr, "flush at %ld, command kill at %ld, subscriber kill at %ld of %d completions\n",
            at_flush, at_kill, at_sub_kill, FLUSH_JOBS);

    ASSERT(loop_until_count(base, &w.done_ok, FLUSH_JOBS + 1, 90000));

    /* Idle now: kill the subscriber again; once it is back, new work must
     * still wake the worker (its poll is far away). */
    WAIT_FOR(base, rjq_worker_count_running(wk) == 0, 5000);
    char wake[64];
    snprintf(wake, sizeof wake, "t:{%s}:wake", qname);
    sdisc = ev.disconnected[RJQ_CONN_SUBSCRIBER];
    long sconn = ev.connected[RJQ_CONN_SUBSCRIBER];
    chaos_run(&ch, base, "CLIENT KILL TYPE pubsub");
    ASSERT(ch.integer >= 1);
    ASSERT(loop_until_count(base, &ev.disconnected[RJQ_CONN_SUBSCRIBER], sdisc + 1, 10000));
    ASSERT(loop_until_count(base, &ev.connected[RJQ_CONN_SUBSCRIBER], sconn + 1, 10000));
    WAIT_FOR(base, server_numsub(rc, wake) >= 1, 5000);
    ASSERT_EQ(1, server_numsub(rc, wake));
    wait_worker_started(base, c, q, rc, qname); /* the post-resubscribe claim came back empty */
    jo.id = "after-sub-kill";
    enq_res after2 = {0};
    ASSERT_OK(rjq_enqueue(q, "late", 4, &jo, on_enq, &after2));
    ASSERT(loop_until_count(base, &w.done_ok, FLUSH_JOBS + 2, 20000));
    ASSERT_OK(after2.last_status);
    settle_queue(base, c, q, rc); /* a wrong extra run or callback would show now */

    ASSERT_EQ(FLUSH_JOBS + 2, (long)w.ids.n);
    assert_exactly_once(&w.ids);
    ASSERT(idmap_find(&w.ids, "after-kill", 0) != NULL);
    ASSERT(idmap_find(&w.ids, "after-sub-kill", 0) != NULL);
    for (long i = 0; i < FLUSH_JOBS; i++) ASSERT(idmap_find(&w.ids, ids[i], 0) != NULL);
    rjq_stats st = get_stats(base, q);
    ASSERT_EQ(FLUSH_JOBS + 2, st.enqueued);
    ASSERT_EQ(FLUSH_JOBS + 2, st.completed);
    ASSERT_EQ(0, st.ready);
    ASSERT_EQ(0, st.active);
    ASSERT_EQ(0, st.delayed);
    ASSERT_EQ(0, st.dead);
    ASSERT_EQ(0, st.failed);
    ids[FLUSH_JOBS] = strdup("after-kill");
    ids[FLUSH_JOBS + 1] = strdup("after-sub-kill");
    assert_states_completed(rc, qname, ids, FLUSH_JOBS + 2);
    ASSERT(client_list_has(rc, "name=rjq "));
    ASSERT(client_list_has(rc, "name=rjq:sub "));
    fprintf(stderr, "reclaimed after lost claim replies: %lld\n", st.reclaimed);

    rjq_client_free(c);
    redisAsyncFree(ch.ac);
    work_free(&w);
    event_base_free(base);
    for (long i = 0; i < FLUSH_JOBS + 2; i++) free(ids[i]);
    free(ids);
    redisFree(rc);
    server_stop_guarded(&s);
}

TEST(function_flush_and_client_kill_mid_run_lose_nothing) {
    flush_and_kill_scenario(0);
}

TEST(script_flush_and_client_kill_mid_run_lose_nothing_without_functions) {
    flush_and_kill_scenario(1);
}

/* =========================================================================
 * 5. The server restarts (with an append-only file, so the data survives):
 *    the client reconnects on its own with its scripts, requests in flight
 *    end exactly once, and a worker started before the restart keeps going.
 * ========================================================================= */

#define RESTART_PRE 300
#define RESTART_BURST 60
#define RESTART_STATS 9
#define RESTART_POST 100

typedef struct burst_slot {
    int calls, status;
} burst_slot;

static burst_slot burst_enq[RESTART_BURST], burst_stats[RESTART_STATS];
static long burst_fired;

static void on_burst_enq(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    burst_slot *b = data;
    (void)c, (void)jobs;
    ASSERT(status == RJQ_OK ? n == 1 : n == 0);
    b->calls++;
    b->status = status;
    burst_fired++;
}

static void on_burst_stats(rjq_client *c, int status, const rjq_stats *st, void *data) {
    burst_slot *b = data;
    (void)c;
    ASSERT(status != RJQ_OK || st != NULL);
    b->calls++;
    b->status = status;
    burst_fired++;
}

static void burst_enqueue(rjq_queue *q, int i) {
    char id[32];
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    snprintf(id, sizeof id, "burst-%d", i);
    jo.id = id;
    ASSERT_OK(rjq_enqueue(q, id, strlen(id), &jo, on_burst_enq, &burst_enq[i]));
}

static void enqueue_named(rjq_queue *q, const char *prefix, int n, enq_res *e) {
    rjq_enqueue_item *items = calloc((size_t)n, sizeof *items);
    rjq_job_options *opts = calloc((size_t)n, sizeof *opts);
    char (*names)[32] = calloc((size_t)n, sizeof *names);
    ASSERT(items && opts && names);
    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "%s-%d", prefix, i);
        opts[i].size = sizeof opts[i];
        opts[i].id = names[i];
        items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), names[i], strlen(names[i]), &opts[i]};
    }
    ASSERT_OK(rjq_enqueue_batch(q, items, (size_t)n, on_enq, e));
    free(items);
    free(opts);
    free(names);
}

TEST(server_restart_work_resumes) {
    const char *qname = "restart";
    const char *const extra[] = {"--appendonly", "yes", NULL};
    test_server s;
    server_start_guarded(&s, extra);
    struct event_base *base = event_base_new();
    conn_events ev = {0};
    rjq_client *c = client_with_events(base, &s, &ev);
    rjq_queue *q = queue_for(c, qname);
    wait_connected(base, c);

    /* Every job completes 5 ms after its handler ran. The lease is long
     * compared with a restart, so no running job is reclaimed meanwhile;
     * the poll is far away, so only the doorbell and reconnects wake the
     * worker. */
    work_ctx w;
    work_init(&w, base, 2, 5);
    rjq_worker_options wo = {.size = sizeof(rjq_worker_options), .concurrency = 10, .lease_ms = 10000, .reclaim_ms = 200};
    rjq_worker *wk = start_doorbell_worker(q, wo, &w);

    enq_res pre = {0};
    enqueue_named(q, "pre", RESTART_PRE, &pre);
    ASSERT(loop_until_count(base, &pre.ok_jobs, RESTART_PRE, 10000));
    ASSERT(loop_until_count(base, &w.done_ok, 50, 30000));
    ASSERT(w.done_ok < RESTART_PRE); /* the restart hits a running worker */

    /* Requests in flight, a third each: sent before the server goes away;
     * queued on the old connection after it went away; issued while the
     * server is down and the client knows it. Completions of held jobs are
     * handed to the connection after the server stopped, before the client
     * noticed: written into a dead connection or not at all, their replies
     * can only come after a resend. */
    long cmd_up = ev.connected[RJQ_CONN_COMMAND], sub_up = ev.connected[RJQ_CONN_SUBSCRIBER];
    for (int i = 0; i < 1000 && w.npending == 0; i++) event_base_loop(base, EVLOOP_ONCE);
    ASSERT(w.npending > 0);
    event_del(w.flush_ev); /* they stay held until the server is gone (flushed below) */
    for (int i = 0; i < RESTART_BURST / 3; i++) burst_enqueue(q, i);
    for (int i = 0; i < RESTART_STATS / 3; i++)
        ASSERT_OK(rjq_queue_get_stats(q, on_burst_stats, &burst_stats[i]));
    event_base_loop(base, EVLOOP_NONBLOCK); /* writes them */
    long held = (long)w.npending, done_before = w.done_ok;
    ASSERT(held > 0);

    /* Stop the server (data kept in the append-only file) ... */
    pid_t old_pid = s.pid;
    ASSERT(kill(old_pid, SIGTERM) == 0);
    ASSERT(waitpid(old_pid, NULL, 0) == old_pid);
    forget_on_abort(old_pid);
    s.pid = 0;
    on_flush_timer(-1, 0, &w);
    struct timeval flush_every = {0, 5000};
    event_add(w.flush_ev, &flush_every);
    /* One pass: the queue tick hands them to hiredis, which writes them to
     * the dead connection (or finds it closed first). */
    event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    ASSERT_EQ(done_before, w.done_ok); /* their callbacks are still to come */
    for (int i = RESTART_BURST / 3; i < 2 * RESTART_BURST / 3; i++) burst_enqueue(q, i);
    for (int i = RESTART_STATS / 3; i < 2 * RESTART_STATS / 3; i++)
        ASSERT_OK(rjq_queue_get_stats(q, on_burst_stats, &burst_stats[i]));
    /* ... the client notices, and its reconnect attempts fail meanwhile. */
    long cmd_err = ev.errors[RJQ_CONN_COMMAND];
    ASSERT(loop_until_count(base, &ev.disconnected[RJQ_CONN_COMMAND], 1, 10000));
    ASSERT(loop_until_count(base, &ev.errors[RJQ_CONN_COMMAND], cmd_err + 1, 10000));
    ASSERT(!rjq_client_is_connected(c));
    for (int i = 2 * RESTART_BURST / 3; i < RESTART_BURST; i++) burst_enqueue(q, i);
    for (int i = 2 * RESTART_STATS / 3; i < RESTART_STATS; i++)
        ASSERT_OK(rjq_queue_get_stats(q, on_burst_stats, &burst_stats[i]));
    /* two more reconnect attempts failed with them waiting: nothing ended */
    ASSERT(loop_until_count(base, &ev.errors[RJQ_CONN_COMMAND], cmd_err + 3, 10000));
    ASSERT_EQ(done_before, w.done_ok); /* retried, not failed */
    server_restart(&s, extra); /* start it again: same port, same files */
    kill_on_abort(s.pid);

    /* The client comes back by itself, both connections. */
    ASSERT(loop_until_count(base, &ev.connected[RJQ_CONN_COMMAND], cmd_up + 1, 20000));
    ASSERT(loop_until_count(base, &ev.connected[RJQ_CONN_SUBSCRIBER], sub_up + 1, 20000));
    ASSERT(ev.disconnected[RJQ_CONN_SUBSCRIBER] >= 1);
    ASSERT(loop_until_count(base, &burst_fired, RESTART_BURST + RESTART_STATS, 20000));
    ASSERT(rjq_client_is_connected(c));

    /* Unknown outcomes are retried with the same id: idempotent. */
    int econn = 0, econn_by_third[3] = {0, 0, 0};
    enq_res retry = {0};
    for (int i = 0; i < RESTART_BURST; i++) {
        ASSERT(burst_enq[i].status == RJQ_OK || burst_enq[i].status == RJQ_ECONN);
        if (burst_enq[i].status != RJQ_ECONN) continue;
        econn_by_third[i / (RESTART_BURST / 3)]++;
        char id[32];
        rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
        snprintf(id, sizeof id, "burst-%d", i);
        jo.id = id;
        ASSERT_OK(rjq_enqueue(q, id, strlen(id), &jo, on_enq, &retry));
        econn++;
    }
    ASSERT(loop_until_count(base, &retry.calls, econn, 20000));
    ASSERT_EQ(0, retry.errors);
    ASSERT_EQ(econn, retry.ok_jobs);
    for (int i = 0; i < RESTART_STATS; i++)
        ASSERT(burst_stats[i].status == RJQ_OK || burst_stats[i].status == RJQ_ECONN);
    fprintf(stderr,
            "enqueues ended with RJQ_ECONN: %d/%d sent before the stop, %d/%d queued on the "
            "dead connection, %d/%d issued while down\n",
            econn_by_third[0], RESTART_BURST / 3, econn_by_third[1], RESTART_BURST / 3,
            econn_by_third[2], RESTART_BURST / 3);

    /* The backlog drains; the worker goes idle. */
    ASSERT(loop_until_count(base, &w.done_ok, RESTART_PRE + RESTART_BURST, 60000));
    WAIT_FOR(base, rjq_worker_count_running(wk) == 0 && w.npending == 0, 5000);
    redisContext *rc = server_connect(&s);
    wait_worker_started(base, c, q, rc, qname); /* idle, subscribed, its claims answered */

    /* New work after the restart reaches the worker started before it: its
     * safety poll is far away, so the doorbell on the resubscribed
     * connection has to wake it. */
    enq_res post = {0};
    enqueue_named(q, "post", RESTART_POST, &post);
    ASSERT(loop_until_count(base, &post.calls, 1, 20000));
    ASSERT_OK(post.last_status);
    ASSERT_EQ(RESTART_POST, post.ok_jobs);
    long total = RESTART_PRE + RESTART_BURST + RESTART_POST;
    ASSERT(loop_until_count(base, &w.done_ok, total, 30000));
    settle_queue(base, c, q, rc); /* a wrong extra run or callback would show now */

    for (int i = 0; i < RESTART_BURST; i++) ASSERT_EQ(1, burst_enq[i].calls);
    for (int i = 0; i < RESTART_STATS; i++) ASSERT_EQ(1, burst_stats[i].calls);
    ASSERT_EQ(RESTART_BURST + RESTART_STATS, burst_fired);
    ASSERT_EQ(total, (long)w.ids.n);
    assert_exactly_once(&w.ids);
    rjq_stats st = get_stats(base, q);
    ASSERT_EQ(total, st.enqueued);
    ASSERT_EQ(total, st.completed);
    ASSERT_EQ(0, st.ready);
    ASSERT_EQ(0, st.active);
    ASSERT_EQ(0, st.delayed);
    ASSERT_EQ(0, st.dead);
    /* The client offered its function library again when it reconnected
     * (a server that kept it, as this one in its append-only file, answers
     * that it exists; one still loading that file rejects the offer with
     * LOADING, counted as a rejected call), and scripts ran as functions
     * before and after. */
    ASSERT(server_calls(rc, "function|load") + function_load_rejected(rc) >= 1);
    ASSERT_EQ(0, server_info_number(rc, "errorstats", "errorstat_NOSCRIPT:count="));
    ASSERT(server_calls(rc, "fcall") >= 1);
    ASSERT(client_list_has(rc, "name=rjq "));
    ASSERT(client_list_has(rc, "name=rjq:sub "));
    redisFree(rc);

    rjq_client_free(c);
    work_free(&w);
    event_base_free(base);
    server_stop_guarded(&s);
}

/* =========================================================================
 * A worker paused longer than its lease (SIGSTOP, a frozen VM) finds, when
 * it wakes, jobs pushed to it before the pause. They were reclaimed and
 * run elsewhere meanwhile: it must start none of them. Before, it ran
 * them (their completions were refused, but the work ran twice). Now the
 * worker knows the server's clock from its replies and hands back, instead
 * of starting, a job whose lease has ended.
 * ========================================================================= */

static int stale_fd = -1;

static void stale_handler(rjq_job *job, void *data) {
    (void)data;
    char line[256];
    int n = snprintf(line, sizeof line, "%s\n", rjq_job_get_id(job));
    ASSERT(write(stale_fd, line, (size_t)n) == n);
    rjq_job_complete(job, "child", 5, NULL, NULL);
}

/* In the child: once a round trip on its command connection sent after
 * SIGUSR1 came back, "synced" on the pipe. Continued, the child reads what
 * waited in its sockets in the loop's first turns, long before a reply
 * to a request sent then can come. */
static void on_synced(rjq_client *c, int status, const rjq_stats *s, void *data) {
    (void)c, (void)s, (void)data;
    ASSERT_OK(status);
    ASSERT(write(stale_fd, "synced\n", 7) == 7);
}

static void on_sync_signal(evutil_socket_t sig, short what, void *arg) {
    (void)sig, (void)what;
    ASSERT_OK(rjq_queue_get_stats(arg, on_synced, NULL));
}

static void run_stale_child(const test_server *s, const char *qname, long lease_ms,
                            long liveness_ms) {
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(s->url);
    o.liveness_ms = liveness_ms;
    rjq_client *c = client_new(base, &o);
    rjq_queue *q = queue_for(c, qname);
    wait_connected(base, c);
    rjq_worker_options wo = quiet_worker_options(2);
    wo.lease_ms = lease_ms;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, stale_handler, NULL, &w));
    /* Ready to be stopped once the replies that registered our slots and
     * our liveness entry (they told us the server's clock) were read: both
     * are in Redis, so their replies went out before this check's, and the
     * loop reads them at once. Stopped before that, we would wake to those
     * replies and the pushes together, with no clock known from before. */
    redisContext *rc = server_connect(s);
    WAIT_FOR(base,
             qcount(rc, "HLEN", qname, "idle") >= 1 &&
                 (liveness_ms < 0 || server_int(rc, "ZCARD t:{clients}:live") >= 1),
             10000);
    redisFree(rc);
    (void)get_stats(base, q); /* a round trip: those replies are read */
    /* SIGUSR1 (sent once continued): a round trip, then "synced" */
    struct event *sync = evsignal_new(base, SIGUSR1, on_sync_signal, q);
    ASSERT(sync != NULL && evsignal_add(sync, NULL) == 0);
    ASSERT(write(stale_fd, "ready\n", 6) == 6);
    event_base_dispatch(base); /* until the parent kills us */
    _exit(3);
}

static long stale_done;

static void parent_handler(rjq_job *job, void *data) {
    (void)data;
    ASSERT_OK(rjq_job_complete(job, "parent", 6, on_done_ok, &stale_done));
}

/* Continue the stopped child (it reads the two pushes now): it must start
 * neither (its handler writes each job it starts to fd); both completed
 * here. Then everything goes. */
static void wake_and_check_started_nothing(pid_t child, int fd, struct event_base *base,
                                           rjq_client *c, redisContext *rc, test_server *s,
                                           const char *qname) {
    ASSERT(kill(child, SIGCONT) == 0);
    ASSERT(kill(child, SIGUSR1) == 0);
    /* its pushes are read once it says "synced"; a job it started is a
     * line before that */
    char buf[256];
    size_t got = 0;
    ASSERT(fcntl(fd, F_SETFL, O_NONBLOCK) == 0);
    double until = wait_deadline(20000);
    while (got < 7 || memcmp(buf + got - 7, "synced\n", 7) != 0) {
        ssize_t n = read(fd, buf + got, sizeof buf - 1 - got);
        if (n > 0) got += (size_t)n;
        else ASSERT(wait_step(base, until));
        ASSERT(got < sizeof buf - 1);
    }
    if (got > 7) {
        buf[got - 7] = '\0';
        FAIL_AT(__FILE__, __LINE__, "the woken worker started jobs taken meanwhile: %s", buf);
    }
    ASSERT_EQ(2, stat_field(rc, qname, "completed"));
    ASSERT_EQ(0, server_active_jobs(rc, qname));

    ASSERT(kill(child, SIGKILL) == 0);
    reap(child, 10000);
    close(fd);
    rjq_client_free(c);
    event_base_free(base);
    redisFree(rc);
    server_stop_guarded(s);
}

/* The stale-job child (run_stale_child) with its pipe: fds[0] is the
 * parent's end, fds[1] closed here. */
static pid_t spawn_stale_child(test_server *s, const char *qname, long lease_ms, long liveness_ms,
                               int fds[2]) {
    ASSERT(pipe(fds) == 0);
    pid_t child = fork_child();
    if (child == 0) {
        close(fds[0]);
        stale_fd = fds[1];
        run_stale_child(s, qname, lease_ms, liveness_ms);
    }
    close(fds[1]);
    /* its "ready" line: it may be stopped now */
    char line[8];
    size_t got = 0;
    while (got < 6) {
        ssize_t n = read(fds[0], line + got, 6 - got);
        ASSERT(n > 0);
        got += (size_t)n;
    }
    ASSERT(memcmp(line, "ready\n", 6) == 0);
    return child;
}

/* Two jobs, both pushed to the stopped child (its slots are registered). */
static void push_two_to_the_stopped_child(struct event_base *base, rjq_queue *q, redisContext *rc,
                                          const char *qname) {
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.id = "p1";
    ASSERT_OK(rjq_enqueue(q, "x", 1, &jo, NULL, NULL));
    jo.id = "p2";
    ASSERT_OK(rjq_enqueue(q, "x", 1, &jo, NULL, NULL));
    WAIT_FOR(base, server_active_jobs(rc, qname) >= 2, 5000);
    ASSERT_EQ(2, server_active_jobs(rc, qname));
}

/* A worker paused after it registered its slots, its two jobs pushed to it
 * meanwhile; past their lease (1 s), the sweep takes them back and they run
 * here. liveness_ms as given (-1: no beat, so only its claim's reply told
 * it the server's clock before the pause). */
static void paused_past_lease_case(const char *qname, long liveness_ms) {
    test_server s;
    server_start_guarded(&s, NULL);
    int fds[2];
    pid_t child = spawn_stale_child(&s, qname, 1000, liveness_ms, fds);
    redisContext *rc = server_connect(&s);
    ASSERT(kill(child, SIGSTOP) == 0);

    struct event_base *base = event_base_new();
    rjq_client *c = client_for(base, &s);
    rjq_queue *q = queue_for(c, qname);
    push_two_to_the_stopped_child(base, q, rc, qname);

    /* their lease (1 s) ends: the server's clock 300 ms past the last
     * deadline (the woken worker's estimate of that clock lags by the
     * replies' trip: it must find the lease over, not nearly over) */
    redisReply *last =
        server_cmd(rc, "ZREVRANGEBYSCORE t:{%s}:active (+inf -inf WITHSCORES LIMIT 0 1", qname);
    ASSERT(last->type == REDIS_REPLY_ARRAY && last->elements == 2);
    long long lease_end = atoll(last->element[1]->str);
    freeReplyObject(last);
    ASSERT(loop_until_server_ms(base, rc, lease_end + 300, 20000));
    count_wait rw = {0};
    ASSERT_OK(rjq_queue_reclaim(q, on_count, &rw));
    ASSERT(loop_until(base, &rw.done, 5000));
    ASSERT_OK(rw.status);
    ASSERT_EQ(2, rw.n);
    stale_done = 0;
    rjq_worker *w;
    rjq_worker_options wo = quiet_worker_options(2);
    ASSERT_OK(rjq_worker_start(q, &wo, parent_handler, NULL, &w));
    ASSERT(loop_until_count(base, &stale_done, 2, 5000));

    wake_and_check_started_nothing(child, fds[0], base, c, rc, &s, qname);
}

TEST(worker_paused_past_its_lease_starts_none_of_its_stale_jobs) {
    paused_past_lease_case("paused", 0);
}

/* With no liveness beat, the empty claim that registered the slots is the
 * only thing that told the worker the server's clock; before, only a claim
 * that got jobs did, so the woken worker took the time of the pushes (made
 * before the pause) for the present and ran the stale jobs. */
TEST(worker_paused_past_its_lease_before_any_job_knows_the_clock_from_its_empty_claim) {
    paused_past_lease_case("paused0", -1);
}

/* The same with a long lease: the paused worker's liveness entry runs out
 * first (liveness_ms 1 s), another client returns its jobs and runs them;
 * when it wakes it starts none of them, although their lease has not
 * ended: it knows its entry may have run out. */
TEST(worker_paused_past_its_liveness_starts_none_of_the_jobs_taken_meanwhile) {
    const char *qname = "paused2";
    test_server s;
    server_start_guarded(&s, NULL);
    int fds[2];
    pid_t child = spawn_stale_child(&s, qname, 60000, 1000, fds);
    redisContext *rc = server_connect(&s);
    /* The jobs are pushed to the stopped child; the parent's worker,
     * started after, sweeps the child once it has beaten steadily for its
     * own liveness_ms (1 s) and the child's entry ran out. */
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(s.url);
    o.liveness_ms = 1000;
    rjq_client *c = client_new(base, &o);
    rjq_queue *q = queue_for(c, qname);
    wait_connected(base, c);
    ASSERT(kill(child, SIGSTOP) == 0);
    push_two_to_the_stopped_child(base, q, rc, qname);

    stale_done = 0;
    rjq_worker *w;
    rjq_worker_options wo = quiet_worker_options(2);
    ASSERT_OK(rjq_worker_start(q, &wo, parent_handler, NULL, &w));
    ASSERT(loop_until_count(base, &stale_done, 2, 10000)); /* swept, run here */
    ASSERT_EQ(2, stat_field(rc, qname, "reclaimed"));

    wake_and_check_started_nothing(child, fds[0], base, c, rc, &s, qname);
}
