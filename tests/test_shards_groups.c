/*
 * Job groups on a sharded queue (issue 40 "On a sharded queue, a group's
 * jobs stay on one shard so its limits stay exact"; README "Groups",
 * docs/sharding.md section 4): a group's jobs go to the shard its name
 * hashes to; its settings and pause go there, the defaults of every group
 * to every shard; the listing is merged over the shards, each group once.
 * On the test cluster (3 shards, one per master, 2 worker clients): a
 * per-group concurrency limit holds, pausing one group stops only it, the
 * merged listing carries each group's started counter from its shard. On a
 * standalone server: a caller id that would route to another shard than
 * its group's is refused with nothing written, one that routes there is
 * found by id on the front, and group calls made on a handle still
 * reading its layout wait for it and are routed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "cluster.h"
#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

#define SHARDS 3
#define GROUPS 12
#define PER 6 /* jobs per group */
#define JOBS (GROUPS * PER)
#define LIMIT 2 /* every group's concurrency */
#define PAUSED 3 /* the group paused */
#define HOLD_MS 20

static groups_wait groups_of(struct event_base *base, rjq_queue *q, const char *one, long offset,
                             long count) {
    groups_wait g;
    memset(&g, 0, sizeof g);
    ASSERT_OK(rjq_queue_list_groups(q, one, offset, count, on_groups, &g));
    ASSERT(loop_until(base, &g.done, 20000));
    ASSERT_EQ(1, g.done);
    ASSERT_OK(g.status);
    return g;
}

static void set_or_pause(struct event_base *base, rjq_queue *q, const char *group, int pause,
                         int paused, int conc) {
    count_wait cw = {0};
    if (pause) ASSERT_OK(rjq_queue_pause_group(q, group, paused, on_count, &cw));
    else ASSERT_OK(rjq_queue_set_group_limits(q, group, conc, 0, on_count, &cw));
    ASSERT(loop_until(base, &cw.done, 20000));
    ASSERT_EQ(1, cw.done);
    ASSERT_OK(cw.status);
}

/* The jobs' runs, and per group the jobs running as the workers see them
 * (up when a job starts, down just before its completion is sent: inside
 * its time active on the server, so never above the server's count). */
typedef struct runs {
    struct event_base *base;
    long started, done;
    int run[JOBS];
    int running[GROUPS], most[GROUPS];
    rjq_job *last[GROUPS]; /* each group's last job, held (running) until let go */
    long held;
} runs;

static runs R;

static int group_of_payload(const char *p, int *job) {
    int g = -1, k = -1;
    ASSERT(sscanf(p, "g%d-%d", &g, &k) == 2 && g >= 0 && g < GROUPS && k >= 0 && k < PER);
    *job = g * PER + k;
    return g;
}

static void finish_held(evutil_socket_t fd, short what, void *arg) {
    rjq_job *job = arg;
    (void)fd, (void)what;
    size_t len;
    int n;
    int g = group_of_payload(rjq_job_get_payload(job, &len), &n);
    R.running[g]--;
    ASSERT_OK(rjq_job_complete(job, NULL, 0, on_done_ok, &R.done));
}

static void held_handler(rjq_job *job, void *data) {
    runs *r = data;
    size_t len;
    int n;
    int g = group_of_payload(rjq_job_get_payload(job, &len), &n);
    char want[16];
    snprintf(want, sizeof want, "t%d", g);
    const char *hdr = rjq_job_get_header(job, "rjq.group");
    ASSERT(hdr != NULL && strcmp(hdr, want) == 0);
    r->run[n]++;
    r->started++;
    if (++r->running[g] > r->most[g]) r->most[g] = r->running[g];
    if (n % PER == PER - 1 && r->last[g] == NULL) { /* (its group stays listed: one running) */
        r->last[g] = job;
        r->held++;
        return;
    }
    struct timeval tv = {0, HOLD_MS * 1000};
    ASSERT(event_base_once(r->base, -1, EV_TIMEOUT, finish_held, job, &tv) == 0);
}

/* The ids of a batch's jobs (rjq_enqueue_batch's callback). */
typedef struct batch_ids {
    int done, status;
    size_t n;
    char ids[8][64];
} batch_ids;

static void on_batch_ids(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    batch_ids *b = data;
    (void)c;
    b->status = status;
    b->n = n;
    for (size_t i = 0; status == RJQ_OK && i < n && i < 8; i++)
        snprintf(b->ids[i], sizeof b->ids[i], "%s", rjq_enqueued_get(jobs, i)->id);
    b->done = 1;
}

TEST(groups_of_a_sharded_queue_on_3_masters_stay_on_one_shard_with_exact_limits_pause_and_listing) {
    test_cluster cl;
    cluster_start(&cl, 0);
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(cl.url);
    rjq_client *c = client_new(base, &o);
    rjq_queue *q = open_learnt(base, c, "shg");
    ASSERT_OK(declare_shards(base, q, SHARDS));
    /* every group at most LIMIT at once: the defaults, on every shard */
    set_or_pause(base, q, NULL, 0, 0, LIMIT);

    static char ids[JOBS][256];
    for (int g = 0; g < GROUPS; g++) {
        char group[16];
        snprintf(group, sizeof group, "t%d", g);
        for (int k = 0; k < PER; k++) {
            char p[16];
            snprintf(p, sizeof p, "g%d-%d", g, k);
            rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
            jo.group = group;
            enqueue_wait ew = enqueue_job(base, q, p, &jo);
            ASSERT_OK(ew.status);
            snprintf(ids[g * PER + k], sizeof ids[0], "%s", ew.id);
        }
    }
    /* each group's jobs on one shard (found there by their made ids),
     * the groups over more than one shard */
    int shard_of[GROUPS], used[SHARDS] = {0};
    for (int g = 0; g < GROUPS; g++) {
        shard_of[g] = shard_holding(base, q, ids[g * PER]);
        ASSERT(shard_of[g] >= 0 && shard_of[g] < SHARDS);
        used[shard_of[g]]++;
        for (int k = 1; k < PER; k++) ASSERT_EQ(shard_of[g], shard_holding(base, q, ids[g * PER + k]));
    }
    int shards_used = 0;
    for (int s = 0; s < SHARDS; s++) shards_used += used[s] > 0;
    fprintf(stderr, "groups per shard: %d %d %d\n", used[0], used[1], used[2]);
    ASSERT(shards_used >= 2);

    /* the listing: every group once, merged over the shards */
    groups_wait l = groups_of(base, q, NULL, 0, 32);
    ASSERT_EQ(GROUPS, l.total);
    ASSERT_EQ(GROUPS, (long long)l.n);
    int seen[GROUPS] = {0};
    for (size_t i = 0; i < l.n; i++) {
        int g = -1;
        ASSERT(sscanf(l.name[i], "t%d", &g) == 1 && g >= 0 && g < GROUPS);
        ASSERT_EQ(0, seen[g]++);
        ASSERT_EQ(PER, l.depth[i]);
        ASSERT_EQ(LIMIT, l.concurrency[i]); /* (the defaults, on its shard) */
    }
    /* a page is a slice of the merged order */
    groups_wait page = groups_of(base, q, NULL, 5, 4);
    ASSERT_EQ(4, (long long)page.n);
    for (int i = 0; i < 4; i++) ASSERT_STREQ(l.name[5 + i], page.name[i]);
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_list_groups(q, NULL, 990, 20, on_groups, &page));

    /* one group paused: on its shard */
    char paused[16];
    snprintf(paused, sizeof paused, "t%d", PAUSED);
    set_or_pause(base, q, paused, 1, 1, 0);
    groups_wait one = groups_of(base, q, paused, 0, 1);
    ASSERT_EQ(1, (long long)one.n);
    ASSERT_EQ(1, one.paused[0]);

    memset(&R, 0, sizeof R);
    R.base = base;
    rjq_client *wc[2];
    rjq_worker *w[2];
    for (int k = 0; k < 2; k++) {
        wc[k] = client_new(base, &o);
        rjq_queue *qk = open_learnt(base, wc[k], "shg");
        ASSERT_EQ(SHARDS, rjq_queue_count_shards(qk));
        rjq_worker_options wo = quiet_worker_options(10);
        ASSERT_OK(rjq_worker_start(qk, &wo, held_handler, &R, &w[k]));
    }
    /* every group's last job held running: each listed on its shard with
     * its started counter (rjq_group_info.started), the merged listing's
     * counters adding up to the jobs started over the 3 shards */
    ASSERT(loop_until_count(base, &R.held, GROUPS - 1, 60000));
    ASSERT(loop_until_count(base, &R.done, JOBS - PER - (GROUPS - 1), 60000));
    l = groups_of(base, q, NULL, 0, 32);
    ASSERT_EQ(GROUPS, l.total);
    long long started = 0;
    for (size_t i = 0; i < l.n; i++) {
        int g = -1;
        ASSERT(sscanf(l.name[i], "t%d", &g) == 1 && g >= 0 && g < GROUPS);
        ASSERT_EQ(g == PAUSED ? 0 : PER, l.started[i]);
        ASSERT_EQ(g == PAUSED ? 0 : 1, l.active[i]);
        started += l.started[i];
    }
    ASSERT_EQ(R.started, started);
    ASSERT_EQ((GROUPS - 1) * PER, started);
    for (int g = 0; g < GROUPS; g++)
        if (R.last[g]) ASSERT(event_base_once(base, -1, EV_TIMEOUT, finish_held, R.last[g], NULL) == 0);
    ASSERT(loop_until_count(base, &R.done, JOBS - PER, 60000));
    /* the paused group's jobs wait, every other job ran once */
    one = groups_of(base, q, paused, 0, 1);
    ASSERT_EQ(PER, one.depth[0]);
    ASSERT_EQ(0, one.active[0]);
    l = groups_of(base, q, NULL, 0, 32);
    ASSERT_EQ(1, l.total);
    ASSERT_STREQ(paused, l.name[0]);
    ASSERT_EQ(0, l.started[0]);
    int most = 0;
    for (int g = 0; g < GROUPS; g++) {
        for (int k = 0; k < PER; k++) ASSERT_EQ(g == PAUSED ? 0 : 1, R.run[g * PER + k]);
        ASSERT(R.most[g] <= LIMIT);
        if (R.most[g] > most) most = R.most[g];
    }
    fprintf(stderr, "most running of one group: %d (limit %d)\n", most, LIMIT);
    ASSERT_EQ(LIMIT, most); /* (the limit was reached: it bound something) */
    /* resumed: its jobs run, on its shard */
    set_or_pause(base, q, paused, 1, 0, 0);
    ASSERT(loop_until_count(base, &R.held, GROUPS, 60000));
    ASSERT_EQ(PER, groups_of(base, q, paused, 0, 1).started[0]);
    ASSERT(event_base_once(base, -1, EV_TIMEOUT, finish_held, R.last[PAUSED], NULL) == 0);
    ASSERT(loop_until_count(base, &R.done, JOBS, 60000));
    for (int k = 0; k < PER; k++) ASSERT_EQ(1, R.run[PAUSED * PER + k]);
    ASSERT(R.most[PAUSED] <= LIMIT);
    for (int k = 0; k < 2; k++) worker_stop_wait(base, w[k]);
    rjq_stats st = get_stats(base, q);
    ASSERT_EQ(JOBS, st.completed);
    ASSERT_EQ(0, st.ready + st.active + st.delayed);
    l = groups_of(base, q, NULL, 0, 32);
    ASSERT_EQ(0, l.total);
    for (int k = 0; k < 2; k++) rjq_client_free(wc[k]);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}

TEST(a_group_jobs_caller_id_must_route_to_its_groups_shard_and_is_found_by_id) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "shi");
    ASSERT_OK(declare_shards(e.base, q, SHARDS));
    /* the group's shard, from an anonymous job of it */
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.group = "acme";
    enqueue_wait ew = enqueue_job(e.base, q, "anon", &jo);
    ASSERT_OK(ew.status);
    int gs = shard_holding(e.base, q, ew.id);
    ASSERT(gs >= 0);
    /* caller ids: refused (nothing written) unless they route to that shard */
    int accepted = 0, refused = 0;
    char id[32];
    for (int k = 0; k < 12; k++) {
        snprintf(id, sizeof id, "order-%d", k);
        jo.id = id;
        memset(&ew, 0, sizeof ew);
        int rc = rjq_enqueue(q, "x", 1, &jo, on_enqueue_wait, &ew);
        if (rc == RJQ_EINVAL) {
            refused++;
            ASSERT_EQ(-1, shard_holding(e.base, q, id)); /* (nothing written) */
            continue;
        }
        ASSERT_OK(rc);
        ASSERT(loop_until(e.base, &ew.done, 10000));
        ASSERT_OK(ew.status);
        accepted++;
        /* on the group's shard, and found by its id on the front */
        ASSERT_EQ(gs, shard_holding(e.base, q, id));
        info_wait iw = get_info(e.base, q, id);
        ASSERT_OK(iw.status);
        ASSERT_STREQ("ready", iw.state);
    }
    fprintf(stderr, "caller ids of group acme: %d accepted, %d refused\n", accepted, refused);
    ASSERT(accepted > 0 && refused > 0);
    groups_wait l = groups_of(e.base, q, "acme", 0, 1);
    ASSERT_EQ(1 + accepted, l.depth[0]);
    env_stop(&e);
}

/* A batch (rjq_enqueue_batch) of anonymous group jobs on a sharded queue:
 * each job on its group's shard (a made id that routes there), every
 * result in the caller's order, the groups' depths counting them. */
TEST(a_batch_of_group_jobs_on_a_sharded_queue_puts_each_on_its_groups_shard) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "shb");
    ASSERT_OK(declare_shards(e.base, q, SHARDS));
    const char *groups[] = {"acme", "beta", "acme", "gamma", "beta", "acme"};
    rjq_job_options jo[6];
    rjq_enqueue_item its[6];
    for (int i = 0; i < 6; i++) {
        jo[i] = (rjq_job_options)RJQ_JOB_OPTIONS_INIT;
        jo[i].group = groups[i];
        its[i] = (rjq_enqueue_item)RJQ_ENQUEUE_ITEM_INIT;
        its[i].payload = groups[i];
        its[i].len = strlen(groups[i]);
        its[i].opts = &jo[i];
    }
    batch_ids b;
    memset(&b, 0, sizeof b);
    ASSERT_OK(rjq_enqueue_batch(q, its, 6, on_batch_ids, &b));
    ASSERT(loop_until(e.base, &b.done, 10000));
    ASSERT_OK(b.status);
    ASSERT_EQ(6, b.n);
    int at[6];
    for (int i = 0; i < 6; i++) {
        at[i] = shard_holding(e.base, q, b.ids[i]);
        ASSERT(at[i] >= 0);
    }
    ASSERT(at[0] == at[2] && at[0] == at[5] && at[1] == at[4]);
    ASSERT_EQ(3, groups_of(e.base, q, "acme", 0, 1).depth[0]);
    ASSERT_EQ(2, groups_of(e.base, q, "beta", 0, 1).depth[0]);
    env_stop(&e);
}

TEST(group_calls_on_a_handle_still_reading_its_layout_wait_and_are_routed) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *decl = open_learnt(e.base, e.c, "shw");
    ASSERT_OK(declare_shards(e.base, decl, SHARDS));
    rjq_client_options o = client_options(e.s.url);
    rjq_client *p = client_new(e.base, &o);
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(p, "shw", NULL, &q));
    /* at once, in the same turn: held until the layout is read */
    count_wait limits = {0}, pause = {0};
    ASSERT_OK(rjq_queue_set_group_limits(q, NULL, 4, 0, on_count, &limits));
    ASSERT_OK(rjq_queue_pause_group(q, "zeta", 1, on_count, &pause));
    rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
    jo.group = "zeta";
    enqueue_wait ew = {0};
    ASSERT_OK(rjq_enqueue(q, "z", 1, &jo, on_enqueue_wait, &ew));
    groups_wait l;
    memset(&l, 0, sizeof l);
    ASSERT_OK(rjq_queue_list_groups(q, NULL, 0, 10, on_groups, &l));
    ASSERT(loop_until(e.base, &l.done, 20000));
    ASSERT_EQ(1, limits.done);
    ASSERT_OK(limits.status);
    ASSERT_EQ(1, pause.done);
    ASSERT_OK(pause.status);
    ASSERT_EQ(1, ew.done);
    ASSERT_OK(ew.status);
    ASSERT_OK(l.status);
    ASSERT_EQ(1, l.total);
    ASSERT_STREQ("zeta", l.name[0]);
    ASSERT_EQ(1, l.paused[0]);
    ASSERT_EQ(4, l.concurrency[0]);
    /* nothing under the unsharded queue's tag but its declaration */
    redisReply *k = server_cmd(e.rc, "KEYS t:{shw}:*");
    ASSERT(k->type == REDIS_REPLY_ARRAY);
    for (size_t i = 0; i < k->elements; i++) ASSERT_STREQ("t:{shw}:shards", k->element[i]->str);
    freeReplyObject(k);
    rjq_client_free(p);
    env_stop(&e);
}

/* An idle worker of a sharded queue (a worker of its shards, each slot
 * registered for pushes) starts a group job enqueued later: group jobs
 * are not pushed, the doorbell rings, and a member that heard it claims
 * with its registered slots, as a worker of one queue does (before: never
 * claimed, the job waited for ever). */
TEST(an_idle_worker_of_a_sharded_queue_starts_a_group_job_enqueued_later) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "shl");
    ASSERT_OK(declare_shards(e.base, q, SHARDS));
    memset(&R, 0, sizeof R);
    R.base = e.base;
    rjq_worker_options wo = quiet_worker_options(10);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, held_handler, &R, &w));
    /* idle: every shard's slots registered for pushes */
    for (int i = 0; i < SHARDS; i++) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "HLEN t:{%s}:idle", rjq_queue_get_name(rjq_queue_get_shard(q, i)));
        WAIT_FOR(e.base, server_int(e.rc, cmd) > 0, 10000);
    }
    for (int g = 0; g < 3; g++) {
        char group[16], p[16];
        snprintf(group, sizeof group, "t%d", g);
        snprintf(p, sizeof p, "g%d-0", g);
        rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
        jo.group = group;
        ASSERT_OK(enqueue_job(e.base, q, p, &jo).status);
    }
    ASSERT(loop_until_count(e.base, &R.done, 3, 10000));
    worker_stop_wait(e.base, w);
    env_stop(&e);
}
