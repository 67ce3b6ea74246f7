/* UTF-8 checks: see utf8.h. */
#include "utf8.h"

size_t utf8_char_len(const unsigned char *s, size_t left) {
    unsigned char c = s[0];
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || n > left) return 0;
    for (size_t k = 1; k < n; k++)
        if ((s[k] >> 6) != 2) return 0;
    if (n == 2 && c < 0xC2) return 0;                                        /* overlong */
    if (n == 3 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0))) return 0; /* overlong, surrogate */
    if (n == 4 && (c > 0xF4 || (c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] >= 0x90))) return 0;
    return n;
}

int utf8_valid(const void *p, size_t len) {
    const unsigned char *s = p;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_char_len(s + i, len - i);
        if (n == 0) return 0;
        i += n;
    }
    return 1;
}
