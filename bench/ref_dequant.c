/*
 * A plain-C peer for bench/bench_native.py: reference scalar loops that
 * dequantize the ggml block layouts one block at a time -- no intrinsics,
 * no threads, the output written in element order.  Compiled by the
 * benchmark itself (cc -O2) and called through ctypes.
 *
 *   MXFP4 block (17 bytes, 32 values): one E8M0 exponent byte, then 16 bytes
 *     of E2M1 codes; byte j holds value j (low nibble) and value j + 16
 *     (high nibble).
 *   Q4_K super-block (144 bytes, 256 values): binary16 d and dmin, 12 bytes
 *     holding eight 6-bit scales and eight 6-bit mins, 128 bytes of 4-bit
 *     codes; each run of 64 values takes 32 bytes, low nibbles first (scale
 *     and min 2c) then high nibbles (scale and min 2c + 1);
 *     value = d · sc · q − dmin · m.
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
