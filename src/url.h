/*
 * Redis URLs: redis://[user[:password]@]host[:port][/db] and
 * unix:///path[?db=N]. Pure parsing, no I/O.
 */
#ifndef RJQ_URL_H
#define RJQ_URL_H

#include <stddef.h>

typedef struct rjq__url {
    char *host;      /* numeric address (IPv4 or IPv6); NULL for unix */
    int port;
    char *path;      /* unix socket path; NULL for TCP */
    char *user;      /* NULL when absent */
    char *password;  /* NULL when absent */
    int db;
} rjq__url;

/* Parse url into *out (all strings malloc'd, percent-decoded). On error
 * returns RJQ_EURL (or RJQ_ENOMEM, "out of memory") and writes a reason to
 * err (errlen bytes); *out is then left empty and nothing is leaked. NULL
 * url means redis://127.0.0.1:6379. */
int rjq__url_parse(const char *url, rjq__url *out, char *err, size_t errlen);
void rjq__url_free(rjq__url *u);

#endif
