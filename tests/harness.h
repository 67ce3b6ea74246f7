/*
 * A tiny test harness: TEST(name) registers a test; each test binary runs
 * the tests named on its command line (ctest runs one test per process,
 * so they parallelise and a crash names its test), or all of them.
 */
#ifndef RJQ_TEST_HARNESS_H
#define RJQ_TEST_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*test_fn)(void);
typedef struct test_case {
    const char *name;
    test_fn fn;
} test_case;

#define TEST_MAX 256
extern test_case test_cases[TEST_MAX];
extern int test_count;

#define TEST(name)                                                        \
    static void test_##name(void);                                        \
    __attribute__((constructor)) static void register_##name(void) {      \
        if (test_count < TEST_MAX) test_cases[test_count++] = (test_case){#name, test_##name}; \
    }                                                                     \
    static void test_##name(void)

#define FAIL_AT(file, line, ...)                                          \
    do {                                                                  \
        fprintf(stderr, "%s:%d: FAILED: ", file, line);                  \
        fprintf(stderr, __VA_ARGS__);                                     \
        fprintf(stderr, "\n");                                            \
        abort();                                                          \
    } while (0)

#define ASSERT(cond)                                                      \
    do {                                                                  \
        if (!(cond)) FAIL_AT(__FILE__, __LINE__, "%s", #cond);            \
    } while (0)

#define ASSERT_EQ(expected, actual)                                       \
    do {                                                                  \
        long long e_ = (long long)(expected), a_ = (long long)(actual);   \
        if (e_ != a_)                                                     \
            FAIL_AT(__FILE__, __LINE__, "%s == %s: expected %lld, got %lld", \
                    #expected, #actual, e_, a_);                          \
    } while (0)

#define ASSERT_STREQ(expected, actual)                                    \
    do {                                                                  \
        const char *e_ = (expected), *a_ = (actual);                      \
        if (a_ == NULL || strcmp(e_, a_) != 0)                            \
            FAIL_AT(__FILE__, __LINE__, "%s: expected \"%s\", got \"%s\"", \
                    #actual, e_, a_ ? a_ : "(null)");                     \
    } while (0)

#define ASSERT_OK(expr)                                                   \
    do {                                                                  \
        int rc_ = (expr);                                                 \
        if (rc_ != 0)                                                     \
            FAIL_AT(__FILE__, __LINE__, "%s returned %d (%s)", #expr, rc_, \
                    rjq_strerror(rc_));                                   \
    } while (0)


/* A script's KEYS as src/keys.def lays them out (generated/rjq_keys.h), for
 * tests that call a script directly: appends its numkeys, then the names of
 * its keys for queue `queue` under prefix `prefix`, to argv from index at;
 * returns the index after them. lk holds the texts. */
typedef struct layout_keys {
    char num[16];
    char names[32][96];
} layout_keys;
int layout_script_keys(layout_keys *lk, int script, const char *prefix, const char *queue,
                       const char **argv, int at);

/* ---- waiting in a libevent loop -------------------------------------------
 * A test waits for the event it checks: WAIT_FOR runs the loop until cond
 * (any expression: a callback's flag, a counter, a state read from Redis)
 * holds, checked again every 5 ms of the loop (so that a condition read
 * from a server does not take the loop's time from the work it waits for;
 * loop_until / loop_until_count react at once to a flag or a counter).
 * timeout_ms is a failure guard only: the test fails when it passes. */
struct event_base;
/* The deadline of a wait of timeout_ms from now (a monotonic clock). */
double wait_deadline(long timeout_ms);
/* 5 ms of the loop. Returns 0, without running the loop, once deadline
 * has passed. */
int wait_step(struct event_base *base, double deadline);

#define WAIT_FOR(base, cond, timeout_ms)                                  \
    do {                                                                  \
        double wd_ = wait_deadline(timeout_ms);                           \
        while (!(cond))                                                   \
            if (!wait_step((base), wd_))                                  \
                FAIL_AT(__FILE__, __LINE__, "waited %ld ms for %s",      \
                        (long)(timeout_ms), #cond);                       \
    } while (0)

/* For a condition that costs to read (a query to another server, during
 * which the loop stands still): run the loop for interval_ms between two
 * reads. Returns 0, without running the loop, once deadline has passed. */
int wait_poll(struct event_base *base, double deadline, long interval_ms);
/* One turn of the loop: what is ready runs (at most 5 ms). */
void loop_turn(struct event_base *base);
/* The events added to or active in the loop (timers included). */
int loop_events(struct event_base *base);
/* Has the loop nothing left to run, not even a timer (everything on it
 * freed)? */
int loop_empty(struct event_base *base);

/* Time itself is what the test checks (a delay, a lease, a backoff is not
 * over yet) and no event or round trip can stand for it: run the loop for
 * ms. why names what must not happen before then. Only for "nothing
 * happens before a deadline" checks, never as room for something to
 * happen. */
void quiet_for(struct event_base *base, long ms, const char *why);

#endif
