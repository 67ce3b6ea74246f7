/*
 * Sharded queues on a standalone server (issue 35, docs/sharding.md): the
 * declaration learnt by another client, a change of the shard count
 * refused unless the queue is empty, ids going to the shard of their hash
 * (so dedup holds across retries), a batch split over shards reporting
 * once with per-item results in order, one worker draining a 6-shard
 * queue with nothing lost or run twice, awaits answered once, stats
 * summed, and the calls that do not span shards refused.
 */
#include "failalloc.h"
#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

TEST(declaration_learnt_by_a_second_client) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "sh_decl");
    ASSERT_EQ(1, rjq_queue_count_shards(q));
    ASSERT(rjq_queue_get_shard(q, 0) == q);
    ASSERT(rjq_queue_get_shard(q, 1) == NULL);
    ASSERT_OK(declare_shards(e.base, q, 4));
    ASSERT_EQ(4, rjq_queue_count_shards(q)); /* the declaring handle takes it at once */

    rjq_client *c2 = client_for(e.base, &e.s);
    rjq_queue *q2 = open_learnt(e.base, c2, "sh_decl");
    ASSERT_EQ(4, rjq_queue_count_shards(q2));
    for (int i = 0; i < 4; i++) {
        const char *a = rjq_queue_get_name(rjq_queue_get_shard(q, i));
        ASSERT_STREQ(a, rjq_queue_get_name(rjq_queue_get_shard(q2, i)));
        for (int k = 0; k < i; k++)
            ASSERT(strcmp(a, rjq_queue_get_name(rjq_queue_get_shard(q, k))) != 0);
        char want[64];
        snprintf(want, sizeof want, "sh_decl~%d-0", i);
        ASSERT_STREQ(want, a);
    }
    /* the same count again changes nothing, also from another client */
    ASSERT_OK(declare_shards(e.base, q2, 4));
    ASSERT_EQ(4, rjq_queue_count_shards(q2));

    /* a plain rjq_queue_open handle learns it before its first request
     * (tests/test_shards_open.c) */
    rjq_queue *plain;
    ASSERT_OK(rjq_queue_open(c2, "sh_decl", NULL, &plain));
    get_stats(e.base, plain);
    ASSERT_EQ(4, rjq_queue_count_shards(plain));

    /* a declaration this library cannot read is refused, never guessed */
    redisReply *r = server_cmd(e.rc, "SET t:{sh_bad}:shards %s", "rjq-shards 1 3 a b");
    freeReplyObject(r);
    open_wait w = {0};
    ASSERT_OK(rjq_queue_open_async(c2, "sh_bad", NULL, on_open_wait, &w));
    ASSERT(loop_until(e.base, &w.done, 10000));
    ASSERT_EQ(RJQ_EPROTO, w.status);
    ASSERT(w.q == NULL);
    rjq_client_free(c2);
    env_stop(&e);
}

static void on_cancel_wait(rjq_client *c, int status, const char *state, void *data) {
    int *done = data;
    (void)c, (void)state;
    ASSERT_OK(status);
    (*done)++;
}

/* Cancel a waiting job (it no longer counts as ready). */
static void cancel_job(test_env *e, rjq_queue *q, const char *id) {
    int done = 0;
    ASSERT_OK(rjq_queue_cancel(q, id, on_cancel_wait, &done));
    ASSERT(loop_until(e->base, &done, 10000));
}

TEST(changing_the_shard_count_is_refused_unless_the_queue_is_empty) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "sh_change");
    /* the base queue has a job: no declaration */
    enqueue_x_ok(e.base, q, "before", 0, 0);
    ASSERT_EQ(RJQ_EBUSY, declare_shards(e.base, q, 3));
    ASSERT_EQ(1, rjq_queue_count_shards(q));
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "empty") != NULL);
    cancel_job(&e, q, "before");
    ASSERT_OK(declare_shards(e.base, q, 3));
    ASSERT_EQ(3, rjq_queue_count_shards(q));

    /* a job in a shard: no other count */
    enqueue_x_ok(e.base, q, "in-a-shard", 0, 0);
    ASSERT_EQ(RJQ_EBUSY, declare_shards(e.base, q, 5));
    ASSERT_EQ(3, rjq_queue_count_shards(q));
    ASSERT_OK(declare_shards(e.base, q, 3)); /* the same count: fine */
    int s = shard_holding(e.base, q, "in-a-shard");
    ASSERT(s >= 0);
    cancel_job(&e, rjq_queue_get_shard(q, s), "in-a-shard");
    ASSERT_OK(declare_shards(e.base, q, 5));
    ASSERT_EQ(5, rjq_queue_count_shards(q));
    ASSERT_OK(declare_shards(e.base, q, 1)); /* back to plain */
    ASSERT_EQ(1, rjq_queue_count_shards(q));
    redisReply *r = server_cmd(e.rc, "EXISTS t:{sh_change}:shards");
    ASSERT_EQ(0, r->integer);
    freeReplyObject(r);
    env_stop(&e);
}

TEST(ids_go_to_the_shard_of_their_hash_and_dedup_across_retries) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "sh_ids");
    ASSERT_OK(declare_shards(e.base, q, 6));
    rjq_client *c2 = client_for(e.base, &e.s);
    rjq_queue *q2 = open_learnt(e.base, c2, "sh_ids");
    int used[6] = {0};
    for (int i = 0; i < 60; i++) {
        char id[32];
        snprintf(id, sizeof id, "order-%d", i);
        enqueue_wait a = enqueue_x(e.base, q, id, 0, 0);
        ASSERT_OK(a.status);
        ASSERT_EQ(0, a.existed);
        /* a retry, from another client: the same shard, so it exists */
        enqueue_wait b = enqueue_x(e.base, q2, id, 0, 0);
        ASSERT_OK(b.status);
        ASSERT_EQ(1, b.existed);
        ASSERT_STREQ(id, b.id);
        int s = shard_holding(e.base, q, id);
        ASSERT(s >= 0);
        used[s]++;
    }
    for (int i = 0; i < 6; i++) ASSERT(used[i] > 0); /* spread over every shard */
    /* anonymous jobs: in turn over the shards */
    for (int i = 0; i < 12; i++) ASSERT_OK(enqueue_job(e.base, q, "anon", NULL).status);
    for (int i = 0; i < 6; i++) {
        rjq_stats st = get_stats(e.base, rjq_queue_get_shard(q, i));
        ASSERT_EQ(used[i] + 2, st.ready);
    }
    rjq_stats all = get_stats(e.base, q);
    ASSERT_EQ(72, all.ready);
    ASSERT_EQ(72, all.enqueued);
    ASSERT_EQ(1, all.exists);
    /* the base queue has nothing: no key under its tag but the declaration */
    redisReply *r = server_cmd(e.rc, "KEYS t:{sh_ids}:*");
    ASSERT_EQ(1, (long)r->elements);
    ASSERT_STREQ("t:{sh_ids}:shards", r->element[0]->str);
    freeReplyObject(r);
    rjq_client_free(c2);
    env_stop(&e);
}

typedef struct batch_wait {
    int done, status;
    size_t n;
    char ids[64][32];
    int existed[64];
} batch_wait;

static void on_batch(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    batch_wait *w = data;
    (void)c;
    w->done++;
    w->status = status;
    w->n = n;
    for (size_t i = 0; i < n && i < 64; i++) {
        snprintf(w->ids[i], sizeof w->ids[i], "%s", rjq_enqueued_get(jobs, i)->id);
        w->existed[i] = rjq_enqueued_get(jobs, i)->existed;
    }
}

TEST(a_batch_split_over_shards_reports_once_with_results_in_order) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "sh_batch");
    ASSERT_OK(declare_shards(e.base, q, 4));
    enqueue_x_ok(e.base, q, "b-7", 0, 0); /* one id exists already */
    rjq_job_options o[40];
    rjq_enqueue_item it[40];
    char ids[40][16];
    for (int i = 0; i < 40; i++) {
        o[i] = (rjq_job_options)RJQ_JOB_OPTIONS_INIT;
        snprintf(ids[i], sizeof ids[i], "b-%d", i);
        o[i].id = ids[i];
        it[i] = (rjq_enqueue_item)RJQ_ENQUEUE_ITEM_INIT;
        it[i].payload = ids[i];
        it[i].len = strlen(ids[i]);
        it[i].opts = i % 3 == 2 ? NULL : &o[i]; /* every third anonymous */
    }
    batch_wait w = {0};
    ASSERT_OK(rjq_enqueue_batch(q, it, 40, on_batch, &w));
    ASSERT(loop_until(e.base, &w.done, 10000));
    loop_turn(e.base);
    ASSERT_EQ(1, w.done);
    ASSERT_OK(w.status);
    ASSERT_EQ(40, w.n);
    for (int i = 0; i < 40; i++) {
        if (i % 3 == 2) {
            /* an id made by the library, on the shard it routes to (6a) */
            ASSERT(w.ids[i][0] == 'a' && shard_holding(e.base, q, w.ids[i]) >= 0);
            continue;
        }
        ASSERT_STREQ(ids[i], w.ids[i]);
        ASSERT_EQ(i == 7 ? 1 : 0, w.existed[i]);
        ASSERT(shard_holding(e.base, q, ids[i]) >= 0);
    }
    ASSERT_EQ(40, get_stats(e.base, q).ready); /* 26 ids (one existed) + 13 anonymous + b-7 */

    /* an invalid item: nothing sent, no callback */
    o[4].priority = RJQ_PRIORITY_MAX + 1;
    batch_wait w2 = {0};
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue_batch(q, it, 40, on_batch, &w2));
    ASSERT_EQ(40, get_stats(e.base, q).ready);
    ASSERT_EQ(0, w2.done);
    env_stop(&e);
}

#define DRAIN_JOBS 600

typedef struct drain_log {
    long started, done;
    int runs[DRAIN_JOBS];
    int per_shard[6];
    rjq_queue *q;
    rjq_worker *w;
} drain_log;

static void drain_handler(rjq_job *job, void *data) {
    drain_log *l = data;
    const char *id = rjq_job_get_id(job);
    int n = -1;
    ASSERT(sscanf(id, "d-%d", &n) == 1 || sscanf(rjq_job_get_payload(job, NULL), "d-%d", &n) == 1);
    ASSERT(n >= 0 && n < DRAIN_JOBS);
    l->runs[n]++;
    for (int i = 0; i < 6; i++)
        if (rjq_job_get_queue(job) == rjq_queue_get_shard(l->q, i)) l->per_shard[i]++;
    ASSERT(rjq_job_get_worker(job) == l->w);
    l->started++;
    ASSERT_OK(rjq_job_complete(job, NULL, 0, on_done_ok, &l->done));
}

TEST(one_worker_drains_a_six_shard_queue_nothing_lost_nothing_twice) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "sh_drain");
    ASSERT_OK(declare_shards(e.base, q, 6));
    static drain_log l;
    memset(&l, 0, sizeof l);
    l.q = q;
    rjq_worker_options wo = quiet_worker_options(4);
    ASSERT_OK(rjq_worker_start(q, &wo, drain_handler, &l, &l.w));
    /* half with ids, half anonymous (the payload names them) */
    static char names[DRAIN_JOBS][16];
    static rjq_job_options o[DRAIN_JOBS];
    static rjq_enqueue_item it[DRAIN_JOBS];
    for (int i = 0; i < DRAIN_JOBS; i++) {
        snprintf(names[i], sizeof names[i], "d-%d", i);
        o[i] = (rjq_job_options)RJQ_JOB_OPTIONS_INIT;
        o[i].id = names[i];
        it[i] = (rjq_enqueue_item)RJQ_ENQUEUE_ITEM_INIT;
        it[i].payload = names[i];
        it[i].len = strlen(names[i]);
        it[i].opts = i % 2 ? &o[i] : NULL;
    }
    for (int at = 0; at < DRAIN_JOBS; at += 100) {
        batch_wait w = {0};
        ASSERT_OK(rjq_enqueue_batch(q, it + at, 100, on_batch, &w));
        ASSERT(loop_until(e.base, &w.done, 10000));
        ASSERT_OK(w.status);
    }
    ASSERT(loop_until_count(e.base, &l.done, DRAIN_JOBS, 60000));
    for (int i = 0; i < DRAIN_JOBS; i++) ASSERT_EQ(1, l.runs[i]);
    for (int i = 0; i < 6; i++) ASSERT(l.per_shard[i] > 0);
    rjq_stats st = get_stats(e.base, q);
    ASSERT_EQ(DRAIN_JOBS, st.completed);
    ASSERT_EQ(0, st.ready + st.active + st.delayed);
    ASSERT(rjq_worker_count_running(l.w) == 0);
    worker_stop_wait(e.base, l.w);
    env_stop(&e);
}

typedef struct await_log {
    int done, status;
    char result[64];
} await_log;

static void on_awaited(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    await_log *a = data;
    (void)c;
    a->done++;
    a->status = status;
    if (o && status == RJQ_OK)
        snprintf(a->result, sizeof a->result, "%.*s", (int)o->result_len, (const char *)o->result);
}

static void echo_handler(rjq_job *job, void *data) {
    size_t len;
    const void *p = rjq_job_get_payload(job, &len);
    (void)data;
    ASSERT_OK(rjq_job_complete(job, p, len, NULL, NULL));
}

TEST(awaits_on_a_sharded_queue_are_answered_once) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "sh_await");
    ASSERT_OK(declare_shards(e.base, q, 3));
    rjq_worker *w;
    rjq_worker_options wo = quiet_worker_options(2);
    ASSERT_OK(rjq_worker_start(q, &wo, echo_handler, NULL, &w));
    static await_log a[12], byid[6];
    memset(a, 0, sizeof a);
    memset(byid, 0, sizeof byid);
    rjq_job_options o[12];
    char ids[12][16], payload[12][16];
    for (int i = 0; i < 12; i++) {
        o[i] = (rjq_job_options)RJQ_JOB_OPTIONS_INIT;
        snprintf(ids[i], sizeof ids[i], "aw-%d", i);
        snprintf(payload[i], sizeof payload[i], "p%d", i);
        o[i].id = i < 6 ? ids[i] : NULL;
        ASSERT_OK(rjq_enqueue_await(q, payload[i], strlen(payload[i]), &o[i], NULL, on_awaited,
                                    &a[i], NULL));
        /* the same job awaited by id too */
        if (i < 6) ASSERT_OK(rjq_queue_await(q, ids[i], NULL, on_awaited, &byid[i], NULL));
    }
    for (int i = 0; i < 12; i++) {
        ASSERT(loop_until(e.base, &a[i].done, 20000));
        ASSERT_OK(a[i].status);
        ASSERT_STREQ(payload[i], a[i].result);
    }
    for (int i = 0; i < 6; i++) {
        ASSERT(loop_until(e.base, &byid[i].done, 20000));
        ASSERT_OK(byid[i].status);
        ASSERT_STREQ(payload[i], byid[i].result);
    }
    /* a server-assigned id names a job of one shard: refused */
    await_log n = {0};
    ASSERT_EQ(RJQ_ESHARDED, rjq_queue_await(q, "1", NULL, on_awaited, &n, NULL));
    loop_turn(e.base);
    for (int i = 0; i < 12; i++) ASSERT_EQ(1, a[i].done);
    for (int i = 0; i < 6; i++) ASSERT_EQ(1, byid[i].done);
    ASSERT_EQ(0, n.done);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

static void on_cancelled(rjq_client *c, int status, const char *state, void *data) {
    (void)c, (void)status, (void)state, (void)data;
    FAIL_AT(__FILE__, __LINE__, "a refused call's callback ran");
}

TEST(calls_that_do_not_span_shards_refuse_a_sharded_handle) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "sh_refuse");
    ASSERT_OK(declare_shards(e.base, q, 2));
    count_wait w = {0};
    /* a server-assigned id: its shard cannot be known */
    ASSERT_EQ(RJQ_ESHARDED, rjq_queue_cancel(q, "123", on_cancelled, NULL));
    rjq_worker *wk;
    rjq_queue *qs[] = {q};
    int weight = 1;
    rjq_worker_options wo = quiet_worker_options(1);
    ASSERT_EQ(RJQ_ESHARDED, rjq_worker_start_queues(qs, 1, RJQ_WORKER_WEIGHTED, &weight, &wo,
                                                    echo_handler, NULL, &wk));
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "split into shards") != NULL);
    /* on a shard they work */
    ASSERT_OK(rjq_queue_pause(rjq_queue_get_shard(q, 0), on_count, &w));
    ASSERT(loop_until(e.base, &w.done, 10000));
    ASSERT_OK(w.status);
    ASSERT_EQ(1, get_stats(e.base, q).paused); /* summed: one shard paused */
    ASSERT_STREQ("RJQ_ESHARDED", rjq_err_name(RJQ_ESHARDED));
    env_stop(&e);
}

static void on_batch_never(rjq_client *c, int status, const char *id, void *data) {
    (void)c, (void)status, (void)id, (void)data;
    FAIL_AT(__FILE__, __LINE__, "a refused call's callback ran");
}

static void on_batches_never(rjq_client *c, int status, const rjq_batch_info *b, size_t n,
                             const char *next, void *data) {
    (void)c, (void)status, (void)b, (void)n, (void)next, (void)data;
    FAIL_AT(__FILE__, __LINE__, "a refused call's callback ran");
}

static void on_dependencies_never(rjq_client *c, int status, const rjq_dep_outcome *deps,
                                  size_t n, void *data) {
    (void)c, (void)status, (void)deps, (void)n, (void)data;
    FAIL_AT(__FILE__, __LINE__, "a refused call's callback ran");
}

static void on_dependents_never(rjq_client *c, int status, const rjq_dep *list, size_t n,
                                void *data) {
    (void)c, (void)status, (void)list, (void)n, (void)data;
    FAIL_AT(__FILE__, __LINE__, "a refused call's callback ran");
}

static void on_no_dependents(rjq_client *c, int status, const rjq_dep *list, size_t n,
                             void *data) {
    (void)c, (void)list;
    ASSERT_OK(status);
    ASSERT_EQ(0, (long)n);
    ++*(int *)data;
}

static void on_no_dependencies(rjq_client *c, int status, const rjq_dep_outcome *deps, size_t n,
                               void *data) {
    (void)c, (void)deps;
    ASSERT_OK(status);
    ASSERT_EQ(0, (long)n);
    ++*(int *)data;
}

/* The calls of batch.c acting on one queue's keys share one check
 * (rjq__queue_usable): a sharded handle is refused, naming the call, no
 * callback. The dependency reads by id go to the id's shard, as the other
 * calls by id (test_shards_deps.c): a server-assigned id is refused. */
TEST(batch_calls_refuse_a_sharded_handle_and_dependency_reads_go_to_the_ids_shard) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "sh_usable");
    ASSERT_OK(declare_shards(e.base, q, 2));
    ASSERT_EQ(RJQ_ESHARDED, rjq_batch_create(q, NULL, on_batch_never, NULL));
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "a batch call") != NULL);
    ASSERT_EQ(RJQ_ESHARDED, rjq_batch_list(q, NULL, NULL, 10, on_batches_never, NULL));
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "a batch call") != NULL);
    ASSERT_EQ(RJQ_ESHARDED, rjq_queue_get_dependencies(q, "17", on_dependencies_never, NULL));
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "server-assigned") != NULL);
    ASSERT_EQ(RJQ_ESHARDED, rjq_queue_get_dependents(q, "17", on_dependents_never, NULL));
    /* the argument checks come first */
    ASSERT_EQ(RJQ_EJOBID, rjq_queue_get_dependents(q, "", on_dependents_never, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_get_dependents(NULL, "j-1", on_dependents_never, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_get_dependencies(q, "j-1", NULL, NULL));
    loop_turn(e.base);
    int done = 0;
    ASSERT_OK(rjq_queue_get_dependents(q, "j-1", on_no_dependents, &done));
    ASSERT_OK(rjq_queue_get_dependencies(q, "j-1", on_no_dependencies, &done));
    WAIT_FOR(e.base, done == 2, 10000);
    loop_turn(e.base);
    ASSERT_EQ(2, done);
    env_stop(&e);
}

typedef struct cancel_wait {
    int done, status;
    char state[32];
} cancel_wait;

static void on_cancel_state(rjq_client *c, int status, const char *state, void *data) {
    cancel_wait *w = data;
    (void)c;
    w->done++;
    w->status = status;
    snprintf(w->state, sizeof w->state, "%s", state ? state : "");
}

static cancel_wait cancel_of(struct event_base *base, rjq_queue *q, const char *id) {
    cancel_wait w = {0};
    ASSERT_OK(rjq_queue_cancel(q, id, on_cancel_state, &w));
    ASSERT(loop_until(base, &w.done, 10000));
    return w;
}

/* Run a call answering with a count (started by the caller with on_count
 * and &w) to its callback, and check that it came once. */
static count_wait counted(struct event_base *base, int rc, count_wait *w) {
    ASSERT_OK(rc);
    ASSERT(loop_until(base, &w->done, 10000));
    loop_turn(base);
    ASSERT_EQ(1, w->done);
    return *w;
}

static void on_info_never(rjq_client *c, int status, const rjq_job_info *info, void *data) {
    (void)c, (void)status, (void)info, (void)data;
    FAIL_AT(__FILE__, __LINE__, "a refused call's callback ran");
}

static void fatal_handler(rjq_job *job, void *data) {
    ASSERT_OK(rjq_job_fail(job, "fatal", RJQ_FAIL_FATAL, 0, on_done_ok, data));
}

/* cancel, job, replay and delete by id on a sharded handle act on the
 * id's shard (the one rjq_enqueue picked); a server-assigned id is
 * refused (its shard cannot be known). */
TEST(calls_by_id_go_to_the_shard_of_the_id) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "sh_byid");
    ASSERT_OK(declare_shards(e.base, q, 6));
    char ids[12][16];
    int used[6] = {0};
    for (int i = 0; i < 12; i++) {
        snprintf(ids[i], sizeof ids[i], "k-%d", i);
        enqueue_x_ok(e.base, q, ids[i], 0, 0);
        info_wait w = get_info(e.base, q, ids[i]);
        ASSERT_OK(w.status);
        ASSERT_STREQ("ready", w.state);
        used[shard_holding(e.base, q, ids[i])]++;
    }
    int shards_used = 0;
    for (int i = 0; i < 6; i++) shards_used += used[i] > 0;
    ASSERT(shards_used > 1); /* (so a call on one fixed shard would miss some) */
    ASSERT_EQ(RJQ_ENOTFOUND, get_info(e.base, q, "nope").status);

    /* cancel: every id on its shard */
    for (int i = 6; i < 12; i++) {
        cancel_wait c = cancel_of(e.base, q, ids[i]);
        ASSERT_OK(c.status);
        ASSERT_STREQ("ready", c.state);
        ASSERT_STREQ("cancelled", get_info(e.base, q, ids[i]).state);
        c = cancel_of(e.base, q, ids[i]);
        ASSERT_EQ(RJQ_ESTATE, c.status);
        ASSERT_STREQ("cancelled", c.state);
    }
    ASSERT_EQ(RJQ_ENOTFOUND, cancel_of(e.base, q, "nope").status);
    /* replay by id finds the job (cancelled: not dead) */
    count_wait w = {0};
    ASSERT_EQ(RJQ_ESTATE, counted(e.base, rjq_queue_replay(q, "k-6", 0, on_count, &w), &w).status);
    /* delete by id */
    for (int i = 6; i < 12; i++) {
        memset(&w, 0, sizeof w);
        w = counted(e.base, rjq_queue_delete(q, ids[i], on_count, &w), &w);
        ASSERT_OK(w.status);
        ASSERT_EQ(1, w.n);
        ASSERT_EQ(RJQ_ENOTFOUND, get_info(e.base, q, ids[i]).status);
        ASSERT_EQ(-1, shard_holding(e.base, q, ids[i]));
    }

    /* dead jobs: replayed and deleted by id */
    long replies = 0;
    rjq_worker_options wo = quiet_worker_options(2);
    rjq_worker *wk;
    ASSERT_OK(rjq_worker_start(q, &wo, fatal_handler, &replies, &wk));
    ASSERT(loop_until_count(e.base, &replies, 6, 10000));
    worker_stop_wait(e.base, wk);
    for (int i = 0; i < 6; i++) ASSERT_STREQ("dead", get_info(e.base, q, ids[i]).state);
    memset(&w, 0, sizeof w);
    w = counted(e.base, rjq_queue_replay(q, "k-0", 0, on_count, &w), &w);
    ASSERT_OK(w.status);
    ASSERT_EQ(1, w.n);
    ASSERT_STREQ("ready", get_info(e.base, q, "k-0").state);
    memset(&w, 0, sizeof w);
    w = counted(e.base, rjq_queue_delete(q, "k-1", on_count, &w), &w);
    ASSERT_OK(w.status);
    ASSERT_EQ(1, w.n);
    ASSERT_EQ(-1, shard_holding(e.base, q, "k-1"));
    /* replay without an id: every shard's dead jobs, one callback, summed */
    memset(&w, 0, sizeof w);
    w = counted(e.base, rjq_queue_replay(q, NULL, 0, on_count, &w), &w);
    ASSERT_OK(w.status);
    ASSERT_EQ(4, w.n);
    rjq_stats st = get_stats(e.base, q);
    ASSERT_EQ(5, st.ready);
    ASSERT_EQ(0, st.dead_depth);

    /* server-assigned ids: refused, saying why, no callback */
    memset(&w, 0, sizeof w);
    ASSERT_EQ(RJQ_ESHARDED, rjq_queue_cancel(q, "42", on_cancelled, NULL));
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "server-assigned") != NULL);
    ASSERT_EQ(RJQ_ESHARDED, rjq_queue_delete(q, "42", on_count, &w));
    ASSERT_EQ(RJQ_ESHARDED, rjq_queue_replay(q, "42", 0, on_count, &w));
    ASSERT_EQ(RJQ_ESHARDED, rjq_queue_get_job(q, "42", on_info_never, NULL));
    /* an invalid id: the plain call's answer */
    ASSERT_EQ(RJQ_EJOBID, rjq_queue_cancel(q, "", on_cancelled, NULL));
    loop_turn(e.base);
    ASSERT_EQ(0, w.done);
    env_stop(&e);
}

/* rjq_queue_set_format on a sharded handle sets every shard's meta (each
 * shard's producers learn their own), its callback once: 1 when any
 * changed, 0 when all already were so. */
TEST(queue_format_of_a_sharded_queue_is_set_on_every_shard) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "sh_fmt");
    ASSERT_OK(declare_shards(e.base, q, 3));
    count_wait w = {0};
    w = counted(e.base, rjq_queue_set_format(q, 2, on_count, &w), &w);
    ASSERT_OK(w.status);
    ASSERT_EQ(1, w.n);
    for (int i = 0; i < 3; i++) {
        redisReply *r = server_cmd(e.rc, "HGET t:{%s}:meta format", rjq_queue_get_name(rjq_queue_get_shard(q, i)));
        ASSERT(r->type == REDIS_REPLY_STRING && strcmp(r->str, "2") == 0);
        freeReplyObject(r);
    }
    memset(&w, 0, sizeof w);
    w = counted(e.base, rjq_queue_set_format(q, 2, on_count, &w), &w);
    ASSERT_OK(w.status);
    ASSERT_EQ(0, w.n); /* already so */
    env_stop(&e);
}

/* pause, resume, purge, replay and reclaim on a sharded handle act on
 * every shard, their callback once. */
TEST(whole_queue_calls_act_on_every_shard_with_one_callback) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "sh_whole");
    ASSERT_OK(declare_shards(e.base, q, 4));
    count_wait w = {0};
    w = counted(e.base, rjq_queue_pause(q, on_count, &w), &w);
    ASSERT_OK(w.status);
    ASSERT_EQ(1, w.n);
    for (int i = 0; i < 4; i++) ASSERT_EQ(1, get_stats(e.base, rjq_queue_get_shard(q, i)).paused);
    memset(&w, 0, sizeof w);
    w = counted(e.base, rjq_queue_pause(q, on_count, &w), &w);
    ASSERT_OK(w.status);
    ASSERT_EQ(0, w.n); /* already so */

    /* paused: a worker starts nothing; resumed: it drains every shard */
    static drain_log l;
    memset(&l, 0, sizeof l);
    l.q = q;
    rjq_worker_options wo = quiet_worker_options(2);
    ASSERT_OK(rjq_worker_start(q, &wo, drain_handler, &l, &l.w));
    for (int i = 0; i < 16; i++) {
        char id[16];
        snprintf(id, sizeof id, "d-%d", i);
        enqueue_x_ok(e.base, q, id, 0, 0);
    }
    ASSERT_EQ(16, get_stats(e.base, q).ready);
    memset(&w, 0, sizeof w);
    w = counted(e.base, rjq_queue_resume(q, on_count, &w), &w);
    ASSERT_OK(w.status);
    ASSERT_EQ(1, w.n);
    ASSERT(loop_until_count(e.base, &l.done, 16, 10000));
    for (int i = 0; i < 16; i++) ASSERT_EQ(1, l.runs[i]);
    worker_stop_wait(e.base, l.w);
    for (int i = 0; i < 4; i++) ASSERT_EQ(0, get_stats(e.base, rjq_queue_get_shard(q, i)).paused);
    ASSERT_EQ(0, get_stats(e.base, q).paused);

    /* purge: every shard's cancelled jobs (each shard given the limit) */
    for (int i = 0; i < 8; i++) {
        char id[16];
        snprintf(id, sizeof id, "c-%d", i);
        enqueue_x_ok(e.base, q, id, 0, 0);
        ASSERT_OK(cancel_of(e.base, q, id).status);
    }
    ASSERT_EQ(8, get_stats(e.base, q).cancelled_depth);
    memset(&w, 0, sizeof w);
    w = counted(e.base, rjq_queue_purge(q, RJQ_STATE_CANCELLED, 100, on_count, &w), &w);
    ASSERT_OK(w.status);
    ASSERT_EQ(8, w.n);
    ASSERT_EQ(0, get_stats(e.base, q).cancelled_depth);
    memset(&w, 0, sizeof w);
    w = counted(e.base, rjq_queue_purge(q, RJQ_STATE_CANCELLED, 100, on_count, &w), &w);
    ASSERT_EQ(0, w.n);
    /* a bad argument: refused as for a plain queue, no callback */
    memset(&w, 0, sizeof w);
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_purge(q, RJQ_STATE_READY, 10, on_count, &w));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_reclaim(q, NULL, NULL));
    /* reclaim: one sweep per shard, nothing to take back */
    w = counted(e.base, rjq_queue_reclaim(q, on_count, &w), &w);
    ASSERT_OK(w.status);
    ASSERT_EQ(0, w.n);
    env_stop(&e);
}

typedef struct ids_wait {
    int done, status;
    size_t n;
    char ids[64][16];
} ids_wait;

static void on_ids(rjq_client *c, int status, const char *const *ids, size_t n, void *data) {
    ids_wait *w = data;
    (void)c;
    w->done++;
    w->status = status;
    w->n = n;
    ASSERT(n <= 64);
    for (size_t i = 0; i < n; i++) snprintf(w->ids[i], sizeof w->ids[i], "%s", ids[i]);
}

/* A listing (dead: rjq_queue_list_dead) run to its one callback, RJQ_OK. */
static ids_wait listing(struct event_base *base, rjq_queue *q, int dead, rjq_job_state state,
                        long offset, long limit) {
    ids_wait w = {0};
    ASSERT_OK(dead ? rjq_queue_list_dead(q, offset, limit, on_ids, &w)
                   : rjq_queue_list_jobs(q, state, offset, limit, on_ids, &w));
    ASSERT(loop_until(base, &w.done, 10000));
    loop_turn(base);
    ASSERT_EQ(1, w.done);
    ASSERT_OK(w.status);
    return w;
}

/* The listing holds each of the n ids "l-<i>" once, in enqueue order
 * (enqueue times never decrease), each shard's in its own order. */
static void check_merged(test_env *e, rjq_queue *q, const ids_wait *w, int n) {
    ASSERT_EQ((size_t)n, w->n);
    int seen[64] = {0};
    long long last = 0;
    int last_of_shard[RJQ_SHARDS_MAX];
    for (int i = 0; i < RJQ_SHARDS_MAX; i++) last_of_shard[i] = -1;
    for (size_t i = 0; i < w->n; i++) {
        int k = -1;
        ASSERT(sscanf(w->ids[i], "l-%d", &k) == 1 && k >= 0 && k < n);
        ASSERT_EQ(0, seen[k]++);
        info_wait iw = get_info(e->base, q, w->ids[i]);
        ASSERT_OK(iw.status);
        ASSERT(iw.enqueued_ms >= last);
        last = iw.enqueued_ms;
        int s = shard_holding(e->base, q, w->ids[i]);
        ASSERT(k > last_of_shard[s]); /* (enqueued in order of k: FIFO within a shard) */
        last_of_shard[s] = k;
    }
}

/* rjq_queue_list_jobs and rjq_queue_list_dead on a sharded handle: every shard's
 * jobs, merged by enqueue time, one callback; pages by offset and limit
 * add up to the whole listing. */
TEST(listings_merge_every_shard_by_enqueue_time) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "sh_list");
    ASSERT_OK(declare_shards(e.base, q, 4));
    char ids[12][16];
    for (int i = 0; i < 12; i++) {
        snprintf(ids[i], sizeof ids[i], "l-%d", i);
        enqueue_x_ok(e.base, q, ids[i], 0, 0);
    }
    ids_wait all = listing(e.base, q, 0, RJQ_STATE_READY, 0, 100);
    check_merged(&e, q, &all, 12);
    /* pages: offset and limit over the merged order */
    ids_wait page[3];
    for (int p = 0; p < 3; p++) page[p] = listing(e.base, q, 0, RJQ_STATE_READY, 5 * p, 5);
    ASSERT_EQ(5, page[0].n);
    ASSERT_EQ(5, page[1].n);
    ASSERT_EQ(2, page[2].n);
    for (int i = 0; i < 12; i++) ASSERT_STREQ(all.ids[i], page[i / 5].ids[i % 5]);
    ASSERT_EQ(0, listing(e.base, q, 0, RJQ_STATE_DELAYED, 0, 10).n);
    /* a page past offset + limit 1000 is refused (each shard's first
     * offset + limit ids are read); so is a bad state, as for a plain queue */
    ids_wait none = {0};
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_list_jobs(q, RJQ_STATE_READY, 999, 2, on_ids, &none));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_list_jobs(q, (rjq_job_state)42, 0, 2, on_ids, &none));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_list_dead(q, 0, 0, on_ids, &none));

    /* dead: the same merge */
    long replies = 0;
    rjq_worker_options wo = quiet_worker_options(2);
    rjq_worker *wk;
    ASSERT_OK(rjq_worker_start(q, &wo, fatal_handler, &replies, &wk));
    ASSERT(loop_until_count(e.base, &replies, 12, 10000));
    worker_stop_wait(e.base, wk);
    ASSERT_EQ(0, listing(e.base, q, 0, RJQ_STATE_READY, 0, 100).n);
    ids_wait dead = listing(e.base, q, 1, 0, 0, 100);
    ASSERT_EQ(12, dead.n);
    int seen[12] = {0};
    for (size_t i = 0; i < dead.n; i++) {
        int k = -1;
        ASSERT(sscanf(dead.ids[i], "l-%d", &k) == 1 && k >= 0 && k < 12);
        ASSERT_EQ(0, seen[k]++);
    }
    /* each shard's dead jobs in the shard's own order (oldest death first) */
    for (int sh = 0; sh < 4; sh++) {
        ids_wait own = listing(e.base, rjq_queue_get_shard(q, sh), 1, 0, 0, 100);
        size_t at = 0;
        for (size_t i = 0; i < dead.n; i++)
            if (shard_holding(e.base, q, dead.ids[i]) == sh) ASSERT_STREQ(own.ids[at++], dead.ids[i]);
        ASSERT_EQ(own.n, at);
    }
    ids_wait dead2 = listing(e.base, q, 0, RJQ_STATE_DEAD, 10, 5);
    ASSERT_EQ(2, dead2.n);
    ASSERT_STREQ(dead.ids[10], dead2.ids[0]);
    ASSERT_STREQ(dead.ids[11], dead2.ids[1]);
    loop_turn(e.base);
    ASSERT_EQ(0, none.done);
    env_stop(&e);
}

/* A client freed while a queue's layout is being read, or a declaration
 * is under way: each callback once, with RJQ_ECANCELED, nothing leaked. */
TEST(client_freed_mid_open_or_declaration_ends_each_callback_once) {
    test_env e;
    env_start(&e, NULL);
    rjq_client *c2 = client_for(e.base, &e.s);
    open_wait w = {0};
    ASSERT_OK(rjq_queue_open_async(c2, "sh_free", NULL, on_open_wait, &w));
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(c2, "sh_free2", NULL, &q));
    count_wait d = {0};
    ASSERT_OK(rjq_queue_shard(q, 3, on_count, &d));
    rjq_client_free(c2);
    ASSERT_EQ(1, w.done);
    ASSERT_EQ(RJQ_ECANCELED, w.status);
    ASSERT(w.q == NULL);
    ASSERT_EQ(1, d.done);
    ASSERT_EQ(RJQ_ECANCELED, d.status);

    /* the same once connected, with the declaration's stats reads in flight */
    c2 = client_for(e.base, &e.s);
    wait_connected(e.base, c2);
    ASSERT_OK(rjq_queue_open(c2, "sh_free3", NULL, &q));
    memset(&d, 0, sizeof d);
    ASSERT_OK(rjq_queue_shard(q, 3, on_count, &d));
    loop_turn(e.base); /* (the GET answered at most; its stats reads out or not yet) */
    rjq_client_free(c2);
    ASSERT_EQ(1, d.done);

    /* a merged listing and a fanned-out call, the client freed before or
     * while the shards' answers come: each callback once */
    for (int turns = 0; turns < 4; turns++) {
        c2 = client_for(e.base, &e.s);
        q = open_learnt(e.base, c2, "sh_free4");
        if (rjq_queue_count_shards(q) == 1) ASSERT_OK(declare_shards(e.base, q, 3));
        for (int i = 0; i < 6; i++) {
            char id[16];
            snprintf(id, sizeof id, "f-%d", i);
            enqueue_x_ok(e.base, q, id, 0, 0);
        }
        ids_wait l = {0};
        count_wait p = {0};
        ASSERT_OK(rjq_queue_list_jobs(q, RJQ_STATE_READY, 0, 10, on_ids, &l));
        ASSERT_OK(rjq_queue_pause(q, on_count, &p));
        for (int t = 0; t < turns; t++) loop_turn(e.base);
        rjq_client_free(c2);
        ASSERT_EQ(1, l.done);
        ASSERT_EQ(1, p.done);
        if (l.status == RJQ_OK) ASSERT_EQ(6, l.n);
        else ASSERT_EQ(RJQ_ECANCELED, l.status);
    }
    env_stop(&e);
}

/* Allocation failures at every step of a batch split over shards: either
 * the call returns RJQ_ENOMEM (no callback: nothing was sent) or its
 * callback comes once, with every result or an error; of an open that
 * learns the layout: RJQ_ENOMEM returned, or one callback. Nothing leaks
 * (ASan). */
TEST(allocation_failures_in_a_split_batch_and_an_open_end_cleanly) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "sh_oom");
    ASSERT_OK(declare_shards(e.base, q, 3));
    rjq_job_options o[9];
    rjq_enqueue_item it[9];
    char ids[9][16];
    for (int i = 0; i < 9; i++) {
        o[i] = (rjq_job_options)RJQ_JOB_OPTIONS_INIT;
        snprintf(ids[i], sizeof ids[i], "oom-%d", i);
        o[i].id = ids[i];
        it[i] = (rjq_enqueue_item)RJQ_ENQUEUE_ITEM_INIT;
        it[i].payload = "x";
        it[i].len = 1;
        it[i].opts = &o[i];
    }
    long n = 0;
    int failed_sync = 0, called = 0;
    for (;; n++) {
        batch_wait w = {0};
        failalloc_arm_once(n);
        int rc = rjq_enqueue_batch(q, it, 9, on_batch, &w);
        failalloc_disarm();
        if (rc == RJQ_OK) {
            ASSERT(loop_until(e.base, &w.done, 10000));
            loop_turn(e.base);
            ASSERT_EQ(1, w.done);
            if (w.status == RJQ_OK) ASSERT_EQ(9, w.n);
            else ASSERT_EQ(RJQ_ENOMEM, w.status);
            called++;
        } else {
            ASSERT_EQ(RJQ_ENOMEM, rc);
            loop_turn(e.base);
            ASSERT_EQ(0, w.done);
            failed_sync++;
        }
        if (failalloc_failures() == 0) break;
        ASSERT(n < 1000);
    }
    ASSERT(failed_sync > 0 && called > 0);
    ASSERT_EQ(9, get_stats(e.base, q).ready); /* ids: written once, whatever failed */

    /* a merged listing: ENOMEM returned, or one callback (all 9 ids, or ENOMEM) */
    called = failed_sync = 0;
    for (n = 0;; n++) {
        ids_wait w = {0};
        failalloc_arm_once(n);
        int rc = rjq_queue_list_jobs(q, RJQ_STATE_READY, 0, 20, on_ids, &w);
        failalloc_disarm();
        if (rc == RJQ_OK) {
            ASSERT(loop_until(e.base, &w.done, 10000));
            loop_turn(e.base);
            ASSERT_EQ(1, w.done);
            if (w.status == RJQ_OK) ASSERT_EQ(9, w.n);
            else ASSERT_EQ(RJQ_ENOMEM, w.status);
            called++;
        } else {
            ASSERT_EQ(RJQ_ENOMEM, rc);
            failed_sync++;
        }
        if (failalloc_failures() == 0) break;
        ASSERT(n < 1000);
    }
    ASSERT(failed_sync > 0 && called > 0);

    for (n = 0;; n++) {
        open_wait w = {0};
        failalloc_arm_once(n);
        int rc = rjq_queue_open_async(e.c, "sh_oom", NULL, on_open_wait, &w);
        failalloc_disarm();
        if (rc == RJQ_OK) {
            ASSERT(loop_until(e.base, &w.done, 10000));
            ASSERT_OK(w.status);
            ASSERT_EQ(3, rjq_queue_count_shards(w.q));
            ASSERT_OK(rjq_queue_close(w.q));
        } else {
            ASSERT_EQ(RJQ_ENOMEM, rc);
        }
        if (failalloc_failures() == 0) break;
        ASSERT(n < 1000);
    }
    env_stop(&e);
}
