/*
 * Awaiting job outcomes (DESIGN.md section 6).
 *
 * Every client has one reply channel, "<prefix>:reply:<random>:framed", on
 * its subscriber connection (":framed": scripts send it the outcomes of
 * one call in one message; lib.lua, notify). An await is registered in a table keyed by its
 * job key. The protocol leaves no window in which an outcome is missed:
 *
 * - rjq_enqueue_await sends its enqueue only after the reply channel's
 *   subscription is confirmed; the job records the channel and the script
 *   that finishes it publishes there. An outcome that arrives before the
 *   enqueue reply (a very fast job) is kept in the `early` list while
 *   enqueues are in flight and consumed when the await registers; so is
 *   progress, so that progress reported before the outcome reaches
 *   on_progress before the outcome reaches the callback, whichever of the
 *   enqueue's reply and the messages the loop reads first.
 * - rjq_queue_await (a job enqueued by anyone) runs the watch script after the
 *   subscription is confirmed: it answers from the stored state, or adds
 *   the channel to the job's watchers, atomically.
 * - After the subscriber connection comes back, every pending await is
 *   watched again (one pipelined batch of script calls, grouped by queue),
 *   so outcomes published while it was down are read from the job hashes.
 *   An enqueue whose reply arrives after such a resubscription watches its
 *   job right away for the same reason.
 * - The early list is capped (await_early.c): an enqueue whose reply
 *   comes after the cap pushed outcomes out reads its job's state too.
 *
 * On a Redis Cluster a script may publish only in its own slot (SPUBLISH),
 * so the reply channel is one per queue awaited on,
 * "<prefix>:{Q}:reply:<random>:framed" (the same random part), each
 * subscribed on the sharded link of its queue's master, each with its own
 * confirmations: the rules above hold per channel (an await waits for its
 * queue's channel, a resubscription re-reads the awaits of that channel).
 * Until the client knows which it is (pubsub: the command connection's
 * first set-up), an await waits without a channel (AW_WAIT_SUB, or
 * watching with its watch held) and gets one when the command connection
 * is ready.
 *
 * An await may be referenced by requests in flight and by loops that run
 * callbacks (`inflight`, its pins); it is freed once it has ended and
 * nothing refers to it. A loop over awaits that runs user code pins them
 * all first: a callback may cancel any await.
 *
 * The feature's state lives with the client (registered with the first
 * await): the reply channel, the table of awaits by job key
 * (await_table.c), the early list, and every live await.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "await.h"
#include "await_early.h"
#include "await_table.h"
#include "enqueue.h"
#include "headers.h"

#define WATCH_BATCH 1000
#define RETRY_MS 100 /* a watch pass that ran out of memory tries again */

/* An await's state, changed only by set_state, which asserts the
 * transition:
 *   WAIT_SUB   -> ENQUEUEING (its enqueue went out), WATCHING (an await by
 *                 id, its key known), DONE
 *   ENQUEUEING -> WATCHING (the enqueue's reply named the job), DONE
 *   WATCHING   -> DONE
 *   DONE: none (freed once nothing pins it) */
typedef enum aw_state {
    AW_WAIT_SUB,   /* made: waits for the reply channel's subscription (an
                      enqueue_await holds its job until then) */
    AW_ENQUEUEING, /* its enqueue is in flight: the job key is not known yet */
    AW_WATCHING,   /* in the table by its job key: the outcome may come */
    AW_DONE,       /* its callback ran (resolve) */
} aw_state;

struct awaits;

/* A reply channel: the client's one (standalone), or a queue's (cluster). */
typedef struct rchan {
    struct awaits *s;
    struct rchan *next;
    int listening;             /* its listener is registered */
    unsigned generation;       /* subscription confirmations so far */
    char name[];
} rchan;

/* The client's awaits (the feature's state). */
typedef struct awaits {
    rjq_client *c;
    char channel[256];         /* this client's reply channel (prefix <= 200) */
    char hex[32];              /* its random part */
    rchan *main;               /* that channel's listener (standalone) */
    rchan *queues;             /* a channel per queue awaited on (cluster) */
    rjq__table table;          /* awaits with a known job key, by key */
    struct rjq_await *all;     /* every live await */
    size_t count;
    size_t enqueues_inflight;  /* enqueue_await requests in flight */
    rjq__early_list early;     /* outcomes that beat their enqueue reply */
    rjq__timer retry;          /* a watch pass that ran out of memory */
    /* rjq_queue_await()s of this loop pass (pinned), watched together at
     * its end: one script call per queue, not one per await */
    struct rjq_await **fresh;
    size_t nfresh, capfresh;
    rjq__timer tick;
} awaits;

struct rjq_await {
    rjq_client *c;
    awaits *s;
    rjq_queue *q;
    const rjq__await_kind *kind; /* NULL: a job's await; else another feature's (rjq__await_other) */
    rchan *rc;               /* its reply channel; NULL until the mode is known */
    aw_state state;          /* (set_state) */
    int inflight;            /* pins: requests and loops that point at it */
    int need_watch;          /* watch once the subscription is confirmed */
    int timed_out;           /* its timeout came before its enqueue's reply */
    int reserved;            /* rjq__await_reserve: its queue's layout not known yet */
    unsigned sent_gen;       /* subscription generation when enqueued */
    unsigned long long sent_drops; /* early outcomes dropped when enqueued */
    rjq__tentry entry;       /* in the table; entry.key is key */
    char *key;               /* job key; NULL until the id is known */
    const char *id;          /* the id inside key */
    rjq_await_cb *cb;
    void *data;
    rjq_progress_cb *on_progress;
    rjq__timer timer;
    /* an enqueue waiting for the subscription: copies of the inputs */
    char *payload;
    size_t len;
    rjq_job_options opts;
    int has_opts;
    /* the job's headers for its outcome: the ones it was enqueued with
     * (opts.headers, kept after the enqueue went out), or as a watch
     * reply read them (read: owned) */
    const rjq_header *headers;
    size_t nheaders;
    rjq_header *read;
    struct rjq_await *prev, *next;  /* every live await */
};

static void on_reply_message(rjq_client *c, const char *ch, const char *msg, size_t len, void *arg);
static void send_watch(rjq_client *c, rjq_await **list, size_t n);

/* ---- lifetime --------------------------------------------------------- */

static int legal(aw_state from, aw_state to) {
    switch (from) {
    case AW_WAIT_SUB:
        return to == AW_ENQUEUEING || to == AW_WATCHING || to == AW_DONE;
    case AW_ENQUEUEING:
        return to == AW_WATCHING || to == AW_DONE;
    case AW_WATCHING:
        return to == AW_DONE;
    default:
        return 0;
    }
}

/* Move a to state `to`, asserting the transition and what the new state
 * says of the await. */
static void set_state(rjq_await *a, aw_state to) {
    RJQ_ASSERT(legal(a->state, to));
    a->state = to;
    switch (to) {
    case AW_ENQUEUEING: /* its job went to the enqueue (no copy kept); that request pins it */
        RJQ_ASSERT(a->payload == NULL && a->key == NULL && a->inflight > 0);
        break;
    case AW_WATCHING: /* findable by its job key; nothing held to send */
        RJQ_ASSERT(a->key != NULL && a->entry.key == a->key && a->id != NULL);
        RJQ_ASSERT(a->payload == NULL);
        break;
    default:
        break;
    }
}

static void maybe_free(rjq_await *a) {
    RJQ_ASSERT(a->inflight >= 0);
    if (a->state != AW_DONE || a->inflight > 0) return;
    /* (its queue handle, held by new_await, may go now; not during client
     * destruction: the queues may be freed before the awaits) */
    if (!rjq__closing(a->c)) rjq__queue_release(a->q);
    rjq__timer_teardown(a->c, &a->timer);
    free(a->key);
    free(a->payload);
    free((char *)a->opts.id);
    free((void *)a->opts.headers);
    free(a->read);
    free(a);
}

/* Pins: a request or a loop that will look at the await again. A reply
 * handler unpins last, after anything that may have resolved the await. */
static void pin(rjq_await *a) {
    a->inflight++;
}

static void unpin(rjq_await *a) {
    RJQ_ASSERT(a->inflight > 0); /* (each unpin matches a pin) */
    a->inflight--;
    maybe_free(a);
}

/* The job an await still holds (its enqueue waits for the reply channel). */
static rjq_enqueue_item held_item(const rjq_await *a) {
    return (rjq_enqueue_item){sizeof(rjq_enqueue_item), a->payload, a->len,
                              a->has_opts ? &a->opts : NULL};
}

/* End the await: its callback runs exactly once, here. */
static void resolve(rjq_await *a, int status, const void *result, size_t rlen, const char *error) {
    rjq_client *c = a->c;
    awaits *s = a->s;
    if (a->state == AW_DONE) return;
    if (a->state == AW_WAIT_SUB && a->payload && !rjq__closing(c)) {
        /* Cancelled or timed out before its enqueue went out: the job is
         * still the caller's to have, only nobody awaits it any more. */
        rjq_enqueue_item it = held_item(a);
        rjq__enqueue_add(a->q, &it, NULL, NULL, NULL);
    }
    int was_indexed = a->state == AW_WATCHING;
    set_state(a, AW_DONE);
    rjq__timer_stop(c, &a->timer);
    if (was_indexed) rjq__table_remove(&s->table, &a->entry);
    /* a live await is in the client's list */
    RJQ_ASSERT(s->count > 0 && (a->prev ? a->prev->next == a : s->all == a));
    RJQ_ASSERT(a->next == NULL || a->next->prev == a);
    if (a->prev) a->prev->next = a->next;
    else s->all = a->next;
    if (a->next) a->next->prev = a->prev;
    s->count--;
    rjq_outcome o = {a->id, result, rlen, error, a->headers, a->nheaders};
    if (a->cb) a->cb(c, status, a->id ? &o : NULL, a->data);
    maybe_free(a);
}

const char *rjq_outcome_get_header(const rjq_outcome *o, const char *key) {
    for (size_t i = 0; o && key && i < o->nheaders; i++)
        if (strcmp(o->headers[i].key, key) == 0) return o->headers[i].value;
    return NULL;
}

int rjq_outcome_get_header_at(const rjq_outcome *o, size_t i, const char **key,
                              const char **value) {
    if (o == NULL || i >= o->nheaders) return 0;
    if (key) *key = o->headers[i].key;
    if (value) *value = o->headers[i].value;
    return 1;
}

static int try_enqueue(rjq_await *a);
static int set_key(rjq_await *a, const char *id, size_t idlen);

/* How long past its timeout an await waits for its enqueue's reply: the
 * client's command timeout (a request not re-sent has its answer by then),
 * 10 s when that is off. */
static uint64_t enqueue_grace_ms(const rjq_client *c) {
    long ct = rjq__client_command_timeout_ms(c);
    return (uint64_t)(ct > 0 ? ct : 10000);
}

/* A short timeout does not hide an enqueue's answer: an await whose
 * enqueue is out (or still held for the subscription: it is sent now)
 * waits for the reply, up to the grace above, and ends with the id (or
 * the enqueue's error, RJQ_EFULL say). An enqueue with an id is re-sent
 * across reconnects, so with Redis away its reply may never come in time:
 * the await then ends at the grace's end, RJQ_ETIMEDOUT with the id (the
 * job's fate unknown: the enqueue goes on). */
static void on_timeout(rjq__timer *t) {
    rjq_await *a = t->owner;
    if (!a->timed_out &&
        (a->state == AW_ENQUEUEING || (a->state == AW_WAIT_SUB && a->payload &&
                                       !rjq__closing(a->c) && try_enqueue(a) == RJQ_OK))) {
        a->timed_out = 1;
        rjq__timer_start(a->c, &a->timer, enqueue_grace_ms(a->c));
    } else {
        if (a->key == NULL && a->opts.id) (void)set_key(a, a->opts.id, strlen(a->opts.id));
        resolve(a, RJQ_ETIMEDOUT, NULL, 0, NULL);
    }
}

static rjq_await *new_await(awaits *s, rjq_queue *q, const rjq_await_options *aw,
                            rjq_await_cb *cb, void *data) {
    rjq_await *a = calloc(1, sizeof *a);
    if (a == NULL) return NULL;
    rjq_client *c = s->c;
    if (rjq__timer_setup(c, &a->timer, on_timeout, a) != RJQ_OK) {
        free(a);
        return NULL;
    }
    a->c = c;
    a->s = s;
    a->q = q;
    rjq__queue_hold(q); /* released when a is freed (maybe_free) */
    a->cb = cb;
    a->data = data;
    a->on_progress = aw ? aw->on_progress : NULL;
    a->next = s->all;
    if (a->next) a->next->prev = a;
    s->all = a;
    s->count++;
    if (aw && aw->timeout_ms > 0) rjq__timer_start(c, &a->timer, (uint64_t)aw->timeout_ms);
    return a;
}

/* Undo new_await for a call that fails synchronously (no callback). */
static void discard(rjq_await *a) {
    a->cb = NULL;
    free(a->payload); /* nothing of a failed call is sent */
    a->payload = NULL;
    resolve(a, RJQ_ECANCELED, NULL, 0, NULL);
}

static int set_key(rjq_await *a, const char *id, size_t idlen) {
    size_t plen;
    if (a->kind) {
        a->key = a->kind->key(a->q, id, idlen, &plen);
    } else {
        a->key = rjq__job_key(a->q, id, idlen);
        rjq__queue_key(a->q, RJQ__K_JOB, &plen);
    }
    if (a->key == NULL) return RJQ_ENOMEM;
    a->id = a->key + plen;
    a->entry.key = a->key;
    return RJQ_OK;
}

/* Make the await findable by its job key and wait for the outcome. */
static int start_watching(rjq_await *a) {
    if (rjq__table_add(&a->s->table, &a->entry) != 0) return RJQ_ENOMEM;
    set_state(a, AW_WATCHING);
    return RJQ_OK;
}

/* ---- the reply channel ------------------------------------------------- */

static int confirmed(const rchan *r) {
    return r && r->listening && rjq__channel_confirmed(r->s->c, r->name);
}

static void on_reply_refused(rjq_client *c, const char *ch, const char *err, void *arg);

static rchan *rchan_new(awaits *s, const char *name) {
    size_t len = strlen(name);
    rchan *r = calloc(1, sizeof *r + len + 1);
    if (r == NULL) return NULL;
    r->s = s;
    memcpy(r->name, name, len + 1);
    return r;
}

/* The reply channel of an await on q: the client's (standalone), q's
 * (cluster: made on first use); NULL with RJQ_OK: the mode is not known
 * yet. */
static int rchan_for(awaits *s, rjq_queue *q, rchan **out) {
    *out = NULL;
    int sharded = rjq__pubsub_sharded(s->c);
    if (sharded < 0) return RJQ_OK;
    if (!sharded) {
        *out = s->main;
        return RJQ_OK;
    }
    size_t plen;
    const char *job = rjq__queue_key(q, RJQ__K_JOB, &plen); /* "<prefix>:{Q}:job:" */
    RJQ_ASSERT(plen >= 4);
    char name[512];
    int n = snprintf(name, sizeof name, "%.*sreply:%s:framed", (int)(plen - 4), job, s->hex);
    if (n < 0 || (size_t)n >= sizeof name) return RJQ_EINVAL;
    for (rchan *r = s->queues; r; r = r->next)
        if (strcmp(r->name, name) == 0) {
            *out = r;
            return RJQ_OK;
        }
    rchan *r = rchan_new(s, name);
    if (r == NULL) return RJQ_ENOMEM;
    r->next = s->queues;
    s->queues = r;
    *out = r;
    return RJQ_OK;
}

/* Listen on r. The client-wide channel is a classic one: subscribed at
 * once, also while the mode is not known (a session refused then reaches
 * the awaits waiting for it); on a cluster its listener goes once the
 * mode is known (awaits_ready). */
static int ensure_listening(rchan *r) {
    if (r == NULL || r->listening) return RJQ_OK;
    rjq_client *c = r->s->c;
    int rc = r == r->s->main
                 ? rjq__subscribe_classic(c, r->name, on_reply_message, on_reply_refused, r)
                 : rjq__subscribe_checked(c, r->name, on_reply_message, on_reply_refused, r);
    if (rc == RJQ_OK) r->listening = 1;
    return rc;
}

/* Give a new await its channel (when the mode is known) and listen. */
static int attach(awaits *s, rjq_await *a) {
    int rc = rchan_for(s, a->q, &a->rc);
    if (rc == RJQ_OK && a->rc == NULL) return ensure_listening(s->main); /* (see above) */
    return rc == RJQ_OK ? ensure_listening(a->rc) : rc;
}

/* The server refused the reply channel (an ACL without +subscribe or the
 * channels "<prefix>:reply:*"; or the whole subscriber session): no
 * outcome can reach an await, so every await ends with RJQ_EAUTH (the
 * client's errmsg has the server's words). An enqueue still held for the
 * subscription is not sent: its caller is told it failed. The listener
 * goes: the next await subscribes the channel again (the ACL may have been
 * fixed meanwhile; a refusal again costs one reconnect of the subscriber
 * connection, spaced by its backoff). */
static void on_reply_refused(rjq_client *c, const char *ch, const char *err, void *arg) {
    rchan *r = arg;
    awaits *s = r->s;
    (void)ch, (void)err;
    rjq__unsubscribe(c, r->name, r);
    r->listening = 0;
    /* the awaits of now on this channel (a callback may make new ones:
     * they subscribe again), pinned: a callback may cancel any of them */
    size_t n = 0, k = 0;
    /* (the client-wide channel speaks for the awaits without one yet) */
#define OF_R(a) ((a)->rc == r || (r == s->main && (a)->rc == NULL))
    for (rjq_await *a = s->all; a; a = a->next) n += OF_R(a);
    rjq_await **snap = n ? malloc(n * sizeof *snap) : NULL;
    if (snap == NULL) { /* none, or out of memory: end them one by one */
        for (rjq_await *a = s->all; n > 0 && a && !rjq__closing(c);) {
            if (!OF_R(a)) {
                a = a->next;
                continue;
            }
            free(a->payload);
            a->payload = NULL;
            resolve(a, RJQ_EAUTH, NULL, 0, NULL);
            a = s->all;
            n--;
        }
        return;
    }
    for (rjq_await *a = s->all; a && k < n; a = a->next)
        if (OF_R(a)) pin(snap[k++] = a);
#undef OF_R
    for (size_t i = 0; i < k; i++) {
        rjq_await *a = snap[i];
        if (a->state != AW_DONE && !rjq__closing(c)) {
            free(a->payload);
            a->payload = NULL;
            resolve(a, RJQ_EAUTH, NULL, 0, NULL);
        }
    }
    for (size_t i = 0; i < k; i++) unpin(snap[i]);
    free(snap);
}

static void on_big_result(rjq_client *c, int status, redisReply *r, void *priv) {
    rjq_await *a = priv;
    (void)c;
    if (status == RJQ_OK && r->type == REDIS_REPLY_NIL) status = RJQ_ENOTFOUND; /* already deleted by retention */
    if (status == RJQ_OK && r->type != REDIS_REPLY_STRING) status = RJQ_EPROTO;
    if (status == RJQ_ECONN || status == RJQ_ETIMEDOUT)
        a->need_watch = 1; /* lost with the connection: read it again then */
    else if (status == RJQ_OK) resolve(a, RJQ_OK, r->str, r->len, NULL);
    else resolve(a, status, NULL, 0, NULL);
    unpin(a);
}

/* Apply one outcome message (kind, body) to await a. */
static void deliver(rjq_await *a, const char *kind, const char *body, size_t len) {
    rjq_client *c = a->c;
    if (strcmp(kind, "completed") == 0) {
        resolve(a, RJQ_OK, body, len, NULL);
    } else if (strcmp(kind, "dead") == 0) {
        resolve(a, RJQ_EJOBDEAD, NULL, 0, body);
    } else if (strcmp(kind, "cancelled") == 0) {
        resolve(a, RJQ_EJOBCANCELED, NULL, 0, NULL);
    } else if (strcmp(kind, "progress") == 0) {
        if (a->on_progress) a->on_progress(c, a->id, body, len, a->data);
    } else if (strcmp(kind, "big") == 0) {
        size_t klen;
        const char *key = rjq__queue_key(a->q, RJQ__K_RESULT, &klen);
        const char *argv[3] = {"HGET", key, a->id};
        size_t lens[3] = {4, klen, strlen(a->id)};
        if (rjq__command(c, 0, on_big_result, a, 3, argv, lens) == RJQ_OK) pin(a);
        else resolve(a, RJQ_ENOMEM, NULL, 0, NULL);
    }
}

/* Split "kind\nkey\nbody" (the message form of older rjq scripts). */
int rjq__await_parse_message(const char *msg, size_t len, char *kind, size_t kindcap,
                             const char **key, size_t *klen, const char **body, size_t *blen) {
    const char *nl1 = memchr(msg, '\n', len);
    if (nl1 == NULL || (size_t)(nl1 - msg) >= kindcap) return -1;
    const char *nl2 = memchr(nl1 + 1, '\n', len - (size_t)(nl1 + 1 - msg));
    if (nl2 == NULL) return -1;
    memcpy(kind, msg, (size_t)(nl1 - msg));
    kind[nl1 - msg] = '\0';
    *key = nl1 + 1;
    *klen = (size_t)(nl2 - *key);
    *body = nl2 + 1;
    *blen = len - (size_t)(*body - msg);
    return 0;
}

/* A decimal length at *p (up to end), followed by `stop`; moves *p past it. */
static int parse_len(const char **p, const char *end, char stop, size_t *out) {
    size_t v = 0;
    const char *q = *p;
    if (q == end || *q < '0' || *q > '9') return -1;
    for (; q < end && *q >= '0' && *q <= '9'; q++) {
        if (v > (SIZE_MAX - 9) / 10) return -1;
        v = v * 10 + (size_t)(*q - '0');
    }
    if (q == end || *q != stop) return -1;
    *p = q + 1;
    *out = v;
    return 0;
}

/* One outcome of a framed message, "<kind> <klen> <blen>\n<key><body>",
 * at msg (len bytes left). Returns the bytes it takes, 0 when malformed.
 * A kind too long for kindcap (none this build knows) comes back as "",
 * so the outcomes after it in the message are still read. */
size_t rjq__await_parse_framed(const char *msg, size_t len, char *kind, size_t kindcap,
                               const char **key, size_t *klen, const char **body, size_t *blen) {
    const char *end = msg + len, *p;
    const char *sp = memchr(msg, ' ', len);
    if (sp == NULL) return 0;
    p = sp + 1;
    if (parse_len(&p, end, ' ', klen) != 0 || parse_len(&p, end, '\n', blen) != 0) return 0;
    if (*klen > (size_t)(end - p) || *blen > (size_t)(end - p) - *klen) return 0;
    size_t kindlen = (size_t)(sp - msg) < kindcap ? (size_t)(sp - msg) : 0;
    memcpy(kind, msg, kindlen);
    kind[kindlen] = '\0';
    *key = p;
    *body = p + *klen;
    return (size_t)(*body + *blen - msg);
}

static void on_confirmed(rchan *r);

static rjq_await *of_entry(rjq__tentry *e) {
    return (rjq_await *)((char *)e - offsetof(rjq_await, entry));
}

/* One outcome (kind, body) of the job named key: to every await of it, or
 * kept for an enqueue whose reply has not come yet. */
static void on_outcome(awaits *s, const char *kind, const char *key, size_t klen,
                       const char *body, size_t blen) {
    rjq_client *c = s->c;
    char small[512], *keybuf = small;
    if (klen >= sizeof small && (keybuf = malloc(klen + 1)) == NULL) return;
    memcpy(keybuf, key, klen);
    keybuf[klen] = '\0';
    /* Pin every await of this key first: a callback may end or cancel
     * others, and a pinned await is not freed under us. */
    rjq_await *stack[8], **hits = stack;
    size_t n = 0, cap = 8;
    for (rjq__tentry *e = rjq__table_chain(&s->table, keybuf); e; e = e->hnext) {
        if (strcmp(e->key, keybuf) != 0) continue;
        if (n == cap) {
            rjq_await **grown = malloc(2 * cap * sizeof *grown);
            if (grown == NULL) break;
            memcpy(grown, hits, n * sizeof *hits);
            if (hits != stack) free(hits);
            hits = grown;
            cap *= 2;
        }
        pin(of_entry(e));
        hits[n++] = of_entry(e);
    }
    for (size_t i = 0; i < n; i++) {
        if (hits[i]->state == AW_WATCHING && !rjq__closing(c)) deliver(hits[i], kind, body, blen);
        unpin(hits[i]);
    }
    if (hits != stack) free(hits);
    /* (progress too: what was reported before the outcome is delivered
     * before it, as when the enqueue's reply comes first) */
    if (n == 0 && s->enqueues_inflight > 0)
        rjq__early_keep(&s->early, keybuf, klen, kind, body, blen);
    if (keybuf != small) free(keybuf);
}

/* A message on the reply channel: the outcomes of one script call, framed
 * ("+" then each, see rjq__await_parse_framed and notify in lib.lua), or
 * one outcome in the older form. */
static void on_reply_message(rjq_client *c, const char *ch, const char *msg, size_t len,
                             void *arg) {
    rchan *r = arg;
    awaits *s = r->s;
    char kind[16];
    const char *key, *body;
    size_t klen, blen;
    (void)ch;
    if (msg == NULL) {
        on_confirmed(r);
        return;
    }
    if (len > 0 && msg[0] == '+') {
        /* a callback that freed the client ends the message: the free
         * cancels the awaits not told yet */
        for (size_t off = 1, used; off < len && rjq__accepting(c); off += used) {
            used = rjq__await_parse_framed(msg + off, len - off, kind, sizeof kind, &key, &klen,
                                           &body, &blen);
            if (used == 0) return;
            if (kind[0] != '\0') on_outcome(s, kind, key, klen, body, blen);
        }
        return;
    }
    if (rjq__await_parse_message(msg, len, kind, sizeof kind, &key, &klen, &body, &blen) == 0)
        on_outcome(s, kind, key, klen, body, blen);
}

/* ---- enqueue + await --------------------------------------------------- */

static void on_enqueued(rjq_client *c, int status, const char *id, size_t idlen, int existed,
                        void *priv) {
    rjq_await *a = priv;
    awaits *s = a->s;
    int outcome = 0;
    rjq__early *e;
    RJQ_ASSERT(s->enqueues_inflight > 0 && a->inflight > 0); /* try_enqueue counted and pinned it */
    s->enqueues_inflight--;
    if (a->state == AW_DONE) goto out;
    RJQ_ASSERT(a->state == AW_ENQUEUEING); /* (only this reply moves it on) */
    if (status == RJQ_OK) status = set_key(a, id, idlen);
    if (status == RJQ_OK) status = start_watching(a);
    if (status != RJQ_OK) {
        resolve(a, status, NULL, 0, NULL);
        goto out;
    }
    /* what beat this reply, in the order it came: progress, then at most
     * one outcome */
    while (!outcome && a->state == AW_WATCHING && !rjq__closing(c) &&
           (e = rjq__early_take(&s->early, a->key)) != NULL) {
        outcome = strcmp(e->kind, "progress") != 0;
        deliver(a, e->kind, e->body, e->len);
        rjq__early_free(e);
    }
    if (outcome || a->state != AW_WATCHING || rjq__closing(c)) {
        /* answered (or being: a big result read), or ended by a callback */
    } else if (a->timed_out) {
        resolve(a, RJQ_ETIMEDOUT, NULL, 0, NULL); /* (with the id now) */
    } else if (existed || a->sent_gen != a->rc->generation || a->sent_drops != s->early.dropped) {
        /* an existing id (not ours to be notified of), a resubscription
         * since the enqueue went out, or outcomes pushed out of the early
         * list meanwhile (maybe this one's): read its state and watch it */
        send_watch(c, &a, 1);
    }
out:
    if (s->enqueues_inflight == 0) rjq__early_clear(&s->early);
    unpin(a);
}

/* Queue a's enqueue: with its held payload (given NULL), or given its
 * caller's (the payload goes into the call's arguments, no copy of it is
 * kept). On failure nothing changed and nobody was called. */
static int send_item(rjq_await *a, const rjq_enqueue_item *given) {
    awaits *s = a->s;
    rjq_enqueue_item it = given ? *given : held_item(a);
    RJQ_ASSERT(a->rc != NULL); /* (sent once its channel is confirmed) */
    int rc = rjq__enqueue_add(a->q, &it, a->rc->name, on_enqueued, a);
    if (rc != RJQ_OK) return rc;
    free(a->payload);
    a->payload = NULL;
    pin(a);
    set_state(a, AW_ENQUEUEING);
    a->sent_gen = a->rc->generation;
    a->sent_drops = s->early.dropped;
    s->enqueues_inflight++;
    return RJQ_OK;
}

/* Queue the held enqueue (send_item). */
static int try_enqueue(rjq_await *a) {
    return send_item(a, NULL);
}

/* The deferred send (subscription confirmed): a failure ends the await. */
static void send_enqueue(rjq_await *a) {
    int rc = try_enqueue(a);
    if (rc != RJQ_OK) {
        free(a->payload); /* it could not be sent: don't send it on resolve */
        a->payload = NULL;
        resolve(a, rc, NULL, 0, NULL);
    }
}

/* The await's inputs kept: its options, and its payload unless payload is
 * NULL (sent at once: not held). */
static int copy_inputs(rjq_await *a, const void *payload, size_t len, const rjq_job_options *o) {
    if (payload) {
        a->payload = malloc(len ? len : 1);
        if (a->payload == NULL) return RJQ_ENOMEM;
        if (len) memcpy(a->payload, payload, len);
    }
    a->len = len;
    if (o) {
        a->opts = *o;
        a->has_opts = 1;
        a->opts.id = NULL;
        a->opts.headers = NULL;
        if (o->id && (a->opts.id = strdup(o->id)) == NULL) return RJQ_ENOMEM;
        if (o->nheaders && (a->opts.headers = rjq__headers_dup(o->headers, o->nheaders)) == NULL)
            return RJQ_ENOMEM;
        a->headers = a->opts.headers;
        a->nheaders = a->opts.headers ? o->nheaders : 0;
    }
    return RJQ_OK;
}

static awaits *state_of(rjq_client *c);

/* Send a's job (checked) once its channel is confirmed: RJQ_OK, or an
 * error with a not started (its inputs freed with it). */
static int begin_enqueue(awaits *s, rjq_await *a, const void *payload, size_t len,
                         const rjq_job_options *opts) {
    int rc;
    if ((rc = attach(s, a)) != RJQ_OK) return rc;
    /* Its channel confirmed (the usual case), the job is sent now from the
     * caller's payload: a copy is kept only while it waits for the
     * channel (one copy of a 16 KiB payload fewer, bench/README.md) */
    int now = confirmed(a->rc);
    if ((rc = copy_inputs(a, now ? NULL : payload, len, opts)) != RJQ_OK) return rc;
    if (now) {
        rjq_enqueue_item it = held_item(a);
        it.payload = payload;
        if ((rc = send_item(a, &it)) != RJQ_OK) return rc;
    }
    return RJQ_OK;
}

/* given checked and encodable on q: RJQ_OK with *opts the options to use. */
static int enqueue_inputs_ok(rjq_queue *q, const void *payload, size_t len,
                             const rjq_job_options *given, rjq_job_options *copy,
                             const rjq_job_options **opts) {
    char enc[RJQ__OPTS_MAX];
    if (rjq__job_options_in(rjq_queue_get_client(q), given, copy, opts) != RJQ_OK)
        return RJQ_EINVAL;
    rjq_enqueue_item it = {sizeof it, payload, len, *opts};
    return rjq__enqueue_check(q, &it, enc);
}

static int enqueue_await(rjq_queue *q, const void *payload, size_t len, const rjq_job_options *given,
                         const rjq_await_options *aw, rjq_await_cb *cb, void *data,
                         rjq_await **out) {
    rjq_client *c = rjq_queue_get_client(q);
    rjq_job_options copy;
    const rjq_job_options *opts;
    int rc = enqueue_inputs_ok(q, payload, len, given, &copy, &opts);
    if (rc != RJQ_OK) return rc;
    awaits *s = state_of(c);
    if (s == NULL) return RJQ_ENOMEM;
    rjq_await *a = new_await(s, q, aw, cb, data);
    if (a == NULL) return RJQ_ENOMEM;
    if ((rc = begin_enqueue(s, a, payload, len, opts)) != RJQ_OK) {
        discard(a); /* an error return: the callback is never called */
        return rc;
    }
    if (out) *out = a;
    return RJQ_OK;
}

/* The caller's await options as this library reads them (rjq.h
 * "Extensible structs"), checked: *aw is copy, or NULL (none given). */
static int await_options_in(rjq_client *c, const rjq_await_options *given,
                            rjq_await_options *copy, const rjq_await_options **aw) {
    *aw = NULL;
    if (given == NULL) return RJQ_OK;
    if (rjq__sized_in(c, copy, sizeof *copy, given, "rjq_await_options") != RJQ_OK ||
        copy->timeout_ms < 0)
        return RJQ_EINVAL;
    *aw = copy;
    return RJQ_OK;
}

/* The public calls enter the client: sending may flush enqueues, whose
 * callbacks may free the client (then freed on leave). */
int rjq__enqueue_await_one(rjq_queue *q, const void *payload, size_t len,
                           const rjq_job_options *opts, const rjq_await_options *given,
                           rjq_await_cb *cb, void *data, rjq_await **out) {
    if (q == NULL || cb == NULL) return RJQ_EINVAL;
    rjq_client *c = rjq_queue_get_client(q);
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    rjq_await_options copy;
    const rjq_await_options *aw;
    if (await_options_in(c, given, &copy, &aw) != RJQ_OK) return RJQ_EINVAL;
    rjq__enter(c);
    int rc = enqueue_await(q, payload, len, opts, aw, cb, data, out);
    rjq__leave(c);
    return rc;
}

/* ---- await by id ---------------------------------------------------------- */

typedef struct watch_batch {
    size_t n;
    rjq_await *a[];
} watch_batch;

/* Per await: a code (0 no such job, 1 completed, 2 dead, 3 watching, 4
 * cancelled; any other: malformed), a body (the result or the error)
 * where the code has one, and the job's headers text (a string). */
static int watch_reply_ok(const redisReply *r, size_t n) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 * n) return 0;
    for (size_t i = 0; i < n; i++) {
        const redisReply *code = r->element[3 * i], *body = r->element[3 * i + 1];
        if (code->type != REDIS_REPLY_INTEGER || code->integer < 0 || code->integer > 4) return 0;
        if ((code->integer == 1 || code->integer == 2) && body->type != REDIS_REPLY_STRING)
            return 0;
        if (r->element[3 * i + 2]->type != REDIS_REPLY_STRING) return 0;
    }
    return 1;
}

/* a's headers as the watch reply gives them (text, len bytes: the job's
 * stored ones, which are what an existing id's job carries). Out of
 * memory: the outcome comes without them. */
static void set_read_headers(rjq_await *a, const char *text, size_t len) {
    size_t n = 0;
    free(a->read);
    a->read = len ? rjq__headers_read(text, len, &n, NULL) : NULL;
    a->headers = a->read;
    a->nheaders = a->read ? n : 0;
}

static void on_watched(rjq_client *c, int status, redisReply *r, void *priv) {
    watch_batch *b = priv;
    if (status == RJQ_OK && !watch_reply_ok(r, b->n)) {
        rjq__errmsg(c, "await: unexpected reply");
        status = RJQ_EPROTO;
    }
    for (size_t i = 0; i < b->n; i++) {
        rjq_await *a = b->a[i];
        if (status == RJQ_ECONN || status == RJQ_ETIMEDOUT) {
            a->need_watch = 1; /* watched again when the connection is back */
        } else if (status != RJQ_OK) {
            resolve(a, status, NULL, 0, NULL);
        } else {
            redisReply *code = r->element[3 * i], *body = r->element[3 * i + 1];
            if (a->state != AW_DONE)
                set_read_headers(a, r->element[3 * i + 2]->str, r->element[3 * i + 2]->len);
            if (code->integer == 0) resolve(a, RJQ_ENOTFOUND, NULL, 0, NULL);
            else if (code->integer == 1) resolve(a, RJQ_OK, body->str, body->len, NULL);
            else if (code->integer == 2) resolve(a, RJQ_EJOBDEAD, NULL, 0, body->str);
            else if (code->integer == 4) resolve(a, RJQ_EJOBCANCELED, NULL, 0, NULL);
        }
        unpin(a);
    }
    free(b);
}

/* Watch up to WATCH_BATCH awaits of one queue in one script call. On
 * failure nothing changed and nobody was called. */
static int watch_chunk(rjq_client *c, rjq_await **list, size_t n) {
    watch_batch *b = malloc(sizeof *b + n * sizeof b->a[0]);
    rjq__argv v;
    rjq__argv_init(&v);
    const rjq__await_kind *kind = list[0]->kind; /* (a chunk is of one kind) */
    int script = kind ? kind->script : RJQ__S_WATCH;
    if (b) {
        rjq__argv_script_keys(&v, list[0]->q, script);
        if (kind) kind->args(&v, list[0]->q, list[0]->rc->name);
        else rjq__argv_str(&v, list[0]->rc->name);
        for (size_t i = 0; i < n; i++) rjq__argv_str(&v, list[i]->id);
    }
    int rc = b == NULL || v.oom ? RJQ_ENOMEM
                                : rjq__script(c, script, 0, on_watched, b, v.n, v.v, v.len);
    rjq__argv_free(&v);
    if (rc != RJQ_OK) {
        free(b);
        return rc;
    }
    b->n = n;
    for (size_t i = 0; i < n; i++) {
        b->a[i] = list[i];
        pin(list[i]);
        list[i]->need_watch = 0;
    }
    return RJQ_OK;
}

/* Watch awaits (any queues; the caller holds a pin on each): chunks of
 * one queue and kind each. */
static void send_watch(rjq_client *c, rjq_await **list, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t j = i + 1;
        while (j < n && j - i < WATCH_BATCH && list[j]->q == list[i]->q &&
               list[j]->kind == list[i]->kind)
            j++;
        int rc = watch_chunk(c, list + i, j - i);
        if (rc == RJQ_ECLOSED) rc = RJQ_ECANCELED; /* the client is being freed */
        for (size_t k = i; rc != RJQ_OK && k < j; k++) resolve(list[k], rc, NULL, 0, NULL);
        i = j;
    }
}

static int by_queue(const void *x, const void *y) {
    const rjq_await *a = *(rjq_await *const *)x, *b = *(rjq_await *const *)y;
    if (a->q != b->q) return a->q < b->q ? -1 : 1;
    /* (then by kind: a chunk is of one) */
    uintptr_t ka = (uintptr_t)a->kind, kb = (uintptr_t)b->kind;
    return ka < kb ? -1 : ka > kb;
}

/* Send held enqueues and watch the awaits that need it (all when `all`),
 * of channel r (NULL: of every confirmed channel).
 * Every await is pinned first: callbacks run here (a failed send ends
 * its await) and may cancel any other. Out of memory for the list: mark
 * them and try again shortly. */
static void watch_pending(awaits *s, int all, rchan *r) {
    rjq_client *c = s->c;
    size_t n = s->count;
    if (n == 0) return;
    rjq_await **snap = malloc(2 * n * sizeof *snap), **watch = snap + n;
    if (snap == NULL) {
        for (rjq_await *a = s->all; a; a = a->next) a->need_watch |= all;
        rjq__timer_start(c, &s->retry, RETRY_MS);
        return;
    }
    size_t k = 0, m = 0;
    for (rjq_await *a = s->all; a; a = a->next) {
        if (r ? a->rc != r : !confirmed(a->rc)) continue;
        pin(a);
        snap[k++] = a;
    }
    for (size_t i = 0; i < k; i++) /* (a close may have sent its job already) */
        if (snap[i]->state == AW_WAIT_SUB && snap[i]->payload) send_enqueue(snap[i]);
    for (size_t i = 0; i < k; i++)
        if (snap[i]->state == AW_WATCHING && (all || snap[i]->need_watch)) watch[m++] = snap[i];
    if (m > 1) qsort(watch, m, sizeof *watch, by_queue);
    if (m) send_watch(c, watch, m);
    for (size_t i = 0; i < k; i++) unpin(snap[i]);
    free(snap);
}

static void on_retry(rjq__timer *t) {
    awaits *s = t->owner;
    watch_pending(s, 0, NULL);
}

/* The reply channel is (again) subscribed: send held enqueues and, after
 * a resubscription, watch every await (outcomes published meanwhile). */
static void on_confirmed(rchan *r) {
    int again = r->generation++ > 0;
    watch_pending(r->s, again, r);
}

/* Hold a new await for the watch at the end of this loop pass. */
static int add_fresh(awaits *s, rjq_await *a) {
    if (s->nfresh == s->capfresh) {
        size_t cap = s->capfresh ? 2 * s->capfresh : 64;
        rjq_await **f = realloc(s->fresh, cap * sizeof *f);
        if (f == NULL) return RJQ_ENOMEM;
        s->fresh = f;
        s->capfresh = cap;
    }
    pin(a);
    s->fresh[s->nfresh++] = a;
    if (!rjq__timer_armed(&s->tick)) rjq__timer_start(s->c, &s->tick, 0);
    return RJQ_OK;
}

/* The end of the pass: watch the new awaits still waiting for it (a
 * resubscription may have watched them already), grouped by queue. */
static void on_tick(rjq__timer *t) {
    awaits *s = t->owner;
    rjq_await **list = s->fresh;
    size_t n = s->nfresh, m = 0;
    s->fresh = NULL;
    s->nfresh = s->capfresh = 0;
    rjq_await **send = malloc(n * sizeof *send);
    for (size_t i = 0; i < n; i++)
        if (list[i]->state == AW_WATCHING && list[i]->need_watch && confirmed(list[i]->rc)) {
            if (send) send[m++] = list[i];
        }
    if (send == NULL) { /* they keep need_watch: a full pass finds them */
        rjq__timer_start(s->c, &s->retry, RETRY_MS);
    } else if (m) {
        if (m > 1) qsort(send, m, sizeof *send, by_queue);
        send_watch(s->c, send, m);
    }
    for (size_t i = 0; i < n; i++) unpin(list[i]);
    free(list);
    free(send);
}

/* Watch a's job `id` (at the end of the pass, or once subscribed):
 * RJQ_OK, or an error with a not watched. */
static int begin_watch(awaits *s, rjq_await *a, const char *id) {
    int rc;
    if ((rc = attach(s, a)) != RJQ_OK || (rc = set_key(a, id, strlen(id))) != RJQ_OK ||
        (rc = start_watching(a)) != RJQ_OK)
        return rc;
    a->need_watch = 1; /* watched at the end of the pass, or once subscribed */
    if (confirmed(a->rc) && add_fresh(s, a) != RJQ_OK && (rc = watch_chunk(s->c, &a, 1)) != RJQ_OK)
        return rc;
    return RJQ_OK;
}

static int queue_await(rjq_queue *q, const char *id, const rjq_await_options *aw,
                       rjq_await_cb *cb, void *data, rjq_await **out) {
    rjq_client *c = rjq_queue_get_client(q);
    awaits *s = state_of(c);
    if (s == NULL) return RJQ_ENOMEM;
    int rc;
    rjq_await *a = new_await(s, q, aw, cb, data);
    if (a == NULL) return RJQ_ENOMEM;
    if ((rc = begin_watch(s, a, id)) != RJQ_OK) {
        discard(a); /* an error return: the callback is never called */
        return rc;
    }
    if (out) *out = a;
    return RJQ_OK;
}

int rjq__queue_await_one(rjq_queue *q, const char *id, const rjq_await_options *given,
                         rjq_await_cb *cb, void *data, rjq_await **out) {
    if (q == NULL || cb == NULL) return RJQ_EINVAL;
    rjq_client *c = rjq_queue_get_client(q);
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    rjq_await_options copy;
    const rjq_await_options *aw;
    if (await_options_in(c, given, &copy, &aw) != RJQ_OK) return RJQ_EINVAL;
    if (id == NULL || id[0] == '\0' || strlen(id) > RJQ_JOB_ID_MAX) return RJQ_EJOBID;
    rjq__enter(c);
    int rc = queue_await(q, id, aw, cb, data, out);
    rjq__leave(c);
    return rc;
}

/* ---- another feature's awaits (batch.c) ------------------------------------ */

int rjq__await_other(rjq_queue *q, const rjq__await_kind *kind, const char *id, long timeout_ms,
                     rjq_await_cb *cb, void *data) {
    rjq_client *c = rjq_queue_get_client(q);
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    rjq_await_options aw = RJQ_AWAIT_OPTIONS_INIT;
    aw.timeout_ms = timeout_ms;
    rjq__enter(c);
    int rc = RJQ_ENOMEM;
    awaits *s = state_of(c);
    rjq_await *a = s ? new_await(s, q, &aw, cb, data) : NULL;
    if (a) {
        a->kind = kind;
        rc = begin_watch(s, a, id);
        if (rc != RJQ_OK) discard(a); /* an error return: the callback is never called */
    }
    rjq__leave(c);
    return rc;
}

/* ---- awaits whose queue is not known yet (shard.c) ---------------------------- */

int rjq__await_reserve(rjq_queue *q, const rjq_await_options *given, rjq_await_cb *cb,
                       void *data, rjq_await **out) {
    if (q == NULL || cb == NULL || out == NULL) return RJQ_EINVAL;
    rjq_client *c = rjq_queue_get_client(q);
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    rjq_await_options copy;
    const rjq_await_options *aw;
    if (await_options_in(c, given, &copy, &aw) != RJQ_OK) return RJQ_EINVAL;
    awaits *s = state_of(c);
    if (s == NULL) return RJQ_ENOMEM;
    rjq_await *a = new_await(s, q, aw, cb, data);
    if (a == NULL) return RJQ_ENOMEM;
    a->reserved = 1;
    pin(a); /* the caller's, until it starts or ends it */
    *out = a;
    return RJQ_OK;
}

int rjq__await_start_reserved(rjq_await *a, rjq_queue *q, const void *payload, size_t len,
                              const rjq_job_options *opts, const char *id) {
    RJQ_ASSERT(a->reserved && a->inflight > 0);
    a->reserved = 0;
    if (a->state == AW_DONE) { /* cancelled or timed out meanwhile */
        unpin(a);
        return 1;
    }
    rjq_client *c = a->c;
    rjq__enter(c);
    if (q != a->q) {
        rjq__queue_hold(q);
        rjq__queue_release(a->q);
        a->q = q;
    }
    int rc;
    if (id == NULL) {
        rjq_job_options copy;
        const rjq_job_options *o;
        rc = enqueue_inputs_ok(q, payload, len, opts, &copy, &o);
        if (rc == RJQ_OK) rc = begin_enqueue(a->s, a, payload, len, o);
    } else {
        rc = strlen(id) > RJQ_JOB_ID_MAX ? RJQ_EJOBID : begin_watch(a->s, a, id);
    }
    if (rc != RJQ_OK) {
        free(a->payload); /* nothing of it was sent: nothing to send on resolve */
        a->payload = NULL;
        resolve(a, rc, NULL, 0, NULL);
    }
    unpin(a);
    rjq__leave(c);
    return RJQ_OK;
}

void rjq__await_unreserve(rjq_await *a, int status) {
    RJQ_ASSERT(a->reserved && a->inflight > 0);
    a->reserved = 0;
    if (status == RJQ_OK) a->cb = NULL; /* (a call refused: no callback) */
    resolve(a, status == RJQ_OK ? RJQ_ECANCELED : status, NULL, 0, NULL);
    unpin(a);
}

int rjq_await_cancel(rjq_await *a) {
    if (a == NULL || a->state == AW_DONE) return RJQ_EINVAL;
    rjq_client *c = a->c;
    /* The callback runs here: a client freed from it is freed on leave. */
    rjq__enter(c);
    resolve(a, RJQ_ECANCELED, NULL, 0, NULL);
    rjq__leave(c);
    return RJQ_OK;
}

/* ---- the feature ------------------------------------------------------------ */

/* The command connection is back: watch awaits whose watch was lost.
 * The first time, the mode is known: awaits made before it get their
 * channel (they go on once it is confirmed). */
static void awaits_ready(rjq_client *c, void *state, int kind) {
    awaits *s = state;
    if (kind != RJQ_CONN_COMMAND) return;
    if (rjq__pubsub_sharded(c) == 1 && s->main->listening) {
        rjq__unsubscribe(c, s->main->name, s->main); /* (not used on a cluster) */
        s->main->listening = 0;
    }
    for (rjq_await *a = s->all; a && rjq__pubsub_sharded(c) >= 0; a = a->next) {
        if (a->rc != NULL || a->state == AW_DONE || a->reserved) continue;
        int rc = attach(s, a);
        if (rc != RJQ_OK) {
            /* (no channel: it ends; the list may change, start over) */
            pin(a);
            free(a->payload);
            a->payload = NULL;
            resolve(a, rc, NULL, 0, NULL);
            unpin(a);
            a = s->all;
            if (a == NULL) break;
        }
    }
    watch_pending(s, 0, NULL);
}

/* A graceful close began: an await still holding its enqueue (its reply
 * channel not yet confirmed) gets its job sent now, as a plain enqueue
 * (what a cancel does too): the close sends what was asked for. The
 * await itself ends with the client (RJQ_ECANCELED). */
static void awaits_drain(rjq_client *c, void *state) {
    awaits *s = state;
    size_t n = 0;
    for (rjq_await *a = s->all; a; a = a->next) n += a->state == AW_WAIT_SUB && a->payload;
    rjq_await **held = n ? malloc(n * sizeof *held) : NULL;
    if (held == NULL) return; /* none, or out of memory: they end with the client */
    /* pinned: a flush inside rjq__enqueue_add may run callbacks that
     * cancel any await */
    size_t k = 0;
    for (rjq_await *a = s->all; a && k < n; a = a->next)
        if (a->state == AW_WAIT_SUB && a->payload) pin(held[k++] = a);
    for (size_t i = 0; i < k; i++) {
        rjq_await *a = held[i];
        if (a->state != AW_WAIT_SUB || a->payload == NULL || !rjq__accepting(c)) continue;
        rjq_enqueue_item it = held_item(a);
        if (rjq__enqueue_add(a->q, &it, NULL, NULL, NULL) == RJQ_OK) {
            free(a->payload);
            a->payload = NULL;
        }
    }
    for (size_t i = 0; i < k; i++) unpin(held[i]);
    free(held);
}

/* Client destruction: every await ends with RJQ_ECANCELED. */
static void awaits_cancel(rjq_client *c, void *state) {
    awaits *s = state;
    (void)c;
    while (s->all) resolve(s->all, RJQ_ECANCELED, NULL, 0, NULL);
    RJQ_ASSERT(s->count == 0);
}

static void awaits_close(rjq_client *c, void *state) {
    awaits *s = state;
    for (size_t i = 0; i < s->nfresh; i++) unpin(s->fresh[i]); /* ended by the cancel */
    free(s->fresh);
    rjq__timer_teardown(c, &s->tick);
    rjq__early_clear(&s->early);
    rjq__table_free(&s->table);
    rjq__timer_teardown(c, &s->retry);
    while (s->queues) {
        rchan *r = s->queues;
        s->queues = r->next;
        free(r);
    }
    free(s->main);
    free(s);
}

static const rjq__feature awaits_feature = {
    .name = "awaits",
    .ready = awaits_ready,
    .cancel = awaits_cancel,
    .close = awaits_close,
    .drain = awaits_drain};

/* The client's awaits, made with the first await. */
static awaits *state_of(rjq_client *c) {
    awaits *s = rjq__feature_state(c, &awaits_feature);
    if (s) return s;
    if ((s = calloc(1, sizeof *s)) == NULL) return NULL;
    s->c = c;
    snprintf(s->hex, sizeof s->hex, "%016llx%08llx", (unsigned long long)rjq__random(c),
             (unsigned long long)(rjq__random(c) & 0xffffffffu));
    snprintf(s->channel, sizeof s->channel, "%s:reply:%s:framed", rjq__client_prefix(c), s->hex);
    if ((s->main = rchan_new(s, s->channel)) == NULL) {
        free(s);
        return NULL;
    }
    if (rjq__timer_setup(c, &s->retry, on_retry, s) != RJQ_OK) {
        free(s->main);
        free(s);
        return NULL;
    }
    if (rjq__timer_setup(c, &s->tick, on_tick, s) != RJQ_OK) {
        rjq__timer_teardown(c, &s->retry);
        free(s->main);
        free(s);
        return NULL;
    }
    if (rjq__feature_add(c, &awaits_feature, s) != RJQ_OK) {
        rjq__timer_teardown(c, &s->retry);
        rjq__timer_teardown(c, &s->tick);
        free(s->main);
        free(s);
        return NULL;
    }
    return s;
}

size_t rjq_client_count_awaits(const rjq_client *c) {
    const awaits *s = rjq__feature_state(c, &awaits_feature);
    return s ? s->count : 0;
}

void rjq__awaits_inspect(const rjq_client *c, const char **channel, size_t *enqueues_inflight,
                         size_t *early, unsigned long long *early_dropped) {
    const awaits *s = rjq__feature_state(c, &awaits_feature);
    *channel = s ? s->channel : "";
    *enqueues_inflight = s ? s->enqueues_inflight : 0;
    *early = s ? s->early.n : 0;
    *early_dropped = s ? s->early.dropped : 0;
}
