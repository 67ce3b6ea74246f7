/*
 * A job's dependencies as the tools take them (rjq enqueue --after, rjq
 * serve's ?after=): "QUEUE:ID[,QUEUE:ID...]", and a policy word (fail,
 * run, ignore). A queue name has no ':' here (the first ':' ends it; an id
 * may have more).
 */
#ifndef RJQ_TOOLS_AFTER_H
#define RJQ_TOOLS_AFTER_H

#include <stddef.h>

#include "rjq.h"

typedef struct after_list {
    rjq_dep deps[RJQ_AFTER_MAX];
    size_t n;
    char *buf; /* the names and ids (owned) */
} after_list;

/* Parse spec into out (after_free it, also after a failure). 0, or -1
 * with why (whylen bytes) saying what is wrong. */
int after_parse(const char *spec, after_list *out, char *why, size_t whylen);
void after_free(after_list *a);

/* "fail", "run" or "ignore" as RJQ_AFTER_*: 0, or -1 for another word. */
int after_policy_parse(const char *word, int *out);

#endif
