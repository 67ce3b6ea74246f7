/*
 * Commands and scripts on the command connection.
 *
 * Every request keeps its formatted command until its reply arrives, so
 * it can be sent again: after NOSCRIPT (SCRIPT FLUSH, restart, failover:
 * the script is loaded and the request re-sent) and, for idempotent
 * requests (RJQ__REQ_RETRY), after a reconnect. Requests made while the
 * command connection is down, or its session (AUTH, SELECT, scripts) is
 * not yet set, wait in the backlog; a failed connect attempt fails the
 * non-retryable ones with RJQ_ECONN (a refused session with its error),
 * so nothing waits longer than one connection attempt (nor longer than
 * command_timeout_ms: liveness.c ends them with RJQ_ETIMEDOUT). A request
 * answered with an error that proves it did not run (a server loading its
 * data, running a long script, a replica during a failover: LOADING, BUSY,
 * READONLY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN) is sent again with backoff
 * (50 ms doubling to 1 s while such errors go on) for up to a minute,
 * whatever its kind. The requests waiting to be sent again go out
 * together, in their order, and a request made meanwhile queues behind
 * them, so enqueues keep their order through it.
 *
 * A permission error (NOPERM, NOAUTH, WRONGPASS, a script's command or key
 * refused by the ACL: rjq__redis_error_code's RJQ_EAUTH) is final, never
 * transient: the request ends with RJQ_EAUTH and the server's words at
 * once, whatever its kind, and an RJQ_EVENT_ERROR names the request
 * (command and first argument, or script and keys). A session refused for
 * one (a wrong password) ends every waiting request with it, also those
 * that would otherwise wait for Redis however long (RJQ__REQ_RETRY).
 *
 * This file owns the command connection: its set-up step loads rjq's
 * function library (or, where the server has no functions, the scripts
 * for EVALSHA), its readiness sends the backlog, its loss fails what
 * cannot wait. Before a request is sent, features that batch work (the
 * enqueue batches) flush it through their before_send hooks, so a later
 * request always sees it.
 *
 * The request layer is five files, with request_private.h as their
 * private header: this one (making, sending and re-sending requests,
 * their replies, output back-pressure, the command connection's hooks);
 * reqstate.c (a request's explicit state, the lists that hold it, its
 * delivery and freeing); scripts.c (script heads, loading the library in
 * the session's set-up); txn.c (MULTI/EXEC transactions); durable.c (the
 * WAIT confirming durable writes).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/sds.h>

#include "request_private.h"
#include "slotmap.h"
#include "validate.h"
#include "writeout.h"

#define RETRY_FIRST_MS 50       /* first wait before re-sending after a transient error */
#define RETRY_MAX_MS 1000       /* ... doubling up to this */
#define RETRY_DEADLINE_MS 60000 /* ... for this long after the first one */
/* Requests wait in `room` while hiredis holds more than this much
 * unwritten output on the command connection (see output_full). */
#define OUTPUT_ROOM (1u << 20)
#define ROOM_POLL_MS 1          /* ... and look for room this often, */
#define ROOM_POLL_MAX_MS 64     /* ... doubling up to this while none is written */
#define REDIRECTS_MAX 5         /* MOVED/ASK followed per request; one more ends it */

static void on_reply(redisAsyncContext *ac, void *reply, void *priv);

/* ---- sending ----------------------------------------------------------- */

/* Write r's command to the context: one command (a long one straight to
 * the socket when hiredis has no output waiting: writeout.h), or a
 * transaction's (txn.c). REDIS_ERR: r was not sent (it waits for the next
 * connection). */
static int send_formatted(redisAsyncContext *ac, rjq__req *r) {
    if (r->nparts == 0) return rjq__writeout(ac, on_reply, r, r->cmd, r->len);
    return rjq__txn_send(ac, r, on_reply);
}

/* A script request whose head is not in the session's form (made before
 * the session said whether it has the library, or kept across a switch to
 * EVALSHA) gets the other head. Out of memory: sent as it is (its error
 * comes back to it). */
static void reformat_head(const rjq__conn *to, rjq__req *r) {
    if (r->script < 0 || r->fcall == to->fcall) return;
    if (r->nparts) rjq__txn_build(to->fcall, r, NULL, NULL);
    else if (r->block) rjq__script_head_in_block(to->fcall, r, r->len - r->head_len);
    else rjq__script_set_head(to->fcall, r, r->cmd + r->head_len, r->len - r->head_len);
}

/* hiredis' unwritten output on the command connection is past
 * OUTPUT_ROOM. hiredis moves the unwritten rest of its buffer after every
 * write that the socket took only part of, so a buffer of several big
 * batches (16 MiB each with 16 KiB payloads) costs the producer more CPU
 * in those moves than anything else it does. Requests made meanwhile wait
 * in `room` and go, in order, once the buffer is down to OUTPUT_ROOM
 * (send_room). The waiting lists (backlog, room, later) keep requests in
 * the order they were made: a request re-sent after a transient error or
 * a lost connection goes before newer ones, and one re-sent after its
 * script was loaded again goes behind that load, as a new one. */
static size_t unwritten(const rjq__conn *conn) {
    return conn->ac && conn->ac->c.obuf ? sdslen(conn->ac->c.obuf) : 0;
}

static int output_full(const rjq__conn *conn) {
    return unwritten(conn) > OUTPUT_ROOM;
}

static void write_now(rjq__conn *conn, void *arg) {
    redisAsyncContext *ac = conn->ac;
    int done = 0;
    (void)arg;
    /* redisBufferWrite, not redisAsyncHandleWrite (which must not run
     * inside a reply callback): an error stays in the context, and the
     * write event hiredis keeps armed while output is left finds it. */
    if (ac && rjq__conn_ready(conn) && conn->tls_session == NULL && unwritten(conn) > 0 && !ac->c.err)
        (void)redisBufferWrite(&ac->c, &done);
}

void rjq__send_now(rjq_client *c) {
    rjq__route_each(c, write_now, NULL);
}

/* Where r goes: its pinned connection, an ASK's target, or where the
 * slot table says (the command connection unless on a cluster). */
static rjq__conn *target_of(rjq_client *c, rjq__req *r) {
    if (r->pin) return r->pin;
    if (r->ask && r->ask->state != RJQ__LINK_RETIRED) return r->ask;
    r->ask = NULL;
    return rjq__route_link(c, r->slot);
}

/* r goes behind the requests waiting for another try: on one server, all
 * of them (enqueues keep their order); on a cluster, those of its own slot
 * only (one queue's order), so a slot that migrates (TRYAGAIN until its
 * keys have moved) holds up no other queue. */
static int behind_later(const rjq_client *c, const rjq__req *r) {
    if (c->later.n == 0 || c->sending_later) return 0;
    if (rjq__route_mode(c) != RJQ__ROUTE_CLUSTER) return 1;
    if (r->slot < 0) return 0;
    for (const rjq__req *l = c->later.head; l; l = l->next)
        if (l->slot == r->slot) return 1;
    return 0;
}

static void send_req(rjq_client *c, rjq__req *r) {
    RJQ_ASSERT(r->state == REQ_NEW);
    if (behind_later(c, r)) { /* behind those waiting for another try */
        rjq__req_move(c, r, REQ_LATER);
        return;
    }
    if (r->pin && r->pin->state == RJQ__LINK_RETIRED) { /* its node left the cluster */
        rjq__req_deliver(r, c, RJQ_ECONN, NULL);
        return;
    }
    rjq__conn *to = target_of(c, r);
    redisAsyncContext *ac = to->ac;
    int up = ac && rjq__conn_ready(to);
    if (up && (c->room.n > 0 || output_full(to))) { /* waits for room */
        rjq__req_move(c, r, REQ_ROOM);
        if (!rjq__timer_armed(&c->room_timer)) {
            c->room_poll_ms = ROOM_POLL_MS;
            c->room_seen = unwritten(to);
            rjq__timer_start(c, &c->room_timer, ROOM_POLL_MS);
        }
        return;
    }
    /* (requests of its slot still in flight elsewhere go first: its order) */
    if (up && r->pin == NULL && rjq__route_hold(c, r->slot, to)) {
        rjq__req_move(c, r, REQ_BACKLOG);
        return;
    }
    reformat_head(to, r);
    /* an ASK's target runs the one command after ASKING (a transaction:
     * ASKING holds until its EXEC) */
    if (up && r->ask == to && redisAsyncCommand(ac, NULL, NULL, "ASKING") != REDIS_OK) up = 0;
    if (up && send_formatted(ac, r) == REDIS_OK) {
        r->sent_ms = rjq__now_ms();
        r->link = to;
        r->ask = NULL;
        r->counted = rjq__route_sent(c, r->slot, to);
        rjq__req_move(c, r, REQ_INFLIGHT);
        if ((r->flags & RJQ__REQ_DURABLE) && c->wait_replicas > 0) rjq__durable_join(c, r);
    }
    else
        rjq__req_move(c, r, REQ_BACKLOG);
}

/* ---- a request's slot --------------------------------------------------------- */

static int resp_bulk(const char **p, const char *end, const char **str, size_t *len);

/* Plain commands whose first argument is no key: they go to any node. */
static int slotless(const char *name, size_t len) {
    static const char *const names[] = {"TIME",  "PING",   "INFO",   "PUBLISH", "FUNCTION",
                                        "SCRIPT", "WAIT",  "CLUSTER", "CLIENT", "MULTI",
                                        "EXEC",  "DBSIZE", "HELLO",  "ECHO",    "PUBSUB",
                                        "CONFIG", "COMMAND", "ROLE", "MEMORY",  "LATENCY",
                                        "SLOWLOG", "ACL"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strlen(names[i]) == len && strncasecmp(names[i], name, len) == 0) return 1;
    return 0;
}

/* The slot of a script call's first key, from its arguments (numkeys,
 * then the keys): -1 without keys. */
static int args_slot(const char *p, const char *end) {
    const char *s;
    size_t n;
    if (resp_bulk(&p, end, &s, &n) != 0 || n == 0 || n > 9) return -1;
    long long keys = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        keys = keys * 10 + (s[i] - '0');
    }
    if (keys < 1 || resp_bulk(&p, end, &s, &n) != 0) return -1;
    return rjq__key_slot(s, n);
}

/* Where request r's command (a transaction's first call: after MULTI,
 * and the plain commands when they go first) has its first bulk string,
 * the command's name: past its "*N" header. NULL: no header end. */
static const char *first_bulk(const rjq__req *r) {
    const char *p = r->cmd, *end = r->cmd + r->len;
    if (r->nparts) p += r->part_end[r->pre_after == 0 && r->npre > 0 ? r->npre : 0];
    if (p < end && *p == '*') p = memchr(p, '\n', (size_t)(end - p));
    return p ? p + 1 : NULL;
}

/* The slot of a plain command formatted by hiredis: of its first argument
 * unless the command takes no key. */
static int command_slot(const rjq__req *r) {
    const char *p = first_bulk(r), *end = r->cmd + r->len, *name, *key;
    size_t nlen, klen;
    if (p == NULL || resp_bulk(&p, end, &name, &nlen) != 0 || slotless(name, nlen)) return -1;
    if (resp_bulk(&p, end, &key, &klen) != 0) return -1;
    return rjq__key_slot(key, klen);
}

/* The slot of a transaction's first call's first key (every call of one
 * request is in its slot): past FCALL/EVALSHA and the function. */
static int calls_slot(const rjq__req *r) {
    const char *p = first_bulk(r), *end = r->cmd + r->len, *s;
    size_t n;
    if (p == NULL || resp_bulk(&p, end, &s, &n) != 0 || resp_bulk(&p, end, &s, &n) != 0)
        return -1;
    return args_slot(p, end);
}

/* Take a command formatted by rjq__resp_command (ours: free()). */
static int submit(rjq_client *c, rjq__conn *pin, int slot, int flags, rjq__reply_fn *fn,
                  void *priv, char *cmd, size_t len) {
    rjq__req *r = rjq__req_new(c, flags, fn, priv, cmd, len);
    if (r == NULL) {
        free(cmd);
        return RJQ_ENOMEM;
    }
    r->own_cmd = 1;
    r->slot = slot >= 0 ? slot : command_slot(r);
    r->pin = pin;
    send_req(c, r);
    return RJQ_OK;
}

static int new_req(rjq_client *c, rjq__conn *pin, int slot, int flags, rjq__reply_fn *fn,
                   void *priv, int argc, const char **argv, const size_t *lens) {
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    /* Work batched for the tick goes first: a request made after an
     * enqueue (await it, read it, complete a job) must see it: all of it
     * (a plain command's slot, or the one it is routed by, may not be its
     * keys': rjq__script passes its keys' slot). */
    if (c->flush_wanted) rjq__features_before_send(c, -1, 1);
    if (!rjq__accepting(c)) return RJQ_ECLOSED; /* a flushed callback freed the client */
    char *cmd;
    long long len = rjq__resp_command(&cmd, argc, argv, lens); /* (no sprintf per argument) */
    if (len < 0) return RJQ_ENOMEM;
    return submit(c, pin, slot, flags, fn, priv, cmd, (size_t)len);
}

int rjq__script_parts_after(rjq_client *c, int script, int flags, rjq__reply_fn *fn,
                            void *priv, const rjq__buf *pre, const size_t *pre_end, int npre,
                            int after, int nparts, rjq__buf *parts, const int *nargs) {
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    RJQ_ASSERT(nparts > 0 && npre >= 0 && (npre == 0 || (pre && pre_end)));
    RJQ_ASSERT(after >= 0 && after <= nparts);
    if (pre && pre->oom) return RJQ_ENOMEM;
    for (int i = 0; i < nparts; i++)
        if (parts[i].oom) return RJQ_ENOMEM;
    rjq__req *r = rjq__req_new(c, flags, fn, priv, NULL, 0);
    if (r == NULL) return RJQ_ENOMEM;
    r->script = script;
    if (rjq__txn_init(c, r, pre, pre_end, npre, after, nparts, parts, nargs) != 0) {
        rjq__req_free(r);
        return RJQ_ENOMEM;
    }
    r->slot = calls_slot(r);
    send_req(c, r);
    return RJQ_OK;
}

int rjq__script_parts(rjq_client *c, int script, int flags, rjq__reply_fn *fn, void *priv,
                      int nparts, rjq__buf *parts, const int *nargs) {
    return rjq__script_parts_after(c, script, flags, fn, priv, NULL, NULL, 0, 0, nparts, parts,
                                   nargs);
}

/* The request of a call of script with the nargs arguments at b->p + at
 * (its slot: their first key's), its command not yet set. NULL: b ran out
 * of memory, or the request did. */
static rjq__req *script_req(rjq_client *c, int script, int flags, rjq__reply_fn *fn, void *priv,
                            int nargs, const rjq__buf *b, size_t at) {
    if (b->oom) return NULL;
    rjq__req *r = rjq__req_new(c, flags, fn, priv, NULL, 0);
    if (r == NULL) return NULL;
    r->script = script;
    r->nargs = nargs;
    r->slot = args_slot(b->p + at, b->p + b->len);
    return r;
}

int rjq__script_buf(rjq_client *c, int script, int flags, rjq__reply_fn *fn, void *priv,
                    int nargs, const rjq__buf *b) {
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    rjq__req *r = script_req(c, script, flags, fn, priv, nargs, b, 0);
    if (r == NULL) return RJQ_ENOMEM;
    if (rjq__script_set_head(c->cmd.fcall, r, b->p, b->len) != 0) {
        free(r);
        return RJQ_ENOMEM;
    }
    send_req(c, r);
    return RJQ_OK;
}

int rjq__script_take_at(rjq_client *c, int script, int flags, rjq__reply_fn *fn, void *priv,
                        int nargs, rjq__buf *b, size_t at) {
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    RJQ_ASSERT(b->oom || b->len >= at);
    rjq__buf_nul(b); /* (NUL-ended: see rjq__txn_build) */
    rjq__req *r = script_req(c, script, flags, fn, priv, nargs, b, at);
    if (r == NULL) return RJQ_ENOMEM;
    r->block = b->p;
    r->args_at = at;
    r->own_cmd = 1;
    if (rjq__script_head_in_block(c->cmd.fcall, r, b->len - at) != 0) {
        r->block = NULL; /* (b stays the caller's) */
        r->own_cmd = 0;
        free(r);
        return RJQ_ENOMEM;
    }
    *b = (rjq__buf){0};
    send_req(c, r);
    return RJQ_OK;
}

int rjq__script_take(rjq_client *c, int script, int flags, rjq__reply_fn *fn, void *priv,
                     int nargs, rjq__buf *b) {
    return rjq__script_take_at(c, script, flags, fn, priv, nargs, b, RJQ__HEAD_ROOM);
}

int rjq__command(rjq_client *c, int flags, rjq__reply_fn *fn, void *priv, int argc,
                 const char **argv, const size_t *lens) {
    return new_req(c, NULL, -1, flags, fn, priv, argc, argv, lens);
}

int rjq__command_in(rjq_client *c, int slot, int flags, rjq__reply_fn *fn, void *priv, int argc,
                    const char **argv, const size_t *lens) {
    RJQ_ASSERT(slot >= 0 && slot < RJQ__SLOTS);
    return new_req(c, NULL, slot, flags, fn, priv, argc, argv, lens);
}

int rjq__command_on(rjq_client *c, rjq__conn *on, rjq__reply_fn *fn, void *priv, int argc,
                    const char **argv, const size_t *lens) {
    return new_req(c, on, -1, 0, fn, priv, argc, argv, lens);
}

int rjq__script_resp(rjq_client *c, int script, int flags, rjq__reply_fn *fn, void *priv,
                     int argc, const rjq__buf *b) {
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    if (b->oom) return RJQ_ENOMEM;
    /* Work batched for the tick goes first (see new_req): what the call's
     * slot may see, and before a write the user is told of (a completion,
     * a failure) all that goes on its connection, so it never overtakes an
     * earlier enqueue on the wire. */
    if (c->flush_wanted)
        rjq__features_before_send(c, args_slot(b->p, b->p + b->len), (flags & RJQ__REQ_DURABLE) != 0);
    if (!rjq__accepting(c)) return RJQ_ECLOSED; /* a flushed callback freed the client */
    return rjq__script_buf(c, script, flags, fn, priv, argc, b);
}

int rjq__script(rjq_client *c, int script, int flags, rjq__reply_fn *fn, void *priv,
                int argc, const char **argv, const size_t *lens) {
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    rjq__buf b = {0};
    for (int i = 0; i < argc; i++) rjq__buf_arg(&b, argv[i], lens ? lens[i] : strlen(argv[i]));
    int rc = rjq__script_resp(c, script, flags, fn, priv, argc, &b);
    rjq__buf_free(&b);
    return rc;
}

static void ignore_reply(rjq_client *c, int status, redisReply *reply, void *priv) {
    (void)c, (void)status, (void)reply, (void)priv;
}

/* NOSCRIPT (on `on`): load the script there, then send the request again
 * behind it. */
static void reload_and_resend(rjq_client *c, rjq__req *r, rjq__conn *on) {
    const rjq__script_def *s = &rjq__scripts[r->script];
    const char *argv[3] = {"SCRIPT", "LOAD", s->body};
    size_t lens[3] = {6, 4, s->len};
    r->resends++;
    new_req(c, on, -1, 0, ignore_reply, NULL, 3, argv, lens);
    r->order = ++c->req_order; /* sent again: behind the load */
    send_req(c, r);
}

static void on_library_loaded(rjq_client *c, int status, redisReply *reply, void *priv) {
    (void)c, (void)status;
    if (reply) rjq__library_loaded(priv, reply);
}

/* FUNCTION LOAD rjq's library on `on`, answered to on_library_loaded. */
static void load_library(rjq_client *c, rjq__conn *on) {
    const char *argv[3] = {"FUNCTION", "LOAD", rjq__library};
    size_t lens[3] = {8, 4, rjq__library_len};
    if (new_req(c, on, -1, 0, on_library_loaded, on, 3, argv, lens) != RJQ_OK)
        on->fcall = 0; /* cannot load it now: EVALSHA needs nothing more */
}

/* A script request the server could not run as sent. Returns 1 when it
 * was sent again behind what it needs: the library loaded (FUNCTION FLUSH,
 * or the library is gone), EVALSHA instead of FCALL (no functions here),
 * the script loaded (NOSCRIPT). */
static int script_resent(rjq_client *c, rjq__req *r, const char *err, rjq__conn *on) {
    RJQ_ASSERT(r->state == REQ_NEW && r->wait == NULL); /* taken out, its WAIT left (on_reply) */
    if (r->script < 0 || r->resends >= 4) return 0;
    if (r->fcall && strncmp(err, "ERR Function not found", 22) == 0) {
        r->resends++;
        if (on->fcall) load_library(c, on);
        r->order = ++c->req_order; /* sent again: behind the load */
        send_req(c, r); /* as EVALSHA if the library could not be loaded */
        return 1;
    }
    /* (a NOPERM of a transaction may be its MULTI's: only FCALL's counts) */
    if (r->fcall && (strncmp(err, "ERR unknown command", 19) == 0 ||
                     (strncmp(err, "NOPERM", 6) == 0 && strstr(err, "'fcall'")))) {
        r->resends++;
        on->fcall = 0;
        r->order = ++c->req_order;
        send_req(c, r);
        return 1;
    }
    if (!r->fcall && strncmp(err, "NOSCRIPT", 8) == 0) {
        reload_and_resend(c, r, on);
        return 1;
    }
    return 0;
}

/* Send every request waiting for another try, in order. */
static void on_retry_timer(rjq__timer *t) {
    rjq_client *c = t->owner;
    RJQ_ASSERT(!c->sending_later); /* not re-entered from a request it sends */
    rjq__reqlist all = rjq__req_take_all(c, REQ_LATER);
    rjq__req *r;
    c->sending_later = 1;
    while ((r = rjq__reqlist_pop(&all)) != NULL) send_req(c, r);
    c->sending_later = 0;
}

/* Send r again with the others waiting, after the shared backoff (50 ms
 * doubling to 1 s while transient errors go on; a success resets it).
 * Returns 0 when r's minute is over: the error is its outcome then. */
static int retry_later(rjq_client *c, rjq__req *r) {
    RJQ_ASSERT(r->state == REQ_NEW);
    uint64_t now = rjq__now_ms();
    if (r->first_error_ms == 0) r->first_error_ms = now;
    if (now - r->first_error_ms >= RETRY_DEADLINE_MS) return 0;
    rjq__req_move(c, r, REQ_LATER); /* (older ones in flight may follow) */
    if (!rjq__timer_armed(&c->retry_timer)) {
        rjq__timer_start(c, &c->retry_timer, c->retry_wait_ms);
        c->retry_wait_ms = c->retry_wait_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : c->retry_wait_ms * 2;
    }
    return 1;
}

static void send_room(rjq_client *c);

/* One bulk string of a RESP command at *p (up to end): its bytes and
 * length; moves *p past it. -1 when it is not one (cmd is our own
 * formatting, but stay inside it all the same). */
static int resp_bulk(const char **p, const char *end, const char **str, size_t *len) {
    const char *q = *p;
    size_t n = 0;
    if (q >= end || *q++ != '$') return -1;
    while (q < end && *q >= '0' && *q <= '9' && n < SIZE_MAX / 16) n = n * 10 + (size_t)(*q++ - '0');
    if (end - q < 2 || q[0] != '\r' || (size_t)(end - q - 2) < n + 2) return -1;
    *str = q + 2;
    *len = n;
    *p = q + 2 + n + 2;
    return 0;
}

/* What request r is, for a report: "script <function> keys <keys...>"
 * (a script: its first call's keys) or "<COMMAND> <first argument>". */
static void describe(const rjq__req *r, char *out, size_t cap) {
    const char *p = first_bulk(r), *end = r->cmd + r->len, *arg[3];
    size_t alen[3];
    int n = 0;
    while (p && n < 3 && resp_bulk(&p, end, &arg[n], &alen[n]) == 0) n++;
    if (r->script < 0 || n < 3) {
        snprintf(out, cap, "%.*s%s%.*s", n > 0 ? (int)alen[0] : 0, n > 0 ? arg[0] : "",
                 n > 1 ? " " : "", n > 1 ? (int)(alen[1] > 128 ? 128 : alen[1]) : 0,
                 n > 1 ? arg[1] : "");
        return;
    }
    size_t len = (size_t)snprintf(out, cap, "script %s", rjq__scripts[r->script].name);
    long long keys = atoll(arg[2]); /* numkeys, then the keys */
    for (long long k = 0; k < keys && k < 4 && len < cap; k++) {
        const char *key;
        size_t klen;
        if (resp_bulk(&p, end, &key, &klen) != 0) break;
        len += (size_t)snprintf(out + len, cap - len, "%s%.*s", k ? " " : " keys ",
                                (int)(klen > 128 ? 128 : klen), key);
    }
}

static void flush_backlog(rjq_client *c);

/* A MOVED or ASK (on a cluster) to request r, answered on `on`: it did not
 * run, so any request may follow it, no attempt spent; REDIRECTS_MAX of
 * them in a row (with no transient error's backoff between) end it. MOVED: the table
 * changes at once (and a refresh follows); ASK: the next sending goes to
 * the target after ASKING, the table unchanged. The request waits in the
 * backlog by its number, so it goes before the requests of its slot made
 * after it (see rjq__route_hold). Returns 0 when it is not one, or the
 * request has followed REDIRECTS_MAX already (the error is its outcome). */
static int redirected(rjq_client *c, rjq__req *r, const redisReply *rep, rjq__conn *on) {
    if (rjq__route_mode(c) != RJQ__ROUTE_CLUSTER ||
        (strncmp(rep->str, "MOVED ", 6) != 0 && strncmp(rep->str, "ASK ", 4) != 0))
        return 0;
    const char *asked = rjq__conn_address(on);
    rjq__redirect d;
    if (rjq__redirect_parse(rep->str, rep->len, asked ? asked : "127.0.0.1", &d) != RJQ_OK ||
        r->redirects >= REDIRECTS_MAX)
        return 0;
    r->redirects++;
    if (d.kind == RJQ__REDIRECT_MOVED) {
        rjq__route_moved(c, d.slot, &d.addr);
        r->ask = NULL;
    } else if ((r->ask = rjq__route_link_at(c, &d.addr)) == NULL) {
        return 0;
    }
    r->pin = NULL;
    rjq__req_move(c, r, REQ_BACKLOG);
    return 1;
}

/* A request refused for a permission (NOPERM, NOAUTH, or a script's
 * command or key the user may not use): final, never retried; the
 * RJQ_EVENT_ERROR says which request, so the missing permission can be
 * found (the server's words do not always name it: a key refused inside a
 * script does not say which). */
static void refused(rjq_client *c, const rjq__req *r, const char *err) {
    char what[384], detail[RJQ__ERRMSG_MAX + 400];
    describe(r, what, sizeof what);
    snprintf(detail, sizeof detail, "command connection: permission refused: %s: %s", what, err);
    rjq__emit(c, RJQ_EVENT_ERROR, RJQ_CONN_COMMAND, detail);
}

/* The reply to request r (hiredis calls this exactly once per sending,
 * with NULL when the connection went before the reply came). It decides
 * the request's outcome, in this order:
 *
 * - orphaned (the client was freed while it was in flight): only freed;
 *   its function had RJQ_ECANCELED then.
 * - lost with the connection (no reply): the connection is marked lost;
 *   a request that may be re-sent (RJQ__REQ_RETRY) waits to go again,
 *   behind those waiting for another try if there are any (it keeps its
 *   place by its number), else in the backlog for the next session;
 *   any other ends with RJQ_ECONN, or RJQ_ETIMEDOUT when the watchdog
 *   dropped the connection for want of replies.
 * - an error: a script request whose script or library is missing is
 *   sent again behind what loads it (script_resent); a transient error
 *   (LOADING, BUSY...) sends it again after the shared backoff, for up to
 *   a minute (retry_later; READONLY under Sentinel also asks the
 *   sentinels again); anything else ends it with the error's code, and a
 *   permission error also says which request was refused (refused).
 * - a success: a durable write whose WAIT is to come is HELD until that
 *   WAIT answers (durable.c); one that joined no WAIT (out of memory) is
 *   delivered as unconfirmed; anything else is delivered with RJQ_OK.
 *
 * A transaction's outcome is read from its EXEC's reply first (txn.c).
 * Any reply at all shows the server serving: the backoff starts short
 * again after a success (not a background read's, which a replica
 * answers: RJQ__REQ_BACKGROUND_READ), and requests waiting for output
 * room go when there is some. The function runs inside
 * rjq__enter/rjq__leave, so a user callback that frees the client is
 * deferred to its end. */
static void on_reply(redisAsyncContext *ac, void *reply, void *priv) {
    rjq__req *r = priv;
    rjq_client *c = r->c;
    redisReply *rep = reply;
    if (c == NULL) { /* orphaned by client destruction */
        RJQ_ASSERT(r->state == REQ_ORPHANED);
        rjq__req_free(r);
        return;
    }
    RJQ_ASSERT(r->state == REQ_INFLIGHT); /* (a HELD one had its reply) */
    rjq__enter(c);
    rjq__req_move(c, r, REQ_NEW);
    rjq__conn *on = r->link; /* (connections live as long as the client) */
    int slot_done = r->counted && rjq__route_answered(c, r->slot);
    r->counted = 0;
    r->link = NULL;
    redisReply err;
    if (r->nparts && rep) rep = rjq__txn_outcome(r, rep, &err);
    int waits = r->wait != NULL; /* a WAIT will confirm this answer */
    if (rep == NULL || rep->type == REDIS_REPLY_ERROR)
        rjq__req_leave_wait(r); /* nothing to confirm */
    if (rep == NULL) {
        rjq__conn_lost(on, ac->c.errstr[0] ? ac->c.errstr : "connection lost");
        rjq__route_refresh(c); /* (a cluster's node went: where are its slots now?) */
        /* Lost in flight, to be sent again: among those waiting for
         * another try when there are (it was sent before a newer one's
         * answer, or after an older one failed: its place is by when it was
         * made), so a request answered LOADING is not overtaken by a later
         * one the reconnect's backlog would send at once. */
        if ((r->flags & RJQ__REQ_RETRY) && c->later.n > 0) rjq__req_move(c, r, REQ_LATER);
        else if (r->flags & RJQ__REQ_RETRY) rjq__req_move(c, r, REQ_BACKLOG);
        else rjq__req_deliver(r, c, rjq__conn_timed_out(on) ? RJQ_ETIMEDOUT : RJQ_ECONN, NULL);
    } else if (rep->type == REDIS_REPLY_ERROR) {
        on->last_io_ms = rjq__now_ms();
        if (redirected(c, r, rep, on)) {
        } else if (script_resent(c, r, rep->str, on)) {
        } else if (rjq__redis_error_transient(rep->str) && retry_later(c, r)) {
            rjq__errmsg(c, "%s (will retry)", rep->str);
            /* (the redirect bound is for redirects in a row: a slot that
             * migrates answers ASK and TRYAGAIN in turn until its keys
             * have moved, which the minute of retries bounds) */
            r->redirects = 0;
            /* On a cluster, a slot without a master, a write that reached a
             * replica (a failover): the table is to be read again. */
            if (strncmp(rep->str, "CLUSTERDOWN", 11) == 0 || strncmp(rep->str, "READONLY", 8) == 0)
                rjq__route_refresh(c);
            /* With Sentinel, a master that became a replica: ask again. */
            if (c->url.master && strncmp(rep->str, "READONLY ", 9) == 0)
                rjq__conn_drop(&c->cmd, "READONLY: the master became a replica: asking the "
                                        "sentinels again");
        } else {
            int code = rjq__redis_error_code(rep->str);
            rjq__errmsg(c, "%s", rep->str);
            if (code == RJQ_EAUTH) refused(c, r, rep->str);
            rjq__req_deliver(r, c, code, rep);
        }
    } else {
        on->last_io_ms = rjq__now_ms();
        /* the server serves: back to short waits (not for a background
         * read: a replica answers it and still refuses the writes) */
        if (!(r->flags & RJQ__REQ_BACKGROUND_READ)) c->retry_wait_ms = RETRY_FIRST_MS;
        if (waits && rjq__durable_hold(c, r, rep)) {
            /* done on the master: its WAIT says the rest */
        } else if ((r->flags & RJQ__REQ_DURABLE) && c->wait_replicas > 0) {
            rjq__req_deliver_short(r, c, rep); /* no WAIT for it (out of memory): unconfirmed */
        } else {
            rjq__req_deliver(r, c, RJQ_OK, rep);
        }
    }
    /* the last of its slot in flight: requests held behind it may go */
    if (slot_done && c->backlog.n > 0 && !c->closing) flush_backlog(c);
    send_room(c);
    rjq__leave(c);
}

/* Send what waits for the connection and what waits for room, in order
 * (from the first that finds the output full again, they wait for room
 * once more). */
static void flush_backlog(rjq_client *c) {
    rjq__reqlist a = rjq__req_take_all(c, REQ_BACKLOG), b = rjq__req_take_all(c, REQ_ROOM);
    rjq__req *r;
    while (a.n > 0 || b.n > 0) {
        if (b.n == 0 || (a.n > 0 && a.head->order < b.head->order)) r = rjq__reqlist_pop(&a);
        else r = rjq__reqlist_pop(&b);
        send_req(c, r);
    }
}

/* The connection the first request waiting for room goes to, when it is
 * up (NULL: none waits, or it is down). */
static rjq__conn *room_link(rjq_client *c) {
    rjq__conn *to = c->room.head ? rjq__route_link(c, c->room.head->slot) : NULL;
    return to && rjq__conn_ready(to) ? to : NULL;
}

/* The requests waiting for room go when there is room: from the callback
 * of a request's reply, and from the room timer (replies may be slow to
 * come: the output may be written long before). */
static void send_room(rjq_client *c) {
    rjq__conn *to = room_link(c);
    if (to && !output_full(to)) flush_backlog(c);
}

/* While nothing is written (a stopped server), it looks less often. */
static void on_room_timer(rjq__timer *t) {
    rjq_client *c = t->owner;
    send_room(c);
    rjq__conn *to = room_link(c);
    if (to == NULL) return; /* (cmd_ready sends them) */
    size_t out = unwritten(to);
    if (out == c->room_seen) {
        c->room_poll_ms = c->room_poll_ms * 2 > ROOM_POLL_MAX_MS ? ROOM_POLL_MAX_MS
                                                                 : c->room_poll_ms * 2;
    } else {
        c->room_poll_ms = ROOM_POLL_MS;
    }
    c->room_seen = out;
    rjq__timer_start(c, &c->room_timer, c->room_poll_ms);
}

/* End the waiting requests (the backlog's, those waiting for room) made
 * before made_before (UINT64_MAX: all) that may not be re-sent with code.
 * The others stay, in their order; the ended ones are taken out before
 * any callback runs, so requests made by those callbacks queue behind
 * them. */
static void fail_backlog_if(rjq_client *c, int code, uint64_t made_before, rjq__conn *for_conn) {
    rjq__reqlist failed = {0};
    req_state states[2] = {REQ_BACKLOG, REQ_ROOM};
    rjq__req *r;
    for (int i = 0; i < 2; i++) {
        rjq__reqlist all = rjq__req_take_all(c, states[i]);
        while ((r = rjq__reqlist_pop(&all)) != NULL) {
            if ((r->flags & RJQ__REQ_RETRY) || r->made_ms >= made_before ||
                (for_conn && target_of(c, r) != for_conn))
                rjq__req_move(c, r, states[i]);
            else
                rjq__reqlist_push(&failed, r);
        }
    }
    while ((r = rjq__reqlist_pop(&failed)) != NULL) rjq__req_deliver(r, c, code, NULL);
}

/* The waiting requests that would go to conn (whose attempt failed). */
static void fail_backlog(rjq_client *c, int code, rjq__conn *conn) {
    fail_backlog_if(c, code, UINT64_MAX, conn);
}

void rjq__requests_expire(rjq_client *c, uint64_t made_before) {
    fail_backlog_if(c, RJQ_ETIMEDOUT, made_before, NULL);
}

void rjq__requests_cancel_all(rjq_client *c) {
    rjq__req *r;
    rjq__timer_teardown(c, &c->retry_timer);
    rjq__timer_teardown(c, &c->room_timer);
    while ((r = rjq__req_pop(c, REQ_LATER)) != NULL) rjq__req_deliver(r, c, RJQ_ECANCELED, NULL);
    while ((r = rjq__req_pop(c, REQ_BACKLOG)) != NULL) rjq__req_deliver(r, c, RJQ_ECANCELED, NULL);
    while ((r = rjq__req_pop(c, REQ_ROOM)) != NULL) rjq__req_deliver(r, c, RJQ_ECANCELED, NULL);
    /* In-flight requests stay allocated until hiredis calls them back
     * (with NULL, when the context is freed); they are orphaned here. */
    while ((r = c->inflight.head) != NULL) {
        rjq__req_move(c, r, REQ_ORPHANED);
        r->fn(c, RJQ_ECANCELED, NULL, r->priv);
    }
    RJQ_ASSERT(rjq__requests_pending(c) == 0);
    rjq__durable_cancel(c); /* (its members are orphaned now) */
}

/* ---- the command connection --------------------------------------------- */

static void cmd_ready(rjq__conn *conn) {
    flush_backlog(conn->c);
    rjq__route_ready(conn);
}

/* The seed asks whether it is a cluster node, then every command
 * connection loads rjq's library. */
static int cmd_setup(rjq__conn *conn) {
    int rc = rjq__route_setup(conn);
    return rc == RJQ_OK ? rjq__scripts_setup(conn) : rc;
}

/* The slot table moved slots: what waits for a node may go elsewhere. */
static void route_changed(rjq_client *c) {
    if (!c->closing) flush_backlog(c);
}

/* A session refused for a permission (wrong password, NOAUTH) is final:
 * every waiting request ends with it, also those that may be re-sent
 * (an enqueue with an id, a completion), which would otherwise wait for a
 * session that never comes. Requests made meanwhile wait for the next
 * attempt, which the backoff spaces. */
static void fail_all_waiting(rjq_client *c, int code) {
    rjq__reqlist failed = rjq__req_take_all(c, REQ_LATER), b = rjq__req_take_all(c, REQ_BACKLOG),
                 m = rjq__req_take_all(c, REQ_ROOM);
    rjq__req *r;
    rjq__timer_stop(c, &c->retry_timer);
    while (b.n > 0 || m.n > 0) {
        r = b.n == 0 || (m.n > 0 && m.head->order < b.head->order) ? rjq__reqlist_pop(&m)
                                                                   : rjq__reqlist_pop(&b);
        rjq__reqlist_insert(&failed, r);
    }
    while ((r = rjq__reqlist_pop(&failed)) != NULL) rjq__req_deliver(r, c, code, NULL);
}

/* A cluster node's connection attempt failed: what waits for it may wait
 * this long for a refresh of the slot table to send it elsewhere (a
 * failover: the cluster's node timeout and an election), then it fails as
 * after a failed attempt on one server. */
#define NODE_WAIT_MS 30000

static void cmd_down(rjq__conn *conn, int fail, const char *why) {
    (void)why; /* (the errmsg has it) */
    rjq_client *c = conn->c;
    int node = conn != &c->cmd && rjq__route_mode(c) == RJQ__ROUTE_CLUSTER;
    uint64_t now = rjq__now_ms();
    if (fail == RJQ_EAUTH) fail_all_waiting(c, fail);
    else if (node && fail == RJQ_ECONN && now > NODE_WAIT_MS)
        fail_backlog_if(c, fail, now - NODE_WAIT_MS, conn);
    else if (fail && !(node && fail == RJQ_ECONN)) fail_backlog(c, fail, conn);
    rjq__route_refresh(c); /* (on a cluster: a node went, or failed over) */
}

static const rjq__conn_hooks cmd_hooks = {cmd_setup, cmd_ready, cmd_down};

int rjq__requests_init(rjq_client *c) {
    c->retry_wait_ms = RETRY_FIRST_MS;
    int rc = rjq__timer_setup(c, &c->retry_timer, on_retry_timer, c);
    if (rc == RJQ_OK) rc = rjq__durable_init(c);
    if (rc == RJQ_OK) rc = rjq__timer_setup(c, &c->room_timer, on_room_timer, c);
    if (rc == RJQ_OK) rc = rjq__conn_init(c, &c->cmd, RJQ_CONN_COMMAND, &cmd_hooks);
    if (rc == RJQ_OK) rc = rjq__route_init(c, &cmd_hooks, route_changed);
    return rc;
}
