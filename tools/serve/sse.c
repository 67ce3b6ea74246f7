/*
 * rjq serve: GET /v1/events, Server-Sent Events.
 *
 *   event: stats   data: a queue as GET /v1/queues/{q} gives it, when its
 *                  numbers changed (at most once a second per queue)
 *   event: job     data: {"queue","event","id","time"}: a job event
 *                  ("enqueued", "active", "completed", ...), at most
 *                  JOB_EVENTS_PER_S a second per stream; past that, and
 *                  while a stream's client reads slower than events come,
 *                  they are dropped and counted:
 *   event: dropped data: {"job_events": n}, once a second while dropping
 *
 *   event: server data: {"redis": bool}: at once, and whenever Redis goes
 *                  away or comes back
 *   event: demo   data: rjq serve --demo's pool (GET /v1/demo), when it changed
 *   event: processes  data: {"processes": [...]} as GET /v1/processes, at
 *                  once and whenever it changed (read every second), for
 *                  streams opened with ?processes=1
 *
 * ?queues=a,b limits a stream to those queues; ?jobs=0 leaves job events
 * out (an overview needs the stats only). A comment line every 15 s keeps
 * proxies from closing an idle stream and finds clients that went away.
 */
#include "server.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#define JOB_EVENTS_PER_S 200
#define OUTPUT_MAX (1u << 20) /* bytes a slow client may have unread */

typedef struct sse_client {
    held h;
    server *s;
    char **queues;      /* the names of ?queues= (NULL: all), nqueues of them */
    size_t nqueues;
    int jobs;           /* job events wanted */
    int processes;      /* processes events wanted */
    time_t second;      /* the second job events are counted in */
    int sent;           /* job events sent in it */
    unsigned long long dropped; /* not sent since the last report */
    struct sse_client *prev, *next;
} sse_client;

static void unlink_client(sse_client *k) {
    server *s = k->s;
    if (k->processes) s->nsse_processes--;
    if (k->queues == NULL) s->nsse_all--;
    if (k->prev) k->prev->next = k->next;
    else s->sse = k->next;
    if (k->next) k->next->prev = k->prev;
    s->nsse--;
    for (size_t i = 0; i < k->nqueues; i++) free(k->queues[i]);
    free(k->queues);
    free(k);
}

static void client_gone(held *h) {
    unlink_client((sse_client *)h);
}

static int wants(const sse_client *k, const squeue *q) {
    if (k->queues == NULL || q == NULL) return 1;
    for (size_t i = 0; i < k->nqueues; i++)
        if (strcmp(k->queues[i], q->name) == 0) return 1;
    return 0;
}

/* ?queues=a,b into k->queues. -1 when out of memory. */
static int set_queues(sse_client *k, const char *list) {
    size_t n = 1;
    for (const char *p = list; *p; p++) n += *p == ',';
    if ((k->queues = calloc(n, sizeof *k->queues)) == NULL) return -1;
    for (const char *p = list;; p++) {
        size_t len = strcspn(p, ",");
        if (len && (k->queues[k->nqueues++] = strndup(p, len)) == NULL) return -1;
        p += len;
        if (*p == '\0') break;
    }
    return 0;
}

static size_t unread(const sse_client *k) {
    struct bufferevent *bev = k->h.evcon ? evhttp_connection_get_bufferevent(k->h.evcon) : NULL;
    return bev ? evbuffer_get_length(bufferevent_get_output(bev)) : 0;
}

static void send_text(sse_client *k, const char *type, const char *data) {
    struct evbuffer *b = evbuffer_new();
    if (b == NULL) return;
    if (type) evbuffer_add_printf(b, "event: %s\ndata: %s\n\n", type, data);
    else evbuffer_add_printf(b, "%s", data);
    evhttp_send_reply_chunk(k->h.req, b);
    evbuffer_free(b);
}

static void report_dropped(sse_client *k) {
    if (k->dropped == 0 || unread(k) > OUTPUT_MAX) return;
    char buf[64];
    snprintf(buf, sizeof buf, "{\"job_events\":%llu}", k->dropped);
    send_text(k, "dropped", buf);
    k->dropped = 0;
}

void sse_broadcast(server *s, const char *type, const squeue *q, json_t *data, int is_job) {
    char *text = json_dumps(data, JSON_COMPACT);
    json_decref(data);
    if (text == NULL) return;
    time_t now = time(NULL);
    for (sse_client *k = s->sse; k; k = k->next) {
        if (k->h.req == NULL || !wants(k, q) || (is_job && !k->jobs)) continue;
        if (strcmp(type, "processes") == 0 && !k->processes) continue;
        if (is_job) {
            if (k->second != now) {
                k->second = now;
                k->sent = 0;
                report_dropped(k);
            }
            if (k->sent >= JOB_EVENTS_PER_S || unread(k) > OUTPUT_MAX) {
                k->dropped++;
                continue;
            }
            k->sent++;
        } else if (unread(k) > OUTPUT_MAX) {
            continue; /* the next change sends the numbers again */
        }
        send_text(k, type, text);
    }
    free(text);
}

void sse_broadcast_changed(server *s, const char *type, json_t *data, char **last) {
    char *text = data ? json_dumps(data, JSON_COMPACT) : NULL;
    if (text && (*last == NULL || strcmp(text, *last) != 0)) {
        free(*last);
        *last = text;
        sse_broadcast(s, type, NULL, data, 0);
        return;
    }
    json_decref(data);
    free(text);
}

void sse_touch_queues(server *s) {
    for (sse_client *k = s->sse; k; k = k->next) {
        if (k->h.req == NULL) continue;
        for (size_t i = 0; i < k->nqueues; i++) {
            squeue *q = queues_find(s, k->queues[i]);
            if (q) queues_touch(q);
        }
    }
}

void sse_heartbeat(server *s) {
    for (sse_client *k = s->sse; k; k = k->next) {
        if (k->h.req == NULL) continue;
        report_dropped(k);
        send_text(k, NULL, ": ping\n\n");
    }
}

void sse_handle(server *s, struct evhttp_request *req, const struct evkeyvalq *args) {
    if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) { /* the headers, no stream */
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                          "text/event-stream");
        evhttp_send_reply(req, 200, "OK", NULL);
        return;
    }
    const char *queues = query_get(args, "queues"), *jobs = query_get(args, "jobs"),
               *procs = query_get(args, "processes");
    sse_client *k = calloc(1, sizeof *k);
    if (k == NULL || (queues && set_queues(k, queues) != 0)) {
        if (k) {
            for (size_t i = 0; i < k->nqueues; i++) free(k->queues[i]);
            free(k->queues);
            free(k);
        }
        reply_error(req, 503, "out of memory");
        return;
    }
    k->s = s;
    k->jobs = !(jobs && strcmp(jobs, "0") == 0);
    k->processes = procs && strcmp(procs, "1") == 0;
    if (k->processes) s->nsse_processes++;
    if (k->queues == NULL) s->nsse_all++;
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", "text/event-stream");
    evhttp_add_header(h, "Cache-Control", "no-cache");
    evhttp_add_header(h, "X-Accel-Buffering", "no");
    evhttp_send_reply_start(req, 200, "OK");
    k->next = s->sse;
    if (k->next) k->next->prev = k;
    s->sse = k;
    s->nsse++;
    held_start(s, &k->h, req, client_gone, 1);
    if (k->h.req == NULL) return; /* (no connection: cannot happen for a fresh request) */
    send_text(k, NULL, "retry: 2000\n\n");
    json_t *st = server_state_json(s);
    char *stext = st ? json_dumps(st, JSON_COMPACT) : NULL;
    json_decref(st);
    if (stext) send_text(k, "server", stext);
    free(stext);
    /* what is known now, so a page fills at once */
    if (k->processes && s->processes_sent) send_text(k, "processes", s->processes_sent);
    for (squeue *q = s->queues; q; q = q->next) {
        if (!q->have || !wants(k, q)) continue;
        json_t *j = queues_json(q);
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (text) send_text(k, "stats", text);
        free(text);
    }
}

void sse_close_all(server *s) {
    while (s->sse) {
        sse_client *k = s->sse;
        struct evhttp_request *req = held_end(&k->h);
        if (req) evhttp_send_reply_end(req);
        unlink_client(k);
    }
}
