/*
 * FNV-1a-128 (GRIT v1 §6.1) of several messages at once, for the §6.5 plane
 * digests of many arrays: the same values as fnv128_update of each message
 * (fnv.h), the streams interleaved so that their dependency chains overlap.
 */
#ifndef GRIT_CORE_FNV_MULTI_H
#define GRIT_CORE_FNV_MULTI_H

#include "fnv.h"

/* the most streams advanced together */
#define FNV_MULTI_LANES 4

/* One message: the concatenation of n segments (seg[i], len[i] bytes). */
typedef struct {
    const unsigned char *const *seg;
    const size_t *len;
    size_t n;
} fnv_segments;

/* "int128-asm" (GCC on x86-64: the multiply written out), "int128", or
 * "portable" (the lanes then run one after the other) */
GRIT_FNV_HIDDEN extern const char grit_fnv_multi_impl[];

/* st[i] advanced over streams[i]'s message, for i < k: what
 * fnv128_update(st[i], ...) over each segment in turn gives.  At most
 * `lanes` (1..FNV_MULTI_LANES, clamped) streams run interleaved; a lane
 * whose stream ends takes the next one, so streams of any lengths (empty
 * ones, empty segments) mix. */
GRIT_FNV_HIDDEN void fnv128_update_many(fnv128_t *st, const fnv_segments *streams, size_t k,
                                        int lanes);

/* fnv128_update_many, and at the same time each message compared with a
 * second one: eq[i] = 1 where the concatenation of others[i]'s segments is
 * streams[i]'s message byte for byte (the same length, the same bytes; the
 * two may be cut into segments differently), else 0.  The comparison runs
 * in the digest's loop, beside its chains of multiplies. */
GRIT_FNV_HIDDEN void fnv128_update_many_cmp(fnv128_t *st, const fnv_segments *streams,
                                            const fnv_segments *others, int *eq, size_t k,
                                            int lanes);

#endif /* GRIT_CORE_FNV_MULTI_H */
