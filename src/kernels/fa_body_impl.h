/* fa_body_impl.h — the flash-attention inner loops (kernels.h: fa_scores, fa_vacc,
 * fa_exp_sum) written once over a small vector vocabulary, included by each SIMD file
 * (x86_avx2.c, x86_avx512.c, arm_neon.c) with its own definitions of:
 *
 *   FA_FN(name)             the function name for this ISA
 *   FA_VL, FA_V             lanes, vector type of floats
 *   FA_ZERO(), FA_SET1(x), FA_LOAD(p), FA_STORE(p, v), FA_ADD, FA_SUB, FA_MUL, FA_MAX
 *   FA_FMA(a, b, c)         a * b + c, fused
 *   FA_HSUM(v)              sum of the lanes (a fixed order)
 *   FA_HMAX(v)              the largest lane
 *   FA_LD_F16(p), FA_LD_BF16(p)   FA_VL half / bfloat values -> floats
 *   FA_LD_I8(p)             FA_VL int8 -> floats
 *   FA_LD_Q4(qs, g)         elements [g * FA_VL, (g + 1) * FA_VL) of a Q4_0 block's 16 nibble
 *                           bytes (q - 8) -> floats
 *   FA_FLOOR(v), FA_POW2(y, n)    floor; y * 2^n for integral n in [-126, 127]
 *   FA_KEEP_ABOVE(x, t, y)  y where x > t, else 0
 *   FA_TQ, FA_TK            scores tile: queries x keys (accumulators in registers)
 *   FA_VR, FA_VC            value tile: query rows x vectors of one row (float-like values)
 *   FA_VRB                  query rows of a value tile of 32-value blocks
 *   FA_F16_1(h)             optional: one half -> float (exact; default clb_fp16_to_fp32)
 *   FA_HSUM16(v, out)       optional: the 16 sums of a 4 x 4 scores tile at once (below)
 *
 * Every result element goes through one chain whatever the tile shape: a score is
 * FA_HSUM of one FMA chain over the FA_VL-wide chunks of the row, then the scalar tail added
 * in order; an output element is one FMA chain over the keys in order (scalar multiply-adds
 * in the tail). No include guard on purpose. */

#ifndef FA_F16_1
#define FA_F16_1(h) clb_fp16_to_fp32(h)
#endif
/* FA_HSUM16(v, out): optional, for a 4 x 4 score tile: out[4 * b + a] = FA_HSUM(v[4 * a + b])
   bit for bit (the same pairs added in the same order), the 16 sums sharing their shuffles. */
#if defined(FA_HSUM16) && FA_TQ == 4 && FA_TK == 4
#define FA_TILE_SUMS(acc)  \
    float tsum_[16];        \
    FA_HSUM16(&acc[0][0], tsum_)
#define FA_TILE_SUM(acc, a, b) tsum_[4 * (b) + (a)]
#else
#define FA_TILE_SUMS(acc) (void)0
#define FA_TILE_SUM(acc, a, b) FA_HSUM(acc[a][b])
#endif

/* ---- scores: float-like keys (f32, f16, bf16) against f32 queries ---- */

#define FA_SCORES_FLOAT(NAME, KT, LDK, KSCALAR)                                                            \
    static inline float FA_FN(NAME##_pair)(int64_t d, const float *q, const KT *k) {                       \
        const int64_t dv = d / FA_VL * FA_VL;                                                              \
        FA_V acc = FA_ZERO();                                                                              \
        for (int64_t c = 0; c < dv; c += FA_VL) acc = FA_FMA(FA_LOAD(q + c), LDK(k + c), acc);            \
        float s = FA_HSUM(acc);                                                                            \
        for (int64_t c = dv; c < d; c++) s += q[c] * KSCALAR(k[c]);                                        \
        return s;                                                                                          \
    }                                                                                                      \
    static void FA_FN(NAME)(int64_t d, int nq, int nk, const void *qv, uint64_t qs, const void *kv,        \
                            uint64_t ks, float *s, int64_t ss) {                                           \
        const uint8_t *qb = qv, *kb = kv;                                                                  \
        const int64_t dv = d / FA_VL * FA_VL;                                                              \
        int i = 0;                                                                                         \
        for (; i + FA_TQ <= nq; i += FA_TQ) {                                                              \
            int j = 0;                                                                                     \
            for (; j + FA_TK <= nk; j += FA_TK) {                                                          \
                if (i == 0)                                                                                \
                    for (int b = 0; b < FA_TK; b++)                                                        \
                        clb_fa_prefetch_row(kb + (uint64_t)(j + b + CLB_FA_AHEAD) * ks, ks);               \
                FA_V acc[FA_TQ][FA_TK];                                                                    \
                _Pragma("GCC unroll 16") for (int a = 0; a < FA_TQ; a++)                                   \
                _Pragma("GCC unroll 16") for (int b = 0; b < FA_TK; b++) acc[a][b] = FA_ZERO();            \
                for (int64_t c = 0; c < dv; c += FA_VL) {                                                  \
                    FA_V kr[FA_TK];                                                                        \
                    _Pragma("GCC unroll 16") for (int b = 0; b < FA_TK; b++)                               \
                        kr[b] = LDK((const KT *)(kb + (uint64_t)(j + b) * ks) + c);                       \
                    _Pragma("GCC unroll 16") for (int a = 0; a < FA_TQ; a++) {                             \
                        const FA_V qr = FA_LOAD((const float *)(qb + (uint64_t)(i + a) * qs) + c);         \
                        _Pragma("GCC unroll 16") for (int b = 0; b < FA_TK; b++)                           \
                            acc[a][b] = FA_FMA(qr, kr[b], acc[a][b]);                                      \
                    }                                                                                      \
                }                                                                                          \
                FA_TILE_SUMS(acc);                                                                         \
                for (int a = 0; a < FA_TQ; a++)                                                            \
                    for (int b = 0; b < FA_TK; b++) {                                                      \
                        const float *qa = (const float *)(qb + (uint64_t)(i + a) * qs);                    \
                        const KT *kr = (const KT *)(kb + (uint64_t)(j + b) * ks);                          \
                        float v = FA_TILE_SUM(acc, a, b);                                                  \
                        for (int64_t c = dv; c < d; c++) v += qa[c] * KSCALAR(kr[c]);                      \
                        s[(int64_t)(i + a) * ss + j + b] = v;                                              \
                    }                                                                                      \
            }                                                                                              \
            for (; j < nk; j++)                                                                            \
                for (int a = 0; a < FA_TQ; a++)                                                            \
                    s[(int64_t)(i + a) * ss + j] = FA_FN(NAME##_pair)(d, (const float *)(qb + (uint64_t)(i + a) * qs), \
                                                                   (const KT *)(kb + (uint64_t)j * ks));   \
        }                                                                                                  \
        for (; i < nq; i++)                                                                                \
            for (int j = 0; j < nk; j++)                                                                   \
                s[(int64_t)i * ss + j] = FA_FN(NAME##_pair)(d, (const float *)(qb + (uint64_t)i * qs),      \
                                                          (const KT *)(kb + (uint64_t)j * ks));             \
    }

#define FA_ID_F32(x) (x)
FA_SCORES_FLOAT(fa_scores_f32, float, FA_LOAD, FA_ID_F32)
FA_SCORES_FLOAT(fa_scores_f16, uint16_t, FA_LD_F16, clb_fp16_to_fp32)
FA_SCORES_FLOAT(fa_scores_bf16, uint16_t, FA_LD_BF16, clb_bf16_to_fp32)

/* ---- values: acc[i] = acc[i] * alpha[i] + sum_j p[i][j] v_j ---- */

/* row r's accumulator factor (kernels.h fa_vacc): alpha[r], or 1 without alpha */
#define FA_ALPHA(alpha, r) ((alpha) ? (alpha)[r] : 1.0f)

/* float-like rows: a tile of up to FA_VR rows x FA_VC vectors stays in registers over all keys */
#define FA_VACC_FLOAT(NAME, VT, LDV, VSCALAR)                                                              \
    static void FA_FN(NAME)(int64_t d, int nq, int nk, const float *p, int64_t ps, const void *vv,         \
                            uint64_t vs, float *acc, int64_t as, const float *alpha) {                     \
        const uint8_t *vb = vv;                                                                            \
        const int64_t dv = d / FA_VL * FA_VL, cw = (int64_t)FA_VC * FA_VL;                                 \
        for (int i = 0; i < nq; i += FA_VR) {                                                              \
            const int nr = nq - i < FA_VR ? nq - i : FA_VR;                                                \
            for (int64_t c0 = 0; c0 < dv; c0 += cw) {                                                      \
                const int nv = (int)((dv - c0 < cw ? dv - c0 : cw) / FA_VL);                                \
                if (nr == FA_VR && nv == FA_VC) {                                                          \
                    FA_V a[FA_VR][FA_VC];                                                                  \
                    _Pragma("GCC unroll 16") for (int r = 0; r < FA_VR; r++)                               \
                    _Pragma("GCC unroll 16") for (int u = 0; u < FA_VC; u++)                               \
                        a[r][u] = FA_MUL(FA_LOAD(acc + (int64_t)(i + r) * as + c0 + u * FA_VL),             \
                                         FA_SET1(FA_ALPHA(alpha, i + r)));                                 \
                    for (int j = 0; j < nk; j++) {                                                         \
                        if (i == 0 && c0 == 0) clb_fa_prefetch_row(vb + (uint64_t)(j + CLB_FA_AHEAD) * vs, vs); \
                        const VT *vj = (const VT *)(vb + (uint64_t)j * vs) + c0;                           \
                        FA_V x[FA_VC];                                                                     \
                        _Pragma("GCC unroll 16") for (int u = 0; u < FA_VC; u++) x[u] = LDV(vj + u * FA_VL); \
                        _Pragma("GCC unroll 16") for (int r = 0; r < FA_VR; r++) {                         \
                            const FA_V pr = FA_SET1(p[(int64_t)(i + r) * ps + j]);                         \
                            _Pragma("GCC unroll 16") for (int u = 0; u < FA_VC; u++)                       \
                                a[r][u] = FA_FMA(pr, x[u], a[r][u]);                                       \
                        }                                                                                  \
                    }                                                                                      \
                    _Pragma("GCC unroll 16") for (int r = 0; r < FA_VR; r++)                               \
                    _Pragma("GCC unroll 16") for (int u = 0; u < FA_VC; u++)                               \
                        FA_STORE(acc + (int64_t)(i + r) * as + c0 + u * FA_VL, a[r][u]);                    \
                    continue;                                                                              \
                }                                                                                          \
                for (int r = 0; r < nr; r++)                                                               \
                    for (int u = 0; u < nv; u++) {                                                         \
                        float *ap = acc + (int64_t)(i + r) * as + c0 + u * FA_VL;                          \
                        FA_V a1 = FA_MUL(FA_LOAD(ap), FA_SET1(FA_ALPHA(alpha, i + r)));                    \
                        for (int j = 0; j < nk; j++)                                                       \
                            a1 = FA_FMA(FA_SET1(p[(int64_t)(i + r) * ps + j]),                             \
                                        LDV((const VT *)(vb + (uint64_t)j * vs) + c0 + u * FA_VL), a1);     \
                        FA_STORE(ap, a1);                                                                  \
                    }                                                                                      \
            }                                                                                              \
            for (int r = 0; r < nr; r++)                                                                   \
                for (int64_t c = dv; c < d; c++) {                                                         \
                    float a1 = acc[(int64_t)(i + r) * as + c] * FA_ALPHA(alpha, i + r);                    \
                    for (int j = 0; j < nk; j++)                                                           \
                        a1 += p[(int64_t)(i + r) * ps + j] * VSCALAR(((const VT *)(vb + (uint64_t)j * vs))[c]); \
                    acc[(int64_t)(i + r) * as + c] = a1;                                                   \
                }                                                                                          \
        }                                                                                                  \
    }

FA_VACC_FLOAT(fa_vacc_f32, float, FA_LOAD, FA_ID_F32)
FA_VACC_FLOAT(fa_vacc_f16, uint16_t, FA_LD_F16, clb_fp16_to_fp32)
FA_VACC_FLOAT(fa_vacc_bf16, uint16_t, FA_LD_BF16, clb_bf16_to_fp32)

/* 32-value blocks (q8_0, q4_0): per key and block the values d * q once (exact: an 11-bit
   scale times a small integer), then one FMA per row and value with p broadcast */
#define FA_VACC_BLOCKS(NAME, BT, LDQ)                                                                      \
    static void FA_FN(NAME)(int64_t d, int nq, int nk, const float *p, int64_t ps, const void *vv,         \
                            uint64_t vs, float *acc, int64_t as, const float *alpha) {                     \
        const uint8_t *vb = vv;                                                                            \
        enum { G = CLB_QK / FA_VL }; /* vectors per block */                                               \
        const int64_t nb = d / CLB_QK;                                                                     \
        for (int i = 0; i < nq; i += FA_VRB) {                                                             \
            const int nr = nq - i < FA_VRB ? nq - i : FA_VRB;                                              \
            for (int64_t b = 0; b < nb; b++) {                                                             \
                FA_V a[FA_VRB][G];                                                                         \
                _Pragma("GCC unroll 16") for (int r = 0; r < FA_VRB; r++)                                  \
                _Pragma("GCC unroll 16") for (int u = 0; u < G; u++)                                       \
                    a[r][u] = r < nr ? FA_MUL(FA_LOAD(acc + (int64_t)(i + r) * as + b * CLB_QK + u * FA_VL),  \
                                              FA_SET1(FA_ALPHA(alpha, i + r)))                             \
                                     : FA_ZERO();                                                          \
                for (int j = 0; j < nk; j++) {                                                             \
                    if (i == 0 && b == 0) clb_fa_prefetch_row(vb + (uint64_t)(j + CLB_FA_AHEAD) * vs, vs); \
                    const BT *blk = (const BT *)(vb + (uint64_t)j * vs) + b;                               \
                    const FA_V dj = FA_SET1(FA_F16_1(blk->d));                                             \
                    FA_V x[G];                                                                             \
                    _Pragma("GCC unroll 16") for (int u = 0; u < G; u++) x[u] = FA_MUL(dj, LDQ(blk->qs, u)); \
                    _Pragma("GCC unroll 16") for (int r = 0; r < FA_VRB; r++) {                            \
                        if (r >= nr) break;                                                                \
                        const FA_V pr = FA_SET1(p[(int64_t)(i + r) * ps + j]);                             \
                        _Pragma("GCC unroll 16") for (int u = 0; u < G; u++) a[r][u] = FA_FMA(pr, x[u], a[r][u]); \
                    }                                                                                      \
                }                                                                                          \
                _Pragma("GCC unroll 16") for (int r = 0; r < FA_VRB; r++)                                  \
                _Pragma("GCC unroll 16") for (int u = 0; u < G; u++)                                       \
                    if (r < nr) FA_STORE(acc + (int64_t)(i + r) * as + b * CLB_QK + u * FA_VL, a[r][u]);   \
            }                                                                                              \
        }                                                                                                  \
    }

#define FA_LD_Q8(qs, u) FA_LD_I8((qs) + (u) * FA_VL)
FA_VACC_BLOCKS(fa_vacc_q8_0, clb_block_q8_0, FA_LD_Q8)
FA_VACC_BLOCKS(fa_vacc_q4_0, clb_block_q4_0, FA_LD_Q4)

/* ---- exp ---- */

/* exp(x) for x <= 0 (scores minus their maximum): Cephes' expf polynomial after the
   reduction x = n ln2 + r, |r| <= ln2 / 2 (about 1 ulp); exactly 0 below -87.3 and for -inf. */
static inline FA_V FA_FN(fa_exp)(FA_V x) {
    const FA_V n = FA_FLOOR(FA_FMA(x, FA_SET1(1.44269504088896341f), FA_SET1(0.5f)));
    FA_V r = FA_FMA(n, FA_SET1(-0.693359375f), x);
    r = FA_FMA(n, FA_SET1(2.12194440e-4f), r);
    const FA_V z = FA_MUL(r, r);
    FA_V y = FA_FMA(FA_SET1(1.9875691500e-4f), r, FA_SET1(1.3981999507e-3f));
    y = FA_FMA(y, r, FA_SET1(8.3334519073e-3f));
    y = FA_FMA(y, r, FA_SET1(4.1665795894e-2f));
    y = FA_FMA(y, r, FA_SET1(1.6666665459e-1f));
    y = FA_FMA(y, r, FA_SET1(5.0000001201e-1f));
    y = FA_ADD(FA_FMA(y, z, r), FA_SET1(1.0f));
    return FA_KEEP_ABOVE(x, -87.3f, FA_POW2(y, n));
}

static float FA_FN(fa_exp_sum)(int64_t n, float *x, float m) {
    const FA_V vm = FA_SET1(m);
    FA_V sum = FA_ZERO();
    for (int64_t i = 0; i < n; i += FA_VL) {
        const FA_V e = FA_FN(fa_exp)(FA_SUB(FA_LOAD(x + i), vm));
        FA_STORE(x + i, e);
        sum = FA_ADD(sum, e);
    }
    return FA_HSUM(sum);
}

/* kernels.h fa_softmax: fa_exp_sum's operations on each row (scaled scores minus the new
   maximum, the sum over the row's vectors in order, then FA_HSUM), in one loop without
   calls so that the rows' dependency chains overlap */
static void FA_FN(fa_softmax)(int nr, float *s, float scale, const float *m, float *mn, float *sum) {
    enum { NV = CLB_FA_TK / FA_VL };
    const FA_V vs = FA_SET1(scale);
    for (int r = 0; r < nr; r++) {
        float *sr = s + (int64_t)r * CLB_FA_TK;
        FA_V x[NV];
        _Pragma("GCC unroll 16") for (int u = 0; u < NV; u++) x[u] = FA_MUL(FA_LOAD(sr + u * FA_VL), vs);
        FA_V vmx = x[0];
        _Pragma("GCC unroll 16") for (int u = 1; u < NV; u++) vmx = FA_MAX(vmx, x[u]);
        float mx = FA_HMAX(vmx);
        mx = m[r] > mx ? m[r] : mx;
        mn[r] = mx;
        const FA_V vm = FA_SET1(mx);
        FA_V acc = FA_ZERO();
        _Pragma("GCC unroll 16") for (int u = 0; u < NV; u++) {
            const FA_V e = FA_FN(fa_exp)(FA_SUB(x[u], vm));
            FA_STORE(sr + u * FA_VL, e);
            acc = FA_ADD(acc, e);
        }
        sum[r] = FA_HSUM(acc);
    }
}

/* Installs the loops above (quantized keys' scores come from the file's integer kernels). */
static void FA_FN(fa_fill)(clb_kernels *k) {
    k->fa_scores[CLB_DT_F32] = FA_FN(fa_scores_f32);
    k->fa_scores[CLB_DT_F16] = FA_FN(fa_scores_f16);
    k->fa_scores[CLB_DT_BF16] = FA_FN(fa_scores_bf16);
    k->fa_vacc[CLB_DT_F32] = FA_FN(fa_vacc_f32);
    k->fa_vacc[CLB_DT_F16] = FA_FN(fa_vacc_f16);
    k->fa_vacc[CLB_DT_BF16] = FA_FN(fa_vacc_bf16);
    k->fa_vacc[CLB_DT_Q8_0] = FA_FN(fa_vacc_q8_0);
    k->fa_vacc[CLB_DT_Q4_0] = FA_FN(fa_vacc_q4_0);
    k->fa_exp_sum = FA_FN(fa_exp_sum);
    k->fa_softmax = FA_FN(fa_softmax);
}
