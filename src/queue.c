/*
 * Queue handles: key names, settings, and the per-queue tick that sends
 * what the loop turn gathered (enqueues, completions) and lets workers
 * claim behind it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char *const key_suffix[RJQ__K_COUNT] = {
    [RJQ__K_READY] = "ready",         [RJQ__K_PRIO] = "prio",
    [RJQ__K_DELAYED] = "delayed",     [RJQ__K_ACTIVE] = "active",
    [RJQ__K_DEAD] = "dead",           [RJQ__K_COMPLETED] = "completed",
    [RJQ__K_STATS] = "stats",         [RJQ__K_GUARD] = "sweep",
    [RJQ__K_JOB] = "job:",            [RJQ__K_WAKE] = "wake",
    [RJQ__K_EVENTS] = "events",       [RJQ__K_MONITORED] = "monitored",
    [RJQ__K_IDLE] = "idle",
    [RJQ__K_PAYLOAD] = "payload",     [RJQ__K_STATE] = "state",
    [RJQ__K_OPTIONS] = "options",     [RJQ__K_RESULT] = "result",
    [RJQ__K_ERROR] = "error",         [RJQ__K_FAILTOKEN] = "failtoken",
    [RJQ__K_WATCHERS] = "watchers",
};

static void on_tick(rjq__timer *t) {
    rjq_queue *q = t->owner;
    rjq__enqueue_flush(q);
    rjq__complete_flush(q);
    rjq__workers_tick(q);
}

void rjq__queue_kick(rjq_queue *q) {
    if (!rjq__timer_armed(&q->tick)) rjq__timer_start(q->c, &q->tick, 0);
}

void rjq__queue_free(rjq_queue *q) {
    rjq__timer_stop(q->c, &q->tick);
    for (int i = 0; i < 2; i++) rjq__enqueue_batch_free(&q->enq[i]);
    for (int i = 0; i < RJQ__K_COUNT; i++) free(q->keys[i]);
    free(q->pending);
    free(q->push_channel);
    free(q->name);
    free(q);
}

static int make_keys(rjq_queue *q, const char *prefix) {
    for (int i = 0; i < RJQ__K_COUNT; i++) {
        int n = snprintf(NULL, 0, "%s:{%s}:%s", prefix, q->name, key_suffix[i]);
        q->keys[i] = malloc((size_t)n + 1);
        if (q->keys[i] == NULL) return RJQ_ENOMEM;
        snprintf(q->keys[i], (size_t)n + 1, "%s:{%s}:%s", prefix, q->name, key_suffix[i]);
        q->key_lens[i] = (size_t)n;
    }
    return RJQ_OK;
}

int rjq_queue_open(rjq_client *c, const char *name, const rjq_queue_options *opts,
                   rjq_queue **out) {
    if (c == NULL || out == NULL) return RJQ_EINVAL;
    *out = NULL;
    if (c->closing) return RJQ_ECLOSED;
    if (!rjq__valid_queue_name(name)) {
        rjq__errmsg(c, "queue names are 1..%d bytes without '{', '}', spaces or control characters",
                    RJQ__QUEUE_NAME_MAX);
        return RJQ_EQUEUENAME;
    }
    if (opts && (opts->retention_ms < -1 || opts->completed_max < -1 || opts->dead_max < 0))
        return RJQ_EINVAL;
    rjq_queue *q = calloc(1, sizeof *q);
    if (q == NULL) return RJQ_ENOMEM;
    q->c = c;
    q->retention_ms = opts && opts->retention_ms ? opts->retention_ms : 3600000;
    q->completed_max = opts && opts->completed_max ? opts->completed_max : 100000;
    q->dead_max = opts && opts->dead_max ? opts->dead_max : 100000;
    rjq__timer_init(&q->tick, on_tick, q);
    if ((q->name = strdup(name)) == NULL || make_keys(q, c->prefix) != RJQ_OK) {
        rjq__queue_free(q);
        return RJQ_ENOMEM;
    }
    q->next = c->queues;
    c->queues = q;
    *out = q;
    return RJQ_OK;
}

const char *rjq_queue_name(const rjq_queue *q) {
    return q->name;
}

rjq_client *rjq_queue_client(const rjq_queue *q) {
    return q->c;
}

void rjq__argv_keys(rjq__argv *a, const rjq_queue *q, const int *keys, int n) {
    rjq__argv_ll(a, n);
    for (int i = 0; i < n; i++) rjq__argv_key(a, q, keys[i]);
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
