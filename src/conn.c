/*
 * The client's two connections: connect, session set-up, reconnect with
 * capped exponential backoff, connect timeout. A connection knows nothing
 * of requests or channels: the layer that owns it (request.c, pubsub.c)
 * adds its own set-up steps and hears about readiness and loss through
 * rjq__conn_hooks.
 *
 * Set-up: a refused AUTH (wrong password, NOPERM) or SELECT makes the
 * session unusable (commands would fail, or worse, run in database 0). Every other step
 * (CLIENT SETNAME, the owner's steps) may fail without making the session
 * unusable: a user without +@connection gets NOPERM on CLIENT SETNAME and
 * still has a working session. Which step failed decides, not the error's
 * class; the one exception is NOAUTH, which a server that wants AUTH gives
 * to every command of a session that sent none: the session is refused.
 *
 * Liveness: TCP keepalive is on; connect_timeout_ms covers the TCP connect
 * and the whole session set-up (a server that accepts but never answers,
 * SIGSTOPped say, is dropped too); liveness.c watches a ready connection.
 *
 * hiredis rules this file follows (the 0.14.1 / 1.x differences):
 * - attach to the loop before setting callbacks or sending (1.x arms
 *   nothing otherwise);
 * - never free a context inside its connect or disconnect callback, nor
 *   after a failed connect (hiredis frees it);
 * - 0.14.1 has no async timeouts, so the connect timeout is our timer;
 * - every callback may see a NULL reply when the context goes away.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_private.h"
#include "replyarena.h"
#include "sentinel.h"
#include "validate.h"

static const char *kind_name(const rjq__conn *conn) {
    return conn->kind == RJQ_CONN_COMMAND ? "command" : "subscriber";
}

/* ---- the state ------------------------------------------------------------- */

static int legal_edge(rjq__link_state from, rjq__link_state to) {
    if (to == RJQ__LINK_RETIRED) return 1;
    switch (from) {
    case RJQ__LINK_IDLE:
        return to == RJQ__LINK_RESOLVING || to == RJQ__LINK_CONNECTING || to == RJQ__LINK_BACKOFF;
    case RJQ__LINK_RESOLVING:
        return to == RJQ__LINK_CONNECTING || to == RJQ__LINK_BACKOFF;
    case RJQ__LINK_CONNECTING:
        return to == RJQ__LINK_SETUP || to == RJQ__LINK_BACKOFF;
    case RJQ__LINK_SETUP:
        return to == RJQ__LINK_READY || to == RJQ__LINK_BACKOFF;
    case RJQ__LINK_READY:
        return to == RJQ__LINK_BACKOFF;
    case RJQ__LINK_BACKOFF:
        return to == RJQ__LINK_RESOLVING || to == RJQ__LINK_CONNECTING || to == RJQ__LINK_BACKOFF;
    case RJQ__LINK_RETIRED:
        return 0;
    }
    return 0;
}

/* The one place a link's state changes: asserts the edge (core_private.h)
 * and that a context exists exactly in the states that have one, and does
 * the entry work: BACKOFF records why (the timer reads it), READY stops
 * the set-up timer and notes when. */
static void link_enter(rjq__conn *conn, rjq__link_state to, rjq__backoff_why why) {
    RJQ_ASSERT(legal_edge(conn->state, to));
    conn->state = to;
    if (to == RJQ__LINK_BACKOFF) conn->backoff = why;
    if (to == RJQ__LINK_READY) {
        conn->ready_ms = rjq__now_ms(); /* failures reset once it stays up (lost) */
        rjq__timer_stop(conn->c, &conn->timer); /* the set-up is done in time */
    }
    RJQ_ASSERT((conn->ac != NULL) == (to == RJQ__LINK_CONNECTING || to == RJQ__LINK_SETUP ||
                                      to == RJQ__LINK_READY) ||
               to == RJQ__LINK_RETIRED);
}

/* ---- set-up steps ----------------------------------------------------------- */

typedef struct step {
    rjq__conn *conn;
    rjq__step_fn *fn;
    void *arg;
} step;

static void step_done(rjq__conn *conn) {
    rjq_client *c = conn->c;
    if (--conn->setup_pending == 0 && conn->ac &&
        (conn->state == RJQ__LINK_SETUP || conn->state == RJQ__LINK_CONNECTING)) {
        if (conn->state == RJQ__LINK_CONNECTING) link_enter(conn, RJQ__LINK_SETUP, 0);
        link_enter(conn, RJQ__LINK_READY, 0);
        conn->hooks->ready(conn);
        rjq__emit(c, RJQ_EVENT_CONNECTED, conn->kind, kind_name(conn));
        rjq__features_ready(c, conn->kind);
    }
}

static void on_step_reply(redisAsyncContext *ac, void *reply, void *priv) {
    step *s = priv;
    rjq__conn *conn = s->conn;
    /* closed, or lost (the loss is handled by the disconnect callback) */
    if (ac->data == NULL || reply == NULL || conn->ac != ac) {
        free(s);
        return;
    }
    rjq_client *c = conn->c;
    rjq__enter(c);
    conn->last_io_ms = rjq__now_ms();
    s->fn(conn, reply, s->arg);
    free(s);
    if (conn->ac == ac) step_done(conn); /* unless the step refused the session */
    rjq__leave(c);
}

int rjq__conn_step(rjq__conn *conn, rjq__step_fn *fn, void *arg, int argc, const char **argv,
                   const size_t *lens) {
    step *s = malloc(sizeof *s);
    if (s == NULL) return RJQ_ENOMEM;
    s->conn = conn;
    s->fn = fn;
    s->arg = arg;
    if (redisAsyncCommandArgv(conn->ac, on_step_reply, s, argc, argv, lens) != REDIS_OK) {
        free(s);
        return RJQ_ENOMEM;
    }
    conn->setup_pending++;
    return RJQ_OK;
}

void rjq__conn_report(rjq__conn *conn, const char *what, const char *err) {
    rjq_client *c = conn->c;
    rjq__errmsg(c, "%s connection set-up: %s: %s", kind_name(conn), what, err);
    rjq__emit(c, RJQ_EVENT_ERROR, conn->kind, c->errmsg);
}

void rjq__conn_refuse(rjq__conn *conn, int code) {
    rjq_client *c = conn->c;
    if (c->closing || conn->ac == NULL) return;
    redisAsyncContext *ac = conn->ac;
    char why[RJQ__ERRMSG_MAX];
    snprintf(why, sizeof why, "%s", c->errmsg);
    ac->data = NULL; /* its remaining callbacks keep out */
    conn->ac = NULL;
    rjq__conn_lost(conn, why);
    snprintf(c->errmsg, sizeof c->errmsg, "%s", why); /* keep the server's words */
    conn->hooks->down(conn, code, why);
    redisAsyncFree(ac); /* inside a reply callback: deferred by hiredis */
}

/* AUTH: a refused login makes the session unusable. Other AUTH errors
 * (a password sent to a server that has none) are reported only. */
static void on_auth_step(rjq__conn *conn, redisReply *r, void *arg) {
    if (r->type != REDIS_REPLY_ERROR) return;
    rjq__conn_report(conn, arg, r->str);
    if (rjq__redis_error_code(r->str) == RJQ_EAUTH) rjq__conn_refuse(conn, RJQ_EAUTH);
}

/* SELECT: any refusal makes the session unusable (commands would run in
 * database 0). */
static void on_select_step(rjq__conn *conn, redisReply *r, void *arg) {
    if (r->type != REDIS_REPLY_ERROR) return;
    if (strstr(r->str, "cluster mode")) {
        char why[RJQ__ERRMSG_MAX];
        snprintf(why, sizeof why, "database %d in the URL: a Redis Cluster has database 0 only "
                 "(%s)", conn->c->url.db, r->str);
        rjq__conn_report(conn, arg, why);
    } else {
        rjq__conn_report(conn, arg, r->str);
    }
    int code = rjq__redis_error_code(r->str);
    rjq__conn_refuse(conn, code == RJQ_EAUTH ? RJQ_EAUTH : RJQ_EREDIS);
}

void rjq__conn_step_failed(rjq__conn *conn, const char *what, const char *err) {
    rjq__conn_report(conn, what, err);
    if (strncmp(err, "NOAUTH", 6) == 0) rjq__conn_refuse(conn, RJQ_EAUTH);
}

/* ROLE (Sentinel): the sentinels named a server that is no master (a
 * failover under way, a stale answer): drop it and ask them again. A
 * refused ROLE (an ACL without it) proves nothing: it is reported only. */
static void on_role_step(rjq__conn *conn, redisReply *r, void *arg) {
    if (r->type == REDIS_REPLY_ERROR) {
        rjq__conn_step_failed(conn, arg, r->str);
        return;
    }
    if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 && r->element[0]->type == REDIS_REPLY_STRING &&
        strcmp(r->element[0]->str, "master") == 0)
        return;
    rjq__conn_drop(conn, "the server the sentinels named is not the master (ROLE): asking again");
}

/* CLIENT SETNAME: a refusal (NOPERM without +@connection) is reported. */
static void on_optional_step(rjq__conn *conn, redisReply *r, void *arg) {
    if (r->type == REDIS_REPLY_ERROR) rjq__conn_step_failed(conn, arg, r->str);
}

static int send_setup(rjq__conn *conn) {
    rjq_client *c = conn->c;
    char db[16], name[160];
    int rc = RJQ_OK;
    if (c->url.password) {
        const char *argv[3] = {"AUTH", c->url.user, c->url.password};
        if (c->url.user) rc = rjq__conn_step(conn, on_auth_step, "AUTH", 3, argv, NULL);
        else {
            argv[1] = c->url.password;
            rc = rjq__conn_step(conn, on_auth_step, "AUTH", 2, argv, NULL);
        }
    }
    if (rc == RJQ_OK && conn->kind == RJQ_CONN_COMMAND && c->url.db != 0 && conn->host == NULL) {
        snprintf(db, sizeof db, "%d", c->url.db);
        const char *argv[2] = {"SELECT", db};
        rc = rjq__conn_step(conn, on_select_step, "SELECT", 2, argv, NULL);
    }
    if (rc == RJQ_OK && c->url.master && conn->host == NULL) {
        const char *argv[1] = {"ROLE"};
        rc = rjq__conn_step(conn, on_role_step, "ROLE", 1, argv, NULL);
    }
    snprintf(name, sizeof name, "%s%s", c->name, conn->kind == RJQ_CONN_COMMAND ? "" : ":sub");
    const char *setname[3] = {"CLIENT", "SETNAME", name};
    if (rc == RJQ_OK) rc = rjq__conn_step(conn, on_optional_step, "CLIENT SETNAME", 3, setname, NULL);
    if (rc == RJQ_OK) rc = conn->hooks->setup(conn);
    return rc;
}

/* ---- connect, loss, reconnect -------------------------------------------- */

/* A TCP connection exists (SETUP or READY). */
static int connected(const rjq__conn *conn) {
    return conn->state == RJQ__LINK_SETUP || conn->state == RJQ__LINK_READY;
}

/* Why a context failed, in the most useful words: a TLS handshake that
 * failed says why (returns 1: then it never was connected: the session
 * could not start); else hiredis' words, else `otherwise`. */
static int failure_words(rjq__conn *conn, redisAsyncContext *ac, char *buf, size_t len,
                         const char *otherwise) {
    const char *io = ac->c.errstr[0] ? ac->c.errstr : otherwise;
    /* (a TCP connect that failed is no TLS matter; hiredis may report a
     * handshake already under way through the connect callback) */
    if (conn->tls_session && (connected(conn) || rjq__tls_heard(conn->tls_session)) &&
        rjq__tls_why(conn->c->tls, conn->tls_session, rjq__conn_ready(conn), io, buf, len))
        return 1;
    snprintf(buf, len, "%s", io);
    return 0;
}

static int more_addresses(const rjq__conn *conn) {
    return conn->next_addr < conn->naddrs;
}

static void lost(rjq__conn *conn, const char *why, int refused, int never_up,
                 rjq__backoff_why reason);

/* This address failed before the session started: the next one, from the
 * timer (never inside hiredis' callbacks), or the attempt failed. */
static void address_failed(rjq__conn *conn, const char *why) {
    rjq_client *c = conn->c;
    if (!more_addresses(conn) || c->closing) {
        lost(conn, why, 0, 1, RJQ__BACKOFF_LOST);
        return;
    }
    rjq__errmsg(c, "%s connection: %s (trying the next address)", kind_name(conn), why);
    if (conn->ac) conn->ac->data = NULL;
    conn->ac = NULL;
    conn->tls_session = NULL;
    link_enter(conn, RJQ__LINK_BACKOFF, RJQ__BACKOFF_NEXT_ADDR);
    rjq__timer_start(c, &conn->timer, 0);
}

static void on_connect(const redisAsyncContext *cac, int status) {
    redisAsyncContext *ac = (redisAsyncContext *)cac;
    rjq__conn *conn = ac->data;
    if (conn == NULL) return;
    rjq_client *c = conn->c;
    rjq__enter(c);
    if (status == REDIS_OK) {
        link_enter(conn, RJQ__LINK_SETUP, 0); /* the timer goes on until the session is set */
    } else {
        /* hiredis frees the context after this callback: drop it now.
         * 0.14.1 leaves ac->err at 0 here; c.err/errstr are set. */
        char why[RJQ__ERRMSG_MAX];
        failure_words(conn, ac, why, sizeof why, "connect failed");
        ac->data = NULL;
        address_failed(conn, why);
    }
    rjq__leave(c);
}

static void on_disconnect(const redisAsyncContext *cac, int status) {
    redisAsyncContext *ac = (redisAsyncContext *)cac;
    rjq__conn *conn = ac->data;
    (void)status;
    if (conn == NULL) return;
    rjq_client *c = conn->c;
    rjq__enter(c);
    char why[RJQ__ERRMSG_MAX];
    int tls_failed = failure_words(conn, ac, why, sizeof why, "connection closed");
    ac->data = NULL;
    if (!connected(conn) || tls_failed) address_failed(conn, why); /* the TLS handshake failed */
    else if (rjq__redis_error_code(why) == RJQ_EAUTH) lost(conn, why, 1, 0, RJQ__BACKOFF_LOST);
    else rjq__conn_lost(conn, why);
    rjq__leave(c);
}

static void drop(rjq__conn *conn, const char *why, rjq__backoff_why reason) {
    redisAsyncContext *ac = conn->ac;
    if (ac == NULL) return;
    ac->data = NULL; /* set-up and reply callbacks will see it and keep out */
    conn->ac = NULL;
    lost(conn, why, 0, 0, reason);
    redisAsyncFree(ac); /* deferred by hiredis inside its own callbacks */
}

void rjq__conn_drop(rjq__conn *conn, const char *why) {
    drop(conn, why, RJQ__BACKOFF_LOST);
}

void rjq__conn_drop_timed_out(rjq__conn *conn, const char *why) {
    drop(conn, why, RJQ__BACKOFF_TIMED_OUT);
}

static void connect_next(rjq__conn *conn);

const char *rjq__conn_address(const rjq__conn *conn) {
    if (conn->ac == NULL || conn->next_addr == 0 || conn->addrs == NULL) return NULL;
    return conn->addrs[conn->next_addr - 1];
}

int rjq__conn_is_at(const rjq__conn *conn, const char *ip, int port) {
    if (conn->ac == NULL || conn->next_addr == 0 || conn->addrs == NULL) return 0;
    int at = conn->addr_port ? conn->addr_port : conn->c->url.port;
    return at == port && strcmp(conn->addrs[conn->next_addr - 1], ip) == 0;
}

/* Connect timeout, reconnect delay, the next address, or a connect that
 * failed at once. */
static void on_timer(rjq__timer *t) {
    rjq__conn *conn = t->owner;
    switch (conn->state) {
    case RJQ__LINK_BACKOFF:
        if (conn->backoff == RJQ__BACKOFF_FAILED_NOW) {
            char why[sizeof conn->failed_now];
            memcpy(why, conn->failed_now, sizeof why);
            conn->failed_now[0] = '\0';
            address_failed(conn, why);
        } else if (conn->backoff == RJQ__BACKOFF_NEXT_ADDR) {
            connect_next(conn);
        } else {
            rjq__conn_start(conn);
        }
        return;
    case RJQ__LINK_RESOLVING:
        lost(conn, conn->c->url.master && conn->host == NULL ? "no sentinel answered in time"
                                       : "resolving the host name timed out",
             0, 1, RJQ__BACKOFF_LOST);
        return;
    case RJQ__LINK_CONNECTING:
    case RJQ__LINK_SETUP: {
        if (conn->state == RJQ__LINK_SETUP && !rjq__tls_handshaking(conn->tls_session)) {
            rjq__conn_drop(conn, "session set-up timed out");
            return;
        }
        /* this address does not answer, or no TLS handshake: the next one */
        const char *why = conn->state == RJQ__LINK_SETUP
                              ? "TLS handshake timed out (is the port a TLS port?)"
                              : "connect timed out";
        redisAsyncContext *ac = conn->ac;
        ac->data = NULL;
        conn->ac = NULL;
        address_failed(conn, why); /* no session ever started */
        redisAsyncFree(ac);
        return;
    }
    default:
        return;
    }
}

int rjq__conn_aim(rjq__conn *conn, const char *host, int port, int numeric) {
    RJQ_ASSERT(conn->state == RJQ__LINK_IDLE && conn->host == NULL);
    if ((conn->host = strdup(host)) == NULL) return RJQ_ENOMEM;
    conn->port = port;
    conn->numeric = numeric;
    return RJQ_OK;
}

int rjq__conn_init(rjq_client *c, rjq__conn *conn, int kind, const rjq__conn_hooks *hooks) {
    memset(conn, 0, sizeof *conn);
    conn->c = c;
    conn->kind = kind;
    conn->hooks = hooks;
    conn->state = RJQ__LINK_IDLE;
    return rjq__timer_setup(c, &conn->timer, on_timer, conn);
}

static void schedule_reconnect(rjq__conn *conn) {
    rjq_client *c = conn->c;
    rjq__timer_start(c, &conn->timer, rjq__reconnect_delay(c, conn->failures));
}

/* Report a connect that failed before any callback could, from the timer,
 * like an asynchronous failure (no user code inside rjq_client_new). */
static void failed_now(rjq__conn *conn, const char *why) {
    snprintf(conn->failed_now, sizeof conn->failed_now, "%s", why);
    link_enter(conn, RJQ__LINK_BACKOFF, RJQ__BACKOFF_FAILED_NOW);
    rjq__timer_start(conn->c, &conn->timer, 0);
}

static void forget_addresses(rjq__conn *conn) {
    for (size_t i = 0; i < conn->naddrs; i++) free(conn->addrs[i]);
    free(conn->addrs);
    conn->addrs = NULL;
    conn->naddrs = conn->next_addr = 0;
}

static void cancel_lookup(rjq__conn *conn) {
    rjq_client *c = conn->c;
    if (conn->state != RJQ__LINK_RESOLVING) return;
    if (conn->lookup && c->url.master && conn->host == NULL) rjq__sentinel_cancel(conn->lookup);
    else if (conn->lookup) c->ops.resolve_cancel(c->loop, conn->lookup);
    conn->lookup = NULL;
}

/* Connect to one address (NULL: the unix socket), TLS first when asked. */
static void connect_to(rjq__conn *conn, const char *ip) {
    rjq_client *c = conn->c;
    int port = conn->addr_port ? conn->addr_port : c->url.port;
    redisAsyncContext *ac = ip ? redisAsyncConnect(ip, port) : redisAsyncConnectUnix(c->url.path);
    char why[RJQ__ERRMSG_MAX];
    conn->setup_pending = 0;
    conn->tls_session = NULL;
    conn->last_io_ms = rjq__now_ms();
    if (ac == NULL || ac->err) {
        failed_now(conn, ac == NULL ? "out of memory" : ac->errstr);
        if (ac) redisAsyncFree(ac);
        return;
    }
    rjq__reply_arena_use(&ac->c); /* (replies in few blocks: replyarena.h) */
    if (c->tls &&
        rjq__tls_start(c->tls, &ac->c, conn->host, &conn->tls_session, why, sizeof why) != RJQ_OK) {
        redisAsyncFree(ac);
        failed_now(conn, why);
        return;
    }
    if (c->ops.attach(c->loop, ac) != 0) {
        conn->tls_session = NULL;
        redisAsyncFree(ac);
        failed_now(conn, "loop attach failed");
        return;
    }
    ac->data = conn;
    conn->ac = ac;
    link_enter(conn, RJQ__LINK_CONNECTING, 0);
    /* TCP keepalive finds a dead peer even when idle (not for unix
     * sockets: hiredis 0.14.1 fails the context on them). */
    if (ip && redisEnableKeepAlive(&ac->c) != REDIS_OK) ac->c.err = 0;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    /* Commands wait in the request backlog until the session is set;
     * subscriptions may follow the set-up commands at once. */
    if (send_setup(conn) != RJQ_OK) {
        ac->data = NULL;
        conn->ac = NULL;
        conn->tls_session = NULL;
        redisAsyncFree(ac); /* not inside a callback: immediate */
        failed_now(conn, "out of memory");
        return;
    }
    rjq__timer_start(c, &conn->timer, (uint64_t)c->connect_timeout_ms);
}

static void connect_next(rjq__conn *conn) {
    connect_to(conn, conn->addrs[conn->next_addr++]);
}

/* The addresses of this attempt (port 0: the URL's), or why there are
 * none: connect to the first, or report. A lookup answered from inside
 * the resolve hook (the contract allows it) may be inside rjq_client_new:
 * what it starts then waits for the timer, so no user code runs in there
 * (as for failed_now). */
static void take_addresses(rjq__conn *conn, const char *failure, const char *const *addrs, size_t n,
                           int port) {
    rjq_client *c = conn->c;
    conn->lookup = NULL;
    forget_addresses(conn);
    conn->addr_port = port;
    const char *why = failure;
    if (why == NULL && (conn->addrs = calloc(n, sizeof *conn->addrs)) != NULL)
        for (size_t i = 0; i < n; i++)
            if ((conn->addrs[conn->naddrs] = strdup(addrs[i])) != NULL) conn->naddrs++;
    if (why == NULL && conn->naddrs == 0) why = "out of memory";
    if (why && conn->resolve_inside) failed_now(conn, why);
    else if (why) lost(conn, why, 0, 1, RJQ__BACKOFF_LOST);
    else if (conn->resolve_inside) { /* from the timer */
        link_enter(conn, RJQ__LINK_BACKOFF, RJQ__BACKOFF_NEXT_ADDR);
        rjq__timer_start(c, &conn->timer, 0);
    } else {
        connect_next(conn);
    }
}

static void on_resolved(void *arg, const char *error, const char *const *addrs, size_t n) {
    rjq__conn *conn = arg;
    rjq_client *c = conn->c;
    if (conn->state != RJQ__LINK_RESOLVING) return; /* a glue that broke the contract */
    rjq__enter(c);
    char why[RJQ__ERRMSG_MAX];
    if (error || n == 0)
        snprintf(why, sizeof why, "cannot resolve %s: %s", conn->host ? conn->host : c->url.host,
                 error ? error : "no address");
    take_addresses(conn, error || n == 0 ? why : NULL, addrs, n, conn->want_port);
    rjq__leave(c);
}

/* The sentinels' answer: the master's address, or why there is none. */
static void on_master_found(void *arg, const char *error, const char *ip, int port) {
    rjq__conn *conn = arg;
    if (conn->state != RJQ__LINK_RESOLVING) return;
    rjq__enter(conn->c);
    take_addresses(conn, error, &ip, error ? 0 : 1, port);
    rjq__leave(conn->c);
}

void rjq__conn_start(rjq__conn *conn) {
    rjq_client *c = conn->c;
    RJQ_ASSERT(conn->ac == NULL);
    forget_addresses(conn);
    conn->addr_port = 0;
    conn->want_port = 0;
    /* where: a cluster node, else the URL's seed of this attempt, else the
     * sentinels' master, the unix socket or the URL's host (port 0: the URL's) */
    const char *host = conn->host;
    int port = conn->port, numeric = conn->numeric;
    if (host == NULL && c->url.nseeds > 1) {
        const rjq__url_host *s = &c->url.seeds[conn->seed % c->url.nseeds];
        host = s->host;
        port = s->port;
        numeric = s->numeric;
    } else if (host == NULL && c->url.master) {
        /* each sentinel has connect_timeout_ms; this covers them all */
        rjq__timer_start(c, &conn->timer,
                         (uint64_t)c->connect_timeout_ms * (c->url.nsentinels + 1));
        link_enter(conn, RJQ__LINK_RESOLVING, 0);
        conn->lookup = rjq__sentinel_ask(c, on_master_found, conn);
        if (conn->lookup == NULL) failed_now(conn, "out of memory");
        return;
    } else if (host == NULL && c->url.path) {
        connect_to(conn, NULL);
        return;
    } else if (host == NULL) {
        host = c->url.host;
        port = 0;
        numeric = c->url.numeric;
    }
    if (!numeric && c->ops.resolve == NULL && strcmp(host, "localhost") != 0) {
        /* (a cluster node announced by a host name: the URL's were checked
         * when the client was made) */
        char why[RJQ__ERRMSG_MAX];
        snprintf(why, sizeof why, RJQ__NO_RESOLVE_FMT, host);
        failed_now(conn, why);
        return;
    }
    if (numeric || c->ops.resolve == NULL) {
        conn->addr_port = port;
        connect_to(conn, numeric ? host : "127.0.0.1"); /* (localhost) */
        return;
    }
    /* the connect timeout covers the lookup too */
    rjq__timer_start(c, &conn->timer, (uint64_t)c->connect_timeout_ms);
    link_enter(conn, RJQ__LINK_RESOLVING, 0);
    conn->want_port = port;
    conn->resolve_inside = 1;
    void *h = c->ops.resolve(c->loop, host, on_resolved, conn);
    conn->resolve_inside = 0;
    if (conn->state == RJQ__LINK_RESOLVING) conn->lookup = h; /* else done was called inside */
}

/* refused: the server ended the session with a permission error (hiredis
 * drops a context that gets an error no command waits for: a refused
 * SUBSCRIBE): final, so the run of failures goes on (the reconnect keeps
 * its backoff however long the session was up) and the owner hears
 * RJQ_EAUTH with the server's words. */
/* never_up: the attempt failed before a connection existed (a failed
 * address, a lookup), whatever the state says (a TLS handshake that
 * failed counts as never connected). reason: RJQ__BACKOFF_LOST or
 * RJQ__BACKOFF_TIMED_OUT. */
static void lost(rjq__conn *conn, const char *why, int refused, int never_up,
                 rjq__backoff_why reason) {
    rjq_client *c = conn->c;
    if (c->closing || conn->state == RJQ__LINK_RETIRED) return;
    if (conn->state == RJQ__LINK_BACKOFF &&
        (conn->backoff == RJQ__BACKOFF_LOST || conn->backoff == RJQ__BACKOFF_TIMED_OUT) &&
        rjq__timer_armed(&conn->timer))
        return; /* already handled */
    cancel_lookup(conn);
    forget_addresses(conn);
    conn->tls_session = NULL;
    int was_connected = !never_up && connected(conn);
    /* A session that stayed up a while ends the run of failures; one that
     * drops right after its set-up (a refused SUBSCRIBE, say) keeps its
     * backoff, so it cannot reconnect in a tight loop. */
    if (rjq__conn_ready(conn) && !refused && rjq__now_ms() - conn->ready_ms >= 1000)
        conn->failures = 0;
    /* hiredis may still call this context's disconnect callback after we
     * (and maybe the whole client) are gone: cut it loose now. */
    if (conn->ac) conn->ac->data = NULL;
    conn->ac = NULL;
    link_enter(conn, RJQ__LINK_BACKOFF, reason);
    conn->failures++;
    if (!was_connected && conn->host == NULL) conn->seed++; /* the next seed node, if any */
    rjq__errmsg(c, "%s connection: %s", kind_name(conn), why);
    schedule_reconnect(conn);
    rjq__emit(c, was_connected ? RJQ_EVENT_DISCONNECTED : RJQ_EVENT_ERROR, conn->kind, c->errmsg);
    conn->hooks->down(conn, refused ? RJQ_EAUTH : was_connected ? 0 : RJQ_ECONN, why);
}

void rjq__conn_lost(rjq__conn *conn, const char *why) {
    lost(conn, why, 0, 0, RJQ__BACKOFF_LOST);
}

void rjq__conn_close(rjq__conn *conn) {
    rjq__timer_teardown(conn->c, &conn->timer);
    cancel_lookup(conn);
    forget_addresses(conn);
    redisAsyncContext *ac = conn->ac;
    conn->ac = NULL;
    link_enter(conn, RJQ__LINK_RETIRED, 0);
    free(conn->host);
    conn->host = NULL;
    if (ac == NULL) return;
    ac->data = NULL;
    /* Inside one of its own callbacks hiredis defers this until the
     * callback returns; pending replies then reach orphaned requests. */
    redisAsyncFree(ac);
}
