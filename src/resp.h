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
/* Room for a script call's head (FCALL or EVALSHA, its function or sha
 * and the count: rjq__script_head's at most 160 bytes) at the front of an
 * empty buffer, so the request can take the buffer and write its head in
 * front of the arguments instead of copying them behind it
 * (rjq__script_take). The arguments then start at p + RJQ__HEAD_ROOM. */
#define RJQ__HEAD_ROOM 160
void rjq__buf_head_room(rjq__buf *b);
/* A NUL after the last byte (not counted in len): hiredis reads the byte
 * after a command's name. */
void rjq__buf_nul(rjq__buf *b);
/* An integer as a bulk string of its decimal digits. */
void rjq__buf_ll(rjq__buf *b, long long v);
/* x in decimal at out (NUL-ended: at most 20 characters and the NUL, so
 * out has RJQ__DEC_MAX bytes): no printf on the hot paths. Its length. */
#define RJQ__DEC_MAX 21
size_t rjq__dec(char *out, long long x);

/* A whole command in RESP form, byte for byte what hiredis'
 * redisFormatCommandArgv makes ("*<argc>\r\n", then "$<len>\r\n<bytes>\r\n"
 * per argument; lens NULL: each argv[i] is NUL-ended), without its
 * sprintf per argument: one malloc'd buffer at *out (NUL-ended; free()).
 * Its length, or -1 (*out NULL) out of memory, for argc < 0, or a length
 * that does not fit. */
long long rjq__resp_command(char **out, int argc, const char **argv, const size_t *lens);

#endif
