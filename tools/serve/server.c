/*
 * rjq serve: listening, routing, auth, replies, signals (see server.h for
 * the other files).
 *
 * One libevent loop runs evhttp and one rjq client (two Redis
 * connections) for every request, event stream and queue watched.
 */
#include "listen.h"
#include "log.h"
#include "server.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/http_struct.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <rjq/libevent.h>

#include "utf8.h"

#define REFRESH_MS 1000
#define HEARTBEAT_S 15

double serve_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- replies ------------------------------------------------------------------ */

void reply_json(struct evhttp_request *req, int code, json_t *v) {
    char *text = v ? json_dumps(v, JSON_COMPACT | JSON_ENSURE_ASCII * 0) : NULL;
    json_decref(v);
    struct evbuffer *b = evbuffer_new();
    if (text == NULL || b == NULL) { /* out of memory */
        free(text);
        if (b) evbuffer_free(b);
        evhttp_send_error(req, 500, "Internal Server Error");
        return;
    }
    evbuffer_add(b, text, strlen(text));
    evbuffer_add(b, "\n", 1);
    free(text);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/json");
    evhttp_send_reply(req, code, NULL, b);
    evbuffer_free(b);
}

void reply_error(struct evhttp_request *req, int code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* messages may quote a client's bytes: keep the JSON valid */
    json_t *m = utf8_valid(msg, strlen(msg)) ? json_string(msg) : json_string("(invalid UTF-8)");
    reply_json(req, code, json_pack("{so}", "error", m));
}

int http_status_of(int rc) {
    switch (rc) {
    case RJQ_EINVAL:
    case RJQ_EJOBID:
    case RJQ_EQUEUENAME: return 400;
    case RJQ_ENOTFOUND: return 404;
    case RJQ_ESTATE:
    case RJQ_ESHARDED: return 409; /* (a call that does not span a sharded queue) */
    case RJQ_ETOOBIG: return 413;
    case RJQ_EFULL: return 429;
    default: return 503; /* Redis unreachable, out of memory, closing */
    }
}

void reply_rjq_error(struct evhttp_request *req, int rc, const char *detail) {
    const char *what = rjq_strerror(rc);
    int code = http_status_of(rc);
    /* the client's last error text belongs to this request only for what
     * Redis answered */
    if (rc != RJQ_EREDIS && rc != RJQ_EOOM && rc != RJQ_EWRONGTYPE && rc != RJQ_EAUTH &&
        rc != RJQ_EFULL)
        detail = NULL;
    if (code == 429)
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
    json_t *o = json_pack("{ss si}", "error", what, "code", rc);
    if (o && detail && detail[0] && utf8_valid(detail, strlen(detail)))
        json_object_set_new(o, "detail", json_string(detail));
    reply_json(req, code, o);
}

static void base64(const unsigned char *s, size_t len, char *out) {
    static const char digits[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < len; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (i + 1 < len ? (unsigned)s[i + 1] << 8 : 0) |
                     (i + 2 < len ? s[i + 2] : 0);
        *out++ = digits[v >> 18 & 63];
        *out++ = digits[v >> 12 & 63];
        *out++ = i + 1 < len ? digits[v >> 6 & 63] : '=';
        *out++ = i + 2 < len ? digits[v & 63] : '=';
    }
    *out = '\0';
}

json_t *json_name(const char *s) {
    return json_bytes(s, strlen(s));
}

json_t *json_bytes(const void *p, size_t len) {
    if (p == NULL) return json_null();
    if (utf8_valid(p, len)) return json_stringn(p, len);
    char *b = malloc((len + 2) / 3 * 4 + 1);
    if (b == NULL) return NULL;
    base64(p, len, b);
    json_t *o = json_pack("{ss}", "base64", b);
    free(b);
    return o;
}

const char *query_get(const struct evkeyvalq *args, const char *name) {
    return evhttp_find_header(args, name);
}

int query_ll(struct evhttp_request *req, const struct evkeyvalq *args, const char *name,
             long long lo, long long hi, long long def, long long *out) {
    const char *v = query_get(args, name);
    *out = def;
    if (v == NULL) return 0;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        reply_error(req, 400, "%s must be an integer in [%lld, %lld]", name, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

/* 1 when name is one of takes' space-separated names. */
static int takes_name(const char *takes, const char *name) {
    size_t n = strlen(name);
    for (const char *t = takes; *t;) {
        size_t len = strcspn(t, " ");
        if (len == n && memcmp(t, name, n) == 0) return 1;
        t += len;
        t += strspn(t, " ");
    }
    return 0;
}

/* Each route's parameters (routes.def), by route_id. */
static const char *const route_takes[ROUTES_] = {
#define ROUTE(name, method, path, takes) takes,
#include "routes.def"
#undef ROUTE
};

int query_only(struct evhttp_request *req, const struct evkeyvalq *args, route_id route) {
    const char *takes = (unsigned)route < ROUTES_ ? route_takes[route] : "";
    const struct evkeyval *kv;
    TAILQ_FOREACH(kv, args, next) {
        if (strcmp(kv->key, "access_token") == 0 || takes_name(takes, kv->key)) continue;
        json_t *list = json_array();
        char names[256] = "";
        size_t used = 0;
        for (const char *t = takes + strspn(takes, " "); *t && list;) {
            size_t len = strcspn(t, " ");
            if (json_array_append_new(list, json_stringn(t, len)) != 0) {
                json_decref(list);
                list = NULL;
            }
            if (used + len + 3 < sizeof names) {
                used += (size_t)snprintf(names + used, sizeof names - used, "%s%.*s",
                                         used ? ", " : "", (int)len, t);
            }
            t += len;
            t += strspn(t, " ");
        }
        char msg[512];
        const char *key = utf8_valid(kv->key, strlen(kv->key)) ? kv->key : "(invalid UTF-8)";
        snprintf(msg, sizeof msg, "unknown query parameter '%.100s': %s%s", key,
                 names[0] ? "this route takes " : "this route takes no parameter",
                 names);
        if (!utf8_valid(msg, strlen(msg))) /* (the name cut inside a character) */
            snprintf(msg, sizeof msg, "unknown query parameter: this route takes %s",
                     names[0] ? names : "no parameter");
        json_t *o = list ? json_pack("{ss so so}", "error", msg, "parameter",
                                     json_name(kv->key), "takes", list)
                         : NULL;
        reply_json(req, 400, o); /* (NULL: out of memory, a 500) */
        return -1;
    }
    return 0;
}

int request_alive(struct evhttp_request *req) {
    return evhttp_request_get_connection(req) != NULL;
}

/* ---- held requests -------------------------------------------------------------------- */

static void unlist(held *h) {
    if (!h->unwatched) return;
    if (h->wprev) h->wprev->wnext = h->wnext;
    else h->s->unwatched = h->wnext;
    if (h->wnext) h->wnext->wprev = h->wprev;
    h->unwatched = 0;
}

static void held_detach(held *h) {
    unlist(h);
    if (h->closed) {
        event_free(h->closed);
        h->closed = NULL;
    }
    if (h->probe) {
        event_free(h->probe);
        h->probe = NULL;
    }
    if (h->req && h->evcon) evhttp_connection_set_closecb(h->evcon, NULL, NULL);
    h->req = NULL;
    h->evcon = NULL;
}

static void held_gone(held *h) {
    if (h->req) h->s->nheld--;
    held_detach(h);
    if (h->on_gone) h->on_gone(h); /* may free h */
}

/* evhttp tears the connection down while the request waits (the client
 * went away, shutdown). A request it already detached from the connection
 * is ours to free; one still attached is freed by evhttp after this. */
static void on_conn_close(struct evhttp_connection *evcon, void *arg) {
    held *h = arg;
    struct evhttp_request *req = h->req;
    (void)evcon;
    held_gone(h);
    if (req && evhttp_request_get_connection(req) == NULL) evhttp_request_free(req);
}

/* The client is gone: end the wait (answering lets evhttp free the
 * connection and the request). */
static void gone(held *h) {
    struct evhttp_request *req = h->req;
    int streaming = h->gone_on_fin;
    held_gone(h); /* h may be gone */
    if (req && streaming) evhttp_send_reply_end(req); /* a reply under way */
    else if (req) evhttp_send_reply(req, 499, "Client Closed Request", NULL);
}

/* After a FIN: a client that only half-closed reads on; one that closed
 * its socket answers the "100 Continue" sent then with a reset. Looked
 * for now and then while the request waits. */
static void on_probe(evutil_socket_t fd, short what, void *arg) {
    held *h = arg;
    int err = 0;
    socklen_t len = sizeof err;
    (void)fd, (void)what;
    /* (after a FIN, recv() says 0 whatever follows: the reset is the
     * socket's pending error, and its state) */
    if (getsockopt(h->fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0) {
        gone(h);
        return;
    }
#ifdef TCP_INFO
    struct tcp_info ti;
    len = sizeof ti;
    if (getsockopt(h->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 && ti.tcpi_state == TCP_CLOSE) {
        gone(h);
        return;
    }
#endif
    struct timeval again = {2, 0};
    event_add(h->probe, &again);
}

/* Start (or go on) probing h's socket for a reset. */
static void start_probe(held *h, evutil_socket_t fd, long usec) {
    h->fd = fd;
    if (h->probe == NULL) h->probe = evtimer_new(h->s->base, on_probe, h);
    struct timeval soon = {0, usec};
    if (h->probe) event_add(h->probe, &soon);
}

/* Readable, a reset or a FIN (EV_CLOSED) on the client's socket. A reset
 * ends the wait (epoll reports it as EPOLLERR|EPOLLHUP, which libevent
 * gives to EV_READ and EV_WRITE events only, never to EV_CLOSED ones: the
 * watch must take EV_READ); so does a FIN for an event stream. Bytes to
 * read are a request pipelined behind this one: left for evhttp, the
 * socket is watched for a close only from then on (a level-triggered
 * EV_READ would fire on and on), and probed for a reset. A FIN alone may
 * be a half-close (the client sent its request and shut its writing side:
 * it still gets its answer) or a closed socket: an HTTP/1.1 client is sent
 * "100 Continue" (which any HTTP/1.1 client must take before the answer),
 * a closed socket answers it with a reset, which on_probe finds. */
static void on_closed(evutil_socket_t fd, short what, void *arg) {
    held *h = arg;
    char c;
    ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    int pending = r > 0 || (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
    if (r < 0 && !pending) { /* a reset */
        gone(h);
        return;
    }
    if (pending && !(what & EV_CLOSED)) {
        /* not a close: watch for EV_CLOSED alone, probe for a reset */
        event_free(h->closed);
        h->closed = event_new(h->s->base, fd, EV_CLOSED, on_closed, h);
        if (h->closed) event_add(h->closed, NULL);
        start_probe(h, fd, 250000);
        return;
    }
    if (h->gone_on_fin) { /* a FIN (maybe behind pipelined bytes) */
        gone(h);
        return;
    }
    event_free(h->closed); /* (EV_CLOSED would fire on and on) */
    h->closed = NULL;
    if (h->req && h->req->major == 1 && h->req->minor >= 1) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        (void)!send(fd, cont, sizeof cont - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        start_probe(h, fd, 250000);
    }
}

/* Watch h's socket for a reset or a close (EV_READ and EV_CLOSED). */
static void watch(held *h) {
    struct bufferevent *bev = evhttp_connection_get_bufferevent(h->evcon);
    evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
    if (fd >= 0) {
        h->closed = event_new(h->s->base, fd, EV_READ | EV_CLOSED, on_closed, h);
        if (h->closed) event_add(h->closed, NULL);
    }
}

/* Most requests are answered within milliseconds: their sockets are not
 * watched (two epoll_ctl calls each, ~5% of the server's CPU under load).
 * Every WATCH_AFTER_MS, the requests held since the last tick are. */
#define WATCH_AFTER_MS 100

static void on_watch(evutil_socket_t fd, short what, void *arg) {
    server *s = arg;
    (void)fd, (void)what;
    while (s->unwatched) {
        held *h = s->unwatched;
        unlist(h);
        watch(h);
    }
}

void held_start(server *s, held *h, struct evhttp_request *req, void (*on_gone)(held *h),
                int gone_on_fin) {
    h->s = s;
    h->req = req;
    h->on_gone = on_gone;
    h->gone_on_fin = gone_on_fin;
    h->closed = NULL;
    h->probe = NULL;
    h->unwatched = 0;
    h->evcon = evhttp_request_get_connection(req);
    s->nheld++;
    if (h->evcon == NULL) return;
    evhttp_connection_set_closecb(h->evcon, on_conn_close, h);
    if (!s->early_close) return;
    if (gone_on_fin || s->watch == NULL) { /* a stream: watched at once */
        watch(h);
        return;
    }
    h->wprev = NULL;
    h->wnext = s->unwatched;
    if (h->wnext) h->wnext->wprev = h;
    s->unwatched = h;
    h->unwatched = 1;
    if (!evtimer_pending(s->watch, NULL)) {
        struct timeval tv = {0, WATCH_AFTER_MS * 1000};
        evtimer_add(s->watch, &tv);
    }
}

struct evhttp_request *held_end(held *h) {
    struct evhttp_request *req = h->req;
    if (req) h->s->nheld--;
    held_detach(h);
    return req;
}

/* ---- auth ------------------------------------------------------------------------- */

/* Constant-time comparison of the token given with ours. */
static int token_ok(const server *s, const char *given) {
    if (given == NULL) return 0;
    size_t a = strlen(given), b = strlen(s->token);
    unsigned char diff = (unsigned char)(a != b);
    for (size_t i = 0; i < b; i++) diff |= (unsigned char)(s->token[i] ^ (i < a ? given[i] : 0));
    return diff == 0;
}

/* 1 when the request may go on; else it was answered 401. The token comes
 * as "Authorization: Bearer T", or as ?access_token=T (browsers cannot put
 * a header on an EventSource). */
static int authorized(server *s, struct evhttp_request *req, const struct evkeyvalq *args) {
    if (s->token == NULL) return 1;
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
    if (h && strncasecmp(h, "Bearer ", 7) == 0 && token_ok(s, h + 7)) return 1;
    if (token_ok(s, query_get(args, "access_token"))) return 1;
    evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
                      "Bearer realm=\"rjq\"");
    reply_error(req, 401, "a bearer token is needed (Authorization: Bearer TOKEN)");
    return 0;
}

static int read_token(server *s, const char *path) {
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "rjq: serve: --token-file %s: %s\n", path, strerror(errno));
        return -1;
    }
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ')) buf[--n] = '\0';
    if (n < 16 || n > 1000 || strcspn(buf, " \t\r\n") != n) {
        fprintf(stderr, "rjq: serve: --token-file %s: the token must be one line of 16 to "
                        "1000 characters without spaces\n", path);
        return -1;
    }
    s->token = strdup(buf);
    return s->token ? 0 : -1;
}

/* ---- routing ---------------------------------------------------------------------- */

/* A request a browser sent for another site's page (a form POST to
 * 127.0.0.1 needs no preflight): its Origin is not this server, or the
 * browser says so (Sec-Fetch-Site). Clients that are not browsers send
 * neither. */
static int cross_site(struct evhttp_request *req) {
    const struct evkeyvalq *h = evhttp_request_get_input_headers(req);
    const char *site = evhttp_find_header(h, "Sec-Fetch-Site");
    if (site && strcmp(site, "same-origin") != 0 && strcmp(site, "none") != 0) return 1;
    const char *origin = evhttp_find_header(h, "Origin"), *host = evhttp_find_header(h, "Host");
    if (origin == NULL) return 0;
    const char *o = strstr(origin, "://");
    return host == NULL || o == NULL || strcasecmp(o + 3, host) != 0;
}

static int is_get(struct evhttp_request *req) {
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    return m == EVHTTP_REQ_GET || m == EVHTTP_REQ_HEAD;
}

static void healthz(server *s, struct evhttp_request *req) {
    if (s->redis_up) reply_json(req, 200, json_pack("{ss sb}", "status", "ok", "redis", 1));
    else reply_json(req, 503, json_pack("{ss sb sI}", "status", "redis unavailable", "redis", 0,
                                        "down_since_ms", (json_int_t)s->redis_down_ms));
}

long long serve_wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The routes that read or write Redis: 503 while it is unreachable (a
 * listing from memory would say "no queue" where nothing is known). */
static int needs_redis(const char *path) {
    return strncmp(path, "/v1/queues", 10) == 0 || strcmp(path, "/v1/processes") == 0 ||
           strncmp(path, "/v1/demo", 8) == 0;
}

/* {"redis": up, "down_since_ms": since when it is not (null while up),
 * "nodes": each master's INFO is read (GET /v1/server has it)}: the
 * "server" event of the streams. */
json_t *server_state_json(const server *s) {
    return json_pack("{sb so sb}", "redis", s->redis_up, "down_since_ms",
                     s->redis_up ? json_null() : json_integer(s->redis_down_ms), "nodes",
                     s->redis_nodes != NULL);
}

static void on_request(struct evhttp_request *req, void *arg) {
    server *s = arg;
    deadline_request(s, req); /* it arrived whole */
    access_request(s, req);
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = evhttp_uri_get_path(uri);
    const char *query = evhttp_uri_get_query(uri);
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    struct evkeyvalq args;
    TAILQ_INIT(&args);
    s->requests++;
    if (path == NULL || path[0] == '\0') path = "/";
    if (query && evhttp_parse_query_str(query, &args) != 0) {
        reply_error(req, 400, "bad query string");
        goto out;
    }
    if (s->stopping) evhttp_add_header(evhttp_request_get_output_headers(req), "Connection",
                                       "close");
    if (evbuffer_get_length(evhttp_request_get_input_buffer(req)) > (size_t)s->o.max_body) {
        reply_error(req, 413, "the request is too large (--max-body %ld bytes)", s->o.max_body);
        goto out;
    }
    if (s->c == NULL) { /* (a kept-alive connection, after the client closed) */
        reply_error(req, 503, "the server is shutting down");
        goto out;
    }
    if (m == EVHTTP_REQ_OPTIONS) { /* no CORS: the dashboard is same-origin */
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
                          "GET, HEAD, POST, DELETE");
        evhttp_send_reply(req, 204, "No Content", NULL);
        goto out;
    }
    /* The dashboard's files and the probes need no token (the page asks
     * for one, the probes say nothing about jobs). */
    if (is_get(req) && assets_handle(req, path)) goto out;
    if (strcmp(path, "/healthz") == 0 && is_get(req)) {
        if (query_only(req, &args, ROUTE_HEALTHZ) == 0) healthz(s, req);
        goto out;
    }
    if (!authorized(s, req, &args)) goto out;
    if (s->o.read_only && !is_get(req) && !search_path(path)) {
        s->refused++;
        reply_error(req, 403, "this server is read-only");
        goto out;
    }
    if (!is_get(req) && cross_site(req)) {
        s->refused++;
        reply_error(req, 403, "cross-site request refused (Origin is not this server)");
        goto out;
    }
    if (s->nheld >= s->o.max_requests && strncmp(path, "/v1/", 4) == 0 &&
        strcmp(path, "/v1/server") != 0) { /* requests that may wait: sockets and memory bounded */
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
        reply_error(req, 503, "too many requests waiting (--max-requests %ld)",
                    s->o.max_requests);
        goto out;
    }
    if (!s->redis_up && needs_redis(path)) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
        reply_error(req, 503, "redis unavailable");
        goto out;
    }
    if (strcmp(path, "/metrics") == 0 && is_get(req)) {
        if (query_only(req, &args, ROUTE_METRICS) == 0) metrics_handle(s, req);
    } else if (strcmp(path, "/v1/events") == 0 && is_get(req)) {
        sse_handle(s, req, &args);
    } else if (s->o.demo && strncmp(path, "/v1/demo", 8) == 0 &&
               (path[8] == '\0' || path[8] == '/')) {
        demo_handle(s, req, path + 8, &args);
    } else if (strcmp(path, "/v1/processes") == 0 && is_get(req)) {
        api_processes(s, req, &args);
    } else if (strcmp(path, "/v1/server") == 0 && is_get(req)) {
        if (query_only(req, &args, ROUTE_SERVER) == 0) api_server(s, req);
    } else if (strncmp(path, "/v1/queues", 10) == 0 && (path[10] == '\0' || path[10] == '/')) {
        api_queues(s, req, path + 10, &args);
    } else {
        reply_error(req, 404, "no such route: see rjq(1), SERVE");
    }
out:
    evhttp_clear_headers(&args);
}

/* ---- lifetime ---------------------------------------------------------------------- */

static void on_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    server *s = data;
    (void)c;
    int was_up = s->redis_up;
    if (conn == RJQ_CONN_COMMAND && ev == RJQ_EVENT_CONNECTED) s->redis_up = 1;
    if (conn == RJQ_CONN_COMMAND && ev == RJQ_EVENT_DISCONNECTED) s->redis_up = 0;
    if (was_up && !s->redis_up) { /* Redis' figures read before are not current any more */
        s->redis_down_ms = serve_wall_ms();
        queues_forget_redis(s);
    }
    if (s->redis_up != was_up) sse_broadcast(s, "server", NULL, server_state_json(s), 0);
    if (ev != RJQ_EVENT_CONNECTED || detail)
        log_line(ev == RJQ_EVENT_CONNECTED ? "info" : "warn", NULL, 0,
                 "redis %s connection %s%s%s", conn == RJQ_CONN_COMMAND ? "command" : "subscriber",
                 ev == RJQ_EVENT_CONNECTED ? "connected"
                 : ev == RJQ_EVENT_DISCONNECTED ? "lost" : "error",
                 detail ? ": " : "", detail ? detail : "");
}

static void on_heartbeat(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    sse_heartbeat(arg);
}

#define DRAIN_MS 2000 /* how long requests waiting for Redis get at shutdown */

static void finish(server *s) {
    struct timeval flush = {0, 100000}; /* let the last replies reach their sockets */
    event_base_loopexit(s->base, &flush);
}

#define CLOSE_MS 1000 /* how long the demo pool's running jobs get at shutdown */

static void on_client_closed(const rjq_close_report *r, void *data) {
    server *s = data;
    s->c = NULL;
    if (r->handed_back)
        log_line("info", NULL, 0, "%zu running job(s) handed back to their queue", r->handed_back);
    finish(s);
}

#define CLOSE_HARD_MS 5000 /* a close that waits on a Redis that is gone ends then */

static void on_close_deadline(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    log_line("warn", NULL, 0, "Redis did not answer the close: stopping now");
    finish(arg); /* (the client is freed after the loop) */
}

/* At shutdown: the calls to Redis still out get their answers, for
 * DRAIN_MS at most; then the client closes (the demo pool's running jobs
 * finish or go back, their attempt not counted), for CLOSE_HARD_MS at
 * most (a completion is re-sent however long Redis is away). */
static void on_drain(evutil_socket_t fd, short what, void *arg) {
    server *s = arg;
    (void)fd, (void)what;
    if (s->nheld == 0 || serve_now_s() >= s->drain_until) {
        event_del(s->drain);
        demo_closing(s);
        if (s->c == NULL || rjq_client_close(s->c, CLOSE_MS, on_client_closed, s) != RJQ_OK) {
            finish(s);
            return;
        }
        struct timeval hard = {CLOSE_HARD_MS / 1000, 0};
        evtimer_add(s->close_deadline, &hard);
    }
}

static void on_signal(evutil_socket_t sig, short what, void *arg) {
    server *s = arg;
    (void)what;
    if (s->stopping) { /* a second signal: now */
        log_line("info", NULL, 0, "signal %d again: stopping now", (int)sig);
        finish(s);
        return;
    }
    log_line("info", NULL, 0, "signal %d: stopping", (int)sig);
    s->stopping = 1;
    if (s->bound) {
        evhttp_del_accept_socket(s->http, s->bound);
        s->bound = NULL;
        s->listener = NULL;
    }
    enqueue_cancel_all(s); /* waits end: 202 with the job's id */
    sse_close_all(s);
    s->drain_until = serve_now_s() + DRAIN_MS / 1000.0;
    struct timeval tick = {0, 50000};
    if (s->drain) event_add(s->drain, &tick);
    on_drain(-1, 0, s);
}

/* accept() failed: out of file descriptors (EMFILE, ENFILE) would make
 * the listener spin; it pauses for a second, the connections it has go on. */
static void on_accept_error(struct evconnlistener *l, void *arg) {
    server *s = arg;
    int err = EVUTIL_SOCKET_ERROR();
    static time_t last_said;
    if (time(NULL) != last_said) {
        last_said = time(NULL);
        log_line("error", NULL, 0, "accept: %s: pausing new connections for 1 s",
                 evutil_socket_error_to_string(err));
    }
    evconnlistener_disable(l);
    struct timeval one = {1, 0};
    if (s->resume_accept) event_add(s->resume_accept, &one);
}

static void on_resume_accept(evutil_socket_t fd, short what, void *arg) {
    server *s = arg;
    (void)fd, (void)what;
    if (s->listener && !s->stopping) evconnlistener_enable(s->listener);
}

/* Split "ADDR:PORT" / "[V6]:PORT" / ":PORT" / "PORT". */
static int parse_listen(const char *spec, char *addr, size_t size, int *port) {
    const char *colon = strrchr(spec, ':');
    const char *p = colon ? colon + 1 : spec;
    char *end;
    long v = strtol(p, &end, 10);
    if (*p == '\0' || *end || v < 0 || v > 65535) return -1;
    *port = (int)v;
    size_t alen = colon ? (size_t)(colon - spec) : 0;
    if (alen >= 2 && spec[0] == '[' && spec[alen - 1] == ']') {
        spec++;
        alen -= 2;
    }
    if (alen == 0) {
        snprintf(addr, size, "127.0.0.1");
        return 0;
    }
    if (alen >= size) return -1;
    memcpy(addr, spec, alen);
    addr[alen] = '\0';
    return 0;
}

static int start_listening(server *s) {
    char addr[128];
    int port;
    if (parse_listen(s->o.listen, addr, sizeof addr, &port) != 0) {
        fprintf(stderr, "rjq: serve: --listen %s: expected ADDR:PORT\n", s->o.listen);
        return -1;
    }
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    int slen;
    struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, addr, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((unsigned short)port);
        slen = sizeof *in4;
    } else if (inet_pton(AF_INET6, addr, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((unsigned short)port);
        slen = sizeof *in6;
    } else {
        fprintf(stderr, "rjq: serve: --listen %s: the address must be numeric\n", s->o.listen);
        return -1;
    }
    /* our own listener for a deep accept backlog (evhttp's is 128) */
    struct evconnlistener *l = evconnlistener_new_bind(
        s->base, NULL, s, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 4096,
        (struct sockaddr *)&ss, slen);
    if (l == NULL) {
        fprintf(stderr, "rjq: serve: cannot listen on %s: %s\n", s->o.listen, strerror(errno));
        return -1;
    }
    if ((s->bound = evhttp_bind_listener(s->http, l)) == NULL) {
        evconnlistener_free(l);
        fprintf(stderr, "rjq: serve: cannot listen on %s\n", s->o.listen);
        return -1;
    }
    s->listener = l;
    evconnlistener_set_error_cb(l, on_accept_error);
    listen_print_bound("listening on", evconnlistener_get_fd(l), port);
    return 0;
}


int serve_run(struct event_base *base, const rjq_client_options *co, const serve_options *o) {
    server *s = calloc(1, sizeof *s);
    int rc = 1;
    if (s == NULL) {
        fprintf(stderr, "rjq: serve: out of memory\n");
        return 1;
    }
    s->base = base;
    s->o = *o;
    s->started = serve_now_s();
    s->redis_down_ms = serve_wall_ms(); /* (until it first connects) */
    s->early_close = (event_base_get_features(base) & EV_FEATURE_EARLY_CLOSE) != 0;
    rjq_client_options copts = *co;
    copts.on_event = on_event;
    copts.event_data = s;
    int crc = rjq_libevent_client_new_dns(&s->c, base, NULL, &copts);
    if (crc != RJQ_OK) {
        fprintf(stderr, "rjq: serve: %s (%s)\n", rjq_strerror(crc), rjq_client_get_errmsg(NULL));
        free(s);
        return 1;
    }
    rjq_client_set_data(s->c, s);
    if (o->token_file && read_token(s, o->token_file) != 0) goto done;
    if (timing_map_init(&s->times, TIMING_JOBS) != 0) goto oom;
    s->http = evhttp_new(base);
    if (s->http == NULL) goto oom;
    evhttp_set_gencb(s->http, on_request, s);
    evhttp_set_allowed_methods(s->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
                                            EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
                                            EVHTTP_REQ_PUT | EVHTTP_REQ_PATCH);
    /* (no limit in evhttp, whose 413 is an HTML page: deadline.c and
     * on_request answer 413 with the JSON error) */
    evhttp_set_max_headers_size(s->http, 16384);
    evhttp_set_timeout(s->http, 60); /* reads (headers, body) and idle keep-alives */
    if (deadline_start(s, o->request_timeout_ms) != 0) goto oom;
    s->watch = evtimer_new(base, on_watch, s);
    s->close_deadline = evtimer_new(base, on_close_deadline, s);
    s->resume_accept = evtimer_new(base, on_resume_accept, s);
    s->drain = event_new(base, -1, EV_PERSIST, on_drain, s);
    if (s->resume_accept == NULL || s->drain == NULL || s->watch == NULL ||
        s->close_deadline == NULL)
        goto oom;
    if (start_listening(s) != 0) goto done;
    s->sigint = evsignal_new(base, SIGINT, on_signal, s);
    s->sigterm = evsignal_new(base, SIGTERM, on_signal, s);
    s->heartbeat = event_new(base, -1, EV_PERSIST, on_heartbeat, s);
    if (!s->sigint || !s->sigterm || !s->heartbeat) goto oom;
    struct timeval hb = {HEARTBEAT_S, 0};
    evsignal_add(s->sigint, NULL);
    evsignal_add(s->sigterm, NULL);
    event_add(s->heartbeat, &hb);
    if (queues_start(s) != 0) goto oom;
    event_base_dispatch(base);
    rc = 0;
    goto done;
oom:
    fprintf(stderr, "rjq: serve: out of memory\n");
done:
    if (!s->stopping) { /* a failed start: nothing waits yet, but be sure */
        s->stopping = 1;
        enqueue_cancel_all(s);
        sse_close_all(s);
    }
    demo_free(s);
    if (s->http) evhttp_free(s->http); /* closes connections and the listener */
    deadline_free(s);
    /* after the requests: pending callbacks find nothing to answer (closed
     * already, unless a second signal or a failed start came first) */
    if (s->c) rjq_client_free(s->c);
    search_free_all(s);
    sse_free(s);
    queues_free(s);
    timing_map_free(&s->times);
    if (s->sigint) event_free(s->sigint);
    if (s->sigterm) event_free(s->sigterm);
    if (s->heartbeat) event_free(s->heartbeat);
    if (s->refresh) event_free(s->refresh);
    if (s->resume_accept) event_free(s->resume_accept);
    if (s->watch) event_free(s->watch);
    if (s->close_deadline) event_free(s->close_deadline);
    if (s->drain) event_free(s->drain);
    free(s->token);
    free(s->list_after);
    free(s->processes_sent);
    access_free(s);
    free(s);
    return rc;
}
