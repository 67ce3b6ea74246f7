/*
 * The process registry, read side (rjq_client_list_processes): the live
 * entries of the liveness set with what each client said of itself
 * (processes.lua; the beat that writes it is upkeep.c's).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "argv.h"
#include "core.h"
#include "processes.h"
#include "validate.h"
#include "queue.h" /* the prefix's names and their scripts' KEYS (src/keys.def) */
#include "rjq_scripts.h"

/* Split s at sep in place: up to max fields; returns how many. */
static size_t split(char *s, char sep, char **out, size_t max) {
    size_t n = 0;
    while (n < max) {
        out[n++] = s;
        char *e = strchr(s, sep);
        if (e == NULL) break;
        *e = '\0';
        s = e + 1;
    }
    return n;
}

/* Count the lines of text (1 + newlines). */
static size_t lines(const char *s) {
    size_t n = 1;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* A number of the info text in 0..max; 0 when it is not one. */
static long long num(const char *s, long long max) {
    long long v;
    return rjq__parse_ll(s, strlen(s), 0, max, &v) == 0 ? v : 0;
}

/* Parse one client's info (process_info in upkeep.c) into p, its queues
 * taken from *qs and its ids from *ids (both advanced). text is a copy
 * owned by the caller's block. Unknown or empty info leaves the fields
 * empty. */
static void parse_info(char *text, rjq_process *p, rjq_process_queue **qs, const char ***ids) {
    p->host = p->name = "";
    p->queues = *qs;
    if (strncmp(text, "rjq1\t", 5) != 0) return;
    char *line = text;
    char *next = strchr(line, '\n');
    if (next) *next++ = '\0';
    char *f[5];
    if (split(line, '\t', f, 5) == 5) {
        p->host = f[1];
        p->pid = (long)num(f[2], INT_MAX);
        p->started_ms = num(f[3], RJQ__TIME_MAX);
        p->name = f[4];
    }
    while ((line = next) != NULL) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        char *g[4];
        if (split(line, '\t', g, 4) != 4) continue;
        rjq_process_queue *q = (*qs)++;
        q->queue = g[0];
        q->concurrency = (int)num(g[1], INT_MAX);
        q->running = (int)num(g[2], INT_MAX);
        q->jobs = *ids;
        q->njobs = 0;
        for (char *id = g[3], *end; *id; id = end) {
            end = id + strcspn(id, " ");
            if (*end) *end++ = '\0';
            if (*id == '\0' || q->njobs == RJQ_PROCESS_JOBS_MAX) continue;
            *(*ids)++ = id;
            q->njobs++;
        }
        p->nqueues++;
    }
}

int rjq__processes_parse(const redisReply *r, rjq_process **out, size_t *nout) {
    *out = NULL;
    *nout = 0;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || (r->elements - 1) % 3 != 0)
        return RJQ_EPROTO;
    for (size_t i = 1; i < r->elements; i += 3)
        if (r->element[i]->type != REDIS_REPLY_STRING ||
            r->element[i + 1]->type != REDIS_REPLY_INTEGER || r->element[i + 1]->integer < 0 ||
            r->element[i + 1]->integer > RJQ__TIME_MAX ||
            r->element[i + 2]->type != REDIS_REPLY_STRING)
            return RJQ_EPROTO;
    /* one block: the list, the queues, the id pointers, the texts */
    size_t n = (r->elements - 1) / 3;
    size_t nq = 0, nid = 0, bytes = 0;
    for (size_t i = 0; i < n; i++) {
        const redisReply *info = r->element[1 + 3 * i + 2], *id = r->element[1 + 3 * i];
        size_t l = lines(info->str);
        nq += l;
        nid += l; /* a line has at most one id more than it has spaces */
        for (size_t k = 0; k < info->len; k++) nid += info->str[k] == ' ';
        bytes += info->len + 1 + id->len + 1;
    }
    size_t size = n * sizeof(rjq_process) + nq * sizeof(rjq_process_queue) +
                  nid * sizeof(char *) + bytes;
    rjq_process *list = calloc(1, size ? size : 1);
    if (list == NULL) return RJQ_ENOMEM;
    rjq_process_queue *qs = (rjq_process_queue *)(list + n);
    const char **ids = (const char **)(qs + nq);
    char *text = (char *)(ids + nid);
    for (size_t i = 0; i < n; i++) {
        const redisReply *id = r->element[1 + 3 * i], *info = r->element[1 + 3 * i + 2];
        memcpy(text, id->str, id->len + 1);
        list[i].id = text;
        text += id->len + 1;
        list[i].alive_until_ms = r->element[1 + 3 * i + 1]->integer;
        memcpy(text, info->str, info->len + 1);
        parse_info(text, &list[i], &qs, &ids);
        text += info->len + 1;
    }
    *out = list;
    *nout = n;
    return RJQ_OK;
}

/* One listing: a script call per master on a Redis Cluster (each holds the
 * registry of the clients with workers on its queues: upkeep.c), one on a
 * standalone server. The lists are merged: a client beating into several
 * masters is listed once (with its latest entry end), soonest-expiring
 * first, and the page is cut from the merge. */
typedef struct ctx {
    rjq_processes_cb *cb;
    void *data;
    long offset, limit;
    int merge;                /* a cluster: each master was asked for offset + limit from 0 */
    int pending;              /* replies to come, plus the sender's own while it sends */
    int status;               /* the first failure; RJQ_OK */
    rjq_process **blocks;     /* each reply's parsed list (rjq__processes_parse) */
    size_t *nblock, nblocks;
} ctx;

static int by_id(const void *a, const void *b) {
    const rjq_process *x = a, *y = b;
    int d = strcmp(x->id, y->id);
    if (d) return d;
    return (x->alive_until_ms < y->alive_until_ms) - (x->alive_until_ms > y->alive_until_ms);
}

static int by_end(const void *a, const void *b) {
    const rjq_process *x = a, *y = b;
    if (x->alive_until_ms != y->alive_until_ms) return x->alive_until_ms < y->alive_until_ms ? -1 : 1;
    return strcmp(x->id, y->id);
}

static void processes_done(rjq_client *c, ctx *x) {
    size_t total = 0;
    for (size_t i = 0; i < x->nblocks; i++) total += x->nblock[i];
    rjq_process *all = NULL;
    size_t n = 0;
    if (x->status == RJQ_OK && total && (all = malloc(total * sizeof *all)) == NULL)
        x->status = RJQ_ENOMEM;
    if (x->status == RJQ_OK && total) {
        for (size_t i = 0; i < x->nblocks; i++)
            for (size_t k = 0; k < x->nblock[i]; k++) all[n++] = x->blocks[i][k];
        if (x->merge) { /* once each, latest end first among equals, then by end */
            qsort(all, n, sizeof *all, by_id);
            size_t kept = 0;
            for (size_t i = 0; i < n; i++)
                if (kept == 0 || strcmp(all[kept - 1].id, all[i].id) != 0) all[kept++] = all[i];
            n = kept;
            qsort(all, n, sizeof *all, by_end);
        }
    }
    const rjq_process *page = all;
    if (x->merge) {
        size_t off = (size_t)x->offset < n ? (size_t)x->offset : n;
        page = all ? all + off : NULL;
        n -= off;
        if (n > (size_t)x->limit) n = (size_t)x->limit;
    }
    x->cb(c, x->status, x->status == RJQ_OK ? page : NULL, x->status == RJQ_OK ? n : 0, x->data);
    free(all);
    for (size_t i = 0; i < x->nblocks; i++) free(x->blocks[i]);
    free(x->blocks);
    free(x->nblock);
    free(x);
}

static void on_processes(rjq_client *c, int status, redisReply *r, void *priv) {
    ctx *x = priv;
    rjq_process *list = NULL;
    size_t n = 0;
    if (status == RJQ_OK) status = rjq__processes_parse(r, &list, &n);
    if (status == RJQ_EPROTO) rjq__errmsg(c, "processes: unexpected reply");
    if (status == RJQ_OK) { /* (room for every reply was made before sending) */
        x->blocks[x->nblocks] = list;
        x->nblock[x->nblocks++] = n;
    }
    if (status != RJQ_OK && x->status == RJQ_OK) x->status = status;
    RJQ_ASSERT(x->pending > 0);
    if (--x->pending == 0) processes_done(c, x);
}

/* Ask one registry (pin: a master's, -1: the standalone one). */
static int ask(rjq_client *c, ctx *x, int pin, long offset, long limit) {
    char *keys[RJQ__G_COUNT];
    int keys_ok = 1;
    for (int i = 0; i < RJQ__G_COUNT; i++) keys_ok &= (keys[i] = rjq__global_key_at(c, i, pin)) != NULL;
    char off[32], lim[32];
    snprintf(off, sizeof off, "%ld", offset);
    snprintf(lim, sizeof lim, "%ld", limit);
    int rc = RJQ_ENOMEM;
    if (keys_ok) {
        const char *argv[RJQ__NKEYS_PROCESSES + 3];
        char num[16];
        int n = rjq__global_script_keys(RJQ__S_PROCESSES, (const char *const *)keys, num, argv,
                                        RJQ__NKEYS_PROCESSES + 1);
        argv[n++] = off;
        argv[n++] = lim;
        size_t lens[RJQ__NKEYS_PROCESSES + 3];
        for (int i = 0; i < n; i++) lens[i] = strlen(argv[i]);
        rc = rjq__script(c, RJQ__S_PROCESSES, 0, on_processes, x, n, argv, lens);
    }
    for (int i = 0; i < RJQ__G_COUNT; i++) free(keys[i]);
    return rc;
}

static int list_processes(rjq_client *c, long offset, long limit, rjq_processes_cb *cb,
                          void *data) {
    int pins[RJQ__MASTERS_MAX];
    size_t npins = rjq__route_masters(c, pins, RJQ__MASTERS_MAX);
    size_t asks = npins ? npins : 1;
    ctx *x = calloc(1, sizeof *x);
    if (x == NULL) return RJQ_ENOMEM;
    x->cb = cb;
    x->data = data;
    x->offset = offset;
    x->limit = limit;
    x->merge = npins > 0;
    x->blocks = calloc(asks, sizeof *x->blocks);
    x->nblock = calloc(asks, sizeof *x->nblock);
    if (x->blocks == NULL || x->nblock == NULL) {
        free(x->blocks);
        free(x->nblock);
        free(x);
        return RJQ_ENOMEM;
    }
    x->pending = 1; /* ours, while sending */
    int rc = RJQ_OK, sent = 0;
    rjq__enter(c); /* sending may flush enqueues, whose callbacks may free c */
    for (size_t i = 0; i < asks && rc == RJQ_OK; i++) {
        rc = npins ? ask(c, x, pins[i], 0, offset + limit) : ask(c, x, -1, offset, limit);
        if (rc == RJQ_OK) {
            x->pending++;
            sent++;
        }
    }
    if (sent == 0) {
        free(x->blocks);
        free(x->nblock);
        free(x);
    } else {
        if (rc != RJQ_OK && x->status == RJQ_OK) x->status = rc; /* reported by cb */
        rc = RJQ_OK;
        if (--x->pending == 0) processes_done(c, x);
    }
    rjq__leave(c);
    return rc;
}

/* A listing made before the first connect: it waits to know whether the
 * server is a cluster (each master's registry) or not (the one). */
typedef struct processes_call {
    rjq_processes_cb *cb;
    void *data;
    long offset, limit;
} processes_call;

static void processes_routed(rjq_client *c, int status, void *arg) {
    processes_call *k = arg;
    if (status == RJQ_OK && !rjq__accepting(c)) status = RJQ_ECLOSED;
    if (status == RJQ_OK) status = list_processes(c, k->offset, k->limit, k->cb, k->data);
    if (status != RJQ_OK) k->cb(c, status, NULL, 0, k->data);
    free(k);
}

int rjq_client_list_processes(rjq_client *c, long offset, long limit, rjq_processes_cb *cb,
                         void *data) {
    if (c == NULL || cb == NULL || offset < 0 || offset > RJQ_JOBS_OFFSET_MAX || limit <= 0 ||
        limit > RJQ_JOBS_PAGE_MAX)
        return RJQ_EINVAL;
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    if (rjq__routed(c))
        return list_processes(c, offset, limit, cb, data);
    processes_call *k = malloc(sizeof *k);
    if (k == NULL) return RJQ_ENOMEM;
    k->cb = cb;
    k->data = data;
    k->offset = offset;
    k->limit = limit;
    rjq__enter(c);
    int rc = rjq__when_routed(c, processes_routed, k);
    rjq__leave(c);
    if (rc != RJQ_OK) free(k);
    return rc;
}

const rjq_process *rjq_process_get(const rjq_process *list, size_t i) {
    return list ? &list[i] : NULL;
}

const rjq_process_queue *rjq_process_queue_get(const rjq_process_queue *list, size_t i) {
    return list ? &list[i] : NULL;
}
