/*
 * The queue's history (rjq.h "History"): counts of separate processes
 * flushed into the same minute add up exactly; a handle with
 * history_flush_ms -1 writes none; rjq_queue_get_history's argument checks;
 * the retention: a day of minutes and 30 days of hours (the rings' sizes
 * and the keys' expiry).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

static void handler(rjq_job *job, void *data) {
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    (void)data;
    if (len == 3 && memcmp(p, "bad", 3) == 0)
        ASSERT_OK(rjq_job_fail(job, "bad", RJQ_FAIL_FATAL, -1, NULL, NULL));
    else ASSERT_OK(rjq_job_complete(job, NULL, 0, NULL, NULL));
}

static void on_control(evutil_socket_t fd, short what, void *arg) {
    char b[16];
    (void)what;
    if (read(fd, b, sizeof b) <= 0) *(int *)arg = 1; /* EOF: the parent is done */
}

/* A process with its own client: enqueues ok jobs and bad ones on queue
 * "hq", works the queue, and exits once the control pipe closes. */
static void run_child(const char *url, int ok, int bad, int control_fd) {
    signal(SIGABRT, SIG_DFL);
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(url);
    rjq_client *c = client_new(base, &o);
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.history_flush_ms = 50;
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(c, "hq", &qo, &q));
    for (int i = 0; i < ok + bad; i++) {
        enqueue_wait w = enqueue_job(base, q, i < ok ? "ok" : "bad", NULL);
        ASSERT_OK(w.status);
    }
    rjq_worker_options wo = quiet_worker_options(2);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, handler, NULL, &w));
    int stop = 0;
    struct event *ev = event_new(base, control_fd, EV_READ | EV_PERSIST, on_control, &stop);
    event_add(ev, NULL);
    while (!stop) event_base_loop(base, EVLOOP_ONCE);
    event_free(ev);
    worker_stop_wait(base, w);
    rjq_client_free(c);
    event_base_free(base);
    _exit(0);
}

typedef struct hist_read {
    int done, status;
    rjq_history_point sum; /* the points read, added up */
    size_t n;
    long long first_at, last_at;
} hist_read;

static void on_history(rjq_client *c, int status, const rjq_history_point *list, size_t n,
                       void *data) {
    hist_read *h = data;
    (void)c;
    h->status = status;
    h->n = n;
    memset(&h->sum, 0, sizeof h->sum);
    for (size_t i = 0; i < n; i++) {
        const rjq_history_point *p = rjq_history_point_get(list, i);
        if (i == 0) h->first_at = p->at_ms;
        if (i == n - 1) h->last_at = p->at_ms;
        h->sum.enqueued += p->enqueued;
        h->sum.completed += p->completed;
        h->sum.failed += p->failed;
        h->sum.run_sum_ms += p->run_sum_ms;
        for (int b = 0; b < RJQ_HISTORY_BUCKETS; b++) {
            h->sum.run[b] += p->run[b];
            h->sum.wait[b] += p->wait[b];
        }
    }
    h->done = 1;
}

/* The last `minutes` minutes of q's history, added up. */
static hist_read read_history(struct event_base *base, rjq_queue *q, long minutes) {
    hist_read h = {0};
    ASSERT_OK(rjq_queue_get_history(q, 60000, minutes, on_history, &h));
    ASSERT(loop_until(base, &h.done, 30000));
    ASSERT_OK(h.status);
    ASSERT_EQ(minutes, (long)h.n);
    ASSERT_EQ(60000LL * (minutes - 1), h.last_at - h.first_at);
    ASSERT_EQ(0, h.last_at % 60000);
    return h;
}

static long long sum_of(const long long *b) {
    long long s = 0;
    for (int i = 0; i < RJQ_HISTORY_BUCKETS; i++) s += b[i];
    return s;
}

typedef struct until_counts {
    struct event_base *base;
    rjq_queue *q;
    long long enqueued, finished;
} until_counts;

static int counts_reached(void *arg) {
    until_counts *u = arg;
    /* (the test may straddle a minute: the last 3 are read) */
    hist_read h = read_history(u->base, u->q, 3);
    return h.sum.enqueued >= u->enqueued && h.sum.completed + h.sum.failed >= u->finished;
}

TEST(two_processes_flushes_merge_into_one_bucket_with_exact_counts) {
    test_env e;
    env_start(&e, "hq");
    int control[2];
    ASSERT(pipe(control) == 0);
    pid_t pid[2];
    const int ok[2] = {20, 15}, bad[2] = {10, 5};
    for (int i = 0; i < 2; i++) {
        pid[i] = fork_child();
        if (pid[i] == 0) {
            close(control[1]);
            run_child(e.s.url, ok[i], bad[i], control[0]);
        }
    }
    close(control[0]);
    /* every job's outcome counted: 50 enqueued by two producers, 35
     * completed and 15 failed by two workers */
    until_counts u = {e.base, e.q, 50, 50};
    ASSERT(loop_until_cond(e.base, counts_reached, &u, 60000));
    hist_read h = read_history(e.base, e.q, 3);
    ASSERT_EQ(50, h.sum.enqueued);
    ASSERT_EQ(35, h.sum.completed);
    ASSERT_EQ(15, h.sum.failed);
    ASSERT_EQ(50, sum_of(h.sum.run));
    /* the rings are in the queue's slot, with their expiry */
    long long ttl = server_int(e.rc, "PTTL t:{hq}:hist:m");
    ASSERT(ttl > 0 && ttl <= 25LL * 3600000);
    ttl = server_int(e.rc, "PTTL t:{hq}:hist:h");
    ASSERT(ttl > 24LL * 3600000 && ttl <= 31LL * 24 * 3600000);
    /* the hours hold the same counts */
    hist_read hh = {0};
    ASSERT_OK(rjq_queue_get_history(e.q, 3600000, 2, on_history, &hh));
    ASSERT(loop_until(e.base, &hh.done, 30000));
    ASSERT_OK(hh.status);
    ASSERT_EQ(50, hh.sum.enqueued);
    ASSERT_EQ(35, hh.sum.completed);
    ASSERT_EQ(15, hh.sum.failed);
    close(control[1]);
    for (int i = 0; i < 2; i++) ASSERT_EQ(0, reap(pid[i], 60000));
    /* nothing was counted twice once they stopped */
    h = read_history(e.base, e.q, 3);
    ASSERT_EQ(50, h.sum.enqueued);
    ASSERT_EQ(50, h.sum.completed + h.sum.failed);
    env_stop(&e);
}

TEST(a_handle_with_history_off_writes_none) {
    test_env e;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.history_flush_ms = -1;
    env_start_queue(&e, "hoff", &qo);
    /* a second handle of another queue with history on, flushed every ms:
     * once its minute shows, the off handle's would have too */
    rjq_queue_options on = RJQ_QUEUE_OPTIONS_INIT;
    on.history_flush_ms = 1;
    rjq_queue *witness;
    ASSERT_OK(rjq_queue_open(e.c, "hon", &on, &witness));
    for (int i = 0; i < 5; i++) ASSERT_OK(enqueue_job(e.base, e.q, "ok", NULL).status);
    ASSERT_OK(enqueue_job(e.base, witness, "ok", NULL).status);
    until_counts u = {e.base, witness, 1, 0};
    ASSERT(loop_until_cond(e.base, counts_reached, &u, 30000));
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{hoff}:hist:m t:{hoff}:hist:h"));
    hist_read h = read_history(e.base, e.q, 3);
    ASSERT_EQ(0, h.sum.enqueued);
    env_stop(&e);
}

TEST(history_reads_refuse_bad_arguments) {
    test_env e;
    env_start(&e, "hbad");
    hist_read h = {0};
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_get_history(NULL, 60000, 1, on_history, &h));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_get_history(e.q, 60000, 1, NULL, &h));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_get_history(e.q, 60000, 0, on_history, &h));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_get_history(e.q, 60000, RJQ_HISTORY_MINUTES + 1, on_history, &h));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_get_history(e.q, 3600000, RJQ_HISTORY_HOURS + 1, on_history, &h));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_get_history(e.q, 1000, 1, on_history, &h));
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    rjq_queue *q;
    qo.history_flush_ms = -2;
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_open(e.c, "hbad2", &qo, &q));
    qo.history_flush_ms = 3600001;
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_open(e.c, "hbad2", &qo, &q));
    /* a full day of an empty queue: every minute there, zeros */
    h = read_history(e.base, e.q, RJQ_HISTORY_MINUTES);
    ASSERT_EQ(0, h.sum.enqueued + h.sum.completed + h.sum.failed);
    /* a value this library cannot read is refused, not guessed */
    long long now_min = server_now_ms(e.rc) / 60000;
    redisReply *r = server_cmd(e.rc, "HSET t:{hbad}:hist:m %lld %s", now_min % 1440, "garbage");
    freeReplyObject(r);
    hist_read g = {0};
    ASSERT_OK(rjq_queue_get_history(e.q, 60000, 2, on_history, &g));
    ASSERT(loop_until(e.base, &g.done, 30000));
    ASSERT_EQ(RJQ_EPROTO, g.status);
    env_stop(&e);
}

/* A value of the history as history.lua stores it: "<at> <counts>", with
 * `enqueued` the first count and every other count 0. */
static void plant(redisContext *rc, const char *key, long long slot, long long at, long long enqueued) {
    char v[512];
    int len = snprintf(v, sizeof v, "%lld %lld", at, enqueued);
    for (int i = 1; i < 5 + 2 * RJQ_HISTORY_BUCKETS; i++) len += snprintf(v + len, sizeof v - len, " 0");
    freeReplyObject(server_cmd(rc, "HSET %s %lld %s", key, slot, v));
}

typedef struct ends_read {
    int done, status;
    size_t n;
    long long at[2], enqueued[2], last_at, total;
} ends_read;

static void on_ends(rjq_client *c, int status, const rjq_history_point *list, size_t n, void *data) {
    ends_read *r = data;
    (void)c;
    r->status = status;
    r->n = n;
    for (size_t i = 0; i < n; i++) {
        const rjq_history_point *p = rjq_history_point_get(list, i);
        if (i < 2) r->at[i] = p->at_ms, r->enqueued[i] = p->enqueued;
        r->last_at = p->at_ms;
        r->total += p->enqueued;
    }
    r->done = 1;
}

/* Plant, at the oldest step a full read covers (a day of minutes, 30 days
 * of hours), a value of that step (kept: read as the first point) and, in
 * the next slot, a value one lap older (past the retention: read as an
 * empty step), then read the whole range; again when the step turned
 * meanwhile. */
static ends_read oldest_steps(test_env *e, const char *key, long step, long slots) {
    for (int tries = 0; tries < 5; tries++) {
        long long now = server_now_ms(e->rc) / step;
        plant(e->rc, key, (now - slots + 1) % slots, now - slots + 1, 7);
        plant(e->rc, key, (now - slots + 2) % slots, now - slots + 2 - slots, 1000);
        ends_read r = {0};
        ASSERT_OK(rjq_queue_get_history(e->q, step, slots, on_ends, &r));
        ASSERT(loop_until(e->base, &r.done, 30000));
        ASSERT_OK(r.status);
        ASSERT_EQ(slots, (long)r.n);
        if (r.last_at != now * step) continue; /* (the step turned: again) */
        ASSERT_EQ((now - slots + 1) * step, r.at[0]);
        ASSERT_EQ((now - slots + 2) * step, r.at[1]);
        return r;
    }
    ASSERT(0);
    return (ends_read){0};
}

/* The retention the issue asks for: 24 h at one minute, 30 days at one
 * hour. A flush's keys expire a day (minutes) and 30 days (hours) after
 * it, plus the hour they end in; a read of the whole range gets the
 * oldest minute (hour) still kept, and a value a lap older, which the
 * ring's slot still holds, as an empty one. */
TEST(history_keeps_a_day_of_minutes_and_30_days_of_hours) {
    test_env e;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.history_flush_ms = 1;
    env_start_queue(&e, "hret", &qo);
    ASSERT_EQ(1440, RJQ_HISTORY_MINUTES);
    ASSERT_EQ(720, RJQ_HISTORY_HOURS);
    ASSERT_OK(enqueue_job(e.base, e.q, "ok", NULL).status);
    ASSERT(loop_until_server_int(e.base, e.rc, 2, 30000, "EXISTS t:{hret}:hist:m t:{hret}:hist:h"));
    long long day = 24LL * 3600000, hour = 3600000;
    long long ttl_m = server_int(e.rc, "PTTL t:{hret}:hist:m");
    long long ttl_h = server_int(e.rc, "PTTL t:{hret}:hist:h");
    ASSERT(ttl_m > day && ttl_m <= day + hour);
    ASSERT(ttl_h > 30 * day && ttl_h <= 30 * day + hour);
    ends_read m = oldest_steps(&e, "t:{hret}:hist:m", 60000, RJQ_HISTORY_MINUTES);
    ASSERT_EQ(7, m.enqueued[0]);
    ASSERT_EQ(0, m.enqueued[1]);
    ASSERT_EQ(8, m.total); /* (and the job enqueued now) */
    ends_read h = oldest_steps(&e, "t:{hret}:hist:h", 3600000, RJQ_HISTORY_HOURS);
    ASSERT_EQ(7, h.enqueued[0]);
    ASSERT_EQ(0, h.enqueued[1]);
    ASSERT_EQ(8, h.total);
    env_stop(&e);
}
