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

#endif
