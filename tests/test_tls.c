/*
 * TLS: rediss:// against a private TLS-only redis-server (port 0) with
 * certificates the test makes with the openssl CLI. Work and awaits over
 * TLS, mutual TLS, and the failures a user meets first (wrong CA, wrong
 * server name, missing client certificate, unusable files), each with a
 * message naming the cause and never the password. Built without TLS,
 * rediss:// is refused with a message that says how to get it.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <rjq/libevent.h>

#include "harness.h"
#include "server.h"

#define PASSWORD "s3cret-never-shown"

/* Every event detail a client reported, one after the other. */
static char events[8192];
static int errors_seen;

static void on_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    (void)c, (void)conn, (void)data;
    size_t n = strlen(events);
    snprintf(events + n, sizeof events - n, "[%d] %s\n", (int)ev, detail ? detail : "");
    if (ev == RJQ_EVENT_ERROR || ev == RJQ_EVENT_DISCONNECTED) errors_seen++;
}

static rjq_client_options tls_client_options(const char *url, const rjq_tls_options *tls) {
    rjq_client_options o = client_options(url);
    o.tls = tls;
    o.on_event = on_event;
    o.reconnect_min_ms = 200;
    o.reconnect_max_ms = 400;
    events[0] = '\0';
    errors_seen = 0;
    return o;
}

/* Built without TLS, rediss:// (and enable = 1) fail rjq_client_new with a
 * message that says how to get TLS, not the password. */
static void expect_no_tls(void) {
    struct event_base *base = event_base_new();
    rjq_client_options o = tls_client_options("rediss://:" PASSWORD "@127.0.0.1:6380", NULL);
    rjq_client *c = (rjq_client *)base;
    ASSERT_EQ(RJQ_ETLS, rjq_libevent_client_new(&c, base, &o));
    ASSERT(c == NULL);
    const char *why = rjq_client_get_errmsg(NULL);
    ASSERT(strstr(why, "built without TLS") != NULL);
    ASSERT(strstr(why, "hiredis_ssl") != NULL);
    ASSERT(strstr(why, PASSWORD) == NULL);
    rjq_tls_options t = RJQ_TLS_OPTIONS_INIT;
    t.enable = 1;
    o = tls_client_options("redis://127.0.0.1:6380", &t);
    ASSERT_EQ(RJQ_ETLS, rjq_libevent_client_new(&c, base, &o));
    event_base_free(base);
}

/* The TLS tests, in a build without TLS: that refusal instead. */
#define TLS_ONLY()                \
    do {                          \
        if (!rjq_tls_is_available()) { \
            expect_no_tls();      \
            return;               \
        }                         \
    } while (0)

#ifndef RJQ_TEST_TLS
#define RJQ_TEST_TLS 0
#endif

TEST(tls_availability_matches_the_build) {
    ASSERT_EQ(RJQ_TEST_TLS, rjq_tls_is_available());
    if (!RJQ_TEST_TLS) expect_no_tls();
}

typedef struct certs {
    char ca[256], otherca[256], cert[256], key[256];
} certs;

static certs paths(const test_server *s) {
    certs p;
    snprintf(p.ca, sizeof p.ca, "%s", server_file(s, "certs/ca.crt"));
    snprintf(p.otherca, sizeof p.otherca, "%s", server_file(s, "certs/otherca.crt"));
    snprintf(p.cert, sizeof p.cert, "%s", server_file(s, "certs/client.crt"));
    snprintf(p.key, sizeof p.key, "%s", server_file(s, "certs/client.key"));
    return p;
}

/* A TLS-only server, its certificates' paths in *p, and options that
 * trust its CA. */
static rjq_tls_options start_with_ca(test_server *s, int client_certs, certs *p) {
    server_start_tls(s, client_certs);
    *p = paths(s);
    rjq_tls_options t = RJQ_TLS_OPTIONS_INIT;
    t.ca_file = p->ca;
    return t;
}

static long done_jobs, outcomes;

static void handler(rjq_job *job, void *data) {
    (void)data;
    size_t len;
    const char *p = rjq_job_get_payload(job, &len);
    char out[64];
    int n = snprintf(out, sizeof out, "done:%.*s", (int)len, p);
    ASSERT_OK(rjq_job_complete(job, out, (size_t)n, NULL, NULL));
    done_jobs++;
}

/* data: the job's number; its result says it */
static void on_outcome(rjq_client *c, int status, const rjq_outcome *o, void *data) {
    (void)c;
    ASSERT_EQ(RJQ_OK, status);
    char want[32];
    snprintf(want, sizeof want, "done:%d", (int)(intptr_t)data);
    ASSERT_EQ(strlen(want), o->result_len);
    ASSERT(memcmp(want, o->result, o->result_len) == 0);
    outcomes++;
}

/* Enqueue n awaited jobs on a client, run them on a worker of another
 * client, and see every await end with its result. */
static void run_work(struct event_base *base, rjq_client *producer, rjq_client *worker_client, int n) {
    rjq_queue *pq = queue_for(producer, "tls"), *wq = queue_for(worker_client, "tls");
    rjq_worker *w;
    ASSERT_OK(rjq_worker_start(wq, NULL, handler, NULL, &w));
    done_jobs = outcomes = 0;
    for (int i = 0; i < n; i++) {
        char payload[16];
        int len = snprintf(payload, sizeof payload, "%d", i);
        ASSERT_OK(rjq_enqueue_await(pq, payload, (size_t)len, NULL, NULL, on_outcome,
                                    (void *)(intptr_t)i, NULL));
    }
    ASSERT(loop_until_count(base, &outcomes, n, 10000));
    ASSERT_EQ(n, done_jobs);
    ASSERT_OK(rjq_worker_stop(w, NULL, NULL));
}

/* Clients with these settings connect (and the server answers them). */
static void expect_connects(const char *url, const rjq_tls_options *t) {
    struct event_base *base = event_base_new();
    rjq_client_options o = tls_client_options(url, t);
    rjq_client *c = client_new(base, &o);
    wait_connected(base, c);
    ASSERT_EQ(0, errors_seen);
    rjq_client_free(c);
    event_base_free(base);
}

/* n awaited jobs from one client to a worker on another, both with these
 * settings, without one connection error. */
static void work_between_two_clients(const char *url, const rjq_tls_options *t, int n) {
    struct event_base *base = event_base_new();
    rjq_client_options o = tls_client_options(url, t);
    rjq_client *a = client_new(base, &o), *b = client_new(base, &o);
    wait_connected(base, a);
    wait_connected(base, b);
    run_work(base, a, b, n);
    ASSERT_EQ(0, errors_seen);
    rjq_client_free(a);
    rjq_client_free(b);
    event_base_free(base);
}

TEST(work_and_awaits_over_tls) {
    TLS_ONLY();
    test_server s;
    certs p;
    rjq_tls_options t = start_with_ca(&s, 0, &p);
    work_between_two_clients(s.url, &t, 200);
    server_stop_guarded(&s);
}

/* The URL's host is the name checked: "localhost" is in the certificate. */
TEST(tls_checks_the_url_host_name) {
    TLS_ONLY();
    test_server s;
    certs p;
    rjq_tls_options t = start_with_ca(&s, 0, &p);
    char url[96];
    snprintf(url, sizeof url, "rediss://localhost:%d", s.port);
    expect_connects(url, &t);
    /* redis:// with enable = 1 is TLS too; server_name picks another name
     * the certificate holds */
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", s.port);
    t.enable = 1;
    t.server_name = "redis.test";
    expect_connects(url, &t);
    server_stop_guarded(&s);
}

/* A client that fails to connect: the message of its first error. */
static void expect_refused(const char *url, const rjq_tls_options *t, const char *needle) {
    struct event_base *base = event_base_new();
    rjq_client_options o = tls_client_options(url, t);
    rjq_client *c = client_new(base, &o);
    WAIT_FOR(base, errors_seen != 0, 20000);
    ASSERT(errors_seen > 0);
    ASSERT_EQ(0, rjq_client_is_connected(c));
    if (strstr(events, needle) == NULL)
        FAIL_AT(__FILE__, __LINE__, "expected \"%s\" in the events, got:\n%s", needle, events);
    if (strstr(events, "RJQ_E") || strstr(events, PASSWORD) || strstr(rjq_client_get_errmsg(c), PASSWORD))
        FAIL_AT(__FILE__, __LINE__, "the password or a code name is in a message:\n%s", events);
    rjq_client_free(c);
    event_base_free(base);
}

TEST(wrong_ca_fails_naming_the_certificate) {
    TLS_ONLY();
    test_server s;
    certs p;
    rjq_tls_options t = start_with_ca(&s, 0, &p);
    t.ca_file = p.otherca;
    char url[128];
    snprintf(url, sizeof url, "rediss://alice:" PASSWORD "@127.0.0.1:%d", s.port);
    expect_refused(url, &t, "the server's certificate was refused: self-signed certificate in "
                           "certificate chain, checked for 127.0.0.1 (is the CA file the one");
    /* and no CA at all (the system's CAs do not know the test's) */
    t.ca_file = NULL;
    expect_refused(url, &t, "the server's certificate was refused");
    /* insecure: anything goes (the test says why it is not for production) */
    t.insecure = 1;
    expect_connects(s.url, &t);
    server_stop_guarded(&s);
}

TEST(wrong_server_name_fails_naming_the_name) {
    TLS_ONLY();
    test_server s;
    certs p;
    rjq_tls_options t = start_with_ca(&s, 0, &p);
    t.server_name = "other.example";
    expect_refused(s.url, &t, "hostname mismatch, checked for other.example");
    t.server_name = "10.9.9.9";
    expect_refused(s.url, &t, "IP address mismatch, checked for 10.9.9.9");
    server_stop_guarded(&s);
}

TEST(mutual_tls_needs_the_client_certificate) {
    TLS_ONLY();
    test_server s;
    certs p;
    rjq_tls_options t = start_with_ca(&s, 1, &p);
    char url[128];
    snprintf(url, sizeof url, "rediss://:" PASSWORD "@127.0.0.1:%d", s.port);
    expect_refused(url, &t, "does the server want a client certificate?");
    t.cert_file = p.cert;
    t.key_file = p.key;
    work_between_two_clients(s.url, &t, 20);
    server_stop_guarded(&s);
}

/* A plain client on the TLS port, a TLS client on a plain port: errors,
 * no hang. */
TEST(tls_and_plain_mixed_up_fail_clearly) {
    TLS_ONLY();
    test_server s, plain;
    server_start_tls(&s, 0);
    server_start_guarded(&plain, NULL);
    certs p = paths(&s);
    rjq_tls_options t = RJQ_TLS_OPTIONS_INIT;
    t.ca_file = p.ca;
    char url[96];
    snprintf(url, sizeof url, "rediss://127.0.0.1:%d", plain.port);
    expect_refused(url, &t, "TLS handshake"); /* failed, or timed out: the server waits for a line */
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", s.port);
    expect_refused(url, NULL, "connection");
    /* nobody listening: a refused connect, no TLS matter */
    snprintf(url, sizeof url, "rediss://127.0.0.1:%d", free_port());
    expect_refused(url, &t, "Connection refused");
    if (strstr(events, "TLS")) FAIL_AT(__FILE__, __LINE__, "a refused connect called a TLS failure:\n%s", events);
    server_stop_guarded(&plain);
    server_stop_guarded(&s);
}

/* Files that cannot be used fail rjq_client_new, naming the file. */
TEST(unusable_tls_files_fail_the_client_naming_them) {
    TLS_ONLY();
    test_server s;
    server_start_tls(&s, 0);
    certs p = paths(&s);
    struct event_base *base = event_base_new();
    struct {
        rjq_tls_options t;
        const char *needle;
    } cases[] = {
        {{sizeof(rjq_tls_options), 0, "/nonexistent/ca.pem", NULL, NULL, NULL, NULL, 0, 0}, "/nonexistent/ca.pem"},
        {{sizeof(rjq_tls_options), 0, NULL, "/nonexistent/cadir", NULL, NULL, NULL, 0, 0}, "/nonexistent/cadir"},
        {{sizeof(rjq_tls_options), 0, p.ca, NULL, p.cert, NULL, NULL, 0, 0}, "needs its key"},
        {{sizeof(rjq_tls_options), 0, p.ca, NULL, NULL, p.key, NULL, 0, 0}, "needs its key"},
        {{sizeof(rjq_tls_options), 0, p.ca, NULL, "/nonexistent/c.pem", p.key, NULL, 0, 0}, "client certificate /nonexistent/c.pem"},
        {{sizeof(rjq_tls_options), 0, p.ca, NULL, p.cert, p.ca, NULL, 0, 0}, p.ca}, /* a certificate is no key */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rjq_client_options o = tls_client_options(s.url, &cases[i].t);
        rjq_client *c = (rjq_client *)base;
        ASSERT_EQ(RJQ_ETLS, rjq_libevent_client_new(&c, base, &o));
        ASSERT(c == NULL);
        if (strstr(rjq_client_get_errmsg(NULL), cases[i].needle) == NULL)
            FAIL_AT(__FILE__, __LINE__, "case %zu: expected \"%s\" in \"%s\"", i, cases[i].needle,
                    rjq_client_get_errmsg(NULL));
    }
    /* TLS over a unix socket is no such thing */
    rjq_tls_options t = RJQ_TLS_OPTIONS_INIT;
    t.enable = 1;
    rjq_client_options o = tls_client_options("unix:///tmp/rjq-none.sock", &t);
    rjq_client *c = NULL;
    ASSERT_EQ(RJQ_ETLS, rjq_libevent_client_new(&c, base, &o));
    ASSERT(strstr(rjq_client_get_errmsg(NULL), "unix socket") != NULL);
    event_base_free(base);
    server_stop_guarded(&s);
}
