/*
 * Redis URLs: redis[s]://[user[:password]@]host[:port][/db],
 * redis+sentinel://[user[:password]@]host[:port][,host[:port]...]/name[/db]
 * and unix://[user[:password]@]/path, each with an optional query
 * ?db=N&username=U&password=P&timeout=T&protocol=2 (rjq.h, url). redis[s]:// may list several seed nodes of a
 * Redis Cluster: redis://h1:p1,h2:p2 (each port 6379 unless given). Pure parsing, no I/O: a host name is checked for
 * its form only (the loop glue resolves it, client.c decides whether one
 * may be given).
 */
#ifndef RJQ_URL_H
#define RJQ_URL_H

#include <stddef.h>

#define RJQ__HOST_MAX 256 /* a host name's bytes, with its NUL */
#define RJQ__DB_MAX (1 << 20) /* the highest database number taken */

typedef struct rjq__url_host {
    char *host;
    int port;
    int numeric; /* host is an address */
} rjq__url_host;

#define RJQ__SENTINELS_MAX 16

typedef struct rjq__url {
    char *host;      /* as written, without [] (an empty host is 127.0.0.1);
                        NULL for unix */
    int numeric;     /* host is a numeric IPv4/IPv6 address */
    int tls;         /* rediss:// */
    /* redis+sentinel://[user[:password]@]host[:port][,host[:port]...]/name[/db]:
     * the sentinels (port 26379 by default) and the master's name; user
     * and password are the master's */
    rjq__url_host *sentinels;
    size_t nsentinels;
    char *master;    /* NULL unless Sentinel */
    /* redis[s]://h1[:p1],h2[:p2]...: the seed nodes in order (NULL, 0 for a
     * single host); host, port and numeric are the first one's */
    rjq__url_host *seeds;
    size_t nseeds;
    int port;
    char *path;      /* unix socket path; NULL for TCP */
    char *user;      /* NULL when absent */
    char *password;  /* NULL when absent */
    int db;
    int db_given;    /* the URL names the database (path or ?db=) */
    long timeout_ms; /* ?timeout=: the connect timeout; 0 when not given */
} rjq__url;

/* Parse url into *out (all strings malloc'd, percent-decoded). On error
 * returns RJQ_EURL (or RJQ_ENOMEM, "out of memory") and writes a reason to
 * err (errlen bytes); *out is then left empty and nothing is leaked. NULL
 * url means redis://127.0.0.1:6379. */
int rjq__url_parse(const char *url, rjq__url *out, char *err, size_t errlen);
void rjq__url_free(rjq__url *u);

/* 1 when host is a numeric IPv4 or IPv6 address (not a host name). */
int rjq__url_is_address(const char *host);

#endif
