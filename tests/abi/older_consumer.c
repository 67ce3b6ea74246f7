/*
 * A program built against an older rjq.h (tests/abi/older_header.sh makes
 * that header from this one: rjq_client_options without wait_replicas and
 * wait_timeout_ms, rjq_loop_ops without watch_fd and unwatch_fd,
 * rjq_job_options without dedup_ms, debounce and reserved, rjq_group_info
 * without started), run with this build's librjq.so: it must work. Its
 * own loop hooks on libevent (the glue of adapters/ needs the newer
 * header). Enqueues a job with options, runs it on a worker, awaits its
 * result; then lists the groups of queue "grp" (older_header.sh enqueued
 * 3 jobs of group ga, 2 of gb, 1 of gc there) through rjq_group_info_get:
 * this program's rjq_group_info is smaller than the library's, so list[i]
 * would read the wrong bytes for i > 0. Exits 0 when both came right.
 */
#include <event2/event.h>
#include <hiredis/adapters/libevent.h>
#include <stdio.h>
#include <string.h>

#include "rjq.h"

static struct event_base *base;
static struct event *timer;
static rjq_client *client;
static int result_ok, groups_ok;
static rjq_queue *grp;

static int attach(void *loop, struct redisAsyncContext *ac) {
    return redisLibeventAttach(ac, loop) == REDIS_OK ? 0 : -1;
}
static void fire(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what, (void)arg;
    rjq_client_handle_timeout(client);
}
static void set_timer(void *loop, long ms) {
    (void)loop;
    if (ms < 0) {
        evtimer_del(timer);
        return;
    }
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(timer, &tv);
}
static void handler(rjq_job *job, void *data) {
    (void)data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    if (rjq_job_get_max_attempts(job) != 7) len = 0; /* the options must have arrived */
    rjq_job_complete(job, p, len, NULL, NULL);
}
static void on_groups(rjq_client *c, int status, long long total, const rjq_group_info *list,
                      size_t n, void *data) {
    static const char *const names[] = {"ga", "gb", "gc"};
    (void)c, (void)data;
    groups_ok = status == RJQ_OK && total == 3 && n == 3;
    for (size_t i = 0; groups_ok && i < n; i++) {
        const rjq_group_info *g = rjq_group_info_get(list, i);
        groups_ok = strcmp(g->name, names[i]) == 0 && g->depth == 3 - (long long)i &&
                    g->active == 0 && g->paused == 0;
        if (!groups_ok)
            fprintf(stderr, "older_consumer: group %zu: %s depth %lld\n", i, g->name, g->depth);
    }
    if (!groups_ok) fprintf(stderr, "older_consumer: groups: status %d, n %zu\n", status, n);
    event_base_loopbreak(base);
}
static void done(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)c, (void)data;
    result_ok = status == RJQ_OK && o->result_len == 5 && memcmp(o->result, "hello", 5) == 0;
    if (!result_ok) fprintf(stderr, "older_consumer: status %d\n", status);
    if (!result_ok || rjq_queue_list_groups(grp, NULL, 0, 10, on_groups, NULL) != RJQ_OK)
        event_base_loopbreak(base);
}
static void guard(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what, (void)arg;
    fprintf(stderr, "older_consumer: no result within 20 s\n");
    event_base_loopbreak(base);
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    base = event_base_new();
    timer = evtimer_new(base, fire, NULL);
    rjq_loop_ops ops = RJQ_LOOP_OPS_INIT;
    ops.attach = attach;
    ops.set_timer = set_timer;
    rjq_client_options o = RJQ_CLIENT_OPTIONS_INIT;
    o.url = argv[1];
    o.prefix = "older";
    int rc = rjq_client_new(&client, &o, &ops, base);
    if (rc != RJQ_OK) {
        fprintf(stderr, "older_consumer: rjq_client_new: %s\n", rjq_client_get_errmsg(NULL));
        return 1;
    }
    rjq_queue *q;
    rjq_worker *w;
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 2;
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.id = "older-job";
    jo.max_attempts = 7;
    if (rjq_queue_open(client, "jobs", NULL, &q) != RJQ_OK ||
        rjq_queue_open(client, "grp", NULL, &grp) != RJQ_OK ||
        rjq_worker_start(q, &wo, handler, NULL, &w) != RJQ_OK ||
        rjq_enqueue_await(q, "hello", 5, &jo, NULL, done, NULL, NULL) != RJQ_OK) {
        fprintf(stderr, "older_consumer: %s\n", rjq_client_get_errmsg(client));
        return 1;
    }
    struct event *g = evtimer_new(base, guard, NULL);
    struct timeval tv = {20, 0};
    evtimer_add(g, &tv);
    event_base_dispatch(base);
    rjq_client_free(client);
    event_free(g);
    event_free(timer);
    event_base_free(base);
    return result_ok && groups_ok ? 0 : 1;
}
