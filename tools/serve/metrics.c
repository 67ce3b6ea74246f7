/*
 * rjq serve: GET /metrics, the Prometheus text exposition format (0.0.4).
 *
 * The queues' families are rjq metrics' (statsfmt.c), from the stats the
 * server refreshes every second; then the timings of the jobs seen since
 * the server started (tools/timing.c):
 *   rjq_job_wait_seconds   histogram: enqueue to first start (delays included)
 *   rjq_job_run_seconds    histogram: start to completion or failure, per run
 * and the server's own numbers (rjq_serve_*).
 */
#include "server.h"

#include <stdio.h>
#include <stdlib.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "statsfmt.h"

static void histogram(FILE *out, server *s, const char *name, const char *help, size_t off) {
    prom_family(out, name, "histogram", help);
    for (squeue *q = s->queues; q; q = q->next) {
        const timing_hist *h = (const timing_hist *)(const void *)((const char *)q + off);
        unsigned long long cum = 0;
        for (int i = 0; i <= TIMING_BUCKETS; i++) {
            cum += h->le[i];
            fprintf(out, "%s_bucket{queue=\"", name);
            prom_label_value(out, q->name);
            if (i < TIMING_BUCKETS) fprintf(out, "\",le=\"%g\"} %llu\n", timing_bounds[i], cum);
            else fprintf(out, "\",le=\"+Inf\"} %llu\n", cum);
        }
        fprintf(out, "%s_sum{queue=\"", name);
        prom_label_value(out, q->name);
        fprintf(out, "\"} %.6f\n%s_count{queue=\"", h->sum, name);
        prom_label_value(out, q->name);
        fprintf(out, "\"} %llu\n", h->count);
    }
}

static void gauge(FILE *out, const char *name, const char *type, const char *help, double v) {
    prom_family(out, name, type, help);
    fprintf(out, "%s %.17g\n", name, v);
}

void metrics_handle(server *s, struct evhttp_request *req) {
    queues_watch_all(s); /* (a scrape every --queue-idle keeps every queue watched) */
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
        if (q->have) pq[n++] = (prom_queue){.name = q->name, .s = q->s};
    prom_write_stats(out, pq, n);
    free(pq);
    histogram(out, s, "rjq_job_wait_seconds",
              "Time from a job's enqueue to its first start (delays included), of the jobs "
              "whose both events this server saw.",
              offsetof(squeue, t.wait));
    histogram(out, s, "rjq_job_run_seconds",
              "Time from a job's start to its completion or failure, per run, of the runs "
              "this server saw.",
              offsetof(squeue, t.run));
    if (s->memory_known) {
        gauge(out, "rjq_redis_memory_used_bytes", "gauge", "Redis' used_memory (INFO memory).",
              (double)s->memory.used_memory);
        gauge(out, "rjq_redis_memory_max_bytes", "gauge", "Redis' maxmemory (0: no limit).",
              (double)s->memory.maxmemory);
        gauge(out, "rjq_redis_can_evict_jobs", "gauge",
              "1 when Redis' maxmemory-policy may evict jobs (allkeys-* under a maxmemory).",
              s->memory.can_evict_jobs);
    }
    gauge(out, "rjq_serve_queues", "gauge", "Queues this server serves.", (double)s->nqueues);
    gauge(out, "rjq_serve_waiting_requests", "gauge",
          "Enqueue requests waiting for their reply or their job's outcome.",
          (double)s->nwaiters);
    gauge(out, "rjq_serve_event_streams", "gauge", "Open /v1/events streams.", (double)s->nsse);
    gauge(out, "rjq_serve_redis_up", "gauge", "1 while the Redis command connection is up.",
          s->redis_up);
    gauge(out, "rjq_serve_requests_total", "counter", "HTTP requests received.",
          (double)s->requests);
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
