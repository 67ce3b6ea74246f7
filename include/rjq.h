/*
 * rjq — reliable Redis job queues for event-loop programs.
 *
 * This header is the whole public API and its comments are the specification.
 * Anything not declared here is internal and may change.
 *
 * Model
 * -----
 * A client (rjq_client) owns two Redis connections: a command connection that
 * carries every command and script, pipelined, and a subscriber connection for
 * pub/sub wake-ups. Every queue, worker and producer of the client shares them.
 * No blocking Redis command is ever sent.
 *
 * The client runs on the caller's event loop: through two callbacks
 * (rjq_io_ops: which descriptors to watch, when the timer is due; any
 * loop), or through hiredis-level hooks (rjq_loop_ops). adapters/rjq/
 * has the glue for libevent, libev, libuv and GLib. A client
 * is not thread-safe: use it from the loop's thread only.
 *
 * Conventions
 * -----------
 * - Names are rjq_<object>_<verb>[_<what>] (README "Naming"): get/set one
 *   thing, list a page, count, is a yes/no, or the action itself
 *   (rjq_queue_get_stats, rjq_queue_list_jobs, rjq_worker_count_running,
 *   rjq_client_is_connected, rjq_queue_close). The names from before that
 *   rule are deprecated aliases until 1.0 (at the end of this header).
 * - Functions return RJQ_OK (0) or a negative RJQ_E* code; rjq_strerror()
 *   describes a code, rjq_client_get_errmsg() gives detail (e.g. Redis' text).
 * - When a function that takes a callback returns an error, the callback is
 *   never called. When it returns RJQ_OK, the callback is called exactly once:
 *   with the outcome, or with RJQ_ECONN (the connection dropped while the
 *   request was in flight: its outcome is unknown; one not written yet
 *   waits for the reconnect, and gets RJQ_ECONN only if that attempt
 *   fails), RJQ_ETIMEDOUT (no reply within command_timeout_ms, or no
 *   connection for that long: unknown too),
 *   or with RJQ_ECANCELED (the client was freed first). Errors that prove a
 *   request did not run (LOADING, BUSY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN,
 *   READONLY) are not reported: the request is sent again with backoff for
 *   up to a minute. Callbacks are never called from inside the function
 *   that accepted them.
 * - Inputs (strings, payloads, option structs) are copied during the call;
 *   the caller may free them when it returns. Data handed to a callback is
 *   owned by the library and valid only until the callback returns.
 * - Every function may be called from inside any rjq callback, including
 *   rjq_client_free() and rjq_worker_stop(): destruction is deferred until the
 *   callback stack unwinds.
 * - Option structs are zero-is-default: `rjq_x_options o = RJQ_X_OPTIONS_INIT;`
 *   gives the documented defaults, and a NULL options pointer means all
 *   defaults.
 *
 * Extensible structs (the ABI)
 * ----------------------------
 * Every struct the caller fills and the library reads (rjq_loop_ops,
 * rjq_io_ops, rjq_client_options, rjq_tls_options, rjq_queue_options,
 * rjq_job_options, rjq_enqueue_item, rjq_worker_options,
 * rjq_await_options, rjq_limits, rjq_schedule) starts with `size_t size`:
 * its size as the caller's header knew it. Initialise each one with its
 * RJQ_<NAME>_INIT macro, which sets size and zeroes the rest, then set
 * fields by name:
 *
 *     rjq_client_options o = RJQ_CLIENT_OPTIONS_INIT;
 *     o.url = "redis://127.0.0.1:6379";
 *
 * (in C, `x = (rjq_job_options)RJQ_JOB_OPTIONS_INIT;` resets one), never
 * positionally or with `= {0}` / memset alone. The library reads only the
 * fields that size covers and takes the defaults for the others, so a
 * program built against an older header keeps working with a newer
 * library that added fields. A size bigger than this library knows (a
 * program built against a newer header) is accepted when every byte past
 * the fields it knows is zero (the newer options left at their defaults,
 * which this library has anyway); otherwise, and for a size below
 * sizeof(size_t) (e.g. 0: a struct set to {0}) or above 4096, the call
 * fails with RJQ_EINVAL (or its callback gets it, where errors go there)
 * and rjq_client_get_errmsg() names the struct. A NULL options pointer still
 * means all defaults.
 *
 * Arrays: rjq_enqueue_batch() steps through items[] by items[0].size (every
 * item's size must be the same). The arrays of structs the library hands
 * out (to callbacks, or in a struct it fills) may grow the same way: take
 * element i with its accessor rjq_<name>_get(list, i), never list[i] for
 * i > 0 (element 0 is the pointer itself). Each accessor returns NULL for
 * a NULL list (an empty one: n 0) and, for i < n, the element the library
 * wrote, whatever the size of the struct the caller was built with; i >= n
 * is the caller's error, as list[i] is. They are: rjq_enqueued_get
 * (rjq_enqueue_cb, rjq_flow_cb), rjq_dep_outcome_get and rjq_dep_get
 * (rjq_dependencies_cb, rjq_dependents_cb, rjq_job_deps_cb),
 * rjq_history_point_get (rjq_history_cb), rjq_group_info_get
 * (rjq_groups_cb), rjq_attempt_get and rjq_header_get (rjq_job_info's
 * history and headers, rjq_outcome's headers), rjq_process_get and
 * rjq_process_queue_get (rjq_processes_cb), rjq_master_get
 * (rjq_masters_cb), rjq_search_match_get (rjq_search_cb, rjq_find_cb),
 * rjq_schedule_info_get (rjq_schedules_cb) and rjq_batch_info_get
 * (rjq_batches_cb). (rjq_dep and rjq_header are also arrays the caller
 * gives, rjq_job_options.after and .headers, without a size: they do not
 * grow, as rjq_backoff.) Structs the library fills and hands over by pointer
 * (rjq_stats, rjq_job_info, rjq_outcome, ...) only ever grow at their end.
 * (rjq_backoff lives inside rjq_job_options and does not grow: new
 * retry options go into rjq_job_options.)
 *
 * For rjq's maintainers: fields are only ever added at the end of a
 * struct, and a struct has no tail padding (an `int` last is followed by
 * an explicit `int reserved`, which the library refuses when it is not 0,
 * so that a later field may take it over), so the size of each older
 * version ends exactly where its last field does (src/validate.c asserts
 * it at compile time).
 */
#ifndef RJQ_H
#define RJQ_H

#include <stddef.h>
#include <stdint.h>

/* A cast that is a static_cast in C++ (so the header-only loop glue in
 * adapters/rjq/ compiles warning-free with -Wold-style-cast) and a plain
 * cast in C. */
#ifdef __cplusplus
#define RJQ_CAST(type, x) (static_cast<type>(x))
#else
#define RJQ_CAST(type, x) ((type)(x))
#endif

/* The RJQ_<NAME>_INIT initialisers (see "Extensible structs" above): size
 * set, everything else zero. In C++ a value-initialised copy (designated
 * initialisers are C++20). */
#ifdef __cplusplus
template <class T> static inline T rjq_sized_() {
    T t = T();
    t.size = sizeof(T);
    return t;
}
#define RJQ_SIZED_INIT_(type) (rjq_sized_<type>())
#else
#define RJQ_SIZED_INIT_(type) {.size = sizeof(type)}
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define RJQ_VERSION_MAJOR 0
#define RJQ_VERSION_MINOR 1
#define RJQ_VERSION_PATCH 0

#if defined(__GNUC__) && __GNUC__ >= 4
#define RJQ_API __attribute__((visibility("default")))
#else
#define RJQ_API
#endif

/* RJQ_DEPRECATED("use rjq_x"): marks a declaration deprecated (a warning,
 * -Wdeprecated-declarations, where it is used), in C and C++; nothing on a
 * compiler without the attribute. */
#if defined(__clang__) || \
    (defined(__GNUC__) && (__GNUC__ > 4 || (__GNUC__ == 4 && __GNUC_MINOR__ >= 5)))
#define RJQ_DEPRECATED(msg) __attribute__((deprecated(msg)))
#elif defined(__GNUC__)
#define RJQ_DEPRECATED(msg) __attribute__((deprecated))
#elif defined(_MSC_VER)
#define RJQ_DEPRECATED(msg) __declspec(deprecated(msg))
#else
#define RJQ_DEPRECATED(msg)
#endif

/* ------------------------------------------------------------------------
 * Errors
 * ---------------------------------------------------------------------- */

/* One table generates the codes and rjq_strerror().
 *
 * RJQ_EWRONGTYPE: a key of the queue that the call would read or write
 * holds another Redis type (something other than rjq wrote it), or a
 * counter the call reads or counts (a field of the queue's stats hash,
 * its concurrency limit) is not an integer. The call is refused before it
 * writes anything; the error message names the key (and the field).
 * Keys the call does not touch are not checked (an enqueue without delay
 * does not look at the delayed set); rjq_queue_get_stats() checks the
 * queue's lists, sets and counters.
 *
 * RJQ_EAUTH: the server refused a login (WRONGPASS, NOAUTH) or a
 * permission (NOPERM; a command, key or channel refused inside a script:
 * "ERR The user executing the script can't ..."). It is final, never
 * retried: every request and await it affects ends with it, the client's
 * errmsg holds the server's words, and an RJQ_EVENT_ERROR names what was
 * refused (see rjq_event). The connection never loops faster than its
 * reconnect backoff, a worker's claims and the liveness beat back off for
 * the reconnect span (reconnect_max_ms + connect_timeout_ms). A refused
 * channel is not subscribed again on every reconnect: while something
 * still listens to it (a worker's doorbell and push channels, a monitor)
 * it is tried again once per reconnect span, so a fixed ACL is picked up
 * (each refusal again costs one reconnect of the subscriber connection);
 * an await's reply channel, whose awaits all ended, by the next await.
 *
 * RJQ_EPROTO: a reply of the wrong shape, or with a number or length out
 * of range (a negative count, a time past 2^62 ms, an attempt count not a
 * number in 0..1000000): any call that reads a reply may end with it, and
 * a worker's claim that gets one starts none of its jobs (they come back
 * after their lease; rjq_client_get_errmsg() says "claim: unexpected reply").
 * A pub/sub message out of range (a push, an outcome, an event) is
 * dropped the same way. Nothing read from the network is trusted. */
#define RJQ_ERRNO_MAP(XX)                                                     \
    XX(EINVAL, 1, "invalid argument")                                         \
    XX(ENOMEM, 2, "out of memory")                                            \
    XX(ECONN, 3, "connection to Redis lost; the outcome is unknown")          \
    XX(ECANCELED, 4, "operation cancelled")                                   \
    XX(ETIMEDOUT, 5, "timed out")                                             \
    XX(ELEASELOST, 6, "lease lost: the job was reclaimed or finished elsewhere") \
    XX(ENOTFOUND, 7, "no such job")                                           \
    XX(ESTATE, 8, "the job is not in a state that allows this")               \
    XX(EQUEUENAME, 9, "invalid queue name")                                   \
    XX(ETOOBIG, 10, "payload larger than the configured limit")               \
    XX(EWRONGTYPE, 11, "a queue key holds the wrong kind of value")           \
    XX(EOOM, 12, "Redis is out of memory")                                    \
    XX(EAUTH, 13, "Redis refused authentication or permission")              \
    XX(EREDIS, 14, "Redis returned an error")                                 \
    XX(EPROTO, 15, "unexpected reply from Redis")                             \
    XX(ECLOSED, 16, "the client is closed or closing")                        \
    XX(EURL, 17, "invalid Redis URL")                                         \
    XX(EBUSY, 18, "already in progress")                                      \
    XX(EJOBID, 19, "invalid job id")                                          \
    XX(EJOBDEAD, 20, "the job failed for good (it is dead)")                  \
    XX(ETLS, 21, "TLS could not be set up")               \
    XX(EREPLICAS, 22, "done on the master, but fewer replicas than asked confirmed it") \
    XX(EFULL, 23, "the queue is full (max_waiting)")                        \
    XX(EJOBCANCELED, 24, "the job was cancelled")                            \
    XX(ESHARDED, 25, "the queue is sharded: this call does not span its shards yet")

typedef enum rjq_status {
    RJQ_OK = 0,
#define RJQ_XX_(name, num, msg) RJQ_##name = -(num),
    RJQ_ERRNO_MAP(RJQ_XX_)
#undef RJQ_XX_
} rjq_status;

/* A static, never-NULL description of an RJQ_* code (unknown codes included). */
RJQ_API const char *rjq_strerror(int code);

/* The name of an RJQ_* code as written in this header, a static string:
 * "RJQ_OK" for 0, "RJQ_ETIMEDOUT" for RJQ_ETIMEDOUT; NULL for any other
 * number (so a caller can tell an unknown code, e.g. one a newer library
 * returns, and print the number itself). */
RJQ_API const char *rjq_err_name(int code);

/* The library version as MAJOR*10000 + MINOR*100 + PATCH, at run time. */
RJQ_API int rjq_version(void);

/* ------------------------------------------------------------------------
 * Client
 * ---------------------------------------------------------------------- */

typedef struct rjq_client rjq_client;
typedef struct rjq_queue rjq_queue;
typedef struct rjq_worker rjq_worker;
typedef struct rjq_job rjq_job;

struct redisAsyncContext; /* hiredis */

/*
 * Event-loop hooks. The core never includes a loop header: it asks the loop
 * to watch each new hiredis context and to run one one-shot timer.
 *
 * attach    called for every new hiredis context (hiredis frees its context
 *           on disconnect, so this runs again on every reconnect). Wire the
 *           context to the loop (e.g. redisLibeventAttach) and return 0, or
 *           non-zero on failure.
 * set_timer arm the client's single one-shot timer to fire in timeout_ms
 *           milliseconds, replacing any earlier setting; -1 disarms it. When
 *           it fires, call rjq_client_handle_timeout(). 0 means "soon",
 *           never a synchronous call: once the code that armed it returned
 *           to the loop (later in the same loop pass is best: batches go
 *           out before the loop sleeps); when armed from inside
 *           rjq_client_handle_timeout(), not before the next loop iteration
 *           (a timer that re-arms itself must not starve I/O). Mandatory.
 * cleanup   called once from rjq_client_free(), after which the core never
 *           calls the hooks again; release the loop glue here. Optional.
 * resolve   look up a host name (never a numeric address) without blocking
 *           the loop. Optional: without it, a URL's host must be numeric
 *           or "localhost" (127.0.0.1). Call done(arg, NULL, addrs, n)
 *           with the n >= 1 numeric addresses ("10.1.2.3", "fd00::7") in
 *           the order to try them, or done(arg, reason, NULL, 0) when the
 *           name cannot be resolved; exactly once, from inside resolve or
 *           later from the loop, unless resolve_cancel came first. The
 *           strings need only live during the call. Return a handle for
 *           resolve_cancel while the lookup is pending, NULL when done was
 *           already called. Every connect attempt resolves again (DNS
 *           fail-over of managed endpoints) and tries the addresses in turn.
 * resolve_cancel  end a pending lookup: done is not called for it. Needed
 *           with resolve.
 * watch_fd  watch a socket the core connected itself (the sharded pub/sub
 *           connection of a Redis Cluster master, which does not go through
 *           hiredis' async layer): call cb(arg, readable, writable) from the
 *           loop each time fd is readable (want_read) or writable
 *           (want_write), until unwatch_fd; level-triggered and persistent
 *           (a socket left readable is reported again on the next loop
 *           pass). Never calls cb from inside watch_fd. Return a handle for
 *           unwatch_fd, or NULL when it cannot (out of memory): the core
 *           then treats the connect attempt as failed and retries later.
 *           To change what it waits for, the core unwatches and watches
 *           again. Optional: NULL means sharded pub/sub is unavailable on
 *           this loop; an operation that needs it fails with RJQ_EINVAL
 *           and an errmsg naming the missing hook, never a crash.
 * unwatch_fd  stop watching: cb is not called for this handle any more,
 *           also when unwatch_fd is called from inside cb (the core may
 *           free the socket's owner there). Called before the fd is
 *           closed. Needed with watch_fd (without it watch_fd is not
 *           used: sharded pub/sub is unavailable).
 */
typedef void rjq_resolved_fn(void *arg, const char *error, const char *const *addrs, size_t n);
typedef void rjq_fd_fn(void *arg, int readable, int writable);

typedef struct rjq_loop_ops {
    size_t size; /* sizeof(rjq_loop_ops): RJQ_LOOP_OPS_INIT sets it */
    int (*attach)(void *loop, struct redisAsyncContext *ac);
    void (*set_timer)(void *loop, long timeout_ms);
    void (*cleanup)(void *loop);
    void *(*resolve)(void *loop, const char *host, rjq_resolved_fn *done, void *arg);
    void (*resolve_cancel)(void *loop, void *handle);
    void *(*watch_fd)(void *loop, int fd, int want_read, int want_write, rjq_fd_fn *cb, void *arg);
    void (*unwatch_fd)(void *loop, void *handle);
} rjq_loop_ops;
#define RJQ_LOOP_OPS_INIT RJQ_SIZED_INIT_(rjq_loop_ops)

/* Connection events reported to rjq_client_options.on_event. */
typedef enum rjq_event {
    RJQ_EVENT_CONNECTED = 1,    /* a connection is up and its session set */
    RJQ_EVENT_DISCONNECTED = 2, /* a connection dropped; reconnect scheduled */
    RJQ_EVENT_ERROR = 3         /* session set-up failed (e.g. AUTH refused),
                                   or a permission was refused (RJQ_EAUTH):
                                   detail names it: "command connection:
                                   permission refused: script <name> keys
                                   <keys>: <server's words>" (a command: its
                                   name and first argument), "subscriber
                                   connection: permission refused: SUBSCRIBE
                                   <channel>: ..." */
} rjq_event;

/* Which of the client's two connections an event is about. */
#define RJQ_CONN_COMMAND 0
#define RJQ_CONN_SUBSCRIBER 1

typedef void rjq_event_cb(rjq_client *c, rjq_event ev, int conn,
                          const char *detail, void *data);

/*
 * TLS (rediss:// URLs). Needs an rjq built with TLS (rjq_tls_is_available():
 * hiredis >= 1.0 made with SSL). The files are read by rjq_client_new();
 * a file that cannot be used fails it with RJQ_ETLS and a message naming
 * the file. By default the server's certificate must chain to a trusted
 * CA (ca_file / ca_dir, else the system's) and hold the server name (a
 * DNS name, or an IP address for a numeric host); a handshake that fails
 * is reported (RJQ_EVENT_ERROR, rjq_client_get_errmsg) with the cause.
 */
typedef struct rjq_tls_options {
    size_t size;             /* RJQ_TLS_OPTIONS_INIT sets it */
    int enable;              /* 1: TLS for a redis:// URL too */
    const char *ca_file;     /* PEM file of trusted CA certificates */
    const char *ca_dir;      /* OpenSSL CA directory (hashed names) */
    const char *cert_file;   /* client certificate (PEM chain), for mutual
                                TLS; needs key_file */
    const char *key_file;    /* its private key (PEM, unencrypted) */
    const char *server_name; /* the name sent for SNI and checked in the
                                certificate; NULL: the URL's host */
    int insecure;            /* 1: check neither the certificate nor the
                                name (tests only: anyone in the path can
                                read and change everything) */
    int reserved;            /* keep 0 (room for a later field: RJQ_EINVAL
                                when set) */
} rjq_tls_options;
#define RJQ_TLS_OPTIONS_INIT RJQ_SIZED_INIT_(rjq_tls_options)

/* 1 when this build of rjq has TLS, else 0. */
RJQ_API int rjq_tls_is_available(void);

typedef struct rjq_client_options {
    size_t size; /* RJQ_CLIENT_OPTIONS_INIT sets it (see "Extensible structs") */
    /* redis://[user[:password]@]host[:port][/db], rediss://... (TLS),
     * redis+sentinel://[user[:password]@]host[:port][,host[:port]...]/master[/db]
     * (sentinels by address or by name, port 26379 by default:
     * before every connect attempt the client asks them for the master's
     * address and checks with ROLE that it is the master; a third
     * connection, to one sentinel, follows +switch-master and moves both
     * connections at once; a READONLY reply makes it ask again),
     * redis[s]://[user[:password]@]host[:port][,host[:port]...] (seed nodes
     * of a Redis Cluster, tried in turn; any one node's URL works too: the
     * client asks CLUSTER SLOTS at its first connect and, on a cluster,
     * sends each request to the master of its key's slot, one command
     * connection per master used, following MOVED and ASK; database 0
     * only; README "Redis Cluster"), or
     * unix://[user[:password]@]/path. host is a name or a numeric address
     * ([..] for IPv6); names need a loop glue that resolves them
     * (rjq_io_ops resolve: rjq_libevent_client_new_dns), without one
     * only "localhost" (127.0.0.1). A lone word before '@' is the
     * password (redis://secret@host, as redis-cli), unless ?password= is
     * given: then it is the user. Every form takes a query
     * ?key=value&...: db=N (as /N: not both), username=, password= (not
     * both with the user or password before '@'; percent-decoded),
     * timeout= (the connect timeout: seconds "2", "0.5", or "1500ms",
     * "2s"; it replaces connect_timeout_ms; also spelt connect_timeout,
     * dial_timeout, socket_connect_timeout) and protocol=2 (rjq speaks
     * RESP2: protocol=3 is refused). Characters with a meaning in URLs
     * (/ ? # @ : % &) are written %XX in the user, password and path.
     * What the URL names wins over username, password and
     * connect_timeout_ms below. A malformed URL, an unknown query option,
     * one given twice: RJQ_EURL, rjq_client_get_errmsg(NULL) says which. NULL
     * means redis://127.0.0.1:6379. */
    const char *url;
    const char *prefix;        /* key prefix; NULL means "rjq" */
    const char *name;          /* CLIENT SETNAME; NULL means "rjq" */
    long connect_timeout_ms;   /* TCP connect and session set-up; default 5000 */
    /* A request in flight that has no reply after this long means the
     * connection is dead (a stopped server, a half-open TCP connection):
     * it is dropped and made again, and the requests that may not be
     * re-sent end with RJQ_ETIMEDOUT, as do those that waited this long
     * for a connection, or for the client's unwritten output to shrink
     * below 1 MiB (completions, failures and enqueues of jobs with
     * ids are re-sent instead, however long Redis is away, unless the
     * session is refused for a permission: RJQ_EAUTH). The wait
     * counts from when the request was sent, or from when bytes of its
     * reply were last seen arriving: a reply of many MiB that takes
     * longer than this to transfer is waited for while its bytes keep
     * coming (the watchdog looks four times per timeout), and a
     * connection that stops in the middle of one is dropped this long
     * after its last bytes. Default 10000; -1 turns it off. */
    long command_timeout_ms;
    /* A connection with nothing to read for this long is probed (TIME on
     * the command connection, which also tells the client the server's
     * clock; on the subscriber connection a message to itself, on the
     * channel "<prefix>:reply:<random>:live": an ACL user needs +time and
     * the channels "<prefix>:reply:*"; without them the probe channel is
     * refused, an RJQ_EVENT_ERROR says so, and the subscriber connection
     * goes unprobed), so a dead one is found while idle too. Default 5000;
     * -1 turns it off. TCP keepalive is on (TCP). */
    long ping_interval_ms;
    long reconnect_min_ms;     /* first reconnect delay; default 50 */
    long reconnect_max_ms;     /* backoff cap; default 5000 */
    /* Payload/result size limit; default 16 MiB. Raised, a job of many MiB
     * runs once: no push carries more than 16 KiB of a payload (the worker
     * reads bigger ones with a plain HMGET), and a reply still arriving
     * counts neither against command_timeout_ms nor against liveness_ms.
     * The worker extends the job's lease while its payload arrives (in a
     * claim's reply or its own read), so a payload that takes longer than
     * lease_ms to arrive still runs its job once, under one token. */
    size_t max_payload;
    rjq_event_cb *on_event;    /* optional connection event listener */
    void *event_data;
    /* A client with workers renews a liveness entry in Redis every second
     * (one script call, from its loop); when its entry has not been renewed
     * for this long (the process died, hangs, or lost Redis), another
     * client returns the jobs it held to their queues at once, without
     * waiting for their leases, so leases can be long. A loop blocked
     * longer than this (a handler doing long work on the loop's thread)
     * has its jobs taken and run elsewhere: raise it, or run long work off
     * the loop. A reply that takes longer than this to arrive (a payload
     * of many MiB) is no block: beats go on while it arrives (Redis runs
     * them as it reads them), and the job it brings is started. Default
     * 5000 (at least 1000); -1 turns it off (jobs of a dead worker then
     * come back when their lease ends). An ACL user needs the keys
     * "<prefix>:{clients}:*": without them each refused beat is an
     * RJQ_EVENT_ERROR (naming the keys), the client runs without liveness
     * (as with -1) and beats again once per reconnect span
     * (reconnect_max_ms + connect_timeout_ms). */
    long liveness_ms;
    /* TLS settings (see rjq_tls_options); NULL: defaults, TLS only for
     * rediss:// URLs. */
    const rjq_tls_options *tls;
    /* redis+sentinel:// URLs: the sentinels' own AUTH (the URL's user and
     * password are the master's); NULL: none. */
    const char *sentinel_user;
    const char *sentinel_password;
    /* Durability: with wait_replicas > 0, an enqueue, a completion and a
     * failure report RJQ_OK only once WAIT says that many replicas have
     * it, so a failover cannot lose it; when fewer confirm within
     * wait_timeout_ms (default 1000, below half of command_timeout_ms) the
     * callback gets RJQ_EREPLICAS instead: the write is done on the
     * master (an enqueue's jobs are given as for RJQ_OK) but a failover
     * now may lose it. Awaited enqueues (rjq_enqueue_await) are not
     * reported short: their await ends RJQ_ENOTFOUND if the job is lost.
     * One WAIT follows each burst of such writes (a loop pass), one at a
     * time: it holds the command connection until the replicas answer,
     * so every request behind it waits (about one replica round trip when
     * they are healthy, up to wait_timeout_ms when they are not). 0: no
     * WAIT. */
    int wait_replicas;
    long wait_timeout_ms;
    /* AUTH for every connection the client makes to Redis (command and
     * subscriber connections, a Redis Cluster's node connections and
     * sharded pub/sub links, the master a Sentinel URL names; not the
     * sentinels: sentinel_user, sentinel_password), for when the URL
     * names none, e.g. a unix:// socket, or a password kept out of the
     * URL. The URL's user and password (before '@' or in its query) win,
     * each on its own. NULL or "": none. A username needs a password
     * (from here or the URL): RJQ_EINVAL otherwise. password alone is the
     * legacy AUTH <password> (ACL user "default"). */
    const char *username;
    const char *password;
} rjq_client_options;
#define RJQ_CLIENT_OPTIONS_INIT RJQ_SIZED_INIT_(rjq_client_options)

/*
 * Create a client and start connecting both connections. Commands issued
 * before the connections are up are queued and sent once the session
 * (AUTH, SELECT, CLIENT SETNAME, script loading) is set. If the session is
 * refused (wrong password, missing database), the queued commands fail
 * with RJQ_EAUTH or RJQ_EREDIS and nothing runs on that connection; an
 * RJQ_EVENT_ERROR event carries the server's words. RJQ_EAUTH fails every
 * queued command, also those otherwise re-sent however long Redis is away
 * (completions, enqueues of jobs with ids); the next attempt comes at the
 * reconnect backoff. After a disconnect
 * the client reconnects with capped exponential backoff and replays the
 * session and its subscriptions.
 *
 * On success *out owns the client; free it with rjq_client_free().
 * ops is copied (it need not outlive the call).
 * Errors: RJQ_EINVAL (NULL out/ops/set_timer/attach, resolve without
 * resolve_cancel, a size of opts, ops or opts->tls this library does not
 * read: see "Extensible structs", a username without a password),
 * RJQ_EURL (a malformed URL, or a ?username= without a password), RJQ_ETLS (TLS
 * asked for without TLS in this build, or its files unusable),
 * RJQ_ENOMEM; rjq_client_get_errmsg(NULL) says why.
 * Not to be called from inside a callback of the same loop glue it creates.
 */
RJQ_API int rjq_client_new(rjq_client **out, const rjq_client_options *opts,
                           const rjq_loop_ops *ops, void *loop);

/* The adapter calls this when the timer armed by set_timer (rjq_loop_ops)
 * or timer (rjq_io_ops) fires. */
RJQ_API void rjq_client_handle_timeout(rjq_client *c);

/*
 * Any event loop, without hiredis (the libcurl multi style). Instead of
 * rjq_loop_ops, the application gives two callbacks: it is told which
 * descriptors to watch for what, and when the client's next timer is due;
 * it calls rjq_client_handle_io() when a descriptor is ready and
 * rjq_client_handle_timeout() when the timer fires. The library drives
 * hiredis itself: no redisAsyncContext, no hiredis adapter. The glue in
 * adapters/rjq/ (libevent, libev, libuv, GLib) and examples/poll.c use it.
 *
 * socket    watch fd for `what`: RJQ_IO_READ, RJQ_IO_WRITE or both, until
 *           a later call for the same fd says otherwise; RJQ_IO_NONE (0):
 *           stop watching it (it is about to close, or is idle). Called
 *           only when what changes for that fd, also from inside
 *           rjq_client_new_io() (the connects start there),
 *           rjq_client_handle_io(), rjq_client_handle_timeout() and any
 *           rjq call. Level-triggered: while fd stays ready for what it
 *           watches, call rjq_client_handle_io() on every loop pass.
 *           Every fd the client was told to watch is told RJQ_IO_NONE
 *           before it closes, and before cleanup. It cannot fail: a loop
 *           that cannot watch a descriptor (out of memory) has no way on
 *           (the glue in adapters/rjq/ aborts then, as GLib does).
 *           Mandatory.
 * timer     the same as rjq_loop_ops.set_timer: arm the client's single
 *           one-shot timer for timeout_ms (0: soon, never synchronously;
 *           from inside rjq_client_handle_timeout() not before the next
 *           loop pass), replacing any earlier setting; -1 disarms it. When
 *           it fires, call rjq_client_handle_timeout(). Mandatory.
 * cleanup   called once from rjq_client_free() (possibly deferred to the
 *           end of the rjq call or callback it was made in), after every
 *           fd was told RJQ_IO_NONE; no callback and no rjq_client_handle_*
 *           call follows. Optional.
 * resolve, resolve_cancel  as in rjq_loop_ops, with arg for loop.
 *           Optional: without them a URL's host must be numeric or
 *           "localhost".
 * arg       passed to each of them.
 */
#define RJQ_IO_NONE 0
#define RJQ_IO_READ 1
#define RJQ_IO_WRITE 2

typedef struct rjq_io_ops {
    size_t size; /* sizeof(rjq_io_ops): RJQ_IO_OPS_INIT sets it */
    void *arg;
    void (*socket)(void *arg, int fd, int what);
    void (*timer)(void *arg, long timeout_ms);
    void (*cleanup)(void *arg);
    void *(*resolve)(void *arg, const char *host, rjq_resolved_fn *done, void *done_arg);
    void (*resolve_cancel)(void *arg, void *handle);
} rjq_io_ops;
#define RJQ_IO_OPS_INIT RJQ_SIZED_INIT_(rjq_io_ops)

/*
 * rjq_client_new() on the two callbacks of io (copied: it need not outlive
 * the call). The same contract otherwise.
 * Errors: those of rjq_client_new(), with RJQ_EINVAL also for a NULL io,
 * socket or timer, or resolve without resolve_cancel.
 */
RJQ_API int rjq_client_new_io(rjq_client **out, const rjq_client_options *opts,
                              const rjq_io_ops *io);

/*
 * fd is ready: events is RJQ_IO_READ, RJQ_IO_WRITE or both, as the loop
 * saw it (poll()'s POLLERR or POLLHUP: pass both). Only what the socket
 * callback asked for is acted on; an fd the client does not watch (any
 * more) is ignored, so events a loop gathered before a change may be
 * passed. Works out every reply that arrived, then writes what that
 * produced without waiting for the next loop pass (a write waits for
 * RJQ_IO_WRITE only when the socket is full). A client made with
 * rjq_client_new() has no descriptors of its own: the call is ignored.
 * May free the client (rjq_client_free() inside a callback run here).
 */
RJQ_API void rjq_client_handle_io(rjq_client *c, int fd, int events);

/*
 * Free the client: every pending callback is called once with
 * RJQ_ECANCELED (outcomes that arrived in the same Redis reply as the
 * callback that freed the client are still reported as they are), workers
 * stop at once (their running jobs are abandoned and
 * come back after their lease), both connections close, the loop glue is
 * released. Safe from inside any callback (the free then completes when the
 * callback returns). NULL is a harmless no-op.
 * From the call on, also inside the callback that made it, calls that
 * would start work return RJQ_ECLOSED (so no callback is ever accepted
 * and then called from inside the call that accepted it).
 */
RJQ_API void rjq_client_free(rjq_client *c);

/* What a graceful close did (rjq_client_close). */
typedef struct rjq_close_report {
    /* RJQ_OK: everything finished or was handed back; RJQ_ETIMEDOUT: some
     * requests were still unanswered (Redis unreachable) when the client
     * was freed; RJQ_ECANCELED: rjq_client_free() was called meanwhile. */
    int status;
    size_t handed_back; /* running jobs handed back to their queue at the
                           deadline, their attempt not counted */
    size_t cancelled;   /* requests that had no reply when the client was freed */
} rjq_close_report;

typedef void rjq_closed_cb(const rjq_close_report *report, void *data);

/*
 * Close the client gracefully, then free it:
 * - every worker stops taking work (its registration for pushes is
 *   dropped; jobs that still reach it are handed back, their attempt not
 *   counted), and is freed once its jobs are finished;
 * - running handlers may finish until deadline_ms from now: completions
 *   and failures are sent, as are enqueues already made;
 * - at the deadline, jobs still running are handed back to their queue
 *   (first in their priority, attempt not counted): nothing waits for a
 *   lease; a timed-out job whose slot was freed (on_notice) is not handed
 *   back (its timeout's failure stands). Their handles are the caller's to
 *   drop: completing or failing one then returns RJQ_ECLOSED and frees it;
 * - once nothing is in flight (or command_timeout_ms after the deadline,
 *   when Redis does not answer) the client is freed as by
 *   rjq_client_free() (awaits end with RJQ_ECANCELED) and cb (may be NULL)
 *   gets the report, exactly once.
 * New work may still be given during the close (it is sent and answered if
 * there is time); rjq_worker_start() returns RJQ_ECLOSED. rjq_client_free()
 * during the close frees at once (cb gets RJQ_ECANCELED).
 * Returns RJQ_EINVAL (deadline_ms < 0), RJQ_EBUSY (already closing), or
 * RJQ_ECLOSED (being freed).
 */
RJQ_API int rjq_client_close(rjq_client *c, long deadline_ms, rjq_closed_cb *cb, void *data);
/* (Workers the close stops are freed by it: their handles must not be
 * used once rjq_client_close() returned RJQ_OK.) */

/* Detail of the last error seen by this client (Redis' error text, ...).
 * Owned by the client; valid until the next call on it. With c NULL: why
 * the last rjq_client_new() of the calling thread failed (bad URL ...). */
RJQ_API const char *rjq_client_get_errmsg(const rjq_client *c);

/* A user pointer stored in the client. */
RJQ_API void rjq_client_set_data(rjq_client *c, void *data);
RJQ_API void *rjq_client_get_data(const rjq_client *c);

/* 1 when the command connection is up and its session set, else 0. */
RJQ_API int rjq_client_is_connected(const rjq_client *c);

/* ------------------------------------------------------------------------
 * Queues
 * ---------------------------------------------------------------------- */

typedef struct rjq_queue_options {
    size_t size;            /* RJQ_QUEUE_OPTIONS_INIT sets it */
    long long retention_ms; /* completed jobs (their records and results) are
                               deleted this long after completion (at the
                               latest 64 completions or one reclaim period
                               later); default 3600000 (1 h); -1: no age
                               limit */
    long completed_max;     /* at most this many completed jobs are kept, the
                               oldest deleted first, a completion batch at a
                               time and, for caps of 64 or more, down to
                               cap/64 (at most 64) below the cap: so a few
                               less may remain; default 100000; -1: no count
                               limit. Records are deleted by completion calls
                               and by the workers' reclaim sweep, a bounded
                               number each time */
    long dead_max;          /* dead jobs kept (oldest dropped and deleted past
                               this); default 100000. Also caps the cancelled
                               jobs kept. A job whose dependents are not all
                               released yet is kept past it until a later
                               trim ("Dependencies") */
    long max_waiting;       /* a bounded queue: an enqueue that would make
                               more than this many jobs wait (ready,
                               prioritised and delayed; jobs whose id exists
                               do not count) is refused with RJQ_EFULL, a
                               batch as a whole, nothing written; each
                               rjq_enqueue() on its own, in call order,
                               even when a loop turn's enqueues share a
                               script call (so exactly the bound is taken);
                               checked on the server, so every producer of
                               the queue should give the same bound; 0:
                               none */
    long long job_timeout_ms; /* the timeout_ms of jobs enqueued through this
                                 handle that give none; 0: none */
    long long history_flush_ms; /* the queue's history (rjq_queue_get_history):
                                   this handle's producers and workers count
                                   in memory and add their counts to it every
                                   history_flush_ms (one script call per flush
                                   with activity, none while idle); 0: the
                                   default 1000; -1: this handle writes no
                                   history; else 1..3600000 */
} rjq_queue_options;
#define RJQ_QUEUE_OPTIONS_INIT RJQ_SIZED_INIT_(rjq_queue_options)

/*
 * Open a queue handle. Names are 1..200 bytes, without '{', '}', spaces or
 * control characters (RJQ_EQUEUENAME). The handle belongs to the client and
 * is freed with it, or earlier by rjq_queue_close(); opening the same name
 * twice gives two handles to the same queue. All keys of queue Q live under
 * "<prefix>:{Q}:" (one hash slot).
 *
 * The handle learns the queue's shard layout (section "Sharded queues")
 * before its first request: the declaration is read (one GET, sent now)
 * and, until it has answered, the calls that a sharded queue routes
 * (rjq_enqueue, rjq_enqueue_batch, rjq_worker_start, rjq_queue_get_stats,
 * rjq_queue_cancel, rjq_queue_get_job, rjq_queue_delete, rjq_queue_pause,
 * rjq_queue_resume, rjq_queue_reclaim, rjq_queue_replay, rjq_queue_purge,
 * rjq_queue_list_jobs, rjq_queue_list_dead) are held: their arguments are
 * checked and copied as far as they can be without the layout (rjq_enqueue
 * and rjq_enqueue_batch check every job now; the others' argument errors
 * then reach their callbacks), then they are made in call order, each
 * routed as the layout says (rjq_queue_count_shards() says 1 until the
 * layout is known). rjq_worker_start returns its handle at once
 * and starts it then (rjq_worker_stop before that ends it: its stop
 * callback gets RJQ_OK). If the read fails (RJQ_ECONN, RJQ_ETIMEDOUT,
 * RJQ_EPROTO for a declaration this library cannot read, RJQ_EAUTH,
 * RJQ_EREDIS, RJQ_ENOMEM), every held call's callback gets that error,
 * exactly once, and nothing was sent for it; a held worker waits on (not
 * started, nothing sent) and the read is made again at the next connect;
 * the next held call reads again too. When the client is freed meanwhile
 * the held callbacks get RJQ_ECANCELED. rjq_enqueue_await and
 * rjq_queue_await without `out` are held too (rjq_client_count_awaits()
 * counts them once they are made), and so are they with `out`: *out is an
 * await handle at once (counted at once; rjq_await_cancel ends it with
 * RJQ_ECANCELED, an enqueue's job still sent, routed, once the layout is
 * read; its timeout runs from the call, and when it ends first the await
 * ends RJQ_ETIMEDOUT with no id, its job sent as a cancelled one's; an
 * all-digit id of rjq_queue_await on a queue found sharded ends
 * RJQ_ESHARDED), and so is rjq_queue_set_limits (split
 * over the shards once the layout is read; its argument errors are still
 * returned at once). rjq_queue_monitor returns its handle at once and
 * attaches it (to every shard, or to the queue) once the layout is read,
 * in call order with the calls held; a failed read leaves it waiting for
 * the next, as a worker. rjq_worker_start_queues with such a handle among
 * its queues returns its worker at once and starts it once every queue
 * named knows its layout (in weighted or strict order as asked); when one
 * of them is sharded the worker is never started (rjq_client_get_errmsg
 * says which, nothing is sent for it): rjq_worker_stop ends it, its stop
 * callback RJQ_OK. Schedules are not held: they live in the queue's own
 * slot on a sharded queue too (rjq_schedule_set, _remove and _list act on
 * it at once), and a scheduler started on such a handle fires nothing
 * before the layout is known. Returns RJQ_OK, RJQ_EINVAL (c or out NULL, invalid options),
 * RJQ_EQUEUENAME, RJQ_ECLOSED, RJQ_ENOMEM.
 */
RJQ_API int rjq_queue_open(rjq_client *c, const char *name,
                           const rjq_queue_options *opts, rjq_queue **out);

/*
 * Close a queue handle before its client goes (the queue and its jobs in
 * Redis are untouched). Returns:
 * - RJQ_OK: q may not be passed to any call any more. What was already
 *   asked of it still ends as promised, each callback exactly once:
 *   enqueues (also those of this loop turn, not yet sent: they are sent),
 *   awaits (rjq_enqueue_await, rjq_queue_await: they go on until their
 *   outcome, timeout or cancel), administration and schedule calls. The
 *   handle's memory, its timers and the channels it listened on are
 *   released once the last of them has ended (at the end of a loop pass,
 *   never inside a call or callback, so closing it from inside one of its
 *   own callbacks is safe). Opening the same name again gives a new,
 *   independent handle at any time.
 * - RJQ_EBUSY: a worker (rjq_worker_start, or one of several queues), a
 *   monitor or a scheduler still runs on q; nothing changed. Stop them
 *   first: a worker counts until its stop callback ran (from inside it,
 *   the close succeeds), a monitor and a scheduler until their stop call.
 * - RJQ_EINVAL: q is NULL, or was already closed (while its work still
 *   runs; after that, q is freed memory).
 */
RJQ_API int rjq_queue_close(rjq_queue *q);

RJQ_API const char *rjq_queue_get_name(const rjq_queue *q);
RJQ_API rjq_client *rjq_queue_get_client(const rjq_queue *q);

/* ------------------------------------------------------------------------
 * Enqueue
 * ---------------------------------------------------------------------- */

typedef enum rjq_backoff_type {
    RJQ_BACKOFF_DEFAULT = 0,     /* exponential, base 1000 ms, cap 1 h */
    RJQ_BACKOFF_EXPONENTIAL = 1, /* base*2^(attempt-1), capped, with jitter
                                    (uniform in [delay/2, delay]) */
    RJQ_BACKOFF_FIXED = 2        /* base every time */
} rjq_backoff_type;

typedef struct rjq_backoff {
    rjq_backoff_type type;
    long long base_ms; /* 0 means 1000 */
    long long max_ms;  /* cap for exponential; 0 means 3600000 */
} rjq_backoff;

#define RJQ_DELAY_MAX 3153600000000LL /* 100 years, in ms */
#define RJQ_PRIORITY_MAX 1000000
#define RJQ_PRIORITY_MIN (-1000000)
#define RJQ_BATCH_MAX 10000
#define RJQ_JOB_ID_MAX 200

#define RJQ_HEADERS_MAX 16
#define RJQ_HEADER_KEY_MAX 64
#define RJQ_HEADER_VALUE_MAX 1024

/* One job header (rjq_job_options.headers): NUL-terminated strings. */
typedef struct rjq_header {
    const char *key;
    const char *value;
} rjq_header;

/* Element i of a headers array the library hands out (rjq_job_info.headers,
 * rjq_outcome.headers): index with rjq_header_get, never headers[i] for
 * i > 0. NULL for a NULL list. (rjq_header is also an array the caller
 * gives, rjq_job_options.headers, read at this header's sizeof: it does
 * not grow without a size of its own; the accessor keeps every array the
 * library hands out read one way.) */
RJQ_API const rjq_header *rjq_header_get(const rjq_header *list, size_t i);

/*
 * Dependencies (README "Dependencies and batches"). A job enqueued with
 * rjq_job_options.after waits for other jobs, of any queues of the same
 * client prefix (on any masters of a cluster): it is stored in the state
 * "waiting" until every dependency
 * has finished, then becomes ready, or delayed by its own delay_ms.
 * - The job is written first, in its own queue's slot, with each
 *   dependency pending; then the enqueuing client registers it with each
 *   dependency's queue (a call on that queue: every script touches one
 *   queue's slot). A dependency that already finished when it is
 *   registered (or that does not exist: its outcome is "missing", handled
 *   like dead) is counted at once, so no outcome falls between the two.
 *   The client gathers these calls: the jobs with dependencies enqueued in
 *   one loop turn are written by one call per queue, and registered by one
 *   call per dependency's queue (sent at the end of the turn, or before
 *   the client's next request, whichever comes first).
 * - When a dependency finishes (completed, dead, cancelled), the script
 *   that finished it tells its caller (its reply carries the dependents),
 *   and the finishing client (the worker's completion or failure,
 *   rjq_queue_cancel's caller, the client whose reclaim or orphan sweep
 *   made it dead, rjq_queue_reclaim's caller) sends an idempotent release
 *   to each dependent's queue at once: each dependency is counted once, a
 *   release sent again changes nothing. The dependency's list of
 *   dependents is dropped once every one was released. A dead or
 *   cancelled job deleted (rjq_queue_delete, rjq_queue_purge) before its
 *   dependents were all released has them released by the deleting
 *   client, with how it ended. A dependent in the dependency's own queue
 *   is registered by the job's write itself, and released by the script
 *   that finishes or deletes the dependency (completion, failure, cancel,
 *   reclaim, orphan sweep, delete), in that same script (no call of the
 *   client's; a completion sent again after a lost reply releases nothing
 *   twice).
 * - Policies, for a dependency that ended dead, cancelled or missing:
 *   RJQ_AFTER_FAIL buries the job (dead, error "dependency <queue>:<id>
 *   ended <outcome>", or "dependency <queue>:<id> was removed (no record
 *   of it)" for a missing one; its own dependents apply their policies in
 *   turn),
 *   RJQ_AFTER_RUN counts it as done, RJQ_AFTER_IGNORE drops it from the
 *   job's list.
 * - Cancelling a waiting job cancels it alone (its dependents apply their
 *   policy); replaying a dead dependency re-blocks nothing released.
 * - A finisher that dies between its finish and the releases (or a
 *   release that fails) leaves the dependency's list of dependents
 *   recorded: the sweep releases them. It runs with the periodic visit
 *   of the dependency's queue (the reclaim sweep of a client whose
 *   workers work on that queue, rjq_worker_options.reclaim_ms), so a
 *   dependent waits at most about one such period longer, and is
 *   released once. The sweep reads only the dependencies that finished
 *   and whose dependents are not all released yet (indexed by the finish
 *   itself): none while there are none.
 * - Codes: rjq_enqueue's; RJQ_EINVAL also for more than RJQ_AFTER_MAX
 *   dependencies, a bad queue name (empty, over 200 bytes, blanks or
 *   braces) or job id of one, an unknown policy, a debounce with
 *   dependencies, a batch item with dependencies (nothing is written).
 *   The callback's status is an error when a registration failed (the job
 *   was written and may wait until it is enqueued again with the same id:
 *   registering again changes nothing registered already).
 * - An enqueuing client that dies between its two steps (or a
 *   registration that fails) leaves a job no dependency knows of: the
 *   periodic visit of the job's queue registers it again once its last
 *   registration is a minute old, then after as long as it had waited (at
 *   most an hour).
 * - A handler reads its dependencies' outcomes with rjq_job_dependencies();
 *   rjq_stats.waiting counts the waiting jobs, RJQ_STATE_WAITING lists them.
 * - Retention: a finished dependency's record stays until its
 *   dependents are released: the retention sweep keeps a completed one,
 *   the dead_max trims keep a dead or cancelled one (past the cap), and a
 *   later sweep deletes the completed one; the dead or cancelled one goes
 *   at the release, the releasing client trimming to its dead_max. A dependency deleted before the
 *   dependent was registered (a retention shorter than the time between
 *   the two enqueues) counts as "missing". So does a dependency whose record was removed before it
 *   finished (deleted outside rjq, or lost): the periodic visit of the
 *   dependent's queue registers each waiting job again (as above: a minute
 *   after its registration, then after as long as it had waited, at most
 *   an hour), which finds the dependency missing and applies the policy.
 * - Batches: "Batches" below; trees: rjq_enqueue_flow.
 * - Sharded queues ("Sharded queues" below): a job enqueued with `after`
 *   on a sharded queue's handle waits on its shard. A dependency named by
 *   a sharded queue (its name, not a shard's) is recorded and registered
 *   as the shard its id routes to ("<name>~<i>-<k>", as the dependent's
 *   list reads it), whose finisher releases it; the enqueue first learns
 *   that queue's layout (once per client: a handle of the queue is opened
 *   when the client has none, the enqueue held until its read answers).
 *   A server-assigned (all-digit) id of a sharded queue names no shard:
 *   RJQ_ESHARDED (returned, or the callback's when the layout was being
 *   read; name the shard's queue instead).
 */
#define RJQ_AFTER_MAX 100
#define RJQ_AFTER_FAIL 0
#define RJQ_AFTER_RUN 1
#define RJQ_AFTER_IGNORE 2

/* One dependency: a job of queue `queue` (a queue name, not a handle)
 * with id `id` (a caller's id or a server-assigned number). */
typedef struct rjq_dep {
    const char *queue;
    const char *id;
} rjq_dep;

/* Element i of a dependents list the library hands out (rjq_dependents_cb,
 * rjq_job_deps_cb): index with rjq_dep_get, never list[i] for i > 0. NULL
 * for a NULL list. (rjq_dep is also an array the caller gives,
 * rjq_job_options.after, read at this header's sizeof: as rjq_header, it
 * does not grow without a size of its own.) */
RJQ_API const rjq_dep *rjq_dep_get(const rjq_dep *list, size_t i);

typedef struct rjq_job_options {
    size_t size; /* RJQ_JOB_OPTIONS_INIT sets it */
    /* Caller's id (1..RJQ_JOB_ID_MAX bytes, no spaces or control characters,
     * not all digits: numeric ids are the server-assigned ones). Enqueueing
     * an id that exists reports the existing job (existed = 1) and writes
     * nothing. NULL lets the server assign a numeric id (on a sharded
     * queue's handle, the library makes one: "Sharded queues" below). */
    const char *id;
    long long delay_ms; /* run no earlier than this from now (server time);
                           0..RJQ_DELAY_MAX */
    int priority;       /* RJQ_PRIORITY_MIN..MAX; higher first; 0 default;
                           strict order, FIFO within one priority */
    int max_attempts;   /* runs before the job goes dead; 0 means 3 */
    rjq_backoff backoff;/* delay between attempts after a failure */
    long long timeout_ms; /* run time limit of each attempt, from its start
                             (server time); 0: the queue's job_timeout_ms;
                             0..RJQ_DELAY_MAX. Past it the job's lease is
                             not extended: the reclaim sweep fails it with
                             "timed out after N ms" under its retry policy
                             (backoff, then dead), and the handler's
                             on_notice gets RJQ_ETIMEDOUT within a pub/sub
                             hop of that sweep, or with its worker's next
                             lease extension (lease_ms/3 apart) if that
                             comes first or the message was missed; every
                             attempt that times out is told, also while
                             later attempts of the job run. A completion or
                             failure past the limit is refused
                             (RJQ_ELEASELOST) and changes nothing, whether
                             or not a sweep ran yet: the completion script
                             compares the limit with the server's clock.
                             A holder that hangs loses the job at the
                             limit, whatever its lease */
    long long dedup_ms;   /* with an id: the id stays reserved at least this
                             long after the job finished (completed, dead or
                             cancelled), even when its record is deleted
                             sooner (retention, the dead cap): an enqueue of
                             it meanwhile reports it existing (existed = 1)
                             and writes nothing. An id is reserved anyway
                             while its record is kept. 0..RJQ_DELAY_MAX */
    int debounce;         /* with an id: when a job of that id still waits
                             (ready or delayed, not running), it takes this
                             payload (and options, when given) and its due
                             time moves to delay_ms from now; reported as
                             existed = 1, replaced = 1 */
    int reserved;         /* keep 0 (room for a later field: RJQ_EINVAL
                             when set) */
    /* Headers: a small string map carried with the job (W3C trace context
     * `traceparent` and `tracestate`, or keys of the caller's own), given
     * to the handler (rjq_job_get_header, rjq_job_get_header_at) and
     * returned by rjq_job_info() and `rjq serve`'s job JSON, kept with the
     * job's options record (no command more per job; a job without
     * headers costs what it did). nheaders 0..RJQ_HEADERS_MAX; keys
     * 1..RJQ_HEADER_KEY_MAX bytes of [A-Za-z0-9_.-], each once; values
     * 0..RJQ_HEADER_VALUE_MAX printable ASCII bytes (0x20..0x7e). Anything
     * else: RJQ_EINVAL, nothing written. A debounce that replaces a
     * waiting job's options replaces its headers too. Schedules
     * (rjq_schedule.opts) carry none: RJQ_EINVAL when set there. */
    const struct rjq_header *headers;
    size_t nheaders;
    /* Dependencies (see "Dependencies" below): the jobs this one waits
     * for, n_after of them (1..RJQ_AFTER_MAX; after NULL and n_after 0:
     * none). Only rjq_enqueue() takes them: a batch item with them is
     * refused (RJQ_EINVAL), as is a debounce with them. */
    const struct rjq_dep *after;
    size_t n_after;
    int after_policy;     /* RJQ_AFTER_FAIL (0, default), RJQ_AFTER_RUN or
                             RJQ_AFTER_IGNORE: what a dependency that ended
                             dead or cancelled (or that does not exist) does */
    int reserved2;        /* keep 0 (room for a later field: RJQ_EINVAL
                             when set) */
    /* The job's group (a tenant id; README "Groups", "Job groups" below):
     * 1..RJQ_GROUP_NAME_MAX bytes of [A-Za-z0-9_.:@-]; NULL: none.
     * rjq_enqueue() and rjq_enqueue_batch() take it (a batch's items all
     * have a group, any groups, or none has: else RJQ_EINVAL; an await's
     * enqueue or a schedule with a group: RJQ_EINVAL), not with a debounce
     * or a dependency (RJQ_EINVAL). On a sharded queue's handle the job goes to
     * its group's shard (crc16(group) mod N): an id given with it must
     * route there too (crc16(id) mod N the same, else RJQ_EINVAL, nothing
     * written); an anonymous one gets a made id that does. */
    const char *group;
} rjq_job_options;
#define RJQ_JOB_OPTIONS_INIT RJQ_SIZED_INIT_(rjq_job_options)

/* One job of a batch. opts may be NULL (defaults). size: RJQ_ENQUEUE_ITEM_INIT
 * sets it, or set it to sizeof(rjq_enqueue_item) in every item (the batch
 * is read in steps of items[0].size). */
typedef struct rjq_enqueue_item {
    size_t size;
    const void *payload;
    size_t len;
    const rjq_job_options *opts;
} rjq_enqueue_item;
#define RJQ_ENQUEUE_ITEM_INIT RJQ_SIZED_INIT_(rjq_enqueue_item)

/* What enqueue reports per job, in request order. */
typedef struct rjq_enqueued {
    const char *id; /* NUL-terminated: the caller's id, or for a job
                       without one the server-assigned number ("1", "2",
                       ...), or on a sharded queue's handle the id the
                       library made for it ("a<client id>.<n>.<k>", unique
                       across the shards, routed to the job's shard: every
                       by-id call on the handle finds it) */
    int existed;    /* 1 when the id already existed (nothing was written,
                       unless replaced) */
    int replaced;   /* 1 when a debounce replaced the waiting job's payload */
} rjq_enqueued;

/* Element i of the jobs array an rjq_enqueue_cb gets (the struct may grow:
 * never jobs[i] for i > 0). */
RJQ_API const rjq_enqueued *rjq_enqueued_get(const rjq_enqueued *jobs, size_t i);

typedef void rjq_enqueue_cb(rjq_client *c, int status, const rjq_enqueued *jobs,
                            size_t n, void *data);

/*
 * Enqueue one job (payload is binary-safe, may be empty). The job record and
 * its place in ready/delayed are written by one script: no half jobs.
 * cb may be NULL. cb gets status RJQ_OK and n == 1, or an error and n == 0:
 * RJQ_EFULL (a bounded queue refused it: see max_waiting), RJQ_EWRONGTYPE,
 * RJQ_EOOM, RJQ_EAUTH, RJQ_EREDIS, RJQ_EPROTO (nothing written), RJQ_ENOMEM (the batch could not be sent; nothing written),
 * RJQ_ECANCELED (the client was freed first), or RJQ_ECONN / RJQ_ETIMEDOUT
 * (unknown: retry with an explicit id to stay idempotent). A call whose
 * jobs all have explicit ids never gets those two: it is idempotent, so it
 * is sent again after a reconnect, and its callback gets the outcome
 * (existed is 1 when the first send had written the job).
 * Returns RJQ_EINVAL, RJQ_EJOBID, RJQ_ETOOBIG, RJQ_ECLOSED, RJQ_ENOMEM
 * synchronously (nothing sent); RJQ_ESHARDED for a dependency (opts->after)
 * named by a server-assigned id of a sharded queue ("Dependencies": cb's
 * status instead when that queue's layout was being read).
 */
RJQ_API int rjq_enqueue(rjq_queue *q, const void *payload, size_t len,
                        const rjq_job_options *opts, rjq_enqueue_cb *cb,
                        void *data);

/* Enqueue 1..RJQ_BATCH_MAX jobs atomically (items[] is read in steps of
 * items[0].size: see "Extensible structs"): one script call, or, past 1 MiB
 * of arguments, several calls of at most 1 MiB in one transaction (MULTI/
 * EXEC: nothing runs between them; a bounded queue takes or refuses the
 * batch whole, also when it shares a script call with other enqueues of
 * the loop turn, each of which is admitted on its own; the Redis user needs MULTI and EXEC, which the producer
 * role of `rjq acl` has). Same errors as rjq_enqueue(); any invalid item fails the
 * whole call synchronously. Items with a group (rjq_job_options.group:
 * every item has one, or none) go in one call as one unit too: refused
 * whole (RJQ_EFULL) when the queue's bound or one of their groups' bounds
 * would refuse one of them; such a batch never goes as several calls nor
 * with payloads ahead. A batch of many MiB is copied whole by the
 * client; while more than 1 MiB of earlier requests is still unwritten,
 * it waits in the client (see command_timeout_ms).
 * Payloads ahead: the jobs gathered in one loop turn (or one batch) that
 * all have no id and priority 0, with payloads of 1 KiB or more on
 * average, go as one transaction that checks the handle's reservation of
 * job numbers, writes each payload with HSETNX under one of them, then runs
 * the enqueue script with the numbers only: Redis' Lua never sees the payload bytes
 * (with 16 KiB payloads that was most of an enqueue's cost). Still atomic:
 * a refused batch leaves no payload behind. A handle reserves numbers
 * (1024 or more at a time) after its first such batch lands, so assigned
 * ids may skip the numbers a handle held unused when it went; enqueued
 * (rjq_stats) counts jobs, not numbers. The Redis user needs HSETNX for
 * it (the producer role of `rjq acl` has it); without, the first refused
 * batch is sent again the usual way and the handle keeps to that way. */
RJQ_API int rjq_enqueue_batch(rjq_queue *q, const rjq_enqueue_item *items,
                              size_t n, rjq_enqueue_cb *cb, void *data);

/* ------------------------------------------------------------------------
 * Workers and jobs
 * ---------------------------------------------------------------------- */

/*
 * Called once per claimed job. The handler owns `job` until it calls
 * rjq_job_complete() or rjq_job_fail(), exactly once, now or later from
 * any callback (the job's lease is extended while it runs). That call
 * releases the handle whatever it returns.
 */
typedef void rjq_handler_fn(rjq_job *job, void *data);

/* A running job must stop: see rjq_worker_options.on_notice. */
typedef void rjq_notice_fn(rjq_job *job, int reason, void *data);

typedef struct rjq_worker_options {
    size_t size;      /* RJQ_WORKER_OPTIONS_INIT sets it */
    int concurrency;  /* jobs running at once; default 1 */
    long lease_ms;    /* lease per claim, extended every lease_ms/3 while the
                         job runs; default 30000 */
    long poll_ms;     /* wait before a failed claim is tried again;
                         default 5000 (a claim refused for a permission,
                         RJQ_EAUTH: the client's reconnect span instead,
                         reconnect_max_ms + connect_timeout_ms, doorbells
                         ignored meanwhile; an RJQ_EVENT_ERROR names the
                         refused script and keys) */
    /* How often the client visits the queue: it sweeps expired leases (one
     * sweeper per queue at a time) and looks for jobs waiting that no
     * doorbell or push announced (idle workers then claim). One timer per
     * client visits its queues in turn, at most one visit per this period
     * (the shortest its workers ask for), so with many queues each is
     * visited less often and the idle cost of a process stays a few
     * commands per second. Default 1000. */
    long reclaim_ms;
    /* Told when a running job of this worker must stop (optional; gets the
     * handler's data): reason RJQ_EJOBCANCELED (rjq_queue_cancel() from
     * any process) or RJQ_ETIMEDOUT (its timeout_ms is over: the job is
     * failed under its retry policy; see rjq_job_options.timeout_ms for
     * when it comes). Called at most once per job, only while the handler
     * still holds it (before rjq_job_complete()/rjq_job_fail()), from the
     * event loop. The job stays the handler's: it stops its work and still
     * completes or fails the job, which is then refused: with
     * RJQ_EJOBCANCELED after a cancel (the job is not retried), with
     * RJQ_ELEASELOST after a timeout (the timeout's failure stands: the
     * job is retried or dead under its retry policy, whatever the
     * completion or failure said). A cancelled job's slot of the worker is
     * free once the handler has finished it. A timed-out job's slot is
     * freed when the notice comes (before on_notice is called), so the
     * worker claims a replacement at once while the handler still holds
     * the handle (valid until it completes or fails it; its lease is no
     * longer extended); at most `concurrency` such timed-out handles may
     * be held beyond the concurrency: while that many are, a job timing
     * out keeps its slot until one of them is finished. A handler that
     * never listens is refused the same way when it finishes. See also
     * rjq_job_get_notice(). */
    rjq_notice_fn *on_notice;
    /* Hooks around each attempt this worker runs (optional; both get the
     * handler's data), enough to emit an OpenTelemetry span or a log line
     * per attempt without patching rjq (examples/traces.c):
     * on_job_start is called just before the handler gets the job (the
     * job's id, attempt and headers readable; wait_ms: ms from its
     * enqueue to this first start by the server's clock, -1 for a later
     * attempt or when not known); on_job_finish when the handler calls
     * rjq_job_complete() (failed 0; 1 when its result cannot be stored
     * and the attempt fails instead) or rjq_job_fail() (failed 1) on that
     * job, whatever the call then returns (also after the client was
     * freed), from inside the call and before the handle is released
     * (readable; the hook must not complete or fail it, nor free the
     * client), with run_ms the
     * client's ms from the job's hand-out to that call. Each is called
     * exactly once per attempt handed to the handler, the start before
     * the finish. Jobs handed back without running (stale, a stopping
     * worker) get neither. */
    void (*on_job_start)(rjq_job *job, long long wait_ms, void *data);
    void (*on_job_finish)(rjq_job *job, int failed, long long run_ms, void *data);
} rjq_worker_options;
#define RJQ_WORKER_OPTIONS_INIT RJQ_SIZED_INIT_(rjq_worker_options)

/*
 * Start a worker on queue q. It claims up to its free capacity in one script
 * call. When a claim comes back short it registers the free slots with the
 * queue, and enqueues hand new jobs to it directly over the subscriber
 * connection (push delivery: already claimed and leased, no claim round
 * trip; a payload over 16 KiB, or past 256 KiB of payloads in one enqueue
 * call, is not pushed: the worker gets the job's id and reads its payload
 * with a plain HMGET, so a push never nears Redis' pubsub output buffer
 * limit); it never runs more than `concurrency` jobs, and a job pushed to it
 * without room goes back to the queue with its attempt not counted. It also
 * wakes on the queue's doorbell (jobs made ready by retries, replays,
 * reclaims), sets a timer for the next delayed job, and the client visits
 * the queue (reclaim_ms). A claim whose reply was lost (a dropped
 * connection) is sent again and returns the jobs it claimed, with their
 * attempt; after its push channel was resubscribed the worker's next claim
 * (its recovering claim) returns the jobs pushed to it meanwhile, and
 * those of its jobs whose completion or failure Redis refused (see
 * rjq_job_complete): no attempt is spent by a lost reply or message. While the client has workers it renews a liveness
 * entry (liveness_ms), and its upkeep returns the jobs of clients whose
 * entry ran out. A job whose lease has already ended (by the server's clock, as
 * the client knows it from its replies) when the worker gets to start it
 * (the process was paused longer than the lease) is not started but handed
 * back: it was or will be reclaimed. *out is owned by the client until
 * rjq_worker_stop() completes (or rjq_client_close() stops it).
 */
RJQ_API int rjq_worker_start(rjq_queue *q, const rjq_worker_options *opts,
                             rjq_handler_fn *handler, void *data,
                             rjq_worker **out);

/*
 * One worker serving several queues of the same client (as Sidekiq's and
 * asynq's workers do), on the client's two connections, with push
 * delivery and doorbells from each queue. `concurrency` (opts, as for
 * rjq_worker_start, whose other options and promises apply to each queue:
 * leases and their extension, reclaim, notices, pause, stale jobs handed
 * back) bounds the jobs running at once across all the queues; the
 * handler (and on_notice) serves them all, rjq_job_get_queue() tells a job's
 * queue. The order in which free slots go to the queues:
 *
 * RJQ_WORKER_STRICT: in the order of queues[] (weights ignored, may be
 * NULL). A queue is claimed from only for slots that every earlier queue
 * could not fill: its last claim came back short and nothing it has heard
 * of since (a doorbell, a push it had no room for, a delayed job coming
 * due) is waiting. So when a slot frees, a job of an earlier queue that
 * the worker knows of starts before any job of a later queue. What is
 * not guaranteed: a claim of a later queue already in flight when the
 * earlier queue's job arrives still starts its jobs (at most the slots
 * that were free when it was sent, up to one claim's size), and a job
 * whose push or doorbell is still on the way when the slot frees is not
 * known yet. A job pushed to the worker while all its slots are taken
 * goes back to its queue (attempt not counted) and makes that queue claim
 * first at the next free slot. A later queue waits while an earlier one
 * has a backlog (or its claims fail: they are retried after poll_ms).
 *
 * RJQ_WORKER_WEIGHTED: the free slots go to the queues that may have
 * jobs ready, by smooth weighted round robin over weights[] (n of them,
 * each 1..RJQ_WORKER_WEIGHT_MAX) counted in slots: while every queue has
 * a backlog, jobs start in proportion to the weights; a queue without
 * jobs ready leaves its share to the others. The worker has as many
 * claims in flight as a worker of one queue (at most two, each for up to
 * a worker of one queue's share of the slots), whatever n, so a claim
 * carries as many jobs.
 *
 * queues: 1..RJQ_WORKER_QUEUES_MAX distinct queues of one client. *out is
 * the worker's one handle: rjq_worker_stop() stops every queue's claims
 * (cb once, when the jobs of all of them are finished),
 * rjq_worker_count_running() counts the jobs of all of them, rjq_job_get_worker()
 * returns it for each of their jobs. Returns RJQ_OK, RJQ_EINVAL (a NULL
 * or repeated queue, queues of different clients, n or a weight out of
 * range, no weights in weighted order, options as rjq_worker_start),
 * RJQ_ESHARDED (a handle known to be of a sharded queue; one still reading
 * its layout: see rjq_queue_open), RJQ_ENOMEM (nothing started) or
 * RJQ_ECLOSED.
 */
#define RJQ_WORKER_QUEUES_MAX 16
#define RJQ_WORKER_WEIGHT_MAX 1000
typedef enum rjq_worker_order {
    RJQ_WORKER_STRICT = 0,
    RJQ_WORKER_WEIGHTED = 1
} rjq_worker_order;

RJQ_API int rjq_worker_start_queues(rjq_queue *const *queues, size_t n,
                                    rjq_worker_order order, const int *weights,
                                    const rjq_worker_options *opts,
                                    rjq_handler_fn *handler, void *data,
                                    rjq_worker **out);

typedef void rjq_stopped_cb(rjq_worker *w, int status, void *data);

/*
 * Stop claiming and withdraw the worker's registered slots; cb (may be NULL)
 * is called once when every job the worker handed out has been completed or
 * failed (RJQ_OK; timed-out handles whose slot was freed too), or with
 * RJQ_ECANCELED if the client is freed first. The
 * worker is freed after cb returns. Jobs that an in-flight claim or a push
 * still brings go back to the queue unstarted, their attempt not counted
 * (jobs of a batch a handler of which called this are still handed out).
 * Returns RJQ_EBUSY if a stop is already under way.
 */
RJQ_API int rjq_worker_stop(rjq_worker *w, rjq_stopped_cb *cb, void *data);

/* Number of jobs this worker has handed out and not yet seen finished
 * (timed-out ones whose slot was freed included: it may exceed the
 * concurrency, by at most the concurrency). */
RJQ_API int rjq_worker_count_running(const rjq_worker *w);

/* Job accessors: valid until rjq_job_complete()/rjq_job_fail() is called. */
RJQ_API const char *rjq_job_get_id(const rjq_job *job);
RJQ_API const void *rjq_job_get_payload(const rjq_job *job, size_t *len);
RJQ_API int rjq_job_get_attempt(const rjq_job *job);      /* 1 on the first run */
RJQ_API int rjq_job_get_max_attempts(const rjq_job *job);
/* The fencing token of this claim of the job: new for every claim call,
 * so a job claimed again gets another one; jobs claimed by the same call
 * (or pushed in one message) share it. Together with the job's id it
 * identifies the claim. */
RJQ_API const char *rjq_job_get_token(const rjq_job *job);
RJQ_API rjq_worker *rjq_job_get_worker(const rjq_job *job); /* NULL if detached */
/* The queue the job was claimed from (a worker of several queues serves
 * many); NULL if detached. */
RJQ_API rjq_queue *rjq_job_get_queue(const rjq_job *job);
/* 0 while the job may run on, else why it must stop (the reason the
 * worker's on_notice got: RJQ_EJOBCANCELED or RJQ_ETIMEDOUT), for
 * handlers that look rather than listen. */
RJQ_API int rjq_job_get_notice(const rjq_job *job);

/* The value of the job's header key (rjq_job_options.headers), NUL-
 * terminated, valid while the handler holds the job; NULL when it has no
 * such header (or key is NULL). */
RJQ_API const char *rjq_job_get_header(const rjq_job *job, const char *key);

/* The job's header i (0..): 1 and *key, *value set (as
 * rjq_job_get_header), or 0 when it has fewer headers. */
RJQ_API int rjq_job_get_header_at(const rjq_job *job, size_t i, const char **key,
                                  const char **value);

/* One dependency of a job as rjq_job_dependencies() reads it. */
typedef struct rjq_dep_outcome {
    const char *queue;  /* the dependency's queue name and id, as given to */
    const char *id;     /* rjq_job_options.after */
    const char *state;  /* its state now: "completed", "dead", "cancelled",
                           or "missing" (no such job: it never existed, or
                           its record was deleted since it released this
                           one); another state only for a job that was
                           replayed after it released this one */
    const void *result; /* completed: its result (result_len bytes, may be
                           0); else NULL */
    size_t result_len;
    const char *error;  /* its last failure's text, or NULL */
    const char *counted; /* how this job counted it when it finished:
                            "completed", "dead", "cancelled", "missing",
                            "ignored" (dropped by RJQ_AFTER_IGNORE), or
                            "pending" (not counted: the job was not
                            released by its dependencies, e.g. replayed) */
    const char *policy;  /* the job's after_policy, the same in every element:
                            "fail", "run" or "ignore" (a field added at the
                            end: read the elements with rjq_dep_outcome_get) */
} rjq_dep_outcome;

/* Element i of the list an rjq_dependencies_cb gets (never list[i] for
 * i > 0). */
RJQ_API const rjq_dep_outcome *rjq_dep_outcome_get(const rjq_dep_outcome *list, size_t i);

/* deps: the job's dependencies in the order of its `after` (n of them; 0
 * and NULL for a job enqueued without after), valid during the call;
 * NULL unless status is RJQ_OK. */
typedef void rjq_dependencies_cb(rjq_client *c, int status, const rjq_dep_outcome *deps,
                                 size_t n, void *data);

/*
 * Read the outcomes of the job's dependencies (README "Dependencies and
 * batches"), for a handler whose job was enqueued with `after`: a read of
 * the job's list on its own queue, then one call per dependency queue,
 * all sent together (a round trip per master). The job may be finished
 * before cb runs (the call keeps what it needs); cb is called once,
 * also with RJQ_ECANCELED when the client is freed first. A dependency's
 * record stays at least until it released this job (retention then may
 * delete it: state "missing", counted still says how it ended).
 * Returns RJQ_OK, RJQ_EINVAL (job or cb NULL, or a job detached from its
 * worker), RJQ_ECLOSED (the client is closing) or RJQ_ENOMEM (a sharded
 * queue's job is read on its shard: its handle's). cb's status:
 * RJQ_OK, RJQ_EPROTO (a reply rjq cannot read), RJQ_ENOMEM, RJQ_ECANCELED,
 * or a request's error (RJQ_ECONN, RJQ_ETIMEDOUT, RJQ_EAUTH, ...).
 */
RJQ_API int rjq_job_dependencies(rjq_job *job, rjq_dependencies_cb *cb, void *data);

/* The same for job `id` of q, from any process (an operator's view: rjq
 * serve's job page); on a sharded queue's handle, read on the id's shard
 * (as rjq_queue_get_job). Returns as rjq_job_dependencies, RJQ_EINVAL for
 * q or cb NULL, RJQ_EJOBID for an invalid id, RJQ_ESHARDED for a
 * server-assigned id on a sharded queue. */
RJQ_API int rjq_queue_get_dependencies(rjq_queue *q, const char *id, rjq_dependencies_cb *cb,
                                       void *data);

/* list: the jobs (their queue names and ids) that wait for the job and
 * that it has not released yet, in the order they registered, at most
 * 1000; valid during the call. NULL and 0 when none, or unless status is
 * RJQ_OK. A batch the job is a member of and has not told yet ("Batches")
 * is one too: its queue is "{b}" then the batch queue's name (no queue
 * name has a brace), its id the batch's. */
typedef void rjq_dependents_cb(rjq_client *c, int status, const rjq_dep *list, size_t n,
                               void *data);

/* Read the dependents of job `id` of q not released yet: a dependent is
 * recorded with its dependency until the dependency finished and released
 * it (then the dependent's own list, rjq_queue_get_dependencies, says how
 * it counted). One script call (a sharded queue's: on the id's shard).
 * Returns RJQ_OK, RJQ_EINVAL (q or cb NULL), RJQ_EJOBID (an invalid id),
 * RJQ_ESHARDED (a server-assigned id on a sharded queue), RJQ_ECLOSED or
 * RJQ_ENOMEM; cb's
 * status: RJQ_OK, RJQ_EPROTO, RJQ_ENOMEM, RJQ_ECANCELED or a request's
 * error. */
RJQ_API int rjq_queue_get_dependents(rjq_queue *q, const char *id, rjq_dependents_cb *cb,
                                     void *data);

/* deps and n as an rjq_dependencies_cb gets them, dependents and nd as an
 * rjq_dependents_cb gets its list and n; all valid during the call; NULL
 * and 0 unless status is RJQ_OK. */
typedef void rjq_job_deps_cb(rjq_client *c, int status, const rjq_dep_outcome *deps, size_t n,
                             const rjq_dep *dependents, size_t nd, void *data);

/* Both reads of job `id` of q (an operator's view, as `rjq job` prints
 * it): its dependencies (rjq_queue_get_dependencies) and its dependents
 * not released yet (rjq_queue_get_dependents). One script call on the
 * job's queue reads its list and its dependents; a job with dependencies
 * then reads their outcomes, a call per dependency queue sent together (a
 * round trip per master); a job without any costs that one call. On a
 * sharded queue's handle, read on the id's shard. cb is called once (also
 * with RJQ_ECANCELED when the client is freed first). Returns RJQ_OK,
 * RJQ_EINVAL (q or cb NULL), RJQ_EJOBID (an invalid id), RJQ_ESHARDED (a
 * server-assigned id on a sharded queue), RJQ_ECLOSED or RJQ_ENOMEM; cb's
 * status: RJQ_OK, RJQ_EPROTO, RJQ_ENOMEM, RJQ_ECANCELED or a request's
 * error (RJQ_ECONN, RJQ_ETIMEDOUT, RJQ_EAUTH, ...). */
RJQ_API int rjq_queue_get_job_deps(rjq_queue *q, const char *id, rjq_job_deps_cb *cb,
                                   void *data);

typedef void rjq_done_cb(rjq_client *c, int status, void *data);

/*
 * Finish the job successfully with result bytes (may be empty).
 *
 * Ownership: given a job handle, this call always releases it (do not
 * touch the handle after the call, whatever it returns), and every error
 * found before anything is sent comes through cb like the outcome does:
 * cb (may be NULL) is called exactly once, never from inside this call.
 * Returns RJQ_OK (cb will be called), or, without calling cb:
 * RJQ_EINVAL when job is NULL (nothing to release); RJQ_ECLOSED when the
 * client is freed or being freed (the handle outlived its worker: the
 * client closed and handed the job back, or a free is pending; or a
 * callback this call ran freed it): the handle is released, nothing is
 * sent, the job comes back after its lease (or was handed back already).
 * A freed client has no loop left to call cb from, so that one error
 * stays a return value, as with every call on a closing client.
 *
 * cb gets exactly one of:
 * - RJQ_OK: done; RJQ_EREPLICAS: done, but fewer replicas than
 *   wait_replicas confirmed it (see rjq_client_options);
 * - RJQ_ETOOBIG when the result is over max_payload, RJQ_EINVAL when it
 *   is NULL with len > 0: nothing is stored as the result; the attempt is
 *   failed instead, as rjq_job_fail(job, text, RJQ_FAIL_RETRY, -1) would
 *   (the job runs again after its backoff while attempts remain, else it
 *   is dead), its error text naming the cause ("rjq_job_complete: result
 *   of N bytes exceeds max_payload M"); cb gets the cause once that
 *   failure's request ended, whatever it ended with (a lost lease, say);
 * - RJQ_ELEASELOST when the job's lease was lost (reclaimed, or finished
 *   by another worker) or its run time is over (rjq_job_options.timeout_ms,
 *   by the server's clock when the completion runs, whether or not a sweep
 *   failed the job yet): nothing is changed then. A lease that merely ran
 *   out (a job without a timeout, its worker paused longer than lease_ms)
 *   with no sweep or other worker having taken the job since is still
 *   accepted: the fencing token shows that nobody else ran it;
 *   RJQ_EJOBCANCELED when the job was cancelled meanwhile (nothing changed;
 *   it is not retried);
 * - refused by Redis, nothing changed, rjq_client_get_errmsg() has the
 *   server's message: RJQ_EWRONGTYPE when a key of the queue holds
 *   another type, or a counter of its stats hash is not an integer (the
 *   message names the key and the field); RJQ_EOOM when Redis is out of
 *   memory (maxmemory); RJQ_EAUTH when the Redis user may not run the
 *   script; RJQ_EREDIS for any other error, or a transient one that lasted
 *   past the retries below; RJQ_EPROTO for a reply of an unexpected shape.
 *   The job stays active under its token, its lease no longer extended,
 *   and comes back after its lease (the reclaim sweep takes it back, as
 *   any job whose lease ran out: rjq_stats.reclaimed), or sooner: the
 *   worker's next recovering claim (the claim that follows a new
 *   subscription of its push channel, e.g. after the subscriber
 *   connection reconnected: see rjq_worker_start) takes it back and hands
 *   it to the handler again at once, under a new token and lease, its
 *   attempt not spent (rjq_job_get_attempt() is the same), as it does for a
 *   job pushed to the worker unheard;
 * - RJQ_ENOMEM when the completion (or the failure standing in for it)
 *   could not be queued or sent: nothing changed, the job comes back after
 *   its lease (its lease is no longer extended); RJQ_ECANCELED (or
 *   RJQ_ECLOSED) when the client was freed first (the job comes back after
 *   its lease).
 * A completion interrupted by a disconnect is retried on reconnect, and one
 * answered with a transient error (LOADING, BUSY, READONLY, MASTERDOWN,
 * TRYAGAIN) is retried with backoff (50 ms doubling to 1 s) for up to a
 * minute (the token makes it idempotent), so RJQ_ECONN and RJQ_ETIMEDOUT
 * are not reported here.
 */
RJQ_API int rjq_job_complete(rjq_job *job, const void *result, size_t len,
                             rjq_done_cb *cb, void *data);

#define RJQ_FAIL_RETRY 0 /* retry after backoff while attempts remain */
#define RJQ_FAIL_FATAL 1 /* go dead now, whatever attempts remain */

/*
 * Fail the job with an error text. With RJQ_FAIL_RETRY it runs again after
 * retry_delay_ms, or after the job's backoff when retry_delay_ms < 0, until
 * max_attempts is reached; then (or with RJQ_FAIL_FATAL) it goes dead and
 * can be replayed. Ownership, return values (RJQ_OK, RJQ_EINVAL for a NULL
 * job, RJQ_ECLOSED) and cb's codes as rjq_job_complete() (RJQ_EWRONGTYPE
 * also for a stats counter it counts that is not an integer), and:
 * - RJQ_EINVAL (through cb) for flags other than RJQ_FAIL_FATAL or a
 *   retry_delay_ms over RJQ_DELAY_MAX: the job is failed all the same,
 *   with its error text, under its retry policy (as RJQ_FAIL_RETRY with
 *   retry_delay_ms -1: never dead before its attempts are spent); cb gets
 *   RJQ_EINVAL once that failure's request ended;
 * - a failure past the job's run time is refused (RJQ_ELEASELOST) and
 *   changes nothing; the sweep fails the job as timed out instead (its
 *   retry policy applies, not RJQ_FAIL_FATAL or retry_delay_ms).
 */
RJQ_API int rjq_job_fail(rjq_job *job, const char *error, int flags,
                         long long retry_delay_ms, rjq_done_cb *cb, void *data);

/* ------------------------------------------------------------------------
 * Awaiting results
 *
 * A producer can wait for a job's outcome. Each client has its own reply
 * channel on the subscriber connection; the job records it, and the
 * scripts that finish the job publish the outcome to it in the same atomic
 * step. An await can never miss its job's completion: a job that finished
 * before the await was registered is answered from its stored state, and
 * after the subscriber connection reconnects the state of every pending
 * await is read again. Pending awaits cost a few hundred bytes each.
 * ---------------------------------------------------------------------- */

typedef struct rjq_await rjq_await;

/* The outcome handed to an await callback (valid during the callback). */
typedef struct rjq_outcome {
    const char *id;      /* the job's id */
    const void *result;  /* RJQ_OK: the result bytes (may be empty) */
    size_t result_len;
    const char *error;   /* RJQ_EJOBDEAD: the last error text */
    /* The job's headers (rjq_job_options.headers; read them with
     * rjq_outcome_get_header, rjq_outcome_get_header_at, which a program
     * built against an older header can call too): for
     * rjq_enqueue_await, the ones it was enqueued with (kept by the
     * client, no Redis work); for rjq_queue_await, and for an
     * rjq_enqueue_await whose id named a job that existed, the job's own,
     * read by the script that registers the await (one HMGET per call,
     * none per job). NULL and 0 when it has none (or the client ran out
     * of memory reading them). */
    const rjq_header *headers;
    size_t nheaders;
} rjq_outcome;

/* The value of header key of the awaited job (rjq_outcome.headers),
 * NUL-terminated, valid during the await's callback; NULL when it has no
 * such header (or o or key is NULL). */
RJQ_API const char *rjq_outcome_get_header(const rjq_outcome *o, const char *key);

/* The awaited job's header i (0..): 1 and *key, *value set (as
 * rjq_outcome_get_header), or 0 when it has fewer headers (or o is NULL). */
RJQ_API int rjq_outcome_get_header_at(const rjq_outcome *o, size_t i, const char **key,
                                      const char **value);

/*
 * status: RJQ_OK (completed; result set), RJQ_EJOBDEAD (dead; error set),
 * RJQ_EJOBCANCELED (rjq_queue_cancel() ended the job), RJQ_ETIMEDOUT, RJQ_ECANCELED (rjq_await_cancel() or client freed),
 * RJQ_ENOTFOUND (rjq_queue_await() of an id that does not exist),
 * RJQ_EAUTH (the server refused the client's reply channel: no +subscribe
 * or no "<prefix>:reply:*" in the ACL, or a wrong password; every await
 * of the client ends so, the errmsg has the server's words), or an
 * enqueue error for rjq_enqueue_await() (then outcome is NULL: no id).
 * outcome is non-NULL whenever the job id is known.
 */
typedef void rjq_await_cb(rjq_client *c, int status, const rjq_outcome *outcome,
                          void *data);

/* Progress reported by the job's handler (rjq_job_report_progress), in
 * the order reported. Progress reported before the job's outcome is
 * delivered before the await's callback runs, also when it arrives
 * before the enqueue's reply (kept with the outcome, like an early
 * outcome: up to 1024 such messages of the client's awaits in flight;
 * past that the oldest go, and the outcome is read from the job's
 * state). Not delivered: progress reported after the outcome, or
 * published while the client's subscription was down (a reconnect, a
 * slot that moved): the outcome is then read from the job's state, the
 * progress is gone. */
typedef void rjq_progress_cb(rjq_client *c, const char *id, const void *progress,
                             size_t len, void *data);

typedef struct rjq_await_options {
    size_t size;                  /* RJQ_AWAIT_OPTIONS_INIT sets it */
    long long timeout_ms;         /* 0: no timeout. For rjq_enqueue_await, an
                                     await whose enqueue has no reply yet
                                     waits for it up to command_timeout_ms
                                     more (10 s when that is off):
                                     RJQ_ETIMEDOUT then carries the id
                                     (an enqueue held for the subscription
                                     is sent when it runs out), or the
                                     enqueue's own error comes instead. An
                                     enqueue with an id whose reply has not
                                     come by then (Redis away: it is re-sent
                                     after the reconnect) ends the await
                                     with RJQ_ETIMEDOUT and the id; the job
                                     may or may not be enqueued */
    rjq_progress_cb *on_progress; /* optional; gets the await's data */
} rjq_await_options;
#define RJQ_AWAIT_OPTIONS_INIT RJQ_SIZED_INIT_(rjq_await_options)

/*
 * Enqueue one job and await its outcome: cb is called exactly once. The
 * enqueue is sent once the client's reply channel is subscribed; if the
 * server refuses the channel (RJQ_EAUTH) it is not sent at all (one
 * already sent stays: its job runs, unawaited). The next await subscribes
 * the channel again (one refusal costs one reconnect of the subscriber
 * connection, at its backoff). out
 * (optional) receives a handle for rjq_await_cancel(), valid until cb runs.
 * Synchronous errors as rjq_enqueue().
 */
RJQ_API int rjq_enqueue_await(rjq_queue *q, const void *payload, size_t len,
                              const rjq_job_options *opts,
                              const rjq_await_options *aw, rjq_await_cb *cb,
                              void *data, rjq_await **out);

/*
 * Await a job enqueued by anyone, by id. Once the reply channel is
 * subscribed, one script adds this client to the job's watchers or, when
 * it already finished, answers from its stored state: the awaits made in
 * one loop pass share that script call (one per queue and 1000 awaits),
 * sent at the end of the pass. Unknown (or expired) ids end with
 * RJQ_ENOTFOUND.
 */
RJQ_API int rjq_queue_await(rjq_queue *q, const char *id, const rjq_await_options *aw,
                      rjq_await_cb *cb, void *data, rjq_await **out);

/* End an await now: its callback runs before this returns, with
 * RJQ_ECANCELED. The job itself is not affected (an enqueue still held
 * for the subscription is sent all the same). */
RJQ_API int rjq_await_cancel(rjq_await *a);

/* Number of awaits pending on this client. */
RJQ_API size_t rjq_client_count_awaits(const rjq_client *c);

/*
 * Report progress bytes for a running job to everyone awaiting it (a
 * no-op on the server when nobody is). Fire-and-forget, no callback: the
 * handle stays the caller's whatever this returns (it never releases it;
 * complete or fail it as usual). Returns RJQ_OK (sent, or queued to be),
 * RJQ_EINVAL (job NULL, or progress NULL with len > 0), RJQ_ECLOSED (the
 * handle outlived its worker), RJQ_ETOOBIG (over max_payload), RJQ_ENOMEM,
 * or an error of sending (RJQ_ECLOSED while the client is being freed).
 */
RJQ_API int rjq_job_report_progress(rjq_job *job, const void *progress, size_t len);

/* ------------------------------------------------------------------------
 * Monitoring
 * ---------------------------------------------------------------------- */

typedef struct rjq_monitor rjq_monitor;

/* One queue event: event is "enqueued", "active", "completed", "failed",
 * "retried", "dead", "reclaimed", "released" (pushed to a worker that had
 * no room for it: back to ready) or "cancelled"; id is the job's. For
 * "paused" and "resumed" (the queue's) id is "". Valid during the call. */
typedef void rjq_monitor_cb(rjq_client *c, const char *event, const char *id, void *data);

/*
 * Stream the queue's events to cb until rjq_monitor_stop() or the client is
 * freed. Events travel by pub/sub (at most once) and are published only
 * while some monitor is attached (it refreshes a flag key with a TTL), so
 * an unwatched queue pays nothing measurable for this feature.
 */
RJQ_API int rjq_queue_monitor(rjq_queue *q, rjq_monitor_cb *cb, void *data,
                              rjq_monitor **out);

/* Detach a monitor (cb is not called again); the handle is freed. */
RJQ_API int rjq_monitor_stop(rjq_monitor *m);

/*
 * Ask m's callback for "resync" events too (id ""), for a consumer that
 * must not miss an event (pub/sub drops those published while the
 * subscriber connection is down, and none are published while the
 * monitored flag has lapsed). "resync" comes after every (re)confirmation
 * of m's subscription and after every refresh that found the flag had
 * lapsed, once the flag is set again: the events before it may have been
 * lost, every event after it is delivered until the next "resync" (reads
 * sent from its callback or later see every change whose event was lost).
 * Called once m's subscription is confirmed already, a "resync" follows
 * soon. Returns RJQ_OK, or RJQ_EINVAL (m NULL).
 */
RJQ_API int rjq_monitor_enable_resyncs(rjq_monitor *m);

/* During m's callback: the server time (ms) of the event, the time of the
 * script that made it (for "active", the start that rate limits count);
 * 0 from an rjq before event times. */
RJQ_API long long rjq_monitor_get_time(const rjq_monitor *m);

/* ------------------------------------------------------------------------
 * Administration
 * ---------------------------------------------------------------------- */

typedef struct rjq_stats {
    /* counters since the queue was created */
    long long enqueued, completed, failed, retried, dead, reclaimed, replayed;
    /* current depths (ready, delayed: the queue's own jobs and its
     * groups') */
    long long ready, delayed, active, dead_depth;
    long long cancelled;       /* counter: jobs cancelled */
    long long cancelled_depth; /* cancelled jobs kept (see dead_max) */
    int paused;                /* 1 while the queue is paused */
    /* the queue's limits (rjq_queue_set_limits); 0: none */
    long long limit_concurrency, limit_rate, limit_rate_window_ms;
    int exists;                /* 1 when anything of the queue is in Redis (jobs,
                                  counters, settings, batches, group settings,
                                  schedules, dedup reservations, history: a
                                  queue with nothing but batches exists, with
                                  zeros); 0: it was never written to, or was
                                  deleted */
    /* dedup (rjq_job_options.dedup_ms): ids still reserved after their
     * job's record went (retention, the dead cap, a delete), and the
     * earliest server time (ms) one of them is let go (0: none) */
    long long dedup_reserved, dedup_next_release_ms;
    long long waiting;         /* depth: jobs waiting for their dependencies
                                  (rjq_job_options.after) */
} rjq_stats;

typedef void rjq_stats_cb(rjq_client *c, int status, const rjq_stats *stats,
                          void *data);

/* Read the queue's counters and depths in one script call. */
RJQ_API int rjq_queue_get_stats(rjq_queue *q, rjq_stats_cb *cb, void *data);

/* ------------------------------------------------------------------------
 * History (README "History")
 *
 * Each queue keeps per-minute figures for a day and per-hour figures for
 * 30 days in Redis, in its own slot: jobs enqueued, completed and failed
 * (every failed attempt, as rjq_stats.failed), and histograms of the wait
 * (enqueue to first start, delays included) and run times (a start to
 * the worker's complete or fail call). Producers and workers count in
 * memory and add their counts every history_flush_ms (rjq_queue_options);
 * an outcome is counted when the worker sends it. What a process had not
 * flushed yet is lost when it dies or its client is freed (at most one
 * flush interval of counts), and so is a flush whose connection is lost.
 * Counts of every process and shard add up in the same buckets.
 *
 * A histogram has RJQ_HISTORY_BUCKETS buckets on a fixed log scale:
 * bucket i < RJQ_HISTORY_BUCKETS - 1 counts times in (2^(i-1), 2^i] ms
 * (bucket 0: up to 1 ms), the last one the longer times.
 * ---------------------------------------------------------------------- */

#define RJQ_HISTORY_BUCKETS 22
#define RJQ_HISTORY_MINUTES 1440 /* minutes kept */
#define RJQ_HISTORY_HOURS 720    /* hours kept */

typedef struct rjq_history_point {
    long long at_ms;            /* the minute's or hour's start, server time
                                   (ms since the epoch) */
    long long enqueued, completed, failed;
    long long wait_sum_ms, run_sum_ms;
    long long wait[RJQ_HISTORY_BUCKETS]; /* jobs whose wait fell in bucket i */
    long long run[RJQ_HISTORY_BUCKETS];  /* runs whose time fell in bucket i */
} rjq_history_point;

/* Element i of the list an rjq_history_cb gets (never list[i] for i > 0). */
RJQ_API const rjq_history_point *rjq_history_point_get(const rjq_history_point *list, size_t i);

typedef void rjq_history_cb(rjq_client *c, int status, const rjq_history_point *list, size_t n,
                            void *data);

/* Read the last n minutes (step_ms 60000, n 1..RJQ_HISTORY_MINUTES) or
 * hours (step_ms 3600000, n 1..RJQ_HISTORY_HOURS) of q's history, the
 * current (unfinished) one last, in one script call that only reads; or
 * (step_ms 0, n 1) its totals: every count flushed since its history was
 * first written (at_ms 0; they only grow, until the hours expire after 30
 * idle days: counters for Prometheus). cb
 * gets all n points, oldest first (a minute without activity: its at_ms
 * and zeros), valid during the callback, or n 0 and RJQ_ECONN,
 * RJQ_ETIMEDOUT, RJQ_EAUTH, RJQ_EREDIS, RJQ_EWRONGTYPE, RJQ_EPROTO (a value
 * this library cannot read), RJQ_ENOMEM, RJQ_ECANCELED. On a sharded
 * handle the shards' points are added up (cb once, when every shard
 * answered; the first error otherwise). Returns RJQ_OK (cb will be called)
 * or, cb not called: RJQ_EINVAL (q or cb NULL, step_ms or n out of range),
 * RJQ_ECLOSED, RJQ_ENOMEM. */
RJQ_API int rjq_queue_get_history(rjq_queue *q, long step_ms, long n, rjq_history_cb *cb,
                                  void *data);

/* The upper bound of bucket i, seconds (0.001 * 2^i); INFINITY for the
 * last bucket; NAN for i out of range. */
RJQ_API double rjq_history_bound(int i);

/* The q-quantile (0 < q <= 1) of a histogram of RJQ_HISTORY_BUCKETS
 * counts, seconds: linear within the bucket that holds it (as Prometheus'
 * histogram_quantile); the last finite bound when it lies in the last
 * bucket; -1 when the histogram is empty or q out of range. */
RJQ_API double rjq_history_quantile(const long long *buckets, double q);

typedef void rjq_count_cb(rjq_client *c, int status, long long n, void *data);

/*
 * Move dead jobs back to ready with their attempts reset. id NULL replays up
 * to `limit` of the oldest dead jobs (limit <= 0 means 1000); cb gets the
 * number moved. For a single id, cb gets RJQ_ENOTFOUND (no such job) or
 * RJQ_ESTATE (it is not dead). Returns RJQ_ESHARDED for a server-assigned
 * id on a sharded queue (id NULL: every shard, see "Sharded queues").
 */
RJQ_API int rjq_queue_replay(rjq_queue *q, const char *id, long limit,
                             rjq_count_cb *cb, void *data);

/* Run one lease sweep now (workers do this on their own timer); cb gets the
 * number of jobs it took back from their holders (leases expired: back to
 * ready or dead, counted as "reclaimed" in rjq_stats; run times over:
 * failed as timed out, counted as "failed"), or 0 when another sweeper
 * held the guard. The
 * sweep also deletes completed jobs past the queue's retention (up to 1000
 * per call). */
RJQ_API int rjq_queue_reclaim(rjq_queue *q, rjq_count_cb *cb, void *data);

/*
 * Pause the queue: from the reply on, no job starts (no claim takes one,
 * no enqueue pushes one to a worker) until rjq_queue_resume(), from any
 * process. Enqueues are still accepted; running jobs run on; due delayed
 * jobs wait. Stored in Redis (it outlives every client); idle workers wait
 * for the resume at no cost and start at once when it comes. rjq_stats
 * says paused, monitors get "paused" and "resumed". cb gets 1 when the
 * queue's state changed, 0 when it already was so.
 */
RJQ_API int rjq_queue_pause(rjq_queue *q, rjq_count_cb *cb, void *data);
RJQ_API int rjq_queue_resume(rjq_queue *q, rjq_count_cb *cb, void *data);

/*
 * Set the queue's data format (stored in Redis, the queue's meta field
 * "format"; absent means 1). Format 2 keeps the reply channel of an
 * awaited job pushed at once to a worker in the job's state instead of a
 * column of its own: two Redis commands less per awaited job
 * (docs/scripts.md "Queue format 2"). Every build that has this function
 * reads both formats; set 2 only once every process using the queue runs
 * such a build (older builds do not see those jobs' reply channels, and
 * their producers would hear nothing). Producers learn the format with
 * the index declaration (again within RJQ_INDEX_RELEARN_MS); the lean
 * enqueue checks the stored format before it writes format 2, so a
 * producer that learnt 2 writes format 1 once the queue is set back.
 * Going back to 1 is refused while the queue has active jobs (only their
 * states can hold a reply channel): cb gets RJQ_ESTATE, nothing changed;
 * stop or drain the workers first. format: 1 or 2, else RJQ_EINVAL
 * (returned). cb (may be NULL) gets 1 when the format changed, 0 when it
 * already was so; a sharded queue's shards each (1 when any changed, the
 * first error otherwise).
 */
RJQ_API int rjq_queue_set_format(rjq_queue *q, int format, rjq_count_cb *cb, void *data);

/* A queue's limits, enforced on the server by the claim script, for every
 * worker of every process alike. */
typedef struct rjq_limits {
    size_t size;         /* RJQ_LIMITS_INIT sets it */
    long concurrency;    /* at most this many of its jobs active at once; 0: none */
    long rate;           /* at most this many starts ... */
    long rate_window_ms; /* ... in any window of this length (sliding, server
                            time); 0 means 1000. rate 0: none */
} rjq_limits;
#define RJQ_LIMITS_INIT RJQ_SIZED_INIT_(rjq_limits)

/*
 * Set the queue's limits (NULL or all 0: none), stored in Redis: from the
 * reply on, claims start only what they allow. A worker held back by the
 * rate is told by its claim when the next start is allowed and wakes then
 * (no polling). Under the concurrency, free slots go to the workers that
 * wait for them, least recently served first, whichever worker or process
 * freed them: a worker held back waits in line (a hash in the queue's
 * slot), a claim leaves one free slot to each worker ahead of it in line
 * and rings the doorbell for them; a waiter that is gone (its client's
 * push channel has no subscriber) or does not claim within 10 s of being
 * told loses its place, and the claims held back behind it come back
 * then. With 3 workers of 5 slots at a concurrency of 5, the slots go
 * round the three. A limited queue has no push delivery (jobs wait in the queue for claims):
 * limits cost their queue the push's latency, and nothing to others. cb
 * (may be NULL) gets 1. RJQ_EINVAL for negative numbers. A sharded queue's
 * limits are stored whole and split over its shards, the shares re-split
 * by demand (see "Sharded queues" below; RJQ_EINVAL for a concurrency or
 * rate below its shard count).
 */
RJQ_API int rjq_queue_set_limits(rjq_queue *q, const rjq_limits *l, rjq_count_cb *cb,
                                 void *data);

/*
 * Job groups (README "Groups"). A job enqueued with rjq_job_options.group
 * waits in its group; the queue's claims (every worker, unchanged) start
 * the ready jobs of the groups round-robin, up to `weight` jobs of a group
 * per turn, priorities then FIFO within a group, after the queue's jobs
 * without a group, several groups in one claim. Per group, enforced by the
 * claim script across any number of worker processes: a concurrency limit
 * (at most N of its jobs active; a slot is freed when one completes,
 * fails, is reclaimed or is handed back), a rate limit (at most N starts in any window of
 * its length, server time), a bound on its ready jobs (an enqueue past it
 * is refused, RJQ_EFULL) and pause/resume (rjq_queue_limit_group). A
 * group at its limit or paused costs no claim anything: it leaves the
 * round-robin until a slot frees, its rate window turns (a claim that
 * comes back short tells its worker when, as the queue's own rate limit
 * does) or it resumes (then the doorbell rings). A group job enqueued
 * while a worker has free slots registered is pushed to it when its
 * group's limits let the round-robin start one (README "Groups"). The queue's own pause and
 * limits apply to group jobs too, and so does its bound (max_waiting:
 * group jobs waiting count). Retries, reclaimed jobs, jobs handed back
 * unstarted and those the orphan sweep returns go back to their group
 * (their slots freed), and a promoted delayed one becomes ready in it. A queue with no group jobs pays nothing for the feature.
 * On a sharded queue a group lives on one shard (crc16(group) mod N, as a
 * job id): its limits and pause are exact; the calls below route a group's
 * settings to its shard, the defaults of every group to every shard, and
 * merge the listing over the shards. A loop turn's group jobs (rjq_enqueue
 * calls, rjq_enqueue_batch items) go in one script call per queue (per
 * shard), whatever their groups, as plain jobs do; each rjq_enqueue is
 * admitted on its own (a group's bound refuses only the job past it), an
 * rjq_enqueue_batch whole. Not built yet: group jobs in awaits, schedules
 * and dependencies.
 */
#define RJQ_GROUP_NAME_MAX 64

/* Set group's limits (group NULL: the defaults of every group, which a
 * group's own settings override). concurrency: at most this many of its
 * jobs active, 0 none, < 0 the defaults' (for the defaults: none); weight:
 * jobs it may start per turn of the round-robin, <= 0 the defaults'
 * (defaults: 1); its rate and bound unchanged (rjq_queue_limit_group sets
 * all). cb (may be NULL) gets the number of groups looked at again (on a
 * sharded queue: the group's shard's answer; for the defaults the sum over
 * the shards, each written, or the first error). RJQ_EINVAL for a bad
 * group name, RJQ_ECLOSED, RJQ_ENOMEM. */
RJQ_API int rjq_queue_set_group_limits(rjq_queue *q, const char *group, int concurrency, int weight,
                                       rjq_count_cb *cb, void *data);

/* A group's limits, or the defaults of every group (rjq_queue_limit_group).
 * Zero (RJQ_GROUP_LIMITS_INIT) in a field: the defaults' (for the
 * defaults: none, weight 1); RJQ_GROUP_NONE: none, whatever the defaults
 * say (for the defaults: none). */
typedef struct rjq_group_limits {
    size_t size;         /* RJQ_GROUP_LIMITS_INIT sets it */
    long concurrency;    /* at most this many of its jobs active at once */
    long weight;         /* jobs it may start per turn of the round-robin (< 0: 1) */
    long rate;           /* at most this many starts ... */
    long rate_window_ms; /* ... in any window of this length (sliding, server
                            time); 0 means 1000 */
    long max_waiting;    /* at most this many ready jobs (its own delay or a
                            retry's backoff not counted): an enqueue that would
                            pass it is refused, RJQ_EFULL, nothing written */
} rjq_group_limits;
#define RJQ_GROUP_LIMITS_INIT RJQ_SIZED_INIT_(rjq_group_limits)
#define RJQ_GROUP_NONE (-1L)

/* Set group's limits (group NULL: the defaults of every group, which a
 * group's own settings override), all of them (a field at zero follows
 * the defaults; its pause is kept). From the reply on, claims start only
 * what they allow; an enqueue, only what max_waiting does. cb (may be
 * NULL) gets the number of groups looked at again (on a sharded queue:
 * the group's shard's answer; for the defaults the sum over the shards,
 * each written, or the first error). RJQ_EINVAL for a bad group name, l
 * NULL, a bad size, a number above INT_MAX or below zero (other than
 * RJQ_GROUP_NONE; a window: none below zero), RJQ_ECLOSED, RJQ_ENOMEM. */
RJQ_API int rjq_queue_limit_group(rjq_queue *q, const char *group, const rjq_group_limits *l,
                                  rjq_count_cb *cb, void *data);

/* Pause (paused 1) or resume (0) one group: a paused group starts nothing
 * (its jobs wait; running ones finish). cb (may be NULL) gets 1. Codes as
 * rjq_queue_set_group_limits (group must not be NULL). */
RJQ_API int rjq_queue_pause_group(rjq_queue *q, const char *group, int paused, rjq_count_cb *cb,
                                  void *data);

/* One group as rjq_queue_list_groups gives it (strings valid during the
 * callback). */
typedef struct rjq_group_info {
    const char *name;
    long long depth;    /* ready jobs waiting in it */
    long long active;   /* its jobs running */
    int concurrency;    /* its limit in effect; -1 none */
    int weight;         /* its jobs per turn in effect */
    int paused;
    int reserved;
    long rate;           /* its rate limit in effect: starts ... (0: none) */
    long rate_window_ms; /* ... per this many ms (0: none) */
    long max_waiting;    /* its bound on ready jobs in effect (0: none) */
    long long started;   /* the jobs it started since it was last listed
                            (by claims and pushes: a counter, set back to 0
                            when the group leaves the listing, with nothing
                            ready or running; a reader of two listings takes
                            a decrease as a restart from 0). Starts by
                            clients older than this field are not counted
                            (README "Groups"). Its starts/s: two readings'
                            difference over their interval (`rjq top`) */
} rjq_group_info;

/* Element i of the list an rjq_groups_cb gets: fields may be added at the
 * end (as `started` was); index with rjq_group_info_get, never list[i] for
 * i > 0. NULL for a NULL list. */
RJQ_API const rjq_group_info *rjq_group_info_get(const rjq_group_info *list, size_t i);

/* total: the groups with ready or active jobs (one group asked for: 1,
 * or 0 when it has none); list: up to the count asked, deepest first. */
typedef void rjq_groups_cb(rjq_client *c, int status, long long total, const rjq_group_info *list,
                           size_t n, void *data);

/* The queue's groups by depth (ready jobs, most first), from offset, at
 * most count (1..1000) of them; group non-NULL: that one group only
 * (listed with zeros when it has nothing). On a sharded queue every
 * shard's first offset + count groups, merged by depth (each group is on
 * one shard: listed once; total: the sum). RJQ_EINVAL (bad range, offset
 * + count above 1000 on a sharded queue, bad name, cb NULL), RJQ_ECLOSED,
 * RJQ_ENOMEM; the callback gets
 * RJQ_EPROTO for a reply that is not the script's. It only reads (the
 * monitor role of `rjq acl` runs it). */
RJQ_API int rjq_queue_list_groups(rjq_queue *q, const char *group, long offset, long count,
                                  rjq_groups_cb *cb, void *data);

/* state: for RJQ_OK the state the job left ("ready", "delayed",
 * "active"), for RJQ_ESTATE the final one it already had ("completed",
 * "dead", "cancelled"); else NULL. Valid during the call. */
typedef void rjq_cancel_cb(rjq_client *c, int status, const char *state, void *data);

/*
 * Cancel a job by id, from any process: it ends in the final state
 * "cancelled" and is not retried. A waiting or delayed job is taken off
 * the queue. A running job's worker is told at once on its subscriber
 * connection (or, if it missed that, by its next lease extension): its
 * on_notice gets RJQ_EJOBCANCELED, and its completion or failure is
 * refused with that code. Awaits of the job end with RJQ_EJOBCANCELED.
 * Cancelled jobs are kept as dead ones are (dead_max, oldest deleted).
 * cb gets RJQ_OK, RJQ_ENOTFOUND (no such job) or RJQ_ESTATE (it had
 * already finished). Returns RJQ_EJOBID for an invalid id, RJQ_ESHARDED
 * for a server-assigned id on a sharded queue ("Sharded queues" below).
 */
RJQ_API int rjq_queue_cancel(rjq_queue *q, const char *id, rjq_cancel_cb *cb, void *data);

/* A job's stored state, as read by rjq_queue_get_job(). */
typedef struct rjq_job_info {
    const char *id;
    const char *state; /* "ready", "delayed", "active", "completed", "dead",
                          "cancelled" */
    int attempts, max_attempts;
    const void *payload;
    size_t payload_len;
    const void *result; /* NULL unless completed */
    size_t result_len;
    const char *error;  /* last failure text, or NULL */
    const char *token;  /* the fencing token of the attempt that holds the
                           job (active) or ran its last attempt (completed,
                           dead, cancelled), NULL otherwise (waiting, or
                           finished without running). It starts with the id
                           of the client whose worker ran that attempt and a
                           '.': rjq_client_list_processes() maps that id to the
                           process' host and pid while it is alive */
    /* The job's times, by the Redis server's clock (ms since the epoch), 0
     * when unknown (a job enqueued before rjq kept them):
     * enqueued_ms <= started_ms <= ended_ms where set. */
    long long enqueued_ms; /* when it was enqueued (a scheduled job: made) */
    long long started_ms;  /* when its last attempt started; 0 before the
                              first (or first since a replay) */
    long long ended_ms;    /* when it completed, died or was cancelled; 0
                              while it has not finished */
    /* Its attempts that ended by a failure or a lost lease, oldest first
     * (the newest RJQ_ATTEMPTS_KEPT; kept while the job's record is, also
     * across a replay): the attempt running now, or the one that completed,
     * is the job's own started_ms, ended_ms, token and state. Recorded only
     * when an attempt fails or is lost: a completion costs nothing more.
     * NULL and 0 when none. Element i: rjq_attempt_get(history, i). */
    const struct rjq_attempt *history;
    size_t history_len;
    /* Its headers (rjq_job_options.headers), in the order given; NULL and
     * 0 when none. Element i: rjq_header_get(headers, i). */
    const rjq_header *headers;
    size_t nheaders;
} rjq_job_info;

#define RJQ_ATTEMPTS_KEPT 20

/* One ended attempt of a job (rjq_job_info.history). */
typedef struct rjq_attempt {
    long long started_ms; /* server ms; 0 when unknown */
    long long ended_ms;   /* when its failure or loss was recorded */
    const char *outcome;  /* "failed" (rjq_job_fail), "timeout" (its run time
                             was over) or "lost" (its lease expired, or its
                             worker's client was found gone) */
    const char *token;    /* its fencing token (client id '.' ...), NULL when
                             unknown */
} rjq_attempt;

/* Element i of rjq_job_info.history: fields may be added at the end; index
 * with rjq_attempt_get, never history[i] for i > 0. NULL for a NULL list. */
RJQ_API const rjq_attempt *rjq_attempt_get(const rjq_attempt *list, size_t i);

typedef void rjq_job_info_cb(rjq_client *c, int status, const rjq_job_info *info,
                             void *data);

/* Read one job (RJQ_ENOTFOUND when it does not exist or has expired).
 * Returns RJQ_ESHARDED for a server-assigned id on a sharded queue. */
RJQ_API int rjq_queue_get_job(rjq_queue *q, const char *id, rjq_job_info_cb *cb,
                          void *data);

/* List up to `limit` ids of the dead set, oldest first, starting at offset.
 * cb's ids array and strings are valid only during the callback. */
typedef void rjq_ids_cb(rjq_client *c, int status, const char *const *ids,
                        size_t n, void *data);
RJQ_API int rjq_queue_list_dead(rjq_queue *q, long offset, long limit, rjq_ids_cb *cb,
                                void *data);

/* The names of the client's prefix's queues, in name order: up to `limit`
 * (1..RJQ_JOBS_PAGE_MAX) after `after` (NULL: from the first), from the
 * registry "<prefix>:queues" (one read, no keyspace scan). A queue is
 * named there once a handle enqueued to it, ran a worker on it, or paused,
 * resumed or limited it (again after every reconnect); opening a handle
 * alone names nothing. An ACL
 * user needs ZADD on that key to name its queues (rjq acl has it). The
 * registry is one key per prefix: users scoped to different queue
 * patterns of one prefix share it (each may add names, a monitor reads
 * them all); tenants that must not see each other's queue names use
 * different prefixes. On a Redis Cluster the registry is one per master
 * ("<prefix>:{queues-<n>}", in a slot it serves; README "Redis Cluster"):
 * every master is asked for the page and the answers are merged, each
 * name once, in name order (an error of any master is the call's status).
 * Called before the client's first connect, it waits for that connect to
 * know which. cb's names are valid only during the callback. */
RJQ_API int rjq_client_list_queues(rjq_client *c, const char *after, long limit, rjq_ids_cb *cb,
                                   void *data);

/* The process registry: the clients with workers (the processes that run
 * jobs), each as it described itself with its last liveness beat (at most
 * a second old). A client is listed while its liveness entry lasts (see
 * liveness_ms): it leaves the list that long after it stopped (closed,
 * killed, cut off), without anything to clean up. Clients with liveness
 * turned off (-1) are not listed. */
#define RJQ_PROCESS_JOBS_MAX 20

typedef struct rjq_process_queue {
    const char *queue;
    int concurrency;            /* its workers' on that queue, summed */
    int running;                /* jobs they ran at the beat */
    const char *const *jobs;    /* the ids of up to RJQ_PROCESS_JOBS_MAX of them */
    size_t njobs;
} rjq_process_queue;

/* Element i of rjq_process.queues (the struct may grow: never queues[i]
 * for i > 0). */
RJQ_API const rjq_process_queue *rjq_process_queue_get(const rjq_process_queue *list, size_t i);

typedef struct rjq_process {
    const char *id;             /* the client's id (its jobs' fencing tokens
                                   start with it) */
    const char *host;           /* gethostname() */
    long pid;
    long long started_ms;       /* when its workers started (its clock, ms
                                   since the epoch) */
    const char *name;           /* the client's name option ("" without) */
    long long alive_until_ms;   /* server time its liveness entry runs out */
    const rjq_process_queue *queues; /* the queues it runs workers on */
    size_t nqueues;
} rjq_process;

typedef void rjq_processes_cb(rjq_client *c, int status, const rjq_process *list, size_t n,
                              void *data);

/* Element i of the list an rjq_processes_cb gets (never list[i] for i > 0). */
RJQ_API const rjq_process *rjq_process_get(const rjq_process *list, size_t i);

/* List up to `limit` (1..RJQ_JOBS_PAGE_MAX) live processes of the client's
 * prefix from `offset` on (0..RJQ_JOBS_OFFSET_MAX), soonest-expiring first:
 * one script call that only reads, O(log n + offset + limit), no keyspace
 * scan. cb's list is valid only during the callback; n < limit means the
 * end. Every beat moves its process in that order: pages taken one after
 * another may skip or repeat a process (a consistent list is one page).
 * The registry is one per prefix: a monitor scoped to some queues reads
 * every process's queue names and running job ids.
 * An ACL user needs read access to "<prefix>:{clients}:*" (the monitor
 * role of rjq acl has it). On a Redis Cluster the registry is one per
 * master ("<prefix>:{clients-<n>}:*"): every master is asked for its
 * first offset + limit and the answers are merged, each process once (with
 * its latest entry end), the page cut from the merge (an error of any
 * master is the call's status); called before the client's first connect,
 * it waits for that connect to know which. RJQ_EINVAL for a bad offset or
 * limit. */
RJQ_API int rjq_client_list_processes(rjq_client *c, long offset, long limit, rjq_processes_cb *cb,
                                      void *data);

/* Redis' memory, as INFO memory says it. */
typedef struct rjq_memory_info {
    long long used_memory;        /* bytes */
    long long maxmemory;          /* bytes; 0: no limit */
    const char *maxmemory_policy; /* "noeviction", "allkeys-lru", ... */
    int can_evict_jobs;           /* 1 when Redis may delete jobs to make room:
                                     an allkeys-* policy under a maxmemory (rjq's
                                     job keys have no TTL, so volatile-* policies
                                     evict none of them) */
} rjq_memory_info;

typedef void rjq_memory_cb(rjq_client *c, int status, const rjq_memory_info *info, void *data);

/* Read Redis' memory use and eviction policy (INFO memory; an ACL user
 * needs +info: the monitor role of rjq acl has it). The strings are valid
 * only during the callback. */
RJQ_API int rjq_client_get_memory(rjq_client *c, rjq_memory_cb *cb, void *data);

/* Each master: a Redis Cluster's masters (or the one server), with one
 * command's reply from each. */
typedef struct rjq_master {
    const char *address;          /* "host:port" ("[v6]:port"; a unix
                                     socket's path) */
    const int *ranges;            /* the slots it serves: range i is
                                     ranges[2*i] .. ranges[2*i+1] (both
                                     included), ascending (never NULL,
                                     also when empty; so is replicas) */
    size_t nranges;               /* 0: not a cluster (a standalone server
                                     or Sentinel's master: it serves every
                                     queue, and it is the list's only one) */
    const char *const *replicas;  /* the addresses of its replicas, as the
                                     cluster's table lists them */
    size_t nreplicas;
    int status;                   /* the command on this master: RJQ_OK, or
                                     what the request ended with: RJQ_EREDIS
                                     (reply: the error's words), RJQ_EAUTH,
                                     RJQ_ECONN, RJQ_ETIMEDOUT, RJQ_ECANCELED,
                                     RJQ_ENOMEM, RJQ_EPROTO (a reply that is
                                     not text: an array, a map...) */
    const char *reply;            /* its reply as text: a string or status
                                     as it is, an integer in decimal, an
                                     error's words; NULL for a nil reply and
                                     without a reply */
    size_t len;                   /* reply's bytes */
} rjq_master;

/* Element i of the list an rjq_masters_cb gets: fields may be added at the
 * end; index with rjq_master_get, never list[i] for i > 0. NULL for a NULL
 * list. */
RJQ_API const rjq_master *rjq_master_get(const rjq_master *list, size_t i);

typedef void rjq_masters_cb(rjq_client *c, int status, const rjq_master *list, size_t n,
                            void *data);

/* Send one command to every master: argc (>= 1) arguments argv[i] of
 * lens[i] bytes each (lens NULL: C strings; copied during the call). The
 * masters are read from the cluster (CLUSTER SLOTS, once the client's
 * session is up); each master's command goes to it as a request of the
 * first slot it serves, so it follows redirects and retries as any
 * request does (a topology changing meanwhile may answer it from the
 * slot's new master). Meant for commands without keys (INFO, PING,
 * DBSIZE...): a key of another master's slot is answered by that master.
 * On a standalone server (the client found no cluster) the list is the
 * server alone, nranges 0. An ACL user needs the command and, on a
 * cluster, CLUSTER SLOTS (+cluster|slots: every role of rjq acl has it).
 *
 * cb is called once, when every master answered: status RJQ_OK and the n
 * (>= 1) masters in the table's order, each with its own status and
 * reply; or, with list NULL and n 0: RJQ_ECONN, RJQ_ETIMEDOUT,
 * RJQ_EAUTH, RJQ_EREDIS (CLUSTER SLOTS failed on a cluster),
 * RJQ_EPROTO (a table rjq cannot read, or one without a master serving
 * slots), RJQ_ENOMEM, RJQ_ECANCELED (the client was freed first). list
 * and its strings are valid only during the callback.
 * Returns RJQ_OK, RJQ_EINVAL (c, cb or argv NULL, an argument NULL, argc
 * < 1), RJQ_ECLOSED or RJQ_ENOMEM (cb not called). */
RJQ_API int rjq_client_send_to_masters(rjq_client *c, int argc, const char *const *argv,
                                       const size_t *lens, rjq_masters_cb *cb, void *data);

/* The cluster slot of q's keys (all of them carry the hash tag "{name}"):
 * 0 .. 16383, as CLUSTER KEYSLOT says; a master of rjq_client_send_to_masters()
 * serves q when the slot is in one of its ranges. RJQ_EINVAL for q NULL. */
RJQ_API int rjq_queue_get_slot(const rjq_queue *q);

/* The states rjq_queue_list_jobs() lists. */
typedef enum rjq_job_state {
    RJQ_STATE_READY,     /* waiting, in claim order: higher priorities first,
                            FIFO within one; then the ready jobs of its
                            job groups, group by group in the order of
                            their names, each in its claim order */
    RJQ_STATE_DELAYED,   /* delayed or waiting for a retry, by due time
                            (then its groups' such jobs, by due time) */
    RJQ_STATE_ACTIVE,    /* running, by lease end */
    RJQ_STATE_DEAD,      /* oldest first */
    RJQ_STATE_CANCELLED, /* oldest first (those kept, see dead_max) */
    RJQ_STATE_COMPLETED, /* oldest first (those kept, see retention_ms) */
    RJQ_STATE_WAITING    /* waiting for their dependencies (rjq_job_options.after),
                            oldest first */
} rjq_job_state;

#define RJQ_JOBS_PAGE_MAX 1000
#define RJQ_JOBS_OFFSET_MAX (1LL << 50) /* exact in Lua's numbers */

/* List up to `limit` (1..RJQ_JOBS_PAGE_MAX) ids of the queue's jobs in
 * `state`, in the order above, from `offset` (0..RJQ_JOBS_OFFSET_MAX) on:
 * one script call that
 * only reads, O(log n + limit) (completed: O(offset + limit)). The ids
 * are valid only during the callback. RJQ_EINVAL for a bad state, offset
 * or limit. */
RJQ_API int rjq_queue_list_jobs(rjq_queue *q, rjq_job_state state, long offset, long limit,
                                rjq_ids_cb *cb, void *data);

/* One step of a search of q's payloads (rjq_queue_search). */
typedef struct rjq_search_match {
    const char *id;
    const char *state; /* "ready", "delayed", "waiting" (for its dependencies),
                          "active", "dead", "cancelled" or "completed" (within
                          the retention), as read then */
} rjq_search_match;

/* Element i of the matches an rjq_search_cb or rjq_find_cb gets: fields
 * may be added at the end; index with rjq_search_match_get, never
 * matches[i] for i > 0. NULL for a NULL list. */
RJQ_API const rjq_search_match *rjq_search_match_get(const rjq_search_match *list, size_t i);

/* cursor: where the next step starts ("0": the scan is over); scanned: the
 * payloads this step read; total: the jobs in the queue then (payloads
 * kept); matches: those of the step's payloads that hold the bytes. All
 * valid only during the callback. On an error (status < 0) the rest is
 * NULL or 0. */
typedef void rjq_search_cb(rjq_client *c, int status, const char *cursor, long long scanned,
                           long long total, const rjq_search_match *matches, size_t n,
                           void *data);

#define RJQ_SEARCH_BYTES_MAX 1024 /* the longest text a search looks for */
#define RJQ_SEARCH_COUNT_MAX 1000 /* the most payloads one step asks for */

/* One step of a search of q's job payloads (every job it keeps: ready,
 * delayed, waiting for its dependencies, running, dead, cancelled,
 * completed within the retention) for
 * the bytes (1..RJQ_SEARCH_BYTES_MAX, compared as they are, not a
 * pattern): one script call that reads about `count`
 * (1..RJQ_SEARCH_COUNT_MAX) payloads from `cursor` on (HSCAN's cursor:
 * "0" to start, then the one cb got, until cb gets "0"), so a step costs
 * the same whatever the queue's size and never blocks Redis for long (a
 * queue small enough for Redis' compact hash encoding,
 * hash-max-listpack-entries: 512 payloads by default, is read whole in
 * one step).
 * Like HSCAN, a job there for the whole scan is seen at least once (maybe
 * twice); one enqueued or gone during it may or may not be. Returns
 * RJQ_EINVAL (q or cb NULL, a cursor that is not a number of at most 20
 * digits, no bytes or too many, count out of range), RJQ_ECLOSED (the
 * client is closing), RJQ_ESHARDED (a sharded queue: search each shard,
 * rjq_queue_get_shard) or RJQ_ENOMEM; cb gets RJQ_OK, RJQ_EPROTO (a reply
 * out of range) or the connection's error. */
RJQ_API int rjq_queue_search(rjq_queue *q, const char *cursor, const void *bytes, size_t len,
                             long count, rjq_search_cb *cb, void *data);

/* ---- The index of declared JSON fields -----------------------------------
 * A queue may declare up to RJQ_INDEX_FIELDS_MAX fields of its JSON
 * payloads (e.g. "customer_id"): its enqueue script then keeps, for each
 * new job whose payload is a JSON object with such a field at its top
 * level, a string or a number (as its decimal text: an integer without a
 * fraction, so 42 and "42" are the same value) of at most
 * RJQ_INDEX_VALUE_MAX bytes, an entry in an index (a sorted set in the
 * queue's slot), so that rjq_queue_find() looks a value up in O(log n +
 * matches). The entries leave with the job's record (retention, the dead
 * and cancelled caps, delete, purge). A queue without an index pays
 * nothing: its enqueues write and read nothing more.
 *
 * Producers learn the declaration: a queue handle reads it (one HMGET of
 * the queue's settings, in the background) when it starts enqueueing and
 * again with its first enqueue after RJQ_INDEX_RELEARN_MS (no timer: a
 * handle that never enqueues reads nothing, and an enqueue never waits
 * for the read, nor are its retries re-timed by it);
 * rjq_queue_set_index() teaches its own handle at once once it has
 * enqueued (before, its first enqueue reads it). Until the first
 * read answers, the handle's enqueue calls have the script read the
 * declaration itself (one HMGET a call). A producer that knows of an index
 * has its jobs indexed by the declaration then in force (the script reads
 * it: a changed one is never missed); one that learnt "no index" before
 * the declaration (for up to RJQ_INDEX_RELEARN_MS), or an rjq older than
 * the index, enqueues unindexed jobs, as do schedules (their jobs are
 * made by the scheduler's script). The index
 * knows which jobs it covers: rjq_queue_find() refuses (RJQ_ESTATE) while
 * it does not cover every job the queue keeps, so a search by the index
 * never misses a job silently: the caller scans (rjq_queue_search), or
 * has the index catch up with rjq_queue_fill_index(). */
#define RJQ_INDEX_FIELDS_MAX 4   /* fields a queue declares at most */
#define RJQ_INDEX_FIELD_MAX 64   /* bytes of a field name: letters, digits, '_', '.', '-' */
#define RJQ_INDEX_VALUE_MAX 256  /* the longest value indexed (bytes) */
#define RJQ_INDEX_RELEARN_MS 10000

/* The declaration: fields[0..n) (n 0: no index), covered: the jobs the
 * index covers, total: the jobs the queue keeps (payloads), as read then.
 * Valid only during the callback; on an error NULL and 0s. */
typedef void rjq_index_cb(rjq_client *c, int status, const char *const *fields, size_t n,
                          long long covered, long long total, void *data);

/* Declare the index's fields (n 0: drop the index), stored with the
 * queue (its settings hash). A declaration other than the one in force
 * drops the index at once (freed in the background): it covers no job
 * until new jobs come (or rjq_queue_fill_index() walks the old ones); the
 * same declaration again changes nothing. cb (may be NULL) gets the
 * declaration as it is then. Returns RJQ_EINVAL (q NULL, fields NULL with
 * n > 0, n > RJQ_INDEX_FIELDS_MAX, a field empty, longer than
 * RJQ_INDEX_FIELD_MAX or with another byte than those above, a field
 * twice: nothing is sent), RJQ_ECLOSED, RJQ_ESHARDED (declare on each
 * shard) or RJQ_ENOMEM; cb gets RJQ_OK, RJQ_EWRONGTYPE, RJQ_EPROTO or the
 * connection's error. */
RJQ_API int rjq_queue_set_index(rjq_queue *q, const char *const *fields, size_t n,
                                rjq_index_cb *cb, void *data);

/* Read the declaration and coverage. Returns RJQ_EINVAL (q or cb NULL),
 * RJQ_ECLOSED, RJQ_ESHARDED or RJQ_ENOMEM; cb as above. */
RJQ_API int rjq_queue_get_index(rjq_queue *q, rjq_index_cb *cb, void *data);

/* cursor: where the next step starts ("0": done); covered, total: as
 * above after the step; indexed: the jobs this step indexed. */
typedef void rjq_index_fill_cb(rjq_client *c, int status, const char *cursor, long long covered,
                               long long total, long long indexed, void *data);

/* One step of indexing the jobs the index does not cover: one script call
 * that reads about `count` (1..RJQ_SEARCH_COUNT_MAX) payloads from cursor
 * on (HSCAN's cursor, as rjq_queue_search), so a step never blocks Redis
 * for long. Returns RJQ_EINVAL (q or cb NULL, a bad cursor or count),
 * RJQ_ECLOSED, RJQ_ESHARDED or RJQ_ENOMEM; cb gets RJQ_OK, RJQ_EREDIS (no
 * index declared), RJQ_EWRONGTYPE, RJQ_EPROTO or the connection's error. */
RJQ_API int rjq_queue_fill_index(rjq_queue *q, const char *cursor, long count,
                                 rjq_index_fill_cb *cb, void *data);

/* The jobs found (ids in bytewise order; state as rjq_search_match),
 * covered and total as above. All valid only during the callback. */
typedef void rjq_find_cb(rjq_client *c, int status, const rjq_search_match *matches, size_t n,
                         long long covered, long long total, void *data);

/* Look up the jobs whose declared field `field` has the value (len 1..
 * RJQ_INDEX_VALUE_MAX bytes, compared as they are): one script call,
 * O(log n + limit), that lists up to `limit` (1..RJQ_JOBS_PAGE_MAX) of
 * them in id order (bytewise), after the id `after` (NULL or "": from the
 * first; else the last id of the page before: a job that matches for the
 * whole paging is listed exactly once). cb gets RJQ_OK (every
 * match of the page: fewer than limit means the last page), RJQ_ENOTFOUND
 * (the field is not declared), RJQ_ESTATE (the index covers `covered` of
 * the `total` jobs only: nothing looked up; scan instead, or fill the
 * index), RJQ_EWRONGTYPE, RJQ_EPROTO or the connection's error. Returns
 * RJQ_EINVAL (q, cb, field or value NULL, a bad field name, len, an after
 * longer than RJQ_JOB_ID_MAX, limit), RJQ_ECLOSED, RJQ_ESHARDED or
 * RJQ_ENOMEM. */
RJQ_API int rjq_queue_find(rjq_queue *q, const char *field, const void *value, size_t len,
                           const char *after, long limit, rjq_find_cb *cb, void *data);

/* A page of ids and the cursor after its last one: next is NULL when the
 * list ended (a page shorter than asked). ids, next and their strings are
 * valid only during the callback. */
typedef void rjq_page_cb(rjq_client *c, int status, const char *const *ids, size_t n,
                         const char *next, void *data);

/* List up to `limit` (1..RJQ_JOBS_PAGE_MAX) ids of the queue's jobs in
 * `state`, in rjq_queue_list_jobs()'s order, after the cursor `after` (NULL
 * or "": from the first); cb gets them and the cursor of the next page.
 * Paging stays correct while jobs move: a cursor names the last job listed
 * by its place in the list (its score and id in a sorted set, its id in
 * the ready list or the completed index), not by a rank, so a job leaving
 * the list between two pages (claimed, retried, cancelled, swept) never
 * makes the next page skip or repeat a job that stayed. (A ready job of
 * priority 0 taken from the list's head: the pages go on from the head,
 * since every job ahead of it was taken before it; a cancelled one:
 * likewise, so the next page may repeat some, never skip one.) One script
 * call that only reads: O(log n + limit) for the sorted sets, O(position +
 * limit) for the ready list and the completed index. A cursor is opaque
 * text: pass back only one a call gave. (Job groups' ready and delayed
 * jobs come after the queue's own, as rjq_queue_list_jobs lists them; a
 * cancelled group job's id, left in its group, is passed over.)
 * RJQ_EINVAL for a bad state, limit
 * or cursor, RJQ_ESHARDED on a sharded queue (list
 * each shard: rjq_queue_get_shard), RJQ_ECLOSED when the client is being
 * freed. */
RJQ_API int rjq_queue_list_jobs_after(rjq_queue *q, rjq_job_state state, const char *after,
                                      long limit, rjq_page_cb *cb, void *data);

/* Delete a dead or cancelled job for good (its record; an id with a dedup
 * time stays reserved until that is over). cb gets 1, or RJQ_ENOTFOUND (no
 * such job) or RJQ_ESTATE (it waits, runs or completed: cancel a waiting
 * or running job; completed ones leave by retention). Returns RJQ_ESHARDED
 * for a server-assigned id on a sharded queue. */
RJQ_API int rjq_queue_delete(rjq_queue *q, const char *id, rjq_count_cb *cb, void *data);

/* Run a delayed job now (an operator's "run now"), from any process: a job
 * waiting in the delayed set (delayed at enqueue, or waiting for a retry's
 * backoff) becomes ready at once, last of its priority class (a job of a
 * group: in its group), as if its due time had come: one script, so it is never both or neither; its
 * attempts, last error and times stay. cb (may be NULL) gets 1, or
 * RJQ_ENOTFOUND (no such job) or RJQ_ESTATE (it is not delayed: ready,
 * running or finished; nothing changes). Returns RJQ_EJOBID for an invalid
 * id, RJQ_ESHARDED for a server-assigned id on a sharded queue, RJQ_ECLOSED
 * when the client is being freed. */
RJQ_API int rjq_queue_promote(rjq_queue *q, const char *id, rjq_count_cb *cb, void *data);

/* Delete the oldest `limit` (1..RJQ_JOBS_PAGE_MAX) jobs of the dead
 * (RJQ_STATE_DEAD) or cancelled (RJQ_STATE_CANCELLED) set, as
 * rjq_queue_delete() does one; cb gets how many. Call again until it gets
 * 0 to empty the set. RJQ_EINVAL for another state or limit. */
RJQ_API int rjq_queue_purge(rjq_queue *q, rjq_job_state state, long limit, rjq_count_cb *cb,
                            void *data);

/* ------------------------------------------------------------------------
 * Schedules: repeatable and cron jobs
 *
 * A schedule is stored in Redis with its queue; any client may set, remove
 * or list them. A scheduler (rjq_scheduler_start, on any client, as many
 * as wanted) enqueues their jobs: one runs at a time (a lease in Redis,
 * renewed a third of the way through; another takes over when it runs
 * out), and each fire time's job has the id "<name>@<fire time ms>", so
 * two schedulers, a failover or a restart never enqueue one fire twice.
 * The scheduler wakes on the loop's timer at each fire time.
 * ---------------------------------------------------------------------- */

#define RJQ_MISSED_SKIP 0 /* fires missed beyond catchup_ms are skipped */
#define RJQ_MISSED_ONCE 1 /* they are run once, as one job */

typedef struct rjq_schedule {
    size_t size;          /* RJQ_SCHEDULE_INIT sets it */
    long long every_ms;   /* fire every this many ms, at the multiples of it
                             since the epoch (1000: each second); or 0 and: */
    const char *cron;     /* a cron expression: 5 fields (minute hour day
                             month weekday), or 6 with seconds first, with
                             numbers, ranges a-b, lists a,b, steps a-b/n or
                             (after a star) /n, names JAN..DEC and SUN..SAT,
                             or @yearly @monthly @weekly @daily @hourly; as
                             in Vixie cron a day matches either day field
                             when both are restricted, else both */
    int utc_offset_min;   /* the cron expression's clock: UTC plus this many
                             minutes (-1440..1440); no daylight saving */
    const void *payload;  /* its jobs' payload */
    size_t len;
    const rjq_job_options *opts; /* its jobs' options (NULL: defaults; the id
                             is ignored) */
    long long catchup_ms; /* a fire time at most this late is still
                             enqueued, each one (a scheduler's failover, a
                             restart); 0 means 60000 */
    int missed;           /* older fire times: RJQ_MISSED_SKIP (default) or
                             RJQ_MISSED_ONCE (one job, named by the first
                             of them) */
    int reserved;         /* keep 0 (room for a later field: RJQ_EINVAL
                             when set) */
} rjq_schedule;
#define RJQ_SCHEDULE_INIT RJQ_SIZED_INIT_(rjq_schedule)

/* Set schedule `name` (1..179 bytes, no spaces or control characters) of
 * q, replacing one of that name. cb (may be NULL) gets 1 when it is new or
 * changed (a new timing has its next fire time computed again, from now; a
 * new payload or job options count as a new timing too, a new payload
 * alone does not), 0 when it was the same. RJQ_EINVAL (neither or both of every_ms and cron, a bad cron
 * expression: rjq_client_get_errmsg says why, bad numbers), RJQ_EJOBID (bad
 * name), RJQ_ETOOBIG (payload). */
RJQ_API int rjq_schedule_set(rjq_queue *q, const char *name, const rjq_schedule *s,
                             rjq_count_cb *cb, void *data);
/* Remove schedule `name`: cb gets 1, or 0 when there was none. Jobs it
 * enqueued are not touched. */
RJQ_API int rjq_schedule_remove(rjq_queue *q, const char *name, rjq_count_cb *cb, void *data);

typedef struct rjq_schedule_info {
    const char *name;
    const char *spec;     /* "every <ms>" or "cron <expr> (UTC+<min>)" */
    long long next_ms;    /* its next fire time (server ms); 0 until a
                             scheduler computed it */
} rjq_schedule_info;
typedef void rjq_schedules_cb(rjq_client *c, int status, const rjq_schedule_info *list, size_t n,
                              void *data);
/* Element i of the list an rjq_schedules_cb gets (never list[i] for i > 0). */
RJQ_API const rjq_schedule_info *rjq_schedule_info_get(const rjq_schedule_info *list, size_t i);
/* List q's schedules, by name (valid during the callback). */
RJQ_API int rjq_schedule_list(rjq_queue *q, rjq_schedules_cb *cb, void *data);

typedef struct rjq_scheduler rjq_scheduler;

/* Run a scheduler for q's schedules on this client until
 * rjq_scheduler_stop() or the client is freed. lease_ms (0 means 3000):
 * how long its lease lasts without renewal, so how soon another takes
 * over when this one dies. A stored schedule rjq_schedule_set would not
 * write (its spec, or a name longer than 179 bytes written by other
 * means) never fires: no job, no next fire time, still listed; for such a
 * name rjq_client_get_errmsg() says so. */
RJQ_API int rjq_scheduler_start(rjq_queue *q, long lease_ms, rjq_scheduler **out);
/* Stop it (the handle is freed); a lease it holds is given up, so another
 * scheduler takes over at once. */
RJQ_API int rjq_scheduler_stop(rjq_scheduler *s);
/* 1 while it holds the lease (it is the one that enqueues), else 0. */
RJQ_API int rjq_scheduler_is_leading(const rjq_scheduler *s);

/* ------------------------------------------------------------------------
 * Sharded queues (README "Sharded queues", docs/sharding.md)
 *
 * A queue declared with N shards is stored as N ordinary queues with their
 * own hash tags ("<name>~<i>-<k>"), placed on distinct masters of a Redis
 * Cluster when it has N or more (on a standalone server they share it).
 * A handle that knows the declaration (rjq_queue_open_async, or
 * rjq_queue_open once its read answered) is one queue
 * to these calls: rjq_enqueue (a job with an id goes to the shard of its
 * id's hash, so an id always meets itself; anonymous jobs go to the shards
 * in turn, but one made while the last one's shard has an enqueue call in
 * flight joins the batch held back there for its reply, until that batch
 * has gone, at most 16 jobs (unless the handle bounds the queue:
 * max_waiting); each gets an id the library makes, "a<client id>.<n>.<k>",
 * unique across the shards, never all digits, whose hash routes it to its
 * shard, so it goes as a caller id and every by-id call below finds it:
 * rjq_enqueued.id), rjq_enqueue_batch (split per shard: see below),
 * rjq_enqueue_await, rjq_queue_await (by id: server-assigned ids, of jobs
 * put on a shard directly or by an older library, repeat across shards, so
 * those are refused with RJQ_ESHARDED),
 * rjq_worker_start (one worker of every shard, its concurrency shared:
 * rjq_worker_start_queues in weighted order, equal weights; rjq_job_get_queue()
 * is the job's shard) and rjq_queue_get_stats (summed over the shards; paused
 * when any shard is; limits: the whole queue's stored by
 * rjq_queue_set_limits, or when none is stored the sum of the shards'
 * shares, the window the first shard's). Priorities and FIFO order hold within a shard, not
 * across shards.
 *
 * Limits: rjq_queue_set_limits on a sharded handle stores the whole
 * queue's concurrency and rate with the declaration (every client reads
 * the same figures) and splits them over the N shards (shard i gets
 * figure / N, the first figure % N shards one more; the window is each
 * shard's): the shares add up to the figure, so the whole queue never
 * has more active jobs, nor more starts in any window, than it says, at
 * no cost per job (each claim reads its own shard's share). The shares
 * then follow the work: a process with a worker on the sharded queue
 * re-splits them by demand every 250 ms (up to 1 s apart while nothing
 * changes) while it holds the queue's
 * re-split lease (one process at a time; another takes over within 2 s
 * of its end), giving the shards with jobs waiting the figure less one
 * per shard without (each keeps 1), lowering before raising so that the
 * figure still holds. A concurrency or rate below N cannot be split (a
 * share of 0 would be no limit): RJQ_EINVAL, nothing sent. cb gets 1 once
 * the figures are stored and every shard took its share; on an error the
 * first one, the shards that answered having taken theirs (call again). A bounded queue's max_waiting (the options
 * of the handle that learns the layout) is split the same way, each
 * shard at least 1: the queue never holds more waiting jobs than the
 * bound (n when it is below n), and an enqueue whose own shard is full
 * is refused with RJQ_EFULL although other shards may have room.
 *
 * Calls by id go to the id's shard, as rjq_enqueue picks it:
 * rjq_queue_cancel, rjq_queue_get_job, rjq_queue_delete, rjq_queue_promote,
 * rjq_queue_get_dependencies, rjq_queue_get_dependents, rjq_queue_get_job_deps
 * and rjq_queue_replay with an id (the library's made ids of anonymous jobs included). A
 * server-assigned (all digits) id (a job put on a shard's own handle, or
 * by an older library) repeats across shards, so
 * its shard cannot be known: those calls refuse it with RJQ_ESHARDED
 * (make the call on its shard, rjq_queue_get_shard). (rjq_job_report_progress and
 * the lease calls take the job's handle, which is its shard's already.)
 *
 * Whole-queue calls go to every shard, one call each, and cb is called
 * once, when every shard has answered: rjq_queue_pause and
 * rjq_queue_resume (cb gets 1 when any shard's state changed, else 0),
 * rjq_queue_purge, rjq_queue_reclaim and rjq_queue_replay without an id
 * (cb gets the sum; each shard is given the whole `limit`, so up to
 * N x limit jobs are moved or deleted per call: call again until it gets
 * 0). An argument refused synchronously is refused as for a plain queue
 * (nothing sent). On an error cb gets the first shard's error (n 0),
 * while the other shards' calls took effect: a partial pause leaves the
 * shards that answered paused (rjq_queue_get_stats says paused when any
 * shard is) and the others not; pause and resume are idempotent, so
 * calling again completes them.
 *
 * Listings: rjq_queue_list_jobs and rjq_queue_list_dead read the first
 * offset + limit ids of every shard (offset + limit <= RJQ_JOBS_PAGE_MAX,
 * else RJQ_EINVAL) and each one's enqueue time (an rjq_queue_get_job read per
 * id: N x (offset + limit) reads), and merge them: the next id is the
 * head, among the shards' remaining ids, enqueued first (ties: the lower
 * shard). Each shard's own order is kept (ready: claim order; dead: oldest
 * death first), so a queue whose shards list in enqueue order (FIFO
 * ready, no priorities) lists in enqueue order, and a page (offset,
 * limit) is the slice of that one merged order: pages add up as for a
 * plain queue while the jobs stay put. Jobs gone between the two reads
 * are left out. cb once.
 *
 * rjq_queue_monitor on a sharded handle monitors every shard (a monitor
 * of each, all with cb and data, under the one handle it returns):
 * rjq_monitor_get_time is the event's own shard's server time,
 * rjq_monitor_stop stops them all, rjq_monitor_enable_resyncs asks each
 * (a "resync" per shard). Events keep their order within a shard only.
 *
 * Schedules of a sharded queue live in the queue's own slot (with its
 * declaration, not on a shard): rjq_schedule_set, _remove and _list on the
 * sharded handle (or any handle of the queue) set, remove and list them
 * once; rjq_scheduler_start on it runs a scheduler that fires each fire
 * time once for the whole queue (the lease, as on a plain queue), its job
 * "<name>@<fire ms>" enqueued through the sharded handle, so to the shard
 * of that id (the fire times spread over the shards, and a fire time
 * enqueued again after a failover meets its job); the next fire time moves
 * on only once the jobs are enqueued. A shard's own handle has its own
 * schedules (none, unless set on it).
 *
 * rjq_worker_start_queues on such a handle returns RJQ_ESHARDED,
 * rjq_client_get_errmsg() saying so: use its shards (rjq_queue_get_shard)
 * or rjq_worker_start.
 * A handle from rjq_queue_open() reads the declaration too, holding its
 * routed calls until it is known (see rjq_queue_open).
 *
 * rjq_enqueue_batch on a sharded handle validates every item first
 * (nothing is sent when one is invalid), then makes one call per shard
 * (each atomic, in the caller's order within it); cb is called once, with
 * every item's result in the caller's order, or with the first error of a
 * shard's call and n 0: the batch is atomic per shard only, so other
 * shards may have taken their jobs (give jobs ids to retry safely).
 * ---------------------------------------------------------------------- */

#define RJQ_SHARDS_MAX 16 /* shards of one queue (one worker serves them all) */

typedef void rjq_queue_open_cb(rjq_client *c, int status, rjq_queue *q, void *data);

/*
 * Open the queue `name` as rjq_queue_open() does, and read its shard
 * declaration (one GET of "<prefix>:{name}:shards" in the queue's slot)
 * before handing the handle over: cb gets
 * it only once its layout is known, so no call on it goes to the wrong
 * place. cb is called once: RJQ_OK and q (the caller's from then on, as
 * from rjq_queue_open; rjq_queue_count_shards() tells its layout), or NULL
 * with RJQ_EPROTO (a declaration this library cannot read), RJQ_EAUTH,
 * RJQ_EREDIS, RJQ_ECONN (no connection: the server could not be reached,
 * or the connection was lost before the reply), RJQ_ETIMEDOUT, RJQ_ENOMEM
 * or RJQ_ECANCELED (the client was freed first). Returns RJQ_OK (cb will be called) or, cb not
 * called: RJQ_EINVAL (c or cb NULL, invalid options), RJQ_EQUEUENAME,
 * RJQ_ECLOSED, RJQ_ENOMEM.
 */
RJQ_API int rjq_queue_open_async(rjq_client *c, const char *name, const rjq_queue_options *opts,
                                 rjq_queue_open_cb *cb, void *data);

/*
 * Declare q's shard count n (1..RJQ_SHARDS_MAX; 1: not sharded). The same
 * count as declared changes nothing (the recorded shards stay: cb gets
 * RJQ_OK). Another count is written only while the queue is empty: no job
 * ready, delayed or active in its own keys nor in any declared shard (read
 * from each one's stats first); else cb gets RJQ_EBUSY and nothing
 * changes. Shard names are picked from the client's slot table (shard i on
 * master i mod M) and recorded, so every client finds them there. On
 * success q itself takes the new layout; other handles keep the layout
 * they learnt until opened again (change the count with the queue's
 * producers and workers stopped). cb (may be NULL) gets RJQ_OK and n, or 0
 * and RJQ_EBUSY, RJQ_EPROTO (a declaration this library cannot read),
 * RJQ_ECONN (no master known on a cluster, or the connection was lost),
 * RJQ_ETIMEDOUT, RJQ_EAUTH, RJQ_EREDIS, RJQ_EWRONGTYPE, RJQ_ENOMEM,
 * RJQ_ECANCELED (the client was freed first). Returns RJQ_OK (cb will be
 * called) or, cb not called: RJQ_EINVAL (q NULL, n out of range),
 * RJQ_EQUEUENAME (the shards' names would be longer than a queue name may
 * be), RJQ_ECLOSED, RJQ_ENOMEM.
 */
RJQ_API int rjq_queue_shard(rjq_queue *q, int n, rjq_count_cb *cb, void *data);

/* The number of shards q's handle routes over: N for a sharded queue, 1
 * for a plain one; RJQ_EINVAL for q NULL. */
RJQ_API int rjq_queue_count_shards(const rjq_queue *q);

/* Shard i (0 .. rjq_queue_count_shards(q) - 1) of q, an ordinary queue handle
 * owned by q (valid while q is; for a per-shard breakdown: rjq_queue_get_stats
 * on each, or the calls a sharded handle refuses); for a plain q, q itself
 * at i 0. NULL when i is out of range or q NULL. */
RJQ_API rjq_queue *rjq_queue_get_shard(rjq_queue *q, int i);

/* ------------------------------------------------------------------------
 * Batches (README "Dependencies and batches"; src/batch.c, batch.lua). A
 * batch groups jobs enqueued over time, of any queues of the same client
 * prefix (on any masters of a cluster). It lives in one queue's slot, the
 * queue whose handle created it (its "batch queue"), and is named there by
 * its id. Its creator adds members (rjq_batch_enqueue) and then seals it
 * (rjq_batch_seal: no more members). Once it is sealed and every member
 * has finished (completed, dead or cancelled; a member whose record was
 * deleted counts as dead), it ends: its state becomes "dead" when a member
 * died, else "completed", and its completion jobs are enqueued, in the
 * batch queue: on_complete always, on_success only when no member died.
 * Each has the batch's payload for it and the headers rjq.batch (its id),
 * rjq.batch.total, rjq.batch.completed, rjq.batch.dead,
 * rjq.batch.cancelled and rjq.batch.on ("complete" or "success"); its id
 * is "batch:<batch id>:complete" (or ":success"). A batch sealed after
 * every member finished ends at its seal; one sealed with no members ends
 * at once, completed, with zero counts.
 * - Cost: O(1) Redis work per member (a mark per member, counters in the
 *   batch's record; no list of members is read by any completion).
 * - Across queues and masters, as dependencies are: a member's enqueue is
 *   the job's enqueue, then its registration on its own queue, then its
 *   add to the batch (each idempotent; a member that finished before the
 *   add is counted by the add). The client that finishes a member tells
 *   the batch (an idempotent step: a member is counted once); one that
 *   dies before it told it is replaced by the dependencies' sweep of the
 *   member's queue (rjq.h "Dependencies": the reclaim sweep of a client
 *   whose workers work on that queue).
 * - Retention: a finished batch's record and member marks are deleted
 *   retention_ms after it ended (default 24 h; -1: kept until
 *   rjq_batch_delete): reads after that find no batch, and its keys go at
 *   a later batch call on its batch queue (create, add, seal, delete: each
 *   deletes up to 16 that are due). A member that
 *   finishes after its batch was deleted changes nothing.
 * ---------------------------------------------------------------------- */

typedef struct rjq_batch_options {
    size_t size; /* RJQ_BATCH_OPTIONS_INIT sets it */
    /* The batch's id (as a job id: 1..RJQ_JOB_ID_MAX bytes, no blanks, not
     * all digits); NULL: the next number of the batch queue. Creating an
     * id that exists changes nothing (the callback gets it all the same). */
    const char *id;
    /* The on_complete job's payload (on_complete_len bytes, binary-safe,
     * may be empty), NULL: no on_complete job. */
    const void *on_complete;
    size_t on_complete_len;
    /* The on_success job's payload, NULL: none. */
    const void *on_success;
    size_t on_success_len;
    /* How long the batch's record is kept once it ended (ms): 0 the
     * default, 86400000 (24 h); -1 kept until rjq_batch_delete; other
     * negative values are refused (RJQ_EINVAL). */
    long long retention_ms;
} rjq_batch_options;
#define RJQ_BATCH_OPTIONS_INIT RJQ_SIZED_INIT_(rjq_batch_options)

/* A batch's id (NUL-terminated; valid during the callback), NULL on error. */
typedef void rjq_batch_cb(rjq_client *c, int status, const char *id, void *data);

/*
 * Create a batch in q (a plain queue's handle) with options o (NULL: no
 * completion jobs, a numbered id). cb (may be NULL) gets RJQ_OK and the
 * batch's id, or RJQ_ECONN, RJQ_ETIMEDOUT, RJQ_EOOM, RJQ_EAUTH,
 * RJQ_EREDIS, RJQ_EWRONGTYPE, RJQ_EPROTO, RJQ_ENOMEM, RJQ_ECANCELED (the
 * client was freed first) and a NULL id. Returns RJQ_OK (cb will be
 * called) or, cb not called: RJQ_EINVAL (q NULL, a bad id or options
 * size), RJQ_ESHARDED (q is a sharded queue's handle), RJQ_ECLOSED,
 * RJQ_ENOMEM.
 */
RJQ_API int rjq_batch_create(rjq_queue *q, const rjq_batch_options *o, rjq_batch_cb *cb,
                             void *data);

/*
 * Enqueue a job into queue q (any queue's handle of the same client; a
 * sharded queue's: the job goes to its shard, and is the batch's member
 * as that shard's job) as a member of batch `id` of batch queue bq (a
 * plain queue's: a batch's record is one key of one queue): rjq_enqueue(q, payload, len,
 * o) (every option of it, dependencies included), then the member's
 * registration on q and its add to the batch. cb (may be NULL) gets, as
 * rjq_enqueue's, RJQ_OK and the job (n == 1; existed 1 when an id given
 * in o existed: it joins the batch all the same, once), or an error and
 * n == 0: rjq_enqueue's callback errors, RJQ_ENOTFOUND (no such batch),
 * RJQ_ESTATE (the batch was sealed). With an error after the enqueue
 * (RJQ_ENOTFOUND, RJQ_ESTATE, an error of the registration or the add),
 * the job was enqueued but is not a member: enqueued again with the same
 * id (o->id) it joins. Returns RJQ_OK (cb will be called) or, cb not
 * called: rjq_enqueue's codes, RJQ_EINVAL also for bq NULL or a bad id,
 * RJQ_ESHARDED (bq is a sharded queue's handle).
 */
RJQ_API int rjq_batch_enqueue(rjq_queue *bq, const char *id, rjq_queue *q, const void *payload,
                              size_t len, const rjq_job_options *o, rjq_enqueue_cb *cb,
                              void *data);

/*
 * Seal batch `id` of bq: it takes no more members, and ends once every
 * member finished (at once when they have). Sealing it again changes
 * nothing (RJQ_OK). cb (may be NULL) gets RJQ_OK, RJQ_ENOTFOUND (no such
 * batch), or RJQ_ECONN, RJQ_ETIMEDOUT, RJQ_EOOM, RJQ_EAUTH, RJQ_EREDIS,
 * RJQ_EWRONGTYPE, RJQ_EPROTO, RJQ_ENOMEM, RJQ_ECANCELED. Returns RJQ_OK
 * (cb will be called) or, cb not called: RJQ_EINVAL (bq NULL, a bad id),
 * RJQ_ESHARDED, RJQ_ECLOSED, RJQ_ENOMEM.
 */
RJQ_API int rjq_batch_seal(rjq_queue *bq, const char *id, rjq_done_cb *cb, void *data);

/*
 * Delete batch `id` of bq: its record, its completion jobs' payloads (a
 * pending batch's: they will not be enqueued) and its members' marks. A
 * pending batch is refused (RJQ_ESTATE) unless force is non-zero: its
 * members go on as plain jobs (their finishes find no batch) and its
 * awaits (rjq_batch_await) end with RJQ_ENOTFOUND. An ended batch's
 * completion jobs, already enqueued, stay. cb (may be NULL) gets RJQ_OK,
 * RJQ_ENOTFOUND (no such batch), RJQ_ESTATE (pending, not forced), or
 * RJQ_ECONN, RJQ_ETIMEDOUT, RJQ_EOOM, RJQ_EAUTH, RJQ_EREDIS,
 * RJQ_EWRONGTYPE, RJQ_EPROTO, RJQ_ENOMEM, RJQ_ECANCELED. Returns RJQ_OK (cb
 * will be called) or, cb not called: RJQ_EINVAL (bq NULL, a bad id),
 * RJQ_ESHARDED, RJQ_ECLOSED, RJQ_ENOMEM.
 */
RJQ_API int rjq_batch_delete(rjq_queue *bq, const char *id, int force, rjq_done_cb *cb,
                             void *data);

/* A batch's status (valid during the callback). */
typedef struct rjq_batch_info {
    const char *id;
    const char *state;       /* "pending", "completed" or "dead" */
    int sealed;              /* 1 once rjq_batch_seal went through */
    long long total;         /* members added */
    long long completed, dead, cancelled; /* members finished so far, by outcome */
    long long created_ms;    /* server clock, ms since the epoch */
    long long ended_ms;      /* when it ended; 0 while pending */
    /* Its completion jobs: 1 when it has an on_complete (an on_success)
     * job, enqueued when it ends (on_success: when none died), with the id
     * "batch:<id>:complete" ("batch:<id>:success"). */
    int has_on_complete, has_on_success;
} rjq_batch_info;

typedef void rjq_batch_info_cb(rjq_client *c, int status, const rjq_batch_info *info,
                               void *data);

/*
 * Read batch `id` of bq. cb gets RJQ_OK and its status, or RJQ_ENOTFOUND
 * (no such batch), RJQ_ECONN, RJQ_ETIMEDOUT, RJQ_EAUTH, RJQ_EREDIS,
 * RJQ_EWRONGTYPE, RJQ_EPROTO (a record that is not rjq's), RJQ_ENOMEM,
 * RJQ_ECANCELED, and a NULL info. Returns RJQ_OK (cb will be called) or,
 * cb not called: RJQ_EINVAL (bq NULL, cb NULL, a bad id), RJQ_ESHARDED,
 * RJQ_ECLOSED, RJQ_ENOMEM.
 */
RJQ_API int rjq_batch_get(rjq_queue *bq, const char *id, rjq_batch_info_cb *cb, void *data);

/*
 * Wait for batch `id` of bq to end, as rjq_enqueue_await does for one job:
 * cb gets RJQ_OK and its final status (state "completed" or "dead"), or
 * RJQ_ETIMEDOUT when timeout_ms (> 0) passed first (info: its status read
 * then, NULL when that read failed), RJQ_ENOTFOUND (no such batch), the
 * errors of rjq_batch_get other than a lost connection (RJQ_ENOTFOUND too
 * when a forced rjq_batch_delete deleted it while awaited), or
 * RJQ_ECANCELED (the client was freed first). It is one of the client's awaits (counted
 * by rjq_client_count_awaits, ended by rjq_client_free), on the client's
 * reply channel, as rjq_queue_await is: once the channel's subscription is
 * confirmed, one script call answers from the batch's record or adds the
 * channel to the batch's watchers, atomically (an end that comes between
 * the subscription and that call is read from the record); the call that
 * ends the batch publishes its status there. The awaits of one loop pass
 * are watched together (one call per batch queue), and watched again after
 * the subscriber connection came back (an end published while it was down
 * is read from the record). No polling. At the timeout the record is read
 * once for info (a batch found ended then gives RJQ_OK; a read that fails
 * gives RJQ_ETIMEDOUT and NULL). Returns RJQ_OK (cb will be called) or, cb
 * not called: RJQ_EINVAL (bq NULL, cb NULL, a bad id, timeout_ms <= 0),
 * RJQ_ESHARDED, RJQ_ECLOSED, RJQ_ENOMEM.
 */
RJQ_API int rjq_batch_await(rjq_queue *bq, const char *id, long timeout_ms,
                            rjq_batch_info_cb *cb, void *data);

/* Element i of the batches an rjq_batches_cb gets: fields may be added at
 * the end; index with rjq_batch_info_get, never batches[i] for i > 0. NULL
 * for a NULL list. */
RJQ_API const rjq_batch_info *rjq_batch_info_get(const rjq_batch_info *list, size_t i);

/* A page of batches (n of them, rjq_batch_info_get(batches, i), valid
 * during the callback), and the cursor of the next page (NUL-terminated;
 * NULL once the listing is over). */
typedef void rjq_batches_cb(rjq_client *c, int status, const rjq_batch_info *batches, size_t n,
                            const char *next, void *data);

/*
 * List the batches of batch queue bq, newest created first: those in state
 * `state` ("pending", "completed", "dead"; NULL: any), at most limit
 * (1..1000) per page, from the cursor `after` (NULL or "": the newest; else
 * a `next` a call gave: opaque, at most RJQ_JOB_ID_MAX + 16 bytes). cb
 * gets RJQ_OK, the page (n may be less than limit, 0 too, while next is not
 * NULL: an ended batch past its retention is left out) and next, or
 * RJQ_ECONN, RJQ_ETIMEDOUT, RJQ_EAUTH, RJQ_EREDIS, RJQ_EWRONGTYPE,
 * RJQ_EPROTO (a record that is not rjq's), RJQ_ENOMEM, RJQ_ECANCELED, with
 * n 0. One script call that only reads, O(log b + limit) for b batches of
 * the queue, whatever their states (an index by state and creation, written
 * with each batch's record: O(1) more per create, end and delete). A batch
 * that changes state between two pages leaves one listing for another; a
 * cursor names a place in the list, so none that stayed is skipped or
 * repeated. Batches created by an rjq older than the index (none of its
 * entries) are not listed. Returns RJQ_OK (cb will be called) or, cb not called: RJQ_EINVAL
 * (bq NULL, cb NULL, a bad state, limit or cursor), RJQ_ESHARDED (bq is a
 * sharded queue's handle: list each shard's, rjq_queue_get_shard),
 * RJQ_ECLOSED, RJQ_ENOMEM.
 */
RJQ_API int rjq_batch_list(rjq_queue *bq, const char *state, const char *after, long limit,
                           rjq_batches_cb *cb, void *data);

/* ------------------------------------------------------------------------
 * Trees in one call (README "Dependencies and batches"; src/flow.c): a
 * parent job and its children, of any queues of the same client (on any
 * masters of a cluster). The children are enqueued first; once every one
 * is written, the parent is enqueued with the children as its
 * dependencies (rjq_job_options.after, its after_policy as given), so it
 * runs when they finished. The parent is created last: a failure, or a
 * crash, before it leaves no parent waiting on a child that was never
 * created (the children written by then are plain jobs, run as any).
 * Called again with the same ids (every child and the parent given an
 * id), it resumes: the children that exist are reported existing, and the
 * parent is then written (or reported existing).
 * A child may have dependencies of its own (its opts->after), so deeper
 * trees are built bottom up, one level per call.
 * ---------------------------------------------------------------------- */

typedef struct rjq_flow_child {
    size_t size;                /* RJQ_FLOW_CHILD_INIT sets it */
    rjq_queue *queue;           /* the child's queue: a handle of the client (a sharded
                                 * queue's too: the child goes to its shard) */
    const void *payload;        /* len bytes, binary-safe, may be empty */
    size_t len;
    const rjq_job_options *opts; /* NULL: defaults */
} rjq_flow_child;
#define RJQ_FLOW_CHILD_INIT RJQ_SIZED_INIT_(rjq_flow_child)

/* parent: the parent's id (existed 1 when its id existed); children[i]:
 * child i's, in the order given (n of them). Both NULL on error. */
typedef void rjq_flow_cb(rjq_client *c, int status, const rjq_enqueued *parent,
                         const rjq_enqueued *children, size_t n, void *data);

/*
 * Enqueue the parent (payload, len, o: rjq_enqueue's, o->after left NULL)
 * into q after its n children (1..RJQ_AFTER_MAX). cb (may be NULL) gets
 * RJQ_OK with every id, or the first error of a child's enqueue (the
 * parent was not written), or of the parent's (as rjq_enqueue's callback
 * with dependencies: its registrations may have failed), and NULLs.
 * Returns RJQ_OK (cb will be called) or, cb not called and nothing sent:
 * RJQ_EINVAL (q NULL, n out of range, a NULL child or child queue, a
 * child queue of another client, o->after set, a child's bad options or
 * id, a struct's bad size), RJQ_ECLOSED, RJQ_ENOMEM, or the code
 * rjq_enqueue returned for the first child. A later child's enqueue
 * refused when it is called
 * (the children before it sent) ends through cb with its code, with no
 * parent. The parent's options (its headers too) are copied.
 */
RJQ_API int rjq_enqueue_flow(rjq_queue *q, const void *payload, size_t len,
                             const rjq_job_options *o, const rjq_flow_child *const *children,
                             size_t n, rjq_flow_cb *cb, void *data);

/* ------------------------------------------------------------------------
 * Deprecated names (README "Naming"): the names before the verb rule, each
 * the function it names in its message, behaving exactly as it; removed at
 * 1.0. Using one warns (-Wdeprecated-declarations).
 * BEGIN deprecated names (scripts leave this block alone)
 * ---------------------------------------------------------------------- */

RJQ_DEPRECATED("use rjq_client_count_awaits") RJQ_API size_t rjq_client_awaits(const rjq_client *c);
RJQ_DEPRECATED("use rjq_client_is_connected") RJQ_API int rjq_client_connected(const rjq_client *c);
RJQ_DEPRECATED("use rjq_client_get_data") RJQ_API void *rjq_client_data(const rjq_client *c);
RJQ_DEPRECATED("use rjq_client_get_errmsg")
RJQ_API const char *rjq_client_errmsg(const rjq_client *c);
RJQ_DEPRECATED("use rjq_client_send_to_masters")
RJQ_API int rjq_client_masters(rjq_client *c, int argc, const char *const *argv,
                               const size_t *lens, rjq_masters_cb *cb, void *data);
RJQ_DEPRECATED("use rjq_client_get_memory")
RJQ_API int rjq_client_memory(rjq_client *c, rjq_memory_cb *cb, void *data);
RJQ_DEPRECATED("use rjq_client_list_processes")
RJQ_API int rjq_client_processes(rjq_client *c, long offset, long limit, rjq_processes_cb *cb,
                                 void *data);
RJQ_DEPRECATED("use rjq_client_list_queues")
RJQ_API int rjq_client_queues(rjq_client *c, const char *after, long limit, rjq_ids_cb *cb,
                              void *data);
RJQ_DEPRECATED("use rjq_enqueued_get")
RJQ_API const rjq_enqueued *rjq_enqueued_at(const rjq_enqueued *jobs, size_t i);
RJQ_DEPRECATED("use rjq_process_get")
RJQ_API const rjq_process *rjq_process_at(const rjq_process *list, size_t i);
RJQ_DEPRECATED("use rjq_process_queue_get")
RJQ_API const rjq_process_queue *rjq_process_queue_at(const rjq_process_queue *list, size_t i);
RJQ_DEPRECATED("use rjq_schedule_info_get")
RJQ_API const rjq_schedule_info *rjq_schedule_info_at(const rjq_schedule_info *list, size_t i);
RJQ_DEPRECATED("use rjq_job_get_attempt") RJQ_API int rjq_job_attempt(const rjq_job *job);
RJQ_DEPRECATED("use rjq_job_get_id") RJQ_API const char *rjq_job_id(const rjq_job *job);
RJQ_DEPRECATED("use rjq_job_get_max_attempts") RJQ_API int rjq_job_max_attempts(const rjq_job *job);
RJQ_DEPRECATED("use rjq_job_get_notice") RJQ_API int rjq_job_notice(const rjq_job *job);
RJQ_DEPRECATED("use rjq_job_get_payload")
RJQ_API const void *rjq_job_payload(const rjq_job *job, size_t *len);
RJQ_DEPRECATED("use rjq_job_report_progress")
RJQ_API int rjq_job_progress(rjq_job *job, const void *progress, size_t len);
RJQ_DEPRECATED("use rjq_job_get_queue") RJQ_API rjq_queue *rjq_job_queue(const rjq_job *job);
RJQ_DEPRECATED("use rjq_job_get_token") RJQ_API const char *rjq_job_token(const rjq_job *job);
RJQ_DEPRECATED("use rjq_job_get_worker") RJQ_API rjq_worker *rjq_job_worker(const rjq_job *job);
RJQ_DEPRECATED("use rjq_monitor_enable_resyncs") RJQ_API int rjq_monitor_resyncs(rjq_monitor *m);
RJQ_DEPRECATED("use rjq_monitor_get_time") RJQ_API long long rjq_monitor_time(const rjq_monitor *m);
RJQ_DEPRECATED("use rjq_queue_get_client") RJQ_API rjq_client *rjq_queue_client(const rjq_queue *q);
RJQ_DEPRECATED("use rjq_queue_list_dead")
RJQ_API int rjq_queue_dead(rjq_queue *q, long offset, long limit, rjq_ids_cb *cb, void *data);
RJQ_DEPRECATED("use rjq_queue_get_job")
RJQ_API int rjq_queue_job(rjq_queue *q, const char *id, rjq_job_info_cb *cb, void *data);
RJQ_DEPRECATED("use rjq_queue_list_jobs")
RJQ_API int rjq_queue_jobs(rjq_queue *q, rjq_job_state state, long offset, long limit,
                           rjq_ids_cb *cb, void *data);
RJQ_DEPRECATED("use rjq_queue_get_name") RJQ_API const char *rjq_queue_name(const rjq_queue *q);
RJQ_DEPRECATED("use rjq_queue_get_slot") RJQ_API int rjq_queue_slot(const rjq_queue *q);
RJQ_DEPRECATED("use rjq_queue_get_stats")
RJQ_API int rjq_queue_stats(rjq_queue *q, rjq_stats_cb *cb, void *data);
RJQ_DEPRECATED("use rjq_scheduler_is_leading")
RJQ_API int rjq_scheduler_leading(const rjq_scheduler *s);
RJQ_DEPRECATED("use rjq_tls_is_available") RJQ_API int rjq_tls_available(void);
RJQ_DEPRECATED("use rjq_worker_count_running") RJQ_API int rjq_worker_running(const rjq_worker *w);

/* END deprecated names */

#ifdef __cplusplus
}
#endif
#endif /* RJQ_H */
