/*
 * FNV-1a-64 and FNV-1a-128 of GRIT v1 §6.1, for libgrit and the CPython
 * extension grit._ext.  Integer arithmetic only (C99); nothing here depends
 * on floating point.
 */
#ifndef GRIT_CORE_FNV_H
#define GRIT_CORE_FNV_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) || defined(__clang__)
#define GRIT_FNV_HIDDEN __attribute__((visibility("hidden")))
#else
#define GRIT_FNV_HIDDEN
#endif

/* §6.1 constants. */
#define FNV64_OFFSET UINT64_C(0xcbf29ce484222325)
#define FNV64_PRIME UINT64_C(0x100000001b3)
#define FNV128_OFFSET_HI UINT64_C(0x6c62272e07bb0142)
#define FNV128_OFFSET_LO UINT64_C(0x62b821756295c58d)
/* prime = 2^88 + 0x13b, so h * prime = h * 0x13b + (h << 88)  (mod 2^128). */
#define FNV128_PRIME_LOW UINT64_C(0x13b)

typedef struct {
    uint64_t hi;
    uint64_t lo;
} fnv128_t;

/* "int128" or "portable": which of the two equal 128-bit loops is built */
GRIT_FNV_HIDDEN extern const char grit_fnv128_impl[];
GRIT_FNV_HIDDEN uint64_t fnv64_update(uint64_t h, const unsigned char *p, size_t n);
GRIT_FNV_HIDDEN fnv128_t fnv128_update(fnv128_t st, const unsigned char *p, size_t n);
/* u64le(v) hashed into st (the §6.5 length prefix) */
GRIT_FNV_HIDDEN fnv128_t fnv128_u64le(fnv128_t st, uint64_t v);
/* §6.5 over n planes: u64le(len[i]) || bytes of p[i], from the offset basis */
GRIT_FNV_HIDDEN fnv128_t fnv128_digest(const unsigned char *const *p, const size_t *len, int n);
/* 1 when both loops give §6.1's values for "a" */
GRIT_FNV_HIDDEN int fnv_self_check(void);

#endif /* GRIT_CORE_FNV_H */
