/*
 * rjq_queue_list_jobs(): the ids of a queue's jobs in one state, in queue order,
 * paged. Ready jobs come in claim order across the priority set and the
 * ready list; each other state in the order its structure keeps.
 * rjq_client_list_queues(): the registry of the queues written to.
 */
#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

#include <unistd.h>

TEST(ready_jobs_are_listed_in_claim_order_across_priorities_and_pages) {
    test_env e;
    env_start(&e, "ls");
    ASSERT_EQ(0, get_stats(e.base, e.q).exists); /* nothing of it in Redis yet */
    enqueue_x_ok(e.base, e.q, "p5a", 0, 5);
    ASSERT_EQ(1, get_stats(e.base, e.q).exists);
    enqueue_x_ok(e.base, e.q, "z1", 0, 0);
    enqueue_x_ok(e.base, e.q, "p5b", 0, 5);
    enqueue_x_ok(e.base, e.q, "z2", 0, 0);
    enqueue_x_ok(e.base, e.q, "n3", 0, -3);
    enqueue_x_ok(e.base, e.q, "p9", 0, 9);
    enqueue_x_ok(e.base, e.q, "z3", 0, 0);
    enqueue_x_ok(e.base, e.q, "d1", 60000, 0);
    enqueue_x_ok(e.base, e.q, "d2", 30000, 0);
    ASSERT_STREQ("p9,p5a,p5b,z1,z2,z3,n3", list_ids(e.base, e.q, RJQ_STATE_READY, 0, 100));
    ASSERT_STREQ("p9,p5a,p5b", list_ids(e.base, e.q, RJQ_STATE_READY, 0, 3));
    ASSERT_STREQ("p5b,z1", list_ids(e.base, e.q, RJQ_STATE_READY, 2, 2)); /* across segments */
    ASSERT_STREQ("z3,n3", list_ids(e.base, e.q, RJQ_STATE_READY, 5, 10));
    ASSERT_STREQ("n3", list_ids(e.base, e.q, RJQ_STATE_READY, 6, 1));
    ASSERT_STREQ("", list_ids(e.base, e.q, RJQ_STATE_READY, 7, 5));
    ASSERT_STREQ("d2,d1", list_ids(e.base, e.q, RJQ_STATE_DELAYED, 0, 100));
    ASSERT_STREQ("d1", list_ids(e.base, e.q, RJQ_STATE_DELAYED, 1, 100));
    ASSERT_STREQ("", list_ids(e.base, e.q, RJQ_STATE_ACTIVE, 0, 100));
    /* bad arguments, refused before anything is sent */
    names_wait p = {0};
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_list_jobs(e.q, (rjq_job_state)99, 0, 10, on_names_wait, &p));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_list_jobs(e.q, RJQ_STATE_READY, 0, 0, on_names_wait, &p));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_list_jobs(e.q, RJQ_STATE_READY, 0, RJQ_JOBS_PAGE_MAX + 1, on_names_wait, &p));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_list_jobs(e.q, RJQ_STATE_READY, -1, 10, on_names_wait, &p));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_list_jobs(e.q, RJQ_STATE_READY, 0, 10, NULL, NULL));
    ASSERT_EQ(0, p.done);
    env_stop(&e);
}

typedef struct run_ctx {
    rjq_job *held;
    long done;
} run_ctx;

/* x1, x4 complete; x2 fails for good; x3 is held (active). */
static void handler(rjq_job *job, void *data) {
    run_ctx *x = data;
    const char *id = rjq_job_get_id(job);
    if (strcmp(id, "x2") == 0)
        ASSERT_OK(rjq_job_fail(job, "no", RJQ_FAIL_FATAL, -1, on_done_ok, &x->done));
    else if (strcmp(id, "x3") == 0)
        x->held = job;
    else
        ASSERT_OK(rjq_job_complete(job, "ok", 2, on_done_ok, &x->done));
}

static void on_cancelled(rjq_client *c, int status, const char *state, void *data) {
    (void)c, (void)state;
    ASSERT_OK(status);
    ++*(int *)data;
}

TEST(active_dead_cancelled_and_completed_jobs_are_listed_in_their_order) {
    test_env e;
    env_start(&e, "ls2");
    enqueue_x_ok(e.base, e.q, "c1", 60000, 0);
    int cancelled = 0;
    ASSERT_OK(rjq_queue_cancel(e.q, "c1", on_cancelled, &cancelled));
    ASSERT(loop_until(e.base, &cancelled, 5000));
    for (int i = 1; i <= 4; i++) {
        char id[8];
        snprintf(id, sizeof id, "x%d", i);
        enqueue_x_ok(e.base, e.q, id, 0, 0);
    }
    run_ctx x = {0};
    rjq_worker_options wo = quiet_worker_options(4); /* one claim: x1..x4, in order */
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(e.q, &wo, handler, &x, &w));
    WAIT_FOR(e.base, x.done >= 3 && x.held != NULL, 5000);
    ASSERT_EQ(3, x.done);
    ASSERT(x.held != NULL);
    ASSERT_STREQ("", list_ids(e.base, e.q, RJQ_STATE_READY, 0, 100));
    ASSERT_STREQ("x3", list_ids(e.base, e.q, RJQ_STATE_ACTIVE, 0, 100));
    ASSERT_STREQ("x2", list_ids(e.base, e.q, RJQ_STATE_DEAD, 0, 100));
    ASSERT_STREQ("c1", list_ids(e.base, e.q, RJQ_STATE_CANCELLED, 0, 100));
    ASSERT_STREQ("x1,x4", list_ids(e.base, e.q, RJQ_STATE_COMPLETED, 0, 100));
    ASSERT_STREQ("x4", list_ids(e.base, e.q, RJQ_STATE_COMPLETED, 1, 100));
    ASSERT_STREQ("x1", list_ids(e.base, e.q, RJQ_STATE_COMPLETED, 0, 1));
    ASSERT_OK(rjq_job_complete(x.held, "ok", 2, on_done_ok, &x.done));
    ASSERT(loop_until_count(e.base, &x.done, 4, 5000));
    ASSERT_STREQ("x1,x4,x3", list_ids(e.base, e.q, RJQ_STATE_COMPLETED, 0, 100));
    ASSERT_STREQ("", list_ids(e.base, e.q, RJQ_STATE_ACTIVE, 0, 100));
    env_stop(&e);
}

/* Every job fails for good. */
static void fail_handler(rjq_job *job, void *data) {
    ASSERT_OK(rjq_job_fail(job, "no", RJQ_FAIL_FATAL, -1, on_done_ok, data));
}

typedef struct counted {
    int done, status;
    long long n;
} counted;

static void on_counted(rjq_client *c, int status, long long n, void *data) {
    counted *k = data;
    (void)c;
    k->done++;
    k->status = status;
    k->n = n;
}

static counted delete_one(test_env *e, const char *id) {
    counted k = {0};
    ASSERT_OK(rjq_queue_delete(e->q, id, on_counted, &k));
    ASSERT(loop_until(e->base, &k.done, 5000));
    return k;
}

static counted purge(test_env *e, rjq_job_state state, long limit) {
    counted k = {0};
    ASSERT_OK(rjq_queue_purge(e->q, state, limit, on_counted, &k));
    ASSERT(loop_until(e->base, &k.done, 5000));
    return k;
}

/* Dead and cancelled jobs are deleted one by one or a page of the oldest
 * at a time; waiting jobs are not (cancel them); an id with a dedup time
 * stays reserved after its record went. */
TEST(dead_and_cancelled_jobs_are_deleted_by_id_or_purged_oldest_first) {
    test_env e;
    env_start(&e, "del");
    rjq_job_options o = {.size = sizeof(rjq_job_options), .id = "a0", .dedup_ms = 60000};
    ASSERT_OK(enqueue_job(e.base, e.q, "x", &o).status);
    enqueue_x_ok(e.base, e.q, "a1", 0, 0);
    enqueue_x_ok(e.base, e.q, "a2", 0, 0);
    enqueue_x_ok(e.base, e.q, "a3", 0, 0);
    long failed = 0;
    rjq_worker_options wo = quiet_worker_options(1); /* one at a time: dead in this order (ties in
                                                        * time: by id, the same order) */
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(e.q, &wo, fail_handler, &failed, &w));
    ASSERT(loop_until_count(e.base, &failed, 4, 5000));
    worker_stop_wait(e.base, w);
    enqueue_x_ok(e.base, e.q, "c1", 60000, 0);
    enqueue_x_ok(e.base, e.q, "waits", 60000, 0);
    int cancelled = 0;
    ASSERT_OK(rjq_queue_cancel(e.q, "c1", on_cancelled, &cancelled));
    ASSERT(loop_until(e.base, &cancelled, 5000));
    ASSERT_STREQ("a0,a1,a2,a3", list_ids(e.base, e.q, RJQ_STATE_DEAD, 0, 100));

    counted k = delete_one(&e, "a2");
    ASSERT_OK(k.status);
    ASSERT_EQ(1, k.n);
    ASSERT_STREQ("a0,a1,a3", list_ids(e.base, e.q, RJQ_STATE_DEAD, 0, 100));
    ASSERT_EQ(0, server_int(e.rc, "HEXISTS t:{del}:payload a2"));
    ASSERT_EQ(RJQ_ENOTFOUND, delete_one(&e, "a2").status);
    ASSERT_EQ(RJQ_ESTATE, delete_one(&e, "waits").status);
    ASSERT_EQ(1, server_int(e.rc, "HEXISTS t:{del}:payload waits")); /* untouched */
    ASSERT_STREQ("waits", list_ids(e.base, e.q, RJQ_STATE_DELAYED, 0, 100));

    k = delete_one(&e, "a0"); /* its id stays reserved: dedup_ms */
    ASSERT_OK(k.status);
    enqueue_wait again = enqueue_job(e.base, e.q, "again", &o);
    ASSERT_OK(again.status);
    ASSERT_EQ(1, again.existed);

    k = purge(&e, RJQ_STATE_DEAD, 1); /* the oldest */
    ASSERT_OK(k.status);
    ASSERT_EQ(1, k.n);
    ASSERT_STREQ("a3", list_ids(e.base, e.q, RJQ_STATE_DEAD, 0, 100));
    ASSERT_EQ(1, purge(&e, RJQ_STATE_DEAD, 1000).n);
    ASSERT_EQ(0, purge(&e, RJQ_STATE_DEAD, 1000).n);
    ASSERT_EQ(1, purge(&e, RJQ_STATE_CANCELLED, 1000).n);
    ASSERT_STREQ("", list_ids(e.base, e.q, RJQ_STATE_CANCELLED, 0, 100));
    ASSERT_EQ(0, get_stats(e.base, e.q).dead_depth);
    counted bad = {0};
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_purge(e.q, RJQ_STATE_READY, 10, on_counted, &bad));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_purge(e.q, RJQ_STATE_DEAD, 0, on_counted, &bad));
    ASSERT_EQ(RJQ_EJOBID, rjq_queue_delete(e.q, "", on_counted, &bad));
    ASSERT_EQ(0, bad.done);
    env_stop(&e);
}

/* The names rjq_client_list_queues() gives as "a,b,c". */
static const char *queues(test_env *e, const char *after, long limit) {
    static names_wait p;
    memset(&p, 0, sizeof p);
    ASSERT_OK(rjq_client_list_queues(e->c, after, limit, on_names_wait, &p));
    ASSERT(loop_until(e->base, &p.done, 5000));
    ASSERT_OK(p.status);
    return p.ids;
}

/* Are the names rjq_client_list_queues() gives `want`? (A read may meet the
 * reconnect: an error is a no.) */
static int queues_read_back(test_env *e, const char *want) {
    static names_wait p;
    memset(&p, 0, sizeof p);
    ASSERT_OK(rjq_client_list_queues(e->c, NULL, 10, on_names_wait, &p));
    ASSERT(loop_until(e->base, &p.done, 5000));
    return p.status == RJQ_OK && strcmp(p.ids, want) == 0;
}

static void on_worker_job(rjq_job *job, void *data) {
    (void)data;
    ASSERT_OK(rjq_job_complete(job, "", 0, NULL, NULL));
}

TEST(queues_written_to_are_listed_by_name_paged_and_again_after_redis_lost_them) {
    test_env e;
    env_start(&e, NULL);
    /* enqueued to, worked on: named; only looked at: not */
    enqueue_x_ok(e.base, queue_for(e.c, "beta"), NULL, 0, 0);
    enqueue_x_ok(e.base, queue_for(e.c, "alpha"), NULL, 0, 0);
    rjq_worker *w;
    rjq_worker_options wo = quiet_worker_options(1);
    ASSERT_OK(rjq_worker_start(queue_for(e.c, "gamma"), &wo, on_worker_job, NULL, &w));
    get_stats(e.base, queue_for(e.c, "looked-at"));
    WAIT_FOR(e.base, strstr(queues(&e, NULL, 10), "gamma") != NULL, 5000); /* its worker's claim */
    ASSERT_STREQ("alpha,beta,gamma", queues(&e, NULL, 10));
    ASSERT_STREQ("alpha,beta", queues(&e, NULL, 2));
    ASSERT_STREQ("gamma", queues(&e, "beta", 2));
    ASSERT_STREQ("", queues(&e, "gamma", 2));
    ASSERT_EQ(RJQ_EINVAL, rjq_client_list_queues(e.c, NULL, 0, on_names_wait, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_client_list_queues(e.c, NULL, RJQ_JOBS_PAGE_MAX + 1, on_names_wait, NULL));
    /* a Redis restarted empty learns them back from the client */
    server_restart(&e.s, NULL);
    redisFree(e.rc);
    e.rc = server_connect(&e.s);
    WAIT_FOR(e.base, queues_read_back(&e, "alpha,beta,gamma"), 10000);
    env_stop(&e);
}

/* Pausing, resuming or limiting a queue names it too: a queue set up
 * before its first job (rjq pause --create) is listed by rjq queues and
 * top. Each call names it once it is sent, ahead of the next request. */
TEST(queues_paused_resumed_or_limited_are_listed) {
    test_env e;
    env_start(&e, NULL);
    count_wait paused = {0}, resumed = {0}, limited = {0};
    ASSERT_OK(rjq_queue_pause(queue_for(e.c, "paused"), on_count, &paused));
    ASSERT_OK(rjq_queue_resume(queue_for(e.c, "resumed"), on_count, &resumed));
    rjq_limits l = {sizeof(rjq_limits), 2, 0, 0};
    ASSERT_OK(rjq_queue_set_limits(queue_for(e.c, "limited"), &l, on_count, &limited));
    ASSERT(loop_until(e.base, &paused.done, 5000));
    ASSERT(loop_until(e.base, &resumed.done, 5000));
    ASSERT(loop_until(e.base, &limited.done, 5000));
    ASSERT_OK(paused.status);
    ASSERT_OK(resumed.status);
    ASSERT_OK(limited.status);
    ASSERT_STREQ("limited,paused,resumed", queues(&e, NULL, 10));
    env_stop(&e);
}

/* ---- the process registry ---------------------------------------------------- */

typedef struct procs {
    int done, status;
    size_t n;
    char text[2048]; /* "name host pid queue:concurrency:running:ids;..." per process, '|' */
} procs;

static void on_procs(rjq_client *c, int status, const rjq_process *list, size_t n, void *data) {
    procs *p = data;
    (void)c;
    p->done++;
    p->status = status;
    p->n = n;
    p->text[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        size_t used = strlen(p->text);
        snprintf(p->text + used, sizeof p->text - used, "%s%s %ld", i ? "|" : "", rjq_process_get(list, i)->name,
                 rjq_process_get(list, i)->pid);
        ASSERT(rjq_process_get(list, i)->started_ms > 0 && rjq_process_get(list, i)->alive_until_ms > 0 && rjq_process_get(list, i)->host[0]);
        for (size_t k = 0; k < rjq_process_get(list, i)->nqueues; k++) {
            const rjq_process_queue *q = rjq_process_queue_get(rjq_process_get(list, i)->queues, k);
            used = strlen(p->text);
            snprintf(p->text + used, sizeof p->text - used, " %s:%d:%d:", q->queue,
                     q->concurrency, q->running);
            for (size_t j = 0; j < q->njobs; j++) {
                used = strlen(p->text);
                snprintf(p->text + used, sizeof p->text - used, "%s%s", j ? "," : "", q->jobs[j]);
            }
        }
    }
}

static const char *processes(test_env *e, long offset, long limit) {
    static procs p;
    memset(&p, 0, sizeof p);
    ASSERT_OK(rjq_client_list_processes(e->c, offset, limit, on_procs, &p));
    ASSERT(loop_until(e->base, &p.done, 5000));
    ASSERT_OK(p.status);
    return p.text;
}

/* The process list once it is want (5 s at most: each beat says it). */
static const char *wait_processes(test_env *e, const char *want) {
    const char *got;
    double until = wait_deadline(5000);
    while (strcmp(got = processes(e, 0, 10), want) != 0 && wait_step(e->base, until)) {
    }
    return got;
}

static rjq_job *held_jobs[4];
static int nheld;

static void hold_job(rjq_job *job, void *data) {
    (void)data;
    held_jobs[nheld++] = job;
}

static char proc_id[128];

static void on_proc_id(rjq_client *c, int status, const rjq_process *list, size_t n, void *data) {
    (void)c;
    ASSERT_OK(status);
    if (n == 1) snprintf(proc_id, sizeof proc_id, "%s", list[0].id);
    (*(int *)data)++;
}

/* Has the process list a process yet? (its id into proc_id) */
static int read_proc_id(test_env *e) {
    int done = 0;
    ASSERT_OK(rjq_client_list_processes(e->c, 0, 10, on_proc_id, &done));
    ASSERT(loop_until(e->base, &done, 5000));
    return proc_id[0] != '\0';
}

TEST(job_info_token_names_the_client_whose_worker_ran_the_job) {
    test_env e;
    env_start(&e, NULL);
    rjq_client_options o = client_options(e.s.url);
    o.name = "runner-1";
    rjq_client *w = client_new(e.base, &o);
    wait_connected(e.base, w);
    rjq_worker *wk;
    rjq_worker_options wo = quiet_worker_options(2);
    ASSERT_OK(rjq_worker_start(queue_for(w, "ta"), &wo, hold_job, NULL, &wk));
    nheld = 0;
    enqueue_x_ok(e.base, queue_for(e.c, "ta"), "job-1", 0, 0);
    enqueue_x_ok(e.base, queue_for(e.c, "tb"), "job-2", 0, 0); /* no worker: it waits */
    WAIT_FOR(e.base, nheld >= 1, 5000);
    proc_id[0] = '\0';
    WAIT_FOR(e.base, read_proc_id(&e), 5000); /* its first beat registers it */
    char prefix[160];
    snprintf(prefix, sizeof prefix, "%s.", proc_id);
    info_wait i = get_info(e.base, queue_for(e.c, "ta"), "job-1");
    ASSERT_OK(i.status);
    ASSERT_STREQ("active", i.state);
    ASSERT(strncmp(i.token, prefix, strlen(prefix)) == 0);
    char held_token[128];
    snprintf(held_token, sizeof held_token, "%s", i.token);
    ASSERT_OK(rjq_job_complete(held_jobs[0], "", 0, NULL, NULL));
    WAIT_FOR(e.base, strcmp((i = get_info(e.base, queue_for(e.c, "ta"), "job-1")).state, "active") != 0,
             5000);
    ASSERT_STREQ("completed", i.state);
    ASSERT_STREQ(held_token, i.token); /* the completed record keeps it */
    i = get_info(e.base, queue_for(e.c, "tb"), "job-2");
    ASSERT_STREQ("ready", i.state);
    ASSERT_STREQ("", i.token); /* NULL: no attempt yet */
    rjq_client_free(w);
    env_stop(&e);
}

TEST(processes_with_workers_are_listed_with_their_running_jobs_and_leave_when_they_lapse) {
    test_env e;
    env_start(&e, NULL);
    ASSERT_STREQ("", processes(&e, 0, 10)); /* no worker anywhere */
    /* another process: a client with workers on two queues, liveness 1 s */
    rjq_client_options o = client_options(e.s.url);
    o.name = "billing-7";
    o.liveness_ms = 1000;
    rjq_client *w = client_new(e.base, &o);
    wait_connected(e.base, w);
    rjq_worker *w1, *w2, *w3;
    rjq_worker_options wo = quiet_worker_options(3);
    ASSERT_OK(rjq_worker_start(queue_for(w, "pa"), &wo, hold_job, NULL, &w1));
    ASSERT_OK(rjq_worker_start(queue_for(w, "pa"), &wo, hold_job, NULL, &w2));
    wo = quiet_worker_options(2);
    ASSERT_OK(rjq_worker_start(queue_for(w, "pb"), &wo, hold_job, NULL, &w3));
    nheld = 0;
    enqueue_x_ok(e.base, queue_for(e.c, "pa"), "job-1", 0, 0);
    enqueue_x_ok(e.base, queue_for(e.c, "pa"), "job-2", 0, 0);
    WAIT_FOR(e.base, nheld >= 2, 5000);
    char want[256];
    snprintf(want, sizeof want, "billing-7 %ld pb:2:0: pa:6:2:job-2,job-1", (long)getpid());
    char alt[256]; /* the two jobs may be held by either worker, in either order */
    snprintf(alt, sizeof alt, "billing-7 %ld pb:2:0: pa:6:2:job-1,job-2", (long)getpid());
    const char *got;
    /* the next beat (at most a third of liveness_ms) says so */
    WAIT_FOR(e.base, strcmp(got = processes(&e, 0, 10), want) == 0 || strcmp(got, alt) == 0, 5000);
    ASSERT_STREQ("", processes(&e, 1, 10)); /* paged */
    ASSERT_EQ(RJQ_EINVAL, rjq_client_list_processes(e.c, 0, 0, on_procs, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_client_list_processes(e.c, -1, 10, on_procs, NULL));
    /* the jobs finish: the next beat says none runs */
    for (int i = 0; i < nheld; i++) ASSERT_OK(rjq_job_complete(held_jobs[i], "", 0, NULL, NULL));
    snprintf(want, sizeof want, "billing-7 %ld pb:2:0: pa:6:0:", (long)getpid());
    ASSERT_STREQ(want, wait_processes(&e, want));
    /* the process goes (freed: no goodbye, as if killed): it leaves the
     * list once its entry runs out, and nothing is left behind */
    rjq_client_free(w);
    WAIT_FOR(e.base, (got = processes(&e, 0, 10))[0] == '\0', 5000);
    env_stop(&e);
}

/* ---- Redis' memory --------------------------------------------------------------- */

typedef struct mem {
    int done, status, evicts;
    char policy[64];
    long long max;
} mem;

static void on_memory(rjq_client *c, int status, const rjq_memory_info *m, void *data) {
    mem *x = data;
    (void)c;
    x->done++;
    x->status = status;
    if (status != RJQ_OK) return;
    ASSERT(m->used_memory > 0);
    x->evicts = m->can_evict_jobs;
    x->max = m->maxmemory;
    snprintf(x->policy, sizeof x->policy, "%s", m->maxmemory_policy);
}

static mem read_memory(test_env *e) {
    mem x;
    memset(&x, 0, sizeof x);
    ASSERT_OK(rjq_client_get_memory(e->c, on_memory, &x));
    ASSERT(loop_until(e->base, &x.done, 5000));
    ASSERT_OK(x.status);
    return x;
}

TEST(redis_memory_says_whether_its_policy_can_evict_jobs) {
    test_env e;
    env_start(&e, NULL);
    freeReplyObject(redisCommand(e.rc, "CONFIG SET maxmemory 0"));
    freeReplyObject(redisCommand(e.rc, "CONFIG SET maxmemory-policy allkeys-lru"));
    mem x = read_memory(&e);
    ASSERT_STREQ("allkeys-lru", x.policy);
    ASSERT_EQ(0, x.evicts); /* no limit: nothing to evict for */
    freeReplyObject(redisCommand(e.rc, "CONFIG SET maxmemory 100mb"));
    x = read_memory(&e);
    ASSERT_EQ(100LL << 20, x.max);
    ASSERT_EQ(1, x.evicts);
    freeReplyObject(redisCommand(e.rc, "CONFIG SET maxmemory-policy volatile-lru"));
    ASSERT_EQ(0, read_memory(&e).evicts); /* job keys have no TTL */
    freeReplyObject(redisCommand(e.rc, "CONFIG SET maxmemory-policy noeviction"));
    x = read_memory(&e);
    ASSERT_STREQ("noeviction", x.policy);
    ASSERT_EQ(0, x.evicts);
    ASSERT_EQ(RJQ_EINVAL, rjq_client_get_memory(e.c, NULL, NULL));
    env_stop(&e);
}

typedef struct idpage {
    int done, status;
    char ids[256];
} idpage;

static void on_proc_ids(rjq_client *c, int status, const rjq_process *list, size_t n, void *data) {
    idpage *p = data;
    (void)c;
    p->done++;
    p->status = status;
    p->ids[0] = '\0';
    for (size_t i = 0; i < n; i++)
        snprintf(p->ids + strlen(p->ids), sizeof p->ids - strlen(p->ids), "%s%s", i ? "," : "",
                 rjq_process_get(list, i)->id);
}

static const char *process_ids(test_env *e, long offset, long limit) {
    static idpage p;
    memset(&p, 0, sizeof p);
    ASSERT_OK(rjq_client_list_processes(e->c, offset, limit, on_proc_ids, &p));
    ASSERT(loop_until(e->base, &p.done, 5000));
    ASSERT_OK(p.status);
    return p.ids;
}

TEST(process_pages_skip_swept_clients_and_a_short_page_is_the_end) {
    test_env e;
    env_start(&e, NULL);
    /* five entries far in the future, the first being swept (gone) */
    freeReplyObject(server_cmd(e.rc, "ZADD t:{clients}:live 9999999999990 c0 9999999999991 c1 "
                                     "9999999999992 c2 9999999999993 c3 9999999999994 c4"));
    freeReplyObject(server_cmd(e.rc, "HSET t:{clients}:sweeps c0 9999999999990"));
    ASSERT_STREQ("c1,c2", process_ids(&e, 0, 2));
    ASSERT_STREQ("c3,c4", process_ids(&e, 2, 2));
    ASSERT_STREQ("", process_ids(&e, 4, 2));
    ASSERT_STREQ("c1,c2,c3,c4", process_ids(&e, 0, 10));
    env_stop(&e);
}

TEST(a_process_says_itself_again_after_a_reconnect_to_a_server_with_stale_info) {
    test_env e;
    env_start(&e, NULL);
    rjq_client_options o = client_options(e.s.url);
    o.name = "stale-7";
    o.liveness_ms = 1000;
    rjq_client *w = client_new(e.base, &o);
    wait_connected(e.base, w);
    rjq_worker *w1;
    rjq_worker_options wo = quiet_worker_options(3);
    ASSERT_OK(rjq_worker_start(queue_for(w, "st"), &wo, hold_job, NULL, &w1));
    char want[256];
    snprintf(want, sizeof want, "stale-7 %ld st:3:0:", (long)getpid());
    ASSERT_STREQ(want, wait_processes(&e, want));
    /* the server's copy goes stale (as after a restart from an older
     * snapshot), then the worker's connections drop and come back */
    redisReply *k = server_cmd(e.rc, "HKEYS t:{clients}:info");
    ASSERT(k->type == REDIS_REPLY_ARRAY && k->elements == 1);
    freeReplyObject(server_cmd(e.rc, "HSET t:{clients}:info %s %s", k->element[0]->str,
                               "rjq1\tstale-host\t1\t1\tstale-7\nst\t3\t2\told-1 old-2"));
    freeReplyObject(k);
    freeReplyObject(server_cmd(e.rc, "CLIENT KILL TYPE pubsub"));
    redisReply *list = server_cmd(e.rc, "CLIENT LIST");
    for (char *p = strstr(list->str, "name=stale-7"); p; p = strstr(p + 1, "name=stale-7")) {
        char *line = p;
        while (line > list->str && line[-1] != '\n') line--;
        long long id = atoll(line + 3); /* "id=N " */
        freeReplyObject(server_cmd(e.rc, "CLIENT KILL ID %lld", id));
    }
    freeReplyObject(list);
    ASSERT_STREQ(want, wait_processes(&e, want));
    rjq_client_free(w);
    env_stop(&e);
}
