/* matmul.c — parallel matrix products over weight rows (see ops.h).
 *
 * Every product is a list of jobs (a weight, its converted activation rows, an output)
 * run in one parallel dispatch: the rows of all jobs are cut into chunks of JOB_QUANTUM
 * rows and each thread takes a contiguous range of chunks, so every output element is
 * computed by exactly one thread (the result does not depend on the thread count). Inside
 * a thread's share, clb_kernels_rows blocks rows and tokens so each weight block is loaded
 * once per batch. */
#include "core/common.h"
#include "kernels/kernels_impl.h"
#include "nn/ops.h"

enum { JOB_QUANTUM = 16 }; /* rows per chunk: 16 f32 outputs = one 64-byte cache line */

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

const uint8_t *clb_mm_convert(const clb_mm_ctx *c, void *dst, int dtype, int64_t cols, const float *x,
                              int64_t x_stride, int n, uint64_t *stride) {
    int vt = clb_type(dtype)->vec_dot_type;
    if (vt == CLB_DT_F32) {
        *stride = (uint64_t)x_stride * sizeof(float);
        return (const uint8_t *)x;
    }
    uint64_t rb = clb_mm_convert_stride(dtype, cols);
    uint8_t *q = dst;
    const bool extras = vt == CLB_DT_Q8_0 && clb_kernels_packs(c->k, dtype); /* read by packed kernels only */
    for (int t = 0; t < n; t++) {
        c->k->quantize[vt](x + (int64_t)t * x_stride, q + (uint64_t)t * rb, cols);
        if (extras) clb_q8_fill_extras(q + (uint64_t)t * rb, cols);
    }
    *stride = rb;
    return q;
}

typedef struct jobs_task {
    const clb_kernels *k;
    const clb_mm_job *jobs;
    int n_jobs;
    int64_t total; /* rows of all jobs, each job's rows rounded up to JOB_QUANTUM */
} jobs_task;

static void jobs_run(void *arg, int ith, int nth) {
    const jobs_task *t = arg;
    int64_t lo, hi;
    clb_split(t->total, ith, nth, JOB_QUANTUM, &lo, &hi);
    int64_t base = 0;
    for (int j = 0; j < t->n_jobs && base < hi; j++) {
        const clb_mm_job *jb = &t->jobs[j];
        const int64_t rows = jb->w->rows, span = (int64_t)clb_align_up((uint64_t)rows, JOB_QUANTUM);
        int64_t r0 = lo - base, r1 = hi - base;
        base += span;
        if (r1 <= 0 || r0 >= rows) continue;
        if (r0 < 0) r0 = 0;
        if (r1 > rows) r1 = rows;
        clb_kernels_rows(t->k, jb->w->dtype, jb->w->cols, r0, r1, jb->w->data, jb->w->row_bytes, jb->w->packed_rows, jb->w->interleaved, jb->xq,
                         jb->xq_stride, jb->n_tok, jb->y, jb->y_stride);
    }
}

void clb_matmul_jobs(const clb_mm_ctx *c, const clb_mm_job *jobs, int n_jobs) {
    jobs_task t = {.k = c->k, .jobs = jobs, .n_jobs = n_jobs};
    for (int j = 0; j < n_jobs; j++) t.total += (int64_t)clb_align_up((uint64_t)jobs[j].w->rows, JOB_QUANTUM);
    if (t.total) clb_pool_run(c->pool, jobs_run, &t);
}

void clb_matmul(const clb_mm_ctx *c, const clb_weight *w, const float *x, int64_t x_stride, int n_tok, float *y,
                int64_t y_stride) {
    clb_mm_job j = {.w = w, .n_tok = n_tok, .y = y, .y_stride = y_stride};
    j.xq = clb_mm_convert(c, c->qbuf, w->dtype, w->cols, x, x_stride, n_tok, &j.xq_stride);
    clb_matmul_jobs(c, &j, 1);
}

void clb_matmul2(const clb_mm_ctx *c, const clb_weight *w1, const clb_weight *w2, const float *x,
                 int64_t x_stride, int n_tok, float *y1, float *y2, int64_t y_stride) {
    if (clb_type(w1->dtype)->vec_dot_type != clb_type(w2->dtype)->vec_dot_type || w1->cols != w2->cols) {
        clb_matmul(c, w1, x, x_stride, n_tok, y1, y_stride);
        clb_matmul(c, w2, x, x_stride, n_tok, y2, y_stride);
        return;
    }
    clb_mm_job j[2] = {{.w = w1, .n_tok = n_tok, .y = y1, .y_stride = y_stride},
                       {.w = w2, .n_tok = n_tok, .y = y2, .y_stride = y_stride}};
    j[0].xq = clb_mm_convert(c, c->qbuf, w1->dtype, w1->cols, x, x_stride, n_tok, &j[0].xq_stride);
    j[1].xq = j[0].xq;
    j[1].xq_stride = j[0].xq_stride;
    clb_matmul_jobs(c, j, 2);
}
