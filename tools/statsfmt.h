/*
 * A queue's stats as text, shared by the tools: the names of rjq_stats'
 * numbers (rjq stats, the JSON of rjq metrics --json and of rjq serve) and
 * the Prometheus text exposition format (rjq metrics, rjq serve's
 * /metrics).
 */
#ifndef RJQ_TOOLS_STATSFMT_H
#define RJQ_TOOLS_STATSFMT_H

#include <stddef.h>
#include <stdio.h>

#include "rjq.h"

/* The long long members of rjq_stats: their names, and in Prometheus the
 * label value of a counter of rjq_jobs_total (STAT_COUNTER, label outcome)
 * or a gauge of rjq_jobs (STAT_DEPTH, label state). */
enum { STAT_OTHER, STAT_COUNTER, STAT_DEPTH };
typedef struct stat_field {
    const char *name;
    size_t off;
    int kind;
    const char *label;
} stat_field;

extern const stat_field stat_fields[];
extern const size_t stat_nfields;

/* The value of stat_fields[k] in s. */
long long stat_value(const rjq_stats *s, size_t k);

/* The job states' names as rjq_queue_list_jobs() takes them ("ready", ...):
 * the name of a state, and the state of a name (-1: none). */
const char *job_state_name(rjq_job_state st);
int job_state_parse(const char *name, rjq_job_state *out);

/* One queue's stats for the Prometheus writer. */
typedef struct prom_queue {
    const char *name;
    rjq_stats s;
} prom_queue;

/* "# HELP" and "# TYPE" lines of a family. */
void prom_family(FILE *out, const char *name, const char *type, const char *help);

/* A label value with backslash, double quote and newline escaped. */
void prom_label_value(FILE *out, const char *v);

/* Every family of the stats (a counter per transition: rjq_jobs_enqueued_total
 * ...; the deprecated rjq_jobs_total, rjq_jobs, rjq_queue_paused, the
 * limits), each once with its samples for the n queues. */
void prom_write_stats(FILE *out, const prom_queue *q, size_t n);

#endif
