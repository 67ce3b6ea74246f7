/*
 * Enqueue. Every enqueue made during one loop turn on one queue goes out
 * as a single script call at the queue's tick: a producer that calls
 * rjq_enqueue() a hundred times in a turn pays Redis one script call, not
 * a hundred (the per-call cost of a script dwarfs the per-job cost).
 * Inputs are copied at call time straight into RESP form. A batch from
 * rjq_enqueue_batch() always lands whole in one script call (atomic), and
 * enqueues keep their call order. A bounded queue admits each entry (one
 * rjq_enqueue(), one rjq_enqueue_batch()) on its own, in order: the jobs
 * of an entry after its first carry a '+' before their options
 * (enqueue.lua), and a batch that goes as several calls (flush_parts) is
 * always a single entry (add_group). A batch goes out early when it would
 * pass RJQ__BATCH_MAX jobs or RJQ__ENQUEUE_BYTES of arguments, and before
 * any other request of the client (the before_send hook), so a request
 * made after an enqueue sees it.
 *
 * Self-clocking. While one of a queue's enqueue calls is in flight, its
 * tick holds the queue's next batch back (it keeps gathering) and the
 * reply's callback kicks the tick that sends it: a queue whose jobs come
 * one or two per loop pass (awaited jobs, a cluster's links each waking
 * the loop on their own) still pays one script call for all the jobs of a
 * round trip, while a job alone, with nothing in flight, goes at once.
 * Every end of the call in flight (its reply, an error, the command
 * timeout, a reconnect's failure) lets the held batch go; a full batch
 * goes at once as ever; the client's teardown fails it with the rest. A
 * held batch still goes before any later request that may see it (one in
 * the queue's slot, or of no known slot) and before a later completion or
 * failure sent on its connection, so that never overtakes it on the wire
 * (before_send). Completions are not clocked this way: held back, the
 * free slots they offer for push delivery come late, and the idle workers
 * claim instead (measured: bench/README.md, "Redis Cluster").
 *
 * A batch whose jobs all have caller ids is idempotent (an existing id is
 * reported, never written twice), so it is re-sent after a reconnect
 * instead of failing with RJQ_ECONN. Jobs with and without ids never share
 * a batch: the batch gathered so far goes out first, so call order holds.
 *
 * Made ids (docs/sharding.md 6a). A sharded queue's front gives each
 * anonymous job an id made for it alone (shard_ids.c) and says so around
 * its call (rjq__enqueue_made_ids): such an id goes with a leading ' ',
 * which no caller id has, and the script writes the job as new without
 * looking the id up (enqueue.lua "Made ids": the anonymous path's
 * commands) when the call is one of its own. So the call is not re-sent
 * as it is after a lost connection (it may have run: its jobs would be
 * written twice): it goes without RJQ__REQ_RETRY, its arguments kept, and
 * when it ends with RJQ_ECONN or RJQ_ETIMEDOUT it goes again with each
 * mark made a '\t' (looked up as any caller id) and may be re-sent from
 * then on (resend_checked), so such batches stay idempotent as caller-id
 * batches are. A batch sent as several calls (flush_parts) is looked up
 * by the script whatever its marks.
 *
 * Three batches per queue: [0] plain, [1] recording a reply channel
 * (enqueue + await; the channel is the client's, so it is one per batch),
 * [2] jobs with a group (README "Groups"): sent to genqueue.lua, one call
 * for all of a turn's group jobs whatever their groups, each with its
 * group, under the same rules (an entry admitted whole or refused whole,
 * by the queue's bound or a group's; call order; re-sent when every job
 * has an id; self-clocked). Such a batch never goes as several calls nor
 * with its payloads ahead (a batch past RJQ__ENQUEUE_BYTES goes as one
 * call), and made ids are looked up as caller ids in it.
 *
 * Payloads ahead. Redis' Lua hashes every byte of every string that enters
 * a script, so payloads of KiB cost the enqueue script more than all else
 * it does. A batch of anonymous jobs of priority 0 whose payloads are
 * AHEAD_MIN_PAYLOAD bytes or more on average goes, when the queue's pool
 * of reserved job numbers can give it numbers in a row, as one
 * transaction: MULTI, the enqueue script's check, an HSETNX of each
 * payload into the payload column under its number, the enqueue script
 * with the numbers and no payloads, EXEC (enqueue.lua, "Payloads ahead").
 * The script refuses it whole and deletes what it wrote when it refuses it
 * at all; when the server lost the reservation (RJQSTALE) that range is
 * dropped and the batch sent again the usual way (and so when the user may
 * not run HSETNX: NOPERM, then the handle keeps to the usual way). The
 * pool is filled by reserve.lua, AHEAD_RESERVE_MIN numbers or more at a
 * time, once an eligible batch landed and whenever the range in use has
 * fewer than two batches' worth left; the new range takes over when the
 * old one cannot serve a batch, and the old one's record goes with the
 * next batch. Numbers are not reused: those a pool still held when a
 * producer stopped are never given to a job (so anonymous ids may skip
 * numbers; enqueued still counts jobs).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deps.h"
#include "enqueue.h"
#include "headers.h"
#include "history.h"

/* Who gets the result of one enqueued job, or of a run of them. */
typedef struct item {
    rjq_enqueue_cb *cb;       /* user callback (cb or fn) */
    void *data;
    rjq__enqueued_fn *fn;     /* internal callback */
    size_t group;             /* jobs this entry reports (0: part of the previous) */
    size_t off;               /* where the job's arguments start in the batch's */
} item;

/* Enqueues gathered during one loop turn, sent as one script call. */
typedef struct batch {
    rjq__buf args;
    int nargs;
    int all_ids;              /* every job has a caller id: re-sendable */
    int plain;                /* every job is anonymous, of priority 0 */
    int made;                 /* jobs with made ids (" <id>"): not re-sent as is */
    int grouped;              /* jobs of groups (genqueue.lua: b[2]) */
    size_t payload_bytes;     /* of all its jobs' payloads */
    size_t fixed_len;         /* the arguments every call repeats (up to ARGV 3) */
    int fixed_nargs;
    item *items;              /* one per job */
    size_t n, cap;
} batch;

#define DROP_MAX 192

/* A range of job numbers reserved for payloads ahead, lo..hi, recorded as
 * "<lo>-<hi>-<nonce>" (lo 0: none). */
typedef struct range {
    unsigned long long lo, hi;
    char nonce[16];
    uint64_t made_ms;
} range;

/* The queue's numbers for payloads ahead. */
typedef struct pool {
    range cur;                /* batches take their numbers from it, */
    unsigned long long next;  /* ... this one next (past hi: none left) */
    range nxt;                /* reserved while cur still had numbers: used
                                 once cur cannot serve a batch */
    char drop[DROP_MAX];      /* the records of ranges left with numbers
                                 unused, comma-separated, dropped by the
                                 next batch sent ahead ("": none; one that
                                 does not fit is left to reserve.lua's
                                 sweep of records a day old) */
    char asked[16];           /* the nonce of the reserve request out */
    int asking;               /* (it holds the queue: rjq__queue_hold) */
    rjq_queue *q;
    int off;                  /* the server refused HSETNX or reserve.lua
                                 (ACL NOPERM): the usual way from now on */
} pool;

#define NBATCH 3 /* a part's batches (b[]) */

typedef struct part {
    batch b[NBATCH];          /* plain, recording a reply channel, of groups */
    pool pool;
    rjq__buf pre;             /* send_ahead's HSETNX commands (reused) */
    rjq__buf spare;           /* a batch's argument buffer back from a batch
                                 sent ahead, for the next one (reused: a
                                 buffer new per batch cost page faults) */
    size_t inflight;          /* enqueue calls out: the tick holds b[] back */
    unsigned long sent;       /* enqueue calls made (rjq__enqueue_calls) */
    /* the queue's index declaration as learnt (rjq.h "The index of
     * declared JSON fields"): passed to the script as its last argument */
    char index[RJQ_INDEX_FIELDS_MAX * (RJQ_INDEX_FIELD_MAX + 1)];
    uint64_t learnt_ms;       /* when it was read (0: never) */
    int learning;             /* a read is out (it holds the queue) */
    int format;               /* the queue's data format as learnt with the
                                 index (meta "format"; 2, else 1: rjq.h
                                 rjq_queue_set_format): passed to the lean
                                 enqueue, which checks it */
} part;

static const char *index_of(rjq_queue *q);
static void learn(rjq_queue *q, part *p);

/* A batch goes with its payloads ahead when they average this much or
 * more (below it the MULTI and an HSETNX per job cost Redis more than Lua
 * hashing the payloads does). */
#define AHEAD_MIN_PAYLOAD 1024
/* ... and when the batch has this many jobs or more: a single job (an
 * awaited one, mostly) is one script call the usual way, against a
 * MULTI, two script calls, an HSETNX and an EXEC ahead (callgrind, per
 * job: bench/README.md "Redis work per job"). */
#define AHEAD_MIN_JOBS 2
/* Numbers a pool asks for at least (and 8 batches' worth at most 65536). */
#define AHEAD_RESERVE_MIN 1024
#define AHEAD_RESERVE_MAX 65536
/* A pool this old is dropped rather than used (reserve.lua forgets a
 * reservation after a day). */
#define AHEAD_POOL_MAX_AGE_MS (3600u * 1000u)

/* A buffer is kept for the next batch up to this size. */
#define KEEP_MAX (1u << 20)

/* The client's enqueue state: jobs batched on all its queues. */
typedef struct enqueues {
    size_t pending;
    /* the made ids of the call being made (rjq__enqueue_made_ids) */
    const char *made;
    size_t made_n, made_stride;
} enqueues;

/* The options argument of a job: its options text opts, then with headers
 * '\n' and their text (headers.h). */
static void put_options(rjq__buf *a, const char *opts, const rjq_job_options *o) {
    if (o == NULL || o->nheaders == 0) {
        rjq__buf_arg_str(a, opts);
        return;
    }
    size_t len;
    char *t = rjq__headers_options_text(opts, o->headers, o->nheaders, &len);
    if (t == NULL) {
        a->oom = 1;
        return;
    }
    rjq__buf_arg(a, t, len);
    free(t);
}

/* ---- replies ------------------------------------------------------------ */

/* What a batch sent with its payloads ahead keeps until its answer. */
typedef struct ahead {
    batch kept;               /* its usual form (no items: the sent_batch's),
                                 to be sent again that way (RJQSTALE, NOPERM) */
    char member[64];          /* the record of the range its numbers came from, */
    int last_of_range;        /* ... whose last number it has, */
    char drop[DROP_MAX];      /* ... and the records it was to drop */
} ahead;

typedef struct sent_batch {
    size_t n;
    int nparts;               /* > 0: sent as that many calls (flush_parts) */
    rjq_queue *q;
    int want_pool;            /* could have gone ahead: fill the pool once it lands */
    ahead *ah;                /* sent with its payloads ahead (else NULL) */
    rjq__buf kept;            /* a batch of made ids sent as one call: its
                                 arguments, to go again looked up */
    int kept_nargs;
    item items[];
} sent_batch;

/* The reply has, per job, its id (a string) and whether it existed (0; 1;
 * 2: existed, and a debounce replaced its payload), or, for a job of an
 * entry a bounded queue refused, the refusal's text and -1 (enqueue.lua:
 * the entry is refused whole). */
static int reply_ok(const redisReply *r, const item *items, size_t n) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 * n) return 0;
    for (size_t i = 0; i < n; i++)
        if (r->element[2 * i]->type != REDIS_REPLY_STRING ||
            r->element[2 * i + 1]->type != REDIS_REPLY_INTEGER ||
            r->element[2 * i + 1]->integer < -1 || r->element[2 * i + 1]->integer > 2 ||
            (r->element[2 * i + 1]->integer == -1 &&
             strncmp(r->element[2 * i]->str, "RJQFULL ", 8) != 0))
            return 0;
    for (size_t i = 0; i < n;) { /* an entry's jobs are all refused, or none */
        size_t g = items[i].group ? items[i].group : 1;
        if (i + g > n) return 0;
        for (size_t j = i + 1; j < i + g; j++)
            if ((r->element[2 * j + 1]->integer == -1) != (r->element[2 * i + 1]->integer == -1))
                return 0;
        i += g;
    }
    return 1;
}

/* Hand each entry its jobs' results (or the error). items must not be a
 * live batch: the callbacks may enqueue again. */
static void report(rjq_client *c, const item *items, size_t n, int status, redisReply *r) {
    size_t i = 0;
    while (i < n) {
        const item *it = &items[i];
        size_t g = it->group ? it->group : 1;
        int st = status;
        if (st == RJQ_OK && r->element[2 * i + 1]->integer == -1) { /* a bounded queue refused it */
            rjq__errmsg(c, "%s", r->element[2 * i]->str);
            st = RJQ_EFULL;
        }
        if (it->fn) {
            redisReply *id = st == RJQ_OK ? r->element[2 * i] : NULL;
            it->fn(c, st, id ? id->str : NULL, id ? id->len : 0,
                   id ? r->element[2 * i + 1]->integer != 0 : 0, it->data);
        } else if (it->cb) {
            rjq_enqueued one, *jobs = &one;
            if (st == RJQ_OK && g > 1 && (jobs = malloc(g * sizeof *jobs)) == NULL) st = RJQ_ENOMEM;
            for (size_t j = 0; st == RJQ_OK && j < g; j++) {
                jobs[j].id = r->element[2 * (i + j)]->str;
                jobs[j].existed = r->element[2 * (i + j) + 1]->integer != 0;
                jobs[j].replaced = r->element[2 * (i + j) + 1]->integer == 2;
            }
            /* done, but fewer replicas than asked have it: said, with the jobs */
            int told = st == RJQ_OK && rjq__write_short(c) ? RJQ_EREPLICAS : st;
            it->cb(c, told, st == RJQ_OK ? jobs : NULL, st == RJQ_OK ? g : 0, it->data);
            if (jobs != &one) free(jobs);
        }
        i += g;
    }
}

/* The replies of a batch sent as several calls (the EXEC's array) as one
 * reply in *flat (its elements borrowed; free flat->element): RJQ_OK, or
 * the status of the first call that failed, or RJQ_EPROTO. */
static int join_parts(rjq_client *c, const redisReply *r, int nparts, redisReply *flat) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != (size_t)nparts) return RJQ_EPROTO;
    size_t n = 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type == REDIS_REPLY_ERROR) {
            rjq__errmsg(c, "%s", e->str);
            return rjq__redis_error_code(e->str);
        }
        if (e->type != REDIS_REPLY_ARRAY) return RJQ_EPROTO;
        n += e->elements;
    }
    memset(flat, 0, sizeof *flat);
    flat->type = REDIS_REPLY_ARRAY;
    if ((flat->element = malloc((n ? n : 1) * sizeof *flat->element)) == NULL) return RJQ_ENOMEM;
    for (size_t i = 0; i < r->elements; i++)
        for (size_t j = 0; j < r->element[i]->elements; j++)
            flat->element[flat->elements++] = r->element[i]->element[j];
    return RJQ_OK;
}

static int resend_usual(sent_batch *s, int off);
static void refill(rjq_queue *q, size_t n);
static void give_back(rjq_queue *q, rjq__buf *args);
static void undropped(const sent_batch *s);

/* Whether one of p's batches has jobs. */
static int has_jobs(const part *p) {
    for (int i = 0; i < NBATCH; i++)
        if (p->b[i].n) return 1;
    return 0;
}

/* One of q's calls ended: the batches its tick held back go. */
static void call_ended(rjq_client *c, rjq_queue *q) {
    part *p = rjq__queue_part(q, RJQ__PART_ENQUEUE);
    RJQ_ASSERT(p != NULL && p->inflight > 0); /* (counted by flush_batch) */
    if (--p->inflight == 0 && has_jobs(p) && !rjq__closing(c)) rjq__queue_kick(q);
}

static int resend_checked(sent_batch *s);

static void on_enqueued(rjq_client *c, int status, redisReply *r, void *priv) {
    sent_batch *b = priv;
    rjq_queue *q = b->q; /* held while b is out (flush_batch) */
    redisReply flat = {0};
    if (b->kept.p != NULL || b->kept.oom) { /* made ids (see "Made ids" above) */
        if ((status == RJQ_ECONN || status == RJQ_ETIMEDOUT) && resend_checked(b) == RJQ_OK)
            return;
        give_back(q, &b->kept);
    }
    if (b->ah) {
        /* the EXEC's array: the check's reply, the HSETNX replies, then the
         * enqueue's */
        if (status == RJQ_OK) {
            if (r->type != REDIS_REPLY_ARRAY || r->elements != b->n + 2) {
                rjq__errmsg(c, "enqueue: unexpected reply");
                status = RJQ_EPROTO;
            } else if ((r = r->element[b->n + 1])->type == REDIS_REPLY_ERROR) {
                rjq__errmsg(c, "%s", r->str);
                status = rjq__redis_error_code(r->str);
            }
        }
        /* the server lost the reservation, or this user may not run
         * HSETNX: the usual way */
        if (r && r->type == REDIS_REPLY_ERROR &&
            ((status == RJQ_EREDIS && strncmp(r->str, "RJQSTALE", 8) == 0) ||
             (status == RJQ_EAUTH && strncmp(r->str, "NOPERM", 6) == 0)) &&
            resend_usual(b, status == RJQ_EAUTH) == RJQ_OK)
            return;
        if (status != RJQ_OK) undropped(b);
        give_back(b->q, &b->ah->kept.args);
        free(b->ah);
        b->ah = NULL;
    }
    call_ended(c, q);
    if (status == RJQ_ECONN || status == RJQ_ETIMEDOUT) {
        /* the server may be another one now (a failover, a restart): the
         * queue's format and index are learnt again before a lean enqueue
         * passes format 2 (the script checks it anyway) */
        part *p = rjq__queue_part(q, RJQ__PART_ENQUEUE);
        if (p && !p->learning) {
            p->format = 1;
            p->learnt_ms = 0;
        }
    }
    if (status == RJQ_OK && b->want_pool) refill(b->q, b->n);
    if (status == RJQ_OK && b->nparts) {
        status = join_parts(c, r, b->nparts, &flat);
        r = &flat;
    }
    if (status == RJQ_OK && !reply_ok(r, b->items, b->n)) {
        rjq__errmsg(c, "enqueue: unexpected reply");
        status = RJQ_EPROTO;
    }
    if (status == RJQ_OK) { /* the new jobs (not existing ids, nor refused) */
        long long added = 0;
        for (size_t i = 0; i < b->n; i++) added += r->element[2 * i + 1]->integer == 0;
        rjq__history_enqueued(q, added);
    }
    report(c, b->items, b->n, status, r);
    free(flat.element);
    free(b);
    rjq__queue_release(q);
}

/* ---- the per-tick batch -------------------------------------------------- */

static enqueues *state_of(rjq_client *c);

/* Take the batch's jobs out of it (it is empty and reusable after). */
static void take(rjq_client *c, batch *b) {
    enqueues *e = state_of(c);
    RJQ_ASSERT(e && e->pending >= b->n);
    e->pending -= b->n;
    b->args.len = 0;
    b->args.oom = 0;
    b->nargs = 0;
    b->n = 0;
    if (b->args.cap > KEEP_MAX) rjq__buf_free(&b->args); /* don't hoard a big batch's memory */
}

/* End the batch's jobs with status: its entries are detached from it
 * before their callbacks run, so a callback that enqueues again starts a
 * fresh batch instead of growing (and reallocating) the one reported. */
static void fail_batch(rjq_client *c, batch *b, int status) {
    size_t n = b->n;
    item *items = b->items;
    b->items = NULL;
    b->cap = 0;
    take(c, b);
    report(c, items, n, status, NULL);
    free(items);
}

/* The bytes of job i's arguments in the batch. */
static size_t job_bytes(const batch *b, size_t i) {
    return (i + 1 < b->n ? b->items[i + 1].off : b->args.len) - b->items[i].off;
}

/* The length of the argument at p (RESP "$<len>\r\n<bytes>\r\n", written
 * by this file: its digits and CRLF are there): *data is where its bytes
 * start. No strtoul and strchr: a lean call steps over ~25 arguments a
 * job to its reply channel (~5k instructions a job with them). */
static size_t arg_len(const char *p, const char **data) {
    size_t len = 0;
    for (p++; *p >= '0' && *p <= '9'; p++) len = len * 10 + (size_t)(*p - '0');
    *data = p + 2;
    return len;
}

/* Job i's caller id (its first argument, "$<len>\r\n<id>\r\n"); length 0:
 * none. */
static size_t job_id(const batch *b, size_t i, const char **id) {
    return arg_len(b->args.p + b->items[i].off, id);
}

/* The base of the tokens of the jobs a call pushes to idle workers (a
 * word new for each call, then "p"; the script appends the message's
 * number), as an argument. */
static void put_token_base(rjq_queue *q, rjq__buf *a) {
    char tbase[16];
    rjq__random_word(rjq_queue_get_client(q), tbase, 10);
    strcat(tbase, "p");
    rjq__buf_arg_str(a, tbase);
}

/* The arguments of one call after the fixed ones (enqueue.lua ARGV 4..):
 * its token base for pushed jobs, the bound, then for a batch's first call
 * of several the later calls' jobs (b's from the item `later` on: how many
 * have no id, and the ids of the others), else 0 and none; the part ("":
 * alone). Returns how many arguments. */
static int call_args(rjq_queue *q, rjq__buf *a, const char *which, const batch *b,
                     size_t later) {
    put_token_base(q, a);
    rjq__buf_ll(a, rjq__queue_max_waiting(q));
    size_t anonymous = 0, ids = 0;
    const char *id;
    for (size_t i = later; b && i < b->n; i++) {
        if (job_id(b, i, &id)) ids++;
        else anonymous++;
    }
    rjq__buf_ll(a, (long long)anonymous);
    rjq__buf_arg_str(a, which);
    rjq__buf_ll(a, (long long)ids);
    for (size_t i = later; b && i < b->n; i++) {
        size_t len = job_id(b, i, &id);
        if (len) rjq__buf_arg(a, id, len);
    }
    return 5 + (int)ids;
}

/* Send a batch of more than RJQ__ENQUEUE_BYTES of arguments as several
 * calls of at most that much (one job at least) in one transaction: big
 * calls cost Redis more per job (with 16 KiB payloads, 1.4x the CPU of
 * 1 MiB calls), and the batch still lands whole (enqueue.lua, "One batch,
 * several calls"). */
static int flush_parts(rjq_queue *q, batch *b, sent_batch *s) {
    rjq_client *c = rjq_queue_get_client(q);
    size_t nparts = 0;
    for (size_t i = 0, bytes = 0; i < b->n; i++) { /* count them */
        if (i == 0 || bytes + job_bytes(b, i) > RJQ__ENQUEUE_BYTES) {
            nparts++;
            bytes = 0;
        }
        bytes += job_bytes(b, i);
    }
    rjq__buf *parts = calloc(nparts, sizeof *parts);
    int *nargs = calloc(nparts, sizeof *nargs);
    char mark[16];
    rjq__random_word(c, mark, 10);
    int rc = parts && nargs ? RJQ_OK : RJQ_ENOMEM;
    for (size_t k = 0, i = 0; rc == RJQ_OK && k < nparts; k++) {
        size_t first = i, bytes = 0;
        while (i < b->n && (i == first || bytes + job_bytes(b, i) <= RJQ__ENQUEUE_BYTES))
            bytes += job_bytes(b, i++);
        char which[80];
        snprintf(which, sizeof which, "%zu %zu %s", k + 1, nparts, mark);
        rjq__buf *a = &parts[k];
        rjq__buf_raw(a, b->args.p, b->fixed_len);
        int n = call_args(q, a, which, k == 0 ? b : NULL, i);
        rjq__buf_raw(a, b->args.p + b->items[first].off, bytes);
        rjq__buf_arg_str(a, index_of(q));
        nargs[k] = b->fixed_nargs + n + 3 * (int)(i - first) + 1;
        if (a->oom) rc = RJQ_ENOMEM;
    }
    if (rc == RJQ_OK) {
        s->nparts = (int)nparts;
        rc = rjq__script_parts(c, RJQ__S_ENQUEUE,
                               (b->all_ids ? RJQ__REQ_RETRY : 0) | RJQ__REQ_DURABLE, on_enqueued,
                               s, (int)nparts, parts, nargs);
    }
    for (size_t k = 0; parts && k < nparts; k++) rjq__buf_free(&parts[k]);
    free(parts);
    free(nargs);
    return rc;
}

/* The argument at *p (RESP "$<len>\r\n<bytes>\r\n"): its bytes and length;
 * *p moves past it. */
static const char *next_arg(const char **p, size_t *len) {
    const char *a;
    *len = arg_len(*p, &a);
    *p = a + *len + 2;
    return a;
}

/* The lean call of one job (enqueue_one.lua, docs/scripts.md "The lean
 * pair"): a batch of one new anonymous job with default options, ready at
 * once, on a queue whose bound is off and whose index fields are known to
 * be none (all the general script branches on that the client sends).
 * Returns 1 when the batch is not such a job (sent the usual way), else
 * the send's status. The reply is the general script's ({id, 0}), and
 * the call is not re-sent (an anonymous job's is not either). */
static int send_one(rjq_queue *q, batch *b, sent_batch *s) {
    if (b->n != 1 || b->made || b->all_ids || rjq__queue_max_waiting(q) != 0 || index_of(q)[0])
        return 1;
    size_t idlen, plen, olen, clen, len;
    const char *at = b->args.p + b->items[0].off;
    next_arg(&at, &idlen);
    size_t parg = (size_t)(at - b->args.p); /* where the payload's argument starts */
    const char *payload = next_arg(&at, &plen);
    size_t pend = (size_t)(at - b->args.p); /* ... and ends */
    next_arg(&at, &olen);
    if (idlen != 0 || olen != 0) return 1;
    /* the reply channel: the fixed arguments' last (start_batch) */
    at = b->args.p;
    next_arg(&at, &len); /* (the number of keys) */
    for (int i = 0; i < rjq__scripts[RJQ__S_ENQUEUE].nkeys + 2; i++) next_arg(&at, &len);
    const char *ch = next_arg(&at, &clen);
    rjq__buf a = {0};
    rjq__buf_head_room(&a); /* (taken by the request: no copy for its head) */
    rjq__buf_script_keys(&a, q, RJQ__S_ENQUEUE_ONE);
    rjq__buf_key(&a, q, RJQ__K_WAKE);
    rjq__buf_arg(&a, ch, clen);
    put_token_base(q, &a);
    part *p = rjq__queue_part(q, RJQ__PART_ENQUEUE);
    const char *format = p && p->format == 2 ? "2" : "1"; /* (enqueue_one.lua checks it) */
    int nargs = 1 + rjq__scripts[RJQ__S_ENQUEUE_ONE].nkeys + 5, rc;
    size_t lead = a.len - RJQ__HEAD_ROOM; /* the arguments before the payload */
    if (!a.oom && p && parg >= lead + RJQ__HEAD_ROOM) {
        /* The call made in the batch's own buffer, around the payload
         * where it lies (no copy of it): those arguments written in front
         * of it, with room for the head before them, the format after it
         * (over the job's options); the request takes the buffer, the
         * batch gets the spare one. */
        size_t from = parg - lead;
        memcpy(b->args.p + from, a.p + RJQ__HEAD_ROOM, lead);
        b->args.len = pend;
        rjq__buf_arg_str(&b->args, format);
        rc = b->args.oom ? RJQ_ENOMEM
                         : rjq__script_take_at(rjq_queue_get_client(q), RJQ__S_ENQUEUE_ONE,
                                               RJQ__REQ_DURABLE, on_enqueued, s, nargs, &b->args,
                                               from);
        if (rc == RJQ_OK) {
            b->args = p->spare;
            p->spare = (rjq__buf){0};
        }
        rjq__buf_free(&a);
        return rc;
    }
    rjq__buf_arg(&a, payload, plen);
    rjq__buf_arg_str(&a, format);
    rc = a.oom ? RJQ_ENOMEM
               : rjq__script_take(rjq_queue_get_client(q), RJQ__S_ENQUEUE_ONE, RJQ__REQ_DURABLE,
                                  on_enqueued, s, nargs, &a);
    rjq__buf_free(&a);
    return rc;
}

/* The batch the usual way: one script call, or several in one
 * transaction. */
static int send_usual(rjq_queue *q, batch *b, sent_batch *s) {
    rjq_client *c = rjq_queue_get_client(q);
    int one = send_one(q, b, s);
    if (one != 1) return one;
    if (b->n > 1 && b->args.len > RJQ__ENQUEUE_BYTES) return flush_parts(q, b, s);
    rjq__buf_arg_str(&b->args, index_of(q)); /* (the last argument) */
    if (b->args.oom) return RJQ_ENOMEM;
    if (b->made) { /* not re-sent as it is: kept to go again looked up */
        int rc = rjq__script_buf(c, RJQ__S_ENQUEUE, RJQ__REQ_DURABLE, on_enqueued, s,
                                 b->nargs + 1, &b->args);
        if (rc == RJQ_OK) {
            part *p = rjq__queue_part(q, RJQ__PART_ENQUEUE);
            s->kept = b->args;
            s->kept_nargs = b->nargs + 1;
            b->args = p->spare;
            p->spare = (rjq__buf){0};
        }
        return rc;
    }
    return rjq__script_buf(c, RJQ__S_ENQUEUE, (b->all_ids ? RJQ__REQ_RETRY : 0) | RJQ__REQ_DURABLE,
                           on_enqueued, s, b->nargs + 1, &b->args);
}

/* A call of made ids lost with its connection (it may have run): sent
 * again with every made id marked to be looked up ('\t': enqueue.lua), so
 * an id it wrote is reported existing and written once; re-sendable from
 * now on. */
static int resend_checked(sent_batch *s) {
    rjq_client *c = rjq_queue_get_client(s->q);
    for (size_t i = 0; i < s->n; i++) {
        const char *at; /* "$<len>\r\n<id>\r\n" */
        size_t len = arg_len(s->kept.p + s->items[i].off, &at);
        char *id = s->kept.p + (at - s->kept.p);
        if (len > 1 && id[0] == ' ') id[0] = '\t';
    }
    int rc = rjq__script_buf(c, RJQ__S_ENQUEUE, RJQ__REQ_RETRY | RJQ__REQ_DURABLE, on_enqueued, s,
                             s->kept_nargs, &s->kept);
    if (rc == RJQ_OK) give_back(s->q, &s->kept);
    return rc;
}

static void member_of(const range *r, char *out, size_t cap) {
    snprintf(out, cap, "%llu-%llu-%s", r->lo, r->hi, r->nonce);
}

/* 1 when r is the range recorded as member. */
static int is_range(const range *r, const char *member) {
    char m[64];
    member_of(r, m, sizeof m);
    return strcmp(m, member) == 0;
}

/* The argument buffer of a batch sent ahead, no longer needed: kept for
 * the queue's next batch (unless it is big or one is kept already). */
static void give_back(rjq_queue *q, rjq__buf *args) {
    part *p = rjq__queue_part(q, RJQ__PART_ENQUEUE);
    if (p && p->spare.p == NULL && args->cap <= KEEP_MAX) {
        p->spare = *args;
        p->spare.len = 0;
        p->spare.oom = 0;
    } else {
        rjq__buf_free(args);
    }
    *args = (rjq__buf){0};
}

/* A batch sent with its payloads ahead came back RJQSTALE (the server lost
 * the reservation) or NOPERM (off: this user may not write that way): send
 * it again the usual way, with the same entries. */
static int resend_usual(sent_batch *s, int off) {
    rjq_queue *q = s->q;
    rjq_client *c = rjq_queue_get_client(q);
    part *p = rjq__queue_part(q, RJQ__PART_ENQUEUE);
    if (p) { /* the rest of that range is lost too */
        if (is_range(&p->pool.cur, s->ah->member)) p->pool.cur.lo = 0;
        if (is_range(&p->pool.nxt, s->ah->member)) p->pool.nxt.lo = 0;
        if (off) p->pool.off = 1;
    }
    ahead *ah = s->ah;
    batch b = ah->kept;
    b.items = s->items;
    b.n = s->n;
    s->ah = NULL;
    int rc = send_usual(q, &b, s);
    give_back(q, &b.args);
    if (rc == RJQ_OK) {
        free(ah);
    } else {
        ah->kept.args = (rjq__buf){0};
        s->ah = ah; /* (on_enqueued reports it with the error) */
        rjq__errmsg(c, "enqueue: %s", rjq_strerror(rc));
    }
    return rc;
}

/* Have the next batch sent ahead drop the record member. */
static void to_drop(pool *pl, const char *member) {
    size_t have = strlen(pl->drop), len = strlen(member);
    if (len == 0 || have + len + 2 > sizeof pl->drop) return;
    if (have) pl->drop[have++] = ',';
    memcpy(pl->drop + have, member, len + 1);
}

/* A batch sent ahead that did not land: the records it was to drop go
 * with the next one, and so does its range's when it had the range's last
 * number (a batch that lands with it drops it). */
static void undropped(const sent_batch *s) {
    part *p = rjq__queue_part(s->q, RJQ__PART_ENQUEUE);
    if (p == NULL) return;
    char copy[DROP_MAX], *save = NULL;
    memcpy(copy, s->ah->drop, sizeof copy);
    for (char *m = strtok_r(copy, ",", &save); m; m = strtok_r(NULL, ",", &save))
        to_drop(&p->pool, m);
    if (s->ah->last_of_range) to_drop(&p->pool, s->ah->member);
}

/* The numbers left in the range in use (none before the first one). */
static size_t pool_left(const pool *pl) {
    return pl->cur.lo && pl->next <= pl->cur.hi ? (size_t)(pl->cur.hi - pl->next + 1) : 0;
}

/* Forget range r of pl; its record goes with the next batch sent ahead. */
static void forget_range(pool *pl, range *r) {
    char member[64];
    member_of(r, member, sizeof member);
    to_drop(pl, member);
    r->lo = 0;
}

/* Stop taking numbers from the range in use; its record goes with the
 * next batch sent ahead when it still has numbers (a batch that uses its
 * last number drops it). */
static void leave_range(pool *pl) {
    if (pool_left(pl)) forget_range(pl, &pl->cur);
    pl->cur.lo = 0;
}

/* 1 when the pool can give n numbers in a row (from the next range when
 * the one in use has too few). */
static int pool_serves(pool *pl, size_t n) {
    uint64_t now = rjq__now_ms();
    if (pool_left(pl) && now - pl->cur.made_ms > AHEAD_POOL_MAX_AGE_MS) leave_range(pl);
    if (pool_left(pl) >= n) return 1;
    if (pl->nxt.lo && now - pl->nxt.made_ms > AHEAD_POOL_MAX_AGE_MS)
        forget_range(pl, &pl->nxt); /* unused: dropped */
    if (pl->nxt.lo && pl->nxt.hi - pl->nxt.lo + 1 >= n) {
        leave_range(pl);
        pl->cur = pl->nxt;
        pl->next = pl->cur.lo;
        pl->nxt.lo = 0;
        return 1;
    }
    return 0;
}

static void got_reserved(pool *pl, int status, redisReply *r);

static void on_reserved(rjq_client *c, int status, redisReply *r, void *priv) {
    pool *pl = priv;
    (void)c;
    pl->asking = 0;
    got_reserved(pl, status, r);
    rjq__queue_release(pl->q); /* (held by refill) */
}

static void got_reserved(pool *pl, int status, redisReply *r) {
    if (status == RJQ_EAUTH) pl->off = 1;
    if (status != RJQ_OK || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING)
        return; /* batches go the usual way meanwhile */
    long long lo, hi; /* (at most what was asked: ids beyond it may be another client's) */
    if (rjq__parse_ll(r->element[0]->str, r->element[0]->len, 1, RJQ__TIME_MAX, &lo) != 0 ||
        rjq__parse_ll(r->element[1]->str, r->element[1]->len, lo, RJQ__TIME_MAX, &hi) != 0 ||
        hi - lo >= AHEAD_RESERVE_MAX)
        return; /* malformed: the same */
    range got = {.lo = (unsigned long long)lo, .hi = (unsigned long long)hi,
                 .made_ms = rjq__now_ms()};
    memcpy(got.nonce, pl->asked, sizeof got.nonce);
    if (pool_left(pl)) {
        pl->nxt = got;
    } else {
        pl->cur = got;
        pl->next = got.lo;
    }
}

/* Ask for numbers when q's pool has fewer than two batches of n left. */
static void refill(rjq_queue *q, size_t n) {
    part *p = rjq__queue_part(q, RJQ__PART_ENQUEUE);
    pool *pl = p ? &p->pool : NULL;
    if (pl == NULL || pl->off || pl->asking || pl->nxt.lo || pool_left(pl) >= 2 * n) return;
    size_t want = 8 * n;
    if (want < AHEAD_RESERVE_MIN) want = AHEAD_RESERVE_MIN;
    if (want > AHEAD_RESERVE_MAX) want = AHEAD_RESERVE_MAX;
    rjq__buf a = {0};
    char num[24];
    rjq__buf_script_keys(&a, q, RJQ__S_RESERVE);
    snprintf(num, sizeof num, "%zu", want);
    rjq__buf_arg_str(&a, num);
    rjq__random_word(rjq_queue_get_client(q), pl->asked, 10);
    rjq__buf_arg_str(&a, pl->asked);
    if (rjq__script_buf(rjq_queue_get_client(q), RJQ__S_RESERVE, 0, on_reserved, pl,
                         1 + rjq__scripts[RJQ__S_RESERVE].nkeys + 2, &a) ==
        RJQ_OK) {
        pl->asking = 1;
        rjq__queue_hold(q);
    }
    rjq__buf_free(&a);
}

/* The batch with its payloads ahead (see the top of this file): the
 * check, one HSETNX per job under numbers from the pool, then the script
 * with them and no payloads, in one transaction. */
static int send_ahead(rjq_queue *q, part *p, batch *b, sent_batch *s) {
    rjq_client *c = rjq_queue_get_client(q);
    pool *pl = &p->pool;
    rjq__buf *pre = &p->pre, calls[2] = {{0}};
    pre->len = 0;
    pre->oom = 0;
    size_t *ends = malloc(b->n * sizeof *ends);
    ahead *ah = calloc(1, sizeof *ah);
    char which[320], num[24];
    if (ah == NULL) {
        free(ends);
        return RJQ_ENOMEM;
    }
    const char *member = ah->member;
    member_of(&pl->cur, ah->member, sizeof ah->member);
    int nargs[2];
    snprintf(which, sizeof which, "C %s %llu %zu", member, pl->next, b->n);
    rjq__buf_raw(&calls[0], b->args.p, b->fixed_len);
    nargs[0] = b->fixed_nargs + call_args(q, &calls[0], which, NULL, 0);
    snprintf(which, sizeof which, "R %s %s", member, pl->drop[0] ? pl->drop : "-");
    rjq__buf_raw(&calls[1], b->args.p, b->fixed_len);
    nargs[1] = b->fixed_nargs + call_args(q, &calls[1], which, NULL, 0) + 3 * (int)b->n;
    for (size_t i = 0; ends && i < b->n; i++) {
        size_t idlen, plen, olen;
        const char *at = b->args.p + b->items[i].off;
        next_arg(&at, &idlen);
        const char *payload = next_arg(&at, &plen);
        const char *opts = next_arg(&at, &olen);
        RJQ_ASSERT(idlen == 0);
        snprintf(num, sizeof num, "%llu", pl->next + i);
        rjq__buf_raw(pre, "*4\r\n", 4);
        rjq__buf_arg_str(pre, "HSETNX");
        rjq__buf_key(pre, q, RJQ__K_PAYLOAD);
        rjq__buf_arg_str(pre, num);
        rjq__buf_arg(pre, payload, plen);
        ends[i] = pre->len;
        rjq__buf_arg_str(&calls[1], num);
        rjq__buf_arg(&calls[1], "", 0);
        rjq__buf_arg(&calls[1], opts, olen);
    }
    for (int k = 0; k < 2; k++) {
        rjq__buf_arg_str(&calls[k], index_of(q));
        nargs[k]++;
    }
    int rc = ends ? RJQ_OK : RJQ_ENOMEM;
    if (rc == RJQ_OK) {
        memcpy(ah->drop, pl->drop, sizeof ah->drop);
        ah->last_of_range = pl->next + b->n - 1 == pl->cur.hi;
        s->ah = ah;
        rc = rjq__script_parts_after(c, RJQ__S_ENQUEUE, RJQ__REQ_DURABLE, on_enqueued, s, pre,
                                     ends, (int)b->n, 1, 2, calls, nargs);
    }
    if (rc == RJQ_OK) {
        pl->next += b->n;
        pl->drop[0] = '\0';
        /* kept to be sent again the usual way (RJQSTALE), its items aside */
        ah->kept = *b;
        ah->kept.items = NULL;
        b->args = p->spare;
        p->spare = (rjq__buf){0};
    } else {
        s->ah = NULL;
        free(ah);
    }
    if (pre->cap > KEEP_MAX) rjq__buf_free(pre); /* don't hoard a big batch's memory */
    rjq__buf_free(&calls[0]);
    rjq__buf_free(&calls[1]);
    free(ends);
    return rc;
}

/* A batch of group jobs: one genqueue.lua call (see the top of this file). */
static int send_grouped(rjq_queue *q, batch *b, sent_batch *s) {
    return rjq__script_buf(rjq_queue_get_client(q), RJQ__S_GENQUEUE,
                           (b->all_ids ? RJQ__REQ_RETRY : 0) | RJQ__REQ_DURABLE, on_enqueued, s,
                           b->nargs, &b->args);
}

/* Send the batch: with its payloads ahead when it can, else the usual way. */
static void flush_batch(rjq_queue *q, batch *b) {
    if (b->n == 0) return;
    rjq_client *c = rjq_queue_get_client(q);
    part *p = rjq__queue_part(q, RJQ__PART_ENQUEUE);
    sent_batch *s = malloc(sizeof *s + b->n * sizeof s->items[0]);
    int rc = RJQ_ENOMEM;
    if (s) {
        *s = (sent_batch){.n = b->n, .q = q};
        memcpy(s->items, b->items, b->n * sizeof s->items[0]);
        pool *pl = &p->pool;
        rc = -1;
        /* (payloads ahead never pass through the script: not on a queue
         * with an index, nor before the declaration is known, "?") */
        const char *ix = index_of(q);
        if (b->plain && !pl->off && (!ix[0] || !strcmp(ix, "?")) && b->n >= AHEAD_MIN_JOBS && b->payload_bytes >= AHEAD_MIN_PAYLOAD * b->n) {
            if (!ix[0] && pool_serves(pl, b->n) && (rc = send_ahead(q, p, b, s)) == RJQ_OK) {
                refill(q, b->n);
            } else {
                /* the pool is filled once this one landed: a batch the
                 * server refuses leaves nothing, not even a reservation */
                s->want_pool = 1;
            }
        }
        if (rc != RJQ_OK) rc = b->grouped ? send_grouped(q, b, s) : send_usual(q, b, s);
    }
    if (rc == RJQ_OK) {
        rjq__queue_hold(q); /* released by on_enqueued */
        p->inflight++; /* (call_ended) */
        p->sent++;
        take(c, b);
        return;
    }
    free(s);
    rjq__errmsg(c, "enqueue: %s", rjq_strerror(rc));
    fail_batch(c, b, rc);
}

/* ---- the index declaration (rjq.h "The index of declared JSON fields") -- */

/* The script's last argument: the fields learnt, or "?" before the first
 * answer (the script reads the declaration then: enqueue.lua "Index"). */
static const char *index_of(rjq_queue *q) {
    part *p = rjq__queue_part(q, RJQ__PART_ENQUEUE);
    return p == NULL || p->learnt_ms == 0 ? "?" : p->index;
}

void rjq__enqueue_index_learnt(rjq_queue *q, const char *fields, size_t len) {
    /* (not part_of: no enqueue state for a handle that only declares) */
    part *p = rjq__queue_part(q, RJQ__PART_ENQUEUE);
    if (p == NULL || len >= sizeof p->index || !rjq__valid_index_fields(fields, len)) return;
    memcpy(p->index, fields, len);
    p->index[len] = '\0';
    p->learnt_ms = rjq__now_ms();
}

static void on_learnt(rjq_client *c, int status, redisReply *r, void *priv) {
    rjq_queue *q = priv; /* (held) */
    part *p = rjq__queue_part(q, RJQ__PART_ENQUEUE);
    redisReply *f = NULL; /* the format field */
    if (status == RJQ_OK && r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
        f = r->element[1];
        r = r->element[0];
    } else if (status == RJQ_OK) {
        r = NULL;
    }
    /* (format 2 only when the field says exactly that; anything else: 1) */
    if (status == RJQ_OK && f)
        p->format = f->type == REDIS_REPLY_STRING && f->len == 1 && f->str[0] == '2' ? 2 : 1;
    else if (status != RJQ_ECANCELED)
        p->format = 1; /* (not known: format 1 until the next read) */
    if (status == RJQ_OK && r && r->type == REDIS_REPLY_NIL) {
        p->index[0] = '\0';
    } else if (status == RJQ_OK && r && r->type == REDIS_REPLY_STRING && r->len < sizeof p->index &&
               rjq__valid_index_fields(r->str, r->len)) {
        memcpy(p->index, r->str, r->len);
        p->index[r->len] = '\0';
    } else if (status == RJQ_OK) {
        rjq__errmsg(c, "enqueue: unexpected index declaration");
    }
    /* (whatever came: read again after the relearn time, not per batch;
     * "?" until a reply came) */
    if (status != RJQ_ECANCELED) p->learnt_ms = rjq__now_ms();
    p->learning = 0;
    rjq__queue_release(q);
}

/* Read the queue's index declaration, in the background: the batches do
 * not wait for it (before its first answer they ask the script to read
 * it, index_of). */
static void learn(rjq_queue *q, part *p) {
    rjq_client *c = rjq_queue_get_client(q);
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_str(&a, "HMGET"); /* (HMGET: an await's fetch of a big result is the HGET) */
    rjq__argv_key(&a, q, RJQ__K_META);
    rjq__argv_str(&a, "index");
    rjq__argv_str(&a, "format"); /* (the queue's data format: send_one) */
    int rc = RJQ_ENOMEM;
    rjq__queue_hold(q);
    p->learning = 1;
    if (!a.oom) rc = rjq__command(c, RJQ__REQ_BACKGROUND_READ, on_learnt, q, a.n, a.v, a.len);
    rjq__argv_free(&a);
    if (rc != RJQ_OK) {
        p->learning = 0;
        rjq__queue_release(q);
    }
}

static void flush_all(rjq_queue *q, part *p) {
    for (int i = 0; i < NBATCH; i++) flush_batch(q, &p->b[i]);
}

/* The queue's batches go, unless one of its calls is in flight: then
 * they go when its calls have ended (self-clocking, call_ended). */
static void part_tick(rjq_queue *q, void *state) {
    part *p = state;
    if (has_jobs(p) && !p->learning &&
        (p->learnt_ms == 0 || rjq__now_ms() - p->learnt_ms >= RJQ_INDEX_RELEARN_MS))
        learn(q, p);
    if (p->inflight == 0) flush_all(q, p);
}

static void part_abort(rjq_queue *q, void *state) {
    part *p = state;
    rjq_client *c = rjq_queue_get_client(q);
    for (int i = 0; i < NBATCH; i++)
        if (p->b[i].n) fail_batch(c, &p->b[i], RJQ_ECANCELED);
}

static void part_close(rjq_queue *q, void *state) {
    part *p = state;
    (void)q;
    for (int i = 0; i < NBATCH; i++) {
        rjq__buf_free(&p->b[i].args);
        free(p->b[i].items);
    }
    rjq__buf_free(&p->pre);
    rjq__buf_free(&p->spare);
    free(p);
}

static const rjq__part_ops part_ops = {part_tick, part_abort, NULL, part_close, NULL};

int rjq__enqueue_calls(rjq_queue *q, unsigned long *sent) {
    part *p = rjq__queue_part(q, RJQ__PART_ENQUEUE);
    *sent = p ? p->sent : 0;
    return p != NULL && p->inflight > 0;
}

/* Every queue's batches go out ahead of a later request, but those held
 * back for a call in flight (part_tick) only ahead of one that may see
 * them (in their queue's slot, or of no known slot: -1) or, for a write
 * the user is told of (link), one on the same connection (the same
 * master; one server: all). */
static void before_send(rjq_client *c, void *state, int slot, int link) {
    enqueues *e = state;
    int pin = 0, pinned = 0; /* the request's master, looked up once, when needed */
    for (rjq_queue *q = rjq__queue_first(c); q && e->pending; q = rjq__queue_next(q)) {
        part *p = rjq__queue_part(q, RJQ__PART_ENQUEUE);
        if (p == NULL || !has_jobs(p)) continue;
        int qs = p->inflight == 0 || slot < 0 ? -1 : rjq__queue_slot(q);
        if (qs >= 0 && qs != slot && link && !pinned) {
            pin = rjq__route_master_pin(c, slot);
            pinned = 1;
        }
        if (qs < 0 || qs == slot || (link && rjq__route_master_pin(c, qs) == pin))
            flush_all(q, p);
    }
    if (e->pending && rjq__accepting(c)) rjq__want_flush(c); /* (held: for a later one) */
}

static void enqueues_close(rjq_client *c, void *state) {
    (void)c;
    free(state);
}

static const rjq__feature enqueue_feature = {
    .name = "enqueue", .before_send = before_send, .close = enqueues_close};

static enqueues *state_of(rjq_client *c) {
    return rjq__feature_state(c, &enqueue_feature);
}

/* The queue's enqueue part (made with the client's state on first use). */
static part *part_of(rjq_queue *q) {
    part *p = rjq__queue_part(q, RJQ__PART_ENQUEUE);
    if (p) return p;
    if (rjq__feature_ensure(rjq_queue_get_client(q), &enqueue_feature, sizeof(enqueues)) == NULL ||
        (p = calloc(1, sizeof *p)) == NULL)
        return NULL;
    p->pool.q = q;
    rjq__queue_set_part(q, RJQ__PART_ENQUEUE, &part_ops, p);
    return p;
}

/* genqueue.lua's fixed arguments: the bound, the token base. */
static void start_grouped(rjq_queue *q, batch *b) {
    rjq__buf *a = &b->args;
    rjq__buf_script_keys(a, q, RJQ__S_GENQUEUE);
    rjq__buf_ll(a, rjq__queue_max_waiting(q)); /* (it counts group jobs) */
    put_token_base(q, a);
    b->fixed_len = a->len;
    b->fixed_nargs = b->nargs = 1 + rjq__scripts[RJQ__S_GENQUEUE].nkeys + 2;
}

/* The script's fixed arguments, written when a batch starts. */
static void start_batch(rjq_queue *q, batch *b, const char *reply_channel) {
    const int nkeys = rjq__scripts[RJQ__S_ENQUEUE].nkeys;
    rjq__buf *a = &b->args;
    rjq__buf_script_keys(a, q, RJQ__S_ENQUEUE);
    rjq__buf_key(a, q, RJQ__K_JOB);
    rjq__buf_key(a, q, RJQ__K_WAKE);
    rjq__buf_arg_str(a, reply_channel ? reply_channel : "");
    b->fixed_len = a->len;
    b->fixed_nargs = 1 + nkeys + 3;
    /* one call (flush_parts makes its own) */
    b->nargs = b->fixed_nargs + call_args(q, a, "", NULL, 0);
}

/* 1 when id was made by the library for its job alone (the call being
 * made said so: rjq__enqueue_made_ids). */
static int is_made(const enqueues *e, const char *id) {
    if (e == NULL || e->made == NULL || id == NULL) return 0;
    if (e->made_n == 1) return strcmp(id, e->made) == 0; /* (an await's copy too) */
    uintptr_t at = (uintptr_t)id, lo = (uintptr_t)e->made;
    return at >= lo && at - lo < e->made_n * e->made_stride && (at - lo) % e->made_stride == 0;
}

void rjq__enqueue_made_ids(rjq_client *c, const char *ids, size_t n, size_t stride) {
    enqueues *e = ids ? rjq__feature_ensure(c, &enqueue_feature, sizeof(enqueues)) : state_of(c);
    if (e == NULL) return; /* (out of memory: looked up as caller ids) */
    e->made = ids;
    e->made_n = ids ? n : 0;
    e->made_stride = stride;
}

/* 1 when every job of the group has a caller id. */
static int group_all_ids(const rjq_enqueue_item *items, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (items[i].opts == NULL || items[i].opts->id == NULL) return 0;
    return 1;
}

static int reserve_items(batch *b, size_t more) {
    if (b->n + more <= b->cap) return RJQ_OK;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + more) cap *= 2;
    item *p = realloc(b->items, cap * sizeof *p);
    if (p == NULL) return RJQ_ENOMEM;
    b->items = p;
    b->cap = cap;
    return RJQ_OK;
}

static size_t group_bytes(const rjq_enqueue_item *items, size_t n) {
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) bytes += items[i].len + 64; /* id, options, framing */
    return bytes;
}

/* 1 when the entry's jobs have groups (all of them: a batch mixing jobs
 * with and without one is refused), 0 when none has, else RJQ_EINVAL (a
 * reply channel with a group) or the queue's RJQ_ECLOSED (each job's
 * group is checked with the job: rjq__enqueue_check_grouped). */
static int items_grouped(rjq_queue *q, const rjq_enqueue_item *items, size_t n,
                         const char *reply_channel) {
    rjq_client *c = rjq_queue_get_client(q);
    int grouped = items[0].opts && items[0].opts->group;
    for (size_t i = 0; i < n; i++)
        if ((items[i].opts && items[i].opts->group) != grouped) {
            rjq__errmsg(c, "enqueue: a batch's jobs all have a group, or none has one");
            return RJQ_EINVAL;
        }
    if (grouped && reply_channel) {
        rjq__errmsg(c, "enqueue: an awaited job has no group");
        return RJQ_EINVAL;
    }
    if (grouped) {
        int rc = rjq__queue_usable(q, "enqueue with a group");
        if (rc != RJQ_OK) return rc;
    }
    return grouped;
}

/* Append n jobs reported to one entry (cb or fn); all or nothing. */
static int add_group(rjq_queue *q, const rjq_enqueue_item *items, size_t n,
                     const char *reply_channel, rjq_enqueue_cb *cb, rjq__enqueued_fn *fn,
                     void *data) {
    rjq_client *c = rjq_queue_get_client(q);
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    int grouped = items_grouped(q, items, n, reply_channel);
    if (grouped < 0) return grouped;
    part *p = part_of(q);
    if (p == NULL) return RJQ_ENOMEM;
    batch *b = &p->b[grouped ? 2 : reply_channel ? 1 : 0];
    int ids = group_all_ids(items, n);
    /* A batch lands whole in one call: send what is gathered first when
     * this one would make the call too long or too big, or when one of
     * them may be re-sent and the other may not. */
    if (b->n > 0 && (b->n + n > RJQ_BATCH_MAX ||
                     b->args.len + group_bytes(items, n) > RJQ__ENQUEUE_BYTES || b->all_ids != ids))
        flush_batch(q, b);
    if (!rjq__accepting(c)) return RJQ_ECLOSED; /* a callback of that flush freed the client */
    if (reserve_items(b, n) != RJQ_OK) return RJQ_ENOMEM;
    size_t save_len = b->args.len, save_n = b->n;
    int save_nargs = b->nargs, rc = RJQ_OK;
    if (b->n == 0) {
        if (grouped) start_grouped(q, b);
        else start_batch(q, b, reply_channel);
        b->grouped = grouped;
        b->all_ids = ids;
        b->plain = !grouped;
        b->made = 0;
        b->payload_bytes = 0;
    }
    int save_plain = b->plain, save_made = b->made;
    const enqueues *e = state_of(c);
    size_t save_bytes = b->payload_bytes;
    for (size_t i = 0; i < n && rc == RJQ_OK; i++) {
        /* '+': admitted with the job before it (enqueue.lua), so a bounded
         * queue takes or refuses a group whole and every other job alone */
        char opts[RJQ__OPTS_MAX + 1] = "+";
        const rjq_job_options *o = items[i].opts;
        if ((rc = rjq__enqueue_check_grouped(q, &items[i], opts + 1)) != RJQ_OK) break;
        size_t off = b->args.len;
        if (o && !grouped && is_made(e, o->id)) { /* " <id>" (see "Made ids" above) */
            char marked[RJQ_JOB_ID_MAX + 2] = " ";
            size_t idlen = strlen(o->id);
            memcpy(marked + 1, o->id, idlen);
            rjq__buf_arg(&b->args, marked, idlen + 1);
            b->made = 1;
        } else {
            rjq__buf_arg_str(&b->args, o && o->id ? o->id : "");
        }
        rjq__buf_arg(&b->args, items[i].payload, items[i].len);
        put_options(&b->args, i > 0 ? opts : opts + 1, o);
        if (grouped) rjq__buf_arg_str(&b->args, o->group);
        if (o && (o->id || o->priority != 0)) b->plain = 0;
        b->payload_bytes += items[i].len;
        item *it = &b->items[b->n++];
        it->cb = cb;
        it->fn = fn;
        it->data = data;
        it->group = i == 0 ? n : 0;
        it->off = off;
    }
    if (rc == RJQ_OK && b->args.oom) rc = RJQ_ENOMEM;
    /* A batch that goes as several calls (flush_parts) is one group, which
     * a bounded queue takes or refuses whole (enqueue.lua): when this
     * group took the batch past one call's bytes (group_bytes guessed
     * short), it goes again into a batch of its own. */
    int again = rc == RJQ_OK && save_n > 0 && b->args.len > RJQ__ENQUEUE_BYTES;
    if (rc != RJQ_OK || again) { /* undo: nothing of this call is sent */
        b->args.len = save_len;
        b->args.oom = 0;
        b->nargs = save_nargs;
        b->n = save_n;
        b->plain = save_plain;
        b->made = save_made;
        b->payload_bytes = save_bytes;
        if (!again) return rc;
        flush_batch(q, b);
        return add_group(q, items, n, reply_channel, cb, fn, data); /* (b is empty now) */
    }
    RJQ_ASSERT(b->n > 0 && b->n <= RJQ_BATCH_MAX); /* (flushed above when it would be more) */
    b->nargs += (grouped ? 4 : 3) * (int)n;
    state_of(c)->pending += n;
    rjq__want_flush(c);
    rjq__queue_kick(q);
    rjq__queue_register(q);
    return RJQ_OK;
}

int rjq__enqueue_add(rjq_queue *q, const rjq_enqueue_item *it, const char *reply_channel,
                     rjq__enqueued_fn *fn, void *priv) {
    return add_group(q, it, 1, reply_channel, NULL, fn, priv);
}

int rjq__job_options_in(rjq_client *c, const rjq_job_options *given, rjq_job_options *copy,
                        const rjq_job_options **out) {
    *out = NULL;
    if (given == NULL) return RJQ_OK;
    if (rjq__sized_in(c, copy, sizeof *copy, given, "rjq_job_options") != RJQ_OK)
        return RJQ_EINVAL;
    *out = copy;
    return RJQ_OK;
}

/* The caller's items as this library reads them (rjq.h "Extensible
 * structs"): in place when they and their options are of this library's
 * sizes (or bigger with nothing set past them), else a copy in *copy (to
 * be freed) with every struct made this library's. */
static int items_in(rjq_client *c, const rjq_enqueue_item *items, size_t n,
                    const rjq_enqueue_item **out, void **copy) {
    *out = items;
    *copy = NULL;
    char why[256];
    int rc = rjq__sized_check(items, sizeof *items, "rjq_enqueue_item", why, sizeof why);
    size_t stride = items->size;
    int own = rc == RJQ_OK && stride == sizeof *items; /* usable in place */
    for (size_t i = 0; i < n && rc >= 0; i++) {
        const rjq_enqueue_item *it = (const void *)((const char *)items + i * stride);
        if (it->size != stride) {
            snprintf(why, sizeof why, "rjq_enqueue_item: item %zu has size %zu, item 0 %zu "
                     "(every item's size must be the same)", i, it->size, stride);
            rc = RJQ_EINVAL;
            break;
        }
        if (i > 0 && (rc = rjq__sized_check(it, sizeof *it, "rjq_enqueue_item", why,
                                            sizeof why)) < 0)
            break;
        rjq_enqueue_item head; /* its fields this library knows */
        rjq__sized_copy(&head, sizeof head, it);
        if (head.opts == NULL) continue;
        int orc = rjq__sized_check(head.opts, sizeof *head.opts, "rjq_job_options", why,
                                   sizeof why);
        if (orc != RJQ_OK) own = 0;
        if (orc < 0) rc = orc;
    }
    if (rc < 0) {
        rjq__errmsg(c, "%s", why);
        return RJQ_EINVAL;
    }
    if (own) return RJQ_OK;
    rjq_enqueue_item *its = malloc(n * (sizeof *its + sizeof(rjq_job_options)));
    if (its == NULL) return RJQ_ENOMEM;
    rjq_job_options *jos = (rjq_job_options *)(its + n);
    for (size_t i = 0; i < n; i++) {
        rjq__sized_copy(&its[i], sizeof its[i], (const char *)items + i * stride);
        if (its[i].opts == NULL) continue;
        rjq__sized_copy(&jos[i], sizeof jos[i], its[i].opts);
        its[i].opts = &jos[i];
    }
    *out = its;
    *copy = its;
    return RJQ_OK;
}

/* The public calls enter the client: a flush inside may run callbacks of
 * earlier enqueues, which may free the client (then freed on leave).
 * items are this library's (items_in). */
static int enqueue_items(rjq_queue *q, const rjq_enqueue_item *items, size_t n,
                         rjq_enqueue_cb *cb, void *data) {
    rjq_client *c = rjq_queue_get_client(q);
    rjq__enter(c);
    int rc = add_group(q, items, n, NULL, cb, NULL, data);
    rjq__leave(c);
    return rc;
}

int rjq__enqueue_batch_one(rjq_queue *q, const rjq_enqueue_item *given, size_t n,
                           rjq_enqueue_cb *cb, void *data) {
    if (q == NULL || given == NULL || n == 0 || n > RJQ_BATCH_MAX) return RJQ_EINVAL;
    const rjq_enqueue_item *items;
    void *copy;
    int rc = items_in(rjq_queue_get_client(q), given, n, &items, &copy);
    if (rc != RJQ_OK) return rc;
    rc = enqueue_items(q, items, n, cb, data);
    free(copy);
    return rc;
}

int rjq__enqueue_one(rjq_queue *q, const void *payload, size_t len, const rjq_job_options *opts,
                     rjq_enqueue_cb *cb, void *data) {
    if (q == NULL) return RJQ_EINVAL;
    rjq_job_options copy;
    const rjq_job_options *o;
    if (rjq__job_options_in(rjq_queue_get_client(q), opts, &copy, &o) != RJQ_OK) return RJQ_EINVAL;
    if (o && (o->after || o->n_after)) return rjq__deps_enqueue(q, payload, len, o, cb, data);
    rjq_enqueue_item it = {sizeof it, payload, len, o}; /* (this library's: no items_in) */
    return enqueue_items(q, &it, 1, cb, data);
}

const rjq_enqueued *rjq_enqueued_get(const rjq_enqueued *jobs, size_t i) {
    return jobs ? &jobs[i] : NULL;
}
