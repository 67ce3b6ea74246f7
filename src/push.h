/*
 * Push delivery (push.c): one module owns the client's side of it: the
 * queue's push channel and message format, the registrations of workers
 * in the queue's idle hash, and each registration's ledger of offered
 * slots. The server's side is push_to_idle in src/lua/lib.lua.
 *
 * A worker joins with two callbacks (take pushed jobs, resync) and asks
 * the ledger at each step of its claim loop; it never reads the ledger's
 * fields. The ledger's rule, with the worker's counts:
 *     running + asked + offered <= concurrency
 * where `offered` counts the registration's slots not yet used by a push
 * (it may dip below 0 while the claim that registered them is in flight).
 */
#ifndef RJQ_PUSH_H
#define RJQ_PUSH_H

#include "job.h"
#include "queue.h"

typedef struct rjq__reg rjq__reg;

typedef struct rjq__reg_ops {
    /* Jobs pushed under `epoch` arrived for this registration: take those
     * there is room for (rjq__reg_accept per job), hand back the others
     * (rjq__push_release). A job whose payload was too big to push has a
     * NULL payload: the worker reads it. */
    void (*take)(void *arg, unsigned epoch, const rjq__pushed *jobs, size_t n);
    /* The push channel was (re)subscribed: pushes may have been lost, and
     * the registration was marked for replacement: claim. */
    void (*resync)(void *arg);
    /* The job id, held under token, must stop for `reason` (a notice on
     * the push channel: "!cancel <token> <id>" from cancel.lua,
     * RJQ_EJOBCANCELED; "!timeout <token> <id>" from reclaim.lua,
     * RJQ_ETIMEDOUT). */
    void (*notice)(void *arg, int reason, const char *token, size_t toklen, const char *id,
                   size_t idlen);
} rjq__reg_ops;

/* Join q's push delivery: subscribes the queue's push channel with the
 * first registration. The registration starts out of step (the first
 * claim registers from scratch). NULL when out of memory. */
rjq__reg *rjq__push_join(rjq_queue *q, const rjq__reg_ops *ops, void *arg);
/* Leave: no more pushes are routed here (jobs still pushed to it are
 * handed back as they arrive), and the registration is dropped from the
 * idle hash (HDEL; fn(priv) gets its reply). Returns what sending it
 * returned. */
int rjq__push_leave(rjq__reg *r, rjq__reply_fn *fn, void *priv);
/* Free the registration (its worker is gone; left or not). */
void rjq__push_free(rjq__reg *r);

/* The registration's idle-hash field, "<id> <push channel>". */
const char *rjq__reg_field(const rjq__reg *r);
/* Registered slots not yet used by a push. */
int rjq__reg_offered(const rjq__reg *r);
/* Mark the registration out of step: the next claim replaces it. */
void rjq__reg_resync(rjq__reg *r);
/* The same, and pushes to it may have been lost: the next claim recovers. */
void rjq__reg_lost(rjq__reg *r);
int rjq__reg_out_of_step(const rjq__reg *r);

/* The registration's number in its queue (also the worker's, in tokens). */
unsigned rjq__reg_id(const rjq__reg *r);

/* The epoch a claim registers under: a new one when it resets (replaces
 * the registration with its unfilled slots). */
unsigned rjq__reg_claim_epoch(const rjq__reg *r, int reset);
/* Whether that claim must recover: the push channel was resubscribed
 * since the last recovering claim went out, so pushes may have been lost
 * (claim.lua returns the jobs held under the worker's tokens it does not
 * name). Only a resetting claim recovers. */
int rjq__reg_claim_recovers(const rjq__reg *r, int reset);
/* That claim went out. A recovering one makes pushes of older epochs
 * that arrive from now on ignored: its reply brings their jobs. */
void rjq__reg_claim_sent(rjq__reg *r, unsigned epoch, int reset, int recovers);
/* Its reply: status, and the slots it registered under epoch. */
void rjq__reg_claim_replied(rjq__reg *r, unsigned epoch, int status, long long registered,
                            int recovers);
/* Room for one job pushed under epoch? free_slots: the worker's free
 * slots (offered ones excluded), can_run: it runs fewer than its
 * concurrency. Accepting uses one offered slot of the current epoch. */
int rjq__reg_accept(rjq__reg *r, unsigned epoch, int free_slots, int can_run);

/* Slots offered along with a completion batch (job.c): they count as
 * registered from now on. Returns the epoch they are offered under. */
unsigned rjq__reg_offer(rjq__reg *r, int slots);
/* The offer's outcome. Returns 1 when the worker should claim instead
 * (work is waiting, or the registration is in doubt). */
int rjq__reg_offer_done(rjq__reg *r, unsigned epoch, int slots, int status, int registered);

/* Hand pushed jobs back to the queue; field: drop that registration too
 * (NULL: none). Token-checked on the server. Returns RJQ_OK when it was
 * sent (else the jobs come back when their lease ends). */
int rjq__push_release(rjq_queue *q, const char *field, const rjq__pushed *jobs, size_t n);

/* Parsing the push channel's messages (pure, for tests: unit_replies,
 * tests/fuzz). A message of jobs: its head, and its jobs in *jobs (n of
 * them, pointing into msg; free() it). A job whose payload follows as a
 * message of its own (push format 8: "><length>" in its line; h->follow
 * counts them; their messages come next on the channel, in job order)
 * has a NULL payload and its length in len (> 0; a payload left out has
 * len 0). RJQ_OK, RJQ_EPROTO when malformed
 * (a number or length out of range, bytes left over; *jobs NULL) or
 * RJQ_ENOMEM. */
typedef struct rjq__push_head {
    unsigned long long worker, epoch;
    const char *token;
    size_t toklen, n;
    int check;                /* " ?" after the deadline: an unconfirmed push */
    size_t follow;            /* jobs whose payloads follow as messages of their own */
} rjq__push_head;
int rjq__push_parse(const char *msg, size_t len, rjq__push_head *h, rjq__pushed **jobs);
/* A notice ("!cancel <token> <id>"): RJQ_OK, RJQ_EPROTO when malformed,
 * 1 when its token names no worker (not one of ours). */
typedef struct rjq__push_notice {
    const char *token, *id;
    size_t toklen, idlen;
    unsigned long long worker;
    int reason; /* RJQ_EJOBCANCELED ("!cancel") or RJQ_ETIMEDOUT ("!timeout") */
} rjq__push_notice;
int rjq__push_parse_notice(const char *msg, size_t len, rjq__push_notice *n);

#endif /* RJQ_PUSH_H */
