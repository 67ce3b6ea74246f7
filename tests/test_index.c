/*
 * The index of declared JSON fields (rjq.h "The index of declared JSON
 * fields"; index.lua, enqueue.lua "Index", lib.lua delete_jobs): kept by
 * the enqueue script on a queue with a declaration (single jobs, batches,
 * an id that exists adds nothing, a debounce re-indexes), entries leave
 * with the records (delete, purge, retention), a queue without a
 * declaration runs no index command, bad declarations are refused with
 * nothing written, and a producer that has not learnt the declaration
 * never makes a lookup miss: rjq_queue_find refuses until the index
 * covers every job (rjq_queue_fill_index).
 */
#include "fixture.h"
#include "rjq_keys.h"
#include "rjq_scripts.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

typedef struct index_wait {
    int done, status;
    size_t n;
    char fields[256];
    long long covered, total;
} index_wait;

static void on_index(rjq_client *c, int status, const char *const *f, size_t n, long long covered,
                     long long total, void *data) {
    index_wait *w = data;
    (void)c;
    w->done++;
    w->status = status;
    w->n = n;
    w->covered = covered;
    w->total = total;
    w->fields[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        size_t used = strlen(w->fields);
        snprintf(w->fields + used, sizeof w->fields - used, "%s%s", i ? "," : "", f[i]);
    }
}

static index_wait set_index(test_env *e, rjq_queue *q, const char *const *f, size_t n) {
    index_wait w = {0};
    ASSERT_OK(rjq_queue_set_index(q, f, n, on_index, &w));
    ASSERT(loop_until(e->base, &w.done, 5000));
    ASSERT_EQ(1, w.done);
    ASSERT_OK(w.status);
    return w;
}

static index_wait get_index(test_env *e, rjq_queue *q) {
    index_wait w = {0};
    ASSERT_OK(rjq_queue_get_index(q, on_index, &w));
    ASSERT(loop_until(e->base, &w.done, 5000));
    ASSERT_OK(w.status);
    return w;
}

typedef struct find_wait {
    int done, status;
    size_t n;
    long long covered, total;
    char found[4096]; /* " id=state" per match */
} find_wait;

static void on_find(rjq_client *c, int status, const rjq_search_match *m, size_t n,
                    long long covered, long long total, void *data) {
    find_wait *w = data;
    (void)c;
    w->done++;
    w->status = status;
    w->n = n;
    w->covered = covered;
    w->total = total;
    w->found[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        size_t used = strlen(w->found);
        const rjq_search_match *e = rjq_search_match_get(m, i);
        snprintf(w->found + used, sizeof w->found - used, " %s=%s", e->id, e->state);
    }
}

static find_wait find(test_env *e, rjq_queue *q, const char *field, const char *value) {
    find_wait w = {0};
    ASSERT_OK(rjq_queue_find(q, field, value, strlen(value), NULL, 100, on_find, &w));
    ASSERT(loop_until(e->base, &w.done, 5000));
    ASSERT_EQ(1, w.done);
    return w;
}

static void enqueue_id(test_env *e, rjq_queue *q, const char *id, const char *payload) {
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = id;
    ASSERT_OK(enqueue_job(e->base, q, payload, id ? &o : NULL).status);
}

static const char *const CUSTOMER[] = {"customer", "n"};

TEST(index_kept_by_enqueue_single_batch_and_an_existing_id_adds_nothing) {
    test_env e;
    env_start(&e, "ix");
    index_wait d = set_index(&e, e.q, CUSTOMER, 2);
    ASSERT_STREQ("customer,n", d.fields);
    ASSERT_EQ(0, d.total);
    enqueue_id(&e, e.q, "a1", "{\"customer\":\"acme\",\"n\":7}");
    enqueue_id(&e, e.q, "a1", "{\"customer\":\"other\",\"n\":8}"); /* exists: untouched */
    enqueue_id(&e, e.q, "b1", "{\"customer\":\"bolt\",\"n\":7.5}");
    enqueue_id(&e, e.q, "c1", "not json");
    enqueue_id(&e, e.q, "c2", "{\"customer\":{\"nested\":1},\"n\":true}");
    rjq_enqueue_item items[3];
    rjq_job_options o[3];
    const char *ids[] = {"d1", "d2", "d3"};
    const char *p[] = {"{\"customer\":\"acme\"}", "{\"n\":7}", "{\"customer\":\"acme\",\"x\":1}"};
    for (int i = 0; i < 3; i++) {
        items[i] = (rjq_enqueue_item)RJQ_ENQUEUE_ITEM_INIT;
        o[i] = (rjq_job_options)RJQ_JOB_OPTIONS_INIT;
        o[i].id = ids[i];
        items[i].payload = p[i];
        items[i].len = strlen(p[i]);
        items[i].opts = &o[i];
    }
    enqueue_wait bw = {0};
    ASSERT_OK(rjq_enqueue_batch(e.q, items, 3, on_enqueue_wait, &bw));
    ASSERT(loop_until(e.base, &bw.done, 5000));
    ASSERT_OK(bw.status);

    find_wait f = find(&e, e.q, "customer", "acme");
    ASSERT_OK(f.status);
    ASSERT_STREQ(" a1=ready d1=ready d3=ready", f.found);
    ASSERT_EQ(7, f.covered);
    ASSERT_EQ(7, f.total);
    f = find(&e, e.q, "customer", "other");
    ASSERT_OK(f.status);
    ASSERT_EQ(0, f.n);
    f = find(&e, e.q, "n", "7"); /* a number as its decimal text */
    ASSERT_STREQ(" a1=ready d2=ready", f.found);
    f = find(&e, e.q, "n", "7.5");
    ASSERT_STREQ(" b1=ready", f.found);
    f = find(&e, e.q, "customer", "acm"); /* whole values only */
    ASSERT_EQ(0, f.n);
    f = find(&e, e.q, "x", "1"); /* not declared */
    ASSERT_EQ(RJQ_ENOTFOUND, f.status);
    /* paging: after the last id of the page before */
    find_wait pw = {0};
    ASSERT_OK(rjq_queue_find(e.q, "customer", "acme", 4, "", 2, on_find, &pw));
    ASSERT(loop_until(e.base, &pw.done, 5000));
    ASSERT_STREQ(" a1=ready d1=ready", pw.found);
    pw = (find_wait){0};
    ASSERT_OK(rjq_queue_find(e.q, "customer", "acme", 4, "d1", 2, on_find, &pw));
    ASSERT(loop_until(e.base, &pw.done, 5000));
    ASSERT_STREQ(" d3=ready", pw.found);
    env_stop(&e);
}

TEST(debounce_reindexes_the_new_payload) {
    test_env e;
    env_start(&e, "ixdeb");
    set_index(&e, e.q, CUSTOMER, 1);
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "k";
    o.delay_ms = 600000;
    o.debounce = 1;
    ASSERT_OK(enqueue_job(e.base, e.q, "{\"customer\":\"old\"}", &o).status);
    enqueue_wait w = enqueue_job(e.base, e.q, "{\"customer\":\"new\"}", &o);
    ASSERT_OK(w.status);
    ASSERT_EQ(1, w.replaced);
    ASSERT_EQ(0, find(&e, e.q, "customer", "old").n);
    ASSERT_STREQ(" k=delayed", find(&e, e.q, "customer", "new").found);
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{ixdeb}:index"));
    env_stop(&e);
}

static void count_done(test_env *e, count_wait *cw, long long want) {
    ASSERT(loop_until(e->base, &cw->done, 5000));
    ASSERT_OK(cw->status);
    ASSERT_EQ(want, cw->n);
}

static void cancelled(rjq_client *c, int status, const char *state, void *data) {
    (void)c;
    (void)state;
    ASSERT_OK(status);
    (*(long *)data)++;
}

static void complete_handler(rjq_job *job, void *data) {
    ASSERT_OK(rjq_job_complete(job, NULL, 0, on_done_ok, data));
}

static void on_stopped(rjq_worker *w, int status, void *data) {
    (void)w;
    ASSERT_OK(status);
    *(int *)data = 1;
}

TEST(index_entries_leave_with_delete_purge_and_retention) {
    test_env e;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.completed_max = 2;
    env_start_queue(&e, "ixgo", &qo);
    set_index(&e, e.q, CUSTOMER, 1);
    char id[16], payload[64];
    for (int i = 0; i < 6; i++) {
        snprintf(id, sizeof id, "j%d", i);
        snprintf(payload, sizeof payload, "{\"customer\":\"c%d\"}", i % 2);
        enqueue_id(&e, e.q, id, payload);
    }
    ASSERT_EQ(6, server_int(e.rc, "ZCARD t:{ixgo}:index"));
    ASSERT_EQ(6, server_int(e.rc, "HLEN t:{ixgo}:indexed"));
    /* cancel three, delete one of them by id, purge the other two */
    long nc = 0;
    for (int i = 0; i < 3; i++) {
        snprintf(id, sizeof id, "j%d", i);
        ASSERT_OK(rjq_queue_cancel(e.q, id, cancelled, &nc));
    }
    ASSERT(loop_until_count(e.base, &nc, 3, 5000));
    ASSERT_EQ(6, server_int(e.rc, "ZCARD t:{ixgo}:index")); /* (kept while the record is) */
    count_wait cw = {0};
    ASSERT_OK(rjq_queue_delete(e.q, "j0", on_count, &cw));
    count_done(&e, &cw, 1);
    ASSERT_EQ(5, server_int(e.rc, "ZCARD t:{ixgo}:index"));
    ASSERT_STREQ(" j2=cancelled j4=ready", find(&e, e.q, "customer", "c0").found);
    cw = (count_wait){0};
    ASSERT_OK(rjq_queue_purge(e.q, RJQ_STATE_CANCELLED, 100, on_count, &cw));
    count_done(&e, &cw, 2);
    ASSERT_EQ(3, server_int(e.rc, "ZCARD t:{ixgo}:index"));
    ASSERT_EQ(3, server_int(e.rc, "HLEN t:{ixgo}:indexed"));
    /* complete the other three: completed_max 2 deletes the oldest record */
    long done = 0;
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_handler, &done, &w));
    ASSERT(loop_until_count(e.base, &done, 3, 20000));
    int stopped = 0;
    ASSERT_OK(rjq_worker_stop(w, on_stopped, &stopped));
    ASSERT(loop_until(e.base, &stopped, 10000));
    long long kept = server_int(e.rc, "HLEN t:{ixgo}:payload");
    ASSERT(kept <= 2);
    ASSERT_EQ(kept, server_int(e.rc, "ZCARD t:{ixgo}:index"));
    ASSERT_EQ(kept, server_int(e.rc, "HLEN t:{ixgo}:indexed"));
    find_wait f = find(&e, e.q, "customer", "c1");
    ASSERT_OK(f.status);
    ASSERT_EQ(kept, f.covered);
    ASSERT_EQ(kept, f.total);
    env_stop(&e);
}

/* Every command INFO commandstats counted (scripts' own included). */
static long long all_calls(redisContext *rc) {
    redisReply *r = server_cmd(rc, "INFO commandstats");
    long long n = 0;
    for (const char *p = r->str; (p = strstr(p, ":calls=")) != NULL; p++) n += atoll(p + 7);
    freeReplyObject(r);
    return n;
}

/* The commands one enqueue of 10 anonymous jobs cost (the INFO itself
 * counted once, taken out), and how many of them were HMGET and ZADD. */
static long long enqueue_cost(test_env *e, rjq_queue *q, long long *hget, long long *zadd) {
    enqueue_id(e, q, NULL, "{\"customer\":\"warm\"}"); /* (learnt, scripts loaded) */
    *hget = server_calls(e->rc, "hmget");
    *zadd = server_calls(e->rc, "zadd");
    rjq_enqueue_item items[10];
    for (int i = 0; i < 10; i++) {
        items[i] = (rjq_enqueue_item)RJQ_ENQUEUE_ITEM_INIT;
        items[i].payload = "{\"customer\":\"acme\"}";
        items[i].len = strlen(items[i].payload);
    }
    long long before = all_calls(e->rc);
    enqueue_wait bw = {0};
    ASSERT_OK(rjq_enqueue_batch(q, items, 10, on_enqueue_wait, &bw));
    ASSERT(loop_until(e->base, &bw.done, 5000));
    ASSERT_OK(bw.status);
    long long n = all_calls(e->rc) - before - 1;
    *hget = server_calls(e->rc, "hmget") - *hget;
    *zadd = server_calls(e->rc, "zadd") - *zadd;
    return n - 2; /* (the two INFOs above) */
}

TEST(queue_without_index_runs_no_index_command_on_enqueue) {
    test_env e;
    env_start(&e, "plain");
    rjq_queue *iq;
    ASSERT_OK(rjq_queue_open(e.c, "indexed", NULL, &iq));
    set_index(&e, iq, CUSTOMER, 1);
    long long hget, zadd;
    long long plain = enqueue_cost(&e, e.q, &hget, &zadd);
    /* no index read, no index write */
    ASSERT_EQ(0, hget);
    ASSERT_EQ(0, zadd);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{plain}:index t:{plain}:indexed"));
    long long indexed = enqueue_cost(&e, iq, &hget, &zadd);
    /* the indexed one reads the declaration (HMGET), checks the types of
     * the two keys it writes (two TYPE) and writes the entries (one HSET
     * of the column, one ZADD): five commands a call, whatever its jobs */
    ASSERT_EQ(1, hget);
    ASSERT_EQ(1, zadd);
    ASSERT_EQ(plain + 5, indexed);
    ASSERT_EQ(11, server_int(e.rc, "ZCARD t:{indexed}:index"));
    env_stop(&e);
}

TEST(bad_declarations_refused_with_nothing_written) {
    test_env e;
    env_start(&e, "ixbad");
    char longname[RJQ_INDEX_FIELD_MAX + 2];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    const char *bad[][1] = {{""}, {"a b"}, {"a\"b"}, {longname}, {NULL}};
    index_wait w = {0};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ASSERT_EQ(RJQ_EINVAL, rjq_queue_set_index(e.q, bad[i], 1, on_index, &w));
    const char *five[] = {"a", "b", "c", "d", "e"}, *twice[] = {"a", "a"};
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_set_index(e.q, five, 5, on_index, &w));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_set_index(e.q, twice, 2, on_index, &w));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_set_index(e.q, NULL, 1, on_index, &w));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_set_index(NULL, five, 1, on_index, &w));
    longname[RJQ_INDEX_FIELD_MAX] = '\0'; /* the longest name */
    const char *longest[] = {longname};
    find_wait f = {0};
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_find(e.q, "a b", "x", 1, NULL, 10, on_find, &f));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_find(e.q, "a", "x", 0, NULL, 10, on_find, &f));
    ASSERT_EQ(RJQ_EINVAL,
              rjq_queue_find(e.q, "a", "x", RJQ_INDEX_VALUE_MAX + 1, NULL, 10, on_find, &f));
    static char long_id[RJQ_JOB_ID_MAX + 2];
    memset(long_id, 'i', RJQ_JOB_ID_MAX + 1);
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_find(e.q, "a", "x", 1, long_id, 10, on_find, &f));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_find(e.q, "a", "x", 1, NULL, 0, on_find, &f));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_find(e.q, "a", "x", 1, NULL, RJQ_JOBS_PAGE_MAX + 1, on_find, &f));
    ASSERT_EQ(0, w.done + f.done);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{ixbad}:meta"));
    /* the script refuses a bad name too, before writing */
    redisReply *r = server_cmd(e.rc, "FCALL %s 11 t:{ixbad}:meta t:{ixbad}:payload "
                                     "t:{ixbad}:state t:{ixbad}:options t:{ixbad}:result "
                                     "t:{ixbad}:error t:{ixbad}:failtoken t:{ixbad}:watchers "
                                     "t:{ixbad}:attempts t:{ixbad}:indexed t:{ixbad}:index set %s",
                               rjq__scripts[RJQ__S_INDEX].function, "a\"b");
    ASSERT(r->type == REDIS_REPLY_ERROR && strstr(r->str, "bad field name"));
    freeReplyObject(r);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{ixbad}:meta"));
    ASSERT_STREQ(longname, set_index(&e, e.q, longest, 1).fields);
    ASSERT_STREQ("", set_index(&e, e.q, NULL, 0).fields); /* dropped */
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{ixbad}:meta index"));
    env_stop(&e);
}

typedef struct fill_wait {
    int done, status;
    char cursor[32];
    long long covered, total, indexed;
} fill_wait;

static void on_fill(rjq_client *c, int status, const char *cursor, long long covered,
                    long long total, long long indexed, void *data) {
    fill_wait *s = data;
    (void)c;
    s->done++;
    s->status = status;
    snprintf(s->cursor, sizeof s->cursor, "%s", cursor ? cursor : "");
    s->covered = covered;
    s->total = total;
    s->indexed = indexed;
}

TEST(producer_that_has_not_learnt_never_makes_find_miss_fill_catches_up) {
    test_env e;
    env_start(&e, "ixlate");
    /* a producer on another client learns "no index" with its first job */
    rjq_client_options co = client_options(e.s.url);
    rjq_client *pc = client_new(e.base, &co);
    rjq_queue *pq;
    ASSERT_OK(rjq_queue_open(pc, "ixlate", NULL, &pq));
    enqueue_id(&e, pq, "early", "{\"customer\":\"acme\"}");
    set_index(&e, e.q, CUSTOMER, 1);
    /* within its relearn time it still passes no fields: unindexed */
    enqueue_id(&e, pq, "late", "{\"customer\":\"acme\"}");
    enqueue_id(&e, e.q, "mine", "{\"customer\":\"acme\"}"); /* taught by its declaration */
    find_wait f = find(&e, e.q, "customer", "acme");
    ASSERT_EQ(RJQ_ESTATE, f.status); /* never a silent miss */
    ASSERT_EQ(0, f.n);
    ASSERT_EQ(1, f.covered);
    ASSERT_EQ(3, f.total);
    /* a fresh handle learns at its first enqueue, whose batch waits for it */
    rjq_client *fc = client_new(e.base, &co);
    rjq_queue *fq;
    ASSERT_OK(rjq_queue_open(fc, "ixlate", NULL, &fq));
    enqueue_id(&e, fq, "fresh", "{\"customer\":\"acme\"}");
    ASSERT_EQ(2, get_index(&e, e.q).covered);
    /* fill the rest, in steps */
    char cursor[32] = "0";
    int steps = 0;
    do {
        fill_wait s = {0};
        ASSERT_OK(rjq_queue_fill_index(e.q, cursor, 1, on_fill, &s));
        ASSERT(loop_until(e.base, &s.done, 5000));
        ASSERT_OK(s.status);
        snprintf(cursor, sizeof cursor, "%s", s.cursor);
    } while (strcmp(cursor, "0") != 0 && ++steps < 100);
    f = find(&e, e.q, "customer", "acme");
    ASSERT_OK(f.status);
    ASSERT_STREQ(" early=ready fresh=ready late=ready mine=ready", f.found);
    ASSERT_EQ(4, f.covered);
    rjq_client_free(fc);
    rjq_client_free(pc);
    env_stop(&e);
}

