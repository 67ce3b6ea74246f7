/* Unit tests for the parsers of replies and messages from Redis: every
 * number and length out of range makes the reply malformed (its request
 * ends with RJQ_EPROTO), never undefined behaviour. No Redis: replies are
 * built here. */
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "rjq.h"
#include "await.h"
#include "monitor.h"
#include "push.h"
#include "schedule.h"
#include "validate.h"
#include "worker.h"

/* ---- building replies ------------------------------------------------------ */

static redisReply *node(int type) {
    redisReply *r = calloc(1, sizeof *r);
    ASSERT(r != NULL);
    r->type = type;
    return r;
}

static redisReply *num(long long v) {
    redisReply *r = node(REDIS_REPLY_INTEGER);
    r->integer = v;
    return r;
}

static redisReply *str(const char *s) {
    redisReply *r = node(REDIS_REPLY_STRING);
    r->len = strlen(s);
    r->str = strdup(s);
    ASSERT(r->str != NULL);
    return r;
}

static redisReply *nil(void) {
    return node(REDIS_REPLY_NIL);
}

/* An array of n elements (given after n). */
static redisReply *arr(size_t n, ...) {
    redisReply *r = node(REDIS_REPLY_ARRAY);
    r->elements = n;
    r->element = calloc(n ? n : 1, sizeof *r->element);
    ASSERT(r->element != NULL);
    va_list ap;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++) r->element[i] = va_arg(ap, redisReply *);
    va_end(ap);
    return r;
}

static void reply_free(redisReply *r) {
    if (r == NULL) return;
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) reply_free(r->element[i]);
    free(r->element);
    free(r->str);
    free(r);
}

/* A claim's reply with one job (claim.lua's form, in runs): next due,
 * registered, token, deadline, then the run: 1 job, attempt, max
 * attempts, wait, then the job's id and payload. */
static redisReply *claim_reply(long long next, long long deadline, redisReply *payload,
                               long long attempt, long long max) {
    return arr(10, num(next), num(0), str("c1.2.3"), num(deadline), num(1), num(attempt), num(max),
               num(attempt == 1 ? 250 : -1), str("job-1"), payload);
}

/* ---- claim replies ---------------------------------------------------------- */

/* The fuzzing proxy's find: a claim reply whose deadline is INT64_MIN
 * made on_claimed compute `deadline - lease_ms` (signed overflow). Such a
 * reply is malformed: the claim ends with RJQ_EPROTO. */
TEST(claim_reply_with_a_deadline_of_int64_min_is_malformed) {
    redisReply *r = claim_reply(-1, LLONG_MIN, str("payload"), 1, 3);
    ASSERT_EQ(0, rjq__claim_reply_ok(r, 1, 0));
    reply_free(r);
    r = arr(4, num(-1), num(1), str("c1.2.3"), num(LLONG_MIN)); /* an empty claim too */
    ASSERT_EQ(0, rjq__claim_reply_ok(r, 1, 0));
    reply_free(r);
}

TEST(claim_reply_in_range_is_read) {
    redisReply *r = claim_reply(-1, 1700000000000LL, str("payload"), 2, 5);
    ASSERT_EQ(1, rjq__claim_reply_ok(r, 1, 0));
    rjq__pushed d;
    rjq__claim_at at = {0};
    ASSERT_EQ(1, (long)rjq__claim_reply_count(r));
    ASSERT_EQ(0, rjq__claim_reply_job(r, &at, &d));
    ASSERT_EQ(5, d.idlen);
    ASSERT(memcmp(d.id, "job-1", 5) == 0);
    ASSERT_EQ(6, d.toklen);
    ASSERT_EQ(7, d.len);
    ASSERT_EQ(2, d.attempt);
    ASSERT_EQ(5, d.max_attempts);
    ASSERT_EQ(-1, d.wait_ms); /* a later run: no wait */
    ASSERT_EQ(1700000000000LL, d.deadline);
    reply_free(r);
    /* a payload left out (nil: read later); paused (-2); the next job due */
    r = claim_reply(-2, 1700000000000LL, nil(), 1, 3);
    ASSERT_EQ(1, rjq__claim_reply_ok(r, 1, 0));
    at = (rjq__claim_at){0};
    ASSERT_EQ(1, rjq__claim_reply_job(r, &at, &d));
    ASSERT_EQ(250, d.wait_ms);
    reply_free(r);
    r = arr(4, num(1500), num(2), str("c1.2.3"), num(1700000000000LL));
    ASSERT_EQ(1, rjq__claim_reply_ok(r, 2, 0));
    reply_free(r);
}

/* A sharded queue's worker's short claim registers its extra slots too
 * (claim.lua ARGV 11), no more; a filled claim registers none. */
TEST(claim_reply_registers_at_most_the_unfilled_and_extra_slots) {
    redisReply *r = arr(4, num(-1), num(8), str("c1.2.3"), num(1700000000000LL));
    ASSERT_EQ(1, rjq__claim_reply_ok(r, 1, 7));
    ASSERT_EQ(0, rjq__claim_reply_ok(r, 1, 6));
    ASSERT_EQ(0, rjq__claim_reply_ok(r, 1, 0));
    reply_free(r);
    r = arr(10, num(-1), num(1), str("c1.2.3"), num(1700000000000LL), num(1), num(1), num(3), num(250),
            str("job-1"), str("p"));
    ASSERT_EQ(0, rjq__claim_reply_ok(r, 1, 7)); /* filled: nothing registered */
    reply_free(r);
}

/* A claim's jobs come in runs (claim.lua ARGV 10 of 2 or 3): each job
 * reads its own run's attempt, max attempts and wait, in order. */
TEST(claim_reply_in_runs_gives_each_job_its_runs_values) {
    redisReply *r = arr(18, num(-1), num(0), str("c1.2.3"), num(1700000000000LL), num(2), num(1), num(3),
                        num(40), str("a"), str("pa"), str("b"), nil(), num(1), num(2), str("5\nh: v"),
                        num(-1), str("c"), str("pc"));
    ASSERT_EQ(1, rjq__claim_reply_ok(r, 3, 0));
    ASSERT_EQ(0, rjq__claim_reply_ok(r, 2, 0)); /* more jobs than asked */
    ASSERT_EQ(3, (long)rjq__claim_reply_count(r));
    rjq__claim_at at = {0};
    rjq__pushed d;
    ASSERT_EQ(0, rjq__claim_reply_job(r, &at, &d));
    ASSERT(d.idlen == 1 && d.id[0] == 'a' && d.len == 2 && d.attempt == 1 && d.max_attempts == 3);
    ASSERT(d.wait_ms == 40 && d.hlen == 0);
    ASSERT_EQ(1, rjq__claim_reply_job(r, &at, &d)); /* (its payload left out) */
    ASSERT(d.id[0] == 'b' && d.attempt == 1 && d.max_attempts == 3 && d.wait_ms == 40);
    ASSERT_EQ(0, rjq__claim_reply_job(r, &at, &d));
    ASSERT(d.id[0] == 'c' && d.attempt == 2 && d.max_attempts == 5 && d.wait_ms == -1);
    ASSERT(d.hlen == 4 && memcmp(d.headers, "h: v", 4) == 0);
    ASSERT_EQ(6, d.toklen);
    reply_free(r);
}

TEST(claim_reply_numbers_out_of_range_are_malformed) {
    static const struct {
        long long next, deadline, attempt, max;
    } bad[] = {
        {-3, 1700000000000LL, 1, 3},          /* next due below -2 */
        {LLONG_MIN, 1700000000000LL, 1, 3},
        {LLONG_MAX, 1700000000000LL, 1, 3},   /* next due beyond any time */
        {-1, 0, 1, 3},                        /* no deadline */
        {-1, -1, 1, 3},
        {-1, LLONG_MAX, 1, 3},                /* deadline + lease would overflow */
        {-1, (1LL << 62) + 1, 1, 3},
        {-1, 1700000000000LL, -1, 3},         /* attempts */
        {-1, 1700000000000LL, LLONG_MIN, 3},
        {-1, 1700000000000LL, 1LL << 32, 3},  /* (int) would wrap */
        {-1, 1700000000000LL, 1, -1},
        {-1, 1700000000000LL, 1, LLONG_MAX},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        redisReply *r = claim_reply(bad[i].next, bad[i].deadline, str("p"), bad[i].attempt, bad[i].max);
        if (rjq__claim_reply_ok(r, 1, 0) != 0)
            FAIL_AT(__FILE__, __LINE__, "case %zu accepted", i);
        reply_free(r);
    }
    /* registered beyond the slots left, more jobs than asked, a token no
     * job handle holds, an empty id, wrong types */
    redisReply *r = arr(4, num(-1), num(-1), str("c1.2.3"), num(1700000000000LL));
    ASSERT_EQ(0, rjq__claim_reply_ok(r, 1, 0));
    reply_free(r);
    r = arr(4, num(-1), num(LLONG_MAX), str("c1.2.3"), num(1700000000000LL));
    ASSERT_EQ(0, rjq__claim_reply_ok(r, 1, 0));
    reply_free(r);
    r = claim_reply(-1, 1700000000000LL, str("p"), 1, 3);
    ASSERT_EQ(0, rjq__claim_reply_ok(r, 0, 0));
    reply_free(r);
    char tok[80];
    memset(tok, 'x', sizeof tok - 1);
    tok[sizeof tok - 1] = '\0';
    r = arr(4, num(-1), num(0), str(tok), num(1700000000000LL));
    ASSERT_EQ(0, rjq__claim_reply_ok(r, 1, 0));
    reply_free(r);
    r = arr(4, num(-1), num(0), str(""), num(1700000000000LL));
    ASSERT_EQ(0, rjq__claim_reply_ok(r, 1, 0));
    reply_free(r);
    r = arr(10, num(-1), num(0), str("c1.2.3"), num(1700000000000LL), num(1), num(1), num(3), num(-1), str(""), str("p"));
    ASSERT_EQ(0, rjq__claim_reply_ok(r, 1, 0));
    reply_free(r);
    r = arr(10, num(-1), num(0), str("c1.2.3"), num(1700000000000LL), num(1), num(1), num(3), num(-1), num(7), str("p"));
    ASSERT_EQ(0, rjq__claim_reply_ok(r, 1, 0));
    reply_free(r);
    r = arr(9, num(-1), num(0), str("c1.2.3"), num(1700000000000LL), num(1), num(1), num(3), num(-1), str("j")); /* (a run cut short) */
    ASSERT_EQ(0, rjq__claim_reply_ok(r, 1, 0));
    reply_free(r);
    r = arr(7, num(-1), num(0), str("c1.2.3"), num(1700000000000LL), num(1), num(1), num(3)); /* (a run's head cut short) */
    ASSERT_EQ(0, rjq__claim_reply_ok(r, 1, 0));
    reply_free(r);
    r = arr(10, num(-1), num(0), str("c1.2.3"), num(1700000000000LL), num(0), num(1), num(3), num(-1), str("j"), str("p")); /* (a run of no job) */
    ASSERT_EQ(0, rjq__claim_reply_ok(r, 1, 0));
    reply_free(r);
    r = arr(14, num(-1), num(0), str("c1.2.3"), num(1700000000000LL), num(2), num(1), num(3), num(-1), str("j"), str("p"), str("k"), str("p"),
            num(7), num(1)); /* (more jobs than the runs' counts) */
    ASSERT_EQ(0, rjq__claim_reply_ok(r, 2, 0));
    reply_free(r);
    r = arr(9, num(-1), num(0), str("c1.2.3"), num(1700000000000LL), str("j"), str("p"), num(1),
            num(3), num(-1)); /* (five values a job: the form without runs) */
    ASSERT_EQ(0, rjq__claim_reply_ok(r, 1, 0));
    reply_free(r);
    /* the wait: -1 (not known) .. 2^62 */
    r = arr(10, num(-1), num(0), str("c1.2.3"), num(1700000000000LL), num(1), num(1), num(3), num(-2), str("j"), str("p"));
    ASSERT_EQ(0, rjq__claim_reply_ok(r, 1, 0));
    reply_free(r);
    r = arr(10, num(-1), num(0), str("c1.2.3"), num(1700000000000LL), num(1), num(1), num(3), num(RJQ__TIME_MAX + 1), str("j"),
            str("p"));
    ASSERT_EQ(0, rjq__claim_reply_ok(r, 1, 0));
    reply_free(r);
    r = str("OK");
    ASSERT_EQ(0, rjq__claim_reply_ok(r, 1, 0));
    reply_free(r);
}

/* ---- numbers in strings ------------------------------------------------------- */

static int ll(const char *s, long long lo, long long hi, long long *out) {
    return rjq__parse_ll(s, strlen(s), lo, hi, out);
}

TEST(decimal_strings_out_of_range_or_not_numbers_are_malformed) {
    long long v = 7;
    ASSERT_EQ(0, ll("0", 0, 10, &v));
    ASSERT_EQ(0, v);
    ASSERT_EQ(0, ll("-9223372036854775808", LLONG_MIN, LLONG_MAX, &v));
    ASSERT(v == LLONG_MIN);
    ASSERT_EQ(0, ll("9223372036854775807", LLONG_MIN, LLONG_MAX, &v));
    ASSERT(v == LLONG_MAX);
    static const char *bad[] = {"", "-", "+1", " 1", "1 ", "1x", "0x10", "9223372036854775808",
                                "-9223372036854775809", "99999999999999999999999", "11", "-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        long long lo = i < 10 ? LLONG_MIN : 0, hi = i < 10 ? LLONG_MAX : 10;
        v = 7;
        if (ll(bad[i], lo, hi, &v) != -1 || v != 7)
            FAIL_AT(__FILE__, __LINE__, "\"%s\" accepted", bad[i]);
    }
}

/* ---- push messages -------------------------------------------------------------- */

static int push(const char *msg, rjq__push_head *h, rjq__pushed **jobs) {
    return rjq__push_parse(msg, strlen(msg), h, jobs);
}

TEST(push_message_numbers_out_of_range_are_malformed) {
    rjq__push_head h;
    rjq__pushed *jobs;
    ASSERT_EQ(RJQ_OK, push("3 1 1 c1.3.9 1700000000000\n2 3 1 3 7\njbabc", &h, &jobs));
    ASSERT_EQ(3, h.worker);
    ASSERT_EQ(1, h.n);
    ASSERT_EQ(1700000000000LL, jobs[0].deadline);
    ASSERT_EQ(7, jobs[0].wait_ms);
    ASSERT(memcmp(jobs[0].payload, "abc", 3) == 0);
    ASSERT_EQ(0, h.check);
    ASSERT_EQ(0, jobs[0].check);
    free(jobs);
    /* an unconfirmed push: " ?" after the deadline */
    ASSERT_EQ(RJQ_OK, push("3 1 1 c1.3.9 1700000000000 ?\n2 3 1 3 7\njbabc", &h, &jobs));
    ASSERT_EQ(1, h.check);
    ASSERT_EQ(1, jobs[0].check);
    ASSERT_EQ(1700000000000LL, jobs[0].deadline);
    ASSERT(memcmp(jobs[0].payload, "abc", 3) == 0);
    free(jobs);
    ASSERT_EQ(RJQ_OK, push("3 1 1 c1.3.9 1700000000000\n2 - 2 3 -\njb", &h, &jobs));
    ASSERT_EQ(-1, jobs[0].wait_ms); /* not known */
    ASSERT(jobs[0].payload == NULL);
    free(jobs);
    static const char *bad[] = {
        "3 1 1 c1.3.9 1700000000000 x\n2 3 1 3 7\njbabc",       /* not " ?" */
        "3 1 1 c1.3.9 1700000000000  ?\n2 3 1 3 7\njbabc",
        "3 1 1 c1.3.9 1700000000000 ??\n2 3 1 3 7\njbabc",
        "3 1 1 c1.3.9 0 ?\n2 3 1 3 7\njbabc",
        "3 1 1 c1.3.9 ?\n2 3 1 3 7\njbabc",
        "3 1 1 c1.3.9 0\n2 3 1 3 7\njbabc",                       /* no deadline */
        "3 1 1 c1.3.9 4611686018427387905\n2 3 1 3 7\njbabc",     /* past 2^62 */
        "3 1 1 c1.3.9 18446744073709551616\n2 3 1 3 7\njbabc",    /* past 2^64 */
        "3 1 1 c1.3.9 -1\n2 3 1 3 7\njbabc",
        "3 1 1 c1.3.9 1700000000000\n2 4 1 3 7\njbabc",          /* payload past the end */
        "3 1 1 c1.3.9 1700000000000\n2 18446744073709551615 1 3 7\njbabc",
        "3 1 1 c1.3.9 1700000000000\n2 3 1000001 3 7\njbabc",    /* attempts */
        "3 1 1 c1.3.9 1700000000000\n2 3 1 4294967296 7\njbabc",
        "3 1 1 c1.3.9 1700000000000\n0 3 1 3 7\nabc",             /* empty id */
        "3 1 2 c1.3.9 1700000000000\n2 3 1 3 7\njbabc",          /* fewer jobs than said */
        "3 1 99 c1.3.9 1700000000000\n2 3 1 3 7\njbabc",         /* more than the bytes */
        "3 1 1 c1.3.9 1700000000000\n2 2 1 3 7\njbabc",          /* bytes left over */
        "3 1 1 c1.3.9 1700000000000\n2 3 1 3\njbabc",            /* no wait */
        "3 1 1 c1.3.9 1700000000000\n2 3 1 3 4611686018427387905\njbabc", /* wait past 2^62 */
        "3 1 1 c1.3.9 1700000000000\n2 3 1 3 -1\njbabc",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        jobs = (rjq__pushed *)&h;
        if (push(bad[i], &h, &jobs) != RJQ_EPROTO || jobs != NULL)
            FAIL_AT(__FILE__, __LINE__, "\"%s\" accepted", bad[i]);
    }
    rjq__push_notice n;
    ASSERT_EQ(RJQ_OK, rjq__push_parse_notice("!cancel c1.3.9 job", 18, &n));
    ASSERT_EQ(3, n.worker);
    ASSERT_EQ(RJQ_EJOBCANCELED, n.reason);
    ASSERT_EQ(RJQ_OK, rjq__push_parse_notice("!timeout c1.4.9 job", 19, &n));
    ASSERT_EQ(4, n.worker);
    ASSERT_EQ(RJQ_ETIMEDOUT, n.reason);
    ASSERT_EQ(RJQ_EPROTO, rjq__push_parse_notice("!later c1.3.9 job", 17, &n));
    ASSERT_EQ(1, rjq__push_parse_notice("!cancel c1.99999999999999999999999.9 job", 40, &n));
    ASSERT_EQ(RJQ_EPROTO, rjq__push_parse_notice("!cancel c1.3.9", 14, &n));
}

TEST(push_message_payloads_that_follow_are_announced_with_their_length) {
    /* push format 8: "><length>": the payload comes as a message of its own */
    rjq__push_head h;
    rjq__pushed *jobs;
    ASSERT_EQ(RJQ_OK, push("3 1 2 c1.3.9 1700000000000\n2 >4096 1 3 7\njb2 3 1 3+2 -\njchhabc",
                           &h, &jobs));
    ASSERT_EQ(2, h.n);
    ASSERT_EQ(1, h.follow);
    ASSERT(jobs[0].payload == NULL);
    ASSERT_EQ(4096, jobs[0].len);
    ASSERT(memcmp(jobs[0].id, "jb", 2) == 0);
    ASSERT(memcmp(jobs[1].payload, "abc", 3) == 0);
    ASSERT(memcmp(jobs[1].headers, "hh", 2) == 0);
    free(jobs);
    /* the old format (7), one message, still reads: nothing follows */
    ASSERT_EQ(RJQ_OK, push("3 1 1 c1.3.9 1700000000000\n2 3 1 3 7\njbabc", &h, &jobs));
    ASSERT_EQ(0, h.follow);
    free(jobs);
    static const char *bad[] = {
        "3 1 1 c1.3.9 1700000000000\n2 >0 1 3 7\njb",         /* an empty payload never follows */
        "3 1 1 c1.3.9 1700000000000\n2 > 1 3 7\njb",
        "3 1 1 c1.3.9 1700000000000\n2 >-3 1 3 7\njb",
        "3 1 1 c1.3.9 1700000000000\n2 >536870913 1 3 7\njb", /* past Redis' longest string */
        "3 1 1 c1.3.9 1700000000000\n2 >18446744073709551615 1 3 7\njb",
        "3 1 1 c1.3.9 1700000000000\n2 >3 1 3 7\njbabc",      /* its bytes here too: left over */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (push(bad[i], &h, &jobs) != RJQ_EPROTO || jobs != NULL)
            FAIL_AT(__FILE__, __LINE__, "\"%s\" accepted", bad[i]);
    }
}

/* ---- outcome and event messages --------------------------------------------------- */

TEST(framed_outcome_lengths_past_the_message_are_malformed) {
    char kind[16];
    const char *key, *body;
    size_t klen, blen;
    const char ok[] = "done 3 2\nkeyok";
    ASSERT_EQ(sizeof ok - 1, rjq__await_parse_framed(ok, sizeof ok - 1, kind, sizeof kind, &key,
                                                     &klen, &body, &blen));
    ASSERT_STREQ("done", kind);
    ASSERT_EQ(2, blen);
    static const char *bad[] = {"done 3 3\nkeyok", "done 4 2\nkeyok",
                                "done 18446744073709551615 1\nkeyok",
                                "done 1 18446744073709551615\nkeyok",
                                "done 184467440737095516150 1\nkeyok", "done -1 2\nkeyok",
                                "done 3 2", "done"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (rjq__await_parse_framed(bad[i], strlen(bad[i]), kind, sizeof kind, &key, &klen, &body,
                                    &blen) != 0)
            FAIL_AT(__FILE__, __LINE__, "\"%s\" accepted", bad[i]);
}

TEST(event_times_out_of_range_are_malformed) {
    char ev[RJQ__EVENT_MAX + 1], id[RJQ_JOB_ID_MAX + 1];
    long long t = 7;
    ASSERT_EQ(0, rjq__event_parse("completed j1 1700000000000", 26, ev, id, &t));
    ASSERT_STREQ("completed", ev);
    ASSERT_STREQ("j1", id);
    ASSERT_EQ(1700000000000LL, t);
    ASSERT_EQ(0, rjq__event_parse("completed j1", 12, ev, id, &t)); /* an older rjq's */
    ASSERT_EQ(0, t);
    static const char *bad[] = {"completed j1 9223372036854775807", "completed j1 -1",
                                "completed j1 4611686018427387905", "completed j1 ",
                                "completed j1 12x", "completedcompleted j1 1", " j1 1", "completed"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (rjq__event_parse(bad[i], strlen(bad[i]), ev, id, &t) != -1)
            FAIL_AT(__FILE__, __LINE__, "\"%s\" accepted", bad[i]);
    /* found by fuzz_event_message: a NUL cut the name (or id) short */
    ASSERT_EQ(-1, rjq__event_parse("\0ompleted j1 1", 15, ev, id, &t));
    ASSERT_EQ(-1, rjq__event_parse("completed j\0 1", 15, ev, id, &t));
}

/* ---- stored schedules ---------------------------------------------------------- */

/* A spec is read back from Redis: numbers outside what rjq_schedule_set
 * accepts made the scheduler overflow (now - catchup_ms with INT64_MIN). */
TEST(schedule_specs_with_numbers_out_of_range_are_not_specs) {
    rjq__spec sp;
    ASSERT_EQ(0, rjq__schedule_parse("60000 0 60000 skip - -", &sp));
    ASSERT_EQ(0, rjq__schedule_parse("0 -60 60000 once - */5 * * * *", &sp));
    static const char *bad[] = {
        "60000 0 -9223372036854775808 skip - -",   /* catch-up */
        "60000 0 -1 skip - -",
        "60000 0 9223372036854775807 skip - -",
        "-60000 0 60000 skip - -",                 /* every */
        "9223372036854775807 0 60000 skip - -",
        "60000 2147483647 60000 skip - -",         /* UTC offset */
        "0 -1441 60000 skip - * * * * *",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (rjq__schedule_parse(bad[i], &sp) != -1)
            FAIL_AT(__FILE__, __LINE__, "\"%s\" accepted", bad[i]);
    /* and times no reply may give have no next fire time */
    ASSERT_EQ(0, rjq__schedule_parse("0 0 60000 skip - * * * * *", &sp));
    ASSERT_EQ(-1, rjq__schedule_after(&sp, LLONG_MIN));
    ASSERT_EQ(-1, rjq__schedule_after(&sp, LLONG_MAX));
    ASSERT(rjq__schedule_after(&sp, 1700000000000LL) > 1700000000000LL);
}
