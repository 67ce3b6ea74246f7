/*
 * Queue handles (queue.c): the base every feature builds on. A queue has
 * its key names and settings, and the per-queue tick: a 0 ms timer that
 * sends what one loop turn gathered. Features keep their per-queue state
 * in the queue's parts (enqueue batches, pending completions, push
 * channel, workers), registered with the hooks the tick and the client's
 * teardown run; queue.c calls no feature by name.
 */
#ifndef RJQ_QUEUE_H
#define RJQ_QUEUE_H

#include "core.h"

#include "rjq_keys.h" /* the key ids RJQ__K_*, RJQ__G_*: generated from src/keys.def */

/* rjq_queue_open without learning a layout (shard.c's rjq_queue_open reads
 * it): the handle of the queue of that name's own keys, as rjq_queue_open
 * documents its arguments and codes. For the library's own handles
 * (shards, sweeps). */
int rjq__queue_open(rjq_client *c, const char *name, const rjq_queue_options *opts,
                    rjq_queue **out);

/* The parts a queue has, in the order its tick runs them: enqueues first,
 * completions next, then the held index's forgets no completion carried,
 * claims last (so the capacity that completions free is claimed in the
 * same round trip). */
enum {
    RJQ__PART_ENQUEUE, RJQ__PART_FINISH, RJQ__PART_HELD, RJQ__PART_PUSH, RJQ__PART_WORKERS,
    RJQ__PART_SHARDS, /* a sharded queue's layout (shard.c; no tick) */
    RJQ__PART_HISTORY, /* the history counts not flushed yet (history.c; no tick) */
    RJQ__PART_COUNT
};

typedef struct rjq__part_ops {
    void (*tick)(rjq_queue *q, void *state);  /* the queue's tick */
    /* client destruction, before requests are cancelled: end unsent work */
    void (*abort)(rjq_queue *q, void *state);
    /* client destruction, after: end handles, callbacks allowed (reverse order) */
    void (*cancel)(rjq_queue *q, void *state);
    /* client destruction, after every cancel: free state, no callbacks */
    void (*close)(rjq_queue *q, void *state);
    /* the handle was closed (rjq_queue_close) and nothing holds it any
     * more: undo what the part registered with the client (channels,
     * visits), no callbacks; close follows */
    void (*release)(rjq_queue *q, void *state);
} rjq__part_ops;

/* The state of part `which` of q, or NULL before the feature set it. */
void *rjq__queue_part(const rjq_queue *q, int which);
/* Give q part `which` (once; the queue owns it from now on and closes it). */
void rjq__queue_set_part(rjq_queue *q, int which, const rjq__part_ops *ops, void *state);
/* Schedule the queue's tick (idempotent). */
void rjq__queue_kick(rjq_queue *q);
/* Run the queue's tick now if it is scheduled, instead of at the end of
 * the loop turn. */
void rjq__queue_tick_now(rjq_queue *q);
/* Name the queue in the client's registry of queues (rjq_client_list_queues),
 * once per handle: called by those that write to it (enqueue, workers). */
void rjq__queue_register(rjq_queue *q);

/* A closed handle (rjq_queue_close) lives on while anything holds it.
 * Hold: work in flight that will look at q again (a sent enqueue batch, an
 * await, a reservation, an orphan sweep's call); released when it ended:
 * the last release of a closed handle frees it at its next tick (never
 * inside the caller). Not during client destruction: everything goes then. */
void rjq__queue_hold(rjq_queue *q);
void rjq__queue_release(rjq_queue *q);
/* Send script on q's client with a's arguments (a is freed, RJQ_ENOMEM if
 * building it ran out of memory), q held on success until the reply's
 * callback releases it. The client is entered around the send: sending may
 * flush enqueues whose callbacks free it. */
int rjq__queue_script(rjq_queue *q, int script, int flags, rjq__reply_fn *fn, void *priv,
                      rjq__argv *a);
/* 1 when r is what a script that writes jobs (or a batch) replies for n of
 * them: { id, existed } each, an id of 1..RJQ_JOB_ID_MAX bytes without a
 * NUL, existed 0 or 1 (genqueue.lua, batch.lua create); else 0 (the caller
 * reports RJQ_EPROTO). rjq__reply_id_code: existed 0..max (deps_add.lua's
 * 2). */
int rjq__reply_id_existed(const redisReply *r, size_t n);
int rjq__reply_id_code(const redisReply *r, size_t n, long long max);
/* Use: a handle started on q (worker, monitor, scheduler) until it is
 * stopped; rjq_queue_close refuses (RJQ_EBUSY) while any is. */
void rjq__queue_use(rjq_queue *q);
void rjq__queue_unuse(rjq_queue *q);
/* A front: q stands for other queues (the shards of a sharded queue,
 * shard.c), so calls that act on q's own keys would act on the wrong
 * ones. Set (on 1) and cleared (0) by the layer above that owns the
 * front's calls. */
void rjq__queue_set_front(rjq_queue *q, int on);
int rjq__queue_front(const rjq_queue *q);
/* RJQ_OK for a queue that is not a front; for a front RJQ_ESHARDED, with
 * rjq_client_get_errmsg() naming the call `what`. */
int rjq__queue_refuse_front(const rjq_queue *q, const char *what);
/* The check a call acting on q's own keys makes once its own arguments
 * are checked: RJQ_EINVAL for no q, RJQ_ESHARDED for a front (as
 * rjq__queue_refuse_front, naming `what`), RJQ_ECLOSED when q's client
 * takes no more calls, else RJQ_OK. */
int rjq__queue_usable(const rjq_queue *q, const char *what);
/* 1 once rjq_queue_close was called on q (it only finishes its work). */
int rjq__queue_closed(const rjq_queue *q);

/* The client's queues, newest first (closed ones not yet freed too). */
rjq_queue *rjq__queue_first(const rjq_client *c);
rjq_queue *rjq__queue_next(const rjq_queue *q);

const char *rjq__queue_key(const rjq_queue *q, int k, size_t *len);
long long rjq__queue_retention_ms(const rjq_queue *q);
long rjq__queue_completed_max(const rjq_queue *q);
long rjq__queue_dead_max(const rjq_queue *q);
/* The queue's bound on waiting jobs (0: none). */
long rjq__queue_max_waiting(const rjq_queue *q);
/* The run time limit of its jobs when they give none (0: none). */
long long rjq__queue_job_timeout_ms(const rjq_queue *q);
/* The history flush period (ms; -1: the handle writes no history). */
long long rjq__queue_history_ms(const rjq_queue *q);

/* The job key "<prefix>:{Q}:job:<id>" (malloc'd, NUL-terminated), or
 * NULL when out of memory. */
char *rjq__job_key(const rjq_queue *q, const char *id, size_t idlen);

/* Append one of the queue's key names to a command. */
void rjq__argv_key(rjq__argv *a, const rjq_queue *q, int k);
void rjq__buf_key(rjq__buf *b, const rjq_queue *q, int k);

/* Append script s's numkeys and its KEYS, in the order src/keys.def
 * declares (the only way a call site names a script's keys: none lists
 * them, so none can pass them in another order or count). s is one of
 * the queue's scripts (RJQ__S_*). */
void rjq__argv_script_keys(rjq__argv *a, const rjq_queue *q, int s);
void rjq__buf_script_keys(rjq__buf *b, const rjq_queue *q, int s);

/* "<prefix>:<name>" of the client prefix's name g (RJQ__G_*), malloc'd,
 * or NULL out of memory. */
char *rjq__global_key(const rjq_client *c, int g);
/* The same name of one master of a Redis Cluster (pin: the lowest slot it
 * serves, rjq__route_masters), in that slot: "{clients}:live" becomes
 * "<prefix>:{clients-<n>}:live", "queues" "<prefix>:{queues-<n>}"
 * (rjq__slot_tag). pin -1: rjq__global_key's name. NULL: out of memory. */
char *rjq__global_key_at(const rjq_client *c, int g, int pin);
/* Call fn(c, RJQ_OK, arg) once the client knows whether it talks to a
 * Redis Cluster (at once when it does: after its first connect), for
 * calls that read every master's registry; before that, a PING waits for
 * the first connect's set-up and fn gets its status. Returns RJQ_OK (fn is
 * called once, maybe from inside) or an error (fn never called). */
typedef void rjq__routed_fn(rjq_client *c, int status, void *arg);
int rjq__when_routed(rjq_client *c, rjq__routed_fn *fn, void *arg);
/* 1 when the client knows whether it talks to a Redis Cluster (the mode is
 * known, or it is connected): rjq__when_routed would call fn at once. */
int rjq__routed(const rjq_client *c);
/* The slot of the queue's keys (its hash tag {name}). */
int rjq__queue_slot(const rjq_queue *q);
/* The registry (rjq__global_key_at's pin) the queue's names go to: -1 on
 * a standalone server, the pin of the queue's master on a cluster; -2:
 * none (a cluster whose table names no owner of the queue's slot yet). */
int rjq__queue_registry_pin(const rjq_queue *q);
/* Script s's numkeys and KEYS (s takes global names, RJQ__G_*): out[0] the
 * count (num, of 16 bytes, holds its text), then names[g] of each key in
 * order. Returns how many entries it wrote (1 + numkeys). */
int rjq__global_script_keys(int s, const char *const names[RJQ__G_COUNT], char num[16],
                            const char **out, int cap);

/* A call site that lists a script's keys itself does not compile (the old
 * ways: tests/keys_declared.sh plants one). */
#pragma GCC poison RJQ__KEYS rjq__argv_keys RJQ__K_COLUMNS

#endif /* RJQ_QUEUE_H */
