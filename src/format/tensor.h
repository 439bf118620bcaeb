/* tensor.h — the tensor table every format reader produces. */
#ifndef CLB_TENSOR_H
#define CLB_TENSOR_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kernels.h"

#define CLB_MAX_DIMS 4

typedef struct clb_tensor {
    char *name;
    int dtype;                  /* clb_dtype id (may be a type this build cannot compute) */
    int n_dims;
    int64_t shape[CLB_MAX_DIMS]; /* outermost first, numpy order: a Linear is [out][in] */
    const uint8_t *data;        /* into the file mapping; size bytes, bounds-checked */
    uint64_t offset;            /* absolute offset of data in its file */
    uint64_t size;              /* bytes */
    int file_index;             /* which map of the source (sharded safetensors) */
    uint32_t crc32;             /* .colibri only */
    bool has_crc;
    int layer;                  /* .colibri index: layer, or -1 */
    int expert;                 /* .colibri index: routed expert id, or -1 for dense */
    int chunk;                  /* .colibri v2: the chunk holding it, -1 otherwise */
    uint64_t chunk_off;         /* .colibri v2: offset of its bytes in the chunk's plain bytes */
} clb_tensor;

/* Number of elements; false on overflow or a non-positive dimension. */
bool clb_tensor_nelem(const clb_tensor *t, uint64_t *out);
/* true when size == row_bytes(dtype, shape[last]) * (product of other dims). */
bool clb_tensor_size_consistent(const clb_tensor *t);

/* Name lookup over a tensor table (open addressing on a hash of the name), built once by
   the readers so clb_*_find is O(1) on models with thousands of tensors. Implemented in
   container.c. */
typedef struct clb_tensor_index {
    uint32_t *slots; /* [mask + 1]: tensor index + 1, 0 = empty */
    uint32_t mask;
} clb_tensor_index;

/* Builds the index over t[0..n). Returns COLIBRI_OK, COLIBRI_ERR_NOMEM, or
   COLIBRI_ERR_FORMAT when two tensors share a name (*dup, if not NULL, receives the index
   of the second one; no message is set, the caller names the file). */
int clb_tensor_index_build(clb_tensor_index *ix, const clb_tensor *t, int n, int *dup);
/* The tensor called name, or NULL. */
const clb_tensor *clb_tensor_index_find(const clb_tensor_index *ix, const clb_tensor *t,
                                        const char *name);
void clb_tensor_index_free(clb_tensor_index *ix);

#endif
