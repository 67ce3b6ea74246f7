/*
 * rjq serve: the rows of GET /v1/queues/{q}/jobs. The page's ids (api.c)
 * are read in one round: every job (rjq_queue_get_job) and the process
 * registry (rjq_client_list_processes, one page) are sent at once, so they
 * share the connection's pipeline; the answer waits for all of them.
 *
 * A row: id, state (as read: a job may have moved since it was listed, or
 * be gone: state null), kind (a JSON object payload's "kind", "type" or
 * "name" string) or preview (the payload's first characters: compact JSON,
 * or text; null for binary bytes), payload_bytes, attempts, max_attempts,
 * enqueued_ms, started_ms, ended_ms, error (the last one, capped), worker
 * ({"client", "host", "pid"}: host and pid while the process is listed,
 * null when no attempt ran).
 *
 * rows_job_reply adds the worker to one job (GET /v1/queues/{q}/jobs/{id}).
 *
 * A sharded queue's job listed by a server-assigned id (all digits: put on
 * a shard directly, or by an older library; the library names anonymous
 * jobs of a sharded queue itself, docs/sharding.md 6a) names a job of one
 * shard, which the sharded handle cannot read (RJQ_ESHARDED): it is read
 * on every shard instead, and the id's k-th row of the page is the k-th of
 * the shards holding it, in the merged listing's order (the listed state
 * first, then enqueue time, then shard), with "shard" and "shard_queue"
 * (the shard's name: the dashboard links the job to that queue's route).
 */
#include "server.h"

#include <stdlib.h>
#include <string.h>

#include "statsfmt.h"
#include "utf8.h"

#define KIND_MAX 80          /* characters of a kind, of a preview */
#define ERROR_MAX 200        /* characters of an error */
#define PARSE_MAX 65536      /* bytes of a payload parsed as JSON for its kind */

typedef struct rows {
    held h;
    squeue *q;
    rjq_job_state state;
    long long offset;
    size_t n, pending;
    char **ids;
    char **tokens;           /* the fencing token of each job read (or NULL) */
    json_t **row;            /* one per id, NULL until read (or gone) */
    json_t *procs;           /* [{"id", "host", "pid"}], NULL when unread */
    struct one *ones;        /* the reads' callback data */
    json_t *single;          /* rows_job_reply: the job, its worker added */
    char *single_token;
    int paged;               /* rows_reply_page: a cursor's page ("next" in the reply) */
    char *next;              /* its next page's cursor; NULL: the list ended */
    int ns;                  /* a sharded queue's shards (else 0) */
    json_t **cand;           /* n x ns: a server-assigned id's read on each shard */
    char **cand_token;
} rows;

/* One job's read (shard -1: on the queue's handle). */
typedef struct one {
    rows *r;
    size_t i;
    int shard;
} one;

static int all_digits(const char *id) {
    return id[0] != '\0' && id[strspn(id, "0123456789")] == '\0';
}

/* The bytes of at most max characters of valid UTF-8 at p: its length, and
 * *more when text was left out (an invalid byte ends it too). */
static size_t utf8_prefix(const char *p, size_t len, size_t max, int *more) {
    size_t at = 0, chars = 0;
    *more = 0;
    while (at < len) {
        size_t k = utf8_char_len((const unsigned char *)p + at, len - at);
        if (k == 0 || chars == max) {
            *more = 1;
            break;
        }
        at += k;
        chars++;
    }
    return at;
}

/* A JSON string of at most max characters of text (controls as spaces,
 * "…" when cut), or NULL when p does not start with valid UTF-8. */
static json_t *capped(const char *p, size_t len, size_t max) {
    int more;
    size_t n = utf8_prefix(p, len, max, &more);
    if (n == 0 && len > 0) return NULL;
    char *b = malloc(n + 4);
    if (b == NULL) return NULL;
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)p[i] < 0x20 || p[i] == 0x7f ? ' ' : p[i];
    if (more) memcpy(b + n, "\xe2\x80\xa6", 3); /* … */
    json_t *s = json_stringn(b, n + (more ? 3 : 0));
    free(b);
    return s;
}

/* kind (or NULL) and preview (or NULL: binary) of a payload. */
static void describe(const void *payload, size_t len, json_t **kind, json_t **preview) {
    *kind = *preview = NULL;
    const char *p = payload ? payload : "";
    size_t i = 0;
    while (i < len && strchr(" \t\r\n", p[i])) i++;
    if (i < len && (p[i] == '{' || p[i] == '[') && len <= PARSE_MAX) {
        json_t *v = json_loadb(p, len, JSON_DECODE_ANY, NULL);
        if (v) {
            static const char *const keys[] = {"kind", "type", "name"};
            for (size_t k = 0; k < 3 && *kind == NULL && json_is_object(v); k++) {
                json_t *f = json_object_get(v, keys[k]);
                if (json_is_string(f))
                    *kind = capped(json_string_value(f), json_string_length(f), KIND_MAX);
            }
            char *c = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
            if (c) *preview = capped(c, strlen(c), KIND_MAX);
            free(c);
            json_decref(v);
            if (*preview) return;
        }
    }
    *preview = capped(p, len, KIND_MAX);
}

/* The worker of a token: "<client id>.<n>", host and pid from the registry. */
static json_t *worker(const rows *r, const char *token) {
    if (token == NULL || *token == '\0') return json_null();
    const char *dot = strrchr(token, '.');
    size_t idlen = dot ? (size_t)(dot - token) : strlen(token);
    size_t n = r->procs ? json_array_size(r->procs) : 0;
    for (size_t i = 0; i < n; i++) {
        json_t *p = json_array_get(r->procs, i);
        const char *id = json_string_value(json_object_get(p, "id"));
        size_t l = id ? strlen(id) : 0;
        if (id && strncmp(token, id, l) == 0 && token[l] == '.')
            return json_pack("{sO sO sO}", "client", json_object_get(p, "id"), "host",
                             json_object_get(p, "host"), "pid", json_object_get(p, "pid"));
    }
    return json_pack("{so sn sn}", "client", json_stringn(token, idlen), "host", "pid");
}

/* A row without its worker (added once the registry is in). */
static json_t *row_of(const rjq_job_info *ji) {
    json_t *kind, *preview;
    describe(ji->payload, ji->payload_len, &kind, &preview);
    json_t *err = ji->error ? capped(ji->error, strlen(ji->error), ERROR_MAX) : NULL;
    return json_pack("{so ss so so sI si si so so so so}", "id", json_name(ji->id), "state",
                     ji->state, "kind", kind ? kind : json_null(), "preview",
                     preview ? preview : json_null(), "payload_bytes",
                     (json_int_t)ji->payload_len, "attempts", ji->attempts, "max_attempts",
                     ji->max_attempts, "enqueued_ms",
                     ji->enqueued_ms ? json_integer(ji->enqueued_ms) : json_null(), "started_ms",
                     ji->started_ms ? json_integer(ji->started_ms) : json_null(), "ended_ms",
                     ji->ended_ms ? json_integer(ji->ended_ms) : json_null(), "error",
                     err ? err : json_null());
}

static void rows_free(rows *r) {
    for (size_t i = 0; i < r->n; i++) {
        free(r->ids[i]);
        free(r->tokens[i]);
        json_decref(r->row[i]);
    }
    free(r->ids);
    free(r->tokens);
    free(r->row);
    free(r->ones);
    for (size_t i = 0; r->cand && i < r->n * (size_t)r->ns; i++) {
        json_decref(r->cand[i]);
        free(r->cand_token[i]);
    }
    free(r->cand);
    free(r->cand_token);
    json_decref(r->procs);
    json_decref(r->single);
    free(r->single_token);
    free(r->next);
    if (r->q) r->q->refs--;
    free(r);
}

/* Candidate a before b: in the listed state first, then enqueued first,
 * then the lower shard (the merged listing's order). */
static int cand_before(const rows *r, size_t i, int a, int b) {
    json_t *x = r->cand[i * (size_t)r->ns + (size_t)a], *y = r->cand[i * (size_t)r->ns + (size_t)b];
    const char *want = job_state_name(r->state);
    int xs = strcmp(json_string_value(json_object_get(x, "state")), want) == 0;
    int ys = strcmp(json_string_value(json_object_get(y, "state")), want) == 0;
    if (xs != ys) return xs;
    json_int_t xt = json_integer_value(json_object_get(x, "enqueued_ms"));
    json_int_t yt = json_integer_value(json_object_get(y, "enqueued_ms"));
    return xt != yt ? xt < yt : a < b;
}

/* Server-assigned ids of a sharded queue: each row from its shard. */
static void rows_from_shards(rows *r) {
    for (size_t i = 0; i < r->n && r->ns; i++) {
        if (!all_digits(r->ids[i])) continue;
        size_t k = 0; /* the id's rows before this one */
        for (size_t j = 0; j < i; j++) k += strcmp(r->ids[j], r->ids[i]) == 0;
        int order[RJQ_SHARDS_MAX], m = 0;
        for (int sh = 0; sh < r->ns; sh++) {
            if (r->cand[i * (size_t)r->ns + (size_t)sh] == NULL) continue;
            int at = m++;
            while (at > 0 && cand_before(r, i, sh, order[at - 1])) {
                order[at] = order[at - 1];
                at--;
            }
            order[at] = sh;
        }
        if (k >= (size_t)m) continue; /* gone */
        size_t c = i * (size_t)r->ns + (size_t)order[k];
        json_t *row = r->cand[c];
        json_object_set_new(row, "shard", json_integer(order[k]));
        json_object_set_new(row, "shard_queue",
                            json_name(rjq_queue_get_name(rjq_queue_get_shard(r->q->q, order[k]))));
        json_decref(r->row[i]);
        r->row[i] = row;
        r->cand[c] = NULL;
        free(r->tokens[i]);
        r->tokens[i] = r->cand_token[c];
        r->cand_token[c] = NULL;
    }
}

/* Every read is in (or refused): answer, and free. */
static void rows_done(rows *r) {
    if (--r->pending) return;
    rows_from_shards(r);
    struct evhttp_request *req = held_end(&r->h);
    if (req && r->single) {
        json_object_set_new(r->single, "worker", worker(r, r->single_token));
        /* each attempt's worker too (its "token" in, "worker" out) */
        json_t *hist = json_object_get(r->single, "attempts_history"), *a;
        size_t i;
        json_array_foreach(hist, i, a) {
            json_object_set_new(a, "worker", worker(r, json_string_value(json_object_get(a, "token"))));
            json_object_del(a, "token");
        }
        reply_json(req, 200, json_incref(r->single));
    } else if (req) {
        json_t *ids = json_array(), *jobs = json_array();
        for (size_t i = 0; ids && jobs && i < r->n; i++) {
            json_array_append_new(ids, json_name(r->ids[i]));
            json_t *row = r->row[i];
            if (row) {
                json_object_set_new(row, "worker", worker(r, r->tokens[i]));
                json_array_append(jobs, row);
            } else { /* gone since it was listed (finished and expired, deleted) */
                json_array_append_new(jobs, json_pack("{so sn}", "id", json_name(r->ids[i]),
                                                      "state"));
            }
        }
        json_t *o = json_pack("{so ss sI so so}", "queue", json_name(r->q->name), "state",
                              job_state_name(r->state), "offset", (json_int_t)r->offset, "ids",
                              ids, "jobs", jobs);
        if (o && r->paged)
            json_object_set_new(o, "next", r->next ? json_string(r->next) : json_null());
        reply_json(req, 200, o);
    }
    rows_free(r);
}

static void on_job(rjq_client *cl, int status, const rjq_job_info *ji, void *data) {
    one *o = data;
    rows *r = o->r;
    (void)cl;
    if (status == RJQ_OK && ji && o->shard >= 0) {
        size_t c = o->i * (size_t)r->ns + (size_t)o->shard;
        r->cand[c] = row_of(ji);
        if (ji->token) r->cand_token[c] = strdup(ji->token);
    } else if (status == RJQ_OK && ji) {
        r->row[o->i] = row_of(ji);
        if (ji->token) r->tokens[o->i] = strdup(ji->token); /* (NULL: no worker shown) */
    }
    rows_done(r);
}

static void on_procs(rjq_client *cl, int status, const rjq_process *list, size_t n, void *data) {
    rows *r = data;
    (void)cl;
    if (status == RJQ_OK && (r->procs = json_array()) != NULL)
        for (size_t i = 0; i < n; i++) {
            const rjq_process *p = rjq_process_get(list, i);
            json_array_append_new(r->procs, json_pack("{so so sI}", "id", json_name(p->id),
                                                      "host", json_bytes(p->host, strlen(p->host)),
                                                      "pid", (json_int_t)p->pid));
        }
    rows_done(r);
}

static void rows_start(server *s, struct evhttp_request *req, squeue *q, rjq_job_state st,
                       long long offset, const char *const *ids, size_t n, int paged,
                       const char *next);

void rows_reply(server *s, struct evhttp_request *req, squeue *q, rjq_job_state st,
                long long offset, const char *const *ids, size_t n) {
    rows_start(s, req, q, st, offset, ids, n, 0, NULL);
}

void rows_reply_page(server *s, struct evhttp_request *req, squeue *q, rjq_job_state st,
                     const char *const *ids, size_t n, const char *next) {
    rows_start(s, req, q, st, 0, ids, n, 1, next);
}

static void rows_start(server *s, struct evhttp_request *req, squeue *q, rjq_job_state st,
                       long long offset, const char *const *ids, size_t n, int paged,
                       const char *next) {
    rows *r = calloc(1, sizeof *r);
    int ns = q->known && q->nshards > 1 ? q->nshards : 0;
    if (r == NULL || (n && ((r->ids = calloc(n, sizeof *r->ids)) == NULL ||
                            (r->tokens = calloc(n, sizeof *r->tokens)) == NULL ||
                            (r->row = calloc(n, sizeof *r->row)) == NULL ||
                            (r->ones = calloc(n * (size_t)(1 + ns), sizeof *r->ones)) == NULL)) ||
        (n && ns && ((r->cand = calloc(n * (size_t)ns, sizeof *r->cand)) == NULL ||
                     (r->cand_token = calloc(n * (size_t)ns, sizeof *r->cand_token)) == NULL))) {
        if (r) rows_free(r); /* (n and ns not set yet: the arrays only) */
        reply_error(req, 503, "out of memory");
        return;
    }
    r->q = q;
    q->refs++;
    r->state = st;
    r->offset = offset;
    r->paged = paged;
    if (next && (r->next = strdup(next)) == NULL) {
        rows_free(r);
        reply_error(req, 503, "out of memory");
        return;
    }
    r->n = n;
    r->ns = ns;
    for (size_t i = 0; i < n; i++)
        if ((r->ids[i] = strdup(ids[i])) == NULL) {
            rows_free(r);
            reply_error(req, 503, "out of memory");
            return;
        }
    held_start(s, &r->h, req, NULL, 0);
    r->pending = 1; /* this function's own, until every read is sent */
    if (n) {
        r->pending++;
        if (rjq_client_list_processes(s->c, 0, RJQ_JOBS_PAGE_MAX, on_procs, r) != RJQ_OK)
            r->pending--;
    }
    for (size_t i = 0; i < n; i++) {
        if (ns && all_digits(ids[i])) { /* read on each shard (see above) */
            for (int sh = 0; sh < ns; sh++) {
                one *o = &r->ones[n + i * (size_t)ns + (size_t)sh];
                *o = (one){r, i, sh};
                r->pending++;
                if (rjq_queue_get_job(rjq_queue_get_shard(q->q, sh), ids[i], on_job, o) != RJQ_OK)
                    r->pending--;
            }
            continue;
        }
        r->ones[i] = (one){r, i, -1};
        r->pending++;
        if (rjq_queue_get_job(q->q, ids[i], on_job, &r->ones[i]) != RJQ_OK) r->pending--;
    }
    rows_done(r);
}

void rows_job_reply(server *s, struct evhttp_request *req, json_t *job, const char *token) {
    rows *r = calloc(1, sizeof *r);
    if (r == NULL || job == NULL || (token && (r->single_token = strdup(token)) == NULL)) {
        free(r);
        json_decref(job);
        reply_error(req, 503, "out of memory");
        return;
    }
    r->single = job;
    held_start(s, &r->h, req, NULL, 0);
    r->pending = 1;
    if (token) {
        r->pending++;
        if (rjq_client_list_processes(s->c, 0, RJQ_JOBS_PAGE_MAX, on_procs, r) != RJQ_OK)
            r->pending--;
    }
    rows_done(r);
}
