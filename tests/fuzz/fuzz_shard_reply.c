/* The sharded pub/sub dispatcher (src/ssbook.c: rjq__ssbook_reply and the
 * book it keeps). Byte 0: how many op bytes follow (mod 16); each op byte
 * is one owner action on four channels (want + SSUBSCRIBE, unwant +
 * SUNSUBSCRIBE, PING, a set-up step); the rest is RESP bytes, read by
 * hiredis' reader as the link reads its socket. After each reply the next
 * op runs (cycling), so replies meet commands sent in between; a
 * protocol error resets the book as the link's reconnect does. The book's
 * counts and every pointer of each outcome are checked. */
#include <string.h>

#include <hiredis/hiredis.h>

#include "fuzz.h"
#include "ssbook.h"

static const char *const names[4] = {"{q}a", "{q}b", "{r}c", "{q}a\0x"};
static const size_t lens[4] = {4, 4, 4, 6};

static void drain_reset(rjq__ssbook *b);

static void op(rjq__ssbook *b, uint8_t o) {
    int ch = (o >> 2) & 3;
    switch (o & 3) {
    case 0: {
        rjq__ssch *e = rjq__ssbook_want(b, names[ch], lens[ch]);
        if (e && rjq__ssbook_needs_sub(e)) (void)rjq__ssbook_push(b, RJQ__SSCMD_SUB, e, 0);
        break;
    }
    case 1: {
        rjq__ssch *e = rjq__ssbook_find(b, names[ch], lens[ch]);
        if (e && e->wanted && rjq__ssbook_unwant(b, e) &&
            rjq__ssbook_push(b, RJQ__SSCMD_UNSUB, e, 0) != 0)
            drain_reset(b);
        break;
    }
    case 2: (void)rjq__ssbook_push(b, RJQ__SSCMD_PING, NULL, 0); break;
    default: (void)rjq__ssbook_push(b, RJQ__SSCMD_SETUP, NULL, o >> 2); break;
    }
}

static int count_entry(rjq__ssch *e, void *arg) {
    size_t *n = arg;
    n[0]++;
    if (e->wanted) n[1]++;
    MUST(e->nsub >= 0 && e->nunsub >= 0 && e->len >= 1 && e->len <= RJQ__SSCH_MAX);
    return 0;
}

static void check(rjq__ssbook *b) {
    size_t n[2] = {0, 0};
    rjq__ssbook_each(b, count_entry, n);
    MUST(n[0] == b->n && n[1] == b->nwanted);
    MUST(b->count <= b->cap);
    long subs = 0;
    for (size_t i = 0; i < b->count; i++) {
        const rjq__sssent *s = &b->ring[(b->head + i) % b->cap];
        if (s->kind == RJQ__SSCMD_SUB || s->kind == RJQ__SSCMD_UNSUB) {
            MUST(rjq__ssbook_find(b, s->ch->name, s->ch->len) == s->ch);
            subs++;
        }
    }
    (void)subs;
}

static void drain_reset(rjq__ssbook *b) {
    rjq__ssbook_reset(b);
    rjq__ssch *e;
    while ((e = rjq__ssbook_lost_peek(b)) != NULL) {
        MUST(e->wanted);
        rjq__ssbook_lost_done(b, e);
    }
    MUST(b->count == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    size_t nops = data[0] % 16;
    if (size < 1 + nops) return 0;
    const uint8_t *ops = data + 1, *resp = data + 1 + nops;
    size_t rlen = size - 1 - nops;
    if (!counts_fit(resp, rlen)) return 0;
    rjq__ssbook b;
    rjq__ssbook_init(&b);
    for (size_t i = 0; i < nops; i++) op(&b, ops[i]);
    check(&b);
    redisReader *rd = redisReaderCreate();
    if (rd == NULL) {
        rjq__ssbook_free(&b);
        return 0;
    }
    size_t next = 0;
    if (redisReaderFeed(rd, (const char *)resp, rlen) == REDIS_OK) {
        void *r = NULL;
        while (redisReaderGetReply(rd, &r) == REDIS_OK && r != NULL) {
            rjq__ssout o;
            rjq__ssbook_reply(&b, r, &o);
            MUST(o.kind >= RJQ__SSOUT_NONE && o.kind <= RJQ__SSOUT_PROTO);
            if (o.channel) {
                MUST(o.chlen >= 1 && o.chlen <= RJQ__SSCH_MAX);
                touch_in(o.channel, o.chlen, o.channel, o.chlen);
            }
            if (o.data) touch_in(o.data, o.len, o.data, o.len);
            if (o.detail) keep((long long)strlen(o.detail));
            if (o.kind == RJQ__SSOUT_MESSAGE) {
                /* wanted, and confirmed by the server: a SUNSUBSCRIBE and a
                 * new SSUBSCRIBE may still be due (the server is subscribed
                 * until it reads them), so the state may be PENDING */
                const rjq__ssch *e = rjq__ssbook_find(&b, o.channel, o.chlen);
                MUST(e != NULL && e->wanted && e->confirmed);
            }
            if (o.kind == RJQ__SSOUT_SUBSCRIBED)
                MUST(rjq__ssbook_state(&b, o.channel, o.chlen) == RJQ__SSCH_SUBSCRIBED);
            if (o.kind == RJQ__SSOUT_UNSUBSCRIBED || o.kind == RJQ__SSOUT_REFUSED)
                MUST(rjq__ssbook_state(&b, o.channel, o.chlen) == -1);
            rjq__ssbook_out_done(&b, &o);
            freeReplyObject(r);
            r = NULL;
            if (o.kind == RJQ__SSOUT_PROTO) drain_reset(&b);
            if (nops) op(&b, ops[next++ % nops]);
            check(&b);
        }
    }
    redisReaderFree(rd);
    drain_reset(&b);
    check(&b);
    rjq__ssbook_free(&b);
    return 0;
}
