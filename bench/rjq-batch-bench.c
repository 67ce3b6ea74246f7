/*
 * The Redis cost of a batch member against a plain job (bench/README.md
 * "Batches"): N jobs enqueued (plain: rjq_enqueue; batch: rjq_batch_enqueue
 * into one batch, sealed), run by a worker of this process (64 slots) that
 * completes each at once, until the last one finished (batch: the batch
 * ended). Prints Redis' CPU (INFO cpu, used_cpu_user + used_cpu_sys of
 * the whole server) and its commands (INFO commandstats, scripts' own
 * commands included) per job, and the wall time.
 *
 *   rjq-batch-bench PORT N plain|batch    (a server on 127.0.0.1:PORT)
 *
 * awaits: N empty batches, each awaited (rjq_batch_await), left pending
 * for 3 s, then sealed (each ends at its seal), until every await got its
 * end: Redis' CPU and commands from the first await to the last end, per
 * batch (the seals' own calls included), and the script calls.
 *
 *   rjq-batch-bench PORT N awaits
 *
 * list: N empty batches created (their Redis CPU and commands per create),
 * then 200 listing pages of 20 (rjq_batch_list, state any, each from the
 * newest) and 200 of state dead (none is): Redis' CPU and commands per
 * page, which should not grow with N.
 *
 *   rjq-batch-bench PORT N list
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <rjq.h>
#include <rjq/libevent.h>

static struct event_base *base;
static long added, ran, ended, created;
static char batch_id[64];

static void die(const char *what, int rc) {
    fprintf(stderr, "rjq-batch-bench: %s: %s\n", what, rjq_strerror(rc));
    exit(1);
}

static void on_job(rjq_job *job, void *data) {
    (void)data;
    ran++;
    rjq_job_complete(job, NULL, 0, NULL, NULL);
}

static void on_added(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs, (void)n, (void)data;
    if (status != RJQ_OK) die("enqueue", status);
    added++;
}

static void on_created(rjq_client *c, int status, const char *id, void *data) {
    (void)c, (void)data;
    if (status != RJQ_OK) die("batch create", status);
    snprintf(batch_id, sizeof batch_id, "%s", id);
    created++;
}

static void on_sealed(rjq_client *c, int status, void *data) {
    (void)c, (void)data;
    if (status != RJQ_OK) die("seal", status);
}

static long awaited, pages;

static void on_page(rjq_client *c, int status, const rjq_batch_info *b, size_t n,
                    const char *next, void *data) {
    (void)c, (void)b, (void)next;
    if (status != RJQ_OK) die("list", status);
    if (n != (size_t)*(long *)data) die("a page of another size", RJQ_EPROTO);
    pages++;
}

/* list mode (see the head): pages of 20 of state st (NULL: any), each
 * expected to hold want batches. */
static void list_pages(rjq_queue *bq, const char *st, long want, const char *what);

static void on_awaited(rjq_client *c, int status, const rjq_batch_info *b, void *data) {
    (void)c, (void)data;
    if (status != RJQ_OK) die("await", status);
    if (strcmp(b->state, "completed") != 0) die("batch not completed", RJQ_EPROTO);
    awaited++;
}

static void on_ended(rjq_client *c, int status, const rjq_batch_info *b, void *data) {
    (void)c, (void)data;
    if (status != RJQ_OK) die("await", status);
    if (strcmp(b->state, "completed") != 0) die("batch not completed", RJQ_EPROTO);
    ended = 1;
}

static void until(const long *v, long want) {
    while (*v < want) event_base_loop(base, EVLOOP_ONCE);
}

/* Redis' CPU (used_cpu_user + used_cpu_sys) and commands run (the calls
 * of INFO commandstats but INFO's own), from a synchronous connection. */
typedef struct redis_numbers {
    double cpu;
    long long calls, fcalls;
} redis_numbers;

static redisContext *sync_rc;

static redis_numbers numbers(void) {
    redis_numbers n = {0, 0, 0};
    redisReply *r = redisCommand(sync_rc, "INFO all");
    if (r == NULL || r->type != REDIS_REPLY_STRING) die("INFO", RJQ_EREDIS);
    const char *p;
    if ((p = strstr(r->str, "used_cpu_user:"))) n.cpu += atof(p + 14);
    if ((p = strstr(r->str, "used_cpu_sys:"))) n.cpu += atof(p + 13);
    for (p = r->str; (p = strstr(p, "cmdstat_")) != NULL; p++) {
        if (strncmp(p, "cmdstat_info:", 13) == 0) continue;
        const char *cc = strstr(p, "calls=");
        if (cc) n.calls += atoll(cc + 6);
        if (cc && (strncmp(p, "cmdstat_fcall:", 14) == 0 || strncmp(p, "cmdstat_evalsha:", 16) == 0))
            n.fcalls += atoll(cc + 6);
    }
    freeReplyObject(r);
    return n;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 4 || (strcmp(argv[3], "plain") != 0 && strcmp(argv[3], "batch") != 0 &&
                      strcmp(argv[3], "awaits") != 0 && strcmp(argv[3], "list") != 0)) {
        fprintf(stderr, "usage: rjq-batch-bench PORT N plain|batch|awaits|list\n");
        return 2;
    }
    long n = atol(argv[2]);
    int batch = strcmp(argv[3], "batch") == 0;
    base = event_base_new();
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", atoi(argv[1]));
    sync_rc = redisConnect("127.0.0.1", atoi(argv[1]));
    if (sync_rc == NULL || sync_rc->err) die("connect", RJQ_ECONN);
    rjq_client_options o = RJQ_CLIENT_OPTIONS_INIT;
    o.url = url;
    o.prefix = "bench";
    rjq_client *c;
    int rc = rjq_libevent_client_new(&c, base, &o);
    if (rc != RJQ_OK) die("client", rc);
    rjq_queue *bq, *q;
    if ((rc = rjq_queue_open(c, "bb", NULL, &bq)) || (rc = rjq_queue_open(c, "bm", NULL, &q)))
        die("queue", rc);
    if (strcmp(argv[3], "list") == 0) {
        redis_numbers before = numbers();
        for (long i = 0; i < n; i++) {
            char id[32];
            snprintf(id, sizeof id, "l%ld", i);
            rjq_batch_options bo = RJQ_BATCH_OPTIONS_INIT;
            bo.id = id;
            if ((rc = rjq_batch_create(bq, &bo, on_created, NULL))) die("batch create", rc);
            if (i % 1000 == 999) until(&created, i + 1 - 2000 > 0 ? i + 1 - 2000 : 0);
        }
        until(&created, n);
        redis_numbers after = numbers();
        printf("list: %ld batches created; Redis CPU %.1f us/create, %.2f commands/create\n", n,
               (after.cpu - before.cpu) * 1e6 / (double)n,
               (double)(after.calls - before.calls) / (double)n);
        list_pages(bq, NULL, n < 20 ? n : 20, "any");
        list_pages(bq, "dead", 0, "dead (none)");
        rjq_client_free(c);
        event_base_free(base);
        redisFree(sync_rc);
        return 0;
    }
    if (strcmp(argv[3], "awaits") == 0) {
        for (long i = 0; i < n; i++) {
            char id[32];
            snprintf(id, sizeof id, "w%ld", i);
            rjq_batch_options bo = RJQ_BATCH_OPTIONS_INIT;
            bo.id = id;
            if ((rc = rjq_batch_create(bq, &bo, on_created, NULL))) die("batch create", rc);
        }
        until(&created, n);
        redis_numbers before = numbers();
        double t0 = now_s();
        for (long i = 0; i < n; i++) {
            char id[32];
            snprintf(id, sizeof id, "w%ld", i);
            if ((rc = rjq_batch_await(bq, id, 600000, on_awaited, NULL))) die("await", rc);
        }
        struct timeval three = {3, 0};
        event_base_loopexit(base, &three);
        event_base_dispatch(base);
        for (long i = 0; i < n; i++) {
            char id[32];
            snprintf(id, sizeof id, "w%ld", i);
            if ((rc = rjq_batch_seal(bq, id, on_sealed, NULL))) die("seal", rc);
        }
        until(&awaited, n);
        double t1 = now_s();
        redis_numbers after = numbers();
        printf("awaits: %ld batches awaited 3 s then sealed, in %.2f s; Redis CPU %.1f us/batch, "
               "%.2f commands/batch, %.2f script calls/batch (the seal's 1 included)\n",
               n, t1 - t0, (after.cpu - before.cpu) * 1e6 / (double)n,
               (double)(after.calls - before.calls) / (double)n,
               (double)(after.fcalls - before.fcalls) / (double)n);
        rjq_client_free(c);
        event_base_free(base);
        redisFree(sync_rc);
        return 0;
    }
    redis_numbers before = numbers();
    double t0 = now_s();
    if (batch) {
        if ((rc = rjq_batch_create(bq, NULL, on_created, NULL))) die("batch create", rc);
        while (!batch_id[0]) event_base_loop(base, EVLOOP_ONCE);
    }
    rjq_worker_options wo = RJQ_WORKER_OPTIONS_INIT;
    wo.concurrency = 64;
    rjq_worker *w;
    if ((rc = rjq_worker_start(q, &wo, on_job, NULL, &w))) die("worker", rc);
    for (long i = 0; i < n; i++) {
        rc = batch ? rjq_batch_enqueue(bq, batch_id, q, "x", 1, NULL, on_added, NULL)
                   : rjq_enqueue(q, "x", 1, NULL, on_added, NULL);
        if (rc != RJQ_OK) die("enqueue", rc);
        if (i % 1000 == 999) until(&added, i + 1 - 2000 > 0 ? i + 1 - 2000 : 0);
    }
    until(&added, n);
    if (batch) {
        if ((rc = rjq_batch_seal(bq, batch_id, on_sealed, NULL))) die("seal", rc);
        if ((rc = rjq_batch_await(bq, batch_id, 600000, on_ended, NULL))) die("await", rc);
        until(&ended, 1);
    }
    until(&ran, n);
    double t1 = now_s();
    redis_numbers after = numbers();
    printf("%s: %ld jobs in %.2f s; Redis CPU %.1f us/job, %.2f commands/job\n", argv[3], n,
           t1 - t0, (after.cpu - before.cpu) * 1e6 / (double)n,
           (double)(after.calls - before.calls) / (double)n);
    rjq_worker_stop(w, NULL, NULL);
    rjq_client_free(c);
    event_base_free(base);
    redisFree(sync_rc);
    return 0;
}

static void list_pages(rjq_queue *bq, const char *st, long want, const char *what) {
    redis_numbers before = numbers();
    pages = 0;
    for (long i = 0; i < 200; i++) {
        int rc = rjq_batch_list(bq, st, NULL, 20, on_page, &want);
        if (rc != RJQ_OK) die("list", rc);
        until(&pages, i + 1);
    }
    redis_numbers after = numbers();
    printf("list: 200 pages of 20, state %s; Redis CPU %.1f us/page, %.2f commands/page\n", what,
           (after.cpu - before.cpu) * 1e6 / 200.0, (double)(after.calls - before.calls) / 200.0);
}
