/*
 * Each master: one command sent to every master of a Redis Cluster (or to
 * the one server), its answers gathered (rjq_client_send_to_masters).
 *
 * The masters come from a CLUSTER SLOTS of its own (through the request
 * layer: it waits for the session like any request, and goes to any ready
 * connection); each master's command is then sent pinned to the first slot
 * it serves (rjq__command_in), so it takes the routing every request of
 * that slot takes (a node link made on first use, MOVED and ASK followed,
 * transient errors retried). A standalone server (the route's own finding:
 * CLUSTER SLOTS refused or not a cluster) is one master serving every slot.
 *
 * The one fan-out is masters_each(): a function per master's reply, one at
 * the end. Listings that merge every master can use it as it is.
 *
 * This file knows slots and nodes, never queues.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_private.h"
#include "slotmap.h"

/* Master list[i]'s reply (reply NULL without one). */
typedef void each_fn(rjq_client *c, rjq_master *list, size_t i, int status, redisReply *reply,
                     void *arg);
/* The end: status RJQ_OK and the n masters (each_fn was called once for
 * each before), or an error (list: what was made of it, to free). */
typedef void all_fn(rjq_client *c, int status, rjq_master *list, size_t n, void *arg);

typedef struct fanout {
    char **argv;        /* the command, copied */
    size_t *lens;
    int argc;
    each_fn *each;
    all_fn *all;
    void *arg;
    rjq_master *m;      /* the masters */
    size_t n;
    int *ranges;        /* every master's, 2 ints each */
    char **names;       /* addresses of masters and replicas (freed at the end) */
    size_t nnames;
    const char **repl;  /* replica addresses, the masters' in turn */
    size_t pending;     /* replies still to come (+1 while sending) */
} fanout;

typedef struct one {
    fanout *f;
    size_t i;
} one;

static void fanout_free(fanout *f) {
    for (int i = 0; i < f->argc; i++) free(f->argv[i]);
    free(f->argv);
    free(f->lens);
    for (size_t i = 0; i < f->nnames; i++) free(f->names[i]);
    free(f->names);
    free(f->repl);
    free(f->ranges);
    free(f->m);
    free(f);
}

static void finish(rjq_client *c, fanout *f, int status) {
    f->all(c, status, f->m, f->n, f->arg);
    fanout_free(f);
}

static void on_one(rjq_client *c, int status, redisReply *r, void *priv) {
    one *o = priv;
    fanout *f = o->f;
    f->each(c, f->m, o->i, status, r, f->arg);
    free(o);
    if (--f->pending == 0) finish(c, f, rjq__closing(c) ? RJQ_ECANCELED : RJQ_OK);
}

static char *name_of(fanout *f, const rjq__node_addr *a) {
    char buf[RJQ__HOST_MAX + 16];
    char *s = strdup(rjq__node_addr_format(a, buf, sizeof buf));
    if (s) f->names[f->nnames++] = s;
    return s;
}

/* The masters of table m into f (ranges ascending, replicas). */
static int take_masters(fanout *f, const rjq__slotmap *m) {
    size_t nranges = 0;
    for (int s = 0; s < RJQ__SLOTS; s++)
        if (m->owner[s] >= 0 && (s == 0 || m->owner[s - 1] != m->owner[s])) nranges++;
    f->m = calloc(m->nnodes ? m->nnodes : 1, sizeof *f->m);
    f->ranges = calloc(2 * nranges + 1, sizeof *f->ranges);
    f->names = calloc(m->nnodes + 1, sizeof *f->names);
    f->repl = calloc(m->nnodes + 1, sizeof *f->repl);
    if (!f->m || !f->ranges || !f->names || !f->repl) return RJQ_ENOMEM;
    size_t r = 0, k = 0;
    for (size_t i = 0; i < m->nnodes; i++) {
        if (m->nodes[i].master >= 0) continue;
        rjq_master *x = &f->m[f->n];
        x->ranges = f->ranges + r;
        for (int s = 0; s < RJQ__SLOTS; s++) {
            if (m->owner[s] != (int16_t)i || (s > 0 && m->owner[s - 1] == m->owner[s])) continue;
            int e = s;
            while (e + 1 < RJQ__SLOTS && m->owner[e + 1] == m->owner[s]) e++;
            f->ranges[r++] = s;
            f->ranges[r++] = e;
            x->nranges++;
        }
        if (x->nranges == 0) continue; /* a master without slots: no queue there */
        if ((x->address = name_of(f, &m->nodes[i].addr)) == NULL) return RJQ_ENOMEM;
        x->replicas = f->repl + k;
        for (size_t j = 0; j < m->nnodes; j++) {
            if (m->nodes[j].master != (int)i) continue;
            if ((f->repl[k++] = name_of(f, &m->nodes[j].addr)) == NULL) return RJQ_ENOMEM;
            x->nreplicas++;
        }
        f->n++;
    }
    return f->n ? RJQ_OK : RJQ_EPROTO;
}

/* A standalone server: the one master, serving every slot. */
static int take_server(rjq_client *c, fanout *f) {
    char buf[RJQ__HOST_MAX + 16];
    const char *host = rjq__conn_address(&c->cmd);
    int port = c->cmd.addr_port ? c->cmd.addr_port : c->url.port;
    if (c->url.path) snprintf(buf, sizeof buf, "%s", c->url.path);
    else if (host && strchr(host, ':')) snprintf(buf, sizeof buf, "[%s]:%d", host, port);
    else snprintf(buf, sizeof buf, "%s:%d", host ? host : c->url.host, port);
    f->m = calloc(1, sizeof *f->m);
    f->names = calloc(1, sizeof *f->names);
    if (!f->m || !f->names || (f->names[0] = strdup(buf)) == NULL) return RJQ_ENOMEM;
    f->nnames = 1;
    static const int no_ranges[1];
    static const char *const no_replicas[1];
    f->m[0].address = f->names[0];
    f->m[0].ranges = no_ranges; /* (never NULL: empty) */
    f->m[0].replicas = no_replicas;
    f->n = 1;
    return RJQ_OK;
}

static void on_slots(rjq_client *c, int status, redisReply *r, void *priv) {
    fanout *f = priv;
    if (status == RJQ_ECANCELED || rjq__closing(c)) {
        finish(c, f, RJQ_ECANCELED);
        return;
    }
    int mode = rjq__route_mode(c), cluster = mode == RJQ__ROUTE_CLUSTER;
    if (status != RJQ_OK && mode != RJQ__ROUTE_STANDALONE) {
        /* (a cluster's table unread; or never connected: nothing known) */
        finish(c, f, status);
        return;
    }
    if (cluster) {
        rjq__slotmap m;
        rjq__slotmap_init(&m);
        const char *asked = rjq__conn_address(&c->cmd);
        status = rjq__slotmap_parse_slots(&m, r, asked ? asked : "127.0.0.1");
        if (status == RJQ_EPROTO)
            rjq__errmsg(c, "cluster: CLUSTER SLOTS answered a table rjq cannot read");
        if (status == RJQ_OK) status = take_masters(f, &m);
        rjq__slotmap_clear(&m);
    } else {
        status = take_server(c, f);
    }
    if (status != RJQ_OK) {
        finish(c, f, status);
        return;
    }
    f->pending = 1; /* (until every command is sent) */
    for (size_t i = 0; i < f->n; i++) {
        one *o = malloc(sizeof *o);
        int rc = RJQ_ENOMEM;
        if (o) {
            o->f = f;
            o->i = i;
            int slot = cluster ? f->m[i].ranges[0] : 0;
            rc = rjq__command_in(c, slot, 0, on_one, o, f->argc, (const char **)f->argv, f->lens);
        }
        if (rc == RJQ_OK) {
            f->pending++;
            continue;
        }
        free(o);
        f->each(c, f->m, i, rc, NULL, f->arg);
    }
    if (--f->pending == 0) finish(c, f, RJQ_OK);
}

/* Send the command to every master: each(i) once per master, then all. */
static int masters_each(rjq_client *c, int argc, const char *const *argv, const size_t *lens,
                        each_fn *each, all_fn *all, void *arg) {
    fanout *f = calloc(1, sizeof *f);
    if (f == NULL) return RJQ_ENOMEM;
    f->each = each;
    f->all = all;
    f->arg = arg;
    f->argv = calloc((size_t)argc, sizeof *f->argv);
    f->lens = calloc((size_t)argc, sizeof *f->lens);
    int rc = f->argv && f->lens ? RJQ_OK : RJQ_ENOMEM;
    for (int i = 0; rc == RJQ_OK && i < argc; i++, f->argc++) {
        f->lens[i] = lens ? lens[i] : strlen(argv[i]);
        if ((f->argv[i] = malloc(f->lens[i] + 1)) == NULL) rc = RJQ_ENOMEM;
        else memcpy(f->argv[i], argv[i], f->lens[i]), f->argv[i][f->lens[i]] = '\0';
    }
    const char *slots[2] = {"CLUSTER", "SLOTS"};
    if (rc == RJQ_OK) rc = rjq__command(c, 0, on_slots, f, 2, slots, NULL);
    if (rc != RJQ_OK) fanout_free(f);
    return rc;
}

/* ---- rjq_client_send_to_masters: the replies as text ----------------------------------- */

typedef struct text_run {
    rjq_masters_cb *cb;
    void *data;
} text_run;

static void on_text(rjq_client *c, rjq_master *list, size_t i, int status, redisReply *r,
                    void *arg) {
    const char *s = NULL;
    char num[32];
    (void)arg;
    if (r && (status == RJQ_OK || r->type == REDIS_REPLY_ERROR)) {
        switch (r->type) {
        case REDIS_REPLY_STRING:
        case REDIS_REPLY_STATUS:
        case REDIS_REPLY_ERROR:
#ifdef REDIS_REPLY_VERB
        case REDIS_REPLY_VERB:
#endif
            s = r->str;
            break;
        case REDIS_REPLY_INTEGER:
            snprintf(num, sizeof num, "%lld", r->integer);
            s = num;
            break;
        case REDIS_REPLY_NIL:
            break;
        default:
            rjq__errmsg(c, "masters: a reply that is not text");
            status = RJQ_EPROTO;
        }
    }
    list[i].status = status;
    if (s == NULL) return;
    size_t len = strlen(s);
    char *copy = malloc(len + 1);
    if (copy == NULL) {
        list[i].status = RJQ_ENOMEM;
        return;
    }
    memcpy(copy, s, len + 1);
    list[i].reply = copy;
    list[i].len = len;
}

static void on_text_all(rjq_client *c, int status, rjq_master *list, size_t n, void *arg) {
    text_run *t = arg;
    if (status == RJQ_OK) t->cb(c, RJQ_OK, list, n, t->data);
    else t->cb(c, status, NULL, 0, t->data);
    for (size_t i = 0; i < n; i++) free((char *)list[i].reply);
    free(t);
}

int rjq_client_send_to_masters(rjq_client *c, int argc, const char *const *argv, const size_t *lens,
                       rjq_masters_cb *cb, void *data) {
    if (c == NULL || cb == NULL || argc < 1 || argv == NULL) return RJQ_EINVAL;
    for (int i = 0; i < argc; i++)
        if (argv[i] == NULL) return RJQ_EINVAL;
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    text_run *t = calloc(1, sizeof *t);
    if (t == NULL) return RJQ_ENOMEM;
    t->cb = cb;
    t->data = data;
    rjq__enter(c);
    int rc = masters_each(c, argc, argv, lens, on_text, on_text_all, t);
    rjq__leave(c);
    if (rc != RJQ_OK) free(t);
    return rc;
}

/* Element i of the list an rjq_masters_cb gets (rjq.h "Extensible structs": the library's own
 * stride, whatever sizeof the caller was built with). */
const rjq_master *rjq_master_get(const rjq_master *list, size_t i) {
    return list ? &list[i] : NULL;
}
