/*
 * rjq serve: the HTTP API, the dashboard and /metrics on one rjq client
 * (server.c and its neighbours in this folder).
 */
#ifndef RJQ_TOOLS_SERVE_H
#define RJQ_TOOLS_SERVE_H

#include <event2/event.h>

#include "rjq.h"

typedef struct serve_options {
    const char *listen;     /* "ADDR:PORT" ("[v6]:PORT"); port 0 picks a free one */
    const char *queues;     /* comma-separated glob patterns of the queues served */
    const char *token_file; /* NULL: no token needed */
    int read_only;
    int demo;               /* the docs demo: a worker pool and /v1/demo (demo.c) */
    long wait_max_ms;       /* cap of ?wait= */
    long max_body;          /* request body (payload) limit, bytes */
    long max_queues;        /* queues served (watched) at once at most */
    long queue_idle_ms;     /* a queue nobody used or watched this long is let go */
    long max_requests;      /* requests held at once (waits, streams, calls to Redis) */
    long max_waiting;       /* the queues' bound (rjq_queue_options.max_waiting); 0: none */
    long request_timeout_ms; /* a request must arrive whole this soon after its
                                first byte, else 408 (0: no such deadline) */
    int access_log;          /* a log line per request answered (access.c) */
    int metrics_shards;      /* /metrics: each shard's series too (label shard) */
    int metrics_groups;      /* /metrics: the busiest groups of each queue, at most
                                this many (0: none, no group read) */
} serve_options;

/* Open a client with co (its on_event is the server's) and serve on base
 * until SIGINT/SIGTERM. Prints "listening on ADDR:PORT" on stdout once it
 * accepts. 0, or 1 with a message on stderr. */
int serve_run(struct event_base *base, const rjq_client_options *co, const serve_options *o);

#endif
