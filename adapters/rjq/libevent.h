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
 * Built on rjq_io_ops (rjq.h "Any event loop"), like the libev, libuv and
 * GLib glue: the client tells which sockets to watch for what and when its
 * timer is due. Two things here are about latency and system calls, not
 * correctness:
 *
 * - I/O. Each socket gets a persistent read event (added once, not
 *   re-added after every read) and a write event added only while the
 *   client waits for writability (a connect, a full socket): rjq_io_ops
 *   writes what a call queued at its end, without a round through the loop.
 *   That is one epoll_wait and two epoll_ctl calls fewer per request than
 *   hiredis' own adapter (redisLibeventAttach).
 * - The client's single timer. "Fire at once" (0 ms) from outside the timer
 *   callback activates the timer event for this loop pass, so a batch the
 *   client gathers (completions, enqueues) goes out before the loop sleeps.
 *   From inside the timer callback it waits for the next pass, as the
 *   rjq_io_ops contract says, so the client cannot keep the loop spinning.
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

#include "rjq.h"

/* ---- the glue ------------------------------------------------------------ */

typedef struct rjq_libevent_io rjq_libevent_io;

typedef struct rjq_libevent_glue {
    struct event_base *base;
    struct event *timer;
    rjq_client *client;
    rjq_libevent_io *ios;   /* one per socket watched */
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

/* ---- sockets ------------------------------------------------------------- */

struct rjq_libevent_io {
    rjq_libevent_glue *g;
    rjq_libevent_io *next;
    int fd;
    struct event *rev; /* EV_READ | EV_PERSIST */
    struct event *wev; /* EV_WRITE | EV_PERSIST */
    int reading, writing; /* rev, wev added */
};

static void rjq_libevent_on_read_(evutil_socket_t fd, short what, void *arg) {
    rjq_libevent_io *w = RJQ_CAST(rjq_libevent_io *, arg);
    (void)what;
    rjq_client_handle_io(w->g->client, RJQ_CAST(int, fd), RJQ_IO_READ); /* may free w, the glue */
}

static void rjq_libevent_on_write_(evutil_socket_t fd, short what, void *arg) {
    rjq_libevent_io *w = RJQ_CAST(rjq_libevent_io *, arg);
    (void)what;
    rjq_client_handle_io(w->g->client, RJQ_CAST(int, fd), RJQ_IO_WRITE); /* may free w, the glue */
}

/* Add or delete ev as on says; *added tracks it (no system call when it
 * stays as it is). */
static void rjq_libevent_want_(struct event *ev, int on, int *added) {
    if (on && !*added) {
        /* (cannot fail on a valid, open socket but out of memory: no way on) */
        if (event_add(ev, NULL) != 0) abort();
        *added = 1;
    } else if (!on && *added) {
        event_del(ev);
        *added = 0;
    }
}

/* rjq_io_ops.socket. RJQ_IO_NONE comes before the fd closes (libevent
 * allows event_free from inside the event's own callback). */
static void rjq_libevent_socket_(void *arg, int fd, int what) {
    rjq_libevent_glue *g = RJQ_CAST(rjq_libevent_glue *, arg);
    rjq_libevent_io **p = &g->ios;
    while (*p && (*p)->fd != fd) p = &(*p)->next;
    rjq_libevent_io *w = *p;
    if (what == RJQ_IO_NONE) {
        if (w == NULL) return;
        *p = w->next;
        event_free(w->rev);
        event_free(w->wev);
        free(w);
        return;
    }
    if (w == NULL) {
        w = RJQ_CAST(rjq_libevent_io *, calloc(1, sizeof *w));
        if (w == NULL) abort(); /* (the rjq_io_ops contract: socket cannot fail) */
        w->g = g;
        w->fd = fd;
        w->rev = event_new(g->base, fd, EV_READ | EV_PERSIST, rjq_libevent_on_read_, w);
        w->wev = event_new(g->base, fd, EV_WRITE | EV_PERSIST, rjq_libevent_on_write_, w);
        if (w->rev == NULL || w->wev == NULL) abort();
        w->next = g->ios;
        g->ios = w;
    }
    rjq_libevent_want_(w->rev, (what & RJQ_IO_READ) != 0, &w->reading);
    rjq_libevent_want_(w->wev, (what & RJQ_IO_WRITE) != 0, &w->writing);
}

/* ---- the client's timer, the end ----------------------------------------- */

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

/* rjq_io_ops.timer */
static void rjq_libevent_timer_(void *arg, long timeout_ms) {
    rjq_libevent_glue *g = RJQ_CAST(rjq_libevent_glue *, arg);
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

/* rjq_io_ops.cleanup: every socket was told RJQ_IO_NONE already. */
static void rjq_libevent_cleanup_(void *arg) {
    rjq_libevent_glue *g = RJQ_CAST(rjq_libevent_glue *, arg);
    g->closing = 1;
    rjq_libevent_release_(g); /* else the last callback that needs it does */
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

static inline void *rjq_libevent_resolve_(void *glue, const char *host, rjq_resolved_fn *done,
                                          void *arg) {
    rjq_libevent_glue *g = RJQ_CAST(rjq_libevent_glue *, glue);
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

static inline void rjq_libevent_resolve_cancel_(void *glue, void *handle) {
    rjq_libevent_lookup *l = RJQ_CAST(rjq_libevent_lookup *, handle);
    (void)glue;
    l->cancelled = 1;
    evdns_getaddrinfo_cancel(l->req); /* its callback (now or later) frees l */
}

#endif /* RJQ_LIBEVENT_HAVE_DNS */

/* resolve, resolve_cancel: rjq_io_ops' (NULL: names refused). */
static inline int rjq_libevent_client_make_(
    rjq_client **out, struct event_base *base, struct evdns_base *dns,
    void (*free_dns)(struct evdns_base *, int), const rjq_client_options *opts,
    void *(*resolve)(void *, const char *, rjq_resolved_fn *, void *),
    void (*resolve_cancel)(void *, void *)) {
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
    rjq_io_ops io = RJQ_IO_OPS_INIT;
    io.arg = g;
    io.socket = rjq_libevent_socket_;
    io.timer = rjq_libevent_timer_;
    io.cleanup = rjq_libevent_cleanup_;
    io.resolve = resolve;
    io.resolve_cancel = resolve_cancel;
    int rc = rjq_client_new_io(out, opts, &io);
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
    if (out == NULL || base == NULL) return RJQ_EINVAL;
    return rjq_libevent_client_make_(out, base, NULL, NULL, opts, NULL, NULL);
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
    int own = dns == NULL;
    if (out == NULL || base == NULL) return RJQ_EINVAL;
    if (own) {
        /* DISABLE_WHEN_INACTIVE: an idle resolver keeps no loop running */
        dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                                       EVDNS_BASE_DISABLE_WHEN_INACTIVE);
        if (dns == NULL) return RJQ_ENOMEM;
    }
    /* (nothing here is emitted unless this is called: the glue without
     * names links without libevent_extra) */
    return rjq_libevent_client_make_(out, base, dns, own ? rjq_libevent_dns_free_ : NULL, opts,
                                     rjq_libevent_resolve_, rjq_libevent_resolve_cancel_);
}
#endif /* RJQ_LIBEVENT_HAVE_DNS */

#endif /* RJQ_LIBEVENT_H */
