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

#endif
