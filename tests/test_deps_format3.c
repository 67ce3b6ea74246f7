/*
 * Queue format 3 (README "Queue format 3", docs/scripts.md): a job of one
 * dependency keeps it in its waiting state ("waiting <attempts> @<times>
 * ^<policy>,<delay>,<priority>,<queue>}<id>", lib.lua DEPS.one) and no
 * list in the deps column; its release on completion writes the list then
 * (so it reads as before once out of waiting), any other way out of
 * waiting writes it with its marks. Format 2 still writes the list at
 * enqueue; going below 3 is refused while a waiting job of the new layout
 * exists; a wrongly typed key refuses the enqueue with nothing written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "rjq_scripts.h"
#include "server.h"
#include "waits.h"

/* Set q's format (rjq_queue_set_format) and wait: the callback's status,
 * n its count (may be NULL). */
static int set_format(struct event_base *base, rjq_queue *q, int format, long long *n) {
    count_wait w = {0};
    ASSERT_OK(rjq_queue_set_format(q, format, on_count, &w));
    WAIT_FOR(base, w.done >= 1, 5000);
    if (n) *n = w.n;
    return w.status;
}

/* env_start on queue name, set to format 3. */
static void start3(test_env *e, const char *name) {
    env_start(e, name);
    long long n = 0;
    ASSERT_OK(set_format(e->base, e->q, 3, &n));
    ASSERT_EQ(1, n);
}

/* Job j of queue q as a claim leaves it: active, attempt 1, token "tok". */
static void plant_active(redisContext *rc, const char *q, const char *j) {
    freeReplyObject(server_cmd(rc, "HSET t:{%s}:payload %s x", q, j));
    freeReplyObject(server_cmd(rc, "HSET t:{%s}:state %s %s", q, j, "active 1 tok @1,2,"));
    freeReplyObject(server_cmd(rc, "ZADD t:{%s}:active 99999999999999 %s", q, j));
}

/* complete.lua as the client calls it: planted active job id of q
 * completed, no offers; its code for the job. */
static long long complete_one(redisContext *rc, const char *q, const char *id) {
    char prefix[48];
    snprintf(prefix, sizeof prefix, "t:{%s}:job:", q);
    const char *args[] = {prefix, "-1", "0", "0", "0", "1 tok", "1", id, "r"};
    redisReply *r = server_fcall(rc, RJQ__S_COMPLETE, q, args, 9);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements >= 1);
    long long code = r->element[0]->integer;
    freeReplyObject(r);
    return code;
}

/* fail.lua as the client calls it: planted active job id of q failed for
 * good (fatal). */
static void fail_one(redisContext *rc, const char *q, const char *id) {
    char prefix[48], wake[48];
    snprintf(prefix, sizeof prefix, "t:{%s}:job:", q);
    snprintf(wake, sizeof wake, "t:{%s}:wake", q);
    const char *args[] = {prefix, wake, id, "tok", "boom", "1", "-1", "0", "1000"};
    freeReplyObject(server_fcall(rc, RJQ__S_FAIL, q, args, 9));
}

static enqueue_wait enqueue_after(test_env *e, const char *id, const rjq_dep *deps, size_t n,
                                  int policy, long long delay, int priority) {
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = id;
    o.after = deps;
    o.n_after = n;
    o.after_policy = policy;
    o.delay_ms = delay;
    o.priority = priority;
    return enqueue_job(e->base, e->q, "p", &o);
}

/* Whether job id of q has its state ending in tail (NULL: a state with no
 * dependency field, " ^" nowhere). */
static int state_ends(redisContext *rc, const char *q, const char *id, const char *tail) {
    redisReply *s = server_cmd(rc, "HGET t:{%s}:state %s", q, id);
    int yes = s->type == REDIS_REPLY_STRING;
    if (yes && tail) {
        size_t n = strlen(tail);
        yes = s->len >= n && strcmp(s->str + s->len - n, tail) == 0;
    } else if (yes) {
        yes = strstr(s->str, " ^") == NULL;
    }
    freeReplyObject(s);
    return yes;
}

/* Job id's deps column value of q equals want (NULL: none). */
static int deps_is(redisContext *rc, const char *q, const char *id, const char *want) {
    redisReply *d = server_cmd(rc, "HGET t:{%s}:deps %s", q, id);
    int yes = want ? d->type == REDIS_REPLY_STRING && strcmp(d->str, want) == 0
                   : d->type == REDIS_REPLY_NIL;
    freeReplyObject(d);
    return yes;
}

static void on_cancelled(rjq_client *c, int status, const char *state, void *data) {
    (void)c;
    (void)state;
    ASSERT_OK(status);
    (*(int *)data)++;
}

/* The format-3 layout and its release on completion, once, with the job's
 * policy, priority and delay: b (fail), c (run, priority 5), d (delay an
 * hour) each after one planted active job; e after two keeps its list.
 * While waiting, no deps entry and the dependency read from the state;
 * released, the list written as format 2 writes it at enqueue (its 'w'
 * line read as completed); a completion sent again releases nothing. */
TEST(format3_one_dependency_job_keeps_it_in_its_state_and_is_released_once_with_its_options) {
    test_env e;
    start3(&e, "f3");
    plant_active(e.rc, "f3", "a");
    plant_active(e.rc, "f3", "k");
    plant_active(e.rc, "f3", "m");
    enqueue_x_ok(e.base, e.q, "x", 3600000, 0);
    rjq_dep on_a = {"f3", "a"}, on_k = {"f3", "k"}, on_m = {"f3", "m"};
    rjq_dep on_mx[2] = {{"f3", "m"}, {"f3", "x"}};
    ASSERT_OK(enqueue_after(&e, "b", &on_a, 1, RJQ_AFTER_FAIL, 0, 0).status);
    ASSERT_OK(enqueue_after(&e, "c", &on_k, 1, RJQ_AFTER_RUN, 0, 5).status);
    ASSERT_OK(enqueue_after(&e, "d", &on_m, 1, RJQ_AFTER_IGNORE, 3600000, 0).status);
    ASSERT_OK(enqueue_after(&e, "e", on_mx, 2, RJQ_AFTER_FAIL, 0, 0).status);
    ASSERT_EQ(4, server_int(e.rc, "ZCARD t:{f3}:waiting"));
    ASSERT(state_ends(e.rc, "f3", "b", " ^fail,0,0,f3}a"));
    ASSERT(state_ends(e.rc, "f3", "c", " ^run,0,5,f3}k"));
    ASSERT(state_ends(e.rc, "f3", "d", " ^ignore,3600000,0,f3}m"));
    ASSERT(state_ends(e.rc, "f3", "e", NULL));
    ASSERT_EQ(1, server_int(e.rc, "HLEN t:{f3}:deps")); /* e's alone */
    ASSERT(deps_is(e.rc, "f3", "e", "fail 0 0\nw f3 m\nw f3 x"));
    ASSERT_STREQ("waiting", get_info(e.base, e.q, "b").state); /* (rjq job) */
    deps_lines rd = dependencies_of(e.base, e.q, "c");
    ASSERT_OK(rd.status);
    ASSERT_EQ(1, (long)rd.n);
    ASSERT_STREQ("f3:k active pending", rd.line[0]);
    ASSERT_EQ(1, complete_one(e.rc, "f3", "a"));
    ASSERT_EQ(1, complete_one(e.rc, "f3", "k"));
    ASSERT_EQ(1, complete_one(e.rc, "f3", "m"));
    ASSERT_STREQ("ready", get_info(e.base, e.q, "b").state);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "c").state);
    ASSERT_STREQ("delayed", get_info(e.base, e.q, "d").state);
    ASSERT_STREQ("waiting", get_info(e.base, e.q, "e").state);
    ASSERT(state_ends(e.rc, "f3", "b", NULL));
    ASSERT(state_ends(e.rc, "f3", "d", NULL));
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{f3}:ready"));   /* b */
    ASSERT_EQ(0, server_int(e.rc, "LPOS t:{f3}:ready b"));
    ASSERT_EQ(0, server_int(e.rc, "ZRANK t:{f3}:prio c")); /* by its priority */
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{f3}:prio"));
    ASSERT_EQ(2, server_int(e.rc, "ZCARD t:{f3}:delayed")); /* x and d */
    ASSERT(server_int(e.rc, "ZSCORE t:{f3}:delayed d") > 0);
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{f3}:waiting")); /* e */
    ASSERT(deps_is(e.rc, "f3", "b", "fail 0 0\nw f3 a"));
    ASSERT(deps_is(e.rc, "f3", "c", "run 0 5\nw f3 k"));
    ASSERT(deps_is(e.rc, "f3", "d", "ignore 3600000 0\nw f3 m"));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{f3}:dependents a"));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{f3}:dependents k"));
    rd = dependencies_of(e.base, e.q, "b");
    ASSERT_OK(rd.status);
    ASSERT_EQ(1, (long)rd.n);
    ASSERT_STREQ("f3:a completed completed", rd.line[0]);
    /* sent again: released once */
    plant_active(e.rc, "f3", "a");
    ASSERT_EQ(1, complete_one(e.rc, "f3", "a"));
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{f3}:ready"));
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{f3}:prio"));
    env_stop(&e);
}

/* The other ways out of waiting write the list with its marks: a dead
 * dependency buries a job of policy fail (held, its error naming it), runs
 * one of policy run (marked 'd'); a cancelled waiting job's list is held
 * (its line read as pending); the resume sweep reads the pending
 * dependency from the state; replaying the dead dependency re-blocks
 * nothing released. */
TEST(format3_policies_cancel_resume_and_replay_read_the_dependency_from_the_state) {
    test_env e;
    start3(&e, "g3");
    plant_active(e.rc, "g3", "a");
    enqueue_x_ok(e.base, e.q, "x", 3600000, 0);
    rjq_dep on_a = {"g3", "a"}, on_x = {"g3", "x"};
    ASSERT_OK(enqueue_after(&e, "f", &on_a, 1, RJQ_AFTER_FAIL, 0, 0).status);
    ASSERT_OK(enqueue_after(&e, "r", &on_a, 1, RJQ_AFTER_RUN, 0, 0).status);
    ASSERT_OK(enqueue_after(&e, "w", &on_x, 1, RJQ_AFTER_FAIL, 0, 0).status);
    ASSERT_OK(enqueue_after(&e, "y", &on_x, 1, RJQ_AFTER_FAIL, 0, 0).status);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{g3}:deps"));
    fail_one(e.rc, "g3", "a");
    ASSERT_STREQ("dead", get_info(e.base, e.q, "f").state);
    ASSERT_STREQ("dependency g3:a ended dead", get_info(e.base, e.q, "f").error);
    ASSERT(deps_is(e.rc, "g3", "f", "fail 0 0 h\nd g3 a"));
    ASSERT_STREQ("ready", get_info(e.base, e.q, "r").state);
    ASSERT(deps_is(e.rc, "g3", "r", "run 0 0\nd g3 a"));
    deps_lines rd = dependencies_of(e.base, e.q, "r");
    ASSERT_EQ(1, (long)rd.n);
    ASSERT_STREQ("g3:a dead dead", rd.line[0]);
    /* cancel of a waiting job of the layout */
    int done = 0;
    ASSERT_OK(rjq_queue_cancel(e.q, "w", on_cancelled, &done));
    WAIT_FOR(e.base, done == 1, 5000);
    ASSERT_STREQ("cancelled", get_info(e.base, e.q, "w").state);
    ASSERT(deps_is(e.rc, "g3", "w", "fail 0 0 h\nw g3 x"));
    rd = dependencies_of(e.base, e.q, "w");
    ASSERT_EQ(1, (long)rd.n);
    ASSERT_STREQ("g3:x delayed pending", rd.line[0]);
    /* the resume sweep: y's registration a minute old */
    freeReplyObject(server_cmd(e.rc, "ZADD t:{g3}:waiting 1 y"));
    const char *page[] = {"10"};
    redisReply *r = server_fcall(e.rc, RJQ__S_DEPS_RESUME, "g3", page, 1);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    ASSERT_STREQ("y", r->element[0]->str);
    ASSERT_STREQ("g3 x", r->element[1]->str);
    freeReplyObject(r);
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{g3}:waiting")); /* still waiting */
    ASSERT(state_ends(e.rc, "g3", "y", " ^fail,0,0,g3}x"));
    /* replaying a: f stays dead, r stays ready (once in ready) */
    count_wait p = {0};
    ASSERT_OK(rjq_queue_replay(e.q, "a", 1, on_count, &p));
    WAIT_FOR(e.base, p.done >= 1, 5000);
    ASSERT_EQ(1, p.n);
    ASSERT_STREQ("dead", get_info(e.base, e.q, "f").state);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "r").state);
    ASSERT_EQ(0, server_int(e.rc, "LPOS t:{g3}:ready r"));
    ASSERT(deps_is(e.rc, "g3", "r", "run 0 0\nd g3 a"));
    env_stop(&e);
}

/* A queue at format 2 still writes the list at enqueue (older clients'
 * scripts read it), and its state has no dependency field. */
TEST(format2_queue_still_writes_the_deps_list_of_a_one_dependency_job) {
    test_env e;
    env_start(&e, "h2");
    ASSERT_OK(set_format(e.base, e.q, 2, NULL));
    plant_active(e.rc, "h2", "a");
    rjq_dep on_a = {"h2", "a"};
    ASSERT_OK(enqueue_after(&e, "b", &on_a, 1, RJQ_AFTER_FAIL, 0, 0).status);
    ASSERT(state_ends(e.rc, "h2", "b", NULL));
    ASSERT(deps_is(e.rc, "h2", "b", "fail 0 0\nw h2 a"));
    ASSERT_EQ(1, complete_one(e.rc, "h2", "a"));
    ASSERT_STREQ("ready", get_info(e.base, e.q, "b").state);
    env_stop(&e);
}

/* Going below 3 is refused (RJQ_ESTATE, the format left 3) while a
 * waiting job of format 3's layout exists; once it was released, to 2 and
 * to 1 are taken; 3 again from 1. A job of several dependencies (its list
 * in the column) does not hold the format. */
TEST(format3_rollback_is_refused_while_a_waiting_job_of_its_layout_exists) {
    test_env e;
    start3(&e, "r3");
    plant_active(e.rc, "r3", "a");
    plant_active(e.rc, "r3", "k");
    rjq_dep on_a = {"r3", "a"}, on_ak[2] = {{"r3", "a"}, {"r3", "k"}};
    ASSERT_OK(enqueue_after(&e, "b", &on_a, 1, RJQ_AFTER_FAIL, 0, 0).status);
    ASSERT_OK(enqueue_after(&e, "c", on_ak, 2, RJQ_AFTER_FAIL, 0, 0).status);
    ASSERT_EQ(RJQ_ESTATE, set_format(e.base, e.q, 2, NULL));
    ASSERT_EQ(RJQ_ESTATE, set_format(e.base, e.q, 1, NULL));
    redisReply *f = server_cmd(e.rc, "HGET t:{r3}:meta format");
    ASSERT(f->type == REDIS_REPLY_STRING && strcmp(f->str, "3") == 0);
    freeReplyObject(f);
    ASSERT_EQ(1, complete_one(e.rc, "r3", "a")); /* b released; c still waits on k */
    long long n = 0;
    ASSERT_OK(set_format(e.base, e.q, 2, &n));
    ASSERT_EQ(1, n);
    ASSERT_OK(set_format(e.base, e.q, 3, &n));
    ASSERT_EQ(1, n);
    ASSERT_OK(set_format(e.base, e.q, 3, &n));
    ASSERT_EQ(0, n);
    freeReplyObject(server_cmd(e.rc, "ZREM t:{r3}:active k")); /* (format 1 wants none active) */
    freeReplyObject(server_cmd(e.rc, "ZREM t:{r3}:active a"));
    ASSERT_OK(set_format(e.base, e.q, 1, &n));
    ASSERT_EQ(1, n);
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{r3}:meta format"));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_set_format(e.q, 4, on_count, NULL));
    env_stop(&e);
}

/* Bad input on a format-3 queue: the meta hash wrongly typed refuses
 * deps_add with nothing written; the one-dependent release with the
 * waiting set wrongly typed writes nothing of the release (the state keeps
 * its dependency field, no list). */
TEST(format3_wrongly_typed_keys_write_nothing) {
    test_env e;
    start3(&e, "w3");
    plant_active(e.rc, "w3", "a");
    rjq_dep on_a = {"w3", "a"};
    freeReplyObject(server_cmd(e.rc, "DEL t:{w3}:meta"));
    freeReplyObject(server_cmd(e.rc, "SET t:{w3}:meta x"));
    ASSERT(enqueue_after(&e, "b", &on_a, 1, RJQ_AFTER_FAIL, 0, 0).status != RJQ_OK);
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{w3}:state b"));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{w3}:payload b"));
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{w3}:waiting t:{w3}:deps t:{w3}:dependents"));
    freeReplyObject(server_cmd(e.rc, "DEL t:{w3}:meta"));
    freeReplyObject(server_cmd(e.rc, "HSET t:{w3}:meta format 3"));
    ASSERT_OK(enqueue_after(&e, "b", &on_a, 1, RJQ_AFTER_FAIL, 0, 0).status);
    ASSERT(state_ends(e.rc, "w3", "b", " ^fail,0,0,w3}a"));
    freeReplyObject(server_cmd(e.rc, "DEL t:{w3}:waiting"));
    freeReplyObject(server_cmd(e.rc, "SET t:{w3}:waiting x"));
    ASSERT_EQ(3, complete_one(e.rc, "w3", "a")); /* (left to the client) */
    ASSERT(state_ends(e.rc, "w3", "b", " ^fail,0,0,w3}a"));
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{w3}:deps t:{w3}:ready t:{w3}:prio t:{w3}:delayed"));
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{w3}:dependents a"));
    env_stop(&e);
}
