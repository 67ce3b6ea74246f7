/*
 * Ids for anonymous jobs of a sharded queue (docs/sharding.md 6a). Each
 * shard's enqueue script numbers anonymous jobs from its own counter, so
 * server-assigned ids repeat across shards and name no shard. A front
 * (shard.c) gives each anonymous job an id made here instead,
 * "a<client id>.<count>.<k>": the client's random id (unique among
 * clients: it starts the fencing tokens too), the client's count of such
 * ids (64 bits, never reused within the client) and k, the smallest number
 * from 0 up with crc16(id) mod n == the shard the job is put on. The job
 * then goes as a caller id, so every by-id call on the front routes it to
 * that shard as it routes any caller id. The CRC of the fixed part is
 * computed once and k's digits added to it: about n tries of a few bytes.
 */
#include "shard_ids.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core.h"
#include "slot.h"

/* Ids made on the client so far (the feature's state). */
typedef struct ids {
    uint64_t made;
} ids;

static void ids_close(rjq_client *c, void *state) {
    (void)c;
    free(state);
}

static const rjq__feature ids_feature = {.name = "shard ids", .close = ids_close};

/* Tries of k per id: (1 - 1/n)^(64 n) < e^-64 of ever running out. */
#define TRIES_PER_SHARD 64

int rjq__shard_id_make(rjq_client *c, int n, int i, char out[RJQ__SHARD_ID_MAX]) {
    ids *st = rjq__feature_ensure(c, &ids_feature, sizeof *st);
    if (st == NULL) return RJQ_ENOMEM;
    int len = snprintf(out, RJQ__SHARD_ID_MAX, "a%s.%llu.", rjq__client_id(c),
                       (unsigned long long)st->made++);
    RJQ_ASSERT(len > 0 && len + 12 < RJQ__SHARD_ID_MAX);
    uint16_t head = rjq__crc16(out, (size_t)len);
    int to = i;
    for (unsigned k = 0; k < (unsigned)(TRIES_PER_SHARD * n); k++) {
        int kl = snprintf(out + len, RJQ__SHARD_ID_MAX - (size_t)len, "%u", k);
        to = (int)(rjq__crc16_more(head, out + len, (size_t)kl) % (unsigned)n);
        if (to == i) break;
    }
    return to;
}
