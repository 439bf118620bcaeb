/* kernels.h — weight/activation block formats and the table of compute kernels.
 *
 * dtype ids are GGUF's ggml_type numbers, so a GGUF tensor's type maps 1:1 and every
 * quantized block stays bit-exact between .gguf and .colibri.
 *
 * A matrix W[rows][cols] of dtype t is stored row-major; each row is cols/block_size
 * blocks of block_bytes. A dot product of one weight row with an activation row consumes
 * the activation in the weight type's vec_dot_type format (f32 for float weights, Q8_0
 * for Q4_0/Q8_0/..., Q8_K for K-quants): activations are quantized once per token with
 * kernels->quantize[vec_dot_type], then reused for every row.
 *
 * kernels.c picks, at run time, the best implementation of each entry the CPU supports:
 * generic.c (portable C, always built, the oracle for SIMD tests), x86_avx2.c, arm_neon.c.
 */
#ifndef CLB_KERNELS_H
#define CLB_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum clb_dtype {
    CLB_DT_F32 = 0,
    CLB_DT_F16 = 1,
    CLB_DT_Q4_0 = 2,
    CLB_DT_Q4_1 = 3,
    CLB_DT_Q5_0 = 6,
    CLB_DT_Q5_1 = 7,
    CLB_DT_Q8_0 = 8,
    CLB_DT_Q8_1 = 9,
    CLB_DT_Q2_K = 10,
    CLB_DT_Q3_K = 11,
    CLB_DT_Q4_K = 12,
    CLB_DT_Q5_K = 13,
    CLB_DT_Q6_K = 14,
    CLB_DT_Q8_K = 15,
    CLB_DT_IQ4_NL = 20,
    CLB_DT_IQ4_XS = 23,
    CLB_DT_BF16 = 30,
    CLB_DT_MXFP4 = 39,
    CLB_DT_COUNT = 40
} clb_dtype;

typedef struct clb_type_info {
    const char *name;        /* lowercase: "f32", "q4_0", "q4_k", ... */
    int32_t block_size;      /* weights per block (1 for f32/f16/bf16) */
    int32_t block_bytes;     /* bytes per block */
    clb_dtype vec_dot_type;  /* activation format consumed by this weight type's dot product */
    bool is_quantized;
} clb_type_info;

/* NULL for an id this build does not know. */
const clb_type_info *clb_type(int dtype);
/* Name lookup ("q8_0", case-insensitive). 0 on success, -1 when unknown. */
int clb_dtype_from_name(const char *name, clb_dtype *out);
const char *clb_dtype_name(int dtype); /* "unknown(N)" style string for unknown ids */
/* Bytes of one row of n weights. false when n is not a multiple of the block size, the
   type is unknown, or the size overflows. */
bool clb_row_bytes(int dtype, int64_t n, uint64_t *out);
/* true when the type can be used as a weight type (has dequantize + vec_dot). */
bool clb_dtype_is_weight(int dtype);
/* true when quantize_row_ref can produce this type (the types `convert` writes). */
bool clb_dtype_can_quantize(int dtype);

/* Half precision scalars. */
float clb_fp16_to_fp32(uint16_t h);
uint16_t clb_fp32_to_fp16(float f); /* round to nearest even */
float clb_bf16_to_fp32(uint16_t h);
uint16_t clb_fp32_to_bf16(float f); /* round to nearest even, NaN kept NaN */

/* Portable reference conversions (used by convert and as test oracles). n is a multiple
   of the block size. */
void clb_dequantize_row_ref(clb_dtype t, const void *src, float *dst, int64_t n);
void clb_quantize_row_ref(clb_dtype t, const float *src, void *dst, int64_t n);

typedef void (*clb_vec_dot_fn)(int64_t n, float *out, const void *w, const void *x);
typedef void (*clb_quantize_fn)(const float *src, void *dst, int64_t n);
typedef void (*clb_dequantize_fn)(const void *src, float *dst, int64_t n);
typedef void (*clb_axpy_fn)(int64_t n, float a, const float *x, float *y);

/* ---- flash attention (src/nn/attention.c) -------------------------------------------
 * A tile of nq query rows against nk <= CLB_FA_TK key rows of one K/V head.
 * fa_scores[t](d, nq, nk, q, qs, k, ks, s, ss): s[i * ss + j] = q_i . k_j for i < nq, j < nk;
 *   key rows of cache type t (ks bytes apart), query rows in clb_fa_query_type(t) (qs bytes
 *   apart). NULL when t is not a cache type.
 * fa_vacc[t](d, nq, nk, p, ps, v, vs, acc, as, alpha): acc[i * as + c] = acc[i * as + c] *
 *   alpha[i] + sum over j < nk of p[i * ps + j] * v_j[c], for c < d, value rows of type t (vs
 *   bytes apart); alpha NULL: factors of 1. The factor is the online softmax's rescale of a row
 *   whose maximum grew, applied as the row is loaded (one multiply, the same bits as a pass of
 *   its own before the sum) instead of a pass over the accumulators of its own.
 * fa_exp_sum(n, x, m): x[i] = exp(x[i] - m) (exactly 0 for x[i] = -inf), returns their sum;
 *   n is a multiple of 16 (the AVX-512 vector).
 * fa_softmax(nr, s, scale, m, mn, sum): the softmax step of nr full rows of CLB_FA_TK scores
 *   (s[r * CLB_FA_TK + j], every key seen): s *= scale, mn[r] = max(m[r], max_j s), then
 *   sum[r] = fa_exp_sum(CLB_FA_TK, s_r, mn[r]) — bit for bit the same as those steps one row
 *   at a time, the rows interleaved so their latencies overlap.
 * Every s[i][j] and every acc[i][c] goes through the same operations whatever nq, nk and the
 * other rows are (keys in order, one multiply-add chain per element), so how queries are
 * grouped into tiles — batch size, sequences sharing a step — never changes a result. */
#define CLB_FA_TK 32
typedef void (*clb_fa_scores_fn)(int64_t d, int nq, int nk, const void *q, uint64_t qs, const void *k, uint64_t ks,
                                 float *s, int64_t ss);
typedef void (*clb_fa_vacc_fn)(int64_t d, int nq, int nk, const float *p, int64_t ps, const void *v, uint64_t vs,
                               float *acc, int64_t as, const float *alpha);
typedef float (*clb_fa_exp_sum_fn)(int64_t n, float *x, float m);
typedef void (*clb_fa_softmax_fn)(int nr, float *s, float scale, const float *m, float *mn, float *sum);
/* The format queries take against keys of cache type t: Q8_0 for Q8_0 / Q4_0 keys (integer
   dot products), else F32. */
static inline int clb_fa_query_type(int t) { return t == CLB_DT_Q8_0 || t == CLB_DT_Q4_0 ? CLB_DT_Q8_0 : CLB_DT_F32; }

typedef struct clb_kernels {
    const char *isa; /* "generic", "avx2", "avx2+vnni", "avx512", "neon", "neon+dotprod", "neon+i8mm" */
    /* vec_dot[t](n, &out, w_row, x_row): out = sum_i w[i] * x[i], w of dtype t, x in
       clb_type(t)->vec_dot_type format. NULL when t is not a weight type. */
    clb_vec_dot_fn vec_dot[CLB_DT_COUNT];
    /* quantize[a](x_f32, dst, n): activation row to format a (F32 is a copy). */
    clb_quantize_fn quantize[CLB_DT_COUNT];
    /* dequantize[t](src, dst_f32, n): a row of weights to f32 (embedding lookups). */
    clb_dequantize_fn dequantize[CLB_DT_COUNT];
    /* axpy_f32(n, a, x, y): y[i] += a * x[i] (attention's weighted sum of values) */
    clb_axpy_fn axpy_f32;
    /* flash attention inner loops (above) */
    clb_fa_scores_fn fa_scores[CLB_DT_COUNT];
    clb_fa_vacc_fn fa_vacc[CLB_DT_COUNT];
    clb_fa_exp_sum_fn fa_exp_sum;
    clb_fa_softmax_fn fa_softmax;
} clb_kernels;

/* ---- packed weights ----------------------------------------------------------------- *
 * A kernel table may compute a dtype's products faster on weights whose rows are
 * interleaved in groups of CLB_PACK_ROWS (one register lane per row). Packing is an
 * in-place permutation inside each group (same bytes per group; rows past the last full
 * group are left as they are), done once when the weights are placed in memory
 * (moe/expert_store.c). Layouts (per block b of a group, block stride 16 x block bytes):
 *   Q4_0, IQ4_NL: 16 fp16 scales, then for g = 0..3 the bytes qs[4g..4g+3] of rows 0..15;
 *   MXFP4: the same with the 16 E8M0 exponent bytes in place of the fp16 scales;
 *   Q8_0: 16 fp16 scales, then for k = 0..7 the bytes qs[4k..4k+3] ^ 0x80 of rows 0..15.
 * Products on packed rows read the extras clb_mm_convert writes after each Q8_0 activation
 * row: per block its scale as f32, -8 * sum(q) and -128 * sum(q) (int32). */
#define CLB_PACK_ROWS 16
#define CLB_PACK_MAX_COLS 65536
struct clb_kernels;
/* true when table k computes dtype on packed rows (then such weights may be packed) */
bool clb_kernels_packs(const struct clb_kernels *k, int dtype);
/* Rows of a rows x cols dtype weight that table k computes with its packed kernels: the
   full groups when the table packs dtype and the layout is known, else 0. */
int64_t clb_kernels_pack_rows(const struct clb_kernels *k, int dtype, int64_t cols, int64_t rows);
/* true when dtype has a packed layout for rows of cols weights */
bool clb_pack_layout_known(int dtype, int64_t cols);
/* Bytes of scratch clb_pack_rows / clb_unpack_rows need (one group). */
uint64_t clb_pack_scratch_bytes(int dtype, int64_t cols);
/* Packs the full groups of rows x cols weights at data in place; returns the packed rows
   (a multiple of CLB_PACK_ROWS), 0 when the layout is unknown. */
int64_t clb_pack_rows(int dtype, int64_t cols, int64_t rows, void *data, void *scratch);
/* The same from src (row-major) to dst (rows x row bytes, not overlapping src); the rows
   past the last full group are copied as they are. */
int64_t clb_pack_rows_to(int dtype, int64_t cols, int64_t rows, const void *src, void *dst);
/* The inverse, for the first packed_rows rows (tests, dequantizing a packed row). */
void clb_unpack_rows(int dtype, int64_t cols, int64_t packed_rows, void *data, void *scratch);
/* Offset of the extras after a Q8_0 activation row of cols, and their bytes. */
static inline uint64_t clb_q8x_offset(int64_t cols) { return ((uint64_t)(cols / 32) * 34 + 3) & ~(uint64_t)3; }
static inline uint64_t clb_q8x_bytes(int64_t cols) { return (uint64_t)(cols / 32) * 12; }
/* Writes the extras of one Q8_0 activation row (after its blocks): all of them, or those of
   blocks [b0, b1). */
void clb_q8_fill_extras(void *row, int64_t cols);
void clb_q8_fill_extras_range(void *row, int64_t cols, int64_t b0, int64_t b1);

/* The table for this CPU (selected once, thread-safe). COLIBRI_ISA=generic forces the
   portable kernels. */
const clb_kernels *clb_kernels_get(void);
const clb_kernels *clb_kernels_generic(void);
/* The SIMD table for this architecture if built and supported by the CPU, else NULL. */
const clb_kernels *clb_kernels_simd(void);
/* The table of one named ISA ("generic", "avx2", "neon", "neon+dotprod") when built and
   supported by this CPU, else NULL (tests use it to check every variant). */
const clb_kernels *clb_kernels_by_isa(const char *name);

#endif
