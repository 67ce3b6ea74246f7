/*
 * rjq_queue_list_jobs_after: pages by cursor stay correct while jobs move
 * (issue 38). A worker takes jobs between the pages: no job is listed
 * twice, and every job still waiting at the end was listed (pages by
 * offset skip the jobs that moved up). A cursor whose own job has left
 * the list (cancelled) still goes on after it. Pages of the completed
 * index read it once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "server.h"
#include "waits.h"

#define NJOBS 300

typedef struct page_wait {
    int done, status;
    size_t n;
    char ids[RJQ_JOBS_PAGE_MAX][16];
    char next[300];
    int has_next;
} page_wait;

static void on_page(rjq_client *c, int status, const char *const *ids, size_t n, const char *next,
                    void *data) {
    page_wait *w = data;
    (void)c;
    w->done++;
    w->status = status;
    w->n = n;
    for (size_t i = 0; i < n; i++) snprintf(w->ids[i], sizeof w->ids[i], "%s", ids[i]);
    w->has_next = next != NULL;
    snprintf(w->next, sizeof w->next, "%s", next ? next : "");
}

static page_wait *page_after(test_env *e, rjq_job_state st, const char *after, long limit) {
    static page_wait w;
    memset(&w, 0, sizeof w);
    ASSERT_OK(rjq_queue_list_jobs_after(e->q, st, after, limit, on_page, &w));
    ASSERT(loop_until(e->base, &w.done, 5000));
    ASSERT_EQ(1, w.done);
    ASSERT_OK(w.status);
    return &w;
}

/* The index of id "jNNN", asserted. */
static int job_no(const char *id) {
    ASSERT(id[0] == 'j');
    int i = atoi(id + 1);
    ASSERT(i >= 0 && i < NJOBS);
    return i;
}

static long started;

static void complete_handler(rjq_job *job, void *data) {
    (void)data;
    started++;
    ASSERT_OK(rjq_job_complete(job, "", 0, on_done_ok, NULL));
}

static void set_paused(test_env *e, int pause) {
    count_wait w = {0};
    ASSERT_OK(pause ? rjq_queue_pause(e->q, on_count, &w) : rjq_queue_resume(e->q, on_count, &w));
    ASSERT(loop_until(e->base, &w.done, 5000));
    ASSERT_OK(w.status);
}

TEST(pages_of_ready_jobs_neither_skip_nor_repeat_while_a_worker_takes_some) {
    test_env e;
    env_start(&e, "pg");
    char id[16];
    /* claim order: priority 5 first, then priority 0 (the list), then -1 */
    for (int i = 0; i < NJOBS; i++) {
        snprintf(id, sizeof id, "j%03d", i);
        enqueue_x_ok(e.base, e.q, id, 0, i % 10 == 0 ? 5 : i % 10 == 5 ? -1 : 0);
    }
    set_paused(&e, 1);
    rjq_worker_options wo = quiet_worker_options(1);
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(e.q, &wo, complete_handler, NULL, &w));
    static int seen[NJOBS];
    memset(seen, 0, sizeof seen);
    char cursor[300] = "";
    int pages = 0;
    for (;;) {
        page_wait *p = page_after(&e, RJQ_STATE_READY, cursor, 20);
        for (size_t i = 0; i < p->n; i++) {
            int k = job_no(p->ids[i]);
            if (seen[k]) fprintf(stderr, "%s listed twice\n", p->ids[i]);
            ASSERT_EQ(0, seen[k]);
            seen[k] = 1;
        }
        pages++;
        if (!p->has_next) break;
        snprintf(cursor, sizeof cursor, "%s", p->next);
        /* the worker takes at least 6 jobs (from the head) between pages */
        long before = started;
        set_paused(&e, 0);
        ASSERT(loop_until_count(e.base, &started, before + 6, 10000));
        set_paused(&e, 1);
    }
    worker_stop_wait(e.base, w);
    ASSERT(started > 0 && started < NJOBS);
    /* every job still ready was listed (nothing moves now: paused, no worker) */
    long ready = 0;
    for (int i = 0; i < NJOBS; i++) {
        snprintf(id, sizeof id, "j%03d", i);
        info_wait in = get_info(e.base, e.q, id);
        if (strcmp(in.state, "ready") != 0) continue;
        ready++;
        if (!seen[i]) fprintf(stderr, "%s is ready and was never listed\n", id);
        ASSERT_EQ(1, seen[i]);
    }
    ASSERT_EQ(NJOBS - started, ready);
    ASSERT(pages > 3);
    env_stop(&e);
}

static void on_cancelled(rjq_client *c, int status, const char *state, void *data) {
    (void)c;
    (void)state;
    ASSERT_OK(status);
    (*(int *)data)++;
}

/* Delayed jobs with ties in their due time: the page after a cursor whose
 * job was cancelled starts right after it; a bad cursor is refused. */
TEST(pages_of_delayed_jobs_go_on_after_a_cursor_whose_job_left) {
    test_env e;
    env_start(&e, "pd");
    char id[16];
    for (int i = 0; i < 40; i++) {
        snprintf(id, sizeof id, "j%03d", i);
        enqueue_x_ok(e.base, e.q, id, 3600000, 0);
    }
    /* the same due time for a run of them, first (ties: ordered by id) */
    ASSERT_EQ(0, server_int(e.rc, "ZADD t:{pd}:delayed XX 1 j014 1 j013 1 j012 1 j011 1 j010"));
    page_wait *p = page_after(&e, RJQ_STATE_DELAYED, NULL, 2);
    ASSERT_EQ(2, (long)p->n);
    ASSERT_STREQ("j010", p->ids[0]);
    ASSERT_STREQ("j011", p->ids[1]);
    ASSERT_EQ(1, p->has_next);
    char cursor[300];
    snprintf(cursor, sizeof cursor, "%s", p->next);
    int done = 0;
    ASSERT_OK(rjq_queue_cancel(e.q, "j011", on_cancelled, &done)); /* the cursor's own job */
    ASSERT_OK(rjq_queue_cancel(e.q, "j010", on_cancelled, &done)); /* one listed */
    ASSERT(loop_until(e.base, &done, 5000));
    while (done < 2) ASSERT(loop_until(e.base, &done, 5000));
    p = page_after(&e, RJQ_STATE_DELAYED, cursor, 4);
    ASSERT_EQ(4, (long)p->n);
    ASSERT_STREQ("j012", p->ids[0]);
    ASSERT_STREQ("j014", p->ids[2]);
    ASSERT_STREQ("j000", p->ids[3]);
    /* to the end: 40 - 2 - 4 listed (the cancelled ones among them) */
    snprintf(cursor, sizeof cursor, "%s", p->next);
    p = page_after(&e, RJQ_STATE_DELAYED, cursor, 100);
    ASSERT_EQ(34, (long)p->n);
    ASSERT_EQ(0, p->has_next);
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_list_jobs_after(e.q, RJQ_STATE_DELAYED, "x y", 10, on_page, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_list_jobs_after(e.q, RJQ_STATE_DELAYED, "zabc j1", 10, on_page, NULL));
    ASSERT_EQ(RJQ_EINVAL, rjq_queue_list_jobs_after(e.q, RJQ_STATE_DELAYED, "", 0, on_page, NULL));
    env_stop(&e);
}

/* Pages of the completed index ("<time> <id> <id>..." entries, oldest
 * first) read it once, each entry by one LRANGE (INFO commandstats):
 * after a cursor still indexed the page starts right after it; after one
 * swept, from the oldest kept. */
TEST(pages_of_completed_jobs_read_the_index_once) {
    test_env e;
    env_start(&e, "pc");
    for (int i = 0; i < 250; i++) { /* 250 entries of 2 ids: c000 c001, ..., c498 c499 */
        char entry[64];
        snprintf(entry, sizeof entry, "%d c%03d c%03d", 1000 + i, 2 * i, 2 * i + 1);
        freeReplyObject(server_cmd(e.rc, "RPUSH t:{pc}:completed %s", entry));
    }
    long long calls = server_calls(e.rc, "lrange");
    page_wait *p = page_after(&e, RJQ_STATE_COMPLETED, NULL, 20);
    ASSERT_EQ(20, (long)p->n);
    ASSERT_STREQ("c000", p->ids[0]);
    ASSERT_STREQ("c c019", p->next);
    ASSERT_EQ(calls + 1, server_calls(e.rc, "lrange"));
    /* the cursor's entry is the 201st: 3 chunks of 100 read, once */
    calls = server_calls(e.rc, "lrange");
    p = page_after(&e, RJQ_STATE_COMPLETED, "c c401", 20);
    ASSERT_EQ(20, (long)p->n);
    ASSERT_STREQ("c402", p->ids[0]);
    ASSERT_STREQ("c421", p->ids[19]);
    ASSERT_STREQ("c c421", p->next);
    ASSERT_EQ(calls + 3, server_calls(e.rc, "lrange"));
    /* swept: from the oldest kept, the index read to its end once */
    calls = server_calls(e.rc, "lrange");
    p = page_after(&e, RJQ_STATE_COMPLETED, "c swept", 20);
    ASSERT_EQ(20, (long)p->n);
    ASSERT_STREQ("c000", p->ids[0]);
    ASSERT_STREQ("c c019", p->next);
    ASSERT_EQ(calls + 3, server_calls(e.rc, "lrange"));
    /* the last page */
    p = page_after(&e, RJQ_STATE_COMPLETED, "c c489", 20);
    ASSERT_EQ(10, (long)p->n);
    ASSERT_STREQ("c490", p->ids[0]);
    ASSERT_STREQ("c499", p->ids[9]);
    ASSERT_EQ(0, p->has_next);
    env_stop(&e);
}
