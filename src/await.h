/*
 * Awaits (await.c). Only shard.c calls into the await module (the public
 * calls on one queue); the rest of this header is for white-box tests.
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

#endif
