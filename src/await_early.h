/*
 * Outcomes that beat their enqueue's reply (await_early.c): an outcome
 * message for a job no await knows yet is kept, oldest first, until the
 * enqueue reply that names the job arrives. The list is capped: outcomes
 * nobody will ever claim (late ones of awaits that timed out) must not
 * pile up. Every outcome pushed out by the cap is counted in `dropped`,
 * so an enqueue whose reply comes after a drop knows to read its job's
 * state instead of trusting the list. Pure, no Redis.
 */
#ifndef RJQ_AWAIT_EARLY_H
#define RJQ_AWAIT_EARLY_H

#include <stddef.h>

#define RJQ__EARLY_MAX 1024

typedef struct rjq__early {
    char *key;
    char *kind;
    char *body;
    size_t len;
    struct rjq__early *next;
} rjq__early;

typedef struct rjq__early_list {
    rjq__early *head, *tail;
    size_t n;
    unsigned long long dropped; /* outcomes pushed out by the cap (or lost to memory) so far */
} rjq__early_list;

/* Keep an outcome; beyond RJQ__EARLY_MAX the oldest goes (counted). */
void rjq__early_keep(rjq__early_list *l, const char *key, size_t klen, const char *kind,
                     const char *body, size_t blen);
/* Take the oldest outcome kept for key (the caller frees it), or NULL. */
rjq__early *rjq__early_take(rjq__early_list *l, const char *key);
void rjq__early_free(rjq__early *e);
/* Forget every outcome (none can be claimed any more); not a drop. */
void rjq__early_clear(rjq__early_list *l);

#endif
