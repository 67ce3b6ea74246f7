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
