/*
 * The PostgreSQL outbox bridge (rjq-pg-bridge of this build) against a
 * private PostgreSQL and a private redis-server: rows move into rjq once,
 * outcomes come back, through bridge crashes, Redis losing its data,
 * PostgreSQL restarts and bad rows. Workers run in this process; the
 * bridges are child processes. Every bridge runs with a one-hour safety
 * poll, so rows move because their notifications wake it.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster.h"
#include "fixture.h"
#include "harness.h"
#include "pgserver.h"
#include "proxy.h"
#include "server.h"
#include "slot.h"
#include "waits.h"

#include "../tools/pg_bridge/schema.h"

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
    long finishing;      /* the handler's completions and failures sent */
    long finished;       /* ... and answered (each RJQ_OK) */
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
    const char *id = rjq_job_get_id(job);
    ASSERT(strncmp(id, "pg-", 3) == 0);
    long row = atol(id + 3);
    ASSERT(row > 0 && row < MAX_ROWS);
    return row;
}

static void on_finished(rjq_client *c, int status, void *data) {
    (void)c;
    ASSERT_OK(status);
    ((workers *)data)->finished++;
}

static void handler(rjq_job *job, void *data) {
    workers *ws = data;
    long row = row_of(job);
    ws->runs[row]++;
    ws->total++;
    ws->order[ws->started++ % MAX_ROWS] = row;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    if (ws->hold) {
        ws->held[ws->nheld++] = job;
        return;
    }
    if (ws->sleep_us) usleep((useconds_t)ws->sleep_us);
    if (ws->fail_pattern && len >= 5 && memcmp(p, "retry", 5) == 0 && ws->runs[row] == 1) {
        ws->finishing++;
        ASSERT_OK(rjq_job_fail(job, "first try failed", RJQ_FAIL_RETRY, 0, on_finished, ws));
        return;
    }
    if (ws->fail_pattern && len >= 4 && memcmp(p, "fail", 4) == 0) {
        ws->finishing++;
        ASSERT_OK(rjq_job_fail(job, "it failed on purpose", RJQ_FAIL_FATAL, 0, on_finished, ws));
        return;
    }
    char result[256];
    int n = snprintf(result, sizeof result, "r:%.*s", (int)(len < 200 ? len : 200), p);
    ws->finishing++;
    ASSERT_OK(rjq_job_complete(job, result, (size_t)n, on_finished, ws));
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

/* One worker on each of the n queues. */
static void workers_start_each(const char *const *queues, int n, int concurrency) {
    workers *ws = &F.ws;
    ws->n = n;
    for (int i = 0; i < n; i++) {
        ws->c[i] = client_for(F.e.base, &F.e.s);
        rjq_worker_options o = quiet_worker_options(concurrency);
        o.poll_ms = 200;
        ASSERT_OK(rjq_worker_start(queue_for(ws->c[i], queues[i]), &o, handler, ws, &ws->w[i]));
    }
}

static void workers_free(workers *ws) {
    /* PostgreSQL may show a job's outcome (the bridge heard its event)
     * before the worker's own completion is answered: wait for the answers,
     * else freeing the clients cancels them */
    WAIT_FOR(F.e.base, ws->finished == ws->finishing, 30000);
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
    argv[n++] = "--prefix";
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

/* bridge_spawn with its stderr into the file at path. */
static pid_t bridge_spawn_logging(const char *const *extra, const char *path) {
    fflush(NULL);
    int saved = dup(2);
    ASSERT(saved >= 0);
    FILE *f = fopen(path, "w");
    ASSERT(f != NULL);
    dup2(fileno(f), 2); /* (the child inherits it) */
    fclose(f);
    pid_t pid = bridge_spawn(extra);
    dup2(saved, 2);
    close(saved);
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

static void setup_on(void (*pg)(pg_server *)) {
    memset(&F.ws, 0, sizeof F.ws);
    pg(&F.p);
    init_table(&F.p);
    env_start(&F.e, "jobs");
}

/* a database of the shared cluster (pgserver.h) */
static void setup(void) {
    setup_on(pg_start);
}

/* a PostgreSQL of the test's own: the tests that stop it */
static void setup_private(void) {
    setup_on(pg_start_private);
}

static void teardown(void) {
    workers_free(&F.ws);
    env_stop(&F.e);
    pg_stop(&F.p);
}

/* ---- waiting on PostgreSQL while the loop runs ------------------------------------------ */

/* Run the loop until the query's number is `want` (or fail after timeout). */
static void wait_pg(const char *sql, long long want, long timeout_ms) {
    double until = wait_deadline(timeout_ms);
    long long got = -1;
    while ((got = pg_int(&F.p, sql)) != want)
        if (!wait_poll(F.e.base, until, 50)) break; /* (the loop stands still during a query) */
    if (got == want) return;
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
    long wrong = 0, first = 0;
    for (long i = 1; i <= rows; i++)
        if (F.ws.runs[i] != 1 && wrong++ < 20) {
            fprintf(stderr, "row %ld ran %ld times\n", i, F.ws.runs[i]);
            if (!first) first = i;
        }
    if (wrong) FAIL_AT(__FILE__, __LINE__, "%ld rows did not run once (runs in all: %ld)", wrong, F.ws.total);
}

/* Run the loop until the workers started n jobs (or fail). */
static void wait_runs(long n) {
    WAIT_FOR(F.e.base, F.ws.total >= n, 30000);
}

/* A bridge moves rows 1..n of "jobs" and stops: nobody follows them now. */
static void move_rows_then_stop_bridge(long n) {
    pid_t b = bridge_spawn(NULL);
    insert_rows("jobs", 1, n, "0");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'migrated'", n, 30000);
    bridge_stop(b);
}

/* ---- the bridge's HTTP endpoints ------------------------------------------------------ */

/* GET path from 127.0.0.1:port (blocking, 5 s at most): the status code,
 * the body in body; -1 when nothing answers (not listening yet). */
static int http_get(int port, const char *path, char *body, size_t size) {
    body[0] = '\0';
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT(fd >= 0);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    ASSERT(write(fd, req, (size_t)n) == n);
    static char buf[65536];
    size_t len = 0;
    ssize_t got;
    while (len < sizeof buf - 1 && (got = read(fd, buf + len, sizeof buf - 1 - len)) > 0) len += (size_t)got;
    close(fd);
    buf[len] = '\0';
    int code = -1;
    if (sscanf(buf, "HTTP/1.%*d %d", &code) != 1) return -1;
    const char *b = strstr(buf, "\r\n\r\n");
    snprintf(body, size, "%s", b ? b + 4 : "");
    return code;
}

/* The value of a sample line "name value" (name with its labels) in a
 * /metrics body; fails the test when absent. */
static double metric_of(const char *body, const char *name) {
    size_t n = strlen(name);
    for (const char *p = body; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, name, n) == 0 && p[n] == ' ') return atof(p + n + 1);
    FAIL_AT(__FILE__, __LINE__, "no %s in /metrics:\n%s", name, body);
    return 0;
}

/* Run the loop until GET /healthz answers code with needle in its body. */
static void wait_health(int port, int code, const char *needle, long timeout_ms) {
    double until = wait_deadline(timeout_ms);
    char body[4096];
    int got = -1;
    do {
        got = http_get(port, "/healthz", body, sizeof body);
        if (got == code && strstr(body, needle)) return;
    } while (wait_poll(F.e.base, until, 50));
    FAIL_AT(__FILE__, __LINE__, "/healthz: expected %d \"%s\", got %d \"%s\"", code, needle, got, body);
}

/* Run the loop until the metric has the value. */
static void wait_metric(int port, const char *name, double want, long timeout_ms) {
    double until = wait_deadline(timeout_ms);
    static char body[65536];
    double got = -1;
    do {
        if (http_get(port, "/metrics", body, sizeof body) == 200 && (got = metric_of(body, name)) == want)
            return;
    } while (wait_poll(F.e.base, until, 50));
    FAIL_AT(__FILE__, __LINE__, "%s: expected %g, got %g", name, want, got);
}

/* ---- the tests --------------------------------------------------------------------- */

TEST(ten_thousand_rows_two_bridges_three_workers_each_job_runs_once) {
    setup();
    workers_start("jobs", 3, 8);
    const char *extra[] = {"--batch", "200", NULL};
    pid_t b1 = bridge_spawn(extra), b2 = bridge_spawn(extra);
    for (long t = 0; t < 100; t++) { /* 100 transactions of 100 rows */
        insert_rows("jobs", t * 100 + 1, 100, "g % 7");
        loop_turn(F.e.base); /* the workers run between the transactions */
    }
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status <> 'completed'", 0, 90000);
    assert_all_completed_once(10000);
    ASSERT_EQ(10000, get_stats(F.e.base, F.e.q).enqueued); /* no id enqueued twice */
    ASSERT_EQ(10000, F.ws.total);
    bridge_stop(b1);
    bridge_stop(b2);
    teardown();
}

/* Pauses the queue, runs a bridge with extra arguments over 300 rows of
 * scrambled priorities -5..5 inserted in one transaction, resumes with one
 * worker of one slot: every row starts by priority, then in insert order. */
static void rows_start_by_priority_then_in_insert_order(const char *const *extra) {
    setup();
    count_wait cw = {0};
    ASSERT_OK(rjq_queue_pause(F.e.q, on_count, &cw));
    ASSERT(loop_until(F.e.base, &cw.done, 5000));
    pid_t b = bridge_spawn(extra);
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

TEST(rows_of_one_batch_start_by_priority_then_in_insert_order) {
    rows_start_by_priority_then_in_insert_order(NULL);
}

/* Claims overlap (--claims): the rows of several claims, each one
 * selected while the ones before it are in Redis, still reach rjq in claim
 * order. */
TEST(rows_of_overlapping_claims_start_by_priority_then_in_insert_order) {
    const char *extra[] = {"--batch", "25", "--claims", "4", NULL};
    rows_start_by_priority_then_in_insert_order(extra);
}

/* While one claim's mark waits (on a lock here; on PostgreSQL's commit in
 * life), the next claims select and enqueue their rows: a backlog moves
 * with several claims in flight, each still exactly once. */
TEST(claims_overlap_while_a_mark_waits_and_every_row_moves_once) {
    setup();
    /* the first mark waits on an advisory lock the test holds */
    pg_exec(&F.p, "CREATE FUNCTION hold() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "PERFORM pg_advisory_lock_shared(4243); RETURN NEW; END $$;"
                "CREATE TRIGGER hold BEFORE UPDATE ON rjq_jobs FOR EACH ROW "
                "WHEN (NEW.status = 'migrated' AND OLD.id <= 100) EXECUTE FUNCTION hold();"
                "SELECT pg_advisory_lock(4243)");
    const char *extra[] = {"--batch", "100", "--claims", "3", NULL};
    pid_t b = bridge_spawn(extra);
    insert_rows("jobs", 1, 300, "0");
    WAIT_FOR(F.e.base, get_stats(F.e.base, F.e.q).enqueued >= 300, 30000);
    ASSERT_EQ(300, get_stats(F.e.base, F.e.q).enqueued); /* all three claims in Redis */
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'migrated'", 200, 30000);
    pg_exec(&F.p, "SELECT pg_advisory_unlock(4243)");
    workers_start("jobs", 2, 8);
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status <> 'completed'", 0, 30000);
    assert_all_completed_once(300);
    ASSERT_EQ(300, get_stats(F.e.base, F.e.q).enqueued);
    bridge_stop(b);
    pg_exec(&F.p, "DROP TRIGGER hold ON rjq_jobs");
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
    WAIT_FOR(F.e.base, get_stats(F.e.base, F.e.q).enqueued >= 500, 30000);
    ASSERT_EQ(500, get_stats(F.e.base, F.e.q).enqueued);
    wait_pg("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND NOT granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            1, 10000);
    kill(b1, SIGKILL);
    reap(b1, 10000);
    /* its transaction dies with its backend */
    pg_exec(&F.p, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend' "
                "AND datname = current_database()");
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
    setup_private();
    F.ws.sleep_us = 2000; /* 2 ms a job, one at a time: the restart falls mid-run */
    workers_start("jobs", 1, 1);
    pid_t b = bridge_spawn(NULL);
    for (long t = 0; t < 10; t++) insert_rows("jobs", t * 100 + 1, 100, "0");
    wait_runs(200);
    pg_halt(&F.p);
    long before = F.ws.total;
    WAIT_FOR(F.e.base, F.ws.total >= before + 100, 30000); /* jobs end while PostgreSQL is away */
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
    /* every row names the process that ran its last attempt (this one),
     * the failed one too (its dead record keeps the token) */
    char host[256], sql[512];
    ASSERT_EQ(0, gethostname(host, sizeof host));
    snprintf(sql, sizeof sql, "SELECT count(*) FROM rjq_jobs WHERE id IN (1, 2, 3) AND worker_id = '%s:%ld'",
             host, (long)getpid());
    wait_pg(sql, 3, 30000);
    /* the times are rjq's record's (the Redis server's clock), to the ms:
     * the last attempt's start, and its end */
    for (int id = 1; id <= 3; id++) {
        char job[16];
        snprintf(job, sizeof job, "pg-%d", id);
        info_wait i = get_info(F.e.base, F.e.q, job);
        ASSERT_OK(i.status);
        ASSERT(i.started_ms > 0 && i.ended_ms >= i.started_ms);
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM rjq_jobs WHERE id = %d "
                 "AND (extract(epoch FROM started_at) * 1000)::bigint = %lld "
                 "AND (extract(epoch FROM %s) * 1000)::bigint = %lld",
                 id, i.started_ms, id == 2 ? "failed_at" : "completed_at", i.ended_ms);
        ASSERT_EQ(1, pg_int(&F.p, sql));
    }
    /* a replay clears what described the last run (no bridge runs it
     * again meanwhile: a new start would be recorded) */
    bridge_stop(b);
    pg_exec(&F.p, "UPDATE rjq_jobs SET status = 'queued', attempts = 0 WHERE id = 2");
    ASSERT_EQ(1, pg_int(&F.p, "SELECT count(*) FROM rjq_jobs WHERE id = 2 AND generation = 1 "
                              "AND started_at IS NULL AND failed_at IS NULL AND last_error IS NULL"));
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
    wait_pg("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND NOT granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            1, 10000);
    wait_runs(7);
    kill(b, SIGKILL);
    reap(b, 10000);
    pg_exec(&F.p, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend' "
                "AND datname = current_database()");
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

/* A bridge with its health endpoint on a free port (its port). */
static pid_t bridge_spawn_listening(int *port) {
    static char listen[32];
    *port = free_port();
    snprintf(listen, sizeof listen, "127.0.0.1:%d", *port);
    const char *extra[] = {"--listen", listen, NULL};
    return bridge_spawn(extra);
}

/* The number of a sample in GET /metrics now. */
static double metric_now(int port, const char *name) {
    static char body[65536];
    ASSERT_EQ(200, http_get(port, "/metrics", body, sizeof body));
    return metric_of(body, name);
}

/* A bridge started onto a backlog holds its first claims' enqueues until
 * its queue's first resync: the rows it moves are followed by events
 * from the start, none is read at its mark (before: the first claim's
 * rows were each read once at their mark, and again at their end). */
TEST(a_bridge_started_onto_a_backlog_reads_no_job_record_before_the_jobs_end) {
    setup();
    insert_rows("jobs", 1, 2500, "0");
    int port;
    pid_t b = bridge_spawn_listening(&port);
    wait_metric(port, "rjq_pg_bridge_rows_moved_total", 2500, 60000);
    ASSERT_EQ(0, (long)metric_now(port, "rjq_pg_bridge_job_reads_total"));
    ASSERT_EQ(2500, pg_int(&F.p, "SELECT count(*) FROM rjq_jobs WHERE status = 'migrated'"));
    workers_start("jobs", 1, 8);
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status <> 'completed'", 0, 60000);
    assert_all_completed_once(2500);
    bridge_stop(b);
    teardown();
}

/* A queue whose event stream never resyncs (its monitored flag is a hash:
 * the monitor's SET ... GET fails, the scripts still publish) holds its
 * claims 2 s at most, then moves them the old way, each row read at its
 * mark; a bridge stopped while it holds them exits cleanly, its rows
 * moved by the next bridge, and each job runs once. */
TEST(a_queue_whose_events_never_resync_is_held_two_seconds_at_most) {
    setup();
    freeReplyObject(server_cmd(F.e.rc, "HSET t:{jobs}:monitored x 1"));
    insert_rows("jobs", 1, 300, "0");
    int port;
    pid_t a = bridge_spawn_listening(&port);
    /* its claim holds the rows (locked), or moved them already */
    wait_pg("SELECT count(*) FROM (SELECT 1 FROM rjq_jobs WHERE status = 'queued' "
            "FOR UPDATE SKIP LOCKED) x",
            0, 30000);
    bridge_stop(a);
    pid_t b = bridge_spawn_listening(&port);
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status <> 'migrated'", 0, 30000);
    /* each job read once: at its mark (no resync came), or by b's scan
     * (the rows a moved); no worker runs yet */
    wait_metric(port, "rjq_pg_bridge_job_reads_total", 300, 10000);
    workers_start("jobs", 1, 8);
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status <> 'completed'", 0, 30000);
    assert_all_completed_once(300);
    ASSERT_EQ(300, get_stats(F.e.base, F.e.q).enqueued);
    bridge_stop(b);
    teardown();
}

/* A bridge started over the rows of jobs that ended while no bridge ran
 * reads each job once: its scan's reads go out before its queue's first
 * resync (they are answered before it), which reads none of them again. */
TEST(a_bridge_started_over_finished_jobs_reads_each_job_once) {
    setup();
    move_rows_then_stop_bridge(500);
    workers_start("jobs", 1, 8);
    wait_runs(500);
    int port;
    pid_t b = bridge_spawn_listening(&port);
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status <> 'completed'", 0, 30000);
    assert_all_completed_once(500);
    wait_metric(port, "rjq_pg_bridge_following", 0, 10000);
    ASSERT_EQ(500, (long)metric_now(port, "rjq_pg_bridge_job_reads_total"));
    bridge_stop(b);
    teardown();
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

/* The bridge follows outcomes by its queue's events: jobs that end while
 * its connections are cut (a half-open link: the events published then
 * are lost for sure) are found by the read that follows its reconnect. */
TEST(outcomes_that_happen_while_the_bridge_subscriber_is_cut_are_written_back) {
    setup();
    F.ws.hold = 1; /* the jobs start as soon as they are enqueued, and stay */
    workers_start("jobs", 1, 100);
    proxy px;
    proxy_start(&px, F.e.base, F.e.s.port);
    const char *extra[] = {"-u", px.url, NULL};
    pid_t b = bridge_spawn(extra);
    insert_rows("jobs", 1, 50, "0");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'processing' AND attempts = 1", 50, 30000);
    WAIT_FOR(F.e.base, F.ws.nheld == 50, 30000); /* (a row's 'processing' may come first) */
    proxy_blackhole(&px); /* the bridge hears nothing more on its connections */
    long done = 0;
    for (long i = 0; i < F.ws.nheld; i++)
        ASSERT_OK(rjq_job_complete(F.ws.held[i], "done", 4, on_done_ok, &done));
    ASSERT(loop_until_count(F.e.base, &done, 50, 10000));
    ASSERT_EQ(50, pg_int(&F.p, "SELECT count(*) FROM rjq_jobs WHERE status = 'processing'"));
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'completed' AND attempts = 1 "
            "AND result = 'done' AND completed_at IS NOT NULL",
            50, 90000);
    bridge_stop(b);
    proxy_stop(&px);
    teardown();
}

TEST(running_and_retrying_jobs_show_in_their_rows_each_start_counted_once) {
    setup();
    F.ws.hold = 1; /* the jobs start as soon as they are enqueued, and stay */
    workers_start("jobs", 1, 100);
    /* two bridges, each following every open row after its scan */
    int port1 = free_port(), port2 = free_port();
    char listen1[32], listen2[32];
    snprintf(listen1, sizeof listen1, "127.0.0.1:%d", port1);
    snprintf(listen2, sizeof listen2, "127.0.0.1:%d", port2);
    const char *extra1[] = {"--scan-ms", "200", "--listen", listen1, NULL};
    const char *extra2[] = {"--scan-ms", "200", "--listen", listen2, NULL};
    pid_t b1 = bridge_spawn(extra1), b2 = bridge_spawn(extra2);
    insert_rows("jobs", 1, 50, "0");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'processing' AND attempts = 1", 50, 30000);
    /* scans: both bridges follow every row now */
    wait_metric(port1, "rjq_pg_bridge_following", 50, 30000);
    wait_metric(port2, "rjq_pg_bridge_following", 50, 30000);
    /* failed with a retry: each row waits for it, then runs again */
    WAIT_FOR(F.e.base, F.ws.nheld == 50, 30000);
    long held = F.ws.nheld;
    F.ws.nheld = 0;
    for (long i = 0; i < held; i++)
        ASSERT_OK(rjq_job_fail(F.ws.held[i], "again", RJQ_FAIL_RETRY, 1500, on_done_ok, NULL));
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'retry_scheduled' AND attempts = 1", 50, 30000);
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'processing' AND attempts = 2", 50, 30000);
    /* A row shows 'processing' once the bridge heard the job's start event,
     * which the claim script publishes before its reply reaches this
     * process's worker: the last jobs' handler may not have run yet
     * ("50 == F.ws.nheld: expected 50, got 49" at load 21). */
    WAIT_FOR(F.e.base, F.ws.nheld == 50, 30000);
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
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.retention_ms = 1;
    rjq_queue *wq;
    ASSERT_OK(rjq_queue_open(wc, "jobs", &qo, &wq));
    rjq_worker_options wo = quiet_worker_options(8);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(wq, &wo, handler, &F.ws, &w));
    wait_runs(100);
    ASSERT_EQ(100, F.ws.total);
    /* every job completed (a stats call is a round trip behind them), its
     * record past the 1 ms retention by the server's clock */
    WAIT_FOR(F.e.base, get_stats(F.e.base, wq).completed == 100, 10000);
    wait_server_clock(F.e.base, F.e.rc, 2);
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
    /* a run again would show now: nothing is waiting or running in Redis,
     * every message to the workers' client has come, every reply */
    rjq_stats st = get_stats(F.e.base, wq);
    ASSERT_EQ(0, st.ready + st.delayed + st.active);
    subscriber_barrier(F.e.base, wc, F.e.rc);
    (void)get_stats(F.e.base, wq);
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
    /* the job is done and its worker has the answer (a round trip on the
     * worker's client behind it) */
    WAIT_FOR(F.e.base, get_stats(F.e.base, F.e.q).completed >= 1, 30000);
    (void)get_stats(F.e.base, queue_for(F.ws.c[0], "jobs"));
    /* its writes are in flight, held by the lock */
    WAIT_FOR(F.e.base,
             pg_int(&F.p, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                          "AND wait_event_type = 'Lock'") > 0,
             30000);
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

/* redis-cli's connection options after the URL change its parts: the last
 * naming the port wins (the URL's port 1 has no server). */
TEST(a_bridge_takes_redis_clis_connection_options_over_its_url) {
    setup();
    char port[16];
    snprintf(port, sizeof port, "%d", F.e.s.port);
    const char *extra[] = {"-u", "redis://127.0.0.1:1", "-h", "127.0.0.1", "-p", port, NULL};
    pid_t b = bridge_spawn(extra);
    insert_rows("jobs", 1, 3, "0");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'migrated'", 3, 30000);
    bridge_stop(b);
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
    const char *no_claims[] = {"--claims", "0", NULL}, *many_claims[] = {"--claims", "17", NULL};
    ASSERT_EQ(2, bridge_run(no_claims));
    ASSERT_EQ(2, bridge_run(many_claims));
    const char *bad_table[] = {"--table", "Jobs-2", NULL};
    ASSERT_EQ(2, bridge_run(bad_table));
    const char *unknown[] = {"--frobnicate", NULL};
    ASSERT_EQ(2, bridge_run(unknown));
    const char *help[] = {"--help", NULL}, *help_h[] = {"-h", NULL};
    ASSERT_EQ(0, bridge_run(help));
    ASSERT_EQ(0, bridge_run(help_h));
    /* -p is the port, as in redis-cli: a prefix there is a usage error */
    const char *prefix_p[] = {"-p", "t", NULL}, *port_0[] = {"-p", "0", NULL};
    ASSERT_EQ(2, bridge_run(prefix_p));
    ASSERT_EQ(2, bridge_run(port_0));
    const char *unix_p[] = {"-u", "unix:///tmp/x.sock", "-p", "7000", NULL};
    ASSERT_EQ(2, bridge_run(unix_p));
    const char *bad_pg[] = {"--pg", "host=127.0.0.1 port=1 connect_timeout=2", "--init", NULL};
    ASSERT_EQ(1, bridge_run(bad_pg));
    pg_stop(&F.p);
}

TEST(log_format_json_writes_each_line_as_one_object_with_time_level_and_message) {
    setup();
    char path[] = "/tmp/rjq-pgbridge-log.XXXXXX";
    int fd = mkstemp(path);
    ASSERT(fd >= 0);
    close(fd);
    const char *extra[] = {"--log-format", "json", NULL};
    pid_t b = bridge_spawn_logging(extra, path);
    insert_rows("jobs", 1, 3, "0");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'migrated'", 3, 30000);
    bridge_stop(b); /* (its "stopping" line is the last) */
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c '\n"
             "import json, sys\n"
             "lines = open(sys.argv[1], encoding=\"utf-8\").read().splitlines()\n"
             "objs = [json.loads(l) for l in lines]\n"
             "assert objs, \"no line\"\n"
             "for d in objs:\n"
             "    assert isinstance(d, dict) and d[\"level\"] in (\"info\", \"warn\"), d\n"
             "    assert d[\"time\"].endswith(\"Z\") and isinstance(d[\"message\"], str), d\n"
             "m = [d[\"message\"] for d in objs]\n"
             "assert any(x.startswith(\"PostgreSQL connected\") for x in m), m\n"
             "assert any(x.startswith(\"Redis connected\") for x in m), m\n"
             "assert any(x.startswith(\"stopping\") for x in m), m\n"
             "' %s",
             path);
    int rc = system(cmd);
    if (rc != 0) {
        snprintf(cmd, sizeof cmd, "cat %s >&2", path);
        (void)!system(cmd);
    }
    unlink(path);
    ASSERT_EQ(0, rc);
    const char *bad[] = {"--log-format", "xml", NULL};
    ASSERT_EQ(2, bridge_run(bad));
    teardown();
}

TEST(health_goes_red_on_lag_and_queued_rows_and_back_and_metrics_count_the_rows) {
    setup();
    /* enqueues into "blocked" fail: its rows wait in PostgreSQL */
    redisReply *r = server_cmd(F.e.rc, "SET t:{blocked}:ready x");
    freeReplyObject(r);
    int port = free_port();
    char listen[32];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    const char *extra[] = {"--listen", listen, "--alert-lag-ms", "500", "--alert-queued", "20", NULL};
    pid_t b = bridge_spawn(extra);
    wait_health(port, 200, "ok", 30000);
    /* 10 rows of another queue move at once: the health stays green */
    workers_start("jobs", 1, 8);
    insert_rows("jobs", 1, 10, "0");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'completed'", 10, 30000);
    wait_health(port, 200, "ok", 30000);
    /* 30 rows the bridge cannot move: over both thresholds */
    insert_rows("blocked", 11, 30, "0");
    wait_health(port, 503, "over --alert-lag-ms 500", 30000);
    wait_health(port, 503, "30 rows queued, over --alert-queued 20", 30000);
    static char body[65536];
    ASSERT_EQ(200, http_get(port, "/metrics", body, sizeof body));
    ASSERT(metric_of(body, "rjq_pg_bridge_rows_queued") == 30);
    ASSERT(metric_of(body, "rjq_pg_bridge_lag_seconds") > 0.5);
    ASSERT(metric_of(body, "rjq_pg_bridge_rows_moved_total") == 10);
    ASSERT(metric_of(body, "rjq_pg_bridge_rows_moved_per_second") >= 0);
    ASSERT(metric_of(body, "rjq_pg_bridge_sample_age_seconds") >= 0);
    ASSERT(metric_of(body, "rjq_pg_bridge_outcomes_total{status=\"completed\"}") == 10);
    ASSERT(metric_of(body, "rjq_pg_bridge_up{conn=\"redis\"}") == 1);
    ASSERT(metric_of(body, "rjq_pg_bridge_up{conn=\"postgres_claims\"}") == 1);
    ASSERT(metric_of(body, "rjq_pg_bridge_healthy") == 0);
    ASSERT(strstr(body, "# TYPE rjq_pg_bridge_rows_moved_total counter\n"));
    /* Redis takes them again: they move, run, and the health is green */
    rjq_worker_options o = quiet_worker_options(8);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(queue_for(F.ws.c[0], "blocked"), &o, handler, &F.ws, &w));
    r = server_cmd(F.e.rc, "DEL t:{blocked}:ready");
    freeReplyObject(r);
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'completed'", 40, 30000);
    wait_health(port, 200, "ok", 30000);
    wait_metric(port, "rjq_pg_bridge_rows_moved_total", 40, 10000);
    wait_metric(port, "rjq_pg_bridge_outcomes_total{status=\"completed\"}", 40, 10000);
    wait_metric(port, "rjq_pg_bridge_rows_queued", 0, 10000);
    wait_metric(port, "rjq_pg_bridge_lag_seconds", 0, 10000);
    ASSERT_EQ(404, http_get(port, "/nothing", body, sizeof body));
    bridge_stop(b);
    teardown();
}

TEST(health_says_which_connection_is_down) {
    setup_private();
    int port = free_port();
    char listen[32];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    const char *extra[] = {"--listen", listen, NULL};
    pid_t b = bridge_spawn(extra);
    wait_health(port, 200, "ok", 30000);
    pg_halt(&F.p);
    wait_health(port, 503, "PostgreSQL is down", 30000);
    wait_metric(port, "rjq_pg_bridge_up{conn=\"postgres_outcomes\"}", 0, 10000);
    pg_resume(&F.p);
    wait_health(port, 200, "ok", 30000);
    bridge_stop(b);
    teardown();
}

/* Claims overlap (--claims): a claim's transaction may begin before a row
 * it then selects was inserted. That row's run_at (its inserting
 * transaction's now()) is later than the claim transaction's now(), so a
 * claim comparing with now() delayed it by the gap: the job sat delayed,
 * not ready. The claim compares with its statement's time. */
TEST(a_claim_begun_before_a_row_was_inserted_does_not_delay_it) {
    setup();
    PGconn *c = PQconnectdb(F.p.conninfo);
    ASSERT(PQstatus(c) == CONNECTION_OK);
    PGresult *r = PQexec(c, PGB_SQL_BEGIN);
    ASSERT(PQresultStatus(r) == PGRES_COMMAND_OK);
    PQclear(r);
    /* the claim transaction began; now() of the insert is later */
    pg_exec(&F.p, "SELECT pg_sleep(0.05)");
    insert_rows("jobs", 1, 1, "0");
    const char *params[3] = {"10", NULL, NULL};
    r = PQexecParams(c, PGB_SQL_CLAIM, 3, NULL, params, NULL, NULL, 0);
    ASSERT(PQresultStatus(r) == PGRES_TUPLES_OK);
    ASSERT_EQ(1, PQntuples(r));
    ASSERT_STREQ("0", PQgetvalue(r, 0, 5)); /* delay_ms */
    PQclear(r);
    PQclear(PQexec(c, PGB_SQL_ROLLBACK));
    PQfinish(c);
    teardown();
}

TEST(route_priority_sends_rows_of_10_100_200_to_high_base_and_low) {
    setup();
    const char *extra[] = {"--route-priority", "high=50,low=150", NULL};
    /* a first bridge moves them (nobody runs them yet) and stops */
    pid_t b = bridge_spawn(extra);
    insert_rows("jobs", 1, 10, "10");
    insert_rows("jobs", 11, 20, "100");
    insert_rows("jobs", 31, 30, "200");
    insert_rows("jobs", 61, 2, "50");  /* the thresholds themselves: high, base */
    insert_rows("jobs", 63, 2, "150");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'migrated'", 64, 30000);
    bridge_stop(b);
    ASSERT_EQ(12, get_stats(F.e.base, queue_for(F.e.c, "jobs:high")).ready);
    ASSERT_EQ(22, get_stats(F.e.base, F.e.q).ready);
    ASSERT_EQ(30, get_stats(F.e.base, queue_for(F.e.c, "jobs:low")).ready);
    /* a restarted bridge finds their outcomes in the routed queues (an
     * await in the wrong queue would say "not found" and send the row
     * back to queued) */
    const char *queues[] = {"jobs:high", "jobs", "jobs:low"};
    workers_start_each(queues, 3, 4);
    int port = free_port();
    char listen[32];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    const char *again[] = {"--route-priority", "high=50,low=150", "--listen", listen, NULL};
    b = bridge_spawn(again);
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status <> 'completed'", 0, 30000);
    assert_all_completed_once(64);
    wait_metric(port, "rjq_pg_bridge_outcomes_total{status=\"completed\"}", 64, 10000);
    static char body[65536];
    ASSERT_EQ(200, http_get(port, "/metrics", body, sizeof body));
    ASSERT(metric_of(body, "rjq_pg_bridge_outcomes_total{status=\"queued\"}") == 0);
    ASSERT(metric_of(body, "rjq_pg_bridge_rows_existing_total") == 0);
    /* and a bridge serving "jobs" opens the routed queues too: a live row */
    bridge_stop(b);
    const char *served[] = {"--route-priority", "low=150", "--queues", "jobs", NULL};
    b = bridge_spawn(served);
    insert_rows("jobs", 65, 1, "151");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status <> 'completed'", 0, 30000);
    ASSERT_EQ(31, get_stats(F.e.base, queue_for(F.e.c, "jobs:low")).enqueued);
    bridge_stop(b);
    const char *bad[] = {"--route-priority", "high=200,low=100", NULL};
    ASSERT_EQ(2, bridge_run(bad));
    const char *bad2[] = {"--route-priority", "urgent=1", NULL};
    ASSERT_EQ(2, bridge_run(bad2));
    const char *bad3[] = {"--alert-lag-ms", "100", NULL};
    ASSERT_EQ(2, bridge_run(bad3));
    teardown();
}

/* The user of `rjq --prefix t acl --role bridge --queues 'jobs*'` (CHANGE-ME -> pw) on the server. */
static void create_bridge_user(redisContext *rc, const char *pw) {
    FILE *p = popen(RJQ_BUILD_DIR "/rjq --prefix t acl --role bridge --queues 'jobs*'", "r");
    ASSERT(p != NULL);
    char line[4096], secret[64];
    snprintf(secret, sizeof secret, ">%s", pw);
    int users = 0;
    while (fgets(line, sizeof line, p)) {
        if (strncmp(line, "ACL SETUSER ", 12) != 0) continue;
        const char *argv[128];
        size_t n = 0;
        for (char *tok = strtok(line, " \n"); tok && n < 128; tok = strtok(NULL, " \n"))
            argv[n++] = strcmp(tok, ">CHANGE-ME") == 0 ? secret : tok;
        redisReply *r = redisCommandArgv(rc, (int)n, argv, NULL);
        ASSERT(r != NULL);
        if (r->type == REDIS_REPLY_ERROR) FAIL_AT(__FILE__, __LINE__, "%s: %s", argv[2], r->str);
        freeReplyObject(r);
        users++;
    }
    ASSERT_EQ(0, pclose(p));
    ASSERT_EQ(1, users);
}

/* The least privileges README.md documents, on both sides: the Redis user
 * of `rjq acl --role bridge`, and PostgreSQL roles with only the grants
 * listed for the bridge and for an inserting application. */
TEST(a_bridge_with_the_least_privileges_documented_moves_follows_and_is_refused_the_rest) {
    setup();
    create_bridge_user(F.e.rc, "bridge-pw");
    /* (roles belong to the whole PostgreSQL cluster, which the tests
     * share: named after this test's database, so that a second run of it
     * on the same cluster, as `ctest --repeat` makes, finds none of its
     * roles taken: "role "rjq_bridge" already exists"; a database of the
     * same name, a pid used again, was dropped with its grants first) */
    const char *tag = F.p.db[0] ? F.p.db : "rjq"; /* (a private PostgreSQL: no database of its own) */
    char roles[1024];
    snprintf(roles, sizeof roles,
             "DROP ROLE IF EXISTS %s_bridge, %s_app;"
             "CREATE ROLE %s_bridge LOGIN; GRANT SELECT, UPDATE ON rjq_jobs TO %s_bridge;"
             "CREATE ROLE %s_app LOGIN; GRANT INSERT ON rjq_jobs TO %s_app;"
             "GRANT USAGE ON SEQUENCE rjq_jobs_id_seq TO %s_app",
             tag, tag, tag, tag, tag, tag, tag);
    pg_exec(&F.p, roles);
    char pg_bridge[400], pg_app[400];
    snprintf(pg_bridge, sizeof pg_bridge, "%s user=%s_bridge", F.p.conninfo, tag);
    snprintf(pg_app, sizeof pg_app, "%s user=%s_app", F.p.conninfo, tag);
    PGconn *app = PQconnectdb(pg_app);
    ASSERT(PQstatus(app) == CONNECTION_OK);
    redisReply *r = server_cmd(F.e.rc, "ACL LOG RESET");
    freeReplyObject(r);
    char url[128];
    snprintf(url, sizeof url, "redis://rjq-pg-bridge:bridge-pw@127.0.0.1:%d", F.e.s.port);
    F.ws.fail_pattern = 1;
    workers_start("jobs", 1, 4);
    int port = free_port();
    char listen[32];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    const char *extra[] = {"-u", url, "--pg", pg_bridge, "--route-priority", "high=-1", "--listen", listen, NULL};
    pid_t b = bridge_spawn(extra);
    /* the application inserts (priority -1: into jobs:high, unserved for now) */
    PGresult *res = PQexec(app, "INSERT INTO rjq_jobs (queue, payload, priority) "
                                "SELECT 'jobs', convert_to('p' || g, 'UTF8'), g % 3 - 1 "
                                "FROM generate_series(1, 40) g ORDER BY g");
    ASSERT(PQresultStatus(res) == PGRES_COMMAND_OK);
    PQclear(res);
    res = PQexec(app, "INSERT INTO rjq_jobs (queue, payload, max_attempts) VALUES ('jobs', 'fail', 1)");
    ASSERT(PQresultStatus(res) == PGRES_COMMAND_OK);
    PQclear(res);
    PQfinish(app);
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE queue = 'jobs' AND status IN ('completed', 'failed')",
            28, 30000);
    ASSERT_EQ(1, pg_int(&F.p, "SELECT count(*) FROM rjq_jobs WHERE status = 'failed' AND error = 'it failed on purpose'"));
    /* a restarted bridge follows the rows left open (awaits, job reads) */
    bridge_stop(b);
    rjq_worker_options o = quiet_worker_options(4);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(queue_for(F.ws.c[0], "jobs:high"), &o, handler, &F.ws, &w));
    b = bridge_spawn(extra);
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status NOT IN ('completed', 'failed')", 0, 30000);
    ASSERT_EQ(40, pg_int(&F.p, "SELECT count(*) FROM rjq_jobs WHERE status = 'completed'"));
    /* the process registry was read for the rows' worker_id */
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'completed' AND worker_id IS NULL", 0, 30000);
    wait_health(port, 200, "ok", 30000); /* the health's count of queued rows too */
    bridge_stop(b);
    /* the role was enough for all of it: Redis refused it nothing but
     * FUNCTION LOAD (an administrator's command: rjq runs its scripts with
     * EVALSHA then) */
    r = server_cmd(F.e.rc, "ACL LOG");
    ASSERT(r->type == REDIS_REPLY_ARRAY);
    for (size_t i = 0; i < r->elements; i++) { /* each entry: a flat list of fields */
        const redisReply *e = r->element[i];
        for (size_t k = 0; k + 1 < e->elements; k += 2)
            if (strcmp(e->element[k]->str, "object") == 0 && strcmp(e->element[k + 1]->str, "function|load") != 0)
                FAIL_AT(__FILE__, __LINE__, "the bridge was refused %s", e->element[k + 1]->str);
    }
    freeReplyObject(r);
    /* and it is refused what it does not need */
    redisContext *as = server_connect(&F.e.s);
    r = server_cmd(as, "AUTH rjq-pg-bridge bridge-pw");
    ASSERT(r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisReply *no[] = {server_cmd(as, "FLUSHALL"), server_cmd(as, "CONFIG GET maxmemory"),
                        server_cmd(as, "GET other:{jobs}:ready"), server_cmd(as, "DEL t:{jobs}:ready"),
                        server_cmd(as, "SET t:{jobs}:ready x")};
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
        if (no[i]->type != REDIS_REPLY_ERROR || strncmp(no[i]->str, "NOPERM", 6) != 0)
            FAIL_AT(__FILE__, __LINE__, "command %zu was not refused", i);
        freeReplyObject(no[i]);
    }
    redisFree(as);
    teardown();
}

/* The fault run of issue 32, one of each fault in one run: 5 000 rows
 * inserted in 100-row transactions while the bridge is SIGKILLed (and
 * started again), PostgreSQL shut down immediately (crash recovery) and
 * restarted, and redis-server SIGKILLed and restarted on its append-only
 * file (appendfsync always); each fault strikes while rows are still to
 * move and run. Every row's job runs exactly once and every row ends
 * completed with its result and one attempt. */
/* Rows first..first+n-1 of "jobs" with those ids (a crash makes the
 * sequence skip values). */
static void insert_rows_with_ids(long first, long n) {
    char sql[512];
    snprintf(sql, sizeof sql,
             "INSERT INTO rjq_jobs (id, queue, payload) SELECT g, 'jobs', convert_to('p' || g, 'UTF8') "
             "FROM generate_series(%ld, %ld) g ORDER BY g",
             first, first + n - 1);
    pg_exec(&F.p, sql);
}

TEST(five_thousand_rows_through_bridge_postgres_and_redis_kills_each_job_runs_once) {
    memset(&F.ws, 0, sizeof F.ws);
    pg_start_private(&F.p);
    init_table(&F.p);
    memset(&F.e, 0, sizeof F.e);
    const char *aof[] = {"--appendonly", "yes", "--appendfsync", "always", NULL};
    server_start_guarded(&F.e.s, aof);
    F.e.base = event_base_new();
    ASSERT(F.e.base != NULL);
    F.e.c = client_for(F.e.base, &F.e.s);
    ASSERT_OK(rjq_queue_open(F.e.c, "jobs", NULL, &F.e.q));
    F.e.rc = server_connect(&F.e.s);
    wait_connected(F.e.base, F.e.c);
    double t0 = mono_ms();
    workers_start("jobs", 2, 8);
    const char *extra[] = {"--batch", "100", "--scan-ms", "1000", NULL};
    pid_t b = bridge_spawn(extra);
    long inserted = 0;
    for (int fault = 0; fault < 3; fault++) {
        for (int t = 0; t < 12; t++, inserted += 100) insert_rows_with_ids(inserted + 1, 100);
        wait_runs(inserted - 600); /* work left: at least 600 rows (the loop runs the workers) */
        ASSERT(pg_int(&F.p, "SELECT count(*) FROM rjq_jobs WHERE status <> 'completed'") > 0);
        if (fault == 0) { /* the bridge, mid-claim or mid-write */
            kill(b, SIGKILL);
            reap(b, 10000);
            b = bridge_spawn(extra);
        } else if (fault == 1) { /* PostgreSQL: an immediate shutdown, then recovery */
            pg_crash(&F.p);
            /* jobs end meanwhile (when Redis has any): their outcomes wait */
            long ran = F.ws.total;
            WAIT_FOR(F.e.base, F.ws.total > ran || get_stats(F.e.base, F.e.q).ready == 0, 30000);
            pg_resume(&F.p);
        } else { /* Redis: SIGKILL, then its AOF */
            pid_t old = F.e.s.pid;
            ASSERT(kill(old, SIGKILL) == 0);
            ASSERT(waitpid(old, NULL, 0) == old);
            forget_on_abort(old);
            F.e.s.pid = 0;
            redisFree(F.e.rc);
            WAIT_FOR(F.e.base, !rjq_client_is_connected(F.e.c), 10000); /* its clients saw it go */
            server_restart(&F.e.s, aof);
            kill_on_abort(F.e.s.pid);
            F.e.rc = server_connect(&F.e.s);
        }
    }
    for (int t = 0; t < 14; t++, inserted += 100) insert_rows_with_ids(inserted + 1, 100);
    ASSERT_EQ(5000, inserted);
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status <> 'completed'", 0, 90000);
    assert_all_completed_once(5000);
    ASSERT_EQ(5000, F.ws.total);
    ASSERT_EQ(5000, get_stats(F.e.base, F.e.q).enqueued); /* no id enqueued twice */
    fprintf(stderr, "5000 rows through three kills in %.1f s\n", (mono_ms() - t0) / 1000);
    bridge_stop(b);
    teardown();
}

/* On a Redis Cluster (issue 34): a bridge given one node's URL moves the
 * rows of three queues, one on each master, and follows their outcomes;
 * workers given the same URL run each job once. */
TEST(a_bridge_on_a_cluster_moves_rows_to_queues_on_three_masters) {
    static test_cluster cl;
    memset(&F.ws, 0, sizeof F.ws);
    pg_start(&F.p);
    init_table(&F.p);
    cluster_start(&cl, 0);
    memset(&F.e, 0, sizeof F.e);
    snprintf(F.e.s.url, sizeof F.e.s.url, "%s", cl.url); /* (the bridge's and workers' URL) */
    F.e.base = event_base_new();
    ASSERT(F.e.base != NULL);
    char names[CLUSTER_MASTERS][16];
    const char *queues[CLUSTER_MASTERS];
    int seen[CLUSTER_MASTERS] = {0}, n = 0;
    for (int i = 0; n < CLUSTER_MASTERS && i < 1000; i++) {
        char name[16];
        snprintf(name, sizeof name, "pq%d", i);
        int owner = cluster_owner(&cl, 0, rjq__key_slot(name, strlen(name)));
        ASSERT(owner >= 0 && owner < CLUSTER_MASTERS);
        if (seen[owner]++) continue;
        snprintf(names[n], sizeof names[n], "%s", name);
        queues[n] = names[n];
        n++;
    }
    ASSERT_EQ(CLUSTER_MASTERS, n);
    workers_start_each(queues, CLUSTER_MASTERS, 4);
    pid_t b = bridge_spawn(NULL);
    for (int i = 0; i < CLUSTER_MASTERS; i++) insert_rows(names[i], 1 + 20 * i, 20, "0");
    wait_pg("SELECT count(*) FROM rjq_jobs WHERE status = 'completed'", 60, 60000);
    assert_all_completed_once(60);
    /* each queue's jobs are on its own master */
    for (int i = 0; i < CLUSTER_MASTERS; i++) {
        char key[64];
        snprintf(key, sizeof key, "t:{%s}:stats", names[i]);
        ASSERT_EQ(1, cluster_node_int(&cl, cluster_node_of_key(&cl, key), "EXISTS %s", key));
    }
    bridge_stop(b);
    workers_free(&F.ws);
    event_base_free(F.e.base);
    memset(&F.e, 0, sizeof F.e);
    cluster_stop(&cl);
    pg_stop(&F.p);
}
