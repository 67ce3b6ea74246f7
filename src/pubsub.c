/*
 * Channel subscriptions on the subscriber connection (RESP2 pub/sub).
 *
 * Listeners register per channel name; one SUBSCRIBE covers all listeners
 * of a name. rjq never sends UNSUBSCRIBE: on hiredis 0.14.1 an UNSUBSCRIBE
 * racing other traffic can abort the process (hiredis #1039/#968), so a
 * channel without listeners simply stays subscribed, and its messages are
 * dropped, until the client is freed.
 *
 * This file owns the subscriber connection: every new context subscribes
 * every channel again, and a lost one marks them unconfirmed. A SUBSCRIBE
 * that cannot be queued (out of memory) fails rjq__subscribe(), or, on a
 * new context, drops it so the whole set is tried again.
 */
#include <stdlib.h>
#include <string.h>

#include "core_private.h"

struct rjq__channel {
    char *name;
    rjq__message_fn *fn;      /* messages, and NULL for a confirmation */
    void *arg;
    int confirmed;            /* SUBSCRIBE confirmed on the current conn */
    struct rjq__channel *next;
};

static void on_message(redisAsyncContext *ac, void *reply, void *priv);

static int has_listener(rjq_client *c, const char *name, const rjq__channel *except) {
    for (rjq__channel *ch = c->channels; ch; ch = ch->next)
        if (ch != except && strcmp(ch->name, name) == 0) return 1;
    return 0;
}

/* RJQ_OK, or RJQ_ENOMEM when hiredis could not queue it. */
static int send_subscribe(rjq_client *c, const char *name) {
    if (c->sub.ac == NULL) return RJQ_OK; /* resubscribed on connect */
    const char *argv[2] = {"SUBSCRIBE", name};
    return redisAsyncCommandArgv(c->sub.ac, on_message, NULL, 2, argv, NULL) == REDIS_OK
               ? RJQ_OK
               : RJQ_ENOMEM;
}

static void channel_free(rjq__channel *ch) {
    free(ch->name);
    free(ch);
}

int rjq__subscribe(rjq_client *c, const char *name, rjq__message_fn *fn, void *arg) {
    rjq__channel *ch = calloc(1, sizeof *ch);
    if (ch == NULL || (ch->name = strdup(name)) == NULL) {
        free(ch);
        return RJQ_ENOMEM;
    }
    ch->fn = fn;
    ch->arg = arg;
    if (!has_listener(c, name, NULL) && send_subscribe(c, name) != RJQ_OK) {
        channel_free(ch);
        return RJQ_ENOMEM;
    }
    ch->confirmed = rjq__channel_confirmed(c, name);
    ch->next = c->channels;
    c->channels = ch;
    return RJQ_OK;
}

void rjq__unsubscribe(rjq_client *c, const char *name, void *arg) {
    for (rjq__channel **p = &c->channels; *p; p = &(*p)->next) {
        rjq__channel *ch = *p;
        if (ch->arg == arg && strcmp(ch->name, name) == 0) {
            *p = ch->next;
            channel_free(ch);
            return;
        }
    }
}

/* 1 when a listener of ch's name comes before ch in the list. */
static int has_listener_before(rjq_client *c, const rjq__channel *ch) {
    for (rjq__channel *o = c->channels; o != ch; o = o->next)
        if (strcmp(o->name, ch->name) == 0) return 1;
    return 0;
}

/* A new subscriber context: subscribe every channel again. */
static int sub_setup(rjq__conn *conn) {
    rjq_client *c = conn->c;
    for (rjq__channel *ch = c->channels; ch; ch = ch->next) {
        ch->confirmed = 0;
        if (!has_listener_before(c, ch) && send_subscribe(c, ch->name) != RJQ_OK)
            return RJQ_ENOMEM;
    }
    return RJQ_OK;
}

static void sub_ready(rjq__conn *conn) {
    (void)conn;
}

static void sub_down(rjq__conn *conn, int fail) {
    (void)fail;
    for (rjq__channel *ch = conn->c->channels; ch; ch = ch->next) ch->confirmed = 0;
}

static const rjq__conn_hooks sub_hooks = {sub_setup, sub_ready, sub_down};

int rjq__pubsub_init(rjq_client *c) {
    return rjq__conn_init(c, &c->sub, RJQ_CONN_SUBSCRIBER, &sub_hooks);
}

void rjq__pubsub_free(rjq_client *c) {
    while (c->channels) {
        rjq__channel *ch = c->channels;
        c->channels = ch->next;
        channel_free(ch);
    }
}

/* Deliver to every listener of `name` (msg NULL: the subscription was
 * confirmed). A listener may remove itself or others from inside fn, so
 * the listeners are snapshotted first and each is checked before its call. */
static void dispatch(rjq_client *c, const char *name, const char *msg, size_t len) {
    size_t n = 0;
    for (rjq__channel *ch = c->channels; ch; ch = ch->next)
        if (strcmp(ch->name, name) == 0) n++;
    if (n == 0) return;
    void **args = malloc(n * sizeof *args);
    rjq__message_fn **fns = malloc(n * sizeof *fns);
    if (args && fns) {
        size_t i = 0;
        for (rjq__channel *ch = c->channels; ch && i < n; ch = ch->next) {
            if (strcmp(ch->name, name) != 0) continue;
            if (msg == NULL) ch->confirmed = 1;
            args[i] = ch->arg;
            fns[i++] = ch->fn;
        }
        for (i = 0; i < n && !c->closing; i++) {
            /* skip listeners removed by an earlier callback of this walk */
            int alive = 0;
            for (rjq__channel *ch = c->channels; ch; ch = ch->next)
                if (ch->arg == args[i] && ch->fn == fns[i] && strcmp(ch->name, name) == 0) alive = 1;
            if (alive) fns[i](c, name, msg, len, args[i]);
        }
    }
    free(args);
    free(fns);
}

static void on_message(redisAsyncContext *ac, void *reply, void *priv) {
    rjq__conn *conn = ac->data;
    redisReply *r = reply;
    (void)priv;
    if (conn == NULL || r == NULL) return; /* closing, or the loss is handled by conn.c */
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3) return;
    redisReply *kind = r->element[0], *name = r->element[1], *body = r->element[2];
    if (kind->type != REDIS_REPLY_STRING || name->type != REDIS_REPLY_STRING) return;
    rjq_client *c = conn->c;
    rjq__enter(c);
    conn->last_io_ms = rjq__now_ms();
    if (strcmp(kind->str, "message") == 0 && body->type == REDIS_REPLY_STRING)
        dispatch(c, name->str, body->str, body->len);
    else if (strcmp(kind->str, "subscribe") == 0)
        dispatch(c, name->str, NULL, 0); /* confirmed: listeners re-check state */
    rjq__leave(c);
}

int rjq__channel_confirmed(const rjq_client *c, const char *name) {
    for (rjq__channel *ch = c->channels; ch; ch = ch->next)
        if (strcmp(ch->name, name) == 0) return ch->confirmed;
    return 0;
}
