/*
 * Redis Cluster's key slot (slot.h): CRC16/XMODEM modulo 16384 of the key's
 * hash tag or of the whole key, as redis' cluster.c keyHashSlot.
 */
#include "slot.h"

#include <string.h>

/* Bit by bit: the keys are short and a queue's slot is computed once. */
uint16_t rjq__crc16(const void *buf, size_t len) {
    const unsigned char *p = buf;
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

const char *rjq__key_hashed(const void *key, size_t len, size_t *tag_len) {
    const char *k = key;
    const char *open = len ? memchr(k, '{', len) : NULL;
    if (open != NULL) {
        size_t after = (size_t)(open - k) + 1;
        const char *close = memchr(open + 1, '}', len - after);
        if (close != NULL && close > open + 1) {
            *tag_len = (size_t)(close - open - 1);
            return open + 1;
        }
    }
    *tag_len = len;
    return k;
}

int rjq__key_slot(const void *key, size_t len) {
    size_t n;
    const char *h = rjq__key_hashed(key, len, &n);
    return rjq__crc16(h, n) & (RJQ__SLOTS - 1);
}
