/* The call of batch.lua (batch_call.h). */
#include "batch_call.h"

int rjq__batch_call(rjq_queue *q, const char *op, const char *id, int flags, rjq__reply_fn *fn,
                    void *priv, size_t nargs, const char *const *args, const size_t *lens) {
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_BATCH);
    rjq__argv_str(&a, op);
    rjq__argv_key(&a, q, RJQ__K_JOB);
    rjq__argv_key(&a, q, RJQ__K_WAKE);
    rjq__argv_str(&a, id);
    for (size_t i = 0; i < nargs; i++) rjq__argv_add(&a, args[i], lens[i]);
    return rjq__queue_script(q, RJQ__S_BATCH, flags, fn, priv, &a);
}
