/* ops.h — the element-wise and row-wise pieces of a transformer block, and the parallel
 * matrix products. All buffers are f32 and row-major. */
#ifndef CLB_OPS_H
#define CLB_OPS_H

#include <stdint.h>

#include "core/threadpool.h"
#include "kernels/kernels.h"
#include "model/model.h"

/* out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i], n values (out may alias x). */
void clb_rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps);
/* out[i] = (x[i] - mean(x)) / sqrt(var(x) + eps) * w[i] + b[i] (torch LayerNorm, biased
   variance; b may be NULL), n values (out may alias x). */
void clb_layernorm(float *out, const float *x, const float *w, const float *b, int64_t n, float eps);
/* The block norm of kind (clb_norm_kind): clb_rmsnorm, or clb_layernorm with bias b. */
void clb_norm(int kind, float *out, const float *x, const float *w, const float *b, int64_t n, float eps);
/* y[i] += a * x[i] (x and y do not overlap). Written in fixed blocks, which GCC vectorises
   at -O2 where a plain loop stays scalar; elementwise, so the same bits as the plain loop. */
void clb_add_scaled(float *restrict y, const float *restrict x, float a, int64_t n);
/* true when none of x[0..n) is an infinity or a NaN (the same blocks, integer arithmetic) */
bool clb_all_finite(const float *x, int64_t n);
/* In-place softmax over n values (max-subtracted). */
void clb_softmax(float *x, int64_t n);
/* g[i] = silu(g[i]) * u[i] */
void clb_silu_mul(float *g, const float *u, int64_t n);
/* g[i] = max(g[i], 0) * u[i] (ReGLU, SmallThinker's experts) */
void clb_relu_mul(float *g, const float *u, int64_t n);
/* g[i] = gpt-oss's clamped SwiGLU of g[i], u[i] (CLB_ACT_SWIGLU_CLAMP, model.h) */
void clb_swiglu_clamp(float *g, const float *u, int64_t n, float alpha, float limit);
static inline float clb_sigmoid(float x) {
    return 1.0f / (1.0f + __builtin_expf(-x));
}

/* Rotary embedding tables: inv_freq[n_rot/2] derived from theta and the scaling type. */
typedef struct clb_rope {
    int n_rot, style;
    double *inv_freq; /* [n_rot/2] */
    float attn_factor; /* multiplies cos/sin (YaRN mscale); 1 otherwise */
} clb_rope;
/* freqs: [n_rot/2] divisors for CLB_ROPE_SCALING_FREQS, else NULL. n_ctx: the positions a
   sequence may reach (max_seq_len), which picks LongRoPE's long factors when it exceeds
   the original context (0: short). */
int clb_rope_init(clb_rope *r, const clb_hparams *hp, const float *freqs, int n_ctx);
void clb_rope_free(clb_rope *r);
/* Rotates dims [offset, offset + n_rot) of each of n_heads vectors of length head_dim at pos. */
void clb_rope_apply(const clb_rope *r, float *x, int n_heads, int head_dim, int offset, int pos);
/* Rotates already rotated vectors by delta positions more (the rotation alone, no attention
   factor: R(p + delta) = R(delta) R(p)), as a context shift moves cached keys. */
void clb_rope_shift(const clb_rope *r, float *x, int n_heads, int head_dim, int offset, int delta);

/* Matrix products: Y[t][r] = sum_c W[r][c] * X[t][c] for t < n_tok, split over the pool by
   rows of W. X rows are first converted to W's activation format in `qbuf` (sized by
   clb_matmul_qbuf_bytes). Strides are in floats. Deterministic: every output element is one
   dot product, whatever the thread count. */
typedef struct clb_mm_ctx {
    clb_pool *pool;
    const clb_kernels *k;
    void *qbuf;
    uint64_t qbuf_bytes;
} clb_mm_ctx;
uint64_t clb_matmul_qbuf_bytes(int64_t max_cols, int64_t max_tok);
void clb_matmul(const clb_mm_ctx *c, const clb_weight *w, const float *x, int64_t x_stride, int n_tok, float *y,
                int64_t y_stride);
/* Two products sharing one input conversion (gate and up projections). */
void clb_matmul2(const clb_mm_ctx *c, const clb_weight *w1, const clb_weight *w2, const float *x,
                 int64_t x_stride, int n_tok, float *y1, float *y2, int64_t y_stride);

/* Many products in one parallel dispatch (the routed experts of a layer): the rows of all
   jobs are split over the threads together, so a layer's experts cost one barrier. Each
   job's activations must already be in its weight's activation format (clb_mm_convert).
   A SwiGLU job also names `up` (same rows as w, its own converted activations): the thread
   that computes rows [r0, r1) of the gate computes the same rows of the up projection and
   writes y = silu(gate x) * (up x) there (y_up is its scratch); with hq it also converts
   those elements of y to the activation format of h_dtype (the down projection's weight),
   rows hq_stride bytes apart, so the next product needs no serial conversion. In one
   dispatch either every job is a SwiGLU job or none is. */
typedef struct clb_mm_job {
    const clb_weight *w;
    const uint8_t *xq;  /* n_tok rows, xq_stride bytes apart */
    uint64_t xq_stride;
    int n_tok;
    float *y;           /* [n_tok][y_stride] */
    int64_t y_stride;
    const clb_weight *up;  /* SwiGLU job: the up projection, else NULL */
    const uint8_t *xq_up;  /* its activations (may equal xq) */
    uint64_t xq_up_stride;
    float *y_up;           /* [n_tok][y_stride] */
    int h_dtype;           /* with hq: y converted for a weight of this dtype */
    uint8_t *hq;
    uint64_t hq_stride;
    const float *bias;     /* optional [w->rows]: added to every row of y (before the activation) */
    const float *bias_up;  /* optional [up->rows]: added to y_up */
    int act;               /* gated job's activation on y: clb_ffn_act (0 = SiLU) */
    float act_alpha, act_limit;
    const float *in_scale; /* optional [n_tok]: a gated job's y and y_up rows are multiplied by
                              it before the activation (= scaling the input rows, bias-free) */
} clb_mm_job;
/* t_enter: NULL, or [pool size] times (clb_now) at which each thread began its share. */
void clb_matmul_jobs(const clb_mm_ctx *c, const clb_mm_job *jobs, int n_jobs, double *t_enter);
/* A SwiGLU feed-forward, y = down(silu(g x) * (u x)), in two dispatches (the hidden rows
   converted for `down` inside the first). h, h_scratch: [n_tok][g->rows] floats. */
void clb_ffn_swiglu(const clb_mm_ctx *c, const clb_weight *g, const clb_weight *u, const clb_weight *down,
                    const float *x, int64_t x_stride, int n_tok, float *h, float *h_scratch, float *y,
                    int64_t y_stride);
/* The same with the gate's activation act (clb_ffn_act: SiLU, ReLU for ReGLU, or the clamped
   SwiGLU with alpha and limit). */
void clb_ffn_glu(const clb_mm_ctx *c, int act, float alpha, float limit, const clb_weight *g, const clb_weight *u, const clb_weight *down,
                 const float *x, int64_t x_stride, int n_tok, float *h, float *h_scratch, float *y, int64_t y_stride);
/* Makes d the down projection of SwiGLU job gu (down's columns are gu's rows), output y:
   for a quantized down weight gu also converts its output at q (returns q past those rows),
   for an f32 one d reads gu's float output (returns q). */
uint8_t *clb_mm_chain_down(clb_mm_job *gu, const clb_weight *down, float *y, int64_t y_stride, uint8_t *q,
                           clb_mm_job *d);
/* Bytes of qbuf clb_ffn_swiglu needs for n_tok rows (inputs of cols, hidden of ff). */
uint64_t clb_ffn_swiglu_qbuf_bytes(int64_t cols, int64_t ff, int64_t n_tok);
/* Converts n rows of x (x_stride floats apart, cols each) to the activation format of weight
   dtype `dtype` at dst; returns the rows (x itself for f32 activations) and their stride.
   Bytes needed at dst: n * clb_mm_convert_stride(dtype, cols). */
const uint8_t *clb_mm_convert(const clb_mm_ctx *c, void *dst, int dtype, int64_t cols, const float *x,
                              int64_t x_stride, int n, uint64_t *stride);
uint64_t clb_mm_convert_stride(int dtype, int64_t cols);
/* Elements [e0, e1) of one row of cols (both multiples of the format's block size, or e1 =
   cols), written where clb_mm_convert would put them at dst: pieces converted apart make
   the same bytes as the whole row. Not for f32 activations. */
void clb_mm_convert_range(const clb_mm_ctx *c, uint8_t *dst, int dtype, int64_t cols, const float *x, int64_t e0,
                          int64_t e1);
/* Elements per block of dtype's activation format (1 for f32). */
int64_t clb_mm_act_block(int dtype);
/* Identifies the bytes clb_mm_convert writes for dtype: weights of two dtypes with the same
   format can share one conversion of their input. */
int clb_mm_act_format(const clb_mm_ctx *c, int dtype);

#endif
