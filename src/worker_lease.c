/*
 * Lease extension (worker layer): every lease_ms/3 the leases of running
 * jobs, of those whose payloads are being read and of claims in flight
 * are extended; its reply tells of cancelled and timed-out jobs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker_private.h"

/* An extension in flight: the ids and tokens it sent ("id\0token\0" n
 * times), to tell the handlers of jobs it finds cancelled. */
typedef struct extend_ctx {
    rjq_worker *w;
    size_t n;
    char sent[];
} extend_ctx;

static void on_extended(rjq_client *c, int status, redisReply *r, void *priv) {
    extend_ctx *x = priv;
    rjq_worker *w = x->w;
    RJQ_ASSERT(w->extend.busy > 0);
    if (status == RJQ_OK && (r->type != REDIS_REPLY_ARRAY || r->elements != x->n))
        status = RJQ_EPROTO;
    const char *p = x->sent;
    for (size_t i = 0; status == RJQ_OK && i < x->n && !rjq__closing(c) && !rjq__free_pending(c);
         i++) {
        const char *id = p, *token = id + strlen(id) + 1;
        p = token + strlen(token) + 1;
        /* 2: cancelled, 3: its run time is over (its timeout), and the
         * notice on the push channel was missed; 0: its lease was lost (a
         * job whose payload is still being read is then not started) */
        long long code = r->element[i]->type == REDIS_REPLY_INTEGER ? r->element[i]->integer : 0;
        if (id[0] == '\0') continue; /* a claim in flight's */
        if (code == 2 || code == 3)
            rjq__w_notice(w, code == 2 ? RJQ_EJOBCANCELED : RJQ_ETIMEDOUT, token, strlen(token), id,
                       strlen(id));
        else if (code == 0)
            rjq__w_fetch_notice(w, token, strlen(token), id, strlen(id));
    }
    free(x);
    rjq__w_background_done(c, status, r, &w->extend);
}

/* One job of an extension: its id, token and claim start in a, recorded
 * in *p. */
static void extend_add(rjq__argv *a, char **p, const char *id, size_t idlen, const char *token,
                       long long deadline, long lease_ms) {
    size_t tl = strlen(token) + 1;
    rjq__argv_add(a, id, idlen);
    rjq__argv_str(a, token);
    /* its claim's start as the lease's end tells it (extend.lua) */
    rjq__argv_ll(a, deadline > lease_ms ? deadline - lease_ms : 0);
    memcpy(*p, id, idlen);
    (*p)[idlen] = '\0';
    memcpy(*p + idlen + 1, token, tl);
    *p += idlen + 1 + tl;
}

/* Every lease_ms/3: extend the leases of the running jobs, of those whose
 * payloads are being read, and of those of the claims in flight (by their
 * tokens: extend.lua), so that a payload that takes longer than the lease
 * to arrive does not lose its job (to the sweep, or handed back as stale
 * on arrival: on_fetched and on_claimed count on the extensions sent). One
 * extension at a time, except while a payload may be being read: its
 * reply waits behind that payload's, so more go out meanwhile. */
void rjq__w_on_extend_timer(rjq__timer *t) {
    rjq_worker *w = t->owner;
    rjq_client *c = client_of(w);
    rjq__w_check(w);
    rjq__timer_start(c, &w->extend_timer, (uint64_t)(w->lease_ms / 3));
    int reading = w->fetches != NULL || w->claims != NULL;
    if ((w->jobs == NULL && !reading) || (w->extend.busy && !reading)) return;
    size_t n = 0, size = 0;
    for (rjq_job *j = w->jobs; j; j = j->next, n++) size += strlen(j->id) + strlen(j->token) + 2;
    for (fetch *f = w->fetches; f; f = f->next)
        for (size_t i = 0; i < f->n; i++)
            if (!f->jobs[i].cancelled) {
                n++;
                size += f->jobs[i].idlen + strlen(rjq__tok_str(f->tok)) + 2;
            }
    for (claim_ctx *k = w->claims; k; k = k->next, n++) size += strlen(k->token) + 2;
    if (n == 0) return;
    extend_ctx *x = malloc(sizeof *x + size);
    if (x == NULL) return; /* tried again next period */
    x->w = w;
    x->n = n;
    char *p = x->sent;
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, w->q, RJQ__S_EXTEND);
    rjq__argv_ll(&a, w->lease_ms);
    for (rjq_job *j = w->jobs; j; j = j->next)
        extend_add(&a, &p, j->id, strlen(j->id), j->token, j->deadline, w->lease_ms);
    for (fetch *f = w->fetches; f; f = f->next)
        for (size_t i = 0; i < f->n; i++)
            if (!f->jobs[i].cancelled)
                extend_add(&a, &p, f->jobs[i].id, f->jobs[i].idlen, rjq__tok_str(f->tok),
                           f->deadline, w->lease_ms);
    for (claim_ctx *k = w->claims; k; k = k->next) /* (last: extend.lua) */
        extend_add(&a, &p, "", 0, k->token, 0, w->lease_ms);
    /* (the lease's end it asks for: no earlier than this, by the server's clock) */
    long long now = rjq__server_now(c);
    if (!a.oom && rjq__script(c, RJQ__S_EXTEND, 0, on_extended, x, a.n, a.v, a.len) == RJQ_OK) {
        w->extend.busy++;
        for (fetch *f = w->fetches; f && now > 0; f = f->next)
            if (now + w->lease_ms > f->until) f->until = now + w->lease_ms;
        for (claim_ctx *k = w->claims; k && now > 0; k = k->next)
            if (now + w->lease_ms > k->until) k->until = now + w->lease_ms;
    } else {
        free(x);
    }
    rjq__argv_free(&a);
}
