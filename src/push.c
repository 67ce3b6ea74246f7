/*
 * Push delivery, the client's side (push.h; the server's is push_to_idle
 * in src/lua/lib.lua).
 *
 * Each queue with workers has one push channel per client,
 * "<prefix>:{Q}:push:<client id>", on the subscriber connection. A worker
 * registers free slots in the queue's idle hash under the field
 * "<worker id> <push channel>" (its registration), with the epoch of the
 * claim that registered them. Enqueue claims new jobs for registered
 * slots and publishes them there, one message per worker:
 *     "<worker> <epoch> <count> <token> <deadline>\n" (or "... <deadline> ?\n":
 *     unconfirmed, see below) then per job
 *     "<id len> <payload len> <attempt> <max attempts> <wait ms or ->\n"
 *     followed by the id and payload bytes, or for a payload too big to
 *     push (PUSH_INLINE_MAX in lib.lua) "<id len> - <attempt> <max
 *     attempts> <wait ms or ->\n" followed by the id bytes: the worker reads that
 *     payload itself (the jobs of one message share their fencing token
 *     and their lease's end, in server time).
 * Push format 8 (this client registers it): a payload of at least 2 KiB
 * (PUSH_SPLIT_MIN in lib.lua) is announced as "<id len> ><payload len>
 * ..." and its bytes are not in the message: they follow it as a message
 * of their own, one per such job, in job order (one script publishes them
 * all: nothing comes between them on the channel). The server publishes
 * the payload as the Lua string it already is, never copying it into a
 * new one (Redis' Lua hashes every byte of every string it makes). The
 * listener keeps the message (a copy; its `pending`) until its payloads
 * came, copies all but the last and reads the last in place. A payload
 * that never comes whole (the subscription dropped between the messages,
 * a length that differs) loses the push: its worker claims and recovers
 * the jobs (rjq__reg_lost), as for any lost push. A format 7 message
 * (an older enqueue's: it pushes only to format 7 registrations, so not
 * to this client's) is read the same way: it has no "><length>".
 * A format 7 worker (an older client) still gets one message from this
 * enqueue: it registers format 7, and push_to_idle writes that format
 * for it. An older enqueue drops format 8 registrations: in a mixed
 * deployment, newer workers hear the doorbell and claim the older
 * producers' jobs (a round trip more), never a message they cannot read.
 * An unconfirmed push, one the server sent without knowing that this
 * worker's subscription is the one that hears it (a publish's receiver
 * count is node-local: a copy may arrive by replication after the server
 * counted nobody and took the jobs back), ends its head in " ?": the
 * worker then starts a job only once the state column shows the server
 * still holds it under the message's token (a lease check, worker_fetch.c),
 * so a push undone on the server never starts a job twice.
 * Notices for running jobs start with '!' ("!cancel <token> <id>": the
 * job was cancelled) and go to the worker named in the token.
 * Jobs for a registration that is gone (its worker stopped meanwhile) go
 * back to the queue at once (release.lua), so they do not wait for their
 * lease.
 *
 * The ledger. A claim that comes back short registers the slots it could
 * not fill (`offered`); a push moves one from offered to running; a job
 * finished while idle offers its slot again with the completion batch
 * (job.c). Whenever the ledger may be out of step with Redis (a
 * reconnect, a lost reply, the safety poll, pushes beyond what was
 * registered) or the offered slots are wanted for claiming (the
 * doorbell), the next claim replaces the registration under a new epoch;
 * jobs pushed under an older epoch are only started if there is room,
 * else handed back.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "push.h"

/* The queue's push state. Handles of one queue in one client share the
 * push channel: the first handle with workers subscribes it and routes
 * every message to the registration it names, on whichever handle (the
 * registrations' ids are unique in the process, so in the client: they
 * also name the workers in their fencing tokens). */
/* A message of jobs whose payloads follow (push format 8), kept while
 * they arrive. */
typedef struct pending {
    char *msg;                /* a copy of the message: its jobs point into it */
    rjq__push_head h;
    rjq__pushed *jobs;
    size_t next;              /* the job whose payload comes next */
    size_t left;              /* payloads still to come */
    char **copies;            /* of payloads that came (h.follow of them; all but the last) */
} pending;

typedef struct part {
    char *channel;
    rjq__reg *regs;           /* registrations of this handle */
    int listening;            /* this handle is the channel's listener (one per name) */
    pending *wait;            /* a message waiting for its payloads (the listener's) */
} part;

static atomic_uint last_reg_id;

struct rjq__reg {
    rjq_queue *q;
    unsigned id;              /* names the registration in its field */
    char *field;              /* "<id> <push channel>" */
    unsigned epoch;           /* of the registration */
    int offered;              /* registered slots not yet used by a push */
    int out_of_step;          /* the next claim replaces the registration */
    int lost;                 /* pushes may have been lost: the next claim recovers */
    unsigned ignore_below;    /* pushes of older epochs come back by recovery */
    int linked;               /* in the queue's routing list */
    const rjq__reg_ops *ops;
    void *arg;
    rjq__reg *next;
};

/* ---- the ledger ------------------------------------------------------------ */

const char *rjq__reg_field(const rjq__reg *r) {
    return r->field;
}

int rjq__reg_offered(const rjq__reg *r) {
    return r->offered;
}

void rjq__reg_resync(rjq__reg *r) {
    r->out_of_step = 1;
}

void rjq__reg_lost(rjq__reg *r) {
    r->out_of_step = 1;
    r->lost = 1;
}

int rjq__reg_out_of_step(const rjq__reg *r) {
    return r->out_of_step;
}

unsigned rjq__reg_id(const rjq__reg *r) {
    return r->id;
}

unsigned rjq__reg_claim_epoch(const rjq__reg *r, int reset) {
    return reset ? r->epoch + 1 : r->epoch;
}

int rjq__reg_claim_recovers(const rjq__reg *r, int reset) {
    return reset && r->lost;
}

void rjq__reg_claim_sent(rjq__reg *r, unsigned epoch, int reset, int recovers) {
    RJQ_ASSERT(epoch == rjq__reg_claim_epoch(r, reset));
    RJQ_ASSERT(!recovers || reset);
    if (!reset) return;
    r->epoch = epoch;
    r->offered = 0;
    r->out_of_step = 0;
    if (recovers) {
        /* Every push of an older epoch was published before this claim
         * runs (it replaces the registration): one not heard of by now
         * comes back in its reply. */
        r->lost = 0;
        r->ignore_below = epoch;
    }
}

void rjq__reg_claim_replied(rjq__reg *r, unsigned epoch, int status, long long registered,
                            int recovers) {
    if (status != RJQ_OK) {
        r->out_of_step = 1; /* whether it registered slots is unknown */
        if (recovers) r->lost = 1; /* what it recovered never came */
        return;
    }
    RJQ_ASSERT(registered >= 0);
    if (epoch == r->epoch) r->offered += (int)registered;
}

int rjq__reg_accept(rjq__reg *r, unsigned epoch, int free_slots, int can_run) {
    if (epoch != r->epoch) return free_slots > 0; /* an older registration's */
    if (can_run) {
        r->offered--; /* below 0 until the reply of the claim that registered it */
        return 1;
    }
    r->out_of_step = 1; /* pushed beyond what we registered */
    return 0;
}

unsigned rjq__reg_offer(rjq__reg *r, int slots) {
    RJQ_ASSERT(slots > 0);
    r->offered += slots;
    return r->epoch;
}

int rjq__reg_offer_done(rjq__reg *r, unsigned epoch, int slots, int status, int registered) {
    if (status == RJQ_OK && registered) return 0;
    /* Work is waiting, or the registration changed: claim instead. */
    if (epoch == r->epoch) r->offered -= slots;
    if (status != RJQ_OK) r->out_of_step = 1; /* it may have been registered */
    return 1;
}

/* ---- messages ---------------------------------------------------------------- */

/* Parse a decimal number ending in `stop`; advances *p past the stop. */
static int parse_num(const char **p, const char *end, char stop, unsigned long long *out) {
    const char *s = *p;
    unsigned long long v = 0;
    if (s == end || *s < '0' || *s > '9') return -1;
    for (; s < end && *s >= '0' && *s <= '9'; s++) {
        if (v > (~0ULL - 9) / 10) return -1;
        v = v * 10 + (unsigned long long)(*s - '0');
    }
    if (s == end || *s != stop) return -1;
    *p = s + 1;
    *out = v;
    return 0;
}

/* A non-empty word without spaces ending in `stop`; advances *p past it. */
static int parse_word(const char **p, const char *end, char stop, const char **word,
                      size_t *len) {
    const char *s = memchr(*p, stop, (size_t)(end - *p));
    if (s == NULL || s == *p || memchr(*p, ' ', (size_t)(s - *p))) return -1;
    *word = *p;
    *len = (size_t)(s - *p);
    *p = s + 1;
    return 0;
}

/* The longest payload that may follow as a message of its own: Redis'
 * longest string. */
#define FOLLOW_MAX (512ULL << 20)

/* One job's header and bytes (its token is the message's). A payload
 * left out ("-" for its length) is NULL: the worker reads it. */
static int parse_job(const char **p, const char *end, rjq__pushed *d) {
    unsigned long long idlen, len = 0, attempt, max;
    int left_out = 0, follows = 0;
    if (parse_num(p, end, ' ', &idlen)) return -1;
    if (end - *p >= 2 && (*p)[0] == '-' && (*p)[1] == ' ') {
        left_out = 1;
        *p += 2;
    } else if (end - *p >= 1 && (*p)[0] == '>') {
        /* format 8: the payload follows as a message of its own */
        ++*p;
        if (parse_num(p, end, ' ', &len) || len == 0) return -1;
        follows = 1;
    } else if (parse_num(p, end, ' ', &len)) {
        return -1;
    }
    unsigned long long wait = 0, hlen = 0;
    int no_wait = 0;
    if (parse_num(p, end, ' ', &attempt)) return -1;
    /* "<max>", or with headers "<max>+<headers length>" (their text after the id) */
    const char *sp = memchr(*p, ' ', (size_t)(end - *p));
    if (sp && memchr(*p, '+', (size_t)(sp - *p))) { /* (looked for before the space only) */
        if (parse_num(p, end, '+', &max) || parse_num(p, end, ' ', &hlen)) return -1;
    } else if (parse_num(p, end, ' ', &max)) {
        return -1;
    }
    if (end - *p >= 2 && (*p)[0] == '-' && (*p)[1] == '\n') {
        no_wait = 1;
        *p += 2;
    } else if (parse_num(p, end, '\n', &wait) || wait > (unsigned long long)RJQ__TIME_MAX) {
        return -1;
    }
    unsigned long long here = follows ? 0 : len; /* the payload's bytes in this message */
    if (idlen == 0 || attempt > RJQ__ATTEMPTS_MAX || max > RJQ__ATTEMPTS_MAX ||
        (size_t)(end - *p) < idlen || (size_t)(end - *p) - idlen < hlen ||
        (size_t)(end - *p) - idlen - hlen < here || len > FOLLOW_MAX)
        return -1;
    d->id = *p, d->idlen = (size_t)idlen;
    d->headers = hlen ? d->id + idlen : NULL, d->hlen = (size_t)hlen;
    d->payload = left_out || follows ? NULL : d->id + idlen + hlen, d->len = (size_t)len;
    d->attempt = (int)attempt;
    d->max_attempts = (int)max;
    d->wait_ms = no_wait ? -1 : (long long)wait;
    *p = d->id + idlen + hlen + here;
    return follows;
}

/* The registration of that id on any handle of q's queue in its client. */
static rjq__reg *find_in(const part *p, unsigned long long id) {
    for (rjq__reg *r = p ? p->regs : NULL; r; r = r->next)
        if (r->id == id) return r;
    return NULL;
}

/* The registration of that id on any handle of q's queue in its client:
 * q's own first (the usual case: one handle per queue), the others only
 * when it is not there. */
static rjq__reg *find_reg(rjq_queue *q, unsigned long long id) {
    rjq__reg *r = find_in(rjq__queue_part(q, RJQ__PART_PUSH), id);
    const char *name = rjq_queue_get_name(q);
    for (rjq_queue *h = rjq__queue_first(rjq_queue_get_client(q)); h && r == NULL;
         h = rjq__queue_next(h))
        if (h != q && strcmp(rjq_queue_get_name(h), name) == 0)
            r = find_in(rjq__queue_part(h, RJQ__PART_PUSH), id);
    return r;
}

static char *make_field(const part *p, unsigned long long id) {
    int len = snprintf(NULL, 0, "%llu %s", id, p->channel);
    char *field = len < 0 ? NULL : malloc((size_t)len + 1);
    if (field) snprintf(field, (size_t)len + 1, "%llu %s", id, p->channel);
    return field;
}

/* (Re)subscribed: pushes may have been lost when missable (the channel
 * was subscribed before: core.h). Each registration is marked out of step
 * and, when missable, to recover, and its worker told (it claims,
 * replacing the registration and recovering what was pushed to it
 * unheard). The channel's first subscription recovers nothing: a push
 * needs a subscriber (PUBSUB NUMSUB, push_to_idle), so every push to it
 * comes after its confirmation, and a recovering claim would only take
 * over, under its own token, a job whose push message is on its way (the
 * worker's first claim registers its slots before that confirmation). */
static void resync_all(rjq_queue *q, int missable) {
    const char *name = rjq_queue_get_name(q);
    for (rjq_queue *h = rjq__queue_first(rjq_queue_get_client(q)); h; h = rjq__queue_next(h)) {
        part *p = rjq__queue_part(h, RJQ__PART_PUSH);
        if (p == NULL || strcmp(rjq_queue_get_name(h), name) != 0) continue;
        for (rjq__reg *r = p->regs, *next; r; r = next) {
            next = r->next;
            r->out_of_step = 1;
            if (missable) r->lost = 1;
            r->ops->resync(r->arg);
        }
    }
}

int rjq__push_parse_notice(const char *msg, size_t len, rjq__push_notice *n) {
    static const char cancel[] = "!cancel ", timeout[] = "!timeout ";
    size_t skip = 0;
    n->reason = 0;
    if (len > sizeof cancel - 1 && memcmp(msg, cancel, sizeof cancel - 1) == 0)
        n->reason = RJQ_EJOBCANCELED, skip = sizeof cancel - 1;
    else if (len > sizeof timeout - 1 && memcmp(msg, timeout, sizeof timeout - 1) == 0)
        n->reason = RJQ_ETIMEDOUT, skip = sizeof timeout - 1;
    const char *p = msg + skip, *end = msg + len, *dot;
    if (n->reason == 0 || parse_word(&p, end, ' ', &n->token, &n->toklen) || p == end ||
        memchr(p, ' ', (size_t)(end - p)) || (dot = memchr(n->token, '.', n->toklen)) == NULL)
        return RJQ_EPROTO;
    n->id = p, n->idlen = (size_t)(end - p);
    const char *w = dot + 1;
    return parse_num(&w, n->token + n->toklen, '.', &n->worker) ? 1 : RJQ_OK;
}

/* A notice ("!cancel <token> <id>", cancel.lua, or "!timeout <token>
 * <id>", reclaim.lua): routed to the worker of the token
 * ("<client>.<worker>.<unique>"); one that left has no job to tell. */
static void on_notice(rjq_client *c, rjq_queue *q, const char *channel, const char *msg,
                      size_t len) {
    rjq__push_notice n;
    int rc = rjq__push_parse_notice(msg, len, &n);
    if (rc == RJQ_EPROTO) {
        rjq__errmsg(c, "push on %s: malformed notice", channel);
        return;
    }
    if (rc != RJQ_OK) return; /* not one of our tokens */
    rjq__reg *r = find_reg(q, n.worker);
    if (r) r->ops->notice(r->arg, n.reason, n.token, n.toklen, n.id, n.idlen);
}

int rjq__push_parse(const char *msg, size_t len, rjq__push_head *h, rjq__pushed **jobs) {
    const char *p = msg, *end = msg + len;
    unsigned long long n, deadline;
    *jobs = NULL;
    if (parse_num(&p, end, ' ', &h->worker) || parse_num(&p, end, ' ', &h->epoch) ||
        parse_num(&p, end, ' ', &n) || n == 0 || n > len ||
        parse_word(&p, end, ' ', &h->token, &h->toklen))
        return RJQ_EPROTO;
    /* the deadline, then "\n" or " ?\n" (unconfirmed: checked first) */
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    h->check = nl && nl - p >= 2 && nl[-2] == ' ' && nl[-1] == '?';
    if (parse_num(&p, end, h->check ? ' ' : '\n', &deadline) || deadline == 0 ||
        deadline > (unsigned long long)RJQ__TIME_MAX || (h->check && p != nl - 1))
        return RJQ_EPROTO;
    if (h->check) p = nl + 1;
    h->n = (size_t)n;
    if ((*jobs = malloc(h->n * sizeof **jobs)) == NULL) return RJQ_ENOMEM;
    size_t got = 0;
    int rc;
    h->follow = 0;
    while (got < h->n && (rc = parse_job(&p, end, &(*jobs)[got])) >= 0) {
        h->follow += (size_t)rc;
        (*jobs)[got].token = h->token, (*jobs)[got].toklen = h->toklen;
        (*jobs)[got].deadline = (long long)deadline;
        (*jobs)[got].check = h->check;
        got++;
    }
    if (got == h->n && p == end) return RJQ_OK;
    free(*jobs);
    *jobs = NULL;
    return RJQ_EPROTO;
}

/* The jobs of a message, whole, to the registration it names. */
static void deliver(rjq_queue *q, part *pp, const rjq__push_head *h, rjq__pushed *jobs) {
    rjq__reg *r = find_reg(q, h->worker);
    if (r && h->epoch < r->ignore_below) {
        /* a recovering claim returned (or returns) these jobs */
    } else if (r) {
        r->ops->take(r->arg, (unsigned)h->epoch, jobs, h->n);
    } else { /* left: hand them back and drop what is left of its registration */
        char *field = make_field(pp, h->worker);
        rjq__push_release(q, field, jobs, h->n); /* (a push's token has no held member) */
        free(field);
    }
}

static void pending_free(pending *w) {
    if (w == NULL) return;
    for (size_t i = 0; i < w->h.follow; i++) free(w->copies[i]);
    free(w->copies);
    free(w->jobs);
    free(w->msg);
    free(w);
}

/* The job whose payload comes next, from `from` on. */
static size_t next_follow(const pending *w, size_t from) {
    while (from < w->h.n && !(w->jobs[from].payload == NULL && w->jobs[from].len > 0)) from++;
    return from;
}

/* Keep a message whose payloads follow (its jobs rebased on a copy).
 * Out of memory: dropped, as a lost push (the registration recovers). */
static int pending_start(part *pp, const char *msg, size_t len, const rjq__push_head *h,
                         rjq__pushed *jobs) {
    pending *w = calloc(1, sizeof *w);
    if (w == NULL || (w->msg = malloc(len ? len : 1)) == NULL ||
        (w->copies = calloc(h->follow, sizeof *w->copies)) == NULL) {
        if (w) free(w->msg);
        free(w);
        free(jobs);
        return RJQ_ENOMEM;
    }
    memcpy(w->msg, msg, len);
    w->h = *h;
    w->h.token = w->msg + (h->token - msg);
    for (size_t i = 0; i < h->n; i++) {
        jobs[i].id = w->msg + (jobs[i].id - msg);
        jobs[i].token = w->h.token;
        if (jobs[i].headers) jobs[i].headers = w->msg + (jobs[i].headers - msg);
        if (jobs[i].payload) jobs[i].payload = w->msg + (jobs[i].payload - msg);
    }
    w->jobs = jobs;
    w->left = h->follow;
    w->next = next_follow(w, 0);
    pp->wait = w;
    return RJQ_OK;
}

/* A push lost on the way (a payload that never came whole): its worker
 * claims, and the claim recovers the jobs pushed to it unheard. */
static void push_lost(rjq_queue *q, unsigned long long worker) {
    rjq__reg *r = find_reg(q, worker);
    if (r == NULL) return; /* left: the lease brings them back */
    rjq__reg_lost(r);
    r->ops->resync(r->arg);
}

/* The next message after one whose payloads follow: the next of them. */
static void on_payload(rjq_client *c, rjq_queue *q, part *pp, const char *channel,
                       const char *msg, size_t len) {
    pending *w = pp->wait;
    rjq__pushed *d = &w->jobs[w->next];
    if (len != d->len) {
        rjq__errmsg(c, "push on %s: a payload of %zu bytes where %zu were due", channel, len,
                    d->len);
        pp->wait = NULL;
        push_lost(q, w->h.worker);
        pending_free(w);
        return;
    }
    if (--w->left > 0) {
        size_t k = w->h.follow - w->left - 1;
        if ((w->copies[k] = malloc(len)) == NULL) {
            pp->wait = NULL;
            push_lost(q, w->h.worker);
            pending_free(w);
            return;
        }
        memcpy(w->copies[k], msg, len);
        d->payload = w->copies[k];
        w->next = next_follow(w, w->next + 1);
        return;
    }
    d->payload = msg; /* the last one: read in place */
    pp->wait = NULL;
    deliver(q, pp, &w->h, w->jobs);
    pending_free(w);
}

static void on_push(rjq_client *c, const char *channel, const char *msg, size_t len,
                    void *arg) {
    rjq_queue *q = arg;
    part *pp = rjq__queue_part(q, RJQ__PART_PUSH);
    if (msg == NULL) {
        /* (re)subscribed: a message still waiting for its payloads lost
         * them, and resync_all has its worker recover its jobs (as it
         * does whenever messages to an earlier subscription may have been
         * missed: len 1) */
        int cut = pp->wait != NULL;
        pending_free(pp->wait);
        pp->wait = NULL;
        resync_all(q, len != 0 || cut);
        return;
    }
    if (pp->wait) { /* (whatever its first byte: a payload is binary) */
        on_payload(c, q, pp, channel, msg, len);
        return;
    }
    if (len > 0 && msg[0] == '!') {
        on_notice(c, q, channel, msg, len);
        return;
    }
    rjq__push_head h;
    rjq__pushed *jobs;
    int rc = rjq__push_parse(msg, len, &h, &jobs);
    if (rc == RJQ_EPROTO) rjq__errmsg(c, "push on %s: malformed message", channel);
    if (rc != RJQ_OK) return; /* its jobs come back when their lease expires */
    if (h.follow > 0) {
        if (pending_start(pp, msg, len, &h, jobs) != RJQ_OK) push_lost(q, h.worker);
        return;
    }
    deliver(q, pp, &h, jobs);
    free(jobs);
}

/* ---- joining and leaving ------------------------------------------------- */

static void part_close(rjq_queue *q, void *state) {
    part *p = state;
    (void)q;
    RJQ_ASSERT(p->regs == NULL); /* the workers left first */
    pending_free(p->wait);
    free(p->channel);
    free(p);
}

/* The handle was closed (its workers gone): another handle of the queue
 * that has a push part listens in its place. (Subscribed first: the
 * channel stays subscribed throughout.) */
static void part_release(rjq_queue *q, void *state) {
    part *p = state;
    rjq_client *c = rjq_queue_get_client(q);
    if (!p->listening) return;
    for (rjq_queue *h = rjq__queue_first(c); h; h = rjq__queue_next(h)) {
        part *hp = rjq__queue_part(h, RJQ__PART_PUSH);
        if (h == q || hp == NULL || hp->listening || strcmp(rjq_queue_get_name(h), rjq_queue_get_name(q)))
            continue;
        /* (out of memory: its workers go on with doorbells and claims) */
        if (rjq__subscribe(c, hp->channel, on_push, h) == RJQ_OK) {
            hp->listening = 1;
            hp->wait = p->wait; /* its payloads come on, to the new listener */
            p->wait = NULL;
        }
        break;
    }
    rjq__unsubscribe(c, p->channel, q);
    p->listening = 0;
    pending_free(p->wait); /* (no listener left: nobody waits for them) */
    p->wait = NULL;
}

static const rjq__part_ops part_ops = {NULL, NULL, NULL, part_close, part_release};

/* The queue's push state, its channel subscribed, made on first use. */
static part *part_of(rjq_queue *q) {
    part *p = rjq__queue_part(q, RJQ__PART_PUSH);
    if (p) return p;
    rjq_client *c = rjq_queue_get_client(q);
    const char *name = rjq_queue_get_name(q);
    const char *base = rjq__queue_key(q, RJQ__K_PUSH, NULL); /* "<prefix>:{Q}:push:" */
    size_t len = strlen(base) + strlen(rjq__client_id(c)) + 1;
    if ((p = calloc(1, sizeof *p)) == NULL || (p->channel = malloc(len)) == NULL) {
        free(p);
        return NULL;
    }
    /* its last part is the client's id: push tokens start with it (the
     * held index, lib.lua) */
    snprintf(p->channel, len, "%s%s", base, rjq__client_id(c));
    int subscribed = 0; /* by another handle of the queue (handles live as long as the client) */
    for (rjq_queue *h = rjq__queue_first(c); h && !subscribed; h = rjq__queue_next(h))
        subscribed = h != q && rjq__queue_part(h, RJQ__PART_PUSH) && strcmp(rjq_queue_get_name(h), name) == 0;
    if (!subscribed && rjq__subscribe(c, p->channel, on_push, q) != RJQ_OK) {
        free(p->channel);
        free(p);
        return NULL;
    }
    p->listening = !subscribed;
    rjq__queue_set_part(q, RJQ__PART_PUSH, &part_ops, p);
    return p;
}

rjq__reg *rjq__push_join(rjq_queue *q, const rjq__reg_ops *ops, void *arg) {
    part *p = part_of(q);
    rjq__reg *r = p ? calloc(1, sizeof *r) : NULL;
    if (r == NULL) return NULL;
    r->q = q;
    r->id = atomic_fetch_add(&last_reg_id, 1) + 1;
    if ((r->field = make_field(p, r->id)) == NULL) {
        free(r);
        return NULL;
    }
    r->out_of_step = 1; /* the first claim registers from scratch */
    r->ops = ops;
    r->arg = arg;
    r->linked = 1;
    r->next = p->regs;
    p->regs = r;
    return r;
}

static void unlink_reg(rjq__reg *r) {
    if (!r->linked) return;
    part *p = rjq__queue_part(r->q, RJQ__PART_PUSH);
    for (rjq__reg **pp = &p->regs; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    r->linked = 0;
}

int rjq__push_leave(rjq__reg *r, rjq__reply_fn *fn, void *priv) {
    unlink_reg(r);
    size_t klen;
    const char *key = rjq__queue_key(r->q, RJQ__K_IDLE, &klen);
    const char *argv[3] = {"HDEL", key, r->field};
    size_t lens[3] = {4, klen, strlen(r->field)};
    return rjq__command(rjq_queue_get_client(r->q), 0, fn, priv, 3, argv, lens);
}

void rjq__push_free(rjq__reg *r) {
    if (r == NULL) return;
    unlink_reg(r);
    free(r->field);
    free(r);
}

/* ---- handing jobs back ---------------------------------------------------- */

static void on_released(rjq_client *c, int status, redisReply *r, void *priv) {
    (void)r, (void)priv;
    rjq__background_failed(c, status, "release");
}

int rjq__push_release(rjq_queue *q, const char *field, const rjq__pushed *jobs, size_t n) {
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_RELEASE);
    rjq__argv_key(&a, q, RJQ__K_JOB);
    rjq__argv_key(&a, q, RJQ__K_WAKE);
    rjq__argv_str(&a, field ? field : "");
    for (size_t i = 0; i < n; i++) {
        rjq__argv_add(&a, jobs[i].id, jobs[i].idlen);
        rjq__argv_add(&a, jobs[i].token, jobs[i].toklen);
    }
    /* Token-checked, so safe to re-send; failing that, the lease brings
     * the jobs back. */
    int rc = a.oom ? RJQ_ENOMEM
                   : rjq__script(rjq_queue_get_client(q), RJQ__S_RELEASE, RJQ__REQ_RETRY, on_released,
                                 NULL, a.n, a.v, a.len);
    rjq__argv_free(&a);
    return rc;
}
