/*
 * Push delivery, the client's side (the server's is push_to_idle in
 * src/lua/lib.lua; the worker's ledger is in worker.c).
 *
 * Each queue with workers has one push channel per client,
 * "<prefix>:{Q}:push:<random>", on the subscriber connection. Enqueue
 * claims new jobs for workers that registered free slots and publishes
 * them there, one message per worker:
 *     "<worker> <epoch> <count> <token>\n" then per job
 *     "<id len> <payload len> <attempt> <max attempts>\n"
 *     followed by the id and payload bytes (the jobs of one message share
 *     their fencing token).
 * Jobs for a worker that is gone (stopped meanwhile) go back to the queue
 * at once (release.lua), so they do not wait for their lease.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Parse a decimal number ending in `stop`; advances *p past the stop. */
static int parse_num(const char **p, const char *end, char stop, unsigned long long *out) {
    const char *s = *p;
    unsigned long long v = 0;
    if (s == end || *s < '0' || *s > '9') return -1;
    for (; s < end && *s >= '0' && *s <= '9'; s++) {
        if (v > (~0ULL - 9) / 10) return -1;
        v = v * 10 + (unsigned long long)(*s - '0');
    }
    if (s == end || *s != stop) return -1;
    *p = s + 1;
    *out = v;
    return 0;
}

/* A non-empty word without spaces ending in `stop`; advances *p past it. */
static int parse_word(const char **p, const char *end, char stop, const char **word,
                      size_t *len) {
    const char *s = memchr(*p, stop, (size_t)(end - *p));
    if (s == NULL || s == *p || memchr(*p, ' ', (size_t)(s - *p))) return -1;
    *word = *p;
    *len = (size_t)(s - *p);
    *p = s + 1;
    return 0;
}

/* One job's header and bytes (its token is the message's). */
static int parse_job(const char **p, const char *end, rjq__pushed *d) {
    unsigned long long idlen, len, attempt, max;
    if (parse_num(p, end, ' ', &idlen) || parse_num(p, end, ' ', &len) ||
        parse_num(p, end, ' ', &attempt) || parse_num(p, end, '\n', &max))
        return -1;
    if (idlen == 0 || attempt > 1000000 || max > 1000000 || (size_t)(end - *p) < idlen ||
        (size_t)(end - *p) - idlen < len)
        return -1;
    d->id = *p, d->idlen = (size_t)idlen;
    d->payload = d->id + idlen, d->len = (size_t)len;
    d->attempt = (int)attempt;
    d->max_attempts = (int)max;
    *p = d->payload + len;
    return 0;
}

static rjq_worker *find_worker(rjq_queue *q, unsigned long long id) {
    for (rjq_worker *w = q->workers; w; w = w->next)
        if (w->id == id) return w;
    return NULL;
}

static void on_push(rjq_client *c, const char *channel, const char *msg, size_t len,
                    void *arg) {
    rjq_queue *q = arg;
    if (msg == NULL) { /* (re)subscribed: pushes may have been lost */
        rjq__workers_resync(q);
        return;
    }
    const char *p = msg, *end = msg + len, *token;
    unsigned long long wid, epoch, n;
    size_t toklen;
    if (parse_num(&p, end, ' ', &wid) || parse_num(&p, end, ' ', &epoch) ||
        parse_num(&p, end, ' ', &n) || n == 0 || n > len ||
        parse_word(&p, end, '\n', &token, &toklen)) {
        rjq__errmsg(c, "push on %s: malformed message", channel);
        return; /* its jobs come back when their lease expires */
    }
    rjq__pushed *jobs = malloc((size_t)n * sizeof *jobs);
    if (jobs == NULL) return; /* the same */
    size_t got = 0;
    while (got < n && parse_job(&p, end, &jobs[got]) == 0) {
        jobs[got].token = token, jobs[got].toklen = toklen;
        got++;
    }
    if (got < n || p != end) {
        rjq__errmsg(c, "push on %s: malformed message", channel);
    } else {
        rjq_worker *w = find_worker(q, wid);
        if (w) {
            rjq__worker_take_pushed(w, (unsigned)epoch, jobs, got);
        } else { /* stopped: hand them back and drop what is left of its registration */
            char *field = rjq__push_field(q, wid);
            rjq__push_release(q, field, jobs, got);
            free(field);
        }
    }
    free(jobs);
}

int rjq__push_listen(rjq_queue *q) {
    if (q->push_channel) return RJQ_OK;
    rjq_client *c = q->c;
    size_t len = strlen(c->prefix) + strlen(q->name) + 32;
    char *name = malloc(len);
    if (name == NULL) return RJQ_ENOMEM;
    snprintf(name, len, "%s:{%s}:push:%016llx", c->prefix, q->name,
             (unsigned long long)rjq__random(c));
    int rc = rjq__subscribe(c, name, on_push, q);
    if (rc != RJQ_OK) {
        free(name);
        return rc;
    }
    q->push_channel = name;
    return RJQ_OK;
}

static void on_released(rjq_client *c, int status, redisReply *r, void *priv) {
    (void)r, (void)priv;
    rjq__background_failed(c, status, "release");
}

char *rjq__push_field(const rjq_queue *q, unsigned long long wid) {
    int len = snprintf(NULL, 0, "%llu %s", wid, q->push_channel);
    char *field = len < 0 ? NULL : malloc((size_t)len + 1);
    if (field) snprintf(field, (size_t)len + 1, "%llu %s", wid, q->push_channel);
    return field;
}

void rjq__push_release(rjq_queue *q, const char *field, const rjq__pushed *jobs, size_t n) {
    rjq__argv a;
    rjq__argv_init(&a);
    RJQ__KEYS(&a, q, RJQ__K_ACTIVE, RJQ__K_READY, RJQ__K_PRIO, RJQ__K_STATS, RJQ__K_IDLE,
              RJQ__K_COLUMNS, RJQ__K_MONITORED);
    rjq__argv_key(&a, q, RJQ__K_JOB);
    rjq__argv_key(&a, q, RJQ__K_WAKE);
    rjq__argv_str(&a, field ? field : "");
    for (size_t i = 0; i < n; i++) {
        rjq__argv_add(&a, jobs[i].id, jobs[i].idlen);
        rjq__argv_add(&a, jobs[i].token, jobs[i].toklen);
    }
    /* Token-checked, so safe to re-send; failing that, the lease brings
     * the jobs back. */
    if (!a.oom) rjq__script(q->c, RJQ__S_RELEASE, RJQ__REQ_RETRY, on_released, NULL, a.n, a.v, a.len);
    rjq__argv_free(&a);
}
