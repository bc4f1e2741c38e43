/*
 * FNV-1a-128 (GRIT v1 §6.1) of up to four messages at once, split into a
 * chain of bytes and a sum that vector instructions compute (fnv_wide.c):
 * the same values as fnv128_update of each message, faster than the
 * interleaved multiplies of fnv_multi.c where the machine has AVX-512 with
 * VNNI, or AVX2.
 */
#ifndef GRIT_CORE_FNV_WIDE_H
#define GRIT_CORE_FNV_WIDE_H

#include "fnv.h"

/* the fewest bytes worth a call: below, the setup of the sums costs more
 * than it saves (fnv_multi.c then runs its own loops) */
#define FNV_WIDE_MIN 1024

/* the loops fnv128_wide runs: with AVX-512 BW and VNNI, with AVX2 */
#define FNV_WIDE_AVX512 1
#define FNV_WIDE_AVX2 2

/* 1 when this machine runs fnv128_wide (x86-64 with AVX-512 BW and VNNI or
 * with AVX2, built by GCC or Clang), its tables are built and a loop passed
 * its self-check against fnv128_update; -1 when the machine has one but
 * none passed (a miscompiled loop: it stays off); 0 otherwise.  Call once
 * before the first use, from one thread (the module's init). */
GRIT_FNV_HIDDEN int fnv128_wide_init(void);

/* the loop fnv128_wide runs (FNV_WIDE_AVX512, FNV_WIDE_AVX2; 0: none), set
 * by fnv128_wide_init to the fastest that passed (the module's switch for
 * tests that compare the paths may change it) */
GRIT_FNV_HIDDEN extern int grit_fnv_wide;

/* bit 1 << FNV_WIDE_X set for each loop that passed its self-check, and for
 * each loop this machine (and build) has the instructions of */
GRIT_FNV_HIDDEN extern int grit_fnv_wide_passed;
GRIT_FNV_HIDDEN extern int grit_fnv_wide_cpu;

/* Each of k (1..4) lanes advanced over its n bytes: lane j's state
 * (hi[j], lo[j]) continued over p[j][0..n).  With q non-NULL, d[j] is also
 * OR-ed with the difference of q[j][0..n) from p[j][0..n) (0: the same
 * bytes).  Only where fnv128_wide_init returned 1. */
GRIT_FNV_HIDDEN void fnv128_wide(int k, uint64_t *hi, uint64_t *lo, uint64_t *d,
                                 const unsigned char *const *p,
                                 const unsigned char *const *q, size_t n);

#endif /* GRIT_CORE_FNV_WIDE_H */
