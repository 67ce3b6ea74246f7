/* Unit tests for Redis Cluster's key slot (src/slot.c) and the slot table
 * and redirect parsers (src/slotmap.c). No Redis: test_cluster compares
 * the slots with a server's CLUSTER KEYSLOT and parses a real CLUSTER SLOTS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "failalloc.h"
#include "harness.h"
#include "rjq.h"
#include "slot.h"
#include "slotmap.h"

static int slot_of(const char *key) {
    return rjq__key_slot(key, strlen(key));
}

TEST(crc16_is_xmodem) {
    /* the CRC catalogue's check value of CRC-16/XMODEM */
    ASSERT_EQ(0x31C3, rjq__crc16("123456789", 9));
    ASSERT_EQ(0, rjq__crc16("", 0));
}

TEST(key_slot_known_values) {
    /* values from the Redis Cluster specification and CLUSTER KEYSLOT */
    ASSERT_EQ(12182, slot_of("foo"));
    ASSERT_EQ(5061, slot_of("bar"));
    ASSERT_EQ(0x31C3, slot_of("123456789"));
    ASSERT_EQ(15495, slot_of("a"));
    ASSERT_EQ(0, slot_of(""));
    ASSERT_EQ(slot_of("user1000"), slot_of("{user1000}.following"));
    ASSERT_EQ(slot_of("user1000"), slot_of("{user1000}.followers"));
}

/* The per-master registries' tags (upkeep.c, queue.c): for every slot,
 * "<base>-<n>" with the smallest n that hashes there, so every client
 * names the same key (a sample of slots, both ends); out-of-range slots
 * and short buffers refused. */
TEST(slot_tag_is_the_first_numbered_tag_of_the_slot) {
    char tag[64], key[96];
    for (int i = 0; i <= 169; i++) {
        int slot = i == 169 ? RJQ__SLOTS - 1 : i * 97; /* 0, 97, ..., 16296, 16383 */
        ASSERT_EQ(0, rjq__slot_tag("clients", slot, tag, sizeof tag));
        ASSERT_EQ(slot, slot_of(tag));
        snprintf(key, sizeof key, "t:{%s}:live", tag); /* as a key's hash tag too */
        ASSERT_EQ(slot, slot_of(key));
        ASSERT(strncmp(tag, "clients-", 8) == 0);
        long n = atol(tag + 8);
        for (long k = 0; k < n; k++) { /* every smaller one misses */
            char other[64];
            snprintf(other, sizeof other, "clients-%ld", k);
            ASSERT(slot_of(other) != slot);
        }
    }
    ASSERT_EQ(0, rjq__slot_tag("queues", 0, tag, sizeof tag));
    ASSERT_EQ(0, slot_of(tag));
    ASSERT_EQ(-1, rjq__slot_tag("clients", -1, tag, sizeof tag));
    ASSERT_EQ(-1, rjq__slot_tag("clients", RJQ__SLOTS, tag, sizeof tag));
    ASSERT_EQ(-1, rjq__slot_tag("clients", 0, tag, 12));
}

TEST(key_slot_hash_tags_as_redis) {
    size_t n;
    /* a tag: the bytes between the first '{' and the first '}' after it */
    ASSERT_EQ(slot_of("q"), slot_of("rjq:{q}:ready"));
    ASSERT_EQ(slot_of("bar"), slot_of("foo{bar}{zap}"));
    ASSERT_EQ(slot_of("{bar"), slot_of("foo{{bar}}zap"));
    ASSERT_EQ(slot_of("a"), slot_of("{a}{b}"));
    ASSERT_EQ(slot_of("a b"), slot_of("t:{a b}:x"));
    /* no tag: the whole key */
    const char *whole[] = {"{}", "{", "}", "a{}{b}", "foo{}{bar}", "a{b", "}a{", "{}q", "}{", "x{}}y"};
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++) {
        const char *h = rjq__key_hashed(whole[i], strlen(whole[i]), &n);
        ASSERT(h == whole[i]);
        ASSERT_EQ(strlen(whole[i]), n);
        ASSERT_EQ(rjq__crc16(whole[i], strlen(whole[i])) & 16383, slot_of(whole[i]));
    }
    const char *k = "a{b}c";
    const char *h = rjq__key_hashed(k, 5, &n);
    ASSERT(h == k + 2);
    ASSERT_EQ(1, n);
    /* bytes past len are not read, NUL bytes are hashed */
    ASSERT_EQ(slot_of("ab"), rjq__key_slot("ab{c}", 2));
    ASSERT_EQ(rjq__crc16("a\0b", 3) & 16383, rjq__key_slot("a\0b", 3));
    ASSERT_EQ(slot_of("x"), rjq__key_slot("\0{x}\0", 5));
}

/* ---- the slot table ---------------------------------------------------- */

/* A reply read from RESP bytes by hiredis' reader, as a connection would. */
static redisReply *resp(const char *bytes) {
    redisReader *rd = redisReaderCreate();
    ASSERT(rd != NULL);
    ASSERT(redisReaderFeed(rd, bytes, strlen(bytes)) == REDIS_OK);
    void *r = NULL;
    ASSERT(redisReaderGetReply(rd, &r) == REDIS_OK && r != NULL);
    redisReaderFree(rd);
    return r;
}

/* A CLUSTER SLOTS reply of 3 masters with one replica each, as Redis 7.0
 * writes it (node: endpoint, port, id, metadata). */
#define NODE(host, port, id) "*4\r\n$" host "\r\n:" port "\r\n$40\r\n" id "\r\n*0\r\n"
#define ID(c) c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c
static const char three_masters[] =
    "*3\r\n"
    "*4\r\n:0\r\n:5460\r\n" NODE("9\r\n127.0.0.1", "7001", ID("a")) NODE("9\r\n127.0.0.1", "7004", ID("d"))
    "*4\r\n:5461\r\n:10922\r\n" NODE("9\r\n127.0.0.1", "7002", ID("b")) NODE("9\r\n127.0.0.1", "7005", ID("e"))
    "*4\r\n:10923\r\n:16383\r\n" NODE("9\r\n127.0.0.1", "7003", ID("c")) NODE("9\r\n127.0.0.1", "7006", ID("f"));

TEST(slotmap_parses_cluster_slots) {
    rjq__slotmap m;
    rjq__slotmap_init(&m);
    ASSERT(rjq__slotmap_master(&m, 0) == NULL);
    redisReply *r = resp(three_masters);
    ASSERT_OK(rjq__slotmap_parse_slots(&m, r, "10.0.0.1"));
    freeReplyObject(r);
    ASSERT_EQ(6, m.nnodes);
    ASSERT_EQ(RJQ__SLOTS, m.nslots);
    const rjq__slot_node *n = rjq__slotmap_master(&m, 0);
    ASSERT(n != NULL);
    ASSERT_STREQ("127.0.0.1", n->addr.host);
    ASSERT_EQ(7001, n->addr.port);
    ASSERT_EQ(-1, n->master);
    ASSERT_EQ('a', n->id[0]);
    ASSERT_EQ(40, strlen(n->id));
    ASSERT_EQ(7001, rjq__slotmap_master(&m, 5460)->addr.port);
    ASSERT_EQ(7002, rjq__slotmap_master(&m, 5461)->addr.port);
    ASSERT_EQ(7001, rjq__slotmap_master(&m, slot_of("bar"))->addr.port);
    ASSERT_EQ(7003, rjq__slotmap_master(&m, slot_of("foo"))->addr.port);
    ASSERT_EQ(7003, rjq__slotmap_master(&m, 16383)->addr.port);
    ASSERT(rjq__slotmap_master(&m, 16384) == NULL);
    ASSERT(rjq__slotmap_master(&m, -1) == NULL);
    int replicas = 0;
    for (size_t i = 0; i < m.nnodes; i++)
        if (m.nodes[i].master >= 0) {
            replicas++;
            ASSERT_EQ(m.nodes[m.nodes[i].master].addr.port + 3, m.nodes[i].addr.port);
        }
    ASSERT_EQ(3, replicas);
    rjq__slotmap_clear(&m);
    ASSERT_EQ(0, m.nnodes);
    ASSERT(rjq__slotmap_master(&m, 0) == NULL);
}

TEST(slotmap_endpoints_ipv6_hostname_empty_nil_unknown) {
    rjq__slotmap m;
    rjq__slotmap_init(&m);
    redisReply *r = resp("*5\r\n"
                         "*3\r\n:0\r\n:0\r\n*2\r\n$3\r\n::1\r\n:7001\r\n"
                         "*3\r\n:1\r\n:1\r\n*2\r\n$14\r\nnode2.redis.io\r\n:7002\r\n"
                         "*3\r\n:2\r\n:2\r\n*2\r\n$0\r\n\r\n:7003\r\n"
                         "*3\r\n:3\r\n:3\r\n*2\r\n$-1\r\n:7004\r\n"
                         "*3\r\n:4\r\n:4\r\n*2\r\n$1\r\n?\r\n:7005\r\n");
    ASSERT_OK(rjq__slotmap_parse_slots(&m, r, "192.168.1.9"));
    freeReplyObject(r);
    char buf[300];
    ASSERT_STREQ("[::1]:7001", rjq__node_addr_format(&rjq__slotmap_master(&m, 0)->addr, buf, sizeof buf));
    ASSERT_STREQ("node2.redis.io:7002",
                 rjq__node_addr_format(&rjq__slotmap_master(&m, 1)->addr, buf, sizeof buf));
    ASSERT_STREQ("192.168.1.9", rjq__slotmap_master(&m, 2)->addr.host); /* empty: the node asked */
    ASSERT_STREQ("192.168.1.9", rjq__slotmap_master(&m, 3)->addr.host); /* nil: the node asked */
    ASSERT_EQ(0, rjq__slotmap_master(&m, 3)->addr.unknown);
    ASSERT_EQ(1, rjq__slotmap_master(&m, 4)->addr.unknown);
    ASSERT(rjq__slotmap_master(&m, 5) == NULL);
    ASSERT_EQ(5, m.nslots);
    ASSERT_STREQ("[::1]:7001", rjq__node_addr_format(&rjq__slotmap_master(&m, 0)->addr, buf, 11));
    ASSERT_STREQ("[::1]:70", rjq__node_addr_format(&rjq__slotmap_master(&m, 0)->addr, buf, 9));
    rjq__slotmap_clear(&m);
}

TEST(slotmap_master_of_two_ranges_is_one_node) {
    rjq__slotmap m;
    rjq__slotmap_init(&m);
    redisReply *r = resp("*3\r\n"
                         "*4\r\n:0\r\n:9\r\n*2\r\n$1\r\na\r\n:1\r\n*2\r\n$1\r\nb\r\n:2\r\n"
                         "*3\r\n:10\r\n:19\r\n*2\r\n$1\r\nc\r\n:3\r\n"
                         "*4\r\n:20\r\n:29\r\n*2\r\n$1\r\na\r\n:1\r\n*2\r\n$1\r\nb\r\n:2\r\n");
    ASSERT_OK(rjq__slotmap_parse_slots(&m, r, NULL));
    freeReplyObject(r);
    ASSERT_EQ(3, m.nnodes);
    ASSERT(rjq__slotmap_master(&m, 5) == rjq__slotmap_master(&m, 25));
    ASSERT_EQ(30, m.nslots);
    rjq__slotmap_clear(&m);
}

/* Each reply is refused with RJQ_EPROTO, and the table stays as it was. */
TEST(slotmap_refuses_bad_replies_and_keeps_its_table) {
    static const char *bad[] = {
        "+OK\r\n",                                          /* not an array */
        "*1\r\n:5\r\n",                                     /* a range that is not an array */
        "*1\r\n*2\r\n:0\r\n:1\r\n",                         /* no master */
        "*1\r\n*3\r\n:-1\r\n:1\r\n*2\r\n$1\r\na\r\n:1\r\n", /* start < 0 */
        "*1\r\n*3\r\n:5\r\n:4\r\n*2\r\n$1\r\na\r\n:1\r\n",  /* end < start */
        "*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\na\r\n:1\r\n", /* end past the last slot */
        "*1\r\n*3\r\n$1\r\n0\r\n:1\r\n*2\r\n$1\r\na\r\n:1\r\n", /* a slot as a string */
        "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\na\r\n:0\r\n",  /* port 0 */
        "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\na\r\n:65536\r\n", /* port too big */
        "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\na\r\n$4\r\n6379\r\n", /* port as a string */
        "*1\r\n*3\r\n:0\r\n:1\r\n*1\r\n$1\r\na\r\n",        /* a node without its port */
        "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n:7\r\n:1\r\n",       /* an endpoint as a number */
        "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$3\r\na b\r\n:1\r\n", /* a space in a host */
        "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$3\r\na\0b\r\n:1\r\n", /* a NUL in a host */
        "*1\r\n*3\r\n:0\r\n:1\r\n*3\r\n$1\r\na\r\n:1\r\n:5\r\n", /* an id as a number */
        "*1\r\n*3\r\n:0\r\n:1\r\n*3\r\n$1\r\na\r\n:1\r\n$41\r\n"
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n", /* an id too long */
        "*2\r\n*3\r\n:0\r\n:5\r\n*2\r\n$1\r\na\r\n:1\r\n"
        "*3\r\n:5\r\n:6\r\n*2\r\n$1\r\nb\r\n:1\r\n", /* two ranges share slot 5 */
        "*1\r\n*4\r\n:0\r\n:1\r\n*2\r\n$1\r\na\r\n:1\r\n*2\r\n$1\r\na\r\n:1\r\n", /* its own replica */
        "*2\r\n*4\r\n:0\r\n:1\r\n*2\r\n$1\r\na\r\n:1\r\n*2\r\n$1\r\nb\r\n:1\r\n"
        "*3\r\n:2\r\n:3\r\n*2\r\n$1\r\nb\r\n:1\r\n", /* a replica that is also a master */
        "*2\r\n*4\r\n:0\r\n:1\r\n*2\r\n$1\r\na\r\n:1\r\n*2\r\n$1\r\nr\r\n:1\r\n"
        "*4\r\n:2\r\n:3\r\n*2\r\n$1\r\nb\r\n:1\r\n*2\r\n$1\r\nr\r\n:1\r\n", /* replica of two masters */
    };
    rjq__slotmap m;
    rjq__slotmap_init(&m);
    redisReply *good = resp(three_masters);
    ASSERT_OK(rjq__slotmap_parse_slots(&m, good, "h"));
    freeReplyObject(good);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        redisReader *rd = redisReaderCreate();
        size_t len = strlen(bad[i]);
        if (i == 13) len = strlen("*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$3\r\na") + 1 + strlen("b\r\n:1\r\n");
        ASSERT(redisReaderFeed(rd, bad[i], len) == REDIS_OK);
        void *r = NULL;
        ASSERT(redisReaderGetReply(rd, &r) == REDIS_OK && r != NULL);
        int rc = rjq__slotmap_parse_slots(&m, r, "h");
        if (rc != RJQ_EPROTO) FAIL_AT(__FILE__, __LINE__, "bad reply %zu: %d, expected RJQ_EPROTO", i, rc);
        freeReplyObject(r);
        redisReaderFree(rd);
        ASSERT_EQ(6, m.nnodes);
        ASSERT_EQ(RJQ__SLOTS, m.nslots);
        ASSERT_EQ(7003, rjq__slotmap_master(&m, 16383)->addr.port);
    }
    /* a host of RJQ__HOST_MAX - 1 bytes fits; one more does not */
    char reply[1200], host[RJQ__HOST_MAX + 1];
    memset(host, 'h', sizeof host);
    host[RJQ__HOST_MAX - 1] = '\0';
    snprintf(reply, sizeof reply, "*1\r\n*3\r\n:0\r\n:0\r\n*2\r\n$%zu\r\n%s\r\n:1\r\n", strlen(host), host);
    redisReply *r = resp(reply);
    ASSERT_OK(rjq__slotmap_parse_slots(&m, r, NULL));
    freeReplyObject(r);
    ASSERT_STREQ(host, rjq__slotmap_master(&m, 0)->addr.host);
    host[RJQ__HOST_MAX - 1] = 'h';
    host[RJQ__HOST_MAX] = '\0';
    snprintf(reply, sizeof reply, "*1\r\n*3\r\n:0\r\n:0\r\n*2\r\n$%zu\r\n%s\r\n:1\r\n", strlen(host), host);
    r = resp(reply);
    ASSERT_EQ(RJQ_EPROTO, rjq__slotmap_parse_slots(&m, r, NULL));
    freeReplyObject(r);
    rjq__slotmap_clear(&m);
}

TEST(slotmap_refuses_more_nodes_than_its_bound) {
    /* RJQ__SLOTMAP_NODES_MAX + 1 one-slot ranges, each on its own port */
    size_t n = RJQ__SLOTMAP_NODES_MAX + 1, cap = n * 64 + 32, len = 0;
    char *bytes = malloc(cap);
    ASSERT(bytes != NULL);
    len += (size_t)snprintf(bytes + len, cap - len, "*%zu\r\n", n);
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(bytes + len, cap - len, "*3\r\n:%zu\r\n:%zu\r\n*2\r\n$1\r\nh\r\n:%zu\r\n", i,
                                i, 1000 + i);
    rjq__slotmap m;
    rjq__slotmap_init(&m);
    redisReply *r = resp(bytes);
    ASSERT_EQ(RJQ_EPROTO, rjq__slotmap_parse_slots(&m, r, NULL));
    ASSERT_EQ(0, m.nnodes);
    r->elements--; /* one node fewer: fits */
    ASSERT_OK(rjq__slotmap_parse_slots(&m, r, NULL));
    r->elements++;
    ASSERT_EQ(RJQ__SLOTMAP_NODES_MAX, m.nnodes);
    /* a MOVED to one more node is refused too */
    rjq__node_addr a = {.host = "h", .port = 9};
    ASSERT_EQ(RJQ_EPROTO, rjq__slotmap_moved(&m, 5, &a));
    ASSERT_EQ(1005, rjq__slotmap_master(&m, 5)->addr.port);
    freeReplyObject(r);
    free(bytes);
    rjq__slotmap_clear(&m);
}

TEST(slotmap_out_of_memory_keeps_the_table) {
    rjq__slotmap m;
    rjq__slotmap_init(&m);
    redisReply *r = resp(three_masters);
    for (long k = 0;; k++) {
        failalloc_arm_once(k);
        int rc = rjq__slotmap_parse_slots(&m, r, NULL);
        long failed = failalloc_failures();
        failalloc_disarm();
        if (!failed) {
            ASSERT_OK(rc);
            break;
        }
        ASSERT_EQ(RJQ_ENOMEM, rc);
        ASSERT_EQ(0, m.nnodes);
        ASSERT(rjq__slotmap_master(&m, 0) == NULL);
    }
    ASSERT_EQ(6, m.nnodes);
    rjq__node_addr a = {.host = "10.9.9.9", .port = 7777};
    /* new nodes until the node array must grow: that MOVED changes nothing */
    failalloc_arm_from(0);
    int rc = RJQ_OK, s;
    for (s = 0; s < 100 && rc == RJQ_OK; s++, a.port++) rc = rjq__slotmap_moved(&m, s, &a);
    failalloc_disarm();
    ASSERT_EQ(RJQ_ENOMEM, rc);
    ASSERT_EQ(1, failalloc_failures());
    ASSERT_EQ(7001, rjq__slotmap_master(&m, s - 1)->addr.port);
    ASSERT_EQ(7778, rjq__slotmap_master(&m, s - 2)->addr.port);
    ASSERT_OK(rjq__slotmap_moved(&m, s - 1, &a)); /* memory back: it is taken */
    ASSERT_EQ(a.port, rjq__slotmap_master(&m, s - 1)->addr.port);
    freeReplyObject(r);
    rjq__slotmap_clear(&m);
}

/* ---- MOVED and ASK ----------------------------------------------------- */

static rjq__redirect redirect_ok(const char *text, const char *asked) {
    rjq__redirect r;
    int rc = rjq__redirect_parse(text, strlen(text), asked, &r);
    if (rc != RJQ_OK) FAIL_AT(__FILE__, __LINE__, "redirect \"%s\": %d", text, rc);
    return r;
}

TEST(redirect_parses_moved_and_ask) {
    rjq__redirect r = redirect_ok("MOVED 3999 127.0.0.1:6381", NULL);
    ASSERT_EQ(RJQ__REDIRECT_MOVED, r.kind);
    ASSERT_EQ(3999, r.slot);
    ASSERT_STREQ("127.0.0.1", r.addr.host);
    ASSERT_EQ(6381, r.addr.port);
    r = redirect_ok("ASK 0 10.0.0.2:1", NULL);
    ASSERT_EQ(RJQ__REDIRECT_ASK, r.kind);
    ASSERT_EQ(0, r.slot);
    ASSERT_EQ(1, r.addr.port);
    r = redirect_ok("MOVED 16383 ::1:65535", NULL); /* IPv6, bare: the port after the last ':' */
    ASSERT_EQ(16383, r.slot);
    ASSERT_STREQ("::1", r.addr.host);
    ASSERT_EQ(65535, r.addr.port);
    r = redirect_ok("MOVED 12 fe80::1:2:3:4:7000", NULL);
    ASSERT_STREQ("fe80::1:2:3:4", r.addr.host);
    ASSERT_EQ(7000, r.addr.port);
    r = redirect_ok("MOVED 12 redis-2.example.com:7000", NULL);
    ASSERT_STREQ("redis-2.example.com", r.addr.host);
    r = redirect_ok("MOVED 12 :7000", "10.1.1.1"); /* empty: the node asked */
    ASSERT_STREQ("10.1.1.1", r.addr.host);
    ASSERT_EQ(7000, r.addr.port);
    r = redirect_ok("ASK 12 ?:7000", "10.1.1.1");
    ASSERT_EQ(1, r.addr.unknown);
    /* the length given is the end: what follows is not read */
    ASSERT_OK(rjq__redirect_parse("MOVED 1 a:2xyz", 11, NULL, &r));
    ASSERT_EQ(2, r.addr.port);
}

TEST(redirect_refuses_other_errors_and_bad_numbers) {
    static const char *bad[] = {
        "", "MOVED", "MOVED ", "MOVED 1", "MOVED 1 ", "MOVED 1 a", "MOVED 1 a:", "MOVED 1 a:0",
        "MOVED 1 a:65536", "MOVED 1 a:99999999999999999999", "MOVED 16384 a:1", "MOVED -1 a:1",
        "MOVED +1 a:1", "MOVED 01 a:1", "MOVED 1 a:01", "MOVED 1 a:1 ", "MOVED 1 a:1\n",
        "MOVED 1  a:1", "MOVED x a:1", "MOVED 1 a b:1", "moved 1 a:1", "ASK", "ASKING 1 a:1",
        "TRYAGAIN Multiple keys request during rehashing of slot",
        "CLUSTERDOWN The cluster is down", "ERR unknown command", "MOVED 99999 a:1",
        "MOVED 1 a:+1", "MOVED 1 a:-1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rjq__redirect r = {.kind = RJQ__REDIRECT_ASK, .slot = 77};
        int rc = rjq__redirect_parse(bad[i], strlen(bad[i]), "h", &r);
        if (rc != RJQ_EPROTO) FAIL_AT(__FILE__, __LINE__, "\"%s\": %d, expected RJQ_EPROTO", bad[i], rc);
        ASSERT_EQ(77, r.slot); /* *out untouched */
    }
    /* a host too long */
    char text[600];
    int n = snprintf(text, sizeof text, "MOVED 1 ");
    memset(text + n, 'h', RJQ__HOST_MAX);
    snprintf(text + n + RJQ__HOST_MAX, sizeof text - (size_t)n - RJQ__HOST_MAX, ":1");
    rjq__redirect r;
    ASSERT_EQ(RJQ_EPROTO, rjq__redirect_parse(text, strlen(text), NULL, &r));
}

TEST(slotmap_moved_updates_one_slot_and_promotes_a_replica) {
    rjq__slotmap m;
    rjq__slotmap_init(&m);
    redisReply *r = resp(three_masters);
    ASSERT_OK(rjq__slotmap_parse_slots(&m, r, NULL));
    freeReplyObject(r);
    /* a slot migrated to another master */
    rjq__redirect d = redirect_ok("MOVED 100 127.0.0.1:7002", NULL);
    ASSERT_OK(rjq__slotmap_moved(&m, d.slot, &d.addr));
    ASSERT_EQ(7002, rjq__slotmap_master(&m, 100)->addr.port);
    ASSERT_EQ(7001, rjq__slotmap_master(&m, 99)->addr.port);
    ASSERT_EQ(6, m.nnodes);
    /* a failover: the replica 7004 of 7001 now serves slot 0 */
    d = redirect_ok("MOVED 0 127.0.0.1:7004", NULL);
    ASSERT_OK(rjq__slotmap_moved(&m, d.slot, &d.addr));
    const rjq__slot_node *n = rjq__slotmap_master(&m, 0);
    ASSERT_EQ(7004, n->addr.port);
    ASSERT_EQ(-1, n->master);
    ASSERT_EQ(6, m.nnodes);
    /* a node never seen */
    d = redirect_ok("MOVED 16000 ::1:8000", NULL);
    ASSERT_OK(rjq__slotmap_moved(&m, d.slot, &d.addr));
    ASSERT_EQ(7, m.nnodes);
    ASSERT_STREQ("::1", rjq__slotmap_master(&m, 16000)->addr.host);
    ASSERT_EQ(RJQ__SLOTS, m.nslots);
    ASSERT_EQ(RJQ_EPROTO, rjq__slotmap_moved(&m, RJQ__SLOTS, &d.addr));
    rjq__slotmap_clear(&m);
    /* on an empty table it counts the slot */
    ASSERT_OK(rjq__slotmap_moved(&m, 5, &d.addr));
    ASSERT_EQ(1, m.nslots);
    rjq__slotmap_clear(&m);
}

/* cluster-preferred-endpoint-type hostname with no host name announced:
 * Redis writes "?" and gives the IP in the metadata (RESP2: a flat array);
 * a redirect's "?:port" is the table's node on that port. */
TEST(slotmap_unknown_endpoint_takes_the_metadata_ip_and_redirects_find_it_by_port) {
    rjq__slotmap m;
    rjq__slotmap_init(&m);
#define QNODE(port, id, meta) "*4\r\n$1\r\n?\r\n:" port "\r\n$40\r\n" id "\r\n" meta
    redisReply *r = resp("*3\r\n"
                         "*4\r\n:0\r\n:99\r\n" QNODE("7001", ID("a"), "*2\r\n$2\r\nip\r\n$8\r\n10.0.0.1\r\n")
                         QNODE("7004", ID("d"), "*4\r\n$8\r\nhostname\r\n$1\r\nx\r\n$2\r\nip\r\n$8\r\n10.0.0.4\r\n")
                         "*3\r\n:100\r\n:199\r\n" QNODE("7002", ID("b"), "*0\r\n")
                         "*3\r\n:200\r\n:299\r\n" QNODE("7003", ID("c"), "*2\r\n$2\r\nip\r\n:1\r\n"));
#undef QNODE
    ASSERT_OK(rjq__slotmap_parse_slots(&m, r, "192.168.1.9"));
    freeReplyObject(r);
    const rjq__slot_node *n = rjq__slotmap_master(&m, 0);
    ASSERT_STREQ("10.0.0.1", n->addr.host);
    ASSERT_EQ(0, n->addr.unknown);
    ASSERT_STREQ("10.0.0.4", m.nodes[1].addr.host);         /* the replica too */
    ASSERT_EQ(1, rjq__slotmap_master(&m, 100)->addr.unknown); /* no IP given */
    ASSERT_EQ(1, rjq__slotmap_master(&m, 200)->addr.unknown); /* an IP of another type */

    rjq__redirect d = redirect_ok("MOVED 150 ?:7004", "192.168.1.9");
    ASSERT_EQ(1, d.addr.unknown);
    ASSERT_EQ(1, rjq__slotmap_known(&m, &d.addr));
    ASSERT_STREQ("10.0.0.4", d.addr.host);
    ASSERT_EQ(7004, d.addr.port);
    d = redirect_ok("ASK 150 ?:7002", NULL); /* its node's IP is not known either */
    ASSERT_EQ(0, rjq__slotmap_known(&m, &d.addr));
    ASSERT_STREQ("?", d.addr.host);
    d = redirect_ok("MOVED 150 ?:7009", NULL); /* no node on that port */
    ASSERT_EQ(0, rjq__slotmap_known(&m, &d.addr));
    d = redirect_ok("MOVED 150 10.0.0.7:7009", NULL); /* known already */
    ASSERT_EQ(1, rjq__slotmap_known(&m, &d.addr));
    ASSERT_STREQ("10.0.0.7", d.addr.host);
    /* two hosts on one port: which is meant cannot be told */
    d = redirect_ok("MOVED 300 10.0.0.5:7001", NULL);
    ASSERT_OK(rjq__slotmap_moved(&m, d.slot, &d.addr));
    d = redirect_ok("MOVED 150 ?:7001", NULL);
    ASSERT_EQ(0, rjq__slotmap_known(&m, &d.addr));
    rjq__slotmap_clear(&m);
}
