/*
 * The step logic of rjq serve's payload searches (tools/serve/search_state.c):
 * the states asked for, each id kept once though HSCAN gives it twice, the
 * cap of matches, the progress and the end over a sharded queue's shards.
 */
#include <string.h>

#include "harness.h"
#include "search_state.h"

#define M(id, state) ((rjq_search_match){id, state})

TEST(states_parse_names_commas_and_refuses_unknown_or_empty_parts) {
    unsigned m;
    ASSERT_EQ(0, search_states_parse(NULL, &m));
    ASSERT_EQ(SEARCH_STATES_ALL, m);
    ASSERT_EQ(0, search_states_parse("", &m));
    ASSERT_EQ(SEARCH_STATES_ALL, m);
    ASSERT_EQ(0, search_states_parse("ready,dead", &m));
    ASSERT_EQ((1u << RJQ_STATE_READY) | (1u << RJQ_STATE_DEAD), m);
    ASSERT_EQ(0, search_states_parse("completed", &m));
    ASSERT_EQ(1u << RJQ_STATE_COMPLETED, m);
    ASSERT_EQ(-1, search_states_parse("ready,", &m));
    ASSERT_EQ(-1, search_states_parse(",ready", &m));
    ASSERT_EQ(-1, search_states_parse("ready,,dead", &m));
    ASSERT_EQ(0, search_states_parse("waiting", &m)); /* (for dependencies) */
    ASSERT_EQ(1u << RJQ_STATE_WAITING, m);
    ASSERT_EQ(-1, search_states_parse("sleeping", &m));
    ASSERT_EQ(-1, search_states_parse("readyreadyreadyready", &m));
}

TEST(a_step_keeps_the_matches_of_the_states_asked_and_the_scan_ends_on_cursor_zero) {
    search_state st;
    unsigned m;
    ASSERT_EQ(0, search_states_parse("ready,dead", &m));
    ASSERT_EQ(0, search_state_init(&st, m, 100, 1));
    ASSERT_STREQ("0", st.cursor);
    rjq_search_match a[] = {M("a", "ready"), M("b", "completed"), M("c", "dead")};
    ASSERT_EQ(0, search_state_step(&st, "17", 200, 1000, a, 3));
    ASSERT_EQ(2, (long long)st.n);
    ASSERT_STREQ("a", st.m[0].id);
    ASSERT_EQ(RJQ_STATE_READY, st.m[0].state);
    ASSERT_STREQ("c", st.m[1].id);
    ASSERT_EQ(RJQ_STATE_DEAD, st.m[1].state);
    ASSERT_STREQ("17", st.cursor);
    ASSERT_EQ(0, st.done);
    ASSERT_EQ(200, st.scanned);
    ASSERT_EQ(1000, search_state_total(&st));
    ASSERT_EQ(0, search_state_step(&st, "0", 150, 1001, NULL, 0));
    ASSERT_EQ(1, st.done);
    ASSERT_EQ(0, st.truncated);
    ASSERT_EQ(350, st.scanned);
    ASSERT_EQ(1001, search_state_total(&st));
    ASSERT_EQ(2, st.steps);
    search_state_free(&st);
}

TEST(an_id_hscan_gives_twice_is_kept_once) {
    search_state st;
    ASSERT_EQ(0, search_state_init(&st, SEARCH_STATES_ALL, 100, 1));
    rjq_search_match a[] = {M("x", "ready"), M("y", "active")};
    rjq_search_match b[] = {M("y", "completed"), M("z", "ready"), M("x", "ready")};
    ASSERT_EQ(0, search_state_step(&st, "5", 2, 10, a, 2));
    ASSERT_EQ(0, search_state_step(&st, "0", 3, 10, b, 3));
    ASSERT_EQ(3, (long long)st.n);
    ASSERT_STREQ("x", st.m[0].id);
    ASSERT_STREQ("y", st.m[1].id);
    ASSERT_STREQ("z", st.m[2].id);
    search_state_free(&st);
}

TEST(the_scan_stops_past_max_matches_and_says_it_was_cut) {
    search_state st;
    ASSERT_EQ(0, search_state_init(&st, SEARCH_STATES_ALL, 3, 1));
    rjq_search_match a[] = {M("1", "ready"), M("2", "ready"), M("3", "ready")};
    ASSERT_EQ(0, search_state_step(&st, "9", 3, 100, a, 3));
    ASSERT_EQ(3, (long long)st.n);
    ASSERT_EQ(0, st.done); /* exactly max so far: maybe nothing more */
    rjq_search_match b[] = {M("3", "ready"), M("4", "ready"), M("5", "ready")};
    ASSERT_EQ(0, search_state_step(&st, "12", 3, 100, b, 3));
    ASSERT_EQ(3, (long long)st.n);
    ASSERT_EQ(1, st.truncated);
    ASSERT_EQ(1, st.done);
    search_state_free(&st);
}

TEST(a_sharded_queue_is_scanned_shard_after_shard_and_the_same_id_on_two_shards_is_two_jobs) {
    search_state st;
    ASSERT_EQ(0, search_state_init(&st, SEARCH_STATES_ALL, 100, 3));
    rjq_search_match a[] = {M("7", "ready")};
    ASSERT_EQ(0, search_state_step(&st, "4", 10, 40, a, 1));
    ASSERT_EQ(0, st.shard);
    ASSERT_EQ(40, search_state_total(&st)); /* shards not reached yet count nothing */
    ASSERT_EQ(0, search_state_step(&st, "0", 30, 40, NULL, 0));
    ASSERT_EQ(1, st.shard);
    ASSERT_STREQ("0", st.cursor); /* the next shard starts from the start */
    ASSERT_EQ(0, st.done);
    ASSERT_EQ(0, search_state_step(&st, "0", 20, 20, a, 1));
    ASSERT_EQ(2, st.shard);
    ASSERT_EQ(2, (long long)st.n);
    ASSERT_EQ(0, st.m[0].shard);
    ASSERT_EQ(1, st.m[1].shard);
    ASSERT_EQ(0, search_state_step(&st, "0", 5, 5, NULL, 0));
    ASSERT_EQ(1, st.done);
    ASSERT_EQ(65, search_state_total(&st));
    ASSERT_EQ(65, st.scanned);
    search_state_free(&st);
}

TEST(many_matches_grow_the_list_and_every_one_is_found_again) {
    search_state st;
    ASSERT_EQ(0, search_state_init(&st, SEARCH_STATES_ALL, 5000, 1));
    char ids[5000][8];
    rjq_search_match m[500];
    for (int step = 0; step < 10; step++) {
        for (int i = 0; i < 500; i++) {
            snprintf(ids[step * 500 + i], sizeof ids[0], "%d", step * 500 + i);
            m[i] = M(ids[step * 500 + i], "delayed");
        }
        ASSERT_EQ(0, search_state_step(&st, "1", 500, 5000, m, 500));
        ASSERT_EQ(0, search_state_step(&st, "1", 500, 5000, m, 500)); /* all again */
    }
    ASSERT_EQ(5000, (long long)st.n);
    ASSERT_EQ(0, st.truncated);
    for (int i = 0; i < 5000; i++) ASSERT_STREQ(ids[i], st.m[i].id);
    search_state_free(&st);
}
