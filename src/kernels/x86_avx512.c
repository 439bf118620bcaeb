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

enum { PAIR_Q4 = 2 * (int)sizeof(clb_block_q4_0), PAIR_Q8 = 2 * (int)sizeof(clb_block_q8_0) };

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

/* ---- the tile: Q4_0 (Q8 = 0) or Q8_0 (Q8 = 1) weights ------------------------------- */

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

/* VPERMW indices: word 0 for lanes 0-7, word `second` (the second block's scale) for 8-15 */
#define SCALE_IDX(second)                                                                               \
    _mm512_setr_epi32(0, 0, 0, 0, (second) * 0x10001, (second) * 0x10001, (second) * 0x10001,           \
                      (second) * 0x10001, 0, 0, 0, 0, 0, 0, 0, 0)

MD_INLINE void tile(int64_t nb, const int R, const int T, const uint8_t *w, uint64_t ws, const uint8_t *x,
                    uint64_t xs, float *y, int64_t ys, const int Q8) {
    const uint64_t wblock = Q8 ? sizeof(clb_block_q8_0) : sizeof(clb_block_q4_0);
    const __m512i qidx = _mm512_loadu_si512(Q8 ? q8_idx : q4_idx);
    const __m512i xsc = SCALE_IDX(17), wsc = Q8 ? xsc : SCALE_IDX(9);
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
            if (Q8) {
                raw = _mm512_maskz_loadu_epi8(bytes_mask(single ? PAIR_Q8 / 2 : 64), wp);
                const __m512i hi =
                    single ? _mm512_setzero_si512() : _mm512_maskz_loadu_epi8(bytes_mask(PAIR_Q8 - 64), wp + 64);
                q = _mm512_permutex2var_epi8(raw, qidx, hi);
                cw = dpbusd(bias, q); /* 128 * sum w per lane */
            } else {
                raw = _mm512_maskz_loadu_epi8(bytes_mask(single ? PAIR_Q4 / 2 : PAIR_Q4), wp);
                q = _mm512_and_si512(_mm512_srlv_epi64(_mm512_permutexvar_epi8(qidx, raw), shift), m4);
                cw = _mm512_setzero_si512();
            }
            const __m512 dw = scale_lanes(raw, wsc);
            UNROLL
            for (int t = 0; t < T; t++) {
                const __m512i p = Q8 ? _mm512_sub_epi32(dpbusd(xp[t].q, q), cw)
                                     : _mm512_sub_epi32(dpbusd(q, xp[t].q), cx[t]);
                acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw, xp[t].d), acc[r][t]);
            }
        }
    }
    UNROLL
    for (int r = 0; r < R; r++)
        UNROLL
        for (int t = 0; t < T; t++) y[(int64_t)t * ys + r] = hsum512(acc[r][t]);
}

#ifndef RB512
#define RB512 4
#endif
#define TILE_Q4_0(...) tile(__VA_ARGS__, 0)
#define TILE_Q8_0(...) tile(__VA_ARGS__, 1)
CLB_DEFINE_MDOT(mdot512_q4_0, TILE_Q4_0, CLB_QK, RB512)
CLB_DEFINE_MDOT(mdot512_q8_0, TILE_Q8_0, CLB_QK, RB512)

void clb_kernels_fill_avx512_mdot(clb_kernels *k, clb_mdot_fn *mdot) {
    k->isa = "avx512";
    mdot[CLB_DT_Q4_0] = mdot512_q4_0;
    mdot[CLB_DT_Q8_0] = mdot512_q8_0;
    k->vec_dot[CLB_DT_Q4_0] = mdot512_q4_0_1;
    k->vec_dot[CLB_DT_Q8_0] = mdot512_q8_0_1;
}

#else
typedef int clb_x86_avx512_empty_tu; /* ISO C forbids an empty translation unit */
#endif /* __x86_64__ */
