/* A queue's stats as text: see statsfmt.h. */
#include "statsfmt.h"

#include <string.h>

#include "utf8.h"

const stat_field stat_fields[] = {
    {"enqueued", offsetof(rjq_stats, enqueued), STAT_COUNTER, "enqueued"},
    {"completed", offsetof(rjq_stats, completed), STAT_COUNTER, "completed"},
    {"failed", offsetof(rjq_stats, failed), STAT_COUNTER, "failed"},
    {"retried", offsetof(rjq_stats, retried), STAT_COUNTER, "retried"},
    {"dead", offsetof(rjq_stats, dead), STAT_COUNTER, "dead"},
    {"reclaimed", offsetof(rjq_stats, reclaimed), STAT_COUNTER, "reclaimed"},
    {"replayed", offsetof(rjq_stats, replayed), STAT_COUNTER, "replayed"},
    {"ready", offsetof(rjq_stats, ready), STAT_DEPTH, "ready"},
    {"delayed", offsetof(rjq_stats, delayed), STAT_DEPTH, "delayed"},
    {"active", offsetof(rjq_stats, active), STAT_DEPTH, "active"},
    {"dead_depth", offsetof(rjq_stats, dead_depth), STAT_DEPTH, "dead"},
    {"cancelled", offsetof(rjq_stats, cancelled), STAT_COUNTER, "cancelled"},
    {"cancelled_depth", offsetof(rjq_stats, cancelled_depth), STAT_DEPTH, "cancelled"},
    {"limit_concurrency", offsetof(rjq_stats, limit_concurrency), STAT_OTHER, NULL},
    {"limit_rate", offsetof(rjq_stats, limit_rate), STAT_OTHER, NULL},
    {"limit_rate_window_ms", offsetof(rjq_stats, limit_rate_window_ms), STAT_OTHER, NULL},
    {"dedup_reserved", offsetof(rjq_stats, dedup_reserved), STAT_OTHER, NULL},
    {"dedup_next_release_ms", offsetof(rjq_stats, dedup_next_release_ms), STAT_OTHER, NULL},
    {"waiting", offsetof(rjq_stats, waiting), STAT_DEPTH, "waiting"},
};
const size_t stat_nfields = sizeof stat_fields / sizeof stat_fields[0];

static const struct {
    const char *name;
    rjq_job_state state;
} states[] = {{"ready", RJQ_STATE_READY},         {"delayed", RJQ_STATE_DELAYED},
              {"active", RJQ_STATE_ACTIVE},       {"dead", RJQ_STATE_DEAD},
              {"cancelled", RJQ_STATE_CANCELLED}, {"completed", RJQ_STATE_COMPLETED},
              {"waiting", RJQ_STATE_WAITING}};

const char *job_state_name(rjq_job_state st) {
    for (size_t i = 0; i < sizeof states / sizeof states[0]; i++)
        if (states[i].state == st) return states[i].name;
    return "?";
}

int job_state_parse(const char *name, rjq_job_state *out) {
    for (size_t i = 0; name && i < sizeof states / sizeof states[0]; i++)
        if (strcmp(name, states[i].name) == 0) {
            *out = states[i].state;
            return 0;
        }
    return -1;
}

long long stat_value(const rjq_stats *s, size_t k) {
    return *(const long long *)(const void *)((const char *)s + stat_fields[k].off);
}

void prom_label_value(FILE *out, const char *v) {
    const unsigned char *p = (const unsigned char *)v;
    size_t left = strlen(v);
    while (left) {
        size_t n = utf8_char_len(p, left);
        if (n == 0) { /* the format is UTF-8: other bytes as the text \xNN */
            fprintf(out, "\\\\x%02x", *p);
            n = 1;
        } else if (*p == '\\' || *p == '"')
            fprintf(out, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", out);
        else
            fwrite(p, 1, n, out);
        p += n;
        left -= n;
    }
}

void prom_family(FILE *out, const char *name, const char *type, const char *help) {
    fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One sample per queue of family `name`: the rjq_stats member at `off`
 * (a long long; int for paused), divided by `div`, with an extra label
 * (NULL: none). */
static void samples(FILE *out, const prom_queue *q, size_t n, const char *name, const char *label,
                    const char *value, size_t off, int is_int, long long div) {
    for (size_t i = 0; i < n; i++) {
        const char *p = (const char *)&q[i].s + off;
        long long v = is_int ? *(const int *)(const void *)p : *(const long long *)(const void *)p;
        fprintf(out, "%s{queue=\"", name);
        prom_label_value(out, q[i].name);
        if (label) fprintf(out, "\",%s=\"%s", label, value);
        if (div == 1) fprintf(out, "\"} %lld\n", v);
        else fprintf(out, "\"} %g\n", (double)v / (double)div);
    }
}

/* Every sample of the stat_fields of one kind, in their order. */
static void kind_samples(FILE *out, const prom_queue *q, size_t n, int kind, const char *name,
                         const char *label) {
    for (size_t k = 0; k < stat_nfields; k++)
        if (stat_fields[k].kind == kind)
            samples(out, q, n, name, label, stat_fields[k].label, stat_fields[k].off, 0, 1);
}

/* One counter family per transition (prometheus.io naming: a family whose
 * samples add up to something meaningful, so no family mixes enqueues with
 * outcomes, nor failed attempts with the retried ones among them). */
static const struct {
    const char *name;
    size_t off;
    const char *help;
} transitions[] = {
    {"rjq_jobs_enqueued_total", offsetof(rjq_stats, enqueued),
     "Jobs enqueued into the queue since it was created."},
    {"rjq_jobs_completed_total", offsetof(rjq_stats, completed),
     "Jobs of the queue that completed."},
    {"rjq_job_attempts_failed_total", offsetof(rjq_stats, failed),
     "Attempts of the queue's jobs that failed (timed out included)."},
    {"rjq_job_retries_total", offsetof(rjq_stats, retried),
     "Failed attempts that were retried (a subset of rjq_job_attempts_failed_total)."},
    {"rjq_jobs_dead_total", offsetof(rjq_stats, dead),
     "Jobs of the queue that went dead (attempts spent or failed for good)."},
    {"rjq_jobs_cancelled_total", offsetof(rjq_stats, cancelled), "Jobs of the queue cancelled."},
    {"rjq_jobs_reclaimed_total", offsetof(rjq_stats, reclaimed),
     "Jobs taken back from a worker whose lease expired."},
    {"rjq_jobs_replayed_total", offsetof(rjq_stats, replayed),
     "Dead jobs moved back to ready by a replay."},
};

void prom_write_stats(FILE *out, const prom_queue *q, size_t n) {
    for (size_t k = 0; k < sizeof transitions / sizeof transitions[0]; k++) {
        prom_family(out, transitions[k].name, "counter", transitions[k].help);
        samples(out, q, n, transitions[k].name, NULL, NULL, transitions[k].off, 0, 1);
    }
    prom_family(out, "rjq_jobs_total", "counter",
                "Deprecated, removed in the next release: the rjq_jobs_*_total and "
                "rjq_job_*_total families by transition instead (its outcomes overlap).");
    kind_samples(out, q, n, STAT_COUNTER, "rjq_jobs_total", "outcome");
    prom_family(out, "rjq_jobs", "gauge",
                "Jobs of the queue by state now (ready includes prioritised jobs; dead and "
                "cancelled: those kept, see dead_max).");
    kind_samples(out, q, n, STAT_DEPTH, "rjq_jobs", "state");
    prom_family(out, "rjq_queue_paused", "gauge", "1 while the queue is paused.");
    samples(out, q, n, "rjq_queue_paused", NULL, NULL, offsetof(rjq_stats, paused), 1, 1);
    prom_family(out, "rjq_queue_limit_concurrency", "gauge",
                "Most jobs of the queue active at once (0: no limit).");
    samples(out, q, n, "rjq_queue_limit_concurrency", NULL, NULL,
            offsetof(rjq_stats, limit_concurrency), 0, 1);
    prom_family(out, "rjq_queue_limit_rate", "gauge",
                "Most job starts of the queue per rate window (0: no limit).");
    samples(out, q, n, "rjq_queue_limit_rate", NULL, NULL, offsetof(rjq_stats, limit_rate), 0, 1);
    prom_family(out, "rjq_queue_limit_rate_window_seconds", "gauge",
                "The rate limit's window (0: no limit).");
    samples(out, q, n, "rjq_queue_limit_rate_window_seconds", NULL, NULL,
            offsetof(rjq_stats, limit_rate_window_ms), 0, 1000);
}
