/*
 * TLS for the client's connections: one OpenSSL context per client (made
 * from rjq_tls_options when the client is made: files are read then), one
 * SSL object per connection attempt, handed to hiredis_ssl, which owns it.
 * The server's certificate chain and its name (DNS name or IP address)
 * are checked by OpenSSL during the handshake unless verification is
 * turned off. A failed handshake is described in words that name the
 * cause (rjq__tls_why).
 *
 * Built without TLS (hiredis < 1.0, or hiredis without SSL), rjq__tls_new
 * fails with RJQ_ETLS and a message that says how to get TLS.
 */
#ifndef RJQ_TLS_H
#define RJQ_TLS_H

#include <stddef.h>

#include "rjq.h"

struct redisContext;
typedef struct rjq__tls rjq__tls;

/* 1 when this build has TLS. */
int rjq__tls_built(void);

/* Make the TLS context: host is the URL's host (the default server name),
 * numeric whether it is an address. RJQ_ETLS (reason in err) or
 * RJQ_ENOMEM. */
int rjq__tls_new(rjq__tls **out, const rjq_tls_options *o, const char *host, int numeric,
                 char *err, size_t errlen);
void rjq__tls_free(rjq__tls *t);

/* Start TLS on a new context (before anything is sent): an async
 * context's (&ac->c), or the sharded pub/sub link's non-blocking one (the
 * handshake goes on as it reads and writes). host: the endpoint this
 * connection was aimed at (a cluster node's, as the slot table or a
 * redirect names it), or NULL for the URL's: a host name is the server
 * name (SNI, and the name the certificate is checked for) unless the
 * options give server_name, which holds for every connection; an address
 * is checked as the URL's host (or server_name) is. On success *session
 * is the connection's TLS session (owned by hiredis, valid while the
 * context lives), for rjq__tls_why. RJQ_ETLS (reason in err) else. */
int rjq__tls_start(rjq__tls *t, struct redisContext *rc, const char *host, void **session,
                   char *err, size_t errlen);

/* 1 while the session's handshake has not finished. */
int rjq__tls_handshaking(void *session);

/* 1 once the session read anything from the server (a TCP connect that
 * failed never did: its failure is no TLS matter). */
int rjq__tls_heard(void *session);

/* Why a connection with this session failed, when TLS may be the cause:
 * the server's certificate was refused, or the session failed before it
 * was ready (its set-up unanswered: the handshake, or the server refusing
 * us right after it); io_error: hiredis' words, used when OpenSSL has
 * none. Writes a reason to buf and returns 1; else 0. */
int rjq__tls_why(const rjq__tls *t, void *session, int ready, const char *io_error, char *buf,
                 size_t len);

#endif
