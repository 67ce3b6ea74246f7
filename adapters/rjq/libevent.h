/*
 * rjq on libevent: header-only glue (static functions), so only programs
 * that use libevent link it. Include it in one .c file of your program.
 *
 *     struct event_base *base = event_base_new();
 *     rjq_client *c;
 *     int rc = rjq_libevent_client_new(&c, base, &opts);
 *     ...
 *     event_base_dispatch(base);
 *
 * Two things here are about latency and system calls, not correctness;
 * hiredis' own adapter (redisLibeventAttach) and an evtimer would work too:
 *
 * - I/O. Each hiredis context gets a persistent read event (added once, not
 *   re-added after every read) and writes without waiting for the loop:
 *   hiredis asks to write when a command is queued, and the glue writes
 *   later in the same loop pass (a manually activated event), after the
 *   code that queued it returned. Only when the socket is full does it wait
 *   for writability. That is one epoll_wait and two epoll_ctl calls fewer
 *   per request.
 * - The client's single timer. "Fire at once" (0 ms) from outside the timer
 *   callback activates the timer event for this loop pass, so a batch the
 *   client gathers (completions, enqueues) goes out before the loop sleeps.
 *   From inside the timer callback it waits for the next pass, as the
 *   loop-ops contract says, so the client cannot keep the loop spinning.
 */
#ifndef RJQ_LIBEVENT_H
#define RJQ_LIBEVENT_H

#include <stdlib.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <hiredis/async.h>

#include "rjq.h"

/* ---- hiredis I/O -------------------------------------------------------- */

typedef struct rjq_libevent_io {
    redisAsyncContext *ac;
    struct event *rev;   /* EV_READ | EV_PERSIST */
    struct event *wev;   /* EV_WRITE | EV_PERSIST: the socket has room again */
    struct event *flush; /* manually activated: write what hiredis queued */
    int reading, waiting, flushing, in_write, freed;
} rjq_libevent_io;


static void rjq_libevent_on_read_(evutil_socket_t fd, short what, void *arg) {
    rjq_libevent_io *e = RJQ_CAST(rjq_libevent_io *, arg);
    (void)fd;
    (void)what;
    redisAsyncHandleRead(e->ac); /* may free e (cleanup); e unused after */
}

/* Write now. hiredis may free the context (and so call cleanup) from
 * inside: cleanup then leaves freeing e to us. */
static void rjq_libevent_write_(rjq_libevent_io *e) {
    e->in_write = 1;
    redisAsyncHandleWrite(e->ac);
    if (e->freed) {
        free(e);
        return;
    }
    e->in_write = 0;
}

static void rjq_libevent_on_writable_(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    rjq_libevent_write_(RJQ_CAST(rjq_libevent_io *, arg));
}

static void rjq_libevent_on_flush_(evutil_socket_t fd, short what, void *arg) {
    rjq_libevent_io *e = RJQ_CAST(rjq_libevent_io *, arg);
    (void)fd;
    (void)what;
    e->flushing = 0;
    if (!e->waiting) rjq_libevent_write_(e);
}

/* Watch (or stop watching) with event ev; *on says whether it is added. */
static void rjq_libevent_watch_(struct event *ev, int *on) {
    if (!*on && event_add(ev, NULL) == 0) *on = 1;
}

static void rjq_libevent_unwatch_(struct event *ev, int *on) {
    if (*on) event_del(ev);
    *on = 0;
}

static void rjq_libevent_add_read_(void *data) {
    rjq_libevent_io *e = RJQ_CAST(rjq_libevent_io *, data);
    rjq_libevent_watch_(e->rev, &e->reading);
}

static void rjq_libevent_del_read_(void *data) {
    rjq_libevent_io *e = RJQ_CAST(rjq_libevent_io *, data);
    rjq_libevent_unwatch_(e->rev, &e->reading);
}

/* hiredis has output to send. While connecting, or when a write just left
 * output behind (the socket is full), wait for writability; otherwise
 * write later in this loop pass. */
static void rjq_libevent_add_write_(void *data) {
    rjq_libevent_io *e = RJQ_CAST(rjq_libevent_io *, data);
    if (e->waiting) return;
    if (e->in_write || !(e->ac->c.flags & REDIS_CONNECTED)) {
        rjq_libevent_watch_(e->wev, &e->waiting);
        return;
    }
    if (!e->flushing) {
        e->flushing = 1;
        event_active(e->flush, EV_WRITE, 1);
    }
}

static void rjq_libevent_del_write_(void *data) {
    rjq_libevent_io *e = RJQ_CAST(rjq_libevent_io *, data);
    rjq_libevent_unwatch_(e->wev, &e->waiting);
}

/* hiredis calls this before it closes the socket: the events go now,
 * while their fd is still open. */
static void rjq_libevent_io_cleanup_(void *data) {
    rjq_libevent_io *e = RJQ_CAST(rjq_libevent_io *, data);
    event_free(e->rev);
    event_free(e->wev);
    event_free(e->flush);
    if (e->in_write) e->freed = 1; /* rjq_libevent_write_ frees e */
    else free(e);
}

static int rjq_libevent_io_attach_(redisAsyncContext *ac, struct event_base *base) {
    if (ac->ev.data != NULL) return -1;
    rjq_libevent_io *e = RJQ_CAST(rjq_libevent_io *, calloc(1, sizeof *e));
    if (e == NULL) return -1;
    e->ac = ac;
    e->rev = event_new(base, ac->c.fd, EV_READ | EV_PERSIST, rjq_libevent_on_read_, e);
    e->wev = event_new(base, ac->c.fd, EV_WRITE | EV_PERSIST, rjq_libevent_on_writable_, e);
    e->flush = event_new(base, -1, 0, rjq_libevent_on_flush_, e);
    if (e->rev == NULL || e->wev == NULL || e->flush == NULL) {
        if (e->rev) event_free(e->rev);
        if (e->wev) event_free(e->wev);
        if (e->flush) event_free(e->flush);
        free(e);
        return -1;
    }
    ac->ev.data = e;
    ac->ev.addRead = rjq_libevent_add_read_;
    ac->ev.delRead = rjq_libevent_del_read_;
    ac->ev.addWrite = rjq_libevent_add_write_;
    ac->ev.delWrite = rjq_libevent_del_write_;
    ac->ev.cleanup = rjq_libevent_io_cleanup_;
    /* Like hiredis' adapter: read, and wait for the connect to complete. */
    rjq_libevent_add_read_(e);
    rjq_libevent_add_write_(e);
    return 0;
}

/* ---- the client's timer -------------------------------------------------- */

typedef struct rjq_libevent_glue {
    struct event_base *base;
    struct event *timer;
    rjq_client *client;
    int firing, freed;
} rjq_libevent_glue;

static int rjq_libevent_attach_(void *loop, struct redisAsyncContext *ac) {
    rjq_libevent_glue *g = RJQ_CAST(rjq_libevent_glue *, loop);
    return rjq_libevent_io_attach_(ac, g->base);
}

static void rjq_libevent_fire_(evutil_socket_t fd, short what, void *arg) {
    rjq_libevent_glue *g = RJQ_CAST(rjq_libevent_glue *, arg);
    (void)fd;
    (void)what;
    g->firing = 1;
    rjq_client_handle_timeout(g->client); /* may free the client: cleanup */
    if (g->freed) {
        event_free(g->timer);
        free(g);
        return;
    }
    g->firing = 0;
}

static void rjq_libevent_set_timer_(void *loop, long timeout_ms) {
    rjq_libevent_glue *g = RJQ_CAST(rjq_libevent_glue *, loop);
    evtimer_del(g->timer);
    if (timeout_ms < 0) return;
    if (timeout_ms == 0 && !g->firing) {
        event_active(g->timer, EV_TIMEOUT, 1);
        return;
    }
    struct timeval tv;
    tv.tv_sec = timeout_ms / 1000;
    tv.tv_usec = (timeout_ms % 1000) * 1000;
    evtimer_add(g->timer, &tv);
}

static void rjq_libevent_cleanup_(void *loop) {
    rjq_libevent_glue *g = RJQ_CAST(rjq_libevent_glue *, loop);
    if (g->firing) {
        g->freed = 1; /* rjq_libevent_fire_ frees it */
        return;
    }
    event_free(g->timer);
    free(g);
}

/*
 * Create a client running on `base`. Same contract as rjq_client_new();
 * the glue is freed by rjq_client_free().
 */
static inline int rjq_libevent_client_new(rjq_client **out, struct event_base *base,
                                          const rjq_client_options *opts) {
    static const rjq_loop_ops ops = {rjq_libevent_attach_, rjq_libevent_set_timer_,
                                     rjq_libevent_cleanup_};
    if (out == NULL || base == NULL) return RJQ_EINVAL;
    rjq_libevent_glue *g = RJQ_CAST(rjq_libevent_glue *, calloc(1, sizeof *g));
    if (g == NULL) return RJQ_ENOMEM;
    g->base = base;
    g->timer = evtimer_new(base, rjq_libevent_fire_, g);
    if (g->timer == NULL) {
        free(g);
        return RJQ_ENOMEM;
    }
    int rc = rjq_client_new(out, opts, &ops, g);
    if (rc != RJQ_OK) {
        event_free(g->timer);
        free(g);
        return rc;
    }
    g->client = *out;
    return RJQ_OK;
}

#endif /* RJQ_LIBEVENT_H */
