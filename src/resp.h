/*
 * Command arguments already in RESP form ("$len\r\ndata\r\n" each): one
 * copy of every input, sent as is behind a script's FCALL or EVALSHA head
 * (rjq__script_buf). A leaf. An allocation failure sets `oom`; later
 * appends are no-ops until the buffer is reset.
 */
#ifndef RJQ_RESP_H
#define RJQ_RESP_H

#include <stddef.h>

typedef struct rjq__buf {
    char *p;
    size_t len, cap;
    int oom;
} rjq__buf;

void rjq__buf_arg(rjq__buf *b, const void *data, size_t len);
void rjq__buf_arg_str(rjq__buf *b, const char *s);
/* Append len bytes already in RESP form (arguments of another buffer). */
void rjq__buf_raw(rjq__buf *b, const void *resp, size_t len);
void rjq__buf_free(rjq__buf *b);
/* An integer as a bulk string of its decimal digits. */
void rjq__buf_ll(rjq__buf *b, long long v);
/* x in decimal at out (NUL-ended: at most 20 characters and the NUL, so
 * out has RJQ__DEC_MAX bytes): no printf on the hot paths. Its length. */
#define RJQ__DEC_MAX 21
size_t rjq__dec(char *out, long long x);

#endif
