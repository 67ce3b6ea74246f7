/*
 * The book of one sharded pub/sub connection (shardlink.c), and its reply
 * dispatcher. A leaf: no I/O, no client, no clock.
 *
 * It keeps
 * - the channels: each wanted or not by the owner, and what the server was
 *   asked (SSUBSCRIBE / SUNSUBSCRIBE replies still due) and confirmed;
 * - the commands sent on the connection, in order, so that every reply that
 *   is not pushed finds the command it answers (RESP2 replies come in the
 *   order of the commands; only `smessage` and a `sunsubscribe` the server
 *   sends by itself, after a slot migration, are pushed).
 *
 * rjq__ssbook_reply reads one reply: its shape is checked (type, element
 * count and types, every length, the subscription count in range) and it
 * must answer the oldest command still due; what it means is written to
 * an rjq__ssout, at most one thing per reply. The book is consistent
 * before the caller acts on it, so the caller may hand it to code that
 * changes the book (subscribes, unsubscribes) or frees the connection.
 * Anything else (no command due, a reply of another command, an unknown
 * shape) is RJQ__SSOUT_PROTO: the connection can no longer be trusted.
 */
#ifndef RJQ_SSBOOK_H
#define RJQ_SSBOOK_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

/* The longest channel name (bytes) a book holds; longer ones are refused
 * by the caller and never match a reply. */
#define RJQ__SSCH_MAX 4096

/* What the owner sees of a channel it wants. */
enum {
    RJQ__SSCH_WANTED = 0,  /* not asked for on this connection yet */
    RJQ__SSCH_PENDING = 1, /* SSUBSCRIBE sent, not confirmed */
    RJQ__SSCH_SUBSCRIBED = 2
};

/* Commands, as the book records them. */
enum {
    RJQ__SSCMD_SETUP = 1, /* a set-up step (AUTH, CLIENT SETNAME): step says which */
    RJQ__SSCMD_SUB,       /* SSUBSCRIBE of one channel */
    RJQ__SSCMD_UNSUB,     /* SUNSUBSCRIBE of one channel */
    RJQ__SSCMD_PING
};

typedef struct rjq__ssch {
    struct rjq__ssch *next;      /* hash chain */
    struct rjq__ssch *lost_next; /* the lost list (rjq__ssbook_reset) */
    uint64_t hash;
    int wanted;     /* by the owner */
    int confirmed;  /* the server said it is subscribed (as of the replies read) */
    int last;       /* the last of its commands sent (RJQ__SSCMD_SUB/UNSUB), while any is due */
    int nsub, nunsub; /* replies due */
    int lost_mark;  /* on the lost list */
    int pinned;     /* named by an rjq__ssout not yet done */
    size_t len;
    char name[];
} rjq__ssch;

typedef struct rjq__sssent {
    int kind;        /* RJQ__SSCMD_* */
    int step;        /* RJQ__SSCMD_SETUP: the caller's step number */
    int prev_last;   /* the channel's `last` before (rjq__ssbook_unpush) */
    rjq__ssch *ch;   /* SUB, UNSUB */
} rjq__sssent;

typedef struct rjq__ssbook {
    rjq__ssch **buckets;
    size_t nbuckets, n, nwanted;
    rjq__sssent *ring;
    size_t cap, head, count;     /* commands whose reply is due, oldest at head */
    rjq__ssch *lost, *lost_tail; /* lost channels not yet reported */
} rjq__ssbook;

/* What one reply means. */
enum {
    RJQ__SSOUT_NONE = 0,     /* nothing for the owner */
    RJQ__SSOUT_MESSAGE,      /* channel, data/len: a message on a wanted channel */
    RJQ__SSOUT_SUBSCRIBED,   /* channel: the server confirmed a wanted channel */
    RJQ__SSOUT_UNSUBSCRIBED, /* channel: the server dropped it by itself; no longer wanted */
    RJQ__SSOUT_REFUSED,      /* channel, detail (the server's words): no longer wanted */
    RJQ__SSOUT_PONG,         /* the answer to a PING */
    RJQ__SSOUT_SETUP_OK,     /* step answered */
    RJQ__SSOUT_SETUP_ERROR,  /* step refused: detail */
    RJQ__SSOUT_PROTO         /* detail: a reply out of order or of no known shape */
};

typedef struct rjq__ssout {
    int kind;
    int step;
    const char *channel; /* inside the reply */
    size_t chlen;
    const char *data;    /* inside the reply */
    size_t len;
    const char *detail;  /* inside the reply, or static */
    rjq__ssch *pinned;   /* RJQ__SSOUT_REFUSED: the entry `channel` points into */
} rjq__ssout;

void rjq__ssbook_init(rjq__ssbook *b);
void rjq__ssbook_free(rjq__ssbook *b);

rjq__ssch *rjq__ssbook_find(const rjq__ssbook *b, const char *name, size_t len);
/* The owner wants the channel (made if new): the entry, or NULL when out
 * of memory. len 1..RJQ__SSCH_MAX. */
rjq__ssch *rjq__ssbook_want(rjq__ssbook *b, const char *name, size_t len);
/* The owner no longer wants it; the entry goes once no reply for it is
 * due. Returns 1 when the server is (or will be) subscribed to it, so a
 * SUNSUBSCRIBE is due: send it (rjq__ssbook_push) before the book is
 * used again, or reset the book. */
int rjq__ssbook_unwant(rjq__ssbook *b, rjq__ssch *e);
/* 1 when the channel is wanted and no SSUBSCRIBE for it is (or will be)
 * in effect. */
int rjq__ssbook_needs_sub(const rjq__ssch *e);
/* RJQ__SSCH_* of a wanted channel, -1 when not wanted. */
int rjq__ssbook_state(const rjq__ssbook *b, const char *name, size_t len);

/* Record a command as sent (ch for SUB/UNSUB, step for SETUP); -1 when out
 * of memory (nothing recorded). */
int rjq__ssbook_push(rjq__ssbook *b, int kind, rjq__ssch *ch, int step);
/* Take back the newest record (its command could not be sent). */
void rjq__ssbook_unpush(rjq__ssbook *b);

/* Read one reply (see the top). channel, data and detail point into the
 * reply, or (RJQ__SSOUT_REFUSED: an error names no channel) into the book,
 * until rjq__ssbook_out_done: call it once the outcome was acted on
 * (unless the book was freed meanwhile). */
void rjq__ssbook_reply(rjq__ssbook *b, const redisReply *r, rjq__ssout *out);
void rjq__ssbook_out_done(rjq__ssbook *b, rjq__ssout *out);

/* The connection is gone: nothing is due, nothing is subscribed; wanted
 * channels stay wanted (to be subscribed again); the ones the server had
 * or was asked for go on the lost list (returns how many). */
size_t rjq__ssbook_reset(rjq__ssbook *b);
/* The lost list, oldest first: peek, report it, then done (the entry stays
 * valid in between, whatever the report does to the book). */
rjq__ssch *rjq__ssbook_lost_peek(const rjq__ssbook *b);
void rjq__ssbook_lost_done(rjq__ssbook *b, rjq__ssch *e);

/* Visit each channel (the callback must not add or remove any). */
void rjq__ssbook_each(rjq__ssbook *b, int (*fn)(rjq__ssch *e, void *arg), void *arg);

#endif
