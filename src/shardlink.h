/*
 * A sharded pub/sub link: one connection to one host:port for SSUBSCRIBE,
 * `smessage` and SUNSUBSCRIBE (docs/cluster.md 3.5). No hiredis version's
 * async layer can carry them (docs/cluster.md 2.1), so the link is a
 * non-blocking hiredis redisContext whose socket the loop glue watches
 * (rjq_loop_ops.watch_fd); commands go out with redisAppendFormattedCommand
 * + redisBufferWrite, replies come in with redisBufferRead +
 * redisGetReplyFromReader and are read by ssbook.c's dispatcher. RESP2.
 *
 * Session: AUTH (the URL's user and password) and CLIENT SETNAME
 * "<name>:ssub", then SSUBSCRIBE of every wanted channel, one per command.
 * A refused AUTH (or a NOAUTH) refuses the session: reported (an
 * RJQ_EVENT_ERROR, errmsg), the link backs off and tries again; a refused
 * CLIENT SETNAME is reported only.
 *
 * State (one enum, every transition asserted):
 *     IDLE ──subscribe──> CONNECTING ──connected──> SETUP ──replies──> READY
 *       ▲                    │                        │                 │
 *       └──nothing wanted── BACKOFF <───lost, timed out, refused───────┘
 *                            └──timer──> CONNECTING
 * and any state ──free──> CLOSED. connect_timeout_ms covers the TCP
 * connect and the set-up; reconnects back off like the client's
 * connections (reconnect_min_ms doubling to reconnect_max_ms, jittered);
 * a READY link is probed with PING every ping_interval_ms (answered
 * ["pong", ""] while subscribed): no reply and nothing else read for one
 * whole interval drops it.
 *
 * Channels: each wanted by the owner, pending (SSUBSCRIBE sent) or
 * subscribed. Events, each for one channel (the `event` hook):
 *   SUBSCRIBED    the server confirmed it (again after a LOST);
 *   LOST          the connection went (detail: why) while the channel was
 *                 subscribed or pending; it stays wanted and is subscribed
 *                 again (SUBSCRIBED) once the link is back: messages in
 *                 between are missed, so the owner re-reads its state
 *                 then, as after a reconnect of the classic subscriber;
 *   UNSUBSCRIBED  the server dropped it by itself (a pushed `sunsubscribe`:
 *                 its slot moved to another master): no longer wanted
 *                 here; the owner subscribes where the slot now lives;
 *   REFUSED       the server refused the SSUBSCRIBE (detail: its words:
 *                 MOVED <slot> <host:port>, CROSSSLOT, NOPERM ...): no
 *                 longer wanted here.
 * Messages (the `message` hook) come only for wanted, subscribed channels,
 * in the server's order. Hooks run from the loop, never from inside a
 * call of this interface; they may call any function here, including
 * rjq__shardlink_free on this link. Byte strings are not NUL-terminated
 * and live during the call only.
 */
#ifndef RJQ_SHARDLINK_H
#define RJQ_SHARDLINK_H

#include <stddef.h>

#include "core.h"

typedef struct rjq__shardlink rjq__shardlink;

typedef enum rjq__shardlink_state {
    RJQ__SHARDLINK_IDLE,       /* nothing wanted yet (or any more): no socket */
    RJQ__SHARDLINK_CONNECTING, /* name lookup, TCP (and TLS) connect; connect timer armed */
    RJQ__SHARDLINK_SETUP,      /* AUTH / CLIENT SETNAME sent, replies due; same timer */
    RJQ__SHARDLINK_READY,      /* subscriptions flow; PING timer armed */
    RJQ__SHARDLINK_BACKOFF,    /* lost or refused: reconnect timer armed */
    RJQ__SHARDLINK_CLOSED      /* freed (inside a hook: the memory goes on the way out) */
} rjq__shardlink_state;

enum {
    RJQ__SHARDLINK_SUBSCRIBED = 1,
    RJQ__SHARDLINK_LOST,
    RJQ__SHARDLINK_UNSUBSCRIBED,
    RJQ__SHARDLINK_REFUSED
};

typedef struct rjq__shardlink_hooks {
    void (*message)(rjq__shardlink *l, void *arg, const char *channel, size_t chlen,
                    const char *payload, size_t len);
    /* event: RJQ__SHARDLINK_*; detail: NULL for SUBSCRIBED and
     * UNSUBSCRIBED, else words (NUL-terminated) */
    void (*event)(rjq__shardlink *l, void *arg, const char *channel, size_t chlen, int event,
                  const char *detail);
} rjq__shardlink_hooks;

/* A link to host and port for client c, with its TLS and credentials;
 * IDLE until the first subscribe. host: a numeric address, "localhost",
 * or a host name the loop glue's resolve hook looks up at each connect
 * attempt (CONNECTING covers the lookup; the first address is used; a
 * glue without resolve makes each attempt fail, "cannot resolve NAME");
 * over TLS a host name is the SNI and the name checked (rjq__tls_start).
 * RJQ_OK; RJQ_EINVAL: the loop glue has no watch_fd/unwatch_fd (errmsg
 * says so), no hooks, or a bad port; RJQ_ENOMEM. */
int rjq__shardlink_new(rjq_client *c, const char *host, int port, const rjq__shardlink_hooks *hooks,
                       void *arg, rjq__shardlink **out);
/* Free it, now or (inside one of its hooks) on the way out of it: no hook
 * is called for it afterwards. Free every link before the client. */
void rjq__shardlink_free(rjq__shardlink *l);

/* Want a channel (1..RJQ__SSCH_MAX bytes): subscribed now when the link is
 * ready, else once it is (an IDLE link starts connecting). Wanting a
 * wanted channel again changes nothing. RJQ_OK, RJQ_EINVAL (length),
 * RJQ_ENOMEM, RJQ_ECLOSED (the link was freed earlier in this hook). */
int rjq__shardlink_subscribe(rjq__shardlink *l, const char *channel, size_t len);
/* No longer want it (SUNSUBSCRIBE when the server has it): no message or
 * event for it follows. RJQ_OK (also when it was not wanted). */
int rjq__shardlink_unsubscribe(rjq__shardlink *l, const char *channel, size_t len);

rjq__shardlink_state rjq__shardlink_get_state(const rjq__shardlink *l);
/* RJQ__SSCH_WANTED / PENDING / SUBSCRIBED (ssbook.h), or -1: not wanted. */
int rjq__shardlink_channel_state(const rjq__shardlink *l, const char *channel, size_t len);
/* Why the link last went down ("" : never). */
const char *rjq__shardlink_why(const rjq__shardlink *l);
/* Connect attempts so far (each reconnect is one). */
unsigned long rjq__shardlink_attempts(const rjq__shardlink *l);

#endif
