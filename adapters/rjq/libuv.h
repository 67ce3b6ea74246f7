/*
 * rjq on libuv: header-only glue (static functions), so only programs that
 * use libuv link it. Include it in one .c file of your program.
 *
 *     uv_loop_t *loop = uv_default_loop();
 *     rjq_client *c;
 *     int rc = rjq_libuv_client_new(&c, loop, &opts);
 *     ...
 *     uv_run(loop, UV_RUN_DEFAULT);
 *
 * Each hiredis context is attached with hiredis' own libuv adapter; the
 * client's single timer is a uv_timer. rjq_client_free() closes the timer
 * (its memory goes in the close callback, so keep running the loop until
 * it has closed, as for any libuv handle). hiredis 0.14.1's libuv adapter
 * does not report every lost connection (a CLIENT KILL); the client's own
 * liveness checks (command_timeout_ms, ping_interval_ms) find those.
 */
#ifndef RJQ_LIBUV_H
#define RJQ_LIBUV_H

#include <stdlib.h>

#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <uv.h>

#include "rjq.h"

typedef struct rjq_libuv_glue {
    uv_loop_t *loop;
    uv_timer_t timer;
    rjq_client *client;
    int firing;
} rjq_libuv_glue;

static int rjq_libuv_attach_(void *loop, struct redisAsyncContext *ac) {
    rjq_libuv_glue *g = RJQ_CAST(rjq_libuv_glue *, loop);
    return redisLibuvAttach(ac, g->loop) == REDIS_OK ? 0 : -1;
}

static void rjq_libuv_fire_(uv_timer_t *t) {
    rjq_libuv_glue *g = RJQ_CAST(rjq_libuv_glue *, t->data);
    g->firing = 1;
    rjq_client_handle_timeout(g->client); /* may free the client: cleanup */
    g->firing = 0;                        /* (g lives until the close callback) */
}

static void rjq_libuv_set_timer_(void *loop, long timeout_ms) {
    rjq_libuv_glue *g = RJQ_CAST(rjq_libuv_glue *, loop);
    if (timeout_ms < 0) {
        uv_timer_stop(&g->timer);
        return;
    }
    /* From inside the timer callback, "at once" means the next loop pass
     * (the loop-ops contract): libuv before 1.45 would run it again in the
     * same pass. */
    if (timeout_ms == 0 && g->firing) timeout_ms = 1;
    uv_timer_start(&g->timer, rjq_libuv_fire_, RJQ_CAST(uint64_t, timeout_ms), 0);
}

static void rjq_libuv_closed_(uv_handle_t *h) {
    free(h->data);
}

static void rjq_libuv_cleanup_(void *loop) {
    rjq_libuv_glue *g = RJQ_CAST(rjq_libuv_glue *, loop);
    uv_timer_stop(&g->timer);
    uv_close(RJQ_CAST(uv_handle_t *, RJQ_CAST(void *, &g->timer)), rjq_libuv_closed_);
}

/* watch_fd: a uv_poll per watched socket; its memory goes in its close
 * callback. */
typedef struct rjq_libuv_fdw {
    uv_poll_t poll;
    rjq_fd_fn *cb;
    void *arg;
} rjq_libuv_fdw;

static void rjq_libuv_on_fd_(uv_poll_t *p, int status, int events) {
    rjq_libuv_fdw *w = RJQ_CAST(rjq_libuv_fdw *, p->data);
    if (status < 0) { /* an error on the socket: the core finds it by reading */
        w->cb(w->arg, 1, 1);
        return;
    }
    w->cb(w->arg, (events & UV_READABLE) != 0, (events & UV_WRITABLE) != 0); /* may unwatch */
}

static void rjq_libuv_fdw_closed_(uv_handle_t *h) {
    free(h->data);
}

static void *rjq_libuv_watch_fd_(void *loop, int fd, int want_read, int want_write, rjq_fd_fn *cb,
                                 void *arg) {
    rjq_libuv_glue *g = RJQ_CAST(rjq_libuv_glue *, loop);
    rjq_libuv_fdw *w = RJQ_CAST(rjq_libuv_fdw *, calloc(1, sizeof *w));
    if (w == NULL) return NULL;
    w->cb = cb;
    w->arg = arg;
    if (uv_poll_init_socket(g->loop, &w->poll, fd) != 0) {
        free(w);
        return NULL;
    }
    w->poll.data = w;
    int events = (want_read ? UV_READABLE : 0) | (want_write ? UV_WRITABLE : 0);
    if (uv_poll_start(&w->poll, events, rjq_libuv_on_fd_) != 0) {
        uv_close(RJQ_CAST(uv_handle_t *, RJQ_CAST(void *, &w->poll)), rjq_libuv_fdw_closed_);
        return NULL;
    }
    return w;
}

static void rjq_libuv_unwatch_fd_(void *loop, void *handle) {
    rjq_libuv_fdw *w = RJQ_CAST(rjq_libuv_fdw *, handle);
    (void)loop;
    uv_poll_stop(&w->poll);
    uv_close(RJQ_CAST(uv_handle_t *, RJQ_CAST(void *, &w->poll)), rjq_libuv_fdw_closed_);
}

/*
 * Create a client running on `loop`. Same contract as rjq_client_new();
 * the glue is freed by rjq_client_free() (once the loop ran the timer's
 * close callback).
 */
static inline int rjq_libuv_client_new(rjq_client **out, uv_loop_t *loop,
                                       const rjq_client_options *opts) {
    static const rjq_loop_ops ops = {
        sizeof(rjq_loop_ops), rjq_libuv_attach_, rjq_libuv_set_timer_, rjq_libuv_cleanup_, NULL,
        NULL, rjq_libuv_watch_fd_, rjq_libuv_unwatch_fd_};
    if (out == NULL || loop == NULL) return RJQ_EINVAL;
    rjq_libuv_glue *g = RJQ_CAST(rjq_libuv_glue *, calloc(1, sizeof *g));
    if (g == NULL) return RJQ_ENOMEM;
    g->loop = loop;
    if (uv_timer_init(loop, &g->timer) != 0) {
        free(g);
        return RJQ_ENOMEM;
    }
    g->timer.data = g;
    int rc = rjq_client_new(out, opts, &ops, g);
    if (rc != RJQ_OK) {
        uv_close(RJQ_CAST(uv_handle_t *, RJQ_CAST(void *, &g->timer)), rjq_libuv_closed_);
        return rc;
    }
    g->client = *out;
    return RJQ_OK;
}

#endif /* RJQ_LIBUV_H */
