/* convert.c — source -> .colibri. Router weights, norms and biases stay f32; other matrices
 * get the requested dtype (experts may get their own). A tensor whose source dtype equals
 * its target is copied byte for byte, so GGUF quantized blocks stay bit-exact. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/platform.h"
#include "format/container.h"
#include "model/convert.h"
#include "model/loader.h"
#include "model/source.h"

enum { CHUNK_BYTES = 1 << 20 };

static bool keep_f32(const clb_src_tensor *t) {
    if (t->n_dims == 1) return true;
    return strstr(t->name, "ffn_gate_inp") != NULL || strstr(t->name, "exp_probs_b") != NULL;
}

/* "a-b" or "a" within [0, n): fills lo/hi (inclusive) */
static bool parse_range(const char *s, size_t len, int n, int *lo, int *hi) {
    char buf[32];
    if (len == 0 || len >= sizeof buf) return false;
    memcpy(buf, s, len);
    buf[len] = 0;
    if (!strcmp(buf, "*")) {
        *lo = 0;
        *hi = n - 1;
        return n > 0;
    }
    char *end;
    long a = strtol(buf, &end, 10), b = a;
    if (end == buf) return false;
    if (*end == '-') {
        char *e2;
        b = strtol(end + 1, &e2, 10);
        if (e2 == end + 1 || *e2) return false;
    } else if (*end) {
        return false;
    }
    if (a < 0 || b < a || b >= n) return false;
    *lo = (int)a;
    *hi = (int)b;
    return true;
}

/* "0-3:q8_0,4-7:q4_0" for layers [l0, l1] */
static int parse_expert_spec(const char *spec, int l0, int l1, int n_expert, int *out) {
    const char *p = spec;
    while (*p) {
        const char *comma = strchr(p, ','), *end = comma ? comma : p + strlen(p), *colon = memchr(p, ':', (size_t)(end - p));
        int lo, hi;
        clb_dtype d;
        char name[16];
        if (!colon || !parse_range(p, (size_t)(colon - p), n_expert, &lo, &hi))
            return clb_err(COLIBRI_ERR_ARG, "expert dtype map: '%.*s' is not EXPERTS:DTYPE with experts in 0..%d",
                           (int)(end - p), p, n_expert - 1);
        size_t nl = (size_t)(end - colon - 1);
        if (nl == 0 || nl >= sizeof name) return clb_err(COLIBRI_ERR_ARG, "expert dtype map: no dtype in '%.*s'", (int)(end - p), p);
        memcpy(name, colon + 1, nl);
        name[nl] = 0;
        if (clb_dtype_from_name(name, &d) || !clb_dtype_can_quantize(d))
            return clb_err(COLIBRI_ERR_ARG, "expert dtype map: dtype '%s' cannot be written", name);
        for (int l = l0; l <= l1; l++)
            for (int e = lo; e <= hi; e++) out[l * n_expert + e] = d;
        p = comma ? comma + 1 : end;
    }
    return COLIBRI_OK;
}

int clb_expert_dtype_map_parse(const char *spec, int n_layer, int n_expert, int *out) {
    for (int i = 0; i < n_layer * n_expert; i++) out[i] = -1;
    if (!spec || !*spec) return COLIBRI_OK;
    char *text = NULL;
    const char *json = NULL;
    size_t sl = strlen(spec);
    if (spec[0] == '{') {
        json = spec;
    } else if (sl > 5 && !strcmp(spec + sl - 5, ".json")) {
        int rc = clb_read_file(spec, 1 << 20, &text, NULL);
        if (rc) return rc;
        json = text;
    } else {
        return parse_expert_spec(spec, 0, n_layer - 1, n_expert, out);
    }
    cJSON *j = cJSON_Parse(json);
    clb_free(text);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return clb_err(COLIBRI_ERR_ARG, "expert dtype map: not a JSON object");
    }
    int rc = COLIBRI_OK;
    const cJSON *it;
    cJSON_ArrayForEach(it, j) {
        int l0, l1;
        if (!parse_range(it->string, strlen(it->string), n_layer, &l0, &l1)) {
            rc = clb_err(COLIBRI_ERR_ARG, "expert dtype map: layer key '%s' is not *, L or L0-L1 within 0..%d", it->string,
                         n_layer - 1);
            break;
        }
        if (!cJSON_IsString(it)) {
            rc = clb_err(COLIBRI_ERR_ARG, "expert dtype map: layer '%s' must map to \"EXPERTS:dtype,...\"", it->string);
            break;
        }
        if ((rc = parse_expert_spec(it->valuestring, l0, l1, n_expert, out))) break;
    }
    cJSON_Delete(j);
    return rc;
}

static int target_dtype(const clb_src_tensor *t, const clb_convert_opts *o, const int *emap, int n_expert,
                        bool *fallback) {
    *fallback = false;
    int want = t->expert >= 0 && o->expert_dtype >= 0 ? o->expert_dtype : o->dtype;
    if (t->expert >= 0 && emap && emap[t->layer * n_expert + t->expert] >= 0) want = emap[t->layer * n_expert + t->expert];
    if (keep_f32(t)) want = clb_type(t->dtype) && clb_type(t->dtype)->is_quantized ? t->dtype : CLB_DT_F32;
    if (want < 0) return t->dtype;
    uint64_t rb;
    if (!clb_row_bytes(want, t->shape[t->n_dims - 1], &rb)) {
        *fallback = true; /* e.g. 48 columns cannot be cut into 32-wide blocks */
        return CLB_DT_F16;
    }
    return want;
}

static int convert_tensor(clb_cwriter *w, int idx, const clb_src_tensor *t, int dst_dtype, uint8_t *out_buf,
                          uint8_t *src_buf, float *row_f32, uint64_t *done, uint64_t total, const clb_convert_opts *o) {
    if (dst_dtype == t->dtype) {
        for (uint64_t off = 0; off < t->size; off += CHUNK_BYTES) {
            uint64_t n = CLB_MIN((uint64_t)CHUNK_BYTES, t->size - off);
            int rc = clb_cwriter_write(w, idx, t->data + off, n);
            if (rc) return rc;
            *done += n;
            if (o->progress) o->progress(*done, total, o->user);
        }
        return COLIBRI_OK;
    }
    if (!clb_dtype_is_weight(t->dtype))
        return clb_err(COLIBRI_ERR_UNSUPPORTED, "tensor '%s': cannot convert from %s", t->name, clb_dtype_name(t->dtype));
    const int64_t cols = t->shape[t->n_dims - 1];
    uint64_t src_rb, dst_rb;
    clb_row_bytes(t->dtype, cols, &src_rb);
    clb_row_bytes(dst_dtype, cols, &dst_rb);
    uint64_t n_rows = t->size / src_rb;
    uint64_t rows_per_chunk = CLB_MAX((uint64_t)1, (uint64_t)CHUNK_BYTES / dst_rb);
    for (uint64_t r = 0; r < n_rows;) {
        uint64_t cnt = CLB_MIN(rows_per_chunk, n_rows - r);
        for (uint64_t i = 0; i < cnt; i++) {
            /* safetensors data need not be naturally aligned: copy such rows first */
            const uint8_t *src = t->data + (r + i) * src_rb;
            if ((uintptr_t)src % 4 != 0) {
                memcpy(src_buf, src, (size_t)src_rb);
                src = src_buf;
            }
            clb_dequantize_row_ref(t->dtype, src, row_f32, cols);
            clb_quantize_row_ref(dst_dtype, row_f32, out_buf + i * dst_rb, cols);
        }
        int rc = clb_cwriter_write(w, idx, out_buf, cnt * dst_rb);
        if (rc) return rc;
        *done += cnt * src_rb;
        if (o->progress) o->progress(*done, total, o->user);
        r += cnt;
    }
    return COLIBRI_OK;
}

int clb_convert(const char *src_path, const char *dst_path, const clb_convert_opts *o, clb_convert_report *rep) {
    clb_convert_report dummy;
    if (!rep) rep = &dummy;
    memset(rep, 0, sizeof *rep);
    if (o->dtype >= 0 && !clb_dtype_can_quantize(o->dtype))
        return clb_err(COLIBRI_ERR_ARG, "convert cannot produce dtype %s", clb_dtype_name(o->dtype));
    if (o->expert_dtype >= 0 && !clb_dtype_can_quantize(o->expert_dtype))
        return clb_err(COLIBRI_ERR_ARG, "convert cannot produce dtype %s", clb_dtype_name(o->expert_dtype));
    /* bind the model once: every shape is checked against the config before a byte is
       written, with the loader's messages */
    clb_model *check;
    int rc = clb_model_load(src_path, &check);
    if (rc) return rc;
    clb_model_free(check);
    clb_source s;
    if ((rc = clb_source_open(src_path, &s))) return rc;
    const int n = s.n_tensors;
    clb_cw_tensor *desc = clb_calloc((size_t)(n ? n : 1), sizeof *desc);
    int *order = clb_calloc((size_t)(n ? n : 1), sizeof *order), *dt = clb_calloc((size_t)(n ? n : 1), sizeof *dt);
    int *emap = NULL; /* [n_layer][n_expert] dtype overrides */
    uint8_t *out_buf = NULL, *src_buf = NULL;
    float *row = NULL;
    clb_cwriter *w = NULL;
    cJSON *config = NULL;
    if (!desc || !order || !dt) {
        rc = clb_err(COLIBRI_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (s.hp.n_expert > 0 && o->expert_dtype_map) {
        emap = clb_calloc((size_t)s.hp.n_layer * (size_t)s.hp.n_expert, sizeof *emap);
        if (!emap) {
            rc = clb_err(COLIBRI_ERR_NOMEM, "out of memory");
            goto done;
        }
        if ((rc = clb_expert_dtype_map_parse(o->expert_dtype_map, s.hp.n_layer, s.hp.n_expert, emap))) goto done;
    }
    /* order: dense tensors, then per (layer, expert): gate, up, down */
    int k = 0;
    int64_t max_cols = 1;
    for (int i = 0; i < n; i++)
        if (s.tensors[i].expert < 0) order[k++] = i;
    static const char *const parts[] = {"ffn_gate", "ffn_up", "ffn_down"};
    for (int l = 0; l < s.hp.n_layer; l++)
        for (int e = 0; e < s.hp.n_expert; e++)
            for (int p = 0; p < 3; p++) {
                char name[96];
                snprintf(name, sizeof name, "blk.%d.%s.%d.weight", l, parts[p], e);
                const clb_src_tensor *t = clb_source_find(&s, name);
                if (t) order[k++] = (int)(t - s.tensors);
            }
    if (k != n) {
        rc = clb_err(COLIBRI_ERR_FORMAT, "%s: %d routed-expert tensors do not fit the model's %d layers x %d experts",
                     src_path, n - k, s.hp.n_layer, s.hp.n_expert);
        goto done;
    }
    uint64_t total = 0, max_out_row = 0;
    for (int i = 0; i < n; i++) {
        const clb_src_tensor *t = &s.tensors[order[i]];
        bool fb;
        dt[i] = target_dtype(t, o, emap, s.hp.n_expert, &fb);
        rep->n_fallback += fb;
        desc[i] = (clb_cw_tensor){.name = t->name, .dtype = dt[i], .n_dims = t->n_dims, .layer = t->layer,
                                  .expert = t->expert};
        memcpy(desc[i].shape, t->shape, sizeof desc[i].shape);
        int64_t cols = t->shape[t->n_dims - 1];
        uint64_t rb = 0, srb = 0;
        clb_row_bytes(dt[i], cols, &rb);
        clb_row_bytes(t->dtype, cols, &srb);
        max_out_row = CLB_MAX(max_out_row, CLB_MAX(rb, srb));
        max_cols = CLB_MAX(max_cols, cols);
        total += t->size;
        if (fb)
            clb_log(CLB_LOG_WARN, "tensor '%s': %lld columns do not fit %s blocks, stored as f16", t->name,
                    (long long)cols, clb_dtype_name(o->expert_dtype >= 0 && t->expert >= 0 ? o->expert_dtype : o->dtype));
    }
    out_buf = clb_alloc_aligned((size_t)CLB_MAX((uint64_t)CHUNK_BYTES, max_out_row) + 64);
    src_buf = clb_alloc_aligned((size_t)max_out_row + 64);
    row = clb_alloc_aligned((size_t)max_cols * sizeof(float));
    config = clb_hparams_to_json(&s.hp);
    if (!out_buf || !src_buf || !row || !config) {
        rc = clb_err(COLIBRI_ERR_NOMEM, "out of memory");
        goto done;
    }
    w = clb_cwriter_create(dst_path, config, s.tokenizer, desc, n);
    if (!w) {
        rc = COLIBRI_ERR_IO;
        goto done;
    }
    uint64_t progress = 0;
    for (int i = 0; i < n; i++) {
        if ((rc = convert_tensor(w, i, &s.tensors[order[i]], dt[i], out_buf, src_buf, row, &progress, total, o))) {
            clb_err_prefix("%s", dst_path);
            goto done;
        }
    }
    if ((rc = clb_cwriter_finish(w))) goto done;
    rep->bytes_in = total;
    rep->n_tensors = n;
    {
        clb_map m;
        if (clb_map_open(dst_path, &m) == COLIBRI_OK) {
            rep->bytes_out = m.size;
            clb_map_close(&m);
        }
    }
done:
    clb_cwriter_free(w);
    cJSON_Delete(config);
    clb_free_aligned(out_buf);
    clb_free_aligned(src_buf);
    clb_free_aligned(row);
    clb_free(desc);
    clb_free(order);
    clb_free(dt);
    clb_free(emap);
    clb_source_close(&s);
    return rc;
}
