/* arm_neon_pack_impl.h — the body of the NEON packed-row kernels (arm_neon_pack.c),
 * included once per instruction-set level with:
 *   PK_FN(name)              the level's suffix on every function name
 *   PK_DOT4(acc, w, x, lane) int32x4 acc + the dot products of the four 4-byte words of w
 *                            (int8x16) with 4-byte word `lane` of x (int8x16)
 *   PK_USDOT                 defined when Q8_0 weights are used as stored (+128, unsigned)
 *                            with USDOT (FEAT_I8MM) and the activation's -128 * sum(q)
 * One group is 16 rows = 4 "quads" of 4 rows, one int32x4 / float32x4 lane per row. For
 * each quad, the 8 words of a 32-weight block (Q8_0: 8 words of bytes, Q4_0: 4 words of
 * nibble bytes, low and high) are one vector each, from the packed layout (one load) or
 * from 4 row-major rows (loads and a 4x4 transpose in registers: the same operands). */

#ifndef PK_UNROLL
#define PK_UNROLL _Pragma("GCC unroll 8") /* the register arrays below must not live in memory */
#endif

/* 4x4 transpose of 32-bit words: out[k] lane i = word k of in[i] */
static inline __attribute__((always_inline)) void PK_FN(tr4)(uint32x4_t v0, uint32x4_t v1, uint32x4_t v2,
                                                             uint32x4_t v3, uint32x4_t out[4]) {
    const uint32x4_t t0 = vtrn1q_u32(v0, v1), t1 = vtrn2q_u32(v0, v1);
    const uint32x4_t t2 = vtrn1q_u32(v2, v3), t3 = vtrn2q_u32(v2, v3);
    out[0] = vreinterpretq_u32_u64(vtrn1q_u64(vreinterpretq_u64_u32(t0), vreinterpretq_u64_u32(t2)));
    out[1] = vreinterpretq_u32_u64(vtrn1q_u64(vreinterpretq_u64_u32(t1), vreinterpretq_u64_u32(t3)));
    out[2] = vreinterpretq_u32_u64(vtrn2q_u64(vreinterpretq_u64_u32(t0), vreinterpretq_u64_u32(t2)));
    out[3] = vreinterpretq_u32_u64(vtrn2q_u64(vreinterpretq_u64_u32(t1), vreinterpretq_u64_u32(t3)));
}

/* the 16 bytes at off of the 4 rows rs bytes apart from p, transposed by words */
static inline __attribute__((always_inline)) void PK_FN(rm4)(const uint8_t *p, uint64_t rs, uint64_t off,
                                                             uint32x4_t out[4]) {
    PK_FN(tr4)(vld1q_u32((const uint32_t *)(const void *)(p + off)),
               vld1q_u32((const uint32_t *)(const void *)(p + rs + off)),
               vld1q_u32((const uint32_t *)(const void *)(p + 2 * rs + off)),
               vld1q_u32((const uint32_t *)(const void *)(p + 3 * rs + off)), out);
}

/* the 8 dot words of one quad against one token's 32 activation bytes (x0, x1) */
#define PK_DOT8(a, W, x0, x1)                                                                             \
    do {                                                                                                  \
        a = PK_DOT4(a, W[0], x0, 0);                                                                      \
        a = PK_DOT4(a, W[1], x0, 1);                                                                      \
        a = PK_DOT4(a, W[2], x0, 2);                                                                      \
        a = PK_DOT4(a, W[3], x0, 3);                                                                      \
        a = PK_DOT4(a, W[4], x1, 0);                                                                      \
        a = PK_DOT4(a, W[5], x1, 1);                                                                      \
        a = PK_DOT4(a, W[6], x1, 2);                                                                      \
        a = PK_DOT4(a, W[7], x1, 3);                                                                      \
    } while (0)

/* Q4_0 (Q8 = 0) or Q8_0 (Q8 = 1), one group against T <= 2 tokens. Per row and block the
   integer sum is exact and the float step is generic.c's: acc + (float)sumi * (dw * dx),
   a multiply and an add (no fused multiply-add), so every output has the portable bits. */
static inline __attribute__((always_inline)) void PK_FN(ptile)(int64_t nb, const int T, const int Q8, const int PK,
                                                               const uint8_t *w, uint64_t rs, const uint8_t *x,
                                                               uint64_t xs, float *y, int64_t ys) {
    const uint64_t xoff = clb_q8x_offset(nb * CLB_QK);
    const uint64_t bb = Q8 ? sizeof(clb_block_q8_0) : sizeof(clb_block_q4_0), bstride = CLB_PACK_ROWS * bb;
    float32x4_t acc[2][4];
    PK_UNROLL
    for (int t = 0; t < T; t++)
        PK_UNROLL
        for (int q = 0; q < 4; q++) acc[t][q] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = PK ? w + (uint64_t)b * bstride : w + (uint64_t)b * bb;
        int8x16_t xq[2][2];
        float dx[2];
        int32_t corr[2];
        PK_UNROLL
        for (int t = 0; t < T; t++) {
            const uint8_t *xt = x + (uint64_t)t * xs, *xb = xt + (uint64_t)b * sizeof(clb_block_q8_0) + 2;
            xq[t][0] = vld1q_s8((const int8_t *)xb);
            xq[t][1] = vld1q_s8((const int8_t *)xb + 16);
            memcpy(&dx[t], xt + xoff + 4 * (uint64_t)b, 4);
#if defined(PK_USDOT)
            memcpy(&corr[t], xt + xoff + 4 * (uint64_t)((Q8 ? 2 : 1) * nb + b), 4);
#else
            if (Q8) corr[t] = 0;
            else memcpy(&corr[t], xt + xoff + 4 * (uint64_t)(nb + b), 4);
#endif
        }
        PK_UNROLL
        for (int q = 0; q < 4; q++) {
            float32x4_t dw;
            uint8x16_t W[8];
            if (PK) {
                dw = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)wb + 4 * q)));
                if (Q8) {
                    PK_UNROLL
                    for (int k = 0; k < 8; k++) W[k] = vld1q_u8(wb + 32 + 64 * k + 16 * q);
#if !defined(PK_USDOT)
                    PK_UNROLL
                    for (int k = 0; k < 8; k++) W[k] = veorq_u8(W[k], vdupq_n_u8(0x80));
#endif
                } else {
                    PK_UNROLL
                    for (int g = 0; g < 4; g++) W[g] = vld1q_u8(wb + 32 + 64 * g + 16 * q);
                }
            } else {
                const uint8_t *r0 = wb + (uint64_t)(4 * q) * rs;
                uint16_t h[4];
                for (int i = 0; i < 4; i++) memcpy(&h[i], r0 + (uint64_t)i * rs, 2);
                dw = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
                uint32x4_t v[4];
                PK_FN(rm4)(r0, rs, 2, v);
                PK_UNROLL
                for (int k = 0; k < 4; k++) W[k] = vreinterpretq_u8_u32(v[k]);
                if (Q8) {
                    PK_FN(rm4)(r0, rs, 18, v);
                    PK_UNROLL
                    for (int k = 0; k < 4; k++) W[4 + k] = vreinterpretq_u8_u32(v[k]);
#if defined(PK_USDOT)
                    PK_UNROLL
                    for (int k = 0; k < 8; k++) W[k] = veorq_u8(W[k], vdupq_n_u8(0x80));
#endif
                }
            }
            if (!Q8) {
                PK_UNROLL
                for (int g = 3; g >= 0; g--) {
                    W[4 + g] = vshrq_n_u8(W[g], 4);
                    W[g] = vandq_u8(W[g], vdupq_n_u8(0x0F));
                }
            }
            PK_UNROLL
            for (int t = 0; t < T; t++) {
                int32x4_t a = vdupq_n_s32(corr[t]);
#if defined(PK_USDOT)
                if (Q8) {
                    a = vusdotq_laneq_s32(a, W[0], xq[t][0], 0);
                    a = vusdotq_laneq_s32(a, W[1], xq[t][0], 1);
                    a = vusdotq_laneq_s32(a, W[2], xq[t][0], 2);
                    a = vusdotq_laneq_s32(a, W[3], xq[t][0], 3);
                    a = vusdotq_laneq_s32(a, W[4], xq[t][1], 0);
                    a = vusdotq_laneq_s32(a, W[5], xq[t][1], 1);
                    a = vusdotq_laneq_s32(a, W[6], xq[t][1], 2);
                    a = vusdotq_laneq_s32(a, W[7], xq[t][1], 3);
                } else
#endif
                {
                    int8x16_t S[8];
                    PK_UNROLL
                    for (int k = 0; k < 8; k++) S[k] = vreinterpretq_s8_u8(W[k]);
                    PK_DOT8(a, S, xq[t][0], xq[t][1]);
                }
                const float32x4_t s = vmulq_f32(dw, vdupq_n_f32(dx[t]));
                acc[t][q] = vaddq_f32(acc[t][q], vmulq_f32(vcvtq_f32_s32(a), s));
            }
        }
    }
    PK_UNROLL
    for (int t = 0; t < T; t++)
        for (int q = 0; q < 4; q++) vst1q_f32(y + (int64_t)t * ys + 4 * q, acc[t][q]);
}

/* the 4 bytes of each 32-bit lane of v as 4 vectors of int32 lanes, lowest byte first */
static inline __attribute__((always_inline)) void PK_FN(bytes4)(uint32x4_t v, int32x4_t out[4]) {
    const uint32x4_t byte = vdupq_n_u32(0xFF);
    out[0] = vreinterpretq_s32_u32(vandq_u32(v, byte));
    out[1] = vreinterpretq_s32_u32(vandq_u32(vshrq_n_u32(v, 8), byte));
    out[2] = vreinterpretq_s32_u32(vandq_u32(vshrq_n_u32(v, 16), byte));
    out[3] = vreinterpretq_s32_u32(vshrq_n_u32(v, 24));
}

/* Q4_K, one group against one token (packed layout: x86_avx512.c / pack.c). Per row and
   super-block: isum = sum_j sc_j * (q.x)_j and summ = sum_j m_j * bsum_j exactly, then
   generic.c's dall * isum - dmin * summ added to the row's sum, with its roundings. */
static inline __attribute__((always_inline)) void PK_FN(ptile_q4k)(int64_t nsb, const int PK, const uint8_t *w,
                                                                   uint64_t rs, const uint8_t *x, float *y) {
    const uint32x4_t m4 = vdupq_n_u32(0x0F0F0F0F), m6 = vdupq_n_u32(0x3F3F3F3F), m30 = vdupq_n_u32(0x30303030);
    float32x4_t acc[4];
    PK_UNROLL
    for (int q = 0; q < 4; q++) acc[q] = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < nsb; i++) {
        const uint8_t *wb = w + (uint64_t)i * (PK ? CLB_PACK_ROWS * sizeof(clb_block_q4_k) : sizeof(clb_block_q4_k));
        const clb_block_q8_k *xb = (const clb_block_q8_k *)(const void *)x + i;
        int32_t bsum[8];
        PK_UNROLL
        for (int j = 0; j < 8; j++) bsum[j] = xb->bsums[2 * j] + xb->bsums[2 * j + 1];
        PK_UNROLL
        for (int q = 0; q < 4; q++) {
            const uint8_t *r0 = wb + (uint64_t)(4 * q) * rs;
            uint32x4_t h4[4];
            if (PK) {
                PK_UNROLL
                for (int c = 0; c < 4; c++) h4[c] = vld1q_u32((const uint32_t *)(const void *)(wb + 64 * c + 16 * q));
            } else {
                PK_FN(rm4)(r0, rs, 0, h4);
            }
            const uint32x4_t dd = h4[0], u0 = h4[1], u1 = h4[2], u2 = h4[3];
            const float32x4_t d = vcvt_f32_f16(vreinterpret_f16_u16(vmovn_u32(dd)));
            const float32x4_t dmin = vcvt_f32_f16(vreinterpret_f16_u16(vshrn_n_u32(dd, 16)));
            const uint32x4_t sca = vandq_u32(u0, m6);
            const uint32x4_t scb = vorrq_u32(vandq_u32(u2, m4), vandq_u32(vshrq_n_u32(u0, 2), m30));
            const uint32x4_t mna = vandq_u32(u1, m6);
            const uint32x4_t mnb = vorrq_u32(vandq_u32(vshrq_n_u32(u2, 4), m4), vandq_u32(vshrq_n_u32(u1, 2), m30));
            int32x4_t sc[8], mn[8];
            PK_FN(bytes4)(sca, sc);
            PK_FN(bytes4)(scb, sc + 4);
            PK_FN(bytes4)(mna, mn);
            PK_FN(bytes4)(mnb, mn + 4);
            int32x4_t summ = vdupq_n_s32(0), isum = vdupq_n_s32(0);
            PK_UNROLL
            for (int j = 0; j < 8; j++) summ = vmlaq_n_s32(summ, mn[j], bsum[j]);
            PK_UNROLL
            for (int c = 0; c < 4; c++) {
                uint8x16_t W[8];
                if (PK) {
                    PK_UNROLL
                    for (int k = 0; k < 8; k++) W[k] = vld1q_u8(wb + 256 + 64 * (8 * c + k) + 16 * q);
                } else {
                    uint32x4_t v[4];
                    PK_FN(rm4)(r0, rs, 16 + 32 * (uint64_t)c, v);
                    PK_UNROLL
                    for (int k = 0; k < 4; k++) W[k] = vreinterpretq_u8_u32(v[k]);
                    PK_FN(rm4)(r0, rs, 32 + 32 * (uint64_t)c, v);
                    PK_UNROLL
                    for (int k = 0; k < 4; k++) W[4 + k] = vreinterpretq_u8_u32(v[k]);
                }
                int8x16_t lo[8], hi[8];
                PK_UNROLL
                for (int k = 0; k < 8; k++) {
                    lo[k] = vreinterpretq_s8_u8(vandq_u8(W[k], vdupq_n_u8(0x0F)));
                    hi[k] = vreinterpretq_s8_u8(vshrq_n_u8(W[k], 4));
                }
                const int8_t *qx = xb->qs + 64 * c;
                int32x4_t t0 = vdupq_n_s32(0), t1 = vdupq_n_s32(0);
                PK_DOT8(t0, lo, vld1q_s8(qx), vld1q_s8(qx + 16));
                PK_DOT8(t1, hi, vld1q_s8(qx + 32), vld1q_s8(qx + 48));
                isum = vmlaq_s32(isum, t0, sc[2 * c]);
                isum = vmlaq_s32(isum, t1, sc[2 * c + 1]);
            }
            const float32x4_t dall = vmulq_n_f32(d, xb->d), dm = vmulq_n_f32(dmin, xb->d);
            const float32x4_t v = vsubq_f32(vmulq_f32(dall, vcvtq_f32_s32(isum)), vmulq_f32(dm, vcvtq_f32_s32(summ)));
            acc[q] = vaddq_f32(acc[q], v);
        }
    }
    PK_UNROLL
    for (int q = 0; q < 4; q++) vst1q_f32(y + 4 * q, acc[q]);
}

#define PK_PT_Q4_0(nb, T, ...) PK_FN(ptile)(nb, T, 0, 1, __VA_ARGS__)
#define PK_PT_Q8_0(nb, T, ...) PK_FN(ptile)(nb, T, 1, 1, __VA_ARGS__)
#define PK_RT_Q4_0(nb, T, ...) PK_FN(ptile)(nb, T, 0, 0, __VA_ARGS__)
#define PK_RT_Q8_0(nb, T, ...) PK_FN(ptile)(nb, T, 1, 0, __VA_ARGS__)
#define PK_PT_Q4_K(nb, T, w, rs, x, xs, y, ys) PK_FN(ptile_q4k)(nb, 1, w, rs, x, y)
#define PK_RT_Q4_K(nb, T, w, rs, x, xs, y, ys) PK_FN(ptile_q4k)(nb, 0, w, rs, x, y)
CLB_DEFINE_PGEMM(PK_FN(pgemm_q4_0), CLB_QK, 2, PK_PT_Q4_0)
CLB_DEFINE_PGEMM(PK_FN(pgemm_q8_0), CLB_QK, 2, PK_PT_Q8_0)
CLB_DEFINE_PGEMM(PK_FN(rgemm_q4_0), CLB_QK, 2, PK_RT_Q4_0)
CLB_DEFINE_PGEMM(PK_FN(rgemm_q8_0), CLB_QK, 2, PK_RT_Q8_0)
CLB_DEFINE_PGEMM(PK_FN(pgemm_q4_k), CLB_QK_K, 1, PK_PT_Q4_K)
CLB_DEFINE_PGEMM(PK_FN(rgemm_q4_k), CLB_QK_K, 1, PK_RT_Q4_K)
#undef PK_PT_Q4_0
#undef PK_PT_Q8_0
#undef PK_RT_Q4_0
#undef PK_RT_Q8_0
#undef PK_PT_Q4_K
#undef PK_RT_Q4_K
#undef PK_DOT8
