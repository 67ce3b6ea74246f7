/*
 * rjq serve: payload searches (README "rjq serve", "Search").
 *
 *   POST   /v1/queues/{q}/search?text=T[&field=F&states=S,S&max=N&count=N]
 *          start a search of the queue's payloads for the bytes T: 202 and
 *          the search's status ({"search": id, ...}); read-only servers
 *          allow it (it writes nothing). With field F: the jobs whose
 *          declared JSON field F has the value T, looked up in the queue's
 *          index (rjq_queue_find, pages of `count` ids: O(matches)); when F
 *          is not declared, or the index does not cover every job (a shard's
 *          first page says so), that shard is scanned for T instead (a
 *          superset: T anywhere in the payload), and the status's "index"
 *          says why
 *   GET    /v1/queues/{q}/search/{id}[?from=N]   its status: state
 *          (running, done, cancelled, failed), scanned and total, the
 *          matches from the N-th on ({"id", "state"}), found, truncated,
 *          steps, elapsed_ms, first_match_ms
 *   DELETE /v1/queues/{q}/search/{id}            cancel it (the status)
 *
 * A search runs in steps, one at a time, each one call of rjq_queue_search
 * (one HSCAN of about `count` payloads: bounded Redis time whatever the
 * queue's size), the next sent from the loop once the last is answered, so
 * other requests and the queue's workers go on between them. A sharded
 * queue's shards are searched one after the other. The logic of a step
 * (states, each id once, the cap, the shards) is search_state.c's. A search
 * nobody asked about for SEARCH_IDLE_S is let go (cancelled, freed), and at
 * most SEARCH_MAX run or are kept at once.
 */
#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search_state.h"
#include "statsfmt.h"

#define SEARCH_MAX 16            /* searches kept at once */
#define SEARCH_IDLE_S 60         /* a search unasked this long is let go */
#define SEARCH_COUNT_DEFAULT 100 /* payloads a step asks for (bench/README.md "Search") */
#define SEARCH_MATCHES_DEFAULT 1000
#define SEARCH_MATCHES_MAX 100000
#define SEARCH_PAGE_MAX 1000     /* matches in one status */

typedef struct search {
    server *s;
    squeue *q;               /* (a reference: q->refs) */
    unsigned long id;
    char *text;
    size_t len;
    long count;
    char *field;             /* the indexed field looked up (NULL: a scan) */
    int by_index;            /* the next step is a lookup (else a scan step) */
    int index_used;          /* some lookup answered */
    char *index_note;        /* why a shard was scanned instead (NULL: none) */
    char after[RJQ_JOB_ID_MAX + 1]; /* the last id of the lookup's page ("": none) */
    search_state st;
    int out;                 /* a step is out */
    int cancelled, failed;
    char *error;             /* failed: why */
    double started, first_at, ended_at; /* monotonic s (0: not yet) */
    double sent_at;          /* monotonic s: the step out was sent */
    double step_s, step_max_s; /* steps' round trips: their sum, the longest */
    struct event *next;      /* sends the next step from the loop */
    struct event *idle;      /* lets it go once unasked for SEARCH_IDLE_S */
    struct search *link;
} search;

struct searches {
    search *list;
    size_t n;
    unsigned long last_id;
    int freeing;             /* search_free_all: steps out end quietly */
};

static struct searches *all_of(server *s) {
    if (s->searches == NULL) s->searches = calloc(1, sizeof *s->searches);
    return s->searches;
}

int search_path(const char *path) {
    if (strncmp(path, "/v1/queues/", 11) != 0) return 0;
    const char *p = strchr(path + 11, '/');
    if (p == NULL || strncmp(p, "/search", 7) != 0) return 0;
    return p[7] == '\0' || (p[7] == '/' && p[8] != '\0' && strchr(p + 8, '/') == NULL);
}

static void search_free(search *x) {
    struct searches *a = x->s->searches;
    for (search **pp = &a->list; *pp; pp = &(*pp)->link)
        if (*pp == x) {
            *pp = x->link;
            a->n--;
            break;
        }
    if (x->next) event_free(x->next);
    if (x->idle) event_free(x->idle);
    search_state_free(&x->st);
    if (x->q) x->q->refs--;
    free(x->text);
    free(x->field);
    free(x->index_note);
    free(x->error);
    free(x);
}

static const char *state_name(const search *x) {
    return x->failed ? "failed" : x->cancelled ? "cancelled" : x->st.done ? "done" : "running";
}

static json_t *status_json(const search *x, size_t from) {
    json_t *m = json_array();
    for (size_t i = from; m && i < x->st.n && i < from + SEARCH_PAGE_MAX; i++) {
        json_t *e = json_pack("{so ss}", "id", json_name(x->st.m[i].id), "state",
                              job_state_name((rjq_job_state)x->st.m[i].state));
        if (e && x->st.nshards > 1) json_object_set_new(e, "shard", json_integer(x->st.m[i].shard));
        json_array_append_new(m, e);
    }
    json_t *states = json_array();
    for (int i = 0; states && i < 7; i++)
        if (x->st.states & (1u << i))
            json_array_append_new(states, json_string(job_state_name((rjq_job_state)i)));
    double end = x->ended_at ? x->ended_at : serve_now_s();
    char id[24];
    snprintf(id, sizeof id, "%lu", x->id);
    json_t *o = json_pack("{ss so so so ss sI sI sI sI sI sb sI so}", "search", id, "queue",
                          json_name(x->q->name), "text", json_bytes(x->text, x->len), "states",
                          states, "state", state_name(x), "scanned", (json_int_t)x->st.scanned,
                          "total", (json_int_t)search_state_total(&x->st), "steps",
                          (json_int_t)x->st.steps, "found", (json_int_t)x->st.n, "from",
                          (json_int_t)from, "truncated", x->st.truncated, "count",
                          (json_int_t)x->count, "matches", m);
    if (o) {
        json_object_set_new(o, "elapsed_ms", json_integer((json_int_t)((end - x->started) * 1000)));
        json_object_set_new(o, "first_match_ms",
                            x->first_at ? json_integer((json_int_t)((x->first_at - x->started) * 1000))
                                        : json_null());
        json_object_set_new(o, "step_ms_mean",
                            json_real(x->st.steps ? x->step_s * 1000 / (double)x->st.steps : 0));
        json_object_set_new(o, "step_ms_max", json_real(x->step_max_s * 1000));
        json_object_set_new(o, "shards", json_integer(x->st.nshards));
        json_object_set_new(o, "error", x->error ? json_string(x->error) : json_null());
        json_object_set_new(o, "field", x->field ? json_string(x->field) : json_null());
        json_object_set_new(o, "index", json_pack("{sb so}", "used", x->index_used, "note",
                                                  x->index_note ? json_string(x->index_note)
                                                                : json_null()));
    }
    return o;
}

static void on_idle(evutil_socket_t fd, short what, void *arg) {
    search *x = arg;
    (void)fd;
    (void)what;
    if (x->out) x->cancelled = 1; /* freed when its step is answered */
    else search_free(x);
}

static void touch(search *x) {
    struct timeval tv = {SEARCH_IDLE_S, 0};
    event_add(x->idle, &tv);
}

static void fail(search *x, const char *why) {
    x->failed = 1;
    x->ended_at = serve_now_s();
    free(x->error);
    x->error = strdup(why ? why : "failed");
}

static void on_step(rjq_client *c, int status, const char *cursor, long long scanned,
                    long long total, const rjq_search_match *m, size_t n, void *data);
static void on_found(rjq_client *c, int status, const rjq_search_match *m, size_t n,
                     long long covered, long long total, void *data);

/* The queue (or shard) the search's next step reads. */
static rjq_queue *target(const search *x) {
    return x->st.nshards > 1 ? rjq_queue_get_shard(x->q->q, x->st.shard) : x->q->q;
}

static void send_step(evutil_socket_t fd, short what, void *arg) {
    search *x = arg;
    (void)fd;
    (void)what;
    if (x->cancelled || x->failed || x->st.done) return;
    if (x->s->stopping) { /* (the client closes: its handles go) */
        fail(x, "the server is stopping");
        return;
    }
    rjq_queue *q = target(x);
    int rc = !q ? RJQ_EINVAL
             : x->by_index
                 ? rjq_queue_find(q, x->field, x->text, x->len, x->after, x->count, on_found, x)
                 : rjq_queue_search(q, x->st.cursor, x->text, x->len, x->count, on_step, x);
    if (rc != RJQ_OK) {
        fail(x, rjq_strerror(rc));
        return;
    }
    x->out = 1;
    x->sent_at = serve_now_s();
}

static void on_step(rjq_client *c, int status, const char *cursor, long long scanned,
                    long long total, const rjq_search_match *m, size_t n, void *data) {
    search *x = data;
    x->out = 0;
    if (x->s->searches->freeing) return; /* (search_free_all frees it) */
    double now = serve_now_s();
    x->step_s += now - x->sent_at;
    if (now - x->sent_at > x->step_max_s) x->step_max_s = now - x->sent_at;
    if (x->cancelled) { /* DELETE or idle: let go when idle, else kept for a status */
        if (!evtimer_pending(x->idle, NULL)) search_free(x);
        return;
    }
    if (status != RJQ_OK) {
        fail(x, rjq_client_get_errmsg(c)[0] ? rjq_client_get_errmsg(c) : rjq_strerror(status));
        return;
    }
    size_t before = x->st.n;
    if (search_state_step(&x->st, cursor, scanned, total, m, n) != 0) {
        fail(x, "out of memory");
        return;
    }
    if (x->st.n > before && x->first_at == 0) x->first_at = now;
    if (x->st.done) x->ended_at = now;
    else event_active(x->next, EV_TIMEOUT, 0);
}

/* A lookup's page: as a scan step whose cursor is "0" on the shard's last
 * page. A shard whose index cannot answer (the field is not declared, or
 * the index does not cover every job) is scanned instead, from its start. */
static void on_found(rjq_client *c, int status, const rjq_search_match *m, size_t n,
                     long long covered, long long total, void *data) {
    search *x = data;
    if (x->s->searches->freeing) {
        x->out = 0;
        return; /* (search_free_all frees it) */
    }
    if (!x->cancelled && (status == RJQ_ENOTFOUND || status == RJQ_ESTATE)) {
        char note[160];
        if (status == RJQ_ENOTFOUND)
            snprintf(note, sizeof note, "the field is not indexed: payloads scanned for the value");
        else
            snprintf(note, sizeof note,
                     "the index covers %lld of %lld jobs: payloads scanned for the value",
                     covered, total);
        free(x->index_note);
        x->index_note = strdup(note);
        x->by_index = 0;
        snprintf(x->st.cursor, sizeof x->st.cursor, "0");
        x->out = 0;
        event_active(x->next, EV_TIMEOUT, 0);
        return;
    }
    if (status == RJQ_OK) {
        x->index_used = 1;
        if (n) snprintf(x->after, sizeof x->after, "%s", rjq_search_match_get(m, n - 1)->id);
    }
    int shard = x->st.shard, kept = !x->cancelled; /* (a cancelled one may be freed) */
    on_step(c, status, (long)n < x->count ? "0" : "1", (long long)n, total, m, n, data);
    if (kept && x->st.shard != shard) x->after[0] = '\0'; /* (a new shard: from its first) */
}

/* POST /v1/queues/{q}/search */
static void start(server *s, struct evhttp_request *req, squeue *q,
                  const struct evkeyvalq *args) {
    const char *text = query_get(args, "text");
    unsigned states;
    long long max, count;
    if (query_only(req, args, ROUTE_SEARCH)) return;
    if (text == NULL || *text == '\0' || strlen(text) > RJQ_SEARCH_BYTES_MAX) {
        reply_error(req, 400, "text must be 1 to %d bytes (what the payloads are searched for)",
                    RJQ_SEARCH_BYTES_MAX);
        return;
    }
    if (search_states_parse(query_get(args, "states"), &states) != 0) {
        reply_error(req, 400, "states must be a comma-separated list of ready, delayed, "
                              "waiting, active, dead, cancelled, completed");
        return;
    }
    const char *field = query_get(args, "field");
    if (field && (*field == '\0' || strlen(field) > RJQ_INDEX_FIELD_MAX ||
                  strspn(field, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
                      strlen(field) ||
                  strlen(text) > RJQ_INDEX_VALUE_MAX)) {
        reply_error(req, 400, "field must be 1 to %d letters, digits, '_', '.' or '-' (a JSON "
                              "field the queue indexes), and text its value (at most %d bytes)",
                    RJQ_INDEX_FIELD_MAX, RJQ_INDEX_VALUE_MAX);
        return;
    }
    if (query_ll(req, args, "max", 1, SEARCH_MATCHES_MAX, SEARCH_MATCHES_DEFAULT, &max) ||
        query_ll(req, args, "count", 1, RJQ_SEARCH_COUNT_MAX, SEARCH_COUNT_DEFAULT, &count))
        return;
    struct searches *a = all_of(s);
    if (a == NULL) {
        reply_error(req, 503, "out of memory");
        return;
    }
    if (a->n >= SEARCH_MAX) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "5");
        reply_error(req, 503, "too many searches at once (%d): cancel one (DELETE)", SEARCH_MAX);
        return;
    }
    search *x = calloc(1, sizeof *x);
    if (x == NULL || (x->text = strdup(text)) == NULL || (field && (x->field = strdup(field)) == NULL) ||
        search_state_init(&x->st, states, (size_t)max, q->nshards) != 0 ||
        (x->next = event_new(s->base, -1, 0, send_step, x)) == NULL ||
        (x->idle = evtimer_new(s->base, on_idle, x)) == NULL) {
        if (x) {
            search_state_free(&x->st);
            if (x->next) event_free(x->next);
            free(x->text);
            free(x->field);
            free(x);
        }
        reply_error(req, 503, "out of memory");
        return;
    }
    x->s = s;
    x->q = q;
    q->refs++;
    x->len = strlen(text);
    x->count = (long)count;
    x->by_index = x->field != NULL;
    x->id = ++a->last_id;
    x->link = a->list;
    a->list = x;
    a->n++;
    touch(x);
    x->started = serve_now_s();
    send_step(-1, 0, x);
    char loc[64];
    snprintf(loc, sizeof loc, "search/%lu", x->id);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Location", loc);
    reply_json(req, x->failed ? 503 : 202, status_json(x, 0));
}

void search_handle(server *s, struct evhttp_request *req, squeue *q, const char *sid,
                   const struct evkeyvalq *args) {
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    if (sid == NULL) {
        if (m == EVHTTP_REQ_POST) start(s, req, q, args);
        else {
            evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "POST");
            reply_error(req, 405, "method not allowed here: use POST");
        }
        return;
    }
    search *x = NULL;
    char *end;
    unsigned long id = strtoul(sid, &end, 10);
    if (*sid >= '0' && *sid <= '9' && *end == '\0' && s->searches)
        for (x = s->searches->list; x && (x->id != id || x->q != q); x = x->link) {}
    if (x == NULL) {
        reply_error(req, 404, "no such search (it ended more than %d s ago, or never was)",
                    SEARCH_IDLE_S);
        return;
    }
    long long from = 0;
    if (m == EVHTTP_REQ_GET || m == EVHTTP_REQ_HEAD) {
        if (query_only(req, args, ROUTE_SEARCH_STATUS) ||
            query_ll(req, args, "from", 0, SEARCH_MATCHES_MAX, 0, &from))
            return;
        touch(x);
        reply_json(req, 200, status_json(x, (size_t)from));
    } else if (m == EVHTTP_REQ_DELETE) {
        if (query_only(req, args, ROUTE_SEARCH_DELETE)) return;
        if (!x->st.done && !x->failed && !x->cancelled) {
            x->cancelled = 1;
            x->ended_at = serve_now_s();
        }
        touch(x);
        reply_json(req, 200, status_json(x, x->st.n));
    } else {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, DELETE");
        reply_error(req, 405, "method not allowed here: use GET, DELETE");
    }
}

void search_free_all(server *s) {
    if (s->searches == NULL) return;
    s->searches->freeing = 1;
    while (s->searches->list) search_free(s->searches->list);
    free(s->searches);
    s->searches = NULL;
}
