/*
 * pgconn: a libpq connection on a libevent loop, in pipeline mode (see
 * pgconn.h).
 *
 * States: DOWN (a reconnect timer is armed) -> CONNECTING (PQconnectPoll
 * steps, the socket watched in the direction it asks for) -> SETUP
 * (pipeline mode on, LISTEN sent) -> UP (queries accepted). A loss in any
 * state goes back to DOWN and fails every segment in flight.
 * Invariant: conn != NULL exactly in CONNECTING, SETUP and UP; segments are
 * in flight only in SETUP and UP.
 */
#include "pgconn.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000

enum { DOWN, CONNECTING, SETUP, UP };

typedef struct segment {
    pgconn_done_fn *cb;
    void *arg;
    PGresult **res;
    int n, cap;
    char *err;         /* first error, owned */
    char sqlstate[6];  /* its SQLSTATE when the server's */
    int internal;      /* the LISTEN of SETUP */
    struct segment *next;
} segment;

struct pgconn {
    struct event_base *base;
    char *conninfo, *channel;
    pgconn_state_fn *on_state;
    pgconn_notify_fn *on_notify;
    void *arg;
    PGconn *conn;
    int state;
    int sock;
    struct event *io;      /* CONNECTING: one-shot; SETUP/UP: persistent read */
    struct event *wr;      /* SETUP/UP: write readiness while libpq has output */
    struct event *timer;   /* DOWN: reconnect */
    long backoff_ms;
    unsigned generation;
    segment *open;         /* being built */
    segment *head, *tail;  /* sent, oldest first */
    int depth;             /* callbacks running */
    int freed;             /* pgconn_free() called during a callback */
};

static void connect_start(pgconn *p);
static void lost(pgconn *p, const char *why);

/* ---- segments ------------------------------------------------------------- */

static segment *segment_new(void) {
    return calloc(1, sizeof(segment));
}

static void segment_fail(segment *s, const char *why) {
    if (s->err == NULL) s->err = strdup(why ? why : "error");
}

static void segment_free(segment *s) {
    for (int i = 0; i < s->n; i++) PQclear(s->res[i]);
    free(s->res);
    free(s->err);
    free(s);
}

static void segment_add(segment *s, PGresult *r) {
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 4;
        PGresult **res = realloc(s->res, (size_t)cap * sizeof *res);
        if (res == NULL) {
            PQclear(r);
            segment_fail(s, "out of memory");
            return;
        }
        s->res = res;
        s->cap = cap;
    }
    s->res[s->n++] = r;
}

/* ---- freeing, also from inside callbacks ----------------------------------- */

static void release(pgconn *p) {
    if (p->io) event_free(p->io);
    if (p->wr) event_free(p->wr);
    if (p->timer) event_free(p->timer);
    if (p->conn) PQfinish(p->conn);
    if (p->open) segment_free(p->open);
    free(p->conninfo);
    free(p->channel);
    free(p);
}

/* Entry points from the loop (and pgconn_sync) count themselves, so a
 * pgconn_free() from inside a callback frees when the outermost returns. */
static void enter(pgconn *p) {
    p->depth++;
}

static void leave(pgconn *p) {
    if (--p->depth == 0 && p->freed) release(p);
}

/* Call a finished segment's callback (it is unlinked already). */
static void finish(pgconn *p, segment *s) {
    if (s->internal) {
        if (s->err == NULL && p->state == SETUP) {
            p->state = UP;
            p->backoff_ms = BACKOFF_MIN_MS;
            p->depth++;
            p->on_state(p, 1, NULL, p->arg);
            p->depth--;
        } else if (s->err && p->state == SETUP) {
            char why[512];
            snprintf(why, sizeof why, "session set-up (encoding, LISTEN) failed: %s", s->err);
            segment_free(s);
            lost(p, why);
            return;
        }
    } else if (s->cb) {
        p->depth++;
        s->cb(s->arg, s->res, s->n, s->err, s->sqlstate);
        p->depth--;
    }
    segment_free(s);
}

void pgconn_free(pgconn *p) {
    if (p == NULL) return;
    if (p->depth > 0) {
        p->freed = 1;
        lost(p, "connection closed");
        return;
    }
    p->freed = 1;
    lost(p, "connection closed");
    release(p);
}

/* ---- losing and making the connection ---------------------------------------- */

static void drop_events(pgconn *p) {
    if (p->io) event_free(p->io);
    if (p->wr) event_free(p->wr);
    p->io = p->wr = NULL;
}

static void on_timer(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    enter(arg);
    connect_start(arg);
    leave(arg);
}

/* Back to DOWN: every segment in flight fails with why. */
static void lost(pgconn *p, const char *why) {
    int was_up = p->state == UP;
    if (p->state == DOWN) return;
    drop_events(p);
    if (p->conn) PQfinish(p->conn);
    p->conn = NULL;
    p->state = DOWN;
    p->sock = -1;
    segment *s = p->head;
    p->head = p->tail = NULL;
    if (p->open) {
        segment_free(p->open);
        p->open = NULL;
    }
    if (!p->freed) {
        struct timeval tv = {p->backoff_ms / 1000, (p->backoff_ms % 1000) * 1000};
        if (p->timer == NULL) p->timer = evtimer_new(p->base, on_timer, p);
        if (p->timer) evtimer_add(p->timer, &tv);
        p->backoff_ms = p->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : p->backoff_ms * 2;
    }
    while (s) {
        segment *next = s->next;
        segment_fail(s, why);
        s->internal = 0;
        finish(p, s);
        s = next;
    }
    if (was_up && !p->freed) {
        p->depth++;
        p->on_state(p, 0, why, p->arg);
        p->depth--;
    }
}

static void on_io(evutil_socket_t fd, short what, void *arg);
static void on_write(evutil_socket_t fd, short what, void *arg);

/* Send what libpq holds; watch for write readiness while some is left. */
static int flush_out(pgconn *p) {
    int rc = PQflush(p->conn);
    if (rc < 0) {
        lost(p, PQerrorMessage(p->conn));
        return -1;
    }
    if (rc == 1 && p->wr) event_add(p->wr, NULL);
    if (rc == 0 && p->wr) event_del(p->wr);
    return 0;
}

/* The session: text in UTF-8 both ways (whatever the server's default
 * client encoding), and the LISTEN. */
static void send_setup(pgconn *p) {
    char sql[256];
    segment *s = segment_new();
    char *ident = s && p->channel ? PQescapeIdentifier(p->conn, p->channel, strlen(p->channel)) : NULL;
    if (s == NULL || (p->channel && ident == NULL)) {
        free(s);
        lost(p, "out of memory");
        return;
    }
    snprintf(sql, sizeof sql, "LISTEN %s", ident ? ident : "");
    PQfreemem(ident);
    s->internal = 1;
    if (!PQsendQueryParams(p->conn, "SET client_encoding TO 'UTF8'", 0, NULL, NULL, NULL, NULL, 0) ||
        (p->channel && !PQsendQueryParams(p->conn, sql, 0, NULL, NULL, NULL, NULL, 0)) ||
        !PQpipelineSync(p->conn)) {
        segment_free(s);
        lost(p, PQerrorMessage(p->conn));
        return;
    }
    p->head = p->tail = s;
    flush_out(p);
}

/* The connection is made: pipeline mode, events, LISTEN. */
static void connected(pgconn *p) {
    p->sock = PQsocket(p->conn);
    drop_events(p);
    if (PQsetnonblocking(p->conn, 1) != 0 || !PQenterPipelineMode(p->conn)) {
        lost(p, PQerrorMessage(p->conn));
        return;
    }
    p->io = event_new(p->base, p->sock, EV_READ | EV_PERSIST, on_io, p);
    p->wr = event_new(p->base, p->sock, EV_WRITE | EV_PERSIST, on_write, p);
    if (p->io == NULL || p->wr == NULL) {
        lost(p, "out of memory");
        return;
    }
    event_add(p->io, NULL);
    p->generation++;
    p->state = SETUP;
    send_setup(p);
}

static void on_connect_io(evutil_socket_t fd, short what, void *arg);

/* One PQconnectPoll step; watch the socket as it asks. */
static void connect_step(pgconn *p, PostgresPollingStatusType st) {
    if (st == PGRES_POLLING_OK) {
        connected(p);
        return;
    }
    if (st == PGRES_POLLING_FAILED) {
        char why[512];
        snprintf(why, sizeof why, "%s", PQerrorMessage(p->conn));
        lost(p, why);
        return;
    }
    drop_events(p);
    p->sock = PQsocket(p->conn); /* may change between attempts (hosts) */
    short ev = st == PGRES_POLLING_READING ? EV_READ : EV_WRITE;
    struct timeval tv = {10, 0}; /* a connect that never ends */
    p->io = event_new(p->base, p->sock, ev, on_connect_io, p);
    if (p->io == NULL) {
        lost(p, "out of memory");
        return;
    }
    event_add(p->io, &tv);
}

static void on_connect_io(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    pgconn *p = arg;
    enter(p);
    if (what & EV_TIMEOUT) lost(p, "connect timed out");
    else connect_step(p, PQconnectPoll(p->conn));
    leave(p);
}

static void connect_start(pgconn *p) {
    assert(p->state == DOWN);
    p->conn = PQconnectStart(p->conninfo);
    p->state = CONNECTING;
    if (p->conn == NULL) {
        lost(p, "out of memory");
        return;
    }
    if (PQstatus(p->conn) == CONNECTION_BAD) {
        char why[512];
        snprintf(why, sizeof why, "%s", PQerrorMessage(p->conn));
        lost(p, why);
        return;
    }
    connect_step(p, PGRES_POLLING_WRITING);
}

/* ---- reading --------------------------------------------------------------- */

static void read_results(pgconn *p) {
    while (p->conn && p->head && !PQisBusy(p->conn)) {
        PGresult *r = PQgetResult(p->conn);
        if (r == NULL) continue; /* the end of one statement's results */
        segment *s = p->head;
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_PIPELINE_SYNC) {
            PQclear(r);
            p->head = s->next;
            if (p->head == NULL) p->tail = NULL;
            finish(p, s);
            if (p->freed) return;
            continue;
        }
        if (st == PGRES_FATAL_ERROR || st == PGRES_PIPELINE_ABORTED || st == PGRES_BAD_RESPONSE ||
            st == PGRES_NONFATAL_ERROR) {
            const char *msg = PQresultErrorMessage(r);
            const char *code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
            if (s->err == NULL && code) snprintf(s->sqlstate, sizeof s->sqlstate, "%s", code);
            segment_fail(s, msg && *msg ? msg : "statement aborted");
            PQclear(r);
            continue;
        }
        segment_add(s, r);
    }
}

static void drain_notifies(pgconn *p) {
    PGnotify *n;
    while (p->conn && !p->freed && (n = PQnotifies(p->conn)) != NULL) {
        if (p->on_notify) p->on_notify(p, n->relname, p->arg);
        PQfreemem(n);
    }
}

static void on_io(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    pgconn *p = arg;
    enter(p);
    if (!PQconsumeInput(p->conn)) {
        char why[512];
        snprintf(why, sizeof why, "%s", PQerrorMessage(p->conn));
        lost(p, why);
        leave(p);
        return;
    }
    drain_notifies(p);
    if (p->conn && !p->freed) read_results(p);
    /* reading results parses what follows them, notifications too */
    drain_notifies(p);
    if (p->conn && !p->freed) flush_out(p);
    leave(p);
}

static void on_write(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    enter(arg);
    flush_out(arg);
    leave(arg);
}

/* ---- the API --------------------------------------------------------------- */

pgconn *pgconn_new(struct event_base *base, const char *conninfo, const char *channel,
                   pgconn_state_fn *on_state, pgconn_notify_fn *on_notify, void *arg) {
    pgconn *p = calloc(1, sizeof *p);
    if (p == NULL) return NULL;
    p->base = base;
    p->conninfo = strdup(conninfo ? conninfo : "");
    p->channel = channel ? strdup(channel) : NULL;
    p->on_state = on_state;
    p->on_notify = on_notify;
    p->arg = arg;
    p->state = DOWN;
    p->sock = -1;
    p->backoff_ms = BACKOFF_MIN_MS;
    if (p->conninfo == NULL || (channel && p->channel == NULL)) {
        release(p);
        return NULL;
    }
    connect_start(p);
    return p;
}

int pgconn_up(const pgconn *p) {
    return p->state == UP;
}

unsigned pgconn_generation(const pgconn *p) {
    return p->generation;
}

int pgconn_query(pgconn *p, const char *sql, int n, const char *const *values, const int *lens,
                 const int *fmts, int binary_result) {
    if (p->state != UP) return -1;
    if (p->open == NULL && (p->open = segment_new()) == NULL) return -1;
    if (!PQsendQueryParams(p->conn, sql, n, NULL, values, lens, fmts, binary_result)) {
        segment_fail(p->open, PQerrorMessage(p->conn));
        return -1;
    }
    return 0;
}

int pgconn_sync(pgconn *p, pgconn_done_fn *cb, void *arg) {
    if (p->state != UP) return -1;
    segment *s = p->open ? p->open : segment_new();
    p->open = NULL;
    if (s == NULL) return -1;
    s->cb = cb;
    s->arg = arg;
    if (!PQpipelineSync(p->conn)) {
        char why[512];
        snprintf(why, sizeof why, "%s", PQerrorMessage(p->conn));
        segment_free(s);
        enter(p);
        lost(p, why);
        leave(p);
        return -1;
    }
    if (p->tail) p->tail->next = s;
    else p->head = s;
    p->tail = s;
    enter(p);
    flush_out(p); /* a loss here fails s too: cb is called */
    leave(p);
    return 0;
}
