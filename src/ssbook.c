/* The book of a sharded pub/sub connection and its reply dispatcher (ssbook.h). */
#include "ssbook.h"

#include <stdlib.h>
#include <string.h>

void rjq__ssbook_init(rjq__ssbook *b) {
    memset(b, 0, sizeof *b);
}

void rjq__ssbook_free(rjq__ssbook *b) {
    for (size_t i = 0; i < b->nbuckets; i++) {
        rjq__ssch *e = b->buckets[i];
        while (e) {
            rjq__ssch *next = e->next;
            free(e);
            e = next;
        }
    }
    free(b->buckets);
    free(b->ring);
    memset(b, 0, sizeof *b);
}

static uint64_t hash_of(const char *name, size_t len) {
    uint64_t h = 14695981039346656037ULL; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)name[i];
        h *= 1099511628211ULL;
    }
    return h;
}

rjq__ssch *rjq__ssbook_find(const rjq__ssbook *b, const char *name, size_t len) {
    if (b->nbuckets == 0 || len == 0 || len > RJQ__SSCH_MAX) return NULL;
    uint64_t h = hash_of(name, len);
    for (rjq__ssch *e = b->buckets[h & (b->nbuckets - 1)]; e; e = e->next)
        if (e->hash == h && e->len == len && memcmp(e->name, name, len) == 0) return e;
    return NULL;
}

/* Twice the buckets once there are more channels than buckets (at least
 * 16). -1 when out of memory (the table stays as it was). */
static int grow(rjq__ssbook *b) {
    if (b->n < b->nbuckets) return 0;
    size_t nb = b->nbuckets ? b->nbuckets * 2 : 16;
    rjq__ssch **nbk = calloc(nb, sizeof *nbk);
    if (nbk == NULL) return b->nbuckets ? 0 : -1; /* a full table still works */
    for (size_t i = 0; i < b->nbuckets; i++) {
        rjq__ssch *e = b->buckets[i];
        while (e) {
            rjq__ssch *next = e->next;
            e->next = nbk[e->hash & (nb - 1)];
            nbk[e->hash & (nb - 1)] = e;
            e = next;
        }
    }
    free(b->buckets);
    b->buckets = nbk;
    b->nbuckets = nb;
    return 0;
}

rjq__ssch *rjq__ssbook_want(rjq__ssbook *b, const char *name, size_t len) {
    if (len == 0 || len > RJQ__SSCH_MAX) return NULL;
    rjq__ssch *e = rjq__ssbook_find(b, name, len);
    if (e == NULL) {
        if (grow(b) != 0) return NULL;
        e = calloc(1, sizeof *e + len + 1);
        if (e == NULL) return NULL;
        e->hash = hash_of(name, len);
        e->len = len;
        memcpy(e->name, name, len);
        size_t i = e->hash & (b->nbuckets - 1);
        e->next = b->buckets[i];
        b->buckets[i] = e;
        b->n++;
    }
    if (!e->wanted) b->nwanted++;
    e->wanted = 1;
    return e;
}

/* Where the server will be once every command sent for it is answered. */
static int will_be_subscribed(const rjq__ssch *e) {
    return e->nsub + e->nunsub > 0 ? e->last == RJQ__SSCMD_SUB : e->confirmed;
}

int rjq__ssbook_needs_sub(const rjq__ssch *e) {
    return e->wanted && !will_be_subscribed(e);
}

/* Drop an entry nobody needs: not wanted, no reply due, not being reported. */
static void maybe_remove(rjq__ssbook *b, rjq__ssch *e) {
    if (e->wanted || e->nsub || e->nunsub || e->lost_mark || e->pinned) return;
    rjq__ssch **p = &b->buckets[e->hash & (b->nbuckets - 1)];
    while (*p != e) p = &(*p)->next;
    *p = e->next;
    b->n--;
    free(e);
}

int rjq__ssbook_unwant(rjq__ssbook *b, rjq__ssch *e) {
    if (e->wanted) b->nwanted--;
    e->wanted = 0;
    if (will_be_subscribed(e)) return 1;
    maybe_remove(b, e);
    return 0;
}

int rjq__ssbook_state(const rjq__ssbook *b, const char *name, size_t len) {
    const rjq__ssch *e = rjq__ssbook_find(b, name, len);
    if (e == NULL || !e->wanted) return -1;
    if (e->nsub + e->nunsub > 0) return RJQ__SSCH_PENDING;
    return e->confirmed ? RJQ__SSCH_SUBSCRIBED : RJQ__SSCH_WANTED;
}

int rjq__ssbook_push(rjq__ssbook *b, int kind, rjq__ssch *ch, int step) {
    if (b->count == b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 16;
        rjq__sssent *nr = malloc(nc * sizeof *nr);
        if (nr == NULL) return -1;
        for (size_t i = 0; i < b->count; i++) nr[i] = b->ring[(b->head + i) % b->cap];
        free(b->ring);
        b->ring = nr;
        b->cap = nc;
        b->head = 0;
    }
    rjq__sssent *s = &b->ring[(b->head + b->count) % b->cap];
    s->kind = kind;
    s->step = step;
    s->ch = ch;
    s->prev_last = ch ? ch->last : 0;
    if (kind == RJQ__SSCMD_SUB) ch->nsub++;
    if (kind == RJQ__SSCMD_UNSUB) ch->nunsub++;
    if (ch) ch->last = kind;
    b->count++;
    return 0;
}

void rjq__ssbook_unpush(rjq__ssbook *b) {
    if (b->count == 0) return;
    b->count--;
    rjq__sssent *s = &b->ring[(b->head + b->count) % b->cap];
    if (s->ch == NULL) return;
    if (s->kind == RJQ__SSCMD_SUB) s->ch->nsub--;
    if (s->kind == RJQ__SSCMD_UNSUB) s->ch->nunsub--;
    s->ch->last = s->prev_last;
    maybe_remove(b, s->ch);
}

/* ---- the dispatcher ------------------------------------------------------ */

static int is_str(const redisReply *r) {
    return r->type == REDIS_REPLY_STRING && r->str != NULL;
}

static int status_is_pong(const redisReply *r) {
    return r->type == REDIS_REPLY_STATUS && r->str != NULL && r->len == 4 && memcmp(r->str, "PONG", 4) == 0;
}

static int str_is(const redisReply *r, const char *text) {
    size_t n = strlen(text);
    return is_str(r) && r->len == n && memcmp(r->str, text, n) == 0;
}

static const char *proto(rjq__ssout *out, const char *why) {
    out->kind = RJQ__SSOUT_PROTO;
    out->detail = why;
    return why;
}

/* The oldest command due (NULL: none), and take it off. */
static int take_head(rjq__ssbook *b, rjq__sssent *s) {
    if (b->count == 0) return 0;
    *s = b->ring[b->head];
    b->head = (b->head + 1) % b->cap;
    b->count--;
    return 1;
}

static const rjq__sssent *head(const rjq__ssbook *b) {
    return b->count ? &b->ring[b->head] : NULL;
}

/* A channel element: a bulk string of 1..RJQ__SSCH_MAX bytes. */
static int channel_ok(const redisReply *r) {
    return is_str(r) && r->len > 0 && r->len <= RJQ__SSCH_MAX;
}

/* The subscription count of a (s)(un)subscribe reply. */
static int count_ok(const redisReply *r) {
    return r->type == REDIS_REPLY_INTEGER && r->integer >= 0 && r->integer <= (1LL << 32);
}

static void on_smessage(rjq__ssbook *b, const redisReply *r, rjq__ssout *out) {
    if (r->elements != 3 || !channel_ok(r->element[1]) || !is_str(r->element[2])) {
        proto(out, "malformed smessage");
        return;
    }
    const redisReply *ch = r->element[1], *msg = r->element[2];
    rjq__ssch *e = rjq__ssbook_find(b, ch->str, ch->len);
    if (e == NULL || !e->wanted || !e->confirmed) return; /* stale: dropped */
    out->kind = RJQ__SSOUT_MESSAGE;
    out->channel = ch->str;
    out->chlen = ch->len;
    out->data = msg->str;
    out->len = msg->len;
}

static void on_ssubscribe(rjq__ssbook *b, const redisReply *r, rjq__ssout *out) {
    const rjq__sssent *h = head(b);
    if (r->elements != 3 || !channel_ok(r->element[1]) || !count_ok(r->element[2]) ||
        r->element[2]->integer < 1) {
        proto(out, "malformed ssubscribe reply");
        return;
    }
    const redisReply *ch = r->element[1];
    if (h == NULL || h->kind != RJQ__SSCMD_SUB || h->ch->len != ch->len ||
        memcmp(h->ch->name, ch->str, ch->len) != 0) {
        proto(out, "an ssubscribe reply no SSUBSCRIBE asked for");
        return;
    }
    rjq__sssent s = {0, 0, 0, NULL};
    take_head(b, &s);
    rjq__ssch *e = s.ch;
    e->nsub--;
    e->confirmed = 1;
    int report = e->wanted && e->nsub == 0 && e->nunsub == 0;
    maybe_remove(b, e);
    if (!report) return;
    out->kind = RJQ__SSOUT_SUBSCRIBED;
    out->channel = ch->str;
    out->chlen = ch->len;
}

static void on_sunsubscribe(rjq__ssbook *b, const redisReply *r, rjq__ssout *out) {
    const rjq__sssent *h = head(b);
    if (r->elements != 3 || !channel_ok(r->element[1]) || !count_ok(r->element[2])) {
        proto(out, "malformed sunsubscribe reply");
        return;
    }
    const redisReply *ch = r->element[1];
    if (h && h->kind == RJQ__SSCMD_UNSUB && h->ch->len == ch->len &&
        memcmp(h->ch->name, ch->str, ch->len) == 0) { /* ours */
        rjq__sssent s = {0, 0, 0, NULL};
        take_head(b, &s);
        s.ch->nunsub--;
        s.ch->confirmed = 0;
        maybe_remove(b, s.ch);
        return;
    }
    /* Pushed by the server (its slot moved): what is still due for the
     * channel decides; with nothing due, a wanted channel is lost here. */
    rjq__ssch *e = rjq__ssbook_find(b, ch->str, ch->len);
    if (e == NULL || !e->confirmed) return;
    e->confirmed = 0;
    if (!e->wanted || e->nsub || e->nunsub) return;
    e->wanted = 0;
    b->nwanted--;
    maybe_remove(b, e);
    out->kind = RJQ__SSOUT_UNSUBSCRIBED;
    out->channel = ch->str;
    out->chlen = ch->len;
}

static void on_error(rjq__ssbook *b, const redisReply *r, rjq__ssout *out) {
    rjq__sssent s = {0, 0, 0, NULL};
    const char *words = r->str && r->len > 0 ? r->str : "error";
    if (!take_head(b, &s)) {
        proto(out, "an error reply no command asked for");
        return;
    }
    switch (s.kind) {
    case RJQ__SSCMD_SETUP:
        out->kind = RJQ__SSOUT_SETUP_ERROR;
        out->step = s.step;
        out->detail = words;
        return;
    case RJQ__SSCMD_PING:
        proto(out, words);
        return;
    case RJQ__SSCMD_UNSUB:
        s.ch->nunsub--;
        maybe_remove(b, s.ch);
        return;
    default: { /* RJQ__SSCMD_SUB */
        rjq__ssch *e = s.ch;
        e->nsub--;
        int report = e->wanted && e->nsub == 0 && e->nunsub == 0;
        if (report) { /* the error names no channel: the entry's name, kept until done */
            e->wanted = 0;
            b->nwanted--;
            e->pinned = 1;
            out->kind = RJQ__SSOUT_REFUSED;
            out->channel = e->name;
            out->chlen = e->len;
            out->detail = words;
            out->pinned = e;
        }
        maybe_remove(b, e);
        return;
    }
    }
}

void rjq__ssbook_reply(rjq__ssbook *b, const redisReply *r, rjq__ssout *out) {
    memset(out, 0, sizeof *out);
    if (r == NULL) {
        proto(out, "no reply");
        return;
    }
    switch (r->type) {
    case REDIS_REPLY_ARRAY: {
        if (r->elements < 1 || r->element == NULL || !is_str(r->element[0])) {
            proto(out, "an array reply of unknown shape");
            return;
        }
        const redisReply *kind = r->element[0];
        if (str_is(kind, "smessage")) on_smessage(b, r, out);
        else if (str_is(kind, "ssubscribe")) on_ssubscribe(b, r, out);
        else if (str_is(kind, "sunsubscribe")) on_sunsubscribe(b, r, out);
        else if (str_is(kind, "pong")) {
            const rjq__sssent *h = head(b);
            rjq__sssent s = {0, 0, 0, NULL};
            if (r->elements != 2 || !is_str(r->element[1]) || h == NULL || h->kind != RJQ__SSCMD_PING) {
                proto(out, "a pong no PING asked for");
                return;
            }
            take_head(b, &s);
            out->kind = RJQ__SSOUT_PONG;
        } else {
            proto(out, "an array reply of unknown kind");
        }
        return;
    }
    case REDIS_REPLY_STATUS: {
        const rjq__sssent *h = head(b);
        rjq__sssent s = {0, 0, 0, NULL};
        if (h && h->kind == RJQ__SSCMD_SETUP) {
            take_head(b, &s);
            out->kind = RJQ__SSOUT_SETUP_OK;
            out->step = s.step;
        } else if (h && h->kind == RJQ__SSCMD_PING && status_is_pong(r)) {
            take_head(b, &s);
            out->kind = RJQ__SSOUT_PONG;
        } else {
            proto(out, "a status reply no command asked for");
        }
        return;
    }
    case REDIS_REPLY_ERROR:
        on_error(b, r, out);
        return;
    default:
        proto(out, "a reply of unexpected type");
        return;
    }
}

size_t rjq__ssbook_reset(rjq__ssbook *b) {
    size_t lost = 0;
    b->count = b->head = 0;
    for (size_t i = 0; i < b->nbuckets; i++) {
        rjq__ssch *e = b->buckets[i];
        while (e) {
            rjq__ssch *next = e->next;
            int was = e->confirmed || e->nsub > 0;
            e->confirmed = e->nsub = e->nunsub = 0;
            e->last = 0;
            if (e->wanted && was && !e->lost_mark) {
                e->lost_mark = 1;
                e->lost_next = NULL;
                if (b->lost_tail) b->lost_tail->lost_next = e;
                else b->lost = e;
                b->lost_tail = e;
                lost++;
            }
            maybe_remove(b, e);
            e = next;
        }
    }
    return lost;
}

void rjq__ssbook_out_done(rjq__ssbook *b, rjq__ssout *out) {
    rjq__ssch *e = out->pinned;
    out->pinned = NULL;
    if (e == NULL) return;
    e->pinned = 0;
    maybe_remove(b, e);
}

rjq__ssch *rjq__ssbook_lost_peek(const rjq__ssbook *b) {
    return b->lost;
}

void rjq__ssbook_lost_done(rjq__ssbook *b, rjq__ssch *e) {
    if (b->lost != e) return;
    b->lost = e->lost_next;
    if (b->lost == NULL) b->lost_tail = NULL;
    e->lost_mark = 0;
    e->lost_next = NULL;
    maybe_remove(b, e);
}

void rjq__ssbook_each(rjq__ssbook *b, int (*fn)(rjq__ssch *e, void *arg), void *arg) {
    for (size_t i = 0; i < b->nbuckets; i++)
        for (rjq__ssch *e = b->buckets[i]; e; e = e->next)
            if (fn(e, arg) != 0) return;
}
