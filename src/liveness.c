/*
 * Liveness of the client's two connections, whatever loop glue runs them
 * (it needs only the client's own timer).
 *
 * A watchdog ticks a few times per command timeout (at most once a
 * second, and no Redis command when there is traffic):
 * - Command connection: when the oldest request in flight has waited
 *   longer than command_timeout_ms, the connection is dead (a stopped
 *   server, a half-open TCP connection that no error will ever end): it is
 *   dropped and made again; requests that may be re-sent are, the others
 *   end with RJQ_ETIMEDOUT. Its wait counts from when it was sent, or from
 *   the last tick that saw bytes of a reply arrive (note_arrival), so a
 *   reply of many MiB that takes longer than that to transfer is not taken
 *   for none (dropping it would send the request again, to be dropped
 *   again: a claim of a huge job looped so). Requests that waited that
 *   long for a connection end the same way. A connection with nothing to
 *   read for ping_interval_ms is sent TIME (a ping that also tells the
 *   client the server's clock), so an idle one is checked too.
 * - Subscriber connection: it only ever receives, so it is probed with a
 *   message to itself: when it has been silent for ping_interval_ms the
 *   command connection PUBLISHes to a channel only this client listens on
 *   ("<prefix>:reply:<random>:live", in the namespace of the await reply
 *   channels, so an ACL that lets a client await lets it probe). If the
 *   message does not arrive within command_timeout_ms, or the server says
 *   nobody is subscribed to it (the subscriber connection is gone on the
 *   server's side), the subscriber connection is dropped and made again
 *   (its channels are subscribed again and their listeners catch up). A
 *   subscriber connection whose probe channel is still not confirmed
 *   command_timeout_ms after its set-up is dropped too. An ACL that
 *   refuses the probe channel (no "<prefix>:reply:*") leaves the
 *   subscriber connection unprobed: pubsub.c reported the refusal and
 *   does not subscribe the channel again.
 * - A job found stale (worker_state.c) asks for TIME at once, and its answer
 *   replaces the server-time estimate: a server clock set back cannot make
 *   every job look stale for long.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_private.h"
#include "validate.h"

#define TICK_MIN_MS 25
#define TICK_MAX_MS 1000

/* TIME: [seconds, microseconds], as strings. */
static void on_time(rjq_client *c, int status, redisReply *r, void *priv) {
    (void)priv;
    if (status != RJQ_OK || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING)
        return;
    long long sec, usec;
    if (rjq__parse_ll(r->element[0]->str, r->element[0]->len, 0, RJQ__TIME_MAX / 1000 - 1, &sec) ||
        rjq__parse_ll(r->element[1]->str, r->element[1]->len, 0, 999999, &usec))
        return; /* malformed */
    long long ms = sec * 1000 + usec / 1000;
    if (c->rebase_sent) rjq__server_time_rebase(c, ms);
    else rjq__server_time_sample(c, ms);
}

static void drop(rjq__conn *conn, const char *what, uint64_t waited) {
    char why[96];
    snprintf(why, sizeof why, "%s for %llu ms", what, (unsigned long long)waited);
    if (conn->kind == RJQ_CONN_COMMAND) rjq__conn_drop_timed_out(conn, why); /* requests: ETIMEDOUT */
    else rjq__conn_drop(conn, why);
}

/* The probe's PUBLISH was answered: 0 receivers means the subscriber
 * connection is not subscribed on this server any more. */
static void on_probe_published(rjq_client *c, int status, redisReply *r, void *priv) {
    (void)priv;
    if (status != RJQ_OK) { /* lost with the command connection: says nothing */
        c->probe_sent_ms = 0;
        return;
    }
    if (r->type != REDIS_REPLY_INTEGER || r->integer != 0) return;
    if (rjq__conn_ready(&c->sub) && rjq__channel_confirmed(c, c->live_channel)) {
        c->probe_sent_ms = 0;
        rjq__conn_drop(&c->sub, "not subscribed on the server any more");
    }
}

static void on_live_message(rjq_client *c, const char *ch, const char *msg, size_t len, void *arg) {
    (void)c, (void)ch, (void)msg, (void)len, (void)arg; /* pubsub.c noted the activity */
}

/* A TIME on `on` (a cluster master's own link), or with on NULL on any
 * ready connection. */
static void send_time(rjq_client *c, rjq__conn *on) {
    const char *argv[1] = {"TIME"};
    if (on == NULL) rjq__command(c, 0, on_time, NULL, 1, argv, NULL);
    else rjq__command_on(c, on, on_time, NULL, 1, argv, NULL);
}

/* hiredis' reader holds part of a reply: bytes not yet parsed, or the
 * elements read so far of an array (its task stack is deeper than the top
 * level; an idle reader may sit at level 0, having looked for the next
 * reply). The same test in hiredis 0.14 and 1.x. */
static int reader_partial(const redisReader *r) {
    return r && (r->len > r->pos || r->ridx > 0);
}

/* Bytes of a reply arrived since the last look: the reader holds part of
 * one and its buffer changed (it grows as bytes arrive and shrinks as
 * complete elements are taken). Noted as conn->rx_ms = now. The glue reads
 * the socket, so the reader is where arrival shows; the watchdog ticks at
 * least four times per command timeout, so a reply still arriving is seen
 * arriving. */
static void note_arrival(rjq__conn *conn, uint64_t now) {
    const redisReader *r = conn->ac ? conn->ac->c.reader : NULL;
    if (r == NULL || (r->len == conn->rx_len && r->pos == conn->rx_pos)) return;
    conn->rx_len = r->len;
    conn->rx_pos = r->pos;
    if (reader_partial(r)) conn->rx_ms = now;
}

int rjq__reply_arriving(const rjq_client *c) {
    return reader_partial(c->cmd.ac ? c->cmd.ac->c.reader : NULL);
}

/* What has waited since `since` waits from the last arrival instead, when
 * that is later. */
static uint64_t waited_since(const rjq__conn *conn, uint64_t since) {
    return conn->rx_ms > since ? conn->rx_ms : since;
}

/* One command connection: the seed's (a standalone server's only one),
 * or a cluster master's. */
typedef struct watch {
    rjq_client *c;
    uint64_t now;
} watch;

static void watch_link(rjq__conn *cmd, void *arg) {
    const watch *x = arg;
    rjq_client *c = x->c;
    uint64_t now = x->now;
    if (!rjq__conn_ready(cmd)) return;
    note_arrival(cmd, now);
    uint64_t oldest = rjq__requests_oldest_sent_on(c, cmd);
    /* (a reply under way is the oldest request's: replies come in order) */
    uint64_t since = oldest ? waited_since(cmd, oldest) : 0;
    if (c->command_timeout_ms > 0 && oldest && now - since > (uint64_t)c->command_timeout_ms) {
        drop(cmd, "no reply", now - since);
        return;
    }
    if (c->ping_interval_ms > 0 && oldest == 0 &&
        now - cmd->last_io_ms >= (uint64_t)c->ping_interval_ms) {
        /* (the seed's: any ready connection would do; a master's: its own) */
        send_time(c, cmd == &c->cmd ? NULL : cmd);
    }
}

/* Each command connection is watched: on a cluster every master's, so a
 * stalled master is found by its own silence, not only through the oldest
 * request of the client (and an idle one is pinged). */
static void watch_command(rjq_client *c, uint64_t now) {
    if (c->command_timeout_ms > 0 && now > (uint64_t)c->command_timeout_ms)
        rjq__requests_expire(c, now - (uint64_t)c->command_timeout_ms);
    watch x = {c, now};
    rjq__route_each(c, watch_link, &x);
}

static void watch_subscriber(rjq_client *c, uint64_t now) {
    rjq__conn *sub = &c->sub;
    /* the ACL refuses the probe channel (an RJQ_EVENT_ERROR said so): the
     * subscriber connection goes unprobed (TCP keepalive still runs) */
    if (rjq__channel_refused(c, c->live_channel)) return;
    if (!rjq__conn_ready(sub) || !rjq__channel_confirmed(c, c->live_channel)) {
        c->probe_sent_ms = 0;
        if (rjq__conn_ready(sub) && c->command_timeout_ms > 0 &&
            now - sub->ready_ms > (uint64_t)c->command_timeout_ms)
            drop(sub, "no subscription confirmed", now - sub->ready_ms);
        return;
    }
    int heard = c->probe_sent_ms == 0 || sub->last_io_ms >= c->probe_sent_ms;
    note_arrival(sub, now);
    if (!heard) {
        /* (a big message ahead of the probe's, still arriving, extends it) */
        uint64_t since = waited_since(sub, c->probe_sent_ms);
        if (c->command_timeout_ms > 0 && now - since > (uint64_t)c->command_timeout_ms) {
            uint64_t waited = now - c->probe_sent_ms;
            c->probe_sent_ms = 0;
            drop(sub, "no message", waited);
        }
        return;
    }
    if (c->ping_interval_ms > 0 && rjq__conn_ready(&c->cmd) &&
        now - sub->last_io_ms >= (uint64_t)c->ping_interval_ms) {
        const char *argv[3] = {"PUBLISH", c->live_channel, "ping"};
        if (rjq__command(c, 0, on_probe_published, NULL, 3, argv, NULL) == RJQ_OK)
            c->probe_sent_ms = now;
    }
}

static uint64_t tick_ms(const rjq_client *c) {
    long t = TICK_MAX_MS;
    if (c->command_timeout_ms > 0 && c->command_timeout_ms / 4 < t) t = c->command_timeout_ms / 4;
    if (c->ping_interval_ms > 0 && c->ping_interval_ms / 4 < t) t = c->ping_interval_ms / 4;
    return (uint64_t)(t < TICK_MIN_MS ? TICK_MIN_MS : t);
}

static void on_watchdog(rjq__timer *t) {
    rjq_client *c = t->owner;
    uint64_t now = rjq__now_ms();
    rjq__timer_start(c, &c->watchdog, tick_ms(c));
    if (c->rebase_wanted && !c->rebase_sent && rjq__conn_ready(&c->cmd)) {
        c->rebase_sent = 1;
        send_time(c, NULL);
    }
    watch_command(c, now);
    if (!c->closing) watch_subscriber(c, now);
}

int rjq__liveness_init(rjq_client *c) {
    /* set up even when off: a timer is set up before anyone may stop it */
    int rc = rjq__timer_setup(c, &c->watchdog, on_watchdog, c);
    if (rc != RJQ_OK || (c->command_timeout_ms <= 0 && c->ping_interval_ms <= 0)) return rc;
    snprintf(c->live_channel, sizeof c->live_channel, "%s:reply:%016llx:live", c->prefix,
             (unsigned long long)rjq__random(c)); /* prefix <= 200 bytes */
    rc = rjq__subscribe_classic(c, c->live_channel, on_live_message, NULL, c);
    if (rc != RJQ_OK) return rc;
    rjq__timer_start(c, &c->watchdog, tick_ms(c));
    return RJQ_OK;
}
