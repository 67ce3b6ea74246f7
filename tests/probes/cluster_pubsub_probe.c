/*
 * Probe (docs/cluster.md section 2.2), not a test: prints what a real
 * Redis Cluster does; it asserts nothing. Built by hand against a build of
 * rjq (it uses the test cluster of tests/cluster.c):
 *
 *   B=build; cc -std=gnu11 -o /tmp/cluster_pubsub_probe tests/probes/cluster_pubsub_probe.c -Itests -Isrc -Iinclude \
 *     $B/tests/librjq_testlib.a $B/librjq.a $(pkg-config --libs hiredis libevent_core)
 *   /tmp/cluster_pubsub_probe
 *
 * Sharded pub/sub on a real cluster (sync hiredis): MOVED on SSUBSCRIBE and SPUBLISH, replicas, slot migration and failover.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include "cluster.h"
#include "harness.h"
#include "slot.h"
test_case test_cases[TEST_MAX];
int test_count;

static void show(const char *who, redisReply *r) {
    printf("  %s: ", who);
    if (!r) { printf("(no reply)\n"); return; }
    if (r->type == REDIS_REPLY_ARRAY) {
        printf("[");
        for (size_t i = 0; i < r->elements; i++)
            if (r->element[i]->type == REDIS_REPLY_INTEGER) printf(" %lld", r->element[i]->integer);
            else printf(" \"%s\"", r->element[i]->str ? r->element[i]->str : "nil");
        printf(" ]\n");
    } else if (r->type == REDIS_REPLY_INTEGER) printf("%lld\n", r->integer);
    else printf("%s\n", r->str ? r->str : "?");
    fflush(stdout);
}
static redisReply *next(redisContext *rc) {
    void *p = NULL;
    if (redisGetReply(rc, &p) != REDIS_OK) { printf("  (read: %s)\n", rc->errstr); rc->err = 0; return NULL; }
    return p;
}
static long long cinfo(redisContext *rc, const char *needle) {
    redisReply *r = redisCommand(rc, "CLUSTER INFO");
    const char *p = r && r->str ? strstr(r->str, needle) : NULL;
    long long v = p ? atoll(p + strlen(needle)) : -1;
    if (r) freeReplyObject(r);
    return v;
}
static redisContext *conn(test_cluster *c, int i) {
    redisContext *rc = cluster_connect(c, i);
    struct timeval tv = {3, 0};
    redisSetTimeout(rc, tv);
    return rc;
}
int main(void) {
    test_cluster c;
    cluster_start(&c, 2000);
    const char *ch = "rjq:{q}:wake";
    int owner = cluster_node_of_key(&c, ch), other = (owner + 1) % 3, to = (owner + 2) % 3;
    int rep = cluster_replica_of(&c, owner);
    printf("slot %d owner %d replica %d\n", rjq__key_slot(ch, strlen(ch)), owner, rep);
    redisContext *wrong = conn(&c, other);
    printf("1. SSUBSCRIBE on a master not owning the slot:\n");
    show("reply", redisCommand(wrong, "SSUBSCRIBE %s", ch));
    printf("   SPUBLISH there:\n");
    show("reply", redisCommand(wrong, "SPUBLISH %s x", ch));
    printf("   PUBSUB SHARDNUMSUB there:\n");
    show("reply", redisCommand(wrong, "PUBSUB SHARDNUMSUB %s", ch));
    printf("   SSUBSCRIBE of two channels of different slots on the owner:\n");
    redisContext *tmp = conn(&c, owner);
    show("reply", redisCommand(tmp, "SSUBSCRIBE %s {zz}x", ch));
    redisFree(tmp);
    redisContext *sub = conn(&c, owner), *rsub = conn(&c, rep), *pub = conn(&c, owner);
    printf("2. SSUBSCRIBE on the owner, and on its replica (without READONLY, then with):\n");
    show("owner", redisCommand(sub, "SSUBSCRIBE %s", ch));
    show("replica", redisCommand(rsub, "SSUBSCRIBE %s", ch));
    show("replica READONLY", redisCommand(rsub, "READONLY"));
    show("replica", redisCommand(rsub, "SSUBSCRIBE %s", ch));
    show("SPUBLISH on the owner", redisCommand(pub, "SPUBLISH %s one", ch));
    show("owner's subscriber", next(sub));
    show("replica's subscriber", next(rsub));
    show("PUBSUB SHARDNUMSUB on owner", redisCommand(pub, "PUBSUB SHARDNUMSUB %s", ch));
    printf("3. the slot migrated from %d to %d:\n", owner, to);
    cluster_migrate_slot(&c, rjq__key_slot(ch, strlen(ch)), owner, to);
    show("owner's subscriber", next(sub));
    show("replica's subscriber", next(rsub));
    redisContext *newsub = conn(&c, to), *newpub = conn(&c, to);
    show("SSUBSCRIBE on the new owner", redisCommand(newsub, "SSUBSCRIBE %s", ch));
    show("SPUBLISH on the old owner", redisCommand(pub, "SPUBLISH %s two", ch));
    printf("4. the new owner %d killed:\n", to);
    int trep = cluster_replica_of(&c, to);
    redisContext *tsub = conn(&c, trep);
    show("READONLY on its replica", redisCommand(tsub, "READONLY"));
    show("SSUBSCRIBE on its replica", redisCommand(tsub, "SSUBSCRIBE %s", ch));
    show("SPUBLISH on the new owner", redisCommand(newpub, "SPUBLISH %s three", ch));
    show("replica's subscriber", next(tsub));
    double took;
    int prom = cluster_kill_master(&c, to, &took);
    printf("   promoted %d after %.0f ms\n", prom, took);
    show("subscriber on the killed node: the message sent before the kill", next(newsub));
    show("subscriber on the killed node: then", next(newsub));
    redisContext *ppub = conn(&c, prom);
    show("SPUBLISH on the promoted", redisCommand(ppub, "SPUBLISH %s four", ch));
    show("the promoted node's subscriber (subscribed while a replica)", next(tsub));
    printf("5. classic PUBLISH crosses the bus: CLUSTER INFO before/after 1000 PUBLISH on node %d\n", prom);
    long long before = cinfo(ppub, "cluster_stats_messages_publish_sent:");
    for (int i = 0; i < 1000; i++) redisAppendCommand(ppub, "PUBLISH nobody x");
    for (int i = 0; i < 1000; i++) freeReplyObject(next(ppub));
    long long after = cinfo(ppub, "cluster_stats_messages_publish_sent:");
    printf("   publish messages sent over the bus: %lld (for 1000 PUBLISH with no subscriber)\n", after - before);
    before = cinfo(ppub, "cluster_stats_messages_publishshard_sent:");
    for (int i = 0; i < 1000; i++) redisAppendCommand(ppub, "SPUBLISH %s x", ch);
    for (int i = 0; i < 1000; i++) freeReplyObject(next(ppub));
    after = cinfo(ppub, "cluster_stats_messages_publishshard_sent:");
    printf("   publishshard messages sent over the bus: %lld (for 1000 SPUBLISH)\n", after - before);
    cluster_stop(&c);
    return 0;
}
