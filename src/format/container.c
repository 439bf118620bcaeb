/* container.c — the .colibri file, version 1: reader, verifier and streaming writer.
 * docs/FORMAT.md is the byte-level specification; this file implements it.
 *
 * Reader: maps the file read-only and validates everything before handing out a pointer:
 * header fields and CRC, section bounds against the file size, the metadata CRC and JSON,
 * and every tensor entry (dtype, shape, size, 64-byte aligned offset inside the data
 * section, no overlaps). Data CRCs are checked only on request (clb_container_verify),
 * in one sequential pass over the data section.
 *
 * Writer: the layout is computed up front from the tensor descriptors, so metadata space is
 * reserved before any data is written (the per-tensor crc32 strings are fixed-width hex, so
 * the JSON rendered with placeholder CRCs has exactly the final length). Tensor bytes go
 * straight to their offsets with pwrite, into PATH.tmp; finish hashes the data region back,
 * writes the metadata and then the header, fsyncs and renames PATH.tmp to PATH.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/common.h"
#include "format/container.h"
#include "format/container_impl.h"

#define CRC_CHUNK ((size_t)1 << 30)

uint32_t clb_ct_crc(uint32_t crc, const uint8_t *p, uint64_t n) { return clb_crc32(crc, p, (size_t)n); }

uint32_t clb_ct_crc_cat(uint32_t a, uint32_t b, uint64_t len_b) { return clb_crc32_combine(a, b, len_b); }

/* ---------------------------------------------------------------- name index */

static uint64_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h ^ (h >> 29);
}

int clb_tensor_index_build(clb_tensor_index *ix, const clb_tensor *t, int n, int *dup) {
    ix->slots = NULL;
    ix->mask = 0;
    if (n < 0 || n > (1 << 28)) return clb_err(COLIBRI_ERR_ARG, "too many tensors (%d)", n);
    uint32_t cap = 16;
    while (cap < 2u * (uint32_t)n) cap *= 2;
    uint32_t *slots = clb_calloc(cap, sizeof *slots);
    if (!slots) return clb_err(COLIBRI_ERR_NOMEM, "out of memory for a tensor index");
    for (int i = 0; i < n; i++) {
        uint32_t s = (uint32_t)name_hash(t[i].name) & (cap - 1);
        while (slots[s]) {
            if (strcmp(t[slots[s] - 1].name, t[i].name) == 0) {
                clb_free(slots);
                if (dup) *dup = i;
                return COLIBRI_ERR_FORMAT;
            }
            s = (s + 1) & (cap - 1);
        }
        slots[s] = (uint32_t)i + 1;
    }
    ix->slots = slots;
    ix->mask = cap - 1;
    return COLIBRI_OK;
}

const clb_tensor *clb_tensor_index_find(const clb_tensor_index *ix, const clb_tensor *t,
                                        const char *name) {
    if (!ix || !ix->slots || !name) return NULL;
    uint32_t s = (uint32_t)name_hash(name) & ix->mask;
    while (ix->slots[s]) {
        const clb_tensor *c = &t[ix->slots[s] - 1];
        if (strcmp(c->name, name) == 0) return c;
        s = (s + 1) & ix->mask;
    }
    return NULL;
}

void clb_tensor_index_free(clb_tensor_index *ix) {
    if (!ix) return;
    clb_free(ix->slots);
    ix->slots = NULL;
    ix->mask = 0;
}

/* ---------------------------------------------------------------- helpers */

/* "[256,256]" into buf. */
static const char *shape_str(char *buf, size_t cap, const int64_t *shape, int n_dims) {
    size_t k = 0;
    buf[k++] = '[';
    for (int i = 0; i < n_dims && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? "," : "", (long long)shape[i]);
    if (k < cap - 1) {
        buf[k++] = ']';
        buf[k] = 0;
    } else {
        buf[cap - 1] = 0;
    }
    return buf;
}

/* A JSON number that is an integer in [lo, hi] (hi <= 2^53). */
bool clb_ct_json_int(const cJSON *v, double lo, double hi, int64_t *out) {
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d) || d < lo || d > hi) return false;
    *out = (int64_t)d;
    return true;
}

bool clb_ct_hex8(const char *s, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 8; i++) {
        char c = s[i];
        uint32_t d;
        if (c >= '0' && c <= '9') d = (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') d = (uint32_t)(c - 'a' + 10);
        else return false;
        v = v << 4 | d;
    }
    if (s[8]) return false;
    *out = v;
    return true;
}

/* Explains why t's size does not fit its dtype and shape (t->size is the stated size). */
static int size_error(const char *path, const clb_tensor *t) {
    char sh[128];
    shape_str(sh, sizeof sh, t->shape, t->n_dims);
    uint64_t rb;
    const clb_type_info *ti = clb_type(t->dtype);
    if (!clb_row_bytes(t->dtype, t->shape[t->n_dims - 1], &rb))
        return clb_err(COLIBRI_ERR_FORMAT,
                       "%s: tensor '%s': rows of %lld are not a whole number of %s blocks "
                       "(block size %d) or overflow",
                       path, t->name, (long long)t->shape[t->n_dims - 1],
                       clb_dtype_name(t->dtype), ti ? ti->block_size : 0);
    return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': size %llu does not match its shape %s of %s",
                   path, t->name, (unsigned long long)t->size, sh, clb_dtype_name(t->dtype));
}

static int cmp_u64(uint64_t a, uint64_t b) { return a < b ? -1 : a > b; }

/* qsort context: qsort has none, so the sort keys are copied into the array. */
typedef struct off_key {
    uint64_t offset;
    int idx;
} off_key;

static int cmp_off_key(const void *a, const void *b) {
    const off_key *x = a, *y = b;
    int c = cmp_u64(x->offset, y->offset);
    return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

/* Tensor indices sorted by offset (ties by index); NULL on allocation failure. */
static off_key *sort_by_offset(const clb_tensor *t, int n) {
    off_key *k = clb_malloc((size_t)(n > 0 ? n : 1) * sizeof *k);
    if (!k) return NULL;
    for (int i = 0; i < n; i++) {
        k[i].offset = t[i].offset;
        k[i].idx = i;
    }
    qsort(k, (size_t)n, sizeof *k, cmp_off_key);
    return k;
}

/* ---------------------------------------------------------------- reader */

static int parse_tensor(const char *path, const cJSON *e, int i, const clb_container *c,
                        clb_tensor *t) {
    if (!cJSON_IsObject(e))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensors[%d] is not an object", path, i);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
    if (!cJSON_IsString(name) || !name->valuestring[0])
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensors[%d] has no name", path, i);
    t->name = clb_strdup(name->valuestring);
    if (!t->name) return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", path);
    const char *nm = t->name;

    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    clb_dtype id;
    if (!cJSON_IsString(dt))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': no dtype", path, nm);
    if (clb_dtype_from_name(dt->valuestring, &id) != 0 || !clb_type((int)id) ||
        strcmp(clb_dtype_name((int)id), dt->valuestring) != 0) /* names are lowercase */
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': unknown dtype '%s'", path, nm,
                       dt->valuestring);
    t->dtype = (int)id;

    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    int nd = cJSON_IsArray(shape) ? cJSON_GetArraySize(shape) : -1;
    if (nd < 1 || nd > CLB_MAX_DIMS)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': shape must be an array of 1 to %d dimensions",
                       path, nm, CLB_MAX_DIMS);
    t->n_dims = nd;
    int d = 0;
    for (const cJSON *v = shape->child; v; v = v->next, d++) {
        if (!clb_ct_json_int(v, 1, JSON_INT_MAX, &t->shape[d]))
            return clb_err(COLIBRI_ERR_FORMAT,
                           "%s: tensor '%s': dimension %d is not a positive integer (at most 2^53)",
                           path, nm, d);
    }

    int64_t off, size, layer, expert;
    if (!clb_ct_json_int(cJSON_GetObjectItemCaseSensitive(e, "offset"), 0, JSON_INT_MAX, &off))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': offset is not a non-negative integer",
                       path, nm);
    if (!clb_ct_json_int(cJSON_GetObjectItemCaseSensitive(e, "size"), 0, JSON_INT_MAX, &size))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': size is not a non-negative integer",
                       path, nm);
    t->size = (uint64_t)size;
    if (!clb_tensor_size_consistent(t)) return size_error(path, t);
    if ((uint64_t)off % CLB_CONTAINER_TENSOR_ALIGN)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': offset %lld is not %d-byte aligned",
                       path, nm, (long long)off, CLB_CONTAINER_TENSOR_ALIGN);
    t->chunk = -1;
    if (c->version == CLB_CONTAINER_VERSION_ENC) {
        /* v2: "offset" is in the plain bytes of chunk "chunk"; t->offset becomes the offset in
           the concatenation of every chunk's plain bytes (c->chunks[k].plain summed), which
           keeps the overlap check below one sort */
        int64_t ch;
        if (!clb_ct_json_int(cJSON_GetObjectItemCaseSensitive(e, "chunk"), 0, c->n_chunks - 1, &ch))
            return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': chunk is not one of the file's %d chunks", path, nm,
                           c->n_chunks);
        const clb_chunk *k = &c->chunks[ch];
        if (!clb_range_ok((uint64_t)off, t->size, k->plain))
            return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': bytes [%lld, %lld) leave chunk %lld (%llu bytes)", path,
                           nm, (long long)off, (long long)off + (long long)size, (long long)ch,
                           (unsigned long long)k->plain);
        t->chunk = (int)ch;
        t->chunk_off = (uint64_t)off;
        t->offset = k->virt + (uint64_t)off;
        t->data = NULL;
    } else {
        if (!clb_range_ok((uint64_t)off, t->size, c->data_size))
            return clb_err(COLIBRI_ERR_FORMAT,
                           "%s: tensor '%s': bytes [%lld, %lld) leave the data section (%llu bytes)",
                           path, nm, (long long)off, (long long)off + (long long)size,
                           (unsigned long long)c->data_size);
        t->offset = c->data_offset + (uint64_t)off;
        t->data = c->map.data + t->offset;
    }

    const cJSON *crc = cJSON_GetObjectItemCaseSensitive(e, "crc32");
    if (!cJSON_IsString(crc) || !clb_ct_hex8(crc->valuestring, &t->crc32))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': crc32 is not 8 lowercase hex digits",
                       path, nm);
    t->has_crc = true;
    if (!clb_ct_json_int(cJSON_GetObjectItemCaseSensitive(e, "layer"), -1, INT32_MAX, &layer))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': layer is not an integer >= -1", path, nm);
    if (!clb_ct_json_int(cJSON_GetObjectItemCaseSensitive(e, "expert"), -1, INT32_MAX, &expert))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': expert is not an integer >= -1", path, nm);
    if (expert >= 0 && layer < 0)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': expert %lld has no layer", path, nm,
                       (long long)expert);
    t->layer = (int)layer;
    t->expert = (int)expert;
    t->file_index = 0;
    return COLIBRI_OK;
}

/* Header fields and section bounds, both versions (docs/FORMAT.md, "Reader rules"). */
static int check_header(const char *path, const uint8_t *h, uint64_t file_size, clb_container *c) {
    if (memcmp(h + H_MAGIC, CLB_CONTAINER_MAGIC, 8) != 0)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: not a .colibri file (bad magic)", path);
    c->version = clb_rd_u32(h + H_VERSION);
    if (c->version != CLB_CONTAINER_VERSION && c->version != CLB_CONTAINER_VERSION_ENC)
        return clb_err(COLIBRI_ERR_UNSUPPORTED, "%s: .colibri version %u is not supported (this build reads 1 and 2)",
                       path, c->version);
    const bool v2 = c->version == CLB_CONTAINER_VERSION_ENC;
    c->header_crc = clb_rd_u32(h + H_HEADER_CRC);
    uint32_t crc = clb_ct_crc(0, h, H_HEADER_CRC);
    if (crc != c->header_crc)
        return clb_err(COLIBRI_ERR_CORRUPT, "%s: header is corrupt (crc32 %08x, expected %08x)", path,
                       crc, c->header_crc);
    c->flags = clb_rd_u32(h + H_FLAGS);
    const uint32_t known = v2 ? CLB_CONTAINER_FLAG_COMPRESSED | CLB_CONTAINER_FLAG_ENCRYPTED : 0u;
    if (c->flags & ~known)
        return clb_err(COLIBRI_ERR_UNSUPPORTED, "%s: unknown header flags 0x%08x", path, c->flags);
    if (v2 && !c->flags)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: a version 2 file that is neither compressed nor encrypted", path);
    if (v2) {
        if (clb_ct_v2_header(path, h, c)) return COLIBRI_ERR_FORMAT;
    } else {
        for (int i = H_RESERVED; i < H_HEADER_CRC; i++)
            if (h[i]) return clb_err(COLIBRI_ERR_FORMAT, "%s: reserved header byte %d is not zero", path, i);
    }
    uint32_t align = clb_rd_u32(h + H_ALIGN);
    if (align != CLB_CONTAINER_DATA_ALIGN)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: data alignment %u is not %d", path, align,
                       CLB_CONTAINER_DATA_ALIGN);
    c->meta_offset = clb_rd_u64(h + H_META_OFF);
    c->meta_size = clb_rd_u64(h + H_META_SIZE);
    c->data_offset = clb_rd_u64(h + H_DATA_OFF);
    c->data_size = clb_rd_u64(h + H_DATA_SIZE);
    c->meta_crc = clb_rd_u32(h + H_META_CRC);
    c->data_crc = clb_rd_u32(h + H_DATA_CRC);
    uint64_t meta_end, data_end;
    if (!v2 && c->meta_offset != CLB_CONTAINER_HEADER_SIZE)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: metadata offset %llu is not %d", path,
                       (unsigned long long)c->meta_offset, CLB_CONTAINER_HEADER_SIZE);
    if (c->meta_size < 8)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: metadata size %llu is smaller than its length prefix",
                       path, (unsigned long long)c->meta_size);
    if (!clb_add_u64(c->meta_offset, c->meta_size, &meta_end))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: metadata size %llu overflows", path,
                       (unsigned long long)c->meta_size);
    if (meta_end > file_size)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: truncated: metadata section ends at %llu but the file has %llu bytes",
                       path, (unsigned long long)meta_end, (unsigned long long)file_size);
    if (!clb_add_u64(c->data_offset, c->data_size, &data_end))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: data size %llu overflows", path,
                       (unsigned long long)c->data_size);
    if (v2) { /* header, zeros up to 4096, data, zeros, then the metadata */
        if (c->data_offset != CLB_CONTAINER_DATA_ALIGN)
            return clb_err(COLIBRI_ERR_FORMAT, "%s: data offset %llu is not %d", path,
                           (unsigned long long)c->data_offset, CLB_CONTAINER_DATA_ALIGN);
        if (c->meta_offset < data_end)
            return clb_err(COLIBRI_ERR_FORMAT, "%s: metadata at %llu overlaps the data section (ends at %llu)", path,
                           (unsigned long long)c->meta_offset, (unsigned long long)data_end);
        for (uint64_t p = CLB_CONTAINER_HEADER_SIZE; p < c->data_offset; p++)
            if (h[p])
                return clb_err(COLIBRI_ERR_FORMAT, "%s: padding byte %llu after the header is not zero", path,
                               (unsigned long long)p);
        for (uint64_t p = data_end; p < c->meta_offset; p++)
            if (h[p])
                return clb_err(COLIBRI_ERR_FORMAT, "%s: padding byte %llu after the data is not zero", path,
                               (unsigned long long)p);
        return COLIBRI_OK;
    }
    if (c->data_offset % CLB_CONTAINER_DATA_ALIGN || c->data_offset < meta_end)
        return clb_err(COLIBRI_ERR_FORMAT,
                       "%s: data offset %llu is not a multiple of %d after the metadata (ends at %llu)",
                       path, (unsigned long long)c->data_offset, CLB_CONTAINER_DATA_ALIGN,
                       (unsigned long long)meta_end);
    if (data_end > file_size)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: truncated: data section ends at %llu but the file has %llu bytes",
                       path, (unsigned long long)data_end, (unsigned long long)file_size);
    /* The padding between the sections is covered by no CRC: it must be zero. */
    for (uint64_t p = meta_end; p < c->data_offset; p++)
        if (h[p])
            return clb_err(COLIBRI_ERR_FORMAT, "%s: padding byte %llu after the metadata is not zero",
                           path, (unsigned long long)p);
    return COLIBRI_OK;
}

int clb_ct_parse_json(const char *path, const char *what, const uint8_t *text, uint64_t len, cJSON **out) {
    const char *end = NULL, *t = (const char *)text;
    *out = cJSON_ParseWithLengthOpts(t, (size_t)len, &end, 0);
    if (!*out)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: %s is not valid JSON (near byte %lld of it)", path, what,
                       end ? (long long)(end - t) : -1LL);
    while (end < t + len && (*end == ' ' || *end == '\n' || *end == '\t' || *end == '\r')) end++;
    if (end != t + len)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: %s has bytes after its JSON (at byte %lld of it)", path, what,
                       (long long)(end - t));
    if (!cJSON_IsObject(*out)) return clb_err(COLIBRI_ERR_FORMAT, "%s: %s is not a JSON object", path, what);
    return COLIBRI_OK;
}

int clb_ct_parse_model(const char *path, clb_container *c, const cJSON *root, int64_t n_expected) {
    c->config = cJSON_GetObjectItemCaseSensitive(root, "config");
    if (!cJSON_IsObject(c->config))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: metadata has no \"config\" object", path);
    c->tokenizer = cJSON_GetObjectItemCaseSensitive(root, "tokenizer");
    if (c->tokenizer && cJSON_IsNull(c->tokenizer)) c->tokenizer = NULL;
    if (c->tokenizer && !cJSON_IsObject(c->tokenizer))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: metadata \"tokenizer\" is not an object", path);
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "tensors");
    if (!cJSON_IsArray(arr))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: metadata has no \"tensors\" array", path);
    int n = cJSON_GetArraySize(arr);
    if (n_expected >= 0 && (uint64_t)n != (uint64_t)n_expected)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: header says %llu tensors, metadata lists %d", path,
                       (unsigned long long)n_expected, n);
    c->tensors = clb_calloc((size_t)(n > 0 ? n : 1), sizeof *c->tensors);
    if (!c->tensors) return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", path);
    int i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
        c->n_tensors = i + 1; /* so close() frees the names parsed so far */
        int rc = parse_tensor(path, e, i, c, &c->tensors[i]);
        if (rc) return rc;
    }
    c->n_tensors = n;
    int dup = -1;
    int rc = clb_tensor_index_build(&c->index, c->tensors, n, &dup);
    if (rc == COLIBRI_ERR_FORMAT)
        return clb_err(rc, "%s: tensor name '%s' appears twice", path, c->tensors[dup].name);
    if (rc) return rc;
    /* No two tensors may share bytes: a valid writer never produces that. */
    off_key *k = sort_by_offset(c->tensors, n);
    if (!k) return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", path);
    for (int j = 1; j < n; j++) {
        const clb_tensor *a = &c->tensors[k[j - 1].idx], *b = &c->tensors[k[j].idx];
        if (b->offset < a->offset + a->size && b->size && a->size) {
            rc = clb_err(COLIBRI_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap", path, a->name, b->name);
            break;
        }
    }
    clb_free(k);
    return rc;
}

static int parse_meta(const char *path, clb_container *c, uint64_t n_header) {
    const uint8_t *m = c->map.data + c->meta_offset;
    uint32_t crc = clb_ct_crc(0, m, c->meta_size);
    if (crc != c->meta_crc)
        return clb_err(COLIBRI_ERR_CORRUPT, "%s: metadata is corrupt (crc32 %08x, expected %08x)", path,
                       crc, c->meta_crc);
    uint64_t json_len = clb_rd_u64(m);
    if (json_len != c->meta_size - 8)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: metadata JSON length %llu does not fill the %llu-byte section",
                       path, (unsigned long long)json_len, (unsigned long long)c->meta_size);
    int rc = clb_ct_parse_json(path, "metadata", m + 8, json_len, &c->meta);
    if (rc) return rc;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(c->meta, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "colibri") != 0)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: metadata \"format\" is not \"colibri\"", path);
    int64_t ver;
    if (!clb_ct_json_int(cJSON_GetObjectItemCaseSensitive(c->meta, "version"), 0, INT32_MAX, &ver) ||
        ver != (int64_t)c->version)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: metadata \"version\" does not match the header (%u)", path,
                       c->version);
    return clb_ct_parse_model(path, c, c->meta, (int64_t)n_header);
}

int clb_container_open(const char *path, clb_container *out) { return clb_container_open_ex(path, 0, out); }

/* the common part of opening: out->map is open (a file, or a source's map or prefix) */
static int open_mapped(const char *path, int flags, clb_container *out) {
    int rc;
    if (out->map.size < CLB_CONTAINER_HEADER_SIZE || out->map.avail < CLB_CONTAINER_HEADER_SIZE)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: truncated: the file has %llu bytes, the header needs %d", path,
                       (unsigned long long)out->map.size, CLB_CONTAINER_HEADER_SIZE);
    uint64_t n_header = clb_rd_u64(out->map.data + H_COUNT);
    if ((rc = check_header(path, out->map.data, out->map.size, out))) return rc;
    if (out->version == CLB_CONTAINER_VERSION_ENC && out->map.io)
        return clb_err(COLIBRI_ERR_UNSUPPORTED,
                       "%s: a compressed or encrypted .colibri file (version 2) cannot be read through a source "
                       "callback; convert it without --compress / --encrypt",
                       path);
    if (out->version != CLB_CONTAINER_VERSION_ENC && out->map.avail < out->data_offset)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: truncated: the metadata ends past the file", path);
    if (out->version == CLB_CONTAINER_VERSION_ENC) rc = clb_ct_v2_open(path, flags, out);
    else rc = parse_meta(path, out, n_header);
    return rc;
}

int clb_container_open_ex(const char *path, int flags, clb_container *out) {
    memset(out, 0, sizeof *out);
    out->map.fd = -1;
    int rc = clb_map_open(path, &out->map);
    if (!rc) rc = open_mapped(path, flags, out);
    if (rc) clb_container_close(out);
    return rc;
}

/* Streaming (prefix-only) maps: every tensor past the prefix gets data NULL; the dense ones
   are read into one aligned buffer (c->streamed_dense) and point into it. */
static int load_dense(clb_container *c) {
    const clb_io *io = c->map.io;
    uint64_t total = 0;
    for (int i = 0; i < c->n_tensors; i++) {
        clb_tensor *t = &c->tensors[i];
        if (t->offset + t->size <= c->map.avail) continue;
        t->data = NULL;
        if (t->expert < 0 && !clb_add_u64(total, clb_align_up(t->size, 64), &total))
            return clb_err(COLIBRI_ERR_FORMAT, "%s: dense tensors too large", io->name);
    }
    if (!total) return COLIBRI_OK;
    if (total > SIZE_MAX - 64 || !(c->streamed_dense = clb_alloc_aligned((size_t)total)))
        return clb_err(COLIBRI_ERR_NOMEM, "%s: cannot hold %llu bytes of dense tensors", io->name,
                       (unsigned long long)total);
    uint64_t pos = 0;
    for (int i = 0; i < c->n_tensors; i++) {
        clb_tensor *t = &c->tensors[i];
        if (t->data || t->expert >= 0) continue;
        int rc = clb_io_read(io, t->offset, t->size, c->streamed_dense + pos);
        if (rc) {
            clb_err_prefix("tensor '%s'", t->name);
            return rc;
        }
        t->data = c->streamed_dense + pos;
        pos += clb_align_up(t->size, 64);
    }
    return COLIBRI_OK;
}

int clb_container_open_io(const clb_io *io, bool stream, clb_container *out) {
    memset(out, 0, sizeof *out);
    out->map.fd = -1;
    uint64_t prefix = UINT64_MAX;
    uint8_t h[CLB_CONTAINER_HEADER_SIZE];
    int rc = COLIBRI_OK;
    if (stream && io->size >= sizeof h) { /* header and metadata only: up to the data section */
        if ((rc = clb_io_read(io, 0, sizeof h, h))) return rc;
        prefix = CLB_MAX(clb_rd_u64(h + H_DATA_OFF), (uint64_t)sizeof h);
    }
    rc = clb_map_open_io(io, prefix, &out->map);
    if (!rc) rc = open_mapped(io->name, 0, out);
    if (!rc && out->map.avail < out->map.size) rc = load_dense(out);
    if (rc) clb_container_close(out);
    return rc;
}

void clb_container_close(clb_container *c) {
    if (!c) return;
    clb_ct_v2_close(c);
    clb_free_aligned(c->streamed_dense);
    for (int i = 0; i < c->n_tensors; i++) clb_free(c->tensors[i].name);
    clb_free(c->tensors);
    clb_tensor_index_free(&c->index);
    cJSON_Delete(c->meta);
    clb_map_close(&c->map);
    memset(c, 0, sizeof *c);
    c->map.fd = -1;
}

const clb_tensor *clb_container_find(const clb_container *c, const char *name) {
    if (!c) return NULL;
    return clb_tensor_index_find(&c->index, c->tensors, name);
}

/* One sequential pass over the data section: each tensor's CRC is computed once and the
   data-section CRC is assembled from the tensor CRCs and the padding between them with
   crc32_combine, so no byte is hashed twice. */
int clb_container_verify(const clb_container *c, uint64_t *bytes_checked) {
    return clb_container_verify_ex(c, bytes_checked, NULL);
}

int clb_container_verify_ex(const clb_container *c, uint64_t *bytes_checked, int *authenticated) {
    if (bytes_checked) *bytes_checked = 0;
    if (authenticated) *authenticated = 1;
    if (!c || (!c->map.data && c->data_size))
        return clb_err(COLIBRI_ERR_ARG, "verify: no open container");
    if (c->version == CLB_CONTAINER_VERSION_ENC) return clb_ct_v2_verify(c, bytes_checked, authenticated);
    const char *path = c->map.path ? c->map.path : "container";
    off_key *k = sort_by_offset(c->tensors, c->n_tensors);
    if (!k) return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", path);
    const uint8_t *base = c->map.data + c->data_offset;
    /* Sequential read-ahead while hashing; the page-aligned range covers the section. */
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t a0 = 0, a1 = 0;
    if (page > 0 && c->data_size) {
        a0 = (uintptr_t)base / (uintptr_t)page * (uintptr_t)page;
        a1 = (uintptr_t)base + (uintptr_t)c->data_size;
        madvise((void *)a0, a1 - a0, MADV_SEQUENTIAL);
    }
    uint32_t crc = 0;
    uint64_t pos = 0;
    int rc = COLIBRI_OK;
    for (int j = 0; j < c->n_tensors && !rc; j++) {
        const clb_tensor *t = &c->tensors[k[j].idx];
        uint64_t off = t->offset - c->data_offset;
        if (off > pos) { /* padding */
            crc = clb_ct_crc(crc, base + pos, off - pos);
            pos = off;
        }
        uint32_t tc = clb_ct_crc(0, base + off, t->size);
        if (t->has_crc && tc != t->crc32)
            rc = clb_err(COLIBRI_ERR_CORRUPT, "%s: tensor '%s' is corrupt (crc32 %08x, expected %08x)",
                         path, t->name, tc, t->crc32);
        crc = clb_ct_crc_cat(crc, tc, t->size);
        pos = off + t->size;
    }
    if (!rc && pos < c->data_size) {
        crc = clb_ct_crc(crc, base + pos, c->data_size - pos);
        pos = c->data_size;
    }
    if (!rc && crc != c->data_crc)
        rc = clb_err(COLIBRI_ERR_CORRUPT,
                     "%s: padding in the data section is corrupt (data crc32 %08x, expected %08x; "
                     "every tensor matches)",
                     path, crc, c->data_crc);
    if (a1 > a0) madvise((void *)a0, a1 - a0, MADV_NORMAL);
    clb_free(k);
    if (bytes_checked) *bytes_checked = pos;
    return rc;
}

/* ---------------------------------------------------------------- writer */


int clb_ct_pwrite(int fd, const void *buf, uint64_t len, uint64_t off, const char *path) {
    const uint8_t *p = buf;
    while (len > 0) {
        size_t k = len > CRC_CHUNK ? CRC_CHUNK : (size_t)len;
        ssize_t r = pwrite(fd, p, k, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return clb_err(COLIBRI_ERR_IO, "%s: write: %s", path, r < 0 ? strerror(errno) : "no progress");
        p += r;
        off += (uint64_t)r;
        len -= (uint64_t)r;
    }
    return COLIBRI_OK;
}

int clb_ct_pread(int fd, void *buf, size_t len, uint64_t off, const char *path) {
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t r = pread(fd, p, len, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return clb_err(COLIBRI_ERR_IO, "%s: read: %s", path, strerror(errno));
        if (r == 0) return clb_err(COLIBRI_ERR_IO, "%s: read: unexpected end of file", path);
        p += r;
        off += (uint64_t)r;
        len -= (size_t)r;
    }
    return COLIBRI_OK;
}

/* The metadata JSON (unformatted); with_crc false renders "00000000" placeholders, which
   have the same width as the real values. Caller frees with cJSON_free. */
cJSON *clb_ct_tensor_json(const clb_tensor *t, bool with_crc, uint64_t offset, int chunk) {
    cJSON *e = cJSON_CreateObject();
    if (!e) return NULL;
    char hex[9];
    snprintf(hex, sizeof hex, "%08x", with_crc ? t->crc32 : 0u);
    cJSON *shape;
    if (!cJSON_AddStringToObject(e, "name", t->name) || !cJSON_AddStringToObject(e, "dtype", clb_dtype_name(t->dtype)) ||
        !(shape = cJSON_AddArrayToObject(e, "shape")))
        goto fail;
    for (int d = 0; d < t->n_dims; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
    if (cJSON_GetArraySize(shape) != t->n_dims || (chunk >= 0 && !cJSON_AddNumberToObject(e, "chunk", chunk)) ||
        !cJSON_AddNumberToObject(e, "offset", (double)offset) || !cJSON_AddNumberToObject(e, "size", (double)t->size) ||
        !cJSON_AddStringToObject(e, "crc32", hex) || !cJSON_AddNumberToObject(e, "layer", t->layer) ||
        !cJSON_AddNumberToObject(e, "expert", t->expert))
        goto fail;
    return e;
fail:
    cJSON_Delete(e);
    return NULL;
}

static char *render_meta(const clb_cwriter *w, bool with_crc) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    char *out = NULL;
    cJSON_AddStringToObject(root, "format", "colibri");
    cJSON_AddNumberToObject(root, "version", CLB_CONTAINER_VERSION);
    cJSON_AddItemReferenceToObject(root, "config", w->config);
    if (w->tokenizer) cJSON_AddItemReferenceToObject(root, "tokenizer", w->tokenizer);
    cJSON *arr = cJSON_AddArrayToObject(root, "tensors");
    if (!arr) goto done;
    for (int i = 0; i < w->n; i++) {
        cJSON *e = clb_ct_tensor_json(&w->t[i], with_crc, w->t[i].offset, -1);
        if (!e) goto done;
        cJSON_AddItemToArray(arr, e);
    }
    out = cJSON_PrintUnformatted(root);
done:
    cJSON_Delete(root);
    return out;
}

typedef struct layout_key {
    int layer, expert, idx;
} layout_key;

static int cmp_layout_key(const void *a, const void *b) {
    const layout_key *x = a, *y = b;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    if (x->expert != y->expert) return x->expert < y->expert ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Assigns data-section offsets (docs/FORMAT.md, "Data section"). */
static int layout(clb_cwriter *w) {
    layout_key *k = clb_malloc((size_t)(w->n > 0 ? w->n : 1) * sizeof *k);
    if (!k) return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", w->path);
    int nk = 0;
    uint64_t pos = 0;
    const uint64_t limit = (uint64_t)1 << 53;
    int rc = COLIBRI_OK;
    for (int i = 0; i < w->n; i++) {
        clb_tensor *t = &w->t[i];
        if (t->expert >= 0) {
            k[nk++] = (layout_key){t->layer, t->expert, i};
            continue;
        }
        t->offset = clb_align_up(pos, CLB_CONTAINER_TENSOR_ALIGN);
        pos = t->offset + t->size;
        if (t->size > limit || pos > limit) {
            rc = clb_err(COLIBRI_ERR_ARG, "%s: data section larger than 2^53 bytes", w->path);
            goto done;
        }
    }
    qsort(k, (size_t)nk, sizeof *k, cmp_layout_key);
    for (int j = 0; j < nk; j++) {
        clb_tensor *t = &w->t[k[j].idx];
        bool first = j == 0 || k[j].layer != k[j - 1].layer || k[j].expert != k[j - 1].expert;
        t->offset = clb_align_up(pos, first ? CLB_CONTAINER_DATA_ALIGN : CLB_CONTAINER_TENSOR_ALIGN);
        pos = t->offset + t->size;
        if (t->size > limit || pos > limit) {
            rc = clb_err(COLIBRI_ERR_ARG, "%s: data section larger than 2^53 bytes", w->path);
            goto done;
        }
    }
    w->data_size = pos;
done:
    clb_free(k);
    return rc;
}

static int check_desc(const char *path, const clb_cw_tensor *d, int i, clb_tensor *t) {
    if (!d->name || !d->name[0])
        return clb_err(COLIBRI_ERR_ARG, "%s: tensor %d has no name", path, i);
    if (!clb_type(d->dtype))
        return clb_err(COLIBRI_ERR_ARG, "%s: tensor '%s': unknown dtype %d", path, d->name, d->dtype);
    if (d->n_dims < 1 || d->n_dims > CLB_MAX_DIMS)
        return clb_err(COLIBRI_ERR_ARG, "%s: tensor '%s': %d dimensions (1 to %d allowed)", path,
                       d->name, d->n_dims, CLB_MAX_DIMS);
    if (d->layer < -1 || d->expert < -1 || (d->expert >= 0 && d->layer < 0))
        return clb_err(COLIBRI_ERR_ARG, "%s: tensor '%s': bad layer %d / expert %d", path, d->name,
                       d->layer, d->expert);
    t->name = clb_strdup(d->name);
    if (!t->name) return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", path);
    t->dtype = d->dtype;
    t->n_dims = d->n_dims;
    uint64_t rows = 1, rb;
    for (int k = 0; k < d->n_dims; k++) {
        t->shape[k] = d->shape[k];
        if (d->shape[k] <= 0 || d->shape[k] > ((int64_t)1 << 53))
            return clb_err(COLIBRI_ERR_ARG, "%s: tensor '%s': dimension %d is %lld", path, d->name, k,
                           (long long)d->shape[k]);
        if (k < d->n_dims - 1 && !clb_mul_u64(rows, (uint64_t)d->shape[k], &rows))
            return clb_err(COLIBRI_ERR_ARG, "%s: tensor '%s': shape overflows", path, d->name);
    }
    if (!clb_row_bytes(d->dtype, d->shape[d->n_dims - 1], &rb) || !clb_mul_u64(rows, rb, &t->size))
        return clb_err(COLIBRI_ERR_ARG, "%s: tensor '%s': rows of %lld are not whole %s blocks (or overflow)",
                       path, d->name, (long long)d->shape[d->n_dims - 1], clb_dtype_name(d->dtype));
    t->layer = d->layer;
    t->expert = d->expert;
    t->crc32 = 0;
    t->has_crc = true;
    return COLIBRI_OK;
}

clb_cwriter *clb_cwriter_create(const char *path, const cJSON *config, const cJSON *tokenizer,
                                const clb_cw_tensor *tensors, int n_tensors) {
    return clb_cwriter_create_ex(path, config, tokenizer, tensors, n_tensors, NULL);
}

clb_cwriter *clb_cwriter_create_ex(const char *path, const cJSON *config, const cJSON *tokenizer,
                                   const clb_cw_tensor *tensors, int n_tensors, const clb_cw_encoding *enc) {
    if (enc && enc->codec == CLB_CODEC_NONE && !enc->encrypt) enc = NULL; /* plain: version 1 */
    if (!path || !*path || n_tensors < 0 || (n_tensors > 0 && !tensors)) {
        clb_err(COLIBRI_ERR_ARG, "cwriter: bad arguments");
        return NULL;
    }
    if (config && !cJSON_IsObject(config)) {
        clb_err(COLIBRI_ERR_ARG, "%s: config is not a JSON object", path);
        return NULL;
    }
    if (tokenizer && !cJSON_IsObject(tokenizer)) {
        clb_err(COLIBRI_ERR_ARG, "%s: tokenizer is not a JSON object", path);
        return NULL;
    }
    clb_cwriter *w = clb_calloc(1, sizeof *w);
    if (!w) {
        clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", path);
        return NULL;
    }
    w->fd = -1;
    w->n = n_tensors;
    w->path = clb_strdup(path);
    w->tmp_path = clb_malloc(strlen(path) + 5);
    w->t = clb_calloc((size_t)(n_tensors > 0 ? n_tensors : 1), sizeof *w->t);
    w->written = clb_calloc((size_t)(n_tensors > 0 ? n_tensors : 1), sizeof *w->written);
    w->config = config ? cJSON_Duplicate(config, 1) : cJSON_CreateObject();
    w->tokenizer = tokenizer ? cJSON_Duplicate(tokenizer, 1) : NULL;
    if (!w->path || !w->tmp_path || !w->t || !w->written || !w->config || (tokenizer && !w->tokenizer)) {
        clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    memcpy(w->tmp_path, path, strlen(path));
    memcpy(w->tmp_path + strlen(path), ".tmp", 5);
    for (int i = 0; i < n_tensors; i++)
        if (check_desc(path, &tensors[i], i, &w->t[i])) goto fail;
    clb_tensor_index ix;
    int dup = -1, rc = clb_tensor_index_build(&ix, w->t, n_tensors, &dup);
    if (rc == COLIBRI_ERR_FORMAT) {
        clb_err(COLIBRI_ERR_ARG, "%s: tensor name '%s' appears twice", path, w->t[dup].name);
        goto fail;
    }
    if (rc) goto fail;
    clb_tensor_index_free(&ix);
    if (layout(w)) goto fail;
    if (enc) {
        if (clb_ct_v2_writer_init(w, enc)) goto fail;
        return w;
    }

    char *json = render_meta(w, false);
    if (!json) {
        clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory rendering metadata", path);
        goto fail;
    }
    w->meta_size = 8 + (uint64_t)strlen(json);
    cJSON_free(json);
    w->data_offset = clb_align_up(CLB_CONTAINER_HEADER_SIZE + w->meta_size, CLB_CONTAINER_DATA_ALIGN);

    w->fd = open(w->tmp_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        clb_err(COLIBRI_ERR_IO, "%s: %s", w->tmp_path, strerror(errno));
        goto fail;
    }
    w->created = true;
    /* Sizes the file; the holes read back as the zero padding the format requires. */
    if (ftruncate(w->fd, (off_t)(w->data_offset + w->data_size)) != 0) {
        clb_err(COLIBRI_ERR_IO, "%s: %s", w->tmp_path, strerror(errno));
        goto fail;
    }
    return w;
fail:
    clb_cwriter_free(w);
    return NULL;
}

int clb_cwriter_write(clb_cwriter *w, int i, const void *data, uint64_t len) {
    if (!w || w->finished || w->fd < 0) return clb_err(COLIBRI_ERR_ARG, "cwriter: not open");
    if (i < 0 || i >= w->n) return clb_err(COLIBRI_ERR_ARG, "%s: no tensor %d", w->path, i);
    clb_tensor *t = &w->t[i];
    if (len > t->size - w->written[i])
        return clb_err(COLIBRI_ERR_ARG, "%s: tensor '%s': writing %llu bytes at %llu exceeds its size %llu",
                       w->path, t->name, (unsigned long long)len, (unsigned long long)w->written[i],
                       (unsigned long long)t->size);
    if (len == 0) return COLIBRI_OK;
    if (!data) return clb_err(COLIBRI_ERR_ARG, "%s: tensor '%s': no data", w->path, t->name);
    if (w->v2) return clb_ct_v2_write(w, i, data, len);
    int rc = clb_ct_pwrite(w->fd, data, len, w->data_offset + t->offset + w->written[i], w->tmp_path);
    if (rc) return rc;
    t->crc32 = clb_ct_crc(t->crc32, data, len);
    w->written[i] += len;
    return COLIBRI_OK;
}

uint64_t clb_cwriter_data_bytes(const clb_cwriter *w) {
    if (!w) return 0;
    if (w->v2) return clb_ct_v2_data_bytes(w);
    uint64_t n = 0;
    for (int i = 0; i < w->n; i++) n += w->written[i];
    return n;
}

int clb_cwriter_finish(clb_cwriter *w) {
    if (!w || w->finished || w->fd < 0) return clb_err(COLIBRI_ERR_ARG, "cwriter: not open");
    for (int i = 0; i < w->n; i++)
        if (w->written[i] != w->t[i].size)
            return clb_err(COLIBRI_ERR_ARG, "%s: tensor '%s': %llu of %llu bytes written", w->path,
                           w->t[i].name, (unsigned long long)w->written[i],
                           (unsigned long long)w->t[i].size);
    if (w->v2) return clb_ct_v2_finish(w);
    /* The data CRC as written (tensor CRCs + zero padding) ... */
    static const uint8_t zeros[CLB_CONTAINER_DATA_ALIGN];
    off_key *k = sort_by_offset(w->t, w->n);
    if (!k) return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", w->path);
    uint32_t expect = 0;
    uint64_t pos = 0;
    for (int j = 0; j < w->n; j++) {
        const clb_tensor *t = &w->t[k[j].idx];
        expect = clb_ct_crc(expect, zeros, t->offset - pos); /* < 4096 by construction */
        expect = clb_ct_crc_cat(expect, t->crc32, t->size);
        pos = t->offset + t->size;
    }
    clb_free(k);
    /* ... must equal the CRC of the bytes read back from the file. */
    uint32_t crc;
    int rc = clb_ct_readback(w, expect, &crc);
    if (rc) return rc;

    char *json = render_meta(w, true);
    if (!json) return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory rendering metadata", w->path);
    uint64_t json_len = (uint64_t)strlen(json);
    if (8 + json_len != w->meta_size) {
        cJSON_free(json);
        return clb_err(COLIBRI_ERR_INTERNAL, "%s: metadata changed length (%llu, reserved %llu)", w->path,
                       (unsigned long long)(8 + json_len), (unsigned long long)w->meta_size);
    }
    uint8_t len_le[8];
    clb_wr_u64(len_le, json_len);
    uint32_t meta_crc = clb_ct_crc(clb_ct_crc(0, len_le, 8), (const uint8_t *)json, json_len);
    rc = clb_ct_pwrite(w->fd, len_le, 8, CLB_CONTAINER_HEADER_SIZE, w->tmp_path);
    if (!rc) rc = clb_ct_pwrite(w->fd, json, json_len, CLB_CONTAINER_HEADER_SIZE + 8, w->tmp_path);
    cJSON_free(json);
    if (rc) return rc;

    uint8_t h[CLB_CONTAINER_HEADER_SIZE] = {0};
    memcpy(h + H_MAGIC, CLB_CONTAINER_MAGIC, 8); /* includes the NUL */
    clb_wr_u32(h + H_VERSION, CLB_CONTAINER_VERSION);
    clb_wr_u32(h + H_FLAGS, 0);
    clb_wr_u64(h + H_META_OFF, CLB_CONTAINER_HEADER_SIZE);
    clb_wr_u64(h + H_META_SIZE, w->meta_size);
    clb_wr_u64(h + H_DATA_OFF, w->data_offset);
    clb_wr_u64(h + H_DATA_SIZE, w->data_size);
    clb_wr_u64(h + H_COUNT, (uint64_t)w->n);
    clb_wr_u32(h + H_META_CRC, meta_crc);
    clb_wr_u32(h + H_ALIGN, CLB_CONTAINER_DATA_ALIGN);
    clb_wr_u32(h + H_DATA_CRC, crc);
    clb_wr_u32(h + H_HEADER_CRC, clb_ct_crc(0, h, H_HEADER_CRC));
    return clb_ct_commit(w, h);
}

int clb_ct_readback(clb_cwriter *w, uint32_t expect, uint32_t *crc_out) {
    const size_t chunk = (size_t)1 << 20;
    uint8_t *buf = clb_malloc(chunk);
    if (!buf) return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", w->path);
    uint32_t crc = 0;
    int rc = COLIBRI_OK;
    for (uint64_t off = 0; off < w->data_size && !rc; off += chunk) {
        size_t n = (size_t)CLB_MIN((uint64_t)chunk, w->data_size - off);
        rc = clb_ct_pread(w->fd, buf, n, w->data_offset + off, w->tmp_path);
        if (!rc) crc = clb_ct_crc(crc, buf, n);
    }
    clb_free(buf);
    if (rc) return rc;
    if (crc != expect)
        return clb_err(COLIBRI_ERR_IO, "%s: data read back does not match what was written (crc32 %08x, expected %08x)",
                       w->tmp_path, crc, expect);
    *crc_out = crc;
    return COLIBRI_OK;
}

int clb_ct_commit(clb_cwriter *w, const uint8_t h[CLB_CONTAINER_HEADER_SIZE]) {
    int rc;
    if ((rc = clb_ct_pwrite(w->fd, h, CLB_CONTAINER_HEADER_SIZE, 0, w->tmp_path))) return rc;
    if (fsync(w->fd) != 0) return clb_err(COLIBRI_ERR_IO, "%s: fsync: %s", w->tmp_path, strerror(errno));
    if (close(w->fd) != 0) {
        w->fd = -1;
        return clb_err(COLIBRI_ERR_IO, "%s: close: %s", w->tmp_path, strerror(errno));
    }
    w->fd = -1;
    if (rename(w->tmp_path, w->path) != 0)
        return clb_err(COLIBRI_ERR_IO, "%s: rename to %s: %s", w->tmp_path, w->path, strerror(errno));
    w->finished = true;
    return COLIBRI_OK;
}

void clb_cwriter_free(clb_cwriter *w) {
    if (!w) return;
    clb_ct_v2_writer_free(w);
    if (w->fd >= 0) close(w->fd);
    if (!w->finished && w->created) unlink(w->tmp_path);
    for (int i = 0; w->t && i < w->n; i++) clb_free(w->t[i].name);
    clb_free(w->t);
    clb_free(w->written);
    cJSON_Delete(w->config);
    cJSON_Delete(w->tokenizer);
    clb_free(w->path);
    clb_free(w->tmp_path);
    clb_free(w);
}
