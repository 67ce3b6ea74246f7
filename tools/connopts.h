/* redis-cli's connection flags for the tools: -u/--url URL, -h HOST,
 * -p PORT, -a/--pass PASSWORD, --user USER, -n DB, turned into the one URL
 * the library takes.
 *
 * As in redis-cli, the flags and URLs apply in command-line order and the
 * last one naming a part (host, port, user, password, db) wins: a URL sets
 * only the parts it names ("-p 7000 -u redis://h" is h:7000, "-u
 * redis://h:7000 -p 7001" is h:7001). The environment's URL ($RJQ_URL,
 * else $REDIS_URL) is the starting point unless a -u/--url is given.
 * Without those flags the URL goes to the library as given (the last
 * -u/--url, else the environment's).
 *
 * $REDISCLI_AUTH (redis-cli's) is the password when neither a flag nor
 * the URL gives one: connopts_password() hands it to the library as
 * rjq_client_options.password, which a password in the URL overrides
 * (also for unix:// and Sentinel URLs). */
#ifndef RJQ_TOOLS_CONNOPTS_H
#define RJQ_TOOLS_CONNOPTS_H

#include <stddef.h>

enum { CONN_HOST, CONN_PORT, CONN_USER, CONN_PASS, CONN_DB, CONN_NPARTS };

typedef struct connopts {
    const char *env_url;  /* $RJQ_URL, else $REDIS_URL (not empty), or NULL */
    const char *url;      /* the last -u/--url, or NULL */
    const char *env_auth; /* $REDISCLI_AUTH (not empty), or NULL */
    int nurls;            /* -u/--url given this many times */
    int flags;            /* a part flag (-h -p -a -n --user --pass) was given */
    int tls;              /* rediss:// (from the last URL seen) */
    const char *opaque;   /* a URL given that has no parts to change (unix://, sentinel) */
    char *part[CONN_NPARTS]; /* URL form (percent-encoded), owned; NULL: not given */
    char *query;          /* "?..." of the last URL that had one, owned */
    char *built;          /* connopts_url's result, owned */
} connopts;

/* Start: reads $RJQ_URL, else $REDIS_URL, and $REDISCLI_AUTH. */
void connopts_init(connopts *c);
void connopts_free(connopts *c);

/* Whether `name` (as typed: "-p", "--url", ...) is a connection flag, and
 * whether it takes a value (they all do). */
int connopts_is_flag(const char *name);

/* Apply one flag with its value, in command-line order. Returns 0, or -1
 * with a message in err (a usage error: -p not a port, -n not a number). */
int connopts_set(connopts *c, const char *name, const char *value, char *err, size_t errlen);

/* The URL to hand to the library (NULL: its default), valid until
 * connopts_free. Returns 0, or -1 with a message in err (flags combined
 * with a unix:// or Sentinel URL, --user without a password from -a,
 * --pass, the URL or $REDISCLI_AUTH). --user without a password of its
 * own becomes ?username= (the password then comes from $REDISCLI_AUTH). */
int connopts_url(connopts *c, const char **url, char *err, size_t errlen);

/* The password for rjq_client_options.password: $REDISCLI_AUTH, or NULL.
 * (The URL's own password, from -a, --pass or -u, wins in the library.) */
const char *connopts_password(const connopts *c);

#endif
