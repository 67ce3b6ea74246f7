/*
 * Ids the library makes for anonymous jobs of a sharded queue
 * (shard_ids.c, docs/sharding.md 6a).
 */
#ifndef RJQ_SHARD_IDS_H
#define RJQ_SHARD_IDS_H

#include "rjq.h"

/* Bytes of such an id and its NUL, at most. */
#define RJQ__SHARD_ID_MAX 48

/* An id routed to shard i of n ("a<client id>.<count>.<k>": never all
 * digits, unique within the client, the client's id unique among clients)
 * into out. Returns the shard the id routes to (crc16(id) mod n): i, or
 * after 64 n tries in vain the shard of the last one tried; RJQ_ENOMEM. */
int rjq__shard_id_make(rjq_client *c, int n, int i, char out[RJQ__SHARD_ID_MAX]);

#endif /* RJQ_SHARD_IDS_H */
