/* x86_avx512.c — AVX-512 blocked kernels for Q4_0 and Q8_0 weights against Q8_0
 * activations (compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mavx512vbmi;
 * only called when clb_cpu() reports all five and the OS saves the ZMM state).
 *
 * One 512-bit register holds a pair of 32-weight blocks: the pair's bytes are read with
 * one masked load (never past the pair, so the last block of a mapping is safe), VPERMB
 * puts the quants in weight order, VPERMW spreads the two fp16 scales over their 8 int32
 * lanes each, and one VPDPBUSD gives 16 partial sums (lanes 0-7 the first block, 8-15 the
 * second). The integer parts are exact, as in x86_avx2.c:
 *   Q4_0: sum (q - 8) x = sum q x - 8 sum x, with q the unsigned nibble;
 *   Q8_0: sum w x = sum (x + 128) w - 128 sum w, so the unsigned operand is the
 *         activation (x in [-127, 127] -> 1..255) and the signed one the weight.
 * The float accumulation differs from the AVX2 tiles (16 lanes, even and odd blocks in
 * separate halves), so results agree with them to rounding, not bit for bit.
 *
 * A tile is R weight rows x T activation rows (R, T <= 4) with the accumulators in
 * registers; each weight pair is unpacked once per tile and each activation pair loaded
 * once per tile. An odd last block is run as a pair whose second half is masked to zero.
 */
#if defined(__x86_64__)

#include <immintrin.h>
#include <string.h>

#include "kernels/kernels_impl.h"

#define MD_INLINE static inline __attribute__((always_inline))
/* the R x T loops must be unrolled so the accumulators stay in registers */
#define UNROLL _Pragma("GCC unroll 4")
#define UNROLL_8 _Pragma("GCC unroll 8")

enum { PAIR_Q8 = 2 * (int)sizeof(clb_block_q8_0) };

static inline __mmask64 bytes_mask(int n) { return n >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << n) - 1); }

/* 16 fp16 words: the scale at word a for 8 lanes, then the one at word b, as floats */
MD_INLINE __m512 scale_lanes(__m512i v, __m512i widx) {
    return _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(widx, v)));
}

MD_INLINE __m512i dpbusd(__m512i u, __m512i s) { return _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s); }

/* one Q8_0 activation pair (or a single last block): quants, their -8 * sum lanes (for
   Q4_0) and their scale lanes */
typedef struct {
    __m512i q;
    __m512 d;
} x_pair;

MD_INLINE x_pair load_x(const uint8_t *p, int single, __m512i widx) {
    x_pair r;
    const __m512i lo = _mm512_maskz_loadu_epi8(bytes_mask(single ? 34 : 64), p);
    const __m256i q0 = _mm256_loadu_si256((const __m256i *)(p + 2));
    const __m256i q1 = single ? _mm256_setzero_si256() : _mm256_loadu_si256((const __m256i *)(p + 36));
    r.q = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
    r.d = scale_lanes(lo, widx);
    return r;
}

static inline float hsum512(__m512 v) {
    const __m256 s = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

/* hsum512 of 16 vectors at once: out[4 * (n % 4) + n / 4] = hsum512(v[n]), bit for bit —
   each level adds the lanes hsum512 adds (i + 8, i + 4, i + 2, i + 1), the shuffles that
   line them up shared by the vectors. 30 shuffles and 15 adds instead of 16 x 7 steps. */
static inline void hsum512_x16(const __m512 *v, float *out) {
    __m512 t[8], u[4], w[2];
    for (int p = 0; p < 8; p++)
        t[p] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0x44),
                             _mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0xEE));
    for (int p = 0; p < 4; p++)
        u[p] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * p], t[2 * p + 1], 0x88),
                             _mm512_shuffle_f32x4(t[2 * p], t[2 * p + 1], 0xDD));
    for (int p = 0; p < 2; p++)
        w[p] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * p], u[2 * p + 1], 0x44), _mm512_shuffle_ps(u[2 * p], u[2 * p + 1], 0xEE));
    _mm512_storeu_ps(out, _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], 0x88), _mm512_shuffle_ps(w[0], w[1], 0xDD)));
}

/* one Q8_0 weight pair (or a single last block) at p, never read past it: the raw bytes (for
   scale_lanes) into *raw, the quants in weight order returned */
MD_INLINE __m512i load_w_q8(const uint8_t *p, int single, __m512i qidx, __m512i *raw) {
    *raw = _mm512_maskz_loadu_epi8(bytes_mask(single ? PAIR_Q8 / 2 : 64), p);
    const __m512i hi = single ? _mm512_setzero_si512() : _mm512_maskz_loadu_epi8(bytes_mask(PAIR_Q8 - 64), p + 64);
    return _mm512_permutex2var_epi8(*raw, qidx, hi);
}

/* ---- the tile: Q4_0, Q8_0, IQ4_NL or MXFP4 weights ------------------------------------ *
 * IQ4_NL and MXFP4 (4-bit codebooks) unpack their nibbles as Q4_0 does, then VPSHUFB maps
 * them to the signed int8 codebook values, and the product is Q8_0's (x + 128 unsigned
 * against the signed weight, less 128 * sum w): exact, |w| <= 127. */
enum { K_Q4_0, K_Q8_0, K_IQ4_NL, K_MXFP4 };

/* Q4_0 pair: bytes 2..17 twice, then 20..35 twice (each block's 16 nibble bytes in both
   halves of its 256-bit lane, shifted by 0 / 4 below) */
static const uint8_t q4_idx[64] = {
    2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 2,  3,  4,  5,  6,  7,
    8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31,
    32, 33, 34, 35, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35};
/* Q8_0 pair: bytes 2..33 of the first 64, then 36..67 (indices >= 64: the second register) */
static const uint8_t q8_idx[64] = {
    2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23,
    24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47,
    48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67};

/* MXFP4 pair (17-byte blocks, the exponent first): bytes 1..16 twice, then 18..33 twice */
static const uint8_t mx_idx[64] = {
    1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 1,  2,  3,  4,  5,  6,
    7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29,
    30, 31, 32, 33, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33};

/* int32 lanes of E8M0 exponents e as the float lanes 2^(e - 128) (clb_e8m0_to_fp32_half:
   the codebook holds twice the E2M1 values) */
MD_INLINE __m512 e8m0_lanes(__m512i e) {
    const __mmask16 normal = _mm512_cmpge_epi32_mask(e, _mm512_set1_epi32(2));
    const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    const __m512i nrm = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(normal, sub, nrm));
}

/* the two exponents of an MXFP4 pair (bytes 0 and 17 of raw), 8 lanes each */
MD_INLINE __m512 mx_scale_lanes(__m512i raw) {
    return e8m0_lanes(_mm512_maskz_permutexvar_epi8(
        0x1111111111111111ull, _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 17, 17, 17, 17, 17, 17, 17, 17), raw));
}

/* VPERMW indices: word 0 for lanes 0-7, word `second` (the second block's scale) for 8-15 */
#define SCALE_IDX(second)                                                                               \
    _mm512_setr_epi32(0, 0, 0, 0, (second) * 0x10001, (second) * 0x10001, (second) * 0x10001,           \
                      (second) * 0x10001, 0, 0, 0, 0, 0, 0, 0, 0)

MD_INLINE void tile(int64_t nb, const int R, const int T, const uint8_t *w, uint64_t ws, const uint8_t *x,
                    uint64_t xs, float *y, int64_t ys, const int kind) {
    const int Q8 = kind != K_Q4_0; /* the signed-weight product */
    const uint64_t wblock = kind == K_Q8_0 ? sizeof(clb_block_q8_0)
                            : kind == K_MXFP4 ? sizeof(clb_block_mxfp4)
                                              : sizeof(clb_block_q4_0); /* = IQ4_NL's */
    const __m512i qidx = _mm512_loadu_si512(kind == K_Q8_0 ? q8_idx : kind == K_MXFP4 ? mx_idx : q4_idx);
    const __m512i xsc = SCALE_IDX(17), wsc = kind == K_Q8_0 ? xsc : SCALE_IDX(9);
    const __m512i lut = _mm512_broadcast_i32x4(
        _mm_loadu_si128((const __m128i *)(kind == K_MXFP4 ? clb_kvalues_mxfp4 : clb_kvalues_iq4nl)));
    const __m512i shift = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
    const __m512i m4 = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8), bias = _mm512_set1_epi8((char)0x80);
    __m512 acc[4][4];
    UNROLL
    for (int r = 0; r < R; r++)
        UNROLL
        for (int t = 0; t < T; t++) acc[r][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b += 2) {
        const int single = b + 1 == nb;
        x_pair xp[4];
        __m512i cx[4]; /* Q4_0: 8 * sum x per lane */
        UNROLL
        for (int t = 0; t < T; t++) {
            xp[t] = load_x(x + (uint64_t)t * xs + (uint64_t)b * sizeof(clb_block_q8_0), single, xsc);
            if (Q8)
                xp[t].q = _mm512_xor_si512(xp[t].q, bias); /* x + 128 as unsigned bytes */
            else
                cx[t] = dpbusd(eight, xp[t].q);
        }
        UNROLL
        for (int r = 0; r < R; r++) {
            const uint8_t *wp = w + (uint64_t)r * ws + (uint64_t)b * wblock;
            __m512i q, cw, raw;
            if (kind == K_Q8_0) {
                q = load_w_q8(wp, single, qidx, &raw);
            } else {
                raw = _mm512_maskz_loadu_epi8(bytes_mask((single ? 1 : 2) * (int)wblock), wp);
                q = _mm512_and_si512(_mm512_srlv_epi64(_mm512_permutexvar_epi8(qidx, raw), shift), m4);
                if (kind != K_Q4_0) q = _mm512_shuffle_epi8(lut, q); /* the codebook's int8 values */
            }
            cw = Q8 ? dpbusd(bias, q) : _mm512_setzero_si512(); /* 128 * sum w per lane */
            const __m512 dw = kind == K_MXFP4 ? mx_scale_lanes(raw) : scale_lanes(raw, wsc);
            UNROLL
            for (int t = 0; t < T; t++) {
                const __m512i p = Q8 ? _mm512_sub_epi32(dpbusd(xp[t].q, q), cw)
                                     : _mm512_sub_epi32(dpbusd(q, xp[t].q), cx[t]);
                acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw, xp[t].d), acc[r][t]);
            }
        }
    }
    if (R == 4 && T == 4) { /* the 16 sums reduced together: the same bits as hsum512 */
        float sums[16];
        hsum512_x16(&acc[0][0], sums);
        UNROLL
        for (int t = 0; t < 4; t++)
            UNROLL
            for (int r = 0; r < 4; r++) y[(int64_t)t * ys + r] = sums[4 * t + r];
        return;
    }
    UNROLL
    for (int r = 0; r < R; r++)
        UNROLL
        for (int t = 0; t < T; t++) y[(int64_t)t * ys + r] = hsum512(acc[r][t]);
}

#ifndef RB512
#define RB512 4
#endif
#define TILE_Q4_0(...) tile(__VA_ARGS__, K_Q4_0)
#define TILE_Q8_0(...) tile(__VA_ARGS__, K_Q8_0)
#define TILE_IQ4_NL(...) tile(__VA_ARGS__, K_IQ4_NL)
#define TILE_MXFP4(...) tile(__VA_ARGS__, K_MXFP4)
CLB_DEFINE_MDOT(mdot512_q4_0, TILE_Q4_0, CLB_QK, RB512)
CLB_DEFINE_MDOT(mdot512_q8_0, TILE_Q8_0, CLB_QK, RB512)
CLB_DEFINE_MDOT(mdot512_iq4_nl, TILE_IQ4_NL, CLB_QK, RB512)
CLB_DEFINE_MDOT(mdot512_mxfp4, TILE_MXFP4, CLB_QK, RB512)

/* ---- packed rows (kernels.h): 16 rows per register lane set ------------------------- *
 * Per block and token: 8 VPDPBUSD with the token's 4 quants broadcast from memory against
 * 16 rows x 4 weights, seeded with the block's -8 (Q4_0) or -128 (Q8_0, weights stored
 * + 128) times sum(q) from the activation extras; then one conversion and one FMA by the
 * 16 row scales times the token's block scale. Two dot chains per (block, token) keep
 * the VPDPBUSD latency hidden. */
#define IDX16(...) _mm512_setr_epi32(__VA_ARGS__)
#ifndef PK_PREFETCH
#define PK_PREFETCH 2048
#endif
#ifndef RM_PREFETCH
#define RM_PREFETCH 512
#endif

/* Row-major groups, transposed in registers into the packed layout's vectors (so both
   layouts feed identical operands to identical instructions: bit-identical results).
   Q4_0: out[g] lane r = dword g of row r's quants (rows rs bytes apart, from p). */
MD_INLINE void rm_q4_0(const uint8_t *p, uint64_t rs, __m512i out[4]) {
    __m512i z[4];
    UNROLL
    for (int j = 0; j < 4; j++) {
        const uint8_t *r = p + (uint64_t)(4 * j) * rs;
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)r));
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(r + rs)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(r + 2 * rs)), 2);
        z[j] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(r + 3 * rs)), 3);
    }
    /* z[j] lane 4i + g = row 4j + i, dword g */
    const __m512i ia = IDX16(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
    const __m512i ib = IDX16(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
    const __m512i a01 = _mm512_permutex2var_epi32(z[0], ia, z[1]), b01 = _mm512_permutex2var_epi32(z[0], ib, z[1]);
    const __m512i a23 = _mm512_permutex2var_epi32(z[2], ia, z[3]), b23 = _mm512_permutex2var_epi32(z[2], ib, z[3]);
    const __m512i lo = IDX16(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    const __m512i hi = IDX16(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    out[0] = _mm512_permutex2var_epi32(a01, lo, a23);
    out[1] = _mm512_permutex2var_epi32(a01, hi, a23);
    out[2] = _mm512_permutex2var_epi32(b01, lo, b23);
    out[3] = _mm512_permutex2var_epi32(b01, hi, b23);
}

/* 32 bytes of 16 rows, z[j] = rows 2j and 2j + 1: out[k] lane r = dword k of row r, each
   byte xor-ed with flip (Q8_0: 0x80, i.e. + 128; Q4_K nibbles: 0). */
MD_INLINE void dwords8_t(const __m512i z[8], __m512i out[8], const char flip) {
    __m512i u[8], v[8];
    /* z[j] lane 8i + k = row 2j + i, dword k -> u[2m + h] lane 4k' + i = row 4m + i, dword 4h + k' */
    const __m512i s0 = IDX16(0, 8, 16, 24, 1, 9, 17, 25, 2, 10, 18, 26, 3, 11, 19, 27);
    const __m512i s1 = IDX16(4, 12, 20, 28, 5, 13, 21, 29, 6, 14, 22, 30, 7, 15, 23, 31);
    UNROLL
    for (int m = 0; m < 4; m++) {
        u[2 * m] = _mm512_permutex2var_epi32(z[2 * m], s0, z[2 * m + 1]);
        u[2 * m + 1] = _mm512_permutex2var_epi32(z[2 * m], s1, z[2 * m + 1]);
    }
    /* v[4p + 2h + e] lanes 8s + (0..7) = rows 8p..8p+7 of dword 4h + 2e + s */
    const __m512i t0 = IDX16(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
    const __m512i t1 = IDX16(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
    UNROLL
    for (int pp = 0; pp < 2; pp++)
        UNROLL
        for (int h = 0; h < 2; h++) {
            v[4 * pp + 2 * h] = _mm512_permutex2var_epi32(u[4 * pp + h], t0, u[4 * pp + 2 + h]);
            v[4 * pp + 2 * h + 1] = _mm512_permutex2var_epi32(u[4 * pp + h], t1, u[4 * pp + 2 + h]);
        }
    const __m512i lo = IDX16(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    const __m512i hi = IDX16(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    const __m512i bias = _mm512_set1_epi8(flip);
    UNROLL
    for (int h = 0; h < 2; h++)
        UNROLL
        for (int e = 0; e < 2; e++) {
            out[4 * h + 2 * e] = _mm512_xor_si512(_mm512_permutex2var_epi32(v[2 * h + e], lo, v[4 + 2 * h + e]), bias);
            out[4 * h + 2 * e + 1] = _mm512_xor_si512(_mm512_permutex2var_epi32(v[2 * h + e], hi, v[4 + 2 * h + e]), bias);
        }
}

/* the same of the rows at p + r * rs */
MD_INLINE void rm_dwords8(const uint8_t *p, uint64_t rs, __m512i out[8], const char flip) {
    __m512i z[8];
    UNROLL
    for (int j = 0; j < 8; j++) {
        const uint8_t *r = p + (uint64_t)(2 * j) * rs;
        z[j] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)r)),
                                  _mm256_loadu_si256((const __m256i *)(r + rs)), 1);
    }
    dwords8_t(z, out, flip);
}

/* PK: the weights are in the packed layout (group stride ws unused); else a row-major
   group with rows ws bytes apart. kind: K_Q4_0, K_Q8_0, or a 4-bit codebook (K_IQ4_NL,
   K_MXFP4: Q4_0's nibble layout, then VPSHUFB to the codebook value + 128, as unsigned
   bytes against the token's signed quants, seeded like Q8_0 with -128 * sum(q)). */
MD_INLINE void ptile(int64_t nb, const int T, const int kind, const int PK, const uint8_t *w, uint64_t ws,
                     const uint8_t *x, uint64_t xs, float *y, int64_t ys) {
    const uint64_t xoff = clb_q8x_offset(nb * CLB_QK);
    const int Q8 = kind == K_Q8_0, MX = kind == K_MXFP4, CB = kind == K_IQ4_NL || MX;
    const uint64_t bbytes = Q8 ? sizeof(clb_block_q8_0) : MX ? sizeof(clb_block_mxfp4) : sizeof(clb_block_q4_0);
    const uint64_t bstride = 16 * bbytes, head = MX ? 1 : 2; /* bytes of a row's block scale */
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i lut = _mm512_xor_si512( /* the codebook + 128 (unused for Q4_0 / Q8_0) */
        _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(MX ? clb_kvalues_mxfp4 : clb_kvalues_iq4nl))),
        _mm512_set1_epi8((char)0x80));
    const __m512i rows = _mm512_mullo_epi32(IDX16(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32((int)(PK ? 0 : ws)));
    __m512 acc[8];
    UNROLL
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m512 dw;
        __m512i q[8];
        if (PK) {
            const uint8_t *wb = w + (uint64_t)b * bstride;
            for (uint64_t o = 0; o < bstride; o += 64) _mm_prefetch((const char *)(wb + PK_PREFETCH + o), _MM_HINT_T0);
            dw = MX ? e8m0_lanes(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)wb)))
                    : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)wb));
            UNROLL_8
            for (int k = 0; k < 8; k++)
                if (Q8 || k < 4) q[k] = _mm512_loadu_si512(wb + 16 * head + 64 * k);
        } else {
            const uint8_t *wb = w + (uint64_t)b * bbytes;
            if ((b & 3) == 0) /* 16 row streams: fetch each row's next lines ahead of use */
                UNROLL
                for (int r = 0; r < 16; r++) _mm_prefetch((const char *)(wb + (uint64_t)r * ws + RM_PREFETCH), _MM_HINT_T0);
            /* the 16 scales: a dword gathered at each row's block, its low half (byte) */
            const __m512i sc = _mm512_i32gather_epi32(rows, wb, 1);
            dw = MX ? e8m0_lanes(_mm512_and_si512(sc, _mm512_set1_epi32(0xFF)))
                    : _mm512_cvtph_ps(_mm512_cvtepi32_epi16(sc));
            if (Q8)
                rm_dwords8(wb + 2, ws, q, (char)0x80);
            else
                rm_q4_0(wb + head, ws, q);
        }
        if (!Q8) {
            UNROLL
            for (int g = 3; g >= 0; g--) {
                q[g + 4] = _mm512_and_si512(_mm512_srli_epi16(q[g], 4), m4);
                q[g] = _mm512_and_si512(q[g], m4);
                if (CB) q[g + 4] = _mm512_shuffle_epi8(lut, q[g + 4]), q[g] = _mm512_shuffle_epi8(lut, q[g]);
            }
        }
        UNROLL
        for (int t = 0; t < T; t++) {
            const uint8_t *xb = x + (uint64_t)t * xs + (uint64_t)b * sizeof(clb_block_q8_0) + 2;
            const uint8_t *ex = x + (uint64_t)t * xs + xoff;
            int32_t corr, x4[8];
            float dx;
            memcpy(&corr, ex + 4 * (uint64_t)((kind == K_Q4_0 ? 1 : 2) * nb + b), 4);
            memcpy(&dx, ex + 4 * (uint64_t)b, 4);
            memcpy(x4, xb, 32);
            __m512i a0 = _mm512_set1_epi32(corr), a1 = _mm512_setzero_si512();
            UNROLL
            for (int k = 0; k < 8; k += 2) {
                a0 = _mm512_dpbusd_epi32(a0, q[k], _mm512_set1_epi32(x4[k]));
                a1 = _mm512_dpbusd_epi32(a1, q[k + 1], _mm512_set1_epi32(x4[k + 1]));
            }
            const __m512 f = _mm512_cvtepi32_ps(_mm512_add_epi32(a0, a1));
            acc[t] = _mm512_fmadd_ps(f, _mm512_mul_ps(dw, _mm512_set1_ps(dx)), acc[t]);
        }
    }
    UNROLL
    for (int t = 0; t < T; t++) _mm512_storeu_ps(y + (int64_t)t * ys, acc[t]);
}

/* ---- Q4_K on packed rows ------------------------------------------------------------ *
 * Packed super-block (16 rows, 2304 bytes = 16 x 144): the dwords (d | dmin << 16) of rows
 * 0..15, then the three scale dwords u0, u1, u2 of rows 0..15 (each its own 64 bytes),
 * then for chunk c = 0..3 and k = 0..7 the quant bytes qs[32c + 4k .. + 3] of rows 0..15.
 * Per sub-block j (32 weights, 6-bit scale sc_j and min m_j) and token: 8 VPDPBUSD, one
 * conversion and one FMA by d * sc_j; the mins by VPDPWSSD of (m_j, m_j) against the
 * token's bsums pair, once per super-block: y += dx (sum_j d sc_j q.x - dmin sum_j m_j bs_j). */
MD_INLINE void ptile_q4k(int64_t nsb, const int T, const int PK, const uint8_t *w, uint64_t rs, const uint8_t *x,
                         uint64_t xs, float *y, int64_t ys) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m6 = _mm512_set1_epi8(0x3F), m30 = _mm512_set1_epi8(0x30);
    const __m512i rows = _mm512_mullo_epi32(IDX16(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32((int)(PK ? 0 : rs)));
    const __m512i byte = _mm512_set1_epi32(0xFF);
    __m512 acc[4];
    UNROLL
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nsb; i++) {
        const uint8_t *wb = w + (uint64_t)i * (PK ? 16 * sizeof(clb_block_q4_k) : sizeof(clb_block_q4_k));
        __m512i dd, u0, u1, u2;
        if (PK) {
            dd = _mm512_loadu_si512(wb);
            u0 = _mm512_loadu_si512(wb + 64);
            u1 = _mm512_loadu_si512(wb + 128);
            u2 = _mm512_loadu_si512(wb + 192);
            for (int o = 0; o < 16 * (int)sizeof(clb_block_q4_k); o += 64)
                _mm_prefetch((const char *)(wb + PK_PREFETCH + o), _MM_HINT_T0);
        } else {
            dd = _mm512_i32gather_epi32(rows, wb, 1);
            u0 = _mm512_i32gather_epi32(rows, wb + 4, 1);
            u1 = _mm512_i32gather_epi32(rows, wb + 8, 1);
            u2 = _mm512_i32gather_epi32(rows, wb + 12, 1);
            UNROLL
            for (int r = 0; r < 16; r++) _mm_prefetch((const char *)(wb + (uint64_t)r * rs + RM_PREFETCH), _MM_HINT_T0);
        }
        const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
        const __m512 dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
        /* four 6-bit values per dword: scales of sub-blocks 0-3 and 4-7, mins likewise */
        const __m512i sc4[2] = {_mm512_and_si512(u0, m6),
                                _mm512_or_si512(_mm512_and_si512(u2, m4), _mm512_and_si512(_mm512_srli_epi32(u0, 2), m30))};
        const __m512i mn4[2] = {_mm512_and_si512(u1, m6),
                                _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), m4),
                                                _mm512_and_si512(_mm512_srli_epi32(u1, 2), m30))};
        __m512 part[4];
        __m512i msum[4];
        UNROLL
        for (int t = 0; t < T; t++) part[t] = _mm512_setzero_ps(), msum[t] = _mm512_setzero_si512();
        for (int c = 0; c < 4; c++) {
            __m512i q[8];
            if (PK) {
                UNROLL
                for (int k = 0; k < 8; k++) q[k] = _mm512_loadu_si512(wb + 256 + 64 * (8 * c + k));
            } else {
                rm_dwords8(wb + 16 + 32 * c, rs, q, 0);
            }
            const int j0 = 2 * c, j1 = 2 * c + 1;
            const __m512i s0 = _mm512_and_si512(_mm512_srli_epi32(sc4[j0 / 4], 8 * (j0 % 4)), byte);
            const __m512i s1 = _mm512_and_si512(_mm512_srli_epi32(sc4[j1 / 4], 8 * (j1 % 4)), byte);
            const __m512 ds0 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(s0)), ds1 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(s1));
            __m512i mm0 = _mm512_and_si512(_mm512_srli_epi32(mn4[j0 / 4], 8 * (j0 % 4)), byte);
            __m512i mm1 = _mm512_and_si512(_mm512_srli_epi32(mn4[j1 / 4], 8 * (j1 % 4)), byte);
            mm0 = _mm512_or_si512(mm0, _mm512_slli_epi32(mm0, 16)); /* (m, m) int16 pairs */
            mm1 = _mm512_or_si512(mm1, _mm512_slli_epi32(mm1, 16));
            UNROLL
            for (int t = 0; t < T; t++) {
                const clb_block_q8_k *xb = (const clb_block_q8_k *)(x + (uint64_t)t * xs) + i;
                int32_t x4[16], bs[2];
                memcpy(x4, xb->qs + 64 * c, 64);
                memcpy(bs, xb->bsums + 2 * j0, 8);
                __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
                UNROLL
                for (int k = 0; k < 8; k++) {
                    a0 = _mm512_dpbusd_epi32(a0, _mm512_and_si512(q[k], m4), _mm512_set1_epi32(x4[k]));
                    a1 = _mm512_dpbusd_epi32(a1, _mm512_and_si512(_mm512_srli_epi16(q[k], 4), m4),
                                             _mm512_set1_epi32(x4[8 + k]));
                }
                part[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a0), ds0, part[t]);
                part[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a1), ds1, part[t]);
                msum[t] = _mm512_dpwssd_epi32(msum[t], mm0, _mm512_set1_epi32(bs[0]));
                msum[t] = _mm512_dpwssd_epi32(msum[t], mm1, _mm512_set1_epi32(bs[1]));
            }
        }
        UNROLL
        for (int t = 0; t < T; t++) {
            const __m512 dx = _mm512_set1_ps(((const clb_block_q8_k *)(x + (uint64_t)t * xs) + i)->d);
            acc[t] = _mm512_fmadd_ps(part[t], dx, acc[t]);
            acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum[t]), _mm512_mul_ps(dmin, dx), acc[t]);
        }
    }
    UNROLL
    for (int t = 0; t < T; t++) _mm512_storeu_ps(y + (int64_t)t * ys, acc[t]);
}

#define PT_Q4_0(nb, T, ...) ptile(nb, T, K_Q4_0, 1, __VA_ARGS__)
#define PT_Q8_0(nb, T, ...) ptile(nb, T, K_Q8_0, 1, __VA_ARGS__)
#define PT_IQ4_NL(nb, T, ...) ptile(nb, T, K_IQ4_NL, 1, __VA_ARGS__)
#define PT_MXFP4(nb, T, ...) ptile(nb, T, K_MXFP4, 1, __VA_ARGS__)
#define RT_Q4_0(nb, T, ...) ptile(nb, T, K_Q4_0, 0, __VA_ARGS__)
#define RT_Q8_0(nb, T, ...) ptile(nb, T, K_Q8_0, 0, __VA_ARGS__)
#define RT_IQ4_NL(nb, T, ...) ptile(nb, T, K_IQ4_NL, 0, __VA_ARGS__)
#define RT_MXFP4(nb, T, ...) ptile(nb, T, K_MXFP4, 0, __VA_ARGS__)
#define PT_Q4_K(nb, T, ...) ptile_q4k(nb, T, 1, __VA_ARGS__)
#define RT_Q4_K(nb, T, ...) ptile_q4k(nb, T, 0, __VA_ARGS__)
CLB_DEFINE_PGEMM(pgemm512_q4_0, CLB_QK, 4, PT_Q4_0)
CLB_DEFINE_PGEMM(pgemm512_q8_0, CLB_QK, 4, PT_Q8_0)
CLB_DEFINE_PGEMM(rgemm512_q4_0, CLB_QK, 4, RT_Q4_0)
CLB_DEFINE_PGEMM(rgemm512_q8_0, CLB_QK, 4, RT_Q8_0)
CLB_DEFINE_PGEMM(pgemm512_iq4_nl, CLB_QK, 4, PT_IQ4_NL)
CLB_DEFINE_PGEMM(rgemm512_iq4_nl, CLB_QK, 4, RT_IQ4_NL)
CLB_DEFINE_PGEMM(pgemm512_mxfp4, CLB_QK, 4, PT_MXFP4)
CLB_DEFINE_PGEMM(rgemm512_mxfp4, CLB_QK, 4, RT_MXFP4)
CLB_DEFINE_PGEMM(pgemm512_q4_k, CLB_QK_K, 4, PT_Q4_K)
CLB_DEFINE_PGEMM(rgemm512_q4_k, CLB_QK_K, 4, RT_Q4_K)

/* ---- flash attention (fa_body_impl.h) ------------------------------------------------ */

static inline __m512 fa_ld_q4_512(const uint8_t *qs, int g) { /* g: 0 low nibbles, 1 high */
    const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)qs));
    const __m512i q = g ? _mm512_srli_epi32(b, 4) : _mm512_and_si512(b, _mm512_set1_epi32(0xF));
    return _mm512_cvtepi32_ps(_mm512_sub_epi32(q, _mm512_set1_epi32(8)));
}
#define FA_FN(x) x##_avx512
#define FA_VL 16
#define FA_V __m512
#define FA_ZERO() _mm512_setzero_ps()
#define FA_SET1(x) _mm512_set1_ps(x)
#define FA_LOAD(p) _mm512_loadu_ps(p)
#define FA_STORE(p, v) _mm512_storeu_ps(p, v)
#define FA_ADD _mm512_add_ps
#define FA_SUB _mm512_sub_ps
#define FA_MUL _mm512_mul_ps
#define FA_MAX _mm512_max_ps
#define FA_HMAX(v) _mm512_reduce_max_ps(v)
#define FA_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define FA_HSUM(v) hsum512(v)
#define FA_LD_F16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define FA_LD_BF16(p) \
    _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))
#define FA_LD_I8(p) _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p))))
#define FA_LD_Q4(qs, g) fa_ld_q4_512(qs, g)
#define FA_FLOOR(v) _mm512_roundscale_ps(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)
#define FA_POW2(y, n) _mm512_scalef_ps(y, n)
#define FA_KEEP_ABOVE(x, t, y) _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(t), _CMP_GT_OQ), y)
#define FA_TQ 4
#define FA_TK 4
#define FA_VR 4
#define FA_VC 4
#define FA_VRB 8
#define FA_F16_1(h) _cvtsh_ss(h) /* F16C: the block scale without a call */
#define FA_HSUM16(v, out) hsum512_x16(v, out)
#include "kernels/fa_body_impl.h"

CLB_FA_SCORES_MDOT(fa_scores_q4_0_512, mdot512_q4_0)
CLB_FA_SCORES_MDOT(fa_scores_mdot_q8_0_512, mdot512_q8_0)

/* Scores on Q8_0 keys, 16 keys to a register (a lane per key), so no horizontal sum per
   (query, key). Per block and group of 16 keys: their 32 quant bytes transposed into 8
   vectors (lane j: dword k of key j, + 128 as unsigned bytes) and their 16 scales; per query,
   8 VPDPBUSD with the query's dwords broadcast from its row, seeded with -128 * sum(q) of
   its block: each lane the exact integer dot product of the block. A score is one chain over
   the blocks in order, s = fma(float(i_b), dk_b * dq_b, s) from s = 0: the same operations
   for a (query, key) whatever its lane, group and tile. */
enum { FA8_K = 16, FA8_Q = 8, FA8_MAXB = 64 }; /* keys per register, queries per pass, d <= 2048 */

/* QT queries (their scales dq and -128 * sums cq, [a * FA8_MAXB + b]) against nj <= 16 keys
   from k (lanes past nj repeat the last key; not stored) */
MD_INLINE void fa8_tile(int64_t nb, const int QT, int nj, const uint8_t *q, uint64_t qs, const float *dq,
                        const int32_t *cq, const uint8_t *k, uint64_t ks, float *s, int64_t ss) {
    int32_t off[FA8_K];
    for (int j = 0; j < FA8_K; j++) off[j] = (int32_t)((uint64_t)(j < nj ? j : nj - 1) * ks);
    const __m512i voff = _mm512_loadu_si512(off);
    __m512 acc[FA8_Q];
    UNROLL_8
    for (int a = 0; a < QT; a++) acc[a] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *kb = k + (uint64_t)b * sizeof(clb_block_q8_0);
        __m512i z[8], kq[8];
        UNROLL_8
        for (int j = 0; j < 8; j++)
            z[j] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(kb + off[2 * j] + 2))),
                                      _mm256_loadu_si256((const __m256i *)(kb + off[2 * j + 1] + 2)), 1);
        dwords8_t(z, kq, (char)0x80);
        const __m512 dk = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(voff, kb, 1)));
        UNROLL_8
        for (int a = 0; a < QT; a++) {
            const uint8_t *qa = q + (uint64_t)a * qs + (uint64_t)b * sizeof(clb_block_q8_0) + 2;
            int32_t x4[8];
            memcpy(x4, qa, 32);
            __m512i p = _mm512_set1_epi32(cq[a * FA8_MAXB + b]);
            UNROLL_8
            for (int c = 0; c < 8; c++) p = _mm512_dpbusd_epi32(p, kq[c], _mm512_set1_epi32(x4[c]));
            acc[a] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dk, _mm512_set1_ps(dq[a * FA8_MAXB + b])), acc[a]);
        }
    }
    const __mmask16 m = (__mmask16)((1u << nj) - 1);
    UNROLL_8
    for (int a = 0; a < QT; a++) _mm512_mask_storeu_ps(s + (int64_t)a * ss, m, acc[a]);
}

static void fa_scores_q8_0_512(int64_t d, int nq, int nk, const void *q, uint64_t qs, const void *k, uint64_t ks,
                               float *s, int64_t ss) {
    const int64_t nb = d / CLB_QK;
    if (nb > FA8_MAXB) {
        fa_scores_mdot_q8_0_512(d, nq, nk, q, qs, k, ks, s, ss);
        return;
    }
    const uint8_t *qb = q, *kb = k;
    for (int j = 0; j < nk; j++) clb_fa_prefetch_row(kb + (uint64_t)(j + CLB_FA_TK) * ks, ks); /* the next tile */
    float dq[FA8_Q * FA8_MAXB];
    int32_t cq[FA8_Q * FA8_MAXB];
    for (int i = 0; i < nq; i += FA8_Q) {
        const int nr = nq - i < FA8_Q ? nq - i : FA8_Q;
        for (int a = 0; a < nr; a++)
            for (int64_t b = 0; b < nb; b++) {
                const clb_block_q8_0 *x = (const clb_block_q8_0 *)(qb + (uint64_t)(i + a) * qs) + b;
                const __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)x->qs), _mm256_set1_epi8((char)0x80));
                const __m256i t = _mm256_sad_epu8(v, _mm256_setzero_si256()); /* sums of q + 128 */
                const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
                const int32_t sum = (int32_t)(_mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1)) - 128 * CLB_QK;
                dq[a * FA8_MAXB + b] = _cvtsh_ss(x->d);
                cq[a * FA8_MAXB + b] = -128 * sum;
            }
        const uint8_t *qi = qb + (uint64_t)i * qs;
        float *si = s + (int64_t)i * ss;
        for (int j = 0; j < nk; j += FA8_K) {
            const int nj = nk - j < FA8_K ? nk - j : FA8_K;
            const uint8_t *kj = kb + (uint64_t)j * ks;
            switch (nr) {
            case 8: fa8_tile(nb, 8, nj, qi, qs, dq, cq, kj, ks, si + j, ss); break;
            case 7: fa8_tile(nb, 7, nj, qi, qs, dq, cq, kj, ks, si + j, ss); break;
            case 6: fa8_tile(nb, 6, nj, qi, qs, dq, cq, kj, ks, si + j, ss); break;
            case 5: fa8_tile(nb, 5, nj, qi, qs, dq, cq, kj, ks, si + j, ss); break;
            case 4: fa8_tile(nb, 4, nj, qi, qs, dq, cq, kj, ks, si + j, ss); break;
            case 3: fa8_tile(nb, 3, nj, qi, qs, dq, cq, kj, ks, si + j, ss); break;
            case 2: fa8_tile(nb, 2, nj, qi, qs, dq, cq, kj, ks, si + j, ss); break;
            default: fa8_tile(nb, 1, nj, qi, qs, dq, cq, kj, ks, si + j, ss); break;
            }
        }
    }
}

void clb_kernels_fill_avx512_mdot(clb_kernels *k, clb_mdot_fn *mdot, clb_pgemm_fn *pgemm, clb_pgemm_fn *rgemm) {
    k->isa = "avx512";
    pgemm[CLB_DT_Q4_0] = pgemm512_q4_0;
    pgemm[CLB_DT_Q8_0] = pgemm512_q8_0;
    rgemm[CLB_DT_Q4_0] = rgemm512_q4_0;
    rgemm[CLB_DT_Q8_0] = rgemm512_q8_0;
    pgemm[CLB_DT_Q4_K] = pgemm512_q4_k;
    rgemm[CLB_DT_Q4_K] = rgemm512_q4_k;
    pgemm[CLB_DT_IQ4_NL] = pgemm512_iq4_nl;
    rgemm[CLB_DT_IQ4_NL] = rgemm512_iq4_nl;
    pgemm[CLB_DT_MXFP4] = pgemm512_mxfp4;
    rgemm[CLB_DT_MXFP4] = rgemm512_mxfp4;
    mdot[CLB_DT_Q4_0] = mdot512_q4_0;
    mdot[CLB_DT_Q8_0] = mdot512_q8_0;
    k->vec_dot[CLB_DT_Q4_0] = mdot512_q4_0_1;
    k->vec_dot[CLB_DT_Q8_0] = mdot512_q8_0_1;
    mdot[CLB_DT_IQ4_NL] = mdot512_iq4_nl;
    mdot[CLB_DT_MXFP4] = mdot512_mxfp4;
    k->vec_dot[CLB_DT_IQ4_NL] = mdot512_iq4_nl_1;
    k->vec_dot[CLB_DT_MXFP4] = mdot512_mxfp4_1;
    fa_fill_avx512(k);
    k->fa_scores[CLB_DT_Q4_0] = fa_scores_q4_0_512;
    k->fa_scores[CLB_DT_Q8_0] = fa_scores_q8_0_512;
}

#else
typedef int clb_x86_avx512_empty_tu; /* ISO C forbids an empty translation unit */
#endif /* __x86_64__ */
