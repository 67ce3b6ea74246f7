/*
 * Administration: stats, replay of dead jobs, an explicit reclaim sweep,
 * pause and resume, cancel, reading one job, listing the dead set, a step
 * of a payload search.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "headers.h"
#include "deps.h"
#include "job.h"
#include "reclaim.h"
#include "validate.h"

/* The caller's callback: one of the admin callback types. */
typedef union admin_cb {
    rjq_stats_cb *stats;
    rjq_count_cb *count;
    rjq_job_info_cb *job;
    rjq_ids_cb *ids;
    rjq_cancel_cb *cancel;
    rjq_search_cb *search;
    rjq_page_cb *page;
} admin_cb;

typedef struct admin_ctx {
    admin_cb cb;
    void *data;
    rjq_queue *q;  /* the queue (dependents to release: deps.c); NULL for a client's call */
    char *id;      /* cancel: the job's id */
} admin_ctx;

/* Send a request for an admin call. Sending may flush enqueues, whose
 * callbacks may free the client: the call enters it (freed on leave, after
 * which nothing here touches it). */
static int send_client_request(rjq_client *c, int script, rjq__reply_fn *fn, void *priv,
                               rjq__argv *a) {
    int rc = RJQ_ENOMEM;
    rjq__enter(c);
    if (!a->oom)
        rc = script >= 0 ? rjq__script(c, script, 0, fn, priv, a->n, a->v, a->len)
                         : rjq__command(c, 0, fn, priv, a->n, a->v, a->len);
    rjq__leave(c);
    return rc;
}

static int send_client_admin(rjq_client *c, rjq_queue *q, int script, rjq__reply_fn *fn,
                             admin_cb cb, void *data, rjq__argv *a) {
    admin_ctx *ctx = malloc(sizeof *ctx);
    int rc = RJQ_ENOMEM;
    if (ctx) {
        ctx->cb = cb;
        ctx->data = data;
        ctx->q = q;
        ctx->id = NULL;
        rc = send_client_request(c, script, fn, ctx, a);
    }
    if (rc != RJQ_OK) free(ctx);
    rjq__argv_free(a);
    return rc;
}

static int send_admin(rjq_queue *q, int script, rjq__reply_fn *fn, admin_cb cb, void *data,
                      rjq__argv *a) {
    return send_client_admin(rjq_queue_get_client(q), q, script, fn, cb, data, a);
}

/* The state words of the scripts, indexed by rjq_job_state. */
static const char *const state_names[] = {"ready", "delayed",   "active", "dead",
                                          "cancelled", "completed", "waiting"};
#define STATES (sizeof state_names / sizeof state_names[0])

static int usable(rjq_queue *q, int has_cb) {
    return has_cb ? rjq__queue_usable(q, "this call") : RJQ_EINVAL;
}

/* ---- stats ------------------------------------------------------------- */

static void on_stats(rjq_client *c, int status, redisReply *r, void *priv) {
    admin_ctx *ctx = priv;
    rjq_stats s;
    memset(&s, 0, sizeof s);
    long long paused = 0, exists = 0;
    long long *f[] = {&s.enqueued,  &s.completed,        &s.failed,     &s.retried,
                      &s.dead,      &s.reclaimed,        &s.replayed,   &s.ready,
                      &s.delayed,   &s.active,           &s.dead_depth, &s.cancelled,
                      &paused,      &s.cancelled_depth,  &s.limit_concurrency,
                      &s.limit_rate, &s.limit_rate_window_ms, &exists,
                      &s.dedup_reserved, &s.dedup_next_release_ms, &s.waiting};
    size_t nf = sizeof f / sizeof f[0];
    if (status == RJQ_OK && (r->type != REDIS_REPLY_ARRAY || r->elements != nf))
        status = RJQ_EPROTO;
    for (size_t i = 0; status == RJQ_OK && i < nf; i++) {
        /* (counts and limits: 0..2^62, so that differences of two never overflow) */
        if (r->element[i]->type != REDIS_REPLY_INTEGER || r->element[i]->integer < 0 ||
            r->element[i]->integer > RJQ__TIME_MAX)
            status = RJQ_EPROTO;
        else *f[i] = r->element[i]->integer;
    }
    s.paused = paused != 0;
    s.exists = exists != 0;
    if (status == RJQ_EPROTO) rjq__errmsg(c, "stats: unexpected reply");
    ctx->cb.stats(c, status, status == RJQ_OK ? &s : NULL, ctx->data);
    free(ctx);
}

int rjq__queue_stats_one(rjq_queue *q, rjq_stats_cb *cb, void *data) {
    int rc = usable(q, cb != NULL);
    if (rc != RJQ_OK) return rc;
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_STATS);
    return send_admin(q, RJQ__S_STATS, on_stats, (admin_cb){.stats = cb}, data, &a);
}

/* ---- cancel ------------------------------------------------------------------ */

static void on_cancel(rjq_client *c, int status, redisReply *r, void *priv) {
    admin_ctx *ctx = priv;
    const char *state = NULL;
    /* cancel.lua: { code, state, own, then (id, dependents entry) pairs:
     * the cancelled job's first when own is 1, then those its cancel buried } */
    if (status == RJQ_OK &&
        (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
         r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_STRING ||
         r->element[0]->integer < 0 || r->element[0]->integer > 2 ||
         r->element[2]->type != REDIS_REPLY_INTEGER || r->element[2]->integer < 0 ||
         r->element[2]->integer > 1 || !rjq__deps_entries_ok(r, 3) ||
         (size_t)r->element[2]->integer > (r->elements - 3) / 2)) {
        rjq__errmsg(c, "cancel: unexpected reply");
        status = RJQ_EPROTO;
    }
    if (status == RJQ_OK && r->elements > 3 && ctx->q && !rjq__closing(c))
        /* its dependents of other queues, and those of the jobs it buried (deps.c) */
        rjq__deps_release_entries(ctx->q, r, 3, (size_t)r->element[2]->integer, "cancelled");
    if (status == RJQ_OK) {
        long long code = r->element[0]->integer;
        status = code == 1 ? RJQ_OK : code == 0 ? RJQ_ENOTFOUND : RJQ_ESTATE;
        if (code != 0) state = r->element[1]->str;
    }
    if (ctx->cb.cancel) ctx->cb.cancel(c, status, state, ctx->data);
    free(ctx->id);
    free(ctx);
}

int rjq__queue_cancel_one(rjq_queue *q, const char *id, rjq_cancel_cb *cb, void *data) {
    int rc = usable(q, 1);
    if (rc != RJQ_OK) return rc;
    if (id == NULL || id[0] == '\0' || strlen(id) > RJQ_JOB_ID_MAX || strpbrk(id, " \t\r\n"))
        return RJQ_EJOBID;
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_CANCEL);
    rjq__argv_key(&a, q, RJQ__K_JOB);
    rjq__argv_str(&a, id);
    rjq__argv_ll(&a, rjq__queue_dead_max(q));
    admin_ctx *ctx = malloc(sizeof *ctx);
    rc = RJQ_ENOMEM;
    if (ctx) {
        ctx->cb.cancel = cb;
        ctx->data = data;
        ctx->q = q;
        ctx->id = strdup(id);
        if (ctx->id) rc = send_client_request(rjq_queue_get_client(q), RJQ__S_CANCEL, on_cancel, ctx, &a);
        if (rc != RJQ_OK) free(ctx->id);
    }
    if (rc != RJQ_OK) free(ctx);
    rjq__argv_free(&a);
    return rc;
}

/* ---- counts: replay, delete, promote, reclaim ------------------------------ */

/* A count's reply, an integer in [-2, max] (-1: no such job, -2: the job
 * is in another state), to the caller; r NULL: a reply of the wrong shape. */
static void count_done(rjq_client *c, admin_ctx *ctx, int status, const redisReply *r,
                       long long max) {
    long long n = 0;
    if (status == RJQ_OK &&
        (r == NULL || r->type != REDIS_REPLY_INTEGER || r->integer < -2 || r->integer > max))
        status = RJQ_EPROTO;
    if (status == RJQ_OK) {
        n = r->integer;
        if (n == -1) status = RJQ_ENOTFOUND;
        else if (n == -2) status = RJQ_ESTATE;
        if (n < 0) n = 0;
    }
    if (ctx->cb.count) ctx->cb.count(c, status, n, ctx->data);
    free(ctx);
}

/* replay, promote, pause, resume, the format, the limits: a count. */
static void on_count(rjq_client *c, int status, redisReply *r, void *priv) {
    count_done(c, priv, status, r, RJQ__TIME_MAX);
}

/* Release the dependents of other queues a count's reply carries, its
 * (id, entry) pairs from element first on (the first own of them ended
 * `outcome`, the rest dead: deps.c). */
static void release_entries(rjq_client *c, admin_ctx *ctx, const redisReply *r, size_t first,
                            size_t own, const char *outcome) {
    if (ctx->q && !rjq__closing(c)) rjq__deps_release_entries(ctx->q, r, first, own, outcome);
}

/* delete.lua's reply: its count (for an id 1, -1 or -2; for a set, 0 to
 * DELETE_MAX), or, when dependents of other queues are left to release,
 * { count (1 or more), outcome ('dead' or 'cancelled'), own (0 to the
 * pairs), (id, dependents entry) pairs }: the first own pairs' jobs ended
 * that outcome (the deleted ones), the others dead (buried by the release). */
#define DELETE_MAX 1000 /* (delete.lua's page) */
static const char *outcome_of(const redisReply *o) {
    if (o->type != REDIS_REPLY_STRING) return NULL;
    if (o->len == 9 && memcmp(o->str, "cancelled", 9) == 0) return "cancelled";
    return o->len == 4 && memcmp(o->str, "dead", 4) == 0 ? "dead" : NULL;
}

static void on_deleted(rjq_client *c, int status, redisReply *r, void *priv) {
    admin_ctx *ctx = priv;
    if (status == RJQ_OK && r->type == REDIS_REPLY_ARRAY) {
        const redisReply *n = r->elements >= 3 ? r->element[0] : NULL;
        const redisReply *own = n ? r->element[2] : NULL;
        const char *outcome = n ? outcome_of(r->element[1]) : NULL;
        if (outcome == NULL || n->type != REDIS_REPLY_INTEGER || n->integer < 1 ||
            own->type != REDIS_REPLY_INTEGER || own->integer < 0 ||
            (unsigned long long)own->integer > (r->elements - 3) / 2 ||
            !rjq__deps_entries_ok(r, 3)) {
            r = NULL;
        } else {
            release_entries(c, ctx, r, 3, (size_t)own->integer, outcome);
            r = r->element[0];
        }
    }
    count_done(c, ctx, status, r, DELETE_MAX);
}

/* reclaim.lua's reply (a call without the sweeper's guard): the count of
 * jobs reclaimed (0 or more), or, when some of them ended dead with
 * dependents of other queues, { count, (id, dependents entry) pairs }. */
static void on_reclaimed(rjq_client *c, int status, redisReply *r, void *priv) {
    admin_ctx *ctx = priv;
    if (status == RJQ_OK && r->type == REDIS_REPLY_ARRAY) {
        if (r->elements < 1 || r->element[0]->type != REDIS_REPLY_INTEGER ||
            r->element[0]->integer < 0 || !rjq__deps_entries_ok(r, 1)) {
            r = NULL;
        } else {
            release_entries(c, ctx, r, 1, 0, "dead");
            r = r->element[0];
        }
    }
    if (status == RJQ_OK && r && r->type == REDIS_REPLY_INTEGER && r->integer < 0) r = NULL;
    count_done(c, ctx, status, r, RJQ__TIME_MAX);
}

int rjq__queue_replay_one(rjq_queue *q, const char *id, long limit, rjq_count_cb *cb,
                          void *data) {
    int rc = usable(q, cb != NULL);
    if (rc != RJQ_OK) return rc;
    if (id && strlen(id) > RJQ_JOB_ID_MAX) return RJQ_EJOBID;
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_REPLAY);
    rjq__argv_key(&a, q, RJQ__K_WAKE);
    rjq__argv_str(&a, id ? id : "");
    rjq__argv_ll(&a, limit > 0 ? limit : 1000);
    return send_admin(q, RJQ__S_REPLAY, on_count, (admin_cb){.count = cb}, data, &a);
}

/* delete.lua: one job by id, or a page of the oldest of a set. */
static int send_delete(rjq_queue *q, const char *what, const char *arg, rjq_count_cb *cb,
                       void *data) {
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_DELETE);
    rjq__argv_str(&a, what);
    rjq__argv_str(&a, arg);
    rjq__argv_ll(&a, rjq__queue_dead_max(q)); /* (dependents buried by their policy) */
    rjq__argv_key(&a, q, RJQ__K_JOB);         /* (its queue's dependents released in the script) */
    return send_admin(q, RJQ__S_DELETE, on_deleted, (admin_cb){.count = cb}, data, &a);
}

int rjq__queue_delete_one(rjq_queue *q, const char *id, rjq_count_cb *cb, void *data) {
    int rc = usable(q, cb != NULL);
    if (rc != RJQ_OK) return rc;
    if (id == NULL || id[0] == '\0' || strlen(id) > RJQ_JOB_ID_MAX) return RJQ_EJOBID;
    return send_delete(q, "id", id, cb, data);
}

/* promote.lua: a delayed job made ready now. */
int rjq__queue_promote_one(rjq_queue *q, const char *id, rjq_count_cb *cb, void *data) {
    int rc = usable(q, 1);
    if (rc != RJQ_OK) return rc;
    if (id == NULL || id[0] == '\0' || strlen(id) > RJQ_JOB_ID_MAX || strpbrk(id, " \t\r\n"))
        return RJQ_EJOBID;
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_PROMOTE);
    rjq__argv_key(&a, q, RJQ__K_WAKE);
    rjq__argv_str(&a, id);
    return send_admin(q, RJQ__S_PROMOTE, on_count, (admin_cb){.count = cb}, data, &a);
}

int rjq__queue_purge_one(rjq_queue *q, rjq_job_state state, long limit, rjq_count_cb *cb,
                         void *data) {
    int rc = usable(q, cb != NULL);
    if (rc != RJQ_OK) return rc;
    if ((state != RJQ_STATE_DEAD && state != RJQ_STATE_CANCELLED) || limit <= 0 ||
        limit > RJQ_JOBS_PAGE_MAX)
        return RJQ_EINVAL;
    char n[24];
    snprintf(n, sizeof n, "%ld", limit);
    return send_delete(q, state == RJQ_STATE_DEAD ? "dead" : "cancelled", n, cb, data);
}

int rjq__queue_reclaim_one(rjq_queue *q, rjq_count_cb *cb, void *data) {
    int rc = usable(q, cb != NULL);
    if (rc != RJQ_OK) return rc;
    admin_ctx *ctx = malloc(sizeof *ctx);
    if (ctx == NULL) return RJQ_ENOMEM;
    ctx->cb.count = cb;
    ctx->data = data;
    ctx->q = q;
    ctx->id = NULL;
    rjq_client *c = rjq_queue_get_client(q);
    rjq__enter(c);
    rc = rjq__reclaim_send(q, 0, 0, on_reclaimed, ctx);
    rjq__leave(c);
    if (rc != RJQ_OK) free(ctx);
    return rc;
}

/* ---- pause, resume -------------------------------------------------------- */

static int set_paused(rjq_queue *q, int pause, rjq_count_cb *cb, void *data) {
    int rc = usable(q, 1);
    if (rc != RJQ_OK) return rc;
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_PAUSE);
    rjq__argv_key(&a, q, RJQ__K_JOB);
    rjq__argv_key(&a, q, RJQ__K_WAKE);
    rjq__argv_str(&a, pause ? "1" : "0");
    rc = send_admin(q, RJQ__S_PAUSE, on_count, (admin_cb){.count = cb}, data, &a);
    if (rc == RJQ_OK) rjq__queue_register(q); /* a queue set up is listed */
    return rc;
}

int rjq__queue_pause_one(rjq_queue *q, rjq_count_cb *cb, void *data) {
    return set_paused(q, 1, cb, data);
}

int rjq__queue_resume_one(rjq_queue *q, rjq_count_cb *cb, void *data) {
    return set_paused(q, 0, cb, data);
}

/* ---- the queue's data format (qformat.lua, docs/scripts.md "Queue format 2") -- */

int rjq__queue_format_one(rjq_queue *q, int format, rjq_count_cb *cb, void *data) {
    int rc = usable(q, 1);
    if (rc != RJQ_OK) return rc;
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_QFORMAT);
    rjq__argv_str(&a, format == 2 ? "2" : "1");
    return send_admin(q, RJQ__S_QFORMAT, on_count, (admin_cb){.count = cb}, data, &a);
}

/* ---- limits ------------------------------------------------------------------ */

int rjq__queue_limits_one(rjq_queue *q, const rjq_limits *l, rjq_count_cb *cb, void *data) {
    return rjq__queue_limits_fenced(q, l, -1, cb, data);
}

int rjq__queue_limits_fenced(rjq_queue *q, const rjq_limits *l, long long epoch, rjq_count_cb *cb,
                             void *data) {
    int rc = usable(q, 1);
    if (rc != RJQ_OK) return rc;
    rjq_limits copy = RJQ_LIMITS_INIT;
    if (l && rjq__sized_in(rjq_queue_get_client(q), &copy, sizeof copy, l, "rjq_limits") != RJQ_OK)
        return RJQ_EINVAL;
    l = &copy;
    if (l->concurrency < 0 || l->rate < 0 || l->rate_window_ms < 0 ||
        l->rate_window_ms > RJQ_DELAY_MAX)
        return RJQ_EINVAL;
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_LIMITS);
    rjq__argv_key(&a, q, RJQ__K_WAKE);
    rjq__argv_ll(&a, l->concurrency);
    rjq__argv_ll(&a, l->rate);
    rjq__argv_ll(&a, l->rate_window_ms ? l->rate_window_ms : 1000);
    if (epoch >= 0) rjq__argv_ll(&a, epoch);
    rc = send_admin(q, RJQ__S_LIMITS, on_count, (admin_cb){.count = cb}, data, &a);
    if (rc == RJQ_OK) rjq__queue_register(q); /* a queue set up is listed */
    return rc;
}

/* ---- one job ------------------------------------------------------------ */

static const redisReply *str_or_null(const redisReply *e) {
    return e->type == REDIS_REPLY_STRING ? e : NULL;
}

typedef struct job_ctx {
    admin_ctx base;
    char id[RJQ_JOB_ID_MAX + 1];
} job_ctx;

/* The attempts column: "<start> <end> <outcome> <token>" records joined by
 * ';' (lib.lua record_attempt), parsed in place into h (at most
 * RJQ_ATTEMPTS_KEPT; the newest kept). -1 for anything else. */
static int parse_history(char *t, rjq_attempt *h, size_t *n) {
    size_t k = 0;
    for (char *rec = t, *semi; rec; rec = semi) {
        semi = strchr(rec, ';');
        if (semi) *semi++ = '\0';
        char *f[4];
        int nf = 0;
        for (char *p = rec, *sp; p && nf < 4; p = sp) {
            sp = nf < 3 ? strchr(p, ' ') : NULL;
            if (sp) *sp++ = '\0';
            f[nf++] = p;
        }
        if (nf != 4 || f[2][0] == '\0' || f[3][0] == '\0' || strchr(f[3], ' ')) return -1;
        rjq_attempt a;
        if (rjq__parse_ll(f[0], strlen(f[0]), 0, RJQ__TIME_MAX, &a.started_ms) != 0 ||
            rjq__parse_ll(f[1], strlen(f[1]), 0, RJQ__TIME_MAX, &a.ended_ms) != 0)
            return -1;
        a.outcome = f[2];
        a.token = strcmp(f[3], "-") == 0 ? NULL : f[3];
        if (k == RJQ_ATTEMPTS_KEPT) { /* (more than kept: the newest) */
            memmove(h, h + 1, (RJQ_ATTEMPTS_KEPT - 1) * sizeof *h);
            k--;
        }
        h[k++] = a;
    }
    *n = k;
    return 0;
}

static void on_job(rjq_client *c, int status, redisReply *r, void *priv) {
    job_ctx *ctx = priv;
    rjq_job_info info;
    rjq_attempt hist[RJQ_ATTEMPTS_KEPT];
    char *htext = NULL;
    rjq_header *headers = NULL;
    memset(&info, 0, sizeof info);
    /* (7 elements: a library from before job times; 10: before attempt
     * history; 11: before headers) */
    if (status == RJQ_OK && (r->type != REDIS_REPLY_ARRAY ||
                             (r->elements != 7 && r->elements != 10 && r->elements != 11 &&
                              r->elements != 12)))
        status = RJQ_EPROTO;
    if (status == RJQ_OK && str_or_null(r->element[0]) == NULL) status = RJQ_ENOTFOUND;
    if (status == RJQ_OK) {
        const redisReply *d = str_or_null(r->element[3]), *res = str_or_null(r->element[4]),
                         *err = str_or_null(r->element[5]), *a = str_or_null(r->element[1]),
                         *m = str_or_null(r->element[2]);
        info.id = ctx->id;
        info.state = r->element[0]->str;
        long long na = 0, nm = 3; /* absent: none yet, the default */
        if ((a && rjq__parse_ll(a->str, a->len, 0, RJQ__ATTEMPTS_MAX, &na) != 0) ||
            (m && rjq__parse_ll(m->str, m->len, 0, RJQ__ATTEMPTS_MAX, &nm) != 0)) {
            rjq__errmsg(c, "job: unexpected reply");
            status = RJQ_EPROTO;
        }
        info.attempts = (int)na;
        info.max_attempts = (int)nm;
        info.payload = d ? d->str : "";
        info.payload_len = d ? d->len : 0;
        if (res && strcmp(info.state, "completed") == 0) {
            info.result = res->str;
            info.result_len = res->len;
        }
        info.error = err ? err->str : NULL;
        const redisReply *tok = str_or_null(r->element[6]);
        info.token = tok ? tok->str : NULL;
        long long *times[3] = {&info.enqueued_ms, &info.started_ms, &info.ended_ms};
        for (size_t i = 0; i < 3 && r->elements >= 10; i++) {
            const redisReply *t = str_or_null(r->element[7 + i]);
            if (t && rjq__parse_ll(t->str, t->len, 1, RJQ__TIME_MAX, times[i]) != 0) {
                rjq__errmsg(c, "job: unexpected reply");
                status = RJQ_EPROTO;
            }
        }
        const redisReply *hd = r->elements >= 12 ? str_or_null(r->element[11]) : NULL;
        if (status == RJQ_OK && hd && hd->len > 0) { /* (headers.h: checked as read) */
            int oom = 0;
            headers = rjq__headers_read(hd->str, hd->len, &info.nheaders, &oom);
            info.headers = headers;
            if (oom) status = RJQ_ENOMEM;
        }
        const redisReply *h = r->elements >= 11 ? str_or_null(r->element[10]) : NULL;
        if (status == RJQ_OK && h && h->len > 0) {
            if ((htext = malloc(h->len + 1)) == NULL) {
                status = RJQ_ENOMEM;
            } else {
                memcpy(htext, h->str, h->len + 1);
                if (parse_history(htext, hist, &info.history_len) != 0) {
                    rjq__errmsg(c, "job: unexpected attempt history");
                    status = RJQ_EPROTO;
                }
                info.history = info.history_len ? hist : NULL;
            }
        }
    }
    ctx->base.cb.job(c, status, status == RJQ_OK ? &info : NULL, ctx->base.data);
    free(htext);
    free(headers);
    free(ctx);
}

int rjq__queue_job_one(rjq_queue *q, const char *id, rjq_job_info_cb *cb, void *data) {
    int rc = usable(q, cb != NULL);
    if (rc != RJQ_OK) return rc;
    if (id == NULL || id[0] == '\0' || strlen(id) > RJQ_JOB_ID_MAX) return RJQ_EJOBID;
    job_ctx *ctx = malloc(sizeof *ctx);
    if (ctx == NULL) return RJQ_ENOMEM;
    ctx->base.cb.job = cb;
    ctx->base.data = data;
    strcpy(ctx->id, id);
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_JOB);
    rjq__argv_str(&a, id);
    rc = send_client_request(rjq_queue_get_client(q), RJQ__S_JOB, on_job, ctx, &a);
    rjq__argv_free(&a);
    if (rc != RJQ_OK) free(ctx);
    return rc;
}

/* ---- Redis' memory ----------------------------------------------------------- */

typedef struct memory_ctx {
    rjq_memory_cb *cb;
    void *data;
} memory_ctx;

/* The value of "field:" in INFO text, copied into out (size bytes). */
static int info_value(const char *text, const char *field, char *out, size_t size) {
    size_t flen = strlen(field);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, field, flen) != 0 || p[flen] != ':') continue;
        const char *v = p + flen + 1;
        size_t n = strcspn(v, "\r\n");
        if (n >= size) n = size - 1;
        memcpy(out, v, n);
        out[n] = '\0';
        return 0;
    }
    return -1;
}

static void on_memory(rjq_client *c, int status, redisReply *r, void *priv) {
    memory_ctx *ctx = priv;
    rjq_memory_info m;
    char used[32], max[32], policy[64];
    memset(&m, 0, sizeof m);
    if (status == RJQ_OK && r->type != REDIS_REPLY_STRING)
        status = RJQ_EPROTO;
    if (status == RJQ_OK &&
        (info_value(r->str, "used_memory", used, sizeof used) != 0 ||
         info_value(r->str, "maxmemory", max, sizeof max) != 0 ||
         info_value(r->str, "maxmemory_policy", policy, sizeof policy) != 0))
        status = RJQ_EPROTO;
    if (status == RJQ_EPROTO) rjq__errmsg(c, "INFO memory: unexpected reply");
    if (status == RJQ_OK && (rjq__parse_ll(used, strlen(used), 0, LLONG_MAX, &m.used_memory) != 0 ||
                             rjq__parse_ll(max, strlen(max), 0, LLONG_MAX, &m.maxmemory) != 0)) {
        rjq__errmsg(c, "INFO memory: unexpected reply");
        status = RJQ_EPROTO;
    }
    if (status == RJQ_OK) {
        m.maxmemory_policy = policy;
        m.can_evict_jobs = m.maxmemory > 0 && strncmp(policy, "allkeys-", 8) == 0;
    }
    ctx->cb(c, status, status == RJQ_OK ? &m : NULL, ctx->data);
    free(ctx);
}

int rjq_client_get_memory(rjq_client *c, rjq_memory_cb *cb, void *data) {
    if (c == NULL || cb == NULL) return RJQ_EINVAL;
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    memory_ctx *ctx = malloc(sizeof *ctx);
    if (ctx == NULL) return RJQ_ENOMEM;
    ctx->cb = cb;
    ctx->data = data;
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_str(&a, "INFO");
    rjq__argv_str(&a, "memory");
    int rc = send_client_request(c, -1, on_memory, ctx, &a);
    rjq__argv_free(&a);
    if (rc != RJQ_OK) free(ctx);
    return rc;
}

/* ---- a search step ------------------------------------------------------------ */

int rjq__hscan_cursor_ok(const char *s, size_t len) {
    if (len == 0 || len > 20) return 0;
    for (size_t i = 0; i < len; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

static int state_word(const redisReply *e) {
    if (e->type != REDIS_REPLY_STRING) return 0;
    for (size_t i = 0; i < STATES; i++)
        if (e->len == strlen(state_names[i]) && memcmp(e->str, state_names[i], e->len) == 0)
            return 1;
    return 0;
}

int rjq__search_matches(const redisReply *r, rjq_search_match **out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (r->elements < 3 || (r->elements - 3) % 2) return RJQ_EPROTO;
    for (size_t i = 3; i < r->elements; i += 2) {
        const redisReply *id = r->element[i];
        if (id->type != REDIS_REPLY_STRING || id->len == 0 || id->len > RJQ_JOB_ID_MAX ||
            memchr(id->str, '\0', id->len) || !state_word(r->element[i + 1]))
            return RJQ_EPROTO;
    }
    if (r->elements == 3) return RJQ_OK;
    rjq_search_match *m = malloc((r->elements - 3) / 2 * sizeof *m);
    if (m == NULL) return RJQ_ENOMEM;
    for (size_t i = 3; i < r->elements; i += 2, ++*n) {
        m[*n].id = r->element[i]->str;
        m[*n].state = r->element[i + 1]->str;
    }
    *out = m;
    return RJQ_OK;
}

static void on_search(rjq_client *c, int status, redisReply *r, void *priv) {
    admin_ctx *ctx = priv;
    rjq_search_match *m = NULL;
    size_t n = 0;
    if (status == RJQ_OK &&
        (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
         r->element[0]->type != REDIS_REPLY_STRING ||
         !rjq__hscan_cursor_ok(r->element[0]->str, r->element[0]->len) ||
         r->element[1]->type != REDIS_REPLY_INTEGER || r->element[1]->integer < 0 ||
         r->element[2]->type != REDIS_REPLY_INTEGER || r->element[2]->integer < 0))
        status = RJQ_EPROTO;
    if (status == RJQ_OK) status = rjq__search_matches(r, &m, &n);
    if (status == RJQ_EPROTO) rjq__errmsg(c, "search: unexpected reply");
    if (status == RJQ_OK)
        ctx->cb.search(c, RJQ_OK, r->element[0]->str, r->element[2]->integer,
                       r->element[1]->integer, m, n, ctx->data);
    else
        ctx->cb.search(c, status, NULL, 0, 0, NULL, 0, ctx->data);
    free(m);
    free(ctx);
}

int rjq_queue_search(rjq_queue *q, const char *cursor, const void *bytes, size_t len,
                     long count, rjq_search_cb *cb, void *data) {
    if (q == NULL || cb == NULL || cursor == NULL ||
        !rjq__hscan_cursor_ok(cursor, strlen(cursor)) ||
        bytes == NULL || len == 0 || len > RJQ_SEARCH_BYTES_MAX || count < 1 ||
        count > RJQ_SEARCH_COUNT_MAX)
        return RJQ_EINVAL;
    int rc = usable(q, 1);
    if (rc != RJQ_OK) return rc;
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_SEARCH);
    rjq__argv_str(&a, cursor);
    rjq__argv_ll(&a, count);
    rjq__argv_add(&a, bytes, len);
    return send_admin(q, RJQ__S_SEARCH, on_search, (admin_cb){.search = cb}, data, &a);
}

/* ---- dead list -------------------------------------------------------------- */

static void on_ids(rjq_client *c, int status, redisReply *r, void *priv) {
    admin_ctx *ctx = priv;
    const char **ids = NULL;
    size_t n = 0;
    if (status == RJQ_OK && r->type != REDIS_REPLY_ARRAY) status = RJQ_EPROTO;
    if (status == RJQ_OK && r->elements && (ids = malloc(r->elements * sizeof *ids)) == NULL)
        status = RJQ_ENOMEM;
    for (size_t i = 0; status == RJQ_OK && i < r->elements; i++)
        if (r->element[i]->type != REDIS_REPLY_STRING) status = RJQ_EPROTO;
    if (status == RJQ_OK)
        for (; n < r->elements; n++) ids[n] = r->element[n]->str;
    ctx->cb.ids(c, status, ids, n, ctx->data);
    free(ids);
    free(ctx);
}

/* ---- the queue registry ------------------------------------------------------ */

/* On a Redis Cluster, one page of every master's registry ("<prefix>:
 * {queues-<n>}", queue.c send_register), merged in name order: a name in
 * two registries (its slot moved) is listed once. Each master is asked
 * for the same page (names after `after`, `limit` of them), so the first
 * `limit` of the merge are the page of the union. */
typedef struct names_merge {
    rjq_ids_cb *cb;
    void *data;
    long limit;
    int pending;              /* replies to come, plus the sender's own while it sends */
    int status;               /* the first failure; RJQ_OK */
    char **names;             /* copies (NUL-terminated; lengths in lens) */
    size_t *lens;
    size_t n, cap;
} names_merge;

/* A name of the merge, for sorting. */
typedef struct name_ref {
    const char *s;
    size_t len;
} name_ref;

static int by_name(const void *a, const void *b) {
    const name_ref *x = a, *y = b;
    int d = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);
    return d ? d : (x->len > y->len) - (x->len < y->len);
}

static void merge_done(rjq_client *c, names_merge *m) {
    name_ref *order = m->n ? malloc(m->n * sizeof *order) : NULL;
    const char **ids = m->n ? malloc(m->n * sizeof *ids) : NULL;
    size_t k = 0;
    if (m->status == RJQ_OK && m->n && (order == NULL || ids == NULL)) m->status = RJQ_ENOMEM;
    if (m->status == RJQ_OK) {
        for (size_t i = 0; i < m->n; i++) order[i] = (name_ref){m->names[i], m->lens[i]};
        qsort(order, m->n, sizeof *order, by_name);
        for (size_t i = 0; i < m->n && (long)k < m->limit; i++)
            if (i == 0 || by_name(&order[i], &order[i - 1]) != 0) ids[k++] = order[i].s;
    }
    m->cb(c, m->status, m->status == RJQ_OK ? ids : NULL, m->status == RJQ_OK ? k : 0, m->data);
    for (size_t i = 0; i < m->n; i++) free(m->names[i]);
    free(m->names);
    free(m->lens);
    free(order);
    free(ids);
    free(m);
}

static void on_master_names(rjq_client *c, int status, redisReply *r, void *priv) {
    names_merge *m = priv;
    if (status == RJQ_OK && r->type != REDIS_REPLY_ARRAY) status = RJQ_EPROTO;
    for (size_t i = 0; status == RJQ_OK && i < r->elements; i++)
        if (r->element[i]->type != REDIS_REPLY_STRING) status = RJQ_EPROTO;
    if (status == RJQ_OK && m->n + r->elements > m->cap) {
        size_t cap = m->n + r->elements;
        char **names = realloc(m->names, cap * sizeof *names);
        if (names) m->names = names;
        size_t *lens = names ? realloc(m->lens, cap * sizeof *lens) : NULL;
        if (lens) {
            m->lens = lens;
            m->cap = cap;
        } else {
            status = RJQ_ENOMEM;
        }
    }
    for (size_t i = 0; status == RJQ_OK && i < r->elements; i++) {
        char *copy = malloc(r->element[i]->len + 1);
        if (copy == NULL) {
            status = RJQ_ENOMEM;
            break;
        }
        memcpy(copy, r->element[i]->str, r->element[i]->len + 1);
        m->names[m->n] = copy;
        m->lens[m->n++] = r->element[i]->len;
    }
    if (status == RJQ_EPROTO) rjq__errmsg(c, "queues: unexpected reply");
    if (status != RJQ_OK && m->status == RJQ_OK) m->status = status;
    RJQ_ASSERT(m->pending > 0);
    if (--m->pending == 0) merge_done(c, m);
}

static int queues_of_masters(rjq_client *c, const int *pins, size_t npins, const char *from,
                             size_t fromlen, long limit, rjq_ids_cb *cb, void *data) {
    names_merge *m = calloc(1, sizeof *m);
    if (m == NULL) return RJQ_ENOMEM;
    m->cb = cb;
    m->data = data;
    m->limit = limit;
    m->pending = 1; /* ours, while sending */
    int rc = RJQ_OK, sent = 0;
    rjq__enter(c);
    for (size_t i = 0; i < npins && rc == RJQ_OK; i++) {
        char *key = rjq__global_key_at(c, RJQ__G_REGISTRY, pins[i]);
        rjq__argv a;
        rjq__argv_init(&a);
        rjq__argv_str(&a, "ZRANGEBYLEX");
        if (key) rjq__argv_str(&a, key);
        if (from) rjq__argv_add(&a, from, fromlen);
        else rjq__argv_str(&a, "-");
        rjq__argv_str(&a, "+");
        rjq__argv_str(&a, "LIMIT");
        rjq__argv_str(&a, "0");
        rjq__argv_ll(&a, limit);
        rc = key == NULL || a.oom ? RJQ_ENOMEM
                                  : rjq__command(c, 0, on_master_names, m, a.n, a.v, a.len);
        if (rc == RJQ_OK) {
            m->pending++;
            sent++;
        }
        rjq__argv_free(&a);
        free(key);
    }
    if (sent == 0) {
        free(m);
    } else {
        if (rc != RJQ_OK && m->status == RJQ_OK) m->status = rc; /* reported by cb */
        rc = RJQ_OK;
        if (--m->pending == 0) merge_done(c, m);
    }
    rjq__leave(c);
    return rc;
}

static int list_queues(rjq_client *c, const char *after, long limit, rjq_ids_cb *cb, void *data) {
    int pins[RJQ__MASTERS_MAX];
    size_t npins = rjq__route_masters(c, pins, RJQ__MASTERS_MAX);
    if (npins > 0) {
        size_t alen = after ? strlen(after) : 0;
        char *from = after ? malloc(alen + 2) : NULL;
        if (after && from == NULL) return RJQ_ENOMEM;
        if (from) snprintf(from, alen + 2, "(%s", after);
        int rc = queues_of_masters(c, pins, npins, from, alen + 1, limit, cb, data);
        free(from);
        return rc;
    }
    rjq__argv a;
    rjq__argv_init(&a);
    /* any name the registry may hold, also one longer than a queue name
     * (any client can write there) */
    size_t alen = after ? strlen(after) : 0;
    char key[512], *from = malloc(alen + 2);
    if (from == NULL) {
        rjq__argv_free(&a);
        return RJQ_ENOMEM;
    }
    snprintf(key, sizeof key, "%s:%s", rjq__client_prefix(c), rjq__global_names[RJQ__G_REGISTRY]);
    snprintf(from, alen + 2, "(%s", after ? after : "");
    rjq__argv_str(&a, "ZRANGEBYLEX");
    rjq__argv_copy(&a, key);
    if (after) rjq__argv_add(&a, from, alen + 1);
    else rjq__argv_str(&a, "-");
    rjq__argv_str(&a, "+");
    rjq__argv_str(&a, "LIMIT");
    rjq__argv_str(&a, "0");
    rjq__argv_ll(&a, limit);
    int rc = send_client_admin(c, NULL, -1, on_ids, (admin_cb){.ids = cb}, data, &a);
    free(from); /* (the command is formatted when sent) */
    return rc;
}

/* A listing made before the first connect: it waits to know whether the
 * server is a cluster (each master's registry) or not (the one). */
typedef struct queues_call {
    rjq_ids_cb *cb;
    void *data;
    long limit;
    char *after;
} queues_call;

static void queues_routed(rjq_client *c, int status, void *arg) {
    queues_call *k = arg;
    if (status == RJQ_OK && !rjq__accepting(c)) status = RJQ_ECLOSED;
    if (status == RJQ_OK) status = list_queues(c, k->after, k->limit, k->cb, k->data);
    if (status != RJQ_OK) k->cb(c, status, NULL, 0, k->data);
    free(k->after);
    free(k);
}

int rjq_client_list_queues(rjq_client *c, const char *after, long limit, rjq_ids_cb *cb, void *data) {
    if (c == NULL || cb == NULL || limit <= 0 || limit > RJQ_JOBS_PAGE_MAX) return RJQ_EINVAL;
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    if (rjq__routed(c))
        return list_queues(c, after, limit, cb, data);
    queues_call *k = calloc(1, sizeof *k);
    if (k == NULL || (after && (k->after = strdup(after)) == NULL)) {
        free(k);
        return RJQ_ENOMEM;
    }
    k->cb = cb;
    k->data = data;
    k->limit = limit;
    rjq__enter(c);
    int rc = rjq__when_routed(c, queues_routed, k);
    rjq__leave(c);
    if (rc != RJQ_OK) {
        free(k->after);
        free(k);
    }
    return rc;
}

int rjq__queue_jobs_one(rjq_queue *q, rjq_job_state state, long offset, long limit,
                        rjq_ids_cb *cb, void *data) {
    int rc = usable(q, cb != NULL);
    if (rc != RJQ_OK) return rc;
    if ((unsigned)state >= STATES || offset < 0 ||
        offset > RJQ_JOBS_OFFSET_MAX || limit <= 0 || limit > RJQ_JOBS_PAGE_MAX)
        return RJQ_EINVAL;
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_JOBS);
    rjq__argv_str(&a, state_names[state]);
    rjq__argv_ll(&a, offset);
    rjq__argv_ll(&a, limit);
    return send_admin(q, RJQ__S_JOBS, on_ids, (admin_cb){.ids = cb}, data, &a);
}

/* jobs_after.lua: { next, ids... }, next '' at the end. */
static void on_page(rjq_client *c, int status, redisReply *r, void *priv) {
    admin_ctx *ctx = priv;
    const char **ids = NULL;
    size_t n = 0;
    if (status == RJQ_OK && (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
                             r->elements > RJQ_JOBS_PAGE_MAX + 1))
        status = RJQ_EPROTO;
    for (size_t i = 0; status == RJQ_OK && i < r->elements; i++)
        if (r->element[i]->type != REDIS_REPLY_STRING) status = RJQ_EPROTO;
    if (status == RJQ_OK && r->elements > 1 && (ids = malloc((r->elements - 1) * sizeof *ids)) == NULL)
        status = RJQ_ENOMEM;
    const char *next = NULL;
    if (status == RJQ_OK) {
        for (; n + 1 < r->elements; n++) ids[n] = r->element[n + 1]->str;
        if (r->element[0]->len > 0) next = r->element[0]->str;
    } else if (status == RJQ_EPROTO) {
        rjq__errmsg(c, "jobs page: unexpected reply");
    }
    ctx->cb.page(c, status, ids, n, next, ctx->data);
    free(ids);
    free(ctx);
}

/* A cursor jobs_after.lua made: "z<score> <id>", "l <id>", "c <id>",
 * "d<score> <id>" (the job groups' delayed set), or "g<group> " and a "z"
 * or "l" one (a job group's ready job). */
static int page_cursor_ok(const char *k) {
    const char *sp = strchr(k, ' ');
    if (k[0] == 'g') {
        char g[RJQ_GROUP_NAME_MAX + 1];
        if (sp == NULL || sp == k + 1 || sp - k - 1 > RJQ_GROUP_NAME_MAX) return 0;
        memcpy(g, k + 1, (size_t)(sp - k - 1));
        g[sp - k - 1] = '\0';
        if (!rjq__valid_group_name(g) || (sp[1] != 'z' && sp[1] != 'l')) return 0;
        k = sp + 1;
        sp = strchr(k, ' ');
    }
    if (sp == NULL || sp[1] == '\0' || strlen(sp + 1) > RJQ_JOB_ID_MAX) return 0;
    if (k[0] == 'l' || k[0] == 'c') return sp == k + 1;
    if ((k[0] != 'z' && k[0] != 'd') || sp == k + 1 || sp - k > 40) return 0;
    char num[48], *end;
    memcpy(num, k + 1, (size_t)(sp - k - 1));
    num[sp - k - 1] = '\0';
    (void)strtod(num, &end);
    return *end == '\0';
}

int rjq_queue_list_jobs_after(rjq_queue *q, rjq_job_state state, const char *after, long limit,
                              rjq_page_cb *cb, void *data) {
    int rc = usable(q, cb != NULL);
    if (rc != RJQ_OK) return rc;
    if ((unsigned)state >= STATES || limit <= 0 || limit > RJQ_JOBS_PAGE_MAX ||
        (after && after[0] && !page_cursor_ok(after)))
        return RJQ_EINVAL;
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_JOBS_AFTER);
    rjq__argv_str(&a, state_names[state]);
    rjq__argv_str(&a, after ? after : "");
    rjq__argv_ll(&a, limit);
    return send_admin(q, RJQ__S_JOBS_AFTER, on_page, (admin_cb){.page = cb}, data, &a);
}

int rjq__queue_dead_one(rjq_queue *q, long offset, long limit, rjq_ids_cb *cb, void *data) {
    int rc = usable(q, cb != NULL);
    if (rc != RJQ_OK) return rc;
    if (offset < 0 || limit <= 0 || limit > LONG_MAX - offset) return RJQ_EINVAL;
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_str(&a, "ZRANGE");
    rjq__argv_key(&a, q, RJQ__K_DEAD);
    rjq__argv_ll(&a, offset);
    rjq__argv_ll(&a, offset + limit - 1);
    return send_admin(q, -1, on_ids, (admin_cb){.ids = cb}, data, &a);
}

/* Element i of the matches of rjq_queue_search's and rjq_queue_find's callbacks (rjq.h "Extensible structs": the library's own
 * stride, whatever sizeof the caller was built with). */
const rjq_search_match *rjq_search_match_get(const rjq_search_match *list, size_t i) {
    return list ? &list[i] : NULL;
}

/* Element i of rjq_job_info.history (rjq.h "Extensible structs": the library's own
 * stride, whatever sizeof the caller was built with). */
const rjq_attempt *rjq_attempt_get(const rjq_attempt *list, size_t i) {
    return list ? &list[i] : NULL;
}
