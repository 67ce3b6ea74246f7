/*
 * The re-splitter of a sharded queue (shard_resplitter.h): a small loop on
 * one timer, as the scheduler's (scheduler.c), with one call in flight:
 *   lease  (resplit.lua) take or keep the re-split lease; a standby waits
 *          for the holder's lease to run out; the holder gets the stored
 *          whole-queue limits; none stored (the queue never limited
 *          through its sharded handle): no lease taken, asked again after
 *          half a lease;
 *   step   with figures stored: one re-split (rjq__shard_resplit), its
 *          raises sent only within half the lease from the lease call's
 *          send (past that the lease may be another's: lowerings only);
 *   sleep  the period, then lease again (the renewal); after steps that
 *          changed no share, twice as long each time up to half the
 *          lease (an idle or steady queue costs less), the period again
 *          once one changes a share.
 * A holder that dies leaves the shares as its last call left them (a
 * valid split: lowerings first, raises bounded by what was given back);
 * the next holder takes over once its lease ran out.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "queue.h"
#include "shard_resplit.h"
#include "shard_resplitter.h"
#include "validate.h"

struct rjq__resplitter {
    rjq_client *c;
    rjq_queue *front;
    long period_ms, lease_ms;
    char token[48];
    int leading;
    long quiet_ms; /* the sleep after a step that changed nothing (doubles up to half the lease) */
    int busy;     /* a lease call or a step in flight */
    int stopping; /* freed while busy: its reply frees it */
    uint64_t lease_sent;
    int n;
    rjq_queue *sub[RJQ_SHARDS_MAX];
    rjq__timer timer;
};

static void tick(rjq__resplitter *d);

static void on_timer(rjq__timer *t) {
    tick(t->owner);
}

static void destroy(rjq__resplitter *d) {
    rjq__timer_teardown(d->c, &d->timer);
    free(d);
}

/* A reply came: 1 when it may go on (not stopped, client not ending); a
 * stopped one is freed here. */
static int replied(rjq__resplitter *d) {
    d->busy = 0;
    if (d->stopping) { /* (its handle closed: nothing else frees it, the client's end neither) */
        destroy(d);
        return 0;
    }
    return !rjq__closing(d->c); /* (else freed with the front's layout) */
}

static void sleep_for(rjq__resplitter *d, long long ms) {
    if (ms < 1 || ms > d->lease_ms) ms = d->period_ms;
    rjq__timer_start(d->c, &d->timer, (uint64_t)ms);
}

int rjq__shard_limits_parse(const char *s, size_t len, rjq_limits *out, long long *epoch) {
    char buf[96], *end;
    long long v[5] = {0};
    if (s == NULL || len == 0 || len >= sizeof buf) return RJQ_EPROTO;
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (strlen(buf) != len) return RJQ_EPROTO;
    char *p = buf;
    /* "1 C R W E"; an older library's value has no epoch E (0) */
    for (int i = 0; i < 5; i++) {
        if (*p < '0' || *p > '9') return RJQ_EPROTO; /* (no sign, no blank) */
        v[i] = strtoll(p, &end, 10);
        if (end == p || (*end != ' ' && *end != '\0') || (i < 3 && *end != ' ') ||
            (i == 4 && *end != '\0'))
            return RJQ_EPROTO;
        if (*end == '\0') break;
        p = end + 1;
    }
    if (v[0] != 1 || v[1] > INT32_MAX || v[2] > INT32_MAX || v[3] < 1 || v[3] > RJQ_DELAY_MAX ||
        v[4] < 0 || v[4] > RJQ__TIME_MAX)
        return RJQ_EPROTO;
    rjq_limits l = RJQ_LIMITS_INIT;
    l.concurrency = (long)v[1];
    l.rate = (long)v[2];
    l.rate_window_ms = (long)v[3];
    *out = l;
    if (epoch) *epoch = v[4];
    return RJQ_OK;
}

static void on_step(rjq_client *c, int status, long long n, void *data) {
    rjq__resplitter *d = data;
    if (!replied(d)) return;
    /* (RJQ_ETIMEDOUT: its raises were left for the next step; RJQ_ECANCELED:
     * the figures changed since its lease call read them, the next reads
     * the new ones) */
    if (status != RJQ_OK && status != RJQ_ETIMEDOUT && status != RJQ_ECANCELED)
        rjq__background_failed(c, status, "re-split");
    /* shares that stay put: steps further apart, up to half the lease
     * (its renewal); a change: the period again */
    if (status == RJQ_OK && n == 0) {
        d->quiet_ms = d->quiet_ms ? d->quiet_ms * 2 : d->period_ms * 2;
        if (d->quiet_ms > d->lease_ms / 2) d->quiet_ms = d->lease_ms / 2;
        if (d->quiet_ms < d->period_ms) d->quiet_ms = d->period_ms;
        sleep_for(d, d->quiet_ms);
        return;
    }
    d->quiet_ms = 0;
    sleep_for(d, d->period_ms);
}

static int lease_reply_ok(const redisReply *r) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3) return 0;
    for (int i = 0; i < 2; i++)
        if (r->element[i]->type != REDIS_REPLY_INTEGER) return 0;
    if (r->element[0]->integer < 0 || r->element[0]->integer > 2) return 0;
    if (r->element[0]->integer != 1) return r->element[2]->type == REDIS_REPLY_INTEGER;
    return r->element[2]->type == REDIS_REPLY_STRING;
}

static void on_lease(rjq_client *c, int status, redisReply *r, void *priv) {
    rjq__resplitter *d = priv;
    if (!replied(d)) return;
    rjq_limits whole = RJQ_LIMITS_INIT;
    long long epoch = 0;
    if (status == RJQ_OK && !lease_reply_ok(r)) status = RJQ_EPROTO;
    if (status == RJQ_OK) {
        d->leading = r->element[0]->integer == 1;
        if (r->element[0]->integer == 2) { /* no limits stored: look again less often */
            sleep_for(d, d->lease_ms / 2);
            return;
        }
        if (!d->leading) { /* standby: until the holder's lease runs out */
            long long left = r->element[2]->integer;
            sleep_for(d, left > 0 ? left + 1 : d->period_ms);
            return;
        }
        const redisReply *f = r->element[2];
        if (f->len > 0) status = rjq__shard_limits_parse(f->str, f->len, &whole, &epoch);
        if (status == RJQ_OK && whole.concurrency == 0 && whole.rate == 0) {
            sleep_for(d, d->lease_ms / 2); /* limits lifted: nothing to re-split (lease kept) */
            return;
        }
    }
    if (status == RJQ_EPROTO) rjq__errmsg(c, "re-split: unexpected reply");
    if (status == RJQ_OK && d->n >= 2) {
        status = rjq__shard_resplit(d->sub, d->n, &whole, epoch,
                                    d->lease_sent + (uint64_t)d->lease_ms / 2, on_step, d);
        if (status == RJQ_OK) {
            d->busy = 1;
            return;
        }
    }
    if (status != RJQ_OK) rjq__background_failed(c, status, "re-split");
    sleep_for(d, d->period_ms);
}

/* Send resplit.lua: take or keep the lease (lease_ms), or give it up (0). */
static int send_lease(rjq__resplitter *d, long lease_ms, rjq__reply_fn *fn, void *priv) {
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, d->front, RJQ__S_RESPLIT);
    rjq__argv_str(&a, d->token);
    rjq__argv_ll(&a, lease_ms);
    int rc = a.oom ? RJQ_ENOMEM : rjq__script(d->c, RJQ__S_RESPLIT, 0, fn, priv, a.n, a.v, a.len);
    rjq__argv_free(&a);
    return rc;
}

static void tick(rjq__resplitter *d) {
    if (d->busy || d->stopping) return;
    if (!rjq__accepting(d->c)) return;
    d->lease_sent = rjq__now_ms();
    if (send_lease(d, d->lease_ms, on_lease, d) == RJQ_OK) d->busy = 1;
    else sleep_for(d, d->period_ms);
}

rjq__resplitter *rjq__resplitter_new(rjq_queue *front, long period_ms, long lease_ms) {
    rjq_client *c = rjq_queue_get_client(front);
    rjq__resplitter *d = calloc(1, sizeof *d);
    if (d == NULL) return NULL;
    d->c = c;
    d->front = front;
    d->period_ms = period_ms > 0 ? period_ms : RJQ__RESPLIT_PERIOD_MS;
    d->lease_ms = lease_ms > 0 ? lease_ms : RJQ__RESPLIT_LEASE_MS;
    if (d->lease_ms < 2 * d->period_ms) d->lease_ms = 2 * d->period_ms;
    rjq__holder_token(c, d->token, sizeof d->token);
    if (rjq__timer_setup(c, &d->timer, on_timer, d) != RJQ_OK) {
        free(d);
        return NULL;
    }
    rjq__timer_start(c, &d->timer, 0);
    return d;
}

void rjq__resplitter_shards(rjq__resplitter *d, rjq_queue *const *sub, int n) {
    d->n = n >= 2 && n <= RJQ_SHARDS_MAX ? n : 0;
    for (int i = 0; i < d->n; i++) d->sub[i] = sub[i];
}

int rjq__resplitter_leading(const rjq__resplitter *d) {
    return d->leading;
}

void rjq__resplitter_free(rjq__resplitter *d) {
    if (d == NULL) return;
    if (rjq__closing(d->c)) { /* (its call in flight was cancelled: nothing answers it) */
        destroy(d);
        return;
    }
    if (d->leading && rjq__accepting(d->c)) send_lease(d, 0, rjq__ignore_reply, NULL); /* another at once */
    rjq__timer_stop(d->c, &d->timer);
    d->n = 0;
    if (d->busy) d->stopping = 1; /* freed by the reply */
    else destroy(d);
}
