/*
 * rjq-gateway_worker: a worker behind rjq serve's enqueue-and-wait
 * (POST /v1/queues/Q/jobs?wait=MS), used by its tests and benchmark.
 *
 *     rjq-gateway_worker [-r REDIS_URL] [-c CONCURRENCY] [-P PREFIX] QUEUE...
 *
 * Runs the jobs of each QUEUE (default "jobs"), CONCURRENCY at a time per
 * queue (default 100), and answers from the payload alone, so a caller can
 * check that every response belongs to its request:
 *
 *   payload "fail..."          the job fails for good (RJQ_FAIL_FATAL) with
 *                              the error "refused: <payload>" -> HTTP 502
 *   payload "sleep:<ms>:..."   completes after <ms> ms with "done:<payload>"
 *   anything else              completes at once with "done:<payload>"
 *
 * SIGINT/SIGTERM: claim nothing more, finish the running jobs, exit 0. A
 * second signal frees the client at once (running jobs come back to their
 * queue when their lease expires).
 *
 * Environment: REDIS_URL, RJQ_PREFIX, WORKER_CONCURRENCY.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <rjq/libevent.h>

#define QUEUES_MAX 64
#define ERROR_MAX 200

typedef struct app {
    struct event_base *base;
    struct event *sigint, *sigterm;
    rjq_client *c;
    rjq_worker *workers[QUEUES_MAX];
    int nworkers, running_workers;
    int stopping;
    long long completed, failed, finish_errors;
    struct sleeper *sleepers; /* jobs waiting out their sleep */
} app;

/* A "sleep:" job waiting for its timer. */
typedef struct sleeper {
    app *a;
    rjq_job *job;
    struct event *ev;
    struct sleeper *prev, *next;
} sleeper;

static void on_finished(rjq_client *c, int status, void *data) {
    app *a = data;
    (void)c;
    /* ELEASELOST: the lease expired and the job went elsewhere; ECANCELED:
     * the client was freed first (second signal). */
    if (status != RJQ_OK && status != RJQ_ECANCELED) {
        a->finish_errors++;
        fprintf(stderr, "rjq-gateway_worker: finishing a job: %s\n", rjq_strerror(status));
    }
}

static void complete(app *a, rjq_job *job) {
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    char *res = malloc(len + 5);
    if (res == NULL) {
        rjq_job_fail(job, "worker out of memory", RJQ_FAIL_RETRY, -1, on_finished, a);
        return;
    }
    memcpy(res, "done:", 5);
    if (len) memcpy(res + 5, p, len);
    /* The handle is released whatever this returns; a result over
     * max_payload fails the attempt and on_finished gets RJQ_ETOOBIG. */
    int rc = rjq_job_complete(job, res, len + 5, on_finished, a);
    free(res);
    a->completed += rc == RJQ_OK;
}

static void unlink_sleeper(sleeper *s) {
    if (s->prev) s->prev->next = s->next;
    else s->a->sleepers = s->next;
    if (s->next) s->next->prev = s->prev;
}

static void on_slept(evutil_socket_t fd, short what, void *arg) {
    sleeper *s = arg;
    (void)fd, (void)what;
    unlink_sleeper(s);
    complete(s->a, s->job);
    event_free(s->ev);
    free(s);
}

static void handle(rjq_job *job, void *data) {
    app *a = data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    if (len >= 4 && memcmp(p, "fail", 4) == 0) {
        char err[ERROR_MAX + 16];
        snprintf(err, sizeof err, "refused: %.*s", (int)(len < ERROR_MAX ? len : ERROR_MAX), p);
        if (rjq_job_fail(job, err, RJQ_FAIL_FATAL, -1, on_finished, a) == RJQ_OK) a->failed++;
        return;
    }
    if (len > 6 && memcmp(p, "sleep:", 6) == 0) {
        long ms = strtol(p + 6, NULL, 10);
        sleeper *s = calloc(1, sizeof *s);
        if (ms > 0 && s && (s->ev = evtimer_new(a->base, on_slept, s)) != NULL) {
            struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
            s->a = a;
            s->job = job;
            s->next = a->sleepers;
            if (s->next) s->next->prev = s;
            a->sleepers = s;
            evtimer_add(s->ev, &tv);
            return;
        }
        free(s);
    }
    complete(a, job);
}

static void on_stopped(rjq_worker *w, int status, void *data) {
    app *a = data;
    (void)w, (void)status;
    if (--a->running_workers == 0) {
        rjq_client_free(a->c); /* deferred until this callback returns */
        a->c = NULL;
        event_del(a->sigint);
        event_del(a->sigterm);
    }
}

/* Drop sleeping jobs (their client is going away; they come back after
 * their lease). */
static void drop_sleepers(app *a) {
    while (a->sleepers) {
        sleeper *s = a->sleepers;
        unlink_sleeper(s);
        rjq_job_fail(s->job, "worker stopped", RJQ_FAIL_RETRY, 0, NULL, NULL); /* releases it */
        event_free(s->ev);
        free(s);
    }
}

static void on_signal(evutil_socket_t sig, short what, void *arg) {
    app *a = arg;
    (void)what;
    if (a->stopping) {
        fprintf(stderr, "rjq-gateway_worker: signal %d again: quitting now\n", (int)sig);
        rjq_client *c = a->c;
        a->c = NULL;
        rjq_client_free(c); /* stop callbacks get ECANCELED */
        drop_sleepers(a);
        event_del(a->sigint);
        event_del(a->sigterm);
        return;
    }
    fprintf(stderr, "rjq-gateway_worker: signal %d: finishing running jobs\n", (int)sig);
    a->stopping = 1;
    for (int i = 0; i < a->nworkers; i++) rjq_worker_stop(a->workers[i], on_stopped, a);
}

static void on_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    (void)c, (void)data;
    if (ev != RJQ_EVENT_CONNECTED)
        fprintf(stderr, "rjq-gateway_worker: redis %s connection: %s\n",
                conn == RJQ_CONN_COMMAND ? "command" : "subscriber", detail ? detail : "?");
}

static void usage(FILE *f) {
    fprintf(f, "usage: rjq-gateway_worker [-r REDIS_URL] [-c CONCURRENCY] [-P PREFIX] [-n NAME] [QUEUE...]\n");
}

int main(int argc, char **argv) {
    app a;
    memset(&a, 0, sizeof a);
    const char *url = getenv("REDIS_URL"), *prefix = getenv("RJQ_PREFIX"), *name = "rjq-gateway-worker";
    const char *conc_env = getenv("WORKER_CONCURRENCY");
    long concurrency = conc_env && *conc_env ? strtol(conc_env, NULL, 10) : 100;
    int ch;
    while ((ch = getopt(argc, argv, "r:c:P:n:h")) != -1) {
        switch (ch) {
        case 'r': url = optarg; break;
        case 'c': concurrency = strtol(optarg, NULL, 10); break;
        case 'P': prefix = optarg; break;
        case 'n': name = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    const char *def_queue[] = {"jobs"};
    const char **queues = argc > optind ? (const char **)argv + optind : def_queue;
    int nqueues = argc > optind ? argc - optind : 1;
    if (concurrency < 1 || concurrency > 100000 || nqueues > QUEUES_MAX) {
        usage(stderr);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);

    a.base = event_base_new();
    if (a.base == NULL) return 1;
    rjq_client_options o = RJQ_CLIENT_OPTIONS_INIT;
    o.url = url;
    o.prefix = prefix;
    o.name = name;
    o.on_event = on_event;
    int rc = rjq_libevent_client_new(&a.c, a.base, &o);
    if (rc != RJQ_OK) {
        fprintf(stderr, "rjq-gateway_worker: %s\n", rjq_strerror(rc));
        event_base_free(a.base);
        return 1;
    }
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = (int)concurrency;
    for (int i = 0; i < nqueues; i++) {
        rjq_queue *q;
        if ((rc = rjq_queue_open(a.c, queues[i], NULL, &q)) != RJQ_OK ||
            (rc = rjq_worker_start(q, &wo, handle, &a, &a.workers[a.nworkers])) != RJQ_OK) {
            fprintf(stderr, "rjq-gateway_worker: queue %s: %s\n", queues[i], rjq_strerror(rc));
            rjq_client_free(a.c);
            event_base_free(a.base);
            return 1;
        }
        a.nworkers++;
    }
    a.running_workers = a.nworkers;
    a.sigint = evsignal_new(a.base, SIGINT, on_signal, &a);
    a.sigterm = evsignal_new(a.base, SIGTERM, on_signal, &a);
    event_add(a.sigint, NULL);
    event_add(a.sigterm, NULL);
    fprintf(stderr, "rjq-gateway_worker: %d queue(s), concurrency %ld each\n", nqueues, concurrency);

    event_base_dispatch(a.base);

    rjq_client_free(a.c);
    drop_sleepers(&a);
    fprintf(stderr, "rjq-gateway_worker: stopped: %lld completed, %lld failed, %lld finish error(s)\n",
            a.completed, a.failed, a.finish_errors);
    event_free(a.sigint);
    event_free(a.sigterm);
    event_base_free(a.base);
    return 0;
}
