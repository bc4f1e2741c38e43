/*
 * A plain-C peer for bench/bench_native.py and bench/bench_ggml.py: reference
 * scalar loops that dequantize the ggml block layouts one block at a time --
 * no intrinsics, no threads, the output written in element order, each one
 * written from ggml's dequantize_row_* (ggml-quants.c) with the same
 * arithmetic in the same order.  Compiled by the benchmark itself
 * (cc -O2 -ffp-contract=off, so that no multiply-add is fused) and called
 * through ctypes as f(blocks, nblocks, out).
 *
 *   MXFP4 block (17 bytes, 32 values): one E8M0 exponent byte, then 16 bytes
 *     of E2M1 codes; byte j holds value j (low nibble) and value j + 16
 *     (high nibble).
 *   Q4_K super-block (144 bytes, 256 values): binary16 d and dmin, 12 bytes
 *     holding eight 6-bit scales and eight 6-bit mins, 128 bytes of 4-bit
 *     codes; each run of 64 values takes 32 bytes, low nibbles first (scale
 *     and min 2c) then high nibbles (scale and min 2c + 1);
 *     value = d · sc · q − dmin · m.
 *   The others (ggml's block structs; "halves" as MXFP4's nibbles, "crumbs":
 *   per 128 values 32 bytes, bits 2s..2s+1 of byte l hold value 32s + l):
 *   Q8_0 (34 B / 32)   binary16 d, int8 q[32];                 y = q · d
 *   NVFP4 (36 B / 64)  4 UE4M3 d (one per 16), 4 × 8 B halves; ggml reads d
 *                      unsigned (bit 7 ignored), 0 and 0x7F as 0, times 0.5,
 *                      and the codes through the doubled E2M1 integers
 *   Q4_0 (18 B / 32)   d, halves;                  y = (q − 8) · d
 *   Q4_1 (20 B / 32)   d, m, halves;               y = q · d + m
 *   Q5_0 (22 B / 32)   d, u32 qh, halves;          y = (q | h << 4 − 16) · d
 *   Q5_1 (24 B / 32)   d, m, qh, halves;           y = (q | h << 4) · d + m
 *   Q2_K (84 B / 256)  scales[16] (sc | m << 4), crumbs[64], d, dmin;
 *                      y = (d · sc) · q − dmin · m
 *   Q5_K (176 B / 256) d, dmin, 12 B scales (as Q4_K), qh[32], qs[128];
 *                      y = (d · sc) · (q + 16 h) − dmin · m
 *   Q6_K (210 B / 256) ql[128], qh[64], int8 scales[16], d;
 *                      y = d · sc · (q − 32)
 *   Q8_K (292 B / 256) binary32 d, int8 q[256], int16 bsums[16]; y = d · q
 *   TQ2_0 (66 B / 256) crumbs[64], d;              y = (q − 1) · d
 */
#include <stdint.h>
#include <string.h>

static float
bits_to_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static float
half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1F, man = h & 0x3FF;
    if (exp == 0x1F) {
        return bits_to_float(sign | 0x7F800000u | (man << 13));
    }
    if (exp == 0) {
        float v = (float)man * (1.0f / 16777216.0f);    /* man · 2^-24 */
        return sign ? -v : v;
    }
    return bits_to_float(sign | ((exp + 112) << 23) | (man << 13));
}

static float
e8m0_to_float(uint8_t e)
{
    if (e == 0xFF) {
        return bits_to_float(0x7FC00000u);
    }
    if (e == 0) {
        return bits_to_float(0x00400000u);              /* 2^-127, subnormal */
    }
    return bits_to_float((uint32_t)e << 23);
}

static const float e2m1_values[16] = {
    0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
    -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f,
};

void
ref_dequant_mxfp4(const uint8_t *blocks, int64_t nblocks, float *out)
{
    for (int64_t b = 0; b < nblocks; b++) {
        const uint8_t *blk = blocks + 17 * b;
        float scale = e8m0_to_float(blk[0]);
        float *y = out + 32 * b;
        for (int j = 0; j < 16; j++) {
            uint8_t q = blk[1 + j];
            y[j] = e2m1_values[q & 0x0F] * scale;
            y[j + 16] = e2m1_values[q >> 4] * scale;
        }
    }
}

/* the 6-bit scale and min of sub-block j from the 12 packed bytes */
static void
q4k_scale_min(const uint8_t *s, int j, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (uint8_t)((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4));
        *m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

void
ref_dequant_q4k(const uint8_t *blocks, int64_t nblocks, float *out)
{
    for (int64_t b = 0; b < nblocks; b++) {
        const uint8_t *blk = blocks + 144 * b;
        float d = half_to_float((uint16_t)(blk[0] | blk[1] << 8));
        float dmin = half_to_float((uint16_t)(blk[2] | blk[3] << 8));
        const uint8_t *scales = blk + 4, *qs = blk + 16;
        float *y = out + 256 * b;
        for (int c = 0; c < 4; c++) {
            uint8_t sc0, m0, sc1, m1;
            q4k_scale_min(scales, 2 * c, &sc0, &m0);
            q4k_scale_min(scales, 2 * c + 1, &sc1, &m1);
            float d0 = d * sc0, z0 = dmin * m0, d1 = d * sc1, z1 = dmin * m1;
            for (int l = 0; l < 32; l++) {
                y[l] = d0 * (float)(qs[l] & 0x0F) - z0;
                y[l + 32] = d1 * (float)(qs[l] >> 4) - z1;
            }
            qs += 32;
            y += 64;
        }
    }
}

static uint16_t
le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

void
ref_dequant_q8_0(const uint8_t *blocks, int64_t nblocks, float *out)
{
    for (int64_t b = 0; b < nblocks; b++) {
        const uint8_t *blk = blocks + 34 * b;
        const float d = half_to_float(le16(blk));
        const int8_t *qs = (const int8_t *)(blk + 2);
        for (int j = 0; j < 32; j++) {
            out[32 * b + j] = qs[j] * d;
        }
    }
}

/* ggml_ue4m3_to_fp32 with the kvalues' 0.5 */
static float
ue4m3_half(uint8_t x)
{
    if (x == 0 || x == 0x7F) {
        return 0.0f;
    }
    int e = (x >> 3) & 0xF, m = x & 7;
    float raw = e == 0 ? (float)m * (1.0f / 512.0f)
                       : (1.0f + (float)m / 8.0f) * bits_to_float((uint32_t)(e - 7 + 127) << 23);
    return raw * 0.5f;
}

static const int8_t kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

void
ref_dequant_nvfp4(const uint8_t *blocks, int64_t nblocks, float *out)
{
    for (int64_t b = 0; b < nblocks; b++) {
        const uint8_t *blk = blocks + 36 * b;
        for (int s = 0; s < 4; s++) {
            const float d = ue4m3_half(blk[s]);
            const uint8_t *qs = blk + 4 + 8 * s;
            float *y = out + 64 * b + 16 * s;
            for (int j = 0; j < 8; j++) {
                y[j] = kvalues_mxfp4[qs[j] & 0x0F] * d;
                y[j + 8] = kvalues_mxfp4[qs[j] >> 4] * d;
            }
        }
    }
}

void
ref_dequant_q4_0(const uint8_t *blocks, int64_t nblocks, float *out)
{
    for (int64_t b = 0; b < nblocks; b++) {
        const uint8_t *blk = blocks + 18 * b, *qs = blk + 2;
        const float d = half_to_float(le16(blk));
        for (int j = 0; j < 16; j++) {
            const int x0 = (qs[j] & 0x0F) - 8, x1 = (qs[j] >> 4) - 8;
            out[32 * b + j] = x0 * d;
            out[32 * b + j + 16] = x1 * d;
        }
    }
}

void
ref_dequant_q4_1(const uint8_t *blocks, int64_t nblocks, float *out)
{
    for (int64_t b = 0; b < nblocks; b++) {
        const uint8_t *blk = blocks + 20 * b, *qs = blk + 4;
        const float d = half_to_float(le16(blk)), m = half_to_float(le16(blk + 2));
        for (int j = 0; j < 16; j++) {
            const int x0 = qs[j] & 0x0F, x1 = qs[j] >> 4;
            out[32 * b + j] = x0 * d + m;
            out[32 * b + j + 16] = x1 * d + m;
        }
    }
}

void
ref_dequant_q5_0(const uint8_t *blocks, int64_t nblocks, float *out)
{
    for (int64_t b = 0; b < nblocks; b++) {
        const uint8_t *blk = blocks + 22 * b, *qs = blk + 6;
        const float d = half_to_float(le16(blk));
        uint32_t qh;
        memcpy(&qh, blk + 2, sizeof qh);
        for (int j = 0; j < 16; j++) {
            const uint8_t xh_0 = ((qh >> (j + 0)) << 4) & 0x10;
            const uint8_t xh_1 = ((qh >> (j + 12))) & 0x10;
            const int32_t x0 = ((qs[j] & 0x0F) | xh_0) - 16;
            const int32_t x1 = ((qs[j] >> 4) | xh_1) - 16;
            out[32 * b + j] = x0 * d;
            out[32 * b + j + 16] = x1 * d;
        }
    }
}

void
ref_dequant_q5_1(const uint8_t *blocks, int64_t nblocks, float *out)
{
    for (int64_t b = 0; b < nblocks; b++) {
        const uint8_t *blk = blocks + 24 * b, *qs = blk + 8;
        const float d = half_to_float(le16(blk)), m = half_to_float(le16(blk + 2));
        uint32_t qh;
        memcpy(&qh, blk + 4, sizeof qh);
        for (int j = 0; j < 16; j++) {
            const uint8_t xh_0 = ((qh >> (j + 0)) << 4) & 0x10;
            const uint8_t xh_1 = ((qh >> (j + 12))) & 0x10;
            const int x0 = (qs[j] & 0x0F) | xh_0, x1 = (qs[j] >> 4) | xh_1;
            out[32 * b + j] = x0 * d + m;
            out[32 * b + j + 16] = x1 * d + m;
        }
    }
}

void
ref_dequant_q2_k(const uint8_t *blocks, int64_t nblocks, float *y)
{
    for (int64_t b = 0; b < nblocks; b++) {
        const uint8_t *blk = blocks + 84 * b, *scales = blk, *q = blk + 16;
        const float d = half_to_float(le16(blk + 80)), min = half_to_float(le16(blk + 82));
        int is = 0;
        for (int n = 0; n < 256; n += 128) {
            int shift = 0;
            for (int j = 0; j < 4; ++j) {
                uint8_t sc = scales[is++];
                float dl = d * (sc & 0xF), ml = min * (sc >> 4);
                for (int l = 0; l < 16; ++l) {
                    *y++ = dl * ((int8_t)((q[l] >> shift) & 3)) - ml;
                }
                sc = scales[is++];
                dl = d * (sc & 0xF);
                ml = min * (sc >> 4);
                for (int l = 0; l < 16; ++l) {
                    *y++ = dl * ((int8_t)((q[l + 16] >> shift) & 3)) - ml;
                }
                shift += 2;
            }
            q += 32;
        }
    }
}

void
ref_dequant_q5_k(const uint8_t *blocks, int64_t nblocks, float *y)
{
    for (int64_t b = 0; b < nblocks; b++) {
        const uint8_t *blk = blocks + 176 * b, *scales = blk + 4, *qh = blk + 16, *ql = blk + 48;
        const float d = half_to_float(le16(blk)), min = half_to_float(le16(blk + 2));
        int is = 0;
        uint8_t sc, m, u1 = 1, u2 = 2;
        for (int j = 0; j < 256; j += 64) {
            q4k_scale_min(scales, is + 0, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            q4k_scale_min(scales, is + 1, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; ++l) {
                *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            }
            for (int l = 0; l < 32; ++l) {
                *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            }
            ql += 32;
            is += 2;
            u1 <<= 2;
            u2 <<= 2;
        }
    }
}

void
ref_dequant_q6_k(const uint8_t *blocks, int64_t nblocks, float *y)
{
    for (int64_t b = 0; b < nblocks; b++) {
        const uint8_t *blk = blocks + 210 * b, *ql = blk, *qh = blk + 128;
        const int8_t *sc = (const int8_t *)(blk + 192);
        const float d = half_to_float(le16(blk + 208));
        for (int n = 0; n < 256; n += 128) {
            for (int l = 0; l < 32; ++l) {
                int is = l / 16;
                const int8_t q1 = (int8_t)((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int8_t q2 = (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int8_t q3 = (int8_t)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int8_t q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * sc[is + 0] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
            y += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

void
ref_dequant_q8_k(const uint8_t *blocks, int64_t nblocks, float *out)
{
    for (int64_t b = 0; b < nblocks; b++) {
        const uint8_t *blk = blocks + 292 * b;
        float d;
        memcpy(&d, blk, sizeof d);
        const int8_t *qs = (const int8_t *)(blk + 4);
        for (int j = 0; j < 256; ++j) {
            out[256 * b + j] = d * qs[j];
        }
    }
}

void
ref_dequant_tq2_0(const uint8_t *blocks, int64_t nblocks, float *y)
{
    for (int64_t b = 0; b < nblocks; b++) {
        const uint8_t *blk = blocks + 66 * b, *qs = blk;
        const float d = half_to_float(le16(blk + 64));
        for (size_t j = 0; j < 64; j += 32) {
            for (size_t l = 0; l < 4; ++l) {
                for (size_t m = 0; m < 32; ++m) {
                    int8_t q = (qs[j + m] >> (l * 2)) & 3;
                    *y++ = (float)(q - 1) * d;
                }
            }
        }
    }
}
