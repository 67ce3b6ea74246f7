/*
 * Durable writes (wait_replicas > 0): a write with RJQ__REQ_DURABLE is
 * confirmed by a WAIT for that many replicas before its callback runs.
 * One WAIT confirms every durable write sent before it on the connection
 * (see wait_slot in request_private.h): the writes of a burst join the
 * open slot and one WAIT goes out for all of them from the wait timer; a
 * write whose reply came is HELD (a copy of its reply) until the WAIT
 * answers; then it is delivered confirmed, or unconfirmed (rjq__write_short),
 * or, its connection lost, re-sent when it may be.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "request_private.h"

/* A deep copy of a RESP2 reply (hiredis frees its own when the callback
 * returns), freed by rjq__reply_free. NULL: out of memory. */
static redisReply *reply_copy(const redisReply *r) {
    redisReply *c = calloc(1, sizeof *c);
    if (c == NULL) return NULL;
    c->type = r->type;
    c->integer = r->integer;
    if (r->str) {
        c->len = r->len;
        if ((c->str = malloc(r->len + 1)) == NULL) {
            free(c);
            return NULL;
        }
        memcpy(c->str, r->str, r->len + 1);
    }
    if (r->elements) {
        if ((c->element = calloc(r->elements, sizeof *c->element)) == NULL) {
            free(c->str);
            free(c);
            return NULL;
        }
        for (c->elements = 0; c->elements < r->elements; c->elements++) {
            if ((c->element[c->elements] = reply_copy(r->element[c->elements])) == NULL) {
                rjq__reply_free(c);
                return NULL;
            }
        }
    }
    return c;
}

/* A durable write just sent: it joins the open WAIT (made, and the wait
 * timer armed, by the first of a burst). Out of memory: it joins none,
 * and its reply is reported unconfirmed. */
void rjq__durable_join(rjq_client *c, rjq__req *r) {
    /* just sent; a request re-sent left its old WAIT when it was lost or refused */
    RJQ_ASSERT(r->state == REQ_INFLIGHT && r->wait == NULL && r->held == NULL);
    /* A WAIT confirms the writes of its own connection only: on a cluster,
     * a burst over several masters joins one open WAIT per master. */
    wait_slot *w = c->open_wait;
    while (w && w->link != r->link) w = w->open_next;
    if (w == NULL) {
        if ((w = calloc(1, sizeof *w)) == NULL) return;
        w->c = c;
        w->link = r->link;
        w->open_next = c->open_wait;
        c->open_wait = w;
        rjq__timer_start(c, &c->wait_timer, 0);
    }
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        rjq__req **m = realloc(w->m, cap * sizeof *m);
        if (m == NULL) return;
        w->m = m;
        w->cap = cap;
    }
    r->wait = w;
    r->wait_idx = w->n;
    w->m[w->n++] = r;
}

static void slot_free(wait_slot *w) {
    free(w->m);
    free(w);
}

/* (see request_private.h) */
int rjq__durable_hold(rjq_client *c, rjq__req *r, const redisReply *rep) {
    RJQ_ASSERT(r->state == REQ_NEW && r->wait != NULL && r->held == NULL);
    if ((r->held = reply_copy(rep)) == NULL) return 0;
    rjq__req_move(c, r, REQ_HELD); /* done on the master: its WAIT says the rest */
    return 1;
}

/* End the members of a WAIT: rep is its reply (NULL: lost with the
 * connection, or never sent). A held write is done on the master: it is
 * confirmed (enough replicas), or reported unconfirmed, or, lost with the
 * connection, re-sent when it may be (it finds its write done). A member
 * still waiting for its own reply is only let go (that reply, when it
 * comes, is reported unconfirmed). */
static void end_members(rjq_client *c, wait_slot *w, redisReply *rep) {
    int confirmed = rep && rep->type == REDIS_REPLY_INTEGER && rep->integer >= c->wait_replicas;
    if (rep && rep->type == REDIS_REPLY_ERROR) rjq__errmsg(c, "WAIT: %s", rep->str);
    else if (rep && !confirmed)
        rjq__errmsg(c, "WAIT: %lld of %d replicas confirmed the write within %ld ms",
                    rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1LL, c->wait_replicas,
                    c->wait_timeout_ms);
    for (size_t i = 0; i < w->n; i++) {
        rjq__req *r = w->m[i];
        if (r == NULL) continue;
        /* a member is sent: its reply awaited, or held for this WAIT */
        RJQ_ASSERT(r->state == REQ_INFLIGHT || r->state == REQ_HELD);
        RJQ_ASSERT(r->wait == w && r->wait_idx == i);
        RJQ_ASSERT((r->state == REQ_HELD) == (r->held != NULL));
        rjq__req_leave_wait(r);
        if (r->held == NULL) continue;
        rjq__req_move(c, r, REQ_NEW);
        if (rep == NULL && (r->flags & RJQ__REQ_RETRY)) {
            rjq__reply_free(r->held);
            r->held = NULL;
            rjq__req_move(c, r, REQ_BACKLOG);
        } else if (confirmed) {
            rjq__req_deliver(r, c, RJQ_OK, r->held);
        } else {
            rjq__req_deliver_short(r, c, r->held);
        }
    }
}

static void on_wait_reply(redisAsyncContext *ac, void *reply, void *priv) {
    wait_slot *w = priv;
    rjq_client *c = w->c;
    redisReply *rep = reply;
    if (c == NULL) { /* orphaned by client destruction: its held writes are ours to free */
        for (size_t i = 0; i < w->n; i++) {
            rjq__req *r = w->m[i];
            if (r == NULL) continue;
            RJQ_ASSERT(r->state == REQ_ORPHANED);
            rjq__req_leave_wait(r);
            if (r->held) rjq__req_free(r); /* else its own reply's callback frees it */
        }
        slot_free(w);
        return;
    }
    rjq__enter(c);
    RJQ_ASSERT(w->prev ? w->prev->next == w : c->sent_waits == w); /* in the sent list */
    RJQ_ASSERT(w->next == NULL || w->next->prev == w);
    if (w->prev) w->prev->next = w->next;
    else c->sent_waits = w->next;
    if (w->next) w->next->prev = w->prev;
    if (rep == NULL) rjq__conn_lost(w->link, ac->c.errstr[0] ? ac->c.errstr : "connection lost");
    else w->link->last_io_ms = rjq__now_ms();
    end_members(c, w, rep);
    slot_free(w);
    if (c->open_wait) rjq__timer_start(c, &c->wait_timer, 0); /* the writes that gathered */
    rjq__leave(c);
}

/* One WAIT sent on its connection: 1 while it is not answered. */
static int waiting_on(const rjq_client *c, const rjq__conn *link) {
    for (const wait_slot *w = c->sent_waits; w; w = w->next)
        if (w->link == link) return 1;
    return 0;
}

static void send_wait(rjq_client *c, wait_slot *w);

/* The open WAITs go out (the burst of durable writes is over), one per
 * connection: one WAIT at a time on each, while one holds the connection,
 * the writes behind it gather for the next (its reply sends it), so a
 * write waits at most two WAITs (hence wait_timeout_ms <
 * command_timeout_ms/2). On a cluster the masters' WAITs run side by side. */
static void on_wait_timer(rjq__timer *t) {
    rjq_client *c = t->owner;
    for (wait_slot **pp = &c->open_wait; *pp;) {
        wait_slot *w = *pp;
        if (waiting_on(c, w->link)) {
            pp = &w->open_next;
            continue;
        }
        *pp = w->open_next;
        w->open_next = NULL;
        send_wait(c, w);
    }
}

static void send_wait(rjq_client *c, wait_slot *w) {
    size_t live = 0;
    for (size_t i = 0; i < w->n; i++) live += w->m[i] != NULL;
    char n[24], ms[24];
    snprintf(n, sizeof n, "%d", c->wait_replicas);
    snprintf(ms, sizeof ms, "%ld", c->wait_timeout_ms);
    const char *argv[3] = {"WAIT", n, ms};
    if (live && w->link->ac && rjq__conn_ready(w->link) &&
        redisAsyncCommandArgv(w->link->ac, on_wait_reply, w, 3, argv, NULL) == REDIS_OK) {
        w->prev = NULL;
        w->next = c->sent_waits;
        if (w->next) w->next->prev = w;
        c->sent_waits = w;
        return;
    }
    end_members(c, w, NULL); /* no connection to ask on (its writes were lost with it) */
    slot_free(w);
}

/* Client destruction (see request_private.h): called once every request
 * is ended or orphaned, so the open WAIT's members are all ORPHANED. */
void rjq__durable_cancel(rjq_client *c) {
    rjq__timer_teardown(c, &c->wait_timer);
    /* WAITs sent: orphaned (their callbacks free them and their held
     * writes); the open one: never sent, its held writes freed here */
    for (wait_slot *w = c->sent_waits; w; w = w->next) w->c = NULL;
    c->sent_waits = NULL;
    while (c->open_wait) {
        wait_slot *open = c->open_wait;
        c->open_wait = open->open_next;
        for (size_t i = 0; i < open->n; i++) {
            rjq__req *m = open->m[i];
            if (m == NULL) continue;
            RJQ_ASSERT(m->state == REQ_ORPHANED); /* (a member is sent: it was in flight) */
            rjq__req_leave_wait(m);
            if (m->held) rjq__req_free(m); /* answered: no callback of its own will come */
        }
        slot_free(open);
    }
}

/* The wait timer (it sends the open WAIT). */
int rjq__durable_init(rjq_client *c) {
    return rjq__timer_setup(c, &c->wait_timer, on_wait_timer, c);
}
