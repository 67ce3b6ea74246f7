/* The Redis Cluster parsers (src/slotmap.c): byte 0 even, the rest is a
 * CLUSTER SLOTS reply in RESP bytes, read by hiredis' reader as a
 * connection would, into a slot table (rjq__slotmap_parse_slots), then the
 * table updated by a MOVED; byte 0 odd, the rest is an error reply's text
 * (rjq__redirect_parse). Also the key slot (src/slot.c) of the rest. */
#include <string.h>

#include <hiredis/hiredis.h>

#include "fuzz.h"
#include "rjq.h"
#include "slot.h"
#include "slotmap.h"

static void check_addr(const rjq__node_addr *a) {
    size_t len = strnlen(a->host, sizeof a->host);
    MUST(len < sizeof a->host);
    touch_in(a->host, sizeof a->host, a->host, len + 1);
    MUST(a->port >= 1 && a->port <= 65535);
    MUST(a->unknown == (strcmp(a->host, "?") == 0));
}

static void check_map(const rjq__slotmap *m) {
    size_t owned = 0;
    MUST(m->nnodes <= RJQ__SLOTMAP_NODES_MAX && m->nnodes <= m->cap);
    for (size_t i = 0; i < m->nnodes; i++) {
        check_addr(&m->nodes[i].addr);
        MUST(strlen(m->nodes[i].id) <= RJQ__NODE_ID_MAX);
        int master = m->nodes[i].master;
        MUST(master >= -1 && master < (int)m->nnodes && master != (int)i);
        for (size_t j = 0; j < i && m->nnodes <= 64; j++) /* (quadratic: small tables only) */
            MUST(m->nodes[j].addr.port != m->nodes[i].addr.port ||
                 strcmp(m->nodes[j].addr.host, m->nodes[i].addr.host) != 0);
    }
    for (int s = 0; s < RJQ__SLOTS; s++) {
        const rjq__slot_node *n = rjq__slotmap_master(m, s);
        if (n == NULL) continue;
        owned++;
        MUST(n >= m->nodes && n < m->nodes + m->nnodes && n->master == -1);
    }
    MUST(owned == m->nslots);
}

static void slots(const uint8_t *data, size_t size) {
    if (!counts_fit(data, size)) return;
    redisReader *rd = redisReaderCreate();
    if (rd == NULL) return;
    rjq__slotmap m;
    rjq__slotmap_init(&m);
    if (redisReaderFeed(rd, (const char *)data, size) == REDIS_OK) {
        void *reply = NULL;
        while (redisReaderGetReply(rd, &reply) == REDIS_OK && reply != NULL) {
            size_t before = m.nnodes;
            int rc = rjq__slotmap_parse_slots(&m, reply, "asked");
            MUST(rc == RJQ_OK || rc == RJQ_EPROTO || rc == RJQ_ENOMEM);
            MUST(rc == RJQ_OK || m.nnodes == before);
            check_map(&m);
            freeReplyObject(reply);
            reply = NULL;
        }
    }
    redisReaderFree(rd);
    /* a MOVED of the first byte's slot to a new node and to a known one */
    rjq__node_addr a = {.host = "moved", .port = 1 + (size > 1 ? data[1] : 0)};
    int slot = (int)((size > 2 ? data[2] : 0) * 64) % RJQ__SLOTS;
    int rc = rjq__slotmap_moved(&m, slot, &a);
    MUST(rc == RJQ_OK || rc == RJQ_EPROTO || rc == RJQ_ENOMEM);
    if (m.nnodes) {
        rjq__node_addr known = m.nodes[m.nnodes - 1].addr;
        MUST(rjq__slotmap_moved(&m, RJQ__SLOTS - 1, &known) == RJQ_OK);
        MUST(rjq__slotmap_master(&m, RJQ__SLOTS - 1)->addr.port == known.port);
    }
    check_map(&m);
    rjq__slotmap_clear(&m);
}

static void redirect(const uint8_t *data, size_t size) {
    rjq__redirect r;
    memset(&r, 0x5a, sizeof r);
    int rc = rjq__redirect_parse((const char *)data, size, "asked", &r);
    MUST(rc == RJQ_OK || rc == RJQ_EPROTO);
    if (rc != RJQ_OK) return;
    MUST(r.kind == RJQ__REDIRECT_MOVED || r.kind == RJQ__REDIRECT_ASK);
    MUST(r.slot >= 0 && r.slot < RJQ__SLOTS);
    check_addr(&r.addr);
    char buf[RJQ__HOST_MAX + 16];
    MUST(strlen(rjq__node_addr_format(&r.addr, buf, sizeof buf)) < sizeof buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    size_t tag;
    const char *h = rjq__key_hashed(data + 1, size - 1, &tag);
    touch_in(data + 1, size - 1, h, tag);
    int slot = rjq__key_slot(data + 1, size - 1);
    MUST(slot >= 0 && slot < RJQ__SLOTS);
    if (data[0] & 1)
        redirect(data + 1, size - 1);
    else
        slots(data + 1, size - 1);
    return 0;
}
