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
 *
 * Every stats, job, demo and processes event carries an id ("<boot>-<n>":
 * the server's start, a count). A stream opened with Last-Event-ID (a
 * browser's EventSource sends it when it reconnects; also ?last_event_id=)
 * first gets the events it missed, from the last RING_EVENTS kept, then
 * the current state as a fresh stream does. When they cannot be given
 * (older than that, from another run of the server, or not recorded
 * because no stream was open for RESUME_S) it gets
 *   event: reset  data: {"last_event_id": "..."}: events were lost
 * before the current state.
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
#define RING_EVENTS 4096      /* events kept for streams that resume */
#define RESUME_S 60           /* events are kept this long after the last stream closed */

/* An event sent, kept for streams that resume. */
typedef struct ring_event {
    unsigned long long seq;
    char type[16];
    char *queue;          /* NULL: every stream's */
    int is_job;
    char *text;
} ring_event;

/* The last events (the server's sse_ring). */
struct sse_ring {
    char boot[24];                /* this run's part of the ids */
    unsigned long long seq;       /* ids given so far */
    unsigned long long first;     /* the oldest id resumable from (seq + 1: none) */
    ring_event ev[RING_EVENTS];   /* by seq % RING_EVENTS, from first to seq */
};

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
    s->sse_keep_until = serve_now_s() + RESUME_S;
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

/* An event (type NULL: data is a comment or field line as it is), with an
 * id unless seq is 0. */
static void send_event(sse_client *k, const char *type, const char *data, const char *boot,
                       unsigned long long seq) {
    struct evbuffer *b = evbuffer_new();
    if (b == NULL) return;
    if (type && seq) evbuffer_add_printf(b, "id: %s-%llu\n", boot, seq);
    if (type) evbuffer_add_printf(b, "event: %s\ndata: %s\n\n", type, data);
    else evbuffer_add_printf(b, "%s", data);
    evhttp_send_reply_chunk(k->h.req, b);
    evbuffer_free(b);
}

static void send_text(sse_client *k, const char *type, const char *data) {
    send_event(k, type, data, NULL, 0);
}

static struct sse_ring *ring_of(server *s) {
    if (s->sse_ring == NULL && (s->sse_ring = calloc(1, sizeof *s->sse_ring)) != NULL) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(s->sse_ring->boot, sizeof s->sse_ring->boot, "%llx%03lx",
                 (unsigned long long)ts.tv_sec, (long)(ts.tv_nsec / 1000000) & 0xfff);
        s->sse_ring->first = 1;
    }
    return s->sse_ring;
}

static void ring_clear(struct sse_ring *r) {
    for (unsigned long long n = r->first; n <= r->seq; n++) {
        ring_event *e = &r->ev[n % RING_EVENTS];
        free(e->queue);
        free(e->text);
        memset(e, 0, sizeof *e);
    }
    r->first = r->seq + 1;
}

/* Keep an event; its id (0 when it could not be kept: the ring starts
 * over after it). */
static unsigned long long ring_add(server *s, const char *type, const squeue *q, int is_job,
                                   const char *text) {
    struct sse_ring *r = ring_of(s);
    if (r == NULL) return 0;
    unsigned long long seq = ++r->seq;
    if (seq - r->first >= RING_EVENTS) { /* the oldest goes */
        ring_event *old = &r->ev[r->first % RING_EVENTS];
        free(old->queue);
        free(old->text);
        memset(old, 0, sizeof *old);
        r->first++;
    }
    ring_event *e = &r->ev[seq % RING_EVENTS];
    snprintf(e->type, sizeof e->type, "%s", type);
    e->seq = seq;
    e->is_job = is_job;
    e->queue = q ? strdup(q->name) : NULL;
    e->text = strdup(text);
    if (e->text == NULL || (q && e->queue == NULL)) { /* out of memory: no resume past it */
        free(e->queue);
        free(e->text);
        memset(e, 0, sizeof *e);
        ring_clear(r);
    }
    return seq;
}

int sse_recording(const server *s) {
    return s->nsse > 0 || serve_now_s() < s->sse_keep_until;
}

void sse_skip(server *s) {
    struct sse_ring *r = ring_of(s);
    if (r == NULL) return;
    r->seq++;
    ring_clear(r);
}

void sse_free(server *s) {
    if (s->sse_ring) ring_clear(s->sse_ring);
    free(s->sse_ring);
    s->sse_ring = NULL;
}

static void report_dropped(sse_client *k) {
    if (k->dropped == 0 || unread(k) > OUTPUT_MAX) return;
    char buf[64];
    snprintf(buf, sizeof buf, "{\"job_events\":%llu}", k->dropped);
    send_text(k, "dropped", buf);
    k->dropped = 0;
}

/* The stream k wants an event of this type and queue. */
static int wants_event(const sse_client *k, const char *type, const char *queue, int is_job) {
    if (k->h.req == NULL || (is_job && !k->jobs)) return 0;
    if (strcmp(type, "processes") == 0 && !k->processes) return 0;
    if (k->queues == NULL || queue == NULL) return 1;
    for (size_t i = 0; i < k->nqueues; i++)
        if (strcmp(k->queues[i], queue) == 0) return 1;
    return 0;
}

void sse_broadcast(server *s, const char *type, const squeue *q, json_t *data, int is_job) {
    char *text = json_dumps(data, JSON_COMPACT);
    json_decref(data);
    if (text == NULL) return;
    unsigned long long seq = ring_add(s, type, q, is_job, text);
    const char *boot = s->sse_ring ? s->sse_ring->boot : "";
    time_t now = time(NULL);
    for (sse_client *k = s->sse; k; k = k->next) {
        if (!wants_event(k, type, q ? q->name : NULL, is_job)) continue;
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
        send_event(k, type, text, boot, seq);
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

/* A stream that resumes after the event last: the events it missed (by
 * its filters), else a "reset" event. */
static void resume(server *s, sse_client *k, const char *last) {
    struct sse_ring *r = ring_of(s);
    const char *dash = strrchr(last, '-');
    char *end = NULL;
    unsigned long long n = dash ? strtoull(dash + 1, &end, 10) : 0;
    int ok = r && dash && end && *end == '\0' && dash[1] >= '0' && dash[1] <= '9' &&
             (size_t)(dash - last) == strlen(r->boot) &&
             strncmp(last, r->boot, (size_t)(dash - last)) == 0 && n <= r->seq &&
             n + 1 >= r->first;
    if (!ok) {
        json_t *j = json_pack("{so}", "last_event_id", json_bytes(last, strlen(last)));
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (text) send_text(k, "reset", text);
        free(text);
        return;
    }
    for (unsigned long long i = n + 1; i <= r->seq; i++) {
        const ring_event *e = &r->ev[i % RING_EVENTS];
        if (wants_event(k, e->type, e->queue, e->is_job)) send_event(k, e->type, e->text, r->boot, i);
    }
}

void sse_handle(server *s, struct evhttp_request *req, const struct evkeyvalq *args) {
    if (query_only(req, args, ROUTE_EVENTS)) return;
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
    const char *last = evhttp_find_header(evhttp_request_get_input_headers(req), "Last-Event-ID");
    if (last == NULL) last = query_get(args, "last_event_id");
    if (last) resume(s, k, last);
    json_t *st = server_state_json(s);
    char *stext = st ? json_dumps(st, JSON_COMPACT) : NULL;
    json_decref(st);
    if (stext) send_text(k, "server", stext);
    free(stext);
    /* what is known now, so a page fills at once */
    if (k->processes && s->processes_sent) send_text(k, "processes", s->processes_sent);
    for (squeue *q = s->queues; q; q = q->next) {
        if (!q->have || !wants(k, q)) continue;
        json_t *j = queues_json(s, q);
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
