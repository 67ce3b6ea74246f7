/*
 * rjq on libevent: header-only glue (static functions), so only programs
 * that use libevent link it. Include it in one .c file of your program.
 *
 *     struct event_base *base = event_base_new();
 *     rjq_client *c;
 *     int rc = rjq_libevent_client_new(&c, base, &opts);
 *     ...
 *     event_base_dispatch(base);
 *
 * rjq_libevent_client_new_dns() also resolves host names (redis://redis:6379),
 * with libevent's asynchronous resolver, evdns: link libevent_extra too
 * (or -levent). rjq_libevent_client_new() needs only libevent_core and
 * takes numeric addresses and "localhost". The resolver needs POSIX's
 * struct addrinfo: in strict ISO C (-std=c11) define _POSIX_C_SOURCE
 * 200112L (or _DEFAULT_SOURCE) before the first #include, else only
 * rjq_libevent_client_new() is there (RJQ_LIBEVENT_HAVE_DNS tells).
 *
 * Two things here are about latency and system calls, not correctness;
 * hiredis' own adapter (redisLibeventAttach) and an evtimer would work too:
 *
 * - I/O. Each hiredis context gets a persistent read event (added once, not
 *   re-added after every read) and writes without waiting for the loop:
 *   hiredis asks to write when a command is queued, and the glue writes
 *   later in the same loop pass (a manually activated event), after the
 *   code that queued it returned. Only when the socket is full does it wait
 *   for writability. That is one epoll_wait and two epoll_ctl calls fewer
 *   per request.
 * - The client's single timer. "Fire at once" (0 ms) from outside the timer
 *   callback activates the timer event for this loop pass, so a batch the
 *   client gathers (completions, enqueues) goes out before the loop sleeps.
 *   From inside the timer callback it waits for the next pass, as the
 *   loop-ops contract says, so the client cannot keep the loop spinning.
 */
#ifndef RJQ_LIBEVENT_H
#define RJQ_LIBEVENT_H

#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

/* struct addrinfo is there (glibc says so once its first header was read:
 * <stdlib.h> above) */
#if (defined(__GLIBC__) && defined(__USE_XOPEN2K)) || (!defined(__GLIBC__) && !defined(__STRICT_ANSI__))
#define RJQ_LIBEVENT_HAVE_DNS 1
#include <netdb.h>
#include <netinet/in.h>
#include <event2/dns.h>
#include <event2/util.h>
#else
struct evdns_base;
#endif
#include <hiredis/hiredis.h>
#include <hiredis/async.h>

#include "rjq.h"

/* ---- hiredis I/O -------------------------------------------------------- */

typedef struct rjq_libevent_io {
    redisAsyncContext *ac;
    struct event *rev;   /* EV_READ | EV_PERSIST */
    struct event *wev;   /* EV_WRITE | EV_PERSIST: the socket has room again */
    struct event *flush; /* manually activated: write what hiredis queued */
    int reading, waiting, flushing, in_write, freed;
} rjq_libevent_io;


static void rjq_libevent_on_read_(evutil_socket_t fd, short what, void *arg) {
    rjq_libevent_io *e = RJQ_CAST(rjq_libevent_io *, arg);
    (void)fd;
    (void)what;
    redisAsyncHandleRead(e->ac); /* may free e (cleanup); e unused after */
}

/* Write now. hiredis may free the context (and so call cleanup) from
 * inside: cleanup then leaves freeing e to us. */
static void rjq_libevent_write_(rjq_libevent_io *e) {
    e->in_write = 1;
    redisAsyncHandleWrite(e->ac);
    if (e->freed) {
        free(e);
        return;
    }
    e->in_write = 0;
}

static void rjq_libevent_on_writable_(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    rjq_libevent_write_(RJQ_CAST(rjq_libevent_io *, arg));
}

static void rjq_libevent_on_flush_(evutil_socket_t fd, short what, void *arg) {
    rjq_libevent_io *e = RJQ_CAST(rjq_libevent_io *, arg);
    (void)fd;
    (void)what;
    e->flushing = 0;
    if (!e->waiting) rjq_libevent_write_(e);
}

/* Watch (or stop watching) with event ev; *on says whether it is added. */
static void rjq_libevent_watch_(struct event *ev, int *on) {
    if (!*on && event_add(ev, NULL) == 0) *on = 1;
}

static void rjq_libevent_unwatch_(struct event *ev, int *on) {
    if (*on) event_del(ev);
    *on = 0;
}

static void rjq_libevent_add_read_(void *data) {
    rjq_libevent_io *e = RJQ_CAST(rjq_libevent_io *, data);
    rjq_libevent_watch_(e->rev, &e->reading);
}

static void rjq_libevent_del_read_(void *data) {
    rjq_libevent_io *e = RJQ_CAST(rjq_libevent_io *, data);
    rjq_libevent_unwatch_(e->rev, &e->reading);
}

/* hiredis has output to send. While connecting, or when a write just left
 * output behind (the socket is full), wait for writability; otherwise
 * write later in this loop pass. */
static void rjq_libevent_add_write_(void *data) {
    rjq_libevent_io *e = RJQ_CAST(rjq_libevent_io *, data);
    if (e->waiting) return;
    if (e->in_write || !(e->ac->c.flags & REDIS_CONNECTED)) {
        rjq_libevent_watch_(e->wev, &e->waiting);
        return;
    }
    if (!e->flushing) {
        e->flushing = 1;
        event_active(e->flush, EV_WRITE, 1);
    }
}

static void rjq_libevent_del_write_(void *data) {
    rjq_libevent_io *e = RJQ_CAST(rjq_libevent_io *, data);
    rjq_libevent_unwatch_(e->wev, &e->waiting);
}

/* hiredis calls this before it closes the socket: the events go now,
 * while their fd is still open. */
static void rjq_libevent_io_cleanup_(void *data) {
    rjq_libevent_io *e = RJQ_CAST(rjq_libevent_io *, data);
    event_free(e->rev);
    event_free(e->wev);
    event_free(e->flush);
    if (e->in_write) e->freed = 1; /* rjq_libevent_write_ frees e */
    else free(e);
}

static int rjq_libevent_io_attach_(redisAsyncContext *ac, struct event_base *base) {
    if (ac->ev.data != NULL) return -1;
    rjq_libevent_io *e = RJQ_CAST(rjq_libevent_io *, calloc(1, sizeof *e));
    if (e == NULL) return -1;
    e->ac = ac;
    e->rev = event_new(base, ac->c.fd, EV_READ | EV_PERSIST, rjq_libevent_on_read_, e);
    e->wev = event_new(base, ac->c.fd, EV_WRITE | EV_PERSIST, rjq_libevent_on_writable_, e);
    e->flush = event_new(base, -1, 0, rjq_libevent_on_flush_, e);
    if (e->rev == NULL || e->wev == NULL || e->flush == NULL) {
        if (e->rev) event_free(e->rev);
        if (e->wev) event_free(e->wev);
        if (e->flush) event_free(e->flush);
        free(e);
        return -1;
    }
    ac->ev.data = e;
    ac->ev.addRead = rjq_libevent_add_read_;
    ac->ev.delRead = rjq_libevent_del_read_;
    ac->ev.addWrite = rjq_libevent_add_write_;
    ac->ev.delWrite = rjq_libevent_del_write_;
    ac->ev.cleanup = rjq_libevent_io_cleanup_;
    /* Like hiredis' adapter: read, and wait for the connect to complete. */
    rjq_libevent_add_read_(e);
    rjq_libevent_add_write_(e);
    return 0;
}

/* ---- the client's timer -------------------------------------------------- */

typedef struct rjq_libevent_glue {
    struct event_base *base;
    struct event *timer;
    rjq_client *client;
    struct evdns_base *dns; /* rjq_libevent_client_new_dns */
    /* evdns_base_free for a resolver made here (a pointer, so that the
     * glue without names links without libevent_extra) */
    void (*free_dns)(struct evdns_base *, int);
    /* The glue goes once cleanup ran (closing) and nothing still needs
     * it: not its timer's callback (firing), not a lookup's callback
     * (in_lookup), no lookup evdns has yet to end (pending: a cancelled
     * one's end may be queued in the loop). */
    int closing, firing, in_lookup, pending;
} rjq_libevent_glue;

static int rjq_libevent_attach_(void *loop, struct redisAsyncContext *ac) {
    rjq_libevent_glue *g = RJQ_CAST(rjq_libevent_glue *, loop);
    return rjq_libevent_io_attach_(ac, g->base);
}

static void rjq_libevent_glue_free_(rjq_libevent_glue *g) {
    if (g->free_dns) g->free_dns(g->dns, 0);
    event_free(g->timer);
    free(g);
}

/* 1 when the glue is closing and nothing needs it any more. */
static int rjq_libevent_done_(const rjq_libevent_glue *g) {
    return g->closing && !g->firing && !g->in_lookup && !g->pending;
}

/* Free the glue once done (not from inside an evdns callback: see
 * rjq_libevent_release_dns_inside_). */
static void rjq_libevent_release_(rjq_libevent_glue *g) {
    if (rjq_libevent_done_(g)) rjq_libevent_glue_free_(g);
}

static void rjq_libevent_fire_(evutil_socket_t fd, short what, void *arg) {
    rjq_libevent_glue *g = RJQ_CAST(rjq_libevent_glue *, arg);
    (void)fd;
    (void)what;
    g->firing = 1;
    rjq_client_handle_timeout(g->client); /* may free the client: cleanup */
    g->firing = 0;
    rjq_libevent_release_(g);
}

static void rjq_libevent_set_timer_(void *loop, long timeout_ms) {
    rjq_libevent_glue *g = RJQ_CAST(rjq_libevent_glue *, loop);
    evtimer_del(g->timer);
    if (timeout_ms < 0) return;
    if (timeout_ms == 0 && !g->firing) {
        event_active(g->timer, EV_TIMEOUT, 1);
        return;
    }
    struct timeval tv;
    tv.tv_sec = timeout_ms / 1000;
    tv.tv_usec = (timeout_ms % 1000) * 1000;
    evtimer_add(g->timer, &tv);
}

/* ---- sockets the core connected itself (watch_fd) ------------------------ */

typedef struct rjq_libevent_fdw {
    struct event *ev; /* persistent */
    rjq_fd_fn *cb;
    void *arg;
} rjq_libevent_fdw;

static void rjq_libevent_on_fd_(evutil_socket_t fd, short what, void *arg) {
    rjq_libevent_fdw *w = RJQ_CAST(rjq_libevent_fdw *, arg);
    (void)fd;
    w->cb(w->arg, (what & EV_READ) != 0, (what & EV_WRITE) != 0); /* may unwatch: w freed */
}

static void *rjq_libevent_watch_fd_(void *loop, int fd, int want_read, int want_write,
                                    rjq_fd_fn *cb, void *arg) {
    rjq_libevent_glue *g = RJQ_CAST(rjq_libevent_glue *, loop);
    rjq_libevent_fdw *w = RJQ_CAST(rjq_libevent_fdw *, calloc(1, sizeof *w));
    if (w == NULL) return NULL;
    short what = RJQ_CAST(short, (want_read ? EV_READ : 0) | (want_write ? EV_WRITE : 0) | EV_PERSIST);
    w->cb = cb;
    w->arg = arg;
    w->ev = event_new(g->base, fd, what, rjq_libevent_on_fd_, w);
    if (w->ev == NULL || event_add(w->ev, NULL) != 0) {
        if (w->ev) event_free(w->ev);
        free(w);
        return NULL;
    }
    return w;
}

/* (libevent allows event_free from inside the event's own callback) */
static void rjq_libevent_unwatch_fd_(void *loop, void *handle) {
    rjq_libevent_fdw *w = RJQ_CAST(rjq_libevent_fdw *, handle);
    (void)loop;
    event_free(w->ev);
    free(w);
}

#ifdef RJQ_LIBEVENT_HAVE_DNS
/* ---- host names (evdns) ----------------------------------------------------
 * All static inline, so that a program that never calls
 * rjq_libevent_client_new_dns links without libevent_extra. */

typedef struct rjq_libevent_lookup {
    rjq_libevent_glue *g;
    struct evdns_getaddrinfo_request *req;
    rjq_resolved_fn *done;
    void *arg;
    int starting;  /* inside evdns_getaddrinfo */
    int answered;  /* its callback ran */
    int cancelled;
} rjq_libevent_lookup;

static inline void rjq_libevent_dns_free_later_(evutil_socket_t fd, short what, void *dns) {
    (void)fd;
    (void)what;
    evdns_base_free(RJQ_CAST(struct evdns_base *, dns), 1);
}

/* rjq_libevent_release_ from inside an evdns callback: a resolver made
 * here is freed once evdns is out of it. */
static inline void rjq_libevent_release_dns_inside_(rjq_libevent_glue *g) {
    if (!rjq_libevent_done_(g)) return;
    struct evdns_base *dns = g->free_dns ? g->dns : NULL;
    struct event_base *base = g->base;
    struct timeval now = {0, 0};
    g->free_dns = NULL;
    rjq_libevent_glue_free_(g);
    if (dns) event_base_once(base, -1, EV_TIMEOUT, rjq_libevent_dns_free_later_, dns, &now);
}

static inline void rjq_libevent_resolved_(int err, struct evutil_addrinfo *res, void *arg) {
    rjq_libevent_lookup *l = RJQ_CAST(rjq_libevent_lookup *, arg);
    rjq_libevent_glue *g = l->g;
    char text[16][64];
    const char *addrs[16];
    size_t n = 0;
    l->answered = 1;
    g->pending--;
    if (l->cancelled) { /* evdns may say so later, from the loop */
        if (res) evutil_freeaddrinfo(res);
        free(l);
        rjq_libevent_release_dns_inside_(g);
        return;
    }
    for (struct evutil_addrinfo *a = res; a != NULL && n < 16; a = a->ai_next) {
        const void *where = NULL;
        if (a->ai_family == AF_INET)
            where = &RJQ_CAST(struct sockaddr_in *, RJQ_CAST(void *, a->ai_addr))->sin_addr;
        else if (a->ai_family == AF_INET6)
            where = &RJQ_CAST(struct sockaddr_in6 *, RJQ_CAST(void *, a->ai_addr))->sin6_addr;
        if (where == NULL || evutil_inet_ntop(a->ai_family, where, text[n], sizeof text[n]) == NULL)
            continue;
        size_t i = 0;
        while (i < n && strcmp(addrs[i], text[n]) != 0) i++;
        if (i == n) { /* one of each */
            addrs[n] = text[n];
            n++;
        }
    }
    g->in_lookup++;
    if (err != 0) l->done(l->arg, evutil_gai_strerror(err), NULL, 0);
    else if (n == 0) l->done(l->arg, "no IPv4 or IPv6 address", NULL, 0);
    else l->done(l->arg, NULL, addrs, n);
    g->in_lookup--;
    if (res) evutil_freeaddrinfo(res);
    if (!l->starting) free(l); /* else rjq_libevent_resolve_ frees it */
    rjq_libevent_release_dns_inside_(g);
}

/* A resolver made here goes with the client: lookups still pending (a
 * cancelled one's end may be queued in the loop) end now, with their
 * callbacks, which free their records. */
static inline void rjq_libevent_dns_free_(struct evdns_base *dns, int fail_requests) {
    (void)fail_requests;
    evdns_base_free(dns, 1);
}

static inline void *rjq_libevent_resolve_(void *loop, const char *host, rjq_resolved_fn *done,
                                   void *arg) {
    rjq_libevent_glue *g = RJQ_CAST(rjq_libevent_glue *, loop);
    rjq_libevent_lookup *l = RJQ_CAST(rjq_libevent_lookup *, calloc(1, sizeof *l));
    if (l == NULL) {
        done(arg, "out of memory", NULL, 0);
        return NULL;
    }
    struct evutil_addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    l->g = g;
    l->done = done;
    l->arg = arg;
    l->starting = 1;
    g->pending++;
    l->req = evdns_getaddrinfo(g->dns, host, NULL, &hints, rjq_libevent_resolved_, l);
    l->starting = 0;
    if (l->answered) { /* answered inside (a hosts file entry, an error) */
        free(l);
        return NULL;
    }
    return l;
}

static inline void rjq_libevent_resolve_cancel_(void *loop, void *handle) {
    rjq_libevent_lookup *l = RJQ_CAST(rjq_libevent_lookup *, handle);
    (void)loop;
    l->cancelled = 1;
    evdns_getaddrinfo_cancel(l->req); /* its callback (now or later) frees l */
}

#endif /* RJQ_LIBEVENT_HAVE_DNS */

static void rjq_libevent_cleanup_(void *loop) {
    rjq_libevent_glue *g = RJQ_CAST(rjq_libevent_glue *, loop);
    g->closing = 1;
    rjq_libevent_release_(g); /* else the last callback that needs it does */
}

static inline int rjq_libevent_client_make_(rjq_client **out, struct event_base *base,
                                            struct evdns_base *dns,
                                            void (*free_dns)(struct evdns_base *, int),
                                            const rjq_client_options *opts,
                                            const rjq_loop_ops *ops) {
    rjq_libevent_glue *g = RJQ_CAST(rjq_libevent_glue *, calloc(1, sizeof *g));
    if (g == NULL) {
        if (free_dns) free_dns(dns, 0);
        return RJQ_ENOMEM;
    }
    g->base = base;
    g->dns = dns;
    g->free_dns = free_dns;
    g->timer = evtimer_new(base, rjq_libevent_fire_, g);
    if (g->timer == NULL) {
        if (free_dns) free_dns(dns, 0);
        free(g);
        return RJQ_ENOMEM;
    }
    int rc = rjq_client_new(out, opts, ops, g);
    if (rc != RJQ_OK) {
        rjq_libevent_glue_free_(g);
        return rc;
    }
    g->client = *out;
    return RJQ_OK;
}

/*
 * Create a client running on `base`. Same contract as rjq_client_new();
 * the glue is freed by rjq_client_free(). Host names other than
 * "localhost" are refused (RJQ_EURL): see rjq_libevent_client_new_dns.
 */
static inline int rjq_libevent_client_new(rjq_client **out, struct event_base *base,
                                          const rjq_client_options *opts) {
    static const rjq_loop_ops ops = {
        sizeof(rjq_loop_ops), rjq_libevent_attach_, rjq_libevent_set_timer_, rjq_libevent_cleanup_,
        NULL, NULL, rjq_libevent_watch_fd_, rjq_libevent_unwatch_fd_};
    if (out == NULL || base == NULL) return RJQ_EINVAL;
    return rjq_libevent_client_make_(out, base, NULL, NULL, opts, &ops);
}

#ifdef RJQ_LIBEVENT_HAVE_DNS
/*
 * The same, resolving host names with evdns on `base`, again for every
 * connect attempt (IPv4 and IPv6 addresses, tried in turn). dns: your
 * evdns_base, or NULL for one made here from the system's resolver
 * settings (/etc/resolv.conf, /etc/hosts), freed with the client. Link
 * libevent_extra. Lookups cancelled by rjq_client_free() end from the
 * loop: run it once more before freeing your evdns_base or the
 * event_base (else the glue's last bytes stay allocated).
 */
static inline int rjq_libevent_client_new_dns(rjq_client **out, struct event_base *base,
                                              struct evdns_base *dns,
                                              const rjq_client_options *opts) {
    /* not static: nothing here may be emitted unless this is called (the
     * glue without names must link without libevent_extra); the client
     * keeps a copy */
    const rjq_loop_ops ops = {
        sizeof(rjq_loop_ops), rjq_libevent_attach_, rjq_libevent_set_timer_, rjq_libevent_cleanup_,
        rjq_libevent_resolve_, rjq_libevent_resolve_cancel_, rjq_libevent_watch_fd_,
        rjq_libevent_unwatch_fd_};
    int own = dns == NULL;
    if (out == NULL || base == NULL) return RJQ_EINVAL;
    if (own) {
        /* DISABLE_WHEN_INACTIVE: an idle resolver keeps no loop running */
        dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                                       EVDNS_BASE_DISABLE_WHEN_INACTIVE);
        if (dns == NULL) return RJQ_ENOMEM;
    }
    return rjq_libevent_client_make_(out, base, dns, own ? rjq_libevent_dns_free_ : NULL, opts, &ops);
}
#endif /* RJQ_LIBEVENT_HAVE_DNS */

#endif /* RJQ_LIBEVENT_H */
