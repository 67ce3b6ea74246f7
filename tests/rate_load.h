/*
 * The limits and load of the sharded queues' tests (test_shards_limits,
 * test_shards_resplit, test_shards_resplitter, test_shards_cluster_limits):
 * the whole queue's limits set, jobs enqueued on one shard or with ids in
 * batches, enqueue answers counted, worker processes whose jobs complete at
 * once (and their end), and the starts per second read back from the jobs'
 * start times on the server's clock.
 */
#ifndef RJQ_TEST_RATE_LOAD_H
#define RJQ_TEST_RATE_LOAD_H

#include <sys/types.h>

#include <event2/event.h>

#include "rjq.h"
#include "server.h"

#ifdef __SANITIZE_ADDRESS__
/* the sanitized build's workers do not sustain 1000 jobs a second on a
 * loaded 2-core machine (about 600 measured): the same promise, at a
 * figure they keep up with */
#define RATE 300
#else
#define RATE 1000
#endif
#define RATE_WINDOW_MS 4000        /* the starts counted: those in 4 s from the first */
#define RATE_JOBS (RATE * 54 / 10) /* work past 5 s */
#define RATE_ID_MAX 16

/* Set q's whole-queue limits (concurrency, rate over window_ms; 0: none)
 * and wait for its one answer, RJQ_OK: its count returned. */
long long limits_set(struct event_base *base, rjq_queue *q, long concurrency, long rate,
                     long window_ms);

/* Enqueue n (at most 500) jobs with payload "<s>" (the shard's digit)
 * straight onto shard s of q (its own handle: work on that shard only),
 * each answered. */
void enqueue_on_shard(struct event_base *base, rjq_queue *q, int s, int n);

/* An rjq_enqueue callback counting into data, a long[3]: [0] the answers,
 * [1] the jobs taken, [2] those refused full (RJQ_EFULL); any other error
 * fails the test. */
void on_enqueue_count(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data);

/* Enqueue n jobs with ids "r-<i>" (written to ids[i]; ids NULL: anonymous
 * jobs) and payload "x" on q, in batches of 1000 (q sharded: each id on its
 * shard, anonymous ones split over the shards in turn; a shard's handle:
 * every job there), each batch answered before the next. */
void rate_enqueue_ids(struct event_base *base, rjq_queue *q, char (*ids)[RATE_ID_MAX], int n);

/* A child process with a worker (100 slots) of queue `name`, opened with
 * its layout (a sharded queue: `shards` shards), whose jobs complete at
 * once; runs until killed. */
pid_t rate_spawn_worker(const test_server *s, const char *name, int shards);

/* Kill the n worker processes pids (SIGKILL) and reap each. */
void rate_kill_workers(const pid_t *pids, int n);

typedef struct rate_figures {
    long in_window; /* starts in the window */
    double per_s;   /* those per second */
    long most;      /* most starts in any 1000 ms */
} rate_figures;

/* The figures of the n jobs ids on q (each completed, its start time as
 * the claim script recorded it): the starts in window_ms from from_ms
 * after the first start, printed to stderr after `what`. */
rate_figures rate_measure(struct event_base *base, rjq_queue *q, char (*ids)[RATE_ID_MAX], int n,
                          long from_ms, long window_ms, const char *what);

#endif
