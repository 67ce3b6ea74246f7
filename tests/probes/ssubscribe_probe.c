/*
 * What hiredis' async layer does with sharded pub/sub (SSUBSCRIBE,
 * "smessage", SUNSUBSCRIBE) replies, on the linked hiredis version.
 * Each scenario runs in a forked child (an assert in hiredis ends only
 * that child); the parent prints what the child printed and how it ended.
 *
 * Probe (docs/cluster.md section 2.1), not a test: it asserts nothing.
 *   cc -o /tmp/probe tests/probes/ssubscribe_probe.c $(pkg-config --cflags --libs hiredis libevent_core)
 *   /tmp/probe <port of a Redis >= 7.0, standalone or a cluster node>
 * Against hiredis 1.x built into a prefix P (third_party README):
 *   cc -o /tmp/probe-1.x tests/probes/ssubscribe_probe.c -IP/include -LP/lib -Wl,-rpath,P/lib \
 *     -lhiredis $(pkg-config --cflags --libs libevent_core)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

static int port;
static struct event_base *base;
static int done, disconnected;

static void show(const char *who, const redisReply *r) {
    printf("  %s: ", who);
    if (r == NULL) {
        printf("NULL reply\n");
        return;
    }
    switch (r->type) {
    case REDIS_REPLY_ARRAY:
#ifdef REDIS_REPLY_PUSH
    case REDIS_REPLY_PUSH:
#endif
        printf("%s[", r->type == REDIS_REPLY_ARRAY ? "array" : "push");
        for (size_t i = 0; i < r->elements; i++) {
            const redisReply *e = r->element[i];
            if (e->type == REDIS_REPLY_INTEGER) printf("%s%lld", i ? " " : "", e->integer);
            else if (e->str) printf("%s\"%s\"", i ? " " : "", e->str);
            else printf("%s(type %d)", i ? " " : "", e->type);
        }
        printf("]\n");
        break;
    case REDIS_REPLY_INTEGER: printf("integer %lld\n", r->integer); break;
    default: printf("type %d \"%s\"\n", r->type, r->str ? r->str : ""); break;
    }
    fflush(stdout);
}

static void on_cb(redisAsyncContext *ac, void *reply, void *priv) {
    (void)ac;
    show((const char *)priv, reply);
}
static void on_last(redisAsyncContext *ac, void *reply, void *priv) {
    on_cb(ac, reply, priv);
    done = 1;
}
#if HIREDIS_MAJOR >= 1
static void on_push(redisAsyncContext *ac, void *reply) {
    (void)ac;
    show("push callback", reply);
}
#endif
static void on_disconnect(const redisAsyncContext *ac, int status) {
    printf("  disconnected: status %d err %d \"%s\"\n", status, ac->err, ac->errstr);
    fflush(stdout);
    disconnected = 1;
}

static void spublish(const char *ch, const char *msg) {
    redisContext *c = redisConnect("127.0.0.1", port);
    redisReply *r = redisCommand(c, "SPUBLISH %s %s", ch, msg);
    printf("  (SPUBLISH %s %s -> %lld receivers)\n", ch, msg, r ? r->integer : -1LL);
    fflush(stdout);
    if (r) freeReplyObject(r);
    redisFree(c);
}

/* Run the loop until the last callback or a disconnect. */
static void run(void) {
    for (int i = 0; i < 400 && !done && !disconnected; i++) {
        event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        usleep(5000);
    }
    if (!done && !disconnected) printf("  (the awaited callback was not called within 2 s)\n");
}

static redisAsyncContext *connect_ctx(int resp3) {
    redisAsyncContext *ac = redisAsyncConnect("127.0.0.1", port);
    redisLibeventAttach(ac, base);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
#if HIREDIS_MAJOR >= 1
    if (resp3) {
        redisAsyncSetPushCallback(ac, on_push);
        redisAsyncCommand(ac, on_cb, "HELLO 3 reply", "HELLO 3");
    }
#else
    (void)resp3;
#endif
    return ac;
}

static void sync_point(redisAsyncContext *ac, const char *who) {
    done = 0;
    redisAsyncCommand(ac, on_last, (void *)who, "PING");
    run();
}

/* 1: SSUBSCRIBE on a fresh (RESP2) context, then a message, then PING. */
static void s_fresh(int resp3) {
    redisAsyncContext *ac = connect_ctx(resp3);
    redisAsyncCommand(ac, on_cb, "SSUBSCRIBE callback", "SSUBSCRIBE {q}ch");
    sync_point(ac, "PING #1 callback");
    if (disconnected || !done) return;
    spublish("{q}ch", "hello");
    sync_point(ac, "PING #2 callback");
    if (disconnected) return;
    redisAsyncCommand(ac, on_cb, "SUNSUBSCRIBE callback", "SUNSUBSCRIBE {q}ch");
    sync_point(ac, "PING #3 callback");
    if (!disconnected) redisAsyncFree(ac);
}

/* 2: a classic SUBSCRIBE first (the context is "subscribed"), then
 * SSUBSCRIBE on another channel and on a channel of the same name. */
static void s_after_subscribe(void) {
    redisAsyncContext *ac = connect_ctx(0);
    done = 0;
    redisAsyncCommand(ac, on_cb, "SUBSCRIBE {q}classic callback", "SUBSCRIBE {q}classic");
    redisAsyncCommand(ac, on_last, "SSUBSCRIBE {q}ch callback", "SSUBSCRIBE {q}ch");
    for (int i = 0; i < 200 && !done && !disconnected; i++) event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK), usleep(5000);
    if (!done) printf("  (SSUBSCRIBE callback not called within 1 s)\n");
    if (disconnected) return;
    spublish("{q}ch", "to-sharded");
    spublish("{q}classic", "smessage-on-classic-name");
    done = 0;
    redisAsyncCommand(ac, on_last, "SSUBSCRIBE {q}classic callback", "SSUBSCRIBE {q}classic");
    for (int i = 0; i < 200 && !done && !disconnected; i++) event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK), usleep(5000);
    if (!done) printf("  (SSUBSCRIBE {q}classic callback not called within 1 s)\n");
    if (disconnected) return;
    spublish("{q}classic", "smessage-after-ssubscribe-same-name");
    for (int i = 0; i < 60 && !disconnected; i++) event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK), usleep(5000);
    if (!disconnected) redisAsyncFree(ac);
}


/* 4: what rjq would do instead (docs/cluster.md 3.5): a non-blocking
 * redisContext whose socket the loop watches; every reply is read with
 * redisBufferRead + redisGetReplyFromReader and dispatched by its shape,
 * so pushed messages need no callback. */
static redisContext *own;
static struct event *own_rd, *own_wr;
static int own_stage;

static void own_flush(void) {
    int done = 0;
    if (redisBufferWrite(own, &done) != REDIS_OK) {
        printf("  write error: %s\n", own->errstr);
        disconnected = 1;
        return;
    }
    if (!done) event_add(own_wr, NULL);
}

static void own_on_write(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what, (void)arg;
    own_flush();
}

static void own_on_read(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what, (void)arg;
    if (redisBufferRead(own) != REDIS_OK) {
        printf("  read error: %s\n", own->errstr);
        disconnected = 1;
        return;
    }
    void *p = NULL;
    while (redisGetReplyFromReader(own, &p) == REDIS_OK && p != NULL) {
        redisReply *r = p;
        show("own reader", r);
        const char *kind = r->type == REDIS_REPLY_ARRAY && r->elements >= 1 && r->element[0]->str
                               ? r->element[0]->str
                               : "";
        if (strcmp(kind, "ssubscribe") == 0 && own_stage == 0) {
            own_stage = 1;
            spublish("{q}ch", "hello");
            spublish("{q}ch", "again");
            redisAppendCommand(own, "SUNSUBSCRIBE {q}ch");
            redisAppendCommand(own, "PING");
            own_flush();
        } else if (strcmp(kind, "pong") == 0 ||
                   (r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0)) {
            done = 1; /* (["pong", ""] while subscribed, +PONG once not) */
        }
        freeReplyObject(r);
        p = NULL;
    }
}

static void s_own_reader(void) {
    own = redisConnectNonBlock("127.0.0.1", port);
    if (own == NULL || own->err) {
        printf("  connect: %s\n", own ? own->errstr : "out of memory");
        return;
    }
    own_rd = event_new(base, own->fd, EV_READ | EV_PERSIST, own_on_read, NULL);
    own_wr = event_new(base, own->fd, EV_WRITE, own_on_write, NULL);
    event_add(own_rd, NULL);
    redisAppendCommand(own, "SSUBSCRIBE {q}ch");
    event_add(own_wr, NULL); /* (the connect completes first) */
    run();
    event_free(own_rd);
    event_free(own_wr);
    redisFree(own);
}

static void scenario(const char *name, void (*fn)(void)) {
    printf("== %s\n", name);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        base = event_base_new();
        fn();
        event_base_free(base);
        printf("  (scenario ended normally)\n");
        fflush(stdout);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    if (WIFSIGNALED(st)) printf("  ** child killed by signal %d (%s)\n", WTERMSIG(st), strsignal(WTERMSIG(st)));
}

static void s1(void) { s_fresh(0); }
#if HIREDIS_MAJOR >= 1
static void s3(void) { s_fresh(1); }
#endif

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    port = atoi(argv[1]);
    printf("hiredis %d.%d.%d\n", HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH);
    scenario("1: RESP2, SSUBSCRIBE on a fresh context, SPUBLISH, SUNSUBSCRIBE", s1);
    scenario("2: RESP2, SUBSCRIBE first, then SSUBSCRIBE (other name and same name)", s_after_subscribe);
#if HIREDIS_MAJOR >= 1
    scenario("3: RESP3 (HELLO 3 + push callback), SSUBSCRIBE, SPUBLISH, SUNSUBSCRIBE", s3);
#endif
    scenario("4: RESP2, rjq's own reader on a non-blocking redisContext: SSUBSCRIBE, 2 x SPUBLISH, "
             "SUNSUBSCRIBE, PING",
             s_own_reader);
    return 0;
}
