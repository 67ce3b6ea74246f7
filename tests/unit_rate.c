/*
 * The rates of rjq serve's overview and rjq top (tools/rate.c), over reads
 * of a queue's counters at virtual times: a counter that went down (Redis
 * restarted empty) is a reset, as Prometheus' rate() reads it, so no rate
 * is ever negative.
 */
#include <string.h>

#include "harness.h"
#include "rate.h"

static rjq_stats counters(long long enqueued, long long completed, long long failed) {
    rjq_stats s;
    memset(&s, 0, sizeof s); /* (a reply's stats: no INIT, the library fills them) */
    s.enqueued = enqueued;
    s.completed = completed;
    s.failed = failed;
    return s;
}

static int near(double want, double got) {
    return got > want - 1e-9 && got < want + 1e-9;
}

TEST(a_counter_that_grew_gives_its_increase_per_second) {
    ASSERT_EQ(30, counter_increase(100, 130));
    ASSERT_EQ(0, counter_increase(7, 7));
    ASSERT(near(15.0, counter_rate(100, 130, 2.0)));
    ASSERT(near(0.0, counter_rate(7, 7, 1.0)));
}

TEST(a_counter_that_went_down_was_reset_and_counts_from_zero) {
    ASSERT_EQ(5, counter_increase(1000, 5));
    ASSERT_EQ(0, counter_increase(1000, 0));
    ASSERT_EQ(0, counter_increase(1000, -3)); /* (never negative, whatever was read) */
    ASSERT(near(2.5, counter_rate(1000, 5, 2.0)));
    ASSERT(near(0.0, counter_rate(1000, 0, 1.0)));
}

TEST(no_time_elapsed_gives_no_rate) {
    ASSERT(near(0.0, counter_rate(1, 100, 0.0)));
    ASSERT(near(0.0, counter_rate(1, 100, -1.0)));
}

/* The overview's reads every second of virtual time: steady, then Redis
 * restarted empty (every counter back near 0), then steady again. */
TEST(the_rates_across_a_redis_restart_are_never_negative) {
    struct {
        double t;
        rjq_stats s;
        double in, done, fail;
    } reads[] = {
        {0.0, counters(500, 480, 10), 0, 0, 0},
        {1.0, counters(520, 498, 11), 20, 18, 1},
        {2.0, counters(540, 515, 11), 20, 17, 0},
        {3.0, counters(4, 2, 0), 4, 2, 0},     /* restarted empty: a reset */
        {4.5, counters(34, 32, 3), 20, 20, 2}, /* after it, as before */
        {5.5, counters(0, 0, 0), 0, 0, 0},     /* its keys deleted */
    };
    for (size_t i = 1; i < sizeof reads / sizeof reads[0]; i++) {
        stats_rates r = stats_rates_between(&reads[i - 1].s, &reads[i].s, reads[i].t - reads[i - 1].t);
        ASSERT(r.in >= 0 && r.done >= 0 && r.fail >= 0);
        ASSERT(near(reads[i].in, r.in));
        ASSERT(near(reads[i].done, r.done));
        ASSERT(near(reads[i].fail, r.fail));
    }
}
