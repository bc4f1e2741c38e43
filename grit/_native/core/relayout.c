/*
 * The relayout kernels (docs/placements.md) and their entry points
 * (core.h: grit_k_transpose, grit_k_tile, grit_k_interleave, grit_k_pack_k4,
 * grit_k_interleave_k4).
 */
#include "core.h"

/* ------------------------------------------------------------------------
 * Relayout fast paths (docs/placements.md).  Each is the same index map as
 * grit/placement/relayout.py's numpy path, executed as byte moves: a unit
 * grid transpose (ColMajor), copies of whole byte chunks of tiles
 * (Tile(P,[tr,tc]) whose inner map moves byte-aligned runs of units: 
 * TILE_16X16, SWIZZLE_128X4B, META_M16N8K32), per-block field copies
 * (BLOCK_AOS) and PACK_K4_12B's bit packing.  Integer moves only; results
 * never depend on the thread count. */

#if defined(__SSE2__) || defined(_M_X64)
#define GRIT_SSE2 1
#include <emmintrin.h>
#endif

#ifndef TR_BLOCK
#define TR_BLOCK 32          /* units per side of a cache block */
#endif
#ifndef TR_OUTER
#define TR_OUTER 512         /* ... inside blocks of this many (TLB reach) */
#endif

typedef struct {
    const unsigned char *src;
    unsigned char *dst;
    size_t R, C, ub;         /* source grid R x C of ub-byte units; dst is C x R */
    size_t bands, groups;    /* streaming kernels: unit u = band u % bands of column group u / bands */
} tr_ctx;

#ifdef GRIT_SSE2
/* 16 rows of 16 bytes -> v[j] = column j: four perfect shuffles, each
 * unpacking row i with row i + 8 (written out so that the rows stay in
 * registers). */
#define TR_UNPK(T, lo, hi, x, y, i)                                      \
    T y##_##i##a = lo(x[i], x[i + 8]);                                   \
    T y##_##i##b = hi(x[i], x[i + 8]);
/* one stage of the perfect shuffle on vectors of type T, for either width */
#define TR_STAGE_OF(T, lo, hi, x, y)                                     \
    do {                                                                 \
        TR_UNPK(T, lo, hi, x, y, 0) TR_UNPK(T, lo, hi, x, y, 1)          \
        TR_UNPK(T, lo, hi, x, y, 2) TR_UNPK(T, lo, hi, x, y, 3)          \
        TR_UNPK(T, lo, hi, x, y, 4) TR_UNPK(T, lo, hi, x, y, 5)          \
        TR_UNPK(T, lo, hi, x, y, 6) TR_UNPK(T, lo, hi, x, y, 7)          \
        y[0] = y##_0a; y[1] = y##_0b; y[2] = y##_1a; y[3] = y##_1b;      \
        y[4] = y##_2a; y[5] = y##_2b; y[6] = y##_3a; y[7] = y##_3b;      \
        y[8] = y##_4a; y[9] = y##_4b; y[10] = y##_5a; y[11] = y##_5b;    \
        y[12] = y##_6a; y[13] = y##_6b; y[14] = y##_7a; y[15] = y##_7b;  \
    } while (0)
#define TR_STAGE(x, y) TR_STAGE_OF(__m128i, _mm_unpacklo_epi8, _mm_unpackhi_epi8, x, y)

#if defined(__GNUC__) || defined(__clang__)
#define TR_INLINE static inline __attribute__((always_inline))
#else
#define TR_INLINE static inline
#endif

TR_INLINE void
tr16_load(const unsigned char *s, size_t ss, __m128i v[16])
{
    __m128i x[16];
#define TR_LD(i) x[i] = _mm_loadu_si128((const __m128i *)(s + (size_t)(i) * ss));
    TR_LD(0) TR_LD(1) TR_LD(2) TR_LD(3) TR_LD(4) TR_LD(5) TR_LD(6) TR_LD(7)
    TR_LD(8) TR_LD(9) TR_LD(10) TR_LD(11) TR_LD(12) TR_LD(13) TR_LD(14) TR_LD(15)
#undef TR_LD
    __m128i y[16];
    TR_STAGE(x, y);
    TR_STAGE(y, x);
    TR_STAGE(x, y);
    TR_STAGE(y, x);
    memcpy(v, x, sizeof x);
}
#endif

/* 4-bit units, LSB-first, R and C even (tr4_range's layout): the source byte
 * columns [j0, j1) x rows [r0, r1) (r0, r1 even), one byte pair at a time --
 * destination row 2j gets the low nibbles of source column j, row 2j + 1 the
 * high ones. */
static void
tr4_pairs(const unsigned char *s, unsigned char *d, size_t Cb, size_t Rb, size_t j0,
          size_t j1, size_t r0, size_t r1)
{
    for (size_t j = j0; j < j1; j++) {
        for (size_t rr = r0; rr < r1; rr += 2) {
            unsigned a = s[rr * Cb + j], b = s[(rr + 1) * Cb + j];
            d[2 * j * Rb + rr / 2] = (unsigned char)((a & 15) | (b << 4));
            d[(2 * j + 1) * Rb + rr / 2] = (unsigned char)((a >> 4) | (b & 0xF0));
        }
    }
}

/* Byte units: the rectangle rows [r0, r1) x columns [cb, cb1) of the source,
 * 16 x 16 register transposes where they fit, bytes elsewhere. */
static void
tr1_rect(const unsigned char *s, unsigned char *d, size_t R, size_t C, size_t r0, size_t r1,
         size_t cb, size_t cb1)
{
    size_t r = r0;
#ifdef GRIT_SSE2
    for (; r + 16 <= r1; r += 16) {
        size_t cc = cb;
        for (; cc + 16 <= cb1; cc += 16) {
            __m128i v[16];
            tr16_load(s + r * C + cc, C, v);
            for (int j = 0; j < 16; j++) {
                _mm_storeu_si128((__m128i *)(d + (cc + j) * R + r), v[j]);
            }
        }
        for (; cc < cb1; cc++) {
            for (size_t rr = r; rr < r + 16; rr++) {
                d[cc * R + rr] = s[rr * C + cc];
            }
        }
    }
#endif
    for (size_t cc = cb; cc < cb1; cc++) {
        for (size_t rr = r; rr < r1; rr++) {
            d[cc * R + rr] = s[rr * C + cc];
        }
    }
}

#ifdef GRIT_SSE2
/* Destination-major staging: a TRS x TRS tile reads TRS whole source lines
 * and writes TRS whole destination lines, each once; the transposed tile is
 * built in a small local buffer (no cache-set conflicts for power-of-two
 * strides) and copied out a full line at a time. */
#define TRS 64
static void
tr1_tile(const unsigned char *s, unsigned char *d, size_t R, size_t C, size_t r0, size_t c0)
{
    __m128i st[TRS * TRS / 16];
    unsigned char *sb = (unsigned char *)st;
    for (size_t r = 0; r < TRS; r += 16) {
        for (size_t cc = 0; cc < TRS; cc += 16) {
            __m128i v[16];
            tr16_load(s + (r0 + r) * C + c0 + cc, C, v);
            for (int j = 0; j < 16; j++) {
                _mm_store_si128((__m128i *)(sb + (cc + j) * TRS + r), v[j]);
            }
        }
    }
    for (size_t j = 0; j < TRS; j++) {
        unsigned char *o = d + (c0 + j) * R + r0;
        const __m128i *q = (const __m128i *)(sb + j * TRS);
        _mm_storeu_si128((__m128i *)o, q[0]);
        _mm_storeu_si128((__m128i *)(o + 16), q[1]);
        _mm_storeu_si128((__m128i *)(o + 32), q[2]);
        _mm_storeu_si128((__m128i *)(o + 48), q[3]);
    }
}
#endif

#if defined(GRIT_SSE2) && defined(GRIT_AVX2)
/* The same perfect shuffles on 32-byte rows: each 128-bit lane transposes
 * its own 16 x 16 block, so 16 rows of 32 bytes give v[j] = (column j,
 * column 16 + j) of those rows. */
#define TR8_STAGE(x, y)                                                  \
    TR_STAGE_OF(__m256i, _mm256_unpacklo_epi8, _mm256_unpackhi_epi8, x, y)

TARGET_AVX2 static inline __attribute__((always_inline)) void
tr16x32_load(const unsigned char *s, size_t ss, __m256i v[16])
{
    __m256i x[16];
#define TR8_LD(i) x[i] = _mm256_loadu_si256((const __m256i *)(s + (size_t)(i) * ss));
    TR8_LD(0) TR8_LD(1) TR8_LD(2) TR8_LD(3) TR8_LD(4) TR8_LD(5) TR8_LD(6) TR8_LD(7)
    TR8_LD(8) TR8_LD(9) TR8_LD(10) TR8_LD(11) TR8_LD(12) TR8_LD(13) TR8_LD(14) TR8_LD(15)
#undef TR8_LD
    __m256i y[16];
    TR8_STAGE(x, y);
    TR8_STAGE(y, x);
    TR8_STAGE(x, y);
    TR8_STAGE(y, x);
    memcpy(v, x, sizeof x);
}

/* one 32 x 32 byte block: source rows at stride ss -> destination rows at
 * stride os */
TARGET_AVX2 static inline __attribute__((always_inline)) void
tr32_avx2(const unsigned char *p, size_t ss, unsigned char *o, size_t os)
{
    __m256i a[16], b[16];
    tr16x32_load(p, ss, a);
    tr16x32_load(p + 16 * ss, ss, b);
    for (int j = 0; j < 16; j++) {
        _mm256_storeu_si256((__m256i *)(o + j * os), _mm256_permute2x128_si256(a[j], b[j], 0x20));
        _mm256_storeu_si256((__m256i *)(o + (16 + j) * os),
                            _mm256_permute2x128_si256(a[j], b[j], 0x31));
    }
}

/* tr1_tile with 32 x 32 register transposes written straight to the
 * destination: rows [r, r + 16) give the low halves and rows [r + 16, r + 32)
 * the high halves of 32 destination rows of 32 bytes each (the 512 x 512
 * outer blocks keep the destination lines cached until their other halves
 * arrive, so no staging buffer is needed). */
TARGET_AVX2 static void
tr1_tile_avx2(const unsigned char *s, unsigned char *d, size_t R, size_t C, size_t r0,
              size_t c0)
{
    for (size_t r = 0; r < TRS; r += 32) {
        for (size_t cc = 0; cc < TRS; cc += 32) {
            tr32_avx2(s + (r0 + r) * C + c0 + cc, C, d + (c0 + cc) * R + r0 + r, R);
        }
    }
}

/* 4-bit units (tr4_range's layout): 64 source rows x 32 source bytes -> 64
 * destination rows x 32 bytes.  Four 16 x 32 register transposes give, for
 * byte column k, its 64 rows; the even/odd row nibbles are then paired into
 * bytes (16-bit lanes, packus) and each destination row gets one 32-byte
 * store. */
#define NIB_LO(x) _mm256_and_si256(_mm256_or_si256(_mm256_and_si256((x), m0f),          \
                                   _mm256_srli_epi16(_mm256_and_si256((x), m0f), 4)), mff)
#define NIB_HI(x) _mm256_and_si256(                                                    \
    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16((x), 4), m0f),                  \
                    _mm256_srli_epi16(_mm256_and_si256(_mm256_srli_epi16((x), 4), m0f), 4)), mff)
TARGET_AVX2 static void
tr4_tile_avx2(const unsigned char *s, size_t Cb, size_t r, size_t j, unsigned char *out,
              size_t os)
{
    const __m256i m0f = _mm256_set1_epi8(0x0F), mff = _mm256_set1_epi16(0x00FF);
    __m256i a[16], b[16], c[16], e[16];
    const unsigned char *p = s + r * Cb + j;
    tr16x32_load(p, Cb, a);
    tr16x32_load(p + 16 * Cb, Cb, b);
    tr16x32_load(p + 32 * Cb, Cb, c);
    tr16x32_load(p + 48 * Cb, Cb, e);
    for (int k = 0; k < 16; k++) {
        __m256i lo01 = _mm256_packus_epi16(NIB_LO(a[k]), NIB_LO(b[k]));
        __m256i lo23 = _mm256_packus_epi16(NIB_LO(c[k]), NIB_LO(e[k]));
        __m256i hi01 = _mm256_packus_epi16(NIB_HI(a[k]), NIB_HI(b[k]));
        __m256i hi23 = _mm256_packus_epi16(NIB_HI(c[k]), NIB_HI(e[k]));
        unsigned char *o0 = out + 2 * (size_t)k * os, *o1 = out + 2 * (size_t)(16 + k) * os;
        _mm256_storeu_si256((__m256i *)o0, _mm256_permute2x128_si256(lo01, lo23, 0x20));
        _mm256_storeu_si256((__m256i *)(o0 + os), _mm256_permute2x128_si256(hi01, hi23, 0x20));
        _mm256_storeu_si256((__m256i *)o1, _mm256_permute2x128_si256(lo01, lo23, 0x31));
        _mm256_storeu_si256((__m256i *)(o1 + os), _mm256_permute2x128_si256(hi01, hi23, 0x31));
    }
}
#undef NIB_LO
#undef NIB_HI

/* Grids of NT_MIN bytes or more: bands of source rows are walked along the
 * row (the source is read in long runs), each tile is transposed into a
 * small staging buffer, and every destination line is written whole, once,
 * with streaming stores -- no read-for-ownership of the output, as glibc's
 * memcpy does for large copies.  Smaller outputs stay in the cache for
 * whoever reads them next.  Measured side by side (2 threads, fresh output):
 * a 4 MiB byte transpose runs 1.3-1.5x faster streamed, a 2 MiB one 0.9x. */
#ifndef NT_MIN
#define NT_MIN ((size_t)4 << 20)
#endif

TARGET_AVX2 static inline void
stream_lines(const unsigned char *st, unsigned char *d, size_t ds, int lines)
{
    for (int j = 0; j < lines; j++) {
        const __m256i *q = (const __m256i *)(st + (size_t)j * 64);
        _mm256_stream_si256((__m256i *)(d + (size_t)j * ds), _mm256_load_si256(q));
        _mm256_stream_si256((__m256i *)(d + (size_t)j * ds + 32), _mm256_load_si256(q + 1));
    }
}

/* rows lines of 64 bytes at stride ss -> a contiguous staging buffer: each
 * source line is read once, whole.  Power-of-two row strides (most tensor
 * shapes) put a tile's source lines in a handful of cache sets; read in
 * pieces straight from the source, lines were evicted between pieces and
 * fetched again (a 64 MiB transpose went from 4.7 to 6.1 GB/s on one
 * thread with this staging, a 16 MiB one from 4.9 to 7.4) */
TARGET_AVX2 static inline void
stage_lines(const unsigned char *s, size_t ss, unsigned char *st, int rows)
{
    for (int r = 0; r < rows; r++) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(s + (size_t)r * ss));
        __m256i b = _mm256_loadu_si256((const __m256i *)(s + (size_t)r * ss + 32));
        _mm256_store_si256((__m256i *)(st + (size_t)r * 64), a);
        _mm256_store_si256((__m256i *)(st + (size_t)r * 64 + 32), b);
    }
}

/* unit u of a streaming transpose: band *b, whole column tiles [*t0, *t1) of
 * `tiles`; the last group also takes the columns past the whole tiles */
static inline int
band_unit(const tr_ctx *c, size_t u, size_t tiles, size_t *b, size_t *t0, size_t *t1)
{
    const size_t g = u / c->bands;
    *b = u % c->bands;
    *t0 = tiles * g / c->groups;
    *t1 = tiles * (g + 1) / c->groups;
    return g + 1 == c->groups;
}

/* nibbles (tr4_range's layout): bands of 128 source rows, i.e. 64
 * bytes of each destination row, staged 64 source bytes (128 destination
 * rows) at a time; a last 32-byte column straight from the source, byte
 * columns past that by the scalar pairing */
TARGET_AVX2 static void
tr4_band_nt(void *p, int part, size_t lo, size_t hi)
{
    tr_ctx *c = (tr_ctx *)p;
    const size_t Cb = c->C / 2, Rb = c->R / 2, j64 = Cb / 64 * 64, jf = Cb / 32 * 32;
    const unsigned char *s = c->src;
    unsigned char *d = c->dst;
    _Alignas(32) unsigned char in[128 * 64], st[64 * 64];
    (void)part;
    for (size_t u = lo; u < hi; u++) {
        size_t b, t0, t1;
        const int last = band_unit(c, u, j64 / 64, &b, &t0, &t1);
        const size_t r0 = b * 128;
        for (size_t jb = t0 * 64; jb < t1 * 64; jb += 64) {
            stage_lines(s + r0 * Cb + jb, Cb, in, 128);
            for (size_t h = 0; h < 64; h += 32) {
                tr4_tile_avx2(in, 64, 0, h, st, 64);
                tr4_tile_avx2(in, 64, 64, h, st + 32, 64);
                stream_lines(st, d + 2 * (jb + h) * Rb + r0 / 2, Rb, 64);
            }
        }
        if (!last) {
            continue;
        }
        if (j64 < jf) {
            tr4_tile_avx2(s, Cb, r0, j64, st, 64);
            tr4_tile_avx2(s, Cb, r0 + 64, j64, st + 32, 64);
            stream_lines(st, d + 2 * j64 * Rb + r0 / 2, Rb, 64);
        }
        tr4_pairs(s, d, Cb, Rb, jf, Cb, r0, r0 + 128);
    }
    _mm_sfence();
}
#endif

#ifdef GRIT_SSE2
/* Two-byte units: an 8 x 8 block (rows of 16 bytes at stride ss) to the
 * transposed block at stride ds, by three rounds of unpacks. */
static inline void
tr2_8x8(const unsigned char *s, size_t ss, unsigned char *d, size_t ds)
{
    __m128i x[8], y[8];
    for (int i = 0; i < 8; i++) {
        x[i] = _mm_loadu_si128((const __m128i *)(s + (size_t)i * ss));
    }
    for (int i = 0; i < 4; i++) {
        y[2 * i] = _mm_unpacklo_epi16(x[2 * i], x[2 * i + 1]);
        y[2 * i + 1] = _mm_unpackhi_epi16(x[2 * i], x[2 * i + 1]);
    }
    /* y0 = r0r1 cols 0-3, y1 = r0r1 cols 4-7, y2 = r2r3 cols 0-3, ... */
    x[0] = _mm_unpacklo_epi32(y[0], y[2]);      /* r0-3 cols 0,1 */
    x[1] = _mm_unpackhi_epi32(y[0], y[2]);      /* r0-3 cols 2,3 */
    x[2] = _mm_unpacklo_epi32(y[1], y[3]);      /* r0-3 cols 4,5 */
    x[3] = _mm_unpackhi_epi32(y[1], y[3]);      /* r0-3 cols 6,7 */
    x[4] = _mm_unpacklo_epi32(y[4], y[6]);      /* r4-7 cols 0,1 */
    x[5] = _mm_unpackhi_epi32(y[4], y[6]);
    x[6] = _mm_unpacklo_epi32(y[5], y[7]);
    x[7] = _mm_unpackhi_epi32(y[5], y[7]);
    for (int k = 0; k < 4; k++) {
        _mm_storeu_si128((__m128i *)(d + (size_t)(2 * k) * ds),
                         _mm_unpacklo_epi64(x[k], x[4 + k]));
        _mm_storeu_si128((__m128i *)(d + (size_t)(2 * k + 1) * ds),
                         _mm_unpackhi_epi64(x[k], x[4 + k]));
    }
}
#endif

#if defined(GRIT_SSE2) && defined(GRIT_AVX2)
/* Streaming transposes of whole-byte units (1 or 2 bytes): bands of
 * n = 64 / ub source rows, tiles of n x n units -- one 64-byte line of each
 * of n destination rows.  Each tile's n source lines are staged whole, the
 * tile is transposed into a second staging tile, and its n destination
 * lines are streamed.  `tail` moves the columns past the last whole tile. */
typedef void (*stage_tr_fn)(const unsigned char *in, unsigned char *st);
typedef void (*band_tail_fn)(const tr_ctx *c, size_t r0);

TARGET_AVX2 static inline __attribute__((always_inline)) void
band_nt(tr_ctx *c, size_t lo, size_t hi, const size_t ub, stage_tr_fn tile, band_tail_fn tail)
{
    const size_t R = c->R, C = c->C, n = 64 / ub;  /* constants where inlined */
    _Alignas(32) unsigned char in[64 * 64], st[64 * 64];
    for (size_t u = lo; u < hi; u++) {
        size_t b, t0, t1;
        const int last = band_unit(c, u, C / n, &b, &t0, &t1);
        const size_t r0 = b * n;
        for (size_t cb = t0 * n; cb < t1 * n; cb += n) {
            stage_lines(c->src + ub * (r0 * C + cb), ub * C, in, (int)n);
            tile(in, st);
            stream_lines(st, c->dst + ub * (cb * R + r0), ub * R, (int)n);
        }
        if (last) {
            tail(c, r0);
        }
    }
    _mm_sfence();
}

/* bytes: a 64 x 64 tile by four 32 x 32 register transposes */
TARGET_AVX2 static void
stage_tr1(const unsigned char *in, unsigned char *st)
{
    for (size_t r = 0; r < 64; r += 32) {
        for (size_t cc = 0; cc < 64; cc += 32) {
            tr32_avx2(in + r * 64 + cc, 64, st + cc * 64 + r, 64);
        }
    }
}

static void
tail_tr1(const tr_ctx *c, size_t r0)
{
    const size_t cf = c->C / 64 * 64;
    if (cf < c->C) {
        tr1_rect(c->src, c->dst, c->R, c->C, r0, r0 + 64, cf, c->C);
    }
}

/* two-byte units: a 32 x 32 tile by sixteen 8 x 8 transposes */
static void
stage_tr2(const unsigned char *in, unsigned char *st)
{
    for (size_t bi = 0; bi < 32; bi += 8) {
        for (size_t bj = 0; bj < 32; bj += 8) {
            tr2_8x8(in + bi * 64 + 2 * bj, 64, st + bj * 64 + 2 * bi, 64);
        }
    }
}

static void
tail_tr2(const tr_ctx *c, size_t r0)
{
    const size_t R = c->R, C = c->C;
    for (size_t cc = C / 32 * 32; cc < C; cc++) {
        for (size_t rr = r0; rr < r0 + 32; rr++) {
            memcpy(c->dst + 2 * (cc * R + rr), c->src + 2 * (rr * C + cc), 2);
        }
    }
}

TARGET_AVX2 static void
tr1_band_nt(void *p, int part, size_t lo, size_t hi)
{
    (void)part;
    band_nt((tr_ctx *)p, lo, hi, 1, stage_tr1, tail_tr1);
}

TARGET_AVX2 static void
tr2_band_nt(void *p, int part, size_t lo, size_t hi)
{
    (void)part;
    band_nt((tr_ctx *)p, lo, hi, 2, stage_tr2, tail_tr2);
}
#endif

/* dst rows (source columns) [lo, hi) in blocks */
static void
tr_range(void *p, int part, size_t lo, size_t hi)
{
    tr_ctx *c = (tr_ctx *)p;
    const size_t R = c->R, C = c->C, ub = c->ub;
    (void)part;
    size_t c0 = lo * TR_BLOCK, c1 = hi * TR_BLOCK;
    if (c1 > C) {
        c1 = C;
    }
    if (ub == 1) {
        size_t cf = c0, rf = 0;
#ifdef GRIT_SSE2
        cf = c0 + (c1 - c0) / TRS * TRS;
        rf = R / TRS * TRS;
        for (size_t co = c0; co < cf; co += TR_OUTER) {          /* TLB reach */
            size_t co1 = co + TR_OUTER < cf ? co + TR_OUTER : cf;
            for (size_t ro = 0; ro < rf; ro += TR_OUTER) {
                size_t ro1 = ro + TR_OUTER < rf ? ro + TR_OUTER : rf;
                for (size_t cb = co; cb < co1; cb += TRS) {
                    for (size_t r0 = ro; r0 < ro1; r0 += TRS) {
#ifdef GRIT_AVX2
                        if (grit_use_avx2) {
                            tr1_tile_avx2(c->src, c->dst, R, C, r0, cb);
                            continue;
                        }
#endif
                        tr1_tile(c->src, c->dst, R, C, r0, cb);
                    }
                }
            }
        }
#endif
        if (rf < R && cf > c0) {
            tr1_rect(c->src, c->dst, R, C, rf, R, c0, cf);
        }
        if (cf < c1) {
            tr1_rect(c->src, c->dst, R, C, 0, R, cf, c1);
        }
        return;
    }
    for (size_t co = c0; co < c1; co += TR_OUTER) {
    size_t co1 = co + TR_OUTER < c1 ? co + TR_OUTER : c1;
    for (size_t ro = 0; ro < R; ro += TR_OUTER) {
    size_t ro1 = ro + TR_OUTER < R ? ro + TR_OUTER : R;
    for (size_t cb = co; cb < co1; cb += TR_BLOCK) {
        size_t cb1 = cb + TR_BLOCK < co1 ? cb + TR_BLOCK : co1;
        for (size_t r0 = ro; r0 < ro1; r0 += TR_BLOCK) {
            size_t r1 = r0 + TR_BLOCK < ro1 ? r0 + TR_BLOCK : ro1;
            if (ub == 2) {
                size_t r8 = r0;
#ifdef GRIT_SSE2
                /* 8 x 8 two-byte transposes in registers, the edges below */
                r8 = r0 + (r1 - r0) / 8 * 8;
                const size_t c8 = cb + (cb1 - cb) / 8 * 8;
                for (size_t rr = r0; rr < r8; rr += 8) {
                    for (size_t cc = cb; cc < c8; cc += 8) {
                        tr2_8x8(c->src + 2 * (rr * C + cc), 2 * C, c->dst + 2 * (cc * R + rr),
                                2 * R);
                    }
                }
                for (size_t cc = c8; cc < cb1; cc++) {
                    for (size_t rr = r0; rr < r8; rr++) {
                        memcpy(c->dst + 2 * (cc * R + rr), c->src + 2 * (rr * C + cc), 2);
                    }
                }
#endif
                for (size_t cc = cb; cc < cb1; cc++) {
                    for (size_t rr = r8; rr < r1; rr++) {
                        memcpy(c->dst + 2 * (cc * R + rr), c->src + 2 * (rr * C + cc), 2);
                    }
                }
            } else if (ub == 4) {
                for (size_t cc = cb; cc < cb1; cc++) {
                    for (size_t rr = r0; rr < r1; rr++) {
                        memcpy(c->dst + 4 * (cc * R + rr), c->src + 4 * (rr * C + cc), 4);
                    }
                }
            } else {
                for (size_t cc = cb; cc < cb1; cc++) {
                    for (size_t rr = r0; rr < r1; rr++) {
                        memcpy(c->dst + ub * (cc * R + rr), c->src + ub * (rr * C + cc), ub);
                    }
                }
            }
        }
    }
        }
    }
}

/* 4-bit units, LSB-first, R and C even: source byte (r, j) holds units
 * (r, 2j) low and (r, 2j+1) high; dst row 2j gets the low nibbles of
 * source column j, row 2j+1 the high ones.  Work: pairs of dst rows. */
static void
tr4_range(void *p, int part, size_t lo, size_t hi)
{
    tr_ctx *c = (tr_ctx *)p;
    const size_t R = c->R, Cb = c->C / 2, Rb = R / 2;
    const unsigned char *s = c->src;
    unsigned char *d = c->dst;
    (void)part;
    size_t j0 = lo * TR_BLOCK, j1 = hi * TR_BLOCK;
    if (j1 > Cb) {
        j1 = Cb;
    }
    for (size_t jo = j0; jo < j1; jo += TR_OUTER / 2) {
    size_t jo1 = jo + TR_OUTER / 2 < j1 ? jo + TR_OUTER / 2 : j1;
    for (size_t ro = 0; ro < R; ro += TR_OUTER) {
    size_t ro1 = ro + TR_OUTER < R ? ro + TR_OUTER : R;
    for (size_t jb = jo; jb < jo1; jb += TR_BLOCK) {
        size_t jb1 = jb + TR_BLOCK < jo1 ? jb + TR_BLOCK : jo1;
        for (size_t r0 = ro; r0 < ro1; r0 += 2 * TR_BLOCK) {
            size_t r1 = r0 + 2 * TR_BLOCK < ro1 ? r0 + 2 * TR_BLOCK : ro1;
            size_t r = r0;
#ifdef GRIT_SSE2
#ifdef GRIT_AVX2
            if (grit_use_avx2 && jb1 - jb == 32) {
                for (; r + 64 <= r1; r += 64) {
                    tr4_tile_avx2(s, Cb, r, jb, d + 2 * jb * Rb + r / 2, Rb);
                }
            }
#endif
            const __m128i m0f = _mm_set1_epi8(0x0F), mff = _mm_set1_epi16(0x00FF);
            for (; r + 32 <= r1; r += 32) {
                size_t j = jb;
                for (; j + 16 <= jb1; j += 16) {
                    __m128i a[16], b[16];
                    tr16_load(s + r * Cb + j, Cb, a);
                    tr16_load(s + (r + 16) * Cb + j, Cb, b);
                    for (int k = 0; k < 16; k++) {
                        __m128i la = _mm_and_si128(a[k], m0f), lb = _mm_and_si128(b[k], m0f);
                        __m128i ha = _mm_and_si128(_mm_srli_epi16(a[k], 4), m0f);
                        __m128i hb = _mm_and_si128(_mm_srli_epi16(b[k], 4), m0f);
                        la = _mm_and_si128(_mm_or_si128(la, _mm_srli_epi16(la, 4)), mff);
                        lb = _mm_and_si128(_mm_or_si128(lb, _mm_srli_epi16(lb, 4)), mff);
                        ha = _mm_and_si128(_mm_or_si128(ha, _mm_srli_epi16(ha, 4)), mff);
                        hb = _mm_and_si128(_mm_or_si128(hb, _mm_srli_epi16(hb, 4)), mff);
                        _mm_storeu_si128((__m128i *)(d + 2 * (j + k) * Rb + r / 2),
                                         _mm_packus_epi16(la, lb));
                        _mm_storeu_si128((__m128i *)(d + (2 * (j + k) + 1) * Rb + r / 2),
                                         _mm_packus_epi16(ha, hb));
                    }
                }
                tr4_pairs(s, d, Cb, Rb, j, jb1, r, r + 32);
            }
#endif
            tr4_pairs(s, d, Cb, Rb, jb, jb1, r, r1);
        }
    }
        }
    }
}

/* 4-bit units, any R, C (one thread: a byte may hold two columns' units);
 * msb: unit 2i in the high nibble.  dst is zeroed first (padding nibble). */
static void
tr4_any(const unsigned char *s, unsigned char *d, size_t R, size_t C, int msb)
{
    size_t n = R * C;
    memset(d, 0, (n + 1) / 2);
    int sh0 = msb ? 4 : 0, sh1 = msb ? 0 : 4;
    for (size_t r0 = 0; r0 < R; r0 += TR_BLOCK) {
        size_t r1 = r0 + TR_BLOCK < R ? r0 + TR_BLOCK : R;
        for (size_t c0 = 0; c0 < C; c0 += TR_BLOCK) {
            size_t c1 = c0 + TR_BLOCK < C ? c0 + TR_BLOCK : C;
            for (size_t cc = c0; cc < c1; cc++) {
                for (size_t rr = r0; rr < r1; rr++) {
                    size_t i = rr * C + cc, o = cc * R + rr;
                    unsigned v = (s[i >> 1] >> ((i & 1) ? sh1 : sh0)) & 15u;
                    d[o >> 1] |= (unsigned char)(v << ((o & 1) ? sh1 : sh0));
                }
            }
        }
    }
}

/* Tiles of tr rows x tcb bytes over a grid of rows of rowbytes bytes, each
 * tile stored as nchunks chunks of w bytes: chunk s of a tile is the
 * tile's logical chunk tab[s] (row tab[s] / m, chunk tab[s] % m, m = tcb / w).
 * inverse: the scatter back. */
typedef struct {
    const unsigned char *src;
    unsigned char *dst;
    size_t rowbytes, tr, tcb, w, nct, nchunks;
    const size_t *off;       /* byte offset of each chunk's logical place in the tile */
    int inverse;
    int rows_whole;          /* chunk k is tile row k, whole (w == tcb): TILE_16X16 */
} tile_ctx;

#define TILE_LOOP(W)                                                               \
    for (size_t t = lo; t < hi; t++) {                                             \
        size_t band = t / nct, tcol = t % nct;                                     \
        unsigned char *ph = phys + t * tile_bytes;                                 \
        unsigned char *lg = logi + band * band_bytes + tcol * tcb;                 \
        if (!inverse) {                                                            \
            for (size_t k = 0; k < nchunks; k++) {                                 \
                memcpy(ph + k * (W), lg + off[k], (W));                            \
            }                                                                      \
        } else {                                                                   \
            for (size_t k = 0; k < nchunks; k++) {                                 \
                memcpy(lg + off[k], ph + k * (W), (W));                            \
            }                                                                      \
        }                                                                          \
    }

static void
tile_run(const tile_ctx *c, size_t lo, size_t hi)
{
    /* locals: stores through unsigned char * would otherwise reload *c */
    const int inverse = c->inverse;
    unsigned char *phys = (unsigned char *)(inverse ? c->src : c->dst);
    unsigned char *logi = (unsigned char *)(inverse ? c->dst : c->src);
    const size_t nct = c->nct, tcb = c->tcb, nchunks = c->nchunks, w = c->w;
    const size_t tile_bytes = c->tr * c->tcb, band_bytes = c->tr * c->rowbytes;
    size_t offbuf[512];
    const size_t *off = c->off;
    if (nchunks <= 512) {
        memcpy(offbuf, c->off, nchunks * sizeof(size_t));
        off = offbuf;
    }
    switch (w) {
    case 1: TILE_LOOP(1) break;
    case 2: TILE_LOOP(2) break;
    case 4: TILE_LOOP(4) break;
    case 8: TILE_LOOP(8) break;
    case 16: TILE_LOOP(16) break;
    case 32: TILE_LOOP(32) break;
    case 64: TILE_LOOP(64) break;
    default: TILE_LOOP(w) break;
    }
}

#ifdef GRIT_AVX2
/* Tiles stored row by row (rows_whole), tcb 8 or 16: G = 32 / tcb tiles
 * side by side are one 32-byte load per grid row, and the tile-major and
 * row-major orders of a G x G block of tcb-byte pieces are each other's
 * transpose -- a 4 x 4 transpose of 8-byte lanes (tcb 8) or a 2 x 2 one of
 * 16-byte halves (tcb 16), both directions alike.  Tiles left over at the
 * end of a band or of the range go through tile_run. */
TARGET_AVX2 static inline __attribute__((always_inline)) void
tr4x4_q(const unsigned char *s0, size_t ss, unsigned char *d0, size_t ds)
{
    __m256i a0 = _mm256_loadu_si256((const __m256i *)s0);
    __m256i a1 = _mm256_loadu_si256((const __m256i *)(s0 + ss));
    __m256i a2 = _mm256_loadu_si256((const __m256i *)(s0 + 2 * ss));
    __m256i a3 = _mm256_loadu_si256((const __m256i *)(s0 + 3 * ss));
    __m256i t0 = _mm256_unpacklo_epi64(a0, a1), t1 = _mm256_unpackhi_epi64(a0, a1);
    __m256i t2 = _mm256_unpacklo_epi64(a2, a3), t3 = _mm256_unpackhi_epi64(a2, a3);
    _mm256_storeu_si256((__m256i *)d0, _mm256_permute2x128_si256(t0, t2, 0x20));
    _mm256_storeu_si256((__m256i *)(d0 + ds), _mm256_permute2x128_si256(t1, t3, 0x20));
    _mm256_storeu_si256((__m256i *)(d0 + 2 * ds), _mm256_permute2x128_si256(t0, t2, 0x31));
    _mm256_storeu_si256((__m256i *)(d0 + 3 * ds), _mm256_permute2x128_si256(t1, t3, 0x31));
}

TARGET_AVX2 static inline __attribute__((always_inline)) void
tr2x2_x(const unsigned char *s0, size_t ss, unsigned char *d0, size_t ds)
{
    __m256i a0 = _mm256_loadu_si256((const __m256i *)s0);
    __m256i a1 = _mm256_loadu_si256((const __m256i *)(s0 + ss));
    _mm256_storeu_si256((__m256i *)d0, _mm256_permute2x128_si256(a0, a1, 0x20));
    _mm256_storeu_si256((__m256i *)(d0 + ds), _mm256_permute2x128_si256(a0, a1, 0x31));
}

TARGET_AVX2 static void
tile_rows_avx2(const tile_ctx *c, size_t lo, size_t hi)
{
    const int inverse = c->inverse;
    unsigned char *phys = (unsigned char *)(inverse ? c->src : c->dst);
    unsigned char *logi = (unsigned char *)(inverse ? c->dst : c->src);
    const size_t nct = c->nct, tcb = c->tcb, tr = c->tr, rb = c->rowbytes;
    const size_t tile_bytes = tr * tcb, band_bytes = tr * rb, G = 32 / tcb;
    size_t t = lo;
    while (t < hi) {
        const size_t band = t / nct, tcol = t % nct;
        /* this band's tiles [t, end): columns [tcol, g) in groups of G */
        const size_t end = (band + 1) * nct < hi ? (band + 1) * nct : hi;
        const size_t g = tcol + (end - t) / G * G;
        unsigned char *lb = logi + band * band_bytes;
        unsigned char *pb = phys + band * nct * tile_bytes;
        for (size_t q = tcol; q < g; q += G) {
            unsigned char *ph = pb + q * tile_bytes, *lg = lb + q * tcb;
            if (G == 4 && !inverse) {
                for (size_t r = 0; r < tr; r += 4) {
                    tr4x4_q(lg + r * rb, rb, ph + r * 8, tile_bytes);
                }
            } else if (G == 4) {
                for (size_t r = 0; r < tr; r += 4) {
                    tr4x4_q(ph + r * 8, tile_bytes, lg + r * rb, rb);
                }
            } else if (!inverse) {
                for (size_t r = 0; r < tr; r += 2) {
                    tr2x2_x(lg + r * rb, rb, ph + r * 16, tile_bytes);
                }
            } else {
                for (size_t r = 0; r < tr; r += 2) {
                    tr2x2_x(ph + r * 16, tile_bytes, lg + r * rb, rb);
                }
            }
        }
        t += g - tcol;
        if (t < end) {
            tile_run(c, t, end);
            t = end;
        }
    }
}
#endif

static void
tile_range(void *p, int part, size_t lo, size_t hi)
{
    const tile_ctx *c = (const tile_ctx *)p;
    (void)part;
#ifdef GRIT_AVX2
    if (grit_use_avx2 && c->rows_whole
        && ((c->tcb == 8 && c->tr % 4 == 0) || (c->tcb == 16 && c->tr % 2 == 0))) {
        tile_rows_avx2(c, lo, hi);
        return;
    }
#endif
    tile_run(c, lo, hi);
}

/* BLOCK_AOS: nf fields of widths w[f] per block, in that order. */
typedef struct {
    unsigned char *aos;
    unsigned char *field[4];
    size_t w[4], off[4], block;
    int nf, inverse;
} ilv_ctx;

#define ILV_LOOP(W)                                                        \
    if (!inverse) {                                                        \
        for (size_t b = b0; b < b1; b++) {                                 \
            memcpy(aos + b * block + off, fs + b * (W), (W));              \
        }                                                                  \
    } else {                                                               \
        for (size_t b = b0; b < b1; b++) {                                 \
            memcpy(fs + b * (W), aos + b * block + off, (W));              \
        }                                                                  \
    }

#ifndef ILV_CHUNK
#define ILV_CHUNK 512
#endif

static void
ilv_range(void *p, int part, size_t lo, size_t hi)
{
    ilv_ctx *c = (ilv_ctx *)p;
    (void)part;
    unsigned char *const aos = c->aos;
    const size_t block = c->block;
    const int inverse = c->inverse;
    for (size_t b0 = lo; b0 < hi; b0 += ILV_CHUNK) {     /* one pass over the blocks */
        size_t b1 = b0 + ILV_CHUNK < hi ? b0 + ILV_CHUNK : hi;
        for (int f = 0; f < c->nf; f++) {
            size_t w = c->w[f], off = c->off[f];
            unsigned char *fs = c->field[f];
            switch (w) {                 /* constant widths: inlined moves */
            case 1: ILV_LOOP(1) break;
            case 2: ILV_LOOP(2) break;
            case 4: ILV_LOOP(4) break;
            case 8: ILV_LOOP(8) break;
            case 12: ILV_LOOP(12) break;
            case 16: ILV_LOOP(16) break;
            case 32: ILV_LOOP(32) break;
            case 64: ILV_LOOP(64) break;
            case 128: ILV_LOOP(128) break;
            default: ILV_LOOP(w) break;
            }
        }
    }
}

/* PACK_K4_12B (registered.py pack_k4_12b / unpack_k4_12b), per super-block */
static inline void
k4_pack1(unsigned char *b, const unsigned char *sc, const unsigned char *m)
{
    for (int j = 0; j < 4; j++) {
        unsigned s0 = sc[j] & 63u, s1 = sc[j + 4] & 63u, m0 = m[j] & 63u, m1 = m[j + 4] & 63u;
        b[j] = (unsigned char)(s0 | ((s1 >> 4) << 6));
        b[j + 4] = (unsigned char)(m0 | ((m1 >> 4) << 6));
        b[j + 8] = (unsigned char)((s1 & 15u) | ((m1 & 15u) << 4));
    }
}

static inline void
k4_unpack1(const unsigned char *b, unsigned char *sc, unsigned char *m)
{
    for (int j = 0; j < 4; j++) {
        sc[j] = b[j] & 63u;
        m[j] = b[j + 4] & 63u;
        sc[j + 4] = (unsigned char)((b[j + 8] & 15u) | ((unsigned)(b[j] >> 6) << 4));
        m[j + 4] = (unsigned char)((b[j + 8] >> 4) | ((unsigned)(b[j + 4] >> 6) << 4));
    }
}

typedef struct {
    unsigned char *packed, *sc, *m;
    int inverse;
} k4_ctx;

static void
k4_range(void *p, int part, size_t lo, size_t hi)
{
    k4_ctx *c = (k4_ctx *)p;
    (void)part;
    for (size_t g = lo; g < hi; g++) {
        if (!c->inverse) {
            k4_pack1(c->packed + 12 * g, c->sc + 8 * g, c->m + 8 * g);
        } else {
            k4_unpack1(c->packed + 12 * g, c->sc + 8 * g, c->m + 8 * g);
        }
    }
}

/* BLOCK_AOS over PACK_K4_12B in one pass (no packed intermediate): block b
 * is scale1 (w1 bytes) | super-block b's 12 packed bytes | data (wd bytes),
 * i.e. ggml's block_q4_K when w1 = 4 and wd = 128. */
typedef struct {
    unsigned char *aos, *s1, *sc, *m, *data;
    size_t w1, wd;
    int inverse;
} k4ilv_ctx;

#define K4ILV_LOOP(W1, WD)                                                     \
    for (size_t b = lo; b < hi; b++) {                                         \
        unsigned char *o = c->aos + b * ((W1) + 12 + (WD));                    \
        if (!inverse) {                                                        \
            memcpy(o, c->s1 + b * (W1), (W1));                                 \
            k4_pack1(o + (W1), c->sc + 8 * b, c->m + 8 * b);                   \
            memcpy(o + (W1) + 12, c->data + b * (WD), (WD));                   \
        } else {                                                               \
            memcpy(c->s1 + b * (W1), o, (W1));                                 \
            k4_unpack1(o + (W1), c->sc + 8 * b, c->m + 8 * b);                 \
            memcpy(c->data + b * (WD), o + (W1) + 12, (WD));                   \
        }                                                                      \
    }

static void
k4ilv_range(void *p, int part, size_t lo, size_t hi)
{
    k4ilv_ctx *c = (k4ilv_ctx *)p;
    const int inverse = c->inverse;
    (void)part;
    if (c->w1 == 4 && c->wd == 128) {
        K4ILV_LOOP(4, 128)
    } else {
        const size_t w1 = c->w1, wd = c->wd;
        K4ILV_LOOP(w1, wd)
    }
}

/* ------------------------------------------------------------------------
 * Entry points */

void
grit_k_transpose(const unsigned char *src, unsigned char *dst, size_t R, size_t C, int bits,
                 int msb, int nthreads)
{
    size_t n = R * C, nbytes = (n * (size_t)bits + 7) / 8;
    tr_ctx c;
    c.src = src;
    c.dst = dst;
    c.R = R;
    c.C = C;
    c.ub = (size_t)bits / 8;
#ifdef GRIT_AVX2
    /* streamed: bands of `rows` source rows, whose destination rows are whole
     * cache lines, so that every streamed line is whole */
    range_fn band = NULL;
    size_t rows = 0;
    if (grit_use_avx2 && nbytes >= NT_MIN && ((uintptr_t)dst & 63) == 0) {
        if (bits == 8) {
            band = tr1_band_nt, rows = 64;
        } else if (bits == 4 && !msb && C % 2 == 0) {
            band = tr4_band_nt, rows = 128;
        } else if (bits == 16) {
            band = tr2_band_nt, rows = 32;
        }
        if (band != NULL && R % rows != 0) {
            band = NULL;
        }
    }
    if (band != NULL) {
        /* each thread starts on its own column group: its own output pages */
        c.bands = R / rows;
        c.groups = (size_t)n_parts(c.bands, nthreads);
        grit_run_dealt_groups(band, &c, c.bands, (int)c.groups, (int)c.groups);
        return;
    }
#else
    (void)nbytes;
#endif
    if (bits == 4) {
        if (R % 2 == 0 && C % 2 == 0 && !msb) {
            size_t units = (C / 2 + TR_BLOCK - 1) / TR_BLOCK;
            grit_run_dealt(tr4_range, &c, units, n_parts(units, nthreads));
        } else {
            tr4_any(c.src, c.dst, c.R, c.C, msb);
        }
    } else {
        size_t units = (C + TR_BLOCK - 1) / TR_BLOCK;
        grit_run_dealt(tr_range, &c, units, n_parts(units, nthreads));
    }
}

int
grit_k_tile_offsets(const unsigned char *tab, size_t nchunks, size_t tcb, size_t w,
                    size_t rowbytes, size_t *off)
{
    size_t m = tcb / w;
    for (size_t k = 0; k < nchunks; k++) {
        int64_t q;
        memcpy(&q, tab + 8 * k, 8);
        if (q < 0 || (size_t)q >= nchunks) {
            return -1;
        }
        off[k] = ((size_t)q / m) * rowbytes + ((size_t)q % m) * w;
    }
    return 0;
}

void
grit_k_tile(const unsigned char *src, unsigned char *dst, size_t rows, size_t rowbytes, size_t tr,
            size_t tcb, size_t w, const size_t *off, int inverse, int nthreads)
{
    tile_ctx c;
    c.src = src;
    c.dst = dst;
    c.rowbytes = rowbytes;
    c.tr = tr;
    c.tcb = tcb;
    c.w = w;
    c.nct = rowbytes / tcb;
    c.nchunks = tr * tcb / w;
    c.off = off;
    c.inverse = inverse;
    c.rows_whole = w == tcb;
    for (size_t k = 0; k < c.nchunks && c.rows_whole; k++) {
        c.rows_whole = off[k] == k * rowbytes;
    }
    size_t units = (rows / tr) * c.nct;
    grit_run_dealt(tile_range, &c, units, n_parts(units, nthreads));
}

void
grit_k_interleave(unsigned char *aos, unsigned char *const field[4], const size_t w[4],
                  size_t blocks, int inverse, int nthreads)
{
    ilv_ctx c;
    memset(&c, 0, sizeof c);
    for (int f = 0; f < 4; f++) {
        if (w[f] == 0) {
            continue;
        }
        c.field[c.nf] = field[f];
        c.w[c.nf] = w[f];
        c.off[c.nf] = c.block;
        c.nf++;
        c.block += w[f];
    }
    c.aos = aos;
    c.inverse = inverse;
    if (blocks > 0 && c.nf > 0) {
        grit_run_dealt(ilv_range, &c, blocks, n_parts(blocks, nthreads));
    }
}

void
grit_k_pack_k4(unsigned char *packed, unsigned char *sc, unsigned char *m, size_t groups,
               int inverse, int nthreads)
{
    k4_ctx c = {packed, sc, m, inverse};
    grit_run_dealt(k4_range, &c, groups, n_parts(groups, nthreads));
}

void
grit_k_interleave_k4(unsigned char *aos, unsigned char *s1, unsigned char *sc, unsigned char *m,
                     unsigned char *data, size_t w1, size_t wd, size_t blocks, int inverse,
                     int nthreads)
{
    k4ilv_ctx c = {aos, s1, sc, m, data, w1, wd, inverse};
    grit_run_dealt(k4ilv_range, &c, blocks, n_parts(blocks, nthreads));
}
