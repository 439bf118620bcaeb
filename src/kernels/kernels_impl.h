/* kernels_impl.h — private to src/kernels/: the GGUF/ggml block layouts, the per-type
 * reference dequantizers (quant.c) and the per-ISA table fillers (generic.c, x86_avx2.c,
 * arm_neon.c) that kernels.c combines.
 *
 * Every block struct below is byte-for-byte the ggml layout (little-endian, no padding;
 * the _Static_asserts pin the sizes). fp16 fields are raw IEEE half bits.
 */
#ifndef CLB_KERNELS_IMPL_H
#define CLB_KERNELS_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kernels.h"

#define CLB_QK 32   /* block size of the 32-weight formats (Q4_0 ... Q8_1, IQ4_NL, MXFP4) */
#define CLB_QK_K 256 /* super-block size of the K-quants, IQ4_XS and Q8_K */

/* Q4_0: x = d * (q - 8), q in 0..15. Byte j holds weight j (low nibble) and j+16 (high). */
typedef struct { uint16_t d; uint8_t qs[16]; } clb_block_q4_0;
/* Q4_1: x = d * q + m. Nibbles as Q4_0. */
typedef struct { uint16_t d, m; uint8_t qs[16]; } clb_block_q4_1;
/* Q5_0: x = d * (q - 16), q = nibble | (bit j of qh (le u32) << 4). */
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; } clb_block_q5_0;
/* Q5_1: x = d * q + m, q as Q5_0. */
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; } clb_block_q5_1;
/* Q8_0: x = d * q. */
typedef struct { uint16_t d; int8_t qs[32]; } clb_block_q8_0;
/* Q8_1: x = d * q, s = d * sum(q) (ggml's activation format for Q4_1/Q5_1; layout only). */
typedef struct { uint16_t d, s; int8_t qs[32]; } clb_block_q8_1;
/* Q2_K: 16 sub-blocks of 16; scales[j] = scale (low 4 bits) | min (high 4 bits);
   x = d * sc * q - dmin * m, q 2 bits. */
typedef struct { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; } clb_block_q2_k;
/* Q3_K: 16 sub-blocks of 16, 6-bit scales packed in 12 bytes; x = d * (sc - 32) * q,
   q = 2 low bits - (high bit clear ? 4 : 0). */
typedef struct { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; } clb_block_q3_k;
/* Q4_K: 8 sub-blocks of 32, 6-bit scale/min packed in 12 bytes; x = d * sc * q - dmin * m. */
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; } clb_block_q4_k;
/* Q5_K: as Q4_K plus one high bit per weight in qh. */
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; } clb_block_q5_k;
/* Q6_K: 16 sub-blocks of 16, int8 scales; x = d * sc * (q - 32), q 6 bits (ql 4 + qh 2). */
typedef struct { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; } clb_block_q6_k;
/* Q8_K: activation format of the K-quants; x = d * q, bsums[j] = sum of q[16j..16j+15]. */
typedef struct { float d; int8_t qs[256]; int16_t bsums[16]; } clb_block_q8_k;
/* IQ4_NL: x = d * kvalues_iq4nl[nibble], nibbles as Q4_0. */
typedef struct { uint16_t d; uint8_t qs[16]; } clb_block_iq4_nl;
/* IQ4_XS: 8 sub-blocks of 32, 6-bit scales (low 4 bits in scales_l, high 2 in scales_h);
   x = d * (ls - 32) * kvalues_iq4nl[nibble]. */
typedef struct { uint16_t d; uint16_t scales_h; uint8_t scales_l[4]; uint8_t qs[128]; } clb_block_iq4_xs;
/* MXFP4: x = 2^(e-127) * e2m1(nibble); nibbles as Q4_0. */
typedef struct { uint8_t e; uint8_t qs[16]; } clb_block_mxfp4;

_Static_assert(sizeof(clb_block_q4_0) == 18, "q4_0 layout");
_Static_assert(sizeof(clb_block_q4_1) == 20, "q4_1 layout");
_Static_assert(sizeof(clb_block_q5_0) == 22, "q5_0 layout");
_Static_assert(sizeof(clb_block_q5_1) == 24, "q5_1 layout");
_Static_assert(sizeof(clb_block_q8_0) == 34, "q8_0 layout");
_Static_assert(sizeof(clb_block_q8_1) == 36, "q8_1 layout");
_Static_assert(sizeof(clb_block_q2_k) == 84, "q2_k layout");
_Static_assert(sizeof(clb_block_q3_k) == 110, "q3_k layout");
_Static_assert(sizeof(clb_block_q4_k) == 144, "q4_k layout");
_Static_assert(sizeof(clb_block_q5_k) == 176, "q5_k layout");
_Static_assert(sizeof(clb_block_q6_k) == 210, "q6_k layout");
_Static_assert(sizeof(clb_block_q8_k) == 292, "q8_k layout");
_Static_assert(sizeof(clb_block_iq4_nl) == 18, "iq4_nl layout");
_Static_assert(sizeof(clb_block_iq4_xs) == 136, "iq4_xs layout");
_Static_assert(sizeof(clb_block_mxfp4) == 17, "mxfp4 layout");

/* Non-linear 4-bit codebook of IQ4_NL / IQ4_XS (ggml's kvalues_iq4nl). */
extern const int8_t clb_kvalues_iq4nl[16];
/* E2M1 values doubled (0, 0.5, 1, 1.5, 2, 3, 4, 6 and negatives, times 2), ggml's
   kvalues_mxfp4; the block scale is then taken as 2^(e-128) (clb_e8m0_to_fp32_half). */
extern const int8_t clb_kvalues_mxfp4[16];

/* 2^(e-127) / 2 = 2^(e-128) as a float (subnormal for e < 2). */
float clb_e8m0_to_fp32_half(uint8_t e);

/* Unpacks the 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K scales[12]. */
static inline void clb_k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}
/* Unpacks the 16 6-bit Q3_K scales (still biased by 32) from scales[12]. */
void clb_q3k_scales(const uint8_t *packed, int8_t out[16]);

/* Reference dequantizers, one per type (quant.c). n is a multiple of the block size. */
void clb_dequant_f32(const void *src, float *dst, int64_t n);
void clb_dequant_f16(const void *src, float *dst, int64_t n);
void clb_dequant_bf16(const void *src, float *dst, int64_t n);
void clb_dequant_q4_0(const void *src, float *dst, int64_t n);
void clb_dequant_q4_1(const void *src, float *dst, int64_t n);
void clb_dequant_q5_0(const void *src, float *dst, int64_t n);
void clb_dequant_q5_1(const void *src, float *dst, int64_t n);
void clb_dequant_q8_0(const void *src, float *dst, int64_t n);
void clb_dequant_q8_1(const void *src, float *dst, int64_t n);
void clb_dequant_q2_k(const void *src, float *dst, int64_t n);
void clb_dequant_q3_k(const void *src, float *dst, int64_t n);
void clb_dequant_q4_k(const void *src, float *dst, int64_t n);
void clb_dequant_q5_k(const void *src, float *dst, int64_t n);
void clb_dequant_q6_k(const void *src, float *dst, int64_t n);
void clb_dequant_q8_k(const void *src, float *dst, int64_t n);
void clb_dequant_iq4_nl(const void *src, float *dst, int64_t n);
void clb_dequant_iq4_xs(const void *src, float *dst, int64_t n);
void clb_dequant_mxfp4(const void *src, float *dst, int64_t n);

/* Reference quantizers (quant.c). */
void clb_quant_f32(const float *src, void *dst, int64_t n);
void clb_quant_f16(const float *src, void *dst, int64_t n);
void clb_quant_bf16(const float *src, void *dst, int64_t n);
void clb_quant_q4_0(const float *src, void *dst, int64_t n);
void clb_quant_q4_1(const float *src, void *dst, int64_t n);
void clb_quant_q5_0(const float *src, void *dst, int64_t n);
void clb_quant_q5_1(const float *src, void *dst, int64_t n);
void clb_quant_q8_0(const float *src, void *dst, int64_t n);
void clb_quant_q8_k(const float *src, void *dst, int64_t n);
/* quant_k.c: ggml's quantizers of the super-block and non-linear formats */
void clb_quant_q2_k(const float *src, void *dst, int64_t n);
void clb_quant_q3_k(const float *src, void *dst, int64_t n);
void clb_quant_q4_k(const float *src, void *dst, int64_t n);
void clb_quant_q5_k(const float *src, void *dst, int64_t n);
void clb_quant_q6_k(const float *src, void *dst, int64_t n);
void clb_quant_iq4_nl(const float *src, void *dst, int64_t n);
void clb_quant_iq4_xs(const float *src, void *dst, int64_t n);
void clb_quant_mxfp4(const float *src, void *dst, int64_t n);

/* Table fillers. Each overrides only the entries it implements. */
void clb_kernels_fill_generic(clb_kernels *k);
#if defined(__x86_64__)
void clb_kernels_fill_avx2(clb_kernels *k);
#endif
#if defined(__aarch64__)
void clb_kernels_fill_neon(clb_kernels *k, bool dotprod);
#endif


/* The blocked-kernel entry points of one SIMD file, from a tile TILE(nb, R, T, w, ws, x, xs,
 * y, ys) that computes R weight rows against T activation rows (R, T <= 4, compile-time
 * constants after inlining) over nb blocks of BLOCK weights: NAME is the clb_mdot_fn (one
 * token -> tiles of up to 4 rows; several tokens -> tiles of RB rows (2 or 4, what the
 * register file holds) against all the tokens) and NAME##_1 the single-row clb_vec_dot_fn. */
#define CLB_MDOT_TOK_(TILE, R, nb, nt, w, ws, x, xs, y, ys)                                             \
    switch (nt) {                                                                                      \
    case 2: TILE(nb, R, 2, w, ws, x, xs, y, ys); break;                                                \
    case 3: TILE(nb, R, 3, w, ws, x, xs, y, ys); break;                                                \
    default: TILE(nb, R, 4, w, ws, x, xs, y, ys); break;                                               \
    }
#define CLB_DEFINE_MDOT(NAME, TILE, BLOCK, RB)                                                            \
    static void NAME(int64_t n, int nr, int nt, const void *w, uint64_t ws, const void *x, uint64_t xs,    \
                     float *y, int64_t ys) {                                                               \
        const int64_t nb = n / (BLOCK);                                                                    \
        const uint8_t *wp = w, *xp = x;                                                                    \
        if (nt == 1) {                                                                                     \
            switch (nr) {                                                                                  \
            case 1: TILE(nb, 1, 1, wp, ws, xp, xs, y, ys); return;                                         \
            case 2: TILE(nb, 2, 1, wp, ws, xp, xs, y, ys); return;                                         \
            case 3: TILE(nb, 3, 1, wp, ws, xp, xs, y, ys); return;                                         \
            default: TILE(nb, 4, 1, wp, ws, xp, xs, y, ys); return;                                        \
            }                                                                                              \
        }                                                                                                  \
        for (int r = 0; r < nr; r += (RB)) {                                                               \
            const uint8_t *wr = wp + (uint64_t)r * ws;                                                     \
            float *yr = y + r;                                                                             \
            const int left = nr - r < (RB) ? nr - r : (RB);                                                \
            if (left >= 4 && (RB) >= 4) {                                                                  \
                CLB_MDOT_TOK_(TILE, 4, nb, nt, wr, ws, xp, xs, yr, ys)                                     \
            } else if (left == 3 && (RB) >= 4) {                                                           \
                CLB_MDOT_TOK_(TILE, 3, nb, nt, wr, ws, xp, xs, yr, ys)                                     \
            } else if (left >= 2) {                                                                        \
                CLB_MDOT_TOK_(TILE, 2, nb, nt, wr, ws, xp, xs, yr, ys)                                     \
            } else {                                                                                       \
                CLB_MDOT_TOK_(TILE, 1, nb, nt, wr, ws, xp, xs, yr, ys)                                     \
            }                                                                                              \
        }                                                                                                  \
    }                                                                                                      \
    static void NAME##_1(int64_t n, float *out, const void *w, const void *x) {                            \
        TILE(n / (BLOCK), 1, 1, (const uint8_t *)w, 0, (const uint8_t *)x, 0, out, 0);                     \
    }


/* ---- blocked dot products (used by src/nn/matmul.c) -----------------------------------
 * mdot(n, nr, nt, w, w_stride, x, x_stride, y, y_stride):
 *     y[t * y_stride + r] = dot(weight row r, activation row t)   r < nr, t < nt
 * with 1 <= nr, nt <= CLB_MDOT_MAX, weight rows w_stride bytes apart and activation rows
 * (in the weight type's vec_dot_type format) x_stride bytes apart. Each weight block is
 * unpacked once and used for all nt tokens, each activation block once for all nr rows.
 * Every output goes through the same sequence of operations whatever nr and nt are, and
 * the ISA's vec_dot for that type is mdot with nr = nt = 1, so results do not depend on
 * how the caller blocks rows and tokens (thread count, batch size). */
enum { CLB_MDOT_MAX = 4 };
typedef void (*clb_mdot_fn)(int64_t n, int nr, int nt, const void *w, uint64_t w_stride, const void *x,
                            uint64_t x_stride, float *y, int64_t y_stride);
/* The blocked kernel of table k for weight type dtype, or NULL (then callers loop vec_dot). */
clb_mdot_fn clb_kernels_mdot(const clb_kernels *k, int dtype);
/* Products on packed rows (kernels.h): pgemm(cols, n_groups, nt, w, group_stride, x,
   x_stride, y, y_stride) computes y[t * y_stride + 16 g + i] for the 16 rows i of each group
   g < n_groups (groups group_stride bytes apart) and every token t < nt (any nt >= 1), the
   activations being clb_mm_convert rows with their extras. The table's rgemm does the same
   on row-major groups (rows group_stride / 16 bytes apart), transposing them in registers:
   the two give bit-identical outputs, so a weight may be packed in memory or not. */
typedef void (*clb_pgemm_fn)(int64_t cols, int64_t n_groups, int nt, const void *w, uint64_t group_stride,
                             const void *x, uint64_t x_stride, float *y, int64_t y_stride);
/* A clb_pgemm_fn over any number of groups and tokens from a tile TILE(n_blocks, T, w, rs,
   x, xs, y, ys) of one group against T <= TMAX (at most 4) tokens, T a constant (rs: the row
   stride of row-major groups). */
#define CLB_PT_(TMAX, n) ((TMAX) < (n) ? (TMAX) : (n))
#define CLB_DEFINE_PGEMM(NAME, BLOCK, TMAX, TILE)                                                         \
    static void NAME(int64_t cols, int64_t n_groups, int nt, const void *w, uint64_t gs, const void *x,    \
                     uint64_t xs, float *y, int64_t ys) {                                                  \
        const int64_t nb = cols / (BLOCK);                                                                 \
        const uint64_t rs = gs / CLB_PACK_ROWS;                                                            \
        for (int64_t g = 0; g < n_groups; g++) {                                                           \
            const uint8_t *wg = (const uint8_t *)w + (uint64_t)g * gs;                                     \
            float *yg = y + g * CLB_PACK_ROWS;                                                             \
            for (int t = 0; t < nt; t += (TMAX)) {                                                         \
                const uint8_t *xt = (const uint8_t *)x + (uint64_t)t * xs;                                 \
                float *yt = yg + (int64_t)t * ys;                                                          \
                switch (nt - t < (TMAX) ? nt - t : (TMAX)) {                                               \
                case 1: TILE(nb, 1, wg, rs, xt, xs, yt, ys); break;                                        \
                case 2: TILE(nb, CLB_PT_(TMAX, 2), wg, rs, xt, xs, yt, ys); break;                         \
                case 3: TILE(nb, CLB_PT_(TMAX, 3), wg, rs, xt, xs, yt, ys); break;                         \
                default: TILE(nb, CLB_PT_(TMAX, 4), wg, rs, xt, xs, yt, ys); break;                        \
                }                                                                                          \
            }                                                                                              \
        }                                                                                                  \
    }
/* The packed kernel of table k for dtype, or NULL (then weights must not be packed), and
   its row-major twin. */
clb_pgemm_fn clb_kernels_pgemm(const clb_kernels *k, int dtype);
clb_pgemm_fn clb_kernels_rgemm(const clb_kernels *k, int dtype);
/* Rows [r0, r1) of a weight matrix (rows row_bytes apart from w) against n_tok activation
   rows: y[t * y_stride + r] for r0 <= r < r1. Its first packed_rows rows (a multiple of
   CLB_PACK_ROWS) go through pgemm when interleaved (packed in memory), else rgemm; the
   other rows are blocked over rows and tokens with mdot when the table has one, else one
   vec_dot per output. What the parallel matrix products call on each thread's share. */
void clb_kernels_rows(const clb_kernels *k, int dtype, int64_t cols, int64_t r0, int64_t r1, const void *w,
                      uint64_t row_bytes, int64_t packed_rows, bool interleaved, const void *xq, uint64_t xq_stride,
                      int n_tok, float *y, int64_t y_stride);
/* Flash attention reads each cached K and V row once per step, straight from memory at long
   context: the loops ask for the rows CLB_FA_AHEAD keys ahead (a prefetch never faults, so
   rows past the cache's end are harmless), which the hardware prefetcher alone did not hide
   (q8_0 scores 6.0 -> 3.6 ns per (query, key) from DRAM, AVX-512). */
#define CLB_FA_AHEAD 8
static inline void clb_fa_prefetch_row(const void *row, uint64_t bytes) {
    for (uint64_t o = 0; o < bytes; o += 64) __builtin_prefetch((const uint8_t *)row + o);
}
/* Flash-attention scores (kernels.h fa_scores) of quantized keys through a blocked kernel
   (key rows as the weights, queries as the activations) or a table's vec_dot: the same dot
   product for every (query, key) whatever the tile. */
#define CLB_FA_SCORES_MDOT(NAME, MDOT)                                                                      \
    static void NAME(int64_t d, int nq, int nk, const void *q, uint64_t qs, const void *k, uint64_t ks,     \
                     float *s, int64_t ss) {                                                                \
        for (int i = 0; i < nq; i += CLB_MDOT_MAX)                                                          \
            for (int j = 0; j < nk; j += CLB_MDOT_MAX) {                                                    \
                for (int b = 0; b < CLB_MDOT_MAX; b++)                                                      \
                    clb_fa_prefetch_row((const uint8_t *)k + (uint64_t)(j + b + CLB_FA_AHEAD) * ks, ks);    \
                MDOT(d, nk - j < CLB_MDOT_MAX ? nk - j : CLB_MDOT_MAX, nq - i < CLB_MDOT_MAX ? nq - i : CLB_MDOT_MAX, \
                     (const uint8_t *)k + (uint64_t)j * ks, ks, (const uint8_t *)q + (uint64_t)i * qs, qs,   \
                     s + (int64_t)i * ss + j, ss);                                                          \
            }                                                                                               \
    }
#define CLB_FA_SCORES_DOT(NAME, DOT)                                                                        \
    static void NAME(int64_t d, int nq, int nk, const void *q, uint64_t qs, const void *k, uint64_t ks,     \
                     float *s, int64_t ss) {                                                                \
        for (int i = 0; i < nq; i++)                                                                        \
            for (int j = 0; j < nk; j++)                                                                    \
                DOT(d, s + (int64_t)i * ss + j, (const uint8_t *)k + (uint64_t)j * ks, (const uint8_t *)q + (uint64_t)i * qs); \
    }

#if defined(__x86_64__)
/* Fills mdot[] (indexed by dtype) and the matching vec_dot entries of the AVX2 table; with
   vnni, the AVX-VNNI variants (the CPU must have AVX-VNNI). */
void clb_kernels_fill_avx2_mdot(clb_kernels *k, clb_mdot_fn *mdot, bool vnni);
/* the AVX2 (vnni: AVX-VNNI) packed-row kernels of Q4_0, Q8_0, Q4_K, IQ4_NL and MXFP4 (kernels.h) */
void clb_kernels_fill_avx2_pack(clb_pgemm_fn *pgemm, clb_pgemm_fn *rgemm, bool vnni);
/* x86_avx512.c: on top of an AVX2 table, the AVX-512 VNNI/VBMI Q4_0 and Q8_0 kernels */
void clb_kernels_fill_avx512_mdot(clb_kernels *k, clb_mdot_fn *mdot, clb_pgemm_fn *pgemm, clb_pgemm_fn *rgemm);
#endif
#if defined(__aarch64__)
/* arm_neon_pack.c: the packed-row kernels of one NEON level (0 base Advanced SIMD, 1 with
   SDOT, 2 with SDOT and USDOT); the CPU must have that level's extensions */
void clb_kernels_fill_neon_pack(clb_kernels *k, clb_pgemm_fn *pgemm, clb_pgemm_fn *rgemm, int level);
#endif

#endif
