/*
 * Trees in one call (rjq.h "Trees in one call"): rjq_enqueue_flow
 * enqueues the children (rjq_enqueue each, on their own queues), and once
 * every one is written, the parent with them as its dependencies (deps.c
 * through rjq_enqueue). The parent is created last, so nothing waits on a
 * child that was never written; the same call made again with the same
 * ids resumes (an existing job is reported, not written again). Any
 * queue may be a sharded one: rjq_enqueue routes its jobs.
 */
#include <stdlib.h>
#include <string.h>

#include "headers.h"
#include "queue.h"
#include "validate.h"

typedef struct flow {
    rjq_queue *q;
    rjq_flow_cb *cb;
    void *data;
    size_t n, pending;
    int status;
    void *payload;           /* the parent's (copies) */
    size_t len;
    rjq_job_options o;
    rjq_enqueued parent;
    rjq_enqueued *kids;      /* the children's ids, in order */
    rjq_queue **kq;          /* their queues */
    char *parent_id;
    char *opts_id;
    rjq_header *hdrs;        /* the parent's headers (one copy: rjq__headers_dup) */
} flow;

typedef struct kid_ctx {
    flow *f;
    size_t i;
} kid_ctx;

static void flow_free(flow *f) {
    for (size_t i = 0; i < f->n; i++) {
        free((char *)f->kids[i].id);
        if (f->kq[i]) rjq__queue_release(f->kq[i]);
    }
    free(f->kids);
    free(f->kq);
    free(f->payload);
    free(f->parent_id);
    free(f->opts_id);
    free(f->hdrs);
    rjq__queue_release(f->q);
    free(f);
}

static void flow_end(rjq_client *c, flow *f, int status) {
    if (f->cb)
        f->cb(c, status, status == RJQ_OK ? &f->parent : NULL, status == RJQ_OK ? f->kids : NULL,
              status == RJQ_OK ? f->n : 0, f->data);
    flow_free(f);
}

static void on_parent(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    flow *f = data;
    if (status == RJQ_OK && (n != 1 || jobs == NULL || jobs[0].id == NULL)) status = RJQ_EPROTO;
    if (status == RJQ_OK && (f->parent_id = strdup(jobs[0].id)) == NULL) status = RJQ_ENOMEM;
    if (status == RJQ_OK) {
        f->parent = jobs[0];
        f->parent.id = f->parent_id;
    }
    flow_end(c, f, status);
}

/* Every child answered: the parent, after them (or the first error). */
static void children_done(rjq_client *c, flow *f) {
    if (f->status == RJQ_OK && !rjq__accepting(c)) f->status = RJQ_ECLOSED;
    rjq_dep *on = f->status == RJQ_OK ? calloc(f->n, sizeof *on) : NULL;
    if (f->status == RJQ_OK && on == NULL) f->status = RJQ_ENOMEM;
    if (f->status != RJQ_OK) {
        flow_end(c, f, f->status);
        return;
    }
    for (size_t i = 0; i < f->n; i++) {
        on[i].queue = rjq_queue_get_name(f->kq[i]);
        on[i].id = f->kids[i].id;
    }
    rjq_job_options o = f->o;
    o.after = on;
    o.n_after = f->n;
    int rc = rjq_enqueue(f->q, f->payload, f->len, &o, on_parent, f);
    free(on);
    if (rc != RJQ_OK) flow_end(c, f, rc);
}

static void on_child(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    kid_ctx *k = data;
    flow *f = k->f;
    size_t i = k->i;
    free(k);
    if (status == RJQ_OK && (n != 1 || jobs == NULL || jobs[0].id == NULL)) status = RJQ_EPROTO;
    if (status == RJQ_OK) {
        f->kids[i] = jobs[0];
        f->kids[i].id = strdup(jobs[0].id);
        if (f->kids[i].id == NULL) status = RJQ_ENOMEM;
    }
    if (status != RJQ_OK && f->status == RJQ_OK) f->status = status;
    if (--f->pending == 0) children_done(c, f);
}

int rjq_enqueue_flow(rjq_queue *q, const void *payload, size_t len, const rjq_job_options *o,
                     const rjq_flow_child *const *children, size_t n, rjq_flow_cb *cb,
                     void *data) {
    if (q == NULL) return RJQ_EINVAL;
    rjq_client *c = rjq_queue_get_client(q);
    char why[256];
    if (children == NULL || n == 0 || n > RJQ_AFTER_MAX) {
        rjq__errmsg(c, "enqueue flow: 1..%d children", RJQ_AFTER_MAX);
        return RJQ_EINVAL;
    }
    rjq_job_options po = RJQ_JOB_OPTIONS_INIT;
    if (o && rjq__sized_take(&po, sizeof po, o, "rjq_job_options", why, sizeof why) != RJQ_OK) {
        rjq__errmsg(c, "%s", why);
        return RJQ_EINVAL;
    }
    if (po.after || po.n_after) {
        rjq__errmsg(c, "enqueue flow: the parent's dependencies are its children (after unset)");
        return RJQ_EINVAL;
    }
    if ((po.nheaders || po.headers) &&
        (po.nheaders == 0 || rjq__headers_check(po.headers, po.nheaders, why, sizeof why) != RJQ_OK)) {
        /* (checked before any child is written, not when the parent is) */
        rjq__errmsg(c, "enqueue flow: %s", po.nheaders ? why : "job headers: headers set with nheaders 0");
        return RJQ_EINVAL;
    }
    /* (a sharded queue's handle, parent's or child's, is any queue's here:
     * rjq_enqueue routes each job to its shard, and the parent's
     * dependencies named by their queues to their ids' shards) */
    int rc;
    rjq_flow_child kid[RJQ_AFTER_MAX];
    for (size_t i = 0; i < n; i++) {
        kid[i] = (rjq_flow_child)RJQ_FLOW_CHILD_INIT;
        if (children[i] == NULL ||
            rjq__sized_take(&kid[i], sizeof kid[i], children[i], "rjq_flow_child", why,
                            sizeof why) != RJQ_OK ||
            kid[i].queue == NULL || rjq_queue_get_client(kid[i].queue) != c) {
            rjq__errmsg(c, "enqueue flow: child %zu: none, a bad size, or no queue of this client",
                        i);
            return RJQ_EINVAL;
        }
        rjq_job_options ko = RJQ_JOB_OPTIONS_INIT;
        if (kid[i].opts && rjq__sized_take(&ko, sizeof ko, kid[i].opts, "rjq_job_options", why,
                                           sizeof why) != RJQ_OK) {
            rjq__errmsg(c, "enqueue flow: child %zu: %s", i, why);
            return RJQ_EINVAL;
        }
        if (ko.id && !rjq__valid_job_id(ko.id)) {
            rjq__errmsg(c, "enqueue flow: child %zu: bad job id", i);
            return RJQ_EINVAL;
        }
    }
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    flow *f = calloc(1, sizeof *f);
    if (f == NULL) return RJQ_ENOMEM;
    f->q = q;
    rjq__queue_hold(q);
    f->cb = cb;
    f->data = data;
    f->o = po;
    f->len = len;
    f->kids = calloc(n, sizeof *f->kids);
    f->kq = calloc(n, sizeof *f->kq);
    f->payload = malloc(len ? len : 1);
    if (po.id) f->opts_id = strdup(po.id);
    if (f->kids == NULL || f->kq == NULL || f->payload == NULL || (po.id && f->opts_id == NULL)) {
        flow_free(f);
        return RJQ_ENOMEM;
    }
    f->n = n;
    if (len) memcpy(f->payload, payload, len);
    f->o.id = f->opts_id;
    if (po.nheaders) { /* (read when the parent is sent, after this call: copied) */
        if ((f->hdrs = rjq__headers_dup(po.headers, po.nheaders)) == NULL) {
            f->n = 0;
            flow_free(f);
            return RJQ_ENOMEM;
        }
        f->o.headers = f->hdrs;
    }
    rjq__enter(c);
    f->pending = 1; /* this loop's own, dropped below */
    for (size_t i = 0; i < n; i++) {
        kid_ctx *k = malloc(sizeof *k);
        rc = k ? RJQ_OK : RJQ_ENOMEM;
        if (k) {
            k->f = f;
            k->i = i;
            rc = rjq_enqueue(kid[i].queue, kid[i].payload, kid[i].len, kid[i].opts, on_child, k);
            if (rc != RJQ_OK) free(k);
        }
        if (rc != RJQ_OK) {
            if (i == 0) { /* nothing sent: refused as it is */
                f->n = 0;
                flow_free(f);
                rjq__leave(c);
                return rc;
            }
            f->status = rc; /* the others are in flight: cb tells */
            break;
        }
        f->kq[i] = kid[i].queue;
        rjq__queue_hold(kid[i].queue);
        f->pending++;
    }
    if (--f->pending == 0) children_done(c, f);
    rjq__leave(c);
    return RJQ_OK;
}
