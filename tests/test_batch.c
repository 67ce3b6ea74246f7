/*
 * Batches (issue 39, rjq.h "Batches"): members of any queues counted once
 * each, whichever of their add and release comes first; sealed before or
 * after its members finished; on_complete always, on_success only when no
 * member died, with the counts in their headers; a finisher that died
 * before it told the batch is replaced by the dependencies' sweep; across
 * masters of the test cluster; rjq_batch_await; a 100 000-member batch.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "cluster.h"
#include "failalloc.h"
#include "fixture.h"
#include "harness.h"
#include "proxy.h"
#include "rjq_scripts.h"
#include "server.h"
#include "waits.h"

/* ---- helpers -------------------------------------------------------------- */

static void complete_it(rjq_job *job, void *data) {
    long *n = data;
    (*n)++;
    ASSERT_OK(rjq_job_complete(job, "ok", 2, NULL, NULL));
}

static void bury_it(rjq_job *job, void *data) {
    long *n = data;
    (*n)++;
    ASSERT_OK(rjq_job_fail(job, "boom", RJQ_FAIL_FATAL, 0, NULL, NULL));
}

typedef struct made {
    long calls;
    int status;
    char id[64];
} made;

static void on_made(rjq_client *c, int status, const char *id, void *data) {
    made *m = data;
    (void)c;
    m->calls++;
    m->status = status;
    if (status == RJQ_OK) {
        ASSERT(id != NULL);
        snprintf(m->id, sizeof m->id, "%s", id);
    } else {
        ASSERT(id == NULL);
    }
}

static made create_batch(struct event_base *base, rjq_queue *q, const char *id, int complete,
                         int success) {
    rjq_batch_options o = RJQ_BATCH_OPTIONS_INIT;
    o.id = id;
    if (complete) {
        o.on_complete = "all done";
        o.on_complete_len = 8;
    }
    if (success) {
        o.on_success = "all good";
        o.on_success_len = 8;
    }
    made m = {0};
    ASSERT_OK(rjq_batch_create(q, &o, on_made, &m));
    ASSERT(loop_until_count(base, &m.calls, 1, 10000));
    return m;
}

typedef struct added {
    long calls;
    int status;
    char id[64];
} added;

static void on_added(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    added *a = data;
    (void)c;
    a->calls++;
    a->status = status;
    if (status == RJQ_OK) {
        ASSERT_EQ(1, n);
        snprintf(a->id, sizeof a->id, "%s", jobs[0].id);
    } else {
        ASSERT_EQ(0, n);
    }
}

/* Member `id` (NULL: numbered) of batch bid of bq into q, delayed by delay_ms. */
static added add_member(struct event_base *base, rjq_queue *bq, const char *bid, rjq_queue *q,
                        const char *id, long long delay_ms) {
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = id;
    o.delay_ms = delay_ms;
    added a = {0};
    ASSERT_OK(rjq_batch_enqueue(bq, bid, q, "m", 1, &o, on_added, &a));
    ASSERT(loop_until_count(base, &a.calls, 1, 10000));
    return a;
}

static long seal(struct event_base *base, rjq_queue *bq, const char *bid) {
    long done = 0; /* (on_done_ok asserts RJQ_OK) */
    ASSERT_OK(rjq_batch_seal(bq, bid, on_done_ok, &done));
    ASSERT(loop_until_count(base, &done, 1, 10000));
    return done;
}

static int batch_state_is(struct event_base *base, rjq_queue *bq, const char *bid, const char *st) {
    batch_got g = get_batch(base, bq, bid);
    return g.status == RJQ_OK && strcmp(g.state, st) == 0;
}

/* The headers of job id of queue q as stored (options column), "" when none. */
static void headers_of(redisContext *rc, const char *q, const char *id, char *out, size_t size) {
    redisReply *r = server_cmd(rc, "HGET t:{%s}:options %s", q, id);
    const char *nl = r->type == REDIS_REPLY_STRING ? strchr(r->str, '\n') : NULL;
    snprintf(out, size, "%s", nl ? nl + 1 : "");
    freeReplyObject(r);
}

/* batch.lua called directly on queue q (the keys the client passes). */
static redisReply *batch_fcall(redisContext *rc, const char *q, const char *op, const char *bid,
                               const char *a5, const char *a6, const char *a7) {
    char prefix[64], wake[64];
    snprintf(prefix, sizeof prefix, "t:{%s}:job:", q);
    snprintf(wake, sizeof wake, "t:{%s}:wake", q);
    const char *args[] = {op, prefix, wake, bid, a5, a6, a7};
    return server_fcall(rc, RJQ__S_BATCH, q, args, a5 ? 7 : 4);
}

/* batch.lua add's answer for its one member. */
static long long add_code(redisReply *r) {
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
           r->element[0]->type == REDIS_REPLY_INTEGER);
    long long v = r->element[0]->integer;
    freeReplyObject(r);
    return v;
}

static long long release_code(redisReply *r) {
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    long long v = r->element[0]->integer;
    freeReplyObject(r);
    return v;
}

/* ---- tests ---------------------------------------------------------------- */

TEST(sealed_before_its_jobs_finished_enqueues_on_complete_and_on_success_with_counts) {
    test_env e;
    env_start(&e, "ba");
    rjq_queue *q2;
    ASSERT_OK(rjq_queue_open(e.c, "ba2", NULL, &q2));
    made b = create_batch(e.base, e.q, NULL, 1, 1);
    ASSERT_OK(b.status);
    ASSERT_STREQ("1", b.id); /* numbered */
    /* members held back an hour, on two queues */
    ASSERT_OK(add_member(e.base, e.q, b.id, e.q, "m1", 3600000).status);
    ASSERT_OK(add_member(e.base, e.q, b.id, q2, "m2", 3600000).status);
    added m3 = add_member(e.base, e.q, b.id, q2, NULL, 3600000);
    ASSERT_OK(m3.status);
    ASSERT_EQ(1, seal(e.base, e.q, b.id));
    batch_got g = get_batch(e.base, e.q, b.id);
    ASSERT_OK(g.status);
    ASSERT_STREQ("pending", g.state);
    ASSERT_EQ(1, g.sealed);
    ASSERT_EQ(3, g.total);
    ASSERT_EQ(0, g.completed);
    /* sealed: no more members */
    added late = add_member(e.base, e.q, b.id, q2, "late", 3600000);
    ASSERT_EQ(RJQ_ESTATE, late.status);
    count_wait p = {0};
    ASSERT_OK(rjq_queue_promote(e.q, "m1", on_count, &p));
    ASSERT_OK(rjq_queue_promote(q2, "m2", on_count, &p));
    ASSERT_OK(rjq_queue_promote(q2, m3.id, on_count, &p));
    long ran2 = 0;
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w2;
    ASSERT_OK(rjq_worker_start(q2, &wo, complete_it, &ran2, &w2));
    ASSERT(loop_until_count(e.base, &ran2, 2, 10000));
    WAIT_FOR(e.base, get_batch(e.base, e.q, b.id).completed == 2, 10000);
    ASSERT_STREQ("pending", get_batch(e.base, e.q, b.id).state);
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{ba}:payload batch:1:complete"));
    /* the last member: the batch ends, its completion jobs are enqueued here */
    long ran1 = 0;
    rjq_worker *w1;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_it, &ran1, &w1));
    WAIT_FOR(e.base, batch_state_is(e.base, e.q, b.id, "completed"), 10000);
    /* m1, then the two completion jobs */
    ASSERT(loop_until_count(e.base, &ran1, 3, 10000));
    g = get_batch(e.base, e.q, b.id);
    ASSERT_EQ(3, g.completed);
    ASSERT_EQ(0, g.dead);
    ASSERT(g.ended_ms > 0);
    char h[512];
    headers_of(e.rc, "ba", "batch:1:complete", h, sizeof h);
    ASSERT_STREQ("rjq.batch=1\nrjq.batch.total=3\nrjq.batch.completed=3\nrjq.batch.dead=0\n"
                 "rjq.batch.cancelled=0\nrjq.batch.on=complete", h);
    headers_of(e.rc, "ba", "batch:1:success", h, sizeof h);
    ASSERT(strstr(h, "rjq.batch.on=success") != NULL);
    WAIT_FOR(e.base, strcmp(get_info(e.base, e.q, "batch:1:success").state, "completed") == 0, 10000);
    ASSERT_STREQ("completed", get_info(e.base, e.q, "batch:1:complete").state);
    /* the payloads went with the end; the members' dependents entries too */
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{ba}:batches %s", "1 c"));
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{ba}:dependents") == 0, 10000);
    worker_stop_wait(e.base, w1);
    worker_stop_wait(e.base, w2);
    env_stop(&e);
}

TEST(sealed_after_its_jobs_finished_ends_at_its_seal) {
    test_env e;
    env_start(&e, "bs");
    made b = create_batch(e.base, e.q, "late-seal", 1, 0);
    ASSERT_OK(b.status);
    long ran = 0;
    rjq_worker_options wo = quiet_worker_options(2);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_it, &ran, &w));
    for (int i = 0; i < 5; i++) ASSERT_OK(add_member(e.base, e.q, b.id, e.q, NULL, 0).status);
    ASSERT(loop_until_count(e.base, &ran, 5, 10000));
    WAIT_FOR(e.base, get_batch(e.base, e.q, b.id).completed == 5, 10000);
    batch_got g = get_batch(e.base, e.q, b.id);
    ASSERT_STREQ("pending", g.state); /* not sealed: it may get more */
    ASSERT_EQ(0, g.sealed);
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{bs}:payload batch:late-seal:complete"));
    ASSERT_EQ(1, seal(e.base, e.q, b.id));
    g = get_batch(e.base, e.q, b.id);
    ASSERT_STREQ("completed", g.state);
    ASSERT_EQ(5, g.total);
    ASSERT(loop_until_count(e.base, &ran, 6, 10000)); /* the on_complete job */
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{bs}:payload batch:late-seal:complete"));
    /* sealed again: nothing changes, no second completion job */
    ASSERT_EQ(1, seal(e.base, e.q, b.id));
    ASSERT_EQ(1, server_int(e.rc, "HGET t:{bs}:stats seq") - 5);
    /* an empty batch ends at its seal, completed */
    made empty = create_batch(e.base, e.q, "empty", 1, 1);
    ASSERT_EQ(1, seal(e.base, e.q, empty.id));
    g = get_batch(e.base, e.q, "empty");
    ASSERT_STREQ("completed", g.state);
    ASSERT_EQ(0, g.total);
    ASSERT(loop_until_count(e.base, &ran, 8, 10000));
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

TEST(a_dead_member_makes_the_batch_dead_and_skips_on_success) {
    test_env e;
    env_start(&e, "bd");
    rjq_queue *qd;
    ASSERT_OK(rjq_queue_open(e.c, "bd-bad", NULL, &qd));
    made b = create_batch(e.base, e.q, "with-dead", 1, 1);
    ASSERT_OK(add_member(e.base, e.q, b.id, e.q, "ok1", 3600000).status);
    ASSERT_OK(add_member(e.base, e.q, b.id, qd, "bad1", 0).status);
    ASSERT_OK(add_member(e.base, e.q, b.id, e.q, "gone1", 3600000).status);
    ASSERT_EQ(1, seal(e.base, e.q, b.id));
    long buried = 0, ran = 0;
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *wd, *w;
    ASSERT_OK(rjq_worker_start(qd, &wo, bury_it, &buried, &wd));
    ASSERT(loop_until_count(e.base, &buried, 1, 10000));
    ASSERT_OK(rjq_queue_cancel(e.q, "gone1", NULL, NULL));
    WAIT_FOR(e.base, get_batch(e.base, e.q, b.id).cancelled == 1, 10000);
    count_wait p = {0};
    ASSERT_OK(rjq_queue_promote(e.q, "ok1", on_count, &p));
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_it, &ran, &w));
    WAIT_FOR(e.base, batch_state_is(e.base, e.q, b.id, "dead"), 10000);
    batch_got g = get_batch(e.base, e.q, b.id);
    ASSERT_EQ(1, g.completed);
    ASSERT_EQ(1, g.dead);
    ASSERT_EQ(1, g.cancelled);
    ASSERT(loop_until_count(e.base, &ran, 2, 10000)); /* ok1, on_complete */
    char h[512];
    headers_of(e.rc, "bd", "batch:with-dead:complete", h, sizeof h);
    ASSERT(strstr(h, "rjq.batch.dead=1\nrjq.batch.cancelled=1") != NULL);
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{bd}:payload batch:with-dead:success"));
    worker_stop_wait(e.base, w);
    worker_stop_wait(e.base, wd);
    env_stop(&e);
}

/* README "Batches", Status: a member whose record was deleted counts as
 * dead. The member's enqueue ran (its reply held back by the proxy), then
 * its record is removed outside rjq before its registration: the
 * registration finds no job ('missing'), the add counts it dead, and the
 * sealed batch ends dead: on_complete with rjq.batch.dead=1, no
 * on_success. */
TEST(a_member_whose_record_was_deleted_before_its_registration_counts_as_dead) {
    test_env e;
    proxy p;
    env_start_proxied(&e, &p, "bz", NULL);
    rjq_queue *qm;
    ASSERT_OK(rjq_queue_open(e.c, "bz-m", NULL, &qm));
    (void)get_info(e.base, qm, "none"); /* (its queue known: nothing left to ask before the enqueue) */
    ASSERT_OK(create_batch(e.base, e.q, "gone", 1, 1).status);
    proxy_hold(&p, 1);
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "m";
    o.delay_ms = 3600000;
    added a = {0};
    ASSERT_OK(rjq_batch_enqueue(e.q, "gone", qm, "m", 1, &o, on_added, &a));
    WAIT_FOR(e.base, server_int(e.rc, "HEXISTS t:{bz-m}:payload m") == 1, 10000);
    const char *cols[] = {"payload", "state", "options", "watchers"};
    for (size_t k = 0; k < sizeof cols / sizeof cols[0]; k++)
        freeReplyObject(server_cmd(e.rc, "HDEL t:{bz-m}:%s m", cols[k]));
    freeReplyObject(server_cmd(e.rc, "ZREM t:{bz-m}:delayed m"));
    proxy_hold(&p, 0);
    ASSERT(loop_until_count(e.base, &a.calls, 1, 10000));
    ASSERT_OK(a.status);
    ASSERT_EQ(1, seal(e.base, e.q, "gone"));
    WAIT_FOR(e.base, batch_state_is(e.base, e.q, "gone", "dead"), 10000);
    batch_got g = get_batch(e.base, e.q, "gone");
    ASSERT_EQ(1, g.total);
    ASSERT_EQ(1, g.dead);
    ASSERT_EQ(0, g.completed);
    ASSERT_EQ(0, g.cancelled);
    char h[512];
    headers_of(e.rc, "bz", "batch:gone:complete", h, sizeof h);
    ASSERT(strstr(h, "rjq.batch.dead=1") != NULL);
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{bz}:payload batch:gone:success"));
    env_stop_proxied(&e, &p);
}

/* The script's own idempotence: an add or release sent again counts
 * nothing more; a release that comes before its add is counted by the
 * add; a release to a sealed batch of a job never added changes nothing. */
TEST(add_and_release_sent_again_or_out_of_order_count_each_member_once) {
    test_env e;
    env_start(&e, "bi");
    made b = create_batch(e.base, e.q, "idem", 1, 0);
    ASSERT_OK(b.status);
    ASSERT_EQ(1, add_code(batch_fcall(e.rc, "bi", "add", "idem", "q1", "a", "")));
    ASSERT_EQ(0, add_code(batch_fcall(e.rc, "bi", "add", "idem", "q1", "a", ""))); /* again */
    ASSERT_EQ(1, release_code(batch_fcall(e.rc, "bi", "release", "idem", "q1", "a", "completed")));
    ASSERT_EQ(0, release_code(batch_fcall(e.rc, "bi", "release", "idem", "q1", "a", "completed")));
    /* released before its add: counted by the add, once */
    ASSERT_EQ(0, release_code(batch_fcall(e.rc, "bi", "release", "idem", "q2", "b", "dead")));
    ASSERT_EQ(0, get_batch(e.base, e.q, "idem").dead);
    ASSERT_EQ(1, add_code(batch_fcall(e.rc, "bi", "add", "idem", "q2", "b", "")));
    ASSERT_EQ(0, release_code(batch_fcall(e.rc, "bi", "release", "idem", "q2", "b", "dead")));
    batch_got g = get_batch(e.base, e.q, "idem");
    ASSERT_EQ(2, g.total);
    ASSERT_EQ(1, g.completed);
    ASSERT_EQ(1, g.dead);
    ASSERT_EQ(1, seal(e.base, e.q, "idem"));
    ASSERT_STREQ("dead", get_batch(e.base, e.q, "idem").state);
    /* ended: a release of a job it never had changes nothing */
    ASSERT_EQ(0, release_code(batch_fcall(e.rc, "bi", "release", "idem", "q3", "c", "completed")));
    ASSERT_EQ(2, get_batch(e.base, e.q, "idem").total);
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{bi}:payload batch:idem:complete"));
    /* a batch that does not exist */
    ASSERT_EQ(RJQ_ENOTFOUND, get_batch(e.base, e.q, "none").status);
    added a = add_member(e.base, e.q, "none", e.q, "x", 3600000);
    ASSERT_EQ(RJQ_ENOTFOUND, a.status);
    env_stop(&e);
}

TEST(bad_batch_calls_are_refused_with_nothing_written) {
    test_env e;
    env_start(&e, "bb");
    long long keys = server_int(e.rc, "DBSIZE");
    rjq_batch_options o = RJQ_BATCH_OPTIONS_INIT;
    o.id = "1234"; /* all digits: the assigned ones */
    ASSERT_EQ(RJQ_EINVAL, rjq_batch_create(e.q, &o, NULL, NULL));
    o.id = "a b";
    ASSERT_EQ(RJQ_EINVAL, rjq_batch_create(e.q, &o, NULL, NULL));
    o.id = NULL;
    o.size = 0;
    ASSERT_EQ(RJQ_EINVAL, rjq_batch_create(e.q, &o, NULL, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_batch_create(NULL, NULL, NULL, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_batch_seal(e.q, NULL, NULL, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_batch_seal(e.q, "a b", NULL, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_batch_get(e.q, "x", NULL, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_batch_await(e.q, "x", 0, on_batch_got, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_batch_enqueue(e.q, "x", NULL, "p", 1, NULL, NULL, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_batch_enqueue(e.q, NULL, e.q, "p", 1, NULL, NULL, NULL));
    (void)get_batch(e.base, e.q, "x"); /* (a round trip: anything sent ran by now) */
    ASSERT_EQ(keys, server_int(e.rc, "DBSIZE"));
    env_stop(&e);
}

/* A member finished by a client that died before it told the batch: the
 * dependencies' sweep of the member's queue tells it, once. */
TEST(sweep_tells_the_batch_of_a_member_whose_finisher_died_before_telling_it) {
    test_env e;
    env_start(&e, "bw");
    rjq_queue *qm;
    ASSERT_OK(rjq_queue_open(e.c, "bw-m", NULL, &qm));
    made b = create_batch(e.base, e.q, "swept", 1, 0);
    ASSERT_OK(add_member(e.base, e.q, b.id, qm, "a", 3600000).status);
    ASSERT_EQ(1, seal(e.base, e.q, b.id));
    server_cancel_fcall(e.rc, "bw-m", "a");
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{bw-m}:dependents a")); /* untold */
    ASSERT_STREQ("pending", get_batch(e.base, e.q, b.id).state);
    rjq_worker_options wo = quiet_worker_options(1);
    wo.reclaim_ms = 50;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(qm, &wo, never_runs, NULL, &w));
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{bw-m}:dependents") == 0, 10000);
    batch_got g = get_batch(e.base, e.q, b.id);
    ASSERT_STREQ("completed", g.state);
    ASSERT_EQ(1, g.cancelled);
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{bw}:ready")); /* on_complete, once */
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* The child's worker: completes its job, and dies (SIGKILL) as soon as
 * the completion is applied (its reply came), before it told the batch
 * (the releases go out only after a deps_due reply it never reads). */
static void on_completed_die(rjq_client *c, int status, void *data) {
    (void)c, (void)status, (void)data;
    raise(SIGKILL);
}

static void complete_and_die(rjq_job *job, void *data) {
    (void)data;
    rjq_job_complete(job, "ok", 2, on_completed_die, NULL);
}

static void run_dying_child(const test_server *s) {
    struct event_base *base = event_base_new();
    rjq_client *c = client_for(base, s);
    rjq_queue *q = queue_for(c, "bk-m");
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, complete_and_die, NULL, &w));
    event_base_dispatch(base); /* until it kills itself */
    _exit(3);
}

/* A worker process SIGKILLed between its member's completion and the
 * batch's notification: the member is completed, its batch untold; the
 * dependencies' sweep (a worker of another client on the member's queue)
 * tells it, once. */
TEST(a_worker_killed_between_completion_and_notification_is_replaced_by_the_sweep) {
    test_server s;
    server_start_guarded(&s, NULL);
    {
        /* the batch, its member and its seal, by a client gone before the fork */
        struct event_base *base = event_base_new();
        rjq_client *c = client_for(base, &s);
        rjq_queue *bq = queue_for(c, "bk"), *mq = queue_for(c, "bk-m");
        ASSERT_OK(create_batch(base, bq, "killed", 1, 0).status);
        ASSERT_OK(add_member(base, bq, "killed", mq, "m", 0).status);
        ASSERT_EQ(1, seal(base, bq, "killed"));
        rjq_client_free(c);
        event_base_free(base);
    }
    pid_t child = fork_child();
    if (child == 0) run_dying_child(&s);
    int status = reap(child, 30000);
    ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    redisContext *rc = server_connect(&s);
    redisReply *st = server_cmd(rc, "HGET t:{bk-m}:state m");
    ASSERT(st->type == REDIS_REPLY_STRING && strncmp(st->str, "completed", 9) == 0);
    freeReplyObject(st);
    ASSERT_EQ(1, server_int(rc, "HEXISTS t:{bk-m}:dependents m")); /* untold */
    struct event_base *base = event_base_new();
    rjq_client *c = client_for(base, &s);
    rjq_queue *bq = queue_for(c, "bk"), *mq = queue_for(c, "bk-m");
    ASSERT_STREQ("pending", get_batch(base, bq, "killed").state);
    rjq_worker_options wo = quiet_worker_options(1);
    wo.reclaim_ms = 50;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(mq, &wo, never_runs, NULL, &w));
    WAIT_FOR(base, server_int(rc, "EXISTS t:{bk-m}:dependents") == 0, 20000);
    batch_got g = get_batch(base, bq, "killed");
    ASSERT_STREQ("completed", g.state);
    ASSERT_EQ(1, g.total);
    ASSERT_EQ(1, g.completed);
    ASSERT_EQ(1, server_int(rc, "LLEN t:{bk}:ready")); /* on_complete, once */
    worker_stop_wait(base, w);
    rjq_client_free(c);
    event_base_free(base);
    redisFree(rc);
    server_stop_guarded(&s);
}

typedef struct awaited {
    long calls;
    int status;
    char state[16];
    long long completed;
    int had_info;
} awaited;

static void on_awaited(rjq_client *c, int status, const rjq_batch_info *info, void *data) {
    awaited *a = data;
    (void)c;
    a->calls++;
    a->status = status;
    a->had_info = info != NULL;
    if (info) {
        snprintf(a->state, sizeof a->state, "%s", info->state);
        a->completed = info->completed;
    }
}

TEST(await_gives_the_batch_outcome_once_it_ended) {
    test_env e;
    env_start(&e, "bt");
    made b = create_batch(e.base, e.q, "aw", 0, 0);
    for (int i = 0; i < 3; i++) ASSERT_OK(add_member(e.base, e.q, b.id, e.q, NULL, 0).status);
    awaited a = {0}, early = {0}, none = {0};
    ASSERT_OK(rjq_batch_await(e.q, b.id, 30000, on_awaited, &a));
    ASSERT_OK(rjq_batch_await(e.q, b.id, 1, on_awaited, &early));
    ASSERT_OK(rjq_batch_await(e.q, "none", 30000, on_awaited, &none));
    ASSERT(loop_until_count(e.base, &none.calls, 1, 10000));
    ASSERT_EQ(RJQ_ENOTFOUND, none.status);
    ASSERT(loop_until_count(e.base, &early.calls, 1, 10000));
    ASSERT_EQ(RJQ_ETIMEDOUT, early.status);
    ASSERT_EQ(0, a.calls);
    long ran = 0;
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_it, &ran, &w));
    ASSERT(loop_until_count(e.base, &ran, 3, 10000));
    ASSERT_EQ(0, a.calls); /* not sealed */
    ASSERT_EQ(1, seal(e.base, e.q, b.id));
    ASSERT(loop_until_count(e.base, &a.calls, 1, 10000));
    ASSERT_OK(a.status);
    ASSERT_STREQ("completed", a.state);
    ASSERT_EQ(3, a.completed);
    /* a batch awaited while the client is freed: ECANCELED, once */
    made p = create_batch(e.base, e.q, "pending", 0, 0);
    ASSERT_OK(p.status);
    awaited cut = {0};
    ASSERT_OK(rjq_batch_await(e.q, "pending", 60000, on_awaited, &cut));
    worker_stop_wait(e.base, w);
    env_stop(&e);
    ASSERT_EQ(1, cut.calls);
    ASSERT_EQ(RJQ_ECANCELED, cut.status);
}

/* ---- rjq_batch_await over the reply channel ------------------------------- */

/* The watchers field of batch bid of q: its awaiting clients' channels. */
static long long batch_watched(redisContext *rc, const char *q, const char *bid) {
    char field[128];
    snprintf(field, sizeof field, "%s w", bid);
    return server_int(rc, "HEXISTS t:{%s}:batches %s", q, field);
}

/* Run the loop until batch bid of q has a watcher (the await's watch ran:
 * its channel's subscription was confirmed first). */
static void wait_watched(struct event_base *base, redisContext *rc, const char *q,
                         const char *bid) {
    WAIT_FOR(base, batch_watched(rc, q, bid) != 0, 10000);
    ASSERT_EQ(1, batch_watched(rc, q, bid));
}

/* An ended batch is answered from its record by the watch; a pending one
 * is watched (its channel among the batch's watchers, no read of its
 * record again) and hears the end the seal publishes; the watchers go with
 * the end. */
TEST(batch_await_answers_an_ended_batch_from_its_record_and_hears_a_later_end_published) {
    test_env e;
    env_start(&e, "bw");
    ASSERT_OK(create_batch(e.base, e.q, "before", 0, 0).status);
    ASSERT_EQ(1, seal(e.base, e.q, "before")); /* no members: ended at its seal */
    awaited before = {0};
    ASSERT_OK(rjq_batch_await(e.q, "before", 30000, on_awaited, &before));
    ASSERT(loop_until_count(e.base, &before.calls, 1, 10000));
    ASSERT_OK(before.status);
    ASSERT_STREQ("completed", before.state);

    made b = create_batch(e.base, e.q, "after", 0, 0);
    ASSERT_OK(add_member(e.base, e.q, b.id, e.q, NULL, 0).status);
    awaited after = {0}, twice = {0};
    ASSERT_OK(rjq_batch_await(e.q, "after", 30000, on_awaited, &after));
    ASSERT_OK(rjq_batch_await(e.q, "after", 30000, on_awaited, &twice));
    wait_watched(e.base, e.rc, "bw", "after");
    /* one channel for the client's awaits, named once */
    redisReply *r = server_cmd(e.rc, "HGET t:{bw}:batches %s", "after w");
    ASSERT(r->type == REDIS_REPLY_STRING && strchr(r->str, ' ') == NULL);
    freeReplyObject(r);
    ASSERT_EQ(0, after.calls);
    long ran = 0;
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_it, &ran, &w));
    ASSERT(loop_until_count(e.base, &ran, 1, 10000));
    ASSERT_EQ(1, seal(e.base, e.q, "after"));
    ASSERT(loop_until_count(e.base, &after.calls, 1, 10000));
    ASSERT(loop_until_count(e.base, &twice.calls, 1, 10000));
    ASSERT_OK(after.status);
    ASSERT_OK(twice.status);
    ASSERT_STREQ("completed", after.state);
    ASSERT_EQ(1, after.completed);
    ASSERT_EQ(0, batch_watched(e.rc, "bw", "after"));
    quiet_for(e.base, 50, "a second answer");
    ASSERT_EQ(1, after.calls);
    ASSERT_EQ(1, twice.calls);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* The batch ends while the client's subscriber connection is down (killed,
 * the end published to nobody): the resubscription watches it again and
 * the await gets the end from the record, once. */
TEST(batch_await_gets_an_end_published_while_its_pubsub_connection_was_killed) {
    test_env e;
    env_start(&e, "bk");
    ASSERT_OK(create_batch(e.base, e.q, "k", 0, 0).status);
    awaited a = {0};
    ASSERT_OK(rjq_batch_await(e.q, "k", 60000, on_awaited, &a));
    wait_watched(e.base, e.rc, "bk", "k");
    ASSERT(server_int(e.rc, "CLIENT KILL TYPE pubsub") >= 1);
    /* sealed before the loop runs again: the client cannot have
     * resubscribed yet, the end's message reaches nobody */
    freeReplyObject(batch_fcall(e.rc, "bk", "seal", "k", NULL, NULL, NULL));
    ASSERT_EQ(0, batch_watched(e.rc, "bk", "k"));
    ASSERT(loop_until_count(e.base, &a.calls, 1, 20000));
    ASSERT_OK(a.status);
    ASSERT_STREQ("completed", a.state);
    quiet_for(e.base, 50, "a second answer");
    ASSERT_EQ(1, a.calls);
    env_stop(&e);
}

enum { MANY = 1000 };

/* The answers the MANY awaits at a got so far. */
static long answered_of(const awaited *a) {
    long n = 0;
    for (int i = 0; i < MANY; i++) n += a[i].calls;
    return n;
}

/* 1000 awaits made in one loop pass (half of their batches ended already)
 * are watched in one script call, and each ends once when its batch does
 * (the other half sealed in one pass: their ends published). */
TEST(a_thousand_batch_awaits_at_once_are_watched_in_one_call_and_end_once_each) {
    test_env e;
    env_start(&e, "bm");
    for (int i = 0; i < MANY; i++) {
        char id[32];
        snprintf(id, sizeof id, "m%d", i);
        freeReplyObject(batch_fcall(e.rc, "bm", "create", id, "", "", ""));
        if (i % 2) freeReplyObject(batch_fcall(e.rc, "bm", "seal", id, NULL, NULL, NULL));
    }
    awaited *a = calloc(MANY, sizeof *a);
    ASSERT(a != NULL);
    /* the reply channel subscribed first (a warm-up await) */
    awaited warm = {0};
    ASSERT_OK(rjq_batch_await(e.q, "m1", 30000, on_awaited, &warm));
    ASSERT(loop_until_count(e.base, &warm.calls, 1, 10000));
    long long calls = server_calls(e.rc, "fcall");
    for (int i = 0; i < MANY; i++) {
        char id[32];
        snprintf(id, sizeof id, "m%d", i);
        ASSERT_OK(rjq_batch_await(e.q, id, 60000, on_awaited, &a[i]));
    }
    ASSERT_EQ(MANY, rjq_client_count_awaits(e.c));
    WAIT_FOR(e.base, answered_of(a) >= MANY / 2, 20000);
    ASSERT_EQ(MANY / 2, answered_of(a));
    /* one watch call (not one per await; the client's own upkeep aside) */
    ASSERT(server_calls(e.rc, "fcall") - calls <= 3);
    for (int i = 0; i < MANY; i += 2) ASSERT_EQ(0, a[i].calls);
    long sealed = 0;
    for (int i = 0; i < MANY; i += 2) {
        char id[32];
        snprintf(id, sizeof id, "m%d", i);
        ASSERT_OK(rjq_batch_seal(e.q, id, on_done_ok, &sealed));
    }
    ASSERT(loop_until_count(e.base, &sealed, MANY / 2, 20000));
    WAIT_FOR(e.base, answered_of(a) >= MANY, 20000);
    ASSERT_EQ(MANY, answered_of(a));
    for (int i = 0; i < MANY; i++) {
        ASSERT_EQ(1, a[i].calls);
        ASSERT_OK(a[i].status);
        ASSERT_STREQ("completed", a[i].state);
    }
    ASSERT_EQ(0, rjq_client_count_awaits(e.c));
    free(a);
    env_stop(&e);
}

/* What a batch await's callback does to the others. */
typedef struct inside {
    test_env *e;
    awaited seen;
    rjq_await *cancel;  /* a job's await to cancel */
    int free_client;    /* free the client */
} inside;

static void on_inside(rjq_client *c, int status, const rjq_batch_info *info, void *data) {
    inside *x = data;
    on_awaited(c, status, info, &x->seen);
    if (x->cancel) ASSERT_OK(rjq_await_cancel(x->cancel));
    if (x->free_client) {
        rjq_client_free(c);
        x->e->c = NULL;
    }
}

typedef struct job_awaited {
    long calls;
    int status;
} job_awaited;

static void on_job_awaited(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    job_awaited *j = data;
    (void)c, (void)o;
    j->calls++;
    j->status = status;
}

/* From inside a batch await's callback: a job's await cancelled (it ends
 * once, RJQ_ECANCELED), then the client freed (every other await, of a
 * batch or a job, ends once with RJQ_ECANCELED; nothing leaks: ASan). */
TEST(a_batch_await_callback_that_cancels_an_await_or_frees_the_client_ends_each_once) {
    test_env e;
    env_start(&e, "bf");
    ASSERT_OK(create_batch(e.base, e.q, "one", 0, 0).status);
    ASSERT_OK(create_batch(e.base, e.q, "two", 0, 0).status);
    ASSERT_OK(create_batch(e.base, e.q, "left", 0, 0).status);
    job_awaited j1 = {0}, j2 = {0};
    rjq_await *h1;
    rjq_job_options later = RJQ_JOB_OPTIONS_INIT;
    later.delay_ms = 3600000; /* (pending until the client goes) */
    ASSERT_OK(rjq_enqueue_await(e.q, "j", 1, &later, NULL, on_job_awaited, &j1, &h1));
    ASSERT_OK(rjq_enqueue_await(e.q, "j", 1, &later, NULL, on_job_awaited, &j2, NULL));
    inside one = {&e, {0}, h1, 0}, two = {&e, {0}, NULL, 1};
    awaited left = {0};
    ASSERT_OK(rjq_batch_await(e.q, "one", 60000, on_inside, &one));
    ASSERT_OK(rjq_batch_await(e.q, "two", 60000, on_inside, &two));
    ASSERT_OK(rjq_batch_await(e.q, "left", 60000, on_awaited, &left));
    wait_watched(e.base, e.rc, "bf", "two");
    ASSERT_EQ(1, seal(e.base, e.q, "one"));
    ASSERT(loop_until_count(e.base, &one.seen.calls, 1, 10000));
    ASSERT_EQ(1, j1.calls);
    ASSERT_EQ(RJQ_ECANCELED, j1.status);
    freeReplyObject(batch_fcall(e.rc, "bf", "seal", "two", NULL, NULL, NULL));
    ASSERT(loop_until_count(e.base, &two.seen.calls, 1, 10000));
    ASSERT(e.c == NULL);
    ASSERT_OK(two.seen.status);
    ASSERT_EQ(1, left.calls);
    ASSERT_EQ(RJQ_ECANCELED, left.status);
    ASSERT_EQ(1, j2.calls);
    ASSERT_EQ(RJQ_ECANCELED, j2.status);
    ASSERT_EQ(1, one.seen.calls);
    ASSERT_EQ(1, j1.calls);
    env_stop(&e);
}

/* ---- retention and deletion ------------------------------------------------ */

static made create_kept(struct event_base *base, rjq_queue *q, const char *id, long long keep) {
    rjq_batch_options o = RJQ_BATCH_OPTIONS_INIT;
    o.id = id;
    o.on_complete = "done";
    o.on_complete_len = 4;
    o.retention_ms = keep;
    made m = {0};
    ASSERT_OK(rjq_batch_create(q, &o, on_made, &m));
    ASSERT(loop_until_count(base, &m.calls, 1, 10000));
    return m;
}

typedef struct done_status {
    long calls;
    int status;
} done_status;

static void on_done_status(rjq_client *c, int status, void *data) {
    done_status *d = data;
    (void)c;
    d->calls++;
    d->status = status;
}

static int delete_batch(struct event_base *base, rjq_queue *bq, const char *bid, int force) {
    done_status d = {0};
    ASSERT_OK(rjq_batch_delete(bq, bid, force, on_done_status, &d));
    ASSERT(loop_until_count(base, &d.calls, 1, 10000));
    return d.status;
}

/* An ended batch is kept for its retention (the default 24 h, a shorter
 * one, or -1: until deleted); past it reads find no batch and the next
 * batch call on its queue deletes its record and its members' marks. */
TEST(an_ended_batch_is_kept_for_its_retention_then_deleted_with_its_marks) {
    test_env e;
    env_start(&e, "br");
    ASSERT_OK(create_kept(e.base, e.q, "short", 1).status);
    ASSERT_OK(create_kept(e.base, e.q, "usual", 0).status);
    ASSERT_OK(create_kept(e.base, e.q, "kept", -1).status);
    for (int i = 0; i < 2; i++) ASSERT_OK(add_member(e.base, e.q, "short", e.q, NULL, 0).status);
    ASSERT_EQ(1, server_int(e.rc, "EXISTS t:{br}:bm:short"));
    long ran = 0;
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_it, &ran, &w));
    ASSERT(loop_until_count(e.base, &ran, 2, 10000));
    /* "short" sealed last: a seal sweeps due batches, and "short" is due
     * 1 ms after it ends, so a seal after it could delete it before the
     * check below that reads delete nothing */
    ASSERT_EQ(1, seal(e.base, e.q, "usual"));
    ASSERT_EQ(1, seal(e.base, e.q, "kept"));
    ASSERT_EQ(1, seal(e.base, e.q, "short"));
    ASSERT(loop_until_count(e.base, &ran, 5, 10000)); /* the three on_complete jobs */
    batch_got u = get_batch(e.base, e.q, "usual");
    ASSERT_OK(u.status);
    ASSERT_EQ(u.ended_ms + 86400000, server_int(e.rc, "ZSCORE t:{br}:batchend usual"));
    ASSERT_EQ(0, server_int(e.rc, "ZSCORE t:{br}:batchend kept")); /* (nil: not listed) */
    wait_server_clock(e.base, e.rc, 5);
    ASSERT_EQ(RJQ_ENOTFOUND, get_batch(e.base, e.q, "short").status);
    awaited gone = {0};
    ASSERT_OK(rjq_batch_await(e.q, "short", 30000, on_awaited, &gone));
    ASSERT(loop_until_count(e.base, &gone.calls, 1, 10000));
    ASSERT_EQ(RJQ_ENOTFOUND, gone.status);
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{br}:batches short")); /* (reads delete nothing) */
    ASSERT_OK(create_kept(e.base, e.q, "next", 0).status); /* a batch call: the sweep */
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{br}:batches short"));
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{br}:bm:short"));
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{br}:batchend")); /* usual's */
    ASSERT_OK(get_batch(e.base, e.q, "usual").status);
    ASSERT_OK(get_batch(e.base, e.q, "kept").status);
    /* the completion jobs, already enqueued, stayed */
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{br}:state batch:short:complete"));
    worker_stop_wait(e.base, w);
    rjq_batch_options bad = RJQ_BATCH_OPTIONS_INIT;
    bad.retention_ms = -2;
    ASSERT_EQ(RJQ_EINVAL, rjq_batch_create(e.q, &bad, on_made, NULL));
    env_stop(&e);
}

/* rjq_batch_delete refuses a pending batch unless forced; forced, its
 * awaits end (RJQ_ENOTFOUND), its completion job is never enqueued and a
 * member's release finds no batch; an ended batch is deleted as asked. */
TEST(deleting_a_pending_batch_is_refused_unless_forced_and_an_ended_one_goes) {
    test_env e;
    env_start(&e, "bd");
    ASSERT_OK(create_kept(e.base, e.q, "p", 0).status);
    ASSERT_OK(add_member(e.base, e.q, "p", e.q, "later", 3600000).status);
    ASSERT_EQ(RJQ_ESTATE, delete_batch(e.base, e.q, "p", 0));
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "pending") != NULL);
    ASSERT_STREQ("pending", get_batch(e.base, e.q, "p").state);
    awaited a = {0};
    ASSERT_OK(rjq_batch_await(e.q, "p", 60000, on_awaited, &a));
    wait_watched(e.base, e.rc, "bd", "p");
    ASSERT_EQ(1, seal(e.base, e.q, "p"));
    ASSERT_OK(delete_batch(e.base, e.q, "p", 1));
    ASSERT(loop_until_count(e.base, &a.calls, 1, 10000));
    ASSERT_EQ(RJQ_ENOTFOUND, a.status);
    ASSERT_EQ(RJQ_ENOTFOUND, get_batch(e.base, e.q, "p").status);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{bd}:bm:p"));
    ASSERT_EQ(0, server_int(e.rc, "HLEN t:{bd}:batches"));
    /* its member finishing later: the release finds no batch */
    ASSERT_EQ(0, release_code(batch_fcall(e.rc, "bd", "release", "p", "bd", "later", "completed")));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{bd}:state batch:p:complete"));
    ASSERT_EQ(RJQ_ENOTFOUND, delete_batch(e.base, e.q, "p", 1));
    ASSERT_OK(create_kept(e.base, e.q, "ended", -1).status);
    ASSERT_EQ(1, seal(e.base, e.q, "ended"));
    ASSERT_OK(delete_batch(e.base, e.q, "ended", 0));
    ASSERT_EQ(RJQ_ENOTFOUND, get_batch(e.base, e.q, "ended").status);
    ASSERT_EQ(RJQ_EINVAL, rjq_batch_delete(e.q, "bad id", 0, NULL, NULL));
    env_stop(&e);
}

typedef struct dents_seen {
    long calls;
    int status;
    size_t n;
    char queue[64], id[64];
} dents_seen;

static void on_dents(rjq_client *c, int status, const rjq_dep *list, size_t n, void *data) {
    dents_seen *d = data;
    (void)c;
    d->calls++;
    d->status = status;
    d->n = n;
    if (n) {
        snprintf(d->queue, sizeof d->queue, "%s", list[0].queue);
        snprintf(d->id, sizeof d->id, "%s", list[0].id);
    }
}

/* A member not finished yet lists its batch among its dependents (queue
 * "{b}<batch queue>", the batch's id: the dashboard's job page links it;
 * this read failed with RJQ_EPROTO before); a batch's status says which
 * completion jobs it has. */
TEST(a_members_dependents_name_its_batch_and_the_status_its_completion_jobs) {
    test_env e;
    env_start(&e, "bl");
    ASSERT_OK(create_batch(e.base, e.q, "both", 1, 1).status);
    ASSERT_OK(create_batch(e.base, e.q, "none", 0, 0).status);
    ASSERT_OK(add_member(e.base, e.q, "both", e.q, "mem", 3600000).status);
    dents_seen d = {0};
    ASSERT_OK(rjq_queue_get_dependents(e.q, "mem", on_dents, &d));
    ASSERT(loop_until_count(e.base, &d.calls, 1, 10000));
    ASSERT_OK(d.status);
    ASSERT_EQ(1, (long long)d.n);
    ASSERT_STREQ("{b}bl", d.queue);
    ASSERT_STREQ("both", d.id);
    batch_got g = get_batch(e.base, e.q, "both");
    ASSERT_OK(g.status);
    ASSERT_EQ(1, g.on_complete);
    ASSERT_EQ(1, g.on_success);
    g = get_batch(e.base, e.q, "none");
    ASSERT_EQ(0, g.on_complete);
    ASSERT_EQ(0, g.on_success);
    env_stop(&e);
}

/* A batch on one master, members on the two others: each finishing
 * client tells the batch across masters; a member whose finisher died
 * before telling (its cancel run directly on its master) is told by the
 * sweep. */
TEST(members_on_other_masters_of_the_cluster_are_counted_once_each) {
    test_cluster cl;
    cluster_start(&cl, 0);
    char names[CLUSTER_MASTERS][32];
    cluster_spread_names(&cl, "bc", names, 1);
    struct event_base *base = event_base_new();
    rjq_client_options co = client_options(cl.url);
    rjq_client *c = client_new(base, &co);
    rjq_queue *bq, *q1, *q2;
    ASSERT_OK(rjq_queue_open(c, names[0], NULL, &bq));
    ASSERT_OK(rjq_queue_open(c, names[1], NULL, &q1));
    ASSERT_OK(rjq_queue_open(c, names[2], NULL, &q2));
    made b = create_batch(base, bq, "across", 1, 1);
    ASSERT_OK(b.status);
    for (int i = 0; i < 4; i++) ASSERT_OK(add_member(base, bq, b.id, i % 2 ? q1 : q2, NULL, 0).status);
    ASSERT_OK(add_member(base, bq, b.id, q2, "cut", 3600000).status);
    ASSERT_EQ(1, seal(base, bq, b.id));
    long ran = 0;
    rjq_worker_options wo = quiet_worker_options(2);
    wo.reclaim_ms = 50;
    rjq_worker *w1, *w2, *w0;
    ASSERT_OK(rjq_worker_start(q1, &wo, complete_it, &ran, &w1));
    ASSERT_OK(rjq_worker_start(q2, &wo, complete_it, &ran, &w2));
    ASSERT(loop_until_count(base, &ran, 4, 20000));
    WAIT_FOR(base, get_batch(base, bq, b.id).completed == 4, 20000);
    ASSERT_STREQ("pending", get_batch(base, bq, b.id).state);
    /* awaited on the batch queue's master (its own reply channel there,
     * SPUBLISH): watched, then the end published */
    char key[64];
    snprintf(key, sizeof key, "t:{%s}:ready", names[0]);
    redisContext *rc0 = cluster_connect(&cl, cluster_node_of_key(&cl, key));
    awaited aw = {0};
    ASSERT_OK(rjq_batch_await(bq, b.id, 60000, on_awaited, &aw));
    wait_watched(base, rc0, names[0], b.id);
    /* "cut" cancelled by a client that never tells (the script on its master) */
    snprintf(key, sizeof key, "t:{%s}:ready", names[2]);
    redisContext *rc2 = cluster_connect(&cl, cluster_node_of_key(&cl, key));
    server_cancel_fcall(rc2, names[2], "cut");
    WAIT_FOR(base, batch_state_is(base, bq, b.id, "completed"), 20000);
    batch_got g = get_batch(base, bq, b.id);
    ASSERT_EQ(5, g.total);
    ASSERT_EQ(4, g.completed);
    ASSERT_EQ(1, g.cancelled);
    ASSERT(loop_until_count(base, &aw.calls, 1, 20000));
    ASSERT_OK(aw.status);
    ASSERT_STREQ("completed", aw.state);
    long done = 0;
    ASSERT_OK(rjq_worker_start(bq, &wo, complete_it, &done, &w0));
    ASSERT(loop_until_count(base, &done, 2, 20000)); /* on_complete and on_success */
    ASSERT_EQ(2, cluster_int(&cl, rc0, "HGET t:{%s}:stats seq", names[0])); /* each once */
    redisFree(rc0);
    redisFree(rc2);
    worker_stop_wait(base, w0);
    worker_stop_wait(base, w1);
    worker_stop_wait(base, w2);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}

/* 100 000 members, enqueued through rjq_batch_enqueue and run by workers:
 * the batch ends completed, counted once each, and a member's release
 * runs as many commands in this batch as in a batch of one (O(1) per
 * job). */
enum { BIG = 100000 };

typedef struct big_adds {
    long done, failed;
} big_adds;

static void on_big_added(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    big_adds *a = data;
    (void)c, (void)jobs, (void)n;
    a->done++;
    if (status != RJQ_OK) a->failed++;
}

/* The commands of one release of a member to batch bid (added just before). */
static long long release_commands(redisContext *rc, const char *q, const char *bid) {
    ASSERT_EQ(1, add_code(batch_fcall(rc, q, "add", bid, "probe", "p", "")));
    long long before = server_commands_run(rc);
    ASSERT_EQ(1, release_code(batch_fcall(rc, q, "release", bid, "probe", "p", "completed")));
    return server_commands_run(rc) - before - 1; /* (the FCALL) */
}

TEST(a_batch_of_100000_jobs_ends_once_each_counted_at_a_cost_per_job_of_one) {
    test_env e;
    env_start(&e, "bg");
    made small = create_batch(e.base, e.q, "small", 0, 0);
    long long small_cost = release_commands(e.rc, "bg", small.id);
    made b = create_batch(e.base, e.q, "big", 1, 0);
    rjq_queue *qm;
    ASSERT_OK(rjq_queue_open(e.c, "bg-m", NULL, &qm));
    big_adds a = {0};
    for (long i = 0; i < BIG; i++) {
        ASSERT_OK(rjq_batch_enqueue(e.q, b.id, qm, "x", 1, NULL, on_big_added, &a));
        if (i % 1000 == 999) ASSERT(loop_until_count(e.base, &a.done, i + 1 - 2000 > 0 ? i + 1 - 2000 : 0, 60000));
    }
    ASSERT(loop_until_count(e.base, &a.done, BIG, 60000));
    ASSERT_EQ(0, a.failed);
    ASSERT_EQ(BIG, get_batch(e.base, e.q, b.id).total);
    /* a release in a batch of 100 000 costs what it costs in a batch of one */
    long long big_cost = release_commands(e.rc, "bg", b.id);
    printf("commands per release: batch of 1: %lld, of 100 000: %lld\n", small_cost, big_cost);
    ASSERT_EQ(small_cost, big_cost);
    long ran = 0;
    rjq_worker_options wo = quiet_worker_options(64);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(qm, &wo, complete_it, &ran, &w));
    ASSERT_EQ(1, seal(e.base, e.q, b.id));
    ASSERT(loop_until_count(e.base, &ran, BIG, 120000));
    WAIT_FOR(e.base, batch_state_is(e.base, e.q, b.id, "completed"), 60000);
    batch_got g = get_batch(e.base, e.q, b.id);
    ASSERT_EQ(BIG + 1, g.completed); /* (and the probe) */
    ASSERT_EQ(BIG + 1, g.total);
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{bg}:payload batch:big:complete"));
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* ---- listing (rjq_batch_list) and the periodic sweep ----------------------- */

typedef struct listed_page {
    long calls;
    int status;
    size_t n;
    char ids[1000][32];
    char states[1000][16];
    long long created[1000];
    char next[128];
    int has_next;
} listed_page;

static void on_listed_page(rjq_client *c, int status, const rjq_batch_info *b, size_t n,
                           const char *next, void *data) {
    listed_page *p = data;
    (void)c;
    p->calls++;
    p->status = status;
    p->n = n;
    ASSERT(status == RJQ_OK || (b == NULL && n == 0 && next == NULL));
    for (size_t i = 0; i < n && i < 1000; i++) {
        const rjq_batch_info *e = rjq_batch_info_get(b, i);
        snprintf(p->ids[i], sizeof p->ids[i], "%s", e->id);
        snprintf(p->states[i], sizeof p->states[i], "%s", e->state);
        p->created[i] = e->created_ms;
    }
    p->has_next = next != NULL;
    snprintf(p->next, sizeof p->next, "%s", next ? next : "");
}

static listed_page *list_page(struct event_base *base, rjq_queue *bq, const char *state,
                              const char *after, long limit) {
    listed_page *p = calloc(1, sizeof *p);
    ASSERT(p != NULL);
    ASSERT_OK(rjq_batch_list(bq, state, after, limit, on_listed_page, p));
    ASSERT(loop_until_count(base, &p->calls, 1, 10000));
    ASSERT_OK(p->status);
    return p;
}

/* The page's ids joined by spaces. */
static const char *page_ids(const listed_page *p, char *out, size_t size) {
    out[0] = '\0';
    for (size_t i = 0; i < p->n; i++)
        snprintf(out + strlen(out), size - strlen(out), "%s%s", i ? " " : "", p->ids[i]);
    return out;
}

/* A batch created in a later millisecond of the server's clock than the
 * one before (waits for the clock, not for a fixed time). */
static void create_next_ms(test_env *e, const char *id) {
    wait_server_clock(e->base, e->rc, 1);
    ASSERT_OK(create_batch(e->base, e->q, id, 0, 0).status);
}

/* Every allocation of a member's enqueue and of an await call made to
 * fail in turn, and of a listing (armed around the call, as the other tests do: a
 * connection's own allocation failing in the loop aborts by the
 * rjq_io_ops contract): each call either is refused at once (no
 * callback) or calls back exactly once; nothing leaks (ASan, valgrind).
 * The batch's counts stay those of the members that joined. (Armed across
 * the loop, an earlier form found an await's poll using its freed
 * waiter.) */
TEST(an_allocation_failing_anywhere_in_a_batch_call_ends_it_once) {
    test_env e;
    env_start(&e, "bo");
    ASSERT_OK(create_batch(e.base, e.q, "oom", 0, 0).status);
    long joined = 0, sent = 0;
    for (long n = 0;; n++) {
        char id[32];
        snprintf(id, sizeof id, "m%ld", n);
        rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
        o.id = id;
        o.delay_ms = 3600000;
        added a = {0};
        failalloc_arm_once(n);
        int rc = rjq_batch_enqueue(e.q, "oom", e.q, "x", 1, &o, on_added, &a);
        failalloc_disarm();
        if (rc == RJQ_OK) ASSERT(loop_until_count(e.base, &a.calls, 1, 10000));
        ASSERT_EQ(rc == RJQ_OK ? 1 : 0, a.calls);
        if (rc == RJQ_OK) sent++;
        if (rc == RJQ_OK && a.status == RJQ_OK) joined++;
        if (failalloc_failures() == 0) break;
        ASSERT(n < 1000);
    }
    ASSERT(joined >= 1);
    for (long n = 0;; n++) {
        awaited w = {0};
        failalloc_arm_once(n);
        int rc = rjq_batch_await(e.q, "oom", 1, on_awaited, &w);
        failalloc_disarm();
        if (rc == RJQ_OK) ASSERT(loop_until_count(e.base, &w.calls, 1, 10000));
        ASSERT_EQ(rc == RJQ_OK ? 1 : 0, w.calls);
        if (failalloc_failures() == 0) break;
        ASSERT(n < 1000);
    }
    for (long n = 0;; n++) {
        listed_page *p = calloc(1, sizeof *p);
        ASSERT(p != NULL);
        failalloc_arm_once(n);
        int rc = rjq_batch_list(e.q, NULL, NULL, 10, on_listed_page, p);
        failalloc_disarm();
        if (rc == RJQ_OK) ASSERT(loop_until_count(e.base, &p->calls, 1, 10000));
        ASSERT_EQ(rc == RJQ_OK ? 1 : 0, p->calls);
        int failures = failalloc_failures();
        free(p);
        if (failures == 0) break;
        ASSERT(n < 1000);
    }
    batch_got g = get_batch(e.base, e.q, "oom");
    /* every member reported joined counts; one whose callback failed may
     * have joined (a failure after its add was written) or not */
    ASSERT(g.total >= joined && g.total <= sent);
    env_stop(&e);
}

TEST(batch_list_gives_batches_newest_first_in_pages_by_cursor_none_skipped_or_repeated) {
    test_env e;
    env_start(&e, "bl");
    const char *names[] = {"b1", "b2", "b3", "b4", "b5"};
    for (int i = 0; i < 5; i++) create_next_ms(&e, names[i]);
    char buf[256];
    listed_page *p1 = list_page(e.base, e.q, NULL, NULL, 2);
    ASSERT_STREQ("b5 b4", page_ids(p1, buf, sizeof buf));
    ASSERT(p1->has_next);
    ASSERT(p1->created[0] > p1->created[1]);
    /* between two pages: one listed already and one not listed yet are
     * deleted, a newer one is created; the next page goes on from its place */
    ASSERT_OK(delete_batch(e.base, e.q, "b4", 1));
    ASSERT_OK(delete_batch(e.base, e.q, "b2", 1));
    create_next_ms(&e, "b6");
    listed_page *p2 = list_page(e.base, e.q, NULL, p1->next, 2);
    ASSERT_STREQ("b3 b1", page_ids(p2, buf, sizeof buf));
    ASSERT(p2->has_next); /* (a full page: the next one says it is over) */
    listed_page *p3 = list_page(e.base, e.q, NULL, p2->next, 2);
    ASSERT_EQ(0, p3->n);
    ASSERT(!p3->has_next);
    listed_page *all = list_page(e.base, e.q, NULL, "", 1000);
    ASSERT_STREQ("b6 b5 b3 b1", page_ids(all, buf, sizeof buf));
    ASSERT(!all->has_next);
    free(p1);
    free(p2);
    free(p3);
    free(all);
    env_stop(&e);
}

/* Each state's listing holds the batches in it, as they end; a batch's
 * index entries are two, written with its record (O(1) per batch). */
TEST(batch_list_by_state_follows_each_batch_as_it_ends) {
    test_env e;
    env_start(&e, "bs");
    create_next_ms(&e, "p");
    create_next_ms(&e, "c");
    create_next_ms(&e, "d");
    ASSERT_EQ(6, server_int(e.rc, "ZCARD t:{bs}:batchlist"));
    char buf[256];
    listed_page *pend = list_page(e.base, e.q, "pending", NULL, 10);
    ASSERT_STREQ("d c p", page_ids(pend, buf, sizeof buf));
    ASSERT_STREQ("pending", pend->states[0]);
    /* c: sealed empty, it ends completed; d: a member that died, dead */
    seal(e.base, e.q, "c");
    ASSERT(batch_state_is(e.base, e.q, "c", "completed"));
    ASSERT_EQ(1, add_code(batch_fcall(e.rc, "bs", "add", "d", "bs", "x", "dead")));
    seal(e.base, e.q, "d");
    ASSERT(batch_state_is(e.base, e.q, "d", "dead"));
    listed_page *pp = list_page(e.base, e.q, "pending", NULL, 10);
    listed_page *cc = list_page(e.base, e.q, "completed", NULL, 10);
    listed_page *dd = list_page(e.base, e.q, "dead", NULL, 10);
    listed_page *any = list_page(e.base, e.q, NULL, NULL, 10);
    ASSERT_STREQ("p", page_ids(pp, buf, sizeof buf));
    ASSERT_STREQ("c", page_ids(cc, buf, sizeof buf));
    ASSERT_STREQ("completed", cc->states[0]);
    ASSERT_STREQ("d", page_ids(dd, buf, sizeof buf));
    ASSERT_STREQ("dead", dd->states[0]);
    ASSERT_STREQ("d c p", page_ids(any, buf, sizeof buf));
    ASSERT_EQ(6, server_int(e.rc, "ZCARD t:{bs}:batchlist")); /* two per batch */
    free(pend);
    free(pp);
    free(cc);
    free(dd);
    free(any);
    env_stop(&e);
}

/* A page reads its state's entries only: a dead batch among 2000 pending
 * ones is found with a page of one, and the listing of dead ones is over
 * after it. */
TEST(batch_list_of_a_state_reads_that_states_entries_whatever_the_others) {
    test_env e;
    env_start(&e, "bo");
    create_next_ms(&e, "gone");
    ASSERT_EQ(1, add_code(batch_fcall(e.rc, "bo", "add", "gone", "bo", "x", "dead")));
    seal(e.base, e.q, "gone");
    for (int i = 0; i < 2000; i++) {
        char id[32];
        snprintf(id, sizeof id, "open-%d", i);
        redisReply *r = batch_fcall(e.rc, "bo", "create", id, "", "", "");
        ASSERT(r->type == REDIS_REPLY_ARRAY);
        freeReplyObject(r);
    }
    ASSERT_EQ(2001, server_int(e.rc, "ZLEXCOUNT t:{bo}:batchlist [a: [a;"));
    ASSERT_EQ(2000, server_int(e.rc, "ZLEXCOUNT t:{bo}:batchlist [p: [p;"));
    char buf[64];
    listed_page *d = list_page(e.base, e.q, "dead", NULL, 1);
    ASSERT_STREQ("gone", page_ids(d, buf, sizeof buf));
    listed_page *d2 = list_page(e.base, e.q, "dead", d->next, 1);
    ASSERT_EQ(0, d2->n);
    ASSERT(!d2->has_next);
    free(d);
    free(d2);
    env_stop(&e);
}

/* An ended batch past its retention is not listed (as rjq_batch_get finds
 * none), and its index entries go with its record; so do a deleted one's. */
TEST(batch_list_leaves_out_batches_past_their_retention_and_deleted_ones) {
    test_env e;
    env_start(&e, "bx");
    ASSERT_OK(create_kept(e.base, e.q, "short", 1).status);
    create_next_ms(&e, "stays");
    seal(e.base, e.q, "short");
    wait_server_clock(e.base, e.rc, 5);
    char buf[64];
    listed_page *p = list_page(e.base, e.q, NULL, NULL, 10);
    ASSERT_STREQ("stays", page_ids(p, buf, sizeof buf));
    listed_page *c = list_page(e.base, e.q, "completed", NULL, 10);
    ASSERT_EQ(0, c->n);
    ASSERT_EQ(4, server_int(e.rc, "ZCARD t:{bx}:batchlist")); /* (reads delete nothing) */
    seal(e.base, e.q, "stays"); /* a batch call: it sweeps "short" */
    ASSERT_EQ(2, server_int(e.rc, "ZCARD t:{bx}:batchlist"));
    ASSERT_OK(delete_batch(e.base, e.q, "stays", 0));
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{bx}:batchlist"));
    free(p);
    free(c);
    env_stop(&e);
}

static void on_list_never(rjq_client *c, int status, const rjq_batch_info *b, size_t n,
                          const char *next, void *data) {
    (void)c, (void)status, (void)b, (void)n, (void)next, (void)data;
    ASSERT(0);
}

TEST(batch_list_refuses_bad_arguments_with_no_call) {
    test_env e;
    env_start(&e, "bb");
    ASSERT_EQ(RJQ_EINVAL, rjq_batch_list(NULL, NULL, NULL, 10, on_list_never, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_batch_list(e.q, NULL, NULL, 10, NULL, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_batch_list(e.q, "waiting", NULL, 10, on_list_never, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_batch_list(e.q, NULL, NULL, 0, on_list_never, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_batch_list(e.q, NULL, NULL, 1001, on_list_never, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_batch_list(e.q, NULL, "nope", 10, on_list_never, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_batch_list(e.q, NULL, "000000000000001:a b", 10, on_list_never, NULL));
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "batch list") != NULL);
    loop_turn(e.base);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{bb}:batchlist"));
    env_stop(&e);
}

/* The client freed with a listing in flight: its callback gets
 * RJQ_ECANCELED (or its answer, when it came first), once. */
TEST(batch_list_in_flight_when_the_client_is_freed_ends_once) {
    test_env e;
    env_start(&e, "bf");
    listed_page *p = calloc(1, sizeof *p);
    ASSERT_OK(rjq_batch_list(e.q, NULL, NULL, 10, on_listed_page, p));
    rjq_client_free(e.c);
    e.c = NULL;
    ASSERT_EQ(1, p->calls);
    ASSERT(p->status == RJQ_ECANCELED || p->status == RJQ_OK);
    free(p);
    env_stop(&e);
}

/* With no batch call at all (no create, add, seal or delete), an ended
 * batch past its retention is deleted by the queue's periodic visit (a
 * worker's), with its marks and index entries. */
TEST(an_ended_batch_past_its_retention_is_deleted_by_the_periodic_visit_without_a_batch_call) {
    test_env e;
    env_start(&e, "bv");
    ASSERT_OK(create_kept(e.base, e.q, "short", 1).status);
    ASSERT_OK(create_kept(e.base, e.q, "long", 0).status);
    ASSERT_EQ(1, add_code(batch_fcall(e.rc, "bv", "add", "short", "bv", "x", "completed")));
    ASSERT_EQ(1, seal(e.base, e.q, "long"));
    ASSERT_EQ(1, seal(e.base, e.q, "short")); /* (last: no later batch call sweeps it) */
    ASSERT_EQ(1, server_int(e.rc, "EXISTS t:{bv}:bm:short"));
    wait_server_clock(e.base, e.rc, 5);
    rjq_worker_options wo = quiet_worker_options(1);
    wo.reclaim_ms = 50;
    long ran = 0;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_it, &ran, &w));
    WAIT_FOR(e.base, server_int(e.rc, "HEXISTS t:{bv}:batches short") == 0, 10000);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{bv}:bm:short"));
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{bv}:batchend"));   /* long's: not due */
    ASSERT_EQ(2, server_int(e.rc, "ZCARD t:{bv}:batchlist"));  /* long's */
    ASSERT_OK(get_batch(e.base, e.q, "long").status);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* The visit's reclaim call says when an ended batch is due (4 among its
 * flags), reading one entry of batchend; a wrongly typed batchend stops
 * no reclaim (the batch calls refuse it, not the visit). */
static long long visit_flags(redisContext *rc, const char *q) {
    char prefix[64], wake[64];
    snprintf(prefix, sizeof prefix, "t:{%s}:job:", q);
    snprintf(wake, sizeof wake, "t:{%s}:wake", q);
    const char *args[] = {prefix, wake, "0", "1000", "1000", "3600000", "0", "1", "0.5"};
    redisReply *r = server_fcall(rc, RJQ__S_RECLAIM, q, args, 9);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
           r->element[2]->type == REDIS_REPLY_INTEGER);
    long long v = r->element[2]->integer;
    freeReplyObject(r);
    return v;
}

TEST(the_visit_says_when_an_ended_batch_is_due_and_a_wrongly_typed_batchend_stops_no_reclaim) {
    test_env e;
    env_start(&e, "bw");
    ASSERT_EQ(0, visit_flags(e.rc, "bw"));
    freeReplyObject(server_cmd(e.rc, "ZADD t:{bw}:batchend 99999999999999 later"));
    ASSERT_EQ(0, visit_flags(e.rc, "bw"));
    freeReplyObject(server_cmd(e.rc, "ZADD t:{bw}:batchend 1 due"));
    ASSERT_EQ(4, visit_flags(e.rc, "bw"));
    freeReplyObject(server_cmd(e.rc, "DEL t:{bw}:batchend"));
    freeReplyObject(server_cmd(e.rc, "SET t:{bw}:batchend x"));
    ASSERT_EQ(0, visit_flags(e.rc, "bw"));
    env_stop(&e);
}

/* A queue that never had a batch pays nothing for them on its periodic
 * visit: its one EXISTS (depsfin, batchend) finds neither key, and
 * batchend is not read; once the key exists, its first entry is read. */
TEST(the_visit_of_a_queue_that_never_had_a_batch_reads_no_batch_key) {
    test_env e;
    env_start(&e, "bx");
    freeReplyObject(server_cmd(e.rc, "CONFIG RESETSTAT"));
    ASSERT_EQ(0, visit_flags(e.rc, "bx"));
    long long ranges = server_calls(e.rc, "zrangebyscore");
    ASSERT_EQ(1, server_calls(e.rc, "exists"));
    freeReplyObject(server_cmd(e.rc, "ZADD t:{bx}:batchend 99999999999999 later"));
    freeReplyObject(server_cmd(e.rc, "CONFIG RESETSTAT"));
    ASSERT_EQ(0, visit_flags(e.rc, "bx"));
    ASSERT_EQ(ranges + 1, server_calls(e.rc, "zrangebyscore")); /* (batchend's first entry) */
    ASSERT_EQ(1, server_calls(e.rc, "exists"));
    /* depsfin there, batchend not: the sweep of releases is said, no batch */
    freeReplyObject(server_cmd(e.rc, "DEL t:{bx}:batchend"));
    freeReplyObject(server_cmd(e.rc, "ZADD t:{bx}:depsfin 1 j"));
    ASSERT_EQ(1, visit_flags(e.rc, "bx"));
    freeReplyObject(server_cmd(e.rc, "ZADD t:{bx}:batchend 1 due"));
    ASSERT_EQ(5, visit_flags(e.rc, "bx"));
    freeReplyObject(server_cmd(e.rc, "DEL t:{bx}:depsfin"));
    ASSERT_EQ(4, visit_flags(e.rc, "bx"));
    env_stop(&e);
}

/* rjq.h rjq_stats.exists: "1 when anything of the queue is in Redis". A
 * queue with nothing but batches (or group settings, schedules, dedup
 * reservations, history) exists, with zeros: serve's page of it is not a
 * 404 "does not exist". */
TEST(stats_of_a_queue_with_nothing_but_batches_say_it_exists_with_zeros) {
    test_env e;
    env_start(&e, "bo");
    ASSERT_EQ(0, get_stats(e.base, e.q).exists);
    made m = create_batch(e.base, e.q, "b1", 1, 0);
    ASSERT_EQ(RJQ_OK, m.status);
    rjq_stats st = get_stats(e.base, e.q);
    ASSERT_EQ(1, st.exists);
    ASSERT_EQ(0, st.enqueued);
    ASSERT_EQ(0, st.ready + st.delayed + st.active + st.dead_depth + st.waiting);
    ASSERT_EQ(0, st.paused);
    /* each other key that alone makes a queue */
    static const char *const only[] = {
        "ZADD t:{bo}:dedup 99999999999999 j", "HSET t:{bo}:batches 0 1",
        "HSET t:{bo}:schedules s x",          "HSET t:{bo}:hist:m 1 x",
        "HSET t:{bo}:hist:h 1 x",             "ZADD t:{bo}:g:all 0 g",
        "HSET t:{bo}:g:act ~ 0",              "HSET t:{bo}:g:conf * 2",
    };
    for (size_t i = 0; i < sizeof only / sizeof only[0]; i++) {
        freeReplyObject(server_cmd(e.rc, "EVAL %s 0 %s",
                                   "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do "
                                   "redis.call('DEL', k) end",
                                   "t:{bo}:*"));
        ASSERT_EQ(0, get_stats(e.base, e.q).exists);
        freeReplyObject(server_cmd(e.rc, only[i]));
        st = get_stats(e.base, e.q);
        if (st.exists != 1) fprintf(stderr, "not counted: %s\n", only[i]);
        ASSERT_EQ(1, st.exists);
        ASSERT_EQ(0, st.ready + st.delayed + st.active + st.dead_depth + st.waiting);
    }
    env_stop(&e);
}

/* A batch made by an rjq older than the listing's index (none of its
 * entries) is listed in no state, also once it ended, and ends as before. */
TEST(a_batch_made_before_the_listing_index_is_listed_in_no_state_and_ends_as_before) {
    test_env e;
    env_start(&e, "bn");
    ASSERT_OK(create_batch(e.base, e.q, "old", 0, 0).status);
    freeReplyObject(server_cmd(e.rc, "DEL t:{bn}:batchlist")); /* (as an older rjq left it) */
    seal(e.base, e.q, "old");
    ASSERT(batch_state_is(e.base, e.q, "old", "completed"));
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{bn}:batchlist"));
    listed_page *c = list_page(e.base, e.q, "completed", NULL, 10);
    ASSERT_EQ(0, c->n);
    free(c);
    ASSERT_OK(delete_batch(e.base, e.q, "old", 0));
    env_stop(&e);
}
