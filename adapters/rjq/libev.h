/*
 * rjq on libev: header-only glue (static functions), so only programs that
 * use libev link it. Include it in one .c file of your program.
 *
 *     struct ev_loop *loop = EV_DEFAULT;
 *     rjq_client *c;
 *     int rc = rjq_libev_client_new(&c, loop, &opts);
 *     ...
 *     ev_run(loop, 0);
 *
 * Each hiredis context is attached with hiredis' own libev adapter; the
 * client's single timer is an ev_timer. rjq_client_free() stops and frees
 * it (also from inside any callback).
 */
#ifndef RJQ_LIBEV_H
#define RJQ_LIBEV_H

#include <stdlib.h>

#include <ev.h>
#include <hiredis/adapters/libev.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "rjq.h"

typedef struct rjq_libev_glue {
    struct ev_loop *loop;
    ev_timer timer;
    rjq_client *client;
    int firing, freed;
} rjq_libev_glue;

static int rjq_libev_attach_(void *loop, struct redisAsyncContext *ac) {
    rjq_libev_glue *g = RJQ_CAST(rjq_libev_glue *, loop);
    return redisLibevAttach(g->loop, ac) == REDIS_OK ? 0 : -1;
}

static void rjq_libev_fire_(struct ev_loop *loop, ev_timer *t, int revents) {
    rjq_libev_glue *g = RJQ_CAST(rjq_libev_glue *, t->data);
    (void)loop;
    (void)revents;
    g->firing = 1;
    rjq_client_handle_timeout(g->client); /* may free the client: cleanup */
    if (g->freed) {
        free(g);
        return;
    }
    g->firing = 0;
}

static void rjq_libev_set_timer_(void *loop, long timeout_ms) {
    rjq_libev_glue *g = RJQ_CAST(rjq_libev_glue *, loop);
    ev_timer_stop(g->loop, &g->timer);
    if (timeout_ms < 0) return;
    if (timeout_ms == 0 && g->firing) timeout_ms = 1; /* the next loop pass */
    ev_timer_set(&g->timer, RJQ_CAST(double, timeout_ms) / 1000.0, 0.0);
    ev_timer_start(g->loop, &g->timer);
}

static void rjq_libev_cleanup_(void *loop) {
    rjq_libev_glue *g = RJQ_CAST(rjq_libev_glue *, loop);
    ev_timer_stop(g->loop, &g->timer);
    if (g->firing) g->freed = 1; /* rjq_libev_fire_ frees it */
    else free(g);
}

/* watch_fd: an ev_io per watched socket. */
typedef struct rjq_libev_fdw {
    ev_io io;
    rjq_fd_fn *cb;
    void *arg;
} rjq_libev_fdw;

static void rjq_libev_on_fd_(struct ev_loop *loop, ev_io *io, int revents) {
    rjq_libev_fdw *w = RJQ_CAST(rjq_libev_fdw *, io->data);
    (void)loop;
    w->cb(w->arg, (revents & EV_READ) != 0, (revents & EV_WRITE) != 0); /* may unwatch */
}

static void *rjq_libev_watch_fd_(void *loop, int fd, int want_read, int want_write, rjq_fd_fn *cb,
                                 void *arg) {
    rjq_libev_glue *g = RJQ_CAST(rjq_libev_glue *, loop);
    rjq_libev_fdw *w = RJQ_CAST(rjq_libev_fdw *, calloc(1, sizeof *w));
    if (w == NULL) return NULL;
    w->cb = cb;
    w->arg = arg;
    ev_io_init(&w->io, rjq_libev_on_fd_, fd, (want_read ? EV_READ : 0) | (want_write ? EV_WRITE : 0));
    w->io.data = w;
    ev_io_start(g->loop, &w->io);
    return w;
}

static void rjq_libev_unwatch_fd_(void *loop, void *handle) {
    rjq_libev_glue *g = RJQ_CAST(rjq_libev_glue *, loop);
    rjq_libev_fdw *w = RJQ_CAST(rjq_libev_fdw *, handle);
    ev_io_stop(g->loop, &w->io);
    free(w);
}

/*
 * Create a client running on `loop`. Same contract as rjq_client_new();
 * the glue is freed by rjq_client_free().
 */
static inline int rjq_libev_client_new(rjq_client **out, struct ev_loop *loop,
                                       const rjq_client_options *opts) {
    static const rjq_loop_ops ops = {
        sizeof(rjq_loop_ops), rjq_libev_attach_, rjq_libev_set_timer_, rjq_libev_cleanup_, NULL,
        NULL, rjq_libev_watch_fd_, rjq_libev_unwatch_fd_};
    if (out == NULL || loop == NULL) return RJQ_EINVAL;
    rjq_libev_glue *g = RJQ_CAST(rjq_libev_glue *, calloc(1, sizeof *g));
    if (g == NULL) return RJQ_ENOMEM;
    g->loop = loop;
    ev_init(&g->timer, rjq_libev_fire_);
    g->timer.data = g;
    int rc = rjq_client_new(out, opts, &ops, g);
    if (rc != RJQ_OK) {
        free(g);
        return rc;
    }
    g->client = *out;
    return RJQ_OK;
}

#endif /* RJQ_LIBEV_H */
