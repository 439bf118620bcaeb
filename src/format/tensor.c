/* tensor.c — shape arithmetic shared by the format readers. */
#include "format/tensor.h"
#include "core/common.h"

bool clb_tensor_nelem(const clb_tensor *t, uint64_t *out) {
    uint64_t n = 1;
    if (t->n_dims < 1 || t->n_dims > CLB_MAX_DIMS) return false;
    for (int i = 0; i < t->n_dims; i++) {
        if (t->shape[i] <= 0 || !clb_mul_u64(n, (uint64_t)t->shape[i], &n)) return false;
    }
    *out = n;
    return true;
}

bool clb_tensor_size_consistent(const clb_tensor *t) {
    uint64_t rows = 1, row_bytes, total;
    if (t->n_dims < 1 || t->n_dims > CLB_MAX_DIMS) return false;
    for (int i = 0; i < t->n_dims - 1; i++) {
        if (t->shape[i] <= 0 || !clb_mul_u64(rows, (uint64_t)t->shape[i], &rows)) return false;
    }
    if (t->shape[t->n_dims - 1] <= 0) return false;
    if (!clb_row_bytes(t->dtype, t->shape[t->n_dims - 1], &row_bytes)) return false;
    if (!clb_mul_u64(rows, row_bytes, &total)) return false;
    return total == t->size;
}
