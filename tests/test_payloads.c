/*
 * Payloads of some KiB: a worker whose recent payloads are big claims ids
 * only and reads the payloads itself with one HMGET per claim (worker.c,
 * "payload fetch"; claim.lua ARGV 10). These tests check that every job
 * still reaches its handler once, with its own payload, in claim order,
 * when big and small payloads alternate (the worker switches between the
 * two ways), and what happens to a job whose payload is gone by the time
 * the worker reads it.
 */
#include <stdint.h>

#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

/* The payload of job i: its number, then filler bytes that depend on i,
 * so a payload handed to the wrong job (id "p<i>") is noticed. Big (24 KiB), or when
 * mixed big for i in the first half of every 16 and tiny for the rest. */
static size_t make_payload(long i, int mixed, char *buf, size_t cap) {
    size_t len = !mixed || (i % 16) < 8 ? 24 * 1024 : 16;
    ASSERT(len <= cap);
    int n = snprintf(buf, cap, "%ld:", i);
    for (size_t k = (size_t)n; k < len; k++) buf[k] = (char)('a' + (k * 7 + (size_t)i) % 26);
    return len;
}

/* Options with job i's id, "p<i>". */
static const rjq_job_options *job_id(long i) {
    static char id[32];
    static rjq_job_options o;
    snprintf(id, sizeof id, "p%ld", i);
    o = (rjq_job_options){.id = id};
    return &o;
}

typedef struct run_ctx {
    int mixed;
    long total, handled, completed, bad, dup;
    long last;                /* the highest job number seen (in order: +1) */
    long out_of_order;
    unsigned char *seen;
} run_ctx;

static void on_completed(rjq_client *c, int status, void *data) {
    (void)c;
    ASSERT_OK(status);
    ((run_ctx *)data)->completed++;
}

static void check_handler(rjq_job *job, void *data) {
    run_ctx *x = data;
    static char want[32 * 1024];
    size_t len;
    const char *p = rjq_job_payload(job, &len);
    long i = atol(rjq_job_id(job) + 1); /* "p<i>" */
    x->handled++;
    if (i < 0 || i >= x->total) {
        x->bad++;
    } else {
        if (x->seen[i]) x->dup++;
        x->seen[i] = 1;
        size_t wlen = make_payload(i, x->mixed, want, sizeof want);
        if (len != wlen || memcmp(p, want, len) != 0) x->bad++;
        if (i != x->last + 1) x->out_of_order++;
        x->last = i;
    }
    ASSERT_OK(rjq_job_complete(job, "ok", 2, on_completed, x));
}

/* One worker of concurrency 1 drains a backlog of jobs whose payloads
 * alternate between 24 KiB and 16 bytes, so its claims switch between
 * payloads in the reply and payloads read afterwards. Each job runs once
 * with its own payload, in FIFO order (one job per claim). */
TEST(big_and_small_payloads_each_reach_their_job_once_in_order) {
    test_env e;
    env_start(&e, "pay");
    enum { N = 160 };
    static char buf[32 * 1024];
    for (long i = 0; i < N; i++) {
        size_t len = make_payload(i, 1, buf, sizeof buf);
        ASSERT_OK(rjq_enqueue(e.q, buf, len, job_id(i), NULL, NULL));
    }
    ASSERT_EQ(N, get_stats(e.base, e.q).ready);
    run_ctx x = {.mixed = 1, .total = N, .last = -1};
    x.seen = calloc(N, 1);
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(e.q, &wo, check_handler, &x, &w));
    for (int k = 0; k < 1000 && x.completed < N; k++) loop_for(e.base, 10);
    ASSERT_EQ(N, x.completed);
    ASSERT_EQ(N, x.handled);
    ASSERT_EQ(0, x.bad);
    ASSERT_EQ(0, x.dup);
    ASSERT_EQ(0, x.out_of_order);
    rjq_stats s = get_stats(e.base, e.q);
    ASSERT_EQ(N, s.completed);
    ASSERT_EQ(0, s.ready + s.active);
    free(x.seen);
    env_stop(&e);
}

/* The same backlog, all 24 KiB, drained by a worker of concurrency 16
 * (claims of 8 while the backlog lasts, two in flight): every job once,
 * with its own payload. */
TEST(big_payloads_by_batch_each_reach_their_job_once) {
    test_env e;
    env_start(&e, "batch");
    enum { N = 400 };
    static char buf[32 * 1024];
    for (long i = 0; i < N; i++) {
        size_t len = make_payload(i, 0, buf, sizeof buf);
        ASSERT_OK(rjq_enqueue(e.q, buf, len, job_id(i), NULL, NULL));
    }
    ASSERT_EQ(N, get_stats(e.base, e.q).ready);
    run_ctx x = {.total = N, .last = -1};
    x.seen = calloc(N, 1);
    rjq_worker_options wo = quiet_worker_options(16);
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(e.q, &wo, check_handler, &x, &w));
    for (int k = 0; k < 1000 && x.completed < N; k++) loop_for(e.base, 10);
    ASSERT_EQ(N, x.completed);
    ASSERT_EQ(N, x.handled);
    ASSERT_EQ(0, x.dup);
    ASSERT_EQ(0, x.bad);
    free(x.seen);
    env_stop(&e);
}

typedef struct gone_ctx {
    rjq_job *held;            /* the first job, held until the rest wait */
    long handled_victim, completed;
    long handled;
} gone_ctx;

static void on_gone_completed(rjq_client *c, int status, void *data) {
    (void)c;
    ASSERT_OK(status);
    ((gone_ctx *)data)->completed++;
}

static void gone_handler(rjq_job *job, void *data) {
    gone_ctx *x = data;
    x->handled++;
    if (strcmp(rjq_job_id(job), "victim") == 0) x->handled_victim++;
    if (strcmp(rjq_job_id(job), "first") == 0) x->held = job;
    else ASSERT_OK(rjq_job_complete(job, "ok", 2, on_gone_completed, x));
}

/* A job whose payload is gone when its worker reads it (deleted behind
 * rjq's back between the claim and the read; rjq itself deletes only the
 * records of finished jobs) is not handed to the handler: it is left to its
 * lease, and the reclaim sweep then counts the attempt (here its last:
 * dead). The job after it runs as usual. The worker reads payloads itself
 * because the job it ran before had a big one. */
TEST(claimed_job_without_payload_is_not_run_and_left_to_its_lease) {
    test_env e;
    env_start(&e, "gone");
    static char big[24 * 1024];
    memset(big, 'b', sizeof big);
    rjq_job_options o = {.id = "first"};
    ASSERT_OK(rjq_enqueue(e.q, big, sizeof big, &o, NULL, NULL));
    gone_ctx x = {0};
    rjq_worker_options wo = quiet_worker_options(1);
    wo.lease_ms = 300;
    wo.reclaim_ms = 100;
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(e.q, &wo, gone_handler, &x, &w));
    for (int k = 0; k < 500 && x.held == NULL; k++) loop_for(e.base, 10);
    ASSERT(x.held != NULL);
    /* while the worker has no free slot: a job without payload, one with */
    rjq_job_options ov = {.id = "victim", .max_attempts = 1};
    ASSERT_EQ(0, enqueue_job(e.base, e.q, "v", &ov).status);
    redisReply *r = server_cmd(e.rc, "HDEL t:{gone}:payload victim");
    ASSERT_EQ(1, r->integer);
    freeReplyObject(r);
    rjq_job_options oa = {.id = "after"};
    ASSERT_EQ(0, enqueue_job(e.base, e.q, "a", &oa).status);
    ASSERT_OK(rjq_job_complete(x.held, "ok", 2, on_gone_completed, &x));
    for (int k = 0; k < 500 && get_stats(e.base, e.q).dead < 1; k++) loop_for(e.base, 10);
    rjq_stats s = get_stats(e.base, e.q);
    ASSERT_EQ(1, s.dead);
    ASSERT_EQ(2, s.completed);
    ASSERT_EQ(0, x.handled_victim);
    ASSERT_EQ(2, x.handled);
    /* (rjq_queue_job reports a job without payload as not found) */
    redisReply *d = server_cmd(e.rc, "ZSCORE t:{gone}:dead victim");
    ASSERT_EQ(REDIS_REPLY_STRING, d->type);
    freeReplyObject(d);
    env_stop(&e);
}

typedef struct stop_ctx {
    test_env *e;
    rjq_worker *big;          /* the worker reading payloads */
    int free_client;          /* else stop that worker */
    long big_handled, big_completed, small_handled;
    int stopped;
} stop_ctx;

static void on_stop_completed(rjq_client *c, int status, void *data) {
    (void)c;
    if (status == RJQ_OK) ((stop_ctx *)data)->big_completed++;
}

static void big_handler(rjq_job *job, void *data) {
    stop_ctx *x = data;
    x->big_handled++;
    rjq_job_complete(job, "ok", 2, on_stop_completed, x);
}

static void on_big_stopped(rjq_worker *w, int status, void *data) {
    (void)w;
    ASSERT_OK(status);
    ((stop_ctx *)data)->stopped++;
}

/* Runs while the big worker's payload read is in flight (see below). */
static void small_handler(rjq_job *job, void *data) {
    stop_ctx *x = data;
    x->small_handled++;
    if (x->free_client) {
        rjq_client_free(x->e->c);
        x->e->c = NULL;
        /* (the handle is still ours: this frees it) */
        ASSERT_EQ(RJQ_ECLOSED, rjq_job_complete(job, "ok", 2, NULL, NULL));
        return;
    }
    ASSERT_OK(rjq_worker_stop(x->big, on_big_stopped, x));
    ASSERT_OK(rjq_job_complete(job, "ok", 2, NULL, NULL));
}

static void on_counted(rjq_client *c, int status, long long n, void *data) {
    (void)c, (void)n;
    ASSERT_OK(status);
    (*(int *)data)++;
}

/* A worker that reads its payloads (its last job was big) is stopped, or
 * its client freed, while that read is in flight: the jobs go back to the
 * queue unrun (stop), or are left to their lease (free); nothing leaks.
 * The order is made certain by two queues: both paused, jobs waiting on
 * each, then resumed in one turn, big queue first. The doorbells come in
 * that order, so the big worker's claim goes first, its payload read is
 * sent when its reply comes, and the small worker's claim reply, which
 * runs the handler that stops, comes before that read's reply. */
static void stop_while_reading(int free_client) {
    test_env e;
    env_start(&e, "big");
    rjq_queue *small = NULL;
    ASSERT_OK(rjq_queue_open(e.c, "small", NULL, &small));
    static char big[24 * 1024 + 1]; /* a string: enqueue_job takes one */
    memset(big, 'b', sizeof big - 1);
    stop_ctx x = {.e = &e, .free_client = free_client};
    rjq_worker_options wo = quiet_worker_options(4);
    ASSERT_OK(rjq_worker_start(e.q, &wo, big_handler, &x, &x.big));
    ASSERT_EQ(0, enqueue_job(e.base, e.q, big, NULL).status);
    for (int k = 0; k < 500 && x.big_completed < 1; k++) loop_for(e.base, 10);
    ASSERT_EQ(1, x.big_completed);
    int paused = 0;
    ASSERT_OK(rjq_queue_pause(e.q, on_counted, &paused));
    ASSERT_OK(rjq_queue_pause(small, on_counted, &paused));
    for (int k = 0; k < 500 && paused < 2; k++) loop_for(e.base, 10);
    for (int i = 0; i < 4; i++) ASSERT_OK(rjq_enqueue(e.q, big, sizeof big - 1, NULL, NULL, NULL));
    ASSERT_EQ(0, enqueue_job(e.base, small, "s", NULL).status);
    rjq_worker *sw = NULL;
    ASSERT_OK(rjq_worker_start(small, &wo, small_handler, &x, &sw));
    loop_for(e.base, 100); /* (its first claim finds the queue paused) */
    ASSERT_OK(rjq_queue_resume(e.q, NULL, NULL));
    ASSERT_OK(rjq_queue_resume(small, NULL, NULL));
    for (int k = 0; k < 500 && x.small_handled < 1; k++) loop_for(e.base, 10);
    ASSERT_EQ(1, x.small_handled);
    if (!free_client) {
        for (int k = 0; k < 500 && !x.stopped; k++) loop_for(e.base, 10);
        ASSERT_EQ(1, x.stopped);
        ASSERT_EQ(1, x.big_handled); /* only the first */
        rjq_stats s = get_stats(e.base, e.q);
        ASSERT_EQ(4, s.ready);
        ASSERT_EQ(0, s.active);
    } else {
        loop_for(e.base, 100);
        ASSERT_EQ(1, x.big_handled);
        /* claimed, unrun: active until their lease */
        ASSERT_EQ(4, server_int(e.rc, "ZCARD t:{big}:active") - 1 /* the pin */);
    }
    env_stop(&e);
}

TEST(worker_stopped_while_reading_payloads_hands_its_jobs_back) {
    stop_while_reading(0);
}

TEST(client_freed_while_reading_payloads_leaks_nothing) {
    stop_while_reading(1);
}
