/*
 * grit._kernels: fused relayout + decode straight from ggml block structs
 * (the GGUF types grit.io.gguf loads zero-copy as GRIT placements).
 *
 * Each kernel reads one block in place and writes its binary32 values in lin
 * order: the same IEEE operations, in the same order, as relayouting the
 * block to the canonical planes and running the registered frame's decode
 * (decode.c, grit.codec), so the bits are the same -- NaN made canonical,
 * signed zero kept.  tests/test_native_ggml.py proves it per type.
 *
 *   Q8_0   34 B / 32:  binary16 d, 32 s8 q;         x = f32(d · q)
 *   MXFP4  17 B / 32:  E8M0 e, 16 B nibbles (halves); x = f32(2^(e−127) · v)
 *   NVFP4  36 B / 64:  4 E4M3 d (one per 16), 4 × 8 B nibbles (halves per 16);
 *                      x = f32(e4m3(d) · v)
 *   Q4_K  144 B / 256: binary16 d, dmin, 12 B packed u6 (sc, m) × 8, 128 B
 *                      nibbles (halves per 64); x = f32(f32(d·sc)·q − f32(dmin·m))
 *
 * "halves" over a run of n: byte l holds element l (low nibble) and element
 * l + n/2 (high nibble).  Unit of threading: one block.
 */
#include "kernels.h"

enum { GGML_Q8_0 = 0, GGML_MXFP4 = 1, GGML_NVFP4 = 2, GGML_Q4_K = 3, GGML_KINDS = 4 };

static const size_t BLOCK_BYTES[GGML_KINDS] = {34, 17, 36, 144};
static const size_t BLOCK_ELEMS[GGML_KINDS] = {32, 32, 64, 256};

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
/* halves_lookup for half a multiple of 8 */
TARGET_AVX2 static inline void
halves_lookup_avx2(const float *t, const unsigned char *qs, float *dst, size_t half)
{
    const __m256 tlo = _mm256_loadu_ps(t), thi = _mm256_loadu_ps(t + 8);
    const __m256i m15 = _mm256_set1_epi32(15);
    for (size_t l = 0; l < half; l += 8) {
        __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qs + l)));
        _mm256_storeu_ps(dst + l, lut16(tlo, thi, _mm256_and_si256(v, m15)));
        _mm256_storeu_ps(dst + l + half, lut16(tlo, thi, _mm256_srli_epi32(v, 4)));
    }
}

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
#define HALVES(t, qs, dst, half) \
    (grit_use_avx2 ? halves_lookup_avx2(t, qs, dst, half) : halves_lookup(t, qs, dst, half))
#else
#define HALVES(t, qs, dst, half) halves_lookup(t, qs, dst, half)
#endif

static void
ggml_q8_0_range(void *vctx, int part, size_t lo, size_t hi)
{
    ggml_ctx *c = (ggml_ctx *)vctx;
    (void)part;
#ifdef GRIT_AVX2
    if (grit_use_avx2) {
        ggml_q8_0_avx2(c->src, c->out, lo, hi);
        return;
    }
#endif
    for (size_t b = lo; b < hi; b++) {
        const unsigned char *p = c->src + 34 * b;
        const signed char *q = (const signed char *)(p + 2);
        float d = half_value(ld16(p)), *o = c->out + 32 * b;
        for (int i = 0; i < 32; i++) {
            o[i] = canon(d * (float)q[i]);
        }
    }
}

static void
ggml_mxfp4_range(void *vctx, int part, size_t lo, size_t hi)
{
    ggml_ctx *c = (ggml_ctx *)vctx;
    (void)part;
    float t[16];
    for (size_t b = lo; b < hi; b++) {
        const unsigned char *p = c->src + 17 * b;
        float S = e8m0_value(p[0]);
        for (int i = 0; i < 16; i++) {
            t[i] = canon(S * E2M1[i]);
        }
        HALVES(t, p + 1, c->out + 32 * b, 16);
    }
}

static void
ggml_nvfp4_range(void *vctx, int part, size_t lo, size_t hi)
{
    ggml_ctx *c = (ggml_ctx *)vctx;
    (void)part;
    float t[16];
    for (size_t b = lo; b < hi; b++) {
        const unsigned char *p = c->src + 36 * b;
        for (int s = 0; s < 4; s++) {
            float S = grit_e4m3[p[s]];
            for (int i = 0; i < 16; i++) {
                t[i] = canon(S * E2M1[i]);
            }
            HALVES(t, p + 4 + 8 * s, c->out + 64 * b + 16 * s, 8);
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
/* 64 elements of Q4_K: low nibbles through table t0, high through t1 */
TARGET_AVX2 static void
q4_k_run_avx2(const float *t0, const float *t1, const unsigned char *q, float *dst)
{
    const __m256 a0 = _mm256_loadu_ps(t0), a1 = _mm256_loadu_ps(t0 + 8);
    const __m256 b0 = _mm256_loadu_ps(t1), b1 = _mm256_loadu_ps(t1 + 8);
    const __m256i m15 = _mm256_set1_epi32(15);
    for (int l = 0; l < 32; l += 8) {
        __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(q + l)));
        _mm256_storeu_ps(dst + l, lut16(a0, a1, _mm256_and_si256(v, m15)));
        _mm256_storeu_ps(dst + l + 32, lut16(b0, b1, _mm256_srli_epi32(v, 4)));
    }
}
#endif

static void
ggml_q4_k_range(void *vctx, int part, size_t lo, size_t hi)
{
    ggml_ctx *c = (ggml_ctx *)vctx;
    (void)part;
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
#ifdef GRIT_AVX2
            if (grit_use_avx2) {
                q4_k_run_avx2(t[0], t[1], q, oj);
                continue;
            }
#endif
            for (int l = 0; l < 32; l++) {
                oj[l] = t[0][q[l] & 15];
                oj[l + 32] = t[1][q[l] >> 4];
            }
        }
    }
}

static const range_fn RANGE[GGML_KINDS] = {ggml_q8_0_range, ggml_mxfp4_range, ggml_nvfp4_range,
                                           ggml_q4_k_range};

PyObject *
grit_py_decode_ggml(PyObject *self, PyObject *args)
{
    Py_buffer src, out;
    int kind, nthreads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "iy*w*|i", &kind, &src, &out, &nthreads)) {
        return NULL;
    }
    PyObject *res = NULL;
    if (kind < 0 || kind >= GGML_KINDS) {
        PyErr_Format(PyExc_ValueError, "decode_ggml: unknown kind %d", kind);
    } else if (aligned4(&out, "out") && whole(out.len, 4 * (Py_ssize_t)BLOCK_ELEMS[kind], "out")) {
        size_t blocks = (size_t)out.len / 4 / BLOCK_ELEMS[kind];
        if (need(&src, (Py_ssize_t)(blocks * BLOCK_BYTES[kind]), "src")) {
            ggml_ctx c;
            c.src = src.buf;
            c.out = out.buf;
            Py_BEGIN_ALLOW_THREADS
            grit_run_parts(RANGE[kind], &c, blocks, n_parts(blocks, nthreads));
            Py_END_ALLOW_THREADS
            res = Py_NewRef(Py_None);
        }
    }
    PyBuffer_Release(&src);
    PyBuffer_Release(&out);
    return res;
}
