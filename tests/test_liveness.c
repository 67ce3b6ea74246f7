/*
 * Liveness on real networks (issue 13): a server that stops answering, a
 * TCP connection that goes half-open, a server still loading its data
 * after a restart. Nothing may hang, nothing may end with an error its
 * work did not produce, and work resumes by itself.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "fixture.h"
#include "harness.h"
#include "proxy.h"
#include "server.h"
#include "waits.h"

#define TIMEOUT_MS 500 /* command_timeout_ms of these tests */

static rjq_client_options live_options(const char *url) {
    rjq_client_options o = client_options(url);
    o.command_timeout_ms = TIMEOUT_MS;
    o.ping_interval_ms = 200;
    o.connect_timeout_ms = TIMEOUT_MS;
    return o;
}

/* env_start with the client made from options o (url filled in here). */
static void env_start_with(test_env *e, const char *queue, rjq_client_options o,
                           const char *const *server_extra) {
    memset(e, 0, sizeof *e);
    server_start_guarded(&e->s, server_extra);
    e->base = event_base_new();
    o.url = e->s.url;
    e->c = client_new(e->base, &o);
    e->q = queue_for(e->c, queue);
    e->rc = server_connect(&e->s);
    wait_connected(e->base, e->c);
    wait_layout_known(e->base, e->q);
}

typedef struct ev_count {
    int down[2];
} ev_count;

static void count_events(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    ev_count *n = data;
    (void)c, (void)detail;
    if (ev == RJQ_EVENT_DISCONNECTED) n->down[conn]++;
}

/* One await and what it got. */
typedef struct aw_wait {
    int calls, status;
    char result[32];
} aw_wait;

static void aw_cb(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    aw_wait *w = data;
    (void)c;
    w->calls++;
    w->status = status;
    if (status == RJQ_OK && o && o->result_len < sizeof w->result) {
        memcpy(w->result, o->result, o->result_len);
        w->result[o->result_len] = '\0';
    }
}

static void await_job(rjq_queue *q, const char *id, aw_wait *w) {
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.id = id;
    memset(w, 0, sizeof *w);
    ASSERT_OK(rjq_enqueue_await(q, "x", 1, &jo, NULL, aw_cb, w, NULL));
}

/* Run until job id of e's queue is in Redis and its enqueue's reply is
 * read (a round trip behind it): an await's enqueue waits for its reply
 * channel, so the job is enqueued and watched. */
static void wait_awaited(test_env *e, const char *id) {
    WAIT_FOR(e->base, server_int(e->rc, "HEXISTS t:{%s}:payload %s", rjq_queue_get_name(e->q), id) == 1,
             10000);
    (void)get_stats(e->base, e->q);
}

/* A barrier for "nothing more comes": whatever was published to the
 * client's channels before, and every reply to what it sent before, has
 * been handled. */
static void settled(test_env *e) {
    subscriber_barrier(e->base, e->c, e->rc);
    (void)get_stats(e->base, e->q);
}

static void complete_r1(rjq_job *job, void *data) {
    (void)data;
    ASSERT_OK(rjq_job_complete(job, "r1", 2, on_done_ok, NULL));
}

static void on_stats(rjq_client *c, int status, const rjq_stats *s, void *data) {
    stats_wait *w = data;
    (void)c;
    w->done++;
    w->status = status;
    if (s) w->s = *s;
}

/* Ask for stats and return how long the answer took. */
static double timed_stats(struct event_base *base, rjq_queue *q, stats_wait *w) {
    memset(w, 0, sizeof *w);
    double t0 = mono_ms();
    ASSERT_OK(rjq_queue_get_stats(q, on_stats, w));
    ASSERT(loop_until(base, &w->done, 10000));
    return mono_ms() - t0;
}

/* A server that stops answering (SIGSTOP, a paused VM): requests end with
 * RJQ_ETIMEDOUT within the command timeout and a second; when it comes
 * back, work resumes by itself and an await without a timeout gets its
 * job's outcome, once. Before, nothing timed out: callbacks waited as long
 * as the server was stopped, and a worker's claim in flight kept its
 * claim slot busy. */
TEST(stopped_server_times_out_requests_and_work_resumes) {
    test_env e;
    ev_count ev = {{0, 0}};
    rjq_client_options o = live_options("");
    o.on_event = count_events;
    o.event_data = &ev;
    env_start_with(&e, "stop", o, NULL);
    aw_wait aw;
    await_job(e.q, "j1", &aw);
    wait_awaited(&e, "j1"); /* enqueued and watched */

    ASSERT_EQ(0, kill(e.s.pid, SIGSTOP));
    stats_wait sw;
    double took = timed_stats(e.base, e.q, &sw);
    ASSERT_EQ(RJQ_ETIMEDOUT, sw.status);
    ASSERT(took < TIMEOUT_MS + 1000);
    rjq_worker *w;
    rjq_worker_options wo = quiet_worker_options(1);
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_r1, NULL, &w));
    /* claims time out (the connection drops), reconnects find no session
     * (each drops again): the await is not ended by any of it */
    WAIT_FOR(e.base, ev.down[RJQ_CONN_COMMAND] >= 3, 20000);
    ASSERT_EQ(0, aw.calls);
    ASSERT_EQ(0, kill(e.s.pid, SIGCONT));

    ASSERT(loop_until(e.base, &aw.calls, 10000));
    ASSERT_OK(aw.status);
    ASSERT_STREQ("r1", aw.result);
    took = timed_stats(e.base, e.q, &sw);
    ASSERT_OK(sw.status);
    ASSERT_EQ(1, sw.s.completed);
    settled(&e); /* a second outcome would have come by now */
    ASSERT_EQ(1, aw.calls);
    env_stop(&e);
}


/* Both connections go half-open (no FIN, no RST: a peer gone, a NAT that
 * forgot the flow): nothing ever reports an error on them. The command
 * connection is found by its request that gets no reply, the idle
 * subscriber connection by the message it sends itself that never
 * arrives; both are replaced, and the outcome published while the
 * subscriber connection was dead reaches its await anyway. */
TEST(half_open_connections_are_found_and_replaced) {
    test_env e;
    proxy p;
    ev_count ev = {{0, 0}};
    rjq_client_options o = live_options("");
    o.on_event = count_events;
    o.event_data = &ev;
    env_start_proxied_opts(&e, &p, "half", &o);
    aw_wait aw;
    await_job(e.q, "j1", &aw);
    wait_awaited(&e, "j1");

    proxy_blackhole(&p);
    stats_wait sw;
    double took = timed_stats(e.base, e.q, &sw);
    ASSERT_EQ(RJQ_ETIMEDOUT, sw.status);
    ASSERT(took < TIMEOUT_MS + 1000);

    /* Another client runs the job; its outcome is published to this
     * client's reply channel, into the dead subscriber connection. */
    rjq_client *c2 = client_for(e.base, &e.s);
    rjq_queue *q2 = queue_for(c2, "half");
    rjq_worker *w2;
    rjq_worker_options wo = quiet_worker_options(1);
    ASSERT_OK(rjq_worker_start(q2, &wo, complete_r1, NULL, &w2));
    ASSERT(loop_until(e.base, &aw.calls, 10000));
    ASSERT_OK(aw.status);
    ASSERT_STREQ("r1", aw.result);
    ASSERT(ev.down[RJQ_CONN_COMMAND] >= 1);
    ASSERT(ev.down[RJQ_CONN_SUBSCRIBER] >= 1);
    took = timed_stats(e.base, e.q, &sw); /* the new connections work */
    ASSERT_OK(sw.status);
    settled(&e); /* a second outcome would have come by now */
    ASSERT_EQ(1, aw.calls);

    rjq_client_free(c2);
    env_stop_proxied(&e, &p);
}

/* Redis restarted with data to load answers LOADING for a while. Every
 * request then is one that did not run: it is sent again until the server
 * serves. Before, enqueues failed with RJQ_EREDIS (a producer had to send
 * them again), and an await whose watch went out during the load ended
 * with RJQ_EREDIS and missed its job's completion. */
static long loading_ok, loading_err;

static void on_loading_enq(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n,
                           void *data) {
    (void)c, (void)jobs, (void)n, (void)data;
    if (status == RJQ_OK) loading_ok++;
    else loading_err++;
}

TEST(server_loading_its_data_delays_requests_instead_of_failing_them) {
    /* key-load-delay (µs per key) makes loading 2 000 keys take ~2 s, and
     * the server answers (LOADING) every KiB loaded instead of every 2 MiB.
     * (It was 20 000 keys of 100 µs: each key's delay is a sleep, and on a
     * loaded machine each wake-up waits for a core, so the load took over
     * 20 s, "loop_until_count(e.base, &loading_ok, 70, 20000)" under ASan
     * at load 35: a tenth of the sleeps, each ten times longer.) */
    static const char *const extra[] = {"--appendonly", "yes", "--key-load-delay", "1000",
                                        "--loading-process-events-interval-bytes", "1024",
                                        NULL};
    test_env e;
    ev_count ev = {{0, 0}};
    rjq_client_options o = client_options("");
    o.on_event = count_events;
    o.event_data = &ev;
    env_start_with(&e, "load", o, extra);
    for (int i = 0; i < 2000; i++) redisAppendCommand(e.rc, "SET junk:%d x", i);
    for (int i = 0; i < 2000; i++) {
        redisReply *r;
        ASSERT(redisGetReply(e.rc, (void **)&r) == REDIS_OK);
        freeReplyObject(r);
    }
    aw_wait aw;
    await_job(e.q, "j1", &aw);
    wait_awaited(&e, "j1");
    freeReplyObject(server_cmd(e.rc, "BGREWRITEAOF"));
    WAIT_FOR(e.base, server_info_number(e.rc, "persistence", "aof_rewrite_in_progress:") == 0 &&
                         server_info_number(e.rc, "persistence", "aof_rewrite_scheduled:") == 0,
             20000);
    redisFree(e.rc);

    forget_on_abort(e.s.pid);
    server_restart(&e.s, extra); /* back as soon as it answers: LOADING */
    kill_on_abort(e.s.pid);
    e.rc = server_connect(&e.s);
    ASSERT_EQ(1, server_info_number(e.rc, "persistence", "loading:")); /* the test tests something */
    /* once the client is connected to the loading server */
    WAIT_FOR(e.base, ev.down[RJQ_CONN_COMMAND] && rjq_client_is_connected(e.c), 5000);
    ASSERT_EQ(1, server_info_number(e.rc, "persistence", "loading:"));
    loading_ok = loading_err = 0;
    /* 20 enqueues in 20 loop turns (20 requests, each answered LOADING at
     * first) on a queue without workers: they must land in call order */
    rjq_queue *q2 = queue_for(e.c, "load2");
    for (int i = 0; i < 20; i++) {
        char id[16];
        snprintf(id, sizeof id, "o%02d", i);
        rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
        jo.id = id;
        ASSERT_OK(rjq_enqueue(q2, id, strlen(id), &jo, on_loading_enq, NULL));
        loop_turn(e.base);
    }
    ASSERT_EQ(1, server_info_number(e.rc, "persistence", "loading:")); /* still loading */
    for (int i = 0; i < 50; i++) ASSERT_OK(rjq_enqueue(e.q, "y", 1, NULL, on_loading_enq, NULL));
    rjq_worker *w;
    rjq_worker_options wo = quiet_worker_options(4);
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_r1, NULL, &w));

    ASSERT(loop_until_count(e.base, &loading_ok, 70, 60000));
    redisReply *r = server_cmd(e.rc, "LRANGE t:{load2}:ready 0 -1");
    ASSERT_EQ(20, (long long)r->elements);
    for (int i = 0; i < 20; i++) {
        char id[16];
        snprintf(id, sizeof id, "o%02d", i);
        if (strcmp(r->element[i]->str, id) != 0)
            FAIL_AT(__FILE__, __LINE__, "ready[%d] is %s, want %s: out of order", i,
                    r->element[i]->str, id);
    }
    freeReplyObject(r);
    ASSERT(loop_until(e.base, &aw.calls, 20000));
    ASSERT_EQ(0, loading_err);
    ASSERT_OK(aw.status);
    ASSERT_STREQ("r1", aw.result);
    ASSERT_EQ(0, server_info_number(e.rc, "persistence", "loading:"));
    /* every job done, its completion answered (a stats call is a round trip
     * behind it) */
    WAIT_FOR(e.base, get_stats(e.base, e.q).completed == 51, 10000);
    settled(&e); /* a second outcome would have come by now */
    ASSERT_EQ(1, aw.calls);
    env_stop(&e);
}

/* Both liveness options off (-1): the client works and frees cleanly.
 * Before, its free stopped a watchdog timer that had never been set up,
 * and a zeroed timer looks armed: the timer heap was corrupted. */
TEST(client_with_liveness_off_works_and_frees_cleanly) {
    test_env e;
    rjq_client_options o = client_options("");
    o.command_timeout_ms = -1;
    o.ping_interval_ms = -1;
    env_start_with(&e, "off", o, NULL);
    stats_wait sw;
    timed_stats(e.base, e.q, &sw);
    ASSERT_OK(sw.status);
    redisReply *r = server_cmd(e.rc, "PUBSUB CHANNELS t:reply:*:live");
    ASSERT_EQ(0, (long long)r->elements); /* no probe channel */
    freeReplyObject(r);
    rjq_client_free(e.c);
    e.c = NULL;
    env_stop(&e);
}

/* A unix socket URL works. TCP keepalive made the connection fail on
 * hiredis 0.14.1 (setting it on a unix socket is an error there). */
TEST(unix_socket_url_connects_and_works) {
    test_env e;
    char dir[] = "/tmp/rjq-sock-XXXXXX", sock[64];
    ASSERT(mkdtemp(dir) != NULL);
    snprintf(sock, sizeof sock, "%s/r.sock", dir);
    const char *const extra[] = {"--unixsocket", sock, "--unixsocketperm", "700", NULL};
    env_start_with(&e, "unix", client_options(""), extra);
    rjq_client_free(e.c);
    char url[200];
    snprintf(url, sizeof url, "unix://%s", sock);
    e.c = client_new(e.base, &(rjq_client_options){.size = sizeof(rjq_client_options), .url = url, .prefix = "t"});
    e.q = queue_for(e.c, "unix");
    wait_connected(e.base, e.c);
    stats_wait sw;
    timed_stats(e.base, e.q, &sw);
    ASSERT_OK(sw.status);
    env_stop(&e);
    unlink(sock);
    rmdir(dir);
}

/* A user allowed only rjq's keys and channels (its queues' "{...}" ones
 * and the reply namespace): the subscriber connection's probe channel is
 * in that namespace, so it is not refused. A refused SUBSCRIBE drops the
 * connection (hiredis), and the probe used to be outside it: the
 * subscriber connection reconnected ~50 times a second. */
TEST(acl_user_limited_to_rjq_channels_keeps_its_connections) {
    test_env e;
    memset(&e, 0, sizeof e);
    server_start_guarded(&e.s, NULL);
    redisContext *rc = server_connect(&e.s);
    redisReply *r = server_cmd(rc, "ACL SETUSER w on >pw resetchannels ~t:* &t:{* &t:reply:* +@all");
    ASSERT(r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(rc);
    ev_count ev = {{0, 0}};
    int up = 0;
    (void)up;
    char url[128];
    snprintf(url, sizeof url, "redis://w:pw@127.0.0.1:%d", e.s.port);
    rjq_client_options o = live_options(url);
    /* (probes every 200 ms, as above, but no 500 ms timeouts: a process
     * starved that long on a loaded machine dropped its command connection
     * on a late answer, "0 == ev.down[RJQ_CONN_COMMAND]: expected 0, got
     * 1" under ASan at load 35; what this test counts is the drop a
     * refused SUBSCRIBE makes at once) */
    o.command_timeout_ms = 60000;
    o.connect_timeout_ms = 60000;
    o.on_event = count_events;
    o.event_data = &ev;
    e.base = event_base_new();
    e.c = client_new(e.base, &o);
    e.q = queue_for(e.c, "acl");
    e.rc = server_connect(&e.s);
    wait_connected(e.base, e.c);
    aw_wait aw;
    await_job(e.q, "j1", &aw); /* the reply channel too */
    rjq_worker *w;
    rjq_worker_options wo = quiet_worker_options(1);
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_r1, NULL, &w));
    ASSERT(loop_until(e.base, &aw.calls, 5000));
    ASSERT_OK(aw.status);
    /* probes come and go: five more, each a PUBLISH answered (a refused
     * probe channel would drop the subscriber connection at once) */
    long long probes = server_calls(e.rc, "publish");
    WAIT_FOR(e.base, server_calls(e.rc, "publish") >= probes + 5, 10000);
    (void)get_stats(e.base, e.q);
    ASSERT_EQ(0, ev.down[RJQ_CONN_SUBSCRIBER]);
    ASSERT_EQ(0, ev.down[RJQ_CONN_COMMAND]);
    env_stop(&e);
}
