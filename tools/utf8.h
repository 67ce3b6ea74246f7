/*
 * UTF-8 checks shared by the tools: the rjq CLI's JSON output (valid text
 * as it is, other bytes base64) and the PostgreSQL bridge (a text column
 * takes valid UTF-8 only).
 */
#ifndef RJQ_TOOLS_UTF8_H
#define RJQ_TOOLS_UTF8_H

#include <stddef.h>

/* The length (1..4) of the valid UTF-8 character at s (left bytes
 * available), or 0 when the bytes there are not one (overlong forms,
 * surrogates and code points past U+10FFFF included). */
size_t utf8_char_len(const unsigned char *s, size_t left);

/* 1 when all len bytes are valid UTF-8. */
int utf8_valid(const void *s, size_t len);

#endif
