/* generic.c — portable C kernels: the fallback on any CPU and the oracle the SIMD kernels
 * are tested against.
 *
 * Block dot products follow ggml's accumulation: an exact int32 sum per (sub-)block, then
 * times the float scales, accumulated in float. Each one equals "dequantize both rows, then
 * dot" up to float rounding (tests/unit/test_kernels.c checks that). Float rows accumulate
 * in double.
 *
 * Activation formats: Q8_0 for the 32-weight formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
 * IQ4_NL, MXFP4), Q8_K for the 256-weight formats (Q2_K..Q6_K, IQ4_XS). For Q4_1/Q5_1
 * (x = d*q + m) the min term needs sum(qx) per block, which is computed here from the Q8_0
 * quants (ggml instead stores it, fp16-rounded, in Q8_1).
 */
#include <math.h>
#include <string.h>

#include "kernels/kernels_impl.h"

/* ---- float rows ---------------------------------------------------------------------- */

static void vec_dot_f32(int64_t n, float *out, const void *w, const void *x) {
    const float *a = w, *b = x;
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)(a[i] * b[i]);
    *out = (float)s;
}

static void axpy_f32(int64_t n, float a, const float *x, float *y) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

static void vec_dot_f16(int64_t n, float *out, const void *w, const void *x) {
    const uint16_t *a = w;
    const float *b = x;
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)(clb_fp16_to_fp32(a[i]) * b[i]);
    *out = (float)s;
}

static void vec_dot_bf16(int64_t n, float *out, const void *w, const void *x) {
    const uint16_t *a = w;
    const float *b = x;
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)(clb_bf16_to_fp32(a[i]) * b[i]);
    *out = (float)s;
}

/* ---- 32-weight blocks x Q8_0 --------------------------------------------------------- */

static void vec_dot_q8_0(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q8_0 *a = w, *b = x;
    float s = 0.0f;
    for (int64_t i = 0; i < n / CLB_QK; i++) {
        int32_t sumi = 0;
        for (int j = 0; j < 32; j++) sumi += a[i].qs[j] * b[i].qs[j];
        s += (float)sumi * (clb_fp16_to_fp32(a[i].d) * clb_fp16_to_fp32(b[i].d));
    }
    *out = s;
}

static void vec_dot_q4_0(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q4_0 *a = w;
    const clb_block_q8_0 *b = x;
    float s = 0.0f;
    for (int64_t i = 0; i < n / CLB_QK; i++) {
        int32_t sumi = 0;
        for (int j = 0; j < 16; j++) {
            sumi += ((a[i].qs[j] & 0xF) - 8) * b[i].qs[j];
            sumi += ((a[i].qs[j] >> 4) - 8) * b[i].qs[j + 16];
        }
        s += (float)sumi * (clb_fp16_to_fp32(a[i].d) * clb_fp16_to_fp32(b[i].d));
    }
    *out = s;
}

static inline uint32_t rd_le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static void vec_dot_q4_1(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q4_1 *a = w;
    const clb_block_q8_0 *b = x;
    float s = 0.0f;
    for (int64_t i = 0; i < n / CLB_QK; i++) {
        int32_t sumi = 0, sumx = 0;
        for (int j = 0; j < 16; j++) {
            sumi += (a[i].qs[j] & 0xF) * b[i].qs[j] + (a[i].qs[j] >> 4) * b[i].qs[j + 16];
            sumx += b[i].qs[j] + b[i].qs[j + 16];
        }
        const float dx = clb_fp16_to_fp32(b[i].d);
        s += (float)sumi * (clb_fp16_to_fp32(a[i].d) * dx) + (float)sumx * (clb_fp16_to_fp32(a[i].m) * dx);
    }
    *out = s;
}

static void vec_dot_q5_0(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q5_0 *a = w;
    const clb_block_q8_0 *b = x;
    float s = 0.0f;
    for (int64_t i = 0; i < n / CLB_QK; i++) {
        const uint32_t qh = rd_le32(a[i].qh);
        int32_t sumi = 0;
        for (int j = 0; j < 16; j++) {
            const int q0 = ((a[i].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4)) - 16;
            const int q1 = ((a[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4)) - 16;
            sumi += q0 * b[i].qs[j] + q1 * b[i].qs[j + 16];
        }
        s += (float)sumi * (clb_fp16_to_fp32(a[i].d) * clb_fp16_to_fp32(b[i].d));
    }
    *out = s;
}

static void vec_dot_q5_1(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q5_1 *a = w;
    const clb_block_q8_0 *b = x;
    float s = 0.0f;
    for (int64_t i = 0; i < n / CLB_QK; i++) {
        const uint32_t qh = rd_le32(a[i].qh);
        int32_t sumi = 0, sumx = 0;
        for (int j = 0; j < 16; j++) {
            const int q0 = (a[i].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
            const int q1 = (a[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            sumi += q0 * b[i].qs[j] + q1 * b[i].qs[j + 16];
            sumx += b[i].qs[j] + b[i].qs[j + 16];
        }
        const float dx = clb_fp16_to_fp32(b[i].d);
        s += (float)sumi * (clb_fp16_to_fp32(a[i].d) * dx) + (float)sumx * (clb_fp16_to_fp32(a[i].m) * dx);
    }
    *out = s;
}

static void vec_dot_iq4_nl(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_iq4_nl *a = w;
    const clb_block_q8_0 *b = x;
    float s = 0.0f;
    for (int64_t i = 0; i < n / CLB_QK; i++) {
        int32_t sumi = 0;
        for (int j = 0; j < 16; j++) {
            sumi += clb_kvalues_iq4nl[a[i].qs[j] & 0xF] * b[i].qs[j];
            sumi += clb_kvalues_iq4nl[a[i].qs[j] >> 4] * b[i].qs[j + 16];
        }
        s += (float)sumi * (clb_fp16_to_fp32(a[i].d) * clb_fp16_to_fp32(b[i].d));
    }
    *out = s;
}

static void vec_dot_mxfp4(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_mxfp4 *a = w;
    const clb_block_q8_0 *b = x;
    float s = 0.0f;
    for (int64_t i = 0; i < n / CLB_QK; i++) {
        int32_t sumi = 0;
        for (int j = 0; j < 16; j++) {
            sumi += clb_kvalues_mxfp4[a[i].qs[j] & 0xF] * b[i].qs[j];
            sumi += clb_kvalues_mxfp4[a[i].qs[j] >> 4] * b[i].qs[j + 16];
        }
        s += (float)sumi * (clb_e8m0_to_fp32_half(a[i].e) * clb_fp16_to_fp32(b[i].d));
    }
    *out = s;
}

/* ---- 256-weight blocks x Q8_K -------------------------------------------------------- */

static void vec_dot_q2_k(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q2_k *a = w;
    const clb_block_q8_k *b = x;
    float s = 0.0f;
    for (int64_t i = 0; i < n / CLB_QK_K; i++) {
        const uint8_t *q = a[i].qs;
        const int8_t *qx = b[i].qs;
        int32_t summ = 0, isum = 0;
        for (int j = 0; j < 16; j++) summ += (a[i].scales[j] >> 4) * b[i].bsums[j];
        int is = 0;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int k = 0; k < 2; k++, qx += 16) {
                    int32_t t = 0;
                    for (int l = 0; l < 16; l++) t += ((q[16 * k + l] >> shift) & 3) * qx[l];
                    isum += (a[i].scales[is++] & 0xF) * t;
                }
            }
        }
        const float dall = b[i].d * clb_fp16_to_fp32(a[i].d);
        const float dmin = b[i].d * clb_fp16_to_fp32(a[i].dmin);
        s += dall * (float)isum - dmin * (float)summ;
    }
    *out = s;
}

static void vec_dot_q3_k(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q3_k *a = w;
    const clb_block_q8_k *b = x;
    float s = 0.0f;
    for (int64_t i = 0; i < n / CLB_QK_K; i++) {
        int8_t sc[16];
        clb_q3k_scales(a[i].scales, sc);
        const uint8_t *q = a[i].qs;
        const int8_t *qx = b[i].qs;
        int32_t isum = 0;
        int is = 0;
        uint8_t m = 1;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m = (uint8_t)(m << 1)) {
                for (int k = 0; k < 2; k++, qx += 16) {
                    int32_t t = 0;
                    for (int l = 0; l < 16; l++) {
                        int v = ((q[16 * k + l] >> shift) & 3) - ((a[i].hmask[16 * k + l] & m) ? 0 : 4);
                        t += v * qx[l];
                    }
                    isum += (sc[is++] - 32) * t;
                }
            }
        }
        s += (b[i].d * clb_fp16_to_fp32(a[i].d)) * (float)isum;
    }
    *out = s;
}

/* Shared by Q4_K and Q5_K: hb is qh for Q5_K, NULL for Q4_K. */
static float dot_k4(const uint8_t *scales, uint16_t d16, uint16_t dmin16, const uint8_t *qs,
                    const uint8_t *hb, const clb_block_q8_k *b) {
    int32_t isum = 0, summ = 0;
    const int8_t *qx = b->qs;
    for (int c = 0; c < 4; c++, qs += 32) {
        for (int h = 0; h < 2; h++, qx += 32) {
            const int sb = 2 * c + h;
            uint8_t sc, m;
            clb_k4_scale_min(sb, scales, &sc, &m);
            int32_t t = 0;
            for (int l = 0; l < 32; l++) {
                int q = h ? (qs[l] >> 4) : (qs[l] & 0xF);
                if (hb && (hb[l] >> sb) & 1) q += 16;
                t += q * qx[l];
            }
            isum += sc * t;
            summ += m * (b->bsums[2 * sb] + b->bsums[2 * sb + 1]);
        }
    }
    const float dall = b->d * clb_fp16_to_fp32(d16), dmin = b->d * clb_fp16_to_fp32(dmin16);
    return dall * (float)isum - dmin * (float)summ;
}

static void vec_dot_q4_k(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q4_k *a = w;
    const clb_block_q8_k *b = x;
    float s = 0.0f;
    for (int64_t i = 0; i < n / CLB_QK_K; i++)
        s += dot_k4(a[i].scales, a[i].d, a[i].dmin, a[i].qs, NULL, &b[i]);
    *out = s;
}

static void vec_dot_q5_k(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q5_k *a = w;
    const clb_block_q8_k *b = x;
    float s = 0.0f;
    for (int64_t i = 0; i < n / CLB_QK_K; i++)
        s += dot_k4(a[i].scales, a[i].d, a[i].dmin, a[i].qs, a[i].qh, &b[i]);
    *out = s;
}

static void vec_dot_q6_k(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q6_k *a = w;
    const clb_block_q8_k *b = x;
    float s = 0.0f;
    for (int64_t i = 0; i < n / CLB_QK_K; i++) {
        const uint8_t *ql = a[i].ql, *qh = a[i].qh;
        const int8_t *sc = a[i].scales, *qx = b[i].qs;
        int32_t isum = 0;
        for (int half = 0; half < 2; half++, ql += 64, qh += 32, sc += 8, qx += 128) {
            int32_t t[8] = {0};
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                t[is + 0] += q1 * qx[l];
                t[is + 2] += q2 * qx[l + 32];
                t[is + 4] += q3 * qx[l + 64];
                t[is + 6] += q4 * qx[l + 96];
            }
            for (int k = 0; k < 8; k++) isum += sc[k] * t[k];
        }
        s += (b[i].d * clb_fp16_to_fp32(a[i].d)) * (float)isum;
    }
    *out = s;
}

static void vec_dot_iq4_xs(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_iq4_xs *a = w;
    const clb_block_q8_k *b = x;
    float s = 0.0f;
    for (int64_t i = 0; i < n / CLB_QK_K; i++) {
        const uint8_t *qs = a[i].qs;
        const int8_t *qx = b[i].qs;
        int32_t isum = 0;
        for (int ib = 0; ib < 8; ib++, qs += 16, qx += 32) {
            const int ls = ((a[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) |
                           (((a[i].scales_h >> (2 * ib)) & 3) << 4);
            int32_t t = 0;
            for (int j = 0; j < 16; j++) {
                t += clb_kvalues_iq4nl[qs[j] & 0xF] * qx[j];
                t += clb_kvalues_iq4nl[qs[j] >> 4] * qx[j + 16];
            }
            isum += (ls - 32) * t;
        }
        s += (b[i].d * clb_fp16_to_fp32(a[i].d)) * (float)isum;
    }
    *out = s;
}

/* ---- flash attention (kernels.h): plain loops ----------------------------------------- */

CLB_FA_SCORES_DOT(fa_scores_f32, vec_dot_f32)
CLB_FA_SCORES_DOT(fa_scores_f16, vec_dot_f16)
CLB_FA_SCORES_DOT(fa_scores_bf16, vec_dot_bf16)
CLB_FA_SCORES_DOT(fa_scores_q8_0, vec_dot_q8_0)
CLB_FA_SCORES_DOT(fa_scores_q4_0, vec_dot_q4_0)

static inline float ld_f32(const void *v, int64_t c) { return ((const float *)v)[c]; }
static inline float ld_f16(const void *v, int64_t c) { return clb_fp16_to_fp32(((const uint16_t *)v)[c]); }
static inline float ld_bf16(const void *v, int64_t c) { return clb_bf16_to_fp32(((const uint16_t *)v)[c]); }
static inline float ld_q8_0(const void *v, int64_t c) {
    const clb_block_q8_0 *b = (const clb_block_q8_0 *)v + c / CLB_QK;
    return clb_fp16_to_fp32(b->d) * (float)b->qs[c % CLB_QK];
}
static inline float ld_q4_0(const void *v, int64_t c) {
    const clb_block_q4_0 *b = (const clb_block_q4_0 *)v + c / CLB_QK;
    const int k = (int)(c % CLB_QK), q = k < 16 ? b->qs[k] & 0xF : b->qs[k - 16] >> 4;
    return clb_fp16_to_fp32(b->d) * (float)(q - 8);
}
#define FA_VACC_GENERIC(NAME, LD)                                                                         \
    static void NAME(int64_t d, int nq, int nk, const float *p, int64_t ps, const void *v, uint64_t vs,   \
                     float *acc, int64_t as, const float *alpha) {                                        \
        for (int i = 0; i < nq && alpha; i++)                                                             \
            for (int64_t c = 0; c < d; c++) acc[(int64_t)i * as + c] *= alpha[i];                         \
        for (int j = 0; j < nk; j++) {                                                                    \
            const uint8_t *vj = (const uint8_t *)v + (uint64_t)j * vs;                                    \
            for (int i = 0; i < nq; i++) {                                                                \
                const float pij = p[(int64_t)i * ps + j];                                                 \
                if (pij == 0.0f) continue; /* adds nothing */                                             \
                float *a = acc + (int64_t)i * as;                                                         \
                for (int64_t c = 0; c < d; c++) a[c] += pij * LD(vj, c);                                  \
            }                                                                                             \
        }                                                                                                 \
    }
FA_VACC_GENERIC(fa_vacc_f32, ld_f32)
FA_VACC_GENERIC(fa_vacc_f16, ld_f16)
FA_VACC_GENERIC(fa_vacc_bf16, ld_bf16)
FA_VACC_GENERIC(fa_vacc_q8_0, ld_q8_0)
FA_VACC_GENERIC(fa_vacc_q4_0, ld_q4_0)

static float fa_exp_sum(int64_t n, float *x, float m) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        x[i] = x[i] - m < -87.3f ? 0.0f : expf(x[i] - m);
        s += x[i];
    }
    return s;
}

static void fa_softmax(int nr, float *s, float scale, const float *m, float *mn, float *sum) {
    for (int r = 0; r < nr; r++) {
        float *sr = s + (int64_t)r * CLB_FA_TK, mx = m[r];
        for (int j = 0; j < CLB_FA_TK; j++) {
            sr[j] *= scale;
            mx = sr[j] > mx ? sr[j] : mx;
        }
        mn[r] = mx;
        sum[r] = fa_exp_sum(CLB_FA_TK, sr, mx);
    }
}

/* ---- table --------------------------------------------------------------------------- */

void clb_kernels_fill_generic(clb_kernels *k) {
    memset(k, 0, sizeof(*k));
    k->isa = "generic";

    k->vec_dot[CLB_DT_F32] = vec_dot_f32;
    k->axpy_f32 = axpy_f32;
    k->vec_dot[CLB_DT_F16] = vec_dot_f16;
    k->vec_dot[CLB_DT_BF16] = vec_dot_bf16;
    k->vec_dot[CLB_DT_Q4_0] = vec_dot_q4_0;
    k->vec_dot[CLB_DT_Q4_1] = vec_dot_q4_1;
    k->vec_dot[CLB_DT_Q5_0] = vec_dot_q5_0;
    k->vec_dot[CLB_DT_Q5_1] = vec_dot_q5_1;
    k->vec_dot[CLB_DT_Q8_0] = vec_dot_q8_0;
    k->vec_dot[CLB_DT_Q2_K] = vec_dot_q2_k;
    k->vec_dot[CLB_DT_Q3_K] = vec_dot_q3_k;
    k->vec_dot[CLB_DT_Q4_K] = vec_dot_q4_k;
    k->vec_dot[CLB_DT_Q5_K] = vec_dot_q5_k;
    k->vec_dot[CLB_DT_Q6_K] = vec_dot_q6_k;
    k->vec_dot[CLB_DT_IQ4_NL] = vec_dot_iq4_nl;
    k->vec_dot[CLB_DT_IQ4_XS] = vec_dot_iq4_xs;
    k->vec_dot[CLB_DT_MXFP4] = vec_dot_mxfp4;

    k->quantize[CLB_DT_F32] = clb_quant_f32;
    k->quantize[CLB_DT_F16] = clb_quant_f16; /* the KV cache's element types */
    k->quantize[CLB_DT_BF16] = clb_quant_bf16;
    k->quantize[CLB_DT_Q8_0] = clb_quant_q8_0;
    k->quantize[CLB_DT_Q8_K] = clb_quant_q8_k;

    k->dequantize[CLB_DT_F32] = clb_dequant_f32;
    k->dequantize[CLB_DT_F16] = clb_dequant_f16;
    k->dequantize[CLB_DT_BF16] = clb_dequant_bf16;
    k->dequantize[CLB_DT_Q4_0] = clb_dequant_q4_0;
    k->dequantize[CLB_DT_Q4_1] = clb_dequant_q4_1;
    k->dequantize[CLB_DT_Q5_0] = clb_dequant_q5_0;
    k->dequantize[CLB_DT_Q5_1] = clb_dequant_q5_1;
    k->dequantize[CLB_DT_Q8_0] = clb_dequant_q8_0;
    k->dequantize[CLB_DT_Q8_1] = clb_dequant_q8_1;
    k->dequantize[CLB_DT_Q2_K] = clb_dequant_q2_k;
    k->dequantize[CLB_DT_Q3_K] = clb_dequant_q3_k;
    k->dequantize[CLB_DT_Q4_K] = clb_dequant_q4_k;
    k->dequantize[CLB_DT_Q5_K] = clb_dequant_q5_k;
    k->dequantize[CLB_DT_Q6_K] = clb_dequant_q6_k;
    k->dequantize[CLB_DT_Q8_K] = clb_dequant_q8_k;
    k->dequantize[CLB_DT_IQ4_NL] = clb_dequant_iq4_nl;
    k->dequantize[CLB_DT_IQ4_XS] = clb_dequant_iq4_xs;
    k->dequantize[CLB_DT_MXFP4] = clb_dequant_mxfp4;

    k->fa_scores[CLB_DT_F32] = fa_scores_f32;
    k->fa_scores[CLB_DT_F16] = fa_scores_f16;
    k->fa_scores[CLB_DT_BF16] = fa_scores_bf16;
    k->fa_scores[CLB_DT_Q8_0] = fa_scores_q8_0;
    k->fa_scores[CLB_DT_Q4_0] = fa_scores_q4_0;
    k->fa_vacc[CLB_DT_F32] = fa_vacc_f32;
    k->fa_vacc[CLB_DT_F16] = fa_vacc_f16;
    k->fa_vacc[CLB_DT_BF16] = fa_vacc_bf16;
    k->fa_vacc[CLB_DT_Q8_0] = fa_vacc_q8_0;
    k->fa_vacc[CLB_DT_Q4_0] = fa_vacc_q4_0;
    k->fa_exp_sum = fa_exp_sum;
    k->fa_softmax = fa_softmax;
}
