/*
 * The general codec (§8-§10) of libgrit: decode and encode of any grade the
 * registry holds, driven by its canonical string's fields -- element and
 * scale formats of any legal word, one or two scale levels (k1 = 0: per
 * tensor), zero points (zps = shared with zpc = asis / minus1, zps = l1),
 * N:M sparsity with u2 / u4 metadata, dense LSB- or MSB-first or PAD8
 * element planes, the five scale rules under (er, es, esn), and the dt
 * projection under (dr, ds).  It is grit/codec/decode.py and encode.py
 * written per group: every named step is one binary32 operation (the build
 * passes -ffp-contract=off), every NaN leaves as 0x7FC00000, zeros keep
 * their sign where numpy keeps it.  tests/test_libgrit.py compares it with
 * the Python codec on fuzzed inputs; the conformance runner with every
 * vector.
 *
 * And grit_fmt_encode: fmt_encode (§2.5) under every rounding and
 * saturation, as grit/formats.py fmt_encode.
 */
#include "lib.h"

#include <math.h>
#include <stdlib.h>

/* ------------------------------------------------------------------------
 * a format word, unpacked once */

enum { K_INT, K_EXP, K_FLOAT };
enum { R_RNE = 0, R_RNA, R_RTZ, R_RTP, R_RTN };
enum { S_SATFINITE = 0, S_SATMAX, S_OVFINF };

typedef struct {
    grit_fmt_t word;
    int kind, u, has_inf, has_nan;
    unsigned w, m_bits, e_bits;
    int bias;
    uint32_t nan_code;      /* the code the encoder writes for NaN (has_nan) */
    uint32_t top;           /* sign-cleared code of the largest finite value */
    uint32_t sign;          /* the sign bit of a signed float, else 0 */
    double max_finite;
    int emax;               /* exponent of max_finite */
    float table[256];       /* fmt_decode of every code, w <= 8 */
    int table_ready;
} fmtinfo;

static double
raw_decode(const fmtinfo *f, uint32_t c)
{
    if (f->w <= 8 && f->table_ready) {
        return (double)f->table[c & ((1u << f->w) - 1)];
    }
    return (double)grit_fmt_decode(f->word, c);
}

static void
fmt_info(fmtinfo *f, grit_fmt_t word)
{
    memset(f, 0, sizeof *f);
    f->word = word;
    f->w = fmt_w(word);
    unsigned p = fmt_p(word), ne = fmt_nan_enc(word);
    f->u = (int)fmt_unsigned(word);
    f->has_inf = (int)fmt_has_inf(word);
    f->kind = p == 31 ? K_INT : p == 0 ? K_EXP : K_FLOAT;
    f->has_nan = f->kind != K_INT && ne != 0;
    if (f->kind == K_INT) {
        f->top = f->u ? (uint32_t)((UINT64_C(1) << f->w) - 1)
                      : (uint32_t)((UINT64_C(1) << (f->w - 1)) - 1);
        f->max_finite = (double)f->top;
    } else {
        uint32_t all;
        if (f->kind == K_EXP) {
            f->e_bits = f->w;
            f->bias = (1 << (f->w - 1)) - 1;
            all = (uint32_t)((UINT64_C(1) << f->w) - 1);
            f->top = ne ? all - 1 : all;
            f->nan_code = all;
        } else {
            f->m_bits = p - 1;
            f->e_bits = f->w - (f->u ? 0 : 1) - f->m_bits;
            f->bias = (1 << (f->e_bits - 1)) - 1;
            f->sign = f->u ? 0 : UINT32_C(1) << (f->w - 1);
            all = (uint32_t)((UINT64_C(1) << (f->u ? f->w : f->w - 1)) - 1);
            uint32_t mmask = (uint32_t)((UINT64_C(1) << f->m_bits) - 1);
            uint32_t top_exp = (uint32_t)(((UINT64_C(1) << f->e_bits) - 1) << f->m_bits);
            f->top = f->has_inf ? all - mmask - 1 : ne == 2 ? all - mmask : ne == 1 ? all - 1 : all;
            f->nan_code = ne == 1 ? top_exp | mmask
                        : ne == 2 ? top_exp | (UINT32_C(1) << (f->m_bits - 1)) : 0;
        }
        f->max_finite = raw_decode(f, f->top);
    }
    int ex;
    frexp(f->max_finite, &ex);
    f->emax = ex - 1;
    if (f->w <= 8) {
        for (uint32_t c = 0; c < (UINT32_C(1) << f->w); c++) {
            f->table[c] = grit_fmt_decode(word, c);
        }
        f->table_ready = 1;
    }
}

static float
fdec(const fmtinfo *f, uint32_t c)
{
    return f->w <= 8 ? f->table[c & ((1u << f->w) - 1)] : grit_fmt_decode(f->word, c);
}

/* ------------------------------------------------------------------------
 * fmt_encode (grit/formats.py): the §2.5 ladder for floats and exponent-only
 * words, integer rounding and the §1.5 clamp for integers */

/* round a non-negative exact magnitude q to an integer (neg: the sign) */
static double
round_int(double q, int r, int neg)
{
    double lo = floor(q), frac = q - lo;
    if (frac == 0) {
        return lo;
    }
    switch (r) {
    case R_RNE: return (frac > 0.5 || (frac == 0.5 && fmod(lo, 2.0) == 1.0)) ? lo + 1 : lo;
    case R_RNA: return frac >= 0.5 ? lo + 1 : lo;
    case R_RTZ: return lo;
    case R_RTP: return neg ? lo : lo + 1;
    default: return neg ? lo + 1 : lo;
    }
}

static int
round_up(double d_lo, double d_hi, uint32_t c_lo, int r, int neg)
{
    switch (r) {
    case R_RNE: return d_hi < d_lo || (d_hi == d_lo && (c_lo & 1));
    case R_RNA: return d_hi <= d_lo;
    case R_RTZ: return 0;
    case R_RTP: return !neg;
    default: return neg;
    }
}

static uint32_t
ovf_result(const fmtinfo *f)
{
    if (f->has_inf) {
        return (uint32_t)(((UINT64_C(1) << f->e_bits) - 1) << f->m_bits);
    }
    return f->has_nan ? f->nan_code : f->top;
}

/* ovfinf for a finite a above the largest finite value */
static uint32_t
overflow_code(const fmtinfo *f, double a, int neg, int r)
{
    double top = f->max_finite;
    int over;
    if (r == R_RTZ) {
        over = 0;
    } else if (r == R_RTP) {
        over = !neg;
    } else if (r == R_RTN) {
        over = neg;
    } else {
        double ulp;
        if (f->kind == K_FLOAT) {
            int ex;
            frexp(top, &ex);
            int e_top = ex - 1 > 1 - f->bias ? ex - 1 : 1 - f->bias;
            ulp = ldexp(1.0, e_top - (int)f->m_bits);
        } else {
            ulp = top;
        }
        double nxt = top + ulp;
        over = a >= nxt || round_up(a - top, nxt - a, f->top, r, neg);
    }
    return over ? ovf_result(f) : f->top;
}

/* the ladder pick of a finite magnitude a >= 0: sign-cleared codes 0..top
 * decode in increasing magnitude */
static uint32_t
ladder_pick(const fmtinfo *f, double a, int neg, int r, int sat)
{
    if (a >= f->max_finite) {
        if (a == f->max_finite || sat != S_OVFINF) {
            return f->top;
        }
        return overflow_code(f, a, neg, r);
    }
    if (a <= raw_decode(f, 0)) {
        return 0;
    }
    uint32_t lo = 0, hi = f->top;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (raw_decode(f, mid) <= a) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    double m0 = raw_decode(f, lo), m1 = raw_decode(f, hi);
    if (a == m0) {
        return lo;
    }
    return round_up(a - m0, m1 - a, lo, r, neg) ? hi : lo;
}

/* the code, or -1 for a NaN the format cannot hold */
static int64_t
fenc(const fmtinfo *f, float x, int r, int sat)
{
    if (x != x) {
        return f->has_nan ? (int64_t)f->nan_code : -1;
    }
    int neg = (f2u(x) >> 31) != 0;
    double a = fabs((double)x);
    if (f->kind == K_INT) {
        double lo = f->u ? 0.0 : -(double)f->top, hi = (double)f->top, v;
        if (isinf(x)) {
            v = x > 0 ? hi : lo;
        } else {
            v = round_int(a, r, neg);
            v = neg ? -v : v;
            v = v < lo ? lo : v > hi ? hi : v;
        }
        return (int64_t)((uint64_t)(int64_t)v & ((UINT64_C(1) << f->w) - 1));
    }
    if (f->kind == K_EXP) {
        if (isinf(x)) {
            return sat != S_OVFINF || !f->has_nan ? f->top : f->nan_code;
        }
        return ladder_pick(f, a, 0, r, sat);
    }
    if (f->u) {
        neg = 0;
    }
    uint32_t sign = neg ? f->sign : 0;
    if (isinf(x)) {
        if (sat == S_SATFINITE || !f->has_inf) {
            if (sat == S_OVFINF && f->has_nan && !f->has_inf) {
                return f->nan_code | sign;
            }
            return f->top | sign;
        }
        return ovf_result(f) | sign;
    }
    if (f->word == GRIT_FMT_BINARY32) {
        return f2u(x);
    }
    return ladder_pick(f, a, neg, r, sat) | sign;
}

int64_t
grit_fmt_encode(grit_fmt_t word, float x, int rounding, int saturation)
{
    if (!grit_fmt_valid(word) || rounding < 0 || rounding > R_RTN || saturation < 0
        || saturation > S_OVFINF) {
        return -1;
    }
    fmtinfo f;
    fmt_info(&f, word);
    return fenc(&f, x, rounding, saturation);
}

/* ------------------------------------------------------------------------
 * planes (grit/codec/packing.py) */

/* code j of a dense width-w stream: LSB-first, or MSB-first (widths that
 * are a multiple of 8 are little-endian bytes under either order) */
static uint32_t
get_stream(const uint8_t *b, uint64_t j, unsigned w, int msb)
{
    uint64_t bit = j * w;
    uint32_t v = 0;
    if (w % 8 == 0) {
        for (unsigned t = 0; t < w / 8; t++) {
            v |= (uint32_t)b[bit / 8 + t] << (8 * t);
        }
        return v;
    }
    for (unsigned t = 0; t < w; t++) {
        uint64_t k = bit + t;
        if (msb) {
            v = (v << 1) | ((b[k / 8] >> (7 - k % 8)) & 1u);
        } else {
            v |= (uint32_t)((b[k / 8] >> (k % 8)) & 1u) << t;
        }
    }
    return v;
}

/* inverse of get_stream into a zeroed plane */
static void
put_stream(uint8_t *b, uint64_t j, unsigned w, int msb, uint32_t c)
{
    uint64_t bit = j * w;
    if (w < 32) {
        c &= (UINT32_C(1) << w) - 1;
    }
    if (w % 8 == 0) {
        for (unsigned t = 0; t < w / 8; t++) {
            b[bit / 8 + t] = (uint8_t)(c >> (8 * t));
        }
        return;
    }
    for (unsigned t = 0; t < w; t++) {
        uint64_t k = bit + t;
        unsigned v = msb ? (c >> (w - 1 - t)) & 1u : (c >> t) & 1u;
        b[k / 8] |= (uint8_t)(v << (msb ? 7 - k % 8 : k % 8));
    }
}

/* the element plane: PAD8 (w <= 8) or the dense stream in the bit order */
static uint32_t
get_elem(const grit_desc_t *d, const uint8_t *b, uint64_t j, unsigned w)
{
    if (d->container == GRIT_CT_PAD8 && w <= 8) {
        return b[j];
    }
    return get_stream(b, j, w, (d->flags & GRIT_F_MSB_FIRST) != 0);
}

static void
put_elem(const grit_desc_t *d, uint8_t *b, uint64_t j, unsigned w, uint32_t c)
{
    if (d->container == GRIT_CT_PAD8 && w <= 8) {
        b[j] = (uint8_t)(c & ((1u << w) - 1));
    } else {
        put_stream(b, j, w, (d->flags & GRIT_F_MSB_FIRST) != 0, c);
    }
}

/* scale0 and zero points: one per byte for w <= 8, else the LSB-first stream */
static uint32_t
get_group(const uint8_t *b, uint64_t j, unsigned w)
{
    return w <= 8 ? b[j] : get_stream(b, j, w, 0);
}

static void
put_group(uint8_t *b, uint64_t j, unsigned w, uint32_t c)
{
    if (w <= 8) {
        b[j] = (uint8_t)(c & ((1u << w) - 1));
    } else {
        put_stream(b, j, w, 0, c);
    }
}

/* scale1: the LSB-first stream of its width (bytes for 8) */
static uint32_t
get_s1(const uint8_t *b, uint64_t j, unsigned w)
{
    return get_stream(b, j, w, 0);
}

static void
put_s1(uint8_t *b, uint64_t j, unsigned w, uint32_t c)
{
    put_stream(b, j, w, 0, c);
}

static unsigned
meta_bits(const grit_desc_t *d)
{
    return d->sp_meta_fmt == GRIT_SPMETA_U2 ? 2 : 4;
}

static const uint8_t *
plane_ro(const grit_view_t *v, int i)
{
    static const uint8_t empty[8] = {0};
    return v->plane_bytes[i] > 0 ? (const uint8_t *)v->plane[i] : empty;
}

/* ------------------------------------------------------------------------
 * sizes */

typedef struct {
    uint64_t numel, nnz, g0, g1;
    unsigned k0, k1, n, m;
    int sparse, has_zp, zl1, minus1, levels;
} dims;

static void
dims_of(const grit_view_t *v, dims *s)
{
    const grit_desc_t *d = &v->d;
    s->numel = 1;
    for (int32_t i = 0; i < v->rank; i++) {
        s->numel *= (uint64_t)v->shape[i];
    }
    s->k0 = d->k0;
    s->k1 = d->k1;
    s->sparse = (d->flags & GRIT_F_SPARSE) != 0;
    s->has_zp = (d->flags & GRIT_F_HAS_ZP) != 0;
    s->zl1 = (d->flags & GRIT_F_ZP_L1SCALED) != 0;
    s->minus1 = (d->flags & GRIT_F_ZP_MINUS1) != 0;
    s->levels = d->n_levels;
    s->n = d->sp_n;
    s->m = d->sp_m;
    s->nnz = s->sparse ? s->numel / s->m * s->n : s->numel;
    s->g0 = s->numel / s->k0;
    s->g1 = s->levels == 2 ? (s->k1 == 0 ? 1 : s->g0 / s->k1) : 0;
}

/* the level-1 group of level-0 group g */
static uint64_t
l1_of(const dims *s, uint64_t g)
{
    return s->k1 == 0 ? 0 : g / s->k1;
}

/* ------------------------------------------------------------------------
 * decode (grit/codec/decode.py) */

grit_status_t
grit_generic_decode(const grit_view_t *v, const grit_grade_entry *g, float *out, size_t n,
                    grit_detail_t *det)
{
    const grit_desc_t *d = &v->d;
    dims s;
    dims_of(v, &s);
    fmtinfo *fi = (fmtinfo *)malloc(5 * sizeof(fmtinfo));
    if (fi == NULL) {
        return grit_fail(det, GRIT_SIZE_MISMATCH, 0, -1, "memory", NULL, NULL,
                         "SizeMismatch: out of memory for the decode tables.");
    }
    fmtinfo *fe = &fi[0], *f0 = &fi[1], *f1 = &fi[2], *fz = &fi[3], *ft = &fi[4];
    fmt_info(fe, d->elem);
    fmt_info(f0, d->scale0);
    if (s.levels == 2) {
        fmt_info(f1, d->scale1);
    }
    if (s.has_zp) {
        fmt_info(fz, d->zp_fmt);
    }
    const grit_codec_params *cp = &g->params;
    int project = cp->dt != GRIT_FMT_BINARY32;
    if (project) {
        fmt_info(ft, cp->dt);
    }
    const uint8_t *data = plane_ro(v, 0), *p0 = plane_ro(v, 1), *p1 = plane_ro(v, 2),
                  *aux = plane_ro(v, 3);
    unsigned ew = fe->w;
    uint64_t cursor = 0;          /* sparse: the next stored element */
    unsigned kept = 0;            /* sparse: the kept positions of the current quad */
    const float one = s.minus1 ? 1.0f : 0.0f;
    uint64_t cur_g0 = UINT64_MAX;
    float S = 0.0f, Z = 0.0f;       /* the current group's scale, zero point */
    for (uint64_t i = 0; i < (uint64_t)n; i++) {
        uint32_t code = 0;
        int is_kept = 1;
        if (s.sparse) {
            uint64_t q = i / s.m;
            unsigned pos = (unsigned)(i % s.m);
            if (pos == 0) {
                kept = 0;
                unsigned mb = meta_bits(d);
                for (unsigned j = 0; j < s.n; j++) {
                    unsigned ix = get_stream(aux, q * s.n + j, mb, 0);
                    if (ix < s.m) {
                        kept |= 1u << ix;
                    }
                }
            }
            is_kept = (kept >> pos) & 1u;
            if (is_kept) {
                code = get_elem(d, data, cursor++, ew);
            }
        } else {
            code = get_elem(d, data, i, ew);
        }
        if (!is_kept) {
            out[i] = 0.0f;          /* the sparsity law wins (§8.1 step 1) */
            continue;
        }
        uint64_t g0 = i / s.k0;
        if (g0 != cur_g0) {                              /* the group's scale chain */
            cur_g0 = g0;
            float s0 = fdec(f0, get_group(p0, g0, f0->w));
            uint64_t g1 = 0;
            S = s0;
            if (s.levels == 2) {
                g1 = l1_of(&s, g0);
                float s1 = fdec(f1, get_s1(p1, g1 * (s.zl1 ? 2 : 1), f1->w));
                S = s1 * s0;                             /* f32(S1 · s0) */
            }
            if (s.has_zp) {
                float zpv = fdec(fz, get_group(aux, g0, fz->w));
                if (s.zl1) {
                    float z1 = fdec(f1, get_s1(p1, g1 * 2 + 1, f1->w));
                    Z = z1 * zpv;                        /* f32(Z1 · zp) */
                } else {
                    Z = zpv + one;                       /* one binary32 addition */
                }
            }
        }
        float e = fdec(fe, code), val;
        if (!s.has_zp) {
            val = e * S;                                 /* f32(S · e) */
        } else if (s.zl1) {
            float es = e * S;
            val = es - Z;                                /* f32(f32(S·e) − Z) */
        } else {
            float ez = e - Z;
            val = S * ez;                                /* f32(S · f32(e − z)) */
        }
        if (project && val == val) {                     /* §8.1 step 6 */
            int64_t c = fenc(ft, val, cp->dr, cp->ds);
            val = fdec(ft, (uint32_t)c);
        }
        out[i] = val != val ? u2f(CANON_NAN) : val;
    }
    free(fi);
    return grit_ok(det);
}

/* ------------------------------------------------------------------------
 * encode (grit/codec/encode.py) */

typedef struct {
    const grit_view_t *v;
    const grit_codec_params *cp;
    dims s;
    fmtinfo fe, f0, f1, fz;
    int has_s1;
    grit_detail_t *det;
    int failed;                 /* a NaN met a format without one */
    const char *failed_fmt;
} enc_ctx;

/* fmt_encode into f, noting a NaN the format cannot hold */
static uint32_t
enc(enc_ctx *c, const fmtinfo *f, float x, int r, int sat, const char *what)
{
    int64_t code = fenc(f, x, r, sat);
    if (code < 0) {
        c->failed = 1;
        c->failed_fmt = what;
        return 0;
    }
    return (uint32_t)code;
}

static int
is_fin(float x)
{
    return (f2u(x) & 0x7F800000u) != 0x7F800000u;
}

/* the smallest positive value's code (encode.py _min_positive_code) */
static uint32_t
min_positive_code(const fmtinfo *f)
{
    if (f->w > 16) {
        return 1;
    }
    uint32_t best = 0;
    float bv = 0;
    int have = 0;
    for (uint32_t k = 0; k < (UINT32_C(1) << f->w); k++) {
        float t = fdec(f, k);
        if (is_fin(t) && t > 0 && (!have || t < bv)) {
            best = k, bv = t, have = 1;
        }
    }
    return best;
}

/* project a computed scale under (er, es); a positive one that projects to
 * zero takes the smallest positive value (encode.py _project_scale) */
static uint32_t
project_scale(enc_ctx *c, const fmtinfo *f, float ratio, int positive, float *val,
              const char *what)
{
    uint32_t code = enc(c, f, ratio, c->cp->er, c->cp->es, what);
    float vv = fdec(f, code);
    if (vv == 0 && positive) {
        code = min_positive_code(f);
        vv = fdec(f, code);
    }
    *val = vv;
    return code;
}

static uint32_t
code_of_one(enc_ctx *c, const fmtinfo *f, const char *what)
{
    return enc(c, f, 1.0f, R_RNE, S_SATFINITE, what);
}

/* numpy's clip: NaN stays NaN */
static float
clipf(float x, float lo, float hi)
{
    if (x != x) {
        return x;
    }
    float y = x > lo ? x : lo;          /* np.maximum: the second operand on a tie */
    return y < hi ? y : hi;
}

/* the value of element j of group g (lin order): x, or +0 where the N:M
 * selection dropped it or the group is poisoned-and-quieted by the caller */
typedef struct {
    const float *x;
    const uint16_t *kept;       /* sparse: kept positions per quad, else NULL */
    unsigned m;
    int ftz;
} src;

static float
val_at(const src *sx, uint64_t i)
{
    float v = sx->x[i];
    if (sx->ftz && (f2u(v) & 0x7F800000u) == 0) {
        v = u2f(f2u(v) & 0x80000000u);
    }
    if (sx->kept != NULL && !((sx->kept[i / sx->m] >> (i % sx->m)) & 1u)) {
        return 0.0f;
    }
    return v;
}

/* finite parts of a group: poison flag, amax, min, max of the finite values
 * (non-finite read as +0) */
typedef struct {
    int poison;
    float amax, lo, hi;
} gstat;

static gstat
group_stat(const src *sx, uint64_t g, unsigned k0)
{
    gstat r = {0, 0.0f, 0.0f, 0.0f};
    float mn = 0, mx = 0;
    for (unsigned j = 0; j < k0; j++) {
        float v = val_at(sx, g * k0 + j);
        if (!is_fin(v)) {
            r.poison = 1;
            v = 0.0f;
        }
        float a = fabsf(v);
        if (j == 0) {
            r.amax = a, mn = v, mx = v;
        } else {
            r.amax = r.amax > a ? r.amax : a;
            mn = mn < v ? mn : v;
            mx = mx > v ? mx : v;
        }
    }
    /* np.minimum(min, 0) / np.maximum(max, 0): +0 on a tie */
    r.lo = mn < 0.0f ? mn : 0.0f;
    r.hi = mx > 0.0f ? mx : 0.0f;
    return r;
}

/* the scale0 code of a poisoned level-0 group: s0's NaN, or NO_NAN when
 * no scale format of the grade can carry one (unit < 0) */
#define NO_NAN UINT32_MAX

static uint32_t
poison_scale(const fmtinfo *f0, int unit)
{
    return unit < 0 ? NO_NAN : f0->nan_code;
}

static grit_status_t
poison_refused(enc_ctx *c)
{
    return grit_fail(c->det, GRIT_GRADE_UNKNOWN, 0, -1, "x", "finite values", "NaN or ±inf",
                     "GradeUnknown: cannot encode NaN or ±inf into this grade: a group holding "
                     "one is poisoned by a NaN scale (§9.1 rule 2), and no scale format of the "
                     "grade has a NaN code.");
}

/* element code i (lin order) into the data plane: under N:M, at its
 * stored position if the selection kept it, else nowhere */
static void
put_code(enc_ctx *c, const src *sx, uint8_t *data, uint64_t i, uint32_t code)
{
    const grit_desc_t *d = &c->v->d;
    if (sx->kept != NULL) {
        uint64_t q = i / sx->m;
        unsigned pos = (unsigned)(i % sx->m), mask = sx->kept[q];
        if (!((mask >> pos) & 1u)) {
            return;
        }
        unsigned before = 0;
        for (unsigned t = 0; t < pos; t++) {
            before += (mask >> t) & 1u;
        }
        put_elem(d, data, q * c->s.n + before, c->fe.w, code);
    } else {
        put_elem(d, data, i, c->fe.w, code);
    }
}

/* N:M selection (encode.py _select): the n largest magnitudes of each quad,
 * NaN above every other, ties to the lower index */
static void
select_quads(const src *sx, uint64_t nquads, unsigned n, unsigned m, uint16_t *kept)
{
    for (uint64_t q = 0; q < nquads; q++) {
        uint32_t key[16];
        for (unsigned j = 0; j < m; j++) {
            float v = sx->x[q * m + j];
            if (sx->ftz && (f2u(v) & 0x7F800000u) == 0) {
                v = u2f(f2u(v) & 0x80000000u);
            }
            uint32_t mag = f2u(v) & 0x7FFFFFFFu;
            key[j] = mag < 0x7F800001u ? mag : 0x7F800001u;
        }
        unsigned mask = 0;
        for (unsigned j = 0; j < m; j++) {
            unsigned beat = 0;
            for (unsigned k = 0; k < m; k++) {
                if (k != j) {
                    beat += k < j ? key[k] >= key[j] : key[k] > key[j];
                }
            }
            if (beat < n) {
                mask |= 1u << j;
            }
        }
        kept[q] = (uint16_t)mask;
    }
}

grit_status_t
grit_generic_encode(const grit_view_t *v, const grit_grade_entry *g, const float *x, size_t n,
                    grit_detail_t *det)
{
    const grit_desc_t *d = &v->d;
    enc_ctx *c = (enc_ctx *)calloc(1, sizeof *c);
    if (c == NULL) {
        return grit_fail(det, GRIT_SIZE_MISMATCH, 0, -1, "memory", NULL, NULL,
                         "SizeMismatch: out of memory for the encode tables.");
    }
    c->v = v;
    c->cp = &g->params;
    c->det = det;
    dims_of(v, &c->s);
    dims *s = &c->s;
    (void)n;
    fmt_info(&c->fe, d->elem);
    fmt_info(&c->f0, d->scale0);
    c->has_s1 = s->levels == 2;
    if (c->has_s1) {
        fmt_info(&c->f1, d->scale1);
    }
    if (s->has_zp) {
        fmt_info(&c->fz, d->zp_fmt);
    }
    const grit_codec_params *cp = c->cp;
    int esr = cp->esr;
    const char *why = NULL;
    /* the plan (encode.py _plan): which rule, or why none */
    if (esr <= GRIT_ESR_RNE) {
        if (s->has_zp) {
            why = "exp2*maxabs with a zero point";
        } else if (s->levels != 1) {
            why = "exp2*maxabs with two scale levels";
        }
    } else if (esr == GRIT_ESR_RATIO) {
        if (s->has_zp) {
            why = "ratiomaxabs with a zero point";
        }
    } else {
        if (!s->has_zp) {
            why = "affineminmax without a zero point (zp)";
        } else if (!(c->fe.kind == K_INT && c->fe.u)) {
            why = "affineminmax needs an unsigned integer element format";
        } else if (!s->zl1) {
            if (s->levels != 1) {
                why = "affineminmax with zps=shared and two scale levels";
            } else if (c->fz.kind != K_INT) {
                why = "affineminmax needs an integer zero-point format";
            }
        } else if (!(c->f0.kind == K_INT && c->f0.u) || !(c->fz.kind == K_INT && c->fz.u)) {
            why = "affineminmax with zps=l1 needs unsigned integer scale0 and zero-point formats";
        }
    }
    if (why != NULL) {
        free(c);
        return grit_fail(det, GRIT_GRADE_UNKNOWN, 0, -1, "grade_id", NULL, g->canonical,
                         "GradeUnknown: no encode rule for %s: %s (docs/spec-decisions.md "
                         "\"§9 Encode\").", g->canonical, why);
    }
    for (int i = 0; i < 4; i++) {
        if (v->plane_bytes[i] > 0) {
            memset(v->plane[i], 0, (size_t)v->plane_bytes[i]);
        }
    }
    uint8_t *data = (uint8_t *)v->plane[0], *p0 = (uint8_t *)v->plane[1],
            *p1 = (uint8_t *)v->plane[2], *aux = (uint8_t *)v->plane[3];
    src sx = {x, NULL, s->m, cp->esn_ftz};
    uint16_t *kept = NULL;
    uint64_t nquads = s->sparse ? s->numel / s->m : 0;
    /* scratch: per level-0 group and per level-1 group */
    size_t g0n = (size_t)s->g0 ? (size_t)s->g0 : 1, g1n = (size_t)s->g1 ? (size_t)s->g1 : 1;
    gstat *st = (gstat *)malloc(g0n * sizeof *st);
    float *fa = (float *)malloc(g0n * sizeof(float)), *fb = (float *)malloc(g0n * sizeof(float));
    float *ga = (float *)malloc(g1n * sizeof(float)), *gb = (float *)malloc(g1n * sizeof(float));
    uint32_t *c1 = (uint32_t *)malloc(2 * g1n * sizeof(uint32_t));
    unsigned char *p1f = (unsigned char *)malloc(g1n);
    if (s->sparse) {
        kept = (uint16_t *)malloc((nquads ? nquads : 1) * sizeof(uint16_t));
    }
    grit_status_t ret = GRIT_OK;
    if (!st || !fa || !fb || !ga || !gb || !c1 || !p1f || (s->sparse && !kept)) {
        ret = grit_fail(det, GRIT_SIZE_MISMATCH, 0, -1, "memory", NULL, NULL,
                        "SizeMismatch: out of memory for the encode scratch.");
        goto done;
    }
    if (s->sparse) {
        select_quads(&sx, nquads, s->n, s->m, kept);
        sx.kept = kept;
        unsigned mb = meta_bits(d);
        for (uint64_t q = 0; q < nquads; q++) {
            unsigned t = 0;
            for (unsigned j = 0; j < s->m; j++) {
                if ((kept[q] >> j) & 1u) {
                    put_stream(aux, q * s->n + t++, mb, 0, j);
                }
            }
        }
    }
    int any_poison = 0;
    for (uint64_t gi = 0; gi < s->g0; gi++) {
        st[gi] = group_stat(&sx, gi, s->k0);
        any_poison |= st[gi].poison;
    }
    /* the poisoned unit: 0 the level-0 group (s0 has NaN), 1 the level-1
     * group (s1 has NaN), -1 none can carry it */
    int unit = c->f0.has_nan ? 0 : (c->has_s1 && c->f1.has_nan) ? 1 : -1;
    const fmtinfo *fe = &c->fe, *f0 = &c->f0, *f1 = &c->f1, *fz = &c->fz;
    int es = cp->es;
    const unsigned k0 = s->k0;

    if (esr <= GRIT_ESR_RNE) {
        /* exp2floormaxabs / exp2ceilmaxabs / exp2rnemaxabs, one level */
        int lo, hi = f0->emax;
        lo = f0->kind == K_FLOAT ? 1 - f0->bias - (int)f0->m_bits
           : f0->kind == K_EXP ? -f0->bias : 0;
        for (uint64_t gi = 0; gi < s->g0; gi++) {
            float amax = st[gi].amax;
            int ex;
            float mant = frexpf(amax, &ex);
            long e = (long)ex - 1;
            if (esr == GRIT_ESR_CEIL) {
                e += mant != 0.5f;
            } else if (esr == GRIT_ESR_RNE) {
                e += (double)mant * (double)mant > 0.5;
            }
            long X = e - fe->emax;
            X = X > lo ? X : lo;            /* np.clip: min(max(X, lo), hi), */
            X = X < hi ? X : hi;            /* hi wins when lo > hi */
            if (amax == 0) {
                X = 0;
            }
            float scale = ldexpf(1.0f, (int)X);
            uint32_t sc = enc(c, f0, scale, R_RNE, S_SATFINITE, "scale0");
            if (st[gi].poison && (sc = poison_scale(f0, unit)) == NO_NAN) {
                ret = poison_refused(c);
                goto done;
            }
            put_group(p0, gi, f0->w, sc);
            for (unsigned j = 0; j < k0; j++) {
                uint64_t i = gi * k0 + j;
                uint32_t q = 0;
                if (!st[gi].poison) {
                    q = enc(c, fe, val_at(&sx, i) / scale, R_RNE, es, "elem");
                }
                put_code(c, &sx, data, i, q);
            }
        }
    } else if (esr == GRIT_ESR_RATIO && s->levels == 1) {
        float maxe = (float)fe->max_finite;
        for (uint64_t gi = 0; gi < s->g0; gi++) {
            float amax = st[gi].amax, sv;
            int zero = amax == 0;
            uint32_t sc = project_scale(c, f0, amax / maxe, !zero, &sv, "scale0");
            if (zero) {
                sc = code_of_one(c, f0, "scale0");
                sv = fdec(f0, sc);
            }
            for (unsigned j = 0; j < k0; j++) {
                uint64_t i = gi * k0 + j;
                float y = st[gi].poison ? 0.0f : val_at(&sx, i) / sv;
                uint32_t q = enc(c, fe, y, R_RNE, es, "elem");
                put_code(c, &sx, data, i, st[gi].poison ? 0 : q);
            }
            if (st[gi].poison && (sc = poison_scale(f0, unit)) == NO_NAN) {
                ret = poison_refused(c);
                goto done;
            }
            put_group(p0, gi, f0->w, sc);
        }
    } else if (esr == GRIT_ESR_RATIO) {
        /* §10.3 generalised: a level-1 scale from the finite amax, level-0
         * scales relative to its stored value */
        if (any_poison && unit < 0) {
            ret = poison_refused(c);
            goto done;
        }
        float maxe = (float)fe->max_finite, max0 = (float)f0->max_finite;
        for (uint64_t h = 0; h < s->g1; h++) {
            ga[h] = 0.0f;
            p1f[h] = 0;
        }
        for (uint64_t gi = 0; gi < s->g0; gi++) {
            uint64_t h = l1_of(s, gi);
            float a = st[gi].amax;
            if (s->k1 == 0 && gi == 0) {
                ga[h] = a;
            } else {
                ga[h] = ga[h] > a ? ga[h] : a;
            }
            p1f[h] |= (unsigned char)st[gi].poison;
        }
        for (uint64_t h = 0; h < s->g1; h++) {
            int zero1 = ga[h] == 0;
            float t = ga[h] / maxe;
            float sT = t / max0;                          /* f32(f32(a/6)/448) */
            if (zero1) {
                sT = 1.0f;
            }
            float sv;
            c1[h] = project_scale(c, f1, sT, !zero1, &sv, "scale1");
            gb[h] = sv;
        }
        for (uint64_t gi = 0; gi < s->g0; gi++) {
            uint64_t h = l1_of(s, gi);
            float sT0 = gb[h];
            float t = st[gi].amax / maxe;
            float ratio = t / sT0;
            uint32_t sc = enc(c, f0, ratio, cp->er, es, "scale0");
            if (st[gi].amax == 0) {
                sc = code_of_one(c, f0, "scale0");
            }
            float S = sT0 * fdec(f0, sc);                 /* f32(sT · s0) */
            int zeroed = unit == 1 ? p1f[h] : st[gi].poison;
            for (unsigned j = 0; j < k0; j++) {
                uint64_t i = gi * k0 + j;
                float xv = val_at(&sx, i);
                if (!is_fin(xv)) {
                    xv = 0.0f;
                }
                float y = S == 0 ? (f2u(xv) >> 31 ? -0.0f : 0.0f) : xv / S;
                if (zeroed) {
                    y = 0.0f;
                }
                uint32_t q = enc(c, fe, y, R_RNE, es, "elem");
                put_code(c, &sx, data, i, zeroed ? 0 : q);
            }
            if (st[gi].poison && unit == 0) {
                sc = f0->nan_code;
            } else if (unit == 1 && p1f[h]) {
                sc = 0;
            }
            put_group(p0, gi, f0->w, sc);
        }
        for (uint64_t h = 0; h < s->g1; h++) {
            put_s1(p1, h, f1->w, (unit == 1 && p1f[h]) ? f1->nan_code : c1[h]);
        }
    } else if (!s->zl1) {
        /* one-level affine, zps=shared (docs/spec-decisions.md §9) */
        float Qe = (float)fe->top;
        float m1 = s->minus1 ? 1.0f : 0.0f;
        float zlo = (float)(fz->u ? 0.0 : -fz->max_finite) + m1;
        float zhi = (float)fz->max_finite + m1;
        for (uint64_t gi = 0; gi < s->g0; gi++) {
            gstat t = st[gi];
            int zero = t.lo == 0 && t.hi == 0;
            float diff = t.hi - t.lo;
            float step = diff / Qe, S;
            uint32_t sc = project_scale(c, f0, step, !zero, &S, "scale0");
            if (zero) {
                sc = code_of_one(c, f0, "scale0");
                S = fdec(f0, sc);
            }
            float nlo = -t.lo;
            float zq = t.poison ? 0.0f : nlo / S;
            float z = clipf(rintf(zq), zlo, zhi);
            uint32_t zc = enc(c, fz, z - m1, R_RNE, S_SATFINITE, "zp");
            float zd = fdec(fz, zc);
            if (s->minus1) {
                zd = zd + 1.0f;
            }
            for (unsigned j = 0; j < k0; j++) {
                uint64_t i = gi * k0 + j;
                float xv = val_at(&sx, i);
                if (!is_fin(xv)) {
                    xv = 0.0f;
                }
                float r = t.poison ? 0.0f : rintf(xv / S);
                uint32_t q = enc(c, fe, r + zd, R_RNE, es, "elem");
                put_code(c, &sx, data, i, t.poison ? 0 : q);
            }
            if (t.poison) {
                if ((sc = poison_scale(f0, unit)) == NO_NAN) {
                    ret = poison_refused(c);
                    goto done;
                }
                zc = 0;
            }
            put_group(p0, gi, f0->w, sc);
            put_group(aux, gi, fz->w, zc);
        }
    } else {
        /* two-level affine, zps=l1 (§10.2 generalised) */
        float Qe = (float)fe->top, Qs = (float)f0->top, Qz = (float)fz->top;
        if (any_poison && unit < 0) {
            ret = poison_refused(c);
            goto done;
        }
        for (uint64_t h = 0; h < s->g1; h++) {
            p1f[h] = 0;
        }
        for (uint64_t gi = 0; gi < s->g0; gi++) {
            uint64_t h = l1_of(s, gi);
            float diff = st[gi].hi - st[gi].lo;
            float step = diff / Qe, off = -st[gi].lo;
            fa[gi] = step;
            fb[gi] = off;
            int first = s->k1 == 0 ? gi == 0 : gi % s->k1 == 0;
            if (first) {
                ga[h] = step, gb[h] = off;
            } else {                          /* np.maximum.reduce */
                ga[h] = ga[h] > step ? ga[h] : step;
                gb[h] = gb[h] > off ? gb[h] : off;
            }
            p1f[h] |= (unsigned char)st[gi].poison;
        }
        if (s->g0 == 0) {
            ga[0] = 0.0f, gb[0] = 0.0f;
        }
        for (uint64_t h = 0; h < s->g1; h++) {
            c1[2 * h] = enc(c, f1, ga[h] / Qs, cp->er, es, "scale1");
            c1[2 * h + 1] = enc(c, f1, gb[h] / Qz, cp->er, es, "scale1");
        }
        for (uint64_t gi = 0; gi < s->g0; gi++) {
            uint64_t h = l1_of(s, gi);
            float dd = fdec(f1, c1[2 * h]), dmin = fdec(f1, c1[2 * h + 1]);
            float sc = dd == 0 ? 0.0f : clipf(rintf(fa[gi] / dd), 0.0f, Qs);
            float mm = dmin == 0 ? 0.0f : clipf(rintf(fb[gi] / dmin), 0.0f, Qz);
            if (sc != sc) {
                sc = 0.0f;
            }
            if (mm != mm) {
                mm = 0.0f;
            }
            float S = dd * sc, Z = dmin * mm;
            int pz = p1f[h] != 0;
            for (unsigned j = 0; j < k0; j++) {
                uint64_t i = gi * k0 + j;
                float xv = val_at(&sx, i);
                if (!is_fin(xv)) {
                    xv = 0.0f;
                }
                float sum = xv + Z;
                float qf = clipf(rintf(sum / S), 0.0f, Qe);
                if (S == 0 || qf != qf || pz) {
                    qf = 0.0f;
                }
                put_code(c, &sx, data, i, (uint32_t)qf);
            }
            put_group(p0, gi, f0->w, pz ? 0 : (uint32_t)sc);
            put_group(aux, gi, fz->w, pz ? 0 : (uint32_t)mm);
        }
        for (uint64_t h = 0; h < s->g1; h++) {
            int pz = p1f[h] != 0;
            put_s1(p1, 2 * h, f1->w, pz ? f1->nan_code : c1[2 * h]);
            put_s1(p1, 2 * h + 1, f1->w, pz ? 0 : c1[2 * h + 1]);
        }
    }
    if (c->failed) {
        ret = grit_fail(det, GRIT_GRADE_UNKNOWN, 0, -1, "x", NULL, c->failed_fmt,
                        "GradeUnknown: the %s format has no NaN encoding and a value to "
                        "project into it is NaN (§2.5 step 1).", c->failed_fmt);
    }
done:
    free(st);
    free(fa);
    free(fb);
    free(ga);
    free(gb);
    free(c1);
    free(p1f);
    free(kept);
    free(c);
    return ret == GRIT_OK ? grit_ok(det) : ret;
}
