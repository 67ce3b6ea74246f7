/*
 * rjq-pg-bridge: moves jobs from a PostgreSQL outbox table into rjq
 * queues, exactly once, and writes their outcomes back (bridge.c).
 *
 * Exit status: 0 after SIGINT/SIGTERM (or --init done), 1 on a runtime
 * error, 2 on a usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <libpq-fe.h>

#include "bridge.h"
#include "connopts.h"
#include "health.h"
#include "log.h"
#include "rjq.h"
#include "schema.h"
#include "sqlname.h"

#define EXIT_USAGE 2

static const char usage_text[] =
    "usage: rjq-pg-bridge [options]\n"
    "       rjq-pg-bridge --init [--pg CONNINFO]\n"
    "\n"
    "Moves the rows of the PostgreSQL table rjq_jobs into rjq queues (each row\n"
    "once, job id \"pg-<row id>\") and writes the jobs' outcomes back to them.\n"
    "\n"
    "  --pg CONNINFO        libpq connection string or URI (default: $RJQ_PG, else\n"
    "                       libpq's PG* environment variables)\n"
    "  -u, --url URL        Redis URL (default: $RJQ_URL, else $REDIS_URL, else\n"
    "                       redis://127.0.0.1:6379)\n"
    "  -h HOST, -p PORT, -a PASSWORD (--pass), --user USER, -n DB\n"
    "                       change the URL's parts, as redis-cli's options: in\n"
    "                       command-line order, the last one naming a part wins\n"
    "  --prefix PREFIX      rjq key prefix (default: rjq; -p is the port)\n"
    "  --init               create the table, its indexes and triggers (idempotent;\n"
    "                       on an existing table: adds missing columns), then exit\n"
    "  --table NAME         the table (default rjq_jobs): 1..40 of a-z, 0-9, _; its\n"
    "                       indexes, functions, triggers and channel are named after it\n"
    "  --queues A,B,...     move the rows of these queues only (default: every queue)\n"
    "  --batch N            rows per claim, 1..10000 (default 1000)\n"
    "  --claims N           claims in flight at once, each on a PostgreSQL\n"
    "                       connection of its own, 1..16 (default 4)\n"
    "  --poll-ms MS         look for rows this often without a notification\n"
    "                       (default 30000; new rows notify at once)\n"
    "  --scan-ms MS         look for open rows to follow this often (default 60000)\n"
    "  --report-ms MS       a status line this often, 0: none (default 10000)\n"
    "  --dedup-ms MS        a row's job id stays reserved this long after its job\n"
    "                       ended (default 86400000: one day)\n"
    "  --max-payload BYTES  rows with larger payloads fail (default 16777216)\n"
    "  --max-follow N       rows whose outcomes are followed at once (default 100000)\n"
    "  --follow-await       follow each moved job by an await of its own (the way\n"
    "                       before the queue's events were used; costs Redis more)\n"
    "  --route-priority high=N,low=M\n"
    "                       rows of priority <= N go to <queue>:high, > M to\n"
    "                       <queue>:low, the others to <queue> (either part may go)\n"
    "  --listen ADDR:PORT   serve GET /healthz and /metrics there (default: off)\n"
    "  --alert-lag-ms MS    /healthz is 503 while the oldest queued row is older\n"
    "  --alert-queued N     /healthz is 503 while more rows are queued\n"
    "  --log-format F       text (default) or json: each log line one JSON object\n"
    "                       (time, level, message)\n"
    "  --help               this text (also -h alone)\n"
    "  --version            the rjq library's version\n";

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "rjq-pg-bridge: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(rjq-pg-bridge --help lists the options)\n");
    return EXIT_USAGE;
}

static int parse_num(const char *name, const char *s, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "rjq-pg-bridge: %s: \"%s\" is not a number in %lld..%lld\n", name, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* Split "a,b" into names (owned by the returned array's one buffer). */
static char **split_queues(const char *list, size_t *n) {
    size_t count = 1;
    for (const char *p = list; *p; p++) count += *p == ',';
    char **names = calloc(count + 1, sizeof *names);
    char *copy = strdup(list);
    if (names == NULL || copy == NULL) {
        free(names);
        free(copy);
        return NULL;
    }
    size_t k = 0;
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
        names[k++] = t;
    names[k] = copy; /* after the last name: freed by the caller */
    *n = k;
    return names;
}

/* --route-priority "high=N,low=M" (either part may be left out). */
static int parse_route(const char *arg, bridge_options *o) {
    o->route = 1;
    o->route_high = INT_MIN;
    o->route_low = INT_MAX;
    char *copy = strdup(arg);
    int rc = copy ? 0 : 1, parts = 0;
    for (char *save = NULL, *t = copy ? strtok_r(copy, ",", &save) : NULL; rc == 0 && t;
         t = strtok_r(NULL, ",", &save), parts++) {
        long long v = 0;
        if (strncmp(t, "high=", 5) == 0 &&
            parse_num("--route-priority high", t + 5, RJQ_PRIORITY_MIN, RJQ_PRIORITY_MAX, &v) == 0)
            o->route_high = (int)v;
        else if (strncmp(t, "low=", 4) == 0 &&
                 parse_num("--route-priority low", t + 4, RJQ_PRIORITY_MIN, RJQ_PRIORITY_MAX, &v) == 0)
            o->route_low = (int)v;
        else rc = usage_error("--route-priority: \"%s\" is not high=N or low=M", t);
    }
    if (rc == 0 && parts == 0) rc = usage_error("--route-priority: \"%s\" names no threshold", arg);
    if (rc == 0 && o->route_low != INT_MAX && o->route_high > o->route_low)
        rc = usage_error("--route-priority %s: high must not be above low", arg);
    free(copy);
    return rc;
}

static void quiet(void *arg, const char *message) {
    (void)arg;
    (void)message;
}

static int run_init(const char *conninfo, const char *table) {
    char *sql = pgb_sql(PGB_SQL_INIT, table);
    if (sql == NULL) {
        fprintf(stderr, "rjq-pg-bridge: --init: out of memory\n");
        return 1;
    }
    PGconn *pg = PQconnectdb(conninfo);
    if (PQstatus(pg) != CONNECTION_OK) {
        fprintf(stderr, "rjq-pg-bridge: --init: %s", PQerrorMessage(pg));
        PQfinish(pg);
        free(sql);
        return 1;
    }
    PQsetNoticeProcessor(pg, quiet, NULL); /* "already exists, skipping" */
    PGresult *r = PQexec(pg, sql);
    free(sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok) fprintf(stderr, "rjq-pg-bridge: --init: %s", PQresultErrorMessage(r));
    else printf("%s is ready\n", table);
    PQclear(r);
    PQfinish(pg);
    return ok ? 0 : 1;
}

static bridge *running;

static void on_signal(evutil_socket_t sig, short what, void *arg) {
    (void)sig;
    (void)what;
    (void)arg;
    if (running) bridge_stop(running, 10000);
}

int main(int argc, char **argv) {
    bridge_options o;
    bridge_defaults(&o);
    const char *env_pg = getenv("RJQ_PG");
    if (env_pg) o.pg = env_pg;
    connopts conn;
    connopts_init(&conn); /* $RJQ_URL, else $REDIS_URL */
    char err[512];
    if (argc == 2 && strcmp(argv[1], "-h") == 0) { /* -h HOST takes a value */
        fputs(usage_text, stdout);
        return 0;
    }
    int init = 0;
    char **queues = NULL;
    enum { O_PG = 256, O_INIT, O_TABLE, O_QUEUES, O_BATCH, O_CLAIMS, O_POLL, O_SCAN, O_REPORT, O_DEDUP, O_MAXP, O_MAXF, O_FAWAIT,
           O_VER, O_ROUTE, O_LISTEN, O_ALAG, O_AQUEUED, O_PREFIX, O_USER, O_PASS, O_HELP, O_LOGF };
    health_options ho = {0};
    log_format logf = LOG_TEXT;
    static const struct option longopts[] = {
        {"pg", required_argument, NULL, O_PG},
        {"url", required_argument, NULL, 'u'},
        {"prefix", required_argument, NULL, O_PREFIX},
        {"user", required_argument, NULL, O_USER},
        {"pass", required_argument, NULL, O_PASS},
        {"init", no_argument, NULL, O_INIT},
        {"table", required_argument, NULL, O_TABLE},
        {"queues", required_argument, NULL, O_QUEUES},
        {"batch", required_argument, NULL, O_BATCH},
        {"claims", required_argument, NULL, O_CLAIMS},
        {"poll-ms", required_argument, NULL, O_POLL},
        {"scan-ms", required_argument, NULL, O_SCAN},
        {"report-ms", required_argument, NULL, O_REPORT},
        {"dedup-ms", required_argument, NULL, O_DEDUP},
        {"max-payload", required_argument, NULL, O_MAXP},
        {"max-follow", required_argument, NULL, O_MAXF},
        {"follow-await", no_argument, NULL, O_FAWAIT},
        {"route-priority", required_argument, NULL, O_ROUTE},
        {"listen", required_argument, NULL, O_LISTEN},
        {"alert-lag-ms", required_argument, NULL, O_ALAG},
        {"alert-queued", required_argument, NULL, O_AQUEUED},
        {"log-format", required_argument, NULL, O_LOGF},
        {"help", no_argument, NULL, O_HELP},
        {"version", no_argument, NULL, O_VER},
        {NULL, 0, NULL, 0},
    };
    int opt, rc = 0, done = 0; /* done: --help or --version answered */
    long long v = 0;
    opterr = 0;
    while (rc == 0 && (opt = getopt_long(argc, argv, ":u:h:p:a:n:", longopts, NULL)) != -1) {
        switch (opt) {
        case O_PG: o.pg = optarg; break;
        case O_PREFIX: o.prefix = optarg; break;
        /* the connection options, as redis-cli's (connopts.h) */
        case 'u': case 'h': case 'p': case 'a': case 'n': case O_USER: case O_PASS: {
            char name[3] = {'-', (char)opt, '\0'};
            const char *n = opt == O_USER ? "--user" : opt == O_PASS ? "--pass" : name;
            if (connopts_set(&conn, n, optarg, err, sizeof err) != 0)
                rc = usage_error("%s", err);
            break;
        }
        case O_INIT: init = 1; break;
        case O_TABLE:
            o.table = optarg;
            if (!pgb_table_ok(optarg))
                rc = usage_error("--table: \"%s\" is not 1..40 bytes of a-z, 0-9 and _ (not "
                                 "starting with a digit)", optarg);
            break;
        case O_QUEUES:
            free(queues ? queues[o.nqueues] : NULL);
            free(queues);
            queues = split_queues(optarg, &o.nqueues);
            if (queues == NULL || o.nqueues == 0) rc = usage_error("--queues: no queue in \"%s\"", optarg);
            o.queues = queues;
            break;
        case O_BATCH:
            if ((rc = parse_num("--batch", optarg, 1, RJQ_BATCH_MAX, &v)) == 0) o.batch = (int)v;
            break;
        case O_CLAIMS:
            if ((rc = parse_num("--claims", optarg, 1, 16, &v)) == 0) o.claims = (int)v;
            break;
        case O_POLL:
            if ((rc = parse_num("--poll-ms", optarg, 10, 86400000, &v)) == 0) o.poll_ms = (long)v;
            break;
        case O_SCAN:
            if ((rc = parse_num("--scan-ms", optarg, 10, 86400000, &v)) == 0) o.reconcile_ms = (long)v;
            break;
        case O_REPORT:
            if ((rc = parse_num("--report-ms", optarg, 0, 86400000, &v)) == 0) o.report_ms = (long)v;
            break;
        case O_DEDUP:
            if ((rc = parse_num("--dedup-ms", optarg, 0, RJQ_DELAY_MAX, &v)) == 0) o.dedup_ms = v;
            break;
        case O_MAXP:
            if ((rc = parse_num("--max-payload", optarg, 0, 1LL << 31, &v)) == 0) o.max_payload = (size_t)v;
            break;
        case O_MAXF:
            if ((rc = parse_num("--max-follow", optarg, 1, 100000000, &v)) == 0) o.max_follow = (size_t)v;
            break;
        case O_FAWAIT: o.follow_await = 1; break;
        /* routing and health */
        case O_ROUTE: rc = parse_route(optarg, &o); break;
        case O_LISTEN: ho.listen = optarg; break;
        case O_ALAG:
            if ((rc = parse_num("--alert-lag-ms", optarg, 1, 86400000LL * 365, &v)) == 0) ho.alert_lag_ms = (long)v;
            break;
        case O_AQUEUED:
            if ((rc = parse_num("--alert-queued", optarg, 1, LLONG_MAX, &v)) == 0) ho.alert_queued = v;
            break;
        case O_LOGF:
            if (log_format_parse(optarg, &logf) != 0)
                rc = usage_error("--log-format %s: expected text or json", optarg);
            break;
        case O_HELP: fputs(usage_text, stdout); rc = done = 1; break;
        case O_VER:
            printf("rjq-pg-bridge %d.%d.%d\n", rjq_version() / 10000, rjq_version() / 100 % 100,
                   rjq_version() % 100);
            rc = done = 1;
            break;
        case ':': rc = usage_error("%s needs a value", argv[optind - 1]); break;
        default: rc = usage_error("unknown option %s", argv[optind - 1]); break;
        }
    }
    if (rc == 0 && (ho.alert_lag_ms || ho.alert_queued) && ho.listen == NULL)
        rc = usage_error("%s: the alerts need --listen", ho.alert_lag_ms ? "--alert-lag-ms" : "--alert-queued");
    if (rc == 0 && optind < argc) rc = usage_error("unexpected argument \"%s\"", argv[optind]);
    if (rc == 0 && connopts_url(&conn, &o.redis_url, err, sizeof err) != 0) rc = usage_error("%s", err);
    o.redis_password = connopts_password(&conn);
    if (rc != 0) {
        if (queues) free(queues[o.nqueues]);
        free(queues);
        connopts_free(&conn);
        return done ? 0 : rc < 0 ? EXIT_USAGE : rc;
    }
    if (init) {
        rc = run_init(o.pg, o.table ? o.table : PGB_TABLE_DEFAULT);
        if (queues) free(queues[o.nqueues]);
        free(queues);
        connopts_free(&conn);
        return rc;
    }
    log_init(logf, "rjq-pg-bridge", 1);
    signal(SIGPIPE, SIG_IGN);
    struct event_base *base = event_base_new();
    struct event *sigint = base ? evsignal_new(base, SIGINT, on_signal, NULL) : NULL;
    struct event *sigterm = base ? evsignal_new(base, SIGTERM, on_signal, NULL) : NULL;
    if (sigint == NULL || sigterm == NULL) {
        fprintf(stderr, "rjq-pg-bridge: cannot create the event loop\n");
        connopts_free(&conn);
        return 1;
    }
    event_add(sigint, NULL);
    event_add(sigterm, NULL);
    running = bridge_start(base, &o);
    health *h = NULL;
    ho.pg = o.pg;
    ho.table = o.table;
    if (running && ho.listen && (h = health_start(base, running, &ho)) == NULL) {
        bridge_free(running);
        running = NULL;
    }
    if (running == NULL) {
        rc = 1;
    } else {
        event_base_dispatch(base);
        health_free(h);
        bridge_free(running);
        running = NULL;
    }
    event_free(sigint);
    event_free(sigterm);
    event_base_free(base);
    if (queues) free(queues[o.nqueues]);
    free(queues);
    connopts_free(&conn);
    return rc;
}
