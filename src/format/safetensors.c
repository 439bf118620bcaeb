/* safetensors.c — Hugging Face model directories (config.json, tokenizer files and one or
 * more .safetensors files) into a tensor table pointing into read-only maps.
 *
 * A .safetensors file is: u64 little-endian N, N bytes of JSON (optionally padded with
 * spaces) {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 * "__metadata__": {...}}, then the data buffer; offsets are relative to the buffer start
 * (byte 8 + N). Every offset is checked against the file size before use.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "format/safetensors.h"

#define JSON_INT_MAX 9007199254740992.0 /* 2^53: larger JSON integers are not exact */
#define CONFIG_MAX ((size_t)64 << 20)
#define TOKENIZER_MAX ((size_t)1 << 30)
#define INDEX_MAX ((size_t)256 << 20)

static bool json_uint(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d) || d < 0 || d > JSON_INT_MAX) return false;
    *out = (uint64_t)d;
    return true;
}

/* Our dtype id and element size for a safetensors dtype string; false when unsupported. */
static bool st_dtype(const char *s, int *dtype, uint64_t *esize) {
    if (strcmp(s, "F32") == 0) *dtype = CLB_DT_F32, *esize = 4;
    else if (strcmp(s, "F16") == 0) *dtype = CLB_DT_F16, *esize = 2;
    else if (strcmp(s, "BF16") == 0) *dtype = CLB_DT_BF16, *esize = 2;
    else if (strcmp(s, "U8") == 0) *dtype = CLB_ST_U8, *esize = 1; /* MXFP4 blocks and scales */
    else return false;
    return true;
}

typedef struct st_key {
    uint64_t offset;
    int idx;
} st_key;

static int cmp_st_key(const void *a, const void *b) {
    const st_key *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Fills t from one header entry; data_start/data_size locate the data buffer. */
static int parse_entry(const char *path, const clb_map *m, const cJSON *e, uint64_t data_start,
                       uint64_t data_size, clb_tensor *t) {
    const char *nm = e->string;
    if (!nm || !nm[0]) return clb_err(COLIBRI_ERR_FORMAT, "%s: a tensor has an empty name", path);
    if (!cJSON_IsObject(e))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': entry is not an object", path, nm);
    t->name = clb_strdup(nm);
    if (!t->name) return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", path);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    if (!cJSON_IsString(dt))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': no dtype", path, nm);
    uint64_t esize;
    if (!st_dtype(dt->valuestring, &t->dtype, &esize))
        return clb_err(COLIBRI_ERR_UNSUPPORTED,
                       "%s: tensor '%s' has dtype %s; only F32, F16, BF16 and U8 are supported", path, nm,
                       dt->valuestring);
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    int nd = cJSON_IsArray(shape) ? cJSON_GetArraySize(shape) : -1;
    if (nd < 0) return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': no shape array", path, nm);
    if (nd > CLB_MAX_DIMS)
        return clb_err(COLIBRI_ERR_UNSUPPORTED, "%s: tensor '%s' has %d dimensions (at most %d supported)",
                       path, nm, nd, CLB_MAX_DIMS);
    uint64_t nelem = 1;
    if (nd == 0) { /* a scalar: stored as shape [1] */
        t->n_dims = 1;
        t->shape[0] = 1;
    } else {
        t->n_dims = nd;
        int d = 0;
        for (const cJSON *v = shape->child; v; v = v->next, d++) {
            uint64_t x;
            if (!json_uint(v, &x))
                return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': dimension %d is not a non-negative integer",
                               path, nm, d);
            if (x == 0)
                return clb_err(COLIBRI_ERR_UNSUPPORTED, "%s: tensor '%s': dimension %d is 0 (empty tensors are not supported)",
                               path, nm, d);
            t->shape[d] = (int64_t)x;
            if (!clb_mul_u64(nelem, x, &nelem))
                return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': shape overflows", path, nm);
        }
    }
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    uint64_t begin, end, bytes;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !json_uint(offs->child, &begin) ||
        !json_uint(offs->child->next, &end))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': data_offsets is not [begin, end]", path, nm);
    if (end < begin)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] end before they begin",
                       path, nm, (unsigned long long)begin, (unsigned long long)end);
    if (end > data_size)
        return clb_err(COLIBRI_ERR_FORMAT,
                       "%s: tensor '%s': data_offsets end at %llu but the data buffer has %llu bytes",
                       path, nm, (unsigned long long)end, (unsigned long long)data_size);
    if (!clb_mul_u64(nelem, esize, &bytes))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': shape overflows", path, nm);
    if (bytes != end - begin)
        return clb_err(COLIBRI_ERR_FORMAT,
                       "%s: tensor '%s': data_offsets span %llu bytes but %llu %s elements need %llu",
                       path, nm, (unsigned long long)(end - begin), (unsigned long long)nelem,
                       dt->valuestring, (unsigned long long)bytes);
    t->offset = data_start + begin;
    t->size = bytes;
    t->data = m->data + t->offset;
    t->has_crc = false;
    t->crc32 = 0;
    t->layer = -1;
    t->expert = -1;
    return COLIBRI_OK;
}

int clb_safetensors_parse(const clb_map *m, int idx, clb_tensor **tensors, int *n_tensors) {
    const char *path = m && m->path ? m->path : "safetensors";
    if (!m || !tensors || !n_tensors) return clb_err(COLIBRI_ERR_ARG, "safetensors: bad arguments");
    if (m->size < 8)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: truncated: %llu bytes, the header length needs 8", path,
                       (unsigned long long)m->size);
    uint64_t hlen = clb_rd_u64(m->data);
    if (hlen > m->size - 8)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: header length %llu exceeds the file (%llu bytes)", path,
                       (unsigned long long)hlen, (unsigned long long)m->size);
    const char *js = (const char *)m->data + 8, *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(js, (size_t)hlen, &end, 0);
    if (!root)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: header is not valid JSON (near byte %lld)", path,
                       end ? (long long)(end - js) + 8 : -1LL);
    int n0 = *n_tensors, rc = COLIBRI_OK;
    st_key *keys = NULL;
    for (const char *p = end; p < js + hlen; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            rc = clb_err(COLIBRI_ERR_FORMAT, "%s: header has bytes after its JSON (at byte %lld)", path,
                         (long long)(p - js) + 8);
            goto done;
        }
    if (!cJSON_IsObject(root)) {
        rc = clb_err(COLIBRI_ERR_FORMAT, "%s: header is not a JSON object", path);
        goto done;
    }
    int cnt = 0;
    for (const cJSON *e = root->child; e; e = e->next)
        if (!e->string || strcmp(e->string, "__metadata__") != 0) cnt++;
    if (cnt > (1 << 24) || n0 > (1 << 28)) {
        rc = clb_err(COLIBRI_ERR_FORMAT, "%s: too many tensors (%d)", path, cnt);
        goto done;
    }
    clb_tensor *arr = clb_realloc(*tensors, (size_t)(n0 + cnt + 1) * sizeof *arr);
    if (!arr) {
        rc = clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    *tensors = arr;
    memset(arr + n0, 0, (size_t)(cnt + 1) * sizeof *arr);
    uint64_t data_start = 8 + hlen, data_size = m->size - data_start;
    int k = n0;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (e->string && strcmp(e->string, "__metadata__") == 0) continue;
        arr[k].file_index = idx;
        rc = parse_entry(path, m, e, data_start, data_size, &arr[k]);
        k++;
        *n_tensors = k; /* names so far are freed on failure below */
        if (rc) goto done;
    }
    /* Tensors must not share bytes. */
    keys = clb_malloc((size_t)(cnt + 1) * sizeof *keys);
    if (!keys) {
        rc = clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    for (int i = 0; i < cnt; i++) keys[i] = (st_key){arr[n0 + i].offset, n0 + i};
    qsort(keys, (size_t)cnt, sizeof *keys, cmp_st_key);
    for (int i = 1; i < cnt; i++) {
        const clb_tensor *a = &arr[keys[i - 1].idx], *b = &arr[keys[i].idx];
        if (b->offset < a->offset + a->size) {
            rc = clb_err(COLIBRI_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap", path, a->name, b->name);
            goto done;
        }
    }
done:
    clb_free(keys);
    cJSON_Delete(root);
    if (rc) {
        for (int i = n0; i < *n_tensors; i++) {
            clb_free((*tensors)[i].name);
            (*tensors)[i].name = NULL;
        }
        *n_tensors = n0;
    }
    return rc;
}

/* ---------------------------------------------------------------- directory */

static int read_json_file(const char *path, size_t max, cJSON **out) {
    char *buf = NULL;
    size_t len = 0;
    *out = NULL;
    int rc = clb_read_file(path, max, &buf, &len);
    if (rc) return rc;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
    if (!j) {
        long long at = end ? (long long)(end - buf) : -1LL;
        clb_free(buf);
        return clb_err(COLIBRI_ERR_FORMAT, "%s: malformed JSON (near byte %lld)", path, at);
    }
    clb_free(buf);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return clb_err(COLIBRI_ERR_FORMAT, "%s: not a JSON object", path);
    }
    *out = j;
    return COLIBRI_OK;
}

/* Reads dir/name into *out when it exists (NULL otherwise). */
static int read_optional(const char *dir, const char *name, char **out) {
    *out = NULL;
    char *p = clb_path_join(dir, name);
    if (!p) return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", dir);
    int rc = COLIBRI_OK;
    if (clb_file_exists(p)) rc = clb_read_file(p, TOKENIZER_MAX, out, NULL);
    clb_free(p);
    return rc;
}

static int open_shard(clb_hf_dir *d, const char *dir, const char *file) {
    char *p = clb_path_join(dir, file);
    if (!p) return clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", dir);
    int rc;
    if (!clb_file_exists(p)) {
        rc = clb_err(COLIBRI_ERR_IO, "%s: shard %s is missing", dir, file);
    } else {
        rc = clb_map_open(p, &d->maps[d->n_maps]);
        if (!rc) {
            d->n_maps++;
            rc = clb_safetensors_parse(&d->maps[d->n_maps - 1], d->n_maps - 1, &d->tensors, &d->n_tensors);
        }
    }
    clb_free(p);
    return rc;
}

/* Shard names come from a file: accept plain file names only. */
static bool plain_file_name(const char *s) {
    return s[0] && strchr(s, '/') == NULL && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static int open_sharded(clb_hf_dir *d, const char *dir, const char *index_path) {
    cJSON *ix = NULL;
    const char **shards = NULL;
    int n_shards = 0, rc = read_json_file(index_path, INDEX_MAX, &ix);
    if (rc) return rc;
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(ix, "weight_map");
    if (!cJSON_IsObject(wm)) {
        rc = clb_err(COLIBRI_ERR_FORMAT, "%s: no \"weight_map\" object", index_path);
        goto done;
    }
    int n_entries = cJSON_GetArraySize(wm);
    shards = clb_malloc((size_t)(n_entries + 1) * sizeof *shards);
    if (!shards) {
        rc = clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", index_path);
        goto done;
    }
    for (const cJSON *e = wm->child; e; e = e->next) {
        if (!cJSON_IsString(e) || !e->string || !plain_file_name(e->valuestring)) {
            rc = clb_err(COLIBRI_ERR_FORMAT, "%s: weight_map entry '%s' is not a shard file name",
                         index_path, e->string ? e->string : "");
            goto done;
        }
        int s = n_shards - 1; /* entries are usually grouped by shard: try the last first */
        if (s < 0 || strcmp(shards[s], e->valuestring) != 0)
            for (s = 0; s < n_shards && strcmp(shards[s], e->valuestring) != 0; s++) {}
        if (s == n_shards) shards[n_shards++] = e->valuestring;
    }
    if (n_shards == 0) {
        rc = clb_err(COLIBRI_ERR_FORMAT, "%s: weight_map is empty", index_path);
        goto done;
    }
    d->maps = clb_calloc((size_t)n_shards, sizeof *d->maps);
    if (!d->maps) {
        rc = clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", index_path);
        goto done;
    }
    for (int s = 0; s < n_shards && !rc; s++) rc = open_shard(d, dir, shards[s]);
    if (rc) goto done;
    int dup = -1;
    rc = clb_tensor_index_build(&d->index, d->tensors, d->n_tensors, &dup);
    if (rc == COLIBRI_ERR_FORMAT) {
        int first = 0;
        while (strcmp(d->tensors[first].name, d->tensors[dup].name) != 0) first++;
        rc = clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s' appears in both %s and %s", dir,
                     d->tensors[dup].name, shards[d->tensors[first].file_index],
                     shards[d->tensors[dup].file_index]);
        goto done;
    }
    if (rc) goto done;
    for (const cJSON *e = wm->child; e; e = e->next) {
        const clb_tensor *t = clb_tensor_index_find(&d->index, d->tensors, e->string);
        if (!t || strcmp(shards[t->file_index], e->valuestring) != 0) {
            rc = clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s' is not in shard %s", index_path, e->string,
                         e->valuestring);
            goto done;
        }
    }
done:
    clb_free(shards);
    cJSON_Delete(ix);
    return rc;
}

int clb_hf_open(const char *dir, clb_hf_dir *out) {
    memset(out, 0, sizeof *out);
    if (!dir || !*dir) return clb_err(COLIBRI_ERR_ARG, "no model directory given");
    if (!clb_is_dir(dir)) return clb_err(COLIBRI_ERR_IO, "%s: not a directory", dir);
    char *cfg = clb_path_join(dir, "config.json");
    char *single = clb_path_join(dir, "model.safetensors");
    char *index = clb_path_join(dir, "model.safetensors.index.json");
    int rc = COLIBRI_OK;
    if (!cfg || !single || !index) {
        rc = clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", dir);
        goto done;
    }
    if (!clb_file_exists(cfg)) {
        rc = clb_err(COLIBRI_ERR_IO, "%s: no config.json", dir);
        goto done;
    }
    if ((rc = read_json_file(cfg, CONFIG_MAX, &out->config))) goto done;
    if ((rc = read_optional(dir, "tokenizer.json", &out->tokenizer_json))) goto done;
    if ((rc = read_optional(dir, "tokenizer_config.json", &out->tokenizer_config))) goto done;
    if (clb_file_exists(single)) {
        out->maps = clb_calloc(1, sizeof *out->maps);
        if (!out->maps) {
            rc = clb_err(COLIBRI_ERR_NOMEM, "%s: out of memory", dir);
            goto done;
        }
        if ((rc = open_shard(out, dir, "model.safetensors"))) goto done;
        int dup = -1;
        rc = clb_tensor_index_build(&out->index, out->tensors, out->n_tensors, &dup);
        if (rc == COLIBRI_ERR_FORMAT)
            rc = clb_err(rc, "%s: tensor '%s' appears twice", single, out->tensors[dup].name);
    } else if (clb_file_exists(index)) {
        rc = open_sharded(out, dir, index);
    } else {
        rc = clb_err(COLIBRI_ERR_IO, "%s: no model.safetensors or model.safetensors.index.json", dir);
    }
done:
    clb_free(cfg);
    clb_free(single);
    clb_free(index);
    if (rc) clb_hf_close(out);
    return rc;
}

void clb_hf_close(clb_hf_dir *d) {
    if (!d) return;
    cJSON_Delete(d->config);
    clb_free(d->tokenizer_json);
    clb_free(d->tokenizer_config);
    for (int i = 0; i < d->n_maps; i++) clb_map_close(&d->maps[i]);
    clb_free(d->maps);
    for (int i = 0; i < d->n_tensors; i++) clb_free(d->tensors[i].name);
    clb_free(d->tensors);
    clb_tensor_index_free(&d->index);
    memset(d, 0, sizeof *d);
}

const clb_tensor *clb_hf_find(const clb_hf_dir *d, const char *name) {
    if (!d) return NULL;
    return clb_tensor_index_find(&d->index, d->tensors, name);
}
