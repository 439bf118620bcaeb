/* arm_neon.c — AArch64 NEON kernels (file compiled with -march=armv8.2-a+dotprod+fp16).
 *
 * Two variants of the integer dot products: plain NEON (vmull_s8 + pairwise add, any
 * ARMv8-A) and one using the SDOT instruction, installed only when clb_cpu()->dotprod.
 * The plain variant and everything shared are compiled for base armv8-a (pragma below)
 * so the compiler cannot slip a dotprod/fp16 instruction into code a CPU without those
 * extensions runs.
 */
#if defined(__aarch64__)

#include <arm_neon.h>
#include <string.h>

#include "kernels/kernels_impl.h"

#pragma GCC push_options
#pragma GCC target("arch=armv8-a")

/* ---- helpers (base ARMv8-A) ---------------------------------------------------------- */

static inline float fp16(uint16_t h) { return clb_fp16_to_fp32(h); }

/* 16 packed nibble bytes -> low nibbles (weights 0..15) and high nibbles (16..31). */
static inline void unpack_nibbles(const uint8_t *p, uint8x16_t *lo, uint8x16_t *hi) {
    const uint8x16_t v = vld1q_u8(p);
    *lo = vandq_u8(v, vdupq_n_u8(0x0F));
    *hi = vshrq_n_u8(v, 4);
}

/* int32x4 partial sums of a[i]*b[i] over 16 int8 pairs, plain NEON. */
static inline int32x4_t mull_dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
    const int16x8_t p0 = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    const int16x8_t p1 = vmull_high_s8(a, b);
    return vpadalq_s16(vpadalq_s16(acc, p0), p1);
}

/* ---- float rows ---------------------------------------------------------------------- */

static void axpy_f32(int64_t n, float a, const float *x, float *y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), vld1q_f32(x + i), a));
        vst1q_f32(y + i + 4, vfmaq_n_f32(vld1q_f32(y + i + 4), vld1q_f32(x + i + 4), a));
    }
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), vld1q_f32(x + i), a));
    for (; i < n; i++) y[i] += a * x[i];
}

static void vec_dot_f32(int64_t n, float *out, const void *w, const void *x) {
    const float *a = w, *b = x;
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
        s2 = vfmaq_f32(s2, vld1q_f32(a + i + 8), vld1q_f32(b + i + 8));
        s3 = vfmaq_f32(s3, vld1q_f32(a + i + 12), vld1q_f32(b + i + 12));
    }
    for (; i + 4 <= n; i += 4) s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
    for (; i < n; i++) s += a[i] * b[i];
    *out = s;
}

static inline float32x4_t ld_f16x4(const uint16_t *p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

static void vec_dot_f16(int64_t n, float *out, const void *w, const void *x) {
    const uint16_t *a = w;
    const float *b = x;
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = vfmaq_f32(s0, ld_f16x4(a + i), vld1q_f32(b + i));
        s1 = vfmaq_f32(s1, ld_f16x4(a + i + 4), vld1q_f32(b + i + 4));
        s2 = vfmaq_f32(s2, ld_f16x4(a + i + 8), vld1q_f32(b + i + 8));
        s3 = vfmaq_f32(s3, ld_f16x4(a + i + 12), vld1q_f32(b + i + 12));
    }
    for (; i + 4 <= n; i += 4) s0 = vfmaq_f32(s0, ld_f16x4(a + i), vld1q_f32(b + i));
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
    for (; i < n; i++) s += fp16(a[i]) * b[i];
    *out = s;
}

static inline float32x4_t ld_bf16x4(const uint16_t *p) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}

static void vec_dot_bf16(int64_t n, float *out, const void *w, const void *x) {
    const uint16_t *a = w;
    const float *b = x;
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = vfmaq_f32(s0, ld_bf16x4(a + i), vld1q_f32(b + i));
        s1 = vfmaq_f32(s1, ld_bf16x4(a + i + 4), vld1q_f32(b + i + 4));
        s2 = vfmaq_f32(s2, ld_bf16x4(a + i + 8), vld1q_f32(b + i + 8));
        s3 = vfmaq_f32(s3, ld_bf16x4(a + i + 12), vld1q_f32(b + i + 12));
    }
    for (; i + 4 <= n; i += 4) s0 = vfmaq_f32(s0, ld_bf16x4(a + i), vld1q_f32(b + i));
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
    for (; i < n; i++) s += clb_bf16_to_fp32(a[i]) * b[i];
    *out = s;
}

/* ---- activation quantizer ------------------------------------------------------------ */

/* vrndaq = roundf (half away from zero); clamp with NaN -> -127, like quant.c round_q8. */
static inline int32x4_t round_q8(float32x4_t v) {
    float32x4_t r = vrndaq_f32(v);
    r = vbslq_f32(vcgeq_f32(r, vdupq_n_f32(-127.0f)), r, vdupq_n_f32(-127.0f));
    r = vminq_f32(r, vdupq_n_f32(127.0f));
    return vcvtq_s32_f32(r);
}

/* FCVTN rounds to nearest even (the FPCR default), to infinity from 65520 and into
   subnormals as clb_fp32_to_fp16 does; NaNs become sign | 0x7e00 as there. */
static void quantize_f16(const float *src, void *dst, int64_t n) {
    uint16_t *d = dst;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(src + i);
        uint16x4_t h = vreinterpret_u16_f16(vcvt_f16_f32(v));
        const uint16x4_t nan = vmovn_u32(vmvnq_u32(vceqq_f32(v, v)));
        const uint16x4_t q = vorr_u16(vand_u16(h, vdup_n_u16(0x8000)), vdup_n_u16(0x7e00));
        vst1_u16(d + i, vbsl_u16(nan, q, h));
    }
    for (; i < n; i++) d[i] = clb_fp32_to_fp16(src[i]);
}

static void quantize_q8_0(const float *src, void *dst, int64_t n) {
    clb_block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / CLB_QK; i++, src += CLB_QK) {
        float32x4_t v[8];
        float32x4_t m = vdupq_n_f32(0.0f);
        for (int k = 0; k < 8; k++) {
            v[k] = vld1q_f32(src + 4 * k);
            m = vmaxq_f32(m, vabsq_f32(v[k]));
        }
        const float amax = vmaxvq_f32(m);
        const float d = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = clb_fp32_to_fp16(d);
        for (int k = 0; k < 8; k += 2) {
            const int32x4_t q0 = round_q8(vmulq_n_f32(v[k], id));
            const int32x4_t q1 = round_q8(vmulq_n_f32(v[k + 1], id));
            const int16x8_t h = vcombine_s16(vmovn_s32(q0), vmovn_s32(q1));
            vst1_s8(y[i].qs + 4 * k, vmovn_s16(h));
        }
    }
}

/* Q8_K (quant.c clb_quant_q8_k): the scale from the first value of largest magnitude
   (NaNs never chosen: FMAXNM), then rintf (FRINTN, ties to even) of x * iscale clamped to
   [-128, 127] with NaN -> -128, and the 16 sums of 16. */
static void quantize_q8_k(const float *src, void *dst, int64_t n) {
    clb_block_q8_k *y = dst;
    for (int64_t i = 0; i < n / CLB_QK_K; i++, src += CLB_QK_K) {
        float32x4_t m = vdupq_n_f32(0.0f);
        for (int j = 0; j < CLB_QK_K; j += 4) m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(src + j)));
        const float amax = vmaxnmvq_f32(m);
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof(y[i]));
            continue;
        }
        int j = 0;
        while (vmaxvq_u32(vceqq_f32(vabsq_f32(vld1q_f32(src + j)), vdupq_n_f32(amax))) == 0) j += 4;
        while (!(src[j] == amax || src[j] == -amax)) j++;
        const float iscale = -127.0f / src[j];
        for (int k = 0; k < CLB_QK_K; k += 16) {
            int32x4_t q[4];
            for (int u = 0; u < 4; u++) {
                float32x4_t r = vrndnq_f32(vmulq_n_f32(vld1q_f32(src + k + 4 * u), iscale));
                r = vbslq_f32(vcgeq_f32(r, vdupq_n_f32(-128.0f)), r, vdupq_n_f32(-128.0f));
                q[u] = vcvtq_s32_f32(vminq_f32(r, vdupq_n_f32(127.0f)));
            }
            const int8x16_t b = vcombine_s8(vmovn_s16(vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1]))),
                                            vmovn_s16(vcombine_s16(vmovn_s32(q[2]), vmovn_s32(q[3]))));
            vst1q_s8(y[i].qs + k, b);
            y[i].bsums[k / 16] = (int16_t)vaddlvq_s8(b);
        }
        y[i].d = 1 / iscale;
    }
}

/* 5th bits of Q5_0/Q5_1 (qh, le u32) as bytes: 0x10 where set; h0 for weights 0..15. */
static inline void fifth_bits(const uint8_t *qh, uint8x16_t *h0, uint8x16_t *h1) {
    static const uint8_t bitv[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t m = vld1q_u8(bitv), b4 = vdupq_n_u8(0x10);
    *h0 = vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(qh[0]), vdup_n_u8(qh[1])), m), b4);
    *h1 = vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(qh[2]), vdup_n_u8(qh[3])), m), b4);
}

/* sum of 32 int8 */
static inline int32_t sum_i8x32(const int8_t *y) {
    return (int32_t)vaddlvq_s8(vld1q_s8(y)) + (int32_t)vaddlvq_s8(vld1q_s8(y + 16));
}

/* ---- flash attention (fa_body_impl.h) ------------------------------------------------ */

static inline float32x4_t fa_ld_i8(const int8_t *p) { /* 4 int8 (never reads past them) */
    int32_t w;
    memcpy(&w, p, 4);
    const int16x8_t h = vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(w)));
    return vcvtq_f32_s32(vmovl_s16(vget_low_s16(h)));
}
static inline float32x4_t fa_ld_q4n(const uint8_t *qs, int g) { /* g < 4: low nibbles of bytes 4g.., else high */
    uint32_t w;
    memcpy(&w, qs + (g & 3) * 4, 4);
    const uint16x8_t h = vmovl_u8(vreinterpret_u8_u32(vdup_n_u32(w)));
    const int32x4_t b = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(h)));
    const int32x4_t q = g & 4 ? vshrq_n_s32(b, 4) : vandq_s32(b, vdupq_n_s32(0xF));
    return vcvtq_f32_s32(vsubq_s32(q, vdupq_n_s32(8)));
}
static inline float32x4_t fa_pow2(float32x4_t y, float32x4_t n) {
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vmulq_f32(y, vreinterpretq_f32_s32(e));
}
#define FA_FN(x) x##_neon
#define FA_VL 4
#define FA_V float32x4_t
#define FA_ZERO() vdupq_n_f32(0.0f)
#define FA_SET1(x) vdupq_n_f32(x)
#define FA_LOAD(p) vld1q_f32(p)
#define FA_STORE(p, v) vst1q_f32(p, v)
#define FA_ADD vaddq_f32
#define FA_SUB vsubq_f32
#define FA_MUL vmulq_f32
#define FA_MAX vmaxq_f32
#define FA_HMAX(v) vmaxvq_f32(v)
#define FA_FMA(a, b, c) vfmaq_f32(c, a, b)
#define FA_HSUM(v) vaddvq_f32(v)
#define FA_LD_F16(p) ld_f16x4(p)
#define FA_LD_BF16(p) ld_bf16x4(p)
#define FA_LD_I8(p) fa_ld_i8(p)
#define FA_LD_Q4(qs, g) fa_ld_q4n(qs, g)
#define FA_FLOOR(v) vrndmq_f32(v)
#define FA_POW2(y, n) fa_pow2(y, n)
#define FA_KEEP_ABOVE(x, t, y) vreinterpretq_f32_u32(vandq_u32(vcgtq_f32(x, vdupq_n_f32(t)), vreinterpretq_u32_f32(y)))
#define FA_TQ 4
#define FA_TK 4
#define FA_VR 4
#define FA_VC 4
#define FA_VRB 2
#include "kernels/fa_body_impl.h"

/* ---- integer dot products, plain NEON ------------------------------------------------ */

#define NEON_DOT16(acc, a, b) mull_dot16(acc, a, b)
#define NEON_FN(name) name##_plain
#include "kernels/arm_neon_body_impl.h"
#undef NEON_DOT16
#undef NEON_FN

#pragma GCC pop_options

/* ---- the same with SDOT (only installed when the CPU has dotprod) -------------------- */

#define NEON_DOT16(acc, a, b) vdotq_s32(acc, a, b)
#define NEON_FN(name) name##_dot
#include "kernels/arm_neon_body_impl.h"
#undef NEON_DOT16
#undef NEON_FN

/* flash-attention scores of quantized keys through the integer dot products above */
CLB_FA_SCORES_DOT(fa_scores_q8_0_plain, vec_dot_q8_0_plain)
CLB_FA_SCORES_DOT(fa_scores_q4_0_plain, vec_dot_q4_0_plain)
CLB_FA_SCORES_DOT(fa_scores_q8_0_dot, vec_dot_q8_0_dot)
CLB_FA_SCORES_DOT(fa_scores_q4_0_dot, vec_dot_q4_0_dot)

/* ---- table --------------------------------------------------------------------------- */

void clb_kernels_fill_neon(clb_kernels *k, bool dotprod) {
    k->isa = dotprod ? "neon+dotprod" : "neon";
    k->vec_dot[CLB_DT_F32] = vec_dot_f32;
    k->axpy_f32 = axpy_f32;
    k->vec_dot[CLB_DT_F16] = vec_dot_f16;
    k->vec_dot[CLB_DT_BF16] = vec_dot_bf16;
    if (dotprod) fill_dot(k);
    else fill_plain(k);
    k->quantize[CLB_DT_F16] = quantize_f16;
    k->quantize[CLB_DT_Q8_0] = quantize_q8_0;
    k->quantize[CLB_DT_Q8_K] = quantize_q8_k;
    fa_fill_neon(k);
    k->fa_scores[CLB_DT_Q8_0] = dotprod ? fa_scores_q8_0_dot : fa_scores_q8_0_plain;
    k->fa_scores[CLB_DT_Q4_0] = dotprod ? fa_scores_q4_0_dot : fa_scores_q4_0_plain;
}

#else
typedef int clb_arm_neon_empty_tu; /* ISO C forbids an empty translation unit */
#endif /* __aarch64__ */
