/*
 * A completion refused by Redis (rjq.h, rjq_job_complete: "refused by
 * Redis, nothing changed"): the job stays active under its token and comes
 * back after its lease (the reclaim sweep), or sooner, at the worker's
 * next recovering claim (after its push channel is subscribed again),
 * which hands it to the handler again at once under a new token, its
 * attempt not spent. The refusal: a counter of the queue's stats hash
 * that is not an integer (RJQ_EWRONGTYPE).
 */
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

typedef struct held {
    rjq_job *job;
    long handled;
    int attempt;
    char id[64], token[128];
} held;

static void hold(rjq_job *job, void *data) {
    held *h = data;
    h->job = job;
    h->handled++;
    h->attempt = rjq_job_get_attempt(job);
    snprintf(h->id, sizeof h->id, "%s", rjq_job_get_id(job));
    snprintf(h->token, sizeof h->token, "%s", rjq_job_get_token(job));
}

typedef struct done_wait {
    int done, status;
} done_wait;

static void on_done(rjq_client *c, int status, void *data) {
    (void)c;
    done_wait *d = data;
    d->done++;
    d->status = status;
}

/* Start a worker (lease_ms), enqueue one job and run the loop until the
 * handler holds it; then complete it while the stats counter "retained"
 * is not an integer: refused (RJQ_EWRONGTYPE), and the counter is put
 * right again. Returns the worker. */
static rjq_worker *refused_completion(test_env *e, held *h, long lease_ms) {
    rjq_worker_options wo = quiet_worker_options(1);
    wo.lease_ms = lease_ms;
    rjq_worker *w = NULL;
    ASSERT_OK(rjq_worker_start(e->q, &wo, hold, h, &w));
    /* its push channel confirmed and the claim that follows answered: no
     * recovering claim is under way */
    wait_worker_started(e->base, e->c, e->q, e->rc, "g");
    ASSERT_OK(enqueue_job(e->base, e->q, "x", NULL).status);
    ASSERT(loop_until_count(e->base, &h->handled, 1, 10000));
    ASSERT_EQ(1, h->attempt);
    freeReplyObject(server_cmd(e->rc, "HSET t:{g}:stats retained 12abc"));
    done_wait d = {0};
    ASSERT_OK(rjq_job_complete(h->job, "r", 1, on_done, &d));
    ASSERT(loop_until(e->base, &d.done, 10000));
    ASSERT_EQ(RJQ_EWRONGTYPE, d.status);
    freeReplyObject(server_cmd(e->rc, "HDEL t:{g}:stats retained"));
    /* nothing changed: still active under the first token */
    redisReply *r = server_cmd(e->rc, "HGET t:{g}:state %s", h->id);
    ASSERT(r->type == REDIS_REPLY_STRING);
    char want[256];
    snprintf(want, sizeof want, "active 1 %s", h->token);
    ASSERT(strncmp(r->str, want, strlen(want)) == 0);
    freeReplyObject(r);
    return w;
}

TEST(refused_completion_is_taken_back_by_the_recovering_claim_with_its_attempt) {
    test_env e;
    env_start(&e, "g");
    held h = {0};
    rjq_worker *w = refused_completion(&e, &h, 60000);
    char first[128];
    snprintf(first, sizeof first, "%s", h.token);
    /* the subscriber connection drops: once the push channel is subscribed
     * again the worker's recovering claim takes the job back, long before
     * its lease of a minute ends */
    freeReplyObject(server_cmd(e.rc, "CLIENT KILL TYPE pubsub"));
    ASSERT(loop_until_count(e.base, &h.handled, 2, 10000));
    ASSERT_EQ(1, h.attempt);                  /* not spent */
    ASSERT(strcmp(first, h.token) != 0);      /* a new token */
    ASSERT_EQ(0, get_stats(e.base, e.q).reclaimed); /* not the sweep */
    done_wait d = {0};
    ASSERT_OK(rjq_job_complete(h.job, "r", 1, on_done, &d));
    ASSERT(loop_until(e.base, &d.done, 10000));
    ASSERT_OK(d.status);
    rjq_stats st = get_stats(e.base, e.q);
    ASSERT_EQ(1, st.completed);
    ASSERT_EQ(0, st.active);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}

static void on_counted(rjq_client *c, int status, long long n, void *data) {
    (void)c;
    count_wait *w = data;
    w->done++;
    w->status = status;
    w->n = n;
}

TEST(refused_completion_comes_back_after_its_lease_without_a_recovering_claim) {
    test_env e;
    env_start(&e, "g");
    held h = {0};
    rjq_worker *w = refused_completion(&e, &h, 1000);
    /* its lease is no longer extended: once the server's clock is past its
     * end, the sweep takes the job back */
    long long end = server_int(e.rc, "ZSCORE t:{g}:active %s", h.id);
    ASSERT(end > 0);
    ASSERT(loop_until_server_ms(e.base, e.rc, end + 1, 10000));
    ASSERT_EQ(1, h.handled); /* nothing took it back before */
    count_wait cw = {0};
    ASSERT_OK(rjq_queue_reclaim(e.q, on_counted, &cw));
    ASSERT(loop_until(e.base, &cw.done, 10000));
    ASSERT_OK(cw.status);
    ASSERT_EQ(1, cw.n);
    ASSERT_EQ(1, get_stats(e.base, e.q).reclaimed);
    /* back in the queue: the worker runs it again */
    ASSERT(loop_until_count(e.base, &h.handled, 2, 10000));
    done_wait d = {0};
    ASSERT_OK(rjq_job_complete(h.job, "r", 1, on_done, &d));
    ASSERT(loop_until(e.base, &d.done, 10000));
    ASSERT_OK(d.status);
    worker_stop_wait(e.base, w);
    env_stop(&e);
}
