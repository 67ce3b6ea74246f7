/*
 * Test helpers: a private redis-server per test (free port, temp dir,
 * stopped by its pid), processes killed when a test aborts, a libevent
 * loop, rjq clients, and a synchronous hiredis connection for assertions.
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
    int tls;          /* server_start_tls: TLS only, on port */
    char bind[32];    /* the address it listens on ("" : 127.0.0.1) */
} test_server;

/* Start redis-server with optional extra "--name value" arguments
 * (NULL-terminated). Aborts the test if it cannot. */
void server_start(test_server *s, const char *const *extra);
/* A server on another loopback address and a given port (0: a free one),
 * killed if the test aborts: two servers on one port, at 127.0.0.1 and
 * 127.0.0.2, are one host name's two addresses. */
void server_start_at(test_server *s, const char *bind, int port);
/* A TLS-only server (port 0, tls-port = s->port; url rediss://127.0.0.1:port)
 * with certificates made by tests/certs/make_certs.sh in <dir>/certs (CA
 * "ca", server for localhost / redis.test / 127.0.0.1, a client certificate,
 * and "otherca" that signed nothing). client_certs: clients must show a
 * certificate of the CA (mutual TLS). server_connect does not work on it;
 * server_file(s, "certs/ca.crt") gives a file's path. Killed if the test
 * aborts; stop it with server_stop_guarded. */
void server_start_tls(test_server *s, int client_certs);
/* A path inside the server's directory (static buffer, one at a time). */
const char *server_file(const test_server *s, const char *name);
/* Stop it (SIGTERM, then SIGKILL after 5 s) and remove its directory. */
void server_stop(test_server *s);
/* Stop and start again on the same port and directory. */
void server_restart(test_server *s, const char *const *extra);

/* The size of a file (0 when it is missing). */
long file_size(const char *path);
/* Make a temporary file from path (a mkstemp template, "...XXXXXX",
 * replaced by its name) holding text; the test unlinks it. */
void temp_file(char *path, const char *text);
/* Has the redis-server or redis-sentinel *pid, logging to log (its lines
 * past offset from are this start's), started listening? 1: its log has
 * the line ready, one written after its sockets listen in every version
 * ("Server initialized" for a server: before it loads its data;
 * "Sentinel ID is" for a sentinel; "Running mode=" comes before the
 * sockets since 7.2); -1: not yet; 0: it exited because its port was taken
 * (*pid is then 0). Any other exit fails the test. Until then, a server
 * answering on the port may be another test's, given the same free port
 * at the same time. */
int redis_listening(pid_t *pid, const char *log, long from, const char *ready);

/* Process hygiene: a failed ASSERT aborts (a crash or a sanitizer report
 * may end the process too). SIGKILL the processes named here on the way
 * out, so a failing test leaves no redis-server or worker child behind.
 * Crash signals that already have a handler (the sanitizers') keep it;
 * under AddressSanitizer its death callback does the killing. */
void kill_on_abort(pid_t pid);
void forget_on_abort(pid_t pid);
/* In a forked child: the parent's processes are not the child's to kill. */
void forget_all_on_abort(void);
/* server_start and server_stop, with the server killed if the test aborts. */
void server_start_guarded(test_server *s, const char *const *extra);
/* n servers (n <= 16) started side by side, server i with extra[i] (as
 * server_start's), each killed if the test aborts. */
void server_start_many_guarded(test_server *s, int n, const char *const *const *extra);
void server_stop_guarded(test_server *s);
/* fork() for a child process of a test (a worker): the child dies with its
 * parent and does not kill the parent's processes when it aborts itself;
 * the parent kills it if it aborts. Returns 0 in the child. */
pid_t fork_child(void);
/* Wait for a child to exit (SIGKILL after timeout_ms, then the test
 * fails); returns its status. */
int reap(pid_t pid, long timeout_ms);

/* A synchronous connection to the server; reply must be freed. */
redisContext *server_connect(const test_server *s);
/* fmt: hiredis' format without %b (checked as printf's, so a missing
 * argument is a compile error). */
redisReply *server_cmd(redisContext *rc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The reply's integer (a string read as one; nil, an error: 0). A MOVED
 * or ASK reply fails the test: a node of a cluster asked for a key it does
 * not serve (a check of 0 would pass whatever the data). */
long long server_int(redisContext *rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The server's clock in ms (the clock the scripts use). */
long long server_now_ms(redisContext *rc);
/* Wait until the replica rc is connected to reports its link to its
 * master up (INFO replication: synced); 30 s fail the test. */
void wait_replica_synced(redisContext *rc);
/* Jobs in the active set of queue q (key prefix "t"), without the member
 * that keeps the set a skiplist (ACTIVE_PIN in src/lua/lib.lua). */
long long server_active_jobs(redisContext *rc, const char *q);
/* The field that keeps a queue's dependents hash a hash table
 * (DEPENDENTS_PIN in src/lua/lib.lua), for HEXISTS/HLEN checks. */
#define SERVER_DEPENDENTS_PIN "rjq: keeps the dependents hash a table (a field longer than hash-max-listpack-value)"
/* Members of queue q's held index (its pin member excluded). */
long long server_held_members(redisContext *rc, const char *q);
/* The cancel script called directly on job id of queue q (key prefix "t"),
 * as a client that dies before it carries the releases would leave it: the
 * job is cancelled, its dependents (jobs, or a batch) are not told. Asserts
 * that it was cancelled and had dependents to tell. */
/* Run script s (an RJQ__S_* of generated/rjq_scripts.h) on queue q (key
 * prefix "t") with its keys as src/keys.def lays them out and args (n, after
 * the keys); asserts that it answered without an error; returns the reply.
 * (In harness.c, beside layout_script_keys.) */
redisReply *server_fcall(redisContext *rc, int s, const char *q, const char **args, size_t n);
/* server_fcall's call, any reply (an error too). */
redisReply *server_fcall_reply(redisContext *rc, int s, const char *q, const char *const *args,
                               size_t n);
void server_cancel_fcall(redisContext *rc, const char *q, const char *id);
/* Assert that queue q (key prefix "t") has no key but its shard declaration
 * t:{q}:shards and the keys kept with it (its whole-queue limits
 * t:{q}:shardlimits, its re-split lease t:{q}:resplit): nothing unsharded
 * was written. */
void server_assert_only_declaration(redisContext *rc, const char *q);
/* The number after needle (e.g. "errorstat_NOSCRIPT:count=") in INFO
 * section (0 if absent). */
long long server_info_number(redisContext *rc, const char *section, const char *needle);
/* The number of calls of one command in INFO commandstats (0 if none). */
long long server_calls(redisContext *rc, const char *command);
/* Every command the server ran (INFO commandstats: those of scripts
 * included; INFO itself left out). */
long long server_commands_run(redisContext *rc);
/* Write schedule `name` of queue q (key prefix "t") as schedule `from`
 * (its spec, payload "copied", due now) directly, as another program
 * might: no check of the name. */
void server_copy_schedule(redisContext *rc, const char *q, const char *from, const char *name);
/* The number of subscribers of a channel (PUBSUB NUMSUB; -1 if the reply
 * is not the expected one). */
long long server_numsub(redisContext *rc, const char *channel);
/* The id of the connection named `name` (CLIENT LIST), or -1. */
long long client_id_named(redisContext *rc, const char *name);

/* A TCP port of 127.0.0.1 nobody listens on, its cluster bus port
 * (+ 10000) too, both below the kernel's ephemeral range (so no outgoing
 * connection takes them meanwhile) and reserved against the other tests
 * running at once (a lock held until this process exits; never the same
 * port twice in a process). A race with another program is possible. */
int free_port(void);
/* The low end of the kernel's ephemeral port range
 * (net.ipv4.ip_local_port_range; 32768 when it cannot be read). */
int ephemeral_port_low(void);

/* A monotonic clock in milliseconds, and a sleep. */
double mono_ms(void);
void sleep_ms(long ms);

/* Run the loop until *flag becomes non-zero or timeout_ms passes (a
 * safety net so a broken test fails instead of hanging). Returns *flag. */
int loop_until(struct event_base *base, const int *flag, long timeout_ms);
/* Run the loop for ms milliseconds. */
void loop_for(struct event_base *base, long ms);
/* Run until counter >= target or timeout. Returns 1 when reached. */
int loop_until_count(struct event_base *base, const long *counter, long target, long timeout_ms);

/* Run the loop until cond(arg) holds or timeout_ms passes (a failure
 * guard). cond is checked after every loop pass and at least every 5 ms,
 * so it may poll Redis. Returns 1 when it holds. */
int loop_until_cond(struct event_base *base, int (*cond)(void *), void *arg, long timeout_ms);
/* Run the loop until server_int(rc, fmt, ...) equals want (polled every
 * 5 ms) or timeout_ms passes. Returns 1 when it does. */
int loop_until_server_int(struct event_base *base, redisContext *rc, long long want,
                          long timeout_ms, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Script calls the server ran so far (FCALL and EVALSHA in INFO
 * commandstats). */
long long server_script_calls(redisContext *rc);
/* Run the loop until server_script_calls(rc) >= n, or timeout_ms passes.
 * Returns 1 when it is. */
int loop_until_script_calls(struct event_base *base, redisContext *rc, long long n, long timeout_ms);
/* Run the loop until channel has n subscribers (PUBSUB NUMSUB), or
 * timeout_ms passes. Returns 1 when it has. */
int loop_until_numsub(struct event_base *base, redisContext *rc, const char *channel, long long n,
                      long timeout_ms);
/* Run the loop until nothing is left in it (no event added or active: what
 * was freed left nothing behind, and all that was due has run), or
 * timeout_ms passes. Returns 1 when it is empty. */
int loop_until_empty(struct event_base *base, long timeout_ms);
/* Run the loop until the server's clock (TIME, the scripts' clock) is
 * past ms, or timeout_ms passes. Returns 1 when it is. */
int loop_until_server_ms(struct event_base *base, redisContext *rc, long long ms, long timeout_ms);
/* In a forked child that serves (a worker) until its parent kills it: run
 * the loop; after guard_ms (the parent gone wrong) the child exits 3. */
void serve_until_killed(struct event_base *base, long guard_ms) __attribute__((noreturn));
/* quiet_for (tests/harness.h): the one timed wait, where time itself is tested. */

/* The default test options: url, prefix "t", reconnects after 20..200 ms. */
rjq_client_options client_options(const char *url);
/* A client on base with options o (aborts the test if it cannot). */
rjq_client *client_new(struct event_base *base, const rjq_client_options *o);
/* A client on base for s with the default options. */
rjq_client *client_for(struct event_base *base, const test_server *s);
rjq_queue *queue_for(rjq_client *c, const char *name);
/* Block until the client's command connection is up. */
void wait_connected(struct event_base *base, rjq_client *c);
/* Wait until q (rjq_queue_open) knows whether its queue is sharded, so its
 * calls go out at once rather than held for that read: before a test stops
 * Redis or holds its replies. */
void wait_layout_known(struct event_base *base, rjq_queue *q);

#endif
