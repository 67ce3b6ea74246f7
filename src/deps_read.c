/*
 * rjq_job_dependencies (rjq.h; script deps_read.lua): a handler reads how
 * its job's dependencies stand. Two steps: the job's list of dependencies
 * from its own queue (deps_add.lua wrote it, deps_release.lua marks each
 * one as it is counted), then a call per dependency queue for those jobs'
 * states, results and errors, all sent in one pass (a round trip per
 * master: every script touches one queue's slot, and the calls of one
 * pass go out together). Reads only, nothing to resume. Also the
 * dependents of a job not released yet (rjq_queue_get_dependents), or both
 * (rjq_queue_get_job_deps: the list and the dependents in the first call,
 * so a job without dependencies costs that one call). The
 * calls by id act on one queue; shard.c routes a sharded queue's to the
 * id's shard (a worker's job is its shard's already).
 */
#include <stdlib.h>
#include <string.h>

#include "deps.h"
#include "validate.h"

/* Dependents handed to an rjq_dependents_cb at most (rjq.h). */
#define RJQ__DEPENDENTS_SHOWN 1000

typedef struct dread {
    rjq_client *c;
    rjq_queue *q;                /* the job's queue (held) */
    rjq_dependencies_cb *cb;
    rjq_job_deps_cb *both;       /* (rjq_queue_get_job_deps: cb NULL) */
    void *data;
    rjq_dep *dl;                 /* both: the dependents (nd), strings in dcopy */
    size_t nd;
    char *dcopy;
    int status, pending;
    size_t n;
    rjq_dep_outcome *out;        /* n; strings owned by copies below */
    char **qname, **id, **err;   /* n each */
    void **result;               /* n (a byte copy + NUL) */
    char id0[];                  /* the job's id */
} dread;

/* The read of one dependency queue: the dependencies at idx[0..k). */
typedef struct dpart {
    dread *d;
    rjq_queue *on;
    size_t k;
    size_t idx[];
} dpart;

static void dread_free(dread *d) {
    for (size_t i = 0; i < d->n; i++) {
        free(d->qname[i]);
        free(d->id[i]);
        free(d->err[i]);
        free(d->result[i]);
    }
    free(d->qname);
    free(d->id);
    free(d->err);
    free(d->result);
    free(d->out);
    free(d->dl);
    free(d->dcopy);
    free(d);
}

/* One step ended: once none is pending, cb gets the outcome. */
static void dread_step(dread *d, int status) {
    if (status != RJQ_OK && d->status == RJQ_OK) d->status = status;
    if (--d->pending > 0) return;
    int ok = d->status == RJQ_OK;
    if (d->both)
        d->both(d->c, d->status, ok && d->n ? d->out : NULL, ok ? d->n : 0,
                ok && d->nd ? d->dl : NULL, ok ? d->nd : 0, d->data);
    else
        d->cb(d->c, d->status, ok && d->n ? d->out : NULL, ok ? d->n : 0, d->data);
    rjq__queue_release(d->q);
    dread_free(d);
}

/* The state word of a reply (deps_read.lua), as a static string; NULL when
 * it is none of rjq's. */
static const char *state_word(const redisReply *r) {
    static const char *const known[] = {"ready",     "delayed", "active",  "completed",
                                        "dead",      "cancelled", "waiting", "missing"};
    if (r->type != REDIS_REPLY_STRING) return NULL;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (r->len == strlen(known[i]) && memcmp(r->str, known[i], r->len) == 0) return known[i];
    return NULL;
}

static void on_part(rjq_client *c, int status, redisReply *r, void *priv) {
    dpart *p = priv;
    dread *d = p->d;
    /* { false, false, (state, result, error) per id } */
    if (status == RJQ_OK &&
        (r->type != REDIS_REPLY_ARRAY || r->elements != 2 + 3 * p->k)) {
        rjq__errmsg(c, "dependencies: unexpected reply");
        status = RJQ_EPROTO;
    }
    for (size_t j = 0; status == RJQ_OK && j < p->k; j++) {
        size_t i = p->idx[j];
        const redisReply *st = r->element[2 + 3 * j], *res = r->element[3 + 3 * j],
                         *er = r->element[4 + 3 * j];
        const char *state = state_word(st);
        int res_ok = res->type == REDIS_REPLY_NIL || res->type == REDIS_REPLY_STRING;
        int er_ok = er->type == REDIS_REPLY_NIL || er->type == REDIS_REPLY_STRING;
        if (state == NULL || !res_ok || !er_ok ||
            (res->type == REDIS_REPLY_STRING) != (strcmp(state, "completed") == 0)) {
            rjq__errmsg(c, "dependencies: unexpected reply");
            status = RJQ_EPROTO;
            break;
        }
        d->out[i].state = state;
        if (res->type == REDIS_REPLY_STRING) {
            if ((d->result[i] = malloc(res->len + 1)) == NULL) {
                status = RJQ_ENOMEM;
                break;
            }
            memcpy(d->result[i], res->str, res->len);
            ((char *)d->result[i])[res->len] = '\0';
            d->out[i].result = d->result[i];
            d->out[i].result_len = res->len;
        }
        if (er->type == REDIS_REPLY_STRING) {
            if ((d->err[i] = strndup(er->str, er->len)) == NULL) {
                status = RJQ_ENOMEM;
                break;
            }
            d->out[i].error = d->err[i];
        }
    }
    rjq__queue_release(p->on);
    free(p);
    dread_step(d, status);
}

static int send_read(rjq_queue *q, const char *list_of, const char *dependents_of,
                     const char *const *ids, size_t k, rjq__reply_fn *fn, void *priv) {
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_DEPS_READ);
    rjq__argv_str(&a, list_of);
    rjq__argv_str(&a, dependents_of);
    for (size_t i = 0; i < k; i++) rjq__argv_str(&a, ids[i]);
    return rjq__queue_script(q, RJQ__S_DEPS_READ, 0, fn, priv, &a);
}

/* Send the read of every dependency queue: one call per queue. */
static int send_parts(dread *d) {
    char *seen = calloc(d->n, 1);
    const char **ids = malloc(d->n * sizeof *ids);
    int rc = seen && ids ? RJQ_OK : RJQ_ENOMEM;
    for (size_t i = 0; rc == RJQ_OK && i < d->n; i++) {
        if (seen[i]) continue;
        dpart *p = malloc(sizeof *p + d->n * sizeof p->idx[0]);
        rjq_queue *on = p ? rjq__deps_queue(d->c, d->qname[i], strlen(d->qname[i])) : NULL;
        if (on == NULL) {
            free(p);
            rc = RJQ_ENOMEM;
            break;
        }
        p->d = d;
        p->on = on;
        p->k = 0;
        for (size_t j = i; j < d->n; j++) {
            if (seen[j] || strcmp(d->qname[j], d->qname[i]) != 0) continue;
            seen[j] = 1;
            ids[p->k] = d->id[j];
            p->idx[p->k++] = j;
        }
        rc = send_read(on, "", "", ids, p->k, on_part, p);
        if (rc != RJQ_OK) {
            free(p);
            break;
        }
        d->pending++;
    }
    free(seen);
    free(ids);
    return rc;
}

/* How a mark of the list (deps_add.lua) counted the dependency. */
static const char *counted_word(char mark) {
    switch (mark) {
    case 'w': return "pending";
    case 'c': return "completed";
    case 'd': return "dead";
    case 'x': return "cancelled";
    case 'm': return "missing";
    case '-': return "ignored";
    default: return NULL;
    }
}

/* Read the list "<policy> <delay>[ <priority>[ h]]\n<mark> <queue> <id>..." into d
 * (deps_read.lua gives a released job's 'w' lines as 'c'). */
static int parse_list(dread *d, const char *s, size_t len) {
    const char *p = memchr(s, '\n', len), *end = s + len;
    size_t n = 0;
    for (const char *x = p; x && x < end; x = memchr(x + 1, '\n', (size_t)(end - x - 1))) n++;
    if (p == NULL || n == 0 || n > RJQ_AFTER_MAX) return RJQ_EPROTO;
    /* the header's policy (deps_add.lua: "<policy> <delay ms>") */
    const char *policy = NULL;
    static const char *const policies[] = {"fail", "run", "ignore"};
    for (size_t k = 0; k < sizeof policies / sizeof *policies; k++) {
        size_t pl = strlen(policies[k]);
        if ((size_t)(p - s) > pl && memcmp(s, policies[k], pl) == 0 && s[pl] == ' ')
            policy = policies[k];
    }
    if (policy == NULL) return RJQ_EPROTO;
    d->out = calloc(n, sizeof *d->out);
    d->qname = calloc(n, sizeof *d->qname);
    d->id = calloc(n, sizeof *d->id);
    d->err = calloc(n, sizeof *d->err);
    d->result = calloc(n, sizeof *d->result);
    if (!d->out || !d->qname || !d->id || !d->err || !d->result) return RJQ_ENOMEM;
    for (p++; p <= end && d->n < n; d->n++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        const char *sp = le - p > 2 && p[1] == ' ' ? memchr(p + 2, ' ', (size_t)(le - p - 2)) : NULL;
        const char *counted = counted_word(*p);
        if (sp == NULL || counted == NULL) return RJQ_EPROTO;
        d->qname[d->n] = strndup(p + 2, (size_t)(sp - p - 2));
        d->id[d->n] = strndup(sp + 1, (size_t)(le - sp - 1));
        if (!d->qname[d->n] || !d->id[d->n]) {
            d->n++;
            return RJQ_ENOMEM;
        }
        if (!rjq__valid_queue_name(d->qname[d->n]) || !rjq__valid_job_ref(d->id[d->n])) {
            d->n++;
            return RJQ_EPROTO;
        }
        d->out[d->n].queue = d->qname[d->n];
        d->out[d->n].id = d->id[d->n];
        d->out[d->n].counted = counted;
        d->out[d->n].policy = policy;
        p = le + 1;
    }
    return d->n == n ? RJQ_OK : RJQ_EPROTO;
}

static int parse_dependents(rjq_client *c, const redisReply *e, char **copy, rjq_dep *list,
                            size_t *n);

static void on_list(rjq_client *c, int status, redisReply *r, void *priv) {
    dread *d = priv;
    /* { list or nil, dependents entry or nil (both: asked, else nil) } */
    if (status == RJQ_OK &&
        (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
         (r->element[0]->type != REDIS_REPLY_NIL && r->element[0]->type != REDIS_REPLY_STRING))) {
        rjq__errmsg(c, "dependencies: unexpected reply");
        status = RJQ_EPROTO;
    }
    if (status == RJQ_OK && d->both) {
        if ((d->dl = malloc(RJQ__DEPENDENTS_SHOWN * sizeof *d->dl)) == NULL) status = RJQ_ENOMEM;
        else status = parse_dependents(c, r->element[1], &d->dcopy, d->dl, &d->nd);
    }
    if (status == RJQ_OK && r->element[0]->type == REDIS_REPLY_STRING) {
        status = parse_list(d, r->element[0]->str, r->element[0]->len);
        if (status == RJQ_EPROTO) rjq__errmsg(c, "dependencies: unexpected list");
        if (status == RJQ_OK) status = rjq__accepting(c) ? send_parts(d) : RJQ_ECANCELED;
    }
    dread_step(d, status);
}

const rjq_dep_outcome *rjq_dep_outcome_get(const rjq_dep_outcome *list, size_t i) {
    return list ? &list[i] : NULL;
}

/* The read of id's dependencies on q (rjq_job_dependencies,
 * rjq_queue_get_dependencies). */
static int read_dependencies(rjq_queue *q, const char *id, rjq_dependencies_cb *cb,
                             rjq_job_deps_cb *both, void *data) {
    rjq_client *c = rjq_queue_get_client(q);
    int rc = rjq__queue_usable(q, "dependencies");
    if (rc != RJQ_OK) return rc;
    dread *d = calloc(1, sizeof *d + strlen(id) + 1);
    if (d == NULL) return RJQ_ENOMEM;
    strcpy(d->id0, id);
    d->c = c;
    d->q = q;
    d->cb = cb;
    d->both = both;
    d->data = data;
    d->pending = 1;
    rc = send_read(q, d->id0, both ? d->id0 : "", NULL, 0, on_list, d);
    if (rc != RJQ_OK) free(d); /* (else send_read's hold of q is d's) */
    return rc;
}

int rjq_job_dependencies(rjq_job *job, rjq_dependencies_cb *cb, void *data) {
    rjq_queue *q = job ? rjq_job_get_queue(job) : NULL;
    if (q == NULL || cb == NULL) return RJQ_EINVAL;
    return read_dependencies(q, rjq_job_get_id(job), cb, NULL, data);
}

int rjq__queue_dependencies_one(rjq_queue *q, const char *id, rjq_dependencies_cb *cb,
                                void *data) {
    return read_dependencies(q, id, cb, NULL, data); /* (shard.c checked q, cb and id) */
}

int rjq__queue_job_deps_one(rjq_queue *q, const char *id, rjq_job_deps_cb *cb, void *data) {
    return read_dependencies(q, id, NULL, cb, data); /* (shard.c checked q, cb and id) */
}

/* ---- dependents ----------------------------------------------------------- */

typedef struct dents {
    rjq_queue *q;
    rjq_dependents_cb *cb;
    void *data;
} dents;

/* The dependents entry e (deps_read.lua: nil, or "<queue> <id>" lines) into
 * list (at most RJQ__DEPENDENTS_SHOWN; *n of them), its strings in *copy
 * (the caller frees it). RJQ_OK, RJQ_EPROTO or RJQ_ENOMEM. */
static int parse_dependents(rjq_client *c, const redisReply *e, char **copy, rjq_dep *list,
                            size_t *n) {
    *n = 0;
    if (e->type != REDIS_REPLY_NIL && e->type != REDIS_REPLY_STRING) {
        rjq__errmsg(c, "dependents: unexpected reply");
        return RJQ_EPROTO;
    }
    if (e->type == REDIS_REPLY_STRING && (*copy = strndup(e->str, e->len)) == NULL)
        return RJQ_ENOMEM;
    for (char *p = *copy, *next; p && *p && *n < RJQ__DEPENDENTS_SHOWN; p = next) {
        next = strchr(p, '\n');
        if (next) *next++ = '\0';
        char *sp = strchr(p, ' ');
        if (sp == NULL) {
            rjq__errmsg(c, "dependents: unexpected entry");
            return RJQ_EPROTO;
        }
        *sp = '\0';
        /* (a batch the job is a member of: "{b}<batch queue> <batch id>") */
        const char *qn = strncmp(p, "{b}", 3) == 0 ? p + 3 : p;
        if (!rjq__valid_queue_name(qn) || !rjq__valid_job_ref(sp + 1)) {
            rjq__errmsg(c, "dependents: unexpected entry");
            return RJQ_EPROTO;
        }
        list[*n].queue = p;
        list[(*n)++].id = sp + 1;
    }
    return RJQ_OK;
}

static void on_dependents(rjq_client *c, int status, redisReply *r, void *priv) {
    dents *d = priv;
    rjq_dep list[RJQ__DEPENDENTS_SHOWN];
    size_t n = 0;
    char *copy = NULL;
    /* { nil, entry or nil }: the entry's "<queue> <id>" lines */
    if (status == RJQ_OK && (r->type != REDIS_REPLY_ARRAY || r->elements != 2)) {
        rjq__errmsg(c, "dependents: unexpected reply");
        status = RJQ_EPROTO;
    }
    if (status == RJQ_OK) status = parse_dependents(c, r->element[1], &copy, list, &n);
    d->cb(c, status, status == RJQ_OK && n ? list : NULL, status == RJQ_OK ? n : 0, d->data);
    free(copy);
    rjq__queue_release(d->q);
    free(d);
}

int rjq__queue_dependents_one(rjq_queue *q, const char *id, rjq_dependents_cb *cb, void *data) {
    /* (shard.c checked q, cb and id) */
    int rc = rjq__queue_usable(q, "dependents");
    if (rc != RJQ_OK) return rc;
    dents *d = malloc(sizeof *d);
    if (d == NULL) return RJQ_ENOMEM;
    d->q = q;
    d->cb = cb;
    d->data = data;
    rc = send_read(q, "", id, NULL, 0, on_dependents, d);
    if (rc != RJQ_OK) free(d);
    return rc;
}

/* Element i of the dependents an rjq_dependents_cb or rjq_job_deps_cb gets (rjq.h "Extensible structs": the library's own
 * stride, whatever sizeof the caller was built with). */
const rjq_dep *rjq_dep_get(const rjq_dep *list, size_t i) {
    return list ? &list[i] : NULL;
}
