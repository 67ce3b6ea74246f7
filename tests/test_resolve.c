/*
 * Host names: the optional resolve hook of rjq_io_ops. With a test
 * resolver (it answers what the test says, at once or later, or never),
 * the core's rules: every connect attempt resolves again, the addresses
 * are tried in turn (IPv6 and IPv4), a failed lookup is reported and
 * retried, a pending lookup is cancelled by a timeout or by freeing the
 * client. With libevent's evdns (rjq_libevent_client_new_dns): names from
 * a hosts file, and an unknown name. A glue without a resolver refuses
 * names other than localhost.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <event2/dns.h>
#include <event2/dns_struct.h>
#include <rjq/libevent.h>

#include "harness.h"
#include "server.h"

/* ---- a resolver that answers what the test says ---------------------------- */

static struct {
    struct event_base *base;
    const char *addrs[4]; /* the answer; none: an error */
    size_t n;
    int later;            /* answer from the loop, not inside resolve */
    int never;            /* never answer (only a cancel ends it) */
    long calls, cancels, pending;
    char last_host[64];
} fake;

typedef struct lookup {
    rjq_resolved_fn *done;
    void *arg;
    struct event *ev;
} lookup;

static void answer(rjq_resolved_fn *done, void *arg) {
    if (fake.n == 0) done(arg, "no such name (test resolver)", NULL, 0);
    else done(arg, NULL, fake.addrs, fake.n);
}

static void answer_later(evutil_socket_t fd, short what, void *p) {
    (void)fd, (void)what;
    lookup *l = p;
    fake.pending--;
    event_free(l->ev);
    rjq_resolved_fn *done = l->done;
    void *arg = l->arg;
    free(l);
    answer(done, arg);
}

static void *fake_resolve(void *loop, const char *host, rjq_resolved_fn *done, void *arg) {
    (void)loop;
    fake.calls++;
    snprintf(fake.last_host, sizeof fake.last_host, "%s", host);
    if (!fake.later && !fake.never) {
        answer(done, arg);
        return NULL;
    }
    lookup *l = calloc(1, sizeof *l);
    ASSERT(l != NULL);
    l->done = done;
    l->arg = arg;
    l->ev = evtimer_new(fake.base, answer_later, l);
    fake.pending++;
    if (!fake.never) {
        struct timeval tv = {0, 1000};
        evtimer_add(l->ev, &tv);
    }
    return l;
}

static void fake_cancel(void *loop, void *handle) {
    (void)loop;
    lookup *l = handle;
    fake.cancels++;
    fake.pending--;
    event_free(l->ev);
    free(l);
}

static rjq_client *fake_client(struct event_base *base, const char *url, rjq_event_cb *ev) {
    rjq_client_options o = client_options(url);
    o.on_event = ev;
    o.connect_timeout_ms = 1000;
    rjq_client *c = NULL;
    ASSERT_OK(rjq_libevent_client_make_(&c, base, NULL, NULL, &o, fake_resolve, fake_cancel));
    return c;
}

static void fake_reset(struct event_base *base) {
    memset(&fake, 0, sizeof fake);
    fake.base = base;
}

static char events[4096];
static long errors_seen;

static void on_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    (void)c, (void)conn, (void)data;
    size_t n = strlen(events);
    snprintf(events + n, sizeof events - n, "[%d] %s\n", (int)ev, detail ? detail : "");
    if (ev != RJQ_EVENT_CONNECTED) errors_seen++;
}

static long enqueued;
static void on_enqueued(rjq_client *c, int status, const rjq_enqueued *jobs, size_t n, void *data) {
    (void)c, (void)jobs, (void)n, (void)data;
    ASSERT_OK(status);
    enqueued++;
}

/* One enqueue through the client lands on the server s. */
static void enqueue_lands_on(struct event_base *base, rjq_client *c, test_server *s) {
    rjq_queue *q = queue_for(c, "names");
    redisContext *rc = server_connect(s);
    long long before = server_int(rc, "LLEN t:{names}:ready");
    long target = enqueued + 1;
    ASSERT_OK(rjq_enqueue(q, "x", 1, NULL, on_enqueued, NULL));
    ASSERT(loop_until_count(base, &enqueued, target, 5000));
    ASSERT_EQ(before + 1, server_int(rc, "LLEN t:{names}:ready"));
    redisFree(rc);
}

TEST(host_name_is_resolved_and_each_address_tried_in_turn) {
    test_server s;
    server_start_guarded(&s, NULL);
    struct event_base *base = event_base_new();
    for (int later = 0; later < 2; later++) {
        fake_reset(base);
        fake.later = later;
        /* ::1 and 127.0.0.2 refuse (the server is on 127.0.0.1 only) */
        fake.addrs[0] = "::1";
        fake.addrs[1] = "127.0.0.2";
        fake.addrs[2] = "127.0.0.1";
        fake.n = 3;
        char url[96];
        snprintf(url, sizeof url, "redis://redis.test:%d", s.port);
        events[0] = '\0';
        rjq_client *c = fake_client(base, url, on_event);
        wait_connected(base, c);
        ASSERT_STREQ("redis.test", fake.last_host);
        ASSERT_EQ(2, fake.calls); /* one per connection */
        enqueue_lands_on(base, c, &s);
        ASSERT(strstr(events, "[1]") != NULL);
        ASSERT(strstr(events, "[3]") == NULL); /* a refused address is no failed attempt */
        rjq_client_free(c);
        ASSERT_EQ(0, fake.pending);
    }
    event_base_free(base);
    server_stop_guarded(&s);
}

/* A managed endpoint fails over by DNS: the name's address changes, the
 * old server dies, the client reconnects to the new address by itself. */
TEST(every_reconnect_resolves_again) {
    test_server a, b;
    server_start_at(&a, "127.0.0.1", 0);
    server_start_at(&b, "127.0.0.2", a.port);
    struct event_base *base = event_base_new();
    fake_reset(base);
    fake.later = 1;
    fake.addrs[0] = "127.0.0.1";
    fake.n = 1;
    char url[96];
    snprintf(url, sizeof url, "redis://redis.test:%d", a.port);
    rjq_client *c = fake_client(base, url, NULL);
    wait_connected(base, c);
    enqueue_lands_on(base, c, &a);
    long calls = fake.calls;
    fake.addrs[0] = "127.0.0.2";
    server_stop_guarded(&a);
    WAIT_FOR(base, !rjq_client_is_connected(c), 5000);
    wait_connected(base, c);
    ASSERT(fake.calls > calls);
    enqueue_lands_on(base, c, &b);
    rjq_client_free(c);
    ASSERT_EQ(0, fake.pending);
    event_base_free(base);
    server_stop_guarded(&b);
}

TEST(failed_lookup_is_reported_and_retried) {
    struct event_base *base = event_base_new();
    fake_reset(base);
    fake.later = 1; /* n = 0: an error */
    events[0] = '\0';
    errors_seen = 0;
    rjq_client *c = fake_client(base, "redis://nowhere.test:6399", on_event);
    WAIT_FOR(base, fake.calls >= 6, 5000);
    ASSERT(fake.calls >= 6); /* both connections, again and again */
    ASSERT(strstr(events, "cannot resolve nowhere.test: no such name (test resolver)") != NULL);
    ASSERT_EQ(0, rjq_client_is_connected(c));
    rjq_client_free(c);
    ASSERT_EQ(0, fake.pending);
    event_base_free(base);
}

/* A lookup that never answers: the connect timeout ends it (cancelled),
 * and freeing the client cancels the one pending then. */
TEST(pending_lookup_is_cancelled_by_timeout_and_by_free) {
    struct event_base *base = event_base_new();
    fake_reset(base);
    fake.never = 1;
    events[0] = '\0';
    rjq_client *c = fake_client(base, "redis://slow.test:6399", on_event);
    WAIT_FOR(base, fake.cancels >= 2, 5000);
    ASSERT(fake.cancels >= 2);
    ASSERT(strstr(events, "resolving the host name timed out") != NULL);
    ASSERT(fake.pending <= 2);
    rjq_client_free(c);
    ASSERT_EQ(0, fake.pending);
    event_base_free(base);
}

static void never_socket(void *arg, int fd, int what) {
    (void)arg, (void)fd, (void)what;
    FAIL_AT(__FILE__, __LINE__, "a refused glue was asked to watch a socket");
}

static void never_timer(void *arg, long ms) {
    (void)arg, (void)ms;
    FAIL_AT(__FILE__, __LINE__, "a refused glue was asked for a timer");
}

static int never_attach(void *loop, struct redisAsyncContext *ac) {
    (void)loop, (void)ac;
    FAIL_AT(__FILE__, __LINE__, "a refused glue was asked to attach");
    return -1;
}

/* A glue without a resolver: names refused (localhost excepted), clearly. */
TEST(glue_without_resolver_refuses_names) {
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options("redis://redis.test:6379");
    rjq_client *c = (rjq_client *)base;
    ASSERT_EQ(RJQ_EURL, rjq_libevent_client_new(&c, base, &o));
    ASSERT(c == NULL);
    ASSERT(strstr(rjq_client_get_errmsg(NULL), "host redis.test is a name") != NULL);
    ASSERT(strstr(rjq_client_get_errmsg(NULL), "rjq_libevent_client_new_dns") != NULL);
    /* resolve without resolve_cancel is no valid glue (rjq_io_ops, and the
     * deprecated rjq_loop_ops) */
    rjq_io_ops half = RJQ_IO_OPS_INIT;
    half.socket = never_socket;
    half.timer = never_timer;
    half.resolve = fake_resolve;
    ASSERT_EQ(RJQ_EINVAL, rjq_client_new_io(&c, &o, &half));
    ASSERT(c == NULL);
    rjq_loop_ops half_ops = RJQ_LOOP_OPS_INIT;
    half_ops.attach = never_attach;
    half_ops.set_timer = never_timer;
    half_ops.resolve = fake_resolve;
    ASSERT_EQ(RJQ_EINVAL, rjq_client_new(&c, &o, &half_ops, NULL));
    ASSERT(c == NULL);
    event_base_free(base);
}

/* ---- libevent's evdns ----------------------------------------------------------- */

/* A UDP socket bound to a free port of 127.0.0.1 (its address in *sin). */
static evutil_socket_t udp_on_loopback(struct sockaddr_in *sin) {
    evutil_socket_t fd = socket(AF_INET, SOCK_DGRAM, 0);
    ASSERT(fd >= 0);
    memset(sin, 0, sizeof *sin);
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(0, bind(fd, (struct sockaddr *)sin, sizeof *sin));
    socklen_t sl = sizeof *sin;
    ASSERT_EQ(0, getsockname(fd, (struct sockaddr *)sin, &sl));
    return fd;
}

/* Has the socket fd a datagram to read (a lookup came to the name server
 * that never answers)? */
static int datagram_waiting(evutil_socket_t fd) {
    char b[1];
    return recv(fd, b, sizeof b, MSG_PEEK | MSG_DONTWAIT) >= 0;
}

/* A DNS server on loopback (libevent's evdns server side): redis.test has
 * the A record 127.0.0.1 and no AAAA record; other names do not exist. */
static long dns_queries;

static void on_dns_request(struct evdns_server_request *req, void *arg) {
    (void)arg;
    int rcode = 0;
    for (int i = 0; i < req->nquestions; i++) {
        const struct evdns_server_question *q = req->questions[i];
        dns_queries++;
        if (strcasecmp(q->name, "redis.test") != 0) { /* evdns mixes the case (0x20) */
            rcode = DNS_ERR_NOTEXIST;
        } else if (q->type == EVDNS_TYPE_A) {
            uint32_t a = htonl(INADDR_LOOPBACK);
            ASSERT_EQ(0, evdns_server_request_add_a_reply(req, q->name, 1, &a, 10));
        }
    }
    ASSERT_EQ(0, evdns_server_request_respond(req, rcode));
}

static int freed_in_event;
static void free_on_error(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    (void)conn, (void)data;
    if (ev == RJQ_EVENT_ERROR && strstr(detail, "cannot resolve") && !freed_in_event) {
        freed_in_event = 1;
        rjq_client_free(c);
    }
}

TEST(evdns_resolves_names_through_a_dns_server) {
    test_server s;
    server_start_guarded(&s, NULL);
    struct event_base *base = event_base_new();
    struct sockaddr_in sin;
    evutil_socket_t fd = udp_on_loopback(&sin);
    ASSERT_EQ(0, evutil_make_socket_nonblocking(fd));
    struct evdns_server_port *port = evdns_add_server_port_with_base(base, fd, 0, on_dns_request, NULL);
    ASSERT(port != NULL);
    struct evdns_base *dns = evdns_base_new(base, 0);
    ASSERT(dns != NULL);
    char ns[64];
    snprintf(ns, sizeof ns, "127.0.0.1:%d", ntohs(sin.sin_port));
    ASSERT_EQ(0, evdns_base_nameserver_ip_add(dns, ns));

    char url[96];
    snprintf(url, sizeof url, "redis://redis.test:%d", s.port);
    rjq_client_options o = client_options(url);
    o.on_event = on_event;
    events[0] = '\0';
    rjq_client *c = NULL;
    ASSERT_OK(rjq_libevent_client_new_dns(&c, base, dns, &o));
    double until = wait_deadline(5000);
    while (!rjq_client_is_connected(c) && wait_step(base, until)) {
    }
    if (!rjq_client_is_connected(c)) FAIL_AT(__FILE__, __LINE__, "not connected:\n%s", events);
    ASSERT(dns_queries >= 2);
    enqueue_lands_on(base, c, &s);
    rjq_client_free(c);
    /* a name that does not exist: reported, the client keeps trying */
    events[0] = '\0';
    o = client_options("redis://nowhere.test:6399");
    o.on_event = on_event;
    ASSERT_OK(rjq_libevent_client_new_dns(&c, base, dns, &o));
    until = wait_deadline(5000);
    while (strstr(events, "cannot resolve") == NULL && wait_step(base, until)) {
    }
    if (strstr(events, "cannot resolve nowhere.test") == NULL)
        FAIL_AT(__FILE__, __LINE__, "expected a failed lookup, got:\n%s", events);
    rjq_client_free(c);
    /* freed from inside the event its failed lookup reported: the glue
     * goes once evdns' callback is done with it */
    o = client_options("redis://nowhere.test:6399");
    o.on_event = free_on_error;
    freed_in_event = 0;
    int dns_only = loop_events(base); /* the name server's and evdns' own */
    ASSERT_OK(rjq_libevent_client_new_dns(&c, base, dns, &o));
    ASSERT(loop_until(base, &freed_in_event, 3000));
    /* a cancelled lookup's parts end from the loop: let them, then free */
    WAIT_FOR(base, loop_events(base) <= dns_only, 5000);
    evdns_base_free(dns, 0);
    evdns_close_server_port(port);
    evutil_closesocket(fd);
    event_base_free(base);
    server_stop_guarded(&s);
}

/* The glue's own resolver (the system's settings): localhost by name. */
TEST(evdns_with_system_settings_resolves_localhost) {
    test_server s;
    server_start_guarded(&s, NULL);
    struct event_base *base = event_base_new();
    char url[96];
    snprintf(url, sizeof url, "redis://localhost:%d", s.port);
    rjq_client_options o = client_options(url);
    rjq_client *c = NULL;
    ASSERT_OK(rjq_libevent_client_new_dns(&c, base, NULL, &o));
    wait_connected(base, c);
    enqueue_lands_on(base, c, &s);
    rjq_client_free(c);
    event_base_dispatch(base); /* an idle resolver keeps no loop running */
    event_base_free(base);
    server_stop_guarded(&s);
}

/* A resolver that fails from inside its resolve hook (allowed): the
 * failure is reported from the loop, never from inside rjq_client_new,
 * and a handler that frees the client on it is safe. */
static void *fail_inside(void *loop, const char *host, rjq_resolved_fn *done, void *arg) {
    (void)loop, (void)host;
    done(arg, "no such name (test resolver)", NULL, 0);
    return NULL;
}

static int events_inside_new;
static void free_on_any_error(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    (void)conn, (void)detail, (void)data;
    events_inside_new++;
    if (ev == RJQ_EVENT_ERROR && !freed_in_event) {
        freed_in_event = 1;
        rjq_client_free(c);
    }
}

TEST(resolver_failing_inside_its_hook_reports_from_the_loop) {
    struct event_base *base = event_base_new();
    rjq_client_options o = client_options("redis://nowhere.test:6399");
    o.on_event = free_on_any_error;
    freed_in_event = events_inside_new = 0;
    rjq_client *c = NULL;
    ASSERT_OK(rjq_libevent_client_make_(&c, base, NULL, NULL, &o, fail_inside, fake_cancel));
    ASSERT_EQ(0, events_inside_new); /* no user code inside rjq_client_new */
    ASSERT(loop_until(base, &freed_in_event, 3000));
    event_base_free(base);
}

/* Freed with lookups pending on a resolver the glue made: the lookups'
 * ends come from the loop later, and find the glue (and evdns) still
 * there; then both go. */
TEST(client_freed_with_lookups_pending_on_its_own_resolver) {
    struct event_base *base = event_base_new();
    struct sockaddr_in sin;
    evutil_socket_t fd = udp_on_loopback(&sin); /* a name server that never answers */
    struct evdns_base *dns = evdns_base_new(base, 0);
    ASSERT(dns != NULL);
    char ns[64];
    snprintf(ns, sizeof ns, "127.0.0.1:%d", ntohs(sin.sin_port));
    ASSERT_EQ(0, evdns_base_nameserver_ip_add(dns, ns));
    rjq_client_options o = client_options("redis://slow.test:6399");
    rjq_client *c = NULL;
    /* as rjq_libevent_client_new_dns(NULL) makes it: the glue owns dns */
    ASSERT_OK(rjq_libevent_client_make_(&c, base, dns, rjq_libevent_dns_free_, &o,
                                        rjq_libevent_resolve_, rjq_libevent_resolve_cancel_));
    WAIT_FOR(base, datagram_waiting(fd), 5000); /* a lookup is out */
    rjq_client_free(c);
    WAIT_FOR(base, loop_empty(base), 5000); /* the lookups' ends came, the glue and evdns went */
    event_base_free(base);
    evutil_closesocket(fd);
}
