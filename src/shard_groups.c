/*
 * Job groups on a sharded queue (README "Groups", docs/sharding.md section
 * 4): the public group calls, routed over a sharded queue's shards above
 * groups.c (which acts on one queue). A group lives on one shard, the one
 * its name hashes to (rjq__queue_group_shard: rjq_enqueue puts its jobs
 * there), so its limits, pause and turn in the round-robin are that
 * shard's, exact as on a plain queue:
 *  - a group's settings and pause go to its shard only;
 *  - the defaults of every group (group NULL) go to every shard, one
 *    callback with the sum of the groups offered again;
 *  - the listing asks every shard for its first offset + count groups
 *    (offset + count <= 1000) and merges them by depth: each group once.
 * On a handle still reading its layout (rjq_queue_open) a call waits for
 * it (rjq__queue_when_learnt), its arguments copied.
 */
#include <stdlib.h>
#include <string.h>

#include "groups.h"
#include "shard.h"
#include "validate.h"

/* ---- calls made before the layout is known ---------------------------------- */

enum { P_LIMITS, P_LIMIT, P_PAUSE, P_LIST };

typedef struct pending {
    rjq_queue *q;
    int kind;
    char *group; /* a copy; NULL: none */
    int a, b;    /* concurrency, weight; paused */
    rjq_group_limits lim; /* P_LIMIT's, read in whole */
    long offset, count;
    rjq_count_cb *count_cb;
    rjq_groups_cb *groups_cb;
    void *data;
} pending;

static int run(rjq_queue *q, const pending *p);

static void on_learnt(rjq_client *c, int status, void *data) {
    pending *p = data;
    if (status == RJQ_OK) status = run(p->q, p);
    if (status != RJQ_OK) {
        if (p->count_cb) p->count_cb(c, status, 0, p->data);
        if (p->groups_cb) p->groups_cb(c, status, 0, NULL, 0, p->data);
    }
    free(p->group);
    free(p);
}

/* p (a stack copy) made again once q knows its layout: RJQ_OK (its
 * callback is then called once), else an error (nothing held). */
static int hold(rjq_queue *q, const pending *p) {
    pending *h = malloc(sizeof *h);
    if (h == NULL) return RJQ_ENOMEM;
    *h = *p;
    h->group = NULL;
    if (p->group && (h->group = strdup(p->group)) == NULL) {
        free(h);
        return RJQ_ENOMEM;
    }
    int rc = rjq__queue_when_learnt(q, on_learnt, h);
    if (rc == RJQ_OK) return RJQ_OK;
    free(h->group);
    free(h);
    return rc == 1 ? run(q, p) : rc; /* (learnt meanwhile: cannot be, but made now) */
}

/* ---- the defaults of every group: every shard --------------------------------- */

/* The defaults' limits (p: P_LIMITS or P_LIMIT) on one shard, a part of
 * rjq__queue_fan_out: on every shard, p's cb once with the first error or
 * the sum. */
static int send_limits(rjq_queue *sub, const void *arg, rjq_count_cb *cb, void *data) {
    const pending *p = arg;
    return p->kind == P_LIMIT ? rjq__groups_limit(sub, NULL, &p->lim, cb, data)
                              : rjq__groups_set_limits(sub, NULL, p->a, p->b, cb, data);
}

/* ---- the listing: every shard's first groups, merged by depth ------------------ */

typedef struct merging {
    rjq_groups_cb *cb;
    void *data;
    long offset, count;
    int waiting, status;
    long long total;
    rjq_group_info *rows; /* names malloc'd */
    size_t n, cap;
} merging;

static int deeper_first(const void *x, const void *y) {
    const rjq_group_info *a = x, *b = y;
    if (a->depth != b->depth) return a->depth > b->depth ? -1 : 1;
    return strcmp(a->name, b->name); /* (gstats.lua's order) */
}

static void merge_done(rjq_client *c, merging *m) {
    if (m->status == RJQ_OK) {
        if (m->n > 1) qsort(m->rows, m->n, sizeof *m->rows, deeper_first);
        size_t from = (size_t)m->offset < m->n ? (size_t)m->offset : m->n;
        size_t k = m->n - from < (size_t)m->count ? m->n - from : (size_t)m->count;
        m->cb(c, RJQ_OK, m->total, k ? m->rows + from : NULL, k, m->data);
    } else {
        m->cb(c, m->status, 0, NULL, 0, m->data);
    }
    for (size_t i = 0; i < m->n; i++) free((char *)m->rows[i].name);
    free(m->rows);
    free(m);
}

static void on_list_part(rjq_client *c, int status, long long total, const rjq_group_info *list,
                         size_t n, void *data) {
    merging *m = data;
    if (status == RJQ_OK && m->status == RJQ_OK) {
        m->total += total;
        if (m->n + n > m->cap) {
            size_t cap = m->n + n;
            rjq_group_info *r = realloc(m->rows, cap * sizeof *r);
            if (r == NULL) status = RJQ_ENOMEM;
            else {
                m->rows = r;
                m->cap = cap;
            }
        }
        for (size_t i = 0; status == RJQ_OK && i < n; i++) {
            rjq_group_info g = list[i];
            if ((g.name = strdup(list[i].name)) == NULL) status = RJQ_ENOMEM;
            else m->rows[m->n++] = g;
        }
    }
    if (status != RJQ_OK && m->status == RJQ_OK) m->status = status; /* (the first error) */
    if (--m->waiting == 0) merge_done(c, m);
}

static int list_everywhere(rjq_queue *q, int n, long offset, long count, rjq_groups_cb *cb,
                           void *data) {
    rjq_client *c = rjq_queue_get_client(q);
    if (offset < 0 || count < 1 || count > 1000 || offset + count > 1000) {
        rjq__errmsg(c, "groups: queue %s is sharded: offset + count is at most 1000",
                    rjq_queue_get_name(q));
        return RJQ_EINVAL;
    }
    merging *m = calloc(1, sizeof *m);
    if (m == NULL) return RJQ_ENOMEM;
    m->cb = cb;
    m->data = data;
    m->offset = offset;
    m->count = count;
    int rc = RJQ_OK, sent = 0;
    rjq__enter(c);
    m->waiting = 1;
    for (int k = 0; k < n && rjq__accepting(c); k++) {
        m->waiting++;
        rc = rjq__groups_list(rjq_queue_get_shard(q, k), NULL, 0, offset + count, on_list_part, m);
        if (rc != RJQ_OK) {
            m->waiting--;
            m->status = rc;
            break;
        }
        sent++;
    }
    if (sent == 0) {
        free(m);
        rjq__leave(c);
        return rc != RJQ_OK ? rc : RJQ_ECLOSED;
    }
    if (--m->waiting == 0) merge_done(c, m);
    rjq__leave(c);
    return RJQ_OK;
}

/* ---- the calls ------------------------------------------------------------------ */

/* p made on q, which knows its layout (or is a plain queue's handle). */
static int run(rjq_queue *q, const pending *p) {
    int n = rjq_queue_count_shards(q);
    rjq_queue *to = p->group ? rjq__queue_group_shard(q, p->group) : q;
    switch (p->kind) {
    case P_LIMITS:
        if (n > 1 && p->group == NULL)
            return rjq__queue_fan_out(q, send_limits, p, p->count_cb, p->data);
        return rjq__groups_set_limits(to, p->group, p->a, p->b, p->count_cb, p->data);
    case P_LIMIT:
        if (n > 1 && p->group == NULL)
            return rjq__queue_fan_out(q, send_limits, p, p->count_cb, p->data);
        return rjq__groups_limit(to, p->group, &p->lim, p->count_cb, p->data);
    case P_PAUSE:
        return rjq__groups_pause(to, p->group, p->a, p->count_cb, p->data);
    default:
        if (n > 1 && p->group == NULL) return list_everywhere(q, n, p->offset, p->count, p->groups_cb, p->data);
        return rjq__groups_list(to, p->group, p->offset, p->count, p->groups_cb, p->data);
    }
}

static int call(rjq_queue *q, const pending *p) {
    if (q == NULL) return RJQ_EINVAL;
    if (p->group && !rjq__valid_group_name(p->group)) {
        rjq__errmsg(rjq_queue_get_client(q), "group '%.80s': a group is 1..%d bytes of "
                    "[A-Za-z0-9_.:@-]", p->group, RJQ_GROUP_NAME_MAX);
        return RJQ_EINVAL;
    }
    if (rjq__queue_learning(q)) {
        if (!rjq__accepting(rjq_queue_get_client(q))) return RJQ_ECLOSED;
        return hold(q, p);
    }
    return run(q, p);
}

int rjq_queue_set_group_limits(rjq_queue *q, const char *group, int concurrency, int weight,
                               rjq_count_cb *cb, void *data) {
    pending p = {.q = q, .kind = P_LIMITS, .group = (char *)group, .a = concurrency, .b = weight,
                 .count_cb = cb, .data = data};
    return call(q, &p);
}

int rjq_queue_limit_group(rjq_queue *q, const char *group, const rjq_group_limits *l, rjq_count_cb *cb,
                          void *data) {
    if (q == NULL || l == NULL) return RJQ_EINVAL;
    pending p = {.q = q, .kind = P_LIMIT, .group = (char *)group, .count_cb = cb, .data = data};
    p.lim = (rjq_group_limits)RJQ_GROUP_LIMITS_INIT;
    if (rjq__sized_in(rjq_queue_get_client(q), &p.lim, sizeof p.lim, l, "rjq_group_limits") != RJQ_OK)
        return RJQ_EINVAL;
    return call(q, &p);
}

int rjq_queue_pause_group(rjq_queue *q, const char *group, int paused, rjq_count_cb *cb, void *data) {
    if (group == NULL) return RJQ_EINVAL;
    pending p = {.q = q, .kind = P_PAUSE, .group = (char *)group, .a = paused, .count_cb = cb,
                 .data = data};
    return call(q, &p);
}

int rjq_queue_list_groups(rjq_queue *q, const char *group, long offset, long count, rjq_groups_cb *cb,
                          void *data) {
    if (cb == NULL || offset < 0 || count < 1 || count > 1000) return RJQ_EINVAL;
    pending p = {.q = q, .kind = P_LIST, .group = (char *)group, .offset = offset, .count = count,
                 .groups_cb = cb, .data = data};
    return call(q, &p);
}
