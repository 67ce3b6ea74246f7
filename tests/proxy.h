/*
 * A TCP proxy on the test's own loop, between a client and Redis (a test
 * helper, not a test).
 *
 * - proxy_hold(p, 1) holds back what Redis sends on command connections
 *   (those that never sent SUBSCRIBE) while subscriber connections flow:
 *   requests run in Redis and their replies wait, so an order such as
 *   "claims ran, then the doorbell was heard, then the replies came" is
 *   made, not hoped for. proxy_hold(p, 0) lets everything held through.
 * - proxy_hold_sub(p, 1) does the same on subscriber connections (pushes
 *   and doorbells wait; command replies flow).
 * - proxy_trickle(p, bytes, ms) passes what Redis sends on command
 *   connections on at `bytes` every `ms` ms (a slow link: a reply of some
 *   MiB takes seconds to arrive, its bytes arriving all along); 0 bytes:
 *   at full speed again.
 * - proxy_blackhole(p) makes every connection open now half-open: nothing
 *   more is forwarded either way and nothing is closed (a peer gone
 *   without a FIN, a stalled NAT). Connections made afterwards work.
 */
#ifndef RJQ_TEST_PROXY_H
#define RJQ_TEST_PROXY_H

#include <event2/event.h>

#include "fixture.h"

#define PROXY_PAIRS 16

typedef struct proxy proxy;
typedef struct proxy_pair {
    proxy *p;
    struct bufferevent *cli, *srv;
    int is_sub;
    int dead;                 /* blackholed: forwards nothing */
} proxy_pair;

struct proxy {
    struct event_base *base;
    int lfd;
    struct event *accept_ev;
    int server_port;
    int hold, hold_sub;
    size_t trickle;           /* bytes per tick on command connections (0: off) */
    struct event *trickle_ev;
    size_t trickled;          /* bytes it passed on so far */
    proxy_pair pairs[PROXY_PAIRS];
    char url[64];
};

/* Listen on a free loopback port (p->url) and forward to server_port. */
void proxy_start(proxy *p, struct event_base *base, int server_port);
void proxy_hold(proxy *p, int on);
void proxy_hold_sub(proxy *p, int on);
void proxy_trickle(proxy *p, size_t bytes, long every_ms);
void proxy_blackhole(proxy *p);
/* Bytes held back on subscriber connections (proxy_hold_sub). */
size_t proxy_sub_held(proxy *p);
/* On the first subscriber connection holding bytes: pass on its first
 * held message (a RESP array of three bulk strings) alone, then close it
 * (Redis' side at once, the client's once that message is written): a
 * subscription dropped between two messages. 1: done; 0: nothing held;
 * -1: the held bytes start with no whole message. */
int proxy_sub_pass_one_and_cut(proxy *p);
void proxy_stop(proxy *p);

/* env_start with the proxy between the client and Redis, and opts (may be
 * NULL: the test defaults) for the client. Stop with env_stop_proxied (or:
 * free the client and NULL e->c, then proxy_stop, then env_stop). */
void env_start_proxied_opts(test_env *e, proxy *p, const char *queue, rjq_client_options *opts);
/* The same with on_event (may be NULL) as the only change to the defaults. */
void env_start_proxied(test_env *e, proxy *p, const char *queue, rjq_event_cb *on_event);
/* Free the client (unless NULL already), stop the proxy, then env_stop. */
void env_stop_proxied(test_env *e, proxy *p);

#endif
