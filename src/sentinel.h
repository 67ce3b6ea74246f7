/*
 * Sentinel (redis+sentinel:// URLs): the master's address, asked of the
 * sentinels in turn (the one that answered last first), on a short-lived
 * connection per question: AUTH when the sentinels want a password, then
 * SENTINEL GET-MASTER-ADDR-BY-NAME. The connection layer asks before every
 * connect attempt, and checks with ROLE that the address is the master.
 */
#ifndef RJQ_SENTINEL_H
#define RJQ_SENTINEL_H

#include "core.h"

typedef struct rjq__sentinel_lookup rjq__sentinel_lookup;

/* error NULL: the master is at ip:port (strings valid during the call). */
typedef void rjq__sentinel_found_fn(void *arg, const char *error, const char *ip, int port);

/* Ask; fn is called exactly once, later (never from inside this call),
 * unless rjq__sentinel_cancel came first. NULL: out of memory. */
rjq__sentinel_lookup *rjq__sentinel_ask(rjq_client *c, rjq__sentinel_found_fn *fn, void *arg);
void rjq__sentinel_cancel(rjq__sentinel_lookup *l);


/* ---- following failovers ------------------------------------------------ */

typedef struct rjq__sentinel_watch rjq__sentinel_watch;

/* A failover moved the master to `to` ("ip port": an ip of at most 63
 * bytes, a port in 1..65535; a message not of that form is ignored). */
typedef void rjq__sentinel_switch_fn(void *arg, const char *to);

/* Subscribe to +switch-master on one sentinel (another one, after a
 * reconnect delay, when that connection fails) and call fn for each
 * switch of the URL's master. NULL: out of memory. */
rjq__sentinel_watch *rjq__sentinel_watch_start(rjq_client *c, rjq__sentinel_switch_fn *fn,
                                               void *arg);
void rjq__sentinel_watch_stop(rjq__sentinel_watch *w);
#endif
