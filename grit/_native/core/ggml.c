/*
 * The fused relayout + decode straight from ggml block structs
 * (the GGUF types grit.io.gguf loads zero-copy as GRIT placements, kinds
 * 0..3, and the ones it converts into the canonical planes, kinds 4..12).
 *
 * Each kernel reads one block in place and writes its binary32 values in lin
 * order: the same IEEE operations, in the same order, as relayouting the
 * block to the canonical planes and running the registered frame's decode
 * (decode.c, grit.codec), so the bits are the same -- NaN made canonical,
 * signed zero kept.  tests/test_native_ggml.py (zero-copy) and
 * tests/test_native_ggml_converted.py (converted) prove it per type.
 *
 *   Q8_0   34 B / 32:  binary16 d, 32 s8 q;         x = f32(d · q)
 *   MXFP4  17 B / 32:  E8M0 e, 16 B nibbles (halves); x = f32(2^(e−127) · v)
 *   NVFP4  36 B / 64:  4 E4M3 d (one per 16), 4 × 8 B nibbles (halves per 16);
 *                      x = f32(e4m3(d) · v)
 *   Q4_K  144 B / 256: binary16 d, dmin, 12 B packed u6 (sc, m) × 8, 128 B
 *                      nibbles (halves per 64); x = f32(f32(d·sc)·q − f32(dmin·m))
 *
 * The converted types, with the registered frame's step 5 (§8.1,
 * grit/codec/decode.py): "offset" is the zps=shared form f32(S · f32(q − z)),
 * "l1" the zps=l1 form f32(f32(S · q) − Z); S = f32(S1 · s0), Z = f32(Z1 · zp):
 *
 *   Q4_0   18 B / 32:  binary16 d, 16 B nibbles (halves);  offset, S = d, z = 8
 *   Q4_1   20 B / 32:  binary16 d, m, nibbles (halves);    l1, S = f32(d · 1),
 *                      Z = f32(m · −1) (s0 = 1 and zp = −1 are explicit planes)
 *   Q5_0   22 B / 32:  d, u32 qh (bit j: element j's bit 4), nibbles (halves);
 *                      offset, S = d, z = 16
 *   Q5_1   24 B / 32:  d, m, qh, nibbles (halves);         l1 as Q4_1
 *   Q2_K   84 B / 256: 16 B (sc | m << 4) per 16, 64 B crumbs, d, dmin;
 *                      l1, S = f32(d · sc), Z = f32(dmin · m)
 *   Q5_K  176 B / 256: d, dmin, 12 B u6 (sc, m) × 8, 32 B qh, 128 B nibbles
 *                      (as Q4_K; bit j of qh[l] is element 32j + l's bit 4); l1
 *   Q6_K  210 B / 256: 128 B ql, 64 B qh (crumbs), 16 s8 sc, d;
 *                      offset, S = f32(d · sc), z = 32
 *   Q8_K  292 B / 256: binary32 d, 256 s8 q, 16 s16 bsums (derived, unread);
 *                      x = f32(d · q)
 *   TQ2_0  66 B / 256: 64 B crumbs, binary16 d;            offset, S = d, z = 1
 *
 * "halves" over a run of n: byte l holds element l (low nibble) and element
 * l + n/2 (high nibble).  "crumbs": per 128 elements 32 bytes; bits 2s..2s+1
 * of byte l hold element 32s + l.  Unit of threading: one block.
 */
#include "core.h"

/* the kind ids grit.native gives the types (zero-copy, then grit.ggml.CONVERTED
 * in its order); the block sizes are gguf-py's GGML_QUANT_SIZES, compared with
 * grit.ggml's by the tests */
enum {
    GGML_Q8_0 = 0, GGML_MXFP4 = 1, GGML_NVFP4 = 2, GGML_Q4_K = 3,
    GGML_Q4_0 = 4, GGML_Q4_1 = 5, GGML_Q5_0 = 6, GGML_Q5_1 = 7, GGML_Q2_K = 8,
    GGML_Q5_K = 9, GGML_Q6_K = 10, GGML_Q8_K = 11, GGML_TQ2_0 = 12
};

const size_t grit_ggml_block_bytes[GGML_KINDS] = {34, 17, 36, 144, 18, 20, 22, 24, 84, 176, 210,
                                               292, 66};
const size_t grit_ggml_block_elems[GGML_KINDS] = {32, 32, 64, 256, 32, 32, 32, 32, 256, 256, 256,
                                               256, 256};

/* a range function's first statement: run its AVX2 loop instead when the CPU
 * has AVX2 (nothing without GRIT_AVX2) */
#ifdef GRIT_AVX2
#define AVX2_FIRST(call) do { if (grit_use_avx2) { call; return; } } while (0)
#else
#define AVX2_FIRST(call) do { } while (0)
#endif

typedef struct {
    const unsigned char *src;
    float *out;
} ggml_ctx;

/* t[16] -> n/2 bytes in halves order -> n floats */
static inline void
halves_lookup(const float *t, const unsigned char *qs, float *dst, size_t half)
{
    for (size_t l = 0; l < half; l++) {
        unsigned b = qs[l];
        dst[l] = t[b & 15];
        dst[l + half] = t[b >> 4];
    }
}

static inline unsigned
ld16(const unsigned char *p)
{
    return (unsigned)p[0] | (unsigned)p[1] << 8;
}

#ifdef GRIT_AVX2
TARGET_AVX2 static void
ggml_q8_0_avx2(const unsigned char *src, float *out, size_t lo, size_t hi)
{
    for (size_t b = lo; b < hi; b++) {
        const unsigned char *p = src + 34 * b;
        __m256 d = _mm256_set1_ps(half_value(ld16(p)));
        float *o = out + 32 * b;
        for (int i = 0; i < 32; i += 8) {
            __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p + 2 + i)));
            _mm256_storeu_ps(o + i, canon8(_mm256_mul_ps(d, _mm256_cvtepi32_ps(q))));
        }
    }
}
#endif

static void
ggml_q8_0_range(void *vctx, int part, size_t lo, size_t hi)
{
    ggml_ctx *c = (ggml_ctx *)vctx;
    (void)part;
    AVX2_FIRST(ggml_q8_0_avx2(c->src, c->out, lo, hi));
    for (size_t b = lo; b < hi; b++) {
        const unsigned char *p = c->src + 34 * b;
        const signed char *q = (const signed char *)(p + 2);
        float d = half_value(ld16(p)), *o = c->out + 32 * b;
        for (int i = 0; i < 32; i++) {
            o[i] = canon(d * (float)q[i]);
        }
    }
}

#ifdef GRIT_AVX2
/* t[i] = canon(S · E2M1[i]) in two registers, then 2·half lookups in halves order */
TARGET_AVX2 static inline void
e2m1_scaled_halves_avx2(float S, const unsigned char *qs, float *dst, int half)
{
    const __m256i m15 = _mm256_set1_epi32(15);
    __m256 s = _mm256_set1_ps(S);
    __m256 tlo = canon8(_mm256_mul_ps(s, _mm256_loadu_ps(E2M1)));
    __m256 thi = canon8(_mm256_mul_ps(s, _mm256_loadu_ps(E2M1 + 8)));
    for (int l = 0; l < half; l += 8) {
        __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qs + l)));
        _mm256_storeu_ps(dst + l, lut16(tlo, thi, _mm256_and_si256(v, m15)));
        _mm256_storeu_ps(dst + l + half, lut16(tlo, thi, _mm256_srli_epi32(v, 4)));
    }
}

TARGET_AVX2 static void
ggml_mxfp4_avx2(const ggml_ctx *c, size_t lo, size_t hi)
{
    for (size_t b = lo; b < hi; b++) {
        const unsigned char *p = c->src + 17 * b;
        e2m1_scaled_halves_avx2(e8m0_value(p[0]), p + 1, c->out + 32 * b, 16);
    }
}

TARGET_AVX2 static void
ggml_nvfp4_avx2(const ggml_ctx *c, size_t lo, size_t hi)
{
    for (size_t b = lo; b < hi; b++) {
        const unsigned char *p = c->src + 36 * b;
        for (int s = 0; s < 4; s++) {
            e2m1_scaled_halves_avx2(grit_e4m3[p[s]], p + 4 + 8 * s, c->out + 64 * b + 16 * s, 8);
        }
    }
}
#endif

static void
ggml_mxfp4_range(void *vctx, int part, size_t lo, size_t hi)
{
    ggml_ctx *c = (ggml_ctx *)vctx;
    (void)part;
    AVX2_FIRST(ggml_mxfp4_avx2(c, lo, hi));
    float t[16];
    for (size_t b = lo; b < hi; b++) {
        const unsigned char *p = c->src + 17 * b;
        float S = e8m0_value(p[0]);
        for (int i = 0; i < 16; i++) {
            t[i] = canon(S * E2M1[i]);
        }
        halves_lookup(t, p + 1, c->out + 32 * b, 16);
    }
}

static void
ggml_nvfp4_range(void *vctx, int part, size_t lo, size_t hi)
{
    ggml_ctx *c = (ggml_ctx *)vctx;
    (void)part;
    AVX2_FIRST(ggml_nvfp4_avx2(c, lo, hi));
    float t[16];
    for (size_t b = lo; b < hi; b++) {
        const unsigned char *p = c->src + 36 * b;
        for (int s = 0; s < 4; s++) {
            float S = grit_e4m3[p[s]];
            for (int i = 0; i < 16; i++) {
                t[i] = canon(S * E2M1[i]);
            }
            halves_lookup(t, p + 4 + 8 * s, c->out + 64 * b + 16 * s, 8);
        }
    }
}

/* ggml's get_scale_min_k4: sub-block j's u6 scale and min from the 12 bytes */
static inline void
k4_scale_min(const unsigned char *q, int j, unsigned *sc, unsigned *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

#ifdef GRIT_AVX2
/* t[i] = canon(f32(f32(S · i) − Z)) for i = 0..15 in two registers */
TARGET_AVX2 static inline void
affine_table_avx2(float S, float Z, __m256 *tlo, __m256 *thi)
{
    const __m256 i0 = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256 i1 = _mm256_setr_ps(8, 9, 10, 11, 12, 13, 14, 15);
    __m256 s = _mm256_set1_ps(S), z = _mm256_set1_ps(Z);
    *tlo = canon8(_mm256_sub_ps(_mm256_mul_ps(s, i0), z));
    *thi = canon8(_mm256_sub_ps(_mm256_mul_ps(s, i1), z));
}

TARGET_AVX2 static void
ggml_q4_k_avx2(const ggml_ctx *c, size_t lo, size_t hi)
{
    const __m256i m15 = _mm256_set1_epi32(15);
    for (size_t b = lo; b < hi; b++) {
        const unsigned char *p = c->src + 144 * b, *sc12 = p + 4, *qs = p + 16;
        float d = half_value(ld16(p)), dmin = half_value(ld16(p + 2));
        float *o = c->out + 256 * b;
        for (int j = 0; j < 4; j++) {            /* 64 elements, sub-blocks 2j, 2j+1 */
            __m256 a0, a1, b0, b1;
            unsigned sc, m;
            k4_scale_min(sc12, 2 * j, &sc, &m);
            affine_table_avx2(d * (float)sc, dmin * (float)m, &a0, &a1);
            k4_scale_min(sc12, 2 * j + 1, &sc, &m);
            affine_table_avx2(d * (float)sc, dmin * (float)m, &b0, &b1);
            const unsigned char *q = qs + 32 * j;
            float *oj = o + 64 * j;
            for (int l = 0; l < 32; l += 8) {
                __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(q + l)));
                _mm256_storeu_ps(oj + l, lut16(a0, a1, _mm256_and_si256(v, m15)));
                _mm256_storeu_ps(oj + l + 32, lut16(b0, b1, _mm256_srli_epi32(v, 4)));
            }
        }
    }
}
#endif

static void
ggml_q4_k_range(void *vctx, int part, size_t lo, size_t hi)
{
    ggml_ctx *c = (ggml_ctx *)vctx;
    (void)part;
    AVX2_FIRST(ggml_q4_k_avx2(c, lo, hi));
    float t[2][16];
    for (size_t b = lo; b < hi; b++) {
        const unsigned char *p = c->src + 144 * b, *sc12 = p + 4, *qs = p + 16;
        float d = half_value(ld16(p)), dmin = half_value(ld16(p + 2));
        float *o = c->out + 256 * b;
        for (int j = 0; j < 4; j++) {            /* 64 elements, sub-blocks 2j, 2j+1 */
            for (int h = 0; h < 2; h++) {
                unsigned sc, m;
                k4_scale_min(sc12, 2 * j + h, &sc, &m);
                float S = d * (float)sc, Z = dmin * (float)m;
                for (int i = 0; i < 16; i++) {
                    t[h][i] = canon(S * (float)i - Z);
                }
            }
            const unsigned char *q = qs + 32 * j;
            float *oj = o + 64 * j;
            for (int l = 0; l < 32; l++) {
                oj[l] = t[0][q[l] & 15];
                oj[l + 32] = t[1][q[l] >> 4];
            }
        }
    }
}

/* ------------------------------------------------------------------------
 * The converted types.  Each portable loop computes every element with the
 * frame's step-5 formula, one binary32 operation per named step; the AVX2
 * loop does the same operations eight lanes at a time. */

static inline uint32_t
ld32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* the zps=shared form: f32(S · f32(q − z)) */
static inline float
off1(float S, unsigned q, float z)
{
    return canon(S * ((float)q - z));
}

/* the zps=l1 form: f32(f32(S · q) − Z) */
static inline float
l1_1(float S, unsigned q, float Z)
{
    return canon(S * (float)q - Z);
}

#ifdef GRIT_AVX2
TARGET_AVX2 static inline __m256i
u8x8(const unsigned char *p)
{
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

TARGET_AVX2 static inline __m256
off8(__m256 S, __m256i q, __m256 z)
{
    return canon8(_mm256_mul_ps(S, _mm256_sub_ps(_mm256_cvtepi32_ps(q), z)));
}

TARGET_AVX2 static inline __m256
l1_8(__m256 S, __m256i q, __m256 Z)
{
    return canon8(_mm256_sub_ps(_mm256_mul_ps(S, _mm256_cvtepi32_ps(q)), Z));
}

/* bits l..l+7 of qh, each as bit 4 of its lane */
TARGET_AVX2 static inline __m256i
bit4x8(uint32_t qh, int l)
{
    __m256i sh = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(l));
    __m256i b = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)qh), sh),
                                 _mm256_set1_epi32(1));
    return _mm256_slli_epi32(b, 4);
}

/* Q4_0 / Q5_0 (qh_at 2) and Q4_1 / Q5_1 (l1): one 32-element block in halves
 * order, bit 4 from the u32 at qh_at when qh_at >= 0 */
TARGET_AVX2 static void
q4q5_avx2(const ggml_ctx *c, size_t lo, size_t hi, size_t bytes, int l1, int qh_at, int qs_at,
          float z)
{
    const __m256i m15 = _mm256_set1_epi32(15);
    const __m256 zv = _mm256_set1_ps(z);
    for (size_t b = lo; b < hi; b++) {
        const unsigned char *p = c->src + bytes * b, *qs = p + qs_at;
        float *o = c->out + 32 * b;
        float d = half_value(ld16(p));
        uint32_t qh = qh_at >= 0 ? ld32(p + qh_at) : 0;
        if (l1) {
            __m256 S = _mm256_set1_ps(d * 1.0f), Z = _mm256_set1_ps(half_value(ld16(p + 2)) * -1.0f);
            for (int l = 0; l < 16; l += 8) {
                __m256i v = u8x8(qs + l);
                __m256i q0 = _mm256_and_si256(v, m15), q1 = _mm256_srli_epi32(v, 4);
                if (qh_at >= 0) {
                    q0 = _mm256_or_si256(q0, bit4x8(qh, l));
                    q1 = _mm256_or_si256(q1, bit4x8(qh, l + 16));
                }
                _mm256_storeu_ps(o + l, l1_8(S, q0, Z));
                _mm256_storeu_ps(o + l + 16, l1_8(S, q1, Z));
            }
        } else {
            __m256 S = _mm256_set1_ps(d);
            for (int l = 0; l < 16; l += 8) {
                __m256i v = u8x8(qs + l);
                __m256i q0 = _mm256_and_si256(v, m15), q1 = _mm256_srli_epi32(v, 4);
                if (qh_at >= 0) {
                    q0 = _mm256_or_si256(q0, bit4x8(qh, l));
                    q1 = _mm256_or_si256(q1, bit4x8(qh, l + 16));
                }
                _mm256_storeu_ps(o + l, off8(S, q0, zv));
                _mm256_storeu_ps(o + l + 16, off8(S, q1, zv));
            }
        }
    }
}
#endif

/* the portable loop of the four 32-element types */
static void
q4q5_range(const ggml_ctx *c, size_t lo, size_t hi, size_t bytes, int l1, int qh_at, int qs_at,
           float z)
{
    AVX2_FIRST(q4q5_avx2(c, lo, hi, bytes, l1, qh_at, qs_at, z));
    for (size_t b = lo; b < hi; b++) {
        const unsigned char *p = c->src + bytes * b, *qs = p + qs_at;
        float *o = c->out + 32 * b;
        float d = half_value(ld16(p));
        uint32_t qh = qh_at >= 0 ? ld32(p + qh_at) : 0;
        if (l1) {
            float S = d * 1.0f, Z = half_value(ld16(p + 2)) * -1.0f;
            for (int l = 0; l < 16; l++) {
                o[l] = l1_1(S, (qs[l] & 15u) | ((qh >> l) & 1u) << 4, Z);
                o[l + 16] = l1_1(S, (unsigned)(qs[l] >> 4) | ((qh >> (l + 16)) & 1u) << 4, Z);
            }
        } else {
            for (int l = 0; l < 16; l++) {
                o[l] = off1(d, (qs[l] & 15u) | ((qh >> l) & 1u) << 4, z);
                o[l + 16] = off1(d, (unsigned)(qs[l] >> 4) | ((qh >> (l + 16)) & 1u) << 4, z);
            }
        }
    }
}

static void
ggml_q4_0_range(void *vctx, int part, size_t lo, size_t hi)
{
    (void)part;
    q4q5_range((const ggml_ctx *)vctx, lo, hi, 18, 0, -1, 2, 8.0f);
}

static void
ggml_q4_1_range(void *vctx, int part, size_t lo, size_t hi)
{
    (void)part;
    q4q5_range((const ggml_ctx *)vctx, lo, hi, 20, 1, -1, 4, 0.0f);
}

static void
ggml_q5_0_range(void *vctx, int part, size_t lo, size_t hi)
{
    (void)part;
    q4q5_range((const ggml_ctx *)vctx, lo, hi, 22, 0, 2, 6, 16.0f);
}

static void
ggml_q5_1_range(void *vctx, int part, size_t lo, size_t hi)
{
    (void)part;
    q4q5_range((const ggml_ctx *)vctx, lo, hi, 24, 1, 4, 8, 0.0f);
}

/* Q2_K: element 128h + 32s + l is crumb s of qs[32h + l]; its group of 16 is
 * 8h + 2s + l / 16, with sc = scales[g] & 15 and m = scales[g] >> 4 */
#ifdef GRIT_AVX2
TARGET_AVX2 static void
q2_k_avx2(const ggml_ctx *c, size_t lo, size_t hi)
{
    const __m256i m3 = _mm256_set1_epi32(3);
    for (size_t b = lo; b < hi; b++) {
        const unsigned char *p = c->src + 84 * b, *qs = p + 16;
        float d = half_value(ld16(p + 80)), dmin = half_value(ld16(p + 82));
        float *o = c->out + 256 * b;
        for (int g = 0; g < 16; g++) {
            int h = g >> 3, s = (g >> 1) & 3, l = (g & 1) * 16;
            __m256 S = _mm256_set1_ps(d * (float)(p[g] & 15));
            __m256 Z = _mm256_set1_ps(dmin * (float)(p[g] >> 4));
            __m128i sh = _mm_cvtsi32_si128(2 * s);
            const unsigned char *q = qs + 32 * h + l;
            float *og = o + 128 * h + 32 * s + l;
            __m256i v0 = _mm256_and_si256(_mm256_srl_epi32(u8x8(q), sh), m3);
            __m256i v1 = _mm256_and_si256(_mm256_srl_epi32(u8x8(q + 8), sh), m3);
            _mm256_storeu_ps(og, l1_8(S, v0, Z));
            _mm256_storeu_ps(og + 8, l1_8(S, v1, Z));
        }
    }
}
#endif

static void
ggml_q2_k_range(void *vctx, int part, size_t lo, size_t hi)
{
    const ggml_ctx *c = (const ggml_ctx *)vctx;
    (void)part;
    AVX2_FIRST(q2_k_avx2(c, lo, hi));
    for (size_t b = lo; b < hi; b++) {
        const unsigned char *p = c->src + 84 * b, *qs = p + 16;
        float d = half_value(ld16(p + 80)), dmin = half_value(ld16(p + 82));
        float *o = c->out + 256 * b;
        for (int g = 0; g < 16; g++) {
            int h = g >> 3, s = (g >> 1) & 3, l = (g & 1) * 16;
            float S = d * (float)(p[g] & 15), Z = dmin * (float)(p[g] >> 4);
            const unsigned char *q = qs + 32 * h + l;
            float *og = o + 128 * h + 32 * s + l;
            for (int i = 0; i < 16; i++) {
                og[i] = l1_1(S, (q[i] >> (2 * s)) & 3u, Z);
            }
        }
    }
}

/* Q5_K: as Q4_K (run j of 64: sub-blocks 2j, 2j + 1 from the low and high
 * nibbles of qs[32j ..]), bit 4 of element 32t + l is bit t of qh[l] */
#ifdef GRIT_AVX2
TARGET_AVX2 static void
q5_k_avx2(const ggml_ctx *c, size_t lo, size_t hi)
{
    const __m256i m15 = _mm256_set1_epi32(15), one = _mm256_set1_epi32(1);
    for (size_t b = lo; b < hi; b++) {
        const unsigned char *p = c->src + 176 * b, *sc12 = p + 4, *qh = p + 16, *qs = p + 48;
        float d = half_value(ld16(p)), dmin = half_value(ld16(p + 2));
        float *o = c->out + 256 * b;
        for (int t = 0; t < 8; t++) {              /* sub-block t: elements 32t .. 32t + 31 */
            unsigned sc, m;
            k4_scale_min(sc12, t, &sc, &m);
            __m256 S = _mm256_set1_ps(d * (float)sc), Z = _mm256_set1_ps(dmin * (float)m);
            __m128i nsh = _mm_cvtsi32_si128(4 * (t & 1)), bsh = _mm_cvtsi32_si128(t);
            const unsigned char *q = qs + 32 * (t >> 1);
            for (int l = 0; l < 32; l += 8) {
                __m256i v = _mm256_and_si256(_mm256_srl_epi32(u8x8(q + l), nsh), m15);
                __m256i hb = _mm256_and_si256(_mm256_srl_epi32(u8x8(qh + l), bsh), one);
                v = _mm256_or_si256(v, _mm256_slli_epi32(hb, 4));
                _mm256_storeu_ps(o + 32 * t + l, l1_8(S, v, Z));
            }
        }
    }
}
#endif

static void
ggml_q5_k_range(void *vctx, int part, size_t lo, size_t hi)
{
    const ggml_ctx *c = (const ggml_ctx *)vctx;
    (void)part;
    AVX2_FIRST(q5_k_avx2(c, lo, hi));
    for (size_t b = lo; b < hi; b++) {
        const unsigned char *p = c->src + 176 * b, *sc12 = p + 4, *qh = p + 16, *qs = p + 48;
        float d = half_value(ld16(p)), dmin = half_value(ld16(p + 2));
        float *o = c->out + 256 * b;
        for (int t = 0; t < 8; t++) {
            unsigned sc, m;
            k4_scale_min(sc12, t, &sc, &m);
            float S = d * (float)sc, Z = dmin * (float)m;
            const unsigned char *q = qs + 32 * (t >> 1);
            int nsh = 4 * (t & 1);
            for (int l = 0; l < 32; l++) {
                unsigned code = ((q[l] >> nsh) & 15u) | ((qh[l] >> t) & 1u) << 4;
                o[32 * t + l] = l1_1(S, code, Z);
            }
        }
    }
}

/* Q6_K: element 128h + 32t + l (t < 4, l < 32) has its low nibble in
 * ql[64h + 32(t & 1) + l] (bits 4(t >> 1) ..) and its top two bits as crumb t
 * of qh[32h + l]; its group of 16 is 8h + 2t + l / 16 */
#ifdef GRIT_AVX2
TARGET_AVX2 static void
q6_k_avx2(const ggml_ctx *c, size_t lo, size_t hi)
{
    const __m256i m15 = _mm256_set1_epi32(15), m3 = _mm256_set1_epi32(3);
    const __m256 z = _mm256_set1_ps(32.0f);
    for (size_t b = lo; b < hi; b++) {
        const unsigned char *p = c->src + 210 * b;
        const signed char *sc = (const signed char *)(p + 192);
        float d = half_value(ld16(p + 208));
        float *o = c->out + 256 * b;
        for (int g = 0; g < 16; g++) {
            int h = g >> 3, t = (g >> 1) & 3, l = (g & 1) * 16;
            __m256 S = _mm256_set1_ps(d * (float)sc[g]);
            __m128i nsh = _mm_cvtsi32_si128(4 * (t >> 1)), csh = _mm_cvtsi32_si128(2 * t);
            const unsigned char *ql = p + 64 * h + 32 * (t & 1) + l, *qh = p + 128 + 32 * h + l;
            float *og = o + 128 * h + 32 * t + l;
            for (int i = 0; i < 16; i += 8) {
                __m256i lo4 = _mm256_and_si256(_mm256_srl_epi32(u8x8(ql + i), nsh), m15);
                __m256i hi2 = _mm256_and_si256(_mm256_srl_epi32(u8x8(qh + i), csh), m3);
                __m256i v = _mm256_or_si256(lo4, _mm256_slli_epi32(hi2, 4));
                _mm256_storeu_ps(og + i, off8(S, v, z));
            }
        }
    }
}
#endif

static void
ggml_q6_k_range(void *vctx, int part, size_t lo, size_t hi)
{
    const ggml_ctx *c = (const ggml_ctx *)vctx;
    (void)part;
    AVX2_FIRST(q6_k_avx2(c, lo, hi));
    for (size_t b = lo; b < hi; b++) {
        const unsigned char *p = c->src + 210 * b;
        const signed char *sc = (const signed char *)(p + 192);
        float d = half_value(ld16(p + 208));
        float *o = c->out + 256 * b;
        for (int g = 0; g < 16; g++) {
            int h = g >> 3, t = (g >> 1) & 3, l = (g & 1) * 16;
            float S = d * (float)sc[g];
            const unsigned char *ql = p + 64 * h + 32 * (t & 1) + l, *qh = p + 128 + 32 * h + l;
            float *og = o + 128 * h + 32 * t + l;
            for (int i = 0; i < 16; i++) {
                unsigned code = ((ql[i] >> (4 * (t >> 1))) & 15u) | ((qh[i] >> (2 * t)) & 3u) << 4;
                og[i] = off1(S, code, 32.0f);
            }
        }
    }
}

/* Q8_K: x = f32(d · q) with a binary32 d; the bsums are not read */
#ifdef GRIT_AVX2
TARGET_AVX2 static void
q8_k_avx2(const ggml_ctx *c, size_t lo, size_t hi)
{
    for (size_t b = lo; b < hi; b++) {
        const unsigned char *p = c->src + 292 * b;
        __m256 d = _mm256_set1_ps(ld_f32le(p));
        float *o = c->out + 256 * b;
        for (int i = 0; i < 256; i += 8) {
            __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p + 4 + i)));
            _mm256_storeu_ps(o + i, canon8(_mm256_mul_ps(d, _mm256_cvtepi32_ps(q))));
        }
    }
}
#endif

static void
ggml_q8_k_range(void *vctx, int part, size_t lo, size_t hi)
{
    const ggml_ctx *c = (const ggml_ctx *)vctx;
    (void)part;
    AVX2_FIRST(q8_k_avx2(c, lo, hi));
    for (size_t b = lo; b < hi; b++) {
        const unsigned char *p = c->src + 292 * b;
        const signed char *q = (const signed char *)(p + 4);
        float d = ld_f32le(p), *o = c->out + 256 * b;
        for (int i = 0; i < 256; i++) {
            o[i] = canon(d * (float)q[i]);
        }
    }
}

/* TQ2_0: element 128h + 32s + l is crumb s of qs[32h + l]; x = f32(d · f32(q − 1)) */
#ifdef GRIT_AVX2
TARGET_AVX2 static void
tq2_0_avx2(const ggml_ctx *c, size_t lo, size_t hi)
{
    const __m256i m3 = _mm256_set1_epi32(3);
    const __m256 z = _mm256_set1_ps(1.0f);
    for (size_t b = lo; b < hi; b++) {
        const unsigned char *p = c->src + 66 * b;
        __m256 S = _mm256_set1_ps(half_value(ld16(p + 64)));
        float *o = c->out + 256 * b;
        for (int h = 0; h < 2; h++) {
            for (int l = 0; l < 32; l += 8) {
                __m256i v = u8x8(p + 32 * h + l);
                for (int s = 0; s < 4; s++) {
                    __m256i q = _mm256_and_si256(_mm256_srl_epi32(v, _mm_cvtsi32_si128(2 * s)), m3);
                    _mm256_storeu_ps(o + 128 * h + 32 * s + l, off8(S, q, z));
                }
            }
        }
    }
}
#endif

static void
ggml_tq2_0_range(void *vctx, int part, size_t lo, size_t hi)
{
    const ggml_ctx *c = (const ggml_ctx *)vctx;
    (void)part;
    AVX2_FIRST(tq2_0_avx2(c, lo, hi));
    for (size_t b = lo; b < hi; b++) {
        const unsigned char *p = c->src + 66 * b;
        float d = half_value(ld16(p + 64)), *o = c->out + 256 * b;
        for (int h = 0; h < 2; h++) {
            for (int s = 0; s < 4; s++) {
                for (int l = 0; l < 32; l++) {
                    o[128 * h + 32 * s + l] = off1(d, (p[32 * h + l] >> (2 * s)) & 3u, 1.0f);
                }
            }
        }
    }
}

static const range_fn RANGE[GGML_KINDS] = {
    ggml_q8_0_range, ggml_mxfp4_range, ggml_nvfp4_range, ggml_q4_k_range,
    ggml_q4_0_range, ggml_q4_1_range, ggml_q5_0_range, ggml_q5_1_range, ggml_q2_k_range,
    ggml_q5_k_range, ggml_q6_k_range, ggml_q8_k_range, ggml_tq2_0_range};


void
grit_k_decode_ggml(int kind, const unsigned char *src, float *out, size_t blocks, int nthreads)
{
    ggml_ctx c;
    c.src = src;
    c.out = out;
    grit_run_parts(RANGE[kind], &c, blocks, n_parts(blocks, nthreads));
}

/* ------------------------------------------------------------------------
 * NVFP4 blocks <-> planes (core.h).  A run of 16 codes is one 64-bit word x,
 * code i in bits 4i..4i+3; ggml's halves order puts code k and code k + 8
 * in byte k.  spread16: the low 32 bits' 8 codes one per byte (the nibble of
 * byte k is code k), by halving the distances three times. */
static inline uint64_t
spread16(uint64_t v)
{
    v = (v | v << 16) & UINT64_C(0x0000FFFF0000FFFF);
    v = (v | v << 8) & UINT64_C(0x00FF00FF00FF00FF);
    return (v | v << 4) & UINT64_C(0x0F0F0F0F0F0F0F0F);
}

/* the inverse: the low nibbles of the 8 bytes back into 32 bits */
static inline uint64_t
gather16(uint64_t v)
{
    v &= UINT64_C(0x0F0F0F0F0F0F0F0F);
    v = (v | v >> 4) & UINT64_C(0x00FF00FF00FF00FF);
    v = (v | v >> 8) & UINT64_C(0x0000FFFF0000FFFF);
    return (v | v >> 16) & UINT64_C(0x00000000FFFFFFFF);
}

/* a little-endian 64-bit word (one load where the machine is little-endian) */
static inline uint64_t
load_le64(const unsigned char *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
#else
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = v << 8 | p[i];
    }
    return v;
#endif
}

static inline void
store_le64(unsigned char *p, uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, &v, sizeof v);
#else
    for (int i = 0; i < 8; i++) {
        p[i] = (unsigned char)(v >> 8 * i);
    }
#endif
}

static void
nvfp4_block_portable(const unsigned char *codes, const unsigned char *scales, unsigned char *out,
                     size_t blocks)
{
    for (size_t b = 0; b < blocks; b++) {
        unsigned char *o = out + 36 * b;
        memcpy(o, scales + 4 * b, 4);
        for (int w = 0; w < 4; w++) {
            uint64_t x = load_le64(codes + 32 * b + 8 * w);
            store_le64(o + 4 + 8 * w, spread16(x & 0xFFFFFFFFu) | spread16(x >> 32) << 4);
        }
    }
}

/* one NVFP4 block's 32 code bytes (LSB-first) and 4 scales */
static inline void
nvfp4_unblock_one(const unsigned char *s, unsigned char *codes, unsigned char *scales)
{
    memcpy(scales, s, 4);
    for (int w = 0; w < 4; w++) {
        uint64_t y = load_le64(s + 4 + 8 * w);
        store_le64(codes + 8 * w, gather16(y) | gather16(y >> 4) << 32);
    }
}

static void
nvfp4_unblock_portable(const unsigned char *blocks, unsigned char *codes, unsigned char *scales,
                       size_t nb)
{
    for (size_t b = 0; b < nb; b++) {
        nvfp4_unblock_one(blocks + 36 * b, codes + 32 * b, scales + 4 * b);
    }
}

static int
nvfp4_unblock_eq_portable(const unsigned char *blocks, const unsigned char *codes,
                          const unsigned char *scales, size_t nb)
{
    unsigned char c[32], sc[4];
    for (size_t b = 0; b < nb; b++) {
        nvfp4_unblock_one(blocks + 36 * b, c, sc);
        if (memcmp(c, codes + 32 * b, 32) != 0 || memcmp(sc, scales + 4 * b, 4) != 0) {
            return 0;
        }
    }
    return 1;
}

static void
mxfp4_block_portable(const unsigned char *codes, const unsigned char *scales, unsigned char *out,
                     size_t blocks)
{
    for (size_t b = 0; b < blocks; b++) {
        unsigned char *o = out + 17 * b;
        uint64_t w0 = load_le64(codes + 16 * b), w1 = load_le64(codes + 16 * b + 8);
        o[0] = scales[b];
        store_le64(o + 1, spread16(w0 & 0xFFFFFFFFu) | spread16(w1 & 0xFFFFFFFFu) << 4);
        store_le64(o + 9, spread16(w0 >> 32) | spread16(w1 >> 32) << 4);
    }
}

/* one MXFP4 block's 16 code bytes (LSB-first) and its scale */
static inline void
mxfp4_unblock_one(const unsigned char *s, unsigned char *codes, unsigned char *scale)
{
    uint64_t y0 = load_le64(s + 1), y1 = load_le64(s + 9);
    *scale = s[0];
    store_le64(codes, gather16(y0) | gather16(y1) << 32);
    store_le64(codes + 8, gather16(y0 >> 4) | gather16(y1 >> 4) << 32);
}

static void
mxfp4_unblock_portable(const unsigned char *blocks, unsigned char *codes, unsigned char *scales,
                       size_t nb)
{
    for (size_t b = 0; b < nb; b++) {
        mxfp4_unblock_one(blocks + 17 * b, codes + 16 * b, scales + b);
    }
}

static int
mxfp4_unblock_eq_portable(const unsigned char *blocks, const unsigned char *codes,
                          const unsigned char *scales, size_t nb)
{
    unsigned char c[16], sc;
    for (size_t b = 0; b < nb; b++) {
        mxfp4_unblock_one(blocks + 17 * b, c, &sc);
        if (memcmp(c, codes + 16 * b, 16) != 0 || sc != scales[b]) {
            return 0;
        }
    }
    return 1;
}

#ifdef GRIT_AVX2
/* The same moves 32 bytes at a time, each 128-bit lane on its own (unpack and
 * pack work within lanes).  Codes LSB-first: L = the low nibbles (the even
 * codes), H = the high ones (the odd codes); unpacking L with H lists a lane's
 * codes in order.
 *   to halves order (a run of 16 codes, 8 bytes in and out): byte k of the
 *   run is code k | code k + 8 << 4: the low and high 64 bits of the listed
 *   run joined by a 4-bit shift;
 *   back: a run's code k is the low nibble of byte k (k < 8), code k + 8 its
 *   high nibble; listed in order, each pair of codes packs into a byte
 *   (the 16-bit word's low byte | its high byte << 4). */
TARGET_AVX2 static inline __m256i
halves_of_run_pairs(__m256i x)
{
    const __m256i m = _mm256_set1_epi8(0x0F);
    __m256i lo = _mm256_and_si256(x, m), hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), m);
    __m256i r0 = _mm256_unpacklo_epi8(lo, hi), r1 = _mm256_unpackhi_epi8(lo, hi);
    return _mm256_or_si256(_mm256_unpacklo_epi64(r0, r1),
                           _mm256_slli_epi16(_mm256_unpackhi_epi64(r0, r1), 4));
}

TARGET_AVX2 static inline __m256i
pairs_packed(__m256i a, __m256i b)
{
    const __m256i ff = _mm256_set1_epi16(0xFF);
    a = _mm256_and_si256(_mm256_or_si256(a, _mm256_srli_epi16(a, 4)), ff);
    b = _mm256_and_si256(_mm256_or_si256(b, _mm256_srli_epi16(b, 4)), ff);
    return _mm256_packus_epi16(a, b);
}

/* NVFP4: 32 bytes in halves order (4 runs) -> 32 code bytes LSB-first */
TARGET_AVX2 static inline __m256i
nvfp4_codes_avx2(__m256i r)
{
    const __m256i m = _mm256_set1_epi8(0x0F);
    __m256i lo = _mm256_and_si256(r, m), hi = _mm256_and_si256(_mm256_srli_epi16(r, 4), m);
    return pairs_packed(_mm256_unpacklo_epi64(lo, hi), _mm256_unpackhi_epi64(lo, hi));
}

/* MXFP4: two blocks' 16 bytes in halves order (byte k: code k | code k + 16
 * << 4), one a lane -> their 16 code bytes each */
TARGET_AVX2 static inline __m256i
mxfp4_codes_avx2(__m256i r)
{
    const __m256i m = _mm256_set1_epi8(0x0F);
    __m256i lo = _mm256_and_si256(r, m), hi = _mm256_and_si256(_mm256_srli_epi16(r, 4), m);
    return pairs_packed(lo, hi);
}

TARGET_AVX2 static inline __m128i
load16(const unsigned char *p)
{
    return _mm_loadu_si128((const __m128i *)(const void *)p);
}

TARGET_AVX2 static inline __m256i
load32(const unsigned char *p)
{
    return _mm256_loadu_si256((const __m256i *)(const void *)p);
}

TARGET_AVX2 static void
nvfp4_block_avx2(const unsigned char *codes, const unsigned char *scales, unsigned char *out,
                 size_t blocks)
{
    for (size_t b = 0; b < blocks; b++) {
        unsigned char *o = out + 36 * b;
        memcpy(o, scales + 4 * b, 4);
        _mm256_storeu_si256((__m256i *)(void *)(o + 4), halves_of_run_pairs(load32(codes + 32 * b)));
    }
}

TARGET_AVX2 static void
nvfp4_unblock_avx2(const unsigned char *blocks, unsigned char *codes, unsigned char *scales,
                   size_t nb)
{
    for (size_t b = 0; b < nb; b++) {
        const unsigned char *s = blocks + 36 * b;
        memcpy(scales + 4 * b, s, 4);
        _mm256_storeu_si256((__m256i *)(void *)(codes + 32 * b), nvfp4_codes_avx2(load32(s + 4)));
    }
}

/* whether the differences gathered so far are none */
TARGET_AVX2 static inline int
none_differ(__m256i acc, uint32_t sacc)
{
    return sacc == 0 && _mm256_testz_si256(acc, acc);
}

TARGET_AVX2 static int
nvfp4_unblock_eq_avx2(const unsigned char *blocks, const unsigned char *codes,
                      const unsigned char *scales, size_t nb)
{
    __m256i acc = _mm256_setzero_si256();
    uint32_t sacc = 0;
    for (size_t b = 0; b < nb; b++) {
        const unsigned char *s = blocks + 36 * b;
        uint32_t got, want;
        memcpy(&got, s, 4);
        memcpy(&want, scales + 4 * b, 4);
        sacc |= got ^ want;
        acc = _mm256_or_si256(acc, _mm256_xor_si256(nvfp4_codes_avx2(load32(s + 4)),
                                                    load32(codes + 32 * b)));
        if ((b & 255) == 255 && !none_differ(acc, sacc)) {
            return 0;
        }
    }
    return none_differ(acc, sacc);
}

TARGET_AVX2 static void
mxfp4_block_avx2(const unsigned char *codes, const unsigned char *scales, unsigned char *out,
                 size_t blocks)
{
    const __m256i m = _mm256_set1_epi8(0x0F);
    size_t b = 0;
    for (; b + 2 <= blocks; b += 2) {
        /* one block a lane: its codes listed in order are the lane's two
         * unpacks, codes 0-15 and 16-31; byte k = code k | code k + 16 << 4 */
        __m256i x = load32(codes + 16 * b);
        __m256i lo = _mm256_and_si256(x, m), hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), m);
        __m256i y = _mm256_or_si256(_mm256_unpacklo_epi8(lo, hi),
                                    _mm256_slli_epi16(_mm256_unpackhi_epi8(lo, hi), 4));
        unsigned char *o = out + 17 * b;
        o[0] = scales[b];
        _mm_storeu_si128((__m128i *)(void *)(o + 1), _mm256_castsi256_si128(y));
        o[17] = scales[b + 1];
        _mm_storeu_si128((__m128i *)(void *)(o + 18), _mm256_extracti128_si256(y, 1));
    }
    if (b < blocks) {
        mxfp4_block_portable(codes + 16 * b, scales + b, out + 17 * b, blocks - b);
    }
}

TARGET_AVX2 static inline __m256i
mxfp4_pair(const unsigned char *s)
{
    return _mm256_inserti128_si256(_mm256_castsi128_si256(load16(s + 1)), load16(s + 18), 1);
}

TARGET_AVX2 static void
mxfp4_unblock_avx2(const unsigned char *blocks, unsigned char *codes, unsigned char *scales,
                   size_t nb)
{
    size_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        const unsigned char *s = blocks + 17 * b;
        scales[b] = s[0];
        scales[b + 1] = s[17];
        _mm256_storeu_si256((__m256i *)(void *)(codes + 16 * b), mxfp4_codes_avx2(mxfp4_pair(s)));
    }
    if (b < nb) {
        mxfp4_unblock_portable(blocks + 17 * b, codes + 16 * b, scales + b, nb - b);
    }
}

TARGET_AVX2 static int
mxfp4_unblock_eq_avx2(const unsigned char *blocks, const unsigned char *codes,
                      const unsigned char *scales, size_t nb)
{
    __m256i acc = _mm256_setzero_si256();
    uint32_t sacc = 0;
    size_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        const unsigned char *s = blocks + 17 * b;
        sacc |= (uint32_t)(s[0] ^ scales[b]) | (uint32_t)(s[17] ^ scales[b + 1]);
        acc = _mm256_or_si256(acc, _mm256_xor_si256(mxfp4_codes_avx2(mxfp4_pair(s)),
                                                    load32(codes + 16 * b)));
        if ((b & 510) == 510 && !none_differ(acc, sacc)) {
            return 0;
        }
    }
    return none_differ(acc, sacc)
        && (b == nb || mxfp4_unblock_eq_portable(blocks + 17 * b, codes + 16 * b, scales + b,
                                                 nb - b));
}
#endif

/* the entry points: the AVX2 loops where the CPU has AVX2 (the same bytes:
 * tests/test_ggml_unblock.py runs both) */
void
grit_k_nvfp4_block(const unsigned char *codes, const unsigned char *scales, unsigned char *out,
                   size_t blocks)
{
    AVX2_FIRST(nvfp4_block_avx2(codes, scales, out, blocks));
    nvfp4_block_portable(codes, scales, out, blocks);
}

void
grit_k_nvfp4_unblock(const unsigned char *blocks, unsigned char *codes, unsigned char *scales,
                     size_t nb)
{
    AVX2_FIRST(nvfp4_unblock_avx2(blocks, codes, scales, nb));
    nvfp4_unblock_portable(blocks, codes, scales, nb);
}

int
grit_k_nvfp4_unblock_eq(const unsigned char *blocks, const unsigned char *codes,
                        const unsigned char *scales, size_t nb)
{
#ifdef GRIT_AVX2
    if (grit_use_avx2) {
        return nvfp4_unblock_eq_avx2(blocks, codes, scales, nb);
    }
#endif
    return nvfp4_unblock_eq_portable(blocks, codes, scales, nb);
}

void
grit_k_mxfp4_block(const unsigned char *codes, const unsigned char *scales, unsigned char *out,
                   size_t blocks)
{
    AVX2_FIRST(mxfp4_block_avx2(codes, scales, out, blocks));
    mxfp4_block_portable(codes, scales, out, blocks);
}

void
grit_k_mxfp4_unblock(const unsigned char *blocks, unsigned char *codes, unsigned char *scales,
                     size_t nb)
{
    AVX2_FIRST(mxfp4_unblock_avx2(blocks, codes, scales, nb));
    mxfp4_unblock_portable(blocks, codes, scales, nb);
}

int
grit_k_mxfp4_unblock_eq(const unsigned char *blocks, const unsigned char *codes,
                        const unsigned char *scales, size_t nb)
{
#ifdef GRIT_AVX2
    if (grit_use_avx2) {
        return mxfp4_unblock_eq_avx2(blocks, codes, scales, nb);
    }
#endif
    return mxfp4_unblock_eq_portable(blocks, codes, scales, nb);
}

/* ------------------------------------------------------------------------
 * Q8_0 blocks <-> planes (core.h): each block's 2 scale bytes and 32 code
 * bytes moved as they are; the comparison gathers the differences of whole
 * 64-bit words and looks at them every 256 blocks. */
void
grit_k_q8_0_block(const unsigned char *codes, const unsigned char *scales, unsigned char *out,
                  size_t blocks)
{
    for (size_t b = 0; b < blocks; b++) {
        memcpy(out + 34 * b, scales + 2 * b, 2);
        memcpy(out + 34 * b + 2, codes + 32 * b, 32);
    }
}

void
grit_k_q8_0_unblock(const unsigned char *blocks, unsigned char *codes, unsigned char *scales,
                    size_t nb)
{
    for (size_t b = 0; b < nb; b++) {
        memcpy(scales + 2 * b, blocks + 34 * b, 2);
        memcpy(codes + 32 * b, blocks + 34 * b + 2, 32);
    }
}

int
grit_k_q8_0_unblock_eq(const unsigned char *blocks, const unsigned char *codes,
                       const unsigned char *scales, size_t nb)
{
    uint64_t acc = 0;
    for (size_t b = 0; b < nb; b++) {
        const unsigned char *s = blocks + 34 * b;
        acc |= (uint64_t)(s[0] ^ scales[2 * b]) | (uint64_t)(s[1] ^ scales[2 * b + 1]);
        for (int w = 0; w < 4; w++) {
            acc |= load_le64(s + 2 + 8 * w) ^ load_le64(codes + 32 * b + 8 * w);
        }
        if ((b & 255) == 255 && acc != 0) {
            return 0;
        }
    }
    return acc == 0;
}
