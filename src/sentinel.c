/* The master's address from the sentinels (sentinel.h). */
#include "sentinel.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_private.h"
#include "validate.h"

/* Reaching one sentinel: its name resolved first when it is one (by the
 * loop glue's resolver; rjq_client_new refused names without one), then
 * a connection to its first address. The owner embeds it first and says
 * what comes next (reached) or why not (failed). */
typedef struct dial {
    rjq_client *c;
    int resolving;
    void *dns;
    void (*reached)(struct dial *d, const char *ip);
    void (*failed)(struct dial *d, const char *why);
} dial;

static void dial_resolved(void *arg, const char *error, const char *const *addrs, size_t n) {
    dial *d = arg;
    if (!d->resolving) return; /* a glue that broke the contract */
    rjq__enter(d->c);
    d->resolving = 0;
    d->dns = NULL;
    if (error || n == 0) {
        char why[RJQ__ERRMSG_MAX];
        snprintf(why, sizeof why, "cannot resolve it: %s", error ? error : "no address");
        d->failed(d, why);
    } else {
        d->reached(d, addrs[0]);
    }
    rjq__leave(d->c);
}

static void dial_start(dial *d, const rjq__url_host *s) {
    rjq_client *c = d->c;
    if (s->numeric || strcmp(s->host, "localhost") == 0 || c->ops.resolve == NULL) {
        d->reached(d, strcmp(s->host, "localhost") == 0 ? "127.0.0.1" : s->host);
        return;
    }
    d->resolving = 1;
    void *h = c->ops.resolve(c->loop, s->host, dial_resolved, d);
    if (d->resolving) d->dns = h; /* else answered inside */
}

static void dial_cancel(dial *d) {
    if (!d->resolving) return;
    d->resolving = 0;
    if (d->dns) d->c->ops.resolve_cancel(d->c->loop, d->dns);
    d->dns = NULL;
}

struct rjq__sentinel_lookup {
    dial dial;                /* first: the dial's callbacks find the lookup; its
                                 client is the lookup's (dial.c) */
    rjq__sentinel_found_fn *fn;
    void *arg;
    size_t tried;             /* sentinels asked so far */
    size_t at;                /* the one being asked */
    redisAsyncContext *ac;    /* its connection (NULL between two) */
    rjq__timer timer;         /* its deadline, or "ask the next one" (0 ms) */
    int finished;             /* the answer is in: the timer reports it */
    int heard;                /* some sentinel answered (if not with the master) */
    char ip[64];
    int port;
    char error[RJQ__ERRMSG_MAX];
};

static const rjq__url_host *sentinel_at(const rjq__sentinel_lookup *l) {
    return &l->dial.c->url.sentinels[l->at];
}

/* Drop the connection of the current question (not from its own connect
 * or disconnect callback: hiredis frees the context there). */
static void hang_up(rjq__sentinel_lookup *l) {
    redisAsyncContext *ac = l->ac;
    l->ac = NULL;
    if (ac == NULL) return;
    ac->data = NULL;
    redisAsyncFree(ac); /* deferred by hiredis inside its callbacks */
}

static void note(rjq__sentinel_lookup *l, const char *why) {
    const rjq__url_host *s = sentinel_at(l);
    snprintf(l->error, sizeof l->error, "sentinel %.64s:%d: %.160s", s->host, s->port, why);
}

/* This sentinel could not say: the next one, from the timer. */
static void next(rjq__sentinel_lookup *l, const char *why) {
    note(l, why);
    hang_up(l);
    rjq__timer_start(l->dial.c, &l->timer, 0);
}

static void on_master(redisAsyncContext *ac, void *reply, void *priv) {
    rjq__sentinel_lookup *l = priv;
    redisReply *r = reply;
    if (ac->data != l || r == NULL) return; /* hung up, or lost (the disconnect callback says) */
    rjq__enter(l->dial.c);
    unsigned char addr[16];
    long long port;
    l->heard = 1;
    if (r->type == REDIS_REPLY_ERROR) {
        next(l, r->str);
    } else if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
               r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING) {
        char why[200];
        snprintf(why, sizeof why, "knows no master named %s", l->dial.c->url.master);
        next(l, why);
    } else if (r->element[0]->len >= sizeof l->ip ||
               (inet_pton(AF_INET, r->element[0]->str, addr) != 1 &&
                inet_pton(AF_INET6, r->element[0]->str, addr) != 1)) {
        next(l, "announces the master by host name; rjq needs its address "
                "(sentinel announce-hostnames no)");
    } else if (strlen(r->element[0]->str) != r->element[0]->len ||
               rjq__parse_ll(r->element[1]->str, r->element[1]->len, 1, 65535, &port) != 0) {
        next(l, "announces the master with a malformed address or port");
    } else {
        snprintf(l->ip, sizeof l->ip, "%s", r->element[0]->str);
        l->port = (int)port;
        l->finished = 1;
        l->dial.c->sentinel_first = l->at; /* ask it first next time */
        hang_up(l);
        rjq__timer_start(l->dial.c, &l->timer, 0);
    }
    rjq__leave(l->dial.c);
}

static void on_auth(redisAsyncContext *ac, void *reply, void *priv) {
    (void)ac, (void)reply, (void)priv; /* a refusal shows in the next reply (NOAUTH) */
}

static void on_connect(const redisAsyncContext *cac, int status) {
    rjq__sentinel_lookup *l = cac->data;
    if (l == NULL || status == REDIS_OK) return;
    rjq__enter(l->dial.c);
    l->ac = NULL; /* hiredis frees it */
    next(l, cac->c.errstr[0] ? cac->c.errstr : "connect failed");
    rjq__leave(l->dial.c);
}

static void on_disconnect(const redisAsyncContext *cac, int status) {
    rjq__sentinel_lookup *l = cac->data;
    (void)status;
    if (l == NULL) return;
    rjq__enter(l->dial.c);
    l->ac = NULL; /* hiredis frees it */
    next(l, cac->c.errstr[0] ? cac->c.errstr : "connection closed");
    rjq__leave(l->dial.c);
}

/* A connection to a sentinel at ip:port for owner, its callbacks set,
 * AUTH (the sentinels' password) and then argv sent, the answer going to
 * fn. NULL when it could not be made (why says why, nothing is left). */
static redisAsyncContext *sentinel_open(rjq_client *c, const char *ip, int port, void *owner,
                                        redisConnectCallback *on_up, redisDisconnectCallback *on_down,
                                        redisCallbackFn *fn, int argc, const char **argv,
                                        char *why, size_t whylen) {
    redisAsyncContext *ac = redisAsyncConnect(ip, port);
    if (ac == NULL || ac->err || c->ops.attach(c->loop, ac) != 0) {
        snprintf(why, whylen, "%s", ac == NULL ? "out of memory" : ac->err ? ac->errstr : "loop attach failed");
        if (ac) redisAsyncFree(ac); /* not inside its callbacks: at once */
        return NULL;
    }
    ac->data = owner;
    redisAsyncSetConnectCallback(ac, on_up);
    redisAsyncSetDisconnectCallback(ac, on_down);
    int ok = 1;
    if (c->sentinel_password) {
        const char *auth[3] = {"AUTH", c->sentinel_user ? c->sentinel_user : c->sentinel_password,
                               c->sentinel_password};
        ok = redisAsyncCommandArgv(ac, on_auth, owner, c->sentinel_user ? 3 : 2, auth, NULL) == REDIS_OK;
    }
    if (ok) ok = redisAsyncCommandArgv(ac, fn, owner, argc, argv, NULL) == REDIS_OK;
    if (!ok) {
        snprintf(why, whylen, "out of memory");
        ac->data = NULL;
        redisAsyncFree(ac);
        return NULL;
    }
    return ac;
}

/* The sentinel's address: the question. */
static void ask_at(dial *d, const char *ip) {
    rjq__sentinel_lookup *l = (rjq__sentinel_lookup *)d;
    rjq_client *c = l->dial.c;
    const char *argv[3] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", c->url.master};
    char why[RJQ__ERRMSG_MAX];
    l->ac = sentinel_open(c, ip, sentinel_at(l)->port, l, on_connect, on_disconnect, on_master, 3,
                          argv, why, sizeof why);
    if (l->ac == NULL) {
        note(l, why);
        rjq__timer_start(c, &l->timer, 0);
    }
}

static void ask_failed(dial *d, const char *why) {
    next((rjq__sentinel_lookup *)d, why);
}

/* Ask the next sentinel: its deadline covers resolving its name too. */
static void ask(rjq__sentinel_lookup *l) {
    rjq_client *c = l->dial.c;
    l->at = (c->sentinel_first + l->tried++) % c->url.nsentinels;
    rjq__timer_start(c, &l->timer, (uint64_t)c->connect_timeout_ms);
    dial_start(&l->dial, sentinel_at(l));
}

static void lookup_free(rjq__sentinel_lookup *l) {
    dial_cancel(&l->dial);
    hang_up(l);
    rjq__timer_teardown(l->dial.c, &l->timer);
    free(l);
}

/* The deadline of a question, the next question, or the end. */
static void on_timer(rjq__timer *t) {
    rjq__sentinel_lookup *l = t->owner;
    if (l->dial.resolving) { /* no address in time */
        dial_cancel(&l->dial);
        note(l, "resolving its name timed out");
    }
    if (l->ac) { /* no answer in time */
        note(l, "no answer in time");
        hang_up(l);
    }
    if (!l->finished && l->tried < l->dial.c->url.nsentinels) {
        ask(l);
        return;
    }
    rjq__sentinel_found_fn *fn = l->fn;
    void *arg = l->arg;
    char ip[sizeof l->ip], error[sizeof l->error + 160];
    int port = l->port, found = l->finished;
    memcpy(ip, l->ip, sizeof ip);
    if (l->heard)
        snprintf(error, sizeof error, "no sentinel knows the master %.100s (last: %s)",
                 l->dial.c->url.master, l->error);
    else
        snprintf(error, sizeof error, "no sentinel answered (last: %s)", l->error);
    lookup_free(l);
    fn(arg, found ? NULL : error, ip, port);
}

rjq__sentinel_lookup *rjq__sentinel_ask(rjq_client *c, rjq__sentinel_found_fn *fn, void *arg) {
    rjq__sentinel_lookup *l = calloc(1, sizeof *l);
    if (l == NULL) return NULL;
    l->fn = fn;
    l->arg = arg;
    l->dial.c = c;
    l->dial.reached = ask_at;
    l->dial.failed = ask_failed;
    if (rjq__timer_setup(c, &l->timer, on_timer, l) != RJQ_OK) {
        free(l);
        return NULL;
    }
    ask(l);
    return l;
}

void rjq__sentinel_cancel(rjq__sentinel_lookup *l) {
    if (l) lookup_free(l);
}

/* ---- following failovers: +switch-master ------------------------------------ */

struct rjq__sentinel_watch {
    dial dial;              /* first: the dial's callbacks find the watch; its
                               client is the watch's (dial.c) */
    rjq__sentinel_switch_fn *fn;
    void *arg;
    size_t at;              /* the sentinel listened to */
    redisAsyncContext *ac;
    rjq__timer timer;       /* the next try after a failure */
};

static void watch_retry(rjq__sentinel_watch *w) {
    w->ac = NULL;
    w->at = (w->at + 1) % w->dial.c->url.nsentinels; /* another one */
    rjq__timer_start(w->dial.c, &w->timer, (uint64_t)w->dial.c->reconnect_max_ms);
}

static void on_switch_message(redisAsyncContext *ac, void *reply, void *priv) {
    redisReply *r = reply;
    if (ac->data == NULL || r == NULL) return; /* stopped, or lost (the disconnect callback says) */
    rjq__sentinel_watch *w = priv;
    const char *master = w->dial.c->url.master;
    size_t n = strlen(master);
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[2]->type != REDIS_REPLY_STRING ||
        strcmp(r->element[0]->str, "message") != 0)
        return;
    const char *msg = r->element[2]->str; /* "<name> <old ip> <old port> <new ip> <new port>" */
    if (strncmp(msg, master, n) != 0 || msg[n] != ' ') return;
    const char *to = msg + n + 1;
    for (int skip = 0; skip < 2 && to; skip++) {
        to = strchr(to, ' ');
        if (to) to++;
    }
    /* "<new ip> <new port>": an address that fits, a port in range */
    const char *sp = to ? strchr(to, ' ') : NULL;
    long long port;
    if (sp == NULL || sp == to || sp - to >= 64 ||
        rjq__parse_ll(sp + 1, strlen(sp + 1), 1, 65535, &port) != 0)
        return;
    rjq__enter(w->dial.c);
    w->fn(w->arg, to);
    rjq__leave(w->dial.c);
}

static void on_watch_connect(const redisAsyncContext *cac, int status) {
    rjq__sentinel_watch *w = cac->data;
    if (w == NULL || status == REDIS_OK) return;
    watch_retry(w); /* hiredis frees the context */
}

static void on_watch_disconnect(const redisAsyncContext *cac, int status) {
    rjq__sentinel_watch *w = cac->data;
    (void)status;
    if (w == NULL) return;
    watch_retry(w); /* hiredis frees the context */
}

static void watch_at(dial *d, const char *ip) {
    rjq__sentinel_watch *w = (rjq__sentinel_watch *)d;
    const char *argv[2] = {"SUBSCRIBE", "+switch-master"};
    char why[RJQ__ERRMSG_MAX];
    w->ac = sentinel_open(w->dial.c, ip, w->dial.c->url.sentinels[w->at].port, w, on_watch_connect,
                          on_watch_disconnect, on_switch_message, 2, argv, why, sizeof why);
    if (w->ac == NULL) watch_retry(w);
}

static void watch_failed(dial *d, const char *why) {
    (void)why;
    watch_retry((rjq__sentinel_watch *)d);
}

static void on_watch_timer(rjq__timer *t) {
    rjq__sentinel_watch *w = t->owner;
    dial_start(&w->dial, &w->dial.c->url.sentinels[w->at]);
}

rjq__sentinel_watch *rjq__sentinel_watch_start(rjq_client *c, rjq__sentinel_switch_fn *fn,
                                               void *arg) {
    rjq__sentinel_watch *w = calloc(1, sizeof *w);
    if (w == NULL) return NULL;
    w->fn = fn;
    w->arg = arg;
    w->at = c->sentinel_first;
    w->dial.c = c;
    w->dial.reached = watch_at;
    w->dial.failed = watch_failed;
    if (rjq__timer_setup(c, &w->timer, on_watch_timer, w) != RJQ_OK) {
        free(w);
        return NULL;
    }
    rjq__timer_start(c, &w->timer, 0); /* from the loop, as the connections start */
    return w;
}

void rjq__sentinel_watch_stop(rjq__sentinel_watch *w) {
    if (w == NULL) return;
    dial_cancel(&w->dial);
    redisAsyncContext *ac = w->ac;
    w->ac = NULL;
    if (ac) {
        ac->data = NULL;
        redisAsyncFree(ac);
    }
    rjq__timer_teardown(w->dial.c, &w->timer);
    free(w);
}
