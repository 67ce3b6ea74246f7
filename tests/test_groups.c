/*
 * Job groups (issue 40, README "Groups", rjq.h "Job groups"): round-robin
 * across groups (a group with 90% of the jobs does not starve the others),
 * FIFO and priorities within a group, a per-group concurrency limit that
 * holds across workers of separate clients, pause of one group stopping
 * only it, nothing lost when a group job's lease is reclaimed, a plain
 * queue paying nothing for the feature, a per-group rate limit that holds
 * across worker processes (and spares the other groups), and a bound on a
 * group's ready jobs refusing an enqueue with nothing written. The queue's
 * figures count its group jobs: the ready and delayed listings (by offset
 * and by cursor), its bound (max_waiting), its ready, delayed and active
 * depths around a reclaim. An idle worker of several queues starts a group
 * job it was rung for. The issue's promises each asserted (audit40): the
 * weighted round-robin's exact order, concurrency over 3 worker processes
 * counted from the server's events, the defaults' bound per group (no
 * delayed job counted, a reclaimed or retried job never refused), a paused
 * group pushed nothing, a group at its rate limit woken by a short claim's
 * time, a pause and resume keeping a group's limits.
 */
#include <event2/event.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "rjq_scripts.h"
#include "server.h"
#include "waits.h"

/* (a_group_jobs_claim_and_completion_cost_no_command_per_job_beyond_its_groups_pop: before
 * the active counts, 39 and 23 -- a SADD per group in the claim, a SREM and a ZSCORE
 * per group in the completion; the listing's depth index then adds a ZMSCORE and a
 * ZADD per claim, not per group: 37 -> 39; the group ids' states read with their
 * records, not in an HMGET of their own: 39 -> 38; no TYPE of ready and prio, which
 * the claim's own LPOP and ZCARD checked: 38 -> 36 (gclaim); the monitor key, prio and
 * the options column asked in one EXISTS, no ZCARD of an absent prio, and the delayed
 * set asked in that EXISTS too, no ZRANGEBYSCORE of an absent one: 36 -> 34, drain36) */
#define GROUP_CLAIM_COMMANDS_4 34
/* (completion 18 -> 17: complete.lua asks deadlines, the groups' job hash and
 * dependents in one EXISTS, where it asked EXISTS deadlines and EXISTS of the
 * groups' job hash apart, deps15; 17 -> 16: a completion of 4 jobs or more asks
 * the watchers column in that EXISTS too, no HMGET of an absent one, drl36) */
#define GROUP_COMPLETION_COMMANDS 16
/* (an_enqueue_behind_a_groups_ready_jobs_asks_the_ring_nothing...: the ring's
 * ZSCORE, a score printed per enqueue, skipped when the depth index's answer says
 * the group had ready ids and it has no limit, rate or pause: 29 -> 28, gcuts; nor the listing's ZADD NX: a group in the
 * index is listed, 28 -> 27; the monitor key's EXISTS, for each new job's
 * 'enqueued' event, which genqueue.lua never emitted: 27 -> 28, gpush2; a call
 * that pushes asked it already; a TYPE only of the job columns and the groups'
 * job hash, the other keys checked by their reads (stats, meta, the depth index)
 * or unwritten (ring, listing, busy and delayed sets), and the depth index's
 * ZMSCORE without its EXISTS: 28 -> 19, genq40) */
#define GROUP_ENQUEUE_BEHIND_COMMANDS 19

static enqueue_wait enqueue_in(test_env *e, rjq_queue *q, const char *payload, const char *group,
                               int priority) {
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.group = group;
    o.priority = priority;
    return enqueue_job(e->base, q, payload, &o);
}

/* The results of one loop turn's enqueues, one slot each. */
typedef struct turn_results {
    int want, done, all;
    int status[16], existed[16];
    size_t n[16];
    char id[16][64];
} turn_results;

typedef struct turn_slot {
    turn_results *t;
    int i;
} turn_slot;

static void on_turn_enqueued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n,
                             void *data) {
    turn_slot *s = data;
    (void)c;
    s->t->status[s->i] = status;
    s->t->n[s->i] = n;
    if (status == RJQ_OK && n >= 1) {
        s->t->existed[s->i] = rjq_enqueued_get(jobs, 0)->existed;
        snprintf(s->t->id[s->i], sizeof s->t->id[0], "%s", rjq_enqueued_get(jobs, 0)->id);
    }
    s->t->all = ++s->t->done == s->t->want;
}

/* Enqueue n jobs in one loop turn (ids[i] NULL: anonymous; its payload
 * its id or "x"), then run the loop until every callback came. Returns
 * the script calls the turn made. */
static long long enqueue_one_turn(test_env *e, const char *const *ids, const char *const *groups,
                                  const int *prio, int n, turn_results *t) {
    static turn_slot s[16];
    memset(t, 0, sizeof *t);
    t->want = n;
    long long calls = server_script_calls(e->rc);
    for (int i = 0; i < n; i++) {
        rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
        o.id = ids[i];
        o.group = groups[i];
        o.priority = prio ? prio[i] : 0;
        s[i] = (turn_slot){t, i};
        const char *p = ids[i] ? ids[i] : "x";
        ASSERT_OK(rjq_enqueue(e->q, p, strlen(p), &o, on_turn_enqueued, &s[i]));
    }
    ASSERT(loop_until(e->base, &t->all, 10000));
    return server_script_calls(e->rc) - calls;
}

/* key's list (LRANGE) or zset (ZRANGE) members joined by ','. */
static const char *members(test_env *e, const char *cmd, const char *key) {
    static char out[256];
    out[0] = '\0';
    redisReply *r = server_cmd(e->rc, "%s %s 0 -1", cmd, key);
    ASSERT(r->type == REDIS_REPLY_ARRAY);
    for (size_t i = 0; i < r->elements; i++) {
        if (out[0]) strncat(out, ",", sizeof out - strlen(out) - 1);
        strncat(out, r->element[i]->str, sizeof out - strlen(out) - 1);
    }
    freeReplyObject(r);
    return out;
}

/* A handler that completes its job at once, noting the payloads in order. */
typedef struct ran {
    char order[200][16];
    long n;
} ran;

static void complete_noting(rjq_job *job, void *data) {
    ran *r = data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    if (r->n < 200) snprintf(r->order[r->n], sizeof r->order[0], "%.*s", (int)len, p);
    r->n++;
    ASSERT_OK(rjq_job_complete(job, "", 0, NULL, NULL));
}

/* A worker of the given concurrency on e's queue running complete_noting
 * into r (cleared first). */
static rjq_worker *start_noting(test_env *e, ran *r, int concurrency) {
    memset(r, 0, sizeof *r);
    rjq_worker_options wo = quiet_worker_options(concurrency);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e->q, &wo, complete_noting, r, &w));
    return w;
}

/* A handler that notes its job's group header and completes it. */
static void complete_noting_group(rjq_job *job, void *data) {
    char *seen = data;
    const char *g = rjq_job_get_header(job, "rjq.group");
    snprintf(seen, 32, "%s", g ? g : "(none)");
    ASSERT_OK(rjq_job_complete(job, "", 0, NULL, NULL));
}

static long index_of(const ran *r, const char *payload) {
    for (long i = 0; i < r->n && i < 200; i++)
        if (strcmp(r->order[i], payload) == 0) return i;
    return -1;
}

/* Run the loop until the call w waits for was answered, with RJQ_OK. */
static void answered_ok(test_env *e, count_wait *w) {
    WAIT_FOR(e->base, w->done == 1, 10000);
    ASSERT_OK(w->status);
}

static void set_limits(test_env *e, const char *group, int conc, int weight) {
    count_wait w = {0, 0, 0};
    ASSERT_OK(rjq_queue_set_group_limits(e->q, group, conc, weight, on_count, &w));
    answered_ok(e, &w);
}

static void pause_group(test_env *e, const char *group, int paused) {
    count_wait w = {0, 0, 0};
    ASSERT_OK(rjq_queue_pause_group(e->q, group, paused, on_count, &w));
    answered_ok(e, &w);
}

/* The claim script as a worker sends it, for up to n jobs of queue qn,
 * with token tok (the library loaded: a script ran). */
static redisReply *claim_as_worker(test_env *e, const char *qn, const char *n, const char *tok) {
    char prefix[64], wake[64];
    snprintf(prefix, sizeof prefix, "t:{%s}:job:", qn);
    snprintf(wake, sizeof wake, "t:{%s}:wake", qn);
    const char *claim[] = {prefix, n, "60000", tok, wake, "w ch", "1", "0", "0", "1"};
    return server_fcall(e->rc, RJQ__S_CLAIM, qn, claim, 10);
}

static groups_wait groups_of(test_env *e, const char *one) {
    groups_wait g;
    memset(&g, 0, sizeof g);
    ASSERT_OK(rjq_queue_list_groups(e->q, one, 0, 8, on_groups, &g));
    WAIT_FOR(e->base, g.done == 1, 10000);
    ASSERT_OK(g.status);
    return g;
}

TEST(a_group_with_90_percent_of_the_jobs_does_not_starve_the_others) {
    test_env e;
    env_start(&e, "gf");
    char p[16], g[16];
    for (int i = 0; i < 90; i++) {
        snprintf(p, sizeof p, "big-%d", i);
        ASSERT_OK(enqueue_in(&e, e.q, p, "big", 0).status);
    }
    for (int i = 0; i < 10; i++) {
        snprintf(p, sizeof p, "s%d", i);
        snprintf(g, sizeof g, "small%d", i);
        ASSERT_OK(enqueue_in(&e, e.q, p, g, 0).status);
    }
    groups_wait l = groups_of(&e, NULL);
    ASSERT_EQ(11, l.total);
    ASSERT_STREQ("big", l.name[0]);
    ASSERT_EQ(90, l.depth[0]);
    ran r;
    rjq_worker *w = start_noting(&e, &r, 1);
    WAIT_FOR(e.base, r.n == 100, 20000);
    /* round-robin: every small group's job starts within the first turn of
     * the 11 groups, however many the big one has */
    for (int i = 0; i < 10; i++) {
        snprintf(p, sizeof p, "s%d", i);
        long at = index_of(&r, p);
        ASSERT(at >= 0 && at < 11);
    }
    /* FIFO within the big group */
    long last = -1;
    for (int i = 0; i < 90; i++) {
        snprintf(p, sizeof p, "big-%d", i);
        long at = index_of(&r, p);
        ASSERT(at > last);
        last = at;
    }
    worker_stop_wait(e.base, w);
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{gf}:g:job t:{gf}:g:ring") == 0, 10000);
    l = groups_of(&e, NULL); /* (the listing drops the groups with nothing left) */
    ASSERT_EQ(0, l.total);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{gf}:g:all"));
    env_stop(&e);
}

TEST(priorities_within_a_group_and_weights_across_groups) {
    test_env e;
    env_start(&e, "gp");
    set_limits(&e, "heavy", -1, 3);
    ASSERT_OK(enqueue_in(&e, e.q, "h-low", "heavy", 0).status);
    ASSERT_OK(enqueue_in(&e, e.q, "h-1", "heavy", 0).status);
    ASSERT_OK(enqueue_in(&e, e.q, "h-2", "heavy", 0).status);
    ASSERT_OK(enqueue_in(&e, e.q, "h-high", "heavy", 5).status);
    ASSERT_OK(enqueue_in(&e, e.q, "l-1", "light", 0).status);
    ASSERT_OK(enqueue_in(&e, e.q, "l-2", "light", 0).status);
    ran r;
    rjq_worker *w = start_noting(&e, &r, 1);
    WAIT_FOR(e.base, r.n == 6, 10000);
    /* heavy's turn takes 3 (its weight), highest priority first, then
     * light's turn 1, then the rest */
    ASSERT_STREQ("h-high", r.order[0]);
    ASSERT_STREQ("h-low", r.order[1]);
    ASSERT_STREQ("h-1", r.order[2]);
    ASSERT_STREQ("l-1", r.order[3]);
    ASSERT_STREQ("h-2", r.order[4]);
    ASSERT_STREQ("l-2", r.order[5]);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* Jobs held for a while, then completed; the running count per group as
 * the clients see it: up at the start, down once the completion's reply
 * came (so never below what the server counts). */
typedef struct busy {
    struct event_base *base;
    redisContext *rc;
    int running[2], max[2];
    long long max_server[2];
    long started, done;
} busy;

/* The jobs of group g active on the server now, by the queue's active set
 * and the groups' job hash (not by the slots the claim counts with). */
static long long active_in(redisContext *rc, const char *g) {
    static const char *count =
        "local n = 0 for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do "
        "if redis.call('HGET', KEYS[2], id) == ARGV[1] then n = n + 1 end end return n";
    redisReply *r = redisCommand(rc, "EVAL %s 2 t:{gc}:active t:{gc}:g:job %s", count, g);
    ASSERT(r != NULL && r->type == REDIS_REPLY_INTEGER);
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

typedef struct held {
    busy *b;
    rjq_job *job;
    int g;
} held;

static void on_completed(rjq_client *c, int status, void *data) {
    (void)c;
    held *h = data;
    ASSERT_OK(status);
    h->b->running[h->g]--;
    h->b->done++;
    free(h);
}

static void finish_later(evutil_socket_t fd, short what, void *data) {
    (void)fd;
    (void)what;
    held *h = data;
    ASSERT_OK(rjq_job_complete(h->job, "", 0, on_completed, h));
}

static void hold_a_while(rjq_job *job, void *data) {
    busy *b = data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    held *h = malloc(sizeof *h);
    ASSERT(h != NULL);
    h->b = b;
    h->job = job;
    h->g = p[0] == 'a' ? 0 : 1;
    b->started++;
    if (++b->running[h->g] > b->max[h->g]) b->max[h->g] = b->running[h->g];
    long long n = active_in(b->rc, h->g ? "b" : "a"); /* (just after a start: the most) */
    if (n > b->max_server[h->g]) b->max_server[h->g] = n;
    struct timeval tv = {0, 15000}; /* (the job's work: 15 ms) */
    ASSERT(event_base_once(b->base, -1, EV_TIMEOUT, finish_later, h, &tv) == 0);
}

TEST(group_concurrency_holds_across_three_clients) {
    test_env e;
    env_start(&e, "gc");
    set_limits(&e, NULL, 2, 0); /* every group: 2 at once */
    set_limits(&e, "b", 3, 0);  /* b's own */
    char p[16];
    for (int i = 0; i < 40; i++) {
        snprintf(p, sizeof p, "a%d", i);
        ASSERT_OK(enqueue_in(&e, e.q, p, "a", 0).status);
        snprintf(p, sizeof p, "b%d", i);
        ASSERT_OK(enqueue_in(&e, e.q, p, "b", 0).status);
    }
    busy b;
    memset(&b, 0, sizeof b);
    b.base = e.base;
    b.rc = e.rc;
    rjq_client *cs[3];
    rjq_queue *qs[3];
    rjq_worker *ws[3];
    rjq_worker_options wo = quiet_worker_options(4);
    for (int i = 0; i < 3; i++) {
        cs[i] = client_for(e.base, &e.s);
        ASSERT_OK(rjq_queue_open(cs[i], "gc", NULL, &qs[i]));
        ASSERT_OK(rjq_worker_start(qs[i], &wo, hold_a_while, &b, &ws[i]));
    }
    WAIT_FOR(e.base, b.done == 80, 30000);
    /* (the clients' own count may see one more: a completion's reply can
     * come after the start its freed slot allowed) */
    printf("max active on the server: a %lld (limit 2), b %lld (limit 3); in the clients: a %d, b %d\n",
           b.max_server[0], b.max_server[1], b.max[0], b.max[1]);
    ASSERT(b.max_server[0] >= 1 && b.max_server[0] <= 2);
    ASSERT(b.max_server[1] >= 1 && b.max_server[1] <= 3);
    groups_wait l = groups_of(&e, "a");
    ASSERT_EQ(0, l.active[0]);
    ASSERT_EQ(0, l.depth[0]);
    for (int i = 0; i < 3; i++) {
        worker_stop_wait(e.base, ws[i]);
        rjq_client_free(cs[i]);
    }
    env_stop(&e);
}

TEST(pausing_one_group_stops_only_it) {
    test_env e;
    env_start(&e, "gz");
    pause_group(&e, "a", 1);
    char p[16];
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "a%d", i);
        ASSERT_OK(enqueue_in(&e, e.q, p, "a", 0).status);
        snprintf(p, sizeof p, "b%d", i);
        ASSERT_OK(enqueue_in(&e, e.q, p, "b", 0).status);
    }
    ran r;
    rjq_worker *w = start_noting(&e, &r, 2);
    WAIT_FOR(e.base, r.n == 5, 10000);
    wait_worker_started(e.base, e.c, e.q, e.rc, "gz"); /* (its claims since have run) */
    ASSERT_EQ(5, r.n);
    for (int i = 0; i < 5; i++) ASSERT_EQ('b', r.order[i][0]);
    groups_wait l = groups_of(&e, "a");
    ASSERT_EQ(5, l.depth[0]);
    ASSERT_EQ(1, l.paused[0]);
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{gz}:g:ring")); /* (costs no claim) */
    pause_group(&e, "a", 0); /* resumes: the doorbell wakes the idle worker */
    WAIT_FOR(e.base, r.n == 10, 10000);
    for (int i = 5; i < 10; i++) ASSERT_EQ('a', r.order[i][0]);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* Group a (limit 1) with jobs "first" and "second" in queue qn: a worker
 * that claims by the claim script (token tok) takes "first", whose id goes
 * in jid (the library is loaded: set_limits ran a script). */
/* Every group listed in queue qn's g:all is in its depth index exactly
 * when it has ready ids, at minus their count (the ids in its ready list
 * and priority set), and in g:busy exactly when it has none but runs
 * jobs; no other group is in either. */
static void depth_index_matches(redisContext *rc, const char *qn) {
    redisReply *all = server_cmd(rc, "ZRANGE t:{%s}:g:all 0 -1", qn);
    ASSERT(all->type == REDIS_REPLY_ARRAY);
    for (size_t i = 0; i < all->elements; i++) {
        const char *g = all->element[i]->str;
        long long real = server_int(rc, "LLEN t:{%s}:g:r:%s", qn, g) +
                         server_int(rc, "ZCARD t:{%s}:g:p:%s", qn, g);
        redisReply *sc = server_cmd(rc, "ZSCORE t:{%s}:g:depth %s", qn, g);
        if (real > 0) {
            ASSERT(sc->type == REDIS_REPLY_STRING);
            ASSERT_EQ(-real, atoll(sc->str));
        } else {
            ASSERT(sc->type == REDIS_REPLY_NIL);
        }
        freeReplyObject(sc);
        redisReply *ac = server_cmd(rc, "HGET t:{%s}:g:act %s", qn, g); /* (its running count) */
        long long running_only = real == 0 && ac->type == REDIS_REPLY_STRING && atoll(ac->str) > 0;
        freeReplyObject(ac);
        redisReply *b = server_cmd(rc, "ZSCORE t:{%s}:g:busy %s", qn, g);
        ASSERT_EQ(running_only, (long long)(b->type == REDIS_REPLY_STRING));
        freeReplyObject(b);
    }
    ASSERT_EQ((long long)all->elements >= server_int(rc, "ZCARD t:{%s}:g:depth", qn) +
                                              server_int(rc, "ZCARD t:{%s}:g:busy", qn), 1);
    freeReplyObject(all);
}

static void claim_first_of_limited_group(test_env *e, const char *qn, const char *tok, char *jid,
                                         size_t len) {
    set_limits(e, "a", 1, 0);
    ASSERT_OK(enqueue_in(e, e->q, "first", "a", 0).status);
    ASSERT_OK(enqueue_in(e, e->q, "second", "a", 0).status);
    redisReply *r = claim_as_worker(e, qn, "5", tok);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4 + 5);
    ASSERT_STREQ("first", r->element[5]->str);
    snprintf(jid, len, "%s", r->element[4]->str);
    freeReplyObject(r);
}

TEST(a_reclaimed_group_job_goes_back_to_its_group_and_frees_its_slot) {
    test_env e;
    env_start(&e, "gr");
    /* a worker that then hangs claims: the limit lets one start */
    char jid[64];
    claim_first_of_limited_group(&e, "gr", "cx.w.1", jid, sizeof jid);
    groups_wait l = groups_of(&e, "a");
    ASSERT_EQ(1, l.depth[0]);
    ASSERT_EQ(1, l.active[0]);
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{gr}:g:ring")); /* (at its limit: out of the ring) */
    /* its lease runs out: the sweep returns it to the head of its group
     * and frees its slot */
    rjq_stats before = get_stats(e.base, e.q);
    ASSERT_EQ(1, before.ready);
    ASSERT_EQ(1, before.active);
    freeReplyObject(server_cmd(e.rc, "ZADD t:{gr}:active 1 %s", jid));
    count_wait cw = {0, 0, 0};
    ASSERT_OK(rjq_queue_reclaim(e.q, on_count, &cw));
    WAIT_FOR(e.base, cw.done == 1, 10000);
    ASSERT_EQ(1, cw.n);
    ASSERT_STREQ("ready", get_info(e.base, e.q, jid).state);
    rjq_stats st = get_stats(e.base, e.q); /* (the queue's depths count it ready again) */
    ASSERT_EQ(2, st.ready);
    ASSERT_EQ(0, st.active);
    ASSERT_EQ(1, st.reclaimed);
    l = groups_of(&e, "a");
    ASSERT_EQ(2, l.depth[0]);
    ASSERT_EQ(0, l.active[0]);
    depth_index_matches(e.rc, "gr");
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{gr}:g:ring"));
    ASSERT_EQ(0, server_int(e.rc, "LLEN t:{gr}:ready")); /* (not the queue's ready) */
    ran rn;
    rjq_worker *w = start_noting(&e, &rn, 2);
    WAIT_FOR(e.base, rn.n == 2, 10000);
    ASSERT_STREQ("first", rn.order[0]);
    ASSERT_STREQ("second", rn.order[1]);
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{gr}:g:job t:{gr}:g:a:a") == 0, 10000);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{gr}:g:depth"));
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

TEST(a_failed_group_job_is_retried_in_its_group) {
    test_env e;
    env_start(&e, "gt");
    set_limits(&e, "a", 1, 0);
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.group = "a";
    o.backoff.type = RJQ_BACKOFF_FIXED;
    o.backoff.base_ms = 1;
    ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
    last_held h = {NULL, 0};
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, hold_last_handler, &h, &w));
    WAIT_FOR(e.base, h.started == 1, 10000);
    ASSERT_OK(rjq_job_fail(h.job, "boom", 0, -1, NULL, NULL));
    /* retried after its backoff, through the groups' delayed set */
    WAIT_FOR(e.base, h.started == 2, 10000);
    ASSERT_EQ(1, server_int(e.rc, "SCARD t:{gt}:g:a:a"));
    ASSERT_OK(rjq_job_complete(h.job, "", 0, NULL, NULL));
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{gt}:g:job t:{gt}:g:a:a") == 0, 10000);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{gt}:g:depth")); /* (in and out of it again) */
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

TEST(bad_group_names_and_unsupported_combinations_are_refused) {
    test_env e;
    env_start(&e, "gb");
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.group = "has space";
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue(e.q, "x", 1, &o, NULL, NULL));
    o.group = "";
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue(e.q, "x", 1, &o, NULL, NULL));
    o.group = "ok";
    /* a batch mixing jobs with and without a group; one with a bad group */
    rjq_enqueue_item its[2] = {{sizeof its[0], "x", 1, &o}, {sizeof its[1], "y", 1, NULL}};
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue_batch(e.q, its, 2, NULL, NULL));
    rjq_job_options bad = o;
    bad.group = "has space";
    its[1].opts = &bad;
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue_batch(e.q, its, 2, NULL, NULL));
    o.id = "dup";
    o.debounce = 1;
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue(e.q, "x", 1, &o, NULL, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_pause_group(e.q, NULL, 1, NULL, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_list_groups(e.q, NULL, 0, 0, on_groups, NULL));
    ASSERT_EQ(0, server_int(e.rc, "DBSIZE"));
    env_stop(&e);
}

TEST(a_plain_queue_claims_and_completes_without_touching_group_keys) {
    test_env e;
    env_start(&e, "gn");
    for (int i = 0; i < 5; i++) enqueue_x_ok(e.base, e.q, NULL, 0, 0);
    ran r;
    rjq_worker *w = start_noting(&e, &r, 2);
    WAIT_FOR(e.base, r.n == 5, 10000);
    worker_stop_wait(e.base, w);
    redisReply *k = server_cmd(e.rc, "KEYS t:{gn}:g:*");
    ASSERT(k->type == REDIS_REPLY_ARRAY && k->elements == 0);
    freeReplyObject(k);
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{gn}:meta groups"));
    env_stop(&e);
}

TEST(a_group_jobs_handler_reads_its_group_and_its_own_headers) {
    test_env e;
    env_start(&e, "gh");
    rjq_header hs[] = {{"traceparent", "00-abc-def-01"}};
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.group = "tenant-7";
    o.headers = hs;
    o.nheaders = 1;
    ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
    char seen[32] = "";
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_noting_group, seen, &w));
    WAIT_FOR(e.base, seen[0] != '\0', 10000);
    ASSERT_STREQ("tenant-7", seen);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

TEST(a_group_job_enqueued_while_the_queue_is_opening_waits_and_goes_to_its_group) {
    test_env e;
    env_open(&e, "go", NULL); /* (the queue's layout not read yet: the enqueue is held) */
    char group[16] = "early";
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.group = group;
    enqueue_wait w;
    memset(&w, 0, sizeof w);
    ASSERT_OK(rjq_enqueue(e.q, "x", 1, &o, on_enqueue_wait, &w));
    memset(group, 0, sizeof group); /* (copied during the call) */
    WAIT_FOR(e.base, w.done, 10000);
    ASSERT_OK(w.status);
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{go}:g:r:early"));
    env_stop(&e);
}

TEST(cancelling_a_running_group_job_frees_its_slot) {
    test_env e;
    env_start(&e, "gk");
    set_limits(&e, "a", 1, 0);
    ASSERT_OK(enqueue_in(&e, e.q, "first", "a", 0).status);
    ASSERT_OK(enqueue_in(&e, e.q, "second", "a", 0).status);
    last_held h = {NULL, 0};
    rjq_worker_options wo = quiet_worker_options(2);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, hold_last_handler, &h, &w));
    WAIT_FOR(e.base, h.started == 1, 10000);
    wait_worker_started(e.base, e.c, e.q, e.rc, "gk");
    ASSERT_EQ(1, h.started); /* (the limit) */
    char jid[64];
    snprintf(jid, sizeof jid, "%s", rjq_job_get_id(h.job));
    rjq_job *old = h.job;
    ASSERT_OK(rjq_queue_cancel(e.q, jid, NULL, NULL));
    /* its slot freed: "second" starts */
    WAIT_FOR(e.base, h.started == 2, 10000);
    ASSERT_OK(rjq_job_complete(old, "", 0, NULL, NULL)); /* (refused: cancelled) */
    ASSERT_STREQ("cancelled", get_info(e.base, e.q, jid).state);
    ASSERT_OK(rjq_job_complete(h.job, "", 0, NULL, NULL));
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* rjq_stats.ready counts the queue's group jobs that are ready (the group
 * scripts' 'gready' counter): enqueued, started, reclaimed, cancelled,
 * retried and drained, beside the queue's own ready jobs. */
TEST(queue_stats_ready_counts_its_groups_ready_jobs) {
    test_env e;
    env_start(&e, "gs");
    set_limits(&e, "a", 1, 0);
    ASSERT_OK(enqueue_in(&e, e.q, "a1", "a", 0).status);
    ASSERT_OK(enqueue_in(&e, e.q, "a2", "a", 0).status);
    ASSERT_OK(enqueue_in(&e, e.q, "b1", "b", 3).status);
    ASSERT_OK(enqueue_in(&e, e.q, "plain", NULL, 0).status);
    ASSERT_EQ(4, get_stats(e.base, e.q).ready);
    /* a claim (as a worker sends it) takes one group job and the plain one
     * ("a" is limited to one) */
    redisReply *r = claim_as_worker(&e, "gs", "5", "cx.w.1");
    ASSERT(r->type == REDIS_REPLY_ARRAY);
    size_t got = (r->elements - 4) / 5;
    char a1[64] = "";
    for (size_t i = 0; i < got; i++)
        if (strcmp(r->element[4 + 5 * i + 1]->str, "a1") == 0)
            snprintf(a1, sizeof a1, "%s", r->element[4 + 5 * i]->str);
    freeReplyObject(r);
    ASSERT_EQ(3, (long long)got); /* plain, a1, b1 */
    ASSERT(a1[0] != '\0');
    rjq_stats st = get_stats(e.base, e.q);
    ASSERT_EQ(1, st.ready); /* a2 */
    ASSERT_EQ(3, st.active);
    /* a1's lease runs out: back in its group, ready again */
    freeReplyObject(server_cmd(e.rc, "ZADD t:{gs}:active 1 %s", a1));
    count_wait cw = {0, 0, 0};
    ASSERT_OK(rjq_queue_reclaim(e.q, on_count, &cw));
    WAIT_FOR(e.base, cw.done == 1, 10000);
    ASSERT_EQ(2, get_stats(e.base, e.q).ready);
    /* a cancelled ready group job is ready no more (its id stays in its
     * group's list until a claim drops it) */
    ASSERT_OK(rjq_queue_cancel(e.q, a1, NULL, NULL));
    WAIT_FOR(e.base, strcmp(get_info(e.base, e.q, a1).state, "cancelled") == 0, 10000);
    ASSERT_EQ(1, get_stats(e.base, e.q).ready);
    ASSERT_EQ(2, server_int(e.rc, "LLEN t:{gs}:g:r:a"));
    /* a worker drains the rest: nothing ready, the counter back at 0 (its
     * claim finds a1's left-behind id first: counted against "a"'s limit
     * of 1 in that call, the group left the ring and a2 never started) */
    ran rn;
    rjq_worker *w = start_noting(&e, &rn, 2);
    WAIT_FOR(e.base, rn.n == 1, 10000);
    ASSERT_STREQ("a2", rn.order[0]);
    WAIT_FOR(e.base, server_int(e.rc, "LLEN t:{gs}:g:r:a") == 0, 10000);
    ASSERT_EQ(0, get_stats(e.base, e.q).ready);
    ASSERT_EQ(0, server_int(e.rc, "HGET t:{gs}:stats gready"));
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* The listing only reads (a read-only monitor user runs it: test_acl):
 * a listed group left with nothing is not shown and stays in the list;
 * the completion that empties a group drops it. */
TEST(listing_groups_only_reads_and_the_completion_that_empties_a_group_unlists_it) {
    test_env e;
    env_start(&e, "gl");
    ASSERT_OK(enqueue_in(&e, e.q, "x", "busy", 0).status);
    freeReplyObject(server_cmd(e.rc, "ZADD t:{gl}:g:all 0 stale")); /* (listed, nothing left) */
    groups_wait l = groups_of(&e, NULL);
    ASSERT_EQ(1, l.total);
    ASSERT_STREQ("busy", l.name[0]);
    ASSERT_EQ(2, server_int(e.rc, "ZCARD t:{gl}:g:all")); /* (not written) */
    ran rn;
    rjq_worker *w = start_noting(&e, &rn, 1);
    WAIT_FOR(e.base, rn.n == 1, 10000);
    WAIT_FOR(e.base, server_int(e.rc, "ZCARD t:{gl}:g:all") == 1, 10000); /* (busy dropped) */
    ASSERT_EQ(0, server_int(e.rc, "ZRANK t:{gl}:g:all stale"));
    ASSERT_EQ(0, groups_of(&e, NULL).total);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* One group asked for is listed with zeros when it has nothing, and
 * counted in the total (groups with ready or running jobs) only when it
 * has work: a ready job, or a running one only. */
TEST(one_group_total_counts_it_only_with_ready_or_running_jobs) {
    test_env e;
    env_start(&e, "g1");
    groups_wait l = groups_of(&e, "nobody");
    ASSERT_EQ(0, l.total);
    ASSERT_EQ(1, (long long)l.n);
    ASSERT_STREQ("nobody", l.name[0]);
    ASSERT_EQ(0, l.depth[0]);
    ASSERT_EQ(0, l.active[0]);
    ASSERT_OK(enqueue_in(&e, e.q, "x", "one", 0).status);
    l = groups_of(&e, "one");
    ASSERT_EQ(1, l.total);
    ASSERT_EQ(1, l.depth[0]);
    ASSERT_EQ(0, groups_of(&e, "other").total); /* (another group's work is not counted) */
    /* its job claimed (as a worker sends it): running only, still counted */
    redisReply *r = claim_as_worker(&e, "g1", "1", "cx.w.1");
    ASSERT(r->type == REDIS_REPLY_ARRAY);
    ASSERT_EQ(1, (long long)(r->elements - 4) / 5);
    freeReplyObject(r);
    l = groups_of(&e, "one");
    ASSERT_EQ(1, l.total);
    ASSERT_EQ(0, l.depth[0]);
    ASSERT_EQ(1, l.active[0]);
    env_stop(&e);
}

/* A group left in g:busy (the listing's "running only" index) with no
 * running count in g:act (its stale slot members dropped, GROUPS.active,
 * before any tidy) is neither listed, as running 0, nor counted in the
 * total; the listing writes nothing (a monitor user runs it). */
TEST(listing_groups_skips_a_busy_entry_with_nothing_running_and_leaves_it) {
    test_env e;
    env_start(&e, "gb");
    ASSERT_OK(enqueue_in(&e, e.q, "x", "deep", 0).status);
    freeReplyObject(server_cmd(e.rc, "ZADD t:{gb}:g:busy 0 ghost")); /* (nothing in g:act) */
    groups_wait l = groups_of(&e, NULL);
    ASSERT_EQ(1, l.total);
    ASSERT_EQ(1, l.n);
    ASSERT_STREQ("deep", l.name[0]);
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{gb}:g:busy")); /* (not written) */
    env_stop(&e);
}

/* A listing whose page reaches the groups with running jobs only
 * (g:busy) reads every row's running count and started counter in one
 * HMGET of g:act, the busy page's with the depth index's (gstats.lua: a
 * busy group's running count was read twice, once to skip a stale entry
 * and once with the rows): the rows as before, a busy entry with nothing
 * running neither listed nor counted. */
TEST(a_listing_reaching_the_busy_groups_reads_their_running_counts_once) {
    test_env e;
    env_start(&e, "gbo");
    ASSERT_OK(enqueue_in(&e, e.q, "r0", "run", 0).status);
    redisReply *r = claim_as_worker(&e, "gbo", "1", "cx.w.1"); /* (run: running only, in g:busy) */
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4 + 5);
    freeReplyObject(r);
    ASSERT_EQ(0, server_int(e.rc, "ZRANK t:{gbo}:g:busy run"));
    ASSERT_OK(enqueue_in(&e, e.q, "d0", "deep", 0).status);
    ASSERT_OK(enqueue_in(&e, e.q, "d1", "deep", 0).status);
    freeReplyObject(server_cmd(e.rc, "ZADD t:{gbo}:g:busy 0 ghost")); /* (nothing in g:act) */
    freeReplyObject(server_cmd(e.rc, "CONFIG RESETSTAT"));
    long long before = server_commands_run(e.rc);
    groups_wait l = groups_of(&e, NULL);
    long long hmgets = server_calls(e.rc, "hmget"), cmds = server_commands_run(e.rc) - before;
    fprintf(stderr, "  a listing of 2 groups, one running only: %lld commands, %lld HMGET\n", cmds, hmgets);
    ASSERT_EQ(2, l.total);
    ASSERT_EQ(2, (long long)l.n);
    ASSERT_STREQ("deep", l.name[0]);
    ASSERT_EQ(2, l.depth[0]);
    ASSERT_EQ(0, l.active[0]);
    ASSERT_EQ(0, l.started[0]);
    ASSERT_STREQ("run", l.name[1]);
    ASSERT_EQ(0, l.depth[1]);
    ASSERT_EQ(1, l.active[1]);
    ASSERT_EQ(1, l.started[1]);
    ASSERT_EQ(1, hmgets);
    /* a page of the busy groups only (offset past the index): the same */
    memset(&l, 0, sizeof l);
    ASSERT_OK(rjq_queue_list_groups(e.q, NULL, 1, 8, on_groups, &l));
    WAIT_FOR(e.base, l.done == 1, 10000);
    ASSERT_OK(l.status);
    ASSERT_EQ(2, l.total);
    ASSERT_EQ(1, (long long)l.n);
    ASSERT_STREQ("run", l.name[0]);
    ASSERT_EQ(1, l.active[0]);
    ASSERT_EQ(1, l.started[0]);
    ASSERT_EQ(2, server_calls(e.rc, "hmget"));
    env_stop(&e);
}

static void on_done_status(rjq_client *c, int status, void *data) {
    (void)c;
    int *d = data;
    d[0]++;
    d[1] = status;
}

/* A group job reclaimed while its worker still holds it (lease lost, or
 * run time over: timed_out, its handle told RJQ_ETIMEDOUT and expired),
 * and given to the same worker again: finishing the first run's handle is
 * refused (fenced), leaves the second run alone (it runs on and its
 * completion is the one accepted) and trips no assertion of the worker's
 * job lists (rjq__w_job_move). */
static void old_handle_after_the_same_worker_got_the_job_again(const char *qn, int timed_out,
                                                               const char *group) {
    test_env e;
    env_start(&e, qn);
    if (group) set_limits(&e, group, 1, 0);
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.group = group;
    o.timeout_ms = 60000;
    o.backoff.type = RJQ_BACKOFF_FIXED;
    o.backoff.base_ms = 1;
    ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
    last_held h = {NULL, 0};
    rjq_worker_options wo = quiet_worker_options(2);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, hold_last_handler, &h, &w));
    WAIT_FOR(e.base, h.started == 1, 10000);
    rjq_job *old = h.job;
    char jid[64];
    snprintf(jid, sizeof jid, "%s", rjq_job_get_id(old));
    /* its lease (or run time) is over: the sweep returns it to its group,
     * the same worker (a free slot) claims it again */
    freeReplyObject(server_cmd(e.rc, "ZADD t:{%s}:active 1 %s", qn, jid));
    if (timed_out) freeReplyObject(server_cmd(e.rc, "ZADD t:{%s}:deadlines 1 %s", qn, jid));
    count_wait cw = {0, 0, 0};
    ASSERT_OK(rjq_queue_reclaim(e.q, on_count, &cw));
    WAIT_FOR(e.base, cw.done == 1, 10000);
    if (timed_out) WAIT_FOR(e.base, rjq_job_get_notice(old) == RJQ_ETIMEDOUT, 10000);
    WAIT_FOR(e.base, h.started == 2, 10000);
    rjq_job *again = h.job;
    ASSERT(again != old);
    ASSERT_STREQ(jid, rjq_job_get_id(again));
    ASSERT_EQ(2, rjq_job_get_attempt(again));
    int d1[2] = {0, 0};
    ASSERT_OK(rjq_job_complete(old, "old", 3, on_done_status, d1));
    WAIT_FOR(e.base, d1[0] == 1, 10000);
    ASSERT(d1[1] != RJQ_OK);
    ASSERT_STREQ("active", get_info(e.base, e.q, jid).state);
    if (group) ASSERT_EQ(1, server_int(e.rc, "SCARD t:{%s}:g:a:a", qn));
    ASSERT_EQ(0, rjq_job_get_notice(again));
    int d2[2] = {0, 0};
    ASSERT_OK(rjq_job_complete(again, "new", 3, on_done_status, d2));
    WAIT_FOR(e.base, d2[0] == 1, 10000);
    ASSERT_OK(d2[1]);
    ASSERT_STREQ("completed", get_info(e.base, e.q, jid).state);
    if (group) WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{%s}:g:job t:{%s}:g:a:a", qn, qn) == 0, 10000);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

TEST(finishing_a_reclaimed_jobs_old_handle_after_the_same_worker_got_it_again_is_fenced) {
    old_handle_after_the_same_worker_got_the_job_again("gz", 0, "a");
}

/* (not group-specific: the same for a job of no group) */
TEST(finishing_a_reclaimed_plain_jobs_old_handle_after_the_same_worker_got_it_again_is_fenced) {
    old_handle_after_the_same_worker_got_the_job_again("gx", 0, NULL);
}

TEST(finishing_a_timed_out_jobs_old_handle_after_the_same_worker_got_it_again_is_fenced) {
    old_handle_after_the_same_worker_got_the_job_again("gy", 1, "a");
}

/* A handler that finishes the handle noted in old at its second start. */
typedef struct finish_old_inside {
    rjq_job *old, *cur;
    long started;
    int d[2];
} finish_old_inside;

static void finish_old_in_handler(rjq_job *job, void *data) {
    finish_old_inside *f = data;
    f->started++;
    if (f->started == 2 && f->old) ASSERT_OK(rjq_job_complete(f->old, "old", 3, on_done_status, f->d));
    f->cur = job;
}

/* The same, the old handle finished from inside the handler of the job's
 * next run (in the claim reply's loop that made the new handle). */
TEST(finishing_an_old_handle_inside_the_handler_of_its_jobs_next_run_is_fenced) {
    test_env e;
    env_start(&e, "gw");
    set_limits(&e, "a", 1, 0);
    ASSERT_OK(enqueue_in(&e, e.q, "x", "a", 0).status);
    finish_old_inside f;
    memset(&f, 0, sizeof f);
    rjq_worker_options wo = quiet_worker_options(2);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, finish_old_in_handler, &f, &w));
    WAIT_FOR(e.base, f.started == 1, 10000);
    f.old = f.cur;
    char jid[64];
    snprintf(jid, sizeof jid, "%s", rjq_job_get_id(f.old));
    freeReplyObject(server_cmd(e.rc, "ZADD t:{gw}:active 1 %s", jid));
    count_wait cw = {0, 0, 0};
    ASSERT_OK(rjq_queue_reclaim(e.q, on_count, &cw));
    WAIT_FOR(e.base, f.started == 2 && f.d[0] == 1, 10000);
    ASSERT(f.d[1] != RJQ_OK);
    int d2[2] = {0, 0};
    ASSERT_OK(rjq_job_complete(f.cur, "new", 3, on_done_status, d2));
    WAIT_FOR(e.base, d2[0] == 1, 10000);
    ASSERT_OK(d2[1]);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* ---- group jobs in the queue's listings, bound and depths ---------------- */

static enqueue_wait enqueue_id_in(test_env *e, const char *id, const char *group, int priority,
                                  long long delay_ms) {
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = id;
    o.group = group;
    o.priority = priority;
    o.delay_ms = delay_ms;
    return enqueue_job(e->base, e->q, "x", &o);
}

TEST(ready_listing_shows_group_jobs_after_the_queues_own_in_claim_order_per_group) {
    test_env e;
    env_start(&e, "gj");
    ASSERT_OK(enqueue_id_in(&e, "b1", "beta", 0, 0).status);
    ASSERT_OK(enqueue_id_in(&e, "plain", NULL, 0, 0).status);
    ASSERT_OK(enqueue_id_in(&e, "a1", "alpha", 0, 0).status);
    ASSERT_OK(enqueue_id_in(&e, "a2", "alpha", 0, 0).status);
    ASSERT_OK(enqueue_id_in(&e, "a-hi", "alpha", 5, 0).status);
    ASSERT_OK(enqueue_id_in(&e, "a-lo", "alpha", -2, 0).status);
    ASSERT_OK(enqueue_id_in(&e, "b2", "beta", 0, 0).status);
    /* the queue's own first, then group by group (names' order), each in
     * its claim order (priorities, FIFO) */
    ASSERT_STREQ("plain,a-hi,a1,a2,a-lo,b1,b2", list_ids(e.base, e.q, RJQ_STATE_READY, 0, 100));
    ASSERT_STREQ("a2,a-lo,b1", list_ids(e.base, e.q, RJQ_STATE_READY, 3, 3)); /* pages across groups */
    ASSERT_STREQ("b2", list_ids(e.base, e.q, RJQ_STATE_READY, 6, 3));
    ASSERT_STREQ("", list_ids(e.base, e.q, RJQ_STATE_READY, 7, 3));
    /* a cancelled group job is left out (its id stays in its group's list) */
    ASSERT_OK(rjq_queue_cancel(e.q, "a1", NULL, NULL));
    WAIT_FOR(e.base, strcmp(get_info(e.base, e.q, "a1").state, "cancelled") == 0, 10000);
    ASSERT_EQ(2, server_int(e.rc, "LLEN t:{gj}:g:r:alpha")); /* (a1, a2) */
    ASSERT_STREQ("plain,a-hi,a2,a-lo,b1,b2", list_ids(e.base, e.q, RJQ_STATE_READY, 0, 100));
    ASSERT_EQ(6, get_stats(e.base, e.q).ready); /* (the listing and the depth agree) */
    env_stop(&e);
}

TEST(a_bounded_queue_counts_group_jobs_and_refuses_a_group_job_past_its_bound) {
    test_env e;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.max_waiting = 4;
    env_start_queue(&e, "gw", &qo);
    ASSERT_OK(enqueue_id_in(&e, "g1", "a", 0, 0).status);
    ASSERT_OK(enqueue_id_in(&e, "g2", "b", 3, 0).status);
    ASSERT_OK(enqueue_id_in(&e, "g3", "a", 0, 60000).status); /* (a delayed group job counts) */
    ASSERT_OK(enqueue_id_in(&e, "p1", NULL, 0, 0).status);
    long long seq = server_int(e.rc, "HGET t:{gw}:stats seq");
    /* full: a group job and a plain one are refused, nothing written */
    ASSERT_EQ(RJQ_EFULL, enqueue_id_in(&e, "g4", "c", 0, 0).status);
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "max_waiting 4") != NULL);
    ASSERT_EQ(RJQ_EFULL, enqueue_id_in(&e, "p2", NULL, 0, 0).status);
    ASSERT_EQ(seq, server_int(e.rc, "HGET t:{gw}:stats seq"));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{gw}:payload g4"));
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{gw}:g:r:c"));
    /* an id that exists is reported as it is, not refused */
    enqueue_wait again = enqueue_id_in(&e, "g1", "a", 0, 0);
    ASSERT_OK(again.status);
    ASSERT_EQ(1, again.existed);
    /* a started group job waits no more: room for one */
    ran r;
    set_limits(&e, "a", 0, 0);
    pause_group(&e, "b", 1);
    rjq_worker *w = start_noting(&e, &r, 2);
    WAIT_FOR(e.base, r.n == 2, 10000); /* p1, g1 */
    worker_stop_wait(e.base, w);
    ASSERT_OK(enqueue_id_in(&e, "g4", "c", 0, 0).status);
    ASSERT_OK(enqueue_id_in(&e, "p2", NULL, 0, 0).status);
    ASSERT_EQ(RJQ_EFULL, enqueue_id_in(&e, "g5", "c", 0, 0).status);
    /* a cancelled delayed group job waits no more either */
    ASSERT_OK(rjq_queue_cancel(e.q, "g3", NULL, NULL));
    WAIT_FOR(e.base, strcmp(get_info(e.base, e.q, "g3").state, "cancelled") == 0, 10000);
    ASSERT_OK(enqueue_id_in(&e, "g5", "c", 0, 0).status);
    env_stop(&e);
}

TEST(delayed_depth_and_listing_count_group_jobs_waiting_a_delay_or_a_backoff) {
    test_env e;
    env_start(&e, "gd");
    ASSERT_OK(enqueue_id_in(&e, "own", NULL, 0, 50000).status);
    ASSERT_OK(enqueue_id_in(&e, "later", "a", 0, 60000).status);
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "retried";
    o.group = "b";
    o.backoff.type = RJQ_BACKOFF_FIXED;
    o.backoff.base_ms = 3600000;
    ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
    last_held h = {NULL, 0};
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, hold_last_handler, &h, &w));
    WAIT_FOR(e.base, h.started == 1, 10000);
    rjq_stats st = get_stats(e.base, e.q);
    ASSERT_EQ(1, st.active);
    ASSERT_EQ(2, st.delayed);
    long failed = 0;
    ASSERT_OK(rjq_job_fail(h.job, "boom", 0, -1, on_done_ok, &failed));
    WAIT_FOR(e.base, failed == 1, 10000);
    /* waiting for its backoff, in the groups' delayed set */
    st = get_stats(e.base, e.q);
    ASSERT_EQ(0, st.active);
    ASSERT_EQ(3, st.delayed);
    ASSERT_EQ(0, st.ready);
    ASSERT_STREQ("own,later,retried", list_ids(e.base, e.q, RJQ_STATE_DELAYED, 0, 10));
    ASSERT_STREQ("later", list_ids(e.base, e.q, RJQ_STATE_DELAYED, 1, 1));
    ASSERT_STREQ("retried", list_ids(e.base, e.q, RJQ_STATE_DELAYED, 2, 5));
    /* cancelled: out of the depth and the listing */
    ASSERT_OK(rjq_queue_cancel(e.q, "later", NULL, NULL));
    WAIT_FOR(e.base, strcmp(get_info(e.base, e.q, "later").state, "cancelled") == 0, 10000);
    ASSERT_EQ(2, get_stats(e.base, e.q).delayed);
    ASSERT_STREQ("own,retried", list_ids(e.base, e.q, RJQ_STATE_DELAYED, 0, 10));
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* An idle worker of several queues (rjq_worker_start_queues: each slot
 * registered for pushes) starts a group job enqueued later: the doorbell
 * rings (group jobs are not pushed) and the member that heard it claims
 * with its registered slots, as a worker of one queue does (before: it
 * never claimed; the job waited for ever). */
TEST(an_idle_worker_of_several_queues_starts_a_group_job_it_was_rung_for) {
    test_env e;
    env_start(&e, "gm");
    rjq_queue *other;
    ASSERT_OK(rjq_queue_open(e.c, "gm2", NULL, &other));
    rjq_queue *qs[2] = {e.q, other};
    int weights[2] = {1, 1};
    ran r;
    memset(&r, 0, sizeof r);
    rjq_worker_options wo = quiet_worker_options(4);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start_queues(qs, 2, RJQ_WORKER_WEIGHTED, weights, &wo, complete_noting, &r, &w));
    WAIT_FOR(e.base, server_int(e.rc, "HLEN t:{gm}:idle") > 0, 10000); /* (idle, registered) */
    ASSERT_OK(enqueue_in(&e, e.q, "late", "a", 0).status);
    WAIT_FOR(e.base, r.n == 1, 10000);
    ASSERT_STREQ("late", r.order[0]);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

typedef struct cpage {
    int done, status;
    char ids[1024];
    char next[300];
} cpage;

static void on_cpage(rjq_client *c, int status, const char *const *ids, size_t n, const char *next,
                     void *data) {
    cpage *p = data;
    (void)c;
    p->done++;
    p->status = status;
    join_ids(p->ids, sizeof p->ids, ids, n);
    snprintf(p->next, sizeof p->next, "%s", next ? next : "");
}

/* Every page of `limit` after the cursor, joined "a,b|c,d|e" (pages split
 * by '|'); between the first two pages `between` runs (may be NULL). */
static const char *cursor_pages(test_env *e, rjq_job_state st, long limit, void (*between)(test_env *)) {
    static char all[2048];
    all[0] = '\0';
    char after[300] = "";
    for (int k = 0; k < 50; k++) {
        cpage p;
        memset(&p, 0, sizeof p);
        ASSERT_OK(rjq_queue_list_jobs_after(e->q, st, after, limit, on_cpage, &p));
        WAIT_FOR(e->base, p.done == 1, 10000);
        ASSERT_OK(p.status);
        size_t used = strlen(all);
        snprintf(all + used, sizeof all - used, "%s%s", k ? "|" : "", p.ids);
        if (p.next[0] == '\0') return all;
        snprintf(after, sizeof after, "%s", p.next);
        if (k == 0 && between) between(e);
    }
    FAIL_AT(__FILE__, __LINE__, "no end of the pages");
    return all;
}

static void cancel_a2(test_env *e) {
    ASSERT_OK(rjq_queue_cancel(e->q, "a2", NULL, NULL));
    WAIT_FOR(e->base, strcmp(get_info(e->base, e->q, "a2").state, "cancelled") == 0, 10000);
}

TEST(cursor_pages_list_group_jobs_after_the_queues_own_and_skip_a_cancelled_one) {
    test_env e;
    env_start(&e, "gk");
    ASSERT_OK(enqueue_id_in(&e, "b1", "beta", 0, 0).status);
    ASSERT_OK(enqueue_id_in(&e, "plain", NULL, 0, 0).status);
    ASSERT_OK(enqueue_id_in(&e, "a1", "alpha", 0, 0).status);
    ASSERT_OK(enqueue_id_in(&e, "a2", "alpha", 0, 0).status);
    ASSERT_OK(enqueue_id_in(&e, "a-hi", "alpha", 5, 0).status);
    ASSERT_OK(enqueue_id_in(&e, "a-lo", "alpha", -2, 0).status);
    ASSERT_OK(enqueue_id_in(&e, "b2", "beta", 0, 0).status);
    ASSERT_OK(enqueue_id_in(&e, "d-own", NULL, 0, 50000).status);
    ASSERT_OK(enqueue_id_in(&e, "d-g", "beta", 0, 60000).status);
    /* the order of rjq_queue_list_jobs, in pages of 2 */
    ASSERT_STREQ("plain,a-hi|a1,a2|a-lo,b1|b2", cursor_pages(&e, RJQ_STATE_READY, 2, NULL));
    ASSERT_STREQ("plain,a-hi,a1,a2,a-lo,b1,b2", cursor_pages(&e, RJQ_STATE_READY, 100, NULL));
    ASSERT_STREQ("d-own|d-g|", cursor_pages(&e, RJQ_STATE_DELAYED, 1, NULL)); /* (a full page has a next) */
    /* a cancelled group job (its id left in its group) is left out, the
     * pages go on past it */
    ASSERT_STREQ("plain,a-hi|a1,a-lo|b1,b2|", cursor_pages(&e, RJQ_STATE_READY, 2, cancel_a2));
    /* a group cursor is checked as any */
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_list_jobs_after(e.q, RJQ_STATE_READY, "gbad name l x", 2, on_cpage, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_list_jobs_after(e.q, RJQ_STATE_READY, "galpha c x", 2, on_cpage, NULL));
    env_stop(&e);
}

/* The reclaim sweep frees the slots of all its group jobs at once (one
 * SREM per group, not per job) and learns the state it left each in from
 * its own moves (no read of the state it just wrote). */
TEST(reclaiming_jobs_of_two_groups_frees_their_slots_once_per_group) {
    test_env e;
    env_start(&e, "gk");
    set_limits(&e, "a", 3, 0);
    char p[16];
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "a%d", i);
        ASSERT_OK(enqueue_in(&e, e.q, p, "a", 0).status);
        snprintf(p, sizeof p, "b%d", i);
        ASSERT_OK(enqueue_in(&e, e.q, p, "b", 0).status);
    }
    /* a worker that then hangs claims all six (the claim script, as a
     * worker sends it) */
    redisReply *r = claim_as_worker(&e, "gk", "6", "cx.w.1");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4 + 5 * 6);
    for (size_t i = 4; i < r->elements; i += 5)
        freeReplyObject(server_cmd(e.rc, "ZADD t:{gk}:active 1 %s", r->element[i]->str));
    freeReplyObject(r);
    ASSERT_EQ(3, server_int(e.rc, "SCARD t:{gk}:g:a:a"));
    ASSERT_EQ(0, get_stats(e.base, e.q).ready);
    freeReplyObject(server_cmd(e.rc, "CONFIG RESETSTAT"));
    count_wait cw = {0, 0, 0};
    ASSERT_OK(rjq_queue_reclaim(e.q, on_count, &cw));
    WAIT_FOR(e.base, cw.done == 1, 10000);
    ASSERT_EQ(6, cw.n);
    ASSERT_EQ(1, server_calls(e.rc, "srem"));     /* (a's: b has no limit, no slots) */
    /* (its pin alone: none runs; the reclaim's release left a and b with
     * nothing for a moment, unlisted before their jobs came back: their
     * started counters set back, README "Groups") */
    ASSERT_EQ(1, server_int(e.rc, "HLEN t:{gk}:g:act"));
    ASSERT_EQ(0, server_calls(e.rc, "hget"));     /* (the states were not read back) */
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{gk}:g:a:a t:{gk}:g:a:b"));
    ASSERT_EQ(6, get_stats(e.base, e.q).ready);
    ASSERT_EQ(3, groups_of(&e, "a").depth[0]);
    ASSERT_EQ(3, groups_of(&e, "b").depth[0]);
    ran rn;
    rjq_worker *w = start_noting(&e, &rn, 2);
    WAIT_FOR(e.base, rn.n == 6, 10000);
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{gk}:g:job t:{gk}:g:all") == 0, 10000);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* ---- per-group rate limit and bound ------------------------------------------------ */

static void limit_group(test_env *e, const char *group, const rjq_group_limits *l) {
    count_wait w = {0, 0, 0};
    ASSERT_OK(rjq_queue_limit_group(e->q, group, l, on_count, &w));
    answered_ok(e, &w);
}

/* A child process with one worker of the given concurrency completing its
 * jobs at once; runs until killed. Quiet: no safety poll, no visits, so
 * only what the scripts tell it (the doorbell, a claim's "next") wakes it. */
static pid_t spawn_completing_worker(const test_server *s, const char *qname, int concurrency) {
    pid_t pid = fork_child();
    if (pid != 0) return pid;
    struct event_base *base = event_base_new();
    rjq_client *c = client_for(base, s);
    rjq_worker_options wo = quiet_worker_options(concurrency);
    rjq_worker *w;
    static ran r;
    memset(&r, 0, sizeof r);
    ASSERT_OK(rjq_worker_start(queue_for(c, qname), &wo, complete_noting, &r, &w));
    serve_until_killed(base, 60000);
}

/* Start times (server time, from the monitor) of the jobs whose ids begin
 * with 'r' (the rate-limited group) and 'f' (a free one). */
typedef struct group_starts {
    rjq_monitor *m;
    long long r[400], f[400];
    long nr, nf, f_before_r_done; /* f's starts seen before r's last */
} group_starts;

static void on_group_start(rjq_client *c, const char *ev, const char *id, void *data) {
    group_starts *s = data;
    (void)c;
    if (strcmp(ev, "active") != 0) return;
    long long t = rjq_monitor_get_time(s->m);
    if (id[0] == 'r' && s->nr < 400) s->r[s->nr++] = t;
    if (id[0] == 'f' && s->nf < 400) s->f[s->nf++] = t;
}

typedef struct monitored_poll {
    test_env *e;
    const char *queue;
    char channel[64];
} monitored_poll;

static int is_monitored(void *arg) {
    monitored_poll *p = arg;
    return server_int(p->e->rc, "EXISTS t:{%s}:monitored", p->queue) == 1 &&
           server_numsub(p->e->rc, p->channel) == 1;
}

#define RATED_JOBS 200
#define FREE_JOBS 100

TEST(group_rate_limit_of_50_per_second_holds_over_3_worker_processes_and_spares_other_groups) {
    test_env e;
    env_start(&e, "gq");
    static group_starts s;
    memset(&s, 0, sizeof s);
    ASSERT_OK(rjq_queue_monitor(e.q, on_group_start, &s, &s.m));
    monitored_poll mp = {&e, "gq", "t:{gq}:events"};
    ASSERT(loop_until_cond(e.base, is_monitored, &mp, 20000)); /* (a missed start never comes) */
    rjq_group_limits l = RJQ_GROUP_LIMITS_INIT;
    l.rate = 50;
    l.rate_window_ms = 1000;
    limit_group(&e, "r", &l);
    groups_wait gw = groups_of(&e, "r");
    ASSERT_EQ(1, gw.n);
    ASSERT_EQ(50, gw.rate[0]);
    ASSERT_EQ(1000, gw.window[0]);
    ASSERT_EQ(0, gw.bound[0]);
    char id[16];
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = id;
    for (int i = 0; i < RATED_JOBS; i++) {
        snprintf(id, sizeof id, "r%d", i);
        o.group = "r";
        ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
        if (i < FREE_JOBS) {
            snprintf(id, sizeof id, "f%d", i);
            o.group = "f";
            ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
        }
    }
    pid_t pids[3];
    for (int k = 0; k < 3; k++) pids[k] = spawn_completing_worker(&e.s, "gq", 10);
    /* the workers never poll (quiet: every 60 s) and their jobs end at
     * once: past the first window only a claim's "next start at T" wakes
     * them, so all starting long before a poll is the wake working */
    WAIT_FOR(e.base, s.nr == RATED_JOBS && s.nf == FREE_JOBS, 45000);
    /* (all completed before the workers go: nothing of them left active) */
    WAIT_FOR(e.base, server_int(e.rc, "HGET t:{gq}:stats retained") == RATED_JOBS + FREE_JOBS, 10000);
    for (int k = 0; k < 3; k++) {
        kill(pids[k], SIGKILL);
        reap(pids[k], 5000);
    }
    /* never more than 50 of r's starts in any second (server time) */
    long most = 0;
    for (long i = 0, j = 0; i < s.nr; i++) {
        ASSERT(i == 0 || s.r[i] >= s.r[i - 1]);
        while (s.r[j] <= s.r[i] - 1000) j++;
        if (i - j + 1 > most) most = i - j + 1;
    }
    ASSERT(most <= 50);
    /* the free group was not held to r's rate: all its jobs started while
     * r's still waited for their windows (r needs 3 windows past its first) */
    ASSERT(s.f[FREE_JOBS - 1] < s.r[RATED_JOBS - 1]);
    double span_s = (double)(s.r[RATED_JOBS - 1] - s.r[0]) / 1000.0;
    double rate = (double)(RATED_JOBS - 50) / span_s;
    fprintf(stderr, "group rate 50/s over 3 processes: %ld starts of r in %.3f s after the first, "
                    "%.1f/s sustained (%+.1f%%), most in one second %ld; f's %d done %.3f s after r's first\n",
            s.nr, span_s, rate, (rate / 50.0 - 1) * 100, most, FREE_JOBS,
            (double)(s.f[FREE_JOBS - 1] - s.r[0]) / 1000.0);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{gq}:g:job"));
    env_stop(&e);
}

TEST(a_group_rate_limit_set_as_the_default_applies_to_every_group_and_a_group_may_lift_it) {
    test_env e;
    env_start(&e, "gd");
    rjq_group_limits l = RJQ_GROUP_LIMITS_INIT;
    l.rate = 2;
    l.rate_window_ms = 600000; /* (no second window within the test) */
    limit_group(&e, NULL, &l);
    rjq_group_limits none = RJQ_GROUP_LIMITS_INIT;
    none.rate = RJQ_GROUP_NONE;
    limit_group(&e, "free", &none);
    char p[16];
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "a%d", i);
        ASSERT_OK(enqueue_in(&e, e.q, p, "a", 0).status);
        snprintf(p, sizeof p, "b%d", i);
        ASSERT_OK(enqueue_in(&e, e.q, p, "b", 0).status);
        snprintf(p, sizeof p, "free%d", i);
        ASSERT_OK(enqueue_in(&e, e.q, p, "free", 0).status);
    }
    ran r;
    rjq_worker *w = start_noting(&e, &r, 4);
    WAIT_FOR(e.base, r.n == 2 + 2 + 5, 10000);
    wait_worker_started(e.base, e.c, e.q, e.rc, "gd"); /* (its claims since have run) */
    ASSERT_EQ(9, r.n);
    /* a and b wait for their windows: out of the ring, in the rated set */
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{gd}:g:ring"));
    ASSERT_EQ(2, server_int(e.rc, "ZCARD t:{gd}:g:rated"));
    groups_wait gw = groups_of(&e, "a");
    ASSERT_EQ(3, gw.depth[0]);
    ASSERT_EQ(2, gw.rate[0]); /* (the defaults') */
    ASSERT_EQ(600000, gw.window[0]);
    ASSERT_EQ(0, groups_of(&e, "free").rate[0]);
    /* lifted for a: offered again, and its jobs start */
    limit_group(&e, "a", &none);
    WAIT_FOR(e.base, r.n == 12, 10000);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

TEST(an_enqueue_past_a_groups_max_waiting_is_refused_with_nothing_written) {
    test_env e;
    env_start(&e, "gm");
    rjq_group_limits l = RJQ_GROUP_LIMITS_INIT;
    l.max_waiting = 3;
    limit_group(&e, "a", &l);
    for (int i = 0; i < 3; i++) ASSERT_OK(enqueue_in(&e, e.q, "x", "a", 0).status);
    ASSERT_OK(enqueue_in(&e, e.q, "x", "b", 0).status); /* (another group: no bound) */
    redisReply *before = server_cmd(e.rc, "DUMP t:{gm}:stats");
    long long keys = server_int(e.rc, "DBSIZE");
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.group = "a";
    o.priority = 5; /* (its priority set counts too) */
    ASSERT_EQ(RJQ_EFULL, enqueue_job(e.base, e.q, "y", &o).status);
    redisReply *after = server_cmd(e.rc, "DUMP t:{gm}:stats");
    ASSERT(before->len == after->len && memcmp(before->str, after->len ? after->str : "", after->len) == 0);
    freeReplyObject(before);
    freeReplyObject(after);
    ASSERT_EQ(keys, server_int(e.rc, "DBSIZE"));
    ASSERT_EQ(3, groups_of(&e, "a").depth[0]);
    ASSERT_EQ(3, groups_of(&e, "a").bound[0]);
    /* a job started makes room for one more */
    ran r;
    rjq_worker *w = start_noting(&e, &r, 1);
    WAIT_FOR(e.base, r.n == 4, 10000);
    worker_stop_wait(e.base, w);
    for (int i = 0; i < 3; i++) ASSERT_OK(enqueue_in(&e, e.q, "x", "a", 0).status);
    ASSERT_EQ(RJQ_EFULL, enqueue_job(e.base, e.q, "y", &o).status);
    /* the bound lifted: taken */
    rjq_group_limits none = RJQ_GROUP_LIMITS_INIT;
    limit_group(&e, "a", &none);
    ASSERT_OK(enqueue_in(&e, e.q, "x", "a", 0).status);
    ASSERT_EQ(4, groups_of(&e, "a").depth[0]);
    env_stop(&e);
}

TEST(bad_group_limits_are_refused) {
    test_env e;
    env_start(&e, "gv");
    rjq_group_limits l = RJQ_GROUP_LIMITS_INIT;
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_limit_group(e.q, "a", NULL, NULL, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_limit_group(e.q, "bad name", &l, NULL, NULL));
    l.rate = -5;
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_limit_group(e.q, "a", &l, NULL, NULL));
    l.rate = 5;
    l.rate_window_ms = -1;
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_limit_group(e.q, "a", &l, NULL, NULL));
    l.rate_window_ms = 0;
#if LONG_MAX > 2147483647L
    l.max_waiting = 2147483648L;
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_limit_group(e.q, "a", &l, NULL, NULL));
#endif
    l.max_waiting = -2;
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_limit_group(e.q, "a", &l, NULL, NULL));
    ASSERT_EQ(0, server_int(e.rc, "DBSIZE"));
    env_stop(&e);
}

/* ---- push delivery of group jobs -------------------------------------------------- */

/* Slots of the single registration in queue q's idle hash whose push
 * channel is subscribed (-1: none, or not subscribed yet). */
static long registered_slots(redisContext *rc, const char *q) {
    redisReply *r = server_cmd(rc, "HGETALL t:{%s}:idle", q);
    long slots = -1;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
        const char *ch = strchr(r->element[0]->str, ' ');
        if (ch && server_numsub(rc, ch + 1) >= 1) slots = atol(r->element[1]->str);
    }
    freeReplyObject(r);
    return slots;
}

/* The claim script's calls so far: only a claim reads the held index with
 * ZRANGEBYLEX (its re-send check). */
static long long claims_run(redisContext *rc) {
    return server_calls(rc, "zrangebylex");
}

typedef struct holding {
    rjq_job *job[8];
    char id[8][16];
    long n;
} holding;

static void hold_noting(rjq_job *job, void *data) {
    holding *h = data;
    if (h->n < 8) {
        h->job[h->n] = job;
        snprintf(h->id[h->n], sizeof h->id[0], "%s", rjq_job_get_id(job));
    }
    h->n++;
}

/* Group a of e's queue starts at most one job per window_ms. */
static void rate_group_a(test_env *e, long window_ms) {
    rjq_group_limits l = RJQ_GROUP_LIMITS_INIT;
    l.rate = 1;
    l.rate_window_ms = window_ms;
    limit_group(e, "a", &l);
}

/* A worker of 3 slots on e's queue (named qn) whose handler holds its
 * jobs in h (zeroed first), its client's visits every reclaim_ms (0: the
 * quiet default); returned once its 3 idle slots are registered and its
 * start is over (wait_worker_started: each subscription's confirmation
 * makes it claim again, and on a loaded machine those came after the
 * registration was seen: CI's "claims == claims_run(e.rc): expected 1,
 * got 3" in one_turns_group_jobs_are_pushed..., the two claims counted
 * as the test's own). */
static rjq_worker *idle_holder(test_env *e, const char *qn, holding *h, long reclaim_ms) {
    memset(h, 0, sizeof *h);
    rjq_worker_options wo = quiet_worker_options(3);
    if (reclaim_ms > 0) wo.reclaim_ms = reclaim_ms;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e->q, &wo, hold_noting, h, &w));
    WAIT_FOR(e->base, registered_slots(e->rc, qn) == 3, 10000);
    wait_worker_started(e->base, e->c, e->q, e->rc, qn);
    return w;
}

TEST(an_idle_worker_gets_group_jobs_pushed_within_their_groups_limits) {
    test_env e;
    env_start(&e, "gp");
    set_limits(&e, "a", 1, 0);
    static holding h;
    rjq_worker *w = idle_holder(&e, "gp", &h, 0);
    long long claims = claims_run(e.rc);
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.group = "a";
    o.id = "a1";
    ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
    WAIT_FOR(e.base, h.n == 1, 10000);
    ASSERT_STREQ("a1", h.id[0]);
    o.id = "a2"; /* (a is at its limit: not pushed, it waits in its group) */
    ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
    o.group = "b";
    o.id = "b1";
    ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
    WAIT_FOR(e.base, h.n == 2, 10000);
    ASSERT_STREQ("b1", h.id[1]);
    ASSERT_EQ(claims, claims_run(e.rc)); /* (pushed: no claim ran) */
    ASSERT_EQ(1, registered_slots(e.rc, "gp"));
    groups_wait l = groups_of(&e, "a");
    ASSERT_EQ(1, l.depth[0]);
    ASSERT_EQ(1, l.active[0]);
    ASSERT_EQ(1, get_stats(e.base, e.q).ready);
    /* a's slot freed: a2 starts */
    ASSERT_OK(rjq_job_complete(h.job[0], "", 0, NULL, NULL));
    WAIT_FOR(e.base, h.n == 3, 10000);
    ASSERT_STREQ("a2", h.id[2]);
    ASSERT_OK(rjq_job_complete(h.job[1], "", 0, NULL, NULL));
    ASSERT_OK(rjq_job_complete(h.job[2], "", 0, NULL, NULL));
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{gp}:g:job t:{gp}:g:all") == 0, 10000);
    ASSERT_EQ(0, get_stats(e.base, e.q).ready);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* One turn's group jobs (one genqueue call) pushed to an idle worker of 3
 * slots: as many as the groups' limits let start (a at most 1 running:
 * a1, b1, b2 pushed, no claim), the rest waiting in its group; a's slot
 * freed starts a2. */
TEST(one_turns_group_jobs_are_pushed_to_an_idle_worker_within_their_groups_limits) {
    test_env e;
    env_start(&e, "gq");
    set_limits(&e, "a", 1, 0);
    static holding h;
    rjq_worker *w = idle_holder(&e, "gq", &h, 0);
    long long claims = claims_run(e.rc);
    const char *ids[] = {"a1", "a2", "b1", "b2"};
    const char *grp[] = {"a", "a", "b", "b"};
    turn_results t; /* (the turn's one call: counted in the test below; here a held
                     * job's lease may add its own) */
    ASSERT(enqueue_one_turn(&e, ids, grp, NULL, 4, &t) >= 1);
    for (int i = 0; i < 4; i++) ASSERT_OK(t.status[i]);
    WAIT_FOR(e.base, h.n == 3, 10000);
    int a = 0, b = 0;
    for (int i = 0; i < 3; i++) {
        if (h.id[i][0] == 'a') a++;
        if (h.id[i][0] == 'b') b++;
    }
    ASSERT_EQ(1, a);
    ASSERT_EQ(2, b);
    ASSERT_EQ(claims, claims_run(e.rc)); /* (pushed: no claim ran) */
    ASSERT_EQ(1, groups_of(&e, "a").depth[0]);
    ASSERT_EQ(1, groups_of(&e, "a").active[0]);
    for (int i = 0; i < 3; i++)
        if (h.id[i][0] == 'a') ASSERT_OK(rjq_job_complete(h.job[i], "", 0, NULL, NULL));
    WAIT_FOR(e.base, h.n == 4, 10000);
    ASSERT_STREQ("a2", h.id[3]);
    for (int i = 0; i < 4; i++)
        if (strcmp(h.id[i], "a1") != 0) ASSERT_OK(rjq_job_complete(h.job[i], "", 0, NULL, NULL));
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{gq}:g:job t:{gq}:g:all") == 0, 10000);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

TEST(a_group_at_its_rate_limit_gets_nothing_pushed) {
    test_env e;
    env_start(&e, "gu");
    rate_group_a(&e, 600000);
    static holding h;
    rjq_worker *w = idle_holder(&e, "gu", &h, 0);
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.group = "a";
    ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
    WAIT_FOR(e.base, h.n == 1, 10000);
    ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
    o.group = "b";
    ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
    WAIT_FOR(e.base, h.n == 2, 10000);
    ASSERT_EQ(1, groups_of(&e, "a").depth[0]); /* (its second job waits for its window) */
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{gu}:g:rated"));
    for (int i = 0; i < 2; i++) ASSERT_OK(rjq_job_complete(h.job[i], "", 0, NULL, NULL));
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* Idle workers whose every waiting job is of a group at its limit (its
 * concurrency, or its rate) run no claim while their client's reclaim
 * visits (every 50 ms, script calls of their own) come and go: the group
 * is out of the ring and nothing rings. Returns the claims run over
 * `visits` script calls more (the visits and their own reads). */
static long long claims_over_visits(test_env *e, long visits) {
    long long claims = claims_run(e->rc), commands = server_commands_run(e->rc);
    long long calls = server_script_calls(e->rc);
    ASSERT(loop_until_script_calls(e->base, e->rc, calls + visits, 20000));
    long long n = claims_run(e->rc) - claims;
    fprintf(stderr, "  claims over %ld script calls (reclaim visits, 50 ms): %lld; "
                    "commands over them: %lld\n", visits, n,
            server_commands_run(e->rc) - commands);
    return n;
}

TEST(idle_workers_with_a_group_at_its_limit_claim_nothing_until_a_slot_frees) {
    test_env e;
    env_start(&e, "gz");
    set_limits(&e, "a", 1, 0);
    static holding h;
    memset(&h, 0, sizeof h);
    rjq_worker_options wo = quiet_worker_options(3);
    wo.reclaim_ms = 50;
    rjq_worker *w1, *w2;
    ASSERT_OK(rjq_worker_start(e.q, &wo, hold_noting, &h, &w1));
    ASSERT_OK(rjq_worker_start(e.q, &wo, hold_noting, &h, &w2));
    WAIT_FOR(e.base, server_int(e.rc, "HLEN t:{gz}:idle") == 2, 10000);
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.group = "a";
    o.id = "a1";
    ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
    WAIT_FOR(e.base, h.n == 1, 10000);
    o.id = "a2"; /* (a is at its limit: a2 and a3 wait in their group) */
    ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
    o.id = "a3";
    ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
    ASSERT_EQ(0, claims_over_visits(&e, 20));
    ASSERT_EQ(1, h.n);
    ASSERT_EQ(2, get_stats(e.base, e.q).ready);
    /* a's slot freed: the next of a starts, on the completion's doorbell */
    ASSERT_OK(rjq_job_complete(h.job[0], "", 0, NULL, NULL));
    WAIT_FOR(e.base, h.n == 2, 10000);
    ASSERT_STREQ("a2", h.id[1]);
    ASSERT_EQ(0, claims_over_visits(&e, 20)); /* (at its limit again) */
    ASSERT_OK(rjq_job_complete(h.job[1], "", 0, NULL, NULL));
    WAIT_FOR(e.base, h.n == 3, 10000);
    ASSERT_STREQ("a3", h.id[2]);
    ASSERT_OK(rjq_job_complete(h.job[2], "", 0, NULL, NULL));
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{gz}:g:job t:{gz}:g:all") == 0, 10000);
    worker_stop_wait(e.base, w1);
    worker_stop_wait(e.base, w2);
    env_stop(&e);
}

/* A group at its rate limit after a push (the enqueue's push started its
 * last allowed job: no claim came back short to tell a worker when its
 * window turns) still starts its next job when the window turns, the idle
 * workers claiming nothing meanwhile. */
TEST(a_group_at_its_rate_limit_after_a_push_starts_again_when_its_window_turns) {
    test_env e;
    env_start(&e, "gw");
    rate_group_a(&e, 1500);
    static holding h;
    rjq_worker *w = idle_holder(&e, "gw", &h, 50);
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.group = "a";
    o.id = "a1";
    ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
    WAIT_FOR(e.base, h.n == 1, 10000);
    o.id = "a2";
    ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{gw}:g:rated"));
    long long claims = claims_run(e.rc);
    WAIT_FOR(e.base, h.n == 2, 20000);
    ASSERT_STREQ("a2", h.id[1]);
    long long n = claims_run(e.rc) - claims;
    fprintf(stderr, "  claims while a waited for its window: %lld\n", n);
    ASSERT(n <= 4); /* (the doorbell's, the window's turn's: no polling) */
    for (int i = 0; i < 2; i++) ASSERT_OK(rjq_job_complete(h.job[i], "", 0, NULL, NULL));
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* After "first" (jid) went back: it waits at the head of group a, not in
 * the queue's ready list, its slot is free and the group is in the ring.
 * A third job's enqueue looks at the group again; a claim for 5 then
 * starts only "first": the group's limit of 1 still holds (a job that
 * waited in the queue's ready list, its slot dropped as no longer active,
 * started beside the group's next one). */
static void first_is_back_in_its_group_and_the_limit_holds(test_env *e, const char *qn,
                                                           const char *jid) {
    ASSERT_STREQ("ready", get_info(e->base, e->q, jid).state);
    ASSERT_EQ(0, server_int(e->rc, "LLEN t:{%s}:ready", qn)); /* (not the queue's ready) */
    ASSERT_EQ(2, server_int(e->rc, "LLEN t:{%s}:g:r:a", qn));
    ASSERT_EQ(0, server_int(e->rc, "SCARD t:{%s}:g:a:a", qn));
    ASSERT_EQ(1, server_int(e->rc, "ZCARD t:{%s}:g:ring", qn));
    rjq_stats st = get_stats(e->base, e->q);
    ASSERT_EQ(2, st.ready);
    ASSERT_EQ(0, st.active);
    groups_wait l = groups_of(e, "a");
    ASSERT_EQ(2, l.depth[0]);
    ASSERT_EQ(0, l.active[0]);
    depth_index_matches(e->rc, qn);
    ASSERT_OK(enqueue_in(e, e->q, "third", "a", 0).status);
    redisReply *r = claim_as_worker(e, qn, "5", "cy.w.1");
    ASSERT(r->type == REDIS_REPLY_ARRAY);
    ASSERT_EQ(4 + 5, (long)r->elements); /* (one job: the limit) */
    ASSERT_STREQ(jid, r->element[4]->str);
    ASSERT_STREQ("first", r->element[5]->str);
    freeReplyObject(r);
    ASSERT_EQ(1, server_int(e->rc, "SCARD t:{%s}:g:a:a", qn));
    ASSERT_EQ(1, get_stats(e->base, e->q).active);
}

TEST(a_handed_back_group_job_returns_to_its_group_and_its_limit_holds) {
    test_env e;
    env_start(&e, "gh");
    char jid[64];
    claim_first_of_limited_group(&e, "gh", "cx.w.1", jid, sizeof jid);
    /* its worker stops before starting it: release.lua hands it back */
    const char *rel[] = {"t:{gh}:job:", "t:{gh}:wake", "", jid, "cx.w.1"};
    redisReply *r = server_fcall(e.rc, RJQ__S_RELEASE, "gh", rel, 5);
    ASSERT(r->type == REDIS_REPLY_INTEGER);
    ASSERT_EQ(1, r->integer);
    freeReplyObject(r);
    ASSERT_EQ(0, get_info(e.base, e.q, jid).attempts); /* (the push's attempt undone) */
    first_is_back_in_its_group_and_the_limit_holds(&e, "gh", jid);
    env_stop(&e);
}

/* A job handed back unstarted does not count against its group's rate: its
 * start leaves the rate log, and the group, out of the ring for its
 * window, starts it again at the next claim (before, it waited the window:
 * ten minutes here). */
TEST(a_handed_back_group_job_leaves_its_groups_rate_log) {
    test_env e;
    env_start(&e, "gk");
    rjq_group_limits l = RJQ_GROUP_LIMITS_INIT;
    l.rate = 1;
    l.rate_window_ms = 600000;
    limit_group(&e, "a", &l);
    ASSERT_OK(enqueue_in(&e, e.q, "first", "a", 0).status);
    redisReply *r = claim_as_worker(&e, "gk", "5", "cx.w.1");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4 + 5);
    char jid[64];
    snprintf(jid, sizeof jid, "%s", r->element[4]->str);
    freeReplyObject(r);
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{gk}:g:s:a"));
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{gk}:g:rated"));
    const char *rel[] = {"t:{gk}:job:", "t:{gk}:wake", "", jid, "cx.w.1"};
    r = server_fcall(e.rc, RJQ__S_RELEASE, "gk", rel, 5);
    ASSERT(r->type == REDIS_REPLY_INTEGER && r->integer == 1);
    freeReplyObject(r);
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{gk}:g:s:a"));
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{gk}:g:rated"));
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{gk}:g:ring"));
    r = claim_as_worker(&e, "gk", "5", "cx.w.2");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4 + 5);
    ASSERT_STREQ(jid, r->element[4]->str);
    freeReplyObject(r);
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{gk}:g:s:a")); /* (its start now) */
    env_stop(&e);
}

TEST(an_orphaned_group_job_returns_to_its_group_and_its_limit_holds) {
    test_env e;
    env_start(&e, "go");
    char jid[64];
    claim_first_of_limited_group(&e, "go", "cx.w.1", jid, sizeof jid);
    /* its client cx is found dead: the orphan sweep returns its jobs */
    const char *orph[] = {"t:{go}:job:", "t:{go}:wake", "cx.", "100", "1000", "99999999999999"};
    redisReply *r = server_fcall(e.rc, RJQ__S_ORPHANS, "go", orph, 6);
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    ASSERT_EQ(1, r->element[0]->integer);
    freeReplyObject(r);
    first_is_back_in_its_group_and_the_limit_holds(&e, "go", jid);
    env_stop(&e);
}

TEST(promoting_a_delayed_group_job_makes_it_ready_in_its_group) {
    test_env e;
    env_start(&e, "gp");
    ASSERT_OK(enqueue_id_in(&e, "d1", "a", 0, 3600000).status);
    ASSERT_OK(enqueue_id_in(&e, "r1", "a", 0, 0).status);
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{gp}:g:delayed"));
    count_wait cw = {0, 0, 0};
    ASSERT_OK(rjq_queue_promote(e.q, "d1", on_count, &cw));
    WAIT_FOR(e.base, cw.done == 1, 10000);
    ASSERT_OK(cw.status);
    ASSERT_EQ(1, cw.n);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "d1").state);
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{gp}:g:delayed"));
    ASSERT_EQ(0, server_int(e.rc, "LLEN t:{gp}:ready")); /* (its group's, not the queue's) */
    ASSERT_EQ(2, server_int(e.rc, "LLEN t:{gp}:g:r:a"));
    rjq_stats st = get_stats(e.base, e.q);
    ASSERT_EQ(2, st.ready);
    ASSERT_EQ(0, st.delayed);
    ASSERT_EQ(2, groups_of(&e, "a").depth[0]);
    /* a job not delayed (ready in its group) is refused, nothing changes */
    count_wait cw2 = {0, 0, 0};
    ASSERT_OK(rjq_queue_promote(e.q, "r1", on_count, &cw2));
    WAIT_FOR(e.base, cw2.done == 1, 10000);
    ASSERT_EQ(RJQ_ESTATE, cw2.status);
    /* last of its class in its group: after r1 */
    ASSERT_STREQ("r1,d1", list_ids(e.base, e.q, RJQ_STATE_READY, 0, 10));
    ran rn;
    rjq_worker *w = start_noting(&e, &rn, 1);
    WAIT_FOR(e.base, rn.n == 2, 10000);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{gp}:g:job t:{gp}:g:a:a"));
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* ---- the depth index of the listing ------------------------------------------------ */

TEST(listing_groups_reads_a_page_of_the_depth_index_kept_by_enqueues_claims_and_hand_backs) {
    test_env e;
    env_start(&e, "gi");
    char g[32];
    for (int i = 0; i < 300; i++) {
        snprintf(g, sizeof g, "g%03d", i);
        ASSERT_OK(enqueue_in(&e, e.q, "x", g, 0).status);
    }
    for (int i = 0; i < 5; i++) ASSERT_OK(enqueue_in(&e, e.q, "x", "deep", 0).status);
    for (int i = 0; i < 3; i++) ASSERT_OK(enqueue_in(&e, e.q, "x", "mid", i % 2).status);
    depth_index_matches(e.rc, "gi");
    /* the 8 busiest of 302 groups: a page of the index, not 3 reads a group */
    long long cmds0 = server_commands_run(e.rc);
    groups_wait l = groups_of(&e, NULL);
    long long cmds = server_commands_run(e.rc) - cmds0 - 1; /* (the FCALL_RO) */
    fprintf(stderr, "  listing the 8 busiest of 302 groups: %lld commands\n", cmds);
    ASSERT(cmds < 40);
    ASSERT_EQ(302, l.total);
    ASSERT_STREQ("deep", l.name[0]);
    ASSERT_EQ(5, l.depth[0]);
    ASSERT_STREQ("mid", l.name[1]);
    ASSERT_EQ(3, l.depth[1]);
    ASSERT_STREQ("g000", l.name[2]); /* (ties by name) */
    ASSERT_EQ(1, l.depth[2]);
    /* a claim takes one job of each group (one ZMSCORE, one ZADD, one
     * ZREM for the index) */
    redisReply *r = claim_as_worker(&e, "gi", "302", "cx.w.1");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4 + 5 * 302);
    char jid[64];
    snprintf(jid, sizeof jid, "%s", r->element[4]->str);
    freeReplyObject(r);
    depth_index_matches(e.rc, "gi");
    l = groups_of(&e, NULL);
    ASSERT_EQ(302, l.total); /* (the groups emptied run their job: listed after) */
    ASSERT_STREQ("deep", l.name[0]);
    ASSERT_EQ(4, l.depth[0]);
    ASSERT_EQ(1, l.active[0]);
    ASSERT_STREQ("mid", l.name[1]);
    ASSERT_EQ(2, l.depth[1]);
    ASSERT_STREQ("g000", l.name[2]); /* (running only: after, by name) */
    ASSERT_EQ(0, l.depth[2]);
    /* the last page: the groups with running jobs only, by name, depth 0 */
    groups_wait last;
    memset(&last, 0, sizeof last);
    ASSERT_OK(rjq_queue_list_groups(e.q, NULL, 301, 8, on_groups, &last));
    WAIT_FOR(e.base, last.done == 1, 10000);
    ASSERT_OK(last.status);
    ASSERT_EQ(1, (long)last.n);
    ASSERT_EQ(0, last.depth[0]);
    ASSERT_EQ(1, last.active[0]);
    /* a hand-back makes its job ready again: counted */
    const char *rel[] = {"t:{gi}:job:", "t:{gi}:wake", "", jid, "cx.w.1"};
    r = server_fcall(e.rc, RJQ__S_RELEASE, "gi", rel, 5);
    ASSERT(r->type == REDIS_REPLY_INTEGER && r->integer == 1);
    freeReplyObject(r);
    depth_index_matches(e.rc, "gi");
    l = groups_of(&e, NULL);
    ASSERT_EQ(302, l.total);
    ASSERT_STREQ("deep", l.name[0]);
    ASSERT_EQ(4, l.depth[0]);
    ASSERT_STREQ("mid", l.name[1]);
    ASSERT_STREQ("g000", l.name[2]); /* (handed back: ready again) */
    ASSERT_EQ(1, l.depth[2]);
    ASSERT_EQ(3 + 299, l.total);
    /* a group entering the index is counted from its keys (an index that
     * lost it, here by hand) */
    freeReplyObject(server_cmd(e.rc, "ZREM t:{gi}:g:depth deep"));
    ASSERT_OK(enqueue_in(&e, e.q, "x", "deep", 0).status);
    ASSERT_EQ(-5, server_int(e.rc, "ZSCORE t:{gi}:g:depth deep"));
    depth_index_matches(e.rc, "gi");
    r = claim_as_worker(&e, "gi", "1000", "cx.w.2");
    ASSERT(r->type == REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    depth_index_matches(e.rc, "gi");
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{gi}:g:depth"));
    env_stop(&e);
}

/* ---- the drain's cost: slots only for limited groups, counts per call ----------------- */

/* A group without a concurrency limit keeps no slot set (its active count
 * alone, one hash for every group: the listing's active column); a limit
 * set while its jobs run counts them at once (gconf.lua fills the slot set
 * from the running jobs), so the limit holds, whether set on the group or
 * as the default; a group whose limit is lifted drops its set. */
TEST(a_limit_set_on_a_group_whose_jobs_run_without_one_counts_them_at_once) {
    test_env e;
    env_start(&e, "gs");
    char p[16];
    for (int i = 0; i < 8; i++) {
        snprintf(p, sizeof p, "a%d", i);
        ASSERT_OK(enqueue_in(&e, e.q, p, "a", 0).status);
    }
    redisReply *r = claim_as_worker(&e, "gs", "3", "cx.w.1");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4 + 5 * 3);
    freeReplyObject(r);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{gs}:g:a:a")); /* (no limit: no slots) */
    ASSERT_EQ(3, groups_of(&e, "a").active[0]);
    set_limits(&e, "a", 2, 0);
    ASSERT_EQ(3, server_int(e.rc, "SCARD t:{gs}:g:a:a"));
    r = claim_as_worker(&e, "gs", "3", "cx.w.2"); /* (3 run, limit 2: none starts) */
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4);
    freeReplyObject(r);
    set_limits(&e, "a", -1, 0); /* lifted: no slots kept */
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{gs}:g:a:a"));
    r = claim_as_worker(&e, "gs", "1", "cx.w.3");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4 + 5);
    freeReplyObject(r);
    set_limits(&e, NULL, 5, 0); /* every group: 5 at once; 4 run */
    ASSERT_EQ(4, server_int(e.rc, "SCARD t:{gs}:g:a:a"));
    r = claim_as_worker(&e, "gs", "3", "cx.w.4");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4 + 5); /* (one slot left) */
    freeReplyObject(r);
    groups_wait l = groups_of(&e, "a");
    ASSERT_EQ(5, l.active[0]);
    ASSERT_EQ(3, l.depth[0]);
    env_stop(&e);
}

/* The id and "<attempt> <token>" of each of the n jobs a claim reply r
 * started, as the completion script takes them (the state's tail). */
static const char **completion_args(test_env *e, const char *qn, redisReply *r, size_t n) {
    const char **a = calloc(5 + 4 * n, sizeof *a); /* (each job a run of one: tail, 1, id, result) */
    ASSERT(a != NULL);
    char *prefix = malloc(64);
    ASSERT(prefix != NULL);
    snprintf(prefix, 64, "t:{%s}:job:", qn);
    a[0] = prefix, a[1] = "-1", a[2] = "0", a[3] = "0", a[4] = "0";
    for (size_t k = 0; k < n; k++) {
        const char *id = r->element[4 + 5 * k]->str;
        redisReply *s = server_cmd(e->rc, "HGET t:{%s}:state %s", qn, id);
        ASSERT(s->type == REDIS_REPLY_STRING);
        char *tail = malloc(64);
        ASSERT(tail != NULL);
        int attempt = 0;
        char tok[48];
        ASSERT(sscanf(s->str, "active %d %47s", &attempt, tok) == 2);
        snprintf(tail, 64, "%d %s", attempt, tok);
        freeReplyObject(s);
        a[5 + 4 * k] = tail, a[6 + 4 * k] = "1", a[7 + 4 * k] = strdup(id), a[8 + 4 * k] = "r";
        ASSERT(a[7 + 4 * k] != NULL);
    }
    return a;
}

static void free_completion_args(const char **a, size_t n) {
    free((void *)a[0]);
    for (size_t k = 0; k < n; k++) {
        free((void *)a[5 + 4 * k]);
        free((void *)a[7 + 4 * k]);
    }
    free(a);
}

/* The commands of a claim of one job from each of n groups (no settings;
 * each group holds two) and of those jobs' completion in one call, on
 * queue qn. */
static void group_drain_commands(test_env *e, const char *qn, size_t n, long long *claim,
                                 long long *done) {
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(e->c, qn, NULL, &q));
    char p[48], g[32], cnt[32];
    for (int round = 0; round < 2; round++)
        for (size_t i = 0; i < n; i++) {
            snprintf(p, sizeof p, "p%zu.%d", i, round);
            snprintf(g, sizeof g, "g%zu", i);
            ASSERT_OK(enqueue_in(e, q, p, g, 0).status);
        }
    snprintf(cnt, sizeof cnt, "%zu", n);
    long long before = server_commands_run(e->rc);
    redisReply *r = claim_as_worker(e, qn, cnt, "cx.w.1");
    *claim = server_commands_run(e->rc) - before - 1; /* (the FCALL) */
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4 + 5 * n);
    for (size_t k = 0; k < n; k++) { /* (round-robin: the first job of every group) */
        ASSERT(strncmp(r->element[5 + 5 * k]->str, "p", 1) == 0);
        ASSERT(strstr(r->element[5 + 5 * k]->str, ".0") != NULL);
    }
    const char **a = completion_args(e, qn, r, n);
    freeReplyObject(r);
    before = server_commands_run(e->rc);
    r = server_fcall(e->rc, RJQ__S_COMPLETE, qn, a, 5 + 4 * n);
    *done = server_commands_run(e->rc) - before - 1;
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == n);
    for (size_t k = 0; k < n; k++) ASSERT_EQ(1, r->element[k]->integer);
    freeReplyObject(r);
    free_completion_args(a, n);
    /* (its pin and every group's started counter, listed: nothing runs) */
    ASSERT_EQ(1 + (long long)n, server_int(e->rc, "HLEN t:{%s}:g:act", qn));
    redisReply *enc = server_cmd(e->rc, "OBJECT ENCODING t:{%s}:g:act", qn);
    ASSERT_STREQ("hashtable", enc->str); /* (its pin: no listpack scanned per group) */
    freeReplyObject(enc);
    ASSERT_EQ((long long)n, server_int(e->rc, "ZCARD t:{%s}:g:all", qn)); /* (one job left each) */
    ASSERT_OK(rjq_queue_close(q));
}

/* A claim of group jobs costs one LPOP per group it visits beyond a fixed
 * number of commands, and their completion a fixed number whatever the
 * groups (the active counts, the ring's check and the job hash: one
 * command each per call, not per job; before: a SADD per group in the
 * claim, a SREM and a ZSCORE per group in the completion). */
TEST(a_group_jobs_claim_and_completion_cost_no_command_per_job_beyond_its_groups_pop) {
    test_env e;
    env_start(&e, "gd");
    long long claim4, done4, claim8, done8; /* (8 jobs: server_fcall's 64 arguments) */
    group_drain_commands(&e, "gd", 4, &claim4, &done4);
    group_drain_commands(&e, "gd2", 8, &claim8, &done8);
    printf("commands: claim of 4 groups' jobs %lld, their completion %lld; of 8: %lld, %lld\n",
           claim4, done4, claim8, done8);
    ASSERT_EQ(claim4 + 4, claim8); /* (one LPOP per group more) */
    ASSERT_EQ(done4, done8);
    ASSERT_EQ(GROUP_CLAIM_COMMANDS_4, claim4);
    ASSERT_EQ(GROUP_COMPLETION_COMMANDS, done4);
    env_stop(&e);
}

/* The commands of one enqueue of a job of group g on queue q (the FCALL not
 * counted). */
static long long enqueue_commands(test_env *e, rjq_queue *q, const char *payload, const char *g) {
    long long before = server_commands_run(e->rc);
    ASSERT_OK(enqueue_in(e, q, payload, g, 0).status);
    return server_commands_run(e->rc) - before - 1;
}

/* An enqueue into a group that has ready jobs (no limit, no rate, not
 * paused) sends the ring no ZSCORE (the group is in it: it leaves only
 * when a claim finds it empty, or by its settings); a claim that finds a
 * group empty drops its depth entry without reading it, so that the
 * group's next enqueue asks the ring again and the group is served. */
TEST(an_enqueue_behind_a_groups_ready_jobs_asks_the_ring_nothing_and_an_emptied_group_is_served_again) {
    test_env e;
    env_start(&e, "ge");
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(e.c, "ge", NULL, &q));
    ASSERT_OK(enqueue_in(&e, q, "p0", "g", 0).status);
    long long behind = enqueue_commands(&e, q, "p1", "g");
    printf("commands: an enqueue behind a ready job of its group %lld\n", behind);
    ASSERT_EQ(GROUP_ENQUEUE_BEHIND_COMMANDS, behind);
    redisReply *r = claim_as_worker(&e, "ge", "5", "ge.w.1");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4 + 5 * 2); /* (both: g found empty) */
    freeReplyObject(r);
    redisReply *d = server_cmd(e.rc, "ZSCORE t:{ge}:g:depth g");
    ASSERT(d->type == REDIS_REPLY_NIL); /* (out of the index: its next enqueue asks the ring) */
    freeReplyObject(d);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{ge}:g:ring"));
    ASSERT_OK(enqueue_in(&e, q, "p2", "g", 0).status);
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{ge}:g:ring"));
    r = claim_as_worker(&e, "ge", "5", "ge.w.2");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4 + 5 * 1);
    ASSERT_STREQ("p2", r->element[5]->str);
    freeReplyObject(r);
    ASSERT_OK(rjq_queue_close(q));
    env_stop(&e);
}

/* The payloads of a claim reply r (after its 4 fields, 5 per job), joined
 * by ','. */
static const char *claimed_payloads(redisReply *r) {
    static char out[512];
    out[0] = '\0';
    for (size_t i = 5; i < r->elements; i += 5) {
        if (out[0]) strncat(out, ",", sizeof out - strlen(out) - 1);
        strncat(out, r->element[i]->str, sizeof out - strlen(out) - 1);
    }
    return out;
}

/* A claim that wants more jobs than the ring has groups takes several
 * turns of each group at once, one LPOP per group: each group's jobs in
 * its FIFO order, the reply in turn order (each group's first turn, then its
 * second), the weights' shares (b weight 2: twice a's) and the limits
 * (c at most 2) as turn by turn; what is left of the room is served as
 * before (a's next turn) in the same claim. */
TEST(a_claim_wanting_more_than_the_rings_groups_takes_several_turns_per_pop_in_fifo_order) {
    test_env e;
    env_start(&e, "gm");
    set_limits(&e, "b", -1, 2);
    set_limits(&e, "c", 2, 0);
    char p[16];
    for (int i = 0; i < 6; i++)
        for (const char *g = "abc"; *g; g++) {
            char gn[2] = {*g, '\0'};
            snprintf(p, sizeof p, "%c%d", *g, i);
            ASSERT_OK(enqueue_in(&e, e.q, p, gn, 0).status);
        }
    freeReplyObject(server_cmd(e.rc, "CONFIG RESETSTAT"));
    /* room 9 over a (1), b (2), c (1): two rounds at once (a 2, b 4, c 2:
     * its limit), then one more round for the 1 left: a's third */
    redisReply *r = claim_as_worker(&e, "gm", "9", "cx.w.1");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4 + 5 * 9);
    ASSERT_STREQ("a0,b0,b1,c0,a1,b2,b3,c1,a2", claimed_payloads(r)); /* (as turn by turn) */
    freeReplyObject(r);
    /* (a, b, c; then a; and one of the queue's own ready list, which the
     * claim takes its plain ready ids with: its LPOP is the read) */
    ASSERT_EQ(4 + 1, server_calls(e.rc, "lpop"));
    groups_wait l = groups_of(&e, "c");
    ASSERT_EQ(2, l.active[0]);
    ASSERT_EQ(4, l.depth[0]);
    /* the ring goes on where it stopped: b, then a (c at its limit) */
    r = claim_as_worker(&e, "gm", "3", "cx.w.2");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4 + 5 * 3);
    ASSERT_STREQ("b4,b5,a3", claimed_payloads(r));
    freeReplyObject(r);
    env_stop(&e);
}

/* Complete the n jobs a claim reply r started on queue qn (one call, as a
 * worker sends it). */
static void complete_claimed(test_env *e, const char *qn, redisReply *r, size_t n) {
    const char **a = completion_args(e, qn, r, n);
    redisReply *d = server_fcall(e->rc, RJQ__S_COMPLETE, qn, a, 5 + 4 * n);
    ASSERT(d->type == REDIS_REPLY_ARRAY && d->elements == n);
    for (size_t k = 0; k < n; k++) ASSERT_EQ(1, d->element[k]->integer);
    freeReplyObject(d);
    free_completion_args(a, n);
}

/* The completion that leaves a group with nothing running asks whether it
 * has ready jobs from its lists' EXISTS, then the depth index; a group the
 * index misses (a queue written before the index: its entry is made at the
 * group's next claim) is asked its list and priority set: one whose ready
 * jobs are all of a priority (no list) stays listed, and leaves the
 * listing once its last job completed. */
TEST(a_completion_keeps_listed_a_group_with_ready_jobs_the_depth_index_misses) {
    test_env e;
    env_start(&e, "gold");
    ASSERT_OK(enqueue_in(&e, e.q, "lo", "old", 1).status);
    ASSERT_OK(enqueue_in(&e, e.q, "hi", "old", 2).status);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{gold}:g:r:old")); /* (priority jobs only) */
    redisReply *r = claim_as_worker(&e, "gold", "1", "cx.w.1");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4 + 5);
    ASSERT_STREQ("hi", claimed_payloads(r));
    freeReplyObject(server_cmd(e.rc, "DEL t:{gold}:g:depth")); /* (an older version's queue) */
    complete_claimed(&e, "gold", r, 1);
    freeReplyObject(r);
    ASSERT_EQ(0, server_int(e.rc, "ZRANK t:{gold}:g:all old")); /* (still listed: "lo" waits) */
    groups_wait l = groups_of(&e, "old");
    ASSERT_EQ(1, l.total);
    ASSERT_EQ(1, l.depth[0]);
    r = claim_as_worker(&e, "gold", "1", "cx.w.2");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4 + 5);
    ASSERT_STREQ("lo", claimed_payloads(r));
    complete_claimed(&e, "gold", r, 1);
    freeReplyObject(r);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{gold}:g:all")); /* (emptied: unlisted) */
    ASSERT_EQ(0, groups_of(&e, NULL).total);
    env_stop(&e);
}

/* The completion that unlists groups deletes their started counters in the
 * HDEL of their running counts (GROUPS.count with GROUPS.tidy folded in),
 * not in an HDEL of its own: as many HDELs as a completion that unlists
 * none; the counters leave exactly with the listing (a group with a ready
 * job left keeps its count). */
TEST(a_completion_that_unlists_groups_deletes_their_started_counters_in_its_one_hdel) {
    test_env e;
    env_start(&e, "gsh");
    ASSERT_OK(enqueue_in(&e, e.q, "a0", "a", 0).status);
    ASSERT_OK(enqueue_in(&e, e.q, "b0", "b", 0).status);
    ASSERT_OK(enqueue_in(&e, e.q, "c0", "c", 0).status);
    ASSERT_OK(enqueue_in(&e, e.q, "c1", "c", 0).status);
    redisReply *r = claim_as_worker(&e, "gsh", "3", "cx.w.1");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4 + 5 * 3);
    ASSERT_STREQ("a0,b0,c0", claimed_payloads(r));
    ASSERT_EQ(1, server_int(e.rc, "HGET t:{gsh}:g:act %s", "a s"));
    /* the completion of a0, b0 and c0: a and b leave the listing, c stays */
    freeReplyObject(server_cmd(e.rc, "CONFIG RESETSTAT"));
    complete_claimed(&e, "gsh", r, 3);
    freeReplyObject(r);
    long long unlisting = server_calls(e.rc, "hdel");
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{gsh}:g:all")); /* (c alone) */
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{gsh}:g:act %s", "a s"));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{gsh}:g:act %s", "b s"));
    ASSERT_EQ(1, server_int(e.rc, "HGET t:{gsh}:g:act %s", "c s")); /* (listed: kept) */
    ASSERT_EQ(2, server_int(e.rc, "HLEN t:{gsh}:g:act")); /* (its pin and c's counter) */
    /* a completion that unlists none: c1 claimed with d0 of a new group d
     * behind which d1 waits, and d0 completed alone */
    ASSERT_OK(enqueue_in(&e, e.q, "d0", "d", 0).status);
    ASSERT_OK(enqueue_in(&e, e.q, "d1", "d", 0).status);
    r = claim_as_worker(&e, "gsh", "1", "cx.w.2");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4 + 5);
    ASSERT_STREQ("c1", claimed_payloads(r));
    complete_claimed(&e, "gsh", r, 1); /* (c unlisted) */
    freeReplyObject(r);
    r = claim_as_worker(&e, "gsh", "1", "cx.w.3");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4 + 5);
    ASSERT_STREQ("d0", claimed_payloads(r));
    freeReplyObject(server_cmd(e.rc, "CONFIG RESETSTAT"));
    complete_claimed(&e, "gsh", r, 1);
    freeReplyObject(r);
    ASSERT_EQ(1, server_int(e.rc, "HGET t:{gsh}:g:act %s", "d s")); /* (d listed: d1 waits) */
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{gsh}:g:act %s", "c s"));
    printf("HDEL calls: a completion that unlists two groups %lld, one that unlists none %lld\n",
           unlisting, server_calls(e.rc, "hdel"));
    ASSERT_EQ(server_calls(e.rc, "hdel"), unlisting);
    env_stop(&e);
}

/* A group whose last ready id was cancelled while its job ran: the
 * completion keeps it listed (its list still holds the id; a claim drops
 * it) with its started counter, so the claim that finds it empty, with
 * nothing running, is the writer that unlists it: its tidy's own HDEL
 * deletes the counter (not folded: no completion is there to fold it
 * into), and the group's next start counts from 0 again. want: the jobs
 * each claim asks for ("1": the claim that drops the id keeps the group
 * in the ring, the next one finds it dry; more: the one that drops it
 * finds it empty). */
static void claim_unlisting_after_cancel(const char *qn, const char *want) {
    test_env e;
    env_start(&e, qn);
    char key[64];
    ASSERT_OK(enqueue_in(&e, e.q, "a0", "a", 0).status);
    enqueue_wait a1 = enqueue_in(&e, e.q, "a1", "a", 0);
    ASSERT_OK(a1.status);
    redisReply *r = claim_as_worker(&e, qn, "1", "cx.w.1");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4 + 5);
    ASSERT_STREQ("a0", claimed_payloads(r));
    ASSERT_OK(rjq_queue_cancel(e.q, a1.id, NULL, NULL));
    WAIT_FOR(e.base, strcmp(get_info(e.base, e.q, a1.id).state, "cancelled") == 0, 10000);
    complete_claimed(&e, qn, r, 1);
    freeReplyObject(r);
    snprintf(key, sizeof key, "t:{%s}:g:act", qn);
    ASSERT_EQ(1, server_int(e.rc, "HGET %s %s", key, "a s")); /* (listed: kept) */
    ASSERT_EQ(0, server_int(e.rc, "ZRANK t:{%s}:g:all a", qn));
    for (int i = 0; i < 2; i++) { /* (the claims find no job) */
        r = claim_as_worker(&e, qn, want, i ? "cx.w.3" : "cx.w.2");
        ASSERT(r->type == REDIS_REPLY_ARRAY);
        ASSERT_STREQ("", claimed_payloads(r));
        freeReplyObject(r);
    }
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS %s %s", key, "a s"));
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{%s}:g:all", qn));
    ASSERT_EQ(1, server_int(e.rc, "HLEN %s", key)); /* (its pin alone) */
    ASSERT_EQ(0, groups_of(&e, NULL).total);
    /* a new job of the group: its counter from 0 */
    ASSERT_OK(enqueue_in(&e, e.q, "a2", "a", 0).status);
    r = claim_as_worker(&e, qn, want, "cx.w.4");
    ASSERT_STREQ("a2", claimed_payloads(r));
    groups_wait l = groups_of(&e, "a");
    ASSERT_EQ(1, l.active[0]);
    ASSERT_EQ(1, l.started[0]);
    complete_claimed(&e, qn, r, 1);
    freeReplyObject(r);
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS %s %s", key, "a s"));
    env_stop(&e);
}

TEST(a_claim_that_finds_a_group_dry_after_a_cancel_unlists_it_and_deletes_its_started_counter) {
    claim_unlisting_after_cancel("gcu1", "1");
}

TEST(a_claim_that_drops_a_groups_last_cancelled_id_unlists_it_and_deletes_its_started_counter) {
    claim_unlisting_after_cancel("gcu4", "4");
}

/* A claim that finds a group dry whose completion already unlisted it
 * (the drain's common case: the claim that took its last job left it in
 * the ring) sends no HDEL: its tidy reads the started counter with the
 * running count, and the completion deleted it. A paused and resumed
 * group and a reclaimed job keep their counters right (a reclaimed
 * start counted again, the counter kept while the group is listed,
 * deleted when its last job completes). */
TEST(a_claim_that_finds_an_unlisted_group_dry_sends_no_hdel_and_counters_stay_right) {
    test_env e;
    env_start(&e, "gdh");
    ASSERT_OK(enqueue_in(&e, e.q, "a0", "a", 0).status);
    redisReply *r = claim_as_worker(&e, "gdh", "1", "cx.w.1");
    ASSERT_STREQ("a0", claimed_payloads(r));
    complete_claimed(&e, "gdh", r, 1); /* (unlisted: its counter deleted) */
    freeReplyObject(r);
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{gdh}:g:act %s", "a s"));
    ASSERT_EQ(0, server_int(e.rc, "ZRANK t:{gdh}:g:ring a")); /* (left in the ring) */
    freeReplyObject(server_cmd(e.rc, "CONFIG RESETSTAT"));
    r = claim_as_worker(&e, "gdh", "1", "cx.w.2");
    ASSERT_STREQ("", claimed_payloads(r));
    freeReplyObject(r);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{gdh}:g:ring")); /* (found dry) */
    ASSERT_EQ(0, server_calls(e.rc, "hdel"));
    /* paused and resumed: nothing counted while paused, its starts after */
    enqueue_wait b0 = enqueue_in(&e, e.q, "b0", "b", 0);
    ASSERT_OK(b0.status);
    ASSERT_OK(enqueue_in(&e, e.q, "b1", "b", 0).status);
    pause_group(&e, "b", 1);
    r = claim_as_worker(&e, "gdh", "4", "cx.w.3");
    ASSERT_STREQ("", claimed_payloads(r));
    freeReplyObject(r);
    ASSERT_EQ(0, groups_of(&e, "b").started[0]);
    pause_group(&e, "b", 0);
    r = claim_as_worker(&e, "gdh", "1", "cx.w.4");
    ASSERT_STREQ("b0", claimed_payloads(r));
    freeReplyObject(r);
    ASSERT_EQ(1, groups_of(&e, "b").started[0]);
    /* b0 reclaimed (its lease gone): back at its group's head, started again */
    freeReplyObject(server_cmd(e.rc, "ZADD t:{gdh}:active XX 1 %s", b0.id));
    count_wait w = {0, 0, 0};
    ASSERT_OK(rjq_queue_reclaim(e.q, on_count, &w));
    answered_ok(&e, &w);
    ASSERT_EQ(1, w.n);
    ASSERT_EQ(1, groups_of(&e, "b").started[0]); /* (listed: kept) */
    r = claim_as_worker(&e, "gdh", "1", "cx.w.5");
    ASSERT_STREQ("b0", claimed_payloads(r));
    complete_claimed(&e, "gdh", r, 1);
    freeReplyObject(r);
    groups_wait l = groups_of(&e, "b");
    ASSERT_EQ(2, l.started[0]);
    ASSERT_EQ(1, l.depth[0]); /* (b1) */
    r = claim_as_worker(&e, "gdh", "1", "cx.w.6");
    ASSERT_STREQ("b1", claimed_payloads(r));
    complete_claimed(&e, "gdh", r, 1);
    freeReplyObject(r);
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{gdh}:g:act %s", "b s")); /* (unlisted) */
    ASSERT_EQ(0, groups_of(&e, NULL).total);
    env_stop(&e);
}

/* The groups a completion unlists leave G..'all' and G..'busy' in one
 * ZREM of each per call (GROUPS.tidy), not two per group: completing the
 * jobs of three one-job groups at once sends as many ZREMs as completing
 * one; and a claim that finds dry groups their completions unlisted
 * (left in the ring by the claim that took their last jobs) sends no ZREM
 * of either (one ZMSCORE of G..'all' says they are out). */
TEST(groups_leaving_the_listing_cost_one_zrem_of_each_set_per_call) {
    test_env e;
    env_start(&e, "gzr");
    ASSERT_OK(enqueue_in(&e, e.q, "a0", "a", 0).status);
    redisReply *r = claim_as_worker(&e, "gzr", "1", "cx.w.1");
    ASSERT_STREQ("a0", claimed_payloads(r));
    freeReplyObject(server_cmd(e.rc, "CONFIG RESETSTAT"));
    complete_claimed(&e, "gzr", r, 1);
    freeReplyObject(r);
    long long one = server_calls(e.rc, "zrem");
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{gzr}:g:all"));
    ASSERT_OK(enqueue_in(&e, e.q, "b0", "b", 0).status);
    ASSERT_OK(enqueue_in(&e, e.q, "c0", "c", 0).status);
    ASSERT_OK(enqueue_in(&e, e.q, "d0", "d", 0).status);
    r = claim_as_worker(&e, "gzr", "3", "cx.w.2");
    ASSERT_STREQ("b0,c0,d0", claimed_payloads(r));
    freeReplyObject(server_cmd(e.rc, "CONFIG RESETSTAT"));
    complete_claimed(&e, "gzr", r, 3);
    freeReplyObject(r);
    long long three = server_calls(e.rc, "zrem");
    ASSERT_EQ(0, server_int(e.rc, "ZCARD t:{gzr}:g:all"));
    fprintf(stderr, "  ZREM calls: a completion unlisting 1 group %lld, 3 groups %lld\n", one, three);
    ASSERT_EQ(one, three);
    /* the ring still holds b, c and d (each gave what it was asked; a was
     * found dry by the second claim) */
    ASSERT_EQ(3, server_int(e.rc, "ZCARD t:{gzr}:g:ring"));
    freeReplyObject(server_cmd(e.rc, "CONFIG RESETSTAT"));
    r = claim_as_worker(&e, "gzr", "4", "cx.w.3");
    ASSERT_STREQ("", claimed_payloads(r));
    freeReplyObject(r);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{gzr}:g:ring")); /* (found dry) */
    fprintf(stderr, "  a claim finding 3 unlisted groups dry: %lld ZREM, %lld EXISTS\n",
            server_calls(e.rc, "zrem"), server_calls(e.rc, "exists"));
    ASSERT_EQ(2, server_calls(e.rc, "zrem")); /* (of the ring and of the depth index) */
    ASSERT_EQ(0, server_calls(e.rc, "hdel"));
    env_stop(&e);
}

/* A claim reads its group jobs' states with their records (one HMGET):
 * an id a cancel left behind in its group's list, between two others,
 * does not start, and the jobs around it start with their own payloads
 * (the records of the claim's ids stay aligned once it is dropped), the
 * queue's own ready job first. */
TEST(a_claims_cancelled_group_id_between_others_is_skipped_and_the_others_keep_their_payloads) {
    test_env e;
    env_start(&e, "gcx");
    ASSERT_OK(enqueue_in(&e, e.q, "pa", "a", 0).status);
    enqueue_wait b = enqueue_in(&e, e.q, "pb", "b", 0);
    ASSERT_OK(b.status);
    ASSERT_OK(enqueue_in(&e, e.q, "pc", "c", 0).status);
    ASSERT_OK(enqueue_in(&e, e.q, "plain", NULL, 0).status);
    ASSERT_OK(rjq_queue_cancel(e.q, b.id, NULL, NULL));
    WAIT_FOR(e.base, strcmp(get_info(e.base, e.q, b.id).state, "cancelled") == 0, 10000);
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{gcx}:g:r:b")); /* (left behind) */
    redisReply *r = claim_as_worker(&e, "gcx", "4", "cx.w.1");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4 + 5 * 3);
    ASSERT_STREQ("plain,pa,pc", claimed_payloads(r));
    freeReplyObject(r);
    ASSERT_STREQ("cancelled", get_info(e.base, e.q, b.id).state);
    ASSERT_EQ(0, server_int(e.rc, "LLEN t:{gcx}:g:r:b"));
    ASSERT_EQ(0, server_int(e.rc, "HGET t:{gcx}:stats gready"));
    groups_wait l = groups_of(&e, NULL);
    ASSERT_EQ(2, l.total); /* (a and c run one each; b has nothing) */
    env_stop(&e);
}

/* ---- one loop turn's group jobs: one genqueue call (issue 40, gbatch) ---- */

/* The group jobs of one loop turn go in one script call whatever their
 * groups (not one call per job), each reported on its own: the bound of
 * one group refuses only the job past it (nothing of it written), the
 * others' jobs are written, each group's in call order (FIFO), and its
 * depth counts them. */
TEST(one_turns_group_jobs_go_in_one_script_call_and_a_groups_bound_refuses_only_the_job_past_it) {
    test_env e;
    env_start(&e, "gt");
    rjq_group_limits l = RJQ_GROUP_LIMITS_INIT;
    l.max_waiting = 2;
    limit_group(&e, "a", &l);
    const char *ids[] = {"a1", "b1", "a2", "b2", "a3", "c1", "b3"};
    const char *grp[] = {"a", "b", "a", "b", "a", "c", "b"};
    turn_results t;
    ASSERT_EQ(1, enqueue_one_turn(&e, ids, grp, NULL, 7, &t));
    for (int i = 0; i < 7; i++) {
        ASSERT_EQ(i == 4 ? RJQ_EFULL : RJQ_OK, t.status[i]);
        if (i != 4) {
            ASSERT_STREQ(ids[i], t.id[i]);
            ASSERT_EQ(0, t.existed[i]);
        }
    }
    ASSERT_STREQ("a1,a2", members(&e, "LRANGE", "t:{gt}:g:r:a"));
    ASSERT_STREQ("b1,b2,b3", members(&e, "LRANGE", "t:{gt}:g:r:b"));
    ASSERT_STREQ("c1", members(&e, "LRANGE", "t:{gt}:g:r:c"));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{gt}:payload a3"));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{gt}:g:job a3"));
    ASSERT_EQ(6, server_int(e.rc, "HLEN t:{gt}:g:job"));
    ASSERT_EQ(2, groups_of(&e, "a").depth[0]);
    ASSERT_EQ(3, groups_of(&e, "b").depth[0]);
    rjq_stats st = get_stats(e.base, e.q);
    ASSERT_EQ(6, st.enqueued);
    ASSERT_EQ(6, st.ready);
    /* a worker starts them all, each group's in its order */
    ran r;
    rjq_worker *w = start_noting(&e, &r, 1);
    WAIT_FOR(e.base, r.n == 6, 10000);
    worker_stop_wait(e.base, w);
    int at_a1 = -1, at_a2 = -1, at_b1 = -1, at_b3 = -1;
    for (int i = 0; i < 6; i++) {
        if (!strcmp(r.order[i], "a1")) at_a1 = i;
        if (!strcmp(r.order[i], "a2")) at_a2 = i;
        if (!strcmp(r.order[i], "b1")) at_b1 = i;
        if (!strcmp(r.order[i], "b3")) at_b3 = i;
    }
    ASSERT(at_a1 >= 0 && at_a1 < at_a2 && at_b1 >= 0 && at_b1 < at_b3);
    env_stop(&e);
}

/* An id given twice in one turn (in two groups) is written once, in its
 * first job's group, the second reported existing; priorities within a
 * group keep their call order in one call; a batch of group jobs
 * (rjq_enqueue_batch) is one unit: a group's bound refuses it whole,
 * nothing written, and one that fits lands whole over its groups. */
TEST(a_repeated_id_in_one_turn_is_written_once_and_a_batch_of_group_jobs_is_admitted_whole) {
    test_env e;
    env_start(&e, "gu");
    const char *ids[] = {"d", "p1", "d", "p2", "p0", NULL};
    const char *grp[] = {"a", "e", "b", "e", "e", "b"};
    const int prio[] = {0, 5, 0, 5, 0, 0};
    turn_results t;
    /* (two calls: jobs with ids and an anonymous one never share a batch,
     * enqueue.c; the ids' call holds jobs of three groups) */
    ASSERT_EQ(2, enqueue_one_turn(&e, ids, grp, prio, 6, &t));
    for (int i = 0; i < 6; i++) ASSERT_OK(t.status[i]);
    ASSERT_EQ(0, t.existed[0]);
    ASSERT_EQ(1, t.existed[2]);
    ASSERT_STREQ("d", t.id[2]);
    ASSERT_EQ(0, t.existed[5]);
    redisReply *g = server_cmd(e.rc, "HGET t:{gu}:g:job d");
    ASSERT_STREQ("a", g->str);
    freeReplyObject(g);
    ASSERT_STREQ(t.id[5], members(&e, "LRANGE", "t:{gu}:g:r:b")); /* (the anonymous job alone) */
    ASSERT_STREQ("p1,p2", members(&e, "ZRANGE", "t:{gu}:g:p:e"));
    ASSERT_STREQ("p0", members(&e, "LRANGE", "t:{gu}:g:r:e"));

    rjq_group_limits l = RJQ_GROUP_LIMITS_INIT;
    l.max_waiting = 2;
    limit_group(&e, "c", &l);
    rjq_job_options oc = RJQ_JOB_OPTIONS_INIT, of = RJQ_JOB_OPTIONS_INIT;
    oc.group = "c";
    of.group = "f";
    rjq_enqueue_item its[3] = {{sizeof its[0], "c1", 2, &oc}, {sizeof its[1], "c2", 2, &oc},
                               {sizeof its[2], "c3", 2, &oc}};
    long long keys = server_int(e.rc, "DBSIZE");
    enqueue_wait w;
    memset(&w, 0, sizeof w);
    ASSERT_OK(rjq_enqueue_batch(e.q, its, 3, on_enqueue_wait, &w));
    ASSERT(loop_until(e.base, &w.done, 10000));
    ASSERT_EQ(RJQ_EFULL, w.status);
    ASSERT_EQ(keys, server_int(e.rc, "DBSIZE"));
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{gu}:g:r:c"));
    its[1].opts = &of; /* (two of c, one of f) */
    memset(&w, 0, sizeof w);
    ASSERT_OK(rjq_enqueue_batch(e.q, its, 3, on_enqueue_wait, &w));
    ASSERT(loop_until(e.base, &w.done, 10000));
    ASSERT_OK(w.status);
    ASSERT_EQ(3, w.n);
    ASSERT_EQ(2, server_int(e.rc, "LLEN t:{gu}:g:r:c"));
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{gu}:g:r:f"));
    /* c is full now: the next batch with a job of c is refused whole */
    its[1].opts = &oc;
    its[0].opts = &of;
    memset(&w, 0, sizeof w);
    ASSERT_OK(rjq_enqueue_batch(e.q, its, 2, on_enqueue_wait, &w));
    ASSERT(loop_until(e.base, &w.done, 10000));
    ASSERT_EQ(RJQ_EFULL, w.status);
    ASSERT_EQ(1, server_int(e.rc, "LLEN t:{gu}:g:r:f"));
    env_stop(&e);
}

/* ---- the issue's promises, each asserted (audit40) -------------------------------- */

/* The weighted round-robin's exact order: three groups entered in the order
 * x, y, z with weights 2 (the defaults', set for every group), 1 (its own,
 * rjq_queue_limit_group) and 3 (its own, rjq_queue_set_group_limits) each
 * take that many jobs per turn, turn after turn, FIFO within a group after
 * its higher priority (y's "y-hi", enqueued last); a group that ran out
 * leaves the turns to the others. The same order one job per claim (a
 * worker of one slot: a weighted turn lasts across claims) and in one
 * claim of all 17 (several turns per group's pop). */
static const char *const WRR_ORDER[] = {"x1", "x2", "y-hi", "z1", "z2", "z3", "x3", "x4", "y1",
                                        "z4", "z5", "z6", "x5", "y2", "z7", "y3", "y4"};
#define WRR_JOBS ((int)(sizeof WRR_ORDER / sizeof WRR_ORDER[0]))

static void enqueue_weighted_three(test_env *e) {
    char p[16];
    for (int i = 1; i <= 5; i++) {
        snprintf(p, sizeof p, "x%d", i);
        ASSERT_OK(enqueue_in(e, e->q, p, "x", 0).status);
    }
    for (int i = 1; i <= 4; i++) {
        snprintf(p, sizeof p, "y%d", i);
        ASSERT_OK(enqueue_in(e, e->q, p, "y", 0).status);
    }
    for (int i = 1; i <= 7; i++) {
        snprintf(p, sizeof p, "z%d", i);
        ASSERT_OK(enqueue_in(e, e->q, p, "z", 0).status);
    }
    ASSERT_OK(enqueue_in(e, e->q, "y-hi", "y", 5).status);
}

TEST(weighted_round_robin_starts_three_groups_in_exact_turn_order_per_claim_and_in_one_claim) {
    test_env e;
    env_start(&e, "gwr");
    set_limits(&e, NULL, 0, 2); /* every group: 2 per turn */
    rjq_group_limits one = RJQ_GROUP_LIMITS_INIT;
    one.weight = 1;
    limit_group(&e, "y", &one);
    set_limits(&e, "z", -1, 3);
    enqueue_weighted_three(&e);
    ran r;
    rjq_worker *w = start_noting(&e, &r, 1);
    WAIT_FOR(e.base, r.n == WRR_JOBS, 10000);
    worker_stop_wait(e.base, w);
    for (int i = 0; i < WRR_JOBS; i++) ASSERT_STREQ(WRR_ORDER[i], r.order[i]);
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{gwr}:g:job t:{gwr}:g:ring") == 0, 10000);
    /* again, all in one claim */
    enqueue_weighted_three(&e);
    redisReply *c = claim_as_worker(&e, "gwr", "100", "cx.w.1");
    ASSERT(c->type == REDIS_REPLY_ARRAY);
    ASSERT_EQ(4 + 5 * WRR_JOBS, (long)c->elements);
    for (int i = 0; i < WRR_JOBS; i++) ASSERT_STREQ(WRR_ORDER[i], c->element[5 + 5 * i]->str);
    freeReplyObject(c);
    env_stop(&e);
}

/* A child process's worker that holds each job 10 ms (a timer on its own
 * loop), then completes it. */
typedef struct child_holder {
    struct event_base *base;
} child_holder;

static void child_complete_later(evutil_socket_t fd, short what, void *data) {
    (void)fd;
    (void)what;
    ASSERT_OK(rjq_job_complete(data, "", 0, NULL, NULL));
}

static void child_hold_a_while(rjq_job *job, void *data) {
    child_holder *ch = data;
    struct timeval tv = {0, 10000};
    ASSERT(event_base_once(ch->base, -1, EV_TIMEOUT, child_complete_later, job, &tv) == 0);
}

static pid_t spawn_holding_worker(const test_server *s, const char *qname, int concurrency) {
    pid_t pid = fork_child();
    if (pid != 0) return pid;
    static child_holder ch;
    ch.base = event_base_new();
    rjq_client *c = client_for(ch.base, s);
    rjq_worker_options wo = quiet_worker_options(concurrency);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(queue_for(c, qname), &wo, child_hold_a_while, &ch, &w));
    serve_until_killed(ch.base, 60000);
}

/* Each group's jobs running by the queue's events in the server's order
 * (an "active" event published by the claim that started a job, a
 * "completed" one by the completion that ended it: one script each, so
 * the count between two events is the server's own at that point). */
typedef struct group_running {
    long running[3], most[3], started[3], completed[3], other;
} group_running;

static void on_group_running(rjq_client *c, const char *ev, const char *id, void *data) {
    group_running *g = data;
    (void)c;
    int k = id[0] == 'a' ? 0 : id[0] == 'b' ? 1 : id[0] == 'c' ? 2 : -1;
    if (k < 0) return;
    if (strcmp(ev, "active") == 0) {
        g->started[k]++;
        if (++g->running[k] > g->most[k]) g->most[k] = g->running[k];
    } else if (strcmp(ev, "completed") == 0) {
        g->completed[k]++;
        g->running[k]--;
    } else if (strcmp(ev, "enqueued") != 0) {
        g->other++; /* (a reclaim, a failure: none here) */
    }
}

#define CONC_JOBS 30

/* The issue's measure: per-group concurrency holds across 3 worker
 * processes (12 slots between them): the most running at once, counted
 * from the server's own events, never above the limit (a: 2, the
 * defaults'; b: 3, its own), while c (no limit: RJQ_GROUP_NONE lifts the
 * defaults') is not held to them. */
TEST(group_concurrency_holds_across_3_worker_processes_by_the_servers_events) {
    test_env e;
    env_start(&e, "gcp");
    static group_running g;
    memset(&g, 0, sizeof g);
    rjq_monitor *m;
    ASSERT_OK(rjq_queue_monitor(e.q, on_group_running, &g, &m));
    monitored_poll mp = {&e, "gcp", "t:{gcp}:events"};
    ASSERT(loop_until_cond(e.base, is_monitored, &mp, 20000)); /* (a missed event never comes) */
    set_limits(&e, NULL, 2, 0);
    set_limits(&e, "b", 3, 0);
    rjq_group_limits none = RJQ_GROUP_LIMITS_INIT;
    none.concurrency = RJQ_GROUP_NONE;
    limit_group(&e, "c", &none);
    char id[16];
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = id;
    for (int i = 0; i < CONC_JOBS; i++)
        for (int k = 0; k < 3; k++) {
            char grp[2] = {(char)('a' + k), 0};
            snprintf(id, sizeof id, "%s%d", grp, i);
            o.group = grp;
            ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
        }
    pid_t pids[3];
    for (int k = 0; k < 3; k++) pids[k] = spawn_holding_worker(&e.s, "gcp", 4);
    WAIT_FOR(e.base, g.completed[0] == CONC_JOBS && g.completed[1] == CONC_JOBS &&
                         g.completed[2] == CONC_JOBS, 60000);
    for (int k = 0; k < 3; k++) {
        kill(pids[k], SIGKILL);
        reap(pids[k], 5000);
    }
    fprintf(stderr, "most running at once over 3 worker processes: a %ld (limit 2), b %ld (limit 3), "
                    "c %ld (no limit)\n", g.most[0], g.most[1], g.most[2]);
    for (int k = 0; k < 3; k++) {
        ASSERT_EQ(CONC_JOBS, g.started[k]); /* (each once: no event missed, none run twice) */
        ASSERT_EQ(0, g.running[k]);
    }
    ASSERT_EQ(0, g.other);
    ASSERT(g.most[0] >= 1 && g.most[0] <= 2);
    ASSERT(g.most[1] >= 1 && g.most[1] <= 3);
    ASSERT(g.most[2] >= 1);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{gcp}:g:job t:{gcp}:g:a:a t:{gcp}:g:a:b"));
    ASSERT_OK(rjq_monitor_stop(m));
    env_stop(&e);
}

/* A bound on the waiting jobs set once for every group (group NULL) holds
 * for each group on its own, and a group may lift it (RJQ_GROUP_NONE); the
 * bound counts ready jobs only (delayed ones are not counted; a delayed
 * enqueue is admitted by its group's ready jobs then), and a job
 * coming back to a full group is never refused: one reclaimed (its lease
 * lost) and one retried after a failure both return to it, past the
 * bound, nothing lost. */
TEST(a_default_group_bound_counts_no_delayed_job_and_never_refuses_a_reclaimed_or_retried_one) {
    test_env e;
    env_start(&e, "gdb");
    rjq_group_limits l = RJQ_GROUP_LIMITS_INIT;
    l.max_waiting = 2;
    limit_group(&e, NULL, &l);
    rjq_group_limits none = RJQ_GROUP_LIMITS_INIT;
    none.max_waiting = RJQ_GROUP_NONE;
    limit_group(&e, "free", &none);
    /* c's first job starts (a worker that then hangs), two more fill c */
    ASSERT_OK(enqueue_id_in(&e, "c1", "c", 0, 0).status);
    redisReply *r = claim_as_worker(&e, "gdb", "5", "cx.w.1");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4 + 5);
    ASSERT_STREQ("c1", r->element[4]->str);
    freeReplyObject(r);
    ASSERT_OK(enqueue_id_in(&e, "c2", "c", 0, 0).status);
    ASSERT_OK(enqueue_id_in(&e, "c3", "c", 0, 0).status);
    ASSERT_EQ(RJQ_EFULL, enqueue_id_in(&e, "c4", "c", 0, 0).status);
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{gdb}:payload c4"));
    /* every group has the bound, each its own; its delayed jobs are not
     * counted (b's two), and a delayed job is admitted by the ready jobs
     * its group has when it is enqueued (refused once b is full) */
    ASSERT_OK(enqueue_id_in(&e, "b-later1", "b", 0, 3600000).status);
    ASSERT_OK(enqueue_id_in(&e, "b-later2", "b", 0, 3600000).status);
    ASSERT_OK(enqueue_id_in(&e, "b1", "b", 0, 0).status);
    ASSERT_OK(enqueue_id_in(&e, "b2", "b", 0, 0).status);
    ASSERT_EQ(RJQ_EFULL, enqueue_id_in(&e, "b3", "b", 0, 0).status);
    ASSERT_EQ(RJQ_EFULL, enqueue_id_in(&e, "b-later3", "b", 0, 3600000).status);
    ASSERT_EQ(2, groups_of(&e, "b").bound[0]);
    ASSERT_EQ(2, groups_of(&e, "b").depth[0]);
    /* lifted for one group */
    for (int i = 0; i < 3; i++) ASSERT_OK(enqueue_in(&e, e.q, "x", "free", 0).status);
    ASSERT_EQ(0, groups_of(&e, "free").bound[0]);
    /* c1's lease runs out: the sweep returns it to full c, past the bound */
    freeReplyObject(server_cmd(e.rc, "ZADD t:{gdb}:active 1 c1"));
    count_wait cw = {0, 0, 0};
    ASSERT_OK(rjq_queue_reclaim(e.q, on_count, &cw));
    WAIT_FOR(e.base, cw.done == 1, 10000);
    ASSERT_EQ(1, cw.n);
    ASSERT_STREQ("ready", get_info(e.base, e.q, "c1").state);
    ASSERT_EQ(3, groups_of(&e, "c").depth[0]);
    ASSERT_STREQ("c1,c2,c3", members(&e, "LRANGE", "t:{gdb}:g:r:c")); /* (c1 at the head) */
    ASSERT_EQ(RJQ_EFULL, enqueue_id_in(&e, "c4", "c", 0, 0).status);

    /* a's job fails while a is full and paused (its retry then waits in
     * it): it comes back to a, past the bound */
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "a1";
    o.group = "a";
    o.backoff.type = RJQ_BACKOFF_FIXED;
    o.backoff.base_ms = 1;
    ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
    pause_group(&e, "b", 1);
    pause_group(&e, "c", 1);
    pause_group(&e, "free", 1);
    last_held h = {NULL, 0};
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, hold_last_handler, &h, &w));
    WAIT_FOR(e.base, h.started == 1, 10000);
    ASSERT_STREQ("a1", rjq_job_get_id(h.job));
    pause_group(&e, "a", 1);
    ASSERT_OK(enqueue_id_in(&e, "a2", "a", 0, 0).status);
    ASSERT_OK(enqueue_id_in(&e, "a3", "a", 0, 0).status);
    ASSERT_EQ(RJQ_EFULL, enqueue_id_in(&e, "a4", "a", 0, 0).status);
    long failed = 0;
    ASSERT_OK(rjq_job_fail(h.job, "boom", 0, -1, on_done_ok, &failed));
    WAIT_FOR(e.base, failed == 1, 10000);
    WAIT_FOR(e.base, groups_of(&e, "a").depth[0] == 3, 10000); /* (its backoff over) */
    ASSERT_STREQ("ready", get_info(e.base, e.q, "a1").state);
    ASSERT_EQ(1, get_info(e.base, e.q, "a1").attempts);
    ASSERT_EQ(RJQ_EFULL, enqueue_id_in(&e, "a4", "a", 0, 0).status);
    ASSERT_EQ(1, h.started); /* (paused: nothing started meanwhile) */
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* Push delivery respects a group's pause: an idle worker gets nothing of a
 * paused group (its job waits in it, no claim runs), the other groups'
 * jobs are pushed as before, and the resume's doorbell starts it. */
TEST(a_paused_group_gets_nothing_pushed_to_an_idle_worker_and_its_resume_starts_it) {
    test_env e;
    env_start(&e, "gpp");
    pause_group(&e, "a", 1);
    static holding h;
    rjq_worker *w = idle_holder(&e, "gpp", &h, 0);
    long long claims = claims_run(e.rc);
    ASSERT_OK(enqueue_id_in(&e, "a1", "a", 0, 0).status);
    ASSERT_OK(enqueue_id_in(&e, "b1", "b", 0, 0).status);
    WAIT_FOR(e.base, h.n == 1, 10000); /* (a1's push, were there one, came first) */
    ASSERT_STREQ("b1", h.id[0]);
    ASSERT_EQ(claims, claims_run(e.rc)); /* (b1 pushed: no claim ran) */
    ASSERT_EQ(2, registered_slots(e.rc, "gpp"));
    groups_wait l = groups_of(&e, "a");
    ASSERT_EQ(1, l.depth[0]);
    ASSERT_EQ(0, l.active[0]);
    ASSERT_EQ(1, l.paused[0]);
    ASSERT_EQ(0, server_int(e.rc, "EVAL %s 1 t:{gpp}:g:ring a", /* (out of the ring) */
                            "return redis.call('ZSCORE', KEYS[1], ARGV[1]) and 1 or 0"));
    ASSERT_EQ(1, h.n);
    pause_group(&e, "a", 0);
    WAIT_FOR(e.base, h.n == 2, 10000);
    ASSERT_STREQ("a1", h.id[1]);
    for (int i = 0; i < 2; i++) ASSERT_OK(rjq_job_complete(h.job[i], "", 0, NULL, NULL));
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{gpp}:g:job t:{gpp}:g:all") == 0, 10000);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* A group at its rate limit after a claim (not a push: its jobs were there
 * before the worker) costs no polling: the claim that comes back short
 * tells the worker when the group's window turns, and the worker (quiet:
 * it would poll only after 60 s) starts the next job then, a few claims
 * in all (without that wake its jobs would wait for the poll, past this
 * test's wait). */
TEST(a_group_at_its_rate_limit_after_a_claim_starts_again_when_its_window_turns_without_polling) {
    test_env e;
    env_start(&e, "gwc");
    rate_group_a(&e, 700);
    ASSERT_OK(enqueue_in(&e, e.q, "a1", "a", 0).status);
    ASSERT_OK(enqueue_in(&e, e.q, "a2", "a", 0).status);
    ASSERT_OK(enqueue_in(&e, e.q, "a3", "a", 0).status);
    long long claims = claims_run(e.rc);
    ran r;
    rjq_worker *w = start_noting(&e, &r, 3);
    WAIT_FOR(e.base, r.n == 3, 20000);
    long long n = claims_run(e.rc) - claims;
    fprintf(stderr, "  claims for 3 jobs of a group at 1 per 700 ms: %lld\n", n);
    ASSERT_STREQ("a1", r.order[0]);
    ASSERT_STREQ("a2", r.order[1]);
    ASSERT_STREQ("a3", r.order[2]);
    ASSERT(n <= 10); /* (the first, one per window, the completions': no polling) */
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* A pause and resume keep a group's limits: paused while it waits for its
 * rate window, its resume does not start its next job before the window
 * turns (a claim finds nothing); paused at its concurrency limit, the slot
 * its running job frees starts nothing (a claim finds nothing), and its
 * resume's doorbell then starts its next job. */
TEST(a_group_paused_and_resumed_at_its_limit_keeps_its_limit) {
    test_env e;
    env_start(&e, "gpl");
    set_limits(&e, "a", 1, 0);
    rjq_group_limits l = RJQ_GROUP_LIMITS_INIT;
    l.rate = 1;
    l.rate_window_ms = 600000; /* (b: one start in ten minutes) */
    limit_group(&e, "b", &l);
    static holding h;
    rjq_worker *w = idle_holder(&e, "gpl", &h, 0);
    ASSERT_OK(enqueue_id_in(&e, "b1", "b", 0, 0).status);
    WAIT_FOR(e.base, h.n == 1, 10000);
    ASSERT_OK(enqueue_id_in(&e, "b2", "b", 0, 0).status);
    ASSERT_EQ(1, server_int(e.rc, "ZCARD t:{gpl}:g:rated"));
    pause_group(&e, "b", 1);
    pause_group(&e, "b", 0);
    redisReply *r = claim_as_worker(&e, "gpl", "5", "cz.w.1");
    ASSERT(r->type == REDIS_REPLY_ARRAY);
    ASSERT_EQ(4, (long)r->elements); /* (b2 waits for b's window) */
    freeReplyObject(r);
    ASSERT_OK(enqueue_id_in(&e, "a1", "a", 0, 0).status);
    WAIT_FOR(e.base, h.n == 2, 10000);
    ASSERT_STREQ("a1", h.id[1]);
    ASSERT_OK(enqueue_id_in(&e, "a2", "a", 0, 0).status);
    pause_group(&e, "a", 1);
    long done = 0;
    ASSERT_OK(rjq_job_complete(h.job[1], "", 0, on_done_ok, &done));
    WAIT_FOR(e.base, done == 1, 10000);
    r = claim_as_worker(&e, "gpl", "5", "cz.w.1");
    ASSERT(r->type == REDIS_REPLY_ARRAY);
    ASSERT_EQ(4, (long)r->elements); /* (a paused: its free slot starts nothing) */
    freeReplyObject(r);
    ASSERT_EQ(2, h.n);
    ASSERT_EQ(1, groups_of(&e, "a").depth[0]);
    ASSERT_EQ(1, groups_of(&e, "b").depth[0]);
    pause_group(&e, "a", 0);
    WAIT_FOR(e.base, h.n == 3, 10000);
    ASSERT_STREQ("a2", h.id[2]);
    ASSERT_EQ(1, groups_of(&e, "b").depth[0]); /* (b2 still waits) */
    ASSERT_OK(rjq_job_complete(h.job[0], "", 0, NULL, NULL));
    ASSERT_OK(rjq_job_complete(h.job[2], "", 0, NULL, NULL));
    WAIT_FOR(e.base, server_int(e.rc, "SCARD t:{gpl}:g:a:a") == 0, 10000);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

/* Group g's started counter as g:act holds it (GROUPS.sfield: "<g> s");
 * -1: no such field. */
static long long started_field(test_env *e, const char *qn, const char *g) {
    char f[80];
    snprintf(f, sizeof f, "%s s", g);
    redisReply *r = server_cmd(e->rc, "HGET t:{%s}:g:act %s", qn, f);
    long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : r->type == REDIS_REPLY_NIL ? -1 : -2;
    freeReplyObject(r);
    return v;
}

static long long started_listed(test_env *e, const char *g) {
    groups_wait l = groups_of(e, g);
    ASSERT_EQ(1, (long)l.n);
    return l.started[0];
}

/* A group's started counter (rjq_group_info.started, issue 40's per-group
 * rates: `rjq top` and the dashboard difference two readings): exact after
 * starts of several groups in one claim, kept while the group is listed
 * (its completions do not count it down), set back (its field gone) when
 * the completion that empties the group unlists it, and counting a push to
 * an idle worker as a claim's start; kept in g:act beside the running
 * counts (the claim's one HMGET and one HSET of it: no command more). */
TEST(a_groups_started_counter_counts_its_claims_and_pushes_and_leaves_with_its_listing) {
    test_env e;
    env_start(&e, "gst");
    const char *jobs[] = {"a0", "a", "a1", "a", "a2", "a", "b0", "b", "b1", "b", "c0", "c"};
    for (int i = 0; i < 12; i += 2) ASSERT_OK(enqueue_in(&e, e.q, jobs[i], jobs[i + 1], 0).status);
    redisReply *r = claim_as_worker(&e, "gst", "6", "cs.w.1"); /* (one claim: all six) */
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4 + 5 * 6);
    ASSERT_EQ(3, started_field(&e, "gst", "a"));
    ASSERT_EQ(2, started_field(&e, "gst", "b"));
    ASSERT_EQ(1, started_field(&e, "gst", "c"));
    ASSERT_EQ(3, started_listed(&e, "a"));
    ASSERT_EQ(2, started_listed(&e, "b"));
    ASSERT_EQ(1, started_listed(&e, "c"));
    groups_wait all = groups_of(&e, NULL); /* (the listing's page carries them too) */
    ASSERT_EQ(3, (long)all.n);
    for (size_t i = 0; i < all.n; i++)
        ASSERT_EQ(all.name[i][0] == 'a' ? 3 : all.name[i][0] == 'b' ? 2 : 1, all.started[i]);
    /* a keeps a ready job: listed, its counter kept; b and c emptied by the
     * completion: unlisted, their counters gone */
    ASSERT_OK(enqueue_in(&e, e.q, "a3", "a", 0).status);
    complete_claimed(&e, "gst", r, 6);
    freeReplyObject(r);
    ASSERT_EQ(3, started_listed(&e, "a"));
    ASSERT_EQ(0, groups_of(&e, "a").active[0]);
    ASSERT_EQ(-1, started_field(&e, "gst", "b"));
    ASSERT_EQ(-1, started_field(&e, "gst", "c"));
    ASSERT_EQ(0, started_listed(&e, "b")); /* (listed with zeros) */
    ASSERT_EQ(2, server_int(e.rc, "HLEN t:{gst}:g:act")); /* (the pin and a's counter) */
    r = claim_as_worker(&e, "gst", "6", "cs.w.2");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 4 + 5 * 1);
    ASSERT_EQ(4, started_listed(&e, "a"));
    complete_claimed(&e, "gst", r, 1);
    freeReplyObject(r);
    ASSERT_EQ(-1, started_field(&e, "gst", "a")); /* (a unlisted: set back) */
    ASSERT_EQ(1, server_int(e.rc, "HLEN t:{gst}:g:act"));
    /* pushed to an idle worker (no claim runs): counted as started */
    freeReplyObject(server_cmd(e.rc, "DEL t:{gst}:idle")); /* (the short claims' registration) */
    static holding h;
    rjq_worker *w = idle_holder(&e, "gst", &h, 0);
    long long claims = claims_run(e.rc);
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.group = "b";
    o.id = "b9";
    ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
    WAIT_FOR(e.base, h.n == 1, 10000);
    ASSERT_STREQ("b9", h.id[0]);
    ASSERT_EQ(claims, claims_run(e.rc)); /* (pushed: no claim ran) */
    ASSERT_EQ(1, started_listed(&e, "b"));
    ASSERT_EQ(1, groups_of(&e, "b").active[0]);
    ASSERT_OK(rjq_job_complete(h.job[0], "", 0, NULL, NULL));
    WAIT_FOR(e.base, server_int(e.rc, "EXISTS t:{gst}:g:job t:{gst}:g:all") == 0, 10000);
    ASSERT_EQ(-1, started_field(&e, "gst", "b"));
    worker_stop_wait(e.base, w);
    env_stop(&e);
}
