/*
 * The cases every header-only loop glue (adapters/rjq/<loop>.h) is tested
 * with, written once against a small driver: make a client on the loop,
 * run one loop pass. tests/test_adapter_<loop>.c define the driver and a
 * TEST() per case. (A header of static functions: each test file is its
 * own program.)
 */
#ifndef RJQ_TEST_ADAPTER_CASES_H
#define RJQ_TEST_ADAPTER_CASES_H

#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "harness.h"
#include "rjq.h"
#include "server.h"
#include "shardlink.h"
#include "waits.h"

typedef struct adapter {
    int (*client_new)(rjq_client **c, const rjq_client_options *o);
    void (*turn)(void);  /* one loop pass that does not wait */
    void (*close)(void); /* every client is freed: the loop lets its handles go */
} adapter;

static void ad_run_until_count(const adapter *a, const long *n, long want, long timeout_ms) {
    double end = mono_ms() + (double)timeout_ms;
    while (*n < want && mono_ms() < end) {
        a->turn();
        sleep_ms(1);
    }
    ASSERT(*n >= want);
}

static void ad_run_for(const adapter *a, long ms) {
    double end = mono_ms() + (double)ms;
    while (mono_ms() < end) {
        a->turn();
        sleep_ms(1);
    }
}

static rjq_client *ad_client(const adapter *a, const test_server *s) {
    /* the default command timeout (10 s): every glue sees a lost
     * connection by reading it (none is on hiredis' libuv adapter any
     * more, which missed some), and a tighter one fails a loaded run, or
     * one under valgrind, for a slow reply */
    rjq_client_options o = client_options(s->url);
    rjq_client *c = NULL;
    ASSERT_OK(a->client_new(&c, &o));
    for (int i = 0; i < 5000 && !rjq_client_is_connected(c); i++) ad_run_for(a, 1);
    ASSERT(rjq_client_is_connected(c));
    return c;
}

typedef struct ad_counts {
    long ran, done, enqueued, awaited, await_ok;
    rjq_client *free_me; /* freed by the first handler call */
} ad_counts;

/* The result is the payload. */
static void ad_handler(rjq_job *job, void *data) {
    ad_counts *n = data;
    n->ran++;
    if (n->free_me) {
        rjq_client *c = n->free_me;
        n->free_me = NULL;
        rjq_client_free(c); /* from inside a callback: deferred, then the glue's cleanup */
        ASSERT_EQ(RJQ_ECLOSED, rjq_job_complete(job, "x", 1, NULL, NULL)); /* lets go of it */
        return;
    }
    size_t len;
    const void *p = rjq_job_get_payload(job, &len);
    ASSERT_OK(rjq_job_complete(job, p, len, on_done_ok, &n->done));
}

static void ad_on_enq(rjq_client *c, int status, const rjq_enqueued *jobs, size_t k, void *data) {
    (void)c, (void)jobs;
    ASSERT_OK(status);
    ((ad_counts *)data)->enqueued += (long)k;
}

static void ad_on_await(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    ad_counts *n = data;
    (void)c;
    n->awaited++;
    if (status == RJQ_OK && o && o->result_len > 1 && memcmp(o->result, "a", 1) == 0) n->await_ok++;
}

static void ad_enqueue(rjq_queue *q, ad_counts *n, int from, int count, int with_ids) {
    for (int i = from; i < from + count; i++) {
        char id[32], payload[32];
        snprintf(id, sizeof id, "j%d", i);
        snprintf(payload, sizeof payload, "p%d", i);
        rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
        o.id = id;
        ASSERT_OK(rjq_enqueue(q, payload, strlen(payload), with_ids ? &o : NULL, ad_on_enq, n));
    }
}

/* Awaited jobs; with_ids: theirs are ids, so their enqueue is re-sent
 * across a lost connection instead of failing. */
static void ad_await(rjq_queue *q, ad_counts *n, int count, int with_ids) {
    for (int i = 0; i < count; i++) {
        char payload[32], id[32];
        snprintf(payload, sizeof payload, "a%d", i);
        snprintf(id, sizeof id, "aw%d", i);
        rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
        o.id = id;
        ASSERT_OK(rjq_enqueue_await(q, payload, strlen(payload), with_ids ? &o : NULL, NULL,
                                    ad_on_await, n, NULL));
    }
}

/* Jobs run and complete, awaits get their results. */
static void adapter_runs_jobs_and_awaits(const adapter *a) {
    test_server s;
    server_start_guarded(&s, NULL);
    rjq_client *c = ad_client(a, &s);
    rjq_queue *q = queue_for(c, "ad");
    ad_counts n = {0};
    rjq_worker_options wo = {.size = sizeof(rjq_worker_options), .concurrency = 8};
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(q, &wo, ad_handler, &n, &w));
    ad_enqueue(q, &n, 0, 100, 0);
    ad_await(q, &n, 50, 0);
    ad_run_until_count(a, &n.done, 150, 20000);
    ad_run_until_count(a, &n.awaited, 50, 20000);
    ad_run_for(a, 100); /* room for a wrong extra call to show */
    ASSERT_EQ(150, n.done);
    ASSERT_EQ(50, n.awaited);
    ASSERT_EQ(50, n.await_ok);
    ASSERT_EQ(100, n.enqueued);
    rjq_client_free(c);
    a->close();
    server_stop_guarded(&s);
}

/* Both connections killed mid-run: everything still completes once, and
 * an await made after resolves. */
static void adapter_survives_killed_connections(const adapter *a) {
    test_server s;
    server_start_guarded(&s, NULL);
    rjq_client *c = ad_client(a, &s);
    rjq_queue *q = queue_for(c, "ad");
    ad_counts n = {0};
    rjq_worker_options wo = {.size = sizeof(rjq_worker_options), .concurrency = 4};
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(q, &wo, ad_handler, &n, &w));
    ad_enqueue(q, &n, 0, 200, 1);
    ad_run_until_count(a, &n.done, 30, 20000);
    redisContext *rc = server_connect(&s);
    freeReplyObject(server_cmd(rc, "CLIENT KILL TYPE normal SKIPME yes"));
    freeReplyObject(server_cmd(rc, "CLIENT KILL TYPE pubsub"));
    ad_await(q, &n, 5, 1);
    ad_run_until_count(a, &n.awaited, 5, 20000);
    ASSERT_EQ(5, n.await_ok);
    ad_run_until_count(a, &n.enqueued, 200, 20000);
    ad_run_until_count(a, &n.done, 205, 20000);
    ad_run_for(a, 100);
    ASSERT_EQ(205, n.done);
    ASSERT_EQ(5, n.awaited);
    ASSERT_EQ(205, server_int(rc, "HGET t:{ad}:stats seq") - server_int(rc, "HGET t:{ad}:stats skipped"));
    redisFree(rc);
    rjq_client_free(c);
    a->close();
    server_stop_guarded(&s);
}

/* The client freed inside a handler: the free is deferred until the
 * callback returns, then the glue's cleanup runs inside the loop's
 * callback; the loop goes on, nothing leaks (ASan). */
static void adapter_client_freed_inside_a_handler(const adapter *a) {
    test_server s;
    server_start_guarded(&s, NULL);
    rjq_client *c = ad_client(a, &s);
    rjq_queue *q = queue_for(c, "ad");
    ad_counts n = {0};
    n.free_me = c;
    rjq_worker_options wo = {.size = sizeof(rjq_worker_options), .concurrency = 2};
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(q, &wo, ad_handler, &n, &w));
    ad_enqueue(q, &n, 0, 3, 0);
    ad_run_until_count(a, &n.ran, 1, 10000);
    ASSERT(n.free_me == NULL);
    ad_run_for(a, 100);
    a->close();
    server_stop_guarded(&s);
}

/* The glue's watch_fd/unwatch_fd under the sharded pub/sub link: messages
 * in order, a killed link reported lost and subscribed again, the link
 * freed from inside its message hook with more replies behind. */
typedef struct ad_shard {
    long subscribed, lost, messages, order_errors;
    long free_at;                /* free the link at this message (0: never) */
    rjq__shardlink *link;
} ad_shard;

static void ad_shard_message(rjq__shardlink *l, void *arg, const char *ch, size_t chlen,
                             const char *payload, size_t len) {
    ad_shard *n = arg;
    char want[32];
    int k = snprintf(want, sizeof want, "m%ld", n->messages);
    (void)ch, (void)chlen;
    if ((size_t)k != len || memcmp(payload, want, len) != 0) n->order_errors++;
    n->messages++;
    if (n->free_at && n->messages == n->free_at) {
        rjq__shardlink_free(l);
        n->link = NULL;
    }
}

static void ad_shard_event(rjq__shardlink *l, void *arg, const char *ch, size_t chlen, int ev,
                           const char *detail) {
    ad_shard *n = arg;
    (void)l, (void)ch, (void)chlen, (void)detail;
    if (ev == RJQ__SHARDLINK_SUBSCRIBED) n->subscribed++;
    if (ev == RJQ__SHARDLINK_LOST) n->lost++;
}

static void adapter_sharded_link(const adapter *a) {
    static const rjq__shardlink_hooks hooks = {ad_shard_message, ad_shard_event};
    test_server s;
    server_start_guarded(&s, NULL);
    rjq_client *c = ad_client(a, &s);
    ad_shard n = {0};
    ASSERT_OK(rjq__shardlink_new(c, "127.0.0.1", s.port, &hooks, &n, &n.link));
    ASSERT_OK(rjq__shardlink_subscribe(n.link, "{ad}x", 5));
    ad_run_until_count(a, &n.subscribed, 1, 10000);
    redisContext *rc = server_connect(&s);
    for (int i = 0; i < 100; i++) freeReplyObject(server_cmd(rc, "SPUBLISH {ad}x m%d", i));
    ad_run_until_count(a, &n.messages, 100, 10000);
    freeReplyObject(server_cmd(rc, "CLIENT KILL TYPE pubsub"));
    ad_run_until_count(a, &n.lost, 1, 10000);
    ad_run_until_count(a, &n.subscribed, 2, 10000);
    n.free_at = 150;
    for (int i = 100; i < 200; i++) freeReplyObject(server_cmd(rc, "SPUBLISH {ad}x m%d", i));
    ad_run_until_count(a, &n.messages, 150, 10000);
    ad_run_for(a, 50);
    ASSERT(n.link == NULL);
    ASSERT_EQ(150, n.messages);
    ASSERT_EQ(0, n.order_errors);
    redisFree(rc);
    rjq_client_free(c);
    a->close();
    server_stop_guarded(&s);
}

#endif /* RJQ_TEST_ADAPTER_CASES_H */
