/* arm_neon_body_impl.h — the NEON integer dot products, included twice by arm_neon.c:
 * once with NEON_DOT16 = plain NEON (vmull_s8 + pairwise add) and NEON_FN(x) = x##_plain,
 * once with NEON_DOT16 = vdotq_s32 (SDOT) and NEON_FN(x) = x##_dot.
 *
 * NEON_DOT16(acc, a, b): int32x4 acc plus the products of 16 int8 pairs (how the 16 sums
 * spread over the 4 lanes differs between the variants; only lane totals are used).
 * Unsigned quants up to 63 are fed as int8 directly (no offset needed with a signed dot).
 * No include guard on purpose.
 */

static inline int32_t NEON_FN(dot32)(const int8x16_t a0, const int8x16_t a1, const int8_t *y) {
    int32x4_t p = NEON_DOT16(vdupq_n_s32(0), a0, vld1q_s8(y));
    p = NEON_DOT16(p, a1, vld1q_s8(y + 16));
    return vaddvq_s32(p);
}

static inline int32_t NEON_FN(dot16)(const int8x16_t a, const int8_t *y) {
    return vaddvq_s32(NEON_DOT16(vdupq_n_s32(0), a, vld1q_s8(y)));
}

static void NEON_FN(vec_dot_q8_0)(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q8_0 *a = w, *b = x;
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = acc0;
    const int64_t nb = n / CLB_QK;
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        int32x4_t p0 = NEON_DOT16(vdupq_n_s32(0), vld1q_s8(a[i].qs), vld1q_s8(b[i].qs));
        p0 = NEON_DOT16(p0, vld1q_s8(a[i].qs + 16), vld1q_s8(b[i].qs + 16));
        int32x4_t p1 = NEON_DOT16(vdupq_n_s32(0), vld1q_s8(a[i + 1].qs), vld1q_s8(b[i + 1].qs));
        p1 = NEON_DOT16(p1, vld1q_s8(a[i + 1].qs + 16), vld1q_s8(b[i + 1].qs + 16));
        acc0 = vfmaq_n_f32(acc0, vcvtq_f32_s32(p0), fp16(a[i].d) * fp16(b[i].d));
        acc1 = vfmaq_n_f32(acc1, vcvtq_f32_s32(p1), fp16(a[i + 1].d) * fp16(b[i + 1].d));
    }
    for (; i < nb; i++) {
        int32x4_t p = NEON_DOT16(vdupq_n_s32(0), vld1q_s8(a[i].qs), vld1q_s8(b[i].qs));
        p = NEON_DOT16(p, vld1q_s8(a[i].qs + 16), vld1q_s8(b[i].qs + 16));
        acc0 = vfmaq_n_f32(acc0, vcvtq_f32_s32(p), fp16(a[i].d) * fp16(b[i].d));
    }
    *out = vaddvq_f32(vaddq_f32(acc0, acc1));
}

static void NEON_FN(vec_dot_q4_0)(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q4_0 *a = w;
    const clb_block_q8_0 *b = x;
    const int8x16_t off = vdupq_n_s8(8);
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < n / CLB_QK; i++) {
        uint8x16_t lo, hi;
        unpack_nibbles(a[i].qs, &lo, &hi);
        int32x4_t p = NEON_DOT16(vdupq_n_s32(0), vsubq_s8(vreinterpretq_s8_u8(lo), off), vld1q_s8(b[i].qs));
        p = NEON_DOT16(p, vsubq_s8(vreinterpretq_s8_u8(hi), off), vld1q_s8(b[i].qs + 16));
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), fp16(a[i].d) * fp16(b[i].d));
    }
    *out = vaddvq_f32(acc);
}

static void NEON_FN(vec_dot_q4_1)(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q4_1 *a = w;
    const clb_block_q8_0 *b = x;
    float s = 0.0f;
    for (int64_t i = 0; i < n / CLB_QK; i++) {
        uint8x16_t lo, hi;
        unpack_nibbles(a[i].qs, &lo, &hi);
        const int32_t sumi = NEON_FN(dot32)(vreinterpretq_s8_u8(lo), vreinterpretq_s8_u8(hi), b[i].qs);
        const int32_t sumx = sum_i8x32(b[i].qs);
        const float dx = fp16(b[i].d);
        s += (float)sumi * (fp16(a[i].d) * dx) + (float)sumx * (fp16(a[i].m) * dx);
    }
    *out = s;
}

static void NEON_FN(vec_dot_q5_0)(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q5_0 *a = w;
    const clb_block_q8_0 *b = x;
    const int8x16_t off = vdupq_n_s8(16);
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < n / CLB_QK; i++) {
        uint8x16_t lo, hi, hb0, hb1;
        unpack_nibbles(a[i].qs, &lo, &hi);
        fifth_bits(a[i].qh, &hb0, &hb1);
        const int8x16_t q0 = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, hb0)), off);
        const int8x16_t q1 = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(hi, hb1)), off);
        int32x4_t p = NEON_DOT16(vdupq_n_s32(0), q0, vld1q_s8(b[i].qs));
        p = NEON_DOT16(p, q1, vld1q_s8(b[i].qs + 16));
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), fp16(a[i].d) * fp16(b[i].d));
    }
    *out = vaddvq_f32(acc);
}

static void NEON_FN(vec_dot_q5_1)(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q5_1 *a = w;
    const clb_block_q8_0 *b = x;
    float s = 0.0f;
    for (int64_t i = 0; i < n / CLB_QK; i++) {
        uint8x16_t lo, hi, hb0, hb1;
        unpack_nibbles(a[i].qs, &lo, &hi);
        fifth_bits(a[i].qh, &hb0, &hb1);
        const int32_t sumi = NEON_FN(dot32)(vreinterpretq_s8_u8(vorrq_u8(lo, hb0)),
                                            vreinterpretq_s8_u8(vorrq_u8(hi, hb1)), b[i].qs);
        const int32_t sumx = sum_i8x32(b[i].qs);
        const float dx = fp16(b[i].d);
        s += (float)sumi * (fp16(a[i].d) * dx) + (float)sumx * (fp16(a[i].m) * dx);
    }
    *out = s;
}

/* IQ4_NL and MXFP4: nibble -> int8 codebook value by table lookup. */
static void NEON_FN(vec_dot_iq4_nl)(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_iq4_nl *a = w;
    const clb_block_q8_0 *b = x;
    const int8x16_t tab = vld1q_s8(clb_kvalues_iq4nl);
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < n / CLB_QK; i++) {
        uint8x16_t lo, hi;
        unpack_nibbles(a[i].qs, &lo, &hi);
        int32x4_t p = NEON_DOT16(vdupq_n_s32(0), vqtbl1q_s8(tab, lo), vld1q_s8(b[i].qs));
        p = NEON_DOT16(p, vqtbl1q_s8(tab, hi), vld1q_s8(b[i].qs + 16));
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), fp16(a[i].d) * fp16(b[i].d));
    }
    *out = vaddvq_f32(acc);
}

static void NEON_FN(vec_dot_mxfp4)(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_mxfp4 *a = w;
    const clb_block_q8_0 *b = x;
    const int8x16_t tab = vld1q_s8(clb_kvalues_mxfp4);
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < n / CLB_QK; i++) {
        uint8x16_t lo, hi;
        unpack_nibbles(a[i].qs, &lo, &hi);
        int32x4_t p = NEON_DOT16(vdupq_n_s32(0), vqtbl1q_s8(tab, lo), vld1q_s8(b[i].qs));
        p = NEON_DOT16(p, vqtbl1q_s8(tab, hi), vld1q_s8(b[i].qs + 16));
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(p), clb_e8m0_to_fp32_half(a[i].e) * fp16(b[i].d));
    }
    *out = vaddvq_f32(acc);
}

/* ---- 256-weight blocks x Q8_K -------------------------------------------------------- */

static void NEON_FN(vec_dot_q2_k)(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q2_k *a = w;
    const clb_block_q8_k *b = x;
    const uint8x16_t m3 = vdupq_n_u8(3);
    float s = 0.0f;
    for (int64_t i = 0; i < n / CLB_QK_K; i++) {
        const uint8_t *sc = a[i].scales;
        int32_t summ = 0, isum = 0;
        for (int j = 0; j < 16; j++) summ += (sc[j] >> 4) * b[i].bsums[j];
        const int8_t *qx = b[i].qs;
        for (int half = 0; half < 2; half++) {
            const uint8x16_t q0 = vld1q_u8(a[i].qs + 32 * half), q1 = vld1q_u8(a[i].qs + 32 * half + 16);
            for (int p = 0; p < 4; p++, qx += 32, sc += 2) {
                const int8x16_t sh = vdupq_n_s8((int8_t)(-2 * p));
                const int8x16_t v0 = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(q0, sh), m3));
                const int8x16_t v1 = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(q1, sh), m3));
                isum += (sc[0] & 0xF) * NEON_FN(dot16)(v0, qx) + (sc[1] & 0xF) * NEON_FN(dot16)(v1, qx + 16);
            }
        }
        s += (b[i].d * fp16(a[i].d)) * (float)isum - (b[i].d * fp16(a[i].dmin)) * (float)summ;
    }
    *out = s;
}

static void NEON_FN(vec_dot_q3_k)(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q3_k *a = w;
    const clb_block_q8_k *b = x;
    const uint8x16_t m3 = vdupq_n_u8(3), one = vdupq_n_u8(1);
    float s = 0.0f;
    for (int64_t i = 0; i < n / CLB_QK_K; i++) {
        int8_t sc[16];
        clb_q3k_scales(a[i].scales, sc);
        /* q = (low 2 bits | high bit << 2) - 4: dot the unsigned part, subtract 4*sum(x) */
        int32_t isum = 0;
        for (int j = 0; j < 16; j++) isum -= 4 * (sc[j] - 32) * b[i].bsums[j];
        const uint8x16_t h0 = vld1q_u8(a[i].hmask), h1 = vld1q_u8(a[i].hmask + 16);
        const int8_t *qx = b[i].qs;
        int k = 0;
        for (int half = 0; half < 2; half++) {
            const uint8x16_t q0 = vld1q_u8(a[i].qs + 32 * half), q1 = vld1q_u8(a[i].qs + 32 * half + 16);
            for (int p = 0; p < 4; p++, k++, qx += 32) {
                const int8x16_t sh = vdupq_n_s8((int8_t)(-2 * p)), shk = vdupq_n_s8((int8_t)-k);
                const uint8x16_t b0 = vshlq_n_u8(vandq_u8(vshlq_u8(h0, shk), one), 2);
                const uint8x16_t b1 = vshlq_n_u8(vandq_u8(vshlq_u8(h1, shk), one), 2);
                const int8x16_t v0 = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(vshlq_u8(q0, sh), m3), b0));
                const int8x16_t v1 = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(vshlq_u8(q1, sh), m3), b1));
                isum += (sc[2 * k] - 32) * NEON_FN(dot16)(v0, qx) + (sc[2 * k + 1] - 32) * NEON_FN(dot16)(v1, qx + 16);
            }
        }
        s += (b[i].d * fp16(a[i].d)) * (float)isum;
    }
    *out = s;
}

/* Q4_K / Q5_K (hb = qh or NULL) */
static inline float NEON_FN(dot_k4)(const uint8_t *scales, uint16_t d16, uint16_t dmin16, const uint8_t *qs,
                                    const uint8_t *hb, const clb_block_q8_k *b) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F), one = vdupq_n_u8(1);
    uint8x16_t h0 = vdupq_n_u8(0), h1 = h0;
    if (hb) {
        h0 = vld1q_u8(hb);
        h1 = vld1q_u8(hb + 16);
    }
    const int8_t *qx = b->qs;
    int32_t isum = 0, summ = 0;
    for (int c = 0; c < 4; c++, qs += 32, qx += 64) {
        const uint8x16_t q0 = vld1q_u8(qs), q1 = vld1q_u8(qs + 16);
        for (int h = 0; h < 2; h++) {
            const int sb = 2 * c + h;
            uint8_t sc, m;
            clb_k4_scale_min(sb, scales, &sc, &m);
            uint8x16_t v0 = h ? vshrq_n_u8(q0, 4) : vandq_u8(q0, m4);
            uint8x16_t v1 = h ? vshrq_n_u8(q1, 4) : vandq_u8(q1, m4);
            if (hb) {
                const int8x16_t shs = vdupq_n_s8((int8_t)-sb);
                v0 = vorrq_u8(v0, vshlq_n_u8(vandq_u8(vshlq_u8(h0, shs), one), 4));
                v1 = vorrq_u8(v1, vshlq_n_u8(vandq_u8(vshlq_u8(h1, shs), one), 4));
            }
            isum += sc * NEON_FN(dot32)(vreinterpretq_s8_u8(v0), vreinterpretq_s8_u8(v1), qx + 32 * h);
            summ += m * (b->bsums[2 * sb] + b->bsums[2 * sb + 1]);
        }
    }
    return (b->d * fp16(d16)) * (float)isum - (b->d * fp16(dmin16)) * (float)summ;
}

static void NEON_FN(vec_dot_q4_k)(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q4_k *a = w;
    const clb_block_q8_k *b = x;
    float s = 0.0f;
    for (int64_t i = 0; i < n / CLB_QK_K; i++)
        s += NEON_FN(dot_k4)(a[i].scales, a[i].d, a[i].dmin, a[i].qs, NULL, &b[i]);
    *out = s;
}

static void NEON_FN(vec_dot_q5_k)(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q5_k *a = w;
    const clb_block_q8_k *b = x;
    float s = 0.0f;
    for (int64_t i = 0; i < n / CLB_QK_K; i++)
        s += NEON_FN(dot_k4)(a[i].scales, a[i].d, a[i].dmin, a[i].qs, a[i].qh, &b[i]);
    *out = s;
}

static void NEON_FN(vec_dot_q6_k)(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_q6_k *a = w;
    const clb_block_q8_k *b = x;
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(3);
    const int8x16_t off = vdupq_n_s8(32);
    float s = 0.0f;
    for (int64_t i = 0; i < n / CLB_QK_K; i++) {
        const uint8_t *ql = a[i].ql, *qh = a[i].qh;
        const int8_t *sc = a[i].scales, *qx = b[i].qs;
        int32_t isum = 0;
        for (int half = 0; half < 2; half++, ql += 64, qh += 32, sc += 8, qx += 128) {
            for (int g = 0; g < 2; g++) { /* weights l = 16g .. 16g+15 of each 32-run */
                const uint8x16_t la = vld1q_u8(ql + 16 * g), lb = vld1q_u8(ql + 32 + 16 * g);
                const uint8x16_t h = vld1q_u8(qh + 16 * g);
                const uint8x16_t u0 = vorrq_u8(vandq_u8(la, m4), vshlq_n_u8(vandq_u8(h, m3), 4));
                const uint8x16_t u1 = vorrq_u8(vandq_u8(lb, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(h, 2), m3), 4));
                const uint8x16_t u2 = vorrq_u8(vshrq_n_u8(la, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(h, 4), m3), 4));
                const uint8x16_t u3 = vorrq_u8(vshrq_n_u8(lb, 4), vshlq_n_u8(vshrq_n_u8(h, 6), 4));
                isum += sc[g + 0] * NEON_FN(dot16)(vsubq_s8(vreinterpretq_s8_u8(u0), off), qx + 16 * g);
                isum += sc[g + 2] * NEON_FN(dot16)(vsubq_s8(vreinterpretq_s8_u8(u1), off), qx + 32 + 16 * g);
                isum += sc[g + 4] * NEON_FN(dot16)(vsubq_s8(vreinterpretq_s8_u8(u2), off), qx + 64 + 16 * g);
                isum += sc[g + 6] * NEON_FN(dot16)(vsubq_s8(vreinterpretq_s8_u8(u3), off), qx + 96 + 16 * g);
            }
        }
        s += (b[i].d * fp16(a[i].d)) * (float)isum;
    }
    *out = s;
}

static void NEON_FN(vec_dot_iq4_xs)(int64_t n, float *out, const void *w, const void *x) {
    const clb_block_iq4_xs *a = w;
    const clb_block_q8_k *b = x;
    const int8x16_t tab = vld1q_s8(clb_kvalues_iq4nl);
    float s = 0.0f;
    for (int64_t i = 0; i < n / CLB_QK_K; i++) {
        int32_t isum = 0;
        for (int ib = 0; ib < 8; ib++) {
            const int ls = ((a[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((a[i].scales_h >> (2 * ib)) & 3) << 4);
            uint8x16_t lo, hi;
            unpack_nibbles(a[i].qs + 16 * ib, &lo, &hi);
            isum += (ls - 32) * NEON_FN(dot32)(vqtbl1q_s8(tab, lo), vqtbl1q_s8(tab, hi), b[i].qs + 32 * ib);
        }
        s += (b[i].d * fp16(a[i].d)) * (float)isum;
    }
    *out = s;
}

static void NEON_FN(fill)(clb_kernels *k) {
    k->vec_dot[CLB_DT_Q8_0] = NEON_FN(vec_dot_q8_0);
    k->vec_dot[CLB_DT_Q4_0] = NEON_FN(vec_dot_q4_0);
    k->vec_dot[CLB_DT_Q4_1] = NEON_FN(vec_dot_q4_1);
    k->vec_dot[CLB_DT_Q5_0] = NEON_FN(vec_dot_q5_0);
    k->vec_dot[CLB_DT_Q5_1] = NEON_FN(vec_dot_q5_1);
    k->vec_dot[CLB_DT_IQ4_NL] = NEON_FN(vec_dot_iq4_nl);
    k->vec_dot[CLB_DT_MXFP4] = NEON_FN(vec_dot_mxfp4);
    k->vec_dot[CLB_DT_Q2_K] = NEON_FN(vec_dot_q2_k);
    k->vec_dot[CLB_DT_Q3_K] = NEON_FN(vec_dot_q3_k);
    k->vec_dot[CLB_DT_Q4_K] = NEON_FN(vec_dot_q4_k);
    k->vec_dot[CLB_DT_Q5_K] = NEON_FN(vec_dot_q5_k);
    k->vec_dot[CLB_DT_Q6_K] = NEON_FN(vec_dot_q6_k);
    k->vec_dot[CLB_DT_IQ4_XS] = NEON_FN(vec_dot_iq4_xs);
}
