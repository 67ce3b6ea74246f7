/*
 * Payloads ahead (enqueue.c, enqueue.lua, reserve.lua): a batch of
 * anonymous jobs with payloads of KiB goes as MULTI, an HSETNX of each
 * payload under a reserved job number, the enqueue script with the numbers
 * only, EXEC. These tests check that such jobs reach their handlers with
 * their own payloads in order, that a server which lost the reservation
 * (FLUSHALL) gets the batch the usual way without another job's payload
 * touched, and that a batch the script refuses leaves no payload behind.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

enum { BIG = 2048, JOBS = 50 };

/* The payload of job number i: "<i>:" then filler that depends on i. */
static size_t make_payload(long i, char *buf) {
    int n = snprintf(buf, BIG, "%ld:", i);
    for (size_t k = (size_t)n; k < BIG; k++) buf[k] = (char)('a' + (k * 5 + (size_t)i) % 26);
    return BIG;
}

typedef struct batch_wait {
    int done, status;
    size_t n;
    char ids[JOBS][24];
} batch_wait;

static void on_batch(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    batch_wait *w = data;
    (void)c;
    ASSERT_EQ(0, w->done);
    w->done = 1;
    w->status = status;
    w->n = n;
    for (size_t i = 0; i < n && i < JOBS; i++)
        snprintf(w->ids[i], sizeof w->ids[i], "%s", rjq_enqueued_get(jobs, i)->id);
}

/* Enqueue jobs first..first+n-1 (payloads by make_payload) as one batch
 * and run the loop until it is answered. */
static batch_wait enqueue_batch(test_env *e, rjq_queue *q, long first, size_t n) {
    static char bufs[JOBS][BIG];
    rjq_enqueue_item items[JOBS];
    ASSERT(n <= JOBS);
    for (size_t i = 0; i < n; i++) {
        size_t len = make_payload(first + (long)i, bufs[i]);
        items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), bufs[i], len, NULL};
    }
    batch_wait w = {0};
    ASSERT_OK(rjq_enqueue_batch(q, items, n, on_batch, &w));
    ASSERT(loop_until(e->base, &w.done, 10000));
    return w;
}

/* Run the loop until the pool of numbers of handle q (queue `queue`) is
 * recorded (the first eligible batch asked for it) and its reply read: a
 * round trip on q's connection after it (replies come in order). */
static void wait_reserved(test_env *e, rjq_queue *q, const char *queue) {
    WAIT_FOR(e->base, server_int(e->rc, "ZCARD t:{%s}:reserved", queue) > 0, 5000);
    ASSERT_EQ(1, server_int(e->rc, "ZCARD t:{%s}:reserved", queue));
    (void)get_stats(e->base, q);
}

/* env_start on queue, then a first batch (jobs 0..49, the usual way) and
 * its reservation: the handle's next batches go ahead. */
static void start_with_pool(test_env *e, const char *queue) {
    env_start(e, queue);
    ASSERT_OK(enqueue_batch(e, e->q, 0, JOBS).status);
    wait_reserved(e, e->q, queue);
}

/* The server loses everything (the pool's reservation too); its command
 * counts start again. */
static void flush_server(test_env *e) {
    freeReplyObject(server_cmd(e->rc, "FLUSHALL"));
    freeReplyObject(server_cmd(e->rc, "CONFIG RESETSTAT"));
}

typedef struct run_ctx {
    long total, next, completed, bad;
} run_ctx;

/* Jobs come in FIFO order, each with its own payload ("<i>:..."). */
static void check_handler(rjq_job *job, void *data) {
    run_ctx *x = data;
    static char want[BIG];
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    long i = atol(p);
    if (i != x->next || len != make_payload(i, want) || memcmp(p, want, len) != 0) x->bad++;
    x->next = i + 1;
    ASSERT_OK(rjq_job_complete(job, "ok", 2, on_done_ok, &x->completed));
}

/* The payload field of job id holds the payload of job number i. */
static void assert_payload_of(test_env *e, const char *queue, const char *id, long i) {
    char want[BIG];
    size_t len = make_payload(i, want);
    redisReply *r = server_cmd(e->rc, "HGET t:{%s}:payload %s", queue, id);
    ASSERT_EQ(REDIS_REPLY_STRING, r->type);
    ASSERT_EQ((long long)len, (long long)r->len);
    ASSERT(memcmp(r->str, want, len) == 0);
    freeReplyObject(r);
}

/* The queue counts n jobs enqueued, and all n wait ready (none lost, none twice). */
static void assert_enqueued_and_ready(test_env *e, long long n) {
    rjq_stats s = get_stats(e->base, e->q);
    ASSERT_EQ(n, s.enqueued);
    ASSERT_EQ(n, s.ready);
}

/* Every job of batch w (payloads made from first, first + 1, ...) has its own. */
static void assert_batch_payloads(test_env *e, const char *queue, const batch_wait *w, long first) {
    for (size_t i = 0; i < JOBS; i++) assert_payload_of(e, queue, w->ids[i], first + (long)i);
}

/* Batches after the first go ahead (HSETNX, no payload through Lua); every
 * job runs once, in order, with its own payload; enqueued counts jobs, not
 * the numbers reserved. */
TEST(payloads_ahead_reach_their_jobs_once_in_order) {
    test_env e;
    env_start(&e, "ah");
    enum { BATCHES = 6 };
    batch_wait first = enqueue_batch(&e, e.q, 0, JOBS);
    ASSERT_OK(first.status);
    wait_reserved(&e, e.q, "ah");
    ASSERT_EQ(0, server_calls(e.rc, "hsetnx"));
    for (int b = 1; b < BATCHES; b++) {
        batch_wait w = enqueue_batch(&e, e.q, (long)b * JOBS, JOBS);
        ASSERT_OK(w.status);
        ASSERT_EQ(JOBS, (long long)w.n);
        assert_batch_payloads(&e, "ah", &w, b * JOBS);
    }
    ASSERT_EQ((BATCHES - 1) * JOBS, server_calls(e.rc, "hsetnx"));
    assert_enqueued_and_ready(&e, BATCHES * JOBS);
    ASSERT_EQ(BATCHES * JOBS, server_int(e.rc, "HLEN t:{ah}:payload"));

    run_ctx x = {.total = BATCHES * JOBS};
    rjq_worker_options wo = quiet_worker_options(8);
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(e.q, &wo, check_handler, &x, &w));
    ASSERT(loop_until_count(e.base, &x.completed, x.total, 20000));
    ASSERT_EQ(0, x.bad);
    ASSERT_EQ(x.total, x.next);
    rjq_stats s = get_stats(e.base, e.q);
    ASSERT_EQ(x.total, s.completed);
    ASSERT_EQ(0, s.ready + s.active);
    env_stop(&e);
}

/* A worker waiting idle gets jobs whose payloads went ahead (they pass
 * through ready, and the enqueue pushes them with their payloads read
 * back). */
TEST(payloads_ahead_reach_an_idle_worker) {
    test_env e;
    env_start(&e, "ahi");
    run_ctx x = {.total = 3 * JOBS};
    rjq_worker_options wo = quiet_worker_options(JOBS);
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(e.q, &wo, check_handler, &x, &w));
    wait_worker_started(e.base, e.c, e.q, e.rc, "ahi"); /* registered idle */
    ASSERT_OK(enqueue_batch(&e, e.q, 0, JOBS).status);
    wait_reserved(&e, e.q, "ahi");
    ASSERT(loop_until_count(e.base, &x.completed, JOBS, 10000));
    ASSERT_OK(enqueue_batch(&e, e.q, JOBS, JOBS).status);
    ASSERT(loop_until_count(e.base, &x.completed, 2 * JOBS, 10000));
    ASSERT_OK(enqueue_batch(&e, e.q, 2 * JOBS, JOBS).status);
    ASSERT(loop_until_count(e.base, &x.completed, x.total, 10000));
    ASSERT_EQ(2 * JOBS, server_calls(e.rc, "hsetnx"));
    ASSERT_EQ(0, x.bad);
    ASSERT_EQ(x.total, x.next);
    env_stop(&e);
}

/* FLUSHALL after the pool was filled, then another producer takes 600 job
 * numbers, past those of the pool (its own batches after the first go
 * ahead, with a pool of the same numbers): the batch that goes ahead finds its
 * reservation gone (RJQSTALE), HSETNX wrote none of those numbers' payloads
 * (they were the other jobs'), and the batch lands the usual way under new
 * numbers. Nothing of the other producer's jobs changed. */
TEST(payloads_ahead_after_a_flush_leave_other_jobs_payloads_alone) {
    test_env e;
    start_with_pool(&e, "ahf");
    flush_server(&e);
    rjq_client *c2 = client_for(e.base, &e.s);
    rjq_queue *q2 = queue_for(c2, "ahf");
    enum { OTHERS = 600 };
    static batch_wait others[OTHERS / JOBS];
    long long top = 0; /* the highest number c2's jobs have */
    for (long k = 0; k < OTHERS / JOBS; k++) {
        others[k] = enqueue_batch(&e, q2, 1000 + k * JOBS, JOBS);
        ASSERT_OK(others[k].status);
        for (size_t i = 0; i < JOBS; i++)
            if (atoll(others[k].ids[i]) > top) top = atoll(others[k].ids[i]);
    }
    ASSERT(top >= 100); /* past the numbers of e.c's old pool (51..) */
    long long before = server_calls(e.rc, "hsetnx"); /* (c2's own, after its first) */

    batch_wait w = enqueue_batch(&e, e.q, 5000, JOBS);
    ASSERT_OK(w.status);
    ASSERT_EQ(before + JOBS, server_calls(e.rc, "hsetnx")); /* it went ahead first */
    for (size_t i = 0; i < JOBS; i++) {
        ASSERT(atoll(w.ids[i]) > top);
        assert_payload_of(&e, "ahf", w.ids[i], 5000 + (long)i);
    }
    for (long k = 0; k < OTHERS / JOBS; k++)
        for (size_t i = 0; i < JOBS; i++)
            assert_payload_of(&e, "ahf", others[k].ids[i], 1000 + k * JOBS + (long)i);
    ASSERT_EQ(OTHERS + JOBS, server_int(e.rc, "HLEN t:{ahf}:payload"));
    assert_enqueued_and_ready(&e, OTHERS + JOBS);
    rjq_client_free(c2);
    env_stop(&e);
}

/* FLUSHALL after the pool was filled, nothing else: the numbers of the
 * batch that goes ahead are above the server's (new) count, so the
 * payloads HSETNX wrote are its own, and the refusal deletes them before
 * the batch lands the usual way as jobs 1..50. */
TEST(payloads_ahead_after_a_flush_are_deleted_before_the_batch_goes_again) {
    test_env e;
    start_with_pool(&e, "ahd");
    flush_server(&e);
    batch_wait w = enqueue_batch(&e, e.q, 100, JOBS);
    ASSERT_OK(w.status);
    ASSERT_EQ(JOBS, server_calls(e.rc, "hsetnx"));
    char id[24];
    for (size_t i = 0; i < JOBS; i++) {
        snprintf(id, sizeof id, "%zu", i + 1);
        ASSERT_STREQ(id, w.ids[i]);
        assert_payload_of(&e, "ahd", id, 100 + (long)i);
    }
    ASSERT_EQ(JOBS, server_int(e.rc, "HLEN t:{ahd}:payload"));
    ASSERT_EQ(JOBS, get_stats(e.base, e.q).enqueued);
    env_stop(&e);
}

/* A batch going ahead that the script refuses (a wrongly typed key; a
 * bounded queue that is full) leaves no payload behind and counts nothing;
 * the next one lands. */
TEST(refused_payloads_ahead_leave_nothing_behind) {
    test_env e;
    rjq_queue_options o = {.size = sizeof(rjq_queue_options), .max_waiting = JOBS + 10};
    env_start_queue(&e, "ahr", &o);
    ASSERT_OK(enqueue_batch(&e, e.q, 0, JOBS).status);
    wait_reserved(&e, e.q, "ahr");

    freeReplyObject(server_cmd(e.rc, "SET t:{ahr}:prio x"));
    ASSERT_EQ(RJQ_EWRONGTYPE, enqueue_batch(&e, e.q, 100, 5).status);
    ASSERT_EQ(5, server_calls(e.rc, "hsetnx")); /* it went ahead */
    ASSERT_EQ(JOBS, server_int(e.rc, "HLEN t:{ahr}:payload"));
    freeReplyObject(server_cmd(e.rc, "DEL t:{ahr}:prio"));

    ASSERT_EQ(RJQ_EFULL, enqueue_batch(&e, e.q, 200, 20).status);
    ASSERT_EQ(25, server_calls(e.rc, "hsetnx"));
    ASSERT_EQ(JOBS, server_int(e.rc, "HLEN t:{ahr}:payload"));
    ASSERT_EQ(JOBS, get_stats(e.base, e.q).enqueued);

    batch_wait w = enqueue_batch(&e, e.q, 300, 5);
    ASSERT_OK(w.status);
    ASSERT_EQ(30, server_calls(e.rc, "hsetnx"));
    for (size_t i = 0; i < 5; i++) assert_payload_of(&e, "ahr", w.ids[i], 300 + (long)i);
    ASSERT_EQ(JOBS + 5, server_int(e.rc, "HLEN t:{ahr}:payload"));
    assert_enqueued_and_ready(&e, JOBS + 5);
    env_stop(&e);
}

/* A new handle has no job numbers: its first jobs, however big, go the
 * usual way and are jobs 1 and 2 (an empty pool once passed for one
 * number, 0, and the job was taken for an existing one and never made). */
TEST(a_first_small_batch_of_big_jobs_on_a_new_handle_is_made) {
    test_env e;
    env_start(&e, "ah1");
    batch_wait w = enqueue_batch(&e, e.q, 7, 2);
    ASSERT_OK(w.status);
    ASSERT_STREQ("1", w.ids[0]);
    ASSERT_STREQ("2", w.ids[1]);
    assert_payload_of(&e, "ah1", "1", 7);
    assert_payload_of(&e, "ah1", "2", 8);
    ASSERT_EQ(2, get_stats(e.base, e.q).ready);
    wait_reserved(&e, e.q, "ah1");
    w = enqueue_batch(&e, e.q, 9, 2); /* ahead now */
    ASSERT_OK(w.status);
    ASSERT_EQ(2, server_calls(e.rc, "hsetnx"));
    assert_payload_of(&e, "ah1", w.ids[0], 9);
    assert_payload_of(&e, "ah1", w.ids[1], 10);
    ASSERT_EQ(4, get_stats(e.base, e.q).ready);
    env_stop(&e);
}

/* A single big job (an awaited one, mostly) goes in one script call, even
 * with numbers in the pool: ahead, it would take a MULTI, two script calls,
 * an HSETNX and an EXEC (+26% Redis instructions per awaited job of 1 KiB,
 * callgrind: bench/README.md "Redis work per job"). */
TEST(a_single_big_job_goes_in_one_script_call) {
    test_env e;
    start_with_pool(&e, "ah1s");
    freeReplyObject(server_cmd(e.rc, "CONFIG RESETSTAT"));
    batch_wait w = enqueue_batch(&e, e.q, 60, 1);
    ASSERT_OK(w.status);
    ASSERT_EQ(0, server_calls(e.rc, "hsetnx"));
    ASSERT_EQ(0, server_calls(e.rc, "multi"));
    ASSERT_EQ(1, server_calls(e.rc, "fcall") + server_calls(e.rc, "evalsha"));
    assert_payload_of(&e, "ah1s", w.ids[0], 60);
    assert_enqueued_and_ready(&e, JOBS + 1);
    env_stop(&e);
}

/* A user whose ACL has no HSETNX (a role written before payloads went
 * ahead): the batch that tried is sent again the usual way and lands, and
 * the handle goes the usual way from then on. */
TEST(payloads_ahead_refused_by_the_acl_go_the_usual_way) {
    test_env e;
    env_start(&e, "aha");
    redisReply *r = server_cmd(e.rc, "ACL SETUSER older on >pw ~* &* +@all -hsetnx");
    ASSERT_EQ(REDIS_REPLY_STATUS, r->type);
    freeReplyObject(r);
    char url[128];
    snprintf(url, sizeof url, "redis://older:pw@127.0.0.1:%d", e.s.port);
    rjq_client_options o = client_options(url);
    rjq_client *c2 = client_new(e.base, &o);
    wait_connected(e.base, c2);
    rjq_queue *q2 = queue_for(c2, "aha");
    ASSERT_OK(enqueue_batch(&e, q2, 0, JOBS).status);
    wait_reserved(&e, q2, "aha");
    for (int b = 1; b < 4; b++) {
        batch_wait w = enqueue_batch(&e, q2, (long)b * JOBS, JOBS);
        ASSERT_OK(w.status);
        assert_batch_payloads(&e, "aha", &w, b * JOBS);
    }
    ASSERT_EQ(0, server_calls(e.rc, "hsetnx"));
    /* it was tried once, refused while queued (EXECABORT: nothing ran) */
    r = server_cmd(e.rc, "ACL LOG");
    ASSERT_EQ(1, (long long)r->elements);
    int named = 0;
    for (size_t i = 0; i + 1 < r->element[0]->elements; i += 2)
        if (strcmp(r->element[0]->element[i]->str, "object") == 0)
            named = strcmp(r->element[0]->element[i + 1]->str, "hsetnx") == 0;
    ASSERT(named);
    freeReplyObject(r);
    assert_enqueued_and_ready(&e, 4 * JOBS);
    ASSERT_EQ(4 * JOBS, server_int(e.rc, "HLEN t:{aha}:payload"));
    rjq_client_free(c2);
    env_stop(&e);
}

/* FLUSHALL while producer A holds numbers; then B takes 1..50 and reserves
 * the numbers A still holds (same numbers, another nonce). A's batch finds
 * its record gone: its HSETNX wrote into numbers B has not used yet, and
 * the check (the first call of the transaction) had noted that they had no
 * payload, so those are deleted again; B's batch then writes its own
 * payloads there (before, A's stayed and B's jobs ran with them). */
TEST(a_stale_batch_leaves_no_payload_in_numbers_another_producer_reserved) {
    test_env e;
    start_with_pool(&e, "ahs");
    flush_server(&e);
    rjq_client *c2 = client_for(e.base, &e.s);
    rjq_queue *q2 = queue_for(c2, "ahs");
    ASSERT_OK(enqueue_batch(&e, q2, 1000, JOBS).status); /* 1..50, then 51..1074 again */
    wait_reserved(&e, q2, "ahs");
    batch_wait a = enqueue_batch(&e, e.q, 5000, JOBS); /* stale 51..100, then the usual way */
    ASSERT_OK(a.status);
    batch_wait b = enqueue_batch(&e, q2, 2000, JOBS); /* ahead, 51..100 */
    ASSERT_OK(b.status);
    ASSERT_STREQ("51", b.ids[0]);
    for (size_t i = 0; i < JOBS; i++) {
        assert_payload_of(&e, "ahs", a.ids[i], 5000 + (long)i);
        assert_payload_of(&e, "ahs", b.ids[i], 2000 + (long)i);
    }
    ASSERT_EQ(3 * JOBS, server_int(e.rc, "HLEN t:{ahs}:payload"));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{ahs}:stats ahead")); /* the note is gone */
    assert_enqueued_and_ready(&e, 3 * JOBS);
    rjq_client_free(c2);
    env_stop(&e);
}

/* A stale batch too big for one call goes again the usual way as several
 * calls in one transaction (that resend once had no entries to split). */
TEST(a_stale_batch_of_several_calls_goes_again_the_usual_way) {
    test_env e;
    start_with_pool(&e, "ahb");
    flush_server(&e);
    enum { N = 600 }; /* 1.2 MiB */
    static char bufs[N][BIG];
    static rjq_enqueue_item items[N];
    for (int i = 0; i < N; i++) items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), bufs[i], make_payload(i, bufs[i]), NULL};
    batch_wait w = {0};
    long long execs = server_calls(e.rc, "exec");
    ASSERT_OK(rjq_enqueue_batch(e.q, items, N, on_batch, &w));
    ASSERT(loop_until(e.base, &w.done, 10000));
    ASSERT_OK(w.status);
    ASSERT_EQ(2, server_calls(e.rc, "exec") - execs); /* ahead, then the usual way */
    ASSERT_EQ(N, server_int(e.rc, "HLEN t:{ahb}:payload"));
    ASSERT_EQ(N, server_int(e.rc, "LLEN t:{ahb}:ready"));
    /* (numbers past those the pool asked for meanwhile) */
    char last[24];
    snprintf(last, sizeof last, "%lld", atoll(w.ids[0]) + N - 1);
    assert_payload_of(&e, "ahb", w.ids[0], 0);
    assert_payload_of(&e, "ahb", last, N - 1);
    env_stop(&e);
}

/* A producer that goes on and on keeps one or two reservations recorded:
 * a range is dropped when a batch uses its last number, or, left with
 * numbers when the next range takes over, by the next batch. */
TEST(reservations_used_up_leave_no_record_behind) {
    test_env e;
    env_start(&e, "ahu");
    for (int b = 0; b < 80; b++) ASSERT_OK(enqueue_batch(&e, e.q, (long)b * JOBS, JOBS).status);
    (void)get_stats(e.base, e.q); /* a round trip: a reservation asked for meanwhile is in */
    ASSERT(server_int(e.rc, "ZCARD t:{ahu}:reserved") <= 2);
    ASSERT(server_calls(e.rc, "hsetnx") >= 70 * JOBS);
    assert_enqueued_and_ready(&e, 80 * JOBS);
    env_stop(&e);
}

/* FUNCTION FLUSH before a batch goes ahead: its calls fail inside the
 * EXEC (the HSETNX ran), the library is loaded again and the whole
 * transaction sent again; the batch lands once, no payload left over. */
TEST(payloads_ahead_survive_a_function_flush) {
    test_env e;
    start_with_pool(&e, "ahl");
    freeReplyObject(server_cmd(e.rc, "FUNCTION FLUSH"));
    batch_wait w = enqueue_batch(&e, e.q, 100, JOBS);
    ASSERT_OK(w.status);
    ASSERT_EQ(2 * JOBS, server_calls(e.rc, "hsetnx")); /* sent twice */
    assert_batch_payloads(&e, "ahl", &w, 100);
    ASSERT_EQ(2 * JOBS, server_int(e.rc, "HLEN t:{ahl}:payload"));
    ASSERT_EQ(2 * JOBS, get_stats(e.base, e.q).enqueued);
    env_stop(&e);
}

/* FLUSHALL and FUNCTION FLUSH at once (a server restored from an old
 * backup has both: no reservation, no library): the batch's HSETNX ran in
 * a transaction whose scripts did not, so its payloads stayed in numbers
 * above the server's count; the try after the library was loaded found
 * them as if another job's and left them. The next range reserved covers
 * those numbers: its batches' checks clear them before their HSETNX, so
 * every job gets its own payload (they got the stray ones). */
TEST(payloads_left_by_a_stale_batch_without_library_reach_no_job) {
    test_env e;
    start_with_pool(&e, "ahx");
    for (int b = 1; b < 4; b++) ASSERT_OK(enqueue_batch(&e, e.q, b * 1000, JOBS).status);
    flush_server(&e);
    freeReplyObject(server_cmd(e.rc, "FUNCTION FLUSH"));
    batch_wait stale = enqueue_batch(&e, e.q, 5000, JOBS);
    ASSERT_OK(stale.status);
    assert_batch_payloads(&e, "ahx", &stale, 5000);
    batch_wait w[4];
    for (int b = 0; b < 4; b++) {
        w[b] = enqueue_batch(&e, e.q, 6000 + b * 1000, JOBS);
        ASSERT_OK(w[b].status);
        if (b == 0) wait_reserved(&e, e.q, "ahx");
    }
    ASSERT(server_calls(e.rc, "hsetnx") > 4 * JOBS); /* the later ones went ahead */
    for (int b = 0; b < 4; b++)
        assert_batch_payloads(&e, "ahx", &w[b], 6000 + b * 1000);
    assert_enqueued_and_ready(&e, 5 * JOBS);
    env_stop(&e);
}

/* A user whose FCALL is refused after its first batches (FCALL -> EVALSHA):
 * the transaction of a batch going ahead is built again with EVALSHA heads
 * (its HSETNX block after the check's call), NOSCRIPT loads the script, and
 * the batches land with their own payloads. */
TEST(payloads_ahead_rebuilt_for_evalsha_land) {
    test_env e;
    env_start(&e, "ahe");
    freeReplyObject(server_cmd(e.rc, "ACL SETUSER u on >pw ~* &* +@all"));
    char url[128];
    snprintf(url, sizeof url, "redis://u:pw@127.0.0.1:%d", e.s.port);
    rjq_client_options o = client_options(url);
    rjq_client *c2 = client_new(e.base, &o);
    wait_connected(e.base, c2);
    rjq_queue *q2 = queue_for(c2, "ahe");
    ASSERT_OK(enqueue_batch(&e, q2, 0, JOBS).status);
    wait_reserved(&e, q2, "ahe");
    freeReplyObject(server_cmd(e.rc, "ACL SETUSER u -fcall"));
    freeReplyObject(server_cmd(e.rc, "CONFIG RESETSTAT"));
    for (int b = 1; b < 4; b++) {
        batch_wait w = enqueue_batch(&e, q2, (long)b * 1000, JOBS);
        ASSERT_OK(w.status);
        assert_batch_payloads(&e, "ahe", &w, b * 1000);
    }
    ASSERT(server_calls(e.rc, "evalsha") >= 6); /* check and enqueue, three batches */
    ASSERT(server_calls(e.rc, "hsetnx") >= 3 * JOBS);
    ASSERT_EQ(4 * JOBS, server_int(e.rc, "HLEN t:{ahe}:payload"));
    ASSERT_EQ(4 * JOBS, get_stats(e.base, e.q).enqueued);
    rjq_client_free(c2);
    env_stop(&e);
}
