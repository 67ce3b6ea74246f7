/*
 * Cron expressions (src/cron.c): a table of expressions with a time and
 * the next fire time after it (computed by an independent brute-force
 * scan, minute by minute, of the same rules), and what is refused.
 */
#include <limits.h>
#include <string.h>

#include "cron.h"
#include "harness.h"
#include "rjq.h"

static const struct {
    const char *expr;
    int offset_min;
    long long after, next;
} table[] = {
    {"* * * * *", 0, 1795515330000LL, 1795515360000LL}, /* 2026-11-24T10:15:30 -> 2026-11-24 10:16:00 */
    {"*/15 * * * *", 0, 1795515300000LL, 1795516200000LL}, /* 2026-11-24T10:15:00 -> 2026-11-24 10:30:00 */
    {"0 0 * * *", 0, 1795514400000LL, 1795564800000LL}, /* 2026-11-24T10:00:00 -> 2026-11-25 00:00:00 */
    {"0 9 * * MON-FRI", 0, 1795773600000LL, 1796029200000LL}, /* 2026-11-27T10:00:00 -> 2026-11-30 09:00:00 */
    {"0 0 29 2 *", 0, 1772323200000LL, 1835395200000LL}, /* 2026-03-01T00:00:00 -> 2028-02-29 00:00:00 */
    {"30 4 1,15 * 5", 0, 1795478400000LL, 1795753800000LL}, /* 2026-11-24T00:00:00 -> 2026-11-27 04:30:00 */
    {"30 4 1,15 * 5", 0, 1795755600000LL, 1796099400000LL}, /* 2026-11-27T05:00:00 -> 2026-12-01 04:30:00 */
    {"0 9 * * *", 120, 1795514400000LL, 1795590000000LL}, /* 2026-11-24T10:00:00 -> 2026-11-25 07:00:00 */
    {"0 0 1 * *", -300, 1795514400000LL, 1796101200000LL}, /* 2026-11-24T10:00:00 -> 2026-12-01 05:00:00 */
    {"*/10 * * * * *", 0, 1795515303000LL, 1795515310000LL}, /* 2026-11-24T10:15:03 -> 2026-11-24 10:15:10 */
    {"0 0 1 1 *", 0, 1798761599000LL, 1798761600000LL}, /* 2026-12-31T23:59:59 -> 2027-01-01 00:00:00 */
    {"5/20 * * * *", 0, 1795516200000LL, 1795517100000LL}, /* 2026-11-24T10:30:00 -> 2026-11-24 10:45:00 */
    {"0 12 * JAN,jul sun", 0, 1795478400000LL, 1798977600000LL}, /* 2026-11-24T00:00:00 -> 2027-01-03 12:00:00 */
    {"0 0 * * 7", 0, 1795478400000LL, 1795910400000LL}, /* 2026-11-24T00:00:00 -> 2026-11-29 00:00:00 */
    {"15 14 1 * *", 0, 1793542500000LL, 1796134500000LL}, /* 2026-11-01T14:15:00 -> 2026-12-01 14:15:00 */
    {"0 22 * * 1-5", 0, 1795559807000LL, 1795644000000LL}, /* 2026-11-24T22:36:47 -> 2026-11-25 22:00:00 */
    {"23 0-20/2 * * *", 0, 1795554000000LL, 1795566180000LL}, /* 2026-11-24T21:00:00 -> 2026-11-25 00:23:00 */
    {"0 0 31 * *", 0, 1795478400000LL, 1798675200000LL}, /* 2026-11-24T00:00:00 -> 2026-12-31 00:00:00 */
    {"* * * * * *", 0, 1795515303500LL, 1795515304000LL}, /* 2026-11-24T10:15:03.500 -> 2026-11-24 10:15:04 */
    {"0 0 1 1 *", 840, 1795478400000LL, 1798711200000LL}, /* 2026-11-24T00:00:00 -> 2026-12-31 10:00:00 */
    {"0 0 30 2 *", 0, 1767225600000LL, -1LL},                /* February 30: never */
    /* a day field that starts with "*" is unrestricted (Vixie): both must match */
    {"0 0 */2 * MON", 0, 1795478400000LL, 1796601600000LL},   /* odd day and Monday: Dec 7 */
    {"0 0 1-31/2 * MON", 0, 1795478400000LL, 1795564800000LL}, /* odd day or Monday: Nov 25 */
    {"@hourly", 0, 1795515300000LL, 1795518000000LL},        /* 10:15 -> 11:00 */
    {"@daily", 0, 1795515300000LL, 1795564800000LL},         /* -> 2026-11-25 00:00 */
    {"@weekly", 0, 1795478400000LL, 1795910400000LL},        /* Tue -> Sun 2026-11-29 */
    {"@monthly", 0, 1795478400000LL, 1796083200000LL},       /* -> 2026-12-01 */
    {"@yearly", 0, 1795478400000LL, 1798761600000LL},        /* -> 2027-01-01 */
    {"  0   0 * * *  ", 0, 1795514400000LL, 1795564800000LL}, /* extra spaces */
};

TEST(cron_next_fire_times_match_the_table) {
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        rjq__cron c;
        const char *why = "";
        if (rjq__cron_parse(table[i].expr, &c, &why) != 0)
            FAIL_AT(__FILE__, __LINE__, "\"%s\" refused: %s", table[i].expr, why);
        long long got = rjq__cron_next(&c, table[i].offset_min, table[i].after);
        if (got != table[i].next)
            FAIL_AT(__FILE__, __LINE__, "\"%s\" (offset %d) after %lld: expected %lld, got %lld",
                    table[i].expr, table[i].offset_min, table[i].after, table[i].next, got);
    }
}

/* Fire times follow each other: next(next(t)) > next(t), and every
 * minute of an hour for "* * * * *". */
TEST(cron_fire_times_chain) {
    rjq__cron c;
    const char *why;
    ASSERT_OK(rjq__cron_parse("* * * * *", &c, &why));
    long long t = 1795514400000LL; /* 10:00:00 */
    for (int i = 1; i <= 60; i++) {
        t = rjq__cron_next(&c, 0, t);
        ASSERT_EQ(1795514400000LL + i * 60000LL, t);
    }
    ASSERT_OK(rjq__cron_parse("0 */6 * * *", &c, &why));
    t = 1795514400000LL;
    for (int i = 0; i < 8; i++) {
        long long n = rjq__cron_next(&c, 0, t);
        ASSERT(n > t && (n / 1000) % (6 * 3600) == 0);
        t = n;
    }
}

TEST(cron_refuses_bad_expressions) {
    static const char *const bad[] = {
        "", "* * * *", "* * * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * 32 * *",
        "* * * 0 *", "* * * 13 *", "* * * * 8", "*/0 * * * *", "a * * * *", "1-0 * * * *",
        "1- * * * *", "1,,2 * * * *", "*/x * * * *", "@often", "* * * FOO *", "* * * * MONDAY",
        "61 * * * * *", "5/ * * * *", NULL,
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rjq__cron c;
        const char *why = NULL;
        if (rjq__cron_parse(bad[i], &c, &why) == 0)
            FAIL_AT(__FILE__, __LINE__, "\"%s\" was accepted", bad[i] ? bad[i] : "(null)");
        ASSERT(why != NULL && why[0] != '\0');
    }
}
