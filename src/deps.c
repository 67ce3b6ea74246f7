/*
 * Job dependencies (rjq.h "Dependencies"; scripts deps_*.lua). Every
 * script touches one queue's slot, so a dependency crosses queues (and
 * masters) in steps the client carries, each idempotent:
 *   enqueue:  deps_add on the job's queue (the job, waiting, each
 *             dependency pending), then deps_watch on each dependency's
 *             queue; a dependency that had finished is answered at once,
 *             and counted with deps_release on the job's queue;
 *   finish:   the finishing script says the job had dependents (job.c,
 *             admin.c call rjq__deps_notify); deps_due reads them,
 *             deps_release goes to each dependent's queue, and once every
 *             one went through, deps_done drops the list.
 * A release that fails leaves the list in place, as does a finisher that
 * dies before it told the dependents: the sweep (rjq__deps_sweep, from the
 * queue's periodic visit) finds it and sends the releases again, which
 * change nothing already counted.
 */
#include <stdlib.h>
#include <string.h>

#include "deps.h"
#include "validate.h"

/* ---- queues by name ---------------------------------------------------- */

/* The client's handle of queue `name` (len bytes), opened when it has
 * none (the library's own handle, freed with the client). NULL when it is
 * no queue name or out of memory. */
static rjq_queue *queue_named(rjq_client *c, const char *name, size_t len) {
    for (rjq_queue *q = rjq__queue_first(c); q; q = rjq__queue_next(q)) {
        const char *n = rjq_queue_get_name(q);
        if (!rjq__queue_closed(q) && !rjq__queue_front(q) && strlen(n) == len &&
            memcmp(n, name, len) == 0)
            return q;
    }
    char *copy = strndup(name, len);
    rjq_queue *q = NULL;
    if (copy && rjq__valid_queue_name(copy)) rjq__queue_open(c, copy, NULL, &q);
    free(copy);
    return q;
}

static int send_script(rjq_queue *q, int script, int flags, rjq__reply_fn *fn, void *priv, rjq__argv *a) {
    int rc = a->oom ? RJQ_ENOMEM
                    : rjq__script(rjq_queue_get_client(q), script, flags, fn, priv, a->n, a->v,
                                  a->len);
    rjq__argv_free(a);
    if (rc == RJQ_OK) rjq__queue_hold(q);
    return rc;
}

/* ---- release ------------------------------------------------------------ */

/* One job of a deps_due answer: its dependents' releases in flight. */
typedef struct due {
    rjq_queue *q;        /* the finished job's queue */
    int pending, failed;
    char *id, *list;     /* its id, its dependents entry as read */
} due;

typedef struct release {
    due *d;              /* NULL: the enqueue's own release (see add_ctx) */
    struct add_ctx *a;
    rjq_queue *q;        /* the dependent's queue */
    char *id;            /* the dependent's id */
} release;

static void add_step_done(struct add_ctx *a, int status);

static void on_done(rjq_client *c, int status, redisReply *r, void *priv) {
    (void)c, (void)status, (void)r;
    rjq__queue_release(priv);
}

static void due_end(due *d) {
    rjq_client *c = rjq_queue_get_client(d->q);
    if (!d->failed && rjq__accepting(c)) {
        rjq__argv a;
        rjq__argv_init(&a);
        rjq__argv_script_keys(&a, d->q, RJQ__S_DEPS_DONE);
        rjq__argv_str(&a, d->id);
        rjq__argv_str(&a, d->list);
        (void)send_script(d->q, RJQ__S_DEPS_DONE, RJQ__REQ_RETRY, on_done, d->q, &a);
    }
    rjq__queue_release(d->q);
    free(d->id);
    free(d->list);
    free(d);
}

static void on_released(rjq_client *c, int status, redisReply *r, void *priv) {
    release *rl = priv;
    /* deps_release.lua: { code 0..3, more 0/1 } */
    if (status == RJQ_OK &&
        (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
         r->element[0]->type != REDIS_REPLY_INTEGER || r->element[0]->integer < 0 ||
         r->element[0]->integer > 3 || r->element[1]->type != REDIS_REPLY_INTEGER ||
         r->element[1]->integer < 0 || r->element[1]->integer > 1)) {
        rjq__errmsg(c, "deps release: unexpected reply");
        status = RJQ_EPROTO;
    }
    if (status == RJQ_OK && r->element[1]->integer == 1 && rjq__accepting(c)) {
        /* buried by its policy, with dependents of its own */
        const char *id = rl->id;
        size_t len = strlen(id);
        rjq__deps_notify(rl->q, &id, &len, 1);
    }
    if (rl->d) {
        if (status != RJQ_OK) rl->d->failed = 1;
        if (--rl->d->pending == 0) due_end(rl->d);
    }
    if (rl->a) add_step_done(rl->a, status);
    rjq__queue_release(rl->q);
    free(rl->id);
    free(rl);
}

/* Send deps_release of dependency (dq, did) ended `outcome` to job id of
 * queue q; with batch, batch.lua's release of member (dq, did) to batch id
 * of q instead (its reply has deps_release's shape). */
static int send_release(rjq_queue *q, const char *id, size_t idlen, const char *dq,
                        const char *did, size_t didlen, const char *outcome, due *d,
                        struct add_ctx *ac, int batch) {
    release *rl = calloc(1, sizeof *rl);
    if (rl == NULL || (rl->id = strndup(id, idlen)) == NULL) {
        free(rl);
        return RJQ_ENOMEM;
    }
    rl->d = d;
    rl->a = ac;
    rl->q = q;
    rjq__argv a;
    rjq__argv_init(&a);
    if (batch) {
        rjq__argv_script_keys(&a, q, RJQ__S_BATCH);
        rjq__argv_str(&a, "release");
        rjq__argv_key(&a, q, RJQ__K_JOB);
        rjq__argv_key(&a, q, RJQ__K_WAKE);
        rjq__argv_add(&a, id, idlen);
        rjq__argv_str(&a, dq);
        rjq__argv_add(&a, did, didlen);
        rjq__argv_str(&a, outcome);
        int rc = send_script(q, RJQ__S_BATCH, RJQ__REQ_RETRY | RJQ__REQ_DURABLE, on_released, rl, &a);
        if (rc != RJQ_OK) {
            free(rl->id);
            free(rl);
        }
        return rc;
    }
    rjq__argv_script_keys(&a, q, RJQ__S_DEPS_RELEASE);
    rjq__argv_key(&a, q, RJQ__K_JOB);
    rjq__argv_key(&a, q, RJQ__K_WAKE);
    rjq__argv_add(&a, id, idlen);
    rjq__argv_str(&a, dq);
    rjq__argv_add(&a, did, didlen);
    rjq__argv_str(&a, outcome);
    rjq__argv_ll(&a, rjq__queue_dead_max(q));
    int rc = send_script(q, RJQ__S_DEPS_RELEASE, RJQ__REQ_RETRY | RJQ__REQ_DURABLE, on_released, rl, &a);
    if (rc != RJQ_OK) {
        free(rl->id);
        free(rl);
    }
    return rc;
}

/* Release the dependents (list: "<queue> <id>" lines) of job `id` of q,
 * which ended `outcome`. */
static void release_all(rjq_queue *q, const redisReply *id, const char *outcome,
                        const redisReply *list) {
    rjq_client *c = rjq_queue_get_client(q);
    due *d = calloc(1, sizeof *d);
    if (d == NULL || (d->id = strndup(id->str, id->len)) == NULL ||
        (d->list = strndup(list->str, list->len)) == NULL) {
        if (d) free(d->id);
        free(d);
        return;
    }
    d->q = q;
    rjq__queue_hold(q);
    d->pending = 1; /* this loop's own, dropped below */
    const char *p = list->str, *end = list->str + list->len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        /* "{b}<queue> <id>": batch <id> of <queue> (batch.c; no queue
         * name has a brace) */
        int batch = le - p > 3 && memcmp(p, "{b}", 3) == 0;
        const char *qn = batch ? p + 3 : p;
        const char *sp = memchr(qn, ' ', (size_t)(le - qn));
        rjq_queue *dq = sp && sp > qn && sp + 1 < le ? queue_named(c, qn, (size_t)(sp - qn)) : NULL;
        if (dq == NULL) {
            d->failed = 1; /* (kept for the sweep) */
        } else {
            d->pending++;
            if (send_release(dq, sp + 1, (size_t)(le - sp - 1), rjq_queue_get_name(q), id->str,
                             id->len, outcome, d, NULL, batch) != RJQ_OK) {
                d->pending--;
                d->failed = 1;
            }
        }
        p = le + 1;
    }
    if (--d->pending == 0) due_end(d);
}

static int is_outcome(const redisReply *r) {
    static const char *const known[] = {"completed", "dead", "cancelled", "missing"};
    if (r->type != REDIS_REPLY_STRING) return 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (r->len == strlen(known[i]) && memcmp(r->str, known[i], r->len) == 0) return 1;
    return 0;
}

static void send_due(rjq_queue *q, int scan, const char *cursor, size_t clen,
                     const char *const *ids, const size_t *lens, size_t n);

typedef struct due_call {
    rjq_queue *q;
    int scan;            /* the sweep's scan (else the ids of a finish) */
} due_call;

static void on_due(rjq_client *c, int status, redisReply *r, void *priv) {
    due_call *dc = priv;
    rjq_queue *q = dc->q;
    int scan = dc->scan;
    free(dc);
    /* deps_due.lua: { cursor, (id, outcome, dependents)... } */
    if (status == RJQ_OK &&
        (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || (r->elements - 1) % 3 != 0)) {
        rjq__errmsg(c, "deps due: unexpected reply");
        status = RJQ_EPROTO;
    }
    for (size_t i = 1; status == RJQ_OK && i + 2 < r->elements && rjq__accepting(c); i += 3) {
        const redisReply *id = r->element[i], *oc = r->element[i + 1], *list = r->element[i + 2];
        if (id->type != REDIS_REPLY_STRING || id->len == 0 || id->len > RJQ_JOB_ID_MAX ||
            !is_outcome(oc) || list->type != REDIS_REPLY_STRING)
            continue; /* (not rjq's: left for nobody) */
        release_all(q, id, oc->str, list);
    }
    const redisReply *cur = status == RJQ_OK ? r->element[0] : NULL;
    if (scan && cur && cur->type == REDIS_REPLY_STRING && cur->len > 0 && cur->len < 24 &&
        strspn(cur->str, "0123456789") == cur->len && !(cur->len == 1 && cur->str[0] == '0') &&
        rjq__accepting(c))
        send_due(q, 1, cur->str, cur->len, NULL, NULL, 0); /* the next page */
    rjq__queue_release(q);
}

static void send_due(rjq_queue *q, int scan, const char *cursor, size_t clen,
                     const char *const *ids, const size_t *lens, size_t n) {
    due_call *dc = malloc(sizeof *dc);
    if (dc == NULL) return;
    dc->q = q;
    dc->scan = scan;
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_DEPS_DUE);
    rjq__argv_str(&a, scan ? "scan" : "");
    rjq__argv_add(&a, cursor, clen);
    for (size_t i = 0; i < n; i++) rjq__argv_add(&a, ids[i], lens[i]);
    if (send_script(q, RJQ__S_DEPS_DUE, RJQ__REQ_RETRY, on_due, dc, &a) != RJQ_OK) free(dc);
}

void rjq__deps_sweep(rjq_queue *q) {
    if (!rjq__accepting(rjq_queue_get_client(q)) || rjq__queue_front(q)) return;
    send_due(q, 1, "0", 1, NULL, NULL, 0);
}

void rjq__deps_notify(rjq_queue *q, const char *const *ids, const size_t *lens, size_t n) {
    if (n == 0 || !rjq__accepting(rjq_queue_get_client(q))) return;
    send_due(q, 0, "0", 1, ids, lens, n);
}

/* ---- enqueue ------------------------------------------------------------ */

typedef struct add_ctx {
    rjq_queue *q;
    rjq_enqueue_cb *cb;
    void *data;
    int pending, status;
    rjq_enqueued out;
    char *id;
    size_t n;
    char **dq, **did;    /* the dependencies (copies) */
} add_ctx;

static void add_free(add_ctx *a) {
    for (size_t i = 0; i < a->n; i++) {
        free(a->dq[i]);
        free(a->did[i]);
    }
    free(a->dq);
    free(a->did);
    free(a->id);
    free(a);
}

static void add_step_done(add_ctx *a, int status) {
    if (status != RJQ_OK && a->status == RJQ_OK) a->status = status;
    if (--a->pending > 0) return;
    rjq_client *c = rjq_queue_get_client(a->q);
    if (a->cb) a->cb(c, a->status, a->status == RJQ_OK ? &a->out : NULL, 1, a->data);
    rjq__queue_release(a->q);
    add_free(a);
}

typedef struct watch_ctx {
    add_ctx *a;
    size_t i;
    rjq_queue *on;       /* the dependency's queue */
} watch_ctx;

static void on_watched(rjq_client *c, int status, redisReply *r, void *priv) {
    watch_ctx *w = priv;
    add_ctx *a = w->a;
    /* deps_watch.lua: 'waiting' or how it ended */
    int waiting = 0;
    if (status == RJQ_OK) {
        waiting = r->type == REDIS_REPLY_STRING && r->len == 7 && memcmp(r->str, "waiting", 7) == 0;
        if (!waiting && !is_outcome(r)) {
            rjq__errmsg(c, "deps watch: unexpected reply");
            status = RJQ_EPROTO;
        }
    }
    if (status == RJQ_OK && !waiting) {
        /* finished before it was registered: counted now */
        a->pending++;
        int rc = rjq__accepting(c)
                     ? send_release(a->q, a->id, strlen(a->id), a->dq[w->i], a->did[w->i],
                                    strlen(a->did[w->i]), r->str, NULL, a, 0)
                     : RJQ_ECLOSED;
        if (rc != RJQ_OK) {
            a->pending--;
            status = rc;
        }
    }
    rjq__queue_release(w->on);
    free(w);
    add_step_done(a, status);
}

static void on_added(rjq_client *c, int status, redisReply *r, void *priv) {
    add_ctx *a = priv;
    /* deps_add.lua: { id, existed } */
    if (status == RJQ_OK &&
        (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
         r->element[0]->type != REDIS_REPLY_STRING || r->element[0]->len == 0 ||
         r->element[0]->len > RJQ_JOB_ID_MAX || r->element[1]->type != REDIS_REPLY_INTEGER ||
         r->element[1]->integer < 0 || r->element[1]->integer > 1)) {
        rjq__errmsg(c, "enqueue: unexpected reply");
        status = RJQ_EPROTO;
    }
    if (status == RJQ_OK) {
        free(a->id);
        a->id = strndup(r->element[0]->str, r->element[0]->len);
        if (a->id == NULL) status = RJQ_ENOMEM;
        a->out.id = a->id;
        a->out.existed = (int)r->element[1]->integer;
    }
    /* registration with each dependency's queue (also for a job that
     * existed: a call sent again after a lost reply registers it then;
     * registering twice changes nothing) */
    for (size_t i = 0; status == RJQ_OK && i < a->n; i++) {
        rjq_queue *on = rjq__accepting(c) ? queue_named(c, a->dq[i], strlen(a->dq[i])) : NULL;
        watch_ctx *w = on ? malloc(sizeof *w) : NULL;
        if (w == NULL) {
            status = on ? RJQ_ENOMEM : RJQ_ECLOSED;
            break;
        }
        w->a = a;
        w->i = i;
        w->on = on;
        rjq__argv v;
        rjq__argv_init(&v);
        rjq__argv_script_keys(&v, on, RJQ__S_DEPS_WATCH);
        rjq__argv_str(&v, a->did[i]);
        rjq__argv_str(&v, rjq_queue_get_name(a->q));
        rjq__argv_str(&v, a->id);
        int rc = send_script(on, RJQ__S_DEPS_WATCH, RJQ__REQ_RETRY, on_watched, w, &v);
        if (rc != RJQ_OK) {
            free(w);
            status = rc;
            break;
        }
        a->pending++;
    }
    add_step_done(a, status);
}

int rjq__deps_enqueue(rjq_queue *q, const void *payload, size_t len, const rjq_job_options *o,
                      rjq_enqueue_cb *cb, void *data) {
    rjq_client *c = rjq_queue_get_client(q);
    if (o->after == NULL || o->n_after == 0 || o->n_after > RJQ_AFTER_MAX || o->debounce ||
        o->after_policy < RJQ_AFTER_FAIL || o->after_policy > RJQ_AFTER_IGNORE ||
        (o->id != NULL && !rjq__valid_job_id(o->id))) {
        rjq__errmsg(c, "enqueue: bad dependencies (after: 1..%d, policy, no debounce)",
                    RJQ_AFTER_MAX);
        return RJQ_EINVAL;
    }
    for (size_t i = 0; i < o->n_after; i++) {
        if (!rjq__valid_queue_name(o->after[i].queue) || !rjq__valid_job_id(o->after[i].id)) {
            rjq__errmsg(c, "enqueue: dependency %zu: bad queue name or job id", i);
            return RJQ_EINVAL;
        }
    }
    int rc = rjq__queue_refuse_front(q, "enqueue with dependencies");
    if (rc != RJQ_OK) return rc;
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    rjq_job_options rest = *o; /* the options the enqueue script knows */
    rest.after = NULL;
    rest.n_after = 0;
    rest.after_policy = 0;
    char opts[RJQ__OPTS_MAX];
    if (rjq__encode_job_options(&rest, opts) != RJQ_OK) return RJQ_EINVAL;
    add_ctx *a = calloc(1, sizeof *a);
    if (a == NULL) return RJQ_ENOMEM;
    a->q = q;
    a->cb = cb;
    a->data = data;
    a->pending = 1;
    a->dq = calloc(o->n_after, sizeof *a->dq);
    a->did = calloc(o->n_after, sizeof *a->did);
    rc = a->dq && a->did ? RJQ_OK : RJQ_ENOMEM;
    for (size_t i = 0; rc == RJQ_OK && i < o->n_after; i++, a->n++) {
        a->dq[i] = strdup(o->after[i].queue);
        a->did[i] = strdup(o->after[i].id);
        if (a->dq[i] == NULL || a->did[i] == NULL) rc = RJQ_ENOMEM;
    }
    if (rc != RJQ_OK) {
        if (a->dq && a->did) a->n++; /* (the pair that failed) */
        add_free(a);
        return rc;
    }
    static const char *const policies[] = {"fail", "run", "ignore"};
    rjq__argv v;
    rjq__argv_init(&v);
    rjq__argv_script_keys(&v, q, RJQ__S_DEPS_ADD);
    rjq__argv_str(&v, o->id ? o->id : "");
    rjq__argv_add(&v, payload ? payload : "", len);
    rjq__argv_str(&v, opts);
    rjq__argv_str(&v, policies[o->after_policy]);
    for (size_t i = 0; i < a->n; i++) {
        rjq__argv_str(&v, a->dq[i]);
        rjq__argv_str(&v, a->did[i]);
    }
    rjq__enter(c);
    rjq__queue_register(q);
    /* a job with a caller's id may be sent again (deps_add reports it
     * existing and the registrations follow anyway); a numbered one not */
    rc = send_script(q, RJQ__S_DEPS_ADD, (o->id ? RJQ__REQ_RETRY : 0) | RJQ__REQ_DURABLE, on_added, a,
              &v);
    rjq__leave(c);
    if (rc != RJQ_OK) add_free(a);
    return rc;
}
