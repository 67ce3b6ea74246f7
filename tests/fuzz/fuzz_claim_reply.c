/* Claim replies (worker.c: rjq__claim_reply_ok, rjq__claim_reply_job): the
 * input's first byte is how many jobs the claim asked for, the rest RESP
 * bytes, read into replies by hiredis' reader as a connection would. */
#include <limits.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "fuzz.h"
#include "worker.h"

static void touch_reply(const redisReply *r) {
    if (r->type == REDIS_REPLY_STRING) touch_in(r->str, r->len, r->str, r->len);
}

static void check(const redisReply *r, int asked) {
    if (!rjq__claim_reply_ok(r, asked, 0)) return;
    /* what on_claimed does with an accepted reply, and must not overflow */
    size_t got = rjq__claim_reply_count(r);
    MUST((long long)got <= asked);
    long long next = r->element[0]->integer, deadline = r->element[3]->integer;
    MUST(next >= -2 && deadline > 0);
    keep(deadline - (long long)LONG_MAX); /* any lease_ms a worker may have */
    keep(next >= 0 ? (long long)((unsigned long long)next + 1) : 0);
    MUST(r->element[1]->integer >= 0 && r->element[1]->integer <= asked - (long long)got);
    touch_reply(r->element[2]);
    rjq__claim_at at = {0};
    for (size_t i = 0; i < got; i++) {
        rjq__pushed d;
        int nil = rjq__claim_reply_job(r, &at, &d);
        MUST(nil == 0 || nil == 1);
        MUST(d.idlen > 0 && d.toklen > 0 && d.toklen < 64);
        MUST(d.attempt >= 0 && d.max_attempts >= 0 && d.deadline == deadline);
        touch_in(d.id, d.idlen, d.id, d.idlen);
        if (!nil) touch_in(d.payload, d.len, d.payload, d.len);
        redisReply *m = r->element[at.run + 2]; /* (max attempts, with headers a string) */
        if (d.hlen) touch_in(m->str, m->len, d.headers, d.hlen);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || !counts_fit(data, size)) return 0;
    int asked = data[0];
    redisReader *rd = redisReaderCreate();
    if (rd == NULL) return 0;
    if (redisReaderFeed(rd, (const char *)data + 1, size - 1) == REDIS_OK) {
        void *reply = NULL;
        while (redisReaderGetReply(rd, &reply) == REDIS_OK && reply != NULL) {
            check(reply, asked);
            freeReplyObject(reply);
            reply = NULL;
        }
    }
    redisReaderFree(rd);
    return 0;
}
