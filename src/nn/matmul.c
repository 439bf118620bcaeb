/* matmul.c — parallel matrix products over weight rows (see ops.h). */
#include <string.h>

#include "core/common.h"
#include "nn/ops.h"

enum { ROW_QUANTUM = 16 }; /* 16 f32 outputs = one 64-byte cache line per thread boundary */

uint64_t clb_matmul_qbuf_bytes(int64_t max_cols, int64_t max_tok) {
    int64_t cols = (int64_t)clb_align_up((uint64_t)max_cols, 256);
    uint64_t best = 0, rb;
    const int acts[] = {CLB_DT_Q8_0, CLB_DT_Q8_1, CLB_DT_Q8_K};
    for (size_t i = 0; i < CLB_ARRAY_LEN(acts); i++)
        if (clb_type(acts[i]) && clb_row_bytes(acts[i], cols, &rb) && rb > best) best = rb;
    best = clb_align_up(best, 64);
    return best * (uint64_t)max_tok + 64;
}

typedef struct mm_task {
    const clb_kernels *k;
    const clb_weight *w[2];
    int n_w;
    const uint8_t *xq;
    uint64_t xq_stride; /* bytes between activation rows */
    int n_tok;
    float *y[2];
    int64_t y_stride;
} mm_task;

static void mm_run(void *arg, int ith, int nth) {
    const mm_task *t = arg;
    int64_t total = 0;
    for (int i = 0; i < t->n_w; i++) total += t->w[i]->rows;
    int64_t lo, hi;
    clb_split(total, ith, nth, ROW_QUANTUM, &lo, &hi);
    for (int i = 0; i < t->n_w; i++) {
        const clb_weight *w = t->w[i];
        int64_t r0 = lo, r1 = hi;
        if (r0 < 0) r0 = 0;
        if (r1 > w->rows) r1 = w->rows;
        const clb_vec_dot_fn dot = t->k->vec_dot[w->dtype];
        const uint8_t *base = w->data;
        for (int64_t r = r0; r < r1; r++) {
            const uint8_t *row = base + (uint64_t)r * w->row_bytes;
            for (int tok = 0; tok < t->n_tok; tok++)
                dot(w->cols, &t->y[i][(int64_t)tok * t->y_stride + r], row, t->xq + (uint64_t)tok * t->xq_stride);
        }
        lo -= w->rows;
        hi -= w->rows;
    }
}

/* Converts n_tok rows of x to the activation format of dtype; returns the rows' base. */
static const uint8_t *prepare(const clb_mm_ctx *c, int dtype, int64_t cols, const float *x, int64_t x_stride,
                              int n_tok, uint64_t *stride) {
    int vt = clb_type(dtype)->vec_dot_type;
    if (vt == CLB_DT_F32) {
        *stride = (uint64_t)x_stride * sizeof(float);
        return (const uint8_t *)x;
    }
    uint64_t rb = 0;
    clb_row_bytes(vt, cols, &rb);
    rb = clb_align_up(rb, 64);
    uint8_t *q = c->qbuf;
    for (int t = 0; t < n_tok; t++) c->k->quantize[vt](x + (int64_t)t * x_stride, q + (uint64_t)t * rb, cols);
    *stride = rb;
    return q;
}

void clb_matmul(const clb_mm_ctx *c, const clb_weight *w, const float *x, int64_t x_stride, int n_tok, float *y,
                int64_t y_stride) {
    mm_task t = {.k = c->k, .w = {w, NULL}, .n_w = 1, .n_tok = n_tok, .y = {y, NULL}, .y_stride = y_stride};
    t.xq = prepare(c, w->dtype, w->cols, x, x_stride, n_tok, &t.xq_stride);
    clb_pool_run(c->pool, mm_run, &t);
}

void clb_matmul2(const clb_mm_ctx *c, const clb_weight *w1, const clb_weight *w2, const float *x,
                 int64_t x_stride, int n_tok, float *y1, float *y2, int64_t y_stride) {
    if (clb_type(w1->dtype)->vec_dot_type != clb_type(w2->dtype)->vec_dot_type || w1->cols != w2->cols) {
        clb_matmul(c, w1, x, x_stride, n_tok, y1, y_stride);
        clb_matmul(c, w2, x, x_stride, n_tok, y2, y_stride);
        return;
    }
    mm_task t = {.k = c->k, .w = {w1, w2}, .n_w = 2, .n_tok = n_tok, .y = {y1, y2}, .y_stride = y_stride};
    t.xq = prepare(c, w1->dtype, w1->cols, x, x_stride, n_tok, &t.xq_stride);
    clb_pool_run(c->pool, mm_run, &t);
}
