/*
 * rjq-gateway: an HTTP front for job queues. A request becomes a job; the
 * response carries the job's result.
 *
 *     rjq-gateway [-l HOST] [-p PORT] [-r REDIS_URL] [-t TIMEOUT_MS] ...
 *
 *     POST /jobs/<queue>   body = the job's payload. Enqueues it with
 *                          rjq_enqueue_await() and answers when it ends:
 *                            200  the job completed; body = its result
 *                            502  the job died; body = its last error
 *                            504  no outcome within the timeout
 *                            400  bad queue name, job id or timeout
 *                            413  payload too large
 *                            429  the queue is full (--max-waiting), with
 *                                 Retry-After: 1; nothing was enqueued
 *                            503  the job could not be enqueued (Redis
 *                                 down, out of memory, shutting down,
 *                                 more than 10000 distinct queue names)
 *                          Optional: ?timeout_ms=N (1..max) per request;
 *                          an Idempotency-Key header becomes the job id, so
 *                          a retried request awaits the same job instead of
 *                          enqueueing another one. Responses carry X-Job-Id.
 *     GET /healthz         200 "ok" while the Redis command connection is up,
 *                          else 503.
 *     GET /stats           counters as JSON (requests pending, awaits, ...).
 *
 * One rjq client, so two Redis connections in all, serves every request.
 * A client that goes away before its job ends is noticed (EV_CLOSED on the
 * connection, and evhttp's close callback); its await is cancelled and the
 * job's late outcome is ignored. The job itself still runs.
 *
 * SIGINT/SIGTERM: stop accepting connections, give pending requests up to
 * the grace period (-g, default 5000 ms) to get their outcome, answer the
 * rest 503, free everything and exit 0. A second signal skips the grace.
 *
 * Environment: GATEWAY_HOST, GATEWAY_PORT (default 8080; 0 picks a free
 * port), REDIS_URL, RJQ_PREFIX, GATEWAY_TIMEOUT_MS (default 30000). The
 * gateway prints "listening on HOST:PORT" on stdout once it accepts.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <rjq/libevent.h>

#define QUEUE_BUCKETS 256
#define QUEUES_MAX 10000          /* distinct queue names kept open */
#define TIMEOUT_MAX_MS 600000L    /* cap of ?timeout_ms */

typedef struct config {
    const char *host;
    int port;
    const char *url;
    const char *prefix;
    const char *name;
    long timeout_ms;
    long grace_ms;
    size_t max_payload;
    long max_waiting;     /* queues' bound (0: none): full -> 429 */
} config;

typedef struct qent {
    char *name;
    rjq_queue *q;
    struct qent *next;
} qent;

struct pending;

typedef struct gateway {
    config cfg;
    struct event_base *base;
    struct evhttp *http;
    struct evconnlistener *listener;
    struct evhttp_bound_socket *bound;
    struct event *sigint, *sigterm, *grace;
    rjq_client *c;
    qent *queues[QUEUE_BUCKETS];
    size_t nqueues;
    struct pending *pending;  /* requests waiting for their job */
    long npending;
    int early_close;          /* the backend reports EV_CLOSED */
    int stopping;             /* 0 running, 1 draining, 2 cancelling */
    /* counters */
    long long requests, completed, dead, timedout, rejected, failed, disconnects;
} gateway;

/* One request waiting for its job. */
typedef struct pending {
    gateway *g;
    struct evhttp_request *req;    /* NULL once the client went away */
    struct evhttp_connection *evcon;
    struct event *closed;          /* EV_CLOSED on the client's socket */
    rjq_await *aw;                 /* NULL once the await has ended */
    struct pending *prev, *next;
} pending;

/* ---- small helpers ------------------------------------------------------ */

static void reply_text(struct evhttp_request *req, int code, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void reply_text(struct evhttp_request *req, int code, const char *reason, const char *fmt, ...) {
    struct evbuffer *b = evbuffer_new();
    va_list ap;
    va_start(ap, fmt);
    if (b) evbuffer_add_vprintf(b, fmt, ap);
    va_end(ap);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/plain; charset=utf-8");
    evhttp_send_reply(req, code, reason, b);
    if (b) evbuffer_free(b);
}

static size_t hash_name(const char *s) {
    size_t h = 5381;
    for (; *s; s++) h = h * 33 + (unsigned char)*s;
    return h % QUEUE_BUCKETS;
}

/* The queue handle for a name, opened on first use. */
static int get_queue(gateway *g, const char *name, rjq_queue **out) {
    size_t b = hash_name(name);
    for (qent *e = g->queues[b]; e; e = e->next)
        if (strcmp(e->name, name) == 0) {
            *out = e->q;
            return RJQ_OK;
        }
    /* Handles live until the client is freed: keep their number bounded. */
    if (g->nqueues >= QUEUES_MAX) return RJQ_EBUSY;
    rjq_queue *q;
    rjq_queue_options qo = {0};
    qo.max_waiting = g->cfg.max_waiting;
    int rc = rjq_queue_open(g->c, name, &qo, &q);
    if (rc != RJQ_OK) return rc;
    qent *e = calloc(1, sizeof *e);
    if (e == NULL || (e->name = strdup(name)) == NULL) {
        free(e);
        return RJQ_ENOMEM; /* (the handle is freed with the client) */
    }
    e->q = q;
    e->next = g->queues[b];
    g->queues[b] = e;
    g->nqueues++;
    *out = q;
    return RJQ_OK;
}

static void free_queue_cache(gateway *g) {
    for (size_t i = 0; i < QUEUE_BUCKETS; i++)
        while (g->queues[i]) {
            qent *e = g->queues[i];
            g->queues[i] = e->next;
            free(e->name);
            free(e);
        }
    g->nqueues = 0;
}

/* ---- pending requests ------------------------------------------------------ */

static void maybe_finish_stop(gateway *g);

static void unlink_pending(pending *p) {
    gateway *g = p->g;
    if (p->prev) p->prev->next = p->next;
    else g->pending = p->next;
    if (p->next) p->next->prev = p->prev;
    g->npending--;
}

/* Forget the HTTP side of p: from now on nothing touches its request. */
static void detach_http(pending *p) {
    if (p->closed) {
        event_free(p->closed);
        p->closed = NULL;
    }
    if (p->req && p->evcon) evhttp_connection_set_closecb(p->evcon, NULL, NULL);
    p->req = NULL;
    p->evcon = NULL;
}

/* The await's outcome: answer the client, if it is still there. */
static void on_outcome(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    pending *p = data;
    gateway *g = p->g;
    struct evhttp_request *req = p->req;
    (void)c;
    p->aw = NULL;
    detach_http(p);
    if (req) {
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
        if (o && o->id) evhttp_add_header(h, "X-Job-Id", o->id);
        if (g->stopping) evhttp_add_header(h, "Connection", "close");
        switch (status) {
        case RJQ_OK: {
            struct evbuffer *b = evbuffer_new();
            if (b) evbuffer_add(b, o->result, o->result_len);
            evhttp_add_header(h, "Content-Type", "application/octet-stream");
            evhttp_send_reply(req, 200, "OK", b);
            if (b) evbuffer_free(b);
            g->completed++;
            break;
        }
        case RJQ_EJOBDEAD:
            reply_text(req, 502, "Bad Gateway", "%s\n", o && o->error ? o->error : "job failed");
            g->dead++;
            break;
        case RJQ_ETIMEDOUT:
            reply_text(req, 504, "Gateway Timeout", "no outcome for job %s in time\n", o && o->id ? o->id : "?");
            g->timedout++;
            break;
        case RJQ_ECANCELED:
            reply_text(req, 503, "Service Unavailable", "gateway shutting down\n");
            g->failed++;
            break;
        case RJQ_EFULL: /* a bounded queue at its bound: come back later */
            evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
            reply_text(req, 429, "Too Many Requests", "queue full: %s\n", rjq_client_errmsg(g->c));
            g->failed++;
            break;
        default: /* the enqueue failed (EOOM, EWRONGTYPE, ECONN, ...) */
            reply_text(req, 503, "Service Unavailable", "enqueue failed: %s\n", rjq_strerror(status));
            g->failed++;
            break;
        }
    }
    unlink_pending(p);
    free(p);
    maybe_finish_stop(g);
}

/* The client went away: end the await (its callback frees p). */
static void abandon(pending *p) {
    p->g->disconnects++;
    detach_http(p);
    if (p->aw) {
        rjq_await_cancel(p->aw); /* calls on_outcome, which frees p, before it returns */
    } else {
        unlink_pending(p);
        free(p);
    }
}

/* EV_CLOSED: the client closed its end while its job runs. Answer (the
 * write fails and evhttp frees the connection and request as usual), and
 * cancel the await. */
static void on_client_closed(evutil_socket_t fd, short what, void *arg) {
    pending *p = arg;
    struct evhttp_request *req = p->req;
    (void)fd, (void)what;
    abandon(p); /* p is gone */
    if (req) evhttp_send_reply(req, 499, "Client Closed Request", NULL);
}

/* evhttp tears the connection down while a request waits (shutdown, a
 * failure it noticed). A request it detached from the connection is ours
 * to free; one still attached is freed by evhttp right after this. */
static void on_conn_close(struct evhttp_connection *evcon, void *arg) {
    pending *p = arg;
    struct evhttp_request *req = p->req;
    (void)evcon;
    abandon(p); /* p is gone */
    if (req && evhttp_request_get_connection(req) == NULL) evhttp_request_free(req);
}

/* ---- request handlers ---------------------------------------------------------- */

static long parse_timeout(gateway *g, struct evhttp_request *req, int *bad) {
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    long t = g->cfg.timeout_ms;
    *bad = 0;
    if (query == NULL) return t;
    struct evkeyvalq args;
    TAILQ_INIT(&args);
    if (evhttp_parse_query_str(query, &args) != 0) {
        *bad = 1;
        return t;
    }
    const char *v = evhttp_find_header(&args, "timeout_ms");
    if (v) {
        char *end;
        errno = 0;
        long x = strtol(v, &end, 10);
        if (errno || end == v || *end || x < 1 || x > TIMEOUT_MAX_MS) *bad = 1;
        else t = x;
    }
    evhttp_clear_headers(&args);
    return t;
}

static void handle_job(gateway *g, struct evhttp_request *req, const char *raw_name) {
    g->requests++;
    if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "POST");
        reply_text(req, 405, "Method Not Allowed", "use POST\n");
        g->rejected++;
        return;
    }
    if (g->stopping) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
        reply_text(req, 503, "Service Unavailable", "gateway shutting down\n");
        g->failed++;
        return;
    }
    if (!rjq_client_connected(g->c)) { /* fail fast rather than time out */
        reply_text(req, 503, "Service Unavailable", "redis unavailable\n");
        g->failed++;
        return;
    }
    size_t nlen = 0;
    char *name = evhttp_uridecode(raw_name, 0, &nlen);
    rjq_queue *q = NULL;
    int rc = name == NULL ? RJQ_ENOMEM
             : strlen(name) != nlen || strchr(name, '/') ? RJQ_EQUEUENAME
                                                          : get_queue(g, name, &q);
    free(name);
    if (rc == RJQ_EQUEUENAME || rc == RJQ_EINVAL) {
        reply_text(req, 400, "Bad Request", "invalid queue name\n");
        g->rejected++;
        return;
    }
    if (rc != RJQ_OK) {
        reply_text(req, 503, "Service Unavailable", "%s\n",
                   rc == RJQ_EBUSY ? "too many distinct queues" : rjq_strerror(rc));
        g->failed++;
        return;
    }
    int bad;
    rjq_await_options ao = {0};
    ao.timeout_ms = parse_timeout(g, req, &bad);
    if (bad) {
        reply_text(req, 400, "Bad Request", "timeout_ms must be 1..%ld\n", TIMEOUT_MAX_MS);
        g->rejected++;
        return;
    }
    rjq_job_options jo = {0};
    jo.id = evhttp_find_header(evhttp_request_get_input_headers(req), "Idempotency-Key");

    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    const unsigned char *body = len ? evbuffer_pullup(in, -1) : (const unsigned char *)"";
    pending *p = calloc(1, sizeof *p);
    if (p == NULL || body == NULL) {
        free(p);
        reply_text(req, 503, "Service Unavailable", "out of memory\n");
        g->failed++;
        return;
    }
    p->g = g;
    rc = rjq_enqueue_await(q, body, len, &jo, &ao, on_outcome, p, &p->aw);
    if (rc != RJQ_OK) {
        free(p);
        if (rc == RJQ_ETOOBIG) reply_text(req, 413, "Payload Too Large", "%s\n", rjq_strerror(rc));
        else if (rc == RJQ_EJOBID || rc == RJQ_EINVAL)
            reply_text(req, 400, "Bad Request", "%s\n", rjq_strerror(rc));
        else reply_text(req, 503, "Service Unavailable", "%s\n", rjq_strerror(rc));
        if (rc == RJQ_ETOOBIG || rc == RJQ_EJOBID || rc == RJQ_EINVAL) g->rejected++;
        else g->failed++;
        return;
    }
    /* The callback never runs inside rjq_enqueue_await: p is ours here. */
    p->req = req;
    p->evcon = evhttp_request_get_connection(req);
    p->next = g->pending;
    if (p->next) p->next->prev = p;
    g->pending = p;
    g->npending++;
    if (p->evcon) {
        evhttp_connection_set_closecb(p->evcon, on_conn_close, p);
        struct bufferevent *bev = evhttp_connection_get_bufferevent(p->evcon);
        evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
        if (g->early_close && fd >= 0) {
            p->closed = event_new(g->base, fd, EV_CLOSED, on_client_closed, p);
            if (p->closed) event_add(p->closed, NULL);
        }
    }
}

static void handle_stats(gateway *g, struct evhttp_request *req) {
    struct evbuffer *b = evbuffer_new();
    if (b)
        evbuffer_add_printf(b,
                            "{\"pending\":%ld,\"awaits\":%zu,\"requests\":%lld,\"completed\":%lld,"
                            "\"dead\":%lld,\"timedout\":%lld,\"rejected\":%lld,\"failed\":%lld,"
                            "\"disconnects\":%lld,\"queues\":%zu,\"redis\":%d}\n",
                            g->npending, rjq_client_awaits(g->c), g->requests, g->completed, g->dead,
                            g->timedout, g->rejected, g->failed, g->disconnects, g->nqueues,
                            rjq_client_connected(g->c));
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, 200, "OK", b);
    if (b) evbuffer_free(b);
}

static void on_request(struct evhttp_request *req, void *arg) {
    gateway *g = arg;
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    if (path == NULL) path = "/";
    if (strncmp(path, "/jobs/", 6) == 0) {
        handle_job(g, req, path + 6);
    } else if (strcmp(path, "/healthz") == 0 && (cmd == EVHTTP_REQ_GET || cmd == EVHTTP_REQ_HEAD)) {
        if (rjq_client_connected(g->c)) reply_text(req, 200, "OK", "ok\n");
        else reply_text(req, 503, "Service Unavailable", "redis unavailable\n");
    } else if (strcmp(path, "/stats") == 0 && cmd == EVHTTP_REQ_GET) {
        handle_stats(g, req);
    } else {
        reply_text(req, 404, "Not Found", "POST /jobs/<queue>, GET /healthz, GET /stats\n");
    }
}

/* ---- lifetime ----------------------------------------------------------------- */

static void on_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    (void)c, (void)data;
    const char *what = ev == RJQ_EVENT_CONNECTED ? "connected" : ev == RJQ_EVENT_DISCONNECTED ? "disconnected" : "error";
    fprintf(stderr, "rjq-gateway: redis %s connection %s%s%s\n",
            conn == RJQ_CONN_COMMAND ? "command" : "subscriber", what, detail ? ": " : "", detail ? detail : "");
}

/* Leave the loop once nothing is pending (after a stop signal). Replies
 * written just before get a moment to reach the socket. */
static void maybe_finish_stop(gateway *g) {
    if (g->stopping && g->npending == 0) {
        struct timeval flush = {0, 50000};
        event_base_loopexit(g->base, &flush);
    }
}

/* Cancel what is still pending: the callbacks answer 503. */
static void cancel_pending(gateway *g) {
    g->stopping = 2;
    while (g->pending) {
        pending *p = g->pending;
        if (p->aw) rjq_await_cancel(p->aw); /* on_outcome unlinks and frees p */
        else {
            unlink_pending(p);
            free(p);
        }
    }
    maybe_finish_stop(g);
}

static void on_grace(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    cancel_pending(arg);
}

static void on_signal(evutil_socket_t sig, short what, void *arg) {
    gateway *g = arg;
    (void)what;
    if (g->stopping) {
        fprintf(stderr, "rjq-gateway: signal %d again: cancelling %ld pending request(s)\n", (int)sig, g->npending);
        cancel_pending(g);
        return;
    }
    fprintf(stderr, "rjq-gateway: signal %d: draining %ld pending request(s)\n", (int)sig, g->npending);
    g->stopping = 1;
    if (g->bound) { /* stop accepting: close the listening socket */
        evhttp_del_accept_socket(g->http, g->bound);
        g->bound = NULL;
        g->listener = NULL;
    }
    if (g->npending == 0) {
        maybe_finish_stop(g);
        return;
    }
    struct timeval tv = {g->cfg.grace_ms / 1000, (g->cfg.grace_ms % 1000) * 1000};
    event_add(g->grace, &tv);
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: rjq-gateway [options]\n"
            "  -l, --listen HOST      address to listen on (GATEWAY_HOST, default 127.0.0.1)\n"
            "  -p, --port PORT        port (GATEWAY_PORT, default 8080; 0: any free port)\n"
            "  -r, --redis URL        Redis URL (REDIS_URL, default redis://127.0.0.1:6379)\n"
            "  -P, --prefix PREFIX    rjq key prefix (RJQ_PREFIX, default rjq)\n"
            "  -n, --name NAME        Redis client name (default rjq-gateway)\n"
            "  -t, --timeout MS       await timeout per request (GATEWAY_TIMEOUT_MS, default 30000)\n"
            "  -g, --grace MS         time pending requests get on shutdown (default 5000)\n"
            "  -m, --max-payload N    largest request body in bytes (default 16 MiB)\n"
            "  -w, --max-waiting N    bound every queue at N waiting jobs: past it, 429\n"
            "                         (GATEWAY_MAX_WAITING, default 0: none)\n"
            "  -h, --help\n");
}

static long env_long(const char *name, long def) {
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : def;
}

static int parse_args(config *cfg, int argc, char **argv) {
    static const struct option longs[] = {
        {"listen", required_argument, NULL, 'l'}, {"port", required_argument, NULL, 'p'},
        {"redis", required_argument, NULL, 'r'},  {"prefix", required_argument, NULL, 'P'},
        {"name", required_argument, NULL, 'n'},   {"timeout", required_argument, NULL, 't'},
        {"grace", required_argument, NULL, 'g'},  {"max-payload", required_argument, NULL, 'm'},
        {"max-waiting", required_argument, NULL, 'w'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    cfg->host = getenv("GATEWAY_HOST") && *getenv("GATEWAY_HOST") ? getenv("GATEWAY_HOST") : "127.0.0.1";
    cfg->port = (int)env_long("GATEWAY_PORT", 8080);
    cfg->url = getenv("REDIS_URL");
    cfg->prefix = getenv("RJQ_PREFIX");
    cfg->name = "rjq-gateway";
    cfg->timeout_ms = env_long("GATEWAY_TIMEOUT_MS", 30000);
    cfg->grace_ms = 5000;
    cfg->max_payload = 16u << 20;
    cfg->max_waiting = env_long("GATEWAY_MAX_WAITING", 0);
    int ch;
    while ((ch = getopt_long(argc, argv, "l:p:r:P:n:t:g:m:w:h", longs, NULL)) != -1) {
        switch (ch) {
        case 'l': cfg->host = optarg; break;
        case 'p': cfg->port = atoi(optarg); break;
        case 'r': cfg->url = optarg; break;
        case 'P': cfg->prefix = optarg; break;
        case 'n': cfg->name = optarg; break;
        case 't': cfg->timeout_ms = atol(optarg); break;
        case 'g': cfg->grace_ms = atol(optarg); break;
        case 'm': cfg->max_payload = (size_t)atol(optarg); break;
        case 'w': cfg->max_waiting = atol(optarg); break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return -1;
        }
    }
    if (optind != argc || cfg->port < 0 || cfg->port > 65535 || cfg->timeout_ms < 1 ||
        cfg->timeout_ms > TIMEOUT_MAX_MS || cfg->grace_ms < 0 || cfg->max_payload == 0 || cfg->max_waiting < 0) {
        usage(stderr);
        return -1;
    }
    return 0;
}

/* More descriptors for many keep-alive clients, when the hard limit allows. */
static void raise_fd_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static int listen_on(gateway *g) {
    struct sockaddr_storage ss;
    int sslen;
    char spec[300];
    snprintf(spec, sizeof spec, strchr(g->cfg.host, ':') ? "[%s]:%d" : "%s:%d", g->cfg.host, g->cfg.port);
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, g->cfg.host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)g->cfg.port);
        sslen = sizeof *in4;
    } else if (inet_pton(AF_INET6, g->cfg.host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)g->cfg.port);
        sslen = sizeof *in6;
    } else {
        fprintf(stderr, "rjq-gateway: bad listen address %s (numeric addresses only)\n", g->cfg.host);
        return -1;
    }
    /* Our own listener for a deep accept backlog (evhttp's is 128). */
    g->listener = evconnlistener_new_bind(g->base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 4096,
                                          (struct sockaddr *)&ss, sslen);
    if (g->listener == NULL) {
        fprintf(stderr, "rjq-gateway: cannot listen on %s: %s\n", spec, strerror(errno));
        return -1;
    }
    if ((g->bound = evhttp_bind_listener(g->http, g->listener)) == NULL) {
        evconnlistener_free(g->listener);
        g->listener = NULL;
        return -1;
    }
    /* (evhttp now owns the listener and frees it with the http object) */
    struct sockaddr_storage got;
    socklen_t gl = sizeof got;
    char addr[INET6_ADDRSTRLEN] = "?";
    int port = g->cfg.port;
    if (getsockname(evconnlistener_get_fd(g->listener), (struct sockaddr *)&got, &gl) == 0) {
        if (got.ss_family == AF_INET) {
            struct sockaddr_in *a4 = (struct sockaddr_in *)&got;
            inet_ntop(AF_INET, &a4->sin_addr, addr, sizeof addr);
            port = ntohs(a4->sin_port);
        } else if (got.ss_family == AF_INET6) {
            struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&got;
            inet_ntop(AF_INET6, &a6->sin6_addr, addr, sizeof addr);
            port = ntohs(a6->sin6_port);
        }
    }
    printf("listening on %s:%d\n", addr, port);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv) {
    gateway g;
    memset(&g, 0, sizeof g);
    if (parse_args(&g.cfg, argc, argv) != 0) return 2;
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();

    int rc = 1;
    g.base = event_base_new();
    if (g.base == NULL) return 1;
    g.early_close = (event_base_get_features(g.base) & EV_FEATURE_EARLY_CLOSE) != 0;
    rjq_client_options o = {0};
    o.url = g.cfg.url;
    o.prefix = g.cfg.prefix;
    o.name = g.cfg.name;
    o.max_payload = g.cfg.max_payload;
    o.on_event = on_event;
    int err = rjq_libevent_client_new(&g.c, g.base, &o);
    if (err != RJQ_OK) {
        fprintf(stderr, "rjq-gateway: %s: %s\n", rjq_strerror(err), g.c ? rjq_client_errmsg(g.c) : "client");
        event_base_free(g.base);
        return 1;
    }
    g.http = evhttp_new(g.base);
    g.sigint = evsignal_new(g.base, SIGINT, on_signal, &g);
    g.sigterm = evsignal_new(g.base, SIGTERM, on_signal, &g);
    g.grace = evtimer_new(g.base, on_grace, &g);
    if (g.http == NULL || g.sigint == NULL || g.sigterm == NULL || g.grace == NULL) {
        fprintf(stderr, "rjq-gateway: out of memory\n");
        goto out;
    }
    evhttp_set_gencb(g.http, on_request, &g);
    evhttp_set_max_body_size(g.http, (ev_ssize_t)g.cfg.max_payload);
    evhttp_set_max_headers_size(g.http, 16384);
    evhttp_set_timeout(g.http, 120); /* idle keep-alive connections */
    evhttp_set_allowed_methods(g.http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
                                           EVHTTP_REQ_DELETE);
    if (listen_on(&g) != 0) goto out;
    event_add(g.sigint, NULL);
    event_add(g.sigterm, NULL);

    event_base_dispatch(g.base);
    rc = 0;
    fprintf(stderr,
            "rjq-gateway: stopped: %lld request(s), %lld completed, %lld dead, %lld timed out, %lld rejected, "
            "%lld failed, %lld client(s) gone\n",
            g.requests, g.completed, g.dead, g.timedout, g.rejected, g.failed, g.disconnects);

out:
    /* Anything still pending gets its 503 from the ECANCELED callbacks. */
    g.stopping = 2;
    rjq_client_free(g.c);
    free_queue_cache(&g);
    if (g.http) evhttp_free(g.http); /* closes connections and the listener */
    if (g.sigint) event_free(g.sigint);
    if (g.sigterm) event_free(g.sigterm);
    if (g.grace) event_free(g.grace);
    event_base_free(g.base);
    return rc;
}
