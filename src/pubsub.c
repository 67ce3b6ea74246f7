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
 *
 * On a Redis Cluster (route.c found one) channels are sharded
 * (docs/cluster.md 6.1): each is subscribed (SSUBSCRIBE) on the sharded
 * link of the master of its slot (every rjq channel carries its queue's
 * hash tag), a link per master made by route.c on first use with this
 * file's hooks; the scripts SPUBLISH there. The link's events map onto the
 * classic ones: SUBSCRIBED is a confirmation (listeners re-read what they
 * may have missed), LOST marks the channel unconfirmed (the link
 * subscribes it again by itself) and asks for a table refresh, a pushed
 * `sunsubscribe` (its slot moved) or a MOVED answer subscribes it where the
 * table says now (a MOVED updates the table first), at most REDIRECTS_MAX
 * times in a row, then it waits for resub_timer; a refusal (NOPERM) is
 * told like a refused SUBSCRIBE. A refreshed table moves only the channels
 * whose slot changed master. A sharded channel whose last listener goes is
 * unsubscribed (SUNSUBSCRIBE on rjq's own link: no hiredis issue). Until
 * the command connection's first set-up says which it is (CLUSTER SLOTS),
 * nothing but classic-only channels (liveness' probe) is subscribed.
 */
#include <stdlib.h>
#include <string.h>

#include "core_private.h"
#include "shardlink.h"
#include "slot.h"
#include "slotmap.h"

#define REDIRECTS_MAX 5 /* MOVED / sunsubscribe in a row for one channel */

struct rjq__channel {
    char *name;
    rjq__message_fn *fn;      /* messages, and NULL for a confirmation */
    rjq__refused_fn *refused_fn; /* the channel was refused (may be NULL) */
    void *arg;
    int confirmed;            /* SUBSCRIBE confirmed on the current conn */
    int sent;                 /* a SUBSCRIBE (SSUBSCRIBE) of its name went out */
    int missable;             /* its name was subscribed again (a connection or
                               * link lost, moved, refused): messages sent to an
                               * earlier subscription may never arrive */
    int refused;              /* the server refused it: not subscribed on reconnect */
    int classic;              /* on the classic subscriber even on a cluster */
    int slot;                 /* its key slot (cluster) */
    int redirects;            /* MOVED/sunsubscribe in a row (cluster) */
    rjq__shardlink *link;     /* cluster: the link it is wanted on (NULL: none yet) */
    struct rjq__channel *next;
};

/* The SUBSCRIBEs sent on the current context and not yet confirmed, in
 * the order they were sent (Redis answers them in that order). */
typedef struct rjq__sent_list {
    char **names;
    size_t head, n, cap;
} sent_list;

static void on_message(redisAsyncContext *ac, void *reply, void *priv);
static void dispatch(rjq_client *c, const char *name, const char *msg, size_t len);

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

int rjq__pubsub_sharded(const rjq_client *c) {
    int mode = rjq__route_mode(c);
    return mode == RJQ__ROUTE_CLUSTER ? 1 : mode == RJQ__ROUTE_STANDALONE ? 0 : -1;
}

/* Where ch goes: the classic subscriber, or a sharded link (neither while
 * the mode is not known). */
static int classic_ch(const rjq_client *c, const rjq__channel *ch) {
    return ch->classic || rjq__route_mode(c) == RJQ__ROUTE_STANDALONE;
}

static int sharded_ch(const rjq_client *c, const rjq__channel *ch) {
    return !ch->classic && rjq__route_mode(c) == RJQ__ROUTE_CLUSTER;
}

static void set_link(rjq_client *c, const char *name, rjq__shardlink *l) {
    for (rjq__channel *o = c->channels; o; o = o->next)
        if (!o->classic && strcmp(o->name, name) == 0) o->link = l;
}

static void set_confirmed(rjq_client *c, const char *name, int confirmed) {
    for (rjq__channel *o = c->channels; o; o = o->next)
        if (strcmp(o->name, name) == 0) o->confirmed = confirmed;
}

/* A subscription of ch's name went out (ch may not be in the list yet):
 * one that went out before makes its messages missable. */
static void note_sent(rjq_client *c, rjq__channel *ch) {
    int again = ch->sent;
    for (rjq__channel *o = c->channels; o; o = o->next)
        if (strcmp(o->name, ch->name) == 0 && o->sent) again = 1;
    for (rjq__channel *o = c->channels; o; o = o->next)
        if (strcmp(o->name, ch->name) == 0) o->sent = 1, o->missable |= again;
    ch->sent = 1, ch->missable |= again;
}

/* The subscription of name was lost where it went out (a sharded link
 * subscribes it again by itself). */
static void note_lost(rjq_client *c, const char *name) {
    for (rjq__channel *o = c->channels; o; o = o->next)
        if (strcmp(o->name, name) == 0 && o->sent) o->missable = 1;
}

/* What a confirmation of name tells its listeners (rjq__message_fn's len
 * with msg NULL): 1 when messages may have been missed (its name was
 * subscribed before, see missable), 0 for its first subscription, which
 * no message sent after it reached the server can miss. */
static size_t missable_of(const rjq_client *c, const char *name) {
    for (const rjq__channel *o = c->channels; o; o = o->next)
        if (strcmp(o->name, name) == 0 && o->missable) return 1;
    return 0;
}

/* Subscribe ch's name where it goes now (ch may not be in the list yet).
 * A cluster slot whose master is not known yet waits for the refresh
 * asked for here (on_table). RJQ_OK, RJQ_ENOMEM, RJQ_EINVAL (the loop glue
 * cannot watch a sharded link: errmsg says so). */
static int want(rjq_client *c, rjq__channel *ch) {
    if (classic_ch(c, ch)) {
        int sends = c->sub.ac != NULL; /* (else sent on connect: sub_setup) */
        int rc = send_subscribe(c, ch->name);
        if (rc == RJQ_OK && sends) note_sent(c, ch);
        return rc;
    }
    if (!sharded_ch(c, ch)) return RJQ_OK; /* sent once the mode is known (on_mode) */
    int rc;
    rjq__shardlink *l = rjq__route_sublink(c, ch->slot, &rc);
    if (l == NULL && rc == RJQ_OK) rjq__route_refresh(c);
    if (l != NULL) rc = rjq__shardlink_subscribe(l, ch->name, strlen(ch->name));
    if (rc != RJQ_OK) l = NULL;
    if (l != NULL) note_sent(c, ch);
    set_link(c, ch->name, l);
    ch->link = l;
    return rc;
}

static rjq__shardlink *link_of(const rjq_client *c, const char *name) {
    for (rjq__channel *o = c->channels; o; o = o->next)
        if (!o->classic && strcmp(o->name, name) == 0) return o->link;
    return NULL;
}

static int subscribe(rjq_client *c, const char *name, rjq__message_fn *fn,
                     rjq__refused_fn *refused_fn, void *arg, int classic) {
    rjq__channel *ch = calloc(1, sizeof *ch);
    if (ch == NULL || (ch->name = strdup(name)) == NULL) {
        free(ch);
        return RJQ_ENOMEM;
    }
    ch->fn = fn;
    ch->refused_fn = refused_fn;
    ch->arg = arg;
    ch->classic = classic;
    ch->slot = rjq__key_slot(name, strlen(name));
    if (!has_listener(c, name, NULL)) {
        int rc = want(c, ch);
        if (rc != RJQ_OK) {
            channel_free(ch);
            return rc;
        }
    } else {
        ch->link = link_of(c, name);
        for (rjq__channel *o = c->channels; o; o = o->next) /* (what the name's went through) */
            if (strcmp(o->name, name) == 0) ch->sent |= o->sent, ch->missable |= o->missable;
    }
    mark_refused(c, name, 0); /* a new listener tries a refused channel again */
    ch->confirmed = rjq__channel_confirmed(c, name);
    ch->next = c->channels;
    c->channels = ch;
    return RJQ_OK;
}

int rjq__subscribe_checked(rjq_client *c, const char *name, rjq__message_fn *fn,
                           rjq__refused_fn *refused_fn, void *arg) {
    return subscribe(c, name, fn, refused_fn, arg, 0);
}

int rjq__subscribe(rjq_client *c, const char *name, rjq__message_fn *fn, void *arg) {
    return subscribe(c, name, fn, NULL, arg, 0);
}

int rjq__subscribe_classic(rjq_client *c, const char *name, rjq__message_fn *fn,
                           rjq__refused_fn *refused_fn, void *arg) {
    return subscribe(c, name, fn, refused_fn, arg, 1);
}

void rjq__unsubscribe(rjq_client *c, const char *name, void *arg) {
    for (rjq__channel **p = &c->channels; *p; p = &(*p)->next) {
        rjq__channel *ch = *p;
        if (ch->arg == arg && strcmp(ch->name, name) == 0) {
            *p = ch->next;
            rjq__shardlink *l = ch->classic ? NULL : ch->link;
            /* a sharded channel without listeners is let go (classic ones
             * stay: see the top) */
            if (l && !has_listener(c, name, NULL))
                (void)rjq__shardlink_unsubscribe(l, ch->name, strlen(ch->name));
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
        if (!classic_ch(c, ch)) continue; /* (sharded, or sent once the mode is known) */
        ch->confirmed = 0;
        if (ch->refused || has_listener_before(c, ch)) continue;
        if (send_subscribe(c, ch->name) != RJQ_OK) return RJQ_ENOMEM;
        note_sent(c, ch);
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
        if (want(c, ch) != RJQ_OK) {
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
    for (rjq__channel *ch = c->channels; ch; ch = ch->next)
        if (classic_ch(c, ch)) ch->confirmed = 0, ch->missable |= ch->sent;
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

/* ---- sharded channels (a Redis Cluster) --------------------------------- */

/* The first listener of a sharded channel `name` (not refused), or NULL. */
static rjq__channel *sharded_listener(rjq_client *c, const char *name) {
    for (rjq__channel *ch = c->channels; ch; ch = ch->next)
        if (!ch->classic && !ch->refused && strcmp(ch->name, name) == 0) return ch;
    return NULL;
}

/* A channel could not be subscribed (why: what to say): its listeners are
 * told it was refused, and it is tried again by resub_timer. */
static void sharded_refused(rjq_client *c, const char *name, const char *why, int perm) {
    char detail[RJQ__ERRMSG_MAX + 300];
    snprintf(detail, sizeof detail, "sharded pub/sub: SSUBSCRIBE %s: %s", name, why);
    if (perm) rjq__errmsg(c, "permission refused: SSUBSCRIBE %s: %s", name, why);
    rjq__emit(c, RJQ_EVENT_ERROR, RJQ_CONN_SUBSCRIBER, detail);
    if (perm) tell_refused(c, name, why, 1);
    else mark_refused(c, name, 1); /* (listeners not told: tried again shortly) */
    if (!rjq__timer_armed(&c->resub_timer))
        rjq__timer_start(c, &c->resub_timer, (uint64_t)rjq__client_reconnect_span_ms(c));
}

/* want(ch), and on failure its listeners hear of it as of a refusal
 * (name: ch's, or a copy of it that outlives ch). */
static void want_or_refused(rjq_client *c, rjq__channel *ch, const char *name) {
    int rc = want(c, ch);
    if (rc != RJQ_OK) sharded_refused(c, name, rc == RJQ_ENOMEM ? "out of memory" : c->errmsg, 0);
}

/* Subscribe ch's name again where the table says now (its slot moved). */
static void resubscribe(rjq_client *c, rjq__channel *ch) {
    char *name = strdup(ch->name);
    if (name == NULL) {
        sharded_refused(c, ch->name, "out of memory", 0);
        return;
    }
    int n = ++ch->redirects;
    for (rjq__channel *o = c->channels; o; o = o->next)
        if (!o->classic && strcmp(o->name, name) == 0) o->redirects = n;
    if (n > REDIRECTS_MAX) {
        ch->redirects = 0;
        sharded_refused(c, name, "more than 5 redirects in a row (the slot table keeps changing)", 0);
    } else {
        want_or_refused(c, ch, name);
    }
    free(name);
}

/* A link's channel (chlen bytes) as a string: in small (size bytes) when
 * it fits, else malloc'd (the caller frees it unless it is small); NULL:
 * out of memory. */
static char *name_z(char *small, size_t size, const char *channel, size_t chlen) {
    char *name = chlen < size ? small : malloc(chlen + 1);
    if (name == NULL) return NULL;
    memcpy(name, channel, chlen);
    name[chlen] = '\0';
    return name;
}

static void on_smessage(rjq__shardlink *l, void *arg, const char *channel, size_t chlen,
                        const char *payload, size_t len) {
    rjq_client *c = arg;
    char small[512], *name = name_z(small, sizeof small, channel, chlen);
    (void)l;
    if (name == NULL) return; /* (out of memory: the message is lost, as in hiredis) */
    dispatch(c, name, payload ? payload : "", len);
    if (name != small) free(name);
}

static void on_sevent(rjq__shardlink *l, void *arg, const char *channel, size_t chlen, int ev,
                      const char *detail) {
    rjq_client *c = arg;
    char small[512], *name = name_z(small, sizeof small, channel, chlen);
    if (name == NULL) return;
    rjq__channel *ch = sharded_listener(c, name);
    if (ch == NULL || ch->link != l || c->closing) goto out; /* (no longer wanted there) */
    rjq__redirect rd;
    switch (ev) {
    case RJQ__SHARDLINK_SUBSCRIBED:
        for (rjq__channel *o = c->channels; o; o = o->next)
            if (strcmp(o->name, name) == 0) o->redirects = 0;
        dispatch(c, name, NULL, missable_of(c, name)); /* confirmed: listeners re-check state */
        break;
    case RJQ__SHARDLINK_LOST: /* the link subscribes it again by itself */
        set_confirmed(c, name, 0);
        note_lost(c, name);
        rjq__route_refresh(c); /* (its node may have failed over) */
        break;
    case RJQ__SHARDLINK_UNSUBSCRIBED: /* its slot moved: where to? */
        set_confirmed(c, name, 0);
        rjq__route_refresh(c);
        resubscribe(c, ch);
        break;
    case RJQ__SHARDLINK_REFUSED:
        set_confirmed(c, name, 0);
        set_link(c, name, NULL);
        if (detail && strncmp(detail, "MOVED ", 6) == 0 &&
            rjq__redirect_parse(detail, strlen(detail), rjq__conn_address(&c->cmd), &rd) == RJQ_OK) {
            rjq__route_moved(c, rd.slot, &rd.addr);
            resubscribe(c, ch);
        } else {
            sharded_refused(c, name, detail ? detail : "refused",
                            detail && strncmp(detail, "NOPERM", 6) == 0);
        }
        break;
    default:
        break;
    }
out:
    if (name != small) free(name);
}

static const rjq__shardlink_hooks link_hooks = {on_smessage, on_sevent};

/* The mode is known: subscribe every channel that waited for it. */
static void on_mode(rjq_client *c) {
    for (rjq__channel *ch = c->channels; ch && !c->closing; ch = ch->next) {
        if (ch->classic || ch->refused || has_listener_before(c, ch)) continue;
        want_or_refused(c, ch, ch->name);
    }
}

/* A refresh read a new table: the channels whose slot's master changed
 * go to the new one (the others are left alone). */
static void on_table(rjq_client *c) {
    for (rjq__channel *ch = c->channels; ch && !c->closing; ch = ch->next) {
        if (!sharded_ch(c, ch) || ch->refused || has_listener_before(c, ch)) continue;
        int rc;
        rjq__shardlink *l = rjq__route_sublink(c, ch->slot, &rc);
        if (l == NULL || l == ch->link) continue; /* (owner unknown: stays) */
        if (ch->link) (void)rjq__shardlink_unsubscribe(ch->link, ch->name, strlen(ch->name));
        set_confirmed(c, ch->name, 0);
        want_or_refused(c, ch, ch->name);
    }
}

static const rjq__route_sub_hooks route_hooks = {&link_hooks, on_mode, on_table};

int rjq__pubsub_init(rjq_client *c) {
    if ((c->sub_sent = calloc(1, sizeof(sent_list))) == NULL) return RJQ_ENOMEM;
    rjq__route_set_sub_hooks(c, &route_hooks);
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
 * confirmed, len missable_of's). A listener may remove itself or others from inside fn, so
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
        /* (a sole listener may take the body: rjq__message_reply) */
        redisReply *was = c->msg_body;
        size_t n = 0;
        for (rjq__channel *ch = c->channels; ch && n < 2; ch = ch->next)
            n += strcmp(ch->name, name->str) == 0;
        c->msg_body = n == 1 ? body : NULL;
        dispatch(c, name->str, body->str, body->len);
        c->msg_body = was;
    } else if (strcmp(kind->str, "subscribe") == 0) {
        free(sent_pop(c->sub_sent)); /* (in order: this one) */
        /* confirmed: listeners re-check state */
        dispatch(c, name->str, NULL, missable_of(c, name->str));
    }
    rjq__leave(c);
}

struct redisReply *rjq__message_reply(rjq_client *c, const char *msg) {
    redisReply *b = c->msg_body;
    return b && msg && b->str == msg ? b : NULL;
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
