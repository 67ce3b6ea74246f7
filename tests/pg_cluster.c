/*
 * The PostgreSQL cluster the tests of test_pgbridge share (a ctest
 * fixture: tests/CMakeLists.txt): `pg_cluster up INFO` starts one and
 * writes where it is to INFO, `pg_cluster down INFO` stops it. Each test
 * makes a database of its own in it (pgserver.h).
 */
#include <stdio.h>
#include <string.h>

#include "pgserver.h"

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "up") == 0) {
        pg_cluster_up(argv[2]);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "down") == 0) {
        pg_cluster_down(argv[2]);
        return 0;
    }
    fprintf(stderr, "usage: pg_cluster up|down INFO\n");
    return 2;
}
