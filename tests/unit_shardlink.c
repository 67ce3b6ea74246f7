/*
 * The sharded pub/sub link without a server: its book and reply
 * dispatcher (src/ssbook.c) on replies made by hiredis' own reader from
 * RESP bytes, allocation failures in the book, and the link's connect
 * timeout and reconnect backoff in virtual time (rjq__clock_set,
 * tests/vclock.h): a loop glue of the test's own records the one
 * timer the client asks for and the sockets the link asks to watch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "core.h"
#include "failalloc.h"
#include "harness.h"
#include "rjq.h"
#include "server.h"
#include "shardlink.h"
#include "ssbook.h"
#include "vclock.h"

/* ---- replies from RESP bytes ------------------------------------------- */

static redisReply *reply_of(const char *resp, size_t len) {
    redisReader *rd = redisReaderCreate();
    ASSERT(rd != NULL);
    ASSERT(redisReaderFeed(rd, resp, len) == REDIS_OK);
    void *r = NULL;
    ASSERT(redisReaderGetReply(rd, &r) == REDIS_OK);
    ASSERT(r != NULL);
    redisReaderFree(rd);
    return r;
}

/* Feed one reply (a C string of RESP) to the book; the outcome's kind. */
static int feed(rjq__ssbook *b, const char *resp, rjq__ssout *out) {
    redisReply *r = reply_of(resp, strlen(resp));
    rjq__ssbook_reply(b, r, out);
    int kind = out->kind;
    /* (the outcome points into the reply: copy what the test checks) */
    static char ch[64], data[64], detail[128];
    if (out->channel) snprintf(ch, sizeof ch, "%.*s", (int)out->chlen, out->channel);
    if (out->data) snprintf(data, sizeof data, "%.*s", (int)out->len, out->data);
    if (out->detail) snprintf(detail, sizeof detail, "%s", out->detail);
    rjq__ssbook_out_done(b, out);
    out->channel = out->channel ? ch : NULL;
    out->data = out->data ? data : NULL;
    out->detail = out->detail ? detail : NULL;
    freeReplyObject(r);
    return kind;
}

static rjq__ssch *want_sent(rjq__ssbook *b, const char *ch) {
    rjq__ssch *e = rjq__ssbook_want(b, ch, strlen(ch));
    ASSERT(e != NULL);
    ASSERT(rjq__ssbook_needs_sub(e));
    ASSERT_OK(rjq__ssbook_push(b, RJQ__SSCMD_SUB, e, 0));
    ASSERT(!rjq__ssbook_needs_sub(e));
    return e;
}

TEST(ssbook_replies_find_their_commands_and_pushes_their_channels) {
    rjq__ssbook b;
    rjq__ssout o;
    rjq__ssbook_init(&b);
    ASSERT_OK(rjq__ssbook_push(&b, RJQ__SSCMD_SETUP, NULL, 7));
    ASSERT_EQ(RJQ__SSOUT_SETUP_OK, feed(&b, "+OK\r\n", &o));
    ASSERT_EQ(7, o.step);
    ASSERT_OK(rjq__ssbook_push(&b, RJQ__SSCMD_SETUP, NULL, 8));
    ASSERT_EQ(RJQ__SSOUT_SETUP_ERROR, feed(&b, "-NOPERM no\r\n", &o));
    ASSERT_EQ(8, o.step);
    ASSERT_STREQ("NOPERM no", o.detail);

    want_sent(&b, "{q}a");
    ASSERT_EQ(RJQ__SSCH_PENDING, rjq__ssbook_state(&b, "{q}a", 4));
    /* a message before the confirmation is not the channel's yet */
    ASSERT_EQ(RJQ__SSOUT_NONE, feed(&b, "*3\r\n$8\r\nsmessage\r\n$4\r\n{q}a\r\n$1\r\nx\r\n", &o));
    ASSERT_EQ(RJQ__SSOUT_SUBSCRIBED, feed(&b, "*3\r\n$10\r\nssubscribe\r\n$4\r\n{q}a\r\n:1\r\n", &o));
    ASSERT_STREQ("{q}a", o.channel);
    ASSERT_EQ(RJQ__SSCH_SUBSCRIBED, rjq__ssbook_state(&b, "{q}a", 4));
    ASSERT_EQ(RJQ__SSOUT_MESSAGE, feed(&b, "*3\r\n$8\r\nsmessage\r\n$4\r\n{q}a\r\n$5\r\nhello\r\n", &o));
    ASSERT_STREQ("{q}a", o.channel);
    ASSERT_STREQ("hello", o.data);
    ASSERT_EQ(5, o.len);
    ASSERT_EQ(RJQ__SSOUT_NONE, feed(&b, "*3\r\n$8\r\nsmessage\r\n$4\r\n{q}z\r\n$1\r\nx\r\n", &o));

    /* PING, in subscribed mode and out of it */
    ASSERT_OK(rjq__ssbook_push(&b, RJQ__SSCMD_PING, NULL, 0));
    ASSERT_OK(rjq__ssbook_push(&b, RJQ__SSCMD_PING, NULL, 0));
    ASSERT_EQ(RJQ__SSOUT_PONG, feed(&b, "*2\r\n$4\r\npong\r\n$0\r\n\r\n", &o));
    ASSERT_EQ(RJQ__SSOUT_PONG, feed(&b, "+PONG\r\n", &o));

    /* wanted, unwanted, wanted again before any reply: one report, at the end */
    rjq__ssch *e = want_sent(&b, "{q}b");
    ASSERT_EQ(1, rjq__ssbook_unwant(&b, e));
    ASSERT_OK(rjq__ssbook_push(&b, RJQ__SSCMD_UNSUB, e, 0));
    ASSERT_EQ(-1, rjq__ssbook_state(&b, "{q}b", 4));
    e = rjq__ssbook_want(&b, "{q}b", 4);
    ASSERT(rjq__ssbook_needs_sub(e));
    ASSERT_OK(rjq__ssbook_push(&b, RJQ__SSCMD_SUB, e, 0));
    ASSERT_EQ(RJQ__SSOUT_NONE, feed(&b, "*3\r\n$10\r\nssubscribe\r\n$4\r\n{q}b\r\n:2\r\n", &o));
    ASSERT_EQ(RJQ__SSOUT_NONE, feed(&b, "*3\r\n$12\r\nsunsubscribe\r\n$4\r\n{q}b\r\n:1\r\n", &o));
    ASSERT_EQ(RJQ__SSOUT_SUBSCRIBED, feed(&b, "*3\r\n$10\r\nssubscribe\r\n$4\r\n{q}b\r\n:2\r\n", &o));
    ASSERT_STREQ("{q}b", o.channel);

    /* unwanted for good: its SUNSUBSCRIBE answered, the entry goes */
    e = rjq__ssbook_find(&b, "{q}b", 4);
    ASSERT_EQ(1, rjq__ssbook_unwant(&b, e));
    ASSERT_OK(rjq__ssbook_push(&b, RJQ__SSCMD_UNSUB, e, 0));
    ASSERT_EQ(RJQ__SSOUT_NONE, feed(&b, "*3\r\n$12\r\nsunsubscribe\r\n$4\r\n{q}b\r\n:1\r\n", &o));
    ASSERT(rjq__ssbook_find(&b, "{q}b", 4) == NULL);

    /* the server drops {q}a by itself (its slot moved) */
    ASSERT_EQ(RJQ__SSOUT_UNSUBSCRIBED, feed(&b, "*3\r\n$12\r\nsunsubscribe\r\n$4\r\n{q}a\r\n:0\r\n", &o));
    ASSERT_STREQ("{q}a", o.channel);
    ASSERT_EQ(-1, rjq__ssbook_state(&b, "{q}a", 4));
    ASSERT(rjq__ssbook_find(&b, "{q}a", 4) == NULL);
    ASSERT_EQ(RJQ__SSOUT_NONE, feed(&b, "*3\r\n$12\r\nsunsubscribe\r\n$4\r\n{q}a\r\n:0\r\n", &o));

    /* refused: the error names no channel, the book does */
    want_sent(&b, "{q}c");
    ASSERT_EQ(RJQ__SSOUT_REFUSED, feed(&b, "-MOVED 1234 127.0.0.1:7001\r\n", &o));
    ASSERT_STREQ("{q}c", o.channel);
    ASSERT_STREQ("MOVED 1234 127.0.0.1:7001", o.detail);
    ASSERT(rjq__ssbook_find(&b, "{q}c", 4) == NULL);
    ASSERT_EQ(0, b.n);
    ASSERT_EQ(0, b.nwanted);
    rjq__ssbook_free(&b);
}

TEST(ssbook_refuses_replies_of_no_known_shape_or_out_of_order) {
    static const char *bad[] = {
        "*3\r\n$10\r\nssubscribe\r\n$4\r\n{q}a\r\n:1\r\n",  /* no SSUBSCRIBE sent */
        "+OK\r\n",                                          /* nothing sent */
        "-ERR x\r\n",
        "*2\r\n$4\r\npong\r\n$0\r\n\r\n",
        ":1\r\n",
        "$3\r\nabc\r\n",
        "*0\r\n",
        "*1\r\n:1\r\n",
        "*2\r\n$8\r\nsmessage\r\n$4\r\n{q}a\r\n",           /* 2 elements */
        "*3\r\n$8\r\nsmessage\r\n$0\r\n\r\n$1\r\nx\r\n",    /* empty channel */
        "*3\r\n$8\r\nsmessage\r\n:4\r\n$1\r\nx\r\n",        /* channel not a string */
        "*3\r\n$8\r\nsmessage\r\n$4\r\n{q}a\r\n:1\r\n",     /* payload not a string */
        "*3\r\n$12\r\nsunsubscribe\r\n$-1\r\n:0\r\n",       /* nil channel */
        "*3\r\n$12\r\nsunsubscribe\r\n$4\r\n{q}a\r\n:-1\r\n", /* negative count */
        "*3\r\n$12\r\nsunsubscribe\r\n$4\r\n{q}a\r\n:99999999999\r\n",
        "*4\r\n$12\r\nsunsubscribe\r\n$4\r\n{q}a\r\n:0\r\n:0\r\n",
        "*3\r\n$7\r\nmessage\r\n$4\r\n{q}a\r\n$1\r\nx\r\n", /* classic pub/sub */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rjq__ssbook b;
        rjq__ssout o;
        rjq__ssbook_init(&b);
        if (i > 3) want_sent(&b, "{q}a"); /* (then the SSUBSCRIBE is what is due) */
        ASSERT_EQ(RJQ__SSOUT_PROTO, feed(&b, bad[i], &o));
        ASSERT(o.detail != NULL && o.detail[0] != '\0');
        rjq__ssbook_free(&b);
    }
    /* a confirmation of another channel than the one asked for */
    rjq__ssbook b;
    rjq__ssout o;
    rjq__ssbook_init(&b);
    want_sent(&b, "{q}a");
    ASSERT_EQ(RJQ__SSOUT_PROTO, feed(&b, "*3\r\n$10\r\nssubscribe\r\n$4\r\n{q}b\r\n:1\r\n", &o));
    rjq__ssbook_free(&b);
    /* an over-long channel name never matches */
    char *big = malloc(RJQ__SSCH_MAX + 100);
    ASSERT(big);
    int n = snprintf(big, RJQ__SSCH_MAX + 100, "*3\r\n$8\r\nsmessage\r\n$%d\r\n", RJQ__SSCH_MAX + 1);
    memset(big + n, 'x', RJQ__SSCH_MAX + 1);
    memcpy(big + n + RJQ__SSCH_MAX + 1, "\r\n$1\r\nx\r\n", 10);
    rjq__ssbook_init(&b);
    ASSERT(rjq__ssbook_want(&b, big, RJQ__SSCH_MAX + 1) == NULL);
    ASSERT_EQ(RJQ__SSOUT_PROTO, feed(&b, big, &o));
    rjq__ssbook_free(&b);
    free(big);
}

TEST(ssbook_reset_reports_subscribed_and_pending_channels_once) {
    rjq__ssbook b;
    rjq__ssout o;
    rjq__ssbook_init(&b);
    want_sent(&b, "{q}a");
    ASSERT_EQ(RJQ__SSOUT_SUBSCRIBED, feed(&b, "*3\r\n$10\r\nssubscribe\r\n$4\r\n{q}a\r\n:1\r\n", &o));
    want_sent(&b, "{q}b");                                       /* pending */
    ASSERT(rjq__ssbook_want(&b, "{q}c", 4) != NULL);             /* never sent */
    rjq__ssch *d = want_sent(&b, "{q}d");
    ASSERT_EQ(1, rjq__ssbook_unwant(&b, d));                     /* unwanted, SUB in flight */
    ASSERT_EQ(2, rjq__ssbook_reset(&b));
    int seen = 0;
    rjq__ssch *e;
    while ((e = rjq__ssbook_lost_peek(&b)) != NULL) {
        ASSERT(e->len == 4 && (memcmp(e->name, "{q}a", 4) == 0 || memcmp(e->name, "{q}b", 4) == 0));
        /* a report that unwants its channel: it goes after the report */
        if (memcmp(e->name, "{q}b", 4) == 0) ASSERT_EQ(0, rjq__ssbook_unwant(&b, e));
        rjq__ssbook_lost_done(&b, e);
        seen++;
    }
    ASSERT_EQ(2, seen);
    ASSERT(rjq__ssbook_find(&b, "{q}d", 4) == NULL);
    ASSERT(rjq__ssbook_find(&b, "{q}b", 4) == NULL);
    ASSERT_EQ(RJQ__SSCH_WANTED, rjq__ssbook_state(&b, "{q}a", 4));
    ASSERT_EQ(RJQ__SSCH_WANTED, rjq__ssbook_state(&b, "{q}c", 4));
    ASSERT_EQ(2, b.nwanted);
    ASSERT_EQ(0, rjq__ssbook_reset(&b)); /* nothing was subscribed since */
    rjq__ssbook_free(&b);
}

/* Every allocation of a busy book fails in turn: a failure is reported
 * (NULL, -1), the book stays consistent, nothing leaks (ASan). */
TEST(ssbook_allocation_failures_leave_it_consistent) {
    for (long n = 0;; n++) {
        rjq__ssbook b;
        rjq__ssbook_init(&b);
        failalloc_arm_once(n);
        int failed = 0;
        size_t wanted = 0;
        for (int i = 0; i < 40; i++) {
            char ch[32];
            snprintf(ch, sizeof ch, "{q}ch%d", i);
            rjq__ssch *e = rjq__ssbook_want(&b, ch, strlen(ch));
            if (e == NULL) {
                failed++;
                continue;
            }
            wanted++;
            if (rjq__ssbook_push(&b, RJQ__SSCMD_SUB, e, 0) != 0) {
                failed++;
                ASSERT(rjq__ssbook_needs_sub(e));
            }
        }
        failalloc_disarm();
        long failures = failalloc_failures();
        ASSERT(failed <= failures); /* (a failed growth of a full table is no failure) */
        ASSERT_EQ(wanted, b.nwanted);
        ASSERT_EQ(wanted, b.n);
        ASSERT(b.count <= 40);
        rjq__ssbook_reset(&b);
        rjq__ssch *e;
        while ((e = rjq__ssbook_lost_peek(&b)) != NULL) rjq__ssbook_lost_done(&b, e);
        rjq__ssbook_free(&b);
        if (failures == 0) break;
    }
}

/* ---- the link in virtual time ------------------------------------------- */

static int watch_ok;       /* 1: watch_fd gives a handle (that never fires) */
static long watches, unwatches;
static int fake_attach(void *loop, struct redisAsyncContext *ac) {
    (void)loop, (void)ac;
    return -1;
}
static void *fake_resolve(void *loop, const char *host, rjq_resolved_fn *done, void *arg) {
    (void)loop, (void)host;
    done(arg, "no such host", NULL, 0);
    return NULL;
}
static void fake_resolve_cancel(void *loop, void *handle) {
    (void)loop, (void)handle;
}
static void *fake_watch(void *loop, int fd, int r, int w, rjq_fd_fn *cb, void *arg) {
    (void)loop, (void)fd, (void)r, (void)w, (void)cb, (void)arg;
    if (!watch_ok) return NULL;
    watches++;
    return &watches;
}
static void fake_unwatch(void *loop, void *handle) {
    (void)loop;
    ASSERT(handle == &watches);
    unwatches++;
}
static const rjq_loop_ops fake_ops = {sizeof(rjq_loop_ops), fake_attach,  fake_set_timer, NULL,        fake_resolve,
                                      fake_resolve_cancel, fake_watch, fake_unwatch};

static void nop_message(rjq__shardlink *l, void *arg, const char *ch, size_t chlen, const char *p,
                        size_t len) {
    (void)l, (void)arg, (void)ch, (void)chlen, (void)p, (void)len;
    FAIL_AT(__FILE__, __LINE__, "no message without a server");
}
static void nop_event(rjq__shardlink *l, void *arg, const char *ch, size_t chlen, int ev,
                      const char *detail) {
    (void)l, (void)arg, (void)ch, (void)chlen, (void)detail;
    FAIL_AT(__FILE__, __LINE__, "no event: nothing was ever subscribed (event %d)", ev);
}
static const rjq__shardlink_hooks nop_hooks = {nop_message, nop_event};

static rjq_client *virtual_client(long min_ms, long max_ms, long connect_timeout_ms) {
    rjq__clock_set(virtual_clock);
    armed_ms = -1;
    rjq_client_options o = RJQ_CLIENT_OPTIONS_INIT;
    o.url = "redis://nowhere.invalid:6379";
    o.reconnect_min_ms = min_ms;
    o.reconnect_max_ms = max_ms;
    o.connect_timeout_ms = connect_timeout_ms;
    rjq_client *c = NULL;
    ASSERT_OK(rjq_client_new(&c, &o, &fake_ops, NULL));
    return c;
}

/* Run until the link made `n` attempts; their times. */
static void attempts_at(rjq_client *c, rjq__shardlink *l, uint64_t *at, int n) {
    unsigned long seen = rjq__shardlink_attempts(l);
    int k = 0;
    if (seen == 1) at[k++] = vnow;
    for (int i = 0; i < 10000 && k < n; i++) {
        vclock_step(c);
        if (rjq__shardlink_attempts(l) != seen) {
            ASSERT_EQ(seen + 1, rjq__shardlink_attempts(l));
            seen = rjq__shardlink_attempts(l);
            at[k++] = vnow;
        }
    }
    ASSERT_EQ(n, k);
}

TEST(shardlink_reconnect_delays_double_from_the_minimum_to_the_cap_with_jitter_below_each) {
    rjq_client *c = virtual_client(100, 1000, 5000);
    watch_ok = 0; /* every attempt fails at once */
    rjq__shardlink *l = NULL;
    ASSERT_OK(rjq__shardlink_new(c, "127.0.0.1", free_port(), &nop_hooks, NULL, &l));
    ASSERT_OK(rjq__shardlink_subscribe(l, "{q}a", 4));
    ASSERT_EQ(1, rjq__shardlink_attempts(l));
    uint64_t at[9];
    attempts_at(c, l, at, 9);
    long cap[8] = {100, 200, 400, 800, 1000, 1000, 1000, 1000};
    for (int i = 0; i < 8; i++) {
        long gap = (long)(at[i + 1] - at[i]);
        ASSERT(gap >= cap[i] / 2 && gap <= cap[i]);
    }
    ASSERT_EQ(RJQ__SSCH_WANTED, rjq__shardlink_channel_state(l, "{q}a", 4));
    /* nothing wanted any more: the next timer leaves it idle, no socket */
    ASSERT_OK(rjq__shardlink_unsubscribe(l, "{q}a", 4));
    for (int i = 0; i < 50 && rjq__shardlink_get_state(l) != RJQ__SHARDLINK_IDLE; i++) vclock_step(c);
    ASSERT_EQ(RJQ__SHARDLINK_IDLE, rjq__shardlink_get_state(l));
    unsigned long n = rjq__shardlink_attempts(l);
    for (int i = 0; i < 20; i++) vclock_step(c);
    ASSERT_EQ(n, rjq__shardlink_attempts(l));
    rjq__shardlink_free(l);
    rjq_client_free(c);
    rjq__clock_set(NULL);
}

TEST(shardlink_connect_that_never_completes_is_given_up_at_its_timeout) {
    rjq_client *c = virtual_client(100, 100, 3000);
    watch_ok = 1; /* watched, never reported: the connect hangs */
    watches = unwatches = 0;
    rjq__shardlink *l = NULL;
    ASSERT_OK(rjq__shardlink_new(c, "127.0.0.1", free_port(), &nop_hooks, NULL, &l));
    ASSERT_OK(rjq__shardlink_subscribe(l, "{q}a", 4));
    uint64_t at[3];
    attempts_at(c, l, at, 3);
    for (int i = 0; i < 2; i++) {
        long gap = (long)(at[i + 1] - at[i]);
        ASSERT(gap >= 3000 + 50 && gap <= 3000 + 100); /* the timeout, then the backoff */
    }
    ASSERT(strstr(rjq__shardlink_why(l), "connect timed out") != NULL);
    ASSERT_EQ(3, watches);
    ASSERT_EQ(2, unwatches);
    rjq__shardlink_free(l);
    ASSERT_EQ(3, unwatches); /* every watch ends */
    rjq_client_free(c);
    rjq__clock_set(NULL);
}

TEST(shardlink_allocation_failures_in_new_and_subscribe_leak_nothing) {
    rjq_client *c = virtual_client(100, 100, 3000);
    watch_ok = 0;
    for (long n = 0;; n++) {
        rjq__shardlink *l = NULL;
        failalloc_arm_once(n);
        int rc = rjq__shardlink_new(c, "127.0.0.1", free_port(), &nop_hooks, NULL, &l);
        int rc2 = RJQ_OK, rc3 = RJQ_OK;
        if (rc == RJQ_OK) {
            rc2 = rjq__shardlink_subscribe(l, "{q}a", 4);
            rc3 = rjq__shardlink_subscribe(l, "{q}b", 4);
        }
        failalloc_disarm();
        long failures = failalloc_failures();
        ASSERT(rc == RJQ_OK || rc == RJQ_ENOMEM);
        ASSERT(rc2 == RJQ_OK || rc2 == RJQ_ENOMEM);
        ASSERT(rc3 == RJQ_OK || rc3 == RJQ_ENOMEM);
        if (rc == RJQ_OK) {
            for (int i = 0; i < 5; i++) vclock_step(c); /* failed attempts back off */
            rjq__shardlink_free(l);
        } else {
            ASSERT(l == NULL);
        }
        if (failures == 0) break;
    }
    rjq_client_free(c);
    rjq__clock_set(NULL);
}
