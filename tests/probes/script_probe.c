/*
 * Probe (docs/cluster.md section 2.2), not a test: prints what a real
 * Redis Cluster does; it asserts nothing. Built by hand against a build of
 * rjq (it uses the test cluster of tests/cluster.c):
 *
 *   B=build; cc -std=gnu11 -o /tmp/script_probe tests/probes/script_probe.c -Itests -Isrc -Iinclude \
 *     $B/tests/librjq_testlib.a $B/librjq.a $(pkg-config --libs hiredis libevent_core)
 *   /tmp/script_probe
 *
 * Scripts and sharded pub/sub on a real cluster (sync hiredis).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    freeReplyObject(r);
}
int main(void) {
    test_cluster c;
    cluster_start(&c, 2000);
    int owner = cluster_node_of_key(&c, "rjq:{q}:ready");
    /* a queue on another master, and one on the same master but another slot */
    char elsewhere[48] = "", same[48] = "";
    for (int i = 0; i < 1000 && (!elsewhere[0] || !same[0]); i++) {
        char k[32];
        snprintf(k, sizeof k, "{q%d}", i);
        int n = cluster_node_of_key(&c, k);
        if (n != owner && !elsewhere[0]) snprintf(elsewhere, sizeof elsewhere, "rjq:%s:wake", k);
        if (n == owner && !same[0]) snprintf(same, sizeof same, "rjq:%s:wake", k);
    }
    redisContext *rc = cluster_connect(&c, owner);
    printf("owner %d; other-slot same-node channel %s; other-node channel %s\n", owner, same, elsewhere);
    show("EVAL SPUBLISH own slot's channel", redisCommand(rc, "EVAL %s 1 rjq:{q}:ready rjq:{q}:wake", "return redis.call('SPUBLISH', ARGV[1], 'x')"));
    show("EVAL SPUBLISH another slot's channel on this node", redisCommand(rc, "EVAL %s 1 rjq:{q}:ready %s", "return redis.call('SPUBLISH', ARGV[1], 'x')", same));
    show("EVAL SPUBLISH another node's channel", redisCommand(rc, "EVAL %s 1 rjq:{q}:ready %s", "return redis.call('SPUBLISH', ARGV[1], 'x')", elsewhere));
    show("EVAL PUBLISH any channel (classic)", redisCommand(rc, "EVAL %s 1 rjq:{q}:ready %s", "return redis.call('PUBLISH', ARGV[1], 'x')", elsewhere));
    show("EVAL PUBSUB SHARDNUMSUB own channel", redisCommand(rc, "EVAL %s 1 rjq:{q}:ready rjq:{q}:wake", "return redis.call('PUBSUB', 'SHARDNUMSUB', ARGV[1])"));
    show("EVAL PUBSUB NUMSUB", redisCommand(rc, "EVAL %s 1 rjq:{q}:ready rjq:{q}:wake", "return redis.call('PUBSUB', 'NUMSUB', ARGV[1])"));
    show("EVAL touching a key of another slot on this node", redisCommand(rc, "EVAL %s 1 rjq:{q}:ready %s", "return redis.call('GET', ARGV[1])", same));
    show("EVAL with 0 keys, SPUBLISH", redisCommand(rc, "EVAL %s 0 rjq:{q}:wake", "return redis.call('SPUBLISH', ARGV[1], 'x')"));
    show("FUNCTION LOAD on the owner", redisCommand(rc, "FUNCTION LOAD %s", "#!lua name=probe\nredis.register_function('p', function(k, a) return 1 end)"));
    redisContext *o = cluster_connect(&c, (owner + 1) % 3);
    show("FCALL on another master (no load there)", redisCommand(o, "FCALL p 1 %s", elsewhere + 0));
    int rep = cluster_replica_of(&c, owner);
    redisContext *r = cluster_connect(&c, rep);
    show("FUNCTION LIST on the owner's replica", redisCommand(r, "FUNCTION LIST"));
    cluster_stop(&c);
    return 0;
}
