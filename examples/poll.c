/*
 * rjq-poll: rjq on a plain poll() loop, through rjq_io_ops (rjq.h "Any
 * event loop"): no libevent, no hiredis adapter. The pattern to copy for
 * any loop: keep the descriptors the client asks for, and one timer.
 *
 *     REDIS_URL=redis://127.0.0.1:6379 rjq-poll [N]
 *
 * Enqueues N jobs (default 200) on the queue "poll-example" and awaits
 * each outcome; a worker on the same client completes each with the
 * result "done:<payload>". Exits 0 once every await got its job's result,
 * the client is freed and its glue told every descriptor goodbye; 1 on a
 * wrong outcome, 2 after 60 s without the end.
 */
#define _POSIX_C_SOURCE 200809L /* poll(), clock_gettime() under -std=c11 */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rjq.h>

#define MAX_FDS 64

typedef struct loop {
    struct pollfd fds[MAX_FDS]; /* the descriptors the client watches */
    int nfds;
    long long due_ms; /* the client's timer: when it fires, -1 when off */
    int cleaned_up;
} loop;

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* rjq_io_ops.socket: watch fd for what (RJQ_IO_NONE: forget it). */
static void on_socket(void *arg, int fd, int what) {
    loop *l = arg;
    int i = 0;
    while (i < l->nfds && l->fds[i].fd != fd) i++;
    if (what == RJQ_IO_NONE) {
        if (i < l->nfds) l->fds[i] = l->fds[--l->nfds];
        return;
    }
    if (i == l->nfds) {
        if (l->nfds == MAX_FDS) abort(); /* (a real program grows its table) */
        l->fds[l->nfds++].fd = fd;
    }
    l->fds[i].events =
        (short)(((what & RJQ_IO_READ) ? POLLIN : 0) | ((what & RJQ_IO_WRITE) ? POLLOUT : 0));
}

/* rjq_io_ops.timer: fire in ms, -1: off. */
static void on_timer(void *arg, long ms) {
    loop *l = arg;
    l->due_ms = ms < 0 ? -1 : now_ms() + ms;
}

static void on_cleanup(void *arg) {
    ((loop *)arg)->cleaned_up++;
}

/* One pass: wait for a descriptor or the timer, then hand over what poll()
 * saw (the client may change its descriptors meanwhile: events for one it
 * dropped are ignored), then the timer if it is due. A timer armed for 0
 * from inside rjq_client_handle_timeout() runs on the next pass. */
static void loop_pass(loop *l, rjq_client *c) {
    struct pollfd seen[MAX_FDS];
    int n = l->nfds;
    memcpy(seen, l->fds, sizeof seen[0] * (size_t)n);
    int timeout = -1;
    if (l->due_ms >= 0) {
        long long left = l->due_ms - now_ms();
        timeout = left < 0 ? 0 : left > 1000 ? 1000 : (int)left;
    } else {
        timeout = 1000;
    }
    if (poll(seen, (nfds_t)n, timeout) < 0) return; /* EINTR: next pass */
    for (int i = 0; i < n; i++) {
        short r = seen[i].revents;
        if (r == 0) continue;
        int ev = ((r & POLLIN) ? RJQ_IO_READ : 0) | ((r & POLLOUT) ? RJQ_IO_WRITE : 0);
        if (r & (POLLERR | POLLHUP | POLLNVAL)) ev = RJQ_IO_READ | RJQ_IO_WRITE;
        rjq_client_handle_io(c, seen[i].fd, ev);
    }
    if (l->due_ms >= 0 && now_ms() >= l->due_ms) {
        l->due_ms = -1;
        rjq_client_handle_timeout(c);
    }
}

typedef struct app {
    long n, awaited, right, wrong;
} app;

static void handler(rjq_job *job, void *data) {
    char result[64];
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    (void)data;
    int k = snprintf(result, sizeof result, "done:%.*s", (int)len, p);
    if (rjq_job_complete(job, result, (size_t)k, NULL, NULL) != RJQ_OK)
        fprintf(stderr, "rjq-poll: complete refused\n");
}

static void on_outcome(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    app *a = data;
    char want[64];
    (void)c;
    a->awaited++;
    /* the id is the payload: "j<i>" */
    int k = o ? snprintf(want, sizeof want, "done:%s", o->id) : 0;
    if (status == RJQ_OK && (size_t)k == o->result_len && memcmp(o->result, want, (size_t)k) == 0)
        a->right++;
    else {
        a->wrong++;
        fprintf(stderr, "rjq-poll: await of %s: %s\n", o ? o->id : "?", rjq_strerror(status));
    }
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN); /* a dropped connection is an error, not a signal */
    app a = {.n = argc > 1 ? atol(argv[1]) : 200};
    loop l = {.due_ms = -1};
    rjq_io_ops io = RJQ_IO_OPS_INIT;
    io.arg = &l;
    io.socket = on_socket;
    io.timer = on_timer;
    io.cleanup = on_cleanup;
    rjq_client_options o = RJQ_CLIENT_OPTIONS_INIT;
    o.url = getenv("REDIS_URL");
    rjq_client *c;
    if (rjq_client_new_io(&c, &o, &io) != RJQ_OK) {
        fprintf(stderr, "rjq-poll: %s\n", rjq_client_get_errmsg(NULL));
        return 1;
    }
    rjq_queue *q;
    rjq_worker *w;
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 16;
    if (rjq_queue_open(c, "poll-example", NULL, &q) != RJQ_OK ||
        rjq_worker_start(q, &wo, handler, &a, &w) != RJQ_OK) {
        fprintf(stderr, "rjq-poll: %s\n", rjq_client_get_errmsg(c));
        rjq_client_free(c);
        return 1;
    }
    for (long i = 0; i < a.n; i++) {
        char id[32];
        int k = snprintf(id, sizeof id, "j%ld", i);
        rjq_job_options jo = RJQ_JOB_OPTIONS_INIT;
        jo.id = id;
        if (rjq_enqueue_await(q, id, (size_t)k, &jo, NULL, on_outcome, &a, NULL) != RJQ_OK) {
            fprintf(stderr, "rjq-poll: %s\n", rjq_client_get_errmsg(c));
            rjq_client_free(c);
            return 1;
        }
    }
    long long give_up = now_ms() + 60000;
    while (a.awaited < a.n && now_ms() < give_up) loop_pass(&l, c);
    rjq_client_free(c);
    printf("rjq-poll: %ld of %ld jobs awaited, %ld right, %ld wrong\n", a.awaited, a.n, a.right,
           a.wrong);
    if (l.nfds != 0 || l.cleaned_up != 1) {
        fprintf(stderr, "rjq-poll: after the free: %d descriptors still watched, "
                        "cleanup ran %d times\n", l.nfds, l.cleaned_up);
        return 1;
    }
    if (a.awaited < a.n) return 2;
    return a.wrong == 0 && a.right == a.n ? 0 : 1;
}
