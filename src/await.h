/*
 * Awaits (await.c). Nothing in src/ calls into the await module; this
 * header is for white-box tests only.
 */
#ifndef RJQ_AWAIT_H
#define RJQ_AWAIT_H

#include <stddef.h>

#include "rjq.h"

/* The client's reply channel ("" before the first await), its enqueues in
 * flight, the outcomes kept for them and how many of those the cap
 * pushed out so far. */
void rjq__awaits_inspect(const rjq_client *c, const char **channel, size_t *enqueues_inflight,
                         size_t *early, unsigned long long *early_dropped);

/* The reply channel's messages (pure): one outcome of a framed message,
 * "<kind> <klen> <blen>\n<key><body>" at msg (len bytes left): the bytes
 * it takes, 0 when malformed (a length beyond the message); and the older
 * form "kind\nkey\nbody": 0, or -1 when malformed. kind gets at most
 * kindcap - 1 bytes ("" when longer, framed). */
size_t rjq__await_parse_framed(const char *msg, size_t len, char *kind, size_t kindcap,
                               const char **key, size_t *klen, const char **body, size_t *blen);
int rjq__await_parse_message(const char *msg, size_t len, char *kind, size_t kindcap,
                             const char **key, size_t *klen, const char **body, size_t *blen);

#endif
