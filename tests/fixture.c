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
    rjq_worker_options o = {0};
    o.concurrency = concurrency;
    o.poll_ms = 60000;
    o.reclaim_ms = 600000;
    return o;
}

void wait_worker_started(struct event_base *base, rjq_client *c, rjq_queue *q,
                                redisContext *rc, const char *name) {
    char wake[128];
    snprintf(wake, sizeof wake, "t:{%s}:wake", name);
    int ok = 0;
    for (int i = 0; i < 500 && !ok; i++) {
        redisReply *r = server_cmd(rc, "HKEYS t:{%s}:idle", name);
        ok = rjq__channel_confirmed(c, wake) && r->type == REDIS_REPLY_ARRAY && r->elements > 0;
        for (size_t k = 0; ok && k < r->elements; k++) {
            const char *ch = strchr(r->element[k]->str, ' ');
            ok = ch != NULL && rjq__channel_confirmed(c, ch + 1);
        }
        freeReplyObject(r);
        if (!ok) loop_for(base, 10);
    }
    ASSERT(ok);
    for (int i = 0; i < 100; i++) {
        long long before = server_script_calls(rc);
        (void)get_stats(base, q); /* one script call */
        if (server_script_calls(rc) == before + 1) return;
    }
    FAIL_AT(__FILE__, __LINE__, "the worker's claims did not settle");
}
