/* The check of one job's enqueue (enqueue.h): in a file of its own, so
 * the enqueues of other files (await.c, deps.c, shard.c) use it too. */
#include "enqueue.h"
#include "headers.h"
#include "validate.h"

int rjq__enqueue_check(rjq_queue *q, const rjq_enqueue_item *it, char *opts) {
    rjq_client *c = rjq_queue_get_client(q);
    if (it->payload == NULL && it->len > 0) return RJQ_EINVAL;
    size_t max = rjq__client_max_payload(c);
    if (it->len > max) {
        rjq__errmsg(c, "payload of %zu bytes exceeds max_payload %zu", it->len, max);
        return RJQ_ETOOBIG;
    }
    if (it->opts && it->opts->id && !rjq__valid_job_id(it->opts->id)) {
        rjq__errmsg(c, "job ids are 1..%d bytes without spaces or control characters, "
                       "and not all digits", RJQ_JOB_ID_MAX);
        return RJQ_EJOBID;
    }
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    if (it->opts) o = *it->opts; /* (this library's size: items_in, rjq__job_options_in) */
    if (o.timeout_ms == 0) o.timeout_ms = rjq__queue_job_timeout_ms(q);
    if (rjq__encode_job_options(&o, opts) != RJQ_OK) {
        rjq__errmsg(c, "invalid job options (delay, priority, attempts, backoff or timeout)");
        return RJQ_EINVAL;
    }
    char why[160]; /* (headers.h: their text follows the options') */
    if (rjq__headers_options_check(&o, opts, why, sizeof why) != RJQ_OK) {
        rjq__errmsg(c, "%s", why);
        return RJQ_EINVAL;
    }
    return RJQ_OK;
}

int rjq__enqueue_check_grouped(rjq_queue *q, const rjq_enqueue_item *it, char *opts) {
    const rjq_job_options *o = it->opts;
    if (o == NULL || o->group == NULL) return rjq__enqueue_check(q, it, opts);
    if (!rjq__valid_group_name(o->group) || o->debounce || o->after || o->n_after) {
        rjq__errmsg(rjq_queue_get_client(q), "enqueue: a group is 1..%d bytes of "
                    "[A-Za-z0-9_.:@-], without debounce or dependencies", RJQ_GROUP_NAME_MAX);
        return RJQ_EINVAL;
    }
    rjq_job_options rest = *o; /* (the options the scripts know: the group goes apart) */
    rest.group = NULL;
    rjq_enqueue_item chk = *it;
    chk.opts = &rest;
    return rjq__enqueue_check(q, &chk, opts);
}
