/*
 * wait_replicas: an enqueue, a completion and a failure report RJQ_OK only
 * once WAIT says enough replicas have them (the write is then on the
 * replica when the callback runs), and RJQ_EREPLICAS, with the enqueue's
 * jobs, when fewer confirm in wait_timeout_ms (a replica SIGSTOPped, or
 * more replicas asked for than there are). Work itself goes on as without
 * the option.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <rjq/libevent.h>

#include "fixture.h"
#include "harness.h"
#include "server.h"

typedef struct pair {
    test_server master, replica;
    redisContext *on_replica;
} pair;

static void pair_start(pair *p) {
    const char *master_args[] = {"--repl-diskless-sync-delay", "0", NULL};
    server_start_guarded(&p->master, master_args);
    char port[16];
    snprintf(port, sizeof port, "%d", p->master.port);
    const char *replica_args[] = {"--replicaof", "127.0.0.1", port, NULL};
    server_start_guarded(&p->replica, replica_args);
    p->on_replica = server_connect(&p->replica);
    wait_replica_synced(p->on_replica);
}

static void pair_stop(pair *p) {
    redisFree(p->on_replica);
    server_stop_guarded(&p->replica);
    server_stop_guarded(&p->master);
}

static rjq_client *durable_client(struct event_base *base, const pair *p, int replicas, long timeout_ms) {
    rjq_client_options o = client_options(p->master.url);
    o.wait_replicas = replicas;
    o.wait_timeout_ms = timeout_ms;
    return client_new(base, &o);
}

static const pair *current; /* when set: look on its replica in the callback */
static int last_status;
static long answers;
static char last_id[64];
static long long on_replica_then; /* was the job on the replica when the callback ran */

static void on_enqueued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)data;
    last_status = status;
    last_id[0] = '\0';
    if (n == 1) {
        snprintf(last_id, sizeof last_id, "%s", jobs[0].id);
        if (current)
            on_replica_then = server_int(current->on_replica, "HEXISTS t:{d}:payload %s", last_id);
    }
    answers++;
}

static void on_done(rjq_client *c, int status, void *data) {
    (void)c, (void)data;
    last_status = status;
    answers++;
}

static int fail_them;
static void handler(rjq_job *job, void *data) {
    (void)data;
    if (fail_them) ASSERT_OK(rjq_job_fail(job, "no", RJQ_FAIL_FATAL, -1, on_done, NULL));
    else ASSERT_OK(rjq_job_complete(job, "ok", 2, on_done, NULL));
}

/* Enqueue one job and run it: the enqueue's status, then the job's. */
static void enqueue_and_run(struct event_base *base, rjq_queue *q, int *enq_status, int *done_status) {
    long target = answers + 1;
    ASSERT_OK(rjq_enqueue(q, "x", 1, NULL, on_enqueued, NULL));
    ASSERT(loop_until_count(base, &answers, target, 5000));
    *enq_status = last_status;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, NULL, handler, NULL, &w));
    ASSERT(loop_until_count(base, &answers, target + 1, 5000));
    *done_status = last_status;
    worker_stop_wait(base, w);
}

TEST(writes_confirmed_by_a_replica_are_on_it_when_reported) {
    pair p;
    pair_start(&p);
    current = &p;
    struct event_base *base = event_base_new();
    rjq_client *c = durable_client(base, &p, 1, 2000);
    rjq_queue *q = queue_for(c, "d");
    for (int i = 0; i < 20; i++) {
        int enq, done;
        fail_them = i % 2;
        enqueue_and_run(base, q, &enq, &done);
        ASSERT_EQ(RJQ_OK, enq);
        ASSERT_EQ(1, on_replica_then); /* WAIT confirmed it: the replica has it */
        ASSERT_EQ(RJQ_OK, done);
    }
    redisContext *rc = server_connect(&p.master);
    ASSERT(server_calls(rc, "wait") >= 40);
    redisFree(rc);
    rjq_client_free(c);
    event_base_free(base);
    pair_stop(&p);
}

TEST(too_few_replicas_is_reported_with_the_jobs) {
    pair p;
    pair_start(&p);
    current = NULL; /* the replica is stopped below: a synchronous query would hang */
    struct event_base *base = event_base_new();
    /* two replicas asked for, one there: every write is short */
    rjq_client *c = durable_client(base, &p, 2, 100);
    rjq_queue *q = queue_for(c, "d");
    int enq, done;
    fail_them = 0;
    enqueue_and_run(base, q, &enq, &done);
    ASSERT_EQ(RJQ_EREPLICAS, enq);
    ASSERT(last_id[0] != '\0'); /* the job's id is given: it is enqueued */
    ASSERT_EQ(RJQ_EREPLICAS, done);
    if (strstr(rjq_client_get_errmsg(c), " of 2 replicas confirmed the write within 100 ms") == NULL)
        FAIL_AT(__FILE__, __LINE__, "errmsg: %s", rjq_client_get_errmsg(c));
    fail_them = 1;
    enqueue_and_run(base, q, &enq, &done);
    ASSERT_EQ(RJQ_EREPLICAS, done);
    rjq_client_free(c);
    /* the replica stopped: short; running again: confirmed again */
    c = durable_client(base, &p, 1, 200);
    q = queue_for(c, "d");
    kill(p.replica.pid, SIGSTOP);
    fail_them = 0;
    enqueue_and_run(base, q, &enq, &done);
    ASSERT_EQ(RJQ_EREPLICAS, enq);
    ASSERT_EQ(RJQ_EREPLICAS, done);
    kill(p.replica.pid, SIGCONT);
    for (int i = 0; i < 100; i++) { /* caught up */
        enqueue_and_run(base, q, &enq, &done);
        if (enq == RJQ_OK) break;
    }
    ASSERT_EQ(RJQ_OK, enq);
    ASSERT_EQ(RJQ_OK, done);
    rjq_client_free(c);
    event_base_free(base);
    pair_stop(&p);
}

TEST(wait_timeout_must_be_below_half_the_command_timeout) {
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options("redis://127.0.0.1:1");
    o.wait_replicas = 1;
    o.wait_timeout_ms = 5000; /* half the default command timeout */
    rjq_client *c = NULL;
    ASSERT_EQ(RJQ_EINVAL, rjq_libevent_client_new(&c, base, &o));
    ASSERT(strstr(rjq_client_get_errmsg(NULL), "wait_timeout_ms") != NULL);
    o.command_timeout_ms = -1; /* no command timeout: any wait */
    ASSERT_OK(rjq_libevent_client_new(&c, base, &o));
    rjq_client_free(c);
    event_base_free(base);
}

/* Writes made together share a WAIT, one WAIT at a time: with no replica
 * at all, five enqueues on five queues (five script calls, which may go
 * out in two loop passes) take at most two WAITs (each with its own they
 * took five wait_timeout_ms, and the connection was dropped as dead),
 * all reported short with their jobs, none lost or doubled. */
static long shorts_seen;
static void on_short(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)data;
    ASSERT_EQ(RJQ_EREPLICAS, status);
    ASSERT_EQ(1, n);
    ASSERT(jobs[0].id != NULL);
    shorts_seen++;
}

TEST(writes_made_together_share_one_wait) {
    test_server s;
    server_start_guarded(&s, NULL); /* no replica */
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(s.url);
    o.wait_replicas = 1;
    o.wait_timeout_ms = 400;
    o.command_timeout_ms = 1000;
    rjq_client *c = client_new(base, &o);
    wait_connected(base, c);
    redisContext *rc = server_connect(&s);
    long long waits = server_calls(rc, "wait");
    for (int i = 0; i < 5; i++) {
        char name[16];
        snprintf(name, sizeof name, "q%d", i);
        ASSERT_OK(rjq_enqueue(queue_for(c, name), "x", 1, NULL, on_short, NULL));
    }
    ASSERT(loop_until_count(base, &shorts_seen, 5, 5000));
    ASSERT(server_calls(rc, "wait") - waits <= 2);
    for (int i = 0; i < 5; i++) ASSERT_EQ(1, server_int(rc, "LLEN t:{q%d}:ready", i));
    ASSERT_EQ(1, rjq_client_is_connected(c)); /* never taken for dead */
    redisFree(rc);
    rjq_client_free(c);
    event_base_free(base);
    server_stop_guarded(&s);
}

/* The connection lost while a WAIT holds it: the writes it was to confirm
 * are done on the master, so they are reported RJQ_EREPLICAS with their
 * jobs (an enqueue without an id is never re-sent, so never doubled). */
TEST(connection_lost_during_the_wait_reports_the_write_short) {
    test_server s;
    server_start_guarded(&s, NULL); /* no replica: the WAIT waits its full time */
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(s.url);
    o.wait_replicas = 1;
    o.wait_timeout_ms = 3000;
    o.name = "held";
    rjq_client *c = client_new(base, &o);
    wait_connected(base, c);
    redisContext *rc = server_connect(&s);
    shorts_seen = 0;
    ASSERT_OK(rjq_enqueue(queue_for(c, "k"), "x", 1, NULL, on_short, NULL));
    WAIT_FOR(base, server_int(rc, "LLEN t:{k}:ready") > 0, 5000);
    WAIT_FOR(base, server_info_number(rc, "clients", "blocked_clients:") > 0, 5000);
    ASSERT_EQ(1, server_info_number(rc, "clients", "blocked_clients:")); /* the WAIT is holding the connection */
    ASSERT_EQ(0, shorts_seen);
    redisReply *r = server_cmd(rc, "CLIENT KILL TYPE normal SKIPME yes");
    freeReplyObject(r);
    ASSERT(loop_until_count(base, &shorts_seen, 1, 2000));
    ASSERT_EQ(1, server_int(rc, "LLEN t:{k}:ready"));
    redisFree(rc);
    rjq_client_free(c);
    event_base_free(base);
    server_stop_guarded(&s);
}
