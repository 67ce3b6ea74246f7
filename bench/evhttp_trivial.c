/*
 * rjq-evhttp-trivial: the floor for bench/serve_wrk.sh. An evhttp server
 * that answers every POST at once with a small fixed body (other methods:
 * 405), with the listener set up as rjq serve sets up its own: an
 * evconnlistener with a backlog of 4096 handed to evhttp_bind_listener,
 * the same evhttp limits and timeout, one thread, one libevent loop.
 *
 *     rjq-evhttp-trivial [ADDR:PORT]      (default 127.0.0.1:0, a free port)
 *
 * Prints "listening on ADDR:PORT" once it accepts; runs until SIGINT or
 * SIGTERM (exit 0). The request body is read in full by evhttp, as in rjq
 * serve, and dropped.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#define REPLY_BODY "done:trivial"

typedef struct app {
    struct event_base *base;
    unsigned long long requests;
} app;

static void on_request(struct evhttp_request *req, void *data) {
    app *a = data;
    a->requests++;
    if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "POST");
        evhttp_send_error(req, 405, "Method Not Allowed");
        return;
    }
    struct evbuffer *b = evbuffer_new();
    if (b == NULL || evbuffer_add(b, REPLY_BODY, sizeof REPLY_BODY - 1) != 0) {
        if (b) evbuffer_free(b);
        evhttp_send_error(req, 500, "Internal Server Error");
        return;
    }
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "application/octet-stream");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

static void on_signal(evutil_socket_t sig, short what, void *data) {
    app *a = data;
    (void)sig;
    (void)what;
    event_base_loopexit(a->base, NULL);
}

/* "ADDR:PORT" or "[V6]:PORT" */
static int parse_listen(const char *s, char *addr, size_t n, int *port) {
    const char *colon;
    const char *start = s;
    size_t len;
    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (end == NULL || end[1] != ':') return -1;
        start = s + 1;
        len = (size_t)(end - start);
        colon = end + 1;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL) return -1;
        len = (size_t)(colon - s);
    }
    if (len == 0 || len >= n) return -1;
    memcpy(addr, start, len);
    addr[len] = '\0';
    char *e;
    long p = strtol(colon + 1, &e, 10);
    if (colon[1] == '\0' || *e != '\0' || p < 0 || p > 65535) return -1;
    *port = (int)p;
    return 0;
}

static int start_listening(app *a, struct evhttp *http, const char *listen) {
    char addr[128];
    int port;
    if (parse_listen(listen, addr, sizeof addr, &port) != 0) {
        fprintf(stderr, "rjq-evhttp-trivial: %s: expected ADDR:PORT\n", listen);
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
        fprintf(stderr, "rjq-evhttp-trivial: %s: the address must be numeric\n", listen);
        return -1;
    }
    /* as rjq serve: our own listener for a deep accept backlog (evhttp's is 128) */
    struct evconnlistener *l =
        evconnlistener_new_bind(a->base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE,
                                4096, (struct sockaddr *)&ss, slen);
    if (l == NULL) {
        fprintf(stderr, "rjq-evhttp-trivial: cannot listen on %s: %s\n", listen, strerror(errno));
        return -1;
    }
    if (evhttp_bind_listener(http, l) == NULL) {
        evconnlistener_free(l);
        fprintf(stderr, "rjq-evhttp-trivial: cannot listen on %s\n", listen);
        return -1;
    }
    struct sockaddr_storage got;
    socklen_t gl = sizeof got;
    char shown[INET6_ADDRSTRLEN] = "?";
    int gport = port;
    if (getsockname(evconnlistener_get_fd(l), (struct sockaddr *)&got, &gl) == 0) {
        if (got.ss_family == AF_INET6) {
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&got)->sin6_addr, shown, sizeof shown);
            gport = ntohs(((struct sockaddr_in6 *)&got)->sin6_port);
        } else {
            inet_ntop(AF_INET, &((struct sockaddr_in *)&got)->sin_addr, shown, sizeof shown);
            gport = ntohs(((struct sockaddr_in *)&got)->sin_port);
        }
    }
    printf(got.ss_family == AF_INET6 ? "listening on [%s]:%d\n" : "listening on %s:%d\n", shown,
           gport);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv) {
    const char *listen = "127.0.0.1:0";
    if (argc > 2 || (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0))) {
        fprintf(argc == 2 ? stdout : stderr, "usage: rjq-evhttp-trivial [ADDR:PORT]\n");
        return argc == 2 ? 0 : 2;
    }
    if (argc == 2) listen = argv[1];
    signal(SIGPIPE, SIG_IGN);
    app a = {0};
    int rc = 1;
    struct evhttp *http = NULL;
    struct event *sigint = NULL, *sigterm = NULL;
    a.base = event_base_new();
    if (a.base == NULL || (http = evhttp_new(a.base)) == NULL) {
        fprintf(stderr, "rjq-evhttp-trivial: out of memory\n");
        goto out;
    }
    evhttp_set_gencb(http, on_request, &a);
    /* the limits rjq serve sets (its default --max-body) */
    evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
                                         EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
                                         EVHTTP_REQ_PUT | EVHTTP_REQ_PATCH);
    evhttp_set_max_body_size(http, 16 * 1024 * 1024);
    evhttp_set_max_headers_size(http, 16384);
    evhttp_set_timeout(http, 60);
    if (start_listening(&a, http, listen) != 0) goto out;
    sigint = evsignal_new(a.base, SIGINT, on_signal, &a);
    sigterm = evsignal_new(a.base, SIGTERM, on_signal, &a);
    if (sigint == NULL || sigterm == NULL) {
        fprintf(stderr, "rjq-evhttp-trivial: out of memory\n");
        goto out;
    }
    evsignal_add(sigint, NULL);
    evsignal_add(sigterm, NULL);
    if (event_base_dispatch(a.base) == 0) rc = 0;
    fprintf(stderr, "rjq-evhttp-trivial: %llu requests\n", a.requests);
out:
    if (sigint) event_free(sigint);
    if (sigterm) event_free(sigterm);
    if (http) evhttp_free(http); /* closes the connections and the listener */
    if (a.base) event_base_free(a.base);
    return rc;
}
