/* The hand-rolled formatting of the hot paths (issue 36, "Client": no
 * snprintf per job): decimal numbers (src/resp.c), numbers in an argv
 * (src/argv.c) and a script call's head (src/scripts.c) are byte for byte
 * what printf made of them before. No Redis. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "request_private.h"

static const long long samples[] = {0,         1,          9,        10,        -1,       -9,
                                    -10,       99,         100,      12345,     -12345,   1000000,
                                    INT_MAX,   INT_MIN,    LLONG_MAX, LLONG_MIN, LLONG_MAX - 1,
                                    LLONG_MIN + 1, 9999999999LL, -9999999999LL};

TEST(dec_writes_what_printf_writes) {
    for (size_t i = 0; i < sizeof samples / sizeof *samples; i++) {
        char want[32], got[RJQ__DEC_MAX + 8];
        memset(got, 'x', sizeof got);
        snprintf(want, sizeof want, "%lld", samples[i]);
        size_t n = rjq__dec(got, samples[i]);
        ASSERT_EQ(strlen(want), n);
        ASSERT_STREQ(want, got); /* NUL-ended */
        ASSERT(n < RJQ__DEC_MAX);
    }
}

TEST(buf_ll_is_one_bulk_string_of_the_digits) {
    rjq__buf b = {0};
    rjq__buf_ll(&b, -42);
    rjq__buf_ll(&b, LLONG_MIN);
    rjq__buf_ll(&b, 0);
    ASSERT(!b.oom);
    const char *want = "$3\r\n-42\r\n$20\r\n-9223372036854775808\r\n$1\r\n0\r\n";
    ASSERT_EQ(strlen(want), b.len);
    ASSERT(memcmp(want, b.p, b.len) == 0);
    rjq__buf_free(&b);
}

TEST(argv_ll_copies_the_decimal_digits) {
    rjq__argv a;
    rjq__argv_init(&a);
    for (size_t i = 0; i < sizeof samples / sizeof *samples; i++) rjq__argv_ll(&a, samples[i]);
    ASSERT(!a.oom);
    ASSERT_EQ((int)(sizeof samples / sizeof *samples), a.n);
    for (int i = 0; i < a.n; i++) {
        char want[32];
        snprintf(want, sizeof want, "%lld", samples[i]);
        ASSERT_EQ(strlen(want), a.len[i]);
        ASSERT(memcmp(want, a.v[i], a.len[i]) == 0);
    }
    rjq__argv_free(&a);
}

/* Every script's head, FCALL and EVALSHA, as the printf of before made it. */
TEST(script_head_is_the_resp_of_fcall_and_evalsha) {
    static const int nargs[] = {0, 1, 7, 8, 9, 10, 99, 100, 12345};
    for (int s = 0; s < RJQ__SCRIPT_COUNT; s++) {
        const rjq__script_def *d = &rjq__scripts[s];
        for (size_t k = 0; k < sizeof nargs / sizeof *nargs; k++) {
            for (int fcall = 0; fcall < 2; fcall++) {
                char want[256], got[160];
                int wn = fcall ? snprintf(want, sizeof want, "*%d\r\n$5\r\nFCALL\r\n$%zu\r\n%s\r\n",
                                          nargs[k] + 2, strlen(d->function), d->function)
                               : snprintf(want, sizeof want, "*%d\r\n$7\r\nEVALSHA\r\n$40\r\n%s\r\n",
                                          nargs[k] + 2, d->sha);
                int gn = rjq__script_head(s, nargs[k], fcall, got, sizeof got);
                ASSERT_EQ(wn, gn);
                ASSERT(memcmp(want, got, (size_t)gn) == 0);
            }
        }
    }
}
