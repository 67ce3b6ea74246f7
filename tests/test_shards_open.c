/*
 * A plain rjq_queue_open handle learns its queue's shard layout before
 * its first request (issue 35 "every client that opens the queue learns
 * it", docs/sharding.md section 2): calls made on it at once, before the
 * declaration is read, are held and then routed to the right shard, and
 * nothing goes to the unsharded keys of a sharded queue; when the read
 * fails, the held calls' callbacks get its error, once each.
 */
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

#define IDS 60
#define ANON 30

typedef struct tally {
    long done, ok, calls;
} tally;

static void on_enq(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    tally *t = data;
    (void)c, (void)jobs, (void)n;
    t->done++;
    if (status == RJQ_OK) t->ok++;
}

/* The keys under the unsharded queue's tag: only its declaration. */
typedef struct drain {
    long done;
    int runs[IDS + ANON];
    int per_shard[6];
    rjq_queue *learnt;
} drain;

static void drain_handler(rjq_job *job, void *data) {
    drain *d = data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    int n = -1;
    ASSERT(sscanf(p, "p-%d", &n) == 1 && n >= 0 && n < IDS + ANON);
    d->runs[n]++;
    for (int i = 0; i < rjq_queue_count_shards(d->learnt); i++)
        if (strcmp(rjq_queue_get_name(rjq_job_get_queue(job)),
                   rjq_queue_get_name(rjq_queue_get_shard(d->learnt, i))) == 0)
            d->per_shard[i]++;
    ASSERT_OK(rjq_job_complete(job, NULL, 0, on_done_ok, &d->done));
}

TEST(plain_open_routes_calls_made_before_the_layout_is_read) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *decl = open_learnt(e.base, e.c, "sho");
    ASSERT_OK(declare_shards(e.base, decl, 6));

    /* a producer opens the queue with rjq_queue_open and enqueues at once,
     * in the same turn (its client not even connected yet) */
    rjq_client_options o = client_options(e.s.url);
    rjq_client *p = client_new(e.base, &o);
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(p, "sho", NULL, &q));
    static char ids[IDS][16], pay[IDS + ANON][16];
    tally t = {0};
    for (int i = 0; i < IDS + ANON; i++) {
        snprintf(pay[i], sizeof pay[i], "p-%d", i);
        rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
        if (i < IDS) {
            snprintf(ids[i], sizeof ids[i], "id-%d", i);
            jo.id = ids[i];
        }
        ASSERT_OK(rjq_enqueue(q, pay[i], strlen(pay[i]), i < IDS ? &jo : NULL, on_enq, &t));
    }
    /* a stats read made before the layout is known, too */
    stats_wait sw = {0};
    ASSERT_OK(rjq_queue_get_stats(q, on_stats_wait, &sw));
    if (!loop_until_count(e.base, &t.done, IDS + ANON, 20000))
        FAIL_AT(__FILE__, __LINE__, "%ld of %d enqueues answered", t.done, IDS + ANON);
    ASSERT_EQ(IDS + ANON, t.ok);
    ASSERT(loop_until(e.base, &sw.done, 20000));
    ASSERT_OK(sw.status);
    ASSERT_EQ(6, rjq_queue_count_shards(q));
    /* each id on its own shard, as the learnt handle routes it */
    for (int i = 0; i < IDS; i++) {
        int want = -1;
        for (int k = 0; k < 6; k++) {
            info_wait w = get_info(e.base, rjq_queue_get_shard(decl, k), ids[i]);
            if (w.status == RJQ_OK) want = k;
        }
        ASSERT(want >= 0);
        ASSERT_EQ(want, shard_holding(e.base, decl, ids[i]));
        /* the shard rjq_queue_get_job on the learnt handle asks */
        ASSERT_OK(get_info(e.base, decl, ids[i]).status);
    }
    ASSERT_EQ(IDS + ANON, get_stats(e.base, decl).ready);
    server_assert_only_declaration(e.rc, "sho");

    /* a worker started through rjq_queue_open at once drains every shard */
    rjq_client *wc = client_new(e.base, &o);
    rjq_queue *wq;
    ASSERT_OK(rjq_queue_open(wc, "sho", NULL, &wq));
    static drain d;
    memset(&d, 0, sizeof d);
    d.learnt = decl;
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 4;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(wq, &wo, drain_handler, &d, &w));
    ASSERT(w != NULL);
    if (!loop_until_count(e.base, &d.done, IDS + ANON, 30000))
        FAIL_AT(__FILE__, __LINE__, "%ld of %d jobs done", d.done, IDS + ANON);
    for (int i = 0; i < IDS + ANON; i++) ASSERT_EQ(1, d.runs[i]);
    for (int i = 0; i < 6; i++) ASSERT(d.per_shard[i] > 0);
    rjq_stats st = get_stats(e.base, wq);
    ASSERT_EQ(IDS + ANON, st.completed);
    ASSERT_EQ(0, st.ready + st.active + st.delayed);
    server_assert_only_declaration(e.rc, "sho");
    worker_stop_wait(e.base, w);
    rjq_client_free(wc);
    rjq_client_free(p);
    env_stop(&e);
}

/* A plain queue's handle from rjq_queue_open works as before: its calls
 * made at once go to its own keys, and a worker started at once runs. */
TEST(plain_open_of_an_unsharded_queue_acts_on_its_keys) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(e.c, "plain_q", NULL, &q));
    tally t = {0};
    ASSERT_OK(rjq_enqueue(q, "p-0", 3, NULL, on_enq, &t));
    static drain d;
    memset(&d, 0, sizeof d);
    rjq_queue *lq = open_learnt(e.base, e.c, "plain_q");
    ASSERT_EQ(1, rjq_queue_count_shards(lq));
    d.learnt = lq;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, NULL, drain_handler, &d, &w));
    ASSERT(loop_until_count(e.base, &d.done, 1, 20000));
    ASSERT_EQ(1, t.ok);
    ASSERT_EQ(1, d.runs[0]);
    ASSERT_EQ(1, rjq_queue_count_shards(q));
    ASSERT_EQ(1, get_stats(e.base, q).completed);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* The declaration cannot be read (one this library does not read): every
 * call held gets RJQ_EPROTO, once; nothing is written; a worker started
 * meanwhile and stopped ends with its stop callback, once. */
TEST(plain_open_read_failure_gives_each_held_call_the_error_once) {
    test_env e;
    env_start(&e, NULL);
    redisReply *r = server_cmd(e.rc, "SET t:{shbad}:shards %s", "rjq-shards 1 3 a b");
    freeReplyObject(r);
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(e.c, "shbad", NULL, &q));
    tally t = {0};
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.id = "x";
    ASSERT_OK(rjq_enqueue(q, "p-0", 3, &jo, on_enq, &t));
    ASSERT_OK(rjq_enqueue(q, "p-1", 3, NULL, on_enq, &t));
    stats_wait sw = {0};
    ASSERT_OK(rjq_queue_get_stats(q, on_stats_wait, &sw));
    count_wait pw = {0};
    ASSERT_OK(rjq_queue_pause(q, on_count, &pw));
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, NULL, never_runs, NULL, &w));
    ASSERT(loop_until_count(e.base, &t.done, 2, 20000));
    ASSERT(loop_until(e.base, &sw.done, 20000));
    ASSERT(loop_until(e.base, &pw.done, 20000));
    ASSERT_EQ(0, t.ok);
    ASSERT_EQ(RJQ_EPROTO, sw.status);
    ASSERT_EQ(RJQ_EPROTO, pw.status);
    ASSERT_EQ(RJQ_EBUSY, rjq_queue_close(q)); /* (the worker still counts) */
    stop_wait s = {0};
    ASSERT_OK(rjq_worker_stop(w, on_stop_wait, &s));
    ASSERT(loop_until(e.base, &s.done, 20000));
    ASSERT_OK(s.status);
    /* a later call reads again, and gets the error again */
    ASSERT_OK(rjq_enqueue(q, "p-2", 3, NULL, on_enq, &t));
    ASSERT(loop_until_count(e.base, &t.done, 3, 20000));
    loop_turn(e.base);
    ASSERT_EQ(3, t.done);
    ASSERT_EQ(1, sw.done);
    ASSERT_EQ(1, pw.done);
    ASSERT_EQ(1, s.done);
    r = server_cmd(e.rc, "KEYS t:{shbad}:*");
    ASSERT_EQ(1, (long)r->elements);
    freeReplyObject(r);
    ASSERT_OK(rjq_queue_close(q));
    env_stop(&e);
}

/* The client freed while the read is in flight: every held call's
 * callback gets RJQ_ECANCELED, once; a held worker goes with it. */
TEST(plain_open_client_freed_while_reading_cancels_held_calls_once) {
    test_env e;
    env_start(&e, NULL);
    rjq_client_options o = client_options(e.s.url);
    rjq_client *c = client_new(e.base, &o);
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(c, "shfree", NULL, &q));
    tally t = {0};
    ASSERT_OK(rjq_enqueue(q, "p-0", 3, NULL, on_enq, &t));
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, NULL, never_runs, NULL, &w));
    stop_wait s = {0};
    ASSERT_OK(rjq_worker_stop(w, on_stop_wait, &s));
    rjq_client_free(c);
    ASSERT_EQ(1, t.done);
    ASSERT_EQ(0, t.ok);
    ASSERT_EQ(1, s.done);
    ASSERT_EQ(RJQ_ECANCELED, s.status);
    env_stop(&e);
}


static void on_cancel_state_wait(rjq_client *c, int status, const char *state, void *data) {
    (void)c, (void)state;
    ASSERT_OK(status);
    (*(int *)data)++;
}

typedef struct hold_job {
    rjq_job *job;
    int started;
} hold_job;

static void keep_handler(rjq_job *job, void *data) {
    hold_job *h = data;
    h->job = job;
    h->started = 1;
}

/* Changing N (issue 35: "refused unless it is empty"): a job delayed in
 * a shard, or running, refuses another count (RJQ_EBUSY, nothing
 * changes); once it completed the change is taken. */
TEST(changing_the_shard_count_is_refused_while_a_job_is_delayed_or_running) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "sh_busy");
    ASSERT_OK(declare_shards(e.base, q, 3));
    enqueue_x_ok(e.base, q, "later", 3600000, 0); /* delayed an hour */
    ASSERT_EQ(1, get_stats(e.base, q).delayed);
    ASSERT_EQ(RJQ_EBUSY, declare_shards(e.base, q, 4));
    ASSERT_EQ(3, rjq_queue_count_shards(q));
    int done = 0;
    ASSERT_OK(rjq_queue_cancel(q, "later", on_cancel_state_wait, &done));
    ASSERT(loop_until(e.base, &done, 10000));

    /* a running job */
    enqueue_x_ok(e.base, q, "running", 0, 0);
    static hold_job h;
    memset(&h, 0, sizeof h);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, NULL, keep_handler, &h, &w));
    ASSERT(loop_until(e.base, &h.started, 10000));
    ASSERT_EQ(1, get_stats(e.base, q).active);
    ASSERT_EQ(RJQ_EBUSY, declare_shards(e.base, q, 2));
    ASSERT_EQ(3, rjq_queue_count_shards(q));
    long completed = 0;
    ASSERT_OK(rjq_job_complete(h.job, NULL, 0, on_done_ok, &completed));
    ASSERT(loop_until_count(e.base, &completed, 1, 10000));
    worker_stop_wait(e.base, w);
    ASSERT_OK(declare_shards(e.base, q, 2));
    ASSERT_EQ(2, rjq_queue_count_shards(q));
    /* a client opening it now learns 2 */
    rjq_queue *q2;
    ASSERT_OK(rjq_queue_open(e.c, "sh_busy", NULL, &q2));
    get_stats(e.base, q2);
    ASSERT_EQ(2, rjq_queue_count_shards(q2));
    env_stop(&e);
}

/* rjq_queue_set_limits made on an rjq_queue_open handle at once, before
 * its layout is read, is held and then split over the shards as on a
 * handle that knows it (rjq.h "Sharded queues"): each shard gets its
 * share, and nothing is written under the unsharded queue's tag. */
TEST(set_limits_right_after_open_is_split_over_the_shards) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *decl = open_learnt(e.base, e.c, "shl");
    ASSERT_OK(declare_shards(e.base, decl, 3));
    rjq_client_options o = client_options(e.s.url);
    rjq_client *p = client_new(e.base, &o);
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(p, "shl", NULL, &q));
    rjq_limits lim = RJQ_LIMITS_INIT;
    lim.concurrency = 10;
    lim.rate = 30;
    count_wait cw = {0};
    ASSERT_OK(rjq_queue_set_limits(q, &lim, on_count, &cw));
    ASSERT(loop_until(e.base, &cw.done, 20000));
    ASSERT_OK(cw.status);
    ASSERT_EQ(1, cw.done);
    ASSERT_EQ(1, cw.n);
    ASSERT_EQ(3, rjq_queue_count_shards(q));
    long conc = 0, rate = 0;
    for (int i = 0; i < 3; i++) {
        rjq_stats st = get_stats(e.base, rjq_queue_get_shard(decl, i));
        ASSERT_EQ(i == 0 ? 4 : 3, st.limit_concurrency);
        ASSERT_EQ(10, st.limit_rate);
        conc += st.limit_concurrency;
        rate += st.limit_rate;
    }
    ASSERT_EQ(10, conc);
    ASSERT_EQ(30, rate);
    server_assert_only_declaration(e.rc, "shl");
    rjq_client_free(p);
    env_stop(&e);
}

#define MON_JOBS 30

typedef struct mon_seen {
    rjq_monitor *m;
    long enqueued[MON_JOBS], events;
} mon_seen;

static void on_mon_event(rjq_client *c, const char *ev, const char *id, void *data) {
    mon_seen *s = data;
    int i;
    (void)c;
    if (strcmp(ev, "enqueued") != 0) return;
    ASSERT(sscanf(id, "m-%d", &i) == 1 && i >= 0 && i < MON_JOBS);
    s->enqueued[i]++;
    s->events++;
}

/* rjq_queue_monitor made on an rjq_queue_open handle at once, before its
 * layout is read, returns its handle then and monitors every shard once
 * the layout is read (rjq.h "Sharded queues"): each shard's events reach
 * it, and nothing is written under the unsharded queue's tag. */
TEST(monitor_right_after_open_receives_every_shards_events) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *decl = open_learnt(e.base, e.c, "shm");
    ASSERT_OK(declare_shards(e.base, decl, 3));
    rjq_client_options o = client_options(e.s.url);
    rjq_client *p = client_new(e.base, &o);
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(p, "shm", NULL, &q));
    static mon_seen s;
    memset(&s, 0, sizeof s);
    ASSERT_OK(rjq_queue_monitor(q, on_mon_event, &s, &s.m));
    ASSERT(s.m != NULL);
    for (int i = 0; i < 3; i++)
        wait_monitoring(e.base, p, rjq_queue_get_name(rjq_queue_get_shard(decl, i)));
    ASSERT_EQ(3, rjq_queue_count_shards(q));
    for (int i = 0; i < MON_JOBS; i++) {
        char id[16];
        snprintf(id, sizeof id, "m-%d", i);
        enqueue_x_ok(e.base, decl, id, 0, 0);
    }
    for (int k = 0; k < 3; k++) /* every shard has some of them */
        ASSERT(get_stats(e.base, rjq_queue_get_shard(decl, k)).ready > 0);
    if (!loop_until_count(e.base, &s.events, MON_JOBS, 20000))
        FAIL_AT(__FILE__, __LINE__, "%ld of %d enqueued events", s.events, MON_JOBS);
    for (int i = 0; i < MON_JOBS; i++) ASSERT_EQ(1, s.enqueued[i]);
    server_assert_only_declaration(e.rc, "shm");
    ASSERT_OK(rjq_monitor_stop(s.m));
    rjq_client_free(p);
    env_stop(&e);
}

/* A monitor and a monitor stopped, both made while the layout is read,
 * then the client freed before it answers: nothing leaks (ASan), no
 * event reaches the callback, and a limits call's callback gets
 * RJQ_ECANCELED once. */
TEST(monitor_and_limits_made_while_reading_end_with_the_client) {
    test_env e;
    env_start(&e, NULL);
    rjq_client_options o = client_options(e.s.url);
    rjq_client *c = client_new(e.base, &o);
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(c, "shmfree", NULL, &q));
    static mon_seen s1, s2;
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    ASSERT_OK(rjq_queue_monitor(q, on_mon_event, &s1, &s1.m));
    ASSERT_OK(rjq_queue_monitor(q, on_mon_event, &s2, &s2.m));
    ASSERT_OK(rjq_monitor_enable_resyncs(s1.m));
    ASSERT_OK(rjq_monitor_stop(s2.m));
    rjq_limits lim = RJQ_LIMITS_INIT;
    lim.concurrency = 2;
    count_wait cw = {0};
    ASSERT_OK(rjq_queue_set_limits(q, &lim, on_count, &cw));
    rjq_client_free(c);
    ASSERT_EQ(1, cw.done);
    ASSERT_EQ(RJQ_ECANCELED, cw.status);
    ASSERT_EQ(0, s1.events + s2.events);
    env_stop(&e);
}
