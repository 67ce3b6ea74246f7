/* redis-cli's connection flags for the tools (connopts.h). */
#include "connopts.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DB_MAX (1L << 20) /* as the library's URL parser */

static const char *const flag_names[] = {"-u", "--url", "-h", "-p", "-a", "--pass", "--user", "-n"};

int connopts_is_flag(const char *name) {
    for (size_t i = 0; i < sizeof flag_names / sizeof flag_names[0]; i++)
        if (strcmp(name, flag_names[i]) == 0) return 1;
    return 0;
}

void connopts_init(connopts *c) {
    memset(c, 0, sizeof *c);
    const char *env = getenv("RJQ_URL");
    if (env == NULL || env[0] == '\0') env = getenv("REDIS_URL");
    if (env && env[0] != '\0') c->env_url = env;
    const char *auth = getenv("REDISCLI_AUTH"); /* redis-cli's */
    if (auth && auth[0] != '\0') c->env_auth = auth;
}

const char *connopts_password(const connopts *c) {
    return c->env_auth;
}

void connopts_free(connopts *c) {
    for (int i = 0; i < CONN_NPARTS; i++) {
        if (c->part[i] && i == CONN_PASS) memset(c->part[i], 0, strlen(c->part[i]));
        free(c->part[i]);
    }
    free(c->query);
    if (c->built) memset(c->built, 0, strlen(c->built)); /* holds the password */
    free(c->built);
    memset(c, 0, sizeof *c);
}

static char *alloc(size_t n) {
    char *d = malloc(n);
    if (d == NULL) { /* a few bytes at start-up */
        fputs("rjq: out of memory\n", stderr);
        exit(1);
    }
    return d;
}

static char *dup_n(const char *s, size_t n) {
    char *d = alloc(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

static void set_part(char **slot, char *value) {
    if (*slot) memset(*slot, 0, strlen(*slot));
    free(*slot);
    *slot = value;
}

/* The parts a redis:// or rediss:// URL names, as the library reads them
 * (the userinfo ends at the last '@' before the path; a lone word there
 * is the password), into part[] (only those named) and *query. Returns 0,
 * or -1 for another kind of URL. */
static int split_url(const char *url, char *part[CONN_NPARTS], char **query, int *tls) {
    const char *s;
    if (strncmp(url, "redis://", 8) == 0) s = url + 8, *tls = 0;
    else if (strncmp(url, "rediss://", 9) == 0) s = url + 9, *tls = 1;
    else return -1;
    const char *q = strchr(s, '?');
    const char *end = q ? q : s + strlen(s);
    if (q) set_part(query, dup_n(q, strlen(q)));
    const char *slash = memchr(s, '/', (size_t)(end - s));
    const char *auth_end = slash ? slash : end, *at = NULL;
    for (const char *p = s; p < auth_end; p++)
        if (*p == '@') at = p;
    if (at) {
        const char *colon = memchr(s, ':', (size_t)(at - s));
        if (colon) {
            if (colon > s) set_part(&part[CONN_USER], dup_n(s, (size_t)(colon - s)));
            set_part(&part[CONN_PASS], dup_n(colon + 1, (size_t)(at - colon - 1)));
        } else if (at > s) {
            set_part(&part[CONN_PASS], dup_n(s, (size_t)(at - s)));
        }
        s = at + 1;
    }
    const char *host_end = auth_end, *port = NULL;
    if (s < auth_end && *s == '[') {
        const char *close = memchr(s, ']', (size_t)(auth_end - s));
        if (close && close + 1 < auth_end && close[1] == ':') host_end = close + 1, port = close + 2;
    } else {
        const char *colon = memchr(s, ':', (size_t)(auth_end - s));
        if (colon) host_end = colon, port = colon + 1;
    }
    if (host_end > s) set_part(&part[CONN_HOST], dup_n(s, (size_t)(host_end - s)));
    if (port) set_part(&part[CONN_PORT], dup_n(port, (size_t)(auth_end - port)));
    if (slash && slash + 1 < end) set_part(&part[CONN_DB], dup_n(slash + 1, (size_t)(end - slash - 1)));
    return 0;
}

/* digits only, lo..hi */
static int number(const char *s, long lo, long hi) {
    size_t n = strlen(s);
    if (n == 0 || n > 9) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i])) return 0;
    long v = strtol(s, NULL, 10);
    return v >= lo && v <= hi;
}

/* user and password as a URL's userinfo takes them */
static char *encode(const char *s) {
    size_t n = strlen(s);
    char *out = alloc(3 * n + 1), *o = out;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (isalnum(ch) || strchr("-._~", ch)) *o++ = (char)ch;
        else o += sprintf(o, "%%%02X", ch);
    }
    *o = '\0';
    return out;
}

int connopts_set(connopts *c, const char *name, const char *value, char *err, size_t errlen) {
    if (strcmp(name, "-u") == 0 || strcmp(name, "--url") == 0) {
        c->url = value;
        c->nurls++;
        if (split_url(value, c->part, &c->query, &c->tls) == 0) c->opaque = NULL;
        else c->opaque = value;
        return 0;
    }
    if (strcmp(name, "-p") == 0) {
        if (value[0] == '\0' || strspn(value, "0123456789") != strlen(value)) {
            snprintf(err, errlen,
                     "-p is the port, as in redis-cli: '%s' is not a port number (the key "
                     "prefix is --prefix %s)",
                     value, value);
            return -1;
        }
        if (!number(value, 1, 65535)) {
            snprintf(err, errlen, "-p %s: a port is 1..65535", value);
            return -1;
        }
        set_part(&c->part[CONN_PORT], dup_n(value, strlen(value)));
    } else if (strcmp(name, "-h") == 0) {
        if (value[0] == '\0' || strpbrk(value, "/@?#% \t\r\n") != NULL) {
            snprintf(err, errlen, "-h: '%s' is not a host name or address", value);
            return -1;
        }
        if (strchr(value, ':') && value[0] != '[') { /* an IPv6 address */
            size_t n = strlen(value);
            char *h = alloc(n + 3);
            snprintf(h, n + 3, "[%s]", value);
            set_part(&c->part[CONN_HOST], h);
        } else {
            set_part(&c->part[CONN_HOST], dup_n(value, strlen(value)));
        }
    } else if (strcmp(name, "-n") == 0) {
        if (!number(value, 0, DB_MAX)) {
            snprintf(err, errlen, "-n: '%s' is not a database number (0..%ld)", value, DB_MAX);
            return -1;
        }
        set_part(&c->part[CONN_DB], dup_n(value, strlen(value)));
    } else if (strcmp(name, "-a") == 0 || strcmp(name, "--pass") == 0) {
        set_part(&c->part[CONN_PASS], encode(value));
    } else if (strcmp(name, "--user") == 0) {
        if (value[0] == '\0') {
            snprintf(err, errlen, "--user: an empty user name");
            return -1;
        }
        set_part(&c->part[CONN_USER], encode(value));
    } else {
        snprintf(err, errlen, "%s is not a connection option", name);
        return -1;
    }
    c->flags = 1;
    return 0;
}

/* Append the query's parameters, but those of a part set elsewhere. */
static void append_query(char *out, size_t size, const char *query, char *const part[CONN_NPARTS]) {
    static const struct {
        const char *key;
        int part;
    } drop[] = {{"db", CONN_DB}, {"password", CONN_PASS}, {"username", CONN_USER},
                {"user", CONN_USER}};
    char sep = '?';
    const char *s = query + 1;
    while (*s) {
        size_t n = strcspn(s, "&"), klen = strcspn(s, "=&");
        int keep = n > 0;
        for (size_t i = 0; keep && i < sizeof drop / sizeof drop[0]; i++)
            if (part[drop[i].part] && strlen(drop[i].key) == klen && strncmp(s, drop[i].key, klen) == 0)
                keep = 0;
        if (keep) {
            size_t len = strlen(out);
            snprintf(out + len, size - len, "%c%.*s", sep, (int)n, s);
            sep = '&';
        }
        s += n;
        if (*s == '&') s++;
    }
}

int connopts_url(connopts *c, const char **url, char *err, size_t errlen) {
    const char *given = c->nurls ? c->url : c->env_url;
    if (!c->flags) { /* as given: the last -u wins whole */
        *url = given;
        return 0;
    }
    const char *bad = c->nurls ? c->opaque : c->env_url;
    char *base[CONN_NPARTS] = {NULL}, *query = NULL;
    int tls = c->tls;
    if (c->nurls == 0) { /* the environment's URL is the starting point */
        if (c->env_url && split_url(c->env_url, base, &query, &tls) != 0) bad = c->env_url;
        else bad = NULL;
    }
    if (bad) {
        snprintf(err, errlen,
                 "-h, -p, -a, -n, --user and --pass change a redis:// or rediss:// URL, not "
                 "a %.*s: one (%s): write them in that URL",
                 (int)strcspn(bad, ":"), bad, c->nurls ? "-u" : "the environment's URL");
        return -1;
    }
    char *p[CONN_NPARTS];
    for (int i = 0; i < CONN_NPARTS; i++) p[i] = c->part[i] ? c->part[i] : base[i];
    if (c->query) {
        free(query);
        query = c->query, c->query = NULL;
    }
    int rc = 0;
    /* a user without a password here: ?username=, the password from
     * $REDISCLI_AUTH (the library's options) */
    int user_query = p[CONN_USER] && p[CONN_PASS] == NULL;
    if (user_query && c->env_auth == NULL) {
        snprintf(err, errlen, "--user needs a password too (-a, --pass or $REDISCLI_AUTH)");
        rc = -1;
    } else {
        size_t size = 80 + (query ? strlen(query) : 0);
        for (int i = 0; i < CONN_NPARTS; i++) size += p[i] ? strlen(p[i]) : 0;
        c->built = alloc(size);
        const char *user = user_query ? NULL : p[CONN_USER];
        snprintf(c->built, size, "%s://%s%s%s%s%s:%s%s%s", tls ? "rediss" : "redis",
                 user ? user : "", user ? ":" : "",
                 p[CONN_PASS] ? p[CONN_PASS] : "", p[CONN_PASS] ? "@" : "",
                 p[CONN_HOST] ? p[CONN_HOST] : "127.0.0.1", p[CONN_PORT] ? p[CONN_PORT] : "6379",
                 p[CONN_DB] ? "/" : "", p[CONN_DB] ? p[CONN_DB] : "");
        if (query) append_query(c->built, size, query, p);
        if (user_query) {
            size_t len = strlen(c->built);
            snprintf(c->built + len, size - len, "%cusername=%s", strchr(c->built, '?') ? '&' : '?',
                     p[CONN_USER]);
        }
        *url = c->built;
    }
    for (int i = 0; i < CONN_NPARTS; i++) set_part(&base[i], NULL);
    free(query);
    return rc;
}
