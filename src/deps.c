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

#include "check.h"
#include "deps.h"
#include "headers.h"
#include "validate.h"

/* ---- queues by name ---------------------------------------------------- */

/* (deps.h) */
rjq_queue *rjq__deps_queue(rjq_client *c, const char *name, size_t len) {
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

/* ---- release ------------------------------------------------------------ */

/* The finished jobs of one deps_due answer, their dependents' releases in
 * flight: a deps_release call per dependents' queue, then one deps_done
 * for the jobs whose every release went through. */
typedef struct due_job {
    char *id, *list;     /* its id, its dependents entry as read */
    int failed;
} due_job;

typedef struct due {
    rjq_queue *q;        /* the finished jobs' queue */
    int pending;
    size_t n;
    due_job *jobs;
} due;

/* One release of a deps_release call: dependent `id` of the call's queue
 * on dependency `did` of queue `dq`, which ended `outcome` (static). */
typedef struct rel_item {
    size_t job;          /* its finished job in the due (d->jobs) */
    char *id;
    const char *dq, *did, *outcome;
} rel_item;

typedef struct release {
    due *d;              /* NULL: the enqueue's or the resume's own */
    struct add_ctx *a;
    rjq_queue *q;        /* the dependents' queue */
    size_t k;
    rel_item *items;
    int batch;           /* batch.lua's release of one member (k 1) to batch
                          * items[0].id of q, instead of deps_release */
} release;

static void add_step_done(struct add_ctx *a, int status);

static void on_done(rjq_client *c, int status, redisReply *r, void *priv) {
    (void)c, (void)status, (void)r;
    rjq__queue_release(priv);
}

static void due_end(due *d) {
    rjq_client *c = rjq_queue_get_client(d->q);
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, d->q, RJQ__S_DEPS_DONE);
    size_t done = 0;
    for (size_t i = 0; i < d->n; i++) {
        if (d->jobs[i].failed) continue; /* (kept for the sweep) */
        rjq__argv_str(&a, d->jobs[i].id);
        rjq__argv_str(&a, d->jobs[i].list);
        done++;
    }
    if (done && rjq__accepting(c))
        (void)rjq__queue_script(d->q, RJQ__S_DEPS_DONE, RJQ__REQ_RETRY, on_done, d->q, &a);
    else
        rjq__argv_free(&a);
    rjq__queue_release(d->q);
    for (size_t i = 0; i < d->n; i++) {
        free(d->jobs[i].id);
        free(d->jobs[i].list);
    }
    free(d->jobs);
    free(d);
}

static void release_free(release *rl) {
    for (size_t i = 0; i < rl->k; i++) free(rl->items[i].id);
    free(rl->items);
    free(rl);
}

static void on_released(rjq_client *c, int status, redisReply *r, void *priv) {
    release *rl = priv;
    /* deps_release.lua: { code 0..3, more 0/1 } per release */
    if (status == RJQ_OK && (r->type != REDIS_REPLY_ARRAY || r->elements != 2 * rl->k))
        status = RJQ_EPROTO;
    for (size_t i = 0; status == RJQ_OK && i < 2 * rl->k; i += 2) {
        const redisReply *code = r->element[i], *more = r->element[i + 1];
        if (code->type != REDIS_REPLY_INTEGER || code->integer < 0 || code->integer > 3 ||
            more->type != REDIS_REPLY_INTEGER || more->integer < 0 || more->integer > 1)
            status = RJQ_EPROTO;
    }
    if (status == RJQ_EPROTO) rjq__errmsg(c, "deps release: unexpected reply");
    for (size_t i = 0; status == RJQ_OK && i < rl->k && rjq__accepting(c); i++) {
        if (r->element[2 * i + 1]->integer == 1) {
            /* buried by its policy, with dependents of its own */
            const char *id = rl->items[i].id;
            size_t len = strlen(id);
            rjq__deps_notify(rl->q, &id, &len, 1);
        }
    }
    if (rl->d) {
        if (status != RJQ_OK)
            for (size_t i = 0; i < rl->k; i++) rl->d->jobs[rl->items[i].job].failed = 1;
        if (--rl->d->pending == 0) due_end(rl->d);
    }
    if (rl->a) add_step_done(rl->a, status);
    rjq__queue_release(rl->q);
    release_free(rl);
}

/* Send the k releases of rl (to its queue) in one deps_release call;
 * rl is the call's (freed) whatever it returns. */
static int send_releases(release *rl) {
    rjq_queue *q = rl->q;
    rjq__argv a;
    rjq__argv_init(&a);
    if (rl->batch) {
        /* member (dq, did) ended outcome, to batch id of q (batch.c); its
         * reply has deps_release's shape */
        RJQ_ASSERT(rl->k == 1);
        rjq__argv_script_keys(&a, q, RJQ__S_BATCH);
        rjq__argv_str(&a, "release");
        rjq__argv_key(&a, q, RJQ__K_JOB);
        rjq__argv_key(&a, q, RJQ__K_WAKE);
        rjq__argv_str(&a, rl->items[0].id);
        rjq__argv_str(&a, rl->items[0].dq);
        rjq__argv_str(&a, rl->items[0].did);
        rjq__argv_str(&a, rl->items[0].outcome);
        int rc = rjq__queue_script(q, RJQ__S_BATCH, RJQ__REQ_RETRY | RJQ__REQ_DURABLE, on_released,
                                   rl, &a);
        if (rc != RJQ_OK) release_free(rl);
        return rc;
    }
    rjq__argv_script_keys(&a, q, RJQ__S_DEPS_RELEASE);
    rjq__argv_key(&a, q, RJQ__K_JOB);
    rjq__argv_key(&a, q, RJQ__K_WAKE);
    rjq__argv_ll(&a, rjq__queue_dead_max(q));
    for (size_t i = 0; i < rl->k; i++) {
        rjq__argv_str(&a, rl->items[i].id);
        rjq__argv_str(&a, rl->items[i].dq);
        rjq__argv_str(&a, rl->items[i].did);
        rjq__argv_str(&a, rl->items[i].outcome);
    }
    int rc = rjq__queue_script(q, RJQ__S_DEPS_RELEASE, RJQ__REQ_RETRY | RJQ__REQ_DURABLE,
                               on_released, rl, &a);
    if (rc != RJQ_OK) release_free(rl);
    return rc;
}

/* The outcome word as a static string (is_outcome checked it). */
static const char *outcome_word(const char *s, size_t len) {
    static const char *const known[] = {"completed", "dead", "cancelled", "missing"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (len == strlen(known[i]) && memcmp(s, known[i], len) == 0) return known[i];
    return NULL;
}

/* Send deps_release of dependency (dq, did) ended `outcome` to job id of
 * queue q (one release: the enqueue's or the resume's). */
static int send_release(rjq_queue *q, const char *id, size_t idlen, const char *dq,
                        const char *did, size_t didlen, const char *outcome, due *d,
                        struct add_ctx *ac) {
    (void)didlen;
    release *rl = calloc(1, sizeof *rl);
    rel_item *it = rl ? calloc(1, sizeof *it) : NULL;
    const char *word = outcome_word(outcome, strlen(outcome));
    if (it == NULL || word == NULL || (it->id = strndup(id, idlen)) == NULL) {
        free(it);
        free(rl);
        return RJQ_ENOMEM;
    }
    it->dq = dq;
    it->did = did;
    it->outcome = word;
    rl->d = d;
    rl->a = ac;
    rl->q = q;
    rl->k = 1;
    rl->items = it;
    return send_releases(rl);
}

static int is_outcome(const redisReply *r) {
    static const char *const known[] = {"completed", "dead", "cancelled", "missing"};
    if (r->type != REDIS_REPLY_STRING) return 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (r->len == strlen(known[i]) && memcmp(r->str, known[i], r->len) == 0) return 1;
    return 0;
}

/* The releases of a deps_due answer r ({ cursor, (id, outcome,
 * dependents)... }) of q: a deps_release call per dependents' queue (all
 * of its releases), then deps_done for the jobs all of whose releases went
 * through. What fails stays recorded, for the sweep. */
static void release_all(rjq_queue *q, const redisReply *r) {
    rjq_client *c = rjq_queue_get_client(q);
    size_t njobs = (r->elements - 1) / 3;
    due *d = calloc(1, sizeof *d);
    if (d == NULL || (d->jobs = calloc(njobs, sizeof *d->jobs)) == NULL) {
        free(d);
        return;
    }
    d->q = q;
    rjq__queue_hold(q);
    d->pending = 1; /* this call's own, dropped below */
    /* the releases, grouped by the dependents' queue as they are found */
    release **calls = NULL;
    size_t ncalls = 0;
    for (size_t i = 1; i + 2 < r->elements; i += 3) {
        const redisReply *id = r->element[i], *oc = r->element[i + 1], *list = r->element[i + 2];
        if (id->type != REDIS_REPLY_STRING || id->len == 0 || id->len > RJQ_JOB_ID_MAX ||
            !is_outcome(oc) || list->type != REDIS_REPLY_STRING)
            continue; /* (not rjq's: left for nobody) */
        due_job *j = &d->jobs[d->n];
        j->id = strndup(id->str, id->len);
        j->list = strndup(list->str, list->len);
        if (j->id == NULL || j->list == NULL) {
            free(j->id);
            free(j->list);
            continue;
        }
        size_t ji = d->n++;
        const char *outcome = outcome_word(oc->str, oc->len);
        const char *p = list->str, *end = list->str + list->len;
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            const char *le = nl ? nl : end;
            /* "{b}<queue> <id>": batch <id> of <queue> (batch.c; no queue
             * name has a brace), told alone; the others grouped by queue */
            int batch = le - p > 3 && memcmp(p, "{b}", 3) == 0;
            const char *qn = batch ? p + 3 : p;
            const char *sp = memchr(qn, ' ', (size_t)(le - qn));
            rjq_queue *dq = sp && sp > qn && sp + 1 < le ? rjq__deps_queue(c, qn, (size_t)(sp - qn)) : NULL;
            release *rl = NULL;
            for (size_t k = 0; dq && !batch && k < ncalls; k++)
                if (calls[k]->q == dq && !calls[k]->batch) rl = calls[k];
            release **more = dq && rl == NULL ? realloc(calls, (ncalls + 1) * sizeof *calls) : NULL;
            if (more) calls = more;
            if (more && (rl = calloc(1, sizeof *rl)) != NULL) {
                rl->d = d;
                rl->q = dq;
                rl->batch = batch;
                calls[ncalls++] = rl;
            }
            rel_item *items = rl ? realloc(rl->items, (rl->k + 1) * sizeof *items) : NULL;
            char *did = items ? strndup(sp + 1, (size_t)(le - sp - 1)) : NULL;
            if (items) rl->items = items;
            if (did == NULL) {
                j->failed = 1; /* (kept for the sweep) */
            } else {
                items[rl->k++] = (rel_item){ji, did, rjq_queue_get_name(q), j->id, outcome};
            }
            p = le + 1;
        }
    }
    for (size_t k = 0; k < ncalls; k++) {
        release *rl = calls[k];
        int rc = RJQ_ENOMEM;
        d->pending++;
        if (rl->k == 0) release_free(rl);
        else rc = send_releases(rl);
        if (rc != RJQ_OK) {
            d->pending--;
            for (size_t i = 0; i < d->n; i++) d->jobs[i].failed = 1; /* (the sweep repeats them) */
        }
    }
    free(calls);
    if (--d->pending == 0) due_end(d);
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
    if (status == RJQ_OK && r->elements > 1 && rjq__accepting(c)) release_all(q, r);
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
    if (rjq__queue_script(q, RJQ__S_DEPS_DUE, RJQ__REQ_RETRY, on_due, dc, &a) != RJQ_OK) free(dc);
}

void rjq__deps_sweep(rjq_queue *q) {
    if (!rjq__accepting(rjq_queue_get_client(q)) || rjq__queue_front(q)) return;
    send_due(q, 1, "0", 1, NULL, NULL, 0);
}

void rjq__deps_notify(rjq_queue *q, const char *const *ids, const size_t *lens, size_t n) {
    if (n == 0 || !rjq__accepting(rjq_queue_get_client(q))) return;
    send_due(q, 0, "0", 1, ids, lens, n);
}

/* ---- resume ------------------------------------------------------------- */

/* One registration the resume sweep makes again: dependent id of q on
 * dependency did of queue dq. */
typedef struct rewatch {
    rjq_queue *q, *on;
    char *id, *dq, *did;
} rewatch;

static void rewatch_free(rewatch *w) {
    rjq__queue_release(w->q);
    rjq__queue_release(w->on);
    free(w->id);
    free(w->dq);
    free(w->did);
    free(w);
}

static void on_rewatched(rjq_client *c, int status, redisReply *r, void *priv) {
    rewatch *w = priv;
    /* deps_watch.lua: 'waiting' (registered) or how it ended: counted */
    if (status == RJQ_OK && is_outcome(r) && rjq__accepting(c))
        (void)send_release(w->q, w->id, strlen(w->id), w->dq, w->did, strlen(w->did), r->str, NULL,
                           NULL);
    rewatch_free(w);
}

static void send_rewatch(rjq_queue *q, const char *id, size_t idlen, const char *dq, size_t dqlen,
                         const char *did, size_t didlen) {
    rjq_client *c = rjq_queue_get_client(q);
    rjq_queue *on = rjq__deps_queue(c, dq, dqlen);
    rewatch *w = on ? calloc(1, sizeof *w) : NULL;
    if (w == NULL) return; /* (the next sweep tries again) */
    w->q = q;
    w->on = on;
    w->id = strndup(id, idlen);
    w->dq = strndup(dq, dqlen);
    w->did = strndup(did, didlen);
    if (w->id == NULL || w->dq == NULL || w->did == NULL || !rjq__valid_job_ref(w->did)) {
        free(w->id);
        free(w->dq);
        free(w->did);
        free(w);
        return;
    }
    rjq__argv v;
    rjq__argv_init(&v);
    rjq__argv_script_keys(&v, on, RJQ__S_DEPS_WATCH);
    rjq__argv_str(&v, w->did);
    rjq__argv_str(&v, rjq_queue_get_name(q));
    rjq__argv_str(&v, w->id);
    if (rjq__queue_script(on, RJQ__S_DEPS_WATCH, RJQ__REQ_RETRY, on_rewatched, w, &v) != RJQ_OK) {
        free(w->id);
        free(w->dq);
        free(w->did);
        free(w);
        return;
    }
    rjq__queue_hold(q); /* (on: rjq__queue_script's hold, released with w) */
}

static void on_resume(rjq_client *c, int status, redisReply *r, void *priv) {
    rjq_queue *q = priv;
    /* deps_resume.lua: { id, pending lines, ... } */
    if (status == RJQ_OK && (r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0)) {
        rjq__errmsg(c, "deps resume: unexpected reply");
        status = RJQ_EPROTO;
    }
    for (size_t i = 0; status == RJQ_OK && i + 1 < r->elements && rjq__accepting(c); i += 2) {
        const redisReply *id = r->element[i], *list = r->element[i + 1];
        if (id->type != REDIS_REPLY_STRING || id->len == 0 || id->len > RJQ_JOB_ID_MAX ||
            list->type != REDIS_REPLY_STRING)
            continue;
        const char *p = list->str, *end = list->str + list->len;
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            const char *le = nl ? nl : end;
            const char *sp = memchr(p, ' ', (size_t)(le - p));
            if (sp && sp > p && sp + 1 < le)
                send_rewatch(q, id->str, id->len, p, (size_t)(sp - p), sp + 1,
                             (size_t)(le - sp - 1));
            p = le + 1;
        }
    }
    rjq__queue_release(q);
}

void rjq__deps_resume(rjq_queue *q) {
    if (!rjq__accepting(rjq_queue_get_client(q)) || rjq__queue_front(q)) return;
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_DEPS_RESUME);
    rjq__argv_ll(&a, 100);
    (void)rjq__queue_script(q, RJQ__S_DEPS_RESUME, 0, on_resume, q, &a);
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
                                    strlen(a->did[w->i]), r->str, NULL, a)
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
        rjq_queue *on = rjq__accepting(c) ? rjq__deps_queue(c, a->dq[i], strlen(a->dq[i])) : NULL;
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
        int rc = rjq__queue_script(on, RJQ__S_DEPS_WATCH, RJQ__REQ_RETRY, on_watched, w, &v);
        if (rc != RJQ_OK) {
            free(w);
            status = rc;
            break;
        }
        a->pending++;
    }
    add_step_done(a, status);
}

rjq_dep *rjq__deps_dup(const rjq_dep *a, size_t n) {
    size_t bytes = n * sizeof *a;
    for (size_t i = 0; i < n; i++) bytes += strlen(a[i].queue) + strlen(a[i].id) + 2;
    rjq_dep *out = malloc(bytes ? bytes : 1);
    if (out == NULL) return NULL;
    char *p = (char *)(out + n);
    for (size_t i = 0; i < n; i++) {
        size_t lq = strlen(a[i].queue) + 1, li = strlen(a[i].id) + 1;
        out[i].queue = memcpy(p, a[i].queue, lq);
        out[i].id = memcpy(p + lq, a[i].id, li);
        p += lq + li;
    }
    return out;
}

int rjq__deps_check(rjq_client *c, const rjq_job_options *o) {
    if (o->after == NULL || o->n_after == 0 || o->n_after > RJQ_AFTER_MAX || o->debounce ||
        o->after_policy < RJQ_AFTER_FAIL || o->after_policy > RJQ_AFTER_IGNORE ||
        (o->id != NULL && !rjq__valid_job_id(o->id))) {
        rjq__errmsg(c, "enqueue: bad dependencies (after: 1..%d, policy, no debounce)",
                    RJQ_AFTER_MAX);
        return RJQ_EINVAL;
    }
    for (size_t i = 0; i < o->n_after; i++) {
        if (!rjq__valid_queue_name(o->after[i].queue) || !rjq__valid_job_ref(o->after[i].id)) {
            rjq__errmsg(c, "enqueue: dependency %zu: bad queue name or job id", i);
            return RJQ_EINVAL;
        }
    }
    return RJQ_OK;
}

int rjq__deps_enqueue(rjq_queue *q, const void *payload, size_t len, const rjq_job_options *o,
                      rjq_enqueue_cb *cb, void *data) {
    rjq_client *c = rjq_queue_get_client(q);
    int rc = rjq__deps_check(c, o);
    if (rc != RJQ_OK) return rc;
    rc = rjq__queue_refuse_front(q, "enqueue with dependencies");
    if (rc != RJQ_OK) return rc;
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    rjq_job_options rest = *o; /* the options the enqueue script knows */
    rest.after = NULL;
    rest.n_after = 0;
    rest.after_policy = 0;
    char opts[RJQ__OPTS_MAX];
    if (rjq__encode_job_options(&rest, opts) != RJQ_OK) return RJQ_EINVAL;
    char why[160]; /* (headers.h: their text follows the options') */
    if (rjq__headers_options_check(o, opts, why, sizeof why) != RJQ_OK) {
        rjq__errmsg(c, "%s", why);
        return RJQ_EINVAL;
    }
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
    char *t = NULL; /* with headers: the options, '\n', their text (headers.h) */
    if (o->nheaders == 0) {
        rjq__argv_str(&v, opts);
    } else {
        size_t tlen;
        t = rjq__headers_options_text(opts, o->headers, o->nheaders, &tlen);
        if (t == NULL) {
            rjq__argv_free(&v);
            add_free(a);
            return RJQ_ENOMEM;
        }
        rjq__argv_add(&v, t, tlen);
    }
    rjq__argv_str(&v, policies[o->after_policy]);
    for (size_t i = 0; i < a->n; i++) {
        rjq__argv_str(&v, a->dq[i]);
        rjq__argv_str(&v, a->did[i]);
    }
    rjq__enter(c);
    rjq__queue_register(q);
    /* a job with a caller's id may be sent again (deps_add reports it
     * existing and the registrations follow anyway); a numbered one not */
    rc = rjq__queue_script(q, RJQ__S_DEPS_ADD, (o->id ? RJQ__REQ_RETRY : 0) | RJQ__REQ_DURABLE,
                           on_added, a, &v);
    rjq__leave(c);
    free(t);
    if (rc != RJQ_OK) add_free(a);
    return rc;
}
