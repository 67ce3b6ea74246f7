/*
 * The lease-extension schedule (src/worker_lease.c) in virtual time
 * (rjq__clock_set, core.h): a private redis-server, the client's I/O on
 * libevent, its timers on the test's virtual clock (tests/vclock.h: the
 * test's loop records the one timer the client asks for, moves the clock
 * to it and fires it). The server runs every extension it gets;
 * its slow log (everything logged) says which calls were extensions, and
 * the virtual time at which one appeared is when the worker sent it, since
 * the clock stands still while I/O runs. Exact delays, no wall clock.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/event.h>

#include "core.h"
#include "harness.h"
#include "rjq.h"
#include "rjq_scripts.h"
#include "server.h"
#include "vclock.h"
#include "waits.h"

/* ---- what the server ran ------------------------------------------------- */

static long long seen_id = -1; /* the newest slow log entry looked at */

/* Extension calls the server ran since the last look (FCALL of the extend
 * function, or EVALSHA of its script). */
static int new_extensions(redisContext *rc) {
    const rjq__script_def *x = &rjq__scripts[RJQ__S_EXTEND];
    redisReply *r = server_cmd(rc, "SLOWLOG GET -1");
    ASSERT(r->type == REDIS_REPLY_ARRAY);
    long long newest = seen_id;
    int n = 0;
    for (size_t i = 0; i < r->elements; i++) {
        redisReply *e = r->element[i];
        ASSERT(e->type == REDIS_REPLY_ARRAY && e->elements >= 4);
        long long id = e->element[0]->integer;
        if (id <= seen_id) continue;
        if (id > newest) newest = id;
        redisReply *args = e->element[3];
        if (args->elements < 2) continue;
        const char *cmd = args->element[0]->str, *what = args->element[1]->str;
        if ((strcasecmp(cmd, "FCALL") == 0 && strcmp(what, x->function) == 0) ||
            (strcasecmp(cmd, "EVALSHA") == 0 && strcasecmp(what, x->sha) == 0))
            n++;
    }
    freeReplyObject(r);
    seen_id = newest;
    return n;
}

/* ---- a worker whose jobs run until the test ends them ---------------------- */

typedef struct {
    int started;
    uint64_t started_at; /* virtual */
    rjq_job *job;
} holder;

static void hold(rjq_job *job, void *data) {
    holder *h = data;
    h->started++;
    h->started_at = vnow;
    h->job = job;
}

typedef struct {
    test_server s;
    redisContext *rc;
    struct event_base *base;
    rjq_client *c;
    rjq_queue *q;
} venv;

static void on_learnt(rjq_client *c, int status, const rjq_stats *st, void *data) {
    (void)c, (void)st;
    ASSERT_OK(status);
    *(int *)data = 1;
}

static void venv_start(venv *e, const char *queue) {
    rjq__clock_set(virtual_clock);
    armed_ms = -1;
    seen_id = -1;
    server_start_guarded(&e->s, NULL);
    e->rc = server_connect(&e->s);
    e->base = event_base_new();
    ASSERT(e->base != NULL);
    rjq_client_options o = client_options(e->s.url);
    o.command_timeout_ms = -1; /* (no watchdog: a stopped server is waited for) */
    o.ping_interval_ms = -1;
    ASSERT_OK(rjq_client_new(&e->c, &o, &vclock_io_ops, e->base));
    double end = mono_ms() + 30000;
    while (!rjq_client_is_connected(e->c)) {
        ASSERT(mono_ms() < end);
        vclock_io(e->base, e->c);
    }
    e->q = queue_for(e->c, queue);
    int learnt = 0; /* (its layout read: a worker starts when asked) */
    ASSERT_OK(rjq_queue_get_stats(e->q, on_learnt, &learnt));
    while (!learnt) {
        ASSERT(mono_ms() < end);
        vclock_io(e->base, e->c);
    }
    freeReplyObject(server_cmd(e->rc, "CONFIG SET slowlog-log-slower-than 0"));
    freeReplyObject(server_cmd(e->rc, "CONFIG SET slowlog-max-len 100000"));
    freeReplyObject(server_cmd(e->rc, "SLOWLOG RESET"));
}

static void venv_stop(venv *e) {
    rjq_client_free(e->c);
    event_base_free(e->base);
    redisFree(e->rc);
    server_stop_guarded(&e->s);
    rjq__clock_set(NULL);
}

/* Enqueue one job and run I/O until it is answered (no time passes). */
static void enqueue_now(venv *e) {
    enqueue_wait w = {0};
    ASSERT_OK(rjq_enqueue(e->q, "x", 1, NULL, on_enqueue_wait, &w));
    double end = mono_ms() + 30000;
    while (!w.done) {
        ASSERT(mono_ms() < end);
        vclock_io(e->base, e->c);
    }
    ASSERT_OK(w.status);
}

static rjq_worker *start_holder(venv *e, long lease_ms, holder *h) {
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.lease_ms = lease_ms;
    wo.poll_ms = 600000;    /* only the extension and the upkeep move the clock */
    wo.reclaim_ms = 600000;
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(e->q, &wo, hold, h, &w));
    return w;
}

/* Run virtual time until the server has run the next extension (or
 * `until`); its virtual time, or 0. */
static uint64_t next_extension(venv *e, uint64_t until) {
    while (vnow < until) {
        vclock_run_to_timer(e->base, e->c, NULL);
        int n = new_extensions(e->rc);
        if (n > 1) FAIL_AT(__FILE__, __LINE__, "%d extensions at once at +%llu", n,
                           (unsigned long long)vnow);
        if (n == 1) return vnow;
    }
    return 0;
}

/* The first extensions of a job that runs from the worker's start: one
 * period (lease/3) after the start, then every period. */
static void extensions_every_third_of(long lease_ms) {
    venv e;
    venv_start(&e, "lx");
    enqueue_now(&e);
    holder h = {0};
    uint64_t t0 = vnow;
    rjq_worker *w = start_holder(&e, lease_ms, &h);
    double end = mono_ms() + 30000;
    while (!h.started) { /* claimed at once: no time passes */
        ASSERT(mono_ms() < end);
        vclock_io(e.base, e.c);
    }
    ASSERT_EQ(t0, h.started_at);
    ASSERT_EQ(0, new_extensions(e.rc));
    uint64_t period = (uint64_t)lease_ms / 3;
    for (uint64_t k = 1; k <= 4; k++) {
        uint64_t at = next_extension(&e, t0 + k * period + 1);
        if (at != t0 + k * period)
            FAIL_AT(__FILE__, __LINE__, "lease %ld: extension %llu at +%llu, not +%llu", lease_ms,
                    (unsigned long long)k, (unsigned long long)(at ? at - t0 : 0),
                    (unsigned long long)(k * period));
    }
    ASSERT_OK(rjq_job_complete(h.job, NULL, 0, NULL, NULL));
    (void)w;
    venv_stop(&e);
}

TEST(extensions_of_a_running_job_go_every_third_of_the_lease_from_the_workers_start) {
    extensions_every_third_of(3000); /* every 1000 ms */
    extensions_every_third_of(900);  /* every 300 ms: the period follows the lease */
    extensions_every_third_of(45000); /* every 15 s */
}

TEST(first_extension_of_a_job_started_later_comes_at_the_workers_next_period_not_a_period_after_the_start) {
    venv e;
    venv_start(&e, "ly");
    holder h = {0};
    uint64_t t0 = vnow;
    long lease_ms = 2400; /* a period of 800 ms */
    start_holder(&e, lease_ms, &h);
    /* a period with nothing running sends nothing */
    while (vnow < t0 + 800) vclock_run_to_timer(e.base, e.c, NULL);
    ASSERT_EQ(0, new_extensions(e.rc));
    if (vnow == t0 + 800) vclock_run_to_timer(e.base, e.c, NULL); /* off the period's edge */
    uint64_t t1 = vnow;
    ASSERT((t1 - t0) % 800 != 0);
    enqueue_now(&e); /* pushed to the idle worker: runs now */
    double end = mono_ms() + 30000;
    while (!h.started) {
        ASSERT(mono_ms() < end);
        vclock_io(e.base, e.c);
    }
    ASSERT_EQ(t1, h.started_at);
    uint64_t due = t0 + 800 * ((t1 - t0) / 800 + 1);
    uint64_t at = next_extension(&e, due + 1);
    if (at != due)
        FAIL_AT(__FILE__, __LINE__, "job started at +%llu: first extension at +%llu, not +%llu",
                (unsigned long long)(t1 - t0), (unsigned long long)(at ? at - t0 : 0),
                (unsigned long long)(due - t0));
    ASSERT_EQ(due + 800, next_extension(&e, due + 801));
    ASSERT_OK(rjq_job_complete(h.job, NULL, 0, NULL, NULL));
    venv_stop(&e);
}

TEST(extension_whose_reply_is_slow_is_not_doubled_and_the_schedule_keeps_its_period) {
    venv e;
    venv_start(&e, "lz");
    enqueue_now(&e);
    holder h = {0};
    uint64_t t0 = vnow;
    start_holder(&e, 3000, &h); /* a period of 1000 ms */
    double end = mono_ms() + 30000;
    while (!h.started) {
        ASSERT(mono_ms() < end);
        vclock_io(e.base, e.c);
    }
    ASSERT_EQ(t0 + 1000, next_extension(&e, t0 + 1001));
    /* the server stops answering: the extension sent at +2000 waits, and
     * the periods at +3000 and +4000 send none beside it */
    ASSERT_EQ(0, kill(e.s.pid, SIGSTOP));
    while (vnow < t0 + 4000) vclock_run_to_timer(e.base, e.c, NULL);
    ASSERT_EQ(t0 + 4000, vnow);
    ASSERT_EQ(0, kill(e.s.pid, SIGCONT));
    end = mono_ms() + 30000;
    int ran = 0;
    while (ran == 0) { /* its reply comes (the clock stands still) */
        ASSERT(mono_ms() < end);
        vclock_io(e.base, e.c);
        ran += new_extensions(e.rc);
    }
    vclock_io(e.base, e.c);
    ran += new_extensions(e.rc);
    ASSERT_EQ(1, ran); /* one, though three periods went by */
    /* answered: the next period sends again, on the schedule's own beat */
    ASSERT_EQ(t0 + 5000, next_extension(&e, t0 + 5001));
    ASSERT_EQ(t0 + 6000, next_extension(&e, t0 + 6001));
    ASSERT_OK(rjq_job_complete(h.job, NULL, 0, NULL, NULL));
    venv_stop(&e);
}
