/*
 * hiredis 0.14.1 (Debian 12) and 1.x from one code base. What differs
 * and how rjq steers around it (this list is the reference; the issue
 * numbers are hiredis'):
 *
 * - redisFormatCommandArgv returns int on 0.14 and long long on 1.x:
 *   always store it in rjq__fmtlen.
 * - 0.14.1 has no async timeouts: connect timeouts and every other
 *   deadline are rjq's own timer (one per client), on both versions.
 * - 0.14.1 crashes when a context is freed inside its connect callback
 *   (#946): rjq never calls user code from the connect callback, and
 *   frees contexts only outside their connect/disconnect callbacks.
 * - 0.14.1 aborts on UNSUBSCRIBE races (#1039, #968): rjq never
 *   unsubscribes (see pubsub.c).
 * - 1.x arms nothing when the connect callback is set before attaching:
 *   rjq attaches first (conn.c).
 * - RESP2 only: no HELLO 3 (0.14.1 drops the connection on it).
 * - Only HIREDIS_MAJOR/MINOR are meaningful (1.4.1 still says PATCH 0).
 * - Reply object functions (replyarena.c, set on each connection's
 *   reader): createArray takes an int on 0.14 and a size_t on 1.x, which
 *   also has createDouble and createBool (RESP3: never met); strings rjq
 *   takes over from a reply are hiredis' allocations: rjq__hi_malloc and
 *   rjq__hi_free below (1.x's allocators can be replaced).
 * - A connected plain socket is read by rjq into its reader's buffer
 *   (ioglue.c, readin.c), then redisProcessCallbacks runs its replies, as
 *   redisAsyncHandleRead does after its own read: that function is
 *   exported by 0.14.1 and 1.x alike (declared in 1.x's async_private.h,
 *   in no installed header), so it is declared below. A TLS session
 *   (1.x: the context's privctx, set by redisInitiateSSL) is left to
 *   hiredis' read: rjq__hi_tls. The reader's buffer, cursor and task
 *   stack are read.h's public fields; the task stack's layout differs:
 *   rjq__reader_task_type.
 */
#ifndef RJQ_COMPAT_H
#define RJQ_COMPAT_H

#include <hiredis/hiredis.h>

#define RJQ_HIREDIS_AT_LEAST(major, minor) \
    (HIREDIS_MAJOR > (major) || (HIREDIS_MAJOR == (major) && HIREDIS_MINOR >= (minor)))

#if !RJQ_HIREDIS_AT_LEAST(0, 14)
#error "rjq needs hiredis >= 0.14.1"
#endif

/* redisFormatCommandArgv's return type differs (int / long long). */
typedef long long rjq__fmtlen;

/* Free what hiredis allocated (a reply's string rjq took over, its
 * pointer in the reply set to NULL so freeReplyObject skips it): hi_free
 * on 1.x, whose allocators an application may replace
 * (hiredisSetAllocators); free on 0.14. */
#if RJQ_HIREDIS_AT_LEAST(1, 0)
#include <hiredis/alloc.h>
#define rjq__hi_free(p) hi_free(p)
#define rjq__hi_malloc(n) hi_malloc(n)
#else
#include <stdlib.h>
#define rjq__hi_free(p) free(p)
#define rjq__hi_malloc(n) malloc(n)
#endif

/* hiredis' own, exported in every version rjq supports (see above). */
struct redisAsyncContext;
void redisProcessCallbacks(struct redisAsyncContext *ac);

/* The type of the item hiredis' reader is in the middle of (-1: none, or
 * its type byte not read yet): 0.14 keeps its tasks in rstack, 1.x in
 * task (readin.c). */
#if RJQ_HIREDIS_AT_LEAST(1, 0)
#define rjq__reader_task_type(r) ((r)->ridx >= 0 ? (r)->task[(r)->ridx]->type : -1)
#else
#define rjq__reader_task_type(r) ((r)->ridx >= 0 ? (r)->rstack[(r)->ridx].type : -1)
#endif

/* The context reads through a TLS session of hiredis_ssl (1.x only). */
#if RJQ_HIREDIS_AT_LEAST(1, 0)
#define rjq__hi_tls(c) ((c)->privctx != NULL)
#else
#define rjq__hi_tls(c) ((void)(c), 0)
#endif

#endif
