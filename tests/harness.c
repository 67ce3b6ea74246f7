#include "harness.h"
#include "rjq_keys.h" /* layout_script_keys: the generated key layout */

#include <signal.h>

test_case test_cases[TEST_MAX];
int test_count;

int main(int argc, char **argv) {
    int ran = 0;
    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < test_count; i++) {
        int wanted = argc < 2;
        for (int a = 1; a < argc; a++)
            if (strcmp(argv[a], test_cases[i].name) == 0) wanted = 1;
        if (!wanted) continue;
        fprintf(stderr, "-- %s\n", test_cases[i].name);
        test_cases[i].fn();
        ran++;
    }
    if (argc >= 2 && ran != argc - 1) {
        fprintf(stderr, "unknown test name among the arguments\n");
        return 2;
    }
    if (argc < 2 && ran == 0) return 2;
    fprintf(stderr, "%d passed\n", ran);
    return 0;
}

int layout_script_keys(layout_keys *lk, int script, const char *prefix, const char *queue,
                       const char **argv, int at) {
    ASSERT(script >= 0 && script < RJQ__SCRIPT_COUNT);
    const rjq__script_keys_def *d = &rjq__script_keys[script];
    ASSERT(!d->global && d->n <= 32);
    snprintf(lk->num, sizeof lk->num, "%d", d->n);
    argv[at++] = lk->num;
    for (int i = 0; i < d->n; i++) {
        snprintf(lk->names[i], sizeof lk->names[i], "%s:{%s}:%s", prefix, queue,
                 rjq__key_names[d->keys[i]]);
        argv[at++] = lk->names[i];
    }
    return at;
}
