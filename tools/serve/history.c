/*
 * rjq serve: GET /v1/queues/{q}/history?range=1h|24h|30d, the queue's
 * stored history (rjq_queue_get_history; README "History"): 60 or 1440
 * minutes, or 720 hours, oldest first, the current one last. Each point:
 *   {"t": start ms (server time), "enqueued", "completed", "failed",
 *    "wait_p50", "wait_p99", "run_p50", "run_p99" (seconds, null: none),
 *    "wait_count", "run_count", "wait_sum_ms", "run_sum_ms"}
 * and with ?buckets=1 also "wait" and "run": the histograms' counts
 * (bounds in the reply's "bounds", seconds; the last is +Inf: null).
 * A sharded queue's shards are added up. Every serve instance reads the
 * same figures (the dashboard's charts, across reloads and restarts).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

typedef struct hcall {
    held h;
    squeue *q;
    const char *range;
    long step_ms;
    int buckets;
} hcall;

static json_t *seconds_or_null(double s) {
    return s < 0 ? json_null() : json_real(s);
}

static json_t *counts(const long long *b) {
    json_t *a = json_array();
    for (int i = 0; a && i < RJQ_HISTORY_BUCKETS; i++) json_array_append_new(a, json_integer(b[i]));
    return a;
}

static long long total(const long long *b) {
    long long n = 0;
    for (int i = 0; i < RJQ_HISTORY_BUCKETS; i++) n += b[i];
    return n;
}

json_t *history_point_json(const rjq_history_point *p, int buckets) {
    json_t *o = json_pack("{sI sI sI sI so so so so sI sI sI sI}", "t", (json_int_t)p->at_ms,
                          "enqueued", (json_int_t)p->enqueued, "completed",
                          (json_int_t)p->completed, "failed", (json_int_t)p->failed, "wait_p50",
                          seconds_or_null(rjq_history_quantile(p->wait, 0.5)), "wait_p99",
                          seconds_or_null(rjq_history_quantile(p->wait, 0.99)), "run_p50",
                          seconds_or_null(rjq_history_quantile(p->run, 0.5)), "run_p99",
                          seconds_or_null(rjq_history_quantile(p->run, 0.99)), "wait_count",
                          (json_int_t)total(p->wait), "run_count", (json_int_t)total(p->run),
                          "wait_sum_ms", (json_int_t)p->wait_sum_ms, "run_sum_ms",
                          (json_int_t)p->run_sum_ms);
    if (o && buckets) {
        json_object_set_new(o, "wait", counts(p->wait));
        json_object_set_new(o, "run", counts(p->run));
    }
    return o;
}

static void on_history(rjq_client *cl, int status, const rjq_history_point *list, size_t n,
                       void *data) {
    hcall *c = data;
    struct evhttp_request *req = held_end(&c->h);
    if (req && status != RJQ_OK) {
        reply_rjq_error(req, status, rjq_client_get_errmsg(cl));
    } else if (req) {
        json_t *points = json_array(), *bounds = json_array();
        for (size_t i = 0; points && i < n; i++)
            json_array_append_new(points, history_point_json(rjq_history_point_get(list, i),
                                                             c->buckets));
        for (int i = 0; bounds && i < RJQ_HISTORY_BUCKETS; i++) {
            double b = rjq_history_bound(i);
            json_array_append_new(bounds, isinf(b) ? json_null() : json_real(b));
        }
        reply_json(req, 200,
                   json_pack("{so ss sI so so}", "queue", json_name(c->q->name), "range",
                             c->range, "step_ms", (json_int_t)c->step_ms, "bounds", bounds,
                             "points", points));
    }
    c->q->refs--;
    free(c);
}

void history_handle(server *s, struct evhttp_request *req, squeue *q,
                    const struct evkeyvalq *args) {
    const char *range = query_get(args, "range"), *b = query_get(args, "buckets");
    long step = 60000, n = 60;
    if (range == NULL || strcmp(range, "1h") == 0) {
        range = "1h";
    } else if (strcmp(range, "24h") == 0) {
        n = RJQ_HISTORY_MINUTES;
    } else if (strcmp(range, "30d") == 0) {
        step = 3600000;
        n = RJQ_HISTORY_HOURS;
    } else {
        reply_error(req, 400, "range must be 1h, 24h or 30d");
        return;
    }
    if (b && strcmp(b, "0") && strcmp(b, "1")) {
        reply_error(req, 400, "buckets must be 0 or 1");
        return;
    }
    hcall *c = calloc(1, sizeof *c);
    if (c == NULL) {
        reply_error(req, 503, "out of memory");
        return;
    }
    c->q = q;
    c->range = range[0] == '1' ? "1h" : range[0] == '2' ? "24h" : "30d";
    c->step_ms = step;
    c->buckets = b && b[0] == '1';
    q->refs++;
    held_start(s, &c->h, req, NULL, 0);
    int rc = rjq_queue_get_history(q->q, step, n, on_history, c);
    if (rc != RJQ_OK) {
        struct evhttp_request *r = held_end(&c->h);
        if (r) reply_rjq_error(r, rc, rjq_client_get_errmsg(s->c));
        q->refs--;
        free(c);
    }
}

/* ---- the totals, for /metrics (metrics.c) ---------------------------------------- */

static void on_totals(rjq_client *cl, int status, const rjq_history_point *list, size_t n,
                      void *data) {
    squeue *q = data;
    (void)cl;
    q->htotal_reading = 0;
    if (status == RJQ_OK && n == 1) {
        q->htotal = *rjq_history_point_get(list, 0);
        q->htotal_have = 1;
    }
}

void history_read_totals(squeue *q) {
    if (!q->htotal_reading && rjq_queue_get_history(q->q, 0, 1, on_totals, q) == RJQ_OK)
        q->htotal_reading = 1;
}
