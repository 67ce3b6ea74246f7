/*
 * Awaits (await.c). Only shard.c calls into the await module (the public
 * calls on one queue); the rest of this header is for white-box tests.
 */
#ifndef RJQ_AWAIT_H
#define RJQ_AWAIT_H

#include <stddef.h>

#include "argv.h"
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

/* rjq_enqueue_await and rjq_queue_await on one queue (shard.c's public
 * calls pick it: a shard of a sharded queue, or q itself). */
int rjq__enqueue_await_one(rjq_queue *q, const void *payload, size_t len,
                           const rjq_job_options *opts, const rjq_await_options *aw,
                           rjq_await_cb *cb, void *data, rjq_await **out);
int rjq__queue_await_one(rjq_queue *q, const char *id, const rjq_await_options *aw,
                         rjq_await_cb *cb, void *data, rjq_await **out);

/* An await of a job on q whose queue is not known yet (rjq_queue_open's
 * gate, shard.c): made now (its timeout running, counted, cancellable with
 * rjq_await_cancel, ended with the client), started later on the queue
 * its job routes to. The caller holds it until it calls one of the two
 * below, exactly once. RJQ_OK, RJQ_EINVAL, RJQ_ECLOSED, RJQ_ENOMEM. */
int rjq__await_reserve(rjq_queue *q, const rjq_await_options *aw, rjq_await_cb *cb,
                       void *data, rjq_await **out);
/* Start reserved a on q: the job (payload, len, opts) enqueued and
 * awaited, or (id non-NULL) job id awaited. RJQ_OK: started, or its
 * callback got the error; 1: it had already ended (cancelled or timed
 * out: an enqueue's job is the caller's to send). */
int rjq__await_start_reserved(rjq_await *a, rjq_queue *q, const void *payload, size_t len,
                              const rjq_job_options *opts, const char *id);
/* End reserved a, never started: its callback gets status (RJQ_OK: none,
 * the call that made it is refused). */
void rjq__await_unreserve(rjq_await *a, int status);

/* Awaits of something other than a job (batch.c: a batch's end), on the
 * same reply channel, table, resubscription, timeout and destruction
 * rules as a job's await by id. The feature gives:
 * - key: the table key of thing id (idlen bytes) of q, malloc'd, with
 *   *idoff the offset of id's copy inside it (NULL: out of memory); the
 *   script that ends the thing publishes a 'completed' outcome under that
 *   key (lib.lua notify) to the channels it was watched for, its body the
 *   text handed to the callback as the outcome's result;
 * - script, args: the script call that watches ids of q for a reply
 *   channel: script's keys, then args(v, q, channel) appends what goes
 *   before the ids; it answers as watch.lua does, per id { code, body,
 *   '' }: 0 no such thing, 1 ended (body: the text), 3 watched.
 * The callback gets rjq_await_cb's status (RJQ_OK with the text as the
 * result, RJQ_ENOTFOUND, RJQ_ETIMEDOUT, RJQ_ECANCELED, a watch's error).
 * Counted by rjq_client_count_awaits. Returns RJQ_OK (cb will be called
 * once), or RJQ_ECLOSED, RJQ_ENOMEM (cb not called). */
typedef struct rjq__await_kind {
    char *(*key)(rjq_queue *q, const char *id, size_t idlen, size_t *idoff);
    int script;
    void (*args)(rjq__argv *v, rjq_queue *q, const char *channel);
} rjq__await_kind;
int rjq__await_other(rjq_queue *q, const rjq__await_kind *kind, const char *id, long timeout_ms,
                     rjq_await_cb *cb, void *data);

#endif
