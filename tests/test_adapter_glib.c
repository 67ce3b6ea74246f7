/* The GLib glue (adapters/rjq/glib.h) through the shared adapter cases,
 * and its one GSource per client across reconnects. */
#include <rjq/glib.h>

#include "adapter_cases.h"

static GMainContext *ctx;

static int gl_client_new(rjq_client **c, const rjq_client_options *o) {
    if (ctx == NULL) ctx = g_main_context_new();
    return rjq_glib_client_new(c, ctx, o);
}

static void gl_turn(void) {
    while (g_main_context_iteration(ctx, FALSE)) {
    }
}

static void gl_done(void) {
    gl_turn();
    g_main_context_unref(ctx);
    ctx = NULL;
}

static const adapter glib_adapter = {gl_client_new, gl_turn, gl_done};

TEST(glib_glue_runs_jobs_and_awaits) {
    adapter_runs_jobs_and_awaits(&glib_adapter);
}

TEST(glib_glue_survives_killed_connections) {
    adapter_survives_killed_connections(&glib_adapter);
}

TEST(glib_glue_client_freed_inside_a_handler) {
    adapter_client_freed_inside_a_handler(&glib_adapter);
}

TEST(glib_glue_watches_the_sharded_pubsub_link) {
    adapter_sharded_link(&glib_adapter);
}

/* The sources attached to ctx and not destroyed (ids are handed out in
 * order: a probe's id is one past the last). */
static int live_sources(GMainContext *c) {
    GSource *probe = g_idle_source_new();
    guint last = g_source_attach(probe, c);
    int n = 0;
    for (guint id = 1; id < last; id++)
        if (g_main_context_find_source_by_id(c, id) != NULL) n++;
    g_source_destroy(probe);
    g_source_unref(probe);
    return n;
}

static void gl_on_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    (void)c, (void)conn, (void)detail;
    if (ev == RJQ_EVENT_CONNECTED) (*(long *)data)++;
}

/* 12 reconnects of both connections leave one live GSource (hiredis' own
 * GLib adapter leaves one more per connect); the free leaves none. */
TEST(glib_glue_keeps_one_source_across_reconnects) {
    test_server s;
    server_start_guarded(&s, NULL);
    long connected = 0;
    rjq_client_options o = client_options(s.url);
    o.on_event = gl_on_event;
    o.event_data = &connected;
    o.reconnect_min_ms = 1;
    o.reconnect_max_ms = 20;
    rjq_client *c = NULL;
    ASSERT_OK(gl_client_new(&c, &o));
    ad_run_until_count(&glib_adapter, &connected, 2, 10000);
    ASSERT_EQ(1, live_sources(ctx));
    redisContext *rc = server_connect(&s);
    for (int i = 1; i <= 12; i++) {
        freeReplyObject(server_cmd(rc, "CLIENT KILL TYPE normal SKIPME yes"));
        freeReplyObject(server_cmd(rc, "CLIENT KILL TYPE pubsub"));
        ad_run_until_count(&glib_adapter, &connected, 2 + 2 * i, 10000);
    }
    ASSERT_EQ(26, connected);
    ASSERT_EQ(1, live_sources(ctx));
    rjq_client_free(c);
    ASSERT_EQ(0, live_sources(ctx));
    redisFree(rc);
    gl_done();
    server_stop_guarded(&s);
}
