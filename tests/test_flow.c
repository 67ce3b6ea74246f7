/*
 * Trees in one call (issue 39, rjq.h "Trees in one call"):
 * rjq_enqueue_flow writes the children first, across queues, then the
 * parent with them as its dependencies; a child that fails, or a producer
 * killed between its children's writes and its parent's, leaves no parent
 * (created last), and the same call made again resumes; across the
 * masters of a cluster too.
 */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster.h"
#include "failalloc.h"
#include "fixture.h"
#include "harness.h"
#include "proxy.h"
#include "server.h"
#include "waits.h"

typedef struct ran {
    char order[256];
    long n;
    char traces[256]; /* each job's header "trace" ('-' for none), in order */
} ran;

static void complete_it(rjq_job *job, void *data) {
    ran *r = data;
    const char *id = rjq_job_get_id(job);
    note_id(r->order, sizeof r->order, id);
    const char *t = rjq_job_get_header(job, "trace");
    note_id(r->traces, sizeof r->traces, t ? t : "-");
    r->n++;
    ASSERT_OK(rjq_job_complete(job, NULL, 0, NULL, NULL));
}

typedef struct flowed {
    long calls;
    int status;
    char parent[64];
    int parent_existed;
    char kids[4][64];
    int kid_existed[4];
    size_t n;
} flowed;

static void on_flow(rjq_client *c, int status, const rjq_enqueued *parent,
                    const rjq_enqueued *children, size_t n, void *data) {
    flowed *f = data;
    (void)c;
    f->calls++;
    f->status = status;
    f->n = n;
    if (status != RJQ_OK) {
        ASSERT(parent == NULL && children == NULL && n == 0);
        return;
    }
    snprintf(f->parent, sizeof f->parent, "%s", parent->id);
    f->parent_existed = parent->existed;
    for (size_t i = 0; i < n && i < 4; i++) {
        snprintf(f->kids[i], sizeof f->kids[i], "%s", children[i].id);
        f->kid_existed[i] = children[i].existed;
    }
}

/* A parent (id pid) on q after children a (on qa) and b (on qb), sent:
 * f is called back. */
static void send_flow(rjq_queue *q, rjq_queue *qa, rjq_queue *qb, const char *pid, flowed *f) {
    rjq_job_options ka = RJQ_JOB_OPTIONS_INIT, po = RJQ_JOB_OPTIONS_INIT;
    ka.id = "a";
    po.id = pid;
    rjq_header h = {"trace", "t-1"};
    po.headers = &h;
    po.nheaders = 1;
    rjq_flow_child c1 = RJQ_FLOW_CHILD_INIT, c2 = RJQ_FLOW_CHILD_INIT;
    c1.queue = qa;
    c1.payload = "ca";
    c1.len = 2;
    c1.opts = &ka;
    rjq_job_options kb = RJQ_JOB_OPTIONS_INIT;
    kb.id = "b";
    c2.queue = qb;
    c2.payload = "cb";
    c2.len = 2;
    c2.opts = &kb;
    const rjq_flow_child *kids[] = {&c1, &c2};
    ASSERT_OK(rjq_enqueue_flow(q, "parent", 6, &po, kids, 2, on_flow, f));
}

/* The same, called back: what it said. */
static flowed run_flow(test_env *e, rjq_queue *qa, rjq_queue *qb, const char *pid) {
    flowed f = {0};
    send_flow(e->q, qa, qb, pid, &f);
    ASSERT(loop_until_count(e->base, &f.calls, 1, 10000));
    return f;
}

TEST(flow_writes_children_across_queues_then_the_parent_that_runs_after_them) {
    test_env e;
    env_start(&e, "fp");
    rjq_queue *qa, *qb;
    ASSERT_OK(rjq_queue_open(e.c, "fa", NULL, &qa));
    ASSERT_OK(rjq_queue_open(e.c, "fb", NULL, &qb));
    flowed f = run_flow(&e, qa, qb, "p");
    ASSERT_OK(f.status);
    ASSERT_STREQ("p", f.parent);
    ASSERT_EQ(2, f.n);
    ASSERT_STREQ("a", f.kids[0]);
    ASSERT_STREQ("b", f.kids[1]);
    ASSERT_STREQ("waiting", get_info(e.base, e.q, "p").state);
    redisReply *d = server_cmd(e.rc, "HGET t:{fp}:deps p");
    ASSERT(d->type == REDIS_REPLY_STRING && strstr(d->str, "\nw fa a\nw fb b") != NULL);
    freeReplyObject(d);
    ran r = {{0}, 0, {0}};
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *wa, *wb, *wp;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_it, &r, &wp));
    ASSERT_OK(rjq_worker_start(qa, &wo, complete_it, &r, &wa));
    ASSERT(loop_until_count(e.base, &r.n, 1, 10000));
    ASSERT_STREQ("a", r.order);
    ASSERT_STREQ("waiting", get_info(e.base, e.q, "p").state); /* b still pending */
    ASSERT_OK(rjq_worker_start(qb, &wo, complete_it, &r, &wb));
    ASSERT(loop_until_count(e.base, &r.n, 3, 10000));
    ASSERT_STREQ("a,b,p", r.order);
    ASSERT_STREQ("completed", get_info(e.base, e.q, "p").state);
    /* the parent's headers are kept with its dependencies (its handler
     * reads them); the children had none */
    ASSERT_STREQ("-,-,t-1", r.traces);
    worker_stop_wait(e.base, wa);
    worker_stop_wait(e.base, wb);
    worker_stop_wait(e.base, wp);
    env_stop(&e);
}

/* A child whose enqueue fails leaves no parent; fixed and called again,
 * the flow resumes: the child written already is reported existing. */
TEST(a_child_that_fails_leaves_no_parent_and_the_same_call_again_resumes) {
    test_env e;
    env_start(&e, "fr");
    rjq_queue *qa, *qb;
    ASSERT_OK(rjq_queue_open(e.c, "fra", NULL, &qa));
    ASSERT_OK(rjq_queue_open(e.c, "frb", NULL, &qb));
    freeReplyObject(server_cmd(e.rc, "SET t:{frb}:stats broken")); /* b's enqueue fails */
    flowed f = run_flow(&e, qa, qb, "p");
    ASSERT_EQ(RJQ_EWRONGTYPE, f.status);
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{fr}:payload p")); /* no parent */
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{fr}:deps t:{fr}:waiting"));
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{fra}:payload a")); /* a plain job now */
    freeReplyObject(server_cmd(e.rc, "DEL t:{frb}:stats"));
    f = run_flow(&e, qa, qb, "p");
    ASSERT_OK(f.status);
    ASSERT_EQ(1, f.kid_existed[0]); /* a: written by the first call */
    ASSERT_EQ(0, f.kid_existed[1]);
    ASSERT_EQ(0, f.parent_existed);
    ASSERT_STREQ("waiting", get_info(e.base, e.q, "p").state);
    env_stop(&e);
}

/* A flow across the three masters of the test cluster (issue 39: trees in
 * one call "across any queues", dependencies "across masters"): children
 * on two masters, the parent on the third, written last; the parent runs
 * once, after both children. */
TEST(flow_across_three_cluster_masters_runs_its_parent_after_its_children) {
    test_cluster cl;
    cluster_start(&cl, 0);
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(cl.url);
    rjq_client *c = client_new(base, &o);
    char np[16], na[16], nb[16];
    cluster_name_on(&cl, 0, "fp", np, sizeof np);
    cluster_name_on(&cl, 1, "fa", na, sizeof na);
    cluster_name_on(&cl, 2, "fb", nb, sizeof nb);
    rjq_queue *qp, *qa, *qb;
    ASSERT_OK(rjq_queue_open(c, np, NULL, &qp));
    ASSERT_OK(rjq_queue_open(c, na, NULL, &qa));
    ASSERT_OK(rjq_queue_open(c, nb, NULL, &qb));
    flowed f = {0};
    send_flow(qp, qa, qb, "p", &f);
    ASSERT(loop_until_count(base, &f.calls, 1, 30000));
    ASSERT_OK(f.status);
    ASSERT_STREQ("p", f.parent);
    ASSERT_STREQ("waiting", get_info(base, qp, "p").state);
    ran r = {{0}, 0, {0}};
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *wa, *wb, *wp;
    ASSERT_OK(rjq_worker_start(qp, &wo, complete_it, &r, &wp));
    ASSERT_OK(rjq_worker_start(qa, &wo, complete_it, &r, &wa));
    ASSERT(loop_until_count(base, &r.n, 1, 30000));
    ASSERT_STREQ("a", r.order);
    ASSERT_STREQ("waiting", get_info(base, qp, "p").state); /* b still pending */
    ASSERT_OK(rjq_worker_start(qb, &wo, complete_it, &r, &wb));
    ASSERT(loop_until_count(base, &r.n, 3, 30000));
    ASSERT_STREQ("a,b,p", r.order);
    WAIT_FOR(base, strcmp(get_info(base, qp, "p").state, "completed") == 0, 30000);
    ASSERT_EQ(3, r.n);
    worker_stop_wait(base, wa);
    worker_stop_wait(base, wb);
    worker_stop_wait(base, wp);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}

/* A byte to read on fd now (polled, the loop running meanwhile)? */
static int readable(int fd) {
    struct pollfd pf = {fd, POLLIN, 0};
    return poll(&pf, 1, 0) == 1;
}

/* The crashing producer (a process of its own, through the proxy): its
 * queues used once each (so nothing more than the flow's enqueues is left
 * to send), then, told to go, the flow, and the loop until it is killed. */
static void run_flow_then_be_killed(const char *url, int ready_fd, int go_fd) {
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(url);
    rjq_client *c = client_new(base, &o);
    rjq_queue *q, *qa, *qb;
    ASSERT_OK(rjq_queue_open(c, "fk", NULL, &q));
    ASSERT_OK(rjq_queue_open(c, "fka", NULL, &qa));
    ASSERT_OK(rjq_queue_open(c, "fkb", NULL, &qb));
    enqueue_x_ok(base, q, "warm", 3600000, 0);
    enqueue_x_ok(base, qa, "warm", 3600000, 0);
    enqueue_x_ok(base, qb, "warm", 3600000, 0);
    char b = 1;
    ASSERT(write(ready_fd, &b, 1) == 1);
    ASSERT(read(go_fd, &b, 1) == 1);
    flowed f = {0};
    send_flow(q, qa, qb, "p", &f);
    event_base_dispatch(base); /* until it is killed */
    _exit(3);
}

/* A producer killed in the middle of a flow (README "Trees in one call":
 * the parent is created last): its children's enqueues ran in Redis (their
 * replies held back by the proxy, so the parent's enqueue was never sent)
 * when it is SIGKILLed. No parent is left waiting on a child, the children
 * are plain ready jobs, and the same call made again resumes: the children
 * reported existing, the parent written and run after them. */
TEST(a_producer_killed_in_the_middle_of_a_flow_leaves_no_parent_and_the_call_again_resumes) {
    test_env e;
    env_start(&e, "fk");
    proxy p;
    proxy_start(&p, e.base, e.s.port);
    int ready[2], go[2];
    ASSERT(pipe(ready) == 0 && pipe(go) == 0);
    pid_t child = fork_child();
    if (child == 0) run_flow_then_be_killed(p.url, ready[1], go[0]);
    WAIT_FOR(e.base, readable(ready[0]), 30000);
    proxy_hold(&p, 1);
    char b = 1;
    ASSERT(write(go[1], &b, 1) == 1);
    WAIT_FOR(e.base, server_int(e.rc, "HEXISTS t:{fka}:payload a") == 1 &&
                         server_int(e.rc, "HEXISTS t:{fkb}:payload b") == 1, 30000);
    ASSERT_EQ(0, kill(child, SIGKILL));
    int status = reap(child, 30000);
    ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    proxy_stop(&p);
    close(ready[0]), close(ready[1]), close(go[0]), close(go[1]);
    /* no parent, nothing waiting; the children are plain jobs */
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{fk}:payload p"));
    ASSERT_EQ(0, server_int(e.rc, "EXISTS t:{fk}:deps t:{fk}:waiting"));
    rjq_queue *qa, *qb;
    ASSERT_OK(rjq_queue_open(e.c, "fka", NULL, &qa));
    ASSERT_OK(rjq_queue_open(e.c, "fkb", NULL, &qb));
    ASSERT_STREQ("ready", get_info(e.base, qa, "a").state);
    ASSERT_STREQ("ready", get_info(e.base, qb, "b").state);
    /* the same call again resumes */
    flowed f = run_flow(&e, qa, qb, "p");
    ASSERT_OK(f.status);
    ASSERT_EQ(1, f.kid_existed[0]);
    ASSERT_EQ(1, f.kid_existed[1]);
    ASSERT_EQ(0, f.parent_existed);
    ASSERT_STREQ("waiting", get_info(e.base, e.q, "p").state);
    ran r = {{0}, 0, {0}};
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *wa, *wb, *wp;
    ASSERT_OK(rjq_worker_start(qa, &wo, complete_it, &r, &wa));
    ASSERT_OK(rjq_worker_start(qb, &wo, complete_it, &r, &wb));
    ASSERT(loop_until_count(e.base, &r.n, 2, 10000));
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_it, &r, &wp));
    WAIT_FOR(e.base, strcmp(get_info(e.base, e.q, "p").state, "completed") == 0, 10000);
    ASSERT_EQ(3, r.n); /* (the "warm" jobs wait an hour) */
    ASSERT_STREQ("p", strrchr(r.order, ',') + 1);
    worker_stop_wait(e.base, wa);
    worker_stop_wait(e.base, wb);
    worker_stop_wait(e.base, wp);
    env_stop(&e);
}

static void on_flow_ignored(rjq_client *c, int status, const rjq_enqueued *parent,
                            const rjq_enqueued *children, size_t n, void *data) {
    (void)c, (void)status, (void)parent, (void)children, (void)n, (void)data;
    FAIL_AT(__FILE__, __LINE__, "a refused flow called back");
}

TEST(bad_flows_are_refused_with_nothing_written) {
    test_env e;
    env_start(&e, "fx");
    long long keys = server_int(e.rc, "DBSIZE");
    rjq_flow_child c1 = RJQ_FLOW_CHILD_INIT;
    c1.queue = e.q;
    const rjq_flow_child *one[] = {&c1};
    const rjq_flow_child *none[] = {NULL};
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue_flow(e.q, "p", 1, NULL, one, 0, on_flow_ignored, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue_flow(e.q, "p", 1, NULL, none, 1, on_flow_ignored, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue_flow(NULL, "p", 1, NULL, one, 1, on_flow_ignored, NULL));
    rjq_dep d = {"fx", "z"};
    rjq_job_options po = RJQ_JOB_OPTIONS_INIT;
    po.after = &d;
    po.n_after = 1;
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue_flow(e.q, "p", 1, &po, one, 1, on_flow_ignored, NULL));
    rjq_job_options ko = RJQ_JOB_OPTIONS_INIT;
    ko.id = "a b";
    c1.opts = &ko;
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue_flow(e.q, "p", 1, NULL, one, 1, on_flow_ignored, NULL));
    c1.opts = NULL;
    c1.queue = NULL;
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue_flow(e.q, "p", 1, NULL, one, 1, on_flow_ignored, NULL));
    c1.queue = e.q;
    c1.size = 0;
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue_flow(e.q, "p", 1, NULL, one, 1, on_flow_ignored, NULL));
    c1.size = sizeof c1;
    /* a bad parent header: refused before any child is written */
    const rjq_header bad[] = {{"a=b", "v"}};
    rjq_job_options ho = RJQ_JOB_OPTIONS_INIT;
    ho.headers = bad;
    ho.nheaders = 1;
    ASSERT_EQ(RJQ_EINVAL, rjq_enqueue_flow(e.q, "p", 1, &ho, one, 1, on_flow_ignored, NULL));
    (void)get_info(e.base, e.q, "none"); /* (a round trip: anything sent ran by now) */
    ASSERT_EQ(keys, server_int(e.rc, "DBSIZE"));
    env_stop(&e);
}

/* Every allocation of a flow's call made to fail in turn (armed around
 * the call): refused at once (no callback) or called back exactly once;
 * a parent exists only where its child was written; nothing leaks (ASan,
 * valgrind). */
TEST(an_allocation_failing_anywhere_in_a_flow_ends_it_once_with_no_parent_unless_told) {
    test_env e;
    env_start(&e, "fo");
    rjq_queue *qa;
    ASSERT_OK(rjq_queue_open(e.c, "fo-a", NULL, &qa));
    for (long n = 0;; n++) {
        char pid[32], kid[32];
        snprintf(pid, sizeof pid, "p%ld", n);
        snprintf(kid, sizeof kid, "k%ld", n);
        rjq_job_options po = RJQ_JOB_OPTIONS_INIT, ko = RJQ_JOB_OPTIONS_INIT;
        po.id = pid;
        rjq_header h = {"trace", "t-1"};
        po.headers = &h;
        po.nheaders = 1;
        ko.id = kid;
        ko.delay_ms = 3600000;
        rjq_flow_child c1 = RJQ_FLOW_CHILD_INIT;
        c1.queue = qa;
        c1.payload = "c";
        c1.len = 1;
        c1.opts = &ko;
        const rjq_flow_child *kids[] = {&c1};
        flowed f = {0};
        failalloc_arm_once(n);
        int rc = rjq_enqueue_flow(e.q, "p", 1, &po, kids, 1, on_flow, &f);
        failalloc_disarm();
        if (rc == RJQ_OK) ASSERT(loop_until_count(e.base, &f.calls, 1, 10000));
        ASSERT_EQ(rc == RJQ_OK ? 1 : 0, f.calls);
        /* a parent only where a child was written before it */
        if (server_int(e.rc, "HEXISTS t:{fo}:payload %s", pid) == 1)
            ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{fo-a}:payload %s", kid));
        if (rc == RJQ_OK && f.status == RJQ_OK) ASSERT_STREQ("waiting", get_info(e.base, e.q, pid).state);
        if (failalloc_failures() == 0) break;
        ASSERT(n < 1000);
    }
    env_stop(&e);
}
