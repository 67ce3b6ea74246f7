/*
 * Awaiting job outcomes: rjq_enqueue_await, rjq_queue_await,
 * rjq_await_cancel, rjq_client_count_awaits, rjq_job_report_progress.
 *
 * Producers and workers run on separate clients (two connections each) on
 * one loop, against a private redis-server. Every await records each call
 * of its callback, so "exactly once" and "its own result" are checked per
 * await. Timeouts passed to the loop helpers are only safety nets.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rjq/libevent.h>

#include "harness.h"
#include "server.h"
#include "waits.h"

/* ---- shared fixtures -------------------------------------------------------- */

/* One await as the test sees it. */
typedef struct rec {
    char *expect;         /* expected result (RJQ_OK) or error text (EJOBDEAD) */
    size_t expect_len;
    int want;             /* expected status */
    int calls;            /* callback calls */
    int status;           /* status of the last call */
    int bad;              /* the last call carried the wrong result */
    char id[64];          /* outcome->id of the last call ("" when NULL) */
    int nprogress;        /* progress messages seen */
    char progress[8][16];
    int progress_at_end;  /* nprogress when the outcome arrived */
} rec;

static long resolved;     /* await callbacks, all awaits */

static void rec_set(rec *r, int want, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void rec_set(rec *r, int want, const char *fmt, ...) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    memset(r, 0, sizeof *r);
    r->want = want;
    r->expect = strdup(buf);
    r->expect_len = (size_t)n;
    ASSERT(r->expect != NULL);
}

static void recs_free(rec *r, size_t n) {
    for (size_t i = 0; i < n; i++) free(r[i].expect);
}

static void on_outcome(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    rec *r = data;
    (void)c;
    r->calls++;
    r->status = status;
    r->progress_at_end = r->nprogress;
    snprintf(r->id, sizeof r->id, "%s", o && o->id ? o->id : "");
    r->bad = 0;
    if (status == RJQ_OK)
        r->bad = o == NULL || o->result_len != r->expect_len ||
                 (r->expect_len && memcmp(o->result, r->expect, r->expect_len) != 0);
    else if (status == RJQ_EJOBDEAD)
        r->bad = o == NULL || o->error == NULL || strcmp(o->error, r->expect) != 0;
    resolved++;
}

static void on_progress(rjq_client *c, const char *id, const void *p, size_t len, void *data) {
    rec *r = data;
    (void)c, (void)id;
    if (r->nprogress < 8) snprintf(r->progress[r->nprogress], sizeof r->progress[0], "%.*s", (int)len, (const char *)p);
    r->nprogress++;
}

/* Every await called exactly once, with its expected status and data. */
static void check_recs(const rec *r, size_t n, const char *what) {
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].calls == 1 && r[i].status == r[i].want && !r[i].bad) continue;
        if (wrong++ < 5)
            fprintf(stderr, "%s[%zu]: calls %d status %d (%s) want %d bad %d expect \"%.40s\"\n", what, i,
                    r[i].calls, r[i].status, rjq_strerror(r[i].status), r[i].want, r[i].bad, r[i].expect);
    }
    if (wrong) FAIL_AT(__FILE__, __LINE__, "%s: %zu of %zu awaits wrong", what, wrong, n);
}

/* Client event counters (per client). */
typedef struct events {
    long sub_down, sub_up, cmd_up;
} events;

static void on_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    events *e = data;
    (void)c, (void)detail;
    if (e == NULL) return;
    if (conn == RJQ_CONN_SUBSCRIBER && ev == RJQ_EVENT_DISCONNECTED) e->sub_down++;
    if (conn == RJQ_CONN_SUBSCRIBER && ev == RJQ_EVENT_CONNECTED) e->sub_up++;
    if (conn == RJQ_CONN_COMMAND && ev == RJQ_EVENT_CONNECTED) e->cmd_up++;
}

static rjq_client *mk_client(struct event_base *base, const test_server *s, const char *name,
                             long reconnect_ms, events *ev) {
    rjq_client_options o = RJQ_CLIENT_OPTIONS_INIT;
    rjq_client *c = NULL;
    o.url = s->url;
    o.prefix = "t";
    o.name = name;
    o.reconnect_min_ms = reconnect_ms;
    o.reconnect_max_ms = reconnect_ms * 10;
    o.on_event = on_event;
    o.event_data = ev;
    ASSERT_OK(rjq_libevent_client_new(&c, base, &o));
    return c;
}

/* Each test: fresh counters, a private redis-server killed if it aborts, a
 * loop, a synchronous connection for assertions, and a producer and a
 * worker client on one queue (their own clients, named, so the fixture of
 * fixture.h does not fit). */
typedef struct aw_env {
    test_server s;
    struct event_base *base;
    redisContext *rc;
    rjq_client *pc, *wc; /* producer, worker (NULL until aw_clients) */
    rjq_queue *pq, *wq;  /* their queues */
} aw_env;

/* The producer (its events counted in pev unless NULL) and the worker on queue. */
static void aw_clients(aw_env *e, const char *queue, events *pev) {
    e->pc = mk_client(e->base, &e->s, "producer", 20, pev);
    e->wc = mk_client(e->base, &e->s, "worker", 20, NULL);
    e->pq = queue_for(e->pc, queue);
    e->wq = queue_for(e->wc, queue);
}

/* queue: the producer's and the worker's, or NULL for no clients yet. */
static void aw_start(aw_env *e, const char *queue, events *pev) {
    memset(e, 0, sizeof *e);
    resolved = 0;
    server_start_guarded(&e->s, NULL);
    e->base = event_base_new();
    e->rc = server_connect(&e->s);
    if (queue) aw_clients(e, queue, pev);
}

/* Free the producer and the worker (unless NULL), rc, the loop, the server. */
static void aw_stop(aw_env *e) {
    if (e->pc) rjq_client_free(e->pc);
    if (e->wc) rjq_client_free(e->wc);
    redisFree(e->rc);
    event_base_free(e->base);
    server_stop_guarded(&e->s);
}

/* ---- workers ----------------------------------------------------------------- */

/* What the worker does with a job, decided by its payload:
 *   "big:<n>"  completes with pattern(n) (binary, NULs included)
 *   "prog"     reports progress "1/3" "2/3" "3/3", then completes "done"
 *   "die"      fails with "attempt <a> of <m> failed: die" (retry at once)
 *   otherwise  completes with "r:" + payload
 * unless the worker holds jobs for the test to complete later. */
typedef struct work {
    long handled;         /* handler calls */
    long acked;           /* completions/failures acknowledged by Redis */
    long ack_errors;
    int hold;             /* keep jobs in held[] instead of finishing them */
    rjq_job **held;
    size_t nheld, capheld, next_release;
} work;

static void pattern(char *buf, size_t n) {
    for (size_t i = 0; i < n; i++) buf[i] = (char)((i * 31u + (i >> 8)) & 0xff);
}

static void on_done(rjq_client *c, int status, void *data) {
    work *w = data;
    (void)c;
    if (status != RJQ_OK) w->ack_errors++;
    w->acked++;
}

static void finish(rjq_job *job, work *w) {
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    if (len > 4 && memcmp(p, "big:", 4) == 0) {
        size_t n = (size_t)atol(p + 4);
        char *buf = malloc(n);
        ASSERT(buf != NULL);
        pattern(buf, n);
        ASSERT_OK(rjq_job_complete(job, buf, n, on_done, w));
        free(buf);
    } else if (len == 4 && memcmp(p, "prog", 4) == 0) {
        ASSERT_OK(rjq_job_report_progress(job, "1/3", 3));
        ASSERT_OK(rjq_job_report_progress(job, "2/3", 3));
        ASSERT_OK(rjq_job_report_progress(job, "3/3", 3));
        ASSERT_OK(rjq_job_complete(job, "done", 4, on_done, w));
    } else if (len == 3 && memcmp(p, "die", 3) == 0) {
        char err[64];
        snprintf(err, sizeof err, "attempt %d of %d failed: die", rjq_job_get_attempt(job),
                 rjq_job_get_max_attempts(job));
        ASSERT_OK(rjq_job_fail(job, err, RJQ_FAIL_RETRY, 0, on_done, w));
    } else {
        char *res = malloc(len + 2);
        ASSERT(res != NULL);
        memcpy(res, "r:", 2);
        memcpy(res + 2, p, len);
        ASSERT_OK(rjq_job_complete(job, res, len + 2, on_done, w));
        free(res);
    }
}

static void handler(rjq_job *job, void *data) {
    work *w = data;
    w->handled++;
    if (!w->hold) {
        finish(job, w);
        return;
    }
    if (w->nheld == w->capheld) {
        w->capheld = w->capheld ? w->capheld * 2 : 256;
        w->held = realloc(w->held, w->capheld * sizeof *w->held);
        ASSERT(w->held != NULL);
    }
    w->held[w->nheld++] = job;
}

/* Finish up to n held jobs, oldest first. Returns how many. */
static size_t release(work *w, size_t n) {
    size_t done = 0;
    while (done < n && w->next_release < w->nheld) {
        finish(w->held[w->next_release++], w);
        done++;
    }
    return done;
}

static rjq_worker *start_worker(rjq_queue *q, int concurrency, work *w) {
    rjq_worker_options o = RJQ_WORKER_OPTIONS_INIT;
    rjq_worker *wk = NULL;
    o.concurrency = concurrency;
    ASSERT_OK(rjq_worker_start(q, &o, handler, w, &wk));
    return wk;
}

static void on_stopped(rjq_worker *w, int status, void *data) {
    (void)w;
    *(int *)data = status == RJQ_OK ? 1 : -1;
}

static void stop_worker(struct event_base *base, rjq_worker *wk) {
    int stopped = 0;
    ASSERT_OK(rjq_worker_stop(wk, on_stopped, &stopped));
    ASSERT(loop_until(base, &stopped, 10000));
    ASSERT_EQ(1, stopped);
}

/* ---- small helpers ----------------------------------------------------------- */

static void on_enqueued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs, (void)n;
    long *count = data;
    ASSERT_OK(status);
    (*count)++;
}

/* Enqueue with an explicit id and wait until Redis has it. */
static void enqueue_id(struct event_base *base, rjq_queue *q, const char *id, const char *payload,
                       int max_attempts) {
    long done = 0;
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = id;
    o.max_attempts = max_attempts;
    ASSERT_OK(rjq_enqueue(q, payload, strlen(payload), &o, on_enqueued, &done));
    ASSERT(loop_until_count(base, &done, 1, 5000));
}

static void on_job_info(rjq_client *c, int status, const rjq_job_info *info, void *data) {
    (void)c;
    ASSERT_OK(status);
    *(int *)data = info->payload_len == (8u << 20) ? 1 : -1;
}

static void on_stats_sentinel(rjq_client *c, int status, const rjq_stats *st, void *data) {
    (void)c, (void)st;
    ASSERT_OK(status);
    *(int *)data = 1;
}

/* A round trip on c's command connection: every reply to a command sent
 * on it before this call has been processed when this returns. */
static void sync_client(struct event_base *base, rjq_queue *q) {
    int done = 0;
    ASSERT_OK(rjq_queue_get_stats(q, on_stats_sentinel, &done));
    ASSERT(loop_until(base, &done, 10000));
}

/* Whether job id has a value in column `field` (src/lua/lib.lua). */
static int job_has_field(redisContext *rc, const char *queue, const char *id, const char *field) {
    return (int)server_int(rc, "HEXISTS t:{%s}:%s %s", queue, field, id);
}

/* Wait until the job hash records a reply channel (an await is registered
 * on the server side). Returns the number of channels recorded. */
typedef struct watchers_poll {
    redisContext *rc;
    const char *queue, *id;
    int want, n;
} watchers_poll;

static int has_watchers(void *arg) {
    watchers_poll *p = arg;
    redisReply *r = server_cmd(p->rc, "HGET t:{%s}:watchers %s", p->queue, p->id);
    p->n = 0;
    if (r->type == REDIS_REPLY_STRING && r->len > 0) {
        p->n = 1;
        for (size_t k = 0; k < r->len; k++) p->n += r->str[k] == ' ';
    }
    freeReplyObject(r);
    return p->n >= p->want;
}

static int wait_watchers(struct event_base *base, redisContext *rc, const char *queue, const char *id,
                         int want) {
    watchers_poll p = {rc, queue, id, want, 0};
    if (!loop_until_cond(base, has_watchers, &p, 10000))
        FAIL_AT(__FILE__, __LINE__, "job %s never got %d watcher(s)", id, want);
    return p.n;
}

static void on_barrier(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)c, (void)o;
    ASSERT_OK(status);
    (*(int *)data)++;
}

/* A barrier on the reply channel of q's client: an await of a job of
 * queue "barrier" (no worker runs it) gets an outcome published by hand
 * now; once it is answered, the client has read every outcome published
 * on its channel before (one subscriber connection: messages in order),
 * and every reply to what it sent before on its command connection. A
 * second outcome that was coming has come. */
static void outcomes_barrier(struct event_base *base, redisContext *rc, rjq_client *c) {
    static int n;
    char id[32];
    snprintf(id, sizeof id, "barrier-%d", ++n);
    rjq_queue *bq = queue_for(c, "barrier");
    int done = 0;
    rjq_job_options o = {.size = sizeof(rjq_job_options), .id = id};
    ASSERT_OK(rjq_enqueue_await(bq, "b", 1, &o, NULL, on_barrier, &done, NULL));
    ASSERT_EQ(1, wait_watchers(base, rc, "barrier", id, 1));
    int sent = 0; /* the enqueue's reply processed: the await watches the job */
    ASSERT_OK(rjq_queue_get_stats(bq, on_stats_sentinel, &sent));
    ASSERT(loop_until(base, &sent, 10000));
    redisReply *ch = server_cmd(rc, "HGET t:{barrier}:watchers %s", id);
    ASSERT(ch->type == REDIS_REPLY_STRING);
    redisReply *r = server_cmd(rc, "PUBLISH %s completed\nt:{barrier}:job:%s\nx", ch->str, id);
    ASSERT_EQ(1, r->integer);
    freeReplyObject(r);
    freeReplyObject(ch);
    ASSERT(loop_until(base, &done, 10000));
    ASSERT_EQ(1, done);
}

static long long llen(redisContext *rc, const char *queue) {
    return server_int(rc, "LLEN t:{%s}:ready", queue);
}

/* ---- 1. no window: before, during and after registration ---------------------- */

TEST(await_never_misses_completion_before_during_after_registration) {
    aw_env e;
    aw_start(&e, "aw", NULL);
    work w = {0};
    rjq_worker *wk = start_worker(e.wq, 50, &w);

    /* Before: the job completed (Redis acknowledged it) before any await. */
    rec before[2];
    enqueue_id(e.base, e.pq, "before-1", "p-before", 0);
    ASSERT(loop_until_count(e.base, &w.acked, 1, 5000));
    ASSERT_EQ(0, w.ack_errors);
    redisReply *st = server_cmd(e.rc, "HGET t:{aw}:state before-1"); /* "completed 1 <token>" */
    ASSERT(st->type == REDIS_REPLY_STRING && strncmp(st->str, "completed ", 10) == 0);
    freeReplyObject(st);
    rec_set(&before[0], RJQ_OK, "r:p-before");
    rec_set(&before[1], RJQ_OK, "r:p-before");
    ASSERT_OK(rjq_queue_await(e.pq, "before-1", NULL, on_outcome, &before[0], NULL));
    /* enqueue_await of an id that already finished: answered from its state */
    rjq_job_options same = RJQ_JOB_OPTIONS_INIT;
    same.id = "before-1";
    ASSERT_OK(rjq_enqueue_await(e.pq, "ignored", 7, &same, NULL, on_outcome, &before[1], NULL));
    ASSERT(loop_until_count(e.base, &resolved, 2, 5000));
    check_recs(before, 2, "before");
    ASSERT_STREQ("before-1", before[0].id);
    ASSERT_STREQ("before-1", before[1].id);

    /* During: many awaits registered while the worker completes jobs as
     * fast as it can, plus awaits by id racing their jobs' completion. */
    enum { ND = 2000, NQ = 500 };
    rec *during = calloc(ND + NQ, sizeof *during);
    ASSERT(during != NULL);
    unsigned salt = (unsigned)getpid();
    long base_resolved = resolved;
    for (int i = 0; i < ND; i++) {
        char payload[64];
        int n = snprintf(payload, sizeof payload, "during-%d-%08x", i, salt);
        rec_set(&during[i], RJQ_OK, "r:%s", payload);
        ASSERT_OK(rjq_enqueue_await(e.pq, payload, (size_t)n, NULL, NULL, on_outcome, &during[i], NULL));
        if (i % 200 == 0) event_base_loop(e.base, EVLOOP_NONBLOCK); /* let the worker run meanwhile */
    }
    for (int i = 0; i < NQ; i++) {
        char payload[64], id[32];
        snprintf(id, sizeof id, "dq-%d", i);
        int n = snprintf(payload, sizeof payload, "byid-%d-%08x", i, salt);
        rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
        o.id = id;
        rec_set(&during[ND + i], RJQ_OK, "r:%s", payload);
        ASSERT_OK(rjq_enqueue(e.pq, payload, (size_t)n, &o, NULL, NULL));
        ASSERT_OK(rjq_queue_await(e.pq, id, NULL, on_outcome, &during[ND + i], NULL));
        if (i % 100 == 0) event_base_loop(e.base, EVLOOP_NONBLOCK);
    }
    ASSERT(loop_until_count(e.base, &resolved, base_resolved + ND + NQ, 60000));
    check_recs(during, ND + NQ, "during");
    ASSERT_EQ(0, rjq_client_count_awaits(e.pc));

    /* During, outcome first: each job's outcome reaches the producer while
     * its enqueue reply still waits behind a big reply (a job info of
     * several MiB) on the command connection. */
    enum { NB = 50, BULK = 8 << 20 };
    char *bulk = malloc(BULK);
    ASSERT(bulk != NULL);
    memset(bulk, 'b', BULK);
    rjq_queue *bq = queue_for(e.pc, "bulk");
    long bulk_done = 0;
    rjq_job_options bo = RJQ_JOB_OPTIONS_INIT;
    bo.id = "bulk-1";
    ASSERT_OK(rjq_enqueue(bq, bulk, BULK, &bo, on_enqueued, &bulk_done));
    ASSERT(loop_until_count(e.base, &bulk_done, 1, 10000));
    free(bulk);
    rec *first = calloc(NB, sizeof *first);
    ASSERT(first != NULL);
    long before_first = resolved;
    int info = 0;
    ASSERT_OK(rjq_queue_get_job(bq, "bulk-1", on_job_info, &info));
    for (int i = 0; i < NB; i++) {
        char payload[32];
        int n = snprintf(payload, sizeof payload, "first-%d", i);
        rec_set(&first[i], RJQ_OK, "r:%s", payload);
        ASSERT_OK(rjq_enqueue_await(e.pq, payload, (size_t)n, NULL, NULL, on_outcome, &first[i], NULL));
    }
    ASSERT(loop_until_count(e.base, &resolved, before_first + NB, 20000));
    ASSERT(loop_until(e.base, &info, 10000));
    ASSERT_EQ(1, info);
    check_recs(first, NB, "outcome-first");
    recs_free(first, NB);
    free(first);
    base_resolved = resolved - ND - NQ;

    /* After: awaits registered (the server records the channel) while no
     * worker runs; a worker started later completes the jobs. */
    stop_worker(e.base, wk);
    rec after[2];
    rec_set(&after[0], RJQ_OK, "r:p-after-1");
    rec_set(&after[1], RJQ_OK, "r:p-after-2");
    rjq_job_options a1 = RJQ_JOB_OPTIONS_INIT;
    a1.id = "after-1";
    ASSERT_OK(rjq_enqueue_await(e.pq, "p-after-1", 9, &a1, NULL, on_outcome, &after[0], NULL));
    enqueue_id(e.base, e.pq, "after-2", "p-after-2", 0);
    ASSERT_OK(rjq_queue_await(e.pq, "after-2", NULL, on_outcome, &after[1], NULL));
    wait_watchers(e.base, e.rc, "aw", "after-1", 1);
    wait_watchers(e.base, e.rc, "aw", "after-2", 1);
    sync_client(e.base, e.pq); /* the enqueue and watch replies are processed */
    outcomes_barrier(e.base, e.rc, e.pc);
    ASSERT_EQ(0, after[0].calls);
    ASSERT_EQ(0, after[1].calls);
    ASSERT_EQ(2, rjq_client_count_awaits(e.pc));
    long handled = w.handled;
    wk = start_worker(e.wq, 10, &w);
    ASSERT(loop_until_count(e.base, &resolved, base_resolved + ND + NQ + 2, 10000));
    check_recs(after, 2, "after");
    ASSERT_EQ(handled + 2, w.handled);
    ASSERT_EQ(0, rjq_client_count_awaits(e.pc));

    recs_free(before, 2);
    recs_free(during, ND + NQ);
    free(during);
    recs_free(after, 2);
    aw_stop(&e);
    free(w.held);
}

/* ---- 2. ten thousand at once ------------------------------------------------------ */

static long rss_kib(void) {
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL) return 0;
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
    fclose(f);
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

TEST(ten_thousand_concurrent_awaits_resolve_with_right_results) {
    enum { N = 10000 };
    aw_env e;
    aw_start(&e, "ten", NULL);
    wait_connected(e.base, e.pc);
    wait_connected(e.base, e.wc);
    /* awaits made while the handle reads its layout are held, and counted
     * only once made (rjq.h): the count below is of made awaits */
    wait_layout_known(e.base, e.pq);
    rec *r = calloc(N, sizeof *r);
    ASSERT(r != NULL);
    unsigned salt = (unsigned)getpid() * 2654435761u;
    char (*payloads)[48] = malloc(N * sizeof *payloads);
    ASSERT(payloads != NULL);
    for (int i = 0; i < N; i++) {
        snprintf(payloads[i], sizeof payloads[i], "ten-%05d-%08x", i, salt ^ (unsigned)i * 40503u);
        rec_set(&r[i], RJQ_OK, "r:%s", payloads[i]);
    }

    malloc_trim(0);
    struct mallinfo2 m0 = mallinfo2();
    long rss0 = rss_kib();
    for (int i = 0; i < N; i++)
        ASSERT_OK(rjq_enqueue_await(e.pq, payloads[i], strlen(payloads[i]), NULL, NULL, on_outcome, &r[i], NULL));
    ASSERT_EQ(N, rjq_client_count_awaits(e.pc));
    /* all enqueued on the server, and their replies processed */
    WAIT_FOR(e.base, llen(e.rc, "ten") >= N, 60000);
    ASSERT_EQ(N, llen(e.rc, "ten"));
    sync_client(e.base, e.pq);
    ASSERT_EQ(0, resolved);
    ASSERT_EQ(N, rjq_client_count_awaits(e.pc));
    malloc_trim(0);
    struct mallinfo2 m1 = mallinfo2();
    long rss1 = rss_kib();
    if (m0.uordblks == 0 && m1.uordblks == 0) /* a sanitizer's allocator: no malloc stats */
        fprintf(stderr, "memory per pending await: malloc stats unavailable; RSS delta %.0f bytes/await\n",
                (double)(rss1 - rss0) * 1024.0 / N);
    else
        fprintf(stderr, "memory per pending await: %.0f bytes (malloc in use: %zu -> %zu), RSS delta %.0f bytes/await\n",
                ((double)m1.uordblks - (double)m0.uordblks) / N, m0.uordblks, m1.uordblks,
                (double)(rss1 - rss0) * 1024.0 / N);

    work w = {0};
    start_worker(e.wq, 200, &w);
    ASSERT(loop_until_count(e.base, &resolved, N, 90000));
    check_recs(r, N, "ten-thousand");
    ASSERT_EQ(0, rjq_client_count_awaits(e.pc));
    outcomes_barrier(e.base, e.rc, e.pc);
    ASSERT_EQ(N, resolved); /* nothing called twice afterwards */
    ASSERT_EQ(N, w.handled);

    recs_free(r, N);
    free(r);
    free(payloads);
    aw_stop(&e);
}

/* ---- 3. subscriber connection killed while jobs complete ---------------------------- */

typedef struct trickle {
    work *w;
    struct event *ev;
    size_t per_tick;
    size_t limit;         /* release no further than this many jobs */
} trickle;

static void on_trickle(evutil_socket_t fd, short what, void *arg) {
    trickle *t = arg;
    (void)fd, (void)what;
    size_t room = t->limit > t->w->next_release ? t->limit - t->w->next_release : 0;
    release(t->w, room < t->per_tick ? room : t->per_tick);
}

static long long kill_pubsub(redisContext *rc) {
    return server_int(rc, "CLIENT KILL TYPE pubsub");
}

TEST(subscriber_killed_while_jobs_complete_every_await_resolves_once) {
    /* NE enqueue_awaits and NI awaits by id up front; NK more
     * enqueue_awaits sent right after each kill (in flight while the
     * subscriber connection is down). */
    enum { NE = 400, NI = 200, N0 = NE + NI, NK = 50, N = N0 + 2 * NK, KILL_BATCH = 25 };
    events pev = {0};
    aw_env e;
    aw_start(&e, "kill", &pev);
    work w = {0};
    w.hold = 1;
    start_worker(e.wq, N, &w);

    rec *r = calloc(N, sizeof *r);
    ASSERT(r != NULL);
    for (int i = 0; i < NE; i++) {
        char payload[32];
        int n = snprintf(payload, sizeof payload, "k-%d", i);
        rec_set(&r[i], RJQ_OK, "r:%s", payload);
        ASSERT_OK(rjq_enqueue_await(e.pq, payload, (size_t)n, NULL, NULL, on_outcome, &r[i], NULL));
    }
    for (int i = 0; i < NI; i++) {
        char payload[32], id[32];
        snprintf(id, sizeof id, "ki-%d", i);
        int n = snprintf(payload, sizeof payload, "ki-payload-%d", i);
        rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
        o.id = id;
        rec_set(&r[NE + i], RJQ_OK, "r:%s", payload);
        ASSERT_OK(rjq_enqueue(e.pq, payload, (size_t)n, &o, NULL, NULL));
        ASSERT_OK(rjq_queue_await(e.pq, id, NULL, on_outcome, &r[NE + i], NULL));
    }
    /* every job claimed and held, every await registered */
    ASSERT(loop_until_count(e.base, &w.handled, N0, 30000));
    sync_client(e.base, e.pq);
    ASSERT_EQ(N0, rjq_client_count_awaits(e.pc));

    /* A timer completes a few held jobs every 2 ms, keeping KILL_BATCH
     * of the first N0 in reserve for each kill. */
    trickle t = {&w, NULL, 4, N0 - 2 * KILL_BATCH};
    t.ev = event_new(e.base, -1, EV_PERSIST, on_trickle, &t);
    struct timeval tv = {0, 2000};
    event_add(t.ev, &tv);

    for (int round = 1; round <= 2; round++) {
        ASSERT(loop_until_count(e.base, &resolved, round * N0 / 3, 20000));
        ASSERT(kill_pubsub(e.rc) >= 1);
        /* Completions that run now are published while the producer has no
         * subscriber connection: their messages are lost for good. */
        ASSERT_EQ(KILL_BATCH, release(&w, KILL_BATCH));
        /* Enqueues that go out before the producer notices. */
        for (int i = 0; i < NK; i++) {
            int k = N0 + (round - 1) * NK + i;
            char payload[32];
            int n = snprintf(payload, sizeof payload, "kk-%d", k);
            rec_set(&r[k], RJQ_OK, "r:%s", payload);
            ASSERT_OK(rjq_enqueue_await(e.pq, payload, (size_t)n, NULL, NULL, on_outcome, &r[k], NULL));
        }
        ASSERT(loop_until_count(e.base, &pev.sub_up, round + 1, 10000)); /* back (first up + rounds) */
    }
    t.limit = (size_t)-1;
    ASSERT(loop_until_count(e.base, &resolved, N, 20000));
    outcomes_barrier(e.base, e.rc, e.pc);
    ASSERT_EQ(2, pev.sub_down);
    check_recs(r, N, "killed");
    ASSERT_EQ(N, resolved);
    ASSERT_EQ(N, w.handled);
    ASSERT_EQ(0, rjq_client_count_awaits(e.pc));
    ASSERT_EQ(0, w.ack_errors);

    event_free(t.ev);
    recs_free(r, N);
    free(r);
    aw_stop(&e);
    free(w.held);
}

/* ---- 4. timeout ------------------------------------------------------------------- */

TEST(timeout_fires_once_late_completion_ignored) {
    aw_env e;
    aw_start(&e, "to", NULL);
    enqueue_id(e.base, e.pq, "to-1", "p-1", 0);

    rec r[2];
    rec_set(&r[0], RJQ_ETIMEDOUT, "-");
    rec_set(&r[1], RJQ_ETIMEDOUT, "-");
    rjq_await_options ao = RJQ_AWAIT_OPTIONS_INIT;
    ao.timeout_ms = 200;
    ASSERT_OK(rjq_queue_await(e.pq, "to-1", &ao, on_outcome, &r[0], NULL));
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "to-2";
    ASSERT_OK(rjq_enqueue_await(e.pq, "p-2", 3, &o, &ao, on_outcome, &r[1], NULL));
    int synced = 0;
    ASSERT_OK(rjq_queue_get_stats(e.pq, on_stats_sentinel, &synced));
    ASSERT(loop_until_count(e.base, &resolved, 2, 5000));
    int id_known = synced && r[1].calls == 1; /* the enqueue reply came before the timeout */
    check_recs(r, 2, "timeout");
    ASSERT_STREQ("to-1", r[0].id);
    if (id_known) ASSERT_STREQ("to-2", r[1].id);
    ASSERT_EQ(0, rjq_client_count_awaits(e.pc));

    /* The jobs complete late: the outcome is published to the producer
     * (its channel is recorded on the job) and must be ignored. */
    ASSERT_EQ(1, job_has_field(e.rc, "to", "to-2", "watchers"));
    ASSERT_EQ(1, job_has_field(e.rc, "to", "to-1", "watchers"));
    work w = {0};
    start_worker(e.wq, 4, &w);
    ASSERT(loop_until_count(e.base, &w.acked, 2, 10000));
    ASSERT_EQ(0, w.ack_errors);
    /* told, and so dropped: a finished job has no watchers */
    ASSERT_EQ(0, job_has_field(e.rc, "to", "to-2", "watchers"));
    ASSERT_EQ(0, job_has_field(e.rc, "to", "to-1", "watchers"));
    outcomes_barrier(e.base, e.rc, e.pc);
    ASSERT_EQ(1, r[0].calls);
    ASSERT_EQ(1, r[1].calls);
    ASSERT_EQ(2, resolved);
    ASSERT_EQ(0, rjq_client_count_awaits(e.pc));

    recs_free(r, 2);
    aw_stop(&e);
}

/* A timeout that runs out before the enqueue's reply (Redis stopped) does
 * not hide that reply: the await ends once it comes, with the job's id
 * (rjq_await_options.timeout_ms). Both the enqueue sent (the reply channel
 * confirmed) and the one held for the subscription (a fresh client). */
TEST(enqueue_await_timeout_before_the_enqueue_reply_still_gives_the_id) {
    aw_env e;
    aw_start(&e, "tb", NULL);
    rjq_client *fresh = mk_client(e.base, &e.s, "fresh", 20, NULL);
    rjq_queue *fq = queue_for(fresh, "tb");
    wait_connected(e.base, fresh);
    rec r[5];
    rec_set(&r[0], RJQ_ENOTFOUND, "-"); /* confirms e.pc's reply channel */
    ASSERT_OK(rjq_queue_await(e.pq, "tb-none", NULL, on_outcome, &r[0], NULL));
    ASSERT(loop_until_count(e.base, &resolved, 1, 5000));

    ASSERT_EQ(0, kill(e.s.pid, SIGSTOP));
    rjq_await_options ao = RJQ_AWAIT_OPTIONS_INIT;
    ao.timeout_ms = 1;
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "tb-1";
    rec_set(&r[1], RJQ_ETIMEDOUT, "-");
    rec_set(&r[2], RJQ_ETIMEDOUT, "-");
    rec_set(&r[3], RJQ_ETIMEDOUT, "-");
    ASSERT_OK(rjq_enqueue_await(e.pq, "p", 1, &o, &ao, on_outcome, &r[1], NULL));
    ASSERT_OK(rjq_enqueue_await(e.pq, "p", 1, NULL, &ao, on_outcome, &r[2], NULL));
    ASSERT_OK(rjq_enqueue_await(fq, "p", 1, NULL, &ao, on_outcome, &r[3], NULL));
    /* a clock: its timer runs after theirs */
    rec_set(&r[4], RJQ_ETIMEDOUT, "-");
    ao.timeout_ms = 5;
    ASSERT_OK(rjq_queue_await(e.pq, "tb-clock", &ao, on_outcome, &r[4], NULL));
    ASSERT(loop_until(e.base, &r[4].calls, 5000));
    ASSERT_EQ(0, r[1].calls); /* their timeouts ran: they wait for the replies */
    ASSERT_EQ(0, r[2].calls);
    ASSERT_EQ(0, r[3].calls);
    ASSERT_EQ(0, kill(e.s.pid, SIGCONT));
    ASSERT(loop_until_count(e.base, &resolved, 5, 10000));
    check_recs(r, 5, "timeout-before-reply");
    ASSERT_STREQ("tb-1", r[1].id);
    ASSERT(r[2].id[0] != '\0');
    ASSERT(r[3].id[0] != '\0');
    ASSERT_EQ(3, server_int(e.rc, "LLEN t:{tb}:ready")); /* every job was enqueued */
    ASSERT_EQ(0, rjq_client_count_awaits(e.pc));
    ASSERT_EQ(0, rjq_client_count_awaits(fresh));
    rjq_client_free(fresh);
    recs_free(r, 5);
    aw_stop(&e);
}

/* An await's timeout bounds it while Redis is away: an enqueue with an
 * explicit id is re-sent after every reconnect (idempotent) and so gets no
 * reply while Redis is stopped; its await must still end within (a
 * generous multiple of) its timeout_ms, not when Redis comes back. */
TEST(enqueue_await_with_an_id_ends_near_its_timeout_while_redis_is_stopped) {
    aw_env e;
    aw_start(&e, NULL, NULL);
    rjq_client_options co = RJQ_CLIENT_OPTIONS_INIT;
    co.url = e.s.url;
    co.prefix = "t";
    co.command_timeout_ms = 300;
    co.connect_timeout_ms = 300;
    co.reconnect_min_ms = 50;
    co.reconnect_max_ms = 300;
    rjq_client *c = NULL;
    ASSERT_OK(rjq_libevent_client_new(&c, e.base, &co));
    rjq_queue *q = queue_for(c, "tu");
    wait_connected(e.base, c);
    rec r[2];
    rec_set(&r[0], RJQ_ENOTFOUND, "-"); /* confirms the reply channel */
    ASSERT_OK(rjq_queue_await(q, "tu-none", NULL, on_outcome, &r[0], NULL));
    ASSERT(loop_until_count(e.base, &resolved, 1, 5000));
    ASSERT_EQ(0, kill(e.s.pid, SIGSTOP));
    rjq_await_options ao = RJQ_AWAIT_OPTIONS_INIT;
    ao.timeout_ms = 200;
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "tu-1";
    rec_set(&r[1], RJQ_ETIMEDOUT, "-");
    ASSERT_OK(rjq_enqueue_await(q, "p", 1, &o, &ao, on_outcome, &r[1], NULL));
    int ended = loop_until(e.base, &r[1].calls, 6000); /* 30 times its timeout */
    ASSERT_EQ(0, kill(e.s.pid, SIGCONT));
    ASSERT(ended);
    ASSERT_EQ(RJQ_ETIMEDOUT, r[1].status);
    rjq_client_free(c);
    recs_free(r, 2);
    aw_stop(&e);
}

/* ---- 5. dead jobs and unknown ids ------------------------------------------------ */

TEST(await_of_dead_job_reports_last_error) {
    aw_env e;
    aw_start(&e, "dead", NULL);
    work w = {0};
    start_worker(e.wq, 4, &w);

    rec r[3];
    rec_set(&r[0], RJQ_EJOBDEAD, "attempt 2 of 2 failed: die");
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "d-1";
    o.max_attempts = 2;
    ASSERT_OK(rjq_enqueue_await(e.pq, "die", 3, &o, NULL, on_outcome, &r[0], NULL));
    ASSERT(loop_until_count(e.base, &resolved, 1, 10000));
    check_recs(r, 1, "dead");
    ASSERT_STREQ("d-1", r[0].id);
    ASSERT_EQ(2, w.handled); /* both attempts ran */

    /* Awaited after it died: answered from the stored state. */
    rec_set(&r[1], RJQ_EJOBDEAD, "attempt 2 of 2 failed: die");
    ASSERT_OK(rjq_queue_await(e.pq, "d-1", NULL, on_outcome, &r[1], NULL));
    rec_set(&r[2], RJQ_ENOTFOUND, "-");
    ASSERT_OK(rjq_queue_await(e.pq, "no-such-job", NULL, on_outcome, &r[2], NULL));
    ASSERT(loop_until_count(e.base, &resolved, 3, 10000));
    check_recs(r, 3, "dead-after");
    ASSERT_STREQ("d-1", r[1].id);
    ASSERT_STREQ("no-such-job", r[2].id);
    outcomes_barrier(e.base, e.rc, e.pc);
    ASSERT_EQ(3, resolved);
    ASSERT_EQ(0, rjq_client_count_awaits(e.pc));

    recs_free(r, 3);
    aw_stop(&e);
}

/* ---- 6. free, cancel, free from inside a callback ---------------------------------- */

typedef struct freer {
    rjq_client *c;
    long calls, ok, canceled_after_free, other_after_free, total;
    int freed;
    int *per;             /* calls per await */
} freer;

typedef struct freer_arg {
    freer *f;
    int i;
} freer_arg;

static void on_outcome_free(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    freer_arg *a = data;
    freer *f = a->f;
    (void)o;
    f->calls++;
    f->per[a->i]++;
    if (f->freed) {
        if (status == RJQ_ECANCELED) f->canceled_after_free++;
        else f->other_after_free++;
        return;
    }
    if (status == RJQ_OK) f->ok++;
    ASSERT(c == f->c);
    f->freed = 1;
    rjq_client_free(c); /* deferred until this callback returns */
    ASSERT_EQ(f->total - 1, rjq_client_count_awaits(c)); /* the others; still valid here */
}

TEST(free_client_with_awaits_pending_cancels_each_once) {
    aw_env e;
    aw_start(&e, NULL, NULL);

    /* Client A: awaits registered before it even connects, watching, then
     * more while its subscriber connection is down (waiting for the
     * subscription). Long reconnect delay so it stays down. */
    enum { A1 = 300, A2 = 100, A3 = 200, A4 = 100, NA = A1 + A2 + A3 + A4 };
    events aev = {0};
    rjq_client *ca = mk_client(e.base, &e.s, "client-a", 3000, &aev);
    rjq_queue *qa = queue_for(ca, "free");
    rec *ra = calloc(NA, sizeof *ra);
    ASSERT(ra != NULL);
    for (int i = 0; i < A1; i++) {
        char id[32];
        snprintf(id, sizeof id, "fa-%d", i);
        rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
        o.id = id;
        rec_set(&ra[i], RJQ_ECANCELED, "-");
        ASSERT_OK(rjq_enqueue_await(qa, id, strlen(id), &o, NULL, on_outcome, &ra[i], NULL));
    }
    for (int i = 0; i < A2; i++) {
        char id[32];
        snprintf(id, sizeof id, "fa-%d", i);
        rec_set(&ra[A1 + i], RJQ_ECANCELED, "-");
        ASSERT_OK(rjq_queue_await(qa, id, NULL, on_outcome, &ra[A1 + i], NULL));
    }
    /* (held by the handle until its layout is read: rjq_queue_open) */
    WAIT_FOR(e.base, llen(e.rc, "free") >= A1, 60000);
    ASSERT_EQ(A1, llen(e.rc, "free"));
    ASSERT_EQ(A1 + A2, rjq_client_count_awaits(ca));
    sync_client(e.base, qa);
    ASSERT_EQ(0, resolved);
    ASSERT(kill_pubsub(e.rc) >= 1);
    WAIT_FOR(e.base, aev.sub_down != 0, 20000);
    ASSERT_EQ(1, aev.sub_down);
    for (int i = 0; i < A3; i++) {
        char p[32];
        int n = snprintf(p, sizeof p, "fb-%d", i);
        rec_set(&ra[A1 + A2 + i], RJQ_ECANCELED, "-");
        ASSERT_OK(rjq_enqueue_await(qa, p, (size_t)n, NULL, NULL, on_outcome, &ra[A1 + A2 + i], NULL));
    }
    for (int i = 0; i < A4; i++) {
        char id[32];
        snprintf(id, sizeof id, "fa-%d", A1 - 1 - i);
        rec_set(&ra[A1 + A2 + A3 + i], RJQ_ECANCELED, "-");
        ASSERT_OK(rjq_queue_await(qa, id, NULL, on_outcome, &ra[A1 + A2 + A3 + i], NULL));
    }
    sync_client(e.base, qa); /* a round trip: what was sent before has run */
    ASSERT_EQ(A1, llen(e.rc, "free")); /* the held enqueues were not sent */
    ASSERT_EQ(NA, rjq_client_count_awaits(ca));

    /* Client B: connected and subscribed, then awaits whose enqueues and
     * watches are in flight when it is freed. */
    enum { B1 = 250, B2 = 50, NB = B1 + B2 };
    rjq_client *cb = mk_client(e.base, &e.s, "client-b", 20, NULL);
    rjq_queue *qb = queue_for(cb, "free");
    rec warm;
    rec_set(&warm, RJQ_ENOTFOUND, "-");
    ASSERT_OK(rjq_queue_await(qb, "never-there", NULL, on_outcome, &warm, NULL));
    ASSERT(loop_until_count(e.base, &resolved, 1, 5000)); /* the reply channel is confirmed */
    check_recs(&warm, 1, "warm-up");
    rec *rb = calloc(NB, sizeof *rb);
    ASSERT(rb != NULL);
    for (int i = 0; i < B1; i++) {
        char p[32];
        int n = snprintf(p, sizeof p, "fc-%d", i);
        rec_set(&rb[i], RJQ_ECANCELED, "-");
        ASSERT_OK(rjq_enqueue_await(qb, p, (size_t)n, NULL, NULL, on_outcome, &rb[i], NULL));
    }
    for (int i = 0; i < B2; i++) {
        char id[32];
        snprintf(id, sizeof id, "fa-%d", i);
        rec_set(&rb[B1 + i], RJQ_ECANCELED, "-");
        ASSERT_OK(rjq_queue_await(qb, id, NULL, on_outcome, &rb[B1 + i], NULL));
    }
    ASSERT_EQ(NB, rjq_client_count_awaits(cb));

    rjq_client_free(ca);
    check_recs(ra, NA, "free-a");
    rjq_client_free(cb);
    check_recs(rb, NB, "free-b");
    ASSERT_EQ(1 + NA + NB, resolved);
    ASSERT(loop_until_empty(e.base, 10000)); /* all of the freed clients that could run ran */
    ASSERT_EQ(1 + NA + NB, resolved);
    check_recs(ra, NA, "free-a-later");
    check_recs(rb, NB, "free-b-later");
    recs_free(ra, NA);
    recs_free(rb, NB);
    free(ra);
    free(rb);
    recs_free(&warm, 1);

    /* rjq_await_cancel: ECANCELED before it returns, nothing afterwards,
     * while the job itself still runs and completes. */
    aw_clients(&e, "cancel", NULL);
    rec rc3[3];
    rjq_await *h[3];
    resolved = 0;
    for (int i = 0; i < 3; i++) {
        char p[16];
        int n = snprintf(p, sizeof p, "c-%d", i);
        rec_set(&rc3[i], RJQ_ECANCELED, "-");
        ASSERT_OK(rjq_enqueue_await(e.pq, p, (size_t)n, NULL, NULL, on_outcome, &rc3[i], &h[i]));
    }
    ASSERT_OK(rjq_await_cancel(h[0])); /* waiting for the subscription */
    ASSERT_EQ(1, rc3[0].calls);
    WAIT_FOR(e.base, llen(e.rc, "cancel") >= 3, 20000);
    ASSERT_EQ(3, llen(e.rc, "cancel"));
    ASSERT_OK(rjq_await_cancel(h[1])); /* enqueued: in flight or watching */
    ASSERT_EQ(1, rc3[1].calls);
    sync_client(e.base, e.pq);
    ASSERT_OK(rjq_await_cancel(h[2])); /* watching */
    ASSERT_EQ(1, rc3[2].calls);
    ASSERT_EQ(0, rjq_client_count_awaits(e.pc));
    work w = {0};
    start_worker(e.wq, 4, &w);
    ASSERT(loop_until_count(e.base, &w.acked, 3, 10000));
    outcomes_barrier(e.base, e.rc, e.pc); /* their outcomes came (and were ignored) */
    check_recs(rc3, 3, "cancel");
    ASSERT_EQ(3, resolved);
    recs_free(rc3, 3);

    /* rjq_client_free from inside an await callback: the rest are
     * cancelled, each once, and nothing runs on the freed client. */
    enum { NF = 50 };
    rjq_client *cf = mk_client(e.base, &e.s, "producer-f", 20, NULL);
    rjq_queue *qf = queue_for(cf, "cancel");
    freer f = {0};
    f.c = cf;
    f.total = NF;
    f.per = calloc(NF, sizeof *f.per);
    freer_arg fa[NF];
    for (int i = 0; i < NF; i++) {
        char p[16];
        int n = snprintf(p, sizeof p, "cf-%d", i);
        fa[i] = (freer_arg){&f, i};
        ASSERT_OK(rjq_enqueue_await(qf, p, (size_t)n, NULL, NULL, on_outcome_free, &fa[i], NULL));
    }
    ASSERT(loop_until_count(e.base, &f.calls, NF, 10000));
    quiet_for(e.base, 200, "a timer the freed client left behind (reconnect: 20 ms) would fire "
                           "by now; the other clients keep the loop busy, so no empty loop tells");
    ASSERT_EQ(NF, f.calls);
    ASSERT_EQ(1, f.freed);
    ASSERT_EQ(1, f.ok);
    ASSERT_EQ(NF - 1, f.canceled_after_free);
    ASSERT_EQ(0, f.other_after_free);
    for (int i = 0; i < NF; i++) ASSERT_EQ(1, f.per[i]);
    free(f.per);

    aw_stop(&e);
}

/* ---- 7. progress --------------------------------------------------------------- */

TEST(progress_reaches_awaiting_producer) {
    aw_env e;
    aw_start(&e, "prog", NULL);
    rjq_client *pc2 = mk_client(e.base, &e.s, "producer2", 20, NULL);
    rjq_queue *pq2 = queue_for(pc2, "prog");

    /* Three awaits on one job: its producer, a second await on the same
     * client by id, and another client by id. */
    rec r[3];
    rjq_await_options ao = RJQ_AWAIT_OPTIONS_INIT;
    ao.on_progress = on_progress;
    for (int i = 0; i < 3; i++) rec_set(&r[i], RJQ_OK, "done");
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "pg-1";
    ASSERT_OK(rjq_enqueue_await(e.pq, "prog", 4, &o, &ao, on_outcome, &r[0], NULL));
    wait_watchers(e.base, e.rc, "prog", "pg-1", 1);
    ASSERT_OK(rjq_queue_await(e.pq, "pg-1", &ao, on_outcome, &r[1], NULL));
    ASSERT_OK(rjq_queue_await(pq2, "pg-1", &ao, on_outcome, &r[2], NULL));
    ASSERT_EQ(2, wait_watchers(e.base, e.rc, "prog", "pg-1", 2));
    sync_client(e.base, e.pq);
    sync_client(e.base, pq2);

    work w = {0};
    start_worker(e.wq, 1, &w);
    ASSERT(loop_until_count(e.base, &resolved, 3, 10000));
    check_recs(r, 3, "progress");
    for (int i = 0; i < 3; i++) {
        ASSERT_EQ(3, r[i].nprogress);
        ASSERT_EQ(3, r[i].progress_at_end); /* all progress before the outcome */
        ASSERT_STREQ("1/3", r[i].progress[0]);
        ASSERT_STREQ("2/3", r[i].progress[1]);
        ASSERT_STREQ("3/3", r[i].progress[2]);
        ASSERT_STREQ("pg-1", r[i].id);
    }
    outcomes_barrier(e.base, e.rc, e.pc);
    outcomes_barrier(e.base, e.rc, pc2);
    ASSERT_EQ(3, resolved);
    ASSERT_EQ(0, rjq_client_count_awaits(e.pc));
    ASSERT_EQ(0, rjq_client_count_awaits(pc2));

    recs_free(r, 3);
    rjq_client_free(pc2);
    aw_stop(&e);
}

/* ---- 8. big results ---------------------------------------------------------- */

/* Script calls of the server so far (functions on Redis 7, else EVALSHA). */
static long long script_calls(redisContext *rc) {
    return server_calls(rc, "fcall") + server_calls(rc, "evalsha");
}

/* Subscribes the reply channel (warm[0] awaits a job that is not there)
 * and enqueues n jobs "<prefix>-<i>", each of its id as payload; returns
 * their records (calloc'd), each expecting the result "r:<id>". */
static rec *subscribe_and_enqueue(aw_env *e, rec *warm, const char *prefix, int n) {
    memset(warm, 0, sizeof *warm);
    warm->want = RJQ_ENOTFOUND;
    ASSERT_OK(rjq_queue_await(e->pq, "nothing", NULL, on_outcome, warm, NULL));
    ASSERT(loop_until_count(e->base, &resolved, 1, 5000)); /* the reply channel is subscribed */
    rec *r = calloc((size_t)n, sizeof *r);
    ASSERT(r != NULL);
    char id[32];
    for (int i = 0; i < n; i++) {
        snprintf(id, sizeof id, "%s-%d", prefix, i);
        enqueue_id(e->base, e->pq, id, id, 0);
        rec_set(&r[i], RJQ_OK, "r:%s", id);
    }
    return r;
}

TEST(awaits_of_one_loop_pass_share_one_watch_call) {
    enum { N = 300 };
    aw_env e;
    aw_start(&e, "co", NULL);
    rec warm[1];
    rec *r = subscribe_and_enqueue(&e, warm, "co", N);
    char id[32];
    long long calls = script_calls(e.rc);
    for (int i = 0; i < N; i++) { /* one pass */
        snprintf(id, sizeof id, "co-%d", i);
        ASSERT_OK(rjq_queue_await(e.pq, id, NULL, on_outcome, &r[i], NULL));
    }
    ASSERT(loop_until_script_calls(e.base, e.rc, calls + 1, 10000));
    sync_client(e.base, e.pq); /* a round trip (a script call): any other watch has run */
    ASSERT_EQ(calls + 2, script_calls(e.rc)); /* not one call per await */
    ASSERT_EQ(1, resolved);
    work w = {0};
    start_worker(e.wq, 20, &w); /* every await watches its job: each gets its result */
    ASSERT(loop_until_count(e.base, &resolved, 1 + N, 20000));
    check_recs(r, N, "coalesced");
    recs_free(r, N);
    free(r);
    recs_free(warm, 1);
    aw_stop(&e);
}

/* The watch of a pass of awaits reads each column once for all its jobs
 * and writes their watchers in one HSET: a batch of awaits (the PostgreSQL
 * bridge follows every row it moves) costs Redis a few commands, not six
 * commands per job (a job has its state from its enqueue on: no HEXISTS). */
TEST(a_watch_of_many_jobs_reads_each_column_once_and_writes_watchers_in_one_hset) {
    enum { N = 300 };
    aw_env e;
    aw_start(&e, "wb", NULL);
    rec warm[1];
    rec *r = subscribe_and_enqueue(&e, warm, "wb", N);
    char id[32];
    long long hmget = server_calls(e.rc, "hmget"), hset = server_calls(e.rc, "hset"),
              hexists = server_calls(e.rc, "hexists");
    for (int i = 0; i < N; i++) { /* one pass: one watch call */
        snprintf(id, sizeof id, "wb-%d", i);
        ASSERT_OK(rjq_queue_await(e.pq, id, NULL, on_outcome, &r[i], NULL));
    }
    ASSERT_EQ(1, wait_watchers(e.base, e.rc, "wb", "wb-299", 1)); /* the watch ran */
    /* the watch: 1 HSET, 1 or 2 HMGET (none of the watchers column while it
     * does not exist), no HEXISTS; the clients' registry beats
     * (beat.lua) may add a few of each meanwhile, never one per job */
    long long writes = server_calls(e.rc, "hset") - hset, reads = server_calls(e.rc, "hmget") - hmget,
              exists = server_calls(e.rc, "hexists") - hexists;
    if (writes < 1 || writes > 8 || reads < 1 || reads > 8 || exists > 8)
        FAIL_AT(__FILE__, __LINE__, "a watch of %d jobs: %lld HSET, %lld HMGET, %lld HEXISTS calls", N,
                writes, reads, exists);
    for (int i = 0; i < N; i++) ASSERT_EQ(1, wait_watchers(e.base, e.rc, "wb", r[i].expect + 2, 1));
    work w = {0};
    start_worker(e.wq, 20, &w); /* every await still gets its own result */
    ASSERT(loop_until_count(e.base, &resolved, 1 + N, 20000));
    check_recs(r, N, "watched in one call");
    recs_free(r, N);
    free(r);
    recs_free(warm, 1);
    aw_stop(&e);
}

TEST(big_result_fetched_once) {
    enum { BIG = 200 * 1024, EDGE = 65536 };
    aw_env e;
    aw_start(&e, "big", NULL);
    work w = {0};
    start_worker(e.wq, 2, &w);

    rec r[3];
    memset(r, 0, sizeof r);
    r[0].want = RJQ_OK;
    r[0].expect_len = BIG;
    r[0].expect = malloc(BIG);
    pattern(r[0].expect, BIG);
    ASSERT(memchr(r[0].expect, 0, BIG) != NULL); /* binary, NULs included */

    /* A 200 KiB result travels as a 'big' marker and one HGET. */
    long long hget0 = server_calls(e.rc, "hget");
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "big-1";
    char payload[32];
    int n = snprintf(payload, sizeof payload, "big:%d", BIG);
    ASSERT_OK(rjq_enqueue_await(e.pq, payload, (size_t)n, &o, NULL, on_outcome, &r[0], NULL));
    ASSERT(loop_until_count(e.base, &resolved, 1, 10000));
    check_recs(r, 1, "big");
    ASSERT_STREQ("big-1", r[0].id);
    ASSERT_EQ(hget0 + 1, server_calls(e.rc, "hget"));
    outcomes_barrier(e.base, e.rc, e.pc);
    ASSERT_EQ(1, resolved);

    /* Exactly 64 KiB still travels inline: no fetch. */
    r[1].want = RJQ_OK;
    r[1].expect_len = EDGE;
    r[1].expect = malloc(EDGE);
    pattern(r[1].expect, EDGE);
    hget0 = server_calls(e.rc, "hget");
    n = snprintf(payload, sizeof payload, "big:%d", EDGE);
    ASSERT_OK(rjq_enqueue_await(e.pq, payload, (size_t)n, NULL, NULL, on_outcome, &r[1], NULL));
    ASSERT(loop_until_count(e.base, &resolved, 2, 10000));
    check_recs(&r[1], 1, "edge");
    ASSERT_EQ(hget0, server_calls(e.rc, "hget"));

    /* Awaited after completion: intact from the stored state. */
    r[2].want = RJQ_OK;
    r[2].expect_len = BIG;
    r[2].expect = malloc(BIG);
    pattern(r[2].expect, BIG);
    ASSERT_OK(rjq_queue_await(e.pq, "big-1", NULL, on_outcome, &r[2], NULL));
    ASSERT(loop_until_count(e.base, &resolved, 3, 10000));
    check_recs(r, 3, "big-all");
    ASSERT_EQ(0, rjq_client_count_awaits(e.pc));

    recs_free(r, 3);
    aw_stop(&e);
}

/* ---- 9. outcomes on the wire ------------------------------------------------------ */

/* The client's reply channel, as the server knows it (one client awaits). */
static void reply_channel(redisContext *rc, char *out, size_t cap) {
    redisReply *r = server_cmd(rc, "PUBSUB CHANNELS t:reply:*:framed");
    ASSERT(r->type == REDIS_REPLY_ARRAY);
    ASSERT_EQ(1, (long long)r->elements);
    snprintf(out, cap, "%s", r->element[0]->str);
    freeReplyObject(r);
}

/* Frames in a framed outcome message ("+" then "<kind> <klen> <blen>\n
 * <key><body>" each), -1 when it is not one. */
static int frames_in(const char *m, size_t len) {
    if (len == 0 || m[0] != '+') return -1;
    const char *p = m + 1, *end = m + len;
    int n = 0;
    while (p < end) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        if (sp == NULL) return -1;
        char *q;
        unsigned long klen = strtoul(sp + 1, &q, 10);
        if (*q != ' ') return -1;
        unsigned long blen = strtoul(q + 1, &q, 10);
        if (*q != '\n' || klen + blen > (unsigned long)(end - q - 1)) return -1;
        p = q + 1 + klen + blen;
        n++;
    }
    return n;
}

/* Read what sub (subscribed to one channel) got so far: a PING's answer
 * comes after every message published before it. frames[i]: the frames of
 * message i (up to cap). Returns the number of messages. */
static int read_frames(redisContext *sub, int *frames, int cap) {
    ASSERT_EQ(REDIS_OK, redisAppendCommand(sub, "PING"));
    int n = 0;
    for (;;) {
        redisReply *m = NULL;
        ASSERT_EQ(REDIS_OK, redisGetReply(sub, (void **)&m));
        ASSERT(m->type == REDIS_REPLY_ARRAY && m->elements >= 2);
        if (strcmp(m->element[0]->str, "pong") == 0) {
            freeReplyObject(m);
            return n;
        }
        ASSERT_STREQ("message", m->element[0]->str);
        if (n < cap) frames[n] = frames_in(m->element[2]->str, m->element[2]->len);
        n++;
        freeReplyObject(m);
    }
}

TEST(outcomes_of_one_completion_call_travel_in_one_message) {
    enum { N = 60, BIG = 40000 };
    aw_env e;
    aw_start(&e, "om", NULL);
    work w = {0};
    w.hold = 1;
    start_worker(e.wq, N, &w);
    rec *r = calloc(N + 3, sizeof *r);
    ASSERT(r != NULL);
    for (int i = 0; i < N; i++) { /* results with newlines and spaces, as frames must carry */
        char p[32];
        int n = snprintf(p, sizeof p, "a\nb %d\n", i);
        rec_set(&r[i], RJQ_OK, "r:%s", p);
        ASSERT_OK(rjq_enqueue_await(e.pq, p, (size_t)n, NULL, NULL, on_outcome, &r[i], NULL));
    }
    WAIT_FOR(e.base, w.nheld >= N, 20000);
    ASSERT_EQ(N, (long long)w.nheld);
    ASSERT_EQ(N, server_int(e.rc, "HLEN t:{om}:watchers") - 1); /* and the pin */
    redisReply *enc = server_cmd(e.rc, "OBJECT ENCODING t:{om}:watchers");
    ASSERT_STREQ("hashtable", enc->str); /* pinned: never a listpack scanned per job */
    freeReplyObject(enc);

    /* A second listener on the client's reply channel sees what it gets. */
    char ch[300];
    reply_channel(e.rc, ch, sizeof ch);
    redisContext *sub = server_connect(&e.s);
    struct timeval tv = {10, 0};
    redisSetTimeout(sub, tv);
    freeReplyObject(redisCommand(sub, "SUBSCRIBE %s", ch));

    /* N completions in one loop turn: one call, one message for all. */
    long long calls = script_calls(e.rc);
    ASSERT_EQ(N, (long long)release(&w, N));
    ASSERT(loop_until_count(e.base, &resolved, N, 10000));
    check_recs(r, N, "framed");
    int frames[8];
    int msgs = read_frames(sub, frames, 8);
    ASSERT(msgs >= 1 && msgs <= script_calls(e.rc) - calls); /* not one per job */
    int total = 0;
    for (int i = 0; i < msgs && i < 8; i++) {
        ASSERT(frames[i] > 0);
        total += frames[i];
    }
    ASSERT_EQ(N, total);

    /* Binary results, NULs included, of 40 000 bytes: a message closes
     * before 64 KiB, so three in one call go as three messages. */
    for (int i = N; i < N + 3; i++) {
        r[i].want = RJQ_OK;
        r[i].expect_len = BIG;
        r[i].expect = malloc(BIG);
        ASSERT(r[i].expect != NULL);
        pattern(r[i].expect, BIG);
        char p[32];
        int n = snprintf(p, sizeof p, "big:%d", BIG);
        ASSERT_OK(rjq_enqueue_await(e.pq, p, (size_t)n, NULL, NULL, on_outcome, &r[i], NULL));
    }
    WAIT_FOR(e.base, w.nheld >= N + 3, 20000);
    ASSERT_EQ(N + 3, (long long)w.nheld);
    ASSERT_EQ(3, (long long)release(&w, 3));
    ASSERT(loop_until_count(e.base, &resolved, N + 3, 10000));
    check_recs(r, N + 3, "framed-big");
    msgs = read_frames(sub, frames, 8);
    ASSERT_EQ(3, msgs);
    for (int i = 0; i < 3; i++) ASSERT_EQ(1, frames[i]);
    redisFree(sub);

    /* Told, the finished jobs have no watchers: only the pin is left. */
    ASSERT_EQ(1, server_int(e.rc, "HLEN t:{om}:watchers"));
    outcomes_barrier(e.base, e.rc, e.pc);
    ASSERT_EQ(N + 3, resolved);
    recs_free(r, N + 3);
    free(r);
    free(w.held);
    aw_stop(&e);
}

static void on_cancelled(rjq_client *c, int status, const char *state, void *data) {
    (void)c, (void)state;
    *(int *)data = status == RJQ_OK ? 1 : -1;
}

TEST(dead_and_cancelled_jobs_have_no_watchers) {
    aw_env e;
    aw_start(&e, "nw", NULL);
    rec r[2];
    rec_set(&r[0], RJQ_EJOBCANCELED, "-");
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "nw-c";
    ASSERT_OK(rjq_enqueue_await(e.pq, "x", 1, &o, NULL, on_outcome, &r[0], NULL));
    wait_watchers(e.base, e.rc, "nw", "nw-c", 1);
    int cancelled = 0;
    ASSERT_OK(rjq_queue_cancel(e.pq, "nw-c", on_cancelled, &cancelled));
    ASSERT(loop_until(e.base, &cancelled, 5000));
    ASSERT_EQ(1, cancelled);
    ASSERT(loop_until_count(e.base, &resolved, 1, 5000));
    ASSERT_EQ(RJQ_EJOBCANCELED, r[0].status);
    ASSERT_EQ(0, job_has_field(e.rc, "nw", "nw-c", "watchers"));

    rec_set(&r[1], RJQ_EJOBDEAD, "attempt 1 of 1 failed: die");
    o.id = "nw-d";
    o.max_attempts = 1;
    ASSERT_OK(rjq_enqueue_await(e.pq, "die", 3, &o, NULL, on_outcome, &r[1], NULL));
    wait_watchers(e.base, e.rc, "nw", "nw-d", 1);
    work w = {0};
    start_worker(e.wq, 2, &w);
    ASSERT(loop_until_count(e.base, &resolved, 2, 10000));
    check_recs(&r[1], 1, "dead");
    ASSERT_EQ(0, job_has_field(e.rc, "nw", "nw-d", "watchers"));
    recs_free(r, 2);
    aw_stop(&e);
}

/* Clients of older rjq builds share servers with this one (the function
 * library is per build): their reply channels ("t:reply:<hex>") get one
 * message per outcome in the form they read, and the form their scripts
 * publish is read here. Malformed messages change nothing. */
TEST(older_reply_channels_and_messages_still_work) {
    aw_env e;
    aw_start(&e, "old", NULL);
    rec r[3];
    rec_set(&r[0], RJQ_OK, "from-old");
    rec_set(&r[1], RJQ_OK, "fr\named");
    rec_set(&r[2], RJQ_OK, "r:o-3");
    enqueue_id(e.base, e.pq, "o-1", "o-1", 0);
    enqueue_id(e.base, e.pq, "o-2", "o-2", 0);
    enqueue_id(e.base, e.pq, "o-3", "o-3", 0);
    ASSERT_OK(rjq_queue_await(e.pq, "o-1", NULL, on_outcome, &r[0], NULL));
    ASSERT_OK(rjq_queue_await(e.pq, "o-2", NULL, on_outcome, &r[1], NULL));
    wait_watchers(e.base, e.rc, "old", "o-2", 1);
    char ch[300];
    reply_channel(e.rc, ch, sizeof ch);

    /* Malformed: ignored, nothing resolves. */
    static const char *bad[] = {"+", "+completed", "+completed 10 1\nt:{old}:jo", "+completed x 1\nab",
                                "+completed 15 99999999999999999999999\nt:{old}:job:o-1",
                                "+completedcompleted 15 1\nt:{old}:job:o-1x", "completed t:{old}:job:o-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        freeReplyObject(server_cmd(e.rc, "PUBLISH %s %s", ch, bad[i]));
    outcomes_barrier(e.base, e.rc, e.pc); /* published after them, on the same channel */
    ASSERT_EQ(0, resolved);

    /* An older rjq's script: one outcome, "kind\nname\nbody". */
    freeReplyObject(server_cmd(e.rc, "PUBLISH %s %s", ch, "completed\nt:{old}:job:o-1\nfrom-old"));
    /* This build's frame, written by hand: a body with a newline, after
     * an outcome of a kind this build does not know (a later one's). */
    freeReplyObject(server_cmd(e.rc, "PUBLISH %s %s", ch,
                               "+a-kind-of-some-later-build 15 3\nt:{old}:job:o-2new"
                               "completed 15 7\nt:{old}:job:o-2fr\named"));
    ASSERT(loop_until_count(e.base, &resolved, 2, 5000));
    check_recs(r, 2, "old-forms");

    /* A job watched by an older client: its channel gets the old form. */
    redisContext *sub = server_connect(&e.s);
    struct timeval tv = {5, 0};
    redisSetTimeout(sub, tv);
    freeReplyObject(redisCommand(sub, "SUBSCRIBE t:reply:00aa11bb22cc33dd44ee55ff"));
    freeReplyObject(server_cmd(e.rc, "HSET t:{old}:watchers o-3 t:reply:00aa11bb22cc33dd44ee55ff"));
    work w = {0};
    start_worker(e.wq, 2, &w);
    ASSERT(loop_until_count(e.base, &w.acked, 1, 5000));
    redisReply *m = NULL;
    ASSERT_EQ(REDIS_OK, redisGetReply(sub, (void **)&m));
    ASSERT(m->type == REDIS_REPLY_ARRAY && m->elements == 3);
    ASSERT_STREQ("completed\nt:{old}:job:o-3\nr:o-3", m->element[2]->str);
    freeReplyObject(m);
    redisFree(sub);
    ASSERT_EQ(0, job_has_field(e.rc, "old", "o-3", "watchers"));
    outcomes_barrier(e.base, e.rc, e.pc);
    ASSERT_EQ(2, resolved);
    recs_free(r, 3);
    aw_stop(&e);
}

/* ---- a worker process that loses its lease mid-job ------------------------------ */

/* The forked worker of lost_lease_run: a job's first attempt tells the
 * parent ('h') and stops the whole process (SIGSTOP: a worker process
 * descheduled, or paused, past its lease) before it completes; once
 * continued it completes, and every completion's status goes to the
 * parent ('L' lease lost, 'O' done, 'E' other). Later attempts complete
 * at once with "run <attempt>". */
static int lw_fd;
static int lw_stop_first = 1; /* 0: every attempt completes at once */

static void lw_write(char b) {
    if (write(lw_fd, &b, 1) != 1) _exit(4);
}

static void lw_done(rjq_client *c, int status, void *data) {
    (void)c, (void)data;
    lw_write(status == RJQ_OK ? 'O' : status == RJQ_ELEASELOST ? 'L' : 'E');
}

static void lw_handler(rjq_job *job, void *data) {
    (void)data;
    int a = rjq_job_get_attempt(job);
    if (a == 1) lw_write('h');
    if (a == 1 && lw_stop_first) raise(SIGSTOP);
    char res[32];
    int n = snprintf(res, sizeof res, "run %d", a);
    ASSERT_OK(rjq_job_complete(job, res, (size_t)n, lw_done, NULL));
}

/* A worker process on queue of s (concurrency conc, a lease of lease_ms,
 * reclaim_ms (0: the default), the other options the defaults, as
 * rjq-bench's awaited worker); *rfd: the read end of its reports
 * (non-blocking). */
static pid_t spawn_lw(const test_server *s, const char *queue, int conc, long lease_ms, long reclaim_ms,
                      int *rfd) {
    int fds[2];
    ASSERT_EQ(0, pipe(fds));
    pid_t pid = fork_child();
    if (pid != 0) {
        close(fds[1]);
        ASSERT_EQ(0, fcntl(fds[0], F_SETFL, O_NONBLOCK));
        *rfd = fds[0];
        return pid;
    }
    close(fds[0]);
    lw_fd = fds[1];
    struct event_base *base = event_base_new();
    rjq_client *c = client_for(base, s);
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = conc;
    wo.lease_ms = lease_ms;
    wo.reclaim_ms = reclaim_ms;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(queue_for(c, queue), &wo, lw_handler, NULL, &w));
    serve_until_killed(base, 60000);
}

/* The reports read so far from a worker process, and the one waited for. */
typedef struct lw_reports {
    int fd;
    char got[64];
    size_t n;
    const char *want;
} lw_reports;

static int lw_reported(void *arg) {
    lw_reports *r = arg;
    char b[16];
    ssize_t k;
    while (r->n + 1 < sizeof r->got && (k = read(r->fd, b, sizeof b)) > 0) {
        for (ssize_t i = 0; i < k && r->n + 1 < sizeof r->got; i++) r->got[r->n++] = b[i];
        r->got[r->n] = 0;
    }
    return strstr(r->got, r->want) != NULL;
}

static void lw_wait(struct event_base *base, lw_reports *r, const char *want) {
    r->want = want;
    if (!loop_until_cond(base, lw_reported, r, 20000))
        FAIL_AT(__FILE__, __LINE__, "the worker process reported \"%s\", not \"%s\"", r->got, want);
}

/* An awaited job (queue format `format`) is pushed to (or claimed by) a
 * worker process of `conc` slots whose handler is then stopped (SIGSTOP)
 * past its lease; a lease sweep (rjq_queue_reclaim, as the worker's own
 * visit or any client's would) takes the job back. Continued, the worker's
 * completion is refused (RJQ_ELEASELOST: rjq-bench's "worker: completion:
 * lease lost"), and the job, back in ready with the doorbell rung, runs
 * again on the same worker: the producer is told exactly once, with the
 * second run's result. With max_attempts 1 the sweep makes it dead
 * instead: the producer is told that once (RJQ_EJOBDEAD, "lease
 * expired"), at the sweep, and the refused completion changes nothing. */
static void lost_lease_run(const char *queue, int conc, int format, int max_attempts) {
    aw_env e;
    aw_start(&e, NULL, NULL);
    e.pc = mk_client(e.base, &e.s, "producer", 20, NULL);
    e.pq = queue_for(e.pc, queue);
    if (format == 2) {
        count_wait set = {0};
        ASSERT_OK(rjq_queue_set_format(e.pq, 2, on_count, &set));
        ASSERT(loop_until(e.base, &set.done, 5000));
        ASSERT_OK(set.status);
    }
    lw_reports r = {0};
    lw_stop_first = 1;
    pid_t pid = spawn_lw(&e.s, queue, conc, 300, 0, &r.fd);
    /* its push registration (enqueues then push to it, as in rjq-bench) */
    ASSERT(loop_until_server_int(e.base, e.rc, 1, 10000, "HLEN t:{%s}:idle", queue));

    rec rc;
    if (max_attempts == 1) rec_set(&rc, RJQ_EJOBDEAD, "lease expired");
    else rec_set(&rc, RJQ_OK, "run 2");
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.max_attempts = max_attempts;
    ASSERT_OK(rjq_enqueue_await(e.pq, "x", 1, &jo, NULL, on_outcome, &rc, NULL));
    lw_wait(e.base, &r, "h");
    int st;
    ASSERT_EQ(pid, waitpid(pid, &st, WUNTRACED));
    ASSERT(WIFSTOPPED(st));
    /* the sweep takes the job back once its lease has run out */
    count_wait swept = {0};
    double deadline = wait_deadline(20000);
    while (swept.n == 0) {
        ASSERT(wait_step(e.base, deadline));
        swept.done = 0;
        ASSERT_OK(rjq_queue_reclaim(e.pq, on_count, &swept));
        WAIT_FOR(e.base, swept.done, 10000);
        ASSERT_OK(swept.status);
    }
    ASSERT_EQ(1, swept.n);
    if (max_attempts == 1) { /* dead: told at the sweep */
        ASSERT(loop_until_count(e.base, &resolved, 1, 10000));
        ASSERT_EQ(RJQ_EJOBDEAD, rc.status);
    } else {
        ASSERT_EQ(0, rc.calls);
    }
    ASSERT_EQ(0, kill(pid, SIGCONT));
    const char *want = max_attempts == 1 ? "hL" : "hLO";
    lw_wait(e.base, &r, want);
    ASSERT(loop_until_count(e.base, &resolved, 1, 10000));
    outcomes_barrier(e.base, e.rc, e.pc); /* a second outcome would be here */
    check_recs(&rc, 1, "lost-lease");
    ASSERT_EQ(1, resolved);
    ASSERT_EQ(0, rjq_client_count_awaits(e.pc));
    (void)lw_reported(&r); /* (what else it reported meanwhile: a dead job has no rerun) */
    ASSERT_STREQ(want, r.got);
    ASSERT_EQ(0, server_active_jobs(e.rc, queue));

    ASSERT_EQ(0, kill(pid, SIGKILL));
    reap(pid, 10000);
    close(r.fd);
    recs_free(&rc, 1);
    aw_stop(&e);
}

TEST(awaited_job_whose_worker_lost_its_lease_mid_job_is_told_once_after_its_rerun) {
    lost_lease_run("ll50", 50, 1, 0); /* rjq-bench's worker: 50 slots */
    lost_lease_run("ll1", 1, 1, 0);
}

TEST(awaited_job_of_a_format_2_queue_whose_worker_lost_its_lease_is_told_once_after_its_rerun) {
    lost_lease_run("ll50f2", 50, 2, 0); /* the reply channel in the pushed job's state */
    lost_lease_run("ll1f2", 1, 2, 0);
}

TEST(awaited_job_whose_worker_lost_its_lease_on_its_last_attempt_is_told_dead_once) {
    lost_lease_run("lld", 50, 1, 1);
    lost_lease_run("lldf2", 50, 2, 1);
}

/* The worker process is paused (SIGSTOP) before the push of an awaited job
 * reaches it, until the job's lease is over by the server's clock; nothing
 * sweeps meanwhile (its reclaim visits are ten minutes apart, no other
 * client has workers). Continued, it runs the job (its lease merely ran
 * out: the completion is accepted, rjq_job_complete) or finds it stale and
 * hands it back to run it again at once (the hand-back rings the
 * doorbell): either way the job completes once, without waiting for the
 * next visit of the queue, and the producer is told exactly once. */
TEST(awaited_job_pushed_to_a_worker_paused_past_its_lease_runs_once_and_is_told_once) {
    aw_env e;
    aw_start(&e, NULL, NULL);
    e.pc = mk_client(e.base, &e.s, "producer", 20, NULL);
    e.pq = queue_for(e.pc, "llp");
    lw_reports r = {0};
    lw_stop_first = 0;
    pid_t pid = spawn_lw(&e.s, "llp", 50, 300, 600000, &r.fd);
    ASSERT(loop_until_server_int(e.base, e.rc, 1, 10000, "HLEN t:{llp}:idle"));
    /* (its registration's push channel subscribed: a push reaches it) */
    redisReply *f = server_cmd(e.rc, "HKEYS t:{llp}:idle");
    ASSERT(f->type == REDIS_REPLY_ARRAY && f->elements == 1 && strchr(f->element[0]->str, ' ') != NULL);
    ASSERT(loop_until_numsub(e.base, e.rc, strchr(f->element[0]->str, ' ') + 1, 1, 10000));
    freeReplyObject(f);
    ASSERT_EQ(0, kill(pid, SIGSTOP));
    int st;
    ASSERT_EQ(pid, waitpid(pid, &st, WUNTRACED));
    ASSERT(WIFSTOPPED(st));

    rec rc;
    rec_set(&rc, RJQ_OK, "run 1");
    ASSERT_OK(rjq_enqueue_await(e.pq, "x", 1, NULL, NULL, on_outcome, &rc, NULL));
    WAIT_FOR(e.base, server_active_jobs(e.rc, "llp") == 1, 10000); /* pushed */
    ASSERT(loop_until_server_ms(e.base, e.rc, server_now_ms(e.rc) + 400, 10000)); /* past its lease */
    ASSERT_EQ(0, kill(pid, SIGCONT));
    ASSERT(loop_until_count(e.base, &resolved, 1, 20000));
    outcomes_barrier(e.base, e.rc, e.pc);
    check_recs(&rc, 1, "paused");
    ASSERT_EQ(1, resolved);
    lw_wait(e.base, &r, "O");
    ASSERT_STREQ("hO", r.got);
    ASSERT_EQ(0, server_active_jobs(e.rc, "llp"));

    ASSERT_EQ(0, kill(pid, SIGKILL));
    reap(pid, 10000);
    close(r.fd);
    recs_free(&rc, 1);
    aw_stop(&e);
}
