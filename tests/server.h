/*
 * Test helpers: a private redis-server per test (free port, temp dir,
 * stopped by its pid), a libevent loop, and a synchronous hiredis
 * connection for assertions.
 */
#ifndef RJQ_TEST_SERVER_H
#define RJQ_TEST_SERVER_H

#include <sys/types.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>

#include "rjq.h"

typedef struct test_server {
    pid_t pid;
    int port;
    char dir[128];
    char url[64];
} test_server;

/* Start redis-server with optional extra "--name value" arguments
 * (NULL-terminated). Aborts the test if it cannot. */
void server_start(test_server *s, const char *const *extra);
/* Stop it (SIGTERM, then SIGKILL after 5 s) and remove its directory. */
void server_stop(test_server *s);
/* Stop and start again on the same port and directory. */
void server_restart(test_server *s, const char *const *extra);

/* A synchronous connection to the server; reply must be freed. */
redisContext *server_connect(const test_server *s);
redisReply *server_cmd(redisContext *rc, const char *fmt, ...);
long long server_int(redisContext *rc, const char *fmt, ...);
/* The number of calls of one command in INFO commandstats (0 if none). */
long long server_calls(redisContext *rc, const char *command);

/* Run the loop until *flag becomes non-zero or timeout_ms passes (a
 * safety net so a broken test fails instead of hanging). Returns *flag. */
int loop_until(struct event_base *base, const int *flag, long timeout_ms);
/* Run the loop for ms milliseconds. */
void loop_for(struct event_base *base, long ms);
/* Run until counter >= target or timeout. Returns 1 when reached. */
int loop_until_count(struct event_base *base, const long *counter, long target, long timeout_ms);

/* A client on base for s with default options (and prefix "t"). */
rjq_client *client_for(struct event_base *base, const test_server *s);
rjq_queue *queue_for(rjq_client *c, const char *name);
/* Block until the client's command connection is up. */
void wait_connected(struct event_base *base, rjq_client *c);

#endif
