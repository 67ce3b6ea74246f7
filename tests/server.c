#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/common_interface_defs.h>
#endif

#include <rjq/libevent.h>

#include "harness.h"
#include "shard.h" /* rjq__queue_learning */

/* Bind a loopback socket to port (0: any free one) and return the port
 * bound, or 0 when it is taken. */
static int bind_port(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((unsigned short)port);
    ASSERT(fd >= 0);
    int got = 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        got = ntohs(a.sin_port);
    close(fd);
    return got;
}

/* Test ports are picked below the kernel's ephemeral range, their cluster
 * bus ports (port + 10000) too, as scripts/redis-private.sh's
 * redis_free_port picks them: a port in that range may be taken at any
 * moment as the local port of an outgoing connection (a loaded test run
 * makes thousands), which no check for a listener can see. */
#define PORT_BASE 10000
#define BUS_OFFSET 10000
#define PORTS_LOCK "/tmp/rjq-test-ports.lock"

int ephemeral_port_low(void) {
    int low = 32768;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d", &low) != 1) low = 32768;
        fclose(f);
    }
    return low;
}

/* Ports are reserved among the tests running at once by a write lock
 * (fcntl, F_SETLK) on byte `port` of one shared file: held until this
 * process exits (however it ends, the kernel lets go of it), so two tests
 * never pick the same port, nor one's port the other's bus port. Locks do
 * not conflict within a process: handed[] remembers its own picks. -1: no
 * lock file (then the bind checks only). */
static int ports_fd = -2;
static unsigned char handed[65536 / 8];

static int is_handed(int port) { return handed[port / 8] & (1u << (port % 8)); }
static void set_handed(int port) { handed[port / 8] |= (unsigned char)(1u << (port % 8)); }

static int lock_port(int port, int type) {
    if (ports_fd < 0) return 1;
    struct flock l;
    memset(&l, 0, sizeof l);
    l.l_type = (short)type;
    l.l_whence = SEEK_SET;
    l.l_start = port;
    l.l_len = 1;
    return fcntl(ports_fd, F_SETLK, &l) == 0;
}

/* Where this process's next pick starts: random at first (pid and clock),
 * one further at each call (its own picks are skipped: handed[]). */
static unsigned pick_from(void) {
    static int seeded;
    static unsigned from;
    if (!seeded) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        unsigned long long x = ((unsigned long long)getpid() << 32) ^
                               (unsigned long long)ts.tv_nsec ^
                               (unsigned long long)ts.tv_sec * 0x9E3779B97F4A7C15ull;
        x ^= x >> 29, x *= 0xBF58476D1CE4E5B9ull, x ^= x >> 32;
        from = (unsigned)x;
        seeded = 1;
    }
    return from++;
}

/* A port of 127.0.0.1 and its cluster bus port (+ 10000), both below the
 * ephemeral range, reserved (see above) and free now (bound and let go):
 * any server may be a cluster node, whose start fails ("Address already
 * in use") on a taken bus port. */
int free_port(void) {
    if (ports_fd == -2) {
        ports_fd = open(PORTS_LOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (ports_fd >= 0) (void)fchmod(ports_fd, 0666); /* (whoever runs tests next) */
    }
    int base = PORT_BASE, span = ephemeral_port_low() - BUS_OFFSET - PORT_BASE;
    /* (an ephemeral range this low leaves no room: any port whose bus port fits) */
    if (span < 1000) base = 1024, span = 65536 - BUS_OFFSET - 1024;
    unsigned start = pick_from();
    for (int i = 0; i < span; i++) {
        int port = base + (int)((start + (unsigned)i) % (unsigned)span), bus = port + BUS_OFFSET;
        if (is_handed(port) || is_handed(bus)) continue;
        if (!lock_port(port, F_WRLCK)) continue;
        if (!lock_port(bus, F_WRLCK)) {
            lock_port(port, F_UNLCK);
            continue;
        }
        set_handed(port), set_handed(bus); /* (kept either way: this process tried it) */
        if (bind_port(port) == port && bind_port(bus) == bus) return port;
    }
    FAIL_AT(__FILE__, __LINE__, "no free port from %d (with its bus port)", base);
    return 0;
}

void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

double mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static int tcp_listening(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

long file_size(const char *path) {
    FILE *f = fopen(path, "r");
    if (f == NULL) return 0;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : 0;
    fclose(f);
    return n < 0 ? 0 : n;
}

void temp_file(char *path, const char *text) {
    int fd = mkstemp(path);
    ASSERT(fd >= 0);
    ASSERT_EQ((ssize_t)strlen(text), write(fd, text, strlen(text)));
    close(fd);
}

/* Does the file, past offset from, contain needle? */
static int file_has(const char *path, long from, const char *needle) {
    char line[1024];
    FILE *f = fopen(path, "r");
    if (f == NULL) return 0;
    int found = 0;
    if (fseek(f, from, SEEK_SET) == 0)
        while (!found && fgets(line, sizeof line, f)) found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

int redis_listening(pid_t *pid, const char *log, long from, const char *ready) {
    int status;
    if (waitpid(*pid, &status, WNOHANG) == *pid) {
        *pid = 0;
        if (file_has(log, from, "Address already in use")) return 0;
        FAIL_AT(__FILE__, __LINE__, "redis-server exited (see %s)", log);
    }
    return file_has(log, from, ready) ? 1 : -1;
}

/* Start redis-server on s->port and wait until it answers. Returns 0 when
 * it could not listen there (it exited: another process took the port
 * since free_port() found it free). A server answering on the port is
 * taken for ours only once our server's log says it listens
 * (redis_listening): two tests started at once may be given one port. */
typedef struct launched {
    char log[300];
    long from; /* the log's size before this start */
} launched;

/* Start redis-server on s->port (not waiting for it). */
static void launch(test_server *s, const char *const *extra, launched *l) {
    char port[16];
    const char *argv[64];
    int n = 0;
    snprintf(port, sizeof port, "%d", s->port);
    argv[n++] = "redis-server";
    argv[n++] = s->tls ? "--tls-port" : "--port";
    argv[n++] = port;
    if (s->tls) {
        argv[n++] = "--port";
        argv[n++] = "0";
    }
    argv[n++] = "--bind";
    argv[n++] = s->bind[0] ? s->bind : "127.0.0.1";
    argv[n++] = "--dir";
    argv[n++] = s->dir;
    argv[n++] = "--save";
    argv[n++] = "";
    argv[n++] = "--appendonly";
    argv[n++] = "no";
    argv[n++] = "--daemonize";
    argv[n++] = "no";
    argv[n++] = "--logfile";
    argv[n++] = "redis.log";
    for (int i = 0; extra && extra[i] && n < 62; i++) argv[n++] = extra[i];
    argv[n] = NULL;
    snprintf(l->log, sizeof l->log, "%s/redis.log", s->dir);
    l->from = file_size(l->log);
    s->pid = fork();
    ASSERT(s->pid >= 0);
    if (s->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a crashed test */
        execvp("redis-server", (char *const *)argv);
        _exit(127);
    }
}

/* Wait until the server launch() started answers (1), or exited because
 * its port was taken (0). */
static int answering(test_server *s, const launched *l) {
    for (int i = 0; i < 1000; i++) {
        /* (checked on every pass: our server may fail after that line) */
        int listening = redis_listening(&s->pid, l->log, l->from, "Server initialized");
        if (listening == 0) return 0;
        /* TLS: listening is enough */
        if (listening == 1 && s->tls && tcp_listening(s->port)) return 1;
        if (listening == 1 && !s->tls) {
            redisContext *rc = redisConnect(s->bind[0] ? s->bind : "127.0.0.1", s->port);
            redisReply *r = rc && !rc->err ? redisCommand(rc, "PING") : NULL;
            if (r) freeReplyObject(r);
            if (rc) redisFree(rc);
            if (r) return 1;
        }
        sleep_ms(10);
    }
    FAIL_AT(__FILE__, __LINE__, "redis-server did not answer on port %d", s->port);
    return 0;
}

static int spawn(test_server *s, const char *const *extra) {
    launched l;
    launch(s, extra, &l);
    return answering(s, &l);
}

/* Start on a free port, another one when that one was taken meanwhile
 * (by a program that is not a test: free_port() keeps the tests apart).
 * A cluster node also needs its bus port (port + 10000) free: free_port()
 * checks both. */
#define SPAWN_TRIES 20
static void spawn_on_free_port(test_server *s, const char *const *extra) {
    for (int attempt = 0; attempt < SPAWN_TRIES; attempt++) {
        s->port = free_port();
        if (spawn(s, extra)) return;
    }
    FAIL_AT(__FILE__, __LINE__, "redis-server found no free port in %d tries", SPAWN_TRIES);
}

void server_start(test_server *s, const char *const *extra) {
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "/tmp/rjq-test-XXXXXX");
    ASSERT(mkdtemp(s->dir) != NULL);
    spawn_on_free_port(s, extra);
    snprintf(s->url, sizeof s->url, "redis://127.0.0.1:%d", s->port);
}

void server_start_many_guarded(test_server *s, int n, const char *const *const *extra) {
    launched l[16];
    ASSERT(n > 0 && n <= 16);
    for (int i = 0; i < n; i++) {
        memset(&s[i], 0, sizeof s[i]);
        snprintf(s[i].dir, sizeof s[i].dir, "/tmp/rjq-test-XXXXXX");
        ASSERT(mkdtemp(s[i].dir) != NULL);
        s[i].port = free_port();
        launch(&s[i], extra[i], &l[i]);
        kill_on_abort(s[i].pid);
    }
    for (int i = 0; i < n; i++) {
        pid_t pid = s[i].pid;
        if (!answering(&s[i], &l[i])) { /* its port was taken meanwhile: another one */
            forget_on_abort(pid);
            spawn_on_free_port(&s[i], extra[i]);
            kill_on_abort(s[i].pid);
        }
        snprintf(s[i].url, sizeof s[i].url, "redis://127.0.0.1:%d", s[i].port);
    }
}

void server_start_at(test_server *s, const char *bind, int port) {
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "/tmp/rjq-test-XXXXXX");
    ASSERT(mkdtemp(s->dir) != NULL);
    snprintf(s->bind, sizeof s->bind, "%s", bind);
    if (port) {
        s->port = port;
        if (!spawn(s, NULL)) FAIL_AT(__FILE__, __LINE__, "port %d is taken", port);
    } else {
        spawn_on_free_port(s, NULL);
    }
    snprintf(s->url, sizeof s->url, "redis://%s:%d", bind, s->port);
    kill_on_abort(s->pid);
}

const char *server_file(const test_server *s, const char *name) {
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", s->dir, name);
    return path;
}

void server_start_tls(test_server *s, int client_certs) {
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "/tmp/rjq-test-XXXXXX");
    ASSERT(mkdtemp(s->dir) != NULL);
    s->tls = 1;
    char cmd[512], cert[200], key[200], ca[200];
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s/certs' && bash '%s/tests/certs/make_certs.sh' '%s/certs'", s->dir,
             RJQ_SOURCE_DIR, s->dir);
    if (system(cmd) != 0) FAIL_AT(__FILE__, __LINE__, "could not make certificates: %s", cmd);
    snprintf(cert, sizeof cert, "%s/certs/server.crt", s->dir);
    snprintf(key, sizeof key, "%s/certs/server.key", s->dir);
    snprintf(ca, sizeof ca, "%s/certs/ca.crt", s->dir);
    const char *extra[] = {"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", ca,
                           "--tls-auth-clients", client_certs ? "yes" : "no", NULL};
    spawn_on_free_port(s, extra);
    snprintf(s->url, sizeof s->url, "rediss://127.0.0.1:%d", s->port);
    kill_on_abort(s->pid);
}

static void stop_pid(test_server *s) {
    if (s->pid <= 0) return;
    kill(s->pid, SIGTERM);
    for (int i = 0; i < 500; i++) {
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
            s->pid = 0;
            return;
        }
        sleep_ms(10);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}

void server_stop(test_server *s) {
    char cmd[256];
    stop_pid(s);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", s->dir);
}

void server_restart(test_server *s, const char *const *extra) {
    stop_pid(s);
    /* (its clients know it by its port: no other one will do) */
    if (!spawn(s, extra)) FAIL_AT(__FILE__, __LINE__, "port %d was taken meanwhile", s->port);
}

/* ---- process hygiene ------------------------------------------------------ */

#define GUARDED_MAX 16
static pid_t guarded[GUARDED_MAX];

static void kill_guarded(void) {
    for (int i = 0; i < GUARDED_MAX; i++)
        if (guarded[i] > 0) kill(guarded[i], SIGKILL);
}

static void kill_guarded_and_die(int sig) {
    kill_guarded();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_guard(void) {
    static int installed;
    static const int crash[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
    if (installed) return;
    installed = 1;
    signal(SIGABRT, kill_guarded_and_die);
    for (size_t i = 0; i < sizeof crash / sizeof crash[0]; i++) {
        struct sigaction old;
        if (sigaction(crash[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL &&
            !(old.sa_flags & SA_SIGINFO))
            signal(crash[i], kill_guarded_and_die);
    }
#ifdef __SANITIZE_ADDRESS__ /* a sanitizer's report ends the process without a signal */
    __sanitizer_set_death_callback(kill_guarded);
#endif
}

void kill_on_abort(pid_t pid) {
    install_guard();
    for (int i = 0; i < GUARDED_MAX; i++)
        if (guarded[i] <= 0) {
            guarded[i] = pid;
            return;
        }
    FAIL_AT(__FILE__, __LINE__, "more than %d processes to kill on abort", GUARDED_MAX);
}

void forget_on_abort(pid_t pid) {
    for (int i = 0; i < GUARDED_MAX; i++)
        if (guarded[i] == pid) guarded[i] = 0;
}

void forget_all_on_abort(void) {
    memset(guarded, 0, sizeof guarded);
}

void server_start_guarded(test_server *s, const char *const *extra) {
    server_start(s, extra);
    kill_on_abort(s->pid);
}

void server_stop_guarded(test_server *s) {
    forget_on_abort(s->pid);
    server_stop(s);
}

/* ---- synchronous commands ------------------------------------------------- */

redisContext *server_connect(const test_server *s) {
    redisContext *rc = redisConnect(s->bind[0] ? s->bind : "127.0.0.1", s->port);
    ASSERT(rc != NULL && rc->err == 0);
    return rc;
}

redisReply *server_cmd(redisContext *rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(rc, fmt, ap);
    va_end(ap);
    ASSERT(r != NULL);
    return r;
}

static long long server_vint(redisContext *rc, const char *fmt, va_list ap) {
    redisReply *r = redisvCommand(rc, fmt, ap);
    ASSERT(r != NULL);
    /* a cluster node that does not serve the key: the test asked the wrong
     * node, and 0 would make its check one that cannot fail */
    if (r->type == REDIS_REPLY_ERROR && (strncmp(r->str, "MOVED ", 6) == 0 || strncmp(r->str, "ASK ", 4) == 0))
        FAIL_AT(__FILE__, __LINE__, "%s: %s (asked a node that does not serve its key)", fmt, r->str);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer
                  : r->type == REDIS_REPLY_STRING ? atoll(r->str)
                                                  : 0;
    freeReplyObject(r);
    return v;
}

long long server_int(redisContext *rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    long long v = server_vint(rc, fmt, ap);
    va_end(ap);
    return v;
}

long long server_now_ms(redisContext *rc) {
    redisReply *r = server_cmd(rc, "TIME");
    ASSERT(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    long long ms = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
    freeReplyObject(r);
    return ms;
}

long long server_info_number(redisContext *rc, const char *section, const char *needle) {
    redisReply *r = server_cmd(rc, "INFO %s", section);
    long long v = 0;
    const char *p = r->type == REDIS_REPLY_STRING ? strstr(r->str, needle) : NULL;
    if (p) v = atoll(p + strlen(needle));
    freeReplyObject(r);
    return v;
}

long long server_calls(redisContext *rc, const char *command) {
    char needle[64];
    snprintf(needle, sizeof needle, "cmdstat_%s:calls=", command);
    return server_info_number(rc, "commandstats", needle);
}

long long server_commands_run(redisContext *rc) {
    redisReply *r = server_cmd(rc, "INFO commandstats");
    ASSERT(r->type == REDIS_REPLY_STRING);
    long long total = 0;
    for (const char *p = r->str; (p = strstr(p, "cmdstat_")) != NULL; p++) {
        if (strncmp(p, "cmdstat_info:", 13) == 0) continue;
        const char *c = strstr(p, "calls=");
        ASSERT(c != NULL);
        total += atoll(c + 6);
    }
    freeReplyObject(r);
    return total;
}

void server_copy_schedule(redisContext *rc, const char *q, const char *from, const char *name) {
    redisReply *spec = server_cmd(rc, "HGET t:{%s}:schedules %s", q, from);
    ASSERT_EQ(REDIS_REPLY_STRING, spec->type);
    freeReplyObject(server_cmd(rc, "HSET t:{%s}:schedules %s %s", q, name, spec->str));
    freeReplyObject(server_cmd(rc, "HSET t:{%s}:schedpayload %s copied", q, name));
    freeReplyObject(server_cmd(rc, "ZADD t:{%s}:schednext 0 %s", q, name));
    freeReplyObject(spec);
}

long long server_numsub(redisContext *rc, const char *channel) {
    redisReply *r = server_cmd(rc, "PUBSUB NUMSUB %s", channel);
    long long n = -1;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_INTEGER)
        n = r->element[1]->integer;
    freeReplyObject(r);
    return n;
}

long long client_id_named(redisContext *rc, const char *name) {
    redisReply *r = server_cmd(rc, "CLIENT LIST");
    ASSERT(r->type == REDIS_REPLY_STRING);
    char needle[160];
    snprintf(needle, sizeof needle, " name=%s ", name);
    long long id = -1;
    for (char *line = r->str; line && *line;) {
        char *end = strchr(line, '\n');
        if (end) *end = '\0';
        if (strstr(line, needle) && strncmp(line, "id=", 3) == 0) id = atoll(line + 3);
        line = end ? end + 1 : NULL;
    }
    freeReplyObject(r);
    return id;
}

/* ---- the loop and rjq clients --------------------------------------------- */

static void on_deadline(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    *(int *)arg = 1;
}

static int loop_while(struct event_base *base, const int *flag, const long *counter, long target,
                      long timeout_ms) {
    int expired = 0;
    struct event *deadline = evtimer_new(base, on_deadline, &expired);
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    evtimer_add(deadline, &tv);
    for (;;) {
        if (flag && *flag) break;
        if (counter && *counter >= target) break;
        if (expired) break;
        event_base_loop(base, EVLOOP_ONCE);
    }
    event_free(deadline);
    return flag ? *flag : (counter ? *counter >= target : 0);
}

int loop_until(struct event_base *base, const int *flag, long timeout_ms) {
    return loop_while(base, flag, NULL, 0, timeout_ms);
}

int loop_until_count(struct event_base *base, const long *counter, long target, long timeout_ms) {
    return loop_while(base, NULL, counter, target, timeout_ms);
}

void loop_for(struct event_base *base, long ms) {
    int never = 0;
    loop_while(base, &never, NULL, 0, ms);
}

static void on_poll_tick(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what, (void)arg; /* wakes the loop so the condition is checked */
}

int loop_until_cond(struct event_base *base, int (*cond)(void *), void *arg, long timeout_ms) {
    int expired = 0;
    struct event *deadline = evtimer_new(base, on_deadline, &expired);
    struct event *tick = event_new(base, -1, EV_PERSIST, on_poll_tick, NULL);
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000}, tick_tv = {0, 5000};
    evtimer_add(deadline, &tv);
    evtimer_add(tick, &tick_tv);
    int holds;
    while (!(holds = cond(arg)) && !expired) event_base_loop(base, EVLOOP_ONCE);
    event_free(tick);
    event_free(deadline);
    return holds;
}

typedef struct server_int_poll {
    redisContext *rc;
    long long want;
    const char *fmt;
    va_list ap;
} server_int_poll;

static int server_int_is(void *arg) {
    server_int_poll *p = arg;
    va_list ap;
    va_copy(ap, p->ap);
    long long v = server_vint(p->rc, p->fmt, ap);
    va_end(ap);
    return v == p->want;
}

int loop_until_server_int(struct event_base *base, redisContext *rc, long long want,
                          long timeout_ms, const char *fmt, ...) {
    server_int_poll p;
    p.rc = rc, p.want = want, p.fmt = fmt;
    va_start(p.ap, fmt);
    int ok = loop_until_cond(base, server_int_is, &p, timeout_ms);
    va_end(p.ap);
    return ok;
}

typedef struct server_ms_poll {
    redisContext *rc;
    long long ms;
} server_ms_poll;

static int server_ms_past(void *arg) {
    server_ms_poll *p = arg;
    return server_now_ms(p->rc) > p->ms;
}

int loop_until_server_ms(struct event_base *base, redisContext *rc, long long ms, long timeout_ms) {
    server_ms_poll p = {rc, ms};
    return loop_until_cond(base, server_ms_past, &p, timeout_ms);
}

long long server_script_calls(redisContext *rc) {
    return server_calls(rc, "fcall") + server_calls(rc, "evalsha");
}

typedef struct count_poll {
    redisContext *rc;
    const char *channel;
    long long n;
} count_poll;

static int script_calls_reached(void *arg) {
    count_poll *p = arg;
    return server_script_calls(p->rc) >= p->n;
}

int loop_until_script_calls(struct event_base *base, redisContext *rc, long long n,
                            long timeout_ms) {
    count_poll p = {rc, NULL, n};
    return loop_until_cond(base, script_calls_reached, &p, timeout_ms);
}

static int numsub_reached(void *arg) {
    count_poll *p = arg;
    return server_numsub(p->rc, p->channel) == p->n;
}

int loop_until_numsub(struct event_base *base, redisContext *rc, const char *channel, long long n,
                      long timeout_ms) {
    count_poll p = {rc, channel, n};
    return loop_until_cond(base, numsub_reached, &p, timeout_ms);
}

int loop_until_empty(struct event_base *base, long timeout_ms) {
    int expired = 0;
    struct event *deadline = evtimer_new(base, on_deadline, &expired);
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    evtimer_add(deadline, &tv);
    /* (the deadline is one of the events counted) */
    while (!expired &&
           event_base_get_num_events(base, EVENT_BASE_COUNT_ADDED | EVENT_BASE_COUNT_ACTIVE) > 1)
        event_base_loop(base, EVLOOP_ONCE);
    event_free(deadline);
    return !expired;
}

void serve_until_killed(struct event_base *base, long guard_ms) {
    loop_for(base, guard_ms);
    _exit(3);
}

rjq_client_options client_options(const char *url) {
    rjq_client_options o = RJQ_CLIENT_OPTIONS_INIT;
    o.url = url;
    o.prefix = "t";
    o.reconnect_min_ms = 20;
    o.reconnect_max_ms = 200;
    /* (a client sweeps others after liveness + this + the backoff cap) */
    o.connect_timeout_ms = 2000;
    return o;
}

rjq_client *client_new(struct event_base *base, const rjq_client_options *o) {
    rjq_client *c = NULL;
    ASSERT_OK(rjq_libevent_client_new(&c, base, o));
    return c;
}

rjq_client *client_for(struct event_base *base, const test_server *s) {
    rjq_client_options o = client_options(s->url);
    return client_new(base, &o);
}

rjq_queue *queue_for(rjq_client *c, const char *name) {
    rjq_queue *q = NULL;
    ASSERT_OK(rjq_queue_open(c, name, NULL, &q));
    return q;
}

/* (loop_until_cond, not WAIT_FOR: rjq_testlib's programs without the
 * harness, pg_cluster, link these) */
static int is_connected(void *c) {
    return rjq_client_is_connected(c);
}

void wait_connected(struct event_base *base, rjq_client *c) {
    ASSERT(loop_until_cond(base, is_connected, c, 20000));
}

static int layout_known(void *q) {
    return !rjq__queue_learning(q);
}

void wait_layout_known(struct event_base *base, rjq_queue *q) {
    ASSERT(loop_until_cond(base, layout_known, q, 20000));
}

void wait_replica_synced(redisContext *rc) {
    double end = mono_ms() + 30000;
    for (;;) {
        redisReply *r = server_cmd(rc, "INFO replication");
        int up = strstr(r->str, "master_link_status:up") != NULL;
        freeReplyObject(r);
        if (up) return;
        ASSERT(mono_ms() < end);
        sleep_ms(10);
    }
}

long long server_active_jobs(redisContext *rc, const char *q) {
    return server_int(rc, "ZCOUNT t:{%s}:active -inf (+inf", q);
}

long long server_held_members(redisContext *rc, const char *q) {
    return server_int(rc, "ZLEXCOUNT t:{%s}:held - (~", q);
}

void server_assert_only_declaration(redisContext *rc, const char *q) {
    redisReply *r = redisCommand(rc, "KEYS t:{%s}:*", q);
    ASSERT(r && r->type == REDIS_REPLY_ARRAY);
    for (size_t i = 0; i < r->elements; i++) {
        /* (the declaration's keys: the declaration, the whole-queue
         * limits and their change counter, the re-split lease) */
        static const char *const sfx[] = {"shards", "shardlimits", "limitsepoch", "resplit"};
        int ok = 0;
        for (size_t k = 0; k < sizeof sfx / sizeof sfx[0]; k++) {
            char want[128];
            snprintf(want, sizeof want, "t:{%s}:%s", q, sfx[k]);
            ok |= strcmp(r->element[i]->str, want) == 0;
        }
        if (!ok) FAIL_AT(__FILE__, __LINE__, "unsharded key %s written", r->element[i]->str);
    }
    freeReplyObject(r);
}

pid_t fork_child(void) {
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        forget_all_on_abort(); /* the handlers now kill nothing and re-raise */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(99);
        return 0;
    }
    kill_on_abort(pid);
    return pid;
}

int reap(pid_t pid, long timeout_ms) {
    int status = 0;
    double end = mono_ms() + (double)timeout_ms;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        ASSERT(r == 0 || errno == EINTR);
        if (mono_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            forget_on_abort(pid);
            FAIL_AT(__FILE__, __LINE__, "child %d did not exit", (int)pid);
        }
        sleep_ms(5);
    }
    forget_on_abort(pid);
    return status;
}
