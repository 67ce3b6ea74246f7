/*
 * Waiting for the answer of one rjq call: a record of what its callback
 * got, the callback that fills it in, and helpers that make the call and
 * run the loop until it is answered (the timeouts are safety nets only).
 */
#ifndef RJQ_TEST_WAITS_H
#define RJQ_TEST_WAITS_H

#include <stddef.h>

#include <event2/event.h>

#include "rjq.h"

/* rjq_queue_get_stats */
typedef struct stats_wait {
    int done, status;
    rjq_stats s;
} stats_wait;

/* An rjq_queue_get_stats callback filling in the stats_wait at data. */
void on_stats_wait(rjq_client *c, int status, const rjq_stats *s, void *data);
/* Ask for q's stats and run the loop until they came (exactly once). Also
 * a round trip on the client's command connection: everything sent before
 * it has been executed once it returns. */
stats_wait stats_of(struct event_base *base, rjq_queue *q);
/* The same, asserting RJQ_OK; returns the stats. */
rjq_stats get_stats(struct event_base *base, rjq_queue *q);

/* rjq_queue_get_job */
typedef struct info_wait {
    int done, status;
    char state[32];
    char error[256];
    int has_error;
    int attempts, max_attempts;
    char payload[256];
    size_t payload_len;
    char result[256];
    size_t result_len;
    int has_result;
    char token[128];          /* "" when NULL */
    long long enqueued_ms, started_ms, ended_ms;
} info_wait;

/* Read job id of q and run the loop until it came (exactly once; the
 * status is the caller's to check). */
info_wait get_info(struct event_base *base, rjq_queue *q, const char *id);
/* Which shard of sharded q holds job id (get_info on each; -1: none),
 * asserting it is in one shard only. */
int shard_holding(struct event_base *base, rjq_queue *q, const char *id);

/* rjq_enqueue of one job */
typedef struct enqueue_wait {
    int done, status;
    size_t n;
    int existed, replaced;
    char id[256];             /* the (first) job's id */
} enqueue_wait;

/* An rjq_enqueue callback filling in the enqueue_wait at data (its first
 * job's). */
void on_enqueue_wait(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data);

/* Enqueue payload with options o (may be NULL) and run the loop until it
 * is answered (exactly once; the status is the caller's to check). */
enqueue_wait enqueue_job(struct event_base *base, rjq_queue *q, const char *payload,
                         const rjq_job_options *o);
/* The same for payload "x" with an id (NULL: assigned), delay and priority. */
enqueue_wait enqueue_x(struct event_base *base, rjq_queue *q, const char *id, long long delay,
                       int priority);
/* The same, asserting RJQ_OK. */
void enqueue_x_ok(struct event_base *base, rjq_queue *q, const char *id, long long delay,
                  int priority);

/* The n ids joined as "a,b,c" in out (cap bytes, cut short to fit). */
void join_ids(char *out, size_t cap, const char *const *ids, size_t n);

/* rjq_queue_list_jobs, rjq_client_list_queues: the names given, as "a,b,c". */
typedef struct names_wait {
    int done, status;
    char ids[1024];
} names_wait;

void on_names_wait(rjq_client *c, int status, const char *const *ids, size_t n, void *data);

/* rjq_queue_list_jobs: the ids of page (state, offset, limit) of q as
 * "a,b,c" (RJQ_OK asserted; a static buffer, valid until the next call). */
const char *list_ids(struct event_base *base, rjq_queue *q, rjq_job_state state, long offset,
                     long limit);

/* Calls that answer with a number (rjq_queue_replay, rjq_queue_reclaim). */
typedef struct count_wait {
    int done, status;
    long long n;
} count_wait;

void on_count(rjq_client *c, int status, long long n, void *data);

/* rjq_queue_list_groups: the first GROUPS_WAIT_MAX rows kept. */
#define GROUPS_WAIT_MAX 32
typedef struct groups_wait {
    int done, status;
    long long total;
    size_t n;
    char name[GROUPS_WAIT_MAX][RJQ_GROUP_NAME_MAX + 1];
    long long depth[GROUPS_WAIT_MAX], active[GROUPS_WAIT_MAX];
    int paused[GROUPS_WAIT_MAX], concurrency[GROUPS_WAIT_MAX];
    long rate[GROUPS_WAIT_MAX], window[GROUPS_WAIT_MAX], bound[GROUPS_WAIT_MAX];
    long long started[GROUPS_WAIT_MAX];
} groups_wait;

void on_groups(rjq_client *c, int status, long long total, const rjq_group_info *l, size_t n,
               void *data);

/* rjq_queue_open_async */
typedef struct open_wait {
    int done, status;
    rjq_queue *q;
} open_wait;

void on_open_wait(rjq_client *c, int status, rjq_queue *q, void *data);

/* Open name on c, knowing its layout (a sharded
 * queue's shards), asserting RJQ_OK; the handle. */
rjq_queue *open_learnt(struct event_base *base, rjq_client *c, const char *name);

/* rjq_queue_shard: declare n shards of q; the callback's status (n shards
 * asserted when RJQ_OK). */
int declare_shards(struct event_base *base, rjq_queue *q, int n);

/* A done callback (complete, fail) that asserts RJQ_OK and, when data is
 * not NULL, counts the calls in the long it points to. */
void on_done_ok(rjq_client *c, int status, void *data);

/* rjq_worker_stop: its callback's calls and last status (the test checks
 * both: a stop may end in RJQ_ECANCELED). */
typedef struct stop_wait {
    int done, status;
} stop_wait;
void on_stop_wait(rjq_worker *w, int status, void *data);

/* rjq_schedule_list: the first 8 schedules' names, specs and next fire times. */
typedef struct schedules_wait {
    int done, status;
    size_t n;
    char names[8][64], specs[8][128];
    long long next[8];
} schedules_wait;
void on_schedules_wait(rjq_client *c, int status, const rjq_schedule_info *l, size_t n, void *data);
/* The schedules of q (RJQ_OK asserted). */
schedules_wait schedules_of(struct event_base *base, rjq_queue *q);

/* A job handler that keeps the last job given (left unfinished: the test
 * finishes it) and counts the jobs given, in the last_held at data. */
typedef struct last_held {
    rjq_job *job;
    long started;
} last_held;
void hold_last_handler(rjq_job *job, void *data);

/* A job handler for a worker that must run nothing: a job run fails the test. */
void never_runs(rjq_job *job, void *data);

/* rjq_queue_get_dependencies as read: a line "<queue>:<id> <state>
 * <counted>" a dependency (the first 8). */
typedef struct deps_lines {
    int status;
    long ran;
    size_t n;
    char line[8][160];
} deps_lines;
void on_deps_lines(rjq_client *c, int status, const rjq_dep_outcome *deps, size_t n, void *data);
/* The dependencies of job id of q (its status not asserted). */
deps_lines dependencies_of(struct event_base *base, rjq_queue *q, const char *id);

/* rjq_queue_get_dependents as read: "<queue> <id>" joined with ",". */
typedef struct dents_list {
    int status;
    long ran;
    size_t n;
    char list[512];
} dents_list;
void on_dents_list(rjq_client *c, int status, const rjq_dep *list, size_t n, void *data);
/* The dependents of job id of q (its status not asserted). */
dents_list dependents_of(struct event_base *base, rjq_queue *q, const char *id);

/* Append id to list, a ","-separated list in a buffer of size bytes
 * (nothing when it would not fit: the list stays whole). */
void note_id(char *list, size_t size, const char *id);

/* rjq_batch_get / rjq_batch_await as answered (calls counts the answers). */
typedef struct batch_got {
    long calls;
    int status;
    char state[16];
    int sealed;
    long long total, completed, dead, cancelled, ended_ms;
    int on_complete, on_success;
} batch_got;
void on_batch_got(rjq_client *c, int status, const rjq_batch_info *info, void *data);
/* Batch bid of bq as rjq_batch_get reads it (its status not asserted). */
batch_got get_batch(struct event_base *base, rjq_queue *bq, const char *bid);

#endif
