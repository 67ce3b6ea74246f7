/*
 * Test helpers: a private Redis Cluster of 3 masters and 3 replicas on
 * free loopback ports (each node a redis-server of server.h in its own
 * temporary directory, stopped by its pid), and what the cluster tests do
 * to it: find the node serving a key or slot, migrate a slot by hand,
 * SIGKILL a master and wait for its replica's promotion, restart a node,
 * add a master and move slots with `redis-cli --cluster add-node/reshard`.
 * Every wait waits for the state it names (polling the nodes), bounded so
 * a broken cluster fails the test instead of hanging it.
 */
#ifndef RJQ_TEST_CLUSTER_H
#define RJQ_TEST_CLUSTER_H

#include <hiredis/hiredis.h>

#include "server.h"

#define CLUSTER_NODES 6   /* nodes 0..2 are the masters at the start, 3..5 replicas */
#define CLUSTER_MASTERS 3
#define CLUSTER_NODES_MAX 7 /* and one master a test adds (cluster_add_master) */

typedef struct test_cluster {
    test_server node[CLUSTER_NODES_MAX]; /* pid 0: stopped (killed) */
    char id[CLUSTER_NODES_MAX][41];      /* node ids (CLUSTER MYID) */
    int nnodes;                          /* nodes 0..nnodes-1: CLUSTER_NODES, one more once added */
    long node_timeout_ms;                /* cluster-node-timeout */
    char url[64];                        /* node 0's redis:// URL */
    char cli_log[300];                   /* the output of the last redis-cli --cluster reshard */
    char hostname[64];                   /* cluster-announce-hostname of every node ("": none) */
} test_cluster;

/* Start 6 nodes (cluster-enabled, cluster-node-timeout node_timeout_ms: 0
 * for 2000), join them with `redis-cli --cluster create ... --cluster-replicas
 * 1 --cluster-yes`, and wait until every node says cluster_state:ok, knows
 * all 6 nodes and agrees on who serves each slot, and every replica's link
 * to its master is up. Each node is killed if the test aborts. */
void cluster_start(test_cluster *c, long node_timeout_ms);
/* The same, every node announcing the host name `hostname` (a name that
 * resolves to 127.0.0.1 for the client) with cluster-preferred-endpoint-type
 * hostname: CLUSTER SLOTS and the MOVED/ASK redirects name the nodes by it.
 * Also waits until every running node's CLUSTER SLOTS names every node
 * so (the names travel with the cluster bus' pings). */
void cluster_start_named(test_cluster *c, long node_timeout_ms, const char *hostname);
/* Stop every node still running and remove their directories. */
void cluster_stop(test_cluster *c);

/* Start one more node (node c->nnodes, counted in c->nnodes from then on)
 * and add it to the cluster with `redis-cli --cluster add-node`: a master
 * serving no slot. Waits until every node knows it and the cluster is
 * settled (cluster_wait_settled); returns its index. */
int cluster_add_master(test_cluster *c);
/* The lowest slot master m serves, as a running node's CLUSTER SLOTS says
 * (-1: none). */
int cluster_first_slot(const test_cluster *c, int m);
/* `redis-cli --cluster reshard <a node> --cluster-from <from's id>
 * --cluster-to <to's id> --cluster-slots nslots --cluster-yes`: moves the
 * nslots lowest slots of master `from` (cluster_first_slot onwards, the
 * ones it serves) to master `to`, keys and all, with MIGRATE. Started in a
 * child process so the test's loop runs while it moves: returns its pid;
 * cluster_reshard_done(c, pid) is 0 while it runs, and once it has exited
 * (0, else the test fails with its output) waits until the cluster is
 * settled (every node agrees on the new owners) and returns 1.
 * cluster_reshard: both, waiting. */
pid_t cluster_reshard_start(test_cluster *c, int from, int to, int nslots);
int cluster_reshard_done(test_cluster *c, pid_t pid);
void cluster_reshard(test_cluster *c, int from, int to, int nslots);

/* A synchronous connection to node i (it must be running). */
redisContext *cluster_connect(const test_cluster *c, int i);
/* Commands with keys to a node, sent again after a transient refusal.
 * On a loaded machine a node that missed its peers' pings for a node
 * timeout thinks itself in a minority and answers CLUSTERDOWN until it has
 * heard from them and waited its rejoin delay (CI: "node 2, GET
 * rjq:{mq}:b: CLUSTERDOWN The cluster is down" right after a migration,
 * nothing killed); a restarted node answers LOADING, a replica whose link
 * is down MASTERDOWN. No test's check is about those states: the command
 * goes again once the cluster is settled (cluster_wait_settled), five times
 * at most, each refusal printed. Any other reply (an error too) is
 * returned. TRYAGAIN is not waited out (a test's own migration). */
/* argv on a connection of its own to node i (after ASKING when asking). */
redisReply *cluster_send(test_cluster *c, int i, int asking, int argc, const char **argv);
/* fmt (hiredis' format, no %b) on rc, a connection to a node of c. */
redisReply *cluster_cmd(test_cluster *c, redisContext *rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* cluster_cmd's integer (a string reply read as one, nil 0); any other
 * error fails the test. */
long long cluster_int(test_cluster *c, redisContext *rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* cluster_cmd / cluster_int on a connection of their own to node i. */
redisReply *cluster_node_cmd(test_cluster *c, int i, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
long long cluster_node_int(test_cluster *c, int i, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Is r an error that cluster_send and cluster_cmd send again? */
int cluster_transient(const redisReply *r);

/* The node index of a "host:port" address, or -1. */
int cluster_node_at(const test_cluster *c, int port);
/* Is node i a master now (ROLE)? */
int cluster_is_master(const test_cluster *c, int i);
/* The node serving slot, as node `asked`'s CLUSTER SLOTS says (-1: none). */
int cluster_owner(const test_cluster *c, int asked, int slot);
/* The node serving a key (its slot from CLUSTER KEYSLOT, then cluster_owner
 * as any running node says). */
int cluster_node_of_key(const test_cluster *c, const char *key);
/* The first queue name "<prefix><k>" (k from 0) whose slot master node m
 * serves, written to out; fails the test if none of the first 1000 is. */
void cluster_name_on(const test_cluster *c, int m, const char *prefix, char *out, size_t size);
/* The master (node index) serving shard i of q: fails the test unless a
 * running master serves it. */
int cluster_master_of_shard(const test_cluster *c, rjq_queue *q, int i);
/* The replica of master m (a running node that replicates it), or -1. */
int cluster_replica_of(const test_cluster *c, int m);
/* The calls of command cmd (lower case) on node i (INFO commandstats; 0:
 * never called). */
long long cluster_node_calls(const test_cluster *c, int i, const char *cmd);
/* A redis:// URL listing every node as a seed ("redis://127.0.0.1:p0,...,
 * 127.0.0.1:p5"). */
void cluster_seed_url(const test_cluster *c, char *url, size_t size);
/* Queue names "<prefix><i>" whose slots are spread evenly: `per` on each
 * master (as node 0's CLUSTER SLOTS says), grouped by master:
 * names[m * per .. m * per + per - 1] are on master m (node m, the URL's
 * node being master 0), whatever order they were found in. */
void cluster_spread_names(const test_cluster *c, const char *prefix, char names[][32], int per);

/* Migrate a slot by hand, in the steps a resharding takes, so a test can
 * act between them: begin (CLUSTER SETSLOT <slot> IMPORTING on `to`, then
 * MIGRATING on `from`), move its keys (CLUSTER GETKEYSINSLOT + MIGRATE ...
 * KEYS, until none is left on `from`; returns how many moved), end
 * (CLUSTER SETSLOT <slot> NODE <to> on `to`, `from` and every other master,
 * then wait until every running node's CLUSTER SLOTS says `to`). */
void cluster_migrate_begin(test_cluster *c, int slot, int from, int to);
long cluster_migrate_keys(test_cluster *c, int slot, int from, int to);
void cluster_migrate_end(test_cluster *c, int slot, int from, int to);
/* All three steps. */
void cluster_migrate_slot(test_cluster *c, int slot, int from, int to);

/* SIGKILL node i and reap it (its pid 0 after); nothing waited for. */
void cluster_kill_node(test_cluster *c, int i);
/* SIGKILL master m, then wait until its replica is a master serving m's
 * slots and every running node says cluster_state:ok and agrees. Returns
 * the promoted node's index; *took_ms (if not NULL): ms from the kill to
 * the promotion seen. */
int cluster_kill_master(test_cluster *c, int m, double *took_ms);
/* SHUTDOWN SAVE on node i (its data saved in its directory) and reap it
 * (its pid 0 after); nothing else waited for. */
void cluster_shutdown_node(test_cluster *c, int i);
/* Start node i again (same port, directory and nodes.conf) and wait until
 * it is back in the cluster (cluster_state:ok on it, all nodes agree). */
void cluster_restart_node(test_cluster *c, int i);
/* Wait until every running node says cluster_state:ok, sees the same owner
 * for each slot, and each running replica's master link is up. */
void cluster_wait_settled(test_cluster *c);

#endif
