/*
 * Schedules (schedule.c), as the scheduler (scheduler.c) reads them: the
 * stored spec "<every ms> <utc offset min> <catchup ms> <skip|once>
 * <job options or -> <cron expression or ->" (see src/lua/schedule.lua)
 * and the fire times it gives.
 */
#ifndef RJQ_SCHEDULE_H
#define RJQ_SCHEDULE_H

#include "cron.h"
#include "queue.h"

typedef struct rjq__spec {
    long long every_ms;       /* > 0: every this many ms; else cron */
    int offset_min;
    long long catchup_ms;
    int once;                 /* missed fire times: run once (else skip) */
    int is_cron;
    rjq__cron cron;
    size_t expr_at;           /* where the cron expression starts in the spec */
} rjq__spec;

/* Read a stored spec; 0, or -1 when it is not one (its numbers out of the
 * ranges rjq_schedule_set accepts included). */
int rjq__schedule_parse(const char *spec, rjq__spec *out);
/* Its first fire time after t (ms); -1: none (a cron date that never
 * comes, or t beyond +-RJQ__TIME_MAX). */
long long rjq__schedule_after(const rjq__spec *s, long long t);

/* Is name one rjq_schedule_set accepts (1..RJQ_JOB_ID_MAX - 21 bytes, a
 * valid job id: room for its jobs' ids "<name>@<fire time ms>")? A name
 * read back from Redis is checked again before its jobs' ids are made. */
int rjq__schedule_valid_name(const char *name);

/* The job options a stored spec gives its jobs (as rjq_schedule_set
 * encoded them: no id, so no dedup or debounce): 0 with *o set (defaults
 * for "-"), or -1 when they are not options this library wrote. */
int rjq__schedule_job_options(const char *spec, rjq_job_options *o);

#endif
