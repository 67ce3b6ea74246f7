/* The table of awaits by job key (await_table.h). */
#include "await_table.h"

#include <stdlib.h>

#include "check.h"

static size_t hash_key(const char *s) {
    size_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static int grow(rjq__table *t) {
    size_t nb = t->nbuckets ? t->nbuckets * 2 : 64;
    rjq__tentry **b = calloc(nb, sizeof *b);
    if (b == NULL) return -1;
    for (size_t i = 0; i < t->nbuckets; i++) {
        for (rjq__tentry *e = t->buckets[i], *next; e; e = next) {
            next = e->hnext;
            size_t j = hash_key(e->key) & (nb - 1);
            e->hnext = b[j];
            b[j] = e;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = nb;
    RJQ_ASSERT((nb & (nb - 1)) == 0); /* a power of two: the hash is masked */
    return 0;
}

int rjq__table_add(rjq__table *t, rjq__tentry *e) {
    RJQ_ASSERT(e->key != NULL);
    if (t->n + 1 > t->nbuckets && grow(t) != 0) return -1;
    size_t i = hash_key(e->key) & (t->nbuckets - 1);
    e->hnext = t->buckets[i];
    t->buckets[i] = e;
    t->n++;
    RJQ_ASSERT(t->n <= t->nbuckets); /* (at most one entry per bucket on average) */
    return 0;
}

/* (e is in the table: an await leaves it only once, when it ends) */
void rjq__table_remove(rjq__table *t, rjq__tentry *e) {
    RJQ_ASSERT(t->n > 0 && t->nbuckets > 0);
    if (t->nbuckets == 0) return;
    for (rjq__tentry **p = &t->buckets[hash_key(e->key) & (t->nbuckets - 1)]; *p; p = &(*p)->hnext) {
        if (*p == e) {
            *p = e->hnext;
            t->n--;
            return;
        }
    }
    RJQ_ASSERT(!"the entry removed is in the table");
}

rjq__tentry *rjq__table_chain(const rjq__table *t, const char *key) {
    return t->nbuckets ? t->buckets[hash_key(key) & (t->nbuckets - 1)] : NULL;
}

void rjq__table_free(rjq__table *t) {
    free(t->buckets);
    t->buckets = NULL;
    t->nbuckets = t->n = 0;
}
