/*
 * A worker of several queues (rjq_worker_start_queues, issue 32): strict
 * order (an earlier queue's job starts before a later queue's when a slot
 * frees), weighted order (starts follow the weights while every queue has
 * a backlog), a paused queue, and the stop of the whole worker.
 */
#include "failalloc.h"
#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

#define MAX_STARTS 8192

/* What the worker started, in order. */
typedef struct mq_log {
    int n;
    long started;             /* = n, for loop_until_count */
    rjq_queue *queue[MAX_STARTS];
    char ids[64][32];         /* the first 64 ids */
    rjq_job *held[64];        /* hold: jobs kept running */
    int nheld;
    int hold;                 /* keep jobs running instead of completing them */
    rjq_worker *w;
    long done;                /* completions answered */
} mq_log;

static void handler(rjq_job *job, void *data) {
    mq_log *l = data;
    ASSERT(l->n < MAX_STARTS);
    ASSERT(rjq_job_get_worker(job) == l->w); /* the one handle, whatever the queue */
    if (l->n < 64) snprintf(l->ids[l->n], sizeof l->ids[0], "%s", rjq_job_get_id(job));
    l->queue[l->n++] = rjq_job_get_queue(job);
    l->started = l->n;
    if (l->hold) {
        ASSERT(l->nheld < 64);
        l->held[l->nheld++] = job;
    } else {
        ASSERT_OK(rjq_job_complete(job, NULL, 0, on_done_ok, &l->done));
    }
}

static void on_stopped(rjq_worker *w, int status, void *data) {
    mq_log *l = data;
    ASSERT(w == l->w);
    ASSERT_OK(status);
    l->w = NULL;
}

/* Stop the worker and wait for its callback. */
static void stop_worker(test_env *e, mq_log *l) {
    ASSERT_OK(rjq_worker_stop(l->w, on_stopped, l));
    ASSERT_EQ(RJQ_EBUSY, rjq_worker_stop(l->w, on_stopped, l));
    WAIT_FOR(e->base, l->w == NULL, 20000);
    ASSERT(l->w == NULL);
}

/* n jobs "<prefix><i>" on q, in one batch call. */
static void enqueue_many(test_env *e, rjq_queue *q, const char *prefix, int n) {
    for (int at = 0; at < n;) {
        int k = n - at < 500 ? n - at : 500;
        static rjq_job_options o[500];
        static rjq_enqueue_item it[500];
        static char ids[500][32];
        for (int i = 0; i < k; i++) {
            snprintf(ids[i], sizeof ids[i], "%s%d", prefix, at + i);
            o[i] = (rjq_job_options){.size = sizeof(rjq_job_options), .id = ids[i]};
            it[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), "x", 1, &o[i]};
        }
        enqueue_wait r = {0};
        ASSERT_OK(rjq_enqueue_batch(q, it, (size_t)k, on_enqueue_wait, &r));
        ASSERT(loop_until(e->base, &r.done, 30000));
        ASSERT_OK(r.status);
        ASSERT_EQ(k, r.n);
        at += k;
    }
}

static rjq_queue *open_queue(test_env *e, const char *name) {
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(e->c, name, NULL, &q));
    return q;
}

/* A fresh log (holding its jobs if hold) and a strict worker of first,
 * then second, started on it. */
static void start_strict(mq_log *l, int hold, rjq_queue *first, rjq_queue *second,
                         const rjq_worker_options *wo) {
    memset(l, 0, sizeof *l);
    l->hold = hold;
    rjq_queue *qs[] = {first, second};
    ASSERT_OK(rjq_worker_start_queues(qs, 2, RJQ_WORKER_STRICT, NULL, wo, handler, l, &l->w));
}

/* With both slots of a strict worker taken by :low jobs, a :high job
 * enqueued meanwhile is the next job started when one slot frees. The
 * worker's first claim of :high came back empty and registered its slots,
 * so the enqueue pushes the job to the worker, which has no room: it hands
 * it back (state ready again). Then the worker knows of it, and the freed
 * slot must go to :high, not to the :low backlog. */
TEST(strict_high_job_is_next_when_a_slot_frees) {
    test_env e;
    env_start(&e, "mq_low");
    rjq_queue *low = e.q, *high = open_queue(&e, "mq_high");
    enqueue_many(&e, low, "l", 6);
    static mq_log l;
    rjq_worker_options wo = quiet_worker_options(2);
    start_strict(&l, 1, high, low, &wo);
    ASSERT(loop_until_count(e.base, &l.started, 2, 10000));
    ASSERT(l.queue[0] == low && l.queue[1] == low);
    ASSERT_EQ(2, rjq_worker_count_running(l.w));

    enqueue_x_ok(e.base, high, "h", 0, 0);
    /* pushed, refused for want of a slot, handed back */
    WAIT_FOR(e.base, strcmp(get_info(e.base, high, "h").state, "ready") == 0, 10000);
    ASSERT_EQ(2, l.n);

    /* free one slot: the :high job starts, on its first attempt */
    ASSERT_OK(rjq_job_complete(l.held[0], NULL, 0, on_done_ok, &l.done));
    ASSERT(loop_until_count(e.base, &l.started, 3, 10000));
    ASSERT(l.queue[2] == high);
    ASSERT_STREQ("h", l.ids[2]);
    ASSERT_EQ(1, rjq_job_get_attempt(l.held[2]));
    /* nothing else started: both slots are taken */
    ASSERT(loop_until_count(e.base, &l.done, 1, 10000));
    get_stats(e.base, low);
    ASSERT_EQ(3, l.n);

    /* the rest of :low runs once the slots free */
    l.hold = 0;
    ASSERT_OK(rjq_job_complete(l.held[1], NULL, 0, on_done_ok, &l.done));
    ASSERT_OK(rjq_job_complete(l.held[2], NULL, 0, on_done_ok, &l.done));
    ASSERT(loop_until_count(e.base, &l.started, 7, 10000));
    ASSERT(loop_until_count(e.base, &l.done, 7, 10000));
    for (int k = 3; k < 7; k++) ASSERT(l.queue[k] == low);
    stop_worker(&e, &l);
    env_stop(&e);
}

/* Strict order with backlogs in both: every :high job starts before any
 * :low job (the worker starts after the enqueues). */
TEST(strict_runs_earlier_queue_backlog_first) {
    test_env e;
    env_start(&e, "mq_low");
    rjq_queue *low = e.q, *high = open_queue(&e, "mq_high");
    enqueue_many(&e, low, "l", 50);
    enqueue_many(&e, high, "h", 50);
    static mq_log l;
    rjq_worker_options wo = quiet_worker_options(4);
    start_strict(&l, 0, high, low, &wo);
    ASSERT(loop_until_count(e.base, &l.done, 100, 30000));
    for (int k = 0; k < 50; k++) ASSERT(l.queue[k] == high);
    for (int k = 50; k < 100; k++) ASSERT(l.queue[k] == low);
    stop_worker(&e, &l);
    env_stop(&e);
}

/* Weights 3:1 with a backlog in both queues: of the first 3000 starts,
 * each queue's share is within 10% of its weight's. */
TEST(weighted_starts_follow_weights) {
    test_env e;
    env_start(&e, "mq_a");
    rjq_queue *a = e.q, *b = open_queue(&e, "mq_b");
    enqueue_many(&e, a, "a", 3000);
    enqueue_many(&e, b, "b", 3000);
    static mq_log l;
    memset(&l, 0, sizeof l);
    rjq_worker_options wo = quiet_worker_options(8);
    rjq_queue *qs[] = {a, b};
    int weights[] = {3, 1};
    ASSERT_OK(rjq_worker_start_queues(qs, 2, RJQ_WORKER_WEIGHTED, weights, &wo, handler, &l,
                                      &l.w));
    ASSERT(loop_until_count(e.base, &l.started, 3000, 60000));
    long na = 0, nb = 0;
    for (int k = 0; k < 3000; k++) {
        if (l.queue[k] == a) na++;
        else nb++;
    }
    fprintf(stderr, "weighted 3:1: %ld from a, %ld from b\n", na, nb);
    ASSERT(na >= 2250 * 9 / 10 && na <= 2250 * 11 / 10);
    ASSERT(nb >= 750 * 9 / 10 && nb <= 750 * 11 / 10);
    stop_worker(&e, &l);
    env_stop(&e);
}

static void on_count_ok(rjq_client *c, int status, long long n, void *data) {
    (void)c, (void)n;
    ASSERT_OK(status);
    (*(int *)data)++;
}

/* Pausing the first queue of a strict worker leaves it to the others; once
 * resumed, its jobs run. */
TEST(paused_queue_leaves_slots_to_the_others) {
    test_env e;
    env_start(&e, "mq_low");
    rjq_queue *low = e.q, *high = open_queue(&e, "mq_high");
    int paused = 0;
    ASSERT_OK(rjq_queue_pause(high, on_count_ok, &paused));
    ASSERT(loop_until(e.base, &paused, 10000));
    enqueue_many(&e, high, "h", 5);
    enqueue_many(&e, low, "l", 5);
    static mq_log l;
    rjq_worker_options wo = quiet_worker_options(2);
    start_strict(&l, 0, high, low, &wo);
    ASSERT(loop_until_count(e.base, &l.done, 5, 10000));
    for (int k = 0; k < 5; k++) ASSERT(l.queue[k] == low);
    get_stats(e.base, high);
    ASSERT_EQ(5, l.n);
    int resumed = 0;
    ASSERT_OK(rjq_queue_resume(high, on_count_ok, &resumed));
    ASSERT(loop_until_count(e.base, &l.done, 10, 10000));
    for (int k = 5; k < 10; k++) ASSERT(l.queue[k] == high);
    stop_worker(&e, &l);
    env_stop(&e);
}

/* Arguments out of range are refused and start nothing. */
TEST(start_queues_refuses_bad_arguments) {
    test_env e;
    env_start(&e, "mq_a");
    rjq_queue *a = e.q, *b = open_queue(&e, "mq_b");
    static mq_log l;
    rjq_worker *w = (rjq_worker *)&l;
    rjq_queue *dup[] = {a, a}, *two[] = {a, b};
    int zero[] = {3, 0}, ok[] = {3, 1};
    ASSERT_EQ(RJQ_EINVAL, rjq_worker_start_queues(dup, 2, RJQ_WORKER_STRICT, NULL, NULL, handler,
                                                  &l, &w));
    ASSERT(w == NULL);
    ASSERT_EQ(RJQ_EINVAL, rjq_worker_start_queues(two, 0, RJQ_WORKER_STRICT, NULL, NULL, handler,
                                                  &l, &w));
    ASSERT_EQ(RJQ_EINVAL, rjq_worker_start_queues(two, 2, RJQ_WORKER_WEIGHTED, NULL, NULL,
                                                  handler, &l, &w));
    ASSERT_EQ(RJQ_EINVAL, rjq_worker_start_queues(two, 2, RJQ_WORKER_WEIGHTED, zero, NULL,
                                                  handler, &l, &w));
    ASSERT_EQ(RJQ_EINVAL, rjq_worker_start_queues(two, 2, (rjq_worker_order)7, ok, NULL,
                                                  handler, &l, &w));
    ASSERT_EQ(RJQ_EINVAL, rjq_worker_start_queues(two, 2, RJQ_WORKER_WEIGHTED, ok, NULL, NULL,
                                                  &l, &w));
    env_stop(&e);
}

static void on_notice(rjq_job *job, int reason, void *data) {
    mq_log *l = data;
    ASSERT_EQ(RJQ_EJOBCANCELED, reason);
    ASSERT(rjq_job_get_queue(job) != NULL);
    snprintf(l->ids[63], sizeof l->ids[63], "%s", rjq_job_get_id(job));
    l->done += 100; /* counted apart from completions */
}

static void on_cancel(rjq_client *c, int status, const char *state, void *data) {
    (void)c, (void)state;
    ASSERT_OK(status);
    (*(int *)data)++;
}

static void on_done_refused(rjq_client *c, int status, void *data) {
    (void)c;
    ASSERT_EQ(RJQ_EJOBCANCELED, status);
    (*(int *)data)++;
}

/* A cancel of a running job of the second queue reaches the handler's
 * on_notice, and its completion is refused, as for a worker of one queue. */
TEST(cancel_notice_reaches_a_job_of_any_queue) {
    test_env e;
    env_start(&e, "mq_low");
    rjq_queue *low = e.q, *high = open_queue(&e, "mq_high");
    enqueue_many(&e, low, "l", 1);
    static mq_log l;
    rjq_worker_options wo = quiet_worker_options(2);
    wo.on_notice = on_notice;
    start_strict(&l, 1, high, low, &wo);
    ASSERT(loop_until_count(e.base, &l.started, 1, 10000));
    ASSERT(l.queue[0] == low);
    int cancelled = 0, refused = 0;
    ASSERT_OK(rjq_queue_cancel(low, "l0", on_cancel, &cancelled));
    ASSERT(loop_until_count(e.base, &l.done, 100, 10000));
    ASSERT_STREQ("l0", l.ids[63]);
    ASSERT(loop_until(e.base, &cancelled, 10000));
    ASSERT_OK(rjq_job_complete(l.held[0], NULL, 0, on_done_refused, &refused));
    ASSERT(loop_until(e.base, &refused, 10000));
    stop_worker(&e, &l);
    env_stop(&e);
}

static void on_stopped_cancelled(rjq_worker *w, int status, void *data) {
    (void)w;
    ASSERT_EQ(RJQ_ECANCELED, status);
    (*(int *)data)++;
}

/* Freeing the client with a worker of several queues running jobs of each
 * (one stop pending) frees it: the stop callback gets RJQ_ECANCELED once,
 * and the held jobs are detached (their completion says RJQ_ECLOSED). */
TEST(client_free_frees_a_worker_of_several_queues) {
    test_env e;
    env_start(&e, "mq_low");
    rjq_queue *low = e.q, *high = open_queue(&e, "mq_high");
    enqueue_many(&e, low, "l", 2);
    enqueue_many(&e, high, "h", 2);
    static mq_log l;
    rjq_worker_options wo = quiet_worker_options(4);
    start_strict(&l, 1, high, low, &wo);
    ASSERT(loop_until_count(e.base, &l.started, 4, 10000));
    ASSERT_EQ(4, rjq_worker_count_running(l.w));
    int stopped = 0;
    ASSERT_OK(rjq_worker_stop(l.w, on_stopped_cancelled, &stopped));
    rjq_client_free(e.c);
    e.c = NULL;
    ASSERT_EQ(1, stopped);
    for (int k = 0; k < 4; k++) {
        ASSERT(rjq_job_get_worker(l.held[k]) == NULL && rjq_job_get_queue(l.held[k]) == NULL);
        ASSERT_EQ(RJQ_ECLOSED, rjq_job_complete(l.held[k], NULL, 0, NULL, NULL));
    }
    env_stop(&e);
}

typedef struct close_wait {
    int done, status;
    size_t handed_back;
} close_wait;

static void on_closed(const rjq_close_report *r, void *data) {
    close_wait *w = data;
    w->done++;
    w->status = r->status;
    w->handed_back = r->handed_back;
}

/* A graceful close stops a worker of several queues: its running jobs of
 * each queue finish (their completions are sent), nothing more starts,
 * and the client is freed. */
TEST(close_lets_jobs_of_every_queue_finish) {
    test_env e;
    env_start(&e, "mq_low");
    rjq_queue *low = e.q, *high = open_queue(&e, "mq_high");
    enqueue_many(&e, low, "l", 3);
    enqueue_many(&e, high, "h", 1);
    static mq_log l;
    rjq_worker_options wo = quiet_worker_options(2);
    start_strict(&l, 1, high, low, &wo);
    ASSERT(loop_until_count(e.base, &l.started, 2, 10000));
    ASSERT(l.queue[0] == high && l.queue[1] == low);
    close_wait cw = {0};
    ASSERT_OK(rjq_client_close(e.c, 30000, on_closed, &cw));
    for (int k = 0; k < 2; k++) ASSERT_OK(rjq_job_complete(l.held[k], NULL, 0, on_done_ok, &l.done));
    ASSERT(loop_until(e.base, &cw.done, 30000));
    e.c = NULL;
    ASSERT_EQ(1, cw.done);
    ASSERT_OK(cw.status);
    ASSERT_EQ(0, cw.handed_back);
    ASSERT_EQ(2, l.done);
    ASSERT_EQ(2, l.n);
    /* both completions landed: one job of each queue is completed */
    for (int k = 0; k < 2; k++) {
        redisReply *r = server_cmd(e.rc, "LLEN t:{%s}:completed", k ? "mq_low" : "mq_high");
        ASSERT(r->type == REDIS_REPLY_INTEGER);
        ASSERT_EQ(1, r->integer);
        freeReplyObject(r);
    }
    env_stop(&e);
}

/* Out of memory at each allocation of rjq_worker_start_queues in turn: it
 * returns RJQ_ENOMEM with nothing of it left (ASan: no leak), or starts
 * (an allocation it can do without); then a worker of the same queues
 * starts and runs a job of each. */
TEST(start_queues_out_of_memory_leaves_nothing) {
    test_env e;
    env_start(&e, "mq_low");
    rjq_queue *low = e.q, *high = open_queue(&e, "mq_high");
    static mq_log l;
    rjq_worker_options wo = quiet_worker_options(2);
    rjq_queue *qs[] = {high, low};
    int weights[] = {2, 1};
    /* both layouts read first (a worker of a handle still reading its
     * layout is held: its start's allocations come later) */
    wait_layout_known(e.base, high);
    wait_layout_known(e.base, low);
    long n = 0;
    for (;; n++) {
        memset(&l, 0, sizeof l);
        failalloc_arm_once(n);
        int rc = rjq_worker_start_queues(qs, 2, RJQ_WORKER_WEIGHTED, weights, &wo, handler, &l,
                                         &l.w);
        failalloc_disarm();
        if (rc == RJQ_OK) {
            ASSERT(l.w != NULL);
            stop_worker(&e, &l);
        } else {
            ASSERT_EQ(RJQ_ENOMEM, rc);
            ASSERT(l.w == NULL);
        }
        if (failalloc_failures() == 0) break;
        ASSERT(n < 1000);
    }
    ASSERT(n > 5); /* it did fail allocations on the way */
    start_strict(&l, 0, high, low, &wo);
    enqueue_many(&e, low, "l", 1);
    enqueue_many(&e, high, "h", 1);
    ASSERT(loop_until_count(e.base, &l.done, 2, 10000));
    stop_worker(&e, &l);
    env_stop(&e);
}
