/* rjq_io_ops (rjq_client_new_io, rjq_client_handle_io) on a plain poll()
 * loop, through the shared adapter cases, and the promises of its
 * callbacks (rjq.h "Any event loop"). */
#include <poll.h>
#include <stdlib.h>
#include <sys/ioctl.h>

#include "adapter_cases.h"
#include "failalloc.h"

#define PL_MAX 64

typedef struct pl_loop {
    struct pollfd fds[PL_MAX];
    int nfds;
    double due; /* mono_ms() of the timer; < 0: off */
    long sockets_told, cleanups;
    long bad_calls; /* a socket call that repeated what fd had, or NONE for an unknown fd */
    long write_asks; /* socket calls that asked for RJQ_IO_WRITE */
    rjq_client *c;  /* the client driven (one at a time) */
} pl_loop;

static pl_loop pl;

static void pl_socket(void *arg, int fd, int what) {
    pl_loop *l = arg;
    int i = 0;
    l->sockets_told++;
    if (what & RJQ_IO_WRITE) l->write_asks++;
    while (i < l->nfds && l->fds[i].fd != fd) i++;
    if (what == RJQ_IO_NONE) {
        if (i == l->nfds) l->bad_calls++;
        else l->fds[i] = l->fds[--l->nfds];
        return;
    }
    short ev = (short)(((what & RJQ_IO_READ) ? POLLIN : 0) | ((what & RJQ_IO_WRITE) ? POLLOUT : 0));
    if (i == l->nfds) {
        ASSERT(l->nfds < PL_MAX);
        l->fds[l->nfds].fd = fd;
        l->nfds++;
    } else if (l->fds[i].events == ev) {
        l->bad_calls++;
    }
    l->fds[i].events = ev;
}

static void pl_timer(void *arg, long ms) {
    pl_loop *l = arg;
    l->due = ms < 0 ? -1 : mono_ms() + (double)ms;
}

static void pl_cleanup(void *arg) {
    pl_loop *l = arg;
    l->cleanups++;
    l->c = NULL;
}

static int pl_client_new(rjq_client **c, const rjq_client_options *o) {
    rjq_io_ops io = RJQ_IO_OPS_INIT;
    io.arg = &pl;
    io.socket = pl_socket;
    io.timer = pl_timer;
    io.cleanup = pl_cleanup;
    ASSERT(pl.c == NULL);
    int rc = rjq_client_new_io(c, o, &io);
    if (rc == RJQ_OK) pl.c = *c;
    return rc;
}

/* One pass that does not wait: what poll() saw, then the timer. */
static void pl_turn(void) {
    struct pollfd seen[PL_MAX];
    int n = pl.nfds;
    if (pl.c == NULL) return;
    memcpy(seen, pl.fds, sizeof seen[0] * (size_t)n);
    ASSERT(poll(seen, (nfds_t)n, 0) >= 0);
    for (int i = 0; i < n && pl.c; i++) {
        short r = seen[i].revents;
        if (r == 0) continue;
        int ev = ((r & POLLIN) ? RJQ_IO_READ : 0) | ((r & POLLOUT) ? RJQ_IO_WRITE : 0);
        if (r & (POLLERR | POLLHUP)) ev = RJQ_IO_READ | RJQ_IO_WRITE;
        rjq_client_handle_io(pl.c, seen[i].fd, ev);
    }
    if (pl.c && pl.due >= 0 && mono_ms() >= pl.due) {
        pl.due = -1;
        rjq_client_handle_timeout(pl.c);
    }
}

/* Every client is freed: each descriptor was told RJQ_IO_NONE, cleanup
 * ran once per client, no socket call repeated itself. */
static void pl_close(void) {
    ASSERT(pl.c == NULL);
    ASSERT_EQ(0, pl.nfds);
    ASSERT(pl.cleanups >= 1);
    ASSERT_EQ(0, pl.bad_calls);
    memset(&pl, 0, sizeof pl);
}

static const adapter poll_adapter = {pl_client_new, pl_turn, pl_close};

TEST(io_ops_on_poll_runs_jobs_and_awaits) {
    adapter_runs_jobs_and_awaits(&poll_adapter);
}

TEST(io_ops_on_poll_survives_killed_connections) {
    adapter_survives_killed_connections(&poll_adapter);
}

TEST(io_ops_on_poll_client_freed_inside_a_handler) {
    adapter_client_freed_inside_a_handler(&poll_adapter);
}

TEST(io_ops_on_poll_watches_the_sharded_pubsub_link) {
    adapter_sharded_link(&poll_adapter);
}

/* The socket callback is told each connection's descriptor from inside
 * rjq_client_new_io (the connects start there); rjq_client_free() tells
 * each RJQ_IO_NONE, disarms the timer and runs cleanup once. */
TEST(io_ops_told_every_descriptor_and_none_after_the_free) {
    test_server s;
    server_start_guarded(&s, NULL);
    rjq_client_options o = client_options(s.url);
    rjq_client *c = NULL;
    ASSERT_OK(pl_client_new(&c, &o));
    ASSERT_EQ(2, pl.nfds); /* the command and the subscriber connection */
    for (int i = 0; i < 5000 && !rjq_client_is_connected(c); i++) {
        pl_turn();
        sleep_ms(1);
    }
    ASSERT(rjq_client_is_connected(c));
    ASSERT_EQ(2, pl.nfds);
    for (int i = 0; i < pl.nfds; i++) ASSERT_EQ(POLLIN, pl.fds[i].events); /* idle: read only */
    pl.due = 5;
    rjq_client_free(c);
    ASSERT_EQ(0, pl.nfds);
    ASSERT(pl.due < 0);
    ASSERT_EQ(1, pl.cleanups);
    ASSERT_EQ(0, pl.bad_calls);
    memset(&pl, 0, sizeof pl);
    server_stop_guarded(&s);
}

/* Events for a descriptor the client does not watch, or NULL, are
 * ignored; a client of rjq_client_new() ignores the call too. */
static int lo_attach(void *loop, struct redisAsyncContext *ac) {
    (void)loop, (void)ac;
    return 0;
}
static void lo_set_timer(void *loop, long ms) {
    (void)loop, (void)ms;
}

TEST(io_ops_handle_io_ignores_unknown_descriptors) {
    test_server s;
    server_start_guarded(&s, NULL);
    rjq_client_options o = client_options(s.url);
    rjq_client *c = NULL;
    ASSERT_OK(pl_client_new(&c, &o));
    rjq_client_handle_io(c, 12345, RJQ_IO_READ | RJQ_IO_WRITE);
    rjq_client_handle_io(NULL, 3, RJQ_IO_READ);
    rjq_client_free(c);
    memset(&pl, 0, sizeof pl);
    rjq_loop_ops ops = RJQ_LOOP_OPS_INIT;
    ops.attach = lo_attach;
    ops.set_timer = lo_set_timer;
    ASSERT_OK(rjq_client_new(&c, &o, &ops, NULL));
    rjq_client_handle_io(c, 0, RJQ_IO_READ);
    rjq_client_free(c);
    server_stop_guarded(&s);
}

/* rjq_client_new_io's errors, each with its errmsg. */
static void nop_socket(void *arg, int fd, int what) {
    (void)arg, (void)fd, (void)what;
}
static void nop_timer(void *arg, long ms) {
    (void)arg, (void)ms;
}
static void *nop_resolve(void *arg, const char *host, rjq_resolved_fn *done, void *darg) {
    (void)arg, (void)host, (void)done, (void)darg;
    return NULL;
}

TEST(io_ops_new_refuses_missing_callbacks) {
    rjq_client *c = (rjq_client *)&pl;
    rjq_io_ops io = RJQ_IO_OPS_INIT;
    ASSERT_EQ(RJQ_EINVAL, rjq_client_new_io(NULL, NULL, &io));
    ASSERT_EQ(RJQ_EINVAL, rjq_client_new_io(&c, NULL, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_client_new_io(&c, NULL, &io));
    ASSERT(c == NULL);
    ASSERT(strstr(rjq_client_get_errmsg(NULL), "socket and timer") != NULL);
    io.socket = nop_socket;
    ASSERT_EQ(RJQ_EINVAL, rjq_client_new_io(&c, NULL, &io));
    io.timer = nop_timer;
    io.resolve = nop_resolve;
    ASSERT_EQ(RJQ_EINVAL, rjq_client_new_io(&c, NULL, &io));
    ASSERT(strstr(rjq_client_get_errmsg(NULL), "resolve_cancel") != NULL);
    rjq_io_ops zero = {0};
    ASSERT_EQ(RJQ_EINVAL, rjq_client_new_io(&c, NULL, &zero));
    ASSERT(strstr(rjq_client_get_errmsg(NULL), "rjq_io_ops") != NULL);
}

/* rjq_io_ops is an extensible struct (rjq.h): one of an older header
 * (ending before resolve, at an inaccessible page) is read only as far as
 * its size; one of a newer header is taken when its unknown bytes are
 * zero, refused (its name in the errmsg) when one is not. */
#include <sys/mman.h>
#include <unistd.h>

TEST(io_ops_struct_is_read_only_as_far_as_its_size) {
    test_server s;
    server_start_guarded(&s, NULL);
    rjq_client_options o = client_options(s.url);
    size_t older = offsetof(rjq_io_ops, resolve);
    long page = sysconf(_SC_PAGESIZE);
    char *m =
        mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT(m != MAP_FAILED);
    ASSERT(mprotect(m + page, (size_t)page, PROT_NONE) == 0);
    rjq_io_ops full = RJQ_IO_OPS_INIT;
    full.size = older;
    full.arg = &pl;
    full.socket = pl_socket;
    full.timer = pl_timer;
    full.cleanup = pl_cleanup;
    memcpy(m + page - older, &full, older);
    rjq_client *c = NULL;
    ASSERT_OK(rjq_client_new_io(&c, &o, (const rjq_io_ops *)(void *)(m + page - older)));
    pl.c = c;
    for (int i = 0; i < 5000 && !rjq_client_is_connected(c); i++) {
        pl_turn();
        sleep_ms(1);
    }
    ASSERT(rjq_client_is_connected(c));
    rjq_client_free(c);
    pl_close();
    munmap(m, 2 * (size_t)page);

    struct {
        rjq_io_ops io;
        long newer;
    } big;
    memset(&big, 0, sizeof big);
    big.io.size = sizeof big;
    big.io.arg = &pl;
    big.io.socket = pl_socket;
    big.io.timer = pl_timer;
    big.io.cleanup = pl_cleanup;
    big.newer = 1;
    ASSERT_EQ(RJQ_EINVAL, rjq_client_new_io(&c, &o, &big.io));
    ASSERT(strstr(rjq_client_get_errmsg(NULL), "rjq_io_ops") != NULL);
    big.newer = 0;
    ASSERT_OK(rjq_client_new_io(&c, &o, &big.io));
    pl.c = c;
    rjq_client_free(c);
    pl_close();
    server_stop_guarded(&s);
}

/* Once connected, what a reply or a timer makes the client send is
 * written at the end of that rjq_client_handle_io() or
 * rjq_client_handle_timeout() call: no RJQ_IO_WRITE is asked for (the
 * socket never fills here), and each descriptor stays at RJQ_IO_READ. */
TEST(io_ops_writes_without_asking_for_writability) {
    test_server s;
    server_start_guarded(&s, NULL);
    rjq_client *c = ad_client(&poll_adapter, &s);
    long asked = pl.write_asks, told = pl.sockets_told;
    ASSERT(asked >= 2); /* each connect waited for writability */
    rjq_queue *q = queue_for(c, "ad");
    ad_counts n = {0};
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 8;
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(q, &wo, ad_handler, &n, &w));
    ad_enqueue(q, &n, 0, 100, 0);
    ad_await(q, &n, 50, 0);
    ad_run_until_count(&poll_adapter, &n.done, 150, 20000);
    ad_run_until_count(&poll_adapter, &n.awaited, 50, 20000);
    ASSERT_EQ(50, n.await_ok);
    ASSERT_EQ(asked, pl.write_asks);
    ASSERT_EQ(told, pl.sockets_told);
    rjq_client_free(c);
    pl_close();
    server_stop_guarded(&s);
}

/* pl_turn, also noting around each rjq_client_handle_io() call the bytes
 * its descriptor had waiting (FIONREAD): the calls that saw BIG_WAITING or
 * more, and the most any of them left behind. */
#define BIG_WAITING (32 << 10)
static long big_calls;
static int big_left;

static void pl_turn_noting(void) {
    struct pollfd seen[PL_MAX];
    int n = pl.nfds;
    if (pl.c == NULL) return;
    memcpy(seen, pl.fds, sizeof seen[0] * (size_t)n);
    ASSERT(poll(seen, (nfds_t)n, 0) >= 0);
    for (int i = 0; i < n && pl.c; i++) {
        short r = seen[i].revents;
        if (r == 0) continue;
        int ev = ((r & POLLIN) ? RJQ_IO_READ : 0) | ((r & POLLOUT) ? RJQ_IO_WRITE : 0);
        if (r & (POLLERR | POLLHUP)) ev = RJQ_IO_READ | RJQ_IO_WRITE;
        int before = 0, after = 0;
        if (ioctl(seen[i].fd, FIONREAD, &before) != 0) before = 0;
        rjq_client_handle_io(pl.c, seen[i].fd, ev);
        if (before >= BIG_WAITING && ioctl(seen[i].fd, FIONREAD, &after) == 0) {
            big_calls++;
            if (after > big_left) big_left = after;
        }
    }
    if (pl.c && pl.due >= 0 && mono_ms() >= pl.due) {
        pl.due = -1;
        rjq_client_handle_timeout(pl.c);
    }
}

static const adapter noting_adapter = {pl_client_new, pl_turn_noting, pl_close};

/* A reply or message of 40 KiB (the worker's read of an awaited job's
 * payload, too big to be pushed, and the job's outcome back, the result
 * being the payload) comes from Redis in one write: the one
 * rjq_client_handle_io() call that saw it waiting reads all of it, not 16
 * KiB per call with a loop turn (an epoll_wait) between each (the 16 KiB
 * awaited job's extra turn, bench/README.md). Jobs one at a time, so
 * nothing else big comes meanwhile: what a call leaves is under 16 KiB.
 * The results are each payload as it was when its call returned. */
TEST(io_ops_reads_a_big_message_in_the_call_that_saw_it) {
    test_server s;
    server_start_guarded(&s, NULL);
    rjq_client *c = ad_client(&noting_adapter, &s);
    rjq_queue *q = queue_for(c, "ad");
    ad_counts n = {0};
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 1;
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(q, &wo, ad_handler, &n, &w));
    size_t len = 40 << 10;
    char *payload = malloc(len);
    ASSERT(payload != NULL);
    memset(payload, 'v', len);
    payload[0] = 'a'; /* (ad_on_await: a result that starts with "a") */
    big_calls = 0;
    big_left = 0;
    for (long i = 0; i < 6; i++) {
        payload[0] = 'a';
        ASSERT_OK(rjq_enqueue_await(q, payload, len, NULL, NULL, ad_on_await, &n, NULL));
        /* the caller's payload is the caller's again once the call
         * returned (sent at once from it once the channel is confirmed:
         * no copy kept, and no pointer to it either) */
        payload[0] = 'x';
        ad_run_until_count(&noting_adapter, &n.awaited, i + 1, 20000);
    }
    ASSERT_EQ(6, n.await_ok);
    ASSERT(big_calls >= 6); /* (each outcome at least) */
    ASSERT(big_left < (16 << 10));
    free(payload);
    rjq_client_free(c);
    pl_close();
    server_stop_guarded(&s);
}

/* Each allocation of rjq_client_new_io() failed in turn: the call fails
 * with RJQ_ENOMEM and leaves nothing (no descriptor told, no cleanup, no
 * leak: ASan), or, when what failed was a connection's (its watch), the
 * client is made and that connection is tried again: it connects, and the
 * free tells every descriptor RJQ_IO_NONE. */
TEST(io_ops_new_survives_each_allocation_failing) {
    test_server s;
    server_start_guarded(&s, NULL);
    rjq_client_options o = client_options(s.url);
    long made = 0, refused = 0;
    for (long n = 0;; n++) {
        rjq_client *c = NULL;
        failalloc_arm_once(n);
        int rc = pl_client_new(&c, &o);
        failalloc_disarm();
        if (failalloc_failures() == 0) {
            ASSERT_OK(rc);
            rjq_client_free(c);
            pl_close();
            break;
        }
        if (rc != RJQ_OK) {
            ASSERT_EQ(RJQ_ENOMEM, rc);
            ASSERT(c == NULL);
            ASSERT_EQ(0, pl.nfds);
            ASSERT_EQ(0, pl.cleanups);
            memset(&pl, 0, sizeof pl);
            refused++;
            continue;
        }
        made++;
        for (int i = 0; i < 5000 && !rjq_client_is_connected(c); i++) {
            pl_turn();
            sleep_ms(1);
        }
        ASSERT(rjq_client_is_connected(c));
        rjq_client_free(c);
        pl_close();
    }
    ASSERT(refused > 0);
    printf("%ld allocations refused the client, %ld were retried\n", refused, made);
    server_stop_guarded(&s);
}
