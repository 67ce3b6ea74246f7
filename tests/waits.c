#include "waits.h"

#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "server.h"

void on_stats_wait(rjq_client *c, int status, const rjq_stats *s, void *data) {
    (void)c;
    stats_wait *w = data;
    w->done++;
    w->status = status;
    if (s) w->s = *s;
}

stats_wait stats_of(struct event_base *base, rjq_queue *q) {
    stats_wait w;
    memset(&w, 0, sizeof w);
    ASSERT_OK(rjq_queue_get_stats(q, on_stats_wait, &w));
    ASSERT(loop_until(base, &w.done, 10000));
    ASSERT_EQ(1, w.done);
    return w;
}

rjq_stats get_stats(struct event_base *base, rjq_queue *q) {
    stats_wait w = stats_of(base, q);
    ASSERT_OK(w.status);
    return w.s;
}

void on_enqueue_wait(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    enqueue_wait *w = data;
    (void)c;
    w->done++;
    w->status = status;
    w->n = n;
    w->existed = n ? jobs[0].existed : 0;
    w->replaced = n ? jobs[0].replaced : 0;
    if (n) snprintf(w->id, sizeof w->id, "%s", jobs[0].id);
}

enqueue_wait enqueue_job(struct event_base *base, rjq_queue *q, const char *payload,
                         const rjq_job_options *o) {
    enqueue_wait w;
    memset(&w, 0, sizeof w);
    ASSERT_OK(rjq_enqueue(q, payload, strlen(payload), o, on_enqueue_wait, &w));
    ASSERT(loop_until(base, &w.done, 10000));
    ASSERT_EQ(1, w.done);
    return w;
}

enqueue_wait enqueue_x(struct event_base *base, rjq_queue *q, const char *id, long long delay,
                       int priority) {
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = id;
    o.delay_ms = delay;
    o.priority = priority;
    return enqueue_job(base, q, "x", &o);
}

void enqueue_x_ok(struct event_base *base, rjq_queue *q, const char *id, long long delay,
                  int priority) {
    ASSERT_OK(enqueue_x(base, q, id, delay, priority).status);
}

static void on_info(rjq_client *c, int status, const rjq_job_info *info, void *data) {
    (void)c;
    info_wait *w = data;
    w->done++;
    w->status = status;
    if (info == NULL) return;
    snprintf(w->state, sizeof w->state, "%s", info->state);
    w->has_error = info->error != NULL;
    snprintf(w->error, sizeof w->error, "%s", info->error ? info->error : "");
    w->attempts = info->attempts;
    w->max_attempts = info->max_attempts;
    w->payload_len = info->payload_len;
    snprintf(w->payload, sizeof w->payload, "%.*s", (int)info->payload_len,
             (const char *)info->payload);
    w->has_result = info->result != NULL;
    snprintf(w->token, sizeof w->token, "%s", info->token ? info->token : "");
    w->enqueued_ms = info->enqueued_ms;
    w->started_ms = info->started_ms;
    w->ended_ms = info->ended_ms;
    w->result_len = info->result_len;
    if (info->result)
        snprintf(w->result, sizeof w->result, "%.*s", (int)info->result_len,
                 (const char *)info->result);
}

info_wait get_info(struct event_base *base, rjq_queue *q, const char *id) {
    info_wait w;
    memset(&w, 0, sizeof w);
    ASSERT_OK(rjq_queue_get_job(q, id, on_info, &w));
    ASSERT(loop_until(base, &w.done, 10000));
    ASSERT_EQ(1, w.done);
    return w;
}

int shard_holding(struct event_base *base, rjq_queue *q, const char *id) {
    int found = -1;
    for (int i = 0; i < rjq_queue_count_shards(q); i++) {
        info_wait w = get_info(base, rjq_queue_get_shard(q, i), id);
        if (w.status == RJQ_OK) {
            ASSERT_EQ(-1, found); /* in one shard only */
            found = i;
        } else {
            ASSERT_EQ(RJQ_ENOTFOUND, w.status);
        }
    }
    return found;
}

void on_count(rjq_client *c, int status, long long n, void *data) {
    (void)c;
    count_wait *w = data;
    w->done++;
    w->status = status;
    w->n = n;
}

void on_groups(rjq_client *c, int status, long long total, const rjq_group_info *l, size_t n,
               void *data) {
    (void)c;
    groups_wait *g = data;
    g->done++;
    g->status = status;
    g->total = total;
    g->n = n;
    for (size_t i = 0; i < n && i < GROUPS_WAIT_MAX; i++) {
        const rjq_group_info *e = rjq_group_info_get(l, i);
        snprintf(g->name[i], sizeof g->name[i], "%s", e->name);
        g->depth[i] = e->depth;
        g->active[i] = e->active;
        g->paused[i] = e->paused;
        g->concurrency[i] = e->concurrency;
        g->rate[i] = e->rate;
        g->window[i] = e->rate_window_ms;
        g->bound[i] = e->max_waiting;
        g->started[i] = e->started;
    }
}

void on_open_wait(rjq_client *c, int status, rjq_queue *q, void *data) {
    open_wait *w = data;
    (void)c;
    w->done++;
    w->status = status;
    w->q = q;
}

rjq_queue *open_learnt(struct event_base *base, rjq_client *c, const char *name) {
    open_wait w = {0};
    ASSERT_OK(rjq_queue_open_async(c, name, NULL, on_open_wait, &w));
    ASSERT(loop_until(base, &w.done, 20000));
    ASSERT_EQ(1, w.done);
    ASSERT_OK(w.status);
    ASSERT(w.q != NULL);
    return w.q;
}

int declare_shards(struct event_base *base, rjq_queue *q, int n) {
    count_wait w = {0};
    ASSERT_OK(rjq_queue_shard(q, n, on_count, &w));
    ASSERT(loop_until(base, &w.done, 20000));
    ASSERT_EQ(1, w.done);
    if (w.status == RJQ_OK) ASSERT_EQ(n, w.n);
    return w.status;
}

void on_done_ok(rjq_client *c, int status, void *data) {
    (void)c;
    ASSERT_OK(status);
    if (data) (*(long *)data)++;
}

void on_stop_wait(rjq_worker *w, int status, void *data) {
    stop_wait *s = data;
    (void)w;
    s->done++;
    s->status = status;
}

void never_runs(rjq_job *job, void *data) {
    (void)job, (void)data;
    FAIL_AT(__FILE__, __LINE__, "a job ran");
}

void on_schedules_wait(rjq_client *c, int status, const rjq_schedule_info *l, size_t n, void *data) {
    schedules_wait *w = data;
    (void)c;
    w->done++;
    w->status = status;
    w->n = n;
    for (size_t i = 0; i < n && i < 8; i++) {
        snprintf(w->names[i], sizeof w->names[i], "%s", rjq_schedule_info_get(l, i)->name);
        snprintf(w->specs[i], sizeof w->specs[i], "%s", rjq_schedule_info_get(l, i)->spec);
        w->next[i] = rjq_schedule_info_get(l, i)->next_ms;
    }
}

void join_ids(char *out, size_t cap, const char *const *ids, size_t n) {
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        size_t used = strlen(out);
        snprintf(out + used, cap - used, "%s%s", i ? "," : "", ids[i]);
    }
}

void on_names_wait(rjq_client *c, int status, const char *const *ids, size_t n, void *data) {
    names_wait *p = data;
    (void)c;
    p->done++;
    p->status = status;
    join_ids(p->ids, sizeof p->ids, ids, n);
}

const char *list_ids(struct event_base *base, rjq_queue *q, rjq_job_state state, long offset,
                     long limit) {
    static names_wait p;
    memset(&p, 0, sizeof p);
    ASSERT_OK(rjq_queue_list_jobs(q, state, offset, limit, on_names_wait, &p));
    ASSERT(loop_until(base, &p.done, 10000));
    ASSERT_EQ(1, p.done);
    ASSERT_OK(p.status);
    return p.ids;
}

schedules_wait schedules_of(struct event_base *base, rjq_queue *q) {
    schedules_wait w;
    memset(&w, 0, sizeof w);
    ASSERT_OK(rjq_schedule_list(q, on_schedules_wait, &w));
    ASSERT(loop_until(base, &w.done, 10000));
    ASSERT_OK(w.status);
    return w;
}

void hold_last_handler(rjq_job *job, void *data) {
    last_held *h = data;
    h->job = job;
    h->started++;
}

void on_deps_lines(rjq_client *c, int status, const rjq_dep_outcome *deps, size_t n, void *data) {
    (void)c;
    deps_lines *rd = data;
    rd->status = status;
    rd->n = n;
    for (size_t i = 0; status == RJQ_OK && i < n && i < 8; i++) {
        const rjq_dep_outcome *o = rjq_dep_outcome_get(deps, i);
        snprintf(rd->line[i], sizeof rd->line[i], "%s:%s %s %s", o->queue, o->id, o->state,
                 o->counted);
    }
    rd->ran++;
}

deps_lines dependencies_of(struct event_base *base, rjq_queue *q, const char *id) {
    deps_lines rd;
    memset(&rd, 0, sizeof rd);
    ASSERT_OK(rjq_queue_get_dependencies(q, id, on_deps_lines, &rd));
    ASSERT(loop_until_count(base, &rd.ran, 1, 10000));
    return rd;
}

void on_dents_list(rjq_client *c, int status, const rjq_dep *list, size_t n, void *data) {
    (void)c;
    dents_list *rd = data;
    rd->status = status;
    rd->n = n;
    rd->list[0] = '\0';
    for (size_t i = 0; status == RJQ_OK && i < n; i++) {
        size_t at = strlen(rd->list);
        snprintf(rd->list + at, sizeof rd->list - at, "%s%s %s", i ? "," : "",
                 rjq_dep_get(list, i)->queue, rjq_dep_get(list, i)->id);
    }
    rd->ran++;
}

dents_list dependents_of(struct event_base *base, rjq_queue *q, const char *id) {
    dents_list rd;
    memset(&rd, 0, sizeof rd);
    ASSERT_OK(rjq_queue_get_dependents(q, id, on_dents_list, &rd));
    ASSERT(loop_until_count(base, &rd.ran, 1, 10000));
    return rd;
}

void note_id(char *list, size_t size, const char *id) {
    if (strlen(list) + strlen(id) + 2 < size) {
        if (list[0]) strcat(list, ",");
        strcat(list, id);
    }
}

void on_batch_got(rjq_client *c, int status, const rjq_batch_info *info, void *data) {
    batch_got *g = data;
    (void)c;
    g->calls++;
    g->status = status;
    if (info) {
        snprintf(g->state, sizeof g->state, "%s", info->state);
        g->sealed = info->sealed;
        g->total = info->total;
        g->completed = info->completed;
        g->dead = info->dead;
        g->cancelled = info->cancelled;
        g->ended_ms = info->ended_ms;
        g->on_complete = info->has_on_complete;
        g->on_success = info->has_on_success;
    }
}

batch_got get_batch(struct event_base *base, rjq_queue *bq, const char *bid) {
    batch_got g = {0};
    ASSERT_OK(rjq_batch_get(bq, bid, on_batch_got, &g));
    ASSERT(loop_until_count(base, &g.calls, 1, 10000));
    return g;
}
