/*
 * The decode kernels of the registered grades (§8, §10), portable and
 * AVX2 loops, and grit_k_decode.
 */
#include "core.h"

/* ------------------------------------------------------------------------
 * Decode, 4-bit elements.  A group's 16 possible outputs -- f32(S · e), or
 * f32(f32(S · e) − Z) -- are computed once with NaN made canonical, which
 * also covers the poison law (a NaN scale makes every entry NaN), and each
 * element is a lookup.  The products are the same IEEE operations the
 * per-element formula performs, so the bits are the same. */

typedef struct {
    const unsigned char *data, *scale0, *scale1, *aux;
    float *out;
    float sT;                                        /* NVF4: binary32 per-tensor scale */
    size_t count[MAX_THREADS];                       /* I8S24: kept positions per part */
    size_t start[MAX_THREADS];                       /* I8S24: cursor at each part */
} dec_ctx;

static inline void
nib_lookup_scalar(const float *t, const unsigned char *src, float *dst, size_t nbytes)
{
    for (size_t j = 0; j < nbytes; j++) {
        unsigned b = src[j];
        dst[2 * j] = t[b & 15];                      /* element 2j: low nibble */
        dst[2 * j + 1] = t[b >> 4];
    }
}

static inline float
q4ks_d(const unsigned char *s1, int which)
{
    return half_value((unsigned)s1[2 * which] | (unsigned)s1[2 * which + 1] << 8);
}

#ifdef GRIT_AVX2
/* 8 elements per 4 bytes: lane k takes nibble k of the little-endian word. */
TARGET_AVX2 static inline void
nib_lookup_avx2(__m256 tlo, __m256 thi, const unsigned char *src, float *dst, size_t nbytes)
{
    const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    for (size_t j = 0; j < nbytes; j += 4) {
        uint32_t w;
        memcpy(&w, src + j, 4);
        __m256i idx = _mm256_srlv_epi32(_mm256_set1_epi32((int)w), shifts);
        _mm256_storeu_ps(dst + 2 * j, lut16(tlo, thi, idx));
    }
}

TARGET_AVX2 static void
dec_mxfp4_avx2(dec_ctx *c, size_t lo, size_t hi)
{
    const __m256 pos = _mm256_loadu_ps(E2M1), neg = _mm256_loadu_ps(E2M1 + 8);
    for (size_t g = lo; g < hi; g++) {
        __m256 S = _mm256_set1_ps(e8m0_value(c->scale0[g]));
        nib_lookup_avx2(canon8(_mm256_mul_ps(S, pos)), canon8(_mm256_mul_ps(S, neg)),
                        c->data + 16 * g, c->out + 32 * g, 16);
    }
}

TARGET_AVX2 static void
dec_nvf4_avx2(dec_ctx *c, size_t lo, size_t hi)
{
    const __m256 pos = _mm256_loadu_ps(E2M1), neg = _mm256_loadu_ps(E2M1 + 8);
    for (size_t g = lo; g < hi; g++) {
        __m256 S = _mm256_set1_ps(c->sT * grit_e4m3[c->scale0[g]]);
        nib_lookup_avx2(canon8(_mm256_mul_ps(S, pos)), canon8(_mm256_mul_ps(S, neg)),
                        c->data + 8 * g, c->out + 16 * g, 8);
    }
}

TARGET_AVX2 static void
dec_q4ks_avx2(dec_ctx *c, size_t lo, size_t hi)
{
    const __m256 i0 = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256 i8 = _mm256_setr_ps(8, 9, 10, 11, 12, 13, 14, 15);
    for (size_t sb = lo; sb < hi; sb++) {
        float d = q4ks_d(c->scale1 + 4 * sb, 0), dmin = q4ks_d(c->scale1 + 4 * sb, 1);
        for (size_t g = 8 * sb; g < 8 * sb + 8; g++) {
            __m256 S = _mm256_set1_ps(d * (float)(c->scale0[g] & U6_MAX));
            __m256 Z = _mm256_set1_ps(dmin * (float)(c->aux[g] & U6_MAX));
            __m256 tlo = canon8(_mm256_sub_ps(_mm256_mul_ps(S, i0), Z));
            __m256 thi = canon8(_mm256_sub_ps(_mm256_mul_ps(S, i8), Z));
            nib_lookup_avx2(tlo, thi, c->data + 16 * g, c->out + 32 * g, 16);
        }
    }
}
#endif

/* MXFP4 (§10.1): S = 2^(scale0 − 127), 0xFF poisons; x = f32(S · e).  Unit: group of 32. */
static void
dec_mxfp4_range(void *vctx, int part, size_t lo, size_t hi)
{
    dec_ctx *c = (dec_ctx *)vctx;
    (void)part;
#ifdef GRIT_AVX2
    if (grit_use_avx2) {
        dec_mxfp4_avx2(c, lo, hi);
        return;
    }
#endif
    float t[16];
    for (size_t g = lo; g < hi; g++) {
        float S = e8m0_value(c->scale0[g]);
        for (int i = 0; i < 16; i++) {
            t[i] = canon(S * E2M1[i]);
        }
        nib_lookup_scalar(t, c->data + 16 * g, c->out + 32 * g, 16);
    }
}

/* NVF4 (§10.3): S = f32(sT · e4m3(scale0)); x = f32(S · e).  Unit: block of 16. */
static void
dec_nvf4_range(void *vctx, int part, size_t lo, size_t hi)
{
    dec_ctx *c = (dec_ctx *)vctx;
    (void)part;
#ifdef GRIT_AVX2
    if (grit_use_avx2) {
        dec_nvf4_avx2(c, lo, hi);
        return;
    }
#endif
    float t[16];
    for (size_t g = lo; g < hi; g++) {
        float S = c->sT * grit_e4m3[c->scale0[g]];
        for (int i = 0; i < 16; i++) {
            t[i] = canon(S * E2M1[i]);
        }
        nib_lookup_scalar(t, c->data + 8 * g, c->out + 16 * g, 8);
    }
}

/* Q4KS (§10.2): d, dmin binary16 per super-block (scale1 = [d, dmin]),
 * S = f32(d · sc), Z = f32(dmin · m), x = f32(f32(S · q) − Z); u6 codes are
 * masked to 6 bits as PAD8 requires.  Unit: super-block of 8 × 32. */
static void
dec_q4ks_range(void *vctx, int part, size_t lo, size_t hi)
{
    dec_ctx *c = (dec_ctx *)vctx;
    (void)part;
#ifdef GRIT_AVX2
    if (grit_use_avx2) {
        dec_q4ks_avx2(c, lo, hi);
        return;
    }
#endif
    float t[16];
    for (size_t sb = lo; sb < hi; sb++) {
        float d = q4ks_d(c->scale1 + 4 * sb, 0), dmin = q4ks_d(c->scale1 + 4 * sb, 1);
        for (size_t g = 8 * sb; g < 8 * sb + 8; g++) {
            float S = d * (float)(c->scale0[g] & U6_MAX);
            float Z = dmin * (float)(c->aux[g] & U6_MAX);
            for (int i = 0; i < 16; i++) {
                t[i] = canon(S * (float)i - Z);
            }
            nib_lookup_scalar(t, c->data + 16 * g, c->out + 32 * g, 16);
        }
    }
}

/* I8S24 (§10.4 with docs/spec-decisions.md): quad q keeps the set of the
 * positions its two u2 indices name (one position when they are equal); one
 * cursor hands out the stored s8 values in ascending logical order across
 * the whole array.  Phase 1 counts the kept positions of each part so that
 * phase 2 can start every part at its own cursor.  Unit: group of 32
 * logical elements = 8 quads = 4 metadata bytes. */

/* Per metadata nibble: how many positions it keeps, and for each position
 * 0 (masked), 1 (the first value handed out) or 2 (the second). */
unsigned char grit_kept_per_meta_byte[256];
unsigned char grit_kept_per_nibble[16];
unsigned char grit_slot_of[16][4];

void
grit_init_i8(void)
{
    for (unsigned nib = 0; nib < 16; nib++) {
        unsigned a = nib & 3, b = nib >> 2, lo = a < b ? a : b, hi = a < b ? b : a;
        grit_kept_per_nibble[nib] = (unsigned char)(a == b ? 1 : 2);
        for (unsigned j = 0; j < 4; j++) {
            grit_slot_of[nib][j] = (unsigned char)(j == lo ? 1 : (j == hi ? 2 : 0));
        }
    }
    for (unsigned b = 0; b < 256; b++) {
        grit_kept_per_meta_byte[b] = (unsigned char)(grit_kept_per_nibble[b & 15] + grit_kept_per_nibble[b >> 4]);
    }
}

static void
dec_i8s24_count(void *vctx, int part, size_t lo, size_t hi)
{
    dec_ctx *c = (dec_ctx *)vctx;
    size_t n = 0;
    for (size_t j = 4 * lo; j < 4 * hi; j++) {
        n += grit_kept_per_meta_byte[c->aux[j]];
    }
    c->count[part] = n;
}

/* One group, scalar; returns the advanced cursor. */
static inline size_t
dec_i8s24_group(const dec_ctx *c, size_t g, size_t cur)
{
    const signed char *data = (const signed char *)c->data;
    const unsigned char *s0 = c->scale0 + 2 * g;
    float S = half_value((unsigned)s0[0] | (unsigned)s0[1] << 8);
    float *o = c->out + 32 * g;
    for (int q = 0; q < 8; q++) {
        unsigned byte = c->aux[4 * g + (size_t)(q >> 1)];
        unsigned nib = (q & 1) ? byte >> 4 : byte & 15, k = grit_kept_per_nibble[nib];
        float v[3];
        v[0] = 0.0f;                                 /* +0.0: the sparsity law wins over NaN */
        v[1] = canon(S * (float)data[cur]);
        /* the second value exists only when two positions are kept (the
         * plane may end right after the first) */
        v[2] = k == 2 ? canon(S * (float)data[cur + 1]) : 0.0f;
        cur += k;
        const unsigned char *slot = grit_slot_of[nib];
        o[4 * q] = v[slot[0]];
        o[4 * q + 1] = v[slot[1]];
        o[4 * q + 2] = v[slot[2]];
        o[4 * q + 3] = v[slot[3]];
    }
    return cur;
}

#ifdef GRIT_AVX2
/* grit_shuf_of_meta[k][byte]: for metadata byte k of a group (quads 2k, 2k + 1),
 * the PSHUFB control that places its four stored values -- bytes 4k..4k+3 of
 * the group's 16 -- at the 8 positions, 0x80 (zero) where nothing is kept.
 * Used only when every quad of the group keeps two positions. */
uint64_t grit_shuf_of_meta[4][256];

void
grit_init_i8_shuffles(void)
{
    for (unsigned k = 0; k < 4; k++) {
        for (unsigned b = 0; b < 256; b++) {
            uint64_t ctl = 0;
            for (unsigned p = 0; p < 8; p++) {
                unsigned nib = p < 4 ? (b & 15) : (b >> 4), slot = grit_slot_of[nib][p & 3];
                unsigned idx = slot ? 4 * k + 2 * (p >> 2) + slot - 1 : 0x80;
                ctl |= (uint64_t)idx << (8 * p);
            }
            grit_shuf_of_meta[k][b] = ctl;
        }
    }
}

TARGET_AVX2 static void
dec_i8s24_avx2(dec_ctx *c, size_t lo, size_t cur, size_t hi)
{
    const __m256 zero = _mm256_setzero_ps();
    for (size_t g = lo; g < hi; g++) {
        const unsigned char *m = c->aux + 4 * g;
        if (grit_kept_per_meta_byte[m[0]] + grit_kept_per_meta_byte[m[1]] + grit_kept_per_meta_byte[m[2]]
            + grit_kept_per_meta_byte[m[3]] != 16) {
            cur = dec_i8s24_group(c, g, cur);        /* a repeated index: scalar */
            continue;
        }
        /* 16 stored values, both 128-bit lanes; lane 1 serves bytes 2 and 3 */
        __m256i v = _mm256_broadcastsi128_si256(
            _mm_loadu_si128((const __m128i *)(c->data + cur)));
        __m256i ctl = _mm256_setr_epi64x((long long)grit_shuf_of_meta[0][m[0]],
                                         (long long)grit_shuf_of_meta[1][m[1]],
                                         (long long)grit_shuf_of_meta[2][m[2]],
                                         (long long)grit_shuf_of_meta[3][m[3]]);
        __m256i q = _mm256_shuffle_epi8(v, ctl);      /* s8 codes in place, 0 where masked */
        const unsigned char *s0 = c->scale0 + 2 * g;
        __m256 S = _mm256_set1_ps(half_value((unsigned)s0[0] | (unsigned)s0[1] << 8));
        float *o = c->out + 32 * g;
        for (int j = 0; j < 4; j++) {
            __m128i q8 = j < 2 ? _mm256_castsi256_si128(q) : _mm256_extracti128_si256(q, 1);
            __m128i c8 = j < 2 ? _mm256_castsi256_si128(ctl) : _mm256_extracti128_si256(ctl, 1);
            if (j & 1) {
                q8 = _mm_srli_si128(q8, 8);
                c8 = _mm_srli_si128(c8, 8);
            }
            __m256 x = canon8(_mm256_mul_ps(S, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8))));
            /* control byte 0x80 -> negative lane -> +0.0: the sparsity law wins */
            __m256 masked = _mm256_castsi256_ps(_mm256_cvtepi8_epi32(c8));
            _mm256_storeu_ps(o + 8 * j, _mm256_blendv_ps(x, zero, masked));
        }
        cur += 16;
    }
}
#endif

static void
dec_i8s24_range(void *vctx, int part, size_t lo, size_t hi)
{
    dec_ctx *c = (dec_ctx *)vctx;
    size_t cur = c->start[part];
#ifdef GRIT_AVX2
    if (grit_use_avx2) {
        dec_i8s24_avx2(c, lo, cur, hi);
        return;
    }
#endif
    for (size_t g = lo; g < hi; g++) {
        cur = dec_i8s24_group(c, g, cur);
    }
}

/* ------------------------------------------------------------------------
 * Entry point */

const size_t grit_kind_unit[4] = {32, 16, 256, 32};

void
grit_k_decode(int kind, const unsigned char *data, const unsigned char *scale0,
              const unsigned char *scale1, const unsigned char *aux, float *out, size_t n,
              int nthreads)
{
    dec_ctx c;
    memset(&c, 0, sizeof c);
    c.data = data;
    c.scale0 = scale0;
    c.scale1 = scale1;
    c.aux = aux;
    c.out = out;
    size_t units = n / grit_kind_unit[kind];
    int parts = n_parts(units, nthreads);
    switch (kind) {
    case GRIT_K_MXFP4:
        grit_run_parts(dec_mxfp4_range, &c, units, parts);
        break;
    case GRIT_K_NVF4:
        c.sT = ld_f32le(scale1);
        grit_run_parts(dec_nvf4_range, &c, units, parts);
        break;
    case GRIT_K_Q4KS:
        grit_run_parts(dec_q4ks_range, &c, units, parts);
        break;
    default: {
        if (parts > 1) {
            grit_run_parts(dec_i8s24_count, &c, units, parts);
        }
        size_t cur = 0;
        for (int t = 0; t < parts; t++) {
            c.start[t] = cur;
            cur += c.count[t];
        }
        grit_run_parts(dec_i8s24_range, &c, units, parts);
        break;
    }
    }
}
