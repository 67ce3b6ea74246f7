/*
 * The history's bucket math and stored values (src/history_math.c, rjq.h
 * "History"): which bucket a time falls in, the buckets' bounds, the
 * quantiles read from them, a stored value's parse (the ring's last lap
 * told apart, malformed values refused) and the adding up of points from
 * several processes or shards; and, in virtual time (tests/vclock.h), when
 * a producer's counts are flushed: one interval after the first count, and
 * never while idle.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <event2/event.h>

#include "core.h"
#include "harness.h"
#include "history.h"
#include "server.h"
#include "vclock.h"
#include "waits.h"

TEST(a_time_falls_in_the_log_scale_bucket_whose_bound_holds_it) {
    ASSERT_EQ(0, rjq__history_bucket(-5));
    ASSERT_EQ(0, rjq__history_bucket(0));
    ASSERT_EQ(0, rjq__history_bucket(1));
    ASSERT_EQ(1, rjq__history_bucket(2));
    ASSERT_EQ(2, rjq__history_bucket(3));
    ASSERT_EQ(2, rjq__history_bucket(4));
    ASSERT_EQ(10, rjq__history_bucket(1024));
    ASSERT_EQ(11, rjq__history_bucket(1025));
    ASSERT_EQ(20, rjq__history_bucket(1LL << 20));
    ASSERT_EQ(RJQ_HISTORY_BUCKETS - 1, rjq__history_bucket((1LL << 20) + 1));
    ASSERT_EQ(RJQ_HISTORY_BUCKETS - 1, rjq__history_bucket(1LL << 40));
    for (long long ms = 0; ms < 5000; ms++) { /* every time lies within its bucket's bound */
        int i = rjq__history_bucket(ms);
        ASSERT(ms <= rjq_history_bound(i) * 1000 + 1e-9);
        if (i > 0) ASSERT(ms > rjq_history_bound(i - 1) * 1000 + 1e-9);
    }
}

TEST(the_bounds_are_powers_of_two_milliseconds_then_infinity) {
    ASSERT(fabs(rjq_history_bound(0) - 0.001) < 1e-12);
    ASSERT(fabs(rjq_history_bound(10) - 1.024) < 1e-12);
    ASSERT(isinf(rjq_history_bound(RJQ_HISTORY_BUCKETS - 1)));
    ASSERT(isnan(rjq_history_bound(-1)));
    ASSERT(isnan(rjq_history_bound(RJQ_HISTORY_BUCKETS)));
}

TEST(quantiles_interpolate_within_the_bucket_that_holds_them) {
    long long b[RJQ_HISTORY_BUCKETS] = {0};
    ASSERT(rjq_history_quantile(b, 0.5) == -1); /* empty */
    b[10] = 100;                                 /* all in (0.512, 1.024] s */
    ASSERT(fabs(rjq_history_quantile(b, 0.5) - (0.512 + 0.512 * 0.5)) < 1e-9);
    ASSERT(fabs(rjq_history_quantile(b, 1) - 1.024) < 1e-9);
    b[0] = 100; /* half in [0, 1 ms] */
    ASSERT(fabs(rjq_history_quantile(b, 0.25) - 0.0005) < 1e-9);
    ASSERT(fabs(rjq_history_quantile(b, 0.5) - 0.001) < 1e-9);
    ASSERT(rjq_history_quantile(b, 0.99) > 0.512 && rjq_history_quantile(b, 0.99) <= 1.024);
    ASSERT(rjq_history_quantile(b, 0) == -1);
    ASSERT(rjq_history_quantile(b, 1.5) == -1);
    ASSERT(rjq_history_quantile(NULL, 0.5) == -1);
    memset(b, 0, sizeof b);
    b[RJQ_HISTORY_BUCKETS - 1] = 3; /* past the last bound: that bound */
    ASSERT(fabs(rjq_history_quantile(b, 0.99) - rjq_history_bound(RJQ_HISTORY_BUCKETS - 2)) < 1e-9);
}

/* A stored value of minute `at` with counts c[k] = base + k. */
static void value_of(char *out, size_t cap, long long at, long long base) {
    int n = snprintf(out, cap, "%lld", at);
    for (int k = 0; k < RJQ__H_COUNT; k++) n += snprintf(out + n, cap - (size_t)n, " %lld", base + k);
}

TEST(a_stored_value_of_the_minute_asked_for_is_read_whole) {
    char v[1024];
    value_of(v, sizeof v, 29000000, 1);
    rjq_history_point p;
    ASSERT_EQ(1, rjq__history_parse(v, strlen(v), 29000000, 60000, &p));
    ASSERT_EQ(29000000LL * 60000, p.at_ms);
    ASSERT_EQ(1, p.enqueued);
    ASSERT_EQ(2, p.completed);
    ASSERT_EQ(3, p.failed);
    ASSERT_EQ(4, p.wait_sum_ms);
    ASSERT_EQ(5, p.run_sum_ms);
    ASSERT_EQ(6, p.wait[0]);
    ASSERT_EQ(6 + RJQ_HISTORY_BUCKETS - 1, p.wait[RJQ_HISTORY_BUCKETS - 1]);
    ASSERT_EQ(6 + RJQ_HISTORY_BUCKETS, p.run[0]);
    ASSERT_EQ(RJQ__H_COUNT, p.run[RJQ_HISTORY_BUCKETS - 1]);
}

TEST(a_value_of_the_rings_last_lap_reads_as_an_empty_minute) {
    char v[1024];
    value_of(v, sizeof v, 29000000 - 1440, 7); /* the same slot a day earlier */
    rjq_history_point p;
    ASSERT_EQ(0, rjq__history_parse(v, strlen(v), 29000000, 60000, &p));
    ASSERT_EQ(29000000LL * 60000, p.at_ms);
    ASSERT_EQ(0, p.enqueued);
    ASSERT_EQ(0, p.run[3]);
}

TEST(malformed_values_are_refused) {
    char v[1024];
    rjq_history_point p;
    const char *bad[] = {"", "12", "12 1 2 3", "x 1", "-1 2", "12  1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ASSERT_EQ(-1, rjq__history_parse(bad[i], strlen(bad[i]), 12, 60000, &p));
    value_of(v, sizeof v, 12, 0);
    strcat(v, " 5"); /* one count too many */
    ASSERT_EQ(-1, rjq__history_parse(v, strlen(v), 12, 60000, &p));
    value_of(v, sizeof v, 12, 0);
    v[strlen(v) - 1] = '-'; /* not a number */
    ASSERT_EQ(-1, rjq__history_parse(v, strlen(v), 12, 60000, &p));
    value_of(v, sizeof v, 12, 4611686018427387904LL); /* past 2^62 */
    ASSERT_EQ(-1, rjq__history_parse(v, strlen(v), 12, 60000, &p));
    long long x;
    ASSERT_EQ(0, rjq__history_num("4611686018427387904", 19, &x)); /* 2^62 itself */
    ASSERT_EQ(-1, rjq__history_num("4611686018427387905", 19, &x));
    ASSERT_EQ(-1, rjq__history_num("99999999999999999999", 20, &x));
}

TEST(points_of_several_processes_add_up_bucket_by_bucket) {
    rjq_history_point a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.at_ms = 60000;
    a.enqueued = 3, a.completed = 2, a.run[4] = 2, a.wait[1] = 3, a.run_sum_ms = 30;
    b.enqueued = 4, b.failed = 1, b.run[4] = 1, b.run[9] = 5, b.wait[1] = 4, b.run_sum_ms = 12;
    rjq__history_add(&a, &b);
    ASSERT_EQ(60000, a.at_ms); /* (the time is not added) */
    ASSERT_EQ(7, a.enqueued);
    ASSERT_EQ(2, a.completed);
    ASSERT_EQ(1, a.failed);
    ASSERT_EQ(3, a.run[4]);
    ASSERT_EQ(5, a.run[9]);
    ASSERT_EQ(7, a.wait[1]);
    ASSERT_EQ(42, a.run_sum_ms);
}


/* n enqueues on q, their replies awaited (the virtual clock stands still). */
static void enqueue_n(struct event_base *base, rjq_client *c, rjq_queue *q, int n) {
    enqueue_wait w[8];
    memset(w, 0, sizeof w);
    for (int i = 0; i < n; i++) ASSERT_OK(rjq_enqueue(q, "x", 1, NULL, on_enqueue_wait, &w[i]));
    double end = mono_ms() + 30000;
    for (int i = 0; i < n; i++)
        while (!w[i].done) {
            ASSERT(mono_ms() < end);
            vclock_io(base, c);
        }
    for (int i = 0; i < n; i++) ASSERT_OK(w[i].status);
}

TEST(a_flush_goes_one_interval_after_the_first_count_and_none_while_idle) {
    rjq__clock_set(virtual_clock);
    armed_ms = -1;
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *rc = server_connect(&s);
    struct event_base *base = event_base_new();
    ASSERT(base != NULL);
    rjq_client_options o = client_options(s.url);
    o.command_timeout_ms = -1; /* (no watchdog, no pings: the flush's timer runs the clock) */
    o.ping_interval_ms = -1;
    rjq_client *c = NULL;
    ASSERT_OK(rjq_client_new(&c, &o, &vclock_io_ops, base));
    double end = mono_ms() + 30000;
    while (!rjq_client_is_connected(c)) {
        ASSERT(mono_ms() < end);
        vclock_io(base, c);
    }
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.history_flush_ms = 1000;
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(c, "vh", &qo, &q));
    uint64_t t0 = vnow;
    enqueue_n(base, c, q, 3);
    ASSERT_EQ(t0, vnow);
    ASSERT_EQ(0, server_int(rc, "EXISTS t:{vh}:hist:m")); /* counted, not flushed */
    /* the clock runs to the client's timers until the minute is written */
    while (server_int(rc, "EXISTS t:{vh}:hist:m") == 0) {
        ASSERT(vnow < t0 + 60000);
        vclock_run_to_timer(base, c, NULL);
        for (int i = 0; i < 20 && server_int(rc, "EXISTS t:{vh}:hist:m") == 0; i++) vclock_io(base, c);
    }
    ASSERT_EQ(1000, (long long)(vnow - t0)); /* one interval after the first count */
    /* the three, in the current minute */
    long long minute = server_now_ms(rc) / 60000;
    redisReply *r = server_cmd(rc, "HGET t:{vh}:hist:m %lld", minute % 1440);
    if (r->type != REDIS_REPLY_STRING) { /* (the minute turned since the flush) */
        freeReplyObject(r);
        r = server_cmd(rc, "HGET t:{vh}:hist:m %lld", (minute - 1) % 1440);
    }
    ASSERT_EQ(REDIS_REPLY_STRING, r->type);
    rjq_history_point p;
    ASSERT(rjq__history_parse(r->str, r->len, atoll(r->str), 60000, &p) == 1);
    ASSERT_EQ(3, p.enqueued);
    freeReplyObject(r);
    /* idle: an hour of virtual time writes nothing (a flush would make the
     * keys again) */
    freeReplyObject(server_cmd(rc, "DEL t:{vh}:hist:m t:{vh}:hist:h"));
    uint64_t t1 = vnow;
    while (vnow < t1 + 3600000 && armed_ms >= 0) vclock_run_to_timer(base, c, NULL);
    for (int i = 0; i < 20; i++) vclock_io(base, c);
    ASSERT_EQ(0, server_int(rc, "EXISTS t:{vh}:hist:m t:{vh}:hist:h"));
    /* more counts: flushed again, one interval later */
    uint64_t t2 = vnow;
    enqueue_n(base, c, q, 2);
    while (server_int(rc, "EXISTS t:{vh}:hist:m") == 0) {
        ASSERT(vnow < t2 + 60000);
        vclock_run_to_timer(base, c, NULL);
        for (int i = 0; i < 20 && server_int(rc, "EXISTS t:{vh}:hist:m") == 0; i++) vclock_io(base, c);
    }
    ASSERT_EQ(1000, (long long)(vnow - t2));
    rjq_client_free(c);
    event_base_free(base);
    redisFree(rc);
    server_stop_guarded(&s);
    rjq__clock_set(NULL);
}
