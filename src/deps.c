/*
 * Job dependencies (rjq.h "Dependencies"; scripts deps_*.lua). Every
 * script touches one queue's slot, so a dependency crosses queues (and
 * masters) in steps the client carries, each idempotent:
 *   enqueue:  deps_add on the job's queue (the job, waiting, each
 *             dependency pending), then deps_watch on each dependency's
 *             queue; a dependency that had finished is answered at once,
 *             and counted with deps_release on the job's queue. Both are
 *             gathered (the feature's state): the jobs enqueued in one
 *             loop turn go in one deps_add per queue, the registrations
 *             in one deps_watch per dependency's queue (rjq__deps_watch,
 *             batch members' too), at the end of the turn or before the
 *             client's next request (before_send);
 *   finish:   a completion's reply carries its jobs' dependents (job.c
 *             calls rjq__deps_release); the other finishing scripts say
 *             the job had dependents (job.c, admin.c call
 *             rjq__deps_notify) and deps_due reads them. deps_release goes
 *             to each dependent's queue (batch.lua's release to a batch:
 *             rjq__batch_call), and once every one went through,
 *             deps_done drops the lists.
 * A release that fails leaves the list in place, as does a finisher that
 * dies before it told the dependents: the sweep (rjq__deps_sweep, from the
 * queue's periodic visit) finds it and sends the releases again, which
 * change nothing already counted. The finishing script indexes such a job
 * (depsfin; a completion call's several such jobs one member in depsfinc,
 * which older builds never read: lib.lua DEPSFIN_MEMBER; until deps_done),
 * so the sweep pages through those only (depsfin, then depsfinc: a cursor
 * from 10^15 on, deps_due.lua), and
 * the visit sends none while the index is empty (reclaim.lua). The retention sweep keeps a completed
 * job's record while its list is there (lib.lua sweep_completed).
 */
#include <stdlib.h>
#include <string.h>

#include "batch_call.h"
#include "check.h"
#include "deps.h"
#include "enqueue.h"
#include "gather.h"
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
    int ended;           /* it ended dead or cancelled (kept past the cap
                          * until now, maybe: deps_trim after deps_done) */
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
    size_t done = 0, ended = 0;
    for (size_t i = 0; i < d->n; i++) {
        if (d->jobs[i].failed) continue; /* (kept for the sweep) */
        rjq__argv_str(&a, d->jobs[i].id);
        rjq__argv_str(&a, d->jobs[i].list);
        done++;
        ended += d->jobs[i].ended;
    }
    if (done && rjq__accepting(c))
        (void)rjq__queue_script(d->q, RJQ__S_DEPS_DONE, RJQ__REQ_RETRY, on_done, d->q, &a);
    else
        rjq__argv_free(&a);
    if (done && ended && rjq__accepting(c)) {
        /* a dead or cancelled job kept past the cap for its dependents
         * goes now that they are released (after deps_done, in order) */
        rjq__argv t;
        rjq__argv_init(&t);
        rjq__argv_script_keys(&t, d->q, RJQ__S_DEPS_TRIM);
        rjq__argv_ll(&t, rjq__queue_dead_max(d->q));
        (void)rjq__queue_script(d->q, RJQ__S_DEPS_TRIM, RJQ__REQ_RETRY, on_done, d->q, &t);
    }
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
    if (rl->batch) {
        /* member (dq, did) ended outcome, to batch id of q (batch.c); its
         * reply has deps_release's shape */
        RJQ_ASSERT(rl->k == 1);
        const char *args[] = {rl->items[0].dq, rl->items[0].did, rl->items[0].outcome};
        size_t lens[] = {strlen(args[0]), strlen(args[1]), strlen(args[2])};
        int rc = rjq__batch_call(q, "release", rl->items[0].id, RJQ__REQ_RETRY | RJQ__REQ_DURABLE,
                                 on_released, rl, 3, args, lens);
        if (rc != RJQ_OK) release_free(rl);
        return rc;
    }
    rjq__argv a;
    rjq__argv_init(&a);
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

/* The releases of the n finished jobs f of q: a deps_release call per
 * dependents' queue (all of its releases), then deps_done for the jobs
 * all of whose releases went through. What fails stays recorded, for the
 * sweep. */
void rjq__deps_release(rjq_queue *q, const rjq__deps_finished *f, size_t njobs) {
    rjq_client *c = rjq_queue_get_client(q);
    if (njobs == 0 || !rjq__accepting(c)) return;
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
    for (size_t i = 0; i < njobs; i++) {
        const char *outcome = outcome_word(f[i].outcome, strlen(f[i].outcome));
        if (f[i].idlen == 0 || f[i].idlen > RJQ_JOB_ID_MAX || outcome == NULL || f[i].llen == 0)
            continue; /* (not rjq's, or no dependents left: nothing to do) */
        due_job *j = &d->jobs[d->n];
        j->id = strndup(f[i].id, f[i].idlen);
        j->list = strndup(f[i].list, f[i].llen);
        if (j->id == NULL || j->list == NULL) {
            free(j->id);
            free(j->list);
            continue;
        }
        j->ended = outcome[0] == 'd' || (outcome[0] == 'c' && outcome[1] == 'a'); /* dead, cancelled */
        size_t ji = d->n++;
        const char *p = j->list, *end = j->list + f[i].llen;
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
    size_t n = status == RJQ_OK ? (r->elements - 1) / 3 : 0, k = 0;
    rjq__deps_finished *f = n ? malloc(n * sizeof *f) : NULL;
    for (size_t i = 1; f && i + 2 < r->elements; i += 3) {
        const redisReply *id = r->element[i], *oc = r->element[i + 1], *list = r->element[i + 2];
        if (id->type != REDIS_REPLY_STRING || !is_outcome(oc) || list->type != REDIS_REPLY_STRING)
            continue; /* (not rjq's: left for nobody) */
        f[k++] = (rjq__deps_finished){id->str, id->len, outcome_word(oc->str, oc->len), list->str,
                                      list->len};
    }
    if (k && rjq__accepting(c)) rjq__deps_release(q, f, k);
    free(f);
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

/* (deps.h) */
int rjq__deps_entries_ok(const redisReply *r, size_t first) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements < first || (r->elements - first) % 2 != 0) return 0;
    for (size_t i = first; i + 1 < r->elements; i += 2)
        if (r->element[i]->type != REDIS_REPLY_STRING || r->element[i]->len == 0 ||
            r->element[i]->len > RJQ_JOB_ID_MAX || r->element[i + 1]->type != REDIS_REPLY_STRING)
            return 0;
    return 1;
}

/* (deps.h) */
void rjq__deps_release_entries(rjq_queue *q, const redisReply *r, size_t first, size_t nown,
                               const char *outcome) {
    size_t n = (r->elements - first) / 2;
    /* all of them in one due (its deps_done names exactly the call's ids,
     * whose depsfinc member it removes whole: lib.lua DEPSFIN_MEMBER); 64
     * at a time when that allocation fails (the member left to the sweep) */
    rjq__deps_finished small[64], *f = n > 64 ? malloc(n * sizeof *f) : NULL;
    size_t step = f ? n : 64;
    if (f == NULL) f = small;
    for (size_t i = 0; i < n; i += step) {
        size_t k = n - i < step ? n - i : step;
        for (size_t j = 0; j < k; j++) {
            const redisReply *id = r->element[first + 2 * (i + j)];
            const redisReply *list = r->element[first + 2 * (i + j) + 1];
            f[j] = (rjq__deps_finished){id->str, id->len, i + j < nown ? outcome : "dead", list->str,
                                        list->len};
        }
        rjq__deps_release(q, f, k);
    }
    if (f != small) free(f);
}

void rjq__deps_notify(rjq_queue *q, const char *const *ids, const size_t *lens, size_t n) {
    if (n == 0 || !rjq__accepting(rjq_queue_get_client(q))) return;
    send_due(q, 0, "0", 1, ids, lens, n);
}

/* ---- gathering: the calls of one loop turn together ----------------------- */

/* A registration (deps_watch.lua) waiting for its call: dependent `dep_id`
 * of queue `entry` (a queue name, or "{b}<queue>" for a batch: batch.c)
 * on job did of queue on. */
typedef struct watch_req {
    rjq__gather_link link;     /* in the gathered registrations (first) */
    rjq_queue *on;        /* held */
    char *did, *entry, *dep_id;
    rjq__deps_watch_cb *cb;
    void *priv;
} watch_req;

/* A job with dependencies (rjq_enqueue) from its enqueue to its callback:
 * its deps_add (gathered with the others of its queue), then its
 * registrations (gathered per dependency's queue). */
typedef struct add_ctx {
    rjq__gather_link link;     /* in the gathered adds (first) */
    rjq_queue *q;         /* held until the callback */
    rjq_enqueue_cb *cb;
    void *data;
    int pending, status;
    int retry;            /* a caller's id: its deps_add may be sent again */
    rjq_enqueued out;
    char *id;             /* the caller's ("" none), then the job's */
    char *payload, *opts; /* deps_add's arguments (opts: with headers' text) */
    size_t len, olen;
    const char *policy;   /* static */
    size_t n;
    char **dq, **did;     /* the dependencies (copies) */
} add_ctx;

typedef struct deps_state {
    rjq_client *c;
    rjq__gather_list adds;     /* add_ctx */
    rjq__gather_list watches;  /* watch_req */
    rjq__timer flush;
    int timer_ok;
} deps_state;

static void add_free(add_ctx *a) {
    for (size_t i = 0; i < a->n; i++) {
        free(a->dq[i]);
        free(a->did[i]);
    }
    free(a->dq);
    free(a->did);
    free(a->id);
    free(a->payload);
    free(a->opts);
    free(a);
}

static void add_step_done(add_ctx *a, int status) {
    if (status != RJQ_OK && a->status == RJQ_OK) a->status = status;
    if (--a->pending > 0) return;
    rjq_client *c = rjq_queue_get_client(a->q);
    /* (rjq.h: an error has n == 0; it had n == 1 with jobs NULL) */
    if (a->cb) a->cb(c, a->status, a->status == RJQ_OK ? &a->out : NULL, a->status == RJQ_OK, a->data);
    rjq__queue_release(a->q);
    add_free(a);
}

static void watch_end(rjq_client *c, watch_req *w, int status, const char *outcome) {
    w->cb(c, status, outcome, w->priv);
    rjq__queue_release(w->on);
    free(w->did);
    free(w->entry);
    free(w->dep_id);
    free(w);
}

/* At most this many jobs (or registrations) in one call. */
#define PER_CALL 500

/* One deps_add or deps_watch call's requests, in order. */
typedef struct gathered {
    rjq_queue *q;
    size_t n;
    void *r[];            /* add_ctx or watch_req */
} gathered;

static void on_added(rjq_client *c, int status, redisReply *r, void *priv);
static void on_watches(rjq_client *c, int status, redisReply *r, void *priv);

static int add_like(const rjq__gather_link *x, const rjq__gather_link *y) {
    const add_ctx *a = (const add_ctx *)x, *b = (const add_ctx *)y;
    return a->q == b->q && a->retry == b->retry;
}

static int watch_like(const rjq__gather_link *x, const rjq__gather_link *y) {
    return ((const watch_req *)x)->on == ((const watch_req *)y)->on;
}

/* Takes the next call's requests off l (those like its first): NULL out
 * of memory, and the ones it would have taken are in *lost. */
static gathered *take_like(rjq__gather_list *l, rjq__gather_like_fn *like,
                           rjq__gather_link **lost) {
    size_t n = rjq__gather_count(l, like, PER_CALL);
    gathered *g = malloc(sizeof *g + n * sizeof g->r[0]);
    rjq__gather_take(l, like, n, g ? g->r : NULL, lost);
    if (g) g->n = n;
    return g;
}

static void send_adds(deps_state *st) {
    rjq_client *c = st->c;
    while (st->adds.head) {
        rjq__gather_link *lost;
        gathered *g = take_like(&st->adds, add_like, &lost);
        while (lost) {
            add_ctx *x = (add_ctx *)lost;
            lost = lost->next;
            add_step_done(x, RJQ_ENOMEM);
        }
        if (g == NULL) continue;
        const add_ctx *first = g->r[0];
        size_t n = g->n;
        g->q = first->q;
        rjq__argv v;
        rjq__argv_init(&v);
        rjq__argv_script_keys(&v, g->q, RJQ__S_DEPS_ADD);
        rjq__argv_key(&v, g->q, RJQ__K_JOB);
        for (size_t i = 0; i < n; i++) {
            add_ctx *a = g->r[i];
            rjq__argv_str(&v, a->id);
            rjq__argv_add(&v, a->payload ? a->payload : "", a->len);
            rjq__argv_add(&v, a->opts, a->olen);
            rjq__argv_str(&v, a->policy);
            rjq__argv_ll(&v, (long long)a->n);
            for (size_t j = 0; j < a->n; j++) {
                rjq__argv_str(&v, a->dq[j]);
                rjq__argv_str(&v, a->did[j]);
            }
        }
        /* jobs with a caller's id may be sent again (deps_add reports
         * them existing and the registrations follow anyway); numbered
         * ones not */
        int rc = rjq__accepting(c)
                     ? rjq__queue_script(g->q, RJQ__S_DEPS_ADD,
                                         (first->retry ? RJQ__REQ_RETRY : 0) | RJQ__REQ_DURABLE,
                                         on_added, g, &v)
                     : (rjq__argv_free(&v), RJQ_ECLOSED);
        if (rc != RJQ_OK) {
            for (size_t i = 0; i < n; i++) add_step_done(g->r[i], rc);
            free(g);
        }
    }
}

static void send_watches(deps_state *st) {
    rjq_client *c = st->c;
    while (st->watches.head) {
        rjq__gather_link *lost;
        gathered *g = take_like(&st->watches, watch_like, &lost);
        while (lost) {
            watch_req *x = (watch_req *)lost;
            lost = lost->next;
            watch_end(c, x, RJQ_ENOMEM, NULL);
        }
        if (g == NULL) continue;
        size_t n = g->n;
        g->q = ((const watch_req *)g->r[0])->on;
        rjq__argv v;
        rjq__argv_init(&v);
        rjq__argv_script_keys(&v, g->q, RJQ__S_DEPS_WATCH);
        for (size_t i = 0; i < n; i++) {
            watch_req *w = g->r[i];
            rjq__argv_str(&v, w->did);
            rjq__argv_str(&v, w->entry);
            rjq__argv_str(&v, w->dep_id);
        }
        int rc = rjq__accepting(c) ? rjq__queue_script(g->q, RJQ__S_DEPS_WATCH, RJQ__REQ_RETRY,
                                                       on_watches, g, &v)
                                   : (rjq__argv_free(&v), RJQ_ECLOSED);
        if (rc != RJQ_OK) {
            for (size_t i = 0; i < n; i++) watch_end(c, g->r[i], rc, NULL);
            free(g);
        }
    }
}

/* Everything gathered goes (the adds first: their replies gather
 * registrations for the next turn). */
static void flush_all(deps_state *st) {
    send_adds(st);
    send_watches(st);
}

static void on_flush(rjq__timer *t) {
    deps_state *st = t->owner;
    rjq__enter(st->c);
    flush_all(st);
    rjq__leave(st->c);
}

/* A later request of the client goes after what is gathered (one that
 * reads or cancels a job just enqueued must find it). */
static void before_send(rjq_client *c, void *state, int slot, int link) {
    (void)c, (void)slot, (void)link;
    flush_all(state);
}

static void state_abort(rjq_client *c, void *state) {
    deps_state *st = state;
    if (st->timer_ok) rjq__timer_stop(c, &st->flush);
    for (rjq__gather_link *x; (x = rjq__gather_pop(&st->adds)) != NULL;)
        add_step_done((add_ctx *)x, RJQ_ECANCELED);
    for (rjq__gather_link *x; (x = rjq__gather_pop(&st->watches)) != NULL;)
        watch_end(c, (watch_req *)x, RJQ_ECANCELED, NULL);
}

static void state_close(rjq_client *c, void *state) {
    deps_state *st = state;
    if (st->timer_ok) rjq__timer_teardown(c, &st->flush);
    free(st);
}

static const rjq__feature deps_feature = {.name = "deps",
                                          .before_send = before_send,
                                          .abort = state_abort,
                                          .cancel = state_abort, /* (gathered by a cancelled
                                                                  * request's callback) */
                                          .close = state_close};

static deps_state *state_of(rjq_client *c) {
    deps_state *st = rjq__feature_ensure(c, &deps_feature, sizeof *st);
    if (st == NULL) return NULL;
    if (!st->timer_ok) {
        if (rjq__timer_setup(c, &st->flush, on_flush, st) != RJQ_OK) return NULL;
        st->timer_ok = 1;
        st->c = c;
        rjq__gather_init(&st->adds);
        rjq__gather_init(&st->watches);
    }
    return st;
}

/* Gathered work waits for the end of the loop turn, or for the next
 * request of the client, whichever comes first. */
static void gathered_more(deps_state *st) {
    rjq__timer_start(st->c, &st->flush, 0);
    rjq__want_flush(st->c);
}

/* (deps.h) */
int rjq__deps_watch(rjq_queue *on, const char *did, const char *entry, const char *dep_id,
                    rjq__deps_watch_cb *cb, void *priv) {
    rjq_client *c = rjq_queue_get_client(on);
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    deps_state *st = state_of(c);
    watch_req *w = st ? calloc(1, sizeof *w) : NULL;
    if (w == NULL) return RJQ_ENOMEM;
    w->did = strdup(did);
    w->entry = strdup(entry);
    w->dep_id = strdup(dep_id);
    if (w->did == NULL || w->entry == NULL || w->dep_id == NULL) {
        free(w->did);
        free(w->entry);
        free(w->dep_id);
        free(w);
        return RJQ_ENOMEM;
    }
    w->on = on;
    w->cb = cb;
    w->priv = priv;
    rjq__queue_hold(on);
    rjq__gather_append(&st->watches, &w->link);
    gathered_more(st);
    return RJQ_OK;
}

static void on_watches(rjq_client *c, int status, redisReply *r, void *priv) {
    gathered *g = priv;
    /* deps_watch.lua: per registration 'waiting' or how its job ended */
    if (status == RJQ_OK && (r->type != REDIS_REPLY_ARRAY || r->elements != g->n))
        status = RJQ_EPROTO;
    for (size_t i = 0; status == RJQ_OK && i < g->n; i++) {
        const redisReply *e = r->element[i];
        if (!is_outcome(e) && !(e->type == REDIS_REPLY_STRING && e->len == 7 &&
                                memcmp(e->str, "waiting", 7) == 0))
            status = RJQ_EPROTO;
    }
    if (status == RJQ_EPROTO) rjq__errmsg(c, "deps watch: unexpected reply");
    for (size_t i = 0; i < g->n; i++) {
        const char *oc = status == RJQ_OK ? r->element[i]->str : NULL;
        watch_end(c, g->r[i], status, oc && strcmp(oc, "waiting") != 0 ? oc : NULL);
    }
    rjq__queue_release(g->q);
    free(g);
}

/* ---- resume ------------------------------------------------------------- */

/* One registration the resume sweep makes again: dependent id of q on
 * dependency did of queue dq. */
typedef struct rewatch {
    rjq_queue *q;
    char *id, *dq, *did;
} rewatch;

static void on_rewatched(rjq_client *c, int status, const char *outcome, void *priv) {
    rewatch *w = priv;
    /* finished: counted now */
    if (status == RJQ_OK && outcome && rjq__accepting(c))
        (void)send_release(w->q, w->id, strlen(w->id), w->dq, w->did, strlen(w->did), outcome,
                           NULL, NULL);
    rjq__queue_release(w->q);
    free(w->id);
    free(w->dq);
    free(w->did);
    free(w);
}

static void send_rewatch(rjq_queue *q, const char *id, size_t idlen, const char *dq, size_t dqlen,
                         const char *did, size_t didlen) {
    rjq_client *c = rjq_queue_get_client(q);
    rjq_queue *on = rjq__deps_queue(c, dq, dqlen);
    rewatch *w = on ? calloc(1, sizeof *w) : NULL;
    if (w == NULL) return; /* (the next sweep tries again) */
    w->q = q;
    w->id = strndup(id, idlen);
    w->dq = strndup(dq, dqlen);
    w->did = strndup(did, didlen);
    if (w->id == NULL || w->dq == NULL || w->did == NULL || !rjq__valid_job_ref(w->did) ||
        rjq__deps_watch(on, w->did, rjq_queue_get_name(q), w->id, on_rewatched, w) != RJQ_OK) {
        free(w->id);
        free(w->dq);
        free(w->did);
        free(w);
        return;
    }
    rjq__queue_hold(q);
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

typedef struct watch_ctx {
    add_ctx *a;
    size_t i;
} watch_ctx;

static void on_watched(rjq_client *c, int status, const char *outcome, void *priv) {
    watch_ctx *w = priv;
    add_ctx *a = w->a;
    if (status == RJQ_OK && outcome) {
        /* finished before it was registered: counted now */
        a->pending++;
        int rc = rjq__accepting(c)
                     ? send_release(a->q, a->id, strlen(a->id), a->dq[w->i], a->did[w->i],
                                    strlen(a->did[w->i]), outcome, NULL, a)
                     : RJQ_ECLOSED;
        if (rc != RJQ_OK) {
            a->pending--;
            status = rc;
        }
    }
    free(w);
    add_step_done(a, status);
}

/* Job a written (id, existed): its registration with each dependency's
 * queue (also for a job that existed: a call sent again after a lost
 * reply registers it then; registering twice changes nothing). existed 2:
 * written, and deps_add registered it with its dependencies of its own
 * queue already (all unfinished): only the others here. */
static void add_written(rjq_client *c, add_ctx *a, int status, const redisReply *id,
                        const redisReply *existed) {
    const char *own = NULL;
    if (status == RJQ_OK) {
        free(a->id);
        a->id = strndup(id->str, id->len);
        if (a->id == NULL) status = RJQ_ENOMEM;
        a->out.id = a->id;
        a->out.existed = existed->integer == 1;
        if (existed->integer == 2) own = rjq_queue_get_name(a->q);
    }
    for (size_t i = 0; status == RJQ_OK && i < a->n; i++) {
        if (own && strcmp(a->dq[i], own) == 0) continue; /* (registered by deps_add) */
        rjq_queue *on = rjq__accepting(c) ? rjq__deps_queue(c, a->dq[i], strlen(a->dq[i])) : NULL;
        watch_ctx *w = on ? malloc(sizeof *w) : NULL;
        if (w == NULL) {
            status = on ? RJQ_ENOMEM : RJQ_ECLOSED;
            break;
        }
        w->a = a;
        w->i = i;
        int rc = rjq__deps_watch(on, a->did[i], rjq_queue_get_name(a->q), a->id, on_watched, w);
        if (rc != RJQ_OK) {
            free(w);
            status = rc;
            break;
        }
        a->pending++;
    }
    add_step_done(a, status);
}

static void on_added(rjq_client *c, int status, redisReply *r, void *priv) {
    gathered *g = priv;
    /* deps_add.lua: { id, existed (0, 1, or 2: see add_written) } per job */
    if (status == RJQ_OK && !rjq__reply_id_code(r, g->n, 2)) {
        rjq__errmsg(c, "enqueue: unexpected reply");
        status = RJQ_EPROTO;
    }
    for (size_t i = 0; i < g->n; i++)
        add_written(c, g->r[i], status, status == RJQ_OK ? r->element[2 * i] : NULL,
                    status == RJQ_OK ? r->element[2 * i + 1] : NULL);
    rjq__queue_release(g->q);
    free(g);
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
    if (o->group != NULL && o->after != NULL) {
        rjq__errmsg(c, "enqueue: a job with dependencies takes no group (rjq_job_options.group)");
        return RJQ_EINVAL;
    }
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
    rc = rjq__queue_usable(q, "enqueue with dependencies");
    if (rc != RJQ_OK) return rc;
    rjq_job_options rest = *o; /* the options the enqueue script knows */
    rest.after = NULL;
    rest.n_after = 0;
    rest.after_policy = 0;
    rjq_enqueue_item it = RJQ_ENQUEUE_ITEM_INIT;
    it.payload = payload;
    it.len = len;
    it.opts = &rest;
    char opts[RJQ__OPTS_MAX]; /* (the payload, its size, the id, the queue's default timeout) */
    if ((rc = rjq__enqueue_check(q, &it, opts)) != RJQ_OK) return rc;
    static const char *const policies[] = {"fail", "run", "ignore"};
    deps_state *st = state_of(c);
    add_ctx *a = st ? calloc(1, sizeof *a) : NULL;
    if (a == NULL) return RJQ_ENOMEM;
    a->q = q;
    a->cb = cb;
    a->data = data;
    a->pending = 1;
    a->retry = o->id != NULL;
    a->policy = policies[o->after_policy];
    a->len = len;
    a->id = strdup(o->id ? o->id : "");
    a->payload = len ? malloc(len) : NULL;
    if (a->payload) memcpy(a->payload, payload, len);
    /* with headers: the options, '\n', their text (headers.h) */
    a->opts = o->nheaders == 0 ? strdup(opts)
                               : rjq__headers_options_text(opts, o->headers, o->nheaders, &a->olen);
    if (o->nheaders == 0 && a->opts) a->olen = strlen(a->opts);
    a->dq = calloc(o->n_after, sizeof *a->dq);
    a->did = calloc(o->n_after, sizeof *a->did);
    rc = a->id && (len == 0 || a->payload) && a->opts && a->dq && a->did ? RJQ_OK : RJQ_ENOMEM;
    for (size_t i = 0; rc == RJQ_OK && i < o->n_after; i++, a->n++) {
        a->dq[i] = strdup(o->after[i].queue);
        a->did[i] = strdup(o->after[i].id);
        if (a->dq[i] == NULL || a->did[i] == NULL) rc = RJQ_ENOMEM;
    }
    if (rc != RJQ_OK) {
        if (a->dq && a->did && a->n < o->n_after) a->n++; /* (the pair that failed) */
        add_free(a);
        return rc;
    }
    rjq__enter(c);
    rjq__queue_register(q);
    rjq__queue_hold(q);
    rjq__gather_append(&st->adds, &a->link);
    gathered_more(st);
    rjq__leave(c);
    return RJQ_OK;
}
