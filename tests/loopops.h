/*
 * rjq_loop_ops (the hiredis-level hooks, public until 1.0) on libevent for
 * the tests that test those hooks themselves: hiredis' own adapter
 * (redisLibeventAttach) and one evtimer for the client's timer. The glue
 * in adapters/rjq/ is on rjq_io_ops; this is the plain way a program on
 * rjq_loop_ops does it.
 *
 *     rjq_loop_ops ops = loopops_ops();   (attach, set_timer, cleanup)
 *     loopops_client_new(&c, base, &o, &ops);
 */
#ifndef RJQ_TEST_LOOPOPS_H
#define RJQ_TEST_LOOPOPS_H

#include <stdlib.h>

#include <event2/event.h>
#include <hiredis/adapters/libevent.h>

#include "rjq.h"

typedef struct loopops_glue {
    struct event *timer;
    struct event_base *base;
    rjq_client *client;
    int firing, closing;
} loopops_glue;

static int loopops_attach(void *loop, struct redisAsyncContext *ac) {
    loopops_glue *g = loop;
    return redisLibeventAttach(ac, g->base) == REDIS_OK ? 0 : -1;
}

static void loopops_fire(evutil_socket_t fd, short what, void *arg) {
    loopops_glue *g = arg;
    (void)fd, (void)what;
    g->firing = 1;
    rjq_client_handle_timeout(g->client); /* may free the client: cleanup */
    g->firing = 0;
    if (g->closing) {
        event_free(g->timer);
        free(g);
    }
}

/* 0: "soon" is the next loop pass (an evtimer of 0) */
static void loopops_set_timer(void *loop, long ms) {
    loopops_glue *g = loop;
    evtimer_del(g->timer);
    if (ms < 0) return;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(g->timer, &tv);
}

static void loopops_cleanup(void *loop) {
    loopops_glue *g = loop;
    g->closing = 1;
    if (g->firing) return; /* loopops_fire frees it */
    event_free(g->timer);
    free(g);
}

static inline rjq_loop_ops loopops_ops(void) {
    rjq_loop_ops ops = RJQ_LOOP_OPS_INIT;
    ops.attach = loopops_attach;
    ops.set_timer = loopops_set_timer;
    ops.cleanup = loopops_cleanup;
    return ops;
}

static inline loopops_glue *loopops_new(struct event_base *base) {
    loopops_glue *g = calloc(1, sizeof *g);
    if (g == NULL) abort();
    g->base = base;
    g->timer = evtimer_new(base, loopops_fire, g);
    if (g->timer == NULL) abort();
    return g;
}

/* rjq_client_new(&c, o, ops, g) with these hooks; on failure g is freed.
 * (ops: loopops_ops() or an older/newer-sized copy of it) */
static inline int loopops_client_new(rjq_client **out, struct event_base *base,
                                     const rjq_client_options *o, const rjq_loop_ops *ops) {
    loopops_glue *g = loopops_new(base);
    int rc = rjq_client_new(out, o, ops, g);
    if (rc != RJQ_OK) {
        event_free(g->timer);
        free(g);
        return rc;
    }
    g->client = *out;
    return RJQ_OK;
}

#endif /* RJQ_TEST_LOOPOPS_H */
