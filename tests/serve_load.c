/*
 * Load test of rjq serve's enqueue-and-wait (POST /v1/queues/Q/jobs?wait=)
 * with examples/gateway_worker.c behind it: a private redis-server, the two
 * programs as child processes, and 1000 keep-alive HTTP connections
 * driving 10000 requests from this process (a small HTTP/1.1 client on
 * libevent bufferevents).
 *
 * Checks: every response carries its own request's result (unique payload
 * -> "done:" + payload; "fail..." payloads -> 502 with their error), the
 * server kept to its two Redis connections throughout, the 400/202/health
 * paths, that clients hanging up mid-request leave nothing pending (their
 * sockets closed: found by the reset that answers the "100 Continue" the
 * server sends after a FIN), and that both programs exit 0 on SIGTERM (a
 * sanitizer build fails on leaks). Prints requests/s and latency
 * percentiles; asserts no speed.
 *
 * The programs are found next to the test binary's folder (the build dir:
 * ../rjq); without them (examples not built) the test is skipped.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <strings.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "harness.h"
#include "server.h"

enum {
    CONNS = 1000,        /* concurrent keep-alive connections */
    TOTAL = 10000,       /* requests in all */
    FAIL_EVERY = 100,    /* one request in 100 asks for a failure */
    WORKER_CONCURRENCY = 500,
    GONE = 20            /* clients that hang up mid-request */
};

/* ---- child processes (stopped by pid, also when the test dies) ------------- */

static pid_t gw_pid, wk_pid;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The folder above the one holding this test binary (the build folder). */
static int program_path(char *out, size_t cap, const char *name) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return -1;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash == NULL) return -1;
    *slash = '\0';
    int len = snprintf(out, cap, "%s/../%s", self, name);
    if (len < 0 || (size_t)len >= cap) return -1;
    return access(out, X_OK);
}

static pid_t spawn(const char *const *argv, int *stdout_fd) {
    int fds[2] = {-1, -1};
    if (stdout_fd) ASSERT(pipe(fds) == 0);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        forget_all_on_abort();
        if (stdout_fd) {
            dup2(fds[1], 1);
            close(fds[0]);
            close(fds[1]);
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    kill_on_abort(pid);
    if (stdout_fd) {
        close(fds[1]);
        *stdout_fd = fds[0];
    }
    return pid;
}

/* SIGTERM, then wait (SIGKILL after 10 s). Returns the exit status. */
static int stop_child(pid_t *pid) {
    int status = -1;
    if (*pid <= 0) return -1;
    forget_on_abort(*pid);
    kill(*pid, SIGTERM);
    for (int i = 0; i < 1000; i++) {
        if (waitpid(*pid, &status, WNOHANG) == *pid) {
            *pid = 0;
            return status;
        }
        sleep_ms(10);
    }
    kill(*pid, SIGKILL);
    waitpid(*pid, &status, 0);
    *pid = 0;
    return -1;
}

/* Read "listening on HOST:PORT" from the server's stdout. */
static int read_port(int fd) {
    char buf[256];
    size_t n = 0;
    while (n < sizeof buf - 1) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 15000) <= 0) break;
        ssize_t r = read(fd, buf + n, 1);
        if (r <= 0) break;
        if (buf[n] == '\n') {
            buf[n] = '\0';
            const char *colon = strrchr(buf, ':');
            return strncmp(buf, "listening on ", 13) == 0 && colon ? atoi(colon + 1) : -1;
        }
        n++;
    }
    return -1;
}

/* ---- a blocking one-shot HTTP request ------------------------------------------------ */

static int connect_to(int port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT(fd >= 0);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Returns the status code (or -1) and the body in body (NUL-terminated). */
static int http_once(int port, const char *method, const char *path, const char *payload, char *body,
                     size_t cap) {
    int fd = connect_to(port);
    if (fd < 0) return -1;
    struct timeval tv = {15, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char req[1024];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n%s",
                     method, path, payload ? strlen(payload) : 0, payload ? payload : "");
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    static char resp[65536];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof resp - 1 && (r = read(fd, resp + got, sizeof resp - 1 - got)) > 0) got += (size_t)r;
    close(fd);
    resp[got] = '\0';
    int code = -1;
    if (sscanf(resp, "HTTP/1.%*d %d", &code) != 1) return -1;
    const char *b = strstr(resp, "\r\n\r\n");
    if (body) snprintf(body, cap, "%s", b ? b + 4 : "");
    return code;
}

/* ---- the load driver ----------------------------------------------------------------- */

typedef struct driver driver;

typedef struct conn {
    driver *d;
    struct bufferevent *bev;
    int idx;
    long req;            /* global index of the request in flight, -1 none */
    double sent_at;
    int have_head;
    int status;
    size_t body_len;
} conn;

struct driver {
    struct event_base *base;
    int port;
    unsigned salt;
    conn *conns;
    long next;           /* next request index to send */
    long done;           /* responses checked */
    long ok200, ok502, other, wrong, errors, open_conns;
    double *latency;     /* per request, seconds */
};

static int payload_of(const driver *d, long i, char *buf, size_t cap) {
    if (i % FAIL_EVERY == 7) return snprintf(buf, cap, "fail-%ld-%08x", i, d->salt);
    return snprintf(buf, cap, "load-%ld-%08x-%ld", i, d->salt, (i * 7919) % 100003);
}

static void send_next(conn *c) {
    driver *d = c->d;
    if (d->next >= TOTAL) {
        c->req = -1;
        return;
    }
    char payload[96];
    c->req = d->next++;
    int n = payload_of(d, c->req, payload, sizeof payload);
    struct evbuffer *out = bufferevent_get_output(c->bev);
    evbuffer_add_printf(out, "POST /v1/queues/gwload/jobs?wait=30000 HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n", n);
    evbuffer_add(out, payload, (size_t)n);
    c->have_head = 0;
    c->sent_at = now_s();
}

static void check_response(conn *c, const char *body, size_t len) {
    driver *d = c->d;
    char payload[96], expect[128];
    payload_of(d, c->req, payload, sizeof payload);
    int want;
    if (strncmp(payload, "fail", 4) == 0) {
        want = 502;
        snprintf(expect, sizeof expect, "\"error\":\"refused: %s\"}\n", payload);
    } else {
        want = 200;
        snprintf(expect, sizeof expect, "done:%s", payload);
    }
    if (c->status == 200) d->ok200++;
    else if (c->status == 502) d->ok502++;
    else d->other++;
    /* 502: {"id":"N","error":"refused: ..."}: its end is the request's */
    size_t elen = strlen(expect);
    int body_ok = want == 200 ? len == elen && memcmp(body, expect, len) == 0
                              : len > elen && memcmp(body + len - elen, expect, elen) == 0;
    if (c->status != want || !body_ok) {
        if (d->wrong++ < 5)
            fprintf(stderr, "request %ld: status %d body \"%.*s\", expected %d \"%s\"\n", c->req, c->status,
                    (int)(len < 100 ? len : 100), body, want, expect);
    }
    d->latency[c->req] = now_s() - c->sent_at;
    d->done++;
}

static void close_conn(conn *c) {
    if (c->bev) {
        bufferevent_free(c->bev);
        c->bev = NULL;
        c->d->open_conns--;
    }
}

static void on_read(struct bufferevent *bev, void *arg) {
    conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    for (;;) {
        if (!c->have_head) {
            struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
            if (end.pos < 0) return;
            size_t hlen = (size_t)end.pos + 4;
            char *head = malloc(hlen + 1);
            ASSERT(head != NULL);
            evbuffer_remove(in, head, hlen);
            head[hlen] = '\0';
            c->status = -1;
            sscanf(head, "HTTP/1.%*d %d", &c->status);
            c->body_len = 0;
            for (char *line = strstr(head, "\r\n"); line; line = strstr(line + 2, "\r\n"))
                if (strncasecmp(line + 2, "Content-Length:", 15) == 0) c->body_len = (size_t)atol(line + 17);
            free(head);
            c->have_head = 1;
        }
        if (evbuffer_get_length(in) < c->body_len) return;
        char *body = malloc(c->body_len + 1);
        ASSERT(body != NULL);
        evbuffer_remove(in, body, c->body_len);
        if (c->req >= 0) check_response(c, body, c->body_len);
        else c->d->errors++; /* a response nobody asked for */
        free(body);
        c->have_head = 0;
        send_next(c);
        if (c->req < 0) {
            close_conn(c);
            return;
        }
    }
}

static void on_event(struct bufferevent *bev, short what, void *arg) {
    conn *c = arg;
    (void)bev;
    if (what & BEV_EVENT_CONNECTED) return;
    if (c->req >= 0) {
        if (c->d->errors++ < 5) fprintf(stderr, "connection %d: event 0x%x with request %ld in flight\n", c->idx, what, c->req);
    }
    close_conn(c);
}

static void run_load(driver *d) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)d->port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < CONNS; i++) {
        conn *c = &d->conns[i];
        c->d = d;
        c->idx = i;
        c->req = -1;
        c->bev = bufferevent_socket_new(d->base, -1, BEV_OPT_CLOSE_ON_FREE);
        ASSERT(c->bev != NULL);
        bufferevent_setcb(c->bev, on_read, NULL, on_event, c);
        bufferevent_enable(c->bev, EV_READ | EV_WRITE);
        ASSERT(bufferevent_socket_connect(c->bev, (struct sockaddr *)&a, sizeof a) == 0);
        d->open_conns++;
        send_next(c); /* written once connected */
    }
    long target = TOTAL;
    loop_until_count(d->base, &d->done, target, 50000);
    for (int i = 0; i < CONNS; i++) close_conn(&d->conns[i]);
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* ---- Redis side checks ----------------------------------------------------------------- */

typedef struct conn_ids {
    long long cmd, sub; /* CLIENT LIST ids of the server's connections */
    int ncmd, nsub;     /* how many connections carry each name */
    int total;          /* connections in all */
} conn_ids;

static conn_ids server_connections(redisContext *rc, const char *name) {
    conn_ids r = {0};
    char sub[96];
    snprintf(sub, sizeof sub, "%s:sub", name);
    redisReply *rep = server_cmd(rc, "CLIENT LIST");
    ASSERT(rep->type == REDIS_REPLY_STRING);
    for (char *line = rep->str; line && *line; ) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        long long id = -1;
        char nm[128] = "";
        sscanf(line, "id=%lld", &id);
        const char *np = strstr(line, " name=");
        if (np) sscanf(np + 6, "%127s", nm);
        if (id >= 0) r.total++;
        if (strcmp(nm, name) == 0) {
            r.ncmd++;
            r.cmd = id;
        } else if (strcmp(nm, sub) == 0) {
            r.nsub++;
            r.sub = id;
        }
        line = nl ? nl + 1 : NULL;
    }
    freeReplyObject(rep);
    return r;
}

static long long info_field(redisContext *rc, const char *section, const char *field) {
    redisReply *rep = server_cmd(rc, "INFO %s", section);
    char needle[96];
    snprintf(needle, sizeof needle, "\r\n%s:", field);
    const char *p = rep->type == REDIS_REPLY_STRING ? strstr(rep->str, needle) : NULL;
    long long v = p ? atoll(p + strlen(needle)) : -1;
    freeReplyObject(rep);
    return v;
}

/* The server's /v1/server "waiting" and "awaits" counters. */
static int server_idle(int port) {
    char body[1024];
    if (http_once(port, "GET", "/v1/server", NULL, body, sizeof body) != 200) return 0;
    return strstr(body, "\"waiting\":0,") != NULL && strstr(body, "\"awaits\":0,") != NULL;
}

/* ---- the test ------------------------------------------------------------------------ */

TEST(serve_thousand_concurrent_requests_each_get_own_result) {
    char gw_path[PATH_MAX], wk_path[PATH_MAX];
    if (program_path(gw_path, sizeof gw_path, "rjq") != 0 ||
        program_path(wk_path, sizeof wk_path, "rjq-gateway_worker") != 0) {
        fprintf(stderr, "SKIPPED: rjq / rjq-gateway_worker not built (RJQ_BUILD_EXAMPLES=OFF?)\n");
        return;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    ASSERT(getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > CONNS + 64);

    test_server s;
    server_start_guarded(&s, NULL);
    redisContext *rc = server_connect(&s);

    const char *wk_argv[] = {wk_path, "-r", s.url, "-c", "500", "-P", "gl", "-n", "gl-worker", "gwload", NULL};
    char conc[16];
    snprintf(conc, sizeof conc, "%d", WORKER_CONCURRENCY);
    wk_argv[4] = conc;
    wk_pid = spawn(wk_argv, NULL);
    const char *gw_argv[] = {gw_path, "-u", s.url, "--prefix", "gl", "serve", "--listen", "127.0.0.1:0", NULL};
    int gw_out = -1;
    gw_pid = spawn(gw_argv, &gw_out);
    int port = read_port(gw_out);
    ASSERT(port > 0);

    /* up: the server healthy, the worker connected */
    int code = -1;
    for (int i = 0; i < 500 && (code = http_once(port, "GET", "/healthz", NULL, NULL, 0)) != 200; i++) sleep_ms(10);
    ASSERT_EQ(200, code);
    conn_ids before = {0};
    for (int i = 0; i < 500; i++) {
        before = server_connections(rc, "rjq-serve");
        if (before.nsub == 1 && server_connections(rc, "gl-worker").nsub == 1) break;
        sleep_ms(10);
    }
    ASSERT_EQ(1, before.ncmd);
    ASSERT_EQ(1, before.nsub);
    long long accepted0 = info_field(rc, "stats", "total_connections_received");

    /* the load */
    driver d;
    memset(&d, 0, sizeof d);
    d.base = event_base_new();
    d.port = port;
    d.salt = (unsigned)getpid() * 2654435761u;
    d.conns = calloc(CONNS, sizeof *d.conns);
    d.latency = calloc(TOTAL, sizeof *d.latency);
    ASSERT(d.base && d.conns && d.latency);
    double t0 = now_s();
    run_load(&d);
    double elapsed = now_s() - t0;

    long fails = 0;
    for (long i = 0; i < TOTAL; i++) fails += i % FAIL_EVERY == 7;
    qsort(d.latency, TOTAL, sizeof *d.latency, cmp_double);
    fprintf(stderr,
            "serve load: %d requests over %d connections in %.2f s = %.0f requests/s; latency p50 %.1f ms, "
            "p90 %.1f ms, p99 %.1f ms, max %.1f ms; %ld x 200, %ld x 502, %ld other\n",
            TOTAL, CONNS, elapsed, TOTAL / elapsed, d.latency[TOTAL / 2] * 1e3, d.latency[TOTAL * 9 / 10] * 1e3,
            d.latency[TOTAL * 99 / 100] * 1e3, d.latency[TOTAL - 1] * 1e3, d.ok200, d.ok502, d.other);
    ASSERT_EQ(TOTAL, d.done);
    ASSERT_EQ(0, d.wrong);
    ASSERT_EQ(0, d.errors);
    ASSERT_EQ(TOTAL - fails, d.ok200);
    ASSERT_EQ(fails, d.ok502);

    /* Redis saw no new connection, and the server's two are the same ones */
    conn_ids after = server_connections(rc, "rjq-serve");
    ASSERT_EQ(accepted0, info_field(rc, "stats", "total_connections_received"));
    ASSERT_EQ(1, after.ncmd);
    ASSERT_EQ(1, after.nsub);
    ASSERT_EQ(before.cmd, after.cmd);
    ASSERT_EQ(before.sub, after.sub);
    ASSERT_EQ(5, info_field(rc, "clients", "connected_clients")); /* server 2, worker 2, this test 1 */

    /* the other answers */
    char body[512];
    ASSERT_EQ(200, http_once(port, "GET", "/healthz", NULL, body, sizeof body));
    ASSERT_STREQ("{\"status\":\"ok\",\"redis\":true}\n", body);
    ASSERT_EQ(400, http_once(port, "POST", "/v1/queues/bad%20name/jobs", "x", body, sizeof body));
    ASSERT_EQ(400, http_once(port, "POST", "/v1/queues/%7Bq%7D/jobs", "x", body, sizeof body));
    ASSERT_EQ(202, http_once(port, "POST", "/v1/queues/gwidle/jobs?wait=200", "nobody-runs-this", body,
                             sizeof body));
    ASSERT_EQ(200, http_once(port, "POST", "/v1/queues/gwload/jobs?wait=30000", "", body, sizeof body));
    ASSERT_STREQ("done:", body);

    /* Clients that hang up while their job waits: nothing stays pending. */
    int gone[GONE];
    for (int i = 0; i < GONE; i++) {
        gone[i] = connect_to(port);
        ASSERT(gone[i] >= 0);
        char req[256];
        int n = snprintf(req, sizeof req,
                         "POST /v1/queues/gwidle/jobs?wait=30000 HTTP/1.1\r\nHost: t\r\n"
                         "Content-Length: 6\r\n\r\ngone%02d", i);
        ASSERT_EQ(n, write(gone[i], req, (size_t)n));
    }
    int pending_seen = 0;
    for (int i = 0; i < 500 && !pending_seen; i++) {
        if (http_once(port, "GET", "/v1/server", NULL, body, sizeof body) == 200) {
            const char *p = strstr(body, "\"waiting\":");
            pending_seen = p && atoi(p + 10) == GONE;
        }
        if (!pending_seen) sleep_ms(10);
    }
    ASSERT(pending_seen);
    for (int i = 0; i < GONE; i++) close(gone[i]);
    int idle = 0;
    for (int i = 0; i < 1000 && !(idle = server_idle(port)); i++) sleep_ms(10);
    ASSERT(idle); /* each await cancelled long before its 30 s timeout */
    ASSERT_EQ(200, http_once(port, "POST", "/v1/queues/gwload/jobs?wait=30000", "still-alive", body,
                             sizeof body));
    ASSERT_STREQ("done:still-alive", body);

    /* Clean exits (a sanitizer build reports leaks through the status);
     * in between, Redis goes away: /healthz and new jobs answer 503. */
    int st = stop_child(&wk_pid);
    ASSERT(WIFEXITED(st));
    ASSERT_EQ(0, WEXITSTATUS(st));
    redisFree(rc);
    server_stop_guarded(&s);
    for (int i = 0; i < 500 && (code = http_once(port, "GET", "/healthz", NULL, NULL, 0)) != 503; i++) sleep_ms(10);
    ASSERT_EQ(503, code);
    ASSERT_EQ(503, http_once(port, "POST", "/v1/queues/gwload/jobs?wait=30000", "redis-is-down", body,
                             sizeof body));
    st = stop_child(&gw_pid);
    ASSERT(WIFEXITED(st));
    ASSERT_EQ(0, WEXITSTATUS(st));

    close(gw_out);
    free(d.conns);
    free(d.latency);
    event_base_free(d.base);
}
