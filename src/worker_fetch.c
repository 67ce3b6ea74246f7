/*
 * Payload fetch (worker layer): the payloads a claim or a push left out
 * are read with one HMGET, and their jobs started when it is answered;
 * the jobs of an unconfirmed push get a lease check the same way (one
 * HMGET of their states) and start only if the server holds them under
 * the push's token (worker_private.h, at struct fetch, tells how and why).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker_private.h"

/* State value v (len bytes) is "active <attempt> <token>", alone or
 * followed by ' ' and its times (the state column, lib.lua): the server
 * holds the job under that token. */
static int held_by(const char *v, size_t len, int attempt, const char *token) {
    char head[8 + RJQ__DEC_MAX]; /* "active <attempt> " (no snprintf per job) */
    memcpy(head, "active ", 7);
    size_t hn = 7 + rjq__dec(head + 7, attempt);
    head[hn++] = ' ';
    size_t tl = strlen(token);
    if (len < hn + tl) return 0;
    if (memcmp(v, head, hn) != 0 || memcmp(v + hn, token, tl) != 0) return 0;
    return len == hn + tl || v[hn + tl] == ' ';
}

/* A payload fetch's reply (priv: its fetch). The fetch leaves the
 * worker's flight; a reply that is not one string or nil per job is
 * RJQ_EPROTO, and a failed read (unless the client is closing) is
 * reported, and unless the connection was lost, the worker claims with
 * payloads again. Each job then becomes a running job if its payload came
 * and the worker is active, is skipped if a cancel notice came for it or
 * its payload is gone (its lease ends it), or else goes back to the
 * queue (token-checked, attempt undone). The started ones go to the
 * handler (rjq__w_run_jobs: stale ones are handed back, by the lease end
 * the extensions sent meanwhile); slots of jobs not started are claimed
 * or offered again, and a stopped worker may end here. A lease check's
 * reply holds states: a job whose state is not "active <attempt> <token>"
 * with its push's token is skipped (not ours: nothing to hand back);
 * the others start with their pushed payload, or are read by a fetch. */
static void on_fetched(rjq_client *c, int status, redisReply *r, void *priv) {
    fetch *f = priv;
    rjq_worker *w = f->w;
    rjq__w_check(w); /* (f still among its fetches) */
    w->fetching -= (int)f->n;
    w->ids_only--;
    RJQ__W_LIST_UNLINK(&w->fetches, f);
    if (status == RJQ_OK && (r->type != REDIS_REPLY_ARRAY || r->elements != f->n)) {
        rjq__errmsg(c, "payload fetch: unexpected reply");
        status = RJQ_EPROTO;
    }
    int closing = rjq__closing(c);
    if (status != RJQ_OK && !closing) {
        rjq__background_failed(c, status, "payload fetch");
        /* the server refuses the read (not a lost connection, which the
         * request outlives): claim with payloads again */
        if (status != RJQ_ECONN && !f->check) w->payload_avg = 0;
    }
    rjq_job **jobs = !closing ? malloc(f->n * sizeof *jobs) : NULL;
    rjq__pushed *back = jobs ? malloc(f->n * sizeof *back) : NULL;
    size_t made = 0, nback = 0, nread = 0;
    const char *tokstr = rjq__tok_str(f->tok);
    for (size_t i = 0; back && i < f->n; i++) {
        redisReply *e = status == RJQ_OK ? r->element[i] : NULL;
        if (f->jobs[i].cancelled) continue; /* cancelled: nothing to run */
        if (e && e->type != REDIS_REPLY_STRING) continue; /* gone: its lease ends it */
        if (e && f->check && !held_by(e->str, e->len, f->jobs[i].attempt, tokstr))
            continue; /* the server does not hold it under this token: not ours */
        rjq__pushed d = {.id = f->jobs[i].id, .idlen = f->jobs[i].idlen, .token = tokstr,
                         .toklen = strlen(tokstr), .payload = e ? e->str : NULL,
                         .len = e ? e->len : 0, .attempt = f->jobs[i].attempt,
                         .max_attempts = f->jobs[i].max_attempts, .deadline = f->deadline,
                         .wait_ms = f->jobs[i].wait_ms, .headers = f->jobs[i].headers,
                         .hlen = f->jobs[i].hlen};
        if (f->check) d.payload = f->jobs[i].payload, d.len = f->jobs[i].len;
        if (e && f->check && d.payload == NULL && w->state == W_ACTIVE) {
            back[nread++] = d; /* held: its payload is read next (moved below) */
            continue;
        }
        /* a stopping worker starts nothing more, a failed read nothing:
         * they go back */
        /* (the payload is taken from the reply: not copied again) */
        rjq_job *j = e && w->state == W_ACTIVE ? rjq__w_new_job_from(w, &d, f->tok, e) : NULL;
        if (j) jobs[made++] = j;
        else back[f->n - 1 - nback++] = d; /* (from the end: the reads are at the start) */
    }
    if (nback) rjq__push_release(w->q, NULL, back + f->n - nback, nback);
    /* held jobs of a lease check without a pushed payload: read it (not
     * sent, out of memory: they go back) */
    if (nread && rjq__w_fetch(w, f->tok, back, nread) != 0) rjq__push_release(w->q, NULL, back, nread);
    free(back);
    rjq__tok_drop(f->tok); /* the fetch's hold */
    size_t fetched = f->n;
    long long until = f->until;
    free(f);
    rjq__w_check(w);
    if (closing) {
        free(jobs);
        return;
    }
    rjq__w_run_jobs(w, jobs, made, until);
    free(jobs);
    if (w->state == W_ACTIVE) {
        /* slots of jobs not started are free again: claim, or offer them */
        if (rjq__w_rung(w) || w->mode == CL_HUNGRY || rjq__reg_out_of_step(w->reg))
            rjq__w_want_claim(w);
        else if (made + nread < fetched) {
            rjq__w_slot_freed(w);
            rjq__queue_kick(w->q);
        }
    }
    rjq__w_check_stopped(w);
}

/* Read the payloads of the n jobs in d (all under tok); 0 when sent. Jobs
 * of an unconfirmed push (d[0].check: the jobs of a message share it) get
 * a lease check instead: their states are read, and those the server
 * holds under tok start (their pushed payloads kept here) or have their
 * payloads read after. */
int rjq__w_fetch(rjq_worker *w, rjq__tok *tok, const rjq__pushed *d, size_t n) {
    int check = n && d[0].check;
    size_t bytes = sizeof(fetch) + n * sizeof(fetch_job);
    for (size_t i = 0; i < n; i++)
        bytes += d[i].idlen + d[i].hlen + (check && d[i].payload ? d[i].len : 0);
    fetch *f = malloc(bytes);
    if (f == NULL) return -1;
    f->w = w;
    f->tok = tok;
    f->deadline = n ? d[0].deadline : 0;
    f->until = f->deadline;
    f->n = n;
    f->check = check;
    char *mem = (char *)&f->jobs[n];
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_str(&a, "HMGET");
    rjq__argv_key(&a, w->q, check ? RJQ__K_STATE : RJQ__K_PAYLOAD);
    for (size_t i = 0; i < n; i++) {
        memcpy(mem, d[i].id, d[i].idlen);
        f->jobs[i] = (fetch_job){mem, d[i].idlen, d[i].attempt, d[i].max_attempts, 0, NULL, 0, d[i].wait_ms,
                                 NULL, 0};
        rjq__argv_add(&a, mem, d[i].idlen);
        mem += d[i].idlen;
        if (d[i].hlen) {
            memcpy(mem, d[i].headers, d[i].hlen);
            f->jobs[i].headers = mem, f->jobs[i].hlen = d[i].hlen;
            mem += d[i].hlen;
        }
        if (check && d[i].payload) {
            if (d[i].len) memcpy(mem, d[i].payload, d[i].len);
            f->jobs[i].payload = mem, f->jobs[i].len = d[i].len;
            mem += d[i].len;
        }
    }
    int rc = a.oom ? RJQ_ENOMEM
                   : rjq__command(client_of(w), RJQ__REQ_RETRY, on_fetched, f, a.n, a.v, a.len);
    rjq__argv_free(&a);
    if (rc != RJQ_OK) {
        free(f);
        return -1;
    }
    rjq__tok_hold(tok);
    w->fetching += (int)n;
    w->ids_only++;
    RJQ__W_LIST_PUSH(&w->fetches, f);
    return 0;
}

/* A cancel notice for a job whose payload is being read: it is not started. */
void rjq__w_fetch_notice(rjq_worker *w, const char *token, size_t toklen, const char *id,
                         size_t idlen) {
    for (fetch *f = w->fetches; f; f = f->next) {
        const char *t = rjq__tok_str(f->tok);
        if (strncmp(t, token, toklen) != 0 || t[toklen] != '\0') continue;
        for (size_t i = 0; i < f->n; i++)
            if (f->jobs[i].idlen == idlen && memcmp(f->jobs[i].id, id, idlen) == 0)
                f->jobs[i].cancelled = 1;
    }
}
