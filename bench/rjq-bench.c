/*
 * rjq-bench: the peer benchmark cases (/work/shared/peers: BullMQ,
 * bee-queue, ...) for rjq, printing the same one-line JSON result.
 *
 *   rjq-bench enqueue-bulk | enqueue-single | drain | depth | latency | awaited-seq
 *
 * Configured by environment like the peer scripts (see bench/README.md):
 * REDIS_HOST (127.0.0.1) REDIS_PORT (6390) N (50000) BULK (1000)
 * BULK_WINDOW (4) WINDOW (100) CONC (50) RATE (1000) SECS (10)
 * DEPTH (drain: jobs pre-enqueued, default N; `depth` case: 1000000)
 * WARM (latency warm-up jobs, 10) TIMEOUT (s, 120) CMDSTATS (1: per-command
 * Redis breakdown of the timed phase on stderr) VERBOSE (1: info on stderr);
 * diagnostics only: RETENTION_MS, COMPLETED_MAX (queue options; unset or 0
 * keeps the library defaults, which is what the comparison uses).
 * QUEUE_FORMAT (latency, awaited-seq: 2 sets the queue's format 2 first,
 * rjq_queue_set_format; bench/callgrind.sh's rjq2-* cases,
 * bench/native_await_floor.sh's rjq2 rows).
 * STALL_S (awaited-seq, 120; 0: off): the run gives up when no awaited job
 * has finished for this long (a job lost: its await has no timeout), says
 * what the queue holds, and reports "ok":false instead of hanging.
 * LEASE_MS (latency, awaited-seq: the worker process's lease_ms; unset or
 * 0: the library's default, 30000).
 *
 * The last stdout line is the JSON result. Each case measures only its own
 * phase from inside the measured process: Redis INFO snapshots (a separate
 * synchronous hiredis connection) before and after, getrusage() of the
 * process, a monotonic clock. Queue "bench", key prefix "rjq"; the queue's
 * keys are deleted first, so it runs on a dirty server too.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>
#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#endif
#endif
#ifndef CALLGRIND_ZERO_STATS /* (no valgrind headers: the client marks do nothing) */
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_DUMP_STATS_AT(s) ((void)(s))
#endif

#include <rjq/libevent.h>

#include "rjq.h"

#define QNAME "bench"
#define KEY_PATTERN "rjq:{" QNAME "}:*"
#define PAYLOAD_TINY 48 /* room for the default payload */

/* ---- configuration ------------------------------------------------------ */

static struct config {
    const char *host;
    int port;
    long n, bulk, bulk_window, window, conc, rate, secs, depth, warm, timeout_s, stall_s;
    long payload_bytes;       /* PAYLOAD_BYTES: each payload's length (0: tiny) */
    long groups;              /* JOB_GROUPS: drain (and awaited-seq) jobs spread over this many job groups (0: none) */
    size_t payload_max;       /* room for one payload and its NUL */
    long long retention_ms;
    long long history_flush_ms; /* HISTORY_FLUSH_MS: the queue's history (-1: off) */
    long completed_max;
    int cmdstats, verbose, tty;
} C;

static long env_long(const char *name, long def) {
    const char *s = getenv(name);
    if (s == NULL || *s == '\0') return def;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end != '\0' || v < 0) {
        fprintf(stderr, "rjq-bench: %s=%s is not a non-negative integer\n", name, s);
        exit(2);
    }
    return v;
}

/* Signed knob; 0 or unset keeps the library default. */
static long long env_signed(const char *name) {
    const char *s = getenv(name);
    if (s == NULL || *s == '\0') return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end != '\0' || v < -1) {
        fprintf(stderr, "rjq-bench: %s=%s is not an integer >= -1\n", name, s);
        exit(2);
    }
    return v;
}

static void load_config(void) {
    C.host = getenv("REDIS_HOST") && *getenv("REDIS_HOST") ? getenv("REDIS_HOST") : "127.0.0.1";
    C.port = (int)env_long("REDIS_PORT", 6390);
    C.n = env_long("N", 50000);
    C.bulk = env_long("BULK", 1000);
    C.bulk_window = env_long("BULK_WINDOW", 4);
    C.window = env_long("WINDOW", 100);
    C.conc = env_long("CONC", 50);
    C.rate = env_long("RATE", 1000);
    C.secs = env_long("SECS", 10);
    C.depth = env_long("DEPTH", 0);
    C.groups = env_long("JOB_GROUPS", 0); /* (not GROUPS: a bash variable) */
    C.warm = env_long("WARM", 10);
    C.timeout_s = env_long("TIMEOUT", 120);
    C.stall_s = env_long("STALL_S", 120);
    C.retention_ms = env_signed("RETENTION_MS");
    C.completed_max = (long)env_signed("COMPLETED_MAX");
    C.history_flush_ms = env_signed("HISTORY_FLUSH_MS");
    C.cmdstats = (int)env_long("CMDSTATS", 0);
    C.verbose = (int)env_long("VERBOSE", 0);
    /* as the peers read it (../shared/peers/common.js): the JSON's length */
    C.payload_bytes = env_long("PAYLOAD_BYTES", 0);
    if (C.payload_bytes > 64L * 1024 * 1024) {
        fprintf(stderr, "rjq-bench: PAYLOAD_BYTES is at most 64 MiB\n");
        exit(2);
    }
    C.payload_max = (size_t)(C.payload_bytes > PAYLOAD_TINY ? C.payload_bytes : PAYLOAD_TINY) + 1;
    C.tty = isatty(STDERR_FILENO);
    if (C.n < 1 || C.bulk < 1 || C.bulk > RJQ_BATCH_MAX || C.bulk_window < 1 || C.window < 1 ||
        C.conc < 1 || C.rate < 1 || C.secs < 1) {
        fprintf(stderr, "rjq-bench: N, WINDOW, BULK_WINDOW, CONC, RATE, SECS must be >= 1 "
                        "and BULK in 1..%d\n", RJQ_BATCH_MAX);
        exit(2);
    }
}

static void vsay(const char *fmt, va_list ap) {
    fprintf(stderr, "rjq-bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
}

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
    exit(1);
}

static void info(const char *fmt, ...) {
    if (!C.verbose && !C.tty) return;
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
}

/* ---- clocks ---------------------------------------------------------------- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* Job i's payload into buf (C.payload_max bytes): {"i":i,"k":"v..."},
 * with as many v as make it PAYLOAD_BYTES long (one at least), as the
 * peers' payloads. Returns its length. */
static int payload(char *buf, long i) {
    int head = snprintf(buf, C.payload_max, "{\"i\":%ld,\"k\":\"", i);
    long vs = C.payload_bytes - head - 2;
    if (vs < 1) vs = 1;
    memset(buf + head, 'v', (size_t)vs);
    memcpy(buf + head + vs, "\"}", 3);
    return head + (int)vs + 2;
}

/* A buffer for one payload (the program's lifetime). */
static char *payload_buf(void) {
    char *p = malloc(C.payload_max);
    if (p == NULL) {
        fprintf(stderr, "rjq-bench: out of memory\n");
        exit(1);
    }
    return p;
}

/* ---- synchronous Redis: INFO snapshots and clean-up ------------------------ */

static redisContext *sync_connect(void) {
    struct timeval tv = {5, 0};
    redisContext *r = redisConnectWithTimeout(C.host, C.port, tv);
    if (r == NULL || r->err)
        die("cannot connect to redis at %s:%d: %s", C.host, C.port, r ? r->errstr : "out of memory");
    return r;
}

#define CMDSTAT_MAX 256

typedef struct cmdstat {
    char name[48];
    long long calls;
    double usec;
} cmdstat;

typedef struct snap {
    double cpu;          /* used_cpu_user + used_cpu_sys */
    long long cmds;      /* total_commands_processed */
    long long lua;       /* eval/evalsha/fcall calls (and their _ro forms) */
    long long mem;       /* used_memory */
    int ncmd;
    cmdstat cmd[CMDSTAT_MAX];
} snap;

static int is_lua_cmd(const char *name) {
    static const char *const lua[] = {"evalsha", "eval", "evalsha_ro", "eval_ro", "fcall",
                                      "fcall_ro"};
    for (size_t i = 0; i < sizeof lua / sizeof lua[0]; i++)
        if (strcmp(name, lua[i]) == 0) return 1;
    return 0;
}

static void redis_snap(snap *s) {
    redisContext *r = sync_connect();
    redisReply *rep = redisCommand(r, "INFO all");
    if (rep == NULL || rep->type != REDIS_REPLY_STRING) die("INFO all failed");
    memset(s, 0, sizeof *s);
    double user = 0, sys = 0;
    char *save = NULL;
    for (char *line = strtok_r(rep->str, "\r\n", &save); line; line = strtok_r(NULL, "\r\n", &save)) {
        if (strncmp(line, "used_cpu_user:", 14) == 0) user = atof(line + 14);
        else if (strncmp(line, "used_cpu_sys:", 13) == 0) sys = atof(line + 13);
        else if (strncmp(line, "total_commands_processed:", 25) == 0) s->cmds = atoll(line + 25);
        else if (strncmp(line, "used_memory:", 12) == 0) s->mem = atoll(line + 12);
        else if (strncmp(line, "cmdstat_", 8) == 0) {
            char *colon = strchr(line, ':');
            const char *calls = strstr(line, "calls="), *usec = strstr(line, "usec=");
            if (colon == NULL || calls == NULL) continue;
            *colon = '\0';
            const char *name = line + 8;
            long long ncalls = atoll(calls + 6);
            if (is_lua_cmd(name)) s->lua += ncalls;
            if (s->ncmd < CMDSTAT_MAX) {
                cmdstat *cs = &s->cmd[s->ncmd++];
                snprintf(cs->name, sizeof cs->name, "%s", name);
                cs->calls = ncalls;
                cs->usec = usec ? atof(usec + 5) : 0;
            }
        }
    }
    s->cpu = user + sys;
    freeReplyObject(rep);
    redisFree(r);
}

/* bench/callgrind.sh: with CG_MARK set (the peers' callgrind/cg_mark.sh),
 * "$CG_MARK zero" right after the snapshot that starts a timed phase and
 * "$CG_MARK dump" right before the one that ends it, so callgrind counts
 * the redis-server's instructions of that phase only. */
static void cg_mark(const char *what) {
    const char *m = getenv("CG_MARK");
    if (m == NULL || *m == '\0') return;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' %s", m, what);
    if (system(cmd) != 0) die("%s failed", cmd);
}

/* bench/client_callgrind.sh runs rjq-bench itself under callgrind: with
 * CG_CLIENT=1 the drain's worker process zeroes its own counters where the
 * timed phase starts and dumps them where it ends, so the dump holds the
 * client's instructions of that phase only (outside valgrind: nothing).
 * The script starts valgrind with instrumentation off (the untimed
 * pre-enqueue runs faster so): the zero turns it on. awaited-seq: the
 * producer's dump is "timed phase", its worker process's "worker" (zeroed
 * when it is ready, so its dump also holds the WARM jobs and the idle
 * waits around them: 10 of N jobs). */
static void cg_client_as(int dump, const char *who) {
    const char *m = getenv("CG_CLIENT");
    if (m == NULL || strcmp(m, "1") != 0) return;
    if (dump) CALLGRIND_DUMP_STATS_AT(who);
    else {
        CALLGRIND_START_INSTRUMENTATION;
        CALLGRIND_ZERO_STATS;
    }
}

static void cg_client(int dump) {
    cg_client_as(dump, "timed phase");
}

/* Per-command breakdown of a timed phase (CMDSTATS=1), on stderr. Commands
 * run inside scripts are counted too; evalsha's usec includes them. */
static void print_cmdstats(const snap *a, const snap *b, long n) {
    if (!C.cmdstats) return;
    fprintf(stderr, "rjq-bench: redis commands in the timed phase (per job, n=%ld):\n", n);
    fprintf(stderr, "  %-22s %12s %10s %12s %10s\n", "command", "calls", "calls/job", "usec", "usec/job");
    for (int i = 0; i < b->ncmd; i++) {
        const cmdstat *y = &b->cmd[i];
        long long calls0 = 0;
        double usec0 = 0;
        for (int j = 0; j < a->ncmd; j++)
            if (strcmp(a->cmd[j].name, y->name) == 0) {
                calls0 = a->cmd[j].calls;
                usec0 = a->cmd[j].usec;
            }
        long long dc = y->calls - calls0;
        if (dc <= 0) continue;
        fprintf(stderr, "  %-22s %12lld %10.3f %12.0f %10.3f\n", y->name, dc, (double)dc / (double)n,
                y->usec - usec0, (y->usec - usec0) / (double)n);
    }
}

/* Delete every key of the bench queue (SCAN + UNLINK), so a standalone run
 * starts from an empty queue even without FLUSHALL. */
static void clean_queue(void) {
    redisContext *r = sync_connect();
    char cursor[32] = "0";
    long long deleted = 0;
    do {
        redisReply *rep = redisCommand(r, "SCAN %s MATCH %s COUNT 10000", cursor, KEY_PATTERN);
        if (rep == NULL || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2)
            die("SCAN failed: %s", rep && rep->type == REDIS_REPLY_ERROR ? rep->str : r->errstr);
        snprintf(cursor, sizeof cursor, "%s", rep->element[0]->str);
        redisReply *keys = rep->element[1];
        if (keys->elements > 0) {
            const char **argv = malloc((keys->elements + 1) * sizeof *argv);
            size_t *lens = malloc((keys->elements + 1) * sizeof *lens);
            if (argv == NULL || lens == NULL) die("out of memory");
            argv[0] = "UNLINK";
            lens[0] = 6;
            for (size_t i = 0; i < keys->elements; i++) {
                argv[i + 1] = keys->element[i]->str;
                lens[i + 1] = keys->element[i]->len;
            }
            redisReply *d = redisCommandArgv(r, (int)keys->elements + 1, argv, lens);
            if (d == NULL || d->type == REDIS_REPLY_ERROR) die("UNLINK failed");
            deleted += d->integer;
            freeReplyObject(d);
            free(argv);
            free(lens);
        }
        freeReplyObject(rep);
    } while (strcmp(cursor, "0") != 0);
    redisFree(r);
    if (deleted) info("deleted %lld old keys of queue %s", deleted, QNAME);
}

/* ---- event loop helpers -------------------------------------------------- */

static struct event_base *base;
static struct event *heartbeat;
static rjq_client *client;
static rjq_queue *queue;
static int conn_up[2];
static int conn_both; /* both connections up */

/* Progress (only to a terminal), refreshed by the heartbeat. */
static const char *prog_what;
static const long *prog_done;
static long prog_total;
static int prog_shown;
static double deadline; /* 0: none */
static int timed_out;
/* progress_watch: a wait (loop_until) ends, stalled set, once the progress
 * counter has not moved for prog_stall_s (0: not watched) */
static double prog_stall_s, prog_moved_at;
static long prog_last;
static int stalled;

static void progress_print(void) {
    if (prog_what == NULL || prog_done == NULL || !C.tty) return;
    fprintf(stderr, "\r%s: %ld/%ld   ", prog_what, *prog_done, prog_total);
    prog_shown = 1;
}

static void progress(const char *what, const long *done, long total) {
    prog_what = what;
    prog_done = done;
    prog_total = total;
    prog_stall_s = 0;
}

/* The waits until progress_end() give up (timed_out, stalled) when the
 * progress counter stays still for secs (0: never): checked by the
 * heartbeat, so nothing is added per job. */
static void progress_watch(double secs) {
    prog_stall_s = secs;
    prog_last = prog_done ? *prog_done : 0;
    prog_moved_at = now_s();
    stalled = 0;
}

static void progress_end(void) {
    if (prog_shown) {
        progress_print();
        fputc('\n', stderr);
    }
    prog_what = NULL;
    prog_done = NULL;
    prog_shown = 0;
    prog_stall_s = 0;
}

static void on_heartbeat(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what, (void)arg;
    progress_print();
    double t = now_s();
    if (deadline > 0 && t > deadline) timed_out = 1;
    if (prog_done != NULL && prog_stall_s > 0) {
        if (*prog_done != prog_last) {
            prog_last = *prog_done;
            prog_moved_at = t;
        } else if (t - prog_moved_at > prog_stall_s) {
            stalled = 1;
            timed_out = 1;
        }
    }
}

/* precise: the latency producer's loop. libevent's default clock is the
 * coarse one (4 ms steps here), which would pace the latency case in
 * bursts of 4 jobs every 4 ms instead of 1 per ms like the peers' 1 ms
 * timer. Other loops keep the default: a precise timer costs a
 * timerfd_settime() on every loop pass. */
static void loop_init(int precise) {
    struct event_config *cfg = event_config_new();
    if (cfg == NULL) die("event_config_new failed");
    if (precise) event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
    base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    if (base == NULL) die("event_base_new failed");
    heartbeat = event_new(base, -1, EV_PERSIST, on_heartbeat, NULL);
    struct timeval tv = {0, 200000};
    if (heartbeat == NULL || event_add(heartbeat, &tv) != 0) die("cannot add the heartbeat timer");
}

static void loop_free(void) {
    event_free(heartbeat);
    event_base_free(base);
    base = NULL;
}

/* Run the loop until *flag is set or `secs` pass (0: no limit). Returns 1
 * when the flag was set, 0 on timeout. */
static int loop_until(const volatile int *flag, double secs) {
    double old = deadline;
    deadline = secs > 0 ? now_s() + secs : 0;
    timed_out = 0;
    while (!*flag && !timed_out) event_base_loop(base, EVLOOP_ONCE);
    deadline = old;
    return *flag != 0;
}

static void on_sleep_done(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    *(int *)arg = 1;
}

static void loop_sleep(double secs) {
    int done = 0;
    struct event *ev = evtimer_new(base, on_sleep_done, &done);
    struct timeval tv = {(time_t)secs, (suseconds_t)((secs - floor(secs)) * 1e6)};
    evtimer_add(ev, &tv);
    loop_until(&done, 0);
    event_free(ev);
}

/* ---- the rjq client ------------------------------------------------------ */

static void on_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    (void)c, (void)data;
    if (conn < 0 || conn > 1) return;
    if (ev == RJQ_EVENT_CONNECTED) {
        conn_up[conn] = 1;
        conn_both = conn_up[0] && conn_up[1];
    } else {
        conn_up[conn] = 0;
        conn_both = 0;
        fprintf(stderr, "rjq-bench: %s connection %s: %s\n", conn ? "subscriber" : "command",
                ev == RJQ_EVENT_DISCONNECTED ? "lost" : "error", detail ? detail : "");
    }
}

/* Create the client and open the queue; wait for both connections (the
 * command connection's session includes loading the scripts). */
static void client_open(void) {
    char url[300];
    snprintf(url, sizeof url, "redis://%s:%d", C.host, C.port);
    rjq_client_options o = RJQ_CLIENT_OPTIONS_INIT;
    o.url = url;
    o.name = "rjq-bench";
    o.on_event = on_event;
    conn_up[0] = conn_up[1] = conn_both = 0;
    int rc = rjq_libevent_client_new(&client, base, &o);
    if (rc != RJQ_OK) die("rjq_client_new: %s", rjq_strerror(rc));
    rjq_queue_options qo = RJQ_QUEUE_OPTIONS_INIT;
    qo.retention_ms = C.retention_ms;
    qo.completed_max = C.completed_max;
    qo.history_flush_ms = C.history_flush_ms;
    /* MAX_WAITING: a bounded queue (its enqueues go through enqueue.lua,
     * the general push path: bench/callgrind.sh rjqb-*) */
    if (getenv("MAX_WAITING") && *getenv("MAX_WAITING")) qo.max_waiting = atol(getenv("MAX_WAITING"));
    rc = rjq_queue_open(client, QNAME, &qo, &queue);
    if (rc != RJQ_OK) die("rjq_queue_open: %s", rjq_strerror(rc));
    if (!loop_until(&conn_both, 10)) die("could not connect to redis at %s:%d", C.host, C.port);
}

static void client_close(void) {
    rjq_client_free(client);
    client = NULL;
    queue = NULL;
}

typedef struct stats_wait {
    int done, status;
    rjq_stats st;
} stats_wait;

static void on_stats(rjq_client *c, int status, const rjq_stats *st, void *data) {
    stats_wait *w = data;
    (void)c;
    w->status = status;
    if (status == RJQ_OK) w->st = *st;
    w->done = 1;
}

static int read_stats(rjq_stats *out) {
    stats_wait w = {0, 0, {0}};
    int rc = rjq_queue_get_stats(queue, on_stats, &w);
    if (rc != RJQ_OK) return rc;
    if (!loop_until(&w.done, 10)) return RJQ_ETIMEDOUT;
    if (w.status == RJQ_OK) *out = w.st;
    return w.status;
}

/* ---- JSON output ------------------------------------------------------------ */

static char json[2048];
static size_t json_len;

static void jadd(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(json + json_len, sizeof json - json_len, fmt, ap);
    va_end(ap);
    if (n > 0) json_len += (size_t)n;
    if (json_len >= sizeof json) json_len = sizeof json - 1;
}

static void jbegin(const char *case_name, long n, int ok) {
    json_len = 0;
    jadd("{\"lib\":\"rjq\",\"case\":\"%s\",\"n\":%ld,\"ok\":%s", case_name, n, ok ? "true" : "false");
    if (C.payload_bytes > 0) jadd(",\"payload_bytes\":%ld", C.payload_bytes);
}

static void jredis(const snap *a, const snap *b, long n) {
    jadd(",\"redis_cpu_s\":%.3f,\"cmds_per_job\":%.2f,\"lua_per_job\":%.2f", b->cpu - a->cpu,
         (double)(b->cmds - a->cmds) / (double)n, (double)(b->lua - a->lua) / (double)n);
}

static void jend(void) {
    jadd("}");
    printf("%s\n", json);
    fflush(stdout);
}

/* ---- enqueue --------------------------------------------------------------- */

static struct enq {
    long total, next, finished, ok, inflight, errors;
    int last_err, done;
} E;

static void enq_pump_bulk(void);
static void enq_pump_single(void);

static void enq_finish(long count, int status, size_t n) {
    E.inflight--;
    E.finished += count;
    if (status == RJQ_OK) E.ok += (long)n;
    else {
        E.errors += count;
        E.last_err = status;
    }
    if (E.finished >= E.total) E.done = 1;
}

static void on_bulk(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs;
    enq_finish((long)(intptr_t)data, status, n);
    enq_pump_bulk();
}

static void enq_pump_bulk(void) {
    static rjq_enqueue_item *items;
    static char *buf;
    /* BULK_IDS=1 (diagnostic): each job with an id and a one-day dedup
     * window, as rjq-pg-bridge enqueues rows */
    static rjq_job_options *opts;
    static char (*ids)[32];
    static int with_ids = -1;
    if (items == NULL) {
        with_ids = getenv("BULK_IDS") && atoi(getenv("BULK_IDS")) == 1;
        items = calloc((size_t)C.bulk, sizeof *items);
        buf = malloc((size_t)C.bulk * C.payload_max);
        opts = calloc((size_t)C.bulk, sizeof *opts);
        ids = calloc((size_t)C.bulk, sizeof *ids);
        if (items == NULL || buf == NULL || opts == NULL || ids == NULL) die("out of memory");
    }
    while (E.inflight < C.bulk_window && E.next < E.total) {
        long m = E.total - E.next < C.bulk ? E.total - E.next : C.bulk;
        for (long j = 0; j < m; j++) {
            char *p = buf + (size_t)j * C.payload_max;
            items[j].size = sizeof items[j];
            items[j].payload = p;
            items[j].len = (size_t)payload(p, E.next + j);
            items[j].opts = NULL;
            if (with_ids) {
                snprintf(ids[j], sizeof ids[j], "pg-%ld", E.next + j + 1);
                opts[j].size = sizeof opts[j];
                opts[j].id = ids[j];
                opts[j].dedup_ms = 24LL * 3600 * 1000;
                items[j].opts = &opts[j];
            }
        }
        /* inputs are copied during the call: buf is reused at once */
        int rc = rjq_enqueue_batch(queue, items, (size_t)m, on_bulk, (void *)(intptr_t)m);
        E.next += m;
        E.inflight++;
        if (rc != RJQ_OK) enq_finish(m, rc, 0);
    }
}

static void on_single(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs, (void)data;
    enq_finish(1, status, n);
    enq_pump_single();
}

static void enq_pump_single(void) {
    static char *p;
    if (p == NULL) p = payload_buf();
    while (E.inflight < C.window && E.next < E.total) {
        int len = payload(p, E.next);
        rjq_job_options go = RJQ_JOB_OPTIONS_INIT; /* JOB_GROUPS: job groups (README "Groups") */
        char g[32];
        if (C.groups > 0) {
            snprintf(g, sizeof g, "g%ld", E.next % C.groups);
            go.group = g;
        }
        int rc = rjq_enqueue(queue, p, (size_t)len, C.groups > 0 ? &go : NULL, on_single, NULL);
        E.next++;
        E.inflight++;
        if (rc != RJQ_OK) enq_finish(1, rc, 0);
    }
}

/* Enqueue `total` jobs (bulk or windowed single); returns jobs accepted. */
static long enqueue_all(long total, int bulk, const char *what) {
    memset(&E, 0, sizeof E);
    E.total = total;
    progress(what, &E.finished, total);
    if (bulk) enq_pump_bulk();
    else enq_pump_single();
    loop_until(&E.done, (double)C.timeout_s);
    progress_end();
    if (E.errors) fprintf(stderr, "rjq-bench: %ld enqueue errors, last: %s (%s)\n", E.errors,
                          rjq_strerror(E.last_err), rjq_client_get_errmsg(client));
    if (!E.done) fprintf(stderr, "rjq-bench: enqueue timed out (%ld of %ld answered)\n", E.finished, total);
    return E.ok;
}

static int case_enqueue(int bulk) {
    char name[64];
    if (bulk) snprintf(name, sizeof name, "enqueue-bulk(%ld)", C.bulk);
    else snprintf(name, sizeof name, "enqueue-single(w=%ld)", C.window);
    clean_queue();
    loop_init(0);
    client_open();
    static snap r0, r1;
    redis_snap(&r0);
    cg_mark("zero"); /* (bench/callgrind.sh rjq-enqueue) */
    double cpu0 = cpu_s(), t0 = now_s();
    long got = enqueue_all(C.n, bulk, name);
    double el = now_s() - t0, cpu = cpu_s() - cpu0;
    cg_mark("dump");
    redis_snap(&r1);
    rjq_stats st;
    int rc = read_stats(&st);
    int ok = got == C.n && rc == RJQ_OK && st.enqueued == C.n && st.ready == C.n;
    if (rc != RJQ_OK) fprintf(stderr, "rjq-bench: stats: %s\n", rjq_strerror(rc));
    else if (!ok)
        fprintf(stderr, "rjq-bench: accepted %ld, stats: enqueued %lld ready %lld\n", got, st.enqueued,
                st.ready);
    client_close();
    loop_free();
    print_cmdstats(&r0, &r1, C.n);
    jbegin(name, C.n, ok);
    jadd(",\"elapsed_s\":%.3f,\"jobs_per_s\":%.0f,\"client_cpu_s\":%.3f", el, round((double)C.n / el), cpu);
    jredis(&r0, &r1, C.n);
    if (bulk) jadd(",\"mem_per_job_bytes\":%.1f", (double)(r1.mem - r0.mem) / (double)C.n);
    jend();
    return 0;
}

/* ---- drain -------------------------------------------------------------------- */

static struct drain {
    long target, done, errors;
    int reached, stopped, last_err;
    double t1, cpu1;
    snap r1;
} D;

static void on_job_done(rjq_client *c, int status, void *data) {
    (void)c, (void)data;
    if (status != RJQ_OK) {
        D.errors++;
        D.last_err = status;
        return;
    }
    if (++D.done == D.target) {
        D.t1 = now_s();
        D.cpu1 = cpu_s();
        cg_client(1);
        cg_mark("dump");
        redis_snap(&D.r1); /* synchronous: the phase ends here */
        D.reached = 1;
    }
}

static void drain_handler(rjq_job *job, void *data) {
    (void)data;
    int rc = rjq_job_complete(job, "", 0, on_job_done, NULL);
    if (rc != RJQ_OK) {
        D.errors++;
        D.last_err = rc;
    }
}

static void on_stopped(rjq_worker *w, int status, void *data) {
    (void)w, (void)status, (void)data;
    D.stopped = 1;
}

/* The worker process: consume, time until the target-th completion. */
/* drain with REFERENCE=1: the reference's jobs/s, measured first (the
 * drain's JSON then gives the ratio to it); 0: not asked for. */
static double drain_reference;

static int drain_worker(const char *name, long depth) {
    loop_init(0);
    client_open();
    memset(&D, 0, sizeof D);
    D.target = C.n;
    static snap r0;
    redis_snap(&r0);
    cg_mark("zero");
    cg_client(0);
    double cpu0 = cpu_s(), t0 = now_s();
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = (int)C.conc;
    rjq_worker *w;
    int rc = rjq_worker_start(queue, &wo, drain_handler, NULL, &w);
    if (rc != RJQ_OK) die("rjq_worker_start: %s", rjq_strerror(rc));
    progress(name, &D.done, D.target);
    loop_until(&D.reached, (double)C.timeout_s);
    progress_end();
    if (!D.reached) { /* timed out: report what we have */
        D.t1 = now_s();
        D.cpu1 = cpu_s();
        redis_snap(&D.r1);
        fprintf(stderr, "rjq-bench: drain timed out after %ld s: %ld of %ld completed\n", C.timeout_s,
                D.done, D.target);
    }
    if (rjq_worker_stop(w, on_stopped, NULL) == RJQ_OK) loop_until(&D.stopped, 30);
    rjq_stats st;
    rc = read_stats(&st);
    int ok = D.reached && D.errors == 0 && rc == RJQ_OK &&
             (depth > C.n ? st.completed >= C.n : st.completed == C.n && st.ready == 0 && st.active == 0);
    if (D.errors)
        fprintf(stderr, "rjq-bench: %ld completion errors, last: %s\n", D.errors, rjq_strerror(D.last_err));
    if (rc != RJQ_OK) fprintf(stderr, "rjq-bench: stats: %s\n", rjq_strerror(rc));
    else if (!ok)
        fprintf(stderr, "rjq-bench: stats: completed %lld ready %lld active %lld dead %lld\n",
                st.completed, st.ready, st.active, st.dead);
    client_close();
    loop_free();
    double el = D.t1 - t0;
    long measured = D.reached ? C.n : (D.done > 0 ? D.done : 1); /* per-job figures */
    print_cmdstats(&r0, &D.r1, measured);
    jbegin(name, C.n, ok);
    jadd(",\"elapsed_s\":%.3f,\"jobs_per_s\":%.0f,\"worker_cpu_s\":%.3f", el,
         round((double)measured / el), D.cpu1 - cpu0);
    jredis(&r0, &D.r1, measured);
    if (drain_reference > 0)
        jadd(",\"reference_jobs_per_s\":%.0f,\"ratio_to_reference\":%.3f", drain_reference,
             (double)measured / el / drain_reference);
    jend();
    return 0;
}

/* In a forked worker: die with the parent (e.g. killed by a time limit). */
static void child_init(pid_t parent) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);
}

/* fork() for a worker process: output flushed first (the child must not
 * print the parent's buffers again); in the child (0 returned) it dies
 * with the parent. */
static pid_t fork_worker(void) {
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) die("fork: %s", strerror(errno));
    if (pid == 0) child_init(parent);
    return pid;
}

static int wait_child(pid_t pid) {
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return 1;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    fprintf(stderr, "rjq-bench: worker process killed by signal %d\n", WTERMSIG(status));
    return 1;
}

static double reference_jobs_per_s(double rps[3]);

static int case_drain(long depth) {
    char name[96];
    if (env_long("REFERENCE", 0)) {
        double rps[3];
        drain_reference = reference_jobs_per_s(rps);
        info("reference: %.0f jobs/s", drain_reference);
    }
    if (depth < C.n) depth = C.n;
    if (depth > C.n) snprintf(name, sizeof name, "drain(c=%ld,depth=%ld)", C.conc, depth);
    else snprintf(name, sizeof name, "drain(c=%ld)", C.conc);
    if (C.groups > 0) {
        size_t used = strlen(name) - 1; /* (before the ')') */
        snprintf(name + used, sizeof name - used, ",groups=%ld)", C.groups);
    }
    clean_queue();
    /* pre-enqueue (not timed) */
    loop_init(0);
    client_open();
    static snap m0, m1;
    redis_snap(&m0);
    double t0 = now_s();
    long got = enqueue_all(depth, C.groups == 0, "pre-enqueue"); /* (group jobs: one call each) */
    double el = now_s() - t0;
    redis_snap(&m1);
    client_close();
    loop_free();
    if (got != depth) die("pre-enqueue: only %ld of %ld jobs accepted", got, depth);
    info("pre-enqueued %ld jobs in %.3f s (%.0f jobs/s); redis used_memory +%.1f bytes/job", depth, el,
         (double)depth / el, (double)(m1.mem - m0.mem) / (double)depth);
    pid_t pid = fork_worker();
    if (pid == 0) exit(drain_worker(name, depth));
    return wait_child(pid);
}

/* ---- latency ------------------------------------------------------------------ */

/* The serving worker process: start, warm, say "ready" on `ready_fd`, serve
 * until `stop_fd` becomes readable (a byte, or EOF when the parent dies). */
static int serve_stop_requested;

static void on_stop_fd(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what, (void)arg;
    serve_stop_requested = 1;
}

static long serve_done;

static void serve_job_done(rjq_client *c, int status, void *data) {
    (void)c, (void)data;
    if (status == RJQ_OK) serve_done++;
    else /* (the worker serves on: a job whose lease was lost runs again
          * once a lease sweep took it back, its await told then) */
        fprintf(stderr, "rjq-bench: worker: completion: %s\n", rjq_strerror(status));
}

static void serve_handler(rjq_job *job, void *data) {
    (void)data;
    int rc = rjq_job_complete(job, "", 0, serve_job_done, NULL);
    if (rc != RJQ_OK) fprintf(stderr, "rjq-bench: worker: rjq_job_complete: %s\n", rjq_strerror(rc));
}

static int serve_worker(int ready_fd, int stop_fd) {
    loop_init(0);
    client_open();
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = (int)C.conc;
    /* RECLAIM_MS (bench/callgrind.sh): the worker's visits of the queue
     * (sweeps, looks for work) go by the clock, not by the job */
    if (env_long("RECLAIM_MS", 0) > 0) wo.reclaim_ms = env_long("RECLAIM_MS", 0);
    if (env_long("LEASE_MS", 0) > 0) wo.lease_ms = env_long("LEASE_MS", 0);
    rjq_worker *w;
    int rc = rjq_worker_start(queue, &wo, serve_handler, NULL, &w);
    if (rc != RJQ_OK) die("worker: rjq_worker_start: %s", rjq_strerror(rc));
    loop_sleep(0.2);
    struct event *ev = event_new(base, stop_fd, EV_READ, on_stop_fd, NULL);
    event_add(ev, NULL);
    if (write(ready_fd, "r", 1) != 1) die("worker: cannot signal readiness");
    close(ready_fd);
    cg_client_as(0, NULL);
    loop_until(&serve_stop_requested, 0);
    cg_client_as(1, "worker");
    event_free(ev);
    D.stopped = 0;
    if (rjq_worker_stop(w, on_stopped, NULL) == RJQ_OK) loop_until(&D.stopped, 10);
    client_close();
    loop_free();
    return 0;
}

static int cmp_double_(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* common.js pct(): sorted[min(len-1, ceil(p/100*len)-1)] */
static double pct(const double *sorted, long n, double p) {
    if (n <= 0) return 0;
    long i = (long)ceil(p / 100.0 * (double)n) - 1;
    if (i > n - 1) i = n - 1;
    if (i < 0) i = 0;
    return sorted[i];
}

static struct lat {
    long total, sent, finished, completed, errors;
    int last_err, all_done, sending_done;
    double t0, send_s, *ts, *lat;
    struct event *pace;
} L;

static void on_awaited(rjq_client *c, int status, const rjq_outcome *out, void *data) {
    (void)c, (void)out;
    double t = now_s();
    long i = (long)(intptr_t)data;
    if (i >= 0) {
        if (status == RJQ_OK) L.lat[L.completed++] = (t - L.ts[i]) * 1000.0;
        else {
            L.errors++;
            L.last_err = status;
        }
    }
    if (++L.finished >= L.total) L.all_done = 1;
}

static void lat_send(long i) {
    static char *p;
    if (p == NULL) p = payload_buf();
    int len = payload(p, i);
    L.ts[i] = now_s();
    int rc = rjq_enqueue_await(queue, p, (size_t)len, NULL, NULL, on_awaited, (void *)(intptr_t)i, NULL);
    if (rc != RJQ_OK) {
        L.errors++;
        L.last_err = rc;
        if (++L.finished >= L.total) L.all_done = 1;
    }
}

/* Like common.js paced(): at each 1 ms tick, send every job due by now
 * (job i is due i/RATE s after the start), catching up when late. */
static void on_pace(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what, (void)arg;
    if (L.sent >= L.total) {
        L.send_s = now_s() - L.t0;
        L.sending_done = 1;
        return;
    }
    double el = now_s() - L.t0;
    long due = (long)floor(el * (double)C.rate) + 1;
    if (due > L.total) due = L.total;
    while (L.sent < due) lat_send(L.sent++);
    struct timeval tv = {0, 1000};
    evtimer_add(L.pace, &tv);
}

typedef struct warm_wait {
    long left;
    int done;
} warm_wait;

static void on_warm(rjq_client *c, int status, const rjq_outcome *out, void *data) {
    warm_wait *w = data;
    (void)c, (void)out;
    if (status != RJQ_OK) fprintf(stderr, "rjq-bench: warm-up await: %s\n", rjq_strerror(status));
    if (--w->left == 0) w->done = 1;
}

/* A worker process (serve_worker) for the awaited cases, returned once it
 * runs; *stop_fd is the pipe end that stop_serve_worker writes to stop it. */
static pid_t spawn_serve_worker(int *stop_fd) {
    int ready_pipe[2], stop_pipe[2];
    if (pipe(ready_pipe) != 0 || pipe(stop_pipe) != 0) die("pipe: %s", strerror(errno));
    pid_t pid = fork_worker();
    if (pid == 0) {
        close(ready_pipe[0]);
        close(stop_pipe[1]);
        exit(serve_worker(ready_pipe[1], stop_pipe[0]));
    }
    close(ready_pipe[1]);
    close(stop_pipe[0]);
    char byte;
    if (read(ready_pipe[0], &byte, 1) != 1) {
        close(stop_pipe[1]);
        wait_child(pid);
        die("the worker process did not start");
    }
    close(ready_pipe[0]);
    *stop_fd = stop_pipe[1];
    return pid;
}

/* Stops the worker process of spawn_serve_worker; its exit status. */
static int stop_serve_worker(pid_t pid, int stop_fd) {
    if (write(stop_fd, "s", 1) != 1) { /* the child sees EOF anyway */
    }
    close(stop_fd);
    return wait_child(pid);
}

static void on_format_set(rjq_client *c, int status, long long n, void *data) {
    (void)c, (void)n;
    if (status != RJQ_OK) die("rjq_queue_set_format: %s", rjq_strerror(status));
    *(volatile int *)data = 1;
}

/* QUEUE_FORMAT=2 (latency, awaited-seq): the queue's format 2 set first,
 * before the warm-up (its first enqueue learns the format) */
static void set_queue_format(void) {
    if (getenv("QUEUE_FORMAT") && atoi(getenv("QUEUE_FORMAT")) == 2) {
        static volatile int set;
        set = 0;
        if (rjq_queue_set_format(queue, 2, on_format_set, (void *)&set) != RJQ_OK || !loop_until(&set, 10))
            die("could not set the queue's format 2");
    }
}

static int case_latency(void) {
    char name[96];
    snprintf(name, sizeof name, "latency(%ld/s,c=%ld)", C.rate, C.conc);
    clean_queue();
    int stop_fd;
    pid_t pid = spawn_serve_worker(&stop_fd);

    loop_init(1);
    client_open();
    set_queue_format();
    /* warm-up: subscribe the reply channel, run a few jobs end to end */
    if (C.warm > 0) {
        warm_wait ww = {C.warm, 0};
        char *p = payload_buf();
        for (long i = 0; i < C.warm; i++) {
            int len = payload(p, -1 - i);
            int rc = rjq_enqueue_await(queue, p, (size_t)len, NULL, NULL, on_warm, &ww, NULL);
            if (rc != RJQ_OK) die("rjq_enqueue_await: %s", rjq_strerror(rc));
        }
        free(p); /* (copied by each call) */
        if (!loop_until(&ww.done, 10)) die("warm-up jobs did not complete");
    }
    loop_sleep(0.2);

    memset(&L, 0, sizeof L);
    L.total = C.rate * C.secs;
    L.ts = calloc((size_t)L.total, sizeof *L.ts);
    L.lat = calloc((size_t)L.total, sizeof *L.lat);
    L.pace = evtimer_new(base, on_pace, NULL);
    if (L.ts == NULL || L.lat == NULL || L.pace == NULL) die("out of memory");
    static snap r0, r1;
    redis_snap(&r0);
    double cpu0 = cpu_s();
    L.t0 = now_s();
    progress(name, &L.finished, L.total);
    on_pace(-1, 0, NULL);
    loop_until(&L.sending_done, (double)C.secs + (double)C.timeout_s);
    loop_until(&L.all_done, 30); /* like common.js: up to 30 s more */
    progress_end();
    double cpu = cpu_s() - cpu0;
    redis_snap(&r1);
    if (!L.sending_done) L.send_s = now_s() - L.t0;

    int child_rc = stop_serve_worker(pid, stop_fd);
    if (L.errors)
        fprintf(stderr, "rjq-bench: %ld awaits failed, last: %s (%s)\n", L.errors, rjq_strerror(L.last_err),
                rjq_client_get_errmsg(client));
    if (L.completed < L.total)
        fprintf(stderr, "rjq-bench: %ld of %ld awaited jobs completed (%zu awaits pending)\n", L.completed,
                L.total, rjq_client_count_awaits(client));
    event_free(L.pace);
    client_close();
    loop_free();

    qsort(L.lat, (size_t)L.completed, sizeof *L.lat, cmp_double_);
    print_cmdstats(&r0, &r1, L.total);
    jbegin(name, L.total, L.completed == L.total && child_rc == 0);
    jadd(",\"completed\":%ld,\"send_rate\":%.0f", L.completed, round((double)L.total / L.send_s));
    jadd(",\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f", pct(L.lat, L.completed, 50),
         pct(L.lat, L.completed, 90), pct(L.lat, L.completed, 99),
         L.completed ? L.lat[L.completed - 1] : 0.0);
    jadd(",\"producer_cpu_s\":%.3f", cpu);
    jredis(&r0, &r1, L.total);
    jend();
    free(L.ts);
    free(L.lat);
    return 0;
}

/* ---- awaited-seq: awaited jobs strictly one at a time ------------------------- */

/* Like the peers' callgrind/seq_*.js: the latency case's worker process
 * and warm-up, then N awaited jobs, each sent from the previous one's
 * await callback, so Redis sees exactly one job's work at a time (what
 * bench/callgrind.sh measures per job). Reports latency percentiles too. */
static void seq_send(long i);

static void on_seq(rjq_client *c, int status, const rjq_outcome *out, void *data) {
    (void)c, (void)out;
    long i = (long)(intptr_t)data;
    if (status == RJQ_OK) L.lat[L.completed++] = (now_s() - L.ts[i]) * 1000.0;
    else {
        L.errors++;
        L.last_err = status;
    }
    L.finished++;
    if (i + 1 < L.total) seq_send(i + 1);
    else L.all_done = 1;
}

/* JOB_GROUPS: the job enqueued (an await's enqueue takes no group), then
 * awaited by its id */
static void on_seq_enqueued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c;
    int rc = status != RJQ_OK ? status : n != 1 ? RJQ_EINVAL : RJQ_OK;
    if (rc == RJQ_OK) rc = rjq_queue_await(queue, jobs[0].id, NULL, on_seq, data, NULL);
    if (rc != RJQ_OK) {
        L.errors++;
        L.last_err = rc;
        L.all_done = 1;
    }
}

static void seq_send(long i) {
    static char *p;
    if (p == NULL) p = payload_buf();
    int len = payload(p, i);
    L.ts[i] = now_s();
    int rc;
    if (C.groups > 0) { /* JOB_GROUPS: each job in a group, round-robin
                         * (genqueue.lua and its push to the idle worker,
                         * GROUPS.take), awaited by id (+1 script call) */
        rjq_job_options go = RJQ_JOB_OPTIONS_INIT;
        char g[32];
        snprintf(g, sizeof g, "g%ld", i % C.groups);
        go.group = g;
        rc = rjq_enqueue(queue, p, (size_t)len, &go, on_seq_enqueued, (void *)(intptr_t)i);
    } else {
        rc = rjq_enqueue_await(queue, p, (size_t)len, NULL, NULL, on_seq, (void *)(intptr_t)i, NULL);
    }
    if (rc != RJQ_OK) {
        L.errors++;
        L.last_err = rc;
        L.all_done = 1;
    }
}

/* awaited-seq gave up waiting (STALL_S, or TIMEOUT): which job, and what
 * the queue holds, so a lost job is told apart from a slow machine. A job
 * neither ready nor active was deleted under the run: another run's
 * clean_queue on the same redis-server (a port taken twice) makes the
 * worker's completion "lease lost" and leaves the await without an
 * outcome (it has no timeout), which hung the run before STALL_S. */
static void seq_stuck(int stuck, double elapsed) {
    redisContext *r = sync_connect();
    redisReply *k = redisCommand(r, "SCAN 0 MATCH %s COUNT 100000", KEY_PATTERN);
    redisReply *rd = redisCommand(r, "LLEN rjq:{" QNAME "}:ready");
    redisReply *ac = redisCommand(r, "ZCARD rjq:{" QNAME "}:active");
    long long keys =
        k && k->type == REDIS_REPLY_ARRAY && k->elements == 2 ? (long long)k->element[1]->elements : -1;
    long long ready = rd && rd->type == REDIS_REPLY_INTEGER ? rd->integer : -1;
    long long active = ac && ac->type == REDIS_REPLY_INTEGER ? ac->integer : -1;
    const char *gone = ": the job is neither waiting nor running (its keys deleted under the run: is "
                       "another run cleaning queue \"" QNAME "\" on this redis-server?)";
    fprintf(stderr,
            "rjq-bench: awaited-seq: job %ld of %ld had no outcome %s (%.0f s into the run): given up; "
            "the queue holds %lld ready, %lld active jobs, %lld keys%s\n",
            L.finished + 1, L.total, stuck ? "for STALL_S seconds" : "by TIMEOUT", elapsed, ready, active,
            keys, ready == 0 && active == 0 ? gone : "");
    freeReplyObject(k);
    freeReplyObject(rd);
    freeReplyObject(ac);
    redisFree(r);
}

static int case_awaited_seq(void) {
    char name[96];
    snprintf(name, sizeof name, "awaited-seq(c=%ld)", C.conc);
    clean_queue();
    int stop_fd;
    pid_t pid = spawn_serve_worker(&stop_fd);

    loop_init(1);
    client_open();
    memset(&L, 0, sizeof L);
    L.total = C.warm;
    L.ts = calloc((size_t)(C.n > C.warm ? C.n : C.warm) + 1, sizeof *L.ts);
    L.lat = calloc((size_t)(C.n > C.warm ? C.n : C.warm) + 1, sizeof *L.lat);
    if (L.ts == NULL || L.lat == NULL) die("out of memory");
    set_queue_format();
    if (C.warm > 0) { /* one at a time too: the reply channel subscribed */
        seq_send(0);
        if (!loop_until(&L.all_done, 30) || L.errors) die("warm-up jobs did not complete");
    }
    loop_sleep(0.2);
    /* bench/callgrind.sh: the clients' background work (liveness beats,
     * sweeps, polls: by the clock, not by the job), CG_IDLE_S seconds of
     * it with nothing to do, dumped as <CG_TAG>-idle, so that a loaded
     * machine's slower jobs are not charged with more of it */
    double idle_s = getenv("CG_IDLE_S") ? atof(getenv("CG_IDLE_S")) : 0;
    const char *tag = getenv("CG_TAG");
    if (idle_s > 0 && tag && getenv("CG_MARK")) {
        char *was = strdup(tag), idle_tag[256];
        if (was == NULL) die("out of memory");
        snprintf(idle_tag, sizeof idle_tag, "%s-idle", was);
        setenv("CG_TAG", idle_tag, 1);
        cg_mark("zero");
        loop_sleep(idle_s);
        cg_mark("dump");
        setenv("CG_TAG", was, 1);
        free(was);
    }

    L.total = C.n;
    L.completed = L.finished = 0;
    L.all_done = 0;
    static snap r0, r1;
    redis_snap(&r0);
    cg_mark("zero");
    cg_client(0);
    double cpu0 = cpu_s();
    L.t0 = now_s();
    progress(name, &L.finished, L.total);
    progress_watch((double)C.stall_s);
    seq_send(0);
    loop_until(&L.all_done, (double)C.timeout_s);
    int stuck = stalled;
    progress_end();
    double cpu = cpu_s() - cpu0, elapsed = now_s() - L.t0;
    cg_client(1);
    cg_mark("dump");
    redis_snap(&r1);

    if (!L.all_done) seq_stuck(stuck, elapsed);
    int child_rc = stop_serve_worker(pid, stop_fd);
    if (L.errors)
        fprintf(stderr, "rjq-bench: %ld awaits failed, last: %s (%s)\n", L.errors, rjq_strerror(L.last_err),
                rjq_client_get_errmsg(client));
    client_close();
    loop_free();

    qsort(L.lat, (size_t)L.completed, sizeof *L.lat, cmp_double_);
    print_cmdstats(&r0, &r1, L.total);
    jbegin(name, L.total, L.completed == L.total && child_rc == 0);
    jadd(",\"completed\":%ld,\"elapsed_s\":%.3f", L.completed, elapsed);
    jadd(",\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f", pct(L.lat, L.completed, 50),
         pct(L.lat, L.completed, 90), pct(L.lat, L.completed, 99),
         L.completed ? L.lat[L.completed - 1] : 0.0);
    jadd(",\"producer_cpu_s\":%.3f", cpu);
    jredis(&r0, &r1, L.total);
    jend();
    free(L.ts);
    free(L.lat);
    return 0;
}

/* ---- main ---------------------------------------------------------------------- */

/* ---- reference: the same data work with plain pipelined commands -------------- */

/* What a drain does to Redis, without rjq, measured by redis-benchmark
 * (redis-tools, beside redis-server): N payloads pushed with LPUSH, taken
 * with LMOVE onto an "active" list, acked with LREM, each command N times
 * by CLIENTS (50) connections with PIPELINE (16) commands in flight on
 * each. A job is one of each: jobs/s = 1 / (1/LPUSH + 1/LMOVE + 1/LREM)
 * (their requests/s). A queue does more per job (leases, attempts,
 * tokens, retries); its drain is reported as a ratio to this. (A client
 * of our own in one thread measured itself: it reached 0.3x of this.) */

/* Run redis-benchmark for one command (argv: its words) and return its
 * requests/s, from the last line of its --csv output: "<test>","<rps>",... */
static double benchmark_rps(const char *const *cmd, int ncmd, long depth, long nconn) {
    char port[16], n[24], p[24], c[24];
    snprintf(port, sizeof port, "%d", C.port);
    snprintf(n, sizeof n, "%ld", C.n);
    snprintf(p, sizeof p, "%ld", depth);
    snprintf(c, sizeof c, "%ld", nconn);
    const char *argv[32] = {"redis-benchmark", "-h", C.host, "-p", port, "-n", n, "-P", p,
                            "-c", c, "--csv"};
    int k = 12;
    for (int i = 0; i < ncmd && k < 31; i++) argv[k++] = cmd[i];
    argv[k] = NULL;
    int fd[2];
    if (pipe(fd) != 0) die("pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) die("fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        execvp(argv[0], (char *const *)argv);
        fprintf(stderr, "rjq-bench: reference needs redis-benchmark (redis-tools): %s\n",
                strerror(errno));
        _exit(127);
    }
    close(fd[1]);
    char out[65536];
    size_t len = 0;
    ssize_t got;
    while ((got = read(fd[0], out + len, sizeof out - 1 - len)) > 0) len += (size_t)got;
    close(fd[0]);
    out[len] = '\0';
    int st;
    if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        die("redis-benchmark %s failed", cmd[0]);
    /* the last line's second field */
    char *last = NULL;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) last = line;
    char *f = last ? strstr(last, "\",\"") : NULL;
    double rps = f ? atof(f + 3) : 0;
    if (rps <= 0) die("redis-benchmark %s: no requests/s in its output", cmd[0]);
    return rps;
}

/* The reference's jobs/s (and each command's requests/s in rps[3]). */
static double reference_jobs_per_s(double rps[3]) {
    const long pipe = env_long("PIPELINE", 16), nconn = env_long("CLIENTS", 50);
    if (pipe < 1 || nconn < 1) die("PIPELINE and CLIENTS must be >= 1");
    redisContext *r = sync_connect();
    freeReplyObject(redisCommand(r, "DEL rjq:{ref}:ready rjq:{ref}:active"));
    char *p = payload_buf();
    payload(p, 0); /* (a string: no NUL inside) */
    const char *lpush[] = {"LPUSH", "rjq:{ref}:ready", p};
    const char *lmove[] = {"LMOVE", "rjq:{ref}:ready", "rjq:{ref}:active", "RIGHT", "LEFT"};
    const char *lrem[] = {"LREM", "rjq:{ref}:active", "1", p};
    rps[0] = benchmark_rps(lpush, 3, pipe, nconn);
    rps[1] = benchmark_rps(lmove, 5, pipe, nconn);
    rps[2] = benchmark_rps(lrem, 4, pipe, nconn);
    redisReply *left = redisCommand(r, "LLEN rjq:{ref}:active");
    if (left == NULL || left->type != REDIS_REPLY_INTEGER || left->integer != 0)
        die("reference: the active list is not empty after the LREMs");
    freeReplyObject(left);
    freeReplyObject(redisCommand(r, "DEL rjq:{ref}:ready rjq:{ref}:active"));
    redisFree(r);
    free(p);
    return 1.0 / (1.0 / rps[0] + 1.0 / rps[1] + 1.0 / rps[2]);
}

static int case_reference(void) {
    char case_name[96];
    snprintf(case_name, sizeof case_name, "reference(pipeline=%ld,clients=%ld)",
             env_long("PIPELINE", 16), env_long("CLIENTS", 50));
    snap a, b;
    double rps[3];
    redis_snap(&a);
    cg_mark("zero"); /* bench/callgrind.sh ref-drain */
    double t0 = now_s();
    double jobs = reference_jobs_per_s(rps);
    double elapsed = now_s() - t0;
    cg_mark("dump");
    redis_snap(&b);
    jbegin(case_name, C.n, 1);
    jadd(",\"elapsed_s\":%.3f,\"jobs_per_s\":%.0f,\"lpush_per_s\":%.0f,\"lmove_per_s\":%.0f,"
         "\"lrem_per_s\":%.0f", elapsed, jobs, rps[0], rps[1], rps[2]);
    jredis(&a, &b, C.n);
    jend();
    return 0;
}

static void usage(void) {
    fprintf(stderr,
            "usage: rjq-bench enqueue-bulk|enqueue-single|drain|depth|latency|awaited-seq|reference\n"
            "env: REDIS_HOST=127.0.0.1 REDIS_PORT=6390 N=50000 BULK=1000 BULK_WINDOW=4 WINDOW=100\n"
            "     CONC=50 RATE=1000 SECS=10 DEPTH=(drain: N; depth: 1000000) WARM=10 TIMEOUT=120\n"
            "     CMDSTATS=1 (per-command breakdown on stderr) VERBOSE=1\n"
            "     PAYLOAD_BYTES=0 (each payload's length; 0: a tiny JSON)\n"
            "     reference: PIPELINE=16 CLIENTS=50; drain: REFERENCE=1 runs it first and\n"
            "       adds reference_jobs_per_s and ratio_to_reference to the drain's result\n"
            "     diagnostics: RETENTION_MS COMPLETED_MAX (queue options; default: library's)\n"
            "The last stdout line is the JSON result (format of /work/shared/peers).\n");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        usage();
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    load_config();
    const char *mode = argv[1];
    if (strcmp(mode, "enqueue-bulk") == 0) return case_enqueue(1);
    if (strcmp(mode, "enqueue-single") == 0) return case_enqueue(0);
    if (strcmp(mode, "drain") == 0) return case_drain(C.depth);
    if (strcmp(mode, "depth") == 0) return case_drain(C.depth ? C.depth : 1000000);
    if (strcmp(mode, "latency") == 0) return case_latency();
    if (strcmp(mode, "awaited-seq") == 0) return case_awaited_seq();
    if (strcmp(mode, "reference") == 0) return case_reference();
    usage();
    return 2;
}
