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
 * Built on rjq_io_ops (rjq.h "Any event loop"): an ev_io per socket the
 * client asks for, and an ev_timer for its timer. rjq_client_free() stops
 * and frees them (also from inside any callback). Host names: numeric
 * addresses and "localhost" only. No feature macro needed.
 */
#ifndef RJQ_LIBEV_H
#define RJQ_LIBEV_H

#include <stdlib.h>

#include <ev.h>

#include "rjq.h"

typedef struct rjq_libev_io {
    ev_io io;
    struct rjq_libev_glue *g;
    struct rjq_libev_io *next;
} rjq_libev_io;

typedef struct rjq_libev_glue {
    struct ev_loop *loop;
    ev_timer timer;
    rjq_client *client;
    rjq_libev_io *ios; /* one per socket watched */
    int firing, freed;
} rjq_libev_glue;

static void rjq_libev_on_io_(struct ev_loop *loop, ev_io *io, int revents) {
    rjq_libev_io *w = RJQ_CAST(rjq_libev_io *, io->data);
    int ev = ((revents & EV_READ) ? RJQ_IO_READ : 0) | ((revents & EV_WRITE) ? RJQ_IO_WRITE : 0);
    (void)loop;
    if (revents & EV_ERROR) ev = RJQ_IO_READ | RJQ_IO_WRITE;
    rjq_client_handle_io(w->g->client, io->fd, ev); /* may free w, the glue, the client */
}

static void rjq_libev_socket_(void *arg, int fd, int what) {
    rjq_libev_glue *g = RJQ_CAST(rjq_libev_glue *, arg);
    rjq_libev_io **p = &g->ios;
    while (*p && (*p)->io.fd != fd) p = &(*p)->next;
    rjq_libev_io *w = *p;
    int events = ((what & RJQ_IO_READ) ? EV_READ : 0) | ((what & RJQ_IO_WRITE) ? EV_WRITE : 0);
    if (w) ev_io_stop(g->loop, &w->io);
    if (what == RJQ_IO_NONE) {
        if (w) {
            *p = w->next;
            free(w);
        }
        return;
    }
    if (w == NULL) {
        w = RJQ_CAST(rjq_libev_io *, calloc(1, sizeof *w));
        if (w == NULL) abort(); /* (libev aborts on out of memory too) */
        w->g = g;
        w->next = g->ios;
        g->ios = w;
        ev_init(&w->io, rjq_libev_on_io_);
        w->io.data = w;
    }
    ev_io_set(&w->io, fd, events);
    ev_io_start(g->loop, &w->io);
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

static void rjq_libev_timer_(void *arg, long timeout_ms) {
    rjq_libev_glue *g = RJQ_CAST(rjq_libev_glue *, arg);
    ev_timer_stop(g->loop, &g->timer);
    if (timeout_ms < 0) return;
    if (timeout_ms == 0 && g->firing) timeout_ms = 1; /* the next loop pass */
    ev_timer_set(&g->timer, RJQ_CAST(double, timeout_ms) / 1000.0, 0.0);
    ev_timer_start(g->loop, &g->timer);
}

/* From rjq_client_free(): every socket was told RJQ_IO_NONE already. */
static void rjq_libev_cleanup_(void *arg) {
    rjq_libev_glue *g = RJQ_CAST(rjq_libev_glue *, arg);
    ev_timer_stop(g->loop, &g->timer);
    if (g->firing) g->freed = 1; /* rjq_libev_fire_ frees it */
    else free(g);
}

/*
 * Create a client running on `loop`. Same contract as rjq_client_new();
 * the glue is freed by rjq_client_free().
 */
static inline int rjq_libev_client_new(rjq_client **out, struct ev_loop *loop,
                                       const rjq_client_options *opts) {
    if (out == NULL || loop == NULL) return RJQ_EINVAL;
    rjq_libev_glue *g = RJQ_CAST(rjq_libev_glue *, calloc(1, sizeof *g));
    if (g == NULL) return RJQ_ENOMEM;
    g->loop = loop;
    ev_init(&g->timer, rjq_libev_fire_);
    g->timer.data = g;
    rjq_io_ops io = RJQ_IO_OPS_INIT;
    io.arg = g;
    io.socket = rjq_libev_socket_;
    io.timer = rjq_libev_timer_;
    io.cleanup = rjq_libev_cleanup_;
    int rc = rjq_client_new_io(out, opts, &io);
    if (rc != RJQ_OK) {
        free(g);
        return rc;
    }
    g->client = *out;
    return RJQ_OK;
}

#endif /* RJQ_LIBEV_H */
