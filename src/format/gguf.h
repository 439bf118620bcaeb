/* gguf.h — GGUF v2/v3 reader (ggml docs/gguf.md). mmap read-only; every count, length,
   offset and size is validated against the file size with overflow-checked arithmetic
   before use, so a hostile file fails with a clear error instead of an out-of-bounds read. */
#ifndef CLB_GGUF_H
#define CLB_GGUF_H

#include <stdbool.h>
#include <stdint.h>

#include "core/platform.h"
#include "format/tensor.h"

typedef enum clb_gguf_type {
    CLB_GGUF_UINT8 = 0, CLB_GGUF_INT8 = 1, CLB_GGUF_UINT16 = 2, CLB_GGUF_INT16 = 3,
    CLB_GGUF_UINT32 = 4, CLB_GGUF_INT32 = 5, CLB_GGUF_FLOAT32 = 6, CLB_GGUF_BOOL = 7,
    CLB_GGUF_STRING = 8, CLB_GGUF_ARRAY = 9, CLB_GGUF_UINT64 = 10, CLB_GGUF_INT64 = 11,
    CLB_GGUF_FLOAT64 = 12
} clb_gguf_type;

typedef struct clb_gguf_str {
    const char *ptr; /* into the map, NOT NUL-terminated */
    uint64_t len;
} clb_gguf_str;

typedef struct clb_gguf_value {
    int type;            /* clb_gguf_type */
    union {
        uint64_t u;      /* unsigned integers, bool */
        int64_t i;       /* signed integers */
        double f;        /* float32/float64 */
        clb_gguf_str s;  /* string */
        struct {
            int type;                      /* element type */
            uint64_t n;                    /* element count */
            const uint8_t *data;           /* numeric arrays: raw little-endian elements */
            clb_gguf_str *strs;            /* string arrays: n entries (heap) */
            struct clb_gguf_value *items;  /* arrays of arrays: n entries (heap) */
        } arr;
    } v;
} clb_gguf_value;

typedef struct clb_gguf_kv {
    char *key; /* NUL-terminated copy */
    clb_gguf_value val;
} clb_gguf_kv;

typedef struct clb_gguf {
    clb_map map;
    uint32_t version;
    clb_gguf_kv *kv;
    int64_t n_kv;
    clb_tensor *tensors; /* shape in numpy order (reverse of GGUF ne); data into the map.
                            A dtype clb_type() does not know is kept as given with size 0
                            and data NULL: the loader reports it if it needs the tensor. */
    int n_tensors;
    uint64_t alignment;   /* general.alignment or 32 */
    uint64_t data_offset; /* start of the tensor data section */
} clb_gguf;

int clb_gguf_open(const char *path, clb_gguf *out);
/* Opens a GGUF file from a caller's source: its map, or the whole file read into memory. */
int clb_gguf_open_io(const clb_io *io, clb_gguf *out);
/* Parses from an existing map (fuzzing, tests); takes ownership of nothing: out->map is a
   copy with fd = -1, so clb_gguf_close leaves the caller's map alone, and out's pointers
   stay valid while that map does. On failure out is left empty (closing it is harmless). */
int clb_gguf_parse(const clb_map *m, clb_gguf *out);
void clb_gguf_close(clb_gguf *g);

const clb_gguf_kv *clb_gguf_find(const clb_gguf *g, const char *key);
const clb_tensor *clb_gguf_find_tensor(const clb_gguf *g, const char *name);
/* Typed getters: return false when the key is missing or of an incompatible type.
   Integer getters accept any integer type whose value fits; float accepts f32/f64. */
bool clb_gguf_get_i64(const clb_gguf *g, const char *key, int64_t *out);
bool clb_gguf_get_f64(const clb_gguf *g, const char *key, double *out);
bool clb_gguf_get_bool(const clb_gguf *g, const char *key, bool *out);
/* Returns a heap copy (NUL-terminated) of a string value, NULL when missing. */
char *clb_gguf_get_str(const clb_gguf *g, const char *key);
/* Array access: element count (0 when missing / not an array) and element type. */
uint64_t clb_gguf_arr_n(const clb_gguf *g, const char *key, int *elem_type);
/* Element i of a numeric array as i64 / f64 (false on a type mismatch or out of range). */
bool clb_gguf_arr_i64(const clb_gguf_kv *kv, uint64_t i, int64_t *out);
bool clb_gguf_arr_f64(const clb_gguf_kv *kv, uint64_t i, double *out);
const char *clb_gguf_type_name(int type);

#endif
