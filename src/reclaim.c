/* The reclaim and orphan sweeps' script calls (reclaim.h). */
#include "reclaim.h"

#define RECLAIM_LIMIT 1000 /* jobs one sweep returns at most */
#define ORPHAN_LIMIT 100   /* held index members one orphan sweep call takes */

int rjq__reclaim_send(rjq_queue *q, long guard_ms, int look, rjq__reply_fn *fn, void *priv) {
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_RECLAIM);
    rjq__argv_key(&a, q, RJQ__K_JOB);
    rjq__argv_key(&a, q, RJQ__K_WAKE);
    rjq__argv_ll(&a, guard_ms);
    rjq__argv_ll(&a, RECLAIM_LIMIT);
    rjq__argv_ll(&a, rjq__queue_dead_max(q));
    rjq__argv_ll(&a, rjq__queue_retention_ms(q));
    rjq__argv_ll(&a, rjq__queue_completed_max(q));
    rjq__argv_str(&a, look ? "1" : "0");
    char jitter[32];
    rjq__random_fraction(rjq_queue_get_client(q), jitter, sizeof jitter);
    rjq__argv_str(&a, jitter);
    int rc = a.oom ? RJQ_ENOMEM
                   : rjq__script(rjq_queue_get_client(q), RJQ__S_RECLAIM, 0, fn, priv, a.n, a.v, a.len);
    rjq__argv_free(&a);
    return rc;
}

int rjq__orphans_send(rjq_queue *q, const char *who, long long until, rjq__reply_fn *fn,
                      void *priv) {
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_ORPHANS);
    rjq__argv_key(&a, q, RJQ__K_JOB);
    rjq__argv_key(&a, q, RJQ__K_WAKE);
    rjq__argv_str(&a, who);
    rjq__argv_ll(&a, ORPHAN_LIMIT);
    rjq__argv_ll(&a, rjq__queue_dead_max(q));
    rjq__argv_ll(&a, until);
    int rc = a.oom ? RJQ_ENOMEM
                   : rjq__script(rjq_queue_get_client(q), RJQ__S_ORPHANS, RJQ__REQ_RETRY, fn, priv,
                                 a.n, a.v, a.len);
    rjq__argv_free(&a);
    return rc;
}
