/*
 * rjq — command-line tool for rjq queues: inspect, enqueue, replay, sweep.
 *
 *     rjq [-u URL] [-h HOST] [-p PORT] [-a PASSWORD] [-n DB] [--prefix PREFIX]
 *         [-t SECONDS] COMMAND ...
 *
 * (the connection options are redis-cli's: connopts.h; the help texts:
 * help.c)
 *
 * Every command opens one client on a private libevent loop, sends its
 * request(s), runs the loop until the replies are in, prints them and frees
 * everything. A deadline timer (10 s by default, armed when the tool starts
 * waiting and re-armed by every reply) ends a command that gets no answer, so an
 * unreachable server never hangs the tool.
 *
 * Exit status: 0 success, 1 error (reported on stderr as
 * "rjq: <what>: <description> (<detail>)"), 2 usage error.
 *
 * Only the public API (rjq.h and the libevent adapter) is used.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <rjq/libevent.h>

#include "acl.h"
#include "after.h"
#include "connopts.h"
#include "help.h"
#include "log.h"
#include "rate.h"
#include "statsfmt.h"
#ifdef RJQ_HAVE_SERVE
#include "serve.h"
#endif
#ifdef RJQ_HAVE_TOP
#include "top.h"
#endif
#include "utf8.h"
#include "rjq.h"

#define EXIT_USAGE 2
#define DEFAULT_URL "redis://127.0.0.1:6379"
#define DEFAULT_TIMEOUT_S 10
#define STDIN_BATCH 1000   /* jobs per rjq_enqueue_batch() call */
#define STDIN_INFLIGHT 4   /* batches sent and not yet answered */
#define DEAD_LIMIT 100     /* default --limit of "dead" */

/* ---- the tool's state ---------------------------------------------------- */

typedef struct cli {
    connopts conn;           /* -u, -h, -p, -a, -n, --user, --pass; $RJQ_URL, $REDIS_URL */
    const char *url;         /* the URL they make; NULL: the library's default */
    rjq_tls_options tls;     /* --tls, --cacert ... */
    int tls_given;           /* any TLS option was given */
    const char *prefix;
    long timeout_s;
    const char *what;        /* the command, for error messages */
    int json;
    struct event_base *base;
    struct event *deadline;
    rjq_client *c;
    rjq_queue *q;
    int pending;             /* replies still expected */
    struct jobs_page *jobs_page; /* rjq jobs: the page being read */
    int failed;              /* an error was reported */
    int timed_out;           /* gave up waiting (-t passed, or no use waiting) */
    int waiting;             /* in wait_replies: a hopeless connection ends the wait */
    int closing;             /* replies from here on are cancellations */
    int ever_connected;      /* the command connection came up once */
    char last_event[256];    /* detail of the last connection error */
    long long count;         /* "enqueue -": jobs enqueued so far; "purge": deleted */
    long long last_page;     /* "purge": deleted by the last call; "queues": names */
    char *after;             /* "queues": the last name listed (owned) */
    struct namelist *names;  /* "queues": the names so far */
    int limits_set;          /* "limit": some limit was given */
    int exists;              /* pause, resume, limit: the queue has keys in Redis */
    int format;              /* queue-format: the format asked for */
    int tty;                 /* stdout is a terminal: bytes are shown escaped */
    int closed;              /* cli_close: the graceful close is over */
    int close_expired;       /* cli_close: it took longer than CLOSE_WAIT_S */
    int shards;              /* "stats --shards": each shard's too */
    const char *shard_name;  /* "stats --shards": the shard being printed (NULL: the sum) */
    char index_cursor[24];   /* "index": the fill's next step ("0": done) */
    char index_fields[RJQ_INDEX_FIELDS_MAX * (RJQ_INDEX_FIELD_MAX + 1)]; /* "index" */
    long long covered, total; /* "index", "find": the index's coverage */
    char *found_after;       /* "find": the last id listed (owned) */
    long long found;         /* "find": ids listed */
} cli;

static cli *the_cli; /* every command takes --json (parse_args) */

static int usage(void) {
    help_overview(stderr);
    return EXIT_USAGE;
}

static int usage_error(const char *fmt, const char *arg) {
    fputs("rjq: ", stderr);
    fprintf(stderr, fmt, arg);
    if (the_cli && the_cli->what) fprintf(stderr, " (see rjq help %s)\n", the_cli->what);
    else fputs(" (see rjq help)\n", stderr);
    return EXIT_USAGE;
}

/* The URL to show in messages, with any password masked: the userinfo
 * ends at the last '@' before the path (as the library reads it), and a
 * lone word there is a password too (redis://secret@host). */
static void append(char *out, size_t size, const char *s, size_t n) {
    size_t len = strlen(out);
    snprintf(out + len, size - len, "%.*s", (int)n, s);
}

/* The URL with its password ("user:***@", "***@", "password=***") hidden. */
static void display_url(const cli *t, char *out, size_t size) {
    const char *u = t->url ? t->url : DEFAULT_URL;
    const char *auth = strstr(u, "://");
    out[0] = '\0';
    if (auth) {
        auth += 3;
        const char *end = auth + strcspn(auth, "/?"), *at = NULL;
        for (const char *p = auth; p < end; p++)
            if (*p == '@') at = p;
        if (at) {
            const char *colon = memchr(auth, ':', (size_t)(at - auth));
            append(out, size, u, (size_t)((colon ? colon + 1 : auth) - u)); /* user:, or a lone password */
            append(out, size, "***", 3);
            u = at;
        }
    }
    const char *q = strchr(u, '?');
    if (q == NULL) {
        append(out, size, u, strlen(u));
        return;
    }
    append(out, size, u, (size_t)(q - u));
    while (*q) { /* "?k=v" or "&k=v" */
        size_t n = 1 + strcspn(q + 1, "&");
        if (strncmp(q + 1, "password=", 9) == 0) {
            append(out, size, q, 10);
            append(out, size, "***", 3);
        } else {
            append(out, size, q, n);
        }
        q += n;
    }
}

/* ---- errors --------------------------------------------------------------- */

/* A code's text; rjq batch's not-found and state errors are about the
 * batch, not a job (rjq_strerror's "no such job"), rjq shards' EBUSY about
 * the count. */
static const char *code_text(const cli *t, int code) {
    if (t->what && strcmp(t->what, "batch") == 0) {
        if (code == RJQ_ENOTFOUND) return "no such batch";
        if (code == RJQ_ESTATE) return "the batch is not in a state that allows this";
    }
    if (t->what && strcmp(t->what, "shards") == 0 && code == RJQ_EBUSY)
        return "the shard count cannot change now"; /* (not "already in progress") */
    return rjq_strerror(code);
}

static void report(cli *t, int code, const char *detail) {
    t->failed = 1;
    size_t wl = t->what ? strlen(t->what) : 0;
    if (detail && wl && strncmp(detail, t->what, wl) == 0 && strncmp(detail + wl, ": ", 2) == 0)
        detail += wl + 2; /* ("rjq: enqueue: enqueue: ...") */
    if (code == RJQ_ESHARDED && detail && strstr(detail, "shard"))
        /* (the code's text, "this call does not span its shards yet", is
         * not why when the detail says it: an id that names no shard, a
         * batch kept in one queue's keys) */
        fprintf(stderr, "rjq: %s: %s\n", t->what, detail);
    else if (detail && detail[0])
        fprintf(stderr, "rjq: %s: %s (%s)\n", t->what, code_text(t, code), detail);
    else
        fprintf(stderr, "rjq: %s: %s\n", t->what, code_text(t, code));
}

/* Report an error code with the client's detail; a request that failed
 * because the server was never reached says so. */
static void report_rc(cli *t, int code) {
    const char *detail = t->c ? rjq_client_get_errmsg(t->c) : NULL;
    char url[256];
    if (detail && strcmp(detail, "no error") == 0) detail = NULL;
    if (code == RJQ_ECONN && !t->ever_connected) { /* nothing was sent: no "outcome unknown" */
        display_url(t, url, sizeof url);
        t->failed = 1;
        fprintf(stderr, "rjq: %s: could not connect to %s: %s\n", t->what, url,
                detail ? detail : "connection failed");
        return;
    }
    report(t, code, detail);
}

/* ---- event loop ------------------------------------------------------------ */

static void on_deadline(evutil_socket_t fd, short what, void *arg) {
    cli *t = arg;
    char buf[1024], url[256];
    (void)fd;
    (void)what;
    display_url(t, url, sizeof url);
    snprintf(buf, sizeof buf, "no reply from %s within %ld s%s%s", url, t->timeout_s,
             t->last_event[0] ? "; last error: " : "", t->last_event);
    report(t, RJQ_ETIMEDOUT, buf);
    t->timed_out = 1;
    event_base_loopbreak(t->base);
}

static void arm_deadline(cli *t) {
    struct timeval tv = {t->timeout_s, 0};
    evtimer_add(t->deadline, &tv);
}

/* A plain connection that the server drops or answers with bytes that are
 * not RESP before any session was set: a TLS-only port does that (Redis
 * resets a connection whose first bytes are no TLS record; another TLS
 * server sends an alert), and no reconnect will change it. */
static int looks_like_tls_only(const cli *t, const char *detail) {
    const char *u = t->url ? t->url : DEFAULT_URL;
    if (t->ever_connected || t->tls.enable || strncmp(u, "redis://", 8) != 0) return 0; /* (not rediss://) */
    return detail && (strstr(detail, "reset by peer") || strstr(detail, "Protocol error") ||
                      strstr(detail, "Server closed the connection"));
}

static void on_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    cli *t = data;
    (void)c;
    if (conn != RJQ_CONN_COMMAND) return;
    if (ev == RJQ_EVENT_CONNECTED) {
        t->ever_connected = 1;
        return;
    }
    if (detail) snprintf(t->last_event, sizeof t->last_event, "%s", detail);
    if (t->waiting && !t->timed_out && looks_like_tls_only(t, detail)) {
        /* fail now, not at -t: reconnecting would meet the same */
        char url[256];
        display_url(t, url, sizeof url);
        t->failed = 1;
        t->timed_out = 1; /* stop waiting; late replies are ignored */
        fprintf(stderr, "rjq: %s: could not connect to %s: %s: the server may require TLS: "
                        "use rediss:// (or --tls)\n", t->what, url, detail);
        event_base_loopbreak(t->base);
    }
}

/* Run the loop until at most max_pending replies are outstanding.
 * Returns 0, or 1 when an error was reported or the deadline passed. */
static int wait_replies(cli *t, int max_pending) {
    if (t->pending > max_pending) arm_deadline(t); /* time spent elsewhere does not count */
    t->waiting = 1;
    while (t->pending > max_pending && !t->timed_out)
        if (event_base_loop(t->base, EVLOOP_ONCE) < 0) {
            report(t, RJQ_EPROTO, "event loop failure");
            break;
        }
    t->waiting = 0;
    return t->failed || t->timed_out;
}

/* Account for a request just handed to the library (rc: what it returned).
 * Returns 0, or 1 (error reported) when it was refused. */
static int sent(cli *t, int rc) {
    if (rc != RJQ_OK) {
        report_rc(t, rc);
        return 1;
    }
    t->pending++;
    return 0;
}

/* Send one request and wait for its reply: the shape of most commands. */
static int send_and_wait(cli *t, int rc) {
    return sent(t, rc) || wait_replies(t, 0);
}

/* The common start of every reply callback. Returns 1 when the reply is
 * good and should be printed; errors are reported here. */
/* The same, naming `why` (not NULL) as the detail of an error. */
static int reply_ok_why(cli *t, int status, const char *why) {
    t->pending--;
    if (t->closing || t->timed_out) return 0; /* cancellations while freeing */
    arm_deadline(t);
    if (status != RJQ_OK) {
        if (why) report(t, status, why);
        else report_rc(t, status);
        return 0;
    }
    return 1;
}

static int reply_ok(cli *t, int status) {
    return reply_ok_why(t, status, NULL);
}

/* Create the loop, the client and the queue handle. Returns 0 or 1. */
/* The client options of the global options. */
static void client_options(cli *t, rjq_client_options *o) {
    *o = (rjq_client_options)RJQ_CLIENT_OPTIONS_INIT;
    o->url = t->url;
    o->password = connopts_password(&t->conn); /* $REDISCLI_AUTH: the URL's wins */
    o->prefix = t->prefix;
    o->name = "rjq-cli";
    o->on_event = on_event;
    o->event_data = t;
    o->tls = t->tls_given ? &t->tls : NULL;
    /* a connect or TLS handshake that never ends is named before -t ends
     * (2 s at least: reading a slow stdin holds the loop) */
    long half = t->timeout_s * 1000 / 2;
    o->connect_timeout_ms = half < 2000 ? 2000 : half > 5000 ? 5000 : half;
}

static int reply_ok(cli *t, int status);

static void on_queue_opened(rjq_client *c, int status, rjq_queue *q, void *data) {
    cli *t = data;
    (void)c;
    if (reply_ok(t, status)) t->q = q;
}

static int cli_open(cli *t, const char *queue) {
    rjq_client_options o;
    client_options(t, &o);
    t->base = event_base_new();
    t->deadline = t->base ? evtimer_new(t->base, on_deadline, t) : NULL;
    if (t->deadline == NULL) {
        report(t, RJQ_ENOMEM, "cannot create the event loop");
        return 1;
    }
    int rc = rjq_libevent_client_new_dns(&t->c, t->base, NULL, &o);
    if (rc != RJQ_OK) {
        char url[256], why[768];
        display_url(t, url, sizeof url);
        snprintf(why, sizeof why, "%s: %s", url, rjq_client_get_errmsg(NULL));
        report(t, rc, rc == RJQ_EURL || rc == RJQ_ETLS ? why : NULL);
        t->c = NULL;
        return 1;
    }
    if (queue == NULL) return 0; /* a command about the client's queues */
    /* (its layout first: a sharded queue is one queue to the commands) */
    if (send_and_wait(t, rjq_queue_open_async(t->c, queue, NULL, on_queue_opened, t))) return 1;
    return t->q == NULL;
}

static void on_cli_closed(const rjq_close_report *report, void *data) {
    (void)report;
    ((cli *)data)->closed = 1;
}

static void on_close_deadline(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    ((cli *)arg)->close_expired = 1; /* (what is left is cancelled below) */
}

#define CLOSE_WAIT_S 2 /* the most the tool waits for its own writes at exit */

static void cli_close(cli *t) {
    t->closing = 1;
    /* The library's own writes of the command (a queue's registration:
     * not awaited, and on a cluster perhaps on another master's connection,
     * not even up yet) go out before the client does: a graceful close,
     * up to CLOSE_WAIT_S when Redis still answers. */
    struct event *wait = t->c && t->base && !t->timed_out
                             ? evtimer_new(t->base, on_close_deadline, t)
                             : NULL;
    if (wait && rjq_client_close(t->c, 0, on_cli_closed, t) == RJQ_OK) {
        struct timeval tv = {CLOSE_WAIT_S, 0};
        if (t->deadline) evtimer_del(t->deadline);
        evtimer_add(wait, &tv);
        while (!t->closed && !t->close_expired && event_base_loop(t->base, EVLOOP_ONCE) == 0) {}
        if (t->closed) t->c = NULL; /* freed by the close (or, below, at once) */
    }
    if (wait) event_free(wait);
    rjq_client_free(t->c); /* pending callbacks get RJQ_ECANCELED */
    if (t->deadline) event_free(t->deadline);
    if (t->base) event_base_free(t->base);
}

/* ---- argument parsing ------------------------------------------------------ */

typedef struct optdef {
    const char *name;   /* "--delay" */
    const char **value; /* takes an argument, stored here */
    int *flag;          /* or is a flag, set to 1 */
} optdef;

/* Split a command's arguments into options (defs, ended by a {NULL}) and
 * min..max positionals. Returns 0 or EXIT_USAGE (reported). */
static int parse_args(int argc, char **argv, const optdef *defs, char **pos, int min,
                      int max, int *npos) {
    int n = 0, options = 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const optdef *d = NULL;
        if (options && strcmp(a, "--") == 0) {
            options = 0;
            continue;
        }
        if (options && strcmp(a, "--json") == 0) {
            the_cli->json = 1;
            continue;
        }
        if (options && a[0] == '-' && a[1] == '-') {
            /* --name value, or --name=value (as getopt_long takes them) */
            const char *eq = strchr(a, '=');
            size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
            for (d = defs; d->name && (strlen(d->name) != nlen || strncmp(d->name, a, nlen) != 0); d++) {}
            if (d->name == NULL) return usage_error("unknown option %s", a);
            if (d->flag) {
                if (eq) return usage_error("option %s takes no value", a);
                *d->flag = 1;
            } else if (eq) {
                *d->value = eq + 1;
            } else if (i + 1 < argc) {
                *d->value = argv[++i];
            } else {
                return usage_error("option %s needs a value", a);
            }
            continue;
        }
        if (n == max) return usage_error("unexpected argument '%s'", a);
        pos[n++] = argv[i];
    }
    if (n < min) return usage_error("%s", "missing argument");
    if (npos) *npos = n;
    return 0;
}

/* Parse an optional integer option into *out (left alone when s is NULL).
 * Returns 0 or EXIT_USAGE (reported). */
static int parse_ll(const char *name, const char *s, long long lo, long long hi, long long *out) {
    if (s == NULL) return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi) {
        if (hi == LLONG_MAX) /* no maximum of its own: not the type's */
            fprintf(stderr, "rjq: %s: expected an integer of at least %lld, got '%s'\n", name,
                    lo, s);
        else
            fprintf(stderr, "rjq: %s: expected an integer in [%lld, %lld], got '%s'\n", name,
                    lo, hi, s);
        return EXIT_USAGE;
    }
    *out = v;
    return 0;
}

/* ---- output ------------------------------------------------------------------ */

static void print_base64(const unsigned char *s, size_t len) {
    static const char digits[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < len; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (i + 1 < len ? (unsigned)s[i + 1] << 8 : 0) |
                     (i + 2 < len ? s[i + 2] : 0);
        putchar(digits[v >> 18 & 63]);
        putchar(digits[v >> 12 & 63]);
        putchar(i + 1 < len ? digits[v >> 6 & 63] : '=');
        putchar(i + 2 < len ? digits[v & 63] : '=');
    }
}

/* Bytes as a JSON value: a string when they are valid UTF-8, else
 * {"base64":"..."} (payloads and results are binary-safe), so the output
 * is always valid JSON. */
static void print_json_string(const void *p, size_t len) {
    const unsigned char *s = p;
    if (!utf8_valid(s, len)) {
        fputs("{\"base64\":\"", stdout);
        print_base64(s, len);
        fputs("\"}", stdout);
        return;
    }
    putchar('"');
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = s[i];
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch == '\n')
            fputs("\\n", stdout);
        else if (ch == '\t')
            fputs("\\t", stdout);
        else if (ch < 0x20 || ch == 0x7f)
            printf("\\u%04x", ch);
        else
            putchar(ch);
    }
    putchar('"');
}

/* Bytes for plain output. At a terminal, what is not printable text is
 * shown escaped so that no byte of a payload (an escape sequence, a
 * carriage return) reaches the terminal: \n \r \t, \\ for a backslash,
 * \xNN for other control characters (C0, DEL, C1) and for bytes that are
 * not UTF-8. Into a pipe or a file they go as they are. */
static void print_bytes(const cli *t, const void *p, size_t len) {
    const unsigned char *s = p;
    if (!t->tty) {
        fwrite(s, 1, len, stdout);
        return;
    }
    for (size_t i = 0; i < len;) {
        unsigned char ch = s[i];
        size_t n = utf8_char_len(s + i, len - i);
        if (ch == '\\') fputs("\\\\", stdout);
        else if (ch == '\n') fputs("\\n", stdout);
        else if (ch == '\r') fputs("\\r", stdout);
        else if (ch == '\t') fputs("\\t", stdout);
        else if (n == 0 || ch < 0x20 || ch == 0x7f) printf("\\x%02x", ch);
        else if (n == 2 && ch == 0xc2 && s[i + 1] < 0xa0) /* C1: U+0080..U+009F */
            printf("\\x%02x\\x%02x", ch, s[i + 1]);
        else fwrite(s + i, 1, n, stdout);
        i += n ? n : 1;
    }
}

/* One field of an object: plain "name value" line or a JSON member.
 * NULL values are omitted in plain output and null in JSON. */
static void print_field(const cli *t, int first, const char *name, const void *v, size_t len) {
    if (t->json) {
        printf("%s\"%s\":", first ? "{" : ",", name);
        if (v)
            print_json_string(v, len);
        else
            fputs("null", stdout);
    } else if (v) {
        printf("%s ", name);
        print_bytes(t, v, len);
        putchar('\n');
    }
}

static void print_num(const cli *t, int first, const char *name, long long v) {
    if (t->json)
        printf("%s\"%s\":%lld", first ? "{" : ",", name, v);
    else
        printf("%s %lld\n", name, v);
}

/* A time in ms (0: unknown): omitted in plain output, null in JSON. */
static void print_time(const cli *t, const char *name, long long ms) {
    if (ms) print_num(t, 0, name, ms);
    else if (t->json) printf(",\"%s\":null", name);
}

static void end_object(const cli *t) {
    if (t->json) puts("}");
}

/* A result of one number: {"name":n} with --json, else the number. */
static void print_count(const cli *t, const char *name, long long n) {
    if (t->json) printf("{\"%s\":%lld}\n", name, n);
    else printf("%lld\n", n);
}

/* A result of one word: {"name":"word"} with --json, else the text. */
static void print_word(const cli *t, const char *name, const char *word, const char *text) {
    if (t->json) printf("{\"%s\":\"%s\"}\n", name, word);
    else puts(text);
}

/* ---- stats ------------------------------------------------------------------- */

static void on_stats(rjq_client *c, int status, const rjq_stats *s, void *data) {
    cli *t = data;
    (void)c;
    if (!reply_ok(t, status)) return;
    if (t->shard_name) {
        if (t->json) printf("{\"shard\":\"%s\"", t->shard_name);
        else printf("shard %s\n", t->shard_name);
    } else if (!s->exists && rjq_queue_count_shards(t->q) <= 1) { /* (declared shards: it exists) */
        t->failed = 1;
        fprintf(stderr, "rjq: %s: queue '%s' does not exist (nothing of it is in Redis)\n",
                t->what, rjq_queue_get_name(t->q));
        return;
    }
    for (size_t i = 0; i < stat_nfields; i++)
        print_num(t, i == 0 && t->shard_name == NULL, stat_fields[i].name, stat_value(s, i));
    print_num(t, 0, "paused", s->paused);
    if (t->shard_name == NULL && rjq_queue_count_shards(t->q) > 1)
        print_num(t, 0, "shards", rjq_queue_count_shards(t->q));
    end_object(t);
}

/* rjq stats QUEUE: a sharded queue's stats are its shards' summed (and,
 * with --shards, each shard's after them). */
static int cmd_stats(cli *t, int argc, char **argv) {
    char *pos[1];
    const optdef defs[] = {{"--json", NULL, &t->json}, {"--shards", NULL, &t->shards},
                           {NULL, NULL, NULL}};
    int rc = parse_args(argc, argv, defs, pos, 1, 1, NULL);
    if (rc) return rc;
    if (cli_open(t, pos[0])) return 1;
    if (send_and_wait(t, rjq_queue_get_stats(t->q, on_stats, t))) return 1;
    int n = rjq_queue_count_shards(t->q);
    for (int i = 0; t->shards && n > 1 && i < n; i++) {
        rjq_queue *s = rjq_queue_get_shard(t->q, i);
        t->shard_name = rjq_queue_get_name(s);
        if (send_and_wait(t, rjq_queue_get_stats(s, on_stats, t))) return 1;
    }
    return 0;
}

/* ---- shards ------------------------------------------------------------------ */

static void on_sharded(rjq_client *c, int status, long long n, void *data) {
    cli *t = data;
    (void)c;
    if (reply_ok(t, status)) (void)n;
}

/* rjq shards QUEUE [N]: declare the queue's shard count (N), then print
 * its layout: the count and each shard's queue name. */
static int cmd_shards(cli *t, int argc, char **argv) {
    char *pos[2];
    int npos = 0;
    const optdef defs[] = {{"--json", NULL, &t->json}, {NULL, NULL, NULL}};
    int rc = parse_args(argc, argv, defs, pos, 1, 2, &npos);
    if (rc) return rc;
    long n = 0;
    if (npos == 2) {
        char *end;
        n = strtol(pos[1], &end, 10);
        if (*end != '\0' || n < 1 || n > RJQ_SHARDS_MAX) {
            fprintf(stderr, "rjq: shards: N must be 1..%d\n", RJQ_SHARDS_MAX);
            return EXIT_USAGE;
        }
    }
    if (cli_open(t, pos[0])) return 1;
    if (n && send_and_wait(t, rjq_queue_shard(t->q, (int)n, on_sharded, t))) return 1;
    int shards = rjq_queue_count_shards(t->q);
    if (t->json) printf("{\"shards\":%d,\"names\":[", shards);
    else printf("shards %d\n", shards);
    for (int i = 0; shards > 1 && i < shards; i++) {
        const char *name = rjq_queue_get_name(rjq_queue_get_shard(t->q, i));
        if (t->json) printf("%s\"%s\"", i ? "," : "", name);
        else printf("shard %s\n", name);
    }
    if (t->json) puts("]}");
    return 0;
}

/* ---- metrics ----------------------------------------------------------------- */

/* rjq metrics QUEUE...: the queues' stats in the Prometheus text exposition
 * format (version 0.0.4), every family once with its samples for all the
 * queues, so a node exporter's textfile collector or a scrape wrapper can
 * serve it as it is. */
#define METRICS_QUEUES_MAX 256

typedef struct metrics_q {
    cli *t;
    prom_queue *p;
    rjq_queue *q;
} metrics_q;

/* (each queue opened knowing its layout: a sharded queue is one queue, its
 * stats summed) */
static void on_metrics_opened(rjq_client *c, int status, rjq_queue *q, void *data) {
    metrics_q *m = data;
    (void)c;
    if (reply_ok(m->t, status)) m->q = q;
}

static void on_metrics_stats(rjq_client *c, int status, const rjq_stats *s, void *data) {
    metrics_q *m = data;
    (void)c;
    if (reply_ok(m->t, status)) m->p->s = *s;
}

static int cmd_metrics(cli *t, int argc, char **argv) {
    char *pos[METRICS_QUEUES_MAX];
    int n = 0;
    const optdef defs[] = {{NULL, NULL, NULL}};
    int rc = parse_args(argc, argv, defs, pos, 1, METRICS_QUEUES_MAX, &n);
    if (rc) return rc;
    static metrics_q m[METRICS_QUEUES_MAX];
    static prom_queue p[METRICS_QUEUES_MAX];
    if (cli_open(t, pos[0])) return 1;
    for (int i = 0; i < n; i++) /* a name twice would make a series twice */
        for (int j = 0; j < i; j++)
            if (strcmp(pos[i], pos[j]) == 0) return usage_error("queue '%s' named twice", pos[i]);
    for (int i = 0; i < n; i++) {
        p[i] = (prom_queue){.name = pos[i]};
        m[i] = (metrics_q){.t = t, .p = &p[i], .q = i == 0 ? t->q : NULL};
        if (i > 0 && sent(t, rjq_queue_open_async(t->c, pos[i], NULL, on_metrics_opened, &m[i])))
            return 1;
    }
    if (wait_replies(t, 0)) return 1;
    for (int i = 0; i < n; i++)
        if (sent(t, rjq_queue_get_stats(m[i].q, on_metrics_stats, &m[i]))) return 1;
    if (wait_replies(t, 0)) return 1;
    if (!t->json) {
        prom_write_stats(stdout, p, (size_t)n);
        return 0;
    }
    /* --json: {"queue": {its stats}, ...} */
    for (int i = 0; i < n; i++) {
        printf("%s", i ? "," : "{");
        print_json_string(p[i].name, strlen(p[i].name));
        putchar(':');
        for (size_t k = 0; k < stat_nfields; k++)
            printf("%s\"%s\":%lld", k ? "," : "{", stat_fields[k].name, stat_value(&p[i].s, k));
        printf(",\"paused\":%d}", p[i].s.paused);
    }
    puts("}");
    return 0;
}

/* ---- enqueue ----------------------------------------------------------------- */

static void on_enqueued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n,
                        void *data) {
    cli *t = data;
    (void)c;
    if (!reply_ok(t, status) || n != 1) return;
    if (t->json) {
        fputs("{\"id\":", stdout);
        print_json_string(jobs[0].id, strlen(jobs[0].id));
        printf(",\"existed\":%s,\"replaced\":%s}\n", jobs[0].existed ? "true" : "false",
               jobs[0].replaced ? "true" : "false");
    } else {
        puts(jobs[0].id);
    }
    if (jobs[0].replaced)
        fprintf(stderr, "rjq: note: job %s was waiting; it takes this payload and waits again\n",
                jobs[0].id);
    else if (jobs[0].existed)
        fprintf(stderr, "rjq: note: job %s existed already; nothing was written\n", jobs[0].id);
}

static void on_batch(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n,
                     void *data) {
    cli *t = data;
    (void)c;
    (void)jobs;
    if (reply_ok(t, status)) t->count += (long long)n;
}

/* Lines read from stdin, waiting to be sent as one batch. */
typedef struct batch {
    char *buf;          /* the lines' bytes, back to back */
    size_t used, cap;
    size_t off[STDIN_BATCH], len[STDIN_BATCH];
    size_t n;
} batch;

static int batch_add(batch *b, const char *line, size_t len) {
    if (b->used + len > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->used + len) cap *= 2;
        char *p = realloc(b->buf, cap);
        if (p == NULL) return RJQ_ENOMEM;
        b->buf = p;
        b->cap = cap;
    }
    if (len) memcpy(b->buf + b->used, line, len);
    b->off[b->n] = b->used;
    b->len[b->n++] = len;
    b->used += len;
    return RJQ_OK;
}

/* Send the batch (the library copies it), then keep at most
 * STDIN_INFLIGHT batches unanswered. Returns 0 or 1. */
static int batch_send(cli *t, batch *b, const rjq_job_options *o) {
    static rjq_enqueue_item items[STDIN_BATCH];
    for (size_t i = 0; i < b->n; i++) {
        items[i].size = sizeof items[i];
        items[i].payload = b->buf + b->off[i];
        items[i].len = b->len[i];
        items[i].opts = o;
    }
    int rc = rjq_enqueue_batch(t->q, items, b->n, on_batch, t);
    b->n = b->used = 0;
    return sent(t, rc) || wait_replies(t, STDIN_INFLIGHT - 1);
}

static int enqueue_stdin(cli *t, const rjq_job_options *o) {
    batch *b = calloc(1, sizeof *b);
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int err = b == NULL;
    while (!err && (len = getline(&line, &cap, stdin)) >= 0) {
        if (len > 0 && line[len - 1] == '\n') len--;
        err = batch_add(b, line, (size_t)len) != RJQ_OK;
        if (err) report(t, RJQ_ENOMEM, "reading stdin");
        else if (b->n == STDIN_BATCH) err = batch_send(t, b, o);
    }
    if (!err && ferror(stdin)) {
        report(t, RJQ_EINVAL, strerror(errno));
        err = 1;
    }
    if (!err && b->n) err = batch_send(t, b, o);
    if (!err) err = wait_replies(t, 0);
    if (b) free(b->buf);
    free(b);
    free(line);
    if (err && t->count)
        fprintf(stderr, "rjq: at least %lld jobs were enqueued before the error\n", t->count);
    if (!err) print_count(t, "enqueued", t->count);
    return err;
}

static int cmd_enqueue(cli *t, int argc, char **argv) {
    char *pos[2];
    const char *id = NULL, *delay = NULL, *prio = NULL, *attempts = NULL, *timeout = NULL,
               *dedup = NULL, *after = NULL, *policy = NULL, *group = NULL;
    int debounce = 0;
    const optdef defs[] = {{"--id", &id, NULL},
                           {"--after", &after, NULL},
                           {"--after-policy", &policy, NULL},
                           {"--group", &group, NULL},
                           {"--delay", &delay, NULL},
                           {"--priority", &prio, NULL},
                           {"--attempts", &attempts, NULL},
                           {"--timeout", &timeout, NULL},
                           {"--dedup", &dedup, NULL},
                           {"--debounce", NULL, &debounce},
                           {NULL, NULL, NULL}};
    long long d = 0, p = 0, a = 0, to = 0, dd = 0;
    int rc = parse_args(argc, argv, defs, pos, 2, 2, NULL);
    if (rc || (rc = parse_ll("--delay", delay, 0, RJQ_DELAY_MAX, &d)) ||
        (rc = parse_ll("--priority", prio, RJQ_PRIORITY_MIN, RJQ_PRIORITY_MAX, &p)) ||
        (rc = parse_ll("--attempts", attempts, 1, INT_MAX, &a)) ||
        (rc = parse_ll("--timeout", timeout, 1, RJQ_DELAY_MAX, &to)) ||
        (rc = parse_ll("--dedup", dedup, 1, RJQ_DELAY_MAX, &dd)))
        return rc;
    if ((dedup || debounce) && id == NULL)
        return usage_error("%s needs --id", dedup ? "--dedup" : "--debounce");
    int from_stdin = strcmp(pos[1], "-") == 0;
    if (from_stdin && (id || group))
        return usage_error("%s cannot be used with stdin payloads", id ? "--id" : "--group");
    if (from_stdin && after) return usage_error("%s cannot be used with stdin payloads", "--after");
    if (policy && after == NULL) return usage_error("%s needs --after", "--after-policy");
    if (after && debounce) return usage_error("%s cannot be used with --debounce", "--after");
    if (after && group) return usage_error("%s cannot be used with --group", "--after");
    int pol = RJQ_AFTER_FAIL;
    if (policy && after_policy_parse(policy, &pol) != 0)
        return usage_error("--after-policy: '%s' is none of fail, run, ignore", policy);
    after_list deps;
    char why[160];
    if (after && after_parse(after, &deps, why, sizeof why) != 0) {
        after_free(&deps);
        return usage_error("--after: %s", why);
    }
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    if (after) {
        o.after = deps.deps;
        o.n_after = deps.n;
        o.after_policy = pol;
    }
    o.id = id;
    o.delay_ms = d;
    o.priority = (int)p;
    o.max_attempts = (int)a;
    o.timeout_ms = to;
    o.dedup_ms = dd;
    o.debounce = debounce;
    o.group = group;
    if (cli_open(t, pos[0])) {
        if (after) after_free(&deps);
        return 1;
    }
    if (from_stdin) return enqueue_stdin(t, &o);
    rc = send_and_wait(t, rjq_enqueue(t->q, pos[1], strlen(pos[1]), &o, on_enqueued, t));
    if (after) after_free(&deps);
    return rc;
}

/* ---- batch -------------------------------------------------------------------- */

static void on_batch_made(rjq_client *c, int status, const char *id, void *data) {
    cli *t = data;
    (void)c;
    if (!reply_ok(t, status)) return;
    if (t->json) {
        fputs("{\"batch\":", stdout);
        print_json_string(id, strlen(id));
        puts("}");
    } else {
        puts(id);
    }
}

static void on_batch_sealed(rjq_client *c, int status, void *data) {
    cli *t = data;
    (void)c;
    if (reply_ok(t, status)) print_word(t, "batch", "sealed", "sealed");
}

static void on_batch_deleted(rjq_client *c, int status, void *data) {
    cli *t = data;
    (void)c;
    if (reply_ok(t, status)) print_word(t, "batch", "deleted", "deleted");
}

static void on_batch_info(rjq_client *c, int status, const rjq_batch_info *b, void *data) {
    cli *t = data;
    (void)c;
    if (!reply_ok(t, status)) return;
    print_field(t, 1, "batch", b->id, strlen(b->id));
    print_field(t, 0, "state", b->state, strlen(b->state));
    if (t->json) printf(",\"sealed\":%s", b->sealed ? "true" : "false");
    else printf("sealed %s\n", b->sealed ? "yes" : "no");
    print_num(t, 0, "total", b->total);
    print_num(t, 0, "completed", b->completed);
    print_num(t, 0, "dead", b->dead);
    print_num(t, 0, "cancelled", b->cancelled);
    print_time(t, "created_ms", b->created_ms);
    print_time(t, "ended_ms", b->ended_ms);
    end_object(t);
}

static int cmd_batch(cli *t, int argc, char **argv) {
    char *pos[2];
    const char *bid = NULL, *on_complete = NULL, *on_success = NULL, *add = NULL,
               *payload = NULL, *job_id = NULL, *await = NULL, *retention = NULL;
    int create = 0, seal = 0, del = 0, force = 0, npos = 0;
    const optdef defs[] = {{"--create", NULL, &create},
                           {"--id", &bid, NULL},
                           {"--on-complete", &on_complete, NULL},
                           {"--on-success", &on_success, NULL},
                           {"--add", &add, NULL},
                           {"--payload", &payload, NULL},
                           {"--job-id", &job_id, NULL},
                           {"--seal", NULL, &seal},
                           {"--await", &await, NULL},
                           {"--retention", &retention, NULL},
                           {"--delete", NULL, &del},
                           {"--force", NULL, &force},
                           {NULL, NULL, NULL}};
    long long wait_ms = 0, keep = 0;
    int rc = parse_args(argc, argv, defs, pos, 1, 2, &npos);
    if (rc || (rc = parse_ll("--await", await, 1, LONG_MAX, &wait_ms)) ||
        (rc = parse_ll("--retention", retention, -1, LLONG_MAX, &keep)))
        return rc;
    if (create) {
        if (npos != 1 || add || seal || await || payload || job_id || del || force)
            return usage_error("%s takes QUEUE and --id, --on-complete, --on-success, "
                               "--retention only",
                               "--create");
        rjq_batch_options o = RJQ_BATCH_OPTIONS_INIT;
        o.retention_ms = keep;
        o.id = bid;
        o.on_complete = on_complete;
        o.on_complete_len = on_complete ? strlen(on_complete) : 0;
        o.on_success = on_success;
        o.on_success_len = on_success ? strlen(on_success) : 0;
        if (cli_open(t, pos[0])) return 1;
        return send_and_wait(t, rjq_batch_create(t->q, &o, on_batch_made, t));
    }
    if (npos != 2) return usage_error("%s", "missing argument: QUEUE ID");
    if (bid || on_complete || on_success || retention)
        return usage_error("%s", "--id, --on-complete, --on-success and --retention go with --create");
    if ((add != NULL) != (payload != NULL) || (job_id && !add))
        return usage_error("%s", "--add QUEUE goes with --payload (and --job-id)");
    if ((add != NULL) + seal + (await != NULL) + del > 1)
        return usage_error("%s", "one of --add, --seal, --await, --delete");
    if (force && !del) return usage_error("%s", "--force goes with --delete");
    if (cli_open(t, pos[0])) return 1;
    if (del)
        return send_and_wait(t, rjq_batch_delete(t->q, pos[1], force, on_batch_deleted, t));
    if (seal) return send_and_wait(t, rjq_batch_seal(t->q, pos[1], on_batch_sealed, t));
    if (await)
        return send_and_wait(t, rjq_batch_await(t->q, pos[1], (long)wait_ms, on_batch_info, t));
    if (add) {
        rjq_queue *mq;
        int orc = rjq_queue_open(t->c, add, NULL, &mq);
        if (orc != RJQ_OK) return sent(t, orc);
        rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
        o.id = job_id;
        return send_and_wait(t, rjq_batch_enqueue(t->q, pos[1], mq, payload, strlen(payload), &o,
                                                  on_enqueued, t));
    }
    return send_and_wait(t, rjq_batch_get(t->q, pos[1], on_batch_info, t));
}

/* rjq batches QUEUE [--state S] [--limit N]: the queue's batches, newest
 * first, paged through rjq_batch_list until N were listed (or none is
 * left). Plain: a line per batch "ID STATE FINISHED/TOTAL completed C dead D
 * cancelled X"; --json: an array of batch objects (as rjq batch's). */
static void on_batches(rjq_client *c, int status, const rjq_batch_info *b, size_t n,
                       const char *next, void *data) {
    cli *t = data;
    (void)c;
    free(t->after);
    t->after = NULL;
    t->last_page = 0;
    if (!reply_ok(t, status)) return;
    for (size_t i = 0; i < n; i++, t->count++) {
        const rjq_batch_info *e = rjq_batch_info_get(b, i);
        if (t->json) {
            fputs(t->count ? "," : "", stdout);
            print_field(t, 1, "batch", e->id, strlen(e->id));
            print_field(t, 0, "state", e->state, strlen(e->state));
            printf(",\"sealed\":%s", e->sealed ? "true" : "false");
            print_num(t, 0, "total", e->total);
            print_num(t, 0, "completed", e->completed);
            print_num(t, 0, "dead", e->dead);
            print_num(t, 0, "cancelled", e->cancelled);
            print_time(t, "created_ms", e->created_ms);
            print_time(t, "ended_ms", e->ended_ms);
            putchar('}');
        } else {
            print_bytes(t, e->id, strlen(e->id));
            printf(" %s %lld/%lld completed %lld dead %lld cancelled %lld%s\n", e->state,
                   e->completed + e->dead + e->cancelled, e->total, e->completed,
                   e->dead, e->cancelled, e->sealed ? "" : " (not sealed)");
        }
    }
    if (next && (t->after = strdup(next)) == NULL) {
        report(t, RJQ_ENOMEM, "out of memory");
        return;
    }
    t->last_page = 1;
}

static int cmd_batches(cli *t, int argc, char **argv) {
    char *pos[1];
    const char *state = NULL, *limit = NULL;
    const optdef defs[] = {{"--state", &state, NULL}, {"--limit", &limit, NULL},
                           {"--json", NULL, &t->json}, {NULL, NULL, NULL}};
    long long lim = 100;
    int rc = parse_args(argc, argv, defs, pos, 1, 1, NULL);
    if (rc || (rc = parse_ll("--limit", limit, 1, LLONG_MAX, &lim))) return rc;
    if (state && strcmp(state, "pending") && strcmp(state, "completed") && strcmp(state, "dead"))
        return usage_error("unknown batch state '%s' (pending, completed, dead)", state);
    if (cli_open(t, pos[0])) return 1;
    if (t->json) putchar('[');
    t->count = 0;
    do {
        long page = lim - t->count > 1000 ? 1000 : (long)(lim - t->count);
        char *after = t->after;
        t->after = NULL;
        rc = send_and_wait(t, rjq_batch_list(t->q, state, after, page, on_batches, t));
        free(after);
    } while (rc == 0 && !t->failed && t->last_page && t->after && t->count < lim);
    if (t->json && rc == 0 && !t->failed) puts("]");
    free(t->after);
    t->after = NULL;
    return rc || t->failed;
}

/* ---- job ---------------------------------------------------------------------- */

/* rjq job's dependencies and dependents (rjq_queue_get_job_deps: one
 * script call for a job without dependencies), read before the job and kept (copies) to be
 * printed with it: an error prints nothing on stdout. */
typedef struct jobdeps {
    size_t n, nd;          /* dependencies, dependents */
    char **f;              /* n * 5: queue, id, state, counted, error (or NULL) */
    char **d;              /* nd * 2: queue, id */
    const char *policy;    /* static; NULL when n is 0 */
} jobdeps;

static jobdeps the_jobdeps;

static void jobdeps_free(jobdeps *j) {
    for (size_t i = 0; i < 5 * j->n; i++) free(j->f[i]);
    for (size_t i = 0; i < 2 * j->nd; i++) free(j->d[i]);
    free(j->f);
    free(j->d);
    memset(j, 0, sizeof *j);
}

/* A copy of s (NULL: NULL); *bad set when memory ran out. */
static char *dup_or_null(const char *s, int *bad) {
    char *r = s ? strdup(s) : NULL;
    if (s && r == NULL) *bad = 1;
    return r;
}

/* Both, from one rjq_queue_get_job_deps. */
static void on_job_deps(rjq_client *c, int status, const rjq_dep_outcome *deps, size_t n,
                        const rjq_dep *list, size_t nd, void *data) {
    cli *t = data;
    jobdeps *j = &the_jobdeps;
    int bad = 0;
    (void)c;
    if (!reply_ok_why(t, status, "dependencies")) return;
    if (n && (j->f = calloc(5 * n, sizeof *j->f)) == NULL) bad = 1;
    for (size_t i = 0; !bad && i < n; i++) {
        const rjq_dep_outcome *o = rjq_dep_outcome_get(deps, i);
        j->f[5 * i] = dup_or_null(o->queue, &bad);
        j->f[5 * i + 1] = dup_or_null(o->id, &bad);
        j->f[5 * i + 2] = dup_or_null(o->state, &bad);
        j->f[5 * i + 3] = dup_or_null(o->counted, &bad);
        j->f[5 * i + 4] = dup_or_null(o->error, &bad);
        j->n = i + 1;
        j->policy = o->policy;
    }
    if (!bad && nd && (j->d = calloc(2 * nd, sizeof *j->d)) == NULL) bad = 1;
    for (size_t i = 0; !bad && i < nd; i++) {
        j->d[2 * i] = dup_or_null(rjq_dep_get(list, i)->queue, &bad);
        j->d[2 * i + 1] = dup_or_null(rjq_dep_get(list, i)->id, &bad);
        j->nd = i + 1;
    }
    if (bad) report(t, RJQ_ENOMEM, "dependencies");
}

/* The kept dependencies and dependents: plain, an "after_policy P" line
 * (when it has dependencies), a "dependency QUEUE ID STATE counted C
 * [error TEXT]" line each, a "dependent QUEUE ID" line each; JSON,
 * "after_policy" and "dependencies":[{queue, id, state, counted, error}],
 * "dependents":[{queue, id}]. None: nothing, as before (as the headers). */
static void print_jobdeps(const cli *t, const jobdeps *j) {
    if (t->json) {
        if (j->n) {
            fputs(",\"after_policy\":", stdout);
            print_json_string(j->policy, strlen(j->policy));
            fputs(",\"dependencies\":[", stdout);
        }
        for (size_t i = 0; i < j->n; i++) {
            char **f = j->f + 5 * i;
            if (i) putchar(',');
            print_field(t, 1, "queue", f[0], strlen(f[0]));
            print_field(t, 0, "id", f[1], strlen(f[1]));
            print_field(t, 0, "state", f[2], strlen(f[2]));
            print_field(t, 0, "counted", f[3], strlen(f[3]));
            print_field(t, 0, "error", f[4], f[4] ? strlen(f[4]) : 0);
            putchar('}');
        }
        if (j->n) putchar(']');
        if (j->nd) fputs(",\"dependents\":[", stdout);
        for (size_t i = 0; i < j->nd; i++) {
            if (i) putchar(',');
            print_field(t, 1, "queue", j->d[2 * i], strlen(j->d[2 * i]));
            print_field(t, 0, "id", j->d[2 * i + 1], strlen(j->d[2 * i + 1]));
            putchar('}');
        }
        if (j->nd) putchar(']');
        return;
    }
    if (j->policy) printf("after_policy %s\n", j->policy);
    for (size_t i = 0; i < j->n; i++) {
        char **f = j->f + 5 * i;
        fputs("dependency ", stdout);
        print_bytes(t, f[0], strlen(f[0]));
        putchar(' ');
        print_bytes(t, f[1], strlen(f[1]));
        printf(" %s counted %s", f[2], f[3]);
        if (f[4]) {
            fputs(" error ", stdout);
            print_bytes(t, f[4], strlen(f[4]));
        }
        putchar('\n');
    }
    for (size_t i = 0; i < j->nd; i++) {
        fputs("dependent ", stdout);
        print_bytes(t, j->d[2 * i], strlen(j->d[2 * i]));
        putchar(' ');
        print_bytes(t, j->d[2 * i + 1], strlen(j->d[2 * i + 1]));
        putchar('\n');
    }
}

static void on_job(rjq_client *c, int status, const rjq_job_info *j, void *data) {
    cli *t = data;
    (void)c;
    if (!reply_ok(t, status)) return;
    print_field(t, 1, "id", j->id, strlen(j->id));
    print_field(t, 0, "state", j->state, strlen(j->state));
    print_num(t, 0, "attempts", j->attempts);
    print_num(t, 0, "max_attempts", j->max_attempts);
    print_field(t, 0, "payload", j->payload, j->payload_len);
    print_field(t, 0, "result", j->result, j->result_len);
    print_field(t, 0, "error", j->error, j->error ? strlen(j->error) : 0);
    print_time(t, "enqueued_ms", j->enqueued_ms);
    print_time(t, "started_ms", j->started_ms);
    print_time(t, "ended_ms", j->ended_ms);
    /* its headers (a batch's completion job's rjq.batch...): a "header KEY
     * VALUE" line each, "headers":{...} in JSON; none: nothing, as before */
    if (j->headers && j->nheaders) {
        if (t->json) fputs(",\"headers\":{", stdout);
        for (size_t i = 0; i < j->nheaders; i++) {
            const rjq_header *h = rjq_header_get(j->headers, i);
            const char *k = h->key ? h->key : "";
            const char *v = h->value ? h->value : "";
            if (t->json) {
                if (i) putchar(',');
                print_json_string(k, strlen(k));
                putchar(':');
                print_json_string(v, strlen(v));
            } else {
                fputs("header ", stdout);
                print_bytes(t, k, strlen(k));
                putchar(' ');
                print_bytes(t, v, strlen(v));
                putchar('\n');
            }
        }
        if (t->json) putchar('}');
    }
    print_jobdeps(t, &the_jobdeps);
    end_object(t);
}

/* rjq job QUEUE ID: its dependencies and dependents read first (one call
 * on the job's queue, then, for a job with dependencies, their queues' at
 * once: a round trip per master), then the job, printed with them. */
static int cmd_job(cli *t, int argc, char **argv) {
    char *pos[2];
    const optdef defs[] = {{"--json", NULL, &t->json}, {NULL, NULL, NULL}};
    int rc = parse_args(argc, argv, defs, pos, 2, 2, NULL);
    if (rc) return rc;
    if (cli_open(t, pos[0])) return 1;
    rc = sent(t, rjq_queue_get_job_deps(t->q, pos[1], on_job_deps, t));
    if (!rc || t->pending) rc = wait_replies(t, 0) || rc;
    if (!rc) rc = send_and_wait(t, rjq_queue_get_job(t->q, pos[1], on_job, t));
    jobdeps_free(&the_jobdeps);
    return rc;
}

/* ---- dead ---------------------------------------------------------------------- */

/* Ids: one per line, or (--json) a JSON array of strings. */
static void on_dead(rjq_client *c, int status, const char *const *ids, size_t n, void *data) {
    cli *t = data;
    (void)c;
    if (!reply_ok(t, status)) return;
    if (!t->json) {
        for (size_t i = 0; i < n; i++) puts(ids[i]);
        return;
    }
    putchar('[');
    for (size_t i = 0; i < n; i++) {
        if (i) putchar(',');
        print_json_string(ids[i], strlen(ids[i]));
    }
    puts("]");
}

static int cmd_dead(cli *t, int argc, char **argv) {
    char *pos[1];
    const char *offset = NULL, *limit = NULL;
    const optdef defs[] = {{"--offset", &offset, NULL}, {"--limit", &limit, NULL},
                           {"--json", NULL, &t->json}, {NULL, NULL, NULL}};
    long long off = 0, lim = DEAD_LIMIT;
    int rc = parse_args(argc, argv, defs, pos, 1, 1, NULL);
    if (rc || (rc = parse_ll("--offset", offset, 0, RJQ_JOBS_OFFSET_MAX, &off)) ||
        (rc = parse_ll("--limit", limit, 1, RJQ_JOBS_PAGE_MAX, &lim)))
        return rc;
    if (cli_open(t, pos[0])) return 1;
    return send_and_wait(t, rjq_queue_list_dead(t->q, (long)off, (long)lim, on_dead, t));
}

/* rjq queues [--after NAME] [--limit N]: the registry's names, a page at
 * a time until the limit (default: all). */
/* Names kept back to back (any bytes, each with its length). */
typedef struct namelist {
    char *buf;
    size_t used, cap;
    size_t *off, *len;
    size_t n, capn;
} namelist;

static int namelist_add(namelist *l, const char *p, size_t len) {
    if (l->n == l->capn) {
        size_t capn = l->capn ? 2 * l->capn : 256;
        size_t *off = realloc(l->off, capn * sizeof *off);
        if (off) l->off = off;
        size_t *lens = off ? realloc(l->len, capn * sizeof *lens) : NULL;
        if (lens == NULL) return RJQ_ENOMEM;
        l->len = lens;
        l->capn = capn;
    }
    if (l->used + len > l->cap) {
        size_t cap = l->cap ? l->cap : 4096;
        while (cap < l->used + len) cap *= 2;
        char *b = realloc(l->buf, cap);
        if (b == NULL) return RJQ_ENOMEM;
        l->buf = b;
        l->cap = cap;
    }
    if (len) memcpy(l->buf + l->used, p, len);
    l->off[l->n] = l->used;
    l->len[l->n++] = len;
    l->used += len;
    return RJQ_OK;
}

static void namelist_free(namelist *l) {
    free(l->buf);
    free(l->off);
    free(l->len);
}

/* A page of names: kept (the whole list is printed once complete, so an
 * error prints nothing on stdout), the last one noted for the next page. */
static void on_queues(rjq_client *c, int status, const char *const *names, size_t n, void *data) {
    cli *t = data;
    (void)c;
    if (!reply_ok(t, status)) return;
    for (size_t i = 0; i < n && !t->failed; i++)
        if (namelist_add(t->names, names[i], strlen(names[i])) != RJQ_OK) report(t, RJQ_ENOMEM, "queues");
    free(t->after);
    t->after = n ? strdup(names[n - 1]) : NULL;
    if (n && t->after == NULL) report(t, RJQ_ENOMEM, "queues");
    t->last_page = (long long)n;
}

/* Up to lim names of the registry after `after` (NULL: from the first)
 * into names: its pages, each after the last name seen (t->after, freed by
 * the caller). Returns 0 or 1 (reported). */
static int list_queues(cli *t, namelist *names, const char *after, long long lim) {
    t->names = names;
    t->after = after ? strdup(after) : NULL;
    long long listed = 0;
    do {
        t->last_page = 0;
        long page = lim - listed < RJQ_JOBS_PAGE_MAX ? (long)(lim - listed) : RJQ_JOBS_PAGE_MAX;
        if (send_and_wait(t, rjq_client_list_queues(t->c, t->after, page, on_queues, t)) || t->failed)
            return 1;
        listed += t->last_page;
    } while (t->last_page == RJQ_JOBS_PAGE_MAX && listed < lim);
    return 0;
}

/* A sharded queue is one queue to the tool (README "Sharded queues"): the
 * registry also names its shards (their workers and enqueues register
 * them), so a listed name "<B>~<rest>" whose B is listed too is left out
 * when B's layout (B opened: its declaration read) names it a shard of
 * B. hide[i] set for those. Returns 0 or 1 (reported). */
static int hide_shards(cli *t, const namelist *names, char *hide) {
    for (size_t i = 0; i < names->n; i++) {
        const char *p = names->buf + names->off[i];
        size_t blen = names->len[i], b = 0;
        while (blen > 0 && p[blen - 1] != '~') blen--;
        if (blen-- <= 1 || hide[i]) continue; /* (no '~', or nothing before it) */
        while (b < names->n && (names->len[b] != blen || memcmp(names->buf + names->off[b], p,
                                                                 blen) != 0))
            b++;
        if (b == names->n) continue; /* (its base not listed: shown) */
        char *base = malloc(blen + 1);
        if (base) memcpy(base, p, blen), base[blen] = '\0';
        if (base == NULL) {
            report(t, RJQ_ENOMEM, "queues");
            return 1;
        }
        t->q = NULL;
        int rc = send_and_wait(t, rjq_queue_open_async(t->c, base, NULL, on_queue_opened, t));
        free(base);
        if (rc || t->q == NULL) return 1;
        int n = rjq_queue_count_shards(t->q);
        for (int k = 0; n > 1 && k < n; k++) {
            const char *sn = rjq_queue_get_name(rjq_queue_get_shard(t->q, k));
            for (size_t j = 0; j < names->n; j++)
                if (names->len[j] == strlen(sn) && memcmp(names->buf + names->off[j], sn,
                                                          names->len[j]) == 0)
                    hide[j] = 1;
        }
        rjq_queue_close(t->q);
        t->q = NULL;
    }
    return 0;
}

static int cmd_queues(cli *t, int argc, char **argv) {
    const char *after = NULL, *limit = NULL;
    const optdef defs[] = {{"--after", &after, NULL}, {"--limit", &limit, NULL}, {NULL, NULL, NULL}};
    long long lim = LLONG_MAX;
    int rc = parse_args(argc, argv, defs, NULL, 0, 0, NULL);
    if (rc || (rc = parse_ll("--limit", limit, 1, LLONG_MAX, &lim))) return rc;
    if (cli_open(t, NULL)) return 1;
    namelist names = {0};
    rc = list_queues(t, &names, after, lim);
    char *hide = rc == 0 ? calloc(names.n + 1, 1) : NULL;
    if (rc == 0 && hide == NULL) {
        report(t, RJQ_ENOMEM, "queues");
        rc = 1;
    }
    if (rc == 0) rc = hide_shards(t, &names, hide);
    if (rc == 0) { /* the list, whole */
        if (t->json) putchar('[');
        for (size_t i = 0, shown = 0; i < names.n; i++) {
            const char *p = names.buf + names.off[i];
            size_t len = names.len[i];
            if (hide[i]) continue;
            if (t->json) {
                if (shown++) putchar(',');
                print_json_string(p, len);
            } else {
                print_bytes(t, p, len);
                putchar('\n');
            }
        }
        if (t->json) puts("]");
    }
    free(hide);
    namelist_free(&names);
    free(t->after);
    t->after = NULL;
    return rc;
}

/* rjq processes [--offset N] [--limit N]: the processes with workers,
 * one page (processes are few: the default page is 1000). */
static void on_processes(rjq_client *c, int status, const rjq_process *list, size_t n,
                         void *data) {
    cli *t = data;
    (void)c;
    if (!reply_ok(t, status)) return;
    if (t->json) putchar('[');
    for (size_t i = 0; i < n; i++) {
        const rjq_process *p = rjq_process_get(list, i);
        if (t->json) {
            printf("%s{\"id\":", i ? "," : "");
            print_json_string(p->id, strlen(p->id));
            fputs(",\"host\":", stdout);
            print_json_string(p->host, strlen(p->host));
            printf(",\"pid\":%ld,\"started_ms\":%lld,\"name\":", p->pid, p->started_ms);
            print_json_string(p->name, strlen(p->name));
            printf(",\"alive_until_ms\":%lld,\"queues\":[", p->alive_until_ms);
        } else {
            printf("%s %s pid %ld%s%s started %lld\n", p->id, p->host, p->pid,
                   p->name[0] ? " name " : "", p->name, p->started_ms);
        }
        for (size_t k = 0; k < p->nqueues; k++) {
            const rjq_process_queue *q = rjq_process_queue_get(p->queues, k);
            if (t->json) {
                printf("%s{\"queue\":", k ? "," : "");
                print_json_string(q->queue, strlen(q->queue));
                printf(",\"concurrency\":%d,\"running\":%d,\"jobs\":[", q->concurrency,
                       q->running);
            } else {
                printf("  %s concurrency %d running %d%s", q->queue, q->concurrency, q->running,
                       q->njobs ? " jobs" : "");
            }
            for (size_t j = 0; j < q->njobs; j++) {
                if (t->json) {
                    if (j) putchar(',');
                    print_json_string(q->jobs[j], strlen(q->jobs[j]));
                } else {
                    printf(" %s", q->jobs[j]);
                }
            }
            fputs(t->json ? "]}" : "\n", stdout);
        }
        if (t->json) fputs("]}", stdout);
    }
    if (t->json) puts("]");
}

static int cmd_processes(cli *t, int argc, char **argv) {
    const char *offset = NULL, *limit = NULL;
    const optdef defs[] = {{"--offset", &offset, NULL}, {"--limit", &limit, NULL},
                           {NULL, NULL, NULL}};
    long long off = 0, lim = RJQ_JOBS_PAGE_MAX;
    int rc = parse_args(argc, argv, defs, NULL, 0, 0, NULL);
    if (rc || (rc = parse_ll("--offset", offset, 0, RJQ_JOBS_OFFSET_MAX, &off)) ||
        (rc = parse_ll("--limit", limit, 1, RJQ_JOBS_PAGE_MAX, &lim)))
        return rc;
    if (cli_open(t, NULL)) return 1;
    return send_and_wait(t, rjq_client_list_processes(t->c, (long)off, (long)lim, on_processes, t));
}

/* rjq cluster [--interval MS]: each master (address, slot ranges,
 * replicas), its share of the work (commands and CPU from INFO
 * commandstats and INFO cpu: since each server started, or over
 * --interval) and its queues (the registry's names whose slot it serves). */
#define CLUSTER_MAX 1024 /* masters shown */

typedef struct master_row {
    char *address;
    int *ranges;
    size_t nranges;
    char **replicas;
    size_t nreplicas;
    long long calls[2]; /* INFO commandstats' calls summed: before, after */
    double cpu[2];      /* used_cpu_sys + used_cpu_user, s */
    int have[2];
    namelist queues;
} master_row;

typedef struct cluster_view {
    cli *t;
    master_row *m;
    size_t n;
    int sample;  /* 0 or 1: which sample the replies fill */
    int cluster; /* slot ranges were given */
    int bad;     /* a master's answer was an error (reported) */
} cluster_view;

static master_row *row_of(cluster_view *v, const char *address) {
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->m[i].address, address) == 0) return &v->m[i];
    return NULL;
}

/* Keep the masters as the first reply lists them (copied). */
static int rows_take(cluster_view *v, const rjq_master *list, size_t n) {
    if (n > CLUSTER_MAX) n = CLUSTER_MAX;
    v->m = calloc(n, sizeof *v->m);
    if (v->m == NULL) return RJQ_ENOMEM;
    for (size_t i = 0; i < n; i++, v->n++) {
        master_row *r = &v->m[i];
        const rjq_master *m = rjq_master_get(list, i);
        r->address = strdup(m->address);
        r->ranges = malloc((2 * m->nranges + 1) * sizeof *r->ranges);
        r->replicas = calloc(m->nreplicas + 1, sizeof *r->replicas);
        if (!r->address || !r->ranges || !r->replicas) return RJQ_ENOMEM;
        if (m->nranges)
            memcpy(r->ranges, m->ranges, 2 * m->nranges * sizeof *r->ranges);
        r->nranges = m->nranges;
        for (size_t k = 0; k < m->nreplicas; k++, r->nreplicas++)
            if ((r->replicas[k] = strdup(m->replicas[k])) == NULL) return RJQ_ENOMEM;
        if (r->nranges) v->cluster = 1;
    }
    return RJQ_OK;
}

static void rows_free(cluster_view *v) {
    for (size_t i = 0; i < v->n; i++) {
        master_row *r = &v->m[i];
        free(r->address);
        free(r->ranges);
        for (size_t k = 0; k < r->nreplicas; k++) free(r->replicas[k]);
        free(r->replicas);
        namelist_free(&r->queues);
    }
    free(v->m);
}

/* The sum of "calls=" over INFO commandstats' lines. */
static int commandstats_calls(const char *text, long long *out) {
    long long sum = 0;
    for (const char *p = strstr(text, "cmdstat_"); p; p = strstr(p + 1, "\ncmdstat_")) {
        const char *c = strstr(p, "calls=");
        const char *eol = strchr(p + 1, '\n');
        if (c == NULL || (eol && c > eol)) return -1;
        char *end;
        long long n = strtoll(c + 6, &end, 10);
        if (end == c + 6 || n < 0 || n > LLONG_MAX - sum) return -1;
        sum += n;
    }
    *out = sum;
    return 0;
}

/* "field:<number>" of INFO text. */
static int info_double(const char *text, const char *field, double *out) {
    size_t flen = strlen(field);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, field, flen) != 0 || p[flen] != ':') continue;
        char *end;
        double d = strtod(p + flen + 1, &end);
        if (end == p + flen + 1 || !(d >= 0 && d < 1e15)) return -1;
        *out = d;
        return 0;
    }
    return -1;
}

static void on_cluster_info(rjq_client *c, int status, const rjq_master *list, size_t n,
                            void *data) {
    cluster_view *v = data;
    cli *t = v->t;
    (void)c;
    if (!reply_ok(t, status)) return;
    if (v->m == NULL && rows_take(v, list, n) != RJQ_OK) {
        report(t, RJQ_ENOMEM, "cluster");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const rjq_master *m = rjq_master_get(list, i);
        master_row *r = row_of(v, m->address);
        if (r == NULL) continue; /* (a master that came meanwhile: the next run shows it) */
        if (m->status != RJQ_OK) { /* (reported; the other masters are shown) */
            fprintf(stderr, "rjq: cluster: %s: %s (%s)\n", m->address,
                    rjq_strerror(m->status),
                    m->reply ? m->reply : rjq_client_get_errmsg(t->c));
            v->bad = 1;
            continue;
        }
        long long calls;
        double sys, user;
        const char *text = m->reply ? m->reply : "";
        int ok = 1;
        if (strstr(text, "# Commandstats")) {
            if ((ok = commandstats_calls(text, &calls) == 0)) r->calls[v->sample] = calls;
        } else if (strstr(text, "# CPU")) {
            ok = info_double(text, "used_cpu_sys", &sys) == 0 &&
                 info_double(text, "used_cpu_user", &user) == 0;
            if (ok) r->cpu[v->sample] = sys + user;
        } else {
            ok = 0;
        }
        if (!ok) {
            fprintf(stderr, "rjq: cluster: %s: %s (INFO commandstats/cpu unreadable)\n",
                    m->address, rjq_strerror(RJQ_EPROTO));
            v->bad = 1;
            continue;
        }
        r->have[v->sample]++; /* (2: both sections) */
    }
}

/* Does r serve slot? */
static int row_serves(const master_row *r, int slot) {
    if (r->nranges == 0) return 1; /* not a cluster: the one server */
    for (size_t k = 0; k < r->nranges; k++)
        if (slot >= r->ranges[2 * k] && slot <= r->ranges[2 * k + 1]) return 1;
    return 0;
}

static void print_cluster(cli *t, cluster_view *v, int delta) {
    long long calls_all = 0;
    double cpu_all = 0;
    for (size_t i = 0; i < v->n; i++) {
        master_row *r = &v->m[i];
        if (r->have[0] < 2 || (delta && r->have[1] < 2)) continue;
        calls_all += delta ? r->calls[1] - r->calls[0] : r->calls[0];
        cpu_all += delta ? r->cpu[1] - r->cpu[0] : r->cpu[0];
    }
    if (t->json) putchar('[');
    else if (!v->cluster)
        printf("not a cluster: one server, every queue is on it\n");
    for (size_t i = 0; i < v->n; i++) {
        master_row *r = &v->m[i];
        int have = r->have[0] == 2 && (!delta || r->have[1] == 2);
        long long calls = have ? (delta ? r->calls[1] - r->calls[0] : r->calls[0]) : 0;
        double cpu = have ? (delta ? r->cpu[1] - r->cpu[0] : r->cpu[0]) : 0;
        double cs = calls_all ? 100.0 * (double)calls / (double)calls_all : 0;
        double ps = cpu_all > 0 ? 100.0 * cpu / cpu_all : 0;
        if (t->json) {
            printf("%s{\"address\":", i ? "," : "");
            print_json_string(r->address, strlen(r->address));
            fputs(",\"slots\":[", stdout);
            for (size_t k = 0; k < r->nranges; k++)
                printf("%s[%d,%d]", k ? "," : "", r->ranges[2 * k], r->ranges[2 * k + 1]);
            fputs("],\"replicas\":[", stdout);
            for (size_t k = 0; k < r->nreplicas; k++) {
                if (k) putchar(',');
                print_json_string(r->replicas[k], strlen(r->replicas[k]));
            }
            putchar(']');
            if (have)
                printf(",\"commands\":%lld,\"commands_share\":%.1f,\"cpu_s\":%.3f,"
                       "\"cpu_share\":%.1f",
                       calls, cs, cpu, ps);
            fputs(",\"queues\":[", stdout);
        } else {
            printf("%s", r->address);
            if (r->nranges) {
                fputs(" slots", stdout);
                for (size_t k = 0; k < r->nranges; k++) {
                    if (r->ranges[2 * k] == r->ranges[2 * k + 1])
                        printf("%s%d", k ? "," : " ", r->ranges[2 * k]);
                    else
                        printf("%s%d-%d", k ? "," : " ", r->ranges[2 * k], r->ranges[2 * k + 1]);
                }
            }
            if (r->nreplicas) {
                fputs(" replicas", stdout);
                for (size_t k = 0; k < r->nreplicas; k++) printf(" %s", r->replicas[k]);
            }
            putchar('\n');
            if (have)
                printf("  work%s: %lld commands (%.1f%%), cpu %.2f s (%.1f%%)\n",
                       delta ? " over the interval" : " since start", calls, cs, cpu, ps);
            printf("  queues (%zu):", r->queues.n);
        }
        for (size_t k = 0; k < r->queues.n; k++) {
            const char *p = r->queues.buf + r->queues.off[k];
            size_t len = r->queues.len[k];
            if (t->json) {
                if (k) putchar(',');
                print_json_string(p, len);
            } else {
                putchar(' ');
                print_bytes(t, p, len);
            }
        }
        fputs(t->json ? "]}" : "\n", stdout);
    }
    if (t->json) puts("]");
}

static void on_cluster_tick(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    ((cli *)arg)->pending--;
}

/* One sample of every master's work: its commands, then its CPU (two
 * INFO calls: before Redis 7, INFO takes one section). */
static int cluster_sample(cli *t, cluster_view *v) {
    const char *stats[] = {"INFO", "commandstats"}, *cpu[] = {"INFO", "cpu"};
    if (send_and_wait(t, rjq_client_send_to_masters(t->c, 2, stats, NULL, on_cluster_info, v))) return 1;
    return send_and_wait(t, rjq_client_send_to_masters(t->c, 2, cpu, NULL, on_cluster_info, v));
}

static int cmd_cluster(cli *t, int argc, char **argv) {
    const char *interval = NULL;
    const optdef defs[] = {{"--interval", &interval, NULL}, {NULL, NULL, NULL}};
    long long ms = 0;
    int rc = parse_args(argc, argv, defs, NULL, 0, 0, NULL);
    if (rc || (rc = parse_ll("--interval", interval, 1, 3600000, &ms))) return rc;
    if (cli_open(t, NULL)) return 1;
    cluster_view v = {0};
    v.t = t;
    rc = cluster_sample(t, &v);
    if (rc == 0 && ms > 0) { /* the second sample, ms later: the work between */
        struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
        evtimer_del(t->deadline);
        t->pending++;
        event_base_once(t->base, -1, EV_TIMEOUT, on_cluster_tick, t, &tv);
        while (t->pending > 0 && event_base_loop(t->base, EVLOOP_ONCE) == 0) {}
        v.sample = 1;
        rc = cluster_sample(t, &v);
    }
    /* the queues: the registry's names, each under the master serving its slot */
    namelist names = {0};
    if (rc == 0 && !t->failed) rc = list_queues(t, &names, NULL, LLONG_MAX);
    for (size_t i = 0; rc == 0 && i < names.n; i++) {
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)names.len[i], names.buf + names.off[i]);
        rjq_queue *q = NULL;
        if (rjq_queue_open(t->c, name, NULL, &q) != RJQ_OK) continue; /* not a queue's name */
        int slot = rjq_queue_get_slot(q);
        rjq_queue_close(q);
        for (size_t k = 0; k < v.n; k++)
            if (row_serves(&v.m[k], slot)) {
                if (namelist_add(&v.m[k].queues, names.buf + names.off[i], names.len[i]) != RJQ_OK)
                    rc = 1, report(t, RJQ_ENOMEM, "cluster");
                break;
            }
    }
    if (rc == 0 && !t->failed) print_cluster(t, &v, ms > 0);
    namelist_free(&names);
    free(t->after);
    t->after = NULL;
    rows_free(&v);
    return rc || t->failed || v.bad;
}

/* rjq top [--interval MS]: the live view (top.c). */
static int cmd_top(cli *t, int argc, char **argv) {
    const char *interval = NULL;
    const optdef defs[] = {{"--interval", &interval, NULL}, {NULL, NULL, NULL}};
    long long ms = 1000;
    int rc = parse_args(argc, argv, defs, NULL, 0, 0, NULL);
    if (rc || (rc = parse_ll("--interval", interval, 50, 3600000, &ms))) return rc;
#ifdef RJQ_HAVE_TOP
    if (cli_open(t, NULL)) return 1;
    rjq_client *c = t->c;
    t->c = NULL; /* top_run frees it */
    return top_run(t->base, c, (long)ms);
#else
    fprintf(stderr, "rjq: top: this rjq was built without ncurses\n");
    return 1;
#endif
}

/* rjq serve [--listen ADDR:PORT] [--queues PATTERN] [--read-only]
 * [--token-file F] [--max-body BYTES] [--wait-max MS] [--max-queues N]
 * [--max-requests N] [--max-waiting N] [--request-timeout MS] [--queue-idle MS]
 * [--log-format text|json] [--access-log] [--metrics-shards] [--metrics-groups K]: the HTTP API, the dashboard and
 * /metrics (serve/). */
static int cmd_serve(cli *t, int argc, char **argv) {
    const char *listen = NULL, *queues = NULL, *token = NULL, *body = NULL, *wait = NULL,
               *maxq = NULL, *maxr = NULL, *maxw = NULL, *rto = NULL, *idle = NULL,
               *logf = NULL, *mgroups = NULL;
    int read_only = 0, demo = 0, access_log = 0, metrics_shards = 0;
    const optdef defs[] = {{"--listen", &listen, NULL},     {"--queues", &queues, NULL},
                           {"--demo", NULL, &demo},
                           {"--token-file", &token, NULL},  {"--read-only", NULL, &read_only},
                           {"--max-body", &body, NULL},     {"--wait-max", &wait, NULL},
                           {"--max-queues", &maxq, NULL},   {"--max-requests", &maxr, NULL},
                           {"--max-waiting", &maxw, NULL},  {"--request-timeout", &rto, NULL},
                           {"--queue-idle", &idle, NULL},
                           {"--log-format", &logf, NULL},   {"--access-log", NULL, &access_log},
                           {"--metrics-shards", NULL, &metrics_shards},
                           {"--metrics-groups", &mgroups, NULL},
                           {NULL, NULL, NULL}};
    long long mb = 16 << 20, wm = 600000, mq = 1000, mr = 10000, mw = 0, rt = 30000, qi = 60000,
              mg = 10;
    int rc = parse_args(argc, argv, defs, NULL, 0, 0, NULL);
    if (rc || (rc = parse_ll("--max-body", body, 1, 512LL << 20, &mb)) ||
        (rc = parse_ll("--wait-max", wait, 1, 86400000, &wm)) ||
        (rc = parse_ll("--max-queues", maxq, 1, 100000, &mq)) ||
        (rc = parse_ll("--max-requests", maxr, 1, 1000000, &mr)) ||
        (rc = parse_ll("--max-waiting", maxw, 0, LONG_MAX, &mw)) ||
        (rc = parse_ll("--request-timeout", rto, 0, 86400000, &rt)) ||
        (rc = parse_ll("--queue-idle", idle, 100, 86400000, &qi)) ||
        (rc = parse_ll("--metrics-groups", mgroups, 0, 100, &mg)))
        return rc;
    if (queues && queues[0] == '\0') return usage_error("--queues %s: empty pattern", queues);
    log_format lf = LOG_TEXT;
    if (logf && log_format_parse(logf, &lf) != 0)
        return usage_error("--log-format %s: expected text or json", logf);
#ifdef RJQ_HAVE_SERVE
    log_init(lf, "rjq serve", 0);
    serve_options so = {0};
    so.listen = listen ? listen : "127.0.0.1:8080";
    so.queues = queues;
    so.token_file = token;
    so.read_only = read_only;
    so.demo = demo;
    so.max_body = (long)mb;
    so.wait_max_ms = (long)wm;
    so.max_queues = (long)mq;
    so.max_requests = (long)mr;
    so.max_waiting = (long)mw;
    so.request_timeout_ms = (long)rt;
    so.queue_idle_ms = (long)qi;
    so.access_log = access_log;
    so.metrics_shards = metrics_shards;
    so.metrics_groups = (int)mg;
    rjq_client_options o;
    client_options(t, &o);
    o.name = "rjq-serve";
    o.max_payload = (size_t)mb; /* the body limit is the result limit too */
    o.connect_timeout_ms = 5000;
    /* epoll changes made and undone in one loop pass (evhttp toggles its
     * connections' events per request) cost no system call: +4% requests/s */
    struct event_config *cfg = event_config_new();
    if (cfg) event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    t->base = cfg ? event_base_new_with_config(cfg) : NULL;
    if (cfg) event_config_free(cfg);
    if (t->base == NULL) {
        report(t, RJQ_ENOMEM, "cannot create the event loop");
        return 1;
    }
    return serve_run(t->base, &o, &so);
#else
    fprintf(stderr, "rjq: serve: this rjq was built without jansson (libjansson-dev)\n");
    return 1;
#endif
}

/* rjq jobs QUEUE STATE [--offset N] [--limit N]: one id per line. */
/* rjq jobs QUEUE ready|delayed|active (text): each id, a group job's
 * followed by its group ("<id> group <name>"), read from its record
 * (rjq_queue_get_job, the header rjq.group): one read per id, sent
 * together. A job gone meanwhile is printed as it was listed. */
typedef struct job_row {
    cli *t;
    char *id, *group;
} job_row;

typedef struct jobs_page {
    job_row *rows;
    size_t n;
    int ok;
} jobs_page;

static void on_row_info(rjq_client *c, int status, const rjq_job_info *info, void *data) {
    job_row *r = data;
    (void)c;
    r->t->pending--;
    if (status != RJQ_OK || info == NULL) return; /* (gone meanwhile, or the client closing) */
    for (size_t i = 0; i < info->nheaders; i++)
        if (strcmp(rjq_header_get(info->headers, i)->key, "rjq.group") == 0 && r->group == NULL)
            r->group = strdup(rjq_header_get(info->headers, i)->value);
}

static void on_job_ids(rjq_client *c, int status, const char *const *ids, size_t n, void *data) {
    cli *t = data;
    jobs_page *pg = t->jobs_page;
    (void)c;
    if (!reply_ok(t, status)) return;
    pg->ok = 1;
    if (n == 0) return;
    if ((pg->rows = calloc(n, sizeof *pg->rows)) == NULL) {
        report(t, RJQ_ENOMEM, NULL);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        job_row *r = &pg->rows[pg->n];
        r->t = t;
        if ((r->id = strdup(ids[i])) == NULL) break;
        pg->n++;
        if (sent(t, rjq_queue_get_job(t->q, ids[i], on_row_info, r))) break;
    }
}

static int jobs_with_groups(cli *t, rjq_job_state st, long off, long lim) {
    jobs_page pg = {NULL, 0, 0};
    t->jobs_page = &pg;
    int rc = send_and_wait(t, rjq_queue_list_jobs(t->q, st, off, lim, on_job_ids, t));
    if (rc == 0 && pg.ok) {
        for (size_t i = 0; i < pg.n; i++) {
            if (pg.rows[i].group) printf("%s group %s\n", pg.rows[i].id, pg.rows[i].group);
            else puts(pg.rows[i].id);
        }
    }
    for (size_t i = 0; i < pg.n; i++) {
        free(pg.rows[i].id);
        free(pg.rows[i].group);
    }
    free(pg.rows);
    t->jobs_page = NULL;
    return rc;
}

static int cmd_jobs(cli *t, int argc, char **argv) {
    char *pos[2];
    const char *offset = NULL, *limit = NULL;
    const optdef defs[] = {{"--offset", &offset, NULL}, {"--limit", &limit, NULL},
                           {"--json", NULL, &t->json}, {NULL, NULL, NULL}};
    long long off = 0, lim = DEAD_LIMIT;
    int rc = parse_args(argc, argv, defs, pos, 2, 2, NULL);
    if (rc || (rc = parse_ll("--offset", offset, 0, RJQ_JOBS_OFFSET_MAX, &off)) ||
        (rc = parse_ll("--limit", limit, 1, RJQ_JOBS_PAGE_MAX, &lim)))
        return rc;
    rjq_job_state st;
    if (job_state_parse(pos[1], &st) != 0)
        return usage_error("unknown state '%s' (ready, delayed, active, dead, cancelled, "
                           "completed, waiting)", pos[1]);
    if (cli_open(t, pos[0])) return 1;
    if (!t->json && (st == RJQ_STATE_READY || st == RJQ_STATE_DELAYED || st == RJQ_STATE_ACTIVE))
        return jobs_with_groups(t, st, (long)off, (long)lim);
    return send_and_wait(t, rjq_queue_list_jobs(t->q, st, (long)off, (long)lim, on_dead, t));
}

/* rjq version: the library's, which may be newer than the tool's header. */
static int cmd_version(cli *t, int argc, char **argv) {
    const optdef defs[] = {{NULL, NULL, NULL}};
    int rc = parse_args(argc, argv, defs, NULL, 0, 0, NULL);
    if (rc) return rc;
    int v = rjq_version();
    if (t->json) printf("{\"version\":\"%d.%d.%d\"}\n", v / 10000, v / 100 % 100, v % 100);
    else printf("rjq %d.%d.%d\n", v / 10000, v / 100 % 100, v % 100);
    return 0;
}

/* ---- delete, purge ---------------------------------------------------------------- */

static void on_deleted(rjq_client *c, int status, long long n, void *data) {
    cli *t = data;
    (void)c, (void)n;
    if (!reply_ok_why(t, status, status == RJQ_ESTATE
                                     ? "only dead and cancelled jobs are deleted: cancel a "
                                       "waiting or running job; completed jobs leave by retention"
                                     : NULL))
        return;
    if (t->json) print_count(t, "deleted", 1);
    else puts("deleted");
}

static int cmd_delete(cli *t, int argc, char **argv) {
    char *pos[2];
    const optdef defs[] = {{NULL, NULL, NULL}};
    int rc = parse_args(argc, argv, defs, pos, 2, 2, NULL);
    if (rc) return rc;
    if (cli_open(t, pos[0])) return 1;
    return send_and_wait(t, rjq_queue_delete(t->q, pos[1], on_deleted, t));
}

static void on_purged(rjq_client *c, int status, long long n, void *data) {
    cli *t = data;
    (void)c;
    if (reply_ok(t, status)) t->count += n, t->last_page = n;
}

/* rjq purge QUEUE dead|cancelled [--yes]: asks at a terminal unless --yes. */
static int cmd_purge(cli *t, int argc, char **argv) {
    char *pos[2];
    int yes = 0;
    const optdef defs[] = {{"--yes", NULL, &yes}, {NULL, NULL, NULL}};
    int rc = parse_args(argc, argv, defs, pos, 2, 2, NULL);
    if (rc) return rc;
    rjq_job_state state;
    if (strcmp(pos[1], "dead") == 0) state = RJQ_STATE_DEAD;
    else if (strcmp(pos[1], "cancelled") == 0) state = RJQ_STATE_CANCELLED;
    else return usage_error("purge takes dead or cancelled, not '%s'", pos[1]);
    if (!yes) {
        if (!isatty(STDIN_FILENO) || !isatty(STDERR_FILENO))
            return usage_error("%s", "purge deletes jobs for good: give --yes (no terminal to ask on)");
        fprintf(stderr, "Delete every %s job of queue '%s' for good? [y/N] ", pos[1], pos[0]);
        char answer[16] = "";
        if (fgets(answer, sizeof answer, stdin) == NULL || (answer[0] != 'y' && answer[0] != 'Y')) {
            fprintf(stderr, "rjq: purge: not confirmed: nothing deleted\n");
            return 1;
        }
    }
    if (cli_open(t, pos[0])) return 1;
    do { /* a page per call, until one comes back short */
        t->last_page = 0;
        if (send_and_wait(t, rjq_queue_purge(t->q, state, RJQ_JOBS_PAGE_MAX, on_purged, t)))
            return 1;
    } while (t->last_page == RJQ_JOBS_PAGE_MAX);
    print_count(t, "deleted", t->count);
    return 0;
}

/* ---- replay, reclaim -------------------------------------------------------------- */

static void on_count(rjq_client *c, int status, long long n, void *data) {
    cli *t = data;
    (void)c;
    if (reply_ok(t, status)) print_count(t, strcmp(t->what, "replay") == 0 ? "replayed" : "reclaimed", n);
}

static int cmd_replay(cli *t, int argc, char **argv) {
    char *pos[2] = {NULL, NULL};
    const char *limit = NULL;
    int all = 0, npos;
    const optdef defs[] = {{"--all", NULL, &all}, {"--limit", &limit, NULL}, {NULL, NULL, NULL}};
    long long lim = 0;
    int rc = parse_args(argc, argv, defs, pos, 1, 2, &npos);
    if (rc || (rc = parse_ll("--limit", limit, 1, LONG_MAX, &lim))) return rc;
    if (all == (npos == 2)) return usage_error("%s", "replay needs either a job ID or --all");
    if (limit && !all) return usage_error("%s only goes with --all", "--limit");
    if (cli_open(t, pos[0])) return 1;
    return send_and_wait(t, rjq_queue_replay(t->q, pos[1], (long)lim, on_count, t));
}

static int cmd_reclaim(cli *t, int argc, char **argv) {
    char *pos[1];
    const optdef defs[] = {{NULL, NULL, NULL}};
    int rc = parse_args(argc, argv, defs, pos, 1, 1, NULL);
    if (rc) return rc;
    if (cli_open(t, pos[0])) return 1;
    return send_and_wait(t, rjq_queue_reclaim(t->q, on_count, t));
}

/* ---- pause, resume, cancel ------------------------------------------------------ */

/* pause, resume and limit act on a queue that exists (any of its keys is
 * in Redis: rjq_stats' exists), so that a mistyped name is an error, not
 * a new queue; --create sets a queue up before its first job (the queue
 * is then named in the registry: rjq queues and top list it). */
static void on_exists(rjq_client *c, int status, const rjq_stats *s, void *data) {
    cli *t = data;
    (void)c;
    if (reply_ok(t, status)) t->exists = s->exists;
}

static int require_queue(cli *t, const char *name, int create) {
    if (create) return 0;
    if (send_and_wait(t, rjq_queue_get_stats(t->q, on_exists, t))) return 1;
    if (t->failed) return 1;
    if (t->exists) return 0;
    t->failed = 1;
    fprintf(stderr, "rjq: %s: queue '%s' does not exist (nothing of it is in Redis; --create "
                    "%ss it anyway)\n", t->what, name, t->what);
    return 1;
}

static void on_paused(rjq_client *c, int status, long long n, void *data) {
    cli *t = data;
    (void)c;
    if (!reply_ok(t, status)) return;
    int pause = strcmp(t->what, "pause") == 0;
    if (t->json)
        printf("{\"paused\":%s,\"changed\":%s}\n", pause ? "true" : "false", n ? "true" : "false");
    else
        puts(n ? (pause ? "paused" : "resumed") : (pause ? "already paused" : "not paused"));
}

static int cmd_pause(cli *t, int argc, char **argv) {
    char *pos[1];
    int create = 0;
    const optdef defs[] = {{"--create", NULL, &create}, {NULL, NULL, NULL}};
    int rc = parse_args(argc, argv, defs, pos, 1, 1, NULL);
    if (rc) return rc;
    if (cli_open(t, pos[0]) || require_queue(t, pos[0], create)) return 1;
    return send_and_wait(t, strcmp(t->what, "pause") == 0 ? rjq_queue_pause(t->q, on_paused, t)
                                                           : rjq_queue_resume(t->q, on_paused, t));
}

/* queue-format QUEUE 1|2 (rjq_queue_set_format) */
static void on_format(rjq_client *c, int status, long long n, void *data) {
    cli *t = data;
    (void)c;
    if (!reply_ok_why(t, status,
                      status == RJQ_ESTATE ? "the queue has active jobs (their states may hold "
                                             "format 2's reply channels): stop its workers first"
                                           : NULL))
        return;
    if (t->json)
        printf("{\"format\":%d,\"changed\":%s}\n", t->format, n ? "true" : "false");
    else
        printf("%s %d\n", n ? "format" : "already format", t->format);
}

static int cmd_queue_format(cli *t, int argc, char **argv) {
    char *pos[2];
    int create = 0;
    const optdef defs[] = {{"--create", NULL, &create}, {NULL, NULL, NULL}};
    int rc = parse_args(argc, argv, defs, pos, 2, 2, NULL);
    if (rc) return rc;
    if (strcmp(pos[1], "1") != 0 && strcmp(pos[1], "2") != 0)
        return usage_error("format %s: 1 or 2", pos[1]);
    t->format = pos[1][0] - '0';
    if (cli_open(t, pos[0]) || require_queue(t, pos[0], create)) return 1;
    return send_and_wait(t, rjq_queue_set_format(t->q, t->format, on_format, t));
}

static void on_cancelled(rjq_client *c, int status, const char *state, void *data) {
    cli *t = data;
    char why[64];
    (void)c;
    if (status == RJQ_ESTATE && state) snprintf(why, sizeof why, "it is %s already", state);
    if (!reply_ok_why(t, status, status == RJQ_ESTATE && state ? why : NULL)) return;
    if (t->json) printf("{\"cancelled\":true,\"was\":\"%s\"}\n", state);
    else printf("cancelled (was %s)\n", state);
}

static int cmd_cancel(cli *t, int argc, char **argv) {
    char *pos[2];
    const optdef defs[] = {{NULL, NULL, NULL}};
    int rc = parse_args(argc, argv, defs, pos, 2, 2, NULL);
    if (rc) return rc;
    if (cli_open(t, pos[0])) return 1;
    return send_and_wait(t, rjq_queue_cancel(t->q, pos[1], on_cancelled, t));
}

/* rjq limit QUEUE [--concurrency N] [--rate N[/MS]]: no option lifts them. */
static void on_limited(rjq_client *c, int status, long long n, void *data) {
    cli *t = data;
    (void)c, (void)n;
    if (reply_ok(t, status))
        print_word(t, "limits", t->limits_set ? "set" : "lifted",
                   t->limits_set ? "limits set" : "limits lifted");
}

/* --rate N[/MS] (rjq limit, rjq group): *rn starts per *rw ms (*rw kept
 * without /MS). */
static int parse_rate(const char *rate, long long max, long long *rn, long long *rw) {
    char num[32];
    const char *slash = strchr(rate, '/');
    size_t len = slash ? (size_t)(slash - rate) : strlen(rate);
    if (len == 0 || len >= sizeof num) return usage_error("--rate is N or N/MS, not '%s'", rate);
    memcpy(num, rate, len);
    num[len] = '\0';
    int rc;
    if ((rc = parse_ll("--rate", num, 0, max, rn)) ||
        (slash && (rc = parse_ll("--rate's window", slash + 1, 1,
                                 max < RJQ_DELAY_MAX ? max : RJQ_DELAY_MAX, rw))))
        return rc;
    return 0;
}

static int cmd_limit(cli *t, int argc, char **argv) {
    char *pos[1];
    const char *conc = NULL, *rate = NULL;
    int create = 0;
    const optdef defs[] = {{"--concurrency", &conc, NULL}, {"--rate", &rate, NULL},
                           {"--create", NULL, &create}, {NULL, NULL, NULL}};
    long long cn = 0, rn = 0, rw = 1000;
    int rc = parse_args(argc, argv, defs, pos, 1, 1, NULL);
    if (rc || (rc = parse_ll("--concurrency", conc, 1, LONG_MAX, &cn))) return rc;
    if (rate && (rc = parse_rate(rate, LONG_MAX, &rn, &rw))) return rc;
    if (rate && rn == 0) return usage_error("--rate is N or N/MS with N >= 1, not '%s'", rate);
    rjq_limits l = {sizeof(rjq_limits), (long)cn, (long)rn, (long)rw};
    t->limits_set = cn || rn;
    if (cli_open(t, pos[0]) || require_queue(t, pos[0], create)) return 1;
    return send_and_wait(t, rjq_queue_set_limits(t->q, &l, on_limited, t));
}

/* ---- job groups (README "Groups") ----------------------------------------------- */

/* rjq groups QUEUE [GROUP] [--limit N] [--json]: the groups by depth. */
static void on_groups(rjq_client *c, int status, long long total, const rjq_group_info *list, size_t n,
                      void *data) {
    cli *t = data;
    (void)c;
    if (!reply_ok(t, status)) return;
    if (t->json) printf("{\"total\":%lld,\"groups\":[", total);
    else printf("groups %lld\n", total);
    for (size_t i = 0; i < n; i++) {
        const rjq_group_info *g = rjq_group_info_get(list, i);
        if (t->json) {
            if (i) putchar(',');
            fputs("{\"name\":", stdout);
            print_json_string(g->name, strlen(g->name));
            printf(",\"depth\":%lld,\"active\":%lld,\"concurrency\":%d,\"weight\":%d,\"paused\":%s,"
                   "\"rate\":%ld,\"rate_window_ms\":%ld,\"max_waiting\":%ld,\"started\":%lld}",
                   g->depth, g->active, g->concurrency, g->weight, g->paused ? "true" : "false", g->rate,
                   g->rate_window_ms, g->max_waiting, g->started);
        } else {
            printf("%s depth %lld active %lld", g->name, g->depth, g->active);
            if (g->started) printf(" started %lld", g->started); /* (its counter: README "Groups") */
            if (g->concurrency >= 0) printf(" concurrency %d", g->concurrency);
            if (g->weight != 1) printf(" weight %d", g->weight);
            char rt[64];
            if (g->rate) printf(" rate %s", rate_limit_text(rt, sizeof rt, g->rate, g->rate_window_ms));
            if (g->max_waiting) printf(" max_waiting %ld", g->max_waiting);
            if (g->paused) fputs(" paused", stdout);
            putchar('\n');
        }
    }
    if (t->json) puts("]}");
}

static int cmd_groups(cli *t, int argc, char **argv) {
    char *pos[2] = {NULL, NULL};
    const char *limit = NULL;
    int npos;
    const optdef defs[] = {{"--limit", &limit, NULL}, {"--json", NULL, &t->json}, {NULL, NULL, NULL}};
    long long lim = 20;
    int rc = parse_args(argc, argv, defs, pos, 1, 2, &npos);
    if (rc || (rc = parse_ll("--limit", limit, 1, 1000, &lim))) return rc;
    if (cli_open(t, pos[0])) return 1;
    return send_and_wait(t, rjq_queue_list_groups(t->q, npos > 1 ? pos[1] : NULL, 0, (long)lim, on_groups, t));
}

static void on_group_set(rjq_client *c, int status, long long n, void *data) {
    cli *t = data;
    (void)c;
    (void)n;
    if (reply_ok(t, status)) puts("ok");
}

/* rjq group QUEUE GROUP|'*' [--concurrency N] [--weight N] [--rate N[/MS]]
 * [--max-waiting N] [--pause|--resume]: every setting not given follows
 * the defaults (0: none, whatever the defaults say). */
static int cmd_group(cli *t, int argc, char **argv) {
    char *pos[2];
    const char *conc = NULL, *weight = NULL, *rate = NULL, *bound = NULL;
    int pause = 0, resume = 0;
    const optdef defs[] = {{"--concurrency", &conc, NULL}, {"--weight", &weight, NULL},
                           {"--rate", &rate, NULL},        {"--max-waiting", &bound, NULL},
                           {"--pause", NULL, &pause},      {"--resume", NULL, &resume},
                           {NULL, NULL, NULL}};
    long long cn = -1, wn = 0, rn = -1, rw = 1000, bn = -1;
    int rc = parse_args(argc, argv, defs, pos, 2, 2, NULL);
    if (rc || (rc = parse_ll("--concurrency", conc, 0, INT_MAX, &cn)) ||
        (rc = parse_ll("--weight", weight, 1, INT_MAX, &wn)) ||
        (rc = parse_ll("--max-waiting", bound, 0, INT_MAX, &bn)) ||
        (rate && (rc = parse_rate(rate, INT_MAX, &rn, &rw))))
        return rc;
    int all = strcmp(pos[1], "*") == 0;
    if ((pause || resume) && (all || conc || weight || rate || bound || (pause && resume)))
        return usage_error("%s", "--pause or --resume, of one group, alone");
    if (cli_open(t, pos[0])) return 1;
    if (pause || resume)
        return send_and_wait(t, rjq_queue_pause_group(t->q, pos[1], pause, on_group_set, t));
    /* (not given: the defaults', 0 in the struct; given as 0: none) */
    rjq_group_limits l = RJQ_GROUP_LIMITS_INIT;
    l.concurrency = cn < 0 ? 0 : cn == 0 ? RJQ_GROUP_NONE : (long)cn;
    l.weight = (long)wn;
    l.rate = rn < 0 ? 0 : rn == 0 ? RJQ_GROUP_NONE : (long)rn;
    l.rate_window_ms = (long)rw;
    l.max_waiting = bn < 0 ? 0 : bn == 0 ? RJQ_GROUP_NONE : (long)bn;
    return send_and_wait(t, rjq_queue_limit_group(t->q, all ? NULL : pos[1], &l, on_group_set, t));
}

/* ---- the index of declared JSON fields ------------------------------------------- */

/* rjq index QUEUE [FIELD...] [--drop] [--no-fill] */
static void on_index(rjq_client *c, int status, const char *const *fields, size_t n,
                     long long covered, long long total, void *data) {
    cli *t = data;
    (void)c;
    if (!reply_ok(t, status)) return;
    t->index_fields[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        size_t used = strlen(t->index_fields);
        snprintf(t->index_fields + used, sizeof t->index_fields - used, "%s%s", i ? " " : "",
                 fields[i]);
    }
    t->covered = covered;
    t->total = total;
}

static void on_filled(rjq_client *c, int status, const char *cursor, long long covered,
                      long long total, long long indexed, void *data) {
    cli *t = data;
    (void)c, (void)indexed;
    if (!reply_ok(t, status)) return;
    snprintf(t->index_cursor, sizeof t->index_cursor, "%s", cursor);
    t->covered = covered;
    t->total = total;
}

static void print_index(const cli *t) {
    if (t->json) {
        printf("{\"fields\":[");
        const char *f = t->index_fields;
        for (int i = 0; *f; i++) {
            size_t len = strcspn(f, " ");
            printf("%s", i ? "," : "");
            print_json_string(f, len);
            f += len + (f[len] == ' ');
        }
        printf("],\"covered\":%lld,\"total\":%lld}\n", t->covered, t->total);
    } else if (!t->index_fields[0]) {
        puts("no index");
    } else {
        printf("index %s: covers %lld of %lld jobs%s\n", t->index_fields, t->covered, t->total,
               t->covered == t->total ? "" : " (lookups scan until it covers them all)");
    }
}

static int cmd_index(cli *t, int argc, char **argv) {
    char *pos[1 + RJQ_INDEX_FIELDS_MAX];
    int drop = 0, no_fill = 0, create = 0, n = 0;
    const optdef defs[] = {{"--drop", NULL, &drop}, {"--no-fill", NULL, &no_fill},
                           {"--create", NULL, &create}, {NULL, NULL, NULL}};
    int rc = parse_args(argc, argv, defs, pos, 1, 1 + RJQ_INDEX_FIELDS_MAX, &n);
    if (rc) return rc;
    if (drop && n > 1) return usage_error("%s", "--drop takes no FIELD");
    const char *const *fields = (const char *const *)pos + 1;
    static const char name_bytes[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-";
    for (int i = 1; i < n; i++) {
        size_t len = strlen(pos[i]);
        if (len == 0 || len > RJQ_INDEX_FIELD_MAX || strspn(pos[i], name_bytes) != len)
            return usage_error("a FIELD is 1 to 64 letters, digits, '_', '.' or '-', not '%s'",
                               pos[i]);
        for (int j = 1; j < i; j++)
            if (strcmp(pos[i], pos[j]) == 0) return usage_error("FIELD '%s' given twice", pos[i]);
    }
    if (cli_open(t, pos[0])) return 1;
    if (n > 1 || drop) {
        if (require_queue(t, pos[0], create) ||
            send_and_wait(t, rjq_queue_set_index(t->q, fields, (size_t)n - 1, on_index, t)))
            return 1;
        if (n > 1 && !no_fill) { /* index the jobs there already, in bounded steps */
            snprintf(t->index_cursor, sizeof t->index_cursor, "0");
            do {
                if (send_and_wait(t, rjq_queue_fill_index(t->q, t->index_cursor, 1000, on_filled, t)))
                    return 1;
            } while (strcmp(t->index_cursor, "0") != 0);
        }
    } else if (send_and_wait(t, rjq_queue_get_index(t->q, on_index, t))) {
        return 1;
    }
    print_index(t);
    return 0;
}

/* rjq find QUEUE FIELD VALUE [--limit N] */
static void on_found(rjq_client *c, int status, const rjq_search_match *m, size_t n,
                     long long covered, long long total, void *data) {
    cli *t = data;
    char why[160];
    (void)c;
    if (status == RJQ_ESTATE)
        snprintf(why, sizeof why, "the index covers %lld of %lld jobs (rjq index QUEUE FIELD... "
                                  "fills it; the dashboard's search scans)", covered, total);
    if (status == RJQ_ENOTFOUND) snprintf(why, sizeof why, "the field is not indexed (rjq index)");
    if (!reply_ok_why(t, status, status == RJQ_ESTATE || status == RJQ_ENOTFOUND ? why : NULL))
        return;
    for (size_t i = 0; i < n; i++) {
        const rjq_search_match *e = rjq_search_match_get(m, i);
        if (t->json) {
            printf("%s{\"id\":", t->found ? "," : "[");
            print_json_string(e->id, strlen(e->id));
            printf(",\"state\":\"%s\"}", e->state);
        } else {
            printf("%s %s\n", e->id, e->state);
        }
        t->found++;
    }
    free(t->found_after);
    t->found_after = n ? strdup(rjq_search_match_get(m, n - 1)->id) : NULL;
    t->last_page = (long long)n;
}

static int cmd_find(cli *t, int argc, char **argv) {
    char *pos[3];
    const char *limit_s = NULL;
    long long limit = LLONG_MAX;
    const optdef defs[] = {{"--limit", &limit_s, NULL}, {NULL, NULL, NULL}};
    int rc = parse_args(argc, argv, defs, pos, 3, 3, NULL);
    if (rc || (rc = parse_ll("--limit", limit_s, 1, LLONG_MAX, &limit))) return rc;
    if (strlen(pos[2]) == 0 || strlen(pos[2]) > RJQ_INDEX_VALUE_MAX)
        return usage_error("VALUE is 1 to 256 bytes, not '%s'", pos[2]);
    if (cli_open(t, pos[0])) return 1;
    do {
        long page = limit - t->found < RJQ_JOBS_PAGE_MAX ? (long)(limit - t->found) : RJQ_JOBS_PAGE_MAX;
        rc = send_and_wait(t, rjq_queue_find(t->q, pos[1], pos[2], strlen(pos[2]), t->found_after,
                                             page, on_found, t));
        if (rc || t->failed) break;
    } while (t->last_page == RJQ_JOBS_PAGE_MAX && t->found < limit);
    free(t->found_after);
    t->found_after = NULL;
    if (rc || t->failed) return 1;
    if (t->json) puts(t->found ? "]" : "[]");
    return 0;
}

/* ---- schedules ------------------------------------------------------------------- */

static void on_scheduled(rjq_client *c, int status, long long n, void *data) {
    cli *t = data;
    (void)c;
    if (!reply_ok(t, status)) return;
    if (strcmp(t->what, "schedule") == 0) print_word(t, "schedule", n ? "set" : "unchanged", n ? "set" : "unchanged");
    else print_word(t, "schedule", n ? "removed" : "absent", n ? "removed" : "no such schedule");
}

static int cmd_schedule(cli *t, int argc, char **argv) {
    char *pos[2];
    const char *every = NULL, *cron = NULL, *offset = NULL, *payload = "", *catchup = NULL,
               *missed = NULL, *prio = NULL, *attempts = NULL, *timeout = NULL;
    const optdef defs[] = {{"--every", &every, NULL},       {"--cron", &cron, NULL},
                           {"--utc-offset", &offset, NULL}, {"--payload", &payload, NULL},
                           {"--catchup", &catchup, NULL},   {"--missed", &missed, NULL},
                           {"--priority", &prio, NULL},     {"--attempts", &attempts, NULL},
                           {"--timeout", &timeout, NULL},   {NULL, NULL, NULL}};
    long long ev = 0, off = 0, cu = 0, p = 0, a = 0, to = 0;
    int rc = parse_args(argc, argv, defs, pos, 2, 2, NULL);
    if (rc || (rc = parse_ll("--every", every, 1, RJQ_DELAY_MAX, &ev)) ||
        (rc = parse_ll("--utc-offset", offset, -1440, 1440, &off)) ||
        (rc = parse_ll("--catchup", catchup, 1, RJQ_DELAY_MAX, &cu)) ||
        (rc = parse_ll("--priority", prio, RJQ_PRIORITY_MIN, RJQ_PRIORITY_MAX, &p)) ||
        (rc = parse_ll("--attempts", attempts, 1, INT_MAX, &a)) ||
        (rc = parse_ll("--timeout", timeout, 1, RJQ_DELAY_MAX, &to)))
        return rc;
    if ((every != NULL) == (cron != NULL))
        return usage_error("%s", "schedule needs either --every MS or --cron EXPR");
    if (missed && strcmp(missed, "skip") != 0 && strcmp(missed, "once") != 0)
        return usage_error("--missed is skip or once, not '%s'", missed);
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.priority = (int)p;
    o.max_attempts = (int)a;
    o.timeout_ms = to;
    rjq_schedule s = RJQ_SCHEDULE_INIT;
    s.every_ms = ev;
    s.cron = cron;
    s.utc_offset_min = (int)off;
    s.payload = payload;
    s.len = strlen(payload);
    s.opts = &o;
    s.catchup_ms = cu;
    s.missed = missed && strcmp(missed, "once") == 0 ? RJQ_MISSED_ONCE : RJQ_MISSED_SKIP;
    if (cli_open(t, pos[0])) return 1;
    return send_and_wait(t, rjq_schedule_set(t->q, pos[1], &s, on_scheduled, t));
}

static int cmd_unschedule(cli *t, int argc, char **argv) {
    char *pos[2];
    const optdef defs[] = {{NULL, NULL, NULL}};
    int rc = parse_args(argc, argv, defs, pos, 2, 2, NULL);
    if (rc) return rc;
    if (cli_open(t, pos[0])) return 1;
    return send_and_wait(t, rjq_schedule_remove(t->q, pos[1], on_scheduled, t));
}

static void on_schedules(rjq_client *c, int status, const rjq_schedule_info *l, size_t n,
                         void *data) {
    cli *t = data;
    (void)c;
    if (!reply_ok(t, status)) return;
    if (t->json) putchar('['); /* one JSON array */
    for (size_t i = 0; i < n; i++) {
        if (t->json) {
            if (i) putchar(',');
            print_field(t, 1, "name", rjq_schedule_info_get(l, i)->name, strlen(rjq_schedule_info_get(l, i)->name));
            print_field(t, 0, "spec", rjq_schedule_info_get(l, i)->spec, strlen(rjq_schedule_info_get(l, i)->spec));
            print_num(t, 0, "next_ms", rjq_schedule_info_get(l, i)->next_ms);
            putchar('}');
        } else {
            printf("%s\t%s\t%lld\n", rjq_schedule_info_get(l, i)->name, rjq_schedule_info_get(l, i)->spec, rjq_schedule_info_get(l, i)->next_ms);
        }
    }
    if (t->json) puts("]");
}

static int cmd_schedules(cli *t, int argc, char **argv) {
    char *pos[1];
    const optdef defs[] = {{"--json", NULL, &t->json}, {NULL, NULL, NULL}};
    int rc = parse_args(argc, argv, defs, pos, 1, 1, NULL);
    if (rc) return rc;
    if (cli_open(t, pos[0])) return 1;
    return send_and_wait(t, rjq_schedule_list(t->q, on_schedules, t));
}

/* rjq scheduler QUEUE [--lease MS]: runs a scheduler until SIGINT or
 * SIGTERM, saying on stderr when it leads and when it stands by. */
typedef struct sched_run {
    cli *t;
    rjq_scheduler *s;
    int leading, stopping;
    struct event *tick, *sigint, *sigterm;
} sched_run;

static void on_sched_tick(evutil_socket_t fd, short what, void *arg) {
    sched_run *r = arg;
    (void)fd, (void)what;
    if (r->stopping) return; /* r->s is gone */
    int now = rjq_scheduler_is_leading(r->s);
    if (now != r->leading)
        fprintf(stderr, "rjq: scheduler: %s %s\n", now ? "leading" : "standing by for",
                rjq_queue_get_name(r->t->q));
    r->leading = now;
}

static void on_sched_closed(const rjq_close_report *report, void *data) {
    sched_run *r = data;
    (void)report;
    r->t->c = NULL; /* freed by the close */
    event_base_loopbreak(r->t->base);
}

static void on_sched_signal(evutil_socket_t fd, short what, void *arg) {
    sched_run *r = arg;
    (void)fd, (void)what;
    if (r->stopping) return;
    r->stopping = 1;
    event_del(r->tick);
    rjq_scheduler_stop(r->s); /* gives the lease up: another takes over at once */
    r->s = NULL;
    if (rjq_client_close(r->t->c, 2000, on_sched_closed, r) != RJQ_OK)
        event_base_loopbreak(r->t->base);
}

static int cmd_scheduler(cli *t, int argc, char **argv) {
    char *pos[1];
    const char *lease = NULL;
    const optdef defs[] = {{"--lease", &lease, NULL}, {NULL, NULL, NULL}};
    long long l = 0;
    int rc = parse_args(argc, argv, defs, pos, 1, 1, NULL);
    if (rc || (rc = parse_ll("--lease", lease, 30, 3600000, &l))) return rc;
    if (cli_open(t, pos[0])) return 1;
    sched_run r = {.t = t};
    rc = rjq_scheduler_start(t->q, (long)l, &r.s);
    if (rc != RJQ_OK) {
        report_rc(t, rc);
        return 1;
    }
    r.tick = event_new(t->base, -1, EV_PERSIST, on_sched_tick, &r);
    r.sigint = evsignal_new(t->base, SIGINT, on_sched_signal, &r);
    r.sigterm = evsignal_new(t->base, SIGTERM, on_sched_signal, &r);
    struct timeval tv = {0, 200000};
    if (!r.tick || !r.sigint || !r.sigterm || event_add(r.tick, &tv) || evsignal_add(r.sigint, NULL) ||
        evsignal_add(r.sigterm, NULL)) {
        report(t, RJQ_ENOMEM, "cannot set up the event loop");
        rc = 1;
    } else {
        fprintf(stderr, "rjq: scheduler for %s started (SIGINT or SIGTERM stops it)\n",
                rjq_queue_get_name(t->q));
        event_base_dispatch(t->base);
    }
    if (r.tick) event_free(r.tick);
    if (r.sigint) event_free(r.sigint);
    if (r.sigterm) event_free(r.sigterm);
    return rc;
}

/* rjq acl [--queues PATTERN] [--role producer|worker|monitor|bridge]: no Redis. */
static int cmd_acl(cli *t, int argc, char **argv) {
    const char *queues = "*", *role = NULL;
    const optdef defs[] = {{"--queues", &queues, NULL}, {"--role", &role, NULL}, {NULL, NULL, NULL}};
    int rc = parse_args(argc, argv, defs, NULL, 0, 0, NULL);
    if (rc) return rc;
    int roles = RJQ_ACL_ALL;
    if (role) {
        roles = strcmp(role, "producer") == 0 ? RJQ_ACL_PRODUCER
                : strcmp(role, "worker") == 0 ? RJQ_ACL_WORKER
                : strcmp(role, "monitor") == 0 ? RJQ_ACL_MONITOR
                : strcmp(role, "bridge") == 0  ? RJQ_ACL_BRIDGE
                                               : 0;
        if (roles == 0)
            return usage_error("--role is producer, worker, monitor or bridge, not '%s'", role);
    }
    char why[160];
    if (t->json) { /* {"users": [the ACL SETUSER lines]} */
        char *text = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&text, &len);
        if (mem == NULL) {
            report(t, RJQ_ENOMEM, "acl");
            return 1;
        }
        rc = acl_print(mem, t->prefix ? t->prefix : "rjq", queues, roles, why, sizeof why);
        fclose(mem);
        if (rc == 0) {
            fputs("{\"users\":[", stdout);
            int first = 1;
            for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                if (l[0] == '#') continue;
                if (!first) putchar(',');
                print_json_string(l, strlen(l));
                first = 0;
            }
            puts("]}");
        }
        free(text);
        if (rc == 0) return 0;
        fprintf(stderr, "rjq: acl: %s\n", why);
        return EXIT_USAGE;
    }
    if (acl_print(stdout, t->prefix ? t->prefix : "rjq", queues, roles, why, sizeof why)) {
        fprintf(stderr, "rjq: acl: %s\n", why);
        return EXIT_USAGE;
    }
    return 0;
}

/* ---- main ------------------------------------------------------------------------- */

static const struct {
    const char *name;
    int (*run)(cli *t, int argc, char **argv);
} commands[] = {
    {"stats", cmd_stats}, {"enqueue", cmd_enqueue}, {"job", cmd_job},
    {"dead", cmd_dead},   {"replay", cmd_replay},   {"reclaim", cmd_reclaim},
    {"queues", cmd_queues}, {"top", cmd_top},   {"cluster", cmd_cluster},
    {"pause", cmd_pause}, {"resume", cmd_pause},   {"cancel", cmd_cancel},
    {"queue-format", cmd_queue_format},
    {"limit", cmd_limit}, {"schedule", cmd_schedule}, {"unschedule", cmd_unschedule},
    {"schedules", cmd_schedules}, {"scheduler", cmd_scheduler},
    {"metrics", cmd_metrics}, {"jobs", cmd_jobs}, {"delete", cmd_delete},
    {"purge", cmd_purge},     {"version", cmd_version}, {"acl", cmd_acl},
    {"serve", cmd_serve},     {"processes", cmd_processes}, {"shards", cmd_shards},
    {"index", cmd_index},     {"find", cmd_find},  {"batch", cmd_batch}, {"batches", cmd_batches},
    {"groups", cmd_groups},   {"group", cmd_group},
};

/* A TLS option (--tls ...): 1 taken (*i moved past its value), 0 not one,
 * -1 after a usage error. */
static int parse_tls_option(cli *t, int argc, char **argv, int *i) {
    const struct {
        const char *name;
        const char **to;
    } opts[] = {
        {"--cacert", &t->tls.ca_file},  {"--cacertdir", &t->tls.ca_dir},
        {"--cacert-dir", &t->tls.ca_dir}, {"--cert", &t->tls.cert_file},
        {"--key", &t->tls.key_file},    {"--sni", &t->tls.server_name},
    };
    const char *a = argv[*i];
    if (strcmp(a, "--tls") == 0 || strcmp(a, "--insecure") == 0) {
        if (a[2] == 't') t->tls.enable = 1;
        else t->tls.insecure = 1;
        t->tls_given = 1;
        return 1;
    }
    const char *eq = strchr(a, '=');
    size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
    for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++) {
        if (strlen(opts[k].name) != nlen || strncmp(a, opts[k].name, nlen) != 0) continue;
        if (eq) { /* --cacert=FILE */
            *opts[k].to = eq + 1;
        } else if (*i + 1 < argc) {
            *opts[k].to = argv[++*i];
        } else {
            fprintf(stderr, "rjq: option %s needs a value\n", a);
            return -1;
        }
        t->tls_given = 1;
        return 1;
    }
    return 0;
}

/* A global option's value: "--name=VALUE", "-xVALUE" or the next
 * argument. NULL (reported) when there is none. */
static const char *option_value(int argc, char **argv, int *i, const char *name) {
    const char *a = argv[*i];
    size_t nlen = strlen(name);
    if (a[1] != '-' && a[2]) return a + 2;          /* -p6380 */
    if (a[1] == '-' && a[nlen] == '=') return a + nlen + 1; /* --url=URL */
    if (*i + 1 < argc) return argv[++*i];
    fprintf(stderr, "rjq: option %s needs a value (see rjq help)\n", name);
    return NULL;
}

/* Global options before the command. Returns the index of the command, or
 * -1 after a usage error (reported). */
static int parse_global(cli *t, int argc, char **argv) {
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--json") == 0) {
            t->json = 1;
            continue;
        }
        if (strcmp(a, "--") == 0) return i + 1 < argc ? i + 1 : -1;
        /* the option's name: "-p" of "-p6380", "--url" of "--url=URL" */
        char name[32];
        size_t nlen = a[1] == '-' ? strcspn(a, "=") : 2;
        snprintf(name, sizeof name, "%.*s", (int)(nlen < sizeof name ? nlen : sizeof name - 1), a);
        if (strcmp(name, "--prefix") == 0 || connopts_is_flag(name) || strcmp(name, "-t") == 0) {
            const char *v = option_value(argc, argv, &i, name);
            char err[512];
            long long secs = 0;
            if (v == NULL) return -1;
            if (strcmp(name, "--prefix") == 0) {
                t->prefix = v;
            } else if (strcmp(name, "-t") == 0) {
                if (parse_ll("-t", v, 1, 86400, &secs)) return -1;
                t->timeout_s = (long)secs;
            } else if (connopts_set(&t->conn, name, v, err, sizeof err) != 0) {
                fprintf(stderr, "rjq: %s\n", err);
                return -1;
            }
            continue;
        }
        if (a[1] == '-') {
            int taken = parse_tls_option(t, argc, argv, &i);
            if (taken < 0) return -1;
            if (taken == 0) break; /* --help, or an unknown option: the command's turn */
            continue;
        }
        fprintf(stderr, "rjq: unknown option %s (see rjq help)\n", a);
        return -1;
    }
    if (i >= argc) {
        fprintf(stderr, "rjq: no command given (see rjq help)\n");
        return -1;
    }
    char err[512];
    if (connopts_url(&t->conn, &t->url, err, sizeof err) != 0) {
        fprintf(stderr, "rjq: %s\n", err);
        return -1;
    }
    return i;
}

/* rjq help [COMMAND], rjq COMMAND --help: on stdout, exit 0 (asked for). */
static int cmd_help(int argc, char **argv) {
    if (argc == 0) {
        help_overview(stdout);
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "rjq: help takes one command, not '%s' too (see rjq help)\n", argv[1]);
        return EXIT_USAGE;
    }
    if (help_command(stdout, argv[0]) == 0) return 0;
    fprintf(stderr, "rjq: help: unknown command '%s' (see rjq help)\n", argv[0]);
    return EXIT_USAGE;
}

static int is_help(const char *a) {
    return strcmp(a, "help") == 0 || strcmp(a, "--help") == 0;
}

/* The command named argv[i] with its arguments after it. */
static int run_command(cli *t, int argc, char **argv, int i) {
    if (is_help(argv[i])) return cmd_help(argc - i - 1, argv + i + 1);
    if (t->tls_given && !t->tls.enable && strncmp(t->url ? t->url : DEFAULT_URL, "rediss://", 9) != 0) {
        fprintf(stderr, "rjq: TLS options given for a plain URL: use rediss:// or --tls "
                        "(see rjq help)\n");
        return EXIT_USAGE;
    }
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++) {
        if (strcmp(argv[i], commands[k].name) != 0) continue;
        for (int j = i + 1; j < argc && strcmp(argv[j], "--") != 0; j++)
            if (strcmp(argv[j], "--help") == 0 || strcmp(argv[j], "-h") == 0)
                return cmd_help(1, argv + i); /* `rjq COMMAND --help`: asked for, not an error */
        signal(SIGPIPE, SIG_IGN); /* a dropped connection is an error, not a kill */
        t->what = commands[k].name;
        t->tty = isatty(STDOUT_FILENO);
        int rc = commands[k].run(t, argc - i - 1, argv + i + 1);
        cli_close(t);
        if (fflush(stdout) != 0 && rc == 0) {
            fprintf(stderr, "rjq: writing output: %s\n", strerror(errno));
            rc = 1;
        }
        return rc;
    }
    fprintf(stderr, "rjq: unknown command '%s' (see rjq help)\n", argv[i]);
    return EXIT_USAGE;
}

int main(int argc, char **argv) {
    cli t;
    memset(&t, 0, sizeof t);
    t.tls = (rjq_tls_options)RJQ_TLS_OPTIONS_INIT;
    t.timeout_s = DEFAULT_TIMEOUT_S;
    if (argc == 1) return usage();
    if (argc == 2 && strcmp(argv[1], "-h") == 0) return cmd_help(0, NULL); /* -h HOST needs a value */
    if (argc == 2 && strcmp(argv[1], "--version") == 0) return cmd_version(&t, 0, NULL);
    connopts_init(&t.conn);
    the_cli = &t;
    int i = parse_global(&t, argc, argv);
    int rc = i < 0 ? EXIT_USAGE : run_command(&t, argc, argv, i);
    connopts_free(&t.conn);
    return rc;
}
