/*
 * The deprecated names (rjq.h "Deprecated names", README "Naming"): each
 * old name is still there and is the function its new name gives: the
 * accessors return the same thing, the requests answer the same. This file
 * calls every old name (the one place in the tree that may, with
 * -Wdeprecated-declarations silenced here alone); tests/deprecated_warns.sh
 * checks that using one warns. /work/wt/rename-verbs.sh leaves this file
 * alone.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif

/* ---- the accessors ------------------------------------------------------ */

typedef struct batch_seen {
    int done, status;
    size_t n;
} batch_seen;

static void on_batch(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    batch_seen *b = data;
    (void)c;
    b->status = status;
    b->n = n;
    for (size_t i = 0; i < n; i++) {
        ASSERT(rjq_enqueued_at(jobs, i) == rjq_enqueued_get(jobs, i));
        ASSERT(rjq_enqueued_at(jobs, i)->id[0] != '\0');
    }
    b->done = 1;
}

/* What the handler saw, by both names. */
typedef struct job_seen {
    int done;
    rjq_worker *w;
    int running_old, running_new;
} job_seen;

static void handle(rjq_job *job, void *data) {
    job_seen *s = data;
    size_t len_old = 0, len_new = 1;
    ASSERT(rjq_job_id(job) == rjq_job_get_id(job));
    ASSERT_STREQ("dn-1", rjq_job_id(job));
    ASSERT(rjq_job_payload(job, &len_old) == rjq_job_get_payload(job, &len_new));
    ASSERT_EQ(len_new, len_old);
    ASSERT_EQ(2, len_old);
    ASSERT_EQ(rjq_job_get_attempt(job), rjq_job_attempt(job));
    ASSERT_EQ(1, rjq_job_attempt(job));
    ASSERT_EQ(rjq_job_get_max_attempts(job), rjq_job_max_attempts(job));
    ASSERT_EQ(4, rjq_job_max_attempts(job));
    ASSERT(rjq_job_token(job) == rjq_job_get_token(job));
    ASSERT(rjq_job_token(job) != NULL && rjq_job_token(job)[0] != '\0');
    ASSERT(rjq_job_worker(job) == rjq_job_get_worker(job));
    ASSERT(rjq_job_worker(job) != NULL);
    ASSERT(rjq_job_queue(job) == rjq_job_get_queue(job));
    ASSERT(rjq_job_queue(job) != NULL);
    ASSERT_EQ(rjq_job_get_notice(job), rjq_job_notice(job));
    ASSERT_EQ(0, rjq_job_notice(job));
    s->running_old = rjq_worker_running(rjq_job_worker(job));
    s->running_new = rjq_worker_count_running(rjq_job_worker(job));
    /* the old name reports progress: the await below gets it */
    ASSERT_OK(rjq_job_progress(job, "half", 4));
    ASSERT_OK(rjq_job_complete(job, "ok", 2, on_done_ok, NULL));
    s->done = 1;
}

typedef struct await_seen {
    int done, status, progressed;
    char progress[16];
} await_seen;

static void on_progress(rjq_client *c, const char *id, const void *progress, size_t len,
                        void *data) {
    await_seen *a = data;
    (void)c;
    (void)id;
    snprintf(a->progress, sizeof a->progress, "%.*s", (int)len, (const char *)progress);
    a->progressed = 1;
}

static void on_awaited(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    await_seen *a = data;
    (void)c;
    (void)o;
    a->status = status;
    a->done = 1;
}

typedef struct monitor_seen {
    rjq_monitor *m;
    int resyncs, enqueued;
    long long time_old, time_new;
} monitor_seen;

static void on_event(rjq_client *c, const char *event, const char *id, void *data) {
    monitor_seen *s = data;
    (void)c;
    (void)id;
    if (strcmp(event, "resync") == 0) s->resyncs++;
    if (strcmp(event, "enqueued") == 0) {
        s->time_old = rjq_monitor_time(s->m);
        s->time_new = rjq_monitor_get_time(s->m);
        s->enqueued++;
    }
}

TEST(old_accessor_names_return_what_the_new_ones_do) {
    test_env e;
    env_start(&e, "dn");
    /* client and queue */
    int mark;
    rjq_client_set_data(e.c, &mark);
    ASSERT(rjq_client_data(e.c) == &mark);
    ASSERT(rjq_client_data(e.c) == rjq_client_get_data(e.c));
    ASSERT_EQ(1, rjq_client_connected(e.c));
    ASSERT_EQ(rjq_client_is_connected(e.c), rjq_client_connected(e.c));
    ASSERT(rjq_client_errmsg(e.c) == rjq_client_get_errmsg(e.c));
    ASSERT(rjq_client_errmsg(NULL) == rjq_client_get_errmsg(NULL));
    ASSERT_EQ(rjq_tls_is_available(), rjq_tls_available());
    ASSERT_STREQ("dn", rjq_queue_name(e.q));
    ASSERT(rjq_queue_name(e.q) == rjq_queue_get_name(e.q));
    ASSERT(rjq_queue_client(e.q) == e.c);
    ASSERT(rjq_queue_client(e.q) == rjq_queue_get_client(e.q));
    ASSERT(rjq_queue_slot(e.q) >= 0 && rjq_queue_slot(e.q) <= 16383);
    ASSERT_EQ(rjq_queue_get_slot(e.q), rjq_queue_slot(e.q));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_slot(NULL));

    /* a monitor, resyncs asked by the old name */
    monitor_seen ms = {0};
    ASSERT_OK(rjq_queue_monitor(e.q, on_event, &ms, &ms.m));
    ASSERT_OK(rjq_monitor_resyncs(ms.m));
    WAIT_FOR(e.base, ms.resyncs >= 1, 5000);

    /* a batch: its ids read by both names */
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.id = "dn-1";
    jo.max_attempts = 4;
    rjq_job_options jo2 = RJQ_JOB_OPTIONS_INIT;
    jo2.id = "dn-2";
    jo2.delay_ms = 3600 * 1000; /* stays delayed: the worker gets dn-1 alone */
    rjq_enqueue_item items[2] = {RJQ_ENQUEUE_ITEM_INIT, RJQ_ENQUEUE_ITEM_INIT};
    items[0].payload = "p1";
    items[0].len = 2;
    items[0].opts = &jo;
    items[1].payload = "p2";
    items[1].len = 2;
    items[1].opts = &jo2;
    batch_seen b = {0};
    ASSERT_OK(rjq_enqueue_batch(e.q, items, 2, on_batch, &b));
    ASSERT(loop_until(e.base, &b.done, 5000));
    ASSERT_OK(b.status);
    ASSERT_EQ(2, b.n);
    WAIT_FOR(e.base, ms.enqueued >= 1, 5000);
    ASSERT(ms.time_old > 0);
    ASSERT_EQ(ms.time_new, ms.time_old);
    /* an await, counted by both names; registered on the server before
     * the job runs (progress is published only to registered awaits) */
    await_seen aw = {0};
    rjq_await_options ao = RJQ_AWAIT_OPTIONS_INIT;
    ao.on_progress = on_progress;
    ASSERT_EQ(0, rjq_client_awaits(e.c));
    ASSERT_OK(rjq_queue_await(e.q, "dn-1", &ao, on_awaited, &aw, NULL));
    ASSERT_EQ(1, rjq_client_awaits(e.c));
    ASSERT_EQ(rjq_client_count_awaits(e.c), rjq_client_awaits(e.c));
    WAIT_FOR(e.base, server_int(e.rc, "HEXISTS t:{dn}:watchers dn-1") == 1, 5000);

    /* a worker: the job's accessors and the worker's count by both names */
    job_seen js = {0};
    rjq_worker_options wo = quiet_worker_options(1);
    ASSERT_OK(rjq_worker_start(e.q, &wo, handle, &js, &js.w));
    ASSERT_EQ(0, rjq_worker_running(js.w));
    ASSERT(loop_until(e.base, &js.done, 5000));
    ASSERT_EQ(1, js.running_old);
    ASSERT_EQ(js.running_new, js.running_old);
    ASSERT(loop_until(e.base, &aw.done, 5000));
    ASSERT_OK(aw.status);
    ASSERT_EQ(1, aw.progressed);
    ASSERT_STREQ("half", aw.progress);
    ASSERT_EQ(0, rjq_client_awaits(e.c));
    worker_stop_wait(e.base, js.w);
    ASSERT_OK(rjq_monitor_stop(ms.m));

    /* a scheduler: leading by both names */
    rjq_scheduler *s;
    ASSERT_OK(rjq_scheduler_start(e.q, 0, &s));
    WAIT_FOR(e.base, rjq_scheduler_leading(s), 5000);
    ASSERT_EQ(1, rjq_scheduler_is_leading(s));
    ASSERT_OK(rjq_scheduler_stop(s));
    env_stop(&e);
}

/* ---- the requests: old and new name, the same answer ---------------------- */

typedef struct answer {
    int done, status;
    int old; /* read the list with the old accessors */
    char text[2048];
} answer;

static void add(answer *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(answer *a, const char *fmt, ...) {
    size_t used = strlen(a->text);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->text + used, sizeof a->text - used, fmt, ap);
    va_end(ap);
}

static void on_stats(rjq_client *c, int status, const rjq_stats *s, void *data) {
    answer *a = data;
    (void)c;
    a->status = status;
    if (s)
        add(a, "enqueued=%lld completed=%lld failed=%lld dead=%lld ready=%lld delayed=%lld "
            "active=%lld dead_depth=%lld paused=%d exists=%d", s->enqueued, s->completed,
            s->failed, s->dead, s->ready, s->delayed, s->active, s->dead_depth, s->paused,
            s->exists);
    a->done = 1;
}

static void on_info(rjq_client *c, int status, const rjq_job_info *i, void *data) {
    answer *a = data;
    (void)c;
    a->status = status;
    if (i)
        add(a, "%s %s %d %d %.*s %s %lld", i->id, i->state, i->attempts, i->max_attempts,
            (int)i->payload_len, (const char *)i->payload, i->error ? i->error : "-",
            i->enqueued_ms);
    a->done = 1;
}

static void on_ids(rjq_client *c, int status, const char *const *ids, size_t n, void *data) {
    answer *a = data;
    (void)c;
    a->status = status;
    for (size_t i = 0; i < n; i++) add(a, "%s;", ids[i]);
    a->done = 1;
}

static void on_memory(rjq_client *c, int status, const rjq_memory_info *m, void *data) {
    answer *a = data;
    (void)c;
    a->status = status;
    /* (used_memory moves between two reads) */
    if (m) add(a, "%lld %s %d %d", m->maxmemory, m->maxmemory_policy, m->can_evict_jobs,
               m->used_memory > 0);
    a->done = 1;
}

static void on_masters(rjq_client *c, int status, const rjq_master *list, size_t n, void *data) {
    answer *a = data;
    (void)c;
    a->status = status;
    for (size_t i = 0; i < n; i++)
        add(a, "%s %zu %d %.*s;", list[i].address, list[i].nranges, list[i].status,
            (int)list[i].len, list[i].reply ? list[i].reply : "");
    a->done = 1;
}

/* The processes, read with the old accessors or the new (a->old). */
static void on_processes(rjq_client *c, int status, const rjq_process *list, size_t n,
                         void *data) {
    answer *a = data;
    int old = a->old;
    (void)c;
    a->status = status;
    for (size_t i = 0; i < n; i++) {
        const rjq_process *p = old ? rjq_process_at(list, i) : rjq_process_get(list, i);
        ASSERT(p == rjq_process_get(list, i));
        /* (alive_until_ms moves with every beat) */
        add(a, "%s %s %ld %lld %s:", p->id, p->host, p->pid, p->started_ms, p->name);
        for (size_t k = 0; k < p->nqueues; k++) {
            const rjq_process_queue *q =
                old ? rjq_process_queue_at(p->queues, k) : rjq_process_queue_get(p->queues, k);
            ASSERT(q == rjq_process_queue_get(p->queues, k));
            add(a, " %s %d", q->queue, q->concurrency);
        }
        add(a, ";");
    }
    a->done = 1;
}

static void on_schedules(rjq_client *c, int status, const rjq_schedule_info *list, size_t n,
                         void *data) {
    answer *a = data;
    int old = a->old;
    (void)c;
    a->status = status;
    for (size_t i = 0; i < n; i++) {
        const rjq_schedule_info *s =
            old ? rjq_schedule_info_at(list, i) : rjq_schedule_info_get(list, i);
        ASSERT(s == rjq_schedule_info_get(list, i));
        add(a, "%s %s %lld;", s->name, s->spec, s->next_ms);
    }
    a->done = 1;
}

static void wait_answer(test_env *e, answer *a) {
    ASSERT(loop_until(e->base, &a->done, 5000));
    ASSERT_OK(a->status);
}

/* The process list, read with the old accessors (old) or the new. */
static const char *processes(test_env *e, answer *a, int old) {
    memset(a, 0, sizeof *a);
    a->old = old;
    if (old)
        ASSERT_OK(rjq_client_processes(e->c, 0, 10, on_processes, a));
    else
        ASSERT_OK(rjq_client_list_processes(e->c, 0, 10, on_processes, a));
    wait_answer(e, a);
    return a->text;
}

/* The same answer by both names, and one that says something. */
static void same(const answer *old, const answer *new_, const char *has) {
    ASSERT_STREQ(new_->text, old->text);
    if (strstr(old->text, has) == NULL) FAIL_AT(__FILE__, __LINE__, "no \"%s\" in \"%s\"", has,
                                                old->text);
}

/* A handler that fails its job for good: it goes dead. */
static int failed;
static void fail_job(rjq_job *job, void *data) {
    (void)data;
    ASSERT_OK(rjq_job_fail(job, "boom", RJQ_FAIL_FATAL, -1, on_done_ok, NULL));
    failed = 1;
}

TEST(old_request_names_answer_as_the_new_ones_do) {
    test_env e;
    env_start(&e, "dq");
    enqueue_x_ok(e.base, e.q, "dq-dead", 0, 0);
    rjq_worker *w;
    rjq_worker_options wo = quiet_worker_options(2);
    failed = 0;
    ASSERT_OK(rjq_worker_start(e.q, &wo, fail_job, NULL, &w));
    ASSERT(loop_until(e.base, &failed, 5000));
    WAIT_FOR(e.base, get_stats(e.base, e.q).dead_depth == 1, 5000);
    enqueue_x_ok(e.base, e.q, "dq-later", 3600 * 1000, 0);
    rjq_schedule sc = RJQ_SCHEDULE_INIT;
    sc.every_ms = 3600 * 1000;
    sc.payload = "s";
    sc.len = 1;
    count_wait cw = {0};
    ASSERT_OK(rjq_schedule_set(e.q, "hourly", &sc, on_count, &cw));
    ASSERT(loop_until(e.base, &cw.done, 5000));
    ASSERT_OK(cw.status);

    /* while the worker runs, the process list has it (from its first beat) */
    answer o = {0}, n = {0};
    WAIT_FOR(e.base, strstr(processes(&e, &n, 0), " dq 2") != NULL, 5000);
    processes(&e, &o, 1);
    processes(&e, &n, 0);
    char pid[32];
    snprintf(pid, sizeof pid, " %ld ", (long)getpid());
    same(&o, &n, pid);
    worker_stop_wait(e.base, w);

    memset(&o, 0, sizeof o), memset(&n, 0, sizeof n);
    ASSERT_OK(rjq_queue_stats(e.q, on_stats, &o));
    wait_answer(&e, &o);
    ASSERT_OK(rjq_queue_get_stats(e.q, on_stats, &n));
    wait_answer(&e, &n);
    same(&o, &n, "ready=0 delayed=1 active=0 dead_depth=1");

    memset(&o, 0, sizeof o), memset(&n, 0, sizeof n);
    ASSERT_OK(rjq_queue_job(e.q, "dq-dead", on_info, &o));
    wait_answer(&e, &o);
    ASSERT_OK(rjq_queue_get_job(e.q, "dq-dead", on_info, &n));
    wait_answer(&e, &n);
    same(&o, &n, "dq-dead dead 1");
    memset(&o, 0, sizeof o);
    ASSERT_OK(rjq_queue_job(e.q, "no-such-job", on_info, &o));
    ASSERT(loop_until(e.base, &o.done, 5000));
    ASSERT_EQ(RJQ_ENOTFOUND, o.status);

    memset(&o, 0, sizeof o), memset(&n, 0, sizeof n);
    ASSERT_OK(rjq_queue_jobs(e.q, RJQ_STATE_DELAYED, 0, 10, on_ids, &o));
    wait_answer(&e, &o);
    ASSERT_OK(rjq_queue_list_jobs(e.q, RJQ_STATE_DELAYED, 0, 10, on_ids, &n));
    wait_answer(&e, &n);
    same(&o, &n, "dq-later;");

    memset(&o, 0, sizeof o), memset(&n, 0, sizeof n);
    ASSERT_OK(rjq_queue_dead(e.q, 0, 10, on_ids, &o));
    wait_answer(&e, &o);
    ASSERT_OK(rjq_queue_list_dead(e.q, 0, 10, on_ids, &n));
    wait_answer(&e, &n);
    same(&o, &n, "dq-dead;");

    memset(&o, 0, sizeof o), memset(&n, 0, sizeof n);
    ASSERT_OK(rjq_client_queues(e.c, NULL, 10, on_ids, &o));
    wait_answer(&e, &o);
    ASSERT_OK(rjq_client_list_queues(e.c, NULL, 10, on_ids, &n));
    wait_answer(&e, &n);
    same(&o, &n, "dq;");

    memset(&o, 0, sizeof o), memset(&n, 0, sizeof n);
    ASSERT_OK(rjq_client_memory(e.c, on_memory, &o));
    wait_answer(&e, &o);
    ASSERT_OK(rjq_client_get_memory(e.c, on_memory, &n));
    wait_answer(&e, &n);
    same(&o, &n, " 1"); /* used_memory > 0 */

    const char *argv[] = {"ECHO", "hello"};
    memset(&o, 0, sizeof o), memset(&n, 0, sizeof n);
    ASSERT_OK(rjq_client_masters(e.c, 2, argv, NULL, on_masters, &o));
    wait_answer(&e, &o);
    ASSERT_OK(rjq_client_send_to_masters(e.c, 2, argv, NULL, on_masters, &n));
    wait_answer(&e, &n);
    same(&o, &n, " 0 0 hello;"); /* standalone: no ranges, RJQ_OK, the echo */

    memset(&o, 0, sizeof o), memset(&n, 0, sizeof n);
    o.old = 1;
    ASSERT_OK(rjq_schedule_list(e.q, on_schedules, &o));
    wait_answer(&e, &o);
    ASSERT_OK(rjq_schedule_list(e.q, on_schedules, &n));
    wait_answer(&e, &n);
    same(&o, &n, "hourly every 3600000");
    env_stop(&e);
}
