/*
 * rjq serve: what each answered request leaves behind: its count in
 * rjq_serve_requests_total{code,method} (metrics.c) and, with
 * --access-log, a line in the log (tools/log.c): method, path (without
 * the query, which may carry the token), status, bytes of the body
 * (null for a stream), duration (from the request arriving whole to its
 * answer written) and the client's address.
 *
 * Both happen when evhttp has written the answer (its on-complete
 * callback, shared with deadline.c): a request whose client went away
 * before its answer could be written is neither counted nor logged. The
 * time it arrived rides in the request's own input headers (evhttp frees
 * them with it, so nothing is kept for a request that never completes);
 * a client's header of that name is removed first.
 */
#include "server.h"

#include <stdlib.h>
#include <string.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "log.h"

#define ARRIVED "X-Rjq-Serve-Arrived"

const char *access_method_name(enum evhttp_cmd_type m) {
    switch (m) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_PUT: return "PUT";
    case EVHTTP_REQ_DELETE: return "DELETE";
    case EVHTTP_REQ_OPTIONS: return "OPTIONS";
    case EVHTTP_REQ_TRACE: return "TRACE";
    case EVHTTP_REQ_CONNECT: return "CONNECT";
    case EVHTTP_REQ_PATCH: return "PATCH";
    }
    return "OTHER";
}

static void count(server *s, int code, const char *method) {
    for (size_t i = 0; i < s->nanswered; i++)
        if (s->answered[i].code == code && s->answered[i].method == method) {
            s->answered[i].n++;
            return;
        }
    if (s->nanswered == s->answered_cap) {
        size_t cap = s->answered_cap ? 2 * s->answered_cap : 16;
        answered_count *a = realloc(s->answered, cap * sizeof *a);
        if (a == NULL) return; /* (out of memory: that one goes uncounted) */
        s->answered = a;
        s->answered_cap = cap;
    }
    s->answered[s->nanswered++] = (answered_count){code, method, 1};
}

static void on_complete(struct evhttp_request *req, void *arg) {
    server *s = arg;
    deadline_complete(s, req);
    int code = evhttp_request_get_response_code(req);
    const char *method = access_method_name(evhttp_request_get_command(req));
    count(s, code, method);
    if (!s->o.access_log) return;
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    const char *at = evhttp_find_header(in, ARRIVED);
    double dur = at ? serve_now_s() - strtod(at, NULL) : 0;
    const char *cl = evhttp_find_header(evhttp_request_get_output_headers(req), "Content-Length");
    char *end = NULL;
    long long bytes = cl ? strtoll(cl, &end, 10) : -1;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    char *peer = NULL;
    ev_uint16_t port = 0;
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    if (evcon) evhttp_connection_get_peer(evcon, &peer, &port);
    log_field f[] = {LOGF_S("method", method),
                     LOGF_S("path", path && path[0] ? path : "/"),
                     LOGF_I("status", code),
                     bytes >= 0 && end && *end == '\0' ? LOGF_I("bytes", bytes)
                                                       : LOGF_S("bytes", NULL),
                     LOGF_N("duration_s", dur > 0 ? dur : 0),
                     LOGF_S("remote", peer)};
    log_line("info", f, sizeof f / sizeof f[0], "request");
}

void access_request(server *s, struct evhttp_request *req) {
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    while (evhttp_find_header(in, ARRIVED)) evhttp_remove_header(in, ARRIVED);
    if (s->o.access_log) {
        char t[40];
        snprintf(t, sizeof t, "%.6f", serve_now_s());
        evhttp_add_header(in, ARRIVED, t);
    }
    evhttp_request_set_on_complete_cb(req, on_complete, s);
}

void access_free(server *s) {
    free(s->answered);
    s->answered = NULL;
    s->nanswered = s->answered_cap = 0;
}
