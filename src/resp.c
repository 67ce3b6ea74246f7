/* The RESP argument buffer (resp.h). */
#include "resp.h"

#include <limits.h>
#include <stdint.h>
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
     * arguments a job in an enqueue batch and a completion batch); one
     * check for room ('$', at most 20 digits, two CRLFs) */
    if (b->oom) return;
    if (b->cap - b->len < len + 25) {
        reserve(b, len + 25);
        if (b->oom) return;
    }
    char *p = b->p + b->len;
    *p++ = '$';
    if (len < 10) {
        *p++ = (char)('0' + len);
    } else if (len < 100) {
        *p++ = (char)('0' + len / 10);
        *p++ = (char)('0' + len % 10);
    } else {
        p += rjq__dec(p, (long long)len); /* (its NUL: where the CR goes) */
    }
    *p++ = '\r';
    *p++ = '\n';
    if (len) memcpy(p, data, len);
    p += len;
    *p++ = '\r';
    *p++ = '\n';
    b->len = (size_t)(p - b->p);
}

void rjq__buf_raw(rjq__buf *b, const void *resp, size_t len) {
    reserve(b, len);
    if (b->oom || len == 0) return;
    memcpy(b->p + b->len, resp, len);
    b->len += len;
}

void rjq__buf_head_room(rjq__buf *b) {
    if (b->oom || b->len != 0) return; /* (only at the front of an empty buffer) */
    reserve(b, RJQ__HEAD_ROOM);
    if (!b->oom) b->len = RJQ__HEAD_ROOM;
}

void rjq__buf_nul(rjq__buf *b) {
    reserve(b, 1);
    if (!b->oom) b->p[b->len] = '\0';
}

void rjq__buf_arg_str(rjq__buf *b, const char *s) {
    rjq__buf_arg(b, s, strlen(s));
}

void rjq__buf_free(rjq__buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* Digits of n in decimal. */
static size_t ndigits(size_t n) {
    size_t d = 1;
    while (n >= 10) {
        n /= 10;
        d++;
    }
    return d;
}

long long rjq__resp_command(char **out, int argc, const char **argv, const size_t *lens) {
    *out = NULL;
    if (argc < 0) return -1;
    size_t total = 1 + ndigits((size_t)argc) + 2;
    for (int i = 0; i < argc; i++) {
        size_t n = lens ? lens[i] : strlen(argv[i]);
        size_t one = 1 + ndigits(n) + 2 + 2; /* "$<n>\r\n" and the CRLF after */
        if (n > SIZE_MAX - one || total > SIZE_MAX - one - n - 1) return -1;
        total += one + n;
    }
    if (total > (size_t)LLONG_MAX) return -1;
    char *cmd = malloc(total + 1);
    if (cmd == NULL) return -1;
    char *p = cmd;
    *p++ = '*';
    p += rjq__dec(p, argc);
    *p++ = '\r';
    *p++ = '\n';
    for (int i = 0; i < argc; i++) {
        size_t n = lens ? lens[i] : strlen(argv[i]);
        *p++ = '$';
        p += rjq__dec(p, (long long)n);
        *p++ = '\r';
        *p++ = '\n';
        if (n) memcpy(p, argv[i], n);
        p += n;
        *p++ = '\r';
        *p++ = '\n';
    }
    *p = '\0';
    *out = cmd;
    return (long long)(p - cmd);
}
