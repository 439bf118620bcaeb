/* matmul.c — parallel matrix products over weight rows (see ops.h).
 *
 * Every product is a list of jobs (a weight, its converted activation rows, an output)
 * run in one parallel dispatch: the threads take chunks of the jobs' rows (multiples of
 * JOB_QUANTUM rows) from a shared counter, each chunk a share of what is left (guided
 * self-scheduling: large chunks first, the last ones one quantum), so every output element
 * is computed by exactly one thread with the same kernel (the result does not depend on the
 * thread count or on who took which chunk). Inside a chunk, clb_kernels_rows blocks rows
 * and tokens so each weight block is loaded once per batch. */
#include <stdatomic.h>

#include "core/common.h"
#include "kernels/kernels_impl.h"
#include "nn/ops.h"

enum { JOB_QUANTUM = 16 }; /* rows per chunk: 16 f32 outputs = one 64-byte cache line */
/* A chunk is 1 / (GUIDED_SHARE x threads) of the rows left when it is taken. Equal chunks
   (8 per thread before) left a thread idle at the end of each dispatch for half a chunk on
   average — 16 % of a worker's time at decode on the 16-layer Qwen3 cut with 2 threads, where
   one chunk of a layer's expert gate/up rows is ~40 us; guided chunks end with one quantum
   after about 20 takes per dispatch. */
enum { GUIDED_SHARE = 2 };

uint64_t clb_matmul_qbuf_bytes(int64_t max_cols, int64_t max_tok) {
    int64_t cols = (int64_t)clb_align_up((uint64_t)max_cols, 256);
    uint64_t best = 0, rb;
    const int acts[] = {CLB_DT_Q8_0, CLB_DT_Q8_1, CLB_DT_Q8_K};
    for (size_t i = 0; i < CLB_ARRAY_LEN(acts); i++)
        if (clb_type(acts[i]) && clb_row_bytes(acts[i], cols, &rb)) {
            if (acts[i] == CLB_DT_Q8_0) rb = clb_q8x_offset(cols) + clb_q8x_bytes(cols); /* with the extras */
            if (rb > best) best = rb;
        }
    best = clb_align_up(best, 64);
    return best * (uint64_t)max_tok + 64;
}

uint64_t clb_mm_convert_stride(int dtype, int64_t cols) {
    int vt = clb_type(dtype)->vec_dot_type;
    uint64_t rb = 0;
    if (vt == CLB_DT_F32) return (uint64_t)cols * sizeof(float);
    clb_row_bytes(vt, cols, &rb);
    if (vt == CLB_DT_Q8_0) rb = clb_q8x_offset(cols) + clb_q8x_bytes(cols); /* the extras of packed kernels */
    return clb_align_up(rb, 64);
}

int clb_mm_act_format(const clb_mm_ctx *c, int dtype) {
    int vt = clb_type(dtype)->vec_dot_type;
    return 2 * vt + (vt == CLB_DT_Q8_0 && clb_kernels_packs(c->k, dtype));
}

int64_t clb_mm_act_block(int dtype) { return clb_type(clb_type(dtype)->vec_dot_type)->block_size; }

void clb_mm_convert_range(const clb_mm_ctx *c, uint8_t *dst, int dtype, int64_t cols, const float *x, int64_t e0,
                          int64_t e1) {
    const int vd = clb_type(dtype)->vec_dot_type;
    const clb_type_info *vt = clb_type(vd);
    const int64_t b0 = e0 / vt->block_size, b1 = e1 / vt->block_size;
    c->k->quantize[vd](x + e0, dst + (uint64_t)b0 * (uint64_t)vt->block_bytes, e1 - e0);
    if (clb_mm_act_format(c, dtype) & 1) clb_q8_fill_extras_range(dst, cols, b0, b1); /* packed kernels only */
}

const uint8_t *clb_mm_convert(const clb_mm_ctx *c, void *dst, int dtype, int64_t cols, const float *x,
                              int64_t x_stride, int n, uint64_t *stride) {
    if (clb_type(dtype)->vec_dot_type == CLB_DT_F32) {
        *stride = (uint64_t)x_stride * sizeof(float);
        return (const uint8_t *)x;
    }
    const uint64_t rb = clb_mm_convert_stride(dtype, cols);
    uint8_t *q = dst;
    for (int t = 0; t < n; t++) clb_mm_convert_range(c, q + (uint64_t)t * rb, dtype, cols, x + (int64_t)t * x_stride, 0, cols);
    *stride = rb;
    return q;
}

typedef struct jobs_task {
    const clb_mm_ctx *c;
    const clb_mm_job *jobs;
    int n_jobs;
    int64_t total;   /* rows of all jobs, each job's rows rounded up to the quantum */
    int64_t quantum; /* JOB_QUANTUM, or the block of a fused conversion when larger */
    int64_t div;     /* a chunk is the rows left / div, rounded up to the quantum */
    atomic_llong next; /* the first row not taken (a multiple of quantum) */
    double *t_enter;
} jobs_task;

static void rows_of(const clb_kernels *k, const clb_weight *w, int64_t r0, int64_t r1, const uint8_t *xq,
                    uint64_t xq_stride, int n_tok, float *y, int64_t y_stride) {
    clb_kernels_rows(k, w->dtype, w->cols, r0, r1, w->data, w->row_bytes, w->packed_rows, w->interleaved, xq,
                     xq_stride, n_tok, y, y_stride);
}

/* y[t][r] += b[r] for rows [r0, r1) of n_tok outputs */
static void add_bias(float *y, int64_t y_stride, int n_tok, const float *b, int64_t r0, int64_t r1) {
    for (int i = 0; i < n_tok; i++)
        for (int64_t r = r0; r < r1; r++) y[i * y_stride + r] += b[r];
}

/* rows [lo, hi) of the jobs' concatenated row space */
static void jobs_range(const jobs_task *t, int64_t lo, int64_t hi) {
    int64_t base = 0;
    for (int j = 0; j < t->n_jobs && base < hi; j++) {
        const clb_mm_job *jb = &t->jobs[j];
        const int64_t rows = jb->w->rows, span = (int64_t)clb_align_up((uint64_t)rows, (uint64_t)t->quantum);
        int64_t r0 = lo - base, r1 = hi - base;
        base += span;
        if (r1 <= 0 || r0 >= rows) continue;
        if (r0 < 0) r0 = 0;
        if (r1 > rows) r1 = rows;
        rows_of(t->c->k, jb->w, r0, r1, jb->xq, jb->xq_stride, jb->n_tok, jb->y, jb->y_stride);
        if (jb->bias) add_bias(jb->y, jb->y_stride, jb->n_tok, jb->bias, r0, r1);
        if (!jb->up) continue;
        rows_of(t->c->k, jb->up, r0, r1, jb->xq_up, jb->xq_up_stride, jb->n_tok, jb->y_up, jb->y_stride);
        if (jb->bias_up) add_bias(jb->y_up, jb->y_stride, jb->n_tok, jb->bias_up, r0, r1);
        for (int i = 0; i < jb->n_tok; i++) {
            float *h = jb->y + i * jb->y_stride;
            if (jb->in_scale) {
                float *u = jb->y_up + i * jb->y_stride;
                for (int64_t r = r0; r < r1; r++) {
                    h[r] *= jb->in_scale[i];
                    u[r] *= jb->in_scale[i];
                }
            }
            if (jb->act == CLB_ACT_RELU) clb_relu_mul(h + r0, jb->y_up + i * jb->y_stride + r0, r1 - r0);
            else if (jb->act == CLB_ACT_SWIGLU_CLAMP)
                clb_swiglu_clamp(h + r0, jb->y_up + i * jb->y_stride + r0, r1 - r0, jb->act_alpha, jb->act_limit);
            else clb_silu_mul(h + r0, jb->y_up + i * jb->y_stride + r0, r1 - r0);
            if (jb->hq) clb_mm_convert_range(t->c, jb->hq + jb->hq_stride * (uint64_t)i, jb->h_dtype, rows, h, r0, r1);
        }
    }
}

/* Threads take chunks of rows from a shared counter until none is left, so a thread that
   runs slower (a descheduled vCPU, a little core) takes fewer of them instead of holding
   up the others at the barrier. Which thread computes a row never changes its value. */
static void jobs_run(void *arg, int ith, int nth) {
    jobs_task *t = arg;
    (void)nth;
    if (t->t_enter) t->t_enter[ith] = clb_now();
    int64_t lo = atomic_load_explicit(&t->next, memory_order_relaxed), hi;
    for (;;) {
        do {
            if (lo >= t->total) return;
            const int64_t take = (int64_t)clb_align_up((uint64_t)((t->total - lo) / t->div), (uint64_t)t->quantum);
            hi = CLB_MIN(t->total, lo + CLB_MAX(take, t->quantum));
        } while (!atomic_compare_exchange_weak_explicit(&t->next, &lo, hi, memory_order_relaxed, memory_order_relaxed));
        jobs_range(t, lo, hi);
        lo = atomic_load_explicit(&t->next, memory_order_relaxed);
    }
}

void clb_matmul_jobs(const clb_mm_ctx *c, const clb_mm_job *jobs, int n_jobs, double *t_enter) {
    jobs_task t = {.c = c, .jobs = jobs, .n_jobs = n_jobs, .quantum = JOB_QUANTUM, .t_enter = t_enter};
    for (int j = 0; j < n_jobs; j++) /* block sizes are powers of two: the largest is a multiple of the others */
        if (jobs[j].hq) t.quantum = CLB_MAX(t.quantum, clb_mm_act_block(jobs[j].h_dtype));
    for (int j = 0; j < n_jobs; j++) t.total += (int64_t)clb_align_up((uint64_t)jobs[j].w->rows, (uint64_t)t.quantum);
    if (!t.total) return;
    const int64_t nth = clb_pool_size(c->pool);
    t.div = nth > 1 ? GUIDED_SHARE * nth : 1;
    atomic_init(&t.next, 0);
    clb_pool_run(c->pool, jobs_run, &t);
}

void clb_matmul(const clb_mm_ctx *c, const clb_weight *w, const float *x, int64_t x_stride, int n_tok, float *y,
                int64_t y_stride) {
    clb_mm_job j = {.w = w, .n_tok = n_tok, .y = y, .y_stride = y_stride};
    j.xq = clb_mm_convert(c, c->qbuf, w->dtype, w->cols, x, x_stride, n_tok, &j.xq_stride);
    clb_matmul_jobs(c, &j, 1, NULL);
}

uint64_t clb_ffn_swiglu_qbuf_bytes(int64_t cols, int64_t ff, int64_t n_tok) {
    return 2 * clb_matmul_qbuf_bytes(cols, n_tok) + clb_matmul_qbuf_bytes(ff, n_tok);
}

/* n rows of x converted at q for weights a and b (one conversion when they share an
   activation format and a width); returns the first byte of q after what was written. */
static uint8_t *convert_pair(const clb_mm_ctx *c, uint8_t *q, const clb_weight *a, const clb_weight *b,
                             const float *x, int64_t x_stride, int n, clb_mm_job *ja, const uint8_t **xb,
                             uint64_t *sb) {
    ja->xq = clb_mm_convert(c, q, a->dtype, a->cols, x, x_stride, n, &ja->xq_stride);
    if (ja->xq == q) q += ja->xq_stride * (uint64_t)n;
    if (clb_mm_act_format(c, b->dtype) == clb_mm_act_format(c, a->dtype) && b->cols == a->cols) {
        *xb = ja->xq;
        *sb = ja->xq_stride;
        return q;
    }
    *xb = clb_mm_convert(c, q, b->dtype, b->cols, x, x_stride, n, sb);
    if (*xb == q) q += *sb * (uint64_t)n;
    return q;
}

uint8_t *clb_mm_chain_down(clb_mm_job *gu, const clb_weight *down, float *y, int64_t y_stride, uint8_t *q,
                           clb_mm_job *d) {
    *d = (clb_mm_job){.w = down, .n_tok = gu->n_tok, .y = y, .y_stride = y_stride};
    if (clb_type(down->dtype)->vec_dot_type == CLB_DT_F32) { /* f32 activations: the hidden rows themselves */
        d->xq = (const uint8_t *)gu->y;
        d->xq_stride = (uint64_t)gu->y_stride * sizeof(float);
        return q;
    }
    gu->h_dtype = down->dtype;
    gu->hq = q;
    gu->hq_stride = clb_mm_convert_stride(down->dtype, gu->w->rows);
    d->xq = gu->hq;
    d->xq_stride = gu->hq_stride;
    return q + gu->hq_stride * (uint64_t)gu->n_tok;
}

void clb_ffn_swiglu(const clb_mm_ctx *c, const clb_weight *g, const clb_weight *u, const clb_weight *down,
                    const float *x, int64_t x_stride, int n_tok, float *h, float *h_scratch, float *y,
                    int64_t y_stride) {
    clb_ffn_glu(c, CLB_ACT_SILU, 0.0f, 0.0f, g, u, down, x, x_stride, n_tok, h, h_scratch, y, y_stride);
}

void clb_ffn_glu(const clb_mm_ctx *c, int act, float alpha, float limit, const clb_weight *g, const clb_weight *u, const clb_weight *down,
                 const float *x, int64_t x_stride, int n_tok, float *h, float *h_scratch, float *y, int64_t y_stride) {
    clb_mm_job j = {.w = g, .up = u, .n_tok = n_tok, .y = h, .y_up = h_scratch, .y_stride = g->rows, .act = act,
                     .act_alpha = alpha, .act_limit = limit}, d;
    uint8_t *q = convert_pair(c, c->qbuf, g, u, x, x_stride, n_tok, &j, &j.xq_up, &j.xq_up_stride);
    clb_mm_chain_down(&j, down, y, y_stride, q, &d);
    clb_matmul_jobs(c, &j, 1, NULL);
    clb_matmul_jobs(c, &d, 1, NULL);
}

void clb_matmul2(const clb_mm_ctx *c, const clb_weight *w1, const clb_weight *w2, const float *x,
                 int64_t x_stride, int n_tok, float *y1, float *y2, int64_t y_stride) {
    clb_mm_job j[2] = {{.w = w1, .n_tok = n_tok, .y = y1, .y_stride = y_stride},
                       {.w = w2, .n_tok = n_tok, .y = y2, .y_stride = y_stride}};
    convert_pair(c, c->qbuf, w1, w2, x, x_stride, n_tok, &j[0], &j[1].xq, &j[1].xq_stride);
    clb_matmul_jobs(c, j, 2, NULL);
}
