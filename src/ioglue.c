/*
 * rjq_io_ops (rjq.h "Any event loop"): the loop hooks the core asks for
 * (rjq_loop_ops: attach, set_timer, watch_fd, resolve, cleanup), built on
 * the application's two callbacks: which descriptors to watch for what,
 * and when the client's timer is due. hiredis' contexts are driven here
 * through their ev hooks (no hiredis adapter), and so are the sockets the
 * core watches itself (watch_fd).
 *
 * Writes: when a command is queued on a connected context, it is written
 * at the end of the rjq_client_handle_io() or rjq_client_handle_timeout()
 * call that queued it (outside them: at the next timer, armed for 0), not
 * after a round through the loop for writability; only a write that left
 * output behind (the socket is full), or a connect, waits for
 * RJQ_IO_WRITE. Reads: RJQ_IO_READ stays asked for while hiredis reads, so
 * the application changes nothing per request. A connected plain socket
 * is read here, straight into its reader's buffer (do_read).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "compat.h"
#include "core_private.h"
#include "readin.h"
#include "validate.h"

typedef struct io_glue io_glue;

typedef struct io_watch {
    io_glue *g;
    struct io_watch *next;
    int fd;
    int told;               /* what the application was last told for fd */
    redisAsyncContext *ac;  /* a hiredis context; NULL: a watch_fd socket */
    int reading;            /* hiredis reads */
    int waiting;            /* hiredis writes once the socket is writable */
    int flush;              /* hiredis has output: write it at the end of this call */
    int in_write;
    rjq_fd_fn *cb;          /* watch_fd */
    void *arg;
    int want;               /* watch_fd: RJQ_IO_READ | RJQ_IO_WRITE */
    int busy, dead;         /* in use by a dispatch; gone (freed by the dispatch) */
} io_watch;

struct io_glue {
    rjq_io_ops io;
    rjq_client *c;
    io_watch *watches;
    int flush_soon;   /* the application's timer is at 0 for a flush */
    int dispatching;  /* inside rjq_client_handle_io */
    int closed;       /* cleanup ran inside it: freed at its end */
};

static void after_timers(rjq_client *c);

static void tell(io_watch *w) {
    int what = w->want;
    if (w->ac) what = (w->reading ? RJQ_IO_READ : 0) | (w->waiting ? RJQ_IO_WRITE : 0);
    if (w->dead) what = RJQ_IO_NONE;
    if (what == w->told) return;
    w->told = what;
    w->g->io.socket(w->g->io.arg, w->fd, what);
}

static io_watch *watch_new(io_glue *g, int fd) {
    io_watch *w = calloc(1, sizeof *w);
    if (w == NULL) return NULL;
    w->g = g;
    w->fd = fd;
    w->next = g->watches;
    g->watches = w;
    return w;
}

/* The watch is over: unlinked, the application told, freed now or by the
 * dispatch that uses it. */
static void watch_end(io_watch *w) {
    io_glue *g = w->g;
    io_watch **p = &g->watches;
    while (*p && *p != w) p = &(*p)->next;
    if (*p) *p = w->next;
    w->dead = 1;
    w->ac = NULL;
    tell(w);
    if (!w->busy) free(w);
}

static io_watch *watch_find(io_glue *g, int fd) {
    for (io_watch *w = g->watches; w; w = w->next)
        if (w->fd == fd) return w;
    return NULL;
}

/* ---- the client's timer ------------------------------------------------ */

/* What the application's timer should say for the client's own timer. */
static long armed_in(const rjq_client *c) {
    if (c->armed_due == UINT64_MAX) return -1;
    uint64_t now = rjq__now_ms();
    return c->armed_due > now ? (long)(c->armed_due - now) : 0;
}

static void set_timer(void *loop, long timeout_ms) {
    io_glue *g = loop;
    if (g->flush_soon) return; /* at 0 already; after_timers tells the rest */
    g->io.timer(g->io.arg, timeout_ms);
}

/* Output queued outside any dispatch: written at the next timer. */
static void flush_later(io_glue *g) {
    if (g->dispatching || g->flush_soon) return;
    g->flush_soon = 1;
    g->io.timer(g->io.arg, 0);
}

/* ---- hiredis contexts ---------------------------------------------------- */

/* A context's socket is readable. hiredis' own read (redisAsyncHandleRead)
 * reads into a buffer on its stack and copies that into the reader's: a
 * connected plain socket is read here straight into the reader's buffer
 * (readin.h) and its replies handed to their callbacks as hiredis' read
 * then does (re-arm the read, redisProcessCallbacks). hiredis reads
 * itself while it connects, a TLS session (its privctx, 1.x), and once
 * the context has an error. A failed read is set on the context as
 * hiredis sets it (__redisSetError's codes and words), and hiredis' read,
 * which returns at once on a context's error, drops the connection.
 * A read that got all it asked for is followed by another once its
 * replies ran (rjq__readin_asked): a push or a fetch of 16 KiB and more
 * comes from Redis in one write, and was read 16 KiB per loop turn, each
 * turn an epoll_wait more (bench/README.md "The 16 KiB awaited job's
 * tail"). At most DRAIN_MAX bytes per call, so that one busy connection
 * does not keep the others waiting. */
#define DRAIN_MAX (1u << 20)

static void do_read(io_watch *w) {
    redisAsyncContext *ac = w->ac;
    redisContext *c = &ac->c;
    if (!(c->flags & REDIS_CONNECTED) || c->err || rjq__hi_tls(c)) {
        redisAsyncHandleRead(ac); /* may end w */
        return;
    }
    size_t got = 0, asked;
    ssize_t n;
    while ((n = rjq__readin_asked(c->reader, c->fd, &asked)) > 0) {
        if (ac->ev.addRead) ac->ev.addRead(ac->ev.data);
        redisProcessCallbacks(ac); /* may end w */
        got += (size_t)n;
        /* (w stays while the dispatch holds it: ended, it is dead) */
        if (w->dead || w->ac != ac || w->g->closed || (size_t)n < asked || got >= DRAIN_MAX) return;
        if (!(c->flags & REDIS_CONNECTED) || c->err) return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n == 0) {
        c->err = REDIS_ERR_EOF;
        snprintf(c->errstr, sizeof c->errstr, "%s", "Server closed the connection");
    } else if (errno == ENOMEM) {
        c->err = REDIS_ERR_OOM;
        snprintf(c->errstr, sizeof c->errstr, "%s", "Out of memory");
    } else if (errno == EINVAL && c->reader->err) {
        c->err = c->reader->err;
        snprintf(c->errstr, sizeof c->errstr, "%s", c->reader->errstr);
    } else {
        int e = errno;
        c->err = REDIS_ERR_IO;
        snprintf(c->errstr, sizeof c->errstr, "%s", strerror(e));
    }
    redisAsyncHandleRead(ac); /* drops the connection: may end w */
}

static void do_write(io_watch *w) {
    w->flush = 0;
    w->in_write = 1;
    redisAsyncHandleWrite(w->ac); /* may end w (hiredis frees the context) */
    w->in_write = 0;
}

/* Write what every context queued; a write may queue more elsewhere (an
 * error's callbacks) or end watches. */
static void flush_all(io_glue *g) {
    for (;;) {
        io_watch *w = g->watches;
        while (w && !(w->flush && !w->waiting && w->ac)) w = w->next;
        if (w == NULL) return;
        w->busy++;
        do_write(w);
        if (--w->busy == 0 && w->dead) free(w);
    }
}

static void ev_add_read(void *data) {
    io_watch *w = data;
    w->reading = 1;
    tell(w);
}

static void ev_del_read(void *data) {
    io_watch *w = data;
    w->reading = 0;
    tell(w);
}

/* While connecting, or when a write just left output behind, wait for
 * writability; otherwise write at the end of this call. */
static void ev_add_write(void *data) {
    io_watch *w = data;
    if (w->waiting) return;
    if (w->in_write || !(w->ac->c.flags & REDIS_CONNECTED)) {
        w->waiting = 1;
        tell(w);
        return;
    }
    w->flush = 1;
    flush_later(w->g);
}

static void ev_del_write(void *data) {
    io_watch *w = data;
    w->flush = 0;
    if (!w->waiting) return;
    w->waiting = 0;
    tell(w);
}

/* hiredis calls this before it closes the socket. */
static void ev_cleanup(void *data) {
    watch_end(data);
}

static int attach(void *loop, struct redisAsyncContext *ac) {
    io_glue *g = loop;
    if (ac->ev.data != NULL) return -1;
    io_watch *w = watch_new(g, ac->c.fd);
    if (w == NULL) return -1;
    w->ac = ac;
    ac->ev.data = w;
    ac->ev.addRead = ev_add_read;
    ac->ev.delRead = ev_del_read;
    ac->ev.addWrite = ev_add_write;
    ac->ev.delWrite = ev_del_write;
    ac->ev.cleanup = ev_cleanup;
    /* read, and wait for the connect to complete */
    w->reading = 1;
    w->waiting = 1;
    tell(w);
    return 0;
}

/* ---- sockets the core connected itself ----------------------------------- */

static void *watch_fd(void *loop, int fd, int want_read, int want_write, rjq_fd_fn *cb, void *arg) {
    io_watch *w = watch_new(loop, fd);
    if (w == NULL) return NULL;
    w->cb = cb;
    w->arg = arg;
    w->want = (want_read ? RJQ_IO_READ : 0) | (want_write ? RJQ_IO_WRITE : 0);
    tell(w);
    return w;
}

static void unwatch_fd(void *loop, void *handle) {
    (void)loop;
    watch_end(handle);
}

/* ---- host names, the end ------------------------------------------------- */

static void *resolve(void *loop, const char *host, rjq_resolved_fn *done, void *arg) {
    io_glue *g = loop;
    return g->io.resolve(g->io.arg, host, done, arg);
}

static void resolve_cancel(void *loop, void *handle) {
    io_glue *g = loop;
    g->io.resolve_cancel(g->io.arg, handle);
}

/* From rjq_client_free(): every context and link is closed by now. */
static void cleanup(void *loop) {
    io_glue *g = loop;
    while (g->watches) watch_end(g->watches); /* (none: each told NONE already) */
    g->io.timer(g->io.arg, -1);
    if (g->io.cleanup) g->io.cleanup(g->io.arg);
    if (g->dispatching) g->closed = 1; /* rjq_client_handle_io frees it */
    else free(g);
}

/* ---- the application's calls --------------------------------------------- */

/* End of rjq_client_handle_timeout(): write what its timers queued, then
 * give the application the client's own timer again. */
static void after_timers(rjq_client *c) {
    io_glue *g = c->loop;
    flush_all(g);
    if (g->flush_soon) {
        g->flush_soon = 0;
        g->io.timer(g->io.arg, armed_in(c));
    }
}

void rjq_client_handle_io(rjq_client *c, int fd, int events) {
    if (c == NULL || c->after_timers != after_timers || c->closing) return;
    io_glue *g = c->loop;
    io_watch *w = watch_find(g, fd);
    if (w == NULL) return;
    /* No rjq__enter here: a free inside a reply's callback completes as
     * that callback returns (the core's own rule), so replies read in the
     * same pass but not yet worked out are cancelled, not reported after
     * the free. g stays until the end of this call (dispatching). */
    g->dispatching++;
    w->busy++;
    int r = (events & RJQ_IO_READ) && (w->told & RJQ_IO_READ);
    int wr = (events & RJQ_IO_WRITE) && (w->told & RJQ_IO_WRITE);
    if (w->ac) {
        if (r) do_read(w); /* may end w */
        if (wr && !w->dead && w->waiting) do_write(w);
    } else if (r || wr) {
        w->cb(w->arg, r, wr); /* may end w */
    }
    if (--w->busy == 0 && w->dead) free(w);
    if (--g->dispatching == 0) {
        if (g->closed) free(g); /* c went inside: every watch ended */
        else flush_all(g);
    }
}

int rjq_client_new_io(rjq_client **out, const rjq_client_options *opts, const rjq_io_ops *given) {
    char why[RJQ__ERRMSG_MAX];
    rjq_io_ops io;
    if (out == NULL || given == NULL) {
        rjq__client_new_failed("rjq_client_new_io: out and io are needed");
        return RJQ_EINVAL;
    }
    *out = NULL;
    int rc = rjq__sized_take(&io, sizeof io, given, "rjq_io_ops", why, sizeof why);
    if (rc != RJQ_OK) {
        rjq__client_new_failed(why);
        return rc;
    }
    if (io.socket == NULL || io.timer == NULL || (io.resolve && io.resolve_cancel == NULL)) {
        rjq__client_new_failed("rjq_io_ops: socket and timer are needed, "
                               "and resolve_cancel with resolve");
        return RJQ_EINVAL;
    }
    io_glue *g = calloc(1, sizeof *g);
    if (g == NULL) {
        rjq__client_new_failed("out of memory");
        return RJQ_ENOMEM;
    }
    g->io = io;
    rjq_loop_ops ops = RJQ_LOOP_OPS_INIT;
    ops.attach = attach;
    ops.set_timer = set_timer;
    ops.cleanup = cleanup;
    ops.watch_fd = watch_fd;
    ops.unwatch_fd = unwatch_fd;
    if (io.resolve) {
        ops.resolve = resolve;
        ops.resolve_cancel = resolve_cancel;
    }
    rc = rjq_client_new(out, opts, &ops, g);
    if (rc != RJQ_OK) {
        while (g->watches) watch_end(g->watches); /* (none: no connect started) */
        free(g);
        return rc;
    }
    g->c = *out;
    g->c->after_timers = after_timers;
    return RJQ_OK;
}
