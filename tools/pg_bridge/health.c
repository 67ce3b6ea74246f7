/*
 * The bridge's health over HTTP (health.h): GET /healthz and GET /metrics
 * on --listen, with libevent's evhttp.
 *
 * The bridge's own counters come from bridge_get_counters(); the rows
 * waiting in PostgreSQL (their number and the age of the oldest) from a
 * query on a connection of its own, once a second (HEALTH_SAMPLE_MS): a
 * PostgreSQL that does not answer shows as down, and the last numbers
 * stay with their age in /metrics.
 */
#include "health.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "listen.h"
#include "pgconn.h"
#include "sqlname.h"
#include "statsfmt.h"

#define HEALTH_SAMPLE_MS 1000
#define HEALTH_STALE_S 10.0 /* a count older than this: unhealthy */

/* The rows the bridge has to move ($1: the queues served, as the claim's
 * $2): their number and the age of the oldest, in seconds. */
#define HEALTH_SQL_QUEUED                                                                  \
    "SELECT count(*), COALESCE(extract(epoch FROM now() - min(created_at)), 0)\n"          \
    "FROM rjq_jobs WHERE status = 'queued' AND ($1::text[] IS NULL OR queue = ANY($1))"

struct health {
    health_options o;
    struct event_base *base;
    bridge *b;
    struct evhttp *http;
    pgconn *pg;
    char *sql_queued;   /* HEALTH_SQL_QUEUED for the bridge's table */
    struct event *sample;
    int sampling;
    int have;           /* a sample came */
    long long queued;   /* of the last sample */
    double lag_s;
    double sampled_at;  /* monotonic seconds */
    long long moved_at_sample; /* for the rate */
    double rate;        /* rows moved per second between the last two samples */
    double rate_at;
    long long requests;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the sample ------------------------------------------------------------ */

static void on_sampled(void *arg, PGresult **res, int n, const char *err, const char *sqlstate) {
    (void)sqlstate;
    health *h = arg;
    h->sampling = 0;
    if (err || n < 1 || PQntuples(res[0]) != 1) return;
    long long queued = atoll(PQgetvalue(res[0], 0, 0));
    double lag = atof(PQgetvalue(res[0], 0, 1));
    h->queued = queued >= 0 ? queued : 0;
    h->lag_s = lag >= 0 ? lag : 0;
    h->sampled_at = now_s();
    h->have = 1;
}

/* Count the queued rows (one query at a time). */
static void count_queued(health *h) {
    if (h->sampling || !pgconn_up(h->pg)) return;
    const char *v[1] = {bridge_queues_literal(h->b)};
    pgconn_query(h->pg, h->sql_queued, 1, v, NULL, NULL, 0);
    if (pgconn_sync(h->pg, on_sampled, h) == 0) h->sampling = 1;
}

static void on_sample(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    health *h = arg;
    bridge_counters c;
    bridge_get_counters(h->b, &c);
    double t = now_s();
    if (h->rate_at > 0 && t > h->rate_at) h->rate = (double)(c.moved - h->moved_at_sample) / (t - h->rate_at);
    h->rate_at = t;
    h->moved_at_sample = c.moved;
    count_queued(h);
}

static void on_pg_state(pgconn *p, int up, const char *err, void *arg) {
    (void)p;
    (void)err;
    health *h = arg;
    if (!up) h->sampling = 0;
    else count_queued(h);
}

/* ---- the handlers -------------------------------------------------------------- */

/* Why the bridge is unhealthy ("" when it is not), in buf. */
static const char *unhealthy(health *h, const bridge_counters *c, char *buf, size_t size) {
    size_t len = 0;
    buf[0] = '\0';
#define WHY(...)                                                                                \
    do {                                                                                        \
        if (len < size) len += (size_t)snprintf(buf + len, size - len, len ? "; " : "");         \
        if (len < size) len += (size_t)snprintf(buf + len, size - len, __VA_ARGS__);             \
    } while (0)
    if (!c->pg_claims_up || !c->pg_outcomes_up) WHY("PostgreSQL is down");
    if (!c->redis_up) WHY("Redis is down");
    /* no sample for HEALTH_STALE_S: PostgreSQL does not answer */
    if (c->pg_claims_up && c->pg_outcomes_up && (!h->have || now_s() - h->sampled_at > HEALTH_STALE_S))
        WHY("no recent count of the queued rows");
    if (h->have && h->o.alert_lag_ms > 0 && h->lag_s * 1000 > (double)h->o.alert_lag_ms)
        WHY("lag %.3f s is over --alert-lag-ms %ld", h->lag_s, h->o.alert_lag_ms);
    if (h->have && h->o.alert_queued > 0 && h->queued > h->o.alert_queued)
        WHY("%lld rows queued, over --alert-queued %lld", h->queued, h->o.alert_queued);
#undef WHY
    return buf;
}

static void reply_text(struct evhttp_request *req, int code, const char *reason, const char *ctype,
                       const char *body, size_t len) {
    struct evbuffer *out = evbuffer_new();
    if (out == NULL) {
        evhttp_send_error(req, 503, "out of memory");
        return;
    }
    evbuffer_add(out, body, len);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", ctype);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-store");
    evhttp_send_reply(req, code, reason, out);
    evbuffer_free(out);
}

static void healthz(health *h, struct evhttp_request *req) {
    bridge_counters c;
    bridge_get_counters(h->b, &c);
    char why[1024], body[1200];
    unhealthy(h, &c, why, sizeof why);
    int n = why[0] ? snprintf(body, sizeof body, "unhealthy: %s\n", why)
                   : snprintf(body, sizeof body, "ok\n");
    reply_text(req, why[0] ? 503 : 200, why[0] ? "Service Unavailable" : "OK",
               "text/plain; charset=utf-8", body, (size_t)n < sizeof body ? (size_t)n : sizeof body - 1);
}

static void metric(FILE *out, const char *name, const char *type, const char *help, double v) {
    prom_family(out, name, type, help);
    fprintf(out, "%s %.17g\n", name, v);
}

static void metrics(health *h, struct evhttp_request *req) {
    bridge_counters c;
    bridge_get_counters(h->b, &c);
    char why[1024];
    unhealthy(h, &c, why, sizeof why);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (out == NULL) {
        evhttp_send_error(req, 503, "out of memory");
        return;
    }
    metric(out, "rjq_pg_bridge_rows_queued", "gauge",
           "Rows queued in PostgreSQL for this bridge (of the last count).", (double)h->queued);
    metric(out, "rjq_pg_bridge_lag_seconds", "gauge",
           "Age of the oldest queued row (of the last count; 0: none queued).", h->lag_s);
    metric(out, "rjq_pg_bridge_sample_age_seconds", "gauge",
           "Age of the last count of the queued rows (-1: none yet).",
           h->have ? now_s() - h->sampled_at : -1);
    metric(out, "rjq_pg_bridge_rows_moved_total", "counter",
           "Rows this bridge moved into rjq as new jobs.", (double)c.moved);
    metric(out, "rjq_pg_bridge_rows_moved_per_second", "gauge",
           "Rows moved per second over the last second.", h->rate);
    metric(out, "rjq_pg_bridge_rows_existing_total", "counter",
           "Rows claimed whose job existed already (moved before: nothing enqueued).",
           (double)c.existed);
    metric(out, "rjq_pg_bridge_rows_bad_total", "counter",
           "Rows marked failed because they cannot become jobs.", (double)c.bad);
    prom_family(out, "rjq_pg_bridge_outcomes_total", "counter",
                "Outcomes written back to rows, by the status written.");
    fprintf(out, "rjq_pg_bridge_outcomes_total{status=\"completed\"} %lld\n", c.completed);
    fprintf(out, "rjq_pg_bridge_outcomes_total{status=\"failed\"} %lld\n", c.failed);
    fprintf(out, "rjq_pg_bridge_outcomes_total{status=\"cancelled\"} %lld\n", c.cancelled);
    fprintf(out, "rjq_pg_bridge_outcomes_total{status=\"queued\"} %lld\n", c.requeued);
    fprintf(out, "rjq_pg_bridge_outcomes_total{status=\"unknown\"} %lld\n", c.unknown);
    metric(out, "rjq_pg_bridge_following", "gauge", "Jobs whose outcome the bridge follows.",
           (double)c.following);
    metric(out, "rjq_pg_bridge_job_reads_total", "counter",
           "Job records read from Redis for an outcome.", (double)c.job_reads);
    metric(out, "rjq_pg_bridge_writes_waiting", "gauge", "Outcomes known, not yet written.",
           (double)c.writes_waiting);
    prom_family(out, "rjq_pg_bridge_up", "gauge", "1 while the connection is up.");
    fprintf(out, "rjq_pg_bridge_up{conn=\"postgres_claims\"} %d\n", c.pg_claims_up);
    fprintf(out, "rjq_pg_bridge_up{conn=\"postgres_outcomes\"} %d\n", c.pg_outcomes_up);
    fprintf(out, "rjq_pg_bridge_up{conn=\"redis\"} %d\n", c.redis_up);
    metric(out, "rjq_pg_bridge_healthy", "gauge", "1 while /healthz answers 200.", why[0] ? 0 : 1);
    metric(out, "rjq_pg_bridge_http_requests_total", "counter", "HTTP requests received.",
           (double)h->requests);
    if (fclose(out) != 0 || text == NULL) {
        free(text);
        evhttp_send_error(req, 503, "out of memory");
        return;
    }
    reply_text(req, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", text, len);
    free(text);
}

static void on_request(struct evhttp_request *req, void *arg) {
    health *h = arg;
    h->requests++;
    const char *uri = evhttp_request_get_uri(req);
    size_t n = strcspn(uri ? uri : "", "?");
    int get = evhttp_request_get_command(req) == EVHTTP_REQ_GET ||
              evhttp_request_get_command(req) == EVHTTP_REQ_HEAD;
    if (uri && n == 8 && strncmp(uri, "/healthz", 8) == 0 && get) healthz(h, req);
    else if (uri && n == 8 && strncmp(uri, "/metrics", 8) == 0 && get) metrics(h, req);
    else if (uri && ((n == 8 && (strncmp(uri, "/healthz", 8) == 0 || strncmp(uri, "/metrics", 8) == 0))))
        evhttp_send_error(req, 405, "GET only");
    else evhttp_send_error(req, 404, "/healthz or /metrics");
}

/* ---- start, free ------------------------------------------------------------------ */

/* "ADDR:PORT" or "[ADDR6]:PORT", numeric. */
static int parse_listen(const char *s, char *addr, size_t size, int *port) {
    const char *colon = strrchr(s, ':');
    if (colon == NULL || colon == s) return -1;
    const char *a = s, *e = colon;
    if (*a == '[') {
        if (e[-1] != ']') return -1;
        a++;
        e--;
    }
    if ((size_t)(e - a) >= size) return -1;
    memcpy(addr, a, (size_t)(e - a));
    addr[e - a] = '\0';
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end || p < 0 || p > 65535) return -1;
    *port = (int)p;
    return 0;
}

health *health_start(struct event_base *base, bridge *b, const health_options *o) {
    char addr[128];
    int port;
    if (parse_listen(o->listen, addr, sizeof addr, &port) != 0) {
        fprintf(stderr, "rjq-pg-bridge: --listen %s: expected ADDR:PORT (a numeric address)\n",
                o->listen);
        return NULL;
    }
    health *h = calloc(1, sizeof *h);
    if (h == NULL) return NULL;
    h->o = *o;
    h->base = base;
    h->b = b;
    h->http = evhttp_new(base);
    if (h->http == NULL) goto fail;
    evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST);
    evhttp_set_gencb(h->http, on_request, h);
    evhttp_set_timeout(h->http, 30);
    struct evhttp_bound_socket *bound = evhttp_bind_socket_with_handle(h->http, addr, (unsigned short)port);
    if (bound == NULL) {
        fprintf(stderr, "rjq-pg-bridge: cannot listen on %s\n", o->listen);
        goto fail;
    }
    h->sql_queued = pgb_sql(HEALTH_SQL_QUEUED, o->table ? o->table : PGB_TABLE_DEFAULT);
    h->pg = pgconn_new(base, o->pg, NULL, on_pg_state, NULL, h);
    h->sample = event_new(base, -1, EV_PERSIST, on_sample, h);
    if (h->sql_queued == NULL || h->pg == NULL || h->sample == NULL) goto fail;
    struct timeval tv = {HEALTH_SAMPLE_MS / 1000, (HEALTH_SAMPLE_MS % 1000) * 1000};
    event_add(h->sample, &tv);
    listen_print_bound("health on", evhttp_bound_socket_get_fd(bound), port);
    return h;
fail:
    health_free(h);
    return NULL;
}

void health_free(health *h) {
    if (h == NULL) return;
    if (h->http) evhttp_free(h->http); /* requests in progress end */
    pgconn_free(h->pg);                /* the sample in flight ends (on_sampled) */
    if (h->sample) event_free(h->sample);
    free(h->sql_queued);
    free(h);
}
