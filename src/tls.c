/* TLS contexts and sessions (tls.h). */
#include "tls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef RJQ_HAVE_TLS

#include <arpa/inet.h>
#include <errno.h>
#include <sys/stat.h>
#include <hiredis/async.h>
#include <hiredis/hiredis_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

struct rjq__tls {
    SSL_CTX *ctx;
    char *name;   /* the server name: sent for SNI (when not an address), checked */
    int numeric;  /* name is an IP address: checked against IP SANs, no SNI */
    int verify;
    int has_cert; /* a client certificate is shown */
    int named;    /* name is the options' server_name: it holds for every node */
};

int rjq__tls_built(void) {
    return 1;
}

/* OpenSSL's words for the newest error on this thread's queue (then
 * emptied), or `otherwise`. */
static const char *ssl_reason(const char *otherwise) {
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    ERR_clear_error();
    return r ? r : otherwise;
}

static int refuse(rjq__tls *t, char *err, size_t errlen, const char *what, const char *file) {
    snprintf(err, errlen, "TLS: %s %s: %s", what, file, ssl_reason("unreadable"));
    rjq__tls_free(t);
    return RJQ_ETLS;
}

static int no_passphrase(char *buf, int size, int rwflag, void *data) {
    (void)buf, (void)size, (void)rwflag, (void)data;
    return 0;
}

int rjq__tls_new(rjq__tls **out, const rjq_tls_options *o, const char *host, int numeric,
                 char *err, size_t errlen) {
    static const rjq_tls_options none;
    if (o == NULL) o = &none;
    *out = NULL;
    if ((o->cert_file == NULL) != (o->key_file == NULL)) {
        snprintf(err, errlen, "TLS: a client certificate needs its key, and a key its certificate "
                              "(give both cert_file and key_file, or neither)");
        return RJQ_ETLS;
    }
    rjq__tls *t = calloc(1, sizeof *t);
    if (t == NULL) return RJQ_ENOMEM;
    const char *name = o->server_name ? o->server_name : host;
    unsigned char addr[16];
    t->numeric = o->server_name ? inet_pton(AF_INET, name, addr) == 1 ||
                                      inet_pton(AF_INET6, name, addr) == 1
                                : numeric;
    t->verify = !o->insecure;
    t->named = o->server_name != NULL;
    t->name = strdup(name);
    ERR_clear_error();
    t->ctx = SSL_CTX_new(TLS_client_method());
    if (t->name == NULL || t->ctx == NULL) {
        rjq__tls_free(t);
        return RJQ_ENOMEM;
    }
    SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(t->ctx, t->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    /* OpenSSL looks into a CA directory only when verifying, and calls a
     * missing file "system lib": both are checked here first */
    const struct {
        const char *path, *what;
        int dir;
    } ca[2] = {{o->ca_dir, "directory", 1}, {o->ca_file, "file", 0}};
    for (int i = 0; i < 2; i++) {
        struct stat st;
        if (ca[i].path == NULL) continue;
        const char *why = stat(ca[i].path, &st) != 0         ? strerror(errno)
                          : ca[i].dir && !S_ISDIR(st.st_mode) ? "not a directory"
                                                              : NULL;
        if (why) {
            snprintf(err, errlen, "TLS: cannot use the CA %s %s: %s", ca[i].what, ca[i].path, why);
            rjq__tls_free(t);
            return RJQ_ETLS;
        }
    }
    if (o->ca_file || o->ca_dir) {
        if (SSL_CTX_load_verify_locations(t->ctx, o->ca_file, o->ca_dir) != 1)
            return refuse(t, err, errlen, "cannot load the CA certificates from",
                          o->ca_file ? o->ca_file : o->ca_dir);
    } else if (SSL_CTX_set_default_verify_paths(t->ctx) != 1) {
        return refuse(t, err, errlen, "cannot load the system's CA certificates", "");
    }
    /* an encrypted key would make OpenSSL ask on the terminal: refuse it */
    SSL_CTX_set_default_passwd_cb(t->ctx, no_passphrase);
    if (o->cert_file) {
        t->has_cert = 1;
        if (SSL_CTX_use_certificate_chain_file(t->ctx, o->cert_file) != 1)
            return refuse(t, err, errlen, "cannot load the client certificate", o->cert_file);
        if (SSL_CTX_use_PrivateKey_file(t->ctx, o->key_file, SSL_FILETYPE_PEM) != 1)
            return refuse(t, err, errlen, "cannot load the client key", o->key_file);
        if (SSL_CTX_check_private_key(t->ctx) != 1)
            return refuse(t, err, errlen, "the client key does not match its certificate",
                          o->key_file);
    }
    *out = t;
    return RJQ_OK;
}

void rjq__tls_free(rjq__tls *t) {
    if (t == NULL) return;
    if (t->ctx) SSL_CTX_free(t->ctx);
    free(t->name);
    free(t);
}

int rjq__tls_start(rjq__tls *t, redisContext *rc, const char *host, void **session, char *err,
                   size_t errlen) {
    /* the name checked: a node's host name, else the client's */
    const char *name = t->name;
    int numeric = t->numeric;
    unsigned char addr[16];
    if (host && !t->named && inet_pton(AF_INET, host, addr) != 1 &&
        inet_pton(AF_INET6, host, addr) != 1) {
        name = host;
        numeric = 0;
    }
    ERR_clear_error();
    SSL *ssl = SSL_new(t->ctx);
    if (ssl == NULL) {
        snprintf(err, errlen, "TLS: cannot make a session: %s", ssl_reason("out of memory"));
        return RJQ_ETLS;
    }
    int ok = 1;
    if (!numeric) ok = SSL_set_tlsext_host_name(ssl, name) == 1;
    if (ok && t->verify) {
        if (numeric) ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1;
        else ok = SSL_set1_host(ssl, name) == 1;
    }
    if (!ok) {
        snprintf(err, errlen, "TLS: cannot use the server name %s: %s", name,
                 ssl_reason("refused"));
        SSL_free(ssl);
        return RJQ_ETLS;
    }
    if (redisInitiateSSL(rc, ssl) != REDIS_OK) { /* the SSL object stays ours */
        /* on loopback the whole handshake may happen in there; or the TCP
         * connect failed at once (nothing heard: no TLS matter) */
        const char *io = rc->errstr[0] ? rc->errstr : "cannot start";
        if (!rjq__tls_heard(ssl)) {
            const char *colon = strncmp(io, "SSL_connect failed: ", 20) == 0 ? io + 20 : io;
            snprintf(err, errlen, "%s", colon);
        } else if (!rjq__tls_why(t, ssl, 0, io, err, errlen)) {
            snprintf(err, errlen, "TLS: %s", io);
        }
        SSL_free(ssl);
        return RJQ_ETLS;
    }
    *session = ssl;
    return RJQ_OK;
}

int rjq__tls_handshaking(void *session) {
    return session != NULL && !SSL_is_init_finished((SSL *)session);
}

int rjq__tls_heard(void *session) {
    BIO *rbio = session ? SSL_get_rbio((SSL *)session) : NULL;
    return rbio != NULL && BIO_number_read(rbio) > 0;
}

int rjq__tls_why(const rjq__tls *t, void *session, int ready, const char *io_error, char *buf,
                 size_t len) {
    SSL *ssl = session;
    if (ssl == NULL) return 0;
    long v = SSL_get_verify_result(ssl);
    if (t->verify && v != X509_V_OK) {
        const char *hint = "";
        if (v == X509_V_ERR_HOSTNAME_MISMATCH || v == X509_V_ERR_IP_ADDRESS_MISMATCH)
            hint = " (set the TLS server name to a name the certificate holds)";
        else if (v == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY ||
                 v == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN ||
                 v == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT)
            hint = " (is the CA file the one that signed the server's certificate?)";
        const char *sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
        snprintf(buf, len, "TLS: the server's certificate was refused: %s, checked for %s%s",
                 X509_verify_cert_error_string(v), sni ? sni : t->name, hint);
        ERR_clear_error();
        return 1;
    }
    if (ready) {
        ERR_clear_error(); /* what hiredis' SSL_read left there */
        return 0;
    }
    /* The server may refuse us after our side of the handshake is done
     * (TLS 1.3: a missing client certificate shows at the first read). */
    const char *hint = t->has_cert ? "" : " (does the server want a client certificate? cert_file/key_file)";
    snprintf(buf, len, "TLS handshake failed: %s%s", ssl_reason(io_error), hint);
    return 1;
}

#else /* built without TLS */

struct rjq__tls {
    int unused;
};

int rjq__tls_built(void) {
    return 0;
}

int rjq__tls_new(rjq__tls **out, const rjq_tls_options *o, const char *host, int numeric,
                 char *err, size_t errlen) {
    (void)o;
    (void)host;
    (void)numeric;
    *out = NULL;
    snprintf(err, errlen,
             "TLS: this rjq was built without TLS: build it against hiredis >= 1.0 made with "
             "SSL (hiredis_ssl) and OpenSSL's headers (Debian: libssl-dev); see the README, "
             "\"Connecting\"");
    return RJQ_ETLS;
}

void rjq__tls_free(rjq__tls *t) {
    (void)t;
}

int rjq__tls_start(rjq__tls *t, struct redisContext *rc, const char *host, void **session,
                   char *err, size_t errlen) {
    (void)t;
    (void)rc;
    (void)host;
    (void)session;
    snprintf(err, errlen, "TLS: not built");
    return RJQ_ETLS;
}

int rjq__tls_handshaking(void *session) {
    (void)session;
    return 0;
}

int rjq__tls_heard(void *session) {
    (void)session;
    return 0;
}

int rjq__tls_why(const rjq__tls *t, void *session, int ready, const char *io_error, char *buf,
                 size_t len) {
    (void)t;
    (void)session;
    (void)ready;
    (void)io_error;
    (void)buf;
    (void)len;
    return 0;
}

#endif
