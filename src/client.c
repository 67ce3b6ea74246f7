/*
 * Client lifetime: creation, the one loop timer, callback depth and the
 * deferred free that makes rjq_client_free() safe inside any callback.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define DEFAULT_MAX_PAYLOAD (16u * 1024 * 1024)

/* Why the last rjq_client_new() of this thread failed (rjq_client_errmsg(NULL)). */
static _Thread_local char new_error[RJQ__ERRMSG_MAX];

uint64_t rjq__now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* xorshift64*: tokens and jitter need unpredictability across clients,
 * not cryptographic strength; the seed comes from the kernel. */
uint64_t rjq__random(rjq_client *c) {
    uint64_t x = c->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    c->rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static uint64_t seed(void) {
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        s = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40);
    }
    return s ? s : 0x9E3779B97F4A7C15ULL;
}

void rjq__errmsg(rjq_client *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
    va_end(ap);
}

void rjq__background_failed(rjq_client *c, int status, const char *what) {
    if (status != RJQ_OK && status != RJQ_ECANCELED && status != RJQ_ECONN)
        rjq__errmsg(c, "%s: %s", what, rjq_strerror(status));
}

void rjq__emit(rjq_client *c, rjq_event ev, int conn, const char *detail) {
    if (c->on_event && !c->closing) c->on_event(c, ev, conn, detail, c->event_data);
}

/* ---- timers ---------------------------------------------------------- */

/* Ask the loop for a wake-up at the earliest due timer, unless one at or
 * before it is already armed. Deletions never disarm: an early wake-up
 * finds nothing due and re-arms. */
static void arm(rjq_client *c) {
    rjq__timer *t = rjq__timers_peek(&c->timers);
    if (t == NULL || c->closing || t->due >= c->armed_due) return;
    uint64_t now = rjq__now_ms();
    c->armed_due = t->due;
    c->ops.set_timer(c->loop, t->due > now ? (long)(t->due - now) : 0);
}

void rjq__timer_start(rjq_client *c, rjq__timer *t, uint64_t delay_ms) {
    if (rjq__timers_add(&c->timers, t, rjq__now_ms() + delay_ms) == 0) arm(c);
}

void rjq__timer_stop(rjq_client *c, rjq__timer *t) {
    rjq__timers_del(&c->timers, t);
}

void rjq_client_handle_timeout(rjq_client *c) {
    rjq__enter(c);
    c->armed_due = UINT64_MAX;
    uint64_t now = rjq__now_ms();
    rjq__timer *t;
    /* A timer re-armed for "now" by its own callback waits for the next
     * loop turn: only timers due before this pass started run in it. */
    while (!c->closing && (t = rjq__timers_pop_due(&c->timers, now)) != NULL)
        t->fn(t);
    arm(c);
    rjq__leave(c);
}

/* ---- creation ---------------------------------------------------------- */

static int copy_options(rjq_client *c, const rjq_client_options *o) {
    const char *prefix = o && o->prefix ? o->prefix : "rjq";
    const char *name = o && o->name ? o->name : "rjq";
    if (!rjq__valid_queue_name(prefix)) {
        rjq__errmsg(c, "invalid key prefix");
        return RJQ_EINVAL;
    }
    if (!rjq__valid_client_name(name)) {
        rjq__errmsg(c, "invalid client name (no spaces, 1..128 bytes)");
        return RJQ_EINVAL;
    }
    c->prefix = strdup(prefix);
    c->name = strdup(name);
    if (c->prefix == NULL || c->name == NULL) return RJQ_ENOMEM;
    c->connect_timeout_ms = o && o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 5000;
    c->reconnect_min_ms = o && o->reconnect_min_ms > 0 ? o->reconnect_min_ms : 50;
    c->reconnect_max_ms = o && o->reconnect_max_ms > 0 ? o->reconnect_max_ms : 5000;
    if (c->reconnect_max_ms < c->reconnect_min_ms) c->reconnect_max_ms = c->reconnect_min_ms;
    c->max_payload = o && o->max_payload ? o->max_payload : DEFAULT_MAX_PAYLOAD;
    c->on_event = o ? o->on_event : NULL;
    c->event_data = o ? o->event_data : NULL;
    return RJQ_OK;
}

static void destroy(rjq_client *c);

int rjq_client_new(rjq_client **out, const rjq_client_options *opts,
                   const rjq_loop_ops *ops, void *loop) {
    if (out == NULL || ops == NULL || ops->set_timer == NULL || ops->attach == NULL)
        return RJQ_EINVAL;
    *out = NULL;
    rjq_client *c = calloc(1, sizeof *c);
    if (c == NULL) {
        snprintf(new_error, sizeof new_error, "out of memory");
        return RJQ_ENOMEM;
    }
    c->ops = *ops;
    c->loop = loop;
    c->armed_due = UINT64_MAX;
    c->rng = seed();
    int rc = copy_options(c, opts);
    if (rc == RJQ_OK)
        rc = rjq__url_parse(opts ? opts->url : NULL, &c->url, c->errmsg, sizeof c->errmsg);
    if (rc != RJQ_OK) {
        snprintf(new_error, sizeof new_error, "%s", c->errmsg[0] ? c->errmsg : rjq_strerror(rc));
        free(c->prefix);
        free(c->name);
        free(c);
        return rc;
    }
    rjq__requests_init(c);
    rjq__awaits_init(c);
    rjq__conn_init(c, &c->cmd, RJQ_CONN_COMMAND);
    rjq__conn_init(c, &c->sub, RJQ_CONN_SUBSCRIBER);
    rjq__conn_start(&c->cmd);
    rjq__conn_start(&c->sub);
    *out = c;
    return RJQ_OK;
}

/* ---- depth and destruction ------------------------------------------- */

void rjq__enter(rjq_client *c) {
    c->depth++;
}

void rjq__leave(rjq_client *c) {
    if (--c->depth == 0 && c->free_pending && !c->closing) destroy(c);
}

void rjq_client_free(rjq_client *c) {
    if (c == NULL || c->closing) return;
    if (c->depth > 0) {
        c->free_pending = 1;
        return;
    }
    destroy(c);
}

/* Tear down in an order where every user callback still sees a valid
 * client: pending requests and workers are cancelled first (callbacks get
 * RJQ_ECANCELED), then the contexts are freed, then our memory. */
static void destroy(rjq_client *c) {
    c->closing = 1;
    c->depth++; /* user code run below cannot re-enter destroy */
    for (rjq_queue *q = c->queues; q; q = q->next) {
        rjq__enqueue_cancel_pending(q);
        rjq__complete_cancel_pending(q);
    }
    rjq__requests_cancel_all(c);
    rjq__awaits_cancel_all(c);
    for (rjq_queue *q = c->queues; q; q = q->next)
        while (q->workers) rjq__worker_destroy(q->workers);
    rjq__conn_close(&c->cmd);
    rjq__conn_close(&c->sub);
    rjq__monitors_free(c); /* they refer to their queues */
    while (c->queues) {
        rjq_queue *q = c->queues;
        c->queues = q->next;
        rjq__queue_free(q);
    }
    rjq__pubsub_free(c);
    rjq__timers_free(&c->timers);
    if (c->ops.cleanup) c->ops.cleanup(c->loop);
    rjq__url_free(&c->url);
    free(c->prefix);
    free(c->name);
    free(c);
}

/* ---- accessors ----------------------------------------------------------- */

const char *rjq_client_errmsg(const rjq_client *c) {
    if (c == NULL) return new_error[0] ? new_error : "no error";
    return c->errmsg[0] ? c->errmsg : "no error";
}

void rjq_client_set_data(rjq_client *c, void *data) {
    c->data = data;
}

void *rjq_client_data(const rjq_client *c) {
    return c->data;
}

int rjq_client_connected(const rjq_client *c) {
    return c->cmd.ready;
}

void rjq__on_ready(rjq_client *c, int kind) {
    if (kind == RJQ_CONN_COMMAND) rjq__awaits_rewatch(c);
    for (rjq_queue *q = c->queues; q; q = q->next) rjq__workers_resync(q);
}
