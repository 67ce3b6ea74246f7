/*
 * The slot table of a Redis Cluster and the MOVED/ASK redirect parser
 * (slotmap.h). Nothing read from a reply is trusted: each count, number and
 * length is checked before use, and a table is built aside and swapped in
 * only when the whole reply was good.
 */
#include "slotmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rjq.h"
#include "validate.h"

void rjq__slotmap_init(rjq__slotmap *m) {
    memset(m, 0, sizeof *m);
    for (int i = 0; i < RJQ__SLOTS; i++) m->owner[i] = -1;
}

void rjq__slotmap_clear(rjq__slotmap *m) {
    free(m->nodes);
    rjq__slotmap_init(m);
}

/* Is s (len bytes) usable as a host: not too long, and only bytes a host
 * name or address has (printable, no space)? */
static int host_ok(const char *s, size_t len) {
    if (len >= RJQ__HOST_MAX) return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f) return 0;
    return 1;
}

/* Fill a from an endpoint of len bytes (NULL: a nil endpoint) and a port. */
static int addr_set(rjq__node_addr *a, const char *host, size_t len, long long port,
                    const char *asked) {
    if (port < 1 || port > 65535) return RJQ_EPROTO;
    if (host == NULL || len == 0) { /* the node that answered */
        host = asked ? asked : "";
        len = strlen(host);
    }
    if (!host_ok(host, len)) return RJQ_EPROTO;
    memcpy(a->host, host, len);
    a->host[len] = '\0';
    a->port = (int)port;
    a->unknown = len == 1 && host[0] == '?';
    return RJQ_OK;
}

static int same_addr(const rjq__node_addr *a, const rjq__node_addr *b) {
    return a->port == b->port && strcmp(a->host, b->host) == 0;
}

static int find_node(const rjq__slotmap *m, const rjq__node_addr *a) {
    for (size_t i = 0; i < m->nnodes; i++)
        if (same_addr(&m->nodes[i].addr, a)) return (int)i;
    return -1;
}

/* The index of the node at a (added when new; master: its master's index
 * or -1), or a negative RJQ_E* code. */
static int add_node(rjq__slotmap *m, const rjq__node_addr *a, const char *id, size_t idlen,
                    int master) {
    int i = find_node(m, a);
    if (i >= 0) {
        if (idlen && m->nodes[i].id[0] == '\0') {
            memcpy(m->nodes[i].id, id, idlen);
            m->nodes[i].id[idlen] = '\0';
        }
        return i;
    }
    if (m->nnodes >= RJQ__SLOTMAP_NODES_MAX) return RJQ_EPROTO;
    if (m->nnodes == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 8;
        if (cap > RJQ__SLOTMAP_NODES_MAX) cap = RJQ__SLOTMAP_NODES_MAX;
        rjq__slot_node *n = realloc(m->nodes, cap * sizeof *n);
        if (n == NULL) return RJQ_ENOMEM;
        m->nodes = n;
        m->cap = cap;
    }
    rjq__slot_node *n = &m->nodes[m->nnodes];
    memset(n, 0, sizeof *n);
    n->addr = *a;
    memcpy(n->id, id, idlen);
    n->id[idlen] = '\0';
    n->master = master;
    return (int)m->nnodes++;
}

/* The "ip" of a node entry's metadata (a map: RESP3, or RESP2's flat array
 * of names and values), or NULL when it has none or has another shape. */
static const char *meta_ip(const redisReply *meta, size_t *len) {
    if (meta == NULL) return NULL;
    int map = meta->type == REDIS_REPLY_ARRAY;
#ifdef REDIS_REPLY_MAP
    map = map || meta->type == REDIS_REPLY_MAP;
#endif
    if (!map || meta->elements % 2 != 0) return NULL;
    for (size_t k = 0; k + 1 < meta->elements; k += 2) {
        const redisReply *n = meta->element[k], *v = meta->element[k + 1];
        if (n == NULL || v == NULL || n->type != REDIS_REPLY_STRING || n->str == NULL ||
            v->type != REDIS_REPLY_STRING || v->str == NULL)
            continue;
        if (n->len == 2 && memcmp(n->str, "ip", 2) == 0 && v->len > 0 && !(v->len == 1 && v->str[0] == '?')) {
            *len = v->len;
            return v->str;
        }
    }
    return NULL;
}

/* One node entry of a range: [endpoint, port, id?, metadata?...]. An
 * endpoint "?" (host names preferred, the node has none) is replaced by
 * the IP its metadata gives. */
static int parse_node(const redisReply *e, const char *asked, rjq__node_addr *a, const char **id,
                      size_t *idlen) {
    if (e == NULL || e->type != REDIS_REPLY_ARRAY || e->elements < 2) return RJQ_EPROTO;
    const redisReply *h = e->element[0], *p = e->element[1];
    if (h == NULL || p == NULL || p->type != REDIS_REPLY_INTEGER) return RJQ_EPROTO;
    const char *host = NULL;
    size_t hlen = 0;
    if (h->type == REDIS_REPLY_STRING) {
        if (h->str == NULL) return RJQ_EPROTO;
        host = h->str;
        hlen = h->len;
    } else if (h->type != REDIS_REPLY_NIL) {
        return RJQ_EPROTO;
    }
    if (hlen == 1 && host[0] == '?' && e->elements >= 4) { /* its IP instead, if given */
        size_t iplen;
        const char *ip = meta_ip(e->element[3], &iplen);
        if (ip != NULL) {
            host = ip;
            hlen = iplen;
        }
    }
    int rc = addr_set(a, host, hlen, p->integer, asked);
    if (rc != RJQ_OK) return rc;
    *id = "";
    *idlen = 0;
    if (e->elements >= 3) {
        const redisReply *i = e->element[2];
        if (i == NULL || i->type != REDIS_REPLY_STRING || i->str == NULL ||
            i->len > RJQ__NODE_ID_MAX || !host_ok(i->str, i->len))
            return RJQ_EPROTO;
        *id = i->str;
        *idlen = i->len;
    }
    /* (the 4th element, the metadata, serves only an endpoint "?": the
     * endpoint is the one the server prefers) */
    return RJQ_OK;
}

static int parse_range(rjq__slotmap *m, const redisReply *r, const char *asked) {
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
        r->elements > 3 + RJQ__SLOTMAP_NODES_MAX)
        return RJQ_EPROTO;
    const redisReply *s = r->element[0], *e = r->element[1];
    if (s == NULL || e == NULL || s->type != REDIS_REPLY_INTEGER || e->type != REDIS_REPLY_INTEGER)
        return RJQ_EPROTO;
    if (s->integer < 0 || e->integer < s->integer || e->integer >= RJQ__SLOTS) return RJQ_EPROTO;
    int master = -1;
    for (size_t k = 2; k < r->elements; k++) {
        rjq__node_addr a;
        const char *id;
        size_t idlen;
        int rc = parse_node(r->element[k], asked, &a, &id, &idlen);
        if (rc != RJQ_OK) return rc;
        int i = add_node(m, &a, id, idlen, k == 2 ? -1 : master);
        if (i < 0) return i;
        if (k == 2) {
            if (m->nodes[i].master >= 0) return RJQ_EPROTO; /* listed as a replica before */
            master = i;
        } else if (i == master || m->nodes[i].master != master) {
            return RJQ_EPROTO; /* its own replica, or a replica of two masters */
        }
    }
    for (long long slot = s->integer; slot <= e->integer; slot++) {
        if (m->owner[slot] != -1) return RJQ_EPROTO; /* two ranges share it */
        m->owner[slot] = (int16_t)master;
        m->nslots++;
    }
    return RJQ_OK;
}

int rjq__slotmap_parse_slots(rjq__slotmap *m, const redisReply *r, const char *asked) {
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements > RJQ__SLOTS) return RJQ_EPROTO;
    rjq__slotmap *t = malloc(sizeof *t);
    if (t == NULL) return RJQ_ENOMEM;
    rjq__slotmap_init(t);
    int rc = RJQ_OK;
    for (size_t i = 0; i < r->elements && rc == RJQ_OK; i++) rc = parse_range(t, r->element[i], asked);
    if (rc == RJQ_OK) {
        free(m->nodes);
        *m = *t;
    } else {
        free(t->nodes);
    }
    free(t);
    return rc;
}

const rjq__slot_node *rjq__slotmap_master(const rjq__slotmap *m, int slot) {
    if (slot < 0 || slot >= RJQ__SLOTS || m->owner[slot] < 0) return NULL;
    return &m->nodes[m->owner[slot]];
}

/* A decimal number no greater than max, no sign, no leading zero (except
 * "0"), at p (len bytes): its value, or -1. */
static long number(const char *p, size_t len, long max) {
    long long v;
    if (len == 0 || p[0] == '-' || (len > 1 && p[0] == '0')) return -1;
    if (rjq__parse_ll(p, len, 0, max, &v) != 0) return -1;
    return (long)v;
}

int rjq__redirect_parse(const char *err, size_t len, const char *asked, rjq__redirect *out) {
    size_t at;
    rjq__redirect_kind kind;
    if (len > 6 && memcmp(err, "MOVED ", 6) == 0) {
        kind = RJQ__REDIRECT_MOVED;
        at = 6;
    } else if (len > 4 && memcmp(err, "ASK ", 4) == 0) {
        kind = RJQ__REDIRECT_ASK;
        at = 4;
    } else {
        return RJQ_EPROTO;
    }
    const char *slot_p = err + at;
    const char *sp = memchr(slot_p, ' ', len - at);
    if (sp == NULL) return RJQ_EPROTO;
    long slot = number(slot_p, (size_t)(sp - slot_p), RJQ__SLOTS - 1);
    if (slot < 0) return RJQ_EPROTO;
    const char *ep = sp + 1, *end = err + len;
    const char *colon = NULL; /* the last ':' */
    for (const char *q = ep; q < end; q++)
        if (*q == ':') colon = q;
    if (colon == NULL) return RJQ_EPROTO;
    long port = number(colon + 1, (size_t)(end - colon - 1), 65535);
    if (port < 0) return RJQ_EPROTO;
    rjq__redirect r;
    memset(&r, 0, sizeof r);
    int rc = addr_set(&r.addr, ep, (size_t)(colon - ep), port, asked);
    if (rc != RJQ_OK) return rc;
    r.kind = kind;
    r.slot = (int)slot;
    *out = r;
    return RJQ_OK;
}

int rjq__slotmap_moved(rjq__slotmap *m, int slot, const rjq__node_addr *addr) {
    if (slot < 0 || slot >= RJQ__SLOTS || addr->port < 1 || addr->port > 65535) return RJQ_EPROTO;
    int i = add_node(m, addr, "", 0, -1);
    if (i < 0) return i;
    if (m->nodes[i].master >= 0) m->nodes[i].master = -1; /* promoted */
    if (m->owner[slot] == -1) m->nslots++;
    m->owner[slot] = (int16_t)i;
    return RJQ_OK;
}

int rjq__slotmap_known(const rjq__slotmap *m, rjq__node_addr *a) {
    if (!a->unknown) return 1;
    int found = -1;
    for (size_t i = 0; i < m->nnodes; i++) {
        const rjq__node_addr *n = &m->nodes[i].addr;
        if (n->unknown || n->port != a->port) continue;
        if (found >= 0 && strcmp(m->nodes[found].addr.host, n->host) != 0) return 0; /* two hosts */
        found = (int)i;
    }
    if (found < 0) return 0;
    *a = m->nodes[found].addr;
    return 1;
}

const char *rjq__node_addr_format(const rjq__node_addr *a, char *buf, size_t size) {
    if (size == 0) return buf;
    int v6 = strchr(a->host, ':') != NULL;
    int n = snprintf(buf, size, v6 ? "[%s]:%d" : "%s:%d", a->host, a->port);
    if (n < 0) buf[0] = '\0';
    return buf;
}
