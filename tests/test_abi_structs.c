/*
 * The extensible structs of rjq.h ("Extensible structs"): every struct the
 * caller fills starts with its size, and the library reads only what that
 * size covers.
 *
 * A struct built as an older header would (smaller: the fields added
 * since are missing) is placed so that it ends exactly where a PROT_NONE
 * page starts: a library that read one byte past its size would fault.
 * Where a missing field has a default that shows (max_attempts), the
 * bytes after the older struct are garbage instead: the default is taken,
 * not the garbage. A struct of a newer header (bigger) is taken when its
 * unknown bytes are all zero and refused with RJQ_EINVAL, its name in the
 * errmsg, when one is not; so is a size of 0 (a struct set to {0}).
 */
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fixture.h"
#include "harness.h"
#include "loopops.h"
#include "rjq/libevent.h"
#include "server.h"
#include "waits.h"

/* size bytes that end where an inaccessible page begins. */
static void *at_guard(size_t size) {
    long page = sysconf(_SC_PAGESIZE);
    ASSERT(page > 0 && size <= (size_t)page);
    char *m = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    ASSERT(m != MAP_FAILED);
    ASSERT(mprotect(m + page, (size_t)page, PROT_NONE) == 0);
    return m + page - size;
}

static void guard_free(void *p, size_t size) {
    long page = sysconf(_SC_PAGESIZE);
    munmap((char *)p + size - page, 2 * (size_t)page);
}

/* The first `size` bytes of *full, as an older header's struct, at a guard. */
static void *older(const void *full, size_t size) {
    void *p = at_guard(size);
    memcpy(p, full, size);
    memcpy(p, &size, sizeof size);
    return p;
}

static long handled, done_count;
static void complete_it(rjq_job *job, void *data) {
    (void)data;
    handled++;
    ASSERT_OK(rjq_job_complete(job, "r", 1, on_done_ok, &done_count));
}

typedef struct batch_wait {
    int done, status;
    size_t n;
    char ids[4][64];
} batch_wait;

static void on_batch(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c;
    batch_wait *w = data;
    w->done++;
    w->status = status;
    w->n = n;
    for (size_t i = 0; i < n && i < 4; i++)
        snprintf(w->ids[i], sizeof w->ids[i], "%s", rjq_enqueued_get(jobs, i)->id);
}

static void on_await(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)c, (void)o;
    *(int *)data = status == RJQ_OK ? 1 : status;
}

TEST(structs_of_an_older_header_are_read_only_as_far_as_their_size) {
    test_env e;
    env_start(&e, NULL);

    /* rjq_loop_ops as it was before watch_fd and unwatch_fd (the growth
     * that broke positional initialisers), rjq_client_options before
     * wait_replicas */
    const rjq_loop_ops full_ops = loopops_ops();
    size_t ops_size = offsetof(rjq_loop_ops, watch_fd);
    rjq_loop_ops *ops = older(&full_ops, ops_size);
    rjq_client_options co = client_options(e.s.url);
    size_t co_size = offsetof(rjq_client_options, wait_replicas);
    rjq_client_options *old_co = older(&co, co_size);
    rjq_client *c = NULL;
    ASSERT_OK(loopops_client_new(&c, e.base, old_co, ops));
    wait_connected(e.base, c);

    /* rjq_queue_options before job_timeout_ms */
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.dead_max = 10;
    size_t qo_size = offsetof(rjq_queue_options, job_timeout_ms);
    rjq_queue_options *old_qo = older(&qo, qo_size);
    rjq_queue *q = NULL;
    ASSERT_OK(rjq_queue_open(c, "abi", old_qo, &q));

    /* rjq_job_options before dedup_ms, at a guard */
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.id = "older-1";
    jo.max_attempts = 5;
    size_t jo_size = offsetof(rjq_job_options, dedup_ms);
    rjq_job_options *old_jo = older(&jo, jo_size);
    enqueue_wait ew = enqueue_job(e.base, q, "first", old_jo);
    ASSERT_OK(ew.status);
    ASSERT_STREQ("older-1", ew.id);
    info_wait iw = get_info(e.base, q, "older-1");
    ASSERT_OK(iw.status);
    ASSERT_STREQ("first", iw.payload);
    ASSERT_EQ(5, iw.max_attempts);

    /* rjq_job_options that end before max_attempts, garbage after them:
     * max_attempts is the default (3), not the garbage */
    union {
        rjq_job_options o;
        unsigned char b[sizeof(rjq_job_options)];
    } junk;
    memset(junk.b, 0x7f, sizeof junk.b);
    junk.o.size = offsetof(rjq_job_options, max_attempts);
    junk.o.id = "older-2";
    junk.o.delay_ms = 0;
    junk.o.priority = 0;
    ew = enqueue_job(e.base, q, "second", &junk.o);
    ASSERT_OK(ew.status);
    iw = get_info(e.base, q, "older-2");
    ASSERT_OK(iw.status);
    ASSERT_EQ(3, iw.max_attempts);
    ASSERT_STREQ("ready", iw.state);

    /* a batch of items of an older layout (no opts field: stride 24), the
     * last one ending at a guard */
    typedef struct {
        size_t size;
        const void *payload;
        size_t len;
    } old_item;
    old_item *items = at_guard(3 * sizeof(old_item));
    const char *payloads[3] = {"a", "bb", "ccc"};
    for (int i = 0; i < 3; i++)
        items[i] = (old_item){sizeof(old_item), payloads[i], strlen(payloads[i])};
    batch_wait bw = {0};
    ASSERT_OK(rjq_enqueue_batch(q, (const rjq_enqueue_item *)(const void *)items, 3, on_batch,
                                &bw));
    ASSERT(loop_until(e.base, &bw.done, 5000));
    ASSERT_OK(bw.status);
    ASSERT_EQ(3, bw.n);
    for (int i = 0; i < 3; i++) {
        iw = get_info(e.base, q, bw.ids[i]);
        ASSERT_OK(iw.status);
        ASSERT_STREQ(payloads[i], iw.payload);
    }

    /* rjq_await_options before on_progress, rjq_worker_options before
     * on_notice */
    rjq_await_options ao = RJQ_AWAIT_OPTIONS_INIT;
    ao.timeout_ms = 60000;
    rjq_await_options *old_ao = older(&ao, offsetof(rjq_await_options, on_progress));
    int awaited = 0;
    ASSERT_OK(rjq_queue_await(q, "older-1", old_ao, on_await, &awaited, NULL));
    rjq_worker_options wo = quiet_worker_options(2);
    rjq_worker_options *old_wo = older(&wo, offsetof(rjq_worker_options, on_notice));
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(q, old_wo, complete_it, NULL, &w));
    ASSERT(loop_until_count(e.base, &done_count, 5, 10000));
    ASSERT(loop_until(e.base, &awaited, 5000));
    ASSERT_EQ(1, awaited);

    /* rjq_limits before rate_window_ms, rjq_schedule before missed */
    rjq_limits li = RJQ_LIMITS_INIT;
    li.concurrency = 4;
    rjq_limits *old_li = older(&li, offsetof(rjq_limits, rate_window_ms));
    count_wait cw = {0};
    ASSERT_OK(rjq_queue_set_limits(q, old_li, on_count, &cw));
    ASSERT(loop_until(e.base, &cw.done, 5000));
    ASSERT_OK(cw.status);
    ASSERT_EQ(4, get_stats(e.base, q).limit_concurrency);
    rjq_schedule sc = RJQ_SCHEDULE_INIT;
    sc.every_ms = 3600000;
    rjq_schedule *old_sc = older(&sc, offsetof(rjq_schedule, missed));
    cw = (count_wait){0};
    ASSERT_OK(rjq_schedule_set(q, "hourly", old_sc, on_count, &cw));
    ASSERT(loop_until(e.base, &cw.done, 5000));
    ASSERT_OK(cw.status);
    ASSERT_EQ(1, cw.n);

    rjq_client_free(c);
    guard_free(ops, ops_size);
    guard_free(old_co, co_size);
    guard_free(old_qo, qo_size);
    guard_free(old_jo, jo_size);
    guard_free(items, 3 * sizeof(old_item));
    guard_free(old_ao, offsetof(rjq_await_options, on_progress));
    guard_free(old_wo, offsetof(rjq_worker_options, on_notice));
    guard_free(old_li, offsetof(rjq_limits, rate_window_ms));
    guard_free(old_sc, offsetof(rjq_schedule, missed));
    env_stop(&e);
}

static void never_enq(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)status, (void)jobs, (void)n, (void)data;
    FAIL_AT(__FILE__, __LINE__, "a refused call's callback ran");
}

static void never_job(rjq_job *job, void *data) {
    (void)job, (void)data;
    FAIL_AT(__FILE__, __LINE__, "a refused worker ran a job");
}

/* rjq_client_new(opts) fails with RJQ_EINVAL, the errmsg naming `what`. */
static void client_refused(struct event_base *base, const rjq_client_options *o,
                           const rjq_loop_ops *ops, const char *what) {
    rjq_client *c = NULL;
    int rc = ops ? loopops_client_new(&c, base, o, ops) : rjq_libevent_client_new(&c, base, o);
    ASSERT_EQ(RJQ_EINVAL, rc);
    ASSERT(c == NULL);
    ASSERT(strstr(rjq_client_get_errmsg(NULL), what) != NULL);
}

TEST(structs_of_a_newer_header_are_taken_when_their_new_fields_are_zero_else_refused) {
    test_env e;
    env_start(&e, "abi");
    rjq_client *c = NULL;

    /* client options with a field this library does not know */
    struct {
        rjq_client_options o;
        long long newer;
    } big = {client_options(e.s.url), 0};
    big.o.size = sizeof big;
    ASSERT_OK(rjq_libevent_client_new(&c, e.base, &big.o));
    rjq_client_free(c);
    big.newer = 1;
    client_refused(e.base, &big.o, NULL, "rjq_client_options");
    /* size 0: set to {0} or memset, not RJQ_CLIENT_OPTIONS_INIT */
    rjq_client_options zero;
    memset(&zero, 0, sizeof zero);
    zero.url = e.s.url;
    client_refused(e.base, &zero, NULL, "RJQ_..._INIT");
    rjq_client_options huge = client_options(e.s.url);
    huge.size = (size_t)-1;
    client_refused(e.base, &huge, NULL, "rjq_client_options");
    /* loop hooks of a newer header: one more hook, set */
    struct {
        rjq_loop_ops ops;
        void (*newer)(void);
    } bops = {loopops_ops(), (void (*)(void))abort};
    bops.ops.size = sizeof bops;
    rjq_client_options co = client_options(e.s.url);
    client_refused(e.base, &co, &bops.ops, "rjq_loop_ops");
    bops.newer = NULL;
    ASSERT_OK(loopops_client_new(&c, e.base, &co, &bops.ops));
    rjq_client_free(c);

    /* job options */
    struct {
        rjq_job_options o;
        long long newer;
    } bjo = {RJQ_JOB_OPTIONS_INIT, 0};
    bjo.o.size = sizeof bjo;
    bjo.o.id = "newer-1";
    enqueue_wait ew = enqueue_job(e.base, e.q, "n", &bjo.o);
    ASSERT_OK(ew.status);
    ASSERT_STREQ("newer-1", ew.id);
    bjo.newer = 7;
    bjo.o.id = "newer-2";
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue(e.q, "n", 1, &bjo.o, never_enq, NULL));
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "rjq_job_options") != NULL);
    /* a reserved field set (a later field that took it over) */
    rjq_job_options jres = RJQ_JOB_OPTIONS_INIT;
    jres.reserved = 1;
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue(e.q, "n", 1, &jres, never_enq, NULL));
    rjq_schedule sres = RJQ_SCHEDULE_INIT;
    sres.every_ms = 1000;
    sres.reserved = 1;
    ASSERT_EQ(RJQ_EINVAL, rjq_schedule_set(e.q, "s", &sres, NULL, NULL));
    rjq_job_options jzero;
    memset(&jzero, 0, sizeof jzero);
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue(e.q, "n", 1, &jzero, never_enq, NULL));

    /* items of a newer layout: taken in steps of their size */
    struct bitem {
        rjq_enqueue_item it;
        long long newer;
    } bi[3];
    const char *payloads[3] = {"x", "yy", "zzz"};
    for (int i = 0; i < 3; i++) {
        memset(&bi[i], 0, sizeof bi[i]);
        bi[i].it.size = sizeof bi[i];
        bi[i].it.payload = payloads[i];
        bi[i].it.len = strlen(payloads[i]);
    }
    batch_wait bw = {0};
    ASSERT_OK(rjq_enqueue_batch(e.q, &bi[0].it, 3, on_batch, &bw));
    ASSERT(loop_until(e.base, &bw.done, 5000));
    ASSERT_OK(bw.status);
    for (int i = 0; i < 3; i++) {
        info_wait iw = get_info(e.base, e.q, bw.ids[i]);
        ASSERT_OK(iw.status);
        ASSERT_STREQ(payloads[i], iw.payload);
    }
    bi[1].newer = 1; /* an unknown field set in one item */
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue_batch(e.q, &bi[0].it, 3, never_enq, NULL));
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "rjq_enqueue_item") != NULL);
    bi[1].newer = 0;
    bi[2].it.size = sizeof(rjq_enqueue_item); /* sizes differ */
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue_batch(e.q, &bi[0].it, 3, never_enq, NULL));
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "item 2") != NULL);
    /* an item's job options are checked too */
    rjq_enqueue_item one = RJQ_ENQUEUE_ITEM_INIT;
    one.payload = "o";
    one.len = 1;
    one.opts = &bjo.o; /* newer = 7 */
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue_batch(e.q, &one, 1, never_enq, NULL));

    /* worker, queue, await options, limits, schedule */
    struct {
        rjq_worker_options o;
        long long newer;
    } bwo = {quiet_worker_options(1), 1};
    bwo.o.size = sizeof bwo;
    rjq_worker *w = NULL;
    ASSERT_EQ(RJQ_EINVAL, rjq_worker_start(e.q, &bwo.o, never_job, NULL, &w));
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "rjq_worker_options") != NULL);
    rjq_queue_options qzero;
    memset(&qzero, 0, sizeof qzero);
    rjq_queue *q2 = NULL;
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_open(e.c, "abi2", &qzero, &q2));
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "rjq_queue_options") != NULL);
    rjq_await_options azero;
    memset(&azero, 0, sizeof azero);
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_await(e.q, "newer-1", &azero, on_await, NULL, NULL));
    rjq_limits lzero;
    memset(&lzero, 0, sizeof lzero);
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_set_limits(e.q, &lzero, NULL, NULL));
    rjq_schedule szero;
    memset(&szero, 0, sizeof szero);
    szero.every_ms = 1000;
    ASSERT_EQ(RJQ_EINVAL, rjq_schedule_set(e.q, "s", &szero, NULL, NULL));
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "rjq_schedule") != NULL);
    env_stop(&e);
}
