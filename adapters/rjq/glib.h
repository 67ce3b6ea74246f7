/*
 * rjq on GLib: header-only glue (static functions), so only programs that
 * use GLib link it (pkg-config glib-2.0). Include it in one .c file of
 * your program.
 *
 *     GMainContext *ctx = NULL;  (NULL: the global default context)
 *     rjq_client *c;
 *     int rc = rjq_glib_client_new(&c, ctx, &opts);
 *     ...
 *     g_main_loop_run(loop);
 *
 * Built on rjq_io_ops (rjq.h "Any event loop"): one GSource per client for
 * its whole life, whose unix fds follow the client's sockets and whose
 * ready time is the client's timer, so a reconnect adds no source
 * (hiredis' own GLib adapter makes a GSource per connection and never
 * destroys it: one more per reconnect). rjq_client_free() destroys the
 * source (also from inside any callback); GLib frees it once it is out of
 * its dispatch. g_source_add_unix_fd needs GLib 2.36.
 * Host names: numeric addresses and "localhost" only.
 */
#ifndef RJQ_GLIB_H
#define RJQ_GLIB_H

#include <stdlib.h>

#include <glib.h>

#include "rjq.h"

typedef struct rjq_glib_fd {
    int fd;
    gpointer tag; /* g_source_add_unix_fd's */
    int seen;     /* the GIOCondition a dispatch saw */
} rjq_glib_fd;

typedef struct rjq_glib_source {
    GSource source; /* first: GLib allocates the struct */
    rjq_client *client;
    rjq_glib_fd *fds;
    size_t nfds, cap;
    int freed; /* cleanup ran: no more calls into the client */
} rjq_glib_source;

static GIOCondition rjq_glib_cond_(int what) {
    int c = ((what & RJQ_IO_READ) ? G_IO_IN : 0) | ((what & RJQ_IO_WRITE) ? G_IO_OUT : 0);
    return RJQ_CAST(GIOCondition, c);
}

static void rjq_glib_socket_(void *arg, int fd, int what) {
    rjq_glib_source *s = RJQ_CAST(rjq_glib_source *, arg);
    size_t i = 0;
    while (i < s->nfds && s->fds[i].fd != fd) i++;
    if (what == RJQ_IO_NONE) {
        if (i == s->nfds) return;
        g_source_remove_unix_fd(&s->source, s->fds[i].tag);
        s->fds[i] = s->fds[--s->nfds];
        return;
    }
    if (i < s->nfds) {
        g_source_modify_unix_fd(&s->source, s->fds[i].tag, rjq_glib_cond_(what));
        return;
    }
    if (s->nfds == s->cap) { /* (g_realloc_n aborts when out of memory, as GLib does) */
        s->cap = s->cap ? s->cap * 2 : 4;
        s->fds = RJQ_CAST(rjq_glib_fd *, g_realloc_n(s->fds, s->cap, sizeof *s->fds));
    }
    s->fds[s->nfds].fd = fd;
    s->fds[s->nfds].tag = g_source_add_unix_fd(&s->source, fd, rjq_glib_cond_(what));
    s->nfds++;
}

static void rjq_glib_timer_(void *arg, long ms) {
    rjq_glib_source *s = RJQ_CAST(rjq_glib_source *, arg);
    if (ms < 0) g_source_set_ready_time(&s->source, -1);
    else
        g_source_set_ready_time(&s->source,
                                g_source_get_time(&s->source) + RJQ_CAST(gint64, ms) * 1000);
}

/* From rjq_client_free(): every fd was removed already. */
static void rjq_glib_cleanup_(void *arg) {
    rjq_glib_source *s = RJQ_CAST(rjq_glib_source *, arg);
    s->freed = 1;
    g_source_destroy(&s->source);
    g_source_unref(&s->source); /* rjq_glib_client_new's reference; a dispatch holds its own */
}

/* What poll() saw, then the timer; a call may change the fds or free the
 * client (then nothing more is done). The timer armed for 0 from inside
 * rjq_client_handle_timeout() is for the next iteration: GLib looks at the
 * ready time again only then. */
static gboolean rjq_glib_dispatch_(GSource *source, GSourceFunc cb, gpointer data) {
    rjq_glib_source *s = RJQ_CAST(rjq_glib_source *, RJQ_CAST(void *, source));
    rjq_glib_fd stack[16], *seen = stack;
    size_t n = 0;
    (void)cb;
    (void)data;
    if (s->nfds > 16) seen = RJQ_CAST(rjq_glib_fd *, g_malloc_n(s->nfds, sizeof *seen));
    for (size_t i = 0; i < s->nfds; i++) {
        GIOCondition c = g_source_query_unix_fd(source, s->fds[i].tag);
        if (c == 0) continue;
        seen[n] = s->fds[i];
        seen[n++].seen = RJQ_CAST(int, c);
    }
    for (size_t i = 0; i < n && !s->freed; i++) {
        int c = seen[i].seen;
        int ev = ((c & G_IO_IN) ? RJQ_IO_READ : 0) | ((c & G_IO_OUT) ? RJQ_IO_WRITE : 0);
        if (c & (G_IO_ERR | G_IO_HUP | G_IO_NVAL)) ev = RJQ_IO_READ | RJQ_IO_WRITE;
        rjq_client_handle_io(s->client, seen[i].fd, ev);
    }
    if (seen != stack) g_free(seen);
    gint64 due = g_source_get_ready_time(source);
    if (!s->freed && due >= 0 && g_source_get_time(source) >= due) {
        g_source_set_ready_time(source, -1);
        rjq_client_handle_timeout(s->client);
    }
    return G_SOURCE_CONTINUE;
}

static void rjq_glib_finalize_(GSource *source) {
    rjq_glib_source *s = RJQ_CAST(rjq_glib_source *, RJQ_CAST(void *, source));
    g_free(s->fds);
}

/*
 * Create a client running on `ctx` (NULL: the global default context).
 * Same contract as rjq_client_new(); the glue is freed by
 * rjq_client_free().
 */
static inline int rjq_glib_client_new(rjq_client **out, GMainContext *ctx,
                                      const rjq_client_options *opts) {
    static GSourceFuncs funcs = {NULL, NULL, rjq_glib_dispatch_, rjq_glib_finalize_, NULL, NULL};
    if (out == NULL) return RJQ_EINVAL;
    GSource *source = g_source_new(&funcs, sizeof(rjq_glib_source));
    rjq_glib_source *s = RJQ_CAST(rjq_glib_source *, RJQ_CAST(void *, source));
    g_source_set_name(source, "rjq");
    g_source_attach(source, ctx);
    rjq_io_ops io = RJQ_IO_OPS_INIT;
    io.arg = s;
    io.socket = rjq_glib_socket_;
    io.timer = rjq_glib_timer_;
    io.cleanup = rjq_glib_cleanup_;
    int rc = rjq_client_new_io(out, opts, &io);
    if (rc != RJQ_OK) {
        g_source_destroy(source);
        g_source_unref(source);
        return rc;
    }
    s->client = *out;
    return RJQ_OK;
}

#endif /* RJQ_GLIB_H */
