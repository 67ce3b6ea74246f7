/*
 * The held index, the client's side (held.h): tokens a worker holds jobs
 * of, and the queue's tokens to forget.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "held.h"

#define FORGET_BATCH 1000 /* tokens per forget script call */

struct rjq__tok {
    rjq__holder *h;           /* NULL: a token of no worker here */
    rjq__tok *prev, *next;    /* in h's records */
    rjq__tok *fnext;          /* in the queue's forget list */
    int refs;                 /* the worker's jobs of it, plus an arrival */
    int member;               /* has a member in the index (a push's has none) */
    size_t len;
    char str[];
};

struct rjq__holder {
    rjq_queue *q;
    rjq__tok *toks;
    char prefix[64];
};

/* The queue's tokens to forget, oldest first; n: those with a member
 * (a pushed token has none: it goes from the list when a member token
 * queued at its place would be sent, so its record lives as long). */
typedef struct part {
    rjq__tok *head, **tail;
    size_t n;
} part;

static void unlink_tok(rjq__tok *t) {
    if (t->h == NULL) return;
    if (t->prev) t->prev->next = t->next;
    else t->h->toks = t->next;
    if (t->next) t->next->prev = t->prev;
    t->h = NULL;
}

/* Pop the oldest token to forget (the caller frees it). */
static rjq__tok *pop(part *p) {
    rjq__tok *t = p->head;
    if (t == NULL) return NULL;
    if ((p->head = t->fnext) == NULL) p->tail = &p->head;
    if (t->member) {
        RJQ_ASSERT(p->n > 0);
        p->n--;
    }
    unlink_tok(t);
    return t;
}

static void on_forgotten(rjq_client *c, int status, redisReply *r, void *priv) {
    (void)r, (void)priv;
    rjq__background_failed(c, status, "forget");
}

/* Forgets no completion batch took go out on their own (after the
 * completions: the tick runs this part after theirs). */
static void part_tick(rjq_queue *q, void *state) {
    part *p = state;
    while (p->n > 0 && !rjq__closing(rjq_queue_get_client(q))) {
        rjq__argv a;
        rjq__argv_init(&a);
        rjq__argv_script_keys(&a, q, RJQ__S_FORGET);
        rjq__held_take(q, &a, FORGET_BATCH);
        /* Idempotent, so re-sent across reconnects. Failing that, the
         * members stay until the client is gone (the orphan sweep). */
        if (!a.oom)
            rjq__script(rjq_queue_get_client(q), RJQ__S_FORGET, RJQ__REQ_RETRY, on_forgotten, NULL,
                        a.n, a.v, a.len);
        rjq__argv_free(&a);
    }
    /* pushed tokens left (nothing to send: their completions went before) */
    rjq__tok *t;
    while (p->n == 0 && (t = pop(p)) != NULL) free(t);
}

static void part_close(rjq_queue *q, void *state) {
    part *p = state;
    rjq__tok *t;
    (void)q;
    while ((t = pop(p)) != NULL) free(t);
    free(p);
}

static const rjq__part_ops part_ops = {part_tick, NULL, NULL, part_close, NULL};

static part *part_of(rjq_queue *q) {
    part *p = rjq__queue_part(q, RJQ__PART_HELD);
    if (p == NULL && (p = calloc(1, sizeof *p)) != NULL) {
        p->tail = &p->head;
        rjq__queue_set_part(q, RJQ__PART_HELD, &part_ops, p);
    }
    return p;
}

/* ---- a worker's records ------------------------------------------------- */

rjq__holder *rjq__held_join(rjq_queue *q, unsigned wid) {
    rjq__holder *h = part_of(q) ? calloc(1, sizeof *h) : NULL;
    if (h == NULL) return NULL;
    h->q = q;
    snprintf(h->prefix, sizeof h->prefix, "%s.%u.", rjq__client_id(rjq_queue_get_client(q)), wid);
    return h;
}

void rjq__held_leave(rjq__holder *h) {
    if (h == NULL) return;
    while (h->toks) {
        RJQ_ASSERT(h->toks->refs == 0); /* each is queued to forget */
        unlink_tok(h->toks);
    }
    free(h);
}

const char *rjq__held_prefix(const rjq__holder *h) {
    return h->prefix;
}

static rjq__tok *make(rjq__holder *h, const char *tok, size_t len) {
    rjq__tok *t = malloc(sizeof *t + len + 1);
    if (t == NULL) return NULL;
    memcpy(t->str, tok, len);
    t->str[len] = '\0';
    t->len = len;
    t->refs = 1;
    t->member = 1;
    t->fnext = NULL;
    t->prev = NULL;
    t->h = h;
    t->next = h ? h->toks : NULL;
    if (h) {
        if (h->toks) h->toks->prev = t;
        h->toks = t;
    }
    return t;
}

rjq__tok *rjq__tok_new(rjq__holder *h, const char *tok, size_t len) {
    return make(h, tok, len);
}

void rjq__tok_pushed(rjq__tok *t) {
    t->member = 0;
}

void rjq__tok_hold(rjq__tok *t) {
    RJQ_ASSERT(t->refs > 0);
    t->refs++;
}

static void queue_forget(rjq_queue *q, rjq__tok *t) {
    part *p = rjq__queue_part(q, RJQ__PART_HELD);
    *p->tail = t;
    p->tail = &t->fnext;
    p->n += t->member;
    rjq__queue_kick(q);
}

void rjq__tok_drop(rjq__tok *t) {
    RJQ_ASSERT(t->refs > 0);
    if (--t->refs > 0) return;
    RJQ_ASSERT(t->h != NULL);
    queue_forget(t->h->q, t);
}

const char *rjq__tok_str(const rjq__tok *t) {
    return t->str;
}

const rjq__tok *rjq__held_first(const rjq__holder *h) {
    return h->toks;
}

const rjq__tok *rjq__held_next(const rjq__tok *t) {
    return t->next;
}

/* ---- sending them ------------------------------------------------------- */

size_t rjq__held_pending(const rjq_queue *q) {
    const part *p = rjq__queue_part(q, RJQ__PART_HELD);
    return p ? p->n : 0;
}

size_t rjq__held_take(rjq_queue *q, rjq__argv *a, size_t max) {
    part *p = rjq__queue_part(q, RJQ__PART_HELD);
    size_t n = 0;
    rjq__tok *t;
    while (n < max && (t = pop(p)) != NULL) {
        if (t->member) {
            rjq__argv_copy(a, t->str); /* tokens are short */
            n++;
        }
        free(t);
    }
    return n;
}
