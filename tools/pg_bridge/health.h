/*
 * The bridge's health over HTTP (--listen): GET /healthz answers 200 "ok"
 * or 503 "unhealthy: <reasons>" (a connection down, the lag or the queued
 * rows over their --alert-* threshold); GET /metrics the Prometheus text
 * format (rjq_pg_bridge_*). README.md, "PostgreSQL outbox bridge", lists
 * them.
 */
#ifndef RJQ_PG_HEALTH_H
#define RJQ_PG_HEALTH_H

#include <event2/event.h>

#include "bridge.h"

typedef struct health_options {
    const char *listen;     /* "ADDR:PORT" (numeric; port 0: any free one) */
    const char *pg;         /* libpq connection string, as the bridge's */
    const char *table;      /* the bridge's table (--table); NULL: "rjq_jobs" */
    long alert_lag_ms;      /* unhealthy when the oldest queued row is older; 0: never */
    long long alert_queued; /* unhealthy when more rows are queued; 0: never */
} health_options;

typedef struct health health;

/* Listen and serve beside b on base; prints "health on ADDR:PORT" on
 * stdout. NULL and a message on stderr when it cannot. */
health *health_start(struct event_base *base, bridge *b, const health_options *o);
/* Stop serving (before bridge_free(b)). */
void health_free(health *h);

#endif
