/*
 * Bad input gets a clear error and changes nothing in Redis: invalid queue
 * names, oversize payloads and results, invalid job ids and options, keys
 * of the wrong type, refused authentication, bad URLs, and the error
 * table itself. "Nothing written" is checked with a separate synchronous
 * connection (DBSIZE, or the keys concerned).
 */
#include <rjq/libevent.h>

#include "fixture.h"
#include "rjq_scripts.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

/* ---- helpers --------------------------------------------------------------- */

typedef struct enq_wait {
    int calls, status;
    size_t n;
    int jobs_null;
    char errmsg[160]; /* rjq_client_get_errmsg() as the callback saw it */
} enq_wait;

static void on_enq(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    enq_wait *w = data;
    w->calls++;
    w->status = status;
    w->n = n;
    w->jobs_null = jobs == NULL;
    snprintf(w->errmsg, sizeof w->errmsg, "%s", rjq_client_get_errmsg(c));
}

static long never_calls;
static void never_enq(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)status, (void)jobs, (void)n, (void)data;
    never_calls++;
}

static long long dbsize(redisContext *rc) {
    return server_int(rc, "DBSIZE");
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every key of the queues and every field of every hash, as one string
 * (for "nothing changed" comparisons). The clients' liveness keys
 * ("<prefix>:{clients}:*") change with every beat of a client with workers. */
static void snapshot(redisContext *rc, char *out, size_t cap) {
    size_t used = 0;
    out[0] = '\0';
    redisReply *keys = server_cmd(rc, "EVAL %s 0", "local o = {} for _, k in ipairs(redis.call('KEYS', '*')) do if not string.find(k, ':{clients}:', 1, true) then o[#o + 1] = k end end return o");
    ASSERT(keys->type == REDIS_REPLY_ARRAY);
    const char **names = calloc(keys->elements + 1, sizeof *names);
    ASSERT(names != NULL);
    for (size_t i = 0; i < keys->elements; i++) names[i] = keys->element[i]->str;
    qsort(names, keys->elements, sizeof *names, cmp_str);
    for (size_t i = 0; i < keys->elements; i++) {
        const char *k = names[i];
        redisReply *t = server_cmd(rc, "TYPE %s", k);
        used += (size_t)snprintf(out + used, cap - used, "[%s:%s]", k, t->str);
        ASSERT(used < cap);
        if (strcmp(t->str, "hash") == 0) {
            redisReply *h = server_cmd(rc, "HGETALL %s", k);
            for (size_t f = 0; f < h->elements; f++) {
                used += (size_t)snprintf(out + used, cap - used, "%s;", h->element[f]->str);
                ASSERT(used < cap);
            }
            freeReplyObject(h);
        } else if (strcmp(t->str, "string") == 0) {
            redisReply *v = server_cmd(rc, "GET %s", k);
            used += (size_t)snprintf(out + used, cap - used, "%s;", v->str ? v->str : "");
            ASSERT(used < cap);
            freeReplyObject(v);
        } else if (strcmp(t->str, "list") == 0) {
            used += (size_t)snprintf(out + used, cap - used, "%lld;", server_int(rc, "LLEN %s", k));
        } else if (strcmp(t->str, "zset") == 0) {
            used += (size_t)snprintf(out + used, cap - used, "%lld;", server_int(rc, "ZCARD %s", k));
        }
        ASSERT(used < cap);
        freeReplyObject(t);
    }
    free(names);
    freeReplyObject(keys);
}

/* Give key a value of another type: plant is a command with the key as its
 * one %s (e.g. "SET %s x"). */
static void plant_wrongtype(redisContext *rc, const char *key, const char *plant) {
    freeReplyObject(server_cmd(rc, "DEL %s", key));
    freeReplyObject(server_cmd(rc, plant, key));
}

/* =========================================================================
 * Queue names
 * ====================================================================== */

/* The client's last error names one of two things (b may be NULL). */
typedef struct errmsg_poll {
    rjq_client *c;
    const char *a, *b;
} errmsg_poll;

static int errmsg_has(void *arg) {
    errmsg_poll *p = arg;
    const char *m = rjq_client_get_errmsg(p->c);
    return strstr(m, p->a) != NULL || (p->b && strstr(m, p->b) != NULL);
}

TEST(invalid_queue_names_rejected) {
    test_env env;
    env_start(&env, NULL);
    char long_name[202];
    memset(long_name, 'x', 201);
    long_name[201] = '\0';
    const char *bad[] = {"", "a{b", "a}b", "has space", long_name, "{q}", "tab\there",
                         "new\nline", "del\x7f"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rjq_queue *q = (rjq_queue *)&env.s; /* must be reset to NULL */
        int rc_open = rjq_queue_open(env.c, bad[i], NULL, &q);
        if (rc_open != RJQ_EQUEUENAME)
            FAIL_AT(__FILE__, __LINE__, "name #%zu: expected RJQ_EQUEUENAME, got %d", i, rc_open);
        ASSERT(q == NULL);
    }
    ASSERT(strstr(rjq_client_get_errmsg(env.c), "queue name") != NULL);
    rjq_queue *probe = queue_for(env.c, "probe");
    ASSERT_OK(stats_of(env.base, probe).status); /* a round trip (stats write nothing) */
    ASSERT_EQ(0, dbsize(env.rc));

    /* The limits themselves are fine: 200 bytes, any other printable byte. */
    rjq_queue *q = NULL;
    long_name[200] = '\0';
    ASSERT_OK(rjq_queue_open(env.c, long_name, NULL, &q));
    ASSERT(q != NULL);
    ASSERT_STREQ(long_name, rjq_queue_get_name(q));
    ASSERT_OK(rjq_queue_open(env.c, "a:b-c.d/e[f]", NULL, &q));
    enq_wait e = {0};
    ASSERT_OK(rjq_enqueue(q, "x", 1, NULL, on_enq, &e));
    ASSERT(loop_until(env.base, &e.calls, 10000));
    ASSERT_OK(e.status);
    ASSERT_EQ(1, server_int(env.rc, "LLEN %s", "t:{a:b-c.d/e[f]}:ready"));

    env_stop(&env);
}

/* =========================================================================
 * Sizes
 * ====================================================================== */

static rjq_client *client_with(struct event_base *base, const test_server *s, size_t max_payload) {
    rjq_client_options o = RJQ_CLIENT_OPTIONS_INIT;
    o.url = s->url;
    o.prefix = "t";
    o.max_payload = max_payload;
    return client_new(base, &o);
}

TEST(oversize_payload_rejected_nothing_written) {
    test_server s;
    server_start_guarded(&s, NULL);
    struct event_base *base = event_base_new();
    rjq_client *c = client_with(base, &s, 100);
    rjq_queue *q = queue_for(c, "big");
    redisContext *rc = server_connect(&s);
    char buf[101];
    memset(buf, 'b', sizeof buf);

    ASSERT_EQ(RJQ_ETOOBIG, rjq_enqueue(q, buf, 101, NULL, never_enq, NULL));
    /* One bad item fails the whole batch. */
    rjq_enqueue_item items[3] = {{sizeof(rjq_enqueue_item), buf, 10, NULL}, {sizeof(rjq_enqueue_item), buf, 101, NULL}, {sizeof(rjq_enqueue_item), buf, 1, NULL}};
    ASSERT_EQ(RJQ_ETOOBIG, rjq_enqueue_batch(q, items, 3, never_enq, NULL));
    stats_wait st = stats_of(base, q); /* anything sent would have run by now */
    ASSERT_OK(st.status);
    ASSERT_EQ(0, st.s.enqueued);
    ASSERT_EQ(0, never_calls);
    ASSERT_EQ(0, dbsize(rc));

    /* Exactly the limit is accepted. */
    enq_wait e = {0};
    ASSERT_OK(rjq_enqueue(q, buf, 100, NULL, on_enq, &e));
    ASSERT(loop_until(base, &e.calls, 10000));
    ASSERT_OK(e.status);
    ASSERT(dbsize(rc) > 0);

    rjq_client_free(c);
    event_base_free(base);
    redisFree(rc);
    server_stop_guarded(&s);
}

/* =========================================================================
 * Job ids and options
 * ====================================================================== */

TEST(invalid_job_ids_and_options_rejected) {
    test_env env;
    env_start(&env, "ids");
    char long_id[202];
    memset(long_id, 'i', 201);
    long_id[201] = '\0';

    const char *bad_ids[] = {"12345", "0", "has space", long_id, "", "tab\tid", "nl\n"};
    for (size_t i = 0; i < sizeof bad_ids / sizeof bad_ids[0]; i++) {
        rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
        o.id = bad_ids[i];
        int rc_enq = rjq_enqueue(env.q, "p", 1, &o, never_enq, NULL);
        if (rc_enq != RJQ_EJOBID)
            FAIL_AT(__FILE__, __LINE__, "id #%zu: expected RJQ_EJOBID, got %d", i, rc_enq);
    }
    /* A bad id anywhere fails the whole batch. */
    rjq_job_options good = RJQ_JOB_OPTIONS_INIT, bad = RJQ_JOB_OPTIONS_INIT;
    good.id = "fine-1";
    bad.id = "999";
    rjq_enqueue_item items[2] = {{sizeof(rjq_enqueue_item), "a", 1, &good}, {sizeof(rjq_enqueue_item), "b", 1, &bad}};
    ASSERT_EQ(RJQ_EJOBID, rjq_enqueue_batch(env.q, items, 2, never_enq, NULL));

    struct {
        const char *what;
        rjq_job_options o;
    } bad_opts[] = {
        {"priority above max", {.size = sizeof(rjq_job_options), .priority = RJQ_PRIORITY_MAX + 1}},
        {"priority below min", {.size = sizeof(rjq_job_options), .priority = RJQ_PRIORITY_MIN - 1}},
        {"negative delay", {.size = sizeof(rjq_job_options), .delay_ms = -1}},
        {"negative max_attempts", {.size = sizeof(rjq_job_options), .max_attempts = -1}},
        {"unknown backoff type", {.size = sizeof(rjq_job_options), .backoff = {(rjq_backoff_type)7, 100, 0}}},
        {"negative backoff base", {.size = sizeof(rjq_job_options), .backoff = {RJQ_BACKOFF_FIXED, -5, 0}}},
        {"negative backoff cap", {.size = sizeof(rjq_job_options), .backoff = {RJQ_BACKOFF_EXPONENTIAL, 100, -1}}},
    };
    for (size_t i = 0; i < sizeof bad_opts / sizeof bad_opts[0]; i++) {
        int rc_enq = rjq_enqueue(env.q, "p", 1, &bad_opts[i].o, never_enq, NULL);
        if (rc_enq != RJQ_EINVAL)
            FAIL_AT(__FILE__, __LINE__, "%s: expected RJQ_EINVAL, got %d", bad_opts[i].what, rc_enq);
    }
    /* Arguments of the calls themselves. */
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue(env.q, NULL, 5, NULL, never_enq, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue_batch(env.q, items, 0, never_enq, NULL));
    rjq_enqueue_item *many = calloc(RJQ_BATCH_MAX + 1, sizeof *many);
    ASSERT(many != NULL);
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue_batch(env.q, many, RJQ_BATCH_MAX + 1, never_enq, NULL));
    free(many);

    stats_wait st = stats_of(env.base, env.q);
    ASSERT_OK(st.status);
    ASSERT_EQ(0, st.s.enqueued);
    ASSERT_EQ(0, never_calls);
    ASSERT_EQ(0, dbsize(env.rc));

    /* The limits themselves are fine. */
    long_id[200] = '\0';
    rjq_job_options ok = RJQ_JOB_OPTIONS_INIT;
    ok.id = long_id;
    ok.priority = RJQ_PRIORITY_MIN;
    enq_wait e = {0};
    ASSERT_OK(rjq_enqueue(env.q, "p", 1, &ok, on_enq, &e));
    ok.id = "123a";
    ok.priority = RJQ_PRIORITY_MAX;
    ASSERT_OK(rjq_enqueue(env.q, "p", 1, &ok, on_enq, &e));
    WAIT_FOR(env.base, e.calls >= 2, 20000);
    ASSERT_EQ(2, e.calls);
    ASSERT_OK(e.status);
    ASSERT_EQ(2, stats_of(env.base, env.q).s.enqueued);

    env_stop(&env);
}

/* =========================================================================
 * Keys of the wrong type
 * ====================================================================== */

TEST(wrongtype_key_reported_nothing_written) {
    test_env env;
    env_start(&env, "q");

    /* One job first, so the queue's stats exist and can be compared. */
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "before";
    enq_wait e = {0};
    ASSERT_OK(rjq_enqueue(env.q, "x", 1, &o, on_enq, &e));
    ASSERT(loop_until(env.base, &e.calls, 10000));
    ASSERT_OK(e.status);
    plant_wrongtype(env.rc, "t:{q}:ready", "SET %s x");
    static char before[8192], after[8192];
    snapshot(env.rc, before, sizeof before);

    /* Explicit id, server-assigned id, delayed, batch: all refused. */
    o.id = "j2";
    memset(&e, 0, sizeof e);
    ASSERT_OK(rjq_enqueue(env.q, "y", 1, &o, on_enq, &e));
    ASSERT(loop_until(env.base, &e.calls, 10000));
    ASSERT_EQ(1, e.calls);
    ASSERT_EQ(RJQ_EWRONGTYPE, e.status);
    ASSERT_EQ(0, e.n);
    ASSERT(e.jobs_null);
    ASSERT(strstr(rjq_client_get_errmsg(env.c), "WRONGTYPE") != NULL);

    memset(&e, 0, sizeof e);
    ASSERT_OK(rjq_enqueue(env.q, "z", 1, NULL, on_enq, &e));
    rjq_job_options d = RJQ_JOB_OPTIONS_INIT;
    d.delay_ms = 1000;
    enq_wait e2 = {0};
    ASSERT_OK(rjq_enqueue(env.q, "d", 1, &d, on_enq, &e2));
    rjq_enqueue_item items[2] = {{sizeof(rjq_enqueue_item), "b1", 2, NULL}, {sizeof(rjq_enqueue_item), "b2", 2, NULL}};
    enq_wait e3 = {0};
    ASSERT_OK(rjq_enqueue_batch(env.q, items, 2, on_enq, &e3));
    ASSERT(loop_until(env.base, &e3.calls, 10000));
    ASSERT_EQ(RJQ_EWRONGTYPE, e.status);
    ASSERT_EQ(RJQ_EWRONGTYPE, e2.status);
    ASSERT_EQ(RJQ_EWRONGTYPE, e3.status);
    ASSERT_EQ(0, e3.n);

    /* Stats read the same keys: refused too, not a crash or garbage. */
    stats_wait st = stats_of(env.base, env.q);
    ASSERT_EQ(RJQ_EWRONGTYPE, st.status);

    ASSERT_EQ(0, server_int(env.rc, "HEXISTS t:{q}:payload j2"));
    snapshot(env.rc, after, sizeof after);
    ASSERT_STREQ(before, after);

    freeReplyObject(server_cmd(env.rc, "DEL t:{q}:ready"));

    /* Each other key an enqueue reads or writes, given the wrong type in
     * turn: refused, the key named in the message, nothing changed. */
    static const struct {
        const char *key, *plant; /* plant: a command putting another type at key */
        long long delay_ms;
        int priority;
    } cases[] = {
        {"t:{q}:delayed", "HSET %s f v", 1000, 0},
        {"t:{q}:prio", "SET %s x", 0, 0},
        {"t:{q}:stats", "SET %s x", 0, 0},
        {"t:{q}:idle", "SADD %s x", 0, 0},
        {"t:{q}:payload", "SET %s x", 0, 0},
        {"t:{q}:options", "LPUSH %s x", 0, 5},
        {"t:{q}:state", "SET %s x", 1000, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        plant_wrongtype(env.rc, cases[i].key, cases[i].plant);
        snapshot(env.rc, before, sizeof before);
        rjq_job_options k = RJQ_JOB_OPTIONS_INIT;
        k.id = "j3";
        k.delay_ms = cases[i].delay_ms;
        k.priority = cases[i].priority;
        memset(&e, 0, sizeof e);
        ASSERT_OK(rjq_enqueue(env.q, "y", 1, &k, on_enq, &e));
        ASSERT(loop_until(env.base, &e.calls, 10000));
        ASSERT_EQ(RJQ_EWRONGTYPE, e.status);
        ASSERT(strstr(e.errmsg, cases[i].key) != NULL);
        snapshot(env.rc, after, sizeof after);
        ASSERT_STREQ(before, after);
        freeReplyObject(server_cmd(env.rc, "DEL %s", cases[i].key));
    }

    /* A key the call does not touch is not its business: an enqueue
     * without delay goes through with a wrongly typed delayed set. */
    freeReplyObject(server_cmd(env.rc, "HSET %s f v", "t:{q}:delayed"));
    ASSERT_EQ(1, server_int(env.rc, "HEXISTS t:{q}:delayed f")); /* planted */
    memset(&e, 0, sizeof e);
    ASSERT_OK(rjq_enqueue(env.q, "y", 1, &o, on_enq, &e));
    ASSERT(loop_until(env.base, &e.calls, 10000));
    ASSERT_OK(e.status);
    ASSERT_EQ(1, server_int(env.rc, "HEXISTS t:{q}:payload j2"));

    env_stop(&env);
}

/* The usual enqueue (anonymous jobs of priority 0, ready at once) spares
 * the TYPE of the job columns: the sequence counter is its first write,
 * the columns' own writes check their types, and a refused one undoes
 * what the call wrote before it (undoable in lib.lua). So a wrongly typed
 * column must still leave everything as it was, the counter included: on
 * the queue's very first enqueue (the counter absent: deleted again) and
 * on a later one (counted back), for a plain job, an awaited one (the
 * watchers column, written last), and one with options. */
/* An await's end as an enqueue's (its enqueue refused: no outcome). */
static void on_awaited_enq(rjq_client *c, int status, const rjq_outcome *out, void *data) {
    on_enq(c, status, NULL, out != NULL, data);
}

static void enqueue_on_wrongtype_column(const char *key, int first, int awaited, int with_opts) {
    test_env env;
    env_start(&env, "q");
    enq_wait e = {0};
    if (!first) {
        ASSERT_OK(rjq_enqueue(env.q, "x", 1, NULL, on_enq, &e));
        ASSERT(loop_until(env.base, &e.calls, 10000));
        ASSERT_OK(e.status);
    } else { /* (the registry entry the client writes on the queue's first use) */
        freeReplyObject(server_cmd(env.rc, "ZADD t:queues 0 q"));
    }
    plant_wrongtype(env.rc, key, "SADD %s x");
    static char before[8192], after[8192];
    snapshot(env.rc, before, sizeof before);
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.max_attempts = 7;
    memset(&e, 0, sizeof e);
    if (awaited) {
        ASSERT_OK(rjq_enqueue_await(env.q, "y", 1, with_opts ? &o : NULL, NULL, on_awaited_enq, &e, NULL));
    } else {
        ASSERT_OK(rjq_enqueue(env.q, "y", 1, with_opts ? &o : NULL, on_enq, &e));
    }
    ASSERT(loop_until(env.base, &e.calls, 10000));
    ASSERT_EQ(RJQ_EWRONGTYPE, e.status);
    ASSERT(strstr(e.errmsg, key) != NULL);
    snapshot(env.rc, after, sizeof after);
    ASSERT_STREQ(before, after);
    freeReplyObject(server_cmd(env.rc, "DEL %s", key));
    /* and the next one goes through, numbered as if nothing happened */
    memset(&e, 0, sizeof e);
    ASSERT_OK(rjq_enqueue(env.q, "z", 1, NULL, on_enq, &e));
    ASSERT(loop_until(env.base, &e.calls, 10000));
    ASSERT_OK(e.status);
    ASSERT_EQ(1, server_int(env.rc, first ? "HEXISTS t:{q}:payload 1" : "HEXISTS t:{q}:payload 2"));
    env_stop(&env);
}

TEST(anonymous_enqueue_on_wrongtype_payload_column_writes_nothing) {
    enqueue_on_wrongtype_column("t:{q}:payload", 0, 0, 0);
    enqueue_on_wrongtype_column("t:{q}:payload", 1, 0, 0);
}

TEST(anonymous_enqueue_on_wrongtype_state_column_writes_nothing) {
    enqueue_on_wrongtype_column("t:{q}:state", 0, 0, 0);
    enqueue_on_wrongtype_column("t:{q}:state", 1, 1, 1);
}

TEST(anonymous_enqueue_on_wrongtype_options_column_writes_nothing) {
    enqueue_on_wrongtype_column("t:{q}:options", 0, 0, 1);
    enqueue_on_wrongtype_column("t:{q}:options", 1, 1, 1);
}

TEST(awaited_enqueue_on_wrongtype_watchers_column_writes_nothing) {
    enqueue_on_wrongtype_column("t:{q}:watchers", 0, 1, 0);
    enqueue_on_wrongtype_column("t:{q}:watchers", 1, 1, 1);
}

typedef struct held_job {
    rjq_job *job;
    int handled, awaited, await_status;
    int done, done_status;
    /* optional: the job record (job_record) read when the call is
     * answered, before the worker can claim the job again */
    test_env *snap_env;
    const char *snap_id;
    char *snap;
    size_t snap_cap;
} held_job;

static void job_record(test_env *env, const char *id, char *out, size_t cap);

static void hold_handler(rjq_job *job, void *data) {
    held_job *h = data;
    h->job = job;
    h->handled++;
}

static void on_held_outcome(rjq_client *c, int status, const rjq_outcome *out, void *data) {
    (void)c, (void)out;
    held_job *h = data;
    h->awaited++;
    h->await_status = status;
}

static void on_held_done(rjq_client *c, int status, void *data) {
    (void)c;
    held_job *h = data;
    h->done++;
    h->done_status = status;
    if (h->snap) job_record(h->snap_env, h->snap_id, h->snap, h->snap_cap);
}

int rjq__channel_confirmed(const rjq_client *c, const char *name); /* (core.h: white-box) */

/* Run the loop until the worker on queue q is registered idle and settled:
 * the client has had its doorbell and push channel subscriptions confirmed
 * (each confirmation makes the worker claim again, replacing its
 * registration), and then a command round trip saw no script call but its
 * own. */
typedef struct idle_poll {
    test_env *env;
    const char *q, *wake;
} idle_poll;

/* The worker's wake channel and the push channel of each idle slot are
 * confirmed subscriptions. */
static int idle_registered(void *arg) {
    idle_poll *p = arg;
    redisReply *r = server_cmd(p->env->rc, "HKEYS t:{%s}:idle", p->q);
    int ok = rjq__channel_confirmed(p->env->c, p->wake) && r->type == REDIS_REPLY_ARRAY &&
             r->elements > 0;
    for (size_t k = 0; ok && k < r->elements; k++) {
        const char *ch = strchr(r->element[k]->str, ' ');
        ok = ch != NULL && rjq__channel_confirmed(p->env->c, ch + 1);
    }
    freeReplyObject(r);
    return ok;
}

static void wait_idle_settled(test_env *env, const char *q) {
    char wake[128];
    snprintf(wake, sizeof wake, "t:{%s}:wake", q);
    idle_poll p = {env, q, wake};
    ASSERT(loop_until_cond(env->base, idle_registered, &p, 10000));
    for (int i = 0; i < 100; i++) {
        long long before = server_calls(env->rc, "fcall") + server_calls(env->rc, "evalsha");
        (void)get_stats(env->base, env->q); /* one script call */
        if (server_calls(env->rc, "fcall") + server_calls(env->rc, "evalsha") == before + 1) return;
    }
    FAIL_AT(__FILE__, __LINE__, "the worker's claims did not settle");
}

/* A job waits in queue q's ready list. */
typedef struct ready_poll {
    test_env *env;
    const char *q;
} ready_poll;

static int job_ready(void *arg) {
    ready_poll *p = arg;
    redisReply *r = server_cmd(p->env->rc, "LLEN t:{%s}:ready", p->q);
    int ok = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    return ok;
}

/* A completion refused for a wrongly typed key must not announce the job
 * as completed (to its awaiting producer or to monitors) before refusing:
 * the script checks before it writes or publishes anything. The worker
 * (concurrency 2, one job held) is registered idle with its other slot,
 * so the completion also offers the freed slot: the idle hash is read. */
/* Cut the part of key ("[key:type]...;") out of a snapshot. */
static void snapshot_without(char *snap, const char *key) {
    char head[128];
    snprintf(head, sizeof head, "[%s:", key);
    char *at = strstr(snap, head);
    if (at == NULL) return;
    char *end = strchr(at + 1, '[');
    memmove(at, end ? end : at + strlen(at), strlen(end ? end : at + strlen(at)) + 1);
}

static void complete_on_wrongtype_announces_nothing(const char *key) {
    test_env env;
    env_start(&env, "w");
    redisContext *sub = server_connect(&env.s);
    struct timeval tv = {10, 0};
    redisSetTimeout(sub, tv);
    redisReply *r = redisCommand(sub, "PSUBSCRIBE *");
    ASSERT(r != NULL);
    freeReplyObject(r);

    held_job h = {0};
    ASSERT_OK(rjq_enqueue_await(env.q, "p", 1, NULL, NULL, on_held_outcome, &h, NULL));
    /* The job is claimed, not pushed: it waits in ready before the worker
     * starts (an await's enqueue goes once its channel is confirmed, so a
     * worker started at once may register first and get it pushed; a
     * pushed job's completion forgets no token and never reads held). */
    ready_poll rp = {&env, "w"};
    ASSERT(loop_until_cond(env.base, job_ready, &rp, 10000));
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 2;
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(env.q, &wo, hold_handler, &h, &w));
    ASSERT(loop_until(env.base, &h.handled, 10000));
    wait_idle_settled(&env, "w"); /* the short claim registered the slot, for good */

    plant_wrongtype(env.rc, key, "SET %s x");
    static char before[8192], after[8192];
    snapshot(env.rc, before, sizeof before);
    ASSERT_OK(rjq_job_complete(h.job, "res", 3, on_held_done, &h));
    ASSERT(loop_until(env.base, &h.done, 10000));
    ASSERT_EQ(RJQ_EWRONGTYPE, h.done_status);
    snapshot(env.rc, after, sizeof after);
    if (strstr(key, ":completed") || strstr(key, ":stats")) {
        /* the worker claims with the slot it freed (a claim does not read
         * the retention index or the counters): its registration may
         * change meanwhile */
        snapshot_without(before, "t:{w}:idle");
        snapshot_without(after, "t:{w}:idle");
    }
    ASSERT_STREQ(before, after);

    /* Messages reach a subscriber in publish order: whatever the refused
     * call published arrived before this marker. */
    r = server_cmd(env.rc, "PUBLISH rjq-test-marker end");
    freeReplyObject(r);
    int completions = 0;
    for (;;) {
        ASSERT_EQ(REDIS_OK, redisGetReply(sub, (void **)&r));
        ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4);
        int marker = strcmp(r->element[2]->str, "rjq-test-marker") == 0;
        if (strncmp(r->element[3]->str, "completed", 9) == 0) completions++;
        freeReplyObject(r);
        if (marker) break;
    }
    ASSERT_EQ(0, completions);
    ASSERT_EQ(0, h.awaited);

    redisFree(sub);
    env_stop(&env);
}

TEST(complete_on_wrongtype_active_announces_nothing) {
    complete_on_wrongtype_announces_nothing("t:{w}:active");
}

/* The idle hash is checked by the read of the registrations the offer
 * updates (no TYPE call), still before the first write. */
TEST(complete_offering_a_slot_on_wrongtype_idle_announces_nothing) {
    complete_on_wrongtype_announces_nothing("t:{w}:idle");
}

/* The held index is checked before the first write when the batch drops
 * members of it (the completed job's token is forgotten with it). */
TEST(complete_on_wrongtype_held_announces_nothing) {
    complete_on_wrongtype_announces_nothing("t:{w}:held");
}

/* The retention index is the completion's first write (it checks its own
 * type, and is undone when the removal from active that follows it is
 * refused: complete_on_wrongtype_active_announces_nothing). */
TEST(complete_on_wrongtype_completed_index_announces_nothing) {
    complete_on_wrongtype_announces_nothing("t:{w}:completed");
}

/* The count of retained jobs is now the completion's first write (its
 * reply says whether the retention sweep is due; no HMGET of stats before
 * it): a wrongly typed stats hash refuses the completion with nothing
 * written, and the count is undone when a later write is refused (the
 * queue's first completion: the field was absent and is deleted again;
 * complete_on_wrongtype_active_announces_nothing). */
TEST(complete_on_wrongtype_stats_announces_nothing) {
    complete_on_wrongtype_announces_nothing("t:{w}:stats");
}

/* An enqueue that pushes its jobs to an idle worker writes their lease
 * (active) right after the job columns, and that ZADD checks active's type
 * (no TYPE call): refused, it undoes the columns and the counter, so a
 * wrongly typed active set leaves everything as it was (on the queue's
 * first enqueue, the counter absent, and on a later one), nothing is
 * pushed, and the next job, with active fixed, is pushed and handled. */
static void pushed_enqueue_on_wrongtype_active(int first, int awaited) {
    test_env env;
    env_start(&env, "pa");
    held_job h = {0};
    rjq_worker_options wo = quiet_worker_options(2);
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(env.q, &wo, hold_handler, &h, &w));
    if (!first) {
        enqueue_x_ok(env.base, env.q, NULL, 0, 0);
        ASSERT(loop_until(env.base, &h.handled, 10000));
        ASSERT_OK(rjq_job_complete(h.job, "", 0, on_held_done, &h));
        ASSERT(loop_until(env.base, &h.done, 10000));
        ASSERT_OK(h.done_status);
        h.handled = 0;
    }
    wait_idle_settled(&env, "pa"); /* registered: an enqueue pushes to it */
    plant_wrongtype(env.rc, "t:{pa}:active", "SADD %s x");
    static char before[8192], after[8192];
    snapshot(env.rc, before, sizeof before);
    enq_wait e = {0};
    if (awaited) {
        ASSERT_OK(rjq_enqueue_await(env.q, "y", 1, NULL, NULL, on_awaited_enq, &e, NULL));
    } else {
        ASSERT_OK(rjq_enqueue(env.q, "y", 1, NULL, on_enq, &e));
    }
    ASSERT(loop_until(env.base, &e.calls, 10000));
    ASSERT_EQ(RJQ_EWRONGTYPE, e.status);
    ASSERT(strstr(e.errmsg, "t:{pa}:active") != NULL);
    snapshot(env.rc, after, sizeof after);
    ASSERT_STREQ(before, after);
    ASSERT_EQ(0, h.handled);

    freeReplyObject(server_cmd(env.rc, "DEL t:{pa}:active"));
    held_job a = {0};
    ASSERT_OK(rjq_enqueue_await(env.q, "z", 1, NULL, NULL, on_held_outcome, &a, NULL));
    ASSERT(loop_until(env.base, &h.handled, 10000));
    ASSERT_EQ(1, h.handled);
    /* numbered as if nothing happened */
    ASSERT_STREQ(first ? "1" : "2", rjq_job_get_id(h.job));
    ASSERT_OK(rjq_job_complete(h.job, "", 0, on_held_done, &h));
    ASSERT(loop_until(env.base, &a.awaited, 10000));
    ASSERT_OK(a.await_status);
    env_stop(&env);
}

TEST(pushed_enqueue_on_wrongtype_active_writes_nothing) {
    pushed_enqueue_on_wrongtype_active(1, 0);
    pushed_enqueue_on_wrongtype_active(0, 0);
}

TEST(pushed_awaited_enqueue_on_wrongtype_active_writes_nothing) {
    pushed_enqueue_on_wrongtype_active(1, 1);
    pushed_enqueue_on_wrongtype_active(0, 1);
}

/* A pushed job's completion takes the lean script (complete_one.lua,
 * docs/scripts.md "The lean pair"), whose writes check their own keys'
 * types (no TYPE call, not even of the result column): the count of
 * retained jobs first, then the retention index, the result and the
 * lease's removal, each undone when a later one is refused. A wrongly
 * typed key (with result_there, the result field already there, so its
 * write cannot be undone exactly and the lease set is checked by TYPE
 * before anything else is written) refuses the completion with nothing
 * written and nothing announced to the awaiting producer. */
static void pushed_complete_on_wrongtype(const char *key, int result_there) {
    test_env env;
    env_start(&env, "pc");
    held_job h = {0};
    rjq_worker_options wo = quiet_worker_options(2);
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(env.q, &wo, hold_handler, &h, &w));
    wait_idle_settled(&env, "pc"); /* registered: the enqueue pushes to it */
    held_job a = {0};
    ASSERT_OK(rjq_enqueue_await(env.q, "y", 1, NULL, NULL, on_held_outcome, &a, NULL));
    ASSERT(loop_until(env.base, &h.handled, 10000));
    const char *id = rjq_job_get_id(h.job);
    if (result_there) freeReplyObject(server_cmd(env.rc, "HSET t:{pc}:result %s old", id));
    plant_wrongtype(env.rc, key, "SET %s x");
    static char before[8192], after[8192];
    snapshot(env.rc, before, sizeof before);
    ASSERT_OK(rjq_job_complete(h.job, "res", 3, on_held_done, &h));
    ASSERT(loop_until(env.base, &h.done, 10000));
    ASSERT_EQ(RJQ_EWRONGTYPE, h.done_status);
    subscriber_barrier(env.base, env.c, env.rc); /* an outcome published would have come */
    snapshot(env.rc, after, sizeof after);
    /* (the worker may claim with the slot the refused completion kept) */
    snapshot_without(before, "t:{pc}:idle");
    snapshot_without(after, "t:{pc}:idle");
    ASSERT_STREQ(before, after);
    ASSERT_EQ(0, a.awaited);
    env_stop(&env);
}

TEST(pushed_complete_on_wrongtype_result_column_writes_nothing) {
    pushed_complete_on_wrongtype("t:{pc}:result", 0);
}

TEST(pushed_complete_on_wrongtype_completed_index_writes_nothing) {
    pushed_complete_on_wrongtype("t:{pc}:completed", 0);
}

TEST(pushed_complete_on_wrongtype_stats_writes_nothing) {
    pushed_complete_on_wrongtype("t:{pc}:stats", 0);
}

TEST(pushed_complete_on_wrongtype_active_writes_nothing) {
    pushed_complete_on_wrongtype("t:{pc}:active", 0);
    pushed_complete_on_wrongtype("t:{pc}:active", 1);
}

static void count_handled(rjq_job *job, void *data) {
    ++*(int *)data;
    ASSERT_OK(rjq_job_complete(job, NULL, 0, NULL, NULL));
}

/* A worker's claim on queue q, with a wrongly typed key that plant() made
 * (its name in the error: key), is refused before anything is written,
 * however often it is tried; once restore() undid it, the job runs. */
static void claim_refused_by_wrongtype_job(const char *q, const char *key,
                                           void (*plant)(redisContext *rc),
                                           void (*restore)(redisContext *rc),
                                           const rjq_job_options *jo) {
    test_env env;
    env_start(&env, q);
    enq_wait e = {0};
    ASSERT_OK(rjq_enqueue(env.q, "x", 1, jo, on_enq, &e));
    ASSERT(loop_until(env.base, &e.calls, 10000));
    ASSERT_OK(e.status);
    plant(env.rc);
    static char before[8192], after[8192];
    snapshot(env.rc, before, sizeof before);

    int handled = 0;
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.poll_ms = 50; /* a failed claim is tried again after poll_ms */
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(env.q, &wo, count_handled, &handled, &w));
    WAIT_FOR(env.base, strstr(rjq_client_get_errmsg(env.c), key) != NULL, 20000);
    ASSERT(strstr(rjq_client_get_errmsg(env.c), "WRONGTYPE") != NULL);
    /* a few more tries (each a script call, refused) */
    ASSERT(loop_until_script_calls(env.base, env.rc, server_script_calls(env.rc) + 3, 10000));
    ASSERT_EQ(0, handled);
    snapshot(env.rc, after, sizeof after);
    ASSERT_STREQ(before, after);

    restore(env.rc);
    WAIT_FOR(env.base, handled != 0, 20000);
    ASSERT_EQ(1, handled);
    env_stop(&env);
}

static void claim_refused_by_wrongtype(const char *q, const char *key,
                                       void (*plant)(redisContext *rc),
                                       void (*restore)(redisContext *rc)) {
    claim_refused_by_wrongtype_job(q, key, plant, restore, NULL);
}

static void plant_held(redisContext *rc) {
    plant_wrongtype(rc, "t:{h}:held", "SET %s x");
}

static void restore_held(redisContext *rc) {
    freeReplyObject(server_cmd(rc, "DEL t:{h}:held"));
}

/* A claim reads the held index first (is it a re-send?): a wrongly typed
 * one refuses the claim before anything is written; once fixed, the job
 * runs. */
TEST(claim_on_wrongtype_held_changes_nothing) {
    claim_refused_by_wrongtype("h", "t:{h}:held", plant_held, restore_held);
}

static void plant_payload(redisContext *rc) {
    freeReplyObject(server_cmd(rc, "RENAME t:{pl}:payload t:{pl}:saved"));
    freeReplyObject(server_cmd(rc, "SET t:{pl}:payload x"));
}

static void restore_payload(redisContext *rc) {
    freeReplyObject(server_cmd(rc, "DEL t:{pl}:payload"));
    freeReplyObject(server_cmd(rc, "RENAME t:{pl}:saved t:{pl}:payload"));
}

/* A claim takes its jobs off the ready list, then reads their payloads (or
 * leaves that to the worker): with the payload column of the wrong type it
 * used to pop the ids and fail on that read, losing them. It is refused
 * before its first write, and once the column is back, the job runs. */
TEST(claim_on_wrongtype_payload_column_loses_nothing) {
    claim_refused_by_wrongtype("pl", "t:{pl}:payload", plant_payload, restore_payload);
}

/* A claim that promotes a due priority job gives it a sequence number from
 * the stats hash: with stats of the wrong type it is refused before its
 * first write (the job stays delayed, nothing changes), and once stats is
 * fixed the job runs. */
TEST(claim_promoting_a_due_priority_job_on_wrongtype_stats_changes_nothing) {
    test_env env;
    env_start(&env, "p");

    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "due";
    o.priority = 5;
    o.delay_ms = 50;
    enq_wait e = {0};
    ASSERT_OK(rjq_enqueue(env.q, "x", 1, &o, on_enq, &e));
    ASSERT(loop_until(env.base, &e.calls, 10000));
    ASSERT_OK(e.status);
    long long due = server_int(env.rc, "ZSCORE t:{p}:delayed due");
    ASSERT(loop_until_server_ms(env.base, env.rc, due, 10000)); /* due on the server's clock */
    plant_wrongtype(env.rc, "t:{p}:stats", "SET %s x");
    static char before[8192], after[8192];
    snapshot(env.rc, before, sizeof before);

    int handled = 0;
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 1;
    wo.poll_ms = 50; /* each poll claims again */
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(env.q, &wo, count_handled, &handled, &w));
    WAIT_FOR(env.base, strstr(rjq_client_get_errmsg(env.c), "t:{p}:stats") != NULL, 20000);
    ASSERT(strstr(rjq_client_get_errmsg(env.c), "WRONGTYPE") != NULL);
    ASSERT(strstr(rjq_client_get_errmsg(env.c), "t:{p}:stats") != NULL);
    /* a few more polls (each a script call, refused) */
    ASSERT(loop_until_script_calls(env.base, env.rc, server_script_calls(env.rc) + 3, 10000));
    ASSERT_EQ(0, handled);
    snapshot(env.rc, after, sizeof after);
    ASSERT_STREQ(before, after);

    freeReplyObject(server_cmd(env.rc, "DEL t:{p}:stats"));
    WAIT_FOR(env.base, handled != 0, 20000);
    ASSERT_EQ(1, handled);

    env_stop(&env);
}
/* =========================================================================
 * Authentication
 * ====================================================================== */

typedef struct ev_log {
    int errors, connected;
    int error_conn_cmd;
    char detail[256];
} ev_log;

static void on_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    (void)c;
    ev_log *l = data;
    if (ev == RJQ_EVENT_ERROR) {
        l->errors++;
        if (conn == RJQ_CONN_COMMAND) l->error_conn_cmd++;
        snprintf(l->detail, sizeof l->detail, "%s", detail ? detail : "");
    } else if (ev == RJQ_EVENT_CONNECTED) {
        l->connected++;
    }
}

/* A server with requirepass, a synchronous connection that logged in, and
 * a loop: the fixture without its client (enqueue_as makes it). */
static void auth_env_start(test_env *env) {
    const char *const extra[] = {"--requirepass", "secret", NULL};
    memset(env, 0, sizeof *env);
    server_start_guarded(&env->s, extra);
    env->rc = server_connect(&env->s);
    redisReply *r = server_cmd(env->rc, "AUTH secret");
    ASSERT(r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    env->base = event_base_new();
    ASSERT(env->base != NULL);
}

typedef struct refused_poll {
    const ev_log *log;
    int refused; /* error_conn_cmd then */
} refused_poll;

static int refused_again(void *arg) {
    refused_poll *p = arg;
    return p->log->error_conn_cmd > p->refused;
}

/* A client for url (env->c, its events in log) and one enqueue on its
 * queue "auth" (env->q): the enqueue's answer. */
static void on_monitor_event(rjq_client *c, const char *ev, const char *id, void *data) {
    (void)c, (void)ev, (void)id, (void)data;
}

static enq_wait enqueue_as(test_env *env, const char *url, ev_log *log) {
    rjq_client_options o = client_options(url);
    o.on_event = on_event;
    o.event_data = log;
    env->c = client_new(env->base, &o);
    env->q = queue_for(env->c, "auth");
    enq_wait e = {0};
    ASSERT_OK(rjq_enqueue(env->q, "x", 1, NULL, on_enq, &e));
    ASSERT(loop_until(env->base, &e.calls, 10000));
    if (e.status == RJQ_OK) { /* a round trip: a second answer would be in */
        ASSERT_OK(stats_of(env->base, env->q).status);
    } else { /* refused: the next session set-up is refused too (a second answer came by then) */
        int refused = log->error_conn_cmd;
        ASSERT(loop_until_cond(env->base, refused_again, &(refused_poll){log, refused}, 10000));
    }
    ASSERT_EQ(1, e.calls);
    return e;
}

/* Round trips on env's client's two connections (the command connection:
 * stats; the subscriber: a monitor's subscription confirmed) after its
 * session was set up: a connection dropped for the refusal would have
 * been made again (counted) by the time they come through. */
static void session_stays_up(test_env *env) {
    ASSERT_OK(stats_of(env->base, env->q).status);
    rjq_monitor *m = NULL;
    ASSERT_OK(rjq_queue_monitor(env->q, on_monitor_event, NULL, &m));
    ASSERT(loop_until_numsub(env->base, env->rc, "t:{auth}:events", 1, 10000));
    ASSERT_OK(stats_of(env->base, env->q).status);
    ASSERT_OK(rjq_monitor_stop(m));
}

/* enqueue_as with redis://<userinfo>@127.0.0.1:<the server's port>. */
static enq_wait enqueue_with_userinfo(test_env *env, const char *userinfo, ev_log *log) {
    char url[128];
    snprintf(url, sizeof url, "redis://%s@127.0.0.1:%d", userinfo, env->s.port);
    return enqueue_as(env, url, log);
}

TEST(noauth_without_password_reports_eauth) {
    test_env env;
    auth_env_start(&env);
    ev_log log = {0, 0, 0, ""};
    enq_wait e = enqueue_as(&env, env.s.url, &log);
    if (e.status != RJQ_EAUTH)
        FAIL_AT(__FILE__, __LINE__, "no password: expected RJQ_EAUTH, got %d (%s)", e.status,
                e.errmsg);
    ASSERT_EQ(0, e.n);
    ASSERT(log.error_conn_cmd >= 1); /* the session set-up was refused */
    ASSERT_EQ(0, dbsize(env.rc));
    env_stop(&env);
}

TEST(wrong_password_reports_eauth_and_error_event) {
    test_env env;
    auth_env_start(&env);
    ev_log log = {0, 0, 0, ""};
    enq_wait e = enqueue_with_userinfo(&env, ":wrong", &log);
    if (e.status != RJQ_EAUTH)
        FAIL_AT(__FILE__, __LINE__, "wrong password: expected RJQ_EAUTH, got %d (%s)", e.status,
                e.errmsg);
    ASSERT(log.error_conn_cmd >= 1);
    ASSERT(log.detail[0] != '\0');
    ASSERT_EQ(0, dbsize(env.rc));
    env_stop(&env);
}

/* A user whose ACL forbids CLIENT (no +@connection) gets NOPERM on the
 * CLIENT SETNAME of the session set-up. Only AUTH and SELECT refusals make
 * a session unusable: before, the NOPERM was taken for a refused AUTH, the
 * session was torn down and the client reconnected forever while every
 * request failed with RJQ_EAUTH. */
TEST(setname_refused_by_acl_keeps_the_session) {
    test_env env;
    auth_env_start(&env);
    redisReply *r = server_cmd(env.rc, "ACL SETUSER worker on >pw ~* &* +@all -client");
    ASSERT(r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    ev_log log = {0, 0, 0, ""};
    enq_wait e = enqueue_with_userinfo(&env, "worker:pw", &log);
    if (e.status != RJQ_OK)
        FAIL_AT(__FILE__, __LINE__, "expected the enqueue to work, got %d (%s)", e.status,
                e.errmsg);
    ASSERT_EQ(1, dbsize(env.rc) > 0);
    /* The refusal is reported, and the session stays up: no reconnects. */
    ASSERT(log.error_conn_cmd >= 1);
    ASSERT(strstr(log.detail, "NOPERM") != NULL || strstr(log.detail, "CLIENT") != NULL);
    session_stays_up(&env);
    ASSERT_EQ(2, log.connected); /* command and subscriber connection, once each */
    ASSERT(rjq_client_is_connected(env.c));
    env_stop(&env);
}

/* A URL with a password for a server that has none: Redis answers AUTH
 * with "ERR AUTH <password> called without any password configured". That
 * is reported (RJQ_EVENT_ERROR) but refuses nothing: only a refused login
 * (wrong password, NOPERM) makes a session unusable. */
TEST(password_sent_to_a_server_without_one_keeps_the_session) {
    test_env env;
    memset(&env, 0, sizeof env);
    server_start_guarded(&env.s, NULL);
    env.rc = server_connect(&env.s);
    env.base = event_base_new();
    ASSERT(env.base != NULL);
    ev_log log = {0, 0, 0, ""};
    enq_wait e = enqueue_with_userinfo(&env, ":secret", &log);
    ASSERT_OK(e.status);
    ASSERT(log.error_conn_cmd >= 1);
    ASSERT(strstr(log.detail, "AUTH") != NULL);
    session_stays_up(&env);
    ASSERT_EQ(2, log.connected); /* once each: no reconnects */
    env_stop(&env);
}

TEST(right_password_in_url_works) {
    test_env env;
    auth_env_start(&env);
    char url[128];
    /* user-less userinfo ... */
    ev_log right = {0, 0, 0, ""};
    snprintf(url, sizeof url, "redis://:secret@127.0.0.1:%d", env.s.port);
    enq_wait e = enqueue_as(&env, url, &right);
    ASSERT_OK(e.status);
    ASSERT_EQ(0, right.errors);
    ASSERT(right.connected >= 1);
    ASSERT_EQ(1, server_int(env.rc, "LLEN t:{auth}:ready"));
    rjq_client_free(env.c);
    /* ... and the legacy lone password word. */
    ev_log word = {0, 0, 0, ""};
    snprintf(url, sizeof url, "redis://secret@127.0.0.1:%d", env.s.port);
    e = enqueue_as(&env, url, &word);
    ASSERT_OK(e.status);
    ASSERT_EQ(0, word.errors);
    ASSERT_EQ(2, server_int(env.rc, "LLEN t:{auth}:ready"));
    env_stop(&env);
}

/* =========================================================================
 * URLs
 * ====================================================================== */

/* Replies of an unexpected shape (another program's library under rjq's
 * name, a proxy that mangles replies) end the call with RJQ_EPROTO. Before,
 * element types were assumed: an enqueue reply with an integer where the
 * id belongs handed the callback a NULL id, and a watch reply with a
 * string where its code belongs was read as "no such job". The test loads
 * a library of rjq's name whose functions answer in the wrong shapes. */
static int shape_calls[3], shape_status[3];

static void shape_enq(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs, (void)n, (void)data;
    shape_calls[0]++;
    shape_status[0] = status;
}

static void shape_await(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    int i = *(int *)data;
    (void)c, (void)o;
    shape_calls[i]++;
    shape_status[i] = status;
}

static int three_shapes_answered(void *arg) {
    (void)arg;
    return shape_calls[0] + shape_calls[1] + shape_calls[2] >= 3;
}

TEST(replies_of_unexpected_shape_end_in_eproto) {
    test_env e;
    env_start(&e, "shape");
    size_t namelen = (size_t)(strchr(rjq__library, '\n') - rjq__library);
    char lib[1024];
    snprintf(lib, sizeof lib,
             "%.*s\n"
             "redis.register_function('%s', function(KEYS, ARGV) return {1, 1} end)\n"
             "redis.register_function('%s', function(KEYS, ARGV) return {1, 1} end)\n"
             "redis.register_function('%s', function(KEYS, ARGV) return {'code', 'body'} end)\n",
             (int)namelen, rjq__library, rjq__scripts[RJQ__S_ENQUEUE].function,
             rjq__scripts[RJQ__S_ENQUEUE_ONE].function, rjq__scripts[RJQ__S_WATCH].function);
    const char *argv[4] = {"FUNCTION", "LOAD", "REPLACE", lib};
    redisReply *r = redisCommandArgv(e.rc, 4, argv, NULL);
    ASSERT(r != NULL && r->type == REDIS_REPLY_STRING);
    freeReplyObject(r);

    memset(shape_calls, 0, sizeof shape_calls);
    static int one = 1, two = 2;
    ASSERT_OK(rjq_enqueue(e.q, "x", 1, NULL, shape_enq, NULL));
    ASSERT_OK(rjq_enqueue_await(e.q, "y", 1, NULL, NULL, shape_await, &one, NULL));
    ASSERT_OK(rjq_queue_await(e.q, "some-job", NULL, shape_await, &two, NULL));
    ASSERT(loop_until_cond(e.base, three_shapes_answered, NULL, 10000));
    (void)stats_of(e.base, e.q); /* a round trip: a second answer would be in (stats' own is
                                  * refused or reloads the library: either way it is answered) */
    for (int i = 0; i < 3; i++) {
        ASSERT_EQ(1, shape_calls[i]);
        ASSERT_EQ(RJQ_EPROTO, shape_status[i]);
    }
    env_stop(&e);
}

TEST(bad_urls_rejected_with_eurl) {
    struct event_base *base = event_base_new();
    const char *bad[] = {
        "http://x",
        "redis://host.example.com:6379", /* not numeric: no blocking DNS */
        "redis://127.0.0.1:99999",
        "redis://127.0.0.1:0",
        "redis://127.0.0.1:abc",
        "redis://127.0.0.1:",
        "redis://127.0.0.1:6379/db",
        "redis://[::1",
        "redis://:%zz@127.0.0.1:6379",
        "unix://relative/path",
        "",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rjq_client_options o = RJQ_CLIENT_OPTIONS_INIT;
        rjq_client *c = (rjq_client *)base; /* must be reset to NULL */
        o.url = bad[i];
        int rc = rjq_libevent_client_new(&c, base, &o);
        if (rc != RJQ_EURL) FAIL_AT(__FILE__, __LINE__, "\"%s\": expected RJQ_EURL, got %d", bad[i], rc);
        ASSERT(c == NULL);
    }
    /* Good ones parse. Port 1 (tcpmux) is closed here: the connection
     * attempts these start touch nobody's server. */
    const char *good[] = {"redis://127.0.0.1:1", "redis://localhost:1", "redis://[::1]:1/2",
                          "redis://u:p%40ss@127.0.0.1:1", "unix:///nonexistent/rjq.sock?db=3"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        rjq_client_options o = RJQ_CLIENT_OPTIONS_INIT;
        rjq_client *c = NULL;
        o.url = good[i];
        o.connect_timeout_ms = 100;
        int rc = rjq_libevent_client_new(&c, base, &o);
        if (rc != RJQ_OK) FAIL_AT(__FILE__, __LINE__, "\"%s\": expected RJQ_OK, got %d", good[i], rc);
        rjq_client_free(c);
    }
    event_base_free(base);
}

/* =========================================================================
 * The error table
 * ====================================================================== */

TEST(strerror_every_code_distinct_unknown_is_unknown) {
    static const int codes[] = {
#define XX(name, num, msg) RJQ_##name,
        RJQ_ERRNO_MAP(XX)
#undef XX
    };
    const size_t n = sizeof codes / sizeof codes[0];
    ASSERT(n >= 20);
    for (size_t i = 0; i < n; i++) {
        const char *m = rjq_strerror(codes[i]);
        ASSERT(m != NULL && m[0] != '\0');
        ASSERT(codes[i] < 0);
        if (strcmp(m, "unknown error") == 0)
            FAIL_AT(__FILE__, __LINE__, "code %d described as unknown", codes[i]);
        ASSERT(strcmp(m, rjq_strerror(RJQ_OK)) != 0);
        for (size_t k = 0; k < i; k++) {
            ASSERT(codes[k] != codes[i]);
            if (strcmp(m, rjq_strerror(codes[k])) == 0)
                FAIL_AT(__FILE__, __LINE__, "codes %d and %d share \"%s\"", codes[i], codes[k], m);
        }
    }
    ASSERT(rjq_strerror(RJQ_OK)[0] != '\0');
    static const int unknown[] = {1, 42, -999, -(int)(sizeof codes / sizeof codes[0]) - 1, -2147483647 - 1};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
        ASSERT_STREQ("unknown error", rjq_strerror(unknown[i]));
    ASSERT_STREQ("invalid queue name", rjq_strerror(RJQ_EQUEUENAME));
}

/* A claim checks most keys by reading them before its first write, or by
 * that write itself (claim.lua: TYPE only for what it writes unread):
 * each key a claim of one job reads or writes, wrongly typed, still
 * refuses it before anything is written, with the key named, and the
 * job runs once the key is back. The key is moved aside (when it
 * exists) and a string put in its place. */
static const char *wt_key;

static void plant_moved(redisContext *rc) {
    char saved[128];
    snprintf(saved, sizeof saved, "%s:saved", wt_key);
    if (server_int(rc, "EXISTS %s", wt_key)) freeReplyObject(server_cmd(rc, "RENAME %s %s", wt_key, saved));
    freeReplyObject(server_cmd(rc, "SET %s x", wt_key));
}

static void restore_moved(redisContext *rc) {
    char saved[128];
    snprintf(saved, sizeof saved, "%s:saved", wt_key);
    freeReplyObject(server_cmd(rc, "DEL %s", wt_key));
    if (server_int(rc, "EXISTS %s", saved)) freeReplyObject(server_cmd(rc, "RENAME %s %s", saved, wt_key));
}

TEST(claim_checks_every_key_it_touches_before_its_first_write) {
    static const char *const names[] = {"ready", "prio", "active", "state", "idle", "options"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char q[16], key[64];
        snprintf(q, sizeof q, "ck%zu", i);
        snprintf(key, sizeof key, "t:{%s}:%s", q, names[i]);
        wt_key = key;
        claim_refused_by_wrongtype(q, key, plant_moved, restore_moved);
    }
    /* a job with a run time limit: its claim writes deadlines */
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.timeout_ms = 60000;
    wt_key = "t:{ckd}:deadlines";
    claim_refused_by_wrongtype_job("ckd", wt_key, plant_moved, restore_moved, &jo);
}

/* Priority jobs that fill a claim leave the ready list unread by the peek:
 * the claim reads it (for the doorbell) before its first write all the
 * same, so a wrongly typed one still refuses it with nothing written. */
TEST(claim_filled_by_priority_jobs_on_wrongtype_ready_changes_nothing) {
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.priority = 5;
    wt_key = "t:{ckp}:ready";
    claim_refused_by_wrongtype_job("ckp", wt_key, plant_moved, restore_moved, &jo);
}

/* The claim script called directly (its function, as the client calls it)
 * on queue q wanting `want` jobs, with reset 1 or 0; returns the reply. */
static redisReply *claim_fcall(redisContext *rc, const char *q, const char *want, const char *reset) {
    char prefix[48], wake[48], field[64];
    snprintf(prefix, sizeof prefix, "t:{%s}:job:", q);
    snprintf(wake, sizeof wake, "t:{%s}:wake", q);
    snprintf(field, sizeof field, "1 t:{%s}:push:c", q);
    const char *args[] = {prefix, want, "30000", "c.1.x", wake, field, "1", reset, "0", "1"};
    return server_fcall_reply(rc, RJQ__S_CLAIM, q, args, sizeof args / sizeof args[0]);
}

/* claim_fcall() on a queue with a wrongly typed key (named in the error):
 * refused, with nothing written. */
static void claim_fcall_refused(redisContext *rc, const char *q, const char *want,
                                const char *reset, const char *key) {
    static char before[8192], after[8192];
    snapshot(rc, before, sizeof before);
    redisReply *r = claim_fcall(rc, q, want, reset);
    ASSERT_EQ(REDIS_REPLY_ERROR, r->type);
    ASSERT(strstr(r->str, "WRONGTYPE") != NULL && strstr(r->str, key) != NULL);
    freeReplyObject(r);
    snapshot(rc, after, sizeof after);
    ASSERT_STREQ(before, after);
}

/* An id twice in the ready list (only a change behind rjq's back does
 * that) starts once, so a full claim comes back short and registers the
 * slot: it checks the idle hash first, and refuses with nothing written. */
TEST(claim_of_an_id_twice_on_wrongtype_idle_writes_nothing) {
    test_env env;
    env_start(&env, "dup");
    freeReplyObject(server_cmd(env.rc, "HSET t:{dup}:payload a x"));
    freeReplyObject(server_cmd(env.rc, "RPUSH t:{dup}:ready a a"));
    plant_wrongtype(env.rc, "t:{dup}:idle", "SET %s x");
    claim_fcall_refused(env.rc, "dup", "2", "0", "t:{dup}:idle");

    freeReplyObject(server_cmd(env.rc, "DEL t:{dup}:idle"));
    redisReply *r = claim_fcall(env.rc, "dup", "2", "0");
    ASSERT_EQ(REDIS_REPLY_ARRAY, r->type);
    ASSERT_EQ(4 + 5, (long)r->elements); /* one job: a, once */
    ASSERT_STREQ("a", r->element[4]->str);
    freeReplyObject(r);
    ASSERT_EQ(0, server_int(env.rc, "LLEN t:{dup}:ready"));
    env_stop(&env);
}

/* The ready list of queue q, its ids joined by spaces, into out. */
static void ready_ids(redisContext *rc, const char *q, char *out, size_t cap) {
    redisReply *r = server_cmd(rc, "LRANGE t:{%s}:ready 0 -1", q);
    ASSERT_EQ(REDIS_REPLY_ARRAY, r->type);
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < r->elements; i++) {
        used += (size_t)snprintf(out + used, cap - used, "%s%s", i ? " " : "", r->element[i]->str);
        ASSERT(used < cap);
    }
    freeReplyObject(r);
}

/* A claim takes its ready ids (LPOP) before it reads their records and
 * writes active: refused after that (a wrongly typed key), it puts them
 * back at the head of ready in their order, so nothing is lost or
 * reordered, whether it took some of the list or all of it (the list's
 * key gone and made again). */
TEST(claim_refused_after_taking_ready_ids_puts_them_back_in_order) {
    test_env env;
    env_start(&env, "ub");
    char ids[256];
    freeReplyObject(server_cmd(env.rc, "HSET t:{ub}:payload a x b x c x"));
    freeReplyObject(server_cmd(env.rc, "RPUSH t:{ub}:ready a b c"));
    plant_wrongtype(env.rc, "t:{ub}:active", "SET %s x");
    claim_fcall_refused(env.rc, "ub", "2", "0", "t:{ub}:active"); /* a and b taken, c left */
    ready_ids(env.rc, "ub", ids, sizeof ids);
    ASSERT_STREQ("a b c", ids);
    claim_fcall_refused(env.rc, "ub", "5", "1", "t:{ub}:active"); /* all taken */
    ready_ids(env.rc, "ub", ids, sizeof ids);
    ASSERT_STREQ("a b c", ids);
    /* a wrongly typed payload column refuses it on the records' read */
    freeReplyObject(server_cmd(env.rc, "DEL t:{ub}:active"));
    freeReplyObject(server_cmd(env.rc, "RENAME t:{ub}:payload t:{ub}:saved"));
    freeReplyObject(server_cmd(env.rc, "SET t:{ub}:payload x"));
    claim_fcall_refused(env.rc, "ub", "2", "0", "t:{ub}:payload");
    ready_ids(env.rc, "ub", ids, sizeof ids);
    ASSERT_STREQ("a b c", ids);

    freeReplyObject(server_cmd(env.rc, "DEL t:{ub}:payload"));
    freeReplyObject(server_cmd(env.rc, "RENAME t:{ub}:saved t:{ub}:payload"));
    redisReply *r = claim_fcall(env.rc, "ub", "2", "0");
    ASSERT_EQ(REDIS_REPLY_ARRAY, r->type);
    ASSERT_EQ(4 + 2 * 5, (long)r->elements);
    ASSERT_STREQ("a", r->element[4]->str);
    ASSERT_STREQ("b", r->element[9]->str);
    freeReplyObject(r);
    ready_ids(env.rc, "ub", ids, sizeof ids);
    ASSERT_STREQ("c", ids);
    env_stop(&env);
}

/* The completion script called directly on queue q with its jobs' args
 * (after the 5 fixed ones: no offers, no tokens to forget); the reply. */
static redisReply *complete_fcall(redisContext *rc, const char *q, const char **jobs, int n) {
    char prefix[48];
    snprintf(prefix, sizeof prefix, "t:{%s}:job:", q);
    const char *args[32] = {prefix, "-1", "0", "0", "0"};
    size_t k = 5;
    for (int i = 0; i < n; i++) {
        ASSERT(k < sizeof args / sizeof args[0]);
        args[k++] = jobs[i];
    }
    return server_fcall_reply(rc, RJQ__S_COMPLETE, q, args, k);
}

/* A completion sends each run of jobs of one tail ("<attempt> <token>",
 * shared by a claim's jobs) once, with the run's count: runs of two
 * claims interleaved each check their own jobs' tokens (a wrong one is
 * lease lost), and the results go to their jobs. A run cut short or
 * without a count is refused with nothing written. */
TEST(completion_runs_of_one_tail_fence_each_job_by_its_run) {
    test_env env;
    env_start(&env, "rn");
    const char *ids[] = {"a", "b", "c", "d"};
    const char *toks[] = {"t1", "t1", "t2", "t1"};
    for (int i = 0; i < 4; i++) {
        freeReplyObject(server_cmd(env.rc, "HSET t:{rn}:state %s %s", ids[i],
                                   strcmp(toks[i], "t1") ? "active 1 t2 @1,2," : "active 1 t1 @1,2,"));
        freeReplyObject(server_cmd(env.rc, "ZADD t:{rn}:active 99999999999999 %s", ids[i]));
    }
    static char before[8192], after[8192];
    snapshot(env.rc, before, sizeof before);
    const char *bad[][4] = {{"1 t1", "2", "a", "ra"}, {"1 t1", "x", "a", "ra"}, {"1 t1", "0", "a", "ra"}};
    for (int i = 0; i < 3; i++) {
        redisReply *r = complete_fcall(env.rc, "rn", bad[i], 4);
        ASSERT_EQ(REDIS_REPLY_ERROR, r->type);
        freeReplyObject(r);
        snapshot(env.rc, after, sizeof after);
        ASSERT_STREQ(before, after);
    }
    const char *jobs[] = {"1 t1", "2", "a", "ra", "b", "rb", "1 t2", "1", "c", "rc",
                          "1 t2", "1", "d", "rd"}; /* d: under t1, sent under t2 */
    redisReply *r = complete_fcall(env.rc, "rn", jobs, 14);
    ASSERT_EQ(REDIS_REPLY_ARRAY, r->type);
    ASSERT_EQ(4, (long)r->elements);
    long want[] = {1, 1, 1, 0};
    for (int i = 0; i < 4; i++) ASSERT_EQ(want[i], r->element[i]->integer);
    freeReplyObject(r);
    const char *res[] = {"ra", "rb", "rc"};
    for (int i = 0; i < 3; i++) {
        redisReply *v = server_cmd(env.rc, "HGET t:{rn}:result %s", ids[i]);
        ASSERT_STREQ(res[i], v->str);
        freeReplyObject(v);
        v = server_cmd(env.rc, "HGET t:{rn}:state %s", ids[i]);
        ASSERT(strncmp(v->str, i == 2 ? "completed 1 t2 @1,2," : "completed 1 t1 @1,2,", 20) == 0);
        freeReplyObject(v);
    }
    ASSERT_EQ(0, server_int(env.rc, "HEXISTS t:{rn}:result d"));
    env_stop(&env);
}

/* A refused claim tells monitors nothing: its events come after its first
 * write (finish() publishes a failed call's events too). */
TEST(claim_refused_by_wrongtype_active_tells_monitors_nothing) {
    test_env env;
    env_start(&env, "mon");
    redisContext *sub = server_connect(&env.s);
    struct timeval tv = {10, 0};
    redisSetTimeout(sub, tv);
    freeReplyObject(redisCommand(sub, "PSUBSCRIBE *"));
    freeReplyObject(server_cmd(env.rc, "SET t:{mon}:monitored 1"));
    freeReplyObject(server_cmd(env.rc, "HSET t:{mon}:payload a x"));
    freeReplyObject(server_cmd(env.rc, "RPUSH t:{mon}:ready a"));
    plant_wrongtype(env.rc, "t:{mon}:active", "SET %s x");
    claim_fcall_refused(env.rc, "mon", "1", "1", "t:{mon}:active");
    redisReply *r;
    /* Messages reach a subscriber in publish order: whatever the refused
     * call published arrived before this marker. */
    freeReplyObject(server_cmd(env.rc, "PUBLISH rjq-test-marker end"));
    int events = 0;
    for (;;) {
        ASSERT_EQ(REDIS_OK, redisGetReply(sub, (void **)&r));
        ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4);
        int marker = strcmp(r->element[2]->str, "rjq-test-marker") == 0;
        if (strcmp(r->element[2]->str, "t:{mon}:events") == 0) events++;
        freeReplyObject(r);
        if (marker) break;
    }
    ASSERT_EQ(0, events);
    /* the same claim with active fixed: started, and told */
    freeReplyObject(server_cmd(env.rc, "DEL t:{mon}:active"));
    freeReplyObject(claim_fcall(env.rc, "mon", "1", "1"));
    ASSERT_EQ(REDIS_OK, redisGetReply(sub, (void **)&r));
    ASSERT_STREQ("t:{mon}:events", r->element[2]->str);
    ASSERT(strncmp(r->element[3]->str, "active a ", 9) == 0);
    freeReplyObject(r);
    redisFree(sub);
    env_stop(&env);
}

/* Start queue q with options qo, enqueue njobs jobs, start a worker of
 * one slot that holds its job (h), and complete the first one (empty
 * result). */
static void first_of_held_jobs_completed(test_env *env, const char *q, const rjq_queue_options *qo,
                                         int njobs, held_job *h) {
    env_start_queue(env, q, qo);
    enq_wait e = {0};
    for (int i = 0; i < njobs; i++) ASSERT_OK(rjq_enqueue(env->q, "x", 1, NULL, on_enq, &e));
    WAIT_FOR(env->base, e.calls >= njobs, 10000);
    ASSERT_EQ(njobs, e.calls);
    rjq_worker *w = NULL;
    rjq_worker_options wo = quiet_worker_options(1);
    ASSERT_OK(rjq_worker_start(env->q, &wo, hold_handler, h, &w));
    ASSERT(loop_until(env->base, &h->handled, 10000));
    ASSERT_OK(rjq_job_complete(h->job, "", 0, on_held_done, h));
    ASSERT(loop_until(env->base, &h->done, 10000));
    ASSERT_OK(h->done_status);
}

/* The same with two jobs: then the worker holds the second, whose id goes
 * in id. */
static void second_held_after_first_completed(test_env *env, const char *q,
                                              const rjq_queue_options *qo, held_job *h, char *id,
                                              size_t len) {
    first_of_held_jobs_completed(env, q, qo, 2, h);
    WAIT_FOR(env->base, h->handled >= 2, 10000);
    ASSERT_EQ(2, h->handled);
    snprintf(id, len, "%s", rjq_job_get_id(h->job));
}

/* A completion due to sweep the retention (here past completed_max)
 * deletes older jobs' records in every column: with one of them of the
 * wrong type (the error column, which most queues never write) it is
 * refused before its first write: the job is still active, the older
 * job's record is still there, nothing was counted. (The
 * worker's own bookkeeping may move meanwhile: a refused completion hands
 * its slot back.) */
TEST(completion_due_to_sweep_on_wrongtype_column_writes_nothing) {
    test_env env;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.completed_max = 1;
    held_job h = {0};
    char id[32];
    second_held_after_first_completed(&env, "sw", &qo, &h, id, sizeof id);

    plant_wrongtype(env.rc, "t:{sw}:error", "SET %s x");
    h.done = 0;
    ASSERT_OK(rjq_job_complete(h.job, "", 0, on_held_done, &h));
    ASSERT(loop_until(env.base, &h.done, 10000));
    ASSERT_EQ(RJQ_EWRONGTYPE, h.done_status);
    ASSERT(strstr(rjq_client_get_errmsg(env.c), "t:{sw}:error") != NULL);
    /* still active (the worker, which dropped it, may have taken it back
     * under a new token by now: its attempt unchanged) */
    redisReply *r = server_cmd(env.rc, "HGET t:{sw}:state %s", id);
    ASSERT(r->type == REDIS_REPLY_STRING && strncmp(r->str, "active 1 ", 9) == 0);
    freeReplyObject(r);
    ASSERT(server_int(env.rc, "ZSCORE t:{sw}:active %s", id) > 0);
    ASSERT_EQ(2, server_int(env.rc, "HLEN t:{sw}:payload")); /* the older record too */
    ASSERT_EQ(1, server_int(env.rc, "LLEN t:{sw}:completed"));
    ASSERT_EQ(1, server_int(env.rc, "HGET t:{sw}:stats retained"));
    /* taken back by the worker meanwhile (its claim answered before this
     * round trip; a later one is cancelled by the free): the handle is
     * ours to let go */
    (void)stats_of(env.base, env.q);
    if (h.handled > 2) ASSERT_OK(rjq_job_complete(h.job, "", 0, NULL, NULL));
    env_stop(&env);
}

/* The sweep's own counter (stats swept) is checked only when a sweep is
 * due, after the count of retained jobs (the completion's first write,
 * whose reply decides the sweep): not an integer, it refuses the
 * completion naming the field, with the count undone and nothing else
 * written (the sweep's HINCRBY failed halfway through before the check). */
TEST(completion_due_to_sweep_with_a_non_numeric_swept_counter_writes_nothing) {
    test_env env;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.completed_max = 1;
    held_job h = {0};
    char id[32];
    second_held_after_first_completed(&env, "sc", &qo, &h, id, sizeof id);

    freeReplyObject(server_cmd(env.rc, "HSET t:{sc}:stats swept 12abc"));
    h.done = 0;
    ASSERT_OK(rjq_job_complete(h.job, "", 0, on_held_done, &h));
    ASSERT(loop_until(env.base, &h.done, 10000));
    ASSERT_EQ(RJQ_EWRONGTYPE, h.done_status);
    ASSERT(strstr(rjq_client_get_errmsg(env.c), "field swept of t:{sc}:stats") != NULL);
    redisReply *r = server_cmd(env.rc, "HGET t:{sc}:state %s", id);
    ASSERT(r->type == REDIS_REPLY_STRING && strncmp(r->str, "active 1 ", 9) == 0);
    freeReplyObject(r);
    ASSERT_EQ(2, server_int(env.rc, "HLEN t:{sc}:payload")); /* the older record too */
    ASSERT_EQ(1, server_int(env.rc, "LLEN t:{sc}:completed"));
    ASSERT_EQ(1, server_int(env.rc, "HGET t:{sc}:stats retained")); /* counted back */
    r = server_cmd(env.rc, "HGET t:{sc}:stats swept");
    ASSERT(r->type == REDIS_REPLY_STRING && strcmp(r->str, "12abc") == 0);
    freeReplyObject(r);
    (void)stats_of(env.base, env.q); /* (garbled: refused; a round trip) */
    if (h.handled > 2) ASSERT_OK(rjq_job_complete(h.job, "", 0, NULL, NULL));
    env_stop(&env);
}

/* The reclaim sweep deletes completed jobs past the retention in every
 * column: with one of them of the wrong type (watchers, which it did not
 * check) it is refused before its first write; the record, the retention
 * index and the counts stay as they were. */
static int rc_calls, rc_status;
static void on_reclaimed_count(rjq_client *c, int status, long long n, void *data) {
    (void)c, (void)n, (void)data;
    rc_calls++;
    rc_status = status;
}

TEST(reclaim_sweep_on_wrongtype_column_writes_nothing) {
    test_env env;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.retention_ms = 1;
    held_job h = {0};
    first_of_held_jobs_completed(&env, "rs", &qo, 1, &h);
    ASSERT_EQ(1, server_int(env.rc, "LLEN t:{rs}:completed")); /* one completion: no sweep yet */
    /* past the retention (1 ms) of that completion, by the server's clock */
    ASSERT(loop_until_server_ms(env.base, env.rc, server_now_ms(env.rc) + 1, 10000));

    plant_wrongtype(env.rc, "t:{rs}:watchers", "SET %s x");
    rc_calls = 0;
    ASSERT_OK(rjq_queue_reclaim(env.q, on_reclaimed_count, NULL));
    ASSERT(loop_until(env.base, &rc_calls, 10000));
    ASSERT_EQ(RJQ_EWRONGTYPE, rc_status);
    ASSERT_EQ(1, server_int(env.rc, "LLEN t:{rs}:completed"));
    ASSERT_EQ(1, server_int(env.rc, "HGET t:{rs}:stats retained"));
    ASSERT_EQ(1, server_int(env.rc, "HLEN t:{rs}:payload"));

    freeReplyObject(server_cmd(env.rc, "DEL t:{rs}:watchers"));
    rc_calls = 0;
    ASSERT_OK(rjq_queue_reclaim(env.q, on_reclaimed_count, NULL));
    ASSERT(loop_until(env.base, &rc_calls, 10000));
    ASSERT_OK(rc_status);
    ASSERT_EQ(0, server_int(env.rc, "HLEN t:{rs}:payload")); /* swept now */
    env_stop(&env);
}

/* =========================================================================
 * Counters that are not numbers
 * ========================================================================= */

/* A counter of the stats hash that holds something else than an integer
 * (written behind rjq's back) is refused by every call that reads or
 * counts it, before anything is written, with RJQ_EWRONGTYPE and a
 * message naming the key and the field (it was a Lua error, "attempt to
 * perform arithmetic on field '?'", or a failure half written when the
 * HINCRBY failed). */
static char garbled_was[64];
static int garbled_had;

static void garble(test_env *env, const char *field) {
    redisReply *r = server_cmd(env->rc, "HGET t:{g}:stats %s", field);
    garbled_had = r->type == REDIS_REPLY_STRING;
    if (garbled_had) snprintf(garbled_was, sizeof garbled_was, "%s", r->str);
    freeReplyObject(r);
    freeReplyObject(server_cmd(env->rc, "HSET t:{g}:stats %s 12abc", field));
}

static void ungarble(test_env *env, const char *field) {
    if (garbled_had) freeReplyObject(server_cmd(env->rc, "HSET t:{g}:stats %s %s", field, garbled_was));
    else freeReplyObject(server_cmd(env->rc, "HDEL t:{g}:stats %s", field));
}

/* What a completion or failure of job id would change (the worker's own
 * registration aside: a refused offer makes it register again). */
static void job_record(test_env *env, const char *id, char *out, size_t cap) {
    static const char *const cmds[] = {
        "HGET t:{g}:state %s",  "HGET t:{g}:result %s", "HGET t:{g}:error %s",
        "HGET t:{g}:failtoken %s", "ZSCORE t:{g}:active %s", "HGETALL t:{g}:stats",
        "LRANGE t:{g}:completed 0 -1", "LRANGE t:{g}:ready 0 -1", "ZRANGE t:{g}:dead 0 -1",
        "ZRANGE t:{g}:delayed 0 -1"};
    size_t used = 0;
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        redisReply *r = server_cmd(env->rc, cmds[i], id);
        if (r->type == REDIS_REPLY_STRING) {
            used += (size_t)snprintf(out + used, cap - used, "%s|", r->str);
        } else if (r->type == REDIS_REPLY_ARRAY) {
            for (size_t j = 0; j < r->elements; j++)
                used += (size_t)snprintf(out + used, cap - used, "%s,", r->element[j]->str);
            used += (size_t)snprintf(out + used, cap - used, "|");
        } else {
            used += (size_t)snprintf(out + used, cap - used, "-|");
        }
        ASSERT(used < cap);
        freeReplyObject(r);
    }
}

static void assert_names_field(rjq_client *c, const char *field) {
    const char *m = rjq_client_get_errmsg(c);
    char want[64];
    snprintf(want, sizeof want, "field %s of t:{g}:stats", field);
    if (strstr(m, want) == NULL) fprintf(stderr, "errmsg: %s\n", m);
    ASSERT(strstr(m, want) != NULL);
}

TEST(non_numeric_counter_refused_with_its_key_named) {
    test_env env;
    env_start(&env, "g");
    static char before[8192], after[8192];
    held_job h = {0};
    enqueue_x_ok(env.base, env.q, NULL, 0, 0);
    rjq_worker_options wo = quiet_worker_options(2);
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(env.q, &wo, hold_handler, &h, &w));
    ASSERT(loop_until(env.base, &h.handled, 10000));
    /* The claim registered the other slot, and the worker's push channel
     * is confirmed with the recovering claim that its confirmation makes
     * answered. (A confirmation heard only after the completion went out
     * made the worker recover: the completion's forget of the job's token
     * went with it, so that claim, run once Redis had refused the
     * completion and the forget, took the job, still held under a token
     * the worker no longer named, back under a new token and lease, all
     * before the completion's reply was read: the record changed, but not
     * by the refused call.) */
    wait_idle_settled(&env, "g");

    /* rjq_job_complete: the count of retained jobs */
    garble(&env, "retained");
    char id[32];
    snprintf(id, sizeof id, "%s", rjq_job_get_id(h.job));
    job_record(&env, id, before, sizeof before);
    /* (the record is read in the callback: a refused completion leaves
     * the job to its worker, which may claim it back right after) */
    h.snap_env = &env, h.snap_id = id, h.snap = after, h.snap_cap = sizeof after;
    ASSERT_OK(rjq_job_complete(h.job, "res", 3, on_held_done, &h));
    ASSERT(loop_until(env.base, &h.done, 10000));
    ASSERT_EQ(RJQ_EWRONGTYPE, h.done_status);
    assert_names_field(env.c, "retained");
    ASSERT_STREQ(before, after);
    ungarble(&env, "retained");

    /* rjq_job_fail: the count of failures */
    enqueue_x_ok(env.base, env.q, NULL, 0, 0);
    WAIT_FOR(env.base, h.handled >= 2, 10000);
    ASSERT_EQ(2, h.handled);
    get_stats(env.base, env.q);
    garble(&env, "failed");
    snprintf(id, sizeof id, "%s", rjq_job_get_id(h.job));
    job_record(&env, id, before, sizeof before);
    h.done = 0;
    ASSERT_OK(rjq_job_fail(h.job, "boom", 0, 0, on_held_done, &h));
    ASSERT(loop_until(env.base, &h.done, 10000));
    ASSERT_EQ(RJQ_EWRONGTYPE, h.done_status);
    assert_names_field(env.c, "failed");
    ASSERT_STREQ(before, after);
    h.snap = NULL;
    ungarble(&env, "failed");

    /* rjq_queue_get_stats: every counter it reads */
    const char *counters[] = {"seq", "retained", "failed", "retried", "dead", "reclaimed",
                              "replayed", "skipped", "swept", "cancelled"};
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++) {
        garble(&env, counters[i]);
        stats_wait sw = stats_of(env.base, env.q);
        ASSERT_EQ(RJQ_EWRONGTYPE, sw.status);
        assert_names_field(env.c, counters[i]);
        ungarble(&env, counters[i]);
    }
    ASSERT_OK(stats_of(env.base, env.q).status);

    /* rjq_enqueue: the sequence numbers (its first write) */
    garble(&env, "seq");
    job_record(&env, "3", before, sizeof before);
    ASSERT_EQ(RJQ_EWRONGTYPE, enqueue_x(env.base, env.q, NULL, 0, 0).status);
    assert_names_field(env.c, "seq");
    job_record(&env, "3", after, sizeof after);
    ASSERT_EQ(0, server_int(env.rc, "HEXISTS t:{g}:payload 3"));
    ASSERT_STREQ(before, after);
    ungarble(&env, "seq");
    env_stop(&env);
}

/* A counter that is not an integer must not cost jobs: calls that move
 * jobs out of one place before counting them (the reclaim sweep's
 * timed-out and lost jobs, a claim promoting due priority jobs, a replay
 * of a priority job) are refused before they move any, naming the key and
 * the field; with the counter fixed the job goes on. (They failed half
 * way: the sweep had taken every expired job out of active, the claim its
 * due jobs out of delayed, the replay its job out of dead, and then the
 * HINCRBY failed: the jobs were in no list, lost for good.) */
static count_wait count_call(test_env *env, int replay, const char *id) {
    count_wait cw = {0};
    if (replay) ASSERT_OK(rjq_queue_replay(env->q, id, 0, on_count, &cw));
    else ASSERT_OK(rjq_queue_reclaim(env->q, on_count, &cw));
    ASSERT(loop_until(env->base, &cw.done, 10000));
    return cw;
}

static void count_stopped(rjq_worker *w, int status, void *data) {
    (void)w, (void)status;
    (*(int *)data)++;
}

/* Stop w and wait for its stop callback. */
static void stop_and_wait(test_env *env, rjq_worker *w) {
    int stopped = 0;
    ASSERT_OK(rjq_worker_stop(w, count_stopped, &stopped));
    ASSERT(loop_until(env->base, &stopped, 10000));
}

TEST(non_numeric_counter_never_loses_a_job_moved_by_sweep_claim_or_replay) {
    test_env env;
    env_start(&env, "g");
    /* the sweep: a job past its run time, held by a worker that hangs */
    held_job h = {0};
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "slow";
    o.timeout_ms = 50;
    enqueue_job(env.base, env.q, "x", &o);
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(env.q, &wo, hold_handler, &h, &w));
    ASSERT(loop_until(env.base, &h.handled, 10000));
    long long ends = server_int(env.rc, "ZSCORE t:{g}:active slow");
    ASSERT(loop_until_server_ms(env.base, env.rc, ends, 20000)); /* its run time is over */
    garble(&env, "failed");
    count_wait cw = count_call(&env, 0, NULL);
    ASSERT_EQ(RJQ_EWRONGTYPE, cw.status);
    assert_names_field(env.c, "failed");
    /* still there, to be swept (+inf: the set's pin) */
    ASSERT_EQ(1, server_int(env.rc, "ZCOUNT t:{g}:active -inf (+inf"));
    ungarble(&env, "failed");
    cw = count_call(&env, 0, NULL);
    ASSERT_OK(cw.status);
    ASSERT_EQ(1, cw.n);
    ASSERT_EQ(0, server_int(env.rc, "ZCOUNT t:{g}:active -inf (+inf"));
    ASSERT_EQ(1, server_int(env.rc, "ZCARD t:{g}:delayed") + server_int(env.rc, "LLEN t:{g}:ready"));
    ASSERT_OK(rjq_job_complete(h.job, "", 0, on_held_done, &h)); /* too late: refused */
    ASSERT(loop_until(env.base, &h.done, 10000));
    ASSERT_EQ(RJQ_ELEASELOST, h.done_status);
    stop_and_wait(&env, w);

    /* the claim: a due priority job takes a sequence number */
    rjq_job_options p = RJQ_JOB_OPTIONS_INIT;
    p.id = "due";
    p.priority = 5;
    p.delay_ms = 50;
    enqueue_job(env.base, env.q, "x", &p);
    long long due = server_int(env.rc, "ZSCORE t:{g}:delayed due");
    ASSERT(loop_until_server_ms(env.base, env.rc, due, 10000));
    garble(&env, "skipped");
    int handled = 0;
    rjq_worker_options wp = quiet_worker_options(1);
    wp.poll_ms = 50;
    rjq_worker *w2 = NULL;
    ASSERT_OK(rjq_worker_start(env.q, &wp, count_handled, &handled, &w2));
    errmsg_poll skipped = {env.c, "field skipped of", NULL};
    loop_until_cond(env.base, errmsg_has, &skipped, 10000);
    assert_names_field(env.c, "skipped");
    ASSERT_EQ(0, handled);
    ASSERT(server_int(env.rc, "ZSCORE t:{g}:delayed due") > 0); /* still delayed */
    ungarble(&env, "skipped");
    WAIT_FOR(env.base, handled != 0, 20000);
    ASSERT_EQ(1, handled);
    stop_and_wait(&env, w2);

    /* the replay: a dead priority job goes back to prio with a sequence number */
    rjq_job_options d = RJQ_JOB_OPTIONS_INIT;
    d.id = "gone";
    d.priority = 3;
    enqueue_job(env.base, env.q, "x", &d);
    freeReplyObject(server_cmd(env.rc, "ZREM t:{g}:prio gone"));
    freeReplyObject(server_cmd(env.rc, "ZADD t:{g}:dead 1 gone"));
    freeReplyObject(server_cmd(env.rc, "HSET t:{g}:state gone %s", "dead 1"));
    garble(&env, "seq");
    cw = count_call(&env, 1, "gone");
    ASSERT_EQ(RJQ_EWRONGTYPE, cw.status);
    assert_names_field(env.c, "seq");
    ASSERT_EQ(1, server_int(env.rc, "ZCARD t:{g}:dead")); /* still dead, to be replayed */
    ungarble(&env, "seq");
    cw = count_call(&env, 1, "gone");
    ASSERT_OK(cw.status);
    ASSERT_EQ(1, cw.n);
    ASSERT_EQ(1, server_int(env.rc, "ZCARD t:{g}:prio"));
    env_stop(&env);
}

/* The waiters hash of a limited queue (claim.lua, "Fair shares") with a
 * last turn ('#') that is no turn number, written behind rjq's back: the
 * claim is refused before its first write, naming the key and the field.
 * (A negative one passed the check and the claim failed after it had made
 * its jobs active: "attempt to perform arithmetic on a nil value", the
 * jobs held by nobody until their lease ran out, every claim again.) */
TEST(garbled_last_turn_of_the_waiters_refuses_the_claim_before_it_starts_jobs) {
    test_env env;
    env_start(&env, "wg");
    rjq_limits l = RJQ_LIMITS_INIT;
    l.concurrency = 2;
    count_wait cw = {0};
    ASSERT_OK(rjq_queue_set_limits(env.q, &l, on_count, &cw));
    ASSERT(loop_until(env.base, &cw.done, 10000));
    ASSERT_OK(cw.status);
    for (int i = 0; i < 3; i++) enqueue_x_ok(env.base, env.q, NULL, 0, 0);
    freeReplyObject(server_cmd(env.rc, "HSET t:{wg}:waiters # -5"));
    static char before[8192], after[8192];
    snapshot(env.rc, before, sizeof before);
    int handled = 0;
    rjq_worker_options wo = quiet_worker_options(3); /* wants 3, the limit leaves 2: held */
    wo.poll_ms = 50;
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(env.q, &wo, count_handled, &handled, &w));
    errmsg_poll refused = {env.c, "t:{wg}:waiters", "arithmetic"};
    loop_until_cond(env.base, errmsg_has, &refused, 10000);
    const char *m = rjq_client_get_errmsg(env.c);
    if (!strstr(m, "field # of t:{wg}:waiters")) fprintf(stderr, "errmsg: %s\n", m);
    ASSERT(strstr(m, "WRONGTYPE field # of t:{wg}:waiters") != NULL);
    ASSERT_EQ(0, server_int(env.rc, "ZCOUNT t:{wg}:active -inf (+inf")); /* none started */
    snapshot(env.rc, after, sizeof after);
    ASSERT_STREQ(before, after);
    ASSERT_EQ(0, handled);
    freeReplyObject(server_cmd(env.rc, "HDEL t:{wg}:waiters #"));
    WAIT_FOR(env.base, handled >= 3, 20000);
    ASSERT_EQ(3, handled);
    env_stop(&env);
}

/* A cancel counts its job in the stats: with that counter not an integer
 * it is refused before it writes anything (the job waits on, its awaits
 * too), naming the key and the field. (It failed after it had cancelled
 * the job, before telling the job's awaits: they waited for ever.) */
typedef struct cancel_wait {
    int done, status;
} cancel_wait;

static void on_cancel_done(rjq_client *c, int status, const char *state, void *data) {
    cancel_wait *w = data;
    (void)c, (void)state;
    w->done++;
    w->status = status;
}

static int awaited, awaited_status;
static void on_awaited(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)c, (void)o, (void)data;
    awaited++;
    awaited_status = status;
}

TEST(cancel_with_a_non_numeric_counter_changes_nothing_and_its_awaits_end_later) {
    test_env env;
    env_start(&env, "g");
    enqueue_x_ok(env.base, env.q, "c1", 0, 0);
    awaited = 0;
    ASSERT_OK(rjq_queue_await(env.q, "c1", NULL, on_awaited, NULL, NULL));
    /* the await watches (its script added it to the job's watchers) */
    ASSERT(loop_until_server_int(env.base, env.rc, 1, 10000, "HEXISTS t:{g}:watchers c1"));
    garble(&env, "cancelled");
    static char before[8192], after[8192];
    job_record(&env, "c1", before, sizeof before);
    cancel_wait cw = {0};
    ASSERT_OK(rjq_queue_cancel(env.q, "c1", on_cancel_done, &cw));
    ASSERT(loop_until(env.base, &cw.done, 10000));
    ASSERT_EQ(RJQ_EWRONGTYPE, cw.status);
    assert_names_field(env.c, "cancelled");
    job_record(&env, "c1", after, sizeof after);
    ASSERT_STREQ(before, after);
    ungarble(&env, "cancelled");
    cw.done = 0;
    ASSERT_OK(rjq_queue_cancel(env.q, "c1", on_cancel_done, &cw));
    ASSERT(loop_until(env.base, &cw.done, 10000));
    ASSERT_OK(cw.status);
    ASSERT(loop_until(env.base, &awaited, 10000));
    ASSERT_EQ(RJQ_EJOBCANCELED, awaited_status);
    env_stop(&env);
}

/* The scripts below run the library's own script text (lib.lua included)
 * on a bare server: what each writes is the whole check. */
static redisReply *eval_script(redisContext *rc, int script, const char *q, const char *const *args,
                               int nargs) {
    const char *argv[64];
    layout_keys lk;
    argv[0] = "EVAL", argv[1] = rjq__scripts[script].body;
    int n = layout_script_keys(&lk, script, "t", q, argv, 2); /* its KEYS on queue q */
    ASSERT(n + nargs <= 64);
    for (int i = 0; i < nargs; i++) argv[n++] = args[i];
    redisReply *r = redisCommandArgv(rc, n, argv, NULL);
    ASSERT(r != NULL);
    return r;
}

/* The script run on queue g answers the integer want. */
static void assert_script_answers(redisContext *rc, int script, const char *const *args, int nargs,
                                  long long want) {
    redisReply *r = eval_script(rc, script, "g", args, nargs);
    ASSERT_EQ(REDIS_REPLY_INTEGER, r->type);
    ASSERT_EQ(want, r->integer);
    freeReplyObject(r);
}

/* The script run on queue g answers a pair whose first element is the
 * string first (an enqueue's id). */
static void assert_script_answers_pair(redisContext *rc, int script, const char *const *args,
                                       int nargs, const char *first) {
    redisReply *r = eval_script(rc, script, "g", args, nargs);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    ASSERT_STREQ(first, r->element[0]->str);
    freeReplyObject(r);
}

/* A refusal that names the field of t:{g}:stats, and nothing written. */
static void assert_refused_naming(redisContext *rc, redisReply *r, const char *field,
                                  const char *before) {
    static char after[8192];
    char want[64];
    snprintf(want, sizeof want, "WRONGTYPE field %s of t:{g}:stats", field);
    if (r->type != REDIS_REPLY_ERROR || strstr(r->str, want) == NULL)
        fprintf(stderr, "reply (type %d): %s\n", r->type, r->str ? r->str : "");
    ASSERT_EQ(REDIS_REPLY_ERROR, r->type);
    ASSERT(strstr(r->str, want) != NULL);
    freeReplyObject(r);
    snapshot(rc, after, sizeof after);
    ASSERT_STREQ(before, after);
}

static void set_stats_field(redisContext *rc, const char *field, const char *v) {
    freeReplyObject(server_cmd(rc, "HSET t:{g}:stats %s %s", field, v));
}

/* The script run on queue g with field of t:{g}:stats set to "12abc":
 * refused naming the field, nothing written. */
static void refused_for_counter(redisContext *rc, int script, const char *field,
                                const char *const *args, int nargs) {
    static char before[8192];
    set_stats_field(rc, field, "12abc");
    snapshot(rc, before, sizeof before);
    assert_refused_naming(rc, eval_script(rc, script, "g", args, nargs), field, before);
}

/* The orphan sweep (a dead client's jobs go back, or to dead when spent)
 * counts reclaimed and dead: with either not an integer it is refused
 * before it moves a job, naming the key and the field. (It failed after
 * it had taken the jobs out of active with an unnamed error: the jobs
 * were in no list, lost for good.) */
TEST(orphan_sweep_with_a_non_numeric_counter_moves_no_job_and_names_it) {
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *rc = server_connect(&s);
    freeReplyObject(server_cmd(rc, "HSET t:{g}:payload j1 x j2 y"));
    freeReplyObject(server_cmd(rc, "HSET t:{g}:state j1 %s j2 %s", "active 3 c9.1.T", "active 1 c9.1.T"));
    freeReplyObject(server_cmd(rc, "ZADD t:{g}:active 9999999999999 j1 9999999999999 j2"));
    freeReplyObject(server_cmd(rc, "ZADD t:{g}:held 0 %s", "c9.1.T j1 j2"));
    set_stats_field(rc, "seq", "2");
    char until[32];
    snprintf(until, sizeof until, "%lld", server_now_ms(rc) + 600000);
    const char *args[] = {"t:{g}:job:", "t:{g}:wake", "c9.", "100", "1000", until};
    const char *fields[] = {"dead", "reclaimed"};
    for (size_t i = 0; i < 2; i++) {
        refused_for_counter(rc, RJQ__S_ORPHANS, fields[i], args, 6);
        freeReplyObject(server_cmd(rc, "HDEL t:{g}:stats %s", fields[i]));
    }
    redisReply *r = eval_script(rc, RJQ__S_ORPHANS, "g", args, 6);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    ASSERT_EQ(2, r->element[0]->integer);
    freeReplyObject(r);
    ASSERT_EQ(1, server_int(rc, "ZCARD t:{g}:dead"));
    ASSERT_EQ(1, server_int(rc, "LLEN t:{g}:ready"));
    ASSERT_EQ(0, server_int(rc, "ZCOUNT t:{g}:active -inf +inf"));
    /* the dead one keeps its last attempt's token (whose worker ran it) */
    r = server_cmd(rc, "HGET t:{g}:state j1"); /* (then its times: none but the end) */
    ASSERT(strncmp(r->str, "dead 3 c9.1.T @,,", 17) == 0);
    freeReplyObject(r);
    redisFree(rc);
    server_stop_guarded(&s);
}

/* The scheduler's fire call takes a sequence number per job it makes:
 * with seq not an integer it is refused before it writes anything (no
 * schedule moved on, none fired), naming the key and the field. (A
 * schedule before the first job was moved on, then the call failed with
 * an unnamed error.) */
TEST(fire_with_a_non_numeric_seq_changes_no_schedule_and_names_it) {
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *rc = server_connect(&s);
    const char *spec = "1000 0 0 every -";
    freeReplyObject(server_cmd(rc, "SET t:{g}:scheduler tok"));
    freeReplyObject(server_cmd(rc, "HSET t:{g}:schedules a %s b %s", spec, spec));
    freeReplyObject(server_cmd(rc, "HSET t:{g}:schedpayload a pa b pb"));
    freeReplyObject(server_cmd(rc, "ZADD t:{g}:schednext 1000 a 1000 b"));
    /* a: never fires again (leaves schednext); b: fires at 1000 */
    const char *args[] = {"t:{g}:job:", "t:{g}:wake", "tok", "a", "1000", spec, "-1", "0",
                          "b", "1000", spec, "2000", "1", "1000"};
    refused_for_counter(rc, RJQ__S_FIRE, "seq", args, 14);
    set_stats_field(rc, "seq", "0");
    assert_script_answers(rc, RJQ__S_FIRE, args, 14, 1);
    ASSERT_EQ(1, server_int(rc, "HEXISTS t:{g}:payload b@1000"));
    ASSERT_EQ(1, server_int(rc, "ZCARD t:{g}:schednext"));
    redisReply *r = server_cmd(rc, "HGET t:{g}:state b@1000"); /* ready, made now (its times) */
    ASSERT(r->type == REDIS_REPLY_STRING && strncmp(r->str, "ready 0 @", 9) == 0);
    freeReplyObject(r);
    redisFree(rc);
    server_stop_guarded(&s);
}

/* A reservation of job numbers (payloads written ahead) counts seq and
 * skipped: with either not an integer it is refused before it writes,
 * naming the key and the field. (skipped refused after seq had counted
 * numbers nobody holds.) */
TEST(reserve_with_a_non_numeric_counter_counts_nothing_and_names_it) {
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *rc = server_connect(&s);
    set_stats_field(rc, "seq", "4");
    set_stats_field(rc, "skipped", "1");
    const char *args[] = {"5", "abc"};
    const char *fields[] = {"seq", "skipped"};
    for (size_t i = 0; i < 2; i++) {
        redisReply *was = server_cmd(rc, "HGET t:{g}:stats %s", fields[i]);
        char keep[32];
        snprintf(keep, sizeof keep, "%s", was->str);
        freeReplyObject(was);
        refused_for_counter(rc, RJQ__S_RESERVE, fields[i], args, 2);
        set_stats_field(rc, fields[i], keep);
    }
    assert_script_answers_pair(rc, RJQ__S_RESERVE, args, 2, "5");
    ASSERT_EQ(9, server_int(rc, "HGET t:{g}:stats seq"));
    redisFree(rc);
    server_stop_guarded(&s);
}

/* A job's times in rjq_queue_get_job's reply are range-checked like every
 * number of a reply: one that is no number, not positive or past
 * RJQ__TIME_MAX (2^62) ends the read with RJQ_EPROTO; the reply of a
 * library from before rjq kept times (7 elements) reads as none (0). The
 * test loads a library of rjq's name whose job function answers so. */
TEST(job_reply_times_out_of_range_end_in_eproto_and_an_older_reply_has_none) {
    test_env e;
    env_start(&e, "jt");
    size_t namelen = (size_t)(strchr(rjq__library, '\n') - rjq__library);
    const char *replies[] = {
        "{'completed', '1', '3', 'p', 'r', false, 't.1.x', 'abc', false, false}",
        "{'completed', '1', '3', 'p', 'r', false, 't.1.x', '5', '-1', false}",
        "{'completed', '1', '3', 'p', 'r', false, 't.1.x', '5', '6', '4611686018427387905'}",
        "{'completed', '1', '3', 'p', 'r', false, 't.1.x', '5', '6', '7'}",
        "{'completed', '1', '3', 'p', 'r', false, 't.1.x'}"};
    for (int k = 0; k < 5; k++) {
        char lib[1024];
        snprintf(lib, sizeof lib,
                 "%.*s\nredis.register_function('%s', function(KEYS, ARGV) return %s end)\n",
                 (int)namelen, rjq__library, rjq__scripts[RJQ__S_JOB].function, replies[k]);
        const char *argv[4] = {"FUNCTION", "LOAD", "REPLACE", lib};
        redisReply *r = redisCommandArgv(e.rc, 4, argv, NULL);
        ASSERT(r != NULL && r->type == REDIS_REPLY_STRING);
        freeReplyObject(r);
        info_wait i = get_info(e.base, e.q, "j");
        if (k < 3) {
            ASSERT_EQ(RJQ_EPROTO, i.status);
            continue;
        }
        ASSERT_OK(i.status);
        ASSERT_STREQ("completed", i.state);
        ASSERT_EQ(k == 3 ? 5 : 0, i.enqueued_ms);
        ASSERT_EQ(k == 3 ? 6 : 0, i.started_ms);
        ASSERT_EQ(k == 3 ? 7 : 0, i.ended_ms);
    }
    env_stop(&e);
}

/* A refusal whose message has want, and nothing written (before: the
 * snapshot taken before the call). */
static void assert_refused_with(redisContext *rc, redisReply *r, const char *want, const char *before) {
    static char after[8192];
    if (r->type != REDIS_REPLY_ERROR || strstr(r->str, want) == NULL)
        fprintf(stderr, "reply (type %d): %s; wanted: %s\n", r->type, r->str ? r->str : "", want);
    ASSERT_EQ(REDIS_REPLY_ERROR, r->type);
    ASSERT(strstr(r->str, want) != NULL);
    freeReplyObject(r);
    snapshot(rc, after, sizeof after);
    ASSERT_STREQ(before, after);
}

/* The script run with key planted as a string: refused naming the key
 * (expect_types' message), nothing written; the key deleted again. */
static void refused_on_wrongtype(redisContext *rc, int script, const char *key, const char *want_type,
                                 const char *const *args, int nargs) {
    static char before[8192];
    char want[160];
    plant_wrongtype(rc, key, "SET %s x");
    snapshot(rc, before, sizeof before);
    snprintf(want, sizeof want, "WRONGTYPE %s holds a string, rjq expects a %s", key, want_type);
    assert_refused_with(rc, eval_script(rc, script, "g", args, nargs), want, before);
    freeReplyObject(server_cmd(rc, "DEL %s", key));
}

/* Setting limits on a shard with an epoch reads the shard's limits_epoch:
 * one that is no integer (or past 2^53, where Lua's numbers stop being
 * exact) is refused naming the key and the field, nothing written (it
 * ended in a Lua error: comparing nil with a number); so is an argument
 * that is no count, and a wrongly typed meta. */
TEST(limits_with_a_non_numeric_epoch_changes_nothing_and_names_it) {
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *rc = server_connect(&s);
    const char *args[] = {"t:{g}:wake", "5", "0", "1000", "3"};
    static char before[8192];
    const char *bad[] = {"12abc", "-1", "9007199254740992", "1e3", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        freeReplyObject(server_cmd(rc, "HSET t:{g}:meta limits_epoch %s", bad[i]));
        snapshot(rc, before, sizeof before);
        assert_refused_with(rc, eval_script(rc, RJQ__S_LIMITS, "g", args, 5),
                            "WRONGTYPE field limits_epoch of t:{g}:meta", before);
    }
    freeReplyObject(server_cmd(rc, "HSET t:{g}:meta limits_epoch 2"));
    const char *bad_args[][5] = {{"t:{g}:wake", "5", "0", "1000", "x"},
                                 {"t:{g}:wake", "5", "0", "1000", "9007199254740993"},
                                 {"t:{g}:wake", "five", "0", "1000", "3"},
                                 {"t:{g}:wake", "5", "-1", "1000", "3"}};
    const char *names[] = {"epoch", "epoch", "concurrency", "rate"};
    for (size_t i = 0; i < 4; i++) {
        char want[64];
        snprintf(want, sizeof want, "ERR rjq limits: %s is not an integer", names[i]);
        snapshot(rc, before, sizeof before);
        assert_refused_with(rc, eval_script(rc, RJQ__S_LIMITS, "g", bad_args[i], 5), want, before);
    }
    refused_on_wrongtype(rc, RJQ__S_LIMITS, "t:{g}:idle", "hash", args, 5);
    freeReplyObject(server_cmd(rc, "HSET t:{g}:meta limits_epoch 2"));
    assert_script_answers(rc, RJQ__S_LIMITS, args, 5, 1);
    ASSERT_EQ(3, server_int(rc, "HGET t:{g}:meta limits_epoch"));
    ASSERT_EQ(5, server_int(rc, "HGET t:{g}:meta concurrency"));
    const char *older[] = {"t:{g}:wake", "7", "0", "1000", "2"}; /* refused for its epoch */
    redisReply *r = eval_script(rc, RJQ__S_LIMITS, "g", older, 5);
    ASSERT_EQ(REDIS_REPLY_INTEGER, r->type);
    ASSERT_EQ(0, r->integer);
    freeReplyObject(r);
    ASSERT_EQ(5, server_int(rc, "HGET t:{g}:meta concurrency"));
    redisFree(rc);
    server_stop_guarded(&s);
}

/* A sharded queue's change of its whole-queue limits (wholelimits.lua):
 * a limitsepoch that is no integer below 2^53 - 1 (written behind rjq's
 * back) is refused naming the key, nothing written (a non-numeric one
 * restarted the count at 1, so a re-split step's older figures could
 * win); so is a 'set' argument that is no count, or an unknown step. */
TEST(wholelimits_with_a_non_numeric_epoch_changes_nothing_and_names_it) {
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *rc = server_connect(&s);
    static char before[8192];
    const char *begin[] = {"begin"};
    const char *bad[] = {"12abc", "-1", "9007199254740991", "1e3", "", "1.5"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        freeReplyObject(server_cmd(rc, "SET t:{g}:limitsepoch %s", bad[i]));
        snapshot(rc, before, sizeof before);
        assert_refused_with(rc, eval_script(rc, RJQ__S_WHOLELIMITS, "g", begin, 1),
                            "WRONGTYPE t:{g}:limitsepoch is not an integer", before);
    }
    freeReplyObject(server_cmd(rc, "SET t:{g}:limitsepoch 41"));
    redisReply *r = eval_script(rc, RJQ__S_WHOLELIMITS, "g", begin, 1);
    ASSERT_EQ(REDIS_REPLY_INTEGER, r->type);
    ASSERT_EQ(42, r->integer);
    freeReplyObject(r);
    ASSERT_EQ(42, server_int(rc, "GET t:{g}:limitsepoch"));
    const char *bad_args[][5] = {{"set", "x", "0", "1000", "3"},
                                 {"set", "5", "-1", "1000", "3"},
                                 {"set", "5", "0", "1e3", "3"},
                                 {"set", "5", "0", "1000", "9007199254740992"},
                                 {"set", "5", "0", "1000", ""}};
    const char *names[] = {"concurrency", "rate", "rate window", "epoch", "epoch"};
    for (size_t i = 0; i < 5; i++) {
        char want[80];
        snprintf(want, sizeof want, "ERR rjq wholelimits: %s is not an integer", names[i]);
        snapshot(rc, before, sizeof before);
        assert_refused_with(rc, eval_script(rc, RJQ__S_WHOLELIMITS, "g", bad_args[i], 5), want,
                            before);
    }
    const char *short_set[] = {"set", "5", "0"};
    snapshot(rc, before, sizeof before);
    assert_refused_with(rc, eval_script(rc, RJQ__S_WHOLELIMITS, "g", short_set, 3),
                        "ERR rjq wholelimits: rate window is not an integer", before);
    const char *unknown[] = {"start"};
    snapshot(rc, before, sizeof before);
    assert_refused_with(rc, eval_script(rc, RJQ__S_WHOLELIMITS, "g", unknown, 1),
                        "ERR rjq wholelimits: step is neither", before);
    const char *good[] = {"set", "5", "2", "1000", "42"};
    freeReplyObject(server_cmd(rc, "HSET t:{g}:shardlimits a b"));
    snapshot(rc, before, sizeof before);
    assert_refused_with(rc, eval_script(rc, RJQ__S_WHOLELIMITS, "g", good, 5),
                        "WRONGTYPE t:{g}:shardlimits holds a hash, rjq expects a string", before);
    freeReplyObject(server_cmd(rc, "DEL t:{g}:shardlimits"));
    r = eval_script(rc, RJQ__S_WHOLELIMITS, "g", good, 5);
    ASSERT_EQ(REDIS_REPLY_INTEGER, r->type);
    ASSERT_EQ(1, r->integer);
    freeReplyObject(r);
    r = server_cmd(rc, "GET t:{g}:shardlimits");
    ASSERT_STREQ("1 5 2 1000 42", r->str);
    freeReplyObject(r);
    const char *older[] = {"set", "7", "0", "1000", "41"}; /* a newer change stored first */
    r = eval_script(rc, RJQ__S_WHOLELIMITS, "g", older, 5);
    ASSERT_EQ(REDIS_REPLY_INTEGER, r->type);
    ASSERT_EQ(0, r->integer);
    freeReplyObject(r);
    redisFree(rc);
    server_stop_guarded(&s);
}

/* A history flush (history.lua) reads its rings' slots with HMGET,
 * type-checked, all before its first write: a wrongly typed hour ring
 * (read after the minute ring was written, before) or minute ring is
 * refused naming it, and so is a count or expiry that is no integer,
 * nothing written; histread.lua's reads (the totals, a ring's slots) are
 * refused the same. */
TEST(history_on_wrongtype_rings_or_bad_counts_writes_nothing) {
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *rc = server_connect(&s);
    static char before[8192];
    const char *args[] = {"1", "5", "60000", "3600000"};
    refused_on_wrongtype(rc, RJQ__S_HISTORY, "t:{g}:hist:h", "hash", args, 4);
    refused_on_wrongtype(rc, RJQ__S_HISTORY, "t:{g}:hist:m", "hash", args, 4);
    const char *bad_args[][4] = {{"1", "x", "60000", "3600000"},
                                 {"1", "-5", "60000", "3600000"},
                                 {"1", "5", "60000", "soon"},
                                 {"1", "5", "1e3", "3600000"}};
    const char *want[] = {"ERR history: bad number", "ERR history: bad number",
                          "ERR history: bad expiry", "ERR history: bad expiry"};
    for (size_t i = 0; i < 4; i++) {
        snapshot(rc, before, sizeof before);
        assert_refused_with(rc, eval_script(rc, RJQ__S_HISTORY, "g", bad_args[i], 4), want[i],
                            before);
    }
    redisReply *r = eval_script(rc, RJQ__S_HISTORY, "g", args, 4);
    ASSERT_EQ(REDIS_REPLY_INTEGER, r->type);
    freeReplyObject(r);
    r = eval_script(rc, RJQ__S_HISTORY, "g", args, 4);
    freeReplyObject(r);
    r = server_cmd(rc, "HGET t:{g}:hist:h total");
    ASSERT_STREQ("0 10", r->str);
    freeReplyObject(r);
    const char *totals[] = {"t", "1"};
    r = eval_script(rc, RJQ__S_HISTREAD, "g", totals, 2);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    ASSERT_STREQ("0 10", r->element[2]->str);
    freeReplyObject(r);
    const char *minutes[] = {"m", "3"};
    refused_on_wrongtype(rc, RJQ__S_HISTREAD, "t:{g}:hist:h", "hash", totals, 2);
    refused_on_wrongtype(rc, RJQ__S_HISTREAD, "t:{g}:hist:m", "hash", minutes, 2);
    redisFree(rc);
    server_stop_guarded(&s);
}

/* A group's settings read its conf entry type-checked: a wrongly typed
 * conf is refused naming it, nothing written. */
TEST(gconf_on_wrongtype_conf_writes_nothing) {
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *rc = server_connect(&s);
    const char *args[] = {"a", "limits", "2", "1"};
    refused_on_wrongtype(rc, RJQ__S_GCONF, "t:{g}:g:conf", "hash", args, 4);
    assert_script_answers(rc, RJQ__S_GCONF, args, 4, 1);
    redisReply *r = server_cmd(rc, "HGET t:{g}:g:conf a");
    ASSERT_STREQ("2 1 0", r->str); /* (limit, weight, not paused) */
    freeReplyObject(r);
    redisFree(rc);
    server_stop_guarded(&s);
}

/* A group job's enqueue checks the keys it reads and writes before its
 * first write: the groups' job hash, and for a group with a limit its
 * slot set and with a rate the rated set (its offer reads them after the
 * job's columns were written), and a non-numeric gready counter. */
TEST(genqueue_on_wrongtype_group_keys_writes_nothing) {
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *rc = server_connect(&s);
    const char *args[] = {"0", "", "", "pay", "", "a"}; /* (bound, no push; one job) */
    refused_on_wrongtype(rc, RJQ__S_GENQUEUE, "t:{g}:g:job", "hash", args, 6);
    freeReplyObject(server_cmd(rc, "HSET t:{g}:g:conf a %s", "1 1 0 5/1000 -"));
    refused_on_wrongtype(rc, RJQ__S_GENQUEUE, "t:{g}:g:a:a", "set", args, 6);
    refused_on_wrongtype(rc, RJQ__S_GENQUEUE, "t:{g}:g:rated", "zset", args, 6);
    refused_for_counter(rc, RJQ__S_GENQUEUE, "gready", args, 6);
    freeReplyObject(server_cmd(rc, "HDEL t:{g}:stats gready"));
    assert_script_answers_pair(rc, RJQ__S_GENQUEUE, args, 6, "1");
    ASSERT_EQ(1, server_int(rc, "LLEN t:{g}:g:r:a"));
    redisFree(rc);
    server_stop_guarded(&s);
}

/* A call of jobs of several groups writes the groups' ready ids first,
 * each write checking its own key's type: a wrongly typed list or priority
 * set of a later group undoes those written before it (nothing written,
 * the error names the key); a group entering the depth index has its
 * priority set checked (counted before the writes, genq40: its ZCARD). */
TEST(genqueue_of_several_groups_on_a_wrongtype_groups_list_writes_nothing) {
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *rc = server_connect(&s);
    /* a1 and b1 of priority 0, b2 of priority 5 */
    const char *args[] = {"0", "", "", "p1", "", "a", "", "p2", "", "b", "", "p3", "0,5,3,", "b"};
    freeReplyObject(server_cmd(rc, "RPUSH t:{g}:g:r:a old"));
    refused_on_wrongtype(rc, RJQ__S_GENQUEUE, "t:{g}:g:r:b", "list", args, 14);
    refused_on_wrongtype(rc, RJQ__S_GENQUEUE, "t:{g}:g:p:b", "zset", args, 14);
    const char *one[] = {"0", "", "", "p1", "", "a"};
    refused_on_wrongtype(rc, RJQ__S_GENQUEUE, "t:{g}:g:p:a", "zset", one, 6);
    redisReply *r = eval_script(rc, RJQ__S_GENQUEUE, "g", args, 14);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 6);
    freeReplyObject(r);
    ASSERT_EQ(2, server_int(rc, "LLEN t:{g}:g:r:a"));
    ASSERT_EQ(1, server_int(rc, "LLEN t:{g}:g:r:b"));
    ASSERT_EQ(1, server_int(rc, "ZCARD t:{g}:g:p:b"));
    redisFree(rc);
    server_stop_guarded(&s);
}

/* A group job's enqueue checks every key it writes before its first
 * write, by the read that comes first where there is one (stats, meta, the
 * depth index, the settings, an entering group's list and priority set,
 * the ring for an entering group) and by a TYPE of the rest it writes (the
 * job columns, the groups' job hash, and the listing and busy set for a
 * group entering the depth index, the delayed set for a delayed job): a
 * wrongly typed one of any is
 * refused naming it, nothing written (genq40 left the TYPE of the keys a
 * call does not write). */
TEST(genqueue_checks_every_key_it_writes_before_its_first_write) {
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *rc = server_connect(&s);
    /* one ready job of group a (entering the depth index), one delayed of b */
    const char *args[] = {"0", "", "", "p1", "", "a", "", "p2", "60000,0,3,", "b"};
    static const char *const keys[][2] = {
        {"t:{g}:stats", "hash"},   {"t:{g}:meta", "hash"},      {"t:{g}:payload", "hash"},
        {"t:{g}:state", "hash"},   {"t:{g}:options", "hash"},   {"t:{g}:g:job", "hash"},
        {"t:{g}:g:conf", "hash"},  {"t:{g}:g:depth", "zset"},   {"t:{g}:g:ring", "zset"},
        {"t:{g}:g:all", "zset"},   {"t:{g}:g:busy", "zset"},    {"t:{g}:g:delayed", "zset"},
        {"t:{g}:g:r:a", "list"},   {"t:{g}:g:p:a", "zset"}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        refused_on_wrongtype(rc, RJQ__S_GENQUEUE, keys[i][0], keys[i][1], args, 10);
    redisReply *r = eval_script(rc, RJQ__S_GENQUEUE, "g", args, 10);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4);
    freeReplyObject(r);
    ASSERT_EQ(1, server_int(rc, "LLEN t:{g}:g:r:a"));
    ASSERT_EQ(1, server_int(rc, "ZCARD t:{g}:g:delayed"));
    ASSERT_EQ(1, server_int(rc, "ZCARD t:{g}:g:ring"));
    /* a job behind group a's ready one (in the index, until its own key's
     * turn: the last): the keys such a call reads or writes */
    for (size_t i = 0; i < 8; i++)
        refused_on_wrongtype(rc, RJQ__S_GENQUEUE, keys[i][0], keys[i][1], args, 6);
    r = eval_script(rc, RJQ__S_GENQUEUE, "g", args, 6);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->integer == 0);
    freeReplyObject(r);
    ASSERT_EQ(2, server_int(rc, "LLEN t:{g}:g:r:a"));
    redisFree(rc);
    server_stop_guarded(&s);
}

/* Running a delayed group job now checks the groups' keys it reads (the
 * job hash, the delayed set) and those its group's ready list and ring
 * write before its first write: a wrongly typed one is refused naming it,
 * nothing written. (A wrongly typed ready list of the group failed after
 * the job had left the delayed set: it waited nowhere.) */
TEST(promote_of_a_group_job_on_wrongtype_group_keys_writes_nothing) {
    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *rc = server_connect(&s);
    freeReplyObject(server_cmd(rc, "HSET t:{g}:payload j1 x"));
    freeReplyObject(server_cmd(rc, "HSET t:{g}:state j1 %s", "delayed 0 @5,,"));
    freeReplyObject(server_cmd(rc, "HSET t:{g}:options j1 %s", "0,,\nrjq.group=a"));
    freeReplyObject(server_cmd(rc, "HSET t:{g}:g:job j1 a"));
    freeReplyObject(server_cmd(rc, "ZADD t:{g}:g:delayed 9999999999999 j1"));
    freeReplyObject(server_cmd(rc, "ZADD t:{g}:g:all 0 a"));
    const char *args[] = {"t:{g}:wake", "j1"};
    const char *keys[][2] = {{"t:{g}:g:job", "hash"}, {"t:{g}:g:r:a", "list"}, {"t:{g}:g:ring", "zset"},
                             {"t:{g}:g:depth", "zset"}};
    for (size_t i = 0; i < 4; i++) {
        refused_on_wrongtype(rc, RJQ__S_PROMOTE, keys[i][0], keys[i][1], args, 2);
        freeReplyObject(server_cmd(rc, "HSET t:{g}:g:job j1 a")); /* (the one of them planted) */
    }
    assert_script_answers(rc, RJQ__S_PROMOTE, args, 2, 1);
    ASSERT_EQ(0, server_int(rc, "ZCARD t:{g}:g:delayed"));
    ASSERT_EQ(1, server_int(rc, "LLEN t:{g}:g:r:a"));
    redisReply *r = server_cmd(rc, "HGET t:{g}:state j1");
    ASSERT(r->type == REDIS_REPLY_STRING && strncmp(r->str, "ready 0", 7) == 0);
    freeReplyObject(r);
    redisFree(rc);
    server_stop_guarded(&s);
}

/* Jobs on[0] and on[1] of queue q planted running (payload, an active
 * state of token "tok", a lease), each with a dependent "w<i>" in the
 * queue other (a dependent of another queue). */
static void running_with_dependents_in(test_env *env, const char *q, const rjq_dep *on, rjq_queue *other) {
    for (int i = 0; i < 2; i++) {
        freeReplyObject(server_cmd(env->rc, "HSET t:{%s}:payload %s x", q, on[i].id));
        freeReplyObject(server_cmd(env->rc, "HSET t:{%s}:state %s %s", q, on[i].id, "active 1 tok @1,2,"));
        freeReplyObject(server_cmd(env->rc, "ZADD t:{%s}:active 99999999999999 %s", q, on[i].id));
        rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
        char id[8];
        snprintf(id, sizeof id, "w%d", i);
        o.id = id;
        o.after = &on[i];
        o.n_after = 1;
        ASSERT_OK(enqueue_job(env->base, other, "p", &o).status);
    }
}

/* A completion releasing dependents ignores what it cannot read or index
 * of them (lib.lua DEPS.finished, try_all): with the dependents hash
 * wrongly typed it completes the job and hands out no entry (the sweep's
 * deps_due.lua refuses the key); with the index of jobs whose dependents
 * of other queues are left (depsfin) wrongly typed it completes the job,
 * hands out its entry in its reply and leaves the key as it was. */
TEST(completion_with_dependents_on_wrongtype_dependency_keys_completes_and_leaves_them) {
    test_env env;
    env_start(&env, "dk");
    rjq_queue *other;
    ASSERT_OK(rjq_queue_open(env.c, "dk2", NULL, &other));
    rjq_dep on[] = {{"dk", "a"}, {"dk", "b"}};
    running_with_dependents_in(&env, "dk", on, other);
    const char *keys[] = {"t:{dk}:depsfin", "t:{dk}:dependents"};
    const char *entry[] = {"dk2 w0", NULL};
    for (int i = 0; i < 2; i++) {
        plant_wrongtype(env.rc, keys[i], "SET %s x");
        const char *jobs[] = {"1 tok", "1", on[i].id, "r"};
        redisReply *r = complete_fcall(env.rc, "dk", jobs, 4);
        ASSERT(r->type == REDIS_REPLY_ARRAY);
        if (entry[i]) { /* (code 3: entries left for the client, after its id) */
            ASSERT(r->elements == 3 && r->element[0]->integer == 3);
            ASSERT_STREQ(on[i].id, r->element[1]->str);
            ASSERT_STREQ(entry[i], r->element[2]->str);
        } else {
            ASSERT(r->elements == 1 && r->element[0]->integer == 1);
        }
        freeReplyObject(r);
        ASSERT_STREQ("completed", get_info(env.base, env.q, on[i].id).state);
        redisReply *v = server_cmd(env.rc, "GET %s", keys[i]);
        ASSERT_STREQ("x", v->str);
        freeReplyObject(v);
        freeReplyObject(server_cmd(env.rc, "DEL %s", keys[i]));
    }
    rjq_queue_close(other);
    env_stop(&env);
}

/* The same for depsfinc, the index of a completion call that leaves
 * several such jobs (lib.lua DEPSFIN_MEMBER): wrongly typed, the call
 * completes its jobs, hands out their entries and leaves the key as it
 * was; the sweep's deps_due and the client's deps_done refuse it, naming
 * the error, and deps_done's refusal leaves the key as it was. */
TEST(completion_of_several_jobs_with_dependents_on_wrongtype_depsfinc_completes_and_leaves_it) {
    test_env env;
    env_start(&env, "dj");
    rjq_queue *other;
    ASSERT_OK(rjq_queue_open(env.c, "dj2", NULL, &other));
    rjq_dep on[] = {{"dj", "a"}, {"dj", "b"}};
    running_with_dependents_in(&env, "dj", on, other);
    plant_wrongtype(env.rc, "t:{dj}:depsfinc", "SET %s x");
    const char *jobs[] = {"1 tok", "2", "a", "r", "b", "r"};
    redisReply *r = complete_fcall(env.rc, "dj", jobs, 6);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 6); /* (code 3 each, then the entries) */
    ASSERT(r->element[0]->integer == 3 && r->element[1]->integer == 3);
    ASSERT_STREQ("a", r->element[2]->str);
    ASSERT_STREQ("dj2 w0", r->element[3]->str);
    ASSERT_STREQ("b", r->element[4]->str);
    ASSERT_STREQ("dj2 w1", r->element[5]->str);
    freeReplyObject(r);
    for (int i = 0; i < 2; i++) ASSERT_STREQ("completed", get_info(env.base, env.q, on[i].id).state);
    ASSERT_EQ(0, server_int(env.rc, "EXISTS t:{dj}:depsfin"));
    const char *scan[] = {"scan", "1000000000000000"};
    r = server_fcall_reply(env.rc, RJQ__S_DEPS_DUE, "dj", scan, 2);
    ASSERT(r->type == REDIS_REPLY_ERROR && strstr(r->str, "depsfinc") != NULL);
    freeReplyObject(r);
    const char *done[] = {"a", "dj2 w0", "b", "dj2 w1"};
    r = server_fcall_reply(env.rc, RJQ__S_DEPS_DONE, "dj", done, 4);
    ASSERT(r->type == REDIS_REPLY_ERROR && strstr(r->str, "depsfinc") != NULL);
    freeReplyObject(r);
    redisReply *v = server_cmd(env.rc, "GET t:{dj}:depsfinc");
    ASSERT_STREQ("x", v->str);
    freeReplyObject(v);
    rjq_queue_close(other);
    env_stop(&env);
}
