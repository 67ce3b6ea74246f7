/*
 * Bounded queues (max_waiting): an enqueue that would make more jobs wait
 * than the bound is refused with RJQ_EFULL, a batch as a whole, nothing
 * written (no job, no counter); ids that exist do not count; delayed and
 * prioritised jobs do; room made by workers is taken again; the bound
 * costs nothing when unset (no extra read: the default path is unchanged).
 */
#include <stdio.h>
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
    rjq_queue_options qo = {0};
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
    ASSERT(strstr(rjq_client_errmsg(e.c), "max_waiting 5") != NULL);
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
    rjq_queue_options qo = {0};
    qo.max_waiting = 6;
    env_start_queue(&e, "b", &qo);
    ASSERT_EQ(RJQ_OK, enqueue_one(&e, NULL, 0, 0));
    ASSERT_EQ(RJQ_OK, enqueue_one(&e, NULL, 0, 0));
    enum { SIZE = 400 << 10 }; /* two a call: 6 jobs are 3 calls */
    char *big = malloc(SIZE);
    ASSERT(big != NULL);
    memset(big, 'z', SIZE);
    rjq_enqueue_item items[6];
    for (int i = 0; i < 6; i++) items[i] = (rjq_enqueue_item){big, SIZE, NULL};
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
    rjq_queue_options qo2 = {0};
    qo2.max_waiting = 8;
    rjq_queue *q8 = NULL;
    ASSERT_OK(rjq_queue_open(e.c, "b8", &qo2, &q8));
    static char ids[6][8];
    rjq_job_options jo[6];
    for (int i = 0; i < 6; i++) {
        snprintf(ids[i], sizeof ids[i], "k%d", i);
        jo[i] = (rjq_job_options){.id = ids[i]};
        items[i] = (rjq_enqueue_item){big, SIZE, &jo[i]};
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

static void handler(rjq_job *job, void *data) {
    (void)data;
    ASSERT_OK(rjq_job_complete(job, "", 0, NULL, NULL));
}

/* Workers make room, and the room is taken again. */
TEST(bounded_queue_takes_jobs_again_once_workers_made_room) {
    test_env e;
    rjq_queue_options qo = {0};
    qo.max_waiting = 3;
    env_start_queue(&e, "b", &qo);
    for (int i = 0; i < 3; i++) ASSERT_EQ(RJQ_OK, enqueue_one(&e, NULL, 0, 0));
    ASSERT_EQ(RJQ_EFULL, enqueue_one(&e, NULL, 0, 0));
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, NULL, handler, NULL, &w));
    for (int i = 0; i < 200 && server_int(e.rc, "LLEN t:{b}:ready") > 0; i++) loop_for(e.base, 10);
    ASSERT_EQ(RJQ_OK, enqueue_one(&e, NULL, 0, 0));
    env_stop(&e);
}

TEST(negative_bound_is_refused) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue_options qo = {0};
    qo.max_waiting = -1;
    rjq_queue *q = NULL;
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_open(e.c, "b", &qo, &q));
    env_stop(&e);
}
