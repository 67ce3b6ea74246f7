/* The argv builder (argv.h). */
#include "argv.h"
#include "resp.h"

#include <stdlib.h>
#include <string.h>

#define CHUNK 4096

/* Number and string copies live in chunks that never move, so pointers
 * handed out stay valid while the array of pointers grows. */
typedef struct chunk {
    struct chunk *prev;
    size_t used;
    char data[CHUNK];
} chunk;

void rjq__argv_init(rjq__argv *a) {
    memset(a, 0, sizeof *a);
}

void rjq__argv_free(rjq__argv *a) {
    chunk *k = a->chunks;
    while (k) {
        chunk *prev = k->prev;
        free(k);
        k = prev;
    }
    free(a->v);
    free(a->len);
    memset(a, 0, sizeof *a);
}

void rjq__argv_add(rjq__argv *a, const void *p, size_t len) {
    if (a->oom) return;
    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 32;
        const char **v = realloc(a->v, (size_t)cap * sizeof *v);
        if (v) a->v = v;
        size_t *l = realloc(a->len, (size_t)cap * sizeof *l);
        if (l) a->len = l;
        if (v == NULL || l == NULL) {
            a->oom = 1;
            return;
        }
        a->cap = cap;
    }
    a->v[a->n] = p ? p : "";
    a->len[a->n] = len;
    a->n++;
}

void rjq__argv_str(rjq__argv *a, const char *s) {
    rjq__argv_add(a, s, strlen(s));
}

void rjq__argv_copy(rjq__argv *a, const char *s) {
    size_t n = strlen(s);
    chunk *k = a->chunks;
    if (a->oom || n >= CHUNK) {
        a->oom = 1;
        return;
    }
    if (k == NULL || k->used + n + 1 > CHUNK) {
        chunk *fresh = malloc(sizeof *fresh);
        if (fresh == NULL) {
            a->oom = 1;
            return;
        }
        fresh->prev = k;
        fresh->used = 0;
        a->chunks = fresh;
        k = fresh;
    }
    char *dst = k->data + k->used;
    memcpy(dst, s, n + 1);
    k->used += n + 1;
    rjq__argv_add(a, dst, n);
}

void rjq__argv_ll(rjq__argv *a, long long x) {
    char buf[RJQ__DEC_MAX];
    rjq__dec(buf, x); /* (no snprintf: numbers are on every hot path) */
    rjq__argv_copy(a, buf);
}
