/*
 * Job groups (README "Groups", rjq.h "Job groups"; scripts gconf.lua,
 * gstats.lua and the group step of claim.lua, all on groups_lib.lua): a
 * group's limits and pause, and the listing of groups by depth. (The
 * enqueue of jobs with a group is enqueue.c's, batched: genqueue.lua.)
 * The claims that start group jobs are the queue's own: a worker needs
 * nothing of this file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "groups.h"
#include "validate.h"

/* q's check for a group call (queue.h); cb_ok 0: no callback. A sharded
 * queue's calls reach here on its shards (shard_groups.c). */
static int usable(rjq_queue *q, int cb_ok) {
    return cb_ok ? rjq__queue_usable(q, "job groups") : RJQ_EINVAL;
}

/* ---- settings ----------------------------------------------------------- */

typedef struct count_ctx {
    rjq_queue *q;
    rjq_count_cb *cb;
    void *data;
} count_ctx;

static void on_count(rjq_client *c, int status, redisReply *r, void *priv) {
    count_ctx *x = priv;
    long long n = 0;
    if (status == RJQ_OK && (r->type != REDIS_REPLY_INTEGER || r->integer < 0)) {
        rjq__errmsg(c, "groups: unexpected reply");
        status = RJQ_EPROTO;
    }
    if (status == RJQ_OK) n = r->integer;
    rjq_queue *q = x->q;
    if (x->cb) x->cb(c, status, n, x->data);
    free(x);
    rjq__queue_release(q);
}

/* gconf.lua's arguments after the group and what: concurrency, weight,
 * then (rjq_queue_limit_group) rate and bound; NULL: not sent. */
typedef struct conf_args {
    char l[24], w[24], r[48], b[24];
    int all; /* rate and bound sent too */
} conf_args;

static int send_conf(rjq_queue *q, const char *group, const char *what, const conf_args *ca,
                     rjq_count_cb *cb, void *data) {
    count_ctx *x = malloc(sizeof *x);
    if (x == NULL) return RJQ_ENOMEM;
    x->q = q;
    x->cb = cb;
    x->data = data;
    rjq__argv v;
    rjq__argv_init(&v);
    rjq__argv_script_keys(&v, q, RJQ__S_GCONF);
    rjq__argv_str(&v, group ? group : "*");
    rjq__argv_str(&v, what);
    if (ca) {
        rjq__argv_str(&v, ca->l);
        rjq__argv_str(&v, ca->w);
        if (ca->all) {
            rjq__argv_str(&v, ca->r);
            rjq__argv_str(&v, ca->b);
        }
    }
    rjq__queue_register(q);
    int rc = rjq__queue_script(q, RJQ__S_GCONF, RJQ__REQ_RETRY, on_count, x, &v);
    if (rc != RJQ_OK) free(x);
    return rc;
}

int rjq__groups_set_limits(rjq_queue *q, const char *group, int concurrency, int weight,
                           rjq_count_cb *cb, void *data) {
    int rc = usable(q, 1);
    if (rc != RJQ_OK) return rc;
    if (group && !rjq__valid_group_name(group)) return RJQ_EINVAL;
    conf_args ca = {.all = 0};
    if (concurrency < 0) strcpy(ca.l, "-");
    else snprintf(ca.l, sizeof ca.l, "%d", concurrency);
    if (weight <= 0) strcpy(ca.w, "-");
    else snprintf(ca.w, sizeof ca.w, "%d", weight);
    return send_conf(q, group, "limits", &ca, cb, data);
}

/* A field of rjq_group_limits as gconf.lua takes it: 0 '-' (the
 * defaults'), RJQ_GROUP_NONE '0' (none), else the number (1..max). */
static int conf_field(long v, long max, char *out, size_t n) {
    if (v == 0) snprintf(out, n, "-");
    else if (v == RJQ_GROUP_NONE) snprintf(out, n, "0");
    else if (v > 0 && v <= max) snprintf(out, n, "%ld", v);
    else return RJQ_EINVAL;
    return RJQ_OK;
}

int rjq__groups_limit(rjq_queue *q, const char *group, const rjq_group_limits *l, rjq_count_cb *cb,
                      void *data) {
    int rc = usable(q, l != NULL);
    if (rc != RJQ_OK) return rc;
    if (group && !rjq__valid_group_name(group)) return RJQ_EINVAL;
    rjq_group_limits in = *l;
    const long big = 2147483647L;
    conf_args ca = {.all = 1};
    long win = in.rate_window_ms ? in.rate_window_ms : 1000;
    if (conf_field(in.concurrency, big, ca.l, sizeof ca.l) != RJQ_OK ||
        conf_field(in.weight < 0 ? 0 : in.weight, big, ca.w, sizeof ca.w) != RJQ_OK ||
        conf_field(in.rate, big, ca.r, sizeof ca.r) != RJQ_OK ||
        conf_field(in.max_waiting, big, ca.b, sizeof ca.b) != RJQ_OK || win < 0 || win > big)
        return RJQ_EINVAL;
    if (in.rate > 0) snprintf(ca.r, sizeof ca.r, "%ld/%ld", in.rate, win);
    return send_conf(q, group, "limits", &ca, cb, data);
}

int rjq__groups_pause(rjq_queue *q, const char *group, int paused, rjq_count_cb *cb, void *data) {
    int rc = usable(q, 1);
    if (rc != RJQ_OK) return rc;
    if (!rjq__valid_group_name(group)) return RJQ_EINVAL;
    return send_conf(q, group, paused ? "pause" : "resume", NULL, cb, data);
}

/* ---- listing ------------------------------------------------------------ */

typedef struct list_ctx {
    rjq_queue *q;
    rjq_groups_cb *cb;
    void *data;
    long count;
} list_ctx;

static int int_in(const redisReply *e, long long lo, long long hi) {
    return e->type == REDIS_REPLY_INTEGER && e->integer >= lo && e->integer <= hi;
}

static void on_list(rjq_client *c, int status, redisReply *r, void *priv) {
    list_ctx *x = priv;
    rjq_group_info *list = NULL;
    size_t n = 0;
    long long total = 0;
    /* gstats.lua: { total, then PER per group } */
    enum { PER = 10 };
    if (status == RJQ_OK) {
        int ok = r->type == REDIS_REPLY_ARRAY && r->elements >= 1 && (r->elements - 1) % PER == 0 &&
                 (long long)(r->elements - 1) / PER <= x->count && int_in(r->element[0], 0, RJQ__TIME_MAX);
        for (size_t i = 1; ok && i < r->elements; i += PER) {
            redisReply **e = &r->element[i];
            ok = e[0]->type == REDIS_REPLY_STRING && e[0]->len > 0 && e[0]->len <= RJQ_GROUP_NAME_MAX &&
                 !memchr(e[0]->str, '\0', e[0]->len) && int_in(e[1], 0, RJQ__TIME_MAX) &&
                 int_in(e[2], 0, RJQ__TIME_MAX) && int_in(e[3], -1, 2147483647) &&
                 int_in(e[4], 1, 2147483647) && int_in(e[5], 0, 1) && int_in(e[6], 0, 2147483647) &&
                 int_in(e[7], 0, 2147483647) && int_in(e[8], 0, 2147483647) &&
                 int_in(e[9], 0, INT64_MAX);
        }
        if (!ok) {
            rjq__errmsg(c, "groups: unexpected reply");
            status = RJQ_EPROTO;
        }
    }
    if (status == RJQ_OK) {
        total = r->element[0]->integer;
        n = (r->elements - 1) / PER;
        list = n ? calloc(n, sizeof *list) : NULL;
        if (n && list == NULL) status = RJQ_ENOMEM;
    }
    if (status == RJQ_OK) {
        for (size_t k = 0; k < n; k++) {
            redisReply **e = &r->element[1 + PER * k];
            /* (names end where the reply's strings do: hiredis NUL-terminates them) */
            list[k].name = e[0]->str;
            list[k].depth = e[1]->integer;
            list[k].active = e[2]->integer;
            list[k].concurrency = (int)e[3]->integer;
            list[k].weight = (int)e[4]->integer;
            list[k].paused = (int)e[5]->integer;
            list[k].rate = (long)e[6]->integer;
            list[k].rate_window_ms = (long)e[7]->integer;
            list[k].max_waiting = (long)e[8]->integer;
            list[k].started = e[9]->integer;
        }
    }
    rjq_queue *q = x->q;
    x->cb(c, status, total, status == RJQ_OK ? list : NULL, status == RJQ_OK ? n : 0, x->data);
    free(list);
    free(x);
    rjq__queue_release(q);
}

int rjq__groups_list(rjq_queue *q, const char *group, long offset, long count, rjq_groups_cb *cb,
                     void *data) {
    int rc = usable(q, cb != NULL);
    if (rc != RJQ_OK) return rc;
    if (offset < 0 || count < 1 || count > 1000 || (group && !rjq__valid_group_name(group)))
        return RJQ_EINVAL;
    list_ctx *x = malloc(sizeof *x);
    if (x == NULL) return RJQ_ENOMEM;
    x->q = q;
    x->cb = cb;
    x->data = data;
    x->count = group ? 1 : count;
    rjq__argv v;
    rjq__argv_init(&v);
    rjq__argv_script_keys(&v, q, RJQ__S_GSTATS);
    rjq__argv_ll(&v, offset);
    rjq__argv_ll(&v, count);
    rjq__argv_str(&v, group ? group : "");
    rc = rjq__queue_script(q, RJQ__S_GSTATS, RJQ__REQ_RETRY, on_list, x, &v);
    if (rc != RJQ_OK) free(x);
    return rc;
}

/* Element i of the list an rjq_groups_cb gets (rjq.h "Extensible structs": the library's own
 * stride, whatever sizeof the caller was built with). */
const rjq_group_info *rjq_group_info_get(const rjq_group_info *list, size_t i) {
    return list ? &list[i] : NULL;
}
