// A C++ program on an installed rjq: rjq.h and one loop glue (chosen with
// -DGLUE_LIBEVENT, -DGLUE_LIBEV, -DGLUE_LIBUV or -DGLUE_GLIB) compile with
// -Wall -Wextra -Wold-style-cast -Werror, link and make a client
// (tests/install_consumer.sh).
#include <rjq.h>
#if defined(GLUE_LIBEVENT)
#include <rjq/libevent.h>
#elif defined(GLUE_LIBEV)
#include <rjq/libev.h>
#elif defined(GLUE_LIBUV)
#include <rjq/libuv.h>
#elif defined(GLUE_GLIB)
#include <rjq/glib.h>
#endif
#include <cstdio>

int main() {
    rjq_client_options o = RJQ_CLIENT_OPTIONS_INIT;
    o.url = "redis://127.0.0.1:1"; // nothing listens: only the set-up runs
    rjq_client *c = nullptr;
#if defined(GLUE_LIBEVENT)
    struct event_base *base = event_base_new();
    int rc = rjq_libevent_client_new(&c, base, &o);
#elif defined(GLUE_LIBEV)
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    int rc = rjq_libev_client_new(&c, loop, &o);
#elif defined(GLUE_LIBUV)
    uv_loop_t loop;
    uv_loop_init(&loop);
    int rc = rjq_libuv_client_new(&c, &loop, &o);
#elif defined(GLUE_GLIB)
    GMainContext *ctx = g_main_context_new();
    int rc = rjq_glib_client_new(&c, ctx, &o);
#endif
    if (rc != RJQ_OK) {
        std::fprintf(stderr, "client: %s\n", rjq_strerror(rc));
        return 1;
    }
    rjq_client_free(c);
#if defined(GLUE_LIBEVENT)
    event_base_free(base);
#elif defined(GLUE_LIBEV)
    ev_loop_destroy(loop);
#elif defined(GLUE_LIBUV)
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
#elif defined(GLUE_GLIB)
    g_main_context_unref(ctx);
#endif
    std::printf("C++ consumer ok\n");
    return 0;
}
