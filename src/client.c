/*
 * The client's public lifetime, the top of the core: rjq_client_new()
 * builds the runtime, the request layer (command connection) and the
 * channel layer (subscriber connection) and starts connecting;
 * rjq_client_free() tears down in an order where every user callback
 * still sees a valid client; rjq_client_close() first lets the work under
 * way finish (or hands it back) and then frees. Features are torn down
 * and drained through the hooks they registered (rjq__feature), never by
 * name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "core_private.h"
#include "sentinel.h"
#include "validate.h"

#define DEFAULT_MAX_PAYLOAD (16u * 1024 * 1024)
#define DRAIN_TICK_MS 10 /* how often a graceful close looks whether it is done */

/* Why the last rjq_client_new() of this thread failed (rjq_client_get_errmsg(NULL)). */
static _Thread_local char new_error[RJQ__ERRMSG_MAX];

void rjq__client_new_failed(const char *why) {
    snprintf(new_error, sizeof new_error, "%s", why);
}

static uint64_t seed(void) {
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        s = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40);
    }
    return s ? s : 0x9E3779B97F4A7C15ULL;
}

static int copy_options(rjq_client *c, const rjq_client_options *o) {
    const char *prefix = o && o->prefix ? o->prefix : "rjq";
    const char *name = o && o->name ? o->name : "rjq";
    if (!rjq__valid_queue_name(prefix)) {
        rjq__errmsg(c, "invalid key prefix");
        return RJQ_EINVAL;
    }
    if (!rjq__valid_client_name(name)) {
        rjq__errmsg(c, "invalid client name (no spaces, 1..128 bytes)");
        return RJQ_EINVAL;
    }
    c->prefix = strdup(prefix);
    c->name = strdup(name);
    if (c->prefix == NULL || c->name == NULL) return RJQ_ENOMEM;
    c->connect_timeout_ms = o && o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 5000;
    c->reconnect_min_ms = o && o->reconnect_min_ms > 0 ? o->reconnect_min_ms : 50;
    c->reconnect_max_ms = o && o->reconnect_max_ms > 0 ? o->reconnect_max_ms : 5000;
    if (c->reconnect_max_ms < c->reconnect_min_ms) c->reconnect_max_ms = c->reconnect_min_ms;
    long ct = o ? o->command_timeout_ms : 0, pi = o ? o->ping_interval_ms : 0;
    c->command_timeout_ms = ct > 0 ? ct : ct < 0 ? 0 : 10000;
    c->ping_interval_ms = pi > 0 ? pi : pi < 0 ? 0 : 5000;
    long lv = o ? o->liveness_ms : 0;
    c->liveness_ms = lv > 0 ? lv : lv < 0 ? 0 : 5000;
    if (lv > 0 && lv < 1000) {
        rjq__errmsg(c, "liveness_ms must be at least 1000");
        return RJQ_EINVAL;
    }
    c->max_payload = o && o->max_payload ? o->max_payload : DEFAULT_MAX_PAYLOAD;
    c->wait_replicas = o && o->wait_replicas > 0 ? o->wait_replicas : 0;
    c->wait_timeout_ms = o && o->wait_timeout_ms > 0 ? o->wait_timeout_ms : 1000;
    if (c->wait_replicas && c->command_timeout_ms && 2 * c->wait_timeout_ms >= c->command_timeout_ms) {
        rjq__errmsg(c, "wait_timeout_ms must be below half of command_timeout_ms (a write may "
                       "wait behind one WAIT for its own)");
        return RJQ_EINVAL;
    }
    if (o && o->sentinel_password) {
        c->sentinel_password = strdup(o->sentinel_password);
        if (c->sentinel_password == NULL) return RJQ_ENOMEM;
    }
    if (o && o->sentinel_user) {
        c->sentinel_user = strdup(o->sentinel_user);
        if (c->sentinel_user == NULL) return RJQ_ENOMEM;
    }
    c->on_event = o ? o->on_event : NULL;
    c->event_data = o ? o->event_data : NULL;
    return RJQ_OK;
}

/* The options' username and password where the URL names none, and the
 * URL's ?timeout= over connect_timeout_ms (rjq.h: the URL wins). */
static int merge_url(rjq_client *c, const rjq_client_options *o) {
    if (c->url.timeout_ms > 0) c->connect_timeout_ms = c->url.timeout_ms;
    int url_user = c->url.user != NULL;
    if (o && o->password && o->password[0] && c->url.password == NULL) {
        c->url.password = strdup(o->password);
        if (c->url.password == NULL) return RJQ_ENOMEM;
    }
    if (o && o->username && o->username[0] && c->url.user == NULL) {
        c->url.user = strdup(o->username);
        if (c->url.user == NULL) return RJQ_ENOMEM;
    }
    if (c->url.user && c->url.password == NULL) {
        rjq__errmsg(c, "a user (%s) needs a password: rjq_client_options.password, ?password= "
                       "or user:password@ in the URL",
                    url_user ? "?username= in the URL" : "rjq_client_options.username");
        return url_user ? RJQ_EURL : RJQ_EINVAL;
    }
    return RJQ_OK;
}

/* A list's host (a sentinel, a seed node: `what`) that is a name needs a
 * glue that resolves it ("localhost" excepted). */
static int check_names(rjq_client *c, const rjq__url_host *h, size_t n, const char *what) {
    for (size_t i = 0; i < n && !c->ops.resolve; i++) {
        if (h[i].numeric || strcmp(h[i].host, "localhost") == 0) continue;
        rjq__errmsg(c, "%s %s is a name, and this loop glue resolves no names: use a numeric "
                       "address, or a glue with a resolver (rjq_libevent_client_new_dns)",
                    what, h[i].host);
        return RJQ_EURL;
    }
    return RJQ_OK;
}

/* A host name needs a glue that resolves it ("localhost" excepted). */
static int check_host(rjq_client *c) {
    int rc = check_names(c, c->url.sentinels, c->url.nsentinels, "sentinel host");
    if (rc == RJQ_OK) rc = check_names(c, c->url.seeds, c->url.nseeds, "seed node");
    if (rc != RJQ_OK) return rc;
    if (c->url.master || c->url.path || c->url.numeric || c->ops.resolve ||
        strcmp(c->url.host, "localhost") == 0)
        return RJQ_OK;
    rjq__errmsg(c, "host %s is a name, and this loop glue resolves no names (rjq never blocks "
                   "the loop on a lookup): use a numeric address, or a glue with a resolver "
                   "(rjq_libevent_client_new_dns)", c->url.host);
    return RJQ_EURL;
}

/* TLS for a rediss:// URL, or when the options ask for it. */
static int setup_tls(rjq_client *c, const rjq_tls_options *given) {
    rjq_tls_options copy;
    const rjq_tls_options *o = NULL;
    if (given) {
        int rc = rjq__sized_in(c, &copy, sizeof copy, given, "rjq_tls_options");
        if (rc != RJQ_OK) return rc;
        if (copy.reserved != 0) { /* (a later field, unknown here) */
            rjq__errmsg(c, "rjq_tls_options: reserved is set (keep it 0)");
            return RJQ_EINVAL;
        }
        o = &copy;
    }
    if (!c->url.tls && !(o && o->enable)) return RJQ_OK;
    if (c->url.path) {
        rjq__errmsg(c, "TLS: Redis serves TLS on TCP ports only, not on a unix socket");
        return RJQ_ETLS;
    }
    if (c->url.master && (o == NULL || o->server_name == NULL)) {
        rjq__errmsg(c, "TLS: with Sentinel, set the TLS server name (the name the masters' "
                       "certificates hold): the master's address changes");
        return RJQ_ETLS;
    }
    return rjq__tls_new(&c->tls, o, c->url.host, c->url.numeric, c->errmsg, sizeof c->errmsg);
}

int rjq_tls_is_available(void) {
    return rjq__tls_built();
}

/* The sentinels announced a failover: both connections go and ask them
 * again (a connection still connecting checks ROLE anyway). Without the
 * watch (out of memory) a failover is still found: a dead master drops
 * the connections, a demoted one answers writes with READONLY. */
static void on_master_switched(void *arg, const char *to) {
    rjq_client *c = arg;
    char why[160], ip[64];
    int port = 0;
    if (sscanf(to, "%63s %d", ip, &port) != 2) return;
    snprintf(why, sizeof why, "+switch-master: the master is now %s:%d", ip, port);
    if (!rjq__conn_is_at(&c->cmd, ip, port)) rjq__conn_drop(&c->cmd, why);
    if (!rjq__accepting(c)) return; /* freed by an event handler of the first */
    if (!rjq__conn_is_at(&c->sub, ip, port)) rjq__conn_drop(&c->sub, why);
}

static void destroy(rjq_client *c);
static void on_drain_timer(rjq__timer *t);

/* Free what a failed rjq_client_new() made (nothing was started). */
static void free_secrets(rjq_client *c) {
    if (c->sentinel_password) memset(c->sentinel_password, 0, strlen(c->sentinel_password));
    free(c->sentinel_password);
    free(c->sentinel_user);
}

static void discard(rjq_client *c) {
    rjq__route_free(c);
    rjq__timers_free(&c->timers);
    rjq__tls_free(c->tls);
    free_secrets(c);
    rjq__url_free(&c->url);
    free(c->prefix);
    free(c->name);
    free(c);
}

int rjq_client_new(rjq_client **out, const rjq_client_options *given,
                   const rjq_loop_ops *given_ops, void *loop) {
    if (out == NULL || given_ops == NULL) return RJQ_EINVAL;
    *out = NULL;
    /* the caller's structs as this library knows them (rjq.h "Extensible
     * structs"): fields past their size take the defaults */
    rjq_loop_ops ops_copy;
    rjq_client_options opts_copy;
    const rjq_client_options *opts = given ? &opts_copy : NULL;
    int rc = rjq__sized_take(&ops_copy, sizeof ops_copy, given_ops, "rjq_loop_ops", new_error,
                             sizeof new_error);
    if (rc == RJQ_OK && given)
        rc = rjq__sized_take(&opts_copy, sizeof opts_copy, given, "rjq_client_options", new_error,
                             sizeof new_error);
    if (rc != RJQ_OK) return rc;
    const rjq_loop_ops *ops = &ops_copy;
    if (ops->set_timer == NULL || ops->attach == NULL ||
        (ops->resolve && ops->resolve_cancel == NULL)) {
        snprintf(new_error, sizeof new_error, "rjq_loop_ops: attach and set_timer are needed, "
                                              "and resolve_cancel with resolve");
        return RJQ_EINVAL;
    }
    rjq_client *c = calloc(1, sizeof *c);
    if (c == NULL) {
        snprintf(new_error, sizeof new_error, "out of memory");
        return RJQ_ENOMEM;
    }
    c->ops = *ops;
    c->loop = loop;
    c->armed_due = UINT64_MAX;
    c->rng = seed();
    rjq__random_word(c, c->id, RJQ__CLIENT_ID_LEN);
    c->destroy = destroy;
    rc = copy_options(c, opts);
    if (rc == RJQ_OK)
        rc = rjq__url_parse(opts ? opts->url : NULL, &c->url, c->errmsg, sizeof c->errmsg);
    if (rc == RJQ_OK) rc = merge_url(c, opts);
    if (rc == RJQ_OK) rc = check_host(c);
    if (rc == RJQ_OK) rc = setup_tls(c, opts ? opts->tls : NULL);
    if (rc == RJQ_OK) rc = rjq__timer_setup(c, &c->drain_timer, on_drain_timer, c);
    if (rc == RJQ_OK) rc = rjq__requests_init(c);
    if (rc == RJQ_OK) rc = rjq__pubsub_init(c);
    if (rc == RJQ_OK) rc = rjq__liveness_init(c);
    if (rc != RJQ_OK) {
        snprintf(new_error, sizeof new_error, "%s", c->errmsg[0] ? c->errmsg : rjq_strerror(rc));
        rjq__pubsub_free(c);
        discard(c);
        return rc;
    }
    rjq__conn_start(&c->cmd);
    rjq__conn_start(&c->sub);
    if (c->url.master) c->sentinel_watch = rjq__sentinel_watch_start(c, on_master_switched, c);
    *out = c;
    return RJQ_OK;
}

void rjq_client_free(rjq_client *c) {
    if (c == NULL || c->closing) return;
    if (c->depth > 0) {
        c->free_pending = 1;
        return;
    }
    destroy(c);
}

/* Work not yet sent is cancelled first (features' abort), then requests,
 * then the features end their handles (cancel: every callback runs here,
 * while every feature's state still exists, in reverse order of
 * registration: awaits before the workers of the queues they refer to),
 * then they free their state (close, no callbacks); only then do the
 * contexts and our memory go. */
static void destroy(rjq_client *c) {
    rjq_closed_cb *close_cb = c->draining ? c->close_cb : NULL;
    void *close_data = c->close_data;
    rjq_close_report report = c->close_report;
    if (c->draining && !c->drain_done) report.status = RJQ_ECANCELED; /* rjq_client_free() came first */
    /* once, from outside every callback (rjq_client_free, or the
     * outermost rjq__leave after a free inside one) */
    RJQ_ASSERT(!c->closing && c->depth == 0);
    c->closing = 1;
    c->depth++; /* user code run below cannot re-enter destroy */
    rjq__features_abort(c);
    rjq__requests_cancel_all(c);
    rjq__features_cancel(c);
    rjq__features_close(c);
    RJQ_ASSERT(rjq__requests_pending(c) == 0); /* (nothing is accepted while closing) */
    RJQ_ASSERT(c->depth == 1);
    rjq__sentinel_watch_stop(c->sentinel_watch);
    rjq__conn_close(&c->cmd);
    rjq__route_free(c); /* (the cluster's node links) */
    rjq__conn_close(&c->sub);
    rjq__pubsub_free(c);
    rjq__timers_free(&c->timers);
    if (c->ops.cleanup) c->ops.cleanup(c->loop);
    rjq__url_free(&c->url);
    rjq__tls_free(c->tls);
    free_secrets(c);
    free(c->prefix);
    free(c->name);
    free(c);
    if (close_cb) close_cb(&report, close_data);
}

/* ---- graceful close -------------------------------------------------------- */

/* Hand back at the deadline; free once nothing is busy and no request is
 * unanswered, or command_timeout_ms after the deadline regardless. */
static void on_drain_timer(rjq__timer *t) {
    rjq_client *c = t->owner;
    uint64_t now = rjq__now_ms();
    RJQ_ASSERT(c->draining && !c->drain_done); /* (started by rjq_client_close; done frees) */
    if (!c->drain_give_up && now >= c->drain_deadline) {
        c->close_report.handed_back += rjq__features_hand_back(c);
        c->drain_give_up = now + (uint64_t)(c->command_timeout_ms > 0 ? c->command_timeout_ms : 10000);
    }
    if (c->flush_wanted) rjq__features_before_send(c, -1, 1);
    size_t pending = rjq__requests_pending(c);
    int quiet = pending == 0 && rjq__features_busy(c) == 0;
    if (quiet || (c->drain_give_up && now >= c->drain_give_up)) {
        c->close_report.status = quiet ? RJQ_OK : RJQ_ETIMEDOUT;
        c->close_report.cancelled = pending;
        c->drain_done = 1;
        c->free_pending = 1; /* freed as the timer's callback returns */
        return;
    }
    rjq__timer_start(c, &c->drain_timer, DRAIN_TICK_MS);
}

int rjq_client_close(rjq_client *c, long deadline_ms, rjq_closed_cb *cb, void *data) {
    if (c == NULL || deadline_ms < 0) return RJQ_EINVAL;
    if (!rjq__accepting(c)) return RJQ_ECLOSED;
    if (c->draining) return RJQ_EBUSY;
    rjq__enter(c); /* stopping workers sends requests: flushed callbacks may free c */
    c->draining = 1;
    c->close_cb = cb;
    c->close_data = data;
    c->drain_deadline = rjq__now_ms() + (uint64_t)deadline_ms;
    rjq__features_drain(c);
    if (!rjq__accepting(c)) {
        c->close_cb = NULL; /* refused: cb is never called */
        rjq__leave(c);
        return RJQ_ECLOSED;
    }
    rjq__timer_start(c, &c->drain_timer, 0);
    rjq__leave(c);
    return RJQ_OK;
}

const char *rjq_client_get_errmsg(const rjq_client *c) {
    if (c == NULL) return new_error[0] ? new_error : "no error";
    return c->errmsg[0] ? c->errmsg : "no error";
}

void rjq_client_set_data(rjq_client *c, void *data) {
    c->data = data;
}

void *rjq_client_get_data(const rjq_client *c) {
    return c->data;
}

int rjq_client_is_connected(const rjq_client *c) {
    return rjq__conn_ready(&c->cmd);
}
