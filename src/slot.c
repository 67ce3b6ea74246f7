/*
 * Redis Cluster's key slot (slot.h): CRC16/XMODEM modulo 16384 of the key's
 * hash tag or of the whole key, as redis' cluster.c keyHashSlot.
 */
#include "slot.h"

#include <stdio.h>
#include <string.h>

/* Bit by bit: the keys are short and a queue's slot is computed once. */
uint16_t rjq__crc16(const void *buf, size_t len) {
    return rjq__crc16_more(0, buf, len);
}

uint16_t rjq__crc16_more(uint16_t crc, const void *buf, size_t len) {
    const unsigned char *p = buf;
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

int rjq__slot_tag(const char *base, int slot, char *out, size_t size) {
    size_t blen = strlen(base);
    if (slot < 0 || slot >= RJQ__SLOTS || size < blen + 2 + 20) return -1;
    memcpy(out, base, blen);
    out[blen] = '-';
    /* 16384 slots: the first few hundred thousand numbers cover them all
     * (a slot missed by the first 2^24 has probability e^-1024) */
    for (unsigned long n = 0; n < (1ul << 24); n++) {
        int len = snprintf(out + blen + 1, size - blen - 1, "%lu", n);
        if (rjq__key_slot(out, blen + 1 + (size_t)len) == slot) return 0;
    }
    return -1;
}
