/* The hand-rolled formatting of the hot paths (issue 36, "Client": no
 * snprintf per job): decimal numbers (src/resp.c), numbers in an argv
 * (src/argv.c) and a script call's head (src/scripts.c) are byte for byte
 * what printf made of them before; a whole command (rjq__resp_command) is
 * byte for byte what hiredis' redisFormatCommandArgv makes. No Redis. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "compat.h"
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

/* rjq__resp_command(argc, argv, lens) against hiredis' own
 * redisFormatCommandArgv: the same bytes, the same length, NUL-ended. */
static void same_as_hiredis(int argc, const char **argv, const size_t *lens) {
    char *want = NULL, *got = (char *)1;
    rjq__fmtlen wn = redisFormatCommandArgv(&want, argc, argv, lens);
    long long gn = rjq__resp_command(&got, argc, argv, lens);
    ASSERT(wn > 0 && want != NULL);
    ASSERT(got != NULL);
    ASSERT_EQ((long long)wn, gn);
    ASSERT(memcmp(want, got, (size_t)gn) == 0);
    ASSERT_EQ('\0', got[gn]);
    redisFreeCommand(want);
    free(got);
}

TEST(resp_command_is_byte_for_byte_hiredis_format) {
    const char *one[] = {"PING"};
    same_as_hiredis(1, one, NULL);
    /* binary: NUL, CR, LF, '$' and '*' inside, and an empty argument */
    const char bin[] = {'a', '\0', '\r', '\n', '$', '*', '\r', '\n', '\0'};
    const char *argv[] = {"HMGET", "rjq:{q}:job:1", bin, "", "x"};
    size_t lens[] = {5, 13, sizeof bin, 0, 1};
    same_as_hiredis(5, argv, lens);
    /* arguments of lengths around each digit boundary, and counts too */
    static char big[100001];
    memset(big, 'v', sizeof big);
    const size_t sizes[] = {9, 10, 11, 99, 100, 101, 999, 1000, 9999, 10000, 16384, 99999, 100000};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        const char *a[2] = {"SET", big};
        size_t l[2] = {3, sizes[i]};
        same_as_hiredis(2, a, l);
    }
    for (int n = 1; n <= 1001; n += (n < 12 ? 1 : 99)) {
        const char **a = malloc((size_t)n * sizeof *a);
        size_t *l = malloc((size_t)n * sizeof *l);
        ASSERT(a && l);
        for (int k = 0; k < n; k++) {
            a[k] = big;
            l[k] = (size_t)(k % 13);
        }
        same_as_hiredis(n, a, l);
        free(a);
        free(l);
    }
}

TEST(resp_command_of_a_large_value) {
    size_t n = (8u << 20) + 3; /* 8 MiB and a bit: a length of 7 digits */
    char *v = malloc(n);
    ASSERT(v != NULL);
    for (size_t i = 0; i < n; i++) v[i] = (char)(i * 31);
    const char *argv[] = {"SET", "k", v};
    size_t lens[] = {3, 1, n};
    same_as_hiredis(3, argv, lens);
    char *got;
    long long len = rjq__resp_command(&got, 3, argv, lens);
    const char *head = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$8388611\r\n";
    ASSERT_EQ((long long)(strlen(head) + n + 2), len);
    ASSERT(memcmp(got, head, strlen(head)) == 0);
    ASSERT(memcmp(got + strlen(head), v, n) == 0);
    ASSERT(memcmp(got + len - 2, "\r\n", 2) == 0);
    free(got);
    free(v);
}

TEST(resp_command_refuses_a_negative_count_and_writes_nothing) {
    char *got = (char *)1;
    ASSERT_EQ(-1, rjq__resp_command(&got, -1, NULL, NULL));
    ASSERT(got == NULL);
    ASSERT_EQ(4, rjq__resp_command(&got, 0, NULL, NULL)); /* "*0\r\n", as hiredis */
    ASSERT_STREQ("*0\r\n", got);
    free(got);
}
