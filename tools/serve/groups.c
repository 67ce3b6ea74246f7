/*
 * rjq serve: job groups (README "Groups").
 *
 *   GET  /v1/queues/{q}/groups[?offset=&limit=]   the groups with jobs, deepest first
 *                                                 (rjq_queue_list_groups; limit 1..1000,
 *                                                 default 20)
 *   GET  /v1/queues/{q}/groups/{g}                one group (zeros when it has nothing)
 *   POST /v1/queues/{q}/groups/{g}/pause, /resume pause or resume one group
 *                                                 (rjq_queue_pause_group)
 *
 * On a sharded queue the library does the routing (README "Groups"): the
 * listing is every shard's merged by depth, each group once (offset +
 * limit at most 1000, else 400), and a group's pause goes to its shard.
 *
 * and the busiest groups of each queue served, for /metrics: the first
 * --metrics-groups K (default 10) of the listing, read with each stats
 * refresh (1 s) while K > 0 and /metrics was scraped within the last
 * METRICS_WANTED_S (the first scrape after a pause has no group series: a
 * second later they are there). The listing's script reads a page of the
 * groups' depth index (gstats.lua: its cost does not grow with the number
 * of groups; tests/test_groups_wait.c prints it for 10 000 groups), so
 * every queue is read every second. K only bounds what is kept and
 * written, and the label set: at most K groups per queue in /metrics.
 */
#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "statsfmt.h"

#define METRICS_WANTED_S 600.0 /* the groups are read this long after a scrape */

/* ---- the busiest groups, at each refresh --------------------------------------- */

static void on_top(rjq_client *c, int status, long long total, const rjq_group_info *list,
                   size_t n, void *data) {
    squeue *q = data;
    (void)c;
    q->gtop_reading = 0;
    if (status != RJQ_OK) return; /* (the last figures stay until a read works) */
    serve_group *v = n ? calloc(n, sizeof *v) : NULL;
    if (n && v == NULL) return;
    for (size_t i = 0; i < n; i++) {
        const rjq_group_info *g = rjq_group_info_get(list, i);
        snprintf(v[i].name, sizeof v[i].name, "%s", g->name);
        v[i].depth = g->depth;
        v[i].active = g->active;
        v[i].concurrency = g->concurrency;
        v[i].weight = g->weight;
        v[i].paused = g->paused;
        v[i].started = g->started;
    }
    free(q->gtop);
    q->gtop = v;
    q->ngtop = n;
    q->gtotal = total;
    q->gtop_have = 1;
    /* (a listing reads a page of the depth index: every refresh) */
    q->gtop_next = serve_now_s();
}

void groups_refresh(server *s, squeue *q) {
    if (s->metrics_at == 0 || serve_now_s() - s->metrics_at > METRICS_WANTED_S) {
        groups_forget(q); /* (nobody scrapes: nothing read, nothing old kept) */
        return;
    }
    if (s->o.metrics_groups <= 0 || q->gtop_reading || !q->have || !q->s.exists ||
        serve_now_s() < q->gtop_next)
        return; /* (a sharded queue's handle merges its shards' lists) */
    if (rjq_queue_list_groups(q->q, NULL, 0, s->o.metrics_groups, on_top, q) == RJQ_OK)
        q->gtop_reading = 1;
}

void groups_forget(squeue *q) {
    q->gtop_next = 0;
    free(q->gtop);
    q->gtop = NULL;
    q->ngtop = 0;
    q->gtotal = 0;
    q->gtop_have = 0;
}

/* ---- /metrics ------------------------------------------------------------------ */

static void series_start(FILE *out, const char *family, const squeue *q, const serve_group *g) {
    fprintf(out, "%s{queue=\"", family);
    prom_label_value(out, q->name);
    fprintf(out, "\",group=\"");
    prom_label_value(out, g->name);
}

void groups_metrics(FILE *out, server *s, int (*listed)(const server *, const squeue *)) {
    if (s->o.metrics_groups <= 0) return;
    prom_family(out, "rjq_queue_groups", "gauge",
                "Job groups of the queue with ready or running jobs (README \"Groups\"), read "
                "at each refresh (1 s).");
    for (squeue *q = s->queues; q; q = q->next) {
        if (!q->gtop_have || !listed(s, q)) continue;
        fprintf(out, "rjq_queue_groups{queue=\"");
        prom_label_value(out, q->name);
        fprintf(out, "\"} %lld\n", q->gtotal);
    }
    char help[320];
    snprintf(help, sizeof help,
             "Jobs of one of the queue's busiest groups by state now: the %d groups with the most "
             "ready jobs (--metrics-groups); the other groups are left out (rjq_jobs counts "
             "their jobs).",
             s->o.metrics_groups);
    prom_family(out, "rjq_group_jobs", "gauge", help);
    for (squeue *q = s->queues; q; q = q->next)
        for (size_t i = 0; q->gtop_have && listed(s, q) && i < q->ngtop; i++) {
            series_start(out, "rjq_group_jobs", q, &q->gtop[i]);
            fprintf(out, "\",state=\"ready\"} %lld\n", q->gtop[i].depth);
            series_start(out, "rjq_group_jobs", q, &q->gtop[i]);
            fprintf(out, "\",state=\"active\"} %lld\n", q->gtop[i].active);
        }
    prom_family(out, "rjq_group_started_total", "counter",
                "Jobs one of the queue's busiest groups (those of rjq_group_jobs) started since it "
                "was last listed (set back to 0 when it has no ready or running job: a reset; "
                "starts by clients older than the counter are not counted).");
    for (squeue *q = s->queues; q; q = q->next)
        for (size_t i = 0; q->gtop_have && listed(s, q) && i < q->ngtop; i++) {
            series_start(out, "rjq_group_started_total", q, &q->gtop[i]);
            fprintf(out, "\"} %lld\n", q->gtop[i].started);
        }
    prom_family(out, "rjq_group_paused", "gauge",
                "1 when one of the queue's busiest groups (those of rjq_group_jobs) is paused.");
    for (squeue *q = s->queues; q; q = q->next)
        for (size_t i = 0; q->gtop_have && listed(s, q) && i < q->ngtop; i++) {
            series_start(out, "rjq_group_paused", q, &q->gtop[i]);
            fprintf(out, "\"} %d\n", q->gtop[i].paused);
        }
}

/* ---- the routes ------------------------------------------------------------------ */

typedef struct gcall {
    held h;
    squeue *q;
    int one;          /* GET of one group: the object, not a list */
    int paused;       /* pause (1) or resume (0) */
    long long offset;
    char group[RJQ_GROUP_NAME_MAX + 1];
} gcall;

static void gcall_free(gcall *c) {
    c->q->refs--;
    free(c);
}

static gcall *gcall_new(server *s, struct evhttp_request *req, squeue *q) {
    gcall *c = calloc(1, sizeof *c);
    if (c == NULL) {
        reply_error(req, 503, "out of memory");
        return NULL;
    }
    c->q = q;
    q->refs++;
    held_start(s, &c->h, req, NULL, 0); /* (its reply callback frees it) */
    return c;
}

static void gcall_sent(gcall *c, int rc) {
    if (rc == RJQ_OK) return;
    struct evhttp_request *req = held_end(&c->h);
    if (req) reply_rjq_error(req, rc, rjq_client_get_errmsg(c->h.s->c));
    gcall_free(c);
}

/* (none, 0 in rjq_group_info: null, as concurrency's -1) */
static json_t *limit_json(long v) {
    return v > 0 ? json_integer(v) : json_null();
}

json_t *groups_info_json(const rjq_group_info *g) {
    return json_pack("{so sI sI so si sb so so so sI}", "name", json_name(g->name), "depth",
                     (json_int_t)g->depth, "active", (json_int_t)g->active, "concurrency",
                     g->concurrency >= 0 ? json_integer(g->concurrency) : json_null(), "weight",
                     g->weight, "paused", g->paused, "rate", limit_json(g->rate),
                     "rate_window_ms", limit_json(g->rate ? g->rate_window_ms : 0), "max_waiting",
                     limit_json(g->max_waiting), "started", (json_int_t)g->started);
}

static void on_list(rjq_client *cl, int status, long long total, const rjq_group_info *list,
                    size_t n, void *data) {
    gcall *c = data;
    struct evhttp_request *req = held_end(&c->h);
    if (req && status != RJQ_OK) {
        reply_rjq_error(req, status, rjq_client_get_errmsg(cl));
    } else if (req && c->one) {
        rjq_group_info none = {.name = c->group, .concurrency = -1, .weight = 1};
        reply_json(req, 200, groups_info_json(n == 1 ? rjq_group_info_get(list, 0) : &none));
    } else if (req) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < n; i++)
            json_array_append_new(a, groups_info_json(rjq_group_info_get(list, i)));
        reply_json(req, 200,
                   a ? json_pack("{so sI sI so}", "queue", json_name(c->q->name), "total",
                                 (json_int_t)total, "offset", (json_int_t)c->offset, "groups", a)
                     : NULL);
    }
    gcall_free(c);
}

/* (rjq_queue_pause_group counts 1 either way: a group paused twice is
 * paused, and the reply has no "changed") */
static void on_paused(rjq_client *cl, int status, long long n, void *data) {
    gcall *c = data;
    (void)n;
    struct evhttp_request *req = held_end(&c->h);
    if (req && status != RJQ_OK) reply_rjq_error(req, status, rjq_client_get_errmsg(cl));
    else if (req)
        reply_json(req, 200, json_pack("{so so sb}", "queue", json_name(c->q->name), "group",
                                       json_name(c->group), "paused", c->paused));
    gcall_free(c);
}

static int is_get(struct evhttp_request *req) {
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    return m == EVHTTP_REQ_GET || m == EVHTTP_REQ_HEAD;
}

static void not_allowed(struct evhttp_request *req, const char *allow) {
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    reply_error(req, 405, "method not allowed here: use %s", allow);
}

void groups_handle(server *s, struct evhttp_request *req, squeue *q, const char *group,
                   const char *action, const struct evkeyvalq *args) {
    if (group && strlen(group) > RJQ_GROUP_NAME_MAX) {
        reply_error(req, 400, "a group is 1..%d bytes of [A-Za-z0-9_.:@-]", RJQ_GROUP_NAME_MAX);
        return;
    }
    if (action) {
        if (strcmp(action, "pause") && strcmp(action, "resume")) {
            reply_error(req, 404, "no such route");
        } else if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
            not_allowed(req, "POST");
        } else if (query_only(req, args,
                              action[0] == 'p' ? ROUTE_GROUP_PAUSE : ROUTE_GROUP_RESUME) == 0) {
            gcall *c = gcall_new(s, req, q);
            if (c == NULL) return;
            strcpy(c->group, group);
            c->paused = strcmp(action, "pause") == 0;
            gcall_sent(c, rjq_queue_pause_group(q->q, group, c->paused, on_paused, c));
        }
        return;
    }
    if (!is_get(req)) {
        not_allowed(req, "GET");
        return;
    }
    long long offset = 0, limit = 1;
    if (query_only(req, args, group ? ROUTE_GROUP : ROUTE_GROUPS)) return;
    if (!group && (query_ll(req, args, "offset", 0, RJQ_JOBS_OFFSET_MAX, 0, &offset) ||
                   query_ll(req, args, "limit", 1, 1000, 20, &limit)))
        return; /* (answered) */
    if (!group && q->nshards > 1 && offset + limit > 1000) {
        /* (the library refuses it: each shard's first offset + limit are merged) */
        reply_error(req, 400, "queue %s is sharded: offset + limit is at most 1000", q->name);
        return;
    }
    gcall *c = gcall_new(s, req, q);
    if (c == NULL) return;
    c->one = group != NULL;
    c->offset = offset;
    if (group) strcpy(c->group, group);
    gcall_sent(c, rjq_queue_list_groups(q->q, group, (long)offset, (long)limit, on_list, c));
}
