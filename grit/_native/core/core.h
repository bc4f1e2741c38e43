/*
 * The native core of GRIT v1: the codec kernels of the registered grades
 * (§8, §10: MXFP4 / MXFP4_RNE, NVF4 / NVF4_RTZ, Q4KS, I8S24), the shared
 * binary32 and small-format helpers, and the thread helpers.  No Python in
 * it: libgrit (grit/include/grit.h) and the CPython extension grit._kernels
 * (grit/_native/py/) are both built from these files, so each kernel exists
 * once.
 *
 * Every kernel reads and writes caller-owned buffers and can split its work
 * over threads along group boundaries; the result never depends on the
 * number of threads.
 *
 * Arithmetic.  §1.1: every named step is one binary32 operation rounded to
 * nearest even.  In C99 with FLT_EVAL_METHOD == 0 (SSE on x86-64), a float
 * multiply, add, subtract or divide is exactly that; the build passes
 * -ffp-contract=off so that no multiply-then-add is fused, and no -ffast-math.
 * The AVX2 paths (selected at run time, never FMA) use the same IEEE
 * operations lane by lane, so both paths give identical bits.  Rounding to
 * an integer uses the 2^23 / 1.5·2^23 addition trick, which is exactly
 * round-half-even for the clamped ranges used here, or ROUNDPS.
 *
 * Layout.  Elements in lin order (§3.7), the canonical planes of §3.5–§3.8
 * with docs/spec-decisions.md: E2M1 / u4 dense nibbles LSB-first (element 2j
 * in the low nibble), scale0 and zero points one per byte (PAD8) or
 * little-endian binary16, scale1 dense little-endian, 2:4 metadata one
 * nibble per quad (slot 0 in bits 0..1).  Every NaN written is 0x7FC00000.
 *
 * Files.  core.h (this file): the inline helpers, the thread helpers' and
 * the shared tables' declarations, and the kernels' entry points.
 * threads.c: the thread pool, the E4M3 table and the set-up; decode.c,
 * encode.c: the codec kernels; relayout.c: the relayout kernels; ggml.c:
 * the fused ggml block decoders; fnv.c: FNV-1a (§6.1).  The rest of the
 * directory is libgrit's API (lib.h, docs/c-library.md).
 */
#ifndef GRIT_CORE_H
#define GRIT_CORE_H


#include <float.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
/* x87 excess precision would round twice; optional=True then leaves the
 * package on its numpy path. */
#error "the GRIT core needs binary32 evaluation (FLT_EVAL_METHOD == 0)"
#endif

#if defined(_WIN32)
#define GRIT_NO_THREADS 1
#else
#include <pthread.h>
#endif

/* -DGRIT_NO_SIMD builds the portable loops only (what other CPUs get). */
#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__)) \
    && !defined(GRIT_NO_SIMD)
#define GRIT_AVX2 1
#include <immintrin.h>
#define TARGET_AVX2 __attribute__((target("avx2")))
#endif

#define CANON_NAN 0x7FC00000u
#define MAX_THREADS 64

/* Symbols shared between the files of the core, kept out of the dynamic
 * symbol table of what links it (libgrit exports only grit.h's API,
 * grit._kernels only PyInit__kernels). */
#if defined(__GNUC__) || defined(__clang__)
#define GRIT_HIDDEN __attribute__((visibility("hidden")))
#else
#define GRIT_HIDDEN
#endif

/* Set once by grit_core_init (CPU detection); the Python binding's simd()
 * changes it under the GIL and before any worker starts. */
GRIT_HIDDEN extern int grit_use_avx2;

/* ------------------------------------------------------------------------
 * binary32 bit helpers and the small formats (§2.4) */

static inline uint32_t
f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float
u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline float
canon(float v)
{
    return v != v ? u2f(CANON_NAN) : v;
}

/* 2^k for -149 <= k <= 127, exactly. */
static inline float
pow2f(int k)
{
    return k >= -126 ? u2f((uint32_t)(k + 127) << 23) : u2f(UINT32_C(1) << (k + 149));
}

/* Format facts (§2.4) the kernels use, by name.  module.c's tables() returns
 * each of them and every table below, for tests/test_native_tables.py to
 * compare with what grit.formats derives. */
#define E2M1_MAX 6.0f                /* largest E2M1 magnitude, 1.5 · 2^2 */
#define E2M1_EMAX 2                  /* ... and its exponent */
#define E4M3_MAX 448.0f              /* largest E4M3 magnitude ... */
#define E4M3_MAX_CODE 0x7Eu          /* ... and its code */
#define E4M3_NAN_CODE 0x7Fu          /* 0.1111.111 */
#define E4M3_ONE_CODE 0x38u          /* 1.0 = 0.0111.000 */
#define E8M0_BIAS 127
#define E8M0_NAN_CODE 0xFFu
#define F16_MAX_CODE 0x7BFFu         /* 65504 */
#define F16_NAN_CODE 0x7E00u         /* the quiet NaN the encoders store */
#define F16_ONE_CODE 0x3C00u
#define U4_MAX 15
#define U6_MAX 63                    /* also the mask of a u6 code in its byte */
#define S8_MAX 127                   /* s8 is symmetric, -127..127 (§1.5) */

/* E2M1 (§2.4: bias 1, one mantissa bit, no Inf/NaN): codes 0..7 are
 * 0, 0.5, 1, 1.5, 2, 3, 4, 6 -- every one exact in binary32; 8..15 negate. */
static const float E2M1[16] = {
    0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
    -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f,
};

/* §2.5's E2M1 ladder as its seven rounding thresholds, the midpoints of
 * neighbouring magnitudes: |y| past threshold k takes code k + 1 or more;
 * a tie goes to the even code (k + 1 when k is odd). */
static const float E2M1_THRESHOLDS[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};

/* E4M3 (OCP "fn": bias 7, three mantissa bits, S.1111.111 = NaN), filled at
 * import from §2.4 (common.c). */
GRIT_HIDDEN extern float grit_e4m3[256];
GRIT_HIDDEN void grit_init_e4m3(void);

/* E8M0: 2^(c-127), c = 0xFF is NaN. */
static inline float
e8m0_value(unsigned c)
{
    return c == E8M0_NAN_CODE ? u2f(CANON_NAN) : pow2f((int)c - E8M0_BIAS);
}

/* binary16 -> binary32, exact. */
static inline float
half_value(unsigned h)
{
    uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 31, m = h & 0x3FF;
    if (e == 31) {
        return m ? u2f(CANON_NAN) : u2f(s | 0x7F800000u);
    }
    if (e == 0) {
        float v = (float)m * pow2f(-24);            /* subnormal: m · 2^-24 */
        return s ? -v : v;
    }
    return u2f(s | ((e + 112) << 23) | (m << 13));
}

/* binary32 -> binary16, round to nearest even, satfinite (docs/
 * spec-decisions.md: an overflowing scale is 65504 = 0x7BFF, not ∞). */
static inline unsigned
half_rne_satfinite(float f)
{
    uint32_t u = f2u(f), s = (u >> 16) & 0x8000, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) {
        return s | F16_NAN_CODE;                     /* NaN (never reached) */
    }
    if (a >= 0x477FF000u) {                          /* >= 65520 rounds past 65504 */
        return s | F16_MAX_CODE;
    }
    uint32_t E = a >> 23;
    if (E >= 113) {                                  /* >= 2^-14: a binary16 normal */
        uint32_t h = ((E - 112) << 10) | ((a >> 13) & 0x3FF), r = a & 0x1FFF;
        h += (r > 0x1000) | ((r == 0x1000) & (h & 1)); /* a carry bumps the exponent */
        return s | h;
    }
    if (E < 102) {                                   /* < 2^-25: below half the quantum */
        return s;
    }
    uint32_t sig = (a & 0x7FFFFFu) | 0x800000u, sh = 126 - E; /* quantum 2^-24 */
    uint32_t n = sig >> sh, r = sig & ((UINT32_C(1) << sh) - 1), half = UINT32_C(1) << (sh - 1);
    n += (r > half) | ((r == half) & (n & 1));
    return s | n;
}

/* fmt_encode(e4m3, v, rne | rtz, satfinite) for v >= +0 (a block scale
 * ratio): the binary32 significand rounded at the E4M3 quantum. */
static inline unsigned
e4m3_encode_nonneg(float v, int rtz)
{
    uint32_t a = f2u(v) & 0x7FFFFFFFu;
    if (a > 0x7F800000u) {
        return E4M3_NAN_CODE;
    }
    if (a >= 0x43E00000u) {                          /* >= 448 (and +inf): satfinite */
        return E4M3_MAX_CODE;
    }
    int E = (int)(a >> 23);
    int et = E - 127 < -6 ? -6 : E - 127;            /* 1 - bias: the subnormal binade */
    int sh = et - (E ? E : 1) + 147;                 /* 150 - 3 mantissa bits */
    if (sh > 25) {
        sh = 25;
    }
    uint32_t sig = (a & 0x7FFFFFu) | (E ? 0x800000u : 0);
    uint32_t n = sig >> sh, r = sig & ((UINT32_C(1) << sh) - 1), half = (UINT32_C(1) << sh) >> 1;
    if (!rtz) {
        n += (r > half) | ((r == half) & (r != 0) & (n & 1));
    }
    uint32_t code = n + ((uint32_t)(et + 6) << 3);   /* a carry to n = 16 is the next binade */
    return code > E4M3_MAX_CODE ? E4M3_MAX_CODE : code;
}

/* fmt_encode(e2m1, y, rne, satfinite): §2.5's ladder with ties to the even
 * code, written as its seven thresholds (strict after an even code). */
static inline unsigned
e2m1_encode(float y)
{
    uint32_t u = f2u(y);
    float a = u2f(u & 0x7FFFFFFFu);
    const float *t = E2M1_THRESHOLDS;
    unsigned c = (a > t[0]) + (a >= t[1]) + (a > t[2]) + (a >= t[3])
               + (a > t[4]) + (a >= t[5]) + (a > t[6]);
    return c | ((u >> 28) & 8);
}

static inline int
clz32(uint32_t v)
{
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_clz(v);
#else
    int n = 0;
    while (!(v & 0x80000000u)) {
        v <<= 1;
        n++;
    }
    return n;
#endif
}

/* round(y) half-even for y already clamped to [0, 2^22]: adding 2^23 leaves
 * one unit in the last place. */
static inline int
rint_nonneg(float y)
{
    const float big = 8388608.0f;                 /* 2^23 */
    return (int)((y + big) - big);
}

/* round(y) half-even for |y| <= 2^22: 1.5 · 2^23 keeps the sum in [2^23, 2^24). */
static inline int
rint_signed(float y)
{
    const float big = 12582912.0f;                /* 1.5 · 2^23 */
    return (int)((y + big) - big);
}

static inline float
clampf(float y, float lo, float hi)
{
    return y > lo ? (y < hi ? y : hi) : lo;         /* NaN -> lo (never reached) */
}

static inline float
ld_f32le(const unsigned char *p)
{
    return u2f((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

/* §9.2 / §10.1: the shared exponent of a finite group, X = clamp(e − 2,
 * −127, 127) with e = floor(log2 amax) read from the bits of amax (or its
 * rne: +1 when f² > 2 for the significand f = M / 2^23, exactly in
 * integers); the all-zero group has X = 0, scale 1.0 (§9.1 rule 3). */
static inline int
mx_exponent(uint32_t amax, int rne)
{
    if (amax == 0) {
        return 0;
    }
    uint32_t E = amax >> 23, M;
    int e;
    if (E) {
        e = (int)E - 127;
        M = (amax & 0x7FFFFFu) | 0x800000u;
    } else {                                         /* binary32 subnormal */
        int lz = clz32(amax);
        e = (31 - lz) - 149;
        M = amax << (lz - 8);
    }
    if (rne && (uint64_t)M * M > (UINT64_C(1) << 47)) {
        e++;
    }
    int X = e - E2M1_EMAX;                           /* emax(E2M1) = 2: 6 = 1.5 · 2^2 */
    return X < -127 ? -127 : X > 127 ? 127 : X;
}

/* ------------------------------------------------------------------------
 * Threads: [0, units) is cut into contiguous parts; part 0 runs on the
 * calling thread.  A thread that cannot be started runs inline, so the
 * result is the same whatever happens. */

typedef void (*range_fn)(void *ctx, int part, size_t lo, size_t hi);

static inline int
n_parts(size_t units, int nthreads)
{
    if (nthreads < 1) {
        nthreads = 1;
    }
    if (nthreads > MAX_THREADS) {
        nthreads = MAX_THREADS;
    }
    if ((size_t)nthreads > units) {
        nthreads = units ? (int)units : 1;
    }
    return nthreads;
}

/* [0, units) in `parts` static parts */
GRIT_HIDDEN void grit_run_parts(range_fn fn, void *ctx, size_t units, int parts);
/* units [0, ngroups * gsize) dealt out in chunks from per-group counters
 * (common.c explains why); the static split where there are no threads */
GRIT_HIDDEN void grit_run_dealt_groups(range_fn fn, void *ctx, size_t gsize, int ngroups,
                                       int parts);
#if !defined(GRIT_NO_THREADS) && (defined(__GNUC__) || defined(__clang__))
GRIT_HIDDEN void grit_run_dealt(range_fn fn, void *ctx, size_t units, int parts);
#else
#define grit_run_dealt grit_run_parts
#endif

/* ------------------------------------------------------------------------
 * I8S24 metadata tables: one nibble per quad, index i0 in bits 0..1 and i1
 * in bits 2..3.  Filled at import (decode.c): per nibble, how many
 * positions it keeps and the slot of each position (0 masked, 1 the first
 * value handed out, 2 the second); per metadata byte, the positions its two
 * quads keep; with AVX2, per metadata byte k of a group, its PSHUFB control.
 * Constant (encode.c): the nibble of each 4-bit mask of two kept positions. */
GRIT_HIDDEN extern unsigned char grit_kept_per_meta_byte[256];
GRIT_HIDDEN extern unsigned char grit_kept_per_nibble[16];
GRIT_HIDDEN extern unsigned char grit_slot_of[16][4];
GRIT_HIDDEN void grit_init_i8(void);
#ifdef GRIT_AVX2
/* 8 binary32 lanes with every NaN made the canonical one (§1.2) */
TARGET_AVX2 static inline __m256
canon8(__m256 v)
{
    __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    return _mm256_blendv_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32((int)CANON_NAN)), nan);
}

/* t[idx & 15] for 8 lanes: tlo = t[0..7], thi = t[8..15] */
TARGET_AVX2 static inline __m256
lut16(__m256 tlo, __m256 thi, __m256i idx)
{
    __m256 lo = _mm256_permutevar8x32_ps(tlo, idx);             /* by the low 3 bits */
    __m256 hi = _mm256_permutevar8x32_ps(thi, idx);
    __m256 sel = _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)); /* bit 3 -> sign */
    return _mm256_blendv_ps(lo, hi, sel);
}

GRIT_HIDDEN extern uint64_t grit_shuf_of_meta[4][256];
GRIT_HIDDEN void grit_init_i8_shuffles(void);
#endif
GRIT_HIDDEN extern const unsigned char grit_pair_of_mask[16];


/* ------------------------------------------------------------------------
 * Set up the tables above and detect AVX2, once per process (threads.c);
 * 0 when the binary32 self-check fails (a miscompiled or non-IEEE build),
 * and then no kernel may be used. */
GRIT_HIDDEN int grit_core_init(void);

/* ------------------------------------------------------------------------
 * The codec kernels of the registered grades, over n elements in lin order
 * (n a multiple of the family's unit: 32 MXFP4, 16 NVF4, 256 Q4KS, 32
 * I8S24), on the canonical planes; `nthreads` is capped by MAX_THREADS and
 * by the work.  The caller has checked every size (decode.c, encode.c). */
enum grit_kind { GRIT_K_MXFP4 = 0, GRIT_K_NVF4 = 1, GRIT_K_Q4KS = 2, GRIT_K_I8S24 = 3 };
GRIT_HIDDEN extern const size_t grit_kind_unit[4];
GRIT_HIDDEN void grit_k_decode(int kind, const unsigned char *data, const unsigned char *scale0,
                               const unsigned char *scale1, const unsigned char *aux,
                               float *out, size_t n, int nthreads);
/* flag: MXFP4 the exp2rnemaxabs scale rule, NVF4 er = rtz; else ignored */
GRIT_HIDDEN void grit_k_encode(int kind, int flag, const float *x, size_t n, unsigned char *data,
                               unsigned char *scale0, unsigned char *scale1, unsigned char *aux,
                               int nthreads);

/* ------------------------------------------------------------------------
 * The fused ggml block decoders (ggml.c): kind ids as grit.native numbers
 * them; `blocks` whole blocks of src into blocks * elems floats */
#define GGML_KINDS 13
GRIT_HIDDEN extern const size_t grit_ggml_block_bytes[GGML_KINDS];
GRIT_HIDDEN extern const size_t grit_ggml_block_elems[GGML_KINDS];
GRIT_HIDDEN void grit_k_decode_ggml(int kind, const unsigned char *src, float *out, size_t blocks,
                                    int nthreads);
/* NVFP4 (ggml.c): blocks of 4 E4M3 scales then 32 bytes of codes, each run
 * of 8 bytes the 16 codes of one 64-bit word of LSB-first codes in ggml's
 * halves order (byte k: code k low, code k + 8 high) <-> the canonical
 * planes (32 code bytes and 4 scale bytes a block). */
GRIT_HIDDEN void grit_k_nvfp4_block(const unsigned char *codes, const unsigned char *scales,
                                    unsigned char *out, size_t blocks);
GRIT_HIDDEN void grit_k_nvfp4_unblock(const unsigned char *blocks, unsigned char *codes,
                                      unsigned char *scales, size_t nb);
/* MXFP4 (ggml.c): blocks of one E8M0 scale then 16 bytes of codes in halves
 * order over 32 (byte k: code k low, code k + 16 high) <-> the canonical
 * planes (16 code bytes and 1 scale byte a block). */
GRIT_HIDDEN void grit_k_mxfp4_block(const unsigned char *codes, const unsigned char *scales,
                                    unsigned char *out, size_t blocks);
GRIT_HIDDEN void grit_k_mxfp4_unblock(const unsigned char *blocks, unsigned char *codes,
                                      unsigned char *scales, size_t nb);
/* Q8_0 (ggml.c): blocks of a binary16 scale (2 bytes) then 32 int8 codes
 * <-> the canonical planes (32 code bytes and 2 scale bytes a block): the
 * fields moved as they are. */
GRIT_HIDDEN void grit_k_q8_0_block(const unsigned char *codes, const unsigned char *scales,
                                   unsigned char *out, size_t blocks);
GRIT_HIDDEN void grit_k_q8_0_unblock(const unsigned char *blocks, unsigned char *codes,
                                     unsigned char *scales, size_t nb);
/* 1 when nb blocks unblock (as above) to exactly the planes codes and
 * scales, else 0: the comparison without writing the planes */
GRIT_HIDDEN int grit_k_q8_0_unblock_eq(const unsigned char *blocks, const unsigned char *codes,
                                       const unsigned char *scales, size_t nb);
GRIT_HIDDEN int grit_k_nvfp4_unblock_eq(const unsigned char *blocks, const unsigned char *codes,
                                        const unsigned char *scales, size_t nb);
GRIT_HIDDEN int grit_k_mxfp4_unblock_eq(const unsigned char *blocks, const unsigned char *codes,
                                        const unsigned char *scales, size_t nb);

/* ------------------------------------------------------------------------
 * The relayout kernels (relayout.c, docs/placements.md): byte moves into a
 * caller buffer of the same size.  transpose: an R x C grid of `bits`-bit
 * units (4, or a multiple of 8) to C x R.  tile: rows x rowbytes in tiles of
 * tr rows x tcb bytes, chunks of w bytes placed at off[] (or back, inverse).
 * interleave: up to four fields of w[f] bytes per block into blocks of their
 * sum (fields with w[f] == 0 are absent), or back.  pack_k4: 8 u6 scales and
 * 8 u6 mins per group to PACK_K4_12B's 12 bytes, or back.  interleave_k4:
 * s1 (w1 bytes), the packed scales and mins, data (wd bytes) per block, or
 * back. */
GRIT_HIDDEN void grit_k_transpose(const unsigned char *src, unsigned char *dst, size_t R, size_t C,
                                  int bits, int msb, int nthreads);
/* off[k] for chunk k from the tile's chunk table tab (nchunks entries);
 * -1 when an entry is out of range (tab: nchunks int64 in native order, unaligned) */
GRIT_HIDDEN int grit_k_tile_offsets(const unsigned char *tab, size_t nchunks, size_t tcb, size_t w,
                                    size_t rowbytes, size_t *off);
GRIT_HIDDEN void grit_k_tile(const unsigned char *src, unsigned char *dst, size_t rows,
                             size_t rowbytes, size_t tr, size_t tcb, size_t w, const size_t *off,
                             int inverse, int nthreads);
GRIT_HIDDEN void grit_k_interleave(unsigned char *aos, unsigned char *const field[4],
                                   const size_t w[4], size_t blocks, int inverse, int nthreads);
GRIT_HIDDEN void grit_k_pack_k4(unsigned char *packed, unsigned char *sc, unsigned char *m,
                                size_t groups, int inverse, int nthreads);
GRIT_HIDDEN void grit_k_interleave_k4(unsigned char *aos, unsigned char *s1, unsigned char *sc,
                                      unsigned char *m, unsigned char *data, size_t w1,
                                      size_t wd, size_t blocks, int inverse, int nthreads);

#endif /* GRIT_CORE_H */
