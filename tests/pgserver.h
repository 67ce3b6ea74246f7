/*
 * Test helpers: a private PostgreSQL server per test (initdb and pg_ctl
 * from Debian's postgresql package in a temp dir, on a free port of
 * 127.0.0.1, trust authentication), stopped by its pid; run as the
 * "postgres" user when the test runs as root (initdb refuses root).
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
} pg_server;

/* Start it (killed if the test aborts) and connect. Aborts the test if it
 * cannot. */
void pg_start(pg_server *p);
/* A fast shutdown (SIGINT to the postmaster), waited for (the test's
 * connection goes too); pg_resume starts it again on the same port and
 * data and connects again. */
void pg_halt(pg_server *p);
void pg_resume(pg_server *p);
/* An immediate shutdown (SIGQUIT: no checkpoint, the next start recovers
 * from the WAL, as after a crash), waited for; pg_resume starts it again. */
void pg_crash(pg_server *p);
/* Stop it and remove its directory. */
void pg_stop(pg_server *p);

/* Run SQL (several statements allowed); aborts the test on an error. */
void pg_exec(pg_server *p, const char *sql);
/* The first column of the first row of a query, as a number. */
long long pg_int(pg_server *p, const char *sql);
/* The same, as text (static buffer, one at a time; "" for NULL). */
const char *pg_text(pg_server *p, const char *sql);

#endif
