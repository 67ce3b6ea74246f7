/*
 * FIFO order within a priority, across the wrap of the queue's sequence
 * counter (issue 12).
 *
 * Jobs of non-zero priority wait in the prio zset with score
 * -priority * 2^32 + rank, the rank taken from the sequence counter (field
 * seq of the stats hash, which also numbers the jobs). Versions before
 * the fix used seq % 2^32, so after 2^32 sequence numbers a new job sorted
 * before the older ones of its priority. These tests set seq just below a
 * boundary with a raw HSET (as if billions of jobs had passed through),
 * enqueue across it, and check the order in which a worker of concurrency
 * 1 runs the jobs: strict priority, and enqueue order within a priority.
 * The worker starts after the enqueues, so no job is pushed straight to it.
 */
#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

#define TWO_31 2147483648LL
#define TWO_32 4294967296LL
#define MAX_JOBS 32

/* ---- helpers ------------------------------------------------------------ */

typedef struct job_spec {
    const char *id;
    int priority;
} job_spec;

/* What the worker ran, in order (an id per attempt). */
typedef struct run_log {
    int n;
    char ids[MAX_JOBS][64];
    const char *fail_once; /* id whose first attempt fails, retry now */
    const char *hold;      /* id whose first attempt is held, not finished */
    rjq_job *held;
} run_log;

static void on_retry_scheduled(rjq_client *c, int status, void *data) {
    (void)c;
    (void)data;
    ASSERT_OK(status);
}

static void record_handler(rjq_job *job, void *data) {
    run_log *l = data;
    const char *id = rjq_job_get_id(job);
    ASSERT(l->n < MAX_JOBS);
    snprintf(l->ids[l->n++], sizeof l->ids[0], "%s", id);
    int first = rjq_job_get_attempt(job) == 1;
    if (first && l->fail_once && strcmp(id, l->fail_once) == 0) {
        ASSERT_OK(rjq_job_fail(job, "again", RJQ_FAIL_RETRY, 0, on_retry_scheduled, NULL));
    } else if (first && l->hold && strcmp(id, l->hold) == 0) {
        l->held = job;
    } else {
        ASSERT_OK(rjq_job_complete(job, NULL, 0, on_done_ok, NULL));
    }
}

typedef struct enq_reply {
    int done, status;
    size_t n;
    int existed;
} enq_reply;

static void on_enq(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c;
    enq_reply *r = data;
    r->done++;
    r->status = status;
    r->n = n;
    for (size_t i = 0; i < n; i++) r->existed += rjq_enqueued_get(jobs, i)->existed;
}

/* Enqueue jobs[0..n) (payload: the id) in one call, a batch when n > 1,
 * and wait for the reply. */
static void enqueue_now(test_env *e, const job_spec *jobs, size_t n) {
    rjq_job_options o[MAX_JOBS];
    rjq_enqueue_item it[MAX_JOBS];
    ASSERT(n >= 1 && n <= MAX_JOBS);
    memset(o, 0, sizeof o);
    for (size_t i = 0; i < n; i++) {
        o[i].size = sizeof o[i];
        o[i].id = jobs[i].id;
        o[i].priority = jobs[i].priority;
        it[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), jobs[i].id, strlen(jobs[i].id), &o[i]};
    }
    enq_reply r = {0};
    ASSERT_OK(rjq_enqueue_batch(e->q, it, n, on_enq, &r));
    ASSERT(loop_until(e->base, &r.done, 10000));
    ASSERT_EQ(1, r.done);
    ASSERT_OK(r.status);
    ASSERT_EQ(n, r.n);
    ASSERT_EQ(0, r.existed);
}

/* Make `next` the sequence number the queue hands out next. */
static void set_next_seq(test_env *e, const char *queue, long long next) {
    freeReplyObject(server_cmd(e->rc, "HSET t:{%s}:stats seq %lld", queue, next - 1));
}

static long long get_seq(test_env *e, const char *queue) {
    redisReply *r = server_cmd(e->rc, "HGET t:{%s}:stats seq", queue);
    ASSERT(r->type == REDIS_REPLY_STRING);
    long long v = atoll(r->str);
    freeReplyObject(r);
    return v;
}

/* The score of id in the prio zset, as text ("" when absent). */
static void prio_score(test_env *e, const char *queue, const char *id, char *out, size_t size) {
    redisReply *r = server_cmd(e->rc, "ZSCORE t:{%s}:prio %s", queue, id);
    snprintf(out, size, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
}

/* Has the queue of e->q nothing left to run: no job ready, delayed or
 * running (what the worker finished is answered: a stats call is a round
 * trip behind it), and a worker registered idle (its claim found none)? */
static int drained(test_env *e) {
    rjq_stats s = get_stats(e->base, e->q);
    return s.ready == 0 && s.delayed == 0 && s.active == 0 &&
           server_int(e->rc, "HLEN t:{%s}:idle", rjq_queue_get_name(e->q)) > 0;
}

/* Start a worker of concurrency 1 recording into l, run until it has run
 * `count` jobs, and check that it runs nothing more: once the queue has
 * nothing left, nothing more can come. */
static void run_jobs(test_env *e, run_log *l, int count) {
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e->q, &wo, record_handler, l, &w));
    WAIT_FOR(e->base, l->n >= count, 10000);
    WAIT_FOR(e->base, drained(e), 10000);
    ASSERT_EQ(count, l->n);
}

/* Assert that l ran exactly the ids in `want` (n of them), in order. */
static void assert_order(const run_log *l, const char *const *want, int n, int line) {
    int ok = l->n == n;
    for (int i = 0; ok && i < n; i++) ok = strcmp(want[i], l->ids[i]) == 0;
    if (ok) return;
    fprintf(stderr, "expected:");
    for (int i = 0; i < n; i++) fprintf(stderr, " %s", want[i]);
    fprintf(stderr, "\n     got:");
    for (int i = 0; i < l->n; i++) fprintf(stderr, " %s", l->ids[i]);
    fprintf(stderr, "\n");
    FAIL_AT(__FILE__, line, "run order differs from enqueue order within priorities");
}

/* The ids of jobs[0..n) in claim order: by priority, highest first; ties
 * in the order given (enqueue order). */
static void claim_order(const job_spec *jobs, int n, const char **out) {
    int order[MAX_JOBS];
    ASSERT(n <= MAX_JOBS);
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = 1; i < n; i++) /* stable insertion sort */
        for (int k = i; k > 0 && jobs[order[k - 1]].priority < jobs[order[k]].priority; k--) {
            int t = order[k];
            order[k] = order[k - 1];
            order[k - 1] = t;
        }
    for (int i = 0; i < n; i++) out[i] = jobs[order[i]].id;
}

/* Enqueue each group of jobs in one call (groups[g] jobs each, in order),
 * run them all, and assert claim order. */
static void enqueue_groups_run_and_check(test_env *e, const job_spec *jobs, const int *groups, int ngroups,
                                         int line) {
    int n = 0;
    for (int g = 0; g < ngroups; g++) {
        enqueue_now(e, jobs + n, (size_t)groups[g]);
        n += groups[g];
    }
    const char *want[MAX_JOBS];
    claim_order(jobs, n, want);
    run_log l;
    memset(&l, 0, sizeof l);
    run_jobs(e, &l, n);
    assert_order(&l, want, n, line);
}

/* =========================================================================
 * The wrap at 2^32
 * ====================================================================== */

/* Jobs of one priority enqueued one by one and in a batch across sequence
 * number 2^32 run in enqueue order. (Before the fix the job numbered 2^32
 * scored like a job put back at the head, and those after it before every
 * older job.) */
TEST(fifo_within_priority_survives_seq_wrap) {
    test_env env;
    env_start(&env, "wrap");
    set_next_seq(&env, "wrap", TWO_32 - 3);
    const job_spec jobs[] = {
        {"a", 5}, {"b", 5},           /* 2^32-3, 2^32-2: one call each */
        {"c", 5}, {"d", 5}, {"e", 5}, /* 2^32-1 .. 2^32+1: one batch across */
        {"f", 5}, {"g", 5},           /* 2^32+2, 2^32+3 */
    };
    const int groups[] = {1, 1, 3, 1, 1};
    enqueue_groups_run_and_check(&env, jobs, groups, 5, __LINE__);
    ASSERT_EQ(TWO_32 + 3, get_seq(&env, "wrap"));
    env_stop(&env);
}

/* The same with several priorities (the extremes included) and priority 0
 * jobs mixed in, across 2^32 and then across the next boundaries of the
 * scheme (every 2^31 after 2^32) with jobs still waiting from before each;
 * and on a fresh queue near 2^50 (a million enqueues a second for 35
 * years), where scores must still be exact integers. */
TEST(strict_priority_and_fifo_hold_across_later_seq_boundaries) {
    test_env env;
    env_start(&env, "later");
    const int P = RJQ_PRIORITY_MAX, M = RJQ_PRIORITY_MIN;
    set_next_seq(&env, "later", TWO_32 - 2);
    const job_spec jobs[] = {
        {"a1", 1}, {"a0", 0}, {"aM", M}, {"aP", P}, {"am", -1}, /* across 2^32 */
        {"b1", 1}, {"bP", P}, {"bm", -1}, {"b0", 0}, {"bM", M},
        /* seq raised to 3*2^31 - 3 here: as if the counter went on while
         * the jobs above waited (they are all still waiting) */
        {"c1", 1}, {"cM", M}, {"cP", P}, {"cm", -1}, /* across 3*2^31 */
        {"d1", 1}, {"dP", P}, {"dm", -1}, {"dM", M},
        /* and again to 4*2^31 - 3 */
        {"e1", 1}, {"eP", P}, {"em", -1}, {"eM", M}, /* across 2^33 */
    };
    const int n = (int)(sizeof jobs / sizeof jobs[0]);
    enqueue_now(&env, jobs + 0, 5);
    enqueue_now(&env, jobs + 5, 5);
    ASSERT_EQ(TWO_32 + 7, get_seq(&env, "later"));
    set_next_seq(&env, "later", 3 * TWO_31 - 2);
    enqueue_now(&env, jobs + 10, 4);
    enqueue_now(&env, jobs + 14, 4);
    set_next_seq(&env, "later", 4 * TWO_31 - 2);
    for (int i = 18; i < n; i++) enqueue_now(&env, jobs + i, 1);
    const char *want[MAX_JOBS];
    claim_order(jobs, n, want);
    run_log l;
    memset(&l, 0, sizeof l);
    run_jobs(&env, &l, n);
    assert_order(&l, want, n, __LINE__);
    env_stop(&env);

    env_start(&env, "far");
    set_next_seq(&env, "far", (1LL << 50) - 3);
    const job_spec far[] = {
        {"f1", P}, {"g1", M}, {"f2", P}, {"g2", M}, {"f3", P}, {"g3", M}, {"f4", P}, {"g4", M},
    };
    const int groups[] = {2, 2, 2, 2};
    enqueue_groups_run_and_check(&env, far, groups, 4, __LINE__);
    env_stop(&env);
}

/* =========================================================================
 * Re-queued jobs
 * ====================================================================== */

/* A retried priority job (retry delay 0) takes a new sequence number: when
 * that number crosses 2^32 it still queues behind the jobs already waiting
 * in its priority. */
TEST(retried_priority_job_queues_behind_waiting_ones_across_seq_wrap) {
    test_env env;
    env_start(&env, "retry");
    set_next_seq(&env, "retry", TWO_32 - 3);
    const job_spec jobs[] = {{"a", 5}, {"b", 5}, {"c", 5}}; /* 2^32-3 .. 2^32-1 */
    enqueue_now(&env, jobs, 3);
    run_log l;
    memset(&l, 0, sizeof l);
    l.fail_once = "a"; /* its retry is numbered 2^32 */
    run_jobs(&env, &l, 4);
    const char *want[] = {"a", "b", "c", "a"};
    assert_order(&l, want, 4, __LINE__);
    env_stop(&env);
}

/* A delayed priority job takes a new sequence number when a claim makes it
 * ready: when that number crosses 2^32 it still queues behind the jobs
 * already waiting in its priority. */
TEST(due_delayed_priority_job_queues_behind_waiting_ones_across_seq_wrap) {
    test_env env;
    env_start(&env, "due");
    set_next_seq(&env, "due", TWO_32 - 3);
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "later";
    o.priority = 5;
    o.delay_ms = 50;
    rjq_enqueue_item it = {sizeof(rjq_enqueue_item), "later", 5, &o}; /* 2^32-3 */
    enq_reply r = {0};
    ASSERT_OK(rjq_enqueue_batch(env.q, &it, 1, on_enq, &r));
    ASSERT(loop_until(env.base, &r.done, 10000));
    ASSERT_OK(r.status);
    const job_spec jobs[] = {{"a", 5}, {"b", 5}}; /* 2^32-2, 2^32-1 */
    enqueue_now(&env, jobs, 2);
    long long due = server_int(env.rc, "ZSCORE t:{due}:delayed later");
    WAIT_FOR(env.base, server_now_ms(env.rc) > due, 10000); /* due on the server's clock */
    run_log l;
    memset(&l, 0, sizeof l);
    run_jobs(&env, &l, 3); /* its first claim promotes it: numbered 2^32 */
    const char *want[] = {"a", "b", "later"};
    assert_order(&l, want, 3, __LINE__);
    ASSERT_EQ(TWO_32, get_seq(&env, "due"));
    env_stop(&env);
}

static void on_stale_done(rjq_client *c, int status, void *data) {
    (void)c;
    int *st = data;
    *st = status;
}

/* A job put back at the head of its priority (here: reclaimed after its
 * lease expired) keeps the head while the queue crosses 2^32 (the jobs
 * waiting behind it are renumbered), and runs before them. */
TEST(reclaimed_job_keeps_head_of_its_priority_across_seq_wrap) {
    test_env env;
    env_start(&env, "head");
    set_next_seq(&env, "head", TWO_32 - 3);
    const job_spec held = {"held", 5}; /* 2^32-3 */
    enqueue_now(&env, &held, 1);
    run_log l;
    memset(&l, 0, sizeof l);
    l.hold = "held";
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(env.q, &wo, record_handler, &l, &w));
    WAIT_FOR(env.base, l.held != NULL, 10000);

    const job_spec before[] = {{"a", 5}, {"b", 5}}; /* 2^32-2, 2^32-1 */
    enqueue_now(&env, before, 2);
    /* The held job's lease runs out: a sweep puts it back at the head. */
    freeReplyObject(server_cmd(env.rc, "ZADD t:{head}:active XX 1 held"));
    count_wait rw = {0};
    ASSERT_OK(rjq_queue_reclaim(env.q, on_count, &rw));
    ASSERT(loop_until(env.base, &rw.done, 10000));
    ASSERT_OK(rw.status);
    ASSERT_EQ(1, rw.n);
    char head[64], now[64];
    prio_score(&env, "head", "held", head, sizeof head);
    ASSERT_STREQ("-21474836480", head); /* -5 * 2^32: first of priority 5 */

    const job_spec after[] = {{"c", 5}, {"d", 5}}; /* 2^32, 2^32+1 */
    enqueue_now(&env, after, 2);
    prio_score(&env, "head", "held", now, sizeof now);
    ASSERT_STREQ(head, now);

    /* The stale copy is fenced; then the worker has room again. */
    int stale = 1;
    ASSERT_OK(rjq_job_complete(l.held, NULL, 0, on_stale_done, &stale));
    WAIT_FOR(env.base, stale != 1, 10000);
    ASSERT_EQ(RJQ_ELEASELOST, stale);
    WAIT_FOR(env.base, l.n >= 6, 10000);
    WAIT_FOR(env.base, drained(&env), 10000); /* nothing more comes */
    const char *want[] = {"held", "held", "a", "b", "c", "d"};
    assert_order(&l, want, 6, __LINE__);
    env_stop(&env);
}

/* =========================================================================
 * Queues written by earlier versions
 * ====================================================================== */

/* Write a waiting priority job as versions before the fix did: score
 * -p * 2^32 + seq % 2^32, record in the payload and options columns. */
static void put_legacy_job(test_env *e, const char *queue, const char *id, int p, long long seq) {
    long long score = -(long long)p * TWO_32 + seq % TWO_32;
    freeReplyObject(server_cmd(e->rc, "ZADD t:{%s}:prio %lld %s", queue, score, id));
    freeReplyObject(server_cmd(e->rc, "HSET t:{%s}:payload %s %s", queue, id, id));
    freeReplyObject(server_cmd(e->rc, "HSET t:{%s}:options %s %d,,", queue, id, p));
    freeReplyObject(server_cmd(e->rc, "HSET t:{%s}:stats seq %lld", queue, seq));
}

/* Jobs enqueued before the upgrade keep their place: those of a queue
 * short of 2^32 run before the jobs enqueued after it across 2^32; so do
 * those of a queue that had already passed 2^32 (enqueued after the old
 * wrap), also when the queue then crosses the next boundary. */
TEST(jobs_enqueued_before_the_fix_drain_in_order_across_seq_wrap) {
    test_env env;
    env_start(&env, "old");
    put_legacy_job(&env, "old", "o1", 3, TWO_32 - 5);
    put_legacy_job(&env, "old", "o2", -2, TWO_32 - 4);
    put_legacy_job(&env, "old", "o3", 3, TWO_32 - 3);
    put_legacy_job(&env, "old", "o4", -2, TWO_32 - 2);
    const job_spec jobs[] = {
        {"o1", 3}, {"o2", -2}, {"o3", 3}, {"o4", -2}, /* already waiting */
        {"n1", -2}, {"n2", 3}, {"n3", -2}, {"n4", 3}, {"n5", 3},
    };
    enqueue_now(&env, jobs + 4, 2); /* 2^32-1, 2^32 */
    enqueue_now(&env, jobs + 6, 3);
    const char *want[MAX_JOBS];
    claim_order(jobs, 9, want);
    run_log l;
    memset(&l, 0, sizeof l);
    run_jobs(&env, &l, 9);
    assert_order(&l, want, 9, __LINE__);
    env_stop(&env);

    env_start(&env, "wrapped");
    put_legacy_job(&env, "wrapped", "o1", 3, TWO_32 + 4);
    put_legacy_job(&env, "wrapped", "o2", 3, TWO_32 + 5);
    const job_spec more[] = {
        {"o1", 3}, {"o2", 3},
        {"n1", 3}, {"n2", 3}, /* 2^32+6, 2^32+7 */
        {"n3", 3}, {"n4", 3}, /* across 3*2^31 */
    };
    enqueue_now(&env, more + 2, 2);
    set_next_seq(&env, "wrapped", 3 * TWO_31 - 1);
    enqueue_now(&env, more + 4, 1);
    enqueue_now(&env, more + 5, 1);
    claim_order(more, 6, want);
    memset(&l, 0, sizeof l);
    run_jobs(&env, &l, 6);
    assert_order(&l, want, 6, __LINE__);
    env_stop(&env);
}
