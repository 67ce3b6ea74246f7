/*
 * The worker's wake-up state (w->wake, rjq__w_wake) and its group
 * scheduler's (g->sched, rjq__w_group_sched), src/worker_private.h: every
 * event from every state leads where the table there says, and an
 * illegal one aborts in the test builds. No Redis: the functions read only
 * the worker's mode and group.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "harness.h"
#include "worker_private.h"

#define X -1 /* illegal */

static const char *const wname[] = {"NONE", "OFFER", "CLAIM", "RUNG", "RUNG_CLAIM"};
static const char *const ename[] = {"RING", "FREED", "WANT", "SENT", "TICK", "OFFERED"};

/* Where each event leads from each state, for an idle worker outside a
 * group (rows: from; columns: RING FREED WANT SENT TICK OFFERED). */
static const int idle_table[5][6] = {
    /* NONE       */ {WK_RUNG, WK_OFFER, WK_CLAIM, WK_NONE, WK_NONE, X},
    /* OFFER      */ {WK_RUNG_CLAIM, WK_OFFER, WK_CLAIM, WK_OFFER, WK_NONE, WK_NONE},
    /* CLAIM      */ {WK_RUNG_CLAIM, WK_CLAIM, WK_CLAIM, WK_CLAIM, WK_NONE, X},
    /* RUNG       */ {WK_RUNG, WK_RUNG_CLAIM, WK_RUNG_CLAIM, WK_NONE, WK_RUNG, X},
    /* RUNG_CLAIM */ {WK_RUNG_CLAIM, WK_RUNG_CLAIM, WK_RUNG_CLAIM, WK_CLAIM, WK_RUNG, X},
};
/* what TICK returns from each state: 1, the tick claims */
static const int tick_claims[5] = {0, 1, 1, 0, 1};

static void check_table(rjq_worker *w, const int table[5][6], const char *what) {
    for (int from = WK_NONE; from <= WK_RUNG_CLAIM; from++)
        for (int ev = WE_RING; ev <= WE_OFFERED; ev++) {
            if (table[from][ev] == X) continue;
            w->wake = (wwake)from;
            int claims = rjq__w_wake(w, (wevent)ev);
            if ((int)w->wake != table[from][ev])
                FAIL_AT(__FILE__, __LINE__, "%s: %s on %s led to %s, not %s", what, ename[ev],
                        wname[from], wname[w->wake], wname[table[from][ev]]);
            int want = ev == WE_TICK ? tick_claims[from] : 0;
            if (claims != want)
                FAIL_AT(__FILE__, __LINE__, "%s: %s on %s returned %d, not %d", what, ename[ev],
                        wname[from], claims, want);
        }
}

TEST(wake_events_lead_where_the_table_says_for_an_idle_worker) {
    rjq_worker *w = calloc(1, sizeof *w);
    ASSERT(w != NULL);
    w->mode = CL_IDLE;
    check_table(w, idle_table, "idle");
    free(w);
}

TEST(a_slot_freed_while_hungry_or_in_a_group_is_claimed_never_offered) {
    int table[5][6];
    memcpy(table, idle_table, sizeof table);
    table[WK_NONE][WE_FREED] = WK_CLAIM;
    table[WK_OFFER][WE_FREED] = WK_CLAIM; /* (an offer owed before the loop went hungry) */
    rjq_worker *w = calloc(1, sizeof *w);
    ASSERT(w != NULL);
    w->mode = CL_HUNGRY;
    check_table(w, (const int(*)[6])table, "hungry");
    /* a group's member: its scheduler claims for it (no OFFER to start from) */
    group g = {0};
    w->mode = CL_IDLE;
    w->g = &g;
    for (int from = WK_NONE; from <= WK_RUNG_CLAIM; from++) {
        if (from == WK_OFFER) continue;
        w->wake = (wwake)from;
        rjq__w_wake(w, WE_FREED);
        ASSERT(w->wake == WK_CLAIM || w->wake == WK_RUNG_CLAIM);
    }
    free(w);
}

/* A sharded queue's worker (group.shards): an idle member's freed slot is
 * offered as a plain worker's is (the idle table), and a hungry one's
 * claimed; the slots freed since the offer became owed are counted (the
 * offer carries those only). */
TEST(a_slot_freed_by_a_shards_group_member_is_offered_as_a_plain_workers) {
    rjq_worker *w = calloc(1, sizeof *w);
    ASSERT(w != NULL);
    group g = {0};
    g.shards = 1;
    w->g = &g;
    w->mode = CL_IDLE;
    check_table(w, idle_table, "shards member");
    w->wake = WK_NONE;
    w->freed = 5;
    rjq__w_slot_freed(w);
    rjq__w_slot_freed(w);
    ASSERT(w->wake == WK_OFFER);
    ASSERT_EQ(2, w->freed);
    w->mode = CL_HUNGRY;
    w->wake = WK_NONE;
    rjq__w_slot_freed(w);
    ASSERT(w->wake == WK_CLAIM);
    free(w);
}

TEST(a_doorbell_stays_unanswered_until_a_claim_is_sent) {
    rjq_worker *w = calloc(1, sizeof *w);
    ASSERT(w != NULL);
    w->mode = CL_IDLE;
    rjq__w_wake(w, WE_FREED); /* idle: the slot is offered ... */
    ASSERT_EQ(WK_OFFER, w->wake);
    rjq__w_wake(w, WE_RING);  /* ... unless a doorbell rings first: then claimed */
    ASSERT_EQ(WK_RUNG_CLAIM, w->wake);
    ASSERT(rjq__w_rung(w));
    ASSERT_EQ(1, rjq__w_wake(w, WE_TICK)); /* the tick claims; nothing could be sent */
    ASSERT_EQ(WK_RUNG, w->wake);
    ASSERT_EQ(0, rjq__w_wake(w, WE_TICK)); /* nothing more owed to the tick */
    ASSERT(rjq__w_rung(w));
    rjq__w_wake(w, WE_SENT);               /* a claim went out: answered */
    ASSERT_EQ(WK_NONE, w->wake);
    ASSERT(!rjq__w_rung(w));
    free(w);
}

/* ev from state `from` in a child: 1 when it aborted. */
static int aborts(int from, int ev, int group_ev) {
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        int fd = open("/dev/null", 1);
        if (fd >= 0) dup2(fd, 2);
        rjq_worker w = {0};
        group g = {0};
        if (group_ev) {
            g.sched = (gsched)from;
            rjq__w_group_sched(&g, (gevent)ev);
        } else {
            w.wake = (wwake)from;
            rjq__w_wake(&w, (wevent)ev);
        }
        _exit(0);
    }
    int status;
    ASSERT(waitpid(pid, &status, 0) == pid);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

TEST(illegal_events_abort_in_the_test_builds) {
    ASSERT(rjq__asserts_enabled());
    for (int from = WK_NONE; from <= WK_RUNG_CLAIM; from++)
        if (from != WK_OFFER && !aborts(from, WE_OFFERED, 0))
            FAIL_AT(__FILE__, __LINE__, "OFFERED on %s did not abort", wname[from]);
    ASSERT(!aborts(WK_OFFER, WE_OFFERED, 0));
    ASSERT(aborts(GS_RUNNING, GE_TICK, 1));
    ASSERT(aborts(GS_RUNNING_KICKED, GE_TICK, 1));
    ASSERT(aborts(GS_REST, GE_LEAVE, 1));
    ASSERT(aborts(GS_KICKED, GE_LEAVE, 1));
}

TEST(group_scheduler_is_not_reentered_and_keeps_a_kick_for_the_tick) {
    group g = {0};
    ASSERT_EQ(0, rjq__w_group_sched(&g, GE_TICK)); /* nothing owed */
    ASSERT_EQ(GS_REST, g.sched);
    ASSERT_EQ(1, rjq__w_group_sched(&g, GE_ENTER));
    ASSERT_EQ(GS_RUNNING, g.sched);
    ASSERT_EQ(0, rjq__w_group_sched(&g, GE_ENTER)); /* refused: it runs */
    rjq__w_group_sched(&g, GE_KICK);                 /* a reply while it runs */
    ASSERT_EQ(GS_RUNNING_KICKED, g.sched);
    rjq__w_group_sched(&g, GE_LEAVE);
    ASSERT_EQ(GS_KICKED, g.sched);                   /* still owed to the tick */
    ASSERT_EQ(1, rjq__w_group_sched(&g, GE_ENTER));  /* a direct run meanwhile ... */
    ASSERT_EQ(GS_RUNNING_KICKED, g.sched);
    rjq__w_group_sched(&g, GE_LEAVE);
    ASSERT_EQ(1, rjq__w_group_sched(&g, GE_TICK));   /* ... leaves the tick's run owed */
    ASSERT_EQ(GS_REST, g.sched);
    ASSERT_EQ(0, rjq__w_group_sched(&g, GE_TICK));
}
