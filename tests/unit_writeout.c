/* A long command written to its socket at once, past hiredis' output
 * buffer (src/writeout.c): the peer gets it byte for byte (binary, 16 KiB,
 * and 8 MiB that the socket takes only part of, the rest left to hiredis'
 * buffer and written after it); a command behind output hiredis still
 * holds, and a short one, go through that buffer in their order; each
 * callback gets its own reply, once; a peer gone leaves the command to
 * hiredis, whose write ends the connection and calls the callback with
 * NULL. No Redis: a hiredis async context on a Unix socket of the test's,
 * driven by hand (no event loop: its write-event hooks only counted). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <hiredis/sds.h>

#include "harness.h"
#include "writeout.h"

typedef struct peer {
    int listener, fd;
    char path[108];
    redisAsyncContext *ac;
    int add_writes, del_writes;
} peer;

static void add_write(void *p) { ((peer *)p)->add_writes++; }
static void del_write(void *p) { ((peer *)p)->del_writes++; }
static void no_op(void *p) { (void)p; }

/* A listening socket, a hiredis async context connected to it (its
 * connect finished by hand, as the first write event would), the peer's
 * end accepted and non-blocking. */
static void peer_open(peer *p) {
    memset(p, 0, sizeof *p);
    snprintf(p->path, sizeof p->path, "/tmp/rjq-writeout-%d.sock", (int)getpid());
    unlink(p->path);
    p->listener = socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT(p->listener >= 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, p->path, strlen(p->path) + 1);
    ASSERT_EQ(0, bind(p->listener, (struct sockaddr *)&sa, sizeof sa));
    ASSERT_EQ(0, listen(p->listener, 4));
    p->ac = redisAsyncConnectUnix(p->path);
    ASSERT(p->ac != NULL);
    ASSERT_EQ(0, p->ac->err);
    p->ac->ev.data = p;
    p->ac->ev.addRead = no_op;
    p->ac->ev.delRead = no_op;
    p->ac->ev.addWrite = add_write;
    p->ac->ev.delWrite = del_write;
    redisAsyncHandleWrite(p->ac); /* the connect's end */
    ASSERT(p->ac->c.flags & REDIS_CONNECTED);
    p->fd = accept(p->listener, NULL, NULL);
    ASSERT(p->fd >= 0);
    ASSERT_EQ(0, fcntl(p->fd, F_SETFL, fcntl(p->fd, F_GETFL) | O_NONBLOCK));
    p->add_writes = p->del_writes = 0;
}

static void peer_close(peer *p) {
    if (p->ac) redisAsyncFree(p->ac); /* (calls what is pending with NULL) */
    if (p->fd >= 0) close(p->fd);
    close(p->listener);
    unlink(p->path);
}

/* What the peer got, read until `want` bytes came, hiredis writing what
 * its buffer holds whenever the socket has nothing more. */
static char *peer_read(peer *p, size_t want) {
    char *got = malloc(want ? want : 1);
    ASSERT(got != NULL);
    size_t have = 0;
    int idle = 0;
    while (have < want) {
        ssize_t n = read(p->fd, got + have, want - have);
        if (n > 0) {
            have += (size_t)n;
            idle = 0;
            continue;
        }
        ASSERT(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
        ASSERT(sdslen(p->ac->c.obuf) > 0 && idle++ < 2); /* else nothing more is coming */
        redisAsyncHandleWrite(p->ac);
    }
    char extra;
    ASSERT(read(p->fd, &extra, 1) < 0); /* nothing more */
    return got;
}

static void peer_send(peer *p, const char *s) {
    ASSERT_EQ((ssize_t)strlen(s), write(p->fd, s, strlen(s)));
}

/* "*2\r\n$4\r\nECHO\r\n$<n>\r\n<n binary bytes>\r\n" (*len its length). */
static char *echo_command(size_t n, size_t *len) {
    char head[64];
    int h = snprintf(head, sizeof head, "*2\r\n$4\r\nECHO\r\n$%zu\r\n", n);
    char *s = malloc((size_t)h + n + 2);
    ASSERT(s != NULL);
    memcpy(s, head, (size_t)h);
    for (size_t i = 0; i < n; i++) s[h + i] = "a\0\r\nz$*\n\xff"[i % 9];
    memcpy(s + h + n, "\r\n", 2);
    *len = (size_t)h + n + 2;
    return s;
}

typedef struct answer {
    int calls;
    int type;
    char str[16];
} answer;

static void on_reply(redisAsyncContext *ac, void *reply, void *priv) {
    answer *a = priv;
    redisReply *r = reply;
    (void)ac;
    a->calls++;
    a->type = r ? r->type : -1;
    if (r && r->str) snprintf(a->str, sizeof a->str, "%.*s", (int)r->len, r->str);
}

/* The peer answers two simple strings in one write; each command's
 * callback has run once with its own, in order. */
static void answer_two(peer *p, answer *first, const char *s1, answer *second, const char *s2) {
    char both[64];
    snprintf(both, sizeof both, "+%s\r\n+%s\r\n", s1, s2);
    peer_send(p, both);
    redisAsyncHandleRead(p->ac);
    ASSERT_EQ(1, first->calls);
    ASSERT_STREQ(s1, first->str);
    ASSERT_EQ(1, second->calls);
    ASSERT_STREQ(s2, second->str);
}

TEST(writeout_long_command_written_at_once_byte_exact_hiredis_buffer_untouched) {
    peer p;
    peer_open(&p);
    size_t len;
    char *cmd = echo_command(16384, &len);
    answer a = {0};
    ASSERT_EQ(REDIS_OK, rjq__writeout(p.ac, on_reply, &a, cmd, len));
    ASSERT_EQ((size_t)0, sdslen(p.ac->c.obuf)); /* not copied there */
    ASSERT_EQ(p.add_writes, p.del_writes);        /* no write event left asked for */
    char *got = peer_read(&p, len);
    ASSERT(memcmp(got, cmd, len) == 0);
    ASSERT_EQ(0, a.calls);
    peer_send(&p, "$5\r\nhello\r\n");
    redisAsyncHandleRead(p.ac);
    ASSERT_EQ(1, a.calls);
    ASSERT_EQ(REDIS_REPLY_STRING, a.type);
    ASSERT_STREQ("hello", a.str);
    peer_close(&p);
    ASSERT_EQ(1, a.calls);
    free(got);
    free(cmd);
}

TEST(writeout_command_the_socket_takes_part_of_leaves_its_rest_to_hiredis_in_order) {
    peer p;
    peer_open(&p);
    size_t len, len2;
    char *cmd = echo_command(8u << 20, &len); /* more than a socket holds */
    char *cmd2 = echo_command(RJQ__WRITEOUT_MIN, &len2);
    answer a = {0}, b = {0};
    ASSERT_EQ(REDIS_OK, rjq__writeout(p.ac, on_reply, &a, cmd, len));
    size_t left = sdslen(p.ac->c.obuf);
    ASSERT(left > 0 && left < len);
    ASSERT(p.add_writes > p.del_writes); /* hiredis writes the rest */
    ASSERT(memcmp(p.ac->c.obuf, cmd + (len - left), left) == 0);
    /* the next one goes behind it, through the buffer */
    ASSERT_EQ(REDIS_OK, rjq__writeout(p.ac, on_reply, &b, cmd2, len2));
    ASSERT_EQ(left + len2, sdslen(p.ac->c.obuf));
    char *got = peer_read(&p, len + len2);
    ASSERT(memcmp(got, cmd, len) == 0);
    ASSERT(memcmp(got + len, cmd2, len2) == 0);
    answer_two(&p, &a, "first", &b, "second");
    peer_close(&p);
    free(got);
    free(cmd);
    free(cmd2);
}

TEST(writeout_behind_unwritten_output_or_short_goes_through_hiredis_buffer) {
    peer p;
    peer_open(&p);
    size_t len, slen;
    char *cmd = echo_command(RJQ__WRITEOUT_MIN, &len);
    char *shortc = echo_command(RJQ__WRITEOUT_MIN - 32, &slen); /* under the bound */
    ASSERT(slen < RJQ__WRITEOUT_MIN);
    answer s = {0}, a = {0};
    ASSERT_EQ(REDIS_OK, rjq__writeout(p.ac, on_reply, &s, shortc, slen));
    ASSERT_EQ(slen, sdslen(p.ac->c.obuf)); /* short: hiredis' way */
    ASSERT_EQ(REDIS_OK, rjq__writeout(p.ac, on_reply, &a, cmd, len));
    ASSERT_EQ(slen + len, sdslen(p.ac->c.obuf)); /* behind it: not ahead of it */
    char *got = peer_read(&p, slen + len);
    ASSERT(memcmp(got, shortc, slen) == 0);
    ASSERT(memcmp(got + slen, cmd, len) == 0);
    answer_two(&p, &s, "short", &a, "long");
    peer_close(&p);
    free(got);
    free(cmd);
    free(shortc);
}

static int disconnects;
static void on_disconnect(const redisAsyncContext *ac, int status) {
    (void)ac;
    (void)status;
    disconnects++;
}

TEST(writeout_to_a_peer_gone_leaves_the_command_to_hiredis_callback_gets_null_once) {
    peer p;
    signal(SIGPIPE, SIG_IGN); /* (hiredis' own write, as rjq's README asks of a program) */
    peer_open(&p);
    redisAsyncSetDisconnectCallback(p.ac, on_disconnect);
    close(p.fd);
    p.fd = -1;
    size_t len;
    char *cmd = echo_command(16384, &len);
    answer a = {0};
    disconnects = 0;
    ASSERT_EQ(REDIS_OK, rjq__writeout(p.ac, on_reply, &a, cmd, len));
    ASSERT_EQ(len, sdslen(p.ac->c.obuf)); /* the write failed: all to hiredis */
    ASSERT_EQ(0, a.calls);
    redisAsyncHandleWrite(p.ac); /* meets the error: the context is freed */
    p.ac = NULL;
    ASSERT_EQ(1, disconnects);
    ASSERT_EQ(1, a.calls);
    ASSERT_EQ(-1, a.type); /* NULL */
    peer_close(&p);
    free(cmd);
}

/* "*1\r\n$<n-...>\r\n<bytes>\r\n" of exactly n bytes (n >= 16), and a NUL
 * after them. */
static char *command_of_length(size_t n) {
    char head[32];
    size_t body = n - 4 - 2; /* after "*1\r\n", before the final CRLF */
    size_t digits = 1;
    for (size_t d = body; d >= 10; d /= 10) digits++;
    size_t arg = body - 1 - digits - 2; /* "$<digits>\r\n" */
    if ((size_t)snprintf(head, sizeof head, "%zu", arg) != digits) arg++; /* (one digit less) */
    int h = snprintf(head, sizeof head, "*1\r\n$%zu\r\n", arg);
    ASSERT((size_t)h + arg + 2 == n);
    char *s = malloc(n + 1);
    ASSERT(s != NULL);
    memcpy(s, head, (size_t)h);
    memset(s + h, 'x', arg);
    memcpy(s + h + arg, "\r\n", 2);
    s[n] = '\0'; /* (hiredis reads the byte after a lone command name, as rjq__buf_nul says) */
    return s;
}

TEST(writeout_bound_exactly_one_byte_under_goes_through_hiredis_at_it_goes_at_once) {
    peer p;
    peer_open(&p);
    char *under = command_of_length(RJQ__WRITEOUT_MIN - 1), *at = command_of_length(RJQ__WRITEOUT_MIN);
    answer a = {0}, b = {0};
    ASSERT_EQ(REDIS_OK, rjq__writeout(p.ac, on_reply, &a, under, RJQ__WRITEOUT_MIN - 1));
    ASSERT_EQ((size_t)RJQ__WRITEOUT_MIN - 1, sdslen(p.ac->c.obuf)); /* hiredis' way */
    char *got = peer_read(&p, RJQ__WRITEOUT_MIN - 1);                  /* (written by hiredis) */
    ASSERT(memcmp(got, under, RJQ__WRITEOUT_MIN - 1) == 0);
    free(got);
    ASSERT_EQ((size_t)0, sdslen(p.ac->c.obuf));
    ASSERT_EQ(REDIS_OK, rjq__writeout(p.ac, on_reply, &b, at, RJQ__WRITEOUT_MIN));
    ASSERT_EQ((size_t)0, sdslen(p.ac->c.obuf)); /* at once */
    got = peer_read(&p, RJQ__WRITEOUT_MIN);
    ASSERT(memcmp(got, at, RJQ__WRITEOUT_MIN) == 0);
    answer_two(&p, &a, "under", &b, "at");
    peer_close(&p);
    free(got);
    free(under);
    free(at);
}
