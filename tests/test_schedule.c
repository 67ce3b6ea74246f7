/*
 * Schedules: set, list and remove them; schedulers enqueue one job per
 * fire time, at its time, one scheduler at a time (two in two processes,
 * the leader SIGKILLed midway: no fire time missing or twice); missed fire
 * times skipped or run once.
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
#include "rjq_scripts.h"

static count_wait set_schedule(test_env *e, const char *name, const rjq_schedule *s) {
    count_wait w = {0};
    ASSERT_OK(rjq_schedule_set(e->q, name, s, on_count, &w));
    ASSERT(loop_until(e->base, &w.done, 5000));
    return w;
}

TEST(schedules_are_set_listed_and_removed) {
    test_env e;
    env_start(&e, "sl");
    rjq_schedule s = RJQ_SCHEDULE_INIT;
    s.every_ms = 1000;
    s.payload = "p";
    s.len = 1;
    count_wait w = set_schedule(&e, "tick", &s);
    ASSERT_OK(w.status);
    ASSERT_EQ(1, w.n);
    ASSERT_EQ(0, set_schedule(&e, "tick", &s).n); /* the same */
    s.payload = "q"; /* a new payload is a change (its next fire time stays) */
    ASSERT_EQ(1, set_schedule(&e, "tick", &s).n);
    ASSERT_EQ(0, set_schedule(&e, "tick", &s).n);
    rjq_schedule cr = RJQ_SCHEDULE_INIT;
    cr.cron = "*/5 9-17 * * MON-FRI";
    cr.utc_offset_min = 60;
    ASSERT_EQ(1, set_schedule(&e, "report", &cr).n);
    schedules_wait l = schedules_of(e.base, e.q);
    ASSERT_EQ(2, l.n);
    ASSERT_STREQ("report", l.names[0]);
    ASSERT_STREQ("cron */5 9-17 * * MON-FRI (UTC+60)", l.specs[0]);
    ASSERT_STREQ("tick", l.names[1]);
    ASSERT_STREQ("every 1000", l.specs[1]);
    ASSERT_EQ(0, l.next[1]); /* no scheduler ran yet */

    /* refused */
    rjq_schedule bad = RJQ_SCHEDULE_INIT;
    ASSERT_EQ(RJQ_EINVAL, rjq_schedule_set(e.q, "x", &bad, NULL, NULL)); /* neither */
    bad.every_ms = 10;
    bad.cron = "* * * * *";
    ASSERT_EQ(RJQ_EINVAL, rjq_schedule_set(e.q, "x", &bad, NULL, NULL)); /* both */
    bad.every_ms = 0;
    bad.cron = "61 * * * *";
    ASSERT_EQ(RJQ_EINVAL, rjq_schedule_set(e.q, "x", &bad, NULL, NULL));
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "minute") != NULL);
    bad.cron = "* * * * *";
    bad.utc_offset_min = 2000;
    ASSERT_EQ(RJQ_EINVAL, rjq_schedule_set(e.q, "x", &bad, NULL, NULL));
    bad.utc_offset_min = 0;
    bad.missed = 7;
    ASSERT_EQ(RJQ_EINVAL, rjq_schedule_set(e.q, "x", &bad, NULL, NULL));
    bad.missed = 0;
    ASSERT_EQ(RJQ_EJOBID, rjq_schedule_set(e.q, "a b", &bad, NULL, NULL));
    ASSERT_EQ(RJQ_EJOBID, rjq_schedule_set(e.q, "123", &bad, NULL, NULL));
    char longname[200];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    ASSERT_EQ(RJQ_EJOBID, rjq_schedule_set(e.q, longname, &bad, NULL, NULL));
    ASSERT_EQ(2, schedules_of(e.base, e.q).n); /* nothing written */

    count_wait r = {0};
    ASSERT_OK(rjq_schedule_remove(e.q, "report", on_count, &r));
    ASSERT(loop_until(e.base, &r.done, 5000));
    ASSERT_EQ(1, r.n);
    r = (count_wait){0};
    ASSERT_OK(rjq_schedule_remove(e.q, "report", on_count, &r));
    ASSERT(loop_until(e.base, &r.done, 5000));
    ASSERT_EQ(0, r.n);
    ASSERT_EQ(1, schedules_of(e.base, e.q).n);
    env_stop(&e);
}

/* The fire times of the jobs of schedule `name` in q's ready list, sorted;
 * returns how many (duplicates included: ids are unique, so none). */
static int fire_times(redisContext *rc, const char *q, const char *name, long long *out, int max) {
    redisReply *r = server_cmd(rc, "LRANGE t:{%s}:ready 0 -1", q);
    int n = 0;
    size_t len = strlen(name);
    for (size_t i = 0; i < r->elements && n < max; i++) {
        const char *id = r->element[i]->str;
        if (strncmp(id, name, len) == 0 && id[len] == '@') out[n++] = atoll(id + len + 1);
    }
    freeReplyObject(r);
    for (int i = 1; i < n; i++) /* insertion sort */
        for (int j = i; j > 0 && out[j] < out[j - 1]; j--) {
            long long t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

/* Monitor: how late each "enqueued" came after its fire time. */
static long long worst_lateness;
static long enqueued_events;
static rjq_monitor *mon;

static void on_event(rjq_client *c, const char *ev, const char *id, void *data) {
    (void)c, (void)data;
    const char *at = strchr(id, '@');
    if (strcmp(ev, "enqueued") != 0 || at == NULL) return;
    long long late = rjq_monitor_get_time(mon) - atoll(at + 1);
    ASSERT(late >= 0); /* never early */
    if (late > worst_lateness) worst_lateness = late;
    enqueued_events++;
}

TEST(scheduler_enqueues_one_job_per_fire_time_at_its_time) {
    test_env e;
    env_start(&e, "se");
    ASSERT_OK(rjq_queue_monitor(e.q, on_event, NULL, &mon));
    wait_monitoring(e.base, e.c, "se");
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.priority = 0;
    o.max_attempts = 5;
    rjq_schedule s = RJQ_SCHEDULE_INIT;
    s.every_ms = 200;
    s.payload = "beat";
    s.len = 4;
    s.opts = &o;
    ASSERT_EQ(1, set_schedule(&e, "beat", &s).n);
    rjq_scheduler *sch;
    /* a lease of 60 s: its renewal (the scheduler's only other wake) is 20 s
     * away, so six fires within the wait below are six wakes at their
     * times, not a poll (a bound on the lateness failed under load) */
    ASSERT_OK(rjq_scheduler_start(e.q, 60000, &sch));
    worst_lateness = 0;
    enqueued_events = 0;
    ASSERT(loop_until_count(e.base, &enqueued_events, 6, 10000));
    ASSERT(rjq_scheduler_is_leading(sch));
    long long t[64];
    int n = fire_times(e.rc, "se", "beat", t, 64);
    ASSERT(n >= 6);
    for (int i = 0; i < n; i++) {
        ASSERT_EQ(0, t[i] % 200);
        if (i) ASSERT_EQ(200, t[i] - t[i - 1]); /* each fire time once, none missing */
    }
    fprintf(stderr, "scheduler: %d fires, at most %lld ms after their time\n", n, worst_lateness);
    char id[64];
    snprintf(id, sizeof id, "beat@%lld", t[0]);
    info_wait j = get_info(e.base, e.q, id);
    ASSERT_OK(j.status);
    ASSERT_STREQ("beat", j.payload);
    ASSERT_EQ(5, j.max_attempts);
    schedules_wait l = schedules_of(e.base, e.q);
    ASSERT(l.next[0] > t[n - 1]);
    ASSERT_OK(rjq_scheduler_stop(sch));
    /* the lease was given up */
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{se}:scheduler") == 0, 5000);
    env_stop(&e);
}

/* Two schedulers in two processes; the first leads, and is SIGKILLed
 * after three fires of a cron schedule firing every second; the second
 * goes on for three seconds past the kill. */
static void run_scheduler_child(const test_server *s, const char *qname) {
    struct event_base *base = event_base_new();
    rjq_client *c = client_for(base, s);
    rjq_scheduler *sch;
    ASSERT_OK(rjq_scheduler_start(queue_for(c, qname), 1500, &sch));
    event_base_dispatch(base); /* until the parent kills us */
    _exit(3);
}

TEST(two_schedulers_one_killed_midway_enqueue_each_fire_time_exactly_once) {
    test_env e;
    env_start(&e, "s2");
    rjq_schedule s = RJQ_SCHEDULE_INIT;
    s.cron = "* * * * * *"; /* every second */
    ASSERT_EQ(1, set_schedule(&e, "sec", &s).n);
    pid_t a = fork_child();
    if (a == 0) run_scheduler_child(&e.s, "s2");
    double end = mono_ms() + 10000;
    while (server_int(e.rc, "EXISTS t:{s2}:scheduler") == 0) {
        ASSERT(mono_ms() < end);
        sleep_ms(10);
    }
    redisReply *r = server_cmd(e.rc, "GET t:{s2}:scheduler");
    char first[64];
    snprintf(first, sizeof first, "%s", r->str);
    freeReplyObject(r);
    pid_t b = fork_child();
    if (b == 0) run_scheduler_child(&e.s, "s2");
    long long start = server_now_ms(e.rc);
    long long t[64];
    /* the first leads for three fires, then dies ... */
    end = mono_ms() + 30000;
    while (fire_times(e.rc, "s2", "sec", t, 64) < 3) {
        ASSERT(mono_ms() < end);
        sleep_ms(20);
    }
    ASSERT(kill(a, SIGKILL) == 0);
    reap(a, 5000);
    long long killed = server_now_ms(e.rc);
    /* ... and the second fires on, 3 s past the kill (the lease is 1.5 s) */
    int fired;
    while ((fired = fire_times(e.rc, "s2", "sec", t, 64)) == 0 || t[fired - 1] < killed + 3000) {
        ASSERT(mono_ms() < end);
        sleep_ms(20);
    }
    long long stop = server_now_ms(e.rc);
    r = server_cmd(e.rc, "GET t:{s2}:scheduler");
    ASSERT(r->type == REDIS_REPLY_STRING && strcmp(r->str, first) != 0); /* the second took over */
    freeReplyObject(r);
    kill(b, SIGKILL);
    reap(b, 5000);

    int n = fire_times(e.rc, "s2", "sec", t, 64);
    fprintf(stderr, "two schedulers: %d fires from %lld to %lld\n", n, t[0] - start,
            t[n - 1] - start);
    for (int i = 1; i < n; i++) ASSERT_EQ(1000, t[i] - t[i - 1]); /* once each, none missing */
    ASSERT(t[0] <= start + 1000);      /* from the start ... */
    ASSERT(t[n - 1] >= stop - 2000);   /* ... to the end (the lease is 1.5 s) */
    ASSERT(n >= 6);                    /* three before the kill, three past it */
    ASSERT_EQ(n, get_stats(e.base, e.q).enqueued); /* nothing else was enqueued */
    env_stop(&e);
}

/* Fire times older than catchup_ms (no scheduler ran) are skipped, or run
 * once. The schedule's next fire time is put 10 s back, as if no
 * scheduler had run since. */
static void missed_case(int missed) {
    test_env e;
    env_start(&e, "sm");
    rjq_schedule s = RJQ_SCHEDULE_INIT;
    s.every_ms = 1000;
    s.catchup_ms = 2500;
    s.missed = missed;
    ASSERT_EQ(1, set_schedule(&e, "m", &s).n);
    long long now = server_now_ms(e.rc);
    long long back = (now - 10000) / 1000 * 1000;
    freeReplyObject(server_cmd(e.rc, "ZADD t:{sm}:schednext %lld m", back));
    rjq_scheduler *sch;
    ASSERT_OK(rjq_scheduler_start(e.q, 0, &sch));
    /* caught up: the schedule's next fire time is past the server's now */
    WAIT_FOR(e.base, server_int(e.rc, "ZSCORE t:{sm}:schednext m") > server_now_ms(e.rc), 5000);
    ASSERT_OK(rjq_scheduler_stop(sch));
    long long t[64];
    int n = fire_times(e.rc, "sm", "m", t, 64);
    int k = 0;
    if (missed == RJQ_MISSED_ONCE) {
        ASSERT(n >= 1);
        ASSERT_EQ(back, t[0]); /* one job for the missed ones, named by the first */
        k = 1;
    }
    ASSERT(n - k >= 2 && n - k <= 4); /* the ones at most 2.5 s late */
    for (int i = k; i < n; i++) {
        ASSERT(t[i] >= now - 2500 - 1000);
        if (i > k) ASSERT_EQ(1000, t[i] - t[i - 1]);
    }
    env_stop(&e);
}

TEST(missed_fire_times_are_skipped) {
    missed_case(RJQ_MISSED_SKIP);
}

TEST(missed_fire_times_are_run_once) {
    missed_case(RJQ_MISSED_ONCE);
}

/* A stopped leader gives its lease up: the standby takes over within a
 * third of its lease, not when the lease would have run out. */
TEST(stopped_leader_hands_over_within_a_third_of_the_lease) {
    test_env e;
    env_start(&e, "sh");
    rjq_client *c2 = client_for(e.base, &e.s);
    rjq_scheduler *a, *b;
    ASSERT_OK(rjq_scheduler_start(e.q, 9000, &a));
    WAIT_FOR(e.base, rjq_scheduler_is_leading(a), 5000);
    ASSERT_OK(rjq_scheduler_start(queue_for(c2, "sh"), 9000, &b));
    loop_turn(e.base); /* its first tick (a timer due at once) asks for the lease */
    (void)get_stats(e.base, queue_for(c2, "sh")); /* a round trip behind it: refused */
    ASSERT(!rjq_scheduler_is_leading(b));
    /* when a's lease would run out by the server's clock */
    long long lease_end = server_now_ms(e.rc) + server_int(e.rc, "PTTL t:{sh}:scheduler");
    ASSERT(lease_end > server_now_ms(e.rc));
    ASSERT_OK(rjq_scheduler_stop(a));
    WAIT_FOR(e.base, rjq_scheduler_is_leading(b), 15000); /* (a third of 9 s: 3 s) */
    ASSERT(server_now_ms(e.rc) < lease_end); /* not when a's lease ran out */
    rjq_client_free(c2); /* frees b */
    env_stop(&e);
}

/* Regression: the fire script is fenced by the spec the scheduler read,
 * not only by the next fire time (a schedule set again between tick and
 * fire has next 0 both times). fire.lua run directly. */
static long long fire_named(redisContext *rc, const char *name, const char *spec, const char *next);
static long long fire_call(redisContext *rc, const char *spec, const char *next) {
    return fire_named(rc, "s", spec, next);
}

/* fire.lua run directly on schedule `name` of queue sf, read with spec and
 * next fire time next, enqueuing the k fire times times. */
static long long fire_at(redisContext *rc, const char *name, const char *spec, const char *next,
                         const char *const *times, int k) {
    const char *argv[48];
    layout_keys lk;
    argv[0] = "FCALL", argv[1] = rjq__scripts[RJQ__S_FIRE].function;
    int na = layout_script_keys(&lk, RJQ__S_FIRE, "t", "sf", argv, 2);
    char kt[16];
    snprintf(kt, sizeof kt, "%d", k);
    const char *args[] = {"t:{sf}:job:", "t:{sf}:wake", "tok", name, "0", spec, next, kt};
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) argv[na++] = args[i];
    ASSERT(na + k <= (int)(sizeof argv / sizeof argv[0]));
    for (int i = 0; i < k; i++) argv[na++] = times[i];
    redisReply *r = redisCommandArgv(rc, na, argv, NULL);
    ASSERT(r != NULL && r->type == REDIS_REPLY_INTEGER);
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

/* The same, enqueuing the fire time 1000. */
static long long fire_named(redisContext *rc, const char *name, const char *spec,
                            const char *next) {
    const char *times[] = {"1000"};
    return fire_at(rc, name, spec, next, times, 1);
}

TEST(fire_leaves_a_schedule_set_again_since_its_tick_alone) {
    test_env e;
    env_start(&e, "sf");
    rjq_schedule s = RJQ_SCHEDULE_INIT;
    s.every_ms = 1000;
    ASSERT_EQ(1, set_schedule(&e, "s", &s).n); /* loads the scripts too */
    freeReplyObject(server_cmd(e.rc, "SET t:{sf}:scheduler tok"));
    ASSERT_EQ(0, fire_call(e.rc, "1 0 60000 skip - * * * * *", "5000")); /* another spec was read */
    ASSERT_EQ(0, server_int(e.rc, "ZSCORE t:{sf}:schednext s"));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{sf}:payload s@1000"));
    redisReply *r = server_cmd(e.rc, "HGET t:{sf}:schedules s");
    char spec[256];
    snprintf(spec, sizeof spec, "%s", r->str);
    freeReplyObject(r);
    ASSERT_EQ(1, fire_call(e.rc, spec, "5000"));
    ASSERT_EQ(5000, server_int(e.rc, "ZSCORE t:{sf}:schednext s"));
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{sf}:payload s@1000"));
    env_stop(&e);
}

/* The jobs a scheduler makes get their options as enqueued jobs with the
 * same options do: fire.lua reads them with lib.lua's job_options, as
 * enqueue.lua does. (fire.lua had its own copy, which wrote an options
 * column value for a job whose stored options are all defaults.) */
TEST(scheduled_jobs_get_their_options_as_enqueued_jobs_do) {
    test_env e;
    env_start(&e, "sf");
    rjq_job_options opts[] = {{.size = sizeof(rjq_job_options), .delay_ms = 5000},
                              {.size = sizeof(rjq_job_options), .priority = 3},
                              {.size = sizeof(rjq_job_options), .priority = -2, .max_attempts = 7, .timeout_ms = 9000},
                              {.size = sizeof(rjq_job_options), .max_attempts = 3, .backoff = {RJQ_BACKOFF_FIXED, 250, 0}}};
    for (int i = 0; i < (int)(sizeof opts / sizeof opts[0]); i++) {
        char name[16], id[32];
        snprintf(name, sizeof name, "o%d", i);
        rjq_schedule s = RJQ_SCHEDULE_INIT;
        s.every_ms = 1000;
        s.opts = &opts[i];
        ASSERT_EQ(1, set_schedule(&e, name, &s).n);
        redisReply *r = server_cmd(e.rc, "HGET t:{sf}:schedules %s", name);
        char spec[256];
        snprintf(spec, sizeof spec, "%s", r->str);
        freeReplyObject(r);
        freeReplyObject(server_cmd(e.rc, "SET t:{sf}:scheduler tok"));
        ASSERT_EQ(1, fire_named(e.rc, name, spec, "0"));
        rjq_job_options o = opts[i];
        snprintf(id, sizeof id, "e%d", i);
        o.id = id;
        enqueue_wait w = enqueue_job(e.base, e.q, "x", &o);
        ASSERT_OK(w.status);
        /* the options column: the same value, or absent for both */
        redisReply *fired = server_cmd(e.rc, "HGET t:{sf}:options %s@1000", name);
        redisReply *enq = server_cmd(e.rc, "HGET t:{sf}:options %s", id);
        if (fired->type != enq->type || (enq->str && strcmp(fired->str, enq->str) != 0))
            fprintf(stderr, "options %d: fired %s, enqueued %s\n", i,
                    fired->str ? fired->str : "(none)",
                    enq->str ? enq->str : "(none)");
        ASSERT_EQ(enq->type, fired->type);
        if (enq->str) ASSERT_STREQ(enq->str, fired->str);
        freeReplyObject(fired);
        freeReplyObject(enq);
        /* and where it waits: delayed, or its priority's place */
        ASSERT_EQ(server_int(e.rc, "ZSCORE t:{sf}:delayed %s", id) > 0,
                  server_int(e.rc, "ZSCORE t:{sf}:delayed %s@1000", name) > 0);
    }
    env_stop(&e);
}

/* The doorbells rung on queue sf's wake channel since the last call: a
 * marker is published after them and the messages before it counted
 * (sub: subscribed to the channel). */
static int doorbells(redisContext *sub, redisContext *rc) {
    freeReplyObject(server_cmd(rc, "PUBLISH t:{sf}:wake marker"));
    for (int n = 0;;) {
        redisReply *m = NULL;
        ASSERT(redisGetReply(sub, (void **)&m) == REDIS_OK && m != NULL);
        ASSERT(m->type == REDIS_REPLY_ARRAY && m->elements == 3);
        int marker = strcmp(m->element[2]->str, "marker") == 0;
        if (!marker) ASSERT_STREQ("1", m->element[2]->str);
        freeReplyObject(m);
        if (marker) return n;
        n++;
    }
}

/* A job's state column value without its times, and its enqueue time
 * (the first of its times, "@<enqueued>,<start>,<end>"). */
static long long state_of_job(redisContext *rc, const char *id, char *state, size_t len) {
    redisReply *r = server_cmd(rc, "HGET t:{sf}:state %s", id);
    ASSERT(r->type == REDIS_REPLY_STRING);
    const char *at = strchr(r->str, '@');
    ASSERT(at != NULL && at > r->str);
    snprintf(state, len, "%.*s", (int)(at - r->str), r->str);
    long long q = atoll(at + 1);
    ASSERT(q > 0);
    ASSERT(strcmp(strchr(at, ','), ",,") == 0); /* never started, never ended */
    freeReplyObject(r);
    return q;
}

/* A fired job lands as the same job enqueued right after it: the same
 * payload, options and state (enqueued at the call's time), the same
 * place (ready behind it; its priority, ranked by the next sequence
 * number; or delayed by exactly the delay from its enqueue time), and a
 * fire that makes a job ready or the earliest delayed one in a queue with
 * nothing waiting rings the doorbell once (and not when jobs were ready).
 * Both scripts create jobs with lib.lua's job_maker. */
TEST(a_fired_job_lands_as_the_same_job_enqueued) {
    test_env e;
    env_start(&e, "sf");
    redisContext *sub = server_connect(&e.s);
    struct timeval guard = {20, 0}; /* a failure guard only */
    redisSetTimeout(sub, guard);
    freeReplyObject(server_cmd(sub, "SUBSCRIBE t:{sf}:wake"));
    rjq_job_options opts[] = {{.size = sizeof(rjq_job_options)},
                              {.size = sizeof(rjq_job_options), .priority = 3},
                              {.size = sizeof(rjq_job_options), .priority = -2, .max_attempts = 7},
                              {.size = sizeof(rjq_job_options), .priority = 3, .delay_ms = 5000},
                              {.size = sizeof(rjq_job_options), .delay_ms = 7000, .timeout_ms = 9000}};
    for (int i = 0; i < (int)(sizeof opts / sizeof opts[0]); i++) {
        char name[16], fired[32], id[32];
        snprintf(name, sizeof name, "l%d", i);
        snprintf(fired, sizeof fired, "%s@1000", name);
        snprintf(id, sizeof id, "e%d", i);
        freeReplyObject(server_cmd(e.rc, "DEL t:{sf}:ready t:{sf}:prio t:{sf}:delayed"));
        rjq_schedule s = RJQ_SCHEDULE_INIT;
        s.every_ms = 1000;
        s.payload = "pl";
        s.len = 2;
        s.opts = &opts[i];
        ASSERT_EQ(1, set_schedule(&e, name, &s).n);
        redisReply *r = server_cmd(e.rc, "HGET t:{sf}:schedules %s", name);
        char spec[256];
        snprintf(spec, sizeof spec, "%s", r->str);
        freeReplyObject(r);
        freeReplyObject(server_cmd(e.rc, "SET t:{sf}:scheduler tok"));
        doorbells(sub, e.rc); /* (those before this fire) */
        ASSERT_EQ(1, fire_named(e.rc, name, spec, "0"));
        ASSERT_EQ(1, doorbells(sub, e.rc)); /* nothing waited: one ring */
        long long seq = server_int(e.rc, "HGET t:{sf}:stats seq");
        rjq_job_options o = opts[i];
        o.id = id;
        ASSERT_OK(enqueue_job(e.base, e.q, "pl", &o).status);

        char fs[64], es[64];
        long long fq = state_of_job(e.rc, fired, fs, sizeof fs);
        long long eq = state_of_job(e.rc, id, es, sizeof es);
        ASSERT_STREQ(es, fs);
        ASSERT_STREQ(o.delay_ms ? "delayed 0 " : "ready 0 ", fs);
        const char *cols[] = {"payload", "options", "result", "error", "failtoken", "watchers"};
        for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++) {
            redisReply *a = server_cmd(e.rc, "HGET t:{sf}:%s %s", cols[c], fired);
            redisReply *b = server_cmd(e.rc, "HGET t:{sf}:%s %s", cols[c], id);
            ASSERT_EQ(b->type, a->type);
            if (b->type == REDIS_REPLY_STRING) ASSERT_STREQ(b->str, a->str);
            freeReplyObject(a);
            freeReplyObject(b);
        }
        if (o.delay_ms) {
            ASSERT_EQ(fq + o.delay_ms, server_int(e.rc, "ZSCORE t:{sf}:delayed %s", fired));
            ASSERT_EQ(eq + o.delay_ms, server_int(e.rc, "ZSCORE t:{sf}:delayed %s", id));
            ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{sf}:ready t:{sf}:prio"));
        } else if (o.priority) {
            long long score = -(long long)o.priority * 4294967296LL + seq;
            ASSERT_EQ(score, server_int(e.rc, "ZSCORE t:{sf}:prio %s", fired));
            ASSERT_EQ(score + 1, server_int(e.rc, "ZSCORE t:{sf}:prio %s", id));
            ASSERT_EQ(2, server_int(e.rc, "ZCARD t:{sf}:prio"));
            ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{sf}:ready t:{sf}:delayed"));
        } else {
            r = server_cmd(e.rc, "LRANGE t:{sf}:ready 0 -1");
            ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
            ASSERT_STREQ(fired, r->element[0]->str);
            ASSERT_STREQ(id, r->element[1]->str);
            freeReplyObject(r);
            ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{sf}:prio t:{sf}:delayed"));
        }
    }
    /* jobs wait: a fire rings no doorbell */
    rjq_schedule s = RJQ_SCHEDULE_INIT;
    s.every_ms = 1000;
    ASSERT_EQ(1, set_schedule(&e, "quiet", &s).n);
    redisReply *r = server_cmd(e.rc, "HGET t:{sf}:schedules quiet");
    char spec[256];
    snprintf(spec, sizeof spec, "%s", r->str);
    freeReplyObject(r);
    freeReplyObject(server_cmd(e.rc, "RPUSH t:{sf}:ready waiting"));
    doorbells(sub, e.rc);
    ASSERT_EQ(1, fire_named(e.rc, "quiet", spec, "0"));
    ASSERT_EQ(0, doorbells(sub, e.rc));
    ASSERT_EQ(2, server_int(e.rc, "LLEN t:{sf}:ready"));
    redisFree(sub);
    env_stop(&e);
}

/* A fire time given twice in one fire call makes one job (fire.lua writes
 * its jobs' columns at the end of the call, lib.lua job_maker: the second
 * is told by the ids the call made, not by the payload column). */
TEST(a_fire_time_given_twice_in_one_call_makes_one_job) {
    test_env e;
    env_start(&e, "sf");
    rjq_schedule s = RJQ_SCHEDULE_INIT;
    s.every_ms = 1000;
    rjq_job_options o = {.size = sizeof(rjq_job_options), .priority = 2};
    s.opts = &o;
    ASSERT_EQ(1, set_schedule(&e, "twice", &s).n);
    redisReply *r = server_cmd(e.rc, "HGET t:{sf}:schedules twice");
    char spec[256];
    snprintf(spec, sizeof spec, "%s", r->str);
    freeReplyObject(r);
    freeReplyObject(server_cmd(e.rc, "SET t:{sf}:scheduler tok"));
    const char *times[] = {"1000", "1000", "2000"};
    ASSERT_EQ(2, fire_at(e.rc, "twice", spec, "0", times, 3));
    ASSERT_EQ(2, server_int(e.rc, "ZCARD t:{sf}:prio"));
    ASSERT_EQ(2, server_int(e.rc, "HGET t:{sf}:stats seq"));
    ASSERT_EQ(0, server_int(e.rc, "HGET t:{sf}:stats skipped")); /* both counted enqueued */
    env_stop(&e);
}

/* A due schedule whose name rjq_schedule_set refuses (written by other
 * means: 190 bytes, so "<name>@<fire time>" would not fit RJQ_JOB_ID_MAX)
 * never fires: no job written, its next fire time gone (still listed),
 * the client's errmsg says why; the queue's other schedule fires on. */
TEST(a_schedule_with_too_long_a_name_writes_no_job) {
    test_env e;
    env_start(&e, "sn");
    rjq_schedule s = RJQ_SCHEDULE_INIT;
    s.every_ms = 200;
    s.payload = "beat";
    s.len = 4;
    ASSERT_EQ(1, set_schedule(&e, "beat", &s).n);
    char name[191];
    memset(name, 'L', 190);
    name[190] = '\0';
    server_copy_schedule(e.rc, "sn", "beat", name);
    rjq_scheduler *sch;
    ASSERT_OK(rjq_scheduler_start(e.q, 0, &sch));
    long long t[64];
    /* (both were due at its first tick: the long one is done with since) */
    WAIT_FOR(e.base, fire_times(e.rc, "sn", "beat", t, 64) >= 3, 10000);
    ASSERT_OK(rjq_scheduler_stop(sch));
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{sn}:scheduler") == 0, 5000);
    redisReply *r = server_cmd(e.rc, "LRANGE t:{sn}:ready 0 -1");
    for (size_t i = 0; i < r->elements; i++) {
        if (strncmp(r->element[i]->str, "LLLL", 4) == 0)
            fprintf(stderr, "a job of the long name: %.60s... (%zu bytes)\n", r->element[i]->str,
                    strlen(r->element[i]->str));
        ASSERT(strncmp(r->element[i]->str, "LLLL", 4) != 0);
    }
    freeReplyObject(r);
    r = server_cmd(e.rc, "ZSCORE t:{sn}:schednext %s", name);
    ASSERT_EQ(REDIS_REPLY_NIL, r->type); /* never fires again */
    freeReplyObject(r);
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{sn}:schedules %s", name)); /* still listed */
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "not a schedule name") != NULL);
    env_stop(&e);
}
