/* The libuv glue (adapters/rjq/libuv.h) through the shared adapter cases. */
#include <rjq/libuv.h>

#include "adapter_cases.h"

static uv_loop_t uv;
static int uv_ready;

static int uv_client_new(rjq_client **c, const rjq_client_options *o) {
    if (!uv_ready) {
        ASSERT(uv_loop_init(&uv) == 0);
        uv_ready = 1;
    }
    return rjq_libuv_client_new(c, &uv, o);
}

static void uv_turn(void) {
    uv_run(&uv, UV_RUN_NOWAIT);
}

static void uv_done(void) {
    uv_run(&uv, UV_RUN_DEFAULT); /* the closed handles go */
    ASSERT(uv_loop_close(&uv) == 0);
    uv_ready = 0;
}

static const adapter libuv_adapter = {uv_client_new, uv_turn, uv_done};

TEST(libuv_glue_runs_jobs_and_awaits) {
    adapter_runs_jobs_and_awaits(&libuv_adapter);
}

TEST(libuv_glue_survives_killed_connections) {
    adapter_survives_killed_connections(&libuv_adapter);
}

TEST(libuv_glue_client_freed_inside_a_handler) {
    adapter_client_freed_inside_a_handler(&libuv_adapter);
}

TEST(libuv_glue_watches_the_sharded_pubsub_link) {
    adapter_sharded_link(&libuv_adapter);
}
