/*
 * An argv builder for commands: pointers to the caller's bytes plus copies
 * of short strings and numbers, for rjq__command() and rjq__script().
 * A leaf: no Redis, no client. An allocation failure sets `oom` and makes
 * every later add a no-op, so a builder is checked once, before sending.
 */
#ifndef RJQ_ARGV_H
#define RJQ_ARGV_H

#include <stddef.h>

typedef struct rjq__argv {
    const char **v;
    size_t *len;
    int n, cap;
    void *chunks;     /* chunks holding copied strings and numbers */
    int oom;          /* an allocation failed: the command must not be sent */
} rjq__argv;

void rjq__argv_init(rjq__argv *a);
void rjq__argv_free(rjq__argv *a);
/* Append len bytes at p: not copied, they must outlive the send. */
void rjq__argv_add(rjq__argv *a, const void *p, size_t len);
void rjq__argv_str(rjq__argv *a, const char *s);
/* Copy a short string (< 4 KiB) into the builder (it may be freed afterwards). */
void rjq__argv_copy(rjq__argv *a, const char *s);
void rjq__argv_ll(rjq__argv *a, long long x);

#endif
