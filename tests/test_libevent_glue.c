/*
 * The libevent glue (adapters/rjq/libevent.h): what it promises beyond
 * attaching contexts. The loop is driven one pass at a time; the server is
 * read through a separate blocking connection, whose polling waits for the
 * server only, never for the loop.
 */
#include <stdio.h>
#include <string.h>

#include <rjq/libevent.h>

#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

static int enq_done;
static long enq_count;
static rjq_queue *enqueue_again; /* set: the first reply enqueues once more */

static void on_enq(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs, (void)n, (void)data;
    ASSERT_OK(status);
    enq_done = 1;
    enq_count++;
    if (enqueue_again) {
        rjq_queue *q = enqueue_again;
        enqueue_again = NULL;
        ASSERT_OK(rjq_enqueue(q, "y", 1, NULL, on_enq, NULL));
    }
}

/* Poll the server (not the loop) until key's hash has `want` fields. */
static int server_hlen_reaches(redisContext *rc, const char *key, long long want) {
    for (int i = 0; i < 5000; i++) {
        if (server_int(rc, "HLEN %s", key) >= want) return 1;
        sleep_ms(1);
    }
    return 0;
}

/* An enqueue made outside any callback goes out in the next loop pass: the
 * queue's batch (a 0 ms timer) and the write both run in that pass, with
 * no further epoll_wait. With an evtimer for the batch, or writes that wait
 * for the socket to report writable, one pass is not enough and the job
 * never reaches the server. */
TEST(enqueue_is_written_within_one_loop_pass) {
    test_env e;
    env_start(&e, "glue");
    enq_done = 0;
    enq_count = 0;
    enqueue_again = e.q;

    ASSERT_OK(rjq_enqueue(e.q, "x", 1, NULL, on_enq, NULL));
    event_base_loop(e.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    ASSERT(server_hlen_reaches(e.rc, "t:{glue}:payload", 1));

    /* The same from inside a callback: the first reply's callback enqueues
     * again, and the pass that ran it (loop_until stops after it) wrote it. */
    ASSERT(loop_until(e.base, &enq_done, 10000));
    ASSERT_EQ(1, enq_count);
    ASSERT(server_hlen_reaches(e.rc, "t:{glue}:payload", 2));
    ASSERT(loop_until_count(e.base, &enq_count, 2, 10000));
    env_stop(&e);
}
