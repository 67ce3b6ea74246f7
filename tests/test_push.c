/*
 * Push delivery: an idle worker registers its free slots in the queue's
 * idle hash and enqueue hands it new jobs directly (src/push.c, lib.lua
 * push_to_idle). What must hold: pushed jobs run and complete like claimed
 * ones, a worker never runs more than its concurrency, a job pushed to a
 * worker that has no room or is gone goes back to the queue unspent, and a
 * lost subscriber connection loses nothing.
 *
 * No timing assertion: waits are safety nets; workers use a 60 s safety
 * poll so it is never what delivers a job.
 */
#include <strings.h>

#include "core.h" /* white-box: rjq__channel_confirmed */
#include "fixture.h"
#include "harness.h"
#include "rjq_scripts.h"
#include "server.h"
#include "waits.h"

#define HELD_MAX 16

typedef struct held {
    rjq_job *jobs[HELD_MAX];
    long n;        /* held now */
    long most;     /* most held at once */
    long handled;  /* handler calls */
    int concurrency;
    char last_id[64];
    int last_attempt;
} held;

static void hold_handler(rjq_job *job, void *data) {
    held *h = data;
    ASSERT(h->n < HELD_MAX);
    h->jobs[h->n++] = job;
    if (h->n > h->most) h->most = h->n;
    ASSERT(h->n <= h->concurrency);
    h->handled++;
    snprintf(h->last_id, sizeof h->last_id, "%s", rjq_job_get_id(job));
    h->last_attempt = rjq_job_get_attempt(job);
}

/* Complete the oldest held job. */
static void release_one(held *h, long *done) {
    ASSERT(h->n > 0);
    rjq_job *j = h->jobs[0];
    memmove(h->jobs, h->jobs + 1, (size_t)(h->n - 1) * sizeof h->jobs[0]);
    h->n--;
    ASSERT_OK(rjq_job_complete(j, "ok", 2, on_done_ok, done));
}

static rjq_worker *start_worker(rjq_queue *q, int concurrency, held *h) {
    /* quiet: its reclaim sweep would show as claims in claims_run() */
    rjq_worker_options wo = quiet_worker_options(concurrency);
    h->concurrency = concurrency;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, hold_handler, h, &w));
    return w;
}

/* The single registration in queue q's idle hash: its slots (-1 when
 * there is none) and field/epoch when asked for. */
static long registration(redisContext *rc, const char *q, char *field, size_t fsize,
                         long *epoch) {
    redisReply *r = server_cmd(rc, "HGETALL t:{%s}:idle", q);
    long slots = -1;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
        long e = 0;
        if (sscanf(r->element[1]->str, "%ld %ld", &slots, &e) != 2) slots = -1;
        if (epoch) *epoch = e;
        if (field) snprintf(field, fsize, "%s", r->element[0]->str);
    }
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements <= 2);
    freeReplyObject(r);
    return slots;
}

/* 1 when every registration in queue q's idle hash names a push channel
 * that Redis has a subscriber on. (A worker's first claim may register
 * before its subscriber connection has subscribed; a push to a channel
 * without one drops the registration, and the job waits for a claim.) */
static int registrations_subscribed(redisContext *rc, const char *q) {
    redisReply *r = server_cmd(rc, "HKEYS t:{%s}:idle", q);
    int ok = r->type == REDIS_REPLY_ARRAY;
    for (size_t i = 0; ok && i < r->elements; i++) {
        const char *ch = strchr(r->element[i]->str, ' ');
        ok = ch != NULL && server_numsub(rc, ch + 1) >= 1;
    }
    freeReplyObject(r);
    return ok;
}

/* Run the loop until queue q's registration has `slots` slots (and its
 * push channel is subscribed). */
static int wait_registration(struct event_base *base, redisContext *rc, const char *q,
                             long slots) {
    double until = wait_deadline(5000);
    while (!(registration(rc, q, NULL, 0, NULL) == slots && registrations_subscribed(rc, q)))
        if (!wait_step(base, until)) return 0;
    return 1;
}

static void enqueue_id(rjq_queue *q, const char *id) {
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.id = id;
    ASSERT_OK(rjq_enqueue(q, "x", 1, &jo, NULL, NULL));
}

/* The claim script's calls so far: every claim first looks for its
 * token's member of the held index with one ZRANGEBYLEX (a re-sent claim,
 * claim.lua); no enqueue, push, beat or sweep runs one (extend.lua does for
 * claims whose reply is on the way: none here). (Counted by ZRANGEBYSCORE
 * before drain36, whose claim sends none while nothing is delayed.) */
static long long claims_run(redisContext *rc) {
    return server_calls(rc, "zrangebylex");
}

/* The shared environment (test_env) on queue `name`, whose client's worker
 * (held jobs in h) has registered its free slots, and optionally a second
 * client producing to the same queue (pc, pq). */
typedef struct push_env {
    test_env env;
    rjq_client *pc;
    rjq_queue *pq;
    rjq_worker *w;
    held h;
} push_env;

static void push_start(push_env *e, const char *name, int concurrency, int producer) {
    memset(e, 0, sizeof *e);
    env_open(&e->env, NULL, NULL);
    /* liveness off: its beat (every second, beat.lua) runs a ZRANGEBYSCORE
     * too, which claims_run() would count as a claim when the test takes
     * longer than a second (a loaded machine) */
    rjq_client_free(e->env.c);
    rjq_client_options o = client_options(e->env.s.url);
    o.liveness_ms = -1;
    e->env.c = client_new(e->env.base, &o);
    e->env.q = queue_for(e->env.c, name);
    wait_connected(e->env.base, e->env.c);
    if (producer) {
        e->pc = client_for(e->env.base, &e->env.s);
        e->pq = queue_for(e->pc, name);
    }
    e->w = start_worker(e->env.q, concurrency, &e->h);
    wait_worker_started(e->env.base, e->env.c, e->env.q, e->env.rc, name);
    /* its claims found nothing */
    ASSERT(wait_registration(e->env.base, e->env.rc, name, concurrency));
}

static void push_stop(push_env *e) {
    if (e->pc) rjq_client_free(e->pc);
    env_stop(&e->env);
}

/* push_start with a one-slot worker; its registration's field (and epoch). */
static void start_one_slot(push_env *e, const char *q, char *field, size_t n, long *epoch) {
    push_start(e, q, 1, 0);
    ASSERT_EQ(1, registration(e->env.rc, q, field, n, epoch));
}

/* Run the loop until queue q has n ready jobs. */
static int wait_ready(struct event_base *base, redisContext *rc, const char *q, long long n) {
    double until = wait_deadline(5000);
    while (server_int(rc, "LLEN t:{%s}:ready", q) != n)
        if (!wait_step(base, until)) return 0;
    return 1;
}

TEST(idle_worker_gets_new_jobs_pushed_and_offers_freed_slots) {
    push_env e;
    push_start(&e, "push", 3, 0);

    long long claims = claims_run(e.env.rc);
    enqueue_id(e.env.q, "a");
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 1, 5000));
    ASSERT_STREQ("a", e.h.last_id);
    ASSERT_EQ(1, e.h.last_attempt);
    ASSERT_EQ(2, registration(e.env.rc, "push", NULL, 0, NULL)); /* one slot used by the push */
    ASSERT_EQ(claims, claims_run(e.env.rc));                     /* no claim was needed */
    ASSERT_EQ(1, server_active_jobs(e.env.rc, "push"));          /* leased like a claimed job */

    long done = 0;
    release_one(&e.h, &done);
    ASSERT(loop_until_count(e.env.base, &done, 1, 5000));
    ASSERT_EQ(3, registration(e.env.rc, "push", NULL, 0, NULL)); /* offered with the completion */
    ASSERT_EQ(claims, claims_run(e.env.rc));
    info_wait i = get_info(e.env.base, e.env.q, "a");
    ASSERT_OK(i.status);
    ASSERT_STREQ("completed", i.state);

    /* A batch bigger than the free slots: three pushed, the other two
     * claimed as slots free up. */
    rjq_enqueue_item items[5] = {{sizeof(rjq_enqueue_item), "1", 1, NULL}, {sizeof(rjq_enqueue_item), "2", 1, NULL}, {sizeof(rjq_enqueue_item), "3", 1, NULL},
                                 {sizeof(rjq_enqueue_item), "4", 1, NULL}, {sizeof(rjq_enqueue_item), "5", 1, NULL}};
    ASSERT_OK(rjq_enqueue_batch(e.env.q, items, 5, NULL, NULL));
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 4, 5000));
    ASSERT_EQ(3, e.h.n);
    ASSERT_EQ(3, e.h.most);
    for (int k = 0; k < 5; k++) {
        WAIT_FOR(e.env.base, e.h.n > 0, 5000);
        release_one(&e.h, &done);
    }
    ASSERT(loop_until_count(e.env.base, &done, 6, 5000));
    ASSERT_EQ(6, e.h.handled);
    ASSERT_EQ(3, e.h.most);

    ASSERT_OK(rjq_worker_stop(e.w, NULL, NULL));
    /* a stopped worker is no longer offered jobs */
    ASSERT(wait_registration(e.env.base, e.env.rc, "push", -1));

    push_stop(&e);
}

/* Jobs enqueued in bursts while a worker completes them at its own pace:
 * pushes, offers and claims interleave, and the worker never holds more
 * than its concurrency; every job runs once. */
TEST(pushes_and_claims_never_exceed_concurrency) {
    push_env e;
    push_start(&e, "cap", 2, 1);

    const long total = 120;
    long sent = 0, done = 0;
    unsigned seed = 7;
    for (int round = 0; round < 2000 && done < total; round++) {
        seed = seed * 1103515245u + 12345u;
        int burst = (int)(seed >> 16) % 4; /* 0..3 jobs this turn */
        for (int k = 0; k < burst && sent < total; k++) {
            char id[32];
            snprintf(id, sizeof id, "j%ld", ++sent);
            enqueue_id(e.pq, id);
        }
        for (int t = 0; t < 1 + (int)(seed >> 20) % 3; t++) loop_turn(e.env.base);
        if (e.h.n > 0 && (seed >> 8) % 3 != 0) release_one(&e.h, &done);
    }
    /* the rest, one at a time as the worker gets them */
    while (e.h.handled < sent || e.h.n > 0) {
        WAIT_FOR(e.env.base, e.h.n > 0, 10000);
        release_one(&e.h, &done);
    }
    ASSERT(loop_until_count(e.env.base, &done, total, 10000));
    ASSERT_EQ(total, e.h.handled); /* each job once */
    ASSERT(e.h.most <= 2);
    rjq_stats st = get_stats(e.env.base, e.env.q);
    ASSERT_EQ(total, st.completed);
    ASSERT_EQ(0, st.ready);
    ASSERT_EQ(0, st.active);

    push_stop(&e);
}

/* A registration left behind by a worker that has stopped (its HDEL raced
 * a push): the job pushed to it goes back to ready at once, its attempt
 * not spent, and the stale registration is dropped. */
TEST(job_pushed_to_a_stopped_worker_goes_back_unspent) {
    push_env e;
    char field[256];
    start_one_slot(&e, "gone", field, sizeof field, NULL);
    ASSERT_OK(rjq_worker_stop(e.w, NULL, NULL));
    ASSERT(wait_registration(e.env.base, e.env.rc, "gone", -1));

    freeReplyObject(server_cmd(e.env.rc, "HSET t:{gone}:idle %s %s", field, "5 1 30000 2"));
    enqueue_id(e.env.q, "orphan");
    ASSERT(wait_ready(e.env.base, e.env.rc, "gone", 1));
    ASSERT_EQ(0, e.h.handled);
    ASSERT_EQ(0, server_active_jobs(e.env.rc, "gone"));
    ASSERT_EQ(-1, registration(e.env.rc, "gone", NULL, 0, NULL));
    info_wait i = get_info(e.env.base, e.env.q, "orphan");
    ASSERT_OK(i.status);
    ASSERT_STREQ("ready", i.state);
    ASSERT_EQ(0, i.attempts);

    push_stop(&e);
}

/* Redis believes the worker has a free slot it does not have (planted):
 * the job pushed into it is handed back, not run beyond the concurrency,
 * and runs once the worker has room; so does one pushed under an old
 * registration epoch. */
TEST(job_pushed_beyond_free_slots_is_handed_back) {
    push_env e;
    char field[256];
    long epoch = 0;
    start_one_slot(&e, "full", field, sizeof field, &epoch);
    enqueue_id(e.env.q, "first");
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 1, 5000));
    ASSERT_EQ(-1, registration(e.env.rc, "full", NULL, 0, NULL)); /* its only slot is used */

    const char *ids[2] = {"same-epoch", "old-epoch"};
    long epochs[2] = {epoch, epoch - 1};
    long done = 0;
    for (int k = 0; k < 2; k++) {
        char v[64];
        snprintf(v, sizeof v, "1 %ld 30000 2", epochs[k]);
        freeReplyObject(server_cmd(e.env.rc, "HSET t:{full}:idle %s %s", field, v));
        enqueue_id(e.env.q, ids[k]);
        ASSERT(wait_ready(e.env.base, e.env.rc, "full", 1)); /* handed back: the worker is full */
        ASSERT_EQ(1, e.h.n);
        ASSERT_EQ((long)k + 1, e.h.handled);
        ASSERT_EQ(1, server_active_jobs(e.env.rc, "full"));
        release_one(&e.h, &done); /* room again: it claims the job */
        ASSERT(loop_until_count(e.env.base, &e.h.handled, k + 2, 5000));
        ASSERT_STREQ(ids[k], e.h.last_id);
        ASSERT_EQ(1, e.h.last_attempt); /* the push's attempt was given back */
        (void)get_stats(e.env.base, e.env.q); /* a round trip: what its claim made it send is in */
    }
    ASSERT_EQ(1, e.h.most);
    release_one(&e.h, &done);
    ASSERT(loop_until_count(e.env.base, &done, 3, 5000));

    push_stop(&e);
}

/* The subscriber connection of an idle worker's client is killed and a job
 * is enqueued at once by another client: the push finds no subscriber (the
 * registration is dropped, the job stays ready) or lands after the
 * reconnect; either way the worker gets it once it has re-registered. */
TEST(idle_worker_losing_its_subscriber_connection_still_gets_the_job) {
    push_env e;
    push_start(&e, "sub", 2, 1);

    for (int round = 0; round < 3; round++) {
        /* (on a loaded machine the subscriber connections may still be
         * coming up: kill them once they are there) */
        long long killed = 0;
        WAIT_FOR(e.env.base, (killed = server_int(e.env.rc, "CLIENT KILL TYPE pubsub")) >= 1, 5000);
        ASSERT(killed >= 1);
        char id[32];
        snprintf(id, sizeof id, "after-kill-%d", round);
        enqueue_id(e.pq, id);
        ASSERT(loop_until_count(e.env.base, &e.h.handled, round + 1, 10000));
        ASSERT_STREQ(id, e.h.last_id);
        long done = 0;
        release_one(&e.h, &done);
        ASSERT(loop_until_count(e.env.base, &done, 1, 5000));
        ASSERT(wait_registration(e.env.base, e.env.rc, "sub", 2)); /* registered again */
    }
    ASSERT_EQ(3, e.h.handled);

    push_stop(&e);
}

/* Malformed messages on a worker's push channel (a foreign publisher, a
 * client of another version) run nothing and say why; the worker keeps
 * its registration and the next real push still reaches it. */
TEST(malformed_push_message_runs_nothing_and_worker_keeps_working) {
    push_env e;
    push_start(&e, "bad", 2, 0);
    redisReply *r = server_cmd(e.env.rc, "PUBSUB CHANNELS t:{bad}:push:*");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    char ch[128];
    snprintf(ch, sizeof ch, "%s", r->element[0]->str);
    freeReplyObject(r);
    char field[256];
    long epoch = 0;
    ASSERT_EQ(2, registration(e.env.rc, "bad", field, sizeof field, &epoch));
    long wid = atol(field);

    /* Each is refused as a whole (none of its jobs run). All but the first
     * start with this worker's "<worker> <epoch>". */
    const char *bodies[] = {
        NULL,                     /* "garbage" */
        " 1\n1 3 1 1 3\nabcx",    /* no token: the format before tokens per message */
        " 0 tok\n",               /* no jobs */
        " 1 to k\n1 1 1 3\nax",   /* a space in the token */
        " 1 tok\n1 5 1 3\nax",    /* payload cut short */
        " 1 tok\n1 1 1 3\naxy",   /* bytes after the last job */
        " 2 tok\n1 1 1 3\nax",    /* fewer jobs than announced */
        " 1 tok\n0 1 1 3\nx",     /* empty id */
        " 1 tok\n1 - 1 3\nax",    /* bytes after an id whose payload is left out */
        " 1 tok\n1 -1 1 3\nax",   /* a negative length */
        " 1 tok\n2 - 1 3\na",     /* id cut short */
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        char msg[256];
        if (bodies[i]) snprintf(msg, sizeof msg, "%ld %ld%s", wid, epoch, bodies[i]);
        else snprintf(msg, sizeof msg, "garbage");
        ASSERT_EQ(1, server_int(e.env.rc, "PUBLISH %s %s", ch, msg));
    }
    /* Pushed after them on the same connection: once it ran, all of them
     * were read. */
    enqueue_id(e.env.q, "real");
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 1, 5000));
    ASSERT_STREQ("real", e.h.last_id);
    ASSERT_EQ(1, e.h.handled);
    ASSERT(strstr(rjq_client_get_errmsg(e.env.c), "malformed") != NULL);
    ASSERT(strstr(rjq_client_get_errmsg(e.env.c), ch) != NULL);
    ASSERT_EQ(1, registration(e.env.rc, "bad", NULL, 0, NULL)); /* one slot taken by "real" */
    long done = 0;
    release_one(&e.h, &done);
    ASSERT(loop_until_count(e.env.base, &done, 1, 5000));
    info_wait i = get_info(e.env.base, e.env.q, "real");
    ASSERT_STREQ("completed", i.state);

    push_stop(&e);
}

/* A registration in another push format (a worker of an older rjq on the
 * same queue, with no format, or of a newer one): enqueue does not push
 * to it but drops it, so the job is claimed after the doorbell instead of
 * being sent in a format that worker would refuse. */
TEST(registration_of_another_push_format_gets_no_push) {
    push_env e;
    char field[256];
    long epoch = 0;
    start_one_slot(&e, "fmt", field, sizeof field, &epoch);
    const char *formats[] = {"", " 6"}; /* none (an old client), the previous format */
    long done = 0;
    for (int k = 0; k < 2; k++) {
        ASSERT(wait_registration(e.env.base, e.env.rc, "fmt", 1));
        ASSERT_EQ(1, registration(e.env.rc, "fmt", field, sizeof field, &epoch));
        char v[64];
        snprintf(v, sizeof v, "1 %ld 30000%s", epoch, formats[k]);
        freeReplyObject(server_cmd(e.env.rc, "HSET t:{fmt}:idle %s %s", field, v));
        long long claims = claims_run(e.env.rc);
        char id[16];
        snprintf(id, sizeof id, "claimed%d", k);
        enqueue_id(e.env.q, id);
        ASSERT(loop_until_count(e.env.base, &e.h.handled, k + 1, 5000));
        ASSERT_STREQ(id, e.h.last_id);
        ASSERT(claims_run(e.env.rc) > claims); /* claimed, not pushed */
        release_one(&e.h, &done);
        ASSERT(loop_until_count(e.env.base, &done, k + 1, 5000));
    }
    /* registered again in the current format: the next job is pushed */
    ASSERT(wait_registration(e.env.base, e.env.rc, "fmt", 1));
    long long claims = claims_run(e.env.rc);
    enqueue_id(e.env.q, "pushed");
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 3, 5000));
    ASSERT_STREQ("pushed", e.h.last_id);
    ASSERT_EQ(claims, claims_run(e.env.rc));
    release_one(&e.h, &done);
    ASSERT(loop_until_count(e.env.base, &done, 3, 5000));

    push_stop(&e);
}

/* A registration in the previous push format (7: a worker of the previous
 * rjq on the same queue) is still pushed to, in one message that carries
 * its payload (format 8 sends a payload of 2 KiB or more as a message of
 * its own, which a format 7 worker cannot read). Our worker reads both. */
TEST(registration_of_the_previous_push_format_gets_one_message) {
    push_env e;
    char field[256];
    long epoch = 0;
    start_one_slot(&e, "fm7", field, sizeof field, &epoch);
    ASSERT(wait_registration(e.env.base, e.env.rc, "fm7", 1));
    ASSERT_EQ(1, registration(e.env.rc, "fm7", field, sizeof field, &epoch));
    char v[64];
    snprintf(v, sizeof v, "1 %ld 30000 7", epoch);
    freeReplyObject(server_cmd(e.env.rc, "HSET t:{fm7}:idle %s %s", field, v));
    long long claims = claims_run(e.env.rc), pubs = server_calls(e.env.rc, "publish");
    static char big[16384];
    memset(big, 'b', sizeof big);
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.id = "old";
    ASSERT_OK(rjq_enqueue(e.env.q, big, sizeof big, &jo, NULL, NULL));
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 1, 5000));
    ASSERT_STREQ("old", e.h.last_id);
    ASSERT_EQ(claims, claims_run(e.env.rc));                       /* pushed */
    ASSERT_EQ(1, server_calls(e.env.rc, "publish") - pubs);         /* in one message */
    long done = 0;
    release_one(&e.h, &done);
    ASSERT(loop_until_count(e.env.base, &done, 1, 5000));
    push_stop(&e);
}

/* A new job pushed at once to an idle worker has its state written once,
 * active under the push's token: not first "ready 0" and then active
 * (one command less per pushed job). The enqueue's HSETs: the payload and
 * the state (its one slot taken: the registration goes, an HDEL). */
TEST(job_pushed_at_once_has_its_state_written_once) {
    push_env e;
    char field[256];
    long epoch = 0;
    start_one_slot(&e, "once", field, sizeof field, &epoch);
    long long hsets = server_calls(e.env.rc, "hset");
    ASSERT_OK(rjq_enqueue(e.env.q, "x", 1, NULL, NULL, NULL));
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 1, 5000));
    ASSERT_EQ(hsets + 2, server_calls(e.env.rc, "hset"));
    redisReply *r = server_cmd(e.env.rc, "HGET t:{once}:state 1");
    ASSERT(r->type == REDIS_REPLY_STRING && strncmp(r->str, "active 1 ", 9) == 0);
    freeReplyObject(r);
    long done = 0;
    release_one(&e.h, &done);
    ASSERT(loop_until_count(e.env.base, &done, 1, 5000));
    push_stop(&e);
}

/* The commands an awaited job runs (docs/scripts.md: what each script does
 * per job, and why): rjq_enqueue_await to an idle registered worker (the
 * job pushed at once), completed with an empty result (its freed slot
 * offered again), FCALLs included. A command more on this path fails here;
 * a cut lowers these (nsub36: no PUBSUB NUMSUB, the push's PUBLISH reply
 * proves the worker listens: enqueue 12 -> 11). The job goes through the
 * lean pair (enqueue_one.lua, complete_one.lua: docs/scripts.md "The
 * lean pair"), which runs the general scripts' commands (less the
 * enqueue's PUBSUB NUMSUB) with far less Lua: the slow log shows which
 * functions ran. */
#define AWAITED_ENQUEUE_COMMANDS 11
#define AWAITED_COMPLETE_COMMANDS 13
/* completed with a result: one HSET more (the result column's own HSET
 * checks its type: no TYPE before it, floor36) */
#define AWAITED_COMPLETE_WITH_RESULT_COMMANDS 14

static void count_outcome(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)c, (void)o;
    ASSERT_OK(status);
    (*(long *)data)++;
}

/* The server's slow log records every command from here on (its
 * arguments name the function an FCALL runs). */
static void log_every_command(redisContext *rc) {
    freeReplyObject(server_cmd(rc, "CONFIG SET slowlog-log-slower-than 0"));
    freeReplyObject(server_cmd(rc, "CONFIG SET slowlog-max-len 4096"));
    freeReplyObject(server_cmd(rc, "SLOWLOG RESET"));
}

/* How many calls of script s (FCALL of its function) the slow log holds. */
static long fcalls_of(redisContext *rc, int s) {
    redisReply *r = server_cmd(rc, "SLOWLOG GET 4096");
    ASSERT(r->type == REDIS_REPLY_ARRAY);
    long n = 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        ASSERT(e->type == REDIS_REPLY_ARRAY && e->elements >= 4);
        const redisReply *a = e->element[3];
        if (a->type == REDIS_REPLY_ARRAY && a->elements >= 2 &&
            strcasecmp(a->element[0]->str, "fcall") == 0 &&
            strcmp(a->element[1]->str, rjq__scripts[s].function) == 0)
            n++;
    }
    freeReplyObject(r);
    return n;
}

/* The lean pair (docs/scripts.md "The lean pair") ran n times each since
 * the slow log was reset, never the general scripts. */
static void assert_only_the_lean_pair_ran(redisContext *rc, long n) {
    ASSERT_EQ(n, fcalls_of(rc, RJQ__S_ENQUEUE_ONE));
    ASSERT_EQ(0, fcalls_of(rc, RJQ__S_ENQUEUE));
    ASSERT_EQ(n, fcalls_of(rc, RJQ__S_COMPLETE_ONE));
    ASSERT_EQ(0, fcalls_of(rc, RJQ__S_COMPLETE));
}

TEST(awaited_job_runs_its_counted_commands_to_enqueue_and_to_complete) {
    push_env e;
    push_start(&e, "aw", 2, 0);
    log_every_command(e.env.rc);
    long outcomes = 0, done = 0;
    long long enq = 0, cmp = 0, cmp_result = 0;
    /* the second and third are counted (the first subscribes the reply
     * channel); the third is completed with a result */
    for (int k = 0; k < 3; k++) {
        ASSERT(wait_registration(e.env.base, e.env.rc, "aw", 2));
        /* (the handle's first enqueue learns the queue's index fields: the
         * general script, enqueue.c index_of) */
        if (k == 1) freeReplyObject(server_cmd(e.env.rc, "SLOWLOG RESET"));
        long long before = server_commands_run(e.env.rc);
        ASSERT_OK(rjq_enqueue_await(e.env.q, "x", 1, NULL, NULL, count_outcome, &outcomes, NULL));
        ASSERT(loop_until_count(e.env.base, &e.h.handled, k + 1, 5000));
        enq = server_commands_run(e.env.rc) - before;
        ASSERT_EQ(1, e.h.n);
        rjq_job *j = e.h.jobs[0];
        e.h.n = 0;
        before = server_commands_run(e.env.rc);
        if (k == 2) {
            ASSERT_OK(rjq_job_complete(j, "r", 1, on_done_ok, &done));
        } else {
            ASSERT_OK(rjq_job_complete(j, NULL, 0, on_done_ok, &done));
        }
        ASSERT(loop_until_count(e.env.base, &outcomes, k + 1, 5000));
        ASSERT(loop_until_count(e.env.base, &done, k + 1, 5000));
        if (k == 2) {
            cmp_result = server_commands_run(e.env.rc) - before;
        } else {
            cmp = server_commands_run(e.env.rc) - before;
        }
    }
    printf("commands per awaited job: enqueue %lld, complete %lld (with a result %lld)\n", enq, cmp,
           cmp_result);
    ASSERT_EQ(AWAITED_ENQUEUE_COMMANDS, enq);
    ASSERT_EQ(AWAITED_COMPLETE_COMMANDS, cmp);
    ASSERT_EQ(AWAITED_COMPLETE_WITH_RESULT_COMMANDS, cmp_result);
    ASSERT_EQ(2, registration(e.env.rc, "aw", NULL, 0, NULL)); /* the slot offered again */
    /* the lean pair ran (docs/scripts.md "The lean pair"), never the general scripts */
    assert_only_the_lean_pair_ran(e.env.rc, 2);
    push_stop(&e);
}

/* The lean enqueue keeps its parse of a registration between calls
 * (lib.lua reg_field, reg_value: keyed by the field's and the value's
 * whole text), so a value rewritten under the same field is read as it is
 * now: a worker pushed to by the lean enqueue (its field and value
 * parsed), then its registration rewritten in a push format it cannot
 * take under the same field: the next anonymous job, a lean enqueue too,
 * is left ready and claimed, not pushed. */
TEST(lean_enqueue_reads_a_registration_rewritten_under_the_same_field) {
    push_env e;
    char field[256], again[256];
    long epoch = 0;
    start_one_slot(&e, "lmemo", field, sizeof field, &epoch);
    log_every_command(e.env.rc);
    long done = 0;
    /* (the handle's first enqueue learns the queue's index fields: the
     * general script; the second is the lean one) */
    for (int k = 0; k < 2; k++) {
        ASSERT(wait_registration(e.env.base, e.env.rc, "lmemo", 1));
        freeReplyObject(server_cmd(e.env.rc, "SLOWLOG RESET"));
        long long claims = claims_run(e.env.rc);
        ASSERT_OK(rjq_enqueue(e.env.q, "x", 1, NULL, NULL, NULL));
        ASSERT(loop_until_count(e.env.base, &e.h.handled, k + 1, 5000));
        ASSERT_EQ(claims, claims_run(e.env.rc)); /* pushed */
        release_one(&e.h, &done);
        ASSERT(loop_until_count(e.env.base, &done, k + 1, 5000));
    }
    ASSERT_EQ(1, fcalls_of(e.env.rc, RJQ__S_ENQUEUE_ONE));
    ASSERT(wait_registration(e.env.base, e.env.rc, "lmemo", 1));
    ASSERT_EQ(1, registration(e.env.rc, "lmemo", again, sizeof again, &epoch));
    ASSERT_STREQ(field, again); /* the field the lean enqueue parsed */
    char v[64];
    snprintf(v, sizeof v, "1 %ld 30000 6", epoch);
    freeReplyObject(server_cmd(e.env.rc, "HSET t:{lmemo}:idle %s %s", field, v));
    freeReplyObject(server_cmd(e.env.rc, "SLOWLOG RESET"));
    long long claims = claims_run(e.env.rc);
    long long rpushes = server_calls(e.env.rc, "rpush");
    ASSERT_OK(rjq_enqueue(e.env.q, "y", 1, NULL, NULL, NULL));
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 3, 5000));
    ASSERT_EQ(1, fcalls_of(e.env.rc, RJQ__S_ENQUEUE_ONE));
    /* not pushed: left ready (its RPUSH) and claimed */
    ASSERT_EQ(1, server_calls(e.env.rc, "rpush") - rpushes);
    ASSERT(claims_run(e.env.rc) > claims);
    release_one(&e.h, &done);
    ASSERT(loop_until_count(e.env.base, &done, 3, 5000));
    push_stop(&e);
}

/* The lease set holds its pin (the +inf member that keeps it a skiplist)
 * beside each lean push's lease, and again when the set is made again:
 * the queue's keys deleted (its job numbers start again) and the next
 * pushed job's lease set holds the pin. Guards a pin written once per
 * set instead of with every lease (lean36b built one keyed by the job
 * number of the call that wrote it and left it: bench/README.md "The lean
 * pair's last Lua"); fails if such a pin is remembered by the set's name
 * alone. */
TEST(lean_enqueue_pins_a_lease_set_made_again_after_the_queues_keys_went) {
    push_env e;
    char field[256];
    long epoch = 0;
    start_one_slot(&e, "lpin", field, sizeof field, &epoch);
    log_every_command(e.env.rc);
    long done = 0;
    /* (the handle's first enqueue learns the queue's index fields: the
     * general script; the next ones are lean) */
    for (int k = 0; k < 3; k++) {
        ASSERT(wait_registration(e.env.base, e.env.rc, "lpin", 1));
        ASSERT_OK(rjq_enqueue(e.env.q, "x", 1, NULL, NULL, NULL));
        ASSERT(loop_until_count(e.env.base, &e.h.handled, k + 1, 5000));
        /* the job's lease and the pin */
        ASSERT_EQ(2, server_int(e.env.rc, "ZCARD t:{lpin}:active"));
        ASSERT_EQ(1, server_int(e.env.rc, "ZCOUNT t:{lpin}:active +inf +inf"));
        release_one(&e.h, &done);
        ASSERT(loop_until_count(e.env.base, &done, k + 1, 5000));
    }
    ASSERT_EQ(2, fcalls_of(e.env.rc, RJQ__S_ENQUEUE_ONE));
    ASSERT_EQ(1, server_int(e.env.rc, "ZCARD t:{lpin}:active"));
    ASSERT(wait_registration(e.env.base, e.env.rc, "lpin", 1));
    /* the queue's job keys gone (not its registration): job numbers
     * start again from 1 */
    freeReplyObject(server_cmd(e.env.rc,
                               "DEL t:{lpin}:active t:{lpin}:stats t:{lpin}:payload "
                               "t:{lpin}:state t:{lpin}:result t:{lpin}:completed"));
    ASSERT_OK(rjq_enqueue(e.env.q, "y", 1, NULL, NULL, NULL));
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 4, 5000));
    ASSERT_EQ(3, fcalls_of(e.env.rc, RJQ__S_ENQUEUE_ONE));
    ASSERT_STREQ("1", e.h.last_id);
    ASSERT_EQ(2, server_int(e.env.rc, "ZCARD t:{lpin}:active"));
    ASSERT_EQ(1, server_int(e.env.rc, "ZCOUNT t:{lpin}:active +inf +inf"));
    release_one(&e.h, &done);
    ASSERT(loop_until_count(e.env.base, &done, 4, 5000));
    ASSERT_EQ(1, server_int(e.env.rc, "ZCARD t:{lpin}:active"));
    push_stop(&e);
}

/* Where the lean pair does not apply, the general scripts run: a bounded
 * queue's enqueue (the client knows), and the completions of a queue
 * with run-time limits (complete_one.lua answers -1 with nothing written:
 * the completion goes again to complete.lua, and the queue's next ones go
 * there at once for a while). The jobs complete all the same, their
 * producers told. */
TEST(lean_pair_not_taken_for_a_bounded_queue_nor_by_completions_of_a_queue_with_timeouts) {
    push_env e;
    push_start(&e, "nl", 2, 0);
    log_every_command(e.env.rc);
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.max_waiting = 100;
    rjq_queue *bq;
    ASSERT_OK(rjq_queue_open(e.env.c, "nl", &qo, &bq));
    long outcomes = 0, done = 0;
    /* (each handle's first enqueue learns the queue's index fields: the
     * general script, enqueue.c index_of) */
    ASSERT_OK(rjq_enqueue(bq, "w", 1, NULL, NULL, NULL));
    ASSERT_OK(rjq_enqueue(e.env.q, "w", 1, NULL, NULL, NULL));
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 2, 5000));
    release_one(&e.h, &done);
    release_one(&e.h, &done);
    ASSERT(loop_until_count(e.env.base, &done, 2, 5000));
    ASSERT(wait_registration(e.env.base, e.env.rc, "nl", 2));
    freeReplyObject(server_cmd(e.env.rc, "SLOWLOG RESET"));
    ASSERT_OK(rjq_enqueue_await(bq, "b", 1, NULL, NULL, count_outcome, &outcomes, NULL));
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 3, 5000));
    ASSERT_EQ(1, fcalls_of(e.env.rc, RJQ__S_ENQUEUE));
    ASSERT_EQ(0, fcalls_of(e.env.rc, RJQ__S_ENQUEUE_ONE));
    /* a job with a timeout running: the queue has deadlines */
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.timeout_ms = 600000;
    ASSERT_OK(rjq_enqueue_await(e.env.q, "t", 1, &jo, NULL, count_outcome, &outcomes, NULL));
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 4, 5000));
    ASSERT_EQ(1, server_int(e.env.rc, "EXISTS t:{nl}:deadlines"));
    release_one(&e.h, &done); /* b: lean call answered -1, then complete.lua */
    ASSERT(loop_until_count(e.env.base, &outcomes, 1, 5000));
    ASSERT(loop_until_count(e.env.base, &done, 3, 5000));
    ASSERT_EQ(1, fcalls_of(e.env.rc, RJQ__S_COMPLETE_ONE));
    ASSERT_EQ(1, fcalls_of(e.env.rc, RJQ__S_COMPLETE));
    release_one(&e.h, &done); /* t: to complete.lua at once */
    ASSERT(loop_until_count(e.env.base, &outcomes, 2, 5000));
    ASSERT(loop_until_count(e.env.base, &done, 4, 5000));
    ASSERT_EQ(1, fcalls_of(e.env.rc, RJQ__S_COMPLETE_ONE));
    ASSERT_EQ(2, fcalls_of(e.env.rc, RJQ__S_COMPLETE));
    ASSERT_EQ(4, server_int(e.env.rc, "HGET t:{nl}:stats retained"));
    push_stop(&e);
}

/* npush36: the general enqueue's push (enqueue.lua: a bounded queue's job,
 * a batch, a job with an id, a priority job; since gpushundo a group
 * enqueue's, genqueue.lua) asks no PUBSUB NUMSUB: each
 * message's PUBLISH reply is the proof its worker listens (a message heard
 * by nobody is undone: test_recovery
 * general_push_heard_by_nobody_is_undone_for_batches_ids_and_priorities).
 * Every job here is pushed at once; commandstats counts no PUBSUB NUMSUB,
 * and the bounded queue's awaited job runs its counted enqueue commands
 * (GENERAL_AWAITED_ENQUEUE_COMMANDS: 17 with NUMSUB; a bounded queue
 * reads its waiting count too). */
#define GENERAL_AWAITED_ENQUEUE_COMMANDS 16
TEST(general_enqueue_push_asks_no_pubsub_numsub) {
    push_env e;
    push_start(&e, "gn", 4, 0);
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.max_waiting = 100;
    rjq_queue *bq;
    ASSERT_OK(rjq_queue_open(e.env.c, "gn", &qo, &bq));
    long outcomes = 0, done = 0;
    /* (each handle's first enqueue learns the queue's index fields, and
     * the first await subscribes its reply channel) */
    ASSERT_OK(rjq_enqueue_await(bq, "w", 1, NULL, NULL, count_outcome, &outcomes, NULL));
    ASSERT_OK(rjq_enqueue(e.env.q, "w", 1, NULL, NULL, NULL));
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 2, 5000));
    release_one(&e.h, &done);
    release_one(&e.h, &done);
    ASSERT(loop_until_count(e.env.base, &done, 2, 5000));
    ASSERT(wait_registration(e.env.base, e.env.rc, "gn", 4));
    long long numsub = server_calls(e.env.rc, "pubsub|numsub");
    long long before = server_commands_run(e.env.rc);
    ASSERT_OK(rjq_enqueue_await(bq, "b", 1, NULL, NULL, count_outcome, &outcomes, NULL));
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 3, 5000));
    long long enq = server_commands_run(e.env.rc) - before;
    printf("a bounded queue's awaited job (enqueue.lua, pushed): %lld enqueue commands\n", enq);
    ASSERT_EQ(GENERAL_AWAITED_ENQUEUE_COMMANDS, enq);
    ASSERT_EQ(numsub, server_calls(e.env.rc, "pubsub|numsub"));
    release_one(&e.h, &done);
    ASSERT(loop_until_count(e.env.base, &done, 3, 5000));
    ASSERT(wait_registration(e.env.base, e.env.rc, "gn", 4));
    /* a batch of three: one message (wait_registration asks NUMSUB itself:
     * counted from after it) */
    numsub = server_calls(e.env.rc, "pubsub|numsub");
    rjq_enqueue_item items[3] = {{sizeof(rjq_enqueue_item), "1", 1, NULL},
                                 {sizeof(rjq_enqueue_item), "2", 1, NULL},
                                 {sizeof(rjq_enqueue_item), "3", 1, NULL}};
    ASSERT_OK(rjq_enqueue_batch(e.env.q, items, 3, NULL, NULL));
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 6, 5000));
    ASSERT_EQ(numsub, server_calls(e.env.rc, "pubsub|numsub"));
    for (int i = 0; i < 3; i++) release_one(&e.h, &done);
    ASSERT(loop_until_count(e.env.base, &done, 6, 5000));
    ASSERT(wait_registration(e.env.base, e.env.rc, "gn", 4));
    /* a job with an id, a priority job */
    numsub = server_calls(e.env.rc, "pubsub|numsub");
    enqueue_id(e.env.q, "named");
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 7, 5000));
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.priority = 3;
    ASSERT_OK(rjq_enqueue(e.env.q, "p", 1, &jo, NULL, NULL));
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 8, 5000));
    ASSERT_EQ(numsub, server_calls(e.env.rc, "pubsub|numsub"));
    while (e.h.n > 0) release_one(&e.h, &done);
    ASSERT(loop_until_count(e.env.base, &done, 8, 5000));
    ASSERT(wait_registration(e.env.base, e.env.rc, "gn", 4));
    /* gpushundo: a group enqueue (genqueue.lua, GROUPS.take's push) asks
     * none either (a message heard by nobody is undone: test_recovery
     * group_push_heard_by_nobody_is_undone_within_the_groups_limits) */
    numsub = server_calls(e.env.rc, "pubsub|numsub");
    rjq_job_options go = RJQ_JOB_OPTIONS_INIT;
    go.group = "ga";
    ASSERT_OK(rjq_enqueue(e.env.q, "g1", 2, &go, NULL, NULL));
    go.group = "gb";
    ASSERT_OK(rjq_enqueue(e.env.q, "g2", 2, &go, NULL, NULL));
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 10, 5000));
    ASSERT_EQ(numsub, server_calls(e.env.rc, "pubsub|numsub"));
    ASSERT_EQ(0, server_int(e.env.rc, "ZCARD t:{gn}:g:depth"));
    while (e.h.n > 0) release_one(&e.h, &done);
    ASSERT(loop_until_count(e.env.base, &done, 10, 5000));
    ASSERT_EQ(0, server_active_jobs(e.env.rc, "gn"));
    push_stop(&e);
}

static void on_cancelled(rjq_client *c, int status, const char *state, void *data) {
    (void)c;
    ASSERT_OK(status);
    ASSERT(state != NULL && strcmp(state, "ready") == 0);
    (*(long *)data)++;
}

static void on_cancel_outcome(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)c, (void)o;
    ASSERT_EQ(RJQ_EJOBCANCELED, status);
    (*(long *)data)++;
}

/* A job the lean enqueue wrote is any other job to the other scripts: no
 * idle worker, so it waits ready with enqueue.lua's state and watchers;
 * an await by id registers on it, a cancel takes it off the queue, and
 * both its awaits end cancelled. (Reclaim after a lease runs out, and
 * retries, run on lean jobs throughout test_recovery and test_retry.) */
TEST(job_written_by_the_lean_enqueue_is_awaited_by_id_and_cancelled) {
    test_env e;
    env_start(&e, "lc");
    log_every_command(e.rc);
    long ended = 0, cancelled = 0;
    /* (the handle's first enqueue learns the queue's index fields: the
     * general script, enqueue.c index_of) */
    ASSERT_OK(rjq_enqueue(e.q, "first", 5, NULL, NULL, NULL));
    ASSERT(loop_until_server_int(e.base, e.rc, 1, 5000, "LLEN t:{lc}:ready"));
    ASSERT_OK(rjq_enqueue_await(e.q, "p", 1, NULL, NULL, on_cancel_outcome, &ended, NULL));
    ASSERT(loop_until_server_int(e.base, e.rc, 2, 5000, "LLEN t:{lc}:ready"));
    ASSERT_EQ(1, fcalls_of(e.rc, RJQ__S_ENQUEUE_ONE));
    redisReply *r = server_cmd(e.rc, "LINDEX t:{lc}:ready 1");
    ASSERT(r->type == REDIS_REPLY_STRING);
    char id[32];
    snprintf(id, sizeof id, "%s", r->str);
    freeReplyObject(r);
    r = server_cmd(e.rc, "HGET t:{lc}:state %s", id);
    ASSERT(r->type == REDIS_REPLY_STRING && strncmp(r->str, "ready 0 @", 9) == 0 &&
           r->str[r->len - 1] == ',' && r->str[r->len - 2] == ',');
    freeReplyObject(r);
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{lc}:watchers %s", id));
    ASSERT_OK(rjq_queue_await(e.q, id, NULL, on_cancel_outcome, &ended, NULL));
    ASSERT_OK(rjq_queue_cancel(e.q, id, on_cancelled, &cancelled));
    ASSERT(loop_until_count(e.base, &cancelled, 1, 5000));
    ASSERT(loop_until_count(e.base, &ended, 2, 5000));
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{lc}:ready"));
    env_stop(&e);
}

/* PUBLISH msg (len bytes) on ch, heard by one subscriber. */
static void publish_bytes(redisContext *rc, const char *ch, const char *msg, size_t len) {
    redisReply *r = redisCommand(rc, "PUBLISH %s %b", ch, msg, len);
    ASSERT(r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1);
    freeReplyObject(r);
}

/* An unconfirmed push (" ?" after its deadline: one whose delivery the
 * server could not count on, e.g. decided by a publish's receiver count,
 * which is node-local) is lease-checked by the worker before it starts:
 * a job whose state the server holds under another token, or that has no
 * state, is not run, and nothing of it changes; the jobs it does hold run
 * with their pushed payload, or with the payload read after the check
 * (left out of the message), and complete under the push's token. The
 * messages are made here as a server that trusted a count would send
 * them, with this worker's registration. */
TEST(unconfirmed_push_runs_only_jobs_whose_token_the_server_holds) {
    push_env e;
    push_start(&e, "lease", 2, 0);
    redisReply *r = server_cmd(e.env.rc, "PUBSUB CHANNELS t:{lease}:push:*");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    char ch[128];
    snprintf(ch, sizeof ch, "%s", r->element[0]->str);
    freeReplyObject(r);
    char field[256];
    long epoch = 0;
    ASSERT_EQ(2, registration(e.env.rc, "lease", field, sizeof field, &epoch));
    long wid = atol(field);
    const char *cid = strrchr(ch, ':') + 1; /* the client's id ends its push channel */
    char stale[96], mine[96], other[96];
    snprintf(stale, sizeof stale, "%s.%ld.stale1", cid, wid);
    snprintf(mine, sizeof mine, "%s.%ld.mine1", cid, wid);
    snprintf(other, sizeof other, "%s.%ld.other1", cid, wid);
    long long deadline = (long long)time(NULL) * 1000 + 600000;

    /* "taken": held under another token; "ghost": no record; "mine" and
     * "big": held under the push's token (as start_jobs writes them, one
     * with its times, one without) */
    freeReplyObject(server_cmd(e.env.rc, "HSET t:{lease}:payload taken x mine m big bigpayload"));
    char v[160];
    snprintf(v, sizeof v, "active 1 %s", other);
    freeReplyObject(server_cmd(e.env.rc, "HSET t:{lease}:state taken %s", v));
    snprintf(v, sizeof v, "active 1 %s @%lld,%lld,", mine, deadline - 600000, deadline - 600000);
    freeReplyObject(server_cmd(e.env.rc, "HSET t:{lease}:state mine %s", v));
    snprintf(v, sizeof v, "active 1 %s", mine);
    freeReplyObject(server_cmd(e.env.rc, "HSET t:{lease}:state big %s", v));
    freeReplyObject(server_cmd(e.env.rc, "ZADD t:{lease}:active %lld taken %lld mine %lld big",
                               deadline, deadline, deadline));
    char held_taken[160];
    snprintf(held_taken, sizeof held_taken, "active 1 %s", other);

    /* both published before the loop reads either: the stale one's check
     * is sent first, so it is answered before the held one's */
    char msg[256];
    int len = snprintf(msg, sizeof msg, "%ld %ld 2 %s %lld ?\n5 1 1 3 -\ntakenx5 1 1 3 -\nghosty", wid,
                       epoch, stale, deadline);
    publish_bytes(e.env.rc, ch, msg, (size_t)len);
    len = snprintf(msg, sizeof msg, "%ld %ld 2 %s %lld ?\n4 1 1 3 -\nminem3 - 1 3 -\nbig", wid, epoch,
                   mine, deadline);
    publish_bytes(e.env.rc, ch, msg, (size_t)len);

    ASSERT(loop_until_count(e.env.base, &e.h.handled, 2, 10000));
    (void)get_stats(e.env.base, e.env.q); /* a round trip more: nothing else comes */
    ASSERT_EQ(2, e.h.handled);
    ASSERT_STREQ("mine", rjq_job_get_id(e.h.jobs[0]));
    ASSERT_STREQ("big", rjq_job_get_id(e.h.jobs[1]));
    size_t plen = 0;
    const char *pay = rjq_job_get_payload(e.h.jobs[1], &plen);
    ASSERT(plen == 10 && memcmp(pay, "bigpayload", 10) == 0); /* read after the check */
    ASSERT_EQ(1, rjq_job_get_attempt(e.h.jobs[0]));
    r = server_cmd(e.env.rc, "HGET t:{lease}:state taken");
    ASSERT(r->type == REDIS_REPLY_STRING);
    ASSERT_STREQ(held_taken, r->str); /* untouched */
    freeReplyObject(r);

    long done = 0;
    release_one(&e.h, &done);
    release_one(&e.h, &done);
    ASSERT(loop_until_count(e.env.base, &done, 2, 5000)); /* on_done_ok: completed, token held */
    info_wait i = get_info(e.env.base, e.env.q, "mine");
    ASSERT_STREQ("completed", i.state);
    i = get_info(e.env.base, e.env.q, "big");
    ASSERT_STREQ("completed", i.state);

    push_stop(&e);
}

/* Two handles of one queue in one client, each with a worker: they share
 * the client's push channel. Each pushed (or claimed) job runs once, on
 * one of them, and their fencing tokens differ (the registrations' ids
 * used to be counted per handle: both workers were "1", each took every
 * push meant for "1", and their tokens collided). */
static int runs[40];
static long completed_ok;

static void on_completed(rjq_client *c, int status, void *data) {
    (void)c, (void)data;
    if (status == RJQ_OK) completed_ok++;
}

static void run_once_handler(rjq_job *job, void *data) {
    (void)data;
    int i = atoi(rjq_job_get_id(job) + 1); /* "j<i>" */
    ASSERT(i >= 0 && i < 40);
    runs[i]++;
    ASSERT_OK(rjq_job_complete(job, "", 0, on_completed, NULL));
}

TEST(two_handles_of_one_queue_in_one_client_run_each_job_once) {
    test_env e;
    env_start(&e, NULL);
    rjq_client_options o = client_options(e.s.url);
    rjq_client *w = client_new(e.base, &o);
    wait_connected(e.base, w);
    rjq_worker *w1, *w2;
    rjq_worker_options wo = quiet_worker_options(3);
    ASSERT_OK(rjq_worker_start(queue_for(w, "twice"), &wo, run_once_handler, NULL, &w1));
    ASSERT_OK(rjq_worker_start(queue_for(w, "twice"), &wo, run_once_handler, NULL, &w2));
    /* both idle and registered: the jobs are pushed */
    WAIT_FOR(e.base, server_int(e.rc, "HLEN t:{twice}:idle") >= 2, 5000);
    wait_worker_started(e.base, w, queue_for(w, "twice"), e.rc, "twice");
    rjq_queue *q = queue_for(e.c, "twice");
    char id[16];
    for (int i = 0; i < 40; i++) {
        snprintf(id, sizeof id, "j%d", i);
        enqueue_x_ok(e.base, q, id, 0, 0);
    }
    WAIT_FOR(e.base, completed_ok >= 40, 10000);
    /* a second run would show now: every push published so far has come
     * to w, and every claim it sent is answered */
    subscriber_barrier(e.base, w, e.rc);
    (void)get_stats(e.base, queue_for(w, "twice"));
    for (int i = 0; i < 40; i++) ASSERT_EQ(1, runs[i]);
    ASSERT_EQ(40, completed_ok);
    rjq_stats st = get_stats(e.base, q);
    ASSERT_EQ(40, st.completed);
    ASSERT_EQ(0, st.ready + st.active + st.delayed);
    rjq_client_free(w);
    env_stop(&e);
}

/* ---- queue format 2 (docs/scripts.md "Queue format 2") ---------------------------- */

/* Set q's format (rjq_queue_set_format) and wait: the callback's status, n
 * in *n. */
static int set_format(struct event_base *base, rjq_queue *q, int format, long long *n) {
    count_wait w = {0};
    ASSERT_OK(rjq_queue_set_format(q, format, on_count, &w));
    WAIT_FOR(base, w.done >= 1, 5000);
    if (n) *n = w.n;
    return w.status;
}

/* Push env e's queue name to format 2 and have its handle learn it: a
 * first awaited job through the general script (the handle's first
 * enqueue learns the index and the format: enqueue.c learn), completed. */
static void format2_start(push_env *e, const char *name, int concurrency, long *outcomes) {
    push_start(e, name, concurrency, 0);
    long long n = 0;
    ASSERT_OK(set_format(e->env.base, e->env.q, 2, &n));
    ASSERT_EQ(1, n);
    long done = 0;
    ASSERT_OK(rjq_enqueue_await(e->env.q, "x", 1, NULL, NULL, count_outcome, outcomes, NULL));
    ASSERT(loop_until_count(e->env.base, &e->h.handled, 1, 5000));
    release_one(&e->h, &done);
    ASSERT(loop_until_count(e->env.base, outcomes, 1, 5000));
    ASSERT(wait_registration(e->env.base, e->env.rc, name, concurrency));
}

/* 1 when queue q's one registration carries the queue-format mark " 2"
 * (lib.lua registration()). */
static int registration_marked(redisContext *rc, const char *q) {
    redisReply *r = server_cmd(rc, "HVALS t:{%s}:idle", q);
    int marked = 0;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 1) {
        size_t n = strlen(r->element[0]->str);
        marked = n > 2 && strcmp(r->element[0]->str + n - 2, " 2") == 0;
    }
    freeReplyObject(r);
    return marked;
}

/* Job id's state value of queue q (into v); 1 when it ends with an
 * awaiting producer's reply channel (format 2), 0 when not. */
static int state_holds_channel(redisContext *rc, const char *q, const char *id, char *v, size_t n) {
    redisReply *r = server_cmd(rc, "HGET t:{%s}:state %s", q, id);
    ASSERT(r->type == REDIS_REPLY_STRING);
    snprintf(v, n, "%s", r->str);
    int holds = strstr(r->str, ":reply:") != NULL && strstr(r->str, "framed") != NULL;
    freeReplyObject(r);
    return holds;
}

/* An awaited job pushed at once on a format-2 queue runs a different
 * path: enqueue_one.lua writes no watchers (the channel ends the state:
 * "active 1 <token> @<t>,<t>, <channel>"), complete_one.lua reads no
 * watchers and deletes none. Pinned like
 * awaited_job_runs_its_counted_commands_to_enqueue_and_to_complete's
 * (format 1 keeps those): the first enqueue 11 (-1 HSET watchers, +1 HGET
 * meta: its worker's registration is not marked yet; nsub36: -1 PUBSUB
 * NUMSUB, from 12), the next 10 (the
 * completion marked the registration " 2": no HGET meta), complete 11
 * (-HMGET, -HDEL watchers), 12 with a result. */
#define FORMAT2_FIRST_ENQUEUE_COMMANDS 11
#define FORMAT2_ENQUEUE_COMMANDS 10
#define FORMAT2_COMPLETE_COMMANDS 11
#define FORMAT2_COMPLETE_WITH_RESULT_COMMANDS 12

TEST(format2_awaited_job_keeps_its_reply_channel_in_its_state_and_runs_its_counted_commands) {
    push_env e;
    long outcomes = 0, done = 0;
    format2_start(&e, "f2", 2, &outcomes);
    log_every_command(e.env.rc);
    long long enq1 = 0, enq = 0, cmp = 0, cmp_result = 0;
    for (int k = 1; k < 3; k++) {
        ASSERT(wait_registration(e.env.base, e.env.rc, "f2", 2));
        /* marked only once a job whose state held its channel completed */
        ASSERT_EQ(k == 2, registration_marked(e.env.rc, "f2"));
        long long before = server_commands_run(e.env.rc);
        ASSERT_OK(rjq_enqueue_await(e.env.q, "x", 1, NULL, NULL, count_outcome, &outcomes, NULL));
        ASSERT(loop_until_count(e.env.base, &e.h.handled, k + 1, 5000));
        if (k == 1) enq1 = server_commands_run(e.env.rc) - before;
        else enq = server_commands_run(e.env.rc) - before;
        char v[512];
        ASSERT(state_holds_channel(e.env.rc, "f2", e.h.last_id, v, sizeof v));
        ASSERT(strncmp(v, "active 1 ", 9) == 0);
        ASSERT_EQ(0, server_int(e.env.rc, "HEXISTS t:{f2}:watchers %s", e.h.last_id));
        rjq_job *j = e.h.jobs[0];
        e.h.n = 0;
        before = server_commands_run(e.env.rc);
        if (k == 2) ASSERT_OK(rjq_job_complete(j, "r", 1, on_done_ok, &done));
        else ASSERT_OK(rjq_job_complete(j, NULL, 0, on_done_ok, &done));
        ASSERT(loop_until_count(e.env.base, &outcomes, k + 1, 5000));
        ASSERT(loop_until_count(e.env.base, &done, k, 5000));
        if (k == 2) cmp_result = server_commands_run(e.env.rc) - before;
        else cmp = server_commands_run(e.env.rc) - before;
        /* completed: its state without the channel, nothing in watchers */
        ASSERT(!state_holds_channel(e.env.rc, "f2", e.h.last_id, v, sizeof v));
        ASSERT(strncmp(v, "completed 1 ", 12) == 0);
        ASSERT_EQ(0, server_int(e.env.rc, "HEXISTS t:{f2}:watchers %s", e.h.last_id));
    }
    printf("format 2, commands per awaited job: enqueue %lld (the first %lld), complete %lld "
           "(with a result %lld)\n", enq, enq1, cmp, cmp_result);
    ASSERT_EQ(FORMAT2_FIRST_ENQUEUE_COMMANDS, enq1);
    ASSERT_EQ(FORMAT2_ENQUEUE_COMMANDS, enq);
    ASSERT_EQ(FORMAT2_COMPLETE_COMMANDS, cmp);
    ASSERT_EQ(FORMAT2_COMPLETE_WITH_RESULT_COMMANDS, cmp_result);
    assert_only_the_lean_pair_ran(e.env.rc, 2);
    push_stop(&e);
}

/* The format is the operator's (rjq_queue_set_format): 2 is set once; back
 * to 1 is refused while a job is active (its state may hold a channel),
 * nothing changed, and allowed once none is; 1 and 2 only. */
TEST(queue_format_goes_back_to_1_only_while_no_job_is_active) {
    push_env e;
    long outcomes = 0, done = 0;
    format2_start(&e, "fb", 1, &outcomes);
    long long n = -1;
    ASSERT_OK(set_format(e.env.base, e.env.q, 2, &n));
    ASSERT_EQ(0, n); /* already */
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_set_format(e.env.q, 3, on_count, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_set_format(e.env.q, 0, on_count, NULL));
    ASSERT_OK(rjq_enqueue_await(e.env.q, "x", 1, NULL, NULL, count_outcome, &outcomes, NULL));
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 2, 5000));
    ASSERT_EQ(RJQ_ESTATE, set_format(e.env.base, e.env.q, 1, NULL));
    redisReply *r = server_cmd(e.env.rc, "HGET t:{fb}:meta format");
    ASSERT(r->type == REDIS_REPLY_STRING && strcmp(r->str, "2") == 0);
    freeReplyObject(r);
    release_one(&e.h, &done);
    ASSERT(loop_until_count(e.env.base, &outcomes, 2, 5000));
    ASSERT(loop_until_count(e.env.base, &done, 1, 5000));
    ASSERT_OK(set_format(e.env.base, e.env.q, 1, &n));
    ASSERT_EQ(1, n);
    ASSERT_EQ(0, server_int(e.env.rc, "HEXISTS t:{fb}:meta format"));
    push_stop(&e);
}

/* A client that learnt format 2 while the queue was set back to 1 (its
 * next read of the format is up to RJQ_INDEX_RELEARN_MS away) writes
 * format 1: the set-back strips the worker's registration of its " 2"
 * mark (which would tell enqueue_one.lua the queue is format 2 without a
 * read), and enqueue_one.lua reads meta before it writes the channel
 * anywhere but the watchers column. */
TEST(format2_client_writes_format_1_once_the_queue_is_set_back) {
    push_env e;
    long outcomes = 0, done = 0;
    format2_start(&e, "fs", 1, &outcomes);
    /* a completed format-2 job marks its worker's registration */
    ASSERT_OK(rjq_enqueue_await(e.env.q, "x", 1, NULL, NULL, count_outcome, &outcomes, NULL));
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 2, 5000));
    rjq_job *j = e.h.jobs[0];
    e.h.n = 0;
    ASSERT_OK(rjq_job_complete(j, NULL, 0, on_done_ok, &done));
    ASSERT(loop_until_count(e.env.base, &outcomes, 2, 5000));
    ASSERT(loop_until_count(e.env.base, &done, 1, 5000));
    ASSERT(wait_registration(e.env.base, e.env.rc, "fs", 1));
    ASSERT(registration_marked(e.env.rc, "fs"));
    long long n = -1;
    ASSERT_OK(set_format(e.env.base, e.env.q, 1, &n)); /* (no job active) */
    ASSERT_EQ(1, n);
    ASSERT(!registration_marked(e.env.rc, "fs"));
    ASSERT_EQ(1, registration(e.env.rc, "fs", NULL, 0, NULL));
    log_every_command(e.env.rc);
    ASSERT_OK(rjq_enqueue_await(e.env.q, "x", 1, NULL, NULL, count_outcome, &outcomes, NULL));
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 3, 5000));
    ASSERT_EQ(1, fcalls_of(e.env.rc, RJQ__S_ENQUEUE_ONE)); /* (the lean call, told 2) */
    char v[512];
    ASSERT(!state_holds_channel(e.env.rc, "fs", e.h.last_id, v, sizeof v));
    ASSERT(v[strlen(v) - 1] == ',');
    ASSERT_EQ(1, server_int(e.env.rc, "HEXISTS t:{fs}:watchers %s", e.h.last_id));
    release_one(&e.h, &done);
    ASSERT(loop_until_count(e.env.base, &outcomes, 3, 5000));
    ASSERT_EQ(0, server_int(e.env.rc, "HEXISTS t:{fs}:watchers %s", e.h.last_id));
    push_stop(&e);
}

static void on_done_any(rjq_client *c, int status, void *data) {
    (void)c, (void)status;
    (*(long *)data)++;
}

static void on_outcome_status(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)c, (void)o;
    count_wait *w = data;
    w->status = status;
    w->done++;
}

static void on_cancelled_active(rjq_client *c, int status, const char *state, void *data) {
    (void)c;
    ASSERT_OK(status);
    ASSERT(state != NULL && strcmp(state, "active") == 0);
    (*(long *)data)++;
}

/* An awaited job (its outcome to w) enqueued on format-2 queue q, whose
 * worker (format2_start's) handled one job before, now running there:
 * its id in id, its state, holding its reply channel, in v. */
static void running_awaited(push_env *e, const char *q, count_wait *w, char *id, size_t idn,
                            char *v, size_t vn) {
    ASSERT_OK(rjq_enqueue_await(e->env.q, "x", 1, NULL, NULL, on_outcome_status, w, NULL));
    ASSERT(loop_until_count(e->env.base, &e->h.handled, 2, 5000));
    snprintf(id, idn, "%s", e->h.last_id);
    ASSERT(state_holds_channel(e->env.rc, q, id, v, vn));
}

/* A dependent dep_id enqueued on dq after job id of queue q (running:
 * running_awaited's), once its dependents entry is written. */
static void enqueue_dependent(push_env *e, rjq_queue *dq, const char *q, const char *id, const char *dep_id) {
    rjq_dep on = {q, id};
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.id = dep_id;
    jo.after = &on;
    jo.n_after = 1;
    ASSERT_OK(rjq_enqueue(dq, "b", 1, &jo, NULL, NULL));
    WAIT_FOR(e->env.base, server_int(e->env.rc, "HEXISTS t:{%s}:dependents %s", q, id) == 1, 5000);
}

/* The worker's held job (running_awaited's, cancelled since) ends: its
 * completion finds it cancelled, and its callback comes. */
static void end_cancelled_run(push_env *e) {
    long ended = 0;
    ASSERT_OK(rjq_job_complete(e->h.jobs[0], NULL, 0, on_done_any, &ended));
    e->h.n = 0;
    ASSERT(loop_until_count(e->env.base, &ended, 1, 5000));
}

/* Each would leave its producer waiting if the channel in the state were
 * lost: the cancel of a running format-2 job tells it (cancel.lua reads
 * the channel from the state); its await by id adds a watcher (the
 * channel moves to the watchers column first: both are told). */
TEST(format2_cancel_of_a_running_pushed_job_tells_its_producer_and_its_await_by_id) {
    push_env e;
    long outcomes = 0, cancelled = 0;
    format2_start(&e, "fc", 1, &outcomes);
    count_wait first = {0}, by_id = {0};
    char id[64], v[512];
    running_awaited(&e, "fc", &first, id, sizeof id, v, sizeof v);
    /* rjq job parses it: active, its token, its times */
    info_wait iw = get_info(e.env.base, e.env.q, id);
    ASSERT_OK(iw.status);
    ASSERT(strcmp(iw.state, "active") == 0);
    ASSERT(strcmp(iw.token, rjq_job_get_token(e.h.jobs[0])) == 0);
    ASSERT(iw.enqueued_ms > 0 && iw.started_ms >= iw.enqueued_ms && iw.ended_ms == 0);
    /* an await by id of another client: the channel goes to the column */
    rjq_client *pc = client_for(e.env.base, &e.env.s);
    ASSERT_OK(rjq_queue_await(queue_for(pc, "fc"), id, NULL, on_outcome_status, &by_id, NULL));
    WAIT_FOR(e.env.base, server_int(e.env.rc, "HEXISTS t:{fc}:watchers %s", id) == 1, 5000);
    ASSERT(!state_holds_channel(e.env.rc, "fc", id, v, sizeof v));
    ASSERT(strncmp(v, "active 1 ", 9) == 0);
    redisReply *r = server_cmd(e.env.rc, "HGET t:{fc}:watchers %s", id);
    ASSERT(r->type == REDIS_REPLY_STRING && strchr(r->str, ' ') != NULL); /* two channels */
    freeReplyObject(r);
    ASSERT_OK(rjq_queue_cancel(e.env.q, id, on_cancelled_active, &cancelled));
    ASSERT(loop_until_count(e.env.base, &cancelled, 1, 5000));
    WAIT_FOR(e.env.base, first.done >= 1, 5000);
    WAIT_FOR(e.env.base, by_id.done >= 1, 5000);
    ASSERT_EQ(RJQ_EJOBCANCELED, first.status);
    ASSERT_EQ(RJQ_EJOBCANCELED, by_id.status);
    ASSERT_EQ(0, server_int(e.env.rc, "HEXISTS t:{fc}:watchers %s", id));
    end_cancelled_run(&e);
    rjq_client_free(pc);
    push_stop(&e);
}

/* A cancel with the channel still in the state (no await by id): told. */
TEST(format2_cancel_of_a_running_pushed_job_tells_its_producer) {
    push_env e;
    long outcomes = 0, cancelled = 0;
    format2_start(&e, "fk", 1, &outcomes);
    count_wait w = {0};
    char id[64], v[512];
    running_awaited(&e, "fk", &w, id, sizeof id, v, sizeof v);
    ASSERT_OK(rjq_queue_cancel(e.env.q, id, on_cancelled_active, &cancelled));
    WAIT_FOR(e.env.base, w.done >= 1, 5000);
    ASSERT_EQ(RJQ_EJOBCANCELED, w.status);
    ASSERT(!state_holds_channel(e.env.rc, "fk", id, v, sizeof v));
    ASSERT(strncmp(v, "cancelled 1 ", 12) == 0);
    end_cancelled_run(&e);
    push_stop(&e);
}

/* A failed attempt retried, and a lease taken back by the sweep: the job
 * goes back to ready with its channel moved to the watchers column
 * (fail.lua, reclaim.lua: channels_out), and its rerun's completion tells
 * the producer. */
TEST(format2_retried_and_reclaimed_jobs_keep_their_channel_for_the_rerun) {
    push_env e;
    long outcomes = 0, done = 0, failed = 0, stale = 0;
    format2_start(&e, "fr", 2, &outcomes);
    count_wait w = {0};
    char id[64], v[512];
    running_awaited(&e, "fr", &w, id, sizeof id, v, sizeof v);
    /* failed, retried at once: claimed again */
    rjq_job *j = e.h.jobs[0];
    e.h.n = 0;
    ASSERT_OK(rjq_job_fail(j, "boom", RJQ_FAIL_RETRY, 0, on_done_ok, &failed));
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 3, 5000));
    ASSERT_EQ(2, e.h.last_attempt);
    ASSERT(!state_holds_channel(e.env.rc, "fr", id, v, sizeof v));
    ASSERT_EQ(1, server_int(e.env.rc, "HEXISTS t:{fr}:watchers %s", id));
    ASSERT_EQ(0, w.done);
    /* its lease taken back by the sweep (its end moved to the past) */
    freeReplyObject(server_cmd(e.env.rc, "ZADD t:{fr}:active XX 1 %s", id));
    count_wait rc = {0};
    ASSERT_OK(rjq_queue_reclaim(e.env.q, on_count, &rc));
    WAIT_FOR(e.env.base, rc.done >= 1, 5000);
    ASSERT_EQ(1, rc.n);
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 4, 5000));
    ASSERT_EQ(3, e.h.last_attempt);
    /* the old attempt's completion is refused; the rerun's tells */
    ASSERT_OK(rjq_job_complete(e.h.jobs[0], NULL, 0, on_done_any, &stale));
    ASSERT(loop_until_count(e.env.base, &stale, 1, 5000));
    ASSERT_EQ(0, w.done);
    ASSERT_OK(rjq_job_complete(e.h.jobs[1], "ok", 2, on_done_ok, &done));
    WAIT_FOR(e.env.base, w.done >= 1, 5000);
    ASSERT_OK(w.status);
    ASSERT_EQ(0, server_int(e.env.rc, "HEXISTS t:{fr}:watchers %s", id));
    e.h.n = 0;
    push_stop(&e);
}

/* A reclaim sweep of a job whose channel is still in its state moves it
 * (reclaim.lua), so the rerun's completion tells the producer. */
TEST(format2_reclaimed_pushed_job_keeps_its_channel) {
    push_env e;
    long outcomes = 0, done = 0, stale = 0;
    format2_start(&e, "fl", 2, &outcomes);
    count_wait w = {0};
    char id[64], v[512];
    running_awaited(&e, "fl", &w, id, sizeof id, v, sizeof v);
    freeReplyObject(server_cmd(e.env.rc, "ZADD t:{fl}:active XX 1 %s", id));
    count_wait rc = {0};
    ASSERT_OK(rjq_queue_reclaim(e.env.q, on_count, &rc));
    WAIT_FOR(e.env.base, rc.done >= 1, 5000);
    ASSERT_EQ(1, rc.n);
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 3, 5000));
    ASSERT(!state_holds_channel(e.env.rc, "fl", id, v, sizeof v));
    ASSERT_OK(rjq_job_complete(e.h.jobs[0], NULL, 0, on_done_any, &stale));
    ASSERT(loop_until_count(e.env.base, &stale, 1, 5000));
    ASSERT_EQ(0, w.done);
    ASSERT_OK(rjq_job_complete(e.h.jobs[1], "ok", 2, on_done_ok, &done));
    WAIT_FOR(e.env.base, w.done >= 1, 5000);
    ASSERT_OK(w.status);
    e.h.n = 0;
    push_stop(&e);
}

/* An awaited job pushed into a slot the worker does not have (planted, as
 * in job_pushed_beyond_free_slots_is_handed_back) on a format-2 queue: the
 * worker hands it back (release.lua), which moves its channel to the
 * watchers column first; it runs once the worker has room, and its
 * completion tells the producer. */
TEST(format2_awaited_job_handed_back_keeps_its_channel) {
    push_env e;
    long outcomes = 0, done = 0;
    format2_start(&e, "fh", 1, &outcomes);
    char field[256], v[128];
    ASSERT_EQ(1, registration(e.env.rc, "fh", field, sizeof field, NULL));
    redisReply *r = server_cmd(e.env.rc, "HGET t:{fh}:idle %s", field);
    ASSERT(r->type == REDIS_REPLY_STRING && r->str[0] == '1' && r->str[1] == ' ');
    snprintf(v, sizeof v, "%s", r->str); /* (its free slot, epoch, lease and push format) */
    freeReplyObject(r);
    ASSERT_OK(rjq_enqueue_await(e.env.q, "x", 1, NULL, NULL, count_outcome, &outcomes, NULL));
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 2, 5000));
    ASSERT_EQ(-1, registration(e.env.rc, "fh", NULL, 0, NULL)); /* its only slot is used */
    freeReplyObject(server_cmd(e.env.rc, "HSET t:{fh}:idle %s %s", field, v));
    ASSERT_OK(rjq_enqueue_await(e.env.q, "y", 1, NULL, NULL, count_outcome, &outcomes, NULL));
    ASSERT(wait_ready(e.env.base, e.env.rc, "fh", 1)); /* handed back: the worker is full */
    r = server_cmd(e.env.rc, "LINDEX t:{fh}:ready 0");
    ASSERT(r->type == REDIS_REPLY_STRING);
    char id[64], sv[512];
    snprintf(id, sizeof id, "%s", r->str);
    freeReplyObject(r);
    ASSERT(!state_holds_channel(e.env.rc, "fh", id, sv, sizeof sv));
    ASSERT(strncmp(sv, "ready 0 ", 8) == 0);
    ASSERT_EQ(1, server_int(e.env.rc, "HEXISTS t:{fh}:watchers %s", id));
    release_one(&e.h, &done); /* room again: it claims the job */
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 3, 5000));
    ASSERT_STREQ(id, e.h.last_id);
    release_one(&e.h, &done);
    ASSERT(loop_until_count(e.env.base, &outcomes, 3, 5000));
    ASSERT(loop_until_count(e.env.base, &done, 2, 5000));
    push_stop(&e);
}

/* An awaited job enqueued on queue q (e's handle) is refused with
 * RJQ_EWRONGTYPE and nothing written: the counter, the state and the
 * payload columns as they were. */
static void awaited_enqueue_refused_writing_nothing(push_env *e, const char *q) {
    long long seq = server_int(e->env.rc, "HGET t:{%s}:stats seq", q);
    long long states = server_int(e->env.rc, "HLEN t:{%s}:state", q);
    long long payloads = server_int(e->env.rc, "HLEN t:{%s}:payload", q);
    count_wait w = {0};
    ASSERT_OK(rjq_enqueue_await(e->env.q, "x", 1, NULL, NULL, on_outcome_status, &w, NULL));
    WAIT_FOR(e->env.base, w.done >= 1, 5000);
    ASSERT_EQ(RJQ_EWRONGTYPE, w.status);
    ASSERT_EQ(seq, server_int(e->env.rc, "HGET t:{%s}:stats seq", q));
    ASSERT_EQ(states, server_int(e->env.rc, "HLEN t:{%s}:state", q));
    ASSERT_EQ(payloads, server_int(e->env.rc, "HLEN t:{%s}:payload", q));
}

/* The gate's read is a read before the first write: a wrongly typed meta
 * (written behind rjq's back after the client learnt format 2) refuses
 * the lean enqueue of an awaited job with nothing written (docs/scripts.md
 * "Rules every script keeps"). */
TEST(format2_enqueue_on_wrongtype_meta_writes_nothing) {
    push_env e;
    long outcomes = 0;
    format2_start(&e, "fw", 1, &outcomes);
    freeReplyObject(server_cmd(e.env.rc, "DEL t:{fw}:meta"));
    freeReplyObject(server_cmd(e.env.rc, "SET t:{fw}:meta x"));
    awaited_enqueue_refused_writing_nothing(&e, "fw");
    ASSERT_EQ(1, registration(e.env.rc, "fw", NULL, 0, NULL)); /* its slot not taken */
    ASSERT_EQ(1, e.h.handled);
    freeReplyObject(server_cmd(e.env.rc, "DEL t:{fw}:meta"));
    push_stop(&e);
}

/* A push heard by nobody is undone in its call (nsub36, docs/scripts.md
 * "A push heard by nobody"): on a format-2 queue that undo moves the reply
 * channel from the state to the watchers column, a write the pushed path
 * never makes. A wrongly typed watchers column found there refuses the
 * call with nothing written: the counter, payload, state and lease undone,
 * the stale registration left, no job ready. */
TEST(format2_unheard_push_on_wrongtype_watchers_writes_nothing) {
    push_env e;
    long outcomes = 0;
    format2_start(&e, "fuw", 1, &outcomes);
    ASSERT_OK(rjq_worker_stop(e.w, NULL, NULL));
    ASSERT(wait_registration(e.env.base, e.env.rc, "fuw", -1));
    /* a marked registration nobody listens on (no HGET meta: the channel
     * goes in the state at once) */
    freeReplyObject(server_cmd(e.env.rc, "HSET t:{fuw}:idle %s %s", "gone t:{fuw}:push:nobody",
                               "1 1 30000 8 2"));
    freeReplyObject(server_cmd(e.env.rc, "DEL t:{fuw}:watchers"));
    freeReplyObject(server_cmd(e.env.rc, "SET t:{fuw}:watchers x"));
    awaited_enqueue_refused_writing_nothing(&e, "fuw");
    ASSERT_EQ(0, server_active_jobs(e.env.rc, "fuw"));
    ASSERT_EQ(0, server_int(e.env.rc, "LLEN t:{fuw}:ready"));
    ASSERT_EQ(1, server_int(e.env.rc, "HEXISTS t:{fuw}:idle %s", "gone t:{fuw}:push:nobody"));
    freeReplyObject(server_cmd(e.env.rc, "DEL t:{fuw}:watchers"));
    push_stop(&e);
}

/* A dependent of its own queue registered on a running pushed job of a
 * format-2 queue (deps_add.lua, DEPS.register) leaves no mark among the
 * job's watchers (its dependents entry is what the finishing script
 * reads): the channel stays in the state, and the completion (handed by
 * complete_one.lua to complete.lua: the job has an entry) tells the
 * producer from it and releases the dependent. */
TEST(format2_dependent_on_a_running_pushed_job_keeps_its_channel) {
    push_env e;
    long outcomes = 0, done = 0;
    format2_start(&e, "fd", 2, &outcomes);
    count_wait w = {0};
    char id[64], v[512];
    running_awaited(&e, "fd", &w, id, sizeof id, v, sizeof v);
    enqueue_dependent(&e, e.env.q, "fd", id, "dep-b");
    ASSERT(state_holds_channel(e.env.rc, "fd", id, v, sizeof v));
    ASSERT_EQ(0, server_int(e.env.rc, "HEXISTS t:{fd}:watchers %s", id));
    ASSERT_EQ(2, e.h.handled); /* b waits */
    release_one(&e.h, &done);
    WAIT_FOR(e.env.base, w.done >= 1, 5000);
    ASSERT_OK(w.status);
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 3, 5000)); /* b released and run */
    ASSERT_STREQ("dep-b", e.h.last_id);
    release_one(&e.h, &done);
    ASSERT(loop_until_count(e.env.base, &done, 2, 5000));
    push_stop(&e);
}

/* A dependent of another queue registered on a running pushed job of a
 * format-2 queue leaves no mark among the job's watchers either (depoq:
 * its dependents entry is what the finishing script reads): the channel
 * stays in the state, and the completion (handed by complete_one.lua to
 * complete.lua: the job has an entry) tells the producer from it and
 * hands the dependent to the client, which releases it. */
TEST(format2_dependent_of_another_queue_keeps_the_channel_in_the_state_and_both_are_told) {
    push_env e;
    long outcomes = 0, done = 0;
    format2_start(&e, "fe", 2, &outcomes);
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    rjq_queue *oq;
    ASSERT_OK(rjq_queue_open(e.env.c, "fo", &qo, &oq));
    count_wait w = {0};
    char id[64], v[512];
    running_awaited(&e, "fe", &w, id, sizeof id, v, sizeof v);
    enqueue_dependent(&e, oq, "fe", id, "dep-o");
    ASSERT(state_holds_channel(e.env.rc, "fe", id, v, sizeof v));
    ASSERT_EQ(0, server_int(e.env.rc, "HEXISTS t:{fe}:watchers %s", id));
    ASSERT_EQ(0, server_int(e.env.rc, "LLEN t:{fo}:ready"));
    release_one(&e.h, &done);
    WAIT_FOR(e.env.base, w.done >= 1, 5000);
    ASSERT_OK(w.status);
    WAIT_FOR(e.env.base, server_int(e.env.rc, "LLEN t:{fo}:ready") == 1, 5000); /* released */
    push_stop(&e);
}

/* A dependent of another queue on a running pushed job of a format-2
 * queue that is cancelled: the cancel tells the producer (the channel, in
 * the state: the registration wrote the dependents entry only) and the
 * dependent applies its policy ('fail': dead,
 * naming the dependency), released by the cancelling client. */
TEST(format2_dependent_of_another_queue_on_a_cancelled_pushed_job_applies_its_policy) {
    push_env e;
    long outcomes = 0, cancelled = 0;
    format2_start(&e, "fx", 1, &outcomes);
    rjq_queue *oq;
    ASSERT_OK(rjq_queue_open(e.env.c, "fxo", NULL, &oq));
    count_wait w = {0};
    char id[64], v[512];
    running_awaited(&e, "fx", &w, id, sizeof id, v, sizeof v);
    enqueue_dependent(&e, oq, "fx", id, "dep-x");
    ASSERT(state_holds_channel(e.env.rc, "fx", id, v, sizeof v));
    ASSERT_OK(rjq_queue_cancel(e.env.q, id, on_cancelled_active, &cancelled));
    WAIT_FOR(e.env.base, w.done >= 1, 5000);
    ASSERT_EQ(RJQ_EJOBCANCELED, w.status);
    WAIT_FOR(e.env.base, server_int(e.env.rc, "ZCARD t:{fxo}:dead") == 1, 5000);
    ASSERT(state_holds_channel(e.env.rc, "fxo", "dep-x", v, sizeof v) == 0 && strncmp(v, "dead ", 5) == 0);
    redisReply *r = server_cmd(e.env.rc, "HGET t:{fxo}:error dep-x");
    ASSERT(r->type == REDIS_REPLY_STRING && strstr(r->str, "ended cancelled") != NULL);
    freeReplyObject(r);
    WAIT_FOR(e.env.base, server_int(e.env.rc, "HEXISTS t:{fx}:dependents %s", id) == 0, 5000);
    end_cancelled_run(&e);
    push_stop(&e);
}

/* The same dependent on a pushed job whose lease the sweep took back
 * (reclaim.lua: back to ready, attempts left): it waits through the
 * reclaim (not released by it) and is released by the rerun's completion,
 * which tells the producer too. */
TEST(format2_dependent_of_another_queue_on_a_reclaimed_pushed_job_waits_for_its_rerun) {
    push_env e;
    long outcomes = 0, done = 0, stale = 0;
    format2_start(&e, "fy", 2, &outcomes);
    rjq_queue *oq;
    ASSERT_OK(rjq_queue_open(e.env.c, "fyo", NULL, &oq));
    count_wait w = {0};
    char id[64], v[512];
    running_awaited(&e, "fy", &w, id, sizeof id, v, sizeof v);
    enqueue_dependent(&e, oq, "fy", id, "dep-y");
    freeReplyObject(server_cmd(e.env.rc, "ZADD t:{fy}:active XX 1 %s", id));
    count_wait rc = {0};
    ASSERT_OK(rjq_queue_reclaim(e.env.q, on_count, &rc));
    WAIT_FOR(e.env.base, rc.done >= 1, 5000);
    ASSERT_EQ(1, rc.n);
    ASSERT(loop_until_count(e.env.base, &e.h.handled, 3, 5000)); /* its rerun */
    ASSERT(state_holds_channel(e.env.rc, "fyo", "dep-y", v, sizeof v) == 0 && strncmp(v, "waiting ", 8) == 0);
    ASSERT_EQ(0, server_int(e.env.rc, "LLEN t:{fyo}:ready"));
    ASSERT_OK(rjq_job_complete(e.h.jobs[0], NULL, 0, on_done_any, &stale));
    ASSERT(loop_until_count(e.env.base, &stale, 1, 5000));
    ASSERT_EQ(0, w.done);
    ASSERT_OK(rjq_job_complete(e.h.jobs[1], "ok", 2, on_done_ok, &done));
    WAIT_FOR(e.env.base, w.done >= 1, 5000);
    ASSERT_OK(w.status);
    WAIT_FOR(e.env.base, server_int(e.env.rc, "LLEN t:{fyo}:ready") == 1, 5000); /* released once */
    WAIT_FOR(e.env.base, server_int(e.env.rc, "HEXISTS t:{fy}:dependents %s", id) == 0, 5000);
    ASSERT_EQ(1, server_int(e.env.rc, "LLEN t:{fyo}:ready"));
    e.h.n = 0;
    push_stop(&e);
}
