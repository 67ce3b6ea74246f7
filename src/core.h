/*
 * The core, as features see it (DESIGN.md section 10).
 *
 * The core is the client's runtime (runtime.c: callback depth, the timer
 * heap and the loop timer, errors, features), its two connections
 * (conn.c), requests on the command connection (request.c), channels on
 * the subscriber connection (pubsub.c) and the public client lifetime
 * (client.c). It knows nothing of queues or jobs. Features (queue,
 * enqueue, push, worker, job, await, monitor, admin) call down into it
 * through this header only; where the core must run feature code it
 * calls the hooks a feature registered (rjq__feature), never a feature
 * function by name. The client's struct body is not visible here.
 */
#ifndef RJQ_CORE_H
#define RJQ_CORE_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "argv.h"
#include "check.h"
#include "resp.h"
#include "rjq.h"
#include "rjq_scripts.h"
#include "timer.h"

/* ---- runtime (runtime.c) ------------------------------------------------ */

/* Library code that may run user callbacks brackets itself with enter and
 * leave; leave completes a deferred rjq_client_free() and may free c, so
 * nothing may touch c after it. Public entry points that can reach user
 * code (directly or through a flush) enter first and leave last. */
void rjq__enter(rjq_client *c);
void rjq__leave(rjq_client *c);
/* Destruction under way: start no new work. */
int rjq__closing(const rjq_client *c);
/* rjq_client_free() was called inside a callback: stop handing out work. */
int rjq__free_pending(const rjq_client *c);
/* Neither: the client takes new work. Once a free is requested, calls
 * that would start work return RJQ_ECLOSED, so no callback accepted after
 * it can be called from inside the call that accepted it (the deferred
 * free may run when that call leaves). */
int rjq__accepting(const rjq_client *c);
/* A graceful close is under way (rjq_client_close). */
int rjq__draining(const rjq_client *c);

/* The client's clock: milliseconds of CLOCK_MONOTONIC, or of the clock a
 * test set with rjq__clock_set. Every timer (the heap behind the client's
 * one loop timer), backoff, deadline and schedule of the library reads it,
 * so unit tests run them in virtual time: they set a clock they advance
 * themselves and call rjq_client_handle_timeout() (tests/unit_clock.c). */
uint64_t rjq__now_ms(void);
/* Tests only: read the time from now() (NULL: the real clock again). The
 * server-time estimate follows it too. Process-wide: set it before any
 * client is made, keep it until the last is freed. */
void rjq__clock_set(uint64_t (*now)(void));

/* The latest server time (ms since the epoch) or lease end a reply or
 * message may carry (later: malformed): 2^62, so that no sum or
 * difference of two such times, or of one and a lease, overflows. */
#define RJQ__TIME_MAX (1LL << 62)

/* The server's clock, as the client knows it: replies that carry the
 * server's time (TIME, a claim's lease deadline) are samples. A sample can
 * only be late (the message waited somewhere), so the estimate keeps the
 * largest offset seen over the last minute or two; it follows a server
 * clock that was set back within two minutes. A time not in
 * 1..RJQ__TIME_MAX is no sample (ignored). */
void rjq__server_time_sample(rjq_client *c, long long server_ms);
/* The server's time now (ms since the epoch), or 0 before any sample. */
long long rjq__server_now(const rjq_client *c);
/* The estimate may be too high (every job looked stale): ask the server
 * (TIME) at once and let its answer replace the estimate. */
void rjq__server_time_doubt(rjq_client *c);

/* A reply is under way on the command connection: hiredis holds part of it
 * (a big one takes a while to arrive; the replies behind it wait). */
int rjq__reply_arriving(const rjq_client *c);

/* Timers on the client's one loop timer. An owner sets its timers up when
 * it is created (this reserves their heap slots, so arming can never
 * fail later) and tears them down when it goes. */
int rjq__timer_setup(rjq_client *c, rjq__timer *t, rjq__timer_fn *fn, void *owner);
void rjq__timer_teardown(rjq_client *c, rjq__timer *t);
void rjq__timer_start(rjq_client *c, rjq__timer *t, uint64_t delay_ms);
void rjq__timer_stop(rjq_client *c, rjq__timer *t);

uint64_t rjq__random(rjq_client *c);
/* n random letters and digits (base 62: ~5.95 bits each) and a NUL into out. */
void rjq__random_word(rjq_client *c, char *out, int n);
/* A lease holder's token (the scheduler's, the re-splitter's):
 * "<client id>.<12 random letters and digits>" into out (size bytes). */
void rjq__holder_token(rjq_client *c, char *out, size_t size);
/* A random fraction in [0,1) as decimal text (e.g. a script's jitter);
 * out holds at least 16 bytes. */
void rjq__random_fraction(rjq_client *c, char *out, size_t len);
void rjq__errmsg(rjq_client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A caller's extensible struct (rjq.h "Extensible structs") into dst, the
 * library's own struct of known bytes: the fields its size covers, defaults
 * (zeros) for the rest. RJQ_EINVAL (errmsg names `what`) for a size this
 * library does not read. */
int rjq__sized_in(rjq_client *c, void *dst, size_t known, const void *src, const char *what);
/* A background request (no caller to tell) answered status: anything but
 * success, a cancel, a lost or timed-out connection goes to errmsg as
 * "<what>: ..." (RJQ_EAUTH: with the server's words, which the errmsg
 * holds). */
void rjq__background_failed(rjq_client *c, int status, const char *what);

const char *rjq__client_prefix(const rjq_client *c);

/* ---- a cluster's masters (route.c) ------------------------------------- */

#define RJQ__MASTERS_MAX 1024 /* masters of one slot table, at most */
/* On a Redis Cluster, the masters of the slot table, each named by its
 * "pin": the lowest slot it serves (a request of that slot goes to it),
 * in slot order, up to max; returns how many. 0: not a cluster (a
 * standalone server, or not known yet), or no table. */
size_t rjq__route_masters(const rjq_client *c, int *pins, size_t max);
/* The pin of the master serving slot; -1: not a cluster, or no owner known. */
int rjq__route_master_pin(const rjq_client *c, int slot);
#define RJQ__ROUTE_UNKNOWN 0    /* the seed has not answered CLUSTER SLOTS yet */
#define RJQ__ROUTE_STANDALONE 1 /* one server (or Sentinel's master): c->cmd */
#define RJQ__ROUTE_CLUSTER 2    /* a Redis Cluster: the slot table routes */
int rjq__route_mode(const rjq_client *c);
/* The name option ("" without one). */
const char *rjq__client_name(const rjq_client *c);
size_t rjq__client_max_payload(const rjq_client *c);
/* The client's random id (RJQ__CLIENT_ID_LEN letters and digits: ~59
 * bits): names its push channels and starts the fencing tokens of its
 * jobs, so it is short (every job's state and completion carries one). */
#define RJQ__CLIENT_ID_LEN 10
const char *rjq__client_id(const rjq_client *c);
/* How long the client's liveness entry lasts (upkeep.c); 0: none. */
long rjq__client_liveness_ms(const rjq_client *c);
/* The longest the client may take to reconnect: its backoff cap plus its
 * connect timeout. */
long rjq__client_reconnect_span_ms(const rjq_client *c);
/* The client's command_timeout_ms; 0: off. */
long rjq__client_command_timeout_ms(const rjq_client *c);

/* ---- features (runtime.c) ----------------------------------------------- */

/* What a feature plugs into the core. Every hook is optional; state is
 * what the feature registered with it. */
typedef struct rjq__feature {
    const char *name;
    /* A connection (RJQ_CONN_COMMAND or RJQ_CONN_SUBSCRIBER) is up and its
     * session set, first or again: doorbells, pushes and replies may have
     * been lost. Run in registration order. */
    void (*ready)(rjq_client *c, void *state, int kind);
    /* A request is about to be sent and rjq__want_flush() was called:
     * send batched work first, so later requests see it. slot: the
     * request's hash slot, -1 when it has none or it is not known (all of
     * it goes). link 0: the work of the request's slot must go (other
     * slots' may wait: the request cannot see it); 1: all the work that
     * goes on the same connection (rjq__route_master_pin: the same master;
     * on one server, all of it), a write the user is told of, which must
     * not overtake an earlier write on the wire. */
    void (*before_send)(rjq_client *c, void *state, int slot, int link);
    /* Client destruction, before pending requests are cancelled: end
     * work not yet sent with RJQ_ECANCELED. Registration order. */
    void (*abort)(rjq_client *c, void *state);
    /* Client destruction, after requests were cancelled: end every handle
     * (callbacks get RJQ_ECANCELED). Reverse order. Every feature's state
     * is still there: a callback may use any handle of any feature. */
    void (*cancel)(rjq_client *c, void *state);
    /* Client destruction, after every cancel: free the state. No callback
     * may run here. Reverse order. */
    void (*close)(rjq_client *c, void *state);
    /* A graceful close (rjq_client_close) began: take no more work. */
    void (*drain)(rjq_client *c, void *state);
    /* During it: how many handles are still working (the close waits). */
    size_t (*busy)(rjq_client *c, void *state);
    /* Its deadline came: hand running work back; returns how many jobs. */
    size_t (*hand_back)(rjq_client *c, void *state);
} rjq__feature;

/* Register feature f with its state (once per client; a second call with
 * the same f changes nothing and returns RJQ_OK). */
int rjq__feature_add(rjq_client *c, const rjq__feature *f, void *state);
/* The state f registered on c, or NULL. */
void *rjq__feature_state(const rjq_client *c, const rjq__feature *f);
/* The state f registered on c; the first call registers f with `size`
 * zeroed bytes (its close hook frees them). NULL when out of memory. */
void *rjq__feature_ensure(rjq_client *c, const rjq__feature *f, size_t size);
/* A feature holds batched work: run the before_send hooks ahead of the
 * next request. */
void rjq__want_flush(rjq_client *c);

/* ---- requests (request.c) ------------------------------------------------ */

/*
 * Completion of a request. status is RJQ_OK with a non-NULL reply, or an
 * error code with reply NULL (ECONN, ECANCELED, ENOMEM) or with the error
 * reply (EWRONGTYPE, EOOM, EAUTH, EREDIS; detail in the client's errmsg).
 * Called exactly once per request. During client destruction status is
 * RJQ_ECANCELED and rjq__closing() is true: start no new work then.
 */
typedef void rjq__reply_fn(rjq_client *c, int status, redisReply *reply, void *priv);
/* A reply function for a call whose answer nobody reads (a lease given up). */
void rjq__ignore_reply(rjq_client *c, int status, redisReply *reply, void *priv);

/* May be re-sent after a reconnect or a transient server error instead of
 * failing: only for requests that are idempotent (token-checked). */
#define RJQ__REQ_RETRY 1
/* A write the user is told of (enqueue, completion, failure): with the
 * option wait_replicas, a WAIT follows it and its function is called only
 * once the WAIT answered; rjq__write_short() then says whether fewer
 * replicas than asked confirmed it (the status stays RJQ_OK: the write
 * is done on the master). */
#define RJQ__REQ_DURABLE 2
/* A read made in the background (a feature's own, no user waits on it):
 * its success says nothing of whether the server takes writes again, so
 * it leaves the backoff of requests waiting to be re-sent (READONLY...)
 * as it is; a write's retries are never re-timed by it. */
#define RJQ__REQ_BACKGROUND_READ 4

/* Inside a request's function: 1 when its write was confirmed by fewer
 * replicas than wait_replicas asks for (see RJQ__REQ_DURABLE), else 0. */
int rjq__write_short(const rjq_client *c);

/* Send a command built from argv (copied during the call). Returns RJQ_OK
 * (fn will be called once) or an error (fn never called). */
int rjq__command(rjq_client *c, int flags, rjq__reply_fn *fn, void *priv, int argc,
                 const char **argv, const size_t *lens);
/* The same, sent to the master serving `slot` (0 .. 16383) whatever the
 * command's arguments: on a cluster, a command for one master (INFO...)
 * pinned to a slot it serves, redirected like any request of that slot;
 * on a standalone server, the server. */
int rjq__command_in(rjq_client *c, int slot, int flags, rjq__reply_fn *fn, void *priv, int argc,
                    const char **argv, const size_t *lens);
/* Run one of rjq's scripts (FCALL of its function, or EVALSHA where the
 * server has no functions): argv are "numkeys, keys..., args...". */
int rjq__script(rjq_client *c, int script, int flags, rjq__reply_fn *fn, void *priv, int argc,
                const char **argv, const size_t *lens);
/* The same with the argc arguments already in RESP form in b (work
 * batched for the tick flushed first, as rjq__script does); b stays the
 * caller's. */
int rjq__script_resp(rjq_client *c, int script, int flags, rjq__reply_fn *fn, void *priv,
                     int argc, const rjq__buf *b);
/* The same with the nargs arguments already in RESP form in b, sent as
 * they are: nothing flushed first (for the batching features' own sends). */
int rjq__script_buf(rjq_client *c, int script, int flags, rjq__reply_fn *fn, void *priv,
                    int nargs, const rjq__buf *b);
/* The same taking b's memory instead of copying it: b was started with
 * rjq__buf_head_room (the arguments after that room), and the call's head
 * is written in that room, so each argument is copied once on its way to
 * hiredis. RJQ_OK: b is left empty (the request frees its memory); an
 * error: b stays the caller's. */
int rjq__script_take(rjq_client *c, int script, int flags, rjq__reply_fn *fn, void *priv,
                     int nargs, rjq__buf *b);
/* The same with the arguments at b->p + at, whatever is before them (the
 * head goes there when it fits, else the arguments are copied once behind
 * it). */
int rjq__script_take_at(rjq_client *c, int script, int flags, rjq__reply_fn *fn, void *priv,
                        int nargs, rjq__buf *b, size_t at);
/* Several calls of one script as one transaction (MULTI, the calls, EXEC:
 * nothing else runs between them), call i with the nargs[i] arguments in
 * parts[i] (their memory is taken, leaving those buffers empty; free the
 * buffers after the call either way). fn gets the EXEC's array, one reply per call; an
 * error answered to MULTI or a call, or the calls' error when all of them
 * failed, is the request's error (retried or re-sent like a single
 * script's). So a big batch is several script calls of bounded size that
 * land together. */
int rjq__script_parts(rjq_client *c, int script, int flags, rjq__reply_fn *fn, void *priv,
                      int nparts, rjq__buf *parts, const int *nargs);
/* The same with npre whole commands in RESP form in pre (pre_end[i]: where
 * command i ends in it; copied, pre stays the caller's) run after the first
 * `after` calls, inside the transaction: writes the later calls rely on.
 * fn gets the EXEC's array, one reply per call and command in that order.
 * Only the calls' errors are the request's: a request sent again (after
 * NOSCRIPT, BUSY...) runs the commands again, so they must be harmless
 * twice (HSETNX of the same value, say). */
int rjq__script_parts_after(rjq_client *c, int script, int flags, rjq__reply_fn *fn,
                            void *priv, const rjq__buf *pre, const size_t *pre_end, int npre,
                            int after, int nparts, rjq__buf *parts, const int *nargs);

/* Write the command connection's unwritten requests now instead of when
 * the event loop next polls: a reply callback that made follow-up
 * requests lets Redis start on them while the other replies that came
 * in the same read are still being handled here (Redis answers what it
 * read together only once it ran all of it). Plain TCP only: a TLS write
 * may need a read first, so those wait for the loop as before. A failed
 * write is left to the connection's next poll, which reports it. */
void rjq__send_now(rjq_client *c);

/* ---- channels (pubsub.c) -------------------------------------------------- */

/* A message on a channel; msg NULL: the subscription was (re)confirmed on
 * a (new) subscriber connection, so messages may have been missed: those
 * sent before it reached the server, and, when len is 1, messages sent to
 * an earlier subscription of the name (a connection or link lost, the
 * channel moved or refused) that never arrived. len 0: the name's first
 * subscription since its first listener came, nothing sent to it missed. */
typedef void rjq__message_fn(rjq_client *c, const char *channel, const char *msg, size_t len,
                             void *arg);

/* The server refused the channel (err: its words): a SUBSCRIBE refused
 * for a permission, or the whole session (a wrong password). A refused
 * SUBSCRIBE is final: the channel is not subscribed again until a
 * listener subscribes it anew (rjq__subscribe). The listener stays
 * registered (rjq__unsubscribe it to let go). */
typedef void rjq__refused_fn(rjq_client *c, const char *channel, const char *err, void *arg);

/* Listen on a channel (subscribing it if no listener had it, or if it was
 * refused). RJQ_OK, or with nothing changed RJQ_ENOMEM, or RJQ_EINVAL on a
 * Redis Cluster whose sharded link the loop glue cannot watch (no
 * watch_fd: errmsg says so; a channel made before the client knew it was
 * a cluster gets an RJQ_EVENT_ERROR instead, and is tried again by the
 * resubscribe timer). */
int rjq__subscribe(rjq_client *c, const char *name, rjq__message_fn *fn, void *arg);
/* The same, and refused_fn hears of a refusal. */
int rjq__subscribe_checked(rjq_client *c, const char *name, rjq__message_fn *fn,
                           rjq__refused_fn *refused_fn, void *arg);
/* The same on the classic subscriber connection even on a Redis Cluster,
 * and at once (before the mode is known): liveness' probe channel, which
 * the client itself PUBLISHes, and the awaits' client-wide reply channel. */
int rjq__subscribe_classic(rjq_client *c, const char *name, rjq__message_fn *fn,
                           rjq__refused_fn *refused_fn, void *arg);
/* Inside a listener's call for a message of msg (its bytes as given):
 * the message's string reply, whose bytes the listener may take over
 * (rjq__reply_take_str, replyarena.h), so a payload that came as a
 * message of its own is not copied again; once taken, msg is the
 * taker's. NULL when they may not be taken (the channel has other
 * listeners, who read them after this one; a sharded link's message): copy
 * them. */
struct redisReply *rjq__message_reply(rjq_client *c, const char *msg);

/* How channels are subscribed: 1 sharded (SSUBSCRIBE on a link per master:
 * a Redis Cluster; the scripts SPUBLISH), 0 classic (SUBSCRIBE on the
 * subscriber connection), -1 not known yet (the command connection's
 * first set-up has not answered CLUSTER SLOTS): a subscription made then
 * is sent once it is known, and is confirmed after that. */
int rjq__pubsub_sharded(const rjq_client *c);
/* 1 when the server refused the subscription of `name` (see rjq__refused_fn). */
int rjq__channel_refused(const rjq_client *c, const char *name);
/* Stop delivering to this listener (the subscription itself stays: see
 * pubsub.c for why rjq never sends UNSUBSCRIBE). */
void rjq__unsubscribe(rjq_client *c, const char *name, void *arg);
/* 1 when the subscription of `name` is confirmed on the current connection. */
int rjq__channel_confirmed(const rjq_client *c, const char *name);

#endif /* RJQ_CORE_H */
