/* The libevent glue (adapters/rjq/libevent.h) through the shared adapter
 * cases (its own promises: tests/test_libevent_glue.c). */
#include <event2/event.h>
#include <rjq/libevent.h>

#include "adapter_cases.h"

static struct event_base *base;

static int le_client_new(rjq_client **c, const rjq_client_options *o) {
    if (base == NULL) ASSERT((base = event_base_new()) != NULL);
    return rjq_libevent_client_new(c, base, o);
}

static void le_turn(void) {
    event_base_loop(base, EVLOOP_NONBLOCK);
}

static void le_done(void) {
    event_base_loop(base, EVLOOP_NONBLOCK);
    event_base_free(base);
    base = NULL;
}

static const adapter libevent_adapter = {le_client_new, le_turn, le_done};

TEST(libevent_glue_runs_jobs_and_awaits) {
    adapter_runs_jobs_and_awaits(&libevent_adapter);
}

TEST(libevent_glue_survives_killed_connections) {
    adapter_survives_killed_connections(&libevent_adapter);
}

TEST(libevent_glue_client_freed_inside_a_handler) {
    adapter_client_freed_inside_a_handler(&libevent_adapter);
}

TEST(libevent_glue_watches_the_sharded_pubsub_link) {
    adapter_sharded_link(&libevent_adapter);
}
