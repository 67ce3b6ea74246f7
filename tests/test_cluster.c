/*
 * The Redis Cluster test fixture (tests/cluster.c) on a real cluster of 3
 * masters and 3 replicas, with the slot and redirect parsers
 * (src/slot.c, src/slotmap.c) checked against what the servers say:
 * CLUSTER KEYSLOT, CLUSTER SLOTS, and the MOVED and ASK errors of a slot
 * migrated by hand and of a master killed. Plain hiredis sync calls: rjq
 * does not route on a cluster yet (issue 34).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "harness.h"
#include "slot.h"
#include "slotmap.h"

/* The error of a reply, which must be one. */
static void expect_error(redisReply *r, char *out, size_t size) {
    ASSERT(r != NULL);
    if (r->type != REDIS_REPLY_ERROR)
        FAIL_AT(__FILE__, __LINE__, "expected an error, got type %d (%s)", r->type, r->str ? r->str : "");
    snprintf(out, size, "%s", r->str);
    freeReplyObject(r);
}

/* The redirect node i answers a GET of key with. */
static rjq__redirect redirect_of(test_cluster *c, int i, const char *key, int asking) {
    char err[300];
    const char *get[] = {"GET", key};
    expect_error(cluster_send(c, i, asking, 2, get), err, sizeof err);
    rjq__redirect d;
    if (rjq__redirect_parse(err, strlen(err), "127.0.0.1", &d) != RJQ_OK)
        FAIL_AT(__FILE__, __LINE__, "node %d, GET %s: not a redirect: %s", i, key, err);
    return d;
}

/* GET key on node i (after ASKING when asked): a value or nil, not an error. */
static char *get_on(test_cluster *c, int i, const char *key, int asking) {
    const char *get[] = {"GET", key};
    redisReply *r = cluster_send(c, i, asking, 2, get);
    if (r->type == REDIS_REPLY_ERROR) FAIL_AT(__FILE__, __LINE__, "node %d, GET %s: %s", i, key, r->str);
    char *v = r->type == REDIS_REPLY_STRING ? strdup(r->str) : NULL;
    freeReplyObject(r);
    return v;
}

static void set_on(test_cluster *c, int i, const char *key, const char *value) {
    const char *set[] = {"SET", key, value};
    redisReply *r = cluster_send(c, i, 0, 3, set);
    if (r->type != REDIS_REPLY_STATUS) FAIL_AT(__FILE__, __LINE__, "node %d, SET %s: %s", i, key, r->str);
    freeReplyObject(r);
    redisContext *rc = cluster_connect(c, i);
    /* on its replica too before a test kills the master (its ack may be
     * late on a loaded machine: asked again, a minute at most) */
    double end = mono_ms() + 60000;
    while (server_int(rc, "WAIT 1 1000") < 1)
        if (mono_ms() > end) FAIL_AT(__FILE__, __LINE__, "node %d: SET %s not on its replica in 60 s", i, key);
    redisFree(rc);
}

/* The slot table read from node i's CLUSTER SLOTS by src/slotmap.c. */
static void slotmap_of(test_cluster *c, int i, rjq__slotmap *m) {
    redisContext *rc = cluster_connect(c, i);
    redisReply *r = server_cmd(rc, "CLUSTER SLOTS");
    rjq__slotmap_init(m);
    ASSERT_OK(rjq__slotmap_parse_slots(m, r, "127.0.0.1"));
    freeReplyObject(r);
    redisFree(rc);
}

TEST(cluster_topology_migration_redirects_and_failover) {
    test_cluster c;
    cluster_start(&c, 0);

    /* topology: 3 masters own all slots, each with one replica; the table
     * src/slotmap.c reads agrees with the fixture's reading */
    rjq__slotmap m;
    slotmap_of(&c, 4, &m);
    ASSERT_EQ(RJQ__SLOTS, m.nslots);
    ASSERT_EQ(CLUSTER_NODES, m.nnodes);
    for (int s = 0; s < RJQ__SLOTS; s += 97) {
        const rjq__slot_node *n = rjq__slotmap_master(&m, s);
        ASSERT(n != NULL);
        int i = cluster_node_at(&c, n->addr.port);
        ASSERT(i >= 0 && i < CLUSTER_MASTERS);
        ASSERT_EQ(cluster_owner(&c, 0, s), i);
        ASSERT_STREQ(c.id[i], n->id);
    }
    for (size_t k = 0; k < m.nnodes; k++) {
        int i = cluster_node_at(&c, m.nodes[k].addr.port);
        ASSERT(i >= 0);
        if (m.nodes[k].master >= 0)
            ASSERT_EQ(i, cluster_replica_of(&c, cluster_node_at(&c, m.nodes[m.nodes[k].master].addr.port)));
        else
            ASSERT(i < CLUSTER_MASTERS);
    }

    /* a key's node: the one owning rjq__key_slot's slot */
    const char *key = "rjq:{mq}:a";
    int slot = rjq__key_slot(key, strlen(key));
    int from = cluster_node_of_key(&c, key);
    ASSERT_EQ(cluster_node_at(&c, rjq__slotmap_master(&m, slot)->addr.port), from);
    int other = (from + 1) % CLUSTER_MASTERS, to = (from + 2) % CLUSTER_MASTERS;
    set_on(&c, from, "rjq:{mq}:a", "1");
    set_on(&c, from, "rjq:{mq}:b", "2");
    rjq__redirect d = redirect_of(&c, other, key, 0);
    ASSERT_EQ(RJQ__REDIRECT_MOVED, d.kind);
    ASSERT_EQ(slot, d.slot);
    ASSERT_EQ(c.node[from].port, d.addr.port);
    ASSERT_STREQ("127.0.0.1", d.addr.host);

    /* migrating: a key still on `from` is served there; a missing one gets
     * ASK to `to`, which answers after ASKING only */
    cluster_migrate_begin(&c, slot, from, to);
    char *v = get_on(&c, from, "rjq:{mq}:a", 0);
    ASSERT_STREQ("1", v);
    free(v);
    d = redirect_of(&c, from, "rjq:{mq}:none", 0);
    ASSERT_EQ(RJQ__REDIRECT_ASK, d.kind);
    ASSERT_EQ(slot, d.slot);
    ASSERT_EQ(c.node[to].port, d.addr.port);
    d = redirect_of(&c, to, "rjq:{mq}:none", 0); /* without ASKING: back to the owner */
    ASSERT_EQ(RJQ__REDIRECT_MOVED, d.kind);
    ASSERT_EQ(c.node[from].port, d.addr.port);
    ASSERT(get_on(&c, to, "rjq:{mq}:none", 1) == NULL);
    ASSERT_EQ(2, cluster_migrate_keys(&c, slot, from, to));
    d = redirect_of(&c, from, "rjq:{mq}:a", 0); /* gone from `from`: ASK */
    ASSERT_EQ(RJQ__REDIRECT_ASK, d.kind);
    v = get_on(&c, to, "rjq:{mq}:a", 1);
    ASSERT_STREQ("1", v);
    free(v);
    cluster_migrate_end(&c, slot, from, to);

    /* migrated: MOVED to `to` from the old owner, and the table follows it */
    d = redirect_of(&c, from, key, 0);
    ASSERT_EQ(RJQ__REDIRECT_MOVED, d.kind);
    ASSERT_EQ(c.node[to].port, d.addr.port);
    ASSERT_OK(rjq__slotmap_moved(&m, d.slot, &d.addr));
    ASSERT_EQ(c.node[to].port, rjq__slotmap_master(&m, slot)->addr.port);
    ASSERT_EQ(CLUSTER_NODES, m.nnodes);
    v = get_on(&c, to, "rjq:{mq}:b", 0);
    ASSERT_STREQ("2", v);
    free(v);
    ASSERT_EQ(to, cluster_node_of_key(&c, key));

    /* failover: `to` SIGKILLed, its replica promoted with its keys */
    double took = 0;
    int promoted = cluster_kill_master(&c, to, &took);
    fprintf(stderr, "node %d promoted %.0f ms after node %d was killed (node timeout %ld ms)\n", promoted,
            took, to, c.node_timeout_ms);
    ASSERT(promoted >= CLUSTER_MASTERS);
    ASSERT_EQ(promoted, cluster_node_of_key(&c, key));
    v = get_on(&c, promoted, "rjq:{mq}:a", 0);
    ASSERT_STREQ("1", v);
    free(v);
    d = redirect_of(&c, from, key, 0);
    ASSERT_EQ(RJQ__REDIRECT_MOVED, d.kind);
    ASSERT_EQ(c.node[promoted].port, d.addr.port);
    ASSERT_OK(rjq__slotmap_moved(&m, d.slot, &d.addr));
    const rjq__slot_node *n = rjq__slotmap_master(&m, slot);
    ASSERT_EQ(c.node[promoted].port, n->addr.port);
    ASSERT_EQ(-1, n->master); /* the replica became a master in the table */
    rjq__slotmap_clear(&m);

    /* the killed node comes back as the promoted one's replica */
    cluster_restart_node(&c, to);
    ASSERT(!cluster_is_master(&c, to));
    ASSERT_EQ(to, cluster_replica_of(&c, promoted));
    cluster_stop(&c);
}

/* rjq__key_slot is CLUSTER KEYSLOT, for edge cases of hash tags and for
 * random keys (binary, braces often). One cluster-enabled node is enough:
 * CLUSTER KEYSLOT needs no slot assigned. */
TEST(key_slot_is_cluster_keyslot) {
    /* its own bus port: the default (port + 10000) fails for a port above
     * 55535, and free ports come from the whole range */
    char bus[16];
    snprintf(bus, sizeof bus, "%d", free_port());
    const char *extra[] = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                           "--cluster-port", bus, NULL};
    test_server s;
    server_start_guarded(&s, extra);
    redisContext *rc = server_connect(&s);
    static const char *edge[] = {"", "{", "}", "{}", "}{", "{}{}", "a{}{b}", "{a}{b}", "a{b", "a}b{c}",
                                 "{{a}}", "foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{user1000}.following",
                                 "rjq:{q}:ready", "t:{a b}:x", "{\xff}", "\xff{\xfe}", "123456789"};
    size_t nedge = sizeof edge / sizeof edge[0], nrand = 3000;
    char (*keys)[24] = calloc(nrand, sizeof *keys);
    size_t *lens = calloc(nrand, sizeof *lens);
    ASSERT(keys != NULL && lens != NULL);
    srand(34);
    for (size_t i = 0; i < nrand; i++) {
        lens[i] = (size_t)(rand() % 24);
        for (size_t k = 0; k < lens[i]; k++) {
            int pick = rand() % 8;
            keys[i][k] = pick == 0 ? '{' : pick == 1 ? '}' : (char)(rand() % 256);
        }
    }
    for (size_t i = 0; i < nedge; i++) redisAppendCommand(rc, "CLUSTER KEYSLOT %b", edge[i], strlen(edge[i]));
    for (size_t i = 0; i < nrand; i++) redisAppendCommand(rc, "CLUSTER KEYSLOT %b", keys[i], lens[i]);
    for (size_t i = 0; i < nedge + nrand; i++) {
        void *p = NULL;
        ASSERT(redisGetReply(rc, &p) == REDIS_OK);
        redisReply *r = p;
        ASSERT(r->type == REDIS_REPLY_INTEGER);
        const char *k = i < nedge ? edge[i] : keys[i - nedge];
        size_t len = i < nedge ? strlen(edge[i]) : lens[i - nedge];
        if (rjq__key_slot(k, len) != r->integer)
            FAIL_AT(__FILE__, __LINE__, "key %zu (%zu bytes): rjq %d, server %lld", i, len, rjq__key_slot(k, len),
                    r->integer);
        freeReplyObject(r);
    }
    free(keys);
    free(lens);
    redisFree(rc);
    server_stop_guarded(&s);
}
