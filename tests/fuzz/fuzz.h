/*
 * Shared by the fuzz targets (tests/fuzz/README.md): every byte a parser
 * says is part of its input is read (ASan sees a read past it), and
 * "must hold" checks abort, which libFuzzer reports as a crash.
 */
#ifndef RJQ_FUZZ_H
#define RJQ_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define MUST(cond)                                                              \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "%s:%d: must hold: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                            \
        }                                                                       \
    } while (0)

/* Keep a computed value (the compiler may not drop its computation). */
static inline void keep(long long v) {
    static volatile long long sink;
    sink = v;
    (void)sink;
}

/* p..p+len lies inside base..base+size, and every byte of it is read. */
static inline void touch_in(const void *base, size_t size, const void *p, size_t len) {
    const unsigned char *b = base, *q = p;
    MUST(len == 0 || (q >= b && q <= b + size && len <= (size_t)(b + size - q)));
    long long sum = 0;
    for (size_t i = 0; i < len; i++) sum += q[i];
    keep(sum);
}

/* hiredis' reader allocates an array's elements from its header's count
 * before they arrive (0.14 has no bound; 1.x: 2^32 - 1): an input whose
 * arrays could never fill is skipped, not reported as out of memory. */
static inline int counts_fit(const uint8_t *p, size_t size) {
    for (size_t i = 0; i < size; i++) {
        if (p[i] != '*') continue;
        unsigned long long n = 0;
        for (size_t j = i + 1; j < size && p[j] >= '0' && p[j] <= '9' && n <= size; j++)
            n = n * 10 + (p[j] - '0');
        if (n > size) return 0;
    }
    return 1;
}

#endif
