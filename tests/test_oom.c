/*
 * Allocation failures that run user callbacks in the middle of library
 * loops (issue 12): regression tests, named after what they guard.
 *
 * The executable is linked with the allocation-failure injector
 * (failalloc.h), which makes allocations of rjq's own code fail on
 * demand: by their position in a call (failalloc_arm_once) where the call
 * is synchronous, by their size (failalloc_arm_min_size) where the
 * allocation runs inside the event loop; each test then makes the one
 * allocation it targets the only big one. Every test checks that the
 * intended allocation failed (the status a callback got, the injector's
 * counts), so a change that moves the allocation fails the test instead
 * of leaving it to pass without exercising anything.
 *
 * Memory errors (use after free) show as AddressSanitizer aborts in a
 * -DRJQ_SANITIZE=ON build; the other defects fail an assertion in any
 * build. Timeouts below are safety nets only.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "enqueue.h" /* white-box: RJQ__ENQUEUE_BYTES, when a batch goes out early */
#include "failalloc.h"
#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

/* ---- 1. an enqueue batch sent early, from inside rjq_enqueue() ------------- */

/* Two of these pass RJQ__ENQUEUE_BYTES; one alone does not. */
static char big[RJQ__ENQUEUE_BYTES / 4 * 3];

typedef struct enq_rec {
    int calls, status;
    int inside;                      /* calls made inside the test's rjq_enqueue() */
    char id[RJQ_JOB_ID_MAX + 1];
} enq_rec;

enum { EF_ENQUEUE_AGAIN, EF_FREE_CLIENT };

static struct {
    int mode;             /* what the callback of the failed send does */
    int in_enqueue;       /* the test is inside rjq_enqueue() */
    enq_rec first;        /* the job in the batch whose send fails */
    enq_rec second;       /* the job whose enqueue sends that batch early */
    enq_rec again;        /* enqueued by first's callback */
    int again_rc;
    long answered;        /* second and again */
    long seen_at_report, failures_at_report;
} ef;

static void ef_note(enq_rec *r, int status, const rjq_enqueued *jobs, size_t n) {
    r->calls++;
    r->status = status;
    r->inside += ef.in_enqueue;
    if (status == RJQ_OK && n == 1) snprintf(r->id, sizeof r->id, "%s", jobs[0].id);
}

static void ef_on_again(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n,
                        void *data) {
    (void)c, (void)data;
    ef_note(&ef.again, status, jobs, n);
    ef.answered++;
}

static void ef_on_second(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n,
                         void *data) {
    (void)c, (void)data;
    ef_note(&ef.second, status, jobs, n);
    ef.answered++;
}

static void ef_on_first(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n,
                        void *data) {
    rjq_queue *q = data;
    ef_note(&ef.first, status, jobs, n);
    if (status != RJQ_ENOMEM) return;
    ef.seen_at_report = failalloc_count();
    ef.failures_at_report = failalloc_failures();
    if (ef.mode == EF_ENQUEUE_AGAIN) {
        rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
        o.id = "again";
        ef.again_rc = rjq_enqueue(q, "small", 5, &o, ef_on_again, NULL);
    } else {
        rjq_client_free(c);
    }
}

/* On a new queue `name`: enqueue one big job (it waits in the queue's
 * batch), then, with allocation n of the call failing, another, which
 * makes rjq_enqueue() send the first batch early, from inside. Returns 1
 * when that send failed (the first job's callback got RJQ_ENOMEM inside
 * the call); otherwise waits until this round is answered and returns 0. */
static int early_send_fails(test_env *e, const char *name, long n, rjq_queue **qp, int *rc) {
    rjq_queue *q = *qp = queue_for(e->c, name);
    get_stats(e->base, q); /* (its layout read: enqueues are no longer held) */
    int mode = ef.mode;
    memset(&ef, 0, sizeof ef);
    ef.mode = mode;
    ASSERT_OK(rjq_enqueue(q, big, sizeof big, NULL, ef_on_first, q));
    ASSERT_EQ(0, ef.first.calls);
    ef.in_enqueue = 1;
    failalloc_arm_once(n);
    *rc = rjq_enqueue(q, big, sizeof big, NULL, ef_on_second, NULL);
    failalloc_disarm();
    ef.in_enqueue = 0;
    if (ef.first.calls == 1 && ef.first.status == RJQ_ENOMEM) return 1;
    if (failalloc_failures() == 0) /* the call made no more than n allocations */
        FAIL_AT(__FILE__, __LINE__, "no failed allocation made the early send fail (%ld tried)", n);
    ASSERT_EQ(0, ef.first.calls); /* it failed elsewhere: the first job was not reported */
    /* let the round finish: the first job goes out at the queue's tick */
    WAIT_FOR(e->base, ef.first.calls && (*rc != RJQ_OK || ef.second.calls), 10000);
    ASSERT_EQ(1, ef.first.calls);
    return 0;
}

/* Find the allocation of rjq_enqueue() whose failure makes the early send
 * fail (the first one: sent_batch in flush_batch, at the time of writing):
 * try allocation 0, 1, ... each on a fresh queue. *qp and name receive
 * the queue; returns n. */
static long fail_early_send(test_env *e, rjq_queue **qp, char *name, size_t cap, int *rc) {
    for (long n = 0; n < 100; n++) {
        snprintf(name, cap, "early-%ld", n);
        if (early_send_fails(e, name, n, qp, rc)) return n;
    }
    FAIL_AT(__FILE__, __LINE__, "no early send failed");
    return -1;
}

/* A batch whose send fails (out of memory) reports its jobs' failure to
 * their callbacks. When the send was the early one inside rjq_enqueue()
 * (the batch plus the new job would pass RJQ__ENQUEUE_BYTES), the jobs
 * were reported from the live batch, which was reset afterwards: a
 * callback that enqueued again, into that batch, lost its job (its
 * callback was never called, nothing reached Redis). The batch is now
 * detached before its jobs are reported. */
/* A client, and an early send that fails with the callback in `mode`. */
static long start_failed_send(test_env *e, int mode, rjq_queue **q, char *name, size_t cap,
                              int *rc) {
    env_start(e, NULL);
    memset(big, 'b', sizeof big);
    ef.mode = mode;
    return fail_early_send(e, q, name, cap, rc);
}

TEST(enqueue_callback_that_enqueues_again_after_a_failed_send_is_kept) {
    test_env e;
    char name[32];
    rjq_queue *q;
    int rc;
    long n = start_failed_send(&e, EF_ENQUEUE_AGAIN, &q, name, sizeof name, &rc);

    /* the failed allocation was the last one before the report */
    ASSERT_EQ(1, ef.failures_at_report);
    ASSERT_EQ(n + 1, ef.seen_at_report);
    ASSERT_EQ(1, ef.first.inside);
    ASSERT_OK(ef.again_rc);
    ASSERT_OK(rc); /* the call that sent the batch still takes its own job */

    ASSERT(loop_until_count(e.base, &ef.answered, 2, 10000));
    (void)get_stats(e.base, q); /* a round trip: a second answer would have come */
    ASSERT_EQ(1, ef.first.calls);
    ASSERT_EQ(1, ef.again.calls);
    ASSERT_OK(ef.again.status);
    ASSERT_STREQ("again", ef.again.id);
    ASSERT_EQ(1, ef.second.calls);
    ASSERT_OK(ef.second.status);

    info_wait w = get_info(e.base, q, "again");
    ASSERT_OK(w.status);
    ASSERT_STREQ("ready", w.state);
    ASSERT_STREQ("small", w.payload);
    rjq_stats st = get_stats(e.base, q);
    ASSERT_EQ(2, st.enqueued); /* again and second; first never went out */
    ASSERT_EQ(2, st.ready);
    env_stop(&e);
}

/* rjq_client_free() from the callback of that failed early send: the
 * callback runs inside rjq_enqueue(), which did not enter the client, so
 * the client was destroyed at once and rjq_enqueue() went on with it
 * (use after free). Public entry points that can reach user code now
 * enter the client; the free completes as rjq_enqueue() returns.
 *
 * rjq_enqueue() returns RJQ_ECLOSED: its job is refused and its callback
 * never called. (Accepting it would have meant calling its callback, with
 * RJQ_ECANCELED, from inside the rjq_enqueue() that accepted it, when the
 * deferred free ran on the way out: rjq.h forbids that.) */
TEST(client_freed_in_a_callback_run_inside_rjq_enqueue_is_freed_after_it_returns) {
    test_env e;
    char name[32];
    rjq_queue *q;
    int rc;
    long n = start_failed_send(&e, EF_FREE_CLIENT, &q, name, sizeof name, &rc);
    e.c = NULL; /* freed by the callback, q with it */

    ASSERT_EQ(1, ef.failures_at_report);
    ASSERT_EQ(n + 1, ef.seen_at_report);
    ASSERT_EQ(1, ef.first.calls);
    ASSERT_EQ(RJQ_ENOMEM, ef.first.status);
    ASSERT_EQ(RJQ_ECLOSED, rc);
    ASSERT_EQ(0, ef.second.calls); /* not even from inside rjq_enqueue() */

    WAIT_FOR(e.base, loop_empty(e.base), 5000); /* nothing of the client may run any more */
    ASSERT_EQ(1, ef.first.calls);
    ASSERT_EQ(0, ef.second.calls);
    /* neither job reached Redis: no enqueue script ran on the queue */
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{%s}:stats", name));
    env_stop(&e);
}

/* ---- 2. a completion batch that cannot be sent ------------------------------ */

/* 64 completions fill the pending list's first capacity (job.c), so a
 * completion made from one of their callbacks has to grow it. */
#define CF_FAILED 64
#define CF_JOBS (CF_FAILED + 1)

static struct {
    rjq_job *jobs[CF_JOBS];
    char ids[CF_JOBS][32];
    long held;
    struct {
        int calls, status;
    } done[CF_JOBS];
    long answered;
    int first_seen, late_rc;
    long failures_at_first;
} cf;

static void cf_handler(rjq_job *job, void *data) {
    (void)data;
    ASSERT(cf.held < CF_JOBS);
    snprintf(cf.ids[cf.held], sizeof cf.ids[0], "%s", rjq_job_get_id(job));
    cf.jobs[cf.held++] = job;
}

static void cf_on_done(rjq_client *c, int status, void *data) {
    int i = (int)(intptr_t)data;
    (void)c;
    cf.done[i].calls++;
    cf.done[i].status = status;
    cf.answered++;
    if (status != RJQ_ENOMEM || cf.first_seen) return;
    cf.first_seen = 1;
    cf.failures_at_first = failalloc_failures();
    failalloc_disarm();
    cf.late_rc = rjq_job_complete(cf.jobs[CF_JOBS - 1], "late", 4, cf_on_done,
                                  (void *)(intptr_t)(CF_JOBS - 1));
}

/* Complete CF_FAILED held jobs (2 KiB results), then let their batch go
 * out with every allocation of min_size bytes or more failing. */
static void completion_batch_fails(size_t min_size) {
    test_env e;
    env_start(&e, "fin");
    memset(&cf, 0, sizeof cf);
    static rjq_enqueue_item items[CF_JOBS];
    for (int i = 0; i < CF_JOBS; i++) items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), "j", 1, NULL};
    ASSERT_OK(rjq_enqueue_batch(e.q, items, CF_JOBS, NULL, NULL));
    rjq_worker_options wo = quiet_worker_options(CF_JOBS);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, cf_handler, NULL, &w));
    ASSERT(loop_until_count(e.base, &cf.held, CF_JOBS, 10000));
    (void)get_stats(e.base, e.q); /* a round trip: what the claim made the worker send is in */

    static char result[2048];
    memset(result, 'r', sizeof result);
    for (int i = 0; i < CF_FAILED; i++)
        ASSERT_OK(rjq_job_complete(cf.jobs[i], result, sizeof result, cf_on_done,
                                   (void *)(intptr_t)i));
    ASSERT_EQ(0, cf.answered);
    failalloc_arm_min_size(min_size);
    int ok = loop_until_count(e.base, &cf.answered, CF_JOBS, 10000);
    failalloc_disarm();
    ASSERT(ok);
    (void)get_stats(e.base, e.q); /* a round trip: a second answer would have come */

    ASSERT_EQ(1, cf.first_seen);
    ASSERT_EQ(1, cf.failures_at_first);
    ASSERT_OK(cf.late_rc);
    for (int i = 0; i < CF_FAILED; i++) {
        ASSERT_EQ(1, cf.done[i].calls);
        ASSERT_EQ(RJQ_ENOMEM, cf.done[i].status);
    }
    ASSERT_EQ(1, cf.done[CF_JOBS - 1].calls);
    ASSERT_OK(cf.done[CF_JOBS - 1].status);

    info_wait late = get_info(e.base, e.q, cf.ids[CF_JOBS - 1]);
    ASSERT_OK(late.status);
    ASSERT_STREQ("completed", late.state);
    ASSERT_STREQ("late", late.result);
    info_wait failed = get_info(e.base, e.q, cf.ids[0]);
    ASSERT_OK(failed.status);
    ASSERT_STREQ("active", failed.state); /* its completion never went out */
    env_stop(&e);
}

/* A completion batch that cannot be sent reports its jobs' failure to
 * their callbacks. They were reported from the queue's live pending list,
 * shifted afterwards: a callback that completed another job appended to
 * that list, and when it had to grow, the report went on over the freed
 * one (use after free). The failed items now leave the list before they
 * are reported. Both failures: the batch's own allocation (~3.6 KiB for
 * 64 items), and building its script call (128 KiB of results). */
TEST(done_callback_that_completes_another_job_after_a_failed_completion_batch_is_kept) {
    completion_batch_fails(2048);
    completion_batch_fails(64u << 10);
}

/* ---- 3. awaits held until the reply channel is subscribed ----------------- */

#define AW_MAX 64

static struct {
    struct {
        int calls, status;
        rjq_await *h; /* valid until its callback ran */
    } r[AW_MAX];
    int n;
    long calls;
    int first; /* whose callback ran first, or -1 */
    long failures_at_first;
} aw;

static void aw_reset(void) {
    memset(&aw, 0, sizeof aw);
    aw.first = -1;
}

/* The first callback stops the injection and cancels every other await. */
static void aw_on_outcome(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    int i = (int)(intptr_t)data;
    (void)c, (void)o;
    aw.r[i].calls++;
    aw.r[i].status = status;
    aw.calls++;
    if (aw.first >= 0) return;
    aw.first = i;
    aw.failures_at_first = failalloc_failures();
    failalloc_disarm();
    for (int k = 0; k < aw.n; k++)
        if (aw.r[k].calls == 0) ASSERT_OK(rjq_await_cancel(aw.r[k].h));
}

/* Each await answered once: the first with RJQ_ENOMEM (the one failed
 * allocation), every other cancelled by it. */
static void aw_check(test_env *e) {
    ASSERT(loop_until_count(e->base, &aw.calls, aw.n, 10000));
    failalloc_disarm();
    /* a second answer would have come: every message published to the
     * client before and every reply to what it sent before is handled */
    subscriber_barrier(e->base, e->c, e->rc);
    (void)get_stats(e->base, e->q);
    ASSERT(aw.first >= 0);
    ASSERT_EQ(RJQ_ENOMEM, aw.r[aw.first].status);
    ASSERT_EQ(1, aw.failures_at_first);
    for (int i = 0; i < aw.n; i++) {
        ASSERT_EQ(1, aw.r[i].calls);
        if (i != aw.first) ASSERT_EQ(RJQ_ECANCELED, aw.r[i].status);
    }
}

#define HELD 4    /* rjq_enqueue_await */
#define WATCHED 3 /* rjq_queue_await */

/* Awaits made before the client's reply channel is subscribed wait for
 * its confirmation, which sends the held enqueues and watches the awaits
 * by id in one pass over them. A held enqueue that fails there (out of
 * memory: its 16 KiB payload cannot join the batch) ends its await, whose
 * callback may cancel any other: the pass walked the awaits by their next
 * pointers and went on into the freed ones. Every await is now pinned
 * for the pass. */
TEST(await_callback_cancelling_other_awaits_during_a_watch_pass_is_safe) {
    test_env e;
    env_start(&e, "held");
    aw_reset();
    static char payload[16 << 10];
    memset(payload, 'p', sizeof payload);
    char id[AW_MAX][32];
    for (int i = 0; i < HELD; i++) {
        snprintf(id[i], sizeof id[i], "held-%d", i);
        rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
        o.id = id[i];
        ASSERT_OK(rjq_enqueue_await(e.q, payload, sizeof payload, &o, NULL, aw_on_outcome,
                                    (void *)(intptr_t)i, &aw.r[i].h));
    }
    for (int i = HELD; i < HELD + WATCHED; i++) {
        snprintf(id[i], sizeof id[i], "other-%d", i);
        ASSERT_OK(rjq_queue_await(e.q, id[i], NULL, aw_on_outcome, (void *)(intptr_t)i,
                                  &aw.r[i].h));
    }
    aw.n = HELD + WATCHED;
    ASSERT_EQ(aw.n, rjq_client_count_awaits(e.c));

    /* the subscription is confirmed inside the loop */
    failalloc_arm_min_size(sizeof payload);
    aw_check(&e);
    ASSERT(aw.first < HELD); /* a held enqueue failed */
    ASSERT_EQ(0, rjq_client_count_awaits(e.c));

    /* The cancelled awaits' enqueues are sent all the same (rjq.h); the
     * one that failed is not. */
    for (int i = 0; i < HELD; i++) {
        info_wait w = get_info(e.base, e.q, id[i]);
        if (i == aw.first) {
            ASSERT_EQ(RJQ_ENOTFOUND, w.status);
        } else {
            ASSERT_OK(w.status);
            ASSERT_STREQ("ready", w.state);
            ASSERT_EQ(sizeof payload, w.payload_len);
        }
    }
    env_stop(&e);
}

#define LONG_IDS 48

/* The same pass watches the awaits by id, a script call per queue. When
 * that call cannot be made (out of memory: 48 ids of 200 bytes), every
 * await of it ends, one after the other; the first callback cancels the
 * others, which were freed under the loop that was still to end them.
 * The pass's pins now keep them until it is over. */
TEST(await_callback_cancelling_other_awaits_of_a_failed_watch_batch_is_safe) {
    test_env e;
    env_start(&e, "watched");
    aw_reset();
    char id[RJQ_JOB_ID_MAX + 1];
    for (int i = 0; i < LONG_IDS; i++) {
        memset(id, 'x', RJQ_JOB_ID_MAX);
        id[RJQ_JOB_ID_MAX] = '\0';
        int len = snprintf(id, sizeof id, "w%d-", i);
        id[len] = 'x'; /* snprintf's terminator */
        ASSERT_OK(rjq_queue_await(e.q, id, NULL, aw_on_outcome, (void *)(intptr_t)i, &aw.r[i].h));
    }
    aw.n = LONG_IDS;
    ASSERT_EQ(aw.n, rjq_client_count_awaits(e.c));

    /* The watch call's arguments take ~10 KiB; everything else in the
     * pass is far smaller. */
    failalloc_arm_min_size(8u << 10);
    aw_check(&e);
    ASSERT_EQ(0, rjq_client_count_awaits(e.c));
    env_stop(&e);
}
