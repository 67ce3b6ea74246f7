/*
 * Queue handles: key names, settings, the client's list of queues, the
 * per-queue tick and the parts features hang on a queue (queue.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "queue.h"
#include "slot.h"
#include "validate.h"

struct rjq_queue {
    rjq_client *c;
    char *name;
    char *keys[RJQ__K_COUNT]; /* RJQ__K_JOB is the job name prefix */
    size_t key_lens[RJQ__K_COUNT];
    long long retention_ms;
    long completed_max, dead_max;
    long max_waiting;         /* 0: no bound */
    long long job_timeout_ms; /* 0: none */
    long long history_ms;     /* history flush period; -1: none */
    const rjq__part_ops *ops[RJQ__PART_COUNT];
    void *parts[RJQ__PART_COUNT];
    rjq__timer tick;          /* 0 ms: send what this loop turn gathered */
    int registered;           /* named in the client's registry (rjq__queue_register) */
    int register_due;         /* ... by this loop turn's tick */
    int closed;               /* rjq_queue_close: freed once nothing holds it */
    int holds;                /* work in flight that looks at it (rjq__queue_hold) */
    int users;                /* workers, monitors, schedulers on it (rjq__queue_use) */
    int front;                /* stands for other queues (rjq__queue_set_front) */
    struct rjq_queue *next;
};

static const rjq__feature queues_feature;

/* The client's queues (the feature's state). */
typedef struct queues {
    rjq_queue *head;
} queues;

/* ---- parts and the tick ------------------------------------------------- */

void *rjq__queue_part(const rjq_queue *q, int which) {
    RJQ_ASSERT(which >= 0 && which < RJQ__PART_COUNT);
    return q->parts[which];
}

void rjq__queue_set_part(rjq_queue *q, int which, const rjq__part_ops *ops, void *state) {
    RJQ_ASSERT(which >= 0 && which < RJQ__PART_COUNT && ops != NULL && state != NULL);
    RJQ_ASSERT(q->parts[which] == NULL); /* a part is made once, with the first use */
    q->ops[which] = ops;
    q->parts[which] = state;
}

static void send_register(rjq_queue *q);
static void queue_drop(rjq_queue *q);

static void on_tick(rjq__timer *t) {
    rjq_queue *q = t->owner;
    for (int i = 0; i < RJQ__PART_COUNT && !rjq__closing(q->c); i++)
        if (q->ops[i] && q->ops[i]->tick) q->ops[i]->tick(q, q->parts[i]);
    if (q->register_due && !rjq__closing(q->c)) {
        q->register_due = 0;
        if (rjq_client_is_connected(q->c)) send_register(q); /* else when it connects */
    }
    /* (the parts' ticks sent what was left: what they sent holds q) */
    if (q->closed && q->holds == 0 && q->users == 0 && !rjq__closing(q->c)) queue_drop(q);
}

void rjq__queue_tick_now(rjq_queue *q) {
    if (!rjq__timer_armed(&q->tick)) return;
    rjq__timer_stop(q->c, &q->tick);
    on_tick(&q->tick);
}

void rjq__queue_kick(rjq_queue *q) {
    if (!rjq__timer_armed(&q->tick)) rjq__timer_start(q->c, &q->tick, 0);
}

/* ---- lifetime --------------------------------------------------------------- */

static void queue_free(rjq_queue *q) {
    for (int i = 0; i < RJQ__K_COUNT; i++) free(q->keys[i]);
    free(q->name);
    free(q);
}

static void queues_abort(rjq_client *c, void *state) {
    queues *qs = state;
    (void)c;
    for (rjq_queue *q = qs->head; q; q = q->next)
        for (int i = 0; i < RJQ__PART_COUNT; i++)
            if (q->ops[i] && q->ops[i]->abort) q->ops[i]->abort(q, q->parts[i]);
}

static void queues_cancel(rjq_client *c, void *state) {
    queues *qs = state;
    (void)c;
    for (rjq_queue *q = qs->head; q; q = q->next)
        for (int i = RJQ__PART_COUNT - 1; i >= 0; i--)
            if (q->ops[i] && q->ops[i]->cancel) q->ops[i]->cancel(q, q->parts[i]);
}

/* A closed handle nothing holds any more: out of the client's list, its
 * parts let go of what they registered and close, and it is freed. */
static void queue_drop(rjq_queue *q) {
    queues *qs = rjq__feature_state(q->c, &queues_feature);
    for (rjq_queue **pp = &qs->head; *pp; pp = &(*pp)->next)
        if (*pp == q) {
            *pp = q->next;
            break;
        }
    for (int i = RJQ__PART_COUNT - 1; i >= 0; i--)
        if (q->ops[i] && q->ops[i]->release) q->ops[i]->release(q, q->parts[i]);
    for (int i = RJQ__PART_COUNT - 1; i >= 0; i--)
        if (q->ops[i] && q->ops[i]->close) q->ops[i]->close(q, q->parts[i]);
    rjq__timer_teardown(q->c, &q->tick);
    queue_free(q);
}

void rjq__queue_hold(rjq_queue *q) {
    q->holds++;
}

void rjq__queue_release(rjq_queue *q) {
    RJQ_ASSERT(q->holds > 0);
    if (--q->holds == 0 && q->closed) rjq__queue_kick(q); /* freed by its tick */
}

int rjq__queue_script(rjq_queue *q, int script, int flags, rjq__reply_fn *fn, void *priv,
                      rjq__argv *a) {
    rjq_client *c = rjq_queue_get_client(q);
    int rc = RJQ_ENOMEM;
    rjq__enter(c);
    if (!a->oom) rc = rjq__script(c, script, flags, fn, priv, a->n, a->v, a->len);
    if (rc == RJQ_OK) rjq__queue_hold(q);
    rjq__leave(c);
    rjq__argv_free(a);
    return rc;
}

int rjq__reply_id_existed(const redisReply *r, size_t n) {
    return rjq__reply_id_code(r, n, 1);
}

int rjq__reply_id_code(const redisReply *r, size_t n, long long max) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 * n) return 0;
    for (size_t i = 0; i < n; i++) {
        const redisReply *id = r->element[2 * i], *existed = r->element[2 * i + 1];
        if (id->type != REDIS_REPLY_STRING || id->len == 0 || id->len > RJQ_JOB_ID_MAX ||
            memchr(id->str, '\0', id->len) || existed->type != REDIS_REPLY_INTEGER ||
            existed->integer < 0 || existed->integer > max)
            return 0;
    }
    return 1;
}

void rjq__queue_use(rjq_queue *q) {
    q->users++;
}

void rjq__queue_unuse(rjq_queue *q) {
    RJQ_ASSERT(q->users > 0);
    q->users--;
}

void rjq__queue_set_front(rjq_queue *q, int on) {
    q->front = on != 0;
}

int rjq__queue_front(const rjq_queue *q) {
    return q->front;
}

int rjq__queue_refuse_front(const rjq_queue *q, const char *what) {
    if (!q->front) return RJQ_OK;
    rjq__errmsg(q->c, "queue %s is split into shards and %s acts on one queue's keys (use it "
                      "on each shard: rjq_queue_get_shard)", q->name, what);
    return RJQ_ESHARDED;
}

int rjq__queue_usable(const rjq_queue *q, const char *what) {
    if (q == NULL) return RJQ_EINVAL;
    int rc = rjq__queue_refuse_front(q, what);
    if (rc != RJQ_OK) return rc;
    return rjq__accepting(q->c) ? RJQ_OK : RJQ_ECLOSED;
}

int rjq__queue_closed(const rjq_queue *q) {
    return q->closed;
}

int rjq_queue_close(rjq_queue *q) {
    if (q == NULL || q->closed) return RJQ_EINVAL;
    if (q->users > 0) {
        rjq__errmsg(q->c, "queue %s: a worker, monitor or scheduler still runs on this handle "
                          "(stop it first)", q->name);
        return RJQ_EBUSY;
    }
    q->closed = 1;
    rjq__queue_kick(q); /* sends what this turn gathered, then frees it unless held */
    return RJQ_OK;
}

/* Every queue's parts close (workers before the push channel they use,
 * completions and enqueues last), then every queue goes. */
static void queues_close(rjq_client *c, void *state) {
    queues *qs = state;
    for (rjq_queue *q = qs->head; q; q = q->next)
        for (int i = RJQ__PART_COUNT - 1; i >= 0; i--)
            if (q->ops[i] && q->ops[i]->close) q->ops[i]->close(q, q->parts[i]);
    while (qs->head) {
        rjq_queue *q = qs->head;
        qs->head = q->next;
        rjq__timer_teardown(c, &q->tick);
        queue_free(q);
    }
    free(qs);
}

/* ---- the registry: "<prefix>:queues" (per master on a cluster) ---------------- */

/* A sorted set of the queues' names (all scores 0: in name order), so
 * rjq_client_list_queues() pages through them without scanning the keyspace.
 * A name is added once per handle that enqueues or runs a worker, and
 * again after every reconnect (a Redis that lost its data learns its
 * queues back). Its reply is not awaited: a user without ZADD on the key
 * (see rjq acl) only leaves the queue unlisted. */
static void on_registered(rjq_client *c, int status, redisReply *r, void *priv) {
    (void)c, (void)status, (void)r, (void)priv;
}

/* ---- once the client knows what it talks to --------------------------------- */

typedef struct routed {
    rjq__routed_fn *fn;
    void *arg;
} routed;

static void on_routed(rjq_client *c, int status, redisReply *r, void *priv) {
    routed *x = priv;
    (void)r;
    x->fn(c, status, x->arg);
    free(x);
}

int rjq__routed(const rjq_client *c) {
    return rjq__route_mode(c) != RJQ__ROUTE_UNKNOWN || rjq_client_is_connected(c);
}

int rjq__when_routed(rjq_client *c, rjq__routed_fn *fn, void *arg) {
    if (rjq__routed(c)) {
        fn(c, RJQ_OK, arg);
        return RJQ_OK;
    }
    routed *x = malloc(sizeof *x);
    if (x == NULL) return RJQ_ENOMEM;
    x->fn = fn;
    x->arg = arg;
    /* answered once the first connection's set-up (CLUSTER SLOTS) is done */
    const char *argv[1] = {"PING"};
    int rc = rjq__command(c, 0, on_routed, x, 1, argv, NULL);
    if (rc != RJQ_OK) free(x);
    return rc;
}

int rjq__queue_slot(const rjq_queue *q) {
    return rjq__key_slot(q->keys[RJQ__K_READY], q->key_lens[RJQ__K_READY]);
}

int rjq__queue_registry_pin(const rjq_queue *q) {
    if (rjq__route_mode(q->c) != RJQ__ROUTE_CLUSTER) return -1;
    int pin = rjq__route_master_pin(q->c, rjq__queue_slot(q));
    return pin >= 0 ? pin : -2;
}

/* On a Redis Cluster the registry is per master: the name goes to the
 * registry of the master that serves the queue's slot ("<prefix>:{queues-
 * <n>}", rjq__global_key_at), in that master's slot, by a plain idempotent
 * ZADD NX; rjq_client_list_queues merges every master's. A queue whose slot
 * moved is added to its new master's on the next connect; the old entry
 * stays (the listing shows the name once). */
static void send_register(rjq_queue *q) {
    int pin = rjq__queue_registry_pin(q);
    if (pin == -2) return; /* (no owner known) */
    char *key = rjq__global_key_at(q->c, RJQ__G_REGISTRY, pin);
    if (key == NULL) return; /* unlisted until the next connect */
    const char *argv[] = {"ZADD", key, "NX", "0", q->name};
    rjq__command(q->c, 0, on_registered, NULL, 5, argv, NULL);
    free(key);
}

/* (sent by the tick at the end of the turn: a command sent from inside
 * an enqueue would push its batch out early) */
void rjq__queue_register(rjq_queue *q) {
    if (q->registered) return;
    q->registered = q->register_due = 1;
    rjq__queue_kick(q);
}

static void queues_ready(rjq_client *c, void *state, int kind) {
    queues *qs = state;
    (void)c;
    if (kind != RJQ_CONN_COMMAND) return;
    for (rjq_queue *q = qs->head; q; q = q->next)
        if (q->registered) {
            q->register_due = 0;
            send_register(q);
        }
}

static const rjq__feature queues_feature = {.name = "queues",
                                            .ready = queues_ready,
                                            .abort = queues_abort,
                                            .cancel = queues_cancel,
                                            .close = queues_close};

static int make_keys(rjq_queue *q, const char *prefix) {
    for (int i = 0; i < RJQ__K_COUNT; i++) {
        RJQ_ASSERT(rjq__key_names[i] != NULL); /* every key has its name */
        int n = snprintf(NULL, 0, "%s:{%s}:%s", prefix, q->name, rjq__key_names[i]);
        q->keys[i] = malloc((size_t)n + 1);
        if (q->keys[i] == NULL) return RJQ_ENOMEM;
        snprintf(q->keys[i], (size_t)n + 1, "%s:{%s}:%s", prefix, q->name, rjq__key_names[i]);
        q->key_lens[i] = (size_t)n;
    }
    return RJQ_OK;
}

int rjq__queue_open(rjq_client *c, const char *name, const rjq_queue_options *given,
                    rjq_queue **out) {
    if (c == NULL || out == NULL) return RJQ_EINVAL;
    *out = NULL;
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    rjq_queue_options copy;
    const rjq_queue_options *opts = given ? &copy : NULL;
    if (given && rjq__sized_in(c, &copy, sizeof copy, given, "rjq_queue_options") != RJQ_OK)
        return RJQ_EINVAL;
    if (!rjq__valid_queue_name(name)) {
        rjq__errmsg(c, "queue names are 1..%d bytes without '{', '}', spaces or control characters",
                    RJQ__QUEUE_NAME_MAX);
        return RJQ_EQUEUENAME;
    }
    if (opts && (opts->retention_ms < -1 || opts->completed_max < -1 || opts->dead_max < 0 ||
                 opts->max_waiting < 0 || opts->job_timeout_ms < 0 ||
                 opts->job_timeout_ms > RJQ_DELAY_MAX || opts->history_flush_ms < -1 ||
                 opts->history_flush_ms > 3600000))
        return RJQ_EINVAL;
    queues *qs = rjq__feature_ensure(c, &queues_feature, sizeof *qs);
    rjq_queue *q = qs ? calloc(1, sizeof *q) : NULL;
    if (q == NULL) return RJQ_ENOMEM;
    q->c = c;
    q->retention_ms = opts && opts->retention_ms ? opts->retention_ms : 3600000;
    q->completed_max = opts && opts->completed_max ? opts->completed_max : 100000;
    q->dead_max = opts && opts->dead_max ? opts->dead_max : 100000;
    q->max_waiting = opts ? opts->max_waiting : 0;
    q->job_timeout_ms = opts ? opts->job_timeout_ms : 0;
    q->history_ms = opts && opts->history_flush_ms ? opts->history_flush_ms : 1000;
    if ((q->name = strdup(name)) == NULL || make_keys(q, rjq__client_prefix(c)) != RJQ_OK) {
        queue_free(q);
        return RJQ_ENOMEM;
    }
    if (rjq__timer_setup(c, &q->tick, on_tick, q) != RJQ_OK) {
        queue_free(q);
        return RJQ_ENOMEM;
    }
    q->next = qs->head;
    qs->head = q;
    *out = q;
    return RJQ_OK;
}

/* ---- accessors -------------------------------------------------------------- */

const char *rjq_queue_get_name(const rjq_queue *q) {
    return q->name;
}

rjq_client *rjq_queue_get_client(const rjq_queue *q) {
    return q->c;
}

int rjq_queue_get_slot(const rjq_queue *q) {
    if (q == NULL) return RJQ_EINVAL;
    return rjq__key_slot(q->name, strlen(q->name));
}

rjq_queue *rjq__queue_first(const rjq_client *c) {
    queues *qs = rjq__feature_state(c, &queues_feature);
    return qs ? qs->head : NULL;
}

rjq_queue *rjq__queue_next(const rjq_queue *q) {
    return q->next;
}

const char *rjq__queue_key(const rjq_queue *q, int k, size_t *len) {
    RJQ_ASSERT(k >= 0 && k < RJQ__K_COUNT);
    if (len) *len = q->key_lens[k];
    return q->keys[k];
}

long long rjq__queue_retention_ms(const rjq_queue *q) {
    return q->retention_ms;
}

long rjq__queue_completed_max(const rjq_queue *q) {
    return q->completed_max;
}

long rjq__queue_max_waiting(const rjq_queue *q) {
    return q->max_waiting;
}

long long rjq__queue_job_timeout_ms(const rjq_queue *q) {
    return q->job_timeout_ms;
}

long long rjq__queue_history_ms(const rjq_queue *q) {
    return q->history_ms;
}

long rjq__queue_dead_max(const rjq_queue *q) {
    return q->dead_max;
}

void rjq__argv_key(rjq__argv *a, const rjq_queue *q, int k) {
    RJQ_ASSERT(k >= 0 && k < RJQ__K_COUNT);
    rjq__argv_add(a, q->keys[k], q->key_lens[k]);
}

void rjq__buf_key(rjq__buf *b, const rjq_queue *q, int k) {
    RJQ_ASSERT(k >= 0 && k < RJQ__K_COUNT);
    rjq__buf_arg(b, q->keys[k], q->key_lens[k]);
}

void rjq__argv_script_keys(rjq__argv *a, const rjq_queue *q, int s) {
    RJQ_ASSERT(s >= 0 && s < RJQ__SCRIPT_COUNT);
    const rjq__script_keys_def *d = &rjq__script_keys[s];
    RJQ_ASSERT(!d->global && d->n == rjq__scripts[s].nkeys);
    rjq__argv_ll(a, d->n);
    for (int i = 0; i < d->n; i++) rjq__argv_key(a, q, d->keys[i]);
}

void rjq__buf_script_keys(rjq__buf *b, const rjq_queue *q, int s) {
    RJQ_ASSERT(s >= 0 && s < RJQ__SCRIPT_COUNT);
    const rjq__script_keys_def *d = &rjq__script_keys[s];
    RJQ_ASSERT(!d->global && d->n == rjq__scripts[s].nkeys);
    rjq__buf_ll(b, d->n);
    for (int i = 0; i < d->n; i++) rjq__buf_key(b, q, d->keys[i]);
}

char *rjq__global_key(const rjq_client *c, int g) {
    RJQ_ASSERT(g >= 0 && g < RJQ__G_COUNT);
    const char *prefix = rjq__client_prefix(c);
    size_t n = strlen(prefix) + 1 + strlen(rjq__global_names[g]) + 1;
    char *key = malloc(n);
    if (key) snprintf(key, n, "%s:%s", prefix, rjq__global_names[g]);
    return key;
}

char *rjq__global_key_at(const rjq_client *c, int g, int pin) {
    RJQ_ASSERT(g >= 0 && g < RJQ__G_COUNT && pin < RJQ__SLOTS);
    if (pin < 0) return rjq__global_key(c, g);
    /* "{base}rest" -> "{base-<n>}rest"; "name" -> "{name-<n>}" */
    const char *name = rjq__global_names[g], *rest = "";
    char base[64];
    if (name[0] == '{') {
        const char *close = strchr(name, '}');
        RJQ_ASSERT(close != NULL && (size_t)(close - name) < sizeof base);
        snprintf(base, sizeof base, "%.*s", (int)(close - name - 1), name + 1);
        rest = close + 1;
    } else {
        RJQ_ASSERT(strlen(name) < sizeof base);
        snprintf(base, sizeof base, "%s", name);
    }
    char tag[sizeof base + 24];
    if (rjq__slot_tag(base, pin, tag, sizeof tag) != 0) return NULL;
    const char *prefix = rjq__client_prefix(c);
    size_t n = strlen(prefix) + strlen(tag) + strlen(rest) + 4;
    char *key = malloc(n);
    if (key) snprintf(key, n, "%s:{%s}%s", prefix, tag, rest);
    return key;
}

int rjq__global_script_keys(int s, const char *const names[RJQ__G_COUNT], char num[16],
                            const char **out, int cap) {
    RJQ_ASSERT(s >= 0 && s < RJQ__SCRIPT_COUNT);
    const rjq__script_keys_def *d = &rjq__script_keys[s];
    RJQ_ASSERT(d->global && d->n == rjq__scripts[s].nkeys && d->n < cap);
    snprintf(num, 16, "%d", d->n);
    out[0] = num;
    for (int i = 0; i < d->n; i++) out[1 + i] = names[d->keys[i]];
    return 1 + d->n;
}

char *rjq__job_key(const rjq_queue *q, const char *id, size_t idlen) {
    size_t plen = q->key_lens[RJQ__K_JOB];
    char *key = malloc(plen + idlen + 1);
    if (key == NULL) return NULL;
    memcpy(key, q->keys[RJQ__K_JOB], plen);
    memcpy(key + plen, id, idlen);
    key[plen + idlen] = '\0';
    return key;
}
