/*
 * Limits of a sharded queue hold for the queue as a whole (issue 35,
 * docs/sharding.md section 4), on a standalone server: a rate limit of
 * 1000/s over 3 shards starts 1000 +- 5% per second under load on every
 * shard (start times read from the server's clock; 300/s in the sanitized
 * build), a concurrency limit over 3 shards never has more active than the
 * whole queue's figure with 3 worker clients, a bounded queue's bound
 * holds as a whole, a dedup window holds across retries, and a monitor of
 * a sharded queue gets every shard's events.
 */
#include <event2/event.h>

#include "fixture.h"
#include "harness.h"
#include "rate_load.h"
#include "server.h"
#include "waits.h"

#define SHARDS 3

/* ---- rate ------------------------------------------------------------------------ */

#define RATE_WORKERS 3 /* worker processes (each of all the shards) */

static void complete_now(rjq_job *job, void *data) {
    (void)data;
    ASSERT_OK(rjq_job_complete(job, NULL, 0, NULL, NULL));
}

typedef struct completed_poll {
    redisContext *rc;
    rjq_queue *q;
} completed_poll;

/* Every job completed? (each shard's count of completed jobs kept, read from the server) */
static int all_completed(void *arg) {
    completed_poll *p = arg;
    long long n = 0;
    for (int i = 0; i < SHARDS; i++)
        n += server_int(p->rc, "HGET t:{%s}:stats retained",
                        rjq_queue_get_name(rjq_queue_get_shard(p->q, i)));
    return n >= RATE_JOBS;
}

TEST(rate_limit_of_1000_per_second_over_3_shards_starts_1000_per_second_within_5_percent) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "shl_rate");
    ASSERT_OK(declare_shards(e.base, q, SHARDS));

    /* the whole queue's figure, split 334 + 333 + 333 over the shards */
    ASSERT_EQ(1, limits_set(e.base, q, 0, RATE, 1000));
    rjq_stats st = get_stats(e.base, q);
    ASSERT_EQ(RATE, st.limit_rate);
    ASSERT_EQ(1000, st.limit_rate_window_ms);
    ASSERT_EQ(0, st.limit_concurrency);
    long shares = 0;
    for (int i = 0; i < SHARDS; i++) {
        long r = (long)get_stats(e.base, rjq_queue_get_shard(q, i)).limit_rate;
        ASSERT(r == RATE / SHARDS || r == RATE / SHARDS + 1);
        shares += r;
    }
    ASSERT_EQ(RATE, shares);

    /* load on every shard first (ids: each goes to its id's shard), then
     * worker processes of all the shards */
    static char ids[RATE_JOBS][RATE_ID_MAX];
    rate_enqueue_ids(e.base, q, ids, RATE_JOBS);
    for (int i = 0; i < SHARDS; i++) /* (a third each but for the hash's spread) */
        ASSERT(get_stats(e.base, rjq_queue_get_shard(q, i)).ready > RATE_JOBS / SHARDS * 9 / 10);
    pid_t pids[RATE_WORKERS];
    for (int k = 0; k < RATE_WORKERS; k++) pids[k] = rate_spawn_worker(&e.s, "shl_rate", SHARDS);
    completed_poll cp = {e.rc, q};
    double end = wait_deadline(120000);
    while (!all_completed(&cp)) ASSERT(wait_poll(e.base, end, 50));
    rate_kill_workers(pids, RATE_WORKERS);

    /* the promise, from each job's start time (the server's clock, as the
     * claim script recorded it): over RATE_WINDOW_MS from the first start,
     * RATE per second within 5% */
    char what[64];
    snprintf(what, sizeof what, "rate limit %d/s over %d shards", RATE, SHARDS);
    rate_figures f = rate_measure(e.base, q, ids, RATE_JOBS, 0, RATE_WINDOW_MS, what);
    ASSERT(f.most <= RATE); /* the shares add up to the whole: never more, in any second */
    ASSERT(f.per_s >= RATE * 0.95 && f.per_s <= RATE * 1.05);
    env_stop(&e);
}

/* ---- concurrency ----------------------------------------------------------------- */

#define CONC 7       /* split 3 + 2 + 2 */
#define CONC_JOBS 150
#define HOLD_MS 20   /* each job's work (a timer), so that jobs overlap */

typedef struct conc_log {
    struct event_base *base;
    long active, most, started, done;
} conc_log;

static conc_log held_log;

static void finish_held(evutil_socket_t fd, short what, void *arg) {
    rjq_job *job = arg;
    conc_log *l = &held_log;
    (void)fd, (void)what;
    l->active--; /* (before the completion is sent: inside the job's time active on the server) */
    ASSERT_OK(rjq_job_complete(job, NULL, 0, on_done_ok, &l->done));
}

static void held_handler(rjq_job *job, void *data) {
    conc_log *l = data;
    l->started++;
    if (++l->active > l->most) l->most = l->active;
    struct timeval tv = {0, HOLD_MS * 1000};
    ASSERT(event_base_once(l->base, -1, EV_TIMEOUT, finish_held, job, &tv) == 0);
}

TEST(concurrency_limit_over_3_shards_and_3_workers_never_has_more_active_than_the_whole_queue) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "shl_conc");
    ASSERT_OK(declare_shards(e.base, q, SHARDS));
    ASSERT_EQ(1, limits_set(e.base, q, CONC, 0, 0));
    ASSERT_EQ(CONC, get_stats(e.base, q).limit_concurrency);
    long shares = 0;
    for (int i = 0; i < SHARDS; i++) {
        long n = (long)get_stats(e.base, rjq_queue_get_shard(q, i)).limit_concurrency;
        ASSERT(n == CONC / SHARDS || n == CONC / SHARDS + 1);
        shares += n;
    }
    ASSERT_EQ(CONC, shares);
    /* a figure below the shard count cannot be split (a share of 0 is no limit) */
    rjq_limits low = RJQ_LIMITS_INIT;
    low.concurrency = SHARDS - 1;
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_set_limits(q, &low, NULL, NULL));
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "cannot be split") != NULL);
    low.concurrency = 0;
    low.rate = 1;
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_set_limits(q, &low, NULL, NULL));
    ASSERT_EQ(CONC, get_stats(e.base, q).limit_concurrency); /* unchanged */

    /* 3 worker clients, each of all the shards with 10 slots: 30 > 7 */
    conc_log *l = &held_log;
    memset(l, 0, sizeof *l);
    l->base = e.base;
    rjq_client *wc[3];
    rjq_worker *w[3];
    for (int k = 0; k < 3; k++) {
        wc[k] = client_for(e.base, &e.s);
        rjq_queue *qk = open_learnt(e.base, wc[k], "shl_conc");
        ASSERT_EQ(SHARDS, rjq_queue_count_shards(qk));
        rjq_worker_options wo = quiet_worker_options(10);
        ASSERT_OK(rjq_worker_start(qk, &wo, held_handler, l, &w[k]));
    }
    rate_enqueue_ids(e.base, q, NULL, CONC_JOBS);
    ASSERT(loop_until_count(e.base, &l->done, CONC_JOBS, 60000));
    for (int k = 0; k < 3; k++) worker_stop_wait(e.base, w[k]);
    fprintf(stderr, "concurrency %d over %d shards and 3 workers of 10: at most %ld active\n",
            CONC, SHARDS, l->most);
    ASSERT_EQ(CONC_JOBS, l->started);
    ASSERT(l->most <= CONC);
    /* and the shards' shares add up: more than any one shard's at once */
    ASSERT(l->most > CONC / SHARDS + 1);
    rjq_stats st = get_stats(e.base, q);
    ASSERT_EQ(CONC_JOBS, st.completed);

    /* lifted on every shard */
    ASSERT_EQ(1, limits_set(e.base, q, 0, 0, 0));
    for (int i = 0; i < SHARDS; i++)
        ASSERT_EQ(0, get_stats(e.base, rjq_queue_get_shard(q, i)).limit_concurrency);
    for (int k = 0; k < 3; k++) rjq_client_free(wc[k]);
    env_stop(&e);
}

/* ---- bounded size ---------------------------------------------------------------- */

TEST(bounded_sharded_queue_holds_its_bound_as_a_whole) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "shl_bound");
    ASSERT_OK(declare_shards(e.base, q, SHARDS));
    /* a producer with a bound of 10 learns the shards: 4 + 3 + 3 */
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.max_waiting = 10;
    open_wait ow = {0};
    ASSERT_OK(rjq_queue_open_async(e.c, "shl_bound", &qo, on_open_wait, &ow));
    ASSERT(loop_until(e.base, &ow.done, 20000));
    ASSERT_OK(ow.status);
    rjq_queue *bq = ow.q;
    ASSERT_EQ(SHARDS, rjq_queue_count_shards(bq));
    /* 20 anonymous jobs, one call each: exactly 10 taken, the rest refused */
    long counts[3] = {0};
    for (int i = 0; i < 20; i++)
        ASSERT_OK(rjq_enqueue(bq, "x", 1, NULL, on_enqueue_count, counts));
    ASSERT(loop_until_count(e.base, &counts[0], 20, 20000));
    ASSERT_EQ(10, counts[1]);
    ASSERT_EQ(10, counts[2]);
    ASSERT_EQ(10, get_stats(e.base, q).ready);
    for (int i = 0; i < SHARDS; i++) {
        long long r = get_stats(e.base, rjq_queue_get_shard(q, i)).ready;
        ASSERT(r == 10 / SHARDS || r == 10 / SHARDS + 1);
    }
    /* a job with an id goes to its id's shard, full too */
    ASSERT_EQ(RJQ_EFULL, enqueue_x(e.base, bq, "one-more", 0, 0).status);
    ASSERT_EQ(10, get_stats(e.base, q).ready);

    /* a bound below the shard count: one per shard (the whole queue's is N) */
    rjq_queue *q2 = open_learnt(e.base, e.c, "shl_bound2");
    ASSERT_OK(declare_shards(e.base, q2, SHARDS));
    qo.max_waiting = 2;
    memset(&ow, 0, sizeof ow);
    ASSERT_OK(rjq_queue_open_async(e.c, "shl_bound2", &qo, on_open_wait, &ow));
    ASSERT(loop_until(e.base, &ow.done, 20000));
    ASSERT_OK(ow.status);
    memset(counts, 0, sizeof counts);
    for (int i = 0; i < 6; i++)
        ASSERT_OK(rjq_enqueue(ow.q, "x", 1, NULL, on_enqueue_count, counts));
    ASSERT(loop_until_count(e.base, &counts[0], 6, 20000));
    ASSERT_EQ(SHARDS, counts[1]);
    ASSERT_EQ(SHARDS, get_stats(e.base, q2).ready);
    env_stop(&e);
}

/* ---- dedup ----------------------------------------------------------------------- */

static void on_cancel_ok(rjq_client *c, int status, const char *state, void *data) {
    (void)c, (void)state;
    ASSERT_OK(status);
    (*(int *)data)++;
}

static enqueue_wait enqueue_dedup(test_env *e, rjq_queue *q, const char *id) {
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = id;
    o.dedup_ms = 600000;
    return enqueue_job(e->base, q, "x", &o);
}

TEST(dedup_window_holds_on_a_sharded_queue_across_retries_from_another_client) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "shl_dedup");
    ASSERT_OK(declare_shards(e.base, q, SHARDS));
    rjq_client *c2 = client_for(e.base, &e.s);
    rjq_queue *q2 = open_learnt(e.base, c2, "shl_dedup");
    for (int i = 0; i < 30; i++) {
        char id[32];
        snprintf(id, sizeof id, "pay-%d", i);
        enqueue_wait a = enqueue_dedup(&e, q, id);
        ASSERT_OK(a.status);
        ASSERT_EQ(0, a.existed);
        /* the job finishes (cancelled) and its record is deleted: the id
         * stays reserved for dedup_ms, on its shard */
        int done = 0;
        ASSERT_OK(rjq_queue_cancel(q, id, on_cancel_ok, &done));
        ASSERT(loop_until(e.base, &done, 10000));
        count_wait d = {0};
        ASSERT_OK(rjq_queue_delete(q, id, on_count, &d));
        ASSERT(loop_until(e.base, &d.done, 10000));
        ASSERT_OK(d.status);
        ASSERT_EQ(1, d.n);
        ASSERT_EQ(RJQ_ENOTFOUND, get_info(e.base, q, id).status);
        /* retried, from another client: the same shard, so existed */
        for (int r = 0; r < 2; r++) {
            enqueue_wait b = enqueue_dedup(&e, q2, id);
            ASSERT_OK(b.status);
            ASSERT_EQ(1, b.existed);
        }
    }
    rjq_stats st = get_stats(e.base, q);
    ASSERT_EQ(0, st.ready + st.delayed + st.active); /* no retry wrote a job */
    ASSERT_EQ(30, st.enqueued);
    for (int s = 0; s < SHARDS; s++) /* the ids spread over the shards */
        ASSERT(get_stats(e.base, rjq_queue_get_shard(q, s)).enqueued > 0);
    rjq_client_free(c2);
    env_stop(&e);
}

/* ---- monitors -------------------------------------------------------------------- */

#define MON_JOBS 30

typedef struct mon_log {
    rjq_monitor *m;
    long enqueued[MON_JOBS], active[MON_JOBS], completed[MON_JOBS];
    long completions, paused, resumed;
    int bad_time;
} mon_log;

static void on_whole_event(rjq_client *c, const char *ev, const char *id, void *data) {
    mon_log *l = data;
    (void)c;
    if (strcmp(ev, "resync") != 0 && rjq_monitor_get_time(l->m) <= 0) l->bad_time = 1;
    if (strcmp(ev, "paused") == 0 || strcmp(ev, "resumed") == 0 || strcmp(ev, "resync") == 0) {
        if (ev[0] == 'p') l->paused++;
        if (ev[1] == 'e' && ev[2] == 's' && ev[3] == 'u') l->resumed++;
        return;
    }
    int i;
    ASSERT(sscanf(id, "m-%d", &i) == 1 && i >= 0 && i < MON_JOBS);
    if (strcmp(ev, "enqueued") == 0) l->enqueued[i]++;
    else if (strcmp(ev, "active") == 0) l->active[i]++;
    else if (strcmp(ev, "completed") == 0) {
        l->completed[i]++;
        l->completions++;
    }
}

TEST(monitor_on_a_sharded_queue_receives_every_shards_events) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "shl_mon");
    ASSERT_OK(declare_shards(e.base, q, SHARDS));
    static mon_log l;
    memset(&l, 0, sizeof l);
    ASSERT_OK(rjq_queue_monitor(q, on_whole_event, &l, &l.m));
    for (int i = 0; i < SHARDS; i++)
        wait_monitoring(e.base, e.c, rjq_queue_get_name(rjq_queue_get_shard(q, i)));
    /* a monitor holds its queue: closing it is refused until it stops */
    ASSERT_EQ(RJQ_EBUSY, rjq_queue_close(q));

    rjq_client *c2 = client_for(e.base, &e.s);
    rjq_queue *q2 = open_learnt(e.base, c2, "shl_mon");
    for (int i = 0; i < MON_JOBS; i++) {
        char id[16];
        snprintf(id, sizeof id, "m-%d", i);
        enqueue_x_ok(e.base, q2, id, 0, 0);
    }
    for (int s = 0; s < SHARDS; s++) /* every shard has some of them */
        ASSERT(get_stats(e.base, rjq_queue_get_shard(q, s)).ready > 0);
    rjq_worker_options wo = quiet_worker_options(4);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q2, &wo, complete_now, NULL, &w));
    ASSERT(loop_until_count(e.base, &l.completions, MON_JOBS, 20000));
    worker_stop_wait(e.base, w);
    for (int i = 0; i < MON_JOBS; i++) {
        ASSERT_EQ(1, l.enqueued[i]);
        ASSERT_EQ(1, l.active[i]);
        ASSERT_EQ(1, l.completed[i]);
    }
    ASSERT_EQ(0, l.bad_time); /* each event's server time, through the one handle */
    /* a whole-queue call: each shard's event */
    count_wait pw = {0};
    ASSERT_OK(rjq_queue_pause(q2, on_count, &pw));
    ASSERT(loop_until(e.base, &pw.done, 10000));
    ASSERT(loop_until_count(e.base, &l.paused, SHARDS, 10000));
    /* stopped: no shard's event comes to it any more (the flag is still
     * set, so the resume's events are published: the barrier has them
     * handed to the client's listeners) */
    ASSERT_OK(rjq_monitor_stop(l.m));
    memset(&pw, 0, sizeof pw);
    ASSERT_OK(rjq_queue_resume(q2, on_count, &pw));
    ASSERT(loop_until(e.base, &pw.done, 10000));
    ASSERT_EQ(1, pw.n);
    subscriber_barrier(e.base, e.c, e.rc);
    ASSERT_EQ(0, l.resumed);
    ASSERT_OK(rjq_queue_close(q));
    rjq_client_free(c2);
    env_stop(&e);
}

/* A monitor still running when its client is freed goes with it. */
TEST(monitor_on_a_sharded_queue_freed_with_its_client) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "shl_mon2");
    ASSERT_OK(declare_shards(e.base, q, SHARDS));
    static mon_log l;
    memset(&l, 0, sizeof l);
    ASSERT_OK(rjq_queue_monitor(q, on_whole_event, &l, &l.m));
    ASSERT_OK(rjq_monitor_enable_resyncs(l.m));
    wait_monitoring(e.base, e.c, rjq_queue_get_name(rjq_queue_get_shard(q, 0)));
    env_stop(&e); /* (ASan and valgrind tell a leak) */
}
