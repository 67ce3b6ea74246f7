/*
 * Routing by slot (docs/cluster.md 3.1-3.4): which command connection a
 * request of a slot goes to.
 *
 * A standalone server (or Sentinel's master) is the one-node case: every
 * slot goes to the client's command connection, c->cmd, and nothing here
 * runs. On a Redis Cluster the command connection to the URL's node (the
 * seed) stays, for slot-less commands and for reading the slot table;
 * each master a request goes to gets one more command connection (a link
 * of this file), made on first use and set up like the seed's (AUTH,
 * CLIENT SETNAME, TLS, the function library: the request layer's set-up
 * hooks), so a promoted replica or a new master has the library before
 * its first request.
 *
 * Finding out: the seed's set-up asks CLUSTER SLOTS once (the first
 * connect that gets an answer). An error (cluster support disabled, a
 * server without CLUSTER, an ACL without it) means a standalone server:
 * nothing changes. A table means a cluster: from then on the slot table
 * routes. The table is refreshed (CLUSTER SLOTS on a ready connection, one
 * at a time, at most one a second) when the request layer asks: after a
 * MOVED (which updates the table at once as well), CLUSTERDOWN, READONLY
 * and a lost master connection. A refresh that moves slots tells the
 * request layer (its `changed` hook) so that requests waiting for a node
 * that went can go where the table says now; connections to nodes that
 * are no master any more are closed unless they are up (a node that comes
 * back as a master is reached by them again).
 *
 * The order of one slot's requests (route_hold): while requests of a slot
 * are in flight on one connection, a request of that slot that would go to
 * another (a redirect, a table that changed) waits until they are
 * answered, so enqueues of a queue keep their order through a migration.
 *
 * This file knows slots and nodes, never queues.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_private.h"
#include "shardlink.h"
#include "slotmap.h"
#include "validate.h"

#define REFRESH_MIN_MS 1000 /* at most one refresh a second */

/* A node's command connection, its sharded pub/sub link (made on first
 * use, with pubsub's hooks), and the node's address as the table says. */
typedef struct node_link {
    rjq__node_addr addr;
    rjq__conn conn;
    rjq__shardlink *sub;
} node_link;

/* A refresh in flight: orphaned (c NULL) when the client goes first. */
typedef struct refresh {
    rjq_client *c;
    rjq__conn *on;
} refresh;

struct rjq__route {
    int mode;                  /* RJQ__ROUTE_* */
    rjq__slotmap map;
    node_link **links;         /* a connection per node used (never freed before the client) */
    size_t nlinks, cap;
    const rjq__conn_hooks *hooks; /* the request layer's, for new links */
    void (*changed)(rjq_client *c);
    refresh *inflight;         /* the refresh sent, or NULL */
    int wanted;                /* a refresh was asked for */
    uint64_t last_ms;          /* when the last one was sent */
    rjq__timer timer;          /* sends a wanted refresh when its second is over */
    int16_t *pins;             /* per node of the table: the lowest slot it serves (-1: none);
                                  NULL: to compute again (the table changed) */
    uint32_t *pending;         /* per slot: requests in flight (cluster only) */
    rjq__conn **last;          /* per slot: the connection they are in flight on */
    const rjq__route_sub_hooks *sub_hooks; /* pubsub's (rjq__route_set_sub_hooks) */
};

int rjq__route_mode(const rjq_client *c) {
    return c->route ? c->route->mode : RJQ__ROUTE_UNKNOWN;
}

static void send_refresh(rjq_client *c);

static void on_refresh_timer(rjq__timer *t) {
    send_refresh(t->owner);
}

int rjq__route_init(rjq_client *c, const rjq__conn_hooks *hooks, void (*changed)(rjq_client *c)) {
    rjq__route *rt = calloc(1, sizeof *rt);
    if (rt == NULL) return RJQ_ENOMEM;
    rjq__slotmap_init(&rt->map);
    rt->hooks = hooks;
    rt->changed = changed;
    int rc = rjq__timer_setup(c, &rt->timer, on_refresh_timer, c);
    if (rc != RJQ_OK) {
        free(rt);
        return rc;
    }
    c->route = rt;
    return RJQ_OK;
}

void rjq__route_free(rjq_client *c) {
    rjq__route *rt = c->route;
    if (rt == NULL) return;
    for (size_t i = 0; i < rt->nlinks; i++) {
        if (rt->links[i]->conn.state != RJQ__LINK_RETIRED) rjq__conn_close(&rt->links[i]->conn);
        if (rt->links[i]->sub) rjq__shardlink_free(rt->links[i]->sub);
        rt->links[i]->sub = NULL;
    }
    rjq__timer_teardown(c, &rt->timer);
    if (rt->inflight) rt->inflight->c = NULL; /* its callback frees it */
    for (size_t i = 0; i < rt->nlinks; i++) free(rt->links[i]);
    free(rt->links);
    free(rt->pending);
    free(rt->last);
    free(rt->pins);
    rjq__slotmap_clear(&rt->map);
    free(rt);
    c->route = NULL;
}

/* ---- links ------------------------------------------------------------------ */

static int link_is(const node_link *l, const rjq__node_addr *a) {
    return l->addr.port == a->port && strcmp(l->addr.host, a->host) == 0;
}

/* Set l up as a new command connection to a, and start it (a failure is
 * reported from its timer, never from here). */
static int start_link(rjq_client *c, node_link *nl, const rjq__node_addr *a) {
    rjq__conn *l = &nl->conn;
    nl->addr = *a;
    int numeric = rjq__url_is_address(a->host);
    int rc = rjq__conn_init(c, l, RJQ_CONN_COMMAND, c->route->hooks);
    if (rc != RJQ_OK) return rc;
    if ((rc = rjq__conn_aim(l, a->host, a->port, numeric)) != RJQ_OK) {
        rjq__conn_close(l);
        return rc;
    }
    rjq__conn_start(l);
    return RJQ_OK;
}

rjq__conn *rjq__route_link_at(rjq_client *c, const rjq__node_addr *a) {
    rjq__route *rt = c->route;
    rjq__node_addr known = *a; /* "?:port" (an ASK): the table's node on that port */
    if (!rjq__slotmap_known(&rt->map, &known)) return NULL;
    a = &known;
    for (size_t i = 0; i < rt->nlinks; i++)
        if (link_is(rt->links[i], a)) {
            node_link *l = rt->links[i];
            if (l->conn.state == RJQ__LINK_RETIRED && start_link(c, l, a) != RJQ_OK) return NULL;
            return &l->conn; /* (a node back in the table is connected again) */
        }
    if (rt->nlinks == rt->cap) {
        size_t cap = rt->cap ? rt->cap * 2 : 8;
        node_link **links = realloc(rt->links, cap * sizeof *links);
        if (links == NULL) return NULL;
        rt->links = links;
        rt->cap = cap;
    }
    node_link *l = calloc(1, sizeof *l);
    if (l == NULL) return NULL;
    if (start_link(c, l, a) != RJQ_OK) {
        free(l);
        return NULL;
    }
    rt->links[rt->nlinks++] = l;
    return &l->conn;
}

/* A ready connection for a slot-less command or a refresh: the seed's if
 * it is up, else any up one; NULL: none. */
static rjq__conn *any_ready(rjq_client *c) {
    if (rjq__conn_ready(&c->cmd)) return &c->cmd;
    rjq__route *rt = c->route;
    for (size_t i = 0; rt && i < rt->nlinks; i++)
        if (rjq__conn_ready(&rt->links[i]->conn)) return &rt->links[i]->conn;
    return NULL;
}

rjq__conn *rjq__route_link(rjq_client *c, int slot) {
    rjq__route *rt = c->route;
    if (rt == NULL || rt->mode != RJQ__ROUTE_CLUSTER) return &c->cmd;
    if (slot < 0) {
        rjq__conn *l = any_ready(c);
        return l ? l : &c->cmd;
    }
    const rjq__slot_node *n = rjq__slotmap_master(&rt->map, slot);
    rjq__conn *l = n ? rjq__route_link_at(c, &n->addr) : NULL;
    return l ? l : &c->cmd; /* no owner known (or no memory): the seed answers MOVED */
}

void rjq__route_set_sub_hooks(rjq_client *c, const rjq__route_sub_hooks *h) {
    c->route->sub_hooks = h;
}

struct rjq__shardlink *rjq__route_sublink(rjq_client *c, int slot, int *rc) {
    rjq__route *rt = c->route;
    *rc = RJQ_OK;
    if (rt == NULL || rt->mode != RJQ__ROUTE_CLUSTER || slot < 0 || rt->sub_hooks == NULL)
        return NULL;
    const rjq__slot_node *n = rjq__slotmap_master(&rt->map, slot);
    if (n == NULL || n->addr.unknown) return NULL; /* no owner known: a refresh is due */
    /* the node's command link holds it (made now if need be: a master
     * whose channels are wanted will see requests too) */
    node_link *nl = NULL;
    if (rjq__route_link_at(c, &n->addr) == NULL) {
        *rc = RJQ_ENOMEM;
        return NULL;
    }
    for (size_t i = 0; i < rt->nlinks && nl == NULL; i++)
        if (link_is(rt->links[i], &n->addr)) nl = rt->links[i];
    RJQ_ASSERT(nl != NULL); /* (rjq__route_link_at found or made it) */
    if (nl->sub == NULL)
        *rc = rjq__shardlink_new(c, nl->addr.host, nl->addr.port, rt->sub_hooks->link, c, &nl->sub);
    return nl->sub;
}

void rjq__route_each(rjq_client *c, void (*fn)(rjq__conn *conn, void *arg), void *arg) {
    fn(&c->cmd, arg);
    rjq__route *rt = c->route;
    for (size_t i = 0; rt && i < rt->nlinks; i++)
        if (rt->links[i]->conn.state != RJQ__LINK_RETIRED) fn(&rt->links[i]->conn, arg);
}

/* ---- the slot table ------------------------------------------------------- */

/* Close the links whose node is no master of the table and that are not up. */
static void retire_links(rjq__route *rt) {
    for (size_t i = 0; i < rt->nlinks; i++) {
        node_link *l = rt->links[i];
        if (l->conn.state == RJQ__LINK_RETIRED || rjq__conn_ready(&l->conn)) continue;
        int master = 0;
        for (size_t n = 0; n < rt->map.nnodes && !master; n++)
            master = rt->map.nodes[n].master < 0 && link_is(l, &rt->map.nodes[n].addr);
        if (!master) rjq__conn_close(&l->conn);
    }
}

/* The mode is known (from UNKNOWN): pubsub subscribes what waited for it. */
static void mode_known(rjq_client *c, int mode) {
    rjq__route *rt = c->route;
    if (rt->mode != RJQ__ROUTE_UNKNOWN) return;
    rt->mode = mode;
    if (rt->sub_hooks) rt->sub_hooks->mode(c);
}

static int become_cluster(rjq__route *rt) {
    if (rt->pending == NULL) {
        rt->pending = calloc(RJQ__SLOTS, sizeof *rt->pending);
        rt->last = calloc(RJQ__SLOTS, sizeof *rt->last);
        if (rt->pending == NULL || rt->last == NULL) {
            free(rt->pending);
            free(rt->last);
            rt->pending = NULL;
            rt->last = NULL;
            return RJQ_ENOMEM;
        }
    }
    return RJQ_OK;
}

/* A CLUSTER SLOTS reply from the node at `asked`: the new table. */
static int take_table(rjq_client *c, const redisReply *r, const char *asked) {
    rjq__route *rt = c->route;
    int rc = rjq__slotmap_parse_slots(&rt->map, r, asked ? asked : "127.0.0.1");
    if (rc != RJQ_OK) {
        rjq__errmsg(c, "cluster: CLUSTER SLOTS answered a table rjq cannot read (kept the old one)");
        rjq__emit(c, RJQ_EVENT_ERROR, RJQ_CONN_COMMAND, c->errmsg);
        return rc;
    }
    free(rt->pins); /* (the masters' pins are computed again when asked) */
    rt->pins = NULL;
    retire_links(rt);
    return RJQ_OK;
}

static void on_refresh_reply(redisAsyncContext *ac, void *reply, void *priv) {
    refresh *f = priv;
    rjq_client *c = f->c;
    redisReply *r = reply;
    (void)ac;
    if (c == NULL) { /* the client went */
        free(f);
        return;
    }
    rjq__route *rt = c->route;
    rt->inflight = NULL;
    if (c->closing) {
        free(f);
        return;
    }
    rjq__enter(c);
    if (r && r->type == REDIS_REPLY_ARRAY && take_table(c, r, rjq__conn_address(f->on)) == RJQ_OK) {
        free(f);
        rt->changed(c);
        if (rt->sub_hooks && !c->closing) rt->sub_hooks->moved(c);
    } else {
        free(f);
        rt->wanted = 1; /* lost, or an error (CLUSTERDOWN...): later */
        if (!rjq__timer_armed(&rt->timer)) rjq__timer_start(c, &rt->timer, REFRESH_MIN_MS);
    }
    rjq__leave(c);
}

static void send_refresh(rjq_client *c) {
    rjq__route *rt = c->route;
    if (rt->mode != RJQ__ROUTE_CLUSTER || !rt->wanted || rt->inflight || c->closing) return;
    uint64_t now = rjq__now_ms();
    if (rt->last_ms && now - rt->last_ms < REFRESH_MIN_MS) {
        if (!rjq__timer_armed(&rt->timer))
            rjq__timer_start(c, &rt->timer, REFRESH_MIN_MS - (now - rt->last_ms));
        return;
    }
    rjq__conn *on = any_ready(c);
    if (on == NULL) return; /* the next connection up sends it (rjq__route_ready) */
    refresh *f = malloc(sizeof *f);
    if (f == NULL) return;
    f->c = c;
    f->on = on;
    if (redisAsyncCommand(on->ac, on_refresh_reply, f, "CLUSTER SLOTS") != REDIS_OK) {
        free(f);
        return;
    }
    rt->inflight = f;
    rt->wanted = 0;
    rt->last_ms = now;
}

void rjq__route_refresh(rjq_client *c) {
    rjq__route *rt = c->route;
    if (rt == NULL || rt->mode != RJQ__ROUTE_CLUSTER) return;
    rt->wanted = 1;
    send_refresh(c);
}

void rjq__route_ready(rjq__conn *conn) {
    rjq__route *rt = conn->c->route;
    if (rt && rt->wanted && !rt->inflight && !rjq__timer_armed(&rt->timer)) send_refresh(conn->c);
}

void rjq__route_moved(rjq_client *c, int slot, const rjq__node_addr *a) {
    rjq__route *rt = c->route;
    free(rt->pins);
    rt->pins = NULL;
    rjq__node_addr known = *a; /* "?:port": the table's node on that port, if it knows one */
    rjq__slotmap_known(&rt->map, &known);
    if (rjq__slotmap_moved(&rt->map, slot, &known) != RJQ_OK) rt->wanted = 1;
    rjq__route_refresh(c);
}

/* The seed's set-up step: CLUSTER SLOTS says whether this is a cluster. */
static void on_slots_step(rjq__conn *conn, redisReply *r, void *arg) {
    rjq_client *c = conn->c;
    rjq__route *rt = c->route;
    (void)arg;
    if (r->type == REDIS_REPLY_ERROR) {
        /* cluster support disabled, an old server, an ACL without CLUSTER:
         * a standalone server as far as rjq can tell (NOAUTH: the session
         * is refused by its AUTH step's rules) */
        if (strncmp(r->str, "NOAUTH", 6) == 0) rjq__conn_step_failed(conn, "CLUSTER SLOTS", r->str);
        else mode_known(c, RJQ__ROUTE_STANDALONE);
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0) {
        mode_known(c, RJQ__ROUTE_STANDALONE);
        return;
    }
    if (become_cluster(rt) != RJQ_OK) {
        rjq__errmsg(c, "cluster: out of memory");
        rjq__conn_drop(conn, "out of memory");
        return;
    }
    int first = rt->mode == RJQ__ROUTE_UNKNOWN;
    if (first) rt->mode = RJQ__ROUTE_CLUSTER; /* (before the table: retire_links) */
    take_table(c, r, rjq__conn_address(conn));
    if (first && rt->sub_hooks) rt->sub_hooks->mode(c);
}

int rjq__route_setup(rjq__conn *conn) {
    rjq_client *c = conn->c;
    rjq__route *rt = c->route;
    /* only the seed asks; Sentinel and unix sockets serve no cluster */
    if (rt == NULL || conn != &c->cmd || rt->mode == RJQ__ROUTE_STANDALONE) return RJQ_OK;
    if (c->url.master || c->url.path) {
        mode_known(c, RJQ__ROUTE_STANDALONE);
        return RJQ_OK;
    }
    const char *argv[2] = {"CLUSTER", "SLOTS"};
    return rjq__conn_step(conn, on_slots_step, NULL, 2, argv, NULL);
}

/* ---- the order of a slot's requests --------------------------------------- */

int rjq__route_hold(const rjq_client *c, int slot, const rjq__conn *to) {
    const rjq__route *rt = c->route;
    if (rt == NULL || rt->pending == NULL || slot < 0) return 0;
    return rt->pending[slot] > 0 && rt->last[slot] != to;
}

int rjq__route_sent(rjq_client *c, int slot, rjq__conn *on) {
    rjq__route *rt = c->route;
    if (rt == NULL || rt->pending == NULL || slot < 0) return 0;
    rt->pending[slot]++;
    rt->last[slot] = on;
    return 1;
}

int rjq__route_answered(rjq_client *c, int slot) {
    rjq__route *rt = c->route;
    if (rt == NULL || rt->pending == NULL || slot < 0) return 0;
    RJQ_ASSERT(rt->pending[slot] > 0);
    return --rt->pending[slot] == 0;
}

/* ---- each master ---------------------------------------------------------- */

/* The pins of the table's nodes, computed once per table (one pass over
 * the slots); NULL when out of memory. */
static const int16_t *pins_of(rjq__route *rt) {
    if (rt->pins) return rt->pins;
    size_t n = rt->map.nnodes ? rt->map.nnodes : 1;
    if ((rt->pins = malloc(n * sizeof *rt->pins)) == NULL) return NULL;
    for (size_t i = 0; i < n; i++) rt->pins[i] = -1;
    for (int s = RJQ__SLOTS - 1; s >= 0; s--) {
        int owner = rt->map.owner[s];
        if (owner >= 0 && (size_t)owner < n) rt->pins[owner] = (int16_t)s;
    }
    return rt->pins;
}

int rjq__route_master_pin(const rjq_client *c, int slot) {
    rjq__route *rt = c->route;
    if (rt == NULL || rt->mode != RJQ__ROUTE_CLUSTER || slot < 0 || slot >= RJQ__SLOTS) return -1;
    int owner = rt->map.owner[slot];
    const int16_t *pins = owner >= 0 ? pins_of(rt) : NULL;
    return pins && (size_t)owner < rt->map.nnodes ? pins[owner] : -1;
}

/* The one "for each master" of the library: the masters of the slot
 * table, each named by the lowest slot it serves (a request of that slot,
 * or of a key tagged for it, goes to that master by the ordinary routing,
 * redirects included), in slot order. */
size_t rjq__route_masters(const rjq_client *c, int *pins, size_t max) {
    const rjq__route *rt = c->route;
    if (rt == NULL || rt->mode != RJQ__ROUTE_CLUSTER) return 0;
    size_t n = 0;
    char seen[RJQ__SLOTMAP_NODES_MAX] = {0};
    for (int s = 0; s < RJQ__SLOTS && n < max; s++) {
        int owner = rt->map.owner[s];
        if (owner < 0 || owner >= RJQ__SLOTMAP_NODES_MAX || seen[owner]) continue;
        seen[owner] = 1;
        pins[n++] = s;
    }
    return n;
}
