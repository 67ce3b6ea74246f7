/* A private PostgreSQL server for tests: see pgserver.h. */
#include "pgserver.h"

#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "server.h"

/* Run a command (argv) as the postgres user when root; output to log. */
static int run_as_pg(char *const *argv, const char *log) {
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        if (log) {
            FILE *f = freopen(log, "a", stdout);
            if (f) dup2(fileno(f), 2);
        }
        if (geteuid() == 0) {
            struct passwd *pw = getpwnam("postgres");
            if (pw == NULL || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0) _exit(126);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *bindir(void) {
    static char dir[256];
    if (dir[0]) return dir;
    FILE *f = popen("pg_config --bindir 2>/dev/null", "r");
    if (f == NULL || fgets(dir, sizeof dir, f) == NULL) dir[0] = '\0';
    if (f) pclose(f);
    dir[strcspn(dir, "\n")] = '\0';
    char initdb[300];
    snprintf(initdb, sizeof initdb, "%s/initdb", dir);
    if (access(initdb, X_OK) != 0)
        FAIL_AT(__FILE__, __LINE__, "no initdb (pg_config --bindir says \"%s\"): install postgresql", dir);
    return dir;
}

static void pg_connect(pg_server *p) {
    if (p->conn) PQfinish(p->conn);
    p->conn = PQconnectdb(p->conninfo);
    if (PQstatus(p->conn) != CONNECTION_OK)
        FAIL_AT(__FILE__, __LINE__, "connecting to %s: %s", p->conninfo, PQerrorMessage(p->conn));
}

/* max_connections of the servers this process starts (the shared cluster
 * serves several tests at once) */
static int max_connections = 40;

/* Start the postmaster on p->port. Returns 0 when that port was taken
 * (by another test given the same free port at the same time: see
 * redis_listening), else starts it or fails the test. */
static int pg_launch(pg_server *p) {
    char pgctl[300], data[200], log[200], opts[400], pidfile[220];
    snprintf(pgctl, sizeof pgctl, "%s/pg_ctl", bindir());
    snprintf(data, sizeof data, "%s/data", p->dir);
    snprintf(log, sizeof log, "%s/server.log", p->dir);
    /* no durability needed here: fsync off keeps the tests fast */
    snprintf(opts, sizeof opts,
             "-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off "
             "-c max_connections=%d -c shared_buffers=32MB",
             p->port, p->dir, max_connections);
    char *argv[] = {pgctl, "-s", "-D", data, "-l", log, "-o", opts, "-w", "-t", "60", "start", NULL};
    long from = file_size(log);
    if (run_as_pg(argv, NULL) != 0) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "tail -c +%ld %s | grep -q 'Address already in use'", from + 1, log);
        if (system(cmd) == 0) return 0;
        snprintf(cmd, sizeof cmd, "cat %s >&2", log);
        if (system(cmd) != 0) {}
        FAIL_AT(__FILE__, __LINE__, "pg_ctl start failed");
    }
    snprintf(pidfile, sizeof pidfile, "%s/postmaster.pid", data);
    FILE *f = fopen(pidfile, "r");
    long pid = 0;
    if (f == NULL || fscanf(f, "%ld", &pid) != 1 || pid <= 0)
        FAIL_AT(__FILE__, __LINE__, "no postmaster.pid in %s", data);
    fclose(f);
    p->pid = (pid_t)pid;
    kill_on_abort(p->pid);
    pg_connect(p);
    return 1;
}

static void make_dir(pg_server *p) {
    memset(p, 0, sizeof *p);
    snprintf(p->dir, sizeof p->dir, "/tmp/rjq-pg-XXXXXX");
    if (mkdtemp(p->dir) == NULL) FAIL_AT(__FILE__, __LINE__, "mkdtemp: %s", strerror(errno));
    if (geteuid() == 0) {
        struct passwd *pw = getpwnam("postgres");
        if (pw == NULL) FAIL_AT(__FILE__, __LINE__, "no postgres user: install postgresql");
        if (chown(p->dir, pw->pw_uid, pw->pw_gid) != 0)
            FAIL_AT(__FILE__, __LINE__, "chown %s: %s", p->dir, strerror(errno));
    }
}

/* p->dir/data: a copy of from/data (an initdb'd directory never started:
 * the shared cluster's template; an initdb costs seconds), or initdb when
 * from is NULL or "" or the copy failed. */
static void init_data(pg_server *p, const char *from) {
    char cmd[400];
    if (from && from[0]) {
        snprintf(cmd, sizeof cmd, "cp -a %s/data %s/data", from, p->dir);
        if (system(cmd) == 0) return;
        snprintf(cmd, sizeof cmd, "rm -rf %s/data", p->dir);
        if (system(cmd) != 0) {}
    }
    char initdb[300], data[200], log[200];
    snprintf(initdb, sizeof initdb, "%s/initdb", bindir());
    snprintf(data, sizeof data, "%s/data", p->dir);
    snprintf(log, sizeof log, "%s/initdb.log", p->dir);
    char *argv[] = {initdb, "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8",
                    "--no-sync", "--locale=C", NULL};
    if (run_as_pg(argv, log) != 0) {
        snprintf(cmd, sizeof cmd, "cat %s >&2", log);
        if (system(cmd) != 0) {}
        FAIL_AT(__FILE__, __LINE__, "initdb failed");
    }
}

static void launch_on_free_port(pg_server *p) {
    for (int attempt = 0;; attempt++) {
        if (attempt == 5) FAIL_AT(__FILE__, __LINE__, "postgres found no free port in 5 tries");
        p->port = free_port();
        snprintf(p->conninfo, sizeof p->conninfo,
                 "host=127.0.0.1 port=%d user=postgres dbname=postgres connect_timeout=5", p->port);
        if (pg_launch(p)) break;
    }
}

static int read_info(const char *info, int *port, char *dir, size_t size, long *pid, char *tmpl,
                     size_t tsize);

/* The shared cluster's template (RJQ_PG_CLUSTER), "" without one. */
static const char *shared_template(void) {
    static char tmpl[128];
    const char *info = getenv("RJQ_PG_CLUSTER");
    char dir[128];
    int port;
    long pid;
    if (tmpl[0] == '\0' && info && info[0])
        if (!read_info(info, &port, dir, sizeof dir, &pid, tmpl, sizeof tmpl)) tmpl[0] = '\0';
    return tmpl;
}

void pg_start_private(pg_server *p) {
    make_dir(p);
    init_data(p, shared_template());
    launch_on_free_port(p);
}

/* A shutdown by sig (SIGINT: fast, SIGQUIT: immediate), waited for (the
 * postmaster is not our child). */
static void pg_shutdown_by(pg_server *p, int sig) {
    if (p->conn) PQfinish(p->conn);
    p->conn = NULL;
    if (p->pid <= 0) return;
    kill(p->pid, sig);
    for (int i = 0; i < 600 && kill(p->pid, 0) == 0; i++) usleep(50 * 1000);
    if (kill(p->pid, 0) == 0) kill(p->pid, SIGKILL);
    for (int i = 0; i < 100 && kill(p->pid, 0) == 0; i++) usleep(50 * 1000);
    forget_on_abort(p->pid);
    p->pid = 0;
}

static void pg_shutdown(pg_server *p) {
    pg_shutdown_by(p, SIGINT);
}

static void private_only(const pg_server *p, int line) {
    if (p->shared) FAIL_AT(__FILE__, line, "the shared cluster is not the test's to stop: pg_start_private");
}

void pg_halt(pg_server *p) {
    private_only(p, __LINE__);
    pg_shutdown(p);
}

void pg_crash(pg_server *p) {
    private_only(p, __LINE__);
    pg_shutdown_by(p, SIGQUIT);
}

void pg_resume(pg_server *p) {
    private_only(p, __LINE__);
    /* (its clients know it by its port: no other one will do) */
    if (!pg_launch(p)) FAIL_AT(__FILE__, __LINE__, "port %d was taken meanwhile", p->port);
}

static void drop_database(pg_server *p);

void pg_stop(pg_server *p) {
    if (p->shared) {
        drop_database(p);
        return;
    }
    pg_shutdown(p);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", p->dir);
    if (system(cmd) != 0) {}
}

static PGresult *query(pg_server *p, const char *sql, int line) {
    PGresult *r = PQexec(p->conn, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        FAIL_AT(__FILE__, line, "%s: %s", sql, PQresultErrorMessage(r));
    return r;
}

void pg_exec(pg_server *p, const char *sql) {
    PQclear(query(p, sql, __LINE__));
}

const char *pg_text(pg_server *p, const char *sql) {
    static char buf[4096];
    PGresult *r = query(p, sql, __LINE__);
    snprintf(buf, sizeof buf, "%s", PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "");
    PQclear(r);
    return buf;
}

long long pg_int(pg_server *p, const char *sql) {
    return atoll(pg_text(p, sql));
}

/* ---- the shared cluster ------------------------------------------------- */

/* The cluster info names ("port dir pid template"): 1 when read. */
static int read_info(const char *info, int *port, char *dir, size_t size, long *pid, char *tmpl,
                     size_t tsize) {
    FILE *f = fopen(info, "r");
    if (f == NULL) return 0;
    char fmt[48];
    snprintf(fmt, sizeof fmt, "%%d %%%zus %%ld %%%zus", size - 1, tsize - 1);
    int n = fscanf(f, fmt, port, dir, pid, tmpl);
    fclose(f);
    return n == 4;
}

/* Connect to the shared cluster's "postgres" database (as p->conn). */
static void cluster_connect(pg_server *p, const char *db) {
    snprintf(p->conninfo, sizeof p->conninfo,
             "host=127.0.0.1 port=%d user=postgres dbname=%s connect_timeout=5", p->port, db);
    pg_connect(p);
}

void pg_start(pg_server *p) {
    const char *info = getenv("RJQ_PG_CLUSTER");
    if (info == NULL || info[0] == '\0') {
        pg_start_private(p);
        return;
    }
    memset(p, 0, sizeof *p);
    long pid;
    char tmpl[128];
    if (!read_info(info, &p->port, p->dir, sizeof p->dir, &pid, tmpl, sizeof tmpl))
        FAIL_AT(__FILE__, __LINE__, "no shared cluster in %s (its ctest fixture, "
                "test_pgbridge.cluster_up, did not run)", info);
    p->shared = 1;
    /* one database per process: tests run one per process */
    snprintf(p->db, sizeof p->db, "rjq_test_%ld", (long)getpid());
    cluster_connect(p, "postgres");
    char sql[200];
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", p->db);
    pg_exec(p, sql);
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", p->db);
    pg_exec(p, sql);
    cluster_connect(p, p->db);
}

static void drop_database(pg_server *p) {
    cluster_connect(p, "postgres");
    char sql[200];
    snprintf(sql, sizeof sql, "DROP DATABASE %s WITH (FORCE)", p->db);
    pg_exec(p, sql);
    PQfinish(p->conn);
    p->conn = NULL;
}

void pg_cluster_up(const char *info) {
    pg_cluster_down(info); /* what an interrupted run left */
    pg_server t, p;
    make_dir(&t); /* the template the run's servers copy (never started) */
    init_data(&t, NULL);
    max_connections = 120;
    make_dir(&p);
    init_data(&p, t.dir);
    launch_on_free_port(&p);
    PQfinish(p.conn);
    forget_on_abort(p.pid); /* it outlives this process */
    FILE *f = fopen(info, "w");
    if (f == NULL || fprintf(f, "%d %s %ld %s\n", p.port, p.dir, (long)p.pid, t.dir) < 0 || fclose(f) != 0)
        FAIL_AT(__FILE__, __LINE__, "writing %s: %s", info, strerror(errno));
}

void pg_cluster_down(const char *info) {
    pg_server p;
    memset(&p, 0, sizeof p);
    long pid;
    char tmpl[128];
    if (!read_info(info, &p.port, p.dir, sizeof p.dir, &pid, tmpl, sizeof tmpl)) return;
    /* its postmaster, if that pid still is (not a process that reused it) */
    char pidfile[220];
    long listed = 0;
    snprintf(pidfile, sizeof pidfile, "%s/data/postmaster.pid", p.dir);
    FILE *f = fopen(pidfile, "r");
    if (f) {
        if (fscanf(f, "%ld", &listed) != 1) listed = 0;
        fclose(f);
    }
    if (pid > 0 && listed == pid && strncmp(p.dir, "/tmp/rjq-pg-", 12) == 0) p.pid = (pid_t)pid;
    if (strncmp(p.dir, "/tmp/rjq-pg-", 12) != 0) return;
    pg_crash(&p); /* (its data goes: no checkpoint needed) */
    pg_stop(&p);
    if (strncmp(tmpl, "/tmp/rjq-pg-", 12) == 0) {
        char cmd[200];
        snprintf(cmd, sizeof cmd, "rm -rf %s", tmpl);
        if (system(cmd) != 0) {}
    }
    unlink(info);
}
