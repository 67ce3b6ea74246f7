/*
 * Dependencies and batches on sharded queues (issues 35 and 39, README
 * "Sharded queues", "Dependencies and batches"): a dependent on a sharded
 * queue waits on its shard and its dependencies are read through the
 * queue's handle (the id's shard) and by its handler; a dependency ON a
 * sharded queue registers with the shard its id routes to and is released
 * by that shard's finisher (it was registered on the queue's own slot,
 * where no job is: counted "missing" at once, and its dependent buried);
 * a chain across shards runs in order; a batch's members on a sharded
 * queue are counted by their shards; a flow's parent and children on a
 * sharded queue. The same on the test cluster, the
 * shards on three masters.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "cluster.h"
#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "slot.h"
#include "waits.h"

/* ---- helpers -------------------------------------------------------------- */

/* A handler that completes its job with result "r-<id>", noting the order. */
typedef struct ran {
    char order[512];
    long n;
} ran;

static void complete_it(rjq_job *job, void *data) {
    ran *r = data;
    const char *id = rjq_job_get_id(job);
    note_id(r->order, sizeof r->order, id);
    r->n++;
    char res[80];
    snprintf(res, sizeof res, "r-%s", id);
    ASSERT_OK(rjq_job_complete(job, res, strlen(res), NULL, NULL));
}

/* Both at once (rjq_queue_get_job_deps): the dependencies' lines as
 * on_deps_lines, the dependents' as on_dents_list. */
typedef struct read_both {
    deps_lines d;
    dents_list t;
    long ran;
} read_both;

static void on_both(rjq_client *c, int status, const rjq_dep_outcome *deps, size_t n,
                    const rjq_dep *list, size_t nd, void *data) {
    read_both *rb = data;
    on_deps_lines(c, status, deps, n, &rb->d);
    on_dents_list(c, status, list, nd, &rb->t);
    rb->ran++;
}

static enqueue_wait enqueue_after(struct event_base *base, rjq_queue *q, const char *id,
                                  const rjq_dep *deps, size_t n) {
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = id;
    o.after = deps;
    o.n_after = n;
    return enqueue_job(base, q, "p", &o);
}

/* The name of the shard of sharded q that holds job id. */
static const char *shard_name(struct event_base *base, rjq_queue *q, const char *id) {
    int i = shard_holding(base, q, id);
    ASSERT(i >= 0);
    return rjq_queue_get_name(rjq_queue_get_shard(q, i));
}

static int state_is(struct event_base *base, rjq_queue *q, const char *id, const char *want) {
    return strcmp(get_info(base, q, id).state, want) == 0;
}

/* A handler that reads its job's dependencies (rjq_job_dependencies: the
 * job's queue is its shard's), then completes it. */
typedef struct reader {
    deps_lines rd[4];
    long n;
} reader;

typedef struct reading {
    reader *r;
    rjq_job *job;
} reading;

static void on_job_deps(rjq_client *c, int status, const rjq_dep_outcome *deps, size_t n,
                        void *data) {
    reading *x = data;
    reader *r = x->r;
    if (r->n < 4) on_deps_lines(c, status, deps, n, &r->rd[r->n]);
    r->n++;
    ASSERT_OK(rjq_job_complete(x->job, "ok", 2, NULL, NULL));
    free(x);
}

static void read_then_complete(rjq_job *job, void *data) {
    reading *x = malloc(sizeof *x);
    ASSERT(x != NULL);
    x->r = data;
    x->job = job;
    ASSERT_OK(rjq_job_dependencies(job, on_job_deps, x));
}

/* ---- one server --------------------------------------------------------------- */

TEST(dependent_on_a_sharded_queue_is_read_through_the_queue_and_by_its_handler) {
    test_env e;
    env_start(&e, "sdp_a");
    rjq_queue *s = open_learnt(e.base, e.c, "sdp_s");
    ASSERT_OK(declare_shards(e.base, s, 3));
    enqueue_x_ok(e.base, e.q, "a", 3600000, 0);
    rjq_dep on_a = {"sdp_a", "a"};
    ASSERT_OK(enqueue_after(e.base, s, "b", &on_a, 1).status);
    enqueue_wait anon = enqueue_after(e.base, s, NULL, &on_a, 1); /* a made id */
    ASSERT_OK(anon.status);
    ASSERT_STREQ("waiting", get_info(e.base, s, "b").state);
    ASSERT_STREQ("waiting", get_info(e.base, s, anon.id).state);
    /* read through the sharded handle: the id's shard (it answered
     * RJQ_ESHARDED, "sharded queues take none") */
    deps_lines rd = dependencies_of(e.base, s, "b");
    ASSERT_OK(rd.status);
    ASSERT_EQ(1, (long)rd.n);
    ASSERT_STREQ("sdp_a:a delayed pending", rd.line[0]);
    rd = dependencies_of(e.base, s, anon.id);
    ASSERT_OK(rd.status);
    ASSERT_EQ(1, (long)rd.n);
    /* a's dependents name the shards holding them */
    dents_list dn = dependents_of(e.base, e.q, "a");
    ASSERT_OK(dn.status);
    ASSERT_EQ(2, (long)dn.n);
    char want[256];
    snprintf(want, sizeof want, "%s b", shard_name(e.base, s, "b"));
    ASSERT(strstr(dn.list, want) != NULL);
    /* a server-assigned id names a job of one shard: refused, no callback */
    ASSERT_EQ(RJQ_ESHARDED, rjq_queue_get_dependencies(s, "12", on_deps_lines, &rd));
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "server-assigned") != NULL);
    ASSERT_EQ(RJQ_ESHARDED, rjq_queue_get_dependents(s, "12", on_dents_list, &dn));
    ASSERT_EQ(RJQ_EJOBID, rjq_queue_get_dependencies(s, "", on_deps_lines, &rd));
    /* both at once, through the sharded handle: the id's shard */
    read_both rb;
    memset(&rb, 0, sizeof rb);
    ASSERT_OK(rjq_queue_get_job_deps(s, "b", on_both, &rb));
    ASSERT(loop_until_count(e.base, &rb.ran, 1, 10000));
    ASSERT_OK(rb.d.status);
    ASSERT_EQ(1, (long)rb.d.n);
    ASSERT_STREQ("sdp_a:a delayed pending", rb.d.line[0]);
    ASSERT_EQ(0, (long)rb.t.n);
    ASSERT_EQ(RJQ_ESHARDED, rjq_queue_get_job_deps(s, "12", on_both, &rb));
    /* the handler reads them too, and they run once a is done */
    ran ra = {{0}, 0};
    reader r;
    memset(&r, 0, sizeof r);
    rjq_worker_options wo = quiet_worker_options(2);
    rjq_worker *wa, *ws;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_it, &ra, &wa));
    ASSERT_OK(rjq_worker_start(s, &wo, read_then_complete, &r, &ws));
    count_wait p = {0};
    ASSERT_OK(rjq_queue_promote(e.q, "a", on_count, &p));
    ASSERT(loop_until_count(e.base, &r.n, 2, 10000));
    for (int i = 0; i < 2; i++) {
        ASSERT_OK(r.rd[i].status);
        ASSERT_EQ(1, (long)r.rd[i].n);
        ASSERT_STREQ("sdp_a:a completed completed", r.rd[i].line[0]);
    }
    WAIT_FOR(e.base, state_is(e.base, s, "b", "completed"), 10000);
    ASSERT_EQ(1, ra.n);
    worker_stop_wait(e.base, wa);
    worker_stop_wait(e.base, ws);
    ASSERT_EQ(2, r.n); /* each once */
    env_stop(&e);
}

TEST(dependency_on_a_sharded_queue_registers_with_its_shard_and_is_released_by_it) {
    test_env e;
    env_start(&e, "sdo_d");
    rjq_queue *s = open_learnt(e.base, e.c, "sdo_s");
    ASSERT_OK(declare_shards(e.base, s, 3));
    enqueue_x_ok(e.base, s, "a", 3600000, 0);
    const char *sa = shard_name(e.base, s, "a");
    /* named by its queue: registered with its shard (it was registered on
     * sdo_s's own slot, where no job is: "missing", and b buried) */
    rjq_dep on_a = {"sdo_s", "a"};
    ASSERT_OK(enqueue_after(e.base, e.q, "b", &on_a, 1).status);
    ASSERT_STREQ("waiting", get_info(e.base, e.q, "b").state);
    deps_lines rd = dependencies_of(e.base, e.q, "b");
    ASSERT_OK(rd.status);
    char want[256];
    snprintf(want, sizeof want, "%s:a delayed pending", sa); /* recorded as its shard */
    ASSERT_STREQ(want, rd.line[0]);
    dents_list dn = dependents_of(e.base, s, "a");
    ASSERT_OK(dn.status);
    ASSERT_STREQ("sdo_d b", dn.list);
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{sdo_s}:dependents"));

    /* a client with no handle of sdo_s learns its layout first (the
     * enqueue held meanwhile) */
    rjq_client *c2 = client_for(e.base, &e.s);
    rjq_queue *d2;
    ASSERT_OK(rjq_queue_open(c2, "sdo_d", NULL, &d2));
    ASSERT_OK(enqueue_after(e.base, d2, "c", &on_a, 1).status);
    ASSERT_STREQ("waiting", get_info(e.base, e.q, "c").state);
    dn = dependents_of(e.base, s, "a");
    ASSERT_STREQ("sdo_d b,sdo_d c", dn.list);
    /* a server-assigned id on a sharded queue cannot be routed: refused */
    rjq_dep on_num = {"sdo_s", "7"};
    enqueue_wait none;
    memset(&none, 0, sizeof none);
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.after = &on_num;
    o.n_after = 1;
    ASSERT_EQ(RJQ_ESHARDED, rjq_enqueue(e.q, "p", 1, &o, on_enqueue_wait, &none));
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "server-assigned") != NULL);
    /* and the same refusal through the held path: c2's callback gets it */
    rjq_client *c3 = client_for(e.base, &e.s);
    rjq_queue *d3;
    ASSERT_OK(rjq_queue_open(c3, "sdo_d", NULL, &d3));
    ASSERT_OK(rjq_enqueue(d3, "p", 1, &o, on_enqueue_wait, &none));
    ASSERT(loop_until(e.base, &none.done, 10000));
    ASSERT_EQ(RJQ_ESHARDED, none.status);
    rjq_client_free(c3);
    /* the shard's finisher releases b and c, each once */
    ran rs = {{0}, 0}, rd2 = {{0}, 0};
    rjq_worker_options wo = quiet_worker_options(2);
    rjq_worker *ws, *wd;
    ASSERT_OK(rjq_worker_start(s, &wo, complete_it, &rs, &ws));
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_it, &rd2, &wd));
    count_wait p = {0};
    ASSERT_OK(rjq_queue_promote(s, "a", on_count, &p));
    ASSERT(loop_until_count(e.base, &rd2.n, 2, 10000));
    WAIT_FOR(e.base, state_is(e.base, e.q, "c", "completed"), 10000);
    WAIT_FOR(e.base, state_is(e.base, e.q, "b", "completed"), 10000);
    rd = dependencies_of(e.base, e.q, "b");
    snprintf(want, sizeof want, "%s:a completed completed", sa);
    ASSERT_STREQ(want, rd.line[0]);
    char key[128];
    snprintf(key, sizeof key, "EXISTS t:{%s}:dependents", sa);
    WAIT_FOR(e.base, server_int(e.rc, key) == 0, 10000);
    worker_stop_wait(e.base, ws);
    worker_stop_wait(e.base, wd);
    ASSERT_EQ(1, rs.n);
    ASSERT_EQ(2, rd2.n);
    rjq_client_free(c2);
    env_stop(&e);
}

/* c1 <- c2 <- c3 <- c4, all on one sharded queue, their ids on at least
 * two shards: one worker runs them in order. */
TEST(chain_across_shards_runs_in_order) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *s = open_learnt(e.base, e.c, "sdc_s");
    ASSERT_OK(declare_shards(e.base, s, 4));
    enqueue_x_ok(e.base, s, "c1", 3600000, 0);
    const char *ids[4] = {"c1", "c2", "c3", "c4"};
    for (int i = 1; i < 4; i++) {
        rjq_dep on = {"sdc_s", ids[i - 1]};
        ASSERT_OK(enqueue_after(e.base, s, ids[i], &on, 1).status);
        ASSERT_STREQ("waiting", get_info(e.base, s, ids[i]).state);
    }
    int shards = 0, seen[4] = {0};
    for (int i = 0; i < 4; i++) {
        int k = shard_holding(e.base, s, ids[i]);
        shards += seen[k]++ == 0;
    }
    ASSERT(shards >= 2);
    ran r = {{0}, 0};
    rjq_worker_options wo = quiet_worker_options(4);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(s, &wo, complete_it, &r, &w));
    count_wait p = {0};
    ASSERT_OK(rjq_queue_promote(s, "c1", on_count, &p));
    ASSERT(loop_until_count(e.base, &r.n, 4, 10000));
    ASSERT_STREQ("c1,c2,c3,c4", r.order);
    WAIT_FOR(e.base, state_is(e.base, s, "c4", "completed"), 10000);
    worker_stop_wait(e.base, w);
    ASSERT_EQ(4, r.n);
    env_stop(&e);
}

typedef struct made {
    long calls;
    int status;
    char id[64];
} made;

static void on_made(rjq_client *c, int status, const char *id, void *data) {
    made *m = data;
    (void)c;
    m->calls++;
    m->status = status;
    if (id) snprintf(m->id, sizeof m->id, "%s", id);
}

/* Members of batch bid of bq on sharded s: with ids and without; sealed;
 * drained by a worker on s; the batch ends completed with each counted. */
static void batch_on_sharded(struct event_base *base, rjq_queue *bq, rjq_queue *s, int members) {
    made m = {0};
    ASSERT_OK(rjq_batch_create(bq, NULL, on_made, &m));
    ASSERT(loop_until_count(base, &m.calls, 1, 10000));
    ASSERT_OK(m.status);
    for (int i = 0; i < members; i++) {
        char id[16];
        snprintf(id, sizeof id, "m%d", i);
        rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
        o.id = i % 2 ? NULL : id; /* (odd ones: an id made for their shard) */
        enqueue_wait w;
        memset(&w, 0, sizeof w);
        ASSERT_OK(rjq_batch_enqueue(bq, m.id, s, "m", 1, &o, on_enqueue_wait, &w));
        ASSERT(loop_until(base, &w.done, 10000));
        ASSERT_OK(w.status);
        ASSERT(shard_holding(base, s, w.id) >= 0);
    }
    long sealed = 0;
    ASSERT_OK(rjq_batch_seal(bq, m.id, on_done_ok, &sealed));
    ASSERT(loop_until_count(base, &sealed, 1, 10000));
    batch_got g = {0};
    ASSERT_OK(rjq_batch_get(bq, m.id, on_batch_got, &g));
    ASSERT(loop_until_count(base, &g.calls, 1, 10000));
    ASSERT_STREQ("pending", g.state);
    ASSERT_EQ(members, g.total);
    ran r = {{0}, 0};
    rjq_worker_options wo = quiet_worker_options(4);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(s, &wo, complete_it, &r, &w));
    batch_got done = {0};
    ASSERT_OK(rjq_batch_await(bq, m.id, 30000, on_batch_got, &done));
    ASSERT(loop_until_count(base, &done.calls, 1, 30000));
    ASSERT_OK(done.status);
    ASSERT_STREQ("completed", done.state);
    ASSERT_EQ(members, done.completed);
    ASSERT_EQ(0, done.dead);
    worker_stop_wait(base, w);
    ASSERT_EQ(members, r.n);
}

TEST(batch_members_on_a_sharded_queue_are_counted_by_their_shards) {
    test_env e;
    env_start(&e, "sdb_b");
    rjq_queue *s = open_learnt(e.base, e.c, "sdb_s");
    ASSERT_OK(declare_shards(e.base, s, 3));
    batch_on_sharded(e.base, e.q, s, 8);
    /* the batch queue itself may not be a sharded one (its record is one
     * key of one queue): refused, naming the call */
    ASSERT_EQ(RJQ_ESHARDED, rjq_batch_create(s, NULL, on_made, NULL));
    ASSERT(strstr(rjq_client_get_errmsg(e.c), "a batch call") != NULL);
    env_stop(&e);
}

typedef struct flowed {
    long calls;
    int status;
    char parent[64], kid[3][64];
} flowed;

static void on_flow(rjq_client *c, int status, const rjq_enqueued *parent,
                    const rjq_enqueued *children, size_t n, void *data) {
    flowed *f = data;
    (void)c;
    f->calls++;
    f->status = status;
    if (status != RJQ_OK) return;
    snprintf(f->parent, sizeof f->parent, "%s", parent->id);
    for (size_t i = 0; i < n && i < 3; i++)
        snprintf(f->kid[i], sizeof f->kid[i], "%s", rjq_enqueued_get(children, i)->id);
}

/* A tree whose parent and two of its children are on a sharded queue (it
 * was refused: RJQ_ESHARDED): each on its shard, the parent released by
 * the children's shards and by the plain queue's. */
TEST(flow_with_a_sharded_parent_and_children_runs_the_parent_last) {
    test_env e;
    env_start(&e, "sdf_p");
    rjq_queue *s = open_learnt(e.base, e.c, "sdf_s");
    ASSERT_OK(declare_shards(e.base, s, 3));
    rjq_job_options k1o = RJQ_JOB_OPTIONS_INIT, po = RJQ_JOB_OPTIONS_INIT;
    k1o.id = "k1";
    po.id = "fp";
    rjq_flow_child k1 = RJQ_FLOW_CHILD_INIT, k2 = RJQ_FLOW_CHILD_INIT, k3 = RJQ_FLOW_CHILD_INIT;
    k1.queue = s; /* an id */
    k1.opts = &k1o;
    k1.payload = "k";
    k1.len = 1;
    k2.queue = s; /* anonymous: an id made for its shard */
    k2.payload = "k";
    k2.len = 1;
    k3.queue = e.q;
    k3.payload = "k";
    k3.len = 1;
    const rjq_flow_child *kids[] = {&k1, &k2, &k3};
    flowed f = {0};
    ASSERT_OK(rjq_enqueue_flow(s, "parent", 6, &po, kids, 3, on_flow, &f));
    ASSERT(loop_until_count(e.base, &f.calls, 1, 10000));
    ASSERT_OK(f.status);
    ASSERT_STREQ("fp", f.parent);
    ASSERT_STREQ("waiting", get_info(e.base, s, "fp").state);
    deps_lines rd = dependencies_of(e.base, s, "fp");
    ASSERT_OK(rd.status);
    ASSERT_EQ(3, (long)rd.n);
    char want[256];
    snprintf(want, sizeof want, "%s:k1 ready pending", shard_name(e.base, s, "k1"));
    ASSERT_STREQ(want, rd.line[0]);
    snprintf(want, sizeof want, "%s:%s ready pending", shard_name(e.base, s, f.kid[1]), f.kid[1]);
    ASSERT_STREQ(want, rd.line[1]);
    snprintf(want, sizeof want, "sdf_p:%s ready pending", f.kid[2]);
    ASSERT_STREQ(want, rd.line[2]);
    ran rs = {{0}, 0}, rp = {{0}, 0};
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *ws, *wp;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_it, &rp, &wp));
    ASSERT_OK(rjq_worker_start(s, &wo, complete_it, &rs, &ws));
    ASSERT(loop_until_count(e.base, &rs.n, 3, 10000));
    ASSERT_EQ(1, rp.n);
    ASSERT(strcmp(rs.order + strlen(rs.order) - 3, ",fp") == 0); /* the parent last */
    WAIT_FOR(e.base, state_is(e.base, s, "fp", "completed"), 10000);
    worker_stop_wait(e.base, ws);
    worker_stop_wait(e.base, wp);
    ASSERT_EQ(3, rs.n);
    env_stop(&e);
}

/* ---- the test cluster ------------------------------------------------------ */

/* An id "<stem><k>" of a job of sharded q (n shards) whose shard is not
 * shard `not` (crc16 mod n: rjq_enqueue's rule, test_shards_ids.c). */
static void id_off_shard(int n, int not, const char *stem, char *out, size_t size) {
    for (int k = 0; k < 1000; k++) {
        snprintf(out, size, "%s%d", stem, k);
        if ((int)(rjq__crc16(out, strlen(out)) % (unsigned)n) != not) return;
    }
    FAIL_AT(__FILE__, __LINE__, "no id off shard %d", not);
}

/* On the cluster: s is a 3-shard queue (its shards on the 3 masters), p a
 * plain queue. a (on s) <- b (on p) <- c (on s, another master) <- d (on p): the chain
 * goes back and forth across masters, a dependent and a dependency each on
 * the sharded queue; d reads its dependency's outcome; a batch's members
 * on s end the batch. */
TEST(chain_through_a_sharded_queue_on_three_cluster_masters) {
    test_cluster cl;
    cluster_start(&cl, 0);
    struct event_base *base = event_base_new();
    rjq_client_options co = client_options(cl.url);
    rjq_client *c = client_new(base, &co);
    rjq_queue *s = open_learnt(base, c, "sdx_s");
    ASSERT_OK(declare_shards(base, s, 3));
    int seen[CLUSTER_NODES] = {0};
    for (int i = 0; i < 3; i++) seen[cluster_master_of_shard(&cl, s, i)]++;
    for (int m = 0; m < CLUSTER_NODES; m++) ASSERT(seen[m] <= 1);
    char pn[16];
    cluster_name_on(&cl, 0, "sx", pn, sizeof pn);
    rjq_queue *p;
    ASSERT_OK(rjq_queue_open(c, pn, NULL, &p));
    enqueue_x_ok(base, s, "a", 3600000, 0);
    char cid[16]; /* c on another shard than a: another master */
    id_off_shard(3, shard_holding(base, s, "a"), "c", cid, sizeof cid);
    rjq_dep on_a = {"sdx_s", "a"}, on_b = {pn, "b"}, on_c = {"sdx_s", cid};
    ASSERT_OK(enqueue_after(base, p, "b", &on_a, 1).status);
    ASSERT_OK(enqueue_after(base, s, cid, &on_b, 1).status);
    ASSERT_OK(enqueue_after(base, p, "d", &on_c, 1).status);
    ASSERT_STREQ("waiting", get_info(base, p, "b").state);
    ASSERT_STREQ("waiting", get_info(base, s, cid).state);
    ASSERT_STREQ("waiting", get_info(base, p, "d").state);
    ASSERT(cluster_master_of_shard(&cl, s, shard_holding(base, s, "a")) !=
           cluster_master_of_shard(&cl, s, shard_holding(base, s, cid)));
    deps_lines rd = dependencies_of(base, s, cid);
    ASSERT_OK(rd.status);
    char want[256];
    snprintf(want, sizeof want, "%s:b waiting pending", pn);
    ASSERT_STREQ(want, rd.line[0]);
    ran rs = {{0}, 0}, rp = {{0}, 0};
    rjq_worker_options wo = quiet_worker_options(2);
    rjq_worker *ws, *wp;
    ASSERT_OK(rjq_worker_start(s, &wo, complete_it, &rs, &ws));
    ASSERT_OK(rjq_worker_start(p, &wo, complete_it, &rp, &wp));
    count_wait pr = {0};
    ASSERT_OK(rjq_queue_promote(s, "a", on_count, &pr));
    WAIT_FOR(base, state_is(base, p, "d", "completed"), 30000);
    char order[32];
    snprintf(order, sizeof order, "a,%s", cid);
    ASSERT_STREQ(order, rs.order);
    ASSERT_STREQ("b,d", rp.order);
    rd = dependencies_of(base, p, "d");
    snprintf(want, sizeof want, "%s:%s completed completed", shard_name(base, s, cid), cid);
    ASSERT_STREQ(want, rd.line[0]);
    worker_stop_wait(base, ws);
    worker_stop_wait(base, wp);
    /* a batch in p with members on s's three masters */
    batch_on_sharded(base, p, s, 9);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}
