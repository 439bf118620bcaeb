/* arm_neon_pack.c — AArch64 kernels on packed rows (kernels.h): Q4_0, Q8_0 and Q4_K
 * weights, 16 rows a group, one int32x4 / float32x4 lane per row, as the AVX-512 ones
 * (x86_avx512.c) but with 128-bit registers: four quads of 4 rows per group.
 *
 * This file is compiled for base ARMv8-A (no -march in the Makefile); each level's body
 * (arm_neon_pack_impl.h) is compiled under its own target pragma, and kernels.c installs
 * a level only when clb_cpu() reports its extension:
 *   plain   base Advanced SIMD: each 4-byte dot product by SMULL/SMULL2, ADDP, SADALP
 *           (pairs of int8 products fit int16: |w| <= 128, |x| <= 127);
 *   dot     SDOT by element (FEAT_DotProd), Q8_0 weights flipped back to signed (EOR);
 *   i8mm    USDOT by element (FEAT_I8MM) on the stored Q8_0 bytes (w + 128) seeded with the
 *           activation's -128 * sum(q), as VPDPBUSD does on x86; Q4_0/Q4_K as dot.
 * Integer sums are exact and the float steps are generic.c's (multiply, then add), so
 * every level gives the portable kernels' bits (tests/unit/test_matmul.c). */
#if defined(__aarch64__)

#include <arm_neon.h>
#include <string.h>

#include "kernels/kernels_impl.h"

/* ---- plain Advanced SIMD ------------------------------------------------------------- */
#pragma GCC push_options
#pragma GCC target("arch=armv8-a")

static inline __attribute__((always_inline)) int32x4_t dot4_plain(int32x4_t acc, int8x16_t w, int8x16_t xw) {
    const int16x8_t p0 = vmull_s8(vget_low_s8(w), vget_low_s8(xw)), p1 = vmull_high_s8(w, xw);
    return vpadalq_s16(acc, vpaddq_s16(p0, p1));
}
#define PK_DOT4(acc, w, x, lane) dot4_plain(acc, w, vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(x), lane)))
#define PK_FN(name) name##_plain
#include "kernels/arm_neon_pack_impl.h"
#undef PK_DOT4
#undef PK_FN
#pragma GCC pop_options

/* ---- SDOT ---------------------------------------------------------------------------- */
#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod")
#define PK_DOT4(acc, w, x, lane) vdotq_laneq_s32(acc, w, x, lane)
#define PK_FN(name) name##_dot
#include "kernels/arm_neon_pack_impl.h"
#undef PK_DOT4
#undef PK_FN
#pragma GCC pop_options

/* ---- USDOT (i8mm) -------------------------------------------------------------------- */
#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod+i8mm")
#define PK_DOT4(acc, w, x, lane) vdotq_laneq_s32(acc, w, x, lane)
#define PK_FN(name) name##_i8mm
#define PK_USDOT 1
#include "kernels/arm_neon_pack_impl.h"
#undef PK_USDOT
#undef PK_DOT4
#undef PK_FN
#pragma GCC pop_options

void clb_kernels_fill_neon_pack(clb_kernels *k, clb_pgemm_fn *pgemm, clb_pgemm_fn *rgemm, int level) {
    (void)k;
    if (level >= 2) {
        pgemm[CLB_DT_Q4_0] = pgemm_q4_0_i8mm, rgemm[CLB_DT_Q4_0] = rgemm_q4_0_i8mm;
        pgemm[CLB_DT_Q8_0] = pgemm_q8_0_i8mm, rgemm[CLB_DT_Q8_0] = rgemm_q8_0_i8mm;
        pgemm[CLB_DT_Q4_K] = pgemm_q4_k_i8mm, rgemm[CLB_DT_Q4_K] = rgemm_q4_k_i8mm;
    } else if (level == 1) {
        pgemm[CLB_DT_Q4_0] = pgemm_q4_0_dot, rgemm[CLB_DT_Q4_0] = rgemm_q4_0_dot;
        pgemm[CLB_DT_Q8_0] = pgemm_q8_0_dot, rgemm[CLB_DT_Q8_0] = rgemm_q8_0_dot;
        pgemm[CLB_DT_Q4_K] = pgemm_q4_k_dot, rgemm[CLB_DT_Q4_K] = rgemm_q4_k_dot;
    } else {
        pgemm[CLB_DT_Q4_0] = pgemm_q4_0_plain, rgemm[CLB_DT_Q4_0] = rgemm_q4_0_plain;
        pgemm[CLB_DT_Q8_0] = pgemm_q8_0_plain, rgemm[CLB_DT_Q8_0] = rgemm_q8_0_plain;
        pgemm[CLB_DT_Q4_K] = pgemm_q4_k_plain, rgemm[CLB_DT_Q4_K] = rgemm_q4_k_plain;
    }
}

#else
typedef int clb_arm_neon_pack_empty_tu; /* ISO C forbids an empty translation unit */
#endif /* __aarch64__ */
