/*
 * A sharded queue's worker offers back the slot a completion freed to its
 * shard's registration, as a plain queue's worker does, instead of making
 * an empty claim on the next shard after every completion (issue 35,
 * bench/README.md "Sharded queues": 0.93 script calls and ~15 commands per
 * awaited job); and a shard whose offers are used up still gets slots.
 * Counted (INFO commandstats), never timed. And an anonymous job of a
 * sharded queue (a made id) costs the enqueue commands of a plain one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"
#include "worker_private.h"

enum { WARM = 12, JOBS = 150, CONC = 8 };

static void complete_now(rjq_job *job, void *data) {
    (void)data;
    ASSERT_OK(rjq_job_complete(job, NULL, 0, NULL, NULL));
}

static void on_awaited(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    int *done = data;
    (void)c, (void)o;
    ASSERT_OK(status);
    (*done)++;
}

typedef struct cost {
    long long calls, commands;
} cost;

/* Await jobs one at a time (anonymous, each enqueued once the last one's
 * outcome came) on q, with one worker of concurrency CONC running: what
 * the last JOBS of them cost (the first WARM reach every shard first). */
static cost awaited_cost(test_env *e, rjq_queue *q) {
    rjq_worker_options wo = quiet_worker_options(CONC);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, complete_now, NULL, &w));
    cost before = {0, 0};
    for (int i = 0; i < WARM + JOBS; i++) {
        if (i == WARM) before = (cost){server_script_calls(e->rc), server_commands_run(e->rc)};
        int done = 0;
        ASSERT_OK(rjq_enqueue_await(q, "j", 1, NULL, NULL, on_awaited, &done, NULL));
        ASSERT(loop_until(e->base, &done, 20000));
    }
    cost c = {server_script_calls(e->rc) - before.calls, server_commands_run(e->rc) - before.commands};
    worker_stop_wait(e->base, w);
    rjq_stats st = get_stats(e->base, q);
    ASSERT_EQ(WARM + JOBS, st.completed);
    return c;
}

/* Before: after every completion a sharded queue's worker claimed on the
 * next shard in turn and found nothing (push delivery had given the job):
 * ~3 script calls per awaited job against ~2 on a plain queue. */
TEST(awaited_jobs_on_a_sharded_queue_cost_the_script_calls_of_a_plain_queues) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *plain = open_learnt(e.base, e.c, "so_plain");
    cost p = awaited_cost(&e, plain);
    rjq_queue *q = open_learnt(e.base, e.c, "so_sharded");
    ASSERT_OK(declare_shards(e.base, q, 3));
    cost s = awaited_cost(&e, q);
    fprintf(stderr, "per awaited job: plain %.3f script calls, %.2f commands; 3 shards %.3f, %.2f\n",
            (double)p.calls / JOBS, (double)p.commands / JOBS, (double)s.calls / JOBS,
            (double)s.commands / JOBS);
    /* an enqueue and a completion call per job (the completion offers the
     * slot back: no claim); before, 3.000 calls and 55 commands against
     * 2.000 and 32; then 2.000 and 33 against 27 (the made ids took the
     * enqueue script's caller-id path), now 27 (written without a look-up:
     * docs/sharding.md 6a). Since nsub36 the plain queue's awaited job
     * goes through the lean enqueue, which sends no PUBSUB NUMSUB (its
     * push's PUBLISH reply is the proof, docs/scripts.md "A push heard by
     * nobody"); the sharded queue's made-id enqueue is enqueue.lua's,
     * which asked it until npush36 (one command per job more, 25 against
     * 24, the bound was loosened by JOBS); since npush36 enqueue.lua's
     * push reads its PUBLISH reply too, and the bound is the plain
     * queue's again. */
    ASSERT(p.calls <= JOBS * 23 / 10);
    ASSERT(s.calls <= JOBS * 23 / 10);
    ASSERT(s.calls * 100 <= p.calls * 115);
    ASSERT(s.commands * 100 <= p.commands * 103);
    env_stop(&e);
}

/* The commands of JOBS anonymous enqueues on q, one per call (each sent
 * once the last one's reply came), after WARM such. */
static long long enqueue_commands(test_env *e, rjq_queue *q) {
    long long before = 0;
    for (int i = 0; i < WARM + JOBS; i++) {
        if (i == WARM) before = server_commands_run(e->rc);
        ASSERT_OK(enqueue_job(e->base, q, "j", NULL).status);
    }
    return server_commands_run(e->rc) - before;
}

/* An anonymous job of a sharded queue gets an id made for it alone
 * (docs/sharding.md 6a), which the enqueue script writes without looking
 * it up: the commands of a plain queue's anonymous job (the caller-id
 * path's TYPE checks, HMGET of the ids, EXISTS of the dedup set and read
 * of the skipped counter cost 5 more per call: 15 against 10 here). */
TEST(anonymous_enqueues_on_a_sharded_queue_cost_the_commands_of_a_plain_queues) {
    test_env e;
    env_start(&e, NULL);
    long long p = enqueue_commands(&e, open_learnt(e.base, e.c, "se_plain"));
    rjq_queue *q = open_learnt(e.base, e.c, "se_sharded");
    ASSERT_OK(declare_shards(e.base, q, 3));
    long long s = enqueue_commands(&e, q);
    fprintf(stderr, "per enqueue call: plain %.2f commands; 3 shards %.2f\n", (double)p / JOBS,
            (double)s / JOBS);
    ASSERT(s * 100 <= p * 102); /* (the same, but for a stray background command) */
    ASSERT_EQ(WARM + JOBS, (int)get_stats(e.base, q).ready);
    env_stop(&e);
}

/* Jobs whose payload is "hold" are kept (the test finishes them), the
 * others completed at once and counted. */
typedef struct holder {
    rjq_job *held[CONC];
    long nheld;
    long ran;
} holder;

static void hold_or_run(rjq_job *job, void *data) {
    holder *h = data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    if (len == 4 && memcmp(p, "hold", 4) == 0) {
        ASSERT(h->nheld < CONC);
        h->held[h->nheld++] = job;
        return;
    }
    h->ran++;
    ASSERT_OK(rjq_job_complete(job, NULL, 0, NULL, NULL));
}

static void on_queued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    long *got = data;
    (void)c, (void)jobs;
    ASSERT_OK(status);
    *got += (long)n;
}

static void enqueue_n(test_env *e, rjq_queue *q, const char *payload, int n) {
    rjq_enqueue_item it[64];
    ASSERT(n <= 64);
    for (int i = 0; i < n; i++) {
        it[i] = (rjq_enqueue_item)RJQ_ENQUEUE_ITEM_INIT;
        it[i].payload = payload;
        it[i].len = strlen(payload);
    }
    long queued = 0;
    ASSERT_OK(rjq_enqueue_batch(q, it, (size_t)n, on_queued, &queued));
    ASSERT(loop_until_count(e->base, &queued, n, 10000));
}

/* Every slot of the worker is taken by jobs of shards 1 and 2 (each shard
 * still has slots offered for pushes: the registrations are not in the
 * worker's budget), then jobs come on shard 0 only: pushed there, handed
 * back (no room), so shard 0's member would claim. The held jobs finish
 * one by one: each freed slot must reach shard 0 (its member claims), not
 * go back to the registration of the shard that freed it, or shard 0's
 * jobs would wait for the safety poll, a minute away. */
TEST(a_shard_whose_offers_are_used_up_still_gets_slots) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "so_starve");
    ASSERT_OK(declare_shards(e.base, q, 3));
    holder h = {0};
    rjq_worker_options wo = quiet_worker_options(4);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, hold_or_run, &h, &w));
    /* every shard's slots offered back once: a job on each, run */
    for (int s = 0; s < 3; s++) enqueue_n(&e, rjq_queue_get_shard(q, s), "warm", 4);
    ASSERT(loop_until_count(e.base, &h.ran, 12, 20000));
    /* the budget taken by shards 1 and 2 */
    enqueue_n(&e, rjq_queue_get_shard(q, 1), "hold", 2);
    enqueue_n(&e, rjq_queue_get_shard(q, 2), "hold", 2);
    ASSERT(loop_until_count(e.base, &h.nheld, 4, 20000));
    /* shard 0's jobs: pushed to its registration and handed back, or
     * left ready; every message about them has reached the worker */
    enqueue_n(&e, rjq_queue_get_shard(q, 0), "run", 20);
    subscriber_barrier(e.base, e.c, e.rc);
    ASSERT_EQ(12, h.ran);
    for (int i = 0; i < 4; i++) {
        long before = h.ran;
        ASSERT_OK(rjq_job_complete(h.held[i], NULL, 0, NULL, NULL));
        h.held[i] = NULL;
        /* the freed slot brings shard 0's next job (i < 3: the other held
         * jobs keep the rest of the budget) */
        ASSERT(loop_until_count(e.base, &h.ran, before + 1, 30000));
    }
    ASSERT(loop_until_count(e.base, &h.ran, 32, 30000));
    rjq_stats st = get_stats(e.base, q);
    ASSERT_EQ(32 + 4, st.completed);
    ASSERT_EQ(0, st.ready + st.active + st.delayed);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* A member of a sharded queue's worker (a weighted group) whose own slots
 * are all registered for pushes asks to claim (as a push handed back or
 * its tick makes it): the scheduler passes it by, and its ask is answered
 * then (g_want cleared, as a strict group's is), not left set for ever.
 * Left set, it counted as wanting: its credit grew while the others
 * claimed, and every other shard's completion claimed instead of offering
 * its slot back (2.67 script calls per awaited job under load; the test in
 * rjq__w_group_wants of a member's own slots had hidden it there). */
static rjq_worker *registered_member(const group *g) {
    for (int i = 0; i < g->n; i++) {
        rjq_worker *m = g->m[i];
        if (rjq__w_own_free(m) == 0 && m->claiming == 0 && !m->g_want && m->running == 0 &&
            !rjq__reg_out_of_step(m->reg))
            return m;
    }
    return NULL;
}

TEST(a_group_member_passed_by_for_want_of_slots_no_longer_wants_to_claim) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "so_want");
    ASSERT_OK(declare_shards(e.base, q, 3));
    rjq_worker_options wo = quiet_worker_options(CONC);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, complete_now, NULL, &w));
    for (int s = 0; s < 3; s++) {
        int done = 0;
        ASSERT_OK(rjq_enqueue_await(rjq_queue_get_shard(q, s), "j", 1, NULL, NULL, on_awaited,
                                    &done, NULL));
        ASSERT(loop_until(e.base, &done, 20000));
    }
    group *g = w->g;
    ASSERT(g != NULL && g->n == 3);
    /* a member idle with every slot of its own registered, nothing asked
     * or in flight (one whose last claim was short of the group's slots
     * registered only those: not that one) */
    rjq_worker *m = NULL;
    WAIT_FOR(e.base, (m = registered_member(g)) != NULL, 10000);
    long long calls = server_script_calls(e.rc);
    rjq__w_claim(m);
    ASSERT_EQ(0, m->g_want);
    ASSERT_EQ(0, m->claiming); /* (nothing to claim with) */
    /* and another shard's completions still offer their slots back */
    int other = 0;
    while (g->m[other] == m) other++;
    for (int i = 0; i < 20; i++) {
        int done = 0;
        ASSERT_OK(rjq_enqueue_await(g->m[other]->q, "j", 1, NULL, NULL, on_awaited, &done, NULL));
        ASSERT(loop_until(e.base, &done, 20000));
    }
    ASSERT(server_script_calls(e.rc) - calls <= 20 * 23 / 10); /* (2 a job, margin as above) */
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* Jobs held by the worker until the test completes them, in arrival order
 * (payload "hold"; others complete at once and are counted). */
typedef struct keeper {
    rjq_job *held[2 * CONC];
    long nheld;
    long ran;
} keeper;

static void keep_or_run(rjq_job *job, void *data) {
    keeper *k = data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    if (len == 4 && memcmp(p, "hold", 4) == 0) {
        ASSERT(k->nheld < 2 * CONC);
        k->held[k->nheld++] = job;
        return;
    }
    k->ran++;
    ASSERT_OK(rjq_job_complete(job, NULL, 0, NULL, NULL));
}

/* The member idle: no claim in flight or owed, its registration in step. */
static int member_idle(const rjq_worker *m) {
    return m->claiming == 0 && !m->g_want && m->mode == CL_IDLE && !rjq__w_rung(m) &&
           !rjq__reg_out_of_step(m->reg);
}

/* A member of a sharded queue's worker whose claim the group's budget made
 * short of its own free slots (1 of 8: the other 7 were taken by another
 * shard's jobs) and that came back short registers all of its free slots
 * for pushes, not only the one it asked for: with 1 of 8 registered and 7
 * free but not asking to claim, push delivery to its shard ran one job at
 * a time until its next claim. Once the other shard's jobs finished, 7
 * jobs enqueued on its shard are all pushed to it at once. */
TEST(a_shard_member_whose_claim_the_budget_made_short_registers_all_its_free_slots) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "so_short");
    ASSERT_OK(declare_shards(e.base, q, 3));
    keeper k = {0};
    rjq_worker_options wo = quiet_worker_options(CONC);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, keep_or_run, &k, &w));
    /* every member's first claim made and its slots registered */
    for (int s = 0; s < 3; s++) enqueue_n(&e, rjq_queue_get_shard(q, s), "warm", 1);
    ASSERT(loop_until_count(e.base, &k.ran, 3, 20000));
    group *g = w->g;
    ASSERT(g != NULL && g->n == 3);
    rjq_worker *m0 = NULL, *m1 = NULL;
    for (int i = 0; i < g->n; i++) {
        if (g->m[i]->q == rjq_queue_get_shard(q, 0)) m0 = g->m[i];
        if (g->m[i]->q == rjq_queue_get_shard(q, 1)) m1 = g->m[i];
    }
    ASSERT(m0 != NULL && m1 != NULL);
    /* 7 slots taken by shard 1's jobs, the last by one of shard 0 */
    enqueue_n(&e, rjq_queue_get_shard(q, 1), "hold", CONC - 1);
    ASSERT(loop_until_count(e.base, &k.nheld, CONC - 1, 20000));
    enqueue_n(&e, rjq_queue_get_shard(q, 0), "hold", 1);
    ASSERT(loop_until_count(e.base, &k.nheld, CONC, 20000));
    ASSERT_EQ(CONC - 1, m1->running);
    ASSERT_EQ(1, m0->running);
    /* a job for shard 0 with no slot free: handed back, shard 0 claims
     * once a slot frees, with the one slot the group has then */
    enqueue_n(&e, rjq_queue_get_shard(q, 0), "run", 1);
    subscriber_barrier(e.base, e.c, e.rc);
    ASSERT_OK(rjq_job_complete(k.held[0], NULL, 0, NULL, NULL));
    k.held[0] = NULL;
    ASSERT(loop_until_count(e.base, &k.ran, 4, 20000));
    WAIT_FOR(e.base, member_idle(m0) && member_idle(m1) && m1->finishing == 0, 10000);
    /* its last claim was short (one slot of the group's), and it
     * registered every slot of its own not running a job */
    ASSERT_EQ(1, m0->running);
    ASSERT_EQ(CONC - 1, rjq__reg_offered(m0->reg));
    ASSERT_EQ(0, rjq__w_own_free(m0));
    /* shard 1's jobs finish: the group's slots are free but for one */
    for (int i = 1; i < CONC - 1; i++) {
        ASSERT_OK(rjq_job_complete(k.held[i], NULL, 0, NULL, NULL));
        k.held[i] = NULL;
    }
    WAIT_FOR(e.base, m1->running == 0 && m1->finishing == 0 && member_idle(m1) && member_idle(m0),
             10000);
    ASSERT_EQ(CONC - 1, rjq__w_group_free(g));
    /* 7 jobs on shard 0: pushed to its registration by the enqueue itself,
     * all 7 start without a claim */
    enqueue_n(&e, rjq_queue_get_shard(q, 0), "hold", CONC - 1);
    subscriber_barrier(e.base, e.c, e.rc);
    ASSERT_EQ(2 * CONC - 1, k.nheld);
    ASSERT_EQ(CONC, m0->running);
    for (long i = CONC - 1; i < k.nheld; i++)
        if (k.held[i]) ASSERT_OK(rjq_job_complete(k.held[i], NULL, 0, NULL, NULL));
    WAIT_FOR(e.base, m0->running == 0 && m0->finishing == 0, 10000);
    rjq_stats st = get_stats(e.base, q);
    ASSERT_EQ(0, st.ready + st.active + st.delayed);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

static void on_made_id(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c;
    ASSERT_OK(status);
    ASSERT_EQ(1, (long)n);
    snprintf(data, 64, "%s", rjq_enqueued_get(jobs, 0)->id);
}

static long unheard_ran;
static void count_unheard(rjq_job *job, void *data) {
    (void)data;
    unheard_ran++;
    ASSERT_EQ(1, rjq_job_get_attempt(job));
    ASSERT_OK(rjq_job_complete(job, NULL, 0, NULL, NULL));
}

/* npush36: a sharded queue's anonymous job (a made id: enqueue.lua, the
 * general push path, not the lean enqueue) pushed to a registration whose
 * channel nobody listens on is undone in the same call (no PUBSUB NUMSUB
 * asked: the push's PUBLISH reply is the proof, docs/scripts.md "A push
 * heard by nobody"): ready on its shard with its attempt unspent, no
 * lease, the stale registration dropped; a worker then runs it once. (With
 * the undo left out, it stays active under the dead push's token.) */
TEST(sharded_made_id_push_heard_by_nobody_is_undone_and_runs_once) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "so_unheard");
    ASSERT_OK(declare_shards(e.base, q, 2));
    /* every shard has a registration of 4 slots on a channel nobody listens on */
    for (int k = 0; k < 2; k++) {
        const char *sn = rjq_queue_get_name(rjq_queue_get_shard(q, k));
        ASSERT_EQ(1, server_int(e.rc, "HSET t:{%s}:idle %s %s", sn, "9 t:{x}:push:gone", "4 e1 30000 8"));
    }
    char id[64] = "";
    ASSERT_OK(rjq_enqueue(q, "j", 1, NULL, on_made_id, id));
    WAIT_FOR(e.base, id[0] != '\0', 5000);
    int k = shard_holding(e.base, q, id);
    ASSERT(k >= 0 && k < 2);
    const char *sn = rjq_queue_get_name(rjq_queue_get_shard(q, k));
    ASSERT_EQ(0, server_int(e.rc, "HLEN t:{%s}:idle", sn)); /* the stale registration dropped */
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{%s}:ready", sn));
    ASSERT_EQ(0, server_active_jobs(e.rc, sn));
    redisReply *r = server_cmd(e.rc, "HGET t:{%s}:state %s", sn, id);
    ASSERT(r->type == REDIS_REPLY_STRING && strncmp(r->str, "ready 0 @", 9) == 0);
    freeReplyObject(r);
    for (int j = 0; j < 2; j++) /* (the other shard's, never tried, goes too) */
        freeReplyObject(server_cmd(e.rc, "DEL t:{%s}:idle", rjq_queue_get_name(rjq_queue_get_shard(q, j))));
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    unheard_ran = 0;
    ASSERT_OK(rjq_worker_start(q, &wo, count_unheard, NULL, &w));
    ASSERT(loop_until_count(e.base, &unheard_ran, 1, 10000));
    worker_stop_wait(e.base, w);
    rjq_stats st = get_stats(e.base, q);
    ASSERT_EQ(1, st.completed);
    ASSERT_EQ(1, unheard_ran);
    ASSERT_EQ(0, st.ready + st.active + st.delayed);
    env_stop(&e);
}
