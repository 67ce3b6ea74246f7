/*
 * The client's runtime, the bottom of the core: callback depth and the
 * deferred free, the timer heap behind the client's one loop timer,
 * errors and events, randomness, and the registry of features and their
 * hooks. Everything above calls down into this file; it calls up only
 * through what was registered (features, rjq_client.destroy).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core_private.h"
#include "validate.h"

static uint64_t (*test_clock)(void); /* rjq__clock_set */

void rjq__clock_set(uint64_t (*now)(void)) {
    test_clock = now;
}

uint64_t rjq__now_ms(void) {
    if (test_clock) return test_clock();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* xorshift64*: tokens and jitter need unpredictability across clients,
 * not cryptographic strength; the seed comes from the kernel (client.c). */
uint64_t rjq__random(rjq_client *c) {
    uint64_t x = c->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    c->rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}

uint64_t rjq__reconnect_delay(rjq_client *c, int failures) {
    long delay = c->reconnect_min_ms;
    for (int i = 1; i < failures && delay < c->reconnect_max_ms; i++) delay *= 2;
    if (delay > c->reconnect_max_ms) delay = c->reconnect_max_ms;
    return (uint64_t)(delay / 2 + (long)(rjq__random(c) % (uint64_t)(delay / 2 + 1))); /* jitter */
}

void rjq__random_word(rjq_client *c, char *out, int n) {
    static const char digits[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    uint64_t x = rjq__random(c);
    for (int i = 0; i < n; i++) {
        if (i == 10) x = rjq__random(c); /* 62^10 < 2^64 */
        out[i] = digits[x % 62];
        x /= 62;
    }
    out[n] = '\0';
}

void rjq__holder_token(rjq_client *c, char *out, size_t size) {
    char word[16];
    rjq__random_word(c, word, 12);
    snprintf(out, size, "%s.%s", rjq__client_id(c), word);
}

void rjq__ignore_reply(rjq_client *c, int status, redisReply *reply, void *priv) {
    (void)c, (void)status, (void)reply, (void)priv;
}

void rjq__random_fraction(rjq_client *c, char *out, size_t len) {
    snprintf(out, len, "%.6f", (double)(rjq__random(c) >> 11) / 9007199254740992.0);
}

void rjq__errmsg(rjq_client *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
    va_end(ap);
}

int rjq__sized_in(rjq_client *c, void *dst, size_t known, const void *src, const char *what) {
    return rjq__sized_take(dst, known, src, what, c->errmsg, sizeof c->errmsg);
}

void rjq__background_failed(rjq_client *c, int status, const char *what) {
    char words[RJQ__ERRMSG_MAX];
    if (status == RJQ_EAUTH) { /* the server's words say which permission */
        snprintf(words, sizeof words, "%s", c->errmsg);
        rjq__errmsg(c, "%s: %s", what, words);
    } else if (status != RJQ_OK && status != RJQ_ECANCELED && status != RJQ_ECONN &&
               status != RJQ_ETIMEDOUT) {
        rjq__errmsg(c, "%s: %s", what, rjq_strerror(status));
    }
}

void rjq__emit(rjq_client *c, rjq_event ev, int conn, const char *detail) {
    if (c->on_event && !c->closing) c->on_event(c, ev, conn, detail, c->event_data);
}

const char *rjq__client_prefix(const rjq_client *c) {
    return c->prefix;
}

const char *rjq__client_name(const rjq_client *c) {
    return c->name ? c->name : "";
}

const char *rjq__client_id(const rjq_client *c) {
    return c->id;
}

long rjq__client_liveness_ms(const rjq_client *c) {
    return c->liveness_ms;
}

long rjq__client_reconnect_span_ms(const rjq_client *c) {
    return c->reconnect_max_ms + c->connect_timeout_ms;
}

long rjq__client_command_timeout_ms(const rjq_client *c) {
    return c->command_timeout_ms;
}

size_t rjq__client_max_payload(const rjq_client *c) {
    return c->max_payload;
}

/* ---- the server's clock -------------------------------------------------- */

#define OFFSET_WINDOW_MS 60000

/* The local clock behind the estimate: CLOCK_BOOTTIME goes on while the
 * machine is suspended (CLOCK_MONOTONIC does not), so a worker resumed
 * from a suspend does not think its stale jobs fresh. */
static uint64_t boot_ms(void) {
    struct timespec ts;
    if (test_clock || clock_gettime(CLOCK_BOOTTIME, &ts) != 0) return rjq__now_ms();
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void rjq__server_time_rebase(rjq_client *c, long long server_ms) {
    if (server_ms <= 0 || server_ms > RJQ__TIME_MAX) return;
    uint64_t now = boot_ms();
    c->have_offset = 1;
    c->offset_cur = c->offset_prev = server_ms - (long long)now;
    c->offset_window = now;
    c->rebase_wanted = c->rebase_sent = 0;
}

void rjq__server_time_sample(rjq_client *c, long long server_ms) {
    if (server_ms <= 0 || server_ms > RJQ__TIME_MAX) return; /* malformed: no sample */
    if (!c->have_offset) {
        rjq__server_time_rebase(c, server_ms);
        return;
    }
    uint64_t now = boot_ms();
    long long off = server_ms - (long long)now;
    if (now - c->offset_window >= OFFSET_WINDOW_MS) {
        c->offset_prev = c->offset_cur;
        c->offset_cur = off;
        c->offset_window = now;
    } else if (off > c->offset_cur) {
        c->offset_cur = off;
    }
}

void rjq__server_time_doubt(rjq_client *c) {
    c->rebase_wanted = 1;
}

long long rjq__server_now(const rjq_client *c) {
    if (!c->have_offset) return 0;
    long long off = c->offset_cur > c->offset_prev ? c->offset_cur : c->offset_prev;
    return (long long)boot_ms() + off;
}

/* ---- depth and the deferred free ---------------------------------------- */

void rjq__enter(rjq_client *c) {
    c->depth++;
}

void rjq__leave(rjq_client *c) {
    RJQ_ASSERT(c->depth > 0);
    if (--c->depth == 0 && c->free_pending && !c->closing) c->destroy(c);
}

int rjq__closing(const rjq_client *c) {
    return c->closing;
}

int rjq__free_pending(const rjq_client *c) {
    return c->free_pending;
}

int rjq__accepting(const rjq_client *c) {
    return !c->closing && !c->free_pending;
}

int rjq__draining(const rjq_client *c) {
    return c->draining;
}

/* ---- timers -------------------------------------------------------------- */

/* Ask the loop for a wake-up at the earliest due timer, unless one at or
 * before it is already armed. Deletions never disarm: an early wake-up
 * finds nothing due and re-arms. */
static void arm(rjq_client *c) {
    rjq__timer *t = rjq__timers_peek(&c->timers);
    if (t == NULL || c->closing || t->due >= c->armed_due) return;
    uint64_t now = rjq__now_ms();
    c->armed_due = t->due;
    c->ops.set_timer(c->loop, t->due > now ? (long)(t->due - now) : 0);
}

int rjq__timer_setup(rjq_client *c, rjq__timer *t, rjq__timer_fn *fn, void *owner) {
    rjq__timer_init(t, fn, owner);
    return rjq__timers_reserve(&c->timers, 1) == 0 ? RJQ_OK : RJQ_ENOMEM;
}

void rjq__timer_teardown(rjq_client *c, rjq__timer *t) {
    rjq__timers_del(&c->timers, t);
    rjq__timers_unreserve(&c->timers, 1);
}

void rjq__timer_start(rjq_client *c, rjq__timer *t, uint64_t delay_ms) {
    int rc = rjq__timers_add(&c->timers, t, rjq__now_ms() + delay_ms);
    RJQ_ASSERT(rc == 0); /* its slot was reserved by rjq__timer_setup */
    (void)rc;
    arm(c);
}

void rjq__timer_stop(rjq_client *c, rjq__timer *t) {
    rjq__timers_del(&c->timers, t);
}

void rjq_client_handle_timeout(rjq_client *c) {
    rjq__enter(c);
    c->armed_due = UINT64_MAX;
    uint64_t now = rjq__now_ms();
    rjq__timer *t;
    /* A timer re-armed for "now" by its own callback waits for the next
     * loop turn: only timers due before this pass started run in it. */
    while (!c->closing && (t = rjq__timers_pop_due(&c->timers, now)) != NULL) t->fn(t);
    arm(c);
    if (c->after_timers && !c->closing) c->after_timers(c);
    rjq__leave(c);
}

/* ---- features ------------------------------------------------------------- */

int rjq__feature_add(rjq_client *c, const rjq__feature *f, void *state) {
    if (rjq__feature_state(c, f) != NULL) return RJQ_OK;
    RJQ_ASSERT(c->nfeatures < RJQ__FEATURES_MAX); /* one slot per kind of feature */
    if (c->nfeatures >= RJQ__FEATURES_MAX) return RJQ_ENOMEM;
    c->features[c->nfeatures].f = f;
    c->features[c->nfeatures].state = state;
    c->nfeatures++;
    return RJQ_OK;
}

void *rjq__feature_state(const rjq_client *c, const rjq__feature *f) {
    for (int i = 0; i < c->nfeatures; i++)
        if (c->features[i].f == f) return c->features[i].state;
    return NULL;
}

void *rjq__feature_ensure(rjq_client *c, const rjq__feature *f, size_t size) {
    void *state = rjq__feature_state(c, f);
    if (state) return state;
    if ((state = calloc(1, size)) == NULL) return NULL;
    if (rjq__feature_add(c, f, state) != RJQ_OK) {
        free(state);
        return NULL;
    }
    return state;
}

void rjq__want_flush(rjq_client *c) {
    c->flush_wanted = 1;
}

/* A hook may register another feature: walk by index, re-reading the count. */
void rjq__features_ready(rjq_client *c, int kind) {
    for (int i = 0; i < c->nfeatures && !c->closing; i++)
        if (c->features[i].f->ready) c->features[i].f->ready(c, c->features[i].state, kind);
}

void rjq__features_before_send(rjq_client *c, int slot, int link) {
    RJQ_ASSERT(!c->closing); /* (its callers check rjq__accepting) */
    c->flush_wanted = 0; /* (a hook that keeps work back asks again) */
    for (int i = 0; i < c->nfeatures && !c->closing; i++)
        if (c->features[i].f->before_send)
            c->features[i].f->before_send(c, c->features[i].state, slot, link);
}

/* The teardown hooks run from the client's destruction only. */
void rjq__features_abort(rjq_client *c) {
    RJQ_ASSERT(c->closing);
    for (int i = 0; i < c->nfeatures; i++)
        if (c->features[i].f->abort) c->features[i].f->abort(c, c->features[i].state);
}

void rjq__features_drain(rjq_client *c) {
    RJQ_ASSERT(c->draining); /* (rjq_client_close) */
    for (int i = 0; i < c->nfeatures; i++)
        if (c->features[i].f->drain) c->features[i].f->drain(c, c->features[i].state);
}

size_t rjq__features_busy(rjq_client *c) {
    size_t n = 0;
    for (int i = 0; i < c->nfeatures; i++)
        if (c->features[i].f->busy) n += c->features[i].f->busy(c, c->features[i].state);
    return n;
}

size_t rjq__features_hand_back(rjq_client *c) {
    RJQ_ASSERT(c->draining); /* (the graceful close's deadline) */
    size_t n = 0;
    for (int i = 0; i < c->nfeatures && !c->closing; i++)
        if (c->features[i].f->hand_back) n += c->features[i].f->hand_back(c, c->features[i].state);
    return n;
}

void rjq__features_cancel(rjq_client *c) {
    RJQ_ASSERT(c->closing);
    for (int i = c->nfeatures - 1; i >= 0; i--)
        if (c->features[i].f->cancel) c->features[i].f->cancel(c, c->features[i].state);
}

void rjq__features_close(rjq_client *c) {
    RJQ_ASSERT(c->closing);
    while (c->nfeatures > 0) {
        rjq__feature_reg *r = &c->features[--c->nfeatures];
        if (r->f->close) r->f->close(c, r->state);
    }
}
