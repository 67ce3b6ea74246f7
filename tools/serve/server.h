/*
 * rjq serve, private: the server's state and what its files share.
 *
 *   server.c   listening, routing, auth, replies, signals, the lifetime
 *   deadline.c --request-timeout: 408 for requests that do not arrive whole;
 *              413 (JSON) for those past --max-body
 *   access.c   requests answered: counts by status and method, the access log
 *   queues.c   the queues served: handles, monitors, stats refresh, rates
 *   ../timing.c enqueue-to-start and run-time histograms from job events
 *   api.c      the /v1 routes but enqueue
 *   enqueue.c  POST /v1/queues/{q}/jobs, with ?wait= (requests that wait)
 *   bulk.c     POST /v1/queues/{q}/run-now: delayed jobs made ready, by id
 *   search.c   /v1/queues/{q}/search: payload searches in bounded steps
 *              (their logic: search_state.c)
 *   sse.c      GET /v1/events (Server-Sent Events)
 *   metrics.c  GET /metrics (Prometheus text)
 *   groups.c   /v1/queues/{q}/groups, the busiest groups in /metrics
 *   demo.c     --demo: a worker pool in the server and its controls
 *   static.c   the dashboard's files (assets.c, generated from web/ at build time)
 */
#ifndef RJQ_TOOLS_SERVE_SERVER_H
#define RJQ_TOOLS_SERVE_SERVER_H

#include <stddef.h>
#include <stdio.h>
#include <sys/queue.h>

#include <event2/event.h>
#include <event2/http.h>
#include <jansson.h>

#include "rjq.h"
#include "serve.h"
#include "timing.h"

#define SERVE_QUEUE_BUCKETS 1024

typedef struct answered_count answered_count;

/* One of a queue's busiest groups (groups.c, for /metrics). */
typedef struct serve_group {
    char name[RJQ_GROUP_NAME_MAX + 1];
    long long depth, active;
    int concurrency, weight, paused;
    long long started; /* its started counter (rjq_group_info.started) */
} serve_group;

/* A queue served: its handle, monitor and latest numbers. */
typedef struct squeue {
    char *name;
    rjq_queue *q;
    rjq_monitor *m;       /* NULL until attached (or when it failed) */
    rjq_stats s, prev;    /* the latest stats and the ones before */
    int have, have_prev;
    double in_rate, done_rate, fail_rate; /* per second, between the two */
    double prev_at, at;   /* monotonic seconds of prev and s */
    int refreshing;       /* a stats call is out */
    int reading_head;     /* the next ready job's enqueue time is being read */
    long long head_enqueued_ms; /* enqueue time (Redis clock, ms) of the job next
                                   in claim order; 0: none ready (or unknown) */
    timing_queue t;       /* wait and run times (the owner in s->times) */
    double wait_ms, run_ms; /* mean over the last refresh (-1: none) */
    double used_at;       /* monotonic seconds it was last named or watched */
    int refs;             /* requests that point at it (it is not let go) */
    /* its layout (README "Sharded queues"): q is a plain handle (rjq_queue_open)
     * until rjq_queue_open_async has read the declaration; then, for a sharded
     * queue, the sharded handle (stats summed, calls spanning the shards) */
    rjq_queue *plain;     /* a sharded queue's plain handle (closed when let go) */
    int opening;          /* rjq_queue_open_async is out */
    int known;            /* the layout is known: requests may use q */
    int nshards;          /* its shards (1: a plain queue) */
    int shard_reading;    /* --metrics-shards: each shard's stats being read */
    int shard_have;       /* shard_s holds every shard's latest stats */
    rjq_stats shard_s[RJQ_SHARDS_MAX];
    struct shard_read { struct squeue *q; int i; } shard_rd[RJQ_SHARDS_MAX];
    struct parked *parked; /* requests waiting for the layout (api.c) */
    /* a sharded queue: a monitor per shard (monitors do not span shards),
     * their events the queue's (timings keyed by shard and id: server-assigned
     * ids repeat across shards) */
    rjq_monitor *sm[RJQ_SHARDS_MAX];
    struct shard_read shard_mon[RJQ_SHARDS_MAX];
    rjq_history_point htotal; /* the stored history's totals (history.c: /metrics) */
    int htotal_have, htotal_reading;
    /* groups.c: its busiest groups (--metrics-groups), read at each refresh */
    serve_group *gtop;    /* ngtop of them, deepest first (owned) */
    size_t ngtop;
    long long gtotal;     /* its groups with jobs */
    int gtop_have, gtop_reading;
    double gtop_next;     /* not read again before (monotonic s) */
    struct squeue *hnext; /* hash chain */
    struct squeue *next;  /* all queues, in the order served */
} squeue;

struct waiter;
struct sse_client;

typedef struct server {
    struct event_base *base;
    rjq_client *c;
    serve_options o;
    struct evhttp *http;
    struct evhttp_bound_socket *bound;
    struct event *sigint, *sigterm, *refresh, *heartbeat;
    char *token;             /* --token-file's token, NULL: none */
    int early_close;         /* the loop backend reports EV_CLOSED */
    int redis_up;            /* the command connection is up */
    long long redis_down_ms; /* while it is not: since when (wall-clock ms; the start) */
    long nheld;              /* requests held (held_start .. held_end or gone) */
    struct held *unwatched;  /* held requests whose socket is not watched yet */
    struct event *watch;     /* watches them once WATCH_AFTER_MS old */
    struct evconnlistener *listener;
    struct event *resume_accept, *drain, *close_deadline;
    double drain_until;
    int stopping;
    double started;          /* monotonic seconds */
    /* queues.c */
    squeue *buckets[SERVE_QUEUE_BUCKETS];
    squeue *queues, *queues_tail;
    size_t nqueues;
    int listing;             /* a registry page is being read */
    unsigned ticks;          /* refreshes so far */
    char *list_after;        /* where the listing goes on (owned) */
    size_t nhandles;         /* queue handles open (one per queue served) */
    double all_until;        /* every queue is watched until then (a listing, /metrics) */
    double metrics_at;       /* the last GET /metrics (monotonic s; 0: none yet) */
    timing_map times;        /* job id -> enqueue and start times */
    /* enqueue.c */
    struct waiter *waiters;
    long nwaiters;
    /* sse.c */
    struct sse_client *sse;
    size_t nsse;
    size_t nsse_processes;   /* streams that want the processes */
    size_t nsse_all;         /* streams that want every queue */
    int reading_processes;   /* queues.c: a read is out */
    char *processes_sent;    /* the last processes event (owned) */
    struct sse_ring *sse_ring; /* the last events, for streams that resume (NULL: none yet) */
    double sse_keep_until;   /* events are kept this long after the last stream closed */
    /* queues.c: Redis' memory (rjq_client_get_memory), read every few seconds */
    int memory_known, memory_reading;
    rjq_memory_info memory;
    char memory_policy[64];
    /* queues.c: each Redis master's version, role, clients and memory (INFO),
     * read with the memory; a JSON array (owned), NULL until read */
    int nodes_reading;
    json_t *redis_nodes;
    /* queues.c: the masters' addresses and slot ranges, read with the INFO
     * (the master of a shard in GET /v1/queues/{q}?shards=1) */
    struct serve_master {
        char *address;
        int *ranges;
        size_t nranges;
    } *masters;
    size_t nmasters;
    struct demo *demo;       /* demo.c, made on first use (--demo) */
    struct deadlines *deadlines; /* deadline.c (--request-timeout), NULL: none */
    /* access.c: requests answered, by status and method (method: a static name) */
    struct answered_count {
        int code;
        const char *method;
        long long n;
    } *answered;
    size_t nanswered, answered_cap;
    /* counters (GET /v1/server) */
    long long requests, refused;
    struct searches *searches; /* search.c, NULL until the first */
} server;

/* ---- server.c: the monotonic clock, seconds --- */
double serve_now_s(void);
/* The wall clock, ms since the epoch (times shown to people). */
long long serve_wall_ms(void);

/* ---- server.c: replies --------------------------------------------------- */

/* Reply with a JSON value (taken: decref'd here). */
void reply_json(struct evhttp_request *req, int code, json_t *v);
/* Reply {"error": message} with the code. */
void reply_error(struct evhttp_request *req, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The HTTP status of an rjq error code (400, 404, 409, 413, 429, 503 ...). */
int http_status_of(int rc);
/* Reply for an rjq error code: its status and {"error", "code"}. */
void reply_rjq_error(struct evhttp_request *req, int rc, const char *detail);
/* Bytes as JSON: a string when they are valid UTF-8, else {"base64": ...}. */
json_t *json_bytes(const void *p, size_t len);
/* A name or id (any bytes but NUL) as json_bytes gives it. */
json_t *json_name(const char *s);
/* A query parameter (decoded; NULL when absent). args from parse_query. */
const char *query_get(const struct evkeyvalq *args, const char *name);
/* An integer query parameter in [lo, hi] (def when absent); -1 after
 * replying 400. */
int query_ll(struct evhttp_request *req, const struct evkeyvalq *args, const char *name,
             long long lo, long long hi, long long def, long long *out);
/* The routes (routes.def: each one's method, path and parameters). */
typedef enum route_id {
#define ROUTE(name, method, path, takes) ROUTE_##name,
#include "routes.def"
#undef ROUTE
    ROUTES_
} route_id;
/* 0 when every query parameter is one the route takes (routes.def) or
 * access_token (the token, every route); else -1 after replying 400
 * {"error", "parameter": the first other one, "takes": [the route's
 * names]}: a parameter no route reads is refused, not dropped. */
int query_only(struct evhttp_request *req, const struct evkeyvalq *args, route_id route);
/* {"redis": bool}: the "server" event of the streams. */
json_t *server_state_json(const server *s);
/* 1 when the connection of req is still there. */
int request_alive(struct evhttp_request *req);

/* ---- server.c: requests answered later ------------------------------------- */

/* A request whose answer waits for Redis (or streams). evhttp frees a
 * request with its connection: a held request is told when that happens
 * (req becomes NULL, then on_gone runs, which may free the holder). */
typedef struct held {
    server *s;
    struct evhttp_request *req;       /* NULL once the client is gone */
    struct evhttp_connection *evcon;
    struct event *closed;             /* EV_CLOSED on the client's socket */
    struct event *probe;              /* after a FIN: is the client still there? */
    evutil_socket_t fd;
    struct held *wprev, *wnext;       /* in the server's list of those not yet watched */
    int unwatched;
    int gone_on_fin;                  /* a half-close ends it too (streams) */
    void (*on_gone)(struct held *h);  /* may be NULL */
} held;

/* Hold req: watch its connection (and, where the loop reports it, a
 * reset or a close of the client's socket). */
void held_start(server *s, held *h, struct evhttp_request *req, void (*on_gone)(held *h),
                int gone_on_fin);
/* Stop watching; returns the request to answer, or NULL when the client
 * is gone. */
struct evhttp_request *held_end(held *h);

/* ---- history.c: GET /v1/queues/{q}/history -------------------------------------- */

void history_handle(server *s, struct evhttp_request *req, squeue *q,
                    const struct evkeyvalq *args);
/* Read q's history totals into q->htotal (with each stats refresh). */
void history_read_totals(squeue *q);
/* One point of the history as the route's JSON (buckets: with its histograms). */
json_t *history_point_json(const rjq_history_point *p, int buckets);

/* ---- deadline.c: --request-timeout ------------------------------------------ */

/* Give every request timeout_ms to arrive whole, else 408 and close (0:
 * off), and answer one past --max-body 413 (JSON). Sets evhttp's
 * bufferevent callback; before the first connection. 0, or -1 when out of
 * memory. */
int deadline_start(server *s, long timeout_ms);
/* Requests answered 413 by it so far. */
long long deadline_too_large(const server *s);
/* A request arrived whole (call first in the route handler). */
void deadline_request(server *s, struct evhttp_request *req);
/* The answer of req was written (access.c's on-complete callback). */
void deadline_complete(server *s, struct evhttp_request *req);
/* Requests answered 408 so far. */
long long deadline_timed_out(const server *s);
void deadline_free(server *s);

/* ---- access.c: requests answered: their counts and the access log ---------------- */

/* Call first for each request: counts it and (--access-log) logs it once
 * its answer is written (and tells deadline.c). */
void access_request(server *s, struct evhttp_request *req);
/* "GET", "POST", ... ("OTHER" for none of evhttp's). */
const char *access_method_name(enum evhttp_cmd_type m);
void access_free(server *s);

/* ---- queues.c ------------------------------------------------------------- */

/* The served queue of that name, opened (and its monitor attached) on first
 * use, and touched. RJQ_OK; RJQ_EQUEUENAME when the name does not match
 * --queues or is invalid; RJQ_EBUSY past --max-queues; RJQ_ENOMEM. */
int queues_get(server *s, const char *name, squeue **out);
/* The served queue of that name, or NULL. */
squeue *queues_find(server *s, const char *name);
/* A request or a stream uses q now: it is not let go for --queue-idle. */
void queues_touch(squeue *q);
/* Every queue is watched (GET /v1/queues, /metrics) for --queue-idle. */
void queues_watch_all(server *s);
/* A queue served that nobody named or watched for --queue-idle, with no
 * request pointing at it, is let go at a refresh: its stats are no longer
 * read, its monitor stops and its handle is closed. */
/* 1 when the name matches --queues. */
int queues_match(const server *s, const char *name);
/* Start the refresh timer and the registry listing. */
int queues_start(server *s);
/* A queue's numbers as the JSON the API and the event stream send (with
 * "shards": N, and for a shard of a served sharded queue "shard_of" and
 * "shard"). */
json_t *queues_json(const server *s, const squeue *q);
/* Stats as JSON: every number of rjq_stats by name, paused, exists. */
json_t *queues_stats_json(const rjq_stats *s);
/* The served sharded queue that name is a shard of (*index: which), or
 * NULL. */
squeue *queues_shard_of(const server *s, const char *name, int *index);
/* The address of the master serving slot (a standalone server: its own),
 * as last read; NULL when not known. */
const char *queues_master_of(const server *s, int slot);
/* Free every queue's state (handles go with the client). */
void queues_free(server *s);
/* Redis went away: forget what was read of it (memory, each master's
 * INFO), so nothing shows its last figures as current; read again once back. */
void queues_forget_redis(server *s);

/* ---- bulk.c: POST /v1/queues/{q}/run-now {"ids": [...]} ------------------------ */

void bulk_run_now(server *s, struct evhttp_request *req, squeue *q);

/* ---- the route handlers (args: the query's parameters, parsed once) ---------------------------------------------------- */

/* api.c: a request under /v1/queues (path after it: "" or "/{q}..."). */
void api_queues(server *s, struct evhttp_request *req, const char *rest,
                const struct evkeyvalq *args);
/* api.c: {"processes": [...]}, as GET /v1/processes and the event stream
 * give them. */
json_t *processes_json(const rjq_process *list, size_t n);
/* rows.c: answer GET /v1/queues/{q}/jobs with the rows of these ids (each
 * job read, and the processes, in one round), or 503 out of memory. */
void rows_reply(server *s, struct evhttp_request *req, squeue *q, rjq_job_state st,
                long long offset, const char *const *ids, size_t n);
/* rows.c: the same for a cursor's page: "next", its next page's cursor
 * (null when the list ended), in the reply too. */
void rows_reply_page(server *s, struct evhttp_request *req, squeue *q, rjq_job_state st,
                     const char *const *ids, size_t n, const char *next);
/* rows.c: answer GET /v1/queues/{q}/jobs/{id} with job (taken) and its
 * "worker" (null without a token; host and pid read from the processes). */
void rows_job_reply(server *s, struct evhttp_request *req, json_t *job, const char *token);
/* api.c: GET /v1/processes. */
void api_processes(server *s, struct evhttp_request *req, const struct evkeyvalq *args);
/* api.c: GET /v1/server. */
void api_server(server *s, struct evhttp_request *req);
/* api.c: q's layout is known now (status RJQ_OK) or could not be read:
 * route again, or answer, the requests parked for it. */
void api_queue_ready(server *s, squeue *q, int status);
/* enqueue.c: POST /v1/queues/{name}/jobs; q: the queue when served, NULL
 * to open it once the request is found valid. 1 (nothing answered) when
 * the queue's layout is not known yet: the caller parks the request. */
int enqueue_handle(server *s, struct evhttp_request *req, const char *name, squeue *q,
                    const struct evkeyvalq *args);
/* enqueue.c: end every waiting request now (503) at shutdown. */
void enqueue_cancel_all(server *s);
/* sse.c: GET /v1/events. */
void sse_handle(server *s, struct evhttp_request *req, const struct evkeyvalq *args);
/* sse.c: send an event to every client that wants it (queue NULL: all). */
void sse_broadcast(server *s, const char *type, const squeue *q, json_t *data, int is_job);
/* sse.c: the same for an event to every stream, sent only when its text
 * differs from *last (which keeps it). Takes data. */
void sse_broadcast_changed(server *s, const char *type, json_t *data, char **last);
/* sse.c: 1 while events are wanted: a stream is open, or one closed less
 * than RESUME_S ago (its browser reconnects and resumes). */
int sse_recording(const server *s);
/* sse.c: an event was not made (sse_recording was 0): streams cannot
 * resume from before it. */
void sse_skip(server *s);
/* sse.c: free the events kept (after the client is freed). */
void sse_free(server *s);
/* sse.c: touch the queues the streams name (queues.c, at each refresh). */
void sse_touch_queues(server *s);
/* sse.c: a comment line to every client (keeps proxies and dead-peer
 * detection going). */
void sse_heartbeat(server *s);
/* sse.c: close every event stream (shutdown). */
void sse_close_all(server *s);
/* demo.c: a request under /v1/demo (rest: "" or "/..."); free its state. */
void demo_handle(server *s, struct evhttp_request *req, const char *rest,
                 const struct evkeyvalq *args);
void demo_free(server *s);
/* demo.c: the client is closing (its close stops the pool's worker). */
void demo_closing(server *s);
/* demo.c: a "demo" event to the streams when the pool's numbers changed. */
void demo_tick(server *s);
/* search.c: a request under /v1/queues/{q}/search (sid: the segment
 * after it, NULL for none). */
void search_handle(server *s, struct evhttp_request *req, squeue *q, const char *sid,
                   const struct evkeyvalq *args);
/* search.c: 1 when path is /v1/queues/{q}/search[/{id}] (a read-only
 * server allows POST and DELETE there: a search writes nothing). */
int search_path(const char *path);
/* search.c: end and free every search (after the client is freed). */
void search_free_all(server *s);
/* groups.c: a request under /v1/queues/{q}/groups (group: the segment
 * after it, action the one after that; NULL for none). */
void groups_handle(server *s, struct evhttp_request *req, squeue *q, const char *group,
                   const char *action, const struct evkeyvalq *args);
/* groups.c: read q's busiest groups (at each refresh; --metrics-groups 0: never). */
void groups_refresh(server *s, squeue *q);
/* groups.c: free what was read of q's groups. */
void groups_forget(squeue *q);
/* groups.c: the families of the busiest groups in /metrics (listed: the
 * queues of their own there). */
void groups_metrics(FILE *out, server *s, int (*listed)(const server *, const squeue *));
/* groups.c: one group as the API's JSON (concurrency < 0: null; rate,
 * rate_window_ms and max_waiting 0: null, none; started: its started
 * counter, rjq_group_info.started). */
json_t *groups_info_json(const rjq_group_info *g);
/* metrics.c: GET /metrics. */
void metrics_handle(server *s, struct evhttp_request *req);
/* assets.c: GET of a dashboard file; 0 when path is not one. */
int assets_handle(struct evhttp_request *req, const char *path);

#endif
