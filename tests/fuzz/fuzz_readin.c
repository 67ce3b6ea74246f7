/* A socket read straight into hiredis' reader (src/readin.c: rjq__readin
 * and its look at a bulk string's head, bytes from the network): the
 * bytes written to a socketpair in chunks and read with rjq__readin give
 * the same replies, in the same order, and the same error state as the
 * same chunks given to another reader with redisReaderFeed.
 *
 * Input: byte 0 picks the chunk sizes (1 + its value * 61 bytes, or every
 * chunk's size from the next bytes when it is 0); the rest is RESP bytes
 * where 0x01 n c stands for n * 64 copies of c, so that strings of KiB
 * (those readin reads to their end) fit in a short input. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <hiredis/sds.h>

#include "fuzz.h"
#include "readin.h"

#define MAX_BYTES (1u << 20)

static int same(const redisReply *a, const redisReply *b) {
    if (a->type != b->type) return 0;
    switch (a->type) {
    case REDIS_REPLY_INTEGER:
        return a->integer == b->integer;
    case REDIS_REPLY_ARRAY:
        if (a->elements != b->elements) return 0;
        for (size_t i = 0; i < a->elements; i++)
            if (!same(a->element[i], b->element[i])) return 0;
        return 1;
    case REDIS_REPLY_NIL:
        return 1;
    default:
        return a->len == b->len && (a->len == 0 || memcmp(a->str, b->str, a->len) == 0);
    }
}

/* Every reply either reader has now: compared one by one. */
static void compare(redisReader *in, redisReader *fed) {
    for (;;) {
        void *x = NULL, *y = NULL;
        int rx = redisReaderGetReply(in, &x), ry = redisReaderGetReply(fed, &y);
        MUST(rx == ry);
        MUST((x == NULL) == (y == NULL));
        if (x) {
            MUST(same(x, y));
            freeReplyObject(x);
            freeReplyObject(y);
        }
        if (rx != REDIS_OK || x == NULL) return;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    /* the expanded stream */
    unsigned char *s = malloc(MAX_BYTES);
    if (s == NULL) return 0;
    size_t n = 0;
    for (size_t i = 1; i < size && n < MAX_BYTES; i++) {
        if (data[i] == 0x01 && i + 2 < size) {
            size_t k = (size_t)data[i + 1] * 64;
            if (k > MAX_BYTES - n) k = MAX_BYTES - n;
            memset(s + n, data[i + 2], k);
            n += k;
            i += 2;
        } else {
            s[n++] = data[i];
        }
    }
    if (!counts_fit(s, n)) {
        free(s);
        return 0;
    }
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) {
        free(s);
        return 0;
    }
    fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK);
    redisReader *in = redisReaderCreate(), *fed = redisReaderCreate();
    size_t step = data[0] ? 1 + (size_t)data[0] * 61 : 0;
    size_t at = 0, sizes_at = 1;
    int eof = 0;
    while (in && fed && !eof) {
        size_t k = step;
        if (k == 0) k = 1 + (sizes_at < size ? (size_t)data[sizes_at++] * 37 : 4096);
        if (k > n - at) k = n - at;
        if (k > 0) {
            ssize_t w = write(fds[1], s + at, k);
            if (w <= 0) break; /* (a full socket: the chunk is smaller than its room) */
            k = (size_t)w;
            MUST(redisReaderFeed(fed, (const char *)s + at, k) == REDIS_OK || fed->err);
            at += k;
        }
        if (at == n) {
            close(fds[1]);
            fds[1] = -1;
        }
        /* read it all in, parsing after each read as a connection does */
        for (;;) {
            ssize_t got = rjq__readin(in, fds[0]);
            if (got == 0) {
                eof = 1;
                break;
            }
            if (got < 0) {
                MUST(errno == EAGAIN || errno == EWOULDBLOCK || (errno == EINVAL && in->err));
                break;
            }
            MUST(in->len == sdslen(in->buf) && in->pos <= in->len);
            void *x = NULL;
            if (redisReaderGetReply(in, &x) != REDIS_OK) break;
            if (x) {
                void *y = NULL;
                MUST(redisReaderGetReply(fed, &y) == REDIS_OK && y != NULL);
                MUST(same(x, y));
                freeReplyObject(x);
                freeReplyObject(y);
            }
        }
        compare(in, fed);
        MUST((in->err != 0) == (fed->err != 0));
        if (in->err) break;
    }
    if (in) redisReaderFree(in);
    if (fed) redisReaderFree(fed);
    close(fds[0]);
    if (fds[1] >= 0) close(fds[1]);
    free(s);
    return 0;
}
