/*
 * Test helpers: PostgreSQL servers for tests (initdb and pg_ctl from
 * Debian's postgresql package in a temp dir, on a free port of 127.0.0.1,
 * trust authentication), stopped by their pid; run as the "postgres" user
 * when the test runs as root (initdb refuses root).
 *
 * Under ctest, one cluster serves all the tests of a run (a ctest fixture
 * starts and stops it with tests/pg_cluster.c; RJQ_PG_CLUSTER names its
 * info file) and each test gets a database of its own in it: an initdb per
 * test cost seconds. A test that stops, crashes or restarts PostgreSQL
 * takes a private server (pg_start_private), as does every test run
 * without RJQ_PG_CLUSTER (with it, a copy of the cluster's template, not
 * an initdb of its own).
 */
#ifndef RJQ_TEST_PGSERVER_H
#define RJQ_TEST_PGSERVER_H

#include <sys/types.h>

#include <libpq-fe.h>

typedef struct pg_server {
    pid_t pid;        /* the postmaster */
    int port;
    char dir[128];
    char conninfo[256];
    PGconn *conn;     /* the test's own connection */
    int shared;       /* a database of the shared cluster (pid 0: not ours) */
    char db[64];      /* that database */
} pg_server;

/* A database of its own in the shared cluster when RJQ_PG_CLUSTER is set,
 * else pg_start_private; connected. Aborts the test if it cannot. */
void pg_start(pg_server *p);
/* Start a private server (killed if the test aborts) and connect. Aborts
 * the test if it cannot. */
void pg_start_private(pg_server *p);
/* (private servers only: they fail the test on a shared cluster's database)
 * A fast shutdown (SIGINT to the postmaster), waited for (the test's
 * connection goes too); pg_resume starts it again on the same port and
 * data and connects again. */
void pg_halt(pg_server *p);
void pg_resume(pg_server *p);
/* An immediate shutdown (SIGQUIT: no checkpoint, the next start recovers
 * from the WAL, as after a crash), waited for; pg_resume starts it again. */
void pg_crash(pg_server *p);
/* Stop it and remove its directory; on the shared cluster: drop the
 * test's database. */
void pg_stop(pg_server *p);

/* The shared cluster (tests/pg_cluster.c): start one and write its "port
 * dir pid template" to the file info (a cluster an earlier run left there
 * is stopped first); stop the one info names and remove it, its template
 * and info. The template is a data directory initdb made, never started:
 * the cluster and the private servers of the run start from copies. */
void pg_cluster_up(const char *info);
void pg_cluster_down(const char *info);

/* Run SQL (several statements allowed); aborts the test on an error. */
void pg_exec(pg_server *p, const char *sql);
/* The first column of the first row of a query, as a number. */
long long pg_int(pg_server *p, const char *sql);
/* The same, as text (static buffer, one at a time; "" for NULL). */
const char *pg_text(pg_server *p, const char *sql);

#endif
