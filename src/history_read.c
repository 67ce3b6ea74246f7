/*
 * rjq_queue_get_history (rjq.h "History"): one read of the queue's stored
 * minutes or hours (histread.lua), per shard on a sharded handle, added
 * up. Apart from history.c, which the writers (enqueue, workers) use: a
 * sharded handle's reads go through shard.c, which uses those writers.
 */
#include <stdlib.h>
#include <string.h>

#include "history.h"

/* ---- the reader ----------------------------------------------------------- */

/* One rjq_queue_get_history call: one read per shard, summed. */
typedef struct hread {
    rjq_history_cb *cb;
    void *data;
    long step_ms, n;
    int waiting;        /* reads not answered yet */
    int status;         /* the first error */
    long long first;    /* the first minute/hour of the first answer (-1: none yet) */
    rjq_history_point *points;
} hread;

static void read_done(rjq_client *c, hread *h) {
    h->cb(c, h->status, h->status == RJQ_OK ? h->points : NULL,
          h->status == RJQ_OK ? (size_t)h->n : 0, h->data);
    free(h->points);
    free(h);
}

static int read_reply(rjq_client *c, hread *h, const redisReply *r) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != (size_t)h->n + 2) return RJQ_EPROTO;
    long long now = 0, first = 0;
    if (r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING ||
        rjq__history_num(r->element[0]->str, r->element[0]->len, &now) != 0 ||
        rjq__history_num(r->element[1]->str, r->element[1]->len, &first) != 0)
        return RJQ_EPROTO;
    rjq__server_time_sample(c, now);
    /* shards answer with their own clocks: the first answer's minutes are
     * the call's (another shard's a minute off adds to its neighbour) */
    if (h->first < 0) {
        h->first = first;
        for (long i = 0; i < h->n; i++) h->points[i].at_ms = (first + i) * h->step_ms;
    }
    long long shift = first - h->first;
    for (long i = 0; i < h->n; i++) {
        const redisReply *e = r->element[2 + i];
        rjq_history_point p;
        if (e->type == REDIS_REPLY_NIL) continue;
        if (e->type != REDIS_REPLY_STRING) return RJQ_EPROTO;
        int ok = rjq__history_parse(e->str, e->len, first + i, h->step_ms, &p);
        if (ok < 0) {
            rjq__errmsg(c, "history: a stored value this library cannot read");
            return RJQ_EPROTO;
        }
        long j = i + (long)shift;
        if (ok == 1 && j >= 0 && j < h->n) rjq__history_add(&h->points[j], &p);
    }
    return RJQ_OK;
}

static void on_read(rjq_client *c, int status, redisReply *r, void *priv) {
    hread *h = priv;
    if (status == RJQ_OK) status = read_reply(c, h, r);
    if (status == RJQ_EPROTO) rjq__errmsg(c, "history: unexpected reply");
    if (status != RJQ_OK && h->status == RJQ_OK) h->status = status;
    if (--h->waiting == 0) read_done(c, h);
}

static int send_read(rjq_queue *q, hread *h) {
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_HISTREAD);
    rjq__argv_str(&a, h->step_ms == 60000 ? "m" : h->step_ms == 0 ? "t" : "h");
    rjq__argv_ll(&a, h->n);
    int rc = a.oom ? RJQ_ENOMEM
                   : rjq__script(rjq_queue_get_client(q), RJQ__S_HISTREAD, RJQ__REQ_RETRY, on_read,
                                 h, a.n, a.v, a.len);
    rjq__argv_free(&a);
    return rc;
}

int rjq_queue_get_history(rjq_queue *q, long step_ms, long n, rjq_history_cb *cb, void *data) {
    if (q == NULL || cb == NULL) return RJQ_EINVAL;
    if (!((step_ms == 60000 && n >= 1 && n <= RJQ_HISTORY_MINUTES) ||
          (step_ms == 3600000 && n >= 1 && n <= RJQ_HISTORY_HOURS) || (step_ms == 0 && n == 1)))
        return RJQ_EINVAL;
    rjq_client *c = rjq_queue_get_client(q);
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    hread *h = calloc(1, sizeof *h);
    if (h == NULL || (h->points = calloc((size_t)n, sizeof *h->points)) == NULL) {
        free(h);
        return RJQ_ENOMEM;
    }
    h->cb = cb;
    h->data = data;
    h->step_ms = step_ms;
    h->n = n;
    h->first = -1;
    int shards = rjq_queue_count_shards(q);
    int rc = RJQ_OK;
    rjq__enter(c);
    /* (each read holds a count: an early answer cannot end the call) */
    h->waiting = 1;
    for (int i = 0; i < shards && rc == RJQ_OK; i++) {
        h->waiting++;
        rc = send_read(rjq_queue_get_shard(q, i), h);
        if (rc != RJQ_OK) h->waiting--;
    }
    if (rc != RJQ_OK && h->waiting == 1) { /* nothing sent: cb never called */
        free(h->points);
        free(h);
    } else {
        if (rc != RJQ_OK && h->status == RJQ_OK) h->status = rc;
        if (--h->waiting == 0) read_done(c, h);
        rc = RJQ_OK;
    }
    rjq__leave(c);
    return rc;
}
