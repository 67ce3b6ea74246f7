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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/sds.h>

#include "core_private.h"
#include "validate.h"

#define RETRY_FIRST_MS 50       /* first wait before re-sending after a transient error */
#define RETRY_MAX_MS 1000       /* ... doubling up to this */
#define RETRY_DEADLINE_MS 60000 /* ... for this long after the first one */
/* Requests wait in `room` while hiredis holds more than this much
 * unwritten output on the command connection (see output_full). */
#define OUTPUT_ROOM (1u << 20)
#define ROOM_POLL_MS 1          /* ... and look for room this often, */
#define ROOM_POLL_MAX_MS 64     /* ... doubling up to this while none is written */

/* A request's state is which of the client's lists holds it; req_move
 * is the one place that changes it, moving it between the lists, and it
 * asserts that the transition is legal (see req_legal) and that the
 * request fits its new state (req_check):
 *
 *        made                                   reply, error or loss
 *          v                                  v-----------------------.
 *   +---> NEW -----> INFLIGHT ------------> NEW ---> HELD ----------> NEW
 *   |      |  \         | (client freed)    |  (WAIT to     | (WAIT       |
 *   |      |   \        v                   |   confirm)    |  answered)  v
 *   |      |    \   ORPHANED --> freed by   |               v            DONE
 *   |      |     \                hiredis'  +--> BACKLOG / LATER     (callback,
 *   |      v      v                callback        (re-sent)          then freed)
 *   +-- BACKLOG, ROOM, LATER (waiting to be sent: taken out as NEW)
 *
 * NEW is also a request taken out of a list by the code at hand, to be
 * sent, re-sent or ended; a HELD one is ORPHANED by client destruction
 * too (its WAIT's callback frees it). */
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
    req_state state;        /* which list holds it (req_move) */
    char *cmd;              /* formatted command, kept for resends */
    size_t len;
    int script;             /* index into rjq__scripts, or -1 */
    int flags;
    int own_cmd;            /* cmd is ours (malloc), not hiredis' */
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

/* One WAIT confirms every durable write sent before it on the connection:
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
    rjq__req **m;
    size_t n, cap;
    struct wait_slot *prev, *next; /* the client's sent slots */
} wait_slot;
static void on_reply(redisAsyncContext *ac, void *reply, void *priv);

/* ---- request lists ------------------------------------------------------- */

static void list_push(rjq__reqlist *l, rjq__req *r) {
    RJQ_ASSERT(r->prev == NULL && r->next == NULL && l->head != r); /* in no list */
    r->next = NULL;
    r->prev = l->tail;
    if (l->tail) l->tail->next = r;
    else l->head = r;
    l->tail = r;
    l->n++;
}

static void list_remove(rjq__reqlist *l, rjq__req *r) {
    /* r is in l: its neighbours (or l's ends) point at it */
    RJQ_ASSERT(l->n > 0);
    RJQ_ASSERT(r->prev ? r->prev->next == r : l->head == r);
    RJQ_ASSERT(r->next ? r->next->prev == r : l->tail == r);
    if (r->prev) r->prev->next = r->next;
    else l->head = r->next;
    if (r->next) r->next->prev = r->prev;
    else l->tail = r->prev;
    r->prev = r->next = NULL;
    l->n--;
}

/* Into l by its number (in order: at the tail). */
static void list_insert_ordered(rjq__reqlist *l, rjq__req *r) {
    RJQ_ASSERT(r->prev == NULL && r->next == NULL && l->head != r); /* in no list */
    rjq__req *at = l->tail;
    while (at && at->order > r->order) at = at->prev;
    r->prev = at;
    r->next = at ? at->next : l->head;
    if (r->next) r->next->prev = r;
    else l->tail = r;
    if (at) at->next = r;
    else l->head = r;
    l->n++;
    /* numbers are unique: strictly increasing along the list */
    RJQ_ASSERT(r->prev == NULL || r->prev->order < r->order);
    RJQ_ASSERT(r->next == NULL || r->next->order > r->order);
}

static rjq__req *list_pop(rjq__reqlist *l) {
    rjq__req *r = l->head;
    if (r) list_remove(l, r);
    return r;
}

/* ---- request states ------------------------------------------------------- */

/* The client's list that holds requests in state s (NULL: none does). */
static rjq__reqlist *state_list(rjq_client *c, req_state s) {
    switch (s) {
    case REQ_BACKLOG:
        return &c->backlog;
    case REQ_ROOM:
        return &c->room;
    case REQ_LATER:
        return &c->later;
    case REQ_INFLIGHT:
    case REQ_HELD:
        return &c->inflight;
    default:
        return NULL;
    }
}

/* The transitions of the diagram above. */
static int req_legal(req_state from, req_state to) {
    switch (from) {
    case REQ_NEW:
        return to == REQ_BACKLOG || to == REQ_ROOM || to == REQ_LATER || to == REQ_INFLIGHT ||
               to == REQ_HELD || to == REQ_DONE;
    case REQ_BACKLOG:
    case REQ_ROOM:
    case REQ_LATER:
        return to == REQ_NEW;
    case REQ_INFLIGHT:
    case REQ_HELD:
        return to == REQ_NEW || to == REQ_ORPHANED;
    default: /* ORPHANED and DONE end in req_free */
        return 0;
    }
}

/* What each state says of the request. */
static void req_check(const rjq__req *r) {
    switch (r->state) {
    case REQ_BACKLOG:
    case REQ_ROOM:
    case REQ_LATER: /* not sent: it belongs to no WAIT, holds no reply */
        RJQ_ASSERT(r->c != NULL && r->wait == NULL && r->held == NULL);
        break;
    case REQ_INFLIGHT: /* its reply has not come */
        RJQ_ASSERT(r->c != NULL && r->held == NULL);
        break;
    case REQ_HELD: /* done on the master; its WAIT says the rest */
        RJQ_ASSERT(r->c != NULL && r->held != NULL && r->wait != NULL);
        break;
    case REQ_ORPHANED:
        RJQ_ASSERT(r->c == NULL && r->prev == NULL && r->next == NULL);
        break;
    case REQ_NEW:
    case REQ_DONE:
        RJQ_ASSERT(r->c != NULL);
        break;
    }
}

/* Move r to state `to`: out of its state's list, into the new one's (the
 * inflight list in the order sent, the waiting ones in the order made).
 * ORPHANED lets go of the client. */
static void req_move(rjq_client *c, rjq__req *r, req_state to) {
    RJQ_ASSERT(r->c == c);
    RJQ_ASSERT(req_legal(r->state, to));
    rjq__reqlist *from = state_list(c, r->state), *into = state_list(c, to);
    if (from) list_remove(from, r);
    r->state = to;
    if (to == REQ_ORPHANED) r->c = NULL;
    if (into == &c->inflight) list_push(into, r);
    else if (into) list_insert_ordered(into, r);
    req_check(r);
}

/* The first request of state s's list, moved to NEW (NULL: none). */
static rjq__req *req_pop(rjq_client *c, req_state s) {
    rjq__req *r = state_list(c, s)->head;
    if (r) req_move(c, r, REQ_NEW);
    return r;
}

/* Every request of state s's list, moved to NEW, in their order, in a
 * list of the caller's: requests made or re-queued meanwhile (by what the
 * caller does with these) go to the client's list, behind. */
static rjq__reqlist req_take_all(rjq_client *c, req_state s) {
    rjq__reqlist all = {0};
    rjq__req *r;
    while ((r = req_pop(c, s)) != NULL) list_push(&all, r);
    return all;
}

static void reply_free(redisReply *r);

/* A deep copy of a RESP2 reply (hiredis frees its own when the callback
 * returns), freed by reply_free. NULL: out of memory. */
static redisReply *reply_copy(const redisReply *r) {
    redisReply *c = calloc(1, sizeof *c);
    if (c == NULL) return NULL;
    c->type = r->type;
    c->integer = r->integer;
    if (r->str) {
        c->len = r->len;
        if ((c->str = malloc(r->len + 1)) == NULL) {
            free(c);
            return NULL;
        }
        memcpy(c->str, r->str, r->len + 1);
    }
    if (r->elements) {
        if ((c->element = calloc(r->elements, sizeof *c->element)) == NULL) {
            free(c->str);
            free(c);
            return NULL;
        }
        for (c->elements = 0; c->elements < r->elements; c->elements++) {
            if ((c->element[c->elements] = reply_copy(r->element[c->elements])) == NULL) {
                reply_free(c);
                return NULL;
            }
        }
    }
    return c;
}

static void reply_free(redisReply *r) {
    if (r == NULL) return;
    for (size_t i = 0; i < r->elements; i++) reply_free(r->element[i]);
    free(r->element);
    free(r->str);
    free(r);
}

/* Leave its WAIT's list (a WAIT no longer waited for by it). */
static void leave_wait(rjq__req *r) {
    if (r->wait) r->wait->m[r->wait_idx] = NULL;
    r->wait = NULL;
}

/* Free r: never sent (NEW), delivered (DONE), or let go by its client
 * (ORPHANED); in no list. */
static void req_free(rjq__req *r) {
    RJQ_ASSERT(r->state == REQ_NEW || r->state == REQ_DONE || r->state == REQ_ORPHANED);
    RJQ_ASSERT(r->prev == NULL && r->next == NULL);
    leave_wait(r);
    reply_free(r->held);
    for (int i = 0; i < r->nparts; i++) free(r->parts[i].p);
    free(r->parts);
    free(r->part_end);
    free(r->part_err);
    if (r->own_cmd) free(r->cmd);
    else redisFreeCommand(r->cmd);
    free(r);
}

/* Call the request's function once and free it. */
static void deliver(rjq__req *r, rjq_client *c, int status, redisReply *reply) {
    req_move(c, r, REQ_DONE);
    r->fn(c, status, reply, r->priv);
    req_free(r);
}

/* The same for a durable write fewer replicas than asked confirmed. */
static void deliver_short(rjq__req *r, rjq_client *c, redisReply *reply) {
    req_move(c, r, REQ_DONE);
    c->write_short = 1;
    r->fn(c, RJQ_OK, reply, r->priv);
    c->write_short = 0;
    req_free(r);
}

int rjq__write_short(const rjq_client *c) {
    return c->write_short;
}

/* ---- sending ----------------------------------------------------------- */

static void reformat_head(rjq_client *c, rjq__req *r);
/* A durable write just sent: it joins the open WAIT (made, and the wait
 * timer armed, by the first of a burst). Out of memory: it joins none,
 * and its reply is reported unconfirmed. */
static void join_wait(rjq_client *c, rjq__req *r) {
    wait_slot *w = c->open_wait;
    if (w == NULL) {
        if ((w = calloc(1, sizeof *w)) == NULL) return;
        w->c = c;
        c->open_wait = w;
        rjq__timer_start(c, &c->wait_timer, 0);
    }
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        rjq__req **m = realloc(w->m, cap * sizeof *m);
        if (m == NULL) return;
        w->m = m;
        w->cap = cap;
    }
    r->wait = w;
    r->wait_idx = w->n;
    w->m[w->n++] = r;
}

static void slot_free(wait_slot *w) {
    free(w->m);
    free(w);
}

/* The answer to MULTI or to one call of a transaction (QUEUED, or an error
 * that makes its EXEC fail): the first error is kept for the EXEC's
 * callback, which reports it (see on_reply). */
static void on_part(redisAsyncContext *ac, void *reply, void *priv) {
    rjq__req *r = priv;
    redisReply *rep = reply;
    (void)ac;
    /* (no reply: the connection went; r may be gone too, see send_formatted) */
    if (rep == NULL || r->c == NULL || rep->type != REDIS_REPLY_ERROR || r->part_err) return;
    r->part_err = malloc(rep->len + 1);
    if (r->part_err) memcpy(r->part_err, rep->str, rep->len + 1);
}

/* Write r's command to the context: one command, or a transaction's
 * MULTI, calls and EXEC, each with its callback (hiredis answers them in
 * order, the EXEC's last). REDIS_ERR: r was not sent (it waits for the
 * next connection). A transaction cut short (hiredis out of memory after
 * its MULTI went in) leaves the connection inside MULTI: it is dropped,
 * so nothing more is written on it, and the callbacks of what went in get
 * no reply (on_part then leaves r alone: it may be freed by then). */
static int send_formatted(redisAsyncContext *ac, rjq__req *r) {
    if (r->nparts == 0) return redisAsyncFormattedCommand(ac, on_reply, r, r->cmd, r->len);
    free(r->part_err);
    r->part_err = NULL;
    size_t at = 0;
    int last = r->npre + r->nparts; /* MULTI, the calls and commands, EXEC */
    for (int i = 0; i <= last + 1; i++) {
        size_t end = i <= last ? r->part_end[i] : r->len;
        if (redisAsyncFormattedCommand(ac, i <= last ? on_part : on_reply, r, r->cmd + at,
                                       end - at) != REDIS_OK) {
            if (i > 0) rjq__conn_drop(&r->c->cmd, "out of memory");
            return REDIS_ERR;
        }
        at = end;
    }
    return REDIS_OK;
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
static size_t unwritten(const rjq_client *c) {
    return c->cmd.ac && c->cmd.ac->c.obuf ? sdslen(c->cmd.ac->c.obuf) : 0;
}

static int output_full(const rjq_client *c) {
    return unwritten(c) > OUTPUT_ROOM;
}

void rjq__send_now(rjq_client *c) {
    redisAsyncContext *ac = c->cmd.ac;
    int done = 0;
    /* redisBufferWrite, not redisAsyncHandleWrite (which must not run
     * inside a reply callback): an error stays in the context, and the
     * write event hiredis keeps armed while output is left finds it. */
    if (ac && c->cmd.ready && c->cmd.tls_session == NULL && unwritten(c) > 0 && !ac->c.err)
        (void)redisBufferWrite(&ac->c, &done);
}

static void send_req(rjq_client *c, rjq__req *r) {
    redisAsyncContext *ac = c->cmd.ac;
    RJQ_ASSERT(r->state == REQ_NEW);
    if (c->later.n > 0 && !c->sending_later) { /* behind those waiting for another try */
        req_move(c, r, REQ_LATER);
        return;
    }
    if (ac && c->cmd.ready && (c->room.n > 0 || output_full(c))) { /* waits for room */
        req_move(c, r, REQ_ROOM);
        if (!rjq__timer_armed(&c->room_timer)) {
            c->room_poll_ms = ROOM_POLL_MS;
            c->room_seen = unwritten(c);
            rjq__timer_start(c, &c->room_timer, ROOM_POLL_MS);
        }
        return;
    }
    reformat_head(c, r);
    if (ac && c->cmd.ready && send_formatted(ac, r) == REDIS_OK) {
        r->sent_ms = rjq__now_ms();
        req_move(c, r, REQ_INFLIGHT);
        if ((r->flags & RJQ__REQ_DURABLE) && c->wait_replicas > 0) join_wait(c, r);
    }
    else
        req_move(c, r, REQ_BACKLOG);
}

/* A request for the formatted command cmd (not sent yet), or NULL. */
static rjq__req *req_new(rjq_client *c, int flags, rjq__reply_fn *fn, void *priv, char *cmd,
                         size_t len) {
    rjq__req *r = calloc(1, sizeof *r);
    if (r == NULL) return NULL;
    r->c = c;
    r->fn = fn;
    r->priv = priv;
    r->cmd = cmd;
    r->len = len;
    r->script = -1;
    r->flags = flags;
    r->made_ms = rjq__now_ms();
    r->order = ++c->req_order;
    r->state = REQ_NEW;
    return r;
}

/* Take a command formatted by hiredis. */
static int submit(rjq_client *c, int flags, rjq__reply_fn *fn, void *priv, char *cmd,
                  size_t len) {
    rjq__req *r = req_new(c, flags, fn, priv, cmd, len);
    if (r == NULL) {
        redisFreeCommand(cmd);
        return RJQ_ENOMEM;
    }
    send_req(c, r);
    return RJQ_OK;
}

static int new_req(rjq_client *c, int flags, rjq__reply_fn *fn, void *priv, int argc,
                   const char **argv, const size_t *lens) {
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    /* Work batched for the tick goes first: a request made after an
     * enqueue (await it, read it, complete a job) must see it. */
    if (c->flush_wanted) rjq__features_before_send(c);
    if (!rjq__accepting(c)) return RJQ_ECLOSED; /* a flushed callback freed the client */
    char *cmd = NULL;
    rjq__fmtlen len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    if (len < 0 || cmd == NULL) return RJQ_ENOMEM;
    return submit(c, flags, fn, priv, cmd, (size_t)len);
}

/* The command head that runs `script`: FCALL of its function in rjq's
 * library when the session has it, else EVALSHA. */
static int script_head(int script, int nargs, int fcall, char *out, size_t cap) {
    const rjq__script_def *s = &rjq__scripts[script];
    if (fcall)
        return snprintf(out, cap, "*%d\r\n$5\r\nFCALL\r\n$%zu\r\n%s\r\n", nargs + 2,
                        strlen(s->function), s->function);
    return snprintf(out, cap, "*%d\r\n$7\r\nEVALSHA\r\n$40\r\n%s\r\n", nargs + 2, s->sha);
}

/* Give script request r (its arguments: the len bytes at args) the head
 * for the session's mode, in a new buffer. 0, or -1 out of memory (r
 * unchanged). */
static int set_head(rjq_client *c, rjq__req *r, const char *args, size_t len) {
    char head[160];
    int hlen = script_head(r->script, r->nargs, c->fcall, head, sizeof head);
    char *cmd = malloc((size_t)hlen + len + 1); /* NUL-ended: see build_parts */
    if (cmd == NULL) return -1;
    memcpy(cmd, head, (size_t)hlen);
    if (len) memcpy(cmd + hlen, args, len);
    cmd[(size_t)hlen + len] = '\0';
    if (r->own_cmd) free(r->cmd);
    r->cmd = cmd;
    r->own_cmd = 1;
    r->len = (size_t)hlen + len;
    r->head_len = (size_t)hlen;
    r->fcall = c->fcall;
    return 0;
}

/* A script request whose head is not in the session's form (made before
 * the session said whether it has the library, or kept across a switch to
 * EVALSHA) gets the other head. Out of memory: sent as it is (its error
 * comes back to it). */
static int build_parts(rjq_client *c, rjq__req *r, const char *pre, const size_t *pre_end);
static void reformat_head(rjq_client *c, rjq__req *r) {
    if (r->script < 0 || r->fcall == c->fcall) return;
    if (r->nparts) build_parts(c, r, NULL, NULL);
    else set_head(c, r, r->cmd + r->head_len, r->len - r->head_len);
}

/* A transaction's command for the session's mode: MULTI, its calls (each
 * its head and arguments) with the plain commands after the first
 * pre_after of them (pre, each ending at pre_end[i] in it; NULL: those of
 * r's cmd), EXEC. 0, or -1 out of memory (r unchanged). */
static int build_parts(rjq_client *c, rjq__req *r, const char *pre, const size_t *pre_end) {
    static const char multi[] = "*1\r\n$5\r\nMULTI\r\n", exec[] = "*1\r\n$4\r\nEXEC\r\n";
    char head[160];
    size_t len = sizeof multi - 1 + sizeof exec - 1 + r->pre_len;
    for (int i = 0; i < r->nparts; i++)
        len += (size_t)script_head(r->script, r->parts[i].nargs, c->fcall, head, sizeof head) +
               r->parts[i].len;
    /* NUL-ended, as hiredis' own formatted commands are: hiredis reads the
     * byte after a command's name (its EXEC here) to see whether more
     * arguments follow */
    char *cmd = malloc(len + 1);
    if (cmd == NULL) return -1;
    cmd[len] = '\0';
    /* (rebuilt: where the plain commands start in the old cmd; the ends
     * after it are read before they are overwritten) */
    size_t old_at = pre || r->npre == 0 ? 0 : r->part_end[r->pre_after];
    size_t at = sizeof multi - 1;
    int k = 1; /* the command after MULTI */
    memcpy(cmd, multi, at);
    r->part_end[0] = at;
    for (int i = 0; i <= r->nparts; i++) {
        if (i == r->pre_after && r->npre > 0) {
            memcpy(cmd + at, pre ? pre : r->cmd + old_at, r->pre_len);
            for (int j = 0; j < r->npre; j++, k++)
                r->part_end[k] = at + (pre ? pre_end[j] : r->part_end[k] - old_at);
            at += r->pre_len;
        }
        if (i == r->nparts) break;
        int hlen = script_head(r->script, r->parts[i].nargs, c->fcall, head, sizeof head);
        memcpy(cmd + at, head, (size_t)hlen);
        at += (size_t)hlen;
        memcpy(cmd + at, r->parts[i].p, r->parts[i].len);
        at += r->parts[i].len;
        r->part_end[k++] = at;
    }
    RJQ_ASSERT(k == 1 + r->npre + r->nparts);
    memcpy(cmd + at, exec, sizeof exec - 1);
    if (r->own_cmd) free(r->cmd);
    r->cmd = cmd;
    r->own_cmd = 1;
    r->len = len;
    r->fcall = c->fcall;
    return 0;
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
    rjq__req *r = req_new(c, flags, fn, priv, NULL, 0);
    if (r == NULL) return RJQ_ENOMEM;
    r->script = script;
    r->parts = calloc((size_t)nparts, sizeof *r->parts);
    r->part_end = calloc((size_t)(1 + npre + nparts), sizeof *r->part_end);
    int ok = r->parts && r->part_end;
    if (ok && npre > 0) { /* copied into cmd */
        r->npre = npre;
        r->pre_after = after;
        r->pre_len = pre->len;
    }
    for (int i = 0; ok && i < nparts; i++, r->nparts++) { /* taken, not copied */
        r->parts[i] = (part_args){parts[i].p, parts[i].len, nargs[i]};
        memset(&parts[i], 0, sizeof parts[i]);
    }
    if (!ok || build_parts(c, r, npre ? pre->p : NULL, pre_end) != 0) {
        req_free(r);
        return RJQ_ENOMEM;
    }
    send_req(c, r);
    return RJQ_OK;
}

int rjq__script_parts(rjq_client *c, int script, int flags, rjq__reply_fn *fn, void *priv,
                      int nparts, rjq__buf *parts, const int *nargs) {
    return rjq__script_parts_after(c, script, flags, fn, priv, NULL, NULL, 0, 0, nparts, parts,
                                   nargs);
}

int rjq__script_buf(rjq_client *c, int script, int flags, rjq__reply_fn *fn, void *priv,
                    int nargs, const rjq__buf *b) {
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    if (b->oom) return RJQ_ENOMEM;
    rjq__req *r = req_new(c, flags, fn, priv, NULL, 0);
    if (r == NULL) return RJQ_ENOMEM;
    r->script = script;
    r->nargs = nargs;
    if (set_head(c, r, b->p, b->len) != 0) {
        free(r);
        return RJQ_ENOMEM;
    }
    send_req(c, r);
    return RJQ_OK;
}

int rjq__command(rjq_client *c, int flags, rjq__reply_fn *fn, void *priv, int argc,
                 const char **argv, const size_t *lens) {
    return new_req(c, flags, fn, priv, argc, argv, lens);
}

int rjq__script(rjq_client *c, int script, int flags, rjq__reply_fn *fn, void *priv,
                int argc, const char **argv, const size_t *lens) {
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    /* Work batched for the tick goes first (see new_req). */
    if (c->flush_wanted) rjq__features_before_send(c);
    if (!rjq__accepting(c)) return RJQ_ECLOSED; /* a flushed callback freed the client */
    rjq__buf b = {0};
    for (int i = 0; i < argc; i++) rjq__buf_arg(&b, argv[i], lens ? lens[i] : strlen(argv[i]));
    int rc = rjq__script_buf(c, script, flags, fn, priv, argc, &b);
    rjq__buf_free(&b);
    return rc;
}

static void ignore_reply(rjq_client *c, int status, redisReply *reply, void *priv) {
    (void)c, (void)status, (void)reply, (void)priv;
}

/* NOSCRIPT: load the script, then send the request again behind it. */
static void reload_and_resend(rjq_client *c, rjq__req *r) {
    const rjq__script_def *s = &rjq__scripts[r->script];
    const char *argv[3] = {"SCRIPT", "LOAD", s->body};
    size_t lens[3] = {6, 4, s->len};
    r->resends++;
    rjq__command(c, 0, ignore_reply, NULL, 3, argv, lens);
    r->order = ++c->req_order; /* sent again: behind the load */
    send_req(c, r);
}

/* Errors a server gives while it cannot serve for a moment, before it
 * runs the command: loading its data after a restart, running a long
 * script, being a replica during a failover, a cluster resharding. */
static int transient_error(const char *err) {
    static const char *const prefixes[] = {"LOADING ", "BUSY ",     "READONLY ",
                                           "MASTERDOWN ", "TRYAGAIN ", "CLUSTERDOWN "};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(err, prefixes[i], strlen(prefixes[i])) == 0) return 1;
    return 0;
}

/* The answer to FUNCTION LOAD of rjq's library: it is there, or functions
 * are not to be had (before Redis 7, or not permitted): use EVALSHA. A
 * transient error (a server still loading its data, say) says nothing
 * about functions: keep FCALL, and "Function not found" loads the library
 * when it is missing. */
static void library_loaded(rjq_client *c, const redisReply *reply) {
    c->fcall = reply->type != REDIS_REPLY_ERROR || strstr(reply->str, "already exists") != NULL ||
               transient_error(reply->str);
}

static void on_library_loaded(rjq_client *c, int status, redisReply *reply, void *priv) {
    (void)status, (void)priv;
    if (reply) library_loaded(c, reply);
}

/* FUNCTION LOAD rjq's library, answered to on_library_loaded. */
static void load_library(rjq_client *c) {
    const char *argv[3] = {"FUNCTION", "LOAD", rjq__library};
    size_t lens[3] = {8, 4, rjq__library_len};
    if (rjq__command(c, 0, on_library_loaded, NULL, 3, argv, lens) != RJQ_OK)
        c->fcall = 0; /* cannot load it now: EVALSHA needs nothing more */
}

/* A script request the server could not run as sent. Returns 1 when it
 * was sent again behind what it needs: the library loaded (FUNCTION FLUSH,
 * or the library is gone), EVALSHA instead of FCALL (no functions here),
 * the script loaded (NOSCRIPT). */
static int script_resent(rjq_client *c, rjq__req *r, const char *err) {
    if (r->script < 0 || r->resends >= 4) return 0;
    if (r->fcall && strncmp(err, "ERR Function not found", 22) == 0) {
        r->resends++;
        if (c->fcall) load_library(c);
        r->order = ++c->req_order; /* sent again: behind the load */
        send_req(c, r); /* as EVALSHA if the library could not be loaded */
        return 1;
    }
    /* (a NOPERM of a transaction may be its MULTI's: only FCALL's counts) */
    if (r->fcall && (strncmp(err, "ERR unknown command", 19) == 0 ||
                     (strncmp(err, "NOPERM", 6) == 0 && strstr(err, "'fcall'")))) {
        r->resends++;
        c->fcall = 0;
        r->order = ++c->req_order;
        send_req(c, r);
        return 1;
    }
    if (!r->fcall && strncmp(err, "NOSCRIPT", 8) == 0) {
        reload_and_resend(c, r);
        return 1;
    }
    return 0;
}

/* Send every request waiting for another try, in order. */
static void on_retry_timer(rjq__timer *t) {
    rjq_client *c = t->owner;
    RJQ_ASSERT(!c->sending_later); /* not re-entered from a request it sends */
    rjq__reqlist all = req_take_all(c, REQ_LATER);
    rjq__req *r;
    c->sending_later = 1;
    while ((r = list_pop(&all)) != NULL) send_req(c, r);
    c->sending_later = 0;
}

/* Send r again with the others waiting, after the shared backoff (50 ms
 * doubling to 1 s while transient errors go on; a success resets it).
 * Returns 0 when r's minute is over: the error is its outcome then. */
static int retry_later(rjq_client *c, rjq__req *r) {
    uint64_t now = rjq__now_ms();
    if (r->first_error_ms == 0) r->first_error_ms = now;
    if (now - r->first_error_ms >= RETRY_DEADLINE_MS) return 0;
    req_move(c, r, REQ_LATER); /* (older ones in flight may follow) */
    if (!rjq__timer_armed(&c->retry_timer)) {
        rjq__timer_start(c, &c->retry_timer, c->retry_wait_ms);
        c->retry_wait_ms = c->retry_wait_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : c->retry_wait_ms * 2;
    }
    return 1;
}

/* A transaction's outcome from its EXEC reply: an error answered to MULTI
 * or a call (the EXEC then failed: nothing ran), or the error of its calls
 * when every one failed (nothing they would write was written: the script
 * or library was missing, say), is the request's error, handled as a
 * single command's is (retried, re-sent after loading the script...);
 * else the EXEC's array, one reply per command before the calls, then one
 * per call. The commands before the calls are the caller's to make safe to
 * run twice (see rjq__script_parts_after). err: room for the error. */
static redisReply *transaction_outcome(rjq__req *r, redisReply *rep, redisReply *err) {
    if (r->part_err) {
        memset(err, 0, sizeof *err);
        err->type = REDIS_REPLY_ERROR;
        err->str = r->part_err;
        err->len = strlen(r->part_err);
        return err;
    }
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != (size_t)(r->npre + r->nparts))
        return rep;
    size_t from = (size_t)r->pre_after, to = from + (size_t)r->npre; /* the plain commands' */
    redisReply *first = NULL;
    for (size_t i = 0; i < rep->elements; i++) {
        if (i >= from && i < to) continue;
        if (rep->element[i]->type != REDIS_REPLY_ERROR) return rep;
        if (first == NULL) first = rep->element[i];
    }
    return first;
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
    const char *p = r->cmd, *end = r->cmd + r->len, *arg[3];
    size_t alen[3];
    int n = 0;
    if (r->nparts) /* MULTI, and the plain commands when they go first */
        p += r->pre_after == 0 && r->npre > 0 ? r->part_end[r->npre] : r->part_end[0];
    if (p < end && *p == '*') p = memchr(p, '\n', (size_t)(end - p));
    if (p) p++;
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

static void on_reply(redisAsyncContext *ac, void *reply, void *priv) {
    rjq__req *r = priv;
    rjq_client *c = r->c;
    redisReply *rep = reply;
    if (c == NULL) { /* orphaned by client destruction */
        RJQ_ASSERT(r->state == REQ_ORPHANED);
        req_free(r);
        return;
    }
    RJQ_ASSERT(r->state == REQ_INFLIGHT); /* (a HELD one had its reply) */
    rjq__enter(c);
    req_move(c, r, REQ_NEW);
    redisReply err;
    if (r->nparts && rep) rep = transaction_outcome(r, rep, &err);
    int waits = r->wait != NULL; /* a WAIT will confirm this answer */
    if (rep == NULL || rep->type == REDIS_REPLY_ERROR) leave_wait(r); /* nothing to confirm */
    if (rep == NULL) {
        rjq__conn_lost(&c->cmd, ac->c.errstr[0] ? ac->c.errstr : "connection lost");
        /* Lost in flight, to be sent again: among those waiting for
         * another try when there are (it was sent before a newer one's
         * answer, or after an older one failed: its place is by when it was
         * made), so a request answered LOADING is not overtaken by a later
         * one the reconnect's backlog would send at once. */
        if ((r->flags & RJQ__REQ_RETRY) && c->later.n > 0) req_move(c, r, REQ_LATER);
        else if (r->flags & RJQ__REQ_RETRY) req_move(c, r, REQ_BACKLOG);
        else deliver(r, c, c->cmd.timed_out ? RJQ_ETIMEDOUT : RJQ_ECONN, NULL);
    } else if (rep->type == REDIS_REPLY_ERROR) {
        c->cmd.last_io_ms = rjq__now_ms();
        if (script_resent(c, r, rep->str)) {
        } else if (transient_error(rep->str) && retry_later(c, r)) {
            rjq__errmsg(c, "%s (will retry)", rep->str);
            /* With Sentinel, a master that became a replica: ask again. */
            if (c->url.master && strncmp(rep->str, "READONLY ", 9) == 0)
                rjq__conn_drop(&c->cmd, "READONLY: the master became a replica: asking the "
                                        "sentinels again");
        } else {
            int code = rjq__redis_error_code(rep->str);
            rjq__errmsg(c, "%s", rep->str);
            if (code == RJQ_EAUTH) refused(c, r, rep->str);
            deliver(r, c, code, rep);
        }
    } else {
        c->cmd.last_io_ms = rjq__now_ms();
        c->retry_wait_ms = RETRY_FIRST_MS; /* the server serves: back to short waits */
        if (waits && (r->held = reply_copy(rep)) != NULL) {
            req_move(c, r, REQ_HELD); /* done on the master: its WAIT says the rest */
        } else if ((r->flags & RJQ__REQ_DURABLE) && c->wait_replicas > 0) {
            deliver_short(r, c, rep); /* no WAIT for it (out of memory): unconfirmed */
        } else {
            deliver(r, c, RJQ_OK, rep);
        }
    }
    send_room(c);
    rjq__leave(c);
}

/* End the members of a WAIT: rep is its reply (NULL: lost with the
 * connection, or never sent). A held write is done on the master: it is
 * confirmed (enough replicas), or reported unconfirmed, or, lost with the
 * connection, re-sent when it may be (it finds its write done). A member
 * still waiting for its own reply is only let go (that reply, when it
 * comes, is reported unconfirmed). */
static void end_members(rjq_client *c, wait_slot *w, redisReply *rep) {
    int confirmed = rep && rep->type == REDIS_REPLY_INTEGER && rep->integer >= c->wait_replicas;
    if (rep && rep->type == REDIS_REPLY_ERROR) rjq__errmsg(c, "WAIT: %s", rep->str);
    else if (rep && !confirmed)
        rjq__errmsg(c, "WAIT: %lld of %d replicas confirmed the write within %ld ms",
                    rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1LL, c->wait_replicas,
                    c->wait_timeout_ms);
    for (size_t i = 0; i < w->n; i++) {
        rjq__req *r = w->m[i];
        if (r == NULL) continue;
        /* a member is sent: its reply awaited, or held for this WAIT */
        RJQ_ASSERT(r->state == REQ_INFLIGHT || r->state == REQ_HELD);
        RJQ_ASSERT(r->wait == w && r->wait_idx == i);
        RJQ_ASSERT((r->state == REQ_HELD) == (r->held != NULL));
        leave_wait(r);
        if (r->held == NULL) continue;
        req_move(c, r, REQ_NEW);
        if (rep == NULL && (r->flags & RJQ__REQ_RETRY)) {
            reply_free(r->held);
            r->held = NULL;
            req_move(c, r, REQ_BACKLOG);
        } else if (confirmed) {
            deliver(r, c, RJQ_OK, r->held);
        } else {
            deliver_short(r, c, r->held);
        }
    }
}

static void on_wait_reply(redisAsyncContext *ac, void *reply, void *priv) {
    wait_slot *w = priv;
    rjq_client *c = w->c;
    redisReply *rep = reply;
    if (c == NULL) { /* orphaned by client destruction: its held writes are ours to free */
        for (size_t i = 0; i < w->n; i++) {
            rjq__req *r = w->m[i];
            if (r == NULL) continue;
            RJQ_ASSERT(r->state == REQ_ORPHANED);
            leave_wait(r);
            if (r->held) req_free(r); /* else its own reply's callback frees it */
        }
        slot_free(w);
        return;
    }
    rjq__enter(c);
    if (w->prev) w->prev->next = w->next;
    else c->sent_waits = w->next;
    if (w->next) w->next->prev = w->prev;
    if (rep == NULL) rjq__conn_lost(&c->cmd, ac->c.errstr[0] ? ac->c.errstr : "connection lost");
    else c->cmd.last_io_ms = rjq__now_ms();
    end_members(c, w, rep);
    slot_free(w);
    if (c->open_wait) rjq__timer_start(c, &c->wait_timer, 0); /* the writes that gathered */
    rjq__leave(c);
}

/* The open WAIT goes out (the burst of durable writes is over). */
static void on_wait_timer(rjq__timer *t) {
    rjq_client *c = t->owner;
    wait_slot *w = c->open_wait;
    /* one WAIT at a time: while one holds the connection, the writes
     * behind it gather for the next (its reply sends it), so a write
     * waits at most two WAITs (hence wait_timeout_ms < command_timeout_ms/2) */
    if (w == NULL || c->sent_waits) return;
    c->open_wait = NULL;
    size_t live = 0;
    for (size_t i = 0; i < w->n; i++) live += w->m[i] != NULL;
    char n[24], ms[24];
    snprintf(n, sizeof n, "%d", c->wait_replicas);
    snprintf(ms, sizeof ms, "%ld", c->wait_timeout_ms);
    const char *argv[3] = {"WAIT", n, ms};
    if (live && c->cmd.ac && c->cmd.ready &&
        redisAsyncCommandArgv(c->cmd.ac, on_wait_reply, w, 3, argv, NULL) == REDIS_OK) {
        w->prev = NULL;
        w->next = c->sent_waits;
        if (w->next) w->next->prev = w;
        c->sent_waits = w;
        return;
    }
    end_members(c, w, NULL); /* no connection to ask on (its writes were lost with it) */
    slot_free(w);
}

/* Send what waits for the connection and what waits for room, in order
 * (from the first that finds the output full again, they wait for room
 * once more). */
static void flush_backlog(rjq_client *c) {
    rjq__reqlist a = req_take_all(c, REQ_BACKLOG), b = req_take_all(c, REQ_ROOM);
    rjq__req *r;
    while (a.n > 0 || b.n > 0) {
        if (b.n == 0 || (a.n > 0 && a.head->order < b.head->order)) r = list_pop(&a);
        else r = list_pop(&b);
        send_req(c, r);
    }
}

/* The requests waiting for room go when there is room: from the callback
 * of a request's reply, and from the room timer (replies may be slow to
 * come: the output may be written long before). */
static void send_room(rjq_client *c) {
    if (c->room.n > 0 && c->cmd.ready && !output_full(c)) flush_backlog(c);
}

/* While nothing is written (a stopped server), it looks less often. */
static void on_room_timer(rjq__timer *t) {
    rjq_client *c = t->owner;
    send_room(c);
    if (c->room.n == 0 || !c->cmd.ready) return; /* (cmd_ready sends them) */
    size_t out = unwritten(c);
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
static void fail_backlog_if(rjq_client *c, int code, uint64_t made_before) {
    rjq__reqlist failed = {0};
    req_state states[2] = {REQ_BACKLOG, REQ_ROOM};
    rjq__req *r;
    for (int i = 0; i < 2; i++) {
        rjq__reqlist all = req_take_all(c, states[i]);
        while ((r = list_pop(&all)) != NULL) {
            if ((r->flags & RJQ__REQ_RETRY) || r->made_ms >= made_before) req_move(c, r, states[i]);
            else list_push(&failed, r);
        }
    }
    while ((r = list_pop(&failed)) != NULL) deliver(r, c, code, NULL);
}

static void fail_backlog(rjq_client *c, int code) {
    fail_backlog_if(c, code, UINT64_MAX);
}

size_t rjq__requests_pending(const rjq_client *c) {
    return c->inflight.n + c->backlog.n + c->room.n + c->later.n;
}

uint64_t rjq__requests_oldest_sent(const rjq_client *c) {
    return c->inflight.head ? c->inflight.head->sent_ms : 0;
}

void rjq__requests_expire(rjq_client *c, uint64_t made_before) {
    fail_backlog_if(c, RJQ_ETIMEDOUT, made_before);
}

void rjq__requests_cancel_all(rjq_client *c) {
    rjq__req *r;
    rjq__timer_teardown(c, &c->retry_timer);
    rjq__timer_teardown(c, &c->wait_timer);
    rjq__timer_teardown(c, &c->room_timer);
    /* WAITs sent: orphaned (their callbacks free them and their held
     * writes); the open one: never sent, its held writes freed here */
    for (wait_slot *w = c->sent_waits; w; w = w->next) w->c = NULL;
    c->sent_waits = NULL;
    wait_slot *open = c->open_wait;
    c->open_wait = NULL;
    while ((r = req_pop(c, REQ_LATER)) != NULL) deliver(r, c, RJQ_ECANCELED, NULL);
    while ((r = req_pop(c, REQ_BACKLOG)) != NULL) deliver(r, c, RJQ_ECANCELED, NULL);
    while ((r = req_pop(c, REQ_ROOM)) != NULL) deliver(r, c, RJQ_ECANCELED, NULL);
    /* In-flight requests stay allocated until hiredis calls them back
     * (with NULL, when the context is freed); they are orphaned here. */
    while ((r = c->inflight.head) != NULL) {
        req_move(c, r, REQ_ORPHANED);
        r->fn(c, RJQ_ECANCELED, NULL, r->priv);
    }
    RJQ_ASSERT(rjq__requests_pending(c) == 0);
    if (open) {
        for (size_t i = 0; i < open->n; i++) {
            rjq__req *m = open->m[i];
            if (m == NULL) continue;
            RJQ_ASSERT(m->state == REQ_ORPHANED); /* (a member is sent: it was in flight) */
            leave_wait(m);
            if (m->held) req_free(m); /* answered: no callback of its own will come */
        }
        slot_free(open);
    }
}

/* ---- the command connection --------------------------------------------- */

/* Without the function library, every script is loaded for EVALSHA. A
 * refusal is reported; a script call then fails with the server's words. */
static void on_script_loaded(rjq__conn *conn, redisReply *r, void *arg) {
    if (r->type == REDIS_REPLY_ERROR) rjq__conn_step_failed(conn, arg, r->str);
}

/* FUNCTION LOAD of rjq's library: loaded now or before, else (no functions
 * on this server, or not permitted) the scripts are loaded for EVALSHA.
 * Neither is an error. */
static void on_library_step(rjq__conn *conn, redisReply *r, void *arg) {
    rjq_client *c = conn->c;
    (void)arg;
    if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOAUTH", 6) == 0) {
        rjq__conn_step_failed(conn, "FUNCTION LOAD", r->str);
        return;
    }
    library_loaded(c, r);
    for (int i = 0; !c->fcall && i < RJQ__SCRIPT_COUNT; i++) {
        const char *argv[3] = {"SCRIPT", "LOAD", rjq__scripts[i].body};
        size_t lens[3] = {6, 4, rjq__scripts[i].len};
        if (rjq__conn_step(conn, on_script_loaded, "SCRIPT LOAD", 3, argv, lens) != RJQ_OK) {
            rjq__conn_drop(conn, "out of memory");
            return;
        }
    }
}

static int cmd_setup(rjq__conn *conn) {
    rjq_client *c = conn->c;
    /* Until the answer says otherwise, scripts wait for EVALSHA. */
    const char *argv[3] = {"FUNCTION", "LOAD", rjq__library};
    size_t lens[3] = {8, 4, rjq__library_len};
    c->fcall = 0;
    return rjq__conn_step(conn, on_library_step, NULL, 3, argv, lens);
}

static void cmd_ready(rjq__conn *conn) {
    flush_backlog(conn->c);
}

/* A session refused for a permission (wrong password, NOAUTH) is final:
 * every waiting request ends with it, also those that may be re-sent
 * (an enqueue with an id, a completion), which would otherwise wait for a
 * session that never comes. Requests made meanwhile wait for the next
 * attempt, which the backoff spaces. */
static void fail_all_waiting(rjq_client *c, int code) {
    rjq__reqlist failed = req_take_all(c, REQ_LATER), b = req_take_all(c, REQ_BACKLOG),
                 m = req_take_all(c, REQ_ROOM);
    rjq__req *r;
    rjq__timer_stop(c, &c->retry_timer);
    while (b.n > 0 || m.n > 0) {
        r = b.n == 0 || (m.n > 0 && m.head->order < b.head->order) ? list_pop(&m) : list_pop(&b);
        list_insert_ordered(&failed, r);
    }
    while ((r = list_pop(&failed)) != NULL) deliver(r, c, code, NULL);
}

static void cmd_down(rjq__conn *conn, int fail, const char *why) {
    (void)why; /* (the errmsg has it) */
    if (fail == RJQ_EAUTH) fail_all_waiting(conn->c, fail);
    else if (fail) fail_backlog(conn->c, fail);
}

static const rjq__conn_hooks cmd_hooks = {cmd_setup, cmd_ready, cmd_down};

int rjq__requests_init(rjq_client *c) {
    c->retry_wait_ms = RETRY_FIRST_MS;
    int rc = rjq__timer_setup(c, &c->retry_timer, on_retry_timer, c);
    if (rc == RJQ_OK) rc = rjq__timer_setup(c, &c->wait_timer, on_wait_timer, c);
    if (rc == RJQ_OK) rc = rjq__timer_setup(c, &c->room_timer, on_room_timer, c);
    if (rc == RJQ_OK) rc = rjq__conn_init(c, &c->cmd, RJQ_CONN_COMMAND, &cmd_hooks);
    return rc;
}
