/* Unit tests for the Redis URL parser (src/url.c). No Redis. */
#include "failalloc.h"
#include "harness.h"
#include "rjq.h"
#include "url.h"

static char err[256];

static void parse_ok(const char *url, rjq__url *u) {
    memset(err, 0, sizeof err);
    int rc = rjq__url_parse(url, u, err, sizeof err);
    if (rc != RJQ_OK)
        FAIL_AT(__FILE__, __LINE__, "parse(\"%s\") = %d (%s), expected success",
                url ? url : "(null)", rc, err);
}

#define ASSERT_NULL(p) ASSERT((p) == NULL)

/* The URL is refused with RJQ_EURL, a message containing `needle` (when
 * not NULL), and an empty *out. */
static void expect_bad_at(const char *file, int line, const char *url, const char *needle) {
    rjq__url u;
    memset(err, 0, sizeof err);
    memset(&u, 0x5a, sizeof u); /* garbage in: must come out empty */
    int rc = rjq__url_parse(url, &u, err, sizeof err);
    if (rc != RJQ_EURL)
        FAIL_AT(file, line, "parse(\"%s\") = %d, expected RJQ_EURL (%d)", url, rc, RJQ_EURL);
    if (err[0] == '\0') FAIL_AT(file, line, "parse(\"%s\"): empty error message", url);
    if (needle && strstr(err, needle) == NULL)
        FAIL_AT(file, line, "parse(\"%s\"): message \"%s\" lacks \"%s\"", url, err, needle);
    if (u.host || u.path || u.user || u.password || u.db != 0)
        FAIL_AT(file, line, "parse(\"%s\"): *out not left empty", url);
    rjq__url_free(&u); /* harmless on an empty url */
}
#define expect_bad(url, needle) expect_bad_at(__FILE__, __LINE__, url, needle)

static int same_or_both_null(const char *a, const char *b) {
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* The URL parses, with that user and that password (NULL: none). */
static void expect_auth_at(const char *file, int line, const char *url, const char *user,
                           const char *password) {
    rjq__url u;
    parse_ok(url, &u);
    if (!same_or_both_null(user, u.user) || !same_or_both_null(password, u.password))
        FAIL_AT(file, line, "parse(\"%s\"): user %s password %s, expected %s and %s", url,
                u.user ? u.user : "(none)", u.password ? u.password : "(none)", user ? user : "(none)",
                password ? password : "(none)");
    rjq__url_free(&u);
}
#define expect_auth(url, user, password) expect_auth_at(__FILE__, __LINE__, url, user, password)

TEST(url_host_port_db) {
    rjq__url u;
    parse_ok("redis://10.1.2.3:6380/5", &u);
    ASSERT_STREQ("10.1.2.3", u.host);
    ASSERT_EQ(6380, u.port);
    ASSERT_EQ(5, u.db);
    ASSERT_NULL(u.path);
    ASSERT_NULL(u.user);
    ASSERT_NULL(u.password);
    rjq__url_free(&u);
    ASSERT_NULL(u.host);

    parse_ok("redis://127.0.0.1", &u);
    ASSERT_STREQ("127.0.0.1", u.host);
    ASSERT_EQ(6379, u.port);
    ASSERT_EQ(0, u.db);
    rjq__url_free(&u);

    parse_ok("redis://127.0.0.1:1/", &u); /* trailing slash: db 0; port 1 ok */
    ASSERT_EQ(1, u.port);
    ASSERT_EQ(0, u.db);
    rjq__url_free(&u);

    parse_ok("redis://127.0.0.1:65535/15", &u);
    ASSERT_EQ(65535, u.port);
    ASSERT_EQ(15, u.db);
    rjq__url_free(&u);
}

TEST(url_defaults) {
    rjq__url u;
    parse_ok(NULL, &u);
    ASSERT_STREQ("127.0.0.1", u.host);
    ASSERT_EQ(6379, u.port);
    ASSERT_EQ(0, u.db);
    ASSERT_NULL(u.path);
    ASSERT_NULL(u.user);
    ASSERT_NULL(u.password);
    rjq__url_free(&u);
}

TEST(url_localhost) {
    rjq__url u;
    parse_ok("redis://localhost", &u);
    ASSERT_STREQ("localhost", u.host);
    ASSERT_EQ(0, u.numeric);
    ASSERT_EQ(6379, u.port);
    rjq__url_free(&u);
    parse_ok("redis://localhost:7000/2", &u);
    ASSERT_STREQ("localhost", u.host);
    ASSERT_EQ(7000, u.port);
    ASSERT_EQ(2, u.db);
    rjq__url_free(&u);
}

/* Host names are taken as written (the loop glue resolves them); numeric
 * addresses are marked as such. */
TEST(url_host_names) {
    static const char *names[] = {"redis", "redis.example.com", "my-host", "cache_1.internal",
                                  "redis.example.com.", "r2d2", "1a", "xn--bcher-kva.example"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char url[128];
        rjq__url u;
        snprintf(url, sizeof url, "redis://u:p@%s:6380/1", names[i]);
        parse_ok(url, &u);
        ASSERT_STREQ(names[i], u.host);
        ASSERT_EQ(0, u.numeric);
        ASSERT_EQ(6380, u.port);
        ASSERT_EQ(1, u.db);
        rjq__url_free(&u);
    }
    rjq__url u;
    parse_ok("redis://10.1.2.3", &u);
    ASSERT_EQ(1, u.numeric);
    rjq__url_free(&u);
    parse_ok("redis://[fd00::7]:7000", &u);
    ASSERT_EQ(1, u.numeric);
    ASSERT_STREQ("fd00::7", u.host);
    rjq__url_free(&u);
}

TEST(url_rediss_is_tls) {
    rjq__url u;
    parse_ok("rediss://alice:pw@redis.example.com:6380/3", &u);
    ASSERT_EQ(1, u.tls);
    ASSERT_STREQ("redis.example.com", u.host);
    ASSERT_STREQ("alice", u.user);
    ASSERT_STREQ("pw", u.password);
    ASSERT_EQ(6380, u.port);
    ASSERT_EQ(3, u.db);
    rjq__url_free(&u);
    parse_ok("redis://127.0.0.1", &u);
    ASSERT_EQ(0, u.tls);
    rjq__url_free(&u);
}

TEST(url_cluster_seed_list) {
    rjq__url u;
    parse_ok("rediss://app:pw@10.0.0.1:7000,node-b.example,[::1]:7002/0", &u);
    ASSERT_EQ(1, u.tls);
    ASSERT_EQ(3, u.nseeds);
    ASSERT_STREQ("10.0.0.1", u.seeds[0].host);
    ASSERT_EQ(7000, u.seeds[0].port);
    ASSERT_STREQ("node-b.example", u.seeds[1].host);
    ASSERT_EQ(6379, u.seeds[1].port);
    ASSERT_EQ(0, u.seeds[1].numeric);
    ASSERT_STREQ("::1", u.seeds[2].host);
    ASSERT_EQ(7002, u.seeds[2].port);
    ASSERT_STREQ("10.0.0.1", u.host); /* the first seed is the URL's host */
    ASSERT_EQ(7000, u.port);
    ASSERT_EQ(1, u.numeric);
    ASSERT_STREQ("app", u.user);
    rjq__url_free(&u);
    parse_ok("redis://127.0.0.1:7000", &u);
    ASSERT_EQ(0, u.nseeds); /* one host: no list */
    rjq__url_free(&u);
    expect_bad("redis://127.0.0.1:7000,,127.0.0.1:7001", "empty seed");
    expect_bad("redis://127.0.0.1:7000,", "empty seed");
    expect_bad("redis://127.0.0.1:7000,127.0.0.1:0", "port");
}

TEST(url_sentinel) {
    rjq__url u;
    parse_ok("redis+sentinel://app:pw@10.0.0.1,10.0.0.2:26380,[::1]:5000,localhost/mymaster/3", &u);
    ASSERT_STREQ("mymaster", u.master);
    ASSERT_EQ(4, u.nsentinels);
    ASSERT_STREQ("10.0.0.1", u.sentinels[0].host);
    ASSERT_EQ(26379, u.sentinels[0].port);
    ASSERT_EQ(26380, u.sentinels[1].port);
    ASSERT_STREQ("::1", u.sentinels[2].host);
    ASSERT_EQ(5000, u.sentinels[2].port);
    ASSERT_STREQ("localhost", u.sentinels[3].host);
    ASSERT_STREQ("app", u.user);
    ASSERT_STREQ("pw", u.password);
    ASSERT_EQ(3, u.db);
    ASSERT_NULL(u.host);
    rjq__url_free(&u);
    parse_ok("redis+sentinel://sentinel-0.redis:26379,10.0.0.9/m%2F1", &u);
    ASSERT_STREQ("sentinel-0.redis", u.sentinels[0].host);
    ASSERT_EQ(0, u.sentinels[0].numeric);
    ASSERT_EQ(1, u.sentinels[1].numeric);
    ASSERT_STREQ("m/1", u.master);
    ASSERT_EQ(0, u.db);
    rjq__url_free(&u);
}

TEST(url_err_sentinel) {
    expect_bad("redis+sentinel://127.0.0.1:26379", "names its master");
    expect_bad("redis+sentinel://127.0.0.1:26379/", "names its master");
    expect_bad("redis+sentinel://sentinel..example:26379/m", "host name");
    expect_bad("redis+sentinel://127.0.0.1:0/m", "port");
    expect_bad("redis+sentinel://127.0.0.1,,127.0.0.2/m", "empty sentinel");
    expect_bad("redis+sentinel://127.0.0.1/m/x", "database");
    expect_bad("redis+sentinel://1.1.1.1,1.1.1.2,1.1.1.3,1.1.1.4,1.1.1.5,1.1.1.6,1.1.1.7,1.1.1.8,1.1.1.9,"
               "1.1.1.10,1.1.1.11,1.1.1.12,1.1.1.13,1.1.1.14,1.1.1.15,1.1.1.16,1.1.1.17/m", "16");
}

TEST(url_user_password) {
    rjq__url u;
    parse_ok("redis://alice:s3cret@127.0.0.1:6379/1", &u);
    ASSERT_STREQ("alice", u.user);
    ASSERT_STREQ("s3cret", u.password);
    ASSERT_STREQ("127.0.0.1", u.host);
    ASSERT_EQ(1, u.db);
    rjq__url_free(&u);
    ASSERT_NULL(u.password);

    /* The password may hold ':' and, before the host, a raw '@'. */
    parse_ok("redis://bob:a:b@c@127.0.0.1", &u);
    ASSERT_STREQ("bob", u.user);
    ASSERT_STREQ("a:b@c", u.password);
    ASSERT_STREQ("127.0.0.1", u.host);
    rjq__url_free(&u);
}

TEST(url_legacy_password_only) {
    rjq__url u;
    parse_ok("redis://secret@127.0.0.1", &u);
    ASSERT_NULL(u.user);
    ASSERT_STREQ("secret", u.password);
    ASSERT_STREQ("127.0.0.1", u.host);
    rjq__url_free(&u);

    parse_ok("redis://secret@localhost:6390/3", &u);
    ASSERT_NULL(u.user);
    ASSERT_STREQ("secret", u.password);
    ASSERT_EQ(6390, u.port);
    ASSERT_EQ(3, u.db);
    rjq__url_free(&u);
}

TEST(url_empty_user) {
    rjq__url u;
    parse_ok("redis://:pw@127.0.0.1", &u);
    ASSERT_NULL(u.user);
    ASSERT_STREQ("pw", u.password);
    rjq__url_free(&u);
}

TEST(url_percent_decoding) {
    rjq__url u;
    parse_ok("redis://us%65r:p%40ss%3Aw%2F%25rd@127.0.0.1", &u);
    ASSERT_STREQ("user", u.user);
    ASSERT_STREQ("p@ss:w/%rd", u.password);
    rjq__url_free(&u);

    parse_ok("redis://:%7e%7E@127.0.0.1", &u); /* both hex cases */
    ASSERT_STREQ("~~", u.password);
    rjq__url_free(&u);

    parse_ok("redis://%41bc@127.0.0.1", &u); /* legacy form decodes too */
    ASSERT_NULL(u.user);
    ASSERT_STREQ("Abc", u.password);
    rjq__url_free(&u);
}

TEST(url_ipv6) {
    rjq__url u;
    parse_ok("redis://[::1]:6380", &u);
    ASSERT_STREQ("::1", u.host);
    ASSERT_EQ(6380, u.port);
    rjq__url_free(&u);

    parse_ok("redis://[::1]", &u);
    ASSERT_STREQ("::1", u.host);
    ASSERT_EQ(6379, u.port);
    rjq__url_free(&u);

    parse_ok("redis://u:p@[fe80::1:2]:7001/4", &u);
    ASSERT_STREQ("fe80::1:2", u.host);
    ASSERT_STREQ("u", u.user);
    ASSERT_STREQ("p", u.password);
    ASSERT_EQ(7001, u.port);
    ASSERT_EQ(4, u.db);
    rjq__url_free(&u);
}

TEST(url_unix) {
    rjq__url u;
    parse_ok("unix:///tmp/x.sock", &u);
    ASSERT_STREQ("/tmp/x.sock", u.path);
    ASSERT_NULL(u.host);
    ASSERT_EQ(0, u.db);
    rjq__url_free(&u);

    parse_ok("unix:///tmp/x.sock?db=3", &u);
    ASSERT_STREQ("/tmp/x.sock", u.path);
    ASSERT_NULL(u.host);
    ASSERT_EQ(3, u.db);
    rjq__url_free(&u);

    parse_ok("unix:///run/my%20redis.sock", &u);
    ASSERT_STREQ("/run/my redis.sock", u.path);
    rjq__url_free(&u);
}

TEST(url_err_scheme) {
    expect_bad("http://127.0.0.1:6379", "redis://");
    expect_bad("redisss://127.0.0.1:6379", "redis://");
    expect_bad("rediss:/127.0.0.1:6379", "redis://");
    expect_bad("REDIS://127.0.0.1", "redis://");
    expect_bad("127.0.0.1:6379", "redis://");
    expect_bad("", "redis://");
    expect_bad("redis:/127.0.0.1", "redis://");
}

TEST(url_err_hostname) {
    expect_bad("redis://exa mple.com", "host name");
    expect_bad("redis://-redis:6379/0", "host name");
    expect_bad("redis://redis-:6379/0", "host name");
    expect_bad("redis://a..b", "host name");
    expect_bad("redis://.", "host name");
    expect_bad("redis://r%41dis", "host name");
    expect_bad("redis://1.2.3", "host name");      /* not an IPv4 address, not a name */
    expect_bad("redis://256.1.1.1", "host name");
    expect_bad("redis://[localhost]", "IPv6");
    expect_bad("redis://[1.2.3.4]", "IPv6");
    char longlabel[128];
    snprintf(longlabel, sizeof longlabel, "redis://%064d.example", 0);
    longlabel[8] = 'x';
    expect_bad(longlabel, "host name");
}

TEST(url_err_port) {
    expect_bad("redis://127.0.0.1:0", "port");
    expect_bad("redis://127.0.0.1:65536", "port");
    expect_bad("redis://127.0.0.1:abc", "port");
    expect_bad("redis://127.0.0.1:", "port");
    expect_bad("redis://127.0.0.1:-1", "port");
    expect_bad("redis://127.0.0.1:6379x/0", "port");
    expect_bad("redis://127.0.0.1:99999999999", "port");
    expect_bad("redis://[::1]:0", "port");
    expect_bad("redis://[::1]:65536", "port");
}

TEST(url_err_percent) {
    expect_bad("redis://:p%zzw@127.0.0.1", "%");
    expect_bad("redis://:pw%4@127.0.0.1", "%");
    expect_bad("redis://:pw%@127.0.0.1", "%");
    expect_bad("redis://us%g1er:pw@127.0.0.1", "%");
    expect_bad("redis://%4@127.0.0.1", "%");
    expect_bad("unix:///tmp/a%2", "%");
}

TEST(url_err_ipv6) {
    expect_bad("redis://[::1", "IPv6");
    expect_bad("redis://[::1:6379/0", "IPv6");
    expect_bad("redis://[::1]x", NULL);
    expect_bad("redis://[]:6379", NULL);
}

TEST(url_err_db) {
    expect_bad("redis://127.0.0.1/abc", "database");
    expect_bad("redis://127.0.0.1:6379/-1", "database");
    expect_bad("redis://127.0.0.1/1x", "database");
    expect_bad("redis://127.0.0.1/0/", "database");
    expect_bad("redis://127.0.0.1/99999999999", "database");
    expect_bad("unix:///tmp/x.sock?db=x", "db");
    expect_bad("unix:///tmp/x.sock?db=", "db");
    expect_bad("unix:///tmp/x.sock?foo=1", "db");
}

TEST(url_err_unix_relative) {
    expect_bad("unix://relative", "absolute");
    expect_bad("unix://tmp/x.sock", "absolute");
    expect_bad("unix://", "absolute");
    expect_bad("unix://?db=1", "absolute");
}

/* issue 37: "redis://:secret@host:port?db=3" was refused with "port must
 * be 1..65535" (the query was read as part of the port). */
TEST(url_query_after_port) {
    rjq__url u;
    parse_ok("redis://:secret@127.0.0.1:6380?db=3", &u);
    ASSERT_STREQ("127.0.0.1", u.host);
    ASSERT_EQ(6380, u.port);
    ASSERT_NULL(u.user);
    ASSERT_STREQ("secret", u.password);
    ASSERT_EQ(3, u.db);
    ASSERT_EQ(0, u.timeout_ms);
    rjq__url_free(&u);

    parse_ok("rediss://localhost/?db=2", &u); /* a '/' before the '?' */
    ASSERT_EQ(1, u.tls);
    ASSERT_EQ(2, u.db);
    rjq__url_free(&u);

    parse_ok("redis://[::1]:7000?db=1", &u);
    ASSERT_STREQ("::1", u.host);
    ASSERT_EQ(7000, u.port);
    ASSERT_EQ(1, u.db);
    rjq__url_free(&u);

    parse_ok("redis://127.0.0.1:7000,127.0.0.1:7001?timeout=2", &u); /* seed nodes */
    ASSERT_EQ(2u, u.nseeds);
    ASSERT_EQ(7001, u.seeds[1].port);
    ASSERT_EQ(2000, u.timeout_ms);
    rjq__url_free(&u);

    parse_ok("redis://127.0.0.1?", &u); /* an empty query */
    ASSERT_EQ(0, u.db);
    rjq__url_free(&u);
}

TEST(url_query_user_password) {
    expect_auth("redis://127.0.0.1?username=alice&password=p%26w%3F", "alice", "p&w?");

    expect_auth("redis://127.0.0.1?password=pw", NULL, "pw"); /* legacy AUTH <password> */

    /* a lone word before '@' is the password, but the user when the query
     * gives the password (redis-py's unix://user@/path?password=) */
    expect_auth("redis://alice@127.0.0.1?password=pw", "alice", "pw");

    expect_auth("redis://:pw@127.0.0.1?username=alice", "alice", "pw");

    /* a user alone parses (the client options may give the password;
     * rjq_client_new refuses it otherwise) */
    expect_auth("redis://127.0.0.1?username=alice", "alice", NULL);
}

TEST(url_unix_userinfo_and_query) {
    rjq__url u;
    parse_ok("unix://alice:s%40cret@/tmp/r.sock?db=4&timeout=1500ms", &u);
    ASSERT_STREQ("/tmp/r.sock", u.path);
    ASSERT_NULL(u.host);
    ASSERT_STREQ("alice", u.user);
    ASSERT_STREQ("s@cret", u.password);
    ASSERT_EQ(4, u.db);
    ASSERT_EQ(1500, u.timeout_ms);
    rjq__url_free(&u);

    expect_auth("unix://:pw@/tmp/r.sock", NULL, "pw");

    expect_auth("unix://secret@/tmp/r.sock", NULL, "secret"); /* as redis:// */

    expect_auth("unix://alice@/tmp/r.sock?password=pw&protocol=2", "alice", "pw");

    parse_ok("unix:///tmp/a%3Fb.sock?db=1", &u); /* a '?' in the path, encoded */
    ASSERT_STREQ("/tmp/a?b.sock", u.path);
    ASSERT_EQ(1, u.db);
    rjq__url_free(&u);
}

TEST(url_sentinel_query) {
    rjq__url u;
    parse_ok("redis+sentinel://u:p@127.0.0.1:26380,[::1]/mymaster?db=2&timeout=0.25", &u);
    ASSERT_EQ(2u, u.nsentinels);
    ASSERT_STREQ("mymaster", u.master);
    ASSERT_STREQ("u", u.user);
    ASSERT_STREQ("p", u.password);
    ASSERT_EQ(2, u.db);
    ASSERT_EQ(250, u.timeout_ms);
    rjq__url_free(&u);

    parse_ok("redis+sentinel://127.0.0.1/mymaster/3?password=pw", &u);
    ASSERT_STREQ("mymaster", u.master);
    ASSERT_EQ(3, u.db);
    ASSERT_STREQ("pw", u.password);
    rjq__url_free(&u);
}

TEST(url_timeout_forms) {
    static const struct {
        const char *q;
        long ms;
    } ok[] = {{"timeout=2", 2000},        {"timeout=0.5", 500},    {"timeout=1.25", 1250},
              {"timeout=1500ms", 1500},   {"timeout=3s", 3000},    {"timeout=0.001", 1},
              {"timeout=86400", 86400000}, {"connect_timeout=4", 4000}, {"dial_timeout=5s", 5000},
              {"socket_connect_timeout=0.1", 100}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char url[128];
        snprintf(url, sizeof url, "redis://127.0.0.1?%s", ok[i].q);
        rjq__url u;
        parse_ok(url, &u);
        if (u.timeout_ms != ok[i].ms)
            FAIL_AT(__FILE__, __LINE__, "%s: %ld ms, expected %ld", url, u.timeout_ms, ok[i].ms);
        rjq__url_free(&u);
    }
    static const char *bad[] = {"timeout=0",      "timeout=0ms",   "timeout=-1",   "timeout=1.",
                                "timeout=.5",     "timeout=0.0001", "timeout=1.5ms", "timeout=2m",
                                "timeout=86401",  "timeout=1e3",   "timeout=s",    "timeout=ms",
                                "timeout=9999999999", "timeout=1 s"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char url[128];
        snprintf(url, sizeof url, "redis://127.0.0.1?%s", bad[i]);
        expect_bad(url, "timeout");
    }
}

TEST(url_err_query) {
    expect_bad("redis://127.0.0.1?protocol=3", "RESP2");
    expect_bad("redis://127.0.0.1?protocol=1", "protocol");
    expect_bad("redis://127.0.0.1?protocol=22", "protocol");
    expect_bad("redis://127.0.0.1?foo=1", "unknown query option 'foo'");
    expect_bad("redis://127.0.0.1?DB=1", "unknown query option");
    expect_bad("redis://127.0.0.1?db", "needs a value");
    expect_bad("redis://127.0.0.1?password=", "needs a value");
    expect_bad("redis://127.0.0.1?db=1&db=2", "twice");
    expect_bad("redis://127.0.0.1/1?db=2", "twice");
    expect_bad("redis://127.0.0.1/0?db=0", "twice");
    expect_bad("redis+sentinel://127.0.0.1/m/1?db=1", "twice");
    expect_bad("redis://:a@127.0.0.1?password=b", "twice");
    expect_bad("redis://u:a@127.0.0.1?username=v", "twice");
    expect_bad("redis://127.0.0.1?timeout=1&dial_timeout=2", "twice");
    expect_bad("redis://127.0.0.1?db=x", "db");
    expect_bad("redis://127.0.0.1?db=1048577", "db");
    expect_bad("redis://127.0.0.1?db=-1", "db");
    expect_bad("redis://127.0.0.1?password=%zz", "%");
    expect_bad("redis://127.0.0.1?username=a%00b&password=p", "%");
    expect_bad("redis://127.0.0.1?db=1#frag", "db");
    /* a raw '?' in a password ends the host part: refused, hinting %3F,
     * and the piece of the password is not echoed */
    rjq__url u;
    ASSERT_EQ(RJQ_EURL, rjq__url_parse("redis://:pa?ss@127.0.0.1", &u, err, sizeof err));
    ASSERT(strstr(err, "%3F") != NULL);
    ASSERT(strstr(err, "ss@") == NULL);
    ASSERT_EQ(RJQ_EURL, rjq__url_parse("redis://u:pa?SECRETWORD=1@h", &u, err, sizeof err));
    ASSERT(strstr(err, "SECRETWORD") == NULL);
}

TEST(url_err_unix_host) {
    expect_bad("unix://localhost/tmp/r.sock", "absolute path");
    expect_bad("unix://u:p@host/tmp/r.sock", "absolute path");
    expect_bad("unix://u:p@", "absolute path");
    expect_bad("unix://u:p@?db=1", "absolute path");
    expect_bad("unix:///tmp/r.sock?db=1&db=1", "twice");
}

/* redis+sentinel:///m (no sentinel at all) was taken, leaving a client
 * with nsentinels 0 to divide by; a trailing ',' was dropped silently. */
TEST(url_err_sentinel_none) {
    expect_bad("redis+sentinel:///m", "empty sentinel");
    expect_bad("redis+sentinel://u:p@/m", "empty sentinel");
    expect_bad("redis+sentinel://127.0.0.1,/m", "empty sentinel");
    expect_bad("redis+sentinel://,127.0.0.1/m", "empty sentinel");
    expect_bad("redis://127.0.0.1,", "empty seed");
}

/* A tiny err buffer truncates the message but stays NUL-terminated. */
TEST(url_err_small_buffer) {
    rjq__url u;
    char small[8];
    memset(small, 'x', sizeof small);
    ASSERT_EQ(RJQ_EURL, rjq__url_parse("ftp://x", &u, small, sizeof small));
    ASSERT(memchr(small, '\0', sizeof small) != NULL);
    ASSERT(strlen(small) == sizeof small - 1);
}

/* Parse/free many times: leaks show under valgrind / ASan. */
TEST(url_parse_free_loop) {
    static const char *good[] = {
        NULL, "redis://alice:pw@127.0.0.1:6380/2", "redis://secret@localhost",
        "redis://:p%40@[::1]:6380", "unix:///tmp/x.sock?db=3",
        "redis+sentinel://u:p@127.0.0.1,[::1]:26380/m/2",
        "unix://u:p@/tmp/x.sock?db=3&timeout=2", "redis://a@127.0.0.1?password=b&db=1"};
    static const char *bad[] = {
        "redis://:a@127.0.0.1?password=b", "unix://u:p@/x?username=v", "redis://x?protocol=3",
        "redis://alice:pw@exa$mple.com", "redis://u:p@127.0.0.1:0",
        "redis://u:p@127.0.0.1/abc", "redis://u:%zz@127.0.0.1",
        "redis://us%zz:p@127.0.0.1", "redis://u:p@[::1", "unix:///x?db=z",
        "redis+sentinel://u:p@127.0.0.1,x y/m", "redis+sentinel://127.0.0.1/m/db"};
    for (int round = 0; round < 50; round++) {
        for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
            rjq__url u;
            parse_ok(good[i], &u);
            rjq__url_free(&u);
        }
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            rjq__url u;
            ASSERT_EQ(RJQ_EURL, rjq__url_parse(bad[i], &u, err, sizeof err));
        }
    }
}

/* Each allocation of a parse made to fail in turn (once, then from there
 * on): every failing parse returns RJQ_ENOMEM with "out of memory" and an
 * empty *out, having freed what it had allocated (LeakSanitizer checks
 * that in the ASan build). */
TEST(url_parse_frees_everything_when_allocation_fails) {
    static const struct {
        const char *url;
        long strings; /* allocations a parse makes at least: its strings */
    } cases[] = {
        {NULL, 1},
        {"redis://alice:s3cret@127.0.0.1:6380/2", 3},
        {"redis://us%65r:p%40ss@[::1]:6380", 3},
        {"redis://secret@localhost/3", 2},
        {"redis://:pw@127.0.0.1", 2},
        {"redis+sentinel://u:p@127.0.0.1,[::1]:26380/m/2", 6},
        {"unix:///tmp/x%20y.sock?db=3", 1},
        {"unix://u:p@/tmp/x.sock?db=3", 3},
        {"redis://u@127.0.0.1?password=p%20w&timeout=2", 3},
        {"redis://127.0.0.1?username=u&password=p", 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *url = cases[i].url ? cases[i].url : "(null)";
        for (int from = 0; from <= 1; from++) {
            long n;
            for (n = 0;; n++) {
                rjq__url u;
                memset(&u, 0x5a, sizeof u); /* garbage in: must come out empty */
                memset(err, 0, sizeof err);
                if (from)
                    failalloc_arm_from(n);
                else
                    failalloc_arm_once(n);
                int rc = rjq__url_parse(cases[i].url, &u, err, sizeof err);
                failalloc_disarm();
                if (failalloc_failures() == 0) { /* needed no more than n */
                    if (rc != RJQ_OK)
                        FAIL_AT(__FILE__, __LINE__, "parse(\"%s\") = %d (%s) without a failed allocation",
                                url, rc, err);
                    rjq__url_free(&u);
                    break;
                }
                if (rc != RJQ_ENOMEM)
                    FAIL_AT(__FILE__, __LINE__, "parse(\"%s\"), allocation %ld failing: %d, expected RJQ_ENOMEM",
                            url, n, rc);
                if (strcmp(err, "out of memory") != 0)
                    FAIL_AT(__FILE__, __LINE__, "parse(\"%s\"), allocation %ld failing: message \"%s\"",
                            url, n, err);
                if (u.host || u.path || u.user || u.password || u.db != 0)
                    FAIL_AT(__FILE__, __LINE__, "parse(\"%s\"), allocation %ld failing: *out not left empty",
                            url, n);
            }
            if (n < cases[i].strings) /* the wrapping is not in place */
                FAIL_AT(__FILE__, __LINE__, "parse(\"%s\"): %ld allocations seen, expected %ld or more",
                        url, n, cases[i].strings);
        }
    }
}
