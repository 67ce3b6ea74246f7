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
int rjq__valid_client_name(const char *name);
/* Encode job options as the enqueue script expects them ("" = defaults;
 * "delay,priority,max_attempts,backoff[;timeout]").
 * buf must hold RJQ__OPTS_MAX bytes. Returns RJQ_OK or RJQ_EINVAL. */
int rjq__encode_job_options(const rjq_job_options *o, char *buf);
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
