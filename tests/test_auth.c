/*
 * AUTH from the client options and from every URL form (issue 37,
 * "Connection options like every Redis client"): a password or an ACL
 * user over a unix socket, the query options ?db=, ?username=,
 * ?password=, ?timeout=, and which wins when the URL and the options
 * both say. Each against a private redis-server with requirepass and an
 * ACL user; both connections of the client are checked (the command
 * connection by a round trip, the subscriber by a confirmed subscription).
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rjq/libevent.h>

#include "harness.h"
#include "server.h"
#include "waits.h"

typedef struct auth_env {
    test_server s;
    char dir[64], sock[96];
    struct event_base *base;
    redisContext *rc; /* logged in as "default" (requirepass) */
} auth_env;

/* A server with requirepass "secret", a unix socket, and the ACL user
 * alice (password "pw", all commands and keys). */
static void auth_start(auth_env *e) {
    memset(e, 0, sizeof *e);
    snprintf(e->dir, sizeof e->dir, "/tmp/rjq-auth-XXXXXX");
    ASSERT(mkdtemp(e->dir) != NULL);
    snprintf(e->sock, sizeof e->sock, "%s/r.sock", e->dir);
    const char *const extra[] = {"--requirepass", "secret", "--unixsocket", e->sock,
                                 "--unixsocketperm", "700", NULL};
    server_start_guarded(&e->s, extra);
    e->rc = server_connect(&e->s);
    freeReplyObject(server_cmd(e->rc, "AUTH secret"));
    redisReply *r = server_cmd(e->rc, "ACL SETUSER alice on >pw ~* &* +@all");
    ASSERT(r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    e->base = event_base_new();
    ASSERT(e->base != NULL);
}

static void auth_stop(auth_env *e) {
    redisFree(e->rc);
    event_base_free(e->base);
    server_stop_guarded(&e->s);
    unlink(e->sock);
    rmdir(e->dir);
}

/* Keys in database db. */
static long long keys_in(auth_env *e, int db) {
    freeReplyObject(server_cmd(e->rc, "SELECT %d", db));
    long long n = server_int(e->rc, "DBSIZE");
    freeReplyObject(server_cmd(e->rc, "SELECT 0"));
    return n;
}

/* Connections of the server logged in as user whose name starts "rjq". */
static int rjq_conns_of(auth_env *e, const char *user) {
    redisReply *r = server_cmd(e->rc, "CLIENT LIST");
    ASSERT(r->type == REDIS_REPLY_STRING);
    char want[64];
    snprintf(want, sizeof want, " user=%s ", user);
    int n = 0;
    for (char *line = strtok(r->str, "\n"); line; line = strtok(NULL, "\n"))
        if (strstr(line, " name=rjq") && strstr(line, want)) n++;
    freeReplyObject(r);
    return n;
}

static void on_monitor_event(rjq_client *c, const char *ev, const char *id, void *data) {
    (void)c, (void)ev, (void)id, (void)data;
}

/* A client with options o enqueues a job on queue "auth" (RJQ_OK expected)
 * and subscribes to its events: both connections logged in. Returns the
 * client (to free). */
static rjq_client *client_works(auth_env *e, const rjq_client_options *o) {
    rjq_client *c = client_new(e->base, o);
    rjq_queue *q = queue_for(c, "auth");
    enqueue_wait w = enqueue_job(e->base, q, "x", NULL);
    if (w.status != RJQ_OK)
        FAIL_AT(__FILE__, __LINE__, "enqueue over %s: %d (%s)", o->url, w.status, rjq_client_get_errmsg(c));
    rjq_monitor *m = NULL;
    ASSERT_OK(rjq_queue_monitor(q, on_monitor_event, NULL, &m));
    ASSERT(loop_until_numsub(e->base, e->rc, "t:{auth}:events", 1, 10000));
    ASSERT_OK(rjq_monitor_stop(m));
    return c;
}

/* issue 37: a unix socket could not authenticate (unix:///path took no
 * password, and the options had none). */
TEST(unix_socket_authenticates_with_the_password_option) {
    auth_env e;
    auth_start(&e);
    char url[160];
    snprintf(url, sizeof url, "unix://%s", e.sock);
    rjq_client_options o = client_options(url);
    o.password = "secret";
    rjq_client *c = client_works(&e, &o);
    ASSERT_EQ(2, rjq_conns_of(&e, "default")); /* command and subscriber */
    ASSERT(keys_in(&e, 0) > 0);
    rjq_client_free(c);
    auth_stop(&e);
}

TEST(unix_url_with_acl_user_password_and_db) {
    auth_env e;
    auth_start(&e);
    char url[200];
    snprintf(url, sizeof url, "unix://alice:pw@%s?db=2", e.sock);
    rjq_client_options o = client_options(url);
    rjq_client *c = client_works(&e, &o);
    ASSERT_EQ(2, rjq_conns_of(&e, "alice"));
    ASSERT(keys_in(&e, 2) > 0);
    ASSERT_EQ(0, keys_in(&e, 0));
    rjq_client_free(c);
    auth_stop(&e);
}

TEST(options_username_and_password_log_in_as_the_acl_user) {
    auth_env e;
    auth_start(&e);
    char url[200];
    snprintf(url, sizeof url, "unix://%s", e.sock);
    rjq_client_options o = client_options(url);
    o.username = "alice";
    o.password = "pw";
    rjq_client *c = client_works(&e, &o);
    ASSERT_EQ(2, rjq_conns_of(&e, "alice"));
    rjq_client_free(c);
    auth_stop(&e);
}

/* issue 37: redis://:secret@host:port?db=3 failed with "port must be
 * 1..65535". */
TEST(redis_url_with_password_and_query_db) {
    auth_env e;
    auth_start(&e);
    char url[200];
    snprintf(url, sizeof url, "redis://:secret@127.0.0.1:%d?db=3", e.s.port);
    rjq_client_options o = client_options(url);
    rjq_client *c = client_works(&e, &o);
    ASSERT(keys_in(&e, 3) > 0);
    ASSERT_EQ(0, keys_in(&e, 0));
    rjq_client_free(c);
    auth_stop(&e);
}

/* The URL wins, part by part: its password over the options' (wrong)
 * one; its ?username= with the options' password. */
TEST(url_user_and_password_win_over_the_options) {
    auth_env e;
    auth_start(&e);
    char url[200];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d?password=secret", e.s.port);
    rjq_client_options o = client_options(url);
    o.password = "wrong";
    rjq_client *c = client_works(&e, &o);
    ASSERT_EQ(2, rjq_conns_of(&e, "default"));
    rjq_client_free(c);

    snprintf(url, sizeof url, "redis://127.0.0.1:%d?username=alice", e.s.port);
    o = client_options(url);
    o.username = "nobody";
    o.password = "pw";
    c = client_works(&e, &o);
    ASSERT_EQ(2, rjq_conns_of(&e, "alice"));
    rjq_client_free(c);
    auth_stop(&e);
}

/* A user without a password anywhere is refused at rjq_client_new, not
 * sent as AUTH with a NULL password. */
TEST(username_without_a_password_is_refused) {
    struct event_base *base = event_base_new();
    ASSERT(base != NULL);
    rjq_client_options o = client_options("redis://127.0.0.1:1");
    o.username = "alice";
    rjq_client *c = (rjq_client *)base; /* must be reset to NULL */
    ASSERT_EQ(RJQ_EINVAL, rjq_libevent_client_new(&c, base, &o));
    ASSERT(c == NULL);
    ASSERT(strstr(rjq_client_get_errmsg(NULL), "needs a password") != NULL);

    o = client_options("redis://127.0.0.1:1?username=alice");
    ASSERT_EQ(RJQ_EURL, rjq_libevent_client_new(&c, base, &o));
    ASSERT(strstr(rjq_client_get_errmsg(NULL), "needs a password") != NULL);

    o = client_options("redis://127.0.0.1:1?protocol=3");
    ASSERT_EQ(RJQ_EURL, rjq_libevent_client_new(&c, base, &o));
    ASSERT(strstr(rjq_client_get_errmsg(NULL), "RESP2") != NULL);
    event_base_free(base);
}

typedef struct ev_seen {
    int errors;
    char detail[256];
} ev_seen;

static void on_event(rjq_client *c, rjq_event ev, int conn, const char *detail, void *data) {
    (void)c, (void)conn;
    ev_seen *s = data;
    if (ev == RJQ_EVENT_CONNECTED) return; /* (a drop in set-up is DISCONNECTED) */
    s->errors++;
    snprintf(s->detail, sizeof s->detail, "%s", detail ? detail : "");
}

/* ?timeout= is the connect timeout, over connect_timeout_ms: a server
 * that accepts the connection but never answers (SIGSTOPped) ends the
 * session set-up (an event) after the URL's 200 ms, while the options
 * say ten minutes (the wait below is a safety net of 60 s). */
TEST(url_timeout_is_the_connect_timeout_and_wins) {
    auth_env e;
    auth_start(&e);
    char url[200];
    snprintf(url, sizeof url, "redis://:secret@127.0.0.1:%d?timeout=200ms", e.s.port);
    ASSERT_EQ(0, kill(e.s.pid, SIGSTOP));
    ev_seen seen = {0, ""};
    rjq_client_options o = client_options(url);
    o.connect_timeout_ms = 600000;
    o.on_event = on_event;
    o.event_data = &seen;
    rjq_client *c = client_new(e.base, &o);
    int ok = loop_until(e.base, &seen.errors, 60000);
    ASSERT_EQ(0, kill(e.s.pid, SIGCONT));
    if (!ok) FAIL_AT(__FILE__, __LINE__, "no connect timeout in 60 s");
    ASSERT(strstr(seen.detail, "timed out") != NULL);
    rjq_client_free(c);
    auth_stop(&e);
}
