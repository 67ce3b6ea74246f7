/*
 * free_port() (tests/server.c), the ports every integration test starts
 * its servers on: below the kernel's ephemeral range with their cluster
 * bus ports (a port there may be taken at any moment as an outgoing
 * connection's local port), never twice in a process, and never the same
 * as another test's running at the same time (nor its bus port).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "server.h"

#define PICKS 50

TEST(free_ports_and_their_bus_ports_are_below_the_ephemeral_range_and_never_repeat) {
    static unsigned char used[65536];
    int low = ephemeral_port_low();
    for (int i = 0; i < PICKS; i++) {
        int p = free_port();
        ASSERT(p >= 1024);
        if (p + 10000 >= low) fprintf(stderr, "port %d: its bus port is in the ephemeral range (from %d)\n", p, low);
        ASSERT(p + 10000 < low || low < 21000); /* (below 21000: no room, any port) */
        ASSERT(p + 10000 <= 65535);
        ASSERT_EQ(0, used[p]);
        ASSERT_EQ(0, used[p + 10000]);
        used[p] = used[p + 10000] = 1;
    }
}

/* Two processes picking at once (as two tests run by ctest -j): no port of
 * one is a port or a bus port of the other. */
TEST(tests_picking_ports_at_once_never_share_one) {
    int fds[2];
    ASSERT_EQ(0, pipe(fds));
    int go[2];
    ASSERT_EQ(0, pipe(go));
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) { /* the other test: picks once told, reports, holds them until its end */
        char c;
        close(fds[0]);
        close(go[1]);
        if (read(go[0], &c, 1) != 1) _exit(2);
        int mine[PICKS];
        for (int i = 0; i < PICKS; i++) mine[i] = free_port();
        if (write(fds[1], mine, sizeof mine) != (ssize_t)sizeof mine) _exit(2);
        if (read(go[0], &c, 1) < 0) _exit(2); /* (until the parent is done) */
        _exit(0);
    }
    close(fds[1]);
    close(go[0]);
    ASSERT_EQ(1, write(go[1], "x", 1));
    int mine[PICKS], theirs[PICKS];
    for (int i = 0; i < PICKS; i++) mine[i] = free_port();
    size_t got = 0;
    while (got < sizeof theirs) {
        ssize_t n = read(fds[0], (char *)theirs + got, sizeof theirs - got);
        ASSERT(n > 0);
        got += (size_t)n;
    }
    for (int i = 0; i < PICKS; i++)
        for (int j = 0; j < PICKS; j++) {
            int a = mine[i], b = theirs[j];
            if (a == b || a + 10000 == b || a == b + 10000)
                fprintf(stderr, "ports %d (here) and %d (the other test) collide\n", a, b);
            ASSERT(a != b && a + 10000 != b && a != b + 10000);
        }
    close(go[1]); /* the other test ends */
    int status;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(fds[0]);
}
