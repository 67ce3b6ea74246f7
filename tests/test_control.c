/*
 * Controls: pause and resume a queue, cancel a job (waiting, delayed,
 * prioritised or running, from this process or another; the notice on
 * the worker's push channel, or with its next lease extension when that
 * was missed), job timeouts (failed under the retry policy; the holder
 * can neither extend nor complete the job past its run time), rate and
 * concurrency limits over several worker processes.
 */
#include <event2/event.h>
#include <poll.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core.h" /* rjq__channel_confirmed */
#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

/* ---- helpers --------------------------------------------------------------- */

/* What a monitor saw. */
typedef struct seen {
    long paused, resumed, cancelled, active;
    long active_while_paused; /* "active" events while `paused_phase` */
    int paused_phase;
} seen;

static void on_event(rjq_client *c, const char *ev, const char *id, void *data) {
    seen *s = data;
    (void)c;
    if (strcmp(ev, "paused") == 0) {
        ASSERT_EQ(0, (long)strlen(id));
        s->paused++;
    } else if (strcmp(ev, "resumed") == 0) {
        s->resumed++;
    } else if (strcmp(ev, "cancelled") == 0) {
        s->cancelled++;
    } else if (strcmp(ev, "active") == 0) {
        s->active++;
        if (s->paused_phase) s->active_while_paused++;
    }
}

/* Pause (pause 1) or resume q; returns what the callback got (1: changed). */
static long long set_paused(test_env *e, int pause) {
    count_wait w = {0};
    ASSERT_OK(pause ? rjq_queue_pause(e->q, on_count, &w) : rjq_queue_resume(e->q, on_count, &w));
    ASSERT(loop_until(e->base, &w.done, 5000));
    ASSERT_OK(w.status);
    return w.n;
}

typedef struct cancel_wait {
    int done, status;
    char state[32];
} cancel_wait;

static void on_cancelled(rjq_client *c, int status, const char *state, void *data) {
    cancel_wait *w = data;
    (void)c;
    w->done++;
    w->status = status;
    snprintf(w->state, sizeof w->state, "%s", state ? state : "(null)");
}

static cancel_wait cancel_job(test_env *e, const char *id) {
    cancel_wait w = {0};
    ASSERT_OK(rjq_queue_cancel(e->q, id, on_cancelled, &w));
    ASSERT(loop_until(e->base, &w.done, 5000));
    ASSERT_EQ(1, w.done);
    return w;
}

static long answers;
static void on_enqueued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs, (void)n, (void)data;
    ASSERT_OK(status);
    answers++;
}

/* An await's outcomes. */
typedef struct await_rec {
    int calls, status;
} await_rec;

static void on_awaited(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    await_rec *a = data;
    (void)c;
    a->calls++;
    a->status = status;
    if (status == RJQ_EJOBCANCELED) ASSERT(o != NULL && o->id != NULL);
}

/* Registrations of idle workers in q's idle hash (its fields but the mark
 * of a paused or limited queue, which starts with '~'). */
static long long registrations(redisContext *rc, const char *q) {
    redisReply *r = server_cmd(rc, "HKEYS t:{%s}:idle", q);
    long long n = 0;
    for (size_t i = 0; i < r->elements; i++) n += r->element[i]->str[0] != '~';
    freeReplyObject(r);
    return n;
}

/* Channels of q's push delivery with a subscriber (the workers' clients). */
static long long push_channels(redisContext *rc, const char *q) {
    redisReply *r = server_cmd(rc, "PUBSUB CHANNELS t:{%s}:push:*", q);
    long long n = r->type == REDIS_REPLY_ARRAY ? (long long)r->elements : -1;
    freeReplyObject(r);
    return n;
}

static int has_push_channel(void *rc) {
    return push_channels(rc, "tm") >= 1;
}

static int a_is_dead(void *arg) {
    test_env *e = arg;
    return strcmp(get_info(e->base, e->q, "a").state, "dead") == 0;
}

/* Conditions to wait for (loop_until_cond). */
typedef struct stats_poll {
    test_env *e;
    rjq_stats st; /* the last stats read */
} stats_poll;

static int has_failed(void *arg) {
    stats_poll *p = arg;
    p->st = get_stats(p->e->base, p->e->q);
    return p->st.failed > 0;
}

static int has_dead(void *arg) {
    stats_poll *p = arg;
    p->st = get_stats(p->e->base, p->e->q);
    return p->st.dead_depth > 0;
}

typedef struct int_poll {
    const int *v;
    int n;
} int_poll;

static int int_reached(void *arg) {
    int_poll *p = arg;
    return *p->v >= p->n;
}

/* ---- pause and resume -------------------------------------------------------- */

static rjq_job *held_job; /* the job the handlers below keep */
static long started, finished;

/* Keeps the job named "a" (held_job), completes the others. */
static void keep_a_handler(rjq_job *job, void *data) {
    (void)data;
    started++;
    if (strcmp(rjq_job_get_id(job), "a") == 0) {
        held_job = job;
        return;
    }
    ASSERT_OK(rjq_job_complete(job, "", 0, on_done_ok, &finished));
}

/* Run the loop until the queue's monitor is in place: its flag set (events
 * are published only then) and its subscription confirmed by Redis (what
 * is published before is lost to it). */
typedef struct monitored_poll {
    test_env *e;
    const char *queue;
    char channel[128];
} monitored_poll;

static int is_monitored(void *arg) {
    monitored_poll *p = arg;
    return server_int(p->e->rc, "EXISTS t:{%s}:monitored", p->queue) == 1 &&
           server_numsub(p->e->rc, p->channel) == 1;
}

static void wait_monitored(test_env *e, const char *queue) {
    monitored_poll p = {e, queue, ""};
    snprintf(p.channel, sizeof p.channel, "t:{%s}:events", queue);
    ASSERT(loop_until_cond(e->base, is_monitored, &p, 20000));
}

TEST(pause_starts_nothing_until_resume_with_workers_idle_and_busy) {
    test_env e;
    env_start(&e, "pz");
    seen s = {0};
    rjq_monitor *m;
    ASSERT_OK(rjq_queue_monitor(e.q, on_event, &s, &m));
    wait_monitored(&e, "pz");
    started = finished = 0;
    held_job = NULL;
    rjq_worker_options wo = quiet_worker_options(2);
    rjq_worker *busy, *idle;
    ASSERT_OK(rjq_worker_start(e.q, &wo, keep_a_handler, NULL, &busy));
    enqueue_x_ok(e.base, e.q, "a", 0, 0);
    ASSERT(loop_until_count(e.base, &started, 1, 5000));
    ASSERT_OK(rjq_worker_start(e.q, &wo, keep_a_handler, NULL, &idle));
    wait_worker_started(e.base, e.c, e.q, e.rc, "pz"); /* both idle workers registered their slots */
    ASSERT(registrations(e.rc, "pz") >= 1);

    ASSERT_EQ(1, set_paused(&e, 1));
    ASSERT_EQ(0, set_paused(&e, 1)); /* already */
    s.paused_phase = 1;
    ASSERT_EQ(0, registrations(e.rc, "pz")); /* no push can go out */
    /* the busy worker finishes while paused: it registers no slot */
    ASSERT(held_job != NULL);
    ASSERT_OK(rjq_job_complete(held_job, "", 0, on_done_ok, &finished));
    held_job = NULL;
    ASSERT(loop_until_count(e.base, &finished, 1, 5000));
    /* a round trip after the completion: what the worker sent on its
     * answer (a claim that registers its slot) has run */
    ASSERT_OK(stats_of(e.base, e.q).status);
    ASSERT_EQ(0, registrations(e.rc, "pz"));
    for (int i = 0; i < 4; i++) enqueue_x_ok(e.base, e.q, NULL, 0, 0);
    enqueue_x_ok(e.base, e.q, NULL, 0, 3);
    long long due = server_now_ms(e.rc) + 100;
    enqueue_x_ok(e.base, e.q, "later", 100, 0);
    /* the enqueues pushed nothing (no slot registered: checked above);
     * "later" is due by the server's clock */
    ASSERT(loop_until_server_ms(e.base, e.rc, due, 10000));
    ASSERT_EQ(1, started);
    ASSERT_EQ(0, s.active_while_paused);
    rjq_stats st = get_stats(e.base, e.q);
    ASSERT_EQ(1, st.paused);
    ASSERT_EQ(5, st.ready);
    ASSERT_EQ(1, st.delayed); /* due, but nothing is promoted while paused */
    ASSERT_EQ(0, st.active);
    ASSERT_EQ(1, st.completed);
    ASSERT_EQ(1, s.paused);

    s.paused_phase = 0;
    ASSERT_EQ(1, set_paused(&e, 0));
    ASSERT_EQ(0, set_paused(&e, 0));
    ASSERT(loop_until_count(e.base, &finished, 7, 5000));
    ASSERT_EQ(7, started);
    st = get_stats(e.base, e.q);
    ASSERT_EQ(0, st.paused);
    ASSERT_EQ(7, st.completed);
    ASSERT_EQ(1, s.resumed);
    env_stop(&e);
}

static void complete_handler(rjq_job *job, void *data) {
    (void)data;
    started++;
    ASSERT_OK(rjq_job_complete(job, "", 0, on_done_ok, &finished));
}

/* Calls of the scripts reclaim and claim (FCALL rjq_<version>_<name>)
 * that a MONITOR connection logged so far. */
typedef struct script_calls {
    redisContext *mon;
    long reclaims, claims;
    long reclaims_wanted; /* monitor_visits: the reclaims to wait for */
} script_calls;

/* Reads what the MONITOR connection has (without blocking); counts. */
static void read_monitor(script_calls *sc) {
    struct pollfd pfd = {sc->mon->fd, POLLIN, 0};
    while (poll(&pfd, 1, 0) == 1) ASSERT(redisBufferRead(sc->mon) == REDIS_OK);
    redisReply *r;
    while (redisGetReplyFromReader(sc->mon, (void **)&r) == REDIS_OK && r) {
        if (r->type == REDIS_REPLY_STATUS && strstr(r->str, "_reclaim\"")) sc->reclaims++;
        if (r->type == REDIS_REPLY_STATUS && strstr(r->str, "_claim\"")) sc->claims++;
        freeReplyObject(r);
    }
}

static int monitor_visits(void *arg) {
    script_calls *sc = arg;
    read_monitor(sc);
    return sc->reclaims >= sc->reclaims_wanted;
}

/* Idle workers of a paused queue claim nothing, even when the client's
 * visits (every 50 ms here) see jobs waiting. */
TEST(paused_queue_costs_idle_workers_no_claims) {
    test_env e;
    env_start(&e, "pc");
    started = finished = 0;
    rjq_worker_options wo = quiet_worker_options(3);
    wo.reclaim_ms = 50;
    rjq_worker *w1, *w2;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_handler, NULL, &w1));
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_handler, NULL, &w2));
    wait_worker_started(e.base, e.c, e.q, e.rc, "pc");
    ASSERT_EQ(1, set_paused(&e, 1));
    script_calls sc = {server_connect(&e.s), 0, 0, 0};
    redisReply *r = redisCommand(sc.mon, "MONITOR");
    ASSERT(r != NULL);
    freeReplyObject(r);
    for (int i = 0; i < 5; i++) enqueue_x_ok(e.base, e.q, NULL, 0, 0);
    /* the first visits see the jobs (the doorbell's claims may come
     * before them); then no claim in five visits more */
    sc.reclaims_wanted = 2;
    ASSERT(loop_until_cond(e.base, monitor_visits, &sc, 20000));
    sc.claims = 0;
    sc.reclaims_wanted = sc.reclaims + 5;
    ASSERT(loop_until_cond(e.base, monitor_visits, &sc, 20000));
    ASSERT_EQ(0, sc.claims);
    redisFree(sc.mon);
    ASSERT_EQ(0, started);
    ASSERT_EQ(1, set_paused(&e, 0));
    ASSERT(loop_until_count(e.base, &finished, 5, 5000));
    env_stop(&e);
}

/* ---- cancel ------------------------------------------------------------------- */

TEST(cancel_waiting_delayed_and_prioritised_jobs_ends_them_for_good) {
    test_env e;
    env_start(&e, "cw");
    seen s = {0};
    rjq_monitor *m;
    ASSERT_OK(rjq_queue_monitor(e.q, on_event, &s, &m));
    wait_monitored(&e, "cw");
    enqueue_x_ok(e.base, e.q, "w", 0, 0);
    enqueue_x_ok(e.base, e.q, "d", 60000, 0);
    enqueue_x_ok(e.base, e.q, "p", 0, 5);
    enqueue_x_ok(e.base, e.q, "keep", 0, 0);
    await_rec aw = {0};
    ASSERT_OK(rjq_queue_await(e.q, "w", NULL, on_awaited, &aw, NULL));
    ASSERT(loop_until_server_int(e.base, e.rc, 1, 5000, "HEXISTS t:{cw}:watchers w")); /* watched */
    ASSERT_EQ(0, aw.calls);

    cancel_wait c = cancel_job(&e, "w");
    ASSERT_OK(c.status);
    ASSERT_STREQ("ready", c.state);
    c = cancel_job(&e, "d");
    ASSERT_OK(c.status);
    ASSERT_STREQ("delayed", c.state);
    c = cancel_job(&e, "p");
    ASSERT_OK(c.status);
    ASSERT_STREQ("ready", c.state);
    ASSERT(loop_until(e.base, &aw.calls, 2000));
    rjq_stats st = get_stats(e.base, e.q); /* (a round trip: a second answer would be in) */
    ASSERT_EQ(1, aw.calls);
    ASSERT_EQ(RJQ_EJOBCANCELED, aw.status);

    ASSERT_EQ(1, st.ready); /* keep */
    ASSERT_EQ(0, st.delayed);
    ASSERT_EQ(3, st.cancelled);
    ASSERT_EQ(3, st.cancelled_depth);
    ASSERT_EQ(3, s.cancelled);
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{cw}:ready"));
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{cw}:prio"));
    info_wait i = get_info(e.base, e.q, "d");
    ASSERT_OK(i.status);
    ASSERT_STREQ("cancelled", i.state);

    /* again, unknown, invalid */
    c = cancel_job(&e, "w");
    ASSERT_EQ(RJQ_ESTATE, c.status);
    ASSERT_STREQ("cancelled", c.state);
    c = cancel_job(&e, "nope");
    ASSERT_EQ(RJQ_ENOTFOUND, c.status);
    ASSERT_EQ(RJQ_EJOBID, rjq_queue_cancel(e.q, "a b", on_cancelled, NULL));
    ASSERT_EQ(RJQ_EJOBID, rjq_queue_cancel(e.q, "", on_cancelled, NULL));

    /* an await that comes later is answered from the stored state */
    await_rec late = {0};
    ASSERT_OK(rjq_queue_await(e.q, "d", NULL, on_awaited, &late, NULL));
    ASSERT(loop_until(e.base, &late.calls, 2000));
    ASSERT_EQ(RJQ_EJOBCANCELED, late.status);

    /* the id stays taken while the record is kept */
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "w";
    ASSERT_EQ(1, enqueue_job(e.base, e.q, "x", &o).existed);

    /* a worker runs only what was not cancelled */
    started = finished = 0;
    rjq_worker_options wo = quiet_worker_options(4);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_handler, NULL, &w));
    ASSERT(loop_until_count(e.base, &finished, 1, 5000));
    /* a job enqueued after the cancelled ones runs: they were passed by */
    enqueue_x_ok(e.base, e.q, "marker", 0, 0);
    ASSERT(loop_until_count(e.base, &finished, 2, 5000));
    ASSERT_EQ(2, started);
    c = cancel_job(&e, "keep");
    ASSERT_EQ(RJQ_ESTATE, c.status);
    ASSERT_STREQ("completed", c.state);
    env_stop(&e);
}

TEST(cancelled_jobs_kept_are_capped_by_dead_max) {
    test_env e;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.dead_max = 2;
    env_start_queue(&e, "cm", &qo);
    enqueue_x_ok(e.base, e.q, "j1", 0, 0);
    enqueue_x_ok(e.base, e.q, "j2", 0, 0);
    enqueue_x_ok(e.base, e.q, "j3", 0, 0);
    ASSERT_OK(cancel_job(&e, "j1").status);
    ASSERT_OK(cancel_job(&e, "j2").status);
    ASSERT_OK(cancel_job(&e, "j3").status);
    rjq_stats st = get_stats(e.base, e.q);
    ASSERT_EQ(3, st.cancelled);
    ASSERT_EQ(2, st.cancelled_depth);
    ASSERT_EQ(RJQ_ENOTFOUND, get_info(e.base, e.q, "j1").status); /* the oldest went */
    ASSERT_OK(get_info(e.base, e.q, "j3").status);
    env_stop(&e);
}

/* A running job, cancelled from another process. The child runs the worker:
 * its handler keeps the job until the notice comes, then completes it and
 * writes what it saw to the pipe. */
typedef struct child_report {
    int reason, looked;       /* on_notice's reason, rjq_job_get_notice() then */
    double noticed_ms;        /* mono_ms() at the notice */
    int complete_status;      /* what the late completion got */
} child_report;

static child_report report;
static int report_fd = -1;

static void on_late_complete(rjq_client *c, int status, void *data) {
    (void)c, (void)data;
    report.complete_status = status;
    ASSERT(write(report_fd, &report, sizeof report) == (ssize_t)sizeof report);
}

static void keep_handler(rjq_job *job, void *data) {
    (void)data; /* kept until the notice */
    held_job = job;
    started++;
}

static void notice_then_complete(rjq_job *job, int reason, void *data) {
    (void)data;
    report.noticed_ms = mono_ms();
    report.reason = reason;
    report.looked = rjq_job_get_notice(job);
    ASSERT_OK(rjq_job_complete(job, "late", 4, on_late_complete, NULL));
}

/* The cancel child's lease: long, so that its first lease extension (which
 * would also tell it) comes long after the push channel's notice. */
#define CANCEL_CHILD_LEASE_MS 90000

static void run_cancel_child(const test_server *s, const char *qname, int fd) {
    report_fd = fd;
    struct event_base *base = event_base_new();
    rjq_client *c = client_for(base, s);
    rjq_queue *q = queue_for(c, qname);
    rjq_worker_options wo = quiet_worker_options(2);
    wo.on_notice = notice_then_complete;
    wo.lease_ms = CANCEL_CHILD_LEASE_MS; /* its first extension: a third of it later */
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, keep_handler, NULL, &w));
    serve_until_killed(base, 60000);
}

TEST(cancel_of_a_running_job_from_another_process_tells_its_handler_and_refuses_its_completion) {
    test_env e;
    env_start(&e, "cr");
    int fds[2];
    ASSERT(pipe(fds) == 0);
    pid_t child = fork_child();
    if (child == 0) {
        close(fds[0]);
        run_cancel_child(&e.s, "cr", fds[1]);
    }
    close(fds[1]);
    /* Once the child's worker is idle and registered, the job is pushed to
     * it, and the notice follows the push on the same connection. */
    double end = mono_ms() + 10000;
    while (server_int(e.rc, "HLEN t:{cr}:idle") < 1) {
        ASSERT(mono_ms() < end);
        sleep_ms(10);
    }
    await_rec aw = {0};
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "r";
    ASSERT_OK(rjq_enqueue_await(e.q, "x", 1, &o, NULL, on_awaited, &aw, NULL));
    ASSERT(loop_until_server_int(e.base, e.rc, 1, 10000, "ZCOUNT t:{cr}:active -inf (+inf"));
    double t0 = mono_ms();
    cancel_wait c = cancel_job(&e, "r");
    ASSERT_OK(c.status);
    ASSERT_STREQ("active", c.state);
    ASSERT(loop_until(e.base, &aw.calls, 5000));

    struct pollfd pfd = {fds[0], POLLIN, 0};
    ASSERT(poll(&pfd, 1, 5000) == 1);
    child_report got;
    ASSERT(read(fds[0], &got, sizeof got) == (ssize_t)sizeof got);
    ASSERT_EQ(RJQ_EJOBCANCELED, got.reason);
    ASSERT_EQ(RJQ_EJOBCANCELED, got.looked);
    fprintf(stderr, "cancel: the handler was told %.2f ms after the call\n", got.noticed_ms - t0);
    /* over the push channel: before the first lease extension could tell it
     * (a third of the lease after the start; no speed of the machine is
     * asserted) */
    ASSERT(got.noticed_ms - t0 < CANCEL_CHILD_LEASE_MS / 3);
    ASSERT_EQ(RJQ_EJOBCANCELED, got.complete_status);

    /* nothing more comes: no retry (the stats, a round trip after the
     * child's refused completion, show none), no second outcome */
    rjq_stats st = get_stats(e.base, e.q);
    ASSERT_EQ(1, aw.calls);
    ASSERT_EQ(RJQ_EJOBCANCELED, aw.status);
    ASSERT_EQ(0, st.completed);
    ASSERT_EQ(0, st.failed);
    ASSERT_EQ(0, st.active);
    ASSERT_EQ(0, st.ready);
    ASSERT_EQ(1, st.cancelled);
    ASSERT_STREQ("cancelled", get_info(e.base, e.q, "r").state);
    ASSERT_EQ(0, get_info(e.base, e.q, "r").has_result);

    kill(child, SIGKILL);
    reap(child, 5000);
    close(fds[0]);
    env_stop(&e);
}

/* The worker's subscriber connection is down when the job is cancelled:
 * its next lease extension brings the notice. Then its failure is
 * refused (and the job is not retried). */
static int notices, notice_reason;
static long long channels_at_notice = -1;
static redisContext *notice_rc;
static int fail_status;
static long failed_calls;

static void on_fail_refused(rjq_client *c, int status, void *data) {
    (void)c, (void)data;
    fail_status = status;
    failed_calls++;
}

static void notice_then_fail(rjq_job *job, int reason, void *data) {
    (void)data;
    notices++;
    notice_reason = reason;
    channels_at_notice = push_channels(notice_rc, "cx");
    ASSERT_OK(rjq_job_fail(job, "stopped", RJQ_FAIL_RETRY, 0, on_fail_refused, NULL));
}

TEST(cancel_missed_by_the_subscriber_arrives_with_the_next_lease_extension) {
    test_env e;
    env_start(&e, NULL);
    rjq_client_options co = client_options(e.s.url);
    co.reconnect_min_ms = co.reconnect_max_ms = 5000; /* the subscriber stays down */
    rjq_client *wc = client_new(e.base, &co);
    wait_connected(e.base, wc);
    rjq_queue *wq = queue_for(wc, "cx");
    e.q = queue_for(e.c, "cx");
    notice_rc = e.rc;
    notices = 0;
    rjq_worker_options wo = quiet_worker_options(1);
    wo.lease_ms = 600; /* extended every 200 ms */
    wo.on_notice = notice_then_fail;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(wq, &wo, keep_handler, NULL, &w));
    started = 0;
    enqueue_x_ok(e.base, e.q, "k", 0, 0);
    ASSERT(loop_until_count(e.base, &started, 1, 5000)); /* its handler has it */
    ASSERT_EQ(1, push_channels(e.rc, "cx"));
    /* e.c has no subscription: only the worker's client's goes */
    freeReplyObject(server_cmd(e.rc, "CLIENT KILL TYPE pubsub"));
    ASSERT_EQ(0, push_channels(e.rc, "cx"));
    ASSERT_OK(cancel_job(&e, "k").status);
    ASSERT_EQ(0, notices);
    ASSERT(loop_until_count(e.base, &failed_calls, 1, 3000));
    ASSERT_EQ(1, notices);
    ASSERT_EQ(RJQ_EJOBCANCELED, notice_reason);
    ASSERT_EQ(0, channels_at_notice); /* it came with the extension */
    ASSERT_EQ(RJQ_EJOBCANCELED, fail_status);
    rjq_stats st = get_stats(e.base, e.q);
    ASSERT_EQ(0, st.failed);
    ASSERT_EQ(0, st.retried);
    ASSERT_EQ(0, st.ready + st.delayed + st.active);
    ASSERT_STREQ("cancelled", get_info(e.base, e.q, "k").state);
    rjq_client_free(wc);
    env_stop(&e);
}



/* ---- timeouts ------------------------------------------------------------------ */

static int timeout_notices, timeout_reason, timed_out_notices;
static int late_status;
static long late_calls;
static struct event_base *e_base_for_late; /* finish_late's loop */

static void on_timeout_notice(rjq_job *job, int reason, void *data) {
    (void)job, (void)data;
    timeout_notices++;
    timeout_reason = reason;
    timed_out_notices += reason == RJQ_ETIMEDOUT;
}

static void on_late(rjq_client *c, int status, void *data) {
    (void)c, (void)data;
    late_status = status;
    late_calls++;
}

/* A job runs past its timeout while its worker keeps extending its lease:
 * the extension stops at the run time's end, the sweep fails the job as
 * timed out and retries it (a second worker completes it), the holder is
 * told, and its late completion is refused. */
TEST(job_past_its_timeout_is_failed_and_retried_and_its_holder_can_neither_extend_nor_complete_it) {
    test_env e;
    env_start(&e, "to");
    rjq_worker_options wo = quiet_worker_options(1);
    wo.lease_ms = 600; /* extended every 200 ms */
    wo.reclaim_ms = 100;
    wo.on_notice = on_timeout_notice;
    started = finished = 0;
    held_job = NULL;
    timeout_notices = 0;
    rjq_worker *wa;
    ASSERT_OK(rjq_worker_start(e.q, &wo, keep_handler, NULL, &wa));
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "t";
    o.timeout_ms = 400;
    o.max_attempts = 2;
    o.backoff.type = RJQ_BACKOFF_FIXED;
    o.backoff.base_ms = 50;
    long target = answers + 1;
    ASSERT_OK(rjq_enqueue(e.q, "x", 1, &o, on_enqueued, NULL));
    ASSERT(loop_until_count(e.base, &answers, target, 5000));
    ASSERT(loop_until_count(e.base, &started, 1, 5000));
    rjq_job *zombie = held_job;
    ASSERT(loop_until(e.base, &timeout_notices, 5000));
    /* the notice freed its slot: stopped, it does not claim the retry (one
     * that still reaches it goes back, attempt not counted); its stop
     * waits for the zombie's handle */
    ASSERT_OK(rjq_worker_stop(wa, NULL, NULL));
    ASSERT_EQ(RJQ_ETIMEDOUT, timeout_reason);
    ASSERT_EQ(RJQ_ETIMEDOUT, rjq_job_get_notice(zombie));
    /* (the notice may come before the sweep failed the job) */
    stats_poll sp = {&e, {0}};
    ASSERT(loop_until_cond(e.base, has_failed, &sp, 10000));
    rjq_stats st = sp.st;
    ASSERT_EQ(1, st.failed);
    ASSERT_EQ(1, st.retried);
    ASSERT_EQ(0, st.reclaimed); /* failed as timed out, not returned as lost */
    info_wait i = get_info(e.base, e.q, "t");
    ASSERT_STREQ("timed out after 400 ms", i.error);

    /* a second worker runs the retry (and sweeps: the first one goes once
     * its zombie is finished) */
    rjq_client *c2 = client_for(e.base, &e.s);
    rjq_worker_options wo2 = quiet_worker_options(1);
    wo2.reclaim_ms = 100;
    rjq_worker *wb;
    ASSERT_OK(rjq_worker_start(queue_for(c2, "to"), &wo2, complete_handler, NULL, &wb));
    ASSERT(loop_until_count(e.base, &finished, 1, 5000));
    i = get_info(e.base, e.q, "t");
    ASSERT_STREQ("completed", i.state);
    ASSERT_EQ(2, i.attempts);

    late_calls = 0;
    ASSERT_OK(rjq_job_complete(zombie, "late", 4, on_late, NULL));
    ASSERT(loop_until_count(e.base, &late_calls, 1, 5000));
    ASSERT_EQ(RJQ_ELEASELOST, late_status);
    ASSERT_EQ(1, timeout_notices); /* told once */
    /* the run time's end is dropped once past (the sweep) */
    ASSERT(loop_until_server_int(e.base, e.rc, 0, 5000, "ZCARD t:{to}:deadlines"));
    rjq_client_free(c2);
    env_stop(&e);
}

/* A holder that hangs with a long lease (3 s, its first extension 1 s
 * away) loses a job at its timeout: the queue's default here (300 ms).
 * Its attempts spent, it goes dead as timed out; the sweep (another
 * client's) tells the holder on its push channel. */
TEST(hung_holder_loses_a_job_at_its_timeout_not_at_its_lease) {
    test_env e;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.job_timeout_ms = 300;
    env_start_queue(&e, "th", &qo);
    rjq_worker_options wo = quiet_worker_options(1);
    wo.lease_ms = 3000;
    wo.on_notice = on_timeout_notice;
    started = finished = 0;
    held_job = NULL;
    timeout_notices = 0;
    rjq_worker *wa;
    ASSERT_OK(rjq_worker_start(e.q, &wo, keep_handler, NULL, &wa));
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "h";
    o.max_attempts = 1;
    long target = answers + 1;
    ASSERT_OK(rjq_enqueue(e.q, "x", 1, &o, on_enqueued, NULL));
    ASSERT(loop_until_count(e.base, &answers, target, 5000));
    ASSERT(loop_until_count(e.base, &started, 1, 5000));
    /* its lease ends with its run time, not 3 s from now */
    long long score = server_int(e.rc, "ZSCORE t:{th}:active h");
    ASSERT(score <= server_now_ms(e.rc) + 300);

    /* another client sweeps (every 100 ms) */
    rjq_client *c2 = client_for(e.base, &e.s);
    rjq_worker_options wo2 = quiet_worker_options(1);
    wo2.reclaim_ms = 100;
    rjq_worker *wb;
    ASSERT_OK(rjq_worker_start(queue_for(c2, "th"), &wo2, complete_handler, NULL, &wb));
    stats_poll sp = {&e, {0}};
    ASSERT(loop_until_cond(e.base, has_dead, &sp, 10000));
    rjq_stats st = sp.st;
    ASSERT_EQ(1, st.failed);
    ASSERT_EQ(0, st.completed);
    info_wait i = get_info(e.base, e.q, "h");
    ASSERT_STREQ("dead", i.state);
    ASSERT_STREQ("timed out after 300 ms", i.error);
    ASSERT(loop_until(e.base, &timeout_notices, 3000)); /* a pub/sub hop after the sweep */
    ASSERT_EQ(1, timeout_notices);
    ASSERT_EQ(RJQ_ETIMEDOUT, timeout_reason);
    late_calls = 0; /* its late failure is refused too (not taken for a re-sent one) */
    ASSERT_OK(rjq_job_fail(held_job, "late", RJQ_FAIL_RETRY, 0, on_late, NULL));
    ASSERT(loop_until_count(e.base, &late_calls, 1, 5000));
    ASSERT_EQ(RJQ_ELEASELOST, late_status);
    ASSERT_STREQ("timed out after 300 ms", get_info(e.base, e.q, "h").error);
    rjq_client_free(c2);
    env_stop(&e);
}

TEST(invalid_timeouts_are_refused) {
    test_env e;
    env_start(&e, "ti");
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.timeout_ms = -1;
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue(e.q, "x", 1, &o, NULL, NULL));
    o.timeout_ms = RJQ_DELAY_MAX + 1;
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue(e.q, "x", 1, &o, NULL, NULL));
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.job_timeout_ms = -5;
    rjq_queue *q;
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_open(e.c, "ti2", &qo, &q));
    env_stop(&e);
}

/* ---- limits ----------------------------------------------------------------------- */

static long long set_limits(test_env *e, long concurrency, long rate, long window) {
    rjq_limits l = {sizeof(rjq_limits), concurrency, rate, window};
    count_wait w = {0};
    ASSERT_OK(rjq_queue_set_limits(e->q, &l, on_count, &w));
    ASSERT(loop_until(e->base, &w.done, 5000));
    ASSERT_OK(w.status);
    return w.n;
}

static void enqueue_many(test_env *e, int n) {
    static rjq_enqueue_item items[1000];
    ASSERT(n <= 1000);
    for (int i = 0; i < n; i++) items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), "x", 1, NULL};
    long target = answers + 1;
    ASSERT_OK(rjq_enqueue_batch(e->q, items, (size_t)n, on_enqueued, NULL));
    ASSERT(loop_until_count(e->base, &answers, target, 5000));
}

/* A child process with one worker of the given concurrency whose jobs
 * take hold_ms (0: completed at once); runs until killed. Its worker has
 * no safety poll and no visits: only what the scripts tell it wakes it. */
static struct event_base *child_base;
static long child_hold_ms;

static void finish_later(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    ASSERT_OK(rjq_job_complete(arg, "", 0, NULL, NULL));
}

static void timed_handler(rjq_job *job, void *data) {
    (void)data;
    if (child_hold_ms == 0) {
        ASSERT_OK(rjq_job_complete(job, "", 0, NULL, NULL));
        return;
    }
    struct timeval tv = {0, child_hold_ms * 1000};
    ASSERT(event_base_once(child_base, -1, EV_TIMEOUT, finish_later, job, &tv) == 0);
}

static pid_t spawn_worker(const test_server *s, const char *qname, int concurrency, long hold_ms) {
    pid_t pid = fork_child();
    if (pid != 0) return pid;
    child_base = event_base_new();
    child_hold_ms = hold_ms;
    rjq_client *c = client_for(child_base, s);
    rjq_worker_options wo = quiet_worker_options(concurrency);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(queue_for(c, qname), &wo, timed_handler, NULL, &w));
    serve_until_killed(child_base, 60000);
}

/* Start times, in server time, from the monitor stream. */
typedef struct starts_log {
    rjq_monitor *m;
    long long t[2000];
    long n;
} starts_log;

static void on_start_event(rjq_client *c, const char *ev, const char *id, void *data) {
    starts_log *l = data;
    (void)c, (void)id;
    if (strcmp(ev, "active") == 0 && l->n < 2000) l->t[l->n++] = rjq_monitor_get_time(l->m);
}

#define RATE_JOBS 400

TEST(rate_limit_of_100_per_second_over_3_worker_processes_is_kept_and_used) {
    test_env e;
    env_start(&e, "rl");
    static starts_log log;
    memset(&log, 0, sizeof log);
    ASSERT_OK(rjq_queue_monitor(e.q, on_start_event, &log, &log.m));
    wait_monitored(&e, "rl"); /* (an "active" event missed would never come) */
    ASSERT_EQ(1, set_limits(&e, 0, 100, 1000));
    rjq_stats st = get_stats(e.base, e.q);
    ASSERT_EQ(100, st.limit_rate);
    ASSERT_EQ(1000, st.limit_rate_window_ms);
    pid_t pids[3];
    for (int k = 0; k < 3; k++) pids[k] = spawn_worker(&e.s, "rl", 10, 0);
    enqueue_many(&e, RATE_JOBS);
    /* The workers never poll (quiet: every 60 s) and their jobs end at
     * once: past the first window, only a claim's answer "the next start
     * is allowed at T" wakes them. So all 400 starting well before their
     * first poll is the limit being used (no assertion on the machine's
     * speed: the rate sustained is printed). */
    ASSERT(loop_until_count(e.base, &log.n, RATE_JOBS, 45000));
    for (int k = 0; k < 3; k++) {
        kill(pids[k], SIGKILL);
        reap(pids[k], 5000);
    }
    /* never more than 100 starts in any second (events come in server order) */
    long most = 0;
    for (long i = 0, j = 0; i < log.n; i++) {
        ASSERT(i == 0 || log.t[i] >= log.t[i - 1]);
        while (log.t[j] <= log.t[i] - 1000) j++;
        if (i - j + 1 > most) most = i - j + 1;
    }
    ASSERT(most <= 100);
    /* (on an idle machine: 100 in a second, and >= 90 per second after the
     * first window's 100) */
    double span_s = (double)(log.t[log.n - 1] - log.t[0]) / 1000.0;
    double rate = (double)(RATE_JOBS - 100) / span_s;
    fprintf(stderr, "rate limit 100/s: %ld starts in %.3f s after the first, %.1f/s sustained, "
                    "most in one second %ld\n", log.n, span_s, rate, most);
    env_stop(&e);
}

TEST(global_concurrency_of_5_over_3_workers_of_10_never_has_more_than_5_active) {
    test_env e;
    env_start(&e, "gc");
    ASSERT_EQ(1, set_limits(&e, 5, 0, 0));
    ASSERT_EQ(5, get_stats(e.base, e.q).limit_concurrency);
    pid_t pids[3];
    for (int k = 0; k < 3; k++) pids[k] = spawn_worker(&e.s, "gc", 10, 20);
    enqueue_many(&e, 150);
    long long most = 0, samples = 0;
    double end = mono_ms() + 30000;
    while (server_int(e.rc, "HGET t:{gc}:stats retained") < 150) {
        ASSERT(mono_ms() < end);
        long long n = server_active_jobs(e.rc, "gc");
        if (n > most) most = n;
        samples++;
        sleep_ms(1); /* (a sampler that spins starves the tests beside it) */
    }
    /* idle workers of a limited queue register no slots: new jobs are not
     * pushed past the limit either */
    quiet_for(e.base, 300, "the workers are other processes: nothing of theirs marks when a "
                           "registration would have come");
    ASSERT_EQ(0, registrations(e.rc, "gc"));
    enqueue_many(&e, 30);
    while (server_int(e.rc, "HGET t:{gc}:stats retained") < 180) {
        ASSERT(mono_ms() < end);
        long long n = server_active_jobs(e.rc, "gc");
        if (n > most) most = n;
        samples++;
        sleep_ms(1);
    }
    for (int k = 0; k < 3; k++) {
        kill(pids[k], SIGKILL);
        reap(pids[k], 5000);
    }
    fprintf(stderr, "concurrency 5: at most %lld active in %lld samples\n", most, samples);
    ASSERT(most <= 5);
    ASSERT_EQ(5, most); /* and used */
    /* lifted: push delivery and full concurrency come back */
    ASSERT_EQ(1, set_limits(&e, 0, 0, 0));
    rjq_stats st = get_stats(e.base, e.q);
    ASSERT_EQ(0, st.limit_concurrency);
    ASSERT_EQ(0, st.limit_rate);
    env_stop(&e);
}

/* Fair shares under a concurrency limit (claim.lua): three workers (three
 * clients, each its own connections) of 5 slots on a queue limited to 5.
 * The first takes all 5; the others wait. Then the test finishes the
 * oldest running job, one at a time, and waits until its slot is taken
 * again: each freed slot goes to the worker that waited longest, so the
 * refills go round, 1, 2, 0, 1, 2, 0, ... (the worker that freed a slot
 * took it back every time: 0 starts for the others). */
typedef struct fair_start {
    rjq_job *job;
    int worker;
} fair_start;

#define FAIR_REFILLS 60
static fair_start fair_starts[5 + FAIR_REFILLS + 16];
static long fair_started;

static void fair_handler(rjq_job *job, void *data) {
    ASSERT(fair_started < (long)(sizeof fair_starts / sizeof fair_starts[0]));
    fair_starts[fair_started++] = (fair_start){job, *(int *)data};
}

TEST(concurrency_limit_gives_freed_slots_to_waiting_workers_in_turn) {
    test_env e;
    env_start(&e, "fair");
    ASSERT_EQ(1, set_limits(&e, 5, 0, 0));
    enqueue_many(&e, 100);
    static int ids[3] = {0, 1, 2};
    rjq_client *cs[3];
    rjq_worker *ws[3];
    fair_started = 0;
    for (int k = 0; k < 3; k++) {
        cs[k] = client_for(e.base, &e.s);
        wait_connected(e.base, cs[k]);
        rjq_worker_options wo = quiet_worker_options(5);
        ASSERT_OK(rjq_worker_start(queue_for(cs[k], "fair"), &wo, fair_handler, &ids[k], &ws[k]));
        if (k == 0) {
            ASSERT(loop_until_count(e.base, &fair_started, 5, 10000));
            continue;
        }
        /* its claim was held back: it waits (the hash: '#' and a field each) */
        ASSERT(loop_until_server_int(e.base, e.rc, k + 1, 10000, "HLEN t:{fair}:waiters"));
    }
    ASSERT_EQ(5, fair_started);
    for (long i = 0; i < 5; i++) ASSERT_EQ(0, fair_starts[i].worker);
    long per[3] = {5, 0, 0};
    for (long i = 0; i < FAIR_REFILLS; i++) {
        ASSERT_OK(rjq_job_complete(fair_starts[i].job, "", 0, NULL, NULL));
        ASSERT(loop_until_count(e.base, &fair_started, 5 + i + 1, 10000));
        ASSERT_EQ(5 + i + 1, fair_started); /* one slot freed, one taken */
        per[fair_starts[5 + i].worker]++;
    }
    fprintf(stderr, "starts per worker: [%ld, %ld, %ld]\n", per[0], per[1], per[2]);
    for (long i = 0; i < FAIR_REFILLS; i++) ASSERT_EQ((i + 1) % 3, fair_starts[5 + i].worker);
    ASSERT(server_active_jobs(e.rc, "fair") <= 5);
    for (int k = 0; k < 3; k++) rjq_client_free(cs[k]);
    env_stop(&e);
}

/* A waiter whose client is gone (no subscriber on its push channel) loses
 * its place at once, and one that never claims loses it when the grace
 * after its notice ends (claim.lua, WAIT_GRACE_MS): the worker held back
 * behind it claims again then and takes the slot, so a slot is never
 * left to a worker that will not take it. */
TEST(concurrency_limit_slot_left_to_a_silent_waiter_is_taken_after_its_grace) {
    test_env e;
    env_start(&e, "fg");
    ASSERT_EQ(1, set_limits(&e, 1, 0, 0));
    enqueue_many(&e, 3);
    redisContext *sub = server_connect(&e.s); /* the silent waiter's channel */
    redisReply *r = redisCommand(sub, "SUBSCRIBE t:{fg}:push:silent");
    ASSERT(r != NULL);
    freeReplyObject(r);
    freeReplyObject(server_cmd(e.rc, "HSET t:{fg}:waiters # 2 %s %s %s %s", "1 t:{fg}:push:gone",
                               "1 0", "1 t:{fg}:push:silent", "2 0"));
    ASSERT_EQ(3, server_int(e.rc, "HLEN t:{fg}:waiters"));
    fair_started = 0;
    static int id0 = 0;
    rjq_worker *w = NULL;
    rjq_worker_options wo = quiet_worker_options(1);
    /* free: 1, but left to the silent waiter (the gone one dropped) */
    ASSERT_OK(rjq_worker_start(e.q, &wo, fair_handler, &id0, &w));
    ASSERT(loop_until_count(e.base, &fair_started, 1, 30000)); /* after the grace */
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{fg}:waiters %s", "1 t:{fg}:push:gone"));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{fg}:waiters %s", "1 t:{fg}:push:silent"));
    ASSERT_OK(rjq_job_complete(fair_starts[0].job, "", 0, NULL, NULL));
    if (!loop_until_count(e.base, &fair_started, 2, 10000)) /* (what held it, if it fails) */
        fprintf(stderr, "no second start: active %lld, ready %lld, waiters %lld, completed %lld\n",
                server_int(e.rc, "ZCARD t:{fg}:active"), server_int(e.rc, "LLEN t:{fg}:ready"),
                server_int(e.rc, "HLEN t:{fg}:waiters"), server_int(e.rc, "HGET t:{fg}:stats retained"));
    ASSERT_EQ(2, fair_started);
    ASSERT_OK(rjq_job_complete(fair_starts[1].job, "", 0, NULL, NULL));
    redisFree(sub);
    env_stop(&e);
}

/* A doorbell heard in the loop turn where a job of a limited queue was
 * completed, after the completion and before the queue's tick: the claim
 * it owes rides the tick, behind the completion. Sent at once, it reached
 * Redis ahead of the completion, found the slot still taken and was held
 * back with nothing owed (no timer: next -1); the completion's batch made
 * no offer (the claim in flight took the slot), so the freed slot waited
 * for the poll timer (60 s here) and the next job did not start. The
 * test completes the job from a callback made active before the loop
 * runs, so the doorbell already in the subscriber connection's socket is
 * read in the same turn, after it, and before the tick it kicked. */
static redisContext *held_rc;

static int started_or_held(void *arg) {
    (void)arg;
    return fair_started == 2 || server_int(held_rc, "HLEN t:{db}:waiters") > 0;
}

static void complete_first(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    ASSERT_OK(rjq_job_complete(arg, "", 0, NULL, NULL));
}

TEST(concurrency_limit_doorbell_heard_between_a_completion_and_its_tick_claims_behind_it) {
    test_env e;
    env_start(&e, "db");
    ASSERT_EQ(1, set_limits(&e, 1, 0, 0));
    enqueue_many(&e, 2);
    fair_started = 0;
    static int id0 = 0;
    rjq_worker *w = NULL;
    rjq_worker_options wo = quiet_worker_options(1);
    ASSERT_OK(rjq_worker_start(e.q, &wo, fair_handler, &id0, &w));
    ASSERT(loop_until_count(e.base, &fair_started, 1, 10000));
    WAIT_FOR(e.base, rjq__channel_confirmed(e.c, "t:{db}:wake"), 5000);
    subscriber_barrier(e.base, e.c, e.rc); /* (its claim's own doorbell heard) */
    /* a doorbell waits in the worker's subscriber connection (Redis wrote
     * it before it answered the PING) */
    freeReplyObject(server_cmd(e.rc, "PUBLISH t:{db}:wake 1"));
    freeReplyObject(server_cmd(e.rc, "PING"));
    struct event *first = event_new(e.base, -1, 0, complete_first, fair_starts[0].job);
    ASSERT(first != NULL);
    event_active(first, EV_TIMEOUT, 1);
    held_rc = e.rc;
    ASSERT(loop_until_cond(e.base, started_or_held, NULL, 10000));
    event_free(first);
    ASSERT_EQ(0, server_int(e.rc, "HLEN t:{db}:waiters")); /* never held back */
    ASSERT_EQ(2, fair_started);
    ASSERT_OK(rjq_job_complete(fair_starts[1].job, "", 0, NULL, NULL));
    env_stop(&e);
}

/* The same with three worker processes of 10 slots, jobs of 20 ms, a
 * concurrency of 5: every process gets a share of the starts (it was
 * [1000, 0, 0]: the process that finished a job took its slot back; now
 * about a third each, [341, 351, 308] measured; asserted: a sixth). Each
 * child counts its starts in a hash of the server. */
static redisContext *child_rc;

static void counting_handler(rjq_job *job, void *data) {
    (void)data;
    freeReplyObject(redisCommand(child_rc, "HINCRBY perproc %d 1", (int)getpid()));
    struct timeval tv = {0, 20 * 1000};
    ASSERT(event_base_once(child_base, -1, EV_TIMEOUT, finish_later, job, &tv) == 0);
}

static pid_t spawn_counting_worker(const test_server *s, const char *qname, int concurrency) {
    pid_t pid = fork_child();
    if (pid != 0) return pid;
    child_base = event_base_new();
    child_rc = server_connect(s);
    rjq_client *c = client_for(child_base, s);
    rjq_worker_options wo = quiet_worker_options(concurrency);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(queue_for(c, qname), &wo, counting_handler, NULL, &w));
    serve_until_killed(child_base, 60000);
}

TEST(concurrency_limit_of_5_shares_the_starts_among_3_worker_processes) {
    test_env e;
    env_start(&e, "mp");
    ASSERT_EQ(1, set_limits(&e, 5, 0, 0));
    pid_t pids[3];
    for (int k = 0; k < 3; k++) pids[k] = spawn_counting_worker(&e.s, "mp", 10);
    enqueue_many(&e, 1000);
    double end = mono_ms() + 120000;
    while (server_int(e.rc, "HGET t:{mp}:stats retained") < 1000) {
        ASSERT(mono_ms() < end);
        sleep_ms(20);
    }
    for (int k = 0; k < 3; k++) {
        kill(pids[k], SIGKILL);
        reap(pids[k], 5000);
    }
    long long per[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++) per[k] = server_int(e.rc, "HGET perproc %d", (int)pids[k]);
    fprintf(stderr, "starts per process: [%lld, %lld, %lld]\n", per[0], per[1], per[2]);
    ASSERT_EQ(1000, per[0] + per[1] + per[2]);
    for (int k = 0; k < 3; k++) ASSERT(per[k] >= 1000 / 6);
    env_stop(&e);
}

TEST(invalid_limits_are_refused) {
    test_env e;
    env_start(&e, "li");
    rjq_limits l = {sizeof(rjq_limits), -1, 0, 0};
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_set_limits(e.q, &l, NULL, NULL));
    l = (rjq_limits){sizeof(rjq_limits), 0, -5, 0};
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_set_limits(e.q, &l, NULL, NULL));
    l = (rjq_limits){sizeof(rjq_limits), 0, 5, -1};
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_set_limits(e.q, &l, NULL, NULL));
    env_stop(&e);
}

/* ---- dedup window and debounce --------------------------------------------------- */

static enqueue_wait enqueue_opts(test_env *e, const char *payload, const rjq_job_options *o) {
    enqueue_wait r = enqueue_job(e->base, e->q, payload, o);
    ASSERT_OK(r.status);
    return r;
}

TEST(dedup_window_keeps_an_id_reserved_after_its_record_is_deleted) {
    test_env e;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.completed_max = 1; /* records of completed jobs go at once */
    env_start_queue(&e, "dd", &qo);
    started = finished = 0;
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_handler, NULL, &w));
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "once";
    o.dedup_ms = 1500;
    ASSERT_EQ(0, enqueue_opts(&e, "x", &o).existed);
    rjq_job_options plain = RJQ_JOB_OPTIONS_INIT;
    plain.id = "plain";
    ASSERT_EQ(0, enqueue_opts(&e, "x", &plain).existed);
    ASSERT(loop_until_count(e.base, &finished, 2, 5000));
    rjq_job_options third = RJQ_JOB_OPTIONS_INIT;
    third.id = "third"; /* its completion sweeps the older records */
    enqueue_opts(&e, "x", &third);
    ASSERT(loop_until_count(e.base, &finished, 3, 5000)); /* (its completion's answer) */
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{dd}:payload once")); /* the record is gone */
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{dd}:payload plain"));
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{dd}:dedup"));
    /* the stats count it, and when it is let go */
    long long until = server_int(e.rc, "ZSCORE t:{dd}:dedup once");
    stats_wait st = stats_of(e.base, e.q);
    ASSERT_OK(st.status);
    ASSERT_EQ(1, st.s.dedup_reserved);
    ASSERT_EQ(until, st.s.dedup_next_release_ms);
    long long seq = server_int(e.rc, "HGET t:{dd}:stats seq");
    enqueue_wait r = enqueue_opts(&e, "again", &o);
    ASSERT_EQ(1, r.existed); /* still reserved */
    ASSERT_EQ(0, r.replaced);
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{dd}:payload once"));
    ASSERT_EQ(seq + 1, server_int(e.rc, "HGET t:{dd}:stats seq")); /* no job: skipped */
    ASSERT_EQ(0, enqueue_opts(&e, "again", &plain).existed); /* no dedup: a new job */
    ASSERT(loop_until_server_ms(e.base, e.rc, until, 20000)); /* the reservation's end */
    st = stats_of(e.base, e.q); /* (its entry may still be there: not counted) */
    ASSERT_EQ(0, st.s.dedup_reserved);
    ASSERT_EQ(0, st.s.dedup_next_release_ms);
    ASSERT_EQ(0, enqueue_opts(&e, "again", &o).existed); /* the window is over */
    ASSERT(loop_until_count(e.base, &finished, 5, 5000));
    env_stop(&e);
}

/* The stored options column of job id in queue qname ("" when none). */
static void options_of(test_env *e, const char *qname, const char *id, char *out, size_t size) {
    redisReply *r = server_cmd(e->rc, "HGET t:{%s}:options %s", qname, id);
    ASSERT(r != NULL);
    snprintf(out, size, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
}

/* enqueue.lua reads each options text of a call once and gives its reading
 * to every job with the same text: a batch mixing shared and distinct
 * texts (a '+' joins every job after the first) keeps each job's own. */
TEST(a_batch_whose_jobs_share_options_texts_keeps_each_jobs_own_options) {
    test_env e;
    env_start(&e, "bo");
    rjq_job_options o[6];
    static const char *ids[6] = {"b1", "b2", "b3", "b4", "b5", "b6"};
    for (int i = 0; i < 6; i++) {
        o[i] = (rjq_job_options)RJQ_JOB_OPTIONS_INIT;
        o[i].id = ids[i];
        o[i].dedup_ms = 86400000;
        o[i].max_attempts = 5;
    }
    o[3].priority = 7; /* b4: its own text */
    o[3].max_attempts = 2;
    o[5].delay_ms = 3600000; /* b6: its own text, delayed */
    rjq_enqueue_item items[6];
    for (int i = 0; i < 6; i++) items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), "x", 1, &o[i]};
    long target = answers + 1;
    ASSERT_OK(rjq_enqueue_batch(e.q, items, 6, on_enqueued, NULL));
    ASSERT(loop_until_count(e.base, &answers, target, 5000));
    char got[128];
    for (int i = 0; i < 6; i++) {
        info_wait w = get_info(e.base, e.q, ids[i]);
        ASSERT_OK(w.status);
        ASSERT_EQ(i == 3 ? 2 : 5, w.max_attempts);
        ASSERT_STREQ(i == 5 ? "delayed" : "ready", w.state);
        options_of(&e, "bo", ids[i], got, sizeof got);
        ASSERT_STREQ(i == 3 ? "7,2,;;86400000" : "0,5,;;86400000", got);
    }
    ASSERT_EQ(4, server_int(e.rc, "LLEN t:{bo}:ready"));
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{bo}:prio")); /* b4, by its priority */
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{bo}:delayed"));
    env_stop(&e);
}

TEST(dedup_window_covers_dead_and_cancelled_jobs_past_their_cap) {
    test_env e;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.dead_max = 1;
    env_start_queue(&e, "dc", &qo);
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.dedup_ms = 60000;
    o.id = "c1";
    enqueue_opts(&e, "x", &o);
    o.id = "c2";
    enqueue_opts(&e, "x", &o);
    ASSERT_OK(cancel_job(&e, "c1").status);
    ASSERT_OK(cancel_job(&e, "c2").status); /* c1's record goes: the cap is 1 */
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{dc}:payload c1"));
    o.id = "c1";
    ASSERT_EQ(1, enqueue_opts(&e, "x", &o).existed);
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{dc}:payload c1"));
    env_stop(&e);
}

static char run_payload[64];
static void payload_handler(rjq_job *job, void *data) {
    (void)data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    if (strcmp(rjq_job_get_id(job), "d") == 0) snprintf(run_payload, sizeof run_payload, "%.*s", (int)len, p);
    started++;
    ASSERT_OK(rjq_job_complete(job, "", 0, on_done_ok, &finished));
}

TEST(debounce_replaces_a_waiting_jobs_payload_and_pushes_it_back) {
    test_env e;
    env_start(&e, "db");
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "d";
    o.delay_ms = 400;
    o.debounce = 1;
    enqueue_wait r = enqueue_opts(&e, "v1", &o);
    ASSERT_EQ(0, r.existed);
    long long due1 = server_int(e.rc, "ZSCORE t:{db}:delayed d");
    /* 100 ms of the server's clock since the first */
    ASSERT(loop_until_server_ms(e.base, e.rc, due1 - o.delay_ms + 100, 20000));
    r = enqueue_opts(&e, "v2", &o);
    ASSERT_EQ(1, r.existed);
    ASSERT_EQ(1, r.replaced);
    long long due2 = server_int(e.rc, "ZSCORE t:{db}:delayed d");
    ASSERT(due2 >= due1 + 100); /* pushed back */
    info_wait i = get_info(e.base, e.q, "d");
    ASSERT_STREQ("v2", i.payload);

    /* a ready job is moved back to delayed */
    rjq_job_options now_ = RJQ_JOB_OPTIONS_INIT;
    now_.id = "r";
    enqueue_opts(&e, "r1", &now_);
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{db}:ready"));
    rjq_job_options later = RJQ_JOB_OPTIONS_INIT;
    later.id = "r";
    later.delay_ms = 200;
    later.debounce = 1;
    r = enqueue_opts(&e, "r2", &later);
    ASSERT_EQ(1, r.replaced);
    ASSERT_EQ(0, server_int(e.rc, "LLEN t:{db}:ready"));
    ASSERT_STREQ("delayed", get_info(e.base, e.q, "r").state);

    /* each runs once, with the last payload */
    started = finished = 0;
    rjq_worker_options wo = quiet_worker_options(1);
    wo.poll_ms = 100;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, payload_handler, NULL, &w));
    ASSERT(loop_until_count(e.base, &finished, 2, 5000));
    ASSERT_STREQ("v2", run_payload); /* the handler saw the replacement */
    /* a job enqueued after them runs, and nothing else did: each ran once */
    enqueue_opts(&e, "marker", &(rjq_job_options){.size = sizeof(rjq_job_options), .id = "marker"});
    ASSERT(loop_until_count(e.base, &finished, 3, 5000));
    ASSERT_EQ(3, started);

    /* a finished job is not replaced: reported as it is */
    r = enqueue_opts(&e, "v3", &o);
    ASSERT_EQ(1, r.existed);
    ASSERT_EQ(0, r.replaced);
    ASSERT_STREQ("v2", get_info(e.base, e.q, "d").payload);
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue(e.q, "x", 1, &(rjq_job_options){.size = sizeof(rjq_job_options), .debounce = 1}, NULL, NULL));
    env_stop(&e);
}

/* Regression: a debounce that gives a waiting job another priority (delay
 * 0) moves it where that priority waits, so a cancel then finds it and no
 * claim starts it. */
TEST(debounce_to_another_priority_then_cancel_leaves_nothing_to_claim) {
    test_env e;
    env_start(&e, "dp");
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "x";
    enqueue_opts(&e, "a", &o);
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{dp}:ready"));
    o.priority = 5;
    o.debounce = 1;
    ASSERT_EQ(1, enqueue_opts(&e, "b", &o).replaced);
    ASSERT_EQ(0, server_int(e.rc, "LLEN t:{dp}:ready"));
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{dp}:prio"));
    ASSERT_OK(cancel_job(&e, "x").status);
    ASSERT_EQ(0, server_int(e.rc, "LLEN t:{dp}:ready") + server_int(e.rc, "ZCARD t:{dp}:prio"));
    /* and a delayed job debounced with delay 0 is ready now */
    rjq_job_options d = RJQ_JOB_OPTIONS_INIT;
    d.id = "y";
    d.delay_ms = 60000;
    enqueue_opts(&e, "a", &d);
    d.delay_ms = 0;
    d.debounce = 1;
    ASSERT_EQ(1, enqueue_opts(&e, "b", &d).replaced);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "y").state);
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{dp}:delayed"));
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{dp}:ready"));
    env_stop(&e);
}

/* Regression: the run time's end of a job with a timeout outlives it in
 * the deadlines set until past; a job that reuses its id without a
 * timeout must not inherit it. */
TEST(reused_id_does_not_inherit_an_old_run_time_end) {
    test_env e;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.dead_max = 1; /* cancelled records go at once */
    env_start_queue(&e, "rd", &qo);
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "r";
    o.timeout_ms = 600;
    enqueue_opts(&e, "x", &o);
    started = 0;
    held_job = NULL;
    timeout_notices = 0;
    rjq_worker_options wo = quiet_worker_options(1);
    wo.lease_ms = 300; /* extended every 100 ms */
    wo.on_notice = on_timeout_notice;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, keep_handler, NULL, &w));
    ASSERT(loop_until_count(e.base, &started, 1, 5000));
    rjq_job *first = held_job;
    ASSERT_OK(cancel_job(&e, "r").status);
    late_calls = 0;
    ASSERT_OK(rjq_job_complete(first, "", 0, on_late, NULL));
    ASSERT(loop_until_count(e.base, &late_calls, 1, 5000));
    rjq_job_options other = RJQ_JOB_OPTIONS_INIT;
    other.id = "z";
    other.delay_ms = 60000; /* (not for the worker) */
    enqueue_opts(&e, "x", &other);
    ASSERT_OK(cancel_job(&e, "z").status); /* the cap of 1 deletes r's record */
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{rd}:payload r"));
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{rd}:deadlines")); /* r's entry is still there */
    long long old_end = server_int(e.rc, "ZSCORE t:{rd}:deadlines r");
    rjq_job_options again = RJQ_JOB_OPTIONS_INIT;
    again.id = "r"; /* no timeout this time */
    enqueue_opts(&e, "x", &again);
    ASSERT(loop_until_count(e.base, &started, 2, 5000));
    timed_out_notices = 0;
    /* an extension made past the old end (the lease it sets ends past the
     * old end + the lease) was taken */
    ASSERT(loop_until_server_int(e.base, e.rc, 1, 10000, "ZCOUNT t:{rd}:active (%lld (+inf",
                                 old_end + 300));
    ASSERT_EQ(0, timed_out_notices);
    ASSERT_STREQ("active", get_info(e.base, e.q, "r").state);
    long completions = 0;
    ASSERT_OK(rjq_job_complete(held_job, "", 0, on_done_ok, &completions));
    ASSERT(loop_until_count(e.base, &completions, 1, 5000));
    ASSERT_STREQ("completed", get_info(e.base, e.q, "r").state);
    env_stop(&e);
}

/* Runs the loop until the server's clock is past the run time's end of
 * job id of queue q (its entry in deadlines, written when it started). */
static void wait_run_time_over(test_env *e, const char *q, const char *id) {
    long long ends = server_int(e->rc, "ZSCORE t:{%s}:deadlines %s", q, id);
    ASSERT(ends > 0);
    ASSERT(loop_until_server_ms(e->base, e->rc, ends, 10000));
}

/* One reclaim sweep now; returns the jobs it took back. */
static long long sweep_now(test_env *e) {
    count_wait w = {0};
    ASSERT_OK(rjq_queue_reclaim(e->q, on_count, &w));
    ASSERT(loop_until(e->base, &w.done, 5000));
    ASSERT_OK(w.status);
    return w.n;
}

/* Regression (issue 31, item 1): the completion script itself refuses a
 * completion past the job's run time, by the server's clock, before any
 * sweep ran (the worker's lease is 30 s and nothing sweeps), and changes
 * nothing; the next sweep fails the job as timed out and counts it. */
TEST(completion_past_the_run_time_is_refused_before_any_sweep_and_changes_nothing) {
    test_env e;
    env_start(&e, "tl");
    rjq_worker_options wo = quiet_worker_options(1); /* lease 30 s, no sweep */
    started = 0;
    held_job = NULL;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, keep_handler, NULL, &w));
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "l";
    o.timeout_ms = 200;
    o.max_attempts = 1;
    enqueue_opts(&e, "x", &o);
    ASSERT(loop_until_count(e.base, &started, 1, 5000));
    wait_run_time_over(&e, "tl", "l");
    late_calls = 0;
    ASSERT_OK(rjq_job_complete(held_job, "late", 4, on_late, NULL));
    ASSERT(loop_until_count(e.base, &late_calls, 1, 5000));
    ASSERT_EQ(RJQ_ELEASELOST, late_status);
    info_wait i = get_info(e.base, e.q, "l");
    ASSERT_STREQ("active", i.state); /* nothing changed */
    ASSERT_EQ(0, i.has_result);
    rjq_stats st = get_stats(e.base, e.q);
    ASSERT_EQ(0, st.completed);
    ASSERT_EQ(0, st.failed);
    ASSERT_EQ(0, rjq_worker_count_running(w)); /* its slot is free */
    ASSERT_EQ(1, sweep_now(&e)); /* the sweep finds it */
    i = get_info(e.base, e.q, "l");
    ASSERT_STREQ("dead", i.state);
    ASSERT_STREQ("timed out after 200 ms", i.error);
    st = get_stats(e.base, e.q);
    ASSERT_EQ(0, st.completed);
    ASSERT_EQ(1, st.failed);
    ASSERT_EQ(0, st.reclaimed); /* failed as timed out, not returned as lost */
    env_stop(&e);
}

/* A failure past the run time is refused the same way, and changes
 * nothing: the job's outcome is its timeout (under its retry policy), not
 * what the late failure said (here: fatal). */
TEST(failure_past_the_run_time_is_refused_before_any_sweep_and_changes_nothing) {
    test_env e;
    env_start(&e, "tf");
    rjq_worker_options wo = quiet_worker_options(1);
    started = 0;
    held_job = NULL;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, keep_handler, NULL, &w));
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "f";
    o.timeout_ms = 200;
    o.max_attempts = 2;
    o.backoff.type = RJQ_BACKOFF_FIXED;
    o.backoff.base_ms = 60000; /* the retry waits (not for this worker) */
    enqueue_opts(&e, "x", &o);
    ASSERT(loop_until_count(e.base, &started, 1, 5000));
    wait_run_time_over(&e, "tf", "f");
    late_calls = 0;
    ASSERT_OK(rjq_job_fail(held_job, "late", RJQ_FAIL_FATAL, 0, on_late, NULL));
    ASSERT(loop_until_count(e.base, &late_calls, 1, 5000));
    ASSERT_EQ(RJQ_ELEASELOST, late_status);
    info_wait i = get_info(e.base, e.q, "f");
    ASSERT_STREQ("active", i.state);
    ASSERT_EQ(0, i.has_error);
    ASSERT_EQ(0, get_stats(e.base, e.q).failed);
    ASSERT_EQ(1, sweep_now(&e));
    i = get_info(e.base, e.q, "f");
    ASSERT_STREQ("delayed", i.state); /* retried, not dead */
    ASSERT_STREQ("timed out after 200 ms", i.error);
    rjq_stats st = get_stats(e.base, e.q);
    ASSERT_EQ(1, st.failed);
    ASSERT_EQ(1, st.retried);
    ASSERT_EQ(0, st.dead_depth);
    env_stop(&e);
}

/* Completes the job from inside on_notice, as the serve demo's pool does
 * with a hung job. */
static void notice_then_complete_late(rjq_job *job, int reason, void *data) {
    (void)data;
    timeout_notices++;
    timeout_reason = reason;
    ASSERT_OK(rjq_job_complete(job, "", 0, on_late, NULL));
}

/* Regression (issue 31, item 1): the extension tells the holder that the
 * run time is over before any sweep failed the job; a completion from
 * inside that notice is refused, so the job does not end "completed" with
 * an empty result, and the sweep then finds it. */
TEST(completion_from_the_timeout_notice_before_the_sweep_is_refused_and_the_sweep_finds_the_job) {
    test_env e;
    env_start(&e, "tn");
    rjq_worker_options wo = quiet_worker_options(1); /* nothing sweeps */
    wo.lease_ms = 600; /* extended every 200 ms */
    wo.on_notice = notice_then_complete_late;
    started = 0;
    timeout_notices = 0;
    late_calls = 0;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, keep_handler, NULL, &w));
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "n";
    o.timeout_ms = 100;
    o.max_attempts = 1;
    enqueue_opts(&e, "x", &o);
    ASSERT(loop_until_count(e.base, &late_calls, 1, 5000));
    ASSERT_EQ(1, timeout_notices);
    ASSERT_EQ(RJQ_ETIMEDOUT, timeout_reason);
    ASSERT_EQ(RJQ_ELEASELOST, late_status);
    ASSERT_STREQ("active", get_info(e.base, e.q, "n").state);
    ASSERT_EQ(0, get_stats(e.base, e.q).completed);
    ASSERT_EQ(1, sweep_now(&e));
    info_wait i = get_info(e.base, e.q, "n");
    ASSERT_STREQ("dead", i.state);
    ASSERT_STREQ("timed out after 100 ms", i.error);
    env_stop(&e);
}

/* Each attempt's notice (attempt number -> how many, and the reason). */
static int attempt_notices[8], attempt_reason[8];
static rjq_job *attempt_jobs[8];

static void keep_by_attempt(rjq_job *job, void *data) {
    (void)data;
    started++;
    int a = rjq_job_get_attempt(job);
    ASSERT(a >= 1 && a < 8);
    attempt_jobs[a] = job;
}

static void note_attempt_notice(rjq_job *job, int reason, void *data) {
    (void)data;
    int a = rjq_job_get_attempt(job);
    ASSERT(a >= 1 && a < 8);
    attempt_notices[a]++;
    attempt_reason[a] = reason;
    timeout_notices++;
}

/* Regression (issue 31, item 5): with the default 30 s lease (its first
 * extension 10 s away), a job with a timeout and 3 attempts whose
 * handlers all hang on one worker: every attempt is told RJQ_ETIMEDOUT
 * within a pub/sub hop of the sweep that failed it, also attempt 1 while
 * attempts 2 and 3 of the same id run on the same worker; finishing them
 * frees their slots. */
TEST(every_timed_out_attempt_is_told_while_later_attempts_of_its_job_run_on_the_same_worker) {
    test_env e;
    env_start(&e, "ta");
    rjq_worker_options wo = quiet_worker_options(3); /* default lease: 30 s */
    wo.reclaim_ms = 100;
    wo.on_notice = note_attempt_notice;
    memset(attempt_notices, 0, sizeof attempt_notices);
    memset(attempt_jobs, 0, sizeof attempt_jobs);
    started = 0;
    timeout_notices = 0;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, keep_by_attempt, NULL, &w));
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "a";
    o.timeout_ms = 200;
    o.max_attempts = 3;
    o.backoff.type = RJQ_BACKOFF_FIXED;
    o.backoff.base_ms = 1;
    enqueue_opts(&e, "x", &o);
    /* (well within the first extension: 10 s) */
    ASSERT(loop_until_count(e.base, &started, 3, 5000));
    ASSERT(loop_until_cond(e.base, int_reached, &(int_poll){&timeout_notices, 3}, 10000));
    for (int a = 1; a <= 3; a++) {
        ASSERT_EQ(1, attempt_notices[a]);
        ASSERT_EQ(RJQ_ETIMEDOUT, attempt_reason[a]);
        ASSERT_EQ(RJQ_ETIMEDOUT, rjq_job_get_notice(attempt_jobs[a]));
    }
    ASSERT_EQ(3, rjq_worker_count_running(w));
    info_wait i = get_info(e.base, e.q, "a");
    ASSERT_STREQ("dead", i.state);
    ASSERT_STREQ("timed out after 200 ms", i.error);
    for (int a = 1; a <= 3; a++) {
        late_calls = 0;
        ASSERT_OK(rjq_job_complete(attempt_jobs[a], "", 0, on_late, NULL));
        ASSERT(loop_until_count(e.base, &late_calls, 1, 5000));
        ASSERT_EQ(RJQ_ELEASELOST, late_status);
    }
    ASSERT_EQ(0, rjq_worker_count_running(w));
    ASSERT_EQ(3, timeout_notices); /* told once each */
    env_stop(&e);
}

/* The same when the subscriber connection is down while the attempts
 * time out (their messages are lost): each attempt's holder is told by
 * its next lease extension, also attempt 1, whose failtoken attempt 2's
 * timeout has replaced by then. */
TEST(timed_out_attempts_missed_by_the_subscriber_are_told_by_the_next_extension) {
    test_env e;
    env_start(&e, NULL);
    rjq_client_options co = client_options(e.s.url);
    co.reconnect_min_ms = co.reconnect_max_ms = 8000; /* the subscriber stays down */
    rjq_client *wc = client_new(e.base, &co);
    wait_connected(e.base, wc);
    rjq_queue *wq = queue_for(wc, "tm");
    e.q = queue_for(e.c, "tm");
    rjq_worker_options wo = quiet_worker_options(2);
    wo.lease_ms = 6000; /* extended every 2 s */
    wo.reclaim_ms = 50; /* it sweeps itself */
    wo.on_notice = note_attempt_notice;
    memset(attempt_notices, 0, sizeof attempt_notices);
    memset(attempt_jobs, 0, sizeof attempt_jobs);
    started = 0;
    timeout_notices = 0;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(wq, &wo, keep_by_attempt, NULL, &w));
    ASSERT(loop_until_cond(e.base, has_push_channel, e.rc, 10000));
    freeReplyObject(server_cmd(e.rc, "CLIENT KILL TYPE pubsub"));
    ASSERT_EQ(0, push_channels(e.rc, "tm"));
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "m";
    o.timeout_ms = 100;
    o.max_attempts = 2;
    o.backoff.type = RJQ_BACKOFF_FIXED;
    o.backoff.base_ms = 1;
    enqueue_opts(&e, "x", &o);
    /* both attempts run and time out; their messages go nowhere */
    stats_poll sp = {&e, {0}};
    ASSERT(loop_until_cond(e.base, has_dead, &sp, 6000));
    ASSERT_EQ(2, started);
    ASSERT(loop_until_cond(e.base, int_reached, &(int_poll){&timeout_notices, 2}, 6000));
    ASSERT_EQ(0, push_channels(e.rc, "tm")); /* it came with the extension */
    for (int a = 1; a <= 2; a++) {
        ASSERT_EQ(1, attempt_notices[a]);
        ASSERT_EQ(RJQ_ETIMEDOUT, attempt_reason[a]);
        late_calls = 0;
        ASSERT_OK(rjq_job_complete(attempt_jobs[a], "", 0, on_late, NULL));
        ASSERT(loop_until_count(e.base, &late_calls, 1, 5000));
        ASSERT_EQ(RJQ_ELEASELOST, late_status);
    }
    ASSERT_EQ(0, rjq_worker_count_running(w));
    rjq_client_free(wc);
    env_stop(&e);
}

/* Jobs by id (one letter), which worker ran them, and their notices. */
static rjq_job *by_id[26];
static int ran_by[26], id_notice[26];
static long id_notices;

static int id_slot(const rjq_job *job) {
    const char *id = rjq_job_get_id(job);
    ASSERT(id[0] >= 'a' && id[0] <= 'z' && id[1] == '\0');
    return id[0] - 'a';
}

/* Keeps every job (data: which worker, 1 or 2; worker 2 completes them). */
static void keep_by_id(rjq_job *job, void *data) {
    int k = id_slot(job), who = (int)(intptr_t)data;
    started++;
    ran_by[k] = who;
    by_id[k] = job;
    if (who == 2) ASSERT_OK(rjq_job_complete(job, "", 0, on_done_ok, &finished));
}

static void note_id_notice(rjq_job *job, int reason, void *data) {
    (void)data;
    id_notice[id_slot(job)] = reason;
    id_notices++;
}

static void on_worker_stopped(rjq_worker *w, int status, void *data) {
    (void)w;
    ASSERT_OK(status);
    (*(int *)data)++;
}

static void finish_late(rjq_job *job) {
    late_calls = 0;
    ASSERT_OK(rjq_job_complete(job, "", 0, on_late, NULL));
    ASSERT(loop_until_count(e_base_for_late, &late_calls, 1, 5000));
}

/* Regression (issue 31, item 5: "its slot is freed"): a handler that
 * ignores its RJQ_ETIMEDOUT notice and keeps the handle does not keep its
 * slot: with a concurrency of 1 the next job starts while the timed-out
 * one is still held. At most `concurrency` such handles are outstanding:
 * a second one timing out then keeps its slot (a job enqueued meanwhile
 * goes to another worker) until the first is finished; finishing them is
 * refused (RJQ_ELEASELOST), and a stop waits for them. */
TEST(timed_out_attempt_frees_its_slot_while_its_handle_is_held_up_to_the_concurrency) {
    test_env e;
    env_start(&e, "tf");
    e_base_for_late = e.base;
    rjq_worker_options wo = quiet_worker_options(1);
    wo.reclaim_ms = 100; /* it sweeps itself: the notice comes on its push channel */
    wo.on_notice = note_id_notice;
    memset(by_id, 0, sizeof by_id);
    memset(ran_by, 0, sizeof ran_by);
    memset(id_notice, 0, sizeof id_notice);
    started = finished = 0;
    id_notices = 0;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, keep_by_id, (void *)(intptr_t)1, &w));
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.timeout_ms = 200;
    o.max_attempts = 1;
    o.id = "a";
    enqueue_opts(&e, "x", &o);
    ASSERT(loop_until_count(e.base, &started, 1, 5000));
    o.id = "b";
    enqueue_opts(&e, "x", &o); /* waits: the only slot is a's */
    /* a times out; its slot frees while its handle is held: b starts */
    ASSERT(loop_until_count(e.base, &started, 2, 5000));
    ASSERT_EQ(1, ran_by['b' - 'a']);
    ASSERT_EQ(RJQ_ETIMEDOUT, id_notice[0]);
    ASSERT_EQ(RJQ_ETIMEDOUT, rjq_job_get_notice(by_id[0]));
    ASSERT_EQ(2, rjq_worker_count_running(w)); /* handed out, not finished */

    /* b times out too: one handle is already held beyond the concurrency,
     * so b keeps its slot; c goes to a second worker */
    ASSERT(loop_until_count(e.base, &id_notices, 2, 5000));
    ASSERT_EQ(RJQ_ETIMEDOUT, id_notice[1]);
    (void)get_stats(e.base, e.q); /* a round trip: a claim of the tick went before */
    enqueue_x_ok(e.base, e.q, "c", 0, 0);
    rjq_client *c2 = client_for(e.base, &e.s);
    rjq_worker *w2;
    rjq_worker_options wo2 = quiet_worker_options(1);
    ASSERT_OK(rjq_worker_start(queue_for(c2, "tf"), &wo2, keep_by_id, (void *)(intptr_t)2, &w2));
    ASSERT(loop_until_count(e.base, &finished, 1, 5000));
    ASSERT_EQ(2, ran_by['c' - 'a']);
    ASSERT_EQ(3, started);
    int stopped2 = 0;
    ASSERT_OK(rjq_worker_stop(w2, on_worker_stopped, &stopped2));
    ASSERT(loop_until(e.base, &stopped2, 5000));

    /* a finished (refused): b's slot frees, d starts on the first worker */
    finish_late(by_id[0]);
    ASSERT_EQ(RJQ_ELEASELOST, late_status);
    ASSERT_EQ(1, rjq_worker_count_running(w));
    enqueue_x_ok(e.base, e.q, "d", 0, 0);
    ASSERT(loop_until_count(e.base, &started, 4, 5000));
    ASSERT_EQ(1, ran_by['d' - 'a']);

    /* a stop waits for every handle handed out, the timed-out one too */
    int stopped = 0;
    ASSERT_OK(rjq_worker_stop(w, on_worker_stopped, &stopped));
    finish_late(by_id['d' - 'a']);
    ASSERT_OK(late_status);
    ASSERT_EQ(0, stopped);
    finish_late(by_id[1]);
    ASSERT_EQ(RJQ_ELEASELOST, late_status);
    ASSERT(loop_until(e.base, &stopped, 5000));
    ASSERT_EQ(2, id_notices); /* told once each */
    info_wait i = get_info(e.base, e.q, "a");
    ASSERT_STREQ("dead", i.state);
    ASSERT_STREQ("timed out after 200 ms", i.error);
    rjq_client_free(c2);
    env_stop(&e);
}

static rjq_close_report close_report;
static int closes;

static void on_client_closed(const rjq_close_report *r, void *data) {
    (void)data;
    close_report = *r;
    closes++;
}

/* A timed-out handle held (its slot freed) when the client closes: the
 * close lets go of it at its deadline without handing the job back (its
 * timeout's failure stands), and completing it afterwards returns
 * RJQ_ECLOSED and frees it. */
TEST(timed_out_handle_held_through_a_close_is_let_go_not_handed_back) {
    test_env e;
    env_start(&e, "tc");
    e_base_for_late = e.base;
    rjq_client *wc = client_for(e.base, &e.s);
    rjq_worker_options wo = quiet_worker_options(1);
    wo.reclaim_ms = 100;
    wo.on_notice = note_id_notice;
    memset(by_id, 0, sizeof by_id);
    memset(id_notice, 0, sizeof id_notice);
    started = 0;
    id_notices = 0;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(queue_for(wc, "tc"), &wo, keep_by_id, (void *)(intptr_t)1, &w));
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.timeout_ms = 100;
    o.max_attempts = 1;
    o.id = "a";
    enqueue_opts(&e, "x", &o);
    ASSERT(loop_until_count(e.base, &id_notices, 1, 5000));
    closes = 0;
    ASSERT_OK(rjq_client_close(wc, 100, on_client_closed, NULL));
    ASSERT(loop_until(e.base, &closes, 5000));
    ASSERT_OK(close_report.status);
    ASSERT_EQ(0, (long)close_report.handed_back);
    ASSERT_EQ(RJQ_ECLOSED, rjq_job_complete(by_id[0], "", 0, NULL, NULL));
    ASSERT(loop_until_cond(e.base, a_is_dead, &e, 10000));
    env_stop(&e);
}

static rjq_client *free_in_notice; /* the client the notice below frees */

static void notice_then_free_client(rjq_job *job, int reason, void *data) {
    (void)data;
    held_job = job;
    timeout_reason = reason;
    id_notices++;
    rjq_client_free(free_in_notice);
}

/* The client freed from inside the timeout notice (after the notice freed
 * the job's slot, which asked for a claim): nothing is claimed or leaked,
 * and the handle, let go of, is freed by its completion (RJQ_ECLOSED). */
TEST(client_freed_from_inside_a_timeout_notice_leaks_nothing) {
    test_env e;
    env_start(&e, "tx");
    rjq_client *wc = client_for(e.base, &e.s);
    free_in_notice = wc;
    rjq_worker_options wo = quiet_worker_options(1);
    wo.reclaim_ms = 100;
    wo.on_notice = notice_then_free_client;
    started = 0;
    id_notices = 0;
    held_job = NULL;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(queue_for(wc, "tx"), &wo, keep_handler, NULL, &w));
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "a";
    o.timeout_ms = 100;
    o.max_attempts = 1;
    enqueue_opts(&e, "x", &o);
    ASSERT(loop_until_count(e.base, &id_notices, 1, 5000));
    ASSERT_EQ(RJQ_ETIMEDOUT, timeout_reason);
    enqueue_x_ok(e.base, e.q, "b", 0, 0); /* (a round trip: the loop ran on) */
    ASSERT_EQ(1, started);
    ASSERT_EQ(RJQ_ECLOSED, rjq_job_complete(held_job, "", 0, NULL, NULL));
    env_stop(&e);
}

/* The other side of the refusal above: a lease that merely ran out (as
 * for a worker paused longer than its lease) with no sweep or other worker
 * having taken the job since still accepts its holder's completion, the
 * fencing token shows nobody else ran it; for a job with a timeout too,
 * while its run time is not over. */
TEST(completion_after_the_lease_ran_out_with_nobody_else_holding_the_job_is_accepted) {
    test_env e;
    env_start(&e, "te");
    rjq_worker_options wo = quiet_worker_options(1); /* lease 30 s, no sweep */
    started = 0;
    held_job = NULL;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, keep_handler, NULL, &w));
    rjq_job_options plain = RJQ_JOB_OPTIONS_INIT, timed = RJQ_JOB_OPTIONS_INIT;
    plain.id = "p";
    timed.id = "t";
    timed.timeout_ms = 60000;
    const rjq_job_options *opts[2] = {&plain, &timed};
    for (int k = 0; k < 2; k++) {
        enqueue_opts(&e, "x", opts[k]);
        ASSERT(loop_until_count(e.base, &started, k + 1, 5000));
        ASSERT_STREQ(opts[k]->id, rjq_job_get_id(held_job));
        /* its lease ended a second ago, by the server's clock */
        freeReplyObject(server_cmd(e.rc, "ZADD t:{te}:active XX %lld %s", server_now_ms(e.rc) - 1000,
                                   opts[k]->id));
        late_calls = 0;
        ASSERT_OK(rjq_job_complete(held_job, "r", 1, on_late, NULL));
        ASSERT(loop_until_count(e.base, &late_calls, 1, 5000));
        ASSERT_OK(late_status);
        info_wait i = get_info(e.base, e.q, opts[k]->id);
        ASSERT_STREQ("completed", i.state);
        ASSERT_STREQ("r", i.result);
    }
    env_stop(&e);
}
