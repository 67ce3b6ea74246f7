/* A connection's bytes read straight into its hiredis reader's buffer
 * (readin.h). */
#include "readin.h"

#include <errno.h>
#include <unistd.h>

#include <hiredis/sds.h>

#include "compat.h"

/* The reader stopped inside a bulk string of RJQ__READIN_EXACT_MIN bytes
 * or more that is not all there: its missing bytes (0: not so). hiredis'
 * reader has taken the '$' (its task's type is a string) and keeps pos at
 * the length's digits until the whole string is there. Bytes from the
 * network: at most 9 digits (under a GiB: longer ones are left to
 * hiredis' own checks), nothing past len read. */
static size_t bulk_missing(const redisReader *r) {
    if (rjq__reader_task_type(r) != REDIS_REPLY_STRING || r->pos >= r->len) return 0;
    const char *p = r->buf + r->pos, *end = r->buf + r->len, *q = p;
    size_t n = 0;
    while (q < end && *q >= '0' && *q <= '9' && q - p < 9) n = n * 10 + (size_t)(*q++ - '0');
    if (q == p || end - q < 2 || q[0] != '\r' || q[1] != '\n') return 0;
    if (n < RJQ__READIN_EXACT_MIN) return 0;
    size_t whole = (size_t)(q + 2 - p) + n + 2, have = (size_t)(end - p);
    return whole > have ? whole - have : 0;
}

ssize_t rjq__readin(redisReader *r, int fd) {
    return rjq__readin_asked(r, fd, NULL);
}

ssize_t rjq__readin_asked(redisReader *r, int fd, size_t *asked) {
    if (asked) *asked = 0;
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
    size_t want = bulk_missing(r);
    if (want == 0) want = RJQ__READIN_ROOM;
    else if (want > RJQ__READIN_MAX - RJQ__READIN_PEEK) want = RJQ__READIN_MAX;
    else want += RJQ__READIN_PEEK;
    if (sdsavail(buf) < want) {
        sds more = sdsMakeRoomFor(buf, want);
        if (more == NULL) {
            errno = ENOMEM;
            return -1;
        }
        r->buf = buf = more;
    }
    size_t len = sdslen(buf);
    if (asked) *asked = want;
    ssize_t n = read(fd, buf + len, want);
    if (n <= 0) return n;
    sdsIncrLen(buf, (int)n); /* (n <= 1 MiB) also ends it with a NUL */
    r->len = sdslen(buf);
    return n;
}
