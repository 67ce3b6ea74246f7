/*
 * Push delivery of new jobs asks the PUBLISH of the push whether the worker
 * listens (its receivers), not PUBSUB NUMSUB first (lib.lua push_to_idle,
 * issue 36): a push nobody hears is undone exactly (lease, state, held
 * member, registration) and the job waits in ready for a claim, unspent.
 *
 * No timing assertion: waits are safety nets.
 */
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

typedef struct seen {
    long handled;
    int attempt;
    char id[64];
    rjq_job *job;
} seen;

static void keep_handler(rjq_job *job, void *data) {
    seen *s = data;
    s->handled++;
    s->attempt = rjq_job_get_attempt(job);
    snprintf(s->id, sizeof s->id, "%s", rjq_job_get_id(job));
    s->job = job;
}

/* Run the loop until queue q's idle hash has a registration of `slots`
 * slots whose push channel has a subscriber. */
static int wait_subscribed_registration(struct event_base *base, redisContext *rc, const char *q,
                                        long slots) {
    double until = wait_deadline(5000);
    for (;;) {
        redisReply *r = server_cmd(rc, "HGETALL t:{%s}:idle", q);
        int ok = 0;
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
            long n = -1;
            const char *ch = strchr(r->element[0]->str, ' ');
            ok = sscanf(r->element[1]->str, "%ld", &n) == 1 && n == slots && ch &&
                 server_numsub(rc, ch + 1) >= 1;
        }
        freeReplyObject(r);
        if (ok) return 1;
        if (!wait_step(base, until)) return 0;
    }
}

static void on_enqueued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs;
    ASSERT_OK(status);
    ASSERT_EQ(1, (long)n);
    (*(long *)data)++;
}

/* An enqueue that pushes its new job to an idle worker runs no PUBSUB
 * NUMSUB: the PUBLISH of the push says whether it was heard. */
TEST(push_of_a_new_job_asks_no_numsub) {
    test_env e;
    env_start(&e, "ph");
    seen s = {0};
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(e.q, &wo, keep_handler, &s, &w));
    wait_worker_started(e.base, e.c, e.q, e.rc, "ph");
    ASSERT(wait_subscribed_registration(e.base, e.rc, "ph", 1));
    long long before = server_calls(e.rc, "pubsub|numsub");
    long long claims = server_calls(e.rc, "zrangebyscore");
    ASSERT_OK(rjq_enqueue(e.q, "x", 1, NULL, NULL, NULL));
    ASSERT(loop_until_count(e.base, &s.handled, 1, 10000));
    ASSERT_EQ(claims, server_calls(e.rc, "zrangebyscore")); /* pushed, not claimed */
    ASSERT_EQ(before, server_calls(e.rc, "pubsub|numsub"));
    ASSERT_EQ(1, s.attempt);
    long done = 0;
    ASSERT_OK(rjq_job_complete(s.job, "", 0, on_done_ok, &done));
    ASSERT(loop_until_count(e.base, &done, 1, 10000));
    env_stop(&e);
}

/* A registration whose push channel nobody listens on (its client gone):
 * the push is undone and the registration dropped; the job waits in ready
 * as "ready 0" with no lease and no held member, and a worker that comes
 * later claims it as its first attempt. */
TEST(push_nobody_hears_is_undone_and_the_job_waits_unspent) {
    test_env e;
    env_start(&e, "pg");
    freeReplyObject(server_cmd(e.rc, "HSET t:{pg}:idle %s %s", "w9 t:{pg}:push:gone", "2 7 30000 5"));
    long enq = 0;
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.id = "j";
    ASSERT_OK(rjq_enqueue(e.q, "x", 1, &jo, on_enqueued, &enq));
    ASSERT(loop_until_count(e.base, &enq, 1, 10000));

    ASSERT_EQ(0, server_int(e.rc, "HLEN t:{pg}:idle"));
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{pg}:ready"));
    redisReply *r = server_cmd(e.rc, "ZSCORE t:{pg}:active j");
    ASSERT_EQ(REDIS_REPLY_NIL, r->type);
    freeReplyObject(r);
    r = server_cmd(e.rc, "ZRANGEBYLEX t:{pg}:held - +");
    ASSERT_EQ(REDIS_REPLY_ARRAY, r->type);
    for (size_t i = 0; i < r->elements; i++) ASSERT(strstr(r->element[i]->str, " j") == NULL);
    freeReplyObject(r);
    r = server_cmd(e.rc, "HGET t:{pg}:state j");
    ASSERT_EQ(REDIS_REPLY_STRING, r->type);
    ASSERT(strncmp(r->str, "ready 0", 7) == 0);
    freeReplyObject(r);

    seen s = {0};
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(e.q, &wo, keep_handler, &s, &w));
    ASSERT(loop_until_count(e.base, &s.handled, 1, 10000));
    ASSERT_STREQ("j", s.id);
    ASSERT_EQ(1, s.attempt); /* the undone push spent no attempt */
    long done = 0;
    ASSERT_OK(rjq_job_complete(s.job, "", 0, on_done_ok, &done));
    ASSERT(loop_until_count(e.base, &done, 1, 10000));
    env_stop(&e);
}

/* The usual enqueue's push checks the types of active and held by its own
 * writes (no TYPE calls): a wrongly typed one refuses the call with
 * nothing written (the job's columns, the counter, the registration) and
 * nothing pushed to the worker. */
static long awaited_status = 1;
static void on_awaited(rjq_client *c, int status, const rjq_outcome *out, void *data) {
    (void)c, (void)out;
    awaited_status = status;
    (*(long *)data)++;
}

static char *queue_state(redisContext *rc, const char *q) {
    static char buf[4096];
    size_t at = 0;
    const char *cmds[] = {"HGETALL t:{%s}:stats", "HGETALL t:{%s}:payload", "HGETALL t:{%s}:state",
                          "HGETALL t:{%s}:watchers", "HGETALL t:{%s}:idle", "TYPE t:{%s}:active",
                          "TYPE t:{%s}:held", "ZRANGE t:{%s}:active 0 -1", "ZRANGE t:{%s}:held 0 -1",
                          "LRANGE t:{%s}:ready 0 -1"};
    for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
        redisReply *r = server_cmd(rc, cmds[k], q);
        if (r->type == REDIS_REPLY_ARRAY) {
            for (size_t i = 0; i < r->elements; i++)
                at += (size_t)snprintf(buf + at, sizeof buf - at, "%s,", r->element[i]->str);
        } else if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) {
            at += (size_t)snprintf(buf + at, sizeof buf - at, "%s", r->str);
        } else {
            at += (size_t)snprintf(buf + at, sizeof buf - at, "(%d)", r->type);
        }
        at += (size_t)snprintf(buf + at, sizeof buf - at, ";");
        freeReplyObject(r);
        ASSERT(at < sizeof buf - 1);
    }
    return buf;
}

static void push_on_wrongtype_writes_nothing(const char *key) {
    test_env e;
    env_start(&e, "pw");
    long enq = 0;
    ASSERT_OK(rjq_enqueue(e.q, "first", 5, NULL, on_enqueued, &enq)); /* seq, columns exist */
    ASSERT(loop_until_count(e.base, &enq, 1, 10000));
    freeReplyObject(server_cmd(e.rc, "DEL t:{pw}:ready"));
    redisContext *sub = server_connect(&e.s);
    struct timeval tv = {10, 0};
    redisSetTimeout(sub, tv);
    redisReply *r = redisCommand(sub, "SUBSCRIBE t:{pw}:push:x");
    ASSERT(r != NULL);
    freeReplyObject(r);
    freeReplyObject(server_cmd(e.rc, "HSET t:{pw}:idle %s %s", "w1 t:{pw}:push:x", "2 7 30000 5"));
    freeReplyObject(server_cmd(e.rc, "SET %s x", key));
    char before[4096];
    snprintf(before, sizeof before, "%s", queue_state(e.rc, "pw"));

    long done = 0;
    ASSERT_OK(rjq_enqueue_await(e.q, "p", 1, NULL, NULL, on_awaited, &done, NULL));
    ASSERT(loop_until_count(e.base, &done, 1, 10000));
    ASSERT_EQ(RJQ_EWRONGTYPE, awaited_status);
    ASSERT_STREQ(before, queue_state(e.rc, "pw"));

    /* nothing reached the worker's channel before this marker */
    freeReplyObject(server_cmd(e.rc, "PUBLISH t:{pw}:push:x marker"));
    ASSERT_EQ(REDIS_OK, redisGetReply(sub, (void **)&r));
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    ASSERT_STREQ("marker", r->element[2]->str);
    freeReplyObject(r);
    redisFree(sub);
    env_stop(&e);
}

TEST(awaited_push_on_wrongtype_active_writes_nothing) {
    push_on_wrongtype_writes_nothing("t:{pw}:active");
}

TEST(awaited_push_on_wrongtype_held_writes_nothing) {
    push_on_wrongtype_writes_nothing("t:{pw}:held");
}

/* The states of new jobs pushed at once are written once, by the push
 * (not ready, then active): that write checks the state column's type. */
TEST(awaited_push_on_wrongtype_state_column_writes_nothing) {
    push_on_wrongtype_writes_nothing("t:{pw}:state");
}
