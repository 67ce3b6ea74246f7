/*
 * Library-made ids for anonymous jobs of a sharded queue (docs/sharding.md
 * 6a): rjq_enqueue, rjq_enqueue_batch and rjq_enqueue_await without an id
 * on a sharded handle give the job an id that routes to the shard it is
 * put on, so ids are unique across shards, never all digits, and every
 * by-id call on the sharded handle finds the job; a plain queue keeps its
 * server-assigned 1, 2, 3.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "failalloc.h"
#include "fixture.h"
#include "harness.h"
#include "proxy.h"
#include "server.h"
#include "slot.h"
#include "waits.h"

#define SHARDS 6
#define PER_CLIENT 300
#define JOBS (2 * PER_CLIENT)
#define ID_CAP 64

typedef struct made {
    long done, ok;
    char ids[JOBS][ID_CAP];
} made;

typedef struct slot_of {
    made *m;
    int first; /* the index of the call's first job */
} slot_of;

static void on_made(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    slot_of *s = data;
    (void)c;
    s->m->done++;
    if (status != RJQ_OK) return;
    s->m->ok++;
    for (size_t i = 0; i < n; i++) {
        const char *id = rjq_enqueued_get(jobs, i)->id;
        ASSERT(strlen(id) < ID_CAP);
        ASSERT_EQ(0, rjq_enqueued_get(jobs, i)->existed);
        snprintf(s->m->ids[s->first + (int)i], ID_CAP, "%s", id);
    }
}

static int all_digits(const char *id) {
    return id[0] && id[strspn(id, "0123456789")] == '\0';
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(a, b);
}

static void on_cancel_state(rjq_client *c, int status, const char *state, void *data) {
    long *done = data;
    (void)c, (void)state;
    ASSERT_OK(status);
    (*done)++;
}

typedef struct awaited {
    int done, status;
} awaited;

static void on_awaited(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    awaited *a = data;
    (void)c, (void)o;
    a->done++;
    a->status = status;
}

static void echo_handler(rjq_job *job, void *data) {
    size_t len;
    const void *p = rjq_job_get_payload(job, &len);
    ASSERT_OK(rjq_job_complete(job, p, len, on_done_ok, data));
}

/* 600 anonymous jobs from two clients (300 one by one, 300 in batches of
 * 50): every id distinct, none all digits, each on exactly the shard its
 * id routes to; by id on the sharded handle: the job read, cancelled,
 * awaited; the shards take the jobs in turn (section 3a's spread). */
TEST(anonymous_jobs_of_a_sharded_queue_get_ids_routed_to_their_shard) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "shid");
    ASSERT_OK(declare_shards(e.base, q, SHARDS));
    rjq_client *c2 = client_for(e.base, &e.s);
    rjq_queue *q2 = open_learnt(e.base, c2, "shid");
    ASSERT_EQ(SHARDS, rjq_queue_count_shards(q2));

    static made m;
    memset(&m, 0, sizeof m);
    static slot_of one[PER_CLIENT], part[PER_CLIENT / 50];
    for (int i = 0; i < PER_CLIENT; i++) { /* client 1: one by one */
        one[i] = (slot_of){&m, i};
        ASSERT_OK(rjq_enqueue(q, "one", 3, NULL, on_made, &one[i]));
    }
    rjq_enqueue_item it[50];
    for (int k = 0; k < PER_CLIENT / 50; k++) { /* client 2: batches */
        for (int i = 0; i < 50; i++) {
            it[i] = (rjq_enqueue_item)RJQ_ENQUEUE_ITEM_INIT;
            it[i].payload = "batch";
            it[i].len = 5;
        }
        part[k] = (slot_of){&m, PER_CLIENT + 50 * k};
        ASSERT_OK(rjq_enqueue_batch(q2, it, 50, on_made, &part[k]));
    }
    ASSERT(loop_until_count(e.base, &m.done, PER_CLIENT + PER_CLIENT / 50, 30000));
    ASSERT_EQ(PER_CLIENT + PER_CLIENT / 50, m.ok);

    /* distinct, none all digits */
    static char sorted[JOBS][ID_CAP];
    memcpy(sorted, m.ids, sizeof sorted);
    qsort(sorted, JOBS, ID_CAP, cmp_str);
    for (int i = 0; i < JOBS; i++) {
        ASSERT(sorted[i][0] != '\0');
        ASSERT(!all_digits(sorted[i]));
        if (i > 0 && strcmp(sorted[i - 1], sorted[i]) == 0)
            FAIL_AT(__FILE__, __LINE__, "id %s given twice", sorted[i]);
    }

    /* each on exactly the shard its id routes to (crc16(id) mod N, as the
     * by-id calls route it) */
    int per_shard[SHARDS] = {0};
    for (int i = 0; i < JOBS; i++) {
        int s = shard_holding(e.base, q, m.ids[i]);
        ASSERT_EQ((int)(rjq__crc16(m.ids[i], strlen(m.ids[i])) % SHARDS), s);
        per_shard[s]++;
    }
    /* in turn over the shards: within section 3a's 20 of each other */
    int lo = JOBS, hi = 0;
    for (int s = 0; s < SHARDS; s++) {
        if (per_shard[s] < lo) lo = per_shard[s];
        if (per_shard[s] > hi) hi = per_shard[s];
        ASSERT_EQ(per_shard[s], (int)get_stats(e.base, rjq_queue_get_shard(q, s)).ready);
    }
    ASSERT(hi - lo <= 20);
    ASSERT_EQ(JOBS, (int)get_stats(e.base, q).ready);

    /* by id on the sharded handle (either client's): read, cancel */
    for (int i = 0; i < JOBS; i += 37) {
        info_wait w = get_info(e.base, i % 2 ? q : q2, m.ids[i]);
        ASSERT_OK(w.status);
        ASSERT_STREQ("ready", w.state);
        ASSERT_STREQ(i < PER_CLIENT ? "one" : "batch", w.payload);
    }
    long cancelled = 0;
    ASSERT_OK(rjq_queue_cancel(q, m.ids[5], on_cancel_state, &cancelled));
    ASSERT_OK(rjq_queue_cancel(q2, m.ids[PER_CLIENT + 5], on_cancel_state, &cancelled));
    ASSERT(loop_until_count(e.base, &cancelled, 2, 10000));
    ASSERT_STREQ("cancelled", get_info(e.base, q, m.ids[5]).state);
    ASSERT_STREQ("cancelled", get_info(e.base, q, m.ids[PER_CLIENT + 5]).state);

    /* awaited by id on the sharded handle: answered by a worker of the
     * shards */
    awaited a[4] = {{0}};
    ASSERT_OK(rjq_queue_await(q, m.ids[0], NULL, on_awaited, &a[0], NULL));
    ASSERT_OK(rjq_queue_await(q2, m.ids[PER_CLIENT], NULL, on_awaited, &a[1], NULL));
    rjq_worker *w;
    rjq_worker_options wo = quiet_worker_options(8);
    ASSERT_OK(rjq_worker_start(q, &wo, echo_handler, NULL, &w));
    for (int i = 0; i < 2; i++) {
        ASSERT(loop_until(e.base, &a[i].done, 20000));
        ASSERT_OK(a[i].status);
    }
    /* enqueue-and-await without an id: a made id, its result by it */
    ASSERT_OK(rjq_enqueue_await(q, "ea", 2, NULL, NULL, on_awaited, &a[2], NULL));
    ASSERT(loop_until(e.base, &a[2].done, 20000));
    ASSERT_OK(a[2].status);
    worker_stop_wait(e.base, w);
    for (int i = 0; i < 3; i++) ASSERT_EQ(1, a[i].done);
    rjq_client_free(c2);
    env_stop(&e);
}

/* A plain queue, and a shard's own handle, keep the server's numbers. */
TEST(a_plain_queue_and_a_shard_handle_keep_server_assigned_ids) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *p = open_learnt(e.base, e.c, "plainq");
    for (int i = 1; i <= 3; i++) {
        enqueue_wait w = enqueue_job(e.base, p, "x", NULL);
        ASSERT_OK(w.status);
        char want[8];
        snprintf(want, sizeof want, "%d", i);
        ASSERT_STREQ(want, w.id);
    }
    rjq_queue *q = open_learnt(e.base, e.c, "shid2");
    ASSERT_OK(declare_shards(e.base, q, 3));
    enqueue_wait w = enqueue_job(e.base, rjq_queue_get_shard(q, 1), "x", NULL);
    ASSERT_OK(w.status);
    ASSERT_STREQ("1", w.id);
    /* the sharded handle's own: made, on the shard they route to */
    enqueue_wait f = enqueue_job(e.base, q, "x", NULL);
    ASSERT_OK(f.status);
    ASSERT(!all_digits(f.id));
    ASSERT_EQ((int)(rjq__crc16(f.id, strlen(f.id)) % 3), shard_holding(e.base, q, f.id));
    env_stop(&e);
}

typedef struct counted {
    int done, status;
    size_t n;
} counted;

static void on_counted(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    counted *w = data;
    (void)c, (void)jobs;
    w->done++;
    w->status = status;
    w->n = n;
}

/* Every allocation of an anonymous enqueue and of an anonymous batch on a
 * sharded handle failed in turn (the client's first made id included:
 * its counter's state): RJQ_ENOMEM returned with no callback, or one
 * callback; the jobs reported are on the queue; nothing leaks (ASan). */
TEST(allocation_failures_making_ids_end_cleanly) {
    test_env e;
    env_start(&e, NULL);
    rjq_queue *d = open_learnt(e.base, e.c, "shid_oom");
    ASSERT_OK(declare_shards(e.base, d, 3));
    rjq_client *c2 = client_for(e.base, &e.s);
    rjq_queue *q = open_learnt(e.base, c2, "shid_oom");
    long reported = 0;
    int failed_sync = 0, called = 0;
    for (long n = 0;; n++) {
        counted w = {0};
        failalloc_arm_once(n);
        int rc = rjq_enqueue(q, "x", 1, NULL, on_counted, &w);
        failalloc_disarm();
        if (rc == RJQ_OK) {
            ASSERT(loop_until(e.base, &w.done, 10000));
            loop_turn(e.base);
            ASSERT_EQ(1, w.done);
            if (w.status == RJQ_OK) reported++;
            else ASSERT_EQ(RJQ_ENOMEM, w.status);
            called++;
        } else {
            ASSERT_EQ(RJQ_ENOMEM, rc);
            loop_turn(e.base);
            ASSERT_EQ(0, w.done);
            failed_sync++;
        }
        if (failalloc_failures() == 0) break;
        ASSERT(n < 1000);
    }
    ASSERT(failed_sync > 0 && called > 0);
    ASSERT_EQ(reported, (long)get_stats(e.base, q).ready);

    rjq_enqueue_item it[9];
    for (int i = 0; i < 9; i++) {
        it[i] = (rjq_enqueue_item)RJQ_ENQUEUE_ITEM_INIT;
        it[i].payload = "y";
        it[i].len = 1;
    }
    long sent_max = reported;
    failed_sync = called = 0;
    for (long n = 0;; n++) {
        counted w = {0};
        failalloc_arm_once(n);
        int rc = rjq_enqueue_batch(q, it, 9, on_counted, &w);
        failalloc_disarm();
        if (rc == RJQ_OK) {
            ASSERT(loop_until(e.base, &w.done, 10000));
            loop_turn(e.base);
            ASSERT_EQ(1, w.done);
            if (w.status == RJQ_OK) {
                ASSERT_EQ(9, w.n);
                reported += 9;
            } else {
                ASSERT_EQ(RJQ_ENOMEM, w.status); /* (other shards may have taken theirs) */
            }
            sent_max += 9;
            called++;
        } else {
            ASSERT_EQ(RJQ_ENOMEM, rc);
            loop_turn(e.base);
            ASSERT_EQ(0, w.done);
            failed_sync++;
        }
        if (failalloc_failures() == 0) break;
        ASSERT(n < 1000);
    }
    ASSERT(failed_sync > 0 && called > 0);
    long ready = (long)get_stats(e.base, q).ready;
    ASSERT(ready >= reported && ready <= sent_max);
    rjq_client_free(c2);
    env_stop(&e);
}

/* The jobs waiting in q's shards (their ready lists, read on the server). */
static long long ready_on_shards(redisContext *rc, rjq_queue *q, int n) {
    long long sum = 0;
    for (int i = 0; i < n; i++)
        sum += server_int(rc, "LLEN t:{%s}:ready", rjq_queue_get_name(rjq_queue_get_shard(q, i)));
    return sum;
}

typedef struct one_made {
    int done, status;
    char id[ID_CAP];
} one_made;

static void on_one_made(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    one_made *w = data;
    (void)c;
    w->done++;
    w->status = status;
    if (status == RJQ_OK && n == 1) snprintf(w->id, sizeof w->id, "%s", rjq_enqueued_get(jobs, 0)->id);
}

/* A made id is written without a look-up (enqueue.lua "Made ids"), so a
 * call of made ids whose reply was lost with its connection (the script
 * ran) must not go again as it was: it goes again looked up, and its job
 * is on the queue once, its id the one reported. */
TEST(a_made_id_enqueue_lost_with_its_connection_is_written_once) {
    test_env e;
    proxy p;
    env_start_proxied(&e, &p, "mkp_env", NULL);
    rjq_queue *q = open_learnt(e.base, e.c, "mkp");
    ASSERT_OK(declare_shards(e.base, q, 3));
    enqueue_wait first = enqueue_job(e.base, q, "x", NULL); /* (scripts loaded) */
    ASSERT_OK(first.status);
    ASSERT_EQ(1, ready_on_shards(e.rc, q, 3));

    proxy_hold(&p, 1); /* the reply waits in the proxy: the script runs */
    one_made w = {0};
    ASSERT_OK(rjq_enqueue(q, "y", 1, NULL, on_one_made, &w));
    WAIT_FOR(e.base, ready_on_shards(e.rc, q, 3) == 2, 5000);
    freeReplyObject(server_cmd(e.rc, "CLIENT KILL TYPE normal SKIPME yes")); /* reply lost */
    proxy_hold(&p, 0);
    ASSERT(loop_until(e.base, &w.done, 10000));
    ASSERT_OK(w.status);
    ASSERT(!all_digits(w.id));
    ASSERT_EQ(2, ready_on_shards(e.rc, q, 3)); /* once, not twice */
    ASSERT_EQ((int)(rjq__crc16(w.id, strlen(w.id)) % 3), shard_holding(e.base, q, w.id));
    ASSERT_EQ(2, get_stats(e.base, q).ready);
    env_stop_proxied(&e, &p);
}
