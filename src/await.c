/*
 * Awaiting job outcomes (DESIGN.md section 6).
 *
 * Every client has one reply channel, "<prefix>:reply:<random>", on its
 * subscriber connection. An await is registered in a table keyed by its
 * job key. The protocol leaves no window in which an outcome is missed:
 *
 * - rjq_enqueue_await sends its enqueue only after the reply channel's
 *   subscription is confirmed; the job records the channel and the script
 *   that finishes it publishes there. An outcome that arrives before the
 *   enqueue reply (a very fast job) is kept in the `early` list while
 *   enqueues are in flight and consumed when the await registers.
 * - rjq_queue_await (a job enqueued by anyone) runs the watch script after the
 *   subscription is confirmed: it answers from the stored state, or adds
 *   the channel to the job's watchers, atomically.
 * - After the subscriber connection comes back, every pending await is
 *   watched again (one pipelined batch of script calls, grouped by queue),
 *   so outcomes published while it was down are read from the job hashes.
 *   An enqueue whose reply arrives after such a resubscription watches its
 *   job right away for the same reason.
 *
 * An await may be referenced by requests in flight (`inflight`); it is
 * freed once it has ended and no request refers to it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define WATCH_BATCH 1000
#define EARLY_MAX 1024 /* outcomes kept for enqueue replies still to come */

enum { AW_WAIT_SUB, AW_ENQUEUEING, AW_WATCHING, AW_DONE };

struct rjq_await {
    rjq_client *c;
    rjq_queue *q;
    int state;
    int inflight;            /* requests that point at this await */
    int need_watch;          /* watch once the subscription is confirmed */
    unsigned sent_gen;       /* subscription generation when enqueued */
    char *key;               /* job key; NULL until the id is known */
    const char *id;          /* the id inside key */
    rjq_await_cb *cb;
    void *data;
    rjq_progress_cb *on_progress;
    rjq__timer timer;
    /* an enqueue waiting for the subscription: copies of the inputs */
    char *payload;
    size_t len;
    rjq_job_options opts;
    int has_opts;
    struct rjq_await *hnext;        /* table chain */
    struct rjq_await *prev, *next;  /* every live await */
};

typedef struct rjq__early {
    char *key;
    char *kind;
    char *body;
    size_t len;
    struct rjq__early *next;
} rjq__early;

static void on_reply_message(rjq_client *c, const char *ch, const char *msg, size_t len, void *arg);
static void send_watch(rjq_client *c, rjq_await **list, size_t n);

/* ---- table of awaits by job key ---------------------------------------- */

static size_t hash_key(const char *s) {
    size_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static int table_grow(rjq__awaits *t) {
    size_t nb = t->nbuckets ? t->nbuckets * 2 : 64;
    rjq_await **b = calloc(nb, sizeof *b);
    if (b == NULL) return -1;
    for (size_t i = 0; i < t->nbuckets; i++) {
        for (rjq_await *a = t->buckets[i], *next; a; a = next) {
            next = a->hnext;
            size_t j = hash_key(a->key) & (nb - 1);
            a->hnext = b[j];
            b[j] = a;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = nb;
    return 0;
}

static int table_add(rjq__awaits *t, rjq_await *a) {
    if (t->indexed + 1 > t->nbuckets && table_grow(t) != 0) return RJQ_ENOMEM;
    size_t i = hash_key(a->key) & (t->nbuckets - 1);
    a->hnext = t->buckets[i];
    t->buckets[i] = a;
    t->indexed++;
    return RJQ_OK;
}

static void table_remove(rjq__awaits *t, rjq_await *a) {
    if (a->key == NULL || t->nbuckets == 0) return;
    for (rjq_await **p = &t->buckets[hash_key(a->key) & (t->nbuckets - 1)]; *p; p = &(*p)->hnext) {
        if (*p == a) {
            *p = a->hnext;
            t->indexed--;
            return;
        }
    }
}

/* ---- lifetime --------------------------------------------------------- */

static void maybe_free(rjq_await *a) {
    if (a->state != AW_DONE || a->inflight > 0) return;
    free(a->key);
    free(a->payload);
    free((char *)a->opts.id);
    free(a);
}

/* Drop one request's reference (taken when it was sent); a reply handler
 * calls this last, after anything that may have resolved the await. */
static void unpin(rjq_await *a) {
    a->inflight--;
    maybe_free(a);
}

/* End the await: its callback runs exactly once, here. */
static void resolve(rjq_await *a, int status, const void *result, size_t rlen, const char *error) {
    rjq_client *c = a->c;
    if (a->state == AW_DONE) return;
    if (a->state == AW_WAIT_SUB && a->payload && !c->closing) {
        /* Cancelled or timed out before its enqueue went out: the job is
         * still the caller's to have, only nobody awaits it any more. */
        rjq_enqueue_item it = {a->payload, a->len, a->has_opts ? &a->opts : NULL};
        rjq__enqueue_add(a->q, &it, 0, NULL, NULL);
    }
    int was_indexed = a->state == AW_WATCHING;
    a->state = AW_DONE;
    rjq__timer_stop(c, &a->timer);
    if (was_indexed) table_remove(&c->aw, a);
    if (a->prev) a->prev->next = a->next;
    else c->aw.all = a->next;
    if (a->next) a->next->prev = a->prev;
    c->aw.count--;
    rjq_outcome o = {a->id, result, rlen, error};
    if (a->cb) a->cb(c, status, a->id ? &o : NULL, a->data);
    maybe_free(a);
}

static void on_timeout(rjq__timer *t) {
    resolve(t->owner, RJQ_ETIMEDOUT, NULL, 0, NULL);
}

static rjq_await *new_await(rjq_queue *q, const rjq_await_options *aw, rjq_await_cb *cb,
                            void *data) {
    rjq_await *a = calloc(1, sizeof *a);
    if (a == NULL) return NULL;
    rjq_client *c = q->c;
    a->c = c;
    a->q = q;
    a->cb = cb;
    a->data = data;
    a->on_progress = aw ? aw->on_progress : NULL;
    rjq__timer_init(&a->timer, on_timeout, a);
    a->next = c->aw.all;
    if (a->next) a->next->prev = a;
    c->aw.all = a;
    c->aw.count++;
    if (aw && aw->timeout_ms > 0) rjq__timer_start(c, &a->timer, (uint64_t)aw->timeout_ms);
    return a;
}

/* Undo new_await for a call that fails synchronously (no callback). */
static void discard(rjq_await *a) {
    a->cb = NULL;
    free(a->payload); /* nothing of a failed call is sent */
    a->payload = NULL;
    resolve(a, RJQ_ECANCELED, NULL, 0, NULL);
}

static int set_key(rjq_await *a, const char *id, size_t idlen) {
    a->key = rjq__job_key(a->q, id, idlen);
    if (a->key == NULL) return RJQ_ENOMEM;
    a->id = a->key + a->q->key_lens[RJQ__K_JOB];
    return RJQ_OK;
}

/* Make the await findable by its job key and wait for the outcome. */
static int start_watching(rjq_await *a) {
    int rc = table_add(&a->c->aw, a);
    if (rc == RJQ_OK) a->state = AW_WATCHING;
    return rc;
}

/* ---- the reply channel ------------------------------------------------- */

static int confirmed(rjq_client *c) {
    return c->aw.listening && rjq__channel_confirmed(c, c->aw.channel);
}

static int ensure_listening(rjq_client *c) {
    if (c->aw.listening) return RJQ_OK;
    int rc = rjq__subscribe(c, c->aw.channel, on_reply_message, c);
    if (rc == RJQ_OK) c->aw.listening = 1;
    return rc;
}

static rjq__early *take_early(rjq_client *c, const char *key) {
    for (rjq__early **p = &c->aw.early; *p; p = &(*p)->next) {
        if (strcmp((*p)->key, key) == 0) {
            rjq__early *e = *p;
            *p = e->next;
            if (c->aw.early_tail == e) {
                /* find the new tail (rare: only when the last one is taken) */
                rjq__early *t = c->aw.early;
                while (t && t->next) t = t->next;
                c->aw.early_tail = t;
            }
            c->aw.nearly--;
            return e;
        }
    }
    return NULL;
}

static void free_early(rjq__early *e) {
    free(e->key);
    free(e->kind);
    free(e->body);
    free(e);
}

static void drop_oldest_early(rjq_client *c) {
    rjq__early *e = c->aw.early;
    c->aw.early = e->next;
    if (c->aw.early == NULL) c->aw.early_tail = NULL;
    c->aw.nearly--;
    free_early(e);
}

static void clear_early(rjq_client *c) {
    while (c->aw.early) drop_oldest_early(c);
}

/* Keep an outcome no await knows (yet). Most belong to an enqueue whose
 * reply is a round trip away; the rest (late outcomes of awaits that timed
 * out or were cancelled) must not pile up while enqueues keep flowing, so
 * the list is capped, oldest out first. */
static void keep_early(rjq_client *c, const char *key, size_t klen, const char *kind,
                       const char *body, size_t blen) {
    rjq__early *e = calloc(1, sizeof *e);
    if (e == NULL) return;
    e->key = strndup(key, klen);
    e->kind = strdup(kind);
    e->body = malloc(blen + 1);
    if (e->key == NULL || e->kind == NULL || e->body == NULL) {
        free_early(e);
        return;
    }
    memcpy(e->body, body, blen);
    e->body[blen] = '\0';
    e->len = blen;
    if (c->aw.early_tail) c->aw.early_tail->next = e;
    else c->aw.early = e;
    c->aw.early_tail = e;
    if (++c->aw.nearly > EARLY_MAX) drop_oldest_early(c);
}

static void on_big_result(rjq_client *c, int status, redisReply *r, void *priv) {
    rjq_await *a = priv;
    (void)c;
    if (status == RJQ_OK && r->type == REDIS_REPLY_NIL) status = RJQ_ENOTFOUND; /* already deleted by retention */
    if (status == RJQ_OK && r->type != REDIS_REPLY_STRING) status = RJQ_EPROTO;
    if (status == RJQ_ECONN) a->need_watch = 1; /* lost with the connection: read it again then */
    else if (status == RJQ_OK) resolve(a, RJQ_OK, r->str, r->len, NULL);
    else resolve(a, status, NULL, 0, NULL);
    unpin(a);
}

/* Apply one outcome message (kind, body) to await a. */
static void deliver(rjq_await *a, const char *kind, const char *body, size_t len) {
    rjq_client *c = a->c;
    if (strcmp(kind, "completed") == 0) {
        resolve(a, RJQ_OK, body, len, NULL);
    } else if (strcmp(kind, "dead") == 0) {
        resolve(a, RJQ_EJOBDEAD, NULL, 0, body);
    } else if (strcmp(kind, "progress") == 0) {
        if (a->on_progress) a->on_progress(c, a->id, body, len, a->data);
    } else if (strcmp(kind, "big") == 0) {
        const char *argv[3] = {"HGET", a->q->keys[RJQ__K_RESULT], a->id};
        if (rjq__command(c, 0, on_big_result, a, 3, argv, NULL) == RJQ_OK) a->inflight++;
        else resolve(a, RJQ_ENOMEM, NULL, 0, NULL);
    }
}

/* Split "kind\nkey\nbody" in place-free fashion. */
static int parse_message(const char *msg, size_t len, char *kind, size_t kindcap,
                         const char **key, size_t *klen, const char **body, size_t *blen) {
    const char *nl1 = memchr(msg, '\n', len);
    if (nl1 == NULL || (size_t)(nl1 - msg) >= kindcap) return -1;
    const char *nl2 = memchr(nl1 + 1, '\n', len - (size_t)(nl1 + 1 - msg));
    if (nl2 == NULL) return -1;
    memcpy(kind, msg, (size_t)(nl1 - msg));
    kind[nl1 - msg] = '\0';
    *key = nl1 + 1;
    *klen = (size_t)(nl2 - *key);
    *body = nl2 + 1;
    *blen = len - (size_t)(*body - msg);
    return 0;
}

static void on_confirmed(rjq_client *c);

static void on_reply_message(rjq_client *c, const char *ch, const char *msg, size_t len,
                             void *arg) {
    char kind[16], small[512], *keybuf = small;
    const char *key, *body;
    size_t klen, blen;
    (void)ch, (void)arg;
    if (msg == NULL) {
        on_confirmed(c);
        return;
    }
    if (parse_message(msg, len, kind, sizeof kind, &key, &klen, &body, &blen) != 0) return;
    if (klen >= sizeof small && (keybuf = malloc(klen + 1)) == NULL) return;
    memcpy(keybuf, key, klen);
    keybuf[klen] = '\0';
    /* Pin every await of this key first: a callback may end or cancel
     * others, and a pinned await is not freed under us. */
    rjq_await *stack[8], **hits = stack;
    size_t n = 0, cap = 8;
    if (c->aw.nbuckets) {
        for (rjq_await *a = c->aw.buckets[hash_key(keybuf) & (c->aw.nbuckets - 1)]; a; a = a->hnext) {
            if (strcmp(a->key, keybuf) != 0) continue;
            if (n == cap) {
                rjq_await **grown = malloc(2 * cap * sizeof *grown);
                if (grown == NULL) break;
                memcpy(grown, hits, n * sizeof *hits);
                if (hits != stack) free(hits);
                hits = grown;
                cap *= 2;
            }
            a->inflight++;
            hits[n++] = a;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (hits[i]->state == AW_WATCHING && !c->closing) deliver(hits[i], kind, body, blen);
        unpin(hits[i]);
    }
    if (hits != stack) free(hits);
    if (n == 0 && c->aw.enqueues_inflight > 0 && strcmp(kind, "progress") != 0)
        keep_early(c, keybuf, klen, kind, body, blen);
    if (keybuf != small) free(keybuf);
}

/* ---- enqueue + await --------------------------------------------------- */

static void on_enqueued(rjq_client *c, int status, const char *id, size_t idlen, int existed,
                        void *priv) {
    rjq_await *a = priv;
    c->aw.enqueues_inflight--;
    if (a->state == AW_DONE) goto out;
    if (status == RJQ_OK) status = set_key(a, id, idlen);
    if (status == RJQ_OK) status = start_watching(a);
    if (status != RJQ_OK) {
        resolve(a, status, NULL, 0, NULL);
        goto out;
    }
    rjq__early *e = take_early(c, a->key);
    if (e) {
        deliver(a, e->kind, e->body, e->len);
        free_early(e);
    } else if (existed || a->sent_gen != c->aw.generation) {
        /* an existing id (not ours to be notified of) or a resubscription
         * since the enqueue went out: read its state and watch it */
        send_watch(c, &a, 1);
    }
out:
    if (c->aw.enqueues_inflight == 0) clear_early(c);
    unpin(a);
}

/* Queue the held enqueue; on failure nothing changed and nobody was called. */
static int try_enqueue(rjq_await *a) {
    rjq_client *c = a->c;
    rjq_enqueue_item it = {a->payload, a->len, a->has_opts ? &a->opts : NULL};
    int rc = rjq__enqueue_add(a->q, &it, 1, on_enqueued, a);
    if (rc != RJQ_OK) return rc;
    free(a->payload);
    a->payload = NULL;
    a->inflight++;
    a->state = AW_ENQUEUEING;
    a->sent_gen = c->aw.generation;
    c->aw.enqueues_inflight++;
    return RJQ_OK;
}

/* The deferred send (subscription confirmed): a failure ends the await. */
static void send_enqueue(rjq_await *a) {
    int rc = try_enqueue(a);
    if (rc != RJQ_OK) {
        free(a->payload); /* it could not be sent: don't send it on resolve */
        a->payload = NULL;
        resolve(a, rc, NULL, 0, NULL);
    }
}

static int copy_inputs(rjq_await *a, const void *payload, size_t len, const rjq_job_options *o) {
    a->payload = malloc(len ? len : 1);
    if (a->payload == NULL) return RJQ_ENOMEM;
    if (len) memcpy(a->payload, payload, len);
    a->len = len;
    if (o) {
        a->opts = *o;
        a->has_opts = 1;
        a->opts.id = NULL;
        if (o->id && (a->opts.id = strdup(o->id)) == NULL) return RJQ_ENOMEM;
    }
    return RJQ_OK;
}

int rjq_enqueue_await(rjq_queue *q, const void *payload, size_t len, const rjq_job_options *opts,
                      const rjq_await_options *aw, rjq_await_cb *cb, void *data, rjq_await **out) {
    if (q == NULL || cb == NULL || (aw && aw->timeout_ms < 0)) return RJQ_EINVAL;
    rjq_client *c = q->c;
    if (c->closing) return RJQ_ECLOSED;
    char enc[RJQ__OPTS_MAX];
    rjq_enqueue_item it = {payload, len, opts};
    int rc = rjq__enqueue_check(c, &it, enc);
    if (rc != RJQ_OK) return rc;
    if ((rc = ensure_listening(c)) != RJQ_OK) return rc;
    rjq_await *a = new_await(q, aw, cb, data);
    if (a == NULL) return RJQ_ENOMEM;
    if ((rc = copy_inputs(a, payload, len, opts)) != RJQ_OK) {
        discard(a);
        return rc;
    }
    if (confirmed(c) && (rc = try_enqueue(a)) != RJQ_OK) {
        discard(a); /* an error return: the callback is never called */
        return rc;
    }
    if (out) *out = a;
    return RJQ_OK;
}

/* ---- await by id ---------------------------------------------------------- */

typedef struct watch_batch {
    size_t n;
    rjq_await *a[];
} watch_batch;

static void on_watched(rjq_client *c, int status, redisReply *r, void *priv) {
    watch_batch *b = priv;
    (void)c;
    if (status == RJQ_OK && (r->type != REDIS_REPLY_ARRAY || r->elements != 2 * b->n))
        status = RJQ_EPROTO;
    for (size_t i = 0; i < b->n; i++) {
        rjq_await *a = b->a[i];
        if (status == RJQ_ECONN) {
            a->need_watch = 1; /* watched again when the connection is back */
        } else if (status != RJQ_OK) {
            resolve(a, status, NULL, 0, NULL);
        } else {
            redisReply *code = r->element[2 * i], *body = r->element[2 * i + 1];
            if (code->integer == 0) resolve(a, RJQ_ENOTFOUND, NULL, 0, NULL);
            else if (code->integer == 1) resolve(a, RJQ_OK, body->str, body->len, NULL);
            else if (code->integer == 2) resolve(a, RJQ_EJOBDEAD, NULL, 0, body->str);
        }
        unpin(a);
    }
    free(b);
}

/* Watch up to WATCH_BATCH awaits of one queue in one script call. On
 * failure nothing changed and nobody was called. */
static int watch_chunk(rjq_client *c, rjq_await **list, size_t n) {
    watch_batch *b = malloc(sizeof *b + n * sizeof b->a[0]);
    rjq__argv v;
    rjq__argv_init(&v);
    if (b) {
        RJQ__KEYS(&v, list[0]->q, RJQ__K_COLUMNS);
        rjq__argv_str(&v, c->aw.channel);
        for (size_t i = 0; i < n; i++) rjq__argv_str(&v, list[i]->id);
    }
    int rc = b == NULL || v.oom ? RJQ_ENOMEM
                                : rjq__script(c, RJQ__S_WATCH, 0, on_watched, b, v.n, v.v, v.len);
    rjq__argv_free(&v);
    if (rc != RJQ_OK) {
        free(b);
        return rc;
    }
    b->n = n;
    for (size_t i = 0; i < n; i++) {
        b->a[i] = list[i];
        list[i]->inflight++;
        list[i]->need_watch = 0;
    }
    return RJQ_OK;
}

/* Watch awaits (any queues): chunks of one queue each. */
static void send_watch(rjq_client *c, rjq_await **list, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t j = i + 1;
        while (j < n && j - i < WATCH_BATCH && list[j]->q == list[i]->q) j++;
        int rc = watch_chunk(c, list + i, j - i);
        for (size_t k = i; rc != RJQ_OK && k < j; k++) resolve(list[k], rc, NULL, 0, NULL);
        i = j;
    }
}

static int by_queue(const void *x, const void *y) {
    const rjq_await *a = *(rjq_await *const *)x, *b = *(rjq_await *const *)y;
    return a->q < b->q ? -1 : a->q > b->q;
}

/* Watch the awaits that need it (all when `all`); sends held enqueues. */
static void watch_pending(rjq_client *c, int all) {
    size_t n = 0, cap = c->aw.count;
    rjq_await **list = cap ? malloc(cap * sizeof *list) : NULL;
    for (rjq_await *a = c->aw.all, *next; a; a = next) {
        next = a->next;
        if (a->state == AW_WAIT_SUB) send_enqueue(a);
        else if (a->state == AW_WATCHING && (all || a->need_watch) && list && n < cap)
            list[n++] = a;
    }
    if (n > 1) qsort(list, n, sizeof *list, by_queue);
    if (n) send_watch(c, list, n);
    free(list);
}

/* The reply channel is (again) subscribed: send held enqueues and, after
 * a resubscription, watch every await (outcomes published meanwhile). */
static void on_confirmed(rjq_client *c) {
    int again = c->aw.generation++ > 0;
    watch_pending(c, again);
}

void rjq__awaits_rewatch(rjq_client *c) {
    if (confirmed(c)) watch_pending(c, 0);
}

int rjq_queue_await(rjq_queue *q, const char *id, const rjq_await_options *aw, rjq_await_cb *cb,
              void *data, rjq_await **out) {
    if (q == NULL || cb == NULL || (aw && aw->timeout_ms < 0)) return RJQ_EINVAL;
    rjq_client *c = q->c;
    if (c->closing) return RJQ_ECLOSED;
    if (id == NULL || id[0] == '\0' || strlen(id) > RJQ_JOB_ID_MAX) return RJQ_EJOBID;
    int rc = ensure_listening(c);
    if (rc != RJQ_OK) return rc;
    rjq_await *a = new_await(q, aw, cb, data);
    if (a == NULL) return RJQ_ENOMEM;
    if ((rc = set_key(a, id, strlen(id))) != RJQ_OK || (rc = start_watching(a)) != RJQ_OK) {
        discard(a);
        return rc;
    }
    if (confirmed(c) && (rc = watch_chunk(c, &a, 1)) != RJQ_OK) {
        discard(a); /* an error return: the callback is never called */
        return rc;
    }
    if (!confirmed(c)) a->need_watch = 1;
    if (out) *out = a;
    return RJQ_OK;
}

int rjq_await_cancel(rjq_await *a) {
    if (a == NULL || a->state == AW_DONE) return RJQ_EINVAL;
    rjq_client *c = a->c;
    /* The callback runs here: a client freed from it is freed on leave. */
    rjq__enter(c);
    resolve(a, RJQ_ECANCELED, NULL, 0, NULL);
    rjq__leave(c);
    return RJQ_OK;
}

size_t rjq_client_awaits(const rjq_client *c) {
    return c->aw.count;
}

/* ---- progress ------------------------------------------------------------ */

static void ignore(rjq_client *c, int status, redisReply *r, void *priv) {
    (void)c, (void)status, (void)r, (void)priv;
}

int rjq_job_progress(rjq_job *job, const void *progress, size_t len) {
    if (job == NULL || (progress == NULL && len > 0)) return RJQ_EINVAL;
    if (job->w == NULL) return RJQ_ECLOSED;
    rjq_queue *q = job->w->q;
    if (len > q->c->max_payload) return RJQ_ETOOBIG;
    rjq__argv a;
    rjq__argv_init(&a);
    RJQ__KEYS(&a, q, RJQ__K_COLUMNS);
    rjq__argv_key(&a, q, RJQ__K_JOB);
    rjq__argv_str(&a, job->id);
    rjq__argv_str(&a, job->token);
    rjq__argv_add(&a, progress ? progress : "", len);
    int rc = a.oom ? RJQ_ENOMEM : rjq__script(q->c, RJQ__S_PROGRESS, 0, ignore, NULL, a.n, a.v, a.len);
    rjq__argv_free(&a);
    return rc;
}

/* ---- client integration -------------------------------------------------- */

int rjq__awaits_init(rjq_client *c) {
    snprintf(c->aw.channel, sizeof c->aw.channel, "%s:reply:%016llx%08llx", c->prefix,
             (unsigned long long)rjq__random(c), (unsigned long long)(rjq__random(c) & 0xffffffffu));
    return RJQ_OK;
}

void rjq__awaits_cancel_all(rjq_client *c) {
    while (c->aw.all) resolve(c->aw.all, RJQ_ECANCELED, NULL, 0, NULL);
    clear_early(c);
    free(c->aw.buckets);
    c->aw.buckets = NULL;
    c->aw.nbuckets = 0;
}
