/*
 * grit._kernels -- native fast paths of the GRIT v1 codec (§8, §9, §10) for
 * the registered grades: MXFP4 / MXFP4_RNE, NVF4 / NVF4_RTZ, Q4KS, I8S24.
 *
 * Private accelerator for grit/codec/decode.py and grit/codec/encode.py,
 * which own the public API, decide when these kernels apply (canonical
 * placement, lin order, one of the shapes below) and keep the general numpy
 * path that must give exactly the same bytes.  Every function reads and
 * writes caller-owned buffers (buffer protocol), releases the GIL, and can
 * split its work over threads along group boundaries; the result never
 * depends on the number of threads.
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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <float.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
/* x87 excess precision would round twice; optional=True then leaves the
 * package on its numpy path. */
#error "grit._kernels needs binary32 evaluation (FLT_EVAL_METHOD == 0)"
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

/* Set once at import (CPU detection), changed only by set_simd() under the
 * GIL and before any worker starts. */
static int use_avx2 = 0;

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

/* E2M1 (§2.4: bias 1, one mantissa bit, no Inf/NaN): codes 0..7 are
 * 0, 0.5, 1, 1.5, 2, 3, 4, 6 -- every one exact in binary32; 8..15 negate. */
static const float E2M1[16] = {
    0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
    -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f,
};

/* E4M3 (OCP "fn": bias 7, three mantissa bits, S.1111.111 = NaN), filled at
 * import from §2.4. */
static float E4M3[256];

static void
init_e4m3(void)
{
    for (unsigned c = 0; c < 256; c++) {
        unsigned e = (c >> 3) & 15, m = c & 7;
        float v;
        if (e == 15 && m == 7) {
            v = u2f(CANON_NAN);
        } else if (e == 0) {
            v = (float)m * pow2f(-9);               /* m/8 · 2^(1-7) */
        } else {
            v = (float)(8 + m) * pow2f((int)e - 10); /* (1 + m/8) · 2^(e-7) */
        }
        E4M3[c] = (c & 0x80) ? -v : v;
    }
}

/* E8M0: 2^(c-127), c = 0xFF is NaN. */
static inline float
e8m0_value(unsigned c)
{
    return c == 0xFF ? u2f(CANON_NAN) : pow2f((int)c - 127);
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
        return s | 0x7E00;                           /* NaN (never reached) */
    }
    if (a >= 0x477FF000u) {                          /* >= 65520 rounds past 65504 */
        return s | 0x7BFF;
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
        return 0x7F;
    }
    if (a >= 0x43E00000u) {                          /* >= 448 (and +inf): satfinite */
        return 0x7E;
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
    return code > 0x7E ? 0x7E : code;
}

/* fmt_encode(e2m1, y, rne, satfinite): §2.5's ladder with ties to the even
 * code, written as its seven thresholds (strict after an even code). */
static inline unsigned
e2m1_encode(float y)
{
    uint32_t u = f2u(y);
    float a = u2f(u & 0x7FFFFFFFu);
    unsigned c = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f)
               + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);
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

/* ------------------------------------------------------------------------
 * Threads: [0, units) is cut into contiguous parts; part 0 runs on the
 * calling thread.  A thread that cannot be started runs inline, so the
 * result is the same whatever happens. */

typedef void (*range_fn)(void *ctx, int part, size_t lo, size_t hi);

typedef struct {
    range_fn fn;
    void *ctx;
    int part;
    size_t lo, hi;
} job_t;

#ifndef GRIT_NO_THREADS
static void *
job_main(void *p)
{
    job_t *j = (job_t *)p;
    j->fn(j->ctx, j->part, j->lo, j->hi);
    return NULL;
}
#endif

static int
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

static void
part_range(size_t units, int parts, int t, size_t *lo, size_t *hi)
{
    size_t q = units / (size_t)parts, r = units % (size_t)parts, ut = (size_t)t;
    *lo = ut * q + (ut < r ? ut : r);
    *hi = *lo + q + (ut < r ? 1 : 0);
}

static void
run_parts(range_fn fn, void *ctx, size_t units, int parts)
{
    job_t jobs[MAX_THREADS];
    for (int t = 0; t < parts; t++) {
        jobs[t].fn = fn;
        jobs[t].ctx = ctx;
        jobs[t].part = t;
        part_range(units, parts, t, &jobs[t].lo, &jobs[t].hi);
    }
#ifndef GRIT_NO_THREADS
    pthread_t tid[MAX_THREADS];
    int started[MAX_THREADS];
    for (int t = 1; t < parts; t++) {
        started[t] = pthread_create(&tid[t], NULL, job_main, &jobs[t]) == 0;
    }
    fn(ctx, 0, jobs[0].lo, jobs[0].hi);
    for (int t = 1; t < parts; t++) {
        if (started[t]) {
            pthread_join(tid[t], NULL);
        } else {
            fn(ctx, t, jobs[t].lo, jobs[t].hi);
        }
    }
#else
    for (int t = 0; t < parts; t++) {
        fn(ctx, t, jobs[t].lo, jobs[t].hi);
    }
#endif
}


/* The relayout kernels never look at `part`: their units are dealt out in
 * chunks from a shared counter, so that a thread slowed down (on a shared
 * machine, by a busy neighbour on its core) takes fewer chunks instead of
 * holding the others up at the join, as an even static split would.  With
 * groups (run_dealt_groups), thread t starts on group t's counter and moves
 * on to the other groups when its own is done: the streaming transposes give
 * each thread its own columns, i.e. its own pages of the output, so that the
 * threads do not fault the same fresh pages at once. */
#if !defined(GRIT_NO_THREADS) && (defined(__GNUC__) || defined(__clang__))
typedef struct {
    range_fn fn;
    void *ctx;
    size_t gsize, chunk;         /* units per group, per chunk */
    int ngroups;
    size_t next[MAX_THREADS];    /* per group: the first unit not yet taken (atomic) */
} deal_t;

typedef struct {
    deal_t *d;
    int part;
} deal_job;

static void
deal_work(deal_t *d, int part)
{
    for (int k = 0; k < d->ngroups; k++) {
        const int g = (part + k) % d->ngroups;
        const size_t base = (size_t)g * d->gsize;
        for (;;) {
            size_t lo = __atomic_fetch_add(&d->next[g], d->chunk, __ATOMIC_RELAXED);
            if (lo >= d->gsize) {
                break;
            }
            size_t hi = lo + d->chunk < d->gsize ? lo + d->chunk : d->gsize;
            d->fn(d->ctx, part, base + lo, base + hi);
        }
    }
}

static void *
deal_main(void *p)
{
    deal_job *j = (deal_job *)p;
    deal_work(j->d, j->part);
    return NULL;
}

/* units [0, ngroups * gsize), group g = [g * gsize, (g + 1) * gsize) */
static void
run_dealt_groups(range_fn fn, void *ctx, size_t gsize, int ngroups, int parts)
{
    if (parts <= 1) {
        fn(ctx, 0, 0, gsize * (size_t)ngroups);
        return;
    }
    deal_t d;
    d.fn = fn;
    d.ctx = ctx;
    d.gsize = gsize;
    d.ngroups = ngroups;
    d.chunk = gsize * (size_t)ngroups / ((size_t)parts * 8);   /* about 8 chunks a thread */
    if (d.chunk < 1) {
        d.chunk = 1;
    }
    for (int g = 0; g < ngroups; g++) {
        d.next[g] = 0;
    }
    deal_job jobs[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    int started[MAX_THREADS];
    for (int t = 1; t < parts; t++) {
        jobs[t].d = &d;
        jobs[t].part = t;
        started[t] = pthread_create(&tid[t], NULL, deal_main, &jobs[t]) == 0;
    }
    deal_work(&d, 0);            /* a thread that failed to start leaves its chunks to us */
    for (int t = 1; t < parts; t++) {
        if (started[t]) {
            pthread_join(tid[t], NULL);
        }
    }
}

static void
run_dealt(range_fn fn, void *ctx, size_t units, int parts)
{
    run_dealt_groups(fn, ctx, units, 1, parts);
}
#else
#define run_dealt run_parts
static void
run_dealt_groups(range_fn fn, void *ctx, size_t gsize, int ngroups, int parts)
{
    run_parts(fn, ctx, gsize * (size_t)ngroups, parts);
}
#endif

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
TARGET_AVX2 static inline __m256
canon8(__m256 v)
{
    __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    return _mm256_blendv_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32((int)CANON_NAN)), nan);
}

/* 8 elements per 4 bytes: lane k takes nibble k of the little-endian word. */
TARGET_AVX2 static inline void
nib_lookup_avx2(__m256 tlo, __m256 thi, const unsigned char *src, float *dst, size_t nbytes)
{
    const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    for (size_t j = 0; j < nbytes; j += 4) {
        uint32_t w;
        memcpy(&w, src + j, 4);
        __m256i idx = _mm256_srlv_epi32(_mm256_set1_epi32((int)w), shifts);
        __m256 lo = _mm256_permutevar8x32_ps(tlo, idx);      /* by the low 3 bits */
        __m256 hi = _mm256_permutevar8x32_ps(thi, idx);
        __m256 sel = _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)); /* bit 3 -> sign */
        _mm256_storeu_ps(dst + 2 * j, _mm256_blendv_ps(lo, hi, sel));
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
        __m256 S = _mm256_set1_ps(c->sT * E4M3[c->scale0[g]]);
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
            __m256 S = _mm256_set1_ps(d * (float)(c->scale0[g] & 63));
            __m256 Z = _mm256_set1_ps(dmin * (float)(c->aux[g] & 63));
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
    if (use_avx2) {
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
    if (use_avx2) {
        dec_nvf4_avx2(c, lo, hi);
        return;
    }
#endif
    float t[16];
    for (size_t g = lo; g < hi; g++) {
        float S = c->sT * E4M3[c->scale0[g]];
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
    if (use_avx2) {
        dec_q4ks_avx2(c, lo, hi);
        return;
    }
#endif
    float t[16];
    for (size_t sb = lo; sb < hi; sb++) {
        float d = q4ks_d(c->scale1 + 4 * sb, 0), dmin = q4ks_d(c->scale1 + 4 * sb, 1);
        for (size_t g = 8 * sb; g < 8 * sb + 8; g++) {
            float S = d * (float)(c->scale0[g] & 63);
            float Z = dmin * (float)(c->aux[g] & 63);
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
static unsigned char KEPT_PER_META_BYTE[256];
static unsigned char KEPT_PER_NIBBLE[16];
static unsigned char SLOT_OF[16][4];

static void
init_i8(void)
{
    for (unsigned nib = 0; nib < 16; nib++) {
        unsigned a = nib & 3, b = nib >> 2, lo = a < b ? a : b, hi = a < b ? b : a;
        KEPT_PER_NIBBLE[nib] = (unsigned char)(a == b ? 1 : 2);
        for (unsigned j = 0; j < 4; j++) {
            SLOT_OF[nib][j] = (unsigned char)(j == lo ? 1 : (j == hi ? 2 : 0));
        }
    }
    for (unsigned b = 0; b < 256; b++) {
        KEPT_PER_META_BYTE[b] = (unsigned char)(KEPT_PER_NIBBLE[b & 15] + KEPT_PER_NIBBLE[b >> 4]);
    }
}

static void
dec_i8s24_count(void *vctx, int part, size_t lo, size_t hi)
{
    dec_ctx *c = (dec_ctx *)vctx;
    size_t n = 0;
    for (size_t j = 4 * lo; j < 4 * hi; j++) {
        n += KEPT_PER_META_BYTE[c->aux[j]];
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
        unsigned nib = (q & 1) ? byte >> 4 : byte & 15, k = KEPT_PER_NIBBLE[nib];
        float v[3];
        v[0] = 0.0f;                                 /* +0.0: the sparsity law wins over NaN */
        v[1] = canon(S * (float)data[cur]);
        /* the second value exists only when two positions are kept (the
         * plane may end right after the first) */
        v[2] = k == 2 ? canon(S * (float)data[cur + 1]) : 0.0f;
        cur += k;
        const unsigned char *slot = SLOT_OF[nib];
        o[4 * q] = v[slot[0]];
        o[4 * q + 1] = v[slot[1]];
        o[4 * q + 2] = v[slot[2]];
        o[4 * q + 3] = v[slot[3]];
    }
    return cur;
}

#ifdef GRIT_AVX2
/* SHUF_OF_META[k][byte]: for metadata byte k of a group (quads 2k, 2k + 1),
 * the PSHUFB control that places its four stored values -- bytes 4k..4k+3 of
 * the group's 16 -- at the 8 positions, 0x80 (zero) where nothing is kept.
 * Used only when every quad of the group keeps two positions. */
static uint64_t SHUF_OF_META[4][256];

static void
init_i8_shuffles(void)
{
    for (unsigned k = 0; k < 4; k++) {
        for (unsigned b = 0; b < 256; b++) {
            uint64_t ctl = 0;
            for (unsigned p = 0; p < 8; p++) {
                unsigned nib = p < 4 ? (b & 15) : (b >> 4), slot = SLOT_OF[nib][p & 3];
                unsigned idx = slot ? 4 * k + 2 * (p >> 2) + slot - 1 : 0x80;
                ctl |= (uint64_t)idx << (8 * p);
            }
            SHUF_OF_META[k][b] = ctl;
        }
    }
}

TARGET_AVX2 static void
dec_i8s24_avx2(dec_ctx *c, size_t lo, size_t cur, size_t hi)
{
    const __m256 zero = _mm256_setzero_ps();
    for (size_t g = lo; g < hi; g++) {
        const unsigned char *m = c->aux + 4 * g;
        if (KEPT_PER_META_BYTE[m[0]] + KEPT_PER_META_BYTE[m[1]] + KEPT_PER_META_BYTE[m[2]]
            + KEPT_PER_META_BYTE[m[3]] != 16) {
            cur = dec_i8s24_group(c, g, cur);        /* a repeated index: scalar */
            continue;
        }
        /* 16 stored values, both 128-bit lanes; lane 1 serves bytes 2 and 3 */
        __m256i v = _mm256_broadcastsi128_si256(
            _mm_loadu_si128((const __m128i *)(c->data + cur)));
        __m256i ctl = _mm256_setr_epi64x((long long)SHUF_OF_META[0][m[0]],
                                         (long long)SHUF_OF_META[1][m[1]],
                                         (long long)SHUF_OF_META[2][m[2]],
                                         (long long)SHUF_OF_META[3][m[3]]);
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
    if (use_avx2) {
        dec_i8s24_avx2(c, lo, cur, hi);
        return;
    }
#endif
    for (size_t g = lo; g < hi; g++) {
        cur = dec_i8s24_group(c, g, cur);
    }
}

/* ------------------------------------------------------------------------
 * Encode */

typedef struct {
    const float *x;
    unsigned char *data, *scale0, *scale1, *aux;
    int flag;                                        /* MXFP4: exp2rnemaxabs; NVF4: er = rtz */
    float sT;                                        /* NVF4: the stored, re-read scale */
    uint32_t amax[MAX_THREADS];                      /* NVF4 phase 1, as bits */
} enc_ctx;

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
    int X = e - 2;                                   /* emax(E2M1) = 2: 6 = 1.5 · 2^2 */
    return X < -127 ? -127 : X > 127 ? 127 : X;
}

/* §10.3 step 2 for a finite block with max |v| = bamax: the E4M3 code and
 * S = f32(sT · s0). */
static inline float
nvf4_block_scale(const enc_ctx *c, uint32_t bamax, unsigned char *sc)
{
    unsigned code = bamax == 0 ? 0x38                /* e4m3(1.0) = 0 0111 000 */
        : e4m3_encode_nonneg((u2f(bamax) / 6.0f) / c->sT, c->flag);
    *sc = (unsigned char)code;
    return c->sT * E4M3[code];
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
        step[s] = (hi - lo) / 15.0f;
        off[s] = -lo;
        mstep = step[s] > mstep ? step[s] : mstep;
        moff = off[s] > moff ? off[s] : moff;
    }
    unsigned dc = half_rne_satfinite(mstep / 63.0f);
    unsigned mc = half_rne_satfinite(moff / 63.0f);
    s1[0] = (unsigned char)(dc & 0xFF);
    s1[1] = (unsigned char)(dc >> 8);
    s1[2] = (unsigned char)(mc & 0xFF);
    s1[3] = (unsigned char)(mc >> 8);
    float d = half_value(dc), dmin = half_value(mc); /* re-read after the binary16 store */
    for (int s = 0; s < 8; s++) {
        int scs = d == 0.0f ? 0 : rint_nonneg(clampf(step[s] / d, 0.0f, 63.0f));
        int ms = dmin == 0.0f ? 0 : rint_nonneg(clampf(off[s] / dmin, 0.0f, 63.0f));
        sc[s] = (unsigned char)scs;
        mm[s] = (unsigned char)ms;
        S[s] = d * (float)scs;
        Z[s] = dmin * (float)ms;
    }
}

static void
q4ks_poison(unsigned char *s1, unsigned char *sc, unsigned char *mm, unsigned char *q)
{
    s1[0] = 0x00;                                    /* d = 0x7E00 (binary16 NaN) */
    s1[1] = 0x7E;
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
    GRIT_STEP(0.25f, _CMP_GT_OQ);
    GRIT_STEP(0.75f, _CMP_GE_OQ);
    GRIT_STEP(1.25f, _CMP_GT_OQ);
    GRIT_STEP(1.75f, _CMP_GE_OQ);
    GRIT_STEP(2.5f, _CMP_GT_OQ);
    GRIT_STEP(3.5f, _CMP_GE_OQ);
    GRIT_STEP(5.0f, _CMP_GT_OQ);
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
            c->scale0[g] = 0xFF;
            memset(c->data + 16 * g, 0, 16);
            continue;
        }
        int X = mx_exponent(amax, c->flag);
        c->scale0[g] = (unsigned char)(X + 127);
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
            c->scale0[g] = 0x7F;                     /* E4M3 NaN */
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
    const __m256 zero = _mm256_setzero_ps(), fifteen = _mm256_set1_ps(15.0f);
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
    if (use_avx2) {
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
            c->scale0[g] = 0xFF;
            memset(q, 0, 16);
            continue;
        }
        int X = mx_exponent(amax, c->flag);
        c->scale0[g] = (unsigned char)(X + 127);
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
    if (use_avx2) {
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
    if (use_avx2) {
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
            c->scale0[g] = 0x7F;
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
    if (use_avx2) {
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
                    a = rint_nonneg(clampf((xs[2 * j] + Z[s]) / S[s], 0.0f, 15.0f));
                    b = rint_nonneg(clampf((xs[2 * j + 1] + Z[s]) / S[s], 0.0f, 15.0f));
                }
                q[16 * s + j] = (unsigned char)(a | b << 4);
            }
        }
    }
}

/* a 4-bit mask with exactly two bits set -> the metadata nibble i0 | i1 << 2,
 * i0 < i1 (the other entries are never used) */
static const unsigned char PAIR_OF_MASK[16] = {
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
            unsigned i0 = PAIR_OF_MASK[mask] & 3, i1 = PAIR_OF_MASK[mask] >> 2;
            nib[q] = PAIR_OF_MASK[mask];
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
            s0[0] = 0x00;
            s0[1] = 0x7E;
            memset(q, 0, 16);
            continue;
        }
        unsigned h = 0x3C00;                         /* all zero: binary16 1.0 */
        if (amax) {
            h = half_rne_satfinite(u2f(amax) / 127.0f);
            if (h == 0) {
                h = 0x0001;                          /* never a zero scale */
            }
        }
        s0[0] = (unsigned char)(h & 0xFF);
        s0[1] = (unsigned char)(h >> 8);
        float S = half_value(h);
        for (int i = 0; i < 16; i++) {
            q[i] = (signed char)rint_signed(clampf(kv[i] / S, -127.0f, 127.0f));
        }
    }
}

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
#define TR_UNPK(x, y, i)                                                 \
    y##_##i##a = _mm_unpacklo_epi8(x[i], x[i + 8]);                      \
    y##_##i##b = _mm_unpackhi_epi8(x[i], x[i + 8]);
#define TR_STAGE(x, y)                                                   \
    do {                                                                 \
        __m128i y##_0a, y##_0b, y##_1a, y##_1b, y##_2a, y##_2b, y##_3a,  \
            y##_3b, y##_4a, y##_4b, y##_5a, y##_5b, y##_6a, y##_6b,      \
            y##_7a, y##_7b;                                              \
        TR_UNPK(x, y, 0) TR_UNPK(x, y, 1) TR_UNPK(x, y, 2)               \
        TR_UNPK(x, y, 3) TR_UNPK(x, y, 4) TR_UNPK(x, y, 5)               \
        TR_UNPK(x, y, 6) TR_UNPK(x, y, 7)                                \
        y[0] = y##_0a; y[1] = y##_0b; y[2] = y##_1a; y[3] = y##_1b;      \
        y[4] = y##_2a; y[5] = y##_2b; y[6] = y##_3a; y[7] = y##_3b;      \
        y[8] = y##_4a; y[9] = y##_4b; y[10] = y##_5a; y[11] = y##_5b;    \
        y[12] = y##_6a; y[13] = y##_6b; y[14] = y##_7a; y[15] = y##_7b;  \
    } while (0)

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
#define TR8_UNPK(x, y, i)                                                \
    y##_##i##a = _mm256_unpacklo_epi8(x[i], x[i + 8]);                   \
    y##_##i##b = _mm256_unpackhi_epi8(x[i], x[i + 8]);
#define TR8_STAGE(x, y)                                                  \
    do {                                                                 \
        __m256i y##_0a, y##_0b, y##_1a, y##_1b, y##_2a, y##_2b, y##_3a,  \
            y##_3b, y##_4a, y##_4b, y##_5a, y##_5b, y##_6a, y##_6b,      \
            y##_7a, y##_7b;                                              \
        TR8_UNPK(x, y, 0) TR8_UNPK(x, y, 1) TR8_UNPK(x, y, 2)            \
        TR8_UNPK(x, y, 3) TR8_UNPK(x, y, 4) TR8_UNPK(x, y, 5)            \
        TR8_UNPK(x, y, 6) TR8_UNPK(x, y, 7)                              \
        y[0] = y##_0a; y[1] = y##_0b; y[2] = y##_1a; y[3] = y##_1b;      \
        y[4] = y##_2a; y[5] = y##_2b; y[6] = y##_3a; y[7] = y##_3b;      \
        y[8] = y##_4a; y[9] = y##_4b; y[10] = y##_5a; y[11] = y##_5b;    \
        y[12] = y##_6a; y[13] = y##_6b; y[14] = y##_7a; y[15] = y##_7b;  \
    } while (0)

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
                        if (use_avx2) {
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
            if (use_avx2 && jb1 - jb == 32) {
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
    if (use_avx2 && c->rows_whole
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
 * Python interface */

/* A new plane of n bytes, to be filled before anyone else sees it: bytes
 * when small; from LARGE_PLANE bytes on, a memoryview of a numpy uint8 array,
 * starting on a cache line (streamed lines stay whole lines).  numpy.empty
 * asks the kernel for transparent huge pages on allocations of 4 MiB or more
 * (on the 2 MiB-aligned part of them), so a fresh multi-megabyte output costs
 * one page fault per 2 MiB instead of one per 4 KiB -- on a virtual machine
 * those faults cost more than the relayout itself.  From HUGE_PLANE bytes on
 * the plane starts on a 2 MiB boundary of a slightly larger array (the slack
 * is address space, never touched): otherwise the unaligned head and tail of
 * the array are 4 KiB pages, 512 more faults for a 64 MiB plane, and a
 * two-thread transpose of 64 MiB spent 8-11 ms of system time instead of
 * 13.  numpy is a dependency of the package; if it cannot be imported,
 * bytes it is. */
#ifndef LARGE_PLANE
#define LARGE_PLANE (1 << 20)
#endif
#ifndef HUGE_PLANE
#define HUGE_PLANE ((Py_ssize_t)4 << 20)
#endif
#define HUGE_ALIGN ((Py_ssize_t)2 << 20)
static PyObject *np_empty = NULL;        /* numpy.empty, looked up once */
static int np_empty_failed = 0;

static PyObject *
new_plane(Py_ssize_t n, unsigned char **p)
{
    if (PyErr_Occurred()) {
        return NULL;                     /* an earlier plane failed */
    }
    if (n >= LARGE_PLANE && !np_empty_failed) {
        if (np_empty == NULL) {
            PyObject *np = PyImport_ImportModule("numpy");
            if (np != NULL) {
                np_empty = PyObject_GetAttrString(np, "empty");
                Py_DECREF(np);
            }
            if (np_empty == NULL) {
                PyErr_Clear();
                np_empty_failed = 1;
            }
        }
        if (np_empty != NULL) {
            const Py_ssize_t align = n >= HUGE_PLANE ? HUGE_ALIGN : 64;
            PyObject *arr = PyObject_CallFunction(np_empty, "ns",
                                                  n + (align == 64 ? 63 : 2 * HUGE_ALIGN), "u1");
            if (arr == NULL) {
                return NULL;             /* MemoryError: report it */
            }
            Py_buffer v;
            if (PyObject_GetBuffer(arr, &v, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
                Py_DECREF(arr);
                return NULL;
            }
            Py_ssize_t off = (Py_ssize_t)((align - ((uintptr_t)v.buf & (align - 1))) & (align - 1));
            *p = (unsigned char *)v.buf + off;   /* owned by arr, which the view keeps */
            PyBuffer_Release(&v);
            PyObject *whole = PyMemoryView_FromObject(arr);
            Py_DECREF(arr);
            if (whole == NULL) {
                return NULL;
            }
            PyObject *mv = PySequence_GetSlice(whole, off, off + n);
            Py_DECREF(whole);
            return mv;
        }
    }
    PyObject *b = PyBytes_FromStringAndSize(NULL, n);
    if (b != NULL) {
        *p = (unsigned char *)PyBytes_AS_STRING(b);
    }
    return b;
}

static int
aligned4(Py_buffer *b, const char *what)
{
    if (((uintptr_t)b->buf & 3) != 0) {
        PyErr_Format(PyExc_ValueError, "%s must be 4-byte aligned", what);
        return 0;
    }
    return 1;
}

static int
need(Py_buffer *b, Py_ssize_t n, const char *what)
{
    if (b->len < n) {
        PyErr_Format(PyExc_ValueError, "%s holds %zd bytes, %zd needed", what, b->len, n);
        return 0;
    }
    return 1;
}

static int
whole(Py_ssize_t nbytes, Py_ssize_t unit, const char *what)
{
    if (nbytes % unit != 0) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes is not a multiple of %zd", what,
                     nbytes, unit);
        return 0;
    }
    return 1;
}

PyDoc_STRVAR(decode_doc,
"decode_mxfp4(data, scale0, out, nthreads=1)\n"
"decode_nvf4(data, scale0, scale1, out, nthreads=1)\n"
"decode_q4ks(data, scale0, scale1, aux, out, nthreads=1)\n"
"decode_i8s24(data, scale0, aux, out, nthreads=1)\n\n"
"Fill the float32 buffer ``out`` (its length gives numel, in lin order) with\n"
"decode() of the canonical planes.");

static PyObject *
py_decode_mxfp4(PyObject *self, PyObject *args)
{
    Py_buffer data, s0, out;
    int nthreads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*w*|i", &data, &s0, &out, &nthreads)) {
        return NULL;
    }
    PyObject *res = NULL;
    Py_ssize_t n = out.len / 4;
    if (aligned4(&out, "out") && whole(out.len, 4 * 32, "out")
        && need(&data, n / 2, "data") && need(&s0, n / 32, "scale0")) {
        dec_ctx c;
        memset(&c, 0, sizeof c);
        c.data = data.buf;
        c.scale0 = s0.buf;
        c.out = out.buf;
        size_t units = (size_t)n / 32;
        Py_BEGIN_ALLOW_THREADS
        run_parts(dec_mxfp4_range, &c, units, n_parts(units, nthreads));
        Py_END_ALLOW_THREADS
        res = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&s0);
    PyBuffer_Release(&out);
    return res;
}

static PyObject *
py_decode_nvf4(PyObject *self, PyObject *args)
{
    Py_buffer data, s0, s1, out;
    int nthreads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*w*|i", &data, &s0, &s1, &out, &nthreads)) {
        return NULL;
    }
    PyObject *res = NULL;
    Py_ssize_t n = out.len / 4;
    if (aligned4(&out, "out") && whole(out.len, 4 * 16, "out")
        && need(&data, n / 2, "data") && need(&s0, n / 16, "scale0") && need(&s1, 4, "scale1")) {
        dec_ctx c;
        memset(&c, 0, sizeof c);
        c.data = data.buf;
        c.scale0 = s0.buf;
        c.out = out.buf;
        c.sT = ld_f32le(s1.buf);
        size_t units = (size_t)n / 16;
        Py_BEGIN_ALLOW_THREADS
        run_parts(dec_nvf4_range, &c, units, n_parts(units, nthreads));
        Py_END_ALLOW_THREADS
        res = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&s0);
    PyBuffer_Release(&s1);
    PyBuffer_Release(&out);
    return res;
}

static PyObject *
py_decode_q4ks(PyObject *self, PyObject *args)
{
    Py_buffer data, s0, s1, aux, out;
    int nthreads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*|i", &data, &s0, &s1, &aux, &out, &nthreads)) {
        return NULL;
    }
    PyObject *res = NULL;
    Py_ssize_t n = out.len / 4;
    if (aligned4(&out, "out") && whole(out.len, 4 * 256, "out")
        && need(&data, n / 2, "data") && need(&s0, n / 32, "scale0")
        && need(&s1, n / 64, "scale1") && need(&aux, n / 32, "aux")) {
        dec_ctx c;
        memset(&c, 0, sizeof c);
        c.data = data.buf;
        c.scale0 = s0.buf;
        c.scale1 = s1.buf;
        c.aux = aux.buf;
        c.out = out.buf;
        size_t units = (size_t)n / 256;
        Py_BEGIN_ALLOW_THREADS
        run_parts(dec_q4ks_range, &c, units, n_parts(units, nthreads));
        Py_END_ALLOW_THREADS
        res = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&s0);
    PyBuffer_Release(&s1);
    PyBuffer_Release(&aux);
    PyBuffer_Release(&out);
    return res;
}

static PyObject *
py_decode_i8s24(PyObject *self, PyObject *args)
{
    Py_buffer data, s0, aux, out;
    int nthreads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*w*|i", &data, &s0, &aux, &out, &nthreads)) {
        return NULL;
    }
    PyObject *res = NULL;
    Py_ssize_t n = out.len / 4;
    if (aligned4(&out, "out") && whole(out.len, 4 * 32, "out")
        && need(&data, n / 2, "data") && need(&s0, n / 16, "scale0")
        && need(&aux, n / 8, "aux")) {
        dec_ctx *c = PyMem_Calloc(1, sizeof *c);
        if (c == NULL) {
            PyErr_NoMemory();
        } else {
            c->data = data.buf;
            c->scale0 = s0.buf;
            c->aux = aux.buf;
            c->out = out.buf;
            size_t units = (size_t)n / 32;
            int parts = n_parts(units, nthreads);
            Py_BEGIN_ALLOW_THREADS
            if (parts > 1) {
                run_parts(dec_i8s24_count, c, units, parts);
            }
            size_t cur = 0;
            for (int t = 0; t < parts; t++) {
                c->start[t] = cur;
                cur += c->count[t];
            }
            run_parts(dec_i8s24_range, c, units, parts);
            Py_END_ALLOW_THREADS
            PyMem_Free(c);
            res = Py_NewRef(Py_None);
        }
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&s0);
    PyBuffer_Release(&aux);
    PyBuffer_Release(&out);
    return res;
}


PyDoc_STRVAR(encode_doc,
"encode_mxfp4(x, rne, nthreads=1) -> (data, scale0)\n"
"encode_nvf4(x, rtz, nthreads=1) -> (data, scale0, scale1)\n"
"encode_q4ks(x, nthreads=1) -> (data, scale0, scale1, aux)\n"
"encode_i8s24(x, nthreads=1) -> (data, scale0, aux)\n\n"
"encode() of the float32 buffer ``x`` (lin order) into the canonical planes,\n"
"as bytes.");

static PyObject *
encode_common(PyObject *args, const char *fmt, int kind)
{
    Py_buffer x;
    int flag = 0, nthreads = 1;
    int ok = kind <= 1 ? PyArg_ParseTuple(args, fmt, &x, &flag, &nthreads)
                       : PyArg_ParseTuple(args, fmt, &x, &nthreads);
    if (!ok) {
        return NULL;
    }
    static const Py_ssize_t unit[4] = {32, 16, 256, 32};
    static const char *what[4] = {"x (MXFP4)", "x (NVF4)", "x (Q4KS)", "x (I8S24)"};
    PyObject *planes[4] = {NULL, NULL, NULL, NULL}, *res = NULL;
    enc_ctx *c = NULL;
    Py_ssize_t n = x.len / 4;
    if (!aligned4(&x, "x") || !whole(x.len, 4 * unit[kind], what[kind])) {
        goto done;
    }
    c = PyMem_Calloc(1, sizeof *c);
    if (c == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    c->x = x.buf;
    c->flag = flag;
    int np = 0;
    switch (kind) {
    case 0:
        planes[0] = new_plane(n / 2, &c->data);
        planes[1] = new_plane(n / 32, &c->scale0);
        np = 2;
        break;
    case 1:
        planes[0] = new_plane(n / 2, &c->data);
        planes[1] = new_plane(n / 16, &c->scale0);
        planes[2] = new_plane(4, &c->scale1);
        np = 3;
        break;
    case 2:
        planes[0] = new_plane(n / 2, &c->data);
        planes[1] = new_plane(n / 32, &c->scale0);
        planes[2] = new_plane(n / 64, &c->scale1);
        planes[3] = new_plane(n / 32, &c->aux);
        np = 4;
        break;
    default:
        planes[0] = new_plane(n / 2, &c->data);
        planes[1] = new_plane(n / 16, &c->scale0);
        planes[2] = new_plane(n / 8, &c->aux);
        np = 3;
        break;
    }
    for (int i = 0; i < np; i++) {
        if (planes[i] == NULL) {
            goto done;
        }
    }
    size_t units = (size_t)(n / unit[kind]);
    int parts = n_parts(units, nthreads);
    Py_BEGIN_ALLOW_THREADS
    switch (kind) {
    case 0:
        run_parts(enc_mxfp4_range, c, units, parts);
        break;
    case 1: {
        run_parts(enc_nvf4_amax, c, units, parts);
        uint32_t amax = 0;
        for (int t = 0; t < parts; t++) {
            amax = c->amax[t] > amax ? c->amax[t] : amax;
        }
        /* §10.3 step 1: sT = f32(f32(amax / 6) / 448), 1.0 for an all-zero
         * tensor, 2^-149 when it underflows; stored as binary32 and re-read. */
        float sT = 1.0f;
        if (amax) {
            sT = (u2f(amax) / 6.0f) / 448.0f;
            if (sT == 0.0f) {
                sT = pow2f(-149);
            }
        }
        c->sT = sT;
        uint32_t b = f2u(sT);
        for (int i = 0; i < 4; i++) {
            c->scale1[i] = (unsigned char)(b >> (8 * i));
        }
        run_parts(enc_nvf4_range, c, units, parts);
        break;
    }
    case 2:
        run_parts(enc_q4ks_range, c, units, parts);
        break;
    default:
        run_parts(enc_i8s24_range, c, units, parts);
        break;
    }
    Py_END_ALLOW_THREADS
    res = PyTuple_New(np);
    if (res != NULL) {
        for (int i = 0; i < np; i++) {
            PyTuple_SET_ITEM(res, i, planes[i]);
            planes[i] = NULL;
        }
    }
done:
    for (int i = 0; i < 4; i++) {
        Py_XDECREF(planes[i]);
    }
    PyMem_Free(c);
    PyBuffer_Release(&x);
    return res;
}

static PyObject *
py_encode_mxfp4(PyObject *self, PyObject *args)
{
    (void)self;
    return encode_common(args, "y*p|i", 0);
}

static PyObject *
py_encode_nvf4(PyObject *self, PyObject *args)
{
    (void)self;
    return encode_common(args, "y*p|i", 1);
}

static PyObject *
py_encode_q4ks(PyObject *self, PyObject *args)
{
    (void)self;
    return encode_common(args, "y*|i", 2);
}

static PyObject *
py_encode_i8s24(PyObject *self, PyObject *args)
{
    (void)self;
    return encode_common(args, "y*|i", 3);
}

/* Relayout entry points: each returns new bytes (the caller's numpy path
 * returns bytes too). */

PyDoc_STRVAR(transpose_doc,
"transpose(src, R, C, bits, msb=False, nthreads=1) -> bytes\n\n"
"The R x C grid of ``bits``-bit units (4, or a multiple of 8) stored\n"
"column-major: unit (r, c) at position c*R + r.  4-bit units are packed two\n"
"per byte, LSB-first (``msb``: unit 2i in the high nibble); a padding nibble\n"
"is zero.");

static PyObject *
py_transpose(PyObject *self, PyObject *args)
{
    Py_buffer src;
    Py_ssize_t R, C;
    int bits, msb = 0, nthreads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nni|pi", &src, &R, &C, &bits, &msb, &nthreads)) {
        return NULL;
    }
    PyObject *res = NULL;
    if (R < 0 || C < 0 || !(bits == 4 || (bits > 0 && bits % 8 == 0))) {
        PyErr_SetString(PyExc_ValueError, "transpose: R, C >= 0 and bits 4 or a multiple of 8");
        goto done;
    }
    size_t n = (size_t)R * (size_t)C;
    Py_ssize_t nbytes = (Py_ssize_t)((n * (size_t)bits + 7) / 8);
    if (!need(&src, nbytes, "src")) {
        goto done;
    }
    unsigned char *dst = NULL;
    res = new_plane(nbytes, &dst);
    if (res == NULL || nbytes == 0) {
        goto done;
    }
    tr_ctx c;
    c.src = src.buf;
    c.dst = dst;
    c.R = (size_t)R;
    c.C = (size_t)C;
    c.ub = (size_t)bits / 8;
#ifdef GRIT_AVX2
    /* streamed: bands of `rows` source rows, whose destination rows are whole
     * cache lines, so that every streamed line is whole */
    range_fn band = NULL;
    size_t rows = 0;
    if (use_avx2 && (size_t)nbytes >= NT_MIN && ((uintptr_t)dst & 63) == 0) {
        if (bits == 8) {
            band = tr1_band_nt, rows = 64;
        } else if (bits == 4 && !msb && C % 2 == 0) {
            band = tr4_band_nt, rows = 128;
        } else if (bits == 16) {
            band = tr2_band_nt, rows = 32;
        }
        if (band != NULL && R % (Py_ssize_t)rows != 0) {
            band = NULL;
        }
    }
#endif
    Py_BEGIN_ALLOW_THREADS
#ifdef GRIT_AVX2
    if (band != NULL) {
        /* each thread starts on its own column group: its own output pages */
        c.bands = (size_t)R / rows;
        c.groups = (size_t)n_parts(c.bands, nthreads);
        run_dealt_groups(band, &c, c.bands, (int)c.groups, (int)c.groups);
    } else
#endif
    if (bits == 4) {
        if (R % 2 == 0 && C % 2 == 0 && !msb) {
            size_t units = ((size_t)C / 2 + TR_BLOCK - 1) / TR_BLOCK;
            run_dealt(tr4_range, &c, units, n_parts(units, nthreads));
        } else {
            tr4_any(c.src, c.dst, c.R, c.C, msb);
        }
    } else {
        size_t units = ((size_t)C + TR_BLOCK - 1) / TR_BLOCK;
        run_dealt(tr_range, &c, units, n_parts(units, nthreads));
    }
    Py_END_ALLOW_THREADS
done:
    PyBuffer_Release(&src);
    return res;
}

PyDoc_STRVAR(tile_doc,
"tile(src, rows, rowbytes, tr, tcb, w, tab, inverse=False, nthreads=1) -> bytes\n\n"
"Cut a grid of ``rows`` rows of ``rowbytes`` bytes into tiles of ``tr`` rows\n"
"x ``tcb`` bytes, tiles in row-major order, each stored as chunks of ``w``\n"
"bytes: chunk s of a tile is the tile's row-major chunk tab[s] (``tab`` an\n"
"int64 buffer, a permutation of 0..tr*tcb/w-1).  ``inverse`` undoes it.");

static PyObject *
py_tile(PyObject *self, PyObject *args)
{
    Py_buffer src, tab;
    Py_ssize_t rows, rowbytes, tr, tcb, w;
    int inverse = 0, nthreads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nnnnny*|pi", &src, &rows, &rowbytes, &tr, &tcb, &w, &tab,
                          &inverse, &nthreads)) {
        return NULL;
    }
    PyObject *res = NULL;
    size_t *off = NULL;
    if (rows < 0 || rowbytes < 0 || tr < 1 || tcb < 1 || w < 1 || rows % tr || rowbytes % tcb
        || tcb % w || tab.len != (Py_ssize_t)(8 * (size_t)(tr * tcb / w))) {
        PyErr_SetString(PyExc_ValueError, "tile: inconsistent tile geometry");
        goto done;
    }
    Py_ssize_t nbytes = rows * rowbytes;
    if (!need(&src, nbytes, "src")) {
        goto done;
    }
    size_t nchunks = (size_t)(tr * tcb / w), m = (size_t)(tcb / w);
    off = (size_t *)PyMem_Malloc(nchunks * sizeof(size_t) + 1);
    if (off == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const unsigned char *tb = tab.buf;
    for (size_t k = 0; k < nchunks; k++) {
        int64_t q;
        memcpy(&q, tb + 8 * k, 8);
        if (q < 0 || (size_t)q >= nchunks) {
            PyErr_SetString(PyExc_ValueError, "tile: tab entry out of range");
            goto done;
        }
        off[k] = ((size_t)q / m) * (size_t)rowbytes + ((size_t)q % m) * (size_t)w;
    }
    unsigned char *dst = NULL;
    res = new_plane(nbytes, &dst);
    if (res == NULL || nbytes == 0) {
        goto done;
    }
    tile_ctx c;
    c.src = src.buf;
    c.dst = dst;
    c.rowbytes = (size_t)rowbytes;
    c.tr = (size_t)tr;
    c.tcb = (size_t)tcb;
    c.w = (size_t)w;
    c.nct = (size_t)(rowbytes / tcb);
    c.nchunks = nchunks;
    c.off = off;
    c.inverse = inverse;
    c.rows_whole = w == tcb;
    for (size_t k = 0; k < nchunks && c.rows_whole; k++) {
        c.rows_whole = off[k] == k * (size_t)rowbytes;
    }
    size_t units = (size_t)(rows / tr) * c.nct;
    Py_BEGIN_ALLOW_THREADS
    run_dealt(tile_range, &c, units, n_parts(units, nthreads));
    Py_END_ALLOW_THREADS
done:
    PyMem_Free(off);
    PyBuffer_Release(&src);
    PyBuffer_Release(&tab);
    return res;
}

PyDoc_STRVAR(interleave_doc,
"interleave((f0, f1, f2, f3), (w0, w1, w2, w3), blocks, nthreads=1) -> bytes\n"
"deinterleave(src, (w0, w1, w2, w3), blocks, nthreads=1) -> (f0, f1, f2, f3)\n\n"
"Blocks of the fields' w-byte pieces in field order (BLOCK_AOS), and back.\n"
"A field of width 0 takes no bytes (and comes back as b'').");

static int
parse_widths(PyObject *ws, size_t w[4])
{
    if (!PyTuple_Check(ws) || PyTuple_GET_SIZE(ws) != 4) {
        PyErr_SetString(PyExc_ValueError, "widths must be a 4-tuple");
        return 0;
    }
    for (int f = 0; f < 4; f++) {
        Py_ssize_t v = PyLong_AsSsize_t(PyTuple_GET_ITEM(ws, f));
        if (v < 0) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError, "widths must be >= 0");
            }
            return 0;
        }
        w[f] = (size_t)v;
    }
    return 1;
}

static PyObject *
py_interleave(PyObject *self, PyObject *args)
{
    PyObject *fields, *ws;
    Py_ssize_t blocks;
    int nthreads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOn|i", &fields, &ws, &blocks, &nthreads)) {
        return NULL;
    }
    size_t w[4];
    if (!parse_widths(ws, w) || blocks < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "blocks must be >= 0");
        }
        return NULL;
    }
    if (!PyTuple_Check(fields) || PyTuple_GET_SIZE(fields) != 4) {
        PyErr_SetString(PyExc_ValueError, "fields must be a 4-tuple");
        return NULL;
    }
    Py_buffer fb[4];
    int got[4] = {0, 0, 0, 0};
    PyObject *res = NULL;
    ilv_ctx c;
    memset(&c, 0, sizeof c);
    size_t block = 0;
    for (int f = 0; f < 4; f++) {
        if (w[f] == 0) {
            continue;
        }
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(fields, f), &fb[f], PyBUF_SIMPLE) < 0) {
            goto done;
        }
        got[f] = 1;
        if (!need(&fb[f], (Py_ssize_t)(w[f] * (size_t)blocks), "field")) {
            goto done;
        }
        c.field[c.nf] = fb[f].buf;
        c.w[c.nf] = w[f];
        c.off[c.nf] = block;
        c.nf++;
        block += w[f];
    }
    c.block = block;
    res = new_plane((Py_ssize_t)(block * (size_t)blocks), &c.aos);
    if (res == NULL || block * (size_t)blocks == 0) {
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    run_dealt(ilv_range, &c, (size_t)blocks, n_parts((size_t)blocks, nthreads));
    Py_END_ALLOW_THREADS
done:
    for (int f = 0; f < 4; f++) {
        if (got[f]) {
            PyBuffer_Release(&fb[f]);
        }
    }
    return res;
}

static PyObject *
py_deinterleave(PyObject *self, PyObject *args)
{
    Py_buffer src;
    PyObject *ws;
    Py_ssize_t blocks;
    int nthreads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*On|i", &src, &ws, &blocks, &nthreads)) {
        return NULL;
    }
    PyObject *out[4] = {NULL, NULL, NULL, NULL}, *res = NULL;
    size_t w[4];
    ilv_ctx c;
    memset(&c, 0, sizeof c);
    if (!parse_widths(ws, w) || blocks < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "blocks must be >= 0");
        }
        goto done;
    }
    size_t block = w[0] + w[1] + w[2] + w[3];
    if (!need(&src, (Py_ssize_t)(block * (size_t)blocks), "src")) {
        goto done;
    }
    for (int f = 0; f < 4; f++) {
        unsigned char *fp = NULL;
        out[f] = new_plane((Py_ssize_t)(w[f] * (size_t)blocks), &fp);
        if (out[f] == NULL) {
            goto done;
        }
        if (w[f] == 0) {
            continue;
        }
        c.field[c.nf] = fp;
        c.w[c.nf] = w[f];
        c.off[c.nf] = c.block;
        c.nf++;
        c.block += w[f];
    }
    c.aos = src.buf;
    c.inverse = 1;
    if (blocks > 0 && c.nf > 0) {
        Py_BEGIN_ALLOW_THREADS
        run_dealt(ilv_range, &c, (size_t)blocks, n_parts((size_t)blocks, nthreads));
        Py_END_ALLOW_THREADS
    }
    res = PyTuple_Pack(4, out[0], out[1], out[2], out[3]);
done:
    for (int f = 0; f < 4; f++) {
        Py_XDECREF(out[f]);
    }
    PyBuffer_Release(&src);
    return res;
}

PyDoc_STRVAR(k4_doc,
"pack_k4_12b(sc, m, groups, nthreads=1) -> bytes\n"
"unpack_k4_12b(packed, groups, nthreads=1) -> (sc, m)\n\n"
"PACK_K4_12B: per super-block 8 six-bit scales and 8 six-bit mins (one per\n"
"byte, high bits ignored) <-> 12 bytes.");

static PyObject *
py_pack_k4(PyObject *self, PyObject *args)
{
    Py_buffer sc, m;
    Py_ssize_t groups;
    int nthreads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*n|i", &sc, &m, &groups, &nthreads)) {
        return NULL;
    }
    PyObject *res = NULL;
    if (groups >= 0 && need(&sc, 8 * groups, "sc") && need(&m, 8 * groups, "m")) {
        unsigned char *pk = NULL;
        res = new_plane(12 * groups, &pk);
        if (res != NULL && groups > 0) {
            k4_ctx c = {pk, sc.buf, m.buf, 0};
            Py_BEGIN_ALLOW_THREADS
            run_dealt(k4_range, &c, (size_t)groups, n_parts((size_t)groups, nthreads));
            Py_END_ALLOW_THREADS
        }
    } else if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_ValueError, "groups must be >= 0");
    }
    PyBuffer_Release(&sc);
    PyBuffer_Release(&m);
    return res;
}

static PyObject *
py_unpack_k4(PyObject *self, PyObject *args)
{
    Py_buffer b;
    Py_ssize_t groups;
    int nthreads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*n|i", &b, &groups, &nthreads)) {
        return NULL;
    }
    PyObject *res = NULL, *sc = NULL, *m = NULL;
    if (groups >= 0 && need(&b, 12 * groups, "packed")) {
        unsigned char *scp = NULL, *mp = NULL;
        sc = new_plane(8 * groups, &scp);
        m = sc != NULL ? new_plane(8 * groups, &mp) : NULL;
        if (sc != NULL && m != NULL) {
            if (groups > 0) {
                k4_ctx c = {b.buf, scp, mp, 1};
                Py_BEGIN_ALLOW_THREADS
                run_dealt(k4_range, &c, (size_t)groups, n_parts((size_t)groups, nthreads));
                Py_END_ALLOW_THREADS
            }
            res = PyTuple_Pack(2, sc, m);
        }
    } else if (!PyErr_Occurred()) {
        PyErr_SetString(PyExc_ValueError, "groups must be >= 0");
    }
    Py_XDECREF(sc);
    Py_XDECREF(m);
    PyBuffer_Release(&b);
    return res;
}

PyDoc_STRVAR(k4ilv_doc,
"interleave_k4((s1, sc, m, data), w1, wd, blocks, nthreads=1) -> bytes\n"
"deinterleave_k4(src, w1, wd, blocks, nthreads=1) -> (s1, sc, m, data)\n\n"
"BLOCK_AOS of PACK_K4_12B super-blocks in one pass: block b is s1's w1\n"
"bytes, pack_k4_12b of sc's and m's 8 bytes, then data's wd bytes.");

static PyObject *
py_interleave_k4(PyObject *self, PyObject *args)
{
    Py_buffer s1, sc, m, data;
    Py_ssize_t w1, wd, blocks;
    int nthreads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "(y*y*y*y*)nnn|i", &s1, &sc, &m, &data, &w1, &wd, &blocks,
                          &nthreads)) {
        return NULL;
    }
    PyObject *res = NULL;
    if (w1 < 0 || wd < 0 || blocks < 0) {
        PyErr_SetString(PyExc_ValueError, "interleave_k4: widths and blocks must be >= 0");
    } else if (need(&s1, w1 * blocks, "s1") && need(&sc, 8 * blocks, "sc")
               && need(&m, 8 * blocks, "m") && need(&data, wd * blocks, "data")) {
        k4ilv_ctx c = {NULL, s1.buf, sc.buf, m.buf, data.buf, (size_t)w1, (size_t)wd, 0};
        res = new_plane((w1 + 12 + wd) * blocks, &c.aos);
        if (res != NULL && blocks > 0) {
            Py_BEGIN_ALLOW_THREADS
            run_dealt(k4ilv_range, &c, (size_t)blocks, n_parts((size_t)blocks, nthreads));
            Py_END_ALLOW_THREADS
        }
    }
    PyBuffer_Release(&s1);
    PyBuffer_Release(&sc);
    PyBuffer_Release(&m);
    PyBuffer_Release(&data);
    return res;
}

static PyObject *
py_deinterleave_k4(PyObject *self, PyObject *args)
{
    Py_buffer src;
    Py_ssize_t w1, wd, blocks;
    int nthreads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nnn|i", &src, &w1, &wd, &blocks, &nthreads)) {
        return NULL;
    }
    PyObject *o[4] = {NULL, NULL, NULL, NULL}, *res = NULL;
    if (w1 < 0 || wd < 0 || blocks < 0) {
        PyErr_SetString(PyExc_ValueError, "deinterleave_k4: widths and blocks must be >= 0");
    } else if (need(&src, (w1 + 12 + wd) * blocks, "src")) {
        k4ilv_ctx c = {src.buf, NULL, NULL, NULL, NULL, (size_t)w1, (size_t)wd, 1};
        o[0] = new_plane(w1 * blocks, &c.s1);
        o[1] = new_plane(8 * blocks, &c.sc);
        o[2] = new_plane(8 * blocks, &c.m);
        o[3] = new_plane(wd * blocks, &c.data);
        if (o[0] != NULL && o[1] != NULL && o[2] != NULL && o[3] != NULL) {
            if (blocks > 0) {
                Py_BEGIN_ALLOW_THREADS
                run_dealt(k4ilv_range, &c, (size_t)blocks, n_parts((size_t)blocks, nthreads));
                Py_END_ALLOW_THREADS
            }
            res = PyTuple_Pack(4, o[0], o[1], o[2], o[3]);
        }
    }
    for (int f = 0; f < 4; f++) {
        Py_XDECREF(o[f]);
    }
    PyBuffer_Release(&src);
    return res;
}

PyDoc_STRVAR(simd_doc,
"simd(enable=None) -> str\n\n"
"The vector path in use, 'avx2' or 'portable'.  ``enable=False`` forces the\n"
"portable C loops, ``True`` restores AVX2 where the CPU has it (both give the\n"
"same bits; tests run both).");

static int cpu_has_avx2 = 0;

static PyObject *
py_simd(PyObject *self, PyObject *args)
{
    PyObject *enable = Py_None;
    (void)self;
    if (!PyArg_ParseTuple(args, "|O", &enable)) {
        return NULL;
    }
    if (enable != Py_None) {
        int on = PyObject_IsTrue(enable);
        if (on < 0) {
            return NULL;
        }
        use_avx2 = on && cpu_has_avx2;
    }
    return PyUnicode_FromString(use_avx2 ? "avx2" : "portable");
}

static PyMethodDef kernels_methods[] = {
    {"decode_mxfp4", py_decode_mxfp4, METH_VARARGS, decode_doc},
    {"decode_nvf4", py_decode_nvf4, METH_VARARGS, decode_doc},
    {"decode_q4ks", py_decode_q4ks, METH_VARARGS, decode_doc},
    {"decode_i8s24", py_decode_i8s24, METH_VARARGS, decode_doc},
    {"encode_mxfp4", py_encode_mxfp4, METH_VARARGS, encode_doc},
    {"encode_nvf4", py_encode_nvf4, METH_VARARGS, encode_doc},
    {"encode_q4ks", py_encode_q4ks, METH_VARARGS, encode_doc},
    {"encode_i8s24", py_encode_i8s24, METH_VARARGS, encode_doc},
    {"simd", py_simd, METH_VARARGS, simd_doc},
    {"transpose", py_transpose, METH_VARARGS, transpose_doc},
    {"tile", py_tile, METH_VARARGS, tile_doc},
    {"interleave", py_interleave, METH_VARARGS, interleave_doc},
    {"deinterleave", py_deinterleave, METH_VARARGS, interleave_doc},
    {"pack_k4_12b", py_pack_k4, METH_VARARGS, k4_doc},
    {"unpack_k4_12b", py_unpack_k4, METH_VARARGS, k4_doc},
    {"interleave_k4", py_interleave_k4, METH_VARARGS, k4ilv_doc},
    {"deinterleave_k4", py_deinterleave_k4, METH_VARARGS, k4ilv_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kernels_module = {
    PyModuleDef_HEAD_INIT,
    "grit._kernels",
    "Private native fast paths of grit.codec for the registered grades (GRIT v1 §8–§10).",
    -1,
    kernels_methods,
    NULL, NULL, NULL, NULL,
};

/* Import-time self-check of the scalar conversions on values whose codes
 * §2.5 and IEEE 754 pin: a miscompiled or non-IEEE build fails the import and
 * the package stays on its numpy path. */
static int
self_check(void)
{
    return e2m1_encode(0.25f) == 0 && e2m1_encode(0.75f) == 2 && e2m1_encode(1.25f) == 2
        && e2m1_encode(2.5f) == 4 && e2m1_encode(5.0f) == 6 && e2m1_encode(-0.0f) == 8
        && e2m1_encode(1e30f) == 7
        && half_rne_satfinite(1.0f) == 0x3C00 && half_rne_satfinite(65519.0f) == 0x7BFF
        && half_rne_satfinite(65520.0f) == 0x7BFF
        && half_rne_satfinite(pow2f(-25)) == 0 && half_rne_satfinite(3.0f * pow2f(-25)) == 2
        && half_value(0x0001) == pow2f(-24) && half_value(0x7BFF) == 65504.0f
        && e4m3_encode_nonneg(448.0f, 0) == 0x7E && e4m3_encode_nonneg(1.0f, 0) == 0x38
        && e4m3_encode_nonneg(pow2f(-10), 0) == 0 && e4m3_encode_nonneg(3.0f * pow2f(-10), 0) == 2
        && e4m3_encode_nonneg(1.0625f, 0) == 0x38 && e4m3_encode_nonneg(1.1875f, 1) == 0x39
        && E4M3[0x7E] == 448.0f && E4M3[0x01] == pow2f(-9) && E4M3[0x7F] != E4M3[0x7F]
        && mx_exponent(f2u(6.0f), 0) == 0 && mx_exponent(f2u(1.5f), 1) == -1
        && mx_exponent(f2u(1.4f), 1) == -2 && mx_exponent(1, 0) == -127
        && pow2f(-126) * 0.5f == pow2f(-127)        /* subnormals are not flushed */
        && rint_nonneg(2.5f) == 2 && rint_nonneg(3.5f) == 4 && rint_signed(-2.5f) == -2;
}

PyMODINIT_FUNC
PyInit__kernels(void)
{
    init_e4m3();
    init_i8();
#ifdef GRIT_AVX2
    init_i8_shuffles();
#endif
    if (!self_check()) {
        PyErr_SetString(PyExc_ImportError, "grit._kernels failed its binary32 self-check");
        return NULL;
    }
#ifdef GRIT_AVX2
    __builtin_cpu_init();
    cpu_has_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
#endif
    use_avx2 = cpu_has_avx2;
    PyObject *m = PyModule_Create(&kernels_module);
    if (m == NULL) {
        return NULL;
    }
#ifdef Py_GIL_DISABLED
    PyUnstable_Module_SetGIL(m, Py_MOD_GIL_NOT_USED);
#endif
    if (PyModule_AddIntConstant(m, "MAX_THREADS", MAX_THREADS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
