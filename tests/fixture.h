/*
 * The set-up most integration tests share: a private redis-server (killed
 * if the test aborts), a libevent loop, one rjq client with the default
 * test options and one queue on it, and a synchronous connection for
 * assertions. Tests that need more (a second client, other options) add
 * it to the fields here; env_stop frees only what env_start made.
 */
#ifndef RJQ_TEST_FIXTURE_H
#define RJQ_TEST_FIXTURE_H

#include <event2/event.h>
#include <hiredis/hiredis.h>

#include "rjq.h"
#include "server.h"

typedef struct test_env {
    test_server s;
    struct event_base *base;
    rjq_client *c;    /* NULL it after freeing it in the test */
    rjq_queue *q;     /* the queue named in env_start (NULL when none) */
    redisContext *rc; /* synchronous, for assertions */
} test_env;

/* Start all of the above; queue: its name, or NULL for none. Returns once
 * the client's command connection is up. */
void env_start(test_env *e, const char *queue);
/* The same with queue options. */
void env_start_queue(test_env *e, const char *queue, const rjq_queue_options *o);
/* The same without waiting: the client is still connecting (calls made
 * now are queued until it is up, as in an application's first turn). */
void env_open(test_env *e, const char *queue, const rjq_queue_options *o);
/* Free in reverse order: rc, the client (unless NULL), the loop, the server. */
void env_stop(test_env *e);

/* Worker options where only what a test exercises can wake the worker in
 * time: the safety poll a minute away, the reclaim sweep ten minutes. */
rjq_worker_options quiet_worker_options(int concurrency);

/* Run the loop until a worker's start on queue `name` is over: the client
 * has had its doorbell and push channel subscriptions confirmed (each
 * confirmation makes the worker claim again: its first claim may have
 * registered before Redis had the subscription), and then a command round
 * trip saw no script call but its own (the claims those made have run).
 * Claims and pushes after this are the test's own. */
void wait_worker_started(struct event_base *base, rjq_client *c, rjq_queue *q,
                         redisContext *rc, const char *name);

/* Run the loop until client c has its subscription to the events channel
 * of queue `name` (key prefix "t") confirmed: a monitor started on it sees
 * every event published after this. */
void wait_monitoring(struct event_base *base, rjq_client *c, const char *name);

/* rjq_worker_stop(w) and run the loop until its callback came, RJQ_OK:
 * every job it handed out is over, its slots withdrawn, w freed. */
void worker_stop_wait(struct event_base *base, rjq_worker *w);

/* A barrier on client c's subscriber connection: subscribes c to a channel
 * of its own, publishes a marker there with rc and runs the loop until it
 * came, then lets the channel go. Redis sends one connection's messages in
 * order, so every message published before this to a channel c listens
 * to has been handed to c's listeners by then. */
void subscriber_barrier(struct event_base *base, rjq_client *c, redisContext *rc);

/* Run the loop until the server's clock (the scripts' clock) is more than
 * ms past what it reads now: what a script did before is then older than
 * ms by the clock that ages it. */
void wait_server_clock(struct event_base *base, redisContext *rc, long ms);

#endif
