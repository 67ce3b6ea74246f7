/*
 * Schedules on a sharded queue (docs/sharding.md section 4): the schedule
 * lives in the queue's own slot (with its declaration), one scheduler
 * holds its lease, and each fire time's job "<name>@<time>" goes through
 * the sharded handle to the shard of its id. So the queue gets one job per
 * fire time however many shards and schedulers, spread over the shards,
 * and the schedule is listed once.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

#define NSH 3
#define FIRES_SEEN 64

/* The fire times of schedule `name`'s jobs ready on any shard of q (the
 * shard of each in shard[]), sorted; how many. */
static int fire_times(redisContext *rc, rjq_queue *q, const char *name, long long *out,
                      int *shard, int max) {
    int n = 0;
    size_t len = strlen(name);
    for (int k = 0; k < rjq_queue_count_shards(q); k++) {
        redisReply *r = server_cmd(rc, "LRANGE t:{%s}:ready 0 -1",
                                   rjq_queue_get_name(rjq_queue_get_shard(q, k)));
        for (size_t i = 0; i < r->elements && n < max; i++) {
            const char *id = r->element[i]->str;
            if (strncmp(id, name, len) == 0 && id[len] == '@') {
                shard[n] = k;
                out[n++] = atoll(id + len + 1);
            }
        }
        freeReplyObject(r);
    }
    for (int i = 1; i < n; i++) /* insertion sort, shards along */
        for (int j = i; j > 0 && out[j] < out[j - 1]; j--) {
            long long t = out[j];
            int s = shard[j];
            out[j] = out[j - 1], shard[j] = shard[j - 1];
            out[j - 1] = t, shard[j - 1] = s;
        }
    return n;
}

static long enqueued_events;

static void on_event(rjq_client *c, const char *ev, const char *id, void *data) {
    (void)c, (void)data;
    if (strcmp(ev, "enqueued") == 0 && id && strncmp(id, "beat@", 5) == 0) enqueued_events++;
}

/* One scheduler on a 3-shard queue, a schedule every 200 ms: one job per
 * fire time (consecutive, none twice), on more than one shard, each on the
 * shard of its id, with the schedule's payload and options; the schedule
 * is listed once on the queue (not on its shards); nothing but the
 * declaration and the schedule under the queue's own tag. */
TEST(a_sharded_queues_schedule_fires_once_per_tick_spread_over_its_shards) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "ssq");
    ASSERT_OK(declare_shards(e.base, q, NSH));
    rjq_monitor *mon;
    ASSERT_OK(rjq_queue_monitor(q, on_event, NULL, &mon));
    for (int k = 0; k < NSH; k++)
        wait_monitoring(e.base, e.c, rjq_queue_get_name(rjq_queue_get_shard(q, k)));
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.max_attempts = 5;
    o.timeout_ms = 30000;
    o.backoff.type = RJQ_BACKOFF_FIXED;
    o.backoff.base_ms = 250;
    rjq_schedule s = RJQ_SCHEDULE_INIT;
    s.every_ms = 200;
    s.payload = "beat";
    s.len = 4;
    s.opts = &o;
    count_wait w = {0};
    ASSERT_OK(rjq_schedule_set(q, "beat", &s, on_count, &w));
    ASSERT(loop_until(e.base, &w.done, 10000));
    ASSERT_OK(w.status);
    ASSERT_EQ(1, w.n);
    schedules_wait l = schedules_of(e.base, q);
    ASSERT_EQ(1, (long)l.n);
    ASSERT_STREQ("beat", l.names[0]);
    for (int k = 0; k < NSH; k++) ASSERT_EQ(0, (long)schedules_of(e.base, rjq_queue_get_shard(q, k)).n);

    rjq_scheduler *sch;
    enqueued_events = 0;
    ASSERT_OK(rjq_scheduler_start(q, 0, &sch));
    ASSERT(loop_until_count(e.base, &enqueued_events, 9, 20000));
    ASSERT(rjq_scheduler_is_leading(sch));
    ASSERT_OK(rjq_scheduler_stop(sch));
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{ssq}:scheduler") == 0, 10000);

    long long t[FIRES_SEEN];
    int sh[FIRES_SEEN], on[NSH] = {0};
    int n = fire_times(e.rc, q, "beat", t, sh, FIRES_SEEN);
    ASSERT(n >= 9);
    for (int i = 0; i < n; i++) {
        ASSERT_EQ(0, t[i] % 200);
        if (i) ASSERT_EQ(200, t[i] - t[i - 1]); /* each fire time once, none missing */
        char id[64];
        snprintf(id, sizeof id, "beat@%lld", t[i]);
        ASSERT_EQ(sh[i], shard_holding(e.base, q, id)); /* on its id's shard */
        on[sh[i]]++;
    }
    int shards_used = 0;
    for (int k = 0; k < NSH; k++) shards_used += on[k] > 0;
    ASSERT(shards_used >= 2);
    fprintf(stderr, "sharded schedule: %d fires, per shard %d/%d/%d\n", n, on[0], on[1], on[2]);
    ASSERT_EQ(n, get_stats(e.base, q).enqueued); /* summed: nothing else, nothing twice */
    char id[64];
    snprintf(id, sizeof id, "beat@%lld", t[0]);
    info_wait j = get_info(e.base, q, id);
    ASSERT_OK(j.status);
    ASSERT_STREQ("beat", j.payload);
    ASSERT_EQ(5, j.max_attempts);
    /* the queue's own tag: its declaration and the schedule's keys only */
    redisReply *r = server_cmd(e.rc, "EXISTS t:{ssq}:ready t:{ssq}:prio t:{ssq}:delayed");
    ASSERT_EQ(0, (long)r->integer);
    freeReplyObject(r);
    ASSERT_OK(rjq_monitor_stop(mon));
    env_stop(&e);
}

/* A scheduler in a child process, on an rjq_queue_open handle (the layout
 * read after it starts). */
static void run_scheduler_child(const test_server *s, const char *qname) {
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(s->url);
    rjq_client *c = client_new(base, &o);
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(c, qname, NULL, &q));
    rjq_scheduler *sch;
    ASSERT_OK(rjq_scheduler_start(q, 1500, &sch));
    event_base_dispatch(base); /* until the parent kills us */
    _exit(3);
}

/* Two scheduler processes on a 3-shard queue, a schedule every 300 ms:
 * every fire time's job once on the whole queue (none twice, none
 * missing), spread over the shards; the summed count enqueued is the
 * number of fire times. */
TEST(two_scheduler_processes_on_a_sharded_queue_fire_each_tick_once) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "ssq2");
    ASSERT_OK(declare_shards(e.base, q, NSH));
    rjq_schedule s = RJQ_SCHEDULE_INIT;
    s.every_ms = 300;
    count_wait w = {0};
    ASSERT_OK(rjq_schedule_set(q, "tock", &s, on_count, &w));
    ASSERT(loop_until(e.base, &w.done, 10000));
    ASSERT_OK(w.status);
    pid_t a = fork_child();
    if (a == 0) run_scheduler_child(&e.s, "ssq2");
    pid_t b = fork_child();
    if (b == 0) run_scheduler_child(&e.s, "ssq2");
    long long t[FIRES_SEEN];
    int sh[FIRES_SEEN];
    double end = mono_ms() + 60000;
    while (fire_times(e.rc, q, "tock", t, sh, FIRES_SEEN) < 12) {
        ASSERT(mono_ms() < end);
        sleep_ms(20);
    }
    ASSERT(kill(a, SIGKILL) == 0);
    ASSERT(kill(b, SIGKILL) == 0);
    reap(a, 5000);
    reap(b, 5000);
    int n = fire_times(e.rc, q, "tock", t, sh, FIRES_SEEN), on[NSH] = {0};
    for (int i = 0; i < n; i++) {
        if (i) ASSERT_EQ(300, t[i] - t[i - 1]); /* once each, none missing */
        on[sh[i]]++;
    }
    int shards_used = 0;
    for (int k = 0; k < NSH; k++) shards_used += on[k] > 0;
    ASSERT(shards_used >= 2);
    fprintf(stderr, "two schedulers, sharded: %d fires, per shard %d/%d/%d\n", n, on[0], on[1],
            on[2]);
    ASSERT_EQ(n, get_stats(e.base, q).enqueued); /* nothing twice */
    env_stop(&e);
}

/* On a sharded queue too, a due schedule whose name rjq_schedule_set
 * refuses (written by other means: 190 bytes) never fires: no job (its
 * ids "<name>@<fire time>" were cut short to RJQ_JOB_ID_MAX bytes, so
 * every fire time's the same), its next fire time gone (still listed), the
 * client's errmsg says why; the queue's other schedule fires on. */
TEST(a_sharded_queues_schedule_with_too_long_a_name_writes_no_job) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "snq");
    ASSERT_OK(declare_shards(e.base, q, NSH));
    rjq_schedule s = RJQ_SCHEDULE_INIT;
    s.every_ms = 200;
    s.payload = "beat";
    s.len = 4;
    count_wait w = {0};
    ASSERT_OK(rjq_schedule_set(q, "beat", &s, on_count, &w));
    ASSERT(loop_until(e.base, &w.done, 10000));
    ASSERT_OK(w.status);
    char name[191];
    memset(name, 'L', 190);
    name[190] = '\0';
    server_copy_schedule(e.rc, "snq", "beat", name);
    rjq_scheduler *sch;
    ASSERT_OK(rjq_scheduler_start(q, 0, &sch));
    long long t[FIRES_SEEN];
    int sh[FIRES_SEEN];
    /* (both were due at its first tick: the long one is done with since) */
    WAIT_FOR(e.base, fire_times(e.rc, q, "beat", t, sh, FIRES_SEEN) >= 3, 20000);
    ASSERT_OK(rjq_scheduler_stop(sch));
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{snq}:scheduler") == 0, 10000);
    int n = fire_times(e.rc, q, name, t, sh, FIRES_SEEN);
    if (n) fprintf(stderr, "%d jobs of the long name, cut short\n", n);
    ASSERT_EQ(0, n);
    redisReply *r = server_cmd(e.rc, "ZSCORE t:{snq}:schednext %s", name);
    ASSERT_EQ(REDIS_REPLY_NIL, r->type); /* never fires again */
    freeReplyObject(r);
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{snq}:schedules %s", name)); /* still listed */
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "not a schedule name") != NULL);
    env_stop(&e);
}
