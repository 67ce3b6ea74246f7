/*
 * The worker layer's private header: the struct bodies and functions its
 * files share (tests/layering.sh checks that no other file includes it).
 * The layer, lowest first (each file uses only those before it; the
 * stop's recovering claim goes up through the worker's recover hook):
 *   worker_state.c   the states (rjq__w_set_state, rjq__w_set_mode,
 *                    rjq__w_job_move), counts, invariants, job handles
 *                    and handing them to the handler
 *   worker_stop.c    the stop, the end of a worker, its background requests
 *   worker_fetch.c   reading the payloads a claim or push left out
 *   worker_claim.c   the claim loop: sending claims, their replies
 *   worker_group.c   a worker of several queues: its scheduler
 *   worker_wake.c    wake-ups: doorbell, poll timer, resync
 *   worker_notice.c  notices for running jobs; timed-out jobs' slots
 *   worker_lease.c   lease extension
 *   worker_push.c    jobs pushed to it, and its slot offers
 *   worker_job.c     the job handle's public API: accessors, complete,
 *                    fail, progress (the requests formatted and sent by
 *                    job.c, which reports back through rjq__w_finish_ops)
 *   worker.c         the queue's part, the client's feature, the public API
 * worker.c's opening comment has the state machine and its invariants.
 */
#ifndef RJQ_WORKER_PRIVATE_H
#define RJQ_WORKER_PRIVATE_H

#include <stddef.h>
#include <stdint.h>

#include "held.h"
#include "push.h"
#include "upkeep.h"
#include "worker.h"

#define CLAIMS_IN_FLIGHT 2
/* Jobs per claim script call: well inside Lua's unpack limit (~8000
 * values; the claim unpacks two per job). Larger capacity takes more calls. */
#define CLAIM_MAX 1000
/* A claim carries its jobs' payloads in its reply while the worker's
 * recent payloads average below this many bytes; above, it asks for ids
 * only and reads the payloads with one plain HMGET (see worker_fetch.c).
 * Every string that enters Redis' Lua is hashed byte by byte and copied,
 * so payloads that pass through the claim script cost Redis CPU per byte;
 * the read costs a round trip. Measured (drain, one worker of 50): at 1
 * KiB the round trip cost more than it saved (0.8x the jobs/s), at 4 KiB
 * it paid (1.27x, Redis CPU -35%), at 16 KiB 1.8x (-56%). */
#define CLAIM_INLINE_MAX 2048

/* [next due, slots registered, token, deadline, then per run: CLAIM_RUN
 * values (jobs, attempt, max attempts, wait), then CLAIM_PER_JOB per job
 * of the run: id, payload] (claim.lua, its reply in runs) */
#define CLAIM_HEAD 4
#define CLAIM_RUN 4
#define CLAIM_PER_JOB 2

/* A job handle's place in its worker, changed only by rjq__w_job_move
 * (worker_state.c), which asserts the transition:
 *   NEW     -> RUNNING (handed out)
 *   RUNNING -> EXPIRED (its attempt timed out: its slot freed), LOOSE
 *   EXPIRED -> LOOSE
 *   LOOSE: none (off every list, its token let go of: the user finished it
 *          and it is freed at once (rjq__w_free_job), or its worker let go
 *          of it, w NULL, and complete/fail free it) */
typedef enum rjq__job_place {
    RJQ__JOB_NEW,             /* being made: on no list */
    RJQ__JOB_RUNNING,         /* on its worker's running list, in a slot */
    RJQ__JOB_EXPIRED,         /* on its worker's expired list, no slot */
    RJQ__JOB_LOOSE,           /* on no list any more */
} rjq__job_place;

/* The handle a handler gets. Its one owner is the worker layer: made and
 * listed by worker_state.c, finished by worker_job.c (which hands job.c
 * only its id, token and attempt), freed by rjq__w_free_job. */
struct rjq_job {
    rjq_worker *w;            /* NULL once detached (client freed): then LOOSE */
    char *id;
    char token[RJQ__TOKEN_MAX];
    const char *payload;
    size_t len;
    int attempt, max_attempts;
    long long deadline;       /* its lease's end when it was handed out, server time (ms) */
    int notice;               /* why it must stop (rjq_job_get_notice), 0: it may run on */
    rjq__job_place place;     /* which of its worker's lists holds it (rjq__w_job_move) */
    struct rjq__tok *tok;     /* its token's record (held.h), while its worker has it */
    struct rjq_job *prev, *next; /* the worker's running jobs (refused: next only) */
    /* A finish refused before anything was sent (out of memory): the
     * handle is the user's no more, LOOSE on its worker's refused list
     * until the queue's tick (or the client's destruction) calls cb with
     * this code (worker_job.c). */
    int refused;
    rjq_done_cb *cb;
    void *cb_data;
    char *own_payload;        /* payload taken from its reply (rjq__w_new_job_from), or NULL */
    uint64_t made_ms;         /* the client's clock when it was handed out (history) */
    long long wait_ms;        /* its enqueue-to-first-start time, -1: not its first run or
                                 not known (history) */
    rjq_header *headers;      /* its headers (rjq__headers_read: one allocation), or NULL */
    size_t nheaders;
    /* rjq_worker_options.on_job_finish and the handler's data, taken when
     * on_job_start was called (kept here: also after the worker is gone),
     * cleared once called */
    void (*on_finish)(rjq_job *job, int failed, long long run_ms, void *data);
    void *hook_data;
};

/* A worker's lifecycle, changed only by rjq__w_set_state:
 *   ACTIVE   -> STOPPING (stop)
 *   STOPPING -> FINAL (rjq__w_check_stopped: its last recovering claim is tried)
 *   FINAL: none (freed once nothing of it is in flight) */
typedef enum wstate {
    W_ACTIVE,   /* claims and takes pushes */
    W_STOPPING, /* stopped: no more claims, arrivals handed back */
    W_FINAL,    /* stopped, its last recovering claim sent (or not possible) */
} wstate;
/* What a worker owes its wake-ups (w->wake), changed only by rjq__w_wake,
 * which asserts each transition. Two facts in one field: whether a
 * doorbell was heard that no claim has answered yet (RUNG*), and what the
 * queue's next tick owes (an offer of freed slots, or a claim):
 *   NONE        nothing owed
 *   OFFER       slots were freed while idle: the next completion batch
 *               offers them (rjq__w_offer), else the tick claims; only
 *               when not rung and not in a group (whose scheduler claims)
 *               but a shards group (group.shards)
 *   CLAIM       claim on the next tick
 *   RUNG        doorbell heard, no claim could be sent since: the next
 *               slot freed or claim answered claims, and no offer is made
 *   RUNG_CLAIM  both: claim on the next tick, still rung until one is sent
 * Events (wevent) and where they lead:
 *   RING   (doorbell, resync)        NONE, RUNG -> RUNG; OFFER, CLAIM, RUNG_CLAIM -> RUNG_CLAIM
 *                                    (rjq__w_poke then WANTs: its claim rides the tick)
 *   FREED  (a slot freed)            rung -> RUNG_CLAIM; hungry or grouped (but shards) -> CLAIM
 *                                    (or stays); else NONE -> OFFER (OFFER, CLAIM stay)
 *   WANT   (claim on the tick)       NONE, OFFER -> CLAIM; RUNG -> RUNG_CLAIM (others stay)
 *   SENT   (a claim went out)        RUNG -> NONE; RUNG_CLAIM -> CLAIM (others stay)
 *   TICK   (the tick takes it)       OFFER, CLAIM -> NONE; RUNG_CLAIM -> RUNG (claims)
 *   OFFERED (the batch offered them) OFFER -> NONE only */
typedef enum wwake { WK_NONE, WK_OFFER, WK_CLAIM, WK_RUNG, WK_RUNG_CLAIM } wwake;
typedef enum wevent { WE_RING, WE_FREED, WE_WANT, WE_SENT, WE_TICK, WE_OFFERED } wevent;

/* A group's scheduler (g->sched), changed only by rjq__w_group_sched: is
 * rjq__w_schedule running (it is not re-entered), and is a run owed to a
 * member queue's next tick (kicked: a member's claim was answered, later
 * members may claim)?
 *   REST -KICK-> KICKED -TICK-> REST (the tick runs it)
 *   REST -ENTER-> RUNNING -LEAVE-> REST; KICKED -ENTER-> RUNNING_KICKED
 *   -LEAVE-> KICKED; RUNNING -KICK-> RUNNING_KICKED; ENTER while running
 *   is refused (no re-entry), TICK while running is illegal. */
typedef enum gsched { GS_REST, GS_KICKED, GS_RUNNING, GS_RUNNING_KICKED } gsched;
typedef enum gevent { GE_KICK, GE_TICK, GE_ENTER, GE_LEAVE } gevent;

struct group;
/* The claim loop's mode (rjq__w_set_mode): what its last claim found. IDLE ->
 * HUNGRY only while ACTIVE; HUNGRY -> IDLE always. */
typedef enum cmode { CL_IDLE, CL_HUNGRY } cmode;

/* A worker's background request (lease extension, the stop's
 * deregistration): at most one of each kind in flight (extensions: more
 * while a payload is being read, see rjq__w_on_extend_timer); its reply callback
 * gets this as its data. */
typedef struct background {
    rjq_worker *w;
    const char *what;         /* names it in error messages */
    int busy;                 /* how many in flight */
} background;

struct rjq_worker {
    rjq_queue *q;
    int reserved;             /* made by rjq__worker_reserve, not yet started */
    rjq_handler_fn *handler;
    rjq_notice_fn *on_notice;
    void (*on_job_start)(rjq_job *job, long long wait_ms, void *data);
    void (*on_job_finish)(rjq_job *job, int failed, long long run_ms, void *data);
    void *data;
    int concurrency;
    long lease_ms, poll_ms, reclaim_ms;
    wstate state;             /* (rjq__w_set_state) */
    cmode mode;               /* (rjq__w_set_mode) */
    int running;              /* handed out, not yet finished by the user, in a slot */
    int expired;              /* handed out and timed out, not yet finished: no slot */
    int finishing;            /* finish requests in flight */
    int claiming;             /* claims in flight */
    int asked;                /* jobs those claims asked for */
    int registering;          /* slots they register beyond those (their extra) */
    int fetching;             /* claimed jobs whose payloads are being read */
    int ids_only;             /* ids-only claims and fetches in flight */
    long payload_avg;         /* recent payloads' length (moving average) */
    struct fetch *fetches;    /* fetches in flight */
    struct claim_ctx *claims; /* claims in flight */
    wwake wake;               /* doorbell heard, claim or offer owed (rjq__w_wake) */
    uint64_t refused_until;   /* a claim was refused for a permission: none before */
    rjq__reg *reg;            /* push delivery registration and ledger */
    rjq__holder *held;        /* the tokens it holds jobs of */
    background extend, deregister;
    rjq_stopped_cb *stop_cb;
    void *stop_data;
    rjq_job *jobs;            /* running jobs, for lease extension */
    rjq_job *expired_jobs;    /* its expired ones (their slots freed) */
    rjq_job *refused;         /* finishes refused before sending, not yet
                               * reported (counted in finishing) */
    rjq__timer poll_timer, extend_timer;
    /* sends a stopping worker's last recovering claim (rjq__w_recover,
     * set by make_worker): the stop (worker_stop.c) is below the claim
     * loop, which calls it, so it calls the claim back through here */
    int (*recover)(rjq_worker *w);
    struct group *g;          /* its worker of several queues (NULL: none) */
    int g_want;               /* it would claim now: the group's scheduler decides */
    int freed;                /* slots freed since its wake became WK_OFFER (a
                               * shards group's member offers back those only) */
    struct rjq_worker *next;
};

/* A worker of several queues (rjq_worker_start_queues): one member worker
 * per queue, each the claim loop above, under one budget of slots (their
 * running + asked + fetching jobs together), and a scheduler that decides
 * which member claims when slots are free. The members' registrations for
 * push delivery are not in the budget (each registers what its last claim
 * left, so an idle earlier queue does not keep later ones from claiming);
 * a job pushed to a member while the budget is full goes back to the
 * queue, attempt not counted, and marks the member out of step, so it
 * claims before any later member when a slot frees (strict order). The
 * user's handle is the first member; the members are freed together once
 * every one of them has stopped. */
typedef struct group {
    int n, order, concurrency;
    /* Its members are one sharded queue's shards (shard.c's worker,
     * RJQ__WORKER_SHARDS): weighted, equal weights, and a member offers
     * back the slots its completions free to its own shard's registration
     * (rjq__w_offer), as a plain worker does, instead of claiming on the
     * next shard in turn (an empty claim per job when pushes deliver the
     * work); while another member would claim, the slot goes to the
     * scheduler instead (no shard starves). A group of different queues
     * always claims: its order decides. */
    int shards;
    gsched sched;             /* scheduler running, run owed to a tick (rjq__w_group_sched) */
    int alive;                /* members not yet stopped */
    int stopping;             /* rjq_worker_stop() was called */
    int status;               /* RJQ_ECANCELED once a member went with its client */
    rjq_stopped_cb *stop_cb;
    void *stop_data;
    rjq_worker *m[RJQ_WORKER_QUEUES_MAX];
    int weight[RJQ_WORKER_QUEUES_MAX];
    long credit[RJQ_WORKER_QUEUES_MAX]; /* smooth weighted round robin */
} group;

/* The queue's workers. */
typedef struct part {
    rjq_worker *workers;
    int ticking;              /* part_tick is running (not re-entered) */
} part;

/* Jobs a claim started without their payloads (claim.lua, ARGV 10), or
 * that were pushed without them (too big to push, see PUSH_INLINE_MAX in
 * lib.lua): the worker reads those with one HMGET of the payload column,
 * sent as the claim's reply or the push comes in, and starts them when it
 * is answered. They count as `fetching` meanwhile; their leases are
 * extended as running jobs' are (rjq__w_on_extend_timer), so a read slower than
 * the lease still runs them once; their token is held (a recovering claim
 * leaves it alone), and a cancel notice for one of them
 * (rjq__w_notice) marks it, so it is not started. A job whose payload is gone by then (cancelled and
 * deleted, or its record deleted behind rjq's back) is not started either:
 * its lease ends it. A fetch that fails hands its jobs back (token-checked,
 * attempt undone), as does a worker that is stopping.
 * Order: while an ids-only claim or a fetch is in flight, every claim asks
 * for ids only (w->ids_only), so that no claim's jobs overtake those of an
 * earlier one by skipping its fetch. */
typedef struct fetch_job {
    const char *id;
    size_t idlen;
    int attempt, max_attempts;
    int cancelled;            /* a cancel notice came for it meanwhile */
    const char *payload;      /* a checked fetch's: the pushed payload (NULL: none) */
    size_t len;
    long long wait_ms;        /* rjq__pushed's */
    const char *headers;      /* rjq__pushed's (a copy) */
    size_t hlen;
} fetch_job;

/* A lease check is a fetch too (check set): the jobs of an unconfirmed
 * push (rjq__pushed.check) are started only once one HMGET of the state
 * column shows each still "active <attempt> <token>" with the push's
 * token; a job whose state says otherwise is not ours (nothing to hand
 * back) and is not started; those that pass start with their pushed
 * payload, or have it read by a plain fetch. */
typedef struct fetch {
    rjq_worker *w;
    rjq__tok *tok;
    long long deadline;
    long long until;          /* its lease's end, by the extensions sent (server ms) */
    struct fetch *prev, *next; /* the worker's fetches in flight */
    size_t n;
    int check;                /* a lease check (reads states, not payloads) */
    fetch_job jobs[];         /* then their ids (and a check's payloads) */
} fetch;

typedef struct claim_ctx {
    rjq_worker *w;
    int asked;
    int extra;                /* slots it registers beyond those it leaves unfilled
                               * (a shards group's member: rjq__w_claim_up_to) */
    unsigned epoch;
    int recovers;             /* it recovers jobs pushed unheard */
    int ids_only;             /* it asked for ids only (payloads: fetch) */
    char token[64];
    long long until;          /* its jobs' lease end, by the extensions sent (server ms) */
    struct claim_ctx *prev, *next; /* the worker's claims in flight */
} claim_ctx;

/* The worker's lists of fetches and claims in flight (prev/next links,
 * newest first): x onto list *head, x off it. */
#define RJQ__W_LIST_PUSH(head, x)                                                          \
    do {                                                                                  \
        (x)->prev = NULL;                                                                 \
        (x)->next = *(head);                                                              \
        if (*(head)) (*(head))->prev = (x);                                               \
        *(head) = (x);                                                                    \
    } while (0)
#define RJQ__W_LIST_UNLINK(head, x)                                                        \
    do {                                                                                  \
        if ((x)->prev) (x)->prev->next = (x)->next;                                       \
        else *(head) = (x)->next;                                                         \
        if ((x)->next) (x)->next->prev = (x)->prev;                                       \
    } while (0)

static inline rjq_client *client_of(const rjq_worker *w) {
    return rjq_queue_get_client(w->q);
}

/* ---- worker_state.c ---- */
/* Its slots in use: the group's (registered ones excluded), its own
 * free ones (registered ones taken), the group's free ones, and what it
 * may take now (the smaller of its own and its group's). */
int rjq__w_group_used(const group *g);
int rjq__w_own_free(const rjq_worker *w);
int rjq__w_group_free(const group *g);
int rjq__w_free_slots(const rjq_worker *w);
/* Assert w's invariants (worker.c's opening comment). */
void rjq__w_check(const rjq_worker *w);
void rjq__w_set_state(rjq_worker *w, wstate to);
void rjq__w_set_mode(rjq_worker *w, cmode to);
void rjq__w_job_move(rjq_worker *w, rjq_job *j, rjq__job_place to);
/* A running job made from d (tok: its token's record, which it holds);
 * NULL when out of memory. */
rjq_job *rjq__w_new_job(rjq_worker *w, const rjq__pushed *d, rjq__tok *tok);
/* The same, taking the payload over from `from` (the reply string d's
 * payload points into: its str is set to NULL, hiredis frees nothing of
 * it) instead of copying it: one copy less of a big payload. */
rjq_job *rjq__w_new_job_from(rjq_worker *w, const rjq__pushed *d, rjq__tok *tok, redisReply *from);
/* Off its worker's lists (LOOSE), its token let go of. */
void rjq__w_unlink_job(rjq_worker *w, rjq_job *job);
/* Free a handle that is LOOSE (asserted: on no list, no token held). */
void rjq__w_free_job(rjq_job *job);
/* Off its worker's lists and freed (a job never handed to the user, or
 * handed back while the client closes). */
void rjq__w_drop_job(rjq_worker *w, rjq_job *job);
void rjq__w_let_go(rjq_worker *w);
rjq__pushed rjq__w_job_ref(const rjq_job *j);
void rjq__w_run_jobs(rjq_worker *w, rjq_job **jobs, size_t n, long long until);
/* Change w's wake state by event ev (wwake has the table); TICK returns
 * 1 when the tick owes a claim (or an offer nobody took), else 0. */
int rjq__w_wake(rjq_worker *w, wevent ev);
/* A doorbell was heard that no claim has answered yet. */
int rjq__w_rung(const rjq_worker *w);
/* Change g's scheduler state (gsched has the table); ENTER and TICK
 * return 1 when the run may go ahead / was owed, else 0. */
int rjq__w_group_sched(group *g, gevent ev);
/* Claim on the queue's next tick. */
void rjq__w_want_claim(rjq_worker *w);
/* A slot of w was freed: claim or offer it on the queue's next tick. */
void rjq__w_slot_freed(rjq_worker *w);

/* ---- worker_stop.c ---- */
void rjq__w_detach(rjq_worker *w);
/* Finish a stop once nothing of w is in flight (may free w). */
void rjq__w_check_stopped(rjq_worker *w);
void rjq__w_destroy(rjq_worker *w);
/* The reply callback of a background request (priv: its background). */
void rjq__w_background_done(rjq_client *c, int status, redisReply *r, void *priv);
void rjq__w_stop(rjq_worker *w, rjq_stopped_cb *cb, void *data);
size_t rjq__w_hand_back(rjq_worker *w);

/* ---- worker_fetch.c ---- */
/* Read the payloads of the n jobs in d (all under tok); 0 when sent. */
int rjq__w_fetch(rjq_worker *w, rjq__tok *tok, const rjq__pushed *d, size_t n);
void rjq__w_fetch_notice(rjq_worker *w, const char *token, size_t toklen, const char *id,
                         size_t idlen);

/* ---- worker_claim.c ---- */
int rjq__w_send_claim(rjq_worker *w, int want, int extra, int reset);
/* A stopping worker's last recovering claim (w->recover). */
int rjq__w_recover(rjq_worker *w);
int rjq__w_claim_chunk(const rjq_worker *w);
void rjq__w_claim_up_to(rjq_worker *w, int cap);

/* ---- worker_group.c ---- */
void rjq__w_schedule(group *g);
/* Claim: a member asks its group's scheduler. */
void rjq__w_claim(rjq_worker *w);
/* A member of g other than `but` would claim now and has slots of its own
 * to claim with (the scheduler's tests). */
int rjq__w_group_wants(const group *g, const rjq_worker *but);

/* ---- worker_wake.c ---- */
void rjq__w_poke(rjq_worker *w);
void rjq__w_resync(rjq_worker *w);
void rjq__w_on_doorbell(rjq_client *c, const char *channel, const char *msg, size_t len,
                        void *arg);
void rjq__w_on_poll_timer(rjq__timer *t);

/* ---- worker_notice.c ---- */
void rjq__w_expire(rjq_worker *w, rjq_job *j);
void rjq__w_notice(rjq_worker *w, int reason, const char *token, size_t toklen, const char *id,
                   size_t idlen);

/* ---- worker_lease.c ---- */
void rjq__w_on_extend_timer(rjq__timer *t);

/* ---- worker_push.c ---- */
extern const rjq__reg_ops rjq__w_reg_ops;
/* (rjq__finish_ops, job.h) w offers its free slots with a completion. */
int rjq__w_offer(rjq_worker *w, rjq__offer *o);
void rjq__w_offer_done(const rjq__offer *o, int status, int registered);

/* ---- worker_job.c ---- */
/* How job.c reports the finish requests of w's jobs. */
extern const rjq__finish_ops rjq__w_finish_ops;
/* Report w's refused finishes (their callbacks, each once), free those
 * handles: the queue's tick, and the client's destruction before w goes.
 * The callbacks may free the client: touch nothing after a closing one. */
void rjq__w_report_refused(rjq_worker *w);

#endif /* RJQ_WORKER_PRIVATE_H */
