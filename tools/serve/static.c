/* rjq serve: GET of the dashboard's files (embedded: assets.h). */
#include "server.h"

#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "assets.h"

int assets_handle(struct evhttp_request *req, const char *path) {
    if (strcmp(path, "/") == 0) path = "/index.html";
    for (const asset *a = assets; a->path; a++) {
        if (strcmp(a->path, path) != 0) continue;
        struct evbuffer *b = evbuffer_new();
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
        if (b) evbuffer_add_reference(b, a->data, a->len, NULL, NULL);
        evhttp_add_header(h, "Content-Type", a->content_type);
        evhttp_add_header(h, "Cache-Control", "no-cache");
        evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
        evhttp_add_header(h, "Content-Security-Policy",
                          "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'");
        evhttp_send_reply(req, b ? 200 : 503, NULL, b);
        if (b) evbuffer_free(b);
        return 1;
    }
    return 0;
}
