/*
 * §2: the format word -- legality (docs/spec-decisions.md "format words",
 * as grit/formats.py fmt_classify), fmt_decode (§2.4) and fmt_encode_rne
 * with satfinite (§2.5).
 */
#include "lib.h"

#include <math.h>

#define P_EXPONENT_ONLY 0
#define P_INTEGER 31
#define NAN_ONES 1
#define NAN_IEEE 2

int
grit_fmt_valid(grit_fmt_t word)
{
    unsigned w = fmt_w(word), p = fmt_p(word), inf = fmt_has_inf(word), ne = fmt_nan_enc(word);
    unsigned sz = fmt_szero(word), u = fmt_unsigned(word);
    if (word == 0 || fmt_bias_ovr(word) || ne == 3 || w == 1) {
        return 0;
    }
    if (p == P_INTEGER) {
        return !(inf || ne || sz) && w <= 24;
    }
    if (p == P_EXPONENT_ONLY) {
        if (!u || inf || sz || ne == NAN_IEEE || w > 8) {
            return 0;
        }
        int top = (1 << w) - 1 - (ne ? 1 : 0);
        return top - ((1 << (w - 1)) - 1) <= 127;
    }
    int m_bits = (int)p - 1;
    int e_bits = (int)w - (u ? 0 : 1) - m_bits;
    if (e_bits < 1 || m_bits > 23 || sz != (u ? 0u : 1u) || (inf && ne != NAN_IEEE)
        || (ne == NAN_IEEE && m_bits == 0)) {
        return 0;
    }
    if (e_bits > 9) {
        return 0;                                  /* emax past 127 below */
    }
    int bias = (1 << (e_bits - 1)) - 1, top = (1 << e_bits) - 1, emax, mmax;
    if (inf) {
        emax = top - 1 - bias, mmax = (1 << m_bits) - 1;
    } else if (ne == NAN_IEEE) {
        emax = top - bias, mmax = 0;
    } else if (ne == NAN_ONES) {
        emax = top - bias, mmax = (1 << m_bits) - 2;
        if (mmax < 0) {
            emax = top - 1 - bias, mmax = 0;
        }
    } else {
        emax = top - bias, mmax = (1 << m_bits) - 1;
    }
    if (emax > 127 || (emax == 127 && mmax > (1 << m_bits) - 1)) {
        return 0;
    }
    return 1 - bias - m_bits >= -149;
}

float
grit_fmt_decode(grit_fmt_t word, uint32_t code)
{
    const float nan = u2f(CANON_NAN);
    unsigned w = fmt_w(word), p = fmt_p(word), u = fmt_unsigned(word), ne = fmt_nan_enc(word);
    uint64_t ncodes = UINT64_C(1) << w;
    uint64_t c = code & (ncodes - 1);
    if (p == P_INTEGER) {
        if (!u && c >= ncodes / 2) {
            return (float)((double)c - (double)ncodes);
        }
        return (float)(double)c;
    }
    if (p == P_EXPONENT_ONLY) {
        if (ne != 0 && c == ncodes - 1) {
            return nan;
        }
        return (float)ldexp(1.0, (int)c - (int)(ncodes / 2 - 1));
    }
    int m_bits = (int)p - 1;
    int e_bits = (int)w - (u ? 0 : 1) - m_bits;
    if (e_bits < 1 || e_bits > 30) {
        return nan;                                /* no such format (grit_fmt_valid) */
    }
    int bias = (1 << (e_bits - 1)) - 1;
    uint64_t m = c & ((UINT64_C(1) << m_bits) - 1);
    uint64_t e = (c >> m_bits) & ((UINT64_C(1) << e_bits) - 1);
    uint64_t top = (UINT64_C(1) << e_bits) - 1;
    int s = u ? 0 : (int)((c >> (m_bits + e_bits)) & 1);
    double v;
    if (e == top && fmt_has_inf(word)) {
        if (m != 0) {
            return nan;
        }
        v = HUGE_VAL;
    } else if (e == top && ne == NAN_ONES && m == (UINT64_C(1) << m_bits) - 1) {
        return nan;
    } else if (e == top && ne == NAN_IEEE && m != 0) {
        return nan;
    } else if (e == 0) {
        v = ldexp((double)m, 1 - bias - m_bits);
    } else {
        v = ldexp((double)((UINT64_C(1) << m_bits) + m), (int)e - bias - m_bits);
    }
    float f = (float)v;
    return s ? -f : f;
}

/* the sign-cleared codes that decode finite are [0, top], in increasing
 * magnitude, for every legal float or exponent-only word (§2.5's ladder):
 * top is the all-ones code less the codes §2.4 makes NaN or infinite */
static uint32_t
ladder_top(grit_fmt_t word)
{
    unsigned w = fmt_w(word), p = fmt_p(word), u = fmt_unsigned(word), ne = fmt_nan_enc(word);
    uint32_t all = (uint32_t)((UINT64_C(1) << (u || p == P_EXPONENT_ONLY ? w : w - 1)) - 1);
    if (p == P_EXPONENT_ONLY) {
        return ne ? all - 1 : all;
    }
    unsigned m_bits = p - 1;
    uint32_t mmask = (uint32_t)((UINT64_C(1) << m_bits) - 1);
    if (fmt_has_inf(word)) {
        return all - mmask - 1;                     /* exponent all-ones less one, mantissa full */
    }
    if (ne == NAN_IEEE) {
        return all - mmask;                         /* the top exponent with mantissa 0 */
    }
    return ne == NAN_ONES ? all - 1 : all;
}

static int64_t
encode_int(grit_fmt_t word, float x)
{
    unsigned w = fmt_w(word);
    double lo = fmt_unsigned(word) ? 0.0 : -(double)((INT64_C(1) << (w - 1)) - 1);
    double hi = fmt_unsigned(word) ? (double)((INT64_C(1) << w) - 1)
                                   : (double)((INT64_C(1) << (w - 1)) - 1);
    double a = fabs((double)x), v;
    if (isinf(x)) {
        v = x > 0 ? hi : lo;
    } else {
        double fl = floor(a), frac = a - fl;
        double r = (frac > 0.5 || (frac == 0.5 && fmod(fl, 2.0) == 1.0)) ? fl + 1.0 : fl;
        v = x < 0 ? -r : r;
        v = v < lo ? lo : v > hi ? hi : v;
    }
    int64_t iv = (int64_t)v;
    return (int64_t)((uint64_t)iv & ((UINT64_C(1) << w) - 1));
}

int64_t
grit_fmt_encode_rne(grit_fmt_t word, float x)
{
    if (!grit_fmt_valid(word)) {
        return -1;
    }
    unsigned w = fmt_w(word), p = fmt_p(word), u = fmt_unsigned(word), ne = fmt_nan_enc(word);
    if (p == P_INTEGER) {
        return x != x ? -1 : encode_int(word, x);
    }
    if (x != x) {
        if (p == P_EXPONENT_ONLY) {
            return ne == NAN_ONES ? (int64_t)((UINT64_C(1) << w) - 1) : -1;
        }
        int m_bits = (int)p - 1, e_bits = (int)w - (u ? 0 : 1) - m_bits;
        int64_t top = (int64_t)(((UINT64_C(1) << e_bits) - 1) << m_bits);
        if (ne == NAN_ONES) {
            return top | ((INT64_C(1) << m_bits) - 1);
        }
        if (ne == NAN_IEEE) {
            return top | (INT64_C(1) << (m_bits - 1));
        }
        return -1;
    }
    int neg = (f2u(x) >> 31) != 0;
    double a = fabs((double)x);
    uint32_t lo = 0, hi = ladder_top(word);
    int64_t code;
    double top_mag = (double)grit_fmt_decode(word, hi);
    if (a >= top_mag) {
        code = hi;                                   /* satfinite; ±∞ too */
    } else if (a <= (double)grit_fmt_decode(word, 0)) {
        code = 0;
    } else {
        while (hi - lo > 1) {                        /* ladder[lo] <= a < ladder[hi] */
            uint32_t mid = lo + (hi - lo) / 2;
            if ((double)grit_fmt_decode(word, mid) <= a) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        double m0 = grit_fmt_decode(word, lo), m1 = grit_fmt_decode(word, hi);
        double d_lo = a - m0, d_hi = m1 - a;         /* exact in binary64 */
        code = (a == m0) ? lo : (d_hi < d_lo || (d_hi == d_lo && (lo & 1))) ? hi : lo;
    }
    if (neg && !u && p != P_EXPONENT_ONLY) {
        code |= INT64_C(1) << (w - 1);
    }
    return code;
}
