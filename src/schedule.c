/*
 * Schedules (set, remove, list): their spec as schedule.lua stores it, and
 * its reading back (schedule.h, for the scheduler).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cron.h"
#include "schedule.h"
#include "validate.h"

#define NAME_MAX_LEN (RJQ_JOB_ID_MAX - 21) /* room for "@<fire time ms>" */

int rjq__schedule_parse(const char *spec, rjq__spec *out) {
    char missed[8], opts[RJQ__OPTS_MAX + 1];
    int used = 0;
    memset(out, 0, sizeof *out);
    if (sscanf(spec, "%lld %d %lld %7s %128s %n", &out->every_ms, &out->offset_min,
               &out->catchup_ms, missed, opts, &used) != 5 ||
        used == 0 || out->every_ms < 0 || out->every_ms > RJQ_DELAY_MAX ||
        out->offset_min < -1440 || out->offset_min > 1440 || out->catchup_ms < 0 ||
        out->catchup_ms > RJQ_DELAY_MAX)
        return -1;
    out->once = strcmp(missed, "once") == 0;
    out->expr_at = (size_t)used;
    const char *expr = spec + used;
    if (out->every_ms > 0) return strcmp(expr, "-") == 0 ? 0 : -1;
    const char *why;
    if (rjq__cron_parse(expr, &out->cron, &why) != 0) return -1;
    out->is_cron = 1;
    return 0;
}

long long rjq__schedule_after(const rjq__spec *s, long long t) {
    if (t < -RJQ__TIME_MAX || t > RJQ__TIME_MAX) return -1; /* (no time a reply may give) */
    if (!s->is_cron) return (t / s->every_ms + 1) * s->every_ms;
    return rjq__cron_next(&s->cron, s->offset_min, t);
}

int rjq__schedule_job_options(const char *spec, rjq_job_options *o) {
    const rjq_job_options init = RJQ_JOB_OPTIONS_INIT;
    char tok[RJQ__OPTS_MAX + 1], again[RJQ__OPTS_MAX];
    *o = init;
    if (sscanf(spec, "%*s %*s %*s %*s %128s", tok) != 1) return -1;
    if (strcmp(tok, "-") == 0) return 0;
    /* "delay,priority,attempts[,e|f,base,cap][;timeout]" */
    long long d, p, a, b, cap;
    char kind;
    int used = 0, more = 0;
    if (sscanf(tok, "%lld,%lld,%lld%n", &d, &p, &a, &used) != 3 || used == 0) return -1;
    const char *rest = tok + used;
    if (*rest == ',') {
        if (sscanf(rest, ",%c,%lld,%lld%n", &kind, &b, &cap, &more) != 3 || more == 0 ||
            (kind != 'e' && kind != 'f'))
            return -1;
        o->backoff.type = kind == 'e' ? RJQ_BACKOFF_EXPONENTIAL : RJQ_BACKOFF_FIXED;
        o->backoff.base_ms = b;
        o->backoff.max_ms = kind == 'e' ? cap : 0;
        rest += more;
    }
    if (*rest == ';') {
        long long t;
        more = 0;
        if (sscanf(rest, ";%lld%n", &t, &more) != 1 || more == 0) return -1;
        o->timeout_ms = t;
        rest += more;
    }
    if (*rest != '\0' || d < 0 || p < RJQ_PRIORITY_MIN || p > RJQ_PRIORITY_MAX || a < 1 ||
        a > 1000000000LL)
        return -1;
    o->delay_ms = d;
    o->priority = (int)p;
    o->max_attempts = (int)a;
    /* exactly what rjq_schedule_set wrote: encoded again, the same bytes */
    if (rjq__encode_job_options(o, again) != RJQ_OK || strcmp(again, tok) != 0) return -1;
    return 0;
}

int rjq__schedule_valid_name(const char *name) {
    return name && strlen(name) <= NAME_MAX_LEN && rjq__valid_job_id(name);
}

/* ---- requests ------------------------------------------------------------------- */

typedef struct ctx {
    rjq_count_cb *count;
    rjq_schedules_cb *list;
    void *data;
} ctx;

static void on_count(rjq_client *c, int status, redisReply *r, void *priv) {
    ctx *x = priv;
    if (status == RJQ_OK && r->type != REDIS_REPLY_INTEGER) status = RJQ_EPROTO;
    if (x->count) x->count(c, status, status == RJQ_OK ? r->integer : 0, x->data);
    free(x);
}

/* Send schedule.lua with the given ARGV (after its KEYS); the call enters
 * the client (sending may flush enqueues, whose callbacks may free it). */
static int send(rjq_queue *q, rjq__reply_fn *fn, ctx *x, rjq__argv *a) {
    rjq_client *c = rjq_queue_get_client(q);
    int rc = RJQ_ENOMEM;
    rjq__enter(c);
    if (!a->oom) rc = rjq__script(c, RJQ__S_SCHEDULE, 0, fn, x, a->n, a->v, a->len);
    rjq__leave(c);
    rjq__argv_free(a);
    if (rc != RJQ_OK) free(x);
    return rc;
}

/* Begin a schedule.lua call of operation op: its context (with the
 * caller's callback, one of count and list) and its KEYS and op. */
static int start(rjq_queue *q, const char *op, rjq_count_cb *count, rjq_schedules_cb *list,
                 void *data, ctx **x, rjq__argv *a) {
    if (q == NULL) return RJQ_EINVAL;
    if (!rjq__accepting(rjq_queue_get_client(q))) return RJQ_ECLOSED;
    if ((*x = calloc(1, sizeof **x)) == NULL) return RJQ_ENOMEM;
    (*x)->count = count;
    (*x)->list = list;
    (*x)->data = data;
    rjq__argv_init(a);
    rjq__argv_script_keys(a, q, RJQ__S_SCHEDULE);
    rjq__argv_str(a, op);
    return RJQ_OK;
}

int rjq_schedule_set(rjq_queue *q, const char *name, const rjq_schedule *given, rjq_count_cb *cb,
                     void *data) {
    if (q == NULL || given == NULL) return RJQ_EINVAL;
    rjq_client *c = rjq_queue_get_client(q);
    rjq_schedule copy; /* as this library reads it (rjq.h "Extensible structs") */
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    if (rjq__sized_in(c, &copy, sizeof copy, given, "rjq_schedule") != RJQ_OK ||
        (copy.opts && rjq__sized_in(c, &o, sizeof o, copy.opts, "rjq_job_options") != RJQ_OK))
        return RJQ_EINVAL;
    const rjq_schedule *s = &copy;
    if (s->reserved != 0) { /* (a later field, unknown here) */
        rjq__errmsg(c, "rjq_schedule: reserved is set (keep it 0)");
        return RJQ_EINVAL;
    }
    if (!rjq__schedule_valid_name(name)) {
        rjq__errmsg(c, "schedule names are 1..%d bytes without spaces or control characters, "
                       "and not all digits", NAME_MAX_LEN);
        return RJQ_EJOBID;
    }
    if ((s->every_ms > 0) == (s->cron != NULL) || s->every_ms < 0 || s->every_ms > RJQ_DELAY_MAX ||
        s->utc_offset_min < -1440 || s->utc_offset_min > 1440 || s->catchup_ms < 0 ||
        s->catchup_ms > RJQ_DELAY_MAX || (s->missed != RJQ_MISSED_SKIP && s->missed != RJQ_MISSED_ONCE) ||
        (s->payload == NULL && s->len > 0)) {
        rjq__errmsg(c, "a schedule has either every_ms or cron, and numbers in range");
        return RJQ_EINVAL;
    }
    rjq__cron cron;
    const char *why;
    if (s->cron && (strchr(s->cron, '\n') || rjq__cron_parse(s->cron, &cron, &why) != 0)) {
        rjq__errmsg(c, "cron expression \"%.100s\": %s", s->cron, s->cron && strchr(s->cron, '\n') ? "one line" : why);
        return RJQ_EINVAL;
    }
    if (s->len > rjq__client_max_payload(c)) return RJQ_ETOOBIG;
    o.id = NULL;
    if (o.headers || o.nheaders) { /* (rjq_job_options.headers: schedules carry none) */
        rjq__errmsg(c, "a schedule's jobs carry no headers");
        return RJQ_EINVAL;
    }
    char opts[RJQ__OPTS_MAX];
    if (rjq__encode_job_options(&o, opts) != RJQ_OK) {
        rjq__errmsg(c, "invalid job options (delay, priority, attempts, backoff or timeout)");
        return RJQ_EINVAL;
    }
    size_t speclen = 100 + RJQ__OPTS_MAX + (s->cron ? strlen(s->cron) : 0);
    char *spec = malloc(speclen);
    if (spec == NULL) return RJQ_ENOMEM;
    snprintf(spec, speclen, "%lld %d %lld %s %s %s", s->every_ms, s->utc_offset_min,
             s->catchup_ms == 0 ? 60000 : s->catchup_ms, s->missed == RJQ_MISSED_ONCE ? "once" : "skip",
             opts[0] ? opts : "-", s->cron ? s->cron : "-");
    ctx *x;
    rjq__argv a;
    int rc = start(q, "set", cb, NULL, data, &x, &a);
    if (rc == RJQ_OK) {
        rjq__argv_str(&a, name);
        rjq__argv_str(&a, spec);
        rjq__argv_add(&a, s->payload ? s->payload : "", s->len);
        rc = send(q, on_count, x, &a);
    }
    free(spec);
    return rc;
}

int rjq_schedule_remove(rjq_queue *q, const char *name, rjq_count_cb *cb, void *data) {
    if (q == NULL) return RJQ_EINVAL;
    if (!rjq__schedule_valid_name(name)) return RJQ_EJOBID;
    ctx *x;
    rjq__argv a;
    int rc = start(q, "remove", cb, NULL, data, &x, &a);
    if (rc != RJQ_OK) return rc;
    rjq__argv_str(&a, name);
    return send(q, on_count, x, &a);
}

const rjq_schedule_info *rjq_schedule_info_get(const rjq_schedule_info *list, size_t i) {
    return list ? &list[i] : NULL;
}

/* "every <ms>" or "cron <expr> (UTC+<min>)" from a stored spec. */
static void describe(const char *spec, char *out, size_t len) {
    rjq__spec s;
    if (rjq__schedule_parse(spec, &s) != 0) snprintf(out, len, "? %s", spec);
    else if (!s.is_cron) snprintf(out, len, "every %lld", s.every_ms);
    else snprintf(out, len, "cron %s (UTC%+d)", spec + s.expr_at, s.offset_min);
}

static void on_list(rjq_client *c, int status, redisReply *r, void *priv) {
    ctx *x = priv;
    size_t n = 0;
    rjq_schedule_info *list = NULL;
    char (*specs)[512] = NULL;
    if (status == RJQ_OK && (r->type != REDIS_REPLY_ARRAY || r->elements % 3 != 0)) status = RJQ_EPROTO;
    for (size_t i = 0; status == RJQ_OK && i < r->elements; i += 3)
        if (r->element[i]->type != REDIS_REPLY_STRING || r->element[i + 1]->type != REDIS_REPLY_STRING ||
            r->element[i + 2]->type != REDIS_REPLY_INTEGER)
            status = RJQ_EPROTO;
    if (status == RJQ_OK && r->elements) {
        n = r->elements / 3;
        list = calloc(n, sizeof *list);
        specs = calloc(n, sizeof *specs);
        if (list == NULL || specs == NULL) status = RJQ_ENOMEM, n = 0;
    }
    for (size_t i = 0; status == RJQ_OK && i < n; i++) {
        list[i].name = r->element[3 * i]->str;
        describe(r->element[3 * i + 1]->str, specs[i], sizeof specs[i]);
        list[i].spec = specs[i];
        list[i].next_ms = r->element[3 * i + 2]->integer;
    }
    if (status == RJQ_EPROTO) rjq__errmsg(c, "schedules: unexpected reply");
    x->list(c, status, status == RJQ_OK ? list : NULL, status == RJQ_OK ? n : 0, x->data);
    free(list);
    free(specs);
    free(x);
}

int rjq_schedule_list(rjq_queue *q, rjq_schedules_cb *cb, void *data) {
    if (cb == NULL) return RJQ_EINVAL;
    ctx *x;
    rjq__argv a;
    int rc = start(q, "list", NULL, cb, data, &x, &a);
    return rc != RJQ_OK ? rc : send(q, on_list, x, &a);
}
