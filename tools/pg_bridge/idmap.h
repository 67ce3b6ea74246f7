/*
 * idmap: a hash map from row ids (int64) to pointers, open addressing
 * with linear probing (deletion shifts entries back, no tombstones).
 */
#ifndef RJQ_IDMAP_H
#define RJQ_IDMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct idmap_slot {
    int64_t key;
    void *value; /* NULL: empty */
} idmap_slot;

typedef struct idmap {
    idmap_slot *slots;
    size_t cap; /* a power of two, or 0 */
    size_t n;
} idmap;

void *idmap_get(const idmap *m, int64_t key);
/* value must not be NULL. 0, or -1 (out of memory; nothing changed).
 * An existing key gets the new value. */
int idmap_put(idmap *m, int64_t key, void *value);
/* Returns the value removed, or NULL. */
void *idmap_del(idmap *m, int64_t key);
void idmap_free(idmap *m);

#endif
