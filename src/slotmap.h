/*
 * The slot table of a Redis Cluster: which master serves each of the
 * 16384 slots, read from a CLUSTER SLOTS reply and kept current by the
 * MOVED redirects the masters answer with; and the parsing of the MOVED and
 * ASK error strings. A leaf: pure functions of the bytes they are given,
 * no client, no I/O; the routing layer (docs/cluster.md) owns a table and
 * the connections to its nodes.
 *
 * Every number and length read from a reply is range-checked: a reply of
 * another shape is RJQ_EPROTO and leaves the table as it was.
 *
 * Endpoints. A node's endpoint is what the server prefers
 * (cluster-preferred-endpoint-type): an IPv4 or IPv6 address (without
 * brackets), a host name, an empty string or a nil (the node is reached at
 * the address the reply came from, on the port given: `asked` below), or
 * "?" (the node has no host name while host names are preferred). A "?" in
 * CLUSTER SLOTS is replaced by the "ip" of the node entry's metadata
 * (Redis 7 gives it whenever the preferred endpoint is not the IP); a "?"
 * with no IP given, and the "?" of a MOVED/ASK (which gives a port only),
 * set `unknown` (host "?"): rjq__slotmap_known finds such a node's address
 * by its port in the table, else it cannot be reached until a refresh
 * names it.
 */
#ifndef RJQ_SLOTMAP_H
#define RJQ_SLOTMAP_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "slot.h"
#include "url.h"

#define RJQ__SLOTMAP_NODES_MAX 1024 /* nodes (masters and replicas) of one table */
#define RJQ__NODE_ID_MAX 40         /* a node id's bytes (40 hex digits) */

typedef struct rjq__node_addr {
    char host[RJQ__HOST_MAX]; /* NUL-terminated: no NUL, space or control byte in it */
    int port;                 /* 1 .. 65535 */
    int unknown;              /* host is "?": no reachable endpoint (see above) */
} rjq__node_addr;

typedef struct rjq__slot_node {
    rjq__node_addr addr;
    char id[RJQ__NODE_ID_MAX + 1]; /* "" when the reply gave none */
    int master;                    /* index of its master in nodes; -1: it is a master */
} rjq__slot_node;

typedef struct rjq__slotmap {
    rjq__slot_node *nodes; /* masters and replicas, each (host, port) once */
    size_t nnodes, cap;
    int16_t owner[RJQ__SLOTS]; /* index in nodes of the slot's master; -1: none known */
    size_t nslots;             /* slots that have an owner */
} rjq__slotmap;

/* An empty table (no slot has an owner). */
void rjq__slotmap_init(rjq__slotmap *m);
/* Free what the table holds; it is empty afterwards. */
void rjq__slotmap_clear(rjq__slotmap *m);

/* Replace the table with the one a CLUSTER SLOTS reply describes (RESP2 or
 * RESP3): an array of [start, end, master, replica...] ranges, each node
 * [endpoint, port, id?, metadata?]. asked: the host the reply came from (an
 * empty or nil endpoint means it). Returns RJQ_OK; RJQ_EPROTO when the reply
 * has another shape, a slot or port out of range, two ranges that share a
 * slot, more than RJQ__SLOTMAP_NODES_MAX nodes or an endpoint too long or
 * with bytes no host has; RJQ_ENOMEM. On error *m is unchanged. */
int rjq__slotmap_parse_slots(rjq__slotmap *m, const redisReply *r, const char *asked);

/* The master serving slot (0 .. RJQ__SLOTS - 1), or NULL when none is known
 * (or the slot is out of range). Valid until the table next changes. */
const rjq__slot_node *rjq__slotmap_master(const rjq__slotmap *m, int slot);

typedef enum rjq__redirect_kind {
    RJQ__REDIRECT_MOVED = 1, /* the slot lives at addr now: update the table, resend */
    RJQ__REDIRECT_ASK = 2    /* this one command: ASKING then the command at addr */
} rjq__redirect_kind;

typedef struct rjq__redirect {
    rjq__redirect_kind kind;
    int slot;
    rjq__node_addr addr;
} rjq__redirect;

/* Parse an error reply's text "MOVED <slot> <endpoint>:<port>" or
 * "ASK <slot> <endpoint>:<port>" (len bytes; the port follows the last ':',
 * so an IPv6 address is given bare, as the server writes it; an empty
 * endpoint means asked). Returns RJQ_OK; RJQ_EPROTO when the text is not
 * such a redirect or a number is out of range (slot 0 .. 16383, port
 * 1 .. 65535, no sign, no leading zeros beyond one digit, nothing after). */
int rjq__redirect_parse(const char *err, size_t len, const char *asked, rjq__redirect *out);

/* Record a MOVED: slot is served by the master at addr from now on (a node
 * the table knew as a replica becomes a master: a failover). Returns
 * RJQ_OK; RJQ_EPROTO for a slot out of range or a table already holding
 * RJQ__SLOTMAP_NODES_MAX nodes; RJQ_ENOMEM (the table is unchanged). */
int rjq__slotmap_moved(rjq__slotmap *m, int slot, const rjq__node_addr *addr);

/* An address that may be unknown ("?:port" of a redirect): when it is,
 * replace it with the address of the table's node on that port, if the
 * nodes on that port all have the same host. Returns 1 when *a is known
 * (now or already), 0 when not (a is unchanged). */
int rjq__slotmap_known(const rjq__slotmap *m, rjq__node_addr *a);
/* "host:port", "[v6]:port" for an address with a ':' in it, into buf
 * (always NUL-terminated; truncated if size is too small). Returns buf. */
const char *rjq__node_addr_format(const rjq__node_addr *a, char *buf, size_t size);

#endif
