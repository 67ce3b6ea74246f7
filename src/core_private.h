/*
 * The core's private header: the struct bodies shared by the core's own
 * files (runtime.c, conn.c, the request layer, pubsub.c, client.c). Features
 * include core.h, never this.
 *
 * Inside the core, calls go one way only:
 *     client.c, liveness.c -> request.c, pubsub.c -> route.c -> conn.c -> runtime.c
 * (route.c: which command connection a slot's request goes to, on a Redis
 * Cluster; the request layer's hooks hear of a new slot table)
 * Upward notifications (a connection is ready, lost, wants its owner's
 * set-up steps) go through rjq__conn_hooks, which request.c (command
 * connection) and pubsub.c (subscriber connection) register; the deferred
 * free goes through rjq_client.destroy, which client.c sets.
 */
#ifndef RJQ_CORE_PRIVATE_H
#define RJQ_CORE_PRIVATE_H

#include <hiredis/async.h>

#include "compat.h"
#include "core.h"
#include "tls.h"
#include "url.h"

#define RJQ__ERRMSG_MAX 256
#define RJQ__FEATURES_MAX 12
/* Why a host name cannot be connected to (conn.c, shardlink.c): the loop
 * glue has no resolve hook. A format: the name. */
#define RJQ__NO_RESOLVE_FMT \
    "cannot resolve %s: the loop glue has no resolve hook (rjq_libevent_client_new_dns)"

/* ---- connections (conn.c) ------------------------------------------------ */

typedef struct rjq__conn rjq__conn;

/* What a connection tells the layer that owns it (request.c for the
 * command connection, pubsub.c for the subscriber connection). */
typedef struct rjq__conn_hooks {
    /* A new context: send the owner's set-up steps (rjq__conn_step) or
     * commands. Non-zero: it could not (out of memory): drop and retry. */
    int (*setup)(rjq__conn *conn);
    /* Every set-up step was answered: the session is usable. */
    void (*ready)(rjq__conn *conn);
    /* The context is gone. fail: 0 when requests waiting for the session
     * may keep waiting (it had connected), else the code to fail the
     * waiting ones with (RJQ_ECONN: the connect attempt failed: the
     * non-retryable ones; RJQ_EREDIS: the session was refused; RJQ_EAUTH:
     * refused for a permission (a refused AUTH, a NOPERM that ended the
     * session), which is final: every waiting one). why: the server's or
     * hiredis' words. */
    void (*down)(rjq__conn *conn, int fail, const char *why);
} rjq__conn_hooks;

/* A connection's (a node link's) state: one value, changed only by
 * conn.c's link_enter, which asserts the edge (docs/cluster.md 3.2):
 *   IDLE       -> RESOLVING, CONNECTING, BACKOFF (a connect that failed at once)
 *   RESOLVING  -> CONNECTING, BACKOFF
 *   CONNECTING -> SETUP, BACKOFF
 *   SETUP      -> READY, BACKOFF
 *   READY      -> BACKOFF
 *   BACKOFF    -> RESOLVING, CONNECTING, BACKOFF (the next address, a failure reported late)
 *   any        -> RETIRED (closed: the client goes, or the node left the table)
 */
typedef enum rjq__link_state {
    RJQ__LINK_IDLE,       /* made, never started: no socket */
    RJQ__LINK_RESOLVING,  /* a host name lookup (or the sentinels' answer) in flight */
    RJQ__LINK_CONNECTING, /* TCP (and TLS) connect in flight, connect timer armed */
    RJQ__LINK_SETUP,      /* connected; set-up replies (AUTH, HELLO, SETNAME, ...) pending */
    RJQ__LINK_READY,      /* the session is set: requests flow */
    RJQ__LINK_BACKOFF,    /* no context; the timer does what `backoff` says */
    RJQ__LINK_RETIRED,    /* closed: nothing more happens on it */
} rjq__link_state;

/* Why a link is in BACKOFF: what its timer will do. */
typedef enum rjq__backoff_why {
    RJQ__BACKOFF_LOST,       /* lost (or never up): reconnect after the backoff */
    RJQ__BACKOFF_TIMED_OUT,  /* the same, dropped for want of a reply (liveness.c):
                                its requests in flight end with RJQ_ETIMEDOUT */
    RJQ__BACKOFF_NEXT_ADDR,  /* an address failed: try the next one now */
    RJQ__BACKOFF_FAILED_NOW, /* a connect failed synchronously: report it from the timer */
} rjq__backoff_why;

struct rjq__conn {
    rjq_client *c;
    int kind;                 /* RJQ_CONN_COMMAND or RJQ_CONN_SUBSCRIBER */
    const rjq__conn_hooks *hooks;
    rjq__link_state state;    /* link_enter (conn.c) is the one place it changes */
    rjq__backoff_why backoff; /* in BACKOFF: why, and what the timer does */
    redisAsyncContext *ac;    /* NULL unless CONNECTING, SETUP or READY */
    int setup_pending;        /* in SETUP (and CONNECTING): set-up replies still expected */
    int fcall;                /* a command session with rjq's function library (scripts.c) */
    int failures;             /* consecutive failed attempts, for backoff */
    uint64_t last_io_ms;      /* when the context last gave us a reply */
    /* a reply arriving (liveness.c): the reader's state when last looked
     * at, and when it was last seen to change while a reply was under way */
    size_t rx_len, rx_pos;
    uint64_t rx_ms;
    uint64_t ready_ms;        /* when its session was last set */
    rjq__timer timer;         /* connect and set-up timeout, or what BACKOFF says */
    char failed_now[RJQ__ERRMSG_MAX]; /* a connect that failed synchronously, to report */
    void *tls_session;        /* the context's TLS session (tls.c); NULL: plain */
    /* a host name's addresses, resolved again for every attempt */
    int resolve_inside;       /* a call marker, not a state: inside the glue's resolve hook */
    void *lookup;             /* RESOLVING: the lookup's handle */
    char **addrs;             /* this attempt's addresses, tried in turn */
    size_t naddrs, next_addr;
    int addr_port;            /* their port (Sentinel, a cluster node); 0: the URL's */
    /* where it goes: a node of a cluster (route.c); NULL: the URL's host
     * (or its seed list, tried in turn from `seed`) */
    char *host;
    int port, numeric;
    size_t seed;              /* the URL's seed this attempt goes to */
    int want_port;            /* the port of the host being resolved; 0: the URL's */
};

/* The session is set: requests may be sent. */
static inline int rjq__conn_ready(const rjq__conn *conn) {
    return conn->state == RJQ__LINK_READY;
}
/* It went down for want of a reply (its requests end with RJQ_ETIMEDOUT). */
static inline int rjq__conn_timed_out(const rjq__conn *conn) {
    return conn->state == RJQ__LINK_BACKOFF && conn->backoff == RJQ__BACKOFF_TIMED_OUT;
}

/* The reply to one set-up step (NULL never: a lost context ends it). */
typedef void rjq__step_fn(rjq__conn *conn, redisReply *reply, void *arg);

int rjq__conn_init(rjq_client *c, rjq__conn *conn, int kind, const rjq__conn_hooks *hooks);
/* Aim a connection not started yet at host:port (a cluster node) instead
 * of the URL's host. RJQ_OK or RJQ_ENOMEM. */
int rjq__conn_aim(rjq__conn *conn, const char *host, int port, int numeric);
/* The address of the server it is connected (or connecting) to, or NULL. */
const char *rjq__conn_address(const rjq__conn *conn);
void rjq__conn_start(rjq__conn *conn);
/* Send one session set-up step on the new context (from the setup hook or
 * from a step's reply): the session is ready when every step is answered. */
int rjq__conn_step(rjq__conn *conn, rjq__step_fn *fn, void *arg, int argc, const char **argv,
                   const size_t *lens);
/* Say what went wrong in a set-up step (an RJQ_EVENT_ERROR event). */
void rjq__conn_report(rjq__conn *conn, const char *what, const char *err);
/* An optional set-up step failed: reported; NOAUTH refuses the session
 * (it wants AUTH), anything else leaves it usable. */
void rjq__conn_step_failed(rjq__conn *conn, const char *what, const char *err);
/* A set-up step was refused so that nothing may run on this session
 * (AUTH, SELECT): drop it, fail what waits with code, retry later. */
void rjq__conn_refuse(rjq__conn *conn, int code);
/* The hiredis context is gone or going (its callbacks saw NULL); stop
 * using it and schedule a reconnect. Idempotent. */
void rjq__conn_lost(rjq__conn *conn, const char *why);
/* Drop a live context ourselves (outside or inside its callbacks). */
void rjq__conn_drop(rjq__conn *conn, const char *why);
/* The same for want of a reply (liveness.c): its requests in flight end
 * with RJQ_ETIMEDOUT (rjq__conn_timed_out). */
void rjq__conn_drop_timed_out(rjq__conn *conn, const char *why);
/* 1 when the connection is up (or connecting) to ip:port. */
int rjq__conn_is_at(const rjq__conn *conn, const char *ip, int port);
/* Detach and free the context for client destruction. */
void rjq__conn_close(rjq__conn *conn);

/* ---- routing by slot (route.c) ------------------------------------------- */

typedef struct rjq__route rjq__route;
struct rjq__node_addr;

/* (RJQ__ROUTE_* and rjq__route_mode: core.h) */

/* Set the routing up: new node links get `hooks` (the request layer's
 * command connection hooks); `changed` hears that the slot table moved
 * slots (requests waiting for a node may go elsewhere now). */
int rjq__route_init(rjq_client *c, const rjq__conn_hooks *hooks, void (*changed)(rjq_client *c));
/* Client destruction: close every node link (in-flight replies reach
 * their requests as for c->cmd), then free it all. */
void rjq__route_free(rjq_client *c);
/* The command connection for a request of slot (-1: slot-less: the seed's
 * when it is up, else any up one): c->cmd unless on a cluster; a node link
 * is made and started on first use. Never NULL. */
rjq__conn *rjq__route_link(rjq_client *c, int slot);
/* The node link to a (made and started on first use); NULL: out of memory
 * or an unreachable endpoint ("?"). */
rjq__conn *rjq__route_link_at(rjq_client *c, const struct rjq__node_addr *a);
/* Call fn on c->cmd and on every node link not retired. */
void rjq__route_each(rjq_client *c, void (*fn)(rjq__conn *conn, void *arg), void *arg);
/* The seed's set-up step (the request layer's setup hook calls it). */
int rjq__route_setup(rjq__conn *conn);
/* A command connection is ready: a refresh waiting for one goes. */
void rjq__route_ready(rjq__conn *conn);
/* Ask for a refresh of the slot table (rate-limited; no-op unless cluster). */
void rjq__route_refresh(rjq_client *c);
/* A MOVED: the slot is at a from now on; a refresh follows. */
void rjq__route_moved(rjq_client *c, int slot, const struct rjq__node_addr *a);
/* The order of a slot's requests: 1 when a request of slot going to `to`
 * must wait (others of the slot are in flight elsewhere). */
int rjq__route_hold(const rjq_client *c, int slot, const rjq__conn *to);
/* A request of slot was sent on `on`: 1 when it is counted (answered must
 * then be called once for it). */
int rjq__route_sent(rjq_client *c, int slot, rjq__conn *on);
/* A counted request of slot was answered (or lost): 1 when it was the last
 * of its slot in flight. */
int rjq__route_answered(rjq_client *c, int slot);

/* What pubsub.c registers with route (so route never calls it by name). */
struct rjq__shardlink;
struct rjq__shardlink_hooks;
typedef struct rjq__route_sub_hooks {
    const struct rjq__shardlink_hooks *link; /* for every sharded link (arg: the client) */
    void (*mode)(rjq_client *c);  /* the mode became known (standalone or cluster) */
    void (*moved)(rjq_client *c); /* a refresh read a new slot table */
} rjq__route_sub_hooks;
void rjq__route_set_sub_hooks(rjq_client *c, const rjq__route_sub_hooks *h);
/* The sharded pub/sub link of the master of slot (made on first use,
 * beside the master's command link; freed with the route). NULL with *rc
 * RJQ_OK: not a cluster, or no owner known yet (a refresh is due); NULL
 * with *rc < 0: RJQ_ENOMEM, or RJQ_EINVAL from rjq__shardlink_new (the
 * loop glue has no watch_fd: errmsg says so). */
struct rjq__shardlink *rjq__route_sublink(rjq_client *c, int slot, int *rc);

/* ---- requests (request.c; the request layer's own files share
 * request_private.h) ------------------------------------------------------ */

typedef struct rjq__req rjq__req;

typedef struct rjq__reqlist {
    rjq__req *head, *tail;
    size_t n;
} rjq__reqlist;

int rjq__requests_init(rjq_client *c);
/* When the oldest request in flight on `on` was sent (0: none there). */
uint64_t rjq__requests_oldest_sent_on(const rjq_client *c, const rjq__conn *on);
/* A plain command sent on `on` only (the watchdog's ping of a cluster
 * master's connection); RJQ_ECONN to fn if its node left the cluster. */
int rjq__command_on(rjq_client *c, rjq__conn *on, rjq__reply_fn *fn, void *priv, int argc,
                    const char **argv, const size_t *lens);
/* End the requests that have waited for a connection since before
 * `made_before` and may not be re-sent, with RJQ_ETIMEDOUT. */
void rjq__requests_expire(rjq_client *c, uint64_t made_before);
/* Requests not yet answered (in flight, waiting for a connection or for
 * another try). */
size_t rjq__requests_pending(const rjq_client *c);
/* Client destruction: fail every request with RJQ_ECANCELED (in-flight
 * ones are orphaned until hiredis hands them back). */
void rjq__requests_cancel_all(rjq_client *c);

/* ---- channels (pubsub.c) -------------------------------------------------- */

typedef struct rjq__channel rjq__channel;

int rjq__pubsub_init(rjq_client *c);
void rjq__pubsub_free(rjq_client *c);

/* ---- liveness (liveness.c) ------------------------------------------------ */

/* Replace the server-time estimate with this sample (runtime.c). */
void rjq__server_time_rebase(rjq_client *c, long long server_ms);
/* The wait before a reconnect after `failures` failed attempts in a row
 * (runtime.c): reconnect_min_ms doubled per failure up to reconnect_max_ms,
 * with jitter (half of it, plus up to the other half). */
uint64_t rjq__reconnect_delay(rjq_client *c, int failures);
/* The watchdog of both connections (command timeout, probes). */
int rjq__liveness_init(rjq_client *c); /* its timer goes with the heap */

/* ---- the client (runtime.c, client.c) ------------------------------------ */

/* What rjq_client_get_errmsg(NULL) says after a failed rjq_client_new_io()
 * (client.c; ioglue.c makes that client). */
void rjq__client_new_failed(const char *why);

typedef struct rjq__feature_reg {
    const rjq__feature *f;
    void *state;
} rjq__feature_reg;

struct rjq_client {
    rjq_loop_ops ops;
    void *loop;
    /* rjq_io_ops' glue (ioglue.c): writes what the timers queued, at the
     * end of rjq_client_handle_timeout(); NULL on rjq_loop_ops */
    void (*after_timers)(rjq_client *c);
    rjq__url url;
    rjq__tls *tls;            /* NULL: plain TCP */
    char *sentinel_user, *sentinel_password; /* the sentinels' own AUTH */
    size_t sentinel_first;    /* the sentinel that answered last (sentinel.c) */
    struct rjq__sentinel_watch *sentinel_watch; /* +switch-master (client.c) */
    char *prefix;
    char *name;
    long connect_timeout_ms, reconnect_min_ms, reconnect_max_ms;
    long command_timeout_ms;  /* 0: off */
    long ping_interval_ms;    /* 0: off */
    long liveness_ms;         /* of the liveness entry (upkeep.c); 0: off */
    int wait_replicas;        /* WAIT for this many after durable writes; 0: none */
    long wait_timeout_ms;
    int write_short;          /* set while a short durable write is delivered */
    struct wait_slot *open_wait;  /* the WAITs durable writes join, one per connection (durable.c) */
    struct wait_slot *sent_waits; /* WAITs sent, not answered */
    rjq__timer wait_timer;    /* sends open_wait */
    char id[RJQ__CLIENT_ID_LEN + 1]; /* the client's random id (tokens, channels) */
    size_t max_payload;
    rjq_event_cb *on_event;
    void *event_data;
    void *data;

    rjq__conn cmd, sub;
    rjq__route *route;        /* routing by slot (route.c) */
    rjq__reqlist inflight;    /* sent on cmd.ac, reply pending */
    rjq__reqlist backlog;     /* waiting for a command connection */
    rjq__reqlist room;        /* waiting for hiredis' output to shrink (request.c) */
    rjq__reqlist later;       /* idempotent requests to re-send after a transient error */
    rjq__timer retry_timer;   /* when `later` goes out */
    rjq__timer room_timer;    /* looks for room while `room` waits */
    uint64_t room_poll_ms;    /* ... this often: longer while nothing is written */
    size_t room_seen;         /* the unwritten output it saw last */
    uint64_t req_order;       /* the last request's number (their order) */
    uint64_t retry_wait_ms;   /* the next wait of `later` (shared backoff) */
    int sending_later;        /* on_retry_timer is sending `later` */
    rjq__channel *channels;
    struct rjq__sent_list *sub_sent; /* SUBSCRIBEs not yet confirmed (pubsub.c) */
    struct redisReply *msg_body;     /* the message a sole listener hears (rjq__message_reply) */
    rjq__timer resub_timer;   /* tries refused channels again (pubsub.c) */
    rjq__timer watchdog;      /* liveness.c */
    char live_channel[256];   /* the subscriber connection's probe channel */
    uint64_t probe_sent_ms;   /* a probe went out then, not yet heard (0: none) */

    rjq__feature_reg features[RJQ__FEATURES_MAX];
    int nfeatures;
    int flush_wanted;         /* run before_send hooks ahead of the next request */

    rjq__timers timers;
    uint64_t armed_due;       /* what set_timer was last asked for */
    int depth;                /* nesting of library entry points */
    int free_pending;         /* rjq_client_free() called inside a callback */
    int closing;              /* destruction under way */
    void (*destroy)(rjq_client *c); /* client.c's teardown, for the deferred free */

    /* a graceful close (client.c) */
    int draining;
    int drain_done;           /* it decided to free: the report is final */
    uint64_t drain_deadline;  /* running jobs are handed back then */
    uint64_t drain_give_up;   /* 0 before the deadline; then: free regardless */
    rjq__timer drain_timer;
    rjq_closed_cb *close_cb;
    void *close_data;
    rjq_close_report close_report;

    /* the server's clock (runtime.c): offsets server ms - local ms */
    int have_offset;
    long long offset_cur, offset_prev; /* largest of this window, of the last */
    uint64_t offset_window;   /* when this window began (local ms) */
    int rebase_wanted, rebase_sent; /* rjq__server_time_doubt: a TIME to replace it */

    uint64_t rng;             /* xorshift state for tokens and jitter */
    char errmsg[RJQ__ERRMSG_MAX];
};

void rjq__emit(rjq_client *c, rjq_event ev, int conn, const char *detail);
/* Run the features' hooks (see rjq__feature). */
void rjq__features_ready(rjq_client *c, int kind);
void rjq__features_before_send(rjq_client *c, int slot, int link);
void rjq__features_abort(rjq_client *c);
void rjq__features_cancel(rjq_client *c);
void rjq__features_close(rjq_client *c);
void rjq__features_drain(rjq_client *c);
size_t rjq__features_busy(rjq_client *c);
size_t rjq__features_hand_back(rjq_client *c);

#endif /* RJQ_CORE_PRIVATE_H */
