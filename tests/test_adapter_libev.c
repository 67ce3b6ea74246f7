/* The libev glue (adapters/rjq/libev.h) through the shared adapter cases. */
#include <rjq/libev.h>

#include "adapter_cases.h"

static struct ev_loop *ev;

static int ev_client_new(rjq_client **c, const rjq_client_options *o) {
    if (ev == NULL) ASSERT((ev = ev_loop_new(EVFLAG_AUTO)) != NULL);
    return rjq_libev_client_new(c, ev, o);
}

static void ev_turn(void) {
    ev_run(ev, EVRUN_NOWAIT);
}

static void ev_done(void) {
    ev_run(ev, EVRUN_NOWAIT);
    ev_loop_destroy(ev);
    ev = NULL;
}

static const adapter libev_adapter = {ev_client_new, ev_turn, ev_done};

TEST(libev_glue_runs_jobs_and_awaits) {
    adapter_runs_jobs_and_awaits(&libev_adapter);
}

TEST(libev_glue_survives_killed_connections) {
    adapter_survives_killed_connections(&libev_adapter);
}

TEST(libev_glue_client_freed_inside_a_handler) {
    adapter_client_freed_inside_a_handler(&libev_adapter);
}

TEST(libev_glue_watches_the_sharded_pubsub_link) {
    adapter_sharded_link(&libev_adapter);
}
