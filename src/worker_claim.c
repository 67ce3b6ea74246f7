/*
 * The claim loop (worker layer): claim replies checked and taken apart,
 * sending claims (one, or two halves while hungry), and what a reply
 * admits (jobs run, fetched or handed back) and changes (the loop's mode).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "validate.h"
#include "worker_private.h"

/* (worker.h) The next job of a claim reply, its run's attempt, max
 * attempts and wait, the reply's token and deadline, all checked by
 * rjq__claim_reply_ok; 0 on success, 1 when the payload was left out
 * (nil: the worker reads it, see worker_fetch.c). */
int rjq__claim_reply_job(const redisReply *r, rjq__claim_at *k, rjq__pushed *d) {
    if (k->left == 0) { /* the next run */
        if (k->at < CLAIM_HEAD) k->at = CLAIM_HEAD;
        k->run = k->at;
        k->left = (size_t)r->element[k->at]->integer;
        k->at += CLAIM_RUN;
    }
    redisReply **h = &r->element[k->run], **e = &r->element[k->at];
    k->at += CLAIM_PER_JOB;
    k->left--;
    d->id = e[0]->str, d->idlen = e[0]->len;
    d->token = r->element[2]->str, d->toklen = r->element[2]->len;
    d->payload = e[1]->str, d->len = e[1]->len;
    d->attempt = (int)h[1]->integer;
    d->headers = NULL, d->hlen = 0;
    if (h[2]->type == REDIS_REPLY_STRING) { /* "<max>\n<headers>" (checked) */
        const char *nl = memchr(h[2]->str, '\n', h[2]->len);
        long long m = 0;
        (void)rjq__parse_ll(h[2]->str, (size_t)(nl - h[2]->str), 0, RJQ__ATTEMPTS_MAX, &m);
        d->max_attempts = (int)m;
        d->headers = nl + 1, d->hlen = h[2]->len - (size_t)(nl + 1 - h[2]->str);
    } else {
        d->max_attempts = (int)h[2]->integer;
    }
    d->wait_ms = h[3]->integer;
    d->deadline = r->element[3]->integer;
    return e[1]->type == REDIS_REPLY_NIL;
}

static int in_range(const redisReply *e, long long lo, long long hi) {
    return e->type == REDIS_REPLY_INTEGER && e->integer >= lo && e->integer <= hi;
}

/* A job's max attempts in a claim reply: a number, or with its headers
 * "<max>\n<headers>" (claim.lua). */
static int max_ok(const redisReply *e) {
    if (e->type != REDIS_REPLY_STRING) return in_range(e, 0, RJQ__ATTEMPTS_MAX);
    const char *nl = memchr(e->str, '\n', e->len);
    long long m;
    return nl && rjq__parse_ll(e->str, (size_t)(nl - e->str), 0, RJQ__ATTEMPTS_MAX, &m) == 0;
}

/* (worker.h) The jobs of an accepted reply: its runs' counts. */
size_t rjq__claim_reply_count(const redisReply *r) {
    size_t got = 0;
    for (size_t i = CLAIM_HEAD; i < r->elements;) {
        size_t n = (size_t)r->element[i]->integer;
        got += n;
        i += CLAIM_RUN + CLAIM_PER_JOB * n;
    }
    return got;
}

/* (worker.h) A claim registers at most the slots it did not fill and its
 * extra ones (only when it came back short); next
 * due is -1 (nothing delayed), -2 (paused) or ms from now; the token is
 * one a job handle can hold. Each run has at least one job, and no more
 * than the jobs asked for in all. */
int rjq__claim_reply_ok(const redisReply *r, int asked, int extra) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements < CLAIM_HEAD || !in_range(r->element[0], -2, RJQ__TIME_MAX) ||
        r->element[1]->type != REDIS_REPLY_INTEGER || r->element[2]->type != REDIS_REPLY_STRING ||
        r->element[2]->len == 0 || r->element[2]->len >= sizeof(((rjq_job *)0)->token) ||
        !in_range(r->element[3], 1, RJQ__TIME_MAX))
        return 0;
    long long got = 0, registered = r->element[1]->integer;
    for (size_t i = CLAIM_HEAD; i < r->elements;) {
        redisReply **h = &r->element[i];
        if (r->elements - i < CLAIM_RUN || !in_range(h[0], 1, asked - got) || !in_range(h[1], 0, RJQ__ATTEMPTS_MAX) ||
            !max_ok(h[2]) || !in_range(h[3], -1, RJQ__TIME_MAX))
            return 0;
        size_t n = (size_t)h[0]->integer;
        got += h[0]->integer;
        i += CLAIM_RUN;
        if ((r->elements - i) / CLAIM_PER_JOB < n) return 0;
        for (size_t j = 0; j < n; j++, i += CLAIM_PER_JOB) {
            redisReply **e = &r->element[i];
            if (e[0]->type != REDIS_REPLY_STRING || e[0]->len == 0 ||
                (e[1]->type != REDIS_REPLY_STRING && e[1]->type != REDIS_REPLY_NIL))
                return 0;
        }
    }
    if (got > asked || extra < 0 || registered < 0 || registered > (got < asked ? asked - got + extra : 0))
        return 0;
    return 1;
}

/* Wait for a push, the doorbell, the next delayed job (next_due ms; -1:
 * none) or the queue's visit. */
static void go_idle(rjq_worker *w, long long next_due) {
    if (next_due >= 0) rjq__timer_start(client_of(w), &w->poll_timer, (uint64_t)next_due + 1);
    else rjq__timer_stop(client_of(w), &w->poll_timer);
}

/* A claim failed: try again after poll_ms (ECONN: the reconnect pokes
 * sooner). */
static void retry_later(rjq_worker *w) {
    rjq__timer_start(client_of(w), &w->poll_timer, (uint64_t)w->poll_ms);
}

/* The claim x (priv) is no longer in flight: off the worker's list and
 * counts; its copy is returned. */
static claim_ctx claim_unlink(rjq_worker *w, void *priv) {
    claim_ctx x = *(claim_ctx *)priv;
    RJQ__W_LIST_UNLINK(&w->claims, (claim_ctx *)priv);
    free(priv);
    w->claiming--;
    w->asked -= x.asked;
    w->registering -= x.extra;
    w->ids_only -= x.ids_only;
    return x;
}

/* Parse: a reply that is not one for claim x is RJQ_EPROTO; the
 * registration is told the claim's outcome. Returns the status. */
static int claim_parse(rjq_client *c, rjq_worker *w, const claim_ctx *x, int status,
                       const redisReply *r) {
    if (status == RJQ_OK && !rjq__claim_reply_ok(r, x->asked, x->extra)) {
        rjq__errmsg(c, "claim: unexpected reply");
        status = RJQ_EPROTO;
    }
    rjq__reg_claim_replied(w->reg, x->epoch, status, status == RJQ_OK ? r->element[1]->integer : 0,
                           x->recovers);
    return status;
}

/* The claim failed: ECONN: the reconnect pokes us; anything else: retried
 * later. A permission refused (the request layer's RJQ_EVENT_ERROR named
 * it) is final until the ACL changes: no claim until the client's
 * reconnect span (backoff cap + connect timeout) is over, whatever
 * doorbells ring meanwhile. */
static void claim_failed(rjq_client *c, rjq_worker *w, int status) {
    rjq__w_set_mode(w, CL_IDLE);
    if (status == RJQ_EAUTH) {
        long span = rjq__client_reconnect_span_ms(c);
        w->refused_until = rjq__now_ms() + (uint64_t)span;
        rjq__timer_start(c, &w->poll_timer, (uint64_t)span);
    } else {
        retry_later(w);
    }
}

/* Admit the got jobs of claim x's reply r: those with their payloads
 * become running jobs (*jobs, *made of them, for the caller to run), those
 * without are read (rjq__w_fetch), the rest go back to the queue (a
 * stopping worker starts nothing more; out of memory). */
static void claim_admit(rjq_client *c, rjq_worker *w, const claim_ctx *x, const redisReply *r,
                        size_t got, rjq_job ***jobs, size_t *made) {
    size_t nback = 0, nfetch = 0;
    /* the claim's time (a re-sent one's jobs: their first run's): an empty
     * claim tells it too, and the registration it made may bring pushes,
     * whose own time says little after a pause */
    long long deadline = r->element[3]->integer;
    rjq__server_time_sample(c, deadline - w->lease_ms);
    /* The token's record: the claim entered its jobs in the held index (a
     * recovering one its member even with none), the worker forgets it
     * once none of them is left with it. Out of memory: the jobs go back. */
    rjq__tok *tok =
        got || x->recovers ? rjq__tok_new(w->held, r->element[2]->str, r->element[2]->len) : NULL;
    rjq__pushed *d = got ? malloc(got * sizeof *d) : NULL;
    rjq_job **j = got ? malloc(got * sizeof *j) : NULL;
    rjq__pushed *f = got ? malloc(got * sizeof *f) : NULL; /* payloads to read */
    rjq__claim_at at = {0};
    *made = 0;
    for (size_t i = 0; d && j && f && i < got; i++) {
        int rc = rjq__claim_reply_job(r, &at, &d[nback]);
        if (rc == 1 && w->state == W_ACTIVE && tok) {
            f[nfetch++] = d[nback];
            continue;
        }
        /* a stopping worker starts nothing more: they go back */
        rjq_job *job = rc == 0 && w->state == W_ACTIVE ? rjq__w_new_job(w, &d[nback], tok) : NULL;
        if (job) j[(*made)++] = job;
        else nback++;
    }
    /* (not sent, out of memory: they go back) */
    if (nfetch && rjq__w_fetch(w, tok, f, nfetch) != 0) rjq__push_release(w->q, NULL, f, nfetch);
    free(f);
    if (nback) rjq__push_release(w->q, NULL, d, nback);
    if (tok) rjq__tok_drop(tok); /* the arrival */
    free(d);
    *jobs = j;
    rjq__w_check(w);
}

/* Mode change: a filled claim means a backlog (HUNGRY: claim again at
 * once); a short one, nothing more ready (IDLE: wait, for the next
 * delayed job in next_due ms at the latest). */
static void claim_mode(rjq_client *c, rjq_worker *w, int filled, long long next_due) {
    if (w->state != W_ACTIVE) return;
    if (filled) {
        rjq__w_set_mode(w, CL_HUNGRY);
        rjq__timer_stop(c, &w->poll_timer);
    } else {
        rjq__w_set_mode(w, CL_IDLE);
        go_idle(w, next_due);
    }
}

/* A claim's reply (priv: its claim_ctx). The claim leaves the worker's
 * flight (claim_unlink); unless the client is closing, the reply is
 * checked and the registration told (claim_parse). A failed claim makes
 * the loop idle and retry (claim_failed). Otherwise its jobs are admitted
 * (claim_admit: run, fetched or handed back), the loop's mode follows what
 * the claim found (claim_mode), the jobs go to the handler (whose code may
 * stop the worker or free the client), and the loop claims again on the
 * tick if it is hungry, heard a doorbell, or its registration is out of
 * step; a group's later members get their turn. Then a stopped worker
 * may end here (freed), and a hungry one sends what its jobs freed at
 * once (below). */
static void on_claimed(rjq_client *c, int status, redisReply *r, void *priv) {
    rjq_worker *w = ((claim_ctx *)priv)->w;
    rjq__w_check(w); /* (the claim still among its claims) */
    claim_ctx x = claim_unlink(w, priv);
    rjq_queue *q = w->q;
    if (rjq__closing(c)) return;
    status = claim_parse(c, w, &x, status, r);
    if (status != RJQ_OK) {
        claim_failed(c, w, status);
        rjq__w_check_stopped(w);
        return;
    }
    size_t got = rjq__claim_reply_count(r), made = 0;
    rjq_job **jobs = NULL;
    claim_admit(c, w, &x, r, got, &jobs, &made);
    claim_mode(c, w, (int)got == x.asked, r->element[0]->integer);
    rjq__w_run_jobs(w, jobs, made, x.until);
    free(jobs);
    int hungry = w->state == W_ACTIVE && w->mode == CL_HUNGRY;
    if (rjq__w_rung(w) || w->mode == CL_HUNGRY || rjq__reg_out_of_step(w->reg))
        rjq__w_want_claim(w);
    if (w->g && w->state == W_ACTIVE) { /* later members may claim now */
        rjq__w_group_sched(w->g, GE_KICK);
        rjq__queue_kick(q);
    }
    rjq__w_check_stopped(w); /* (may free w) */
    /* A backlog: what these jobs freed (the completions of those that
     * finished at once, and the claim for their slots) goes out now, not
     * at the end of the loop turn. With the other half's claim reply in
     * the same read, both halves would otherwise reach Redis together and
     * come back together, and Redis would wait while the worker runs them
     * all (lockstep: Redis 80% busy in the drain of tiny jobs, 100% with
     * this). */
    if (hungry && rjq__accepting(c)) { /* (not once a handler freed the client) */
        rjq__queue_tick_now(q);
        if (rjq__accepting(c)) rjq__send_now(c);
    }
}

/* Send one claim for up to `want` jobs; reset: its unfilled slots replace
 * the registration (under a new epoch). It is re-sent after a reconnect:
 * its token makes it idempotent (claim.lua). The claim's context carries
 * what its reply needs: the jobs asked for, the registration's epoch,
 * whether it recovers jobs pushed unheard (then it lists every token the
 * worker holds, so claim.lua hands back only the others), whether it asks
 * for ids only (payloads read after: worker_fetch.c), and a fresh token
 * under the worker's held prefix. Once sent it joins the worker's claims
 * in flight (counted in claiming, asked, ids_only: rjq__w_check); a claim
 * that could not be sent changes nothing. */
int rjq__w_send_claim(rjq_worker *w, int want, int extra, int reset) {
    rjq_client *c = client_of(w);
    rjq_queue *q = w->q;
    /* (want 0: a stopping worker's last recovery, see rjq__w_check_stopped()) */
    RJQ_ASSERT(want > 0 ? w->state == W_ACTIVE : reset && w->state == W_FINAL);
    RJQ_ASSERT(w->claiming < CLAIMS_IN_FLIGHT);
    claim_ctx *ctx = malloc(sizeof *ctx);
    if (ctx == NULL) return RJQ_ENOMEM;
    ctx->w = w;
    ctx->asked = want;
    ctx->extra = extra;
    ctx->epoch = rjq__reg_claim_epoch(w->reg, reset);
    ctx->recovers = rjq__reg_claim_recovers(w->reg, reset);
    ctx->ids_only = w->payload_avg >= CLAIM_INLINE_MAX || w->ids_only > 0;
    char *token = ctx->token, word[12];
    rjq__random_word(c, word, 10); /* ~59 bits: new for every call of this worker */
    snprintf(token, sizeof ctx->token, "%s%s", rjq__held_prefix(w->held), word);
    ctx->until = 0;
    rjq__argv a;
    rjq__argv_init(&a);
    rjq__argv_script_keys(&a, q, RJQ__S_CLAIM);
    rjq__argv_key(&a, q, RJQ__K_JOB);
    rjq__argv_ll(&a, want);
    rjq__argv_ll(&a, w->lease_ms);
    rjq__argv_str(&a, token);
    rjq__argv_key(&a, q, RJQ__K_WAKE);
    rjq__argv_str(&a, rjq__reg_field(w->reg));
    rjq__argv_ll(&a, ctx->epoch);
    rjq__argv_str(&a, reset ? "1" : "0");
    rjq__argv_str(&a, ctx->recovers ? "1" : "0");
    rjq__argv_str(&a, ctx->ids_only ? "2" : "3"); /* (the jobs in runs) */
    rjq__argv_ll(&a, extra);
    /* what it knows of: the tokens it holds jobs of, or has yet to forget */
    for (const rjq__tok *t = ctx->recovers ? rjq__held_first(w->held) : NULL; t;
         t = rjq__held_next(t))
        rjq__argv_str(&a, rjq__tok_str(t));
    int rc = a.oom ? RJQ_ENOMEM
                   : rjq__script(c, RJQ__S_CLAIM, RJQ__REQ_RETRY, on_claimed, ctx, a.n, a.v,
                                 a.len);
    rjq__argv_free(&a);
    if (rc != RJQ_OK) {
        free(ctx);
        return rc;
    }
    rjq__reg_claim_sent(w->reg, ctx->epoch, reset, ctx->recovers);
    RJQ__W_LIST_PUSH(&w->claims, ctx);
    w->claiming++;
    w->asked += want;
    w->registering += extra;
    w->ids_only += ctx->ids_only;
    rjq__w_check(w);
    return RJQ_OK;
}

/* (w->recover) A stopping worker's last recovering claim: it takes no
 * job, and replaces the registration (see rjq__w_check_stopped). */
int rjq__w_recover(rjq_worker *w) {
    return rjq__w_send_claim(w, 0, 0, 1);
}

/* Jobs per claim: all of the capacity when idle, half while hungry. */
int rjq__w_claim_chunk(const rjq_worker *w) {
    int chunk = w->mode == CL_HUNGRY && w->concurrency >= 4
                    ? w->concurrency / 2 + w->concurrency % 2
                    : w->concurrency;
    return chunk > CLAIM_MAX ? CLAIM_MAX : chunk;
}

/* Claim up to the free capacity (at most cap jobs): one claim when idle,
 * two halves in flight while hungry. A claim that replaces the
 * registration waits for those in flight and takes the offered slots too. */
void rjq__w_claim_up_to(rjq_worker *w, int cap) {
    rjq_client *c = client_of(w);
    if (w->refused_until && rjq__now_ms() < w->refused_until) return; /* (its timer claims) */
    int limit = w->mode == CL_HUNGRY ? CLAIMS_IN_FLIGHT : 1;
    int chunk = rjq__w_claim_chunk(w);
    /* Woken for work that was not pushed: take the offered slots back. */
    if (rjq__w_rung(w) && rjq__reg_offered(w->reg) != 0) rjq__reg_resync(w->reg);
    while (w->state == W_ACTIVE && !rjq__closing(c) && w->claiming < limit && cap > 0) {
        int reset = rjq__reg_out_of_step(w->reg);
        if (reset && w->claiming) return; /* on_claimed comes back here */
        int own = rjq__w_own_free(w) + (reset ? rjq__reg_offered(w->reg) : 0);
        int slots = own;
        if (w->g && rjq__w_group_free(w->g) < slots) slots = rjq__w_group_free(w->g);
        if (slots > cap) slots = cap;
        if (slots <= 0) return;
        int want = slots < chunk ? slots : chunk;
        /* A shards group's member whose claim the group's budget (or the
         * scheduler's turn) made smaller than its own free slots: should
         * it come back short, it registers them all, as its first claim
         * did, not only those it asked for. Registrations are outside
         * the budget (a push beyond it goes back, and the member claims);
         * registering only the asked ones left a member with 1 of its 8
         * slots registered and 7 free but not asking, so push delivery to
         * its shard ran one job at a time until its next claim. Not a
         * claim cut to a chunk (hungry: the other half follows it). */
        int extra = w->g && w->g->shards && want == slots && own <= CLAIM_MAX ? own - want : 0;
        if (rjq__w_send_claim(w, want, extra, reset) != RJQ_OK) {
            retry_later(w);
            return;
        }
        cap -= want;
        /* Only a claim that went out after the doorbell answers it: a
         * doorbell heard while nothing could be sent stays pending. */
        rjq__w_wake(w, WE_SENT);
    }
}
