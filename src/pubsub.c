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
 *
 * A refused SUBSCRIBE (NOPERM: the ACL lacks +subscribe or the channel)
 * is final. Redis answers it with an error, which hiredis (0.14.1 and 1.x)
 * takes for a reply no command waits for: it drops the context with the
 * error as its reason (conn.c: lost with RJQ_EAUTH, the backoff kept).
 * Redis answers in order and each SUBSCRIBE names one channel, so the
 * refused one is the oldest SUBSCRIBE not yet confirmed on that context
 * (all of them when the command itself is refused). A refused channel is
 * not subscribed again on every reconnect (else every reconnect would be
 * refused again): its listeners' refused functions are told, an
 * RJQ_EVENT_ERROR names it, and it is tried again by a new rjq__subscribe
 * of that name, or, while it still has listeners (the ACL may be fixed),
 * once per reconnect span (resub_timer: each refusal again costs one
 * reconnect of the subscriber connection). A listener that goes when told
 * (an await's reply channel) leaves nothing to try again. A session refused
 * as a whole (a wrong password) tells every listener the same, but keeps
 * the channels: the next session subscribes them again.
 */
#include <stdlib.h>
#include <string.h>

#include "core_private.h"

struct rjq__channel {
    char *name;
    rjq__message_fn *fn;      /* messages, and NULL for a confirmation */
    rjq__refused_fn *refused_fn; /* the channel was refused (may be NULL) */
    void *arg;
    int confirmed;            /* SUBSCRIBE confirmed on the current conn */
    int refused;              /* the server refused it: not subscribed on reconnect */
    struct rjq__channel *next;
};

/* The SUBSCRIBEs sent on the current context and not yet confirmed, in
 * the order they were sent (Redis answers them in that order). */
typedef struct rjq__sent_list {
    char **names;
    size_t head, n, cap;
} sent_list;

static void on_message(redisAsyncContext *ac, void *reply, void *priv);

/* A listener of name that is subscribed (not refused). */
static int has_listener(rjq_client *c, const char *name, const rjq__channel *except) {
    for (rjq__channel *ch = c->channels; ch; ch = ch->next)
        if (ch != except && !ch->refused && strcmp(ch->name, name) == 0) return 1;
    return 0;
}

static void sent_clear(sent_list *l) {
    for (size_t i = 0; i < l->n; i++) free(l->names[(l->head + i) % l->cap]);
    l->head = l->n = 0;
}

/* The oldest unconfirmed SUBSCRIBE (the caller frees it), or NULL. */
static char *sent_pop(sent_list *l) {
    if (l->n == 0) return NULL;
    char *name = l->names[l->head];
    l->head = (l->head + 1) % l->cap;
    l->n--;
    return name;
}

static int sent_push(sent_list *l, const char *name) {
    char *copy = strdup(name);
    if (copy == NULL) return RJQ_ENOMEM;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **names = malloc(cap * sizeof *names);
        if (names == NULL) {
            free(copy);
            return RJQ_ENOMEM;
        }
        for (size_t i = 0; i < l->n; i++) names[i] = l->names[(l->head + i) % l->cap];
        free(l->names);
        l->names = names;
        l->head = 0;
        l->cap = cap;
    }
    l->names[(l->head + l->n++) % l->cap] = copy;
    RJQ_ASSERT(l->n <= l->cap);
    return RJQ_OK;
}

/* RJQ_OK, or RJQ_ENOMEM when hiredis could not queue it. */
static int send_subscribe(rjq_client *c, const char *name) {
    if (c->sub.ac == NULL) return RJQ_OK; /* resubscribed on connect */
    sent_list *l = c->sub_sent;
    if (sent_push(l, name) != RJQ_OK) return RJQ_ENOMEM;
    const char *argv[2] = {"SUBSCRIBE", name};
    if (redisAsyncCommandArgv(c->sub.ac, on_message, NULL, 2, argv, NULL) == REDIS_OK)
        return RJQ_OK;
    RJQ_ASSERT(l->n > 0); /* (pushed just above) */
    free(l->names[(l->head + --l->n) % l->cap]); /* not sent after all */
    return RJQ_ENOMEM;
}

static void channel_free(rjq__channel *ch) {
    free(ch->name);
    free(ch);
}

/* Set refused for every listener of name: a channel is refused, or not,
 * for all of them. */
static void mark_refused(rjq_client *c, const char *name, int refused) {
    for (rjq__channel *o = c->channels; o; o = o->next)
        if (strcmp(o->name, name) == 0) o->refused = refused;
}

int rjq__subscribe_checked(rjq_client *c, const char *name, rjq__message_fn *fn,
                           rjq__refused_fn *refused_fn, void *arg) {
    rjq__channel *ch = calloc(1, sizeof *ch);
    if (ch == NULL || (ch->name = strdup(name)) == NULL) {
        free(ch);
        return RJQ_ENOMEM;
    }
    ch->fn = fn;
    ch->refused_fn = refused_fn;
    ch->arg = arg;
    if (!has_listener(c, name, NULL) && send_subscribe(c, name) != RJQ_OK) {
        channel_free(ch);
        return RJQ_ENOMEM;
    }
    mark_refused(c, name, 0); /* a new listener tries a refused channel again */
    ch->confirmed = rjq__channel_confirmed(c, name);
    ch->next = c->channels;
    c->channels = ch;
    return RJQ_OK;
}

int rjq__subscribe(rjq_client *c, const char *name, rjq__message_fn *fn, void *arg) {
    return rjq__subscribe_checked(c, name, fn, NULL, arg);
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

/* A new subscriber context: subscribe every channel again (not the
 * refused ones). */
static int sub_setup(rjq__conn *conn) {
    rjq_client *c = conn->c;
    sent_clear(c->sub_sent);
    for (rjq__channel *ch = c->channels; ch; ch = ch->next) {
        ch->confirmed = 0;
        if (!ch->refused && !has_listener_before(c, ch) && send_subscribe(c, ch->name) != RJQ_OK)
            return RJQ_ENOMEM;
    }
    return RJQ_OK;
}

static void sub_ready(rjq__conn *conn) {
    (void)conn;
}

/* Tell the listeners of `name` (NULL: of every channel) that the server
 * refused it; mark = 1: and subscribe it no more. Snapshotted like
 * dispatch: a refused function may remove listeners. */
static void tell_refused(rjq_client *c, const char *name, const char *err, int mark) {
    size_t n = 0;
    for (rjq__channel *ch = c->channels; ch; ch = ch->next)
        if (name == NULL || strcmp(ch->name, name) == 0) {
            if (mark) ch->refused = 1;
            n += ch->refused_fn != NULL;
        }
    if (n == 0) return;
    void **args = malloc(n * sizeof *args);
    rjq__refused_fn **fns = malloc(n * sizeof *fns);
    char **names = calloc(n, sizeof *names);
    size_t k = 0;
    if (args && fns && names)
        for (rjq__channel *ch = c->channels; ch && k < n; ch = ch->next) {
            if (ch->refused_fn == NULL || (name && strcmp(ch->name, name) != 0)) continue;
            if ((names[k] = strdup(ch->name)) == NULL) break;
            args[k] = ch->arg;
            fns[k++] = ch->refused_fn;
        }
    for (size_t i = 0; i < k && !c->closing; i++) {
        int alive = 0;
        for (rjq__channel *ch = c->channels; ch; ch = ch->next)
            if (ch->arg == args[i] && ch->refused_fn == fns[i] && strcmp(ch->name, names[i]) == 0)
                alive = 1;
        if (alive) fns[i](c, names[i], err, args[i]);
    }
    for (size_t i = 0; names && i < k; i++) free(names[i]);
    free(args);
    free(fns);
    free(names);
}

/* A reconnect span after a refusal: subscribe the refused channels that
 * still have listeners again (the ACL may have been fixed). Refused again,
 * they wait for the next span. */
static void on_resub_timer(rjq__timer *t) {
    rjq_client *c = t->owner;
    if (c->closing) return;
    for (rjq__channel *ch = c->channels; ch; ch = ch->next) {
        if (!ch->refused) continue;
        mark_refused(c, ch->name, 0);
        if (send_subscribe(c, ch->name) != RJQ_OK) {
            /* out of memory: mark it refused again, try at the next span */
            mark_refused(c, ch->name, 1);
            rjq__timer_start(c, &c->resub_timer, (uint64_t)rjq__client_reconnect_span_ms(c));
        }
    }
}

/* The context is gone. With RJQ_EAUTH the server refused: a SUBSCRIBE
 * (the context was ready) or the whole session. */
static void sub_down(rjq__conn *conn, int fail, const char *why) {
    rjq_client *c = conn->c;
    /* (a session refused in its set-up came here first with fail 0,
     * which cleared the list: no SUBSCRIBE is taken for refused then) */
    char *name = fail == RJQ_EAUTH ? sent_pop(c->sub_sent) : NULL;
    sent_clear(c->sub_sent);
    for (rjq__channel *ch = c->channels; ch; ch = ch->next) ch->confirmed = 0;
    if (fail != RJQ_EAUTH) {
        free(name);
        return;
    }
    char detail[RJQ__ERRMSG_MAX + 300];
    /* "... to run the 'subscribe' command": no channel can be had */
    int all = name && strstr(why, "'subscribe'") != NULL;
    if (name) {
        snprintf(detail, sizeof detail, "subscriber connection: permission refused: SUBSCRIBE %s%s: %s",
                 name, all ? " (and every channel)" : "", why);
        rjq__errmsg(c, "permission refused: SUBSCRIBE %s: %s", name, why);
        rjq__emit(c, RJQ_EVENT_ERROR, RJQ_CONN_SUBSCRIBER, detail);
        tell_refused(c, all ? NULL : name, why, 1);
        /* (a span from the first refusal: later ones do not defer it) */
        if (!rjq__timer_armed(&c->resub_timer))
            rjq__timer_start(c, &c->resub_timer, (uint64_t)rjq__client_reconnect_span_ms(c));
    } else {
        tell_refused(c, NULL, why, 0); /* the session (AUTH): the channels stay */
    }
    free(name);
}

static const rjq__conn_hooks sub_hooks = {sub_setup, sub_ready, sub_down};

int rjq__pubsub_init(rjq_client *c) {
    if ((c->sub_sent = calloc(1, sizeof(sent_list))) == NULL) return RJQ_ENOMEM;
    if (rjq__timer_setup(c, &c->resub_timer, on_resub_timer, c) != RJQ_OK) {
        free(c->sub_sent);
        c->sub_sent = NULL;
        return RJQ_ENOMEM;
    }
    return rjq__conn_init(c, &c->sub, RJQ_CONN_SUBSCRIBER, &sub_hooks);
}

void rjq__pubsub_free(rjq_client *c) {
    sent_list *l = c->sub_sent;
    if (l) {
        rjq__timer_teardown(c, &c->resub_timer); /* (set up with the list) */
        sent_clear(l);
        free(l->names);
        free(l);
        c->sub_sent = NULL;
    }
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
        RJQ_ASSERT(i == n); /* (counted above, nothing ran since) */
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
    if (strcmp(kind->str, "message") == 0 && body->type == REDIS_REPLY_STRING) {
        dispatch(c, name->str, body->str, body->len);
    } else if (strcmp(kind->str, "subscribe") == 0) {
        free(sent_pop(c->sub_sent)); /* (in order: this one) */
        dispatch(c, name->str, NULL, 0); /* confirmed: listeners re-check state */
    }
    rjq__leave(c);
}

int rjq__channel_refused(const rjq_client *c, const char *name) {
    for (rjq__channel *ch = c->channels; ch; ch = ch->next)
        if (strcmp(ch->name, name) == 0) return ch->refused;
    return 0;
}

int rjq__channel_confirmed(const rjq_client *c, const char *name) {
    for (rjq__channel *ch = c->channels; ch; ch = ch->next)
        if (strcmp(ch->name, name) == 0) return ch->confirmed;
    return 0;
}
