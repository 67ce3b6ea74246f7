/* A job's dependencies as the tools take them: see after.h. */
#include "after.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int after_parse(const char *spec, after_list *out, char *why, size_t whylen) {
    memset(out, 0, sizeof *out);
    if (spec == NULL || *spec == '\0') {
        snprintf(why, whylen, "no dependencies (QUEUE:ID[,QUEUE:ID...])");
        return -1;
    }
    if ((out->buf = strdup(spec)) == NULL) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    for (char *p = out->buf, *next; p; p = next) {
        next = strchr(p, ',');
        if (next) *next++ = '\0';
        char *colon = strchr(p, ':');
        if (colon == NULL || colon == p || colon[1] == '\0') {
            snprintf(why, whylen, "dependency '%s' is not QUEUE:ID", p);
            return -1;
        }
        if (out->n == RJQ_AFTER_MAX) {
            snprintf(why, whylen, "more than %d dependencies", RJQ_AFTER_MAX);
            return -1;
        }
        *colon = '\0';
        out->deps[out->n].queue = p;
        out->deps[out->n++].id = colon + 1;
    }
    return 0;
}

void after_free(after_list *a) {
    free(a->buf);
    a->buf = NULL;
    a->n = 0;
}

int after_policy_parse(const char *word, int *out) {
    static const char *const words[] = {"fail", "run", "ignore"};
    static const int policies[] = {RJQ_AFTER_FAIL, RJQ_AFTER_RUN, RJQ_AFTER_IGNORE};
    for (size_t i = 0; word && i < sizeof words / sizeof words[0]; i++)
        if (strcmp(word, words[i]) == 0) {
            *out = policies[i];
            return 0;
        }
    return -1;
}
