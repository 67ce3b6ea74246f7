/*
 * Replies whose numbers are out of range (issue 31, item 3: a fuzzing
 * proxy's claim reply with a deadline of INT64_MIN overflowed in the
 * worker) end their request with RJQ_EPROTO or are read as "not given",
 * never as undefined behaviour (a -DRJQ_SANITIZE=ON build aborts on a
 * signed overflow). The hostile replies come from rjq's own function
 * library with one function replaced (FUNCTION LOAD REPLACE), or from
 * records written behind rjq's back. The pure parsers are unit-tested in
 * unit_replies.c and fuzzed in tests/fuzz.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "rjq_scripts.h"
#include "server.h"
#include "waits.h"

/* Replace script s's function in the loaded library by one whose body is
 * `body` (Lua, returning the reply); the others stay as they are. */
static void replace_function(test_env *e, int s, const char *body) {
    const char *name = rjq__scripts[s].function;
    char from[160];
    snprintf(from, sizeof from, "register_function('%s',", name);
    const char *at = strstr(rjq__library, from);
    ASSERT(at != NULL);
    size_t head = (size_t)(at - rjq__library) + strlen("register_function('") + strlen(name);
    size_t size = strlen(rjq__library) + strlen(body) + 2 * strlen(name) + 200;
    char *lib = malloc(size);
    ASSERT(lib != NULL);
    /* the original under another name, then the replacement */
    snprintf(lib, size, "%.*s_original%s\nredis.register_function('%s', function(KEYS, ARGV) %s end)\n",
             (int)head, rjq__library, rjq__library + head, name, body);
    const char *argv[4] = {"FUNCTION", "LOAD", "REPLACE", lib};
    redisReply *r = redisCommandArgv(e->rc, 4, argv, NULL);
    if (r == NULL || r->type != REDIS_REPLY_STRING)
        FAIL_AT(__FILE__, __LINE__, "FUNCTION LOAD: %s", r && r->str ? r->str : "no reply");
    freeReplyObject(r);
    free(lib);
}

/* Run the loop until rjq_client_get_errmsg(c) contains what (10 s at most). */
static int wait_errmsg(test_env *e, const char *what) {
    double until = wait_deadline(10000);
    while (strstr(rjq_client_get_errmsg(e->c), what) == NULL)
        if (!wait_step(e->base, until)) return 0;
    return 1;
}

static long handled;

static void count_job(rjq_job *job, void *data) {
    (void)data;
    handled++;
    rjq_job_complete(job, "", 0, NULL, NULL);
}

TEST(claim_reply_with_a_deadline_of_int64_min_ends_the_claim_in_eproto) {
    test_env e;
    env_start(&e, "hostile");
    /* a job is there to claim; the claim's reply says its lease ends at
     * INT64_MIN (a Lua number -2^63 is that integer exactly) */
    enqueue_x_ok(e.base, e.q, "job-1", 0, 0);
    replace_function(&e, RJQ__S_CLAIM,
                     "return {-1, 0, ARGV[4], -9223372036854775808, 'job-1', 'payload', 1, 3}");
    handled = 0;
    rjq_worker_options wo = quiet_worker_options(2);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, count_job, NULL, &w));
    if (!wait_errmsg(&e, "claim: unexpected reply"))
        FAIL_AT(__FILE__, __LINE__, "no EPROTO for the claim; errmsg \"%s\", %ld handled",
                rjq_client_get_errmsg(e.c), handled);
    ASSERT_EQ(0, handled); /* the malformed claim started nothing */
    env_stop(&e);
}

TEST(stats_with_a_count_out_of_range_end_in_eproto) {
    test_env e;
    env_start(&e, "hostile");
    replace_function(&e, RJQ__S_STATS,
                     "return {-5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}");
    stats_wait s = stats_of(e.base, e.q);
    ASSERT_EQ(RJQ_EPROTO, s.status);
    replace_function(&e, RJQ__S_STATS,
                     "return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -9223372036854775808, 1, 0, 0, 0}");
    s = stats_of(e.base, e.q);
    ASSERT_EQ(RJQ_EPROTO, s.status);
    replace_function(&e, RJQ__S_STATS, /* (a negative dedup count) */
                     "return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, -1, 0, 0}");
    s = stats_of(e.base, e.q);
    ASSERT_EQ(RJQ_EPROTO, s.status);
    replace_function(&e, RJQ__S_STATS, /* (a negative waiting depth) */
                     "return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, -1}");
    s = stats_of(e.base, e.q);
    ASSERT_EQ(RJQ_EPROTO, s.status);
    env_stop(&e);
}

TEST(job_with_attempts_that_are_no_number_in_range_ends_in_eproto) {
    test_env e;
    env_start(&e, "hostile");
    /* atoi() of these was undefined (out of int) or silently 0 */
    static const char *const bad[] = {"99999999999999999999", "-1", "3x", "1000001"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char body[200];
        snprintf(body, sizeof body, "return {'ready', '%s', '3', 'p', false, false, false}", bad[i]);
        replace_function(&e, RJQ__S_JOB, body);
        info_wait w = get_info(e.base, e.q, "job-1");
        if (w.status != RJQ_EPROTO)
            FAIL_AT(__FILE__, __LINE__, "attempts \"%s\": %d, expected RJQ_EPROTO", bad[i], w.status);
    }
    replace_function(&e, RJQ__S_JOB, "return {'ready', '2', false, 'p', false, false, false}");
    info_wait w = get_info(e.base, e.q, "job-1");
    ASSERT_OK(w.status);
    ASSERT_EQ(2, w.attempts);
    ASSERT_EQ(3, w.max_attempts); /* absent: the default */
    env_stop(&e);
}

typedef struct procs_wait {
    int done, status;
    long pid;
    long long started_ms;
    int concurrency, running;
    size_t nqueues, njobs;
} procs_wait;

static void on_procs(rjq_client *c, int status, const rjq_process *list, size_t n, void *data) {
    procs_wait *p = data;
    (void)c;
    p->done++;
    p->status = status;
    if (status != RJQ_OK || n != 1) return;
    p->pid = list[0].pid;
    p->started_ms = list[0].started_ms;
    p->nqueues = list[0].nqueues;
    if (list[0].nqueues == 1) {
        p->concurrency = list[0].queues[0].concurrency;
        p->running = list[0].queues[0].running;
        p->njobs = list[0].queues[0].njobs;
    }
}

TEST(process_info_numbers_out_of_range_read_as_not_given) {
    test_env e;
    env_start(&e, NULL);
    /* a live entry whose info (written behind rjq's back) has numbers no
     * process has, and more job ids than rjq.h promises */
    freeReplyObject(server_cmd(e.rc, "ZADD t:{clients}:live 9999999999990 c9"));
    char info[1024];
    int len = snprintf(info, sizeof info, "rjq1\thost\t99999999999999999999\t-5\tname\nq1\t4294967297\t-3\t");
    for (int i = 0; i < RJQ_PROCESS_JOBS_MAX + 5; i++)
        len += snprintf(info + len, sizeof info - (size_t)len, "%sj%d", i ? " " : "", i);
    const char *argv[4] = {"HSET", "t:{clients}:info", "c9", info};
    freeReplyObject(redisCommandArgv(e.rc, 4, argv, NULL));
    procs_wait p = {0};
    ASSERT_OK(rjq_client_list_processes(e.c, 0, 10, on_procs, &p));
    ASSERT(loop_until(e.base, &p.done, 5000));
    ASSERT_OK(p.status);
    ASSERT_EQ(0, p.pid);
    ASSERT_EQ(0, p.started_ms);
    ASSERT_EQ(1, p.nqueues);
    ASSERT_EQ(0, p.concurrency);
    ASSERT_EQ(0, p.running);
    ASSERT_EQ(RJQ_PROCESS_JOBS_MAX, p.njobs);
    env_stop(&e);
}

static int awaited, await_status;

static void on_awaited(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)c, (void)o, (void)data;
    awaited++;
    await_status = status;
}

/* A watch code outside 0..4 was read as "still watching": the await
 * waited for an outcome nothing would send. */
TEST(await_whose_watch_code_is_out_of_range_ends_in_eproto) {
    test_env e;
    env_start(&e, "hostile");
    replace_function(&e, RJQ__S_WATCH, "return {7, false}");
    awaited = 0;
    ASSERT_OK(rjq_queue_await(e.q, "some-job", NULL, on_awaited, NULL, NULL));
    ASSERT(loop_until(e.base, &awaited, 10000));
    ASSERT_EQ(RJQ_EPROTO, await_status);
    env_stop(&e);
}

static char events_seen[512];
static int good_seen;

static void on_event(rjq_client *c, const char *event, const char *id, void *data) {
    (void)c, (void)data;
    size_t used = strlen(events_seen);
    snprintf(events_seen + used, sizeof events_seen - used, "%s%s:%s", used ? "," : "", event, id);
    if (strcmp(id, "good-1") == 0) good_seen = 1;
}

/* Event lines with a time past 2^62 or a NUL byte are dropped; the lines
 * beside them in the same message still come. */
TEST(event_lines_out_of_range_are_dropped_and_the_others_delivered) {
    test_env e;
    env_start(&e, "hostile");
    rjq_monitor *m;
    events_seen[0] = '\0';
    good_seen = 0;
    ASSERT_OK(rjq_queue_monitor(e.q, on_event, NULL, &m));
    static const char msg[] = "completed bad-1 9000000000000000000\n"
                              "comp\0eted bad-2 1700000000000\n"
                              "completed good-1 1700000000000";
    const char *argv[3] = {"PUBLISH", "t:{hostile}:events", msg};
    size_t lens[3] = {7, strlen(argv[1]), sizeof msg - 1};
    wait_monitoring(e.base, e.c, "hostile");
    freeReplyObject(redisCommandArgv(e.rc, 3, argv, lens));
    WAIT_FOR(e.base, good_seen, 10000); /* (its line comes after the bad ones) */
    ASSERT(strstr(events_seen, "bad") == NULL);
    env_stop(&e);
}

/* The one push channel of queue hostile's workers, into out, once there is
 * one. */
static int push_channel(test_env *e, char *out, size_t size) {
    redisReply *r = server_cmd(e->rc, "PUBSUB CHANNELS t:{hostile}:push:*");
    int one = r->type == REDIS_REPLY_ARRAY && r->elements == 1;
    if (one) snprintf(out, size, "%s", r->element[0]->str);
    freeReplyObject(r);
    return one;
}

static void hold_job(rjq_job *job, void *data) {
    (void)data;
    rjq_job_complete(job, "", 0, NULL, NULL);
}

/* A push message whose lease ends at 0 (no time a server gives) is
 * malformed: its jobs are left to their lease, not started or handed on. */
TEST(push_message_with_a_deadline_of_zero_is_malformed) {
    test_env e;
    env_start(&e, "hostile");
    rjq_worker_options wo = quiet_worker_options(2);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, hold_job, NULL, &w));
    /* the worker's push channel, once subscribed */
    char channel[256] = "";
    WAIT_FOR(e.base, push_channel(&e, channel, sizeof channel), 5000);
    const char *argv[3] = {"PUBLISH", channel, "999 1 1 x.999.1 0\n5 1 1 3\njob-1x"};
    freeReplyObject(redisCommandArgv(e.rc, 3, argv, NULL));
    if (!wait_errmsg(&e, "malformed message"))
        FAIL_AT(__FILE__, __LINE__, "not malformed; errmsg \"%s\"", rjq_client_get_errmsg(e.c));
    env_stop(&e);
}

static int finish_status, finish_calls, finish_jobs; /* the first callback's status */
static int fail_instead;

static void on_finished(rjq_client *c, int status, void *data) {
    (void)c, (void)data;
    if (finish_calls++ == 0) finish_status = status;
}

static void finish_job(rjq_job *job, void *data) {
    (void)data;
    finish_jobs++;
    if (fail_instead)
        rjq_job_fail(job, "boom", 0, -1, on_finished, NULL);
    else
        rjq_job_complete(job, "", 0, on_finished, NULL);
}

/* Completion and failure answer one small code a job (complete.lua:
 * 0..2, then 0..1 a slot offer; fail.lua: 0..4): any other number is no
 * answer (RJQ_EPROTO), not "lease lost" or success. */
static void finish_code_out_of_range(int fail, int s, const char *body) {
    test_env e;
    env_start(&e, "hostile");
    enqueue_x_ok(e.base, e.q, "job-1", 0, 0);
    replace_function(&e, s, body);
    finish_status = 0, finish_calls = 0, finish_jobs = 0, fail_instead = fail;
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, finish_job, NULL, &w));
    WAIT_FOR(e.base, finish_calls >= 1, 10000);
    ASSERT(finish_calls >= 1); /* (the job may run again: it is still active) */
    ASSERT(finish_calls <= finish_jobs); /* one callback a completion */
    ASSERT_EQ(RJQ_EPROTO, finish_status);
    env_stop(&e);
}

TEST(completion_code_out_of_range_ends_in_eproto) {
    /* as many codes as the call has jobs and offers, each 7 or 3 */
    finish_code_out_of_range(0, RJQ__S_COMPLETE,
                             "local offers = tonumber(ARGV[4]) "
                             "local first = 6 + 4 * offers + tonumber(ARGV[5]) "
                             "local out = {} "
                             "while first <= #ARGV do "
                             "local n = tonumber(ARGV[first + 1]) "
                             "for i = 1, n do out[#out + 1] = 7 end "
                             "first = first + 2 + 2 * n end "
                             "for i = 1, offers do out[#out + 1] = 3 end "
                             "return out");
}

TEST(failure_code_out_of_range_ends_in_eproto) {
    finish_code_out_of_range(1, RJQ__S_FAIL, "return 9");
}

/* fail.lua's array reply is { 5, (id, dependents entry)... }: an entry
 * without its id's pair, an empty id or another code is no answer. */
TEST(failure_entries_of_the_wrong_shape_end_in_eproto) {
    finish_code_out_of_range(1, RJQ__S_FAIL, "return {5, 'a'}");
    finish_code_out_of_range(1, RJQ__S_FAIL, "return {5, '', 'q b'}");
    finish_code_out_of_range(1, RJQ__S_FAIL, "return {2, 'a', 'q b'}");
}

/* rjq_queue_delete's or rjq_queue_reclaim's count as the call gives it
 * (status, count), the script's reply being `body`'s. */
static count_wait count_reply(test_env *e, int script, const char *body) {
    replace_function(e, script, body);
    count_wait cw = {0};
    if (script == RJQ__S_DELETE) ASSERT_OK(rjq_queue_delete(e->q, "x", on_count, &cw));
    else ASSERT_OK(rjq_queue_reclaim(e->q, on_count, &cw));
    ASSERT(loop_until(e->base, &cw.done, 10000));
    return cw;
}

/* delete.lua's reply is its count or { count, outcome, own, (id,
 * dependents entry)... }, reclaim.lua's its count or { count, (id,
 * entry)... }: each call reads its own script's shape only (a reply of
 * the other's shape is no answer: they were told apart by their shape),
 * and every number in range. */
TEST(delete_and_reclaim_replies_of_the_other_shape_or_out_of_range_end_in_eproto) {
    test_env e;
    env_start(&e, "hostile");
    count_wait cw = count_reply(&e, RJQ__S_DELETE, "return 5");
    ASSERT_OK(cw.status);
    ASSERT_EQ(5, cw.n);
    /* delete: reclaim's shape, a count over a page or under -2, a count of
     * 0, an own count over its pairs or negative, another outcome, an
     * entry without its pair */
    const char *deletes[] = {"return {1, 'a', 'q b'}",           "return 1001",
                             "return -3",                        "return {0, 'dead', 0, 'a', 'q b'}",
                             "return {1, 'dead', 2, 'a', 'q b'}", "return {1, 'dead', -1, 'a', 'q b'}",
                             "return {1, 'done', 0, 'a', 'q b'}", "return {1, 'dead', 0, 'a'}"};
    for (size_t i = 0; i < sizeof deletes / sizeof deletes[0]; i++)
        ASSERT_EQ(RJQ_EPROTO, count_reply(&e, RJQ__S_DELETE, deletes[i]).status);
    cw = count_reply(&e, RJQ__S_RECLAIM, "return 3");
    ASSERT_OK(cw.status);
    ASSERT_EQ(3, cw.n);
    /* reclaim: delete's shape, a negative count (bare or in the array), an
     * entry without its pair */
    const char *reclaims[] = {"return {1, 'dead', 0}", "return -1", "return {-1, 'a', 'q b'}",
                              "return {1, 'a'}"};
    for (size_t i = 0; i < sizeof reclaims / sizeof reclaims[0]; i++)
        ASSERT_EQ(RJQ_EPROTO, count_reply(&e, RJQ__S_RECLAIM, reclaims[i]).status);
    env_stop(&e);
}
