/*
 * The held index, the client's side (held.c; the server's is in
 * src/lua/lib.lua): which fencing tokens a worker holds jobs of, and the
 * tokens whose jobs have all left it, to be dropped from the index
 * ("forgotten").
 *
 * Every claim call that starts jobs for a worker enters them in the
 * queue's held index under its token, "<client>.<worker>.<n>"; a push
 * message's token has no member (the server finds pushed jobs by their
 * states, lib.lua active_under), so it is never sent to be forgotten.
 * The worker keeps one record per token it learnt of, counting the jobs
 * of it it still has (running or being handed back). When the count drops
 * to zero the token is forgotten: it goes out with the queue's next
 * completion batch (complete.lua) or, failing that, in the queue's tick
 * (forget.lua). A record stays in its worker's list until its forget is
 * sent, so the tokens a worker names as known (a recovering claim) cover
 * every job it has not yet finished on the server.
 */
#ifndef RJQ_HELD_H
#define RJQ_HELD_H

#include "queue.h"

typedef struct rjq__holder rjq__holder;
typedef struct rjq__tok rjq__tok;

/* A worker's records in q; its tokens start "<client id>.<wid>.". NULL
 * when out of memory. */
rjq__holder *rjq__held_join(rjq_queue *q, unsigned wid);
/* The worker goes: its records (all with no jobs left) stay queued for
 * their forget. */
void rjq__held_leave(rjq__holder *h);
/* "<client id>.<wid>." */
const char *rjq__held_prefix(const rjq__holder *h);

/* A token the worker just learnt of (a claim reply, a push, a recovered
 * group), counted once for the arrival itself: the caller holds one
 * reference per job it keeps (rjq__tok_hold) and then drops the arrival's
 * (rjq__tok_drop). NULL when out of memory. */
rjq__tok *rjq__tok_new(rjq__holder *h, const char *tok, size_t len);
/* t is a push's: no member in the index (its record still lives until
 * a member token queued at its place would be sent). */
void rjq__tok_pushed(rjq__tok *t);
void rjq__tok_hold(rjq__tok *t);
/* One job (or the arrival) less; at zero the token is queued to forget. */
void rjq__tok_drop(rjq__tok *t);
const char *rjq__tok_str(const rjq__tok *t);

/* The worker's records, for the known list of a recovering claim. */
const rjq__tok *rjq__held_first(const rjq__holder *h);
const rjq__tok *rjq__held_next(const rjq__tok *t);

/* Tokens of q waiting to be forgotten. */
size_t rjq__held_pending(const rjq_queue *q);
/* Append up to max of them to a (a completion batch carries them) and
 * count them as sent; returns how many. */
size_t rjq__held_take(rjq_queue *q, rjq__argv *a, size_t max);

#endif /* RJQ_HELD_H */
