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
 * I/O of each hiredis context goes through hiredis' own libevent adapter;
 * the client's single timer is one libevent timer event.
 */
#ifndef RJQ_LIBEVENT_H
#define RJQ_LIBEVENT_H

#include <stdlib.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <hiredis/adapters/libevent.h>

#include "rjq.h"

typedef struct rjq_libevent_glue {
    struct event_base *base;
    struct event *timer;
    rjq_client *client;
} rjq_libevent_glue;

static int rjq_libevent_attach_(void *loop, struct redisAsyncContext *ac) {
    rjq_libevent_glue *g = (rjq_libevent_glue *)loop;
    return redisLibeventAttach(ac, g->base) == REDIS_OK ? 0 : -1;
}

static void rjq_libevent_fire_(evutil_socket_t fd, short what, void *arg) {
    rjq_libevent_glue *g = (rjq_libevent_glue *)arg;
    (void)fd;
    (void)what;
    rjq_client_handle_timeout(g->client);
}

static void rjq_libevent_set_timer_(void *loop, long timeout_ms) {
    rjq_libevent_glue *g = (rjq_libevent_glue *)loop;
    if (timeout_ms < 0) {
        evtimer_del(g->timer);
        return;
    }
    struct timeval tv;
    tv.tv_sec = timeout_ms / 1000;
    tv.tv_usec = (timeout_ms % 1000) * 1000;
    evtimer_add(g->timer, &tv);
}

static void rjq_libevent_cleanup_(void *loop) {
    rjq_libevent_glue *g = (rjq_libevent_glue *)loop;
    event_free(g->timer); /* safe from inside the timer's own callback */
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
    rjq_libevent_glue *g = (rjq_libevent_glue *)calloc(1, sizeof *g);
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
