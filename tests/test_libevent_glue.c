/*
 * The libevent glue (adapters/rjq/libevent.h): what it promises beyond
 * attaching contexts. The loop is driven one pass at a time; the server is
 * read through a separate blocking connection, whose polling waits for the
 * server only, never for the loop.
 */
#include <stdio.h>
#include <string.h>

#include <event2/event.h>

/* The glue's own event_add / event_del on sockets, counted (it is
 * header-only: these wrappers are what it calls in this file). */
static long fd_adds, fd_dels;
static int counting_add(struct event *ev, const struct timeval *tv) {
    if (event_get_fd(ev) >= 0) fd_adds++;
    return event_add(ev, tv);
}
static int counting_del(struct event *ev) {
    if (event_get_fd(ev) >= 0) fd_dels++;
    return event_del(ev);
}
#define event_add counting_add
#define event_del counting_del
#include <rjq/libevent.h>
#undef event_add
#undef event_del

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

static long handled;
static void complete_at_once(rjq_job *job, void *data) {
    (void)data;
    handled++;
    ASSERT_OK(rjq_job_complete(job, "ok", 2, NULL, NULL));
}

/* The system calls the glue saves (README "Any event loop"): once
 * connected, requests add and delete no socket event (one epoll_ctl each):
 * the read events stay added, and writes go out without waiting for
 * writability. hiredis' own adapter (redisLibeventAttach) adds the write
 * event for each command and deletes it after. */
TEST(requests_add_and_delete_no_socket_event) {
    test_server s;
    server_start_guarded(&s, NULL);
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options(s.url);
    rjq_client *c = NULL;
    ASSERT_OK(rjq_libevent_client_new(&c, base, &o));
    wait_connected(base, c);
    rjq_queue *q = queue_for(c, "glue");
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 4;
    rjq_worker *w = NULL;
    handled = 0;
    enq_count = 0;
    enqueue_again = NULL;
    ASSERT_OK(rjq_worker_start(q, &wo, complete_at_once, NULL, &w));
    ASSERT_OK(rjq_enqueue(q, "warm", 4, NULL, on_enq, NULL));
    ASSERT(loop_until_count(base, &handled, 1, 10000)); /* both connections in use */
    long adds = fd_adds, dels = fd_dels;
    ASSERT(adds >= 2); /* each connection's read event, at least */
    for (long i = 0; i < 50; i++) {
        ASSERT_OK(rjq_enqueue(q, "x", 1, NULL, on_enq, NULL));
        ASSERT(loop_until_count(base, &handled, 2 + i, 10000));
    }
    ASSERT(loop_until_count(base, &enq_count, 51, 10000));
    ASSERT_EQ(adds, fd_adds);
    ASSERT_EQ(dels, fd_dels);
    rjq_client_free(c);
    event_base_loop(base, EVLOOP_NONBLOCK);
    event_base_free(base);
    server_stop_guarded(&s);
}
