/* Reply objects in few blocks (src/replyarena.c): hiredis' reader builds
 * with them the same redisReply trees it builds by default (nested
 * arrays, strings short and long, integers, nil, status and error
 * replies, replies fed in pieces); a long string can be taken over and is
 * then not freed with its reply; an allocation failure anywhere is the
 * reader's out-of-memory error, nothing leaked (ASan's and valgrind's
 * passes check that). No Redis. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "compat.h"
#include "failalloc.h"
#include "harness.h"
#include "replyarena.h"

/* A reply of every kind: ["id", <1000 x 'p'>, 7, nil, ["in", -3, []], +OK]
 * then -ERR bad, :42, $-1, a long bulk alone. */
static char *sample(size_t *len) {
    static char buf[4096];
    char big[1001];
    memset(big, 'p', 1000);
    big[1000] = '\0';
    int n = snprintf(buf, sizeof buf,
                     "*6\r\n$2\r\nid\r\n$1000\r\n%s\r\n:7\r\n$-1\r\n*3\r\n$2\r\nin\r\n:-3\r\n*0\r\n"
                     "+OK\r\n-ERR bad\r\n:42\r\n$-1\r\n$1000\r\n%s\r\n",
                     big, big);
    *len = (size_t)n;
    return buf;
}

static redisReader *arena_reader(void) {
    redisReader *r = redisReaderCreate();
    redisContext fake;
    memset(&fake, 0, sizeof fake);
    fake.reader = r;
    rjq__reply_arena_use(&fake); /* (what conn.c does to each context) */
    return r;
}

static void check_first(redisReply *a) {
    ASSERT_EQ(REDIS_REPLY_ARRAY, a->type);
    ASSERT_EQ(6, (int)a->elements);
    ASSERT_EQ(REDIS_REPLY_STRING, a->element[0]->type);
    ASSERT_STREQ("id", a->element[0]->str);
    ASSERT_EQ(2, (int)a->element[0]->len);
    ASSERT_EQ(REDIS_REPLY_STRING, a->element[1]->type);
    ASSERT_EQ(1000, (int)a->element[1]->len);
    ASSERT(a->element[1]->str[0] == 'p' && a->element[1]->str[999] == 'p' &&
           a->element[1]->str[1000] == '\0');
    ASSERT_EQ(REDIS_REPLY_INTEGER, a->element[2]->type);
    ASSERT_EQ(7, (int)a->element[2]->integer);
    ASSERT_EQ(REDIS_REPLY_NIL, a->element[3]->type);
    redisReply *in = a->element[4];
    ASSERT_EQ(REDIS_REPLY_ARRAY, in->type);
    ASSERT_EQ(3, (int)in->elements);
    ASSERT_STREQ("in", in->element[0]->str);
    ASSERT_EQ(-3, (int)in->element[1]->integer);
    ASSERT_EQ(REDIS_REPLY_ARRAY, in->element[2]->type);
    ASSERT_EQ(0, (int)in->element[2]->elements);
    ASSERT_EQ(REDIS_REPLY_STATUS, a->element[5]->type);
    ASSERT_STREQ("OK", a->element[5]->str);
}

/* The whole sample at once, then byte by byte: the same trees. */
TEST(arena_replies_have_hiredis_shape_whole_or_in_pieces) {
    size_t len;
    const char *s = sample(&len);
    for (int pieces = 0; pieces < 2; pieces++) {
        redisReader *r = arena_reader();
        void *reps[6] = {0};
        int got = 0;
        for (size_t at = 0; at < len;) {
            size_t step = pieces ? 1 : len;
            ASSERT_EQ(REDIS_OK, redisReaderFeed(r, s + at, step));
            at += step;
            void *rep;
            while (redisReaderGetReply(r, &rep) == REDIS_OK && rep) {
                ASSERT(got < 5);
                reps[got++] = rep;
            }
            ASSERT_EQ(0, r->err);
        }
        ASSERT_EQ(5, got);
        check_first(reps[0]);
        redisReply *e = reps[1], *i = reps[2], *nil = reps[3], *lone = reps[4];
        ASSERT_EQ(REDIS_REPLY_ERROR, e->type);
        ASSERT_STREQ("ERR bad", e->str);
        ASSERT_EQ(REDIS_REPLY_INTEGER, i->type);
        ASSERT_EQ(42, (int)i->integer);
        ASSERT_EQ(REDIS_REPLY_NIL, nil->type);
        ASSERT_EQ(REDIS_REPLY_STRING, lone->type);
        ASSERT_EQ(1000, (int)lone->len);
        for (int k = 0; k < got; k++) r->fn->freeObject(reps[k]);
        redisReaderFree(r);
    }
}

/* A long string taken over outlives its reply; a short one is not taken. */
TEST(arena_long_string_taken_over_outlives_its_reply) {
    size_t len;
    const char *s = sample(&len);
    redisReader *r = arena_reader();
    ASSERT_EQ(REDIS_OK, redisReaderFeed(r, s, len));
    void *rep;
    ASSERT_EQ(REDIS_OK, redisReaderGetReply(r, &rep));
    redisReply *a = rep;
    ASSERT(rjq__reply_take_str(a->element[0]) == NULL); /* short: copy it */
    ASSERT_STREQ("id", a->element[0]->str);
    char *p = rjq__reply_take_str(a->element[1]);
    ASSERT(p != NULL);
    ASSERT(a->element[1]->str == NULL && a->element[1]->len == 0);
    ASSERT(rjq__reply_take_str(a->element[2]) == NULL); /* not a string */
    r->fn->freeObject(rep);
    ASSERT_EQ(1000, (int)strlen(p));
    ASSERT(p[0] == 'p' && p[999] == 'p');
    rjq__hi_free(p);
    /* the rest of the sample: the lone long string (a root) taken too */
    int roots = 0;
    while (redisReaderGetReply(r, &rep) == REDIS_OK && rep) {
        redisReply *x = rep;
        char *q = x->type == REDIS_REPLY_STRING ? rjq__reply_take_str(x) : NULL;
        r->fn->freeObject(rep);
        if (q) {
            ASSERT_EQ(1000, (int)strlen(q));
            rjq__hi_free(q);
            roots++;
        }
    }
    ASSERT_EQ(1, roots);
    redisReaderFree(r);
}

/* Every allocation of the arena failing in turn: the reader reports out
 * of memory (or, past the last one, the replies are whole), and nothing
 * leaks (the sanitizer and valgrind passes). */
TEST(arena_allocation_failures_are_the_readers_oom_and_leak_nothing) {
    size_t len;
    const char *s = sample(&len);
    for (long n = 0;; n++) {
        redisReader *r = arena_reader();
        ASSERT_EQ(REDIS_OK, redisReaderFeed(r, s, len));
        void *rep = NULL;
        int whole = 0;
        failalloc_arm_once(n);
        while (redisReaderGetReply(r, &rep) == REDIS_OK && rep) {
            if (whole == 0) check_first(rep);
            whole++;
            r->fn->freeObject(rep);
            rep = NULL;
        }
        failalloc_disarm();
        int failed = failalloc_failures() > 0;
        if (failed) ASSERT(r->err != 0 && whole < 5);
        else ASSERT(r->err == 0 && whole == 5);
        redisReaderFree(r);
        if (!failed) break;
        ASSERT(n < 200);
    }
}
