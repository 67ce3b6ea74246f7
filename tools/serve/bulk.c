/*
 * rjq serve: POST /v1/queues/{q}/run-now, the bulk "run now" of the
 * dashboard's delayed list. The body is {"ids": ["a", "b", ...]} (1 to
 * BULK_MAX ids); each id is made ready (rjq_queue_promote, one script per
 * id, all sent at once) and the answer says what became of each, in the
 * order given:
 *
 *   {"queue": q, "ran": 2, "results": [{"id": "a", "result": "ran"},
 *     {"id": "b", "result": "not delayed"}, {"id": "c", "result": "not found"},
 *     {"id": "d", "result": "error", "error": "..."}]}
 *
 * 200 unless every id failed with the same error of the connection (then
 * that error's status, as for one job); 400 for a body that is not such a
 * list.
 */
#include "server.h"

#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "rjq.h"

#define BULK_MAX 100 /* ids per request: a page of the dashboard's list */

typedef struct bulk bulk;

struct bulk_one {
    bulk *b;
    int rc;          /* 1: ran; else the RJQ_E* code */
};

struct bulk {
    held h;
    squeue *q;
    json_t *ids;     /* the request's ids (a JSON array of strings, owned) */
    size_t n, out;   /* ids; their calls not answered yet */
    struct bulk_one one[];
};

static void bulk_free(bulk *b) {
    b->q->refs--;
    json_decref(b->ids);
    free(b);
}

static void bulk_reply(bulk *b) {
    struct evhttp_request *req = held_end(&b->h);
    if (req == NULL) { /* (the client is gone) */
        bulk_free(b);
        return;
    }
    long long ran = 0;
    int other = 0; /* an error that is not the job's state, and which */
    size_t nother = 0;
    json_t *a = json_array();
    for (size_t i = 0; a && i < b->n; i++) {
        int rc = b->one[i].rc;
        const char *id = json_string_value(json_array_get(b->ids, i));
        const char *what = rc == 1               ? "ran"
                           : rc == RJQ_ESTATE    ? "not delayed"
                           : rc == RJQ_ENOTFOUND ? "not found"
                                                 : "error";
        json_t *o = json_pack("{so ss}", "id", json_name(id), "result", what);
        if (o && strcmp(what, "error") == 0) {
            json_object_set_new(o, "error", json_string(rjq_strerror(rc)));
            if (nother == 0 || other == rc) nother++;
            other = rc;
        }
        ran += rc == 1;
        json_array_append_new(a, o);
    }
    if (nother == b->n && a) { /* (e.g. Redis went: no id had an answer) */
        json_decref(a);
        reply_rjq_error(req, other, rjq_client_get_errmsg(b->h.s->c));
    } else {
        reply_json(req, 200, json_pack("{so sI so}", "queue", json_name(b->q->name), "ran",
                                       (json_int_t)ran, "results", a));
    }
    bulk_free(b);
}

static void on_promoted(rjq_client *c, int status, long long n, void *data) {
    struct bulk_one *one = data;
    (void)c;
    one->rc = status == RJQ_OK ? (n > 0 ? 1 : RJQ_ESTATE) : status;
    if (--one->b->out == 0) bulk_reply(one->b);
}

/* The ids of body, a JSON array (new reference), or NULL after a 400. */
static json_t *parse_ids(struct evhttp_request *req) {
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    const char *body = len ? (const char *)evbuffer_pullup(in, -1) : "";
    if (body == NULL) {
        reply_error(req, 503, "out of memory");
        return NULL;
    }
    json_error_t err;
    json_t *root = json_loadb(body, len, 0, &err);
    json_t *ids = json_is_object(root) ? json_object_get(root, "ids") : NULL;
    size_t n = json_is_array(ids) ? json_array_size(ids) : 0;
    int ok = n >= 1 && n <= BULK_MAX;
    for (size_t i = 0; ok && i < n; i++) {
        json_t *v = json_array_get(ids, i);
        ok = json_is_string(v) && json_string_length(v) > 0 &&
             strlen(json_string_value(v)) == json_string_length(v); /* (no NUL inside) */
    }
    if (!ok) {
        json_decref(root);
        reply_error(req, 400, "the body must be {\"ids\": [...]}: 1 to %d job ids (strings)",
                    BULK_MAX);
        return NULL;
    }
    json_incref(ids);
    json_decref(root);
    return ids;
}

void bulk_run_now(server *s, struct evhttp_request *req, squeue *q) {
    json_t *ids = parse_ids(req);
    if (ids == NULL) return;
    size_t n = json_array_size(ids);
    bulk *b = calloc(1, sizeof *b + n * sizeof b->one[0]);
    if (b == NULL) {
        json_decref(ids);
        reply_error(req, 503, "out of memory");
        return;
    }
    b->q = q;
    q->refs++;
    b->ids = ids;
    b->n = n;
    b->out = 1; /* (this function's own, until every call is sent) */
    held_start(s, &b->h, req, NULL, 0);
    for (size_t i = 0; i < n; i++) {
        b->one[i].b = b;
        b->out++; /* (counted first: b stays whenever its callback runs) */
        int rc = rjq_queue_promote(q->q, json_string_value(json_array_get(ids, i)), on_promoted,
                                   &b->one[i]);
        if (rc != RJQ_OK) {
            b->out--;
            b->one[i].rc = rc == RJQ_EJOBID ? RJQ_ENOTFOUND : rc; /* (no job has such an id) */
        }
    }
    if (--b->out == 0) bulk_reply(b);
}
