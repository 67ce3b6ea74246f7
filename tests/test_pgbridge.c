/*
 * The PostgreSQL outbox bridge (rjq-pg-bridge of this build) against a
 * private PostgreSQL and a private redis-server: rows move into rjq once,
 * outcomes come back, through bridge crashes, Redis losing its data,
 * PostgreSQL restarts and bad rows. Workers run in this process; the
 * bridges are child processes. Every bridge runs with a one-hour safety
 * poll, so rows move because their notifications wake it.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "harness.h"
#include "pgserver.h"
#include "proxy.h"
#include "server.h"
#include "waits.h"

#define BRIDGE RJQ_BUILD_DIR "/rjq-pg-bridge"
#define MAX_ROWS 10001

/* ---- workers in this process -------------------------------------------------------- */

typedef struct workers {
    rjq_client *c[3];
    rjq_worker *w[3];
    int n;
    long runs[MAX_ROWS]; /* starts per row id */
    long total;
    long sleep_us;       /* work per job */
    int fail_pattern;    /* payloads starting "fail" are failed fatally */
    int hold;            /* jobs are kept in held[] (the test ends them) */
    rjq_job *held[MAX_ROWS];
    long nheld;
    long order[MAX_ROWS];/* row ids in start order */
    long started;
} workers;

/* A private PostgreSQL with the table, a private redis-server with a
 * client and the queue "jobs", and (not started) workers. Static: the
 * workers' arrays are large. */
static struct {
    pg_server p;
    test_env e;
    workers ws;
} F;

static long row_of(const rjq_job *job) {
    const char *id = rjq_job_id(job);
    ASSERT(strncmp(id, "pg-", 3) == 0);
    long row = atol(id + 3);
    ASSERT(row > 0 && row < MAX_ROWS);
    return row;
}

static void handler(rjq_job *job, void *data) {
    workers *ws = data;
    long row = row_of(job);
    ws->runs[row]++;
    ws->total++;
    ws->order[ws->started++ % MAX_ROWS] = row;
    size_t len;
    const char *p = rjq_job_payload(job, &len);
    if (ws->hold) {
        ws->held[ws->nheld++] = job;
        return;
    }
    if (ws->sleep_us) usleep((useconds_t)ws->sleep_us);
    if (ws->fail_pattern && len >= 5 && memcmp(p, "retry", 5) == 0 && ws->runs[row] == 1) {
        ASSERT_OK(rjq_job_fail(job, "first try failed", RJQ_FAIL_RETRY, 0, on_done_ok, NULL));
        return;
    }
    if (ws->fail_pattern && len >= 4 && memcmp(p, "fail", 4) == 0) {
        ASSERT_OK(rjq_job_fail(job, "it failed on purpose", RJQ_FAIL_FATAL, 0, on_done_ok, NULL));
        return;
    }
    char result[256];
    int n = snprintf(result, sizeof result, "r:%.*s", (int)(len < 200 ? len : 200), p);
    ASSERT_OK(rjq_job_complete(job, result, (size_t)n, on_done_ok, NULL));
}

static void workers_start(const char *queue, int n, int concurrency) {
    workers *ws = &F.ws;
    ws->n = n;
    for (int i = 0; i < n; i++) {
        ws->c[i] = client_for(F.e.base, &F.e.s);
        rjq_worker_options o = quiet_worker_options(concurrency);
        o.poll_ms = 200;
        ASSERT_OK(rjq_worker_start(queue_for(ws->c[i], queue), &o, handler, ws, &ws->w[i]));
    }
}

static void workers_free(workers *ws) {
    for (int i = 0; i < ws->n; i++) rjq_client_free(ws->c[i]);
    ws->n = 0;
}

/* ---- the bridge as a child process ---------------------------------------------- */

/* Start a bridge; extra: more arguments (NULL-terminated, may be NULL). */
static pid_t bridge_spawn(const char *const *extra) {
    const char *argv[32];
    int n = 0;
    argv[n++] = BRIDGE;
    argv[n++] = "--pg";
    argv[n++] = F.p.conninfo;
    argv[n++] = "-u";
    argv[n++] = F.e.s.url;
    argv[n++] = "-p";
    argv[n++] = "t";
    argv[n++] = "--poll-ms";
    argv[n++] = "3600000";
    argv[n++] = "--report-ms";
    argv[n++] = "1000";
    for (int i = 0; extra && extra[i] && n < 31; i++) argv[n++] = extra[i];
    argv[n] = NULL;
    pid_t pid = fork_child();
    if (pid == 0) {
        execv(BRIDGE, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* SIGTERM, and the bridge must exit 0 (under ASan: without a report). */
static void bridge_stop(pid_t pid) {
    kill(pid, SIGTERM);
    int st = reap(pid, 20000);
    ASSERT(WIFEXITED(st));
    ASSERT_EQ(0, WEXITSTATUS(st));
}

/* Run the bridge binary to the end (e.g. --init); its exit status. */
static int bridge_run(const char *const *args) {
    const char *argv[16];
    int n = 0;
    argv[n++] = BRIDGE;
    for (int i = 0; args[i] && n < 15; i++) argv[n++] = args[i];
    argv[n] = NULL;
    pid_t pid = fork_child();
    if (pid == 0) {
        execv(BRIDGE, (char *const *)argv);
        _exit(127);
    }
    int st = reap(pid, 20000);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void init_table(pg_server *p) {
    const char *args[] = {"--pg", p->conninfo, "--init", NULL};
    ASSERT_EQ(0, bridge_run(args));
}

/* ---- the set-up every test shares ------------------------------------------------------ */

static void setup(void) {
    memset(&F.ws, 0, sizeof F.ws);
    pg_start(&F.p);
    init_table(&F.p);
    env_start(&F.e, "jobs");
}

static void teardown(void) {
    workers_free(&F.ws);
    env_stop(&F.e);
    pg_stop(&F.p);
}

/* ---- waiting on PostgreSQL while the loop runs ------------------------------------------ */

/* Run the loop until the query's number is `want` (or fail after timeout). */
static void wait_pg(const char *sql, long long want, long timeout_ms) {
    double end = mono_ms() + (double)timeout_ms;
    long long got = -1;
    while (mono_ms() < end) {
        if ((got = pg_int(&F.p, sql)) == want) return;
        loop_for(F.e.base, 50);
    }
    fprintf(stderr, "rows: %s\n", pg_text(&F.p, "SELECT string_agg(s, ' ') FROM (SELECT status || '/' || attempts || '=' || count(*) AS s FROM rjq_jobs GROUP BY status, attempts) x"));
    FAIL_AT(__FILE__, __LINE__, "%s: expected %lld, got %lld", sql, want, got);
}

static void insert_rows(const char *queue, long first, long n, const char *prio) {
    char sql[512];
    snprintf(sql, sizeof sql,
             "INSERT INTO rjq_jobs (queue, payload, priority) "
             "SELECT '%s', convert_to('p' || g, 'UTF8'), %s FROM generate_series(%ld, %ld) g ORDER BY g",
             queue, prio, first, first + n - 1);
    pg_exec(&F.p, sql);
}

/* Every row completed once, with the worker's result of its payload. */
static void assert_all_completed_once(long rows) {
    ASSERT_EQ(rows, pg_int(&F.p, "SELECT count(*) FROM rjq_jobs WHERE status = 'completed' AND "
                              "result = convert_to('r:', 'UTF8') || payload AND attempts = 1"));
    for (long i = 1; i <= rows; i++)
        if (F.ws.runs[i] != 1) FAIL_AT(__FILE__, __LINE__, "row %ld ran %ld times", i, F.ws.runs[i]);
}

/* Run the loop until the workers started n jobs (or fail). */
static void wait_runs(long n) {
    double end = mono_ms() + 30000;
    while (F.ws.total < n && mono_ms() < end) loop_for(F.e.base, 10);
    ASSERT(F.ws.total >= n);
}

/* A bridge moves rows 1..n of "jobs" and stops: nobody follows them now. */
static void move_rows_then_stop_bridge(long n) {
    pid_t b = bridge_spawn(NULL);
    insert_rows("jobs", 1, n, "0");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'migrated'", n, 30000);
    bridge_stop(b);
}

/* ---- the tests --------------------------------------------------------------------- */

TEST(ten_thousand_rows_two_bridges_three_workers_each_job_runs_once) {
    setup();
    workers_start("jobs", 3, 8);
    const char *extra[] = {"--batch", "200", NULL};
    pid_t b1 = bridge_spawn(extra), b2 = bridge_spawn(extra);
    for (long t = 0; t < 100; t++) { /* 100 transactions of 100 rows */
        insert_rows("jobs", t * 100 + 1, 100, "g % 7");
        loop_for(F.e.base, 5);
    }
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status <> 'completed'", 0, 90000);
    assert_all_completed_once(10000);
    ASSERT_EQ(10000, get_stats(F.e.base, F.e.q).enqueued); /* no id enqueued twice */
    ASSERT_EQ(10000, F.ws.total);
    bridge_stop(b1);
    bridge_stop(b2);
    teardown();
}

TEST(rows_of_one_batch_start_by_priority_then_in_insert_order) {
    setup();
    count_wait cw = {0};
    ASSERT_OK(rjq_queue_pause(F.e.q, on_count, &cw));
    ASSERT(loop_until(F.e.base, &cw.done, 5000));
    pid_t b = bridge_spawn(NULL);
    /* one transaction, priorities -5..5 in a scrambled order */
    insert_rows("jobs", 1, 300, "(g * 7) % 11 - 5");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'migrated'", 300, 30000);
    workers_start("jobs", 1, 1);
    cw.done = 0;
    ASSERT_OK(rjq_queue_resume(F.e.q, on_count, &cw));
    ASSERT(loop_until(F.e.base, &cw.done, 5000));
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status <> 'completed'", 0, 30000);
    ASSERT_EQ(300, F.ws.started);
    for (long i = 1; i < F.ws.started; i++) {
        long a = F.ws.order[i - 1], c = F.ws.order[i];
        long pa = (a * 7) % 11 - 5, pc = (c * 7) % 11 - 5; /* row id g = payload g */
        if (pa < pc || (pa == pc && a > c))
            FAIL_AT(__FILE__, __LINE__, "row %ld (priority %ld) started before row %ld (priority %ld)",
                    a, pa, c, pc);
    }
    bridge_stop(b);
    teardown();
}

TEST(bridge_killed_between_enqueue_and_marking_loses_and_duplicates_nothing) {
    setup();
    /* the bridge's "migrated" update waits on an advisory lock the test
     * holds: the jobs are in Redis, the rows still queued */
    pg_exec(&F.p, "CREATE FUNCTION hold() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "PERFORM pg_advisory_lock_shared(4242); RETURN NEW; END $$;"
                "CREATE TRIGGER hold BEFORE UPDATE ON rjq_jobs FOR EACH ROW "
                "WHEN (NEW.status = 'migrated') EXECUTE FUNCTION hold();"
                "SELECT pg_advisory_lock(4242)");
    pid_t b1 = bridge_spawn(NULL);
    insert_rows("jobs", 1, 500, "0");
    double end = mono_ms() + 30000;
    while (get_stats(F.e.base, F.e.q).enqueued < 500 && mono_ms() < end) loop_for(F.e.base, 50);
    ASSERT_EQ(500, get_stats(F.e.base, F.e.q).enqueued);
    wait_pg("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND NOT granted",
            1, 10000);
    kill(b1, SIGKILL);
    reap(b1, 10000);
    /* its transaction dies with its backend */
    pg_exec(&F.p, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'");
    pg_exec(&F.p, "SELECT pg_advisory_unlock(4242); DROP TRIGGER hold ON rjq_jobs");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'queued'", 500, 10000);
    /* the next bridge sends the same ids: Redis has them, nothing doubles */
    workers_start("jobs", 2, 8);
    pid_t b2 = bridge_spawn(NULL);
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status <> 'completed'", 0, 30000);
    assert_all_completed_once(500);
    ASSERT_EQ(500, get_stats(F.e.base, F.e.q).enqueued);
    bridge_stop(b2);
    teardown();
}

TEST(rows_whose_jobs_redis_lost_are_moved_again_and_complete) {
    setup();
    pid_t b = bridge_spawn(NULL);
    insert_rows("jobs", 1, 300, "0");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'migrated'", 300, 30000);
    ASSERT_EQ(300, get_stats(F.e.base, F.e.q).ready);
    server_restart(&F.e.s, NULL); /* no persistence: every job is gone */
    redisFree(F.e.rc);
    F.e.rc = server_connect(&F.e.s);
    workers_start("jobs", 2, 8);
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status <> 'completed'", 0, 60000);
    assert_all_completed_once(300);
    bridge_stop(b);
    teardown();
}

TEST(postgres_restarted_mid_run_loses_nothing) {
    setup();
    F.ws.sleep_us = 2000; /* 2 ms a job, one at a time: the restart falls mid-run */
    workers_start("jobs", 1, 1);
    pid_t b = bridge_spawn(NULL);
    for (long t = 0; t < 10; t++) insert_rows("jobs", t * 100 + 1, 100, "0");
    wait_runs(200);
    pg_halt(&F.p);
    long before = F.ws.total;
    loop_for(F.e.base, 1500); /* jobs end while PostgreSQL is away */
    ASSERT(F.ws.total > before);
    ASSERT(F.ws.total < 1000);
    pg_resume(&F.p);
    insert_rows("jobs", 1001, 100, "0"); /* and rows come after it */
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status <> 'completed'", 0, 60000);
    assert_all_completed_once(1100);
    bridge_stop(b);
    teardown();
}

TEST(bad_rows_fail_with_a_clear_error_and_the_others_go_on) {
    setup();
    workers_start("jobs", 1, 4);
    const char *extra[] = {"--max-payload", "1000", NULL};
    pid_t b = bridge_spawn(extra);
    pg_exec(&F.p, "BEGIN;"
                "INSERT INTO rjq_jobs (queue, payload) SELECT 'jobs', convert_to('p' || g, 'UTF8') "
                "  FROM generate_series(1, 10) g ORDER BY g;"
                "INSERT INTO rjq_jobs (queue, payload) VALUES ('jobs', convert_to(repeat('x', 1001), 'UTF8'));"
                "INSERT INTO rjq_jobs (queue, payload) VALUES ('no such{queue}', 'x');"
                "INSERT INTO rjq_jobs (queue, payload) VALUES ('', 'x');"
                "INSERT INTO rjq_jobs (queue, payload, max_attempts) VALUES ('jobs', 'x', -1);"
                "INSERT INTO rjq_jobs (queue, payload, priority) VALUES ('jobs', 'x', 2000000);"
                "INSERT INTO rjq_jobs (queue, payload, run_at) VALUES ('jobs', 'x', 'infinity');"
                "INSERT INTO rjq_jobs (queue, payload, run_at) VALUES ('jobs', 'p-inf', '-infinity');"
                "INSERT INTO rjq_jobs (queue, payload) SELECT 'jobs', convert_to('q' || g, 'UTF8') "
                "  FROM generate_series(1, 10) g ORDER BY g;"
                "COMMIT");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status NOT IN ('completed', 'failed')", 0, 30000);
    ASSERT_EQ(21, pg_int(&F.p, "SELECT count(*) FROM rjq_jobs WHERE status = 'completed'"));
    ASSERT_STREQ("payload of 1001 bytes is over the limit of 1000 bytes",
                 pg_text(&F.p, "SELECT error FROM rjq_jobs WHERE id = 11 AND status = 'failed'"));
    ASSERT(strstr(pg_text(&F.p, "SELECT error FROM rjq_jobs WHERE id = 12 AND status = 'failed'"),
                  "queue name \"no such{queue}\" is not valid for rjq"));
    ASSERT(strstr(pg_text(&F.p, "SELECT error FROM rjq_jobs WHERE id = 13 AND status = 'failed'"),
                  "queue name \"\" is not valid for rjq"));
    ASSERT_STREQ("max_attempts -1 is below 1",
                 pg_text(&F.p, "SELECT error FROM rjq_jobs WHERE id = 14 AND status = 'failed'"));
    ASSERT_STREQ("priority 2000000 is outside -1000000..1000000",
                 pg_text(&F.p, "SELECT error FROM rjq_jobs WHERE id = 15 AND status = 'failed'"));
    ASSERT_STREQ("run_at is more than 3153600000000 ms away",
                 pg_text(&F.p, "SELECT error FROM rjq_jobs WHERE id = 16 AND status = 'failed'"));
    ASSERT_EQ(21, get_stats(F.e.base, F.e.q).enqueued); /* nothing of the bad rows in Redis */
    bridge_stop(b);
    teardown();
}

TEST(dead_and_cancelled_jobs_are_written_back_and_a_replay_brings_a_row_back) {
    setup();
    F.ws.fail_pattern = 1;
    workers_start("jobs", 1, 2);
    pid_t b = bridge_spawn(NULL);
    pg_exec(&F.p, "INSERT INTO rjq_jobs (queue, payload) VALUES ('jobs', 'fail me'), ('jobs', 'fine');"
                "INSERT INTO rjq_jobs (queue, payload, run_at) "
                "  VALUES ('jobs', 'later', now() + interval '1 hour')");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE id = 1 AND status = 'failed' "
                    "AND error = 'it failed on purpose' AND attempts = 1", 1, 30000);
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE id = 2 AND status = 'completed'", 1, 30000);
    /* the delayed one waits in Redis; cancel it there */
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE id = 3 AND status = 'migrated'", 1, 30000);
    ASSERT_EQ(1, get_stats(F.e.base, F.e.q).delayed);
    ASSERT_OK(rjq_queue_cancel(F.e.q, "pg-3", NULL, NULL));
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE id = 3 AND status = 'cancelled'", 1, 30000);
    /* replayed, the dead job runs again and now succeeds */
    F.ws.fail_pattern = 0;
    count_wait cw = {0};
    ASSERT_OK(rjq_queue_replay(F.e.q, "pg-1", 0, on_count, &cw));
    ASSERT(loop_until(F.e.base, &cw.done, 5000));
    ASSERT_EQ(1, cw.n);
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE id = 1 AND status = 'completed' "
                    "AND result = convert_to('r:fail me', 'UTF8') AND attempts = 1",
            1, 30000);
    bridge_stop(b);
    teardown();
}

TEST(status_columns_record_the_start_the_end_the_worker_and_the_last_error) {
    setup();
    F.ws.fail_pattern = 1;
    workers_start("jobs", 1, 2);
    pid_t b = bridge_spawn(NULL);
    pg_exec(&F.p, "INSERT INTO rjq_jobs (queue, payload) VALUES ('jobs', 'retry once'), "
                  "('jobs', 'fail me'), ('jobs', 'fine')");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status IN ('completed', 'failed')", 3, 30000);
    /* retried, then completed: both attempts counted, the failure kept */
    ASSERT_EQ(1, pg_int(&F.p, "SELECT count(*) FROM rjq_jobs WHERE id = 1 AND status = 'completed' "
                              "AND attempts = 2 AND last_error = 'first try failed' AND error IS NULL "
                              "AND started_at IS NOT NULL AND completed_at >= started_at "
                              "AND failed_at IS NULL"));
    ASSERT_EQ(1, pg_int(&F.p, "SELECT count(*) FROM rjq_jobs WHERE id = 2 AND status = 'failed' "
                              "AND attempts = 1 AND error = 'it failed on purpose' "
                              "AND last_error = error AND started_at IS NOT NULL "
                              "AND failed_at >= started_at AND completed_at IS NULL"));
    ASSERT_EQ(1, pg_int(&F.p, "SELECT count(*) FROM rjq_jobs WHERE id = 3 AND status = 'completed' "
                              "AND attempts = 1 AND last_error IS NULL AND completed_at IS NOT NULL"));
    /* the completed ones name the process that ran them (this one) */
    char host[256], sql[512];
    ASSERT_EQ(0, gethostname(host, sizeof host));
    snprintf(sql, sizeof sql, "SELECT count(*) FROM rjq_jobs WHERE id IN (1, 3) AND worker_id = '%s:%ld'",
             host, (long)getpid());
    wait_pg(sql, 2, 30000);
    ASSERT_EQ(1, pg_int(&F.p, "SELECT count(*) FROM rjq_jobs WHERE id = 2 AND worker_id IS NULL"));
    /* a replay clears what described the last run */
    pg_exec(&F.p, "UPDATE rjq_jobs SET status = 'queued', attempts = 0 WHERE id = 2");
    ASSERT_EQ(1, pg_int(&F.p, "SELECT count(*) FROM rjq_jobs WHERE id = 2 AND generation = 1 "
                              "AND started_at IS NULL AND failed_at IS NULL AND last_error IS NULL"));
    bridge_stop(b);
    teardown();
}

TEST(per_row_backoff_and_timeout_reach_the_jobs) {
    setup();
    count_wait cw = {0};
    ASSERT_OK(rjq_queue_pause(F.e.q, on_count, &cw)); /* the jobs wait: their options stay */
    ASSERT(loop_until(F.e.base, &cw.done, 5000));
    pid_t b = bridge_spawn(NULL);
    pg_exec(&F.p, "INSERT INTO rjq_jobs (queue, payload, backoff, backoff_ms, timeout_ms) "
                  "  VALUES ('jobs', 'a', 'fixed', 250, 5000);"
                  "INSERT INTO rjq_jobs (queue, payload, backoff_ms, backoff_max_ms) "
                  "  VALUES ('jobs', 'b', 500, 8000);"
                  "INSERT INTO rjq_jobs (queue, payload) VALUES ('jobs', 'c');"
                  "INSERT INTO rjq_jobs (queue, payload, backoff) VALUES ('jobs', 'd', 'linear');"
                  "INSERT INTO rjq_jobs (queue, payload, timeout_ms) VALUES ('jobs', 'e', -1)");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status IN ('migrated', 'failed')", 5, 30000);
    redisReply *r = server_cmd(F.e.rc, "HMGET t:{jobs}:options pg-1 pg-2 pg-3");
    ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    ASSERT(r->element[0]->type == REDIS_REPLY_STRING);
    ASSERT(strstr(r->element[0]->str, "f,250,") && strstr(r->element[0]->str, ";5000;"));
    ASSERT(r->element[1]->type == REDIS_REPLY_STRING && strstr(r->element[1]->str, "e,500,8000"));
    /* no options of its own: nothing stored, or no backoff and no timeout in it */
    ASSERT(r->element[2]->type != REDIS_REPLY_STRING || (strstr(r->element[2]->str, "e,") == NULL &&
                                                         strstr(r->element[2]->str, "f,") == NULL));
    freeReplyObject(r);
    ASSERT_STREQ("backoff \"linear\" is not default, exponential or fixed",
                 pg_text(&F.p, "SELECT error FROM rjq_jobs WHERE id = 4 AND status = 'failed'"));
    ASSERT_STREQ("timeout_ms -1 is outside 0..3153600000000",
                 pg_text(&F.p, "SELECT error FROM rjq_jobs WHERE id = 5 AND status = 'failed'"));
    bridge_stop(b);
    teardown();
}

TEST(a_finished_row_set_back_to_queued_runs_its_job_again_once_per_reset) {
    setup();
    workers_start("jobs", 1, 4);
    pid_t b = bridge_spawn(NULL);
    insert_rows("jobs", 1, 3, "0");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'completed' AND attempts = 1", 3, 30000);
    /* the seed's replay: back to queued, attempts 0 */
    pg_exec(&F.p, "UPDATE rjq_jobs SET status = 'queued', attempts = 0 WHERE id IN (1, 2)");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'completed' AND generation = 1 "
            "AND attempts = 1 AND result = convert_to('r:', 'UTF8') || payload",
            2, 30000);
    ASSERT_EQ(2, F.ws.runs[1]);
    ASSERT_EQ(2, F.ws.runs[2]);
    ASSERT_EQ(1, F.ws.runs[3]);
    /* again: once more; a second update while still queued is no new reset */
    pg_exec(&F.p, "UPDATE rjq_jobs SET status = 'queued', attempts = 0 WHERE id = 1;"
                  "UPDATE rjq_jobs SET status = 'queued', attempts = 0 WHERE id = 1");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE id = 1 AND status = 'completed' AND generation = 2 "
            "AND attempts = 1", 1, 30000);
    ASSERT_EQ(3, F.ws.runs[1]);
    /* a reset moved to Redis by a bridge killed before it marked the row:
     * the next bridge sends the same job id, the job runs once */
    pg_exec(&F.p, "CREATE FUNCTION hold() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "PERFORM pg_advisory_lock_shared(4242); RETURN NEW; END $$;"
                "CREATE TRIGGER hold BEFORE UPDATE ON rjq_jobs FOR EACH ROW "
                "WHEN (NEW.status = 'migrated') EXECUTE FUNCTION hold();"
                "SELECT pg_advisory_lock(4242)");
    pg_exec(&F.p, "UPDATE rjq_jobs SET status = 'queued', attempts = 0 WHERE id = 3");
    wait_pg("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND NOT granted",
            1, 10000);
    wait_runs(7);
    kill(b, SIGKILL);
    reap(b, 10000);
    pg_exec(&F.p, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'");
    pg_exec(&F.p, "SELECT pg_advisory_unlock(4242); DROP TRIGGER hold ON rjq_jobs");
    ASSERT_EQ(1, pg_int(&F.p, "SELECT count(*) FROM rjq_jobs WHERE id = 3 AND status = 'queued' "
                              "AND generation = 1"));
    pid_t b2 = bridge_spawn(NULL);
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE id = 3 AND status = 'completed' AND generation = 1 "
            "AND attempts = 1", 1, 30000);
    ASSERT_EQ(2, F.ws.runs[3]);
    ASSERT_EQ(7, F.ws.total);
    ASSERT_EQ(7, get_stats(F.e.base, F.e.q).enqueued); /* 3 rows, 4 resets: no id twice */
    bridge_stop(b2);
    teardown();
}

TEST(a_restarted_bridge_follows_the_rows_it_had_moved) {
    setup();
    move_rows_then_stop_bridge(200);
    /* the jobs run while no bridge follows them */
    workers_start("jobs", 1, 8);
    wait_runs(200);
    ASSERT_EQ(200, F.ws.total);
    ASSERT_EQ(200, pg_int(&F.p, "SELECT count(*) FROM rjq_jobs WHERE status = 'migrated'"));
    pid_t b2 = bridge_spawn(NULL); /* reads their stored outcomes */
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status <> 'completed'", 0, 30000);
    assert_all_completed_once(200);
    bridge_stop(b2);
    teardown();
}

/* Close every Redis connection of the bridges (client name rjq-pg-bridge);
 * how many. */
static int kill_bridge_connections(void) {
    redisReply *r = server_cmd(F.e.rc, "CLIENT LIST");
    ASSERT(r && r->type == REDIS_REPLY_STRING);
    int killed = 0;
    for (const char *line = r->str; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char buf[1024];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf - 1 ? len : sizeof buf - 1), line);
        if (strstr(buf, " name=rjq-pg-bridge ") == NULL || strncmp(buf, "id=", 3) != 0) continue;
        redisReply *k = server_cmd(F.e.rc, "CLIENT KILL ID %lld", atoll(buf + 3));
        killed += k && k->type == REDIS_REPLY_INTEGER ? (int)k->integer : 0;
        freeReplyObject(k);
    }
    freeReplyObject(r);
    return killed;
}

TEST(attempts_written_back_survive_a_redis_drop_while_a_restarted_bridge_reads_outcomes) {
    setup();
    move_rows_then_stop_bridge(300);
    workers_start("jobs", 1, 8); /* the jobs run (once each) while no bridge follows them */
    wait_runs(300);
    /* the next bridge reads their outcomes through a slow link: its job
     * reads are in flight when its connections drop */
    proxy px;
    proxy_start(&px, F.e.base, F.e.s.port);
    proxy_trickle(&px, 100, 10);
    const char *extra[] = {"-u", px.url, NULL};
    pid_t b = bridge_spawn(extra);
    wait_pg("SELECT least(count(*), 1) FROM rjq_jobs WHERE status = 'completed'", 1, 30000);
    ASSERT(pg_int(&F.p, "SELECT count(*) FROM rjq_jobs WHERE status = 'migrated'") > 0);
    ASSERT(kill_bridge_connections() > 0);
    proxy_trickle(&px, 0, 0);
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status <> 'completed'", 0, 30000);
    assert_all_completed_once(300); /* attempts = 1 everywhere, as rjq's records say */
    bridge_stop(b);
    proxy_stop(&px);
    teardown();
}

TEST(running_and_retrying_jobs_show_in_their_rows_each_start_counted_once) {
    setup();
    F.ws.hold = 1; /* the jobs start as soon as they are enqueued, and stay */
    workers_start("jobs", 1, 100);
    /* two bridges, each following every open row after its scan */
    const char *extra[] = {"--scan-ms", "200", NULL};
    pid_t b1 = bridge_spawn(extra), b2 = bridge_spawn(extra);
    insert_rows("jobs", 1, 50, "0");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'processing' AND attempts = 1", 50, 30000);
    loop_for(F.e.base, 600); /* scans: both bridges follow every row now */
    /* failed with a retry: each row waits for it, then runs again */
    long held = F.ws.nheld;
    ASSERT_EQ(50, held);
    F.ws.nheld = 0;
    for (long i = 0; i < held; i++)
        ASSERT_OK(rjq_job_fail(F.ws.held[i], "again", RJQ_FAIL_RETRY, 1500, on_done_ok, NULL));
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'retry_scheduled' AND attempts = 1", 50, 30000);
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'processing' AND attempts = 2", 50, 30000);
    ASSERT_EQ(50, F.ws.nheld);
    for (long i = 0; i < F.ws.nheld; i++)
        ASSERT_OK(rjq_job_complete(F.ws.held[i], "done", 4, on_done_ok, NULL));
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'completed' AND attempts = 2 "
            "AND result = 'done'",
            50, 30000);
    bridge_stop(b1);
    bridge_stop(b2);
    teardown();
}

TEST(a_queue_redis_refuses_waits_in_postgres_and_holds_no_other_queue) {
    setup();
    workers_start("jobs", 1, 8);
    redisReply *r = server_cmd(F.e.rc, "SET t:{blocked}:ready x"); /* enqueues into it fail */
    freeReplyObject(r);
    const char *extra[] = {"--batch", "10", NULL};
    pid_t b = bridge_spawn(extra);
    /* the refused queue's rows come first in claim order */
    pg_exec(&F.p, "BEGIN;"
                  "INSERT INTO rjq_jobs (queue, payload, priority) SELECT 'blocked', 'x', 1 "
                  "  FROM generate_series(1, 30);"
                  "INSERT INTO rjq_jobs (queue, payload) SELECT 'jobs', convert_to('p' || g, 'UTF8') "
                  "  FROM generate_series(31, 60) g ORDER BY g;"
                  "COMMIT");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE queue = 'jobs' AND status = 'completed'", 30, 30000);
    ASSERT_EQ(30, pg_int(&F.p, "SELECT count(*) FROM rjq_jobs WHERE queue = 'blocked' AND status = 'queued'"));
    r = server_cmd(F.e.rc, "DEL t:{blocked}:ready");
    freeReplyObject(r);
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE queue = 'blocked' AND status = 'migrated'", 30, 30000);
    ASSERT_EQ(30, get_stats(F.e.base, queue_for(F.e.c, "blocked")).ready);
    bridge_stop(b);
    teardown();
}

TEST(rows_whose_finished_jobs_were_trimmed_meanwhile_are_not_run_again) {
    setup();
    move_rows_then_stop_bridge(100);
    /* no bridge runs; the jobs complete and their records are deleted at once */
    rjq_client *wc = client_for(F.e.base, &F.e.s);
    rjq_queue_options qo = {0};
    qo.retention_ms = 1;
    rjq_queue *wq;
    ASSERT_OK(rjq_queue_open(wc, "jobs", &qo, &wq));
    rjq_worker_options wo = quiet_worker_options(8);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(wq, &wo, handler, &F.ws, &w));
    wait_runs(100);
    ASSERT_EQ(100, F.ws.total);
    loop_for(F.e.base, 50);
    count_wait cw = {0};
    ASSERT_OK(rjq_queue_reclaim(F.e.q, on_count, &cw)); /* the retention sweep */
    ASSERT(loop_until(F.e.base, &cw.done, 5000));
    ASSERT_EQ(0, get_stats(F.e.base, F.e.q).ready);
    pid_t b2 = bridge_spawn(NULL);
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status NOT IN ('completed', 'failed')", 0, 30000);
    /* each row: its outcome, or "unknown" when its record was gone; never run again */
    ASSERT(pg_int(&F.p, "SELECT count(*) FROM rjq_jobs WHERE status = 'failed' "
                        "AND error LIKE 'outcome unknown:%'") > 0);
    ASSERT_EQ(100, pg_int(&F.p, "SELECT count(*) FROM rjq_jobs WHERE status = 'completed' "
                                "OR error LIKE 'outcome unknown:%'"));
    loop_for(F.e.base, 500);
    for (long i = 1; i <= 100; i++)
        if (F.ws.runs[i] != 1) FAIL_AT(__FILE__, __LINE__, "row %ld ran %ld times", i, F.ws.runs[i]);
    ASSERT_EQ(100, get_stats(F.e.base, F.e.q).enqueued);
    bridge_stop(b2);
    rjq_client_free(wc);
    teardown();
}

TEST(a_bridge_stopped_while_a_write_waits_on_a_lock_exits_cleanly) {
    setup();
    workers_start("jobs", 1, 4);
    count_wait cw = {0};
    ASSERT_OK(rjq_queue_pause(F.e.q, on_count, &cw));
    ASSERT(loop_until(F.e.base, &cw.done, 5000));
    /* reports go on while it stops; its writes give up on the lock after
     * 100 ms (and are tried again) */
    char pg[400];
    snprintf(pg, sizeof pg, "%s options='-c lock_timeout=100'", F.p.conninfo);
    const char *extra[] = {"--report-ms", "50", "--pg", pg, NULL};
    pid_t b = bridge_spawn(extra);
    insert_rows("jobs", 1, 1, "0");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'migrated'", 1, 30000);
    /* the test holds the row: the bridge's next write of it waits */
    pg_exec(&F.p, "BEGIN; SELECT id FROM rjq_jobs WHERE id = 1 FOR UPDATE");
    cw.done = 0;
    ASSERT_OK(rjq_queue_resume(F.e.q, on_count, &cw));
    ASSERT(loop_until(F.e.base, &cw.done, 5000));
    wait_runs(1);
    loop_for(F.e.base, 300); /* its writes are in flight, held by the lock */
    bridge_stop(b);          /* closes the client, waits for the write, its deadline ends it: exit 0 */
    pg_exec(&F.p, "COMMIT");
    teardown();
}

TEST(a_bridge_with_queues_moves_only_their_rows) {
    setup();
    workers_start("jobs", 1, 4);
    const char *extra[] = {"--queues", "jobs,more", NULL};
    pid_t b = bridge_spawn(extra);
    insert_rows("jobs", 1, 20, "0");
    insert_rows("others", 21, 20, "0");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE queue = 'jobs' AND status = 'completed'", 20,
            30000);
    /* another bridge's rows: untouched (not failed, not moved) */
    ASSERT_EQ(20, pg_int(&F.p, "SELECT count(*) FROM rjq_jobs WHERE queue = 'others' AND status = 'queued'"));
    rjq_queue *others = queue_for(F.e.c, "others");
    ASSERT_EQ(0, get_stats(F.e.base, others).enqueued);
    bridge_stop(b);
    teardown();
}

TEST(two_tables_with_their_own_bridges_coexist) {
    setup();
    workers_start("jobs", 1, 4);
    /* "order" is a reserved word: every statement must quote it */
    const char *init[] = {"--pg", F.p.conninfo, "--init", "--table", "order", NULL};
    ASSERT_EQ(0, bridge_run(init));
    ASSERT_EQ(1, pg_int(&F.p, "SELECT count(*) FROM pg_trigger WHERE tgname = 'order_inserted'"));
    ASSERT_EQ(2, pg_int(&F.p, "SELECT count(*) FROM pg_indexes WHERE tablename = 'order' "
                              "AND indexname IN ('order_queued', 'order_open')"));
    const char *extra[] = {"--table", "order", NULL};
    pid_t b1 = bridge_spawn(NULL), b2 = bridge_spawn(extra);
    /* the same row ids in both tables; each bridge wakes on its own channel */
    insert_rows("jobs", 1, 20, "0");
    pg_exec(&F.p, "INSERT INTO \"order\" (queue, payload) SELECT 'other', 'x' FROM generate_series(1, 20)");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'completed'", 20, 30000);
    wait_pg("SELECT count(*) FROM \"order\" WHERE status = 'migrated'", 20, 30000);
    rjq_queue *other = queue_for(F.e.c, "other");
    ASSERT_EQ(20, get_stats(F.e.base, other).ready);
    ASSERT_STREQ("ready", get_info(F.e.base, other, "pg-order-20").state);
    ASSERT_EQ(20, get_stats(F.e.base, F.e.q).enqueued); /* no row of "order" in "jobs" */
    /* a replay in the other table runs again under its own ids */
    pg_exec(&F.p, "UPDATE \"order\" SET status = 'cancelled' WHERE id = 1;"
                  "UPDATE \"order\" SET status = 'queued' WHERE id = 1");
    wait_pg("SELECT count(*) FROM \"order\" WHERE id = 1 AND generation = 1 AND status = 'migrated'", 1,
            30000);
    ASSERT_STREQ("ready", get_info(F.e.base, other, "pg-order-1-1").state);
    bridge_stop(b1);
    bridge_stop(b2);
    teardown();
}

TEST(init_is_idempotent_and_bad_options_exit_2) {
    pg_start(&F.p);
    init_table(&F.p);
    init_table(&F.p); /* again: nothing changes, no error */
    /* a table of an earlier version gets the new columns, its rows generation 0 */
    pg_exec(&F.p, "INSERT INTO rjq_jobs (queue) VALUES ('q'); ALTER TABLE rjq_jobs DROP COLUMN generation");
    init_table(&F.p);
    ASSERT_EQ(1, pg_int(&F.p, "SELECT count(*) FROM rjq_jobs WHERE generation = 0"));
    pg_exec(&F.p, "ALTER TABLE rjq_jobs DROP COLUMN started_at, DROP COLUMN completed_at, "
                  "DROP COLUMN failed_at, DROP COLUMN worker_id, DROP COLUMN last_error");
    init_table(&F.p);
    ASSERT_EQ(5, pg_int(&F.p, "SELECT count(*) FROM information_schema.columns WHERE table_name = "
                              "'rjq_jobs' AND column_name IN ('started_at', 'completed_at', "
                              "'failed_at', 'worker_id', 'last_error')"));
    ASSERT_EQ(1, pg_int(&F.p, "SELECT count(*) FROM pg_trigger WHERE tgname = 'rjq_jobs_inserted'"));
    ASSERT_EQ(2, pg_int(&F.p, "SELECT count(*) FROM pg_indexes WHERE tablename = 'rjq_jobs' "
                            "AND indexname IN ('rjq_jobs_queued', 'rjq_jobs_open')"));
    const char *bad_batch[] = {"--batch", "0", NULL};
    ASSERT_EQ(2, bridge_run(bad_batch));
    const char *bad_table[] = {"--table", "Jobs-2", NULL};
    ASSERT_EQ(2, bridge_run(bad_table));
    const char *unknown[] = {"--frobnicate", NULL};
    ASSERT_EQ(2, bridge_run(unknown));
    const char *help[] = {"--help", NULL};
    ASSERT_EQ(0, bridge_run(help));
    const char *bad_pg[] = {"--pg", "host=127.0.0.1 port=1 connect_timeout=2", "--init", NULL};
    ASSERT_EQ(1, bridge_run(bad_pg));
    pg_stop(&F.p);
}
