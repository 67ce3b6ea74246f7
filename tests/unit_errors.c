/*
 * rjq_err_name() and rjq_strerror() for every code of rjq.h. The list of
 * codes is read from the header itself (its RJQ_ERRNO_MAP lines, and every
 * RJQ_E... name it mentions), not from the library: a code added to the
 * header without a name or a description, or a name the header mentions
 * that is no code, fails here.
 */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "rjq.h"

#define CODES_MAX 200

typedef struct code {
    char name[64];   /* "RJQ_ETIMEDOUT" */
    int value;       /* -5 */
} code;

static char *read_header(void) {
    FILE *f = fopen(RJQ_SOURCE_DIR "/include/rjq.h", "rb");
    ASSERT(f != NULL);
    ASSERT(fseek(f, 0, SEEK_END) == 0);
    long n = ftell(f);
    ASSERT(n > 0);
    rewind(f);
    char *text = malloc((size_t)n + 1);
    ASSERT(text != NULL);
    ASSERT(fread(text, 1, (size_t)n, f) == (size_t)n);
    text[n] = '\0';
    fclose(f);
    return text;
}

/* The codes of the header's error table: its XX(NAME, NUMBER, "...") lines. */
static size_t header_codes(const char *text, code *codes) {
    regex_t re;
    ASSERT(regcomp(&re, "XX\\(([A-Z0-9_]+), *([0-9]+), *\"", REG_EXTENDED) == 0);
    size_t n = 0;
    regmatch_t m[3];
    for (const char *p = text; regexec(&re, p, 3, m, 0) == 0; p += m[0].rm_eo) {
        ASSERT(n < CODES_MAX);
        int len = (int)(m[1].rm_eo - m[1].rm_so);
        snprintf(codes[n].name, sizeof codes[n].name, "RJQ_%.*s", len, p + m[1].rm_so);
        codes[n].value = -atoi(p + m[2].rm_so);
        n++;
    }
    regfree(&re);
    return n;
}

static int is_code(const code *codes, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(codes[i].name, name) == 0) return 1;
    return 0;
}

TEST(every_code_in_the_header_has_its_name_and_description) {
    char *text = read_header();
    static code codes[CODES_MAX];
    size_t n = header_codes(text, codes);
    /* the table the library was built from has as many codes */
#define COUNT_(name, num, msg) +1
    ASSERT_EQ((long)(0 RJQ_ERRNO_MAP(COUNT_)), (long)n);
#undef COUNT_
    ASSERT(n >= 24);
    for (size_t i = 0; i < n; i++) {
        const char *name = rjq_err_name(codes[i].value);
        if (name == NULL || strcmp(name, codes[i].name) != 0)
            FAIL_AT(__FILE__, __LINE__, "rjq_err_name(%d): expected %s, got %s", codes[i].value,
                    codes[i].name, name ? name : "NULL");
        if (strcmp(rjq_strerror(codes[i].value), "unknown error") == 0)
            FAIL_AT(__FILE__, __LINE__, "%s has no description", codes[i].name);
        for (size_t k = 0; k < i; k++)
            if (codes[k].value == codes[i].value)
                FAIL_AT(__FILE__, __LINE__, "%s and %s share %d", codes[k].name, codes[i].name,
                        codes[i].value);
    }
    /* every RJQ_E... name the header mentions is a code of the table (a
     * code defined elsewhere, or a comment naming one that does not exist,
     * fails) */
    regex_t re;
    ASSERT(regcomp(&re, "RJQ_E[A-Z0-9_]+", REG_EXTENDED) == 0);
    regmatch_t m[1];
    for (const char *p = text; regexec(&re, p, 1, m, 0) == 0; p += m[0].rm_eo) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(m[0].rm_eo - m[0].rm_so), p + m[0].rm_so);
        if (strcmp(name, "RJQ_ERRNO_MAP") == 0 || strncmp(name, "RJQ_EVENT_", 10) == 0 ||
            strstr(name, "_INIT") != NULL) continue;
        if (!is_code(codes, n, name))
            FAIL_AT(__FILE__, __LINE__, "rjq.h names %s, which is not in RJQ_ERRNO_MAP", name);
    }
    regfree(&re);
    free(text);
}

TEST(err_name_of_ok_and_of_unknown_codes) {
    ASSERT_STREQ("RJQ_OK", rjq_err_name(RJQ_OK));
    ASSERT_STREQ("RJQ_ETIMEDOUT", rjq_err_name(RJQ_ETIMEDOUT));
#define COUNT_(name, num, msg) +1
    const int past_last = -(1 RJQ_ERRNO_MAP(COUNT_)); /* the codes are 1..n */
#undef COUNT_
    const int unknown[] = {1, 5, past_last, -1000, -(1 << 30), 1 << 30};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        if (rjq_err_name(unknown[i]) != NULL)
            FAIL_AT(__FILE__, __LINE__, "rjq_err_name(%d) is not NULL", unknown[i]);
        ASSERT(rjq_strerror(unknown[i]) != NULL);
    }
}
