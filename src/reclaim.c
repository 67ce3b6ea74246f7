/* The reclaim and orphan sweeps' script calls (reclaim.h). */
#include "reclaim.h"

#define RECLAIM_LIMIT 1000 /* jobs one sweep returns at most */
#define ORPHAN_LIMIT 100   /* held index members one orphan sweep call takes */

int rjq__reclaim_send(rjq_queue *q, long guard_ms, int look, rjq__reply_fn *fn, void *priv) {
    rjq__argv a;
    rjq__argv_init(&a);
    RJQ__KEYS(&a, q, RJQ__K_ACTIVE, RJQ__K_READY, RJQ__K_PRIO, RJQ__K_DEAD, RJQ__K_STATS,
              RJQ__K_GUARD, RJQ__K_COMPLETED, RJQ__K_COLUMNS, RJQ__K_MONITORED, RJQ__K_DELAYED,
              RJQ__K_META, RJQ__K_DEADLINES, RJQ__K_DEDUP);
    rjq__argv_key(&a, q, RJQ__K_JOB);
    rjq__argv_key(&a, q, RJQ__K_WAKE);
    rjq__argv_ll(&a, guard_ms);
    rjq__argv_ll(&a, RECLAIM_LIMIT);
    rjq__argv_ll(&a, rjq__queue_dead_max(q));
    rjq__argv_ll(&a, rjq__queue_retention_ms(q));
    rjq__argv_ll(&a, rjq__queue_completed_max(q));
    rjq__argv_str(&a, look ? "1" : "0");
    char jitter[32];
    rjq__random_fraction(rjq_queue_client(q), jitter, sizeof jitter);
    rjq__argv_str(&a, jitter);
    int rc = a.oom ? RJQ_ENOMEM
                   : rjq__script(rjq_queue_client(q), RJQ__S_RECLAIM, 0, fn, priv, a.n, a.v, a.len);
    rjq__argv_free(&a);
    return rc;
}

int rjq__orphans_send(rjq_queue *q, const char *who, long long until, rjq__reply_fn *fn,
                      void *priv) {
    rjq__argv a;
    rjq__argv_init(&a);
    RJQ__KEYS(&a, q, RJQ__K_HELD, RJQ__K_ACTIVE, RJQ__K_READY, RJQ__K_PRIO, RJQ__K_DEAD,
              RJQ__K_STATS, RJQ__K_COLUMNS, RJQ__K_MONITORED, RJQ__K_DEDUP);
    rjq__argv_key(&a, q, RJQ__K_JOB);
    rjq__argv_key(&a, q, RJQ__K_WAKE);
    rjq__argv_str(&a, who);
    rjq__argv_ll(&a, ORPHAN_LIMIT);
    rjq__argv_ll(&a, rjq__queue_dead_max(q));
    rjq__argv_ll(&a, until);
    int rc = a.oom ? RJQ_ENOMEM
                   : rjq__script(rjq_queue_client(q), RJQ__S_ORPHANS, RJQ__REQ_RETRY, fn, priv,
                                 a.n, a.v, a.len);
    rjq__argv_free(&a);
    return rc;
}
