/*
 * The call of batch.lua (batch_call.c), shared by the batches (batch.c)
 * and the dependencies' releases (deps.c: a batch member's finisher tells
 * its batch as it tells a dependent job), so its arguments are built in
 * one place.
 */
#ifndef RJQ_BATCH_CALL_H
#define RJQ_BATCH_CALL_H

#include "queue.h"

/* batch.lua's call `op` on q for batch id, then the op's own arguments
 * (nargs of them, lens[i] bytes each). As rjq__queue_script: RJQ_OK (fn
 * called once, q held until it releases it) or an error (fn never
 * called). */
int rjq__batch_call(rjq_queue *q, const char *op, const char *id, int flags, rjq__reply_fn *fn,
                    void *priv, size_t nargs, const char *const *args, const size_t *lens);

/* The queue's periodic visit (upkeep.c) found ended batches of q past
 * their retention: one batch.lua sweep deletes up to 16 of them (nothing
 * is sent while the client closes). */
void rjq__batch_sweep(rjq_queue *q);

#endif /* RJQ_BATCH_CALL_H */
