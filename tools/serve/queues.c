/*
 * rjq serve: the queues served. A queue is served once it matches
 * --queues and is named: by the registry (rjq_client_list_queues, one page per
 * refresh, while someone watches every queue) or by a request. Each has a
 * handle, its latest stats, refreshed every second with one script call,
 * from which the rates come, and once it exists a monitor (its events feed
 * the timings and the event stream).
 *
 * What Redis is sent follows what clients watch: the registry is listed
 * while a stream without ?queues= is open or for --queue-idle after a
 * GET /v1/queues or /metrics (these watch every queue); a queue is watched
 * while a stream names it, and for --queue-idle after a request named it.
 * A queue nobody watches any more is let go (stats, monitor, timings) and
 * its handle closed (rjq_queue_close: what was asked of it still ends), so
 * --max-queues bounds the queues watched at once, not the names ever seen,
 * and the server's memory follows the queues served too.
 */
#include "server.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rate.h"
#include "statsfmt.h"

#define REFRESH_MS 1000
#define LIST_PAGE 1000
#define SWEEP_EVERY 60          /* refreshes between two timing sweeps */
#define MEMORY_EVERY 2          /* refreshes between two reads of Redis' memory */

static size_t hash_name(const char *p) {
    size_t h = 5381;
    for (; *p; p++) h = h * 33 + (unsigned char)*p;
    return h % SERVE_QUEUE_BUCKETS;
}

int queues_match(const server *s, const char *name) {
    const char *p = s->o.queues ? s->o.queues : "*";
    char pat[512];
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n < sizeof pat) {
            memcpy(pat, p, n);
            pat[n] = '\0';
            if (n && fnmatch(pat, name, 0) == 0) return 1;
        }
        p += n + (p[n] == ',');
    }
    return 0;
}

/* ---- events -------------------------------------------------------------------- */

static void on_monitor(rjq_client *c, const char *event, const char *id, void *data) {
    squeue *q = data;
    server *s = rjq_client_get_data(c);
    long long t = q->m ? rjq_monitor_get_time(q->m) : 0;
    timing_queue_event(&s->times, &q->t, event, id, t);
    if (!sse_recording(s)) {
        sse_skip(s);
        return;
    }
    json_t *e = json_pack("{so ss so sI}", "queue", json_name(q->name), "event", event, "id",
                          json_name(id), "time",
                          (json_int_t)t);
    if (e) sse_broadcast(s, "job", q, e, 1);
}

/* A shard's event: its sharded queue's (the stream names the queue). */
static void on_shard_monitor(rjq_client *c, const char *event, const char *id, void *data) {
    struct shard_read *r = data;
    squeue *q = r->q;
    server *s = rjq_client_get_data(c);
    long long t = q->sm[r->i] ? rjq_monitor_get_time(q->sm[r->i]) : 0;
    char key[RJQ_JOB_ID_MAX + 16];
    snprintf(key, sizeof key, "%d~%s", r->i, id); /* (ids repeat across shards) */
    timing_queue_event(&s->times, &q->t, event, key, t);
    if (!sse_recording(s)) {
        sse_skip(s);
        return;
    }
    json_t *e = json_pack("{so ss so sI si}", "queue", json_name(q->name), "event", event, "id",
                          json_name(id), "time", (json_int_t)t, "shard", r->i);
    if (e) sse_broadcast(s, "job", q, e, 1);
}

/* Monitor each shard of a sharded queue (once it exists) not monitored yet. */
static void monitor_shards(squeue *q) {
    for (int i = 0; i < q->nshards; i++) {
        if (q->sm[i]) continue;
        q->shard_mon[i] = (struct shard_read){q, i};
        if (rjq_queue_monitor(rjq_queue_get_shard(q->q, i), on_shard_monitor, &q->shard_mon[i],
                              &q->sm[i]) != RJQ_OK)
            q->sm[i] = NULL;
    }
}

/* ---- the next ready job's enqueue time (rjq_queue_latency_seconds) ---------------- */

static void on_head_job(rjq_client *c, int status, const rjq_job_info *info, void *data) {
    squeue *q = data;
    (void)c;
    q->reading_head = 0;
    /* (the job may have started meanwhile: then it is no longer waiting) */
    if (status == RJQ_OK && info && info->state && strcmp(info->state, "ready") == 0 &&
        info->enqueued_ms > 0)
        q->head_enqueued_ms = info->enqueued_ms;
    else if (status == RJQ_OK || status == RJQ_ENOTFOUND)
        q->head_enqueued_ms = 0;
}

static void on_head(rjq_client *c, int status, const char *const *ids, size_t n, void *data) {
    squeue *q = data;
    server *s = rjq_client_get_data(c);
    if (status == RJQ_OK && n == 0) q->head_enqueued_ms = 0;
    if (status != RJQ_OK || n == 0 || s == NULL || s->stopping ||
        rjq_queue_get_job(q->q, ids[0], on_head_job, q) != RJQ_OK)
        q->reading_head = 0;
}

/* Read the enqueue time of the job next in claim order (two reads, each
 * O(log n)), or forget it when none is ready. */
static void read_head(squeue *q) {
    if (q->reading_head) return;
    if (q->s.ready <= 0) {
        q->head_enqueued_ms = 0;
        return;
    }
    if (rjq_queue_list_jobs(q->q, RJQ_STATE_READY, 0, 1, on_head, q) == RJQ_OK) q->reading_head = 1;
}

/* ---- stats ---------------------------------------------------------------------- */

static void on_stats(rjq_client *c, int status, const rjq_stats *st, void *data) {
    squeue *q = data;
    server *s = rjq_client_get_data(c);
    q->refreshing = 0;
    if (status != RJQ_OK || s == NULL || s->stopping) return;
    double t = serve_now_s();
    int changed = !q->have || q->s.paused != st->paused || q->s.exists != st->exists;
    for (size_t k = 0; k < stat_nfields && !changed; k++)
        changed = stat_value(&q->s, k) != stat_value(st, k);
    int was_moving = q->in_rate > 0 || q->done_rate > 0 || q->fail_rate > 0;
    if (q->have) {
        q->prev = q->s;
        q->prev_at = q->at;
        q->have_prev = 1;
    }
    q->s = *st;
    q->at = t;
    q->have = 1;
    /* Watched once it exists: a monitor refreshes a flag key in Redis,
     * which a name that was only asked about must not get. Without one
     * (out of memory) the queue is served all the same, without timings
     * and job events. */
    if (st->exists && q->m == NULL && q->nshards == 1 &&
        rjq_queue_monitor(q->q, on_monitor, q, &q->m) != RJQ_OK)
        q->m = NULL;
    if (st->exists && q->nshards > 1) monitor_shards(q); /* (those missing) */
    if (q->have_prev && q->at > q->prev_at) {
        /* (a counter that went down, Redis restarted empty: a reset) */
        stats_rates r = stats_rates_between(&q->prev, &q->s, q->at - q->prev_at);
        q->in_rate = r.in;
        q->done_rate = r.done;
        q->fail_rate = r.fail;
    }
    timing_queue_means(&q->t, &q->wait_ms, &q->run_ms);
    read_head(q);
    if (sse_recording(s) && (changed || was_moving)) {
        json_t *j = queues_json(s, q);
        if (j) sse_broadcast(s, "stats", q, j, 0);
    } else if (changed || was_moving) {
        sse_skip(s);
    }
}

/* The queue served under the part of name before its last '~' (a shard's
 * name is "<queue>~<i>"), or NULL. */
static squeue *tilde_base(const server *s, const char *name) {
    const char *tilde = strrchr(name, '~');
    if (tilde == NULL || tilde == name || (size_t)(tilde - name) >= 256) return NULL;
    char base[256];
    memcpy(base, name, (size_t)(tilde - name));
    base[tilde - name] = '\0';
    return queues_find((server *)s, base);
}

squeue *queues_shard_of(const server *s, const char *name, int *index) {
    squeue *b = tilde_base(s, name);
    for (int i = 0; b && b->known && i < b->nshards && b->nshards > 1; i++)
        if (strcmp(rjq_queue_get_name(rjq_queue_get_shard(b->q, i)), name) == 0) {
            if (index) *index = i;
            return b;
        }
    return NULL;
}

const char *queues_master_of(const server *s, int slot) {
    for (size_t i = 0; i < s->nmasters; i++) {
        const struct serve_master *m = &s->masters[i];
        if (m->nranges == 0) return s->nmasters == 1 ? m->address : NULL;
        for (size_t r = 0; r < m->nranges; r++)
            if (slot >= m->ranges[2 * r] && slot <= m->ranges[2 * r + 1]) return m->address;
    }
    return NULL;
}

json_t *queues_stats_json(const rjq_stats *s) {
    json_t *st = json_object();
    if (st == NULL) return NULL;
    for (size_t k = 0; k < stat_nfields; k++)
        json_object_set_new(st, stat_fields[k].name, json_integer(stat_value(s, k)));
    json_object_set_new(st, "paused", json_boolean(s->paused));
    json_object_set_new(st, "exists", json_boolean(s->exists));
    return st;
}

json_t *queues_json(const server *s, const squeue *q) {
    json_t *st = queues_stats_json(&q->s);
    if (st == NULL) return NULL;
    json_t *o = json_pack("{so so s{sfsfsf} so so sb si}", "name", json_name(q->name), "stats",
                          st, "rates", "in", q->in_rate, "done", q->done_rate, "fail",
                          q->fail_rate, "wait_ms",
                          q->wait_ms >= 0 ? json_real(q->wait_ms) : json_null(), "run_ms",
                          q->run_ms >= 0 ? json_real(q->run_ms) : json_null(), "monitored",
                          q->m != NULL || q->sm[0] != NULL, "shards",
                          q->known ? q->nshards : 1);
    int index;
    squeue *of = o ? queues_shard_of(s, q->name, &index) : NULL;
    if (of) { /* a shard addressed on its own (operators): marked as one */
        json_object_set_new(o, "shard_of", json_name(of->name));
        json_object_set_new(o, "shard", json_integer(index));
    }
    return o;
}

/* ---- the set ----------------------------------------------------------------------- */

squeue *queues_find(server *s, const char *name) {
    for (squeue *q = s->buckets[hash_name(name)]; q; q = q->hnext)
        if (strcmp(q->name, name) == 0) return q;
    return NULL;
}

void queues_touch(squeue *q) {
    q->used_at = serve_now_s();
}

void queues_watch_all(server *s) {
    s->all_until = serve_now_s() + (double)s->o.queue_idle_ms / 1000.0;
}

/* A handle of name (one per queue served: closed when it is let go). */
static int handle_open(server *s, const char *name, rjq_queue **out) {
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.max_waiting = s->o.max_waiting;
    int rc = rjq_queue_open(s->c, name, &qo, out);
    if (rc != RJQ_OK) return rc == RJQ_EINVAL ? RJQ_EQUEUENAME : rc; /* a name rjq refuses */
    s->nhandles++;
    return RJQ_OK;
}

static void layout_read(server *s, squeue *q);

/* The layout read: a sharded queue's handle takes the plain one's place
 * (nothing was asked of the plain one: requests wait for the layout). */
static void on_layout(rjq_client *c, int status, rjq_queue *h, void *data) {
    squeue *q = data;
    server *s = rjq_client_get_data(c);
    q->opening = 0;
    if (status == RJQ_OK && rjq_queue_count_shards(h) > 1) {
        q->plain = q->q; /* (kept until let go: the demo's pool may run on it) */
        q->q = h;
        q->nshards = rjq_queue_count_shards(h);
    } else if (status == RJQ_OK) {
        rjq_queue_close(h); /* (plain: the handle opened first serves) */
        q->nshards = 1;
    }
    if (status == RJQ_OK) q->known = 1;
    /* Redis out of reach: the requests wait for it (as an enqueue's reply
     * does), the read tried again at the next refresh */
    if (s && (status == RJQ_ECONN || status == RJQ_ETIMEDOUT) && !s->stopping) return;
    if (s) api_queue_ready(s, q, status);
}

/* Read q's layout (again, after a failure: at the next refresh). */
static void layout_read(server *s, squeue *q) {
    if (q->known || q->opening || s->stopping) return;
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.max_waiting = s->o.max_waiting;
    int rc = rjq_queue_open_async(s->c, q->name, &qo, on_layout, q);
    if (rc == RJQ_OK) q->opening = 1;
    else api_queue_ready(s, q, rc);
}

int queues_get(server *s, const char *name, squeue **out) {
    size_t b = hash_name(name);
    if ((*out = queues_find(s, name)) != NULL) {
        queues_touch(*out);
        return RJQ_OK;
    }
    if (!queues_match(s, name)) return RJQ_EQUEUENAME;
    if ((long)s->nqueues >= s->o.max_queues) return RJQ_EBUSY;
    squeue *q = calloc(1, sizeof *q);
    if (q == NULL || (q->name = strdup(name)) == NULL) {
        free(q);
        return RJQ_ENOMEM;
    }
    int rc = handle_open(s, name, &q->q);
    if (rc != RJQ_OK) {
        free(q->name);
        free(q);
        return rc;
    }
    q->wait_ms = q->run_ms = -1;
    q->nshards = 1;
    queues_touch(q);
    q->hnext = s->buckets[b];
    s->buckets[b] = q;
    if (s->queues_tail) s->queues_tail->next = q;
    else s->queues = q;
    s->queues_tail = q;
    s->nqueues++;
    *out = q;
    layout_read(s, q);
    return RJQ_OK;
}

/* A page of the registry: serve the names that match. */
static void on_names(rjq_client *c, int status, const char *const *names, size_t n, void *data) {
    server *s = data;
    (void)c;
    s->listing = 0;
    if (status != RJQ_OK || s->stopping) return;
    for (size_t i = 0; i < n; i++) {
        squeue *q;
        /* a sharded queue's shards are not served as queues of their own
         * (nor while the layout of the queue they may belong to is read) */
        squeue *b = tilde_base(s, names[i]);
        if (b && (!b->known || queues_shard_of(s, names[i], NULL))) continue;
        if (queues_match(s, names[i])) queues_get(s, names[i], &q); /* EBUSY: the first ones */
    }
    /* a short page ends the listing: the next one starts over */
    char *after = n == LIST_PAGE ? strdup(names[n - 1]) : NULL;
    free(s->list_after);
    s->list_after = after;
}

/* The processes, for the streams that want them: sent when changed. */
static void on_processes(rjq_client *c, int status, const rjq_process *list, size_t n,
                         void *data) {
    server *s = data;
    (void)c;
    s->reading_processes = 0;
    if (status != RJQ_OK || s->stopping) return;
    sse_broadcast_changed(s, "processes", processes_json(list, n), &s->processes_sent);
}

static void on_memory(rjq_client *c, int status, const rjq_memory_info *m, void *data) {
    server *s = data;
    (void)c;
    s->memory_reading = 0;
    if (status != RJQ_OK) return; /* (a user without +info: no warning to give) */
    if (!s->redis_up) return;     /* (an answer from before Redis went: forgotten) */
    s->memory = *m;
    snprintf(s->memory_policy, sizeof s->memory_policy, "%s", m->maxmemory_policy);
    s->memory.maxmemory_policy = s->memory_policy;
    s->memory_known = 1;
}

/* The value of field `key` in an INFO reply ("key:value\r\n" lines) into
 * out (at most outsz - 1 bytes of letters, digits, '.', '-' and '_');
 * 0, or -1 when absent or not such a value. */
static int info_field(const char *info, size_t len, const char *key, char *out, size_t outsz) {
    size_t klen = strlen(key);
    for (const char *p = info, *end = info + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        if ((size_t)(eol - p) > klen && memcmp(p, key, klen) == 0 && p[klen] == ':') {
            const char *v = p + klen + 1;
            size_t n = (size_t)(eol - v);
            if (n && v[n - 1] == '\r') n--;
            if (n == 0 || n >= outsz) return -1;
            for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)v[i]) && !strchr(".-_", v[i])) return -1;
            memcpy(out, v, n);
            out[n] = '\0';
            return 0;
        }
        p = eol + 1;
    }
    return -1;
}

/* A number field of an INFO reply in [0, 2^53) (json null otherwise). */
static json_t *info_number(const char *info, size_t len, const char *key) {
    char v[24], *e;
    if (info_field(info, len, key, v, sizeof v) != 0) return json_null();
    errno = 0;
    long long n = strtoll(v, &e, 10);
    return *e || errno || n < 0 || n >= (1LL << 53) ? json_null() : json_integer(n);
}

static void masters_free(struct serve_master *ms, size_t n) {
    for (size_t i = 0; ms && i < n; i++) {
        free(ms[i].address);
        free(ms[i].ranges);
    }
    free(ms);
}

static void on_info(rjq_client *c, int status, const rjq_master *list, size_t n, void *data) {
    server *s = data;
    (void)c;
    s->nodes_reading = 0;
    if (status != RJQ_OK) return; /* (kept: the last read; /healthz says whether it is up) */
    if (!s->redis_up) return; /* (Redis went since it was asked: nothing to show as current) */
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        const rjq_master *m = rjq_master_get(list, i);
        char version[32], role[16];
        int ok = m->status == RJQ_OK && m->reply;
        json_t *o = json_pack("{so sb}", "address", json_name(m->address), "ok", ok);
        if (o && ok) {
            json_object_set_new(o, "version",
                                info_field(m->reply, m->len, "redis_version", version,
                                           sizeof version) == 0
                                    ? json_string(version)
                                    : json_null());
            json_object_set_new(o, "role",
                                info_field(m->reply, m->len, "role", role, sizeof role) == 0
                                    ? json_string(role)
                                    : json_null());
            json_object_set_new(o, "clients", info_number(m->reply, m->len, "connected_clients"));
            json_object_set_new(o, "used_memory", info_number(m->reply, m->len, "used_memory"));
        }
        if (o && !ok) /* (e.g. an ACL user without +info: the error's words) */
            json_object_set_new(o, "error", m->reply ? json_bytes(m->reply, m->len)
                                                     : json_string(rjq_strerror(m->status)));
        if (o) json_array_append_new(a, o);
    }
    if (a == NULL) return;
    int was_unknown = s->redis_nodes == NULL;
    json_decref(s->redis_nodes);
    s->redis_nodes = a;
    if (was_unknown) /* (the pages read them again: first read, or Redis back) */
        sse_broadcast(s, "server", NULL, server_state_json(s), 0);
    struct serve_master *ms = calloc(n, sizeof *ms);
    for (size_t i = 0; ms && i < n; i++) {
        const rjq_master *m = rjq_master_get(list, i);
        ms[i].address = strdup(m->address);
        ms[i].ranges = m->nranges ? malloc(2 * m->nranges * sizeof(int)) : NULL;
        ms[i].nranges = m->nranges;
        if (ms[i].ranges) memcpy(ms[i].ranges, m->ranges, 2 * m->nranges * sizeof(int));
        if (ms[i].address == NULL || (m->nranges && ms[i].ranges == NULL)) {
            masters_free(ms, i + 1);
            ms = NULL;
        }
    }
    if (ms == NULL) return; /* (out of memory: the last table stays) */
    masters_free(s->masters, s->nmasters);
    s->masters = ms;
    s->nmasters = n;
}

/* Let q go: no more stats, monitor or timings, and its handle closed. (A
 * handle something still runs on, which only the demo's queue has and it
 * is never let go, would stay until the client goes.) */
static void let_go(server *s, squeue *q, squeue *before) {
    squeue **p = &s->buckets[hash_name(q->name)];
    while (*p != q) p = &(*p)->hnext;
    *p = q->hnext;
    if (before) before->next = q->next;
    else s->queues = q->next;
    if (s->queues_tail == q) s->queues_tail = before;
    s->nqueues--;
    if (q->m) rjq_monitor_stop(q->m);
    for (int i = 0; i < RJQ_SHARDS_MAX; i++)
        if (q->sm[i]) rjq_monitor_stop(q->sm[i]);
    if (q->plain) rjq_queue_close(q->plain);
    if (rjq_queue_close(q->q) == RJQ_OK) s->nhandles--;
    timing_forget_owner(&s->times, &q->t);
    groups_forget(q);
    free(q->name);
    free(q);
}

/* --metrics-shards: each shard's stats (the sum is read as for any queue). */
static void on_shard_stats(rjq_client *c, int status, const rjq_stats *st, void *data) {
    struct shard_read *r = data;
    squeue *q = r->q;
    (void)c;
    if (status == RJQ_OK) q->shard_s[r->i] = *st;
    else q->shard_have = -1; /* (this round failed) */
    if (--q->shard_reading == 0) q->shard_have = q->shard_have == -1 ? 0 : 1;
}

static void read_shards(squeue *q) {
    if (q->shard_reading || !q->known || q->nshards < 2) return;
    int failed = 0;
    for (int i = 0; i < q->nshards && !failed; i++) {
        q->shard_rd[i] = (struct shard_read){q, i};
        if (rjq_queue_get_stats(rjq_queue_get_shard(q->q, i), on_shard_stats, &q->shard_rd[i]) ==
            RJQ_OK)
            q->shard_reading++;
        else
            failed = 1;
    }
    /* (shard_have: 1 once a whole round was read; -1 while a round that
     * failed is still out; 0 otherwise) */
    if (failed) q->shard_have = q->shard_reading ? -1 : 0;
}

static void on_refresh(evutil_socket_t fd, short what, void *arg) {
    server *s = arg;
    (void)fd, (void)what;
    if (s->stopping) return;
    double now = serve_now_s(), idle = (double)s->o.queue_idle_ms / 1000.0;
    int all = s->nsse_all > 0 || now < s->all_until;
    if (all && !s->listing &&
        rjq_client_list_queues(s->c, s->list_after, LIST_PAGE, on_names, s) == RJQ_OK)
        s->listing = 1;
    sse_touch_queues(s);
    for (squeue *q = s->queues, *before = NULL, *next; q; q = next) {
        next = q->next;
        /* (a shard of a sharded queue stays only while requests name it) */
        if (all && queues_shard_of(s, q->name, NULL) == NULL) q->used_at = now;
        if (now - q->used_at > idle && q->refs == 0 && !q->refreshing && !q->reading_head &&
            !q->htotal_reading && !q->gtop_reading &&
            !q->opening && !q->shard_reading && q->parked == NULL) {
            let_go(s, q, before);
            continue;
        }
        before = q;
        if (!q->known) {
            layout_read(s, q); /* (after a failure) */
            continue;
        }
        if (!q->refreshing && rjq_queue_get_stats(q->q, on_stats, q) == RJQ_OK) q->refreshing = 1;
        history_read_totals(q);
        groups_refresh(s, q);
        if (s->o.metrics_shards) read_shards(q);
    }
    if (s->nsse_processes && !s->reading_processes &&
        rjq_client_list_processes(s->c, 0, RJQ_JOBS_PAGE_MAX, on_processes, s) == RJQ_OK)
        s->reading_processes = 1;
    if (s->nsse_processes == 0 && s->processes_sent) { /* stale once nobody looks */
        free(s->processes_sent);
        s->processes_sent = NULL;
    }
    demo_tick(s);
    if (s->ticks % MEMORY_EVERY == 0 && !s->memory_reading &&
        rjq_client_get_memory(s->c, on_memory, s) == RJQ_OK)
        s->memory_reading = 1;
    static const char *const info_argv[] = {"INFO"};
    if (s->ticks % MEMORY_EVERY == 0 && !s->nodes_reading &&
        rjq_client_send_to_masters(s->c, 1, info_argv, NULL, on_info, s) == RJQ_OK)
        s->nodes_reading = 1;
    if (++s->ticks % SWEEP_EVERY == 0) timing_sweep_now(&s->times);
}

int queues_start(server *s) {
    s->refresh = event_new(s->base, -1, EV_PERSIST, on_refresh, s);
    if (s->refresh == NULL) return -1;
    struct timeval tv = {REFRESH_MS / 1000, (REFRESH_MS % 1000) * 1000};
    event_add(s->refresh, &tv);
    on_refresh(-1, 0, s); /* the first listing now */
    return 0;
}

void queues_forget_redis(server *s) {
    json_decref(s->redis_nodes);
    s->redis_nodes = NULL;
    s->memory_known = 0;
}

void queues_free(server *s) {
    masters_free(s->masters, s->nmasters);
    s->masters = NULL;
    s->nmasters = 0;
    json_decref(s->redis_nodes);
    s->redis_nodes = NULL;
    while (s->queues) {
        squeue *q = s->queues;
        s->queues = q->next;
        groups_forget(q);
        free(q->name);
        free(q);
    }
    s->nhandles = 0; /* (the handles go with the client) */
    memset(s->buckets, 0, sizeof s->buckets);
    s->queues_tail = NULL;
    s->nqueues = 0;
}
