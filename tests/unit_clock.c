/*
 * The client's timing logic in virtual time (rjq__clock_set, core.h): a
 * loop of the test's own records the one timer the client asks for; the
 * test moves the clock to it and fires it. Reconnect backoff and connect
 * timeouts over minutes of virtual time run in microseconds, and their
 * delays are checked exactly, which no test on the wall clock can do.
 * The host name never resolves (the loop's resolve fails it, or never
 * answers): no socket is opened. The command timeout, the resend backoff
 * of a transient error, the liveness beat and the idle probes need a
 * session: a private redis-server, its I/O on libevent, the timers still
 * virtual.
 * What runs on the server's clock (TIME inside the scripts: leases and
 * their expiry, job timeouts, delays and retry backoff, cron firing, rate
 * limit windows, dedup and retention) cannot take the client's clock; the
 * schedules here are the client's own.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "core.h"
#include "core_private.h" /* white-box: the requests in flight */
#include "harness.h"
#include "rjq.h"
#include "server.h"
#include "vclock.h"
#include "waits.h"

/* ---- the test's loop --------------------------------------------------- */

static int fake_attach(void *loop, struct redisAsyncContext *ac) {
    (void)loop, (void)ac;
    FAIL_AT(__FILE__, __LINE__, "no name resolves: nothing to attach");
    return -1;
}

#define MAX_LOOKUPS 64
static int answer_lookups;              /* 1: fail each at once; 0: never answer */
static struct lookup {
    void *conn;                         /* the resolve's arg: one per connection */
    uint64_t at, cancelled_at;
} lookups[MAX_LOOKUPS];
static int nlookups;

static void *fake_resolve(void *loop, const char *host, rjq_resolved_fn *done, void *arg) {
    (void)loop, (void)host;
    ASSERT(nlookups < MAX_LOOKUPS);
    lookups[nlookups] = (struct lookup){arg, vnow, 0};
    nlookups++;
    if (answer_lookups) {
        done(arg, "no such host", NULL, 0);
        return NULL;
    }
    return &lookups[nlookups - 1];
}

static void fake_resolve_cancel(void *loop, void *handle) {
    (void)loop;
    struct lookup *l = handle;
    ASSERT(l->cancelled_at == 0);
    l->cancelled_at = vnow;
}

static const rjq_loop_ops fake_ops = {sizeof(rjq_loop_ops), fake_attach, fake_set_timer, NULL, fake_resolve,
                                      fake_resolve_cancel, NULL, NULL};

static int errors; /* RJQ_EVENT_ERROR events */

static void on_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    (void)c, (void)conn, (void)detail, (void)data;
    if (ev == RJQ_EVENT_ERROR) errors++;
}

/* answer: fail each lookup at once (1) or never answer (0) */
static rjq_client *virtual_client(int answer, long min_ms, long max_ms, long connect_timeout_ms) {
    rjq__clock_set(virtual_clock);
    answer_lookups = answer;
    armed_ms = -1;
    nlookups = 0;
    errors = 0;
    rjq_client_options o = RJQ_CLIENT_OPTIONS_INIT;
    o.url = "redis://nowhere.invalid:6379";
    o.reconnect_min_ms = min_ms;
    o.reconnect_max_ms = max_ms;
    o.connect_timeout_ms = connect_timeout_ms;
    o.on_event = on_event;
    rjq_client *c = NULL;
    ASSERT_OK(rjq_client_new(&c, &o, &fake_ops, NULL));
    return c;
}

static void virtual_client_free(rjq_client *c) {
    rjq_client_free(c);
    rjq__clock_set(NULL);
}

/* The lookups of the connection of lookup i, in order: their times. */
static int attempts_of(int i, uint64_t *at, int max) {
    int n = 0;
    for (int k = 0; k < nlookups && n < max; k++)
        if (lookups[k].conn == lookups[i].conn) at[n++] = lookups[k].at;
    return n;
}

TEST(reconnect_delays_double_from_the_minimum_to_the_cap_with_jitter_below_each) {
    rjq_client *c = virtual_client(1, 100, 1600, 2000);
    uint64_t t0 = vnow;
    while (nlookups < 40 && vnow - t0 < 3600000) vclock_step(c);
    ASSERT(nlookups >= 40);
    uint64_t at[MAX_LOOKUPS];
    int n = attempts_of(0, at, MAX_LOOKUPS);
    ASSERT(n >= 8);
    ASSERT_EQ(t0, at[0]); /* the first attempt: at once */
    /* after failure k (1, 2, ...): a delay d = min * 2^(k-1) capped at max,
     * drawn from [d/2, d] */
    long d = 100;
    for (int k = 1; k < n; k++) {
        long gap = (long)(at[k] - at[k - 1]);
        if (gap < d / 2 || gap > d)
            FAIL_AT(__FILE__, __LINE__, "attempt %d came %ld ms after the one before, not in [%ld, %ld]",
                    k + 1, gap, d / 2, d);
        d = d * 2 > 1600 ? 1600 : d * 2;
    }
    ASSERT_EQ(nlookups, errors); /* each failed attempt said so */
    virtual_client_free(c);
}

TEST(a_connect_that_never_completes_is_given_up_at_its_timeout_then_retried_after_the_backoff) {
    rjq_client *c = virtual_client(0, 1000, 1000, 2000);
    uint64_t t0 = vnow;
    while (nlookups < 6 && vnow - t0 < 600000) vclock_step(c);
    ASSERT(nlookups >= 6);
    uint64_t at[MAX_LOOKUPS];
    int n = attempts_of(0, at, MAX_LOOKUPS);
    ASSERT(n >= 3);
    for (int k = 0; k < nlookups; k++) {
        if (lookups[k].conn != lookups[0].conn || lookups[k].at == at[n - 1]) continue;
        /* given up exactly at the connect timeout, not a tick before */
        ASSERT_EQ(lookups[k].at + 2000, lookups[k].cancelled_at);
    }
    for (int k = 1; k < n; k++) { /* then the backoff: [500, 1000] */
        long gap = (long)(at[k] - at[k - 1]) - 2000;
        if (gap < 500 || gap > 1000)
            FAIL_AT(__FILE__, __LINE__, "attempt %d came %ld ms after the timeout", k + 1, gap);
    }
    virtual_client_free(c);
}

/* ---- a real server: I/O on libevent, the client's timers in virtual time ---- */

typedef struct {
    int done, status;
    uint64_t at; /* virtual */
} stats_at;

static void on_stats_at(rjq_client *c, int status, const rjq_stats *st, void *data) {
    (void)c, (void)st;
    stats_at *w = data;
    w->done++;
    w->status = status;
    w->at = vnow;
}

TEST(an_unanswered_request_fails_within_a_watchdog_tick_of_the_command_timeout_not_before) {
    rjq__clock_set(virtual_clock);
    armed_ms = -1;
    test_server s;
    server_start_guarded(&s, NULL);
    struct event_base *base = event_base_new();
    ASSERT(base != NULL);
    rjq_client_options o = client_options(s.url);
    o.command_timeout_ms = 8000; /* the watchdog looks every 1000 (a quarter, at most 1 s) */
    o.ping_interval_ms = -1;     /* no probe: only the request waits */
    rjq_client *c = NULL;
    ASSERT_OK(rjq_client_new(&c, &o, &vclock_io_ops, base));
    double end = mono_ms() + 30000;
    while (!rjq_client_is_connected(c)) {
        ASSERT(mono_ms() < end);
        vclock_io(base, c);
    }
    rjq_queue *q = queue_for(c, "vt");
    stats_at w = {0};
    ASSERT_OK(rjq_queue_get_stats(q, on_stats_at, &w)); /* (its scripts are loaded now) */
    while (!w.done) {
        ASSERT(mono_ms() < end);
        vclock_io(base, c);
    }
    ASSERT_OK(w.status);
    ASSERT_EQ(0, kill(s.pid, SIGSTOP)); /* the server hears, and says nothing */
    memset(&w, 0, sizeof w);
    ASSERT_OK(rjq_queue_get_stats(q, on_stats_at, &w));
    vclock_io(base, c); /* sent */
    uint64_t sent = vnow;
    /* virtual time runs on to the timeout: no answer before it ... */
    while (!w.done && armed_ms >= 0 && vnow + (uint64_t)armed_ms < sent + 8000) {
        vclock_run_to_timer(base, c, &w.done);
    }
    ASSERT_EQ(0, w.done);
    /* ... and RJQ_ETIMEDOUT at the watchdog's first look from it on */
    while (!w.done && vnow <= sent + 9000) vclock_run_to_timer(base, c, &w.done);
    ASSERT_EQ(1, w.done);
    ASSERT_EQ(RJQ_ETIMEDOUT, w.status);
    ASSERT(w.at >= sent + 8000 && w.at <= sent + 9000);
    ASSERT_EQ(0, kill(s.pid, SIGCONT));
    rjq_client_free(c);
    event_base_free(base);
    server_stop_guarded(&s);
    rjq__clock_set(NULL);
}

/* READONLY errors the server answered so far. */
static long long readonly_errors(redisContext *rc) {
    redisReply *r = server_cmd(rc, "INFO errorstats");
    const char *p = r->type == REDIS_REPLY_STRING
                        ? strstr(r->str, "errorstat_READONLY:count=") : NULL;
    long long n = p ? atoll(p + strlen("errorstat_READONLY:count=")) : 0;
    freeReplyObject(r);
    return n;
}

/* Enqueue one job; run virtual time until it is answered or `until`. */
static void enqueue_until(struct event_base *base, rjq_client *c, rjq_queue *q, enqueue_wait *w,
                          uint64_t *answered_at, uint64_t until) {
    memset(w, 0, sizeof *w);
    ASSERT_OK(rjq_enqueue(q, "x", 1, NULL, on_enqueue_wait, w));
    vclock_io(base, c);
    while (!w->done && vnow < until) vclock_run_to_timer(base, c, &w->done);
    *answered_at = vnow;
}

TEST(a_write_a_replica_refuses_is_sent_again_with_backoff_for_a_minute_then_fails) {
    rjq__clock_set(virtual_clock);
    armed_ms = -1;
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *rc = server_connect(&s);
    struct event_base *base = event_base_new();
    ASSERT(base != NULL);
    rjq_client_options o = client_options(s.url);
    o.command_timeout_ms = -1; /* (no watchdog: only the retries run the clock) */
    o.ping_interval_ms = -1;
    rjq_client *c = NULL;
    ASSERT_OK(rjq_client_new(&c, &o, &vclock_io_ops, base));
    double end = mono_ms() + 30000;
    while (!rjq_client_is_connected(c)) {
        ASSERT(mono_ms() < end);
        vclock_io(base, c);
    }
    /* (no history: its flush, a write too, would be refused and counted) */
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.history_flush_ms = -1;
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(c, "ro", &qo, &q));
    uint64_t t0 = vnow, at;
    enqueue_wait w;
    enqueue_until(base, c, q, &w, &at, t0 + 10000); /* (the library is loaded now) */
    ASSERT_EQ(1, w.done);
    ASSERT_OK(w.status);
    ASSERT_EQ(t0, at);
    /* a replica of nobody now: writes are refused with READONLY */
    freeReplyObject(server_cmd(rc, "REPLICAOF 127.0.0.1 1"));
    long long before = readonly_errors(rc);
    enqueue_until(base, c, q, &w, &at, t0 + 120000);
    ASSERT_EQ(1, w.done);
    ASSERT(w.status != RJQ_OK);
    /* a minute after the first refusal, and not before: re-sent after 50,
     * 100, 200, 400 and 800 ms, then every second (65 tries in all, the
     * last at 60.55 s); without a backoff it would be hundreds */
    if (at != t0 + 60550)
        FAIL_AT(__FILE__, __LINE__, "failed %llu ms after the first try (%s: %s)", (unsigned long long)(at - t0), rjq_strerror(w.status), rjq_client_get_errmsg(c));
    long long tries = readonly_errors(rc) - before;
    fprintf(stderr, "refused %lld times, failed %llu ms after the first try\n", tries,
            (unsigned long long)(at - t0));
    if (tries != 65) FAIL_AT(__FILE__, __LINE__, "%lld tries", tries);
    /* the next one is refused for 10 s; then the server takes writes: it
     * is done at its next try */
    enqueue_wait w2 = {0};
    ASSERT_OK(rjq_enqueue(q, "x", 1, NULL, on_enqueue_wait, &w2));
    vclock_io(base, c);
    uint64_t t1 = vnow;
    while (vnow < t1 + 10000) vclock_run_to_timer(base, c, &w2.done);
    ASSERT_EQ(0, w2.done);
    freeReplyObject(server_cmd(rc, "REPLICAOF NO ONE"));
    while (!w2.done && vnow < t1 + 12000) vclock_run_to_timer(base, c, &w2.done);
    ASSERT_EQ(1, w2.done);
    ASSERT_OK(w2.status);
    ASSERT(vnow <= t1 + 11000);
    rjq_client_free(c);
    event_base_free(base);
    redisFree(rc);
    server_stop_guarded(&s);
    rjq__clock_set(NULL);
}

/* ---- the liveness beat and the idle probes: client timers, virtual time ---- */

/* I/O until every request the client sent has been answered (real time;
 * the virtual clock stands still): what a timer sent has run in Redis. */
static void settle(struct event_base *base, rjq_client *c) {
    double end = mono_ms() + 30000;
    do {
        ASSERT(mono_ms() < end);
        vclock_io(base, c);
    } while (c->inflight.n > 0 || c->backlog.n > 0 || c->later.n > 0);
}

/* A client on a private server with virtual timers, connected and settled. */
static rjq_client *virtual_io_client(struct event_base *base, const test_server *s, long liveness_ms,
                                     long ping_interval_ms, long command_timeout_ms) {
    rjq__clock_set(virtual_clock);
    armed_ms = -1;
    rjq_client_options o = client_options(s->url);
    o.liveness_ms = liveness_ms;
    o.ping_interval_ms = ping_interval_ms;
    o.command_timeout_ms = command_timeout_ms;
    rjq_client *c = NULL;
    ASSERT_OK(rjq_client_new(&c, &o, &vclock_io_ops, base));
    double end = mono_ms() + 30000;
    while (!rjq_client_is_connected(c)) {
        ASSERT(mono_ms() < end);
        vclock_io(base, c);
    }
    settle(base, c);
    return c;
}

static void noop_handler(rjq_job *job, void *data) {
    (void)job, (void)data;
}

/* Run virtual time for span ms, timer by timer, each one's requests
 * answered before the next; record when (virtual) the server's count of
 * `command` rose (one a timer at most: asserted). Returns how many. */
static int times_of(struct event_base *base, rjq_client *c, redisContext *rc, const char *command,
                    uint64_t span, uint64_t *at, int max) {
    int n = 0;
    uint64_t end = vnow + span;
    long long seen = server_calls(rc, command);
    while (vnow < end) {
        double guard = mono_ms() + 30000;
        while (armed_ms < 0) { /* (a timer is always armed: the beat, the watchdog) */
            ASSERT(mono_ms() < guard);
            vclock_io(base, c);
        }
        vclock_step(c);
        settle(base, c);
        long long now = server_calls(rc, command);
        ASSERT(now - seen <= 1);
        if (now > seen && n < max) at[n++] = vnow;
        seen = now;
    }
    return n;
}

/* The gaps between the times at[0..n-1] are all `gap`. */
static void assert_every(const uint64_t *at, int n, uint64_t gap, const char *what) {
    for (int k = 1; k < n; k++)
        if (at[k] - at[k - 1] != gap)
            FAIL_AT(__FILE__, __LINE__, "%s %d came %llu ms after the one before, not %llu", what,
                    k + 1, (unsigned long long)(at[k] - at[k - 1]), (unsigned long long)gap);
}

TEST(a_client_with_workers_beats_every_third_of_its_liveness_time_at_most_every_second) {
    const long liveness[2] = {1500, 9000}; /* beats every 500 ms, then every 1000 (the cap) */
    const uint64_t gap[2] = {500, 1000};
    for (int i = 0; i < 2; i++) {
        test_server s;
        server_start_guarded(&s, NULL);
        redisContext *rc = server_connect(&s);
        struct event_base *base = event_base_new();
        ASSERT(base != NULL);
        /* no watchdog, no probe: the beat is the client's only timer but the
         * worker's own, a minute and more away */
        rjq_client *c = virtual_io_client(base, &s, liveness[i], -1, -1);
        rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
        wo.concurrency = 1;
        wo.poll_ms = 600000;
        wo.reclaim_ms = 600000;
        rjq_worker *w = NULL;
        ASSERT_OK(rjq_worker_start(queue_for(c, "lb"), &wo, noop_handler, NULL, &w));
        settle(base, c);
        uint64_t at[64];
        /* the beat is the only script called: one call a beat */
        int n = times_of(base, c, rc, "fcall", 20 * gap[i], at, 64);
        if (n < 19 || n > 21) FAIL_AT(__FILE__, __LINE__, "%d beats in %llu ms", n, 20 * (unsigned long long)gap[i]);
        assert_every(at, n, gap[i], "beat");
        rjq_client_free(c);
        event_base_free(base);
        redisFree(rc);
        server_stop_guarded(&s);
        rjq__clock_set(NULL);
    }
}

/* The gaps between the times at[0..n-1] are within [lo, hi]. */
static void assert_gaps_within(const uint64_t *at, int n, uint64_t lo, uint64_t hi, const char *what) {
    for (int k = 1; k < n; k++)
        if (at[k] - at[k - 1] < lo || at[k] - at[k - 1] > hi)
            FAIL_AT(__FILE__, __LINE__, "%s %d came %llu ms after the one before, not in [%llu, %llu]",
                    what, k + 1, (unsigned long long)(at[k] - at[k - 1]), (unsigned long long)lo,
                    (unsigned long long)hi);
}

/* An idle client (no workers: no beat; nothing to read) sends TIME on its
 * command connection and PUBLISHes a probe to its subscriber every
 * ping_interval_ms, as the watchdog sees it: it looks every quarter of
 * the command timeout or of the ping interval, at most every second, and
 * a probe goes at the first look at least ping_interval_ms after the
 * connection last had I/O (a look later at most). */
TEST(an_idle_client_probes_its_connections_every_ping_interval) {
    const long ping[2] = {3000, 2500};
    for (int i = 0; i < 2; i++) {
        test_server s;
        server_start_guarded(&s, NULL);
        redisContext *rc = server_connect(&s);
        struct event_base *base = event_base_new();
        ASSERT(base != NULL);
        rjq_client *c = virtual_io_client(base, &s, -1, ping[i], 4000);
        uint64_t at[64];
        uint64_t look = (uint64_t)(ping[i] / 4 < 1000 ? ping[i] / 4 : 1000); /* (4000 / 4: 1000) */
        uint64_t lo = (uint64_t)ping[i], hi = (uint64_t)ping[i] + look - 1;
        int n = times_of(base, c, rc, "time", 30000, at, 64);
        if (n < 30000 / (int)hi || n > 30000 / (int)lo + 1) FAIL_AT(__FILE__, __LINE__, "%d pings", n);
        assert_gaps_within(at, n, lo, hi, "TIME");
        n = times_of(base, c, rc, "publish", 30000, at, 64);
        if (n < 30000 / (int)hi || n > 30000 / (int)lo + 1) FAIL_AT(__FILE__, __LINE__, "%d probes", n);
        assert_gaps_within(at, n, lo, hi, "probe");
        rjq_client_free(c);
        event_base_free(base);
        redisFree(rc);
        server_stop_guarded(&s);
        rjq__clock_set(NULL);
    }
}
