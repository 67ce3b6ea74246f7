/*
 * Bounded queues (max_waiting): an enqueue that would make more jobs wait
 * than the bound is refused with RJQ_EFULL, a batch as a whole, nothing
 * written (no job, no counter); ids that exist do not count; delayed and
 * prioritised jobs do; room made by workers is taken again; the bound
 * costs nothing when unset (no extra read: the default path is unchanged).
 * The enqueues of one loop turn share a script call, yet each is admitted
 * or refused on its own, in order: exactly the bound is taken.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

static int last_status;
static size_t last_n;
static long answers;

static void on_enqueued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs, (void)data;
    last_status = status;
    last_n = n;
    answers++;
}

static int enqueue_one(test_env *e, const char *id, long long delay, int priority) {
    enqueue_wait w = enqueue_x(e->base, e->q, id, delay, priority);
    last_n = w.n;
    return w.status;
}

/* The jobs the queue took: seq less the numbers not given to a job (the
 * numbers a producer reserved for its payloads ahead count as skipped
 * until used; enqueue.c). */
static long long seq_of(test_env *e) {
    return server_int(e->rc, "HGET t:{b}:stats seq") - server_int(e->rc, "HGET t:{b}:stats skipped");
}

TEST(bounded_queue_refuses_what_would_pass_the_bound) {
    test_env e;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.max_waiting = 5;
    env_start_queue(&e, "b", &qo);
    ASSERT_EQ(RJQ_OK, enqueue_one(&e, "a", 0, 0));
    ASSERT_EQ(RJQ_OK, enqueue_one(&e, "b", 60000, 0)); /* delayed counts */
    ASSERT_EQ(RJQ_OK, enqueue_one(&e, "c", 0, 7));     /* prioritised counts */
    ASSERT_EQ(RJQ_OK, enqueue_one(&e, NULL, 0, 0));
    ASSERT_EQ(RJQ_OK, enqueue_one(&e, NULL, 0, 0));
    long long seq = seq_of(&e);
    ASSERT_EQ(RJQ_EFULL, enqueue_one(&e, NULL, 0, 0));
    ASSERT_EQ(0, last_n);
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "max_waiting 5") != NULL);
    ASSERT_EQ(RJQ_EFULL, enqueue_one(&e, "d", 5000, 0));
    ASSERT_EQ(seq, seq_of(&e)); /* nothing written */
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{b}:payload d"));
    /* an id that exists is no new job: reported as it is */
    ASSERT_EQ(RJQ_OK, enqueue_one(&e, "a", 0, 0));

    /* a batch that would pass the bound is refused whole */
    rjq_client_free(e.c);
    e.c = client_for(e.base, &e.s);
    wait_connected(e.base, e.c);
    qo.max_waiting = 8;
    ASSERT_OK(rjq_queue_open(e.c, "b", &qo, &e.q));
    rjq_enqueue_item items[4];
    memset(items, 0, sizeof items);
    for (int i = 0; i < 4; i++) {
        items[i].size = sizeof items[i];
        items[i].payload = "y";
        items[i].len = 1;
    }
    seq = seq_of(&e);
    long target = answers + 1;
    ASSERT_OK(rjq_enqueue_batch(e.q, items, 4, on_enqueued, NULL));
    ASSERT(loop_until_count(e.base, &answers, target, 5000));
    ASSERT_EQ(RJQ_EFULL, last_status);
    ASSERT_EQ(seq, seq_of(&e));
    ASSERT_EQ(3, server_int(e.rc, "LLEN t:{b}:ready")); /* a and the two numbered */
    target = answers + 1;
    ASSERT_OK(rjq_enqueue_batch(e.q, items, 3, on_enqueued, NULL)); /* fits exactly */
    ASSERT(loop_until_count(e.base, &answers, target, 5000));
    ASSERT_EQ(RJQ_OK, last_status);
    ASSERT_EQ(3, last_n);
    ASSERT_EQ(RJQ_EFULL, enqueue_one(&e, NULL, 0, 0));
    env_stop(&e);
}

/* A batch too big for one call goes as several in one transaction
 * (enqueue.c, flush_parts): the bound still takes or refuses it whole. */
TEST(bounded_queue_takes_or_refuses_a_batch_of_several_calls_whole) {
    test_env e;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.max_waiting = 6;
    env_start_queue(&e, "b", &qo);
    ASSERT_EQ(RJQ_OK, enqueue_one(&e, NULL, 0, 0));
    ASSERT_EQ(RJQ_OK, enqueue_one(&e, NULL, 0, 0));
    enum { SIZE = 400 << 10 }; /* two a call: 6 jobs are 3 calls */
    char *big = malloc(SIZE);
    ASSERT(big != NULL);
    memset(big, 'z', SIZE);
    rjq_enqueue_item items[6];
    for (int i = 0; i < 6; i++) items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), big, SIZE, NULL};
    long long seq = seq_of(&e), execs = server_calls(e.rc, "exec");
    long target = answers + 1;
    ASSERT_OK(rjq_enqueue_batch(e.q, items, 6, on_enqueued, NULL)); /* 2 + 6 > 6 */
    ASSERT(loop_until_count(e.base, &answers, target, 5000));
    ASSERT_EQ(RJQ_EFULL, last_status);
    ASSERT_EQ(1, server_calls(e.rc, "exec") - execs);
    ASSERT_EQ(seq, seq_of(&e)); /* nothing written by any call */
    ASSERT_EQ(2, server_int(e.rc, "HLEN t:{b}:payload"));
    redisReply *r = server_cmd(e.rc, "HKEYS t:{b}:stats");
    for (size_t i = 0; i < r->elements; i++) /* the refusal's mark is gone */
        ASSERT(strncmp(r->element[i]->str, "refused", 7) != 0);
    freeReplyObject(r);
    target = answers + 1;
    ASSERT_OK(rjq_enqueue_batch(e.q, items, 4, on_enqueued, NULL)); /* fits exactly */
    ASSERT(loop_until_count(e.base, &answers, target, 5000));
    ASSERT_EQ(RJQ_OK, last_status);
    ASSERT_EQ(4, last_n);
    ASSERT_EQ(6, server_int(e.rc, "LLEN t:{b}:ready"));
    ASSERT_EQ(seq + 4, seq_of(&e));
    ASSERT_EQ(RJQ_EFULL, enqueue_one(&e, NULL, 0, 0));

    /* jobs with ids that exist are no new jobs, in whichever call they
     * come: a batch sent again (a lost reply) fits, as one call would */
    rjq_queue_options qo2 = RJQ_QUEUE_OPTIONS_INIT;
    qo2.max_waiting = 8;
    rjq_queue *q8 = NULL;
    ASSERT_OK(rjq_queue_open(e.c, "b8", &qo2, &q8));
    static char ids[6][8];
    rjq_job_options jo[6];
    for (int i = 0; i < 6; i++) {
        snprintf(ids[i], sizeof ids[i], "k%d", i);
        jo[i] = (rjq_job_options){.size = sizeof(rjq_job_options), .id = ids[i]};
        items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), big, SIZE, &jo[i]};
    }
    for (int round = 0; round < 2; round++) {
        target = answers + 1;
        ASSERT_OK(rjq_enqueue_batch(q8, items, 6, on_enqueued, NULL));
        ASSERT(loop_until_count(e.base, &answers, target, 5000));
        ASSERT_EQ(RJQ_OK, last_status);
        ASSERT_EQ(6, last_n);
    }
    ASSERT_EQ(6, server_int(e.rc, "LLEN t:{b8}:ready"));
    free(big);
    env_stop(&e);
}

/* The answers of a burst of enqueues: each its own status. */
enum { BURST = 400 };
typedef struct burst {
    int status[BURST];
    int answered[BURST];
    char errmsg[BURST][128];
    long answers;
} burst;

typedef struct burst_slot {
    burst *b;
    int i;
} burst_slot;

static void on_burst(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    burst_slot *s = data;
    (void)jobs;
    ASSERT_EQ(status == RJQ_OK ? 1 : 0, (long long)n);
    s->b->answered[s->i]++;
    s->b->status[s->i] = status;
    snprintf(s->b->errmsg[s->i], sizeof s->b->errmsg[s->i], "%s",
             status == RJQ_OK ? "" : rjq_client_get_errmsg(c));
    s->b->answers++;
}

static burst_slot slots[BURST];

static void on_burst_batch(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n,
                           void *data) {
    burst_slot *s = data;
    (void)c, (void)jobs, (void)n;
    s->b->answered[s->i]++;
    s->b->status[s->i] = status;
    s->b->answers++;
}

/* Enqueue n jobs one rjq_enqueue() each, in one loop turn (the burst's
 * slots first..first+n-1), payload of len bytes. */
static void burst_on(rjq_queue *q, burst *b, int first, int n, const char *payload, size_t len) {
    for (int i = first; i < first + n; i++) {
        slots[i] = (burst_slot){b, i};
        ASSERT_OK(rjq_enqueue(q, payload, len, NULL, on_burst, &slots[i]));
    }
}

static long count_status(const burst *b, int from, int to, int status) {
    long k = 0;
    for (int i = from; i < to; i++) k += b->status[i] == status;
    return k;
}

/* One process, 150 single enqueues in one loop turn, a bound of 100: they
 * share one script call, and yet the first 100 are taken and the other 50
 * refused each with the bound's error (the call was refused whole: none
 * taken). */
TEST(bounded_queue_admits_each_enqueue_of_a_loop_turn_on_its_own) {
    test_env e;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.max_waiting = 100;
    env_start_queue(&e, "b", &qo);
    static burst b;
    memset(&b, 0, sizeof b);
    long long evals = server_calls(e.rc, "evalsha") + server_calls(e.rc, "fcall");
    burst_on(e.q, &b, 0, 150, "x", 1);
    ASSERT(loop_until_count(e.base, &b.answers, 150, 10000));
    ASSERT_EQ(1, server_calls(e.rc, "evalsha") + server_calls(e.rc, "fcall") - evals);
    for (int i = 0; i < 150; i++) {
        ASSERT_EQ(1, b.answered[i]);
        ASSERT_EQ(i < 100 ? RJQ_OK : RJQ_EFULL, b.status[i]); /* in order */
        if (i >= 100) ASSERT(strstr(b.errmsg[i], "max_waiting 100") != NULL);
    }
    ASSERT_EQ(100, server_int(e.rc, "LLEN t:{b}:ready"));
    ASSERT_EQ(100, seq_of(&e)); /* refused jobs took no number */
    ASSERT_EQ(100, server_int(e.rc, "HLEN t:{b}:payload"));
    ASSERT_EQ(RJQ_EFULL, enqueue_one(&e, NULL, 0, 0));

    /* an explicit batch among them is still taken or refused whole; a
     * single after a refused batch may still fit */
    rjq_queue_options q10 = RJQ_QUEUE_OPTIONS_INIT;
    q10.max_waiting = 10;
    rjq_queue *q = NULL;
    ASSERT_OK(rjq_queue_open(e.c, "b10", &q10, &q));
    rjq_enqueue_item items[6];
    for (int i = 0; i < 6; i++) items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), "y", 1, NULL};
    memset(&b, 0, sizeof b);
    burst_on(q, &b, 0, 5, "x", 1);                                   /* 5 */
    slots[5] = (burst_slot){&b, 5};
    ASSERT_OK(rjq_enqueue_batch(q, items, 6, on_burst_batch, &slots[5])); /* 11: refused */
    burst_on(q, &b, 6, 1, "x", 1);                                   /* 6 */
    slots[7] = (burst_slot){&b, 7};
    ASSERT_OK(rjq_enqueue_batch(q, items, 4, on_burst_batch, &slots[7])); /* 10 */
    burst_on(q, &b, 8, 1, "x", 1);                                   /* 11: refused */
    ASSERT(loop_until_count(e.base, &b.answers, 9, 10000));
    for (int i = 0; i < 9; i++) ASSERT_EQ(1, b.answered[i]);
    for (int i = 0; i < 5; i++) ASSERT_EQ(RJQ_OK, b.status[i]);
    ASSERT_EQ(RJQ_EFULL, b.status[5]);
    ASSERT_EQ(RJQ_OK, b.status[6]);
    ASSERT_EQ(RJQ_OK, b.status[7]);
    ASSERT_EQ(RJQ_EFULL, b.status[8]);
    ASSERT_EQ(10, server_int(e.rc, "LLEN t:{b10}:ready"));
    env_stop(&e);
}

/* Ten producers (clients) each burst 40 single enqueues in one loop turn
 * at a bound of 100: exactly 100 are taken across them (each producer's
 * burst was refused or taken whole: 80). */
TEST(bounded_queue_takes_exactly_its_bound_from_ten_bursting_producers) {
    test_env e;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.max_waiting = 100;
    env_start_queue(&e, "b", &qo);
    static burst b;
    memset(&b, 0, sizeof b);
    rjq_client *cs[10];
    rjq_queue *qs[10];
    for (int k = 0; k < 10; k++) {
        cs[k] = client_for(e.base, &e.s);
        wait_connected(e.base, cs[k]);
        ASSERT_OK(rjq_queue_open(cs[k], "b", &qo, &qs[k]));
    }
    for (int k = 0; k < 10; k++) burst_on(qs[k], &b, 40 * k, 40, "x", 1);
    ASSERT(loop_until_count(e.base, &b.answers, 400, 20000));
    for (int i = 0; i < 400; i++) ASSERT_EQ(1, b.answered[i]);
    ASSERT_EQ(100, count_status(&b, 0, 400, RJQ_OK));
    ASSERT_EQ(300, count_status(&b, 0, 400, RJQ_EFULL));
    for (int k = 0; k < 10; k++) { /* in order within each producer */
        long ok = count_status(&b, 40 * k, 40 * k + 40, RJQ_OK);
        for (int i = 40 * k; i < 40 * k + 40; i++)
            ASSERT_EQ(i - 40 * k < ok ? RJQ_OK : RJQ_EFULL, b.status[i]);
    }
    ASSERT_EQ(100, server_int(e.rc, "LLEN t:{b}:ready"));
    ASSERT_EQ(100, seq_of(&e));
    for (int k = 0; k < 10; k++) rjq_client_free(cs[k]);
    env_stop(&e);
}

/* The same with payloads of KiB, which go ahead of the script (HSETNX
 * under reserved numbers): the payloads of refused jobs are deleted. */
TEST(bounded_queue_admits_each_enqueue_sent_with_payloads_ahead) {
    test_env e;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.max_waiting = 100;
    env_start_queue(&e, "b", &qo);
    enum { KIB2 = 2048 };
    static char big[KIB2];
    memset(big, 'p', sizeof big);
    rjq_enqueue_item items[10];
    for (int i = 0; i < 10; i++) items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), big, KIB2, NULL};
    long target = answers + 1;
    ASSERT_OK(rjq_enqueue_batch(e.q, items, 10, on_enqueued, NULL));
    ASSERT(loop_until_count(e.base, &answers, target, 5000));
    ASSERT_EQ(RJQ_OK, last_status);
    WAIT_FOR(e.base, server_int(e.rc, "ZCARD t:{b}:reserved") > 0, 5000);
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{b}:reserved"));
    /* the reservation's reply read too: a stats call is a round trip */
    ASSERT_OK(stats_of(e.base, e.q).status);
    static burst b;
    memset(&b, 0, sizeof b);
    long long hsetnx = server_calls(e.rc, "hsetnx");
    burst_on(e.q, &b, 0, 150, big, KIB2);
    ASSERT(loop_until_count(e.base, &b.answers, 150, 10000));
    ASSERT_EQ(150, server_calls(e.rc, "hsetnx") - hsetnx); /* they went ahead */
    for (int i = 0; i < 150; i++) {
        ASSERT_EQ(1, b.answered[i]);
        ASSERT_EQ(i < 90 ? RJQ_OK : RJQ_EFULL, b.status[i]);
    }
    ASSERT_EQ(100, server_int(e.rc, "LLEN t:{b}:ready"));
    ASSERT_EQ(100, server_int(e.rc, "HLEN t:{b}:payload")); /* no refused payload stays */
    ASSERT_EQ(100, seq_of(&e));
    env_stop(&e);
}

/* A batch whose jobs' ids make it pass one call's bytes (1 MiB) goes as
 * several calls in one transaction, taken or refused whole. A single
 * enqueue made before it in the same loop turn does not go with it: it is
 * admitted on its own (here taken while the batch is refused). */
TEST(single_enqueue_before_a_batch_of_several_calls_is_admitted_on_its_own) {
    test_env e;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.max_waiting = 4000;
    env_start_queue(&e, "b", &qo);
    enum { K = 5000 };
    static char ids[K][RJQ_JOB_ID_MAX + 1];
    static rjq_job_options jo[K];
    static rjq_enqueue_item items[K];
    for (int i = 0; i < K; i++) {
        snprintf(ids[i], sizeof ids[i], "k%d-", i);
        memset(ids[i] + strlen(ids[i]), 'i', RJQ_JOB_ID_MAX - strlen(ids[i]));
        ids[i][RJQ_JOB_ID_MAX] = '\0';
        jo[i] = (rjq_job_options){.size = sizeof(rjq_job_options), .id = ids[i]};
        items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), "", 0, &jo[i]};
    }
    static burst b;
    memset(&b, 0, sizeof b);
    long long execs = server_calls(e.rc, "exec");
    rjq_job_options one = {.size = sizeof(rjq_job_options), .id = "single"}; /* (with an id: the same batch as the ids below) */
    slots[0] = (burst_slot){&b, 0};
    ASSERT_OK(rjq_enqueue(e.q, "x", 1, &one, on_burst, &slots[0]));
    slots[1] = (burst_slot){&b, 1};
    ASSERT_OK(rjq_enqueue_batch(e.q, items, K, on_burst_batch, &slots[1]));
    ASSERT(loop_until_count(e.base, &b.answers, 2, 20000));
    ASSERT_EQ(RJQ_OK, b.status[0]);
    ASSERT_EQ(RJQ_EFULL, b.status[1]);
    ASSERT_EQ(1, server_calls(e.rc, "exec") - execs); /* the batch: several calls */
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{b}:ready"));
    env_stop(&e);
}

static void handler(rjq_job *job, void *data) {
    (void)data;
    ASSERT_OK(rjq_job_complete(job, "", 0, NULL, NULL));
}

/* Workers make room, and the room is taken again. */
TEST(bounded_queue_takes_jobs_again_once_workers_made_room) {
    test_env e;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.max_waiting = 3;
    env_start_queue(&e, "b", &qo);
    for (int i = 0; i < 3; i++) ASSERT_EQ(RJQ_OK, enqueue_one(&e, NULL, 0, 0));
    ASSERT_EQ(RJQ_EFULL, enqueue_one(&e, NULL, 0, 0));
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, NULL, handler, NULL, &w));
    WAIT_FOR(e.base, server_int(e.rc, "LLEN t:{b}:ready") == 0, 5000);
    ASSERT_EQ(RJQ_OK, enqueue_one(&e, NULL, 0, 0));
    env_stop(&e);
}

TEST(negative_bound_is_refused) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.max_waiting = -1;
    rjq_queue *q = NULL;
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_open(e.c, "b", &qo, &q));
    env_stop(&e);
}
