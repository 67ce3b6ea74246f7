/*
 * Attempt history (issue 38): an attempt that fails or is lost is recorded
 * (start, end, outcome, token) by the fail and reclaim scripts; a job
 * failed twice then completed reads back two failed attempts, its third
 * being its own fields; the record goes with the job.
 */
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

typedef struct hist_wait {
    int done, status;
    size_t n;
    rjq_attempt a[RJQ_ATTEMPTS_KEPT];
    char outcome[RJQ_ATTEMPTS_KEPT][16], token[RJQ_ATTEMPTS_KEPT][128];
    char state[16], last_token[128];
    long long started_ms, ended_ms;
} hist_wait;

static void on_info(rjq_client *c, int status, const rjq_job_info *ji, void *data) {
    hist_wait *w = data;
    (void)c;
    w->done++;
    w->status = status;
    if (status != RJQ_OK) return;
    w->n = ji->history_len;
    for (size_t i = 0; i < ji->history_len; i++) {
        const rjq_attempt *e = rjq_attempt_get(ji->history, i);
        w->a[i] = *e;
        snprintf(w->outcome[i], sizeof w->outcome[i], "%s", e->outcome);
        snprintf(w->token[i], sizeof w->token[i], "%s", e->token ? e->token : "");
    }
    snprintf(w->state, sizeof w->state, "%s", ji->state);
    snprintf(w->last_token, sizeof w->last_token, "%s", ji->token ? ji->token : "");
    w->started_ms = ji->started_ms;
    w->ended_ms = ji->ended_ms;
}

static hist_wait history_of(test_env *e, const char *id) {
    hist_wait w;
    memset(&w, 0, sizeof w);
    ASSERT_OK(rjq_queue_get_job(e->q, id, on_info, &w));
    ASSERT(loop_until(e->base, &w.done, 5000));
    return w;
}

TEST(a_job_failed_twice_then_completed_has_two_failed_attempts_and_its_own) {
    test_env e;
    env_start(&e, "ah");
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "j";
    ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    last_held held = {0};
    ASSERT_OK(rjq_worker_start(e.q, &wo, hold_last_handler, &held, &w));
    char tokens[2][128];
    for (int k = 0; k < 2; k++) {
        ASSERT(loop_until_count(e.base, &held.started, k + 1, 5000));
        hist_wait now = history_of(&e, "j");
        snprintf(tokens[k], sizeof tokens[k], "%s", now.last_token);
        long fails = 0;
        ASSERT_OK(rjq_job_fail(held.job, "boom", RJQ_FAIL_RETRY, 0, on_done_ok, &fails));
        ASSERT(loop_until_count(e.base, &fails, 1, 5000));
    }
    ASSERT(loop_until_count(e.base, &held.started, 3, 5000));
    long done = 0;
    ASSERT_OK(rjq_job_complete(held.job, "", 0, on_done_ok, &done));
    ASSERT(loop_until_count(e.base, &done, 1, 5000));
    hist_wait h = history_of(&e, "j");
    ASSERT_OK(h.status);
    ASSERT_STREQ("completed", h.state);
    ASSERT_EQ(2, (long)h.n);
    for (int k = 0; k < 2; k++) {
        ASSERT_STREQ("failed", h.outcome[k]);
        ASSERT_STREQ(tokens[k], h.token[k]);
        ASSERT(h.a[k].started_ms > 0 && h.a[k].started_ms <= h.a[k].ended_ms);
    }
    ASSERT(h.a[0].ended_ms <= h.a[1].started_ms);
    ASSERT(h.a[1].ended_ms <= h.started_ms && h.started_ms <= h.ended_ms);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* A lost lease (the reclaim sweep) is recorded as "lost"; at most
 * RJQ_ATTEMPTS_KEPT are kept (the newest); deleting the job deletes it. */
TEST(a_lost_attempt_is_recorded_and_the_history_is_capped_and_deleted_with_the_job) {
    test_env e;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    env_start_queue(&e, "al", &qo);
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "j";
    o.max_attempts = 1;
    ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
    /* 25 older records, as if it had run that often (the cap keeps 20) */
    char buf[4096] = "";
    for (int i = 0; i < 25; i++) {
        char rec[64];
        snprintf(rec, sizeof rec, "%s%d %d failed c.%d", i ? ";" : "", 1000 + i, 2000 + i, i);
        strcat(buf, rec);
    }
    ASSERT_EQ(1, server_int(e.rc, "HSET t:{al}:attempts j %s", buf));
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    static last_held held; /* (static: the job it holds is never finished) */
    held = (last_held){0};
    ASSERT_OK(rjq_worker_start(e.q, &wo, hold_last_handler, &held, &w));
    ASSERT(loop_until_count(e.base, &held.started, 1, 5000));
    /* its lease ran out (as if its worker hung): the sweep takes it back */
    ASSERT_EQ(0, server_int(e.rc, "ZADD t:{al}:active XX 1 j"));
    count_wait c = {0};
    ASSERT_OK(rjq_queue_reclaim(e.q, on_count, &c));
    ASSERT(loop_until(e.base, &c.done, 5000));
    ASSERT_EQ(1, c.n);
    hist_wait h = history_of(&e, "j");
    ASSERT_OK(h.status);
    ASSERT_STREQ("dead", h.state); /* (max_attempts 1) */
    ASSERT_EQ(20, (long)h.n);      /* the newest 20 of 26 */
    ASSERT_EQ(1006, h.a[0].started_ms);
    ASSERT_STREQ("lost", h.outcome[19]);
    ASSERT(h.a[19].started_ms > 0 && h.a[19].started_ms <= h.a[19].ended_ms);
    ASSERT(strchr(h.token[19], '.') != NULL);
    /* deleted with the job */
    c = (count_wait){0};
    ASSERT_OK(rjq_queue_delete(e.q, "j", on_count, &c));
    ASSERT(loop_until(e.base, &c.done, 5000));
    ASSERT_OK(c.status);
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{al}:attempts j"));
    (void)w; /* (freed with the client: its job was taken back) */
    env_stop(&e);
}
