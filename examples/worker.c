/*
 * rjq-worker: a minimal rjq worker to copy from.
 *
 *     REDIS_URL=redis://127.0.0.1:6379 rjq-worker QUEUE [CONCURRENCY]
 *
 * Runs jobs from QUEUE, up to CONCURRENCY (default 4) at a time: prints
 * each job's payload and completes it with the result "ok". SIGINT (Ctrl-C)
 * or SIGTERM stops it cleanly: it claims no more jobs, lets the running ones
 * finish, then frees the client and returns from the event loop. A second
 * signal quits at once; jobs still running then are not lost, they come
 * back to the queue when their lease runs out.
 *
 * Try it with rjq-producer:
 *
 *     rjq-worker emails &
 *     rjq-producer emails hello world
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <event2/event.h>
#include <rjq/libevent.h> /* header-only glue: rjq on a libevent loop */

typedef struct app {
    struct event_base *base;
    struct event *sigint, *sigterm;
    rjq_client *client;
    rjq_worker *worker;
    int stopping;
} app;

/* Print bytes, escaping anything that is not printable ASCII (payloads are
 * binary-safe bytes, not strings). */
static void print_bytes(const unsigned char *p, size_t len) {
    for (size_t i = 0; i < len; i++) {
        if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\') putchar(p[i]);
        else printf("\\x%02x", p[i]);
    }
}

/* Called once rjq knows the outcome of a completion. */
static void on_completed(rjq_client *c, int status, void *data) {
    (void)c, (void)data;
    /* RJQ_ELEASELOST: the job's lease expired and it was handed to another
     * worker; our result was not stored. RJQ_ECANCELED: the client was
     * freed first (second Ctrl-C). */
    if (status != RJQ_OK && status != RJQ_ECANCELED)
        fprintf(stderr, "rjq-worker: complete: %s\n", rjq_strerror(status));
}

/*
 * The job handler. The job is ours until we call rjq_job_complete() or
 * rjq_job_fail(), exactly once: here, or later from any callback (rjq keeps
 * extending the job's lease meanwhile). The payload is valid until then.
 */
static void handle_job(rjq_job *job, void *data) {
    size_t len;
    const void *payload = rjq_job_payload(job, &len);
    (void)data;

    printf("job %s (attempt %d of %d): ", rjq_job_id(job), rjq_job_attempt(job),
           rjq_job_max_attempts(job));
    print_bytes(payload, len);
    putchar('\n');
    fflush(stdout);

    /* To fail it instead, and have it retried after its backoff:
     *     rjq_job_fail(job, "reason", RJQ_FAIL_RETRY, -1, NULL, NULL); */
    int rc = rjq_job_complete(job, "ok", 2, on_completed, NULL);
    if (rc != RJQ_OK) {
        /* Nothing was sent. Unless the client is closed (RJQ_ECLOSED),
         * the job is still ours: fail it so it does not wait for its lease. */
        fprintf(stderr, "rjq-worker: complete: %s\n", rjq_strerror(rc));
        if (rc != RJQ_ECLOSED) rjq_job_fail(job, rjq_strerror(rc), RJQ_FAIL_RETRY, -1, NULL, NULL);
    }
}

/* Leave the loop: free the client (safe inside an rjq callback: the free
 * completes when the callback returns) and drop our own events. */
static void shut_down(app *a) {
    rjq_client_free(a->client);
    a->client = NULL;
    a->worker = NULL;
    event_del(a->sigint);
    event_del(a->sigterm);
    event_base_loopexit(a->base, NULL);
}

/* Every job the worker handed out has been finished: we are done. */
static void on_stopped(rjq_worker *w, int status, void *data) {
    app *a = data;
    (void)w; /* freed by rjq when we return */
    a->worker = NULL;
    if (status == RJQ_ECANCELED) return; /* client freed meanwhile */
    fprintf(stderr, "rjq-worker: stopped\n");
    shut_down(a);
}

static void on_signal(evutil_socket_t sig, short what, void *arg) {
    app *a = arg;
    (void)sig, (void)what;
    if (a->stopping || a->worker == NULL) {
        fprintf(stderr, "rjq-worker: quitting now\n");
        shut_down(a);
        return;
    }
    a->stopping = 1;
    fprintf(stderr, "rjq-worker: stopping (running jobs: %d; signal again to quit now)\n",
            rjq_worker_running(a->worker));
    if (rjq_worker_stop(a->worker, on_stopped, a) != RJQ_OK) shut_down(a);
}

/* Connection news: rjq reconnects by itself, this is only for the log. */
static void on_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    (void)c, (void)data;
    const char *which = conn == RJQ_CONN_COMMAND ? "command" : "subscriber";
    if (ev == RJQ_EVENT_CONNECTED) fprintf(stderr, "rjq-worker: %s connection up\n", which);
    else fprintf(stderr, "rjq-worker: %s connection %s: %s\n", which,
                 ev == RJQ_EVENT_DISCONNECTED ? "lost, reconnecting" : "error",
                 detail ? detail : "");
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: rjq-worker QUEUE [CONCURRENCY]   (Redis: env REDIS_URL)\n");
        return 2;
    }
    int concurrency = argc == 3 ? atoi(argv[2]) : 4;
    if (concurrency < 1) {
        fprintf(stderr, "rjq-worker: CONCURRENCY must be at least 1\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN); /* a dropped connection must not kill us */

    app a = {0};
    a.base = event_base_new();
    if (a.base == NULL) return 1;

    /* 1. A client: two connections (commands, pub/sub) shared by every
     *    queue and worker of the program. NULL url: redis://127.0.0.1:6379. */
    rjq_client_options co = {0};
    co.url = getenv("REDIS_URL");
    co.on_event = on_event;
    int rc = rjq_libevent_client_new(&a.client, a.base, &co);
    if (rc != RJQ_OK) {
        fprintf(stderr, "rjq-worker: %s\n", rjq_strerror(rc));
        event_base_free(a.base);
        return 1;
    }

    /* 2. The queue, and a worker on it. */
    rjq_queue *q;
    rc = rjq_queue_open(a.client, argv[1], NULL, &q);
    if (rc == RJQ_OK) {
        rjq_worker_options wo = {0};
        wo.concurrency = concurrency;
        rc = rjq_worker_start(q, &wo, handle_job, &a, &a.worker);
    }
    if (rc != RJQ_OK) {
        fprintf(stderr, "rjq-worker: %s: %s\n", argv[1], rjq_strerror(rc));
        rjq_client_free(a.client);
        event_base_free(a.base);
        return 1;
    }

    /* 3. Signals through the loop, so that stopping runs as a normal loop
     *    callback (rjq functions are not async-signal-safe). */
    a.sigint = evsignal_new(a.base, SIGINT, on_signal, &a);
    a.sigterm = evsignal_new(a.base, SIGTERM, on_signal, &a);
    event_add(a.sigint, NULL);
    event_add(a.sigterm, NULL);

    fprintf(stderr, "rjq-worker: queue %s, concurrency %d\n", argv[1], concurrency);
    event_base_dispatch(a.base);

    rjq_client_free(a.client); /* NULL (already freed) is a no-op */
    event_free(a.sigint);
    event_free(a.sigterm);
    event_base_free(a.base);
    return 0;
}
