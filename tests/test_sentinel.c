/*
 * Sentinel: a master, a replica and three sentinels (Debian's
 * redis-sentinel, down-after-milliseconds 1000), all private, on loopback.
 * The client finds the master through redis+sentinel:// (a dead sentinel
 * skipped, an unknown master name reported), refuses a replica named as
 * master (ROLE), and, under load (a producer awaiting results, two worker
 * processes), survives the master's SIGKILL by itself: work resumes on the
 * promoted replica, every await ends exactly once.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rjq/libevent.h>

#include "harness.h"
#include "server.h"

#define MASTER "mymaster"

typedef struct sentinel {
    pid_t pid;
    int port;
    char dir[128];
} sentinel;

/* Start a sentinel on a free port (another one when that one was taken
 * meanwhile: see redis_listening). */
static void sentinel_start(sentinel *s, int master_port) {
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "/tmp/rjq-sentinel-XXXXXX");
    ASSERT(mkdtemp(s->dir) != NULL);
    char conf[256], log[256];
    snprintf(conf, sizeof conf, "%s/sentinel.conf", s->dir);
    snprintf(log, sizeof log, "%s/sentinel.log", s->dir);
    for (int attempt = 0; attempt < 5; attempt++) {
        s->port = free_port();
        FILE *f = fopen(conf, "w");
        ASSERT(f != NULL);
        fprintf(f,
                "port %d\nbind 127.0.0.1\ndir %s\nlogfile sentinel.log\n"
                "sentinel monitor " MASTER " 127.0.0.1 %d 2\n"
                "sentinel down-after-milliseconds " MASTER " 1000\n"
                "sentinel failover-timeout " MASTER " 5000\n"
                "sentinel parallel-syncs " MASTER " 1\n",
                s->port, s->dir, master_port);
        fclose(f);
        long from = file_size(log);
        s->pid = fork();
        ASSERT(s->pid >= 0);
        if (s->pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            execlp("redis-sentinel", "redis-sentinel", conf, (char *)NULL);
            _exit(127);
        }
        int listening = -1;
        for (int i = 0; i < 1000 && (listening = redis_listening(&s->pid, log, from,
                                                                 "Sentinel ID is")) < 0;
             i++)
            sleep_ms(10);
        if (listening == 0) continue; /* its port was taken */
        if (listening < 0) FAIL_AT(__FILE__, __LINE__, "redis-sentinel did not start on %d", s->port);
        kill_on_abort(s->pid);
        for (int i = 0; i < 500; i++) {
            redisContext *rc = redisConnect("127.0.0.1", s->port);
            int ok = rc && !rc->err;
            if (rc) redisFree(rc);
            if (ok) return;
            sleep_ms(10);
        }
        FAIL_AT(__FILE__, __LINE__, "redis-sentinel did not answer on %d", s->port);
    }
    FAIL_AT(__FILE__, __LINE__, "redis-sentinel found no free port in 5 tries");
}

static void sentinel_stop(sentinel *s) {
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        forget_on_abort(s->pid);
    }
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", s->dir);
}

static long long sentinel_number(const sentinel *s, const char *what) {
    redisContext *rc = redisConnect("127.0.0.1", s->port);
    ASSERT(rc && !rc->err);
    redisReply *r = redisCommand(rc, "SENTINEL %s " MASTER, what);
    long long n = r && r->type == REDIS_REPLY_ARRAY ? (long long)r->elements : -1;
    if (r) freeReplyObject(r);
    redisFree(rc);
    return n;
}

/* SENTINEL FAILOVER on s. A sentinel answers NOGOODSLAVE while no replica
 * it knows passes its checks (its last PING answer or INFO too old: on a
 * loaded machine, right after the start): asked again, a minute at most,
 * each refusal printed. Any other error fails the test. */
static void sentinel_failover(const sentinel *s) {
    double end = mono_ms() + 60000;
    for (;;) {
        redisContext *rc = redisConnect("127.0.0.1", s->port);
        ASSERT(rc && !rc->err);
        redisReply *r = redisCommand(rc, "SENTINEL FAILOVER " MASTER);
        redisFree(rc);
        ASSERT(r != NULL);
        if (r->type != REDIS_REPLY_ERROR) {
            freeReplyObject(r);
            return;
        }
        if (strncmp(r->str, "NOGOODSLAVE", 11) != 0 || mono_ms() > end)
            FAIL_AT(__FILE__, __LINE__, "SENTINEL FAILOVER: %s", r->str);
        fprintf(stderr, "SENTINEL FAILOVER: %s; asked again\n", r->str);
        freeReplyObject(r);
        sleep_ms(100);
    }
}

typedef struct cluster {
    int undemotable; /* set before cluster_start: see there */
    test_server master, replica;
    sentinel sentinels[3];
    char url[256];
} cluster;

/* Master, replica, three sentinels that know each other and the replica
 * (so that a failover can be agreed on). */
static void cluster_start(cluster *k) {
    int undemotable = k->undemotable;
    memset(k, 0, sizeof *k);
    k->undemotable = undemotable;
    /* no 5 s wait before a full sync (Redis 7's diskless default); a
     * master that Sentinel cannot demote (and so cannot kill its clients)
     * when asked: an old master a partition keeps out of Sentinel's reach */
    const char *master_args[] = {"--repl-diskless-sync-delay", "0", NULL, NULL, NULL, NULL, NULL};
    if (k->undemotable) {
        master_args[2] = "--rename-command";
        master_args[3] = "SLAVEOF";
        master_args[4] = "";
    }
    server_start_guarded(&k->master, master_args);
    char port[16];
    snprintf(port, sizeof port, "%d", k->master.port);
    const char *replica_args[] = {"--replicaof", "127.0.0.1", port, "--repl-diskless-sync-delay", "0",
                                  NULL};
    server_start_guarded(&k->replica, replica_args);
    redisContext *rc = server_connect(&k->replica);
    wait_replica_synced(rc);
    redisFree(rc);
    for (int i = 0; i < 3; i++) sentinel_start(&k->sentinels[i], k->master.port);
    for (int i = 0; i < 1500; i++) {
        int ready = 1;
        for (int j = 0; j < 3; j++)
            ready = ready && sentinel_number(&k->sentinels[j], "sentinels") == 2 &&
                    sentinel_number(&k->sentinels[j], "replicas") == 1;
        if (ready) break;
        ASSERT(i < 1499);
        sleep_ms(20);
    }
    snprintf(k->url, sizeof k->url, "redis+sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/" MASTER,
             k->sentinels[0].port, k->sentinels[1].port, k->sentinels[2].port);
}

static void cluster_stop(cluster *k) {
    for (int i = 0; i < 3; i++) sentinel_stop(&k->sentinels[i]);
    server_stop_guarded(&k->replica);
    if (k->master.pid > 0) server_stop_guarded(&k->master);
}

static rjq_client_options sentinel_options(const char *url) {
    rjq_client_options o = client_options(url);
    o.reconnect_min_ms = 50;
    o.reconnect_max_ms = 250;
    o.connect_timeout_ms = 1000;
    return o;
}

static char events[8192];
static void on_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    (void)c, (void)conn, (void)data;
    size_t n = strlen(events);
    snprintf(events + n, sizeof events - n, "[%d] %s\n", (int)ev, detail ? detail : "");
}

static long enqueued;
static void on_enqueued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs, (void)n, (void)data;
    ASSERT_OK(status);
    enqueued++;
}

/* A client on url never connects, and its events say `needle`. */
static void expect_refused(struct event_base *base, const char *url, const char *needle) {
    rjq_client_options o = sentinel_options(url);
    o.on_event = on_event;
    events[0] = '\0';
    rjq_client *c = client_new(base, &o);
    double until = wait_deadline(30000); /* (a guard: ends at the event) */
    while (strstr(events, needle) == NULL && wait_step(base, until)) {
    }
    if (strstr(events, needle) == NULL)
        FAIL_AT(__FILE__, __LINE__, "expected \"%s\" in the events, got:\n%s", needle, events);
    ASSERT_EQ(0, rjq_client_is_connected(c));
    rjq_client_free(c);
}

TEST(sentinel_url_finds_the_master) {
    cluster k = {0};
    cluster_start(&k);
    struct event_base *base = event_base_new();
    /* the first sentinel named is dead: the next one answers */
    char url[300];
    snprintf(url, sizeof url, "redis+sentinel://127.0.0.1:%d,%s", free_port(), k.url + 17);
    rjq_client_options o = sentinel_options(url);
    rjq_client *c = client_new(base, &o);
    wait_connected(base, c);
    rjq_queue *q = queue_for(c, "s");
    ASSERT_OK(rjq_enqueue(q, "x", 1, NULL, on_enqueued, NULL));
    ASSERT(loop_until_count(base, &enqueued, 1, 30000));
    redisContext *rc = server_connect(&k.master);
    ASSERT_EQ(1, server_int(rc, "LLEN t:{s}:ready"));
    redisFree(rc);
    rjq_client_free(c);
    /* a master no sentinel knows: said, and retried */
    snprintf(url, sizeof url, "redis+sentinel://127.0.0.1:%d/nosuchmaster", k.sentinels[0].port);
    expect_refused(base, url, "no sentinel knows the master nosuchmaster");
    event_base_free(base);
    cluster_stop(&k);
}

/* A sentinel that names a replica (here: one that monitors the replica
 * under the master's name): ROLE says so, the client does not use it. */
TEST(a_replica_named_as_master_is_refused) {
    cluster k = {0};
    cluster_start(&k);
    sentinel liar;
    sentinel_start(&liar, k.replica.port);
    struct event_base *base = event_base_new();
    char url[128];
    snprintf(url, sizeof url, "redis+sentinel://127.0.0.1:%d/" MASTER, liar.port);
    expect_refused(base, url, "not the master (ROLE)");
    event_base_free(base);
    sentinel_stop(&liar);
    cluster_stop(&k);
}

/* ---- failover under load ----------------------------------------------------------- */

static void handler(rjq_job *job, void *data) {
    (void)data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    rjq_job_complete(job, p, len, NULL, NULL); /* may fail during the failover */
}

/* A worker process: its own loop and client, until killed. */
static void worker_process(const char *url) {
    struct event_base *base = event_base_new();
    rjq_client_options o = sentinel_options(url);
    rjq_client *c = client_new(base, &o);
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 20;
    wo.lease_ms = 5000;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(queue_for(c, "load"), &wo, handler, NULL, &w));
    event_base_dispatch(base);
    _exit(0);
}

#define JOBS 400
static int outcome[JOBS];   /* 0: open; else the status + 1000 */
static int ended_twice;
static double completed_at[JOBS];
static long ended;

static void on_outcome(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)c, (void)o;
    intptr_t i = (intptr_t)data;
    if (outcome[i]) ended_twice++;
    outcome[i] = status + 1000;
    completed_at[i] = mono_ms();
    ended++;
}

typedef struct producer {
    struct event_base *base;
    rjq_queue *q;
    int next;
    struct event *tick;
} producer;

/* 20 awaited jobs every 10 ms (ids: an enqueue is re-sent, never doubled). */
static void produce(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    producer *p = arg;
    for (int n = 0; n < 20 && p->next < JOBS; n++, p->next++) {
        char id[32];
        snprintf(id, sizeof id, "job-%d", p->next);
        rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
        o.id = id;
        ASSERT_OK(rjq_enqueue_await(p->q, id, strlen(id), &o, NULL, on_outcome,
                                    (void *)(intptr_t)p->next, NULL));
    }
    if (p->next < JOBS) {
        struct timeval tv = {0, 10000};
        evtimer_add(p->tick, &tv);
    }
}

TEST(master_killed_under_load_work_resumes_on_the_new_master) {
    cluster k = {0};
    cluster_start(&k);
    pid_t workers[2];
    for (int i = 0; i < 2; i++)
        if ((workers[i] = fork_child()) == 0) worker_process(k.url);
    struct event_base *base = event_base_new();
    rjq_client_options o = sentinel_options(k.url);
    rjq_client *c = client_new(base, &o);
    wait_connected(base, c);
    producer p = {base, queue_for(c, "load"), 0, NULL};
    p.tick = evtimer_new(base, produce, &p);
    produce(-1, 0, &p);
    /* a quarter of the jobs done, then the master dies */
    ASSERT(loop_until_count(base, &ended, JOBS / 4, 10000));
    double killed = mono_ms();
    kill(k.master.pid, SIGKILL);
    waitpid(k.master.pid, NULL, 0);
    forget_on_abort(k.master.pid);
    k.master.pid = 0;
    loop_until_count(base, &ended, JOBS, 30000);
    double first_after = 0;
    long ok = 0, lost = 0, other = 0;
    for (int i = 0; i < JOBS; i++) {
        if (outcome[i] == RJQ_OK + 1000) ok++;
        else if (outcome[i] == RJQ_ENOTFOUND + 1000) lost++;
        else other++;
        if (outcome[i] == RJQ_OK + 1000 && completed_at[i] > killed &&
            (first_after == 0 || completed_at[i] < first_after))
            first_after = completed_at[i];
    }
    fprintf(stderr,
            "failover: first completion %.0f ms after the master's SIGKILL; %ld ok, %ld lost "
            "(acknowledged on the old master, not replicated), %ld other\n",
            first_after - killed, ok, lost, other);
    ASSERT_EQ(0, ended_twice);
    ASSERT_EQ(JOBS, ended);     /* every await ended, exactly once */
    ASSERT(first_after > 0);   /* work resumed by itself */
    ASSERT_EQ(0, other);
    evtimer_del(p.tick);
    event_free(p.tick);
    rjq_client_free(c);
    event_base_free(base);
    for (int i = 0; i < 2; i++) {
        kill(workers[i], SIGKILL);
        reap(workers[i], 5000);
    }
    cluster_stop(&k);
}

/* A failover with the old master alive (SENTINEL FAILOVER: it becomes a
 * replica): its READONLY replies, or the sentinels' new answer, move the
 * client to the new master; work goes on, no await is lost. */
TEST(manual_failover_moves_the_client_to_the_new_master) {
    cluster k = {0};
    cluster_start(&k);
    struct event_base *base = event_base_new();
    rjq_client_options o = sentinel_options(k.url);
    o.on_event = on_event;
    events[0] = '\0';
    rjq_client *c = client_new(base, &o);
    wait_connected(base, c);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(queue_for(c, "manual"), NULL, handler, NULL, &w));
    rjq_queue *q = queue_for(c, "manual");
    memset(outcome, 0, sizeof outcome);
    ended = ended_twice = 0;
    for (int i = 0; i < 10; i++) {
        char id[32];
        snprintf(id, sizeof id, "before-%d", i);
        rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
        jo.id = id;
        ASSERT_OK(rjq_enqueue_await(q, id, strlen(id), &jo, NULL, on_outcome, (void *)(intptr_t)i, NULL));
    }
    ASSERT(loop_until_count(base, &ended, 10, 30000));
    sentinel_failover(&k.sentinels[0]);
    /* the replica is promoted: wait for the sentinels to say so (a
     * failover takes seconds on a loaded machine: a minute at most) */
    redisContext *rc = redisConnect("127.0.0.1", k.sentinels[0].port);
    ASSERT(rc && !rc->err);
    redisReply *r;
    double promoted_by = mono_ms() + 60000;
    for (;;) {
        r = redisCommand(rc, "SENTINEL GET-MASTER-ADDR-BY-NAME " MASTER);
        int moved = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                    atoi(r->element[1]->str) == k.replica.port;
        if (r) freeReplyObject(r);
        if (moved) break;
        if (mono_ms() > promoted_by) FAIL_AT(__FILE__, __LINE__, "the sentinels did not promote the replica in 60 s");
        sleep_ms(20);
    }
    redisFree(rc);
    /* the old master is demoted, as Sentinel does once it reaches it (it
     * may take its time; until then the old master takes writes that its
     * demotion drops: Sentinel's window, not the client's) */
    rc = server_connect(&k.master);
    r = server_cmd(rc, "REPLICAOF 127.0.0.1 %d", k.replica.port);
    freeReplyObject(r);
    redisFree(rc);
    for (int i = 10; i < 30; i++) {
        char id[32];
        snprintf(id, sizeof id, "after-%d", i);
        rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
        jo.id = id;
        ASSERT_OK(rjq_enqueue_await(q, id, strlen(id), &jo, NULL, on_outcome, (void *)(intptr_t)i, NULL));
    }
    if (!loop_until_count(base, &ended, 30, 20000))
        FAIL_AT(__FILE__, __LINE__, "%ld of 30 awaits ended; events:\n%s", ended, events);
    ASSERT_EQ(0, ended_twice);
    for (int i = 0; i < 30; i++) ASSERT_EQ(RJQ_OK + 1000, outcome[i]);
    /* the jobs after the failover are on the new master */
    redisContext *nm = server_connect(&k.replica);
    ASSERT_EQ(1, server_int(nm, "EXISTS t:{manual}:stats"));
    r = server_cmd(nm, "ROLE");
    ASSERT_STREQ("master", r->element[0]->str);
    freeReplyObject(r);
    redisFree(nm);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&k);
}

/* wait_replicas = 1: every enqueue reported RJQ_OK is on the new master
 * after the old one was SIGKILLed mid-stream (the others are reported
 * RJQ_EREPLICAS, or fail with the connection, and are counted). */
static long acked, short_acks, failed_enqueues;
static char acked_ids[JOBS][32];

static void on_durable(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)data;
    if (status == RJQ_OK && n == 1) snprintf(acked_ids[acked++], sizeof acked_ids[0], "%s", jobs[0].id);
    else if (status == RJQ_EREPLICAS) short_acks++;
    else failed_enqueues++;
}

static void produce_durable(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    producer *p = arg;
    for (int n = 0; n < 20 && p->next < JOBS; n++, p->next++) {
        char id[32];
        snprintf(id, sizeof id, "durable-%d", p->next);
        rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
        o.id = id;
        ASSERT_OK(rjq_enqueue(p->q, id, strlen(id), &o, on_durable, NULL));
    }
    if (p->next < JOBS) {
        struct timeval tv = {0, 10000};
        evtimer_add(p->tick, &tv);
    }
}

TEST(with_wait_replicas_no_acknowledged_job_is_lost) {
    cluster k = {0};
    cluster_start(&k);
    struct event_base *base = event_base_new();
    rjq_client_options o = sentinel_options(k.url);
    o.wait_replicas = 1;
    o.wait_timeout_ms = 500;
    rjq_client *c = client_new(base, &o);
    wait_connected(base, c);
    producer p = {base, queue_for(c, "durable"), 0, NULL};
    p.tick = evtimer_new(base, produce_durable, &p);
    produce_durable(-1, 0, &p);
    while (acked < JOBS / 4) ASSERT(loop_until_count(base, &acked, JOBS / 4, 10000));
    kill(k.master.pid, SIGKILL);
    waitpid(k.master.pid, NULL, 0);
    forget_on_abort(k.master.pid);
    k.master.pid = 0;
    WAIT_FOR(base, acked + short_acks + failed_enqueues >= JOBS, 30000);
    ASSERT_EQ(JOBS, acked + short_acks + failed_enqueues);
    redisContext *nm = server_connect(&k.replica);
    long missing = 0;
    for (long i = 0; i < acked; i++)
        missing += server_int(nm, "HEXISTS t:{durable}:payload %s", acked_ids[i]) == 0;
    fprintf(stderr, "wait_replicas=1: %ld acknowledged, %ld reported short, %ld failed; %ld of the "
                    "acknowledged missing on the new master\n",
            acked, short_acks, failed_enqueues, missing);
    ASSERT_EQ(0, missing);
    redisFree(nm);
    evtimer_del(p.tick);
    event_free(p.tick);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&k);
}

/* Connections subscribed to a channel on the sentinels (a client's watch
 * of +switch-master: a sentinel has no PUBSUB command, CLIENT LIST says
 * sub=1). */
static long long switch_watchers(cluster *k) {
    long long n = 0;
    for (int i = 0; i < 3; i++) {
        redisContext *rc = redisConnect("127.0.0.1", k->sentinels[i].port);
        ASSERT(rc && !rc->err);
        redisReply *r = redisCommand(rc, "CLIENT LIST");
        for (const char *p = r && r->type == REDIS_REPLY_STRING ? r->str : ""; (p = strstr(p, " sub=1 "));
             p++)
            n++;
        if (r) freeReplyObject(r);
        redisFree(rc);
    }
    return n;
}

/* Are both connections of the client "idle-client" on server s? (A new
 * connection each time: the promotion kills the clients.) */
static int moved_to(const test_server *s) {
    redisContext *nm = server_connect(s);
    redisReply *r = redisCommand(nm, "CLIENT LIST");
    int moved = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "name=idle-client ") != NULL &&
                strstr(r->str, "name=idle-client:sub ") != NULL;
    if (r) freeReplyObject(r);
    redisFree(nm);
    return moved;
}

/* A client that writes nothing follows a failover too: the sentinels'
 * +switch-master moves both its connections to the new master. */
TEST(switch_master_moves_an_idle_client) {
    cluster k = {0};
    k.undemotable = 1; /* the old master keeps its clients: only the announcement moves them */
    cluster_start(&k);
    struct event_base *base = event_base_new();
    rjq_client_options o = sentinel_options(k.url);
    o.name = "idle-client";
    rjq_client *c = client_new(base, &o);
    wait_connected(base, c);
    WAIT_FOR(base, switch_watchers(&k) >= 1, 30000); /* the watch is subscribed */
    sentinel_failover(&k.sentinels[1]);
    WAIT_FOR(base, moved_to(&k.replica), 60000);
    wait_connected(base, c);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&k);
}

/* Sentinels by name (a service name, say): resolved by the loop glue's
 * resolver before each question; without one, refused clearly. */
static long names_resolved;

static void *resolve_to_loopback(void *loop, const char *host, rjq_resolved_fn *done, void *arg) {
    (void)loop;
    static const char *const lo[] = {"127.0.0.1"};
    names_resolved++;
    if (strncmp(host, "sentinel-", 9) == 0) done(arg, NULL, lo, 1);
    else done(arg, "no such name (test resolver)", NULL, 0);
    return NULL;
}

static void never_cancelled(void *loop, void *handle) {
    (void)loop, (void)handle;
    FAIL_AT(__FILE__, __LINE__, "nothing was pending");
}

TEST(sentinels_by_name_are_resolved) {
    cluster k = {0};
    cluster_start(&k);
    struct event_base *base = event_base_new();
    char url[256];
    snprintf(url, sizeof url, "redis+sentinel://nowhere.test:%d,sentinel-1.test:%d/" MASTER,
             k.sentinels[0].port, k.sentinels[1].port);
    rjq_client_options o = sentinel_options(url);
    rjq_client *c = NULL;
    ASSERT_EQ(RJQ_EURL, rjq_libevent_client_new(&c, base, &o));
    ASSERT(strstr(rjq_client_get_errmsg(NULL), "sentinel host nowhere.test is a name") != NULL);
    ASSERT_OK(rjq_libevent_client_make_(&c, base, NULL, NULL, &o, resolve_to_loopback,
                                        never_cancelled));
    wait_connected(base, c);
    ASSERT(names_resolved >= 2); /* the unknown name, then the one that answered */
    rjq_queue *q = queue_for(c, "named");
    ASSERT_OK(rjq_enqueue(q, "x", 1, NULL, on_enqueued, NULL));
    long target = enqueued + 1;
    ASSERT(loop_until_count(base, &enqueued, target, 30000));
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&k);
}
