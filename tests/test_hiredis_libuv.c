/*
 * rjq on hiredis' own libuv adapter (redisLibuvAttach, through
 * adapters/rjq/libuv.h) with a uv_timer as the client's timer: liveness
 * must not depend on rjq's libevent glue
 * (issue 13). hiredis 0.14.1's libuv adapter never reports some losses (a
 * CLIENT KILL left the client calling itself connected while nothing
 * moved); the client's own watchdog finds them.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>
#include <rjq/libuv.h>

#include "harness.h"
#include "rjq.h"
#include "server.h"

#define TIMEOUT_MS 500

/* The loop and the client on it (adapters/rjq/libuv.h: hiredis' own libuv
 * adapter attaches the contexts, a uv_timer is the client's timer). */
typedef struct glue {
    uv_loop_t loop;
    rjq_client *c;
} glue;

/* Run the loop until *flag or timeout_ms. */
static int run_until(glue *g, const int *flag, long timeout_ms) {
    double end = mono_ms() + (double)timeout_ms;
    while (!*flag && mono_ms() < end) uv_run(&g->loop, UV_RUN_NOWAIT), sleep_ms(1);
    return *flag;
}

static void run_for(glue *g, long ms) {
    static const int never = 0;
    run_until(g, &never, ms);
}

typedef struct stats_res {
    int done, status;
} stats_res;

static void on_stats(rjq_client *c, int status, const rjq_stats *s, void *data) {
    stats_res *r = data;
    (void)c, (void)s;
    r->done++;
    r->status = status;
}

static void glue_start(glue *g, const test_server *s) {
    ASSERT(uv_loop_init(&g->loop) == 0);
    rjq_client_options o = client_options(s->url);
    o.command_timeout_ms = TIMEOUT_MS;
    o.ping_interval_ms = 200;
    o.connect_timeout_ms = TIMEOUT_MS;
    ASSERT_OK(rjq_libuv_client_new(&g->c, &g->loop, &o));
    for (int i = 0; i < 5000 && !rjq_client_is_connected(g->c); i++) run_for(g, 1);
    ASSERT(rjq_client_is_connected(g->c));
}

static void glue_stop(glue *g) {
    rjq_client_free(g->c);
    uv_run(&g->loop, UV_RUN_DEFAULT); /* the adapters' handles close */
    ASSERT(uv_loop_close(&g->loop) == 0);
}

static stats_res stats(glue *g, rjq_queue *q, double *took) {
    stats_res r = {0, 0};
    double t0 = mono_ms();
    ASSERT_OK(rjq_queue_get_stats(q, on_stats, &r));
    ASSERT(run_until(g, &r.done, 10000));
    if (took) *took = mono_ms() - t0;
    return r;
}

/* A private server, a client on the libuv glue and a queue that answers. */
static rjq_queue *uv_env_start(test_server *s, glue *g) {
    server_start_guarded(s, NULL);
    glue_start(g, s);
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(g->c, "uv", NULL, &q));
    ASSERT_OK(stats(g, q, NULL).status);
    return q;
}

TEST(stopped_server_times_out_on_hiredis_libuv_adapter) {
    test_server s;
    glue g;
    rjq_queue *q = uv_env_start(&s, &g);

    ASSERT_EQ(0, kill(s.pid, SIGSTOP));
    double took;
    stats_res r = stats(&g, q, &took);
    ASSERT_EQ(RJQ_ETIMEDOUT, r.status);
    ASSERT(took < TIMEOUT_MS + 1000);
    run_for(&g, 300);
    ASSERT_EQ(0, kill(s.pid, SIGCONT));
    for (int i = 0; i < 5000 && !rjq_client_is_connected(g.c); i++) run_for(&g, 1);
    ASSERT_OK(stats(&g, q, NULL).status);
    glue_stop(&g);
    server_stop_guarded(&s);
}

static void on_await(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)c, (void)status, (void)o;
    ++*(int *)data;
}

TEST(killed_connections_are_replaced_on_hiredis_libuv_adapter) {
    test_server s;
    glue g;
    rjq_queue *q = uv_env_start(&s, &g);
    int awaited = 0; /* an await subscribes the reply channel */
    ASSERT_OK(rjq_queue_await(q, "missing", NULL, on_await, &awaited, NULL));
    ASSERT(run_until(&g, &awaited, 5000));

    redisContext *rc = server_connect(&s);
    ASSERT(server_int(rc, "CLIENT KILL TYPE normal SKIPME yes") >= 1);
    ASSERT(server_int(rc, "CLIENT KILL TYPE pubsub") >= 1);
    /* Whatever the adapter reports, work resumes within a few seconds. */
    int ok = 0;
    for (int i = 0; i < 10 && !ok; i++) ok = stats(&g, q, NULL).status == RJQ_OK;
    ASSERT(ok);
    /* and the subscriber connection is back on the server */
    int subs = 0;
    for (int i = 0; i < 100 && !subs; i++) {
        run_for(&g, 50);
        redisReply *r = server_cmd(rc, "CLIENT LIST TYPE pubsub");
        subs = r->type == REDIS_REPLY_STRING && strstr(r->str, "name=") != NULL;
        freeReplyObject(r);
    }
    ASSERT(subs);
    redisFree(rc);
    glue_stop(&g);
    server_stop_guarded(&s);
}
