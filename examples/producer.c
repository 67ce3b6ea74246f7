/*
 * rjq-producer: a minimal rjq producer to copy from.
 *
 *     REDIS_URL=redis://127.0.0.1:6379 rjq-producer QUEUE PAYLOAD...
 *     some-command | rjq-producer QUEUE
 *
 * Enqueues one job per PAYLOAD argument (one rjq_enqueue() each), or, with
 * no PAYLOAD, one job per line of standard input (rjq_enqueue_batch(), up to
 * 1000 lines per call). Prints the id of each job, one per line, in order.
 * Exits 0 when every job was enqueued.
 *
 * The loop runs only after everything was handed to rjq: requests issued
 * before the connection is up wait in rjq's backlog and are sent when it
 * is. (A long-running program would instead enqueue from its loop's
 * callbacks, as the demo does.)
 */
/* getline: POSIX 2008 (the rjq build defines _GNU_SOURCE). */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <rjq/libevent.h> /* header-only glue: rjq on a libevent loop */

#define BATCH 1000

typedef struct app {
    struct event_base *base;
    rjq_client *client;
    long pending;   /* requests whose callback has not run yet */
    int failed;
} app;

/* A request finished; when it was the last one, free the client and leave
 * the loop. (rjq_client_free() is safe inside rjq callbacks.) */
static void request_done(app *a) {
    if (--a->pending == 0) {
        rjq_client_free(a->client);
        a->client = NULL;
        event_base_loopexit(a->base, NULL);
    }
}

/*
 * The enqueue callback: jobs[0..n-1] are the jobs of the request, in order
 * (n is 1 for rjq_enqueue()). The ids belong to rjq and are valid only
 * during the callback: copy what you want to keep.
 */
static void on_enqueued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n,
                        void *data) {
    app *a = data;
    if (status != RJQ_OK) {
        /* RJQ_ECONN: the outcome is unknown (the jobs may or may not have
         * been written). Give jobs your own ids (rjq_job_options.id) to
         * make enqueueing them again safe. */
        fprintf(stderr, "rjq-producer: enqueue: %s (%s)\n", rjq_strerror(status),
                rjq_client_get_errmsg(c));
        a->failed = 1;
    }
    for (size_t i = 0; i < n; i++) printf("%s%s\n", rjq_enqueued_get(jobs, i)->id, rjq_enqueued_get(jobs, i)->existed ? " (existed)" : "");
    request_done(a);
}

/* Enqueue each command-line payload as its own job. */
static int enqueue_args(app *a, rjq_queue *q, int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        /* NULL options: run now, priority 0, 3 attempts, default backoff. */
        int rc = rjq_enqueue(q, argv[i], strlen(argv[i]), NULL, on_enqueued, a);
        if (rc != RJQ_OK) {
            fprintf(stderr, "rjq-producer: enqueue: %s\n", rjq_strerror(rc));
            return -1;
        }
        a->pending++;
    }
    return 0;
}

/* Enqueue standard input, one job per line, BATCH lines per call. rjq
 * copies the items during the call, so the lines are freed right after. */
static int enqueue_stdin(app *a, rjq_queue *q) {
    rjq_enqueue_item items[BATCH];
    char *lines[BATCH];
    size_t n = 0, cap = 0;
    char *line = NULL;
    ssize_t len;
    int ret = 0;
    int eof = 0;

    while (!eof && ret == 0) {
        len = getline(&line, &cap, stdin);
        if (len < 0) {
            eof = 1;
        } else {
            if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
            lines[n] = line;
            items[n].size = sizeof items[n];
            items[n].payload = line;
            items[n].len = (size_t)len;
            items[n].opts = NULL;
            n++;
            line = NULL; /* getline allocates the next one */
            cap = 0;
        }
        if (n == BATCH || (eof && n > 0)) {
            int rc = rjq_enqueue_batch(q, items, n, on_enqueued, a);
            if (rc != RJQ_OK) {
                fprintf(stderr, "rjq-producer: enqueue: %s\n", rjq_strerror(rc));
                ret = -1;
            } else {
                a->pending++;
            }
            for (size_t i = 0; i < n; i++) free(lines[i]);
            n = 0;
        }
    }
    for (size_t i = 0; i < n; i++) free(lines[i]);
    free(line);
    return ret;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: rjq-producer QUEUE [PAYLOAD...]   (no PAYLOAD: lines of stdin;"
                        " Redis: env REDIS_URL)\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN); /* a dropped connection must not kill us */

    app a = {0};
    a.base = event_base_new();
    if (a.base == NULL) return 1;

    rjq_client_options co = RJQ_CLIENT_OPTIONS_INIT;
    co.url = getenv("REDIS_URL"); /* NULL: redis://127.0.0.1:6379 */
    int rc = rjq_libevent_client_new(&a.client, a.base, &co);
    if (rc != RJQ_OK) {
        fprintf(stderr, "rjq-producer: %s\n", rjq_strerror(rc));
        event_base_free(a.base);
        return 1;
    }

    rjq_queue *q;
    rc = rjq_queue_open(a.client, argv[1], NULL, &q);
    if (rc != RJQ_OK) {
        fprintf(stderr, "rjq-producer: %s: %s\n", argv[1], rjq_strerror(rc));
        a.failed = 1;
    } else if ((argc > 2 ? enqueue_args(&a, q, argc - 2, argv + 2) : enqueue_stdin(&a, q)) != 0) {
        a.failed = 1;
    }

    /* Run the loop until every callback has run (request_done frees the
     * client then). With nothing pending there is nothing to wait for. */
    if (a.pending > 0) event_base_dispatch(a.base);

    rjq_client_free(a.client); /* NULL (already freed) is a no-op */
    event_base_free(a.base);
    return a.failed ? 1 : 0;
}
