/*
 * Job dependencies (issue 39, rjq.h "Dependencies"): a job enqueued with
 * `after` waits (state "waiting") until every dependency finished, across
 * queues; a dependency finished before the registration counts at once;
 * the policies for a dependency that ended dead or cancelled; a release
 * sent again is counted once; bad input is refused with nothing written.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster.h"
#include "fixture.h"
#include "harness.h"
#include "proxy.h"
#include "rjq_scripts.h"
#include "server.h"
#include "waits.h"

/* (finishing_a_job_without_dependencies_costs_what_it_did; the
 * completion 10 since its count of retained jobs decides the sweep: no
 * HMGET of stats before it) */
#define COMPLETION_COMMANDS 10
#define FAILURE_COMMANDS 28
/* (failure_past_the_dead_cap_without_dependents_costs_no_command_more: a
 * failure to dead whose trim deletes one record; 41 before the trim kept
 * jobs with dependents to release, and 41 since: the trim asks the
 * dependents hash's TYPE only when the failure's EXISTS probe found it) */
#define TRIMMING_FAILURE_COMMANDS 41

/* A handler that completes its job at once, noting the order of ids. */
typedef struct ran {
    char order[256];
    long n;
} ran;

static void complete_it(rjq_job *job, void *data) {
    ran *r = data;
    const char *id = rjq_job_get_id(job);
    note_id(r->order, sizeof r->order, id);
    r->n++;
    ASSERT_OK(rjq_job_complete(job, "ok", 2, NULL, NULL));
}

/* A handler that fails its job for good. */
static void bury_it(rjq_job *job, void *data) {
    long *n = data;
    (*n)++;
    ASSERT_OK(rjq_job_fail(job, "boom", RJQ_FAIL_FATAL, 0, NULL, NULL));
}

static enqueue_wait enqueue_after(test_env *e, rjq_queue *q, const char *id, const rjq_dep *deps,
                                  size_t n, int policy) {
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = id;
    o.after = deps;
    o.n_after = n;
    o.after_policy = policy;
    return enqueue_job(e->base, q, "p", &o);
}

static rjq_queue *open_queue(test_env *e, const char *name) {
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(e->c, name, NULL, &q));
    return q;
}

static int state_is(test_env *e, rjq_queue *q, const char *id, const char *want) {
    return strcmp(get_info(e->base, q, id).state, want) == 0;
}

TEST(chain_across_two_queues_runs_in_order) {
    test_env e;
    env_start(&e, "da");
    rjq_queue *qb = open_queue(&e, "db");
    enqueue_x_ok(e.base, e.q, "a", 3600000, 0); /* held back: delayed an hour */
    rjq_dep on_a = {"da", "a"}, on_b = {"db", "b"};
    enqueue_wait w = enqueue_after(&e, qb, "b", &on_a, 1, RJQ_AFTER_FAIL);
    ASSERT_OK(w.status);
    ASSERT_STREQ("b", w.id);
    ASSERT_EQ(0, w.existed);
    ASSERT_OK(enqueue_after(&e, e.q, "c", &on_b, 1, RJQ_AFTER_FAIL).status);
    ASSERT_STREQ("waiting", get_info(e.base, qb, "b").state);
    ASSERT_STREQ("waiting", get_info(e.base, e.q, "c").state);
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{db}:waiting"));
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{da}:waiting"));
    ASSERT_EQ(0, server_int(e.rc, "LLEN t:{db}:ready"));
    ran r = {{0}, 0};
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *wa, *wb;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_it, &r, &wa));
    ASSERT_OK(rjq_worker_start(qb, &wo, complete_it, &r, &wb));
    count_wait p = {0};
    ASSERT_OK(rjq_queue_promote(e.q, "a", on_count, &p)); /* a runs now */
    ASSERT(loop_until_count(e.base, &r.n, 3, 10000));
    ASSERT_STREQ("a,b,c", r.order);
    WAIT_FOR(e.base, state_is(&e, e.q, "c", "completed"), 10000);
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{da}:waiting"));
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{db}:waiting"));
    /* the dependents' lists went once released */
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{da}:dependents t:{db}:dependents") == 0, 10000);
    worker_stop_wait(e.base, wa);
    worker_stop_wait(e.base, wb);
    env_stop(&e);
}

TEST(dependency_finished_before_registration_counts_at_once) {
    test_env e;
    env_start(&e, "df");
    enqueue_x_ok(e.base, e.q, "a", 0, 0);
    ran r = {{0}, 0};
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_it, &r, &w));
    ASSERT(loop_until_count(e.base, &r.n, 1, 10000));
    WAIT_FOR(e.base, state_is(&e, e.q, "a", "completed"), 10000);
    rjq_dep on_a = {"df", "a"};
    ASSERT_OK(enqueue_after(&e, e.q, "b", &on_a, 1, RJQ_AFTER_FAIL).status);
    /* the enqueue's callback came after its release: b is no longer waiting */
    ASSERT(strcmp(get_info(e.base, e.q, "b").state, "waiting") != 0);
    ASSERT(loop_until_count(e.base, &r.n, 2, 10000));
    ASSERT_STREQ("a,b", r.order);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{df}:dependents"));
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

static void on_cancel_wait(rjq_client *c, int status, const char *state, void *data) {
    (void)c, (void)state;
    *(int *)data = status == RJQ_OK ? 1 : -1;
}

TEST(cancelled_dependency_applies_each_policy) {
    test_env e;
    env_start(&e, "dp");
    rjq_queue *q2 = open_queue(&e, "dp2");
    enqueue_x_ok(e.base, e.q, "x", 3600000, 0);
    enqueue_x_ok(e.base, e.q, "y", 3600000, 0);
    rjq_dep both[2] = {{"dp", "x"}, {"dp", "y"}};
    ASSERT_OK(enqueue_after(&e, q2, "f", both, 2, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, q2, "r", both, 2, RJQ_AFTER_RUN).status);
    ASSERT_OK(enqueue_after(&e, q2, "i", both, 2, RJQ_AFTER_IGNORE).status);
    int done = 0;
    ASSERT_OK(rjq_queue_cancel(e.q, "x", on_cancel_wait, &done));
    ASSERT(loop_until(e.base, &done, 5000));
    ASSERT_EQ(1, done);
    /* fail: dead at once, naming the dependency */
    WAIT_FOR(e.base, state_is(&e, q2, "f", "dead"), 10000);
    info_wait f = get_info(e.base, q2, "f");
    ASSERT_STREQ("dependency dp:x ended cancelled", f.error);
    /* run and ignore: still waiting for y */
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{dp}:dependents") == 1 &&
                     server_int(e.rc, "ZCARD t:{dp2}:waiting") == 2, 10000);
    ASSERT_STREQ("waiting", get_info(e.base, q2, "r").state);
    ASSERT_STREQ("waiting", get_info(e.base, q2, "i").state);
    redisReply *d = server_cmd(e.rc, "HGET t:{dp2}:deps i");
    ASSERT(d->type == REDIS_REPLY_STRING && strstr(d->str, "\n- dp x") != NULL);
    freeReplyObject(d);
    d = server_cmd(e.rc, "HGET t:{dp2}:deps r");
    ASSERT(d->type == REDIS_REPLY_STRING && strstr(d->str, "\nx dp x") != NULL);
    freeReplyObject(d);
    /* y ends dead by its handler: r and i run, f stays dead */
    long buried = 0;
    count_wait p = {0};
    ASSERT_OK(rjq_queue_promote(e.q, "y", on_count, &p));
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *wy, *w2;
    ASSERT_OK(rjq_worker_start(e.q, &wo, bury_it, &buried, &wy));
    ran r = {{0}, 0};
    ASSERT_OK(rjq_worker_start(q2, &wo, complete_it, &r, &w2));
    ASSERT(loop_until_count(e.base, &r.n, 2, 10000));
    ASSERT(strcmp(r.order, "r,i") == 0 || strcmp(r.order, "i,r") == 0);
    ASSERT_EQ(1, buried);
    ASSERT_STREQ("dead", get_info(e.base, q2, "f").state);
    worker_stop_wait(e.base, wy);
    worker_stop_wait(e.base, w2);
    env_stop(&e);
}

TEST(dead_dependency_under_policy_fail_buries_its_chain) {
    test_env e;
    env_start(&e, "dd");
    enqueue_x_ok(e.base, e.q, "a", 0, 0);
    rjq_dep on_a = {"dd", "a"}, on_b = {"dd", "b"};
    ASSERT_OK(enqueue_after(&e, e.q, "b", &on_a, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, e.q, "c", &on_b, 1, RJQ_AFTER_FAIL).status);
    long buried = 0;
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, bury_it, &buried, &w));
    WAIT_FOR(e.base, state_is(&e, e.q, "c", "dead"), 10000);
    ASSERT_EQ(1, buried); /* only a ran */
    ASSERT_STREQ("dependency dd:a ended dead", get_info(e.base, e.q, "b").error);
    ASSERT_STREQ("dependency dd:b ended dead", get_info(e.base, e.q, "c").error);
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{dd}:waiting"));
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* What a handler read with rjq_job_dependencies (copies). */
typedef struct read_deps {
    int status, calls;
    size_t n;
    char line[8][128]; /* "<queue>:<id> <state> <counted> <result|-> <error|->" */
    char policy[8][8]; /* each element's (the job's after_policy) */
    long ran;
} read_deps;

typedef struct read_job {
    read_deps *rd;
    rjq_job *job;
} read_job;

static void on_dependencies(rjq_client *c, int status, const rjq_dep_outcome *deps, size_t n,
                            void *data) {
    (void)c;
    read_job *rj = data;
    read_deps *rd = rj->rd;
    rd->status = status;
    rd->calls++;
    rd->n = n;
    for (size_t i = 0; status == RJQ_OK && i < n && i < 8; i++) {
        const rjq_dep_outcome *o = rjq_dep_outcome_get(deps, i);
        snprintf(rd->line[i], sizeof rd->line[i], "%s:%s %s %s %.*s %s", o->queue, o->id, o->state,
                 o->counted, o->result ? (int)o->result_len : 1,
                 o->result ? (const char *)o->result : "-", o->error ? o->error : "-");
        snprintf(rd->policy[i], sizeof rd->policy[i], "%s", o->policy ? o->policy : "NULL");
    }
    ASSERT_OK(rjq_job_complete(rj->job, "ok", 2, NULL, NULL));
    free(rj);
    rd->ran++;
}

/* A handler that reads its dependencies, then completes its job. */
static void read_then_complete(rjq_job *job, void *data) {
    read_job *rj = malloc(sizeof *rj);
    ASSERT(rj != NULL);
    rj->rd = data;
    rj->job = job;
    ASSERT_OK(rjq_job_dependencies(job, on_dependencies, rj));
}

static void complete_with_result(rjq_job *job, void *data) {
    (*(long *)data)++;
    ASSERT_OK(rjq_job_complete(job, "r-a", 3, NULL, NULL));
}

TEST(handler_reads_its_dependencies_outcomes_across_queues) {
    test_env e;
    env_start(&e, "rd");
    rjq_queue *q2 = open_queue(&e, "rd2");
    rjq_queue *q3 = open_queue(&e, "rd3");
    enqueue_x_ok(e.base, e.q, "a", 0, 0);
    enqueue_x_ok(e.base, q2, "b", 3600000, 0);
    /* (a listed twice: both lines are counted by its one release) */
    rjq_dep on[4] = {{"rd", "a"}, {"rd2", "b"}, {"rd2", "nosuch"}, {"rd", "a"}};
    ASSERT_OK(enqueue_after(&e, q3, "c", on, 4, RJQ_AFTER_RUN).status);
    enqueue_x_ok(e.base, q3, "plain", 3600000, 0);
    long na = 0, nb = 0;
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *wa, *wb, *wc;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_with_result, &na, &wa));
    ASSERT(loop_until_count(e.base, &na, 1, 10000));
    ASSERT_OK(rjq_worker_start(q2, &wo, bury_it, &nb, &wb));
    count_wait p = {0};
    ASSERT_OK(rjq_queue_promote(q2, "b", on_count, &p));
    ASSERT(loop_until_count(e.base, &nb, 1, 10000));
    read_deps rd;
    memset(&rd, 0, sizeof rd);
    ASSERT_OK(rjq_worker_start(q3, &wo, read_then_complete, &rd, &wc));
    ASSERT(loop_until_count(e.base, &rd.ran, 1, 10000));
    ASSERT_OK(rd.status);
    ASSERT_EQ(4, (long)rd.n);
    ASSERT_STREQ("rd:a completed completed r-a -", rd.line[0]);
    ASSERT_STREQ("rd2:b dead dead - boom", rd.line[1]);
    ASSERT_STREQ("rd2:nosuch missing missing - -", rd.line[2]);
    ASSERT_STREQ("rd:a completed completed r-a -", rd.line[3]);
    for (int i = 0; i < 4; i++) ASSERT_STREQ("run", rd.policy[i]); /* its after_policy */
    WAIT_FOR(e.base, state_is(&e, q3, "c", "completed"), 10000);
    /* a job without dependencies reads none */
    memset(&rd, 0, sizeof rd);
    ASSERT_OK(rjq_queue_promote(q3, "plain", on_count, &p));
    ASSERT(loop_until_count(e.base, &rd.ran, 1, 10000));
    ASSERT_OK(rd.status);
    ASSERT_EQ(0, (long)rd.n);
    ASSERT_EQ(1, rd.calls);
    ASSERT_EQ(RJQ_EINVAL, rjq_job_dependencies(NULL, on_dependencies, NULL));
    worker_stop_wait(e.base, wa);
    worker_stop_wait(e.base, wb);
    worker_stop_wait(e.base, wc);
    env_stop(&e);
}

/* A record deleted after it released its dependent (retention): the
 * handler still learns how it ended, from the dependent's own list. */
TEST(dependency_deleted_after_release_reads_missing_counted_as_it_ended) {
    test_env e;
    env_start(&e, "rm");
    enqueue_x_ok(e.base, e.q, "a", 3600000, 0);
    enqueue_x_ok(e.base, e.q, "b", 3600000, 0);
    rjq_queue *q2 = open_queue(&e, "rm2");
    rjq_dep on[2] = {{"rm", "a"}, {"rm", "b"}};
    ASSERT_OK(enqueue_after(&e, q2, "c", on, 2, RJQ_AFTER_IGNORE).status);
    int done = 0;
    ASSERT_OK(rjq_queue_cancel(e.q, "b", on_cancel_wait, &done));
    ASSERT(loop_until(e.base, &done, 5000));
    long na = 0;
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_with_result, &na, &w));
    count_wait p = {0};
    ASSERT_OK(rjq_queue_promote(e.q, "a", on_count, &p));
    WAIT_FOR(e.base, state_is(&e, q2, "c", "ready"), 10000);
    worker_stop_wait(e.base, w);
    /* the records of a and b go (as retention deletes them) */
    freeReplyObject(server_cmd(e.rc, "HDEL t:{rm}:payload a b"));
    freeReplyObject(server_cmd(e.rc, "HDEL t:{rm}:state a b"));
    read_deps rd;
    memset(&rd, 0, sizeof rd);
    ASSERT_OK(rjq_worker_start(q2, &wo, read_then_complete, &rd, &w));
    ASSERT(loop_until_count(e.base, &rd.ran, 1, 10000));
    ASSERT_OK(rd.status);
    ASSERT_EQ(2, (long)rd.n);
    ASSERT_STREQ("rm:a missing completed - -", rd.line[0]);
    ASSERT_STREQ("rm:b missing ignored - -", rd.line[1]);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* A queue handle opened just now holds its calls until it knows whether
 * the queue is sharded: an enqueue with dependencies made then was
 * refused (RJQ_EINVAL, "invalid job options") instead of held; it is
 * held, with its own copy of the dependencies, and sent once it knows. */
TEST(enqueue_with_dependencies_on_a_just_opened_queue_is_held_not_refused) {
    test_env e;
    env_start(&e, "dh");
    char qname[8] = "dh2", dq[8] = "dh", did[8] = "a";
    enqueue_x_ok(e.base, e.q, "a", 3600000, 0);
    rjq_queue *q2 = open_queue(&e, qname);
    rjq_dep on = {dq, did};
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "b";
    o.after = &on;
    o.n_after = 1;
    enqueue_wait w;
    memset(&w, 0, sizeof w);
    ASSERT_OK(rjq_enqueue(q2, "p", 1, &o, on_enqueue_wait, &w));
    memset(dq, 'x', 2); /* the caller's strings are its own once the call returned */
    memset(did, 'x', 1);
    ASSERT(loop_until(e.base, &w.done, 10000));
    ASSERT_OK(w.status);
    ASSERT_STREQ("waiting", get_info(e.base, q2, "b").state);
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{dh}:dependents a"));
    env_stop(&e);
}

/* deps_release called as the client calls it (its function). */
static redisReply *release_fcall(redisContext *rc, const char *q, const char *id, const char *dq,
                                 const char *did, const char *outcome) {
    char prefix[48], wake[48];
    snprintf(prefix, sizeof prefix, "t:{%s}:job:", q);
    snprintf(wake, sizeof wake, "t:{%s}:wake", q);
    const char *args[] = {prefix, wake, "1000", id, dq, did, outcome};
    return server_fcall_reply(rc, RJQ__S_DEPS_RELEASE, q, args, sizeof args / sizeof args[0]);
}

TEST(release_sent_again_is_counted_once) {
    test_env e;
    env_start(&e, "dr");
    enqueue_x_ok(e.base, e.q, "a1", 3600000, 0);
    enqueue_x_ok(e.base, e.q, "a2", 3600000, 0);
    rjq_dep two[2] = {{"dr", "a1"}, {"dr", "a2"}};
    ASSERT_OK(enqueue_after(&e, e.q, "b", two, 2, RJQ_AFTER_FAIL).status);
    redisReply *r = release_fcall(e.rc, "dr", "b", "dr", "a1", "completed");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    ASSERT_EQ(1, r->element[0]->integer); /* counted, a2 pending */
    freeReplyObject(r);
    r = release_fcall(e.rc, "dr", "b", "dr", "a1", "completed");
    ASSERT_EQ(0, r->element[0]->integer); /* sent again: nothing changed */
    freeReplyObject(r);
    ASSERT_STREQ("waiting", get_info(e.base, e.q, "b").state);
    r = release_fcall(e.rc, "dr", "b", "dr", "a2", "completed");
    ASSERT_EQ(2, r->element[0]->integer); /* released */
    freeReplyObject(r);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "b").state);
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{dr}:ready"));
    r = release_fcall(e.rc, "dr", "b", "dr", "a2", "completed");
    ASSERT_EQ(0, r->element[0]->integer);
    freeReplyObject(r);
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{dr}:ready")); /* not twice */
    env_stop(&e);
}

TEST(bad_dependencies_are_refused_with_nothing_written) {
    test_env e;
    env_start(&e, "db");
    long long keys = server_int(e.rc, "DBSIZE");
    char longname[260];
    memset(longname, 'q', 201);
    longname[201] = '\0';
    rjq_dep bad_queue = {longname, "a"}, braces = {"a{b}", "a"}, bad_id = {"db", "a b"};
    rjq_dep no_queue = {NULL, "a"}, empty_id = {"db", ""};
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    const rjq_dep *each[] = {&bad_queue, &braces, &bad_id, &no_queue, &empty_id};
    for (size_t i = 0; i < sizeof each / sizeof each[0]; i++) {
        o.after = each[i];
        o.n_after = 1;
        ASSERT_EQ(RJQ_EINVAL, rjq_enqueue(e.q, "p", 1, &o, on_enqueue_wait, NULL));
    }
    static rjq_dep many[RJQ_AFTER_MAX + 1];
    for (size_t i = 0; i <= RJQ_AFTER_MAX; i++) many[i] = (rjq_dep){"db", "a"};
    o.after = many;
    o.n_after = RJQ_AFTER_MAX + 1;
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue(e.q, "p", 1, &o, on_enqueue_wait, NULL));
    o.n_after = 0; /* after without a count */
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue(e.q, "p", 1, &o, on_enqueue_wait, NULL));
    o.n_after = 1;
    o.after_policy = 3;
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue(e.q, "p", 1, &o, on_enqueue_wait, NULL));
    o.after_policy = RJQ_AFTER_FAIL;
    o.id = "x";
    o.debounce = 1;
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue(e.q, "p", 1, &o, on_enqueue_wait, NULL));
    o.debounce = 0;
    /* a group with dependencies: the message says so (it named "delay,
     * priority, attempts, backoff or timeout": after_with_group_names_the_group) */
    o.group = "g";
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue(e.q, "p", 1, &o, on_enqueue_wait, NULL));
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "no group") != NULL);
    o.group = NULL;
    /* a batch item with dependencies */
    rjq_enqueue_item it = RJQ_ENQUEUE_ITEM_INIT;
    it.payload = "p";
    it.len = 1;
    it.opts = &o;
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue_batch(e.q, &it, 1, on_enqueue_wait, NULL));
    /* (a round trip: anything sent would have run by now) */
    ASSERT_EQ(keys, server_int(e.rc, "DBSIZE"));
    env_stop(&e);
}

/* rjq_enqueue_cb's promise for a job with dependencies refused by the
 * server (deps_add on a wrongly typed deps hash): an error and n == 0,
 * jobs NULL (it was n == 1 with jobs NULL: a callback reading jobs[0] for
 * n > 0, as on_enqueue_wait does, crashed), nothing written. */
TEST(enqueue_with_dependencies_refused_by_the_server_reports_no_job) {
    test_env e;
    env_start(&e, "dw");
    freeReplyObject(server_cmd(e.rc, "SET t:{dw}:deps x"));
    rjq_dep on_a = {"dw", "a"};
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "b";
    o.after = &on_a;
    o.n_after = 1;
    enqueue_wait w = enqueue_job(e.base, e.q, "p", &o);
    ASSERT_EQ(1, w.done);
    ASSERT_EQ(RJQ_EWRONGTYPE, w.status);
    ASSERT_EQ(0, (long)w.n);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{dw}:payload t:{dw}:state t:{dw}:waiting"));
    env_stop(&e);
}

/* A job with dependencies is checked as any enqueue (rjq__enqueue_check):
 * a NULL payload with a length and one over max_payload are refused with
 * nothing written, and the queue's job_timeout_ms is its timeout as it is
 * a plain job's (its stored options are the plain job's). */
TEST(job_with_dependencies_is_checked_and_stored_as_any_enqueue) {
    test_env e;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.job_timeout_ms = 4321;
    env_start_queue(&e, "dk", &qo);
    long long keys = server_int(e.rc, "DBSIZE");
    rjq_dep dep = {"dk", "pending"};
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.after = &dep;
    o.n_after = 1;
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue(e.q, NULL, 5, &o, on_enqueue_wait, NULL));
    rjq_client_options co = client_options(e.s.url);
    co.max_payload = 4;
    rjq_client *small = client_new(e.base, &co);
    rjq_queue *sq;
    ASSERT_OK(rjq_queue_open(small, "dk", NULL, &sq));
    ASSERT_EQ(RJQ_ETOOBIG, rjq_enqueue(sq, "12345", 5, &o, on_enqueue_wait, NULL));
    ASSERT(strstr(rjq_client_get_errmsg(small), "exceeds max_payload 4") != NULL);
    rjq_client_free(small);
    ASSERT_EQ(keys, server_int(e.rc, "DBSIZE")); /* (nothing sent) */
    ASSERT_OK(enqueue_after(&e, e.q, "waits", &dep, 1, RJQ_AFTER_FAIL).status);
    rjq_job_options plain = RJQ_JOB_OPTIONS_INIT;
    plain.id = "plain";
    plain.delay_ms = 3600000; /* (not run: its options only) */
    ASSERT_OK(enqueue_job(e.base, e.q, "p", &plain).status);
    redisReply *a = server_cmd(e.rc, "HGET t:{dk}:options waits");
    redisReply *b = server_cmd(e.rc, "HGET t:{dk}:options plain");
    ASSERT_EQ(REDIS_REPLY_STRING, a->type);
    ASSERT_EQ(REDIS_REPLY_STRING, b->type);
    ASSERT(strstr(a->str, "4321") != NULL);
    ASSERT_STREQ(b->str, a->str);
    freeReplyObject(a);
    freeReplyObject(b);
    env_stop(&e);
}

/* A worker on q that runs nothing, its queue's periodic visit (which
 * sweeps the dependents) every 50 ms. */
static rjq_worker *sweeping_worker(rjq_queue *q) {
    rjq_worker_options wo = quiet_worker_options(1);
    wo.reclaim_ms = 50;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, never_runs, NULL, &w));
    return w;
}

TEST(sweep_releases_dependents_whose_finisher_died_before_telling_them) {
    test_env e;
    env_start(&e, "ds");
    rjq_queue *q2 = open_queue(&e, "ds2");
    enqueue_x_ok(e.base, e.q, "a", 3600000, 0);
    rjq_dep on_a = {"ds", "a"};
    ASSERT_OK(enqueue_after(&e, q2, "b", &on_a, 1, RJQ_AFTER_RUN).status);
    server_cancel_fcall(e.rc, "ds", "a");
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{ds}:dependents a")); /* untold */
    ASSERT_STREQ("waiting", get_info(e.base, q2, "b").state);
    /* a worker on ds: its queue's periodic visit sweeps */
    rjq_worker *w = sweeping_worker(e.q);
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{ds}:dependents") == 0, 10000);
    ASSERT_STREQ("ready", get_info(e.base, q2, "b").state);
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{ds2}:ready")); /* released once */
    redisReply *d = server_cmd(e.rc, "HGET t:{ds2}:deps b");
    ASSERT(d->type == REDIS_REPLY_STRING && strstr(d->str, "\nx ds a") != NULL);
    freeReplyObject(d);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* Job j of queue q as a claim leaves it: active, attempt 1, token "tok". */
static void plant_active(redisContext *rc, const char *q, const char *j) {
    freeReplyObject(server_cmd(rc, "HSET t:{%s}:payload %s x", q, j));
    freeReplyObject(server_cmd(rc, "HSET t:{%s}:state %s %s", q, j, "active 1 tok @1,2,"));
    freeReplyObject(server_cmd(rc, "ZADD t:{%s}:active 99999999999999 %s", q, j));
}

/* Job a of e's queue as a claim leaves it (plant_active), and job id of
 * queue other (opened: returned) waiting for it under policy. */
static rjq_queue *other_waits_on_active_a(test_env *e, const char *other, const char *id,
                                          int policy) {
    const char *q = rjq_queue_get_name(e->q);
    rjq_queue *q2 = open_queue(e, other);
    plant_active(e->rc, q, "a");
    rjq_dep on_a = {q, "a"};
    ASSERT_OK(enqueue_after(e, q2, id, &on_a, 1, policy).status);
    return q2;
}

/* Complete job j of queue q, planted by plant_active, as its worker's
 * completion would (one FCALL of the completion script: lease "1 tok",
 * result "r"), keeping completed jobs retention_ms ("-1": no age limit)
 * and at most cap of them ("0": no cap). The script's reply, to free. */
static redisReply *complete_planted(redisContext *rc, const char *q, const char *j,
                                    const char *retention_ms, const char *cap) {
    char prefix[32];
    snprintf(prefix, sizeof prefix, "t:{%s}:job:", q);
    const char *args[] = {prefix, retention_ms, cap, "0", "0", "1 tok", "1", j, "r"}; /* (a run of 1 job) */
    return server_fcall(rc, RJQ__S_COMPLETE, q, args, 9);
}

/* Job a of queue q (e's) and its dependent p on q2 (policy) as a worker
 * killed between a's completion and p's release leaves them: the
 * completion script ran (keeping completed jobs retention_ms), nothing
 * more; its reply told of the dependent to release. */
static void completed_before_its_release(test_env *e, const char *q, rjq_queue *q2, int policy,
                                         const char *retention_ms) {
    plant_active(e->rc, q, "a");
    rjq_dep on_a = {q, "a"};
    ASSERT_OK(enqueue_after(e, q2, "p", &on_a, 1, policy).status);
    redisReply *r = complete_planted(e->rc, q, "a", retention_ms, "0");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    ASSERT_EQ(3, r->element[0]->integer); /* done, with dependents to release: */
    ASSERT_STREQ("a", r->element[1]->str); /* its id and its entry, in the reply */
    char entry[64];
    snprintf(entry, sizeof entry, "%s p", rjq_queue_get_name(q2));
    ASSERT_STREQ(entry, r->element[2]->str); /* (no deps_due call) */
    freeReplyObject(r);
}

/* Registration is race-free (README "Dependencies and batches", step 2):
 * the dependency completes between the dependent's deps_add (ran, its
 * reply held back by the proxy) and its registration (deps_watch, sent
 * only once that reply came). The completion finds no dependent to tell;
 * the registration finds the job completed and answers it, and the
 * enqueuing client counts it at once: the dependent is released, once,
 * with no sweep (no worker runs anywhere here). */
TEST(dependency_completed_between_the_dependents_write_and_its_registration_counts_at_once) {
    test_env e;
    proxy p;
    env_start_proxied(&e, &p, "rr", NULL);
    rjq_queue *q2 = open_queue(&e, "rr2");
    (void)get_info(e.base, q2, "none"); /* (its queue known: nothing left to ask before the enqueue) */
    plant_active(e.rc, "rr", "a");
    proxy_hold(&p, 1);
    rjq_dep on_a = {"rr", "a"};
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "p";
    o.after = &on_a;
    o.n_after = 1;
    enqueue_wait ew;
    memset(&ew, 0, sizeof ew);
    ASSERT_OK(rjq_enqueue(q2, "p", 1, &o, on_enqueue_wait, &ew));
    /* deps_add ran (its reply held): p waits, registered nowhere */
    WAIT_FOR(e.base, server_int(e.rc, "ZCARD t:{rr2}:waiting") == 1, 10000);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{rr}:dependents"));
    /* a completes now: nobody to tell */
    redisReply *r = complete_planted(e.rc, "rr", "a", "-1", "0");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->integer == 1);
    freeReplyObject(r);
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{rr2}:waiting"));
    ASSERT_EQ(0, server_int(e.rc, "LLEN t:{rr2}:ready"));
    proxy_hold(&p, 0);
    ASSERT(loop_until(e.base, &ew.done, 10000));
    ASSERT_OK(ew.status);
    /* the enqueue's callback came after the release */
    ASSERT_STREQ("ready", get_info(e.base, q2, "p").state);
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{rr2}:ready"));
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{rr2}:waiting"));
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{rr}:dependents t:{rr}:depsfin"));
    deps_lines rd = dependencies_of(e.base, q2, "p");
    ASSERT_OK(rd.status);
    ASSERT_EQ(1, (long)rd.n);
    ASSERT_STREQ("rr:a completed completed", rd.line[0]);
    env_stop_proxied(&e, &p);
}

/* A same-queue dependent's enqueue on a wrongly typed dependents hash
 * (written behind rjq's back) is refused naming it, with nothing written:
 * no job, no pin anywhere (DEPS.register_ids writes the pin with the
 * entries, after deps_add's type checks); its callback gets the error with
 * no job (n 0: it was called with n 1 and no jobs array). */
TEST(same_queue_enqueue_on_a_wrongtype_dependents_hash_writes_nothing_not_even_the_pin) {
    test_env e;
    env_start(&e, "dw");
    plant_active(e.rc, "dw", "a");
    freeReplyObject(server_cmd(e.rc, "SET t:{dw}:dependents x"));
    /* (the keys of the queue's slot: t:queues, the client's list of
     * queues, is written by its first call whatever the call does) */
    long long keys = server_int(e.rc, "DBSIZE") - server_int(e.rc, "EXISTS t:queues");
    rjq_dep on_a = {"dw", "a"};
    enqueue_wait w = enqueue_after(&e, e.q, "b", &on_a, 1, RJQ_AFTER_FAIL);
    ASSERT_EQ(RJQ_EWRONGTYPE, w.status);
    ASSERT_EQ(0, (long long)w.n); /* (rjq.h: an error has n == 0; it had 1, jobs NULL) */
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "t:{dw}:dependents holds a string") != NULL);
    ASSERT_EQ(keys, server_int(e.rc, "DBSIZE") - server_int(e.rc, "EXISTS t:queues"));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{dw}:payload b"));
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{dw}:waiting t:{dw}:deps"));
    redisReply *v = server_cmd(e.rc, "GET t:{dw}:dependents");
    ASSERT(v->type == REDIS_REPLY_STRING);
    ASSERT_STREQ("x", v->str);
    freeReplyObject(v);
    env_stop(&e);
}

/* deps_add checks the stats hash's type by its HMGET of the counter it
 * writes (int_fields) and the payload column's by its HMGET of the
 * caller's ids (no TYPE for them): either key wrongly typed (written
 * behind rjq's back) is refused naming it, with nothing written, for a
 * caller's id and for a numbered one (no caller id: the payload column's
 * TYPE then). */
TEST(enqueue_with_dependencies_on_wrongtype_stats_or_payload_column_writes_nothing) {
    static const char *const keys_bad[] = {"t:{dw}:stats", "t:{dw}:payload"};
    for (int k = 0; k < 2; k++) {
        for (int given = 0; given < 2; given++) {
            test_env e;
            env_start(&e, "dw");
            redisReply *r = redisCommand(e.rc, "SET %s x", keys_bad[k]);
            freeReplyObject(r);
            long long keys = server_int(e.rc, "DBSIZE") - server_int(e.rc, "EXISTS t:queues");
            rjq_dep on_a = {"dw", "a"};
            enqueue_wait w = enqueue_after(&e, e.q, given ? "b" : NULL, &on_a, 1, RJQ_AFTER_FAIL);
            ASSERT_EQ(RJQ_EWRONGTYPE, w.status);
            ASSERT_EQ(0, (long long)w.n);
            char want[64];
            snprintf(want, sizeof want, "%s holds a string", keys_bad[k]);
            ASSERT(strstr(rjq_client_get_errmsg(e.c), want) != NULL);
            ASSERT_EQ(keys, server_int(e.rc, "DBSIZE") - server_int(e.rc, "EXISTS t:queues"));
            ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{dw}:state t:{dw}:waiting t:{dw}:deps t:{dw}:dependents"));
            env_stop(&e);
        }
    }
}

/* The commands a plain job's completion and failure run are what they
 * were before dependencies (counted on main, 8ad0e37, with the same
 * test): the finishing scripts learn of dependents from the watchers
 * column they read anyway. */
TEST(finishing_a_job_without_dependencies_costs_what_it_did) {
    test_env e;
    env_start(&e, "pc");
    plant_active(e.rc, "pc", "j");
    plant_active(e.rc, "pc", "k");
    long long before = server_commands_run(e.rc);
    redisReply *r = complete_planted(e.rc, "pc", "j", "-1", "0");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->integer == 1);
    freeReplyObject(r);
    long long completion = server_commands_run(e.rc) - before - 1; /* (the FCALL) */
    before = server_commands_run(e.rc);
    const char *failed[] = {"t:{pc}:job:", "t:{pc}:wake", "k", "tok", "boom", "1", "-1", "0", "1000"};
    r = server_fcall(e.rc, RJQ__S_FAIL, "pc", failed, 9);
    ASSERT(r->type == REDIS_REPLY_INTEGER && r->integer == 2);
    freeReplyObject(r);
    long long failure = server_commands_run(e.rc) - before - 1;
    printf("commands: completion %lld, failure to dead %lld\n", completion, failure);
    ASSERT_EQ(COMPLETION_COMMANDS, completion);
    ASSERT_EQ(FAILURE_COMMANDS, failure);
    env_stop(&e);
}

/* The commands of a completion whose retention sweep deletes one record
 * (cap 1: the second completion sweeps the first job), on queue q. */
static long long sweeping_completion_commands(test_env *e, const char *q) {
    plant_active(e->rc, q, "j");
    plant_active(e->rc, q, "k");
    freeReplyObject(complete_planted(e->rc, q, "j", "-1", "1"));
    long long before = server_commands_run(e->rc);
    redisReply *r = complete_planted(e->rc, q, "k", "-1", "1");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->integer == 1);
    freeReplyObject(r);
    long long n = server_commands_run(e->rc) - before - 1; /* (the FCALL) */
    ASSERT_EQ(0, server_int(e->rc, "HEXISTS t:{%s}:state j", q)); /* swept */
    return n;
}

/* The retention sweep of a queue where no job waited for dependencies
 * (no deps hash: its TYPE says so) sends no HDEL there; where one did, the
 * record's deps entry goes with it (one HDEL more). */
TEST(retention_sweep_sends_no_deps_hdel_on_a_queue_without_dependencies) {
    test_env e;
    env_start(&e, "rh");
    long long plain = sweeping_completion_commands(&e, "rh");
    freeReplyObject(server_cmd(e.rc, "HSET t:{rh2}:deps other x"));
    long long with_deps = sweeping_completion_commands(&e, "rh2");
    printf("commands: sweeping completion %lld, with a deps hash %lld\n", plain, with_deps);
    ASSERT_EQ(plain + 1, with_deps);
    env_stop(&e);
}

/* ---- dependents of the same queue: counted by their dependency's own
 * finishing script (complete.lua, fail.lua: DEPS.finished in lib.lua) and
 * registered by their own enqueue (deps_add.lua, in its own loop as
 * DEPS.register does it). */

/* complete.lua as the client calls it: planted active jobs ids (n of them,
 * token "tok") of queue q completed in one call, no offers. */
static redisReply *complete_fcall(redisContext *rc, const char *q, const char *const *ids,
                                  size_t n) {
    char prefix[48];
    snprintf(prefix, sizeof prefix, "t:{%s}:job:", q);
    char count[24];
    snprintf(count, sizeof count, "%zu", n);
    const char *args[32] = {prefix, "-1", "0", "0", "0", "1 tok", count}; /* (one run: one tail) */
    size_t k = 7;
    for (size_t i = 0; i < n && k + 2 <= 32; i++) {
        args[k++] = ids[i];
        args[k++] = "r";
    }
    return server_fcall(rc, RJQ__S_COMPLETE, q, args, k);
}

/* complete.lua's call of the jobs ids of q (complete_fcall), each answered
 * 1 (completed, nothing left to the client). */
static void assert_completes_each(redisContext *rc, const char *q, const char *const *ids,
                                  size_t n) {
    redisReply *r = complete_fcall(rc, q, ids, n);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == n);
    for (size_t i = 0; i < n; i++) ASSERT_EQ(1, r->element[i]->integer);
    freeReplyObject(r);
}

/* A completion of SPARSE_MIN (4) jobs or more asks whether the watchers
 * column exists in its EXISTS probe (complete.lua, drl36): without one it
 * sends no command for it (one fewer than with it: its HMGET), with one
 * the watched job's watcher is still told and its entry deleted. */
TEST(batch_completion_asks_the_watchers_column_in_its_probe_and_still_tells_a_watcher) {
    test_env e;
    env_start(&e, "wp");
    const char *first[] = {"w", "x", "y", "z"}; /* (its publish learns the server's pub/sub) */
    for (int i = 0; i < 4; i++) plant_active(e.rc, "wp", first[i]);
    freeReplyObject(server_cmd(e.rc, "HSET t:{wp}:watchers y t:{wp}:reply:ab12"));
    assert_completes_each(e.rc, "wp", first, 4);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{wp}:watchers")); /* told: its entry deleted */
    const char *four[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++) plant_active(e.rc, "wp", four[i]);
    long long before = server_commands_run(e.rc);
    assert_completes_each(e.rc, "wp", four, 4);
    long long plain = server_commands_run(e.rc) - before;
    const char *four2[] = {"e", "f", "g", "h"};
    for (int i = 0; i < 4; i++) plant_active(e.rc, "wp", four2[i]);
    freeReplyObject(server_cmd(e.rc, "HSET t:{wp}:watchers g t:{wp}:reply:ab12"));
    before = server_commands_run(e.rc);
    assert_completes_each(e.rc, "wp", four2, 4);
    long long watched = server_commands_run(e.rc) - before;
    printf("commands: 4-job completion %lld, with a watcher %lld\n", plain, watched);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{wp}:watchers")); /* told */
    /* (with the column: the probe's second EXISTS, its HMGET, the PUBLISH
     * and the HDEL) */
    ASSERT_EQ(plain + 4, watched);
    env_stop(&e);
}

/* Job a of queue q (e's) planted active (plant_active) and b enqueued
 * after it in the same queue (policy fail): a's completion releases b. */
static void b_after_active_a(test_env *e, const char *q) {
    plant_active(e->rc, q, "a");
    rjq_dep on_a = {q, "a"};
    ASSERT_OK(enqueue_after(e, e->q, "b", &on_a, 1, RJQ_AFTER_FAIL).status);
}

/* fail.lua as the client calls it: planted active job id of q failed for
 * good (fatal). Returns its code. */
/* (fail_fcall: the entries of its last array reply, "id=entry;...") */
static char fail_entries[256];

static long long fail_fcall(redisContext *rc, const char *q, const char *id) {
    char prefix[48], wake[48];
    snprintf(prefix, sizeof prefix, "t:{%s}:job:", q);
    snprintf(wake, sizeof wake, "t:{%s}:wake", q);
    const char *args[] = {prefix, wake, id, "tok", "boom", "1", "-1", "0", "1000"};
    redisReply *r = server_fcall(rc, RJQ__S_FAIL, q, args, 9);
    fail_entries[0] = '\0';
    if (r->type == REDIS_REPLY_ARRAY) { /* { 5, (id, dependents entry)... } */
        ASSERT(r->elements >= 3 && r->elements % 2 == 1);
        ASSERT_EQ(5, r->element[0]->integer);
        for (size_t i = 1; i < r->elements; i += 2) {
            size_t at = strlen(fail_entries);
            snprintf(fail_entries + at, sizeof fail_entries - at, "%s%s=%s", at ? ";" : "",
                     r->element[i]->str, r->element[i + 1]->str);
        }
        freeReplyObject(r);
        return 5;
    }
    ASSERT(r->type == REDIS_REPLY_INTEGER);
    long long code = r->integer;
    freeReplyObject(r);
    return code;
}

/* Whether job id's dependencies list (deps column) of queue q has line. */
static int deps_line(redisContext *rc, const char *q, const char *id, const char *line) {
    redisReply *d = server_cmd(rc, "HGET t:{%s}:deps %s", q, id);
    int yes = d->type == REDIS_REPLY_STRING && strstr(d->str, line) != NULL;
    freeReplyObject(d);
    return yes;
}

/* A dependent of the same queue is registered by its own enqueue (one
 * script call: no deps_watch) and released by its dependency's completion
 * in that call: the reply leaves the client nothing to do for it (code 1,
 * no entry), the dependents entry goes, nothing is indexed for the sweep.
 * A dependent of another queue of the same job stays the client's (code
 * 3, its entry left alone). A completion sent again after a lost reply
 * releases nothing twice. */
TEST(same_queue_dependent_is_released_by_its_dependencys_completion_once) {
    test_env e;
    env_start(&e, "sq");
    rjq_queue *q2 = open_queue(&e, "sq2");
    plant_active(e.rc, "sq", "a");
    plant_active(e.rc, "sq", "k");
    rjq_dep on_a = {"sq", "a"}, on_k = {"sq", "k"};
    ASSERT_OK(enqueue_after(&e, q2, "warm", &on_k, 1, RJQ_AFTER_FAIL).status); /* (handles opened) */
    long long calls = server_script_calls(e.rc);
    enqueue_wait w = enqueue_after(&e, e.q, "b", &on_a, 1, RJQ_AFTER_FAIL);
    ASSERT_OK(w.status);
    ASSERT_EQ(0, w.existed);
    ASSERT_EQ(calls + 1, server_script_calls(e.rc)); /* deps_add alone */
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{sq}:dependents a"));
    ASSERT_OK(enqueue_after(&e, e.q, "c", &on_k, 1, RJQ_AFTER_FAIL).status);
    ASSERT_STREQ("waiting", get_info(e.base, e.q, "b").state);
    const char *both[] = {"a", "k"};
    redisReply *r = complete_fcall(e.rc, "sq", both, 2);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4);
    ASSERT_EQ(1, r->element[0]->integer);       /* a: its dependent released here */
    ASSERT_EQ(3, r->element[1]->integer);       /* k: one left, of another queue */
    ASSERT_STREQ("k", r->element[2]->str);
    ASSERT_STREQ("sq2 warm", r->element[3]->str); /* (c's line gone from it) */
    freeReplyObject(r);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "b").state);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "c").state);
    ASSERT(deps_line(e.rc, "sq", "b", "\nw sq a")); /* (all completed: reads c, not rewritten) */
    ASSERT_EQ(2, server_int(e.rc, "LLEN t:{sq}:ready"));
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{sq}:waiting"));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{sq}:dependents a"));
    redisReply *left = server_cmd(e.rc, "HGET t:{sq}:dependents k");
    ASSERT(left->type == REDIS_REPLY_STRING);
    ASSERT_STREQ("sq2 warm", left->str);
    freeReplyObject(left);
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{sq}:depsfin")); /* k only */
    /* sent again (its reply lost): nothing released twice */
    assert_completes_each(e.rc, "sq", both, 2);
    ASSERT_EQ(2, server_int(e.rc, "LLEN t:{sq}:ready"));
    ASSERT_STREQ("waiting", get_info(e.base, q2, "warm").state); /* (the client's) */
    env_stop(&e);
}

/* A key the release would write holds a wrong type (written behind rjq's
 * back): the completion still completes, counts nothing in its queue
 * (nothing cut off halfway) and leaves the whole entry to the client's
 * deps_release, which refuses it as before (the sweep tries again). */
TEST(same_queue_release_with_a_wrongly_typed_key_is_left_whole_to_the_client) {
    test_env e;
    env_start(&e, "sw");
    b_after_active_a(&e, "sw");
    freeReplyObject(server_cmd(e.rc, "SET t:{sw}:delayed x"));
    const char *one[] = {"a"};
    redisReply *r = complete_fcall(e.rc, "sw", one, 1);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    ASSERT_EQ(3, r->element[0]->integer);
    ASSERT_STREQ("sw b", r->element[2]->str);
    freeReplyObject(r);
    ASSERT_STREQ("completed", get_info(e.base, e.q, "a").state);
    ASSERT_STREQ("waiting", get_info(e.base, e.q, "b").state);
    ASSERT(deps_line(e.rc, "sw", "b", "\nw sw a"));
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{sw}:dependents a"));
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{sw}:depsfin")); /* for the sweep */
    env_stop(&e);
}

/* (same_queue_release_costs_a_fixed_number_of_commands: 30 before its
 * released job's list rewrite and options read were cut when its last
 * dependency completed, deps15; 28 then; 30 since dl39: the HLEN after the
 * entry's HDEL and the pin's HDEL, the dependents hash going with its last
 * entry, lib.lua DEPS.forget) */
#define SAME_QUEUE_RELEASE_COMMANDS 30

/* The commands a completion runs to release one dependent of its queue,
 * over a plain completion's (COMPLETION_COMMANDS): fixed, and instead of
 * the client's deps_release and deps_done calls. */
TEST(same_queue_release_costs_a_fixed_number_of_commands) {
    test_env e;
    env_start(&e, "sc");
    b_after_active_a(&e, "sc");
    long long before = server_commands_run(e.rc);
    const char *one[] = {"a"};
    assert_completes_each(e.rc, "sc", one, 1);
    long long n = server_commands_run(e.rc) - before - 1; /* (the FCALL) */
    printf("commands: completion releasing a dependent of its queue %lld (plain %d)\n", n,
           COMPLETION_COMMANDS);
    ASSERT_EQ(SAME_QUEUE_RELEASE_COMMANDS, n);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "b").state);
    env_stop(&e);
}

/* A dependent of the dependency's own queue leaves no watchers mark (its
 * dependents entry is what the finishing scripts read): the lean
 * completion (complete_one.lua) still hands such a job to complete.lua
 * (-2, nothing written), and a cancel still releases the dependent by its
 * policy, as the mark made them do. */
TEST(same_queue_dependency_has_no_watchers_mark_and_every_finisher_finds_its_dependents) {
    test_env e;
    env_start(&e, "nm");
    plant_active(e.rc, "nm", "a");
    enqueue_x_ok(e.base, e.q, "x", 3600000, 0);
    rjq_dep on_a = {"nm", "a"}, on_x = {"nm", "x"};
    ASSERT_OK(enqueue_after(&e, e.q, "b", &on_a, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, e.q, "y", &on_x, 1, RJQ_AFTER_RUN).status);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{nm}:watchers"));
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{nm}:dependents a"));
    /* the lean completion refuses a (its entry), writes nothing */
    const char *lean[] = {"t:{nm}:job:", "-1", "0", "", "0", "0", "0", "a", "1 tok", "r"};
    redisReply *r = server_fcall(e.rc, RJQ__S_COMPLETE_ONE, "nm", lean, 10);
    ASSERT(r->type == REDIS_REPLY_INTEGER);
    ASSERT_EQ(-2, r->integer);
    freeReplyObject(r);
    ASSERT_STREQ("active", get_info(e.base, e.q, "a").state);
    const char *one[] = {"a"};
    assert_completes_each(e.rc, "nm", one, 1);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "b").state);
    /* a cancel of x releases y (policy run) */
    int done = 0;
    ASSERT_OK(rjq_queue_cancel(e.q, "x", on_cancel_wait, &done));
    ASSERT(loop_until(e.base, &done, 5000));
    WAIT_FOR(e.base, state_is(&e, e.q, "y", "ready"), 10000);
    env_stop(&e);
}

/* A dependent of another queue leaves no watchers mark on its dependency
 * either (depoq: the registration writes its dependents entry only, as
 * for one of the same queue): the lean completion still hands the job to
 * complete.lua (-2, nothing written), whose reply still carries the entry
 * to the client (code 3, the job indexed in depsfin for the sweep). */
TEST(other_queue_dependency_has_no_watchers_mark_and_its_completion_still_hands_its_dependent_to_the_client) {
    test_env e;
    env_start(&e, "om");
    rjq_queue *q2 = open_queue(&e, "om2");
    plant_active(e.rc, "om", "k");
    rjq_dep on_k = {"om", "k"};
    ASSERT_OK(enqueue_after(&e, q2, "z", &on_k, 1, RJQ_AFTER_FAIL).status);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{om}:watchers"));
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{om}:dependents k"));
    const char *lean[] = {"t:{om}:job:", "-1", "0", "", "0", "0", "0", "k", "1 tok", "r"};
    redisReply *r = server_fcall(e.rc, RJQ__S_COMPLETE_ONE, "om", lean, 10);
    ASSERT(r->type == REDIS_REPLY_INTEGER);
    ASSERT_EQ(-2, r->integer);
    freeReplyObject(r);
    ASSERT_STREQ("active", get_info(e.base, e.q, "k").state);
    const char *one[] = {"k"};
    r = complete_fcall(e.rc, "om", one, 1);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    ASSERT_EQ(3, r->element[0]->integer);
    ASSERT_STREQ("k", r->element[1]->str);
    ASSERT_STREQ("om2 z", r->element[2]->str);
    freeReplyObject(r);
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{om}:depsfin"));
    ASSERT_STREQ("waiting", get_info(e.base, q2, "z").state); /* (the client's release) */
    env_stop(&e);
}

/* The policies applied by the dependency's own failing script when it
 * ends dead: 'fail' buries (and a dependent of the buried job, of the same
 * queue, is buried next in the same call), 'run' releases, 'ignore' drops
 * the line (its job waits for its other dependency). A dependent of
 * another queue is left to the client (code 5); with none left, the
 * failure is a plain death (code 2). */
TEST(same_queue_policies_apply_in_the_failing_script) {
    test_env e;
    env_start(&e, "sp");
    rjq_queue *q2 = open_queue(&e, "sp2");
    plant_active(e.rc, "sp", "a");
    plant_active(e.rc, "sp", "a2");
    enqueue_x_ok(e.base, e.q, "x", 3600000, 0);
    rjq_dep on_a = {"sp", "a"}, on_f = {"sp", "f"}, a_x[2] = {{"sp", "a"}, {"sp", "x"}};
    rjq_dep on_a2 = {"sp", "a2"};
    ASSERT_OK(enqueue_after(&e, e.q, "f", &on_a, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, e.q, "g", &on_f, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, e.q, "r", &on_a, 1, RJQ_AFTER_RUN).status);
    ASSERT_OK(enqueue_after(&e, e.q, "i", a_x, 2, RJQ_AFTER_IGNORE).status);
    ASSERT_OK(enqueue_after(&e, q2, "o", &on_a, 1, RJQ_AFTER_RUN).status);
    ASSERT_OK(enqueue_after(&e, e.q, "h", &on_a2, 1, RJQ_AFTER_FAIL).status);
    ASSERT_EQ(5, fail_fcall(e.rc, "sp", "a")); /* o (sp2) left to the client */
    ASSERT_STREQ("a=sp2 o", fail_entries);      /* (in the reply: no deps_due call) */
    ASSERT_STREQ("dead", get_info(e.base, e.q, "f").state);
    ASSERT_STREQ("dependency sp:a ended dead", get_info(e.base, e.q, "f").error);
    ASSERT_STREQ("dead", get_info(e.base, e.q, "g").state);
    ASSERT_STREQ("dependency sp:f ended dead", get_info(e.base, e.q, "g").error);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "r").state);
    ASSERT_STREQ("waiting", get_info(e.base, e.q, "i").state);
    ASSERT(deps_line(e.rc, "sp", "i", "\n- sp a"));
    ASSERT(deps_line(e.rc, "sp", "r", "\nd sp a"));
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{sp}:ready"));
    ASSERT_EQ(2, server_int(e.rc, "ZCARD t:{sp}:waiting")); /* i, and h (a2 pending) */
    redisReply *left = server_cmd(e.rc, "HGET t:{sp}:dependents a");
    ASSERT(left->type == REDIS_REPLY_STRING);
    ASSERT_STREQ("sp2 o", left->str);
    freeReplyObject(left);
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{sp}:dependents f")); /* g counted, gone */
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{sp}:depsfin"));         /* a, for o */
    ASSERT_STREQ("waiting", get_info(e.base, q2, "o").state);
    /* a2's only dependent is of its queue: a plain death for the client */
    ASSERT_EQ(2, fail_fcall(e.rc, "sp", "a2"));
    ASSERT_STREQ("dead", get_info(e.base, e.q, "h").state);
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{sp}:dependents a2"));
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{sp}:depsfin"));
    env_stop(&e);
}

/* A job of the failing job's queue buried by its policy 'fail' in the
 * failing script, whose own dependent waits on another queue: the
 * failure's reply carries the buried job's entry, so the worker's client
 * releases that dependent at once. The queue's periodic visit (the sweep)
 * is an hour away here: a release left to the sweep never comes within
 * the wait. */
TEST(dependent_on_another_queue_of_a_job_buried_by_a_failure_is_released_at_once) {
    test_env e;
    env_start(&e, "fb");
    rjq_queue *q2 = open_queue(&e, "fb2");
    plant_active(e.rc, "fb", "a");
    rjq_dep on_a = {"fb", "a"}, on_f = {"fb", "f"};
    ASSERT_OK(enqueue_after(&e, e.q, "f", &on_a, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, q2, "o", &on_f, 1, RJQ_AFTER_RUN).status);
    /* unit: the script's reply names f (a's only dependent is f, here) */
    ASSERT_EQ(5, fail_fcall(e.rc, "fb", "a"));
    ASSERT_STREQ("f=fb2 o", fail_entries);
    ASSERT_STREQ("dead", get_info(e.base, e.q, "f").state);
    ASSERT_STREQ("waiting", get_info(e.base, q2, "o").state);

    /* through a worker's failure: released without the sweep */
    enqueue_x_ok(e.base, e.q, "b", 0, 0);
    rjq_dep on_b = {"fb", "b"}, on_g = {"fb", "g"};
    ASSERT_OK(enqueue_after(&e, e.q, "g", &on_b, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, q2, "p", &on_g, 1, RJQ_AFTER_RUN).status);
    long buried = 0;
    rjq_worker_options wo = quiet_worker_options(1);
    wo.reclaim_ms = 3600000; /* no sweep during the test */
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, bury_it, &buried, &w));
    WAIT_FOR(e.base, state_is(&e, q2, "p", "ready"), 10000);
    ASSERT_EQ(1, buried); /* only b ran */
    ASSERT_STREQ("dead", get_info(e.base, e.q, "g").state);
    ASSERT_STREQ("dependency fb:b ended dead", get_info(e.base, e.q, "g").error);
    ASSERT(deps_line(e.rc, "fb2", "p", "\nd fb g"));
    /* its release went through: nothing left for the sweep but f's (the
     * script's reply above was told to no client) */
    WAIT_FOR(e.base, server_int(e.rc, "HEXISTS t:{fb}:dependents g") == 0, 10000);
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{fb}:depsfin"));
    ASSERT_EQ(0, server_int(e.rc, "ZRANK t:{fb}:depsfin f"));
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{fb2}:ready")); /* p, once */
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* A dependent of the same queue with a delay of its own is delayed by it
 * once its dependency completed (not made ready). */
TEST(same_queue_dependent_with_its_own_delay_is_delayed_by_it) {
    test_env e;
    env_start(&e, "sd");
    plant_active(e.rc, "sd", "a");
    rjq_dep on_a = {"sd", "a"};
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "b";
    o.after = &on_a;
    o.n_after = 1;
    o.delay_ms = 3600000;
    ASSERT_OK(enqueue_job(e.base, e.q, "p", &o).status);
    ASSERT_STREQ("waiting", get_info(e.base, e.q, "b").state);
    const char *one[] = {"a"};
    freeReplyObject(complete_fcall(e.rc, "sd", one, 1));
    ASSERT_STREQ("delayed", get_info(e.base, e.q, "b").state);
    ASSERT_EQ(0, server_int(e.rc, "LLEN t:{sd}:ready"));
    redisReply *t = server_cmd(e.rc, "TIME");
    long long now = atoll(t->element[0]->str) * 1000;
    freeReplyObject(t);
    ASSERT(server_int(e.rc, "ZSCORE t:{sd}:delayed b") >= now + 3500000);
    env_stop(&e);
}

/* The one-dependent release in the completion's own call (DEPS.release_ones
 * in lib.lua): jobs a, k, m completed in one call, each with dependents of
 * their queue: b waits for a alone (policy fail), c for k alone (policy
 * run, priority 5), d for m and x (two lines: the general path,
 * DEPS.finished). b goes to ready, c to the prio set, each once, their
 * states ready and their lists unwritten; d is counted (its line of m
 * completed) and still waits for x; every entry goes, nothing is indexed
 * for the sweep. Sent again (its reply lost): nothing released twice. */
TEST(one_dependent_of_the_queue_is_released_in_the_completions_call_once_with_its_priority) {
    test_env e;
    env_start(&e, "so");
    plant_active(e.rc, "so", "a");
    plant_active(e.rc, "so", "k");
    plant_active(e.rc, "so", "m");
    enqueue_x_ok(e.base, e.q, "x", 3600000, 0);
    rjq_dep on_a = {"so", "a"}, on_k = {"so", "k"}, m_x[2] = {{"so", "m"}, {"so", "x"}};
    ASSERT_OK(enqueue_after(&e, e.q, "b", &on_a, 1, RJQ_AFTER_FAIL).status);
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "c";
    o.after = &on_k;
    o.n_after = 1;
    o.after_policy = RJQ_AFTER_RUN;
    o.priority = 5;
    ASSERT_OK(enqueue_job(e.base, e.q, "p", &o).status);
    ASSERT_OK(enqueue_after(&e, e.q, "d", m_x, 2, RJQ_AFTER_FAIL).status);
    ASSERT_EQ(3, server_int(e.rc, "ZCARD t:{so}:waiting"));
    const char *three[] = {"a", "k", "m"};
    assert_completes_each(e.rc, "so", three, 3);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "b").state);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "c").state);
    ASSERT_STREQ("waiting", get_info(e.base, e.q, "d").state);
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{so}:ready"));          /* b */
    ASSERT_EQ(0, server_int(e.rc, "LPOS t:{so}:ready b"));
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{so}:prio"));           /* c, by its priority */
    ASSERT_EQ(0, server_int(e.rc, "ZRANK t:{so}:prio c"));
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{so}:waiting"));        /* d */
    ASSERT(deps_line(e.rc, "so", "b", "fail 0 0\nw so a"));        /* (not rewritten) */
    ASSERT(deps_line(e.rc, "so", "c", "run 0 5\nw so k"));
    ASSERT(deps_line(e.rc, "so", "d", "\nc so m\nw so x"));        /* counted */
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{so}:dependents a"));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{so}:dependents k"));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{so}:dependents m"));
    ASSERT_EQ(2, server_int(e.rc, "HLEN t:{so}:dependents"));      /* x's (d), and the pin */
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{so}:depsfin"));
    assert_completes_each(e.rc, "so", three, 3);
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{so}:ready"));
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{so}:prio"));
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{so}:waiting"));
    env_stop(&e);
}

/* A completion call whose one-dependent releases (DEPS.release_ones) take
 * some of its jobs' entries but not all: complete.lua skips its loop over
 * the jobs done only when no entry is left, so here a's dependent b (its
 * queue, a alone) is released in the call and k's dependent of another
 * queue (its entry "sm2 z") is still reported, code 3 with the entry after
 * the codes, for the client's release; a call whose every entry went (m's
 * one dependent) reports plain completions, nothing after them. */
TEST(completion_releasing_one_dependent_still_reports_another_jobs_dependent_of_another_queue) {
    test_env e;
    env_start(&e, "sm");
    b_after_active_a(&e, "sm");
    plant_active(e.rc, "sm", "k");
    freeReplyObject(server_cmd(e.rc, "HSET t:{sm}:dependents k %s", "sm2 z"));
    const char *two[] = {"a", "k"};
    redisReply *r = complete_fcall(e.rc, "sm", two, 2);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4);
    ASSERT_EQ(1, r->element[0]->integer);
    ASSERT_EQ(3, r->element[1]->integer);
    ASSERT_STREQ("k", r->element[2]->str);
    ASSERT_STREQ("sm2 z", r->element[3]->str);
    freeReplyObject(r);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "b").state);
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{sm}:dependents k"));
    plant_active(e.rc, "sm", "m");
    rjq_dep on_m = {"sm", "m"};
    ASSERT_OK(enqueue_after(&e, e.q, "c", &on_m, 1, RJQ_AFTER_FAIL).status);
    const char *one[] = {"m"};
    assert_completes_each(e.rc, "sm", one, 1);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "c").state);
    env_stop(&e);
}

/* The one-dependent release compares a dependent's list whole with the
 * head its call read last (DEPS.release_ones' last_hw): jobs a and k
 * completed in one call, b waiting for a alone (list "fail 0 0\nw sr a"),
 * and k's entry naming d (planted, stale) whose list has the same head but
 * waits for n alone: b is released, d is not (its list names n, not k) and
 * still waits, in the waiting set, its list unwritten. */
TEST(one_dependent_release_of_the_same_head_checks_the_job_its_list_names) {
    test_env e;
    env_start(&e, "sr");
    b_after_active_a(&e, "sr");
    plant_active(e.rc, "sr", "k");
    freeReplyObject(server_cmd(e.rc, "HSET t:{sr}:dependents k %s", "sr d"));
    freeReplyObject(server_cmd(e.rc, "HSET t:{sr}:state d %s", "waiting 0 @1,,"));
    freeReplyObject(server_cmd(e.rc, "HSET t:{sr}:payload d x"));
    freeReplyObject(server_cmd(e.rc, "HSET t:{sr}:deps d %s", "fail 0 0\nw sr n"));
    freeReplyObject(server_cmd(e.rc, "ZADD t:{sr}:waiting 1 d"));
    const char *two[] = {"a", "k"};
    freeReplyObject(complete_fcall(e.rc, "sr", two, 2));
    ASSERT_STREQ("ready", get_info(e.base, e.q, "b").state);
    ASSERT_STREQ("waiting", get_info(e.base, e.q, "d").state);
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{sr}:waiting"));
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{sr}:ready"));
    ASSERT(deps_line(e.rc, "sr", "d", "fail 0 0\nw sr n"));
    env_stop(&e);
}

/* The one-dependent release with a key it writes wrongly typed (the
 * waiting set a string, written behind rjq's back): the completion still
 * completes and writes nothing of the release (the dependent's state and
 * list as they were, the entry left whole for the client's deps_release,
 * which refuses it; the job indexed for the sweep). */
TEST(one_dependent_release_with_a_wrongly_typed_waiting_set_writes_nothing_of_it) {
    test_env e;
    env_start(&e, "sx");
    b_after_active_a(&e, "sx");
    freeReplyObject(server_cmd(e.rc, "DEL t:{sx}:waiting"));
    freeReplyObject(server_cmd(e.rc, "SET t:{sx}:waiting x"));
    const char *one[] = {"a"};
    redisReply *r = complete_fcall(e.rc, "sx", one, 1);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    ASSERT_EQ(3, r->element[0]->integer);
    ASSERT_STREQ("a", r->element[1]->str);
    ASSERT_STREQ("sx b", r->element[2]->str);
    freeReplyObject(r);
    ASSERT_STREQ("completed", get_info(e.base, e.q, "a").state);
    redisReply *s = server_cmd(e.rc, "HGET t:{sx}:state b");
    ASSERT(s->type == REDIS_REPLY_STRING && strncmp(s->str, "waiting 0 @", 11) == 0);
    freeReplyObject(s);
    ASSERT(deps_line(e.rc, "sx", "b", "fail 0 0\nw sx a"));
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{sx}:ready t:{sx}:prio t:{sx}:delayed"));
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{sx}:dependents a"));
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{sx}:depsfin"));
    env_stop(&e);
}

/* The registrations with dependencies of the job's own queue, done in
 * deps_add.lua's own loop (no DEPS.register call), of several jobs in one
 * call: two dependents of one pending job and one listing it twice are
 * appended to its entry once each, after the line it had (a dependent of
 * another queue); a dependency enqueued in the same call reads waiting
 * and records its dependent; a finished dependency leaves its dependent's
 * existed 0 (the client counts it), as does a missing one, whose stale
 * entry goes; a job with one finished and one pending dependency is
 * recorded with the pending one and answered 0. Sent again: every job
 * existed, no entry changes. */
TEST(registrations_of_the_same_queue_in_deps_adds_loop_record_each_dependent_once) {
    test_env e;
    env_start(&e, "rg");
    enqueue_x_ok(e.base, e.q, "a", 3600000, 0);
    enqueue_x_ok(e.base, e.q, "done", 0, 0);
    freeReplyObject(server_cmd(e.rc, "HSET t:{rg}:state done %s", "completed 1 tok @1,2,3"));
    freeReplyObject(server_cmd(e.rc, "HSET t:{rg}:dependents a %s", "rg2 z"));
    freeReplyObject(server_cmd(e.rc, "HSET t:{rg}:dependents gone %s", "rg old"));
    const char *args[] = {"t:{rg}:job:",
                          "b", "p", "", "fail", "1", "rg", "a",
                          "c", "p", "", "run", "1", "rg", "a",
                          "d", "p", "", "fail", "1", "rg", "done",
                          "f", "p", "", "fail", "1", "rg", "gone",
                          "g", "p", "", "fail", "1", "rg", "b",
                          "h", "p", "", "fail", "2", "rg", "a", "rg", "done",
                          "k", "p", "", "fail", "2", "rg", "a", "rg", "a"};
    size_t n = sizeof args / sizeof args[0];
    const char *ids[] = {"b", "c", "d", "f", "g", "h", "k"};
    const long long want[] = {2, 2, 0, 0, 2, 0, 2};
    for (int round = 0; round < 2; round++) {
        redisReply *r = server_fcall(e.rc, RJQ__S_DEPS_ADD, "rg", args, n);
        ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 14);
        for (size_t i = 0; i < 7; i++) {
            ASSERT_STREQ(ids[i], r->element[2 * i]->str);
            ASSERT_EQ(round == 0 ? want[i] : 1, r->element[2 * i + 1]->integer);
        }
        freeReplyObject(r);
        redisReply *a = server_cmd(e.rc, "HGET t:{rg}:dependents a");
        ASSERT(a->type == REDIS_REPLY_STRING);
        ASSERT_STREQ("rg2 z\nrg b\nrg c\nrg h\nrg k", a->str);
        freeReplyObject(a);
        redisReply *b = server_cmd(e.rc, "HGET t:{rg}:dependents b");
        ASSERT(b->type == REDIS_REPLY_STRING);
        ASSERT_STREQ("rg g", b->str);
        freeReplyObject(b);
        ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{rg}:dependents done"));
        ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{rg}:dependents gone"));
        /* a, b, and the pin: written once into this hash an older client
         * made (none there), with the first entries written */
        ASSERT_EQ(3, server_int(e.rc, "HLEN t:{rg}:dependents"));
        ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{rg}:dependents %s", SERVER_DEPENDENTS_PIN));
        ASSERT_EQ(7, server_int(e.rc, "ZCARD t:{rg}:waiting"));
    }
    env_stop(&e);
}

/* A caller's id given twice in one deps_add call is written once, the
 * first's (its payload, its policy), the second reported existing
 * (existed 1) and registered nowhere; numbered jobs around it are written
 * each with its own payload. deps_add learns of the repeat from the
 * payload column's HSET (fewer fields added than jobs), then builds its
 * writes again: this guards that second build. */
TEST(deps_add_writes_a_caller_id_given_twice_in_one_call_once) {
    test_env e;
    env_start(&e, "du");
    enqueue_x_ok(e.base, e.q, "a", 3600000, 0);
    const char *args[] = {"t:{du}:job:",
                          "x", "p1", "", "fail", "1", "du", "a",
                          "", "pn", "", "fail", "1", "du", "a",
                          "x", "p2", "", "run", "1", "du", "a",
                          "", "pm", "", "fail", "1", "du", "a"};
    redisReply *r = server_fcall(e.rc, RJQ__S_DEPS_ADD, "du", args, sizeof args / sizeof args[0]);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 8);
    ASSERT_STREQ("x", r->element[0]->str);
    ASSERT_EQ(2, r->element[1]->integer);
    ASSERT_STREQ("x", r->element[4]->str);
    ASSERT_EQ(1, r->element[5]->integer);
    ASSERT_EQ(2, r->element[3]->integer);
    ASSERT_EQ(2, r->element[7]->integer);
    char n1[32], n2[32];
    snprintf(n1, sizeof n1, "%s", r->element[2]->str);
    snprintf(n2, sizeof n2, "%s", r->element[6]->str);
    ASSERT(strcmp(n1, n2) != 0 && strcmp(n1, "x") != 0 && strcmp(n2, "x") != 0);
    freeReplyObject(r);
    redisReply *p = server_cmd(e.rc, "HMGET t:{du}:payload x %s %s", n1, n2);
    ASSERT(p->type == REDIS_REPLY_ARRAY && p->elements == 3);
    ASSERT_STREQ("p1", p->element[0]->str);
    ASSERT_STREQ("pn", p->element[1]->str);
    ASSERT_STREQ("pm", p->element[2]->str);
    freeReplyObject(p);
    redisReply *l = server_cmd(e.rc, "HGET t:{du}:deps x");
    ASSERT(l->type == REDIS_REPLY_STRING);
    ASSERT_STREQ("fail 0 0\nw du a", l->str);
    freeReplyObject(l);
    char want[96];
    snprintf(want, sizeof want, "du x\ndu %s\ndu %s", n1, n2);
    redisReply *a = server_cmd(e.rc, "HGET t:{du}:dependents a");
    ASSERT(a->type == REDIS_REPLY_STRING);
    ASSERT_STREQ(want, a->str);
    freeReplyObject(a);
    ASSERT_EQ(3, server_int(e.rc, "ZCARD t:{du}:waiting"));
    ASSERT_EQ(3, server_int(e.rc, "HLEN t:{du}:deps"));
    ASSERT_EQ(4, server_int(e.rc, "HLEN t:{du}:payload"));
    env_stop(&e);
}

/* deps_add called with n jobs (ids j0, j1, ..., each after "dq2 z": another
 * queue's job, so nothing is registered here) on queue q: more arguments
 * than server_fcall takes, so its keys laid out here. */
static void add_many(redisContext *rc, const char *q, int n) {
    char prefix[48], ids[64][16];
    const char *argv[40 + 64 * 7];
    layout_keys lk;
    argv[0] = "FCALL";
    argv[1] = rjq__scripts[RJQ__S_DEPS_ADD].function;
    int k = layout_script_keys(&lk, RJQ__S_DEPS_ADD, "t", q, argv, 2);
    ASSERT(k < 40);
    snprintf(prefix, sizeof prefix, "t:{%s}:job:", q);
    argv[k++] = prefix;
    for (int i = 0; i < n && i < 64; i++) {
        snprintf(ids[i], sizeof ids[i], "j%d", i);
        const char *job[] = {ids[i], "p", "", "fail", "1", "dq2", "z"};
        for (size_t j = 0; j < 7; j++) argv[k++] = job[j];
    }
    redisReply *r = redisCommandArgv(rc, k, argv, NULL);
    ASSERT(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == (size_t)(2 * n));
    freeReplyObject(r);
}

/* The encoding of key (OBJECT ENCODING) is want. */
static void assert_encoding(redisContext *rc, const char *key, const char *want) {
    redisReply *r = server_cmd(rc, "OBJECT ENCODING %s", key);
    ASSERT(r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
    ASSERT_STREQ(want, r->str);
    freeReplyObject(r);
}

/* A deps_add of many jobs (lib.lua TABLE_MIN, 32, or more) makes the deps
 * hash and the waiting set tables before it writes them (a listpack is
 * walked at every insert: ~14M Redis instructions for 500 jobs into a new
 * deps hash), with a pin written first and deleted in the same call:
 * nothing of it is left, and the hash and the set hold the jobs alone. A
 * call of a few jobs leaves them listpacks (no pin's commands). */
TEST(deps_add_of_many_jobs_makes_deps_and_waiting_tables_and_leaves_no_pin) {
    test_env e;
    env_start(&e, "dt");
    add_many(e.rc, "dt", 40);
    assert_encoding(e.rc, "t:{dt}:deps", "hashtable");
    assert_encoding(e.rc, "t:{dt}:waiting", "skiplist");
    ASSERT_EQ(40, server_int(e.rc, "HLEN t:{dt}:deps"));
    ASSERT_EQ(40, server_int(e.rc, "ZCARD t:{dt}:waiting"));
    ASSERT_EQ(40, server_int(e.rc, "HLEN t:{dt}:payload"));
    ASSERT_EQ(40, server_int(e.rc, "HLEN t:{dt}:state"));
    redisReply *f = server_cmd(e.rc, "HKEYS t:{dt}:deps");
    ASSERT(f->type == REDIS_REPLY_ARRAY && f->elements == 40);
    for (size_t i = 0; i < f->elements; i++) ASSERT(f->element[i]->str[0] == 'j');
    freeReplyObject(f);
    redisReply *m = server_cmd(e.rc, "ZRANGE t:{dt}:waiting 0 -1");
    ASSERT(m->type == REDIS_REPLY_ARRAY && m->elements == 40);
    for (size_t i = 0; i < m->elements; i++) ASSERT(m->element[i]->str[0] == 'j');
    freeReplyObject(m);
    add_many(e.rc, "ds", 2);
    assert_encoding(e.rc, "t:{ds}:deps", "listpack");
    assert_encoding(e.rc, "t:{ds}:waiting", "listpack");
    env_stop(&e);
}

/* The dependents hash is pinned a hash table (lib.lua DEPENDENTS_PIN: a
 * field longer than hash-max-listpack-value, so Redis never keeps it a
 * listpack that every lookup walks): the pin is written once, with the
 * hash's first entry, and no reader counts it (the dependents read gives
 * exactly the jobs registered); the hash goes with its last entry, so a
 * queue whose dependents were all released has no dependents key and its
 * completions' EXISTS probe takes the plain path again (the commands of a
 * plain completion as before any dependent). */
TEST(dependents_hash_is_pinned_once_and_goes_with_its_last_entry) {
    test_env e;
    env_start(&e, "pn");
    plant_active(e.rc, "pn", "a");
    plant_active(e.rc, "pn", "k");
    plant_active(e.rc, "pn", "z1");
    plant_active(e.rc, "pn", "z2");
    const char *z1[] = {"z1"}, *z2[] = {"z2"};
    long long before = server_commands_run(e.rc);
    assert_completes_each(e.rc, "pn", z1, 1);
    long long plain = server_commands_run(e.rc) - before;
    rjq_dep on_a = {"pn", "a"}, on_k = {"pn", "k"};
    ASSERT_OK(enqueue_after(&e, e.q, "b", &on_a, 1, RJQ_AFTER_FAIL).status);
    ASSERT_EQ(2, server_int(e.rc, "HLEN t:{pn}:dependents")); /* a's entry, the pin */
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{pn}:dependents %s", SERVER_DEPENDENTS_PIN));
    redisReply *enc = server_cmd(e.rc, "OBJECT ENCODING t:{pn}:dependents");
    ASSERT(enc->type == REDIS_REPLY_STRING || enc->type == REDIS_REPLY_STATUS);
    ASSERT_STREQ("hashtable", enc->str);
    freeReplyObject(enc);
    ASSERT_OK(enqueue_after(&e, e.q, "c", &on_a, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, e.q, "d", &on_k, 1, RJQ_AFTER_FAIL).status);
    ASSERT_EQ(3, server_int(e.rc, "HLEN t:{pn}:dependents")); /* a, k, the pin once */
    dents_list da = dependents_of(e.base, e.q, "a");
    ASSERT_OK(da.status);
    ASSERT_EQ(2, (long long)da.n);
    ASSERT_STREQ("pn b,pn c", da.list);
    const char *one_a[] = {"a"}, *one_k[] = {"k"};
    assert_completes_each(e.rc, "pn", one_a, 1);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "b").state);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "c").state);
    ASSERT_EQ(2, server_int(e.rc, "HLEN t:{pn}:dependents")); /* k's, the pin */
    assert_completes_each(e.rc, "pn", one_k, 1);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "d").state);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{pn}:dependents"));
    before = server_commands_run(e.rc);
    assert_completes_each(e.rc, "pn", z2, 1);
    ASSERT_EQ(plain, server_commands_run(e.rc) - before);
    env_stop(&e);
}

/* Mixed versions: a client before the pin removes a queue's last entry
 * with a plain HDEL, which leaves the hash with the pin alone (planted
 * here as it would be left). Nothing misreads it: a plain completion still
 * completes (its probe takes the dependents path and finds no entry); a
 * new registration keeps the one pin; the next removal by this version
 * deletes the hash. */
TEST(pin_left_alone_by_an_older_clients_removal_misleads_nothing_and_goes_with_the_next_removal) {
    test_env e;
    env_start(&e, "pl");
    plant_active(e.rc, "pl", "z");
    plant_active(e.rc, "pl", "k");
    freeReplyObject(server_cmd(e.rc, "HSET t:{pl}:dependents %s %s", SERVER_DEPENDENTS_PIN, ""));
    const char *z[] = {"z"}, *k[] = {"k"};
    assert_completes_each(e.rc, "pl", z, 1);
    ASSERT_STREQ("completed", get_info(e.base, e.q, "z").state);
    ASSERT_EQ(1, server_int(e.rc, "EXISTS t:{pl}:dependents")); /* (no removal: kept) */
    rjq_dep on_k = {"pl", "k"};
    ASSERT_OK(enqueue_after(&e, e.q, "c", &on_k, 1, RJQ_AFTER_FAIL).status);
    ASSERT_EQ(2, server_int(e.rc, "HLEN t:{pl}:dependents")); /* k's, the one pin */
    dents_list dk = dependents_of(e.base, e.q, "k");
    ASSERT_OK(dk.status);
    ASSERT_EQ(1, (long long)dk.n);
    ASSERT_STREQ("pl c", dk.list);
    assert_completes_each(e.rc, "pl", k, 1);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "c").state);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{pl}:dependents"));
    env_stop(&e);
}

/* A chain within one queue, run by a worker: each job runs once, in order,
 * released by its dependency's completion (nothing left for the sweep). */
TEST(same_queue_chain_runs_in_order_released_by_the_completions) {
    test_env e;
    env_start(&e, "sh");
    enqueue_x_ok(e.base, e.q, "a", 3600000, 0);
    rjq_dep on_a = {"sh", "a"}, on_b = {"sh", "b"};
    ASSERT_OK(enqueue_after(&e, e.q, "b", &on_a, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, e.q, "c", &on_b, 1, RJQ_AFTER_FAIL).status);
    ran r = {{0}, 0};
    rjq_worker_options wo = quiet_worker_options(2);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_it, &r, &w));
    count_wait p = {0};
    ASSERT_OK(rjq_queue_promote(e.q, "a", on_count, &p));
    ASSERT(loop_until_count(e.base, &r.n, 3, 10000));
    ASSERT_STREQ("a,b,c", r.order);
    WAIT_FOR(e.base, state_is(&e, e.q, "c", "completed"), 10000);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{sh}:dependents t:{sh}:depsfin t:{sh}:waiting"));
    ASSERT_EQ(3, r.n);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* A handler that counts runs per job id (ids "n<k>", k < 2048) and
 * completes its job; `order` notes the end of the run of "d". */
typedef struct runs {
    int by_id[2048];
    long total;
    long d_at;           /* total when "d" ran (0: not yet) */
} runs;

static void count_and_complete(rjq_job *job, void *data) {
    runs *r = data;
    const char *id = rjq_job_get_id(job);
    r->total++;
    if (id[0] == 'n') {
        int k = atoi(id + 1);
        if (k >= 0 && k < 2048) r->by_id[k]++;
    }
    if (strcmp(id, "d") == 0) r->d_at = r->total;
    ASSERT_OK(rjq_job_complete(job, "", 0, NULL, NULL));
}

TEST(diamond_runs_its_join_once_after_both_sides) {
    test_env e;
    env_start(&e, "dm");
    rjq_queue *q2 = open_queue(&e, "dm2");
    enqueue_x_ok(e.base, e.q, "a", 3600000, 0);
    rjq_dep on_a = {"dm", "a"};
    ASSERT_OK(enqueue_after(&e, e.q, "b", &on_a, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, q2, "c", &on_a, 1, RJQ_AFTER_FAIL).status);
    rjq_dep on_bc[2] = {{"dm", "b"}, {"dm2", "c"}};
    ASSERT_OK(enqueue_after(&e, q2, "d", on_bc, 2, RJQ_AFTER_FAIL).status);
    runs r;
    memset(&r, 0, sizeof r);
    rjq_worker_options wo = quiet_worker_options(4);
    rjq_worker *w1, *w2;
    ASSERT_OK(rjq_worker_start(e.q, &wo, count_and_complete, &r, &w1));
    ASSERT_OK(rjq_worker_start(q2, &wo, count_and_complete, &r, &w2));
    count_wait p = {0};
    ASSERT_OK(rjq_queue_promote(e.q, "a", on_count, &p));
    ASSERT(loop_until_count(e.base, &r.total, 4, 10000));
    ASSERT_EQ(4, r.d_at); /* d last */
    WAIT_FOR(e.base, state_is(&e, q2, "d", "completed"), 10000);
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{dm}:dependents t:{dm2}:dependents") == 0, 10000);
    ASSERT_EQ(4, r.total); /* each once */
    worker_stop_wait(e.base, w1);
    worker_stop_wait(e.base, w2);
    env_stop(&e);
}

/* One job fans out to 1 000 children (of two queues); they fan in to one
 * parent through 10 joins of 100 each (RJQ_AFTER_MAX a job). */
TEST(fan_out_to_1000_children_and_in_through_joins_runs_each_once) {
    test_env e;
    env_start(&e, "ff");
    rjq_queue *q2 = open_queue(&e, "ff2");
    enqueue_x_ok(e.base, e.q, "a", 3600000, 0);
    rjq_dep on_a = {"ff", "a"};
    char ids[1000][8];
    rjq_dep kids[10][100];
    for (int k = 0; k < 1000; k++) {
        snprintf(ids[k], sizeof ids[k], "n%d", k);
        ASSERT_OK(enqueue_after(&e, k % 2 ? q2 : e.q, ids[k], &on_a, 1, RJQ_AFTER_FAIL).status);
        kids[k / 100][k % 100] = (rjq_dep){k % 2 ? "ff2" : "ff", ids[k]};
    }
    char joins[10][8];
    rjq_dep on_joins[10];
    for (int j = 0; j < 10; j++) {
        snprintf(joins[j], sizeof joins[j], "n%d", 1000 + j);
        ASSERT_OK(enqueue_after(&e, q2, joins[j], kids[j], 100, RJQ_AFTER_FAIL).status);
        on_joins[j] = (rjq_dep){"ff2", joins[j]};
    }
    ASSERT_OK(enqueue_after(&e, e.q, "d", on_joins, 10, RJQ_AFTER_FAIL).status);
    ASSERT_EQ(1011, server_int(e.rc, "ZCARD t:{ff}:waiting") + server_int(e.rc, "ZCARD t:{ff2}:waiting"));
    runs r;
    memset(&r, 0, sizeof r);
    rjq_worker_options wo = quiet_worker_options(16);
    rjq_worker *w1, *w2;
    ASSERT_OK(rjq_worker_start(e.q, &wo, count_and_complete, &r, &w1));
    ASSERT_OK(rjq_worker_start(q2, &wo, count_and_complete, &r, &w2));
    count_wait p = {0};
    ASSERT_OK(rjq_queue_promote(e.q, "a", on_count, &p));
    ASSERT(loop_until_count(e.base, &r.total, 1012, 60000));
    ASSERT_EQ(1012, r.d_at); /* the parent last */
    for (int k = 0; k < 1010; k++) ASSERT_EQ(1, r.by_id[k]);
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{ff}:dependents t:{ff2}:dependents") == 0, 10000);
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{ff}:waiting") + server_int(e.rc, "ZCARD t:{ff2}:waiting"));
    ASSERT_EQ(1012, r.total);
    worker_stop_wait(e.base, w1);
    worker_stop_wait(e.base, w2);
    env_stop(&e);
}

/* The score of job id in queue q's waiting set (-1: none). */
static long long waiting_score(redisContext *rc, const char *q, const char *id) {
    redisReply *r = server_cmd(rc, "ZSCORE t:{%s}:waiting %s", q, id);
    long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : -1;
    freeReplyObject(r);
    return v;
}

/* The server's clock in ms (TIME). */
static long long server_ms(redisContext *rc) {
    redisReply *r = server_cmd(rc, "TIME");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    long long ms = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
    freeReplyObject(r);
    return ms;
}

/* rjq_stats.waiting counts the waiting jobs and RJQ_STATE_WAITING lists
 * them, in the order of their enqueue (the waiting set's score: when a
 * resume is due, the enqueue time at first); a job released leaves both. */
TEST(waiting_jobs_are_counted_in_stats_and_listed_in_their_enqueue_order) {
    test_env e;
    env_start(&e, "wl");
    rjq_queue *q2 = open_queue(&e, "wl2");
    enqueue_x_ok(e.base, e.q, "a", 3600000, 0);
    enqueue_x_ok(e.base, e.q, "z", 3600000, 0);
    rjq_dep on_a = {"wl", "a"}, on_z = {"wl", "z"};
    const char *ids[] = {"w3", "w1", "w2"};
    for (int i = 0; i < 3; i++) {
        ASSERT_OK(enqueue_after(&e, q2, ids[i], i == 2 ? &on_z : &on_a, 1, RJQ_AFTER_RUN).status);
        /* (the next one enqueued a millisecond later at least: no tie) */
        long long at = waiting_score(e.rc, "wl2", ids[i]);
        WAIT_FOR(e.base, server_ms(e.rc) > at, 5000);
    }
    rjq_stats st = get_stats(e.base, q2);
    ASSERT_EQ(3, st.waiting);
    ASSERT_EQ(0, st.ready + st.delayed + st.active);
    ASSERT_STREQ("w3,w1,w2", list_ids(e.base, q2, RJQ_STATE_WAITING, 0, 10));
    int done = 0;
    ASSERT_OK(rjq_queue_cancel(e.q, "a", on_cancel_wait, &done));
    ASSERT(loop_until(e.base, &done, 5000));
    WAIT_FOR(e.base, get_stats(e.base, q2).waiting == 1, 10000);
    ASSERT_STREQ("w2", list_ids(e.base, q2, RJQ_STATE_WAITING, 0, 10));
    ASSERT_EQ(2, get_stats(e.base, q2).ready); /* (policy run) */
    env_stop(&e);
}

/* Cancelling a waiting job cancels it alone: its dependents apply their
 * policy; its own dependency, finishing later, releases nothing of it. */
TEST(cancel_of_a_waiting_job_cancels_it_alone_and_its_dependents_apply_their_policy) {
    test_env e;
    env_start(&e, "cw");
    rjq_queue *q2 = open_queue(&e, "cw2");
    enqueue_x_ok(e.base, e.q, "a", 3600000, 0);
    rjq_dep on_a = {"cw", "a"}, on_b = {"cw", "b"};
    ASSERT_OK(enqueue_after(&e, e.q, "b", &on_a, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, q2, "c", &on_b, 1, RJQ_AFTER_RUN).status);
    ASSERT_OK(enqueue_after(&e, q2, "f", &on_b, 1, RJQ_AFTER_FAIL).status);
    int done = 0;
    ASSERT_OK(rjq_queue_cancel(e.q, "b", on_cancel_wait, &done));
    ASSERT(loop_until(e.base, &done, 5000));
    ASSERT_EQ(1, done);
    ASSERT_STREQ("cancelled", get_info(e.base, e.q, "b").state);
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{cw}:waiting"));
    WAIT_FOR(e.base, state_is(&e, q2, "c", "ready"), 10000); /* run */
    WAIT_FOR(e.base, state_is(&e, q2, "f", "dead"), 10000);  /* fail */
    ASSERT_STREQ("dependency cw:b ended cancelled", get_info(e.base, q2, "f").error);
    ASSERT_STREQ("delayed", get_info(e.base, e.q, "a").state); /* (untouched) */
    /* a runs: b stays cancelled, nothing runs twice */
    runs r;
    memset(&r, 0, sizeof r);
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w1, *w2;
    ASSERT_OK(rjq_worker_start(e.q, &wo, count_and_complete, &r, &w1));
    ASSERT_OK(rjq_worker_start(q2, &wo, count_and_complete, &r, &w2));
    count_wait p = {0};
    ASSERT_OK(rjq_queue_promote(e.q, "a", on_count, &p));
    ASSERT(loop_until_count(e.base, &r.total, 2, 10000)); /* a and c */
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{cw}:dependents") == 0, 10000);
    ASSERT_STREQ("cancelled", get_info(e.base, e.q, "b").state);
    ASSERT_EQ(0, server_int(e.rc, "LLEN t:{cw}:ready"));
    ASSERT_EQ(2, r.total);
    worker_stop_wait(e.base, w1);
    worker_stop_wait(e.base, w2);
    env_stop(&e);
}

/* Replaying a dead dependency re-blocks nothing already released: a job
 * that ran (policy run) does not run again, one buried (policy fail) stays
 * dead; the replayed job runs alone. */
TEST(replay_of_a_dead_dependency_reblocks_nothing_released) {
    test_env e;
    env_start(&e, "rp");
    rjq_queue *q2 = open_queue(&e, "rp2");
    enqueue_x_ok(e.base, e.q, "a", 0, 0);
    rjq_dep on_a = {"rp", "a"};
    ASSERT_OK(enqueue_after(&e, q2, "r", &on_a, 1, RJQ_AFTER_RUN).status);
    ASSERT_OK(enqueue_after(&e, q2, "f", &on_a, 1, RJQ_AFTER_FAIL).status);
    long buried = 0;
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *wa, *w2;
    ASSERT_OK(rjq_worker_start(e.q, &wo, bury_it, &buried, &wa));
    WAIT_FOR(e.base, state_is(&e, q2, "f", "dead"), 10000);
    WAIT_FOR(e.base, state_is(&e, q2, "r", "ready"), 10000);
    worker_stop_wait(e.base, wa);
    runs r;
    memset(&r, 0, sizeof r);
    ASSERT_OK(rjq_worker_start(q2, &wo, count_and_complete, &r, &w2));
    ASSERT(loop_until_count(e.base, &r.total, 1, 10000)); /* r ran */
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{rp}:dependents") == 0, 10000);
    count_wait p = {0};
    ASSERT_OK(rjq_queue_replay(e.q, "a", 1, on_count, &p));
    ASSERT(loop_until(e.base, &p.done, 5000));
    ASSERT_EQ(1, p.n);
    ASSERT_OK(rjq_worker_start(e.q, &wo, count_and_complete, &r, &wa));
    ASSERT(loop_until_count(e.base, &r.total, 2, 10000)); /* a, once more */
    WAIT_FOR(e.base, state_is(&e, e.q, "a", "completed"), 10000);
    ASSERT_STREQ("completed", get_info(e.base, q2, "r").state);
    ASSERT_STREQ("dead", get_info(e.base, q2, "f").state);
    ASSERT_EQ(0, server_int(e.rc, "LLEN t:{rp2}:ready"));
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{rp2}:waiting"));
    ASSERT_EQ(2, r.total);
    worker_stop_wait(e.base, wa);
    worker_stop_wait(e.base, w2);
    env_stop(&e);
}

/* deps_add called alone, as an enqueuing client that died before it
 * registered the job with its dependencies leaves it; its registration
 * then made to look a minute old (DEPS_RESUME_MS). */
static void add_unregistered(redisContext *rc, const char *q, const char *id, const char *dq,
                             const char *did) {
    char prefix[48];
    snprintf(prefix, sizeof prefix, "t:{%s}:job:", q);
    const char *args[] = {prefix, id, "p", "", "fail", "1", dq, did};
    redisReply *r = server_fcall(rc, RJQ__S_DEPS_ADD, q, args, 8);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->integer == 0);
    freeReplyObject(r);
    freeReplyObject(server_cmd(rc, "ZADD t:{%s}:waiting 1 %s", q, id));
}

TEST(resume_sweep_registers_a_job_whose_enqueuer_died_before_registering_it) {
    test_env e;
    env_start(&e, "rs");
    rjq_queue *q2 = open_queue(&e, "rs2");
    enqueue_x_ok(e.base, e.q, "a", 3600000, 0);
    enqueue_x_ok(e.base, e.q, "done", 0, 0);
    freeReplyObject(server_cmd(e.rc, "HSET t:{rs}:state done %s", "completed 1 tok @1,2,3"));
    add_unregistered(e.rc, "rs2", "b", "rs", "a");    /* a still pending */
    add_unregistered(e.rc, "rs2", "c", "rs", "done"); /* finished meanwhile */
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{rs}:dependents")); /* nobody knows of b */
    /* a worker on rs2: its queue's periodic visit resumes the registrations */
    rjq_worker_options wo = quiet_worker_options(1);
    wo.reclaim_ms = 50;
    rjq_worker *w;
    ran r = {{0}, 0};
    ASSERT_OK(rjq_worker_start(q2, &wo, complete_it, &r, &w));
    WAIT_FOR(e.base, server_int(e.rc, "HEXISTS t:{rs}:dependents a") == 1, 10000);
    ASSERT(loop_until_count(e.base, &r.n, 1, 10000)); /* c: counted at once, ran */
    ASSERT_STREQ("c", r.order);
    ASSERT_STREQ("waiting", get_info(e.base, q2, "b").state);
    /* looked at again only after as long as it had waited (at least a minute) */
    long long next = server_int(e.rc, "ZSCORE t:{rs2}:waiting b");
    redisReply *t = server_cmd(e.rc, "TIME");
    long long now = atoll(t->element[0]->str) * 1000;
    freeReplyObject(t);
    ASSERT(next >= now - 5000);
    /* a finishes: b is released, once */
    int done = 0;
    ASSERT_OK(rjq_queue_cancel(e.q, "a", on_cancel_wait, &done));
    ASSERT(loop_until(e.base, &done, 5000));
    WAIT_FOR(e.base, state_is(&e, q2, "b", "dead"), 10000); /* (policy fail) */
    ASSERT_STREQ("dependency rs:a ended cancelled", get_info(e.base, q2, "b").error);
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{rs2}:waiting"));
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{rs}:dependents") == 0, 10000);
    ASSERT_EQ(1, r.n); /* c ran once, b never */
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* A worker killed between its child's completion and the parent's
 * release: the completion (the script, as it ran on the server) is all
 * that happened; the sweep of the child's queue releases the parent, once,
 * within its period. */
TEST(completion_whose_worker_died_before_the_release_is_released_by_the_sweep_once) {
    test_env e;
    env_start(&e, "dk");
    rjq_queue *q2 = open_queue(&e, "dk2");
    completed_before_its_release(&e, "dk", q2, RJQ_AFTER_FAIL, "-1");
    ASSERT_STREQ("completed", get_info(e.base, e.q, "a").state);
    ASSERT_STREQ("waiting", get_info(e.base, q2, "p").state);
    rjq_worker *w = sweeping_worker(e.q);
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{dk}:dependents") == 0, 10000);
    ASSERT_STREQ("ready", get_info(e.base, q2, "p").state);
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{dk2}:ready")); /* released once */
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* The periodic sweep reads only the jobs that finished with dependents
 * not all released (depsfin): once every finished dependency's dependents
 * were released, its visits read nothing, however many dependents entries
 * of unfinished jobs are recorded (before, it paged through every entry
 * each period: one HSCAN a visit at least). */
TEST(sweep_reads_nothing_once_every_finished_dependency_was_released) {
    test_env e;
    env_start(&e, "dz");
    rjq_queue *q2 = open_queue(&e, "dz2");
    /* a dependency not finished: its dependents entry stays */
    enqueue_x_ok(e.base, e.q, "u", 3600000, 0);
    rjq_dep on_u = {"dz", "u"};
    ASSERT_OK(enqueue_after(&e, q2, "w", &on_u, 1, RJQ_AFTER_RUN).status);
    /* one whose worker died between its completion and the release */
    completed_before_its_release(&e, "dz", q2, RJQ_AFTER_FAIL, "-1");
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{dz}:depsfin")); /* indexed by the completion */
    rjq_worker *w = sweeping_worker(e.q);
    WAIT_FOR(e.base, server_int(e.rc, "ZCARD t:{dz}:depsfin") == 0, 10000);
    ASSERT_STREQ("ready", get_info(e.base, q2, "p").state); /* released by the sweep */
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{dz2}:ready"));
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{dz}:dependents u")); /* (still recorded) */
    /* five more visits (each asks whether depsfin exists): no scan */
    long long scans = server_calls(e.rc, "zrange") + server_calls(e.rc, "hscan");
    long long visits = server_calls(e.rc, "exists");
    WAIT_FOR(e.base, server_calls(e.rc, "exists") >= visits + 5, 10000);
    ASSERT_EQ(scans, server_calls(e.rc, "zrange") + server_calls(e.rc, "hscan"));
    ASSERT_STREQ("waiting", get_info(e.base, q2, "w").state);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* Retention (rjq.h "Dependencies"): a finished dependency's record stays
 * until its dependents are released. A dependency on a queue that keeps
 * completed jobs 1 ms completes and its worker dies before the release
 * (the completion as the script ran it); the queue's periodic visit
 * sweeps its completed jobs before it sweeps their dependents' releases:
 * the dependent is released, as after a completed dependency, not buried
 * as after a "missing" one; once released, the record goes. */
TEST(dependency_past_its_retention_is_kept_until_its_dependent_is_released) {
    test_env e;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.retention_ms = 1;
    env_start_queue(&e, "rz", &qo);
    rjq_queue *q2 = open_queue(&e, "rz2");
    completed_before_its_release(&e, "rz", q2, RJQ_AFTER_FAIL, "1");
    rjq_worker *w = sweeping_worker(e.q);
    WAIT_FOR(e.base, !state_is(&e, q2, "p", "waiting"), 10000);
    ASSERT_STREQ("ready", get_info(e.base, q2, "p").state); /* (policy fail: not "dead") */
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{rz2}:ready"));
    /* released: the dependency's record goes with a later sweep */
    WAIT_FOR(e.base, server_int(e.rc, "HEXISTS t:{rz}:state a") == 0, 10000);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{rz}:dependents"));
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* A chain across the three masters of the test cluster, the last job
 * waiting for jobs on the two others and reading their outcomes (a round
 * trip to each of their masters). */
TEST(chain_across_three_cluster_masters_runs_in_order_and_reads_outcomes) {
    test_cluster cl;
    cluster_start(&cl, 0);
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(cl.url);
    rjq_client *c = client_new(base, &o);
    char na[16], nb[16], nc[16];
    cluster_name_on(&cl, 0, "x", na, sizeof na);
    cluster_name_on(&cl, 1, "x", nb, sizeof nb);
    cluster_name_on(&cl, 2, "x", nc, sizeof nc);
    rjq_queue *qa, *qb, *qc;
    ASSERT_OK(rjq_queue_open(c, na, NULL, &qa));
    ASSERT_OK(rjq_queue_open(c, nb, NULL, &qb));
    ASSERT_OK(rjq_queue_open(c, nc, NULL, &qc));
    enqueue_x_ok(base, qa, "a", 3600000, 0);
    rjq_dep on_a = {na, "a"};
    rjq_dep on_ab[2] = {{na, "a"}, {nb, "b"}};
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.id = "b";
    jo.after = &on_a;
    jo.n_after = 1;
    ASSERT_OK(enqueue_job(base, qb, "p", &jo).status);
    jo.id = "c";
    jo.after = on_ab;
    jo.n_after = 2;
    ASSERT_OK(enqueue_job(base, qc, "p", &jo).status);
    ASSERT_STREQ("waiting", get_info(base, qc, "c").state);
    long na_ran = 0, nb_ran = 0;
    read_deps rd;
    memset(&rd, 0, sizeof rd);
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *wa, *wb, *wc;
    ASSERT_OK(rjq_worker_start(qa, &wo, complete_with_result, &na_ran, &wa));
    ASSERT_OK(rjq_worker_start(qb, &wo, complete_with_result, &nb_ran, &wb));
    ASSERT_OK(rjq_worker_start(qc, &wo, read_then_complete, &rd, &wc));
    count_wait p = {0};
    ASSERT_OK(rjq_queue_promote(qa, "a", on_count, &p));
    ASSERT(loop_until_count(base, &rd.ran, 1, 30000));
    ASSERT_EQ(1, na_ran);
    ASSERT_EQ(1, nb_ran);
    ASSERT_OK(rd.status);
    ASSERT_EQ(2, (long)rd.n);
    char want[64];
    snprintf(want, sizeof want, "%s:a completed completed r-a -", na);
    ASSERT_STREQ(want, rd.line[0]);
    snprintf(want, sizeof want, "%s:b completed completed r-a -", nb);
    ASSERT_STREQ(want, rd.line[1]);
    WAIT_FOR(base, strcmp(get_info(base, qc, "c").state, "completed") == 0, 30000);
    worker_stop_wait(base, wa);
    worker_stop_wait(base, wb);
    worker_stop_wait(base, wc);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}

/* A worker process SIGKILLed between its job's completion and the release
 * of that job's dependent on another master (the issue's "worker
 * SIGKILLed between a child's completion and the parent's release"): the
 * completion's reply came (its callback ran), the release it carried was
 * never sent. The dependencies' sweep of the child's queue (a worker of
 * another process there) releases the parent, once: one ready entry on
 * the parent's master, its list counting the child completed. */
static void on_completed_die(rjq_client *c, int status, void *data) {
    (void)c, (void)status, (void)data;
    raise(SIGKILL);
}

static void complete_and_die(rjq_job *job, void *data) {
    (void)data;
    rjq_job_complete(job, "r", 1, on_completed_die, NULL);
}

static void run_dying_worker(const char *url, const char *queue) {
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(url);
    rjq_client *c = client_new(base, &o);
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(c, queue, NULL, &q));
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, complete_and_die, NULL, &w));
    event_base_dispatch(base); /* until it kills itself */
    _exit(3);
}

TEST(worker_killed_between_a_childs_completion_and_its_parents_release_on_another_master_is_replaced_by_the_sweep_once) {
    test_cluster cl;
    cluster_start(&cl, 0);
    char nk[16], np[16];
    cluster_name_on(&cl, 0, "k", nk, sizeof nk); /* the child's queue */
    cluster_name_on(&cl, 1, "p", np, sizeof np); /* the parent's, on another master */
    {
        /* the child and its parent, by a client gone before the fork */
        struct event_base *base = event_base_new();
        rjq_client_options o = client_options(cl.url);
        rjq_client *c = client_new(base, &o);
        rjq_queue *qk, *qp;
        ASSERT_OK(rjq_queue_open(c, nk, NULL, &qk));
        ASSERT_OK(rjq_queue_open(c, np, NULL, &qp));
        enqueue_x_ok(base, qk, "child", 0, 0);
        rjq_dep on_child = {nk, "child"};
        rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
        jo.id = "parent";
        jo.after = &on_child;
        jo.n_after = 1;
        ASSERT_OK(enqueue_job(base, qp, "p", &jo).status);
        ASSERT_STREQ("waiting", get_info(base, qp, "parent").state);
        rjq_client_free(c);
        event_base_free(base);
    }
    pid_t child = fork_child();
    if (child == 0) run_dying_worker(cl.url, nk);
    int status = reap(child, 60000);
    ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    redisContext *rk = cluster_connect(&cl, 0), *rp = cluster_connect(&cl, 1);
    redisReply *st = cluster_cmd(&cl, rk, "HGET t:{%s}:state child", nk);
    ASSERT(st->type == REDIS_REPLY_STRING && strncmp(st->str, "completed", 9) == 0);
    freeReplyObject(st);
    ASSERT_EQ(1, cluster_int(&cl, rk, "HEXISTS t:{%s}:dependents child", nk)); /* untold */
    ASSERT_EQ(1, cluster_int(&cl, rp, "ZCARD t:{%s}:waiting", np));
    ASSERT_EQ(0, cluster_int(&cl, rp, "LLEN t:{%s}:ready", np));
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(cl.url);
    rjq_client *c = client_new(base, &o);
    rjq_queue *qk, *qp;
    ASSERT_OK(rjq_queue_open(c, nk, NULL, &qk));
    ASSERT_OK(rjq_queue_open(c, np, NULL, &qp));
    ASSERT_STREQ("waiting", get_info(base, qp, "parent").state);
    rjq_worker *w = sweeping_worker(qk);
    WAIT_FOR(base, cluster_int(&cl, rk, "EXISTS t:{%s}:dependents", nk) == 0, 30000);
    ASSERT_STREQ("ready", get_info(base, qp, "parent").state);
    ASSERT_EQ(1, cluster_int(&cl, rp, "LLEN t:{%s}:ready", np)); /* released once */
    /* more visits of the child's queue release nothing again */
    long long visits = cluster_node_calls(&cl, 0, "exists");
    WAIT_FOR(base, cluster_node_calls(&cl, 0, "exists") >= visits + 3, 30000);
    ASSERT_EQ(1, cluster_int(&cl, rp, "LLEN t:{%s}:ready", np));
    deps_lines rd = dependencies_of(base, qp, "parent");
    ASSERT_OK(rd.status);
    ASSERT_EQ(1, (long)rd.n);
    char want[64];
    snprintf(want, sizeof want, "%s:child completed completed", nk);
    ASSERT_STREQ(want, rd.line[0]);
    worker_stop_wait(base, w);
    rjq_client_free(c);
    event_base_free(base);
    redisFree(rk);
    redisFree(rp);
    cluster_stop(&cl);
}

/* A server-assigned (all-digit) id names a dependency, and a dependent
 * with one is read (both were refused as invalid job ids: RJQ_EINVAL at
 * the enqueue, 400 on the dashboard's job page of a numbered job). */
TEST(dependency_on_a_server_assigned_id_waits_and_reads) {
    test_env e;
    env_start(&e, "dn");
    rjq_job_options d = RJQ_JOB_OPTIONS_INIT;
    d.delay_ms = 3600000;
    enqueue_wait a = enqueue_job(e.base, e.q, "p", &d);
    ASSERT_OK(a.status);
    rjq_dep on_a = {"dn", a.id};
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.after = &on_a;
    o.n_after = 1;
    enqueue_wait b = enqueue_job(e.base, e.q, "p", &o); /* itself numbered */
    ASSERT_OK(b.status);
    ASSERT_STREQ("waiting", get_info(e.base, e.q, b.id).state);
    deps_lines rd = dependencies_of(e.base, e.q, b.id);
    ASSERT_OK(rd.status);
    ASSERT_EQ(1, (long)rd.n);
    char want[300];
    snprintf(want, sizeof want, "dn:%s delayed pending", a.id);
    ASSERT_STREQ(want, rd.line[0]);
    ASSERT_EQ(RJQ_EJOBID, rjq_queue_get_dependencies(e.q, "a b", on_deps_lines, &rd));
    env_stop(&e);
}

/* rjq_queue_get_job_deps (rjq job's read): a job without dependencies nor
 * dependents costs one script call (rjq job made two before: the list,
 * then the dependents); one with both gets both in one callback, its
 * dependencies' outcomes from their queue (one call more). */
typedef struct job_deps_read {
    int status, ran;
    size_t n, nd;
    char dep[64], dent[64];
} job_deps_read;

static void on_job_deps_read(rjq_client *c, int status, const rjq_dep_outcome *deps, size_t n,
                             const rjq_dep *dents, size_t nd, void *data) {
    (void)c;
    job_deps_read *rd = data;
    rd->status = status;
    rd->n = n;
    rd->nd = nd;
    if (n) {
        const rjq_dep_outcome *o = rjq_dep_outcome_get(deps, 0);
        snprintf(rd->dep, sizeof rd->dep, "%s:%s %s %s", o->queue, o->id, o->state, o->counted);
    }
    if (nd) snprintf(rd->dent, sizeof rd->dent, "%s:%s", dents[0].queue, dents[0].id);
    rd->ran++;
}

TEST(job_deps_read_of_a_job_without_dependencies_takes_one_script_call) {
    test_env e;
    env_start(&e, "jd");
    rjq_queue *q2 = open_queue(&e, "jd2");
    enqueue_x_ok(e.base, e.q, "plain", 3600000, 0);
    enqueue_x_ok(e.base, e.q, "a", 3600000, 0);
    rjq_dep on_a = {"jd", "a"};
    ASSERT_OK(enqueue_after(&e, q2, "b", &on_a, 1, RJQ_AFTER_FAIL).status);
    long long before = server_calls(e.rc, "fcall");
    job_deps_read rd = {0};
    ASSERT_OK(rjq_queue_get_job_deps(e.q, "plain", on_job_deps_read, &rd));
    ASSERT(loop_until(e.base, &rd.ran, 5000));
    ASSERT_OK(rd.status);
    ASSERT_EQ(0, (long long)rd.n);
    ASSERT_EQ(0, (long long)rd.nd);
    ASSERT_EQ(1, server_calls(e.rc, "fcall") - before);
    /* a's dependents (b), no dependencies: one call */
    before = server_calls(e.rc, "fcall");
    memset(&rd, 0, sizeof rd);
    ASSERT_OK(rjq_queue_get_job_deps(e.q, "a", on_job_deps_read, &rd));
    ASSERT(loop_until(e.base, &rd.ran, 5000));
    ASSERT_OK(rd.status);
    ASSERT_EQ(0, (long long)rd.n);
    ASSERT_EQ(1, (long long)rd.nd);
    ASSERT_STREQ("jd2:b", rd.dent);
    ASSERT_EQ(1, server_calls(e.rc, "fcall") - before);
    /* b's dependency (a): its list, then a's queue */
    before = server_calls(e.rc, "fcall");
    memset(&rd, 0, sizeof rd);
    ASSERT_OK(rjq_queue_get_job_deps(q2, "b", on_job_deps_read, &rd));
    ASSERT(loop_until(e.base, &rd.ran, 5000));
    ASSERT_OK(rd.status);
    ASSERT_EQ(1, (long long)rd.n);
    ASSERT_EQ(0, (long long)rd.nd);
    ASSERT_STREQ("jd:a delayed pending", rd.dep);
    ASSERT_EQ(2, server_calls(e.rc, "fcall") - before);
    ASSERT_EQ(RJQ_EJOBID, rjq_queue_get_job_deps(e.q, "a b", on_job_deps_read, &rd));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_get_job_deps(e.q, "a", NULL, &rd));
    env_stop(&e);
}

/* rjq_job_dependencies' and rjq_queue_get_dependencies' read (deps_read.c,
 * one path): the job's list on its queue, then ONE call per dependency
 * queue, however many of its dependencies that queue holds (the calls
 * sent in one pass: a round trip per master). Five dependencies on two
 * queues (one of them listed twice) take 1 + 2 script calls, not 1 + 5. */
TEST(dependencies_read_takes_one_call_per_dependency_queue_not_per_dependency) {
    test_env e;
    env_start(&e, "dq");
    rjq_queue *qa = open_queue(&e, "dqa"), *qb = open_queue(&e, "dqb");
    enqueue_x_ok(e.base, qa, "x1", 3600000, 0);
    enqueue_x_ok(e.base, qa, "x2", 3600000, 0);
    enqueue_x_ok(e.base, qb, "y1", 3600000, 0);
    enqueue_x_ok(e.base, qb, "y2", 3600000, 0);
    rjq_dep on[5] = {{"dqa", "x1"}, {"dqb", "y1"}, {"dqa", "x2"}, {"dqb", "y2"}, {"dqa", "x1"}};
    ASSERT_OK(enqueue_after(&e, e.q, "j", on, 5, RJQ_AFTER_FAIL).status);
    long long before = server_calls(e.rc, "fcall");
    deps_lines rd = dependencies_of(e.base, e.q, "j");
    ASSERT_EQ(3, server_calls(e.rc, "fcall") - before);
    ASSERT_OK(rd.status);
    ASSERT_EQ(5, (long)rd.n);
    const char *want[5] = {"dqa:x1 delayed pending", "dqb:y1 delayed pending", "dqa:x2 delayed pending",
                           "dqb:y2 delayed pending", "dqa:x1 delayed pending"};
    for (int i = 0; i < 5; i++) ASSERT_STREQ(want[i], rd.line[i]); /* in the order of after */
    env_stop(&e);
}

/* A job enqueued with dependencies has an entry in the deps hash; it goes
 * with the job's record, however the record is forgotten: a delete, the
 * cap of cancelled jobs, the dead cap (a burial by the policy 'fail'), the
 * retention of completed jobs. */
TEST(forgetting_a_job_with_dependencies_deletes_its_deps_entry) {
    test_env e;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.dead_max = 1;      /* (cancelled ones too) */
    qo.completed_max = 1; /* past it, the completion's sweep deletes */
    env_start_queue(&e, "fg", &qo);
    enqueue_x_ok(e.base, e.q, "a", 3600000, 0); /* pending: its dependents wait */
    rjq_dep on_a = {"fg", "a"};
    const char *ids[] = {"b", "c", "d", "x", "y"};
    for (size_t i = 0; i < 5; i++)
        ASSERT_OK(enqueue_after(&e, e.q, ids[i], &on_a, 1, RJQ_AFTER_FAIL).status);
    ASSERT_EQ(5, server_int(e.rc, "HLEN t:{fg}:deps"));
    /* delete of a cancelled waiting job */
    int done = 0;
    ASSERT_OK(rjq_queue_cancel(e.q, "b", on_cancel_wait, &done));
    ASSERT(loop_until(e.base, &done, 5000));
    ASSERT_EQ(1, done);
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{fg}:deps b")); /* (kept with its record) */
    count_wait cw = {0};
    ASSERT_OK(rjq_queue_delete(e.q, "b", on_count, &cw));
    ASSERT(loop_until(e.base, &cw.done, 5000));
    ASSERT_OK(cw.status);
    ASSERT_EQ(1, (long)cw.n);
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{fg}:deps b"));
    /* the cancelled cap: d's cancel forgets c */
    done = 0;
    ASSERT_OK(rjq_queue_cancel(e.q, "c", on_cancel_wait, &done));
    ASSERT(loop_until(e.base, &done, 5000));
    done = 0;
    ASSERT_OK(rjq_queue_cancel(e.q, "d", on_cancel_wait, &done));
    ASSERT(loop_until(e.base, &done, 5000));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{fg}:payload c"));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{fg}:deps c"));
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{fg}:deps d"));
    /* the dead cap: x and y buried by their policy when a dies; each burial
     * forgets the oldest dead job (a, then the first of x and y) */
    long dead = 0;
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, bury_it, &dead, &w));
    count_wait p = {0};
    ASSERT_OK(rjq_queue_promote(e.q, "a", on_count, &p));
    ASSERT(loop_until_count(e.base, &dead, 1, 10000));
    WAIT_FOR(e.base, server_int(e.rc, "ZCARD t:{fg}:waiting") == 0, 10000);
    WAIT_FOR(e.base, server_int(e.rc, "HEXISTS t:{fg}:payload x") +
                             server_int(e.rc, "HEXISTS t:{fg}:payload y") == 1, 10000);
    ASSERT_EQ(server_int(e.rc, "HEXISTS t:{fg}:payload x"), server_int(e.rc, "HEXISTS t:{fg}:deps x"));
    ASSERT_EQ(server_int(e.rc, "HEXISTS t:{fg}:payload y"), server_int(e.rc, "HEXISTS t:{fg}:deps y"));
    ASSERT_EQ(2, server_int(e.rc, "HLEN t:{fg}:deps")); /* d's and the one buried last's */
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{fg}:deps d"));
    worker_stop_wait(e.base, w);
    /* retention: r after a completed job, run and completed, then forgotten
     * past the cap of completed jobs */
    enqueue_x_ok(e.base, e.q, "k", 0, 0);
    ASSERT_OK(enqueue_after(&e, e.q, "r", &(rjq_dep){"fg", "k"}, 1, RJQ_AFTER_FAIL).status);
    ran r = {{0}, 0};
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_it, &r, &w));
    ASSERT(loop_until_count(e.base, &r.n, 2, 10000));
    ASSERT_STREQ("k,r", r.order);
    enqueue_x_ok(e.base, e.q, "s", 0, 0);
    ASSERT(loop_until_count(e.base, &r.n, 3, 10000));
    WAIT_FOR(e.base, server_int(e.rc, "HEXISTS t:{fg}:payload r") == 0, 10000);
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{fg}:deps r"));
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* A dependency whose record is removed before it finished (deleted
 * outside rjq, lost): its dependents do not wait for ever. The periodic
 * visit of their queue registers them again (deps_resume.lua), finds the
 * dependency missing and applies each one's policy: fail buries it with an
 * error naming the dependency and saying it was removed, run runs it,
 * ignore drops it from the list and runs it; the removed job's dependents
 * entry goes. */
TEST(dependency_removed_before_it_finished_applies_each_dependents_policy) {
    test_env e;
    env_start(&e, "rm");
    rjq_queue *q2 = open_queue(&e, "rm2");
    enqueue_x_ok(e.base, e.q, "a", 3600000, 0); /* held back: delayed an hour */
    rjq_dep on_a = {"rm", "a"};
    ASSERT_OK(enqueue_after(&e, q2, "f", &on_a, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, q2, "r", &on_a, 1, RJQ_AFTER_RUN).status);
    ASSERT_OK(enqueue_after(&e, q2, "i", &on_a, 1, RJQ_AFTER_IGNORE).status);
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{rm}:dependents a"));
    /* a goes, unfinished, every column of it */
    const char *cols[] = {"payload", "state", "options", "watchers"};
    for (size_t k = 0; k < sizeof cols / sizeof cols[0]; k++)
        freeReplyObject(server_cmd(e.rc, "HDEL t:{rm}:%s a", cols[k]));
    freeReplyObject(server_cmd(e.rc, "ZREM t:{rm}:delayed a"));
    ASSERT_EQ(RJQ_ENOTFOUND, get_info(e.base, e.q, "a").status);
    /* their registrations made to look a minute old (DEPS_RESUME_MS) */
    freeReplyObject(server_cmd(e.rc, "ZADD t:{rm2}:waiting 1 f 1 r 1 i"));
    ran r = {{0}, 0};
    rjq_worker_options wo = quiet_worker_options(1);
    wo.reclaim_ms = 50;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q2, &wo, complete_it, &r, &w));
    ASSERT(loop_until_count(e.base, &r.n, 2, 10000)); /* r and i ran */
    WAIT_FOR(e.base, state_is(&e, q2, "f", "dead"), 10000);
    ASSERT_STREQ("dependency rm:a was removed (no record of it)", get_info(e.base, q2, "f").error);
    ASSERT(strstr(r.order, "r") != NULL && strstr(r.order, "i") != NULL);
    ASSERT_STREQ("completed", get_info(e.base, q2, "r").state);
    ASSERT_STREQ("completed", get_info(e.base, q2, "i").state);
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{rm2}:waiting"));
    /* the removed job's dependents entry went with the registration that
     * found it missing (nothing would ever finish it) */
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{rm}:dependents a"));
    /* ignore: dropped from its list ('-'); run: counted ('m', missing) */
    redisReply *li = server_cmd(e.rc, "HGET t:{rm2}:deps i");
    redisReply *lr = server_cmd(e.rc, "HGET t:{rm2}:deps r");
    ASSERT(li->type == REDIS_REPLY_STRING && strstr(li->str, "\n- rm a") != NULL);
    ASSERT(lr->type == REDIS_REPLY_STRING && strstr(lr->str, "\nm rm a") != NULL);
    freeReplyObject(li);
    freeReplyObject(lr);
    ASSERT_EQ(2, r.n); /* f never ran */
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* ---- every path that finishes or removes a dependency releases its
 * dependents at once (cancel, reclaim to dead, the orphan sweep, delete
 * and purge): those of its queue in that script (DEPS.finished), those of
 * other queues from the reply by the calling client. No worker sweeps in
 * these tests (none runs, or its visit is an hour away): a release left
 * to the sweep never comes. */

/* cancel.lua as the client calls it (dead cap 1000). Its reply, to free. */
static redisReply *cancel_fcall(redisContext *rc, const char *q, const char *id) {
    char prefix[48];
    snprintf(prefix, sizeof prefix, "t:{%s}:job:", q);
    const char *args[] = {prefix, id, "1000"};
    return server_fcall(rc, RJQ__S_CANCEL, q, args, 3);
}

/* Whether job id of queue q failed with error err. */
static int error_is(test_env *e, rjq_queue *q, const char *id, const char *err) {
    info_wait i = get_info(e->base, q, id);
    return strcmp(i.state, "dead") == 0 && strcmp(i.error, err) == 0;
}

/* Cancelling a dependency (here a waiting job: cancelled alone) applies
 * the policies of its dependents of its queue in the cancel's own script:
 * fail buries (and the buried job's dependent of the queue is buried in
 * that call too), run releases, ignore drops the line. The reply carries
 * the dependents entries left (other queues): the cancelled job's first,
 * then those of the jobs it buried. Through rjq_queue_cancel those are
 * released by the cancelling client at once. */
TEST(cancel_of_a_dependency_applies_its_queues_policies_in_the_cancel_and_replies_the_rest) {
    test_env e;
    env_start(&e, "cs");
    rjq_queue *q2 = open_queue(&e, "cs2");
    enqueue_x_ok(e.base, e.q, "x", 3600000, 0);
    enqueue_x_ok(e.base, e.q, "y", 3600000, 0);
    rjq_dep on_x = {"cs", "x"}, on_b = {"cs", "b"}, on_f = {"cs", "f"};
    rjq_dep b_y[2] = {{"cs", "b"}, {"cs", "y"}};
    ASSERT_OK(enqueue_after(&e, e.q, "b", &on_x, 1, RJQ_AFTER_FAIL).status); /* b waits */
    ASSERT_OK(enqueue_after(&e, e.q, "f", &on_b, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, e.q, "g", &on_f, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, e.q, "r", &on_b, 1, RJQ_AFTER_RUN).status);
    ASSERT_OK(enqueue_after(&e, e.q, "i", b_y, 2, RJQ_AFTER_IGNORE).status);
    ASSERT_OK(enqueue_after(&e, q2, "o", &on_b, 1, RJQ_AFTER_RUN).status);
    ASSERT_OK(enqueue_after(&e, q2, "p", &on_f, 1, RJQ_AFTER_RUN).status);
    redisReply *r = cancel_fcall(e.rc, "cs", "b");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 7);
    ASSERT_EQ(1, r->element[0]->integer);
    ASSERT_STREQ("waiting", r->element[1]->str);
    ASSERT_EQ(1, r->element[2]->integer); /* b's own entry first */
    ASSERT_STREQ("b", r->element[3]->str);
    ASSERT_STREQ("cs2 o", r->element[4]->str);
    ASSERT_STREQ("f", r->element[5]->str); /* buried by the cancel, with a dependent on cs2 */
    ASSERT_STREQ("cs2 p", r->element[6]->str);
    freeReplyObject(r);
    /* counted in the cancel: no call of the client's yet */
    ASSERT_STREQ("cancelled", get_info(e.base, e.q, "b").state);
    ASSERT(error_is(&e, e.q, "f", "dependency cs:b ended cancelled"));
    ASSERT(error_is(&e, e.q, "g", "dependency cs:f ended dead"));
    ASSERT_STREQ("ready", get_info(e.base, e.q, "r").state);
    ASSERT(deps_line(e.rc, "cs", "r", "\nx cs b"));
    ASSERT_STREQ("waiting", get_info(e.base, e.q, "i").state); /* for y */
    ASSERT(deps_line(e.rc, "cs", "i", "\n- cs b"));
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{cs}:waiting")); /* i */
    ASSERT_STREQ("delayed", get_info(e.base, e.q, "x").state); /* b's dependency: untouched */
    ASSERT_STREQ("waiting", get_info(e.base, q2, "o").state); /* (the client's) */
    ASSERT_STREQ("waiting", get_info(e.base, q2, "p").state);
    ASSERT_EQ(2, server_int(e.rc, "ZCARD t:{cs}:depsfin")); /* b, f: for the sweep meanwhile */

    /* through rjq_queue_cancel: released by the cancelling client at once */
    enqueue_x_ok(e.base, e.q, "a", 3600000, 0);
    rjq_dep on_a = {"cs", "a"}, on_c = {"cs", "c"};
    ASSERT_OK(enqueue_after(&e, e.q, "c", &on_a, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, q2, "s", &on_a, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, q2, "t", &on_c, 1, RJQ_AFTER_RUN).status);
    int done = 0;
    ASSERT_OK(rjq_queue_cancel(e.q, "a", on_cancel_wait, &done));
    ASSERT(loop_until(e.base, &done, 5000));
    ASSERT_EQ(1, done);
    ASSERT(error_is(&e, e.q, "c", "dependency cs:a ended cancelled"));
    WAIT_FOR(e.base, error_is(&e, q2, "s", "dependency cs:a ended cancelled"), 10000);
    WAIT_FOR(e.base, state_is(&e, q2, "t", "ready"), 10000);
    ASSERT(deps_line(e.rc, "cs2", "t", "\nd cs c"));
    WAIT_FOR(e.base, server_int(e.rc, "HEXISTS t:{cs}:dependents a") == 0 &&
                     server_int(e.rc, "HEXISTS t:{cs}:dependents c") == 0, 10000);
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{cs2}:ready")); /* t, once */
    env_stop(&e);
}

/* Job j of queue q planted active under token tok, its attempts spent (3
 * of the default 3), its lease ending at `lease` (server ms). */
static void plant_spent(redisContext *rc, const char *q, const char *j, const char *tok,
                        const char *lease) {
    freeReplyObject(server_cmd(rc, "HSET t:{%s}:payload %s x", q, j));
    freeReplyObject(server_cmd(rc, "HSET t:{%s}:state %s %s%s%s", q, j, "active 3 ", tok, " @1,2,"));
    freeReplyObject(server_cmd(rc, "ZADD t:{%s}:active %s %s", q, lease, j));
}

/* A job whose lease expired with its attempts spent is reclaimed dead:
 * its dependents of its queue apply their policies in the reclaim's
 * script, the entry of those of other queues is in its reply, and
 * rjq_queue_reclaim's client releases them at once. */
TEST(reclaim_to_dead_applies_its_dependents_policies_at_once) {
    test_env e;
    env_start(&e, "rd");
    rjq_queue *q2 = open_queue(&e, "rd2");
    plant_spent(e.rc, "rd", "a", "tok", "1");
    rjq_dep on_a = {"rd", "a"};
    ASSERT_OK(enqueue_after(&e, e.q, "f", &on_a, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, e.q, "r", &on_a, 1, RJQ_AFTER_RUN).status);
    ASSERT_OK(enqueue_after(&e, q2, "o", &on_a, 1, RJQ_AFTER_RUN).status);
    const char *args[] = {"t:{rd}:job:", "t:{rd}:wake", "0", "1000", "1000", "-1", "0", "0", "0.5"};
    redisReply *r = server_fcall(e.rc, RJQ__S_RECLAIM, "rd", args, 9);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 3); /* { reclaimed, a's entry } */
    ASSERT_EQ(1, r->element[0]->integer);
    ASSERT_STREQ("a", r->element[1]->str);
    ASSERT_STREQ("rd2 o", r->element[2]->str);
    freeReplyObject(r);
    ASSERT(error_is(&e, e.q, "a", "lease expired"));
    ASSERT(error_is(&e, e.q, "f", "dependency rd:a ended dead"));
    ASSERT_STREQ("ready", get_info(e.base, e.q, "r").state);
    ASSERT_STREQ("waiting", get_info(e.base, q2, "o").state); /* (the client's) */

    /* through rjq_queue_reclaim: released by its client at once */
    plant_spent(e.rc, "rd", "b", "tok", "1");
    rjq_dep on_b = {"rd", "b"};
    ASSERT_OK(enqueue_after(&e, q2, "p", &on_b, 1, RJQ_AFTER_FAIL).status);
    count_wait c = {0};
    ASSERT_OK(rjq_queue_reclaim(e.q, on_count, &c));
    ASSERT(loop_until(e.base, &c.done, 5000));
    ASSERT_OK(c.status);
    ASSERT_EQ(1, c.n);
    WAIT_FOR(e.base, error_is(&e, q2, "p", "dependency rd:b ended dead"), 10000);
    WAIT_FOR(e.base, server_int(e.rc, "HEXISTS t:{rd}:dependents b") == 0, 10000);
    ASSERT_STREQ("waiting", get_info(e.base, q2, "o").state); /* (a's reply went to no client) */
    env_stop(&e);
}

/* The periodic visit (reclaim.lua with look, a worker's client's) that
 * reclaims a job dead counts its dependent of its queue in that script
 * and carries the entry of its dependent of another queue after the
 * visit's three figures, which the visiting client releases (upkeep.c). */
TEST(visit_reply_carries_the_entries_of_the_jobs_it_made_dead) {
    test_env e;
    env_start(&e, "rv");
    rjq_queue *q2 = open_queue(&e, "rv2");
    plant_spent(e.rc, "rv", "a", "tok", "1");
    rjq_dep on_a = {"rv", "a"};
    ASSERT_OK(enqueue_after(&e, e.q, "r", &on_a, 1, RJQ_AFTER_RUN).status);
    ASSERT_OK(enqueue_after(&e, q2, "o", &on_a, 1, RJQ_AFTER_RUN).status);
    const char *args[] = {"t:{rv}:job:", "t:{rv}:wake", "0", "1000", "1000", "-1", "0", "1", "0.5"};
    redisReply *r = server_fcall(e.rc, RJQ__S_RECLAIM, "rv", args, 9);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 5); /* { n, ready, flags, a, entry } */
    ASSERT_EQ(1, r->element[0]->integer);
    ASSERT_EQ(1, r->element[1]->integer); /* r, released in the visit */
    ASSERT_STREQ("a", r->element[3]->str);
    ASSERT_STREQ("rv2 o", r->element[4]->str);
    freeReplyObject(r);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "r").state);
    env_stop(&e);
}

/* The orphan sweep returns a dead client's job dead (attempts spent): its
 * dependents of its queue apply their policies in orphans.lua, the entry
 * of those of other queues follows in its reply. */
TEST(orphan_sweep_to_dead_applies_its_dependents_policies_in_its_script) {
    test_env e;
    env_start(&e, "od");
    rjq_queue *q2 = open_queue(&e, "od2");
    plant_spent(e.rc, "od", "a", "cx.ABCDEFGHIJp1", "99999999999999"); /* (a pushed job of cx) */
    rjq_dep on_a = {"od", "a"};
    ASSERT_OK(enqueue_after(&e, e.q, "f", &on_a, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, e.q, "r", &on_a, 1, RJQ_AFTER_RUN).status);
    ASSERT_OK(enqueue_after(&e, q2, "o", &on_a, 1, RJQ_AFTER_RUN).status);
    const char *orph[] = {"t:{od}:job:", "t:{od}:wake", "cx.", "100", "1000", "99999999999999"};
    redisReply *r = server_fcall(e.rc, RJQ__S_ORPHANS, "od", orph, 6);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4);
    ASSERT_EQ(1, r->element[0]->integer);
    ASSERT_EQ(0, r->element[1]->integer);
    ASSERT_STREQ("a", r->element[2]->str);
    ASSERT_STREQ("od2 o", r->element[3]->str);
    freeReplyObject(r);
    ASSERT(error_is(&e, e.q, "a", "worker lost"));
    ASSERT(error_is(&e, e.q, "f", "dependency od:a ended dead"));
    ASSERT_STREQ("ready", get_info(e.base, e.q, "r").state);
    ASSERT_STREQ("waiting", get_info(e.base, q2, "o").state); /* (the client's) */
    env_stop(&e);
}

/* The same on a queue of format 2 (docs/scripts.md "Queue format 2"): the
 * dead client's job was pushed to it awaited, its producer's reply
 * channel at the end of its state; a dependent of another queue registers
 * (its dependents entry only: the channel stays in the state); the orphan
 * sweep buries it: the producer's channel is moved to the column and told
 * (the column gone), and the dependent's entry is in the reply. */
TEST(format2_orphan_sweep_to_dead_of_a_pushed_job_tells_its_producer_and_replies_its_other_queue_dependent) {
    test_env e;
    env_start(&e, "of");
    rjq_queue *q2 = open_queue(&e, "of2");
    freeReplyObject(server_cmd(e.rc, "HSET t:{of}:payload a x"));
    freeReplyObject(server_cmd(e.rc, "HSET t:{of}:state a %s",
                               "active 3 cx.ABCDEFGHIJp1 @1,2, t:{of}:reply:cx:framed"));
    freeReplyObject(server_cmd(e.rc, "ZADD t:{of}:active 99999999999999 a"));
    rjq_dep on_a = {"of", "a"};
    ASSERT_OK(enqueue_after(&e, q2, "o", &on_a, 1, RJQ_AFTER_RUN).status);
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{of}:watchers a")); /* (no mark: depoq) */
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{of}:dependents a"));
    redisReply *r = server_cmd(e.rc, "HGET t:{of}:state a");
    ASSERT(r->type == REDIS_REPLY_STRING && strstr(r->str, "t:{of}:reply:cx:framed") != NULL);
    freeReplyObject(r);
    const char *orph[] = {"t:{of}:job:", "t:{of}:wake", "cx.", "100", "1000", "99999999999999"};
    r = server_fcall(e.rc, RJQ__S_ORPHANS, "of", orph, 6);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4);
    ASSERT_EQ(1, r->element[0]->integer);
    ASSERT_STREQ("a", r->element[2]->str);
    ASSERT_STREQ("of2 o", r->element[3]->str);
    freeReplyObject(r);
    ASSERT(error_is(&e, e.q, "a", "worker lost"));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{of}:watchers a")); /* told */
    ASSERT_STREQ("waiting", get_info(e.base, q2, "o").state); /* (the client's) */
    /* the client's release (as the sweep's would be): ready, by its policy */
    const char *rel[] = {"t:{of2}:job:", "t:{of2}:wake", "1000", "o", "of", "a", "dead"};
    r = server_fcall_reply(e.rc, RJQ__S_DEPS_RELEASE, "of2", rel, 7);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->integer == 2);
    freeReplyObject(r);
    ASSERT_STREQ("ready", get_info(e.base, q2, "o").state);
    env_stop(&e);
}

/* A waiting or ready job is not deleted (rjq_queue_delete: RJQ_ESTATE):
 * its dependents keep waiting for it, registered. */
TEST(delete_of_a_waiting_or_ready_dependency_is_refused_and_its_dependents_wait) {
    test_env e;
    env_start(&e, "dw");
    rjq_queue *q2 = open_queue(&e, "dw2");
    enqueue_x_ok(e.base, e.q, "a", 0, 0); /* ready: no worker */
    enqueue_x_ok(e.base, e.q, "x", 3600000, 0);
    rjq_dep on_a = {"dw", "a"}, on_x = {"dw", "x"}, on_w = {"dw", "w"};
    ASSERT_OK(enqueue_after(&e, e.q, "w", &on_x, 1, RJQ_AFTER_FAIL).status); /* waiting */
    ASSERT_OK(enqueue_after(&e, q2, "o", &on_a, 1, RJQ_AFTER_RUN).status);
    ASSERT_OK(enqueue_after(&e, q2, "p", &on_w, 1, RJQ_AFTER_RUN).status);
    const char *ids[] = {"a", "w"};
    for (size_t k = 0; k < 2; k++) {
        count_wait c = {0};
        ASSERT_OK(rjq_queue_delete(e.q, ids[k], on_count, &c));
        ASSERT(loop_until(e.base, &c.done, 5000));
        ASSERT_EQ(RJQ_ESTATE, c.status);
    }
    ASSERT_STREQ("ready", get_info(e.base, e.q, "a").state);
    ASSERT_STREQ("waiting", get_info(e.base, e.q, "w").state);
    ASSERT_STREQ("waiting", get_info(e.base, q2, "o").state);
    ASSERT_STREQ("waiting", get_info(e.base, q2, "p").state);
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{dw}:dependents a"));
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{dw}:dependents w"));
    env_stop(&e);
}

/* A dead or cancelled job deleted (purge, delete) before its dependents
 * were released (its finisher died between the two): they are released
 * by the deleting client at once, with how it ended (not "missing"). */
TEST(purge_or_delete_of_a_dependency_not_yet_released_releases_its_dependents_at_once) {
    test_env e;
    env_start(&e, "pd");
    rjq_queue *q2 = other_waits_on_active_a(&e, "pd2", "o", RJQ_AFTER_RUN);
    ASSERT_EQ(5, fail_fcall(e.rc, "pd", "a")); /* dead; its reply told no client */
    ASSERT_STREQ("waiting", get_info(e.base, q2, "o").state);
    count_wait c = {0};
    ASSERT_OK(rjq_queue_purge(e.q, RJQ_STATE_DEAD, 10, on_count, &c));
    ASSERT(loop_until(e.base, &c.done, 5000));
    ASSERT_OK(c.status);
    ASSERT_EQ(1, c.n);
    WAIT_FOR(e.base, state_is(&e, q2, "o", "ready"), 10000);
    ASSERT(deps_line(e.rc, "pd2", "o", "\nd pd a")); /* counted dead */
    WAIT_FOR(e.base, server_int(e.rc, "HEXISTS t:{pd}:dependents a") == 0, 10000);
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{pd}:depsfin"));

    enqueue_x_ok(e.base, e.q, "b", 3600000, 0);
    rjq_dep on_b = {"pd", "b"};
    ASSERT_OK(enqueue_after(&e, q2, "p", &on_b, 1, RJQ_AFTER_FAIL).status);
    server_cancel_fcall(e.rc, "pd", "b"); /* cancelled; its reply told no client */
    ASSERT_STREQ("waiting", get_info(e.base, q2, "p").state);
    count_wait d = {0};
    ASSERT_OK(rjq_queue_delete(e.q, "b", on_count, &d));
    ASSERT(loop_until(e.base, &d.done, 5000));
    ASSERT_OK(d.status);
    ASSERT_EQ(1, d.n);
    WAIT_FOR(e.base, error_is(&e, q2, "p", "dependency pd:b ended cancelled"), 10000);
    WAIT_FOR(e.base, server_int(e.rc, "HEXISTS t:{pd}:dependents b") == 0, 10000);
    env_stop(&e);
}

/* README "Rules for cancel and replay": only a dependent not released yet
 * (its release still to come from the sweep) counts the replayed job's new
 * outcome when it finishes again. a dies and its finisher dies before
 * telling p (the failure script ran, nothing more); a is replayed and
 * completes: p (policy fail) is released, counting a completed, not
 * buried by the death nobody told it of. */
TEST(dependent_not_yet_told_of_its_dependencys_death_counts_the_replayed_jobs_new_outcome) {
    test_env e;
    env_start(&e, "ry");
    rjq_queue *q2 = open_queue(&e, "ry2");
    plant_active(e.rc, "ry", "a");
    rjq_dep on_a = {"ry", "a"};
    ASSERT_OK(enqueue_after(&e, q2, "p", &on_a, 1, RJQ_AFTER_FAIL).status);
    ASSERT_EQ(5, fail_fcall(e.rc, "ry", "a")); /* (its reply names p: never sent on) */
    ASSERT_STREQ("ry2 p", strchr(fail_entries, '=') + 1);
    ASSERT_STREQ("dead", get_info(e.base, e.q, "a").state);
    ASSERT_STREQ("waiting", get_info(e.base, q2, "p").state);
    count_wait c = {0};
    ASSERT_OK(rjq_queue_replay(e.q, "a", 1, on_count, &c));
    ASSERT(loop_until(e.base, &c.done, 5000));
    ASSERT_EQ(1, c.n);
    ASSERT_STREQ("waiting", get_info(e.base, q2, "p").state);
    ran r = {{0}, 0};
    rjq_worker_options wo = quiet_worker_options(1);
    wo.reclaim_ms = 50; /* (its queue's sweep visits too, often) */
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_it, &r, &w));
    ASSERT(loop_until_count(e.base, &r.n, 1, 10000));
    WAIT_FOR(e.base, !state_is(&e, q2, "p", "waiting"), 10000);
    ASSERT_STREQ("ready", get_info(e.base, q2, "p").state);
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{ry2}:ready"));
    deps_lines rd = dependencies_of(e.base, q2, "p");
    ASSERT_OK(rd.status);
    ASSERT_EQ(1, (long)rd.n);
    ASSERT_STREQ("ry:a completed completed", rd.line[0]);
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{ry}:dependents") == 0, 10000);
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{ry2}:ready"));
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* The replay rules with dependents of the dependency's own queue (counted
 * in its failing script): replaying the dead dependency re-blocks nothing
 * (the job its death buried stays dead, the one it released stays ready,
 * nothing waits again); replaying the buried dependent makes it ready at
 * once, its list keeping how its dependency ended. */
TEST(replay_of_a_dead_dependency_of_its_queue_reblocks_nothing_and_a_buried_dependent_replayed_runs) {
    test_env e;
    env_start(&e, "rq");
    plant_active(e.rc, "rq", "a");
    rjq_dep on_a = {"rq", "a"};
    ASSERT_OK(enqueue_after(&e, e.q, "f", &on_a, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, e.q, "r", &on_a, 1, RJQ_AFTER_RUN).status);
    ASSERT_EQ(2, fail_fcall(e.rc, "rq", "a")); /* dead; both counted in its script */
    ASSERT(error_is(&e, e.q, "f", "dependency rq:a ended dead"));
    ASSERT_STREQ("ready", get_info(e.base, e.q, "r").state);
    count_wait c = {0};
    ASSERT_OK(rjq_queue_replay(e.q, "a", 1, on_count, &c));
    ASSERT(loop_until(e.base, &c.done, 5000));
    ASSERT_EQ(1, c.n);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "a").state);
    ASSERT_STREQ("dead", get_info(e.base, e.q, "f").state); /* stays buried */
    ASSERT_STREQ("ready", get_info(e.base, e.q, "r").state);
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{rq}:waiting"));
    ASSERT_EQ(2, server_int(e.rc, "LLEN t:{rq}:ready")); /* r and a, once each */
    count_wait d = {0};
    ASSERT_OK(rjq_queue_replay(e.q, "f", 1, on_count, &d));
    ASSERT(loop_until(e.base, &d.done, 5000));
    ASSERT_EQ(1, d.n);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "f").state); /* runs at once */
    ASSERT(deps_line(e.rc, "rq", "f", "\nd rq a"));          /* how a ended */
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{rq}:waiting"));
    ASSERT_EQ(3, server_int(e.rc, "LLEN t:{rq}:ready"));
    env_stop(&e);
}

/* (cancel_releasing_a_dependent_of_its_queue_takes_one_script_call: 49
 * on deprel, where the dependent marked its dependency; merged with deps15
 * 48: no watchers mark, so no HDEL of the watchers column, one HEXISTS of
 * the dependents entry instead (notify_finished), and the release reads
 * the priority from the list's head, no HMGET of the options: as read
 * from the scripts, the total measured; 50 since dl39: the HLEN after the
 * entry's HDEL and the pin's HDEL, the dependents hash going with its last
 * entry, lib.lua DEPS.forget) */
#define CANCEL_RELEASE_COMMANDS 50

/* rjq_queue_cancel of a job whose only dependent waits in its queue: one
 * script call (the cancel counts it), no deps_due, deps_release or
 * deps_done call of the client's (before: all three, the release a round
 * trip after the cancel). */
TEST(cancel_releasing_a_dependent_of_its_queue_takes_one_script_call) {
    test_env e;
    env_start(&e, "c1");
    enqueue_x_ok(e.base, e.q, "a", 3600000, 0);
    rjq_dep on_a = {"c1", "a"};
    ASSERT_OK(enqueue_after(&e, e.q, "b", &on_a, 1, RJQ_AFTER_RUN).status);
    long long calls = server_script_calls(e.rc), before = server_commands_run(e.rc);
    int done = 0;
    ASSERT_OK(rjq_queue_cancel(e.q, "a", on_cancel_wait, &done));
    ASSERT(loop_until(e.base, &done, 5000));
    ASSERT_EQ(1, done);
    long long n = server_commands_run(e.rc) - before - 1; /* (the FCALL) */
    printf("commands: cancel releasing a dependent of its queue %lld\n", n);
    ASSERT_EQ(CANCEL_RELEASE_COMMANDS, n);
    /* (a call the client sent before the callback is run before this read's) */
    ASSERT_STREQ("ready", get_info(e.base, e.q, "b").state);
    ASSERT_EQ(calls + 2, server_script_calls(e.rc)); /* the cancel, the read */
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{c1}:dependents t:{c1}:depsfin"));
    env_stop(&e);
}

/* A job whose run time is over with its attempts spent is failed dead by
 * the reclaim sweep ("timed out"): its dependents of its queue apply their
 * policies in that script, the entry of those of other queues is in its
 * reply (as reclaim_to_dead_applies_its_dependents_policies_at_once). */
TEST(timeout_to_dead_applies_its_dependents_policies_in_the_reclaim) {
    test_env e;
    env_start(&e, "td");
    rjq_queue *q2 = open_queue(&e, "td2");
    plant_spent(e.rc, "td", "a", "tok", "1");
    freeReplyObject(server_cmd(e.rc, "HSET t:{td}:options a 0,3,;1000")); /* a timeout of 1 s */
    freeReplyObject(server_cmd(e.rc, "ZADD t:{td}:deadlines 1 a"));       /* over */
    rjq_dep on_a = {"td", "a"};
    ASSERT_OK(enqueue_after(&e, e.q, "f", &on_a, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, q2, "o", &on_a, 1, RJQ_AFTER_RUN).status);
    const char *args[] = {"t:{td}:job:", "t:{td}:wake", "0", "1000", "1000", "-1", "0", "0", "0.5"};
    redisReply *r = server_fcall(e.rc, RJQ__S_RECLAIM, "td", args, 9);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    ASSERT_EQ(1, r->element[0]->integer);
    ASSERT_STREQ("a", r->element[1]->str);
    ASSERT_STREQ("td2 o", r->element[2]->str);
    freeReplyObject(r);
    ASSERT(error_is(&e, e.q, "a", "timed out after 1000 ms"));
    ASSERT(error_is(&e, e.q, "f", "dependency td:a ended dead"));
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{td}:waiting"));
    env_stop(&e);
}

/* The dependencies of job id of queue q as rjq_queue_get_dependencies
 * reads them, into rd. */
static void read_list(test_env *e, const char *id, deps_lines *rd) {
    *rd = dependencies_of(e->base, e->q, id);
    ASSERT_OK(rd->status);
}

/* A job released when its last dependency completed keeps its list as it
 * was enqueued (the release writes no marks: DEPS.release), and still
 * reads each dependency as completed; a job that left waiting otherwise
 * (cancelled, or buried by its policy) reads its unfinished ones as
 * pending; one released after a dependency ended dead (policy run) reads
 * each as it counted. */
TEST(released_job_reads_its_dependencies_as_they_counted_without_its_list_rewritten) {
    test_env e;
    env_start(&e, "rl");
    plant_active(e.rc, "rl", "a");
    plant_active(e.rc, "rl", "k");
    enqueue_x_ok(e.base, e.q, "x", 3600000, 0);
    rjq_dep on_a = {"rl", "a"}, on_x = {"rl", "x"};
    rjq_dep on_ak[2] = {{"rl", "a"}, {"rl", "k"}}, on_kx[2] = {{"rl", "k"}, {"rl", "x"}};
    ASSERT_OK(enqueue_after(&e, e.q, "b", &on_a, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, e.q, "r", on_ak, 2, RJQ_AFTER_RUN).status);
    ASSERT_OK(enqueue_after(&e, e.q, "y", &on_x, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, e.q, "f", on_kx, 2, RJQ_AFTER_FAIL).status);
    const char *one[] = {"a"};
    assert_completes_each(e.rc, "rl", one, 1);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "b").state);
    ASSERT(deps_line(e.rc, "rl", "b", "\nw rl a")); /* (not rewritten) */
    ASSERT(deps_line(e.rc, "rl", "r", "\nc rl a")); /* (still waiting: written) */
    ASSERT_EQ(2, fail_fcall(e.rc, "rl", "k"));
    ASSERT_STREQ("ready", get_info(e.base, e.q, "r").state);
    ASSERT_STREQ("dead", get_info(e.base, e.q, "f").state);
    int done = 0;
    ASSERT_OK(rjq_queue_cancel(e.q, "y", on_cancel_wait, &done));
    ASSERT(loop_until(e.base, &done, 5000));
    deps_lines rd;
    read_list(&e, "b", &rd);
    ASSERT_EQ(1, (long)rd.n);
    ASSERT_STREQ("rl:a completed completed", rd.line[0]);
    read_list(&e, "r", &rd);
    ASSERT_EQ(2, (long)rd.n);
    ASSERT_STREQ("rl:a completed completed", rd.line[0]);
    ASSERT_STREQ("rl:k dead dead", rd.line[1]);
    read_list(&e, "y", &rd);
    ASSERT_EQ(1, (long)rd.n);
    ASSERT_STREQ("rl:x delayed pending", rd.line[0]);
    read_list(&e, "f", &rd);
    ASSERT_EQ(2, (long)rd.n);
    ASSERT_STREQ("rl:k dead dead", rd.line[0]);
    ASSERT_STREQ("rl:x delayed pending", rd.line[1]);
    env_stop(&e);
}

/* A list stored before its head had the priority ("<policy> <delay>", the
 * older format deps_add.lua describes) is still read: a job with one
 * dependency of its queue so stored is released by that dependency's
 * completion (the one-line path of DEPS.release), its line marked 'c' in
 * the list (an older head says nothing of marks left unwritten), and reads
 * it as completed. */
TEST(older_one_line_list_without_the_priority_is_released_and_marked) {
    test_env e;
    env_start(&e, "ol");
    b_after_active_a(&e, "ol");
    freeReplyObject(server_cmd(e.rc, "HSET t:{ol}:deps b %s", "fail 0\nw ol a"));
    const char *one[] = {"a"};
    assert_completes_each(e.rc, "ol", one, 1);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "b").state);
    redisReply *d = server_cmd(e.rc, "HGET t:{ol}:deps b");
    ASSERT(d->type == REDIS_REPLY_STRING);
    ASSERT_STREQ("fail 0\nc ol a", d->str);
    freeReplyObject(d);
    deps_lines rd;
    read_list(&e, "b", &rd);
    ASSERT_EQ(1, (long)rd.n);
    ASSERT_STREQ("ol:a completed completed", rd.line[0]);
    env_stop(&e);
}

/* A dependent of its dependency's own queue leaves no watchers mark (its
 * dependents entry tells: DEPS.register), so every path that makes the
 * dependency dead or removes it finds it by that entry: the reclaim of an
 * expired lease or a timeout with attempts spent, the orphan sweep, and a
 * delete of a dead dependency whose release never ran (its entry still
 * there), whose policy 'fail' burial releases the buried job's own
 * unmarked dependent in that call too (delete.lua sets J.dt). No dependent
 * of another queue: nothing marks the dependencies, no client releases. */
TEST(dependency_with_only_unmarked_dependents_of_its_queue_releases_them_on_every_path_to_dead) {
    test_env e;
    env_start(&e, "um");
    /* delete of a dead dependency not yet released: d -> i -> j */
    plant_active(e.rc, "um", "d");
    rjq_dep on_d = {"um", "d"}, on_i = {"um", "i"};
    ASSERT_OK(enqueue_after(&e, e.q, "i", &on_d, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, e.q, "j", &on_i, 1, RJQ_AFTER_FAIL).status);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{um}:watchers"));
    /* its finisher as one that died before the release: the failure sees
     * no dependents hash (set aside, then put back) */
    freeReplyObject(server_cmd(e.rc, "RENAME t:{um}:dependents t:{um}:aside"));
    ASSERT_EQ(2, fail_fcall(e.rc, "um", "d"));
    freeReplyObject(server_cmd(e.rc, "RENAME t:{um}:aside t:{um}:dependents"));
    ASSERT_STREQ("waiting", get_info(e.base, e.q, "i").state);
    count_wait c = {0};
    ASSERT_OK(rjq_queue_delete(e.q, "d", on_count, &c));
    ASSERT(loop_until(e.base, &c.done, 5000));
    ASSERT_OK(c.status);
    ASSERT_EQ(1, c.n);
    ASSERT(error_is(&e, e.q, "i", "dependency um:d ended dead"));
    ASSERT(error_is(&e, e.q, "j", "dependency um:i ended dead"));
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{um}:waiting"));
    ASSERT_EQ(0, server_int(e.rc, "HLEN t:{um}:dependents"));

    /* reclaim to dead: a's lease expired, t's run time over (attempts
     * spent); the orphan sweep: o of a dead client (cx) */
    plant_spent(e.rc, "um", "a", "tok", "1");
    plant_spent(e.rc, "um", "t", "tok", "1");
    freeReplyObject(server_cmd(e.rc, "HSET t:{um}:options t 0,3,;1000")); /* a timeout of 1 s */
    freeReplyObject(server_cmd(e.rc, "ZADD t:{um}:deadlines 1 t"));       /* over */
    plant_spent(e.rc, "um", "o", "cx.ABCDEFGHIJp1", "99999999999999");
    rjq_dep on_a = {"um", "a"}, on_t = {"um", "t"}, on_o = {"um", "o"};
    ASSERT_OK(enqueue_after(&e, e.q, "af", &on_a, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, e.q, "ar", &on_a, 1, RJQ_AFTER_RUN).status);
    ASSERT_OK(enqueue_after(&e, e.q, "tf", &on_t, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, e.q, "of", &on_o, 1, RJQ_AFTER_FAIL).status);
    ASSERT_OK(enqueue_after(&e, e.q, "or", &on_o, 1, RJQ_AFTER_RUN).status);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{um}:watchers"));
    const char *args[] = {"t:{um}:job:", "t:{um}:wake", "0", "1000", "1000", "-1", "0", "0", "0.5"};
    freeReplyObject(server_fcall(e.rc, RJQ__S_RECLAIM, "um", args, 9));
    ASSERT(error_is(&e, e.q, "a", "lease expired"));
    ASSERT(error_is(&e, e.q, "t", "timed out after 1000 ms"));
    ASSERT(error_is(&e, e.q, "af", "dependency um:a ended dead"));
    ASSERT_STREQ("ready", get_info(e.base, e.q, "ar").state);
    ASSERT(error_is(&e, e.q, "tf", "dependency um:t ended dead"));
    const char *orph[] = {"t:{um}:job:", "t:{um}:wake", "cx.", "100", "1000", "99999999999999"};
    freeReplyObject(server_fcall(e.rc, RJQ__S_ORPHANS, "um", orph, 6));
    ASSERT(error_is(&e, e.q, "o", "worker lost"));
    ASSERT(error_is(&e, e.q, "of", "dependency um:o ended dead"));
    ASSERT_STREQ("ready", get_info(e.base, e.q, "or").state);
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{um}:waiting"));
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{um}:dependents t:{um}:depsfin"));
    env_stop(&e);
}

/* ---- a dependent of another queue: the client's steps (deps_watch on
 * the dependency's queue, deps_release on the dependent's, deps_done on
 * the dependency's), their cost pinned and their type checks. */

/* (other_queue_release_costs_a_fixed_number_of_commands: deps_release of
 * one release that makes its job ready: 23 commands before
 * "deps_release checks 3 TYPEs fewer a call", 20 after it, 16 since a call
 * of completions checks no key of a burial, 14 with deps15's release of a
 * job whose last dependency completed (its list kept as enqueued: no HSET
 * deps; its priority from the list: no HMGET options); deps_done of one job) */
#define OTHER_QUEUE_RELEASE_COMMANDS 14
/* (3 before dl39; then the HLEN after the entry's HDEL and the pin's HDEL:
 * the dependents hash goes with its last entry, lib.lua DEPS.forget) */
#define OTHER_QUEUE_DONE_COMMANDS 5

/* deps_done as the client calls it: job id of q, whose dependents entry
 * `entry` was released. */
static redisReply *done_fcall(redisContext *rc, const char *q, const char *id, const char *entry) {
    const char *args[] = {id, entry};
    return server_fcall_reply(rc, RJQ__S_DEPS_DONE, q, args, 2);
}

/* deps_watch as the client calls it: dependent did of queue dq registered
 * with job id of q. */
static redisReply *watch_fcall(redisContext *rc, const char *q, const char *id, const char *dq,
                               const char *did) {
    const char *args[] = {id, dq, did};
    return server_fcall_reply(rc, RJQ__S_DEPS_WATCH, q, args, 3);
}

/* A dependent of another queue, step by step as its client carries it:
 * the completion of its dependency replies its entry (code 3), one
 * deps_release call makes it ready with a fixed number of commands, one
 * deps_done call drops the entry and the sweep's index with a fixed number;
 * each sent again changes nothing (released once, not twice). */
TEST(other_queue_release_costs_a_fixed_number_of_commands_and_counts_once) {
    test_env e;
    env_start(&e, "oa");
    rjq_queue *q2 = other_waits_on_active_a(&e, "ob", "b", RJQ_AFTER_FAIL);
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{oa}:dependents a")); /* (deps_watch went) */
    const char *one[] = {"a"};
    redisReply *r = complete_fcall(e.rc, "oa", one, 1);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    ASSERT_EQ(3, r->element[0]->integer); /* the entry left to the client */
    ASSERT_STREQ("ob b", r->element[2]->str);
    freeReplyObject(r);
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{oa}:depsfin")); /* for the sweep meanwhile */
    long long before = server_commands_run(e.rc);
    r = release_fcall(e.rc, "ob", "b", "oa", "a", "completed");
    long long release = server_commands_run(e.rc) - before - 1; /* (the FCALL) */
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    ASSERT_EQ(2, r->element[0]->integer); /* released */
    freeReplyObject(r);
    before = server_commands_run(e.rc);
    r = done_fcall(e.rc, "oa", "a", "ob b");
    long long done = server_commands_run(e.rc) - before - 1;
    ASSERT(r->type == REDIS_REPLY_INTEGER && r->integer == 1);
    freeReplyObject(r);
    printf("commands: deps_release of one dependent %lld, deps_done of one job %lld\n", release, done);
    ASSERT_EQ(OTHER_QUEUE_RELEASE_COMMANDS, release);
    ASSERT_EQ(OTHER_QUEUE_DONE_COMMANDS, done);
    ASSERT_STREQ("ready", get_info(e.base, q2, "b").state);
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{ob}:ready"));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{oa}:dependents a"));
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{oa}:depsfin"));
    /* both sent again (replies lost): nothing released twice */
    r = release_fcall(e.rc, "ob", "b", "oa", "a", "completed");
    ASSERT_EQ(0, r->element[0]->integer);
    freeReplyObject(r);
    r = done_fcall(e.rc, "oa", "a", "ob b");
    ASSERT(r->type == REDIS_REPLY_INTEGER && r->integer == 0);
    freeReplyObject(r);
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{ob}:ready"));
    ASSERT_STREQ("ready", get_info(e.base, q2, "b").state);
    env_stop(&e);
}

/* (other_queue_registration_writes_no_watchers_mark: deps_watch of one
 * dependent of another queue with an unfinished job, 5 commands before
 * depoq (HMGET state, HMGET dependents, HMGET watchers, HSET dependents,
 * HSET watchers with its pin), 3 since: the entry alone tells the
 * finishing scripts) */
#define OTHER_QUEUE_REGISTRATION_COMMANDS 3

/* deps_watch of a dependent of another queue with an unfinished job
 * writes its dependents entry and nothing among the job's watchers, with
 * a fixed number of commands; sent again (reply lost), the same entry. */
TEST(other_queue_registration_writes_no_watchers_mark) {
    test_env e;
    env_start(&e, "ow2");
    plant_active(e.rc, "ow2", "a");
    long long before = server_commands_run(e.rc);
    redisReply *r = watch_fcall(e.rc, "ow2", "a", "ox2", "b");
    long long n = server_commands_run(e.rc) - before - 1; /* (the FCALL) */
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    ASSERT_STREQ("waiting", r->element[0]->str);
    freeReplyObject(r);
    printf("commands: deps_watch of one dependent of another queue %lld\n", n);
    ASSERT_EQ(OTHER_QUEUE_REGISTRATION_COMMANDS, n);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{ow2}:watchers"));
    r = watch_fcall(e.rc, "ow2", "a", "ox2", "b");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    freeReplyObject(r);
    r = server_cmd(e.rc, "HGET t:{ow2}:dependents a");
    ASSERT(r->type == REDIS_REPLY_STRING);
    ASSERT_STREQ("ox2 b", r->str);
    freeReplyObject(r);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{ow2}:watchers"));
    env_stop(&e);
}

/* The sweep index (depsfin) holds the newest completions first (minus
 * the time as the score, a call's ids sent in descending order: each
 * insert into the small listpack index stops at its head,
 * bench/README.md, depoq); the readers page it by rank, so the sweep
 * still finds and releases every job whose finisher died before telling
 * its dependents, once each. */
TEST(depsfin_indexes_the_newest_completions_first_and_the_sweep_still_releases_them) {
    test_env e;
    env_start(&e, "dx");
    rjq_queue *q2 = open_queue(&e, "dx2");
    const char *ids[] = {"a1", "a2", "a3"}, *deps[] = {"b1", "b2", "b3"};
    for (int i = 0; i < 3; i++) {
        plant_active(e.rc, "dx", ids[i]);
        rjq_dep on = {"dx", ids[i]};
        ASSERT_OK(enqueue_after(&e, q2, deps[i], &on, 1, RJQ_AFTER_RUN).status);
    }
    freeReplyObject(complete_fcall(e.rc, "dx", ids, 1)); /* (a1; the client's releases never sent) */
    freeReplyObject(complete_fcall(e.rc, "dx", ids + 1, 2)); /* (a2 and a3 in one call, later) */
    /* minus the time: the later call's score is the lower (or the same
     * within one millisecond); one member a call, its ids sorted and
     * joined by spaces (lib.lua DEPSFIN_MEMBER): one id in depsfin,
     * several in depsfinc */
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{dx}:depsfin"));
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{dx}:depsfinc"));
    const char *members[] = {"a1", "a2 a3"}, *keys[] = {"depsfin", "depsfinc"};
    double sc[2];
    for (int i = 0; i < 2; i++) {
        redisReply *r = server_cmd(e.rc, "ZSCORE t:{dx}:%s %s", keys[i], members[i]);
        ASSERT(r->type == REDIS_REPLY_STRING && r->str[0] == '-');
        sc[i] = strtod(r->str, NULL);
        freeReplyObject(r);
    }
    ASSERT(sc[0] < -1e12 && sc[1] <= sc[0]);
    for (int i = 0; i < 3; i++) ASSERT_STREQ("waiting", get_info(e.base, q2, deps[i]).state);
    rjq_worker *w = sweeping_worker(e.q);
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{dx}:dependents t:{dx}:depsfin t:{dx}:depsfinc") == 0,
             10000);
    for (int i = 0; i < 3; i++) ASSERT_STREQ("ready", get_info(e.base, q2, deps[i]).state);
    ASSERT_EQ(3, server_int(e.rc, "LLEN t:{dx2}:ready")); /* released once each */
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* Jobs a1..a3 of queue q planted active, b1..b3 of queue q2 (opened:
 * returned) each waiting for its a (policy run), and a1..a3 completed in
 * one call whose client dies before telling the dependents (its releases
 * never sent): depsfinc holds the call's one member "a1 a2 a3", depsfin
 * (which older versions' sweeps read) nothing. */
static rjq_queue *three_completed_untold(test_env *e, const char *q, const char *q2name) {
    rjq_queue *q2 = open_queue(e, q2name);
    const char *ids[] = {"a3", "a1", "a2"}, *deps[] = {"b3", "b1", "b2"};
    for (int i = 0; i < 3; i++) {
        plant_active(e->rc, q, ids[i]);
        rjq_dep on = {q, ids[i]};
        ASSERT_OK(enqueue_after(e, q2, deps[i], &on, 1, RJQ_AFTER_RUN).status);
    }
    freeReplyObject(complete_fcall(e->rc, q, ids, 3));
    ASSERT_EQ(0, server_int(e->rc, "EXISTS t:{%s}:depsfin", q));
    ASSERT_EQ(1, server_int(e->rc, "ZCARD t:{%s}:depsfinc", q));
    ASSERT_EQ(0, server_int(e->rc, "ZRANK t:{%s}:depsfinc %s", q, "a1 a2 a3"));
    return q2;
}

/* The sweep reads a completion call's one depsfinc member as its ids: a
 * client killed between the completion of several jobs in one call and
 * their releases leaves every dependent waiting, and the sweep releases
 * each once, then the member goes. */
TEST(sweep_releases_every_job_of_a_completion_call_indexed_as_one_member_once) {
    test_env e;
    env_start(&e, "dm");
    rjq_queue *q2 = three_completed_untold(&e, "dm", "dm2");
    const char *deps[] = {"b1", "b2", "b3"};
    for (int i = 0; i < 3; i++) ASSERT_STREQ("waiting", get_info(e.base, q2, deps[i]).state);
    rjq_worker *w = sweeping_worker(e.q);
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{dm}:dependents t:{dm}:depsfin t:{dm}:depsfinc") == 0,
             10000);
    for (int i = 0; i < 3; i++) ASSERT_STREQ("ready", get_info(e.base, q2, deps[i]).state);
    ASSERT_EQ(3, server_int(e.rc, "LLEN t:{dm2}:ready")); /* released once each */
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* deps_done of part of a call's jobs (the release of one went through,
 * the others' failed): their entries go, the call's member stays, so the
 * sweep still finds the rest and releases them (and not the done one's
 * again); the member goes once none of its ids has an entry. A deps_done
 * of exactly the call's ids removes its member at once. */
TEST(deps_done_of_part_of_a_completion_call_keeps_its_member_for_the_rest) {
    test_env e;
    env_start(&e, "dp");
    rjq_queue *q2 = three_completed_untold(&e, "dp", "dp2");
    /* a1's dependent released by hand, as its client would, then deps_done of a1 only */
    freeReplyObject(release_fcall(e.rc, "dp2", "b1", "dp", "a1", "completed"));
    freeReplyObject(done_fcall(e.rc, "dp", "a1", "dp2 b1"));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{dp}:dependents a1"));
    ASSERT_EQ(3, server_int(e.rc, "HLEN t:{dp}:dependents")); /* a2, a3, the pin */
    ASSERT_EQ(0, server_int(e.rc, "ZRANK t:{dp}:depsfinc %s", "a1 a2 a3")); /* kept for a2, a3 */
    ASSERT_STREQ("ready", get_info(e.base, q2, "b1").state);
    ASSERT_STREQ("waiting", get_info(e.base, q2, "b2").state);
    rjq_worker *w = sweeping_worker(e.q);
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{dp}:dependents t:{dp}:depsfin t:{dp}:depsfinc") == 0,
             10000);
    ASSERT_STREQ("ready", get_info(e.base, q2, "b2").state);
    ASSERT_STREQ("ready", get_info(e.base, q2, "b3").state);
    ASSERT_EQ(3, server_int(e.rc, "LLEN t:{dp2}:ready")); /* b1 not released again */
    worker_stop_wait(e.base, w);
    /* a call's deps_done with all of its ids (in any order): its member goes */
    const char *ids[] = {"c2", "c1"};
    for (int i = 0; i < 2; i++) {
        plant_active(e.rc, "dp", ids[i]);
        freeReplyObject(server_cmd(e.rc, "HSET t:{dp}:dependents %s x", ids[i]));
    }
    freeReplyObject(complete_fcall(e.rc, "dp", ids, 2));
    ASSERT_EQ(0, server_int(e.rc, "ZRANK t:{dp}:depsfinc %s", "c1 c2"));
    const char *args[] = {"c2", "x", "c1", "x"};
    freeReplyObject(server_fcall_reply(e.rc, RJQ__S_DEPS_DONE, "dp", args, 4));
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{dp}:dependents t:{dp}:depsfin t:{dp}:depsfinc"));
    env_stop(&e);
}

/* Members written by older versions (one id each, a call's jobs each
 * their own) are still read by the sweep, and removed by deps_done. */
TEST(sweep_still_releases_old_one_id_depsfin_members) {
    test_env e;
    env_start(&e, "do");
    rjq_queue *q2 = three_completed_untold(&e, "do", "do2");
    /* the index as an older version wrote it */
    freeReplyObject(server_cmd(e.rc, "DEL t:{do}:depsfinc"));
    freeReplyObject(server_cmd(e.rc, "ZADD t:{do}:depsfin -3 a3 -2 a2 -1 a1"));
    rjq_worker *w = sweeping_worker(e.q);
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{do}:dependents t:{do}:depsfin") == 0, 10000);
    const char *deps[] = {"b1", "b2", "b3"};
    for (int i = 0; i < 3; i++) ASSERT_STREQ("ready", get_info(e.base, q2, deps[i]).state);
    ASSERT_EQ(3, server_int(e.rc, "LLEN t:{do2}:ready")); /* released once each */
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* The sweep of every version before depfin2 (deps_due.lua at integ
 * 26e05ae), its lines that read the index: depsfin's members each taken
 * as one id, and those without a dependents entry dropped. KEYS:
 * dependents, depsfin. Returns how many members it dropped. */
static const char OLD_SWEEP_LUA[] =
    "local ids = redis.call('ZRANGE', KEYS[2], 0, 99)\n"
    "local stale = {}\n"
    "if #ids > 0 then\n"
    "  local lists = redis.call('HMGET', KEYS[1], unpack(ids))\n"
    "  for i, id in ipairs(ids) do if not lists[i] then stale[#stale + 1] = id end end\n"
    "  if #stale > 0 then redis.call('ZREM', KEYS[2], unpack(stale)) end\n"
    "end\n"
    "return #stale\n";

static long long old_sweep(redisContext *rc, const char *q) {
    return server_int(rc, "EVAL %s 2 t:{%s}:dependents t:{%s}:depsfin", OLD_SWEEP_LUA, q, q);
}

/* Mixed versions: a completion call's member of several ids goes where
 * an older client's sweep never reads (depsfinc), so that sweep, which
 * would drop such a member from depsfin (no dependents entry is named
 * "a1 a2 a3") and strand its dependents, drops nothing; a new client's
 * sweep then releases every dependent once. */
TEST(older_sweep_never_sees_a_completion_calls_member_of_several_ids) {
    test_env e;
    env_start(&e, "dv");
    rjq_queue *q2 = three_completed_untold(&e, "dv", "dv2");
    /* the hazard this guards: that member in depsfin, the old sweep drops it */
    freeReplyObject(server_cmd(e.rc, "ZADD t:{dv}:scratch -1 %s", "a1 a2 a3"));
    ASSERT_EQ(1, server_int(e.rc, "EVAL %s 2 t:{dv}:dependents t:{dv}:scratch", OLD_SWEEP_LUA));
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{dv}:scratch"));
    /* as written: the old sweep reads nothing, drops nothing */
    ASSERT_EQ(0, old_sweep(e.rc, "dv"));
    ASSERT_EQ(0, server_int(e.rc, "ZRANK t:{dv}:depsfinc %s", "a1 a2 a3"));
    ASSERT_EQ(4, server_int(e.rc, "HLEN t:{dv}:dependents")); /* a1-a3, the pin */
    /* one job more, completed alone: one id, in depsfin, which the old
     * sweep reads as before (its entry there: kept) */
    plant_active(e.rc, "dv", "a4");
    rjq_dep on = {"dv", "a4"};
    ASSERT_OK(enqueue_after(&e, q2, "b4", &on, 1, RJQ_AFTER_RUN).status);
    const char *a4[] = {"a4"};
    freeReplyObject(complete_fcall(e.rc, "dv", a4, 1));
    ASSERT_EQ(0, server_int(e.rc, "ZRANK t:{dv}:depsfin a4"));
    ASSERT_EQ(0, old_sweep(e.rc, "dv"));
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{dv}:depsfin"));
    /* the new sweep: depsfin's page, then depsfinc's (its cursor from 10^15) */
    rjq_worker *w = sweeping_worker(e.q);
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{dv}:dependents t:{dv}:depsfin t:{dv}:depsfinc") == 0,
             10000);
    const char *deps[] = {"b1", "b2", "b3", "b4"};
    for (int i = 0; i < 4; i++) ASSERT_STREQ("ready", get_info(e.base, q2, deps[i]).state);
    ASSERT_EQ(4, server_int(e.rc, "LLEN t:{dv2}:ready")); /* released once each */
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* The sweep's cursor (deps_due.lua 'scan'): pages of 100 of depsfin by
 * rank, then depsfinc from 10^15 on, then '0'. Jobs planted with a
 * dependents entry and no record: each answered as 'missing'. */
TEST(sweep_pages_depsfin_then_depsfinc_by_its_cursor) {
    test_env e;
    env_start(&e, "dg");
    for (int i = 0; i < 100; i++) {
        freeReplyObject(server_cmd(e.rc, "ZADD t:{dg}:depsfin -1 j%03d", i));
        freeReplyObject(server_cmd(e.rc, "HSET t:{dg}:dependents j%03d %s", i, "dg2 x"));
    }
    freeReplyObject(server_cmd(e.rc, "ZADD t:{dg}:depsfinc -1 %s", "m1 m2"));
    freeReplyObject(server_cmd(e.rc, "HSET t:{dg}:dependents m1 %s m2 %s", "dg2 y", "dg2 z"));
    const char *want[] = {"100", "1000000000000000", "0"};
    const size_t rows[] = {100, 0, 2};
    const char *cursor = "0";
    redisReply *r[3];
    for (int p = 0; p < 3; p++) {
        const char *args[] = {"scan", cursor};
        r[p] = server_fcall_reply(e.rc, RJQ__S_DEPS_DUE, "dg", args, 2);
        ASSERT(r[p]->type == REDIS_REPLY_ARRAY && r[p]->elements >= 1);
        ASSERT_STREQ(want[p], r[p]->element[0]->str);
        ASSERT_EQ((long long)rows[p], (long long)(r[p]->elements - 1) / 3);
        cursor = r[p]->element[0]->str;
    }
    ASSERT_STREQ("m1", r[2]->element[1]->str);
    ASSERT_STREQ("missing", r[2]->element[2]->str);
    ASSERT_STREQ("m2", r[2]->element[4]->str);
    for (int p = 0; p < 3; p++) freeReplyObject(r[p]);
    /* depsfinc alone: the first page goes to it at once */
    freeReplyObject(server_cmd(e.rc, "DEL t:{dg}:depsfin"));
    const char *first[] = {"scan", "0"};
    redisReply *a = server_fcall_reply(e.rc, RJQ__S_DEPS_DUE, "dg", first, 2);
    ASSERT(a->type == REDIS_REPLY_ARRAY && a->elements == 1);
    ASSERT_STREQ("1000000000000000", a->element[0]->str);
    freeReplyObject(a);
    env_stop(&e);
}

/* Every completion call, whatever its number of jobs with dependents of
 * other queues, writes no member of several ids in depsfin (the key older
 * sweeps read): a call of one such job writes its id there, a call of
 * several one member in depsfinc; the sweep then releases every
 * dependent once and empties both. */
TEST(completion_calls_write_no_member_of_several_ids_in_depsfin) {
    test_env e;
    env_start(&e, "dw");
    rjq_queue *q2 = open_queue(&e, "dw2");
    const char *ids[] = {"k1", "k2", "k3", "k4", "k5"};
    for (int i = 0; i < 5; i++) {
        plant_active(e.rc, "dw", ids[i]);
        char dep[8];
        snprintf(dep, sizeof dep, "d%d", i + 1);
        rjq_dep on = {"dw", ids[i]};
        ASSERT_OK(enqueue_after(&e, q2, dep, &on, 1, RJQ_AFTER_RUN).status);
    }
    freeReplyObject(complete_fcall(e.rc, "dw", ids, 1));     /* k1 alone */
    freeReplyObject(complete_fcall(e.rc, "dw", ids + 1, 4)); /* k2..k5 in one call */
    redisReply *r = server_cmd(e.rc, "ZRANGE t:{dw}:depsfin 0 -1");
    ASSERT(r->type == REDIS_REPLY_ARRAY);
    ASSERT_EQ(1, (long long)r->elements);
    for (size_t i = 0; i < r->elements; i++) ASSERT(strchr(r->element[i]->str, ' ') == NULL);
    freeReplyObject(r);
    ASSERT_EQ(0, server_int(e.rc, "ZRANK t:{dw}:depsfin k1"));
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{dw}:depsfinc"));
    ASSERT_EQ(0, server_int(e.rc, "ZRANK t:{dw}:depsfinc %s", "k2 k3 k4 k5"));
    ASSERT_EQ(0, old_sweep(e.rc, "dw"));
    /* the sweep (the calls' client never told the dependents) releases all five */
    rjq_worker *w = sweeping_worker(e.q);
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{dw}:dependents t:{dw}:depsfin t:{dw}:depsfinc") == 0,
             10000);
    ASSERT_EQ(5, server_int(e.rc, "LLEN t:{dw2}:ready"));
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* The keys deps_release and deps_watch no longer check with TYPE (read
 * before their first write): a wrongly typed one is refused with the
 * error naming it, nothing written. */
TEST(other_queue_steps_refuse_a_wrongly_typed_column_naming_it_with_nothing_written) {
    test_env e;
    env_start(&e, "ow");
    enqueue_x_ok(e.base, e.q, "a", 3600000, 0);
    enqueue_x_ok(e.base, e.q, "a2", 3600000, 0);
    enqueue_x_ok(e.base, e.q, "a3", 3600000, 0);
    rjq_dep two[2] = {{"ow", "a"}, {"ow", "a2"}};
    ASSERT_OK(enqueue_after(&e, e.q, "b", two, 2, RJQ_AFTER_RUN).status);
    freeReplyObject(server_cmd(e.rc, "RENAME t:{ow}:deps t:{ow}:deps.saved"));
    freeReplyObject(server_cmd(e.rc, "SET t:{ow}:deps x"));
    redisReply *r = release_fcall(e.rc, "ow", "b", "ow", "a", "completed");
    ASSERT(r->type == REDIS_REPLY_ERROR);
    ASSERT(strstr(r->str, "t:{ow}:deps holds a string, rjq expects a hash") != NULL);
    freeReplyObject(r);
    freeReplyObject(server_cmd(e.rc, "RENAME t:{ow}:deps.saved t:{ow}:deps"));
    ASSERT(deps_line(e.rc, "ow", "b", "\nw ow a")); /* nothing counted */
    ASSERT_STREQ("waiting", get_info(e.base, e.q, "b").state);
    /* a release that can bury (an outcome other than 'completed') checks
     * the keys of a burial first; one of completions does not use them */
    freeReplyObject(server_cmd(e.rc, "SET t:{ow}:dead x"));
    r = release_fcall(e.rc, "ow", "b", "ow", "a", "dead");
    ASSERT(r->type == REDIS_REPLY_ERROR);
    ASSERT(strstr(r->str, "t:{ow}:dead holds a string, rjq expects a zset") != NULL);
    freeReplyObject(r);
    ASSERT(deps_line(e.rc, "ow", "b", "\nw ow a")); /* nothing counted */
    r = release_fcall(e.rc, "ow", "b", "ow", "a", "completed");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    ASSERT_EQ(1, r->element[0]->integer); /* counted, a2 pending */
    freeReplyObject(r);
    /* deps_watch: a wrongly typed dependents column */
    freeReplyObject(server_cmd(e.rc, "SET t:{ow}:dependents x"));
    r = watch_fcall(e.rc, "ow", "a3", "ox", "c");
    ASSERT(r->type == REDIS_REPLY_ERROR);
    ASSERT(strstr(r->str, "t:{ow}:dependents holds a string, rjq expects a hash") != NULL);
    freeReplyObject(r);
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{ow}:watchers a3")); /* no mark written */
    env_stop(&e);
}

/* ---- retention past the dead and cancelled caps (rjq.h "Dependencies"):
 * a finished dependency's record stays until its dependents are released.
 * The finisher's client dies between the finishing script and the
 * release (the script as it ran on the server, its reply told to no
 * client); the next finish trims past the cap before the sweep released
 * the dependent: the trim keeps the dependency's record, so the sweep's
 * release reads how it ended (before: its record was gone, the dependent
 * buried as after a "missing" dependency). Once released, a later trim
 * takes it. */

/* fail.lua as the client calls it, job id of q planted by plant_active
 * failed for good, with dead cap `cap`. Its reply's code. */
static long long fail_capped(redisContext *rc, const char *q, const char *id, const char *cap) {
    char prefix[48], wake[48];
    snprintf(prefix, sizeof prefix, "t:{%s}:job:", q);
    snprintf(wake, sizeof wake, "t:{%s}:wake", q);
    const char *args[] = {prefix, wake, id, "tok", "boom", "1", "-1", "0", cap};
    redisReply *r = server_fcall(rc, RJQ__S_FAIL, q, args, 9);
    ASSERT(r->type == REDIS_REPLY_INTEGER || (r->type == REDIS_REPLY_ARRAY && r->elements > 0));
    long long code = r->type == REDIS_REPLY_ARRAY ? r->element[0]->integer : r->integer;
    freeReplyObject(r);
    return code;
}

/* A release that buries its job (policy 'fail') past the dead cap trims
 * the oldest dead through forget_jobs, which reads the options column:
 * deps_release checks that column's type with the burial's keys, before
 * its first write (before: the burial was written, then the trim's read
 * failed, the call refused halfway: the job dead, its list and counters
 * not). */
TEST(release_burying_past_the_dead_cap_refuses_a_wrongly_typed_options_column_with_nothing_written) {
    test_env e;
    env_start(&e, "ro");
    plant_active(e.rc, "ro", "x");
    ASSERT_EQ(2, fail_capped(e.rc, "ro", "x", "1000")); /* one dead, the oldest */
    /* x's death made older than b's burial below by its score: both can
     * fall in one millisecond, and the trim takes the lesser name of equal
     * scores ("b" before "x") */
    freeReplyObject(server_cmd(e.rc, "ZADD t:{ro}:dead XX 1 x"));
    enqueue_x_ok(e.base, e.q, "a", 3600000, 0);
    rjq_dep on_a = {"ro", "a"};
    ASSERT_OK(enqueue_after(&e, e.q, "b", &on_a, 1, RJQ_AFTER_FAIL).status);
    long long dead = server_int(e.rc, "HGET t:{ro}:stats dead");
    freeReplyObject(server_cmd(e.rc, "RENAME t:{ro}:options t:{ro}:options.saved"));
    freeReplyObject(server_cmd(e.rc, "SET t:{ro}:options x"));
    char prefix[] = "t:{ro}:job:", wake[] = "t:{ro}:wake";
    const char *args[] = {prefix, wake, "1", "b", "ro", "a", "dead"}; /* dead cap 1 */
    redisReply *r = server_fcall_reply(e.rc, RJQ__S_DEPS_RELEASE, "ro", args, 7);
    ASSERT(r->type == REDIS_REPLY_ERROR);
    ASSERT(strstr(r->str, "t:{ro}:options holds a string, rjq expects a hash") != NULL);
    freeReplyObject(r);
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{ro}:dead")); /* nothing written */
    ASSERT_EQ(dead, server_int(e.rc, "HGET t:{ro}:stats dead"));
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{ro}:state x"));
    ASSERT(deps_line(e.rc, "ro", "b", "\nw ro a"));
    freeReplyObject(server_cmd(e.rc, "DEL t:{ro}:options"));
    freeReplyObject(server_cmd(e.rc, "RENAME t:{ro}:options.saved t:{ro}:options"));
    ASSERT_STREQ("waiting", get_info(e.base, e.q, "b").state);
    r = server_fcall_reply(e.rc, RJQ__S_DEPS_RELEASE, "ro", args, 7);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    ASSERT_EQ(3, r->element[0]->integer); /* buried, x trimmed */
    freeReplyObject(r);
    ASSERT_STREQ("dead", get_info(e.base, e.q, "b").state);
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{ro}:state x"));
    env_stop(&e);
}

TEST(dead_dependency_past_the_dead_cap_is_kept_until_its_dependent_is_released) {
    test_env e;
    env_start(&e, "tc");
    rjq_queue *q2 = other_waits_on_active_a(&e, "tc2", "p", RJQ_AFTER_FAIL);
    ASSERT_EQ(5, fail_capped(e.rc, "tc", "a", "1")); /* dead; p left to the (dead) client */
    plant_active(e.rc, "tc", "b");
    ASSERT_EQ(2, fail_capped(e.rc, "tc", "b", "1")); /* past the cap of 1 */
    ASSERT_STREQ("dead", get_info(e.base, e.q, "a").state); /* kept, past the cap */
    ASSERT_EQ(2, server_int(e.rc, "ZCARD t:{tc}:dead"));
    ASSERT_STREQ("waiting", get_info(e.base, q2, "p").state);
    rjq_worker *w = sweeping_worker(e.q);
    WAIT_FOR(e.base, !state_is(&e, q2, "p", "waiting"), 10000);
    ASSERT(error_is(&e, q2, "p", "dependency tc:a ended dead")); /* (not "was removed") */
    WAIT_FOR(e.base, server_int(e.rc, "HEXISTS t:{tc}:dependents a") == 0, 10000);
    worker_stop_wait(e.base, w);
    /* released: the next trim takes it (and b, past the cap) */
    plant_active(e.rc, "tc", "c");
    ASSERT_EQ(2, fail_capped(e.rc, "tc", "c", "1"));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{tc}:state a"));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{tc}:state b"));
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{tc}:dead"));
    ASSERT_EQ(0, server_int(e.rc, "ZRANK t:{tc}:dead c"));
    env_stop(&e);
}

/* The dependency kept past the cap goes at its release (deps_trim.lua,
 * after deps_done, sent by the client whose release it was: here the
 * sweep's, on a queue whose cap is 1): the queue, finishing nothing more,
 * is back at its cap (before: a kept record stayed until the next trim). */
TEST(dead_dependency_kept_past_the_cap_goes_at_its_release_back_to_the_cap) {
    test_env e;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.dead_max = 1;
    env_start_queue(&e, "tg", &qo);
    rjq_queue *q2 = open_queue(&e, "tg2");
    plant_active(e.rc, "tg", "a");
    rjq_dep on_a = {"tg", "a"};
    ASSERT_OK(enqueue_after(&e, q2, "p", &on_a, 1, RJQ_AFTER_FAIL).status);
    ASSERT_EQ(5, fail_capped(e.rc, "tg", "a", "1")); /* dead; p left to the (dead) client */
    plant_active(e.rc, "tg", "b");
    ASSERT_EQ(2, fail_capped(e.rc, "tg", "b", "1")); /* past the cap of 1: a kept */
    ASSERT_EQ(2, server_int(e.rc, "ZCARD t:{tg}:dead"));
    rjq_worker *w = sweeping_worker(e.q);
    WAIT_FOR(e.base, !state_is(&e, q2, "p", "waiting"), 10000);
    ASSERT(error_is(&e, q2, "p", "dependency tg:a ended dead"));
    WAIT_FOR(e.base, server_int(e.rc, "ZCARD t:{tg}:dead") == 1, 10000); /* back at its cap */
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{tg}:state a"));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{tg}:dependents a"));
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{tg}:state b"));
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* cancel.lua as the client calls it, keeping `most` cancelled jobs. Its
 * reply's code. */
static long long cancel_capped(redisContext *rc, const char *q, const char *id, const char *most) {
    char prefix[48];
    snprintf(prefix, sizeof prefix, "t:{%s}:job:", q);
    const char *args[] = {prefix, id, most};
    redisReply *r = server_fcall(rc, RJQ__S_CANCEL, q, args, 3);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements >= 3);
    long long code = r->element[0]->integer;
    freeReplyObject(r);
    return code;
}

TEST(cancelled_dependency_past_the_cancelled_cap_is_kept_until_its_dependent_is_released) {
    test_env e;
    env_start(&e, "tx");
    rjq_queue *q2 = open_queue(&e, "tx2");
    enqueue_x_ok(e.base, e.q, "a", 3600000, 0);
    enqueue_x_ok(e.base, e.q, "b", 3600000, 0);
    rjq_dep on_a = {"tx", "a"};
    ASSERT_OK(enqueue_after(&e, q2, "p", &on_a, 1, RJQ_AFTER_FAIL).status);
    ASSERT_EQ(1, cancel_capped(e.rc, "tx", "a", "1")); /* p left to the (dead) client */
    ASSERT_EQ(1, cancel_capped(e.rc, "tx", "b", "1")); /* past the cap of 1 */
    ASSERT_STREQ("cancelled", get_info(e.base, e.q, "a").state); /* kept, past the cap */
    ASSERT_EQ(2, server_int(e.rc, "ZCARD t:{tx}:cancelled"));
    rjq_worker *w = sweeping_worker(e.q);
    WAIT_FOR(e.base, !state_is(&e, q2, "p", "waiting"), 10000);
    ASSERT(error_is(&e, q2, "p", "dependency tx:a ended cancelled"));
    WAIT_FOR(e.base, server_int(e.rc, "HEXISTS t:{tx}:dependents a") == 0, 10000);
    worker_stop_wait(e.base, w);
    enqueue_x_ok(e.base, e.q, "c", 3600000, 0);
    ASSERT_EQ(1, cancel_capped(e.rc, "tx", "c", "1"));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{tx}:state a"));
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{tx}:cancelled"));
    env_stop(&e);
}

/* The count cap of completed jobs (retention_max) likewise: a completion
 * past the cap keeps the record of a completed dependency whose dependent
 * is not released yet (the age limit: dependency_past_its_retention_is_
 * kept_until_its_dependent_is_released). */
TEST(completed_dependency_past_the_retention_cap_is_kept_until_its_dependent_is_released) {
    test_env e;
    env_start(&e, "tk");
    rjq_queue *q2 = other_waits_on_active_a(&e, "tk2", "p", RJQ_AFTER_FAIL);
    redisReply *r = complete_planted(e.rc, "tk", "a", "-1", "1");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->element[0]->integer == 3); /* p left to the client */
    freeReplyObject(r);
    plant_active(e.rc, "tk", "b");
    freeReplyObject(complete_planted(e.rc, "tk", "b", "-1", "1")); /* past the cap of 1 */
    ASSERT_STREQ("completed", get_info(e.base, e.q, "a").state); /* kept */
    rjq_worker *w = sweeping_worker(e.q);
    WAIT_FOR(e.base, !state_is(&e, q2, "p", "waiting"), 10000);
    ASSERT_STREQ("ready", get_info(e.base, q2, "p").state); /* (policy fail: not "dead") */
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* The dead cap's trim on a queue without dependents (no dependents hash)
 * costs no command more than before it kept jobs with dependents to
 * release: the failure's EXISTS probe (monitor_and_dependents) says the
 * hash is absent, so the trim asks no TYPE of it. */
TEST(failure_past_the_dead_cap_without_dependents_costs_no_command_more) {
    test_env e;
    env_start(&e, "tt");
    plant_active(e.rc, "tt", "j");
    plant_active(e.rc, "tt", "k");
    long long t0 = server_calls(e.rc, "type");
    ASSERT_EQ(2, fail_capped(e.rc, "tt", "j", "1")); /* (the cap not reached) */
    long long types = server_calls(e.rc, "type");
    long long before = server_commands_run(e.rc);
    ASSERT_EQ(2, fail_capped(e.rc, "tt", "k", "1"));
    long long n = server_commands_run(e.rc) - before - 1; /* (the FCALL) */
    printf("commands: failure to dead trimming one record %lld\n", n);
    fflush(stdout);
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{tt}:state j")); /* trimmed */
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{tt}:dead"));
    ASSERT_EQ(types - t0, server_calls(e.rc, "type") - types); /* (its checks' only) */
    ASSERT_EQ(TRIMMING_FAILURE_COMMANDS, n);
    env_stop(&e);
}

/* The lease extension of a worker with no job running, only a claim whose
 * reply is still on the way (extend.lua: ARGV the lease, then '', the
 * claim's token, 0): found under deps-bench's dep mode on a slow server
 * (INFO commandstats: failed FCALLs, rejected HMGETs). Its job list is
 * empty: no HMGET with no field (refused, and with it the whole call: the
 * claim's jobs were not extended, while the worker counted them extended
 * and would start them after their lease). The claim's job is extended. */
TEST(extend_of_a_claim_in_flight_alone_extends_its_jobs_without_an_empty_read) {
    test_env e;
    env_start(&e, "xe");
    plant_spent(e.rc, "xe", "a", "c.1.x", "1");
    freeReplyObject(server_cmd(e.rc, "ZADD t:{xe}:held 0 %s", "c.1.x a"));
    long long rejected = server_info_number(e.rc, "errorstats", "errorstat_ERR:count=");
    const char *args[] = {"30000", "", "c.1.x", "0"};
    redisReply *r = server_fcall(e.rc, RJQ__S_EXTEND, "xe", args, 4);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    ASSERT_EQ(1, r->element[0]->integer); /* the claim has run: its member */
    freeReplyObject(r);
    ASSERT(server_int(e.rc, "ZSCORE t:{xe}:active a") > 1); /* extended */
    const char *none[] = {"30000", "", "c.2.y", "0"}; /* a claim not run yet */
    r = server_fcall(e.rc, RJQ__S_EXTEND, "xe", none, 4);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    ASSERT_EQ(0, r->element[0]->integer);
    freeReplyObject(r);
    ASSERT_EQ(rejected, server_info_number(e.rc, "errorstats", "errorstat_ERR:count="));
    env_stop(&e);
}
