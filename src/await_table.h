/*
 * A hash table of entries by string key (await_table.c): the awaits of a
 * client by job key. Entries are embedded in their owners and chained
 * through them (no allocation per entry); several entries may share a
 * key. Pure, no Redis.
 */
#ifndef RJQ_AWAIT_TABLE_H
#define RJQ_AWAIT_TABLE_H

#include <stddef.h>

typedef struct rjq__tentry {
    const char *key;
    struct rjq__tentry *hnext;
} rjq__tentry;

typedef struct rjq__table {
    rjq__tentry **buckets;
    size_t nbuckets, n;
} rjq__table;

/* Add e (its key set). 0, or -1 when out of memory (nothing changed). */
int rjq__table_add(rjq__table *t, rjq__tentry *e);
void rjq__table_remove(rjq__table *t, rjq__tentry *e);
/* The first entry of key's chain (walk it with hnext, compare keys). */
rjq__tentry *rjq__table_chain(const rjq__table *t, const char *key);
void rjq__table_free(rjq__table *t);

#endif
