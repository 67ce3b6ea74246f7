/*
 * What a sharded queue costs Redis per job (issue 35, bench/README.md
 * "Sharded queues"): the same backlog drained by one worker of the same
 * concurrency, from a plain queue and from a 3-shard queue, takes about
 * the same script calls (claims and completion calls carry as many jobs).
 * Counted (script calls in INFO commandstats), never timed.
 */
#include <stdio.h>

#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

enum { JOBS = 600, CONC = 8 };

typedef struct drained {
    long done;
} drained;

static void complete_it(rjq_job *job, void *data) {
    drained *d = data;
    ASSERT_OK(rjq_job_complete(job, NULL, 0, on_done_ok, &d->done));
}

static void on_queued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    long *got = data;
    (void)c, (void)jobs;
    ASSERT_OK(status);
    *got += (long)n;
}

/* Script calls of draining JOBS anonymous jobs, enqueued before the
 * worker starts, with one worker of concurrency CONC on q. */
static long long drain_calls(test_env *e, rjq_queue *q) {
    static char payload[] = "job";
    static rjq_enqueue_item it[JOBS];
    for (int i = 0; i < JOBS; i++) {
        it[i] = (rjq_enqueue_item)RJQ_ENQUEUE_ITEM_INIT;
        it[i].payload = payload;
        it[i].len = sizeof payload - 1;
    }
    long queued = 0;
    ASSERT_OK(rjq_enqueue_batch(q, it, JOBS, on_queued, &queued));
    ASSERT(loop_until_count(e->base, &queued, JOBS, 10000));
    ASSERT_EQ(JOBS, get_stats(e->base, q).ready);
    drained d = {0};
    rjq_worker_options wo = quiet_worker_options(CONC);
    long long before = server_script_calls(e->rc);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(q, &wo, complete_it, &d, &w));
    ASSERT(loop_until_count(e->base, &d.done, JOBS, 60000));
    long long calls = server_script_calls(e->rc) - before;
    rjq_stats st = get_stats(e->base, q);
    ASSERT_EQ(JOBS, st.completed);
    ASSERT_EQ(0, st.ready + st.active + st.delayed);
    worker_stop_wait(e->base, w);
    return calls;
}

/* Before: each of the 3 shards' claims had up to 2 calls in flight, 6 for
 * 8 slots, so a claim (and the completion call of its jobs) carried 1.5
 * jobs against 4 from one queue: 2.7x the script calls per job. */
TEST(a_sharded_queues_worker_makes_the_script_calls_per_job_of_a_plain_ones) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *plain = open_learnt(e.base, e.c, "cc_plain");
    long long p = drain_calls(&e, plain);
    rjq_queue *q = open_learnt(e.base, e.c, "cc_sharded");
    ASSERT_OK(declare_shards(e.base, q, 3));
    ASSERT_EQ(3, rjq_queue_count_shards(q));
    long long s = drain_calls(&e, q);
    fprintf(stderr, "script calls for %d jobs: plain %lld, 3 shards %lld\n", JOBS, p, s);
    /* (a claim and a completion call per 4 jobs: about JOBS / 2 calls) */
    ASSERT(p <= JOBS * 3 / 4);
    ASSERT(s * 10 <= p * 12);
    env_stop(&e);
}

