/*
 * The PostgreSQL outbox bridge (bridge.h).
 *
 * Two PostgreSQL connections and one rjq client share the loop:
 *
 * - the claimers move rows (o.claims lanes, each its own connection). A
 *   claim is a transaction held open across the Redis round trip: BEGIN
 *   and SELECT ... FOR UPDATE SKIP LOCKED (one segment), the rows
 *   enqueued with "pg-<id>" as job ids, then the rows Redis acknowledged
 *   marked migrated (and rows that cannot become jobs marked failed) with
 *   COMMIT (one segment). A crash or a lost connection before the COMMIT
 *   rolls the rows back to queued; whoever claims them next enqueues the
 *   same ids, which rjq reports as existing (and keeps reserved dedup_ms
 *   after the job ends), so each row reaches Redis once. Claim states:
 *   IDLE -> SELECTING -> ENQUEUING -> MARKING -> IDLE. Claims overlap
 *   (pipelining the round trips and the two servers' fsyncs): while one
 *   lane's rows are in Redis or being committed, another selects the next
 *   rows (SKIP LOCKED passes over the first's). At most one lane selects
 *   at a time and each lane sends its enqueue as its rows arrive, so
 *   claims reach Redis in claim order (priority, then id), as with one.
 * - the writer LISTENs for new rows and writes outcomes back, in
 *   batches, each batch one implicit transaction.
 * - outcomes come from each queue's monitor: a final event (completed,
 *   dead, cancelled) of a followed job makes the bridge read its record
 *   and write it; after every "resync" (rjq_monitor_enable_resyncs: the
 *   subscription was made again or the monitored flag had lapsed, so
 *   events may have been lost) every job followed on that queue is read
 *   again, and a row pended meanwhile is read at its mark (a job Redis
 *   lost answers "not found", and its row goes back to queued to be moved
 *   again). A row moved by this bridge's claim after the last resync is
 *   not read at its mark: its events all arrive. processing and
 *   retry_scheduled come from the same events (at most once, so only for
 *   those in-between states). A queue's claims wait for its first resync
 *   (HOLD_MS at most) before they enqueue: a bridge started onto a
 *   backlog would otherwise read the job of every row it moved before
 *   that. --follow-await (or a queue without a
 *   monitor) awaits each migrated job instead. Rows the bridge did not migrate in
 *   this run (a restart, another bridge's crash) are found by a periodic
 *   scan of open rows.
 */
#include "bridge.h"

#include <assert.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <rjq/libevent.h>

#include "idmap.h"
#include "log.h"
#include "pgconn.h"
#include "rjq.h"
#include "schema.h"
#include "sqlname.h"
#include "utf8.h"

#define WRITE_BATCH 1000
#define RETRY_MS 1000 /* after a refused claim or enqueue */
#define HOLD_MS 2000  /* a queue's first resync awaited this long at most (holding) */

enum { C_IDLE, C_SELECTING, C_ENQUEUING, C_MARKING };

/* What a write does to a row (schema.h: PGB_SQL_ACTIVE, PGB_SQL_SET). */
enum {
    W_ACTIVE = 1, /* a followed job started (0: no write) */
    W_CHECK,     /* another job started: read whether its row is failed */
    W_REVIVE,    /* a failed row's job was replayed */
    W_RETRY,
    W_COMPLETED,
    W_FAILED,
    W_CANCELLED,
    W_REQUEUE,
    W_UNKNOWN,
    W_WORKER     /* the process that ran a completed job (blob: "host:pid") */
};

typedef struct qent {
    bridge *b;
    char *name;
    rjq_queue *q;
    rjq_monitor *m;
    int events;   /* outcomes from m's events (rjq_monitor_enable_resyncs), not awaits */
    long epoch;   /* m's resyncs so far (0: none yet: every follow reads its job) */
    double opened_at; /* (now_s) */
    int unheld;   /* no first resync within HOLD_MS: enqueued and read without it */
    double backoff_until; /* Redis refused its enqueue: left out of claims until then */
} qent;

typedef struct row {
    int64_t id;
    int gen; /* the row's generation (schema.h) */
    char job_id[96];
    qent *q;
    const char *payload;
    size_t len;
    int priority, max_attempts;
    long long delay_ms;
    rjq_backoff backoff;
    long long timeout_ms;
    char *bad;   /* why the row cannot become a job (owned) */
    int acked;   /* Redis has its job */
    int existed; /* ... from before this claim */
} row;

typedef struct lane {
    bridge *b;
    pgconn *pg;
    int cstate; /* C_IDLE ... */
} lane;

typedef struct claim {
    lane *ln;     /* its lane (and through it the bridge) */
    row *rows;
    int n;
    int pending;  /* enqueue callbacks still due, plus one while sending */
    unsigned gen; /* the lane's connection when the transaction began */
    char *copy;   /* held: its rows' payloads (the claim's result is gone) */
    struct claim *next_held;
} claim;

typedef struct group {
    claim *cl;
    int *idx; /* rows of one queue, in claim order */
    int n;
} group;

typedef struct follow {
    bridge *b;
    int64_t id;
    int gen;
    qent *q;
    int existed; /* the enqueue found the job existing */
    int pending; /* enqueued, its row not yet marked: no await yet */
    int seen;    /* meanwhile: the last start or retry seen (W_ACTIVE, W_RETRY), or 0 */
    /* followed by events (q->events): */
    int evt;     /* 1: this entry follows by events (no await owns it) */
    long epoch;  /* its queue's resyncs when it was pended */
    int ended;   /* a final event seen (W_COMPLETED, W_FAILED, W_CANCELLED), or 0 */
    int inflight, recheck, retry; /* its job read: in flight, again after it, after an error */
} follow;

typedef struct final_read {
    bridge *b;
    int64_t id;
    int gen;
    qent *q;
    int status;
    char *blob; /* the await's result or error */
    size_t len;
    struct final_read *next; /* in b->rereads */
} final_read;

typedef struct wentry {
    int64_t id;
    int gen; /* the row's generation the write is for */
    int kind;
    char *blob; /* result (W_COMPLETED) or error text */
    size_t len;
    int attempts; /* -1: unchanged */
    char *last_error; /* the job's last failure text (NULL: unchanged) */
    long long started_ms, ended_ms; /* rjq's record's times (0: none: now()) */
    size_t seq;   /* place in its batch before sorting */
} wentry;

/* A completed job's worker to find in the process registry. */
typedef struct wlookup {
    int64_t id;
    int gen;
    char client[128]; /* the client id its token starts with */
    struct wlookup *next;
} wlookup;

/* A live process of the registry: client id -> "host:pid". */
typedef struct proc_ent {
    char client[128];
    char where[320];
} proc_ent;

typedef struct wbatch {
    bridge *b;
    wentry *e;
    size_t n;
    unsigned gen;
} wbatch;

struct bridge {
    bridge_options o;
    char job_prefix[64]; /* "pg-", or "pg-<table>-" for another table than rjq_jobs */
    struct { /* schema.h's statements for o.table (sqlname.h) */
        char *claim, *migrated, *bad, *active, *worker, *failed_row, *set, *scan, *depth, *lag;
    } sql;
    struct event_base *base;
    rjq_client *c;
    lane *lanes; /* o.claims of them */
    pgconn *writer;
    qent **queues;
    size_t nq, capq;
    char *queues_param; /* text[] literal of o.queues, or NULL */
    /* claims */
    int want;           /* claim again when a lane is free */
    struct event *poll, *retry;
    struct event *backoff;  /* a queue's backoff ends */
    claim *held, **held_tail; /* claims waiting for a queue's first resync (holding), in order */
    struct event *hold;     /* ... HOLD_MS at most */
    /* follows */
    idmap follows;
    int reconciling;
    int64_t scan_after;
    struct event *reconcile;
    /* writes */
    wentry *w;
    size_t wn, wcap;
    wbatch *writing;
    size_t write_single;    /* this many writes go one per batch (to find a bad one) */
    struct event *write_retry;
    int reads;              /* job reads in flight (their writes are still to come) */
    final_read *rereads;    /* job reads a transient error ended: sent again */
    int recheck_due;        /* some follows' reads (retry) wait for the reread timer */
    wlookup *lookups;       /* workers to find once the process listing is read */
    int listing;            /* a process listing is in flight */
    long list_offset;
    proc_ent *procs, *next_procs; /* the last listing; the one being read */
    size_t nprocs, nnext;
    struct event *reread;   /* ... when this fires */
    /* report */
    struct event *report;
    int reporting;
    long long moved, existed, bad, requeued, unknown, completed, failed, cancelled;
    long long job_reads;    /* job records read for an outcome */
    long long moved_at_report;
    double report_at;
    /* stop */
    int stopping, closing, closed, freeing;
    struct event *deadline;
};

static void claim_next(bridge *b);
static void flush_writes(bridge *b);
static void stop_check(bridge *b);
static void follow_row(bridge *b, int64_t id, int gen, qent *q, int existed, int claimed);
static char *array_literal(char **names, size_t n);

/* ---- small helpers ---------------------------------------------------------- */

static void logf_(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A log line at level "info" or "warn" (tools/log.c: text with the time
 * first, or one JSON object with --log-format json). */
static void logf_(const char *level, const char *fmt, ...) {
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    log_line(level, NULL, 0, "%s", line);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A libpq message without its trailing newline. */
static const char *oneline(const char *s, char *buf, size_t size) {
    snprintf(buf, size, "%s", s ? s : "");
    size_t n = strlen(buf);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) buf[--n] = '\0';
    return buf;
}

static int64_t be64(const char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | (unsigned char)p[i];
    return (int64_t)v;
}

static int32_t be32(const char *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v = v << 8 | (unsigned char)p[i];
    return (int32_t)v;
}

/* Bytes that are not valid UTF-8 become '?' (a text column takes UTF-8
 * only); a NUL ends the text. */
static char *utf8_text(const char *s, size_t len) {
    char *out = malloc(len + 1);
    if (out == NULL) return NULL;
    size_t i = 0, o = 0;
    while (i < len && s[i] != '\0') {
        size_t n = utf8_char_len((const unsigned char *)s + i, len - i);
        if (n == 0) {
            out[o++] = '?';
            i++;
            continue;
        }
        memcpy(out + o, s + i, n);
        o += n;
        i += n;
    }
    out[o] = '\0';
    return out;
}

/* "<prefix><id>" (generation 0) or "<prefix><id>-<generation>"
 * (1..INT_MAX), prefix b->job_prefix. */
static int parse_job_id(const bridge *b, const char *job_id, int64_t *id, int *gen) {
    size_t plen = strlen(b->job_prefix);
    if (strncmp(job_id, b->job_prefix, plen) != 0) return -1;
    const char *s = job_id + plen;
    if (*s < '1' || *s > '9') return -1;
    int64_t v = 0;
    for (; *s && *s != '-'; s++) {
        if (*s < '0' || *s > '9' || v > (INT64_MAX - 9) / 10) return -1;
        v = v * 10 + (*s - '0');
    }
    long g = 0;
    if (*s == '-') {
        s++;
        if (*s < '1' || *s > '9') return -1;
        for (; *s; s++) {
            if (*s < '0' || *s > '9' || g > (INT_MAX - 9) / 10) return -1;
            g = g * 10 + (*s - '0');
        }
    }
    *id = v;
    *gen = (int)g;
    return 0;
}

/* v >= 0 in decimal at p (no NUL); past its last digit (snprintf cost the
 * bridge more per row than all else it did). */
static char *put_u64(char *p, uint64_t v) {
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) *p++ = tmp[--n];
    return p;
}

/* (size: 96 bytes or more; the prefix is under 64) */
static void job_id_of(const bridge *b, int64_t id, int gen, char *buf, size_t size) {
    size_t plen = strlen(b->job_prefix);
    if (size < 96 || plen >= 64 || id < 0 || gen < 0) { /* (never: claimed ids are positive) */
        if (gen > 0) snprintf(buf, size, "%s%" PRId64 "-%d", b->job_prefix, id, gen);
        else snprintf(buf, size, "%s%" PRId64, b->job_prefix, id);
        return;
    }
    memcpy(buf, b->job_prefix, plen);
    char *p = put_u64(buf + plen, (uint64_t)id);
    if (gen > 0) {
        *p++ = '-';
        p = put_u64(p, (uint64_t)gen);
    }
    *p = '\0';
}

/* The client takes new requests (not once the stop began closing it). */
static int client_open(const bridge *b) {
    return b->c != NULL && !b->closing && !b->freeing;
}

/* A claim is in flight on some lane. */
static int claiming(const bridge *b) {
    for (int i = 0; b->lanes && i < b->o.claims; i++)
        if (b->lanes[i].cstate != C_IDLE) return 1;
    return 0;
}

/* Every claim lane's connection is up. */
static int claimers_up(const bridge *b) {
    for (int i = 0; b->lanes && i < b->o.claims; i++)
        if (b->lanes[i].pg == NULL || !pgconn_up(b->lanes[i].pg)) return 0;
    return b->lanes != NULL;
}

/* ---- queues ----------------------------------------------------------------- */

static void on_monitor(rjq_client *c, const char *event, const char *job_id, void *data);

/* q's first resync has not come yet (HOLD_MS at most): its claims'
 * enqueues wait for it, so that their rows are followed by events from
 * the start, not read at their mark (follow_row; release_held). */
static int holding(const qent *q) {
    return q && q->events && q->epoch == 0 && !q->unheld;
}

/* The handle of queue `name`, opened (and monitored) on first use; NULL
 * with why set when rjq refuses the name. */
static qent *queue_of(bridge *b, const char *name, char *why, size_t size) {
    if (!client_open(b)) {
        snprintf(why, size, "stopping");
        return NULL;
    }
    for (size_t i = 0; i < b->nq; i++)
        if (strcmp(b->queues[i]->name, name) == 0) return b->queues[i];
    if (b->nq == b->capq) {
        size_t cap = b->capq ? b->capq * 2 : 8;
        qent **q = realloc(b->queues, cap * sizeof *q);
        if (q == NULL) {
            snprintf(why, size, "out of memory");
            return NULL;
        }
        b->queues = q;
        b->capq = cap;
    }
    qent *e = calloc(1, sizeof *e);
    if (e == NULL || (e->name = strdup(name)) == NULL) {
        free(e);
        snprintf(why, size, "out of memory");
        return NULL;
    }
    e->b = b;
    int rc = rjq_queue_open(b->c, name, NULL, &e->q);
    if (rc != RJQ_OK) {
        if (rc == RJQ_EQUEUENAME)
            snprintf(why, size, "queue name \"%.200s\" is not valid for rjq (1..200 bytes, "
                                "no spaces, braces or control characters)", name);
        else
            snprintf(why, size, "queue \"%.200s\": %s", name, rjq_strerror(rc));
        free(e->name);
        free(e);
        return NULL;
    }
    rc = rjq_queue_monitor(e->q, on_monitor, e, &e->m);
    if (rc != RJQ_OK) logf_("warn", "queue %s: no monitor (%s): processing and retry_scheduled are not written", name, rjq_strerror(rc));
    else e->events = !b->o.follow_await && rjq_monitor_enable_resyncs(e->m) == RJQ_OK;
    e->opened_at = now_s();
    if (e->events && b->hold && !evtimer_pending(b->hold, NULL)) {
        struct timeval tv = {HOLD_MS / 1000, (HOLD_MS % 1000) * 1000};
        evtimer_add(b->hold, &tv);
    }
    b->queues[b->nq++] = e;
    return e;
}

/* The rjq queue of a row of queue `queue` and this priority: the queue
 * itself, or with --route-priority "<queue>:high" (priority <= high) or
 * "<queue>:low" (priority > low), built in buf. A name too long for buf
 * (rjq refuses it anyway) stays unrouted. */
static const char *route(const bridge *b, const char *queue, int priority, char *buf,
                         size_t size) {
    if (!b->o.route) return queue;
    const char *suffix = priority <= b->o.route_high ? ":high"
                         : priority > b->o.route_low ? ":low"
                                                     : NULL;
    if (suffix == NULL || (size_t)snprintf(buf, size, "%s%s", queue, suffix) >= size) return queue;
    return buf;
}

/* The queue entry a row of queue `queue` and this priority goes to (routed),
 * or NULL with why. */
static qent *row_queue(bridge *b, const char *queue, int priority, char *why, size_t size) {
    char rq[256];
    return queue_of(b, route(b, queue, priority, rq, sizeof rq), why, size);
}

/* ---- writes ----------------------------------------------------------------- */

static const char *status_of_kind(int kind) {
    switch (kind) {
    case W_RETRY: return "retry_scheduled";
    case W_COMPLETED: return "completed";
    case W_CANCELLED: return "cancelled";
    case W_REQUEUE: return "queued";
    default: return "failed"; /* W_FAILED, W_UNKNOWN */
    }
}

/* The statuses a write may follow. */
static const char *from_of_kind(int kind) {
    switch (kind) {
    case W_ACTIVE: return "{migrated,processing,retry_scheduled}";
    case W_REVIVE: return "{failed}";
    case W_RETRY: return "{migrated,processing}";
    case W_REQUEUE:
    case W_UNKNOWN: return "{migrated,processing,retry_scheduled}";
    default: return "{migrated,processing,retry_scheduled,failed}"; /* failed: a replayed dead job */
    }
}

/* Queue a write (blob and last_error copied; error texts made valid
 * UTF-8). */
/* An outcome with the times of rjq's record (0: none). */
static void add_outcome(bridge *b, int64_t id, int gen, int kind, const void *blob, size_t len,
                        int attempts, const char *last_error, long long started_ms,
                        long long ended_ms) {
    if (b->freeing) return;
    if (b->wn == b->wcap) {
        size_t cap = b->wcap ? b->wcap * 2 : 256;
        wentry *w = realloc(b->w, cap * sizeof *w);
        if (w == NULL) {
            logf_("warn", "out of memory: the outcome of row %" PRId64 " waits for the next scan", id);
            return;
        }
        b->w = w;
        b->wcap = cap;
    }
    wentry *e = &b->w[b->wn];
    memset(e, 0, sizeof *e);
    e->id = id;
    e->gen = gen;
    e->kind = kind;
    e->attempts = attempts;
    e->started_ms = started_ms;
    e->ended_ms = ended_ms;
    if (blob) {
        if (kind == W_COMPLETED) {
            e->blob = malloc(len ? len : 1);
            if (e->blob) memcpy(e->blob, blob, len);
            e->len = len;
        } else {
            e->blob = utf8_text(blob, len);
            e->len = e->blob ? strlen(e->blob) : 0;
        }
        if (e->blob == NULL) {
            logf_("warn", "out of memory: the outcome of row %" PRId64 " waits for the next scan", id);
            return;
        }
    }
    if (last_error && (e->last_error = utf8_text(last_error, strlen(last_error))) == NULL) {
        free(e->blob);
        logf_("warn", "out of memory: the outcome of row %" PRId64 " waits for the next scan", id);
        return;
    }
    b->wn++;
    flush_writes(b);
}

static void add_write_full(bridge *b, int64_t id, int gen, int kind, const void *blob, size_t len,
                           int attempts, const char *last_error) {
    add_outcome(b, id, gen, kind, blob, len, attempts, last_error, 0, 0);
}

static void add_write(bridge *b, int64_t id, int gen, int kind, const void *blob, size_t len,
                      int attempts) {
    add_write_full(b, id, gen, kind, blob, len, attempts, NULL);
}

static void free_entries(wentry *e, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(e[i].blob);
        free(e[i].last_error);
    }
    free(e);
}

/* Count the rows a write changed. */
static void count_written(bridge *b, const wentry *e, PGresult *r) {
    if (r == NULL || strcmp(PQcmdTuples(r), "1") != 0) return;
    switch (e->kind) {
    case W_COMPLETED: b->completed++; break;
    case W_FAILED: b->failed++; break;
    case W_CANCELLED: b->cancelled++; break;
    case W_REQUEUE: b->requeued++; break;
    case W_UNKNOWN: b->unknown++; break;
    default: break;
    }
}

/* Put a batch back in front of the writes waiting. */
static void unshift_writes(bridge *b, wbatch *wb) {
    wentry *w = b->wcap >= b->wn + wb->n ? b->w : realloc(b->w, (b->wn + wb->n) * sizeof *w);
    if (w == NULL) {
        logf_("warn", "out of memory: %zu outcomes wait for the next scan", wb->n);
        free_entries(wb->e, wb->n);
        return;
    }
    if (w != b->w || b->wcap < b->wn + wb->n) b->wcap = b->wn + wb->n;
    b->w = w;
    memmove(b->w + wb->n, b->w, b->wn * sizeof *b->w);
    memcpy(b->w, wb->e, wb->n * sizeof *b->w);
    b->wn += wb->n;
    free(wb->e);
}

static void on_revive_info(rjq_client *c, int status, const rjq_job_info *info, void *data);

/* A failed row whose job started: read the job; replayed, it lives again. */
static void check_revived(bridge *b, int64_t id, int gen, const char *queue, int priority) {
    char why[256], job_id[96];
    qent *q = row_queue(b, queue, priority, why, sizeof why);
    final_read *f = q ? calloc(1, sizeof *f) : NULL;
    if (f == NULL) return;
    f->b = b;
    f->id = id;
    f->gen = gen;
    f->q = q;
    job_id_of(b, id, gen, job_id, sizeof job_id);
    if (rjq_queue_get_job(q->q, job_id, on_revive_info, f) == RJQ_OK) b->reads++;
    else free(f);
}

/* SQLSTATE classes that pass: a deadlock or serialization failure (40),
 * insufficient resources (53), a lock or statement timeout (55, 57). */
static int transient(const char *sqlstate) {
    return strncmp(sqlstate, "40", 2) == 0 || strncmp(sqlstate, "53", 2) == 0 ||
           strncmp(sqlstate, "55", 2) == 0 || strncmp(sqlstate, "57", 2) == 0;
}

static void on_written(void *arg, PGresult **res, int n, const char *err,
                      const char *sqlstate) {
    wbatch *wb = arg;
    bridge *b = wb->b;
    b->writing = NULL;
    if (b->freeing) {
        free_entries(wb->e, wb->n);
        free(wb);
        return;
    }
    if (err) {
        char msg[512];
        int same = pgconn_up(b->writer) && pgconn_generation(b->writer) == wb->gen;
        if (!same) { /* the connection was lost: the writes wait for the next one, first */
            unshift_writes(b, wb);
        } else if (transient(sqlstate)) { /* again, first, in a moment */
            logf_("warn", "writing %zu outcomes: %s; again", wb->n, oneline(err, msg, sizeof msg));
            unshift_writes(b, wb);
            struct timeval tv = {0, 200 * 1000};
            evtimer_add(b->write_retry, &tv);
        } else if (wb->n > 1) { /* one of them is refused: find it, one at a time */
            logf_("warn", "writing %zu outcomes: %s; again one by one", wb->n, oneline(err, msg, sizeof msg));
            b->write_single = wb->n;
            unshift_writes(b, wb);
        } else { /* this one is refused: drop it (the next scan follows its row again) */
            logf_("warn", "the outcome of row %" PRId64 " cannot be written: %s", wb->e[0].id,
                  oneline(err, msg, sizeof msg));
            free_entries(wb->e, wb->n);
        }
        free(wb);
        if (same) flush_writes(b);
        stop_check(b);
        return;
    }
    for (size_t i = 0; i < wb->n; i++) {
        wentry *e = &wb->e[i];
        PGresult *r = (int)i < n ? res[i] : NULL;
        count_written(b, e, r);
        if (e->kind == W_CHECK && r && PQntuples(r) == 1)
            check_revived(b, e->id, e->gen, PQgetvalue(r, 0, 0), atoi(PQgetvalue(r, 0, 1)));
    }
    free_entries(wb->e, wb->n);
    free(wb);
    flush_writes(b);
    stop_check(b);
}

static void on_write_retry(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    flush_writes(arg);
}

static int by_id(const void *x, const void *y) {
    const wentry *a = x, *c = y;
    if (a->id != c->id) return a->id < c->id ? -1 : 1;
    return a->seq < c->seq ? -1 : a->seq > c->seq;
}

static void flush_writes(bridge *b) {
    if (b->writing || b->wn == 0 || b->freeing || !pgconn_up(b->writer)) return;
    if (evtimer_pending(b->write_retry, NULL)) return;
    size_t k = b->wn < WRITE_BATCH ? b->wn : WRITE_BATCH;
    if (b->write_single > 0) {
        k = 1;
        b->write_single--;
    }
    wbatch *wb = calloc(1, sizeof *wb);
    wentry *e = wb ? malloc(k * sizeof *e) : NULL;
    if (e == NULL) {
        free(wb);
        return; /* tried again with the next write */
    }
    memcpy(e, b->w, k * sizeof *e);
    memmove(b->w, b->w + k, (b->wn - k) * sizeof *b->w);
    b->wn -= k;
    /* rows in id order (each row's writes in their order): two bridges'
     * batches then lock shared rows in the same order, never in a cycle */
    for (size_t i = 0; i < k; i++) e[i].seq = i;
    qsort(e, k, sizeof *e, by_id);
    wb->b = b;
    wb->e = e;
    wb->n = k;
    wb->gen = pgconn_generation(b->writer);
    for (size_t i = 0; i < k; i++) {
        char id[24], attempts[16], gen[16];
        snprintf(id, sizeof id, "%" PRId64, e[i].id);
        snprintf(gen, sizeof gen, "%d", e[i].gen);
        if (e[i].kind == W_ACTIVE || e[i].kind == W_REVIVE) {
            const char *v[3] = {id, from_of_kind(e[i].kind), gen};
            pgconn_query(b->writer, b->sql.active, 3, v, NULL, NULL, 0);
            continue;
        }
        if (e[i].kind == W_WORKER) {
            const char *v[3] = {id, e[i].blob ? e[i].blob : "", gen};
            pgconn_query(b->writer, b->sql.worker, 3, v, NULL, NULL, 0);
            continue;
        }
        if (e[i].kind == W_CHECK) {
            const char *v[2] = {id, gen};
            pgconn_query(b->writer, b->sql.failed_row, 2, v, NULL, NULL, 0);
            continue;
        }
        snprintf(attempts, sizeof attempts, "%d", e[i].attempts);
        char started[24], ended[24];
        snprintf(started, sizeof started, "%lld", e[i].started_ms);
        snprintf(ended, sizeof ended, "%lld", e[i].ended_ms);
        int result = e[i].kind == W_COMPLETED;
        const char *v[10] = {id, status_of_kind(e[i].kind), result ? e[i].blob : NULL,
                             result ? NULL : e[i].blob, attempts, from_of_kind(e[i].kind), gen,
                             e[i].last_error, e[i].started_ms ? started : NULL,
                             e[i].ended_ms ? ended : NULL};
        int lens[10] = {0, 0, result ? (int)e[i].len : 0, 0, 0, 0, 0, 0, 0, 0};
        int fmts[10] = {0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
        if (result && e[i].blob == NULL) v[2] = ""; /* an empty result, not NULL */
        pgconn_query(b->writer, b->sql.set, 10, v, lens, fmts, 0);
    }
    b->writing = wb;
    if (pgconn_sync(b->writer, on_written, wb) != 0) /* down: back first */
        on_written(wb, NULL, 0, "connection lost", "");
}

/* ---- following outcomes -------------------------------------------------------- */

/* The kind of write for a job's stored final state; -1 when it runs on
 * (replayed since the await ended) or the state is not a final one. */
static int final_kind(const char *state) {
    if (strcmp(state, "completed") == 0) return W_COMPLETED;
    if (strcmp(state, "dead") == 0) return W_FAILED;
    if (strcmp(state, "cancelled") == 0) return W_CANCELLED;
    return -1;
}

static void on_info(rjq_client *c, int status, const rjq_job_info *info, void *data);
static void list_processes(bridge *b);

/* The "host:pid" of client id `client` in the last listing, or NULL. */
static const char *proc_where(const proc_ent *p, size_t n, const char *client) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(p[i].client, client) == 0) return p[i].where;
    return NULL;
}

/* Write the worker of a completed job: its token starts with the id of
 * the client that ran it, which the process registry maps to host and
 * pid (while that process lives: one that is gone leaves worker_id NULL). */
static void find_worker(bridge *b, int64_t id, int gen, const char *token) {
    size_t n = strcspn(token, ".");
    if (n == 0 || token[n] != '.' || n >= sizeof ((wlookup *)0)->client) return;
    char client[128];
    memcpy(client, token, n);
    client[n] = '\0';
    const char *where = proc_where(b->procs, b->nprocs, client);
    if (where) {
        add_write(b, id, gen, W_WORKER, where, strlen(where), -1);
        return;
    }
    wlookup *l = calloc(1, sizeof *l);
    if (l == NULL) return; /* worker_id stays NULL */
    l->id = id;
    l->gen = gen;
    memcpy(l->client, client, n + 1);
    l->next = b->lookups;
    b->lookups = l;
    if (!b->listing) list_processes(b);
}

static void on_processes(rjq_client *c, int status, const rjq_process *list, size_t n, void *data) {
    (void)c;
    bridge *b = data;
    b->reads--;
    b->listing = 0;
    int done = status != RJQ_OK || n < RJQ_JOBS_PAGE_MAX;
    for (size_t i = 0; status == RJQ_OK && i < n; i++) {
        proc_ent *p = realloc(b->next_procs, (b->nnext + 1) * sizeof *p);
        if (p == NULL) break;
        b->next_procs = p;
        p = &p[b->nnext];
        if (snprintf(p->client, sizeof p->client, "%s", rjq_process_get(list, i)->id) >= (int)sizeof p->client) continue;
        snprintf(p->where, sizeof p->where, "%.256s:%ld", rjq_process_get(list, i)->host, rjq_process_get(list, i)->pid);
        b->nnext++;
    }
    if (!done && !b->freeing && client_open(b)) { /* the next page */
        b->list_offset += (long)n;
        list_processes(b);
        return;
    }
    if (status == RJQ_OK) { /* the new listing replaces the last */
        free(b->procs);
        b->procs = b->next_procs;
        b->nprocs = b->nnext;
    } else {
        free(b->next_procs);
    }
    b->next_procs = NULL;
    b->nnext = 0;
    b->list_offset = 0;
    wlookup *l = b->lookups;
    b->lookups = NULL;
    while (l) {
        wlookup *next = l->next;
        const char *where = status == RJQ_OK ? proc_where(b->procs, b->nprocs, l->client) : NULL;
        if (where && !b->freeing) add_write(b, l->id, l->gen, W_WORKER, where, strlen(where), -1);
        free(l);
        l = next;
    }
    stop_check(b);
}

static void list_processes(bridge *b) {
    if (!client_open(b)) return;
    b->reads++;
    b->listing = 1;
    int rc = rjq_client_list_processes(b->c, b->list_offset, RJQ_JOBS_PAGE_MAX, on_processes, b);
    if (rc != RJQ_OK) on_processes(b->c, rc, NULL, 0, b);
}

/* Send a final read (again); on a refusal it waits for the next try. */
static void send_final_read(bridge *b, final_read *f) {
    char job_id[96];
    job_id_of(b, f->id, f->gen, job_id, sizeof job_id);
    b->reads++;
    b->job_reads++;
    int rc = client_open(b) ? rjq_queue_get_job(f->q->q, job_id, on_info, f) : RJQ_ECANCELED;
    if (rc != RJQ_OK) on_info(b->c, rc, NULL, f);
}

static void check_follow(bridge *b, follow *fw);

static void on_reread(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    bridge *b = arg;
    if (b->recheck_due) { /* follows whose read a transient error ended */
        b->recheck_due = 0;
        for (size_t i = 0; i < b->follows.cap; i++) {
            follow *fw = b->follows.slots[i].value;
            if (fw && fw->evt && fw->retry) {
                fw->retry = 0;
                check_follow(b, fw);
            }
        }
    }
    final_read *list = b->rereads;
    b->rereads = NULL;
    while (list) {
        final_read *f = list;
        list = f->next;
        f->next = NULL;
        send_final_read(b, f);
    }
}

/* Errors a read sent again at once would get again: logged, and the row
 * stays open for the next scan (--scan-ms). */
static int lasting(int status) {
    return status == RJQ_EPROTO || status == RJQ_EWRONGTYPE || status == RJQ_EAUTH ||
           status == RJQ_EJOBID || status == RJQ_EINVAL;
}

/* What rjq answered about a job's record: "it is gone" only with
 * RJQ_ENOTFOUND; any other error (the connection dropped, a timeout,
 * Redis loading) says nothing about the job, so the read is sent again. */
static void on_info(rjq_client *c, int status, const rjq_job_info *info, void *data) {
    (void)c;
    final_read *f = data;
    bridge *b = f->b;
    b->reads--;
    if (status != RJQ_OK && status != RJQ_ENOTFOUND) {
        if (lasting(status))
            logf_("warn", "reading the job of row %" PRId64 ": %s (the next scan follows it again)", f->id,
                  rjq_strerror(status));
        if (status == RJQ_ECANCELED || lasting(status) || b->stopping || b->freeing || !client_open(b)) {
            /* the row stays open: the next scan or start follows it again */
            free(f->blob);
            free(f);
            stop_check(b);
            return;
        }
        f->next = b->rereads; /* again in a moment (after the reconnect, if it is that) */
        b->rereads = f;
        if (!evtimer_pending(b->reread, NULL)) {
            struct timeval tv = {0, 200 * 1000};
            evtimer_add(b->reread, &tv);
        }
        return;
    }
    int kind = f->status == RJQ_OK ? W_COMPLETED : f->status == RJQ_EJOBDEAD ? W_FAILED : W_CANCELLED;
    if (status == RJQ_OK) {
        int now = final_kind(info->state);
        if (now < 0) { /* replayed meanwhile: it runs again */
            follow_row(b, f->id, f->gen, f->q, 0, 0);
        } else {
            /* the result, the error (or "dead"), or "cancelled"; with the
             * times of rjq's record (the server's clock) */
            const char *blob = now == W_COMPLETED ? (info->result ? info->result : "")
                               : now == W_FAILED  ? (info->error ? info->error : "dead")
                                                  : "cancelled";
            size_t len = now == W_COMPLETED ? info->result_len : strlen(blob);
            add_outcome(b, f->id, f->gen, now, blob, len, info->attempts, info->error,
                        info->started_ms, info->ended_ms);
            /* the last attempt's worker (completed, dead, or cancelled while it ran) */
            if (info->token) find_worker(b, f->id, f->gen, info->token);
        }
    } else { /* the record is gone: what the await said */
        add_write_full(b, f->id, f->gen, kind, f->blob, f->len, -1,
                       kind == W_FAILED ? f->blob : NULL);
    }
    free(f->blob);
    free(f);
    stop_check(b);
}

/* A final outcome: read the job once more for its attempts (and the
 * stored result or error), then write. */
static void final_outcome(bridge *b, follow *fw, int status, const rjq_outcome *out) {
    if (!client_open(b)) return; /* the next start follows its row again */
    final_read *f = calloc(1, sizeof *f);
    const char *text = status == RJQ_OK ? out->result
                       : status == RJQ_EJOBDEAD ? out->error
                                                : "cancelled";
    size_t len = status == RJQ_OK ? out->result_len : text ? strlen(text) : 0;
    if (f == NULL || (f->blob = malloc(len + 1)) == NULL) {
        free(f);
        logf_("warn", "out of memory: the outcome of row %" PRId64 " waits for the next scan", fw->id);
        return;
    }
    if (len) memcpy(f->blob, text, len);
    f->blob[len] = '\0';
    f->len = len;
    f->b = b;
    f->id = fw->id;
    f->gen = fw->gen;
    f->q = fw->q;
    f->status = status;
    send_final_read(b, f);
}

/* A failed row's job, read after it started: running again (replayed),
 * its row is processing again. Followed in any case: a replayed job that
 * already ended answers from its stored state (and a dead one, whose
 * start was an old one, writes what the row says already). */
static void on_revive_info(rjq_client *c, int status, const rjq_job_info *info, void *data) {
    (void)c;
    final_read *f = data;
    bridge *b = f->b;
    b->reads--;
    if (status == RJQ_OK && !b->stopping) {
        if (final_kind(info->state) < 0) add_write(b, f->id, f->gen, W_REVIVE, NULL, 0, -1);
        follow_row(b, f->id, f->gen, f->q, 0, 0);
    }
    free(f);
    stop_check(b);
}

static void on_outcome(rjq_client *c, int status, const rjq_outcome *out, void *data) {
    (void)c;
    follow *fw = data;
    bridge *b = fw->b;
    if (idmap_get(&b->follows, fw->id) == fw) idmap_del(&b->follows, fw->id);
    if (b->freeing || status == RJQ_ECANCELED) {
        free(fw);
        return;
    }
    switch (status) {
    case RJQ_OK:
    case RJQ_EJOBDEAD:
    case RJQ_EJOBCANCELED:
        final_outcome(b, fw, status, out);
        break;
    case RJQ_ENOTFOUND:
        if (fw->existed) {
            /* its id is still reserved, but its record is gone: the job
             * ended before anyone read its outcome */
            static const char why[] = "outcome unknown: the job had finished and its record "
                                      "was deleted (retention) before the bridge read it";
            add_write(b, fw->id, fw->gen, W_UNKNOWN, why, sizeof why - 1, -1);
        } else {
            add_write(b, fw->id, fw->gen, W_REQUEUE, NULL, 0, -1); /* Redis lost it: move it again */
        }
        break;
    default:
        logf_("warn", "awaiting row %" PRId64 ": %s (the next scan follows it again)", fw->id,
              rjq_strerror(status));
    }
    free(fw);
}

/* A row enqueued by a claim not yet committed: its job's events are this
 * bridge's to write from now on; the await starts once the row is marked
 * (follow_row), or the entry goes when the claim fails (unpend_row). */
static void forget_older(bridge *b, int64_t id, int gen);

static void pend_row(bridge *b, int64_t id, int gen, qent *q) {
    forget_older(b, id, gen);
    if (idmap_get(&b->follows, id) || b->follows.n >= b->o.max_follow) return;
    follow *fw = calloc(1, sizeof *fw);
    if (fw == NULL) return;
    fw->b = b;
    fw->id = id;
    fw->gen = gen;
    fw->pending = 1;
    fw->evt = q->events;
    fw->epoch = q->epoch; /* a resync before its mark: its job is read then */
    if (idmap_put(&b->follows, id, fw) != 0) free(fw);
}

static void unpend_row(bridge *b, int64_t id) {
    follow *fw = idmap_get(&b->follows, id);
    if (fw && fw->pending) {
        idmap_del(&b->follows, id);
        free(fw);
    }
}

/* A row followed for an older generation than gen is no longer that
 * job's: the entry goes (an await in flight ends by itself and finds
 * itself gone; its writes name the old generation and change nothing). */
static void forget_older(bridge *b, int64_t id, int gen) {
    follow *fw = idmap_get(&b->follows, id);
    if (fw == NULL || fw->gen >= gen) return;
    idmap_del(&b->follows, id);
    if (fw->pending || (fw->evt && !fw->inflight)) free(fw); /* (else its read or await frees it) */
}

static void follow_row(bridge *b, int64_t id, int gen, qent *q, int existed, int claimed) {
    forget_older(b, id, gen);
    follow *fw = idmap_get(&b->follows, id);
    if (fw && fw->gen > gen) return; /* a newer generation is followed */
    /* followed already; or moved by this bridge's claim, whose mark
     * follows it (knowing whether its job existed) */
    if (fw && (!fw->pending || !claimed)) return;
    if (b->stopping || !client_open(b)) {
        unpend_row(b, id);
        return;
    }
    if (fw == NULL) {
        if (b->follows.n >= b->o.max_follow) return; /* the next scan, after some end */
        if ((fw = calloc(1, sizeof *fw)) == NULL) return;
        if (idmap_put(&b->follows, id, fw) != 0) {
            free(fw);
            return;
        }
    }
    int seen = fw->pending ? fw->seen : 0;
    int was_pending = fw->pending, ended = fw->pending ? fw->ended : 0;
    long epoch = fw->epoch;
    fw->b = b;
    fw->id = id;
    fw->gen = gen;
    fw->q = q;
    fw->existed = existed;
    fw->pending = 0;
    fw->seen = 0;
    /* what its job did while the row was not yet marked (a write then
     * would have found the row still queued) */
    if (seen) add_write(b, id, gen, seen, NULL, 0, -1);
    if (q->events) {
        /* by its queue's events: its job is read now unless this claim
         * made it (not one existing from before: it may have ended, or
         * be only a reserved id) after the queue's last resync, none came
         * since and no final event either (then every event of it reaches
         * on_monitor; a later resync reads it) */
        fw->evt = 1;
        fw->ended = ended;
        fw->epoch = q->epoch;
        if (!claimed || existed || !was_pending || ended || epoch == 0 || epoch != q->epoch)
            check_follow(b, fw);
        return;
    }
    fw->evt = 0;
    char job_id[96];
    job_id_of(b, id, gen, job_id, sizeof job_id);
    int rc = rjq_queue_await(q->q, job_id, NULL, on_outcome, fw, NULL);
    if (rc != RJQ_OK) {
        idmap_del(&b->follows, id);
        free(fw);
        logf_("warn", "awaiting row %" PRId64 ": %s", id, rjq_strerror(rc));
    }
}

/* ---- following by events ---- */

static void on_check(rjq_client *c, int status, const rjq_job_info *info, void *data);

/* Read a job followed by events: a final state is written and ends the
 * follow; any other keeps it (its final event reads it again). One read
 * at a time per follow: asked again meanwhile, it goes again after. */
static void check_follow(bridge *b, follow *fw) {
    if (fw->inflight) {
        fw->recheck = 1;
        return;
    }
    if (!client_open(b) || b->stopping) return; /* the next start follows its row again */
    char job_id[96];
    job_id_of(b, fw->id, fw->gen, job_id, sizeof job_id);
    fw->inflight = 1;
    fw->recheck = 0;
    b->reads++;
    b->job_reads++;
    int rc = rjq_queue_get_job(fw->q->q, job_id, on_check, fw);
    if (rc != RJQ_OK) on_check(b->c, rc, NULL, fw);
}

static void on_check(rjq_client *c, int status, const rjq_job_info *info, void *data) {
    (void)c;
    follow *fw = data;
    bridge *b = fw->b;
    b->reads--;
    fw->inflight = 0;
    if (idmap_get(&b->follows, fw->id) != fw) { /* forgotten meanwhile (a newer generation) */
        free(fw);
        stop_check(b);
        return;
    }
    if (b->freeing) return; /* (bridge_free frees the entries left) */
    if (status != RJQ_OK && status != RJQ_ENOTFOUND) {
        if (lasting(status))
            logf_("warn", "reading the job of row %" PRId64 ": %s (the next scan follows it again)", fw->id,
                  rjq_strerror(status));
        if (status == RJQ_ECANCELED || lasting(status) || b->stopping || !client_open(b)) {
            idmap_del(&b->follows, fw->id); /* the row stays open: the next scan or start */
            free(fw);
        } else { /* again in a moment (after the reconnect, if it is that) */
            fw->retry = 1;
            b->recheck_due = 1;
            if (!evtimer_pending(b->reread, NULL)) {
                struct timeval tv = {0, 200 * 1000};
                evtimer_add(b->reread, &tv);
            }
        }
        stop_check(b);
        return;
    }
    if (status == RJQ_OK) {
        int now = final_kind(info->state);
        if (now < 0) { /* waits or runs: its events go on */
            if (fw->recheck) check_follow(b, fw);
            stop_check(b);
            return;
        }
        const char *blob = now == W_COMPLETED ? (info->result ? info->result : "")
                           : now == W_FAILED  ? (info->error ? info->error : "dead")
                                              : "cancelled";
        size_t len = now == W_COMPLETED ? info->result_len : strlen(blob);
        add_outcome(b, fw->id, fw->gen, now, blob, len, info->attempts, info->error,
                    info->started_ms, info->ended_ms);
        if (info->token) find_worker(b, fw->id, fw->gen, info->token);
    } else if (fw->ended) { /* ended, then its record went (retention) */
        const char *blob = fw->ended == W_FAILED ? "dead" : fw->ended == W_CANCELLED ? "cancelled" : "";
        add_write_full(b, fw->id, fw->gen, fw->ended, blob, strlen(blob), -1,
                       fw->ended == W_FAILED ? blob : NULL);
    } else if (fw->existed) {
        static const char why[] = "outcome unknown: the job had finished and its record "
                                  "was deleted (retention) before the bridge read it";
        add_write(b, fw->id, fw->gen, W_UNKNOWN, why, sizeof why - 1, -1);
    } else {
        add_write(b, fw->id, fw->gen, W_REQUEUE, NULL, 0, -1); /* Redis lost it: move it again */
    }
    idmap_del(&b->follows, fw->id);
    free(fw);
    stop_check(b);
}

static void release_held(bridge *b);

/* q's events may have been lost before now (rjq_monitor_enable_resyncs): every
 * job of q followed by events is read again; a row pended meanwhile is
 * read at its mark (its epoch is older). The first one lets the claims
 * held for q go (holding). */
static void resync(qent *q) {
    bridge *b = q->b;
    q->epoch++;
    for (size_t i = 0; i < b->follows.cap; i++) {
        follow *fw = b->follows.slots[i].value;
        if (fw && fw->evt && !fw->pending && fw->q == q) check_follow(b, fw);
    }
    if (q->epoch == 1) release_held(b);
}

/* HOLD_MS passed since a queue was opened without its first resync: it is
 * held no more (its rows are read at their mark, as when the resync comes
 * late). */
static void on_hold(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    bridge *b = arg;
    double now = now_s(), next = 0;
    for (size_t i = 0; i < b->nq; i++) {
        qent *q = b->queues[i];
        if (!holding(q)) continue;
        double until = q->opened_at + HOLD_MS / 1000.0;
        if (until > now) {
            if (next == 0 || until < next) next = until;
            continue;
        }
        logf_("warn", "queue %s: no resync of its events after %d ms: its rows are read at their mark",
              q->name, HOLD_MS);
        q->unheld = 1;
    }
    if (next > 0) {
        long ms = (long)((next - now) * 1000) + 1;
        struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
        evtimer_add(b->hold, &tv);
    }
    release_held(b);
}

static void on_monitor(rjq_client *c, const char *event, const char *job_id, void *data) {
    (void)c;
    qent *q = data;
    int64_t id;
    int gen;
    if (strcmp(event, "resync") == 0) {
        resync(q);
        return;
    }
    if (parse_job_id(q->b, job_id, &id, &gen) != 0) return; /* not a job of the bridge */
    /* the rows this bridge moves or follows; of any other, whether it was
     * failed (its dead job replayed) */
    follow *fw = idmap_get(&q->b->follows, id);
    if (fw && fw->gen != gen) fw = NULL; /* another generation's job */
    int kind = strcmp(event, "active") == 0 ? W_ACTIVE
               : strcmp(event, "retried") == 0 || strcmp(event, "reclaimed") == 0 ? W_RETRY
                                                                                  : 0;
    int final = strcmp(event, "completed") == 0 ? W_COMPLETED
                : strcmp(event, "dead") == 0    ? W_FAILED
                : strcmp(event, "cancelled") == 0 ? W_CANCELLED
                                                  : 0;
    if (final) { /* followed by events: read it for its outcome */
        if (fw && fw->evt) {
            fw->ended = final;
            if (!fw->pending) check_follow(q->b, fw); /* (pending: at its mark) */
        }
        return;
    }
    if (kind == 0) return;
    if (fw && fw->pending) fw->seen = kind; /* written once its row is marked */
    else if (fw) add_write(q->b, id, gen, kind, NULL, 0, -1);
    else if (kind == W_ACTIVE) add_write(q->b, id, gen, W_CHECK, NULL, 0, -1);
}

/* ---- the scan of open rows ------------------------------------------------------ */

static void scan_page(bridge *b);

static void on_scanned(void *arg, PGresult **res, int n, const char *err,
                      const char *sqlstate) {
    (void)sqlstate;
    bridge *b = arg;
    if (b->freeing) return;
    if (err || n < 1) {
        char msg[512];
        if (err) logf_("warn", "scanning open rows: %s", oneline(err, msg, sizeof msg));
        b->reconciling = 0;
        return;
    }
    PGresult *r = res[0];
    int rows = PQntuples(r);
    for (int i = 0; i < rows && b->follows.n < b->o.max_follow; i++) {
        int64_t id = be64(PQgetvalue(r, i, 0));
        char why[256];
        qent *q = row_queue(b, PQgetvalue(r, i, 1), be32(PQgetvalue(r, i, 3)), why, sizeof why);
        if (q) follow_row(b, id, be32(PQgetvalue(r, i, 2)), q, 0, 0);
        b->scan_after = id;
    }
    if (rows == PGB_FOLLOW_PAGE && b->follows.n < b->o.max_follow && !b->stopping) scan_page(b);
    else b->reconciling = 0;
}

static void scan_page(bridge *b) {
    char after[24];
    snprintf(after, sizeof after, "%" PRId64, b->scan_after);
    const char *v[2] = {after, b->queues_param};
    pgconn_query(b->writer, b->sql.scan, 2, v, NULL, NULL, 1);
    if (pgconn_sync(b->writer, on_scanned, b) != 0) b->reconciling = 0;
}

static void reconcile(bridge *b) {
    if (b->reconciling || b->stopping || !pgconn_up(b->writer)) return;
    b->reconciling = 1;
    b->scan_after = 0;
    scan_page(b);
}

static void on_reconcile_timer(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    reconcile(arg);
}

/* ---- claims ------------------------------------------------------------------- */

static void claim_free(claim *cl) {
    for (int i = 0; i < cl->n; i++) free(cl->rows[i].bad);
    free(cl->copy);
    free(cl->rows);
    free(cl);
}

static void claim_idle(lane *ln, int again_now, int later_ms) {
    bridge *b = ln->b;
    ln->cstate = C_IDLE;
    if (b->stopping) {
        stop_check(b);
        return;
    }
    if (later_ms > 0) {
        struct timeval tv = {later_ms / 1000, (later_ms % 1000) * 1000};
        evtimer_add(b->retry, &tv);
        return;
    }
    if (again_now || b->want) claim_next(b);
}

static void rollback(lane *ln) {
    /* ends a transaction left open or aborted (no-op otherwise) */
    if (!pgconn_up(ln->pg)) return;
    pgconn_query(ln->pg, PGB_SQL_ROLLBACK, 0, NULL, NULL, NULL, 0);
    pgconn_sync(ln->pg, NULL, NULL);
}

static void on_marked(void *arg, PGresult **res, int n, const char *err,
                      const char *sqlstate) {
    (void)sqlstate;
    (void)res;
    (void)n;
    claim *cl = arg;
    bridge *b = cl->ln->b;
    lane *ln = cl->ln;
    if (b->freeing) {
        claim_free(cl);
        return;
    }
    if (err) {
        char msg[512];
        logf_("warn", "marking %d rows failed (%s): rows still queued are moved again (their jobs exist "
              "in Redis: nothing runs twice), rows marked are followed by the next scan",
              cl->n, oneline(err, msg, sizeof msg));
        for (int i = 0; i < cl->n; i++) unpend_row(b, cl->rows[i].id);
        rollback(ln);
        claim_free(cl);
        claim_idle(ln, 0, RETRY_MS);
        return;
    }
    int full = cl->n >= b->o.batch;
    for (int i = 0; i < cl->n; i++) {
        row *r = &cl->rows[i];
        if (r->bad) {
            b->bad++;
            logf_("warn", "row %" PRId64 " failed: %s", r->id, r->bad);
        } else if (r->acked) {
            if (r->existed) b->existed++;
            else b->moved++;
            follow_row(b, r->id, r->gen, r->q, r->existed, 1);
        }
    }
    claim_free(cl);
    claim_idle(ln, full, 0);
}

/* Every enqueue answered (or the claim lost its transaction): mark. */
static void mark(claim *cl) {
    bridge *b = cl->ln->b;
    lane *ln = cl->ln;
    if (b->freeing) {
        claim_free(cl);
        return;
    }
    if (!pgconn_up(ln->pg) || pgconn_generation(ln->pg) != cl->gen) {
        logf_("warn", "the claim of %d rows lost its transaction (PostgreSQL connection): they stay "
              "queued and are moved again",
              cl->n);
        for (int i = 0; i < cl->n; i++) unpend_row(b, cl->rows[i].id);
        claim_free(cl);
        claim_idle(ln, 0, 0);
        return;
    }
    ln->cstate = C_MARKING;
    /* "{1,2,3}" of the acknowledged rows */
    size_t cap = 3 + (size_t)cl->n * 21, len = 0;
    char *ids = malloc(cap);
    if (ids == NULL) {
        logf_("warn", "out of memory marking %d rows: they stay queued", cl->n);
        for (int i = 0; i < cl->n; i++) unpend_row(b, cl->rows[i].id);
        rollback(ln);
        claim_free(cl);
        claim_idle(ln, 0, RETRY_MS);
        return;
    }
    ids[len++] = '{';
    int acked = 0;
    for (int i = 0; i < cl->n; i++) { /* (20 bytes an id at most, and its comma) */
        if (!cl->rows[i].acked) continue;
        int64_t id = cl->rows[i].id;
        if (acked) ids[len++] = ',';
        if (id < 0) ids[len++] = '-';
        len = (size_t)(put_u64(ids + len, id < 0 ? 0 - (uint64_t)id : (uint64_t)id) - ids);
        acked++;
    }
    ids[len++] = '}';
    ids[len] = '\0';
    if (acked) {
        const char *v[1] = {ids};
        pgconn_query(ln->pg, b->sql.migrated, 1, v, NULL, NULL, 0);
    }
    free(ids);
    for (int i = 0; i < cl->n; i++) {
        row *r = &cl->rows[i];
        if (!r->bad) continue;
        char id[24];
        snprintf(id, sizeof id, "%" PRId64, r->id);
        const char *v[2] = {id, r->bad};
        pgconn_query(ln->pg, b->sql.bad, 2, v, NULL, NULL, 0);
    }
    pgconn_query(ln->pg, PGB_SQL_COMMIT, 0, NULL, NULL, NULL, 0);
    if (pgconn_sync(ln->pg, on_marked, cl) != 0) on_marked(cl, NULL, 0, "connection lost", "");
}

static void claim_settle(claim *cl) {
    if (--cl->pending == 0) mark(cl);
}

/* Redis refused a queue's enqueue: its rows stay queued, and claims
 * leave the queue out for RETRY_MS (the others go on). */
static void back_off(bridge *b, qent *q) {
    q->backoff_until = now_s() + RETRY_MS / 1000.0;
    struct timeval tv = {RETRY_MS / 1000, (RETRY_MS % 1000) * 1000};
    if (!evtimer_pending(b->backoff, NULL)) evtimer_add(b->backoff, &tv);
}

static void on_enqueued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c;
    group *g = data;
    claim *cl = g->cl;
    bridge *b = cl->ln->b;
    if (status == RJQ_OK) {
        for (int k = 0; k < g->n && (size_t)k < n; k++) {
            row *r = &cl->rows[g->idx[k]];
            r->acked = 1;
            r->existed = rjq_enqueued_get(jobs, k)->existed;
        }
    } else if (!b->freeing && status != RJQ_ECANCELED) {
        qent *q = cl->rows[g->idx[0]].q;
        for (int k = 0; k < g->n; k++) unpend_row(b, cl->rows[g->idx[k]].id);
        logf_("warn", "enqueueing %d rows into %s: %s (%s): they stay queued; the queue is tried again "
              "in %d ms",
              g->n, q->name, rjq_strerror(status), rjq_client_get_errmsg(c), RETRY_MS);
        back_off(b, q);
    }
    free(g->idx);
    free(g);
    claim_settle(cl);
}

/* Enqueue rows idx[0..n) (one queue) as one batch; 0 or rjq's code. */
static int enqueue_group(claim *cl, const int *idx, int n) {
    bridge *b = cl->ln->b;
    group *g = calloc(1, sizeof *g);
    rjq_enqueue_item *items = calloc((size_t)n, sizeof *items);
    rjq_job_options *opts = calloc((size_t)n, sizeof *opts);
    int *gidx = malloc((size_t)n * sizeof *gidx);
    int rc = RJQ_ENOMEM;
    if (g && items && opts && gidx) {
        memcpy(gidx, idx, (size_t)n * sizeof *gidx);
        for (int k = 0; k < n; k++) {
            row *r = &cl->rows[idx[k]];
            opts[k].size = sizeof opts[k];
            opts[k].id = r->job_id;
            opts[k].delay_ms = r->delay_ms;
            opts[k].priority = r->priority;
            opts[k].max_attempts = r->max_attempts;
            opts[k].dedup_ms = b->o.dedup_ms;
            opts[k].backoff = r->backoff;
            opts[k].timeout_ms = r->timeout_ms;
            items[k].size = sizeof items[k];
            items[k].payload = r->payload;
            items[k].len = r->len;
            items[k].opts = &opts[k];
        }
        g->cl = cl;
        g->idx = gidx;
        g->n = n;
        cl->pending++;
        /* a job may start (and say so) before its enqueue is answered:
         * its events are this bridge's from the send on */
        for (int k = 0; k < n; k++)
            pend_row(b, cl->rows[idx[k]].id, cl->rows[idx[k]].gen, cl->rows[idx[k]].q);
        rc = rjq_enqueue_batch(cl->rows[idx[0]].q->q, items, (size_t)n, on_enqueued, g);
        if (rc != RJQ_OK) {
            cl->pending--;
            for (int k = 0; k < n; k++) unpend_row(b, cl->rows[idx[k]].id);
        }
    }
    free(items);
    free(opts);
    if (rc != RJQ_OK) {
        free(gidx);
        free(g);
    }
    return rc;
}

/* Check one claimed row; sets r->bad when it cannot become a job. */
static void check_row(bridge *b, row *r, PGresult *res, int i) {
    char why[512];
    r->id = be64(PQgetvalue(res, i, 0));
    r->gen = be32(PQgetvalue(res, i, 6));
    job_id_of(b, r->id, r->gen, r->job_id, sizeof r->job_id);
    r->payload = PQgetvalue(res, i, 2);
    r->len = (size_t)PQgetlength(res, i, 2);
    r->priority = be32(PQgetvalue(res, i, 3));
    r->max_attempts = be32(PQgetvalue(res, i, 4));
    r->delay_ms = be64(PQgetvalue(res, i, 5));
    r->backoff.base_ms = be64(PQgetvalue(res, i, 8));
    r->backoff.max_ms = be64(PQgetvalue(res, i, 9));
    r->timeout_ms = be64(PQgetvalue(res, i, 10));
    const char *bo = PQgetisnull(res, i, 7) ? "default" : PQgetvalue(res, i, 7);
    int bo_ok = 1;
    if (strcmp(bo, "default") == 0) r->backoff.type = RJQ_BACKOFF_DEFAULT;
    else if (strcmp(bo, "exponential") == 0) r->backoff.type = RJQ_BACKOFF_EXPONENTIAL;
    else if (strcmp(bo, "fixed") == 0) r->backoff.type = RJQ_BACKOFF_FIXED;
    else bo_ok = 0;
    why[0] = '\0';
    r->q = row_queue(b, PQgetvalue(res, i, 1), r->priority, why, sizeof why);
    if (r->q == NULL) {
        /* why says it */
    } else if (r->len > b->o.max_payload) {
        snprintf(why, sizeof why, "payload of %zu bytes is over the limit of %zu bytes", r->len,
                 b->o.max_payload);
    } else if (r->gen < 0) {
        snprintf(why, sizeof why, "generation %d is below 0", r->gen);
    } else if (r->max_attempts < 1) {
        snprintf(why, sizeof why, "max_attempts %d is below 1", r->max_attempts);
    } else if (r->priority < RJQ_PRIORITY_MIN || r->priority > RJQ_PRIORITY_MAX) {
        snprintf(why, sizeof why, "priority %d is outside %d..%d", r->priority, RJQ_PRIORITY_MIN,
                 RJQ_PRIORITY_MAX);
    } else if (r->delay_ms > RJQ_DELAY_MAX) {
        snprintf(why, sizeof why, "run_at is more than %lld ms away", (long long)RJQ_DELAY_MAX);
    } else if (!bo_ok) {
        snprintf(why, sizeof why, "backoff \"%.100s\" is not default, exponential or fixed", bo);
    } else if (r->backoff.base_ms < 0 || r->backoff.base_ms > RJQ_DELAY_MAX) {
        snprintf(why, sizeof why, "backoff_ms %lld is outside 0..%lld", r->backoff.base_ms,
                 (long long)RJQ_DELAY_MAX);
    } else if (r->backoff.max_ms < 0 || r->backoff.max_ms > RJQ_DELAY_MAX) {
        snprintf(why, sizeof why, "backoff_max_ms %lld is outside 0..%lld", r->backoff.max_ms,
                 (long long)RJQ_DELAY_MAX);
    } else if (r->timeout_ms < 0 || r->timeout_ms > RJQ_DELAY_MAX) {
        snprintf(why, sizeof why, "timeout_ms %lld is outside 0..%lld", r->timeout_ms,
                 (long long)RJQ_DELAY_MAX);
    }
    if (why[0]) r->bad = strdup(why);
}

/* rjq refuses one of the items itself (not Redis, not memory). */
static int invalid_item(int rc) {
    return rc == RJQ_EINVAL || rc == RJQ_ETOOBIG || rc == RJQ_EJOBID;
}

static void enqueue_rows(claim *cl) {
    bridge *b = cl->ln->b;
    int *idx = malloc((size_t)cl->n * sizeof *idx);
    char *done = calloc((size_t)cl->n, 1);
    cl->pending = 1; /* until every group is sent */
    for (int i = 0; idx && done && i < cl->n; i++) {
        if (done[i] || cl->rows[i].bad) continue;
        /* the rows of this queue, in claim order (priority, then id) */
        int n = 0;
        for (int j = i; j < cl->n; j++) {
            if (done[j] || cl->rows[j].bad || cl->rows[j].q != cl->rows[i].q) continue;
            idx[n++] = j;
            done[j] = 1;
        }
        int rc = enqueue_group(cl, idx, n);
        for (int k = 0; invalid_item(rc) && k < n; k++) { /* find the row rjq refuses */
            int rk = enqueue_group(cl, &idx[k], 1);
            if (invalid_item(rk)) {
                char why[256];
                snprintf(why, sizeof why, "refused by rjq: %s", rjq_strerror(rk));
                cl->rows[idx[k]].bad = strdup(why);
            } else if (rk != RJQ_OK) {
                back_off(b, cl->rows[i].q);
            }
        }
        if (rc != RJQ_OK && !invalid_item(rc)) { /* out of memory ...: the rows stay queued */
            logf_("warn", "enqueueing %d rows into %s: %s: they stay queued", n, cl->rows[i].q->name,
                  rjq_strerror(rc));
            back_off(b, cl->rows[i].q);
        }
    }
    if (idx == NULL || done == NULL) logf_("warn", "out of memory: %d claimed rows stay queued", cl->n);
    free(idx);
    free(done);
    claim_settle(cl);
}

/* ---- claims held for a queue's first resync (holding) ---- */

static int claim_waits(const claim *cl) {
    for (int i = 0; i < cl->n; i++)
        if (!cl->rows[i].bad && holding(cl->rows[i].q)) return 1;
    return 0;
}

/* Keep cl (its payloads copied: its result goes) until its queues' first
 * resyncs, after the claims held before it (claim order); -1: no memory. */
static int hold_claim(bridge *b, claim *cl) {
    size_t total = 1;
    for (int i = 0; i < cl->n; i++)
        if (!cl->rows[i].bad) total += cl->rows[i].len;
    if ((cl->copy = malloc(total)) == NULL) return -1;
    char *p = cl->copy;
    for (int i = 0; i < cl->n; i++) {
        row *r = &cl->rows[i];
        if (r->bad) continue;
        if (r->len) memcpy(p, r->payload, r->len);
        r->payload = p;
        p += r->len;
    }
    cl->next_held = NULL;
    *b->held_tail = cl;
    b->held_tail = &cl->next_held;
    return 0;
}

static claim *unhold_first(bridge *b) {
    claim *cl = b->held;
    b->held = cl->next_held;
    if (b->held == NULL) b->held_tail = &b->held;
    return cl;
}

/* The held claims whose queues resynced go, in order (one whose
 * transaction was lost meanwhile ends: mark). */
static void release_held(bridge *b) {
    while (b->held && !claim_waits(b->held)) {
        claim *cl = unhold_first(b);
        lane *ln = cl->ln;
        if (!pgconn_up(ln->pg) || pgconn_generation(ln->pg) != cl->gen) mark(cl);
        else enqueue_rows(cl);
    }
}

/* Stopping: the held claims end, their rows left queued. */
static void drop_held(bridge *b) {
    while (b->held) {
        claim *cl = unhold_first(b);
        lane *ln = cl->ln;
        logf_("warn", "stopping: %d claimed rows not enqueued stay queued", cl->n);
        rollback(ln);
        claim_free(cl);
        ln->cstate = C_IDLE;
    }
}

static void on_claimed(void *arg, PGresult **res, int n, const char *err,
                      const char *sqlstate) {
    (void)sqlstate;
    lane *ln = arg;
    bridge *b = ln->b;
    if (b->freeing) return;
    if (err || n < 3) {
        char msg[512];
        if (err) logf_("warn", "claiming rows: %s", oneline(err, msg, sizeof msg));
        rollback(ln);
        claim_idle(ln, 0, RETRY_MS);
        return;
    }
    PGresult *r = res[2]; /* after BEGIN and SET */
    int rows = PQntuples(r);
    claim *cl = calloc(1, sizeof *cl);
    if (cl == NULL || (rows > 0 && (cl->rows = calloc((size_t)rows, sizeof *cl->rows)) == NULL)) {
        free(cl);
        if (rows > 0) logf_("warn", "out of memory: %d claimed rows stay queued", rows);
        rollback(ln);
        claim_idle(ln, 0, RETRY_MS);
        return;
    }
    cl->ln = ln;
    cl->gen = pgconn_generation(ln->pg);
    if (rows <= 0) { /* nothing queued: end the transaction */
        ln->cstate = C_MARKING;
        mark(cl);
        if (b->want) claim_next(b); /* a notification came while it selected */
        return;
    }
    cl->n = rows;
    for (int i = 0; i < rows; i++) check_row(b, &cl->rows[i], r, i);
    ln->cstate = C_ENQUEUING;
    if (b->held || claim_waits(cl)) { /* after its queue's first resync */
        if (b->stopping || hold_claim(b, cl) != 0) { /* (stopping: drop_held ran) */
            logf_("warn", "%s: %d claimed rows stay queued", b->stopping ? "stopping" : "out of memory",
                  rows);
            rollback(ln);
            claim_free(cl);
            claim_idle(ln, 0, RETRY_MS);
            return;
        }
    } else {
        enqueue_rows(cl); /* the payloads are copied by rjq: r may go after this */
    }
    /* a full batch: more rows wait, the next lane selects them now (its
     * enqueue goes after this one's); or a notification came meanwhile */
    if (rows >= b->o.batch || b->want) claim_next(b);
}

static void claim_next(bridge *b) {
    if (b->stopping || b->freeing) return;
    if (evtimer_pending(b->retry, NULL) || !rjq_client_is_connected(b->c)) {
        b->want = 1; /* the retry, or the connection's return, claims */
        return;
    }
    lane *ln = NULL;
    for (int i = 0; i < b->o.claims; i++) {
        lane *l = &b->lanes[i];
        if (l->cstate == C_SELECTING) { /* one select at a time: claims stay in order */
            b->want = 1;
            return;
        }
        if (ln == NULL && l->cstate == C_IDLE && l->pg && pgconn_up(l->pg)) ln = l;
    }
    if (ln == NULL) {
        b->want = 1; /* a lane's end, or its connection's return, claims */
        return;
    }
    b->want = 0;
    char batch[16];
    snprintf(batch, sizeof batch, "%d", b->o.batch);
    /* the queues whose last enqueue Redis refused wait their turn */
    char **names = malloc((b->nq + 1) * sizeof *names);
    size_t nb = 0;
    double now = now_s();
    for (size_t i = 0; names && i < b->nq; i++)
        if (b->queues[i]->backoff_until > now) names[nb++] = b->queues[i]->name;
    char *left_out = nb ? array_literal(names, nb) : NULL;
    free(names);
    const char *v[3] = {batch, b->queues_param, left_out};
    ln->cstate = C_SELECTING;
    /* (a statement libpq cannot send fails the segment: on_claimed hears it) */
    pgconn_query(ln->pg, PGB_SQL_BEGIN, 0, NULL, NULL, NULL, 0);
    pgconn_query(ln->pg, PGB_SQL_CLAIM_PLAN, 0, NULL, NULL, NULL, 0);
    pgconn_query(ln->pg, b->sql.claim, 3, v, NULL, NULL, 1);
    free(left_out);
    if (pgconn_sync(ln->pg, on_claimed, ln) != 0) {
        /* the connection went down: its return claims */
        ln->cstate = C_IDLE;
        b->want = 1;
    }
}

static void on_backoff(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    bridge *b = arg;
    double now = now_s(), next = 0;
    for (size_t i = 0; i < b->nq; i++) { /* another queue's backoff ends later */
        double until = b->queues[i]->backoff_until;
        if (until > now && (next == 0 || until < next)) next = until;
    }
    if (next > 0) {
        long ms = (long)((next - now) * 1000) + 1;
        struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
        evtimer_add(b->backoff, &tv);
    }
    claim_next(b);
}

static void on_poll(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    claim_next(arg);
}

static void on_retry(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    bridge *b = arg;
    b->want = 0;
    claim_next(b);
}

/* ---- connections ------------------------------------------------------------ */

static void on_claimer_state(pgconn *p, int up, const char *err, void *arg) {
    (void)p;
    bridge *b = ((lane *)arg)->b;
    char msg[512];
    if (up) {
        logf_("info", "PostgreSQL connected (claims)");
        claim_next(b);
    } else {
        logf_("warn", "PostgreSQL connection lost (claims): %s", oneline(err, msg, sizeof msg));
    }
}

static void on_writer_state(pgconn *p, int up, const char *err, void *arg) {
    (void)p;
    bridge *b = arg;
    char msg[512];
    if (up) {
        logf_("info", "PostgreSQL connected (outcomes, LISTEN %s)", b->o.table);
        flush_writes(b);
        reconcile(b);
        claim_next(b); /* notifications may have been missed meanwhile */
    } else {
        logf_("warn", "PostgreSQL connection lost (outcomes): %s", oneline(err, msg, sizeof msg));
        b->reconciling = 0;
        b->reporting = 0;
    }
}

static void on_notify(pgconn *p, const char *channel, void *arg) {
    (void)p;
    (void)channel;
    claim_next(arg);
}

static void on_redis_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    (void)c;
    bridge *b = data;
    const char *which = conn == RJQ_CONN_COMMAND ? "commands" : "subscriber";
    if (ev == RJQ_EVENT_CONNECTED) {
        logf_("info", "Redis connected (%s)", which);
        if (conn == RJQ_CONN_COMMAND) claim_next(b);
    } else if (ev == RJQ_EVENT_DISCONNECTED) {
        logf_("warn", "Redis connection lost (%s): %s", which, detail ? detail : "");
    } else {
        logf_("warn", "Redis: %s", detail ? detail : "error");
    }
}

/* ---- the report line --------------------------------------------------------------- */

static void print_report(bridge *b, PGresult *depth, PGresult *lag) {
    char line[4096];
    size_t len = 0;
    double t = now_s(), dt = t - b->report_at;
    double rate = dt > 0 ? (double)(b->moved - b->moved_at_report) / dt : 0;
    b->report_at = t;
    b->moved_at_report = b->moved;
    len += (size_t)snprintf(line + len, sizeof line - len,
                            "moved %lld (%.0f/s), existing %lld, bad %lld; completed %lld, "
                            "failed %lld, cancelled %lld, moved again %lld, unknown %lld; "
                            "following %zu, writes waiting %zu; postgres %s, redis %s",
                            b->moved, rate, b->existed, b->bad, b->completed, b->failed,
                            b->cancelled, b->requeued, b->unknown, b->follows.n, b->wn,
                            claimers_up(b) && pgconn_up(b->writer) ? "up" : "down",
                            b->c && rjq_client_is_connected(b->c) ? "up" : "down");
    if (lag && PQntuples(lag) == 1)
        len += (size_t)snprintf(line + len, sizeof line - len, "; lag %.3f s",
                                atof(PQgetvalue(lag, 0, 0)));
    for (int i = 0; depth && i < PQntuples(depth) && len < sizeof line - 64; i++)
        len += (size_t)snprintf(line + len, sizeof line - len, "%s %.60s/%s=%s", i ? "" : ";",
                                PQgetvalue(depth, i, 0), PQgetvalue(depth, i, 1),
                                PQgetvalue(depth, i, 2));
    logf_("info", "%s", line);
}

static void on_report_rows(void *arg, PGresult **res, int n, const char *err,
                      const char *sqlstate) {
    (void)sqlstate;
    bridge *b = arg;
    if (b->freeing) return;
    b->reporting = 0;
    print_report(b, !err && n >= 1 ? res[0] : NULL, !err && n >= 2 ? res[1] : NULL);
}

static void on_report(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    bridge *b = arg;
    if (b->reporting) return;
    if (pgconn_up(b->writer)) {
        pgconn_query(b->writer, b->sql.depth, 0, NULL, NULL, NULL, 0);
        pgconn_query(b->writer, b->sql.lag, 0, NULL, NULL, NULL, 0);
        if (pgconn_sync(b->writer, on_report_rows, b) == 0) {
            b->reporting = 1;
            return;
        }
    }
    print_report(b, NULL, NULL);
}

/* ---- start, stop ------------------------------------------------------------------ */

void bridge_defaults(bridge_options *o) {
    memset(o, 0, sizeof *o);
    o->pg = "";
    o->batch = 1000;
    o->claims = 4;
    o->poll_ms = 30000;
    o->reconcile_ms = 60000;
    o->report_ms = 10000;
    o->dedup_ms = 24LL * 3600 * 1000;
    o->max_payload = 16 * 1024 * 1024;
    o->max_follow = 100000;
}

static struct event *periodic(bridge *b, long ms, event_callback_fn fn) {
    struct event *ev = event_new(b->base, -1, EV_PERSIST, fn, b);
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    if (ev) event_add(ev, &tv);
    return ev;
}

/* "{a,b}" with each name quoted for an array literal. */
static char *array_literal(char **names, size_t n) {
    size_t cap = 3;
    for (size_t i = 0; i < n; i++) cap += 2 * strlen(names[i]) + 3;
    char *s = malloc(cap), *p = s;
    if (s == NULL) return NULL;
    *p++ = '{';
    for (size_t i = 0; i < n; i++) {
        if (i) *p++ = ',';
        *p++ = '"';
        for (const char *c = names[i]; *c; c++) {
            if (*c == '"' || *c == '\\') *p++ = '\\';
            *p++ = *c;
        }
        *p++ = '"';
    }
    *p++ = '}';
    *p = '\0';
    return s;
}

void bridge_get_counters(const bridge *b, bridge_counters *out) {
    memset(out, 0, sizeof *out);
    out->moved = b->moved;
    out->existed = b->existed;
    out->bad = b->bad;
    out->completed = b->completed;
    out->failed = b->failed;
    out->cancelled = b->cancelled;
    out->requeued = b->requeued;
    out->unknown = b->unknown;
    out->job_reads = b->job_reads;
    out->following = b->follows.n;
    out->writes_waiting = b->wn;
    out->pg_claims_up = claimers_up(b);
    out->pg_outcomes_up = b->writer && pgconn_up(b->writer);
    out->redis_up = client_open(b) && rjq_client_is_connected(b->c);
}

const char *bridge_queues_literal(const bridge *b) {
    return b->queues_param;
}

bridge *bridge_start(struct event_base *base, const bridge_options *o) {
    bridge *b = calloc(1, sizeof *b);
    if (b == NULL) return NULL;
    b->o = *o;
    b->base = base;
    if (b->o.table == NULL) b->o.table = PGB_TABLE_DEFAULT;
    if (strcmp(b->o.table, PGB_TABLE_DEFAULT) == 0)
        snprintf(b->job_prefix, sizeof b->job_prefix, "%s", PGB_JOB_PREFIX);
    else
        snprintf(b->job_prefix, sizeof b->job_prefix, PGB_JOB_PREFIX "%s-", b->o.table);
    if (!pgb_table_ok(b->o.table)) {
        fprintf(stderr, "rjq-pg-bridge: --table: \"%s\" is not 1..%d bytes of a-z, 0-9 and _ "
                        "(not starting with a digit)\n", b->o.table, PGB_TABLE_MAX);
        goto fail;
    }
    struct { char **dst; const char *tmpl; } sql[] = {
        {&b->sql.claim, PGB_SQL_CLAIM},   {&b->sql.migrated, PGB_SQL_MIGRATED},
        {&b->sql.bad, PGB_SQL_BAD},       {&b->sql.active, PGB_SQL_ACTIVE},
        {&b->sql.worker, PGB_SQL_WORKER}, {&b->sql.failed_row, PGB_SQL_FAILED_ROW},
        {&b->sql.set, PGB_SQL_SET},       {&b->sql.scan, PGB_SQL_FOLLOW_SCAN},
        {&b->sql.depth, PGB_SQL_DEPTH},   {&b->sql.lag, PGB_SQL_LAG},
    };
    for (size_t i = 0; i < sizeof sql / sizeof sql[0]; i++)
        if ((*sql[i].dst = pgb_sql(sql[i].tmpl, b->o.table)) == NULL) goto fail;
    b->report_at = now_s();
    if (o->queues && (b->queues_param = array_literal(o->queues, o->nqueues)) == NULL) goto fail;
    rjq_client_options co = RJQ_CLIENT_OPTIONS_INIT;
    co.url = o->redis_url;
    co.password = o->redis_password;
    co.prefix = o->prefix;
    co.name = "rjq-pg-bridge";
    co.max_payload = o->max_payload;
    co.on_event = on_redis_event;
    co.event_data = b;
    int rc = rjq_libevent_client_new_dns(&b->c, base, NULL, &co);
    if (rc != RJQ_OK) {
        fprintf(stderr, "rjq-pg-bridge: Redis: %s (%s)\n", rjq_strerror(rc), rjq_client_get_errmsg(NULL));
        b->c = NULL;
        goto fail;
    }
    b->retry = evtimer_new(base, on_retry, b);
    b->backoff = evtimer_new(base, on_backoff, b);
    b->write_retry = evtimer_new(base, on_write_retry, b);
    b->reread = evtimer_new(base, on_reread, b);
    b->hold = evtimer_new(base, on_hold, b);
    b->held_tail = &b->held;
    b->poll = periodic(b, o->poll_ms, on_poll);
    b->reconcile = periodic(b, o->reconcile_ms, on_reconcile_timer);
    b->report = o->report_ms > 0 ? periodic(b, o->report_ms, on_report) : NULL;
    if (b->retry == NULL || b->backoff == NULL || b->write_retry == NULL || b->reread == NULL || b->hold == NULL || b->poll == NULL || b->reconcile == NULL || (o->report_ms > 0 && !b->report))
        goto fail;
    /* the served queues are opened (and monitored) now: their events are
     * seen from the start */
    for (size_t i = 0; i < o->nqueues; i++) {
        char why[256];
        if (queue_of(b, o->queues[i], why, sizeof why) == NULL) {
            fprintf(stderr, "rjq-pg-bridge: --queues: %s\n", why);
            goto fail;
        }
        char rq[256];
        for (int k = 0; o->route && k < 2; k++) { /* and where they route to */
            const char *name = route(b, o->queues[i], k ? INT_MAX : INT_MIN, rq, sizeof rq);
            if ((name != o->queues[i]) && queue_of(b, name, why, sizeof why) == NULL) {
                fprintf(stderr, "rjq-pg-bridge: --queues with --route-priority: %s\n", why);
                goto fail;
            }
        }
    }
    if (b->o.claims < 1) b->o.claims = 1;
    if ((b->lanes = calloc((size_t)b->o.claims, sizeof *b->lanes)) == NULL) goto fail;
    for (int i = 0; i < b->o.claims; i++) {
        b->lanes[i].b = b;
        if ((b->lanes[i].pg = pgconn_new(base, o->pg, NULL, on_claimer_state, NULL, &b->lanes[i])) == NULL)
            goto fail;
    }
    b->writer = pgconn_new(base, o->pg, b->o.table, on_writer_state, on_notify, b);
    if (b->writer == NULL) goto fail;
    return b;
fail:
    bridge_free(b);
    return NULL;
}

static void on_closed(const rjq_close_report *report, void *data) {
    (void)report;
    bridge *b = data;
    b->c = NULL;
    b->closed = 1;
    stop_check(b);
}

/* Stopping: once the claim in flight ended and no job read is pending,
 * close the client (awaits end); once it is closed and the outcomes it
 * still brought are written (or PostgreSQL is away), end the loop. */
static void stop_check(bridge *b) {
    if (!b->stopping || b->freeing || b->deadline == NULL) return;
    if (claiming(b) || b->reads > 0) return;
    if (!b->closing) {
        b->closing = 1;
        if (rjq_client_close(b->c, 0, on_closed, b) != RJQ_OK) event_base_loopbreak(b->base);
        return;
    }
    if (b->closed && !b->writing && (b->wn == 0 || !pgconn_up(b->writer)))
        event_base_loopbreak(b->base);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    bridge *b = arg;
    logf_("warn", "stopping: the deadline passed with %s in flight (%zu outcomes not written: the "
          "next start follows their rows again)",
          claiming(b) ? "a claim" : "outcomes", b->wn);
    event_base_loopbreak(b->base);
}

void bridge_stop(bridge *b, long deadline_ms) {
    if (b->stopping) return;
    b->stopping = 1;
    if (b->report) event_del(b->report); /* it reads the client, which the stop closes */
    if (b->poll) event_del(b->poll);
    if (b->retry) event_del(b->retry);
    if (b->reconcile) event_del(b->reconcile);
    b->deadline = evtimer_new(b->base, on_deadline, b);
    struct timeval tv = {deadline_ms / 1000, (deadline_ms % 1000) * 1000};
    if (b->deadline == NULL) {
        event_base_loopbreak(b->base);
        return;
    }
    evtimer_add(b->deadline, &tv);
    drop_held(b);
    logf_("info", "stopping (%s in flight, %zu writes waiting)", claiming(b) ? "a claim" : "no claim",
          b->wn);
    stop_check(b);
}

void bridge_free(bridge *b) {
    if (b == NULL) return;
    b->freeing = 1;
    rjq_client_free(b->c); /* awaits and reads end with RJQ_ECANCELED */
    b->c = NULL;
    for (size_t i = 0; i < b->follows.cap; i++) /* what is left: entries of unmarked rows */
        free(b->follows.slots[i].value);
    while (b->held) claim_free(unhold_first(b));
    for (int i = 0; b->lanes && i < b->o.claims; i++)
        pgconn_free(b->lanes[i].pg); /* a claim in flight ends (and is freed) here */
    free(b->lanes);
    pgconn_free(b->writer);
    for (size_t i = 0; i < b->nq; i++) {
        free(b->queues[i]->name);
        free(b->queues[i]);
    }
    free(b->queues);
    free(b->queues_param);
    free_entries(b->w, b->wn); /* the batch in flight was freed with its connection */
    while (b->lookups) {
        wlookup *l = b->lookups;
        b->lookups = l->next;
        free(l);
    }
    free(b->procs);
    free(b->next_procs);
    char **sql[] = {&b->sql.claim,  &b->sql.migrated,   &b->sql.bad, &b->sql.active,
                    &b->sql.worker, &b->sql.failed_row, &b->sql.set, &b->sql.scan,
                    &b->sql.depth,  &b->sql.lag};
    for (size_t i = 0; i < sizeof sql / sizeof sql[0]; i++) free(*sql[i]);
    while (b->rereads) {
        final_read *f = b->rereads;
        b->rereads = f->next;
        free(f->blob);
        free(f);
    }
    if (b->reread) event_free(b->reread);
    if (b->hold) event_free(b->hold);
    idmap_free(&b->follows);
    if (b->poll) event_free(b->poll);
    if (b->retry) event_free(b->retry);
    if (b->backoff) event_free(b->backoff);
    if (b->write_retry) event_free(b->write_retry);
    if (b->reconcile) event_free(b->reconcile);
    if (b->report) event_free(b->report);
    if (b->deadline) event_free(b->deadline);
    free(b);
}
