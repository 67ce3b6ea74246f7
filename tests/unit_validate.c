/* Unit tests for validation, option encoding, error mapping, strerror and
 * version (src/validate.c, src/error.c). No Redis. */
#include <ctype.h>
#include <limits.h>

#include "harness.h"
#include "validate.h"

static char *repeat(char ch, size_t n) {
    char *s = malloc(n + 1);
    ASSERT(s != NULL);
    memset(s, ch, n);
    s[n] = '\0';
    return s;
}

/* ---- queue names ------------------------------------------------------ */

TEST(queue_name_valid) {
    ASSERT(rjq__valid_queue_name("q"));
    ASSERT(rjq__valid_queue_name("emails"));
    ASSERT(rjq__valid_queue_name("a.b-c_d:e/f"));
    ASSERT(rjq__valid_queue_name("UPPER123"));
    ASSERT(rjq__valid_queue_name("~!@#$%^&*()[]<>|\\\"'`"));
    ASSERT(rjq__valid_queue_name("caf\xc3\xa9")); /* UTF-8 bytes are fine */
}

TEST(queue_name_invalid) {
    ASSERT(!rjq__valid_queue_name(NULL));
    ASSERT(!rjq__valid_queue_name(""));
    ASSERT(!rjq__valid_queue_name("{q}"));
    ASSERT(!rjq__valid_queue_name("a{b"));
    ASSERT(!rjq__valid_queue_name("a}b"));
    ASSERT(!rjq__valid_queue_name("has space"));
    ASSERT(!rjq__valid_queue_name(" lead"));
    ASSERT(!rjq__valid_queue_name("trail "));
    ASSERT(!rjq__valid_queue_name("tab\there"));
    ASSERT(!rjq__valid_queue_name("nl\n"));
    ASSERT(!rjq__valid_queue_name("\x01"));
    ASSERT(!rjq__valid_queue_name("del\x7f"));
}

TEST(queue_name_length) {
    char *s200 = repeat('q', 200), *s201 = repeat('q', 201), *s1 = repeat('q', 1);
    ASSERT(rjq__valid_queue_name(s1));
    ASSERT(rjq__valid_queue_name(s200));
    ASSERT(!rjq__valid_queue_name(s201));
    free(s1);
    free(s200);
    free(s201);
}

/* ---- job ids ------------------------------------------------------------ */

TEST(job_id_valid) {
    ASSERT(rjq__valid_job_id("a"));
    ASSERT(rjq__valid_job_id("order-42"));
    ASSERT(rjq__valid_job_id("42a"));
    ASSERT(rjq__valid_job_id("a42"));
    ASSERT(rjq__valid_job_id("4-2"));
    ASSERT(rjq__valid_job_id("-1"));   /* not all digits */
    ASSERT(rjq__valid_job_id("1.5"));
    ASSERT(rjq__valid_job_id("{braces}ok")); /* braces are fine in ids */
    ASSERT(rjq__valid_job_id("uuid:0b6f4a7e-3d2c-4e1b-9f0a-1c2d3e4f5a6b"));
}

/* index field names (rjq_queue_set_index) and a declaration as stored in
 * the queue's settings, read back by producers (enqueue.c learn) */
TEST(index_field_names_and_declarations) {
    ASSERT(rjq__valid_index_field("customer_id", 11));
    ASSERT(rjq__valid_index_field("a.b-c_9", 7));
    ASSERT(!rjq__valid_index_field("", 0));
    ASSERT(!rjq__valid_index_field(NULL, 1));
    ASSERT(!rjq__valid_index_field("a b", 3));
    ASSERT(!rjq__valid_index_field("a\"b", 3));
    ASSERT(!rjq__valid_index_field("a\0b", 3));
    char name[RJQ_INDEX_FIELD_MAX + 1];
    memset(name, 'x', sizeof name);
    ASSERT(rjq__valid_index_field(name, RJQ_INDEX_FIELD_MAX));
    ASSERT(!rjq__valid_index_field(name, RJQ_INDEX_FIELD_MAX + 1));
    ASSERT(rjq__valid_index_fields("", 0)); /* none */
    ASSERT(rjq__valid_index_fields("a", 1));
    ASSERT(rjq__valid_index_fields("a b c d", 7));
    ASSERT(!rjq__valid_index_fields("a b c d e", 9)); /* more than RJQ_INDEX_FIELDS_MAX */
    ASSERT(!rjq__valid_index_fields("a  b", 4));
    ASSERT(!rjq__valid_index_fields(" a", 2));
    ASSERT(!rjq__valid_index_fields("a ", 2));
    ASSERT(!rjq__valid_index_fields("a\nb", 3));
}

TEST(job_id_invalid) {
    ASSERT(!rjq__valid_job_id(NULL));
    ASSERT(!rjq__valid_job_id(""));
    ASSERT(!rjq__valid_job_id("0"));
    ASSERT(!rjq__valid_job_id("12345"));
    ASSERT(!rjq__valid_job_id("007"));
    ASSERT(!rjq__valid_job_id("has space"));
    ASSERT(!rjq__valid_job_id("a "));
    ASSERT(!rjq__valid_job_id("a\tb"));
    ASSERT(!rjq__valid_job_id("a\nb"));
    ASSERT(!rjq__valid_job_id("a\x7f"));
}

TEST(job_id_length) {
    char *s200 = repeat('j', 200), *s201 = repeat('j', 201);
    ASSERT(rjq__valid_job_id(s200));
    ASSERT(!rjq__valid_job_id(s201));
    char *d200 = repeat('7', 200);
    ASSERT(!rjq__valid_job_id(d200)); /* all digits, even at max length */
    d200[199] = 'x';
    ASSERT(rjq__valid_job_id(d200));
    free(s200);
    free(s201);
    free(d200);
}

/* ---- job options -------------------------------------------------------- */

/* What enqueue.lua does with the string:
 *   string.match(opts, '^(%d+),(%-?%d+),(%d+),([^;]*);?(%d*);?(%d*);?(%d*)$')
 * and, for the backoff part, lib.lua's backoff_ms:
 *   string.match(spec, '^(%a),(%d+),(%d+)$')
 * Returns 1 when `s` matches; fills the fields. */
static int digits(const char **p, int allow_minus, long long *out) {
    const char *s = *p;
    int neg = 0;
    if (allow_minus && *s == '-') neg = 1, s++;
    if (!isdigit((unsigned char)*s)) return 0;
    long long v = 0;
    while (isdigit((unsigned char)*s)) v = v * 10 + (*s++ - '0');
    *out = neg ? -v : v;
    *p = s;
    return 1;
}

static int lua_match_opts(const char *s, long long *delay, long long *prio,
                          long long *attempts, char *backoff, size_t blen, long long tail[3]) {
    if (!digits(&s, 0, delay) || *s++ != ',') return 0;
    if (!digits(&s, 1, prio) || *s++ != ',') return 0;
    if (!digits(&s, 0, attempts) || *s++ != ',') return 0;
    size_t n = strcspn(s, ";");
    if (n >= blen) return 0;
    memcpy(backoff, s, n);
    backoff[n] = '\0';
    s += n;
    for (int i = 0; i < 3; i++) { /* timeout, dedup, debounce: ";digits" each, all optional */
        tail[i] = 0;
        if (*s == ';') s++;
        if (isdigit((unsigned char)*s) && !digits(&s, 0, &tail[i])) return 0;
        if (*s && *s != ';') return 0;
    }
    return *s == '\0';
}

static int lua_match_backoff(const char *s, char *kind, long long *base, long long *cap) {
    if (!isalpha((unsigned char)s[0]) || s[1] != ',') return 0;
    *kind = s[0];
    s += 2;
    if (!digits(&s, 0, base) || *s++ != ',') return 0;
    if (!digits(&s, 0, cap) || *s != '\0') return 0;
    return 1;
}

static void expect_encoding_at(const char *file, int line, const rjq_job_options *o,
                               const char *want) {
    char buf[RJQ__OPTS_MAX];
    memset(buf, 'X', sizeof buf);
    int rc = rjq__encode_job_options(o, buf);
    if (rc != RJQ_OK) FAIL_AT(file, line, "encode returned %d", rc);
    if (strcmp(buf, want) != 0)
        FAIL_AT(file, line, "encoded \"%s\", expected \"%s\"", buf, want);
    if (buf[0] == '\0') return;
    /* Parse it the way the scripts do and compare with the inputs. */
    long long d, p, m, t[3];
    char b[RJQ__OPTS_MAX];
    if (!lua_match_opts(buf, &d, &p, &m, b, sizeof b, t))
        FAIL_AT(file, line, "\"%s\" does not match enqueue.lua's pattern", buf);
    if (d != o->delay_ms || p != o->priority || m != (o->max_attempts ? o->max_attempts : 3) ||
        t[0] != o->timeout_ms || t[1] != o->dedup_ms || t[2] != (o->debounce ? 1 : 0))
        FAIL_AT(file, line, "\"%s\" does not round-trip", buf);
    if (b[0] != '\0') {
        char kind;
        long long base, cap;
        if (!lua_match_backoff(b, &kind, &base, &cap))
            FAIL_AT(file, line, "backoff \"%s\" does not match lib.lua's pattern", b);
        if (kind != 'e' && kind != 'f') FAIL_AT(file, line, "backoff kind '%c'", kind);
    }
}
#define expect_encoding(o, want) expect_encoding_at(__FILE__, __LINE__, o, want)

static void expect_einval_at(const char *file, int line, const rjq_job_options *o) {
    char buf[RJQ__OPTS_MAX];
    int rc = rjq__encode_job_options(o, buf);
    if (rc != RJQ_EINVAL) FAIL_AT(file, line, "encode returned %d, expected RJQ_EINVAL", rc);
}
#define expect_einval(o) expect_einval_at(__FILE__, __LINE__, o)

TEST(encode_defaults) {
    char buf[RJQ__OPTS_MAX];
    memset(buf, 'X', sizeof buf);
    ASSERT_OK(rjq__encode_job_options(NULL, buf));
    ASSERT_STREQ("", buf);
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    expect_encoding(&o, "");
    o.max_attempts = 3; /* the default, spelled out */
    expect_encoding(&o, "");
    o.id = "my-id"; /* the id is not part of the encoding */
    expect_encoding(&o, "");
}

TEST(encode_delay_priority_attempts) {
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.delay_ms = 5000;
    expect_encoding(&o, "5000,0,3,");
    o = (rjq_job_options){.size = sizeof(rjq_job_options)};
    o.priority = 7;
    expect_encoding(&o, "0,7,3,");
    o.priority = -7;
    expect_encoding(&o, "0,-7,3,");
    o.priority = RJQ_PRIORITY_MAX;
    expect_encoding(&o, "0,1000000,3,");
    o.priority = RJQ_PRIORITY_MIN;
    expect_encoding(&o, "0,-1000000,3,");
    o = (rjq_job_options){.size = sizeof(rjq_job_options)};
    o.max_attempts = 1;
    expect_encoding(&o, "0,0,1,");
    o.max_attempts = 10;
    expect_encoding(&o, "0,0,10,");
    o.max_attempts = INT_MAX;
    expect_encoding(&o, "0,0,2147483647,");
    o = (rjq_job_options){.size = sizeof(rjq_job_options)};
    o.delay_ms = RJQ_DELAY_MAX; /* the largest delay: 100 years */
    expect_encoding(&o, "3153600000000,0,3,");
    o.delay_ms = RJQ_DELAY_MAX + 1; /* beyond it the server's %d would overflow */
    expect_einval(&o);
    o.delay_ms = LLONG_MAX;
    expect_einval(&o);
    o = (rjq_job_options){.size = sizeof(rjq_job_options)};
    o.delay_ms = 250;
    o.priority = -3;
    o.max_attempts = 5;
    expect_encoding(&o, "250,-3,5,");
}

TEST(encode_backoff) {
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.backoff.type = RJQ_BACKOFF_FIXED;
    expect_encoding(&o, "0,0,3,f,1000,0");
    o.backoff.base_ms = 250;
    expect_encoding(&o, "0,0,3,f,250,0");
    o.backoff.max_ms = 9999; /* ignored for fixed */
    expect_encoding(&o, "0,0,3,f,250,0");

    o = (rjq_job_options){.size = sizeof(rjq_job_options)};
    o.backoff.type = RJQ_BACKOFF_EXPONENTIAL;
    expect_encoding(&o, "0,0,3,e,1000,3600000");
    o.backoff.base_ms = 100;
    expect_encoding(&o, "0,0,3,e,100,3600000");
    o.backoff.max_ms = 60000;
    expect_encoding(&o, "0,0,3,e,100,60000");

    /* DEFAULT with custom numbers is exponential with them. */
    o = (rjq_job_options){.size = sizeof(rjq_job_options)};
    o.backoff.base_ms = 500;
    expect_encoding(&o, "0,0,3,e,500,3600000");
    o = (rjq_job_options){.size = sizeof(rjq_job_options)};
    o.backoff.max_ms = 10000;
    expect_encoding(&o, "0,0,3,e,1000,10000");

    /* Combined with the other fields. */
    o = (rjq_job_options){.size = sizeof(rjq_job_options)};
    o.delay_ms = 1;
    o.priority = 2;
    o.max_attempts = 4;
    o.backoff.type = RJQ_BACKOFF_FIXED;
    o.backoff.base_ms = 30;
    expect_encoding(&o, "1,2,4,f,30,0");
}

TEST(encode_timeout) {
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.timeout_ms = 5000;
    expect_encoding(&o, "0,0,3,;5000");
    o.delay_ms = 1;
    o.priority = 2;
    o.max_attempts = 4;
    o.backoff.type = RJQ_BACKOFF_FIXED;
    o.backoff.base_ms = 30;
    expect_encoding(&o, "1,2,4,f,30,0;5000");
    o.timeout_ms = RJQ_DELAY_MAX;
    expect_encoding(&o, "1,2,4,f,30,0;3153600000000");
    o.timeout_ms = RJQ_DELAY_MAX + 1;
    expect_einval(&o);
    o.timeout_ms = -1;
    expect_einval(&o);
}

TEST(encode_dedup_and_debounce) {
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.id = "x";
    o.dedup_ms = 60000;
    expect_encoding(&o, "0,0,3,;;60000");
    o.timeout_ms = 500;
    expect_encoding(&o, "0,0,3,;500;60000");
    o.debounce = 1;
    expect_encoding(&o, "0,0,3,;500;60000;1");
    o.timeout_ms = o.dedup_ms = 0;
    o.delay_ms = 2000;
    expect_encoding(&o, "2000,0,3,;;;1");
    o.id = NULL; /* both need an id */
    expect_einval(&o);
    o.debounce = 0;
    o.dedup_ms = 5;
    expect_einval(&o);
    o.id = "x";
    o.dedup_ms = -1;
    expect_einval(&o);
    o.dedup_ms = RJQ_DELAY_MAX + 1;
    expect_einval(&o);
}

TEST(encode_invalid) {
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    o.priority = RJQ_PRIORITY_MAX + 1;
    expect_einval(&o);
    o.priority = RJQ_PRIORITY_MIN - 1;
    expect_einval(&o);
    o.priority = INT_MAX;
    expect_einval(&o);
    o.priority = INT_MIN;
    expect_einval(&o);
    o = (rjq_job_options){.size = sizeof(rjq_job_options)};
    o.delay_ms = -1;
    expect_einval(&o);
    o.delay_ms = LLONG_MIN;
    expect_einval(&o);
    o = (rjq_job_options){.size = sizeof(rjq_job_options)};
    o.max_attempts = -1;
    expect_einval(&o);
    o = (rjq_job_options){.size = sizeof(rjq_job_options)};
    o.backoff.type = (rjq_backoff_type)3;
    expect_einval(&o);
    o.backoff.type = (rjq_backoff_type)-1;
    expect_einval(&o);
    o = (rjq_job_options){.size = sizeof(rjq_job_options)};
    o.backoff.type = RJQ_BACKOFF_EXPONENTIAL;
    o.backoff.base_ms = -1;
    expect_einval(&o);
    o.backoff.base_ms = 0;
    o.backoff.max_ms = -5;
    expect_einval(&o);
    o = (rjq_job_options){.size = sizeof(rjq_job_options)};
    o.backoff.type = RJQ_BACKOFF_FIXED;
    o.backoff.base_ms = -100;
    expect_einval(&o);
}

/* ---- Redis error text -> code --------------------------------------------- */

TEST(redis_error_mapping) {
    ASSERT_EQ(RJQ_EWRONGTYPE,
              rjq__redis_error_code("WRONGTYPE Operation against a key holding the wrong kind of value"));
    /* rjq's own expect_types() error (lib.lua) */
    ASSERT_EQ(RJQ_EWRONGTYPE,
              rjq__redis_error_code("WRONGTYPE rjq:{q}:ready holds a string, rjq expects a list"));
    /* Redis 6.2 wraps errors raised inside scripts */
    ASSERT_EQ(RJQ_EWRONGTYPE,
              rjq__redis_error_code("ERR Error running script (call to f_0123456789abcdef0123456789abcdef01234567): "
                                    "@user_script:12: WRONGTYPE Operation against a key holding the wrong kind of value"));
    /* Redis 7 appends the script location instead */
    ASSERT_EQ(RJQ_EWRONGTYPE,
              rjq__redis_error_code("WRONGTYPE Operation against a key holding the wrong kind of value "
                                    "script: 0123, on @user_script:12."));
    ASSERT_EQ(RJQ_EOOM,
              rjq__redis_error_code("OOM command not allowed when used memory > 'maxmemory'."));
    ASSERT_EQ(RJQ_EOOM,
              rjq__redis_error_code("ERR Error running script (call to f_abc): @user_script:3: "
                                    "OOM command not allowed when used memory > 'maxmemory'."));
    ASSERT_EQ(RJQ_EAUTH, rjq__redis_error_code("NOAUTH Authentication required."));
    ASSERT_EQ(RJQ_EAUTH,
              rjq__redis_error_code("WRONGPASS invalid username-password pair or user is disabled."));
    ASSERT_EQ(RJQ_EAUTH,
              rjq__redis_error_code("NOPERM this user has no permissions to run the 'evalsha' command"));
    ASSERT_EQ(RJQ_EAUTH, rjq__redis_error_code("ERR invalid password"));
    /* a script's command or key the ACL refuses (Redis 7) */
    ASSERT_EQ(RJQ_EAUTH, rjq__redis_error_code("ERR The user executing the script can't run this "
                                               "command or subcommand script: 4a16..., on "
                                               "@user_script:1."));
    ASSERT_EQ(RJQ_EAUTH, rjq__redis_error_code("ERR The user executing the script can't access at "
                                               "least one of the keys mentioned in the command"));
    ASSERT_EQ(RJQ_EREDIS, rjq__redis_error_code("ERR unknown command 'FOO'"));
    ASSERT_EQ(RJQ_EREDIS, rjq__redis_error_code("NOSCRIPT No matching script. Please use EVAL."));
    ASSERT_EQ(RJQ_EREDIS, rjq__redis_error_code("BUSY Redis is busy running a script."));
    ASSERT_EQ(RJQ_EREDIS, rjq__redis_error_code("LOADING Redis is loading the dataset in memory"));
    ASSERT_EQ(RJQ_EREDIS, rjq__redis_error_code("READONLY You can't write against a read only replica."));
    ASSERT_EQ(RJQ_EREDIS, rjq__redis_error_code(""));
    ASSERT_EQ(RJQ_EREDIS, rjq__redis_error_code(NULL));
}

/* ---- rjq_strerror and rjq_version ------------------------------------------ */

TEST(strerror_all_codes) {
    static const int codes[] = {
#define XX(name, num, msg) RJQ_##name,
        RJQ_ERRNO_MAP(XX)
#undef XX
    };
    static const char *msgs[] = {
#define XX(name, num, msg) msg,
        RJQ_ERRNO_MAP(XX)
#undef XX
    };
    size_t n = sizeof codes / sizeof codes[0];
    ASSERT_EQ(25, n);
    const char *ok = rjq_strerror(RJQ_OK);
    ASSERT(ok != NULL && ok[0] != '\0');
    ASSERT(strcmp(ok, "unknown error") != 0);
    for (size_t i = 0; i < n; i++) {
        ASSERT_EQ(-(long long)(i + 1), codes[i]); /* dense: -1..-25 */
        const char *s = rjq_strerror(codes[i]);
        ASSERT(s != NULL && s[0] != '\0');
        ASSERT_STREQ(msgs[i], s);
        ASSERT(strcmp(s, "unknown error") != 0);
        ASSERT(strcmp(s, ok) != 0);
        for (size_t j = 0; j < i; j++) ASSERT(strcmp(s, rjq_strerror(codes[j])) != 0);
    }
    ASSERT_STREQ("invalid Redis URL", rjq_strerror(RJQ_EURL));
}

TEST(strerror_unknown) {
    static const int unknown[] = {1, 2, 17, -26, -100, 1000, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
        ASSERT_STREQ("unknown error", rjq_strerror(unknown[i]));
}

TEST(version_matches_macros) {
    ASSERT_EQ(RJQ_VERSION_MAJOR * 10000 + RJQ_VERSION_MINOR * 100 + RJQ_VERSION_PATCH,
              rjq_version());
    ASSERT(RJQ_VERSION_MINOR < 100 && RJQ_VERSION_PATCH < 100);
    char want[32], got[32];
    snprintf(want, sizeof want, "%d.%d.%d", RJQ_VERSION_MAJOR, RJQ_VERSION_MINOR,
             RJQ_VERSION_PATCH);
    int v = rjq_version();
    snprintf(got, sizeof got, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    ASSERT_STREQ(want, got);
}
