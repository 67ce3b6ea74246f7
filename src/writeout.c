/* A long command written to its socket at once (writeout.h). */
#include "writeout.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <hiredis/sds.h>

#include "compat.h"

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0
#endif

/* The context may be written to now, past hiredis' buffer: connected,
 * plain, its buffer empty (so nothing of an earlier command is still to
 * go: order kept), no state that hiredis' own append would treat apart. */
static int may_write_now(const redisAsyncContext *ac) {
    const redisContext *c = &ac->c;
    return c->err == 0 && c->fd >= 0 && (c->flags & REDIS_CONNECTED) &&
           !(c->flags & (REDIS_SUBSCRIBED | REDIS_MONITORING | REDIS_DISCONNECTING | REDIS_FREEING)) &&
           !rjq__hi_tls(c) && c->obuf != NULL && sdslen(c->obuf) == 0;
}

int rjq__writeout(redisAsyncContext *ac, redisCallbackFn *fn, void *priv, const char *cmd, size_t len) {
    if (len < RJQ__WRITEOUT_MIN || !may_write_now(ac)) return redisAsyncFormattedCommand(ac, fn, priv, cmd, len);
    /* The callback first, nothing appended (hiredis reads the command's
     * name from cmd, appends 0 bytes and asks for a write event): if that
     * fails, nothing was written. */
    if (redisAsyncFormattedCommand(ac, fn, priv, cmd, 0) != REDIS_OK) return REDIS_ERR;
    redisContext *c = &ac->c;
    ssize_t n;
    do {
        n = send(c->fd, cmd, len, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    size_t sent = n > 0 ? (size_t)n : 0; /* (an error: all to hiredis' buffer, its write meets it) */
    if (sent < len) {
        sds more = sdscatlen(c->obuf, cmd + sent, len - sent);
        if (more == NULL) {
            /* Part of a command went: nothing more may follow it. */
            (void)shutdown(c->fd, SHUT_RDWR);
            return REDIS_OK;
        }
        c->obuf = more;
        return REDIS_OK;
    }
    /* All written: the write event hiredis asked for would find nothing
     * (its write handler would drop it: done here at once). */
    if (ac->ev.delWrite) ac->ev.delWrite(ac->ev.data);
    return REDIS_OK;
}
