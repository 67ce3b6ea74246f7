/*
 * rjq serve: the /v1 routes but the enqueue (enqueue.c).
 *
 *   GET    /v1/server                         the server: version, options, counters
 *   GET    /v1/processes[?offset=&limit=]     the processes running workers (rjq_client_list_processes)
 *   GET    /v1/queues[?after=&limit=]         the queues served, with stats and rates
 *   GET    /v1/queues/{q}[?shards=1]          one queue (404 when nothing of it is in Redis);
 *                                             a sharded queue's shards too with ?shards=1
 *   GET    /v1/queues/{q}/jobs?state=S[&offset=&limit=&rows=0]   the jobs of a state, in
 *                                          queue order: ids, and their rows (rows.c) for a
 *                                          page of at most 100 (rows=0: ids only)
 *   GET    /v1/queues/{q}/jobs?state=S&after=CURSOR[&limit=&rows=0]   the same by cursor
 *                                          (rjq_queue_list_jobs_after; after= empty: the
 *                                          first page), "next" the next page's (null: the end)
 *   POST   /v1/queues/{q}/jobs                enqueue (enqueue.c)
 *   GET    /v1/queues/{q}/jobs/{id}           one job
 *   DELETE /v1/queues/{q}/jobs/{id}           delete a dead or cancelled job
 *   POST   /v1/queues/{q}/jobs/{id}/cancel    cancel a job
 *   POST   /v1/queues/{q}/jobs/{id}/replay    replay a dead job
 *   POST   /v1/queues/{q}/jobs/{id}/run-now   run a delayed job now (rjq_queue_promote)
 *   POST   /v1/queues/{q}/run-now {"ids":[...]}   run delayed jobs now, each id's outcome (bulk.c)
 *   POST   /v1/queues/{q}/replay[?limit=]     replay the oldest dead jobs
 *   POST   /v1/queues/{q}/purge?state=dead|cancelled   delete every job of the set
 *   POST   /v1/queues/{q}/pause, /resume      pause or resume the queue
 *   POST   /v1/queues/{q}/reclaim             run a lease sweep now
 *   POST   /v1/queues/{q}/search, GET|DELETE /v1/queues/{q}/search/{id}   (search.c)
 *   GET    /v1/queues/{q}/history?range=1h|24h|30d   the stored history (history.c)
 *   GET    /v1/queues/{q}/groups[/{g}], POST .../groups/{g}/pause, /resume   (groups.c)
 *   GET    /v1/queues/{q}/batches[?state=&limit=&after=]   the queue's batches, newest
 *                                          first (rjq_batch_list): "next" the next page's
 *                                          cursor (null: the end)
 *   GET    /v1/queues/{q}/batches/{id}, DELETE .../batches/{id}[?force=1]   one batch
 */
#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "rjq.h"
#include "statsfmt.h"

#define LIST_DEFAULT 1000
#define JOBS_DEFAULT 100
#define ROWS_MAX 100      /* the longest page whose jobs are read (rows.c) */

/* One request waiting for a reply from Redis. */
typedef struct call {
    held h;
    squeue *q;
    char *rest;       /* the path after /v1/queues (a lookup routes it again) */
    long long total;  /* purge: deleted so far */
    rjq_job_state state;
    const char *what; /* the action, in replies (a literal) */
    rjq_stats st;     /* settings: the stats read first; ?shards=1: the sum */
    int want_shards;  /* GET /v1/queues/{q}?shards=1 */
    int waiting, failed; /* ?shards=1: shards' stats out, the first error */
    json_t *deps;     /* .../dependencies: the first half of the reply */
    char job_id[RJQ_JOB_ID_MAX + 1]; /* .../dependencies: the job */
    struct shard_call {
        struct call *c;
        int i;
    } sc[RJQ_SHARDS_MAX];
    rjq_stats shard_st[RJQ_SHARDS_MAX];
    int rows;         /* jobs: read the rows of the ids (rows.c) */
} call;

/* A request waiting for its queue's layout (queues.c reads it once, when
 * the queue is first served): routed again once known. */
typedef struct parked {
    held h;
    squeue *q;
    char *rest;
    int enqueue;      /* an enqueue: counted with the server's waiting requests */
    struct parked *next;
} parked;

static void call_free(call *c) {
    if (c->q) c->q->refs--;
    json_decref(c->deps);
    free(c->rest);
    free(c);
}

static call *call_new(server *s, struct evhttp_request *req, squeue *q, const char *what) {
    call *c = calloc(1, sizeof *c);
    if (c == NULL) {
        reply_error(req, 503, "out of memory");
        return NULL;
    }
    c->q = q;
    if (q) q->refs++;
    c->what = what;
    held_start(s, &c->h, req, NULL, 0); /* (its reply callback frees it) */
    return c;
}

/* A request refused by the library before it was sent. */
static void call_refused(call *c, int rc) {
    struct evhttp_request *req = held_end(&c->h);
    if (req) reply_rjq_error(req, rc, rjq_client_get_errmsg(c->h.s->c));
    call_free(c);
}

/* Start the library call rc of c: on a refusal, answer and free. */
static void call_sent(call *c, int rc) {
    if (rc != RJQ_OK) call_refused(c, rc);
}

/* The end of a reply: the request to answer (NULL: the client is gone, or
 * the status was an error, answered here), c freed unless keep. */
static struct evhttp_request *call_reply(call *c, int status) {
    struct evhttp_request *req = held_end(&c->h);
    if (req && status != RJQ_OK && status != RJQ_ENOTFOUND && status != RJQ_ESTATE) {
        reply_rjq_error(req, status, rjq_client_get_errmsg(c->h.s->c));
        req = NULL;
    }
    return req;
}

/* ---- GET /v1/server ---------------------------------------------------------------- */

void api_server(server *s, struct evhttp_request *req) {
    char version[32];
    int v = rjq_version();
    snprintf(version, sizeof version, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    json_t *mem = s->memory_known
                      ? json_pack("{sI sI ss sb}", "used_memory", (json_int_t)s->memory.used_memory,
                                  "maxmemory", (json_int_t)s->memory.maxmemory,
                                  "maxmemory_policy", s->memory.maxmemory_policy,
                                  "can_evict_jobs", s->memory.can_evict_jobs)
                      : json_null();
    json_t *o = json_pack("{ss sb sb sb so sI sI sI sI sI sI sI sI sb}", "version", version,
                         "read_only", s->o.read_only, "demo", s->o.demo, "token",
                         s->token != NULL, "queues", json_name(s->o.queues ? s->o.queues : "*"),
                         "served", (json_int_t)s->nqueues, "max_body", (json_int_t)s->o.max_body,
                         "waiting", (json_int_t)s->nwaiters, "awaits",
                         (json_int_t)rjq_client_count_awaits(s->c), "streams", (json_int_t)s->nsse,
                         "requests", (json_int_t)s->requests, "request_timeout_ms",
                         (json_int_t)s->o.request_timeout_ms, "timed_out",
                         (json_int_t)deadline_timed_out(s), "redis", s->redis_up);
    if (o) {
        json_object_set_new(o, "max_queues", json_integer(s->o.max_queues));
        json_object_set_new(o, "queue_idle_ms", json_integer(s->o.queue_idle_ms));
        json_object_set_new(o, "handles", json_integer((json_int_t)s->nhandles));
        json_object_set_new(o, "refreshes", json_integer(s->ticks));
        json_object_set_new(o, "too_large", json_integer(deadline_too_large(s)));
    }
    if (o) json_object_set_new(o, "redis_memory", mem);
    else json_decref(mem);
    if (o) json_object_set_new(o, "redis_nodes", s->redis_nodes ? json_incref(s->redis_nodes)
                                                                : json_null());
    if (o) json_object_set_new(o, "redis_down_since_ms", s->redis_up ? json_null()
                                                            : json_integer(s->redis_down_ms));
    reply_json(req, 200, o);
}

/* ---- GET /v1/processes ---------------------------------------------------------- */

json_t *processes_json(const rjq_process *list, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        const rjq_process *p = rjq_process_get(list, i);
        json_t *qs = json_array();
        for (size_t k = 0; qs && k < p->nqueues; k++) {
            const rjq_process_queue *q = rjq_process_queue_get(p->queues, k);
            json_t *ids = json_array();
            for (size_t j = 0; ids && j < q->njobs; j++)
                json_array_append_new(ids, json_name(q->jobs[j]));
            json_array_append_new(qs, json_pack("{so si si so}", "queue", json_name(q->queue),
                                                "concurrency", q->concurrency, "running",
                                                q->running, "jobs", ids));
        }
        json_array_append_new(
            a, json_pack("{so so sI sI so sI so}", "id", json_name(p->id), "host",
                         json_bytes(p->host, strlen(p->host)), "pid", (json_int_t)p->pid,
                         "started_ms", (json_int_t)p->started_ms, "name",
                         json_bytes(p->name, strlen(p->name)), "alive_until_ms",
                         (json_int_t)p->alive_until_ms, "queues", qs));
    }
    return json_pack("{so}", "processes", a);
}

static void on_processes(rjq_client *cl, int status, const rjq_process *list, size_t n,
                         void *data) {
    call *c = data;
    (void)cl;
    struct evhttp_request *req = call_reply(c, status);
    if (req) reply_json(req, 200, processes_json(list, n));
    call_free(c);
}

void api_processes(server *s, struct evhttp_request *req, const struct evkeyvalq *args) {
    long long offset, limit;
    if (query_only(req, args, ROUTE_PROCESSES) == 0 &&
        query_ll(req, args, "offset", 0, RJQ_JOBS_OFFSET_MAX, 0, &offset) == 0 &&
        query_ll(req, args, "limit", 1, RJQ_JOBS_PAGE_MAX, RJQ_JOBS_PAGE_MAX, &limit) == 0) {
        call *c = call_new(s, req, NULL, "processes");
        if (c) call_sent(c, rjq_client_list_processes(s->c, (long)offset, (long)limit, on_processes, c));
    }
}

/* ---- GET /v1/queues ---------------------------------------------------------------- */

static int by_name(const void *a, const void *b) {
    return strcmp((*(squeue *const *)a)->name, (*(squeue *const *)b)->name);
}

static void list_queues(server *s, struct evhttp_request *req, const struct evkeyvalq *args) {
    long long limit;
    if (query_only(req, args, ROUTE_QUEUES) ||
        query_ll(req, args, "limit", 1, 10000, LIST_DEFAULT, &limit))
        return;
    queues_watch_all(s);
    const char *after = query_get(args, "after");
    squeue **v = s->nqueues ? malloc(s->nqueues * sizeof *v) : NULL;
    json_t *a = json_array();
    if ((s->nqueues && v == NULL) || a == NULL) {
        free(v);
        json_decref(a);
        reply_error(req, 503, "out of memory");
        return;
    }
    size_t n = 0;
    for (squeue *q = s->queues; q; q = q->next) v[n++] = q;
    if (n > 1) qsort(v, n, sizeof *v, by_name); /* (v is NULL when there is none) */
    const char *last = NULL;
    for (size_t i = 0; i < n && (long long)json_array_size(a) < limit; i++) {
        if (after && strcmp(v[i]->name, after) <= 0) continue;
        if (v[i]->have && !v[i]->s.exists) continue; /* named by a refused request */
        if (queues_shard_of(s, v[i]->name, NULL)) continue; /* one row per sharded queue */
        json_t *j = queues_json(s, v[i]);
        if (j && !v[i]->have) json_object_set_new(j, "stats", json_null()); /* not read yet */
        json_array_append_new(a, j);
        last = v[i]->name;
    }
    json_t *o = json_pack("{so}", "queues", a);
    if (o && last && (long long)json_array_size(a) == limit)
        json_object_set_new(o, "next", json_name(last));
    free(v);
    reply_json(req, 200, o);
}

/* ---- one queue ------------------------------------------------------------------------ */

/* The reply of GET /v1/queues/{q}: its stats (the sum for a sharded
 * queue) and, with ?shards=1, each shard's. */
static void queue_reply(call *c, struct evhttp_request *req) {
    squeue tmp = *c->q; /* its rates and timings, these stats */
    tmp.s = c->st;
    json_t *o = queues_json(c->h.s, &tmp);
    if (o && c->want_shards) {
        json_t *a = json_array();
        int n = c->q->known ? c->q->nshards : 1;
        for (int i = 0; a && n > 1 && i < n; i++) {
            rjq_queue *sh = rjq_queue_get_shard(c->q->q, i);
            int slot = rjq_queue_get_slot(sh);
            const char *m = queues_master_of(c->h.s, slot);
            json_array_append_new(a, json_pack("{si so si so so}", "index", i, "name",
                                               json_name(rjq_queue_get_name(sh)), "slot", slot,
                                               "master", m ? json_name(m) : json_null(),
                                               "stats", queues_stats_json(&c->shard_st[i])));
        }
        json_object_set_new(o, "shard_stats", a ? a : json_null());
    }
    reply_json(req, 200, o);
}

static void shard_stats_end(call *c) {
    if (--c->waiting > 0) return;
    struct evhttp_request *req = call_reply(c, c->failed);
    if (req) queue_reply(c, req);
    call_free(c);
}

static void on_shard_stats(rjq_client *cl, int status, const rjq_stats *st, void *data) {
    struct shard_call *sc = data;
    (void)cl;
    if (status == RJQ_OK) sc->c->shard_st[sc->i] = *st;
    else if (sc->c->failed == RJQ_OK) sc->c->failed = status;
    shard_stats_end(sc->c);
}

static void on_queue_stats(rjq_client *cl, int status, const rjq_stats *st, void *data) {
    call *c = data;
    (void)cl;
    if (status == RJQ_OK && st->exists && c->want_shards && c->q->known && c->q->nshards > 1 &&
        c->h.req) { /* each shard's stats next (the sum is read first, in one call) */
        c->st = *st;
        int n = c->q->nshards, rc = RJQ_OK;
        c->waiting = 1;
        for (int i = 0; i < n && rc == RJQ_OK; i++) {
            c->sc[i] = (struct shard_call){c, i};
            rc = rjq_queue_get_stats(rjq_queue_get_shard(c->q->q, i), on_shard_stats, &c->sc[i]);
            if (rc == RJQ_OK) c->waiting++;
            else c->failed = rc;
        }
        shard_stats_end(c); /* (the calls' own count) */
        return;
    }
    struct evhttp_request *req = call_reply(c, status);
    if (req && !st->exists) {
        reply_error(req, 404, "queue '%s' does not exist (nothing of it is in Redis)",
                    c->q->name);
    } else if (req) {
        c->st = *st;
        queue_reply(c, req);
    }
    call_free(c);
}

/* ---- GET /v1/queues/{q}/settings: the stats' settings, then the schedules ---------- */

static void on_settings_schedules(rjq_client *cl, int status, const rjq_schedule_info *list,
                                  size_t n, void *data) {
    call *c = data;
    (void)cl;
    struct evhttp_request *req = call_reply(c, status);
    if (req) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < n; i++) {
            const rjq_schedule_info *si = rjq_schedule_info_get(list, i);
            json_array_append_new(a, json_pack("{so so so}", "name", json_name(si->name), "spec",
                                               json_name(si->spec), "next_ms",
                                               si->next_ms > 0 ? json_integer(si->next_ms)
                                                               : json_null()));
        }
        const rjq_stats *st = &c->st;
        long mw = c->h.s->o.max_waiting;
        reply_json(req, 200,
                   json_pack("{so sb s{sI sI sI} so so s{sI so}}", "queue", json_name(c->q->name),
                             "paused", st->paused, "limits", "concurrency",
                             (json_int_t)st->limit_concurrency, "rate",
                             (json_int_t)st->limit_rate, "rate_window_ms",
                             (json_int_t)st->limit_rate_window_ms, "max_waiting",
                             mw > 0 ? json_integer(mw) : json_null(), "schedules", a, "dedup",
                             "reserved", (json_int_t)st->dedup_reserved, "next_release_ms",
                             st->dedup_next_release_ms > 0
                                 ? json_integer(st->dedup_next_release_ms)
                                 : json_null()));
    }
    call_free(c);
}

static void on_settings_stats(rjq_client *cl, int status, const rjq_stats *st, void *data) {
    call *c = data;
    (void)cl;
    if (status == RJQ_OK && st->exists && c->h.req) {
        c->st = *st;
        int rc = rjq_schedule_list(c->q->q, on_settings_schedules, c);
        if (rc == RJQ_ESHARDED) /* (a library that refuses a sharded queue's schedules) */
            on_settings_schedules(cl, RJQ_OK, NULL, 0, c);
        else
            call_sent(c, rc);
        return;
    }
    struct evhttp_request *req = call_reply(c, status);
    if (req) reply_error(req, 404, "queue '%s' does not exist (nothing of it is in Redis)",
                         c->q->name);
    call_free(c);
}

static void on_ids(rjq_client *cl, int status, const char *const *ids, size_t n, void *data) {
    call *c = data;
    (void)cl;
    struct evhttp_request *req = call_reply(c, status);
    if (req && c->rows) {
        rows_reply(c->h.s, req, c->q, c->state, c->total, ids, n);
    } else if (req) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < n; i++) json_array_append_new(a, json_name(ids[i]));
        reply_json(req, 200, json_pack("{so ss sI so}", "queue", json_name(c->q->name), "state",
                                       job_state_name(c->state), "offset", (json_int_t)c->total,
                                       "ids", a));
    }
    call_free(c);
}

static void on_page(rjq_client *cl, int status, const char *const *ids, size_t n,
                    const char *next, void *data) {
    call *c = data;
    (void)cl;
    struct evhttp_request *req = call_reply(c, status);
    if (req && c->rows) {
        rows_reply_page(c->h.s, req, c->q, c->state, ids, n, next);
    } else if (req) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < n; i++) json_array_append_new(a, json_name(ids[i]));
        reply_json(req, 200, json_pack("{so ss so so}", "queue", json_name(c->q->name), "state",
                                       job_state_name(c->state), "ids", a, "next",
                                       next ? json_string(next) : json_null()));
    }
    call_free(c);
}

static void list_jobs(server *s, struct evhttp_request *req, squeue *q,
                      const struct evkeyvalq *args) {
    rjq_job_state st;
    long long offset, limit, rows;
    if (query_only(req, args, ROUTE_JOBS)) return;
    if (job_state_parse(query_get(args, "state"), &st) != 0) {
        reply_error(req, 400, "state must be ready, delayed, waiting, active, dead, cancelled or "
                              "completed");
        return;
    }
    if (query_ll(req, args, "offset", 0, RJQ_JOBS_OFFSET_MAX, 0, &offset) ||
        query_ll(req, args, "limit", 1, RJQ_JOBS_PAGE_MAX, JOBS_DEFAULT, &limit) ||
        query_ll(req, args, "rows", 0, 1, 1, &rows))
        return;
    call *c = call_new(s, req, q, "jobs");
    if (c == NULL) return;
    c->rows = rows && limit <= ROWS_MAX; /* a longer page: ids only, as before rows */
    c->state = st;
    c->total = offset;
    const char *after = query_get(args, "after");
    if (after)
        call_sent(c, rjq_queue_list_jobs_after(q->q, st, after, (long)limit, on_page, c));
    else
        call_sent(c, rjq_queue_list_jobs(q->q, st, (long)offset, (long)limit, on_ids, c));
}

/* A job's time (server ms), null when it has none. */
static json_t *json_time(long long ms) {
    return ms ? json_integer(ms) : json_null();
}

/* One attempt: {started_ms, ended_ms, outcome, token} (rows.c turns the
 * token into its worker). */
static json_t *attempt_json(long long started, long long ended, const char *outcome,
                            const char *token) {
    return json_pack("{so so ss so}", "started_ms", json_time(started), "ended_ms",
                     json_time(ended), "outcome", outcome, "token",
                     token ? json_bytes(token, strlen(token)) : json_null());
}

/* A job's attempts, oldest first: those that failed or were lost
 * (ji->history), then the current one from the job's own fields (running,
 * completed, or cancelled while it ran). */
static json_t *attempts_json(const rjq_job_info *ji) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < ji->history_len; i++) {
        const rjq_attempt *h = rjq_attempt_get(ji->history, i);
        json_array_append_new(a, attempt_json(h->started_ms, h->ended_ms, h->outcome, h->token));
    }
    const char *now = strcmp(ji->state, "active") == 0      ? "running"
                      : strcmp(ji->state, "completed") == 0 ? "completed"
                      : strcmp(ji->state, "cancelled") == 0 && ji->token ? "cancelled"
                                                                        : NULL;
    if (a && now && ji->started_ms)
        json_array_append_new(a, attempt_json(ji->started_ms, ji->ended_ms, now, ji->token));
    return a;
}

static void on_job(rjq_client *cl, int status, const rjq_job_info *ji, void *data) {
    call *c = data;
    (void)cl;
    struct evhttp_request *req = call_reply(c, status);
    if (req && status == RJQ_ENOTFOUND) {
        reply_error(req, 404, "no such job (or it expired)");
    } else if (req) {
        json_t *o = json_pack("{so so ss si si so so so so so so}", "queue", json_name(c->q->name),
                              "id", json_name(ji->id),
                              "state", ji->state, "attempts", ji->attempts, "max_attempts",
                              ji->max_attempts, "payload",
                              json_bytes(ji->payload ? ji->payload : "", ji->payload_len),
                              "result", json_bytes(ji->result, ji->result_len), "error",
                              ji->error ? json_bytes(ji->error, strlen(ji->error)) : json_null(),
                              "enqueued_ms", json_time(ji->enqueued_ms), "started_ms",
                              json_time(ji->started_ms), "ended_ms", json_time(ji->ended_ms));
        if (o) json_object_set_new(o, "attempts_history", attempts_json(ji));
        json_t *hd = o ? json_object() : NULL; /* its headers (rjq_job_options.headers) */
        for (size_t i = 0; hd && i < ji->nheaders; i++)
            json_object_set_new(hd, rjq_header_get(ji->headers, i)->key,
                                json_string(rjq_header_get(ji->headers, i)->value));
        if (hd) json_object_set_new(o, "headers", hd);
        rows_job_reply(c->h.s, req, o, ji->token); /* (its worker, rows.c) */
    }
    call_free(c);
}

/* GET /v1/queues/{q}/jobs/{id}/dependencies: {"dependencies": [{queue,
 * id, state, counted, error}], "dependents": [{queue, id}]}: the job's
 * dependencies (its list, rjq_queue_get_dependencies), then its
 * dependents not released yet (rjq_queue_get_dependents). */
static void on_dependents(rjq_client *cl, int status, const rjq_dep *list, size_t n, void *data) {
    call *c = data;
    (void)cl;
    struct evhttp_request *req = call_reply(c, status);
    json_t *o = c->deps;
    c->deps = NULL;
    if (req) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < n; i++)
            json_array_append_new(a, json_pack("{so so}", "queue",
                                               json_name(rjq_dep_get(list, i)->queue), "id",
                                               json_name(rjq_dep_get(list, i)->id)));
        if (o && a) json_object_set_new(o, "dependents", a);
        else json_decref(a);
        if (o) reply_json(req, 200, o);
        else reply_error(req, 503, "out of memory");
        o = NULL;
    }
    json_decref(o);
    call_free(c);
}

static void on_dependencies(rjq_client *cl, int status, const rjq_dep_outcome *deps, size_t n,
                            void *data) {
    call *c = data;
    (void)cl;
    if (status != RJQ_OK) {
        (void)call_reply(c, status); /* (answers the error) */
        call_free(c);
        return;
    }
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        const rjq_dep_outcome *d = rjq_dep_outcome_get(deps, i);
        json_array_append_new(a, json_pack("{so so ss ss so}", "queue", json_name(d->queue), "id",
                                           json_name(d->id), "state", d->state, "counted",
                                           d->counted, "error",
                                           d->error ? json_bytes(d->error, strlen(d->error))
                                                    : json_null()));
    }
    c->deps = a ? json_pack("{so}", "dependencies", a) : NULL;
    int rc = rjq_queue_get_dependents(c->q->q, c->job_id, on_dependents, c);
    if (rc != RJQ_OK) {
        json_decref(c->deps);
        c->deps = NULL;
        call_refused(c, rc);
    }
}

/* A batch's fields (a page's row; its own page's, after "queue"), set in
 * o; NULL (o let go of) when memory ran out or o is NULL. */
static json_t *batch_json(json_t *o, const rjq_batch_info *b) {
    json_t *f = json_pack("{so ss sb sI sI sI sI so so}", "batch", json_name(b->id), "state",
                          b->state, "sealed", b->sealed, "total", (json_int_t)b->total,
                          "completed", (json_int_t)b->completed, "dead", (json_int_t)b->dead,
                          "cancelled", (json_int_t)b->cancelled, "created_ms",
                          json_time(b->created_ms), "ended_ms", json_time(b->ended_ms));
    if (o == NULL || f == NULL || json_object_update(o, f) != 0) {
        json_decref(o);
        o = NULL;
    }
    json_decref(f);
    return o;
}

/* GET .../batches/{id}: a batch's status, counts and completion jobs. */
static void on_batch(rjq_client *cl, int status, const rjq_batch_info *b, void *data) {
    call *c = data;
    (void)cl;
    struct evhttp_request *req = call_reply(c, status);
    if (req && status == RJQ_ENOTFOUND) {
        reply_error(req, 404, "no such batch (or it expired)");
    } else if (req) {
        /* its completion jobs: each one's id, and whether it was enqueued
         * (the batch ended; on_success only when none died) */
        json_t *jobs = json_array();
        int ended = strcmp(b->state, "pending") != 0;
        for (int k = 0; jobs && k < 2; k++) {
            if (!(k == 0 ? b->has_on_complete : b->has_on_success)) continue;
            char id[RJQ_JOB_ID_MAX + 32];
            snprintf(id, sizeof id, "batch:%s:%s", b->id, k == 0 ? "complete" : "success");
            json_array_append_new(jobs, json_pack("{ss so sb}", "on", k == 0 ? "complete" : "success",
                                                  "id", json_name(id), "enqueued",
                                                  ended && (k == 0 || b->dead == 0)));
        }
        json_t *o = jobs ? batch_json(json_pack("{so}", "queue", json_name(c->q->name)), b)
                         : NULL;
        if (o && json_object_set_new(o, "completion", jobs) != 0) {
            json_decref(o);
            o = NULL;
        } else if (o == NULL) {
            json_decref(jobs);
        }
        if (o) reply_json(req, 200, o);
        else reply_error(req, 503, "out of memory");
    }
    call_free(c);
}

/* GET .../batches: a page of the queue's batches, newest first. */
static void on_batches(rjq_client *cl, int status, const rjq_batch_info *b, size_t n,
                       const char *next, void *data) {
    call *c = data;
    (void)cl;
    struct evhttp_request *req = call_reply(c, status);
    if (req) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < n; i++)
            json_array_append_new(a, batch_json(json_object(), rjq_batch_info_get(b, i)));
        json_t *o = a ? json_pack("{so so so}", "queue", json_name(c->q->name), "batches", a,
                                  "next", next ? json_string(next) : json_null())
                      : NULL;
        if (o) reply_json(req, 200, o);
        else reply_error(req, 503, "out of memory");
    }
    call_free(c);
}

static void list_batches(server *s, struct evhttp_request *req, squeue *q,
                         const struct evkeyvalq *args) {
    const char *st = query_get(args, "state"), *after = query_get(args, "after");
    long long limit;
    if (query_only(req, args, ROUTE_BATCHES)) return;
    if (st && strcmp(st, "pending") && strcmp(st, "completed") && strcmp(st, "dead")) {
        reply_error(req, 400, "state must be pending, completed or dead");
        return;
    }
    if (query_ll(req, args, "limit", 1, 1000, JOBS_DEFAULT, &limit)) return;
    call *c = call_new(s, req, q, "batches");
    if (c) call_sent(c, rjq_batch_list(q->q, st, after, (long)limit, on_batches, c));
}

/* DELETE .../batches/{id}[?force=1]. */
static void on_batch_deleted(rjq_client *cl, int status, void *data) {
    call *c = data;
    (void)cl;
    struct evhttp_request *req = call_reply(c, status);
    if (req && status == RJQ_ENOTFOUND) reply_error(req, 404, "no such batch (or it expired)");
    else if (req && status == RJQ_ESTATE)
        reply_error(req, 409, "the batch is pending: add ?force=1 to delete it all the same");
    else if (req) reply_json(req, 200, json_pack("{sb}", "deleted", 1));
    call_free(c);
}

/* The replies of the actions that end in a count. */
static void on_count(rjq_client *cl, int status, long long n, void *data) {
    call *c = data;
    (void)cl;
    struct evhttp_request *req = call_reply(c, status);
    const char *what = c->what;
    if (req && status == RJQ_ENOTFOUND) {
        reply_error(req, 404, "no such job");
    } else if (req && status == RJQ_ESTATE) {
        reply_error(req, 409, strcmp(what, "deleted") == 0
                                  ? "only a dead or cancelled job can be deleted"
                              : strcmp(what, "promoted") == 0 ? "the job is not delayed"
                                                              : "the job is not dead");
    } else if (req && strcmp(what, "purge") == 0 && n == RJQ_JOBS_PAGE_MAX &&
               request_alive(req)) {
        /* more to delete: the next page (the held request goes on) */
        c->total += n;
        held_start(c->h.s, &c->h, req, NULL, 0);
        call_sent(c, rjq_queue_purge(c->q->q, c->state, RJQ_JOBS_PAGE_MAX, on_count, c));
        return;
    } else if (req) {
        if (strcmp(what, "purge") == 0) n += c->total;
        if (strcmp(what, "pause") == 0 || strcmp(what, "resume") == 0)
            reply_json(req, 200,
                       json_pack("{so sb}", "queue", json_name(c->q->name), "changed", n > 0));
        else
            reply_json(req, 200, json_pack("{so sI}", "queue", json_name(c->q->name),
                                           strcmp(what, "purge") == 0 ? "deleted" : what,
                                           (json_int_t)n));
    }
    call_free(c);
}

static void on_cancel(rjq_client *cl, int status, const char *state, void *data) {
    call *c = data;
    (void)cl;
    struct evhttp_request *req = call_reply(c, status);
    if (req && status == RJQ_ENOTFOUND)
        reply_error(req, 404, "no such job");
    else if (req && status == RJQ_ESTATE)
        reply_json(req, 409, json_pack("{ss ss}", "error", "the job had already finished",
                                       "state", state ? state : "?"));
    else if (req)
        reply_json(req, 200, json_pack("{sb ss}", "cancelled", 1, "from", state ? state : "?"));
    call_free(c);
}

/* ---- routing ---------------------------------------------------------------------------- */

/* The path's segments after /v1/queues/, decoded (at most 4). */
typedef struct segs {
    char *v[4];
    int n;
    char buf[2048]; /* the decoded segments, back to back (no allocation per request) */
} segs;

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* -1: bad (too many, empty, too long, or holding a NUL). %XX is decoded;
 * a '%' without two hex digits stays as it is (as evhttp_uridecode). */
static int split(const char *rest, segs *g) {
    size_t used = 0;
    g->n = 0;
    while (*rest == '/') {
        rest++;
        size_t len = strcspn(rest, "/");
        if (len == 0 || g->n == 4 || used + len + 1 > sizeof g->buf) return -1;
        char *d = g->buf + used;
        size_t k = 0;
        for (size_t i = 0; i < len; i++) {
            int hi, lo;
            if (rest[i] == '%' && i + 2 < len && (hi = hexval(rest[i + 1])) >= 0 &&
                (lo = hexval(rest[i + 2])) >= 0) {
                d[k++] = (char)(hi << 4 | lo);
                i += 2;
            } else {
                d[k++] = rest[i];
            }
        }
        d[k] = '\0';
        if (memchr(d, '\0', k)) return -1;
        g->v[g->n++] = d;
        used += k + 1;
        rest += len;
    }
    return *rest ? -1 : 0;
}

static void method_not_allowed(struct evhttp_request *req, const char *allow) {
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    reply_error(req, 405, "method not allowed here: use %s", allow);
}

static int method(struct evhttp_request *req, enum evhttp_cmd_type want) {
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    return m == want || (want == EVHTTP_REQ_GET && m == EVHTTP_REQ_HEAD);
}

static void route(server *s, struct evhttp_request *req, const char *rest, int looked_up,
                  const struct evkeyvalq *args);

/* A string that sorts just before name, past every name that sorts before
 * it (names are at most 200 bytes): the registry's first name after it is
 * name when name is there. "" for a name of one byte 0x01. */
static char *just_before(const char *name) {
    size_t len = strlen(name);
    char *b = malloc(len + 202);
    if (b == NULL) return NULL;
    memcpy(b, name, len + 1);
    if ((unsigned char)b[len - 1] > 1) {
        b[len - 1] = (char)((unsigned char)b[len - 1] - 1);
        memset(b + len, 0xff, 201);
        b[len + 201] = '\0';
    } else {
        b[len - 1] = '\0'; /* (a name's bytes are above 0x20) */
    }
    return b;
}

/* A queue not served yet: the registry says whether it exists (one page
 * from just before its name), then the request is routed again. */
static void on_lookup(rjq_client *cl, int status, const char *const *names, size_t n,
                      void *data) {
    call *c = data;
    (void)cl;
    struct evhttp_request *req = call_reply(c, status);
    if (req) {
        segs g;
        int found = 0;
        if (split(c->rest, &g) == 0 && g.n >= 1)
            for (size_t i = 0; i < n && !found; i++) found = strcmp(names[i], g.v[0]) == 0;
        squeue *q;
        int rc = found ? queues_get(c->h.s, g.v[0], &q) : RJQ_ENOTFOUND;
        const char *uq = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
        struct evkeyvalq args;
        TAILQ_INIT(&args);
        if (uq) evhttp_parse_query_str(uq, &args); /* (it parsed the first time) */
        if (rc == RJQ_OK) route(c->h.s, req, c->rest, 1, &args);
        else if (rc == RJQ_EBUSY)
            reply_error(req, 503, "too many queues served (--max-queues %ld)", c->h.s->o.max_queues);
        else reply_error(req, 404, "no such queue (it was never written to)");
        evhttp_clear_headers(&args);
    }
    call_free(c);
}

/* Hold req until q's layout is known (api_queue_ready routes it again). */
static void park(server *s, struct evhttp_request *req, squeue *q, const char *rest,
                 int enqueue) {
    parked *p = calloc(1, sizeof *p);
    if (p == NULL || (p->rest = strdup(rest)) == NULL) {
        free(p);
        reply_error(req, 503, "out of memory");
        return;
    }
    p->q = q;
    p->enqueue = enqueue;
    s->nwaiters += enqueue;
    q->refs++;
    parked **tail = &q->parked; /* (in arrival order) */
    while (*tail) tail = &(*tail)->next;
    *tail = p;
    held_start(s, &p->h, req, NULL, 0);
}

void api_queue_ready(server *s, squeue *q, int status) {
    parked *p = q->parked;
    q->parked = NULL;
    while (p) {
        parked *next = p->next;
        struct evhttp_request *req = held_end(&p->h);
        q->refs--;
        s->nwaiters -= p->enqueue;
        if (req && status == RJQ_OK) {
            const char *uq = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
            struct evkeyvalq args;
            TAILQ_INIT(&args);
            if (uq) evhttp_parse_query_str(uq, &args); /* (it parsed the first time) */
            route(s, req, p->rest, 1, &args);
            evhttp_clear_headers(&args);
        } else if (req) {
            reply_rjq_error(req, status, rjq_client_get_errmsg(s->c));
        }
        free(p->rest);
        free(p);
        p = next;
    }
}

static void route(server *s, struct evhttp_request *req, const char *rest, int looked_up,
                  const struct evkeyvalq *args) {
    segs g;
    if (split(rest, &g) != 0) {
        reply_error(req, 404, "no such route");
        return;
    }
    if (g.n == 0) {
        if (method(req, EVHTTP_REQ_GET)) list_queues(s, req, args);
        else method_not_allowed(req, "GET");
        return;
    }
    squeue *q = NULL;
    int post_jobs = g.n == 2 && strcmp(g.v[1], "jobs") == 0 && method(req, EVHTTP_REQ_POST);
    int rc = RJQ_EQUEUENAME;
    if ((q = queues_find(s, g.v[0])) != NULL) { /* served (so it matched) */
        queues_touch(q);
        rc = RJQ_OK;
    } else if (queues_match(s, g.v[0])) {
        /* an enqueue opens the queue once the request is found valid;
         * anything else needs it known */
        rc = post_jobs ? RJQ_OK : looked_up ? queues_get(s, g.v[0], &q) : RJQ_ENOTFOUND;
    }
    if (rc == RJQ_ENOTFOUND) { /* maybe new since the last listing: ask the registry */
        call *c = call_new(s, req, NULL, "lookup");
        if (c == NULL) return;
        c->rest = strdup(rest);
        char *before = just_before(g.v[0]);
        if (c->rest == NULL || before == NULL) call_refused(c, RJQ_ENOMEM);
        else call_sent(c, rjq_client_list_queues(s->c, before[0] ? before : NULL, 1, on_lookup, c));
        free(before);
        return;
    }
    if (rc == RJQ_EQUEUENAME) {
        reply_error(req, 404, "queue not served here (see --queues)");
        return;
    }
    if (rc == RJQ_EBUSY) {
        reply_error(req, 503, "too many queues served (--max-queues %ld)", s->o.max_queues);
        return;
    }
    if (rc != RJQ_OK) {
        reply_rjq_error(req, rc, NULL);
        return;
    }
    if (q && !q->known) { /* its layout is being read (a sharded queue is one queue) */
        park(s, req, q, rest, post_jobs);
        return;
    }
    call *c = NULL;
    if (g.n >= 2 && strcmp(g.v[1], "groups") == 0) { /* groups.c */
        groups_handle(s, req, q, g.n >= 3 ? g.v[2] : NULL, g.n >= 4 ? g.v[3] : NULL, args);
        return;
    }
    if (g.n >= 2 && g.n <= 3 && strcmp(g.v[1], "search") == 0) { /* search.c */
        search_handle(s, req, q, g.n == 3 ? g.v[2] : NULL, args);
        return;
    }
    if (g.n == 1) {
        const char *sh = query_get(args, "shards");
        if (!method(req, EVHTTP_REQ_GET)) {
            method_not_allowed(req, "GET");
        } else if (query_only(req, args, ROUTE_QUEUE)) {
            /* answered */
        } else if (sh && strcmp(sh, "0") && strcmp(sh, "1")) {
            reply_error(req, 400, "shards must be 0 or 1");
        } else if ((c = call_new(s, req, q, "stats"))) {
            c->want_shards = sh && strcmp(sh, "1") == 0;
            call_sent(c, rjq_queue_get_stats(q->q, on_queue_stats, c));
        }
    } else if (g.n == 2 && strcmp(g.v[1], "jobs") == 0) {
        if (post_jobs) {
            if (enqueue_handle(s, req, g.v[0], q, args) == 1)
                park(s, req, queues_find(s, g.v[0]), rest, 1);
        } else if (method(req, EVHTTP_REQ_GET)) {
            list_jobs(s, req, q, args);
        } else {
            method_not_allowed(req, "GET, POST");
        }
    } else if (g.n == 2 && strcmp(g.v[1], "batches") == 0) {
        if (method(req, EVHTTP_REQ_GET)) list_batches(s, req, q, args);
        else method_not_allowed(req, "GET");
    } else if (g.n == 2) {
        const char *a = g.v[1];
        long long limit = RJQ_JOBS_PAGE_MAX;
        rjq_job_state st = RJQ_STATE_DEAD;
        if (strcmp(a, "history") == 0) {
            if (!method(req, EVHTTP_REQ_GET)) method_not_allowed(req, "GET");
            else if (query_only(req, args, ROUTE_HISTORY) == 0) history_handle(s, req, q, args);
        } else if (strcmp(a, "settings") == 0) {
            if (!method(req, EVHTTP_REQ_GET)) method_not_allowed(req, "GET");
            else if (query_only(req, args, ROUTE_SETTINGS) == 0 &&
                     (c = call_new(s, req, q, "settings")))
                call_sent(c, rjq_queue_get_stats(q->q, on_settings_stats, c));
        } else if (strcmp(a, "run-now") == 0) {
            if (!method(req, EVHTTP_REQ_POST)) method_not_allowed(req, "POST");
            else if (query_only(req, args, ROUTE_RUN_NOW) == 0) bulk_run_now(s, req, q);
        } else if (strcmp(a, "pause") && strcmp(a, "resume") && strcmp(a, "replay") &&
                   strcmp(a, "purge") && strcmp(a, "reclaim")) {
            reply_error(req, 404, "no such route");
        } else if (!method(req, EVHTTP_REQ_POST)) {
            method_not_allowed(req, "POST");
        } else if (query_only(req, args, strcmp(a, "purge") == 0     ? ROUTE_PURGE
                                         : strcmp(a, "replay") == 0  ? ROUTE_REPLAY
                                         : strcmp(a, "reclaim") == 0 ? ROUTE_RECLAIM
                                         : strcmp(a, "pause") == 0   ? ROUTE_PAUSE
                                                                     : ROUTE_RESUME)) {
            /* answered */
        } else if (strcmp(a, "purge") == 0 &&
                   (job_state_parse(query_get(args, "state"), &st) != 0 ||
                    (st != RJQ_STATE_DEAD && st != RJQ_STATE_CANCELLED))) {
            reply_error(req, 400, "purge needs ?state=dead or ?state=cancelled");
        } else if (strcmp(a, "replay") == 0 &&
                   query_ll(req, args, "limit", 1, RJQ_JOBS_PAGE_MAX, RJQ_JOBS_PAGE_MAX, &limit)) {
            /* answered */
        } else if ((c = call_new(s, req, q, strcmp(a, "replay") == 0    ? "replayed"
                                            : strcmp(a, "purge") == 0   ? "purge"
                                            : strcmp(a, "reclaim") == 0 ? "reclaimed"
                                            : strcmp(a, "pause") == 0   ? "pause"
                                                                        : "resume"))) {
            if (strcmp(a, "pause") == 0) call_sent(c, rjq_queue_pause(q->q, on_count, c));
            else if (strcmp(a, "resume") == 0) call_sent(c, rjq_queue_resume(q->q, on_count, c));
            else if (strcmp(a, "reclaim") == 0) call_sent(c, rjq_queue_reclaim(q->q, on_count, c));
            else if (strcmp(a, "replay") == 0)
                call_sent(c, rjq_queue_replay(q->q, NULL, (long)limit, on_count, c));
            else {
                c->state = st;
                call_sent(c, rjq_queue_purge(q->q, st, RJQ_JOBS_PAGE_MAX, on_count, c));
            }
        }
    } else if (g.n == 3 && strcmp(g.v[1], "batches") == 0) {
        const char *force = query_get(args, "force");
        if (method(req, EVHTTP_REQ_GET)) {
            if (query_only(req, args, ROUTE_BATCH) == 0 && (c = call_new(s, req, q, "batch")))
                call_sent(c, rjq_batch_get(q->q, g.v[2], on_batch, c));
        } else if (!method(req, EVHTTP_REQ_DELETE)) {
            method_not_allowed(req, "GET, DELETE");
        } else if (query_only(req, args, ROUTE_BATCH_DELETE)) {
            /* answered */
        } else if (force && strcmp(force, "0") && strcmp(force, "1")) {
            reply_error(req, 400, "force must be 0 or 1");
        } else if ((c = call_new(s, req, q, "batch deleted"))) {
            call_sent(c, rjq_batch_delete(q->q, g.v[2], force && strcmp(force, "1") == 0,
                                          on_batch_deleted, c));
        }
    } else if (strcmp(g.v[1], "jobs") != 0) {
        reply_error(req, 404, "no such route");
    } else if (g.n == 3) {
        if ((method(req, EVHTTP_REQ_GET) || method(req, EVHTTP_REQ_DELETE)) &&
            query_only(req, args, method(req, EVHTTP_REQ_GET) ? ROUTE_JOB : ROUTE_JOB_DELETE)) {
            /* answered */
        } else if (method(req, EVHTTP_REQ_GET)) {
            if ((c = call_new(s, req, q, "job")))
                call_sent(c, rjq_queue_get_job(q->q, g.v[2], on_job, c));
        } else if (method(req, EVHTTP_REQ_DELETE)) {
            if ((c = call_new(s, req, q, "deleted")))
                call_sent(c, rjq_queue_delete(q->q, g.v[2], on_count, c));
        } else {
            method_not_allowed(req, "GET, DELETE");
        }
    } else if (strcmp(g.v[3], "dependencies") == 0) {
        if (!method(req, EVHTTP_REQ_GET)) method_not_allowed(req, "GET");
        else if (query_only(req, args, ROUTE_JOB_DEPENDENCIES)) { /* answered */
        } else if (strlen(g.v[2]) > RJQ_JOB_ID_MAX) reply_rjq_error(req, RJQ_EJOBID, NULL);
        else if ((c = call_new(s, req, q, "dependencies"))) {
            strcpy(c->job_id, g.v[2]);
            /* (a sharded queue's: read on the id's shard, as its job is;
             * a server-assigned id there is refused, 409, as its job page) */
            call_sent(c, rjq_queue_get_dependencies(q->q, g.v[2], on_dependencies, c));
        }
    } else if (strcmp(g.v[3], "run-now") == 0) {
        if (!method(req, EVHTTP_REQ_POST)) method_not_allowed(req, "POST");
        else if (query_only(req, args, ROUTE_JOB_RUN_NOW) == 0 &&
                 (c = call_new(s, req, q, "promoted")))
            call_sent(c, rjq_queue_promote(q->q, g.v[2], on_count, c));
    } else if (strcmp(g.v[3], "cancel") == 0 || strcmp(g.v[3], "replay") == 0) {
        if (!method(req, EVHTTP_REQ_POST)) method_not_allowed(req, "POST");
        else if (query_only(req, args, g.v[3][0] == 'c' ? ROUTE_JOB_CANCEL : ROUTE_JOB_REPLAY)) {
            /* answered */
        } else if (g.v[3][0] == 'c' && (c = call_new(s, req, q, "cancel")))
            call_sent(c, rjq_queue_cancel(q->q, g.v[2], on_cancel, c));
        else if (g.v[3][0] == 'r' && (c = call_new(s, req, q, "replayed")))
            call_sent(c, rjq_queue_replay(q->q, g.v[2], 1, on_count, c));
    } else {
        reply_error(req, 404, "no such route");
    }
}

void api_queues(server *s, struct evhttp_request *req, const char *rest,
                const struct evkeyvalq *args) {
    route(s, req, rest, 0, args);
}
