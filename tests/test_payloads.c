/*
 * Payloads of some KiB: a worker whose recent payloads are big claims ids
 * only and reads the payloads itself with one HMGET per claim (worker_fetch.c,
 * "payload fetch"; claim.lua ARGV 10). These tests check that every job
 * still reaches its handler once, with its own payload, in claim order,
 * when big and small payloads alternate (the worker switches between the
 * two ways), and what happens to a job whose payload is gone by the time
 * the worker reads it.
 */
#include <signal.h>
#include <stdint.h>

#include <hiredis/async.h>
#include <hiredis/sds.h>

#include "core_private.h" /* white-box: the command connection's output */
#include "fixture.h"
#include "harness.h"
#include "proxy.h"
#include "server.h"
#include "waits.h"

/* The payload of job i: its number, then filler bytes that depend on i,
 * so a payload handed to the wrong job (id "p<i>") is noticed. Big (24
 * KiB), or when mixed big for the first 4 of every 44 and tiny for the
 * rest: the worker's average payload passes 2 KiB within the big ones and
 * falls below it within the tiny ones, so its claims switch both ways. */
static size_t make_payload(long i, int mixed, char *buf, size_t cap) {
    size_t len = !mixed || (i % 44) < 4 ? 24 * 1024 : 16;
    ASSERT(len <= cap);
    int n = snprintf(buf, cap, "%ld:", i);
    for (size_t k = (size_t)n; k < len; k++) buf[k] = (char)('a' + (k * 7 + (size_t)i) % 26);
    return len;
}

/* Options with job i's id, "p<i>". */
static const rjq_job_options *job_id(long i) {
    static char id[32];
    static rjq_job_options o;
    snprintf(id, sizeof id, "p%ld", i);
    o = (rjq_job_options){.size = sizeof(rjq_job_options), .id = id};
    return &o;
}

typedef struct run_ctx {
    int mixed;
    long total, handled, completed, bad, dup;
    long last;                /* the highest job number seen (in order: +1) */
    long out_of_order;
    unsigned char *seen;
} run_ctx;

static void check_handler(rjq_job *job, void *data) {
    run_ctx *x = data;
    static char want[32 * 1024];
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    long i = atol(rjq_job_get_id(job) + 1); /* "p<i>" */
    x->handled++;
    if (i < 0 || i >= x->total) {
        x->bad++;
    } else {
        if (x->seen[i]) x->dup++;
        x->seen[i] = 1;
        size_t wlen = make_payload(i, x->mixed, want, sizeof want);
        if (len != wlen || memcmp(p, want, len) != 0) x->bad++;
        if (i != x->last + 1) x->out_of_order++;
        x->last = i;
    }
    ASSERT_OK(rjq_job_complete(job, "ok", 2, on_done_ok, &x->completed));
}

/* A backlog of N jobs (mixed or all big) drained by one worker of the
 * given concurrency: each job runs once, with its own payload, in FIFO
 * order (claims and payload reads are answered in the order they were
 * sent, and no claim's jobs may overtake an earlier claim's by skipping
 * its payload read). */
static void drain_backlog(const char *queue, int mixed, int concurrency, long n) {
    test_env e;
    env_start(&e, queue);
    static char buf[32 * 1024];
    for (long i = 0; i < n; i++) {
        size_t len = make_payload(i, mixed, buf, sizeof buf);
        ASSERT_OK(rjq_enqueue(e.q, buf, len, job_id(i), NULL, NULL));
    }
    ASSERT_EQ(n, get_stats(e.base, e.q).ready);
    run_ctx x = {.mixed = mixed, .total = n, .last = -1};
    x.seen = calloc((size_t)n, 1);
    rjq_worker_options wo = quiet_worker_options(concurrency);
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(e.q, &wo, check_handler, &x, &w));
    WAIT_FOR(e.base, x.completed >= n, 20000);
    ASSERT_EQ(n, x.completed);
    ASSERT_EQ(n, x.handled);
    ASSERT_EQ(0, x.bad);
    ASSERT_EQ(0, x.dup);
    ASSERT_EQ(0, x.out_of_order);
    rjq_stats s = get_stats(e.base, e.q);
    ASSERT_EQ(n, s.completed);
    ASSERT_EQ(0, s.ready + s.active);
    free(x.seen);
    env_stop(&e);
}

/* One job per claim: every claim switches or keeps the way it gets its
 * payloads. */
TEST(big_and_small_payloads_each_reach_their_job_once_in_order) {
    drain_backlog("pay", 1, 1, 176);
}

/* Two claims in flight, their ways switching as the payloads change. */
TEST(big_and_small_payloads_by_two_claims_in_flight_keep_fifo_order) {
    drain_backlog("pay4", 1, 4, 440);
}

/* All big, claims of 8 (two in flight): every payload to its own job. */
TEST(big_payloads_by_batch_each_reach_their_job_once) {
    drain_backlog("batch", 0, 16, 400);
}

typedef struct gone_ctx {
    rjq_job *held;            /* the first job, held until the rest wait */
    long handled_victim, completed;
    long handled;
} gone_ctx;

static void gone_handler(rjq_job *job, void *data) {
    gone_ctx *x = data;
    x->handled++;
    if (strcmp(rjq_job_get_id(job), "victim") == 0) x->handled_victim++;
    if (strcmp(rjq_job_get_id(job), "first") == 0) x->held = job;
    else ASSERT_OK(rjq_job_complete(job, "ok", 2, on_done_ok, &x->completed));
}

/* A job whose payload is gone when its worker reads it (deleted behind
 * rjq's back between the claim and the read; rjq itself deletes only the
 * records of finished jobs) is not handed to the handler: it is left to its
 * lease, and the reclaim sweep then counts the attempt (here its last:
 * dead). The job after it runs as usual. The worker reads payloads itself
 * because the job it ran before had a big one. */
TEST(claimed_job_without_payload_is_not_run_and_left_to_its_lease) {
    test_env e;
    env_start(&e, "gone");
    static char big[24 * 1024];
    memset(big, 'b', sizeof big);
    rjq_job_options o = {.size = sizeof(rjq_job_options), .id = "first"};
    ASSERT_OK(rjq_enqueue(e.q, big, sizeof big, &o, NULL, NULL));
    gone_ctx x = {0};
    rjq_worker_options wo = quiet_worker_options(1);
    wo.lease_ms = 300;
    wo.reclaim_ms = 100;
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(e.q, &wo, gone_handler, &x, &w));
    WAIT_FOR(e.base, x.held != NULL, 20000);
    /* while the worker has no free slot: a job without payload, one with */
    rjq_job_options ov = {.size = sizeof(rjq_job_options), .id = "victim", .max_attempts = 1};
    ASSERT_EQ(0, enqueue_job(e.base, e.q, "v", &ov).status);
    redisReply *r = server_cmd(e.rc, "HDEL t:{gone}:payload victim");
    ASSERT_EQ(1, r->integer);
    freeReplyObject(r);
    rjq_job_options oa = {.size = sizeof(rjq_job_options), .id = "after"};
    ASSERT_EQ(0, enqueue_job(e.base, e.q, "a", &oa).status);
    ASSERT_OK(rjq_job_complete(x.held, "ok", 2, on_done_ok, &x.completed));
    WAIT_FOR(e.base, get_stats(e.base, e.q).dead >= 1, 20000);
    rjq_stats s = get_stats(e.base, e.q);
    ASSERT_EQ(1, s.dead);
    ASSERT_EQ(2, s.completed);
    ASSERT_EQ(0, x.handled_victim);
    ASSERT_EQ(2, x.handled);
    /* (rjq_queue_get_job reports a job without payload as not found) */
    redisReply *d = server_cmd(e.rc, "ZSCORE t:{gone}:dead victim");
    ASSERT_EQ(REDIS_REPLY_STRING, d->type);
    freeReplyObject(d);
    env_stop(&e);
}

typedef struct stop_ctx {
    test_env *e;
    rjq_worker *big;          /* the worker reading payloads */
    int free_client;          /* else stop that worker */
    long big_handled, big_completed, small_handled;
    int stopped;
} stop_ctx;

static void on_stop_completed(rjq_client *c, int status, void *data) {
    (void)c;
    if (status == RJQ_OK) ((stop_ctx *)data)->big_completed++;
}

static void big_handler(rjq_job *job, void *data) {
    stop_ctx *x = data;
    x->big_handled++;
    rjq_job_complete(job, "ok", 2, on_stop_completed, x);
}

static void on_big_stopped(rjq_worker *w, int status, void *data) {
    (void)w;
    ASSERT_OK(status);
    ((stop_ctx *)data)->stopped++;
}

/* Runs while the big worker's payload read is in flight (see below). */
static void small_handler(rjq_job *job, void *data) {
    stop_ctx *x = data;
    x->small_handled++;
    if (x->free_client) {
        rjq_client_free(x->e->c);
        x->e->c = NULL;
        /* (the handle is still ours: this frees it) */
        ASSERT_EQ(RJQ_ECLOSED, rjq_job_complete(job, "ok", 2, NULL, NULL));
        return;
    }
    ASSERT_OK(rjq_worker_stop(x->big, on_big_stopped, x));
    ASSERT_OK(rjq_job_complete(job, "ok", 2, NULL, NULL));
}

static void on_counted(rjq_client *c, int status, long long n, void *data) {
    (void)c, (void)n;
    ASSERT_OK(status);
    (*(int *)data)++;
}

/* Run the loop until a command round trip on c (q's stats) sees no script
 * call but its own: the claims the worker had sent have run. */
static void wait_scripts_settled(test_env *e, rjq_queue *q) {
    for (int i = 0; i < 100; i++) {
        long long before = server_script_calls(e->rc);
        ASSERT_OK(stats_of(e->base, q).status); /* one script call */
        if (server_script_calls(e->rc) == before + 1) return;
    }
    FAIL_AT(__FILE__, __LINE__, "the worker's claims did not settle");
}

typedef struct channel_poll {
    rjq_client *c;
    const char *channel;
} channel_poll;

static int channel_confirmed(void *arg) {
    channel_poll *p = arg;
    return rjq__channel_confirmed(p->c, p->channel);
}

/* The client's requests sent or waiting for room: n of them. */
typedef struct sent_poll {
    rjq_client *c;
    size_t n;
} sent_poll;

static int requests_sent(void *arg) {
    sent_poll *p = arg;
    return p->c->inflight.n + p->c->room.n >= p->n;
}

static int two_wait_for_room(void *arg) {
    return ((rjq_client *)arg)->room.n >= 2;
}

/* A worker that reads its payloads (its last job was big) is stopped, or
 * its client freed, while that read is in flight: the jobs go back to the
 * queue unrun (stop), or are left to their lease (free); nothing leaks.
 * The order is made certain by two queues: both paused, jobs waiting on
 * each, then resumed in one turn, big queue first. The doorbells come in
 * that order, so the big worker's claim goes first, its payload read is
 * sent when its reply comes, and the small worker's claim reply, which
 * runs the handler that stops, comes before that read's reply. */
static void stop_while_reading(int free_client) {
    test_env e;
    env_start(&e, "big");
    rjq_queue *small = NULL;
    ASSERT_OK(rjq_queue_open(e.c, "small", NULL, &small));
    static char big[24 * 1024 + 1]; /* a string: enqueue_job takes one */
    memset(big, 'b', sizeof big - 1);
    stop_ctx x = {.e = &e, .free_client = free_client};
    rjq_worker_options wo = quiet_worker_options(4);
    ASSERT_OK(rjq_worker_start(e.q, &wo, big_handler, &x, &x.big));
    ASSERT_EQ(0, enqueue_job(e.base, e.q, big, NULL).status);
    WAIT_FOR(e.base, x.big_completed >= 1, 20000);
    ASSERT_EQ(1, x.big_completed);
    int paused = 0;
    ASSERT_OK(rjq_queue_pause(e.q, on_counted, &paused));
    ASSERT_OK(rjq_queue_pause(small, on_counted, &paused));
    WAIT_FOR(e.base, paused >= 2, 20000);
    for (int i = 0; i < 4; i++) ASSERT_OK(rjq_enqueue(e.q, big, sizeof big - 1, NULL, NULL, NULL));
    ASSERT_EQ(0, enqueue_job(e.base, small, "s", NULL).status);
    rjq_worker *sw = NULL;
    ASSERT_OK(rjq_worker_start(small, &wo, small_handler, &x, &sw));
    /* its first claim (on its doorbell's subscription) finds the queue paused */
    channel_poll wake = {e.c, "t:{small}:wake"};
    ASSERT(loop_until_cond(e.base, channel_confirmed, &wake, 10000));
    wait_scripts_settled(&e, e.q);
    ASSERT_OK(rjq_queue_resume(e.q, NULL, NULL));
    ASSERT_OK(rjq_queue_resume(small, NULL, NULL));
    WAIT_FOR(e.base, x.small_handled >= 1, 20000);
    ASSERT_EQ(1, x.small_handled);
    if (!free_client) {
        WAIT_FOR(e.base, x.stopped, 20000);
        ASSERT_EQ(1, x.stopped);
        ASSERT_EQ(1, x.big_handled); /* only the first */
        rjq_stats s = get_stats(e.base, e.q);
        ASSERT_EQ(4, s.ready);
        ASSERT_EQ(0, s.active);
    } else {
        ASSERT(loop_until_empty(e.base, 10000)); /* all of the freed client that could run ran */
        ASSERT_EQ(1, x.big_handled);
        /* claimed, unrun: active until their lease */
        ASSERT_EQ(4, server_int(e.rc, "ZCARD t:{big}:active") - 1 /* the pin */);
    }
    env_stop(&e);
}

TEST(worker_stopped_while_reading_payloads_hands_its_jobs_back) {
    stop_while_reading(0);
}

TEST(client_freed_while_reading_payloads_leaks_nothing) {
    stop_while_reading(1);
}

typedef struct refused_ctx {
    long handled_x, attempt_x, len_x, completed;
} refused_ctx;

static void refused_handler(rjq_job *job, void *data) {
    refused_ctx *x = data;
    if (strcmp(rjq_job_get_id(job), "x") == 0) {
        size_t len;
        rjq_job_get_payload(job, &len);
        x->handled_x++;
        x->attempt_x = rjq_job_get_attempt(job);
        x->len_x = (long)len;
    }
    ASSERT_OK(rjq_job_complete(job, "ok", 2, on_done_ok, &x->completed));
}

/* The server refuses a worker's payload read (here the payload column has
 * the wrong type just then): the jobs go back to the queue at once, their
 * attempt undone, not left to their lease (30 s here), and the worker
 * claims with payloads again. The order is made with a proxy that holds
 * the command connection's replies: the claim runs, its reply waits while
 * the column is swapped, then everything flows. */
static int ff_x_active(void *rc) {
    redisReply *r = server_cmd(rc, "HGET t:{ff}:state x");
    int active = r->type == REDIS_REPLY_STRING && strncmp(r->str, "active ", 7) == 0;
    freeReplyObject(r);
    return active;
}

static int ff_handed_back_and_refused(void *arg) {
    test_env *e = arg;
    return server_int(e->rc, "LLEN t:{ff}:ready") == 1 &&
           strstr(rjq_client_get_errmsg(e->c), "WRONGTYPE t:{ff}:payload");
}

TEST(refused_payload_read_hands_the_jobs_back_at_once) {
    test_env e;
    proxy p;
    env_start_proxied(&e, &p, "ff", NULL);
    static char big[24 * 1024 + 1];
    memset(big, 'b', sizeof big - 1);
    refused_ctx x = {0};
    rjq_worker_options wo = quiet_worker_options(1);
    wo.poll_ms = 50; /* a claim refused meanwhile (the same column) is tried again */
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(e.q, &wo, refused_handler, &x, &w));
    ASSERT_EQ(0, enqueue_job(e.base, e.q, big, NULL).status); /* its average: big */
    WAIT_FOR(e.base, x.completed >= 1, 20000);
    ASSERT_EQ(1, x.completed);
    int paused = 0;
    ASSERT_OK(rjq_queue_pause(e.q, on_counted, &paused));
    WAIT_FOR(e.base, paused >= 1, 20000);
    rjq_job_options o = {.size = sizeof(rjq_job_options), .id = "x"};
    long long calls = server_script_calls(e.rc);
    ASSERT_EQ(0, enqueue_job(e.base, e.q, big, &o).status);
    /* its doorbell makes the worker claim (and hear "paused"): let that
     * settle, so the claim after the resume is the one that takes x */
    ASSERT(loop_until_script_calls(e.base, e.rc, calls + 2, 10000)); /* the enqueue, a claim */
    wait_scripts_settled(&e, e.q);

    proxy_hold(&p, 1);
    ASSERT_OK(rjq_queue_resume(e.q, NULL, NULL)); /* the doorbell flows: it claims */
    ASSERT(loop_until_cond(e.base, ff_x_active, e.rc, 10000));
    freeReplyObject(server_cmd(e.rc, "RENAME t:{ff}:payload t:{ff}:saved"));
    freeReplyObject(server_cmd(e.rc, "SET t:{ff}:payload oops"));
    proxy_hold(&p, 0);
    /* The refused read hands x back; the worker then claims with payloads,
     * which the server refuses too, naming the column (before that, the
     * client's last error is the fetch's own: waited for, not raced). */
    loop_until_cond(e.base, ff_handed_back_and_refused, &e, 10000);
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{ff}:ready"));
    if (strstr(rjq_client_get_errmsg(e.c), "WRONGTYPE t:{ff}:payload") == NULL)
        FAIL_AT(__FILE__, __LINE__, "the client's last error: %s", rjq_client_get_errmsg(e.c));
    ASSERT_EQ(0, x.handled_x);

    freeReplyObject(server_cmd(e.rc, "DEL t:{ff}:payload"));
    freeReplyObject(server_cmd(e.rc, "RENAME t:{ff}:saved t:{ff}:payload"));
    WAIT_FOR(e.base, x.handled_x >= 1, 20000);
    ASSERT_EQ(1, x.handled_x);
    ASSERT_EQ(1, x.attempt_x); /* the refused read spent no attempt */
    ASSERT_EQ((long)sizeof big - 1, x.len_x);
    /* its completion answered (freeing the client first would cancel it) */
    WAIT_FOR(e.base, x.completed >= 2, 20000);
    ASSERT_EQ(2, x.completed);
    env_stop_proxied(&e, &p);
}

/* Requests made while hiredis holds more than 1 MiB of unwritten output
 * on the command connection (here: Redis stopped, batches of 2 MiB) wait
 * in the client, in order, instead of piling up in hiredis' buffer, whose
 * unwritten rest hiredis moves after every write the socket takes only
 * part of (with 16 KiB payloads that cost the producer more CPU than all
 * else it did). Once Redis reads again, they all go, in the order they
 * were made, and each lands once. */
typedef struct room_ctx {
    int calls;
} room_ctx;

/* A batch's callback: a batch of 8 made it. */
static void room_cb(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    room_ctx *x = data;
    (void)c, (void)jobs;
    ASSERT_OK(status);
    ASSERT_EQ(8, (long)n);
    x->calls++;
}

/* Batches of ID_JOBS jobs with ids "b<batch>j<job>", every payload the
 * same size bytes of one letter: items[b] is batch b. Free the payload
 * with free_id_batches. */
enum { ID_BATCHES = 6, ID_JOBS = 8 };
typedef struct id_batches {
    char ids[ID_BATCHES][ID_JOBS][16];
    rjq_job_options jo[ID_BATCHES][ID_JOBS];
    rjq_enqueue_item items[ID_BATCHES][ID_JOBS];
    char *payload;
} id_batches;

static void make_id_batches(id_batches *x, size_t size, char letter) {
    char *payload = x->payload = malloc(size);
    ASSERT(payload != NULL);
    memset(payload, letter, size);
    for (int b = 0; b < ID_BATCHES; b++)
        for (int j = 0; j < ID_JOBS; j++) {
            snprintf(x->ids[b][j], sizeof x->ids[b][j], "b%dj%d", b, j);
            x->jo[b][j] = (rjq_job_options){.size = sizeof(rjq_job_options), .id = x->ids[b][j]};
            x->items[b][j] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), payload, size, &x->jo[b][j]};
        }
}

static void free_id_batches(id_batches *x) {
    free(x->payload);
    x->payload = NULL;
}

/* The ready list of rc's queue key, each batch of make_id_batches by its
 * first job ("b<batch>j0"), other jobs by their ids; space-separated. */
static void ready_firsts(redisContext *rc, const char *key, char *out, size_t cap) {
    redisReply *r = server_cmd(rc, "LRANGE %s 0 -1", key);
    out[0] = '\0';
    for (size_t i = 0; i < r->elements; i++) {
        const char *id = r->element[i]->str;
        if (id[0] == 'b' && strstr(id, "j0") == NULL) continue;
        ASSERT(strlen(out) + strlen(id) + 2 <= cap);
        strcat(out, id);
        strcat(out, " ");
    }
    freeReplyObject(r);
}

TEST(requests_made_while_the_output_is_full_wait_in_order) {
    test_env e;
    env_start(&e, "room");
    enum { BATCHES = ID_BATCHES, JOBS = ID_JOBS, SIZE = 256 << 10 }; /* 2 MiB a batch */
    static id_batches batches;
    make_id_batches(&batches, SIZE, 'r');
    room_ctx x = {0};
    enqueue_wait last = {0};
    ASSERT_EQ(0, kill(e.s.pid, SIGSTOP));
    for (int b = 0; b < BATCHES; b++)
        ASSERT_OK(rjq_enqueue_batch(e.q, batches.items[b], JOBS, room_cb, &x));
    ASSERT_OK(rjq_enqueue(e.q, "last", 4, NULL, on_enqueue_wait, &last));
    ASSERT(loop_until_cond(e.base, two_wait_for_room, e.c, 10000)); /* the sockets took what they can */
    /* hiredis holds at most one batch past the 1 MiB mark; the rest wait */
    size_t out = sdslen(e.c->cmd.ac->c.obuf);
    ASSERT(out <= (1u << 20) + (size_t)JOBS * SIZE + (64u << 10)); /* (framing) */
    ASSERT(e.c->room.n >= 2);
    ASSERT_EQ(0, x.calls);
    ASSERT_EQ(0, kill(e.s.pid, SIGCONT));
    WAIT_FOR(e.base, last.done, 20000);
    ASSERT_EQ(1, last.done);
    ASSERT_OK(last.status);
    ASSERT_EQ(BATCHES, x.calls);
    ASSERT_EQ(BATCHES * JOBS + 1, atol(last.id)); /* (seq counts the batches' jobs) */
    char got[256];
    ready_firsts(e.rc, "t:{room}:ready", got, sizeof got);
    ASSERT_STREQ("b0j0 b1j0 b2j0 b3j0 b4j0 b5j0 49 ", got); /* in the order made */
    ASSERT_EQ(BATCHES * JOBS + 1, server_int(e.rc, "LLEN t:{room}:ready"));
    ASSERT_EQ(0, (long)e.c->room.n);
    free_id_batches(&batches);
    env_stop(&e);
}

/* Requests waiting for room when the connection is lost (Redis killed and
 * started again, empty) go after the one lost in flight: batches that may
 * be sent again (every job has an id) land once each, in the order they
 * were made. */
TEST(requests_waiting_for_room_keep_their_order_through_a_reconnect) {
    test_env e;
    env_start(&e, "roomloss");
    enum { BATCHES = 5, JOBS = ID_JOBS, SIZE = 256 << 10 };
    static id_batches batches;
    make_id_batches(&batches, SIZE, 'l');
    char want[BATCHES * JOBS * 8] = "";
    for (int b = 0; b < BATCHES; b++) {
        for (int j = 0; j < JOBS; j++) {
            strcat(want, batches.ids[b][j]);
            strcat(want, " ");
        }
    }
    room_ctx x = {0};
    ASSERT_EQ(0, kill(e.s.pid, SIGSTOP));
    for (int b = 0; b < BATCHES; b++)
        ASSERT_OK(rjq_enqueue_batch(e.q, batches.items[b], JOBS, room_cb, &x));
    ASSERT(loop_until_cond(e.base, two_wait_for_room, e.c, 10000));
    ASSERT_EQ(0, kill(e.s.pid, SIGKILL)); /* what it read goes with it */
    server_restart(&e.s, NULL);
    redisFree(e.rc);
    e.rc = server_connect(&e.s);
    WAIT_FOR(e.base, x.calls >= BATCHES, 40000);
    ASSERT_EQ(BATCHES, x.calls);
    redisReply *r = server_cmd(e.rc, "LRANGE t:{roomloss}:ready 0 -1");
    ASSERT_EQ(BATCHES * JOBS, (long)r->elements);
    char got[sizeof want] = "";
    for (size_t i = 0; i < r->elements; i++) {
        strcat(got, r->element[i]->str);
        strcat(got, " ");
    }
    freeReplyObject(r);
    ASSERT_STREQ(want, got);
    ASSERT_EQ(0, (long)e.c->room.n);
    free_id_batches(&batches);
    env_stop(&e);
}

/* Requests waiting for room go as soon as hiredis has written its output,
 * even when no reply comes meanwhile (the proxy holds them back): the
 * second big batch runs in Redis before the first one's reply arrives. */
TEST(requests_waiting_for_room_go_when_the_output_is_written) {
    test_env e;
    proxy p;
    env_start_proxied(&e, &p, "drained", NULL);
    enum { BATCHES = 3, JOBS = ID_JOBS, SIZE = 256 << 10 }; /* 2 MiB a batch */
    static id_batches batches;
    make_id_batches(&batches, SIZE, 'd');
    room_ctx x = {0};
    proxy_hold(&p, 1); /* replies wait in the proxy */
    for (int b = 0; b < BATCHES; b++)
        ASSERT_OK(rjq_enqueue_batch(e.q, batches.items[b], JOBS, room_cb, &x));
    loop_until_server_int(e.base, e.rc, BATCHES * JOBS, 5000, "LLEN t:{drained}:ready");
    ASSERT_EQ(BATCHES * JOBS, server_int(e.rc, "LLEN t:{drained}:ready")); /* all ran */
    ASSERT_EQ(0, x.calls);
    char got[256];
    ready_firsts(e.rc, "t:{drained}:ready", got, sizeof got);
    ASSERT_STREQ("b0j0 b1j0 b2j0 ", got);
    proxy_hold(&p, 0);
    WAIT_FOR(e.base, x.calls >= BATCHES, 20000);
    ASSERT_EQ(BATCHES, x.calls);
    free_id_batches(&batches);
    env_stop_proxied(&e, &p);
}

/* Requests waiting for room while Redis answers BUSY (a script runs too
 * long): those in flight are tried again later, the waiting ones join
 * them, and all land in the order they were made, a request made
 * meanwhile last. */
static int busy_calls;

static void busy_cb(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs, (void)n, (void)data;
    ASSERT_OK(status);
    busy_calls++;
}

static int server_busy(void *rc) {
    redisReply *r = redisCommand(rc, "PING");
    int busy = r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "BUSY", 4) == 0;
    freeReplyObject(r);
    return busy;
}

/* Every request of c waits for its next try (at least n), none in flight. */
static int all_wait_to_retry(void *arg) {
    sent_poll *p = arg;
    return p->c->later.n >= p->n && p->c->inflight.n == 0 && p->c->room.n == 0;
}

TEST(requests_waiting_for_room_keep_their_order_through_busy_retries) {
    test_env e;
    env_start(&e, "busy");
    enum { BATCHES = ID_BATCHES, JOBS = ID_JOBS, SIZE = 256 << 10 };
    static id_batches batches;
    make_id_batches(&batches, SIZE, 'y');
    freeReplyObject(server_cmd(e.rc, "CONFIG SET busy-reply-threshold 50"));
    pid_t child = fork_child();
    if (child == 0) { /* a script that runs until killed */
        redisContext *x = server_connect(&e.s);
        freeReplyObject(redisCommand(x, "EVAL %s 0", "while true do end"));
        _exit(0);
    }
    ASSERT(loop_until_cond(e.base, server_busy, e.rc, 10000));
    ASSERT_EQ(0, kill(e.s.pid, SIGSTOP)); /* so the output fills */
    rjq_job_options ao = {.size = sizeof(rjq_job_options), .id = "a"}, no = {.size = sizeof(rjq_job_options), .id = "n"};
    ASSERT_OK(rjq_enqueue(e.q, "a", 1, &ao, busy_cb, NULL));
    sent_poll sent = {e.c, 1}; /* each request goes out (or waits for room) on its own */
    ASSERT(loop_until_cond(e.base, requests_sent, &sent, 10000));
    for (int b = 0; b < BATCHES; b++) {
        ASSERT_OK(rjq_enqueue_batch(e.q, batches.items[b], JOBS, busy_cb, NULL));
        sent.n++;
        ASSERT(loop_until_cond(e.base, requests_sent, &sent, 10000));
    }
    ASSERT(loop_until_cond(e.base, two_wait_for_room, e.c, 10000));
    ASSERT_EQ(0, kill(e.s.pid, SIGCONT)); /* BUSY answers: tried again later */
    /* "a" was answered BUSY: a new request now waits behind it, and the
     * batches (in flight, or waiting for room) must not overtake one
     * another or fall behind it when their BUSY comes */
    WAIT_FOR(e.base, e.c->later.n != 0, 20000);
    ASSERT(e.c->later.n > 0);
    ASSERT_OK(rjq_enqueue(e.q, "n", 1, &no, busy_cb, NULL));
    /* The script ends while every request waits for its next try, none in
     * flight: ended while some were (pipelined behind one answered BUSY),
     * those would land before the one answered BUSY, by the server's
     * order, not the client's. */
    sent_poll retrying = {e.c, BATCHES + 2};
    loop_until_cond(e.base, all_wait_to_retry, &retrying, 10000);
    ASSERT(e.c->later.n >= BATCHES + 2);
    ASSERT_EQ(0, e.c->inflight.n);
    ASSERT_EQ(0, e.c->room.n);
    freeReplyObject(server_cmd(e.rc, "SCRIPT KILL"));
    ASSERT_EQ(0, reap(child, 5000));
    WAIT_FOR(e.base, busy_calls >= BATCHES + 2, 40000);
    ASSERT_EQ(BATCHES + 2, busy_calls);
    ASSERT_EQ(BATCHES * JOBS + 2, server_int(e.rc, "LLEN t:{busy}:ready"));
    char got[256];
    ready_firsts(e.rc, "t:{busy}:ready", got, sizeof got);
    ASSERT_STREQ("a b0j0 b1j0 b2j0 b3j0 b4j0 b5j0 n ", got);
    free_id_batches(&batches);
    env_stop(&e);
}

/* ---- big payloads: the command timeout, pushes ------------------------------ */

typedef struct huge_ctx {
    size_t len;               /* the payload's expected length */
    char fill;                /* and its byte */
    long handled, bad, completed;
    int drops[2];             /* disconnects, per connection kind */
} huge_ctx;

static void huge_handler(rjq_job *job, void *data) {
    huge_ctx *x = data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    x->handled++;
    int ok = len == x->len;
    for (size_t i = 0; ok && i < len; i += 4093) ok = p[i] == x->fill;
    if (!ok || p[len - 1] != x->fill) x->bad++;
    ASSERT_OK(rjq_job_complete(job, "ok", 2, on_done_ok, &x->completed));
}

static void huge_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    huge_ctx *x = data;
    (void)c, (void)detail;
    if (ev == RJQ_EVENT_DISCONNECTED && (conn == RJQ_CONN_COMMAND || conn == RJQ_CONN_SUBSCRIBER))
        x->drops[conn]++;
}

/* Run the loop until x's job completed, or a connection dropped. */
static int completed_or_dropped(void *arg) {
    huge_ctx *x = arg;
    return x->completed >= 1 || x->drops[0] || x->drops[1];
}

static void wait_completed_or_dropped(struct event_base *base, huge_ctx *x) {
    loop_until_cond(base, completed_or_dropped, x, 30000);
}

/* Enqueue one job of x's length, every byte x's fill, with id `id` (none
 * if NULL). */
static void enqueue_huge(test_env *e, const huge_ctx *x, const char *id) {
    char *big = malloc(x->len);
    ASSERT(big != NULL);
    memset(big, x->fill, x->len);
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.id = id;
    ASSERT_OK(rjq_enqueue(e->q, big, x->len, id ? &jo : NULL, NULL, NULL));
    free(big);
}

/* Start e over a proxy with client options o (disconnects counted in x),
 * enqueue one job of x's length and byte, slow the link to 16 KiB every
 * 10 ms and start a worker of 1 on it. */
static void start_huge_over_a_slow_link(test_env *e, proxy *p, huge_ctx *x, const char *queue,
                                        rjq_client_options *o) {
    o->on_event = huge_event;
    o->event_data = x;
    env_start_proxied_opts(e, p, queue, o);
    enqueue_huge(e, x, NULL);
    ASSERT_EQ(1, get_stats(e->base, e->q).ready);
    proxy_trickle(p, 16u << 10, 10);
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(e->q, &wo, huge_handler, x, &w));
}

/* The job ran once, whole, with no drop of the command connection, and
 * left nothing behind; then stop e. */
static void assert_huge_ran_once_and_stop(test_env *e, proxy *p, huge_ctx *x) {
    ASSERT_EQ(0, x->drops[RJQ_CONN_COMMAND]);
    ASSERT_EQ(1, x->completed);
    ASSERT_EQ(1, x->handled);
    ASSERT_EQ(0, x->bad);
    proxy_trickle(p, 0, 0);
    rjq_stats s = get_stats(e->base, e->q);
    ASSERT_EQ(1, s.completed);
    ASSERT_EQ(0, s.ready + s.active);
    env_stop_proxied(e, p);
}

/* A claim reply that takes longer than command_timeout_ms to arrive (4
 * MiB over a link that passes 16 KiB every 10 ms: over 2.5 s, with a
 * command timeout of 1 s), its bytes arriving all along, is waited for:
 * the connection is not dropped (which re-sent the claim, whose reply was
 * then dropped again, for ever: a 40 MiB job never ran), and the job runs
 * once. */
TEST(claim_reply_slower_than_the_command_timeout_is_waited_for_while_it_arrives) {
    test_env e;
    proxy p;
    huge_ctx x = {.len = 4u << 20, .fill = 's'};
    rjq_client_options o = client_options("");
    o.command_timeout_ms = 1000;
    start_huge_over_a_slow_link(&e, &p, &x, "slow", &o);
    wait_completed_or_dropped(e.base, &x);
    assert_huge_ran_once_and_stop(&e, &p, &x);
}

/* A claim reply that takes longer than the client's liveness_ms to arrive
 * (4 MiB over the slow link: over 2.5 s, with liveness_ms 2000): the
 * job is started, not handed back as if the client's liveness entry could
 * have run out (its beats' replies wait behind that reply: before, no beat
 * was sent while one was unanswered, so the entry did run out in Redis,
 * and the worker, which knew only the beats answered before the claim,
 * handed the job back and claimed it again, under a new token, for ever).
 * Beats go on while a reply arrives, and those sent then count. */
TEST(claim_reply_slower_than_liveness_is_started_not_handed_back) {
    test_env e;
    proxy p;
    huge_ctx x = {.len = 4u << 20, .fill = 'l'};
    rjq_client_options o = client_options("");
    o.liveness_ms = 2000;
    start_huge_over_a_slow_link(&e, &p, &x, "live", &o);
    /* (handed back, it would be claimed again: each claim takes as long) */
    WAIT_FOR(e.base, x.completed >= 1, 40000);
    assert_huge_ran_once_and_stop(&e, &p, &x);
}

/* A connection that stops sending in the middle of a reply is still found
 * dead: command_timeout_ms after the last bytes arrived. */
TEST(claim_reply_that_stops_arriving_still_times_out) {
    test_env e;
    proxy p;
    huge_ctx x = {.len = 2u << 20, .fill = 't'};
    rjq_client_options o = client_options("");
    o.command_timeout_ms = 1000;
    start_huge_over_a_slow_link(&e, &p, &x, "stall", &o);
    /* part of the reply arrived: then nothing more */
    WAIT_FOR(e.base, p.trickled >= (64u << 10), 20000);
    proxy_blackhole(&p);
    wait_completed_or_dropped(e.base, &x);
    ASSERT_EQ(1, x.drops[RJQ_CONN_COMMAND]);
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "no reply") != NULL);
    ASSERT_EQ(0, x.handled);
    /* the re-sent claim, over a working connection, brings it */
    proxy_trickle(&p, 0, 0);
    WAIT_FOR(e.base, x.completed >= 1, 60000);
    ASSERT_EQ(1, x.completed);
    ASSERT_EQ(1, x.handled);
    ASSERT_EQ(0, x.bad);
    env_stop_proxied(&e, &p);
}

static char read_token[64]; /* the token the job of the test below ran with */

/* The token queue's job "big" was first made active with (its state
 * "active <attempt> <token>"), once it is. */
typedef struct token_poll {
    test_env *e;
    const char *queue;
    char *out;
    size_t cap;
} token_poll;

static int read_first_token(void *arg) {
    token_poll *p = arg;
    redisReply *r = server_cmd(p->e->rc, "HGET t:{%s}:state big", p->queue);
    if (r->type == REDIS_REPLY_STRING && strncmp(r->str, "active 1 ", 9) == 0) {
        /* "active <attempt> <token> @<enqueued>,<start>,<end>": the token */
        size_t n = strcspn(r->str + 9, " ");
        snprintf(p->out, p->cap, "%.*s", (int)n, r->str + 9);
    }
    freeReplyObject(r);
    return p->out[0] != '\0';
}

static void first_token(test_env *e, const char *queue, char *out, size_t cap) {
    out[0] = '\0';
    token_poll p = {e, queue, out, cap};
    ASSERT(loop_until_cond(e->base, read_first_token, &p, 30000)); /* (the enqueue itself trickles through the proxy) */
}

/* x's job ran once, whole, under token tok, and nothing is left. */
static void assert_ran_once_under(test_env *e, const char *queue, huge_ctx *x, const char *tok) {
    ASSERT_EQ(0, x->drops[RJQ_CONN_COMMAND]);
    ASSERT_EQ(1, x->completed);
    ASSERT_EQ(1, x->handled);
    ASSERT_EQ(0, x->bad);
    ASSERT_STREQ(tok, read_token);
    redisReply *r = server_cmd(e->rc, "HGET t:{%s}:state big", queue);
    ASSERT(r->type == REDIS_REPLY_STRING);
    char want[128];
    snprintf(want, sizeof want, "completed 1 %s @", tok); /* state attempts token times */
    ASSERT(strncmp(r->str, want, strlen(want)) == 0);
    freeReplyObject(r);
    rjq_stats s = get_stats(e->base, e->q);
    ASSERT_EQ(1, s.completed);
    ASSERT_EQ(0, s.reclaimed);
    ASSERT_EQ(0, s.ready + s.active);
}

static void token_handler(rjq_job *job, void *data) {
    snprintf(read_token, sizeof read_token, "%s", rjq_job_get_token(job));
    huge_handler(job, data);
}

/* Regression (issue 31, item 4): a payload whose read takes longer than
 * the job's lease (4 MiB over the slow link: over 2.5 s, with a lease of
 * 1 s and sweeps every 200 ms) runs its job once, under the token it was
 * pushed with: the worker extends the leases of the jobs whose payloads it
 * reads. (Before, the sweep took the job back when its lease ran out, the
 * worker handed it back as stale when the payload arrived, and it was
 * claimed and read again, for ever.) */
TEST(payload_read_slower_than_the_lease_runs_its_job_once_with_one_token) {
    test_env e;
    proxy p;
    huge_ctx x = {.len = 4u << 20, .fill = 'r'};
    rjq_client_options o = client_options("");
    o.on_event = huge_event;
    o.event_data = &x;
    env_start_proxied_opts(&e, &p, "slowread", &o);
    rjq_worker_options wo = quiet_worker_options(1);
    wo.lease_ms = 1000;  /* extended every 333 ms */
    wo.reclaim_ms = 200; /* it sweeps: a lease not extended is taken back */
    rjq_worker *w = NULL;
    read_token[0] = '\0';
    ASSERT_OK(rjq_worker_start(e.q, &wo, token_handler, &x, &w));
    /* idle, its slot registered: the job is pushed as its id (too big to
     * push) and the worker reads its payload */
    wait_worker_started(e.base, e.c, e.q, e.rc, "slowread");
    ASSERT_EQ(1, server_int(e.rc, "HLEN t:{slowread}:idle"));
    enqueue_huge(&e, &x, "big");
    proxy_trickle(&p, 16u << 10, 10);
    char tok[64];
    first_token(&e, "slowread", tok, sizeof tok); /* pushed */
    wait_completed_or_dropped(e.base, &x);
    proxy_trickle(&p, 0, 0);
    assert_ran_once_under(&e, "slowread", &x, tok);
    env_stop_proxied(&e, &p);
}

/* The same for a job whose payload comes in its claim's reply (a
 * worker's first claim carries payloads): the worker extends the leases
 * of the jobs of its claims in flight, by the claims' tokens. */
TEST(claim_reply_slower_than_the_lease_runs_its_job_once_with_one_token) {
    test_env e;
    proxy p;
    huge_ctx x = {.len = 4u << 20, .fill = 'c'};
    rjq_client_options o = client_options("");
    o.on_event = huge_event;
    o.event_data = &x;
    env_start_proxied_opts(&e, &p, "slowclaim", &o);
    enqueue_huge(&e, &x, "big");
    ASSERT_EQ(1, get_stats(e.base, e.q).ready);
    proxy_trickle(&p, 16u << 10, 10);
    rjq_worker_options wo = quiet_worker_options(1);
    wo.lease_ms = 1000;
    wo.reclaim_ms = 200;
    rjq_worker *w = NULL;
    read_token[0] = '\0';
    ASSERT_OK(rjq_worker_start(e.q, &wo, token_handler, &x, &w));
    char tok[64];
    first_token(&e, "slowclaim", tok, sizeof tok); /* claimed */
    wait_completed_or_dropped(e.base, &x);
    proxy_trickle(&p, 0, 0);
    assert_ran_once_under(&e, "slowclaim", &x, tok);
    env_stop_proxied(&e, &p);
}

/* A test env whose client reports disconnects to x; Redis' pubsub output
 * buffer limit lowered to `limit` (hard and soft), so a push message over
 * it drops the subscriber connection. */
static void push_env_start(test_env *e, const char *queue, huge_ctx *x, const char *limit) {
    memset(e, 0, sizeof *e);
    server_start_guarded(&e->s, NULL);
    e->base = event_base_new();
    ASSERT(e->base != NULL);
    e->rc = server_connect(&e->s);
    freeReplyObject(server_cmd(e->rc, "CONFIG SET client-output-buffer-limit %s", limit));
    rjq_client_options o = client_options(e->s.url);
    o.on_event = huge_event;
    o.event_data = x;
    e->c = client_new(e->base, &o);
    ASSERT_OK(rjq_queue_open(e->c, queue, NULL, &e->q));
    wait_connected(e->base, e->c);
}

/* Start a worker and wait until its free slots are registered for pushes. */
static rjq_worker *idle_worker(test_env *e, const char *queue, int concurrency,
                               rjq_handler_fn *handler, void *data) {
    rjq_worker_options wo = quiet_worker_options(concurrency);
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(e->q, &wo, handler, data, &w));
    char key[64];
    snprintf(key, sizeof key, "t:{%s}:idle", queue);
    WAIT_FOR(e->base, server_int(e->rc, "HLEN %s", key) >= 1, 20000);
    ASSERT_EQ(1, server_int(e->rc, "HLEN %s", key));
    return w;
}

/* A job whose payload is too big to push (1 MiB, over the 256 KiB the
 * subscriber connection may hold here) reaches the idle worker as its id
 * alone, and the worker reads the payload itself: the push does not drop
 * the worker's subscriber connection (before: the 1 MiB message went
 * out, Redis closed the connection, and the job waited for the recovery),
 * and the job runs once. */
TEST(payload_too_big_to_push_goes_as_its_id_and_the_worker_reads_it) {
    test_env e;
    huge_ctx x = {.len = 1u << 20, .fill = 'p'};
    push_env_start(&e, "bigpush", &x, "pubsub 256kb 256kb 60");
    idle_worker(&e, "bigpush", 1, huge_handler, &x);
    char *big = malloc(x.len);
    memset(big, x.fill, x.len);
    ASSERT_OK(rjq_enqueue(e.q, big, x.len, NULL, NULL, NULL));
    free(big);
    wait_completed_or_dropped(e.base, &x);
    ASSERT_EQ(0, x.drops[RJQ_CONN_SUBSCRIBER]);
    ASSERT_EQ(0, server_info_number(e.rc, "stats", "client_output_buffer_limit_disconnections:"));
    ASSERT_EQ(1, x.completed);
    ASSERT_EQ(1, x.handled);
    ASSERT_EQ(0, x.bad);
    rjq_stats s = get_stats(e.base, e.q);
    ASSERT_EQ(1, s.completed);
    ASSERT_EQ(0, s.ready + s.active);
    env_stop(&e);
}

enum { MANY_JOBS = 64, MANY_SIZE = 12 << 10 }; /* 768 KiB in all */

/* All of many jobs completed, or the subscriber connection dropped. */
static int many_completed_or_dropped(void *arg) {
    huge_ctx *x = arg;
    return x->completed >= MANY_JOBS || x->drops[RJQ_CONN_SUBSCRIBER];
}

static void many_handler(rjq_job *job, void *data) {
    huge_ctx *x = data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    char c = (char)('a' + atoi(rjq_job_get_id(job) + 1) % 26); /* "m<i>" */
    x->handled++;
    if (len != MANY_SIZE || p[0] != c || p[len - 1] != c) x->bad++;
    ASSERT_OK(rjq_job_complete(job, "ok", 2, on_done_ok, &x->completed));
}

/* Many jobs of pushable size in one enqueue call, to a worker with room
 * for all: one push carries at most 256 KiB of their payloads, the rest go
 * as ids the worker reads. The subscriber connection (which may hold 384
 * KiB here) is not dropped, and each job runs once with its own payload. */
TEST(one_push_carries_a_bounded_amount_of_payloads) {
    test_env e;
    huge_ctx x = {0};
    push_env_start(&e, "manypush", &x, "pubsub 384kb 384kb 60");
    idle_worker(&e, "manypush", MANY_JOBS, many_handler, &x);
    static char payloads[MANY_JOBS][MANY_SIZE];
    static char ids[MANY_JOBS][16];
    static rjq_job_options jo[MANY_JOBS];
    static rjq_enqueue_item items[MANY_JOBS];
    for (int i = 0; i < MANY_JOBS; i++) {
        memset(payloads[i], 'a' + i % 26, MANY_SIZE);
        snprintf(ids[i], sizeof ids[i], "m%d", i);
        jo[i] = (rjq_job_options){.size = sizeof(rjq_job_options), .id = ids[i]};
        items[i] = (rjq_enqueue_item){sizeof(rjq_enqueue_item), payloads[i], MANY_SIZE, &jo[i]};
    }
    ASSERT_OK(rjq_enqueue_batch(e.q, items, MANY_JOBS, NULL, NULL));
    loop_until_cond(e.base, many_completed_or_dropped, &x, 30000);
    ASSERT_EQ(0, x.drops[RJQ_CONN_SUBSCRIBER]);
    ASSERT_EQ(0, server_info_number(e.rc, "stats", "client_output_buffer_limit_disconnections:"));
    ASSERT_EQ(MANY_JOBS, x.completed);
    ASSERT_EQ(MANY_JOBS, x.handled);
    ASSERT_EQ(0, x.bad);
    rjq_stats s = get_stats(e.base, e.q);
    ASSERT_EQ(MANY_JOBS, s.completed);
    ASSERT_EQ(0, s.ready + s.active);
    env_stop(&e);
}
