/*
 * A request's states and the client's lists that hold them (the diagram
 * is in request_private.h): rjq__req_move is the one function that
 * changes a request's state, and it asserts each transition and what the
 * new state says of the request. Also a request's making, its delivery
 * (its function called exactly once) and its freeing.
 */
#include <stdlib.h>
#include <string.h>

#include "request_private.h"

void rjq__reqlist_push(rjq__reqlist *l, rjq__req *r) {
    RJQ_ASSERT(r->prev == NULL && r->next == NULL && l->head != r); /* in no list */
    r->next = NULL;
    r->prev = l->tail;
    if (l->tail) l->tail->next = r;
    else l->head = r;
    l->tail = r;
    l->n++;
}

static void list_remove(rjq__reqlist *l, rjq__req *r) {
    /* r is in l: its neighbours (or l's ends) point at it */
    RJQ_ASSERT(l->n > 0);
    RJQ_ASSERT(r->prev ? r->prev->next == r : l->head == r);
    RJQ_ASSERT(r->next ? r->next->prev == r : l->tail == r);
    if (r->prev) r->prev->next = r->next;
    else l->head = r->next;
    if (r->next) r->next->prev = r->prev;
    else l->tail = r->prev;
    r->prev = r->next = NULL;
    l->n--;
}

/* Into l by its number (in order: at the tail). */
void rjq__reqlist_insert(rjq__reqlist *l, rjq__req *r) {
    RJQ_ASSERT(r->prev == NULL && r->next == NULL && l->head != r); /* in no list */
    rjq__req *at = l->tail;
    while (at && at->order > r->order) at = at->prev;
    r->prev = at;
    r->next = at ? at->next : l->head;
    if (r->next) r->next->prev = r;
    else l->tail = r;
    if (at) at->next = r;
    else l->head = r;
    l->n++;
    /* numbers are unique: strictly increasing along the list */
    RJQ_ASSERT(r->prev == NULL || r->prev->order < r->order);
    RJQ_ASSERT(r->next == NULL || r->next->order > r->order);
}

rjq__req *rjq__reqlist_pop(rjq__reqlist *l) {
    rjq__req *r = l->head;
    if (r) list_remove(l, r);
    return r;
}

/* ---- request states ------------------------------------------------------- */

/* The client's list that holds requests in state s (NULL: none does). */
static rjq__reqlist *state_list(rjq_client *c, req_state s) {
    switch (s) {
    case REQ_BACKLOG:
        return &c->backlog;
    case REQ_ROOM:
        return &c->room;
    case REQ_LATER:
        return &c->later;
    case REQ_INFLIGHT:
    case REQ_HELD:
        return &c->inflight;
    default:
        return NULL;
    }
}

/* The transitions of the diagram above. */
static int req_legal(req_state from, req_state to) {
    switch (from) {
    case REQ_NEW:
        return to == REQ_BACKLOG || to == REQ_ROOM || to == REQ_LATER || to == REQ_INFLIGHT ||
               to == REQ_HELD || to == REQ_DONE;
    case REQ_BACKLOG:
    case REQ_ROOM:
    case REQ_LATER:
        return to == REQ_NEW;
    case REQ_INFLIGHT:
    case REQ_HELD:
        return to == REQ_NEW || to == REQ_ORPHANED;
    default: /* ORPHANED and DONE end in req_free */
        return 0;
    }
}

/* What each state says of the request. */
static void req_check(const rjq__req *r) {
    switch (r->state) {
    case REQ_BACKLOG:
    case REQ_ROOM:
    case REQ_LATER: /* not sent: it belongs to no WAIT, holds no reply */
        RJQ_ASSERT(r->c != NULL && r->wait == NULL && r->held == NULL);
        break;
    case REQ_INFLIGHT: /* its reply has not come */
        RJQ_ASSERT(r->c != NULL && r->held == NULL);
        break;
    case REQ_HELD: /* done on the master; its WAIT says the rest */
        RJQ_ASSERT(r->c != NULL && r->held != NULL && r->wait != NULL);
        break;
    case REQ_ORPHANED:
        RJQ_ASSERT(r->c == NULL && r->prev == NULL && r->next == NULL);
        break;
    case REQ_NEW:
    case REQ_DONE:
        RJQ_ASSERT(r->c != NULL);
        break;
    }
}

/* Move r to state `to`: out of its state's list, into the new one's (the
 * inflight list in the order sent, the waiting ones in the order made).
 * ORPHANED lets go of the client. */
void rjq__req_move(rjq_client *c, rjq__req *r, req_state to) {
    RJQ_ASSERT(r->c == c);
    RJQ_ASSERT(req_legal(r->state, to));
    rjq__reqlist *from = state_list(c, r->state), *into = state_list(c, to);
    if (from) list_remove(from, r);
    r->state = to;
    if (to == REQ_ORPHANED) r->c = NULL;
    if (into == &c->inflight) rjq__reqlist_push(into, r);
    else if (into) rjq__reqlist_insert(into, r);
    req_check(r);
}

/* The first request of state s's list, moved to NEW (NULL: none). */
rjq__req *rjq__req_pop(rjq_client *c, req_state s) {
    rjq__req *r = state_list(c, s)->head;
    if (r) rjq__req_move(c, r, REQ_NEW);
    return r;
}

/* Every request of state s's list, moved to NEW, in their order, in a
 * list of the caller's: requests made or re-queued meanwhile (by what the
 * caller does with these) go to the client's list, behind. */
rjq__reqlist rjq__req_take_all(rjq_client *c, req_state s) {
    rjq__reqlist all = {0};
    rjq__req *r;
    while ((r = rjq__req_pop(c, s)) != NULL) rjq__reqlist_push(&all, r);
    return all;
}

void rjq__reply_free(redisReply *r) {
    if (r == NULL) return;
    for (size_t i = 0; i < r->elements; i++) rjq__reply_free(r->element[i]);
    free(r->element);
    free(r->str);
    free(r);
}

/* Leave its WAIT's list (a WAIT no longer waited for by it). */
void rjq__req_leave_wait(rjq__req *r) {
    /* a member's place in its WAIT's list holds it until it leaves */
    RJQ_ASSERT(r->wait == NULL || (r->wait_idx < r->wait->n && r->wait->m[r->wait_idx] == r));
    if (r->wait) r->wait->m[r->wait_idx] = NULL;
    r->wait = NULL;
}

/* Free r: never sent (NEW), delivered (DONE), or let go by its client
 * (ORPHANED); in no list. */
void rjq__req_free(rjq__req *r) {
    RJQ_ASSERT(r->state == REQ_NEW || r->state == REQ_DONE || r->state == REQ_ORPHANED);
    RJQ_ASSERT(r->prev == NULL && r->next == NULL);
    rjq__req_leave_wait(r);
    rjq__reply_free(r->held);
    for (int i = 0; i < r->nparts; i++) free(r->parts[i].p);
    free(r->parts);
    free(r->part_end);
    free(r->part_err);
    rjq__req_free_cmd(r);
    free(r);
}

void rjq__req_free_cmd(rjq__req *r) {
    if (r->own_cmd) free(r->block ? r->block : r->cmd);
    else redisFreeCommand(r->cmd);
    r->cmd = r->block = NULL;
    r->own_cmd = 0;
}

/* Call the request's function once and free it. */
void rjq__req_deliver(rjq__req *r, rjq_client *c, int status, redisReply *reply) {
    rjq__req_move(c, r, REQ_DONE);
    r->fn(c, status, reply, r->priv);
    rjq__req_free(r);
}

/* The same for a durable write fewer replicas than asked confirmed. */
void rjq__req_deliver_short(rjq__req *r, rjq_client *c, redisReply *reply) {
    rjq__req_move(c, r, REQ_DONE);
    c->write_short = 1;
    r->fn(c, RJQ_OK, reply, r->priv);
    c->write_short = 0;
    rjq__req_free(r);
}

int rjq__write_short(const rjq_client *c) {
    return c->write_short;
}

/* A request for the formatted command cmd (not sent yet), or NULL. */
rjq__req *rjq__req_new(rjq_client *c, int flags, rjq__reply_fn *fn, void *priv, char *cmd,
                       size_t len) {
    rjq__req *r = calloc(1, sizeof *r);
    if (r == NULL) return NULL;
    r->c = c;
    r->fn = fn;
    r->priv = priv;
    r->cmd = cmd;
    r->len = len;
    r->script = -1;
    r->slot = -1;
    r->flags = flags;
    r->made_ms = rjq__now_ms();
    r->order = ++c->req_order;
    r->state = REQ_NEW;
    return r;
}

size_t rjq__requests_pending(const rjq_client *c) {
    return c->inflight.n + c->backlog.n + c->room.n + c->later.n;
}

uint64_t rjq__requests_oldest_sent_on(const rjq_client *c, const rjq__conn *on) {
    /* (in flight in the order sent: the first on `on` is its oldest) */
    for (const rjq__req *r = c->inflight.head; r; r = r->next)
        if (r->link == on) return r->sent_ms;
    return 0;
}


