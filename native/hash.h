/* The byte hash the compiled counts and sets share (rangewalk.c's net, keyset.c): fast, not keyed; every user
 * compares equal hashes byte for byte, so a collision costs a comparison, never a wrong answer. */
#ifndef LAKEFS_RANGEWALK_HASH_H
#define LAKEFS_RANGEWALK_HASH_H

#include <stdint.h>
#include <string.h>

static inline uint64_t hash_bytes(const uint8_t *p, int64_t n, uint64_t seed) {
    uint64_t h = seed ^ ((uint64_t)n * 0x9E3779B97F4A7C15ull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xC2B2AE3D27D4EB4Full;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, (size_t)n);
    h = (h ^ w) * 0xC2B2AE3D27D4EB4Full;
    h ^= h >> 32;
    return h;
}

#endif
