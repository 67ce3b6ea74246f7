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

/* The userinfo s[0..n): "user:password", ":password", or a lone word
 * (*lone set): the password (legacy AUTH), unless the query gives
 * ?password= (then parse_query makes it the user, as redis-py does). */
static int parse_userinfo(const char *s, size_t n, rjq__url *u, int *lone, char *err, size_t errlen) {
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
        *lone = 1;
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

/* The sentinels' list "h[:p],h[:p]..." (n bytes), and the path
 * "/name[/db]" (plen bytes). */
static int parse_sentinel(const char *s, size_t n, const char *path, size_t plen, rjq__url *u,
                          char *err, size_t errlen) {
    const char *end = s + n;
    if (plen < 2 || path[1] == '/')
        return fail(u, err, errlen, "a Sentinel URL names its master: redis+sentinel://host:port/NAME");
    u->sentinels = calloc(RJQ__SENTINELS_MAX, sizeof *u->sentinels);
    if (u->sentinels == NULL) return RJQ_ENOMEM;
    for (;;) { /* an empty one (none at all, a trailing ',') is refused */
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *e = comma ? comma : end;
        if (u->nsentinels == RJQ__SENTINELS_MAX) return fail(u, err, errlen, "at most 16 sentinels");
        if (e == s) return fail(u, err, errlen, "an empty sentinel address");
        int rc = parse_list_host(s, (size_t)(e - s), 26379, &u->sentinels[u->nsentinels], u, err,
                                 errlen);
        if (rc != RJQ_OK) return rc;
        u->nsentinels++;
        if (comma == NULL) break;
        s = comma + 1;
    }
    const char *name = path + 1, *db = memchr(name, '/', plen - 1);
    size_t nlen = db ? (size_t)(db - name) : plen - 1;
    int oom = 0;
    u->master = decode(name, nlen, &oom);
    if (u->master == NULL) return oom ? RJQ_ENOMEM : fail(u, err, errlen, "bad %-escape in the master's name");
    if (db && parse_int(db + 1, plen - (size_t)(db + 1 - path), 0, RJQ__DB_MAX, &u->db))
        return fail(u, err, errlen, "database must be a number");
    u->db_given = db != NULL;
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

/* A connect timeout as ?timeout= takes it: seconds ("2", "0.5": to the
 * millisecond) or with a unit ("1500ms", "2s"), 1 ms .. 1 day. */
static int parse_timeout(const char *s, size_t n, long *ms) {
    long long scale = 1000;
    if (n > 2 && strncmp(s + n - 2, "ms", 2) == 0) n -= 2, scale = 1;
    else if (n > 1 && s[n - 1] == 's') n--;
    long long whole = 0, frac = 0, fscale = 1000;
    size_t i = 0, digits = 0;
    for (; i < n && isdigit((unsigned char)s[i]); i++, digits++) {
        if (digits >= 9) return -1;
        whole = whole * 10 + (s[i] - '0');
    }
    if (digits == 0) return -1;
    if (i < n && s[i] == '.' && scale == 1000) {
        size_t fd = 0;
        for (i++; i < n && isdigit((unsigned char)s[i]); i++, fd++) {
            if (fd >= 3) return -1; /* finer than a millisecond */
            frac = frac * 10 + (s[i] - '0');
            fscale /= 10;
        }
        if (fd == 0) return -1;
        frac *= fscale;
    }
    if (i != n) return -1;
    long long v = whole * scale + frac;
    if (v < 1 || v > 86400000LL) return -1;
    *ms = (long)v;
    return 0;
}

/* One key of the query, as rjq knows it (aliases: the forms redis-py and
 * go-redis write the connect timeout in). */
enum { Q_DB, Q_PASSWORD, Q_USERNAME, Q_TIMEOUT, Q_PROTOCOL, Q_N };
static int query_key(const char *k, size_t n) {
    static const struct {
        const char *name;
        int key;
    } keys[] = {{"db", Q_DB},
                {"password", Q_PASSWORD},
                {"username", Q_USERNAME},
                {"timeout", Q_TIMEOUT},
                {"connect_timeout", Q_TIMEOUT},
                {"dial_timeout", Q_TIMEOUT},
                {"socket_connect_timeout", Q_TIMEOUT},
                {"protocol", Q_PROTOCOL}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strlen(keys[i].name) == n && memcmp(keys[i].name, k, n) == 0) return keys[i].key;
    return -1;
}

/* The query q (n bytes, after the '?'): "key=value" pairs joined by '&',
 * values percent-decoded. lone: the userinfo was a lone word. */
static int parse_query(const char *q, size_t n, int lone, rjq__url *u, char *err, size_t errlen) {
    const char *end = q + n;
    int seen[Q_N] = {0};
    char why[200];
    while (q < end) {
        const char *amp = memchr(q, '&', (size_t)(end - q));
        const char *e = amp ? amp : end;
        const char *eq = memchr(q, '=', (size_t)(e - q));
        size_t klen = eq ? (size_t)(eq - q) : (size_t)(e - q);
        /* a key is shown when it looks like one (not a piece of a
         * password with a '?' in it) */
        int shown = klen > 0 && klen <= 40 && strspn(q, "abcdefghijklmnopqrstuvwxyz_0123456789") >= klen;
        int klen_shown = shown ? (int)klen : 0;
        if (e == q) { /* "a=1&&b=2", a trailing '&' */
            q = e + 1;
            continue;
        }
        int key = query_key(q, klen);
        if (key < 0) {
            snprintf(why, sizeof why,
                     "unknown query option%s%.*s%s (rjq takes db, username, password, timeout "
                     "and protocol; a '?' in a password is written %%3F)",
                     shown ? " '" : "", klen_shown, q, shown ? "'" : "");
            return fail(u, err, errlen, why);
        }
        if (eq == NULL || eq + 1 == e) {
            snprintf(why, sizeof why, "query option %.*s needs a value (%.*s=...)", klen_shown, q,
                     klen_shown, q);
            return fail(u, err, errlen, why);
        }
        if (seen[key]++) {
            snprintf(why, sizeof why, "query option %.*s given twice", klen_shown, q);
            return fail(u, err, errlen, why);
        }
        const char *v = eq + 1;
        size_t vlen = (size_t)(e - v);
        int oom = 0;
        char *text = NULL;
        switch (key) {
        case Q_DB:
            if (u->db_given)
                return fail(u, err, errlen, "the database is given twice (in the path and ?db=)");
            if (parse_int(v, vlen, 0, RJQ__DB_MAX, &u->db))
                return fail(u, err, errlen, "?db= must be a database number (0..1048576)");
            u->db_given = 1;
            break;
        case Q_PASSWORD:
        case Q_USERNAME:
            text = decode(v, vlen, &oom);
            if (text == NULL)
                return oom ? RJQ_ENOMEM
                           : fail(u, err, errlen,
                                  key == Q_PASSWORD ? "bad %-escape in ?password=" : "bad %-escape in ?username=");
            if (key == Q_PASSWORD && lone && u->user == NULL) {
                /* redis://alice@host?password=x: the lone word is the user */
                u->user = u->password;
                u->password = NULL;
                lone = 0;
            }
            char **slot = key == Q_PASSWORD ? &u->password : &u->user;
            if (*slot) {
                free(text);
                return fail(u, err, errlen,
                            key == Q_PASSWORD
                                ? "the password is given twice (before '@' and ?password=)"
                                : "the user is given twice (before '@' and ?username=)");
            }
            *slot = text;
            break;
        case Q_TIMEOUT:
            if (parse_timeout(v, vlen, &u->timeout_ms))
                return fail(u, err, errlen,
                            "?timeout= is the connect timeout in seconds (\"2\", \"0.5\") or with "
                            "a unit (\"1500ms\", \"2s\"): 1 ms to 1 day");
            break;
        case Q_PROTOCOL:
            if (vlen == 1 && v[0] == '3')
                return fail(u, err, errlen,
                            "?protocol=3: rjq speaks RESP2 only (protocol=2, or leave it out)");
            if (vlen != 1 || v[0] != '2')
                return fail(u, err, errlen, "?protocol= must be 2 (rjq speaks RESP2)");
            break;
        }
        q = amp ? amp + 1 : end;
    }
    return RJQ_OK;
}

/* A unix:// URL's path (n bytes): absolute, percent-decoded. */
static int parse_unix(size_t hlen, const char *path, size_t n, rjq__url *u,
                      char *err, size_t errlen) {
    int oom = 0;
    if (hlen != 0 || n == 0)
        return fail(u, err, errlen,
                    "unix URL needs an absolute path: unix:///path or unix://user:password@/path");
    u->path = decode(path, n, &oom);
    if (u->path == NULL) return oom ? RJQ_ENOMEM : fail(u, err, errlen, "bad %-escape in path");
    return RJQ_OK;
}

enum { K_TCP, K_UNIX, K_SENTINEL };

/* scheme://[userinfo@]hosts[/path][?query]: the userinfo ends at the last
 * '@' before the path or the query, the hosts at the first '/' or '?'
 * after it, the path at the first '?'. */
static int parse(const char *url, rjq__url *u, char *err, size_t errlen) {
    u->port = 6379;
    if (url == NULL) url = "redis://127.0.0.1:6379";
    int kind = K_TCP;
    const char *s;
    if (strncmp(url, "redis+sentinel://", 17) == 0) kind = K_SENTINEL, s = url + 17;
    else if (strncmp(url, "unix://", 7) == 0) kind = K_UNIX, s = url + 7;
    else if (strncmp(url, "rediss://", 9) == 0) u->tls = 1, s = url + 9;
    else if (strncmp(url, "redis://", 8) == 0) s = url + 8;
    else
        return fail(u, err, errlen,
                    "URL must start with redis://, rediss://, redis+sentinel:// or unix://");
    size_t alen = strcspn(s, "/?"); /* the authority: [userinfo@]hosts */
    const char *path = s + alen;
    size_t plen = strcspn(path, "?");
    const char *query = path[plen] == '?' ? path + plen + 1 : NULL;
    const char *at = NULL;
    for (size_t i = 0; i < alen; i++)
        if (s[i] == '@') at = s + i; /* the last '@' ends the userinfo */
    int rc, lone = 0;
    if (at) {
        if ((rc = parse_userinfo(s, (size_t)(at - s), u, &lone, err, errlen)) != RJQ_OK) return rc;
        alen -= (size_t)(at + 1 - s);
        s = at + 1;
    }
    if (kind == K_UNIX) {
        rc = parse_unix(alen, path, plen, u, err, errlen);
    } else if (kind == K_SENTINEL) {
        rc = parse_sentinel(s, alen, path, plen, u, err, errlen);
    } else {
        const char *comma = memchr(s, ',', alen);
        rc = comma ? parse_seeds(s, alen, u, err, errlen) : parse_host(s, alen, u, err, errlen);
        if (rc == RJQ_OK && plen > 1) {
            if (parse_int(path + 1, plen - 1, 0, RJQ__DB_MAX, &u->db))
                return fail(u, err, errlen, "database must be a number");
            u->db_given = 1;
        }
    }
    if (rc == RJQ_OK && query) rc = parse_query(query, strlen(query), lone, u, err, errlen);
    if (rc == RJQ_EURL && at == NULL && strchr(s + alen, '@')) { /* "redis://:pa?ss@host" */
        size_t len = strlen(err);
        snprintf(err + len, errlen - len,
                 " (the user and password end at the first '/' or '?': write those in them "
                 "as %%2F, %%3F)");
    }
    return rc;
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

int rjq__url_is_address(const char *host) {
    unsigned char addr[16];
    return inet_pton(strchr(host, ':') ? AF_INET6 : AF_INET, host, addr) == 1;
}
