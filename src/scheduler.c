/*
 * The scheduler: enqueues the jobs of a queue's schedules at their fire
 * times. A small loop on one timer:
 *   tick   (tick.lua) take or keep the lease; a standby waits for the
 *          holder's lease to run out; the holder gets the schedules due;
 *   fire   (fire.lua) for each, the fire times to enqueue and the next
 *          one, computed here from the server's time: fire times at most
 *          catchup_ms late are each enqueued; older ones are missed
 *          (skipped, or run once as one job named by the first of them);
 *          a schedule's first fire time is computed once a scheduler sees
 *          it (next 0). Then tick again;
 *   sleep  until the earliest next fire time, or a third of the lease
 *          (renewal), whichever comes first.
 * One request is in flight at a time (busy). States: a scheduler is
 * running, or stopping (stopped while busy: freed by the reply).
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"
#include "shard.h"

#define DUE_MAX 100       /* schedules one tick handles */
#define FIRES_MAX 1000    /* fire times one schedule enqueues per fire call */

struct rjq_scheduler {
    rjq_queue *q;
    long lease_ms;
    char token[48];
    int leading;              /* holds the lease (as of the last reply) */
    int busy;                 /* a tick or fire in flight */
    int stopping;             /* stopped while busy */
    rjq__timer timer;
    struct firing *firing;    /* a sharded queue's fire under way (its jobs enqueued first) */
    rjq_scheduler *next;
};

/* A sharded queue's due schedules, read by a tick: their jobs go through
 * the sharded handle (rjq_enqueue_batch: each id "<name>@<fire time>" to
 * its shard), then fire.lua moves their next fire times on (k 0). */
typedef struct fire_due {
    char *name, *spec;
    long long seen, next;
    int k;
    long long *fires;
} fire_due;

typedef struct firing {
    size_t n;
    long long now;
    fire_due *due;
} firing;

static void firing_free(firing *f) {
    for (size_t i = 0; f && i < f->n; i++) {
        free(f->due[i].name);
        free(f->due[i].spec);
        free(f->due[i].fires);
    }
    if (f) free(f->due);
    free(f);
}

typedef struct schedulers {
    rjq_scheduler *head;
} schedulers;

static void tick(rjq_scheduler *s);

static rjq_client *client_of(const rjq_scheduler *s) {
    return rjq_queue_get_client(s->q);
}

static void scheduler_free(rjq_scheduler *s) {
    firing_free(s->firing);
    rjq__timer_teardown(client_of(s), &s->timer);
    free(s);
}

static void schedulers_close(rjq_client *c, void *state) {
    schedulers *all = state;
    (void)c;
    while (all->head) {
        rjq_scheduler *s = all->head;
        all->head = s->next;
        scheduler_free(s);
    }
    free(all);
}

static const rjq__feature schedulers_feature = {.name = "schedulers", .close = schedulers_close};

static void remove_from_list(rjq_scheduler *s) {
    schedulers *all = rjq__feature_state(client_of(s), &schedulers_feature);
    for (rjq_scheduler **pp = &all->head; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
}

static void sleep_for(rjq_scheduler *s, long long ms) {
    long long renew = s->lease_ms / 3;
    if (ms < 0 || ms > renew) ms = renew;
    rjq__timer_start(client_of(s), &s->timer, (uint64_t)ms);
}

/* A reply came: 1 when the scheduler may go on (not stopped, client not
 * being freed); a stopped one is freed here. */
static int replied(rjq_scheduler *s) {
    s->busy = 0;
    if (rjq__closing(client_of(s))) return 0; /* freed with the client */
    if (s->stopping) {
        rjq_queue *q = s->q;
        remove_from_list(s);
        scheduler_free(s);
        rjq__queue_release(q); /* (held by its stop) */
        return 0;
    }
    return 1;
}

/* ---- fire ---------------------------------------------------------------------- */

static void on_fired(rjq_client *c, int status, redisReply *r, void *priv) {
    rjq_scheduler *s = priv;
    if (!replied(s)) return;
    if (status != RJQ_OK) {
        rjq__background_failed(c, status, "scheduler");
        sleep_for(s, s->lease_ms / 3);
        return;
    }
    if (r->type == REDIS_REPLY_INTEGER && r->integer < 0) s->leading = 0; /* taken over */
    tick(s);
}

/* Append one due schedule to the fire call: name, the next fire time read
 * (seen), the spec read, the new next fire time, and the fire times to
 * enqueue. */
static int fires_of(const char *spec, long long seen, long long now, long long *fires, int cap,
                    long long *next_out) {
    rjq__spec sp;
    long long next;
    int k = 0;
    if (rjq__schedule_parse(spec, &sp) != 0) {
        next = -1; /* not a spec rjq wrote: it never fires (and stays listed) */
    } else if (seen == 0) {
        next = rjq__schedule_after(&sp, now); /* new or changed: from now on */
    } else {
        long long f = seen, late = now - sp.catchup_ms;
        if (f < late) { /* missed: older than the catch-up allows */
            if (sp.once) fires[k++] = f;
            f = sp.is_cron ? rjq__schedule_after(&sp, late - 1000)
                           : (late + sp.every_ms - 1) / sp.every_ms * sp.every_ms;
            while (f >= 0 && f < late) f = rjq__schedule_after(&sp, f);
        }
        while (f >= 0 && f <= now && k < cap + (sp.once ? 1 : 0)) {
            fires[k++] = f;
            f = rjq__schedule_after(&sp, f);
        }
        next = f; /* past now only when capped: due again at the next tick */
    }
    *next_out = next;
    return k;
}

/* A due schedule's name, read back, is checked again: a name
 * rjq_schedule_set refuses (written by other means) would make job ids
 * "<name>@<fire time ms>" longer than RJQ_JOB_ID_MAX (cut short on a
 * sharded queue: every fire time's id the same). Such a schedule never
 * fires (no job written; its next fire time goes, as for a spec not rjq's:
 * it stays listed); the client's errmsg says why (RJQ_EINVAL). */
static int name_fires(rjq_client *c, const char *name) {
    if (rjq__schedule_valid_name(name)) return 1;
    rjq__errmsg(c, "scheduler: schedule \"%.40s...\" (%zu bytes): %s: not a schedule name, it never fires",
                name, strlen(name), rjq_strerror(RJQ_EINVAL));
    return 0;
}

static void add_fires(rjq_client *c, rjq__argv *a, const char *name, long long seen,
                      const char *spec, long long now) {
    long long fires[FIRES_MAX + 1], next = -1;
    int k = name_fires(c, name) ? fires_of(spec, seen, now, fires, FIRES_MAX, &next) : 0;
    rjq__argv_copy(a, name);
    rjq__argv_ll(a, seen);
    rjq__argv_add(a, spec, strlen(spec)); /* (the reply it points into outlives the call) */
    rjq__argv_ll(a, next);
    rjq__argv_ll(a, k);
    for (int i = 0; i < k; i++) rjq__argv_ll(a, fires[i]);
}

/* ---- a sharded queue's fire --------------------------------------------------------- */

/* fire.lua with no jobs to make: the due schedules' next fire times moved
 * on (fenced by the lease and the next time and spec read). */
static void advance(rjq_scheduler *s) {
    firing *f = s->firing;
    rjq_client *c = client_of(s);
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, s->q, RJQ__S_FIRE);
    rjq__argv_key(&a, s->q, RJQ__K_JOB);
    rjq__argv_key(&a, s->q, RJQ__K_WAKE);
    rjq__argv_str(&a, s->token);
    for (size_t i = 0; i < f->n; i++) {
        rjq__argv_str(&a, f->due[i].name);
        rjq__argv_ll(&a, f->due[i].seen);
        rjq__argv_str(&a, f->due[i].spec);
        rjq__argv_ll(&a, f->due[i].next);
        rjq__argv_ll(&a, 0);
    }
    if (!a.oom && rjq__script(c, RJQ__S_FIRE, 0, on_fired, s, a.n, a.v, a.len) == RJQ_OK)
        s->busy = 1;
    else
        sleep_for(s, s->lease_ms / 3);
    rjq__argv_free(&a);
    firing_free(s->firing);
    s->firing = NULL;
}

/* The fire under way failed (status): its due schedules untouched, tried
 * again later (the ids already enqueued meet themselves). */
static void firing_failed(rjq_client *c, rjq_scheduler *s, int status) {
    rjq__background_failed(c, status, "scheduler");
    firing_free(s->firing);
    s->firing = NULL;
    sleep_for(s, s->lease_ms / 3);
}

static void on_fire_enqueued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n,
                             void *data) {
    rjq_scheduler *s = data;
    (void)jobs, (void)n;
    if (!replied(s)) return;
    if (status != RJQ_OK) firing_failed(c, s, status);
    else advance(s);
}

/* Enqueue the jobs of the payloads read (HMGET of the due names). */
static void on_payloads(rjq_client *c, int status, redisReply *r, void *priv) {
    rjq_scheduler *s = priv;
    if (!replied(s)) return;
    firing *f = s->firing;
    if (status == RJQ_OK && (r->type != REDIS_REPLY_ARRAY || r->elements != f->n)) {
        rjq__errmsg(c, "scheduler: unexpected reply");
        status = RJQ_EPROTO;
    }
    size_t total = 0;
    for (size_t i = 0; status == RJQ_OK && i < f->n; i++) total += (size_t)f->due[i].k;
    rjq_enqueue_item *items = total ? calloc(total, sizeof *items) : NULL;
    rjq_job_options *jos = total ? calloc(total, sizeof *jos) : NULL;
    char (*ids)[RJQ_JOB_ID_MAX + 1] = total ? calloc(total, sizeof *ids) : NULL;
    if (status == RJQ_OK && total && (items == NULL || jos == NULL || ids == NULL))
        status = RJQ_ENOMEM;
    size_t m = 0;
    for (size_t i = 0; status == RJQ_OK && i < f->n; i++) {
        const redisReply *p = r->element[i];
        rjq_job_options o;
        if (f->due[i].k == 0) continue;
        if (rjq__schedule_job_options(f->due[i].spec, &o) != 0) { /* not ours: never fires */
            f->due[i].k = 0;
            f->due[i].next = -1;
            continue;
        }
        for (int j = 0; j < f->due[i].k; j++, m++) {
            snprintf(ids[m], sizeof ids[m], "%s@%lld", f->due[i].name, f->due[i].fires[j]);
            jos[m] = o;
            jos[m].id = ids[m];
            items[m] = (rjq_enqueue_item)RJQ_ENQUEUE_ITEM_INIT;
            items[m].payload = p->type == REDIS_REPLY_STRING ? p->str : "";
            items[m].len = p->type == REDIS_REPLY_STRING ? p->len : 0;
            items[m].opts = &jos[m];
        }
    }
    int rc = status;
    if (rc == RJQ_OK && m > 0) rc = rjq_enqueue_batch(s->q, items, m, on_fire_enqueued, s);
    free(items);
    free(jos);
    free(ids);
    if (rc == RJQ_OK && m > 0) {
        s->busy = 1;
    } else if (rc == RJQ_OK) {
        advance(s);
    } else {
        firing_failed(c, s, rc);
    }
}

/* The due schedules of tick reply r on a sharded queue: their fire times
 * (at most RJQ_BATCH_MAX jobs in all: the rest at the next tick), then
 * their payloads read (HMGET), their jobs enqueued, and only then their
 * next fire times moved on: a fire whose enqueue failed is fired again,
 * its ids meeting the jobs already made. */
static void fire_sharded(rjq_scheduler *s, const redisReply *r, long long now) {
    rjq_client *c = client_of(s);
    size_t n = (r->elements - 3) / 3;
    firing *f = calloc(1, sizeof *f);
    int rc = f && (f->due = calloc(n, sizeof *f->due)) ? RJQ_OK : RJQ_ENOMEM;
    long long room = RJQ_BATCH_MAX;
    for (size_t i = 0; rc == RJQ_OK && i < n; i++) {
        fire_due *d = &f->due[i];
        f->n++;
        const redisReply *name = r->element[3 + 3 * i], *spec = r->element[5 + 3 * i];
        d->seen = r->element[4 + 3 * i]->integer;
        d->name = strdup(name->str);
        d->spec = strdup(spec->str);
        d->fires = malloc((FIRES_MAX + 1) * sizeof *d->fires);
        if (d->name == NULL || d->spec == NULL || d->fires == NULL) {
            rc = RJQ_ENOMEM;
            break;
        }
        int cap = room > FIRES_MAX ? FIRES_MAX : (int)room - 1;
        if (cap < 1) { /* no room left: due again at the next tick, untouched */
            f->n--;
            free(d->name), free(d->spec), free(d->fires);
            memset(d, 0, sizeof *d);
            break;
        }
        d->next = -1;
        d->k = name_fires(c, d->name) ? fires_of(d->spec, d->seen, now, d->fires, cap, &d->next) : 0;
        room -= d->k;
    }
    const char **argv = rc == RJQ_OK ? calloc(f->n + 2, sizeof *argv) : NULL;
    if (rc == RJQ_OK && argv == NULL) rc = RJQ_ENOMEM;
    if (rc == RJQ_OK) {
        argv[0] = "HMGET";
        argv[1] = rjq__queue_key(s->q, RJQ__K_SCHEDPAYLOAD, NULL);
        for (size_t i = 0; i < f->n; i++) argv[2 + i] = f->due[i].name;
        s->firing = f;
        rc = rjq__command_in(c, rjq__queue_slot(s->q), 0, on_payloads, s, (int)f->n + 2, argv,
                             NULL);
        if (rc != RJQ_OK) s->firing = NULL;
    }
    free(argv);
    if (rc == RJQ_OK) {
        s->busy = 1;
        return;
    }
    firing_free(f);
    sleep_for(s, s->lease_ms / 3); /* out of memory: again later */
}

/* ---- tick ----------------------------------------------------------------------- */

static int in_range(const redisReply *e, long long lo, long long hi) {
    return e->type == REDIS_REPLY_INTEGER && e->integer >= lo && e->integer <= hi;
}

/* (tick.lua) [leading 0/1, server time, a PTTL (-2, -1 or ms) or the
 * earliest next fire time (-1: none), then per schedule due: name, next
 * fire time, spec], every time in range. */
static int tick_reply_ok(const redisReply *r) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 || (r->elements - 3) % 3 != 0 ||
        !in_range(r->element[0], 0, 1) || !in_range(r->element[1], 1, RJQ__TIME_MAX) ||
        !in_range(r->element[2], -2, RJQ__TIME_MAX))
        return 0;
    for (size_t i = 3; i < r->elements; i += 3)
        if (r->element[i]->type != REDIS_REPLY_STRING ||
            !in_range(r->element[i + 1], -RJQ__TIME_MAX, RJQ__TIME_MAX) ||
            r->element[i + 2]->type != REDIS_REPLY_STRING)
            return 0;
    return 1;
}

static void on_tick(rjq_client *c, int status, redisReply *r, void *priv) {
    rjq_scheduler *s = priv;
    if (!replied(s)) return;
    if (status == RJQ_OK && !tick_reply_ok(r)) {
        rjq__errmsg(c, "scheduler: unexpected reply");
        status = RJQ_EPROTO;
    }
    if (status != RJQ_OK) {
        rjq__background_failed(c, status, "scheduler");
        sleep_for(s, s->lease_ms / 3);
        return;
    }
    long long now = r->element[1]->integer, third = r->element[2]->integer;
    s->leading = r->element[0]->integer == 1;
    if (!s->leading) { /* standby: until the holder's lease runs out */
        sleep_for(s, third > 0 ? third + 1 : s->lease_ms / 3);
        return;
    }
    if (r->elements == 3) { /* nothing due: until the earliest fire time */
        sleep_for(s, third >= 0 ? third - now : -1);
        return;
    }
    if (rjq_queue_count_shards(s->q) > 1) {
        fire_sharded(s, r, now);
        return;
    }
    rjq_queue *q = s->q;
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_FIRE);
    rjq__argv_key(&a, q, RJQ__K_JOB);
    rjq__argv_key(&a, q, RJQ__K_WAKE);
    rjq__argv_str(&a, s->token);
    for (size_t i = 3; i < r->elements; i += 3)
        add_fires(c, &a, r->element[i]->str, r->element[i + 1]->integer, r->element[i + 2]->str, now);
    if (!a.oom && rjq__script(c, RJQ__S_FIRE, 0, on_fired, s, a.n, a.v, a.len) == RJQ_OK)
        s->busy = 1;
    else
        sleep_for(s, s->lease_ms / 3); /* out of memory: again later */
    rjq__argv_free(&a);
}

static void on_learnt(rjq_client *c, int status, void *data) {
    rjq_scheduler *s = data;
    (void)c, (void)status; /* (RJQ_ECANCELED: the client goes, replied says) */
    if (replied(s)) tick(s);
}

static void tick(rjq_scheduler *s) {
    rjq_client *c = client_of(s);
    if (s->busy) return; /* its reply ticks */
    if (rjq__queue_learning(s->q)) { /* an rjq_queue_open handle: fire once its layout is known */
        int rc = rjq__queue_when_learnt(s->q, on_learnt, s);
        if (rc == RJQ_OK) s->busy = 1;
        if (rc != 1) {
            if (rc != RJQ_OK) sleep_for(s, s->lease_ms / 3);
            return;
        }
    }
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, s->q, RJQ__S_TICK);
    rjq__argv_str(&a, s->token);
    rjq__argv_ll(&a, s->lease_ms);
    rjq__argv_ll(&a, DUE_MAX);
    if (!a.oom && rjq__script(c, RJQ__S_TICK, 0, on_tick, s, a.n, a.v, a.len) == RJQ_OK)
        s->busy = 1;
    else
        sleep_for(s, s->lease_ms / 3);
    rjq__argv_free(&a);
}

static void on_timer(rjq__timer *t) {
    tick(t->owner);
}

/* ---- the handle ------------------------------------------------------------------- */

int rjq_scheduler_start(rjq_queue *q, long lease_ms, rjq_scheduler **out) {
    if (q == NULL || out == NULL || lease_ms < 0) return RJQ_EINVAL;
    rjq_client *c = rjq_queue_get_client(q);
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    schedulers *all = rjq__feature_ensure(c, &schedulers_feature, sizeof *all);
    rjq_scheduler *s = all ? calloc(1, sizeof *s) : NULL;
    if (s == NULL) return RJQ_ENOMEM;
    s->q = q;
    s->lease_ms = lease_ms ? lease_ms : 3000;
    if (s->lease_ms < 30) s->lease_ms = 30;
    rjq__holder_token(c, s->token, sizeof s->token);
    if (rjq__timer_setup(c, &s->timer, on_timer, s) != RJQ_OK) {
        free(s);
        return RJQ_ENOMEM;
    }
    s->next = all->head;
    all->head = s;
    rjq__queue_use(q); /* (rjq_queue_close refuses until it stops) */
    rjq__timer_start(c, &s->timer, 0);
    *out = s;
    return RJQ_OK;
}

int rjq_scheduler_stop(rjq_scheduler *s) {
    if (s == NULL) return RJQ_EINVAL;
    if (s->stopping) return RJQ_EBUSY;
    rjq_client *c = client_of(s);
    if (s->leading && rjq__accepting(c)) { /* give the lease up: another takes over at once */
        rjq__argv a;
        rjq__argv_init(&a);
        rjq__argv_script_keys(&a, s->q, RJQ__S_UNLEASE);
        rjq__argv_str(&a, s->token);
        if (!a.oom) rjq__script(c, RJQ__S_UNLEASE, 0, rjq__ignore_reply, NULL, a.n, a.v, a.len);
        rjq__argv_free(&a);
    }
    rjq__timer_stop(c, &s->timer);
    rjq__queue_unuse(s->q);
    if (s->busy) {
        s->stopping = 1; /* freed by the reply */
        rjq__queue_hold(s->q);
        return RJQ_OK;
    }
    remove_from_list(s);
    scheduler_free(s);
    return RJQ_OK;
}

int rjq_scheduler_is_leading(const rjq_scheduler *s) {
    return s->leading;
}
