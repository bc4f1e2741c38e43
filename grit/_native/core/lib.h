/*
 * What libgrit's own files share (not installed): the public header, the
 * core's helpers, and the small bits of the grade registry the check uses.
 */
#ifndef GRIT_LIB_H
#define GRIT_LIB_H

#include "../../include/grit.h"
#include "core.h"
#include "fnv.h"

#include <stdio.h>

/* The codec fields of a grade beyond its frame (§4.2), as token indices:
 * er, dr in rne rna rtz rtp rtn; es, ds in satfinite satmax ovfinf; esr in
 * exp2floormaxabs exp2ceilmaxabs exp2rnemaxabs ratiomaxabs affineminmax;
 * esn 1 for ftz.  dt is a format word. */
enum { GRIT_ESR_FLOOR = 0, GRIT_ESR_CEIL, GRIT_ESR_RNE, GRIT_ESR_RATIO, GRIT_ESR_AFFINE };
typedef struct {
    uint8_t er, es, esr, esn_ftz, dr, ds;
    grit_fmt_t dt;
} grit_codec_params;

/* the frame fields a registered grade fixes (§7.3 step 2), and its string */
typedef struct {
    uint64_t id;
    const char *canonical;
    size_t len;
    grit_desc_t frame;        /* the fields grit_grade_frame lists; rest 0 */
    int codec;                /* core.h's grit_kind of a built-in grade, else -1 */
    int codec_flag;           /* its encode variant (grit_k_encode) */
    grit_codec_params params; /* what the general codec (generic.c) reads */
} grit_grade_entry;

/* generic.c: §8-§10 for any registered grade, canonical placement, after
 * codec.c has checked the view; planes and buffers of the §7.3 sizes */
GRIT_HIDDEN grit_status_t grit_generic_decode(const grit_view_t *v, const grit_grade_entry *g,
                                              float *out, size_t n, grit_detail_t *det);
GRIT_HIDDEN grit_status_t grit_generic_encode(const grit_view_t *v, const grit_grade_entry *g,
                                              const float *x, size_t n, grit_detail_t *det);

/* layout.c: whether the registered expression of a class-0x8/0xF word is
 * an Interleave (1) or not (0); -1 when the word is not registered */
GRIT_HIDDEN int grit_layout_interleaves(uint64_t word);

/* the registered grade of id, or NULL (thread-safe; entries never move) */
GRIT_HIDDEN const grit_grade_entry *grit_lookup_grade(uint64_t id);

/* detail helpers (check.c): fill *d when d is not NULL; returns status */
GRIT_HIDDEN grit_status_t grit_fail(grit_detail_t *d, grit_status_t s, int step, int plane,
                                    const char *field, const char *expected, const char *actual,
                                    const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 8, 9)))
#endif
    ;
GRIT_HIDDEN grit_status_t grit_ok(grit_detail_t *d);

/* the fields of a format word (§2.1) */
static inline unsigned fmt_w(unsigned word) { return (word & 31u) + 1; }
static inline unsigned fmt_p(unsigned word) { return (word >> 5) & 31u; }
static inline unsigned fmt_has_inf(unsigned word) { return (word >> 10) & 1u; }
static inline unsigned fmt_nan_enc(unsigned word) { return (word >> 11) & 3u; }
static inline unsigned fmt_szero(unsigned word) { return (word >> 13) & 1u; }
static inline unsigned fmt_unsigned(unsigned word) { return (word >> 14) & 1u; }
static inline unsigned fmt_bias_ovr(unsigned word) { return (word >> 15) & 1u; }

#endif /* GRIT_LIB_H */
