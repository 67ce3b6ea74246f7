/* idmap: see idmap.h. */
#include "idmap.h"

#include <stdlib.h>

static size_t slot_of(const idmap *m, int64_t key) {
    uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ULL; /* Fibonacci hashing */
    return (size_t)(h >> 17) & (m->cap - 1);
}

void *idmap_get(const idmap *m, int64_t key) {
    if (m->cap == 0) return NULL;
    for (size_t i = slot_of(m, key);; i = (i + 1) & (m->cap - 1)) {
        if (m->slots[i].value == NULL) return NULL;
        if (m->slots[i].key == key) return m->slots[i].value;
    }
}

static int grow(idmap *m) {
    size_t cap = m->cap ? m->cap * 2 : 64;
    idmap_slot *old = m->slots;
    size_t old_cap = m->cap;
    idmap_slot *slots = calloc(cap, sizeof *slots);
    if (slots == NULL) return -1;
    m->slots = slots;
    m->cap = cap;
    for (size_t i = 0; i < old_cap; i++) {
        if (old[i].value == NULL) continue;
        size_t j = slot_of(m, old[i].key);
        while (slots[j].value) j = (j + 1) & (cap - 1);
        slots[j] = old[i];
    }
    free(old);
    return 0;
}

int idmap_put(idmap *m, int64_t key, void *value) {
    if ((m->n + 1) * 4 > m->cap * 3 && grow(m) != 0) return -1; /* load <= 3/4 */
    size_t i = slot_of(m, key);
    while (m->slots[i].value && m->slots[i].key != key) i = (i + 1) & (m->cap - 1);
    if (m->slots[i].value == NULL) m->n++;
    m->slots[i].key = key;
    m->slots[i].value = value;
    return 0;
}

void *idmap_del(idmap *m, int64_t key) {
    if (m->cap == 0) return NULL;
    size_t mask = m->cap - 1, i = slot_of(m, key);
    while (m->slots[i].value && m->slots[i].key != key) i = (i + 1) & mask;
    void *value = m->slots[i].value;
    if (value == NULL) return NULL;
    m->n--;
    /* shift later entries of the probe run back into the hole */
    for (size_t j = (i + 1) & mask; m->slots[j].value; j = (j + 1) & mask) {
        size_t home = slot_of(m, m->slots[j].key);
        /* j's entry may move to i when home is not in (i, j] cyclically */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i].value = NULL;
    return value;
}

void idmap_free(idmap *m) {
    free(m->slots);
    m->slots = NULL;
    m->cap = m->n = 0;
}
