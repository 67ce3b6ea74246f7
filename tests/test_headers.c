/*
 * Job headers and job hooks (issue 38, "Traces through the jobs"): headers
 * set at enqueue reach the handler (by a claim and by a push), come back
 * from rjq_queue_get_job; headers outside the limits are refused with
 * nothing written; on_job_start and on_job_finish are called once per
 * attempt, a failed one included; headers add no command per job beyond
 * the options record they share, and a job without them writes none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
#define TS "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"

/* What a handler saw of one job's headers. */
typedef struct seen {
    long jobs;
    char tp[128], ts[128], user[64];
    size_t count;
    char keys[RJQ_HEADERS_MAX][RJQ_HEADER_KEY_MAX + 1];
    int missing_is_null;
} seen;

static void record_headers(rjq_job *job, void *data) {
    seen *s = data;
    const char *v;
    snprintf(s->tp, sizeof s->tp, "%s", (v = rjq_job_get_header(job, "traceparent")) ? v : "");
    snprintf(s->ts, sizeof s->ts, "%s", (v = rjq_job_get_header(job, "tracestate")) ? v : "");
    snprintf(s->user, sizeof s->user, "%s", (v = rjq_job_get_header(job, "tenant")) ? v : "");
    s->missing_is_null = rjq_job_get_header(job, "nope") == NULL && rjq_job_get_header(job, NULL) == NULL;
    const char *k, *val;
    for (s->count = 0; rjq_job_get_header_at(job, s->count, &k, &val); s->count++)
        snprintf(s->keys[s->count], sizeof s->keys[s->count], "%s", k);
    ASSERT_OK(rjq_job_complete(job, "ok", 2, on_done_ok, NULL));
    s->jobs++;
}

typedef struct info_headers {
    int done, status;
    size_t n;
    char keys[RJQ_HEADERS_MAX][RJQ_HEADER_KEY_MAX + 1];
    char values[RJQ_HEADERS_MAX][128];
    char state[16];
} info_headers;

static void on_info_headers(rjq_client *c, int status, const rjq_job_info *ji, void *data) {
    info_headers *w = data;
    (void)c;
    w->done++;
    w->status = status;
    if (status != RJQ_OK) return;
    snprintf(w->state, sizeof w->state, "%s", ji->state);
    w->n = ji->nheaders;
    ASSERT(ji->nheaders == 0 ? ji->headers == NULL : ji->headers != NULL);
    for (size_t i = 0; i < ji->nheaders; i++) {
        snprintf(w->keys[i], sizeof w->keys[i], "%s", rjq_header_get(ji->headers, i)->key);
        snprintf(w->values[i], sizeof w->values[i], "%s", rjq_header_get(ji->headers, i)->value);
    }
}

static info_headers headers_of(test_env *e, const char *id) {
    info_headers w;
    memset(&w, 0, sizeof w);
    ASSERT_OK(rjq_queue_get_job(e->q, id, on_info_headers, &w));
    ASSERT(loop_until(e->base, &w.done, 5000));
    ASSERT_OK(w.status);
    return w;
}

static const rjq_header three[] = {{"traceparent", TP}, {"tracestate", TS}, {"tenant", "acme"}};

static void check_seen(const seen *s) {
    ASSERT_STREQ(TP, s->tp);
    ASSERT_STREQ(TS, s->ts);
    ASSERT_STREQ("acme", s->user);
    ASSERT(s->missing_is_null);
    ASSERT_EQ(3, (long)s->count);
    ASSERT_STREQ("traceparent", s->keys[0]);
    ASSERT_STREQ("tracestate", s->keys[1]);
    ASSERT_STREQ("tenant", s->keys[2]);
}

static void check_info(test_env *e, const char *id) {
    info_headers h = headers_of(e, id);
    ASSERT_STREQ("completed", h.state);
    ASSERT_EQ(3, (long)h.n);
    for (int i = 0; i < 3; i++) {
        ASSERT_STREQ(three[i].key, h.keys[i]);
        ASSERT_STREQ(three[i].value, h.values[i]);
    }
}

TEST(headers_round_trip_claim_push_and_job_info) {
    test_env e;
    env_start(&e, "hd");
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.headers = three;
    o.nheaders = 3;
    o.id = "claimed";
    /* waiting before the worker starts: its claim hands it out */
    ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
    seen s;
    memset(&s, 0, sizeof s);
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, record_headers, &s, &w));
    ASSERT(loop_until_count(e.base, &s.jobs, 1, 5000));
    check_seen(&s);
    /* the worker idle, registered: the next job is pushed to it */
    wait_worker_started(e.base, e.c, e.q, e.rc, "hd");
    long pushes = server_calls(e.rc, "publish");
    memset(&s, 0, sizeof s);
    o.id = NULL; /* an assigned id, with the options all defaults but the headers */
    enqueue_wait ew = enqueue_job(e.base, e.q, "y", &o);
    ASSERT_OK(ew.status);
    ASSERT(loop_until_count(e.base, &s.jobs, 1, 5000));
    ASSERT(server_calls(e.rc, "publish") > pushes); /* (it was pushed) */
    check_seen(&s);
    /* a job without headers has none */
    memset(&s, 0, sizeof s);
    ASSERT_OK(enqueue_job(e.base, e.q, "z", NULL).status);
    ASSERT(loop_until_count(e.base, &s.jobs, 1, 5000));
    ASSERT_EQ(0, (long)s.count);
    ASSERT_STREQ("", s.tp);
    /* they come back with the job's record, once it completed */
    get_stats(e.base, e.q); /* (a round trip: the completions are applied) */
    worker_stop_wait(e.base, w);
    check_info(&e, "claimed");
    check_info(&e, ew.id);
    env_stop(&e);
}

/* a payload too big to push goes as its id alone, read by the worker
 * (worker_fetch.c): its headers come with the push all the same */
TEST(headers_of_a_pushed_job_whose_payload_is_read_after) {
    test_env e;
    env_start(&e, "hp");
    seen s;
    memset(&s, 0, sizeof s);
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, record_headers, &s, &w));
    wait_worker_started(e.base, e.c, e.q, e.rc, "hp");
    long long reads = server_calls(e.rc, "hmget");
    size_t big = 20000; /* over the push's inline limit (16 KiB) */
    char *payload = malloc(big + 1);
    ASSERT(payload != NULL);
    memset(payload, 'p', big);
    payload[big] = '\0';
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.headers = three;
    o.nheaders = 3;
    ASSERT_OK(enqueue_job(e.base, e.q, payload, &o).status);
    free(payload);
    ASSERT(loop_until_count(e.base, &s.jobs, 1, 5000));
    ASSERT(server_calls(e.rc, "hmget") > reads); /* (its payload was read) */
    check_seen(&s);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* a batch whose every job has headers and other options */
TEST(headers_round_trip_batch_with_options) {
    test_env e;
    env_start(&e, "hb");
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.headers = three;
    o.nheaders = 3;
    o.priority = 5;
    o.max_attempts = 7;
    o.timeout_ms = 60000;
    rjq_enqueue_item items[2] = {RJQ_ENQUEUE_ITEM_INIT, RJQ_ENQUEUE_ITEM_INIT};
    for (int i = 0; i < 2; i++) items[i].payload = "p", items[i].len = 1, items[i].opts = &o;
    enqueue_wait ew;
    memset(&ew, 0, sizeof ew);
    ASSERT_OK(rjq_enqueue_batch(e.q, items, 2, on_enqueue_wait, &ew));
    ASSERT(loop_until(e.base, &ew.done, 5000));
    ASSERT_OK(ew.status);
    seen s;
    memset(&s, 0, sizeof s);
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, record_headers, &s, &w));
    ASSERT(loop_until_count(e.base, &s.jobs, 2, 5000));
    check_seen(&s);
    get_stats(e.base, e.q);
    worker_stop_wait(e.base, w);
    check_info(&e, ew.id);
    info_wait iw = get_info(e.base, e.q, ew.id);
    ASSERT_EQ(7, iw.max_attempts); /* (the options still read as ever) */
    env_stop(&e);
}

static long long keys_now(redisContext *rc) {
    redisReply *r = redisCommand(rc, "DBSIZE");
    ASSERT(r && r->type == REDIS_REPLY_INTEGER);
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

static int refused(test_env *e, const rjq_header *h, size_t n) {
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.headers = h;
    o.nheaders = n;
    return rjq_enqueue(e->q, "x", 1, &o, NULL, NULL);
}

TEST(headers_out_of_limits_are_refused_with_nothing_written) {
    test_env e;
    env_start(&e, "hl");
    long long before = keys_now(e.rc);
    rjq_header many[RJQ_HEADERS_MAX + 1];
    char names[RJQ_HEADERS_MAX + 1][8];
    for (int i = 0; i <= RJQ_HEADERS_MAX; i++) {
        snprintf(names[i], sizeof names[i], "k%d", i);
        many[i] = (rjq_header){names[i], "v"};
    }
    char long_key[RJQ_HEADER_KEY_MAX + 2], long_value[RJQ_HEADER_VALUE_MAX + 2];
    memset(long_key, 'k', sizeof long_key - 1);
    long_key[sizeof long_key - 1] = '\0';
    memset(long_value, 'v', sizeof long_value - 1);
    long_value[sizeof long_value - 1] = '\0';
    const rjq_header bad[][2] = {
        {{long_key, "v"}, {"a", "b"}},       {{"", "v"}, {"a", "b"}},
        {{"a=b", "v"}, {"a", "b"}},          {{"sp ace", "v"}, {"a", "b"}},
        {{"a", "line\nbreak"}, {"b", "c"}},  {{"a", "tab\there"}, {"b", "c"}},
        {{"a", "\xc3\xa9"}, {"b", "c"}},     {{"a", long_value}, {"b", "c"}},
        {{"a", "1"}, {"a", "2"}},            {{NULL, "1"}, {"b", "2"}},
        {{"a", NULL}, {"b", "2"}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (refused(&e, bad[i], 2) != RJQ_EINVAL) FAIL_AT(__FILE__, __LINE__, "bad headers %zu taken", i);
    ASSERT_EQ(RJQ_EINVAL, refused(&e, many, RJQ_HEADERS_MAX + 1));
    ASSERT_EQ(RJQ_EINVAL, refused(&e, NULL, 1));
    ASSERT_EQ(RJQ_EINVAL, refused(&e, many, 0)); /* headers set, nheaders 0 */
    /* a batch with one bad job is refused whole */
    rjq_job_options good = RJQ_JOB_OPTIONS_INIT, worse = RJQ_JOB_OPTIONS_INIT;
    good.headers = many, good.nheaders = 1;
    worse.headers = bad[8], worse.nheaders = 2;
    rjq_enqueue_item items[2] = {RJQ_ENQUEUE_ITEM_INIT, RJQ_ENQUEUE_ITEM_INIT};
    items[0].payload = items[1].payload = "x";
    items[0].len = items[1].len = 1;
    items[0].opts = &good;
    items[1].opts = &worse;
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue_batch(e.q, items, 2, NULL, NULL));
    /* schedules carry none */
    rjq_schedule sc = RJQ_SCHEDULE_INIT;
    sc.every_ms = 60000;
    sc.opts = &good;
    ASSERT_EQ(RJQ_EINVAL, rjq_schedule_set(e.q, "s", &sc, NULL, NULL));
    /* the limits themselves are taken */
    many[0].key = long_key + 1;  /* RJQ_HEADER_KEY_MAX bytes */
    many[1].value = long_value + 1; /* RJQ_HEADER_VALUE_MAX bytes */
    many[2].value = "";
    ASSERT_OK(refused(&e, many, RJQ_HEADERS_MAX));
    get_stats(e.base, e.q); /* (a round trip: everything sent has run) */
    rjq_stats st = get_stats(e.base, e.q);
    ASSERT_EQ(1, st.enqueued);
    ASSERT(keys_now(e.rc) > before);
    env_stop(&e);

    /* nothing of the refused calls was written */
    env_start(&e, "hl");
    before = keys_now(e.rc);
    ASSERT_EQ(RJQ_EINVAL, refused(&e, bad[4], 2));
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue_batch(e.q, items, 2, NULL, NULL));
    get_stats(e.base, e.q);
    ASSERT_EQ(before, keys_now(e.rc));
    env_stop(&e);
}

/* ---- hooks ---------------------------------------------------------------- */

typedef struct hooks {
    long starts, finishes, handled;
    int open;                /* a start not yet finished */
    int twice;               /* a start while one was open, or a finish with none */
    long long wait[4];
    int failed[4];
    long long run[4];
    char tp[4][128];
} hooks;

static void on_start(rjq_job *job, long long wait_ms, void *data) {
    hooks *h = data;
    if (h->open) h->twice = 1;
    h->open = 1;
    if (h->starts < 4) {
        h->wait[h->starts] = wait_ms;
        const char *tp = rjq_job_get_header(job, "traceparent");
        snprintf(h->tp[h->starts], sizeof h->tp[0], "%s", tp ? tp : "");
    }
    h->starts++;
}

static void on_finish(rjq_job *job, int failed, long long run_ms, void *data) {
    hooks *h = data;
    ASSERT_STREQ("hk", rjq_job_get_id(job)); /* (the handle still whole) */
    if (!h->open) h->twice = 1;
    h->open = 0;
    if (h->finishes < 4) h->failed[h->finishes] = failed, h->run[h->finishes] = run_ms;
    h->finishes++;
}

/* fails the first attempt, completes the second */
static void fail_once(rjq_job *job, void *data) {
    hooks *h = data;
    h->handled++;
    if (rjq_job_get_attempt(job) == 1) ASSERT_OK(rjq_job_fail(job, "boom", RJQ_FAIL_RETRY, 0, on_done_ok, NULL));
    else ASSERT_OK(rjq_job_complete(job, NULL, 0, on_done_ok, NULL));
}

TEST(job_hooks_called_once_per_attempt_with_a_failure_and_retry) {
    test_env e;
    env_start(&e, "hk");
    hooks h;
    memset(&h, 0, sizeof h);
    rjq_worker_options wo = quiet_worker_options(1);
    wo.on_job_start = on_start;
    wo.on_job_finish = on_finish;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, fail_once, &h, &w));
    wait_worker_started(e.base, e.c, e.q, e.rc, "hk");
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "hk";
    o.max_attempts = 2;
    o.headers = three;
    o.nheaders = 1;
    ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
    ASSERT(loop_until_count(e.base, &h.finishes, 2, 10000));
    info_wait iw = get_info(e.base, e.q, "hk");
    ASSERT_STREQ("completed", iw.state);
    worker_stop_wait(e.base, w); /* (no attempt is left to come) */
    ASSERT_EQ(2, h.starts);
    ASSERT_EQ(2, h.finishes);
    ASSERT_EQ(2, h.handled);
    ASSERT(!h.twice && !h.open);
    ASSERT_EQ(1, h.failed[0]);
    ASSERT_EQ(0, h.failed[1]);
    ASSERT(h.wait[0] >= 0);  /* the first start: its wait is known */
    ASSERT_EQ(-1, h.wait[1]); /* a later attempt */
    ASSERT(h.run[0] >= 0 && h.run[1] >= 0);
    ASSERT_STREQ(TP, h.tp[0]);
    ASSERT_STREQ(TP, h.tp[1]);
    env_stop(&e);
}

/* a job finished after its client was freed still gets its finish hook */
static void keep(rjq_job *job, void *data) {
    *(rjq_job **)data = job;
}

static hooks freed_hooks;

static void on_start_freed(rjq_job *job, long long wait_ms, void *data) {
    (void)job, (void)wait_ms, (void)data;
    freed_hooks.starts++;
}

static void on_finish_freed(rjq_job *job, int failed, long long run_ms, void *data) {
    (void)job, (void)run_ms, (void)data;
    freed_hooks.failed[0] = failed;
    freed_hooks.finishes++;
}

TEST(job_finish_hook_called_for_a_job_finished_after_its_client_went) {
    test_env e;
    env_start(&e, "hf");
    memset(&freed_hooks, 0, sizeof freed_hooks);
    rjq_worker_options wo = quiet_worker_options(1);
    wo.on_job_start = on_start_freed;
    wo.on_job_finish = on_finish_freed;
    rjq_job *held = NULL;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, keep, &held, &w));
    ASSERT_OK(enqueue_job(e.base, e.q, "x", NULL).status);
    WAIT_FOR(e.base, held != NULL, 5000);
    ASSERT_EQ(1, freed_hooks.starts);
    rjq_client_free(e.c);
    e.c = NULL;
    ASSERT_EQ(0, freed_hooks.finishes);
    ASSERT_EQ(RJQ_ECLOSED, rjq_job_complete(held, NULL, 0, NULL, NULL));
    ASSERT_EQ(1, freed_hooks.finishes);
    ASSERT_EQ(0, freed_hooks.failed[0]);
    env_stop(&e);
}

/* ---- what headers cost ------------------------------------------------------ */

static long jobs_done;

static void complete_it(rjq_job *job, void *data) {
    (void)data;
    ASSERT_OK(rjq_job_complete(job, NULL, 0, on_done_ok, &jobs_done));
}

/* The commands of one job (enqueued to an idle worker: pushed, run,
 * completed) with options o, after a first one of the same kind. */
static long long one_job_costs(test_env *e, const rjq_job_options *o) {
    long long cost = 0;
    for (int k = 0; k < 2; k++) {
        wait_worker_started(e->base, e->c, e->q, e->rc, rjq_queue_get_name(e->q));
        long long before = server_commands_run(e->rc);
        long target = jobs_done + 1;
        ASSERT_OK(enqueue_job(e->base, e->q, "x", o).status);
        ASSERT(loop_until_count(e->base, &jobs_done, target, 5000));
        wait_worker_started(e->base, e->c, e->q, e->rc, rjq_queue_get_name(e->q));
        cost = server_commands_run(e->rc) - before;
    }
    return cost;
}

static long long options_fields(redisContext *rc, const char *q) {
    redisReply *r = redisCommand(rc, "HLEN t:{%s}:options", q);
    ASSERT(r && r->type == REDIS_REPLY_INTEGER);
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

TEST(job_headers_cost_no_command_beyond_the_options_record) {
    test_env e;
    env_start(&e, "hc");
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    jobs_done = 0;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_it, NULL, &w));
    long long plain = one_job_costs(&e, NULL);
    ASSERT_EQ(0, options_fields(e.rc, "hc")); /* a job without headers writes no options */
    rjq_job_options opts = RJQ_JOB_OPTIONS_INIT;
    opts.max_attempts = 5;
    long long with_options = one_job_costs(&e, &opts);
    opts.headers = three;
    opts.nheaders = 3;
    long long with_headers = one_job_costs(&e, &opts);
    opts.max_attempts = 0; /* headers alone */
    long long headers_alone = one_job_costs(&e, &opts);
    fprintf(stderr, "commands per job: plain %lld, options %lld, headers %lld, headers alone %lld\n",
            plain, with_options, with_headers, headers_alone);
    ASSERT(plain > 0);
    ASSERT_EQ(with_options, with_headers);
    ASSERT_EQ(with_options, headers_alone);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* ---- headers returned with outcomes ------------------------------------------ */

/* What an await's callback got of its outcome's headers. */
typedef struct awaited_headers {
    int done, status;
    size_t n;
    char keys[RJQ_HEADERS_MAX][RJQ_HEADER_KEY_MAX + 1];
    char values[RJQ_HEADERS_MAX][128];
    char tp[128];
    int missing_is_null;
} awaited_headers;

static void on_awaited_headers(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    awaited_headers *w = data;
    (void)c;
    w->status = status;
    ASSERT(o != NULL);
    ASSERT(o->nheaders == 0 ? o->headers == NULL : o->headers != NULL);
    const char *k, *v;
    for (w->n = 0; rjq_outcome_get_header_at(o, w->n, &k, &v); w->n++) {
        snprintf(w->keys[w->n], sizeof w->keys[w->n], "%s", k);
        snprintf(w->values[w->n], sizeof w->values[w->n], "%s", v);
    }
    ASSERT_EQ((long)o->nheaders, (long)w->n);
    snprintf(w->tp, sizeof w->tp, "%s", (v = rjq_outcome_get_header(o, "traceparent")) ? v : "");
    w->missing_is_null = rjq_outcome_get_header(o, "nope") == NULL &&
                         rjq_outcome_get_header(o, NULL) == NULL &&
                         rjq_outcome_get_header(NULL, "traceparent") == NULL &&
                         rjq_outcome_get_header_at(NULL, 0, &k, &v) == 0;
    w->done++;
}

static void check_awaited_three(const awaited_headers *w) {
    ASSERT_OK(w->status);
    ASSERT(w->missing_is_null);
    ASSERT_EQ(3, (long)w->n);
    for (int i = 0; i < 3; i++) {
        ASSERT_STREQ(three[i].key, w->keys[i]);
        ASSERT_STREQ(three[i].value, w->values[i]);
    }
    ASSERT_STREQ(TP, w->tp);
}

/* rjq_enqueue_await: the outcome gives the headers the job was enqueued
 * with, kept by the producer: an awaited job with headers runs exactly the
 * commands of one with other options (no read of them); one without
 * headers gets none. */
TEST(enqueue_await_outcome_returns_the_headers_enqueued_with_no_command_more) {
    test_env e;
    env_start(&e, "ha");
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    jobs_done = 0;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_it, NULL, &w));
    long long cost[2] = {0, 0};
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.max_attempts = 5;
    for (int with = 0; with < 2; with++) {
        o.headers = with ? three : NULL;
        o.nheaders = with ? 3 : 0;
        for (int k = 0; k < 2; k++) { /* the second of each is measured */
            wait_worker_started(e.base, e.c, e.q, e.rc, "ha");
            long long before = server_commands_run(e.rc);
            awaited_headers a;
            memset(&a, 0, sizeof a);
            ASSERT_OK(rjq_enqueue_await(e.q, "x", 1, &o, NULL, on_awaited_headers, &a, NULL));
            ASSERT(loop_until(e.base, &a.done, 5000));
            ASSERT_OK(a.status);
            if (with) check_awaited_three(&a);
            else ASSERT_EQ(0, (long)a.n);
            wait_worker_started(e.base, e.c, e.q, e.rc, "ha");
            cost[with] = server_commands_run(e.rc) - before;
        }
    }
    fprintf(stderr, "commands per awaited job: options %lld, options and headers %lld\n", cost[0],
            cost[1]);
    ASSERT_EQ(cost[0], cost[1]);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* rjq_queue_await by id of a job enqueued elsewhere: the watch script
 * reads its headers with its state, for a job still waiting (its outcome
 * published later, without them) and for one that finished; a job
 * without headers gives none; an rjq_enqueue_await whose id named an
 * existing job gets that job's headers, not the ones it asked for. */
TEST(queue_await_outcome_returns_the_jobs_stored_headers_pending_or_finished) {
    test_env e;
    env_start(&e, "hw");
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.headers = three;
    o.nheaders = 3;
    o.id = "with";
    ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
    ASSERT_OK(enqueue_job(e.base, e.q, "y", &(rjq_job_options){.size = sizeof o, .id = "without"})
                  .status);
    /* awaited while waiting (no worker yet) */
    awaited_headers pending, plain;
    memset(&pending, 0, sizeof pending);
    memset(&plain, 0, sizeof plain);
    ASSERT_OK(rjq_queue_await(e.q, "with", NULL, on_awaited_headers, &pending, NULL));
    ASSERT_OK(rjq_queue_await(e.q, "without", NULL, on_awaited_headers, &plain, NULL));
    ASSERT(loop_until_server_int(e.base, e.rc, 1, 5000, "HEXISTS t:{hw}:watchers with"));
    ASSERT(loop_until_server_int(e.base, e.rc, 1, 5000, "HEXISTS t:{hw}:watchers without"));
    ASSERT_EQ(0, pending.done);
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    jobs_done = 0;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_it, NULL, &w));
    ASSERT(loop_until(e.base, &pending.done, 5000));
    ASSERT(loop_until(e.base, &plain.done, 5000));
    check_awaited_three(&pending);
    ASSERT_OK(plain.status);
    ASSERT_EQ(0, (long)plain.n);
    /* awaited once finished: answered from the stored state */
    awaited_headers done;
    memset(&done, 0, sizeof done);
    ASSERT_OK(rjq_queue_await(e.q, "with", NULL, on_awaited_headers, &done, NULL));
    ASSERT(loop_until(e.base, &done.done, 5000));
    check_awaited_three(&done);
    /* an enqueue_await of an existing id: that job's headers (none) */
    awaited_headers existing;
    memset(&existing, 0, sizeof existing);
    rjq_job_options again = o;
    again.id = "without";
    ASSERT_OK(rjq_enqueue_await(e.q, "z", 1, &again, NULL, on_awaited_headers, &existing, NULL));
    ASSERT(loop_until(e.base, &existing.done, 5000));
    ASSERT_OK(existing.status);
    ASSERT_EQ(0, (long)existing.n);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}
