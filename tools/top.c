/*
 * rjq top: a live terminal view of every queue of a prefix (ncurses).
 *
 * The queues come from the registry (rjq_client_list_queues), their numbers from
 * rjq_queue_get_stats, one call per queue per refresh. A refresh runs every
 * interval, and sooner (100 ms after) when a queue's event stream says
 * something happened, so a busy queue is seen moving and an idle one costs
 * a few commands per interval. Rates are the counters' differences over
 * the time between two refreshes; the sparkline is the last 24 rates of
 * completions. Wait (enqueue to first start) and run times come from the
 * same event stream (timing.c, as in rjq serve): the mean of the jobs seen
 * by the last refresh that saw any, and the picked queue's p50 and p99
 * since top started.
 *
 * A sharded queue (README "Sharded queues") is one row: it is opened with
 * rjq_queue_open_async, so its stats are its shards' summed, and its
 * shards' own registry names are folded under it (not listed). Its row's
 * wait and run times come from a monitor per shard, the jobs keyed per
 * shard (server-assigned ids repeat across shards), observed in the row.
 *
 * A bold line under the header adds up every queue's depths, completions
 * and rates (the queues whose numbers came).
 *
 * Keys: up/down (or k/j) pick a queue, whose every number shows at the
 * bottom, with its last minutes from the stored history (README "History":
 * every process's counts, across restarts of top) and its busiest job
 * groups (README "Groups": the TOP_GROUPS with the most ready jobs, their
 * running jobs, their limits (a bound as "ready 3/500", a concurrency as
 * "active 1/2", a rate limit as "rate 50/1s"), their starts/s from two
 * readings of their started counters, PAUSED; read with each refresh; a
 * sharded queue's merged over its shards); q quits.
 *
 * Only the public API (rjq.h) and libevent are used.
 */
#include "top.h"

#include <math.h>
#include <locale.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curses.h>

#include "rate.h"
#include "timing.h"

#define MAX_QUEUES 1000
#define SPARK 24
#define EVENT_DELAY_MS 100
#define SWEEP_EVERY 60               /* refreshes between two timing sweeps */
#define HIST_MINUTES 5               /* the picked queue's stored minutes shown */
#define TOP_GROUPS 5                 /* the picked queue's busiest groups shown */

typedef struct top top;

/* A shard's monitor of a sharded queue's row: the owner of its jobs in
 * top's timing map (server-assigned ids repeat across shards). */
typedef struct shard_mon {
    struct row *r;
    rjq_monitor *m;
} shard_mon;

typedef struct row {
    top *t;
    char name[201];
    rjq_queue *q;
    rjq_monitor *m;
    rjq_stats s, prev;
    int have, have_prev;
    double done_rate, fail_rate, in_rate;
    timing_queue times;              /* since top started (the owner in top's map) */
    double wait_ms, run_ms;          /* the last means (see rates); -1: none yet */
    double spark[SPARK];
    int nspark;
    int sharded;      /* q is a sharded queue's handle */
    shard_mon sm[RJQ_SHARDS_MAX]; /* its shards' monitors (sharded) */
    struct row *next_folded; /* a shard's row taken out of the view (freed at exit) */
} row;

struct top {
    struct event_base *base;
    rjq_client *c;
    long interval_ms;
    row **rows;            /* each row stays where it is: its monitor points to it */
    size_t n;
    row *folded;           /* rows of sharded queues' shards, out of the view */
    int sel;
    int pending;           /* stats replies still due this refresh */
    int listing;           /* a registry page is being read */
    int refreshing;
    double refreshed_at;   /* monotonic seconds */
    double dt;
    struct event *tick, *soon, *keys;
    timing_map times;      /* job id -> enqueue and start times */
    /* the picked queue's stored history (README "History"): its last
     * HIST_MINUTES minutes, added up, read with each refresh */
    char hist_name[201];
    rjq_history_point hist;
    int hist_have, hist_reading;
    /* the picked queue's busiest groups (README "Groups"): the first
     * TOP_GROUPS of rjq_queue_list_groups, read with each refresh, as text */
    char grp_name[201];
    char grp_line[1280]; /* (5 groups of 64-byte names with their limits and rates) */
    int grp_have, grp_reading;
    /* their started counters at the last listing (rjq_group_info.started),
     * for their starts/s: two readings' difference (counter_rate) */
    struct {
        char name[RJQ_GROUP_NAME_MAX + 1];
        long long started;
    } grp_prev[TOP_GROUPS];
    size_t grp_nprev;
    double grp_at;         /* when they were read (monotonic s) */
    double grp_next;       /* not read again before (monotonic s) */
    unsigned long refreshes;
    char status[160];
    int quit;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- drawing ---------------------------------------------------------------- */

/* The last `room` rates (room < 0: none) as block characters. */
static void spark_line(const row *r, int room, char *out, size_t size) {
    static const char *const blocks[] = {"\u2581", "\u2582", "\u2583", "\u2584",
                                         "\u2585", "\u2586", "\u2587", "\u2588"};
    double max = 0;
    for (int i = 0; i < r->nspark; i++)
        if (r->spark[i] > max) max = r->spark[i];
    size_t len = 0;
    out[0] = '\0';
    int start = room < 0 ? r->nspark : room < r->nspark ? r->nspark - room : 0;
    for (int i = start; i < r->nspark && len + 4 < size; i++) {
        int level = max > 0 ? (int)(r->spark[i] / max * 7.0 + 0.5) : 0;
        len += (size_t)snprintf(out + len, size - len, "%s", blocks[level]);
    }
}

/* A mean in ms for a column: "-" when no job was seen. */
static void ms_cell(double ms, char *out, size_t size) {
    if (ms < 0) snprintf(out, size, "-");
    else if (ms < 10) snprintf(out, size, "%.2f", ms);
    else snprintf(out, size, "%.0f", ms);
}

/* A quantile's bucket bound: "<=5ms", "<=2.5s", ">900s", "-". */
static void bound_cell(double s, char *out, size_t size) {
    if (s < 0) snprintf(out, size, "-");
    else if (isinf(s)) snprintf(out, size, ">%gs", timing_bounds[TIMING_BUCKETS - 1]);
    else if (s < 1) snprintf(out, size, "<=%gms", s * 1000);
    else snprintf(out, size, "<=%gs", s);
}

/* A line at row y, cut at the terminal's width (a wrapped line would be
 * overwritten by the next). */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void put_line(int y, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (n >= (int)sizeof line) n = (int)sizeof line - 1;
    mvaddnstr(y, 0, line, n < COLS ? n : COLS);
}

static void draw(top *t) {
    erase();
    int h = LINES, w = COLS;
    attron(A_BOLD);
    put_line(0, "rjq top: %zu%s queue%s, refresh %ld ms   (up/down: pick, q: quit)", t->n,
             t->n == MAX_QUEUES ? " (the first)" : "", t->n == 1 ? "" : "s", t->interval_ms);
    put_line(2, "%-24s %9s %9s %9s %9s %9s %9s %8s %8s %8s %8s %8s  %s", "QUEUE", "READY",
             "DELAYED", "WAITING", "ACTIVE", "DEAD", "DONE", "IN/s", "DONE/s", "FAIL/s", "WAIT ms",
             "RUN ms", "DONE/s HISTORY");
    /* the totals: every queue's numbers that came, added up */
    rjq_stats sum;
    double in = 0, done = 0, fail = 0;
    size_t counted = 0;
    memset(&sum, 0, sizeof sum);
    for (size_t i = 0; i < t->n; i++) {
        const row *r = t->rows[i];
        if (!r->have) continue;
        counted++;
        sum.ready += r->s.ready;
        sum.delayed += r->s.delayed;
        sum.waiting += r->s.waiting;
        sum.active += r->s.active;
        sum.dead_depth += r->s.dead_depth;
        sum.completed += r->s.completed;
        in += r->in_rate;
        done += r->done_rate;
        fail += r->fail_rate;
    }
    if (counted > 0)
        put_line(3, "%-24s %9lld %9lld %9lld %9lld %9lld %9lld %8.1f %8.1f %8.1f", "(all queues)",
                 sum.ready, sum.delayed, sum.waiting, sum.active, sum.dead_depth, sum.completed, in,
                 done, fail);
    attroff(A_BOLD);
    int first = 4, room = h - first - 6;
    int top_row = t->sel >= room ? t->sel - room + 1 : 0;
    for (int i = 0; i < room && (size_t)(top_row + i) < t->n; i++) {
        const row *r = t->rows[top_row + i];
        char line[512], spark[SPARK * 4 + 1], wait[32], run[32];
        ms_cell(r->wait_ms, wait, sizeof wait);
        ms_cell(r->run_ms, run, sizeof run);
        int len = r->have ? snprintf(line, sizeof line,
                                     "%-24.24s %9lld %9lld %9lld %9lld %9lld %9lld %8.1f %8.1f %8.1f %8s %8s",
                                     r->name, r->s.ready, r->s.delayed, r->s.waiting, r->s.active,
                                     r->s.dead_depth, r->s.completed, r->in_rate, r->done_rate,
                                     r->fail_rate, wait, run)
                          : snprintf(line, sizeof line, "%-24.24s %9s", r->name, "...");
        if (len < 0 || len >= (int)sizeof line) len = (int)sizeof line - 1;
        /* what does not fit the terminal goes: the history first, then
         * the numbers on the right (a wrapped line would hide the next) */
        const char *paused = r->have && r->s.paused ? "  PAUSED" : "";
        int spark_room = w - len - 2 - (int)strlen(paused);
        spark_line(r, r->have ? spark_room : -1, spark, sizeof spark);
        if (top_row + i == t->sel) attron(A_REVERSE);
        mvaddnstr(first + i, 0, line, w > 0 ? (len < w ? len : w) : 0);
        if (len < w && r->have)
            printw("%s%s%s", spark[0] ? "  " : "", spark, len + (int)strlen(paused) < w ? paused : "");
        if (top_row + i == t->sel) attroff(A_REVERSE);
    }
    if (t->n == 0)
        put_line(first, "(no queue yet: queues appear once something enqueues to them or "
                           "a worker runs on them)");
    if (t->n > 0 && (size_t)t->sel < t->n && t->rows[t->sel]->have) {
        const row *r = t->rows[t->sel];
        const rjq_stats *s = &r->s;
        char w50[32], w99[32], r50[32], r99[32];
        bound_cell(timing_quantile(&r->times.wait, 0.5), w50, sizeof w50);
        bound_cell(timing_quantile(&r->times.wait, 0.99), w99, sizeof w99);
        bound_cell(timing_quantile(&r->times.run, 0.5), r50, sizeof r50);
        bound_cell(timing_quantile(&r->times.run, 0.99), r99, sizeof r99);
        if (t->hist_have && strcmp(t->hist_name, r->name) == 0) {
            const rjq_history_point *p = &t->hist;
            char hw50[32], hw99[32], hr50[32], hr99[32];
            double q[4] = {rjq_history_quantile(p->wait, 0.5), rjq_history_quantile(p->wait, 0.99),
                           rjq_history_quantile(p->run, 0.5), rjq_history_quantile(p->run, 0.99)};
            ms_cell(q[0] < 0 ? -1 : q[0] * 1000, hw50, sizeof hw50);
            ms_cell(q[1] < 0 ? -1 : q[1] * 1000, hw99, sizeof hw99);
            ms_cell(q[2] < 0 ? -1 : q[2] * 1000, hr50, sizeof hr50);
            ms_cell(q[3] < 0 ? -1 : q[3] * 1000, hr99, sizeof hr99);
            put_line(h - 5, "  last %d min (stored, every process): enqueued %lld, completed %lld, "
                               "failed %lld; wait p50 %s p99 %s ms, run p50 %s p99 %s ms",
                     HIST_MINUTES, p->enqueued, p->completed, p->failed, hw50, hw99, hr50, hr99);
        }
        if (t->grp_have && strcmp(t->grp_name, r->name) == 0 && t->grp_line[0])
            put_line(h - 6, "%s", t->grp_line);
        put_line(h - 4, "%s: enqueued %lld, completed %lld, failed %lld, retried %lld, "
                           "dead %lld, reclaimed %lld, replayed %lld, cancelled %lld",
                 r->name, s->enqueued, s->completed, s->failed, s->retried, s->dead,
                 s->reclaimed, s->replayed, s->cancelled);
        put_line(h - 3, "  since top started: wait p50 %s p99 %s (%llu jobs), run p50 %s p99 %s "
                           "(%llu runs)",
                 w50, w99, r->times.wait.count, r50, r99, r->times.run.count);
        char rt[64];
        put_line(h - 2, "  limits: concurrency %lld, rate %s; %s", s->limit_concurrency,
                 rate_limit_text(rt, sizeof rt, s->limit_rate, s->limit_rate_window_ms),
                 s->paused ? "paused" : "running");
    }
    if (t->status[0]) mvprintw(h - 1, 0, "%.*s", w - 1, t->status);
    refresh();
}

/* ---- refreshing ---------------------------------------------------------------- */

static void refresh_now(top *t);

static void refresh_soon(top *t) {
    if (!evtimer_pending(t->soon, NULL)) {
        struct timeval tv = {0, EVENT_DELAY_MS * 1000};
        evtimer_add(t->soon, &tv);
    }
}

static void on_event(rjq_client *c, const char *event, const char *id, void *data) {
    (void)c;
    row *r = data;
    timing_queue_event(&r->t->times, &r->times, event, id, r->m ? rjq_monitor_get_time(r->m) : 0);
    refresh_soon(r->t);
}

/* A shard's event: timed per shard (its own ids), observed in its
 * queue's row, so the row's wait and run times are the whole queue's. */
static void on_shard_event(rjq_client *c, const char *event, const char *id, void *data) {
    (void)c;
    shard_mon *sm = data;
    row *r = sm->r;
    timing_queue_event_of(&r->t->times, sm, &r->times, event, id,
                          sm->m ? rjq_monitor_get_time(sm->m) : 0);
    refresh_soon(r->t);
}

/* Rates since the last refresh; the latency columns keep the mean of the
 * jobs seen by the last refresh that saw any (an idle queue keeps its
 * last numbers rather than blinking). */
static void rates(top *t, row *r) {
    double wait, run;
    timing_queue_means(&r->times, &wait, &run);
    if (wait >= 0) r->wait_ms = wait;
    if (run >= 0) r->run_ms = run;
    if (!r->have_prev || t->dt <= 0) return;
    stats_rates sr = stats_rates_between(&r->prev, &r->s, t->dt); /* (a reset: no negative) */
    r->done_rate = sr.done;
    r->fail_rate = sr.fail;
    r->in_rate = sr.in;
    if (r->nspark == SPARK) memmove(r->spark, r->spark + 1, (SPARK - 1) * sizeof r->spark[0]);
    else r->nspark++;
    r->spark[r->nspark - 1] = r->done_rate < 0 ? 0 : r->done_rate;
}

typedef struct stats_req {
    top *t;
    size_t i;
} stats_req;

static void on_stats(rjq_client *c, int status, const rjq_stats *s, void *data) {
    (void)c;
    stats_req *req = data;
    top *t = req->t;
    if (status == RJQ_OK && req->i < t->n) {
        row *r = t->rows[req->i];
        r->prev = r->s;
        r->have_prev = r->have;
        r->s = *s;
        r->have = 1;
        rates(t, r);
    } else if (status != RJQ_OK && status != RJQ_ECANCELED) {
        snprintf(t->status, sizeof t->status, "stats: %s", rjq_strerror(status));
    }
    free(req);
    if (--t->pending == 0) {
        t->refreshing = 0;
        if (!t->quit) draw(t);
    }
}

static row *find_row(top *t, const char *name) {
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->rows[i]->name, name) == 0) return t->rows[i];
    return NULL;
}

/* Is name a shard of a sharded queue of the view? */
static int is_shard(const top *t, const char *name) {
    for (size_t i = 0; i < t->n; i++) {
        const row *r = t->rows[i];
        for (int k = 0; r->sharded && k < rjq_queue_count_shards(r->q); k++)
            if (strcmp(rjq_queue_get_name(rjq_queue_get_shard(r->q, k)), name) == 0) return 1;
    }
    return 0;
}

/* A row's queue, opened knowing its layout: a sharded queue's stats are
 * summed, and it gets a monitor per shard (its wait and run times are
 * every shard's jobs'); a plain queue one monitor. */
static void on_opened(rjq_client *c, int status, rjq_queue *q, void *data) {
    row *r = data;
    (void)c;
    if (status != RJQ_OK) return; /* (no numbers: the row shows "...") */
    r->q = q;
    r->sharded = rjq_queue_count_shards(q) > 1;
    /* (without a monitor: the interval only, and no timings) */
    for (int k = 0; r->sharded && k < rjq_queue_count_shards(q); k++) {
        r->sm[k].r = r;
        if (rjq_queue_monitor(rjq_queue_get_shard(q, k), on_shard_event, &r->sm[k], &r->sm[k].m) !=
            RJQ_OK)
            r->sm[k].m = NULL;
    }
    if (r->sharded || rjq_queue_monitor(r->q, on_event, r, &r->m) != RJQ_OK) r->m = NULL;
}

/* Take the rows of sharded queues' shards out of the view (no stats in
 * flight: between two refreshes). */
static void fold_shards(top *t) {
    size_t kept = 0;
    for (size_t i = 0; i < t->n; i++) {
        row *r = t->rows[i];
        if (!is_shard(t, r->name)) {
            t->rows[kept++] = r;
            continue;
        }
        if (r->m) rjq_monitor_stop(r->m);
        r->m = NULL;
        r->next_folded = t->folded;
        t->folded = r;
    }
    t->n = kept;
}

/* A registry page: new names get a row (and a monitor); then the stats. */
static void on_names(rjq_client *c, int status, const char *const *names, size_t n, void *data) {
    top *t = data;
    (void)c;
    t->listing = 0;
    if (status != RJQ_OK) {
        snprintf(t->status, sizeof t->status, "listing queues: %s (%s)", rjq_strerror(status),
                 rjq_client_get_errmsg(t->c));
        t->refreshing = 0;
        if (!t->quit) draw(t);
        return;
    }
    char picked[201];
    snprintf(picked, sizeof picked, "%s", (size_t)t->sel < t->n ? t->rows[t->sel]->name : "");
    fold_shards(t);
    for (size_t i = 0; i < n && t->n < MAX_QUEUES; i++) {
        /* (a name no queue can have: written there by someone else) */
        if (strlen(names[i]) >= sizeof t->rows[0]->name || find_row(t, names[i]) ||
            is_shard(t, names[i]))
            continue;
        row *r = calloc(1, sizeof *r);
        if (r == NULL) break;
        r->t = t;
        r->wait_ms = r->run_ms = -1;
        snprintf(r->name, sizeof r->name, "%s", names[i]);
        if (rjq_queue_open_async(t->c, r->name, NULL, on_opened, r) != RJQ_OK) {
            free(r);
            continue;
        }
        t->rows[t->n++] = r;
    }
    /* names come sorted from the registry; new ones at the end: sort all */
    for (size_t i = 1; i < t->n; i++)
        for (size_t j = i; j > 0 && strcmp(t->rows[j - 1]->name, t->rows[j]->name) > 0; j--) {
            row *tmp = t->rows[j];
            t->rows[j] = t->rows[j - 1];
            t->rows[j - 1] = tmp;
        }
    if ((size_t)t->sel >= t->n) t->sel = t->n > 0 ? (int)t->n - 1 : 0;
    for (size_t i = 0; i < t->n; i++) /* the pick stays on its queue */
        if (strcmp(t->rows[i]->name, picked) == 0) t->sel = (int)i;
    if (++t->refreshes % SWEEP_EVERY == 0) timing_sweep_now(&t->times);
    double now = now_s();
    t->dt = t->refreshed_at > 0 ? now - t->refreshed_at : 0;
    t->refreshed_at = now;
    t->pending = 1;
    for (size_t i = 0; i < t->n; i++) {
        if (t->rows[i]->q == NULL) continue; /* (being opened) */
        stats_req *req = malloc(sizeof *req);
        if (req == NULL) continue;
        req->t = t;
        req->i = i;
        t->pending++;
        if (rjq_queue_get_stats(t->rows[i]->q, on_stats, req) != RJQ_OK) {
            free(req);
            t->pending--;
        }
    }
    if (--t->pending == 0) {
        t->refreshing = 0;
        if (!t->quit) draw(t);
    }
}

static void on_history(rjq_client *c, int status, const rjq_history_point *list, size_t n,
                       void *data) {
    top *t = data;
    (void)c;
    t->hist_reading = 0;
    if (status != RJQ_OK) return;
    memset(&t->hist, 0, sizeof t->hist);
    for (size_t i = 0; i < n; i++) {
        const rjq_history_point *p = rjq_history_point_get(list, i);
        t->hist.enqueued += p->enqueued;
        t->hist.completed += p->completed;
        t->hist.failed += p->failed;
        for (int b = 0; b < RJQ_HISTORY_BUCKETS; b++) {
            t->hist.wait[b] += p->wait[b];
            t->hist.run[b] += p->run[b];
        }
    }
    t->hist_have = 1;
    if (!t->quit && !t->refreshing) draw(t);
}

static void on_groups(rjq_client *c, int status, long long total, const rjq_group_info *list,
                      size_t n, void *data) {
    top *t = data;
    (void)c;
    t->grp_reading = 0;
    if (status != RJQ_OK) { /* (a sharded queue's handle merges its shards' lists) */
        t->grp_line[0] = '\0';
        return;
    }
    size_t len = 0, size = sizeof t->grp_line;
    int k = 0;
    if (total > 0)
        k = snprintf(t->grp_line, size, "  busiest groups (%lld with jobs):", total);
    else
        t->grp_line[0] = '\0';
    /* a group listed last time too that started jobs since: its starts/s
     * (a started counter that went down was set back: counted from 0) */
    double at = now_s(), dt = at - t->grp_at;
    for (size_t i = 0; k >= 0 && (len += (size_t)k) < size && i < n; i++) {
        const rjq_group_info *g = rjq_group_info_get(list, i);
        char rate[48] = "";
        for (size_t j = 0; j < t->grp_nprev; j++)
            if (strcmp(t->grp_prev[j].name, g->name) == 0 && dt > 0) {
                double v = counter_rate(t->grp_prev[j].started, g->started, dt);
                if (v > 0) snprintf(rate, sizeof rate, " %.1f starts/s", v);
                break;
            }
        /* its limits, compactly: a bound on its ready jobs as "ready N/BOUND",
         * a concurrency as "active N/LIMIT", a rate limit as "rate 50/1s" */
        char bound[24] = "", conc[24] = "", rl[64] = "", rt[48];
        if (g->max_waiting > 0) snprintf(bound, sizeof bound, "/%ld", g->max_waiting);
        if (g->concurrency >= 0) snprintf(conc, sizeof conc, "/%d", g->concurrency);
        if (g->rate > 0)
            snprintf(rl, sizeof rl, " rate %s", rate_limit_text(rt, sizeof rt, g->rate, g->rate_window_ms));
        k = snprintf(t->grp_line + len, size - len, "%s %s ready %lld%s active %lld%s%s%s%s",
                     i ? "," : "", g->name, g->depth, bound, g->active, conc, rl, rate,
                     g->paused ? " PAUSED" : "");
    }
    t->grp_nprev = 0;
    for (size_t i = 0; i < n && i < TOP_GROUPS; i++) {
        const rjq_group_info *g = rjq_group_info_get(list, i);
        snprintf(t->grp_prev[i].name, sizeof t->grp_prev[i].name, "%s", g->name);
        t->grp_prev[i].started = g->started;
        t->grp_nprev++;
    }
    t->grp_at = at;
    t->grp_have = 1;
    /* (a listing reads a page of the depth index: every refresh) */
    t->grp_next = now_s();
    if (!t->quit && !t->refreshing) draw(t);
}

/* Read the picked queue's busiest groups (one read at a time). */
static void read_groups(top *t) {
    if (t->grp_reading || (size_t)t->sel >= t->n || t->rows[t->sel]->q == NULL) return;
    const row *r = t->rows[t->sel];
    if (strcmp(t->grp_name, r->name) != 0) {
        t->grp_have = 0;
        t->grp_next = 0;
        t->grp_nprev = 0; /* (another queue's groups: no rates from them) */
    }
    if (t->grp_have && now_s() < t->grp_next) return;
    snprintf(t->grp_name, sizeof t->grp_name, "%s", r->name);
    if (rjq_queue_list_groups(r->q, NULL, 0, TOP_GROUPS, on_groups, t) == RJQ_OK)
        t->grp_reading = 1;
}

/* Read the picked queue's last minutes (one read at a time). */
static void read_history(top *t) {
    if (t->hist_reading || (size_t)t->sel >= t->n || t->rows[t->sel]->q == NULL) return;
    const row *r = t->rows[t->sel];
    if (strcmp(t->hist_name, r->name) != 0) t->hist_have = 0;
    snprintf(t->hist_name, sizeof t->hist_name, "%s", r->name);
    if (rjq_queue_get_history(r->q, 60000, HIST_MINUTES, on_history, t) == RJQ_OK)
        t->hist_reading = 1;
}

static void refresh_now(top *t) {
    if (t->refreshing || t->quit) return;
    read_history(t);
    read_groups(t);
    t->refreshing = t->listing = 1;
    t->status[0] = '\0';
    if (rjq_client_list_queues(t->c, NULL, MAX_QUEUES, on_names, t) != RJQ_OK) t->refreshing = t->listing = 0;
}

static void on_tick(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    refresh_now(arg);
}

/* ---- keys ---------------------------------------------------------------------- */

static void on_keys(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    top *t = arg;
    int ch;
    while ((ch = getch()) != ERR) {
        if (ch == 'q' || ch == 'Q') {
            t->quit = 1;
            event_base_loopbreak(t->base);
            return;
        }
        if ((ch == KEY_DOWN || ch == 'j') && (size_t)t->sel + 1 < t->n) t->sel++;
        if ((ch == KEY_UP || ch == 'k') && t->sel > 0) t->sel--;
        draw(t); /* KEY_RESIZE too */
    }
}

int top_run(struct event_base *base, rjq_client *c, long interval_ms) {
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        fprintf(stderr, "rjq: top: needs a terminal (for numbers in a script: rjq stats, rjq "
                        "metrics, rjq queues)\n");
        rjq_client_free(c);
        return 2;
    }
    top t;
    memset(&t, 0, sizeof t);
    t.base = base;
    t.c = c;
    t.interval_ms = interval_ms;
    t.rows = calloc(MAX_QUEUES, sizeof *t.rows);
    int timing_ok = timing_map_init(&t.times, TIMING_JOBS) == 0;
    struct timeval tv = {interval_ms / 1000, (interval_ms % 1000) * 1000};
    t.tick = event_new(base, -1, EV_PERSIST, on_tick, &t);
    t.soon = evtimer_new(base, on_tick, &t);
    t.keys = event_new(base, STDIN_FILENO, EV_READ | EV_PERSIST, on_keys, &t);
    if (t.rows == NULL || !timing_ok || t.tick == NULL || t.soon == NULL || t.keys == NULL) {
        fprintf(stderr, "rjq: top: out of memory\n");
        rjq_client_free(c);
        timing_map_free(&t.times);
        if (t.tick) event_free(t.tick);
        if (t.soon) event_free(t.soon);
        if (t.keys) event_free(t.keys);
        free(t.rows);
        return 1;
    }
    setlocale(LC_ALL, "");
    initscr();
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    nodelay(stdscr, TRUE);
    curs_set(0);
    event_add(t.tick, &tv);
    event_add(t.keys, NULL);
    draw(&t);
    refresh_now(&t);
    event_base_dispatch(base);
    endwin();
    t.quit = 1;
    rjq_client_free(c); /* its callbacks (ECANCELED) still see t */
    event_free(t.tick);
    event_free(t.soon);
    event_free(t.keys);
    for (size_t i = 0; i < t.n; i++) free(t.rows[i]); /* their handles went with the client */
    while (t.folded) {
        row *r = t.folded;
        t.folded = r->next_folded;
        free(r);
    }
    free(t.rows);
    timing_map_free(&t.times);
    return 0;
}
