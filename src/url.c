/* Redis URL parsing (url.h): pure, unit-tested. */
#include "url.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rjq.h"

static int hexval(int ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    ch = tolower(ch);
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    return -1;
}

/* Copy s[0..n) percent-decoded into a new string; NULL on a bad escape
 * or out of memory (*oom tells which). */
static char *decode(const char *s, size_t n, int *oom) {
    char *out = malloc(n + 1), *o = out;
    if (out == NULL) {
        *oom = 1;
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            *o++ = s[i];
            continue;
        }
        if (i + 2 >= n || hexval(s[i + 1]) < 0 || hexval(s[i + 2]) < 0) {
            free(out);
            return NULL;
        }
        *o = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
        if (*o++ == '\0') { /* %00 would silently cut the string short */
            free(out);
            return NULL;
        }
        i += 2;
    }
    *o = '\0';
    return out;
}

static int fail(rjq__url *u, char *err, size_t errlen, const char *why) {
    rjq__url_free(u);
    snprintf(err, errlen, "%s", why);
    return RJQ_EURL;
}

static int parse_int(const char *s, size_t n, long lo, long hi, int *out) {
    if (n == 0 || n > 9) return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i])) return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

static int parse_unix(const char *rest, rjq__url *u, char *err, size_t errlen) {
    const char *q = strchr(rest, '?');
    size_t n = q ? (size_t)(q - rest) : strlen(rest);
    int oom = 0;
    if (n == 0 || rest[0] != '/') return fail(u, err, errlen, "unix URL needs an absolute path");
    u->path = decode(rest, n, &oom);
    if (u->path == NULL) return oom ? RJQ_ENOMEM : fail(u, err, errlen, "bad %-escape in path");
    if (q) {
        if (strncmp(q + 1, "db=", 3) != 0 || parse_int(q + 4, strlen(q + 4), 0, 1 << 20, &u->db))
            return fail(u, err, errlen, "unix URL accepts only ?db=N");
    }
    return RJQ_OK;
}

static int parse_userinfo(const char *s, size_t n, rjq__url *u, char *err, size_t errlen) {
    const char *colon = memchr(s, ':', n);
    int oom = 0;
    size_t ulen = colon ? (size_t)(colon - s) : n;
    if (ulen > 0) {
        u->user = decode(s, ulen, &oom);
        if (u->user == NULL) return oom ? RJQ_ENOMEM : fail(u, err, errlen, "bad %-escape in user");
    }
    if (colon) {
        u->password = decode(colon + 1, n - ulen - 1, &oom);
        if (u->password == NULL) return oom ? RJQ_ENOMEM : fail(u, err, errlen, "bad %-escape in password");
    }
    if (u->user && u->password == NULL) {
        /* redis://secret@host: a lone word is the password (legacy AUTH) */
        u->password = u->user;
        u->user = NULL;
    }
    return RJQ_OK;
}

/* A DNS name: labels of letters, digits, '-' and '_' (seen in the wild),
 * 1..63 bytes each, not starting or ending with '-'; a name of only
 * digits and dots is a mistyped IPv4 address, not a name. */
static int valid_name(const char *s) {
    size_t n = strlen(s), label = 0;
    int letter = 0;
    if (n > 0 && s[n - 1] == '.') n--; /* "redis.example." is fully qualified */
    if (n == 0) return 0;
    for (size_t i = 0; i <= n; i++) {
        char ch = i < n ? s[i] : '.';
        if (ch == '.') {
            if (label == 0 || s[i - 1] == '-') return 0;
            label = 0;
            continue;
        }
        if (!isalnum((unsigned char)ch) && ch != '-' && ch != '_') return 0;
        if (label == 0 && ch == '-') return 0;
        if (++label > 63) return 0;
        if (!isdigit((unsigned char)ch)) letter = 1;
    }
    return letter;
}

static int parse_host(const char *s, size_t n, rjq__url *u, char *err, size_t errlen) {
    const char *host = s, *port = NULL;
    size_t hlen = n, plen = 0;
    char buf[RJQ__HOST_MAX];
    unsigned char addr[16];
    int v6 = n > 0 && s[0] == '[';
    if (v6) {
        const char *end = memchr(s, ']', n);
        if (end == NULL) return fail(u, err, errlen, "unterminated [IPv6] host");
        host = s + 1;
        hlen = (size_t)(end - host);
        const char *after = end + 1;
        if (after < s + n) {
            if (*after != ':') return fail(u, err, errlen, "junk after [IPv6] host");
            port = after + 1;
        }
    } else {
        const char *colon = memchr(s, ':', n);
        if (colon) {
            hlen = (size_t)(colon - s);
            port = colon + 1;
        }
    }
    if (port) plen = n - (size_t)(port - s);
    if (port && parse_int(port, plen, 1, 65535, &u->port))
        return fail(u, err, errlen, "port must be 1..65535");
    if (hlen >= RJQ__HOST_MAX) return fail(u, err, errlen, "host too long");
    if (hlen == 0) {
        host = "127.0.0.1";
        hlen = 9;
    }
    memcpy(buf, host, hlen);
    buf[hlen] = '\0';
    u->numeric = inet_pton(v6 ? AF_INET6 : AF_INET, buf, addr) == 1;
    if (!u->numeric && (v6 || !valid_name(buf)))
        return fail(u, err, errlen,
                    v6 ? "[IPv6] host must be a numeric IPv6 address"
                       : "host must be a host name (letters, digits, '-', '.', '_') or a "
                         "numeric IPv4/[IPv6] address");
    u->host = strdup(buf);
    return u->host ? RJQ_OK : RJQ_ENOMEM;
}

/* One "h[:p]" of a host list (n bytes) into *out, its port `port`
 * unless it gives one. */
static int parse_list_host(const char *s, size_t n, int port, rjq__url_host *out, rjq__url *u,
                           char *err, size_t errlen) {
    rjq__url one;
    memset(&one, 0, sizeof one);
    one.port = port;
    char why[160];
    int rc = parse_host(s, n, &one, why, sizeof why);
    if (rc != RJQ_OK) {
        free(one.host);
        return rc == RJQ_ENOMEM ? rc : fail(u, err, errlen, why);
    }
    out->host = one.host;
    out->numeric = one.numeric;
    out->port = one.port;
    return RJQ_OK;
}

/* The sentinels' list "h[:p],h[:p]..." (n bytes), then "/name[/db]". */
static int parse_sentinel(const char *s, rjq__url *u, char *err, size_t errlen) {
    const char *slash = strchr(s, '/');
    const char *at = NULL;
    for (const char *p = s; *p && p != slash; p++)
        if (*p == '@') at = p;
    int rc;
    if (at) {
        if ((rc = parse_userinfo(s, (size_t)(at - s), u, err, errlen)) != RJQ_OK) return rc;
        s = at + 1;
    }
    if (slash == NULL || slash[1] == '\0' || slash[1] == '/')
        return fail(u, err, errlen, "a Sentinel URL names its master: redis+sentinel://host:port/NAME");
    u->sentinels = calloc(RJQ__SENTINELS_MAX, sizeof *u->sentinels);
    if (u->sentinels == NULL) return RJQ_ENOMEM;
    while (s < slash) {
        const char *comma = memchr(s, ',', (size_t)(slash - s));
        const char *end = comma ? comma : slash;
        if (u->nsentinels == RJQ__SENTINELS_MAX) return fail(u, err, errlen, "at most 16 sentinels");
        if (end == s) return fail(u, err, errlen, "an empty sentinel address");
        rc = parse_list_host(s, (size_t)(end - s), 26379, &u->sentinels[u->nsentinels], u, err,
                             errlen);
        if (rc != RJQ_OK) return rc;
        u->nsentinels++;
        s = comma ? comma + 1 : slash;
    }
    const char *name = slash + 1, *db = strchr(name, '/');
    size_t nlen = db ? (size_t)(db - name) : strlen(name);
    int oom = 0;
    u->master = decode(name, nlen, &oom);
    if (u->master == NULL) return oom ? RJQ_ENOMEM : fail(u, err, errlen, "bad %-escape in the master's name");
    if (db && parse_int(db + 1, strlen(db + 1), 0, 1 << 20, &u->db))
        return fail(u, err, errlen, "database must be a number");
    return RJQ_OK;
}

/* A seed list "h[:p],h[:p]..." (n bytes): the seeds, and the first as
 * the URL's host and port. */
static int parse_seeds(const char *s, size_t n, rjq__url *u, char *err, size_t errlen) {
    const char *end = s + n;
    u->seeds = calloc(RJQ__SENTINELS_MAX, sizeof *u->seeds);
    if (u->seeds == NULL) return RJQ_ENOMEM;
    while (s <= end) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *e = comma ? comma : end;
        if (u->nseeds == RJQ__SENTINELS_MAX) return fail(u, err, errlen, "at most 16 seed nodes");
        if (e == s) return fail(u, err, errlen, "an empty seed node address");
        int rc = parse_list_host(s, (size_t)(e - s), 6379, &u->seeds[u->nseeds], u, err, errlen);
        if (rc != RJQ_OK) return rc;
        u->nseeds++;
        if (comma == NULL) break;
        s = comma + 1;
    }
    u->host = strdup(u->seeds[0].host);
    u->port = u->seeds[0].port;
    u->numeric = u->seeds[0].numeric;
    return u->host ? RJQ_OK : RJQ_ENOMEM;
}

static int parse(const char *url, rjq__url *u, char *err, size_t errlen) {
    u->port = 6379;
    if (url && strncmp(url, "redis+sentinel://", 17) == 0) return parse_sentinel(url + 17, u, err, errlen);
    if (url == NULL) url = "redis://127.0.0.1:6379";
    if (strncmp(url, "unix://", 7) == 0) return parse_unix(url + 7, u, err, errlen);
    if (strncmp(url, "rediss://", 9) == 0) {
        u->tls = 1;
    } else if (strncmp(url, "redis://", 8) != 0) {
        return fail(u, err, errlen,
                    "URL must start with redis://, rediss://, redis+sentinel:// or unix://");
    }
    const char *s = url + (u->tls ? 9 : 8);
    const char *slash = strchr(s, '/');
    size_t auth_end_limit = slash ? (size_t)(slash - s) : strlen(s);
    const char *at = NULL;
    for (size_t i = 0; i < auth_end_limit; i++)
        if (s[i] == '@') at = s + i; /* the last '@' ends the userinfo */
    int rc;
    if (at) {
        if ((rc = parse_userinfo(s, (size_t)(at - s), u, err, errlen)) != RJQ_OK) return rc;
        s = at + 1;
    }
    size_t hostlen = slash ? (size_t)(slash - s) : strlen(s);
    const char *comma = memchr(s, ',', hostlen);
    if (comma && (rc = parse_seeds(s, hostlen, u, err, errlen)) != RJQ_OK) return rc;
    if (comma == NULL && (rc = parse_host(s, hostlen, u, err, errlen)) != RJQ_OK) return rc;
    if (slash && slash[1] != '\0' && parse_int(slash + 1, strlen(slash + 1), 0, 1 << 20, &u->db))
        return fail(u, err, errlen, "database must be a number");
    return RJQ_OK;
}

void rjq__url_free(rjq__url *u) {
    for (size_t i = 0; i < u->nsentinels; i++) free(u->sentinels[i].host);
    free(u->sentinels);
    for (size_t i = 0; i < u->nseeds; i++) free(u->seeds[i].host);
    free(u->seeds);
    free(u->master);
    free(u->host);
    free(u->path);
    free(u->user);
    if (u->password) memset(u->password, 0, strlen(u->password));
    free(u->password);
    memset(u, 0, sizeof *u);
}

int rjq__url_parse(const char *url, rjq__url *u, char *err, size_t errlen) {
    memset(u, 0, sizeof *u);
    int rc = parse(url, u, err, errlen);
    if (rc == RJQ_ENOMEM) snprintf(err, errlen, "out of memory");
    if (rc != RJQ_OK) rjq__url_free(u); /* *out is left empty on every error */
    return rc;
}
