/*
 * Least privilege: the users `rjq acl` prints (producer, worker, monitor)
 * each do their job through rjq (enqueue and await; run jobs, fail and
 * retry them, let one die; read stats, a job, the dead list, watch events),
 * and are refused everything else: another prefix's keys, FLUSHALL,
 * CONFIG, and for the monitor any write.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <rjq/libevent.h>

#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

#define PW "acl-test-pw"

/* Create the users of `rjq --prefix t acl` on the server (CHANGE-ME -> PW). */
static void create_users(redisContext *rc) {
    FILE *p = popen(RJQ_BUILD_DIR "/rjq --prefix t acl", "r");
    ASSERT(p != NULL);
    char line[4096];
    int users = 0;
    while (fgets(line, sizeof line, p)) {
        if (strncmp(line, "ACL SETUSER ", 12) != 0) continue;
        const char *argv[128];
        size_t n = 0;
        for (char *tok = strtok(line, " \n"); tok && n < 128; tok = strtok(NULL, " \n"))
            argv[n++] = strcmp(tok, ">CHANGE-ME") == 0 ? ">" PW : tok;
        redisReply *r = redisCommandArgv(rc, (int)n, argv, NULL);
        ASSERT(r != NULL);
        if (r->type == REDIS_REPLY_ERROR) FAIL_AT(__FILE__, __LINE__, "%s: %s", argv[2], r->str);
        freeReplyObject(r);
        users++;
    }
    ASSERT_EQ(0, pclose(p));
    ASSERT_EQ(3, users);
}

static rjq_client *client_as(struct event_base *base, const test_server *s, const char *user,
                             const char *prefix) {
    static char url[8][128];
    static int next;
    char *u = url[next++ % 8];
    snprintf(u, 128, "redis://%s:%s@127.0.0.1:%d", user, PW, s->port);
    rjq_client_options o = client_options(u);
    o.prefix = prefix;
    return client_new(base, &o);
}

/* The worker: "fail" fails for good, "retry" fails its first attempt. */
static void handler(rjq_job *job, void *data) {
    (void)data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    if (len == 4 && memcmp(p, "fail", 4) == 0)
        ASSERT_OK(rjq_job_fail(job, "no", RJQ_FAIL_FATAL, -1, NULL, NULL));
    else if (len == 5 && memcmp(p, "retry", 5) == 0 && rjq_job_get_attempt(job) == 1)
        ASSERT_OK(rjq_job_fail(job, "again", RJQ_FAIL_RETRY, 0, NULL, NULL));
    else
        ASSERT_OK(rjq_job_complete(job, p, len, NULL, NULL));
}

static long ok_outcomes, dead_outcomes, stats_seen, job_seen, dead_listed, events_seen;
static long big_batches;

static void on_big_batch(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)jobs, (void)data;
    if (status != RJQ_OK) FAIL_AT(__FILE__, __LINE__, "big batch: %d: %s", status, rjq_client_get_errmsg(c));
    ASSERT_EQ(4, n);
    big_batches++;
}
static long refused;

static void on_outcome(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)c, (void)o, (void)data;
    if (status == RJQ_OK) ok_outcomes++;
    else if (status == RJQ_EJOBDEAD) dead_outcomes++;
    else FAIL_AT(__FILE__, __LINE__, "await ended with %d: %s", status, rjq_client_get_errmsg(c));
}

static void on_stats(rjq_client *c, int status, const rjq_stats *s, void *data) {
    (void)c, (void)data;
    ASSERT_OK(status);
    ASSERT(s->completed >= 1);
    stats_seen++;
}

static void on_job(rjq_client *c, int status, const rjq_job_info *info, void *data) {
    (void)c, (void)data, (void)info;
    ASSERT_OK(status);
    job_seen++;
}

static void on_dead(rjq_client *c, int status, const char *const *ids, size_t n, void *data) {
    (void)c, (void)ids, (void)data;
    ASSERT_OK(status);
    ASSERT_EQ(1, n);
    dead_listed++;
}

static long ids_listed;

static void on_ids_listed(rjq_client *c, int status, const char *const *ids, size_t n, void *data) {
    (void)ids, (void)data;
    if (status != RJQ_OK) FAIL_AT(__FILE__, __LINE__, "listing: %d: %s", status, rjq_client_get_errmsg(c));
    ASSERT(n <= 10);
    ids_listed++;
}

static void on_monitor(rjq_client *c, const char *event, const char *id, void *data) {
    (void)c, (void)event, (void)id, (void)data;
    events_seen++;
}

static void on_refused(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs, (void)n, (void)data;
    ASSERT(status != RJQ_OK);
    refused++;
}

static long controls_ok, controls_refused;
static void on_control(rjq_client *c, int status, long long n, void *data) {
    (void)c, (void)n;
    if (data) {
        ASSERT(status != RJQ_OK);
        controls_refused++;
    } else {
        ASSERT_OK(status);
        controls_ok++;
    }
}
static void on_cancel_ok(rjq_client *c, int status, const char *state, void *data) {
    (void)c, (void)state, (void)data;
    ASSERT_OK(status);
    controls_ok++;
}

static void on_listed(rjq_client *c, int status, const rjq_schedule_info *l, size_t n, void *data) {
    (void)c, (void)data;
    ASSERT_OK(status);
    ASSERT_EQ(1, n);
    ASSERT_STREQ("tick", l[0].name);
    controls_ok++;
}

static long shorts;
static void on_short(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)data;
    ASSERT_EQ(RJQ_EREPLICAS, status);
    ASSERT_EQ(1, n);
    ASSERT(jobs[0].id != NULL);
    shorts++;
}

/* The reply to a synchronous command as `user` (the caller frees it and
 * *rc). */
static redisReply *as_user(const test_server *s, const char *user, const char *cmd,
                           redisContext **rc) {
    *rc = server_connect(s);
    redisReply *r = redisCommand(*rc, "AUTH %s %s", user, PW);
    ASSERT(r && r->type != REDIS_REPLY_ERROR);
    freeReplyObject(r);
    r = redisCommand(*rc, cmd);
    ASSERT(r != NULL);
    return r;
}

/* A synchronous command as `user` is allowed. */
static void expect_allowed(const test_server *s, const char *user, const char *cmd) {
    redisContext *rc;
    redisReply *r = as_user(s, user, cmd, &rc);
    if (r->type == REDIS_REPLY_ERROR) FAIL_AT(__FILE__, __LINE__, "%s: %s: %s", user, cmd, r->str);
    freeReplyObject(r);
    redisFree(rc);
}

/* A synchronous command as `user` is refused with NOPERM. */
static void expect_noperm(const test_server *s, const char *user, const char *fmt) {
    redisContext *rc;
    redisReply *r = as_user(s, user, fmt, &rc);
    if (r->type != REDIS_REPLY_ERROR || strncmp(r->str, "NOPERM", 6) != 0)
        FAIL_AT(__FILE__, __LINE__, "%s: \"%s\" was not refused", user, fmt);
    freeReplyObject(r);
    redisFree(rc);
}

static long names_listed;
static char queue_names[256];

static void on_queue_names(rjq_client *c, int status, const char *const *names, size_t n,
                           void *data) {
    (void)c, (void)data;
    ASSERT_OK(status);
    for (size_t i = 0; i < n; i++)
        snprintf(queue_names + strlen(queue_names), sizeof queue_names - strlen(queue_names), "%s%s",
                 i ? "," : "", names[i]);
    names_listed++;
}

static long processes_listed;
static char process_queues[256];

static void on_processes_listed(rjq_client *c, int status, const rjq_process *list, size_t n,
                                void *data) {
    (void)c, (void)data;
    ASSERT_OK(status);
    process_queues[0] = '\0';
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < rjq_process_get(list, i)->nqueues; k++)
            snprintf(process_queues + strlen(process_queues),
                     sizeof process_queues - strlen(process_queues), "%s%s",
                     process_queues[0] ? "," : "", rjq_process_queue_get(rjq_process_get(list, i)->queues, k)->queue);
    processes_listed++;
}

static long memory_read;

static void on_memory_read(rjq_client *c, int status, const rjq_memory_info *m, void *data) {
    (void)c, (void)data;
    ASSERT_OK(status);
    ASSERT(m->maxmemory_policy[0]);
    memory_read++;
}

/* Does the process list read by monitor name exactly the queues `want`? */
static int processes_of(struct event_base *base, rjq_client *monitor, const char *want) {
    long before = processes_listed;
    ASSERT_OK(rjq_client_list_processes(monitor, 0, 10, on_processes_listed, NULL));
    ASSERT(loop_until_count(base, &processes_listed, before + 1, 5000));
    return strcmp(process_queues, want) == 0;
}

/* The jobs the schedule "tick" has fired on queue jobs (their payloads). */
static long groups_listed;
static void on_groups_listed(rjq_client *c, int status, long long total, const rjq_group_info *l,
                             size_t n, void *data) {
    (void)c;
    (void)data;
    ASSERT_OK(status);
    ASSERT_EQ(1, total); /* (tenant-1: ready) */
    ASSERT(n == 1 && strcmp(l[0].name, "tenant-1") == 0 && l[0].depth == 1);
    groups_listed++;
}

static long long ticks_fired(redisContext *admin) {
    redisReply *r = server_cmd(admin, "HSCAN t:{jobs}:payload 0 MATCH tick@* COUNT 10000");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    long long n = (long long)r->element[1]->elements / 2;
    freeReplyObject(r);
    return n;
}

TEST(each_acl_role_does_its_job_and_nothing_else) {
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *admin = server_connect(&s);
    create_users(admin);
    struct event_base *base = event_base_new();
    rjq_client *producer = client_as(base, &s, "rjq-producer", "t");
    rjq_client *worker = client_as(base, &s, "rjq-worker", "t");
    rjq_client *monitor = client_as(base, &s, "rjq-monitor", "t");
    wait_connected(base, producer);
    wait_connected(base, worker);
    wait_connected(base, monitor);
    rjq_queue *pq = queue_for(producer, "jobs"), *wq = queue_for(worker, "jobs"),
              *mq = queue_for(monitor, "jobs");
    rjq_monitor *m;
    ASSERT_OK(rjq_queue_monitor(mq, on_monitor, NULL, &m));
    wait_monitoring(base, monitor, "jobs");
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(wq, NULL, handler, NULL, &w));
    /* plain, delayed, prioritised, retried and dead jobs, all awaited */
    rjq_job_options delayed = RJQ_JOB_OPTIONS_INIT, urgent = RJQ_JOB_OPTIONS_INIT;
    delayed.delay_ms = 50;
    urgent.priority = 5;
    for (int i = 0; i < 20; i++) {
        const char *payload = i == 7 ? "fail" : i % 5 == 1 ? "retry" : "work";
        const rjq_job_options *o = i % 3 == 0 ? &delayed : i % 3 == 1 ? &urgent : NULL;
        ASSERT_OK(rjq_enqueue_await(pq, payload, strlen(payload), o, NULL, on_outcome, NULL, NULL));
    }
    ASSERT(loop_until_count(base, &ok_outcomes, 19, 10000));
    ASSERT(loop_until_count(base, &dead_outcomes, 1, 5000));
    /* a batch of more than 1 MiB: several calls in one transaction */
    static char chunk[400 << 10];
    memset(chunk, 'c', sizeof chunk);
    rjq_enqueue_item items[4];
    for (int i = 0; i < 4; i++) items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), chunk, sizeof chunk, NULL};
    ASSERT_OK(rjq_enqueue_batch(pq, items, 4, on_big_batch, NULL));
    ASSERT(loop_until_count(base, &big_batches, 1, 10000));
    /* big payloads: after the first, the worker claims ids only and reads
     * the payloads itself (a plain HMGET); paused, so that a claim (not a
     * push) takes them */
    static char big[24 * 1024];
    memset(big, 'b', sizeof big);
    ASSERT_OK(rjq_enqueue_await(pq, big, sizeof big, NULL, NULL, on_outcome, NULL, NULL));
    ASSERT(loop_until_count(base, &ok_outcomes, 20, 10000));
    ASSERT_OK(rjq_queue_pause(wq, on_control, NULL));
    ASSERT(loop_until_count(base, &controls_ok, 1, 5000));
    for (int i = 0; i < 2; i++)
        ASSERT_OK(rjq_enqueue_await(pq, big, sizeof big, NULL, NULL, on_outcome, NULL, NULL));
    ASSERT_OK(rjq_queue_resume(wq, on_control, NULL));
    ASSERT(loop_until_count(base, &ok_outcomes, 22, 10000));
    ASSERT(loop_until_count(base, &controls_ok, 2, 5000));
    ASSERT_OK(rjq_queue_get_stats(mq, on_stats, NULL));
    ASSERT(loop_until_count(base, &stats_seen, 1, 5000));
    rjq_job_options id = RJQ_JOB_OPTIONS_INIT;
    id.id = "known";
    ASSERT_OK(enqueue_job(base, pq, "x", &id).status);
    ASSERT_OK(rjq_queue_get_job(mq, "known", on_job, NULL));
    ASSERT(loop_until_count(base, &job_seen, 1, 5000));
    ASSERT_OK(rjq_queue_list_dead(mq, 0, 10, on_dead, NULL));
    ASSERT(loop_until_count(base, &dead_listed, 1, 5000));
    ASSERT_OK(rjq_queue_list_jobs(mq, RJQ_STATE_DEAD, 0, 10, on_dead, NULL)); /* the script */
    ASSERT(loop_until_count(base, &dead_listed, 2, 5000));
    ASSERT_OK(rjq_queue_list_jobs(mq, RJQ_STATE_READY, 0, 10, on_ids_listed, NULL));
    ASSERT_OK(rjq_queue_list_jobs(mq, RJQ_STATE_COMPLETED, 0, 10, on_ids_listed, NULL));
    ASSERT(loop_until_count(base, &ids_listed, 2, 5000));
    ASSERT(events_seen > 0);
    /* the producer and the worker named their queues in the registry (the
     * producer alone writes "pjobs"); the monitor reads it */
    ASSERT_OK(enqueue_job(base, queue_for(producer, "pjobs"), "x", NULL).status);
    queue_names[0] = '\0';
    ASSERT_OK(rjq_client_list_queues(monitor, NULL, 10, on_queue_names, NULL));
    ASSERT(loop_until_count(base, &names_listed, 1, 5000));
    ASSERT_STREQ("jobs,pjobs", queue_names);
    /* the worker's process is in the registry (its beats); the monitor lists it */
    WAIT_FOR(base, processes_of(base, monitor, "jobs"), 5000);
    /* and reads Redis' memory and eviction policy (INFO) */
    ASSERT_OK(rjq_client_get_memory(monitor, on_memory_read, NULL));
    ASSERT(loop_until_count(base, &memory_read, 1, 5000));
    /* and lists a queue's job groups (the listing only reads): a group
     * with a ready job, one with a delayed job only, one listed with
     * nothing left (left as it is) */
    rjq_queue *pg = queue_for(producer, "gjobs");
    rjq_job_options grouped = RJQ_JOB_OPTIONS_INIT;
    grouped.group = "tenant-1";
    ASSERT_OK(enqueue_job(base, pg, "x", &grouped).status);
    grouped.group = "tenant-2";
    grouped.delay_ms = 60000;
    ASSERT_OK(enqueue_job(base, pg, "x", &grouped).status);
    freeReplyObject(server_cmd(admin, "ZADD t:{gjobs}:g:all 0 tenant-0"));
    ASSERT_OK(rjq_queue_list_groups(queue_for(monitor, "gjobs"), NULL, 0, 10, on_groups_listed, NULL));
    ASSERT(loop_until_count(base, &groups_listed, 1, 5000));
    ASSERT_EQ(3, server_int(admin, "ZCARD t:{gjobs}:g:all"));

    /* controls: the producer cancels; the worker role also pauses,
     * resumes, limits and cancels; the monitor does none of it */
    rjq_job_options later = RJQ_JOB_OPTIONS_INIT;
    later.delay_ms = 60000;
    later.id = "to-cancel";
    ASSERT_OK(enqueue_job(base, pq, "x", &later).status);
    later.id = "to-cancel-2";
    ASSERT_OK(enqueue_job(base, pq, "x", &later).status);
    ASSERT_OK(rjq_queue_cancel(pq, "to-cancel", on_cancel_ok, NULL));
    ASSERT_OK(rjq_queue_cancel(wq, "to-cancel-2", on_cancel_ok, NULL));
    ASSERT_OK(rjq_queue_pause(wq, on_control, NULL));
    ASSERT_OK(rjq_queue_resume(wq, on_control, NULL));
    rjq_limits lim = {sizeof(rjq_limits), 3, 100, 1000};
    ASSERT_OK(rjq_queue_set_limits(wq, &lim, on_control, NULL));
    ASSERT(loop_until_count(base, &controls_ok, 7, 5000));
    rjq_job_options timed = RJQ_JOB_OPTIONS_INIT;
    timed.timeout_ms = 5000;
    ASSERT_OK(rjq_enqueue_await(pq, "work", 4, &timed, NULL, on_outcome, NULL, NULL));
    ASSERT(loop_until_count(base, &ok_outcomes, 23, 5000)); /* a limited claim */
    ASSERT_OK(rjq_queue_set_limits(wq, NULL, on_control, NULL));
    ASSERT(loop_until_count(base, &controls_ok, 8, 5000));
    ASSERT_OK(rjq_enqueue_await(pq, "work", 4, &timed, NULL, on_outcome, NULL, NULL));
    ASSERT(loop_until_count(base, &ok_outcomes, 24, 5000)); /* pushed: deadlines written */
    /* schedules: the worker role sets them and runs the scheduler, the
     * monitor lists them */
    rjq_schedule sch = RJQ_SCHEDULE_INIT;
    sch.every_ms = 100;
    ASSERT_OK(rjq_schedule_set(wq, "tick", &sch, on_control, NULL));
    ASSERT(loop_until_count(base, &controls_ok, 9, 5000));
    rjq_scheduler *sched;
    ASSERT_OK(rjq_scheduler_start(wq, 0, &sched));
    WAIT_FOR(base, server_int(admin, "ZCOUNT t:{jobs}:schednext 1 +inf") > 0, 5000);
    WAIT_FOR(base, ticks_fired(admin) >= 1, 5000); /* (an HSCAN reply lists field and value) */
    ASSERT(rjq_scheduler_is_leading(sched));
    ASSERT(server_int(admin, "HLEN t:{jobs}:payload") > 0);
    ASSERT_OK(rjq_scheduler_stop(sched));
    ASSERT_OK(rjq_schedule_list(mq, on_listed, NULL));
    ASSERT(loop_until_count(base, &controls_ok, 10, 5000));
    /* an operator with the worker role deletes dead jobs; the monitor not */
    ASSERT_OK(rjq_queue_purge(mq, RJQ_STATE_DEAD, 10, on_control, &controls_refused));
    ASSERT(loop_until_count(base, &controls_refused, 1, 5000));
    ASSERT_OK(rjq_queue_purge(wq, RJQ_STATE_DEAD, 10, on_control, NULL));
    ASSERT(loop_until_count(base, &controls_ok, 11, 5000));
    ASSERT_EQ(0, server_int(admin, "ZCARD t:{jobs}:dead"));
    ASSERT_OK(rjq_queue_pause(mq, on_control, &controls_refused));
    ASSERT_OK(rjq_queue_set_limits(mq, NULL, on_control, &controls_refused));
    ASSERT(loop_until_count(base, &controls_refused, 3, 5000));

    /* through rjq: the monitor cannot enqueue, nobody can use another prefix */
    ASSERT_OK(rjq_enqueue(mq, "x", 1, NULL, on_refused, NULL));
    ASSERT(loop_until_count(base, &refused, 1, 5000));
    rjq_client *other = client_as(base, &s, "rjq-producer", "other");
    rjq_queue *oq = queue_for(other, "jobs");
    ASSERT_OK(rjq_enqueue(oq, "x", 1, NULL, on_refused, NULL));
    ASSERT(loop_until_count(base, &refused, 2, 5000));
    ASSERT_EQ(0, server_int(admin, "EXISTS other:{jobs}:ready"));
    rjq_client_free(other);

    /* WAIT (wait_replicas) and ROLE (Sentinel) are the users' too: no
     * replica here, so the write is reported short, not refused */
    rjq_client_options po = client_options(NULL);
    char url[128];
    snprintf(url, sizeof url, "redis://rjq-producer:%s@127.0.0.1:%d", PW, s.port);
    po.url = url;
    po.prefix = "t";
    po.wait_replicas = 1;
    po.wait_timeout_ms = 50;
    rjq_client *durable = client_new(base, &po);
    ASSERT_OK(rjq_enqueue(queue_for(durable, "jobs"), "x", 1, NULL, on_short, NULL));
    ASSERT(loop_until_count(base, &shorts, 1, 5000));
    ASSERT(strstr(rjq_client_get_errmsg(durable), "0 of 1 replicas confirmed") != NULL);
    rjq_client_free(durable);
    expect_allowed(&s, "rjq-worker", "ROLE");

    /* and directly */
    static const char *const users[] = {"rjq-producer", "rjq-worker", "rjq-monitor"};
    for (int i = 0; i < 3; i++) {
        expect_noperm(&s, users[i], "FLUSHALL");
        expect_noperm(&s, users[i], "CONFIG GET maxmemory");
        expect_noperm(&s, users[i], "HGET other:{jobs}:payload 1");
        expect_noperm(&s, users[i], "FUNCTION FLUSH");
        expect_noperm(&s, users[i], "KEYS *");
    }
    expect_noperm(&s, "rjq-monitor", "HSET t:{jobs}:payload 1 x");
    expect_noperm(&s, "rjq-monitor", "DEL t:{jobs}:ready");
    expect_noperm(&s, "rjq-monitor", "SET t:{jobs}:ready x"); /* SET reaches only the flag */
    expect_noperm(&s, "rjq-monitor", "HSET t:{clients}:info x y"); /* reads the registry only */
    expect_noperm(&s, "rjq-producer", "DEL t:{jobs}:ready");
    ASSERT_OK(rjq_monitor_stop(m));
    rjq_client_free(monitor);
    rjq_client_free(worker);
    rjq_client_free(producer);
    event_base_free(base);
    redisFree(admin);
    server_stop_guarded(&s);
}

/* ---- permissions refused: final, told, never a hang (issue 31 item 2) ---- */

/* Create user `name` with the rules `rjq --prefix t acl --queues jobs --role
 * <role>` prints, less those in drop (NULL-ended). */
static void create_user_less(redisContext *rc, const char *role, const char *name,
                             const char *const *drop) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, RJQ_BUILD_DIR "/rjq --prefix t acl --queues jobs --role %s", role);
    FILE *p = popen(cmd, "r");
    ASSERT(p != NULL);
    char line[4096];
    int made = 0;
    while (fgets(line, sizeof line, p)) {
        if (strncmp(line, "ACL SETUSER ", 12) != 0) continue;
        const char *argv[128];
        size_t n = 0;
        for (char *tok = strtok(line, " \n"); tok && n < 128; tok = strtok(NULL, " \n")) {
            int dropped = 0;
            for (const char *const *d = drop; *d; d++) dropped |= strcmp(tok, *d) == 0;
            if (dropped) continue;
            argv[n] = n == 2 ? name : strcmp(tok, ">CHANGE-ME") == 0 ? ">" PW : tok;
            n++;
        }
        redisReply *r = redisCommandArgv(rc, (int)n, argv, NULL);
        ASSERT(r != NULL);
        if (r->type == REDIS_REPLY_ERROR) FAIL_AT(__FILE__, __LINE__, "%s: %s", name, r->str);
        freeReplyObject(r);
        made++;
    }
    ASSERT_EQ(0, pclose(p));
    ASSERT_EQ(1, made);
}

/* What a client's event listener heard, per connection. */
typedef struct heard {
    long connected[2], errors[2];
    char error[2][512];       /* the last error's detail */
    const char *needle;       /* ... and counted in matched when it holds this */
    long matched;
    char match[512];
} heard;

static void on_heard(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    heard *h = data;
    (void)c;
    ASSERT(conn == RJQ_CONN_COMMAND || conn == RJQ_CONN_SUBSCRIBER);
    if (ev == RJQ_EVENT_CONNECTED) h->connected[conn]++;
    if (ev != RJQ_EVENT_ERROR) return;
    h->errors[conn]++;
    snprintf(h->error[conn], sizeof h->error[conn], "%s", detail);
    if (h->needle && strstr(detail, h->needle)) {
        h->matched++;
        snprintf(h->match, sizeof h->match, "%s", detail);
    }
}

/* A client as user (password pw) whose events go to h; reconnect_max_ms
 * 3000, so its reconnect span (with connect_timeout_ms) is 5 s. */
static rjq_client *client_heard(struct event_base *base, const test_server *s, const char *user,
                                const char *pw, heard *h) {
    static char url[8][160];
    static int next;
    char *u = url[next++ % 8];
    snprintf(u, 160, "redis://%s:%s@127.0.0.1:%d", user, pw, s->port);
    rjq_client_options o = client_options(u);
    o.on_event = on_heard;
    o.event_data = h;
    o.reconnect_max_ms = 3000;
    return client_new(base, &o);
}

typedef struct ended {
    int done, status;
    char errmsg[256];
} ended;

static void on_ended(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    ended *e = data;
    (void)o;
    ASSERT_EQ(0, e->done); /* exactly once */
    e->done = 1;
    e->status = status;
    snprintf(e->errmsg, sizeof e->errmsg, "%s", rjq_client_get_errmsg(c));
}

static ended await_one(struct event_base *base, rjq_queue *q) {
    ended e = {0};
    ASSERT_OK(rjq_enqueue_await(q, "x", 1, NULL, NULL, on_ended, &e, NULL));
    ASSERT(loop_until(base, &e.done, 10000));
    return e;
}

/* The channel refusals in the ACL log: of the client's probe channel
 * ("...:live", probe 1) or of the others (probe 0). */
static long long acl_log_channel_count(redisContext *admin, int probe) {
    redisReply *lg = server_cmd(admin, "ACL LOG");
    long long n = 0;
    ASSERT(lg->type == REDIS_REPLY_ARRAY);
    for (size_t i = 0; i < lg->elements; i++) {
        const redisReply *e = lg->element[i];
        long long count = 0;
        int channel = 0, live = 0;
        for (size_t k = 0; k + 1 < e->elements; k += 2) {
            const char *key = e->element[k]->str;
            const redisReply *v = e->element[k + 1];
            if (strcmp(key, "count") == 0) count = v->integer;
            if (strcmp(key, "reason") == 0) channel = strcmp(v->str, "channel") == 0;
            if (strcmp(key, "object") == 0)
                live = v->len >= 5 && strcmp(v->str + v->len - 5, ":live") == 0;
        }
        if (channel && live == probe) n += count;
    }
    freeReplyObject(lg);
    return n;
}

static long monitor_events;
static void count_monitor(rjq_client *c, const char *event, const char *id, void *data) {
    (void)c, (void)event, (void)id, (void)data;
    monitor_events++;
}

/* An ACL without the reply channels ("<prefix>:reply:*"): the client's
 * probe channel and its reply channel are refused. An await ends with
 * RJQ_EAUTH and the server's words, an RJQ_EVENT_ERROR names the channel,
 * and a refused channel is not subscribed again on every reconnect (the
 * subscriber connection stays up for the channels it may have): the reply
 * channel, whose listener went with its awaits, not at all; the probe
 * channel, which keeps its listener, at most once per reconnect span. */
TEST(refused_reply_channel_ends_awaits_with_eauth_and_is_not_subscribed_again) {
    double start = mono_ms();
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *admin = server_connect(&s);
    const char *const drop[] = {"&t:reply:*", NULL};
    create_user_less(admin, "worker", "noreply", drop);
    struct event_base *base = event_base_new();
    heard h = {0};
    h.needle = ":framed";
    rjq_client *c = client_heard(base, &s, "noreply", PW, &h);
    rjq_queue *q = queue_for(c, "jobs");
    wait_connected(base, c);
    ended e = await_one(base, q);
    ASSERT_EQ(RJQ_EAUTH, e.status);
    ASSERT(strstr(e.errmsg, "NOPERM") != NULL);
    ASSERT(h.matched >= 1); /* the event names the reply channel and says why */
    ASSERT(strstr(h.match, "SUBSCRIBE t:reply:") != NULL && strstr(h.match, "NOPERM") != NULL);
    /* the next await tries again (the ACL may have been fixed): refused again */
    e = await_one(base, q);
    ASSERT_EQ(RJQ_EAUTH, e.status);
    ASSERT_EQ(0, rjq_client_count_awaits(c));
    /* the subscriber connection comes back and holds the channels it may
     * have: a monitor hears an enqueue */
    long before = h.connected[RJQ_CONN_SUBSCRIBER];
    ASSERT(loop_until_count(base, &h.connected[RJQ_CONN_SUBSCRIBER], before + 1, 10000));
    rjq_monitor *m;
    ASSERT_OK(rjq_queue_monitor(q, count_monitor, NULL, &m));
    WAIT_FOR(base, server_numsub(admin, "t:{jobs}:events") > 0, 10000);
    enqueue_job(base, q, "y", NULL);
    ASSERT(loop_until_count(base, &monitor_events, 1, 10000));
    /* the reply channel: one refusal per await (not every reconnect, and
     * never tried again without a listener); the probe channel: once, and
     * again at most once per reconnect span (5 s) since */
    ASSERT_EQ(2, acl_log_channel_count(admin, 0));
    long long probe = acl_log_channel_count(admin, 1);
    ASSERT(probe >= 1);
    ASSERT(probe <= 1 + (long long)((mono_ms() - start) / 5000));
    ASSERT_OK(rjq_monitor_stop(m));
    rjq_client_free(c);
    event_base_free(base);
    redisFree(admin);
    server_stop_guarded(&s);
}

/* An ACL without +subscribe: every channel is refused at once. */
TEST(no_subscribe_permission_ends_awaits_with_eauth) {
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *admin = server_connect(&s);
    const char *const drop[] = {"+subscribe", NULL};
    create_user_less(admin, "producer", "nosubscribe", drop);
    struct event_base *base = event_base_new();
    heard h = {0};
    h.needle = "'subscribe'";
    rjq_client *c = client_heard(base, &s, "nosubscribe", PW, &h);
    rjq_queue *q = queue_for(c, "jobs");
    wait_connected(base, c);
    ended e = await_one(base, q);
    ASSERT_EQ(RJQ_EAUTH, e.status);
    ASSERT(strstr(e.errmsg, "NOPERM") != NULL);
    ASSERT(h.matched >= 1);
    ASSERT(strstr(h.match, "SUBSCRIBE") != NULL);
    /* the job was not enqueued: its caller was told it failed */
    ASSERT_EQ(0, server_int(admin, "HLEN t:{jobs}:payload"));
    rjq_client_free(c);
    event_base_free(base);
    redisFree(admin);
    server_stop_guarded(&s);
}

/* A worker whose ACL lacks a command its scripts run (zadd), or EVALSHA
 * itself: the refusal is an RJQ_EVENT_ERROR naming the script and its
 * keys with the server's words, not only a line in rjq_client_get_errmsg. */
TEST(worker_refused_a_script_command_reports_an_error_event) {
    static const char *const missing[] = {"+zadd", "+evalsha"};
    for (int i = 0; i < 2; i++) {
        test_server s;
        server_start_guarded(&s, NULL);
        redisContext *admin = server_connect(&s);
        const char *const drop[] = {missing[i], NULL};
        create_user_less(admin, "worker", "lacking", drop);
        struct event_base *base = event_base_new();
        heard h = {0};
        h.needle = "script claim keys t:{jobs}:";
        rjq_client *c = client_heard(base, &s, "lacking", PW, &h);
        rjq_client *producer = client_for(base, &s);
        rjq_queue *pq = queue_for(producer, "jobs");
        enqueue_job(base, pq, "x", NULL);
        rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
        wo.concurrency = 1;
        wo.reclaim_ms = 50; /* the queue's visits find the job waiting this often */
        rjq_worker *w;
        ASSERT_OK(rjq_worker_start(queue_for(c, "jobs"), &wo, handler, NULL, &w));
        ASSERT(loop_until_count(base, &h.matched, 1, 10000));
        ASSERT(strstr(h.match, "permission refused") != NULL);
        ASSERT(strstr(h.match, i == 0 ? "The user executing the script can't run this command"
                                      : "NOPERM this user has no permissions to run the 'evalsha'") !=
               NULL);
        if (i == 0) {
            /* no hot loop: 40 more script calls (visits that find the job
             * waiting, every 50 ms: 2 s) and the claim, refused, is not sent
             * on each (it waits for the reconnect span, 5 s here) */
            long long from = server_calls(admin, "evalsha");
            WAIT_FOR(base, server_calls(admin, "evalsha") >= from + 40, 15000);
            if (h.matched > 3) FAIL_AT(__FILE__, __LINE__, "%ld claims refused", h.matched);
        }
        ASSERT_EQ(0, get_stats(base, pq).completed); /* nothing ran */
        ASSERT_EQ(0, server_active_jobs(admin, "jobs"));
        rjq_client_free(c);
        rjq_client_free(producer);
        event_base_free(base);
        redisFree(admin);
        server_stop_guarded(&s);
    }
}

static void on_enqueued_once(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n,
                             void *data) {
    ended *e = data;
    (void)jobs, (void)n;
    ASSERT_EQ(0, e->done);
    e->done = 1;
    e->status = status;
    snprintf(e->errmsg, sizeof e->errmsg, "%s", rjq_client_get_errmsg(c));
}

/* A wrong password: an enqueue with an id (which may be re-sent, so it
 * used to wait for a session that never comes) and an await end with
 * RJQ_EAUTH and the server's words. */
TEST(wrong_password_ends_enqueue_with_id_and_await_with_eauth) {
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *admin = server_connect(&s);
    create_users(admin);
    struct event_base *base = event_base_new();
    heard h = {0};
    h.needle = "WRONGPASS";
    rjq_client *c = client_heard(base, &s, "rjq-producer", "not-the-password", &h);
    rjq_queue *q = queue_for(c, "jobs");
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "with-id";
    ended e = {0};
    ASSERT_OK(rjq_enqueue(q, "x", 1, &o, on_enqueued_once, &e));
    ASSERT(loop_until(base, &e.done, 10000));
    ASSERT_EQ(RJQ_EAUTH, e.status);
    ASSERT(strstr(e.errmsg, "WRONGPASS") != NULL);
    ended a = await_one(base, q);
    ASSERT_EQ(RJQ_EAUTH, a.status);
    ASSERT(strstr(a.errmsg, "WRONGPASS") != NULL);
    ASSERT(h.matched >= 2); /* both connections said why */
    ASSERT_EQ(0, server_int(admin, "EXISTS t:{jobs}:payload"));
    rjq_client_free(c);
    event_base_free(base);
    redisFree(admin);
    server_stop_guarded(&s);
}

/* A worker whose ACL lacks the liveness keys ("<prefix>:{clients}:*"):
 * an RJQ_EVENT_ERROR names them; the worker runs its jobs all the same
 * (without liveness: they come back after their lease if it dies). */
TEST(worker_without_clients_keys_reports_liveness_refused) {
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *admin = server_connect(&s);
    const char *const drop[] = {"~t:{clients}:*", NULL};
    create_user_less(admin, "worker", "noclients", drop);
    struct event_base *base = event_base_new();
    heard h = {0};
    h.needle = "script beat keys t:{clients}:";
    char url[160];
    snprintf(url, sizeof url, "redis://noclients:%s@127.0.0.1:%d", PW, s.port);
    rjq_client_options o = client_options(url);
    o.on_event = on_heard;
    o.event_data = &h;
    o.liveness_ms = 1000; /* a beat every 333 ms */
    o.reconnect_max_ms = 3000; /* the reconnect span: 5 s */
    rjq_client *c = client_new(base, &o);
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.reclaim_ms = 50; /* a visit every 50 ms */
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(queue_for(c, "jobs"), &wo, handler, NULL, &w));
    ASSERT(loop_until_count(base, &h.matched, 1, 10000));
    ASSERT(strstr(h.match, "permission refused") != NULL && strstr(h.match, "NOPERM") != NULL);
    ASSERT(strstr(rjq_client_get_errmsg(c), "liveness beat: NOPERM") != NULL);
    /* the refused beat backs off (the reconnect span, 5 s here), not a
     * refusal every beat: 60 visits (3 s) later, at most a few more */
    long long from = server_calls(admin, "evalsha");
    WAIT_FOR(base, server_calls(admin, "evalsha") >= from + 60, 15000);
    if (h.matched > 3) FAIL_AT(__FILE__, __LINE__, "%ld beats refused", h.matched);
    rjq_client *producer = client_for(base, &s);
    ended e = await_one(base, queue_for(producer, "jobs"));
    ASSERT_EQ(RJQ_OK, e.status);
    rjq_client_free(producer);
    rjq_client_free(c);
    event_base_free(base);
    redisFree(admin);
    server_stop_guarded(&s);
}

/* The liveness keys taken away while the worker runs: once its beat is
 * refused it runs without liveness, as when it never had them; it does
 * not take its entry's end for its own death and hand every job it
 * claims back (a claim, a hand-back, a claim... without end). */
TEST(worker_whose_clients_keys_are_revoked_runs_on_without_liveness) {
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *admin = server_connect(&s);
    const char *const none[] = {NULL};
    create_user_less(admin, "worker", "revoked", none);
    struct event_base *base = event_base_new();
    heard h = {0};
    h.needle = "script beat keys t:{clients}:";
    char url[160];
    snprintf(url, sizeof url, "redis://revoked:%s@127.0.0.1:%d", PW, s.port);
    rjq_client_options o = client_options(url);
    o.on_event = on_heard;
    o.event_data = &h;
    o.liveness_ms = 1000;
    rjq_client *c = client_new(base, &o);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(queue_for(c, "jobs"), NULL, handler, NULL, &w));
    WAIT_FOR(base, server_int(admin, "ZCARD t:{clients}:live") > 0, 10000);
    ASSERT_EQ(1, server_int(admin, "ZCARD t:{clients}:live")); /* it beats */
    freeReplyObject(server_cmd(admin, "ACL SETUSER revoked resetkeys ~t:{jobs}:* %%W~t:queues"));
    ASSERT(loop_until_count(base, &h.matched, 1, 10000));
    /* past the end of its entry (1 s after its last beat), it still runs jobs */
    WAIT_FOR(base, server_int(admin, "ZCOUNT t:{clients}:live -inf %lld", server_now_ms(admin)) > 0,
             10000);
    rjq_client *producer = client_for(base, &s);
    ended e = await_one(base, queue_for(producer, "jobs"));
    ASSERT_EQ(RJQ_OK, e.status);
    rjq_client_free(producer);
    rjq_client_free(c);
    event_base_free(base);
    redisFree(admin);
    server_stop_guarded(&s);
}

/* A refusal is final for what it refused, not for ever: a worker whose
 * ACL lacked +subscribe (its doorbell and push channels refused) hears
 * them again once the ACL grants it, within a reconnect span or so; it
 * must not run on for the rest of its life at the pace of its visits
 * (reclaim_ms: 10 minutes here). */
TEST(worker_channels_refused_once_are_subscribed_again_once_the_acl_allows_them) {
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *admin = server_connect(&s);
    const char *const drop[] = {"+subscribe", NULL};
    create_user_less(admin, "worker", "latesub", drop);
    struct event_base *base = event_base_new();
    heard h = {0};
    h.needle = "'subscribe'";
    rjq_client *c = client_heard(base, &s, "latesub", PW, &h);
    rjq_queue *q = queue_for(c, "jobs");
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 1;
    wo.poll_ms = 60000;
    wo.reclaim_ms = 600000;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, handler, NULL, &w));
    ASSERT(loop_until_count(base, &h.matched, 1, 10000)); /* refused, and told */
    /* the subscriber connection is back (its channels refused) */
    long back = h.connected[RJQ_CONN_SUBSCRIBER] + 1;
    ASSERT(loop_until_count(base, &h.connected[RJQ_CONN_SUBSCRIBER], back, 10000));
    ASSERT_EQ(0, server_numsub(admin, "t:{jobs}:wake"));
    freeReplyObject(server_cmd(admin, "ACL SETUSER latesub +subscribe"));
    /* (its reconnect span is 5 s: three of them) */
    WAIT_FOR(base, server_numsub(admin, "t:{jobs}:wake") > 0, 15000);
    rjq_client_free(c);
    event_base_free(base);
    redisFree(admin);
    server_stop_guarded(&s);
}
