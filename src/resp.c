/* The RESP argument buffer (resp.h). */
#include "resp.h"

#include <stdlib.h>
#include <string.h>

static void reserve(rjq__buf *b, size_t more) {
    if (b->oom || b->len + more <= b->cap) return;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + more) cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL) {
        b->oom = 1;
        return;
    }
    b->p = p;
    b->cap = cap;
}

size_t rjq__dec(char *out, long long x) {
    char digits[RJQ__DEC_MAX];
    /* (the magnitude as unsigned: -LLONG_MIN overflows a long long) */
    unsigned long long v = x < 0 ? 0ull - (unsigned long long)x : (unsigned long long)x;
    size_t nd = 0, n = 0;
    do {
        digits[nd++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (x < 0) out[n++] = '-';
    while (nd) out[n++] = digits[--nd];
    out[n] = '\0';
    return n;
}

void rjq__buf_ll(rjq__buf *b, long long v) {
    char num[RJQ__DEC_MAX];
    size_t n = rjq__dec(num, v);
    rjq__buf_arg(b, num, n);
}

void rjq__buf_arg(rjq__buf *b, const void *data, size_t len) {
    /* "$<len>\r\n" (by hand: snprintf cost more than the copies, three
     * arguments a job in an enqueue batch) */
    char digits[24];
    size_t nd = 0, v = len;
    do {
        digits[nd++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    size_t hlen = nd + 3;
    reserve(b, hlen + len + 2);
    if (b->oom) return;
    char *p = b->p + b->len;
    *p++ = '$';
    while (nd) *p++ = digits[--nd];
    *p++ = '\r';
    *p++ = '\n';
    b->len += hlen;
    if (len) memcpy(b->p + b->len, data, len);
    b->len += len;
    b->p[b->len++] = '\r';
    b->p[b->len++] = '\n';
}

void rjq__buf_raw(rjq__buf *b, const void *resp, size_t len) {
    reserve(b, len);
    if (b->oom || len == 0) return;
    memcpy(b->p + b->len, resp, len);
    b->len += len;
}

void rjq__buf_arg_str(rjq__buf *b, const char *s) {
    rjq__buf_arg(b, s, strlen(s));
}

void rjq__buf_free(rjq__buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}
