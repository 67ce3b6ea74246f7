/*
 * The client's upkeep (upkeep.h): the liveness beat with the sweep of dead
 * clients, and the visits of its queues in turn.
 *
 * Liveness. The keys "<prefix>:{clients}:live" (a sorted set: client id ->
 * the server time its entry runs out) and "<prefix>:{clients}:queues" (a
 * hash: client id -> the names of the queues it has had workers on) share
 * one slot. A client with workers renews its entry every beat (a third of
 * liveness_ms, at most a second). A beat also hands the caller up to
 * SWEEPS_PER_BEAT clients whose entry ran out, each taken on for
 * SWEEP_LEASE_MS (their entry is pushed forward by that much, so another
 * client takes over if this one dies meanwhile). For each, the jobs it
 * held in each of its queues go back (orphans.lua, through the held index:
 * O(its jobs)), and once every queue answered it is forgotten (gone.lua,
 * unless it came back meanwhile: its own beat changed its entry).
 * A client sweeps others only once its own beats have been answered
 * without a gap for liveness_ms plus its reconnect span (backoff cap and
 * connect timeout): after a restart of Redis, a stall or a partition,
 * every live client first gets the time to reconnect and renew its entry.
 * A sweep is fenced by its lease: orphans.lua does nothing past it, and
 * the swept client, if it comes back, starts no job until then.
 * Its own jobs it stops starting once its entry may have run out (the
 * worker's stale check, rjq__upkeep_alive_until).
 * Beats while a big reply arrives. A beat waits for the previous one's
 * answer, except while a reply is under way on the command connection
 * (rjq__reply_arriving: a claim or payload read of many MiB can take
 * longer than liveness_ms to arrive, and every reply behind it waits):
 * then beats go on being sent (at most BEATS_IN_FLIGHT), so Redis, which
 * runs each as it reads it, keeps the entry renewed; and the expiry each
 * one sets counts for the stale check before its answer comes: at least
 * the server time when it was sent plus liveness_ms (sent_alive). Without
 * that, the job in that reply was found stale on arrival, handed back and
 * claimed again, for ever.
 * On a Redis Cluster all of this is per master (group below): the keys
 * are "<prefix>:{clients-<n>}:...", in a slot of the master, the client
 * beats into each master it has workers on with the names of its queues
 * there, sweeps each as above (orphans.lua in each queue's own slot,
 * gone.lua back in that master's registry), and a worker's stale check
 * reads its queue's master's entry: a master failing over stops no job
 * start on the others.
 * The process registry. "<prefix>:{clients}:info" (a hash: client id ->
 * what it says of itself, process_info) is sent with a beat when it
 * changed; gone.lua deletes it with the entry. rjq_client_list_processes
 * (processes.c) lists the live entries with it.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "batch_call.h"
#include "deps.h"
#include "reclaim.h"
#include "upkeep.h"
#include "validate.h"

#define BEAT_MAX_MS 1000
#define BEATS_IN_FLIGHT 16     /* beats sent while a reply arrives (see above) */
#define SWEEP_LEASE_MS 5000 /* long enough for a sweep's calls; a lost reply delays one this long */
#define SWEEPS_PER_BEAT 4

typedef struct visitee {
    struct upkeep *u;
    rjq_queue *q;
    const rjq__visit_ops *ops;
    void *arg;
    long period;
    uint64_t due;             /* next visit, local ms */
    int busy;                 /* a visit in flight */
    int gone;                 /* left (rjq__upkeep_leave) while busy: its reply frees it */
    struct visitee *next;
} visitee;

/* One liveness registry the client beats into: the standalone server's
 * ("<prefix>:{clients}:*", pin -1), or on a Redis Cluster one per master
 * it has workers on ("<prefix>:{clients-<n>}:*" in the master's lowest
 * slot, pin: that slot; rjq__global_key_at). Made on first use, freed with
 * the upkeep (a master that lost its queues keeps being beaten into with
 * the names it had, so that the client, alive, is never swept there). */
typedef struct group {
    struct upkeep *u;
    int pin;                  /* -1: standalone */
    char *keys[RJQ__G_COUNT]; /* the registry's names (src/keys.def) */
    int beats;                /* beats in flight */
    long long sent_alive;     /* the expiry those sent while a reply arrived
                                 set at least (server ms; 0: none in flight) */
    int names_stored;         /* the server has names_sent */
    char *names_sent;         /* our queue names on it as last sent */
    int info_stored;          /* the server has info_sent */
    char *info_sent;          /* our process info as last sent (process_info) */
    long long alive_until;    /* our entry's expiry as the last beat set it (server ms) */
    long long beat_server;    /* the server time of the last answered beat (0: none, or failed) */
    uint64_t last_beat;       /* local ms of the last beat answered (0: none, or failed) */
    uint64_t steady_since;    /* local ms since when beats were answered without a gap */
    struct group *next;
} group;

/* A dead client being swept. */
typedef struct sweep {
    struct upkeep *u;
    group *g;                 /* the registry it was found dead in */
    char *id;                 /* its id */
    char who[32];             /* its token prefix, "<id>." */
    long long until;          /* the sweep's lease, as beat.lua set it */
    int pending;              /* queues not yet answered */
    int failed;
} sweep;

/* One queue of a sweep. */
typedef struct orphan_call {
    sweep *s;
    rjq_queue *q;
} orphan_call;

typedef struct upkeep {
    rjq_client *c;
    visitee *queues, *cursor;
    rjq__timer beat_timer, visit_timer;
    group *groups;            /* the registries beaten into */
    int beat_deferred;        /* a beat came before the first connect: sent at it */
    long long started_ms;     /* wall clock when the upkeep began (the info's start) */
    char host[256];           /* gethostname(), for the info */
    uint64_t last_visit;
} upkeep;

static void upkeep_close(rjq_client *c, void *state);
static void upkeep_ready(rjq_client *c, void *state, int kind);
static const rjq__feature upkeep_feature = {
    .name = "upkeep", .ready = upkeep_ready, .close = upkeep_close};

static int wanted(const visitee *v) {
    return v->ops->wanted(v->q, v->arg);
}

static int any_wanted(const upkeep *u) {
    for (const visitee *v = u->queues; v; v = v->next)
        if (wanted(v)) return 1;
    return 0;
}

/* ---- sweeping dead clients ---------------------------------------------- */

static void on_gone(rjq_client *c, int status, redisReply *r, void *priv) {
    (void)r, (void)priv;
    rjq__background_failed(c, status, "orphan sweep");
}

/* Every queue of s answered: forget the client unless a queue failed (its
 * entry then runs out again after the sweep's lease, and is retried). */
static void sweep_done(sweep *s) {
    rjq_client *c = s->u->c;
    RJQ_ASSERT(s->pending == 0); /* every queue answered */
    if (!s->failed && !rjq__closing(c)) {
        char until[32];
        snprintf(until, sizeof until, "%lld", s->until);
        const char *argv[RJQ__NKEYS_GONE + 3];
        char num[16];
        int n = rjq__global_script_keys(RJQ__S_GONE, (const char *const *)s->g->keys, num, argv,
                                        RJQ__NKEYS_GONE + 1);
        argv[n++] = s->id;
        argv[n++] = until;
        size_t lens[RJQ__NKEYS_GONE + 3];
        for (int i = 0; i < n; i++) lens[i] = strlen(argv[i]);
        rjq__script(c, RJQ__S_GONE, RJQ__REQ_RETRY, on_gone, NULL, n, argv, lens);
    }
    free(s->id);
    free(s);
}

static void on_orphans(rjq_client *c, int status, redisReply *r, void *priv) {
    orphan_call *o = priv;
    sweep *s = o->s;
    /* orphans.lua: { returned, more, then (id, dependents entry) pairs of
     * the jobs it made dead (and those their death buried) } */
    if (status == RJQ_OK &&
        (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
         r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_INTEGER ||
         !rjq__deps_entries_ok(r, 2))) {
        rjq__errmsg(c, "orphan sweep: unexpected reply");
        status = RJQ_EPROTO;
    }
    if (status == RJQ_OK && r->elements > 2 && !rjq__closing(c))
        rjq__deps_release_entries(o->q, r, 2, 0, "dead"); /* (deps.c) */
    if (status == RJQ_OK && r->element[1]->integer == 1 && !rjq__closing(c)) {
        if (rjq__orphans_send(o->q, s->who, s->until, on_orphans, o) == RJQ_OK)
            return; /* more of its members in this queue */
        s->failed = 1; /* its members stay: swept again after the lease */
    }
    if (status != RJQ_OK) {
        s->failed = 1;
        rjq__background_failed(c, status, "orphan sweep");
    }
    rjq__queue_release(o->q);
    free(o);
    RJQ_ASSERT(s->pending > 0); /* (this call's queue was counted) */
    if (--s->pending == 0) sweep_done(s);
}

/* The queue named `name` (opened here when the client has no handle).
 * NULL when out of memory; *bad when it is no queue name (written by
 * something else: skipped). */
static rjq_queue *queue_named(rjq_client *c, const char *name, size_t len, int *bad) {
    *bad = 0;
    for (rjq_queue *q = rjq__queue_first(c); q; q = rjq__queue_next(q)) {
        const char *n = rjq_queue_get_name(q);
        if (!rjq__queue_closed(q) && strlen(n) == len && memcmp(n, name, len) == 0) return q;
    }
    char *copy = strndup(name, len);
    rjq_queue *q = NULL;
    if (copy && !rjq__valid_queue_name(copy)) *bad = 1;
    else if (copy) rjq__queue_open(c, copy, NULL, &q);
    free(copy);
    return q;
}

/* Take on the sweep of client `id` (until: its lease) in the queues names. */
static void start_sweep(group *g, const redisReply *id, long long until, const redisReply *names) {
    upkeep *u = g->u;
    sweep *s = calloc(1, sizeof *s);
    if (s == NULL || id->len + 2 > sizeof s->who || (s->id = strndup(id->str, id->len)) == NULL) {
        free(s);
        return; /* another beat takes it on after the lease */
    }
    s->u = u;
    s->g = g;
    s->until = until;
    snprintf(s->who, sizeof s->who, "%s.", s->id);
    s->pending = 1; /* this loop's own, dropped below */
    const char *p = names->str, *end = names->str + names->len;
    while (p < end) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        size_t len = sp ? (size_t)(sp - p) : (size_t)(end - p);
        int bad = 0;
        rjq_queue *q = len ? queue_named(u->c, p, len, &bad) : NULL;
        orphan_call *o = q ? malloc(sizeof *o) : NULL;
        if (o) {
            o->s = s;
            o->q = q;
        }
        if (o && rjq__orphans_send(q, s->who, s->until, on_orphans, o) == RJQ_OK) {
            rjq__queue_hold(q); /* (the handle may be closed meanwhile) */
            s->pending++;
        } else if (len && !bad) {
            free(o);
            s->failed = 1; /* the client is swept again after the lease */
        } else {
            free(o);
        }
        p += len + 1;
    }
    RJQ_ASSERT(s->pending > 0); /* (this loop's own) */
    if (--s->pending == 0) sweep_done(s);
}

/* ---- the beat ---------------------------------------------------------------- */

/* How long beats must be answered without a gap before sweeping others:
 * a live client gets its liveness time plus the longest it may take to
 * reconnect (backoff cap and connect timeout) to renew its entry. */
static long sweep_wait_ms(const rjq_client *c) {
    return rjq__client_liveness_ms(c) + rjq__client_reconnect_span_ms(c);
}

static long beat_ms(const upkeep *u) {
    long ms = rjq__client_liveness_ms(u->c) / 3;
    return ms < BEAT_MAX_MS ? ms : BEAT_MAX_MS;
}

/* The longest gap between two answered beats that is no stall: half the
 * liveness time. Beats come every third of it (at most a second), and a
 * stall of more than liveness_ms - beat_ms may have let a live client's
 * entry run out. */
#define STALL_GAP_MS(u) (rjq__client_liveness_ms((u)->c) / 2)

/* [server time, queue names stored (1) + info stored (2), a sweep of us
 * under way until, then 3 per client to sweep] (beat.lua) */
#define BEAT_HEAD 3
static int in_range(const redisReply *e, long long lo, long long hi) {
    return e->type == REDIS_REPLY_INTEGER && e->integer >= lo && e->integer <= hi;
}

/* (times: RJQ__TIME_MAX at most, so that adding the liveness time cannot
 * overflow) */
static int beat_reply_ok(const redisReply *r) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements < BEAT_HEAD ||
        (r->elements - BEAT_HEAD) % 3 != 0 || !in_range(r->element[0], 1, RJQ__TIME_MAX) ||
        !in_range(r->element[1], 0, 3) || !in_range(r->element[2], 0, RJQ__TIME_MAX))
        return 0;
    for (size_t i = BEAT_HEAD; i < r->elements; i += 3)
        if (r->element[i]->type != REDIS_REPLY_STRING ||
            !in_range(r->element[i + 1], 0, RJQ__TIME_MAX) ||
            r->element[i + 2]->type != REDIS_REPLY_STRING)
            return 0;
    return 1;
}

static void on_beat(rjq_client *c, int status, redisReply *r, void *priv) {
    group *g = priv;
    RJQ_ASSERT(g->beats > 0); /* each beat sent is answered once */
    if (--g->beats == 0) g->sent_alive = 0; /* the answers say it now */
    if (rjq__closing(c)) return;
    if (status == RJQ_OK && !beat_reply_ok(r)) {
        rjq__errmsg(c, "liveness beat: unexpected reply");
        status = RJQ_EPROTO;
    }
    uint64_t now = rjq__now_ms();
    if (status != RJQ_OK || r->element[2]->integer > 0)
        g->sent_alive = 0; /* those behind it may not have renewed the entry either */
    if (status != RJQ_OK) {
        g->names_stored = 0;
        g->info_stored = 0;
        g->last_beat = 0;
        g->beat_server = 0;
        rjq__background_failed(c, status, "liveness beat");
        /* A beat refused for a permission (the ACL lacks the keys
         * "<prefix>:{clients}:*"; the request layer's RJQ_EVENT_ERROR named
         * them): the client runs without liveness, and beats again only
         * after its reconnect span, not every beat (each refusal is an
         * event). */
        if (status == RJQ_EAUTH) {
            /* ... as with liveness off: its old entry's end does not stop
             * it starting jobs (else every job it claims after that end
             * would be handed back, claimed again, without end); another
             * client may return the jobs of that entry (their tokens fence
             * this one's completions of them) */
            g->alive_until = 0;
            rjq__timer_start(c, &g->u->beat_timer, (uint64_t)rjq__client_reconnect_span_ms(c));
        }
        return;
    }
    RJQ_ASSERT(r != NULL && r->elements >= BEAT_HEAD); /* (beat_reply_ok) */
    rjq__server_time_sample(c, r->element[0]->integer);
    /* Being swept (we were taken for dead): start no job until the sweep's
     * lease ends, as if our entry had run out. */
    g->alive_until = r->element[2]->integer > 0
                         ? r->element[0]->integer
                         : r->element[0]->integer + rjq__client_liveness_ms(c);
    g->beat_server = r->element[0]->integer;
    /* A gap (the server or this process stalled, a reconnect) starts the
     * wait before sweeping again. */
    if (g->last_beat == 0 || now - g->last_beat > (uint64_t)STALL_GAP_MS(g->u)) g->steady_since = now;
    g->last_beat = now;
    if ((r->element[1]->integer & 1) == 0) g->names_stored = 0; /* the next beat sends them */
    g->info_stored = (r->element[1]->integer & 2) != 0;
    for (size_t i = BEAT_HEAD; i < r->elements && !rjq__closing(c); i += 3)
        start_sweep(g, r->element[i], r->element[i + 1]->integer, r->element[i + 2]);
}

/* The names of the queues the client has had workers on whose registry
 * is pin's ("" when none). NULL when out of memory. */
static char *queue_names(const upkeep *u, int pin) {
    size_t len = 1;
    for (const visitee *v = u->queues; v; v = v->next) len += strlen(rjq_queue_get_name(v->q)) + 1;
    char *s = malloc(len), *p = s;
    if (s == NULL) return NULL;
    for (const visitee *v = u->queues; v; v = v->next) {
        if (rjq__queue_registry_pin(v->q) != pin) continue;
        size_t n = strlen(rjq_queue_get_name(v->q));
        if (p != s) *p++ = ' ';
        memcpy(p, rjq_queue_get_name(v->q), n);
        p += n;
    }
    *p = '\0';
    return s;
}

static group *group_of(upkeep *u, int pin, int make) {
    group *g = u->groups;
    while (g && g->pin != pin) g = g->next;
    if (g || !make) return g;
    if ((g = calloc(1, sizeof *g)) == NULL) return NULL;
    g->u = u;
    g->pin = pin;
    int keys_ok = 1;
    for (int i = 0; i < RJQ__G_COUNT; i++)
        keys_ok &= (g->keys[i] = rjq__global_key_at(u->c, i, pin)) != NULL;
    if (!keys_ok) {
        for (int i = 0; i < RJQ__G_COUNT; i++) free(g->keys[i]);
        free(g);
        return NULL;
    }
    g->next = u->groups;
    u->groups = g;
    return g;
}

static void group_free(group *g) {
    for (int i = 0; i < RJQ__G_COUNT; i++) free(g->keys[i]);
    free(g->names_sent);
    free(g->info_sent);
    free(g);
}

/* What the process says of itself in the registry (processes.lua, read by
 * rjq_client_list_processes): a line "rjq1 host pid start-ms name", then one
 * per queue with workers "queue concurrency running ids...", the fields
 * tab-separated (names and ids hold no tab or newline). NULL when out of
 * memory. */
static char *process_info(const upkeep *u) {
    char line[1024];
    char name[201];
    snprintf(name, sizeof name, "%s", rjq__client_name(u->c));
    for (char *p = name; *p; p++)
        if (*p == '\t' || *p == '\n') *p = ' ';
    int n = snprintf(line, sizeof line, "rjq1\t%s\t%ld\t%lld\t%s", u->host, (long)getpid(),
                     u->started_ms, name);
    size_t len = (size_t)n, cap = len + 1;
    for (const visitee *v = u->queues; v; v = v->next)
        cap += strlen(rjq_queue_get_name(v->q)) + 2 + RJQ__DESCRIBE_MAX;
    char *out = malloc(cap);
    if (out == NULL) return NULL;
    memcpy(out, line, len + 1);
    /* one line per name: handles of one queue (opened twice) add up */
    for (const visitee *v = u->queues; v; v = v->next) {
        const char *qname = rjq_queue_get_name(v->q);
        if (!wanted(v) || v->ops->describe == NULL) continue;
        const visitee *first = u->queues;
        while (first != v && !(wanted(first) && first->ops->describe &&
                               strcmp(rjq_queue_get_name(first->q), qname) == 0))
            first = first->next;
        if (first != v) continue; /* described with the first */
        rjq__describe d;
        memset(&d, 0, sizeof d);
        for (const visitee *w = v; w; w = w->next) {
            if (!wanted(w) || w->ops->describe == NULL || strcmp(rjq_queue_get_name(w->q), qname))
                continue;
            const visitee *x = v; /* handles may share their workers' state */
            while (x != w && x->arg != w->arg) x = x->next;
            if (x == w) w->ops->describe(w->q, w->arg, &d);
        }
        len += (size_t)snprintf(out + len, cap - len, "\n%s\t%d\t%d\t", qname, d.concurrency,
                                d.running);
        for (size_t i = 0; i < d.nids; i++)
            len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? " " : "", d.ids[i]);
    }
    return out;
}

/* One beat into g's registry: names, the queue names on it (taken: freed
 * or kept here); info, the process info (or NULL). */
static void beat(group *g, int arriving, char *names, const char *info) {
    upkeep *u = g->u;
    rjq_client *c = u->c;
    RJQ_ASSERT(g->beats >= 0 && g->beats <= BEATS_IN_FLIGHT);
    if (g->beats && !(arriving && g->beats < BEATS_IN_FLIGHT)) { /* its last one is due */
        free(names);
        return;
    }
    /* the names when they changed or the server lacks them (else '') */
    int send_names = !g->names_stored || g->names_sent == NULL || strcmp(names, g->names_sent) != 0;
    char ttl[32], lease[32], most[16], prev[32], gap[32];
    snprintf(ttl, sizeof ttl, "%ld", rjq__client_liveness_ms(c));
    snprintf(lease, sizeof lease, "%d", SWEEP_LEASE_MS);
    /* Sweep others only after beating without a gap for sweep_wait_ms: an
     * entry that ran out while the server (or the network, or this
     * process) stalled for everyone belongs to a client that had no chance
     * to renew it; past that wait, every live client has. */
    uint64_t now = rjq__now_ms();
    int steady = g->last_beat && now - g->steady_since >= (uint64_t)sweep_wait_ms(c);
    snprintf(most, sizeof most, "%d", steady ? SWEEPS_PER_BEAT : 0);
    snprintf(prev, sizeof prev, "%lld", g->beat_server);
    snprintf(gap, sizeof gap, "%ld", STALL_GAP_MS(u));
    /* the info when it changed or the server lacks it (else ''); without
     * memory for it the beat goes without */
    int send_info = info && (!g->info_stored || g->info_sent == NULL ||
                             strcmp(info, g->info_sent) != 0);
    char *info_copy = send_info ? strdup(info) : NULL;
    if (info_copy == NULL) send_info = 0;
    const char *argv[RJQ__NKEYS_BEAT + 9];
    char num[16];
    int n = rjq__global_script_keys(RJQ__S_BEAT, (const char *const *)g->keys, num, argv,
                                    RJQ__NKEYS_BEAT + 1);
    const char *rest[] = {rjq__client_id(c), ttl, send_names ? names : "", lease, most, prev, gap,
                          send_info ? info : ""};
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) argv[n++] = rest[i];
    size_t lens[RJQ__NKEYS_BEAT + 9];
    for (int i = 0; i < n; i++) lens[i] = strlen(argv[i]);
    if (rjq__script(c, RJQ__S_BEAT, 0, on_beat, g, n, argv, lens) == RJQ_OK) {
        g->beats++;
        long long server = rjq__server_now(c);
        if (arriving && server > 0 && server + rjq__client_liveness_ms(c) > g->sent_alive)
            g->sent_alive = server + rjq__client_liveness_ms(c);
        if (send_names) { /* stored unless the reply says otherwise */
            free(g->names_sent);
            g->names_sent = names;
            names = NULL;
            g->names_stored = 1;
        }
        if (send_info) {
            free(g->info_sent);
            g->info_sent = info_copy;
            info_copy = NULL;
        }
    }
    free(info_copy);
    free(names);
}

/* A beat into each registry of the client: the standalone server's, or on
 * a cluster each master's it has workers on (and each it had workers on:
 * with the names it had there, see group). Each says the same process
 * info; each master's holds the names of the client's queues it serves. */
static void beat_all(upkeep *u) {
    rjq_client *c = u->c;
    /* not connected yet: a cluster is not told from a standalone server
     * before the first connect (a beat then would go to the wrong
     * registry): the beat goes when it is made (upkeep_ready), right
     * behind the requests that waited for it (a worker's first claim) */
    if (!rjq__routed(c)) {
        u->beat_deferred = 1;
        return;
    }
    u->beat_deferred = 0;
    for (const visitee *v = u->queues; v; v = v->next) {
        int pin = rjq__queue_registry_pin(v->q);
        if (pin != -2) group_of(u, pin, 1); /* (out of memory: the next beat) */
    }
    int arriving = rjq__reply_arriving(c);
    char *info = process_info(u);
    for (group *g = u->groups; g; g = g->next) {
        char *names = queue_names(u, g->pin);
        if (names && names[0] == '\0' && g->names_sent) { /* none of ours is on it now */
            free(names);
            names = strdup(g->names_sent);
        }
        if (names == NULL) continue;
        if (names[0] == '\0') { /* (never beaten into, and nothing to say) */
            free(names);
            continue;
        }
        beat(g, arriving, names, info);
    }
    free(info);
}

static void on_beat_timer(rjq__timer *t) {
    upkeep *u = t->owner;
    rjq_client *c = u->c;
    if (rjq__client_liveness_ms(c) <= 0 || !any_wanted(u)) return; /* a join starts it again */
    rjq__timer_start(c, &u->beat_timer, (uint64_t)beat_ms(u));
    beat_all(u);
}

/* A command connection is back (made again: Redis restarted, or the
 * connection was lost; on a cluster, any master's): every other client
 * had to reconnect too, so the wait before sweeping starts over (and the
 * next beat says it has no previous one). */
static void upkeep_ready(rjq_client *c, void *state, int kind) {
    upkeep *u = state;
    if (kind != RJQ_CONN_COMMAND) return;
    for (group *g = u->groups; g; g = g->next) {
        g->last_beat = 0;
        g->beat_server = 0;
        /* a server restarted from a snapshot, or a replica promoted, has
         * its own copies of our names and info: stale ones, maybe, and a
         * beat would only say they exist. The next beat sends them again. */
        g->names_stored = 0;
        g->info_stored = 0;
    }
    if (u->beat_deferred && !rjq__closing(c) && rjq__client_liveness_ms(c) > 0 && any_wanted(u))
        beat_all(u);
}

/* ---- visits --------------------------------------------------------------- */

/* Arm the visit timer for the next visit due, at most one per shortest
 * period. */
static void schedule_visit(upkeep *u) {
    uint64_t due = UINT64_MAX;
    long gap = LONG_MAX;
    for (const visitee *v = u->queues; v; v = v->next) {
        if (!wanted(v)) continue;
        if (v->due < due) due = v->due;
        if (v->period < gap) gap = v->period;
    }
    if (due == UINT64_MAX) {
        rjq__timer_stop(u->c, &u->visit_timer); /* a join starts it again */
        return;
    }
    RJQ_ASSERT(gap > 0 && gap < LONG_MAX); /* a wanted queue has a period */
    uint64_t now = rjq__now_ms(), at = due;
    if (u->last_visit && u->last_visit + (uint64_t)gap > at) at = u->last_visit + (uint64_t)gap;
    rjq__timer_start(u->c, &u->visit_timer, at > now ? at - now : 0);
}

static void on_visited(rjq_client *c, int status, redisReply *r, void *priv) {
    visitee *v = priv;
    RJQ_ASSERT(v->busy); /* its visit was in flight */
    v->busy = 0;
    if (v->gone) { /* its queue handle was closed meanwhile */
        free(v);
        return;
    }
    if (rjq__closing(c)) return;
    /* reclaim.lua with look: { reclaimed, ready, what to sweep, then (id,
     * dependents entry) pairs of the jobs it made dead (and those their
     * death buried) } */
    if (status == RJQ_OK && (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
                             r->element[1]->type != REDIS_REPLY_INTEGER ||
                             r->element[2]->type != REDIS_REPLY_INTEGER ||
                             r->element[2]->integer < 0 || r->element[2]->integer > 7 ||
                             !rjq__deps_entries_ok(r, 3))) {
        rjq__errmsg(c, "reclaim: unexpected reply");
        status = RJQ_EPROTO;
    }
    if (status != RJQ_OK) {
        rjq__background_failed(c, status, "reclaim");
        return;
    }
    if (r->elements > 3) rjq__deps_release_entries(v->q, r, 3, 0, "dead"); /* (deps.c) */
    if (r->element[2]->integer & 1) rjq__deps_sweep(v->q);  /* (deps.c) */
    if (r->element[2]->integer & 2) rjq__deps_resume(v->q); /* (deps.c) */
    if (r->element[2]->integer & 4) rjq__batch_sweep(v->q); /* (batch_call.c) */
    if (r->element[1]->integer > 0 && wanted(v)) v->ops->waiting(v->q, v->arg);
}

/* Visit the next queue due, in turn. */
static void on_visit_timer(rjq__timer *t) {
    upkeep *u = t->owner;
    uint64_t now = rjq__now_ms();
    visitee *start = u->cursor ? u->cursor : u->queues, *v = start;
    do {
        if (v == NULL) break;
        if (wanted(v) && !v->busy && v->due <= now) {
            if (rjq__reclaim_send(v->q, v->period, 1, on_visited, v) == RJQ_OK) v->busy = 1;
            v->due = now + (uint64_t)v->period;
            u->last_visit = now;
            u->cursor = v->next;
            break;
        }
        v = v->next ? v->next : u->queues;
    } while (v != start);
    schedule_visit(u);
}

/* ---- joining ------------------------------------------------------------------ */

static void upkeep_close(rjq_client *c, void *state) {
    upkeep *u = state;
    rjq__timer_teardown(c, &u->beat_timer);
    rjq__timer_teardown(c, &u->visit_timer);
    while (u->queues) {
        visitee *v = u->queues;
        u->queues = v->next;
        free(v);
    }
    while (u->groups) {
        group *g = u->groups;
        u->groups = g->next;
        group_free(g);
    }
    free(u);
}

static upkeep *upkeep_of(rjq_client *c) {
    upkeep *u = rjq__feature_state(c, &upkeep_feature);
    if (u) return u;
    if ((u = calloc(1, sizeof *u)) == NULL) return NULL;
    u->c = c;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    u->started_ms = (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
    if (gethostname(u->host, sizeof u->host - 1) != 0) snprintf(u->host, sizeof u->host, "?");
    u->host[strcspn(u->host, "\t\n")] = '\0';
    if (rjq__timer_setup(c, &u->beat_timer, on_beat_timer, u) != RJQ_OK) {
        free(u);
        return NULL;
    }
    if (rjq__timer_setup(c, &u->visit_timer, on_visit_timer, u) != RJQ_OK ||
        rjq__feature_add(c, &upkeep_feature, u) != RJQ_OK) {
        upkeep_close(c, u);
        return NULL;
    }
    return u;
}

long long rjq__upkeep_alive_until(rjq_queue *q) {
    rjq_client *c = rjq_queue_get_client(q);
    upkeep *u = rjq__feature_state(c, &upkeep_feature);
    if (u == NULL || rjq__client_liveness_ms(c) <= 0) return 0;
    /* the registry of the queue's master: another master failing over
     * stops no job here */
    const group *g = group_of(u, rjq__queue_registry_pin(q), 0);
    if (g == NULL) return 0; /* not beaten into yet */
    return g->sent_alive > g->alive_until ? g->sent_alive : g->alive_until;
}

void rjq__upkeep_leave(rjq_queue *q) {
    upkeep *u = rjq__feature_state(rjq_queue_get_client(q), &upkeep_feature);
    if (u == NULL) return;
    for (visitee **pp = &u->queues; *pp;) {
        visitee *v = *pp;
        if (v->q != q) {
            pp = &v->next;
            continue;
        }
        *pp = v->next;
        if (u->cursor == v) u->cursor = v->next;
        if (v->busy) v->gone = 1; /* freed by on_visited */
        else free(v);
    }
    schedule_visit(u);
}

int rjq__upkeep_join(rjq_queue *q, const rjq__visit_ops *ops, void *arg, long period_ms) {
    rjq_client *c = rjq_queue_get_client(q);
    RJQ_ASSERT(ops != NULL && ops->wanted != NULL && ops->waiting != NULL && period_ms > 0);
    upkeep *u = upkeep_of(c);
    if (u == NULL) return RJQ_ENOMEM;
    visitee *v = u->queues;
    while (v && v->q != q) v = v->next;
    if (v == NULL) {
        if ((v = calloc(1, sizeof *v)) == NULL) return RJQ_ENOMEM;
        v->u = u;
        v->q = q;
        v->ops = ops;
        v->arg = arg;
        v->period = period_ms;
        v->due = rjq__now_ms() + (uint64_t)period_ms;
        v->next = u->queues;
        u->queues = v;
    } else if (period_ms < v->period) {
        v->period = period_ms;
        if (v->due > rjq__now_ms() + (uint64_t)period_ms) v->due = rjq__now_ms() + (uint64_t)period_ms;
    }
    if (rjq__client_liveness_ms(c) > 0 && !rjq__timer_armed(&u->beat_timer))
        rjq__timer_start(c, &u->beat_timer, 0);
    schedule_visit(u);
    return RJQ_OK;
}
