/*
 * The request layer's private header: the struct bodies and functions its
 * files share (DESIGN.md section 10: a private header per layer). Only
 * request.c, reqstate.c, scripts.c, txn.c and durable.c include it
 * (tests/layering.sh checks); the rest of the core sees request.c's
 * interface in core_private.h, the features in core.h.
 *
 * Inside the layer, calls go one way only:
 *     request.c -> durable.c -> reqstate.c
 *     request.c -> txn.c -> scripts.c
 * reqstate.c: a request's states and the lists that hold them, its
 * making, delivery and freeing; scripts.c: the FCALL/EVALSHA heads and
 * the function library's loading in the session's set-up; txn.c:
 * MULTI/EXEC transactions of script calls; durable.c: the WAIT that
 * confirms durable writes; request.c: making, sending and re-sending
 * requests, their replies, the command connection.
 */
#ifndef RJQ_REQUEST_PRIVATE_H
#define RJQ_REQUEST_PRIVATE_H

#include "core_private.h"

/* A request's state is which of the client's lists holds it;
 * rjq__req_move (reqstate.c) is the one function that changes it, moving
 * the request between the lists, and it asserts that the transition is
 * legal and that the request fits its new state. The transitions:
 *
 *   NEW       -> BACKLOG, ROOM, LATER (to wait), INFLIGHT (sent),
 *                HELD (its reply came: a WAIT is to confirm it), DONE
 *   BACKLOG, ROOM, LATER -> NEW (taken out, to be sent or ended)
 *   INFLIGHT  -> NEW (its reply came, or its connection went),
 *                ORPHANED (the client was freed)
 *   HELD      -> NEW (its WAIT answered), ORPHANED (the client was freed)
 *   ORPHANED, DONE: none; freed (an ORPHANED one by hiredis' callback)
 *
 * NEW is a request in no list: just made, or taken out of one by the code
 * at hand, which sends it, re-queues it or ends it (DONE: its function is
 * called, then it is freed) before it returns. */
typedef enum req_state {
    REQ_NEW,      /* in no list: just made, or taken out of one */
    REQ_BACKLOG,  /* c->backlog: waits for the command connection's session */
    REQ_ROOM,     /* c->room: waits for hiredis' output to shrink */
    REQ_LATER,    /* c->later: waits for another try after a transient error */
    REQ_INFLIGHT, /* c->inflight: written to the context, its reply awaited */
    REQ_HELD,     /* c->inflight: answered; its reply kept until its WAIT answers */
    REQ_ORPHANED, /* in no list, c NULL: the client is gone; hiredis' callback frees it */
    REQ_DONE,     /* its function is being called: freed right after */
} req_state;

/* A request keeps its formatted command until its reply arrives. */
struct rjq__req {
    rjq_client *c;          /* NULL once orphaned by client destruction */
    rjq__reply_fn *fn;
    void *priv;
    req_state state;        /* which list holds it (rjq__req_move) */
    char *cmd;              /* formatted command, kept for resends */
    size_t len;
    int script;             /* index into rjq__scripts, or -1 */
    int flags;
    int own_cmd;            /* cmd is ours (malloc), not hiredis' */
    char *block;            /* non-NULL: cmd sits in this block of ours (a
                               script's arguments taken with RJQ__HEAD_ROOM
                               in front, its head written there): free it,
                               not cmd (rjq__script_take) */
    size_t args_at;         /* block: where the arguments start in it */
    int nargs;              /* script: arguments after the head */
    size_t head_len;        /* script: bytes of cmd before them */
    int fcall;              /* script: the head is FCALL (else EVALSHA) */
    int nparts;             /* > 0: a transaction of that many calls of the
                               script (rjq__script_parts); cmd is MULTI, the
                               calls, EXEC */
    struct part_args *parts;/* their arguments, kept to rebuild cmd */
    int npre;               /* plain commands the transaction runs, */
    int pre_after;          /* ... after this many of its calls, */
    size_t pre_len;         /* ... their bytes (in cmd) */
    size_t *part_end;       /* the end in cmd of MULTI, of each command
                               before the calls, of each call */
    char *part_err;         /* the first error answered to MULTI or a call */
    int resends;            /* resends to load what it needs so far */
    int slot;               /* the slot of its first key; -1: none (route.c) */
    rjq__conn *link;        /* in flight: the connection it was sent on */
    rjq__conn *pin;         /* goes to this connection only (loading its scripts) */
    rjq__conn *ask;         /* an ASK's target: the next sending only, after ASKING */
    int redirects;          /* MOVED and ASK followed so far */
    int counted;            /* in flight and counted by rjq__route_sent */
    uint64_t made_ms;       /* when the request was made */
    uint64_t order;         /* its number: the lists waiting to send keep
                               their requests in this order */
    uint64_t sent_ms;       /* when it was last written to a context */
    uint64_t first_error_ms;/* its first transient error (0: none) */
    struct wait_slot *wait; /* the WAIT that confirms it (wait_replicas) */
    size_t wait_idx;        /* its place in that WAIT's list */
    redisReply *held;       /* its reply (a copy), kept until the WAIT answers */
    struct rjq__req *prev, *next;
};

/* The arguments of one call of a transaction (taken from the caller). */
typedef struct part_args {
    char *p;
    size_t len;
    int nargs;
} part_args;

/* One WAIT confirms every durable write sent before it on the connection
 * (on a Redis Cluster, each master's connection has its own open slot and
 * its own WAIT):
 * the writes of a burst join the open slot, and one WAIT goes out for
 * all of them from the client's wait timer (0 ms: after the code that
 * made them returned), so WAITs never queue behind one another. A write
 * whose reply came is held (a copy of its reply) until the WAIT answers.
 * A member that leaves (answered with an error, lost and re-sent, freed)
 * leaves a NULL. A sent slot is freed by its WAIT's callback, which
 * hiredis calls exactly once; the client's sent slots are orphaned (c
 * NULL) when it is destroyed. */
typedef struct wait_slot {
    rjq_client *c;
    rjq__conn *link;        /* the connection its writes went on (it asks there) */
    rjq__req **m;
    size_t n, cap;
    struct wait_slot *prev, *next; /* the client's sent slots */
    struct wait_slot *open_next;   /* the client's open slots (one per connection) */
} wait_slot;

/* ---- states and lists (reqstate.c) ----------------------------------------- */

/* Plain list operations, for the lists of a caller's own (requests in
 * state NEW); the client's lists change through rjq__req_move only. */
void rjq__reqlist_push(rjq__reqlist *l, rjq__req *r);
rjq__req *rjq__reqlist_pop(rjq__reqlist *l);
/* Into l by the request's number (made later: behind). */
void rjq__reqlist_insert(rjq__reqlist *l, rjq__req *r);

/* Move r to state `to` (out of its state's list, into the new one's),
 * asserting that the transition is legal and r fits its new state. */
void rjq__req_move(rjq_client *c, rjq__req *r, req_state to);
/* The first request of state s's list, moved to NEW (NULL: none). */
rjq__req *rjq__req_pop(rjq_client *c, req_state s);
/* Every request of state s's list, moved to NEW, in order, in a list of
 * the caller's. */
rjq__reqlist rjq__req_take_all(rjq_client *c, req_state s);

/* A request (state NEW) for the formatted command cmd, taken (not sent
 * yet), or NULL. */
rjq__req *rjq__req_new(rjq_client *c, int flags, rjq__reply_fn *fn, void *priv, char *cmd,
                       size_t len);
/* Free a request in no list: NEW (never sent), DONE or ORPHANED. */
void rjq__req_free(rjq__req *r);
/* Free r's command however it is held (hiredis', ours, or in our block:
 * rjq__script_take), leaving r without one (the head rewrites give it
 * another). */
void rjq__req_free_cmd(rjq__req *r);
/* Call r's function once (status, reply) and free r. */
void rjq__req_deliver(rjq__req *r, rjq_client *c, int status, redisReply *reply);
/* The same for a durable write fewer replicas than asked confirmed. */
void rjq__req_deliver_short(rjq__req *r, rjq_client *c, redisReply *reply);
/* r leaves its WAIT's list (a WAIT no longer waited for by it). */
void rjq__req_leave_wait(rjq__req *r);
/* Free a reply copied by durable.c (NULL: nothing). */
void rjq__reply_free(redisReply *r);

/* ---- script heads and the library (scripts.c) ------------------------------ */

/* The command head that runs `script` with nargs arguments: FCALL of its
 * function (fcall) or EVALSHA, into out (cap bytes); its length. */
int rjq__script_head(int script, int nargs, int fcall, char *out, size_t cap);
/* Give script request r (its arguments: the len bytes at args) the head
 * for the session's mode, in a new buffer. 0, or -1 out of memory. */
int rjq__script_set_head(int fcall, rjq__req *r, const char *args, size_t len);
/* The same for a request whose arguments (args_len bytes) sit in its block
 * at args_at: the head is written in front of them, nothing is copied or
 * allocated (rjq__script_take), unless the head is longer than the room
 * in front: then as rjq__script_set_head (the block freed). 0, or -1 out
 * of memory (r unchanged). */
int rjq__script_head_in_block(int fcall, rjq__req *r, size_t args_len);
/* Whether the session has rjq's library, from FUNCTION LOAD's answer. */
void rjq__library_loaded(rjq__conn *conn, const redisReply *reply);
/* The command connection's set-up step (its rjq__conn_hooks setup). */
int rjq__scripts_setup(rjq__conn *conn);

/* ---- transactions (txn.c) ------------------------------------------------- */

/* Give r (a script request, state NEW) the npre plain commands (pre,
 * each ending at pre_end[i] in it) to run after the first `after` of its
 * nparts calls, and the calls (parts, taken: emptied here), and build its
 * command. 0, or -1 out of memory (then r is the caller's to free). */
int rjq__txn_init(rjq_client *c, rjq__req *r, const rjq__buf *pre, const size_t *pre_end,
                  int npre, int after, int nparts, rjq__buf *parts, const int *nargs);
/* Rebuild transaction r's command for the session's mode (pre: NULL). */
int rjq__txn_build(int fcall, rjq__req *r, const char *pre, const size_t *pre_end);
/* Write transaction r to the context: MULTI, the commands and calls, then
 * EXEC, answered to `done`. REDIS_ERR: not sent. */
int rjq__txn_send(redisAsyncContext *ac, rjq__req *r, redisCallbackFn *done);
/* The outcome of transaction r from its EXEC reply (err: room for an
 * error made here). */
redisReply *rjq__txn_outcome(rjq__req *r, redisReply *rep, redisReply *err);

/* ---- durable writes (durable.c) ------------------------------------------- */

int rjq__durable_init(rjq_client *c);
/* Durable write r (in flight) joins the open WAIT. */
void rjq__durable_join(rjq_client *c, rjq__req *r);
/* r's reply came, and a WAIT will confirm it: keep a copy (r goes HELD).
 * 0: out of memory (r stays NEW: report it unconfirmed). */
int rjq__durable_hold(rjq_client *c, rjq__req *r, const redisReply *rep);
/* Client destruction, once every request is ended or orphaned: the WAITs
 * sent are orphaned, the open one freed with its held writes. */
void rjq__durable_cancel(rjq_client *c);

#endif /* RJQ_REQUEST_PRIVATE_H */
