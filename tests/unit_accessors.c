/* The accessors of the arrays of public structs the library hands out
 * (rjq.h "Extensible structs"): rjq_<name>_get(list, i) is element i at
 * the library's own stride, NULL for a NULL list (the empty list of a
 * callback: n 0). Today that stride is this header's sizeof, so each must
 * be &list[i]; a program built against an older header (a smaller
 * struct) gets the same element where its list[i] would not
 * (tests/abi/older_header.sh reads groups so). No Redis. */
#include <string.h>

#include "harness.h"
#include "rjq.h"

/* Every accessor of type T: NULL for NULL, and &list[i] for each of 3
 * elements, whose fields read back as written. */
#define CHECK_ACCESSOR(T, get, fill)                          \
    do {                                                      \
        ASSERT(get(NULL, 0) == NULL);                         \
        ASSERT(get(NULL, 2) == NULL);                         \
        T list[3];                                            \
        memset(list, 0, sizeof list);                         \
        for (size_t i = 0; i < 3; i++) fill;                  \
        for (size_t i = 0; i < 3; i++) {                      \
            const T *e = get(list, i);                        \
            ASSERT(e == &list[i]);                            \
            ASSERT_EQ(0, memcmp(e, &list[i], sizeof *e));     \
        }                                                     \
    } while (0)

static const char *const names[] = {"a", "b", "c"};

TEST(group_info_get_is_element_i_and_null_for_no_list) {
    CHECK_ACCESSOR(rjq_group_info, rjq_group_info_get,
                   (list[i].name = names[i], list[i].depth = 10 + (long long)i,
                    list[i].started = 100 + (long long)i));
    rjq_group_info g[2] = {{.name = "x", .started = 7}, {.name = "y", .started = 8}};
    ASSERT_STREQ("y", rjq_group_info_get(g, 1)->name);
    ASSERT_EQ(8, (long)rjq_group_info_get(g, 1)->started);
}

TEST(search_match_get_is_element_i_and_null_for_no_list) {
    CHECK_ACCESSOR(rjq_search_match, rjq_search_match_get,
                   (list[i].id = names[i], list[i].state = "ready"));
}

TEST(master_get_is_element_i_and_null_for_no_list) {
    CHECK_ACCESSOR(rjq_master, rjq_master_get,
                   (list[i].address = names[i], list[i].status = -(int)i, list[i].len = i));
}

TEST(batch_info_get_is_element_i_and_null_for_no_list) {
    CHECK_ACCESSOR(rjq_batch_info, rjq_batch_info_get,
                   (list[i].id = names[i], list[i].total = (long long)i, list[i].has_on_success = 1));
}

TEST(dep_get_is_element_i_and_null_for_no_list) {
    CHECK_ACCESSOR(rjq_dep, rjq_dep_get, (list[i].queue = "q", list[i].id = names[i]));
}

TEST(attempt_get_is_element_i_and_null_for_no_list) {
    CHECK_ACCESSOR(rjq_attempt, rjq_attempt_get,
                   (list[i].started_ms = (long long)i, list[i].outcome = "lost"));
}

TEST(header_get_is_element_i_and_null_for_no_list) {
    CHECK_ACCESSOR(rjq_header, rjq_header_get, (list[i].key = names[i], list[i].value = "v"));
}

/* the accessors from before: the same contract */
TEST(older_accessors_are_element_i_and_null_for_no_list) {
    CHECK_ACCESSOR(rjq_enqueued, rjq_enqueued_get, (list[i].id = names[i], list[i].existed = 1));
    CHECK_ACCESSOR(rjq_dep_outcome, rjq_dep_outcome_get,
                   (list[i].id = names[i], list[i].result_len = i));
    CHECK_ACCESSOR(rjq_history_point, rjq_history_point_get,
                   (list[i].at_ms = (long long)i, list[i].run[3] = 1));
    CHECK_ACCESSOR(rjq_process, rjq_process_get, (list[i].id = names[i], list[i].pid = (long)i));
    CHECK_ACCESSOR(rjq_process_queue, rjq_process_queue_get,
                   (list[i].queue = names[i], list[i].njobs = i));
    CHECK_ACCESSOR(rjq_schedule_info, rjq_schedule_info_get,
                   (list[i].name = names[i], list[i].next_ms = (long long)i));
}

