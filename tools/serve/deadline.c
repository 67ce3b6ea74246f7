/*
 * rjq serve: a deadline for each request to arrive whole (--request-timeout),
 * and a bound on its size (--max-body).
 *
 * libevent 2.1's evhttp times a request out only per read (a client sending
 * a byte now and then is never timed out) and then closes the connection
 * without an answer. Here a request whose first byte came more than the
 * timeout ago and that is still not whole gets 408 Request Timeout, and its
 * connection is closed.
 *
 * What is known of a connection, by its descriptor:
 *   - the bytes read from it (a callback on its bufferevent's input, which
 *     this file makes for evhttp: evhttp_set_bevcb);
 *   - where the last whole request ended in them (the route handler says
 *     when a request is whole: deadline_request);
 *   - the requests being answered (their answer not yet written:
 *     deadline_complete, from access.c's on-complete callback). While one
 *     is, no deadline runs: a waiting or streaming answer is not the
 *     client's delay, and a request pipelined behind it is read when
 *     evhttp gets to it.
 * A request is partial when bytes were read past the last whole one and
 * nothing is being answered; its clock starts then. Its deadline is the
 * timeout plus a second per KiB received since (MIN_RATE): a big body
 * coming at least that fast is never cut, a trickle is.
 *
 * evhttp frees a connection without telling: the table keeps its entry
 * until the descriptor is used again. A connection's first byte resets
 * its descriptor's entry (the input callback is a different function until
 * then), so a new connection never inherits an old one's state, even with
 * the same descriptor and bufferevent address. Before anything is sent on
 * a descriptor, its peer address must still be the one recorded (a
 * descriptor closed and reused meanwhile by a Redis connection or a file
 * is left alone), and nothing may wait unsent in the socket (an answer
 * evhttp is still writing: the 408 waits for the next sweep). The 408 is
 * written to the socket directly and the socket shut down; evhttp then
 * reads the end of the connection and frees it as for any client that
 * went away.
 *
 * The same count bounds a request's size (--max-body): evhttp's own limit
 * answers with an HTML page, so evhttp is given none. A request whose
 * bytes (head and body as sent) pass --max-body plus HEAD_MAX gets 413
 * with the JSON error body, written to the socket directly, then the
 * connection's writing side is shut and whatever the client still sends
 * is read and dropped (a lingering close: a client still sending when a
 * socket closes would get a reset, which may destroy the 413 before it
 * reads it) until it closes. A body over --max-body but within the slack
 * is read whole: the route handler answers it 413 (server.c).
 */
#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <netinet/in.h>
#ifdef __linux__
#include <linux/sockios.h> /* SIOCOUTQ */
#endif

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>

#define SWEEP_MS 250
#define MIN_RATE 1024.0 /* bytes per second a partial request earns as time */
#define HEAD_MAX (64 * 1024) /* a request's line and headers, chunk sizes: past --max-body */

typedef struct conn_state {
    const void *bev;        /* the connection's identity (never dereferenced) */
    struct sockaddr_in6 peer; /* large enough for an IPv4 address too */
    socklen_t plen;
    unsigned long long read; /* bytes read from the connection */
    unsigned long long done; /* of which the whole requests so far */
    int answering;          /* requests whose answer is not written yet */
    int used;
    double since;           /* when the partial request began (0: none) */
    unsigned long long read_since; /* read when it began */
    int dropping;           /* answered 413: what comes is dropped */
} conn_state;

struct deadlines {
    double timeout_s;       /* 0: no deadline */
    unsigned long long max_request; /* --max-body + HEAD_MAX */
    long long too_large;    /* requests answered 413 here */
    conn_state *c;          /* by descriptor */
    size_t n;
    struct event *sweep;
    long long timed_out;
};

/* evhttp_set_bevcb passes no connection to the callbacks it makes: the
 * one server of the process. */
static struct deadlines *the_dl;

/* The entry of fd for the connection bev (a new one when it was another's
 * or none, or when fresh: the connection's first byte); NULL when out of
 * memory. */
static conn_state *entry(struct deadlines *dl, evutil_socket_t fd, const void *bev, int fresh) {
    if (fd < 0) return NULL;
    if ((size_t)fd >= dl->n) {
        size_t n = dl->n ? dl->n : 256;
        while (n <= (size_t)fd) n *= 2;
        conn_state *c = realloc(dl->c, n * sizeof *c);
        if (c == NULL) return NULL;
        memset(c + dl->n, 0, (n - dl->n) * sizeof *c);
        dl->c = c;
        dl->n = n;
    }
    conn_state *e = &dl->c[fd];
    if (fresh || !e->used || e->bev != bev) {
        memset(e, 0, sizeof *e);
        e->used = 1;
        e->bev = bev;
        e->plen = sizeof e->peer;
        if (getpeername(fd, (struct sockaddr *)&e->peer, &e->plen) != 0) e->plen = 0;
    }
    return e;
}

/* A request past the size bound: 413, the writing side shut, the rest
 * dropped (see the top of the file). */
static void too_large(struct deadlines *dl, struct bufferevent *bev, conn_state *e) {
    evutil_socket_t fd = bufferevent_getfd(bev);
    char body[160], msg[400];
    int blen = snprintf(body, sizeof body,
                        "{\"error\":\"the request is too large (--max-body %llu bytes)\"}\n",
                        dl->max_request - HEAD_MAX);
    int n = snprintf(msg, sizeof msg,
                     "HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\n"
                     "Content-Length: %d\r\nConnection: close\r\n\r\n%s",
                     blen, body);
    if (n > 0) (void)send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(fd, SHUT_WR);
    e->dropping = 1;
    e->since = 0;
    dl->too_large++;
}

static void count_input(struct bufferevent *bev, size_t added, int fresh) {
    struct deadlines *dl = the_dl;
    if (dl == NULL) return;
    conn_state *e = entry(dl, bufferevent_getfd(bev), bev, fresh);
    if (e == NULL) return;
    e->read += added;
    if (e->dropping) { /* (evhttp waits for a body that never comes, until the client closes) */
        evbuffer_drain(bufferevent_get_input(bev), added);
        return;
    }
    if (e->since == 0 && e->answering == 0) {
        e->since = serve_now_s();
        e->read_since = e->read - added;
    }
    if (e->answering == 0 && e->read - e->done > dl->max_request) {
        too_large(dl, bev, e);
        evbuffer_drain(bufferevent_get_input(bev), evbuffer_get_length(bufferevent_get_input(bev)));
    }
}

static void on_input(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg) {
    (void)buf;
    if (info->n_added) count_input(arg, info->n_added, 0);
}

/* The connection's first bytes: its entry starts afresh; on_input from now. */
static void on_first_input(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg) {
    if (info->n_added == 0) return;
    /* (safe inside a callback: the current entry may go, a new one is
     * first in the list, run from the next change on) */
    evbuffer_remove_cb(buf, on_first_input, arg);
    if (evbuffer_add_cb(buf, on_input, arg) == NULL) return; /* out of memory: untimed */
    count_input(arg, info->n_added, 1);
}

/* evhttp's bufferevent for a new connection, with the input watched. */
static struct bufferevent *make_bev(struct event_base *base, void *arg) {
    (void)arg;
    struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (bev && evbuffer_add_cb(bufferevent_get_input(bev), on_first_input, bev) == NULL) {
        bufferevent_free(bev);
        return NULL;
    }
    return bev;
}

/* The entry of req's connection (*bevp: its bufferevent); NULL: none. */
static conn_state *entry_of(struct deadlines *dl, struct evhttp_request *req,
                            struct bufferevent **bevp) {
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    *bevp = bev;
    return bev ? entry(dl, bufferevent_getfd(bev), bev, 0) : NULL;
}

/* The answer of a request was written: a request read meanwhile (bytes past
 * the whole ones) starts its clock now. */
void deadline_complete(server *s, struct evhttp_request *req) {
    struct deadlines *dl = s->deadlines;
    if (dl == NULL) return;
    struct bufferevent *bev;
    conn_state *e = entry_of(dl, req, &bev);
    if (e == NULL) return;
    if (e->answering > 0) e->answering--;
    e->since = e->answering == 0 && e->read > e->done ? serve_now_s() : 0;
    e->read_since = e->done; /* (what came after the whole ones counts as earned) */
}

void deadline_request(server *s, struct evhttp_request *req) {
    struct deadlines *dl = s->deadlines;
    if (dl == NULL) return;
    struct bufferevent *bev;
    conn_state *e = entry_of(dl, req, &bev);
    if (e == NULL) return;
    /* whole up to what evhttp has not taken from the input yet */
    size_t left = evbuffer_get_length(bufferevent_get_input(bev));
    e->done = e->read >= left ? e->read - left : 0;
    e->answering++;
    e->since = 0;
}

/* Is fd still e's connection, with nothing of an answer unsent? 1: yes;
 * 0: another descriptor now (or closed); -1: yes, but bytes wait unsent. */
static int ready_to_time_out(evutil_socket_t fd, const conn_state *e) {
    struct sockaddr_in6 a;
    socklen_t len = sizeof a;
    if (e->plen == 0 || getpeername(fd, (struct sockaddr *)&a, &len) != 0) return 0;
    if (len != e->plen || memcmp(&a, &e->peer, len) != 0) return 0;
#ifdef SIOCOUTQ
    int unsent = 0;
    if (ioctl(fd, SIOCOUTQ, &unsent) == 0 && unsent > 0) return -1;
#endif
    return 1;
}

static void time_out(struct deadlines *dl, evutil_socket_t fd) {
    char body[128], msg[320];
    int blen = snprintf(body, sizeof body,
                        "{\"error\":\"the request did not arrive whole within %g s "
                        "(--request-timeout)\"}\n",
                        dl->timeout_s);
    int n = snprintf(msg, sizeof msg,
                     "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
                     "Content-Length: %d\r\nConnection: close\r\n\r\n%s",
                     blen, body);
    /* (nothing is being answered: the socket's buffer is empty; a client
     * gone already gets nothing, and the shutdown is all there is to do) */
    if (n > 0) (void)send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(fd, SHUT_RDWR); /* evhttp reads the end and frees the connection */
    dl->timed_out++;
}

static void on_sweep(evutil_socket_t fd_unused, short what, void *arg) {
    (void)fd_unused, (void)what;
    struct deadlines *dl = arg;
    double now = serve_now_s();
    for (size_t fd = 0; fd < dl->n; fd++) {
        conn_state *e = &dl->c[fd];
        /* (a connection freed while answered keeps answering > 0 until its
         * descriptor's next connection sends its first byte) */
        if (!e->used || e->answering > 0 || e->since == 0 || e->dropping) continue;
        double earned = (double)(e->read - e->read_since) / MIN_RATE;
        if (now - e->since < dl->timeout_s + earned) continue;
        int ready = ready_to_time_out((evutil_socket_t)fd, e);
        if (ready < 0) continue; /* an answer is still being written */
        if (ready) time_out(dl, (evutil_socket_t)fd);
        memset(e, 0, sizeof *e);
    }
}

int deadline_start(server *s, long timeout_ms) {
    struct deadlines *dl = calloc(1, sizeof *dl);
    if (dl == NULL) return -1;
    dl->max_request = (unsigned long long)s->o.max_body + HEAD_MAX;
    if (timeout_ms > 0) {
        dl->timeout_s = (double)timeout_ms / 1000.0;
        dl->sweep = event_new(s->base, -1, EV_PERSIST, on_sweep, dl);
        if (dl->sweep == NULL) {
            free(dl);
            return -1;
        }
        struct timeval tv = {0, SWEEP_MS * 1000};
        event_add(dl->sweep, &tv);
    }
    the_dl = dl;
    s->deadlines = dl;
    evhttp_set_bevcb(s->http, make_bev, NULL);
    return 0;
}

long long deadline_timed_out(const server *s) {
    return s->deadlines ? s->deadlines->timed_out : 0;
}

long long deadline_too_large(const server *s) {
    return s->deadlines ? s->deadlines->too_large : 0;
}

void deadline_free(server *s) {
    struct deadlines *dl = s->deadlines;
    if (dl == NULL) return;
    if (dl->sweep) event_free(dl->sweep);
    free(dl->c);
    free(dl);
    if (the_dl == dl) the_dl = NULL;
    s->deadlines = NULL;
}
