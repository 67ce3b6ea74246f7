/*
 * Internal declarations shared by the files of src/. Not installed.
 *
 * One file per concern:
 *   client.c   client lifetime, deferred free, timers, callback depth
 *   conn.c     the two connections: connect, session set-up, reconnect
 *   request.c  commands and scripts: send, backlog, NOSCRIPT, reply errors
 *   pubsub.c   channel subscriptions on the subscriber connection
 *   queue.c    queue handles, key names, the per-queue tick
 *   enqueue.c  enqueue, batched per queue and per loop turn
 *   worker.c   claim loop, doorbell, leases, reclaim timer
 *   job.c      job handles, complete (batched) and fail
 *   admin.c    stats, replay, reclaim, job info, dead list
 *   await.c    awaiting outcomes: reply channel, await table, progress
 *   monitor.c  queue event streams for monitors
 *   timer.c    the timer heap (pure)
 *   url.c      Redis URL parsing (pure)
 *   validate.c queue name / job id checks, options encoding (pure)
 *   error.c    rjq_strerror, version
 */
#ifndef RJQ_INTERNAL_H
#define RJQ_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>
#include <hiredis/async.h>

#include "compat.h"
#include "rjq.h"
#include "rjq_scripts.h"
#include "timer.h"
#include "url.h"

#define RJQ__ERRMSG_MAX 256
#define RJQ__COMPLETE_BATCH 500 /* jobs per complete script call */
#define RJQ__COMPLETE_BYTES (8u << 20) /* result bytes per complete script call */
#define RJQ__QUEUE_NAME_MAX 200

/* ---- requests (request.c) ---------------------------------------------- */

/*
 * Completion of an internal request. status is RJQ_OK with a non-NULL
 * reply, or an error code with reply NULL (ECONN, ECANCELED) or with the
 * error reply (EWRONGTYPE, EOOM, EAUTH, EREDIS; detail in c->errmsg).
 * Called exactly once per request. During client destruction status is
 * RJQ_ECANCELED and c->closing is set: do not start new work then.
 */
typedef void rjq__reply_fn(rjq_client *c, int status, redisReply *reply,
                           void *priv);

/* Resend after a reconnect instead of failing with RJQ_ECONN. Only for
 * requests that are idempotent (token-checked completions and failures). */
#define RJQ__REQ_RETRY 1

typedef struct rjq__req {
    rjq_client *c;          /* NULL once orphaned by client destruction */
    rjq__reply_fn *fn;
    void *priv;
    char *cmd;              /* formatted command, kept for resends */
    size_t len;
    int script;             /* index into rjq__scripts, or -1 */
    int flags;
    int own_cmd;            /* cmd is ours (malloc), not hiredis' */
    int nargs;              /* script: arguments after the head */
    size_t head_len;        /* script: bytes of cmd before them */
    int fcall;              /* script: the head is FCALL (else EVALSHA) */
    int resends;            /* resends to load what it needs so far */
    int later;              /* re-sends after transient errors so far */
    struct rjq__req *prev, *next;
} rjq__req;

typedef struct rjq__reqlist {
    rjq__req *head, *tail;
    size_t n;
} rjq__reqlist;

/* Send a command built from argv. Takes nothing from the caller: argv is
 * formatted (copied) during the call. Returns RJQ_OK (fn will be called
 * once) or an error (fn never called). */
int rjq__command(rjq_client *c, int flags, rjq__reply_fn *fn, void *priv,
                 int argc, const char **argv, const size_t *lens);

/* Run a script (FCALL of its function in rjq's library, or EVALSHA where
 * the server has no functions): argv[0..] are "numkeys, keys..., args..."
 * (everything after the function name or SHA). */
int rjq__script(rjq_client *c, int script, int flags, rjq__reply_fn *fn,
                void *priv, int argc, const char **argv, const size_t *lens);

/* The reply to FUNCTION LOAD of rjq's library (rjq__library) sets whether
 * scripts run with FCALL or EVALSHA. */
void rjq__library_loaded(rjq_client *c, const redisReply *reply);

/* Send the backlog on a freshly (re)created command context. */
void rjq__requests_flush_backlog(rjq_client *c);
/* A connect attempt failed: fail the backlog's non-retryable requests. */
void rjq__requests_fail_backlog(rjq_client *c);
/* The same with another code (a refused session: RJQ_EAUTH ...). */
void rjq__requests_fail_backlog_with(rjq_client *c, int code);
/* Fail or orphan every request (client destruction). */
void rjq__requests_cancel_all(rjq_client *c);
void rjq__requests_init(rjq_client *c);
/* The hiredis reply callback for requests. */
void rjq__request_on_reply(redisAsyncContext *ac, void *reply, void *priv);

/* ---- argv builder (request.c) ---------------------------------------- */

typedef struct rjq__argv {
    const char **v;
    size_t *len;
    int n, cap;
    char *nums;       /* chunks holding copied strings and numbers */
    int oom;          /* an allocation failed: the command must not be sent */
} rjq__argv;

void rjq__argv_init(rjq__argv *a);
void rjq__argv_free(rjq__argv *a);
void rjq__argv_add(rjq__argv *a, const void *p, size_t len);
void rjq__argv_str(rjq__argv *a, const char *s);
void rjq__argv_ll(rjq__argv *a, long long x);
/* Copy a short string into the builder (it may be freed afterwards). */
void rjq__argv_copy(rjq__argv *a, const char *s);

/* ---- RESP argument buffer (request.c) ---------------------------------- */

/* Arguments already in RESP form ("$len\r\ndata\r\n" each): one copy of
 * every input, sent as is behind the FCALL (or EVALSHA) head. */
typedef struct rjq__buf {
    char *p;
    size_t len, cap;
    int oom;
} rjq__buf;

void rjq__buf_arg(rjq__buf *b, const void *data, size_t len);
void rjq__buf_arg_str(rjq__buf *b, const char *s);
void rjq__buf_free(rjq__buf *b);

/* Run a script whose arguments (nargs of them, numkeys first) are in b. */
int rjq__script_buf(rjq_client *c, int script, int flags, rjq__reply_fn *fn, void *priv,
                    int nargs, const rjq__buf *b);

/* ---- connections (conn.c) ------------------------------------------- */

typedef struct rjq__conn {
    rjq_client *c;
    int kind;                 /* RJQ_CONN_COMMAND or RJQ_CONN_SUBSCRIBER */
    redisAsyncContext *ac;    /* NULL while down */
    int connected;            /* TCP connect finished */
    int ready;                /* session set-up replies all arrived */
    int setup_pending;        /* set-up replies still expected */
    int failures;             /* consecutive failed attempts, for backoff */
    rjq__timer timer;         /* connect timeout, or reconnect delay */
    int timer_is_reconnect;
    char failed_now[128];     /* a connect that failed synchronously, to report */
} rjq__conn;

void rjq__conn_init(rjq_client *c, rjq__conn *conn, int kind);
void rjq__conn_start(rjq__conn *conn);
/* The hiredis context is gone or going (its callbacks saw NULL); stop
 * using it and schedule a reconnect. Idempotent. */
void rjq__conn_lost(rjq__conn *conn, const char *why);
/* Detach and free both contexts for client destruction. */
void rjq__conn_close(rjq__conn *conn);

/* ---- pub/sub (pubsub.c) --------------------------------------------- */

typedef void rjq__message_fn(rjq_client *c, const char *channel,
                             const char *msg, size_t len, void *arg);

typedef struct rjq__channel {
    char *name;
    rjq__message_fn *fn;      /* messages */
    void *arg;
    int confirmed;            /* SUBSCRIBE confirmed on the current conn */
    struct rjq__channel *next;
} rjq__channel;

/* Listen on a channel (subscribing it if no listener had it). */
int rjq__subscribe(rjq_client *c, const char *name, rjq__message_fn *fn,
                   void *arg);
/* Stop delivering to this listener (the subscription itself stays: see
 * pubsub.c for why rjq never sends UNSUBSCRIBE). */
void rjq__unsubscribe(rjq_client *c, const char *name, void *arg);
/* Subscribe every channel again on a fresh subscriber connection. */
void rjq__pubsub_resubscribe(rjq_client *c);
void rjq__pubsub_free(rjq_client *c);

/* ---- awaits (await.c) ------------------------------------------------ */

typedef struct rjq__awaits {
    char channel[256];         /* this client's reply channel (prefix <= 200) */
    int listening;             /* its listener is registered */
    unsigned generation;       /* subscription confirmations so far */
    struct rjq_await **buckets;/* awaits with a known job key, by key */
    size_t nbuckets, indexed;
    struct rjq_await *all;     /* every live await */
    size_t count;
    size_t enqueues_inflight;  /* enqueue_await requests in flight */
    struct rjq__early *early;  /* outcomes that beat their enqueue reply, oldest first */
    struct rjq__early *early_tail;
    size_t nearly;
} rjq__awaits;

int rjq__awaits_init(rjq_client *c);
/* Client destruction: end every await with RJQ_ECANCELED. */
void rjq__awaits_cancel_all(rjq_client *c);
/* The command connection is back: watch awaits whose watch was lost. */
void rjq__awaits_rewatch(rjq_client *c);
/* 1 when a listener of `name` has its subscription confirmed. */
int rjq__channel_confirmed(rjq_client *c, const char *name);

/* Client destruction: free every monitor. */
void rjq__monitors_free(rjq_client *c);

/* ---- client (client.c) ---------------------------------------------- */

struct rjq_client {
    rjq_loop_ops ops;
    void *loop;
    rjq__url url;
    char *prefix;
    char *name;
    long connect_timeout_ms, reconnect_min_ms, reconnect_max_ms;
    size_t max_payload;
    rjq_event_cb *on_event;
    void *event_data;
    void *data;

    rjq__conn cmd, sub;
    rjq__reqlist inflight;    /* sent on cmd.ac, reply pending */
    rjq__reqlist backlog;     /* waiting for a command connection */
    rjq__reqlist later;       /* idempotent requests to re-send after a transient error */
    rjq__timer retry_timer;   /* when `later` goes out */
    rjq__channel *channels;
    rjq_queue *queues;
    rjq__awaits aw;
    struct rjq_monitor *monitors;
    size_t enq_pending;       /* jobs in queues' enqueue batches */

    rjq__timers timers;
    uint64_t armed_due;       /* what set_timer was last asked for */
    int depth;                /* nesting of library entry points */
    int free_pending;         /* rjq_client_free() called inside a callback */
    int closing;              /* destruction under way */
    int fcall;                /* the command session has rjq's function library */

    uint64_t rng;             /* xorshift state for tokens and jitter */
    char errmsg[RJQ__ERRMSG_MAX];
};

/* Entry points from the loop bracket their work with enter/leave; leave
 * completes a deferred rjq_client_free() and may free c. */
void rjq__enter(rjq_client *c);
void rjq__leave(rjq_client *c);

uint64_t rjq__now_ms(void);
void rjq__timer_start(rjq_client *c, rjq__timer *t, uint64_t delay_ms);
void rjq__timer_stop(rjq_client *c, rjq__timer *t);

uint64_t rjq__random(rjq_client *c);
void rjq__errmsg(rjq_client *c, const char *fmt, ...);
/* A background request (no caller to tell) answered status: anything but
 * success, a cancel or a lost connection goes to errmsg as "<what>: ...". */
void rjq__background_failed(rjq_client *c, int status, const char *what);
void rjq__emit(rjq_client *c, rjq_event ev, int conn, const char *detail);
/* A connection became ready: workers claim and register afresh (doorbells,
 * pushes or replies may be lost). */
void rjq__on_ready(rjq_client *c, int kind);

/* ---- queues (queue.c) ---------------------------------------------- */

enum {
    RJQ__K_READY, RJQ__K_PRIO, RJQ__K_DELAYED, RJQ__K_ACTIVE, RJQ__K_DEAD,
    RJQ__K_COMPLETED, RJQ__K_STATS, RJQ__K_GUARD, RJQ__K_JOB, RJQ__K_WAKE,
    RJQ__K_EVENTS, RJQ__K_MONITORED, RJQ__K_IDLE,
    /* the job record columns (src/lua/lib.lua) */
    RJQ__K_PAYLOAD, RJQ__K_STATE, RJQ__K_OPTIONS, RJQ__K_RESULT, RJQ__K_ERROR,
    RJQ__K_FAILTOKEN, RJQ__K_WATCHERS, RJQ__K_COUNT
};

/* The job columns, in the order scripts take them as their last KEYS. */
#define RJQ__K_COLUMNS                                                         \
    RJQ__K_PAYLOAD, RJQ__K_STATE, RJQ__K_OPTIONS, RJQ__K_RESULT, RJQ__K_ERROR, \
        RJQ__K_FAILTOKEN, RJQ__K_WATCHERS

/* One job's enqueue result, for internal callers (awaits). */
typedef void rjq__enqueued_fn(rjq_client *c, int status, const char *id, size_t idlen,
                              int existed, void *priv);

/* Who gets the result of one enqueued job, or of a run of them. */
typedef struct rjq__enq_item {
    rjq_enqueue_cb *cb;       /* user callback (cb or fn) */
    void *data;
    rjq__enqueued_fn *fn;     /* internal callback */
    size_t group;             /* jobs this entry reports (0: part of the previous) */
} rjq__enq_item;

/* Enqueues gathered during one loop turn, sent as one script call. */
typedef struct rjq__enq_batch {
    rjq__buf args;
    int nargs;
    rjq__enq_item *items;     /* one per job */
    size_t n, cap;
} rjq__enq_batch;

typedef struct rjq__complete_item {
    rjq_worker *w;
    char *id;                 /* owns one block holding all three strings */
    char *tail;               /* "<attempt> <token>": how the job's state ends
                               * while this claim holds it (complete.lua) */
    char *result;
    size_t result_len;
    rjq_done_cb *cb;
    void *data;
} rjq__complete_item;

struct rjq_queue {
    rjq_client *c;
    char *name;
    char *keys[RJQ__K_COUNT]; /* RJQ__K_JOB is the job name prefix */
    size_t key_lens[RJQ__K_COUNT];
    long long retention_ms;
    long completed_max, dead_max;
    rjq_worker *workers;
    unsigned next_worker_id;
    int wake_subscribed;
    char *push_channel;       /* this client's push channel for the queue (push.c) */
    rjq__enq_batch enq[2];    /* enqueues of this tick: [1] notify the reply channel */
    rjq__complete_item *pending; /* completions waiting for this tick */
    size_t npending, cap_pending;
    rjq__timer tick;          /* 0 ms: flush completions, let workers claim */
    struct rjq_queue *next;
};

void rjq__queue_free(rjq_queue *q);

/* Check one enqueue item; opts receives its encoded options
 * (RJQ__OPTS_MAX bytes). Sets the client's errmsg on failure. */
int rjq__enqueue_check(rjq_client *c, const rjq_enqueue_item *it, char *opts);
/* Add one job to this tick's enqueue batch; notify: record the client's
 * reply channel. fn(priv) gets its result once. */
int rjq__enqueue_add(rjq_queue *q, const rjq_enqueue_item *it, int notify, rjq__enqueued_fn *fn,
                     void *priv);
/* Send the enqueues gathered this tick (queue tick). */
void rjq__enqueue_flush(rjq_queue *q);
/* ... of every queue (before any other request, to keep causal order). */
void rjq__enqueue_flush_all(rjq_client *c);
void rjq__enqueue_batch_free(rjq__enq_batch *b);
/* Client destruction: fail batched enqueues with RJQ_ECANCELED. */
void rjq__enqueue_cancel_pending(rjq_queue *q);

/* Append one of the queue's key names to a command. */
static inline void rjq__argv_key(rjq__argv *a, const rjq_queue *q, int k) {
    rjq__argv_add(a, q->keys[k], q->key_lens[k]);
}

/* Append a script's numkeys and its KEYS, taken from the list itself so
 * the count cannot drift from the keys: RJQ__KEYS(&a, q, RJQ__K_ACTIVE, ...). */
void rjq__argv_keys(rjq__argv *a, const rjq_queue *q, const int *keys, int n);
#define RJQ__KEYS(a, q, ...)                                                   \
    do {                                                                       \
        static const int rjq_keys_[] = {__VA_ARGS__};                          \
        rjq__argv_keys((a), (q), rjq_keys_, (int)(sizeof rjq_keys_ / sizeof rjq_keys_[0])); \
    } while (0)

/* The job key "<prefix>:{Q}:job:<id>" (malloc'd, NUL-terminated), or
 * NULL when out of memory. */
char *rjq__job_key(const rjq_queue *q, const char *id, size_t idlen);
/* Schedule the queue's tick (idempotent). */
void rjq__queue_kick(rjq_queue *q);

/* ---- workers and jobs (worker.c, job.c) ----------------------------- */

struct rjq_job {
    rjq_worker *w;            /* NULL once detached (client freed) */
    char *id;
    char token[48];
    const char *payload;
    size_t len;
    int attempt, max_attempts;
    struct rjq_job *prev, *next;
};

/* A worker's background request (lease extension, reclaim sweep, the
 * stop's deregistration): at most one of each kind in flight; its reply
 * callback gets this as its data. */
typedef struct rjq__background {
    rjq_worker *w;
    const char *what;         /* names it in error messages */
    int busy;                 /* in flight */
} rjq__background;

struct rjq_worker {
    rjq_queue *q;
    rjq_handler_fn *handler;
    void *data;
    int concurrency;
    long lease_ms, poll_ms, reclaim_ms;
    int running;              /* handed out, not yet finished by the user */
    int finishing;            /* finish requests in flight */
    int claiming;             /* claims in flight (at most 2) */
    int asked;                /* jobs those claims asked for */
    rjq__background sweep, extend; /* reclaim sweep, lease extension */
    int wake_pending;         /* doorbell heard while claiming */
    int hungry;               /* the last claim filled all it asked for */
    int want_claim;           /* claim on the next queue tick */
    /* push delivery (push.c): slots registered in the queue's idle hash */
    unsigned id;              /* names the worker in its idle field */
    char *field;              /* "<id> <push channel>" */
    unsigned epoch;           /* of the registration */
    int offered;              /* registered slots not yet used by a push */
    int reset_pending;        /* the next claim replaces the registration */
    int want_offer;           /* slots were freed: offer them (or claim) */
    rjq__background deregister; /* the stop's HDEL */
    int stopping;
    rjq_stopped_cb *stop_cb;
    void *stop_data;
    rjq_job *jobs;            /* running jobs, for lease extension */
    rjq__timer poll_timer, extend_timer, reclaim_timer;
    struct rjq_worker *next;
};

/* A job pushed to a worker, as parsed from the push message. */
typedef struct rjq__pushed {
    const char *id, *token, *payload;
    size_t idlen, toklen, len;
    int attempt, max_attempts;
} rjq__pushed;

/* The queue's tick: let workers that asked for it claim. */
void rjq__workers_tick(rjq_queue *q);
/* A job was finished by the user (its finish request has been queued). */
void rjq__worker_job_done(rjq_worker *w, rjq_job *job);
/* A job handle the user gives back while the client closes: free it. */
void rjq__worker_job_dropped(rjq_worker *w, rjq_job *job);
/* A finish request of this worker got its reply. */
void rjq__worker_finish_replied(rjq_worker *w);
/* Doorbell or reconnect: claim if idle. */
void rjq__worker_poke(rjq_worker *w);
/* Client destruction: stop timers, detach jobs, call stop_cb, free. */
void rjq__worker_destroy(rjq_worker *w);

/* Free slots not running, asked for or registered. */
int rjq__worker_free_slots(const rjq_worker *w);
/* Jobs pushed to w under registration epoch: start those it has room for,
 * hand back the others (push.c). */
void rjq__worker_take_pushed(rjq_worker *w, unsigned epoch, const rjq__pushed *jobs, size_t n);
/* The registration may be out of step: replace it with the next claim. */
void rjq__worker_resync(rjq_worker *w);
/* The same for every worker of q (a subscription of q was (re)confirmed). */
void rjq__workers_resync(rjq_queue *q);

/* ---- push delivery (push.c) ------------------------------------------ */

/* Subscribe the queue's push channel (once, for its first worker). */
int rjq__push_listen(rjq_queue *q);
/* Hand pushed jobs back to the queue; field: drop that registration too
 * (NULL: none). */
void rjq__push_release(rjq_queue *q, const char *field, const rjq__pushed *jobs, size_t n);
/* The idle field of worker wid of q: "<wid> <push channel>" (malloc'd;
 * NULL when out of memory). */
char *rjq__push_field(const rjq_queue *q, unsigned long long wid);

/* Slots an idle worker offers along with a complete batch (job.c). */
typedef struct rjq__offer {
    rjq_worker *w;
    unsigned epoch;
    int slots;
} rjq__offer;
/* The offers of the workers of items that freed slots while idle (at most
 * n; the slots count as registered from now on). Returns how many. */
size_t rjq__worker_offers(const rjq__complete_item *items, size_t n, rjq__offer *out);
/* An offer's outcome: status of the call, registered 1/0. */
void rjq__worker_offer_done(const rjq__offer *o, int status, int registered);

/* Send the reclaim script for q (guard_ms 0: no sweeper guard). */
int rjq__reclaim_send(rjq_queue *q, long guard_ms, rjq__reply_fn *fn, void *priv);

void rjq__complete_flush(rjq_queue *q);
void rjq__complete_cancel_pending(rjq_queue *q);

/* ---- validation and encoding (validate.c) --------------------------- */

int rjq__valid_queue_name(const char *name);
int rjq__valid_job_id(const char *id);
int rjq__valid_client_name(const char *name);
/* Encode job options as the enqueue script expects them ("" = defaults).
 * buf must hold RJQ__OPTS_MAX bytes. Returns RJQ_OK or RJQ_EINVAL. */
#define RJQ__OPTS_MAX 128
int rjq__encode_job_options(const rjq_job_options *o, char *buf);
/* Map a Redis error text to an RJQ_E* code. */
int rjq__redis_error_code(const char *err);

#endif /* RJQ_INTERNAL_H */
