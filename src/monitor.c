/*
 * Queue event streams for monitors. A monitor listens on the queue's
 * events channel and keeps the queue's `monitored` flag key alive (SET PX,
 * refreshed at a third of its TTL); the scripts publish events only while
 * that key exists.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define FLAG_TTL_MS 15000

struct rjq_monitor {
    rjq_queue *q;
    rjq_monitor_cb *cb;
    void *data;
    rjq__timer refresh;
    struct rjq_monitor *next;
};

static void on_event(rjq_client *c, const char *channel, const char *msg, size_t len, void *arg) {
    rjq_monitor *m = arg;
    char ev[16], id[RJQ_JOB_ID_MAX + 1];
    (void)channel;
    if (msg == NULL) return; /* subscription confirmed */
    const char *sp = memchr(msg, ' ', len);
    if (sp == NULL || (size_t)(sp - msg) >= sizeof ev || len - (size_t)(sp - msg) - 1 > RJQ_JOB_ID_MAX)
        return;
    memcpy(ev, msg, (size_t)(sp - msg));
    ev[sp - msg] = '\0';
    size_t idlen = len - (size_t)(sp - msg) - 1;
    memcpy(id, sp + 1, idlen);
    id[idlen] = '\0';
    m->cb(c, ev, id, m->data);
}

static void ignore(rjq_client *c, int status, redisReply *r, void *priv) {
    (void)c, (void)status, (void)r, (void)priv;
}

static void on_refresh(rjq__timer *t) {
    rjq_monitor *m = t->owner;
    rjq_queue *q = m->q;
    const char *argv[5] = {"SET", q->keys[RJQ__K_MONITORED], "1", "PX", "15000"};
    rjq__command(q->c, 0, ignore, NULL, 5, argv, NULL);
    rjq__timer_start(q->c, &m->refresh, FLAG_TTL_MS / 3);
}

int rjq_queue_monitor(rjq_queue *q, rjq_monitor_cb *cb, void *data, rjq_monitor **out) {
    if (q == NULL || cb == NULL || out == NULL) return RJQ_EINVAL;
    rjq_client *c = q->c;
    if (c->closing) return RJQ_ECLOSED;
    rjq_monitor *m = calloc(1, sizeof *m);
    if (m == NULL) return RJQ_ENOMEM;
    m->q = q;
    m->cb = cb;
    m->data = data;
    int rc = rjq__subscribe(c, q->keys[RJQ__K_EVENTS], on_event, m);
    if (rc != RJQ_OK) {
        free(m);
        return rc;
    }
    rjq__timer_init(&m->refresh, on_refresh, m);
    on_refresh(&m->refresh);
    m->next = c->monitors;
    c->monitors = m;
    *out = m;
    return RJQ_OK;
}

static void monitor_free(rjq_monitor *m) {
    rjq_client *c = m->q->c;
    rjq__timer_stop(c, &m->refresh);
    rjq__unsubscribe(c, m->q->keys[RJQ__K_EVENTS], m);
    free(m);
}

int rjq_monitor_stop(rjq_monitor *m) {
    if (m == NULL) return RJQ_EINVAL;
    rjq_client *c = m->q->c;
    for (rjq_monitor **p = &c->monitors; *p; p = &(*p)->next) {
        if (*p == m) {
            *p = m->next;
            monitor_free(m);
            return RJQ_OK;
        }
    }
    return RJQ_EINVAL;
}

void rjq__monitors_free(rjq_client *c) {
    while (c->monitors) {
        rjq_monitor *m = c->monitors;
        c->monitors = m->next;
        monitor_free(m);
    }
}
