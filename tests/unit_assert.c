/* RJQ_ASSERT (src/check.h): checked in the test builds, and a failed one
 * says where and what before it aborts. No Redis. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "harness.h"

/* The test builds (make build, make build-asan: -DRJQ_ASSERTS=ON) check
 * the library's invariants, although RelWithDebInfo sets -DNDEBUG. */
TEST(asserts_are_checked_in_the_test_builds) {
    if (!rjq__asserts_enabled())
        FAIL_AT(__FILE__, __LINE__, "this build does not check RJQ_ASSERT: configure it with "
                                    "-DRJQ_ASSERTS=ON, as the Makefile's builds do");
}

/* A false RJQ_ASSERT in a child, whose stderr comes back through a pipe. */
static void run_false_assert(int fd) {
    dup2(fd, 2);
    volatile int x = 1;
    RJQ_ASSERT(x == 2);
    _exit(0); /* not reached when asserts are checked */
}

TEST(a_false_assert_prints_file_line_and_expression_then_aborts) {
    int p[2];
    ASSERT(pipe(p) == 0);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        run_false_assert(p[1]);
    }
    close(p[1]);
    char out[512];
    size_t n = 0;
    ssize_t got;
    while (n < sizeof out - 1 && (got = read(p[0], out + n, sizeof out - 1 - n)) > 0) n += (size_t)got;
    out[n] = '\0';
    close(p[0]);
    int status;
    ASSERT(waitpid(pid, &status, 0) == pid);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT)
        FAIL_AT(__FILE__, __LINE__, "the child was not aborted (status %d); it said: %s", status, out);
    /* "rjq: <path>/unit_assert.c:<line>: run_false_assert: assertion `x == 2' failed" */
    const char *at = strstr(out, "unit_assert.c:");
    int line = 0, used = 0;
    if (at == NULL || sscanf(at, "unit_assert.c:%d: %n", &line, &used) != 1 || line <= 0 ||
        strncmp(at + used, "run_false_assert: assertion `x == 2' failed\n", 44) != 0 ||
        strncmp(out, "rjq: ", 5) != 0)
        FAIL_AT(__FILE__, __LINE__, "expected \"rjq: .../unit_assert.c:LINE: run_false_assert: "
                                    "assertion `x == 2' failed\", got: %s", out);
}
