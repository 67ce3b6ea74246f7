/*
 * Input checks and encodings that need no Redis (validate.c), and the map
 * from Redis error texts to RJQ_E* codes (error.c). Leaves: pure,
 * unit-tested.
 */
#ifndef RJQ_VALIDATE_H
#define RJQ_VALIDATE_H

#include "rjq.h"

#define RJQ__QUEUE_NAME_MAX 200
/* Bytes an encoded job options string takes at most (with its NUL). */
#define RJQ__OPTS_MAX 128

int rjq__valid_queue_name(const char *name);
int rjq__valid_job_id(const char *id);
/* 1 when id names a job, a caller's id or a server-assigned number (as
 * rjq__valid_job_id, digits allowed), else 0. */
int rjq__valid_job_ref(const char *id);
/* A job group's name (rjq.h rjq_job_options.group): 1..RJQ_GROUP_NAME_MAX
 * bytes of [A-Za-z0-9_.:@-] (groups_lib.lua GROUPS.NAME). */
int rjq__valid_group_name(const char *g);
int rjq__valid_client_name(const char *name);
/* Encode job options as the enqueue script expects them ("" = defaults;
 * "delay,priority,max_attempts,backoff[;timeout]").
 * buf must hold RJQ__OPTS_MAX bytes. Returns RJQ_OK or RJQ_EINVAL. */
int rjq__encode_job_options(const rjq_job_options *o, char *buf);
/* The most a caller's extensible struct may say it is (rjq.h "Extensible
 * structs"): a bigger size is taken for garbage. */
#define RJQ__SIZED_MAX 4096
/* Check a caller's extensible struct (its first member its size_t size)
 * against the library's own size `known` of it. Returns:
 *   RJQ_OK     usable in place: size >= known, every byte past known zero;
 *   1          smaller (an older header): copy it with rjq__sized_copy;
 *   RJQ_EINVAL refused, why (whylen bytes) says so naming `what`: a size
 *              below sizeof(size_t) (not initialised with its _INIT), above
 *              RJQ__SIZED_MAX, or a byte past known that is not zero (a
 *              field this library does not have is set).
 * src must not be NULL. */
int rjq__sized_check(const void *src, size_t known, const char *what, char *why, size_t whylen);
/* Copy what src's size covers (at most known bytes) into dst (known bytes),
 * zero the rest (defaults) and set dst's size to known. src must have
 * passed rjq__sized_check. */
void rjq__sized_copy(void *dst, size_t known, const void *src);
/* Both: dst (known bytes) becomes the normalised copy of src, or RJQ_EINVAL
 * as rjq__sized_check says. */
int rjq__sized_take(void *dst, size_t known, const void *src, const char *what, char *why,
                    size_t whylen);

/* 1 when the len bytes at s are an index field name (rjq.h
 * RJQ_INDEX_FIELD_MAX: 1..64 letters, digits, '_', '.', '-'), else 0. */
int rjq__valid_index_field(const char *s, size_t len);
/* 1 when s (len bytes) is a declaration as stored: up to
 * RJQ_INDEX_FIELDS_MAX such names, each followed by one space but the
 * last ("": none), else 0. */
int rjq__valid_index_fields(const char *s, size_t len);

/* Map a Redis error text to an RJQ_E* code (error.c). */
int rjq__redis_error_code(const char *err);
/* 1 when a Redis error text says the server could not serve for a moment
 * and did not run the command (LOADING, BUSY, READONLY, MASTERDOWN,
 * TRYAGAIN, CLUSTERDOWN): it may be sent again (error.c). */
int rjq__redis_error_transient(const char *err);
/* A decimal integer from the network, len bytes at s (an optional '-',
 * then digits, nothing else) in lo..hi: 0 with *out set, else -1. */
int rjq__parse_ll(const char *s, size_t len, long long lo, long long hi, long long *out);

#endif
