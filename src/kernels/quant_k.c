/* quant_k.c — the reference quantizers of the super-block formats (Q2_K ... Q6_K), the
 * non-linear 4-bit formats (IQ4_NL, IQ4_XS) and MXFP4.
 *
 * Each one follows ggml's quantizer for that type as llama-quantize calls it without an
 * importance matrix (ggml-quants.c: quantize_row_qN_K_ref for the K-quants, quantize_iq4_nl /
 * quantize_iq4_xs with ntry 7, quantize_row_mxfp4_ref) operation for operation: the same
 * float expressions in the same order, the same round-half-to-even through the
 * 1.5 * 2^23 trick, the same integer conversions. That makes the blocks byte-identical to
 * llama-quantize's on x86-64 (ggml-base is built there without FMA, and this file is C11,
 * so GCC contracts no a*b+c into an FMA either; a llama-quantize built for aarch64 with
 * GNU C contracts and can differ in the last bit of a scale).
 *
 * Two deliberate differences, both on inputs where ggml's result is undefined or NaN:
 *   - make_q3_quants returns 0 instead of 0/0 when every weight of a group underflows to a
 *     zero square (newer ggml does the same);
 *   - MXFP4 clamps the shared exponent to [0, 254] (ggml converts a negative float to
 *     uint8_t, undefined, for blocks whose largest magnitude is below 2^-125).
 */
#include <math.h>
#include <string.h>

#include "kernels/kernels_impl.h"

#define GROUP_MAX_EPS 1e-15f

static inline int imax(int a, int b) { return a > b ? a : b; }
static inline int imin(int a, int b) { return a < b ? a : b; }

/* Round half to even for |v| <= 2^22 (ggml's nearest_int): the float sum puts the integer
   in the low mantissa bits. */
static inline int nearest_int(float v) {
    float t = v + 12582912.f;
    int32_t i;
    memcpy(&i, &t, 4);
    return (i & 0x007fffff) - 0x00400000;
}

/* The first guess of the symmetric group quantizers: levels round(-nmax / max * x) in
   [-nmax, nmax-1] (max: the value of largest magnitude), stored + bias, and the x^2-weighted
   sums of l * x and l^2. false (levels 0) for an all-zero group. */
static bool first_fit(int n, int nmax, const float *x, int8_t *L, int bias, float *max_out, float *sumlx,
                      float *suml2) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return false;
    }
    float iscale = -nmax / max;
    *sumlx = *suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * x[i]);
        l = imax(-nmax, imin(nmax - 1, l));
        L[i] = (int8_t)(l + bias);
        float w = x[i] * x[i];
        *sumlx += w * x[i] * l;
        *suml2 += w * l * l;
    }
    *max_out = max;
    return true;
}

/* Symmetric quantization of n values to [-nmax, nmax-1] (stored + nmax), weighted by x^2
   (ggml's make_qx_quants, rmse_type 1), trying 18 scales around nmax/max. Returns the scale. */
static float make_qx_quants(int n, int nmax, const float *x, int8_t *L) {
    float max, sumlx, suml2;
    if (!first_fit(n, nmax, x, L, nmax, &max, &sumlx, &suml2)) return 0.f;
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        float iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = nearest_int(iscale * x[i]);
            l = imax(-nmax, imin(nmax - 1, l));
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                int l = nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + imax(-nmax, imin(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q3_K's group quantizer: the first guess, then up to 5 passes moving single values to the
   level that improves the weighted fit. Levels stored + nmax. */
static float make_q3_quants(int n, int nmax, const float *x, int8_t *L) {
    float max, sumlx, suml2;
    if (!first_fit(n, nmax, x, L, 0, &max, &sumlx, &suml2)) return 0.f;
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                int new_l = nearest_int(x[i] * sl2 / slx);
                new_l = imax(-nmax, imin(nmax - 1, new_l));
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Asymmetric quantization x ~ scale * L - min (L in 0..nmax) minimising the weighted error
   (|e| with use_mad, else e^2) over nstep+1 candidate scales. *the_min receives -min >= 0. */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                              uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_mad = 0;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)imax(0, imin(nmax, l));
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_mad += weights[i] * diff;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = nearest_int(iscale * (x[i] - min));
            l = imax(0, imin(nmax, l));
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float mad = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                mad += weights[i] * diff;
            }
            if (mad < best_mad) {
                memcpy(L, Laux, (size_t)n);
                best_mad = mad;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* Packs 4 planes of 32 2-bit levels (L[j + l + 32 * plane]) per 128 weights (Q2_K, Q3_K). */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < CLB_QK_K; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

void clb_quant_q2_k(const float *x, void *dst, int64_t n) {
    clb_block_q2_k *y = dst;
    uint8_t L[CLB_QK_K], Laux[16];
    float weights[16], mins[CLB_QK_K / 16], scales[CLB_QK_K / 16];
    const float q4scale = 15.f;
    for (int64_t i = 0; i < n / CLB_QK_K; i++, x += CLB_QK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < CLB_QK_K / 16; j++) {
            for (int l = 0; l < 16; l++) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            float iscale = q4scale / max_scale;
            for (int j = 0; j < CLB_QK_K / 16; j++) y[i].scales[j] = (uint8_t)nearest_int(iscale * scales[j]);
            y[i].d = clb_fp32_to_fp16(max_scale / q4scale);
        } else {
            memset(y[i].scales, 0, sizeof y[i].scales);
            y[i].d = clb_fp32_to_fp16(0.f);
        }
        if (max_min > 0) {
            float iscale = q4scale / max_min;
            for (int j = 0; j < CLB_QK_K / 16; j++)
                y[i].scales[j] = (uint8_t)(y[i].scales[j] | (nearest_int(iscale * mins[j]) << 4));
            y[i].dmin = clb_fp32_to_fp16(max_min / q4scale);
        } else {
            y[i].dmin = clb_fp32_to_fp16(0.f);
        }
        for (int j = 0; j < CLB_QK_K / 16; j++) {
            const float d = clb_fp16_to_fp32(y[i].d) * (y[i].scales[j] & 0xF);
            if (!d) continue;
            const float dm = clb_fp16_to_fp32(y[i].dmin) * (y[i].scales[j] >> 4);
            for (int ii = 0; ii < 16; ii++) {
                int l = nearest_int((x[16 * j + ii] + dm) / d);
                L[16 * j + ii] = (uint8_t)imax(0, imin(3, l));
            }
        }
        pack_2bit(L, y[i].qs);
    }
}

void clb_quant_q3_k(const float *x, void *dst, int64_t n) {
    clb_block_q3_k *y = dst;
    int8_t L[CLB_QK_K];
    float scales[CLB_QK_K / 16];
    for (int64_t i = 0; i < n / CLB_QK_K; i++, x += CLB_QK_K) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < CLB_QK_K / 16; j++) {
            scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
            float scale = fabsf(scales[j]);
            if (scale > amax) {
                amax = scale;
                max_scale = scales[j];
            }
        }
        memset(y[i].scales, 0, 12);
        if (max_scale) {
            float iscale = -32.f / max_scale;
            for (int j = 0; j < CLB_QK_K / 16; j++) {
                int8_t l = (int8_t)nearest_int(iscale * scales[j]);
                l = (int8_t)(imax(-32, imin(31, l)) + 32);
                if (j < 8) y[i].scales[j] = (uint8_t)(l & 0xF);
                else y[i].scales[j - 8] = (uint8_t)(y[i].scales[j - 8] | ((l & 0xF) << 4));
                l = (int8_t)(l >> 4);
                y[i].scales[j % 4 + 8] = (uint8_t)(y[i].scales[j % 4 + 8] | (l << (2 * (j / 4))));
            }
            y[i].d = clb_fp32_to_fp16(1 / iscale);
        } else {
            y[i].d = clb_fp32_to_fp16(0.f);
        }
        for (int j = 0; j < CLB_QK_K / 16; j++) {
            int sc = j < 8 ? y[i].scales[j] & 0xF : y[i].scales[j - 8] >> 4;
            sc = (int8_t)((sc | (((y[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32);
            float d = clb_fp16_to_fp32(y[i].d) * sc;
            if (!d) continue;
            for (int ii = 0; ii < 16; ii++) {
                int l = nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = (int8_t)(imax(-4, imin(3, l)) + 4);
            }
        }
        /* the high bit of weight j goes to bit j / 32 of hmask[j % 32] */
        memset(y[i].hmask, 0, sizeof y[i].hmask);
        uint8_t lo[CLB_QK_K];
        for (int j = 0; j < CLB_QK_K; j++) {
            int l = L[j];
            if (l > 3) {
                y[i].hmask[j % 32] = (uint8_t)(y[i].hmask[j % 32] | (1u << (j / 32)));
                l -= 4;
            }
            lo[j] = (uint8_t)l;
        }
        pack_2bit(lo, y[i].qs);
    }
}

/* Q4_K / Q5_K share everything but the level count and the search parameters. */
static void quant_k45(const float *x, uint8_t *scales_out, uint16_t *d_out, uint16_t *dmin_out, uint8_t *L, int nmax,
                      float rmin, int nstep) {
    uint8_t Laux[32];
    float weights[32], mins[CLB_QK_K / 32], scales[CLB_QK_K / 32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < CLB_QK_K / 32; j++) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < CLB_QK_K / 32; j++) {
        uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            scales_out[j] = ls;
            scales_out[j + 4] = lm;
        } else {
            scales_out[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            scales_out[j - 4] = (uint8_t)(scales_out[j - 4] | ((ls >> 4) << 6));
            scales_out[j] = (uint8_t)(scales_out[j] | ((lm >> 4) << 6));
        }
    }
    *d_out = clb_fp32_to_fp16(max_scale / 63.f);
    *dmin_out = clb_fp32_to_fp16(max_min / 63.f);
    for (int j = 0; j < CLB_QK_K / 32; j++) {
        uint8_t sc, m;
        clb_k4_scale_min(j, scales_out, &sc, &m);
        const float d = clb_fp16_to_fp32(*d_out) * sc;
        if (!d) continue;
        const float dm = clb_fp16_to_fp32(*dmin_out) * m;
        for (int ii = 0; ii < 32; ii++) {
            int l = nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)imax(0, imin(nmax, l));
        }
    }
}

void clb_quant_q4_k(const float *x, void *dst, int64_t n) {
    clb_block_q4_k *y = dst;
    uint8_t L[CLB_QK_K];
    for (int64_t i = 0; i < n / CLB_QK_K; i++, x += CLB_QK_K) {
        quant_k45(x, y[i].scales, &y[i].d, &y[i].dmin, L, 15, -1.f, 20);
        uint8_t *q = y[i].qs;
        for (int j = 0; j < CLB_QK_K; j += 64, q += 32)
            for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

void clb_quant_q5_k(const float *x, void *dst, int64_t n) {
    clb_block_q5_k *y = dst;
    uint8_t L[CLB_QK_K];
    for (int64_t i = 0; i < n / CLB_QK_K; i++, x += CLB_QK_K) {
        quant_k45(x, y[i].scales, &y[i].d, &y[i].dmin, L, 31, -0.5f, 15);
        uint8_t *qh = y[i].qh, *ql = y[i].qs;
        memset(qh, 0, CLB_QK_K / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int k = 0; k < CLB_QK_K; k += 64, ql += 32) {
            for (int j = 0; j < 32; j++) {
                int l1 = L[k + j], l2 = L[k + j + 32];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                if (l2 > 15) {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
            m1 = (uint8_t)(m1 << 2);
            m2 = (uint8_t)(m2 << 2);
        }
    }
}

void clb_quant_q6_k(const float *x, void *dst, int64_t n) {
    clb_block_q6_k *y = dst;
    int8_t L[CLB_QK_K];
    float scales[CLB_QK_K / 16];
    for (int64_t i = 0; i < n / CLB_QK_K; i++, x += CLB_QK_K) {
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < CLB_QK_K / 16; ib++) {
            const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
            scales[ib] = scale;
            const float abs_scale = fabsf(scale);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scale;
            }
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float iscale = -128.f / max_scale;
        y[i].d = clb_fp32_to_fp16(1 / iscale);
        for (int ib = 0; ib < CLB_QK_K / 16; ib++) y[i].scales[ib] = (int8_t)imin(127, nearest_int(iscale * scales[ib]));
        for (int j = 0; j < CLB_QK_K / 16; j++) {
            float d = clb_fp16_to_fp32(y[i].d) * y[i].scales[j];
            if (!d) continue;
            for (int ii = 0; ii < 16; ii++) {
                int l = nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = (int8_t)(imax(-32, imin(31, l)) + 32);
            }
        }
        uint8_t *ql = y[i].ql, *qh = y[i].qh;
        for (int j = 0; j < CLB_QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                const uint8_t q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
                ql[l] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                  ((L[j + l + 96] >> 4) << 6));
            }
        }
    }
}

/* ---- IQ4_NL / IQ4_XS ----------------------------------------------------------------- */

/* Index of the codebook value nearest x (values ascending; ties to the upper one). */
static inline int best_index_int8(int n, const int8_t *val, float x) {
    if (x <= val[0]) return 0;
    if (x >= val[n - 1]) return n - 1;
    int ml = 0, mu = n - 1;
    while (mu - ml > 1) {
        int mav = (ml + mu) / 2;
        if (x < val[mav]) mu = mav;
        else ml = mav;
    }
    return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

/* One super-block of sb weights in 32-weight blocks on the IQ4_NL codebook, weights x^2,
   15 scales tried per block (ggml's quantize_row_iq4_nl_impl with ntry 7, no importance).
   sb == 32: IQ4_NL (scale in *dh); sb == 256: IQ4_XS (6-bit block scales). */
static void quant_iq4(int sb, const float *x, uint16_t *dh, uint8_t *q4, uint16_t *scales_h, uint8_t *scales_l) {
    const int8_t *values = clb_kvalues_iq4nl;
    const int ntry = 7;
    float scales[CLB_QK_K / 32], weight[32];
    uint8_t L[CLB_QK_K];
    memset(q4, 0, (size_t)sb / 2);
    *dh = clb_fp32_to_fp16(0.f);
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < sb / 32; ib++) {
        const float *xb = x + ib * 32;
        uint8_t *Lb = L + ib * 32;
        for (int j = 0; j < 32; j++) weight[j] = xb[j] * xb[j];
        float amax = 0, max = 0;
        for (int j = 0; j < 32; j++) {
            float ax = fabsf(xb[j]);
            if (ax > amax) {
                amax = ax;
                max = xb[j];
            }
        }
        if (amax < GROUP_MAX_EPS) {
            scales[ib] = 0;
            continue;
        }
        float d = -max / values[0];
        float id = 1 / d;
        float sumqx = 0, sumq2 = 0;
        for (int j = 0; j < 32; j++) {
            float al = id * xb[j];
            int l = best_index_int8(16, values, al);
            Lb[j] = (uint8_t)l;
            float q = values[l];
            float w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        d = sumqx / sumq2;
        float best = d * sumqx;
        for (int itry = -ntry; itry <= ntry; itry++) {
            id = (itry + values[0]) / max;
            sumqx = sumq2 = 0;
            for (int j = 0; j < 32; j++) {
                float al = id * xb[j];
                int l = best_index_int8(16, values, al);
                float q = values[l];
                float w = weight[j];
                sumqx += w * q * xb[j];
                sumq2 += w * q * q;
            }
            if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scales[ib] = d;
        float abs_d = fabsf(d);
        if (abs_d > amax_scale) {
            amax_scale = abs_d;
            max_scale = d;
        }
    }
    if (sb > 32) {
        *scales_h = 0;
        float d = -max_scale / 32;
        *dh = clb_fp32_to_fp16(d);
        float id = d ? 1 / d : 0.f;
        for (int ib = 0; ib < sb / 32; ib++) {
            int l = nearest_int(id * scales[ib]);
            l = imax(-32, imin(31, l));
            float dl = d * l;
            float idl = dl ? 1 / dl : 0.f;
            uint8_t *Lb = L + ib * 32;
            const float *xb = x + ib * 32;
            for (int j = 0; j < 32; j++) Lb[j] = (uint8_t)best_index_int8(16, values, idl * xb[j]);
            l += 32;
            uint8_t l_l = (uint8_t)(l & 0xf), l_h = (uint8_t)(l >> 4);
            if (ib % 2 == 0) scales_l[ib / 2] = l_l;
            else scales_l[ib / 2] = (uint8_t)(scales_l[ib / 2] | (l_l << 4));
            *scales_h = (uint16_t)(*scales_h | (l_h << 2 * (ib % 8)));
        }
    } else {
        *dh = clb_fp32_to_fp16(scales[0]);
        float id = scales[0] ? 1 / scales[0] : 0;
        for (int j = 0; j < sb; j++) L[j] = (uint8_t)best_index_int8(16, values, id * x[j]);
    }
    for (int i = 0; i < sb / 32; i++)
        for (int j = 0; j < 16; j++) q4[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

void clb_quant_iq4_nl(const float *x, void *dst, int64_t n) {
    clb_block_iq4_nl *y = dst;
    for (int64_t i = 0; i < n / CLB_QK; i++) quant_iq4(CLB_QK, x + i * CLB_QK, &y[i].d, y[i].qs, NULL, NULL);
}

void clb_quant_iq4_xs(const float *x, void *dst, int64_t n) {
    clb_block_iq4_xs *y = dst;
    for (int64_t i = 0; i < n / CLB_QK_K; i++)
        quant_iq4(CLB_QK_K, x + i * CLB_QK_K, &y[i].d, y[i].qs, &y[i].scales_h, y[i].scales_l);
}

/* ---- MXFP4 --------------------------------------------------------------------------- */

/* The code whose value times d is nearest x (first of equals, scanning 0..15). */
static inline uint8_t best_index_mxfp4(float x, float d) {
    int best = 0;
    float best_err = fabsf(clb_kvalues_mxfp4[0] * d - x);
    for (int i = 1; i < 16; i++) {
        float err = fabsf(clb_kvalues_mxfp4[i] * d - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return (uint8_t)best;
}

void clb_quant_mxfp4(const float *x, void *dst, int64_t n) {
    clb_block_mxfp4 *y = dst;
    for (int64_t i = 0; i < n / CLB_QK; i++, x += CLB_QK) {
        float amax = 0.0f;
        for (int j = 0; j < CLB_QK; j++)
            if (amax < fabsf(x[j])) amax = fabsf(x[j]);
        /* the largest E2M1 magnitude is 6 = 1.5 * 2^2: scale 2^(floor(log2 amax) - 2) */
        float ef = amax > 0.0f ? floorf(log2f(amax)) - 2 + 127 : 0;
        if (!(ef >= 0)) ef = 0;
        if (ef > 254) ef = 254;
        const uint8_t e = (uint8_t)ef;
        const float d = clb_e8m0_to_fp32_half(e);
        y[i].e = e;
        for (int j = 0; j < CLB_QK / 2; j++)
            y[i].qs[j] = (uint8_t)(best_index_mxfp4(x[j], d) | (best_index_mxfp4(x[CLB_QK / 2 + j], d) << 4));
    }
}
