/*
 * The encode kernels of the registered grades (§9, §10), portable and
 * AVX2 loops, and grit_k_encode.
 */
#include "core.h"

/* ------------------------------------------------------------------------
 * Encode */

typedef struct {
    const float *x;
    unsigned char *data, *scale0, *scale1, *aux;
    int flag;                                        /* MXFP4: exp2rnemaxabs; NVF4: er = rtz */
    float sT;                                        /* NVF4: the stored, re-read scale */
    uint32_t amax[MAX_THREADS];                      /* NVF4 phase 1, as bits */
} enc_ctx;

/* §10.3 step 2 for a finite block with max |v| = bamax: the E4M3 code and
 * S = f32(sT · s0). */
static inline float
nvf4_block_scale(const enc_ctx *c, uint32_t bamax, unsigned char *sc)
{
    unsigned code = bamax == 0 ? E4M3_ONE_CODE       /* e4m3(1.0) = 0 0111 000 */
        : e4m3_encode_nonneg((u2f(bamax) / E2M1_MAX) / c->sT, c->flag);
    *sc = (unsigned char)code;
    return c->sT * grit_e4m3[code];
}

/* §10.2 steps 2–4 for a finite super-block given each sub-block's min and
 * max: writes scale1 [d, dmin], sc and m; returns S and Z per sub-block. */
static void
q4ks_scales(const float *mn, const float *mx, unsigned char *s1, unsigned char *sc,
            unsigned char *mm, float *S, float *Z)
{
    float step[8], off[8], mstep = 0.0f, moff = -0.0f;
    for (int s = 0; s < 8; s++) {
        /* lo = min(0, min v), hi = max(0, max v): a zero extreme of either
         * sign gives +0, so off = f32(−lo) is −0 for a sub-block with no
         * negative value (docs/spec-decisions.md, Q4KS signed zero). */
        float lo = mn[s] < 0.0f ? mn[s] : 0.0f;
        float hi = mx[s] > 0.0f ? mx[s] : 0.0f;
        step[s] = (hi - lo) / (float)U4_MAX;
        off[s] = -lo;
        mstep = step[s] > mstep ? step[s] : mstep;
        moff = off[s] > moff ? off[s] : moff;
    }
    unsigned dc = half_rne_satfinite(mstep / (float)U6_MAX);
    unsigned mc = half_rne_satfinite(moff / (float)U6_MAX);
    s1[0] = (unsigned char)(dc & 0xFF);
    s1[1] = (unsigned char)(dc >> 8);
    s1[2] = (unsigned char)(mc & 0xFF);
    s1[3] = (unsigned char)(mc >> 8);
    float d = half_value(dc), dmin = half_value(mc); /* re-read after the binary16 store */
    for (int s = 0; s < 8; s++) {
        int scs = d == 0.0f ? 0 : rint_nonneg(clampf(step[s] / d, 0.0f, (float)U6_MAX));
        int ms = dmin == 0.0f ? 0 : rint_nonneg(clampf(off[s] / dmin, 0.0f, (float)U6_MAX));
        sc[s] = (unsigned char)scs;
        mm[s] = (unsigned char)ms;
        S[s] = d * (float)scs;
        Z[s] = dmin * (float)ms;
    }
}

static void
q4ks_poison(unsigned char *s1, unsigned char *sc, unsigned char *mm, unsigned char *q)
{
    s1[0] = F16_NAN_CODE & 0xFF;                     /* d = 0x7E00 (binary16 NaN) */
    s1[1] = F16_NAN_CODE >> 8;
    s1[2] = s1[3] = 0;                               /* dmin = +0 */
    memset(sc, 0, 8);
    memset(mm, 0, 8);
    memset(q, 0, 128);
}

#ifdef GRIT_AVX2
TARGET_AVX2 static inline __m256i
e2m1_encode8(__m256 y)
{
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    __m256 a = _mm256_and_ps(y, absm);
    __m256i c = _mm256_setzero_si256();
#define GRIT_STEP(t, op) \
    c = _mm256_sub_epi32(c, _mm256_castps_si256(_mm256_cmp_ps(a, _mm256_set1_ps(t), op)))
    GRIT_STEP(E2M1_THRESHOLDS[0], _CMP_GT_OQ);       /* as e2m1_encode */
    GRIT_STEP(E2M1_THRESHOLDS[1], _CMP_GE_OQ);
    GRIT_STEP(E2M1_THRESHOLDS[2], _CMP_GT_OQ);
    GRIT_STEP(E2M1_THRESHOLDS[3], _CMP_GE_OQ);
    GRIT_STEP(E2M1_THRESHOLDS[4], _CMP_GT_OQ);
    GRIT_STEP(E2M1_THRESHOLDS[5], _CMP_GE_OQ);
    GRIT_STEP(E2M1_THRESHOLDS[6], _CMP_GT_OQ);
#undef GRIT_STEP
    __m256i sign = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(y), 28),
                                    _mm256_set1_epi32(8));
    return _mm256_or_si256(c, sign);
}

/* 32 codes 0..15 (int32 lanes, in order) -> 16 bytes, element 2j low nibble */
TARGET_AVX2 static inline __m128i
pack_nibbles32(__m256i c0, __m256i c1, __m256i c2, __m256i c3)
{
    __m256i b = _mm256_packus_epi16(_mm256_packs_epi32(c0, c1), _mm256_packs_epi32(c2, c3));
    b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    __m256i w = _mm256_maddubs_epi16(b, _mm256_set1_epi16(0x1001)); /* b[2j] + 16 · b[2j+1] */
    return _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
}

/* 16 codes -> 8 bytes (low half of the result) */
TARGET_AVX2 static inline __m128i
pack_nibbles16(__m256i c0, __m256i c1)
{
    __m256i p = _mm256_packs_epi32(c0, c1);
    __m256i b = _mm256_packus_epi16(p, p);
    b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    __m256i w = _mm256_maddubs_epi16(b, _mm256_set1_epi16(0x1001));
    __m128i lo = _mm256_castsi256_si128(w);
    return _mm_packus_epi16(lo, lo);
}

/* 1 when all of x[0..n) (n a multiple of 8) are finite; *amax = max |x| as bits */
TARGET_AVX2 static inline int
finite_amax_avx2(const float *x, int n, uint32_t *amax)
{
    const __m256i absm = _mm256_set1_epi32(0x7FFFFFFF), top = _mm256_set1_epi32(0x7F7FFFFF);
    __m256i m = _mm256_setzero_si256(), bad = _mm256_setzero_si256();
    for (int k = 0; k < n; k += 8) {
        __m256i a = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + k)), absm);
        m = _mm256_max_epi32(m, a);                  /* |x| bits: integer order = value order */
        bad = _mm256_or_si256(bad, _mm256_cmpgt_epi32(a, top));
    }
    __m128i h = _mm_max_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0x4E));
    h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0xB1));
    *amax = (uint32_t)_mm_cvtsi128_si32(h);
    return _mm256_testz_si256(bad, bad);
}

TARGET_AVX2 static void
enc_mxfp4_avx2(enc_ctx *c, size_t lo, size_t hi)
{
    for (size_t g = lo; g < hi; g++) {
        const float *x = c->x + 32 * g;
        uint32_t amax;
        if (!finite_amax_avx2(x, 32, &amax)) {
            c->scale0[g] = E8M0_NAN_CODE;
            memset(c->data + 16 * g, 0, 16);
            continue;
        }
        int X = mx_exponent(amax, c->flag);
        c->scale0[g] = (unsigned char)(X + E8M0_BIAS);
        __m256 inv = _mm256_set1_ps(pow2f(-X));
        __m256i q0 = e2m1_encode8(_mm256_mul_ps(_mm256_loadu_ps(x), inv));
        __m256i q1 = e2m1_encode8(_mm256_mul_ps(_mm256_loadu_ps(x + 8), inv));
        __m256i q2 = e2m1_encode8(_mm256_mul_ps(_mm256_loadu_ps(x + 16), inv));
        __m256i q3 = e2m1_encode8(_mm256_mul_ps(_mm256_loadu_ps(x + 24), inv));
        _mm_storeu_si128((__m128i *)(c->data + 16 * g), pack_nibbles32(q0, q1, q2, q3));
    }
}

TARGET_AVX2 static void
enc_nvf4_avx2(enc_ctx *c, size_t lo, size_t hi)
{
    const __m256i eight = _mm256_set1_epi32(8);
    for (size_t g = lo; g < hi; g++) {
        const float *x = c->x + 16 * g;
        uint32_t amax;
        if (!finite_amax_avx2(x, 16, &amax)) {
            c->scale0[g] = E4M3_NAN_CODE;
            memset(c->data + 8 * g, 0, 8);
            continue;
        }
        float S = nvf4_block_scale(c, amax, c->scale0 + g);
        __m256 x0 = _mm256_loadu_ps(x), x1 = _mm256_loadu_ps(x + 8);
        __m256i q0, q1;
        if (S == 0.0f) {                             /* underflowed block: signed zeros */
            q0 = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(x0), 28), eight);
            q1 = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(x1), 28), eight);
        } else {
            __m256 Sv = _mm256_set1_ps(S);
            q0 = e2m1_encode8(_mm256_div_ps(x0, Sv));
            q1 = e2m1_encode8(_mm256_div_ps(x1, Sv));
        }
        _mm_storel_epi64((__m128i *)(c->data + 8 * g), pack_nibbles16(q0, q1));
    }
}

TARGET_AVX2 static inline float
hmin8(__m256 v)
{
    __m128 h = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_min_ps(h, _mm_shuffle_ps(h, h, 0x4E));
    h = _mm_min_ps(h, _mm_shuffle_ps(h, h, 0xB1));
    return _mm_cvtss_f32(h);
}

TARGET_AVX2 static inline float
hmax8(__m256 v)
{
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_max_ps(h, _mm_shuffle_ps(h, h, 0x4E));
    h = _mm_max_ps(h, _mm_shuffle_ps(h, h, 0xB1));
    return _mm_cvtss_f32(h);
}

TARGET_AVX2 static void
enc_q4ks_avx2(enc_ctx *c, size_t lo, size_t hi)
{
    const __m256 zero = _mm256_setzero_ps(), fifteen = _mm256_set1_ps((float)U4_MAX);
    for (size_t sb = lo; sb < hi; sb++) {
        const float *x = c->x + 256 * sb;
        unsigned char *q = c->data + 128 * sb;
        uint32_t amax;
        if (!finite_amax_avx2(x, 256, &amax)) {
            q4ks_poison(c->scale1 + 4 * sb, c->scale0 + 8 * sb, c->aux + 8 * sb, q);
            continue;
        }
        float mn[8], mx[8], S[8], Z[8];
        for (int s = 0; s < 8; s++) {
            const float *xs = x + 32 * s;
            __m256 a = _mm256_loadu_ps(xs), b = _mm256_loadu_ps(xs + 8);
            __m256 e = _mm256_loadu_ps(xs + 16), f = _mm256_loadu_ps(xs + 24);
            /* only the sign test and a negative minimum (positive maximum)
             * are used, so the order of equal zeros does not matter */
            mn[s] = hmin8(_mm256_min_ps(_mm256_min_ps(a, b), _mm256_min_ps(e, f)));
            mx[s] = hmax8(_mm256_max_ps(_mm256_max_ps(a, b), _mm256_max_ps(e, f)));
        }
        q4ks_scales(mn, mx, c->scale1 + 4 * sb, c->scale0 + 8 * sb, c->aux + 8 * sb, S, Z);
        for (int s = 0; s < 8; s++) {
            if (S[s] == 0.0f) {
                memset(q + 16 * s, 0, 16);
                continue;
            }
            const float *xs = x + 32 * s;
            __m256 Sv = _mm256_set1_ps(S[s]), Zv = _mm256_set1_ps(Z[s]);
            __m256i k[4];
            for (int j = 0; j < 4; j++) {
                __m256 y = _mm256_div_ps(_mm256_add_ps(_mm256_loadu_ps(xs + 8 * j), Zv), Sv);
                y = _mm256_min_ps(_mm256_max_ps(y, zero), fifteen);
                k[j] = _mm256_cvttps_epi32(
                    _mm256_round_ps(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            }
            _mm_storeu_si128((__m128i *)(q + 16 * s), pack_nibbles32(k[0], k[1], k[2], k[3]));
        }
    }
}
#endif

/* MXFP4 / MXFP4_RNE (§9.2, §10.1).  Unit: group of 32. */
static void
enc_mxfp4_range(void *vctx, int part, size_t lo, size_t hi)
{
    enc_ctx *c = (enc_ctx *)vctx;
    (void)part;
#ifdef GRIT_AVX2
    if (grit_use_avx2) {
        enc_mxfp4_avx2(c, lo, hi);
        return;
    }
#endif
    for (size_t g = lo; g < hi; g++) {
        const float *x = c->x + 32 * g;
        unsigned char *q = c->data + 16 * g;
        uint32_t amax = 0, bad = 0;
        for (int i = 0; i < 32; i++) {
            uint32_t a = f2u(x[i]) & 0x7FFFFFFFu;
            bad |= a >= 0x7F800000u;
            amax = a > amax ? a : amax;
        }
        if (bad) {                                   /* §9.1 rule 2: poison */
            c->scale0[g] = E8M0_NAN_CODE;
            memset(q, 0, 16);
            continue;
        }
        int X = mx_exponent(amax, c->flag);
        c->scale0[g] = (unsigned char)(X + E8M0_BIAS);
        /* f32(v / 2^X) == f32(v · 2^-X): the same real number, rounded once */
        float inv = pow2f(-X);
        for (int j = 0; j < 16; j++) {
            q[j] = (unsigned char)(e2m1_encode(x[2 * j] * inv)
                                   | e2m1_encode(x[2 * j + 1] * inv) << 4);
        }
    }
}

#ifdef GRIT_AVX2
TARGET_AVX2 static uint32_t
finite_amax_range_avx2(const float *x, size_t n)
{
    const __m256i absm = _mm256_set1_epi32(0x7FFFFFFF), top = _mm256_set1_epi32(0x7F7FFFFF);
    __m256i m = _mm256_setzero_si256();
    for (size_t i = 0; i < n; i += 8) {
        __m256i a = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i)), absm);
        a = _mm256_andnot_si256(_mm256_cmpgt_epi32(a, top), a);   /* ±inf, NaN -> 0 */
        m = _mm256_max_epi32(m, a);
    }
    __m128i h = _mm_max_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0x4E));
    h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0xB1));
    return (uint32_t)_mm_cvtsi128_si32(h);
}
#endif

/* NVF4 phase 1 (§10.3 step 1): max |v| over the finite values, as bits. */
static void
enc_nvf4_amax(void *vctx, int part, size_t lo, size_t hi)
{
    enc_ctx *c = (enc_ctx *)vctx;
#ifdef GRIT_AVX2
    if (grit_use_avx2) {
        c->amax[part] = finite_amax_range_avx2(c->x + 16 * lo, 16 * (hi - lo));
        return;
    }
#endif
    uint32_t m = 0;
    for (size_t i = 16 * lo; i < 16 * hi; i++) {
        uint32_t a = f2u(c->x[i]) & 0x7FFFFFFFu;
        m = (a < 0x7F800000u && a > m) ? a : m;
    }
    c->amax[part] = m;
}

/* NVF4 phase 2 (§10.3 step 2).  Unit: block of 16. */
static void
enc_nvf4_range(void *vctx, int part, size_t lo, size_t hi)
{
    enc_ctx *c = (enc_ctx *)vctx;
    (void)part;
#ifdef GRIT_AVX2
    if (grit_use_avx2) {
        enc_nvf4_avx2(c, lo, hi);
        return;
    }
#endif
    for (size_t g = lo; g < hi; g++) {
        const float *x = c->x + 16 * g;
        unsigned char *q = c->data + 8 * g;
        uint32_t amax = 0, bad = 0;
        for (int i = 0; i < 16; i++) {
            uint32_t a = f2u(x[i]) & 0x7FFFFFFFu;
            bad |= a >= 0x7F800000u;
            amax = a > amax ? a : amax;
        }
        if (bad) {
            c->scale0[g] = E4M3_NAN_CODE;
            memset(q, 0, 8);
            continue;
        }
        float S = nvf4_block_scale(c, amax, c->scale0 + g);
        for (int j = 0; j < 8; j++) {
            unsigned a, b;
            if (S == 0.0f) {
                a = (f2u(x[2 * j]) >> 28) & 8;
                b = (f2u(x[2 * j + 1]) >> 28) & 8;
            } else {
                a = e2m1_encode(x[2 * j] / S);
                b = e2m1_encode(x[2 * j + 1] / S);
            }
            q[j] = (unsigned char)(a | b << 4);
        }
    }
}

/* Q4KS (§10.2).  Unit: super-block of 256. */
static void
enc_q4ks_range(void *vctx, int part, size_t lo, size_t hi)
{
    enc_ctx *c = (enc_ctx *)vctx;
    (void)part;
#ifdef GRIT_AVX2
    if (grit_use_avx2) {
        enc_q4ks_avx2(c, lo, hi);
        return;
    }
#endif
    for (size_t sb = lo; sb < hi; sb++) {
        const float *x = c->x + 256 * sb;
        unsigned char *q = c->data + 128 * sb;
        uint32_t bad = 0;
        float mn[8], mx[8], S[8], Z[8];
        for (int s = 0; s < 8; s++) {
            float a = x[32 * s], b = x[32 * s];
            for (int i = 0; i < 32; i++) {
                float v = x[32 * s + i];
                bad |= (f2u(v) & 0x7F800000u) == 0x7F800000u;
                a = v < a ? v : a;
                b = v > b ? v : b;
            }
            mn[s] = a;
            mx[s] = b;
        }
        if (bad) {
            q4ks_poison(c->scale1 + 4 * sb, c->scale0 + 8 * sb, c->aux + 8 * sb, q);
            continue;
        }
        q4ks_scales(mn, mx, c->scale1 + 4 * sb, c->scale0 + 8 * sb, c->aux + 8 * sb, S, Z);
        for (int s = 0; s < 8; s++) {
            const float *xs = x + 32 * s;
            for (int j = 0; j < 16; j++) {
                int a = 0, b = 0;
                if (S[s] != 0.0f) {
                    a = rint_nonneg(clampf((xs[2 * j] + Z[s]) / S[s], 0.0f, (float)U4_MAX));
                    b = rint_nonneg(clampf((xs[2 * j + 1] + Z[s]) / S[s], 0.0f, (float)U4_MAX));
                }
                q[16 * s + j] = (unsigned char)(a | b << 4);
            }
        }
    }
}

/* a 4-bit mask with exactly two bits set -> the metadata nibble i0 | i1 << 2,
 * i0 < i1 (the other entries are never used) */
const unsigned char grit_pair_of_mask[16] = {
    0, 0, 0, 0x4, 0, 0x8, 0x9, 0, 0, 0xC, 0xD, 0, 0xE, 0, 0, 0,
};

/* I8S24 (§10.4).  Selection per quad: the two largest magnitudes, NaN above
 * every magnitude, ties to the lower index, stored ascending; then one
 * binary16 scale per 32 logical positions over the 16 kept values.  Unit:
 * group of 32 (whose kept values are stored at data[16g, 16g + 16)). */
static void
enc_i8s24_range(void *vctx, int part, size_t lo, size_t hi)
{
    enc_ctx *c = (enc_ctx *)vctx;
    (void)part;
    for (size_t g = lo; g < hi; g++) {
        const float *x = c->x + 32 * g;
        float kv[16];
        unsigned nib[8];
        for (int q = 0; q < 8; q++) {
            uint32_t k[4];
            for (int j = 0; j < 4; j++) {
                uint32_t a = f2u(x[4 * q + j]) & 0x7FFFFFFFu;
                k[j] = a > 0x7F800001u ? 0x7F800001u : a;   /* every NaN alike, above ∞ */
            }
            /* position j is kept iff fewer than two positions beat it: a
             * larger key, or an equal key at a lower index */
            unsigned b0 = (k[1] > k[0]) + (k[2] > k[0]) + (k[3] > k[0]);
            unsigned b1 = (k[0] >= k[1]) + (k[2] > k[1]) + (k[3] > k[1]);
            unsigned b2 = (k[0] >= k[2]) + (k[1] >= k[2]) + (k[3] > k[2]);
            unsigned b3 = (k[0] >= k[3]) + (k[1] >= k[3]) + (k[2] >= k[3]);
            unsigned mask = (b0 < 2) | (b1 < 2) << 1 | (b2 < 2) << 2 | (b3 < 2) << 3;
            unsigned i0 = grit_pair_of_mask[mask] & 3, i1 = grit_pair_of_mask[mask] >> 2;
            nib[q] = grit_pair_of_mask[mask];
            kv[2 * q] = x[4 * q + i0];
            kv[2 * q + 1] = x[4 * q + i1];
        }
        for (int b = 0; b < 4; b++) {
            c->aux[4 * g + (size_t)b] = (unsigned char)(nib[2 * b] | nib[2 * b + 1] << 4);
        }
        uint32_t amax = 0, bad = 0;
        for (int i = 0; i < 16; i++) {
            uint32_t a = f2u(kv[i]) & 0x7FFFFFFFu;
            bad |= a >= 0x7F800000u;
            amax = a > amax ? a : amax;
        }
        unsigned char *s0 = c->scale0 + 2 * g;
        signed char *q = (signed char *)c->data + 16 * g;
        if (bad) {                                   /* 0x7E00: binary16 NaN */
            s0[0] = F16_NAN_CODE & 0xFF;
            s0[1] = F16_NAN_CODE >> 8;
            memset(q, 0, 16);
            continue;
        }
        unsigned h = F16_ONE_CODE;                   /* all zero: binary16 1.0 */
        if (amax) {
            h = half_rne_satfinite(u2f(amax) / (float)S8_MAX);
            if (h == 0) {
                h = 0x0001;                          /* never a zero scale */
            }
        }
        s0[0] = (unsigned char)(h & 0xFF);
        s0[1] = (unsigned char)(h >> 8);
        float S = half_value(h);
        for (int i = 0; i < 16; i++) {
            q[i] = (signed char)rint_signed(clampf(kv[i] / S, -(float)S8_MAX, (float)S8_MAX));
        }
    }
}

/* ------------------------------------------------------------------------
 * Entry point */

void
grit_k_encode(int kind, int flag, const float *x, size_t n, unsigned char *data,
              unsigned char *scale0, unsigned char *scale1, unsigned char *aux, int nthreads)
{
    enc_ctx c;
    memset(&c, 0, sizeof c);
    c.x = x;
    c.flag = flag;
    c.data = data;
    c.scale0 = scale0;
    c.scale1 = scale1;
    c.aux = aux;
    size_t units = n / grit_kind_unit[kind];
    int parts = n_parts(units, nthreads);
    switch (kind) {
    case GRIT_K_MXFP4:
        grit_run_parts(enc_mxfp4_range, &c, units, parts);
        break;
    case GRIT_K_NVF4: {
        grit_run_parts(enc_nvf4_amax, &c, units, parts);
        uint32_t amax = 0;
        for (int t = 0; t < parts; t++) {
            amax = c.amax[t] > amax ? c.amax[t] : amax;
        }
        /* §10.3 step 1: sT = f32(f32(amax / 6) / 448), 1.0 for an all-zero
         * tensor, 2^-149 when it underflows; stored as binary32 and re-read. */
        float sT = 1.0f;
        if (amax) {
            sT = (u2f(amax) / E2M1_MAX) / E4M3_MAX;
            if (sT == 0.0f) {
                sT = pow2f(-149);
            }
        }
        c.sT = sT;
        uint32_t b = f2u(sT);
        for (int i = 0; i < 4; i++) {
            c.scale1[i] = (unsigned char)(b >> (8 * i));
        }
        grit_run_parts(enc_nvf4_range, &c, units, parts);
        break;
    }
    case GRIT_K_Q4KS:
        grit_run_parts(enc_q4ks_range, &c, units, parts);
        break;
    default:
        grit_run_parts(enc_i8s24_range, &c, units, parts);
        break;
    }
}
