/*
 * The index of declared JSON fields (rjq.h "The index of declared JSON
 * fields"; src/lua/index.lua): declaring it, reading it, a step that
 * indexes the jobs it does not cover, and a lookup. The enqueue script
 * keeps it (enqueue.lua "Index"); enqueue.c learns the declaration.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "enqueue.h"

typedef struct index_ctx {
    rjq_queue *q;             /* held: set teaches it the declaration */
    int set;
    rjq_index_cb *cb;
    rjq_index_fill_cb *fill;
    rjq_find_cb *find;
    void *data;
} index_ctx;

/* A count of the reply: an integer in 0..RJQ__TIME_MAX. */
static int count_ok(const redisReply *e) {
    return e->type == REDIS_REPLY_INTEGER && e->integer >= 0 && e->integer <= RJQ__TIME_MAX;
}

/* Send index.lua with a's arguments after its keys (a is freed). */
static int send_index(rjq_queue *q, rjq__argv *a, rjq__reply_fn *fn, index_ctx *ctx) {
    rjq_client *c = rjq_queue_get_client(q);
    int rc = RJQ_ENOMEM;
    if (ctx) {
        ctx->q = q;
        rjq__queue_hold(q);
        rjq__enter(c);
        if (!a->oom) rc = rjq__script(c, RJQ__S_INDEX, 0, fn, ctx, a->n, a->v, a->len);
        rjq__leave(c);
        if (rc != RJQ_OK) rjq__queue_release(q);
    }
    if (rc != RJQ_OK) free(ctx);
    rjq__argv_free(a);
    return rc;
}

/* ---- declare, read ---------------------------------------------------------- */

static void on_index(rjq_client *c, int status, redisReply *r, void *priv) {
    index_ctx *ctx = priv;
    const char *fields[RJQ_INDEX_FIELDS_MAX];
    char text[RJQ_INDEX_FIELDS_MAX * (RJQ_INDEX_FIELD_MAX + 1)];
    size_t n = 0;
    if (status == RJQ_OK &&
        (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
         r->element[0]->type != REDIS_REPLY_STRING || r->element[0]->len >= sizeof text ||
         !rjq__valid_index_fields(r->element[0]->str, r->element[0]->len) ||
         !count_ok(r->element[1]) || !count_ok(r->element[2])))
        status = RJQ_EPROTO;
    if (status == RJQ_EPROTO) rjq__errmsg(c, "index: unexpected reply");
    if (status == RJQ_OK) {
        size_t len = r->element[0]->len;
        memcpy(text, r->element[0]->str, len);
        text[len] = '\0';
        if (ctx->set) rjq__enqueue_index_learnt(ctx->q, text, len);
        for (char *at = text; len && at;) {
            fields[n++] = at;
            if ((at = strchr(at, ' ')) != NULL) *at++ = '\0';
        }
    }
    if (ctx->cb) {
        if (status == RJQ_OK)
            ctx->cb(c, RJQ_OK, fields, n, r->element[1]->integer, r->element[2]->integer,
                    ctx->data);
        else
            ctx->cb(c, status, NULL, 0, 0, 0, ctx->data);
    }
    rjq__queue_release(ctx->q);
    free(ctx);
}

int rjq_queue_set_index(rjq_queue *q, const char *const *fields, size_t n, rjq_index_cb *cb,
                        void *data) {
    if (q == NULL || (n > 0 && fields == NULL) || n > RJQ_INDEX_FIELDS_MAX) return RJQ_EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (fields[i] == NULL || !rjq__valid_index_field(fields[i], strlen(fields[i])))
            return RJQ_EINVAL;
        for (size_t j = 0; j < i; j++)
            if (strcmp(fields[i], fields[j]) == 0) return RJQ_EINVAL;
    }
    int rc = rjq__queue_usable(q, "this call");
    if (rc != RJQ_OK) return rc;
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_INDEX);
    rjq__argv_str(&a, "set");
    for (size_t i = 0; i < n; i++) rjq__argv_str(&a, fields[i]);
    index_ctx *ctx = calloc(1, sizeof *ctx);
    if (ctx) {
        ctx->set = 1;
        ctx->cb = cb;
        ctx->data = data;
    }
    return send_index(q, &a, on_index, ctx);
}

int rjq_queue_get_index(rjq_queue *q, rjq_index_cb *cb, void *data) {
    if (cb == NULL) return RJQ_EINVAL;
    int rc = rjq__queue_usable(q, "this call");
    if (rc != RJQ_OK) return rc;
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_INDEX);
    rjq__argv_str(&a, "get");
    index_ctx *ctx = calloc(1, sizeof *ctx);
    if (ctx) {
        ctx->cb = cb;
        ctx->data = data;
    }
    return send_index(q, &a, on_index, ctx);
}

/* ---- fill ----------------------------------------------------------------------- */

static void on_fill(rjq_client *c, int status, redisReply *r, void *priv) {
    index_ctx *ctx = priv;
    if (status == RJQ_OK &&
        (r->type != REDIS_REPLY_ARRAY || r->elements != 4 ||
         r->element[0]->type != REDIS_REPLY_STRING ||
         !rjq__hscan_cursor_ok(r->element[0]->str, r->element[0]->len) ||
         !count_ok(r->element[1]) ||
         !count_ok(r->element[2]) || !count_ok(r->element[3])))
        status = RJQ_EPROTO;
    if (status == RJQ_EPROTO) rjq__errmsg(c, "index fill: unexpected reply");
    if (status == RJQ_OK)
        ctx->fill(c, RJQ_OK, r->element[0]->str, r->element[1]->integer, r->element[2]->integer,
                  r->element[3]->integer, ctx->data);
    else
        ctx->fill(c, status, NULL, 0, 0, 0, ctx->data);
    rjq__queue_release(ctx->q);
    free(ctx);
}

int rjq_queue_fill_index(rjq_queue *q, const char *cursor, long count, rjq_index_fill_cb *cb,
                         void *data) {
    if (cb == NULL || cursor == NULL || !rjq__hscan_cursor_ok(cursor, strlen(cursor)) ||
        count < 1 || count > RJQ_SEARCH_COUNT_MAX)
        return RJQ_EINVAL;
    int rc = rjq__queue_usable(q, "this call");
    if (rc != RJQ_OK) return rc;
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_INDEX);
    rjq__argv_str(&a, "fill");
    rjq__argv_str(&a, cursor);
    rjq__argv_ll(&a, count);
    index_ctx *ctx = calloc(1, sizeof *ctx);
    if (ctx) {
        ctx->fill = cb;
        ctx->data = data;
    }
    return send_index(q, &a, on_fill, ctx);
}

/* ---- find ----------------------------------------------------------------------- */

static void on_find(rjq_client *c, int status, redisReply *r, void *priv) {
    index_ctx *ctx = priv;
    rjq_search_match *m = NULL;
    size_t n = 0;
    long long code = 0;
    if (status == RJQ_OK &&
        (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
         r->element[0]->type != REDIS_REPLY_INTEGER || !count_ok(r->element[1]) ||
         !count_ok(r->element[2])))
        status = RJQ_EPROTO;
    if (status == RJQ_OK) {
        code = r->element[0]->integer;
        if ((code != 0 && code != -1 && code != -2) || (code != 0 && r->elements != 3))
            status = RJQ_EPROTO;
    }
    if (status == RJQ_OK) status = rjq__search_matches(r, &m, &n);
    if (status == RJQ_EPROTO) rjq__errmsg(c, "find: unexpected reply");
    if (status == RJQ_OK) {
        if (code == -1) rjq__errmsg(c, "find: the field is not declared");
        if (code == -2)
            rjq__errmsg(c, "find: the index covers %lld of %lld jobs", r->element[1]->integer,
                        r->element[2]->integer);
        ctx->find(c, code == 0 ? RJQ_OK : code == -1 ? RJQ_ENOTFOUND : RJQ_ESTATE, m, n,
                  r->element[1]->integer, r->element[2]->integer, ctx->data);
    } else {
        ctx->find(c, status, NULL, 0, 0, 0, ctx->data);
    }
    free(m);
    rjq__queue_release(ctx->q);
    free(ctx);
}

int rjq_queue_find(rjq_queue *q, const char *field, const void *value, size_t len,
                   const char *after, long limit, rjq_find_cb *cb, void *data) {
    if (after == NULL) after = "";
    if (cb == NULL || field == NULL || !rjq__valid_index_field(field, strlen(field)) ||
        value == NULL || len == 0 || len > RJQ_INDEX_VALUE_MAX ||
        strlen(after) > RJQ_JOB_ID_MAX || limit < 1 || limit > RJQ_JOBS_PAGE_MAX)
        return RJQ_EINVAL;
    int rc = rjq__queue_usable(q, "this call");
    if (rc != RJQ_OK) return rc;
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_INDEX);
    rjq__argv_str(&a, "find");
    rjq__argv_str(&a, field);
    rjq__argv_add(&a, value, len);
    rjq__argv_str(&a, after);
    rjq__argv_ll(&a, limit);
    index_ctx *ctx = calloc(1, sizeof *ctx);
    if (ctx) {
        ctx->find = cb;
        ctx->data = data;
    }
    return send_index(q, &a, on_find, ctx);
}
