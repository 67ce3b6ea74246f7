/*
 * The ACL lines of `rjq acl`. What each role runs:
 *
 * - every client: CLIENT SETNAME and SELECT (its session), ROLE (with
 *   Sentinel: is it the master?), WAIT (the option wait_replicas), TIME (the
 *   command connection's liveness probe and the server clock), PUBLISH
 *   and SUBSCRIBE (the subscriber connection's probe on
 *   "<prefix>:reply:<random>:live", awaits, pushes), SCRIPT LOAD and
 *   EVALSHA (rjq's scripts; FUNCTION LOAD is an administrator's command,
 *   so the roles run the scripts with EVALSHA, which rjq falls back to by
 *   itself), CLUSTER SLOTS (the first connect asks whether the server is a
 *   Redis Cluster node, and a cluster's slot table is read again after
 *   redirects) and ASKING (a slot being migrated);
 * - inside the scripts, the commands of the scripts the role calls (Redis
 *   checks them against the user's ACL too): the producer enqueues,
 *   watches (awaits) and cancels, the worker claims, completes, fails,
 *   extends, reclaims, releases, forgets, beats and sweeps (liveness),
 *   pauses, resumes, cancels, limits and schedules (what an operator's
 *   rjq pause, resume, cancel, limit and schedule need) and runs
 *   schedulers and declares and fills a queue's index (rjq index), the
 *   monitor reads stats, jobs, schedules, processes and the index (a
 *   lookup, rjq_queue_find; the enqueue script of a producer reads the
 *   index declaration with HGET, and its first enqueues read it outside
 *   the script too, HMGET). tests/acl_covers_scripts.sh fails when
 *   a script uses a command no role has;
 * - outside scripts: MULTI and EXEC (the producer's batches of more than
 *   1 MiB go as several script calls in one transaction), HGET (an await
 *   reads a stored result), HMGET (a
 *   worker reads the payloads of big jobs it claimed), HDEL (a worker
 *   drops its push registration), ZRANGE (the dead list), SET (a
 *   monitor marks its queue monitored), INFO (the monitor reads Redis'
 *   memory and eviction policy, rjq_client_get_memory), GET (every role: a
 *   queue opened with rjq_queue_open_async, as the tools open theirs,
 *   reads its shard declaration "<prefix>:{<queue>}:shards"; declaring
 *   one, rjq shards, is the worker's SET). A sharded queue's shards are
 *   queues named "<queue>~<i>-<k>": a queue pattern that ends in '*'
 *   covers them, an exact name does not.
 * - rjq-pg-bridge (only with --role bridge): the producer's rights (its
 *   scripts also read a job, rjq_queue_get_job), the liveness keys
 *   "<prefix>:{clients}:*" (it reads the process registry for a row's
 *   worker_id; the registry script only reads them), and SET in a selector
 *   that reaches only the "monitored" flags (it watches the queues' events).
 * Keys: the queues' own ("<prefix>:{<queue>}:*"), plus the liveness keys
 * "<prefix>:{clients}:*" for workers (the monitor reads them: the process
 * registry, with its commands that only read; one per prefix, so a monitor
 * scoped to some queues reads every process's queue names and running job
 * ids: tenants that must not see each other use different prefixes), and the registry of queue names
 * "<prefix>:queues" (producers and workers add their queues with ZADD,
 * write-only "%W~"; a monitor reads it with ZRANGEBYLEX, "%R~"; it is one
 * key per prefix, shared by every queue pattern). On a Redis Cluster both
 * registries are one per master ("<prefix>:{clients-<n>}:*",
 * "<prefix>:{queues-<n>}", README "Redis Cluster"): each role's rule for
 * the standalone name has a twin for those. The monitor has only commands that
 * read (a script it runs can write nothing), and SET in a selector that
 * reaches no key but the "monitored" flags (its keys are not read-only
 * "%R~" ones: EVALSHA asks for write access to the keys it is given). Channels: the queues' ("<prefix>:{<queue>}:*": wake,
 * push, events) and the replies ("<prefix>:reply:*").
 */
#include "acl.h"

#include <string.h>

#define SESSION                                                                              \
    "+client|setname +select +time +publish +subscribe +script|load +evalsha +role +wait " \
    "+cluster|slots +cluster|myid +asking +ssubscribe +spublish"

/* The commands the scripts of each role run (the scripts' lib functions
 * included). */
#define PRODUCER_SCRIPTS                                                                  \
    "+exists +hdel +hexists +hincrby +hmget +hrandfield +hset +hsetnx +llen +lpop +lpush +lrem " \
    "+pexpire +pubsub|numsub +pubsub|shardnumsub +rpush +type +zadd +zcard +zmscore +zpopmin +zrange +zrangebyscore +zrem " \
    "+zremrangebylex +zremrangebyrank +zremrangebyscore +zscore +sadd +scard +smembers +srem"
#define WORKER_SCRIPTS                                                                    \
    "+del +exists +get +hdel +hexists +hgetall +hincrby +hlen +hmget +hrandfield +hscan +hset +hsetnx +lindex " \
    "+llen +lpop +lpos +lpush +lrange +lrem +pexpire +pttl +pubsub|numsub +pubsub|shardnumsub +rpush +set +type +zadd +zcard +zcount +zmscore " \
    "+zpopmin +zrange "                                                                    \
    "+zrangebylex +zrangebyscore +zrem +zremrangebylex +zremrangebyrank +zremrangebyscore "  \
    "+zscore +unlink +sadd +scard +smembers +srem"
#define MONITOR_SCRIPTS                                                                   \
    "+exists +hexists +hgetall +hlen +hmget +hscan +llen +lpos +lrange +scard +type +zcard +zcount +zrangebyscore +zscore"

static int fits(const char *s) {
    if (s[0] == '\0') return 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p <= ' ' || *p == '{' || *p == '}' || *p == 0x7f) return 0;
    return 1;
}

int acl_print(FILE *out, const char *prefix, const char *queues, int roles, char *why,
              size_t whylen) {
    if (!fits(prefix) || !fits(queues)) {
        snprintf(why, whylen, "%s cannot go into an ACL rule (no spaces, '{', '}' or control "
                              "characters)", fits(prefix) ? "the queue pattern" : "the prefix");
        return -1;
    }
    const char *p = prefix, *q = queues;
    fprintf(out, "# rjq's users for the prefix \"%s\" and the queues \"%s\"; give each its own\n"
                 "# password in place of CHANGE-ME (ACL SETUSER takes >password or #sha256).\n",
            p, q);
    if (roles & RJQ_ACL_PRODUCER)
        fprintf(out,
                "# producer: enqueues, awaits results and cancels jobs\n"
                "ACL SETUSER rjq-producer reset on >CHANGE-ME ~%s:{%s}:* %%W~%s:queues %%W~%s:{queues-*} "
                "resetchannels &%s:{%s}:* &%s:reply:* " SESSION " +get +hget +multi +exec " PRODUCER_SCRIPTS
                "\n",
                p, q, p, p, p, q, p);
    if (roles & RJQ_ACL_WORKER)
        fprintf(out,
                "# worker: runs jobs (also what rjq replay, reclaim, pause, resume, cancel, limit and schedule need; runs schedulers)\n"
                "ACL SETUSER rjq-worker reset on >CHANGE-ME ~%s:{%s}:* ~%s:{clients}:* ~%s:{clients-*}:* "
                "%%W~%s:queues %%W~%s:{queues-*} resetchannels &%s:{%s}:* &%s:reply:* " SESSION
                " +hget " WORKER_SCRIPTS "\n",
                p, q, p, p, p, p, p, q, p);
    if (roles & RJQ_ACL_MONITOR)
        fprintf(out,
                "# monitor: reads stats, jobs and the dead list, watches events; writes nothing "
                "but its \"monitored\" flag\n"
                "ACL SETUSER rjq-monitor reset on >CHANGE-ME ~%s:{%s}:* ~%s:{clients}:* ~%s:{clients-*}:* "
                "%%R~%s:queues %%R~%s:{queues-*} resetchannels &%s:{%s}:events &%s:reply:* " SESSION
                " +get +zrange +zrangebylex +info " MONITOR_SCRIPTS " (~%s:{%s}:monitored +set)\n",
                p, q, p, p, p, p, p, q, p, p, q);
    if (roles & RJQ_ACL_BRIDGE)
        fprintf(out,
                "# bridge: rjq-pg-bridge (enqueues with ids, awaits outcomes, reads jobs, watches "
                "events)\n"
                "ACL SETUSER rjq-pg-bridge reset on >CHANGE-ME ~%s:{%s}:* ~%s:{clients}:* ~%s:{clients-*}:* "
                "%%W~%s:queues %%W~%s:{queues-*} resetchannels &%s:{%s}:* &%s:reply:* " SESSION
                " +get +hget +multi +exec " PRODUCER_SCRIPTS " (~%s:{%s}:monitored +set)\n",
                p, q, p, p, p, p, p, q, p, p, q);
    return 0;
}
