#include "harness.h"
#include "rjq_keys.h" /* layout_script_keys: the generated key layout */
#include "rjq_scripts.h" /* server_fcall */
#include "server.h"

#include <signal.h>

test_case test_cases[TEST_MAX];
int test_count;

int main(int argc, char **argv) {
    int ran = 0;
    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < test_count; i++) {
        int wanted = argc < 2;
        for (int a = 1; a < argc; a++)
            if (strcmp(argv[a], test_cases[i].name) == 0) wanted = 1;
        if (!wanted) continue;
        fprintf(stderr, "-- %s\n", test_cases[i].name);
        test_cases[i].fn();
        ran++;
    }
    if (argc >= 2 && ran != argc - 1) {
        fprintf(stderr, "unknown test name among the arguments\n");
        return 2;
    }
    if (argc < 2 && ran == 0) return 2;
    fprintf(stderr, "%d passed\n", ran);
    return 0;
}

int layout_script_keys(layout_keys *lk, int script, const char *prefix, const char *queue,
                       const char **argv, int at) {
    ASSERT(script >= 0 && script < RJQ__SCRIPT_COUNT);
    const rjq__script_keys_def *d = &rjq__script_keys[script];
    ASSERT(!d->global && d->n <= 32);
    snprintf(lk->num, sizeof lk->num, "%d", d->n);
    argv[at++] = lk->num;
    for (int i = 0; i < d->n; i++) {
        snprintf(lk->names[i], sizeof lk->names[i], "%s:{%s}:%s", prefix, queue,
                 rjq__key_names[d->keys[i]]);
        argv[at++] = lk->names[i];
    }
    return at;
}

/* ---- waiting in a libevent loop ------------------------------------------- */

#include <time.h>

#include <event2/event.h>

static double harness_mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

double wait_deadline(long timeout_ms) {
    return harness_mono_ms() + (double)timeout_ms;
}

static void on_tick(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    if (arg) *(int *)arg = 1;
}

/* Run the loop for ms (once = 1: one turn, at most ms). */
static void run_for_ms(struct event_base *base, double ms, int once) {
    int due = 0;
    struct event *tick = evtimer_new(base, on_tick, &due);
    long us = ms > 0 ? (long)(ms * 1000) : 0;
    struct timeval tv = {us / 1000000, us % 1000000};
    evtimer_add(tick, &tv);
    do event_base_loop(base, EVLOOP_ONCE);
    while (!due && !once);
    event_free(tick);
}

int wait_step(struct event_base *base, double deadline) {
    if (harness_mono_ms() > deadline) return 0;
    run_for_ms(base, 5, 0);
    return 1;
}

int wait_poll(struct event_base *base, double deadline, long interval_ms) {
    double now = harness_mono_ms();
    if (now > deadline) return 0;
    double ms = deadline - now < (double)interval_ms ? deadline - now : (double)interval_ms;
    run_for_ms(base, ms, 0);
    return 1;
}

void loop_turn(struct event_base *base) {
    run_for_ms(base, 5, 1);
}

int loop_events(struct event_base *base) {
    return event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED | EVENT_BASE_COUNT_ACTIVE);
}

int loop_empty(struct event_base *base) {
    return loop_events(base) == 0;
}

void quiet_for(struct event_base *base, long ms, const char *why) {
    (void)why; /* the reason is for the reader of the test */
    run_for_ms(base, (double)ms, 0);
}

/* (server.h's; here beside layout_script_keys, so that a program of
 * rjq_testlib without the harness's main, pg_cluster, links without it) */
redisReply *server_fcall_reply(redisContext *rc, int s, const char *q, const char *const *args,
                               size_t n) {
    layout_keys lk;
    const char *argv[160];
    argv[0] = "FCALL";
    argv[1] = rjq__scripts[s].function;
    int k = layout_script_keys(&lk, s, "t", q, argv, 2);
    ASSERT(n <= sizeof argv / sizeof *argv - (size_t)k);
    for (size_t i = 0; i < n; i++) argv[k++] = args[i];
    redisReply *r = redisCommandArgv(rc, k, argv, NULL);
    ASSERT(r != NULL);
    return r;
}

redisReply *server_fcall(redisContext *rc, int s, const char *q, const char **args, size_t n) {
    redisReply *r = server_fcall_reply(rc, s, q, args, n);
    ASSERT(r->type != REDIS_REPLY_ERROR);
    return r;
}

void server_cancel_fcall(redisContext *rc, const char *q, const char *id) {
    char prefix[48];
    snprintf(prefix, sizeof prefix, "t:{%s}:job:", q);
    const char *args[] = {prefix, id, "1000"};
    redisReply *r = server_fcall(rc, RJQ__S_CANCEL, q, args, 3);
    /* { 1, state, 1, id, its dependents entry }: dependents to tell */
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 5);
    ASSERT_EQ(1, r->element[0]->integer);
    ASSERT_EQ(1, r->element[2]->integer);
    ASSERT_STREQ(id, r->element[3]->str);
    freeReplyObject(r);
}
