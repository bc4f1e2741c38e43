/*
 * FNV-1a-128 as a chain of bytes and a sum (fnv_wide.h).
 *
 * One FNV-1a-128 step is h' = (h ^ b) * P (mod 2^128), P = 2^88 + 0x13b.
 * The xor only changes h's low byte L = h mod 256: with t = L ^ b,
 *
 *     h ^ b = h + d,   d = t - L   (an integer in [-255, 255]),
 *
 * so the step is h' = (h + d) * P, and over n bytes
 *
 *     h_n = h_0 * P^n + sum_j d_j * P^(n-j)          (mod 2^128).
 *
 * The d_j need only the low bytes: L_{j+1} = h_{j+1} mod 256 = t_j * 0x3b
 * mod 256 (P mod 256 = 0x3b).  So the work splits in two:
 *
 *   - the chain: t_j = L_j ^ b_j, L_{j+1} = 59 * t_j, on 8 bits -- one xor
 *     and one small multiply a byte, scalar, serial within a message (up to
 *     four messages interleaved, as in fnv_multi.c, but with a 32-bit
 *     multiply where fnv_multi.c needs a 64x64->128-bit one and a second
 *     multiply);
 *   - the sum: independent products d_j * C, C = P^m mod 2^128 taken from
 *     a table, which VPDPWSSD (AVX-512 VNNI) adds up 32 bytes at a time:
 *     C is written in eight signed 16-bit digits (C = sum_i c_i 2^(16 i)
 *     mod 2^128, c_i in [-2^15, 2^15)), and each instruction adds
 *     d_j c_i + d_(j+1) c_i' into a 32-bit lane of digit i's sum.  Where
 *     the machine has AVX2 but not that, VPMADDWD and VPADDD do the same
 *     16 bytes an instruction pair (the same lanes' sums, the same bounds).
 *
 * A message goes in blocks of BLOCK bytes: the chain of a block is written
 * into a small buffer of t bytes, and the sums read it CHUNK bytes at a
 * time, two chunks behind the chain, in the same loop -- the chain waits on
 * its multiplies and the vector unit does the sums meanwhile.  The loop is
 * written in three parts (the chain's first chunks; both, branch-free; the
 * last chunks' sums): with the two tests inside one loop, GCC -O2's code
 * for four messages ran 10-20% slower.  At the end
 * of a block, h = h * P^BLOCK + sum (128-bit arithmetic, once a block).
 * Bounds: |d c| < 2^23, a lane adds two products per instruction and
 * BLOCK / CHUNK = 32 instructions a block (AVX2: 64 instructions of half the
 * lanes): |lane| < 2^30; the lanes of a digit are added in 64 bits.
 *
 * The comparison (q non-NULL) reads 32 bytes of the other message beside
 * the 32 of the message the sums load, and ORs their xor into a register.
 *
 * The values are fnv128_update's (fnv.c): the identity above is exact in
 * the integers mod 2^128; tests/test_fnv_many.py compares the two on random
 * messages of every length near the block and chunk edges, and the module's
 * init runs a self-check before it switches this path on.
 */
#include "fnv_wide.h"

#include <string.h>

int grit_fnv_wide = 0;
int grit_fnv_wide_passed = 0;
int grit_fnv_wide_cpu = 0;

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) \
    && defined(__SIZEOF_INT128__) && !defined(GRIT_FNV_NO_WIDE)

#include <immintrin.h>

__extension__ typedef unsigned __int128 u128_w;
__extension__ typedef __int128 i128_w;

#define BLOCK 1024
#define CHUNK 32
#define DIGITS 8
/* the chunks of a block's sums that trail its chain */
#define LAG 2

#define TARGET_WIDE __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define TARGET_AVX2 __attribute__((target("avx2")))

static const u128_w PRIME = ((u128_w)1 << 88) | FNV128_PRIME_LOW;

/* DIG[i][w]: digit i of P^(BLOCK - w) mod 2^128, for w < BLOCK (position w
 * of a block is multiplied by P to the power of the bytes from it to the
 * block's end) */
static int16_t DIG[DIGITS][BLOCK] __attribute__((aligned(64)));
static u128_w P_BLOCK;                  /* P^BLOCK mod 2^128 */

static u128_w
prime_pow(unsigned m)
{
    u128_w r = 1, b = PRIME;
    while (m) {
        if (m & 1) {
            r *= b;
        }
        b *= b;
        m >>= 1;
    }
    return r;
}

static void
build_tables(void)
{
    u128_w c = 1;
    for (int m = 1; m <= BLOCK; m++) {
        c *= PRIME;
        u128_w x = c;
        for (int i = 0; i < DIGITS; i++) {
            int32_t v = (int32_t)(x & 0xffff);
            if (v >= 0x8000) {
                v -= 0x10000;
            }
            DIG[i][BLOCK - m] = (int16_t)v;
            x = (x - (u128_w)(i128_w)v) >> 16;      /* exact: the low 16 bits are 0 */
        }
    }
    P_BLOCK = prime_pow(BLOCK);
}

/* sum_i (sum of digit i's lanes) * 2^(16 i) mod 2^128 */
TARGET_WIDE static inline u128_w
digits_sum(const __m512i *acc)
{
    u128_w s = 0;
    for (int i = 0; i < DIGITS; i++) {
        __m512i lo = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(acc[i]));
        __m512i hi = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(acc[i], 1));
        int64_t v = _mm512_reduce_add_epi64(_mm512_add_epi64(lo, hi));
        s += (u128_w)(i128_w)v << (16 * i);
    }
    return s;
}

/* the same for AVX2's eight lanes a digit */
TARGET_AVX2 static inline u128_w
digits_sum_avx2(const __m256i *acc)
{
    u128_w s = 0;
    for (int i = 0; i < DIGITS; i++) {
        __m256i w = _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(acc[i])),
                                     _mm256_cvtepi32_epi64(_mm256_extracti128_si256(acc[i], 1)));
        __m128i v = _mm_add_epi64(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
        int64_t x = _mm_cvtsi128_si64(v) + _mm_cvtsi128_si64(_mm_unpackhi_epi64(v, v));
        s += (u128_w)(i128_w)x << (16 * i);
    }
    return s;
}

/* one chain step of lane k at byte j */
#define CHAIN(k)                                                        \
    do {                                                                \
        uint32_t t_ = L##k ^ p##k[j];                                   \
        tb[k][j] = (unsigned char)t_;                                   \
        L##k = t_ * 59u;                                                \
    } while (0)

#define DOT(k, i)                                                       \
    acc[k][i] = _mm512_dpwssd_epi32(acc[k][i], dv, _mm512_load_si512(&DIG[i][w]))

/* the sums of lane k's 32 bytes at w (and the comparison, with CMP) */
#define SUMS(k, CMP)                                                    \
    do {                                                                \
        __m256i b_ = _mm256_loadu_si256((const __m256i *)(p##k + w));   \
        __m512i tw = _mm512_cvtepu8_epi16(                              \
            _mm256_load_si256((const __m256i *)(tb[k] + w)));           \
        __m512i dv = _mm512_sub_epi16(tw, _mm512_xor_si512(             \
            tw, _mm512_cvtepu8_epi16(b_)));                             \
        DOT(k, 0); DOT(k, 1); DOT(k, 2); DOT(k, 3);                     \
        DOT(k, 4); DOT(k, 5); DOT(k, 6); DOT(k, 7);                     \
        if (CMP) {                                                      \
            diff[k] = _mm256_or_si256(diff[k], _mm256_xor_si256(        \
                b_, _mm256_loadu_si256((const __m256i *)(q##k + w))));  \
        }                                                               \
    } while (0)

/* AVX2: the sums of lane k's 32 bytes at w, in two halves of 16 */
#define DOT2(k, i)                                                                      \
    acc[k][i] = _mm256_add_epi32(acc[k][i], _mm256_add_epi32(                           \
        _mm256_madd_epi16(dl, _mm256_load_si256((const __m256i *)&DIG[i][w])),          \
        _mm256_madd_epi16(dh, _mm256_load_si256((const __m256i *)&DIG[i][w + 16]))))

#define SUMS_AVX2(k, CMP)                                                               \
    do {                                                                                \
        __m256i b_ = _mm256_loadu_si256((const __m256i *)(p##k + w));                   \
        __m256i t_ = _mm256_load_si256((const __m256i *)(tb[k] + w));                   \
        __m256i tl = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(t_));                  \
        __m256i th = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(t_, 1));             \
        __m256i dl = _mm256_sub_epi16(tl, _mm256_xor_si256(                             \
            tl, _mm256_cvtepu8_epi16(_mm256_castsi256_si128(b_))));                     \
        __m256i dh = _mm256_sub_epi16(th, _mm256_xor_si256(                             \
            th, _mm256_cvtepu8_epi16(_mm256_extracti128_si256(b_, 1))));                \
        DOT2(k, 0); DOT2(k, 1); DOT2(k, 2); DOT2(k, 3);                                 \
        DOT2(k, 4); DOT2(k, 5); DOT2(k, 6); DOT2(k, 7);                                 \
        if (CMP) {                                                                      \
            diff[k] = _mm256_or_si256(diff[k], _mm256_xor_si256(                        \
                b_, _mm256_loadu_si256((const __m256i *)(q##k + w))));                  \
        }                                                                               \
    } while (0)

/* A kernel for K lanes; CHAINS: the lanes' chain steps, SUMSK(CMP): their
 * sums, in TARGET's vectors VEC (VZERO a zero one, DSUM the sum of a
 * lane's digits).  Only whole blocks (n a multiple of BLOCK). */
#define WIDE_KERNEL(NAME, K, CHAINS, SUMSK, CMP, TARGET, VEC, VZERO, DSUM)              \
TARGET static void                                                                      \
NAME(uint64_t *hi, uint64_t *lo, uint64_t *d, const unsigned char *const *p,            \
     const unsigned char *const *q, size_t n)                                           \
{                                                                                       \
    unsigned char tb[K][BLOCK] __attribute__((aligned(64)));                            \
    u128_w h[K];                                                                        \
    __m256i diff[K];                                                                    \
    const unsigned char *p0 = p[0], *p1 = p[K > 1], *p2 = p[2 * (K > 2)],               \
                        *p3 = p[3 * (K > 3)];                                           \
    const unsigned char *q0 = NULL, *q1 = NULL, *q2 = NULL, *q3 = NULL;                 \
    if (CMP) {                                                                          \
        q0 = q[0], q1 = q[K > 1], q2 = q[2 * (K > 2)], q3 = q[3 * (K > 3)];             \
    }                                                                                   \
    (void)p1; (void)p2; (void)p3; (void)q0; (void)q1; (void)q2; (void)q3;               \
    for (int k = 0; k < K; k++) {                                                       \
        h[k] = (u128_w)hi[k] << 64 | lo[k];                                             \
        diff[k] = _mm256_setzero_si256();                                               \
    }                                                                                   \
    for (; n >= BLOCK; n -= BLOCK) {                                                    \
        VEC acc[K][DIGITS];                                                             \
        for (int k = 0; k < K; k++) {                                                   \
            for (int i = 0; i < DIGITS; i++) {                                          \
                acc[k][i] = VZERO();                                                    \
            }                                                                           \
        }                                                                               \
        uint32_t L0 = (uint32_t)h[0], L1 = (uint32_t)h[K > 1],                          \
                 L2 = (uint32_t)h[2 * (K > 2)], L3 = (uint32_t)h[3 * (K > 3)];          \
        (void)L1; (void)L2; (void)L3;                                                   \
        for (size_t j = 0; j < LAG * CHUNK; j++) {              /* the chain ahead */   \
            CHAINS;                                                                     \
        }                                                                               \
        for (size_t c = LAG * CHUNK; c < BLOCK; c += CHUNK) {   /* both, no branch */   \
            for (size_t j = c; j < c + CHUNK; j++) {                                    \
                CHAINS;                                                                 \
            }                                                                           \
            const size_t w = c - LAG * CHUNK;                                           \
            SUMSK(CMP);                                                                 \
        }                                                                               \
        for (size_t w = BLOCK - LAG * CHUNK; w < BLOCK; w += CHUNK) {  /* sums left */  \
            SUMSK(CMP);                                                                 \
        }                                                                               \
        for (int k = 0; k < K; k++) {                                                   \
            h[k] = h[k] * P_BLOCK + DSUM(acc[k]);                                       \
        }                                                                               \
        p0 += BLOCK; p1 += BLOCK; p2 += BLOCK; p3 += BLOCK;                             \
        if (CMP) {                                                                      \
            q0 += BLOCK; q1 += BLOCK; q2 += BLOCK; q3 += BLOCK;                         \
        }                                                                               \
    }                                                                                   \
    for (int k = 0; k < K; k++) {                                                       \
        hi[k] = (uint64_t)(h[k] >> 64);                                                 \
        lo[k] = (uint64_t)h[k];                                                         \
        if (CMP && !_mm256_testz_si256(diff[k], diff[k])) {                             \
            d[k] |= 1;                                                                  \
        }                                                                               \
    }                                                                                   \
}

#define CHAINS1 CHAIN(0)
#define CHAINS2 CHAIN(0); CHAIN(1)
#define CHAINS3 CHAIN(0); CHAIN(1); CHAIN(2)
#define CHAINS4 CHAIN(0); CHAIN(1); CHAIN(2); CHAIN(3)
#define SUMS1(C) SUMS(0, C)
#define SUMS2(C) SUMS(0, C); SUMS(1, C)
#define SUMS3(C) SUMS(0, C); SUMS(1, C); SUMS(2, C)
#define SUMS4(C) SUMS(0, C); SUMS(1, C); SUMS(2, C); SUMS(3, C)

#define V512 TARGET_WIDE, __m512i, _mm512_setzero_si512, digits_sum
#define V256 TARGET_AVX2, __m256i, _mm256_setzero_si256, digits_sum_avx2
#define S2_1(C) SUMS_AVX2(0, C)
#define S2_2(C) SUMS_AVX2(0, C); SUMS_AVX2(1, C)
#define S2_3(C) SUMS_AVX2(0, C); SUMS_AVX2(1, C); SUMS_AVX2(2, C)
#define S2_4(C) SUMS_AVX2(0, C); SUMS_AVX2(1, C); SUMS_AVX2(2, C); SUMS_AVX2(3, C)

/* (the macro's arguments spelled out: V512 / V256 expand only in a second pass) */
#define KERNEL(...) WIDE_KERNEL(__VA_ARGS__)
KERNEL(wide1, 1, CHAINS1, SUMS1, 0, V512)
KERNEL(wide2, 2, CHAINS2, SUMS2, 0, V512)
KERNEL(wide3, 3, CHAINS3, SUMS3, 0, V512)
KERNEL(wide4, 4, CHAINS4, SUMS4, 0, V512)
KERNEL(wide1_cmp, 1, CHAINS1, SUMS1, 1, V512)
KERNEL(wide2_cmp, 2, CHAINS2, SUMS2, 1, V512)
KERNEL(wide3_cmp, 3, CHAINS3, SUMS3, 1, V512)
KERNEL(wide4_cmp, 4, CHAINS4, SUMS4, 1, V512)
KERNEL(avx2_1, 1, CHAINS1, S2_1, 0, V256)
KERNEL(avx2_2, 2, CHAINS2, S2_2, 0, V256)
KERNEL(avx2_3, 3, CHAINS3, S2_3, 0, V256)
KERNEL(avx2_4, 4, CHAINS4, S2_4, 0, V256)
KERNEL(avx2_1_cmp, 1, CHAINS1, S2_1, 1, V256)
KERNEL(avx2_2_cmp, 2, CHAINS2, S2_2, 1, V256)
KERNEL(avx2_3_cmp, 3, CHAINS3, S2_3, 1, V256)
KERNEL(avx2_4_cmp, 4, CHAINS4, S2_4, 1, V256)

typedef void (*wide_fn)(uint64_t *, uint64_t *, uint64_t *, const unsigned char *const *,
                        const unsigned char *const *, size_t);
/* WIDE[kernel - 1][compare][lanes]: FNV_WIDE_AVX512, FNV_WIDE_AVX2 */
static const wide_fn WIDE[2][2][5] = {
    {{NULL, wide1, wide2, wide3, wide4}, {NULL, wide1_cmp, wide2_cmp, wide3_cmp, wide4_cmp}},
    {{NULL, avx2_1, avx2_2, avx2_3, avx2_4},
     {NULL, avx2_1_cmp, avx2_2_cmp, avx2_3_cmp, avx2_4_cmp}}};

void
fnv128_wide(int k, uint64_t *hi, uint64_t *lo, uint64_t *d, const unsigned char *const *p,
            const unsigned char *const *q, size_t n)
{
    size_t whole = n - n % BLOCK;
    if (whole) {
        WIDE[grit_fnv_wide - 1][q != NULL][k](hi, lo, d, p, q, whole);
    }
    for (int j = 0; j < k && whole < n; j++) {      /* the rest, byte by byte */
        fnv128_t st = {hi[j], lo[j]};
        st = fnv128_update(st, p[j] + whole, n - whole);
        hi[j] = st.hi;
        lo[j] = st.lo;
        if (q != NULL && memcmp(p[j] + whole, q[j] + whole, n - whole) != 0) {
            d[j] |= 1;
        }
    }
}

/* Every lane count, with and without the comparison, against fnv128_update
 * on a message of three blocks and a part (a pseudo-random one, and one
 * with a difference in the last whole block). */
static int
self_check(void)
{
    enum { N = 3 * BLOCK + 77 };
    static unsigned char m[4][N], o[4][N];
    uint32_t x = 0x9e3779b9u;
    for (int j = 0; j < 4; j++) {
        for (size_t i = 0; i < N; i++) {
            x = x * 1664525u + 1013904223u;
            m[j][i] = (unsigned char)(x >> 24);
        }
        memcpy(o[j], m[j], N);
    }
    o[1][3 * BLOCK - 1] ^= 0x80;
    for (int k = 1; k <= 4; k++) {
        uint64_t hi[4], lo[4], d[4] = {0, 0, 0, 0};
        const unsigned char *p[4] = {m[0], m[1], m[2], m[3]}, *q[4] = {o[0], o[1], o[2], o[3]};
        for (int j = 0; j < 4; j++) {
            hi[j] = FNV128_OFFSET_HI + (uint64_t)j;
            lo[j] = FNV128_OFFSET_LO ^ (uint64_t)(k * 7 + j);
        }
        fnv128_wide(k, hi, lo, d, p, q, N);
        for (int j = 0; j < k; j++) {
            fnv128_t want = {FNV128_OFFSET_HI + (uint64_t)j, FNV128_OFFSET_LO ^ (uint64_t)(k * 7 + j)};
            want = fnv128_update(want, m[j], N);
            if (want.hi != hi[j] || want.lo != lo[j] || (d[j] != 0) != (j == 1)) {
                return 0;
            }
        }
    }
    return 1;
}

int
fnv128_wide_init(void)
{
    int has[2] = {__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")
                  && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"),
                  __builtin_cpu_supports("avx2") != 0};
    grit_fnv_wide = 0;
    grit_fnv_wide_passed = 0;
    grit_fnv_wide_cpu = has[0] << FNV_WIDE_AVX512 | has[1] << FNV_WIDE_AVX2;
    if (!has[0] && !has[1]) {
        return 0;
    }
    build_tables();
    for (int kernel = FNV_WIDE_AVX2; kernel >= FNV_WIDE_AVX512; kernel--) {
        if (has[kernel - 1]) {          /* each loop the machine has, checked on its own */
            grit_fnv_wide = kernel;
            if (self_check()) {
                grit_fnv_wide_passed |= 1 << kernel;
            }
        }
    }
    /* the fastest that passed */
    grit_fnv_wide = grit_fnv_wide_passed & (1 << FNV_WIDE_AVX512) ? FNV_WIDE_AVX512
                  : grit_fnv_wide_passed & (1 << FNV_WIDE_AVX2) ? FNV_WIDE_AVX2 : 0;
    return grit_fnv_wide ? 1 : -1;
}

#else

int
fnv128_wide_init(void)
{
    grit_fnv_wide = 0;
    return 0;
}

void
fnv128_wide(int k, uint64_t *hi, uint64_t *lo, uint64_t *d, const unsigned char *const *p,
            const unsigned char *const *q, size_t n)
{
    (void)k; (void)hi; (void)lo; (void)d; (void)p; (void)q; (void)n;
}

#endif
