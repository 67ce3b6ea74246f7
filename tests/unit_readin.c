/* A socket read straight into hiredis' reader's buffer (src/readin.c):
 * the reader parses what rjq__readin read exactly as what
 * redisReaderFeed is given (binary payloads with NUL and CRLF inside,
 * a reply split across reads at every byte, a string of 4 MiB); a fully
 * parsed buffer starts again at its front and one left big is let go;
 * the end of the stream, nothing there yet and a reader in error are
 * told apart, the last reading nothing; the rest of a long bulk string
 * the reader waits for is read to its end and no further (what follows
 * it is not moved again), whatever digits its head has. No Redis: a
 * socketpair. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <hiredis/sds.h>

#include "harness.h"
#include "readin.h"

/* fds[0]: the reading end, fds[1]: the writing end (both non-blocking). */
static void pair(int fds[2]) {
    ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, fds));
    for (int i = 0; i < 2; i++) ASSERT_EQ(0, fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK));
}

static size_t read_all_there(redisReader *r, int fd);

/* n bytes written to fds[1]; when the socket is full, what it holds is
 * read into r (parsed later). */
static void write_all(redisReader *r, int fds[2], const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fds[1], p, n);
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            ASSERT(read_all_there(r, fds[0]) > 0);
            continue;
        }
        ASSERT(w > 0);
        p += w;
        n -= (size_t)w;
    }
}

/* Everything the socket has, into r; returns the bytes read. */
static size_t read_all_there(redisReader *r, int fd) {
    size_t got = 0;
    for (;;) {
        ssize_t n = rjq__readin(r, fd);
        if (n < 0) {
            ASSERT(errno == EAGAIN || errno == EWOULDBLOCK);
            return got;
        }
        ASSERT(n > 0); /* (the writer is open) */
        got += (size_t)n;
    }
}

/* "*3\r\n$<n>\r\n<bin>\r\n:-7\r\n+OK\r\n" then "$-1\r\n": bin is n bytes
 * with NULs and CRLFs inside. */
static char *sample(size_t n, size_t *len, char **bin) {
    char *b = malloc(n ? n : 1);
    ASSERT(b != NULL);
    for (size_t i = 0; i < n; i++) b[i] = "a\0\r\nz$*\n"[i % 8];
    char head[64];
    int h = snprintf(head, sizeof head, "*3\r\n$%zu\r\n", n);
    const char *tail = "\r\n:-7\r\n+OK\r\n$-1\r\n";
    size_t tl = strlen(tail);
    char *s = malloc((size_t)h + n + tl);
    ASSERT(s != NULL);
    memcpy(s, head, (size_t)h);
    memcpy(s + h, b, n);
    memcpy(s + h + n, tail, tl);
    *len = (size_t)h + n + tl;
    *bin = b;
    return s;
}

static void check_sample(redisReply *a, const char *bin, size_t n) {
    ASSERT_EQ(REDIS_REPLY_ARRAY, a->type);
    ASSERT_EQ(3, (int)a->elements);
    ASSERT_EQ(REDIS_REPLY_STRING, a->element[0]->type);
    ASSERT_EQ(n, (size_t)a->element[0]->len);
    ASSERT(memcmp(a->element[0]->str, bin, n) == 0);
    ASSERT_EQ(REDIS_REPLY_INTEGER, a->element[1]->type);
    ASSERT_EQ(-7, (int)a->element[1]->integer);
    ASSERT_EQ(REDIS_REPLY_STATUS, a->element[2]->type);
    ASSERT_STREQ("OK", a->element[2]->str);
}

/* The sample written in pieces of `step` bytes, each read in before the
 * next is written: both replies, whole, then nothing more. */
static void run_in_pieces(size_t n, size_t step) {
    size_t len;
    char *bin;
    char *s = sample(n, &len, &bin);
    int fds[2];
    pair(fds);
    redisReader *r = redisReaderCreate();
    void *reps[2] = {0};
    int got = 0;
    for (size_t at = 0; at < len;) {
        size_t k = len - at < step ? len - at : step;
        write_all(r, fds, s + at, k);
        at += k;
        read_all_there(r, fds[0]);
        void *rep;
        while (redisReaderGetReply(r, &rep) == REDIS_OK && rep) {
            ASSERT(got < 2);
            reps[got++] = rep;
        }
        ASSERT_EQ(0, r->err);
        ASSERT_EQ(sdslen(r->buf), r->len);
        ASSERT(r->pos <= r->len);
    }
    ASSERT_EQ(2, got);
    check_sample(reps[0], bin, n);
    ASSERT_EQ(REDIS_REPLY_NIL, ((redisReply *)reps[1])->type);
    for (int i = 0; i < got; i++) freeReplyObject(reps[i]);
    redisReaderFree(r);
    close(fds[0]);
    close(fds[1]);
    free(s);
    free(bin);
}

TEST(readin_binary_payload_split_at_every_byte_parses_whole) {
    run_in_pieces(40, 1);
    run_in_pieces(0, 1);
    run_in_pieces(1000, 7);
}

TEST(readin_payloads_across_many_reads_parse_whole) {
    run_in_pieces(16384, 16384);       /* a fetched payload of 16 KiB */
    run_in_pieces(20000, 4096);        /* more than one read's room */
    run_in_pieces(4u << 20, 1u << 20); /* 4 MiB, written in MiBs */
}

/* Replies back to back in one write: every one parsed from what a few
 * reads brought, the same as fed. */
TEST(readin_many_replies_in_one_write_parse_in_order) {
    int fds[2];
    pair(fds);
    char *all = malloc(1u << 20);
    ASSERT(all != NULL);
    size_t len = 0;
    int count = 3000;
    for (int i = 0; i < count; i++)
        len += (size_t)sprintf(all + len, "*2\r\n:%d\r\n$%d\r\n%0*d\r\n", i, 4 + i % 300, 4 + i % 300, i);
    redisReader *r = redisReaderCreate();
    int seen = 0;
    for (size_t at = 0; at < len;) {
        size_t k = len - at < 100000 ? len - at : 100000;
        write_all(r, fds, all + at, k);
        at += k;
        read_all_there(r, fds[0]);
        void *rep;
        while (redisReaderGetReply(r, &rep) == REDIS_OK && rep) {
            redisReply *a = rep;
            ASSERT_EQ(2, (int)a->elements);
            ASSERT_EQ(seen, (int)a->element[0]->integer);
            ASSERT_EQ(4 + seen % 300, (int)a->element[1]->len);
            ASSERT_EQ(seen, atoi(a->element[1]->str));
            freeReplyObject(rep);
            seen++;
        }
        ASSERT_EQ(0, r->err);
    }
    ASSERT_EQ(count, seen);
    redisReaderFree(r);
    free(all);
    close(fds[0]);
    close(fds[1]);
}

/* A string of 2 MiB written a MiB at a time, read and parsed; returns the
 * reader's buffer. */
static sds big_reply(redisReader *r, int fds[2]) {
    size_t big = 2u << 20;
    char *s = malloc(big + 32);
    ASSERT(s != NULL);
    int h = sprintf(s, "$%zu\r\n", big);
    memset(s + h, 'x', big);
    memcpy(s + h + big, "\r\n", 2);
    size_t len = (size_t)h + big + 2;
    int done = 0;
    void *rep;
    for (size_t at = 0; at < len;) {
        size_t k = len - at < (1u << 20) ? len - at : (1u << 20);
        write_all(r, fds, s + at, k);
        at += k;
        read_all_there(r, fds[0]);
        while (redisReaderGetReply(r, &rep) == REDIS_OK && rep) {
            ASSERT_EQ(big, (size_t)((redisReply *)rep)->len);
            ASSERT(((redisReply *)rep)->str[big - 1] == 'x');
            freeReplyObject(rep);
            done++;
        }
    }
    ASSERT_EQ(1, done);
    free(s);
    return r->buf;
}

/* A parsed buffer starts again at the front (the next read lands at 0);
 * one left at MiBs by a big reply is let go, not kept for every read. */
TEST(readin_parsed_buffer_restarts_at_front_and_big_one_let_go) {
    int fds[2];
    pair(fds);
    redisReader *r = redisReaderCreate();
    void *rep;
    write_all(r, fds, "+OK\r\n", 5);
    ASSERT_EQ(5, (int)rjq__readin(r, fds[0]));
    ASSERT_EQ(REDIS_OK, redisReaderGetReply(r, &rep));
    ASSERT(rep != NULL);
    freeReplyObject(rep);
    ASSERT_EQ(5, (int)r->pos); /* (hiredis moves nothing under 1 KiB) */
    write_all(r, fds, ":1\r\n", 4);
    ASSERT_EQ(4, (int)rjq__readin(r, fds[0]));
    ASSERT_EQ(0, (int)r->pos);
    ASSERT_EQ(4, (int)r->len);
    ASSERT(memcmp(r->buf, ":1\r\n", 4) == 0);
    ASSERT_EQ(REDIS_OK, redisReaderGetReply(r, &rep));
    ASSERT_EQ(1, (int)((redisReply *)rep)->integer);
    freeReplyObject(rep);

    /* a 2 MiB string grows the buffer: let go at the next read once
     * parsed; with maxbuf 0 (hiredis: never let go) kept */
    ASSERT(sdsalloc(big_reply(r, fds)) >= 2u << 20);
    write_all(r, fds, "+OK\r\n", 5);
    ASSERT_EQ(5, (int)rjq__readin(r, fds[0]));
    ASSERT(sdsalloc(r->buf) < 256u << 10);
    ASSERT_EQ(REDIS_OK, redisReaderGetReply(r, &rep));
    ASSERT_STREQ("OK", ((redisReply *)rep)->str);
    freeReplyObject(rep);
    r->maxbuf = 0;
    big_reply(r, fds);
    write_all(r, fds, "+OK\r\n", 5);
    ASSERT_EQ(5, (int)rjq__readin(r, fds[0]));
    ASSERT(sdsalloc(r->buf) >= 2u << 20);
    ASSERT_EQ(0, (int)r->pos);
    ASSERT_EQ(REDIS_OK, redisReaderGetReply(r, &rep));
    ASSERT_STREQ("OK", ((redisReply *)rep)->str);
    freeReplyObject(rep);
    redisReaderFree(r);
    close(fds[0]);
    close(fds[1]);
}

/* Nothing there: -1 EAGAIN; the peer gone: 0; a reader in error reads
 * nothing (EINVAL), the socket's bytes left where they are. */
TEST(readin_eagain_eof_and_reader_error_told_apart) {
    int fds[2];
    pair(fds);
    redisReader *r = redisReaderCreate();
    errno = 0;
    ASSERT_EQ(-1, (int)rjq__readin(r, fds[0]));
    ASSERT(errno == EAGAIN || errno == EWOULDBLOCK);

    write_all(r, fds, "!oops\r\n", 7); /* not RESP2 */
    ASSERT_EQ(7, (int)rjq__readin(r, fds[0]));
    void *rep = NULL;
    ASSERT_EQ(REDIS_ERR, redisReaderGetReply(r, &rep));
    ASSERT(r->err != 0);
    write_all(r, fds, "+OK\r\n", 5);
    errno = 0;
    ASSERT_EQ(-1, (int)rjq__readin(r, fds[0]));
    ASSERT_EQ(EINVAL, errno);
    char left[8];
    ASSERT_EQ(5, (int)read(fds[0], left, sizeof left)); /* still there */
    redisReaderFree(r);

    r = redisReaderCreate();
    write_all(r, fds, ":5\r\n", 4);
    close(fds[1]);
    ASSERT_EQ(4, (int)rjq__readin(r, fds[0]));
    ASSERT_EQ(0, (int)rjq__readin(r, fds[0]));
    ASSERT_EQ(REDIS_OK, redisReaderGetReply(r, &rep));
    ASSERT_EQ(5, (int)((redisReply *)rep)->integer);
    freeReplyObject(rep);
    redisReaderFree(r);
    close(fds[0]);
}


/* "$20000" split by the first read: the second reads exactly the rest of
 * the string, its CRLF and RJQ__READIN_PEEK bytes more (the next
 * string's head), so once the string is parsed only the peek is left in
 * the buffer to move; the rest stays in the socket for the next read. A
 * short string (under RJQ__READIN_EXACT_MIN) is read as usual. */
TEST(readin_reads_a_long_bulk_to_its_end_and_a_peek_no_further) {
    int fds[2];
    pair(fds);
    redisReader *r = redisReaderCreate();
    size_t n = 20000;
    char *s = malloc(n + 256);
    ASSERT(s != NULL);
    int h = sprintf(s, "$%zu\r\n", n);
    for (size_t i = 0; i < n; i++) s[h + i] = "\r\n\0x"[i % 4];
    size_t whole = (size_t)h + n + 2;
    memcpy(s + h + n, "\r\n$70\r\n", 7);
    memset(s + whole + 5, 'z', 70);
    memcpy(s + whole + 75, "\r\n", 2);
    write_all(r, fds, s, whole + 77);
    ASSERT_EQ(RJQ__READIN_ROOM, (size_t)rjq__readin(r, fds[0]));
    void *rep = NULL;
    ASSERT_EQ(REDIS_OK, redisReaderGetReply(r, &rep));
    ASSERT(rep == NULL); /* waits for the rest */
    ASSERT_EQ(whole - RJQ__READIN_ROOM + RJQ__READIN_PEEK, (size_t)rjq__readin(r, fds[0]));
    ASSERT_EQ(REDIS_OK, redisReaderGetReply(r, &rep));
    ASSERT(rep != NULL);
    ASSERT_EQ(n, (size_t)((redisReply *)rep)->len);
    ASSERT(memcmp(((redisReply *)rep)->str, s + h, n) == 0);
    freeReplyObject(rep);
    ASSERT_EQ(RJQ__READIN_PEEK, (size_t)(r->len - r->pos)); /* only the peek left */
    ASSERT_EQ(REDIS_OK, redisReaderGetReply(r, &rep));
    ASSERT(rep == NULL);
    ASSERT_EQ(77 - RJQ__READIN_PEEK, (size_t)rjq__readin(r, fds[0]));
    ASSERT_EQ(REDIS_OK, redisReaderGetReply(r, &rep));
    ASSERT_EQ(70, (int)((redisReply *)rep)->len);
    ASSERT(((redisReply *)rep)->str[69] == 'z');
    freeReplyObject(rep);

    /* a short string split: the next read takes what is there */
    write_all(r, fds, "*2\r\n$100\r\n", 10);
    ASSERT_EQ(10, (int)rjq__readin(r, fds[0]));
    ASSERT_EQ(REDIS_OK, redisReaderGetReply(r, &rep));
    ASSERT(rep == NULL);
    memset(s, 'y', 100);
    memcpy(s + 100, "\r\n:1\r\n+AFTER\r\n", 14);
    write_all(r, fds, s, 114);
    ASSERT_EQ(114, (int)rjq__readin(r, fds[0]));
    ASSERT_EQ(REDIS_OK, redisReaderGetReply(r, &rep));
    ASSERT_EQ(2, (int)((redisReply *)rep)->elements);
    freeReplyObject(rep);
    ASSERT_EQ(REDIS_OK, redisReaderGetReply(r, &rep));
    ASSERT_STREQ("AFTER", ((redisReply *)rep)->str);
    freeReplyObject(rep);
    redisReaderFree(r);
    free(s);
    close(fds[0]);
    close(fds[1]);
}

/* Heads a server should never send: 10 digits or more, none, no CRLF
 * yet, a huge length: each read takes at most what it would take
 * otherwise (RJQ__READIN_ROOM, or RJQ__READIN_MAX for a 9-digit length),
 * nothing past the socket's bytes. */
TEST(readin_bulk_heads_from_the_network_are_range_checked) {
    const char *heads[] = {"$99999999999999999999\r\n", "$9999999999\r\n", "$\r\n",
                           "$12345", "$-1", "$999999999\r\n", "$18446744073709551617\r\n"};
    for (size_t i = 0; i < sizeof heads / sizeof *heads; i++) {
        int fds[2];
        pair(fds);
        redisReader *r = redisReaderCreate();
        size_t hl = strlen(heads[i]);
        write_all(r, fds, heads[i], hl);
        ASSERT_EQ(hl, (size_t)rjq__readin(r, fds[0]));
        void *rep = NULL;
        (void)redisReaderGetReply(r, &rep); /* (hiredis may call it an error) */
        if (rep) freeReplyObject(rep);
        if (r->err == 0) {
            write_all(r, fds, "abc", 3);
            ASSERT_EQ(3, (int)rjq__readin(r, fds[0]));
            ASSERT(sdsalloc(r->buf) <= 4u * RJQ__READIN_MAX);
        }
        redisReaderFree(r);
        close(fds[0]);
        close(fds[1]);
    }
}

/* rjq__readin_asked tells what each read asked for: a read that got all
 * of it (more may be waiting: the caller reads again) and one that got
 * less (all there was) are told apart; nothing read asks nothing. */
TEST(readin_asked_tells_a_full_read_from_a_short_one) {
    int fds[2];
    pair(fds);
    redisReader *r = redisReaderCreate();
    size_t n = 20000, asked = 99;
    char *s = malloc(n + 64);
    ASSERT(s != NULL);
    int h = sprintf(s, "$%zu\r\n", n);
    memset(s + h, 'q', n);
    memcpy(s + h + n, "\r\n", 2);
    size_t whole = (size_t)h + n + 2;
    write_all(r, fds, s, whole);
    ASSERT_EQ(RJQ__READIN_ROOM, (size_t)rjq__readin_asked(r, fds[0], &asked));
    ASSERT_EQ(RJQ__READIN_ROOM, asked); /* full: read again */
    void *rep = NULL;
    ASSERT_EQ(REDIS_OK, redisReaderGetReply(r, &rep));
    ASSERT(rep == NULL);
    ASSERT_EQ(whole - RJQ__READIN_ROOM, (size_t)rjq__readin_asked(r, fds[0], &asked));
    ASSERT_EQ(whole - RJQ__READIN_ROOM + RJQ__READIN_PEEK, asked); /* short: all there was */
    ASSERT_EQ(REDIS_OK, redisReaderGetReply(r, &rep));
    ASSERT(rep != NULL);
    ASSERT_EQ(n, (size_t)((redisReply *)rep)->len);
    freeReplyObject(rep);
    ASSERT_EQ(-1, (int)rjq__readin_asked(r, fds[0], &asked));
    ASSERT(errno == EAGAIN || errno == EWOULDBLOCK);
    ASSERT_EQ(RJQ__READIN_ROOM, asked);
    r->err = REDIS_ERR_PROTOCOL; /* a reader in error: nothing read, nothing asked */
    ASSERT_EQ(-1, (int)rjq__readin_asked(r, fds[0], &asked));
    ASSERT_EQ(0, asked);
    r->err = 0;
    redisReaderFree(r);
    close(fds[0]);
    close(fds[1]);
    free(s);
}
