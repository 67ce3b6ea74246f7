/*
 * Requests gathered for one call (the calls of a loop turn together:
 * deps.c, batch.c): an intrusive list, in order, whose link is each
 * request's first member, and the taking off it of the ones that go in
 * one call (those like its first). A leaf: nothing but the C library.
 */
#ifndef RJQ_GATHER_H
#define RJQ_GATHER_H

#include <stddef.h>

typedef struct rjq__gather_link {
    struct rjq__gather_link *next;
} rjq__gather_link;

typedef struct rjq__gather_list {
    rjq__gather_link *head, **end;
} rjq__gather_list;

/* Whether x goes in the same call as first. */
typedef int rjq__gather_like_fn(const rjq__gather_link *x, const rjq__gather_link *first);

void rjq__gather_init(rjq__gather_list *l);
void rjq__gather_append(rjq__gather_list *l, rjq__gather_link *x);
/* The first off l (NULL: l is empty). */
rjq__gather_link *rjq__gather_pop(rjq__gather_list *l);

/* How many of l (not empty) are like its first, at most `most`. */
size_t rjq__gather_count(const rjq__gather_list *l, rjq__gather_like_fn *like, size_t most);

/* Takes the first n of l like its first off it, in order: into out[0..n-1],
 * or (out NULL: out of memory) onto the list *lost, in order, for the
 * caller to end. */
void rjq__gather_take(rjq__gather_list *l, rjq__gather_like_fn *like, size_t n, void **out,
                      rjq__gather_link **lost);

#endif
