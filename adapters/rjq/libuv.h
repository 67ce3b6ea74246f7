/*
 * rjq on libuv: header-only glue (static functions), so only programs that
 * use libuv link it. Include it in one .c file of your program.
 *
 *     uv_loop_t *loop = uv_default_loop();
 *     rjq_client *c;
 *     int rc = rjq_libuv_client_new(&c, loop, &opts);
 *     ...
 *     uv_run(loop, UV_RUN_DEFAULT);
 *
 * Built on rjq_io_ops (rjq.h "Any event loop"): a uv_poll per socket the
 * client asks for, a uv_timer for its timer, and host names resolved with
 * uv_getaddrinfo (libuv's thread pool), again for every connect attempt.
 * rjq_client_free() closes the handles and cancels a lookup under way;
 * their memory goes in their close (or lookup) callbacks, so keep running
 * the loop until they have run, as for any libuv handle.
 *
 * Feature macros: uv.h needs POSIX (struct addrinfo, pthreads). In strict
 * ISO C (-std=c11) define _POSIX_C_SOURCE 200112L (or _DEFAULT_SOURCE,
 * _GNU_SOURCE) before the first #include; -std=gnu11 has them.
 */
#ifndef RJQ_LIBUV_H
#define RJQ_LIBUV_H

#include <stdlib.h>
#include <string.h>

#if defined(__GLIBC__) && !defined(__USE_XOPEN2K)
#error "rjq/libuv.h: uv.h needs POSIX: define _POSIX_C_SOURCE 200112L (or _DEFAULT_SOURCE) before the first #include, or build with -std=gnu11"
#else /* (the rest only with POSIX: the message above is the only error) */

#include <uv.h>

#include "rjq.h"

typedef struct rjq_libuv_io {
    uv_poll_t poll;
    int fd;
    struct rjq_libuv_glue *g;
    struct rjq_libuv_io *next;
} rjq_libuv_io;

typedef struct rjq_libuv_glue {
    uv_loop_t *loop;
    uv_timer_t timer;
    rjq_client *client;
    rjq_libuv_io *ios; /* one per socket watched */
    int firing;
} rjq_libuv_glue;

static void rjq_libuv_closed_(uv_handle_t *h) {
    free(h->data);
}

static void rjq_libuv_on_poll_(uv_poll_t *p, int status, int events) {
    rjq_libuv_io *w = RJQ_CAST(rjq_libuv_io *, p->data);
    int ev = ((events & UV_READABLE) ? RJQ_IO_READ : 0) |
             ((events & UV_WRITABLE) ? RJQ_IO_WRITE : 0);
    if (status < 0) ev = RJQ_IO_READ | RJQ_IO_WRITE; /* an error: the client finds it by reading */
    rjq_client_handle_io(w->g->client, w->fd, ev);     /* may close w's poll, free the client */
}

static void rjq_libuv_socket_(void *arg, int fd, int what) {
    rjq_libuv_glue *g = RJQ_CAST(rjq_libuv_glue *, arg);
    rjq_libuv_io **p = &g->ios;
    while (*p && (*p)->fd != fd) p = &(*p)->next;
    rjq_libuv_io *w = *p;
    if (what == RJQ_IO_NONE) {
        if (w == NULL) return;
        *p = w->next;
        uv_poll_stop(&w->poll); /* before the fd closes */
        uv_close(RJQ_CAST(uv_handle_t *, RJQ_CAST(void *, &w->poll)), rjq_libuv_closed_);
        return;
    }
    if (w == NULL) {
        w = RJQ_CAST(rjq_libuv_io *, calloc(1, sizeof *w));
        /* (a socket the client connected is a valid, unwatched fd: libuv
         * fails only out of memory, where it aborts too) */
        if (w == NULL || uv_poll_init_socket(g->loop, &w->poll, fd) != 0) abort();
        w->poll.data = w;
        w->fd = fd;
        w->g = g;
        w->next = g->ios;
        g->ios = w;
    }
    int events = ((what & RJQ_IO_READ) ? UV_READABLE : 0) |
                 ((what & RJQ_IO_WRITE) ? UV_WRITABLE : 0);
    uv_poll_start(&w->poll, events, rjq_libuv_on_poll_);
}

static void rjq_libuv_fire_(uv_timer_t *t) {
    rjq_libuv_glue *g = RJQ_CAST(rjq_libuv_glue *, t->data);
    g->firing = 1;
    rjq_client_handle_timeout(g->client); /* may free the client: cleanup */
    g->firing = 0;                        /* (g lives until the close callback) */
}

static void rjq_libuv_timer_(void *arg, long timeout_ms) {
    rjq_libuv_glue *g = RJQ_CAST(rjq_libuv_glue *, arg);
    if (timeout_ms < 0) {
        uv_timer_stop(&g->timer);
        return;
    }
    /* From inside the timer callback, "at once" means the next loop pass
     * (the rjq_io_ops contract): libuv before 1.45 would run it again in
     * the same pass. */
    if (timeout_ms == 0 && g->firing) timeout_ms = 1;
    uv_timer_start(&g->timer, rjq_libuv_fire_, RJQ_CAST(uint64_t, timeout_ms), 0);
}

/* From rjq_client_free(): every socket was told RJQ_IO_NONE already. */
static void rjq_libuv_cleanup_(void *arg) {
    rjq_libuv_glue *g = RJQ_CAST(rjq_libuv_glue *, arg);
    uv_timer_stop(&g->timer);
    uv_close(RJQ_CAST(uv_handle_t *, RJQ_CAST(void *, &g->timer)), rjq_libuv_closed_);
}

/* ---- host names: uv_getaddrinfo ------------------------------------------ */

typedef struct rjq_libuv_lookup {
    uv_getaddrinfo_t req;
    rjq_resolved_fn *done;
    void *arg;
    int cancelled;
} rjq_libuv_lookup;

/* From the loop, once; a cancelled lookup's too (UV_EAI_CANCELED, or its
 * answer when it was too late to cancel): only its memory goes then. */
static void rjq_libuv_resolved_(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
    rjq_libuv_lookup *l = RJQ_CAST(rjq_libuv_lookup *, req->data);
    char text[16][64];
    const char *addrs[16];
    size_t n = 0;
    for (struct addrinfo *a = res; status == 0 && !l->cancelled && a && n < 16; a = a->ai_next) {
        int rc = -1;
        const void *sa = a->ai_addr;
        if (a->ai_family == AF_INET)
            rc = uv_ip4_name(RJQ_CAST(const struct sockaddr_in *, sa), text[n], sizeof text[n]);
        else if (a->ai_family == AF_INET6)
            rc = uv_ip6_name(RJQ_CAST(const struct sockaddr_in6 *, sa), text[n], sizeof text[n]);
        if (rc != 0) continue;
        size_t i = 0;
        while (i < n && strcmp(addrs[i], text[n]) != 0) i++;
        if (i == n) { /* one of each */
            addrs[n] = text[n];
            n++;
        }
    }
    if (!l->cancelled) {
        if (status != 0) l->done(l->arg, uv_strerror(status), NULL, 0);
        else if (n == 0) l->done(l->arg, "no IPv4 or IPv6 address", NULL, 0);
        else l->done(l->arg, NULL, addrs, n);
    }
    uv_freeaddrinfo(res);
    free(l);
}

static void *rjq_libuv_resolve_(void *arg, const char *host, rjq_resolved_fn *done,
                                void *done_arg) {
    rjq_libuv_glue *g = RJQ_CAST(rjq_libuv_glue *, arg);
    rjq_libuv_lookup *l = RJQ_CAST(rjq_libuv_lookup *, calloc(1, sizeof *l));
    if (l == NULL) {
        done(done_arg, "out of memory", NULL, 0);
        return NULL;
    }
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    l->done = done;
    l->arg = done_arg;
    l->req.data = l;
    int rc = uv_getaddrinfo(g->loop, &l->req, rjq_libuv_resolved_, host, NULL, &hints);
    if (rc != 0) {
        free(l);
        done(done_arg, uv_strerror(rc), NULL, 0);
        return NULL;
    }
    return l;
}

static void rjq_libuv_resolve_cancel_(void *arg, void *handle) {
    rjq_libuv_lookup *l = RJQ_CAST(rjq_libuv_lookup *, handle);
    (void)arg;
    l->cancelled = 1;
    uv_cancel(RJQ_CAST(uv_req_t *, RJQ_CAST(void *, &l->req))); /* its callback frees l */
}

/*
 * Create a client running on `loop`. Same contract as rjq_client_new();
 * the glue is freed by rjq_client_free() (once the loop ran the close
 * callbacks). Host names are resolved (uv_getaddrinfo).
 */
static inline int rjq_libuv_client_new(rjq_client **out, uv_loop_t *loop,
                                       const rjq_client_options *opts) {
    if (out == NULL || loop == NULL) return RJQ_EINVAL;
    rjq_libuv_glue *g = RJQ_CAST(rjq_libuv_glue *, calloc(1, sizeof *g));
    if (g == NULL) return RJQ_ENOMEM;
    g->loop = loop;
    if (uv_timer_init(loop, &g->timer) != 0) {
        free(g);
        return RJQ_ENOMEM;
    }
    g->timer.data = g;
    rjq_io_ops io = RJQ_IO_OPS_INIT;
    io.arg = g;
    io.socket = rjq_libuv_socket_;
    io.timer = rjq_libuv_timer_;
    io.cleanup = rjq_libuv_cleanup_;
    io.resolve = rjq_libuv_resolve_;
    io.resolve_cancel = rjq_libuv_resolve_cancel_;
    int rc = rjq_client_new_io(out, opts, &io);
    if (rc != RJQ_OK) {
        uv_close(RJQ_CAST(uv_handle_t *, RJQ_CAST(void *, &g->timer)), rjq_libuv_closed_);
        return rc;
    }
    g->client = *out;
    return RJQ_OK;
}

#endif /* POSIX */
#endif /* RJQ_LIBUV_H */
