/*
 * rjq_queue_search(): one bounded step of a search of a queue's payloads
 * (search.lua: one HSCAN of about `count` payloads). Stepping from cursor
 * "0" until the cursor is "0" again finds every job holding the bytes, in
 * every state kept, with its state; a step reads about `count` payloads
 * whatever the queue's size; bad arguments and a sharded front are refused
 * before anything is sent.
 */
#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

typedef struct step_wait {
    int done, status;
    char cursor[32];
    long long scanned, total;
    char found[8192];          /* " id=state" per match */
    size_t n;
} step_wait;

static void on_step(rjq_client *c, int status, const char *cursor, long long scanned,
                    long long total, const rjq_search_match *m, size_t n, void *data) {
    step_wait *w = data;
    (void)c;
    w->done++;
    w->status = status;
    w->scanned = scanned;
    w->total = total;
    w->n = n;
    snprintf(w->cursor, sizeof w->cursor, "%s", cursor ? cursor : "");
    w->found[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        size_t used = strlen(w->found);
        const rjq_search_match *e = rjq_search_match_get(m, i);
        snprintf(w->found + used, sizeof w->found - used, " %s=%s", e->id, e->state);
    }
}

static step_wait step(test_env *e, rjq_queue *q, const char *cursor, const char *text, long count) {
    step_wait w;
    memset(&w, 0, sizeof w);
    ASSERT_OK(rjq_queue_search(q, cursor, text, strlen(text), count, on_step, &w));
    ASSERT(loop_until(e->base, &w.done, 5000));
    ASSERT_EQ(1, w.done);
    return w;
}

TEST(stepping_from_cursor_zero_to_zero_finds_each_job_holding_the_bytes_with_its_state) {
    test_env e;
    env_start(&e, "srch");
    char id[32], payload[64];
    for (int i = 0; i < 1200; i++) { /* (past 512: not one listpack HSCAN reads whole) */
        snprintf(id, sizeof id, "j%d", i);
        snprintf(payload, sizeof payload, i % 10 == 0 ? "{\"to\":\"needle-%d\"}" : "{\"n\":%d}", i);
        rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
        o.id = id;
        o.delay_ms = i == 10 ? 600000 : 0;
        ASSERT_OK(enqueue_job(e.base, e.q, payload, &o).status);
    }
    /* steps of 20 payloads: many steps, each reading about 20 (HSCAN's
     * COUNT is a hint), every match once or more */
    char cursor[32] = "0";
    static char all[65536];
    all[0] = '\0';
    long steps = 0, scanned = 0;
    do {
        step_wait w = step(&e, e.q, cursor, "needle", 20);
        ASSERT_OK(w.status);
        ASSERT_EQ(1200, w.total);
        ASSERT(w.scanned <= 100); /* bounded by count (HSCAN's hint), not by the queue */
        scanned += w.scanned;
        strcat(all, w.found);
        snprintf(cursor, sizeof cursor, "%s", w.cursor);
        steps++;
        ASSERT(strlen(all) < sizeof all - 8192);
    } while (strcmp(cursor, "0") != 0 && steps < 1000);
    ASSERT(steps >= 1200 / 100);
    ASSERT(scanned >= 1200);
    for (int i = 0; i < 1200; i += 10) {
        char want[48];
        snprintf(want, sizeof want, " j%d=%s", i, i == 10 ? "delayed" : "ready");
        ASSERT(strstr(all, want) != NULL);
    }
    ASSERT(strstr(all, " j1=") == NULL && strstr(all, " j11=") == NULL && strstr(all, " j1199=") == NULL);
    /* the bytes as they are, not a pattern */
    step_wait w = step(&e, e.q, "0", "needle-2*", 1000);
    ASSERT_OK(w.status);
    ASSERT_EQ(0, (long long)w.n);
    env_stop(&e);
}

TEST(bad_arguments_and_a_sharded_front_are_refused_before_anything_is_sent) {
    test_env e;
    env_start(&e, "srchbad");
    step_wait w;
    memset(&w, 0, sizeof w);
    char big[RJQ_SEARCH_BYTES_MAX + 1];
    memset(big, 'x', sizeof big);
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_search(NULL, "0", "x", 1, 10, on_step, &w));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_search(e.q, "0", "x", 1, 10, NULL, &w));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_search(e.q, NULL, "x", 1, 10, on_step, &w));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_search(e.q, "", "x", 1, 10, on_step, &w));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_search(e.q, "12a", "x", 1, 10, on_step, &w));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_search(e.q, "123456789012345678901", "x", 1, 10, on_step, &w));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_search(e.q, "0", "x", 0, 10, on_step, &w));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_search(e.q, "0", NULL, 1, 10, on_step, &w));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_search(e.q, "0", big, sizeof big, 10, on_step, &w));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_search(e.q, "0", "x", 1, 0, on_step, &w));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_search(e.q, "0", "x", 1, RJQ_SEARCH_COUNT_MAX + 1, on_step, &w));
    /* the longest text and count are taken; an empty queue ends at once */
    ASSERT_OK(rjq_queue_search(e.q, "0", big, RJQ_SEARCH_BYTES_MAX, RJQ_SEARCH_COUNT_MAX, on_step, &w));
    ASSERT(loop_until(e.base, &w.done, 5000));
    ASSERT_OK(w.status);
    ASSERT_STREQ("0", w.cursor);
    ASSERT_EQ(0, w.total);
    ASSERT_EQ(0, (long long)w.n);
    /* a sharded queue's handle: each shard is searched on its own */
    ASSERT_OK(declare_shards(e.base, e.q, 2));
    rjq_queue *sq = open_learnt(e.base, e.c, "srchbad");
    memset(&w, 0, sizeof w);
    ASSERT_EQ(RJQ_ESHARDED, rjq_queue_search(sq, "0", "x", 1, 10, on_step, &w));
    ASSERT_OK(rjq_queue_search(rjq_queue_get_shard(sq, 1), "0", "x", 1, 10, on_step, &w));
    ASSERT(loop_until(e.base, &w.done, 5000));
    ASSERT_OK(w.status);
    ASSERT_EQ(1, w.done);
    env_stop(&e);
}
