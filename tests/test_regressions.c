/*
 * Regression tests: one per defect found in review, named after what it
 * guards. Memory errors (use-after-free) show as AddressSanitizer aborts
 * and leaks as LeakSanitizer reports in a -DRJQ_SANITIZE=ON build; the
 * other defects fail an assertion in any build.
 *
 * Timeouts below are safety nets only: nothing asserts how long anything
 * took.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "fixture.h"
#include "harness.h"
#include "proxy.h"
#include "await.h" /* white-box: the await module's early-outcome list */
#include "rjq_scripts.h"
#include "server.h"
#include "waits.h"

/* ---- shared bits ------------------------------------------------------------ */

/* Kill a guarded server at once (it may be stopped) and reap it; the test
 * still calls server_stop() to remove its directory. */
static void server_kill_now(test_server *s) {
    forget_on_abort(s->pid);
    kill(s->pid, SIGKILL);
    kill(s->pid, SIGCONT);
    ASSERT(waitpid(s->pid, NULL, 0) == s->pid);
    s->pid = 0;
}

static long enq_ok;
static void on_enq_ok(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs, (void)data;
    ASSERT_OK(status);
    enq_ok += (long)n;
}

/* ---- 1. claims are capped per script call ----------------------------------- */

#define BIG_JOBS 5000
static long big_handled, big_done;

static void big_handler(rjq_job *job, void *data) {
    (void)data;
    big_handled++;
    ASSERT_OK(rjq_job_complete(job, "", 0, on_done_ok, &big_done));
}

/* A worker whose free capacity (5000) is far beyond what one Lua unpack()
 * holds used to ask for all of it in one claim: the script popped the ids
 * off ready, then failed ("too many results to unpack"), leaving them
 * active in no set, never to run. Every job must run once. */
TEST(claim_larger_than_lua_unpack_limit_loses_nothing) {
    test_env e;
    env_start(&e, "big");
    static rjq_enqueue_item items[BIG_JOBS];
    for (int i = 0; i < BIG_JOBS; i++) {
        items[i].size = sizeof items[i];
        items[i].payload = "x";
        items[i].len = 1;
        items[i].opts = NULL;
    }
    enq_ok = 0;
    ASSERT_OK(rjq_enqueue_batch(e.q, items, BIG_JOBS, on_enq_ok, NULL));
    ASSERT(loop_until_count(e.base, &enq_ok, BIG_JOBS, 5000));

    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = BIG_JOBS; /* one claim would ask for every job at once */
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, big_handler, NULL, &w));
    loop_until_count(e.base, &big_done, BIG_JOBS, 5000);
    ASSERT_EQ(BIG_JOBS, big_handled);
    ASSERT_EQ(BIG_JOBS, big_done);
    rjq_stats st = get_stats(e.base, e.q);
    ASSERT_EQ(BIG_JOBS, st.completed);
    ASSERT_EQ(0, st.ready);
    ASSERT_EQ(0, st.active);

    env_stop(&e);
}

/* ---- 2. freeing the client while the command connection drops ---------------- */

static int disc_mode; /* 0: free in the request's ECONN callback; 1: in on_event */
static int disc_freed, disc_stats_calls, disc_stats_status;

static void disc_on_stats(rjq_client *c, int status, const rjq_stats *st, void *data) {
    (void)st, (void)data;
    disc_stats_calls++;
    disc_stats_status = status;
    if (disc_mode == 0 && status == RJQ_ECONN && !disc_freed) {
        disc_freed = 1;
        rjq_client_free(c);
    }
}

static void disc_on_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    (void)detail, (void)data;
    if (disc_mode == 1 && ev == RJQ_EVENT_DISCONNECTED && conn == RJQ_CONN_COMMAND &&
        !disc_freed) {
        disc_freed = 1;
        rjq_client_free(c);
    }
}

static void free_client_during_disconnect(int mode) {
    test_server s;
    server_start_guarded(&s, NULL);
    struct event_base *base = event_base_new();
    disc_mode = mode;
    disc_freed = disc_stats_calls = 0;
    disc_stats_status = 0;
    rjq_client_options o = client_options(s.url);
    o.on_event = disc_on_event;
    rjq_client *c = client_new(base, &o);
    rjq_queue *q = queue_for(c, "disc");
    wait_connected(base, c);
    get_stats(base, q); /* the session is fully set */

    kill(s.pid, SIGSTOP); /* the request below goes out and stays unanswered */
    ASSERT_OK(rjq_queue_get_stats(q, disc_on_stats, NULL));
    quiet_for(base, 100, "the server is stopped: no answer can mark that the request went out");
    ASSERT_EQ(0, disc_stats_calls);
    server_kill_now(&s); /* the connections drop with the request in flight */

    ASSERT(loop_until(base, &disc_freed, 5000));
    ASSERT_EQ(1, disc_stats_calls);
    ASSERT(disc_stats_status == RJQ_ECONN || disc_stats_status == RJQ_ECANCELED);
    ASSERT(loop_until_empty(base, 10000)); /* nothing of the client may run any more */
    ASSERT_EQ(1, disc_stats_calls);
    event_base_free(base);
    server_stop(&s);
}

/* rjq_client_free() from the RJQ_ECONN callback of a request in flight, or
 * from on_event(DISCONNECTED), while the command connection drops: the
 * deferred free ran inside hiredis' teardown, whose disconnect callback
 * then read the freed client. */
TEST(free_client_from_callback_during_disconnect_is_safe) {
    free_client_during_disconnect(0);
    free_client_during_disconnect(1);
}

/* ---- 3. freeing a client with a live monitor ------------------------------- */

static int mon_seen, mon_free_in_cb;

static void mon_cb(rjq_client *c, const char *event, const char *id, void *data) {
    (void)data, (void)id;
    if (strcmp(event, "enqueued") != 0) return;
    mon_seen++;
    if (mon_free_in_cb) rjq_client_free(c);
}

/* Enqueue until the monitor reports one (its subscription may not be
 * confirmed when the first event is published). */
static void until_monitor_event(struct event_base *base, rjq_queue *q) {
    for (int i = 0; i < 50 && !mon_seen; i++) {
        ASSERT_OK(rjq_enqueue(q, "m", 1, NULL, NULL, NULL));
        loop_until(base, &mon_seen, 100); /* (its subscription may come later) */
    }
    ASSERT(mon_seen > 0);
}

/* rjq_client_free() with a monitor still attached freed the queues before
 * the monitors, which then read their freed queue. Freed from outside any
 * callback, then from inside the monitor's own callback. */
TEST(free_client_with_live_monitor_is_safe) {
    test_server s;
    server_start_guarded(&s, NULL);
    struct event_base *base = event_base_new();
    for (int in_cb = 0; in_cb <= 1; in_cb++) {
        mon_seen = 0;
        mon_free_in_cb = 0;
        rjq_client *c = client_for(base, &s);
        rjq_queue *q = queue_for(c, "mon");
        rjq_monitor *m;
        ASSERT_OK(rjq_queue_monitor(q, mon_cb, NULL, &m));
        if (!in_cb) {
            until_monitor_event(base, q);
            rjq_client_free(c);
        } else {
            mon_free_in_cb = 1;
            until_monitor_event(base, q); /* frees the client */
        }
        ASSERT(loop_until_empty(base, 10000)); /* nothing of the client runs any more */
    }
    event_base_free(base);
    server_stop_guarded(&s);
}

/* ---- 4. rjq_await_cancel with a callback that frees the client ---------------- */

static int acancel_calls, acancel_status, acancel_warm;

static void acancel_warm_cb(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)c, (void)o, (void)data;
    ASSERT_EQ(RJQ_ENOTFOUND, status);
    acancel_warm = 1;
}

static void acancel_cb(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)o, (void)data;
    acancel_calls++;
    acancel_status = status;
    rjq_client_free(c);
}

/* rjq_await_cancel() runs the callback before it returns; a callback that
 * frees the client (allowed in any callback) freed the await too while a
 * watch request still referred to it, and cancel then used it. */
TEST(await_cancel_callback_freeing_client_is_safe) {
    test_env e;
    env_start(&e, "acancel");
    /* Once an await has been answered, the reply channel is subscribed and
     * the next await's watch goes out at once. */
    ASSERT_OK(rjq_queue_await(e.q, "nope", NULL, acancel_warm_cb, NULL, NULL));
    ASSERT(loop_until(e.base, &acancel_warm, 5000));

    rjq_await *a = NULL;
    ASSERT_OK(rjq_queue_await(e.q, "pending", NULL, acancel_cb, NULL, &a));
    ASSERT(a != NULL);
    ASSERT_OK(rjq_await_cancel(a)); /* its watch is in flight */
    e.c = NULL;                     /* acancel_cb freed it */
    ASSERT_EQ(1, acancel_calls);
    ASSERT_EQ(RJQ_ECANCELED, acancel_status);
    ASSERT(loop_until_empty(e.base, 10000)); /* the client's all gone */
    ASSERT_EQ(1, acancel_calls);
    env_stop(&e);
}

/* ---- 5. a connect that fails synchronously ---------------------------------- */

static int usock_in_new, usock_events, usock_events_in_new, usock_free_in_event, usock_freed;
static int usock_stats_done, usock_stats_status;

static void usock_on_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    (void)ev, (void)conn, (void)detail, (void)data;
    usock_events++;
    if (usock_in_new) usock_events_in_new++;
    if (usock_free_in_event && !usock_freed) {
        usock_freed = 1;
        rjq_client_free(c);
    }
}

static void usock_on_stats(rjq_client *c, int status, const rjq_stats *st, void *data) {
    (void)c, (void)st, (void)data;
    usock_stats_done++;
    usock_stats_status = status;
}

/* A unix:// socket path that does not exist makes hiredis fail the connect
 * inside redisAsyncConnectUnix(). That failure used to be reported from
 * inside rjq_client_new() (on_event ran there: freeing the client in it was
 * a use-after-free) and never failed the requests waiting for the
 * connection. Now: no callback inside rjq_client_new(), RJQ_ECONN for
 * waiting requests after each failed attempt, and a client freed from the
 * event is freed safely. */
TEST(unix_socket_missing_fails_requests_and_defers_events) {
    char dir[64], url[128];
    snprintf(dir, sizeof dir, "/tmp/rjq-test-XXXXXX");
    ASSERT(mkdtemp(dir) != NULL);
    snprintf(url, sizeof url, "unix://%s/missing.sock", dir);
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(url);
    o.on_event = usock_on_event;

    usock_events = usock_events_in_new = usock_free_in_event = usock_freed = 0;
    usock_in_new = 1;
    rjq_client *c = client_new(base, &o);
    usock_in_new = 0;
    ASSERT_EQ(0, usock_events_in_new);
    rjq_queue *q = queue_for(c, "usock");
    for (int round = 0; round < 2; round++) { /* the first attempt, then a reconnect */
        usock_stats_done = 0;
        ASSERT_OK(rjq_queue_get_stats(q, usock_on_stats, NULL));
        ASSERT(loop_until(base, &usock_stats_done, 5000));
        ASSERT_EQ(1, usock_stats_done);
        ASSERT_EQ(RJQ_ECONN, usock_stats_status);
    }
    ASSERT(usock_events > 0);
    rjq_client_free(c);

    usock_events = usock_events_in_new = usock_freed = 0;
    usock_free_in_event = 1;
    usock_in_new = 1;
    c = client_new(base, &o);
    usock_in_new = 0;
    ASSERT_EQ(0, usock_events_in_new);
    ASSERT(loop_until(base, &usock_freed, 5000));
    ASSERT(loop_until_empty(base, 10000)); /* nothing of it runs any more */

    event_base_free(base);
    ASSERT(rmdir(dir) == 0);
}

/* ---- 6. finishing a job while the client is being freed --------------------- */

static rjq_job *fin_held[2];
static int fin_nheld, fin_done_calls, fin_complete_rc, fin_fail_rc, fin_enq_cb, fin_stats_cb;

static void fin_handler(rjq_job *job, void *data) {
    (void)data;
    ASSERT(fin_nheld < 2);
    fin_held[fin_nheld++] = job;
}

static void fin_done(rjq_client *c, int status, void *data) {
    (void)c, (void)status, (void)data;
    fin_done_calls++;
}

static void fin_on_enq(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs, (void)n, (void)data;
    ASSERT_EQ(RJQ_ECANCELED, status);
    fin_enq_cb++;
    fin_fail_rc = rjq_job_fail(fin_held[1], "x", RJQ_FAIL_RETRY, -1, fin_done, NULL);
    fin_held[1] = NULL; /* released (or leaked: LeakSanitizer must see it) */
}

static void fin_on_stats(rjq_client *c, int status, const rjq_stats *st, void *data) {
    (void)c, (void)st, (void)data;
    ASSERT_EQ(RJQ_ECANCELED, status);
    fin_stats_cb++;
    fin_complete_rc = rjq_job_complete(fin_held[0], "r", 1, fin_done, NULL);
    fin_held[0] = NULL;
}

/* rjq_job_complete() and rjq_job_fail() called from a callback that runs
 * during rjq_client_free() (the RJQ_ECANCELED of a request in flight, of a
 * batched enqueue): complete said RJQ_OK and its completion leaked, never
 * answered; fail said RJQ_ECLOSED but kept (leaked) the job. Both must say
 * RJQ_ECLOSED and release the handle, without calling their callback. The
 * leaks show under LeakSanitizer (the test drops its pointers to the jobs). */
TEST(finish_job_during_client_free_returns_eclosed_without_leak) {
    test_env e;
    env_start(&e, "fin");
    rjq_enqueue_item items[2] = {{sizeof(rjq_enqueue_item), "a", 1, NULL}, {sizeof(rjq_enqueue_item), "b", 1, NULL}};
    enq_ok = 0;
    ASSERT_OK(rjq_enqueue_batch(e.q, items, 2, on_enq_ok, NULL));
    ASSERT(loop_until_count(e.base, &enq_ok, 2, 5000));
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 2;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, fin_handler, NULL, &w));
    WAIT_FOR(e.base, fin_nheld >= 2, 20000);
    ASSERT_EQ(2, fin_nheld);

    fin_complete_rc = fin_fail_rc = 12345;
    ASSERT_OK(rjq_queue_get_stats(e.q, fin_on_stats, NULL));           /* in flight */
    ASSERT_OK(rjq_enqueue(e.q, "c", 1, NULL, fin_on_enq, NULL)); /* batched for the tick */
    rjq_client_free(e.c); /* both callbacks run in here, with RJQ_ECANCELED */
    e.c = NULL;
    ASSERT_EQ(1, fin_enq_cb);
    ASSERT_EQ(1, fin_stats_cb);
    ASSERT_EQ(RJQ_ECLOSED, fin_complete_rc);
    ASSERT_EQ(RJQ_ECLOSED, fin_fail_rc);
    ASSERT(loop_until_empty(e.base, 10000)); /* all of the client that could run ran */
    ASSERT_EQ(0, fin_done_calls);
    env_stop(&e);
}

/* ---- 7. a doorbell heard while claims are in flight -------------------------- */

static rjq_job *bell_held[3];
static int bell_nheld, bell_late, bell_sub_up, bell_marker;
static char bell_marker_want[32];

static void bell_handler(rjq_job *job, void *data) {
    (void)data;
    if (strcmp(rjq_job_get_id(job), "late") == 0) {
        bell_late++;
        ASSERT_OK(rjq_job_complete(job, "", 0, NULL, NULL));
        return;
    }
    ASSERT(bell_nheld < 3);
    bell_held[bell_nheld++] = job;
}

static void bell_on_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    (void)c, (void)detail, (void)data;
    if (ev == RJQ_EVENT_CONNECTED && conn == RJQ_CONN_SUBSCRIBER) bell_sub_up = 1;
}

static void bell_on_monitor(rjq_client *c, const char *event, const char *id, void *data) {
    (void)c, (void)data;
    if (strcmp(event, "enqueued") == 0 && strcmp(id, bell_marker_want) == 0) bell_marker = 1;
}

static void bell_replayed(rjq_client *c, int status, long long n, void *data) {
    (void)c, (void)data;
    ASSERT_OK(status);
    ASSERT_EQ(1, n);
}

/* Enqueue a marker job on the monitored queue and wait for its event: what
 * the subscriber connection carried before it has been handled. */
static int bell_mark(struct event_base *base, rjq_queue *marker, const char *id) {
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.id = id;
    snprintf(bell_marker_want, sizeof bell_marker_want, "%s", id);
    bell_marker = 0;
    ASSERT_OK(rjq_enqueue(marker, "m", 1, &jo, NULL, NULL));
    return loop_until(base, &bell_marker, 500);
}

/*
 * A worker that keeps two claims in flight hears the doorbell of a job
 * made ready after both claims ran (so both come back empty; a replay, as
 * an enqueue would hand the job to the worker directly). A job of the
 * worker finishes before their replies: its tick calls claim(), which can
 * send nothing (two claims in flight is the limit) but used to clear the
 * doorbell all the same. The job then sat in ready until the safety poll.
 */
TEST(doorbell_heard_while_claim_in_flight_is_not_lost) {
    test_env e;
    proxy p;
    env_start_proxied(&e, &p, "bell", bell_on_event);
    rjq_queue *marker = queue_for(e.c, "marker");
    ASSERT(loop_until(e.base, &bell_sub_up, 5000));
    /* a dead job to replay later */
    freeReplyObject(server_cmd(e.rc, "HSET t:{bell}:payload late x"));
    freeReplyObject(server_cmd(e.rc, "HSET t:{bell}:state late %s", "dead 1"));
    freeReplyObject(server_cmd(e.rc, "ZADD t:{bell}:dead 1 late"));

    rjq_enqueue_item items[3] = {{sizeof(rjq_enqueue_item), "1", 1, NULL}, {sizeof(rjq_enqueue_item), "2", 1, NULL}, {sizeof(rjq_enqueue_item), "3", 1, NULL}};
    enq_ok = 0;
    ASSERT_OK(rjq_enqueue_batch(e.q, items, 3, on_enq_ok, NULL));
    ASSERT(loop_until_count(e.base, &enq_ok, 3, 5000));
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 3;
    wo.poll_ms = 60000; /* the safety poll must not be what finds the job */
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, bell_handler, NULL, &w)); /* subscribes the doorbell */
    rjq_monitor *m;
    ASSERT_OK(rjq_queue_monitor(marker, bell_on_monitor, NULL, &m)); /* subscribed after it */
    int marked = 0;
    for (int i = 0; i < 10 && !marked; i++) {
        char id[32];
        snprintf(id, sizeof id, "warm%d", i);
        marked = bell_mark(e.base, marker, id);
    }
    ASSERT(marked); /* both subscriptions are confirmed */
    WAIT_FOR(e.base, bell_nheld >= 3, 20000);
    ASSERT_EQ(3, bell_nheld); /* one claim filled all it asked for: hungry */

    proxy_hold(&p, 1);
    /* Each finished job frees a slot that its queue tick claims at once:
     * two claims in flight, in separate ticks.
     * (Waited for as run in Redis: its completion and its claim.) */
    long long calls = server_script_calls(e.rc);
    ASSERT_OK(rjq_job_complete(bell_held[0], "", 0, NULL, NULL));
    calls += 2;
    ASSERT(loop_until_script_calls(e.base, e.rc, calls, 10000));
    ASSERT_OK(rjq_job_complete(bell_held[1], "", 0, NULL, NULL));
    calls += 2;
    ASSERT(loop_until_script_calls(e.base, e.rc, calls, 10000));
    /* Sent behind both claims on the same connection: they ran first and
     * found nothing; this replay rings the doorbell. */
    ASSERT_OK(rjq_queue_replay(e.q, "late", 0, bell_replayed, NULL));
    calls += 1;
    ASSERT(loop_until_script_calls(e.base, e.rc, calls, 10000));
    ASSERT(bell_mark(e.base, marker, "after")); /* the doorbell has been heard */
    calls = server_script_calls(e.rc);
    /* Its tick runs claim() with both claims in flight: nothing is sent
     * (its completion runs in Redis once the tick ran). */
    ASSERT_OK(rjq_job_complete(bell_held[2], "", 0, NULL, NULL));
    ASSERT(loop_until_script_calls(e.base, e.rc, calls + 1, 10000));
    ASSERT_EQ(0, bell_late);
    proxy_hold(&p, 0); /* the empty claims come back */

    ASSERT(loop_until(e.base, &bell_late, 5000));
    ASSERT_EQ(1, bell_late);

    ASSERT_OK(rjq_monitor_stop(m));
    env_stop_proxied(&e, &p);
}

/* ---- 8. awaits of jobs with long keys ------------------------------------- */

static void long_handler(rjq_job *job, void *data) {
    (void)data;
    ASSERT_OK(rjq_job_complete(job, "ok", 2, NULL, NULL));
}

static int long_done, long_status, long_nf;
static char long_result[16];

static void long_await_cb(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)c, (void)data;
    long_done++;
    long_status = status;
    if (status == RJQ_OK && o && o->result_len < sizeof long_result) {
        memcpy(long_result, o->result, o->result_len);
        long_result[o->result_len] = '\0';
    }
}

static void long_nf_cb(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)c, (void)o, (void)data;
    ASSERT_EQ(RJQ_ENOTFOUND, status);
    long_nf = 1;
}

/*
 * Prefix, queue name and job id at their longest (200 bytes each) make a
 * job key of 608 bytes. The outcome message was parsed into a 512-byte
 * buffer and dropped, so the await never resolved; and the reply channel
 * name, cut at 95 bytes, lost its random part with a long prefix: every
 * client with that prefix shared one channel.
 */
TEST(await_with_long_job_key_resolves) {
    test_server s;
    server_start_guarded(&s, NULL);
    struct event_base *base = event_base_new();
    char prefix[201], qname[201], id[201];
    memset(prefix, 'p', 200);
    prefix[200] = '\0';
    memset(qname, 'q', 200);
    qname[200] = '\0';
    memset(id, 'i', 200);
    id[200] = '\0';
    rjq_client_options o = client_options(s.url);
    o.prefix = prefix;
    rjq_client *c = client_new(base, &o);
    rjq_queue *q = queue_for(c, qname);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, NULL, long_handler, NULL, &w));

    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.id = id;
    rjq_await_options ao = RJQ_AWAIT_OPTIONS_INIT;
    ao.timeout_ms = 5000; /* safety net */
    ASSERT_OK(rjq_enqueue_await(q, "x", 1, &jo, &ao, long_await_cb, NULL, NULL));
    ASSERT(loop_until(base, &long_done, 6000));
    ASSERT_EQ(1, long_done);
    ASSERT_OK(long_status);
    ASSERT_STREQ("ok", long_result);

    /* A second client with the same prefix gets a reply channel of its own. */
    rjq_client *c2 = client_new(base, &o);
    rjq_queue *q2 = queue_for(c2, qname);
    ASSERT_OK(rjq_queue_await(q2, "missing", NULL, long_nf_cb, NULL, NULL));
    ASSERT(loop_until(base, &long_nf, 5000)); /* its channel is subscribed */
    redisContext *rc = server_connect(&s);
    redisReply *r = server_cmd(rc, "PUBSUB CHANNELS");
    ASSERT(r->type == REDIS_REPLY_ARRAY);
    /* c: doorbell, push, reply and probe channel; c2: reply and probe channel */
    ASSERT_EQ(6, r->elements);
    for (size_t i = 0; i < r->elements; i++) ASSERT_EQ(1, server_numsub(rc, r->element[i]->str));
    freeReplyObject(r);
    redisFree(rc);

    rjq_client_free(c2);
    rjq_client_free(c);
    event_base_free(base);
    server_stop_guarded(&s);
}

/* Late outcomes nobody awaits (an await timed out or was cancelled before
 * its job finished) arrive while other enqueues are in flight: they are kept
 * as possible early outcomes, but capped (1024, EARLY_MAX in await.c), and
 * dropped once no enqueue is in flight. Before the cap, a gateway under
 * constant load kept every one of them forever. */
static int flood_calls, flood_status;

static void flood_cb(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)c, (void)o, (void)data;
    flood_calls++;
    flood_status = status;
}

/* The await module's counts (await.h). */
typedef struct aw_counts {
    const char *channel;
    size_t inflight, early;
    unsigned long long dropped;
} aw_counts;

static aw_counts aw_inspect(const rjq_client *c) {
    aw_counts k;
    rjq__awaits_inspect(c, &k.channel, &k.inflight, &k.early, &k.dropped);
    return k;
}

TEST(stale_outcomes_do_not_pile_up_while_enqueues_are_in_flight) {
    test_env e;
    proxy p;
    env_start_proxied(&e, &p, "flood", NULL);
    rjq_client *c = e.c;

    proxy_hold(&p, 1); /* the enqueue's reply will wait in the proxy */
    ASSERT_OK(rjq_enqueue_await(e.q, "x", 1, NULL, NULL, flood_cb, NULL, NULL));
    WAIT_FOR(e.base, aw_inspect(c).inflight != 0, 20000);
    ASSERT_EQ(1, aw_inspect(c).inflight);

    for (int i = 0; i < 3000; i++) {
        redisReply *r = server_cmd(e.rc, "PUBLISH %s completed\nt:{flood}:job:ghost-%d\nlate",
                                   aw_inspect(c).channel, i);
        ASSERT_EQ(1, r->integer);
        freeReplyObject(r);
    }
    WAIT_FOR(e.base, aw_inspect(c).early >= 1024, 20000);
    quiet_for(e.base, 100, "anything still coming: the table is full, so a marker message "
                           "would be dropped as well; nothing marks the last one read");
    ASSERT_EQ(1024, aw_inspect(c).early);

    proxy_hold(&p, 0);
    WAIT_FOR(e.base, aw_inspect(c).inflight == 0, 20000);
    ASSERT_EQ(0, aw_inspect(c).inflight);
    ASSERT_EQ(0, aw_inspect(c).early);
    ASSERT_EQ(0, flood_calls);

    rjq_client_free(c);
    e.c = NULL;
    ASSERT_EQ(1, flood_calls);
    ASSERT_EQ(RJQ_ECANCELED, flood_status);
    proxy_stop(&p);
    env_stop(&e);
}

/* A failure re-sent after its reply was lost (the library re-sends
 * token-fenced failures after a reconnect) must be recognised as applied
 * even when the retried job was claimed by another worker since: before,
 * it reported RJQ_ELEASELOST for a failure that had been applied. The
 * re-send is simulated by running the fail script again with the first
 * claim's token. */
static rjq_job *fres_held;
static int fres_failed;

static void fres_hold(rjq_job *job, void *data) {
    (void)data;
    fres_held = job;
}

static void fres_done(rjq_client *c, int status, void *data) {
    (void)c, (void)data;
    ASSERT_OK(status);
    fres_failed++;
}

TEST(resent_failure_after_the_job_moved_on_is_recognised) {
    test_env e; /* client A */
    env_start(&e, "fres");
    rjq_client *cb = client_for(e.base, &e.s);
    rjq_queue *qb = queue_for(cb, "fres");
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.id = "fj";
    ASSERT_OK(rjq_enqueue(e.q, "x", 1, &jo, NULL, NULL));
    rjq_worker *wa, *wb;
    ASSERT_OK(rjq_worker_start(e.q, NULL, fres_hold, NULL, &wa));
    WAIT_FOR(e.base, fres_held != NULL, 20000);
    char token[64];
    snprintf(token, sizeof token, "%s", rjq_job_get_token(fres_held));
    ASSERT_OK(rjq_worker_stop(wa, NULL, NULL)); /* A claims nothing more */
    ASSERT_OK(rjq_job_fail(fres_held, "boom", RJQ_FAIL_RETRY, 0, fres_done, NULL));
    fres_held = NULL;
    ASSERT(loop_until(e.base, &fres_failed, 5000));
    ASSERT_OK(rjq_worker_start(qb, NULL, fres_hold, NULL, &wb));
    WAIT_FOR(e.base, fres_held != NULL, 20000);
    ASSERT(strcmp(token, rjq_job_get_token(fres_held)) != 0); /* B holds it now */

    const char *argv[48];
    layout_keys lk;
    argv[0] = "FCALL", argv[1] = rjq__scripts[RJQ__S_FAIL].function;
    int n = layout_script_keys(&lk, RJQ__S_FAIL, "t", "fres", argv, 2);
    const char *args[] = {"t:{fres}:job:", "t:{fres}:wake", "fj", token, "boom",
                          "0",             "0",             "0.5", "100000"};
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) argv[n++] = args[i];
    redisReply *r = redisCommandArgv(e.rc, n, argv, NULL);
    ASSERT(r != NULL && r->type == REDIS_REPLY_INTEGER);
    ASSERT_EQ(3, r->integer); /* already applied, not "lease lost" */
    freeReplyObject(r);
    /* and nothing changed: B still holds it, one failure counted */
    char want[128];
    snprintf(want, sizeof want, "active 2 %s @", rjq_job_get_token(fres_held)); /* state attempts token times */
    r = server_cmd(e.rc, "HGET t:{fres}:state fj");
    ASSERT(strncmp(r->str, want, strlen(want)) == 0);
    freeReplyObject(r);
    ASSERT_EQ(1, server_int(e.rc, "HGET t:{fres}:stats failed"));
    ASSERT_EQ(1, server_active_jobs(e.rc, "fres"));

    ASSERT_OK(rjq_job_complete(fres_held, "", 0, NULL, NULL));
    rjq_client_free(cb);
    env_stop(&e);
}

/* ---- issue 12: the layered core's fixes ------------------------------------- */

/* An outcome that beat its enqueue's reply waits in the early list; the
 * list is capped, and a flood of outcomes nobody awaits pushed it out.
 * Before, the await whose outcome was dropped never looked at its job
 * again and waited forever. Now drops are counted and an enqueue whose
 * reply comes after one reads its job's state. */
static int lost_calls, lost_status;
static char lost_result[16];

static void lost_await_cb(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)c, (void)data;
    lost_calls++;
    lost_status = status;
    if (status == RJQ_OK && o && o->result_len < sizeof lost_result) {
        memcpy(lost_result, o->result, o->result_len);
        lost_result[o->result_len] = '\0';
    }
}

static void lost_handler(rjq_job *job, void *data) {
    (void)data;
    ASSERT_OK(rjq_job_complete(job, "R", 1, on_done_ok, NULL));
}

TEST(await_whose_early_outcome_was_pushed_out_by_the_cap_still_resolves) {
    test_env e;
    proxy p;
    env_start_proxied(&e, &p, "lost", NULL);
    rjq_client *c = e.c;
    lost_calls = 0;
    /* A worker on a second client, straight to Redis, runs the job. */
    rjq_client *c2 = client_for(e.base, &e.s);
    rjq_queue *q2 = queue_for(c2, "lost");
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w2;
    ASSERT_OK(rjq_worker_start(q2, &wo, lost_handler, NULL, &w2));
    wait_worker_started(e.base, c2, q2, e.rc, "lost"); /* registered idle: the job will be pushed to it */

    proxy_hold(&p, 1); /* the enqueue's reply will wait in the proxy */
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.id = "mine";
    ASSERT_OK(rjq_enqueue_await(e.q, "x", 1, &jo, NULL, lost_await_cb, NULL, NULL));
    /* The job runs and completes; its outcome reaches the reply channel
     * before the enqueue's reply and is kept early. */
    WAIT_FOR(e.base, aw_inspect(c).early != 0, 20000);
    ASSERT_EQ(1, aw_inspect(c).early);
    ASSERT_EQ(1, aw_inspect(c).inflight);
    ASSERT_EQ(0, lost_calls);

    /* Outcomes of jobs nobody awaits push it out of the list. */
    for (int i = 0; i < 1100; i++) {
        redisReply *r = server_cmd(e.rc, "PUBLISH %s completed\nt:{lost}:job:ghost-%d\nlate",
                                   aw_inspect(c).channel, i);
        freeReplyObject(r);
    }
    WAIT_FOR(e.base, aw_inspect(c).dropped >= 77, 20000);
    ASSERT(aw_inspect(c).dropped >= 77); /* 1 + 1100 kept, 1024 at most */

    proxy_hold(&p, 0);
    WAIT_FOR(e.base, lost_calls != 0, 20000);
    ASSERT_EQ(1, lost_calls);
    ASSERT_OK(lost_status);
    ASSERT_STREQ("R", lost_result);

    rjq_client_free(c2);
    rjq_client_free(c);
    e.c = NULL;
    proxy_stop(&p);
    env_stop(&e);
}

/* Every rjq_enqueue of one loop turn on one queue used to merge into one
 * command, whatever its size (70 enqueues of 16 MiB made one command over
 * 1 GB). Batches now go out early past 1 MiB of arguments. */
static long capped_ok;

static void capped_cb(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs, (void)data;
    ASSERT_OK(status);
    capped_ok += (long)n;
}

TEST(enqueue_batches_are_capped_by_bytes) {
    test_env e;
    /* (no history: its flush, a script call a second after the first
     * count, would be counted with the batches under valgrind's pace) */
    rjq_queue_options nohist = RJQ_QUEUE_OPTIONS_INIT;
    nohist.history_flush_ms = -1;
    env_start_queue(&e, "capped", &nohist);
    enum { JOBS = 12, SIZE = 256 << 10 };
    char *payload = malloc(SIZE);
    ASSERT(payload != NULL);
    memset(payload, 'p', SIZE);
    capped_ok = 0;
    long long before = server_calls(e.rc, "fcall") + server_calls(e.rc, "evalsha");
    for (int i = 0; i < JOBS; i++) ASSERT_OK(rjq_enqueue(e.q, payload, SIZE, NULL, capped_cb, NULL));
    ASSERT(loop_until_count(e.base, &capped_ok, JOBS, 10000));
    long long calls = server_calls(e.rc, "fcall") + server_calls(e.rc, "evalsha") - before;
    /* 256 KiB each, 1 MiB a call at most: at least 3 calls, still batched */
    ASSERT(calls >= 3);
    ASSERT(calls <= JOBS / 2);
    ASSERT_EQ(JOBS, server_int(e.rc, "HLEN t:{capped}:payload"));
    /* A single batch past the cap lands whole: several capped calls in one
     * transaction (6 x 256 KiB: 3 a call). On a new handle: this one has
     * job numbers reserved by now, and would send the payloads ahead
     * (enqueue.c). */
    rjq_queue *fresh;
    ASSERT_OK(rjq_queue_open(e.c, "capped", &nohist, &fresh));
    rjq_enqueue_item items[6];
    for (int i = 0; i < 6; i++) items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), payload, SIZE, NULL};
    before = server_calls(e.rc, "fcall") + server_calls(e.rc, "evalsha");
    long long execs = server_calls(e.rc, "exec");
    ASSERT_OK(rjq_enqueue_batch(fresh, items, 6, capped_cb, NULL));
    ASSERT(loop_until_count(e.base, &capped_ok, JOBS + 6, 10000));
    /* the two calls, then the reserve.lua call its landing asks for */
    ASSERT(loop_until_script_calls(e.base, e.rc, before + 3, 10000));
    ASSERT_OK(stats_of(e.base, fresh).status); /* (a round trip: a fourth would have run) */
    ASSERT_EQ(3, server_script_calls(e.rc) - before - 1); /* (- the stats' own: stats.lua) */
    ASSERT_EQ(1, server_calls(e.rc, "exec") - execs);
    ASSERT_EQ(JOBS + 6, server_int(e.rc, "HLEN t:{capped}:payload"));
    free(payload);
    env_stop(&e);
}

/* A batch of several calls in one transaction (past the byte cap) finds
 * rjq's function library gone (FUNCTION FLUSH): every call fails alike
 * inside the EXEC, nothing is written, and the request is handled as one
 * script call's would be: the library is loaded again and the batch sent
 * again, and it lands whole, in order. */
static long flushed_ok;
static char flushed_first[32], flushed_last[32];

static void flushed_cb(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)data;
    ASSERT_OK(status);
    flushed_ok += (long)n;
    snprintf(flushed_first, sizeof flushed_first, "%s", jobs[0].id);
    snprintf(flushed_last, sizeof flushed_last, "%s", jobs[n - 1].id);
}

TEST(batch_of_several_calls_survives_function_flush) {
    test_env e;
    env_start(&e, "fl");
    enum { SIZE = 300 << 10 };
    char *payload = malloc(SIZE);
    ASSERT(payload != NULL);
    memset(payload, 'f', SIZE);
    freeReplyObject(server_cmd(e.rc, "FUNCTION FLUSH"));
    rjq_enqueue_item items[8];
    for (int i = 0; i < 8; i++) items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), payload, SIZE, NULL};
    ASSERT_OK(rjq_enqueue_batch(e.q, items, 8, flushed_cb, NULL));
    ASSERT(loop_until_count(e.base, &flushed_ok, 8, 10000));
    ASSERT_STREQ("1", flushed_first);
    ASSERT_STREQ("8", flushed_last);
    ASSERT_EQ(8, server_int(e.rc, "LLEN t:{fl}:ready"));
    ASSERT_EQ(8, get_stats(e.base, e.q).enqueued); /* (seq also counts numbers reserved since) */
    free(payload);
    env_stop(&e);
}

/* A batch of several calls whose later calls would write a key of the
 * wrong type (its delayed jobs, the delayed set) is refused whole: every
 * call checks every key any of them may write. */
static int wt_status, wt_calls;

static void wt_cb(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs, (void)n, (void)data;
    wt_status = status;
    wt_calls++;
}

TEST(batch_of_several_calls_on_a_wrongtype_key_writes_nothing) {
    test_env e;
    env_start(&e, "wt");
    enum { SIZE = 300 << 10 };
    char *payload = malloc(SIZE);
    ASSERT(payload != NULL);
    memset(payload, 'w', SIZE);
    freeReplyObject(server_cmd(e.rc, "SET t:{wt}:delayed x"));
    rjq_job_options later = {.size = sizeof(rjq_job_options), .delay_ms = 60000};
    rjq_enqueue_item items[6];
    for (int i = 0; i < 6; i++) items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), payload, SIZE, i >= 3 ? &later : NULL};
    ASSERT_OK(rjq_enqueue_batch(e.q, items, 6, wt_cb, NULL));
    ASSERT(loop_until(e.base, &wt_calls, 10000));
    ASSERT_EQ(RJQ_EWRONGTYPE, wt_status);
    ASSERT_EQ(0, server_int(e.rc, "LLEN t:{wt}:ready"));
    ASSERT_EQ(0, server_int(e.rc, "HLEN t:{wt}:payload"));
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{wt}:stats"));
    free(payload);
    env_stop(&e);
}

/* rjq_client_free() runs every callback before it frees any handle: a
 * stop or await callback that stops a monitor (any function may be called
 * from any callback) found it freed, because each feature used to free its
 * state right after ending its own handles, monitors first. */
static rjq_monitor *td_monitor;
static int td_stop_calls, td_stop_status, td_await_calls, td_monitor_rc;

static void td_monitor_cb(rjq_client *c, const char *event, const char *id, void *data) {
    (void)c, (void)event, (void)id, (void)data;
}

static void td_stopped(rjq_worker *w, int status, void *data) {
    (void)w, (void)data;
    td_stop_calls++;
    td_stop_status = status;
    if (td_monitor) {
        td_monitor_rc = rjq_monitor_stop(td_monitor);
        td_monitor = NULL;
    }
}

static void td_await_cb(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)c, (void)o, (void)data;
    td_await_calls++;
    ASSERT_EQ(RJQ_ECANCELED, status);
    if (td_monitor) {
        td_monitor_rc = rjq_monitor_stop(td_monitor);
        td_monitor = NULL;
    }
}

static void td_handler(rjq_job *job, void *data) {
    (void)job, (void)data;
}

TEST(monitor_stopped_from_a_teardown_callback_is_still_there) {
    for (int round = 0; round < 2; round++) {
        test_env e;
        env_start(&e, "td");
        td_stop_calls = td_await_calls = 0;
        td_monitor_rc = 1;
        rjq_worker *w;
        rjq_worker_options wo = quiet_worker_options(1);
        if (round == 0) { /* the worker's stop callback stops the monitor */
            ASSERT_OK(rjq_worker_start(e.q, &wo, td_handler, NULL, &w));
            ASSERT_OK(rjq_queue_monitor(e.q, td_monitor_cb, NULL, &td_monitor));
            ASSERT(loop_until_numsub(e.base, e.rc, "t:{td}:events", 1, 10000)); /* in place */
            ASSERT_OK(rjq_worker_stop(w, td_stopped, NULL));
        } else { /* an await registered before the monitor stops it */
            ASSERT_OK(rjq_enqueue_await(e.q, "x", 1, NULL, NULL, td_await_cb, NULL, NULL));
            ASSERT_OK(rjq_queue_monitor(e.q, td_monitor_cb, NULL, &td_monitor));
            ASSERT(loop_until_numsub(e.base, e.rc, "t:{td}:events", 1, 10000)); /* in place */
        }
        rjq_client_free(e.c); /* the stop is still in flight: cancelled */
        e.c = NULL;
        ASSERT_EQ(RJQ_OK, td_monitor_rc);
        ASSERT(td_monitor == NULL);
        if (round == 0) {
            ASSERT_EQ(1, td_stop_calls);
            ASSERT_EQ(RJQ_ECANCELED, td_stop_status);
        } else {
            ASSERT_EQ(1, td_await_calls);
        }
        env_stop(&e);
    }
}

/* An enqueue whose reply is lost with its connection: jobs with caller ids
 * are idempotent, so such an enqueue is sent again after the reconnect and
 * its callback gets the real outcome (the id exists: existed = 1, nothing
 * written twice). Before, it ended with RJQ_ECONN like any other. An
 * enqueue without an id still does (its outcome is unknown). */
typedef struct lost_enq {
    int calls, status, existed;
    char id[32];
} lost_enq;

static void on_lost_enq(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    lost_enq *l = data;
    (void)c;
    l->calls++;
    l->status = status;
    if (status == RJQ_OK && n == 1) {
        l->existed = jobs[0].existed;
        snprintf(l->id, sizeof l->id, "%s", jobs[0].id);
    }
}

/* Kill the command connection of the client named `name`. */
static void kill_command_connection(redisContext *rc, const char *name) {
    redisReply *r = server_cmd(rc, "CLIENT LIST");
    char needle[64];
    snprintf(needle, sizeof needle, " name=%s ", name);
    const char *line = strstr(r->str, needle);
    ASSERT(line != NULL);
    while (line > r->str && line[-1] != '\n') line--;
    long long id = atoll(line + 3); /* "id=<n> ..." */
    freeReplyObject(r);
    ASSERT_EQ(1, server_int(rc, "CLIENT KILL ID %lld", id));
}

static int lost_down;

static void on_lost_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    (void)c, (void)detail, (void)data;
    if (ev == RJQ_EVENT_DISCONNECTED && conn == RJQ_CONN_COMMAND) lost_down++;
}

TEST(enqueue_with_an_id_whose_reply_was_lost_is_sent_again) {
    test_env e;
    proxy p;
    lost_down = 0;
    env_start_proxied(&e, &p, "lostreply", on_lost_event);
    lost_enq with_id = {0}, without = {0};
    proxy_hold(&p, 1); /* the replies will wait in the proxy */
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.id = "keep";
    ASSERT_OK(rjq_enqueue(e.q, "x", 1, &jo, on_lost_enq, &with_id));
    ASSERT_OK(rjq_enqueue(e.q, "y", 1, NULL, on_lost_enq, &without));
    ASSERT(loop_until_server_int(e.base, e.rc, 2, 5000, "LLEN t:{lostreply}:ready")); /* both ran */

    kill_command_connection(e.rc, "rjq");
    ASSERT(loop_until(e.base, &lost_down, 5000)); /* the held replies died with it */
    proxy_hold(&p, 0); /* the new connection's replies flow */
    WAIT_FOR(e.base, with_id.calls != 0 && without.calls != 0, 20000);
    ASSERT_EQ(1, with_id.calls);
    ASSERT_OK(with_id.status);
    ASSERT_STREQ("keep", with_id.id);
    ASSERT_EQ(1, with_id.existed); /* the first send had written it */
    ASSERT_EQ(1, without.calls);
    ASSERT_EQ(RJQ_ECONN, without.status);
    ASSERT_EQ(2, server_int(e.rc, "LLEN t:{lostreply}:ready")); /* nothing written twice */
    ASSERT_OK(stats_of(e.base, e.q).status); /* a round trip: a second answer would be in */
    ASSERT_EQ(1, with_id.calls);

    env_stop_proxied(&e, &p);
}

/* The same for a batch of several calls in one transaction (past the byte
 * cap): with caller ids it is re-sent whole and reports every job as
 * existing; without, it ends with RJQ_ECONN; nothing is written twice. */
typedef struct lost_batch {
    int calls, status;
    size_t n, existed;
} lost_batch;

static void on_lost_batch(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n,
                          void *data) {
    lost_batch *l = data;
    (void)c;
    l->calls++;
    l->status = status;
    l->n = n;
    for (size_t i = 0; i < n; i++) l->existed += rjq_enqueued_get(jobs, i)->existed;
}

TEST(batch_of_several_calls_whose_reply_was_lost_is_sent_again_whole) {
    test_env e;
    proxy p;
    lost_down = 0;
    env_start_proxied(&e, &p, "lostbatch", on_lost_event);
    enum { SIZE = 300 << 10, N = 6 };
    char *payload = malloc(SIZE);
    ASSERT(payload != NULL);
    memset(payload, 'b', SIZE);
    static char ids[N][8];
    rjq_job_options jo[N];
    rjq_enqueue_item with[N], without[N];
    for (int i = 0; i < N; i++) {
        snprintf(ids[i], sizeof ids[i], "k%d", i);
        jo[i] = (rjq_job_options){.size = sizeof(rjq_job_options), .id = ids[i]};
        with[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), payload, SIZE, &jo[i]};
        without[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), payload, SIZE, NULL};
    }
    lost_batch a = {0}, b = {0};
    proxy_hold(&p, 1); /* the replies will wait in the proxy */
    ASSERT_OK(rjq_enqueue_batch(e.q, with, N, on_lost_batch, &a));
    ASSERT_OK(rjq_enqueue_batch(e.q, without, N, on_lost_batch, &b));
    ASSERT(loop_until_server_int(e.base, e.rc, 2 * N, 5000, "LLEN t:{lostbatch}:ready")); /* both ran */

    kill_command_connection(e.rc, "rjq");
    ASSERT(loop_until(e.base, &lost_down, 5000)); /* the held replies died with it */
    proxy_hold(&p, 0);
    WAIT_FOR(e.base, a.calls != 0 && b.calls != 0, 20000);
    ASSERT_EQ(1, a.calls);
    ASSERT_OK(a.status);
    ASSERT_EQ(N, a.n);
    ASSERT_EQ(N, a.existed); /* the first send had written them all */
    ASSERT_EQ(1, b.calls);
    ASSERT_EQ(RJQ_ECONN, b.status);
    ASSERT_EQ(2 * N, server_int(e.rc, "LLEN t:{lostbatch}:ready")); /* nothing twice */
    free(payload);
    env_stop_proxied(&e, &p);
}

/* Jobs a claim in flight still brings to a worker that was stopped
 * meanwhile go back to the queue unstarted, their attempt not counted
 * (rjq_worker_stop; a graceful close relies on it). */
static int late_handled, late_stopped, late_stop_status;

static void late_handler(rjq_job *job, void *data) {
    (void)job, (void)data;
    late_handled++;
}

static void late_stop_cb(rjq_worker *w, int status, void *data) {
    (void)w, (void)data;
    late_stopped++;
    late_stop_status = status;
}

TEST(claim_arriving_after_stop_hands_its_jobs_back) {
    test_env e;
    proxy p;
    env_start_proxied(&e, &p, "late", NULL);
    late_handled = late_stopped = 0;
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.id = "l1";
    ASSERT_OK(rjq_enqueue(e.q, "x", 1, &jo, NULL, NULL));
    jo.id = "l2";
    ASSERT_OK(rjq_enqueue(e.q, "x", 1, &jo, NULL, NULL));
    ASSERT(loop_until_server_int(e.base, e.rc, 2, 5000, "LLEN t:{late}:ready"));
    proxy_hold(&p, 1); /* the claim runs in Redis; its reply waits */
    rjq_worker *w;
    rjq_worker_options wo = quiet_worker_options(2);
    ASSERT_OK(rjq_worker_start(e.q, &wo, late_handler, NULL, &w));
    WAIT_FOR(e.base, server_active_jobs(e.rc, "late") >= 2, 20000);
    ASSERT_EQ(2, server_active_jobs(e.rc, "late"));
    ASSERT_OK(rjq_worker_stop(w, late_stop_cb, NULL));
    proxy_hold(&p, 0);
    ASSERT(loop_until(e.base, &late_stopped, 5000));
    ASSERT_OK(late_stop_status);
    ASSERT_EQ(0, late_handled);
    WAIT_FOR(e.base, server_active_jobs(e.rc, "late") == 0, 20000);
    ASSERT_EQ(0, server_active_jobs(e.rc, "late"));
    ASSERT_EQ(2, server_int(e.rc, "LLEN t:{late}:ready"));
    redisReply *r = server_cmd(e.rc, "HGET t:{late}:state l1");
    ASSERT(strncmp(r->str, "ready 0 @", 9) == 0); /* no attempt spent (then its times) */
    freeReplyObject(r);
    env_stop_proxied(&e, &p);
}

/* ---- issue 18: performance round two --------------------------------------- */

/* With a backlog a worker keeps two claims (of half its capacity each) in
 * flight. When both replies come in one read, what the first half's jobs
 * freed (their completions and the claim for their slots) must be on the
 * wire before the second half's jobs run: sent at the end of the loop
 * turn instead, both halves reached Redis together and came back
 * together, and Redis waited while the worker ran them all (a drain of
 * tiny jobs kept it 80% busy). Seen here from the proxy's side: the
 * bytes the client wrote that the proxy (on this loop) has not read yet. */
/* Enqueue n jobs "x" to q in one batch and wait until they are in. */
static void enqueue_xs(struct event_base *base, rjq_queue *q, int n) {
    rjq_enqueue_item items[16];
    ASSERT(n <= 16);
    for (int i = 0; i < n; i++) items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), "x", 1, NULL};
    enq_ok = 0;
    ASSERT_OK(rjq_enqueue_batch(q, items, (size_t)n, on_enq_ok, NULL));
    ASSERT(loop_until_count(base, &enq_ok, n, 5000));
}

static struct {
    proxy *p;
    int calls, hold_at, peek_at;
    int peeked_complete;      /* the peek found a completion call */
} ls;

/* Does the client's command connection hold unread bytes at the proxy
 * that name the complete script? */
static int ls_completion_on_the_wire(void) {
    for (int i = 0; i < PROXY_PAIRS; i++) {
        proxy_pair *pp = &ls.p->pairs[i];
        if (!pp->cli || pp->is_sub) continue;
        char buf[8192];
        ssize_t n = recv(bufferevent_getfd(pp->cli), buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
        /* FCALL names the function; EVALSHA (servers without functions) its SHA */
        const char *sha = rjq__scripts[RJQ__S_COMPLETE].sha;
        if (n > 0 && (memmem(buf, (size_t)n, "_complete", 9) || memmem(buf, (size_t)n, sha, strlen(sha))))
            return 1;
    }
    return 0;
}

static void ls_handler(rjq_job *job, void *data) {
    (void)data;
    ls.calls++;
    if (ls.calls == ls.peek_at) ls.peeked_complete = ls_completion_on_the_wire();
    if (ls.calls == ls.hold_at) proxy_hold(ls.p, 1);
    ASSERT_OK(rjq_job_complete(job, "", 0, NULL, NULL));
}

static int ls_claims_ran(void *rc) {
    return ls.calls == 4 && server_active_jobs(rc, "lock") == 4 &&
           server_int(rc, "LLEN t:{lock}:ready") == 4;
}

TEST(claim_replies_read_together_do_not_wait_for_each_other) {
    test_env e;
    proxy p;
    env_start_proxied(&e, &p, "lock", NULL);
    memset(&ls, 0, sizeof ls);
    ls.p = &p;
    ls.hold_at = 4; /* the first claim's last job: the worker is hungry now */
    enqueue_xs(e.base, e.q, 12);

    rjq_worker *w;
    rjq_worker_options wo = quiet_worker_options(4);
    ASSERT_OK(rjq_worker_start(e.q, &wo, ls_handler, NULL, &w));
    /* The completion of the first four and two claims of two ran in
     * Redis; their replies wait in the proxy. Waited for as such: the
     * worker ran the first claim's four, and Redis has 4 active (the
     * second claims' jobs) and 4 ready (8 claimed), not merely the first
     * claim's 4 active, whose reply may not have reached the worker yet. */
    ASSERT(loop_until_cond(e.base, ls_claims_ran, e.rc, 20000));
    ASSERT_EQ(4, ls.calls);
    ASSERT_EQ(4, server_active_jobs(e.rc, "lock"));
    ASSERT_EQ(4, server_int(e.rc, "LLEN t:{lock}:ready"));
    /* Let them through in one write: jobs 5 and 6 are the first claim's,
     * 7 and 8 the second's. */
    ls.peek_at = 7;
    proxy_hold(&p, 0);
    WAIT_FOR(e.base, ls.calls >= 12, 20000);
    ASSERT_EQ(12, ls.calls);
    ASSERT_EQ(1, ls.peeked_complete);
    WAIT_FOR(e.base, get_stats(e.base, e.q).completed >= 12, 20000);
    rjq_stats s = get_stats(e.base, e.q);
    ASSERT_EQ(12, s.completed);
    ASSERT_EQ(0, s.active);
    env_stop_proxied(&e, &p);
}

/* A handler that completes its job and then frees the client, on a
 * worker with a backlog: the completion is cancelled by the free
 * (RJQ_ECANCELED), as anywhere else. The claim reply's follow-up used to
 * be sent at once after the handlers even then (checked "not closing",
 * not "accepting"), and the completion failed with RJQ_ECLOSED. */
static struct {
    rjq_client *c;
    int handled, done, status;
} fh;

static void fh_done(rjq_client *c, int status, void *data) {
    (void)c, (void)data;
    fh.done++;
    fh.status = status;
}

static void fh_handler(rjq_job *job, void *data) {
    (void)data;
    if (fh.handled++ > 0) return;
    ASSERT_OK(rjq_job_complete(job, "", 0, fh_done, NULL));
    rjq_client_free(fh.c);
}

TEST(completion_before_a_free_from_a_handler_is_cancelled_on_a_hungry_worker) {
    test_env e;
    env_start(&e, "fh");
    memset(&fh, 0, sizeof fh);
    fh.c = e.c;
    enqueue_xs(e.base, e.q, 6);
    rjq_worker *w;
    rjq_worker_options wo = quiet_worker_options(2); /* its first claim fills: hungry */
    ASSERT_OK(rjq_worker_start(e.q, &wo, fh_handler, NULL, &w));
    ASSERT(loop_until(e.base, &fh.done, 5000));
    e.c = NULL; /* freed by the handler */
    ASSERT(loop_until_empty(e.base, 10000)); /* all of it that could run ran */
    ASSERT_EQ(1, fh.done);
    ASSERT_EQ(RJQ_ECANCELED, fh.status);
    env_stop(&e);
}
