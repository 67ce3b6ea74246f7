/*
 * The sharded pub/sub link (shardlink.h): connect, session set-up,
 * subscriptions, liveness, reconnect with backoff, on a non-blocking
 * hiredis redisContext watched through rjq_loop_ops.watch_fd. What each
 * reply means is ssbook.c's; this file does the I/O, the timers and the
 * state.
 *
 * Re-entrancy: hooks may call anything here, rjq__shardlink_free included.
 * Every way in from the loop (the socket, the timers) counts itself in
 * `depth`; a free inside only marks the link, and the outermost way in
 * frees it on its way out. The calls of the interface never run a hook:
 * a send that fails inside them (out of memory) drops the connection from
 * the timer, at once.
 */
#include "shardlink.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core_private.h"
#include "ssbook.h"
#include "validate.h"

enum { STEP_AUTH = 1, STEP_SETNAME };

struct rjq__shardlink {
    rjq_client *c;
    char *host;
    int port;
    const rjq__shardlink_hooks *hooks;
    void *arg;
    rjq__shardlink_state state;
    redisContext *ctx;         /* CONNECTING (once the host name is resolved), SETUP, READY */
    void *lookup;              /* CONNECTING: the loop glue's lookup of a host name, pending */
    char **addrs;              /* CONNECTING: the host name's addresses, tried in turn */
    size_t naddrs, next_addr;  /* ... how many, and the next one to try */
    int resolve_inside;        /* a call marker: inside the glue's resolve hook */
    void *watch;               /* the loop's watch of ctx->fd */
    int watch_write;           /* ... for writability too */
    void *tls_session;
    unsigned gen;              /* counts contexts: a reply loop stops when it changes */
    rjq__ssbook book;
    int setup_due;             /* set-up replies due (SETUP) */
    rjq__timer timer;          /* connect timeout, reconnect, a drop asked for inside a call */
    rjq__timer ping_timer;     /* READY: liveness */
    uint64_t ping_sent_ms;     /* a PING due since then (0: none) */
    uint64_t last_rx_ms;       /* bytes last read */
    uint64_t ready_ms;
    int failures;              /* consecutive failed sessions, for the backoff */
    unsigned long attempts;
    int refused;               /* the session was refused (AUTH): keeps its backoff */
    char drop_why[RJQ__ERRMSG_MAX]; /* a drop the timer does ("" : none) */
    char why[RJQ__ERRMSG_MAX];      /* why it last went down */
    int depth;                 /* ways in from the loop under way */
    int freed;                 /* rjq__shardlink_free inside: free on the way out */
};

/* ---- state ----------------------------------------------------------------- */

static int edge_ok(rjq__shardlink_state from, rjq__shardlink_state to) {
    switch (to) {
    case RJQ__SHARDLINK_CONNECTING: return from == RJQ__SHARDLINK_IDLE || from == RJQ__SHARDLINK_BACKOFF;
    case RJQ__SHARDLINK_SETUP: return from == RJQ__SHARDLINK_CONNECTING;
    case RJQ__SHARDLINK_READY: return from == RJQ__SHARDLINK_SETUP;
    case RJQ__SHARDLINK_BACKOFF:
        return from == RJQ__SHARDLINK_CONNECTING || from == RJQ__SHARDLINK_SETUP ||
               from == RJQ__SHARDLINK_READY;
    case RJQ__SHARDLINK_IDLE: return from == RJQ__SHARDLINK_BACKOFF;
    case RJQ__SHARDLINK_CLOSED: return from != RJQ__SHARDLINK_CLOSED;
    }
    return 0;
}

static void enter(rjq__shardlink *l, rjq__shardlink_state to) {
    RJQ_ASSERT(edge_ok(l->state, to));
    /* a socket exactly while connecting, setting up or ready */
    RJQ_ASSERT(to == RJQ__SHARDLINK_CONNECTING || to == RJQ__SHARDLINK_CLOSED ||
               (to == RJQ__SHARDLINK_SETUP || to == RJQ__SHARDLINK_READY) == (l->ctx != NULL));
    l->state = to;
}

/* ---- socket ---------------------------------------------------------------- */

static void on_fd(void *arg, int readable, int writable);

static void unwatch(rjq__shardlink *l) {
    if (l->watch) l->c->ops.unwatch_fd(l->c->loop, l->watch);
    l->watch = NULL;
}

/* Watch for reading, and for writing when want_write. -1: the loop could not. */
static int watch(rjq__shardlink *l, int want_write) {
    if (l->watch && l->watch_write == want_write) return 0;
    unwatch(l);
    l->watch = l->c->ops.watch_fd(l->c->loop, l->ctx->fd, 1, want_write, on_fd, l);
    l->watch_write = want_write;
    return l->watch ? 0 : -1;
}

static void free_addrs(rjq__shardlink *l) {
    for (size_t i = 0; i < l->naddrs; i++) free(l->addrs[i]);
    free(l->addrs);
    l->addrs = NULL;
    l->naddrs = l->next_addr = 0;
}

/* The socket and hiredis context go (the lookup and addresses stay). */
static void free_ctx(rjq__shardlink *l) {
    unwatch(l); /* before the fd closes */
    if (l->ctx) redisFree(l->ctx);
    l->ctx = NULL;
    l->tls_session = NULL;
    l->gen++;
}

static void close_ctx(rjq__shardlink *l) {
    if (l->lookup) l->c->ops.resolve_cancel(l->c->loop, l->lookup);
    l->lookup = NULL;
    free_addrs(l); /* (a reconnect asks again) */
    free_ctx(l);
}

static const char *link_words(const rjq__shardlink *l, const char *otherwise) {
    return l->ctx && l->ctx->errstr[0] ? l->ctx->errstr : otherwise;
}

/* ---- loss and reconnect ------------------------------------------------------ */

static void start(rjq__shardlink *l);

static void schedule_reconnect(rjq__shardlink *l) {
    rjq_client *c = l->c;
    rjq__timer_start(c, &l->timer, rjq__reconnect_delay(c, l->failures));
}

/* The connection is gone (or never came): close it, back off, and tell
 * the owner which channels it lost. Runs hooks: from the loop only. */
static void lost(rjq__shardlink *l, const char *why, int refused) {
    rjq_client *c = l->c;
    if (l->state == RJQ__SHARDLINK_BACKOFF || l->state == RJQ__SHARDLINK_IDLE ||
        l->state == RJQ__SHARDLINK_CLOSED)
        return;
    /* (why may be the context's own words: copied before it goes) */
    if (why != l->why) snprintf(l->why, sizeof l->why, "%s", why);
    int was_ready = l->state == RJQ__SHARDLINK_READY;
    if (was_ready && !refused && rjq__now_ms() - l->ready_ms >= 1000) l->failures = 0;
    l->failures++;
    l->refused = refused;
    l->drop_why[0] = '\0';
    close_ctx(l);
    rjq__timer_stop(c, &l->ping_timer);
    l->ping_sent_ms = 0;
    enter(l, RJQ__SHARDLINK_BACKOFF);
    schedule_reconnect(l);
    rjq__errmsg(c, "sharded subscriber connection to %s:%d: %s", l->host, l->port, l->why);
    if (!was_ready) rjq__emit(c, RJQ_EVENT_ERROR, RJQ_CONN_SUBSCRIBER, c->errmsg);
    rjq__ssbook_reset(&l->book);
    rjq__ssch *e;
    while (!l->freed && l->state == RJQ__SHARDLINK_BACKOFF && (e = rjq__ssbook_lost_peek(&l->book))) {
        l->hooks->event(l, l->arg, e->name, e->len, RJQ__SHARDLINK_LOST, l->why);
        if (!l->freed) rjq__ssbook_lost_done(&l->book, e);
    }
}

/* A drop asked for where no hook may run (inside a call): the timer does it. */
static void drop_later(rjq__shardlink *l, const char *why) {
    if (l->drop_why[0]) return;
    snprintf(l->drop_why, sizeof l->drop_why, "%s", why);
    rjq__timer_start(l->c, &l->timer, 0);
}

/* ---- sending ----------------------------------------------------------------- */

/* Write what hiredis holds; wait for writability when the socket is full.
 * -1: the connection failed (words in ctx->errstr). */
static int flush(rjq__shardlink *l) {
    if (l->state == RJQ__SHARDLINK_CONNECTING) return 0; /* on writability */
    int done = 0;
    if (redisBufferWrite(l->ctx, &done) != REDIS_OK) return -1;
    return watch(l, !done);
}

/* Format and queue one command, recorded in the book. -1 when out of memory. */
static int append(rjq__shardlink *l, int kind, rjq__ssch *ch, int step, int argc, const char **argv,
                  const size_t *lens) {
    char *cmd = NULL;
    rjq__fmtlen len = redisFormatCommandArgv(&cmd, argc, argv, lens);
    if (len < 0 || cmd == NULL) return -1;
    if (rjq__ssbook_push(&l->book, kind, ch, step) != 0) {
        redisFreeCommand(cmd);
        return -1;
    }
    int rc = redisAppendFormattedCommand(l->ctx, cmd, (size_t)len);
    redisFreeCommand(cmd);
    if (rc != REDIS_OK) {
        rjq__ssbook_unpush(&l->book);
        return -1;
    }
    return 0;
}

static int send_sub(rjq__shardlink *l, rjq__ssch *e, int sub) {
    const char *argv[2] = {sub ? "SSUBSCRIBE" : "SUNSUBSCRIBE", e->name};
    size_t lens[2] = {strlen(argv[0]), e->len};
    return append(l, sub ? RJQ__SSCMD_SUB : RJQ__SSCMD_UNSUB, e, 0, 2, argv, lens);
}

typedef struct each_sub {
    rjq__shardlink *l;
    int failed;
} each_sub;

static int sub_if_needed(rjq__ssch *e, void *arg) {
    each_sub *s = arg;
    if (!rjq__ssbook_needs_sub(e)) return 0;
    if (send_sub(s->l, e, 1) != 0) {
        s->failed = 1;
        return 1;
    }
    return 0;
}

/* ---- the session ------------------------------------------------------------- */

static void on_ping_timer(rjq__timer *t);

static void become_ready(rjq__shardlink *l) {
    rjq_client *c = l->c;
    enter(l, RJQ__SHARDLINK_READY);
    l->ready_ms = rjq__now_ms();
    l->refused = 0;
    rjq__timer_stop(c, &l->timer); /* the set-up is done in time */
    if (c->ping_interval_ms > 0) rjq__timer_start(c, &l->ping_timer, (uint64_t)c->ping_interval_ms);
    each_sub s = {l, 0};
    rjq__ssbook_each(&l->book, sub_if_needed, &s);
    if (s.failed) {
        lost(l, "out of memory", 0);
        return;
    }
    if (flush(l) != 0) lost(l, link_words(l, "write failed"), 0);
}

static void on_setup_reply(rjq__shardlink *l, const rjq__ssout *o) {
    rjq_client *c = l->c;
    if (o->kind == RJQ__SSOUT_SETUP_ERROR) {
        const char *what = o->step == STEP_AUTH ? "AUTH" : "CLIENT SETNAME";
        char why[RJQ__ERRMSG_MAX];
        snprintf(why, sizeof why, "%s: %s", what, o->detail);
        int code = rjq__redis_error_code(o->detail);
        if (o->step == STEP_AUTH ? code == RJQ_EAUTH : strncmp(o->detail, "NOAUTH", 6) == 0) {
            lost(l, why, 1); /* reported there, with the server's words */
            return;
        }
        rjq__errmsg(c, "sharded subscriber connection set-up: %s", why);
        rjq__emit(c, RJQ_EVENT_ERROR, RJQ_CONN_SUBSCRIBER, c->errmsg);
    }
    if (--l->setup_due == 0) become_ready(l);
}

/* One reply. */
static void dispatch(rjq__shardlink *l, const redisReply *r) {
    rjq__ssout o;
    rjq__ssbook_reply(&l->book, r, &o);
    switch (o.kind) {
    case RJQ__SSOUT_NONE: break;
    case RJQ__SSOUT_MESSAGE:
        l->hooks->message(l, l->arg, o.channel, o.chlen, o.data, o.len);
        break;
    case RJQ__SSOUT_SUBSCRIBED:
        l->hooks->event(l, l->arg, o.channel, o.chlen, RJQ__SHARDLINK_SUBSCRIBED, NULL);
        break;
    case RJQ__SSOUT_UNSUBSCRIBED:
        l->hooks->event(l, l->arg, o.channel, o.chlen, RJQ__SHARDLINK_UNSUBSCRIBED, NULL);
        break;
    case RJQ__SSOUT_REFUSED:
        l->hooks->event(l, l->arg, o.channel, o.chlen, RJQ__SHARDLINK_REFUSED, o.detail);
        if (!l->freed) rjq__ssbook_out_done(&l->book, &o);
        break;
    case RJQ__SSOUT_PONG: l->ping_sent_ms = 0; break;
    case RJQ__SSOUT_SETUP_OK:
    case RJQ__SSOUT_SETUP_ERROR:
        if (l->state != RJQ__SHARDLINK_SETUP) {
            lost(l, "a set-up reply after the set-up", 0);
            break;
        }
        on_setup_reply(l, &o);
        break;
    default: { /* RJQ__SSOUT_PROTO */
        char why[RJQ__ERRMSG_MAX];
        snprintf(why, sizeof why, "unexpected reply: %s", o.detail);
        lost(l, why, 0);
        break;
    }
    }
}

/* Read what arrived and hand each whole reply over, until a hook frees the
 * link or the connection is gone. */
static void read_replies(rjq__shardlink *l) {
    if (redisBufferRead(l->ctx) != REDIS_OK) {
        lost(l, link_words(l, "read failed"), 0);
        return;
    }
    l->last_rx_ms = rjq__now_ms();
    unsigned gen = l->gen;
    for (;;) {
        void *reply = NULL;
        if (redisGetReplyFromReader(l->ctx, &reply) != REDIS_OK) {
            char why[RJQ__ERRMSG_MAX];
            snprintf(why, sizeof why, "protocol error: %s", link_words(l, "unreadable reply"));
            lost(l, why, 0);
            return;
        }
        if (reply == NULL) return;
        dispatch(l, reply);
        freeReplyObject(reply);
        if (l->freed || l->gen != gen) return;
    }
}

/* The TCP connect's outcome (SO_ERROR), once the socket is writable. */
static int connect_error(const rjq__shardlink *l) {
    int err = 0;
    socklen_t n = sizeof err;
    if (getsockopt(l->ctx->fd, SOL_SOCKET, SO_ERROR, &err, &n) != 0) return errno;
    return err;
}

static void destroy(rjq__shardlink *l);
static int next_addr(rjq__shardlink *l);

/* Leave a way in from the loop: a link freed inside goes now. */
static void way_out(rjq__shardlink *l) {
    if (--l->depth == 0 && l->freed) destroy(l);
}

static void on_fd(void *arg, int readable, int writable) {
    rjq__shardlink *l = arg;
    rjq_client *c = l->c;
    if (l->freed || l->ctx == NULL) return;
    rjq__enter(c);
    l->depth++;
    if (l->state == RJQ__SHARDLINK_CONNECTING) {
        int err = connect_error(l);
        if (err != 0) {
            char why[RJQ__ERRMSG_MAX];
            snprintf(why, sizeof why, "connect failed: %s", strerror(err));
            if (!next_addr(l)) lost(l, why, 0);
        } else if (writable) {
            enter(l, RJQ__SHARDLINK_SETUP);
        }
    }
    if ((l->state == RJQ__SHARDLINK_SETUP || l->state == RJQ__SHARDLINK_READY) && writable &&
        flush(l) != 0)
        lost(l, link_words(l, "write failed"), 0);
    if ((l->state == RJQ__SHARDLINK_SETUP || l->state == RJQ__SHARDLINK_READY) && readable &&
        !l->freed)
        read_replies(l);
    way_out(l);
    rjq__leave(c);
}

/* Connect to ip (an address): TLS, the set-up commands, the watch. From
 * start or from the glue's lookup (maybe inside its resolve hook, maybe
 * inside a call of the interface): no hook runs here. Returns -1 when the
 * TCP connect failed at once (words in why: the caller tries another
 * address or drops the link), else 0 (any other failure: a drop is due). */
static int connect_ip(rjq__shardlink *l, const char *ip, char *why, size_t size) {
    rjq_client *c = l->c;
#if RJQ_HIREDIS_AT_LEAST(1, 0)
    redisOptions opt;
    memset(&opt, 0, sizeof opt);
    REDIS_OPTIONS_SET_TCP(&opt, ip, l->port);
    opt.options |= REDIS_OPT_NONBLOCK;
    l->ctx = redisConnectWithOptions(&opt);
#else
    l->ctx = redisConnectNonBlock(ip, l->port);
#endif
    if (l->ctx && l->ctx->err) {
        snprintf(why, size, "connect failed: %s", l->ctx->errstr);
        return -1;
    }
    why[0] = '\0';
    if (l->ctx == NULL) snprintf(why, size, "out of memory");
    if (!why[0]) (void)redisEnableKeepAlive(l->ctx), l->ctx->err = 0;
    if (!why[0] && c->tls &&
        rjq__tls_start(c->tls, l->ctx, l->host, &l->tls_session, why, size) != RJQ_OK)
        l->tls_session = NULL;
    if (!why[0] && c->url.password) {
        const char *argv[3] = {"AUTH", c->url.user ? c->url.user : c->url.password, c->url.password};
        int argc = c->url.user ? 3 : 2;
        if (append(l, RJQ__SSCMD_SETUP, NULL, STEP_AUTH, argc, argv, NULL) != 0)
            snprintf(why, size, "out of memory");
        else l->setup_due++;
    }
    if (!why[0]) {
        char name[200];
        snprintf(name, sizeof name, "%s:ssub", c->name);
        const char *argv[3] = {"CLIENT", "SETNAME", name};
        if (append(l, RJQ__SSCMD_SETUP, NULL, STEP_SETNAME, 3, argv, NULL) != 0)
            snprintf(why, size, "out of memory");
        else l->setup_due++;
    }
    if (!why[0] && watch(l, 1) != 0) snprintf(why, size, "the loop cannot watch the socket");
    if (why[0]) drop_later(l, why); /* (maybe inside a call: no hook here) */
    return 0;
}

/* Connect to the host name's next address that a connect does not refuse
 * at once, each with the whole connect timeout (hiredis tries each
 * address in turn too); none left: a drop is due. No hook runs here.
 * Returns 0 when no address was left to try. */
static int next_addr(rjq__shardlink *l) {
    if (l->next_addr >= l->naddrs) return 0;
    char why[RJQ__ERRMSG_MAX] = "no address";
    while (l->next_addr < l->naddrs) {
        free_ctx(l);
        rjq__ssbook_reset(&l->book); /* (only set-up steps were due: nothing is lost) */
        l->setup_due = 0;
        rjq__timer_start(l->c, &l->timer, (uint64_t)l->c->connect_timeout_ms);
        if (connect_ip(l, l->addrs[l->next_addr++], why, sizeof why) == 0) return 1;
    }
    drop_later(l, why);
    return 1;
}

/* The glue's answer for the host name: connect to its addresses in turn
 * (a reconnect asks again), or report why there is none. */
static void on_resolved(void *arg, const char *error, const char *const *addrs, size_t n) {
    rjq__shardlink *l = arg;
    rjq_client *c = l->c;
    if (l->state != RJQ__SHARDLINK_CONNECTING || l->ctx != NULL || l->freed) return;
    l->lookup = NULL;
    int inside = l->resolve_inside;
    if (!inside) rjq__enter(c), l->depth++;
    if (error || n == 0 || addrs == NULL || addrs[0] == NULL) {
        char why[RJQ__ERRMSG_MAX];
        snprintf(why, sizeof why, "cannot resolve %s: %s", l->host, error ? error : "no address");
        drop_later(l, why);
    } else {
        size_t k = 0;
        l->addrs = calloc(n, sizeof *l->addrs);
        for (; l->addrs && k < n && addrs[k] != NULL; k++)
            if ((l->addrs[k] = strdup(addrs[k])) == NULL) break;
        l->naddrs = l->addrs ? k : 0;
        if (l->addrs == NULL || (k < n && addrs[k] != NULL)) drop_later(l, "out of memory");
        else next_addr(l);
    }
    if (!inside) way_out(l), rjq__leave(c); /* (l may be gone) */
}

/* A new connection: the host name looked up by the loop glue (never
 * blocking the loop: hiredis would call getaddrinfo), then connect_ip. */
static void start(rjq__shardlink *l) {
    rjq_client *c = l->c;
    enter(l, RJQ__SHARDLINK_CONNECTING);
    l->attempts++;
    l->setup_due = 0;
    l->last_rx_ms = rjq__now_ms();
    rjq__timer_start(c, &l->timer, (uint64_t)c->connect_timeout_ms);
    int numeric = rjq__url_is_address(l->host);
    if (numeric || strcmp(l->host, "localhost") == 0) {
        char why[RJQ__ERRMSG_MAX];
        if (connect_ip(l, numeric ? l->host : "127.0.0.1", why, sizeof why) != 0) drop_later(l, why);
        return;
    }
    if (c->ops.resolve == NULL) {
        char why[RJQ__ERRMSG_MAX];
        snprintf(why, sizeof why, RJQ__NO_RESOLVE_FMT, l->host);
        drop_later(l, why);
        return;
    }
    l->resolve_inside = 1;
    void *h = c->ops.resolve(c->loop, l->host, on_resolved, l);
    l->resolve_inside = 0;
    /* (done may have been called inside: then ctx is set or a drop is due) */
    if (l->state == RJQ__SHARDLINK_CONNECTING && l->ctx == NULL && !l->drop_why[0]) l->lookup = h;
}

static void on_timer(rjq__timer *t) {
    rjq__shardlink *l = t->owner;
    l->depth++;
    if (l->drop_why[0]) {
        char why[RJQ__ERRMSG_MAX];
        snprintf(why, sizeof why, "%s", l->drop_why);
        l->drop_why[0] = '\0';
        lost(l, why, 0);
    } else if (l->state == RJQ__SHARDLINK_BACKOFF) {
        if (l->book.nwanted == 0) enter(l, RJQ__SHARDLINK_IDLE);
        else start(l);
    } else if (l->state == RJQ__SHARDLINK_CONNECTING) {
        if (!next_addr(l)) lost(l, "connect timed out", 0);
    } else if (l->state == RJQ__SHARDLINK_SETUP) {
        lost(l, "session set-up timed out", 0);
    }
    way_out(l);
}

static void on_ping_timer(rjq__timer *t) {
    rjq__shardlink *l = t->owner;
    rjq_client *c = l->c;
    if (l->state != RJQ__SHARDLINK_READY) return;
    l->depth++;
    if (l->ping_sent_ms && l->last_rx_ms < l->ping_sent_ms) {
        lost(l, "no answer to PING", 0);
    } else {
        if (l->ping_sent_ms == 0) {
            const char *argv[1] = {"PING"};
            if (append(l, RJQ__SSCMD_PING, NULL, 0, 1, argv, NULL) != 0) lost(l, "out of memory", 0);
            else if (flush(l) != 0) lost(l, link_words(l, "write failed"), 0);
            else l->ping_sent_ms = rjq__now_ms();
        }
        if (l->state == RJQ__SHARDLINK_READY)
            rjq__timer_start(c, &l->ping_timer, (uint64_t)c->ping_interval_ms);
    }
    way_out(l);
}

/* ---- the interface ------------------------------------------------------------ */

int rjq__shardlink_new(rjq_client *c, const char *host, int port, const rjq__shardlink_hooks *hooks,
                       void *arg, rjq__shardlink **out) {
    *out = NULL;
    if (c->ops.watch_fd == NULL || c->ops.unwatch_fd == NULL) {
        rjq__errmsg(c, "sharded pub/sub needs the loop glue's watch_fd and unwatch_fd hooks "
                       "(rjq_loop_ops)");
        return RJQ_EINVAL;
    }
    if (hooks == NULL || hooks->message == NULL || hooks->event == NULL || host == NULL ||
        port <= 0 || port > 65535)
        return RJQ_EINVAL;
    rjq__shardlink *l = calloc(1, sizeof *l);
    if (l == NULL) return RJQ_ENOMEM;
    l->host = strdup(host);
    if (l->host == NULL) {
        free(l);
        return RJQ_ENOMEM;
    }
    if (rjq__timer_setup(c, &l->timer, on_timer, l) != RJQ_OK) {
        free(l->host);
        free(l);
        return RJQ_ENOMEM;
    }
    if (rjq__timer_setup(c, &l->ping_timer, on_ping_timer, l) != RJQ_OK) {
        rjq__timer_teardown(c, &l->timer);
        free(l->host);
        free(l);
        return RJQ_ENOMEM;
    }
    l->c = c;
    l->port = port;
    l->hooks = hooks;
    l->arg = arg;
    l->state = RJQ__SHARDLINK_IDLE;
    rjq__ssbook_init(&l->book);
    *out = l;
    return RJQ_OK;
}

static void destroy(rjq__shardlink *l) {
    rjq_client *c = l->c;
    close_ctx(l);
    rjq__timer_teardown(c, &l->timer);
    rjq__timer_teardown(c, &l->ping_timer);
    rjq__ssbook_free(&l->book);
    free(l->host);
    free(l);
}

void rjq__shardlink_free(rjq__shardlink *l) {
    if (l == NULL || l->freed) return;
    if (l->state != RJQ__SHARDLINK_CLOSED) enter(l, RJQ__SHARDLINK_CLOSED);
    if (l->depth > 0) {
        l->freed = 1;
        unwatch(l); /* no more socket events */
        rjq__timer_stop(l->c, &l->timer);
        rjq__timer_stop(l->c, &l->ping_timer);
        return;
    }
    destroy(l);
}

int rjq__shardlink_subscribe(rjq__shardlink *l, const char *channel, size_t len) {
    if (channel == NULL || len == 0 || len > RJQ__SSCH_MAX) return RJQ_EINVAL;
    if (l->freed) return RJQ_ECLOSED;
    rjq__ssch *e = rjq__ssbook_want(&l->book, channel, len);
    if (e == NULL) return RJQ_ENOMEM;
    if (l->state == RJQ__SHARDLINK_IDLE) {
        start(l);
        return RJQ_OK;
    }
    if (l->state != RJQ__SHARDLINK_READY || l->drop_why[0] || !rjq__ssbook_needs_sub(e))
        return RJQ_OK;
    if (send_sub(l, e, 1) != 0) drop_later(l, "out of memory"); /* subscribed after it */
    else if (flush(l) != 0) drop_later(l, link_words(l, "write failed"));
    return RJQ_OK;
}

int rjq__shardlink_unsubscribe(rjq__shardlink *l, const char *channel, size_t len) {
    if (l->freed || channel == NULL) return RJQ_OK;
    rjq__ssch *e = rjq__ssbook_find(&l->book, channel, len);
    if (e == NULL || !e->wanted) return RJQ_OK;
    int due = rjq__ssbook_unwant(&l->book, e);
    if (!due) return RJQ_OK;
    /* the server has it (READY: nothing is sent before): SUNSUBSCRIBE, or
     * a new connection without it */
    if (l->drop_why[0]) return RJQ_OK;
    if (send_sub(l, e, 0) != 0) drop_later(l, "out of memory");
    else if (flush(l) != 0) drop_later(l, link_words(l, "write failed"));
    return RJQ_OK;
}

rjq__shardlink_state rjq__shardlink_get_state(const rjq__shardlink *l) {
    return l->state;
}

int rjq__shardlink_channel_state(const rjq__shardlink *l, const char *channel, size_t len) {
    return rjq__ssbook_state(&l->book, channel, len);
}

const char *rjq__shardlink_why(const rjq__shardlink *l) {
    return l->why;
}

unsigned long rjq__shardlink_attempts(const rjq__shardlink *l) {
    return l->attempts;
}
