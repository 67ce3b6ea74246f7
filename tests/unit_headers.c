/* Unit tests for job headers' checks, text and reading back
 * (src/headers.c). No Redis. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "headers.h"

TEST(headers_text_reads_back_as_given) {
    const rjq_header h[] = {{"traceparent", "00-ab-cd-01"}, {"k", ""}, {"x.y-z_1", "a=b c"}};
    char why[160];
    ASSERT_OK(rjq__headers_check(h, 3, why, sizeof why));
    size_t len = rjq__headers_text_len(h, 3);
    char text[128];
    ASSERT(len < sizeof text);
    rjq__headers_text(h, 3, text);
    ASSERT_EQ(0, memcmp("traceparent=00-ab-cd-01\nk=\nx.y-z_1=a=b c", text, len));
    size_t n;
    rjq_header *back = rjq__headers_read(text, len, &n, NULL);
    ASSERT(back != NULL);
    ASSERT_EQ(3, (long)n);
    for (size_t i = 0; i < 3; i++) {
        ASSERT_STREQ(h[i].key, back[i].key);
        ASSERT_STREQ(h[i].value, back[i].value);
    }
    free(back);
    rjq_header *dup = rjq__headers_dup(h, 3);
    ASSERT(dup != NULL);
    ASSERT_STREQ("a=b c", dup[2].value);
    free(dup);
}

/* bytes from the network: what is no header is skipped, never trusted */
TEST(headers_read_skips_what_is_no_header) {
    const char *cases[] = {"", "=v", "no-equals", "bad key=v", "k=\x01", "k=caf\xc3\xa9", "\n\n"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = 99;
        int oom = 7;
        ASSERT(rjq__headers_read(cases[i], strlen(cases[i]), &n, &oom) == NULL);
        ASSERT_EQ(0, (long)n);
        ASSERT_EQ(0, oom);
    }
    const char mixed[] = "a=1\nbad\na=2\n=x\nb=\x7f\nc=3\n";
    size_t n;
    rjq_header *h = rjq__headers_read(mixed, sizeof mixed - 1, &n, NULL);
    ASSERT(h != NULL);
    ASSERT_EQ(2, (long)n); /* a (its first), c */
    ASSERT_STREQ("a", h[0].key);
    ASSERT_STREQ("1", h[0].value);
    ASSERT_STREQ("c", h[1].key);
    free(h);
    /* a NUL inside is no printable byte: that line goes */
    const char nul[] = "a=x\0y\nb=2";
    h = rjq__headers_read(nul, sizeof nul - 1, &n, NULL);
    ASSERT(h != NULL);
    ASSERT_EQ(1, (long)n);
    ASSERT_STREQ("b", h[0].key);
    free(h);
    /* at most RJQ_HEADERS_MAX */
    char many[RJQ_HEADERS_MAX * 8 + 16] = "";
    for (int i = 0; i < RJQ_HEADERS_MAX + 3; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "k%d=v\n", i);
    h = rjq__headers_read(many, strlen(many), &n, NULL);
    ASSERT(h != NULL);
    ASSERT_EQ(RJQ_HEADERS_MAX, (long)n);
    free(h);
}

TEST(a_jobs_options_text_with_headers_spells_out_default_options) {
    const rjq_header h[] = {{"traceparent", "00-ab-cd-01"}, {"k", "v"}};
    rjq_job_options o = RJQ_JOB_OPTIONS_INIT;
    char opts[64] = "", why[160];
    /* no headers: nothing checked, the options left as they are */
    ASSERT_OK(rjq__headers_options_check(&o, opts, why, sizeof why));
    ASSERT_STREQ("", opts);
    /* headers: the empty options spelt out, so their text has options to follow */
    o.headers = h;
    o.nheaders = 2;
    ASSERT_OK(rjq__headers_options_check(&o, opts, why, sizeof why));
    ASSERT_STREQ("0,0,3,", opts);
    size_t len = 0;
    char *t = rjq__headers_options_text(opts, h, 2, &len);
    ASSERT(t != NULL);
    ASSERT_EQ((long)strlen("0,0,3,\ntraceparent=00-ab-cd-01\nk=v"), (long)len);
    ASSERT_EQ(0, memcmp("0,0,3,\ntraceparent=00-ab-cd-01\nk=v", t, len));
    free(t);
    /* given options stay */
    strcpy(opts, "5,1,2,");
    ASSERT_OK(rjq__headers_options_check(&o, opts, why, sizeof why));
    ASSERT_STREQ("5,1,2,", opts);
    /* headers without a count, or bad ones: refused with a reason */
    o.nheaders = 0;
    ASSERT_EQ(RJQ_EINVAL, rjq__headers_options_check(&o, opts, why, sizeof why));
    ASSERT(strstr(why, "nheaders 0") != NULL);
    const rjq_header bad[] = {{"a=b", "v"}};
    o.headers = bad;
    o.nheaders = 1;
    ASSERT_EQ(RJQ_EINVAL, rjq__headers_options_check(&o, opts, why, sizeof why));
    ASSERT(strstr(why, "key") != NULL);
}

TEST(headers_check_limits) {
    char why[160];
    rjq_header h[RJQ_HEADERS_MAX + 1];
    char keys[RJQ_HEADERS_MAX + 1][8];
    for (int i = 0; i <= RJQ_HEADERS_MAX; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i);
        h[i] = (rjq_header){keys[i], "v"};
    }
    ASSERT_OK(rjq__headers_check(h, RJQ_HEADERS_MAX, why, sizeof why));
    ASSERT_EQ(RJQ_EINVAL, rjq__headers_check(h, RJQ_HEADERS_MAX + 1, why, sizeof why));
    ASSERT_OK(rjq__headers_check(NULL, 0, why, sizeof why));
    ASSERT_EQ(RJQ_EINVAL, rjq__headers_check(NULL, 1, why, sizeof why));
    char key[RJQ_HEADER_KEY_MAX + 2], value[RJQ_HEADER_VALUE_MAX + 2];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    memset(value, ' ', sizeof value - 1);
    value[sizeof value - 1] = '\0';
    rjq_header one = {key + 1, value + 1}; /* at the limits */
    ASSERT_OK(rjq__headers_check(&one, 1, why, sizeof why));
    one.key = key;
    ASSERT_EQ(RJQ_EINVAL, rjq__headers_check(&one, 1, why, sizeof why));
    one.key = "k", one.value = value;
    ASSERT_EQ(RJQ_EINVAL, rjq__headers_check(&one, 1, why, sizeof why));
    const rjq_header twice[] = {{"a", "1"}, {"a", "2"}};
    ASSERT_EQ(RJQ_EINVAL, rjq__headers_check(twice, 2, why, sizeof why));
    ASSERT(strstr(why, "twice") != NULL);
}
