/* The call of batch.lua (batch_call.h), and the periodic visit's sweep. */
#include "batch_call.h"
#include "core.h"

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

/* The periodic visit's sweep (batch_call.h). */
static void on_swept(rjq_client *c, int status, redisReply *r, void *priv) {
    (void)r; /* (rjq__batch_call's hold released below) */
    /* (a failure: the next visit sweeps again) */
    if (status != RJQ_OK && status != RJQ_ECANCELED)
        rjq__background_failed(c, status, "batch sweep");
    rjq__queue_release(priv);
}

void rjq__batch_sweep(rjq_queue *q) {
    if (!rjq__accepting(rjq_queue_get_client(q)) || rjq__queue_front(q)) return;
    (void)rjq__batch_call(q, "sweep", "", RJQ__REQ_RETRY, on_swept, q, 0, NULL, NULL);
}
