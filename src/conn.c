/*
 * The client's two connections: connect, session set-up, reconnect with
 * capped exponential backoff, connect timeout.
 *
 * hiredis rules this file follows (docs/hiredis-compat.md):
 * - attach to the loop before setting callbacks or sending (1.x arms
 *   nothing otherwise);
 * - never free a context inside its connect or disconnect callback, nor
 *   after a failed connect (hiredis frees it);
 * - 0.14.1 has no async timeouts, so the connect timeout is our timer;
 * - every callback may see a NULL reply when the context goes away.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static void on_setup_reply(redisAsyncContext *ac, void *reply, void *priv);
static void on_library_reply(redisAsyncContext *ac, void *reply, void *priv);

static const char *kind_name(const rjq__conn *conn) {
    return conn->kind == RJQ_CONN_COMMAND ? "command" : "subscriber";
}

/* Queue one session set-up command on the new context. */
static void setup_command(rjq__conn *conn, int argc, const char **argv, const size_t *lens) {
    if (redisAsyncCommandArgv(conn->ac, on_setup_reply, conn, argc, argv, lens) == REDIS_OK)
        conn->setup_pending++;
}

static void send_setup(rjq__conn *conn) {
    rjq_client *c = conn->c;
    char db[16], name[160];
    if (c->url.password) {
        const char *argv[3] = {"AUTH", c->url.user, c->url.password};
        if (c->url.user) setup_command(conn, 3, argv, NULL);
        else {
            argv[1] = c->url.password;
            setup_command(conn, 2, argv, NULL);
        }
    }
    if (conn->kind == RJQ_CONN_COMMAND && c->url.db != 0) {
        snprintf(db, sizeof db, "%d", c->url.db);
        const char *argv[2] = {"SELECT", db};
        setup_command(conn, 2, argv, NULL);
    }
    snprintf(name, sizeof name, "%s%s", c->name, conn->kind == RJQ_CONN_COMMAND ? "" : ":sub");
    const char *setname[3] = {"CLIENT", "SETNAME", name};
    setup_command(conn, 3, setname, NULL);
    if (conn->kind == RJQ_CONN_COMMAND) {
        /* Until the answer says otherwise, scripts wait for EVALSHA. */
        const char *argv[3] = {"FUNCTION", "LOAD", rjq__library};
        size_t lens[3] = {8, 4, rjq__library_len};
        c->fcall = 0;
        if (redisAsyncCommandArgv(conn->ac, on_library_reply, conn, 3, argv, lens) == REDIS_OK)
            conn->setup_pending++;
    }
}

/* Without the function library, every script is loaded for EVALSHA. */
static void load_scripts(rjq__conn *conn) {
    for (int i = 0; i < RJQ__SCRIPT_COUNT; i++) {
        const char *argv[3] = {"SCRIPT", "LOAD", rjq__scripts[i].body};
        size_t lens[3] = {6, 4, rjq__scripts[i].len};
        setup_command(conn, 3, argv, lens);
    }
}

/* A session that cannot be set (AUTH refused, SELECT of a missing db):
 * nothing may run on it. Fail the requests waiting for it with the error,
 * drop the context and try again later. */
static void setup_failed(rjq__conn *conn, redisAsyncContext *ac, int code) {
    rjq_client *c = conn->c;
    ac->data = NULL; /* its remaining callbacks keep out */
    conn->ac = NULL;
    char why[RJQ__ERRMSG_MAX];
    snprintf(why, sizeof why, "%s", c->errmsg);
    rjq__conn_lost(conn, why);
    snprintf(c->errmsg, sizeof c->errmsg, "%s", why); /* keep the server's words */
    if (conn->kind == RJQ_CONN_COMMAND) rjq__requests_fail_backlog_with(c, code);
    redisAsyncFree(ac); /* inside its reply callback: deferred by hiredis */
}

/* One set-up reply arrived; with the last one the connection is ready. */
static void setup_step_done(rjq__conn *conn) {
    rjq_client *c = conn->c;
    if (--conn->setup_pending == 0 && !conn->ready) {
        conn->ready = 1;
        conn->failures = 0;
        if (conn->kind == RJQ_CONN_COMMAND) rjq__requests_flush_backlog(c);
        rjq__emit(c, RJQ_EVENT_CONNECTED, conn->kind, kind_name(conn));
        rjq__on_ready(c, conn->kind);
    }
}

static void on_setup_reply(redisAsyncContext *ac, void *reply, void *priv) {
    rjq__conn *conn = priv;
    redisReply *r = reply;
    if (ac->data == NULL || r == NULL) return; /* closed, or the loss is handled elsewhere */
    rjq_client *c = conn->c;
    rjq__enter(c);
    int fatal = 0;
    if (r->type == REDIS_REPLY_ERROR) {
        int code = rjq__redis_error_code(r->str);
        rjq__errmsg(c, "%s connection set-up: %s", kind_name(conn), r->str);
        rjq__emit(c, RJQ_EVENT_ERROR, conn->kind, c->errmsg);
        /* AUTH/SELECT failures make the session unusable (commands would
         * fail, or worse, run in database 0). */
        fatal = code == RJQ_EAUTH || strncmp(r->str, "ERR DB index", 12) == 0 ||
                strstr(r->str, "DB index is out of range") != NULL;
        if (fatal && !c->closing) setup_failed(conn, ac, code == RJQ_EAUTH ? code : RJQ_EREDIS);
    }
    if (!fatal) setup_step_done(conn);
    rjq__leave(c);
}

/* FUNCTION LOAD of rjq's library: loaded now or before, else (no functions
 * on this server, or not permitted) the scripts are loaded for EVALSHA.
 * Neither is an error. */
static void on_library_reply(redisAsyncContext *ac, void *reply, void *priv) {
    rjq__conn *conn = priv;
    redisReply *r = reply;
    if (ac->data == NULL || r == NULL) return;
    rjq_client *c = conn->c;
    rjq__enter(c);
    rjq__library_loaded(c, r);
    if (!c->fcall) load_scripts(conn);
    setup_step_done(conn);
    rjq__leave(c);
}

static void on_connect(const redisAsyncContext *cac, int status) {
    redisAsyncContext *ac = (redisAsyncContext *)cac;
    rjq__conn *conn = ac->data;
    if (conn == NULL) return;
    rjq_client *c = conn->c;
    rjq__enter(c);
    if (status == REDIS_OK) {
        conn->connected = 1;
        rjq__timer_stop(c, &conn->timer);
    } else {
        /* hiredis frees the context after this callback: drop it now.
         * 0.14.1 leaves ac->err at 0 here; c.err/errstr are set. */
        ac->data = NULL;
        rjq__conn_lost(conn, ac->c.errstr[0] ? ac->c.errstr : "connect failed");
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
    ac->data = NULL;
    rjq__conn_lost(conn, ac->c.errstr[0] ? ac->c.errstr : "connection closed");
    rjq__leave(c);
}

/* Connect timeout, reconnect delay, or a connect that failed at once. */
static void on_timer(rjq__timer *t) {
    rjq__conn *conn = t->owner;
    if (conn->failed_now[0]) {
        char why[sizeof conn->failed_now];
        memcpy(why, conn->failed_now, sizeof why);
        conn->failed_now[0] = '\0';
        rjq__conn_lost(conn, why);
        return;
    }
    if (conn->timer_is_reconnect) {
        rjq__conn_start(conn);
        return;
    }
    if (conn->ac && !conn->connected) {
        redisAsyncContext *ac = conn->ac;
        ac->data = NULL; /* set-up callbacks will see it and keep out */
        conn->ac = NULL;
        rjq__conn_lost(conn, "connect timed out");
        redisAsyncFree(ac); /* not inside a hiredis callback: immediate */
    }
}

void rjq__conn_init(rjq_client *c, rjq__conn *conn, int kind) {
    memset(conn, 0, sizeof *conn);
    conn->c = c;
    conn->kind = kind;
    rjq__timer_init(&conn->timer, on_timer, conn);
}

static void schedule_reconnect(rjq__conn *conn) {
    rjq_client *c = conn->c;
    long delay = c->reconnect_min_ms;
    for (int i = 1; i < conn->failures && delay < c->reconnect_max_ms; i++) delay *= 2;
    if (delay > c->reconnect_max_ms) delay = c->reconnect_max_ms;
    delay = delay / 2 + (long)(rjq__random(c) % (uint64_t)(delay / 2 + 1)); /* jitter */
    conn->timer_is_reconnect = 1;
    rjq__timer_start(c, &conn->timer, (uint64_t)delay);
}

void rjq__conn_start(rjq__conn *conn) {
    rjq_client *c = conn->c;
    redisAsyncContext *ac = c->url.path ? redisAsyncConnectUnix(c->url.path)
                                        : redisAsyncConnect(c->url.host, c->url.port);
    conn->connected = conn->ready = 0;
    conn->setup_pending = 0;
    if (ac == NULL || ac->err || c->ops.attach(c->loop, ac) != 0) {
        /* Failed before any callback could: report it from the timer, like
         * an asynchronous failure (no user code inside rjq_client_new). */
        snprintf(conn->failed_now, sizeof conn->failed_now, "%s",
                 ac == NULL ? "out of memory" : ac->err ? ac->errstr : "loop attach failed");
        if (ac) redisAsyncFree(ac);
        conn->timer_is_reconnect = 0;
        rjq__timer_start(c, &conn->timer, 0);
        return;
    }
    ac->data = conn;
    conn->ac = ac;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    send_setup(conn);
    /* Commands wait in the backlog until the session is set (on_setup_reply);
     * subscriptions may follow the set-up commands at once. */
    if (conn->kind == RJQ_CONN_SUBSCRIBER) rjq__pubsub_resubscribe(c);
    conn->timer_is_reconnect = 0;
    rjq__timer_start(c, &conn->timer, (uint64_t)c->connect_timeout_ms);
}

void rjq__conn_lost(rjq__conn *conn, const char *why) {
    rjq_client *c = conn->c;
    if (c->closing) return;
    if (conn->ac == NULL && conn->timer_is_reconnect && rjq__timer_armed(&conn->timer))
        return; /* already handled */
    int was_connected = conn->connected;
    /* hiredis may still call this context's disconnect callback after we
     * (and maybe the whole client) are gone: cut it loose now. */
    if (conn->ac) conn->ac->data = NULL;
    conn->ac = NULL;
    conn->connected = conn->ready = 0;
    conn->failures++;
    if (conn->kind == RJQ_CONN_SUBSCRIBER)
        for (rjq__channel *ch = c->channels; ch; ch = ch->next) ch->confirmed = 0;
    rjq__errmsg(c, "%s connection: %s", kind_name(conn), why);
    schedule_reconnect(conn);
    rjq__emit(c, was_connected ? RJQ_EVENT_DISCONNECTED : RJQ_EVENT_ERROR, conn->kind, c->errmsg);
    if (!was_connected && conn->kind == RJQ_CONN_COMMAND) rjq__requests_fail_backlog(c);
}

void rjq__conn_close(rjq__conn *conn) {
    rjq__timer_stop(conn->c, &conn->timer);
    redisAsyncContext *ac = conn->ac;
    conn->ac = NULL;
    if (ac == NULL) return;
    ac->data = NULL;
    /* Inside one of its own callbacks hiredis defers this until the
     * callback returns; pending replies then reach orphaned requests. */
    redisAsyncFree(ac);
}
