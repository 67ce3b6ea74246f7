/*
 * Batches (rjq.h "Batches"; script batch.lua). A batch lives in its batch
 * queue's slot; a member joins in steps the client carries, each
 * idempotent, as a dependency does (deps.c):
 *   rjq_enqueue of the job on its queue, then deps_watch on that queue
 *   with the dependent "{b}<batch queue> <batch id>" (the job's finisher,
 *   or the dependencies' sweep, then tells the batch: deps.c sends
 *   batch.lua's release for such an entry), then batch.lua's add on the
 *   batch queue, with the member's outcome when it had finished already
 *   (the adds of one loop turn gathered: one call per batch, on_flush).
 * The batch counts each member once whichever of its add and release comes
 * first. Reads: rjq_batch_get, and rjq_batch_await, an await of the
 * client's awaits (await.c, rjq__await_other): batch.lua's watch answers
 * from the record or adds the client's reply channel to the batch's
 * watchers, atomically, once the channel's subscription is confirmed;
 * the call that ends the batch publishes its record there (lib.lua
 * notify); a resubscription watches again. At its timeout the record is
 * read once more, for the status the callback gets.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "await.h"
#include "batch_call.h"
#include "deps.h"
#include "gather.h"
#include "queue.h"
#include "shard.h"
#include "validate.h"

/* A batch id: a job id, or a number the batch queue assigned. */
static int valid_batch_id(const char *id) {
    if (id == NULL) return 0;
    if (rjq__valid_job_id(id)) return 1;
    size_t n = strlen(id);
    return n > 0 && n <= 20 && strspn(id, "0123456789") == n;
}

static int usable(rjq_queue *q, const char *id, int has_cb) {
    if (q == NULL || !has_cb || (id != NULL && !valid_batch_id(id))) {
        if (q) rjq__errmsg(rjq_queue_get_client(q), "batch: bad arguments (id, callback)");
        return RJQ_EINVAL;
    }
    if (rjq__queue_front(q)) { /* (README "Sharded queues": members may be there) */
        rjq__errmsg(rjq_queue_get_client(q), "queue %s is split into shards and a batch call acts "
                    "on one queue's keys: keep the batch in a plain queue (its members may be "
                    "jobs of %s)", rjq_queue_get_name(q), rjq_queue_get_name(q));
        return RJQ_ESHARDED;
    }
    return rjq__queue_usable(q, "a batch call");
}

/* ---- create ------------------------------------------------------------- */

typedef struct create_ctx {
    rjq_queue *q;
    rjq_batch_cb *cb;
    void *data;
} create_ctx;

static void on_created(rjq_client *c, int status, redisReply *r, void *priv) {
    create_ctx *x = priv;
    /* batch.lua create: { id, existed } */
    if (status == RJQ_OK && !rjq__reply_id_existed(r, 1)) {
        rjq__errmsg(c, "batch create: unexpected reply");
        status = RJQ_EPROTO;
    }
    char id[RJQ_JOB_ID_MAX + 1];
    if (status == RJQ_OK) {
        memcpy(id, r->element[0]->str, r->element[0]->len);
        id[r->element[0]->len] = '\0';
    }
    if (x->cb) x->cb(c, status, status == RJQ_OK ? id : NULL, x->data);
    rjq__queue_release(x->q);
    free(x);
}

int rjq_batch_create(rjq_queue *q, const rjq_batch_options *given, rjq_batch_cb *cb, void *data) {
    int rc = usable(q, NULL, 1);
    if (rc != RJQ_OK) return rc;
    rjq_client *c = rjq_queue_get_client(q);
    rjq_batch_options o = RJQ_BATCH_OPTIONS_INIT;
    if (given) {
        char why[256];
        rc = rjq__sized_take(&o, sizeof o, given, "rjq_batch_options", why, sizeof why);
        if (rc != RJQ_OK) {
            rjq__errmsg(c, "%s", why);
            return rc;
        }
    }
    if (o.id != NULL && !rjq__valid_job_id(o.id)) {
        rjq__errmsg(c, "batch create: bad id (a job id: no blanks, not all digits)");
        return RJQ_EINVAL;
    }
    if (o.retention_ms < -1) {
        rjq__errmsg(c, "batch create: bad retention_ms (0 the default, -1 kept, or ms)");
        return RJQ_EINVAL;
    }
    create_ctx *x = malloc(sizeof *x);
    if (x == NULL) return RJQ_ENOMEM;
    x->q = q;
    x->cb = cb;
    x->data = data;
    char flags[3] = {0};
    size_t nf = 0;
    if (o.on_complete) flags[nf++] = 'c';
    if (o.on_success) flags[nf++] = 's';
    char keep[24] = "";
    if (o.retention_ms != 0) snprintf(keep, sizeof keep, "%lld", o.retention_ms);
    const char *args[4] = {flags, o.on_complete ? o.on_complete : "",
                           o.on_success ? o.on_success : "", keep};
    size_t lens[4] = {nf, o.on_complete ? o.on_complete_len : 0,
                      o.on_success ? o.on_success_len : 0, strlen(keep)};
    rjq__queue_register(q);
    /* a caller's id may be sent again (create reports it existing); a
     * numbered one not */
    rc = rjq__batch_call(q, "create", o.id ? o.id : "", (o.id ? RJQ__REQ_RETRY : 0) | RJQ__REQ_DURABLE,
                         on_created, x, 4, args, lens);
    if (rc != RJQ_OK) free(x);
    return rc;
}

/* ---- members ------------------------------------------------------------ */

typedef struct member_ctx {
    rjq__gather_link link;   /* in the adds gathered for the next call (first) */
    rjq_queue *bq, *q;
    rjq_enqueue_cb *cb;
    void *data;
    rjq_enqueued out;
    char *bid, *id;
    char outcome[16];        /* how it ended when registered ('' waiting) */
} member_ctx;

/* The client's batch state (a feature): the adds gathered in this loop
 * turn (sent together, one call per batch, by a 0 ms timer). */
typedef struct batch_state {
    rjq_client *c;
    rjq__gather_list adds;   /* member_ctx */
    rjq__timer flush;
    int timer_ok;
} batch_state;

static batch_state *state_of(rjq_client *c);

static void member_end(rjq_client *c, member_ctx *m, int status) {
    if (m->cb) m->cb(c, status, status == RJQ_OK ? &m->out : NULL, status == RJQ_OK ? 1 : 0, m->data);
    rjq__queue_release(m->bq);
    rjq__queue_release(m->q);
    free(m->bid);
    free(m->id);
    free(m);
}

/* One call's adds (members m[0..n-1], all of batch bid of bq). */
typedef struct add_call {
    size_t n;
    void *m[];               /* member_ctx */
} add_call;

static void on_members_added(rjq_client *c, int status, redisReply *r, void *priv) {
    add_call *a = priv;
    const member_ctx *first = a->m[0];
    rjq__queue_release(first->bq); /* (rjq__batch_call's hold) */
    /* batch.lua add: per member 1 added, 0 added already, -1 sealed; or
     * -2 (no such batch) */
    if (status == RJQ_OK && r->type == REDIS_REPLY_INTEGER && r->integer == -2) {
        rjq__errmsg(c, "no batch %s", first->bid);
        status = RJQ_ENOTFOUND;
    }
    if (status == RJQ_OK && (r->type != REDIS_REPLY_ARRAY || r->elements != a->n)) {
        rjq__errmsg(c, "batch add: unexpected reply");
        status = RJQ_EPROTO;
    }
    for (size_t i = 0; i < a->n; i++) {
        member_ctx *m = a->m[i];
        int st = status;
        const redisReply *e = st == RJQ_OK ? r->element[i] : NULL;
        if (st == RJQ_OK && (e->type != REDIS_REPLY_INTEGER || e->integer < -1 || e->integer > 1)) {
            rjq__errmsg(c, "batch add: unexpected reply");
            st = RJQ_EPROTO;
        }
        if (st == RJQ_OK && e->integer == -1) {
            rjq__errmsg(c, "batch %s is sealed: job %s was enqueued outside it", m->bid, m->id);
            st = RJQ_ESTATE;
        }
        member_end(c, m, st);
    }
    free(a);
}

/* At most this many members in one add call. */
#define ADDS_PER_CALL 500

static int member_like(const rjq__gather_link *x, const rjq__gather_link *first) {
    const member_ctx *m = (const member_ctx *)x, *f = (const member_ctx *)first;
    return m->bq == f->bq && strcmp(m->bid, f->bid) == 0;
}

/* The gathered adds go: one call per batch (of ADDS_PER_CALL at most). */
static void on_flush(rjq__timer *t) {
    batch_state *st = t->owner;
    rjq_client *c = st->c;
    rjq__enter(c);
    while (st->adds.head) {
        size_t n = rjq__gather_count(&st->adds, member_like, ADDS_PER_CALL);
        add_call *a = malloc(sizeof *a + n * sizeof a->m[0]);
        const char **args = malloc(3 * n * sizeof *args);
        size_t *lens = malloc(3 * n * sizeof *lens);
        a = a && args && lens ? a : (free(a), NULL);
        rjq__gather_link *lost;
        rjq__gather_take(&st->adds, member_like, n, a ? a->m : NULL, &lost);
        while (lost) {
            member_ctx *m = (member_ctx *)lost;
            lost = lost->next;
            member_end(c, m, RJQ_ENOMEM);
        }
        const member_ctx *first = a ? a->m[0] : NULL;
        for (size_t k = 0; a && k < n; k++) {
            const member_ctx *m = a->m[k];
            const char *name = rjq_queue_get_name(m->q);
            args[3 * k] = name;
            lens[3 * k] = strlen(name);
            args[3 * k + 1] = m->id;
            lens[3 * k + 1] = strlen(m->id);
            args[3 * k + 2] = m->outcome;
            lens[3 * k + 2] = strlen(m->outcome);
        }
        if (a) {
            a->n = n;
            int rc = rjq__accepting(c) ? rjq__batch_call(first->bq, "add", first->bid,
                                                   RJQ__REQ_RETRY | RJQ__REQ_DURABLE,
                                                   on_members_added, a, 3 * n, args, lens)
                                       : RJQ_ECLOSED;
            if (rc != RJQ_OK) {
                for (size_t i = 0; i < n; i++) member_end(c, a->m[i], rc);
                free(a);
            }
        }
        free(args);
        free(lens);
    }
    rjq__leave(c);
}

static void on_member_watched(rjq_client *c, int status, const char *outcome, void *priv) {
    member_ctx *m = priv;
    rjq__queue_release(m->q); /* (the watch's hold) */
    /* outcome: NULL waiting, or how it ended (deps.h: < 16 bytes) */
    if (status == RJQ_OK && !rjq__accepting(c)) status = RJQ_ECLOSED;
    batch_state *st = status == RJQ_OK ? state_of(c) : NULL;
    if (status == RJQ_OK && st == NULL) status = RJQ_ENOMEM;
    if (status == RJQ_OK) {
        /* gathered: the adds of this loop turn go together (on_flush) */
        if (outcome) snprintf(m->outcome, sizeof m->outcome, "%s", outcome);
        rjq__gather_append(&st->adds, &m->link);
        rjq__timer_start(c, &st->flush, 0);
        return;
    }
    member_end(c, m, status);
}

static void on_member_enqueued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n,
                               void *data) {
    member_ctx *m = data;
    if (status == RJQ_OK && (n != 1 || jobs == NULL || jobs[0].id == NULL)) status = RJQ_EPROTO;
    if (status == RJQ_OK && (m->id = strdup(jobs[0].id)) == NULL) status = RJQ_ENOMEM;
    if (status == RJQ_OK && !rjq__accepting(c)) status = RJQ_ECLOSED;
    if (status != RJQ_OK) {
        member_end(c, m, status);
        return;
    }
    m->out = jobs[0];
    m->out.id = m->id;
    /* a sharded queue's member is its shard's job: registered there, and
     * named by its shard in the batch (the queue its finisher tells from) */
    rjq_queue *sq = rjq__queue_id_shard(m->q, m->id);
    if (sq != m->q) {
        rjq__queue_hold(sq);
        rjq__queue_release(m->q);
        m->q = sq;
    }
    /* the batch among the job's dependents: its finisher tells the batch
     * (registrations gathered by deps.c) */
    size_t blen = strlen(rjq_queue_get_name(m->bq));
    char *entry = malloc(blen + 4);
    if (entry) {
        memcpy(entry, "{b}", 3);
        memcpy(entry + 3, rjq_queue_get_name(m->bq), blen + 1);
    }
    status = entry ? rjq__deps_watch(m->q, m->id, entry, m->bid, on_member_watched, m) : RJQ_ENOMEM;
    free(entry);
    if (status == RJQ_OK) {
        rjq__queue_hold(m->q); /* (released by on_member_watched) */
        return;
    }
    member_end(c, m, status);
}

int rjq_batch_enqueue(rjq_queue *bq, const char *id, rjq_queue *q, const void *payload,
                      size_t len, const rjq_job_options *o, rjq_enqueue_cb *cb, void *data) {
    int rc = usable(bq, id, 1);
    if (rc == RJQ_OK && id == NULL) rc = RJQ_EINVAL;
    if (rc == RJQ_OK && (q == NULL || rjq_queue_get_client(q) != rjq_queue_get_client(bq))) {
        rjq__errmsg(rjq_queue_get_client(bq), "batch enqueue: no queue, or another client's");
        rc = RJQ_EINVAL;
    }
    if (rc != RJQ_OK) return rc;
    member_ctx *m = calloc(1, sizeof *m);
    if (m == NULL || (m->bid = strdup(id)) == NULL) {
        free(m);
        return RJQ_ENOMEM;
    }
    m->bq = bq;
    m->q = q;
    m->cb = cb;
    m->data = data;
    rjq__queue_hold(bq);
    rjq__queue_hold(q);
    rc = rjq_enqueue(q, payload, len, o, on_member_enqueued, m);
    if (rc != RJQ_OK) {
        rjq__queue_release(bq);
        rjq__queue_release(q);
        free(m->bid);
        free(m);
    }
    return rc;
}

/* ---- seal --------------------------------------------------------------- */

typedef struct seal_ctx {
    rjq_queue *q;
    rjq_done_cb *cb;
    void *data;
    char *id; /* (delete's, for its message) */
} seal_ctx;

static void on_sealed(rjq_client *c, int status, redisReply *r, void *priv) {
    seal_ctx *x = priv;
    /* batch.lua seal: 2 sealed and ended, 1 sealed, 0 sealed already, -2 no such batch */
    if (status == RJQ_OK && (r->type != REDIS_REPLY_INTEGER || r->integer < -2 ||
                             r->integer > 2 || r->integer == -1)) {
        rjq__errmsg(c, "batch seal: unexpected reply");
        status = RJQ_EPROTO;
    }
    if (status == RJQ_OK && r->integer == -2) status = RJQ_ENOTFOUND;
    if (x->cb) x->cb(c, status, x->data);
    rjq__queue_release(x->q);
    free(x);
}

int rjq_batch_seal(rjq_queue *bq, const char *id, rjq_done_cb *cb, void *data) {
    int rc = usable(bq, id, 1);
    if (rc == RJQ_OK && id == NULL) rc = RJQ_EINVAL;
    if (rc != RJQ_OK) return rc;
    seal_ctx *x = calloc(1, sizeof *x);
    if (x == NULL) return RJQ_ENOMEM;
    x->q = bq;
    x->cb = cb;
    x->data = data;
    rc = rjq__batch_call(bq, "seal", id, RJQ__REQ_RETRY | RJQ__REQ_DURABLE, on_sealed, x, 0, NULL, NULL);
    if (rc != RJQ_OK) free(x);
    return rc;
}

/* ---- delete --------------------------------------------------------------- */

static void on_deleted(rjq_client *c, int status, redisReply *r, void *priv) {
    seal_ctx *x = priv;
    /* batch.lua delete: 1 deleted, -1 pending (not forced), -2 no such batch */
    if (status == RJQ_OK && (r->type != REDIS_REPLY_INTEGER || r->integer < -2 ||
                             r->integer > 1 || r->integer == 0)) {
        rjq__errmsg(c, "batch delete: unexpected reply");
        status = RJQ_EPROTO;
    }
    if (status == RJQ_OK && r->integer == -2) status = RJQ_ENOTFOUND;
    if (status == RJQ_OK && r->integer == -1) {
        rjq__errmsg(c, "batch %s is pending: not deleted (force it to delete it all the same)",
                    x->id);
        status = RJQ_ESTATE;
    }
    if (x->cb) x->cb(c, status, x->data);
    rjq__queue_release(x->q);
    free(x->id);
    free(x);
}

int rjq_batch_delete(rjq_queue *bq, const char *id, int force, rjq_done_cb *cb, void *data) {
    int rc = usable(bq, id, 1);
    if (rc == RJQ_OK && id == NULL) rc = RJQ_EINVAL;
    if (rc != RJQ_OK) return rc;
    seal_ctx *x = calloc(1, sizeof *x);
    if (x == NULL || (x->id = strdup(id)) == NULL) {
        free(x);
        return RJQ_ENOMEM;
    }
    x->q = bq;
    x->cb = cb;
    x->data = data;
    const char *arg = force ? "1" : "";
    size_t len = strlen(arg);
    rc = rjq__batch_call(bq, "delete", id, RJQ__REQ_RETRY | RJQ__REQ_DURABLE, on_deleted, x, 1, &arg,
                         &len);
    if (rc != RJQ_OK) {
        free(x->id);
        free(x);
    }
    return rc;
}

/* ---- status ------------------------------------------------------------- */

/* One number of a record: digits only, at most 2^62. */
static int record_num(const char **p, long long *out) {
    const char *s = *p;
    size_t n = strspn(s, "0123456789");
    if (n == 0 || n > 19) return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || end != s + n || v > RJQ__TIME_MAX) return -1;
    *out = v;
    *p = s + n;
    if (**p == ' ') (*p)++;
    else if (**p != '\0') return -1;
    return 0;
}

/* batch.lua's record into info (its strings point into state, which
 * holds at least 16 bytes). 0, or -1 for a record that is not rjq's. */
static int parse_text(const char *text, size_t len, rjq_batch_info *info, char *state) {
    if (text == NULL || len > 300 || memchr(text, '\0', len)) return -1;
    char rec[301];
    memcpy(rec, text, len);
    rec[len] = '\0';
    const char *p = rec;
    size_t sl = strcspn(p, " ");
    if (!((sl == 7 && memcmp(p, "pending", 7) == 0) || (sl == 9 && memcmp(p, "completed", 9) == 0) ||
          (sl == 4 && memcmp(p, "dead", 4) == 0)) || p[sl] != ' ')
        return -1;
    memcpy(state, p, sl);
    state[sl] = '\0';
    info->state = state;
    p += sl + 1;
    long long sealed;
    long long *nums[] = {&sealed, &info->total, &info->completed, &info->dead, &info->cancelled,
                         &info->created_ms, &info->ended_ms};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        if (record_num(&p, nums[i]) != 0) return -1;
    if (sealed > 1) return -1;
    info->sealed = (int)sealed;
    /* the flags: '-' or which completion jobs it has */
    size_t fl = strcspn(p, " ");
    if (fl == 0) return -1;
    info->has_on_complete = memchr(p, 'c', fl) != NULL;
    info->has_on_success = memchr(p, 's', fl) != NULL;
    return 0;
}

static int parse_record(const redisReply *r, rjq_batch_info *info, char *state) {
    if (r->type != REDIS_REPLY_STRING) return -1;
    return parse_text(r->str, r->len, info, state);
}

typedef struct get_ctx {
    rjq_queue *q;
    rjq_batch_info_cb *cb;
    void *data;
    int timed_out;           /* rjq_batch_await's read at its timeout */
    char id[];
} get_ctx;

static void on_got(rjq_client *c, int status, redisReply *r, void *priv) {
    get_ctx *x = priv;
    rjq_batch_info info;
    char state[16];
    memset(&info, 0, sizeof info);
    info.id = x->id;
    if (status == RJQ_OK && r->type == REDIS_REPLY_NIL) {
        status = RJQ_ENOTFOUND;
    } else if (status == RJQ_OK && parse_record(r, &info, state) != 0) {
        rjq__errmsg(c, "batch: its record is not rjq's (or an unexpected reply)");
        status = RJQ_EPROTO;
    }
    if (x->timed_out) {
        /* the await's timeout: its status then (ended meanwhile: RJQ_OK) */
        int ended = status == RJQ_OK && strcmp(info.state, "pending") != 0;
        x->cb(c, ended ? RJQ_OK : RJQ_ETIMEDOUT, status == RJQ_OK ? &info : NULL, x->data);
    } else {
        x->cb(c, status, status == RJQ_OK ? &info : NULL, x->data);
    }
    rjq__queue_release(x->q);
    free(x);
}

static int send_get(rjq_queue *q, const char *id, rjq_batch_info_cb *cb, void *data,
                    int timed_out) {
    size_t n = strlen(id);
    get_ctx *x = malloc(sizeof *x + n + 1);
    if (x == NULL) return RJQ_ENOMEM;
    x->q = q;
    x->cb = cb;
    x->data = data;
    x->timed_out = timed_out;
    memcpy(x->id, id, n + 1);
    int rc = rjq__batch_call(q, "get", id, RJQ__REQ_RETRY, on_got, x, 0, NULL, NULL);
    if (rc != RJQ_OK) free(x);
    return rc;
}

int rjq_batch_get(rjq_queue *bq, const char *id, rjq_batch_info_cb *cb, void *data) {
    int rc = usable(bq, id, cb != NULL);
    if (rc == RJQ_OK && id == NULL) rc = RJQ_EINVAL;
    return rc != RJQ_OK ? rc : send_get(bq, id, cb, data, 0);
}

/* ---- await: over the client's reply channel (await.c) ------------------ */

/* The table key of batch id of q: "<batches key> <id>" (no job key is
 * that: a job's is "...:job:<id>"), as batch.lua's end publishes it. */
static char *await_key(rjq_queue *q, const char *id, size_t idlen, size_t *idoff) {
    size_t klen;
    const char *k = rjq__queue_key(q, RJQ__K_BATCHES, &klen);
    char *key = malloc(klen + 1 + idlen + 1);
    if (key == NULL) return NULL;
    memcpy(key, k, klen);
    key[klen] = ' ';
    memcpy(key + klen + 1, id, idlen);
    key[klen + 1 + idlen] = '\0';
    *idoff = klen + 1;
    return key;
}

/* batch.lua's watch: op, prefix, wake, then the channel (in the id's
 * place) and the ids (await.c appends them). */
static void await_args(rjq__argv *v, rjq_queue *q, const char *channel) {
    rjq__argv_str(v, "watch");
    rjq__argv_key(v, q, RJQ__K_JOB);
    rjq__argv_key(v, q, RJQ__K_WAKE);
    rjq__argv_str(v, channel);
}

static const rjq__await_kind batch_await_kind = {await_key, RJQ__S_BATCH, await_args};

typedef struct waiter {
    rjq_queue *q;
    rjq_batch_info_cb *cb;
    void *data;
} waiter;

/* The await's end (await.c calls it once): the record it was answered
 * with, or an error; at its timeout one more read gives the status. */
static void on_awaited(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    waiter *w = data;
    if (status == RJQ_OK && o == NULL) status = RJQ_EPROTO; /* (await.c gives one with a key) */
    if (status == RJQ_OK) {
        rjq_batch_info info;
        char state[16];
        memset(&info, 0, sizeof info);
        info.id = o->id;
        if (parse_text(o->result, o->result_len, &info, state) == 0) {
            w->cb(c, RJQ_OK, &info, w->data);
        } else {
            rjq__errmsg(c, "batch: its record is not rjq's (or an unexpected message)");
            w->cb(c, RJQ_EPROTO, NULL, w->data);
        }
    } else if (status == RJQ_ETIMEDOUT) {
        int rc = rjq__accepting(c) && o && o->id ? send_get(w->q, o->id, w->cb, w->data, 1)
                                                 : RJQ_ECLOSED;
        if (rc != RJQ_OK) w->cb(c, RJQ_ETIMEDOUT, NULL, w->data);
    } else {
        /* ('cancelled': a forced delete took it) */
        w->cb(c, status == RJQ_EJOBCANCELED ? RJQ_ENOTFOUND : status, NULL, w->data);
    }
    free(w);
}

int rjq_batch_await(rjq_queue *bq, const char *id, long timeout_ms, rjq_batch_info_cb *cb,
                    void *data) {
    int rc = usable(bq, id, cb != NULL);
    if (rc == RJQ_OK && (id == NULL || timeout_ms <= 0)) rc = RJQ_EINVAL;
    if (rc != RJQ_OK) return rc;
    waiter *w = malloc(sizeof *w);
    if (w == NULL) return RJQ_ENOMEM;
    w->q = bq;
    w->cb = cb;
    w->data = data;
    rc = rjq__await_other(bq, &batch_await_kind, id, timeout_ms, on_awaited, w);
    if (rc != RJQ_OK) free(w);
    return rc;
}

/* ---- list ---------------------------------------------------------------- */

/* A listing cursor: batch.lua's "<15 digits>:<id>". */
#define LIST_CURSOR_MAX (RJQ_JOB_ID_MAX + 16)

typedef struct list_ctx {
    rjq_queue *q;
    rjq_batches_cb *cb;
    void *data;
} list_ctx;

/* One listed batch as the callback sees it (its strings in it). */
typedef struct listed {
    char id[RJQ_JOB_ID_MAX + 1];
    char state[16];
} listed;

static int reply_text(const redisReply *e, size_t max) {
    return e->type == REDIS_REPLY_STRING && e->len <= max && memchr(e->str, '\0', e->len) == NULL;
}

static void on_listed(rjq_client *c, int status, redisReply *r, void *priv) {
    list_ctx *x = priv;
    /* batch.lua list: { cursor, id, record, ... } */
    if (status == RJQ_OK &&
        (r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 1 || r->elements > 1 + 2 * 1000 ||
         !reply_text(r->element[0], LIST_CURSOR_MAX))) {
        rjq__errmsg(c, "batch list: unexpected reply");
        status = RJQ_EPROTO;
    }
    size_t n = status == RJQ_OK ? r->elements / 2 : 0;
    rjq_batch_info *infos = NULL;
    listed *names = NULL;
    if (status == RJQ_OK && n > 0) {
        infos = calloc(n, sizeof *infos);
        names = calloc(n, sizeof *names);
        if (infos == NULL || names == NULL) status = RJQ_ENOMEM;
    }
    for (size_t i = 0; status == RJQ_OK && i < n; i++) {
        const redisReply *id = r->element[1 + 2 * i];
        if (!reply_text(id, RJQ_JOB_ID_MAX) || id->len == 0 ||
            parse_record(r->element[2 + 2 * i], &infos[i], names[i].state) != 0) {
            rjq__errmsg(c, "batch list: a record that is not rjq's (or an unexpected reply)");
            status = RJQ_EPROTO;
            break;
        }
        memcpy(names[i].id, id->str, id->len);
        names[i].id[id->len] = '\0';
        infos[i].id = names[i].id;
    }
    char next[LIST_CURSOR_MAX + 1] = "";
    if (status == RJQ_OK) {
        memcpy(next, r->element[0]->str, r->element[0]->len);
        next[r->element[0]->len] = '\0';
    }
    if (status == RJQ_OK) x->cb(c, RJQ_OK, infos, n, next[0] ? next : NULL, x->data);
    else x->cb(c, status, NULL, 0, NULL, x->data);
    free(infos);
    free(names);
    rjq__queue_release(x->q);
    free(x);
}

int rjq_batch_list(rjq_queue *bq, const char *state, const char *after, long limit,
                   rjq_batches_cb *cb, void *data) {
    int rc = usable(bq, NULL, cb != NULL);
    if (rc != RJQ_OK) return rc;
    if (state && strcmp(state, "pending") != 0 && strcmp(state, "completed") != 0 &&
        strcmp(state, "dead") != 0)
        rc = RJQ_EINVAL;
    if (limit < 1 || limit > 1000) rc = RJQ_EINVAL;
    if (after && after[0]) {
        size_t n = strlen(after), d = strspn(after, "0123456789");
        if (n > LIST_CURSOR_MAX || d != 15 || after[d] != ':' || !valid_batch_id(after + d + 1))
            rc = RJQ_EINVAL;
    }
    if (rc != RJQ_OK) {
        rjq__errmsg(rjq_queue_get_client(bq),
                    "batch list: bad arguments (state pending, completed, dead or NULL; "
                    "limit 1..1000; a cursor a listing gave)");
        return rc;
    }
    list_ctx *x = malloc(sizeof *x);
    if (x == NULL) return RJQ_ENOMEM;
    x->q = bq;
    x->cb = cb;
    x->data = data;
    char lim[24];
    snprintf(lim, sizeof lim, "%ld", limit);
    const char *args[2] = {after ? after : "", lim};
    size_t lens[2] = {strlen(args[0]), strlen(lim)};
    rc = rjq__batch_call(bq, "list", state ? state : "", RJQ__REQ_RETRY, on_listed, x, 2, args,
                         lens);
    if (rc != RJQ_OK) free(x);
    return rc;
}

static void state_abort(rjq_client *c, void *state);
static void state_close(rjq_client *c, void *state);
/* (cancel: after requests were cancelled, an add gathered by a cancelled
 * request's callback; the awaits end with the client's awaits, await.c) */
static const rjq__feature batch_feature = {
    .name = "batches", .abort = state_abort, .cancel = state_abort, .close = state_close};

static batch_state *state_of(rjq_client *c) {
    batch_state *st = rjq__feature_ensure(c, &batch_feature, sizeof *st);
    if (st == NULL) return NULL;
    if (!st->timer_ok) {
        if (rjq__timer_setup(c, &st->flush, on_flush, st) != RJQ_OK) return NULL;
        st->timer_ok = 1;
        st->c = c;
        rjq__gather_init(&st->adds);
    }
    return st;
}

/* The client's destruction, before requests are cancelled: the adds not
 * sent yet end with RJQ_ECANCELED. */
static void state_abort(rjq_client *c, void *state) {
    batch_state *st = state;
    if (st->timer_ok) rjq__timer_stop(c, &st->flush);
    for (rjq__gather_link *x; (x = rjq__gather_pop(&st->adds)) != NULL;)
        member_end(c, (member_ctx *)x, RJQ_ECANCELED);
}

static void state_close(rjq_client *c, void *state) {
    batch_state *st = state;
    if (st->timer_ok) rjq__timer_teardown(c, &st->flush);
    free(st);
}

/* Element i of the page an rjq_batches_cb gets (rjq.h "Extensible structs": the library's own
 * stride, whatever sizeof the caller was built with). */
const rjq_batch_info *rjq_batch_info_get(const rjq_batch_info *list, size_t i) {
    return list ? &list[i] : NULL;
}
