/* A connection's bytes read straight into its hiredis reader's buffer
 * (readin.h). */
#include "readin.h"

#include <errno.h>
#include <unistd.h>

#include <hiredis/sds.h>

ssize_t rjq__readin(redisReader *r, int fd) {
    if (r->err) {
        errno = EINVAL;
        return -1;
    }
    sds buf = r->buf;
    if (r->pos == r->len && r->pos == sdslen(buf)) {
        /* All parsed: the reader's cursor is the only thing that points
         * into the buffer, so it starts again at the front (nothing to
         * move when the next reply is complete). */
        size_t keep = r->maxbuf > RJQ__READIN_ROOM ? r->maxbuf : RJQ__READIN_ROOM;
        if (r->maxbuf != 0 && sdsavail(buf) + sdslen(buf) > 4 * keep) {
            sds fresh = sdsempty();
            if (fresh == NULL) {
                errno = ENOMEM;
                return -1;
            }
            sdsfree(buf);
            r->buf = buf = fresh;
        } else {
            sdsclear(buf);
        }
        r->pos = r->len = 0;
    }
    if (sdsavail(buf) < RJQ__READIN_ROOM) {
        sds more = sdsMakeRoomFor(buf, RJQ__READIN_ROOM);
        if (more == NULL) {
            errno = ENOMEM;
            return -1;
        }
        r->buf = buf = more;
    }
    size_t len = sdslen(buf);
    ssize_t n = read(fd, buf + len, RJQ__READIN_ROOM);
    if (n <= 0) return n;
    sdsIncrLen(buf, (int)n); /* (n <= 16 KiB) also ends it with a NUL */
    r->len = sdslen(buf);
    return n;
}
