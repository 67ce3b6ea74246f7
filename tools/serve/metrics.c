/*
 * rjq serve: GET /metrics, the Prometheus text exposition format (0.0.4).
 *
 * The queues' families are rjq metrics' (statsfmt.c), from the stats the
 * server refreshes every second; then the timings stored in the queues'
 * history (README "History"):
 *   rjq_job_wait_seconds   histogram: enqueue to first start (delays included)
 *   rjq_job_run_seconds    histogram: start to completion or failure, per run
 * the age of each queue's next ready job (rjq_queue_latency_seconds, as
 * asynq's queue latency), rjq_build_info, and the server's own numbers
 * (rjq_serve_*; rjq_serve_requests_total by code and method from access.c).
 * The histograms are the queues' stored history totals (rjq_queue_get_history
 * with step 0, read with each stats refresh): every instance reports the
 * same figures, counted by the processes that ran the jobs.
 *
 * A sharded queue (README "Sharded queues") is one queue here: label
 * queue="Q", its stats summed over its shards, whose own names are left
 * out (rjq_queue_shards gives its count). Its shards' series are written
 * only with --metrics-shards: rjq_shard_jobs{queue,shard,state} and
 * rjq_shard_jobs_total{queue,shard,transition}, shard the index 0..N-1
 * (at most RJQ_SHARDS_MAX per queue: the label sets stay bounded).
 *
 * Job groups (README "Groups"; groups.c): rjq_queue_groups{queue}, the
 * groups with jobs, and for the --metrics-groups K (default 10) groups of
 * each queue with the most ready jobs rjq_group_jobs{queue,group,state}
 * (state ready or active) and rjq_group_paused{queue,group}; the other
 * groups have no series of their own (their jobs are in rjq_jobs): at most
 * K group labels per queue. They are read while scrapes come (groups.c).
 */
#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "statsfmt.h"

/* A queue of its own in /metrics: not a shard of a served sharded queue. */
static int listed(const server *s, const squeue *q) {
    return queues_shard_of(s, q->name, NULL) == NULL;
}

/* --metrics-shards: one family of each shard's numbers of one kind
 * (STAT_DEPTH: labelled by state; STAT_COUNTER: by the counter's name). */
static void shard_family(FILE *out, server *s, const char *family, const char *type,
                         const char *help, int kind, const char *label) {
    prom_family(out, family, type, help);
    for (squeue *q = s->queues; q; q = q->next)
        for (int i = 0; q->shard_have == 1 && listed(s, q) && i < q->nshards; i++)
            for (size_t k = 0; k < stat_nfields; k++) {
                if (stat_fields[k].kind != kind) continue;
                fprintf(out, "%s{queue=\"", family);
                prom_label_value(out, q->name);
                fprintf(out, "\",shard=\"%d\",%s=\"%s\"} %lld\n", i, label,
                        kind == STAT_DEPTH ? stat_fields[k].label : stat_fields[k].name,
                        stat_value(&q->shard_s[i], k));
            }
}

/* --metrics-shards: each shard's depths and counters. */
static void shard_series(FILE *out, server *s) {
    shard_family(out, s, "rjq_shard_jobs", "gauge",
                 "Jobs of one shard of a sharded queue by state now (--metrics-shards; "
                 "rjq_jobs has the queue's sum).",
                 STAT_DEPTH, "state");
    shard_family(out, s, "rjq_shard_jobs_total", "counter",
                 "Job transitions of one shard of a sharded queue (--metrics-shards), by the "
                 "name of the stats' counter: enqueued, completed, failed...",
                 STAT_COUNTER, "transition");
}

/* A histogram of the queues' stored history totals (rjq.h "History"):
 * wait (1) or run (0) times. Every serve instance reports the same. */
static void histogram(FILE *out, server *s, const char *name, const char *help, int wait) {
    prom_family(out, name, "histogram", help);
    for (squeue *q = s->queues; q; q = q->next) {
        if (!listed(s, q) || !q->htotal_have) continue;
        const long long *b = wait ? q->htotal.wait : q->htotal.run;
        long long cum = 0;
        for (int i = 0; i < RJQ_HISTORY_BUCKETS; i++) {
            cum += b[i];
            fprintf(out, "%s_bucket{queue=\"", name);
            prom_label_value(out, q->name);
            if (i < RJQ_HISTORY_BUCKETS - 1)
                fprintf(out, "\",le=\"%g\"} %lld\n", rjq_history_bound(i), cum);
            else fprintf(out, "\",le=\"+Inf\"} %lld\n", cum);
        }
        fprintf(out, "%s_sum{queue=\"", name);
        prom_label_value(out, q->name);
        fprintf(out, "\"} %.3f\n%s_count{queue=\"", (double)(wait ? q->htotal.wait_sum_ms
                                                              : q->htotal.run_sum_ms) / 1000.0,
                name);
        prom_label_value(out, q->name);
        fprintf(out, "\"} %lld\n", cum);
    }
}

static void gauge(FILE *out, const char *name, const char *type, const char *help, double v) {
    prom_family(out, name, type, help);
    fprintf(out, "%s %.17g\n", name, v);
}

void metrics_handle(server *s, struct evhttp_request *req) {
    queues_watch_all(s); /* (a scrape every --queue-idle keeps every queue watched) */
    s->metrics_at = serve_now_s(); /* (the groups are read while scrapes come: groups.c) */
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    prom_queue *pq = s->nqueues ? calloc(s->nqueues, sizeof *pq) : NULL;
    if (out == NULL || (s->nqueues && pq == NULL)) {
        if (out) fclose(out);
        free(text);
        free(pq);
        reply_error(req, 503, "out of memory");
        return;
    }
    size_t n = 0;
    for (squeue *q = s->queues; q; q = q->next)
        if (q->have && listed(s, q)) pq[n++] = (prom_queue){.name = q->name, .s = q->s};
    prom_write_stats(out, pq, n);
    free(pq);
    prom_family(out, "rjq_queue_shards", "gauge",
                "Shards of the queue (README \"Sharded queues\"; 1: not sharded).");
    for (squeue *q = s->queues; q; q = q->next) {
        if (!q->have || !listed(s, q)) continue;
        fprintf(out, "rjq_queue_shards{queue=\"");
        prom_label_value(out, q->name);
        fprintf(out, "\"} %d\n", q->known ? q->nshards : 1);
    }
    if (s->o.metrics_shards) shard_series(out, s);
    groups_metrics(out, s, listed);
    prom_family(out, "rjq_queue_latency_seconds", "gauge",
                "Age of the job next in claim order (the oldest ready job of the highest "
                "priority waiting): now, by this server's clock, minus its enqueue time "
                "(Redis' clock); 0 when none is ready. Read at each refresh (1 s).");
    struct timeval now;
    gettimeofday(&now, NULL);
    long long now_ms = (long long)now.tv_sec * 1000 + now.tv_usec / 1000;
    for (squeue *q = s->queues; q; q = q->next) {
        if (!q->have || !listed(s, q)) continue;
        long long age = q->head_enqueued_ms > 0 ? now_ms - q->head_enqueued_ms : 0;
        fprintf(out, "rjq_queue_latency_seconds{queue=\"");
        prom_label_value(out, q->name);
        fprintf(out, "\"} %.3f\n", age > 0 ? (double)age / 1000.0 : 0.0);
    }
    histogram(out, s, "rjq_job_wait_seconds",
              "Time from a job's enqueue to its first start (delays included), from the "
              "queue's stored history (every process that ran its jobs; README \"History\").",
              1);
    histogram(out, s, "rjq_job_run_seconds",
              "Time from a job's start to its worker's complete or fail call, per run, from "
              "the queue's stored history (README \"History\").",
              0);
    if (s->memory_known) {
        gauge(out, "rjq_redis_memory_used_bytes", "gauge", "Redis' used_memory (INFO memory).",
              (double)s->memory.used_memory);
        gauge(out, "rjq_redis_memory_max_bytes", "gauge", "Redis' maxmemory (0: no limit).",
              (double)s->memory.maxmemory);
        gauge(out, "rjq_redis_can_evict_jobs", "gauge",
              "1 when Redis' maxmemory-policy may evict jobs (allkeys-* under a maxmemory).",
              s->memory.can_evict_jobs);
    }
    prom_family(out, "rjq_build_info", "gauge",
                "Always 1: the version of the rjq library this server runs, as a label.");
    int v = rjq_version();
    fprintf(out, "rjq_build_info{version=\"%d.%d.%d\"} 1\n", v / 10000, v / 100 % 100,
            v % 100);
    gauge(out, "rjq_serve_queues", "gauge", "Queues this server serves.", (double)s->nqueues);
    gauge(out, "rjq_serve_waiting_requests", "gauge",
          "Enqueue requests waiting for their reply or their job's outcome.",
          (double)s->nwaiters);
    gauge(out, "rjq_serve_event_streams", "gauge", "Open /v1/events streams.", (double)s->nsse);
    gauge(out, "rjq_serve_redis_up", "gauge", "1 while the Redis command connection is up.",
          s->redis_up);
    prom_family(out, "rjq_serve_requests_total", "counter",
                "HTTP requests answered, by status code and method (counted once the "
                "answer is written; this scrape's own is not in it yet).");
    for (size_t i = 0; i < s->nanswered; i++)
        fprintf(out, "rjq_serve_requests_total{code=\"%d\",method=\"%s\"} %lld\n",
                s->answered[i].code, s->answered[i].method, s->answered[i].n);
    gauge(out, "rjq_serve_request_timeouts_total", "counter",
          "Requests answered 408: not whole within --request-timeout.",
          (double)deadline_timed_out(s));
    gauge(out, "rjq_serve_untimed_jobs_total", "counter",
          "Jobs not timed because the table of jobs in flight was full.",
          (double)s->times.dropped);
    if (fclose(out) != 0 || text == NULL) {
        free(text);
        reply_error(req, 503, "out of memory");
        return;
    }
    struct evbuffer *b = evbuffer_new();
    if (b) evbuffer_add(b, text, len);
    free(text);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "text/plain; version=0.0.4; charset=utf-8");
    evhttp_send_reply(req, b ? 200 : 503, NULL, b);
    if (b) evbuffer_free(b);
}
