/* The shared test set-up (fixture.h). */
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "core.h" /* rjq__channel_confirmed */
#include "harness.h"
#include "waits.h"

void env_open(test_env *e, const char *queue, const rjq_queue_options *o) {
    memset(e, 0, sizeof *e);
    server_start_guarded(&e->s, NULL);
    e->base = event_base_new();
    ASSERT(e->base != NULL);
    e->c = client_for(e->base, &e->s);
    if (queue) ASSERT_OK(rjq_queue_open(e->c, queue, o, &e->q));
    e->rc = server_connect(&e->s);
}

void env_start_queue(test_env *e, const char *queue, const rjq_queue_options *o) {
    env_open(e, queue, o);
    wait_connected(e->base, e->c);
    /* (rjq_queue_open reads whether the queue is sharded: a test that stops
     * Redis next has its first calls sent, not held for that read) */
    if (e->q) wait_layout_known(e->base, e->q);
}

void env_start(test_env *e, const char *queue) {
    env_start_queue(e, queue, NULL);
}

void env_stop(test_env *e) {
    if (e->rc) redisFree(e->rc);
    if (e->c) rjq_client_free(e->c);
    event_base_free(e->base);
    server_stop_guarded(&e->s);
}

rjq_worker_options quiet_worker_options(int concurrency) {
    rjq_worker_options o = RJQ_WORKER_OPTIONS_INIT;
    o.concurrency = concurrency;
    o.poll_ms = 60000;
    o.reclaim_ms = 600000;
    return o;
}

/* Has the client had its doorbell and every push channel of the queue's
 * idle workers confirmed? */
static int worker_subscribed(rjq_client *c, redisContext *rc, const char *name) {
    char wake[128];
    snprintf(wake, sizeof wake, "t:{%s}:wake", name);
    redisReply *r = server_cmd(rc, "HKEYS t:{%s}:idle", name);
    int ok = rjq__channel_confirmed(c, wake) && r->type == REDIS_REPLY_ARRAY && r->elements > 0;
    for (size_t k = 0; ok && k < r->elements; k++) {
        const char *ch = strchr(r->element[k]->str, ' ');
        ok = ch != NULL && rjq__channel_confirmed(c, ch + 1);
    }
    freeReplyObject(r);
    return ok;
}

void wait_worker_started(struct event_base *base, rjq_client *c, rjq_queue *q,
                                redisContext *rc, const char *name) {
    WAIT_FOR(base, worker_subscribed(c, rc, name), 5000);
    for (int i = 0; i < 100; i++) {
        long long before = server_script_calls(rc);
        (void)get_stats(base, q); /* one script call */
        if (server_script_calls(rc) == before + 1) return;
    }
    FAIL_AT(__FILE__, __LINE__, "the worker's claims did not settle");
}

void wait_monitoring(struct event_base *base, rjq_client *c, const char *name) {
    char events[128];
    snprintf(events, sizeof events, "t:{%s}:events", name);
    WAIT_FOR(base, rjq__channel_confirmed(c, events), 5000);
}

static void on_worker_stopped(rjq_worker *w, int status, void *data) {
    (void)w;
    ASSERT_OK(status);
    (*(int *)data)++;
}

void worker_stop_wait(struct event_base *base, rjq_worker *w) {
    int stopped = 0;
    ASSERT_OK(rjq_worker_stop(w, on_worker_stopped, &stopped));
    ASSERT(loop_until(base, &stopped, 10000));
    ASSERT_EQ(1, stopped);
}

static void on_marker(rjq_client *c, const char *channel, const char *msg, size_t len, void *arg) {
    (void)c, (void)channel, (void)len;
    if (msg) (*(int *)arg)++; /* (NULL: the subscription is confirmed) */
}

static void on_spublished(rjq_client *c, int status, redisReply *reply, void *arg) {
    (void)c, (void)reply, (void)arg;
    ASSERT_OK(status);
}

void subscriber_barrier(struct event_base *base, rjq_client *c, redisContext *rc) {
    static int markers, n;
    char channel[64];
    snprintf(channel, sizeof channel, "t:test-barrier:%d", ++n);
    markers = 0;
    ASSERT_OK(rjq__subscribe(c, channel, on_marker, &markers));
    WAIT_FOR(base, rjq__channel_confirmed(c, channel), 5000);
    if (rjq__route_mode(c) == RJQ__ROUTE_CLUSTER) {
        /* a sharded channel: SPUBLISH at its slot's master (routed by the
         * client, as its own scripts' publishes go) */
        const char *argv[] = {"SPUBLISH", channel, "marker"};
        ASSERT_OK(rjq__command(c, 0, on_spublished, NULL, 3, argv, NULL));
    } else {
        freeReplyObject(server_cmd(rc, "PUBLISH %s marker", channel));
    }
    ASSERT(loop_until(base, &markers, 5000));
    rjq__unsubscribe(c, channel, &markers);
}

void wait_server_clock(struct event_base *base, redisContext *rc, long ms) {
    long long until = server_now_ms(rc) + ms;
    WAIT_FOR(base, server_now_ms(rc) > until, ms + 10000);
}
