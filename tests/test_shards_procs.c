/*
 * A sharded queue worked by separate processes (issue 35 "a worker per
 * process on 3 processes drains it with nothing lost or run twice"), on
 * the test cluster (tests/cluster.c: 3 masters, 3 replicas): 3 forked
 * processes, each with its own client, open the 6-shard queue with plain
 * rjq_queue_open and start one worker; the parent enqueues jobs with ids
 * and without; every job runs exactly once across the processes (each
 * run reported on a pipe), and the queue ends empty. And a master killed
 * mid-run (its replica promoted) loses no job whose enqueue was
 * acknowledged with wait_replicas 1.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "cluster.h"
#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

#define PROCS 3
#define JOBS 600

typedef struct child {
    int runs_fd;  /* where each run is reported: "<n> <pid>\n" */
    int stop;     /* the parent closed the control pipe */
    long runs;
} child;

static void child_handler(rjq_job *job, void *data) {
    child *ch = data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    char line[64];
    int n = snprintf(line, sizeof line, "%.*s %d\n", (int)len, p, (int)getpid());
    if (write(ch->runs_fd, line, (size_t)n) != n) _exit(3); /* (< PIPE_BUF: one write) */
    ch->runs++;
    ASSERT_OK(rjq_job_complete(job, NULL, 0, NULL, NULL));
}

static void on_control(evutil_socket_t fd, short what, void *arg) {
    child *ch = arg;
    char b[16];
    (void)what;
    if (read(fd, b, sizeof b) <= 0) ch->stop = 1; /* EOF: the parent is done */
}

/* A worker process: its own loop and client; exits 0 once stopped. */
static void run_child(const char *url, int control_fd, int runs_fd, int ready_fd) {
    signal(SIGABRT, SIG_DFL); /* (the cluster's guard is the parent's) */
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(url);
    rjq_client *c = client_new(base, &o);
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(c, "shp", NULL, &q));
    child ch = {.runs_fd = runs_fd};
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 4;
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, child_handler, &ch, &w));
    get_stats(base, q); /* (held until the layout was read) */
    ASSERT_EQ(6, rjq_queue_count_shards(q));
    if (write(ready_fd, "r", 1) != 1) _exit(3);
    struct event *ev = event_new(base, control_fd, EV_READ | EV_PERSIST, on_control, &ch);
    event_add(ev, NULL);
    while (!ch.stop) event_base_loop(base, EVLOOP_ONCE);
    event_free(ev);
    worker_stop_wait(base, w);
    rjq_client_free(c);
    event_base_free(base);
    _exit(0);
}

TEST(three_worker_processes_drain_a_six_shard_queue_each_job_once) {
    test_cluster cl;
    cluster_start(&cl, 0);
    char url[512];
    cluster_seed_url(&cl, url, sizeof url);
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(url);
    rjq_client *c = client_new(base, &o);
    rjq_queue *decl = open_learnt(base, c, "shp");
    ASSERT_OK(declare_shards(base, decl, 6));

    int control[2], runs[2], ready[2];
    ASSERT(pipe(control) == 0 && pipe(runs) == 0 && pipe(ready) == 0);
    pid_t pid[PROCS];
    for (int i = 0; i < PROCS; i++) {
        pid[i] = fork();
        ASSERT(pid[i] >= 0);
        if (pid[i] == 0) {
            close(control[1]);
            close(runs[0]);
            close(ready[0]);
            run_child(url, control[0], runs[1], ready[1]);
        }
    }
    close(control[0]);
    close(runs[1]);
    close(ready[1]);
    /* every worker started (each child saw the queue's 6 shards) */
    for (int i = 0; i < PROCS; i++) {
        char b;
        ASSERT_EQ(1, (long)read(ready[0], &b, 1));
    }

    /* the jobs, every other one with an id, from a plain rjq_queue_open handle */
    rjq_queue *q;
    ASSERT_OK(rjq_queue_open(c, "shp", NULL, &q));
    static char pay[JOBS][16], ids[JOBS][16];
    static rjq_job_options jo[JOBS];
    static rjq_enqueue_item it[JOBS];
    for (int i = 0; i < JOBS; i++) {
        snprintf(pay[i], sizeof pay[i], "%d", i);
        snprintf(ids[i], sizeof ids[i], "pj-%d", i);
        jo[i] = (rjq_job_options)RJQ_JOB_OPTIONS_INIT;
        jo[i].id = ids[i];
        it[i] = (rjq_enqueue_item)RJQ_ENQUEUE_ITEM_INIT;
        it[i].payload = pay[i];
        it[i].len = strlen(pay[i]);
        it[i].opts = i % 2 ? &jo[i] : NULL;
    }
    enqueue_wait b = {0};
    ASSERT_OK(rjq_enqueue_batch(q, it, JOBS, on_enqueue_wait, &b));
    ASSERT(loop_until(base, &b.done, 30000));
    ASSERT_OK(b.status);
    ASSERT_EQ(JOBS, (long)b.n);

    /* read the runs as they come until every job ran once */
    static int ran[JOBS];
    memset(ran, 0, sizeof ran);
    long total = 0, by_proc[PROCS] = {0};
    char buf[4096], line[64];
    size_t ll = 0;
    while (total < JOBS) {
        ssize_t got = read(runs[0], buf, sizeof buf);
        ASSERT(got > 0);
        for (ssize_t k = 0; k < got; k++) {
            if (buf[k] != '\n') {
                ASSERT(ll < sizeof line - 1);
                line[ll++] = buf[k];
                continue;
            }
            line[ll] = '\0';
            ll = 0;
            int n, who;
            ASSERT(sscanf(line, "%d %d", &n, &who) == 2 && n >= 0 && n < JOBS);
            ran[n]++;
            total++;
            for (int i = 0; i < PROCS; i++)
                if (pid[i] == who) by_proc[i]++;
        }
    }
    /* every job completed (each stats read a round trip after the last) */
    for (int tries = 0;; tries++) {
        ASSERT(tries < 100000);
        rjq_stats st = get_stats(base, q);
        if (st.completed == JOBS) {
            ASSERT_EQ(0, st.ready + st.active + st.delayed + st.dead);
            break;
        }
    }
    /* the workers stop; nothing more ran */
    close(control[1]);
    for (int i = 0; i < PROCS; i++) {
        int status;
        ASSERT_EQ(pid[i], waitpid(pid[i], &status, 0));
        ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    ssize_t rest;
    while ((rest = read(runs[0], buf, sizeof buf)) > 0)
        for (ssize_t k = 0; k < rest; k++) total += buf[k] == '\n';
    close(runs[0]);
    close(ready[0]);
    ASSERT_EQ(JOBS, total);
    for (int i = 0; i < JOBS; i++) ASSERT_EQ(1, ran[i]);
    long sum = 0;
    for (int i = 0; i < PROCS; i++) sum += by_proc[i];
    ASSERT_EQ(JOBS, sum);
    printf("runs per process: %ld %ld %ld\n", by_proc[0], by_proc[1], by_proc[2]);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}

/* ---- a master killed mid-run ----------------------------------------------------- */

#define KJOBS 240

typedef struct kill_log {
    int acked[KJOBS];  /* its enqueue reported RJQ_OK (a replica has it) */
    int answered[KJOBS];
    long enq_done;
    int runs[KJOBS];
    long done;         /* completions answered (any status) */
} kill_log;

static kill_log kl;

static void on_kill_enq(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n,
                        void *data) {
    int i = (int)(long)(intptr_t)data;
    (void)c, (void)jobs, (void)n;
    kl.answered[i]++;
    if (status == RJQ_OK) kl.acked[i] = 1;
    kl.enq_done++;
}

static void on_kill_done(rjq_client *c, int status, void *data) {
    (void)c, (void)status, (void)data;
    kl.done++;
}

static void kill_handler(rjq_job *job, void *data) {
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    int n = -1;
    (void)data;
    ASSERT(sscanf(p, "%d", &n) == 1 && n >= 0 && n < KJOBS);
    kl.runs[n]++;
    ASSERT_OK(rjq_job_complete(job, NULL, 0, on_kill_done, NULL));
}

static void enqueue_range(rjq_queue *q, int from, int to) {
    for (int i = from; i < to; i++) {
        char p[16], id[16];
        snprintf(p, sizeof p, "%d", i);
        snprintf(id, sizeof id, "kj-%d", i);
        rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
        jo.id = id;
        ASSERT_OK(rjq_enqueue(q, p, strlen(p), &jo, on_kill_enq, (void *)(intptr_t)i));
    }
}

/* Acknowledged (wait_replicas 1) jobs of a 6-shard queue, its handles
 * from plain rjq_queue_open, survive the kill of a master in mid-run:
 * each one acknowledged runs and ends completed; every enqueue is
 * answered once. */
TEST(a_master_killed_mid_run_loses_no_acknowledged_job_of_a_sharded_queue) {
    test_cluster cl;
    cluster_start(&cl, 0);
    memset(&kl, 0, sizeof kl);
    char url[512];
    cluster_seed_url(&cl, url, sizeof url);
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(url);
    o.wait_replicas = 1;
    rjq_client *c = client_new(base, &o), *wc = client_new(base, &o);
    rjq_queue *decl = open_learnt(base, c, "shk");
    ASSERT_OK(declare_shards(base, decl, 6));

    rjq_queue *q, *wq;
    ASSERT_OK(rjq_queue_open(c, "shk", NULL, &q));
    ASSERT_OK(rjq_queue_open(wc, "shk", NULL, &wq));
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 8;
    wo.lease_ms = 3000; /* (a job whose completion the kill lost runs again soon) */
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(wq, &wo, kill_handler, NULL, &w));
    enqueue_range(q, 0, KJOBS / 2);
    ASSERT(loop_until_count(base, &kl.enq_done, KJOBS / 2, 30000));
    ASSERT(loop_until_count(base, &kl.done, 1, 30000)); /* the workers are at it */

    /* kill the master of shard 0 while the work goes on */
    char key[128];
    snprintf(key, sizeof key, "{%s}", rjq_queue_get_name(rjq_queue_get_shard(decl, 0)));
    int m = cluster_node_of_key(&cl, key);
    ASSERT(m >= 0);
    enqueue_range(q, KJOBS / 2, KJOBS);
    loop_turn(base); /* (sent, not answered) */
    ASSERT(cluster_kill_master(&cl, m, NULL) >= 0);
    if (!loop_until_count(base, &kl.enq_done, KJOBS, 60000))
        FAIL_AT(__FILE__, __LINE__, "%ld of %d enqueues answered", kl.enq_done, KJOBS);
    for (int i = 0; i < KJOBS; i++) ASSERT_EQ(1, kl.answered[i]);

    /* every acknowledged job runs, and ends completed */
    int acked = 0;
    for (int i = 0; i < KJOBS; i++) acked += kl.acked[i];
    ASSERT(acked >= KJOBS / 2);
    for (;;) {
        int ran = 0;
        for (int i = 0; i < KJOBS; i++) ran += kl.acked[i] && kl.runs[i] > 0;
        if (ran == acked) break;
        if (!loop_until_count(base, &kl.done, kl.done + 1, 60000))
            FAIL_AT(__FILE__, __LINE__, "%d of %d acknowledged jobs ran", ran, acked);
    }
    for (int i = 0; i < KJOBS; i++) {
        if (!kl.acked[i]) continue;
        char id[16];
        snprintf(id, sizeof id, "kj-%d", i);
        for (int tries = 0;; tries++) { /* (a completion the kill lost: run again) */
            info_wait iw = get_info(base, decl, id);
            ASSERT_OK(iw.status);
            if (strcmp(iw.state, "completed") == 0) break;
            ASSERT(tries < 100000);
            loop_until_count(base, &kl.done, kl.done + 1, 10000);
        }
    }
    printf("acknowledged %d of %d; runs over 1: ", acked, KJOBS);
    for (int i = 0; i < KJOBS; i++)
        if (kl.runs[i] > 1) printf("%d ", i);
    printf("\n");
    worker_stop_wait(base, w);
    rjq_client_free(wc);
    rjq_client_free(c);
    event_base_free(base);
    cluster_stop(&cl);
}
