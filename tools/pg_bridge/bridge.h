/*
 * The PostgreSQL outbox bridge: moves rows of rjq_jobs into rjq queues
 * exactly once and writes the jobs' outcomes back (README.md,
 * "PostgreSQL outbox bridge"; the statements are in schema.h).
 */
#ifndef RJQ_PG_BRIDGE_H
#define RJQ_PG_BRIDGE_H

#include <stddef.h>

#include <event2/event.h>

typedef struct bridge_options {
    const char *pg;            /* libpq connection string ("" : the PG* variables) */
    const char *redis_url;     /* NULL: rjq's default */
    const char *redis_password; /* $REDISCLI_AUTH: for a URL without one; NULL: none */
    const char *prefix;        /* NULL: "rjq" */
    const char *table;         /* NULL: "rjq_jobs" (sqlname.h: pgb_table_ok) */
    char **queues;             /* the queues served; NULL: every queue */
    size_t nqueues;
    int batch;                 /* rows per claim (1..10000) */
    int claims;                /* claims in flight at once, each on its own connection (1..16) */
    long poll_ms;              /* safety poll when no notification comes */
    long reconcile_ms;         /* how often open rows are looked for to follow */
    long report_ms;            /* the log line; 0: none */
    long long dedup_ms;        /* job ids stay reserved this long after they finish */
    size_t max_payload;        /* larger payloads make the row fail */
    size_t max_follow;         /* rows whose outcomes are followed at once */
    int follow_await;          /* --follow-await: one await per moved job (the old way)
                                  instead of the queue's events */
    int route;                 /* --route-priority: rows go to <queue>:high when their */
    int route_high, route_low; /* priority <= route_high, <queue>:low when > route_low */
} bridge_options;

/* Defaults for every field. */
void bridge_defaults(bridge_options *o);

typedef struct bridge bridge;

/* Start on base (the options are copied where needed: queues must live as
 * long as the bridge). NULL and a message on stderr when it cannot. */
bridge *bridge_start(struct event_base *base, const bridge_options *o);
/* Stop taking rows, finish the claim and the writes in flight (at most
 * deadline_ms), then break the loop. */
void bridge_stop(bridge *b, long deadline_ms);
void bridge_free(bridge *b);

/* What the bridge did since it started, and its connections now (for
 * /metrics and /healthz, health.c). */
typedef struct bridge_counters {
    long long moved, existed, bad;                  /* rows claimed: new jobs, jobs that
                                                       existed, rows failed as bad */
    long long completed, failed, cancelled;         /* outcomes written back */
    long long requeued, unknown;                    /* rows sent back to queued, "outcome unknown" */
    long long job_reads;                            /* job records read from Redis for an outcome */
    size_t following, writes_waiting;
    int pg_claims_up, pg_outcomes_up, redis_up;     /* 1: connected */
} bridge_counters;
void bridge_get_counters(const bridge *b, bridge_counters *out);
/* The queues served as a text[] literal ("{\"a\",\"b\"}"), or NULL: every queue. */
const char *bridge_queues_literal(const bridge *b);

#endif
