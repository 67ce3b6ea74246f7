/*
 * Client-side cost of receiving 10 000 messages: the sharded pub/sub link
 * (src/shardlink.c: SSUBSCRIBE, its own reader) vs the classic subscriber
 * (hiredis async SUBSCRIBE, on hiredis' libevent adapter: the rjq glue has
 * no hiredis hooks any more, it is on rjq_io_ops).
 * Once subscribed, a forked child publishes the messages (pipelined, 100
 * bytes each) and exits; the parent counts them. Callgrind collects only
 * from the subscription to the last message (CALLGRIND_TOGGLE_COLLECT), so
 * the set-up is not counted. Probe (docs/cluster.md 5.2), not a test.
 *
 *   cc -O2 -g -o /tmp/shardlink_cost tests/probes/shardlink_cost.c -Iinclude -Iadapters -Isrc \
 *     -Ibuild/generated build/librjq.a $(pkg-config --cflags --libs hiredis libevent_core) -lssl -lcrypto
 *   valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file=/tmp/cg.shard \
 *     /tmp/shardlink_cost <port> shard
 *   valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file=/tmp/cg.classic \
 *     /tmp/shardlink_cost <port> classic
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>
#include <hiredis/async.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/hiredis.h>
#include <rjq/libevent.h>
#include <valgrind/callgrind.h>

#include "shardlink.h"

#define N 10000

static int port;
static long received, subscribed;
static struct event_base *base;

static void publish_all(const char *cmd) {
    pid_t pid = fork();
    if (pid != 0) return;
    redisContext *rc = redisConnect("127.0.0.1", port);
    char payload[101];
    memset(payload, 'p', 100);
    payload[100] = '\0';
    for (int i = 0; i < N; i++) redisAppendCommand(rc, "%s {q}ch %s", cmd, payload);
    for (int i = 0; i < N; i++) {
        void *r;
        if (redisGetReply(rc, &r) != REDIS_OK) _exit(1);
        freeReplyObject(r);
    }
    redisFree(rc);
    _exit(0);
}

static void on_message(rjq__shardlink *l, void *arg, const char *ch, size_t chlen, const char *p,
                       size_t len) {
    (void)l, (void)arg, (void)ch, (void)chlen, (void)p, (void)len;
    if (++received == N) {
        CALLGRIND_TOGGLE_COLLECT;
        event_base_loopbreak(base);
    }
}

static void on_event(rjq__shardlink *l, void *arg, const char *ch, size_t chlen, int ev,
                     const char *d) {
    (void)l, (void)arg, (void)ch, (void)chlen, (void)d;
    if (ev == RJQ__SHARDLINK_SUBSCRIBED && !subscribed++) {
        CALLGRIND_TOGGLE_COLLECT;
        publish_all("SPUBLISH");
    }
}

static void on_classic(redisAsyncContext *ac, void *reply, void *priv) {
    redisReply *r = reply;
    (void)ac, (void)priv;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 3) return;
    if (strcmp(r->element[0]->str, "subscribe") == 0) {
        CALLGRIND_TOGGLE_COLLECT;
        publish_all("PUBLISH");
    } else if (strcmp(r->element[0]->str, "message") == 0 && ++received == N) {
        CALLGRIND_TOGGLE_COLLECT;
        event_base_loopbreak(base);
    }
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    port = atoi(argv[1]);
    base = event_base_new();
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    rjq_client_options o = RJQ_CLIENT_OPTIONS_INIT;
    o.url = url;
    rjq_client *c = NULL;
    if (rjq_libevent_client_new(&c, base, &o) != RJQ_OK) return 1;
    rjq__shardlink *l = NULL;
    redisAsyncContext *ac = NULL;
    static const rjq__shardlink_hooks hooks = {on_message, on_event};
    if (strcmp(argv[2], "shard") == 0) {
        if (rjq__shardlink_new(c, "127.0.0.1", port, &hooks, NULL, &l) != RJQ_OK) return 1;
        rjq__shardlink_subscribe(l, "{q}ch", 5);
    } else {
        ac = redisAsyncConnect("127.0.0.1", port);
        if (redisLibeventAttach(ac, base) != REDIS_OK) return 1;
        redisAsyncCommand(ac, on_classic, NULL, "SUBSCRIBE {q}ch");
    }
    event_base_dispatch(base);
    printf("%s: %ld messages\n", argv[2], received);
    int st;
    wait(&st);
    if (l) rjq__shardlink_free(l);
    if (ac) redisAsyncFree(ac);
    rjq_client_free(c);
    event_base_free(base);
    return received == N ? 0 : 1;
}
