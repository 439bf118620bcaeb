/* container.h — the .colibri file, version 1 (docs/FORMAT.md is the byte-level spec).
 *
 *   [0,128)        header (magic, version, flags, section offsets/sizes, CRC32s)
 *   [128, ...)     metadata: u64 length + JSON {"config", "tokenizer"?, "tensors"}
 *   [data_offset)  data, 4096-aligned: dense tensors, then each (layer, expert)'s tensors
 *                  contiguous, every expert starting on a 4096-byte boundary.
 */
#ifndef CLB_CONTAINER_H
#define CLB_CONTAINER_H

#include <cjson/cJSON.h>

#include "core/platform.h"
#include "format/tensor.h"

#define CLB_CONTAINER_MAGIC "COLIBRI"
#define CLB_CONTAINER_VERSION 1
#define CLB_CONTAINER_HEADER_SIZE 128
#define CLB_CONTAINER_DATA_ALIGN 4096
#define CLB_CONTAINER_TENSOR_ALIGN 64

typedef struct clb_container {
    clb_map map;
    uint32_t version, flags;
    uint64_t meta_offset, meta_size, data_offset, data_size;
    uint32_t header_crc, meta_crc, data_crc;
    cJSON *meta;            /* the whole metadata JSON */
    const cJSON *config;    /* meta.config (object) */
    const cJSON *tokenizer; /* meta.tokenizer or NULL */
    clb_tensor *tensors;    /* offsets absolute, data points into map */
    int n_tensors;
    clb_tensor_index index; /* name lookup (private to container.c) */
} clb_container;

/* Maps and validates: magic, version, header CRC, section bounds, metadata CRC and JSON,
   every tensor's dtype/shape/size/offset against the data section. Data CRCs are not
   read here (see clb_container_verify). */
int clb_container_open(const char *path, clb_container *out);
void clb_container_close(clb_container *c);
const clb_tensor *clb_container_find(const clb_container *c, const char *name);
/* Checks the data-section CRC and every tensor's CRC. On a mismatch returns
   COLIBRI_ERR_CORRUPT with the first corrupt tensor's name in the error message.
   bytes_checked (may be NULL) receives the bytes hashed. */
int clb_container_verify(const clb_container *c, uint64_t *bytes_checked);

/* zlib-compatible CRC-32 (crc32(crc, data, n) of zlib), hardware-accelerated when the CPU
   allows (x86-64 PCLMUL, ARMv8 CRC32); COLIBRI_ISA=generic forces zlib's. */
uint32_t clb_crc32(uint32_t crc, const void *data, size_t n);

/* ---- writer (streaming: one tensor in memory at a time) ---- */

typedef struct clb_cw_tensor {
    const char *name;
    int dtype;
    int n_dims;
    int64_t shape[CLB_MAX_DIMS];
    int layer;  /* -1 for none */
    int expert; /* -1 for dense */
} clb_cw_tensor;

typedef struct clb_cwriter clb_cwriter;

/* Creates path and lays out the data section: dense tensors (expert == -1) in the given
   order, then experts by (layer, expert), each expert's tensors in the given order, each
   expert 4096-aligned. config and tokenizer (may be NULL) are copied. */
clb_cwriter *clb_cwriter_create(const char *path, const cJSON *config, const cJSON *tokenizer,
                                const clb_cw_tensor *tensors, int n_tensors);
/* Appends bytes of tensor i (any tensor order; within a tensor, sequential chunks).
   Writing more than the tensor's size is an error. */
int clb_cwriter_write(clb_cwriter *w, int i, const void *data, uint64_t len);
/* Checks every tensor was fully written, writes metadata with CRCs and the header. */
int clb_cwriter_finish(clb_cwriter *w);
/* Frees (and on an unfinished writer removes the partial file). NULL is fine. */
void clb_cwriter_free(clb_cwriter *w);

#endif
