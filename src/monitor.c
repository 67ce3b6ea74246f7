/*
 * Queue event streams for monitors. A monitor listens on the queue's
 * events channel and keeps the queue's `monitored` flag key alive (SET PX,
 * refreshed at a third of its TTL); the scripts publish events only while
 * that key exists. The client's monitors are the feature's state.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "monitor.h"
#include "queue.h"
#include "shard.h"
#include "validate.h"

#define FLAG_TTL_MS 15000

struct rjq_monitor {
    rjq_queue *q;
    rjq_monitor_cb *cb;
    void *data;
    long long time;           /* server ms of the event being delivered */
    rjq__timer refresh;
    int resyncs;              /* 1: "resync" events wanted (rjq_monitor_enable_resyncs) */
    int confirmed;            /* the subscription is confirmed (since the last loss) */
    int resync_due;           /* a "resync" waits for the next flag SET's reply */
    struct refresh_ticket *ticket; /* the flag SET in flight, if any */
    struct rjq_monitor *next;
    /* A sharded queue's monitor is a monitor per shard (its parts, each with
     * the caller's cb and data) and this one, which streams nothing itself:
     * a part's event sets the whole's time. */
    struct rjq_monitor *whole;            /* a part's: the sharded queue's monitor */
    struct rjq_monitor *parts[RJQ_SHARDS_MAX];
    int nparts;
    int is_whole;                         /* 1: this one is a whole (parts may come later) */
    struct learn_ticket *learn;           /* a whole made before q knew its layout: its wait */
};

/* A whole's wait for its queue's layout: its monitor, or NULL once gone. */
typedef struct learn_ticket {
    struct rjq_monitor *m;
} learn_ticket;

typedef struct monitors {
    rjq_monitor *head;
} monitors;

int rjq__event_parse(const char *msg, size_t len, char ev[RJQ__EVENT_MAX + 1],
                     char id[RJQ_JOB_ID_MAX + 1], long long *time) {
    const char *sp = memchr(msg, ' ', len), *end = msg + len;
    if (sp == NULL || sp == msg || (size_t)(sp - msg) > RJQ__EVENT_MAX) return -1;
    const char *rest = sp + 1, *sp2 = memchr(rest, ' ', (size_t)(end - rest));
    const char *id_end = sp2 ? sp2 : end;
    if ((size_t)(id_end - rest) > RJQ_JOB_ID_MAX || memchr(msg, '\0', (size_t)(id_end - msg)))
        return -1; /* (a NUL would cut the name or id short) */
    long long t = 0;
    if (sp2 && rjq__parse_ll(sp2 + 1, (size_t)(end - sp2 - 1), 0, RJQ__TIME_MAX, &t)) return -1;
    memcpy(ev, msg, (size_t)(sp - msg));
    ev[sp - msg] = '\0';
    memcpy(id, rest, (size_t)(id_end - rest));
    id[id_end - rest] = '\0';
    *time = t;
    return 0;
}

/* One event line to m's callback (a malformed one is skipped). */
static void one_event(rjq_client *c, rjq_monitor *m, const char *msg, size_t len) {
    char ev[RJQ__EVENT_MAX + 1], id[RJQ_JOB_ID_MAX + 1];
    if (rjq__event_parse(msg, len, ev, id, &m->time) == 0) {
        if (m->whole) m->whole->time = m->time;
        m->cb(c, ev, id, m->data);
    }
}

static const rjq__feature monitors_feature;
static void on_refresh(rjq__timer *t);

/* m is still one of c's monitors (a callback may have stopped it) and c
 * still takes calls (one may have freed it). */
static int still_there(rjq_client *c, const rjq_monitor *m) {
    if (!rjq__accepting(c)) return 0;
    monitors *ms = rjq__feature_state(c, &monitors_feature);
    for (const rjq_monitor *x = ms ? ms->head : NULL; x; x = x->next)
        if (x == m) return 1;
    return 0;
}

/* A message holds the events of one script call, one a line (lib.lua,
 * monitor); each goes to the callback while the monitor is there. */
static void on_event(rjq_client *c, const char *channel, const char *msg, size_t len, void *arg) {
    rjq_monitor *m = arg;
    (void)channel;
    if (msg == NULL) { /* subscription confirmed (again): events before it are lost */
        m->confirmed = 1;
        if (m->resyncs) {
            m->resync_due = 1;
            on_refresh(&m->refresh); /* the flag first, then "resync" */
        }
        return;
    }
    const char *end = msg + len;
    while (msg < end) {
        const char *nl = memchr(msg, '\n', (size_t)(end - msg));
        const char *line_end = nl ? nl : end;
        one_event(c, m, msg, (size_t)(line_end - msg));
        msg = line_end + 1;
        if (msg < end && !still_there(c, m)) return;
    }
}

/* A flag SET in flight: its monitor, or NULL once that is gone. */
typedef struct refresh_ticket {
    rjq_monitor *m;
} refresh_ticket;

/* The flag SET's reply (SET ... GET: nil when the flag had lapsed, so
 * events may have gone unpublished). With resyncs wanted, "resync" goes
 * to the callback once the flag is known to be set again after a gap of
 * the subscription or of the flag: every event after it is delivered (the
 * reads the callback sends go after this SET). */
static void on_set(rjq_client *c, int status, redisReply *r, void *priv) {
    refresh_ticket *t = priv;
    rjq_monitor *m = t->m;
    free(t);
    if (m == NULL) return;
    m->ticket = NULL;
    if (status != RJQ_OK || r == NULL || !m->resyncs) return; /* (due: the next SET) */
    if (r->type == REDIS_REPLY_NIL) m->resync_due = 1;
    if (!m->resync_due || !m->confirmed || !rjq__accepting(c)) return;
    m->resync_due = 0;
    m->time = 0;
    if (m->whole) m->whole->time = 0;
    m->cb(c, "resync", "", m->data);
}

static void on_refresh(rjq__timer *t) {
    rjq_monitor *m = t->owner;
    rjq_queue *q = m->q;
    size_t klen;
    const char *key = rjq__queue_key(q, RJQ__K_MONITORED, &klen);
    const char *argv[6] = {"SET", key, "1", "PX", "15000", "GET"};
    size_t lens[6] = {3, klen, 1, 2, 5, 3};
    refresh_ticket *tk = m->ticket ? NULL : malloc(sizeof *tk);
    if (tk) { /* (one in flight is enough: its reply tells) */
        tk->m = m;
        if (rjq__command(rjq_queue_get_client(q), 0, on_set, tk, 6, argv, lens) == RJQ_OK) m->ticket = tk;
        else free(tk);
    }
    rjq__timer_start(rjq_queue_get_client(q), &m->refresh, FLAG_TTL_MS / 3);
}

static void monitor_free(rjq_monitor *m) {
    if (m->is_whole) { /* a whole: its parts are monitors of their own */
        if (m->learn) m->learn->m = NULL;
        free(m);
        return;
    }
    rjq_client *c = rjq_queue_get_client(m->q);
    rjq__timer_teardown(c, &m->refresh);
    if (m->ticket) m->ticket->m = NULL;
    rjq__unsubscribe(c, rjq__queue_key(m->q, RJQ__K_EVENTS, NULL), m);
    free(m);
}

static void monitors_close(rjq_client *c, void *state) {
    monitors *ms = state;
    (void)c;
    while (ms->head) {
        rjq_monitor *m = ms->head;
        ms->head = m->next;
        monitor_free(m);
    }
    free(ms);
}

static const rjq__feature monitors_feature = {.name = "monitors", .close = monitors_close};


/* Whole m's parts: a monitor of each of its queue's shards (of the queue
 * itself when it has one), each with m's cb and data. RJQ_OK, or an error
 * with the parts made so far still m's. (In rjq__enter: a part's flag SET
 * may run callbacks that free c.) */
static int attach_parts(rjq_client *c, rjq_monitor *m) {
    int n = rjq_queue_count_shards(m->q), rc = RJQ_OK;
    for (int i = 0; i < n && rc == RJQ_OK; i++) {
        rc = rjq_queue_monitor(rjq_queue_get_shard(m->q, i), m->cb, m->data, &m->parts[i]);
        if (rc == RJQ_OK) {
            m->parts[i]->whole = m;
            m->nparts = i + 1;
            if (m->resyncs) rjq_monitor_enable_resyncs(m->parts[i]);
        }
    }
    if (rc == RJQ_OK && !rjq__accepting(c)) rc = RJQ_ECLOSED;
    return rc;
}

/* A whole made before its queue knew its layout: the parts now (a part
 * that cannot be made leaves the whole without parts: nothing streamed). */
static void on_learnt(rjq_client *c, int status, void *data) {
    learn_ticket *t = data;
    rjq_monitor *m = t->m;
    free(t);
    if (m == NULL) return; /* (stopped meanwhile) */
    m->learn = NULL;
    if (status != RJQ_OK || !rjq__accepting(c)) return;
    rjq__enter(c);
    if (attach_parts(c, m) != RJQ_OK && rjq__accepting(c)) {
        for (int i = 0; i < m->nparts; i++) rjq_monitor_stop(m->parts[i]);
        m->nparts = 0;
    }
    rjq__leave(c);
}

/* A sharded queue (docs/sharding.md section 4): a monitor of each shard,
 * every one with cb and data, under one handle. On a handle still reading
 * its layout (rjq_queue_open) the handle now, its parts once it is read. */
static int monitor_shards(rjq_queue *q, rjq_monitor_cb *cb, void *data, rjq_monitor **out,
                          int learning) {
    rjq_client *c = rjq_queue_get_client(q);
    monitors *ms = rjq__feature_ensure(c, &monitors_feature, sizeof *ms);
    rjq_monitor *m = ms ? calloc(1, sizeof *m) : NULL;
    if (m == NULL) return RJQ_ENOMEM;
    m->q = q;
    m->cb = cb;
    m->data = data;
    m->is_whole = 1;
    int rc = RJQ_OK;
    if (learning) {
        learn_ticket *t = malloc(sizeof *t);
        if (t == NULL) {
            free(m);
            return RJQ_ENOMEM;
        }
        t->m = m;
        rc = rjq__queue_when_learnt(q, on_learnt, t);
        if (rc == RJQ_OK) {
            m->learn = t;
        } else {
            free(t);
            free(m);
            return rc == 1 ? RJQ_EINVAL : rc; /* (1: cannot be, learning was just asked) */
        }
        m->next = ms->head;
        ms->head = m;
        rjq__queue_use(q);
        *out = m;
        return RJQ_OK;
    }
    rjq__enter(c);
    rc = attach_parts(c, m);
    if (rc != RJQ_OK) {
        if (rjq__accepting(c))
            for (int i = 0; i < m->nparts; i++) rjq_monitor_stop(m->parts[i]);
        free(m); /* (not listed yet: a client freed meanwhile freed the parts) */
    } else {
        m->next = ms->head;
        ms->head = m;
        rjq__queue_use(q);
        *out = m;
    }
    rjq__leave(c);
    return rc;
}

int rjq_queue_monitor(rjq_queue *q, rjq_monitor_cb *cb, void *data, rjq_monitor **out) {
    if (q == NULL || cb == NULL || out == NULL) return RJQ_EINVAL;
    rjq_client *c = rjq_queue_get_client(q);
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    if (rjq_queue_count_shards(q) > 1) return monitor_shards(q, cb, data, out, 0);
    if (rjq__queue_learning(q)) return monitor_shards(q, cb, data, out, 1);
    if (rjq__queue_refuse_front(q, "rjq_queue_monitor") != RJQ_OK) return RJQ_ESHARDED;
    monitors *ms = rjq__feature_ensure(c, &monitors_feature, sizeof *ms);
    rjq_monitor *m = ms ? calloc(1, sizeof *m) : NULL;
    if (m == NULL) return RJQ_ENOMEM;
    m->q = q;
    m->cb = cb;
    m->data = data;
    if (rjq__timer_setup(c, &m->refresh, on_refresh, m) != RJQ_OK) {
        free(m);
        return RJQ_ENOMEM;
    }
    int rc = rjq__subscribe(c, rjq__queue_key(q, RJQ__K_EVENTS, NULL), on_event, m);
    if (rc != RJQ_OK) {
        rjq__timer_teardown(c, &m->refresh);
        free(m);
        return rc;
    }
    m->next = ms->head;
    ms->head = m;
    rjq__queue_use(q); /* (rjq_queue_close refuses until it stops) */
    /* The flag's SET may flush enqueues, whose callbacks may free c: then
     * the monitor goes with c and the call fails. */
    rjq__enter(c);
    on_refresh(&m->refresh);
    rc = rjq__accepting(c) ? RJQ_OK : RJQ_ECLOSED;
    if (rc == RJQ_OK) *out = m;
    rjq__leave(c);
    return rc;
}

int rjq_monitor_stop(rjq_monitor *m) {
    if (m == NULL) return RJQ_EINVAL;
    monitors *ms = rjq__feature_state(rjq_queue_get_client(m->q), &monitors_feature);
    for (rjq_monitor **p = &ms->head; *p; p = &(*p)->next) {
        if (*p == m) {
            *p = m->next;
            for (int i = 0; i < m->nparts; i++) rjq_monitor_stop(m->parts[i]);
            rjq__queue_unuse(m->q);
            monitor_free(m);
            return RJQ_OK;
        }
    }
    return RJQ_EINVAL;
}

int rjq_monitor_enable_resyncs(rjq_monitor *m) {
    if (m == NULL) return RJQ_EINVAL;
    for (int i = 0; i < m->nparts; i++) rjq_monitor_enable_resyncs(m->parts[i]);
    if (m->is_whole) m->resyncs = 1; /* (for the parts made later) */
    if (m->resyncs) return RJQ_OK;
    m->resyncs = 1;
    if (m->confirmed) { /* confirmed before this call: a resync now */
        m->resync_due = 1;
        on_refresh(&m->refresh);
    }
    return RJQ_OK;
}

long long rjq_monitor_get_time(const rjq_monitor *m) {
    return m->time;
}
