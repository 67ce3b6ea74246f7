/*
 * The job timings of rjq serve and rjq top (tools/timing.c): which events make an
 * enqueue-to-start or a run time, the histogram's buckets, and the bounds
 * of the map of jobs in flight.
 */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "timing.h"

static double wait_s, run_s;

static void ev(timing_map *m, const void *owner, const char *event, const char *id, long long t) {
    timing_event(m, owner, event, id, t, &wait_s, &run_s);
}

TEST(a_job_seen_enqueued_then_started_then_completed_gives_its_wait_and_run) {
    timing_map m;
    ASSERT_EQ(0, timing_map_init(&m, 100));
    int q = 0;
    ev(&m, &q, "enqueued", "a", 1000);
    ASSERT(wait_s < 0 && run_s < 0);
    ev(&m, &q, "active", "a", 1250);
    ASSERT(wait_s > 0.2499 && wait_s < 0.2501);
    ev(&m, &q, "completed", "a", 1750);
    ASSERT(run_s > 0.4999 && run_s < 0.5001);
    ASSERT_EQ(0, (long long)m.n); /* final: forgotten */
    timing_map_free(&m);
}

TEST(a_retried_job_waits_once_and_runs_twice) {
    timing_map m;
    ASSERT_EQ(0, timing_map_init(&m, 100));
    int q = 0;
    ev(&m, &q, "enqueued", "r", 1000);
    ev(&m, &q, "active", "r", 1010);
    ASSERT(wait_s > 0);
    ev(&m, &q, "failed", "r", 1110);
    ASSERT(run_s > 0.0999 && run_s < 0.1001);
    ev(&m, &q, "retried", "r", 1110);
    ev(&m, &q, "active", "r", 3000); /* the retry's start is no wait */
    ASSERT(wait_s < 0);
    ev(&m, &q, "failed", "r", 3020);
    ASSERT(run_s > 0.0199 && run_s < 0.0201);
    ev(&m, &q, "dead", "r", 3020);
    ASSERT_EQ(0, (long long)m.n);
    timing_map_free(&m);
}

TEST(what_was_not_seen_is_not_measured) {
    timing_map m;
    ASSERT_EQ(0, timing_map_init(&m, 100));
    int q1 = 0, q2 = 0;
    ev(&m, &q1, "active", "x", 2000); /* enqueued before we watched */
    ASSERT(wait_s < 0);
    ev(&m, &q1, "completed", "x", 2100);
    ASSERT(run_s > 0.0999 && run_s < 0.1001);
    ev(&m, &q1, "completed", "never-started", 2100);
    ASSERT(run_s < 0);
    ev(&m, &q1, "enqueued", "y", 1000);
    ev(&m, &q2, "active", "y", 1500); /* the same id in another queue */
    ASSERT(wait_s < 0);
    ev(&m, &q1, "active", "y", 1200);
    ev(&m, &q1, "reclaimed", "y", 9000); /* the run ended without an outcome */
    ev(&m, &q1, "completed", "y", 9500);
    ASSERT(run_s < 0);
    timing_forget_owner(&m, &q2);
    ASSERT_EQ(0, (long long)m.n);
    timing_map_free(&m);
}

TEST(the_map_is_bounded_and_forgets_jobs_whose_end_was_lost) {
    timing_map m;
    ASSERT_EQ(0, timing_map_init(&m, 3));
    int q = 0;
    ev(&m, &q, "enqueued", "a", 1000);
    ev(&m, &q, "enqueued", "b", 1000);
    ev(&m, &q, "enqueued", "c", 5000);
    ev(&m, &q, "enqueued", "d", 5000); /* full */
    ASSERT_EQ(3, (long long)m.n);
    ASSERT_EQ(1, (long long)m.dropped);
    ev(&m, &q, "active", "d", 5100);
    ASSERT(wait_s < 0);
    timing_sweep(&m, 6000, 2000); /* a and b last seen at 1000 */
    ASSERT_EQ(1, (long long)m.n);
    ev(&m, &q, "active", "c", 6000);
    ASSERT(wait_s > 0.999 && wait_s < 1.001);
    timing_map_free(&m);
}

TEST(observations_land_in_the_first_bucket_at_or_above_them) {
    timing_hist h;
    memset(&h, 0, sizeof h);
    timing_observe(&h, 0.001); /* le 0.001 */
    timing_observe(&h, 0.0011); /* le 0.0025 */
    timing_observe(&h, 0.5);   /* le 0.5 */
    timing_observe(&h, 5000);  /* +Inf */
    timing_observe(&h, -0.002); /* clocks a millisecond apart: 0 */
    ASSERT_EQ(2, (long long)h.le[0]);
    ASSERT_EQ(1, (long long)h.le[1]);
    ASSERT_EQ(1, (long long)h.le[8]);
    ASSERT(timing_bounds[8] == 0.5);
    ASSERT_EQ(1, (long long)h.le[TIMING_BUCKETS]);
    ASSERT_EQ(5, (long long)h.count);
    ASSERT(h.sum > 5000.5 && h.sum < 5000.503);
}


TEST(a_quantile_is_the_bound_of_the_bucket_that_holds_it) {
    timing_hist h;
    memset(&h, 0, sizeof h);
    ASSERT(timing_quantile(&h, 0.5) == -1); /* nothing observed */
    for (int i = 0; i < 98; i++) timing_observe(&h, 0.003); /* le 0.005 */
    timing_observe(&h, 0.2);                                /* le 0.25 */
    timing_observe(&h, 2000);                               /* +Inf */
    ASSERT(timing_quantile(&h, 0.5) == 0.005);
    ASSERT(timing_quantile(&h, 0.98) == 0.005);
    ASSERT(timing_quantile(&h, 0.99) == 0.25);
    ASSERT(isinf(timing_quantile(&h, 1.0)));
}
