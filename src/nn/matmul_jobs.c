/* matmul_jobs.c — several matrix products in one parallel dispatch (see ops.h). */
#include "core/common.h"
#include "nn/ops.h"

enum { JOB_QUANTUM = 16 }; /* rows per chunk: 16 f32 outputs = one cache line */

uint64_t clb_mm_convert_stride(int dtype, int64_t cols) {
    int vt = clb_type(dtype)->vec_dot_type;
    uint64_t rb = 0;
    if (vt == CLB_DT_F32) return (uint64_t)cols * sizeof(float);
    clb_row_bytes(vt, cols, &rb);
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
    for (int t = 0; t < n; t++) c->k->quantize[vt](x + (int64_t)t * x_stride, q + (uint64_t)t * rb, cols);
    *stride = rb;
    return q;
}

typedef struct jobs_task {
    const clb_kernels *k;
    const clb_mm_job *jobs;
    int n_jobs;
    int64_t total; /* rows of all jobs, each job's rows rounded up to JOB_QUANTUM */
} jobs_task;

/* Chunks of JOB_QUANTUM rows, numbered across the jobs; thread ith takes a contiguous
   range of chunks, so every output element is computed by exactly one thread. */
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
        const clb_vec_dot_fn dot = t->k->vec_dot[jb->w->dtype];
        const uint8_t *wb = jb->w->data;
        for (int64_t r = r0; r < r1; r++) {
            const uint8_t *row = wb + (uint64_t)r * jb->w->row_bytes;
            for (int tok = 0; tok < jb->n_tok; tok++)
                dot(jb->w->cols, &jb->y[(int64_t)tok * jb->y_stride + r], row, jb->xq + (uint64_t)tok * jb->xq_stride);
        }
    }
}

void clb_matmul_jobs(const clb_mm_ctx *c, const clb_mm_job *jobs, int n_jobs) {
    jobs_task t = {.k = c->k, .jobs = jobs, .n_jobs = n_jobs};
    for (int j = 0; j < n_jobs; j++) t.total += (int64_t)clb_align_up((uint64_t)jobs[j].w->rows, JOB_QUANTUM);
    if (t.total) clb_pool_run(c->pool, jobs_run, &t);
}
