/*
 * A long command written to its socket at once, not copied into hiredis'
 * output buffer first (issue 36, "Client": the producer's copies of a
 * payload). redisAsyncFormattedCommand appends a command to the context's
 * output buffer (sdscatlen) and hiredis writes that buffer when the loop
 * says the socket is writable: with payloads of KiB that append was one
 * of the producer's two copies of each payload left (bench/README.md).
 * When hiredis holds no unwritten output, rjq__writeout registers the
 * command's callback through redisAsyncFormattedCommand with nothing to
 * append, writes the command to the socket itself, and appends only what
 * the socket did not take. The context is hiredis' public
 * redisAsyncContext (its redisContext's fd, flags and obuf, its ev's
 * delWrite): the same in 0.14.1 and 1.x. A leaf: hiredis only.
 */
#ifndef RJQ_WRITEOUT_H
#define RJQ_WRITEOUT_H

#include <stddef.h>

#include <hiredis/async.h>

/* Commands shorter than this go through hiredis' buffer as before: their
 * copy is cheap, and commands made in one turn of the loop then share one
 * write. */
#define RJQ__WRITEOUT_MIN (4u << 10)

/* redisAsyncFormattedCommand(ac, fn, priv, cmd, len), the same returns
 * (REDIS_OK: fn will be called exactly once, with the reply or NULL;
 * REDIS_ERR: nothing sent, fn never called), with cmd written to the
 * socket at once when it is RJQ__WRITEOUT_MIN bytes or more and the
 * context is a connected plain socket (no TLS, not subscribed nor
 * monitoring, not closing, no error) with no unwritten output: what the
 * socket takes now (all of it, usually) is not copied; the rest is
 * appended to hiredis' buffer, which hiredis writes after it as it would
 * have. A write error leaves the whole command in hiredis' buffer (its own
 * write meets the error and ends the connection as usual). Out of memory
 * for the rest: the socket is shut, so the connection ends and fn is
 * called with NULL (the part written is never a whole command). cmd is
 * not kept. */
int rjq__writeout(redisAsyncContext *ac, redisCallbackFn *fn, void *priv, const char *cmd, size_t len);

#endif
