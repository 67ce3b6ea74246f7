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

/* A name /etc/hosts gives 127.0.0.1 besides localhost (the core maps
 * "localhost" itself without a resolver), or "" when there is none. */
static void loopback_alias(char *out, size_t cap) {
    char line[512];
    FILE *f = fopen("/etc/hosts", "r");
    out[0] = '\0';
    while (f && out[0] == '\0' && fgets(line, sizeof line, f)) {
        char *save = NULL, *addr = strtok_r(line, " \t\r\n", &save), *name;
        if (addr == NULL || strcmp(addr, "127.0.0.1") != 0) continue;
        while (out[0] == '\0' && (name = strtok_r(NULL, " \t\r\n", &save)) != NULL)
            if (name[0] != '#' && strcmp(name, "localhost") != 0) snprintf(out, cap, "%s", name);
    }
    if (f) fclose(f);
}

/* Host names go through uv_getaddrinfo: a name for 127.0.0.1 connects
 * and runs jobs. */
TEST(libuv_glue_resolves_host_names) {
    char name[256], url[400];
    loopback_alias(name, sizeof name);
    if (name[0] == '\0') {
        printf("SKIP: /etc/hosts has no other name for 127.0.0.1\n");
        return;
    }
    test_server s;
    server_start_guarded(&s, NULL);
    snprintf(url, sizeof url, "redis://%s:%d", name, s.port);
    rjq_client_options o = client_options(url);
    rjq_client *c = NULL;
    ASSERT_OK(uv_client_new(&c, &o));
    for (int i = 0; i < 5000 && !rjq_client_is_connected(c); i++) ad_run_for(&libuv_adapter, 1);
    ASSERT(rjq_client_is_connected(c));
    rjq_queue *q = queue_for(c, "ad");
    ad_counts n = {0};
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(q, &wo, ad_handler, &n, &w));
    ad_enqueue(q, &n, 0, 10, 0);
    ad_run_until_count(&libuv_adapter, &n.done, 10, 20000);
    rjq_client_free(c);
    uv_done();
    server_stop_guarded(&s);
}

/* The client freed while its lookups are under way: they are cancelled,
 * no callback reaches the freed client, the loop closes with nothing
 * left (uv_loop_close succeeds; ASan and valgrind see no leak). */
TEST(libuv_glue_free_cancels_lookups) {
    rjq_client_options o = client_options("redis://localhost:1");
    rjq_client *c = NULL;
    ASSERT_OK(uv_client_new(&c, &o)); /* both connections start resolving */
    rjq_client_free(c);
    uv_done();
}
