/* gguf.c — GGUF v2/v3 reader (layout facts from ggml docs/gguf.md).
 *
 *   "GGUF" | version u32 | n_tensors u64 | n_kv u64
 *   n_kv    x { key: u64 len + bytes | value type u32 | value }
 *   n_tensors x { name: u64 len + bytes | n_dims u32 | ne[n_dims] u64 | type u32 | offset u64 }
 *   padding to general.alignment (default 32) | tensor data (offsets relative to here)
 *
 * Every read goes through a cursor that checks the remaining byte count first, and every
 * count read from the file is compared against the bytes left before anything is allocated:
 * an array element needs at least 1 byte (numeric), 8 bytes (string) or 12 bytes (nested
 * array), so the heap used is bounded by a small multiple of the file size whatever the
 * counts claim.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "format/gguf.h"

#define GGUF_MAX_DEPTH 8          /* arrays nested deeper than this are refused */
#define GGUF_MAX_KEY_LEN 65535    /* spec: keys are at most 2^16-1 bytes */
#define GGUF_MAX_NAME_LEN 65535
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MIN_KV_BYTES 13      /* key length + empty key... + type + 1-byte value */
#define GGUF_MIN_TENSOR_BYTES 32  /* name length + n_dims + one ne + type + offset */

typedef struct cursor {
    const uint8_t *base;
    uint64_t size, pos;
    const char *file; /* for messages */
} cursor;

static uint64_t cur_left(const cursor *c) { return c->size - c->pos; }

static bool cur_take(cursor *c, uint64_t n, const uint8_t **p) {
    if (!clb_range_ok(c->pos, n, c->size)) return false;
    *p = c->base + c->pos;
    c->pos += n;
    return true;
}

static bool cur_u32(cursor *c, uint32_t *v) {
    const uint8_t *p;
    if (!cur_take(c, 4, &p)) return false;
    *v = clb_rd_u32(p);
    return true;
}

static bool cur_u64(cursor *c, uint64_t *v) {
    const uint8_t *p;
    if (!cur_take(c, 8, &p)) return false;
    *v = clb_rd_u64(p);
    return true;
}

/* Size in bytes of a fixed-size value type, 0 for string/array/unknown. */
static uint64_t scalar_size(int type) {
    switch (type) {
    case CLB_GGUF_UINT8: case CLB_GGUF_INT8: case CLB_GGUF_BOOL: return 1;
    case CLB_GGUF_UINT16: case CLB_GGUF_INT16: return 2;
    case CLB_GGUF_UINT32: case CLB_GGUF_INT32: case CLB_GGUF_FLOAT32: return 4;
    case CLB_GGUF_UINT64: case CLB_GGUF_INT64: case CLB_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

static bool type_valid(uint32_t type) { return type <= CLB_GGUF_FLOAT64; }

static bool type_is_int(int type) {
    return type == CLB_GGUF_UINT8 || type == CLB_GGUF_INT8 || type == CLB_GGUF_UINT16 ||
           type == CLB_GGUF_INT16 || type == CLB_GGUF_UINT32 || type == CLB_GGUF_INT32 ||
           type == CLB_GGUF_UINT64 || type == CLB_GGUF_INT64;
}

static bool type_is_signed(int type) {
    return type == CLB_GGUF_INT8 || type == CLB_GGUF_INT16 || type == CLB_GGUF_INT32 ||
           type == CLB_GGUF_INT64;
}

/* Decodes one little-endian fixed-size value of `type` at p into v (v->type set). */
static void decode_scalar(int type, const uint8_t *p, clb_gguf_value *v) {
    v->type = type;
    switch (type) {
    case CLB_GGUF_UINT8: case CLB_GGUF_BOOL: v->v.u = p[0]; break;
    case CLB_GGUF_INT8: v->v.i = (int8_t)p[0]; break;
    case CLB_GGUF_UINT16: v->v.u = clb_rd_u16(p); break;
    case CLB_GGUF_INT16: v->v.i = (int16_t)clb_rd_u16(p); break;
    case CLB_GGUF_UINT32: v->v.u = clb_rd_u32(p); break;
    case CLB_GGUF_INT32: v->v.i = (int32_t)clb_rd_u32(p); break;
    case CLB_GGUF_UINT64: v->v.u = clb_rd_u64(p); break;
    case CLB_GGUF_INT64: v->v.i = (int64_t)clb_rd_u64(p); break;
    case CLB_GGUF_FLOAT32: {
        uint32_t bits = clb_rd_u32(p);
        float f;
        memcpy(&f, &bits, sizeof f);
        v->v.f = f;
        break;
    }
    case CLB_GGUF_FLOAT64: {
        uint64_t bits = clb_rd_u64(p);
        memcpy(&v->v.f, &bits, sizeof v->v.f);
        break;
    }
    default: break;
    }
}

static void value_free(clb_gguf_value *v) {
    if (v->type != CLB_GGUF_ARRAY) return;
    if (v->v.arr.items) {
        for (uint64_t i = 0; i < v->v.arr.n; i++) value_free(&v->v.arr.items[i]);
        clb_free(v->v.arr.items);
    }
    clb_free(v->v.arr.strs);
    v->v.arr.items = NULL;
    v->v.arr.strs = NULL;
}

/* Reads a GGUF string (u64 length + bytes) without touching the error state (messages are
   built only on failure: a vocabulary holds ~10^5 strings). The cursor stays put on failure. */
static bool take_str(cursor *c, clb_gguf_str *s) {
    uint64_t len, at = c->pos;
    const uint8_t *p;
    if (!cur_u64(c, &len) || !cur_take(c, len, &p)) {
        c->pos = at;
        return false;
    }
    s->ptr = (const char *)p;
    s->len = len;
    return true;
}

/* The error for a string at byte `at` that take_str refused; `what` names the field. */
static int str_error(const cursor *c, uint64_t at, const char *what) {
    if (!clb_range_ok(at, 8, c->size))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: truncated at byte %llu reading the length of %s",
                       c->file, (unsigned long long)at, what);
    return clb_err(COLIBRI_ERR_FORMAT,
                   "%s: %s at byte %llu has length %llu but only %llu bytes remain", c->file,
                   what, (unsigned long long)at, (unsigned long long)clb_rd_u64(c->base + at),
                   (unsigned long long)(c->size - at - 8));
}

/* Reads a value of `type` (already read) into v. key names the KV for messages; depth is
   the number of enclosing arrays. On failure v holds whatever was allocated, so the caller
   frees it with value_free (v->type is set before any allocation). */
static int read_value(cursor *c, int type, int depth, clb_gguf_value *v, const char *key) {
    memset(v, 0, sizeof *v);
    v->type = type;
    uint64_t sz = scalar_size(type);
    if (sz) {
        const uint8_t *p;
        uint64_t at = c->pos;
        if (!cur_take(c, sz, &p))
            return clb_err(COLIBRI_ERR_FORMAT, "%s: key '%s': truncated %s value at byte %llu",
                           c->file, key, clb_gguf_type_name(type), (unsigned long long)at);
        decode_scalar(type, p, v);
        if (type == CLB_GGUF_BOOL && v->v.u > 1)
            return clb_err(COLIBRI_ERR_FORMAT, "%s: key '%s': bool value %u is neither 0 nor 1",
                           c->file, key, (unsigned)v->v.u);
        return COLIBRI_OK;
    }
    if (type == CLB_GGUF_STRING) {
        uint64_t at = c->pos;
        if (take_str(c, &v->v.s)) return COLIBRI_OK;
        char what[96];
        snprintf(what, sizeof what, "the value of key '%.64s'", key);
        return str_error(c, at, what);
    }
    if (type != CLB_GGUF_ARRAY)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: key '%s': unknown value type %d", c->file, key,
                       type);

    if (depth >= GGUF_MAX_DEPTH)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: key '%s': arrays nested deeper than %d levels",
                       c->file, key, GGUF_MAX_DEPTH);
    uint32_t et;
    uint64_t n, at = c->pos;
    if (!cur_u32(c, &et) || !cur_u64(c, &n))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: key '%s': truncated array header at byte %llu",
                       c->file, key, (unsigned long long)at);
    if (!type_valid(et))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: key '%s': unknown array element type %u",
                       c->file, key, et);
    v->v.arr.type = (int)et;
    uint64_t esz = scalar_size((int)et);
    uint64_t min_bytes = esz ? esz : (et == CLB_GGUF_STRING ? 8 : 12);
    /* every element needs at least min_bytes: refuse absurd counts before allocating */
    if (n > cur_left(c) / min_bytes)
        return clb_err(COLIBRI_ERR_FORMAT,
                       "%s: key '%s': array of %llu %s elements does not fit in the %llu bytes "
                       "left",
                       c->file, key, (unsigned long long)n, clb_gguf_type_name((int)et),
                       (unsigned long long)cur_left(c));
    if (esz) {
        const uint8_t *p = c->base + c->pos;
        c->pos += n * esz; /* in bounds: checked above */
        v->v.arr.data = p;
        if (et == CLB_GGUF_BOOL) {
            for (uint64_t i = 0; i < n; i++)
                if (p[i] > 1)
                    return clb_err(COLIBRI_ERR_FORMAT,
                                   "%s: key '%s': bool array element %llu is %u (not 0 or 1)",
                                   c->file, key, (unsigned long long)i, p[i]);
        }
        v->v.arr.n = n;
        return COLIBRI_OK;
    }
    if (n == 0) return COLIBRI_OK;
    if (et == CLB_GGUF_STRING) {
        v->v.arr.strs = clb_calloc((size_t)n, sizeof *v->v.arr.strs);
        if (!v->v.arr.strs)
            return clb_err(COLIBRI_ERR_NOMEM, "%s: key '%s': out of memory for %llu strings",
                           c->file, key, (unsigned long long)n);
        v->v.arr.n = n;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t s_at = c->pos;
            if (!take_str(c, &v->v.arr.strs[i])) {
                char what[112];
                snprintf(what, sizeof what, "element %llu of key '%.64s'",
                         (unsigned long long)i, key);
                return str_error(c, s_at, what);
            }
        }
        return COLIBRI_OK;
    }
    /* array of arrays */
    v->v.arr.items = clb_calloc((size_t)n, sizeof *v->v.arr.items);
    if (!v->v.arr.items)
        return clb_err(COLIBRI_ERR_NOMEM, "%s: key '%s': out of memory for %llu nested arrays",
                       c->file, key, (unsigned long long)n);
    v->v.arr.n = n; /* items are zeroed, so freeing a partly read array is safe */
    for (uint64_t i = 0; i < n; i++) {
        int rc = read_value(c, CLB_GGUF_ARRAY, depth + 1, &v->v.arr.items[i], key);
        if (rc) return rc;
    }
    return COLIBRI_OK;
}

/* ---- duplicate detection: sort the names, compare neighbours (O(n log n) whatever the
   names are, unlike an unkeyed hash table a crafted file could fill with collisions) ---- */

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* name(i) is *(char **)(base + i * stride). Returns a name that occurs twice, or NULL with
   *oom = false when all are unique (*oom = true: out of memory). */
static const char *find_duplicate(const void *base, size_t stride, int64_t n, bool *oom) {
    *oom = false;
    if (n < 2) return NULL;
    const char **names = clb_malloc((size_t)n * sizeof *names);
    if (!names) {
        *oom = true;
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        names[i] = *(char *const *)((const char *)base + (size_t)i * stride);
    qsort(names, (size_t)n, sizeof *names, cmp_name);
    const char *dup = NULL;
    for (int64_t i = 1; i < n && !dup; i++)
        if (strcmp(names[i - 1], names[i]) == 0) dup = names[i];
    clb_free(names);
    return dup;
}

/* Heap copy of a file string as a C string; NULL (with error set) on an embedded NUL. */
static int copy_name(const cursor *c, const clb_gguf_str *s, const char *what, char **out) {
    if (memchr(s->ptr, 0, (size_t)s->len))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: %s '%.*s' contains a NUL byte", c->file, what,
                       (int)CLB_MIN(s->len, 64), s->ptr);
    *out = clb_malloc((size_t)s->len + 1);
    if (!*out) return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", c->file);
    memcpy(*out, s->ptr, (size_t)s->len);
    (*out)[s->len] = 0;
    return COLIBRI_OK;
}

static int read_kvs(cursor *c, clb_gguf *g, uint64_t n_kv) {
    if (n_kv > cur_left(c) / GGUF_MIN_KV_BYTES || n_kv > (uint64_t)INT64_MAX)
        return clb_err(COLIBRI_ERR_FORMAT,
                       "%s: metadata count %llu does not fit in the %llu bytes left (truncated?)",
                       c->file, (unsigned long long)n_kv, (unsigned long long)cur_left(c));
    if (n_kv == 0) return COLIBRI_OK;
    g->kv = clb_calloc((size_t)n_kv, sizeof *g->kv);
    if (!g->kv) return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", c->file);
    for (uint64_t i = 0; i < n_kv; i++) {
        clb_gguf_kv *kv = &g->kv[i];
        clb_gguf_str key;
        uint64_t at = c->pos;
        char what[48];
        bool ok = take_str(c, &key);
        if (!ok || key.len == 0 || key.len > GGUF_MAX_KEY_LEN) {
            snprintf(what, sizeof what, "metadata key %llu", (unsigned long long)i);
            if (!ok) return str_error(c, at, what);
            return clb_err(COLIBRI_ERR_FORMAT, "%s: %s has invalid length %llu", c->file, what,
                           (unsigned long long)key.len);
        }
        int rc = copy_name(c, &key, "metadata key", &kv->key);
        if (rc) return rc;
        g->n_kv = (int64_t)i + 1; /* kv[i].key owned from here on */
        uint32_t type;
        if (!cur_u32(c, &type))
            return clb_err(COLIBRI_ERR_FORMAT, "%s: key '%s': truncated value type", c->file,
                           kv->key);
        if (!type_valid(type))
            return clb_err(COLIBRI_ERR_FORMAT, "%s: key '%s': unknown value type %u", c->file,
                           kv->key, type);
        rc = read_value(c, (int)type, 0, &kv->val, kv->key);
        if (rc) return rc;
    }
    bool oom;
    const char *dup = find_duplicate(&g->kv[0].key, sizeof *g->kv, g->n_kv, &oom);
    if (oom) return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", c->file);
    if (dup) return clb_err(COLIBRI_ERR_FORMAT, "%s: duplicate metadata key '%s'", c->file, dup);
    return COLIBRI_OK;
}

static int read_alignment(const cursor *c, clb_gguf *g) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const clb_gguf_kv *kv = clb_gguf_find(g, "general.alignment");
    if (!kv) return COLIBRI_OK;
    int64_t a;
    if (!type_is_int(kv->val.type) || !clb_gguf_get_i64(g, "general.alignment", &a))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: general.alignment has type %s (want uint32)",
                       c->file, clb_gguf_type_name(kv->val.type));
    if (a <= 0 || a > (int64_t)UINT32_MAX || (a & (a - 1)) != 0)
        return clb_err(COLIBRI_ERR_FORMAT,
                       "%s: general.alignment %lld is not a nonzero power of two", c->file,
                       (long long)a);
    g->alignment = (uint64_t)a;
    return COLIBRI_OK;
}

/* Reads one tensor info. Sizes and offsets are checked later, once data_offset is known. */
static int read_tensor_info(cursor *c, clb_tensor *t, uint64_t idx, uint64_t *rel_offset) {
    clb_gguf_str name;
    uint64_t at = c->pos;
    if (!take_str(c, &name)) {
        char what[48];
        snprintf(what, sizeof what, "the name of tensor %llu", (unsigned long long)idx);
        return str_error(c, at, what);
    }
    if (name.len == 0 || name.len > GGUF_MAX_NAME_LEN)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor %llu has a name of invalid length %llu",
                       c->file, (unsigned long long)idx, (unsigned long long)name.len);
    int rc = copy_name(c, &name, "tensor name", &t->name);
    if (rc) return rc;
    t->layer = -1;
    t->expert = -1;
    uint32_t n_dims;
    if (!cur_u32(c, &n_dims))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': truncated n_dims", c->file, t->name);
    if (n_dims < 1 || n_dims > CLB_MAX_DIMS)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': n_dims %u is not in 1..%d", c->file,
                       t->name, n_dims, CLB_MAX_DIMS);
    t->n_dims = (int)n_dims;
    uint64_t nelem = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        uint64_t ne;
        if (!cur_u64(c, &ne))
            return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': truncated dimensions", c->file,
                           t->name);
        if (ne == 0 || ne > (uint64_t)INT64_MAX)
            return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': dimension %u is %llu", c->file,
                           t->name, d, (unsigned long long)ne);
        if (!clb_mul_u64(nelem, ne, &nelem) || nelem > (uint64_t)INT64_MAX)
            return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': element count overflows",
                           c->file, t->name);
        t->shape[n_dims - 1 - d] = (int64_t)ne; /* numpy order: GGUF ne[0] is innermost */
    }
    uint32_t type;
    if (!cur_u32(c, &type) || !cur_u64(c, rel_offset))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': truncated type/offset", c->file,
                       t->name);
    if (type > INT32_MAX)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': invalid type %u", c->file, t->name,
                       type);
    t->dtype = (int)type;
    return COLIBRI_OK;
}

/* Size, alignment and bounds of a tensor of a known type. Unknown types get size 0 and
   data NULL: the loader reports them when (and only when) it needs the tensor. */
static int place_tensor(const cursor *c, const clb_gguf *g, clb_tensor *t, uint64_t rel) {
    const clb_type_info *ti = clb_type(t->dtype);
    bool off_ok = clb_add_u64(g->data_offset, rel, &t->offset);
    if (!off_ok) t->offset = 0;
    if (!ti) return COLIBRI_OK;
    int64_t ne0 = t->shape[t->n_dims - 1];
    uint64_t row_bytes, rows = 1, size;
    if (ne0 % ti->block_size != 0)
        return clb_err(COLIBRI_ERR_FORMAT,
                       "%s: tensor '%s': row length %lld is not a multiple of the %s block "
                       "size %d",
                       c->file, t->name, (long long)ne0, ti->name, ti->block_size);
    for (int d = 0; d < t->n_dims - 1; d++) rows *= (uint64_t)t->shape[d]; /* checked before */
    if (!clb_row_bytes(t->dtype, ne0, &row_bytes) || !clb_mul_u64(row_bytes, rows, &size))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': byte size overflows", c->file,
                       t->name);
    if (rel % g->alignment != 0)
        return clb_err(COLIBRI_ERR_FORMAT,
                       "%s: tensor '%s': offset %llu is not a multiple of the alignment %llu",
                       c->file, t->name, (unsigned long long)rel,
                       (unsigned long long)g->alignment);
    if (!off_ok || !clb_range_ok(t->offset, size, c->size))
        return clb_err(COLIBRI_ERR_FORMAT,
                       "%s: tensor '%s': %llu bytes at data offset %llu lie outside the file "
                       "(%llu bytes)",
                       c->file, t->name, (unsigned long long)size, (unsigned long long)rel,
                       (unsigned long long)c->size);
    t->size = size;
    t->data = c->base + t->offset;
    return COLIBRI_OK;
}

static int read_tensors(cursor *c, clb_gguf *g, uint64_t n_tensors) {
    if (n_tensors > cur_left(c) / GGUF_MIN_TENSOR_BYTES || n_tensors > INT_MAX)
        return clb_err(COLIBRI_ERR_FORMAT,
                       "%s: tensor count %llu does not fit in the %llu bytes left (truncated?)",
                       c->file, (unsigned long long)n_tensors, (unsigned long long)cur_left(c));
    uint64_t *rel = NULL;
    if (n_tensors) {
        g->tensors = clb_calloc((size_t)n_tensors, sizeof *g->tensors);
        rel = clb_calloc((size_t)n_tensors, sizeof *rel);
        if (!g->tensors || !rel) {
            clb_free(rel);
            return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", c->file);
        }
    }
    int rc = COLIBRI_OK;
    for (uint64_t i = 0; i < n_tensors && rc == COLIBRI_OK; i++) {
        rc = read_tensor_info(c, &g->tensors[i], i, &rel[i]);
        if (g->tensors[i].name) g->n_tensors = (int)i + 1; /* owned from here on */
    }
    if (rc == COLIBRI_OK) {
        bool oom = false;
        const char *dup = g->n_tensors < 2 ? NULL
                                           : find_duplicate(&g->tensors[0].name,
                                                            sizeof *g->tensors, g->n_tensors, &oom);
        if (dup) rc = clb_err(COLIBRI_ERR_FORMAT, "%s: duplicate tensor name '%s'", c->file, dup);
        else if (oom) rc = clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", c->file);
    }
    if (rc == COLIBRI_OK) {
        /* data starts at the next multiple of the alignment after the tensor infos */
        uint64_t end;
        if (!clb_add_u64(c->pos, g->alignment - 1, &end))
            rc = clb_err(COLIBRI_ERR_FORMAT, "%s: data offset overflows", c->file);
        else
            g->data_offset = end / g->alignment * g->alignment;
    }
    for (int i = 0; i < g->n_tensors && rc == COLIBRI_OK; i++)
        rc = place_tensor(c, g, &g->tensors[i], rel[i]);
    clb_free(rel);
    return rc;
}

int clb_gguf_parse(const clb_map *m, clb_gguf *out) {
    memset(out, 0, sizeof *out);
    out->map.fd = -1; /* a parsed (not opened) gguf never owns its map */
    if (!m) return clb_err(COLIBRI_ERR_ARG, "clb_gguf_parse: no map");
    cursor c = {m->data, m->data ? m->size : 0, 0, m->path ? m->path : "gguf"};
    out->map.data = m->data;
    out->map.size = c.size;
    const uint8_t *magic;
    uint32_t version;
    uint64_t n_tensors, n_kv;
    int rc;
    if (!cur_take(&c, 4, &magic))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: too short for a GGUF file (%llu bytes)", c.file,
                       (unsigned long long)c.size);
    if (memcmp(magic, "GGUF", 4) != 0)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: not a GGUF file (bad magic)", c.file);
    if (!cur_u32(&c, &version))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: truncated GGUF header", c.file);
    if (version == 1)
        return clb_err(COLIBRI_ERR_UNSUPPORTED,
                       "%s: GGUF version 1 is not supported (re-convert the model to v3)", c.file);
    if (version != 2 && version != 3) {
        if ((version & 0xffff) == 0 && (version >> 16) != 0)
            return clb_err(COLIBRI_ERR_UNSUPPORTED,
                           "%s: big-endian GGUF files are not supported", c.file);
        return clb_err(COLIBRI_ERR_UNSUPPORTED, "%s: unsupported GGUF version %u", c.file,
                       version);
    }
    out->version = version;
    if (!cur_u64(&c, &n_tensors) || !cur_u64(&c, &n_kv))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: truncated GGUF header", c.file);
    if ((rc = read_kvs(&c, out, n_kv)) != COLIBRI_OK ||
        (rc = read_alignment(&c, out)) != COLIBRI_OK ||
        (rc = read_tensors(&c, out, n_tensors)) != COLIBRI_OK) {
        clb_gguf_close(out);
        return rc;
    }
    return COLIBRI_OK;
}

/* parses an opened map and owns it (clb_gguf_close releases it) */
static int parse_owned(int rc, clb_map *m, clb_gguf *out) {
    if (rc) return rc;
    rc = clb_gguf_parse(m, out);
    if (rc) {
        clb_map_close(m);
        return rc;
    }
    out->map = *m;
    return COLIBRI_OK;
}

int clb_gguf_open(const char *path, clb_gguf *out) {
    clb_map m;
    memset(out, 0, sizeof *out);
    out->map.fd = -1;
    return parse_owned(clb_map_open(path, &m), &m, out);
}

int clb_gguf_open_io(const clb_io *io, clb_gguf *out) {
    clb_map m;
    memset(out, 0, sizeof *out);
    out->map.fd = -1;
    return parse_owned(clb_map_open_io(io, UINT64_MAX, &m), &m, out); /* the whole file: GGUF is not streamed */
}

void clb_gguf_close(clb_gguf *g) {
    if (!g) return;
    for (int64_t i = 0; i < g->n_kv; i++) {
        clb_free(g->kv[i].key);
        value_free(&g->kv[i].val);
    }
    clb_free(g->kv);
    for (int i = 0; i < g->n_tensors; i++) clb_free(g->tensors[i].name);
    clb_free(g->tensors);
    /* only clb_gguf_open's map is owned; clb_map_open always leaves fd >= 0 */
    if (g->map.fd >= 0 || g->map.io) clb_map_close(&g->map);
    memset(g, 0, sizeof *g);
    g->map.fd = -1;
}

/* ---- lookups ---- */

const clb_gguf_kv *clb_gguf_find(const clb_gguf *g, const char *key) {
    if (!g || !key) return NULL;
    for (int64_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kv[i].key, key) == 0) return &g->kv[i];
    return NULL;
}

const clb_tensor *clb_gguf_find_tensor(const clb_gguf *g, const char *name) {
    if (!g || !name) return NULL;
    for (int i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0) return &g->tensors[i];
    return NULL;
}

/* Integer value v (of integer type) as i64 when it fits. */
static bool value_i64(const clb_gguf_value *v, int64_t *out) {
    if (!type_is_int(v->type)) return false;
    if (type_is_signed(v->type)) {
        *out = v->v.i;
        return true;
    }
    if (v->v.u > (uint64_t)INT64_MAX) return false;
    *out = (int64_t)v->v.u;
    return true;
}

bool clb_gguf_get_i64(const clb_gguf *g, const char *key, int64_t *out) {
    const clb_gguf_kv *kv = clb_gguf_find(g, key);
    return kv && value_i64(&kv->val, out);
}

bool clb_gguf_get_f64(const clb_gguf *g, const char *key, double *out) {
    const clb_gguf_kv *kv = clb_gguf_find(g, key);
    if (!kv || (kv->val.type != CLB_GGUF_FLOAT32 && kv->val.type != CLB_GGUF_FLOAT64))
        return false;
    *out = kv->val.v.f;
    return true;
}

bool clb_gguf_get_bool(const clb_gguf *g, const char *key, bool *out) {
    const clb_gguf_kv *kv = clb_gguf_find(g, key);
    if (!kv || kv->val.type != CLB_GGUF_BOOL) return false;
    *out = kv->val.v.u != 0;
    return true;
}

char *clb_gguf_get_str(const clb_gguf *g, const char *key) {
    const clb_gguf_kv *kv = clb_gguf_find(g, key);
    if (!kv || kv->val.type != CLB_GGUF_STRING) return NULL;
    char *s = clb_malloc((size_t)kv->val.v.s.len + 1);
    if (!s) return NULL;
    memcpy(s, kv->val.v.s.ptr, (size_t)kv->val.v.s.len);
    s[kv->val.v.s.len] = 0;
    return s;
}

uint64_t clb_gguf_arr_n(const clb_gguf *g, const char *key, int *elem_type) {
    const clb_gguf_kv *kv = clb_gguf_find(g, key);
    if (elem_type) *elem_type = -1;
    if (!kv || kv->val.type != CLB_GGUF_ARRAY) return 0;
    if (elem_type) *elem_type = kv->val.v.arr.type;
    return kv->val.v.arr.n;
}

/* Element i of a numeric array decoded into e; false when not a numeric array or i >= n. */
static bool arr_elem(const clb_gguf_kv *kv, uint64_t i, clb_gguf_value *e) {
    if (!kv || kv->val.type != CLB_GGUF_ARRAY || i >= kv->val.v.arr.n) return false;
    uint64_t esz = scalar_size(kv->val.v.arr.type);
    if (!esz) return false;
    decode_scalar(kv->val.v.arr.type, kv->val.v.arr.data + i * esz, e);
    return true;
}

bool clb_gguf_arr_i64(const clb_gguf_kv *kv, uint64_t i, int64_t *out) {
    clb_gguf_value e;
    return arr_elem(kv, i, &e) && value_i64(&e, out);
}

bool clb_gguf_arr_f64(const clb_gguf_kv *kv, uint64_t i, double *out) {
    clb_gguf_value e;
    if (!arr_elem(kv, i, &e) || (e.type != CLB_GGUF_FLOAT32 && e.type != CLB_GGUF_FLOAT64))
        return false;
    *out = e.v.f;
    return true;
}

const char *clb_gguf_type_name(int type) {
    static const char *const names[] = {"uint8",  "int8",   "uint16", "int16", "uint32",
                                        "int32",  "float32", "bool",  "string", "array",
                                        "uint64", "int64",  "float64"};
    if (type < 0 || type >= (int)CLB_ARRAY_LEN(names)) return "unknown";
    return names[type];
}
