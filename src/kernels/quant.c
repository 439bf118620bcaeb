/* quant.c — the dtype table, half-precision scalar conversions and the portable reference
 * quantizers/dequantizers of every block format.
 *
 * The reference quantizers reproduce ggml's *_ref quantizers operation for operation
 * (same float expressions, same rounding), so a row converted here is byte-identical to
 * what llama-quantize writes for the same f32 input. They are also the activation
 * quantizers of generic.c, and the SIMD quantizers are tested to be bit-exact with them.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/kernels_impl.h"

/* ---- type table ---------------------------------------------------------------------- */

#define T(id, nm, bs, bb, vdt, q) [id] = {nm, bs, bb, vdt, q}
static const clb_type_info type_table[CLB_DT_COUNT] = {
    T(CLB_DT_F32, "f32", 1, 4, CLB_DT_F32, false),
    T(CLB_DT_F16, "f16", 1, 2, CLB_DT_F32, false),
    T(CLB_DT_BF16, "bf16", 1, 2, CLB_DT_F32, false),
    T(CLB_DT_Q4_0, "q4_0", 32, 18, CLB_DT_Q8_0, true),
    /* ggml pairs Q4_1/Q5_1 with Q8_1 (which carries d*sum(q) as fp16); we use Q8_0 and
       compute sum(q) in the kernel: one activation format fewer, and the min term is
       exact instead of going through an fp16-rounded sum. */
    T(CLB_DT_Q4_1, "q4_1", 32, 20, CLB_DT_Q8_0, true),
    T(CLB_DT_Q5_0, "q5_0", 32, 22, CLB_DT_Q8_0, true),
    T(CLB_DT_Q5_1, "q5_1", 32, 24, CLB_DT_Q8_0, true),
    T(CLB_DT_Q8_0, "q8_0", 32, 34, CLB_DT_Q8_0, true),
    T(CLB_DT_Q8_1, "q8_1", 32, 36, CLB_DT_Q8_1, true),
    T(CLB_DT_Q2_K, "q2_k", 256, 84, CLB_DT_Q8_K, true),
    T(CLB_DT_Q3_K, "q3_k", 256, 110, CLB_DT_Q8_K, true),
    T(CLB_DT_Q4_K, "q4_k", 256, 144, CLB_DT_Q8_K, true),
    T(CLB_DT_Q5_K, "q5_k", 256, 176, CLB_DT_Q8_K, true),
    T(CLB_DT_Q6_K, "q6_k", 256, 210, CLB_DT_Q8_K, true),
    T(CLB_DT_Q8_K, "q8_k", 256, 292, CLB_DT_Q8_K, true),
    T(CLB_DT_IQ4_NL, "iq4_nl", 32, 18, CLB_DT_Q8_0, true),
    T(CLB_DT_IQ4_XS, "iq4_xs", 256, 136, CLB_DT_Q8_K, true),
    T(CLB_DT_MXFP4, "mxfp4", 32, 17, CLB_DT_Q8_0, true),
};
#undef T

const clb_type_info *clb_type(int dtype) {
    if (dtype < 0 || dtype >= CLB_DT_COUNT || !type_table[dtype].name) return NULL;
    return &type_table[dtype];
}

int clb_dtype_from_name(const char *name, clb_dtype *out) {
    if (!name) return -1;
    for (int i = 0; i < CLB_DT_COUNT; i++) {
        const char *n = type_table[i].name;
        if (!n) continue;
        size_t k = 0;
        while (n[k] && name[k] && tolower((unsigned char)name[k]) == n[k]) k++;
        if (!n[k] && !name[k]) {
            if (out) *out = (clb_dtype)i;
            return 0;
        }
    }
    return -1;
}

const char *clb_dtype_name(int dtype) {
    static _Thread_local char buf[32];
    const clb_type_info *t = clb_type(dtype);
    if (t) return t->name;
    snprintf(buf, sizeof(buf), "unknown(%d)", dtype);
    return buf;
}

bool clb_row_bytes(int dtype, int64_t n, uint64_t *out) {
    const clb_type_info *t = clb_type(dtype);
    if (!t || n < 0 || n % t->block_size != 0) return false;
    uint64_t bytes;
    if (!__builtin_mul_overflow((uint64_t)(n / t->block_size), (uint64_t)t->block_bytes, &bytes)) {
        if (out) *out = bytes;
        return true;
    }
    return false;
}

bool clb_dtype_is_weight(int dtype) {
    if (!clb_type(dtype)) return false;
    const clb_kernels *k = clb_kernels_generic();
    return k->vec_dot[dtype] != NULL && k->dequantize[dtype] != NULL;
}

bool clb_dtype_can_quantize(int dtype) {
    switch (dtype) {
    case CLB_DT_F32: case CLB_DT_F16: case CLB_DT_BF16:
    case CLB_DT_Q4_0: case CLB_DT_Q4_1: case CLB_DT_Q5_0: case CLB_DT_Q5_1: case CLB_DT_Q8_0:
    case CLB_DT_Q2_K: case CLB_DT_Q3_K: case CLB_DT_Q4_K: case CLB_DT_Q5_K: case CLB_DT_Q6_K:
    case CLB_DT_IQ4_NL: case CLB_DT_IQ4_XS: case CLB_DT_MXFP4:
        return true;
    default:
        return false;
    }
}

/* ---- scalar conversions -------------------------------------------------------------- */

static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float clb_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24, exact in float */
        float v = (float)mant * 0x1p-24f;
        return bits_f32(f32_bits(v) | sign);
    }
    if (exp == 31) return bits_f32(sign | 0x7f800000u | (mant << 13)); /* inf / nan */
    return bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t clb_fp32_to_fp16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return sign | 0x7e00;       /* nan -> quiet nan */
    if (ax >= 0x477ff000u) return sign | 0x7c00;      /* >= 65520 rounds to inf */
    if (ax >= 0x38800000u) {                          /* normal half */
        uint32_t h = (((ax >> 23) - 112) << 10) | ((ax >> 13) & 0x3ff);
        uint32_t rem = ax & 0x1fff;
        if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* carry may bump exponent */
        return (uint16_t)(sign | h);
    }
    uint32_t e = ax >> 23;
    if (e < 102) return sign; /* below 2^-25: rounds to zero */
    /* subnormal half: value = m * 2^(e-150), unit 2^-24 -> q = m >> (126 - e) */
    uint32_t m = (ax & 0x7fffff) | 0x800000;
    uint32_t s = 126 - e; /* 14..24 */
    uint32_t q = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    return (uint16_t)(sign | q);
}

float clb_bf16_to_fp32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t clb_fp32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet nan */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

float clb_e8m0_to_fp32_half(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    return bits_f32(bits);
}

const int8_t clb_kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                      1,    13,   25,  38,  53,  69,  89,  113};
const int8_t clb_kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* ---- dequantizers -------------------------------------------------------------------- */

void clb_dequant_f32(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * 4); }

void clb_dequant_f16(const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = clb_fp16_to_fp32(s[i]);
}

void clb_dequant_bf16(const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = clb_bf16_to_fp32(s[i]);
}

void clb_dequant_q4_0(const void *src, float *dst, int64_t n) {
    const clb_block_q4_0 *b = src;
    for (int64_t i = 0; i < n / CLB_QK; i++, dst += CLB_QK) {
        const float d = clb_fp16_to_fp32(b[i].d);
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)((b[i].qs[j] & 0xF) - 8) * d;
            dst[j + 16] = (float)((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void clb_dequant_q4_1(const void *src, float *dst, int64_t n) {
    const clb_block_q4_1 *b = src;
    for (int64_t i = 0; i < n / CLB_QK; i++, dst += CLB_QK) {
        const float d = clb_fp16_to_fp32(b[i].d), m = clb_fp16_to_fp32(b[i].m);
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)(b[i].qs[j] & 0xF) * d + m;
            dst[j + 16] = (float)(b[i].qs[j] >> 4) * d + m;
        }
    }
}

static inline uint32_t rd_le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

void clb_dequant_q5_0(const void *src, float *dst, int64_t n) {
    const clb_block_q5_0 *b = src;
    for (int64_t i = 0; i < n / CLB_QK; i++, dst += CLB_QK) {
        const float d = clb_fp16_to_fp32(b[i].d);
        const uint32_t qh = rd_le32(b[i].qh);
        for (int j = 0; j < 16; j++) {
            int q0 = (b[i].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
            int q1 = (b[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            dst[j] = (float)(q0 - 16) * d;
            dst[j + 16] = (float)(q1 - 16) * d;
        }
    }
}

void clb_dequant_q5_1(const void *src, float *dst, int64_t n) {
    const clb_block_q5_1 *b = src;
    for (int64_t i = 0; i < n / CLB_QK; i++, dst += CLB_QK) {
        const float d = clb_fp16_to_fp32(b[i].d), m = clb_fp16_to_fp32(b[i].m);
        const uint32_t qh = rd_le32(b[i].qh);
        for (int j = 0; j < 16; j++) {
            int q0 = (b[i].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
            int q1 = (b[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            dst[j] = (float)q0 * d + m;
            dst[j + 16] = (float)q1 * d + m;
        }
    }
}

void clb_dequant_q8_0(const void *src, float *dst, int64_t n) {
    const clb_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / CLB_QK; i++, dst += CLB_QK) {
        const float d = clb_fp16_to_fp32(b[i].d);
        for (int j = 0; j < 32; j++) dst[j] = (float)b[i].qs[j] * d;
    }
}

void clb_dequant_q8_1(const void *src, float *dst, int64_t n) {
    const clb_block_q8_1 *b = src;
    for (int64_t i = 0; i < n / CLB_QK; i++, dst += CLB_QK) {
        const float d = clb_fp16_to_fp32(b[i].d);
        for (int j = 0; j < 32; j++) dst[j] = (float)b[i].qs[j] * d;
    }
}

/* Q2_K: 256 weights in two halves of 128; in each half, 32 bytes of qs carry four 2-bit
   planes (shift 0, 2, 4, 6), and each plane is two sub-blocks of 16 (bytes 0..15, 16..31). */
void clb_dequant_q2_k(const void *src, float *dst, int64_t n) {
    const clb_block_q2_k *b = src;
    for (int64_t i = 0; i < n / CLB_QK_K; i++) {
        const float d = clb_fp16_to_fp32(b[i].d), dmin = clb_fp16_to_fp32(b[i].dmin);
        const uint8_t *q = b[i].qs;
        int is = 0;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int k = 0; k < 2; k++) {
                    const uint8_t sc = b[i].scales[is++];
                    const float dl = d * (float)(sc & 0xF), ml = dmin * (float)(sc >> 4);
                    for (int l = 0; l < 16; l++) *dst++ = dl * (float)((q[16 * k + l] >> shift) & 3) - ml;
                }
            }
        }
    }
}

void clb_q3k_scales(const uint8_t *p, int8_t out[16]) {
    /* scales 0..7: low 4 bits in p[0..7] (low nibble for 0..7, high nibble for 8..15 via
       p[j-8]); high 2 bits in p[8..11], two bits per scale. */
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? (p[j] & 0xF) : (p[j - 8] >> 4);
        int hi = (p[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
        out[j] = (int8_t)(lo | (hi << 4));
    }
}

/* Q3_K: same plane order as Q2_K; hmask bit (plane index + 4*half) is the high bit, and a
   clear high bit means subtract 4. */
void clb_dequant_q3_k(const void *src, float *dst, int64_t n) {
    const clb_block_q3_k *b = src;
    for (int64_t i = 0; i < n / CLB_QK_K; i++) {
        const float d = clb_fp16_to_fp32(b[i].d);
        int8_t sc[16];
        clb_q3k_scales(b[i].scales, sc);
        const uint8_t *q = b[i].qs;
        int is = 0;
        uint8_t m = 1;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m = (uint8_t)(m << 1)) {
                for (int k = 0; k < 2; k++) {
                    const float dl = d * (float)(sc[is++] - 32);
                    for (int l = 0; l < 16; l++) {
                        int v = ((q[16 * k + l] >> shift) & 3) - ((b[i].hmask[16 * k + l] & m) ? 0 : 4);
                        *dst++ = dl * (float)v;
                    }
                }
            }
        }
    }
}

/* Q4_K: four chunks of 64 weights; chunk c uses 32 bytes of qs, low nibbles are sub-block
   2c, high nibbles sub-block 2c+1. */
void clb_dequant_q4_k(const void *src, float *dst, int64_t n) {
    const clb_block_q4_k *b = src;
    for (int64_t i = 0; i < n / CLB_QK_K; i++) {
        const float d = clb_fp16_to_fp32(b[i].d), dmin = clb_fp16_to_fp32(b[i].dmin);
        const uint8_t *q = b[i].qs;
        for (int c = 0; c < 4; c++, q += 32) {
            uint8_t sc, m;
            clb_k4_scale_min(2 * c, b[i].scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            clb_k4_scale_min(2 * c + 1, b[i].scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            for (int l = 0; l < 32; l++) *dst++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *dst++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

/* Q5_K: as Q4_K; the high bit of weight l of sub-block s is bit s of qh[l]. */
void clb_dequant_q5_k(const void *src, float *dst, int64_t n) {
    const clb_block_q5_k *b = src;
    for (int64_t i = 0; i < n / CLB_QK_K; i++) {
        const float d = clb_fp16_to_fp32(b[i].d), dmin = clb_fp16_to_fp32(b[i].dmin);
        const uint8_t *q = b[i].qs;
        for (int c = 0; c < 4; c++, q += 32) {
            uint8_t sc, m;
            clb_k4_scale_min(2 * c, b[i].scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            clb_k4_scale_min(2 * c + 1, b[i].scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            const uint8_t u1 = (uint8_t)(1u << (2 * c)), u2 = (uint8_t)(2u << (2 * c));
            for (int l = 0; l < 32; l++)
                *dst++ = d1 * (float)((q[l] & 0xF) + ((b[i].qh[l] & u1) ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++)
                *dst++ = d2 * (float)((q[l] >> 4) + ((b[i].qh[l] & u2) ? 16 : 0)) - m2;
        }
    }
}

/* Q6_K: two halves of 128; in a half, ql[0..63] and qh[0..31]: weight l (0..31) of the four
   32-runs takes ql[l] low, ql[l+32] low, ql[l] high, ql[l+32] high and qh[l] bits 0-1,
   2-3, 4-5, 6-7; scales are per 16 weights. */
void clb_dequant_q6_k(const void *src, float *dst, int64_t n) {
    const clb_block_q6_k *b = src;
    for (int64_t i = 0; i < n / CLB_QK_K; i++) {
        const float d = clb_fp16_to_fp32(b[i].d);
        const uint8_t *ql = b[i].ql, *qh = b[i].qh;
        const int8_t *sc = b[i].scales;
        for (int half = 0; half < 2; half++, ql += 64, qh += 32, sc += 8, dst += 128) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                dst[l] = d * (float)sc[is] * (float)q1;
                dst[l + 32] = d * (float)sc[is + 2] * (float)q2;
                dst[l + 64] = d * (float)sc[is + 4] * (float)q3;
                dst[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}

void clb_dequant_q8_k(const void *src, float *dst, int64_t n) {
    const clb_block_q8_k *b = src;
    for (int64_t i = 0; i < n / CLB_QK_K; i++)
        for (int j = 0; j < CLB_QK_K; j++) *dst++ = b[i].d * (float)b[i].qs[j];
}

void clb_dequant_iq4_nl(const void *src, float *dst, int64_t n) {
    const clb_block_iq4_nl *b = src;
    for (int64_t i = 0; i < n / CLB_QK; i++, dst += CLB_QK) {
        const float d = clb_fp16_to_fp32(b[i].d);
        for (int j = 0; j < 16; j++) {
            dst[j] = d * (float)clb_kvalues_iq4nl[b[i].qs[j] & 0xF];
            dst[j + 16] = d * (float)clb_kvalues_iq4nl[b[i].qs[j] >> 4];
        }
    }
}

void clb_dequant_iq4_xs(const void *src, float *dst, int64_t n) {
    const clb_block_iq4_xs *b = src;
    for (int64_t i = 0; i < n / CLB_QK_K; i++) {
        const float d = clb_fp16_to_fp32(b[i].d);
        const uint8_t *qs = b[i].qs;
        for (int ib = 0; ib < 8; ib++, qs += 16, dst += 32) {
            const int ls = ((b[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) |
                           (((b[i].scales_h >> (2 * ib)) & 3) << 4);
            const float dl = d * (float)(ls - 32);
            for (int j = 0; j < 16; j++) {
                dst[j] = dl * (float)clb_kvalues_iq4nl[qs[j] & 0xF];
                dst[j + 16] = dl * (float)clb_kvalues_iq4nl[qs[j] >> 4];
            }
        }
    }
}

void clb_dequant_mxfp4(const void *src, float *dst, int64_t n) {
    const clb_block_mxfp4 *b = src;
    for (int64_t i = 0; i < n / CLB_QK; i++, dst += CLB_QK) {
        const float d = clb_e8m0_to_fp32_half(b[i].e);
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)clb_kvalues_mxfp4[b[i].qs[j] & 0xF] * d;
            dst[j + 16] = (float)clb_kvalues_mxfp4[b[i].qs[j] >> 4] * d;
        }
    }
}

/* ---- quantizers ---------------------------------------------------------------------- */

void clb_quant_f32(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * 4); }

void clb_quant_f16(const float *src, void *dst, int64_t n) {
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = clb_fp32_to_fp16(src[i]);
}

void clb_quant_bf16(const float *src, void *dst, int64_t n) {
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = clb_fp32_to_bf16(src[i]);
}

/* ggml truncates (v + offset) toward zero and clamps to the top code; for finite input v is
   never below 0 there. The clamp is done in float so a NaN input gives code 0 instead of an
   undefined conversion. */
static inline uint8_t trunc_code(float v, int top) {
    if (!(v >= 0.0f)) return 0;
    if (v >= (float)top) return (uint8_t)top;
    return (uint8_t)(int)v;
}

void clb_quant_q4_0(const float *src, void *dst, int64_t n) {
    clb_block_q4_0 *y = dst;
    for (int64_t i = 0; i < n / CLB_QK; i++, src += CLB_QK) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < CLB_QK; j++) {
            if (amax < fabsf(src[j])) {
                amax = fabsf(src[j]);
                max = src[j];
            }
        }
        const float d = max / -8;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = clb_fp32_to_fp16(d);
        for (int j = 0; j < 16; j++) {
            const uint8_t q0 = trunc_code(src[j] * id + 8.5f, 15);
            const uint8_t q1 = trunc_code(src[j + 16] * id + 8.5f, 15);
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void clb_quant_q4_1(const float *src, void *dst, int64_t n) {
    clb_block_q4_1 *y = dst;
    for (int64_t i = 0; i < n / CLB_QK; i++, src += CLB_QK) {
        float min = src[0], max = src[0];
        for (int j = 1; j < CLB_QK; j++) {
            if (src[j] < min) min = src[j];
            if (src[j] > max) max = src[j];
        }
        const float d = (max - min) / 15;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = clb_fp32_to_fp16(d);
        y[i].m = clb_fp32_to_fp16(min);
        for (int j = 0; j < 16; j++) {
            const uint8_t q0 = trunc_code((src[j] - min) * id + 0.5f, 15);
            const uint8_t q1 = trunc_code((src[j + 16] - min) * id + 0.5f, 15);
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

static inline void wr_le32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

void clb_quant_q5_0(const float *src, void *dst, int64_t n) {
    clb_block_q5_0 *y = dst;
    for (int64_t i = 0; i < n / CLB_QK; i++, src += CLB_QK) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < CLB_QK; j++) {
            if (amax < fabsf(src[j])) {
                amax = fabsf(src[j]);
                max = src[j];
            }
        }
        const float d = max / -16;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = clb_fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            const uint8_t q0 = trunc_code(src[j] * id + 16.5f, 31);
            const uint8_t q1 = trunc_code(src[j + 16] * id + 16.5f, 31);
            y[i].qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= (uint32_t)(q0 >> 4) << j;
            qh |= (uint32_t)(q1 >> 4) << (j + 16);
        }
        wr_le32(y[i].qh, qh);
    }
}

void clb_quant_q5_1(const float *src, void *dst, int64_t n) {
    clb_block_q5_1 *y = dst;
    for (int64_t i = 0; i < n / CLB_QK; i++, src += CLB_QK) {
        float min = src[0], max = src[0];
        for (int j = 1; j < CLB_QK; j++) {
            if (src[j] < min) min = src[j];
            if (src[j] > max) max = src[j];
        }
        const float d = (max - min) / 31;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = clb_fp32_to_fp16(d);
        y[i].m = clb_fp32_to_fp16(min);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            /* ggml converts without a clamp; (x-min)*id+0.5 <= 31.5 for finite input */
            const uint8_t q0 = trunc_code((src[j] - min) * id + 0.5f, 31);
            const uint8_t q1 = trunc_code((src[j + 16] - min) * id + 0.5f, 31);
            y[i].qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= (uint32_t)(q0 >> 4) << j;
            qh |= (uint32_t)(q1 >> 4) << (j + 16);
        }
        wr_le32(y[i].qh, qh);
    }
}

/* roundf (half away from zero), clamped in float to the int8 range (NaN -> -127). The SIMD
   Q8_0 quantizers reproduce exactly this. */
static inline int8_t round_q8(float v) {
    float r = roundf(v);
    if (!(r >= -127.0f)) r = -127.0f;
    if (r > 127.0f) r = 127.0f;
    return (int8_t)(int)r;
}

void clb_quant_q8_0(const float *src, void *dst, int64_t n) {
    clb_block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / CLB_QK; i++, src += CLB_QK) {
        float amax = 0.0f;
        for (int j = 0; j < CLB_QK; j++) amax = fmaxf(amax, fabsf(src[j]));
        const float d = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = clb_fp32_to_fp16(d);
        for (int j = 0; j < CLB_QK; j++) y[i].qs[j] = round_q8(src[j] * id);
    }
}

/* Q8_K as ggml's quantize_row_q8_K_ref: the scale maps the largest-magnitude value to -127
   (sign kept), rounding half to even. An all-zero block gets d = 0, q = 0, bsums = 0. */
void clb_quant_q8_k(const float *src, void *dst, int64_t n) {
    clb_block_q8_k *y = dst;
    for (int64_t i = 0; i < n / CLB_QK_K; i++, src += CLB_QK_K) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < CLB_QK_K; j++) {
            const float ax = fabsf(src[j]);
            if (ax > amax) {
                amax = ax;
                max = src[j];
            }
        }
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof(y[i]));
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < CLB_QK_K; j++) {
            float r = rintf(iscale * src[j]);
            if (!(r >= -128.0f)) r = -128.0f;
            if (r > 127.0f) r = 127.0f;
            y[i].qs[j] = (int8_t)(int)r;
        }
        for (int j = 0; j < 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += y[i].qs[16 * j + l];
            y[i].bsums[j] = (int16_t)s;
        }
        y[i].d = 1 / iscale;
    }
}

/* ---- dispatch by type ---------------------------------------------------------------- */

void clb_dequantize_row_ref(clb_dtype t, const void *src, float *dst, int64_t n) {
    const clb_kernels *k = clb_kernels_generic();
    if (t >= 0 && t < CLB_DT_COUNT && k->dequantize[t]) {
        k->dequantize[t](src, dst, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) dst[i] = 0.0f; /* unknown type: defined output */
}

void clb_quantize_row_ref(clb_dtype t, const float *src, void *dst, int64_t n) {
    switch (t) {
    case CLB_DT_F32: clb_quant_f32(src, dst, n); break;
    case CLB_DT_F16: clb_quant_f16(src, dst, n); break;
    case CLB_DT_BF16: clb_quant_bf16(src, dst, n); break;
    case CLB_DT_Q4_0: clb_quant_q4_0(src, dst, n); break;
    case CLB_DT_Q4_1: clb_quant_q4_1(src, dst, n); break;
    case CLB_DT_Q5_0: clb_quant_q5_0(src, dst, n); break;
    case CLB_DT_Q5_1: clb_quant_q5_1(src, dst, n); break;
    case CLB_DT_Q8_0: clb_quant_q8_0(src, dst, n); break;
    case CLB_DT_Q8_K: clb_quant_q8_k(src, dst, n); break;
    case CLB_DT_Q2_K: clb_quant_q2_k(src, dst, n); break;
    case CLB_DT_Q3_K: clb_quant_q3_k(src, dst, n); break;
    case CLB_DT_Q4_K: clb_quant_q4_k(src, dst, n); break;
    case CLB_DT_Q5_K: clb_quant_q5_k(src, dst, n); break;
    case CLB_DT_Q6_K: clb_quant_q6_k(src, dst, n); break;
    case CLB_DT_IQ4_NL: clb_quant_iq4_nl(src, dst, n); break;
    case CLB_DT_IQ4_XS: clb_quant_iq4_xs(src, dst, n); break;
    case CLB_DT_MXFP4: clb_quant_mxfp4(src, dst, n); break;
    default: break; /* not producible: callers check clb_dtype_can_quantize */
    }
}
