/*
 * Job lifecycle, end to end against a private redis-server: retries with
 * backoff, dead letters and replay, delayed jobs, strict priorities, the
 * doorbell (and no blocking commands), idempotent ids, freeing the client
 * or stopping a worker from inside callbacks, counters that agree with the
 * queue's contents, and leases kept alive by extension.
 *
 * Timing: the only timing assertion is the lower bound of the delayed job
 * (never handed out before it is due). Every other wait is a safety net
 * that turns a hang into a failure. Backoff delays are checked on the
 * server (delayed zset score minus the server's TIME), not by wall clock.
 */
#include <stdint.h>

#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

/* ---- small helpers ------------------------------------------------------ */

/* ZSCORE as an integer; -1 when the member is absent. */
static long long zscore(redisContext *rc, const char *key, const char *member) {
    redisReply *r = server_cmd(rc, "ZSCORE %s %s", key, member);
    long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : -1;
    freeReplyObject(r);
    return v;
}

static count_wait replay(struct event_base *base, rjq_queue *q, const char *id, long limit) {
    count_wait w = {0};
    ASSERT_OK(rjq_queue_replay(q, id, limit, on_count, &w));
    ASSERT(loop_until(base, &w.done, 10000));
    ASSERT_EQ(1, w.done);
    return w;
}

/* Enqueue one job and wait for its reply (RJQ_OK, one job); returns it. */
static enqueue_wait enqueue_sync(struct event_base *base, rjq_queue *q, const char *payload,
                                 const rjq_job_options *o) {
    enqueue_wait w = enqueue_job(base, q, payload, o);
    ASSERT_OK(w.status);
    ASSERT_EQ(1, w.n);
    return w;
}

/* =========================================================================
 * Retries, dead letters, replay
 * ====================================================================== */

typedef struct retry_ctx {
    redisContext *rc;
    int succeed;
    long handled, failed_replies, completed_replies;
    int attempts[8];
    int delayed_seen;       /* retries seen waiting in the delayed set */
    long long max_remaining; /* largest (due - server now) seen for them */
} retry_ctx;

static void on_retry_failed(rjq_client *c, int status, void *data) {
    (void)c;
    retry_ctx *x = data;
    ASSERT_OK(status);
    x->failed_replies++;
    if (x->failed_replies < 3) {
        /* A retry waits for its backoff in the delayed set: due - now is at
         * most the fixed 50 ms (the check runs after the script, so the
         * remaining time can only be smaller). Absent means it was already
         * promoted (possible only if this process stalled > 50 ms). */
        long long due = zscore(x->rc, "t:{retry}:delayed", "job-retry");
        long long now = server_now_ms(x->rc);
        if (due >= 0) {
            x->delayed_seen++;
            if (due - now > x->max_remaining) x->max_remaining = due - now;
        }
    }
}

static void on_retry_completed(rjq_client *c, int status, void *data) {
    (void)c;
    retry_ctx *x = data;
    ASSERT_OK(status);
    x->completed_replies++;
}

static void retry_handler(rjq_job *job, void *data) {
    retry_ctx *x = data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    ASSERT_STREQ("job-retry", rjq_job_get_id(job));
    ASSERT_EQ(7, len);
    ASSERT(memcmp(p, "payload", 7) == 0);
    ASSERT_EQ(3, rjq_job_get_max_attempts(job));
    ASSERT(x->handled < 8);
    x->attempts[x->handled++] = rjq_job_get_attempt(job);
    if (x->succeed) {
        ASSERT_OK(rjq_job_complete(job, "ok", 2, on_retry_completed, x));
    } else {
        char err[32];
        snprintf(err, sizeof err, "boom %d", rjq_job_get_attempt(job));
        ASSERT_OK(rjq_job_fail(job, err, RJQ_FAIL_RETRY, -1, on_retry_failed, x));
    }
}

typedef struct ids_wait {
    int done, status;
    size_t n;
    char first[64];
} ids_wait;

static void on_ids(rjq_client *c, int status, const char *const *ids, size_t n, void *data) {
    (void)c;
    ids_wait *w = data;
    w->done++;
    w->status = status;
    w->n = n;
    if (n > 0) snprintf(w->first, sizeof w->first, "%s", ids[0]);
}

TEST(retry_with_backoff_then_dead_then_replay_completes) {
    test_env env;
    env_start(&env, "retry");
    struct event_base *base = env.base;
    rjq_queue *q = env.q;
    retry_ctx x;
    memset(&x, 0, sizeof x);
    x.rc = env.rc;
    x.max_remaining = -1;

    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "job-retry";
    o.max_attempts = 3;
    o.backoff.type = RJQ_BACKOFF_FIXED;
    o.backoff.base_ms = 50;
    enqueue_wait e = enqueue_sync(base, q, "payload", &o);
    ASSERT_STREQ("job-retry", e.id);
    ASSERT_EQ(0, e.existed);

    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 1;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, retry_handler, &x, &w));
    ASSERT(loop_until_count(base, &x.failed_replies, 3, 10000));
    ASSERT_EQ(3, x.handled);
    ASSERT_EQ(1, x.attempts[0]);
    ASSERT_EQ(2, x.attempts[1]);
    ASSERT_EQ(3, x.attempts[2]);
    /* The retries waited in the delayed set with the job's fixed backoff. */
    ASSERT(x.delayed_seen >= 1);
    ASSERT(x.max_remaining <= 50);

    /* Attempts spent: dead, the last error kept. */
    info_wait info = get_info(base, q, "job-retry");
    ASSERT_OK(info.status);
    ASSERT_STREQ("dead", info.state);
    ASSERT(info.has_error);
    ASSERT_STREQ("boom 3", info.error);
    ASSERT_EQ(3, info.attempts);
    ASSERT_EQ(3, info.max_attempts);
    ASSERT_STREQ("payload", info.payload);
    ASSERT(!info.has_result);

    rjq_stats st = get_stats(base, q);
    ASSERT_EQ(1, st.enqueued);
    ASSERT_EQ(3, st.failed);
    ASSERT_EQ(2, st.retried);
    ASSERT_EQ(1, st.dead);
    ASSERT_EQ(1, st.dead_depth);
    ASSERT_EQ(0, st.completed);
    ASSERT_EQ(0, st.replayed);
    ASSERT_EQ(0, st.ready);
    ASSERT_EQ(0, st.delayed);
    ASSERT_EQ(0, st.active);

    ids_wait dl = {0};
    ASSERT_OK(rjq_queue_list_dead(q, 0, 10, on_ids, &dl));
    ASSERT(loop_until(base, &dl.done, 10000));
    ASSERT_OK(dl.status);
    ASSERT_EQ(1, dl.n);
    ASSERT_STREQ("job-retry", dl.first);

    /* A dead job stays dead: the worker does not get it again (nothing of
     * it waits to run: ready, delayed and active are 0 above; the round
     * trips since show no other handler call). */
    ASSERT_EQ(3, x.handled);

    /* Replay by id: runs again from attempt 1 and completes. */
    x.succeed = 1;
    count_wait r = replay(base, q, "job-retry", 0);
    ASSERT_OK(r.status);
    ASSERT_EQ(1, r.n);
    ASSERT(loop_until_count(base, &x.completed_replies, 1, 10000));
    ASSERT_EQ(4, x.handled);
    ASSERT_EQ(1, x.attempts[3]);

    info = get_info(base, q, "job-retry");
    ASSERT_OK(info.status);
    ASSERT_STREQ("completed", info.state);
    ASSERT(info.has_result);
    ASSERT_STREQ("ok", info.result);

    st = get_stats(base, q);
    ASSERT_EQ(1, st.replayed);
    ASSERT_EQ(1, st.completed);
    ASSERT_EQ(3, st.failed);
    ASSERT_EQ(2, st.retried);
    ASSERT_EQ(1, st.dead);
    ASSERT_EQ(0, st.dead_depth);
    ASSERT_EQ(0, st.ready);
    ASSERT_EQ(0, st.delayed);
    ASSERT_EQ(0, st.active);

    /* Replay of a job that is not dead, and of no job at all. */
    r = replay(base, q, "job-retry", 0);
    ASSERT_EQ(RJQ_ESTATE, r.status);
    r = replay(base, q, "no-such-job", 0);
    ASSERT_EQ(RJQ_ENOTFOUND, r.status);
    ASSERT_EQ(1, get_stats(base, q).replayed);

    env_stop(&env);
}

/* ---- fatal failures ---------------------------------------------------- */

static long fatal_handled, fatal_replies;

static void fatal_handler(rjq_job *job, void *data) {
    (void)data;
    fatal_handled++;
    ASSERT_EQ(1, rjq_job_get_attempt(job));
    ASSERT_EQ(5, rjq_job_get_max_attempts(job));
    ASSERT_OK(rjq_job_fail(job, "fatal!", RJQ_FAIL_FATAL, 0, on_done_ok, &fatal_replies));
}

TEST(fatal_failure_goes_dead_on_first_attempt) {
    test_env env;
    env_start(&env, "fatal");
    struct event_base *base = env.base;
    rjq_queue *q = env.q;
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "job-fatal";
    o.max_attempts = 5;
    enqueue_sync(base, q, "p", &o);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, NULL, fatal_handler, NULL, &w));
    ASSERT(loop_until_count(base, &fatal_replies, 1, 10000));
    /* it must not come back: nothing of it waits to run (the stats below),
     * and no other handler call came by their round trip */
    info_wait info = get_info(base, q, "job-fatal");
    ASSERT_OK(info.status);
    ASSERT_STREQ("dead", info.state);
    ASSERT_STREQ("fatal!", info.error);
    ASSERT_EQ(1, info.attempts);
    ASSERT_EQ(5, info.max_attempts);

    rjq_stats st = get_stats(base, q);
    ASSERT_EQ(1, st.failed);
    ASSERT_EQ(0, st.retried);
    ASSERT_EQ(1, st.dead);
    ASSERT_EQ(1, st.dead_depth);
    ASSERT_EQ(0, st.ready + st.delayed + st.active);
    ASSERT_EQ(1, fatal_handled);
    env_stop(&env);
}

/* ---- backoff policies, checked on the server's clock -------------------- */

/* Jobs of the backoff test. lo/hi give the window of the delay after
 * attempt a (1-based); retry_delay is what the handler passes. */
typedef struct bo_job {
    const char *id;
    rjq_backoff backoff;
    int max_attempts;
    long long retry_delay;
    int checks;  /* retries whose delay was checked */
    int dead;    /* final failure seen */
    long long not_before; /* >= 0: the next attempt may not start earlier */
} bo_job;

static redisContext *bo_rc;
static bo_job bo_jobs[5];
static long bo_replies;
static int bo_stopping; /* the test is over: a fail still in flight is cancelled */

/* The delay the policy allows after attempt a: [lo, hi]. */
static void bo_window(const bo_job *j, int a, long long *lo, long long *hi) {
    if (j->retry_delay >= 0) {
        *lo = *hi = j->retry_delay;
        return;
    }
    long long base = j->backoff.base_ms ? j->backoff.base_ms : 1000;
    long long cap = j->backoff.max_ms ? j->backoff.max_ms : 3600000;
    if (j->backoff.type == RJQ_BACKOFF_FIXED) {
        *lo = *hi = base;
        return;
    }
    long long d = base;
    for (int i = 1; i < a && d < cap; i++) d *= 2;
    if (d > cap) d = cap;
    *lo = d / 2; /* jitter: uniform in [d/2, d] */
    *hi = d;
}

/* The fail script runs after `before` (read in the handler, before the
 * fail is sent) and before `after` (read when its reply arrives), so its
 * due time lies in [before + lo, after + hi] however slow the machine is.
 * Only a claim takes a job out of the delayed set, and its reply follows
 * the fail's on the same connection, so the next attempt never starts
 * before this check. But a reply that arrives lo ms late may find the job
 * already claimed: then the next attempt's start is held to before + lo. */
typedef struct bo_fail {
    bo_job *j;
    int attempt;
    long long before;
} bo_fail;

static void on_bo_failed(rjq_client *c, int status, void *data) {
    (void)c;
    bo_fail *f = data;
    if (bo_stopping && status == RJQ_ECANCELED) { /* a later retry of "def" met the end */
        free(f);
        return;
    }
    ASSERT_OK(status);
    bo_replies++;
    if (f->attempt >= f->j->max_attempts) {
        f->j->dead = 1;
    } else {
        long long due = zscore(bo_rc, "t:{backoff}:delayed", f->j->id);
        long long after = server_now_ms(bo_rc);
        long long lo, hi;
        bo_window(f->j, f->attempt, &lo, &hi);
        if (due < 0) {
            f->j->not_before = f->before + lo;
        } else {
            if (due < f->before + lo || due > after + hi)
                FAIL_AT(__FILE__, __LINE__, "%s attempt %d: due %lld outside [%lld + %lld, %lld + %lld]",
                        f->j->id, f->attempt, due, f->before, lo, after, hi);
            f->j->checks++;
        }
    }
    free(f);
}

static void bo_handler(rjq_job *job, void *data) {
    (void)data;
    bo_job *j = NULL;
    for (int i = 0; i < 5; i++)
        if (strcmp(bo_jobs[i].id, rjq_job_get_id(job)) == 0) j = &bo_jobs[i];
    ASSERT(j != NULL);
    ASSERT(!j->dead);
    bo_fail *f = malloc(sizeof *f);
    ASSERT(f != NULL);
    f->j = j;
    f->attempt = rjq_job_get_attempt(job);
    f->before = server_now_ms(bo_rc);
    if (j->not_before >= 0) {
        if (f->before < j->not_before)
            FAIL_AT(__FILE__, __LINE__, "%s attempt %d started at %lld, before %lld", j->id,
                    f->attempt, f->before, j->not_before);
        j->not_before = -1;
        j->checks++;
    }
    ASSERT_OK(rjq_job_fail(job, "again", RJQ_FAIL_RETRY, j->retry_delay, on_bo_failed, f));
}

/* Jobs 0 and 1 dead, the others retried once (their delay checked). */
static int bo_all_checked(void *arg) {
    (void)arg;
    return bo_jobs[0].dead && bo_jobs[1].dead && bo_jobs[2].checks >= 1 && bo_jobs[3].checks >= 1 &&
           bo_jobs[4].checks >= 1;
}

TEST(backoff_delay_follows_policy_and_grows_exponentially) {
    test_env env;
    env_start(&env, "backoff");
    struct event_base *base = env.base;
    rjq_queue *q = env.q;
    bo_rc = env.rc;
    /* exp: 200..400, 400..800, 800..1600 ms, then dead. The third window
     * lies wholly above the first: a delay that does not grow fails. */
    bo_jobs[0] = (bo_job){"exp", {RJQ_BACKOFF_EXPONENTIAL, 400, 100000}, 4, -1, 0, 0, -1};
    /* cap: base 100 s capped at 300 ms */
    bo_jobs[1] = (bo_job){"cap", {RJQ_BACKOFF_EXPONENTIAL, 100000, 300}, 2, -1, 0, 0, -1};
    /* default: exponential from 1 s (only its first retry is awaited) */
    bo_jobs[2] = (bo_job){"def", {RJQ_BACKOFF_DEFAULT, 0, 0}, 3, -1, 0, 0, -1};
    /* fixed and explicit delays lie past the test's end, however slow */
    bo_jobs[3] = (bo_job){"fixed", {RJQ_BACKOFF_FIXED, 60000, 0}, 3, -1, 0, 0, -1};
    /* the caller's retry delay beats the job's backoff */
    bo_jobs[4] = (bo_job){"explicit", {RJQ_BACKOFF_FIXED, 50, 0}, 3, 70000, 0, 0, -1};
    for (int i = 0; i < 5; i++) {
        rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
        o.id = bo_jobs[i].id;
        o.max_attempts = bo_jobs[i].max_attempts;
        o.backoff = bo_jobs[i].backoff;
        enqueue_sync(base, q, "x", &o);
    }
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 5;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, bo_handler, NULL, &w));
    ASSERT(loop_until_cond(base, bo_all_checked, NULL, 30000));
    ASSERT_EQ(3, bo_jobs[0].checks);
    ASSERT(bo_jobs[0].dead);
    ASSERT_EQ(1, bo_jobs[1].checks);
    ASSERT(bo_jobs[1].dead);
    ASSERT(bo_jobs[2].checks >= 1);
    ASSERT_EQ(1, bo_jobs[3].checks);
    ASSERT_EQ(1, bo_jobs[4].checks);
    info_wait info = get_info(base, q, "exp");
    ASSERT_STREQ("dead", info.state);
    ASSERT_EQ(4, info.attempts);
    bo_stopping = 1;
    env_stop(&env);
    bo_stopping = 0;
}

/* =========================================================================
 * Delayed jobs
 * ====================================================================== */

typedef struct delayed_ctx {
    redisContext *rc;
    int handled;
    char order[2][16];
    double t_handled[2];
    long long server_at_handler[2];
} delayed_ctx;

static void delayed_handler(rjq_job *job, void *data) {
    delayed_ctx *x = data;
    double t = mono_ms();
    ASSERT(x->handled < 2);
    x->t_handled[x->handled] = t;
    x->server_at_handler[x->handled] = server_now_ms(x->rc);
    snprintf(x->order[x->handled], sizeof x->order[0], "%s", rjq_job_get_id(job));
    x->handled++;
    ASSERT_OK(rjq_job_complete(job, NULL, 0, NULL, NULL));
}

TEST(delayed_job_not_before_due_and_promptly_after) {
    test_env env;
    env_start(&env, "delay");
    struct event_base *base = env.base;
    rjq_queue *q = env.q;
    delayed_ctx x;
    memset(&x, 0, sizeof x);
    x.rc = env.rc;

    /* Only the timer for the next delayed job can wake this worker in time:
     * the safety poll is a minute away, past the test's safety net. */
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, delayed_handler, &x, &w));
    wait_worker_started(base, env.c, q, x.rc, "delay"); /* idle: its claims have run */

    /* d300 first, then d150: the later enqueue becomes the earliest due
     * and must re-arm the idle worker's timer. */
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "d300";
    o.delay_ms = 300;
    double sent300 = mono_ms();
    enqueue_sync(base, q, "a", &o);
    long long due300 = zscore(x.rc, "t:{delay}:delayed", "d300");
    o.id = "d150";
    o.delay_ms = 150;
    double sent150 = mono_ms();
    enqueue_sync(base, q, "b", &o);
    long long due150 = zscore(x.rc, "t:{delay}:delayed", "d150");

    WAIT_FOR(base, x.handled >= 2, 20000);
    ASSERT_EQ(2, x.handled);
    ASSERT_STREQ("d150", x.order[0]);
    ASSERT_STREQ("d300", x.order[1]);
    /* Not before due: the script set the due time after the enqueue was
     * sent, so handler - send >= delay, less the clocks' granularity. */
    ASSERT(x.t_handled[0] >= sent150 + 150.0 - 2.0);
    ASSERT(x.t_handled[1] >= sent300 + 300.0 - 2.0);
    /* And on the server's own clock, exactly. */
    if (due150 >= 0) ASSERT(x.server_at_handler[0] >= due150);
    if (due300 >= 0) ASSERT(x.server_at_handler[1] >= due300);
    env_stop(&env);
}

/* =========================================================================
 * Priorities
 * ====================================================================== */

#define PRIO_N 13
static const int prio_values[PRIO_N] = {0, 5, -3, 5, 0, 10, -3, RJQ_PRIORITY_MAX, 0, -3,
                                        RJQ_PRIORITY_MIN, RJQ_PRIORITY_MAX, RJQ_PRIORITY_MIN};
static char prio_seen[PRIO_N][16];
static int prio_handled;

static void prio_handler(rjq_job *job, void *data) {
    (void)data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    ASSERT(prio_handled < PRIO_N);
    snprintf(prio_seen[prio_handled++], sizeof prio_seen[0], "%.*s", (int)len, p);
    ASSERT_OK(rjq_job_complete(job, NULL, 0, NULL, NULL));
}

TEST(priorities_strict_order_fifo_within_priority) {
    test_env env;
    env_start(&env, "prio");
    struct event_base *base = env.base;
    rjq_queue *q = env.q;
    char names[PRIO_N][16];
    enqueue_wait waits[PRIO_N];
    memset(waits, 0, sizeof waits);
    for (int i = 0; i < PRIO_N; i++) {
        rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
        o.priority = prio_values[i];
        snprintf(names[i], sizeof names[i], "j%02d", i);
        ASSERT_OK(rjq_enqueue(q, names[i], strlen(names[i]), &o, on_enqueue_wait, &waits[i]));
    }
    for (int k = 0; k < PRIO_N; k++) ASSERT(loop_until(base, &waits[k].done, 10000));
    for (int k = 0; k < PRIO_N; k++) ASSERT_OK(waits[k].status);

    /* Expected: by priority, highest first; ties in enqueue order. */
    int order[PRIO_N];
    for (int i = 0; i < PRIO_N; i++) order[i] = i;
    for (int i = 1; i < PRIO_N; i++) /* stable insertion sort */
        for (int k = i; k > 0 && prio_values[order[k - 1]] < prio_values[order[k]]; k--) {
            int t = order[k];
            order[k] = order[k - 1];
            order[k - 1] = t;
        }

    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 1;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, prio_handler, NULL, &w));
    WAIT_FOR(base, prio_handled >= PRIO_N, 20000);
    ASSERT_EQ(PRIO_N, prio_handled);
    for (int i = 0; i < PRIO_N; i++) {
        if (strcmp(names[order[i]], prio_seen[i]) != 0)
            FAIL_AT(__FILE__, __LINE__, "position %d: expected %s (priority %d), got %s", i,
                    names[order[i]], prio_values[order[i]], prio_seen[i]);
    }
    env_stop(&env);
}

/* =========================================================================
 * Doorbell, and no blocking commands
 * ====================================================================== */

static int bell_handled;

static void bell_handler(rjq_job *job, void *data) {
    (void)data;
    bell_handled++;
    ASSERT_OK(rjq_job_complete(job, NULL, 0, NULL, NULL));
}

TEST(idle_worker_woken_by_doorbell_and_no_blocking_commands) {
    test_env env;
    env_start(&env, "bell"); /* the worker's client and queue */
    struct event_base *base = env.base;
    redisContext *rc = env.rc;
    rjq_client *pc = client_for(base, &env.s); /* a separate producer */
    rjq_queue *pq = queue_for(pc, "bell");
    wait_connected(base, pc);

    /* poll_ms far beyond the safety net below: only the doorbell can wake
     * the worker in time. */
    rjq_worker_options wo = quiet_worker_options(2);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(env.q, &wo, bell_handler, NULL, &w));
    wait_worker_started(base, env.c, env.q, rc, "bell"); /* idle: its claims have run */
    ASSERT_EQ(0, bell_handled);

    enqueue_sync(base, pq, "one", NULL);
    WAIT_FOR(base, bell_handled >= 1, 20000);
    ASSERT_EQ(1, bell_handled);

    /* Idle again: the next doorbell wakes it again. */
    wait_worker_started(base, env.c, env.q, rc, "bell");
    enqueue_sync(base, pq, "two", NULL);
    WAIT_FOR(base, bell_handled >= 2, 20000);
    ASSERT_EQ(2, bell_handled);

    /* INFO commandstats counts commands run inside scripts too. */
    static const char *const blocking[] = {"blpop", "brpop", "blmove", "brpoplpush", "bzpopmin",
                                           "bzpopmax", "xread", "xreadgroup", "blmpop", "bzmpop",
                                           "wait"};
    for (size_t i = 0; i < sizeof blocking / sizeof blocking[0]; i++) {
        long long n = server_calls(rc, blocking[i]);
        if (n != 0) FAIL_AT(__FILE__, __LINE__, "%s called %lld times", blocking[i], n);
    }
    /* The counts above are read from a working INFO commandstats. */
    ASSERT(server_calls(rc, "fcall") > 0);
    ASSERT(server_calls(rc, "publish") > 0);
    ASSERT(server_calls(rc, "subscribe") > 0);

    rjq_client_free(pc);
    env_stop(&env);
}

/* =========================================================================
 * Idempotent ids
 * ====================================================================== */

#define BATCH_N 1000

typedef struct batch_wait {
    int done, status;
    size_t n;
    char ids[BATCH_N][32];
    int existed[BATCH_N];
} batch_wait;

static void on_batch(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c;
    batch_wait *w = data;
    w->done++;
    w->status = status;
    w->n = n;
    for (size_t i = 0; i < n && i < BATCH_N; i++) {
        snprintf(w->ids[i], sizeof w->ids[i], "%s", rjq_enqueued_get(jobs, i)->id);
        w->existed[i] = rjq_enqueued_get(jobs, i)->existed;
    }
}

static int all_digits(const char *s) {
    if (*s == '\0') return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return 0;
    return 1;
}

TEST(idempotent_id_reports_existing) {
    test_env env;
    env_start(&env, "idem");
    struct event_base *base = env.base;
    rjq_queue *q = env.q;

    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "order-42";
    enqueue_wait e = enqueue_sync(base, q, "first", &o);
    ASSERT_STREQ("order-42", e.id);
    ASSERT_EQ(0, e.existed);
    /* Same id, other payload and options: reported, nothing written. */
    o.priority = 7;
    o.delay_ms = 60000;
    e = enqueue_sync(base, q, "second", &o);
    ASSERT_STREQ("order-42", e.id);
    ASSERT_EQ(1, e.existed);
    info_wait info = get_info(base, q, "order-42");
    ASSERT_STREQ("first", info.payload);
    ASSERT_STREQ("ready", info.state);
    rjq_stats st = get_stats(base, q);
    ASSERT_EQ(1, st.enqueued);
    ASSERT_EQ(1, st.ready);
    ASSERT_EQ(0, st.delayed);

    /* A batch of 1000: server-assigned ids, one existing id, and one id
     * given twice (the second is reported as existing). */
    static rjq_enqueue_item items[BATCH_N];
    static rjq_job_options opts[BATCH_N];
    static char payloads[BATCH_N][16];
    memset(opts, 0, sizeof opts);
    for (int i = 0; i < BATCH_N; i++) {
        opts[i].size = sizeof opts[i];
        items[i].size = sizeof items[i];
        snprintf(payloads[i], sizeof payloads[i], "p%d", i);
        items[i].payload = payloads[i];
        items[i].len = strlen(payloads[i]);
        items[i].opts = NULL;
    }
    opts[10].id = "dup-x";
    items[10].opts = &opts[10];
    opts[20].id = "dup-x";
    items[20].opts = &opts[20];
    opts[500].id = "order-42";
    items[500].opts = &opts[500];
    opts[999].id = "last-one";
    items[999].opts = &opts[999];
    batch_wait *bw = calloc(1, sizeof *bw);
    ASSERT(bw != NULL);
    ASSERT_OK(rjq_enqueue_batch(q, items, BATCH_N, on_batch, bw));
    ASSERT(loop_until(base, &bw->done, 20000));
    ASSERT_EQ(1, bw->done);
    ASSERT_OK(bw->status);
    ASSERT_EQ(BATCH_N, bw->n);
    ASSERT_STREQ("dup-x", bw->ids[10]);
    ASSERT_STREQ("dup-x", bw->ids[20]);
    ASSERT_STREQ("order-42", bw->ids[500]);
    ASSERT_STREQ("last-one", bw->ids[999]);
    for (int i = 0; i < BATCH_N; i++) {
        int want = i == 20 || i == 500;
        if (bw->existed[i] != want)
            FAIL_AT(__FILE__, __LINE__, "item %d: existed %d, expected %d", i, bw->existed[i], want);
        if (i != 10 && i != 20 && i != 500 && i != 999 && !all_digits(bw->ids[i]))
            FAIL_AT(__FILE__, __LINE__, "item %d: server id \"%s\" is not numeric", i, bw->ids[i]);
    }
    /* Server-assigned ids are distinct, and each names its own payload. */
    for (int i = 1; i < BATCH_N; i++)
        if (all_digits(bw->ids[i]) && all_digits(bw->ids[i - 1]))
            ASSERT(strcmp(bw->ids[i], bw->ids[i - 1]) != 0);
    static const int probe[] = {0, 1, 498, 998};
    for (size_t k = 0; k < sizeof probe / sizeof probe[0]; k++) {
        info = get_info(base, q, bw->ids[probe[k]]);
        ASSERT_OK(info.status);
        ASSERT_STREQ(payloads[probe[k]], info.payload);
    }
    info = get_info(base, q, "dup-x");
    ASSERT_STREQ("p10", info.payload);
    info = get_info(base, q, "order-42");
    ASSERT_STREQ("first", info.payload);

    st = get_stats(base, q);
    ASSERT_EQ(1 + BATCH_N - 2, st.enqueued);
    ASSERT_EQ(1 + BATCH_N - 2, st.ready);
    free(bw);
    env_stop(&env);
}

/* =========================================================================
 * Freeing and stopping from inside callbacks
 * ====================================================================== */

typedef struct cb_count {
    int calls, status;
} cb_count;

static void count_done(rjq_client *c, int status, void *data) {
    (void)c;
    cb_count *k = data;
    k->calls++;
    k->status = status;
}

static void count_stats(rjq_client *c, int status, const rjq_stats *s, void *data) {
    (void)c, (void)s;
    cb_count *k = data;
    k->calls++;
    k->status = status;
}

static void count_enq(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs;
    cb_count *k = data;
    k->calls++;
    k->status = status;
    if (status != RJQ_OK) ASSERT_EQ(0, n);
}

static void count_stopped(rjq_worker *w, int status, void *data) {
    (void)w;
    cb_count *k = data;
    k->calls++;
    k->status = status;
}

/* Enqueue n jobs and wait for their replies. */
static void enqueue_n(struct event_base *base, rjq_queue *q, int n) {
    cb_count k = {0, 0};
    for (int i = 0; i < n; i++) {
        char p[16];
        snprintf(p, sizeof p, "job%d", i);
        ASSERT_OK(rjq_enqueue(q, p, strlen(p), NULL, count_enq, &k));
    }
    WAIT_FOR(base, k.calls >= n, 20000);
    ASSERT_EQ(n, k.calls);
    ASSERT_OK(k.status);
}

typedef struct free_ctx {
    rjq_client *c;
    rjq_queue *q;
    rjq_worker *w;
    int handled;
    rjq_job *held[4];
    cb_count stats1, stats2, enq, stop;
    int stats2_rc, enq_rc, stop_rc;
} free_ctx;

static void free_in_handler(rjq_job *job, void *data) {
    free_ctx *x = data;
    ASSERT(x->handled < 4);
    x->held[x->handled++] = job;
    if (x->handled < 2) return; /* hold the first job, act on the second */
    ASSERT_OK(rjq_queue_get_stats(x->q, count_stats, &x->stats1));
    x->enq_rc = rjq_enqueue(x->q, "late", 4, NULL, count_enq, &x->enq);
    ASSERT_OK(x->enq_rc);
    x->stop_rc = rjq_worker_stop(x->w, count_stopped, &x->stop);
    ASSERT_OK(x->stop_rc); /* pending: two jobs still running */
    rjq_client_free(x->c);
    rjq_client_free(x->c); /* a second free while the first is deferred: no-op */
    /* Calls after the free inside the same callback: either refused now,
     * or accepted and then cancelled exactly once. */
    x->stats2_rc = rjq_queue_get_stats(x->q, count_stats, &x->stats2);
    ASSERT(x->stats2_rc == RJQ_OK || x->stats2_rc == RJQ_ECLOSED);
    ASSERT_EQ(0, x->stats1.calls); /* callbacks never run inside the call */
    ASSERT_EQ(0, x->stop.calls);
}

TEST(free_client_inside_handler_is_safe) {
    test_env env;
    env_start(&env, "freeh");
    struct event_base *base = env.base;
    free_ctx x;
    memset(&x, 0, sizeof x);
    x.c = env.c;
    x.q = env.q;
    enqueue_n(base, x.q, 4);
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 2;
    ASSERT_OK(rjq_worker_start(x.q, &wo, free_in_handler, &x, &x.w));
    ASSERT(loop_until(base, &x.stop.calls, 10000));
    env.c = NULL; /* freed by the handler */
    ASSERT(loop_until_empty(base, 10000)); /* nothing may run after the free but its cancellations */

    ASSERT_EQ(2, x.handled);
    ASSERT_EQ(1, x.stats1.calls);
    ASSERT_EQ(RJQ_ECANCELED, x.stats1.status);
    ASSERT_EQ(1, x.enq.calls);
    ASSERT_EQ(RJQ_ECANCELED, x.enq.status);
    ASSERT_EQ(1, x.stop.calls);
    ASSERT_EQ(RJQ_ECANCELED, x.stop.status);
    if (x.stats2_rc == RJQ_OK) {
        ASSERT_EQ(1, x.stats2.calls);
        ASSERT_EQ(RJQ_ECANCELED, x.stats2.status);
    } else {
        ASSERT_EQ(0, x.stats2.calls);
    }
    /* Job handles held across the free: still readable, detached, and
     * released by complete/fail, which report RJQ_ECLOSED. */
    ASSERT(rjq_job_get_worker(x.held[0]) == NULL);
    ASSERT(rjq_job_get_id(x.held[0])[0] != '\0');
    cb_count done = {0, 0};
    ASSERT_EQ(RJQ_ECLOSED, rjq_job_complete(x.held[0], "r", 1, count_done, &done));
    ASSERT_EQ(RJQ_ECLOSED, rjq_job_fail(x.held[1], "e", RJQ_FAIL_RETRY, -1, count_done, &done));
    ASSERT(loop_until_empty(base, 10000));
    ASSERT_EQ(0, done.calls);

    /* The two handed-out jobs were left active (they come back after
     * their lease); the other two were never claimed. */
    ASSERT_EQ(2, server_active_jobs(env.rc, "freeh"));
    env_stop(&env);
}

/* A callback's record: how often, with what, and whether after the free. */
typedef struct tracked {
    int calls, status, after_free;
    const int *freed;
} tracked;

static void tracked_enq(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c;
    tracked *t = data;
    t->calls++;
    t->status = status;
    t->after_free = *t->freed;
    if (status == RJQ_OK) ASSERT(n == 1 && jobs != NULL && jobs[0].id[0] != '\0');
    else ASSERT_EQ(0, n);
}

static void tracked_stats(rjq_client *c, int status, const rjq_stats *s, void *data) {
    (void)c;
    tracked *t = data;
    t->calls++;
    t->status = status;
    t->after_free = *t->freed;
    ASSERT((status == RJQ_OK) == (s != NULL));
}

typedef struct free_enq_ctx {
    rjq_client *c;
    rjq_queue *q;
    int freed;
    int e1_calls;
    tracked e2, e3, st, st_inside, late;
    int late_rc;
} free_enq_ctx;

static void free_in_enq_cb(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n,
                           void *data) {
    free_enq_ctx *x = data;
    (void)jobs;
    x->e1_calls++;
    ASSERT(c == x->c);
    ASSERT_OK(status);
    ASSERT_EQ(1, n);
    /* Sent just before the free: it cannot have been answered yet. */
    ASSERT_OK(rjq_queue_get_stats(x->q, tracked_stats, &x->st_inside));
    rjq_client_free(c);
    x->freed = 1;
    x->late_rc = rjq_enqueue(x->q, "late", 4, NULL, tracked_enq, &x->late);
    ASSERT(x->late_rc == RJQ_OK || x->late_rc == RJQ_ECLOSED);
    ASSERT_EQ(0, x->st_inside.calls); /* never from inside the call */
}

TEST(free_client_inside_enqueue_callback) {
    test_env env;
    env_start(&env, "freee");
    struct event_base *base = env.base;
    free_enq_ctx x;
    memset(&x, 0, sizeof x);
    tracked *all[5] = {&x.e2, &x.e3, &x.st, &x.st_inside, &x.late};
    for (int i = 0; i < 5; i++) all[i]->freed = &x.freed;
    x.c = env.c;
    x.q = env.q;
    /* Pipelined behind the first: still in flight when it is answered. */
    ASSERT_OK(rjq_enqueue(x.q, "1", 1, NULL, free_in_enq_cb, &x));
    ASSERT_OK(rjq_enqueue(x.q, "2", 1, NULL, tracked_enq, &x.e2));
    ASSERT_OK(rjq_queue_get_stats(x.q, tracked_stats, &x.st));
    ASSERT_OK(rjq_enqueue(x.q, "3", 1, NULL, tracked_enq, &x.e3));
    ASSERT(loop_until(base, &x.e1_calls, 10000));
    env.c = NULL; /* freed by the callback */
    ASSERT(loop_until_empty(base, 10000)); /* all that could still run ran */
    ASSERT_EQ(1, x.e1_calls);
    /* Every callback ran exactly once. Those still waiting for Redis when
     * the free completed were cancelled. Replies that came before the free
     * give real outcomes; so may e2, whose job rode in the same script call
     * (and reply) as e1's. */
    for (int i = 0; i < 4; i++) ASSERT_EQ(1, all[i]->calls);
    ASSERT(x.e2.status == RJQ_OK || x.e2.status == RJQ_ECANCELED);
    ASSERT_EQ(RJQ_ECANCELED, x.e3.status);
    ASSERT(x.e3.after_free);
    if (x.st.after_free) ASSERT_EQ(RJQ_ECANCELED, x.st.status);
    else ASSERT_OK(x.st.status);
    ASSERT_EQ(RJQ_ECANCELED, x.st_inside.status);
    if (x.late_rc == RJQ_OK) {
        ASSERT_EQ(1, x.late.calls);
        ASSERT_EQ(RJQ_ECANCELED, x.late.status);
    } else {
        ASSERT_EQ(0, x.late.calls);
    }
    env_stop(&env);
}

typedef struct stop_ctx {
    rjq_worker *w;
    long handled;
    rjq_job *held;
    long done;
    cb_count stop;
    int stop_running; /* rjq_worker_count_running() inside the stop callback */
    long done_at_stop;
} stop_ctx;

static void stop_cb(rjq_worker *w, int status, void *data) {
    stop_ctx *x = data;
    x->stop.calls++;
    x->stop.status = status;
    x->stop_running = rjq_worker_count_running(w);
    x->done_at_stop = x->done;
}

static void stop_in_handler(rjq_job *job, void *data) {
    stop_ctx *x = data;
    x->handled++;
    if (x->handled == 1) {
        ASSERT_OK(rjq_worker_stop(x->w, stop_cb, x));
        ASSERT_EQ(RJQ_EBUSY, rjq_worker_stop(x->w, stop_cb, x));
        ASSERT_OK(rjq_job_complete(job, "one", 3, on_done_ok, &x->done));
    } else {
        x->held = job; /* the same claim brought it: handed out as usual */
    }
    ASSERT_EQ(0, x->stop.calls);
}

TEST(stop_worker_inside_handler) {
    test_env env;
    env_start(&env, "stoph");
    struct event_base *base = env.base;
    rjq_queue *q = env.q;
    enqueue_n(base, q, 3);
    stop_ctx x;
    memset(&x, 0, sizeof x);
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 2;
    ASSERT_OK(rjq_worker_start(q, &wo, stop_in_handler, &x, &x.w));
    ASSERT(loop_until_count(base, &x.done, 1, 10000));
    ASSERT(loop_until_count(base, &x.handled, 2, 10000));
    ASSERT_OK(stats_of(base, q).status); /* a round trip: a stop that was coming came */
    /* A job is still running: the stop waits for it. */
    ASSERT_EQ(2, x.handled);
    ASSERT(x.held != NULL);
    ASSERT_EQ(0, x.stop.calls);
    ASSERT_OK(rjq_job_complete(x.held, "two", 3, on_done_ok, &x.done));
    ASSERT(loop_until(base, &x.stop.calls, 10000));
    ASSERT_OK(stats_of(base, q).status); /* a round trip: a second call would be in */
    ASSERT_EQ(1, x.stop.calls);
    ASSERT_OK(x.stop.status);
    ASSERT_EQ(0, x.stop_running);
    ASSERT_EQ(2, x.done_at_stop); /* after the last completion was answered */
    ASSERT_EQ(2, x.handled);      /* no claim after the stop */

    rjq_stats st = get_stats(base, q);
    ASSERT_EQ(2, st.completed);
    ASSERT_EQ(1, st.ready);
    ASSERT_EQ(0, st.active);
    env_stop(&env);
}

typedef struct free_stop_ctx {
    rjq_client *c;
    rjq_queue *q;
    long done;
    int handled;
    cb_count stop, st, enq;
    int enq_rc;
} free_stop_ctx;

static void free_in_stopped(rjq_worker *w, int status, void *data) {
    (void)w;
    free_stop_ctx *x = data;
    x->stop.calls++;
    x->stop.status = status;
    ASSERT_OK(rjq_queue_get_stats(x->q, count_stats, &x->st));
    rjq_client_free(x->c);
    x->enq_rc = rjq_enqueue(x->q, "late", 4, NULL, count_enq, &x->enq);
    ASSERT(x->enq_rc == RJQ_OK || x->enq_rc == RJQ_ECLOSED);
}

static void complete_handler(rjq_job *job, void *data) {
    free_stop_ctx *x = data;
    x->handled++;
    ASSERT_OK(rjq_job_complete(job, NULL, 0, on_done_ok, &x->done));
}

TEST(free_client_inside_stopped_callback) {
    test_env env;
    env_start(&env, "frees");
    struct event_base *base = env.base;
    free_stop_ctx x;
    memset(&x, 0, sizeof x);
    x.c = env.c;
    x.q = env.q;
    enqueue_n(base, x.q, 2);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(x.q, NULL, complete_handler, &x, &w));
    ASSERT(loop_until_count(base, &x.done, 2, 10000));
    ASSERT_OK(rjq_worker_stop(w, free_in_stopped, &x));
    ASSERT_EQ(0, x.stop.calls); /* never from inside the call */
    ASSERT(loop_until(base, &x.stop.calls, 10000));
    env.c = NULL; /* freed by the stopped callback */
    ASSERT(loop_until_empty(base, 10000)); /* all that could still run ran */
    ASSERT_EQ(1, x.stop.calls);
    ASSERT_OK(x.stop.status);
    ASSERT_EQ(2, x.handled);
    ASSERT_EQ(1, x.st.calls);
    ASSERT_EQ(RJQ_ECANCELED, x.st.status);
    if (x.enq_rc == RJQ_OK) {
        ASSERT_EQ(1, x.enq.calls);
        ASSERT_EQ(RJQ_ECANCELED, x.enq.status);
    } else {
        ASSERT_EQ(0, x.enq.calls);
    }
    env_stop(&env);
}

/* A handle held while the client is freed from outside any callback. */
static rjq_job *held_jobs[2];
static int held_n;

static void hold_handler(rjq_job *job, void *data) {
    (void)data;
    ASSERT(held_n < 2);
    held_jobs[held_n++] = job;
}

TEST(held_job_after_client_free_reports_eclosed) {
    test_env env;
    env_start(&env, "held");
    struct event_base *base = env.base;
    rjq_queue *q = env.q;
    enqueue_n(base, q, 2);
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 2;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, hold_handler, NULL, &w));
    WAIT_FOR(base, held_n >= 2, 20000);
    ASSERT_EQ(2, held_n);
    ASSERT(rjq_job_get_worker(held_jobs[0]) == w);
    char id0[64];
    snprintf(id0, sizeof id0, "%s", rjq_job_get_id(held_jobs[0]));
    rjq_client_free(env.c);
    env.c = NULL;
    /* Readable until released; detached from the freed worker. */
    ASSERT_STREQ(id0, rjq_job_get_id(held_jobs[0]));
    ASSERT(rjq_job_get_worker(held_jobs[0]) == NULL);
    ASSERT(rjq_job_get_worker(held_jobs[1]) == NULL);
    cb_count done = {0, 0};
    ASSERT_EQ(RJQ_ECLOSED, rjq_job_complete(held_jobs[0], NULL, 0, count_done, &done));
    ASSERT_EQ(RJQ_ECLOSED, rjq_job_fail(held_jobs[1], "x", RJQ_FAIL_FATAL, -1, count_done, &done));
    ASSERT(loop_until_empty(base, 10000));
    ASSERT_EQ(0, done.calls);
    env_stop(&env);
}

/* =========================================================================
 * Counters and depths
 * ====================================================================== */

/* Payload first letter picks what the handler does:
 *   A complete; B fail once (retry now) then complete; C fail once (retry
 *   after 20 ms) then complete; D fatal; E always fail (max_attempts 2);
 *   H hold (not finished until the test says so). */
typedef struct mix_ctx {
    long finishes;
    int handled;
    rjq_job *held;
} mix_ctx;

static void mix_handler(rjq_job *job, void *data) {
    mix_ctx *x = data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    ASSERT(len >= 1);
    int a = rjq_job_get_attempt(job);
    x->handled++;
    switch (p[0]) {
    case 'A':
        ASSERT_OK(rjq_job_complete(job, "a", 1, on_done_ok, &x->finishes));
        break;
    case 'B':
    case 'C':
        if (a == 1)
            ASSERT_OK(rjq_job_fail(job, "transient", RJQ_FAIL_RETRY, p[0] == 'B' ? 0 : 20,
                                   on_done_ok, &x->finishes));
        else
            ASSERT_OK(rjq_job_complete(job, "bc", 2, on_done_ok, &x->finishes));
        break;
    case 'D':
        ASSERT_OK(rjq_job_fail(job, "fatal", RJQ_FAIL_FATAL, -1, on_done_ok, &x->finishes));
        break;
    case 'E':
        ASSERT_OK(rjq_job_fail(job, "always", RJQ_FAIL_RETRY, 0, on_done_ok, &x->finishes));
        break;
    default:
        ASSERT(x->held == NULL);
        x->held = job;
        break;
    }
}

TEST(counters_and_depths_agree) {
    test_env env;
    env_start(&env, "mix");
    struct event_base *base = env.base;
    rjq_queue *q = env.q;
    static const struct {
        char kind;
        int n;
    } plan[] = {{'A', 8}, {'B', 6}, {'C', 6}, {'D', 5}, {'E', 5}};
    char ids[64][256];
    int nids = 0;
    for (size_t k = 0; k < sizeof plan / sizeof plan[0]; k++)
        for (int i = 0; i < plan[k].n; i++) {
            char p[8] = {plan[k].kind, (char)('0' + i), '\0'};
            rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
            if (plan[k].kind == 'E') o.max_attempts = 2;
            enqueue_wait e = enqueue_sync(base, q, p, &o);
            snprintf(ids[nids++], sizeof ids[0], "%s", e.id);
        }
    mix_ctx x;
    memset(&x, 0, sizeof x);
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 4;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, mix_handler, &x, &w));
    /* finish calls: A 8, B 12, C 12, D 5, E 10 */
    ASSERT(loop_until_count(base, &x.finishes, 47, 20000));
    cb_count stopped = {0, 0};
    ASSERT_OK(rjq_worker_stop(w, count_stopped, &stopped));
    ASSERT(loop_until(base, &stopped.calls, 10000));
    ASSERT_OK(stopped.status);
    ASSERT_EQ(47, x.handled);

    rjq_stats st = get_stats(base, q);
    ASSERT_EQ(30, st.enqueued);
    ASSERT_EQ(20, st.completed);
    ASSERT_EQ(27, st.failed);
    ASSERT_EQ(17, st.retried);
    ASSERT_EQ(10, st.dead);
    ASSERT_EQ(0, st.reclaimed);
    ASSERT_EQ(0, st.replayed);
    ASSERT_EQ(0, st.ready);
    ASSERT_EQ(0, st.delayed);
    ASSERT_EQ(0, st.active);
    ASSERT_EQ(10, st.dead_depth);

    /* Replay three dead jobs (no worker runs: they stay ready), add three
     * ready and four far-delayed jobs, and let one job be held active. */
    count_wait r = replay(base, q, NULL, 3);
    ASSERT_OK(r.status);
    ASSERT_EQ(3, r.n);
    for (int i = 0; i < 3; i++) {
        char p[8] = {'H', (char)('0' + i), '\0'};
        enqueue_wait e = enqueue_sync(base, q, p, NULL);
        snprintf(ids[nids++], sizeof ids[0], "%s", e.id);
    }
    for (int i = 0; i < 4; i++) {
        rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
        o.delay_ms = 600000;
        char p[8] = {'H', 'd', (char)('0' + i), '\0'};
        enqueue_wait e = enqueue_sync(base, q, p, &o);
        snprintf(ids[nids++], sizeof ids[0], "%s", e.id);
    }
    mix_ctx y;
    memset(&y, 0, sizeof y);
    wo.concurrency = 1;
    /* The replayed D/E jobs come first; make the holder hold whatever it gets. */
    rjq_worker *w2;
    ASSERT_OK(rjq_worker_start(q, &wo, hold_handler, NULL, &w2));
    WAIT_FOR(base, held_n >= 1, 20000);
    ASSERT_EQ(1, held_n);
    st = get_stats(base, q); /* a round trip after its claim's answer */
    ASSERT_EQ(1, held_n); /* concurrency 1: nothing more is claimed */

    ASSERT_EQ(37, st.enqueued);
    ASSERT_EQ(20, st.completed);
    ASSERT_EQ(27, st.failed);
    ASSERT_EQ(17, st.retried);
    ASSERT_EQ(10, st.dead);
    ASSERT_EQ(3, st.replayed);
    ASSERT_EQ(0, st.reclaimed);
    ASSERT_EQ(5, st.ready);
    ASSERT_EQ(4, st.delayed);
    ASSERT_EQ(1, st.active);
    ASSERT_EQ(7, st.dead_depth);

    /* The depths agree with the jobs' own states ... */
    int by_state[5] = {0};
    static const char *const states[5] = {"completed", "dead", "ready", "delayed", "active"};
    ASSERT_EQ(37, nids);
    for (int i = 0; i < nids; i++) {
        info_wait info = get_info(base, q, ids[i]);
        ASSERT_OK(info.status);
        int k = 0;
        while (k < 5 && strcmp(states[k], info.state) != 0) k++;
        if (k == 5) FAIL_AT(__FILE__, __LINE__, "job %s in state %s", ids[i], info.state);
        by_state[k]++;
    }
    ASSERT_EQ(st.completed, by_state[0]);
    ASSERT_EQ(st.dead_depth, by_state[1]);
    ASSERT_EQ(st.ready, by_state[2]);
    ASSERT_EQ(st.delayed, by_state[3]);
    ASSERT_EQ(st.active, by_state[4]);
    /* ... and with the counters: every job is somewhere, every failure
     * was either retried or final. */
    ASSERT_EQ(st.enqueued, st.completed + st.dead_depth + st.ready + st.delayed + st.active);
    ASSERT_EQ(st.failed, st.retried + st.dead);

    /* ... and with the keys themselves. */
    redisContext *rc = env.rc;
    ASSERT_EQ(st.ready, server_int(rc, "LLEN t:{mix}:ready") + server_int(rc, "ZCARD t:{mix}:prio"));
    ASSERT_EQ(st.delayed, server_int(rc, "ZCARD t:{mix}:delayed"));
    ASSERT_EQ(st.active, server_active_jobs(rc, "mix"));
    ASSERT_EQ(st.dead_depth, server_int(rc, "ZCARD t:{mix}:dead"));

    /* Stop the holder (it waits for its job), then finish the job. */
    cb_count stopped2 = {0, 0};
    ASSERT_OK(rjq_worker_stop(w2, count_stopped, &stopped2));
    long fin = 0;
    ASSERT_OK(rjq_job_complete(held_jobs[0], NULL, 0, on_done_ok, &fin));
    ASSERT(loop_until_count(base, &fin, 1, 10000));
    ASSERT(loop_until(base, &stopped2.calls, 10000));
    ASSERT_EQ(1, held_n);
    st = get_stats(base, q);
    ASSERT_EQ(21, st.completed);
    ASSERT_EQ(0, st.active);
    env_stop(&env);
}

/* =========================================================================
 * Lease extension
 * ====================================================================== */

static rjq_job *long_job;

static void keep_handler(rjq_job *job, void *data) {
    (void)data;
    ASSERT(long_job == NULL);
    long_job = job;
}

/* A job running four times its lease is never reclaimed while its worker
 * lives: the worker extends the lease every lease/3, even while sweeps run
 * every 100 ms. Margins: a sweep would need the loop stalled for 2/3 of a
 * lease (400 ms) to see an expired lease. */
TEST(running_job_keeps_its_lease_by_extension) {
    test_env env;
    env_start(&env, "ext");
    struct event_base *base = env.base;
    rjq_queue *q = env.q;
    long_job = NULL;
    enqueue_sync(base, q, "long", NULL);
    rjq_worker_options wo = {.size = sizeof(rjq_worker_options), .concurrency = 1, .lease_ms = 600, .reclaim_ms = 100};
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, keep_handler, NULL, &w));
    WAIT_FOR(base, long_job != NULL, 20000);
    /* Six times (four leases at least): once the server's clock is past
     * the lease's end as it was, a sweep takes nothing back (it was
     * extended meanwhile). */
    for (int i = 0; i < 6; i++) {
        long long ends = server_int(env.rc, "ZSCORE t:{ext}:active %s", rjq_job_get_id(long_job));
        ASSERT(ends > 0);
        ASSERT(loop_until_server_ms(base, env.rc, ends, 10000));
        count_wait cw = {0};
        ASSERT_OK(rjq_queue_reclaim(q, on_count, &cw));
        ASSERT(loop_until(base, &cw.done, 10000));
        ASSERT_OK(cw.status);
        ASSERT_EQ(0, cw.n);
    }
    long finished = 0;
    ASSERT_OK(rjq_job_complete(long_job, "ok", 2, on_done_ok, &finished));
    ASSERT(loop_until_count(base, &finished, 1, 10000));
    rjq_stats st = get_stats(base, q);
    ASSERT_EQ(1, st.completed);
    ASSERT_EQ(0, st.reclaimed);
    env_stop(&env);
}

/* An empty result is not stored (complete.lua: a field per job cost every
 * completion an insert into a hash as large as the retention). The job
 * still reads back completed with an empty result, by rjq_queue_get_job and
 * by an await of the finished job; a result with bytes is stored. */
static long er_done;
static int er_await_calls, er_await_status;
static size_t er_await_len;

static void er_handler(rjq_job *job, void *data) {
    (void)data;
    if (strcmp(rjq_job_get_id(job), "full") == 0) ASSERT_OK(rjq_job_complete(job, "res", 3, NULL, NULL));
    else ASSERT_OK(rjq_job_complete(job, "", 0, NULL, NULL));
    er_done++;
}

static void er_await_cb(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)c, (void)data;
    er_await_calls++;
    er_await_status = status;
    er_await_len = o ? o->result_len : 99;
}

TEST(empty_result_is_not_stored_and_reads_back_empty) {
    test_env env;
    env_start(&env, "empty");
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "empty";
    enqueue_sync(env.base, env.q, "x", &o);
    o.id = "full";
    enqueue_sync(env.base, env.q, "y", &o);
    rjq_worker *w;
    rjq_worker_options wo = quiet_worker_options(2);
    ASSERT_OK(rjq_worker_start(env.q, &wo, er_handler, NULL, &w));
    ASSERT(loop_until_count(env.base, &er_done, 2, 5000));
    WAIT_FOR(env.base, get_stats(env.base, env.q).completed >= 2, 20000);
    ASSERT_EQ(2, get_stats(env.base, env.q).completed);

    ASSERT_EQ(0, server_int(env.rc, "HEXISTS t:{empty}:result empty"));
    redisReply *r = server_cmd(env.rc, "HGET t:{empty}:result full");
    ASSERT_STREQ("res", r->str);
    freeReplyObject(r);

    info_wait e = get_info(env.base, env.q, "empty");
    ASSERT_OK(e.status);
    ASSERT_STREQ("completed", e.state);
    ASSERT(e.has_result);
    ASSERT_EQ(0, (long)e.result_len);
    info_wait f = get_info(env.base, env.q, "full");
    ASSERT(f.has_result);
    ASSERT_STREQ("res", f.result);

    ASSERT_OK(rjq_queue_await(env.q, "empty", NULL, er_await_cb, NULL, NULL));
    ASSERT(loop_until(env.base, &er_await_calls, 5000));
    ASSERT_OK(er_await_status);
    ASSERT_EQ(0, (long)er_await_len);
    env_stop(&env);
}

/* ---- a job's times -------------------------------------------------------- */

/* Jobs "t-ok*" complete, others fail (t-bad has one attempt: dead); the
 * token each attempt ran under is kept. */
static long times_done;
static char times_token[3][128];

static void times_handler(rjq_job *job, void *data) {
    (void)data;
    const char *id = rjq_job_get_id(job);
    int k = strcmp(id, "t-ok") == 0 ? 0 : strcmp(id, "t-bad") == 0 ? 1 : 2;
    snprintf(times_token[k], sizeof times_token[k], "%s", rjq_job_get_token(job));
    if (k == 1) ASSERT_OK(rjq_job_fail(job, "no", 0, 0, on_done_ok, &times_done));
    else ASSERT_OK(rjq_job_complete(job, "r", 1, on_done_ok, &times_done));
}

static int cancel_done, cancel_status;
static void on_cancelled(rjq_client *c, int status, const char *state, void *data) {
    (void)c, (void)state, (void)data;
    cancel_done++;
    cancel_status = status;
}

static void cancel_wait_sync(struct event_base *base, rjq_queue *q, const char *id) {
    cancel_done = 0;
    ASSERT_OK(rjq_queue_cancel(q, id, on_cancelled, NULL));
    ASSERT(loop_until(base, &cancel_done, 10000));
    ASSERT_OK(cancel_status);
}

/* A finished job's times: set, in order, within [lo, hi] (server ms). */
static void assert_times(const info_wait *i, long long lo, long long hi) {
    ASSERT(lo <= i->enqueued_ms);
    ASSERT(i->enqueued_ms <= i->started_ms);
    ASSERT(i->started_ms <= i->ended_ms);
    ASSERT(i->ended_ms <= hi);
}

/* rjq_job_info's times are the server's: when the job was enqueued, its
 * last attempt started and it ended (completed, dead, cancelled), for
 * jobs claimed and pushed; none before they happen. A dead job keeps
 * the token of its last attempt, as a completed one does (whose worker
 * ran it). */
TEST(job_info_has_server_times_of_enqueue_last_start_and_end) {
    test_env env;
    env_start(&env, "times");
    struct event_base *base = env.base;
    rjq_queue *q = env.q;
    long long t0 = server_now_ms(env.rc);
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "t-ok";
    enqueue_sync(base, q, "p", &o);
    o.id = "t-bad";
    o.max_attempts = 1;
    enqueue_sync(base, q, "p", &o);
    rjq_job_options later = RJQ_JOB_OPTIONS_INIT;
    later.id = "t-cancel";
    later.delay_ms = 600000;
    enqueue_sync(base, q, "p", &later);

    info_wait i = get_info(base, q, "t-ok"); /* waiting: enqueued only */
    ASSERT_OK(i.status);
    ASSERT(t0 <= i.enqueued_ms && i.enqueued_ms <= server_now_ms(env.rc));
    ASSERT_EQ(0, i.started_ms);
    ASSERT_EQ(0, i.ended_ms);
    i = get_info(base, q, "t-cancel");
    ASSERT(t0 <= i.enqueued_ms);
    cancel_wait_sync(base, q, "t-cancel");
    i = get_info(base, q, "t-cancel"); /* cancelled without a run: no start */
    ASSERT_STREQ("cancelled", i.state);
    ASSERT_EQ(0, i.started_ms);
    ASSERT(i.enqueued_ms <= i.ended_ms && i.ended_ms <= server_now_ms(env.rc));

    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, NULL, times_handler, NULL, &w));
    ASSERT(loop_until_count(base, &times_done, 2, 10000)); /* claimed */
    get_stats(base, q); /* (the next job is pushed to it once it waits idle) */
    o.id = "t-ok-pushed";
    o.max_attempts = 0;
    enqueue_sync(base, q, "p", &o);
    ASSERT(loop_until_count(base, &times_done, 3, 10000));
    long long t1 = server_now_ms(env.rc);

    i = get_info(base, q, "t-ok");
    ASSERT_STREQ("completed", i.state);
    assert_times(&i, t0, t1);
    ASSERT_STREQ(times_token[0], i.token);
    i = get_info(base, q, "t-bad");
    ASSERT_STREQ("dead", i.state);
    assert_times(&i, t0, t1);
    ASSERT_STREQ(times_token[1], i.token);
    i = get_info(base, q, "t-ok-pushed");
    ASSERT_STREQ("completed", i.state);
    assert_times(&i, t0, t1);
    ASSERT_STREQ(times_token[2], i.token);

    /* replayed: its enqueue time stays, no start or end until it runs again */
    cb_count stopped = {0};
    ASSERT_OK(rjq_worker_stop(w, count_stopped, &stopped)); /* (runs it no more) */
    ASSERT(loop_until(base, &stopped.calls, 10000));
    info_wait dead = get_info(base, q, "t-bad");
    ASSERT_EQ(1, replay(base, q, "t-bad", 0).n);
    i = get_info(base, q, "t-bad");
    ASSERT_STREQ("ready", i.state);
    ASSERT_EQ(dead.enqueued_ms, i.enqueued_ms);
    ASSERT_EQ(0, i.started_ms);
    ASSERT_EQ(0, i.ended_ms);
    env_stop(&env);
}

/* ---- state values of another shape: the long way ----------------------- */

/* The claim reads a ready job's state with one find, and the completion a
 * claimed job's with one compare and one find (start_jobs in lib.lua,
 * complete.lua), where the value has the shape the scripts write; one of
 * another shape (an older rjq's, without times) takes the long way. Both
 * ways must write the same values: attempts counted from the state, the
 * enqueue time kept, the start and the end added where known, the token
 * still fencing the completion. */
static const char *const sv_ids[3] = {"sv-now", "sv-old", "sv-oldclaim"};

typedef struct sv_ctx {
    redisContext *rc;
    long completed;
    char tok[3][96];
} sv_ctx;

static void sv_handler(rjq_job *job, void *data) {
    sv_ctx *x = data;
    for (int i = 0; i < 3; i++)
        if (strcmp(rjq_job_get_id(job), sv_ids[i]) == 0)
            snprintf(x->tok[i], sizeof x->tok[i], "%s", rjq_job_get_token(job));
    if (strcmp(rjq_job_get_id(job), "sv-oldclaim") == 0) { /* its claim's value as an older rjq wrote it */
        char v[160];
        snprintf(v, sizeof v, "active %d %s", rjq_job_get_attempt(job), rjq_job_get_token(job));
        freeReplyObject(server_cmd(x->rc, "HSET t:{sv}:state sv-oldclaim %s", v));
    }
    ASSERT_OK(rjq_job_complete(job, "", 0, on_done_ok, &x->completed));
}

/* The state of job id of queue sv, in buf. */
static const char *sv_state(redisContext *rc, const char *id, char *buf, size_t cap) {
    redisReply *r = server_cmd(rc, "HGET t:{sv}:state %s", id);
    ASSERT(r->type == REDIS_REPLY_STRING);
    snprintf(buf, cap, "%s", r->str);
    freeReplyObject(r);
    return buf;
}

TEST(states_of_another_shape_are_claimed_and_completed_as_the_usual_ones) {
    test_env env;
    env_start(&env, "sv");
    for (int i = 0; i < 3; i++) {
        rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
        o.id = sv_ids[i];
        enqueue_sync(env.base, env.q, "p", &o);
    }
    char v[256], want[256];
    long long q = 0;
    ASSERT_EQ(1, sscanf(sv_state(env.rc, "sv-now", v, sizeof v), "ready 0 @%lld,,", &q));
    ASSERT(q > 0);
    /* an older rjq's ready job, run twice before: no times */
    freeReplyObject(server_cmd(env.rc, "HSET t:{sv}:state sv-old %s", "ready 2"));

    sv_ctx x = {.rc = env.rc};
    rjq_worker_options wo = quiet_worker_options(3);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(env.q, &wo, sv_handler, &x, &w));
    ASSERT(loop_until_count(env.base, &x.completed, 3, 20000));

    /* the usual: its enqueue time kept, its start and end added */
    long long s = 0, e = 0;
    snprintf(want, sizeof want, "completed 1 %s @%lld,%%lld,%%lld", x.tok[0], q);
    ASSERT_EQ(2, sscanf(sv_state(env.rc, "sv-now", v, sizeof v), want, &s, &e));
    ASSERT(q <= s && s <= e);
    snprintf(want, sizeof want, "completed 1 %s @%lld,%lld,%lld", x.tok[0], q, s, e);
    ASSERT_STREQ(want, v);
    /* the older value: its third attempt, no enqueue time, a start and an end */
    snprintf(want, sizeof want, "completed 3 %s @,%%lld,%%lld", x.tok[1]);
    ASSERT_EQ(2, sscanf(sv_state(env.rc, "sv-old", v, sizeof v), want, &s, &e));
    ASSERT(0 < s && s <= e);
    snprintf(want, sizeof want, "completed 3 %s @,%lld,%lld", x.tok[1], s, e);
    ASSERT_STREQ(want, v);
    /* the older claim's value (no times): completed by its token, its end added */
    snprintf(want, sizeof want, "completed 1 %s @,,%%lld", x.tok[2]);
    ASSERT_EQ(1, sscanf(sv_state(env.rc, "sv-oldclaim", v, sizeof v), want, &e));
    ASSERT(e > 0);
    snprintf(want, sizeof want, "completed 1 %s @,,%lld", x.tok[2], e);
    ASSERT_STREQ(want, v);

    rjq_stats st = get_stats(env.base, env.q);
    ASSERT_EQ(3, st.completed);
    ASSERT_EQ(0, st.ready + st.active);
    cb_count stopped = {0};
    ASSERT_OK(rjq_worker_stop(w, count_stopped, &stopped));
    ASSERT(loop_until(env.base, &stopped.calls, 10000));
    env_stop(&env);
}

/* ---- a run of equal states: made once, per job right ------------------- */

/* The claim and the completion make a job's new state value once for a run
 * of jobs whose states are the same string (one enqueue call's: start_jobs
 * in lib.lua, complete.lua's loop). Jobs of another attempt or enqueue time
 * between them, or after them, must still get their own values: attempts
 * counted from their own state, their own enqueue time kept. */
static const char *const rn_ids[5] = {"rn-a1", "rn-a2", "rn-b1", "rn-a3", "rn-c1"};
static const char *const rn_ready[5] = {"ready 0 @1000,,", "ready 0 @1000,,", "ready 1 @1000,,",
                                        "ready 0 @1000,,", "ready 0 @2000,,"};
static const int rn_attempt[5] = {1, 1, 2, 1, 1};
static const char *const rn_enqueued[5] = {"1000", "1000", "1000", "1000", "2000"};

typedef struct rn_ctx {
    long completed;
    int attempt[5];
    char tok[5][96];
} rn_ctx;

static void rn_handler(rjq_job *job, void *data) {
    rn_ctx *x = data;
    for (int i = 0; i < 5; i++)
        if (strcmp(rjq_job_get_id(job), rn_ids[i]) == 0) {
            snprintf(x->tok[i], sizeof x->tok[i], "%s", rjq_job_get_token(job));
            x->attempt[i] = rjq_job_get_attempt(job);
        }
    ASSERT_OK(rjq_job_complete(job, "", 0, on_done_ok, &x->completed));
}

TEST(a_run_of_equal_states_claimed_and_completed_together_keeps_each_jobs_own_values) {
    test_env env;
    env_start(&env, "rn");
    for (int i = 0; i < 5; i++) {
        rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
        o.id = rn_ids[i];
        enqueue_sync(env.base, env.q, "p", &o);
        /* the states as one enqueue call (and a retry) would leave them */
        freeReplyObject(server_cmd(env.rc, "HSET t:{rn}:state %s %s", rn_ids[i], rn_ready[i]));
    }
    rn_ctx x = {0};
    rjq_worker_options wo = quiet_worker_options(5); /* (one claim takes them all) */
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(env.q, &wo, rn_handler, &x, &w));
    ASSERT(loop_until_count(env.base, &x.completed, 5, 20000));
    for (int i = 0; i < 5; i++) {
        ASSERT_EQ(rn_attempt[i], x.attempt[i]);
        char want[256];
        long long s = 0, e = 0;
        snprintf(want, sizeof want, "completed %d %s @%s,%%lld,%%lld", rn_attempt[i], x.tok[i], rn_enqueued[i]);
        redisReply *r = server_cmd(env.rc, "HGET t:{rn}:state %s", rn_ids[i]);
        ASSERT(r->type == REDIS_REPLY_STRING);
        ASSERT_EQ(2, sscanf(r->str, want, &s, &e));
        ASSERT(0 < s && s <= e);
        snprintf(want, sizeof want, "completed %d %s @%s,%lld,%lld", rn_attempt[i], x.tok[i], rn_enqueued[i], s, e);
        ASSERT_STREQ(want, r->str);
        freeReplyObject(r);
    }
    rjq_stats st = get_stats(env.base, env.q);
    ASSERT_EQ(5, st.completed);
    ASSERT_EQ(0, st.ready + st.active);
    cb_count stopped = {0};
    ASSERT_OK(rjq_worker_stop(w, count_stopped, &stopped));
    ASSERT(loop_until(env.base, &stopped.calls, 10000));
    env_stop(&env);
}
