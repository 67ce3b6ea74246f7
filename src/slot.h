/*
 * Redis Cluster's key slot: CRC16 (XMODEM: polynomial 0x1021, initial 0,
 * no reflection) of the key, or of its hash tag, modulo 16384, exactly as
 * the server computes it (cluster.c keyHashSlot). A leaf: pure, no client.
 *
 * The hash tag is the part between the first '{' and the first '}' after
 * it, when that part is not empty; otherwise the whole key is hashed. So
 * "{q}:ready" and "x{q}" share "q"'s slot, while "{}q" and "a{b" hash
 * whole and "a{}{b}" hashes whole too (its first tag is empty).
 */
#ifndef RJQ_SLOT_H
#define RJQ_SLOT_H

#include <stddef.h>
#include <stdint.h>

#define RJQ__SLOTS 16384 /* slots of a cluster: 0 .. RJQ__SLOTS - 1 */

/* CRC16/XMODEM of len bytes (any bytes, NUL included). */
uint16_t rjq__crc16(const void *buf, size_t len);
/* The CRC16 of bytes that follow those whose CRC16 is crc: rjq__crc16 of
 * a + b is rjq__crc16_more(rjq__crc16(a), b). */
uint16_t rjq__crc16_more(uint16_t crc, const void *buf, size_t len);
/* The slot of a key of len bytes (any bytes), in 0 .. RJQ__SLOTS - 1. */
int rjq__key_slot(const void *key, size_t len);
/* The part of the key that is hashed: its hash tag (*tag_len bytes at the
 * returned pointer, inside key) or, without one, the whole key. */
const char *rjq__key_hashed(const void *key, size_t len, size_t *tag_len);
/* A hash tag of slot for a name: "<base>-<n>" with the smallest n >= 0
 * whose slot is `slot` (so every client finds the same one), written to
 * out (NUL-terminated; size: strlen(base) + 22 at least). 0, or -1 when
 * slot or size is out of range. On a cluster the registries of one
 * master live under the tag of the lowest slot it serves (upkeep.c). */
int rjq__slot_tag(const char *base, int slot, char *out, size_t size);

#endif
