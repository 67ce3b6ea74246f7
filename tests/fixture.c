/* The shared test set-up (fixture.h). */
#include <string.h>

#include "fixture.h"
#include "harness.h"

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
