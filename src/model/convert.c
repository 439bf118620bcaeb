/* convert.c — source -> .colibri. Router weights, norms and biases stay f32; other matrices
 * get the requested dtype (experts may get their own), or the type a llama.cpp mix gives
 * them (mix.c). A tensor whose source dtype equals its target is copied byte for byte, so
 * GGUF quantized blocks stay bit-exact. Rows are converted on a thread pool, each row by one
 * thread with the reference quantizers, so the bytes do not depend on the thread count. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/platform.h"
#include "core/threadpool.h"
#include "format/codec.h"
#include "format/container.h"
#include "model/convert.h"
#include "model/loader.h"
#include "model/mix.h"
#include "model/source.h"

enum { CHUNK_BYTES = 1 << 20 };

static bool keep_f32(const clb_src_tensor *t) {
    if (t->n_dims == 1) return true;
    return strstr(t->name, "_gate_inp") != NULL || strstr(t->name, "exp_probs_b") != NULL || /* routers */
           strstr(t->name, "_exps.bias") != NULL; /* stacked expert biases (gpt-oss) */
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

/* Type of source tensor t. plan / eplan: the mixes' types for dense / expert tensors (source
   order, -1 = not quantized), or NULL. */
static int target_dtype(const clb_source *s, const clb_src_tensor *t, const clb_convert_opts *o, const int *emap,
                        const int *plan, const int *eplan, bool *fallback) {
    *fallback = false;
    const int n_expert = s->hp.n_expert;
    const size_t idx = (size_t)(t - s->tensors);
    if (clb_is_standin_name(t->name)) return t->dtype; /* a source's stand-ins stay bit for bit */
    int want = o->dtype;
    const int *p = plan;
    if (t->expert >= 0) {
        if (o->expert_dtype >= 0) want = o->expert_dtype, p = NULL;
        else if (eplan) p = eplan;
        if (emap && t->expert < n_expert && emap[t->layer * n_expert + t->expert] >= 0)
            want = emap[t->layer * n_expert + t->expert], p = NULL;
    }
    const bool src_quantized = clb_type(t->dtype) && clb_type(t->dtype)->is_quantized;
    if (p) { /* the mix decides, fallbacks included; what it leaves alone stays f32 */
        if (p[idx] < 0) return src_quantized ? t->dtype : CLB_DT_F32;
        uint64_t rb;
        if (!clb_row_bytes(p[idx], t->shape[t->n_dims - 1], &rb)) return CLB_DT_F16;
        return p[idx];
    }
    if (keep_f32(t)) want = src_quantized ? t->dtype : CLB_DT_F32;
    if (want < 0) return t->dtype;
    uint64_t rb;
    if (!clb_row_bytes(want, t->shape[t->n_dims - 1], &rb)) {
        *fallback = true; /* e.g. 48 columns cannot be cut into 32-wide blocks */
        return CLB_DT_F16;
    }
    return want;
}

/* ---- row conversion on the thread pool ---- */

typedef struct conv_job {
    const clb_src_tensor *t;
    int dst_dtype;
    int64_t cols;
    uint64_t src_rb, dst_rb, row0, n_rows;
    uint8_t *out;          /* [n_rows][dst_rb] */
    float **rows;          /* per thread: [cols] */
    uint8_t **stage;       /* per thread: [src_rb] for unaligned sources */
    _Atomic int64_t bad_row; /* first row with a non-finite value, or -1 */
} conv_job;

static void conv_rows(void *ctx, int ith, int nth) {
    conv_job *j = ctx;
    int64_t lo, hi;
    clb_split((int64_t)j->n_rows, ith, nth, 1, &lo, &hi);
    float *row = j->rows[ith];
    for (int64_t r = lo; r < hi; r++) {
        /* safetensors data need not be naturally aligned: copy such rows first */
        const uint8_t *src = j->t->data + (j->row0 + (uint64_t)r) * j->src_rb;
        if ((uintptr_t)src % 4 != 0) {
            memcpy(j->stage[ith], src, (size_t)j->src_rb);
            src = j->stage[ith];
        }
        clb_dequantize_row_ref(j->t->dtype, src, row, j->cols);
        for (int64_t c = 0; c < j->cols; c++)
            if (!isfinite(row[c])) {
                int64_t want = -1, me = (int64_t)j->row0 + r;
                while (!atomic_compare_exchange_weak(&j->bad_row, &want, me) && (want < 0 || want > me)) {}
                break;
            }
        clb_quantize_row_ref(j->dst_dtype, row, j->out + (uint64_t)r * j->dst_rb, j->cols);
    }
}

typedef struct conv_ctx {
    clb_cwriter *w;
    clb_pool *pool;
    int n_threads;
    uint8_t *out_buf;      /* CHUNK_BYTES * n_threads (+ one row) */
    uint64_t out_cap;
    float **rows;
    uint8_t **stage;
    uint64_t done, total;
    const clb_convert_opts *o;
    const clb_source *s;
    uint8_t *chunk_buf, *scratch; /* an encoded source's decoded chunk */
    uint64_t chunk_cap;
    int chunk_id;
    struct clb_codec *dec;
} conv_ctx;

/* An encoded source's expert tensor: its chunk decoded once into c->chunk_buf. */
static int source_bytes(conv_ctx *c, const clb_src_tensor *t, clb_src_tensor *view) {
    *view = *t;
    if (!t->deferred) return COLIBRI_OK;
    const clb_container *ct = clb_source_container(c->s);
    if (c->chunk_id != t->chunk) {
        const clb_chunk *ch = &ct->chunks[t->chunk];
        if (ch->plain > c->chunk_cap) {
            clb_free_aligned(c->chunk_buf);
            c->chunk_cap = 0;
            if (!(c->chunk_buf = clb_alloc_aligned((size_t)ch->plain)))
                return clb_err(COLIBRI_ERR_NOMEM, "out of memory for a chunk of %llu bytes", (unsigned long long)ch->plain);
            c->chunk_cap = ch->plain;
        }
        if (!c->dec && !(c->dec = clb_container_codec(ct))) return COLIBRI_ERR_NOMEM;
        if (!c->scratch && !(c->scratch = clb_alloc_aligned((size_t)clb_container_max_seg(ct) + 64)))
            return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
        c->chunk_id = -1;
        int rc = clb_container_read_chunk(ct, t->chunk, c->chunk_buf, c->scratch, c->dec);
        if (rc) return rc;
        c->chunk_id = t->chunk;
    }
    view->data = c->chunk_buf + t->chunk_off;
    return COLIBRI_OK;
}

static int convert_tensor(conv_ctx *c, int idx, const clb_src_tensor *t0, int dst_dtype) {
    const clb_convert_opts *o = c->o;
    clb_src_tensor view;
    int rc0 = source_bytes(c, t0, &view);
    if (rc0) return rc0;
    const clb_src_tensor *t = &view;
    if (dst_dtype == t->dtype) {
        for (uint64_t off = 0; off < t->size; off += CHUNK_BYTES) {
            uint64_t n = CLB_MIN((uint64_t)CHUNK_BYTES, t->size - off);
            int rc = clb_cwriter_write(c->w, idx, t->data + off, n);
            if (rc) return rc;
            c->done += n;
            if (o->progress) o->progress(c->done, c->total, o->user);
        }
        return COLIBRI_OK;
    }
    if (!clb_dtype_is_weight(t->dtype))
        return clb_err(COLIBRI_ERR_UNSUPPORTED, "tensor '%s': cannot convert from %s", t->name, clb_dtype_name(t->dtype));
    conv_job j = {.t = t, .dst_dtype = dst_dtype, .cols = t->shape[t->n_dims - 1], .rows = c->rows, .stage = c->stage,
                  .out = c->out_buf};
    atomic_init(&j.bad_row, -1);
    clb_row_bytes(t->dtype, j.cols, &j.src_rb);
    clb_row_bytes(dst_dtype, j.cols, &j.dst_rb);
    const uint64_t n_rows = t->size / j.src_rb;
    const uint64_t rows_per_chunk = CLB_MAX((uint64_t)1, c->out_cap / j.dst_rb);
    for (uint64_t r = 0; r < n_rows;) {
        j.row0 = r;
        j.n_rows = CLB_MIN(rows_per_chunk, n_rows - r);
        if (j.n_rows > 1 && c->pool) clb_pool_run(c->pool, conv_rows, &j);
        else conv_rows(&j, 0, 1);
        int64_t bad = atomic_load(&j.bad_row);
        if (bad >= 0)
            return clb_err(COLIBRI_ERR_FORMAT, "tensor '%s': row %lld holds a NaN or infinite value", t->name,
                           (long long)bad);
        int rc = clb_cwriter_write(c->w, idx, c->out_buf, j.n_rows * j.dst_rb);
        if (rc) return rc;
        c->done += j.n_rows * j.src_rb;
        if (o->progress) o->progress(c->done, c->total, o->user);
        r += j.n_rows;
    }
    return COLIBRI_OK;
}

typedef struct order_key {
    int expert_kind, layer, expert, pos; /* expert_kind 0: dense */
} order_key;

static int cmp_order_key(const void *a, const void *b) {
    const order_key *x = a, *y = b;
    if (x->expert_kind != y->expert_kind) return x->expert_kind - y->expert_kind;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    if (x->expert != y->expert) return x->expert < y->expert ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* Sorts the n output tensors (desc, with their source index and dtype) into the writer's
   layout order: dense tensors as they are, then the experts by (layer, expert id). */
static int layout_order(clb_cw_tensor *desc, int *order, int *dt, int n) {
    order_key *k = clb_malloc((size_t)n * sizeof *k);
    clb_cw_tensor *d2 = clb_malloc((size_t)n * sizeof *d2);
    int *o2 = clb_malloc((size_t)n * sizeof *o2), *t2 = clb_malloc((size_t)n * sizeof *t2);
    int rc = COLIBRI_OK;
    if (!k || !d2 || !o2 || !t2) {
        rc = clb_err(COLIBRI_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++)
        k[i] = (order_key){.expert_kind = desc[i].expert >= 0, .layer = desc[i].layer, .expert = desc[i].expert, .pos = i};
    qsort(k, (size_t)n, sizeof *k, cmp_order_key);
    for (int i = 0; i < n; i++) d2[i] = desc[k[i].pos], o2[i] = order[k[i].pos], t2[i] = dt[k[i].pos];
    memcpy(desc, d2, (size_t)n * sizeof *desc);
    memcpy(order, o2, (size_t)n * sizeof *order);
    memcpy(dt, t2, (size_t)n * sizeof *dt);
done:
    clb_free(k);
    clb_free(d2);
    clb_free(o2);
    clb_free(t2);
    return rc;
}

int clb_convert(const char *src_path, const char *dst_path, const clb_convert_opts *o, clb_convert_report *rep) {
    clb_convert_report dummy;
    if (!rep) rep = &dummy;
    memset(rep, 0, sizeof *rep);
    if (o->dtype >= 0 && !clb_dtype_can_quantize(o->dtype))
        return clb_err(COLIBRI_ERR_ARG, "convert cannot produce dtype %s", clb_dtype_name(o->dtype));
    if (o->expert_dtype >= 0 && !clb_dtype_can_quantize(o->expert_dtype))
        return clb_err(COLIBRI_ERR_ARG, "convert cannot produce dtype %s", clb_dtype_name(o->expert_dtype));
    if (o->standin_dtype >= 0 && !clb_dtype_can_quantize(o->standin_dtype))
        return clb_err(COLIBRI_ERR_ARG, "convert cannot produce stand-ins of dtype %s", clb_dtype_name(o->standin_dtype));
    if (o->mix >= 0 && o->dtype >= 0)
        return clb_err(COLIBRI_ERR_ARG, "a mix (%s) and a dtype (%s) cannot both be given", clb_mix_name(o->mix),
                       clb_dtype_name(o->dtype));
    if (o->expert_mix >= 0 && o->expert_dtype >= 0)
        return clb_err(COLIBRI_ERR_ARG, "an expert mix (%s) and an expert dtype (%s) cannot both be given",
                       clb_mix_name(o->expert_mix), clb_dtype_name(o->expert_dtype));
    /* bind the model once: every shape is checked against the config before a byte is
       written, with the loader's messages */
    clb_model *check;
    int rc = clb_model_load(src_path, &check);
    if (rc) return rc;
    clb_model_free(check);
    clb_source s;
    if ((rc = clb_source_open(src_path, &s))) return rc;
    const int n = s.n_tensors;
    /* stand-ins asked for: at most one per routed FFN expert tensor (layout_order places them) */
    const int n_st = o->standin_dtype >= 0 ? 3 * s.hp.n_layer * s.hp.n_expert : 0;
    const size_t nn = (size_t)(n + n_st ? n + n_st : 1);
    clb_cw_tensor *desc = clb_calloc(nn, sizeof *desc);
    int *order = clb_calloc(nn, sizeof *order), *dt = clb_calloc(nn, sizeof *dt);
    char (*st_names)[96] = n_st ? clb_calloc((size_t)n_st, sizeof *st_names) : NULL;
    int *plan = NULL, *eplan = NULL; /* mix types in source order */
    int *emap = NULL; /* [n_layer][n_expert] dtype overrides */
    conv_ctx cc = {.o = o, .chunk_id = -1};
    clb_cwriter *w = NULL;
    cJSON *config = NULL;
    if (!desc || !order || !dt || (n_st && !st_names)) {
        rc = clb_err(COLIBRI_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (o->standin_dtype >= 0 && s.hp.n_expert == 0) {
        rc = clb_err(COLIBRI_ERR_ARG, "%s has no routed experts to give stand-ins", src_path);
        goto done;
    }
    for (int i = 0; n_st && i < n; i++)
        if (clb_is_standin_name(s.tensors[i].name)) {
            rc = clb_err(COLIBRI_ERR_ARG, "%s already has stand-ins ('%s'): convert it without --standin-dtype to keep "
                         "them", src_path, s.tensors[i].name);
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
    int mix_fallbacks = 0;
    for (int m = 0; m < 2; m++) {
        const int mix = m == 0 ? o->mix : o->expert_mix;
        if (mix < 0) continue;
        int **dstp = m == 0 ? &plan : &eplan;
        if (m == 1 && mix == o->mix) {
            eplan = plan;
            continue;
        }
        if (!(*dstp = clb_calloc(nn, sizeof **dstp))) {
            rc = clb_err(COLIBRI_ERR_NOMEM, "out of memory");
            goto done;
        }
        int nf = 0;
        if ((rc = clb_mix_plan(&s, mix, *dstp, &nf))) goto done;
        mix_fallbacks = CLB_MAX(mix_fallbacks, nf);
    }
    /* order: dense tensors, then per (layer, expert): gate, up, down, and the attention
       expert's q and output projections (hp.n_attn_exp) */
    int k = 0;
    int64_t max_cols = 1;
    for (int i = 0; i < n; i++)
        if (s.tensors[i].expert < 0) order[k++] = i;
    static const char *const parts[] = {"ffn_gate",         "ffn_up",         "ffn_down",
                                        "attn_q",           "attn_output",    "ffn_gate_standin",
                                        "ffn_up_standin",   "ffn_down_standin"};
    for (int l = 0; l < s.hp.n_layer; l++)
        for (int e = 0; e < CLB_MAX(s.hp.n_expert, s.hp.n_attn_exp); e++)
            for (int p = 0; p < 8; p++) {
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
    uint64_t total = 0, max_row = 0;
    for (int i = 0; i < n; i++) {
        const clb_src_tensor *t = &s.tensors[order[i]];
        bool fb;
        dt[i] = target_dtype(&s, t, o, emap, plan, eplan, &fb);
        rep->n_fallback += fb;
        desc[i] = (clb_cw_tensor){.name = t->name, .dtype = dt[i], .n_dims = t->n_dims, .layer = t->layer,
                                  .expert = t->expert};
        memcpy(desc[i].shape, t->shape, sizeof desc[i].shape);
        int64_t cols = t->shape[t->n_dims - 1];
        uint64_t rb = 0, srb = 0;
        clb_row_bytes(dt[i], cols, &rb);
        clb_row_bytes(t->dtype, cols, &srb);
        max_row = CLB_MAX(max_row, CLB_MAX(rb, srb));
        max_cols = CLB_MAX(max_cols, cols);
        total += t->size;
        if (fb)
            clb_log(CLB_LOG_WARN, "tensor '%s': %lld columns do not fit %s blocks, stored as f16", t->name,
                    (long long)cols, clb_dtype_name(o->expert_dtype >= 0 && t->expert >= 0 ? o->expert_dtype : o->dtype));
    }
    /* the stand-ins: the routed FFN expert tensors again, in the same order, as standin_dtype */
    int n_out = n;
    for (int i = 0; i < n && n_st; i++) {
        const clb_src_tensor *t = &s.tensors[order[i]];
        /* blk.L.KIND.E.weight: kind, and the ".E.weight" after it */
        const char *l_dot = strchr(t->name, '.'), *k_dot = l_dot ? strchr(l_dot + 1, '.') : NULL;
        const char *e_dot = k_dot ? strchr(k_dot + 1, '.') : NULL;
        if (t->expert < 0 || !e_dot || strncmp(k_dot + 1, "ffn_", 4)) continue; /* dense, or an attention expert */
        const int j = n_out - n;
        if (j == n_st) {
            rc = clb_err(COLIBRI_ERR_FORMAT, "%s: more routed FFN expert tensors than %d layers x %d experts x 3",
                         src_path, s.hp.n_layer, s.hp.n_expert);
            goto done;
        }
        const int64_t cols = t->shape[t->n_dims - 1];
        uint64_t rb = 0;
        if (!clb_row_bytes(o->standin_dtype, cols, &rb)) {
            rc = clb_err(COLIBRI_ERR_ARG, "tensor '%s': %lld columns do not fit %s blocks (choose another stand-in dtype, "
                         "e.g. q4_0)", t->name, (long long)cols, clb_dtype_name(o->standin_dtype));
            goto done;
        }
        snprintf(st_names[j], sizeof st_names[j], "%.*s_standin%s", (int)(e_dot - t->name), t->name, e_dot);
        order[n + j] = order[i];
        dt[n + j] = o->standin_dtype;
        desc[n + j] = desc[i];
        desc[n + j].name = st_names[j];
        desc[n + j].dtype = o->standin_dtype;
        desc[n + j].expert = s.hp.n_expert + t->expert;
        max_row = CLB_MAX(max_row, rb);
        total += t->size;
        n_out++;
    }
    /* the writer lays the experts out by (layer, expert id) and an encoded file is written in
       its layout order: so are the tensors (a layer's stand-ins after its experts) */
    if (n_out > 0 && (rc = layout_order(desc, order, dt, n_out))) goto done;
    rep->n_fallback += mix_fallbacks;
    cc.n_threads = o->n_threads > 0 ? o->n_threads : clb_cpu_count();
    cc.n_threads = CLB_MAX(1, CLB_MIN(cc.n_threads, 256));
    cc.out_cap = (uint64_t)CHUNK_BYTES * (uint64_t)cc.n_threads;
    cc.out_buf = clb_alloc_aligned((size_t)CLB_MAX(cc.out_cap, max_row) + 64);
    cc.rows = clb_calloc((size_t)cc.n_threads, sizeof *cc.rows);
    cc.stage = clb_calloc((size_t)cc.n_threads, sizeof *cc.stage);
    config = clb_hparams_to_json(&s.hp);
    if (!cc.out_buf || !cc.rows || !cc.stage || !config) {
        rc = clb_err(COLIBRI_ERR_NOMEM, "out of memory");
        goto done;
    }
    cc.out_cap = CLB_MAX(cc.out_cap, max_row);
    for (int i = 0; i < cc.n_threads; i++) {
        cc.rows[i] = clb_alloc_aligned((size_t)max_cols * sizeof(float));
        cc.stage[i] = clb_alloc_aligned((size_t)max_row + 64);
        if (!cc.rows[i] || !cc.stage[i]) {
            rc = clb_err(COLIBRI_ERR_NOMEM, "out of memory");
            goto done;
        }
    }
    if (cc.n_threads > 1 && !(cc.pool = clb_pool_create(cc.n_threads))) {
        rc = clb_err(COLIBRI_ERR_NOMEM, "cannot start %d converting threads", cc.n_threads);
        goto done;
    }
    /* the output's encoding: as asked, else as the source's */
    const clb_container *sct = clb_source_container(&s);
    const bool src_enc = sct && sct->encrypted;
    clb_cw_encoding enc = {
        .codec = o->codec, .level = o->level, .no_split = o->no_split, .seg_size = o->seg_size, .n_threads = cc.n_threads};
    if (enc.codec < 0) enc.codec = sct && sct->version == CLB_CONTAINER_VERSION_ENC ? sct->codec : CLB_CODEC_NONE;
    if (o->encrypt == 0 && src_enc) {
        rc = clb_err(COLIBRI_ERR_ARG, "%s is encrypted: say whether %s is to be encrypted too (--encrypt) or written in "
                     "the clear (--decrypt)", src_path, dst_path);
        goto done;
    }
    if (o->encrypt > 0) {
        enc.encrypt = true;
        if ((rc = clb_key_obtain(dst_path, enc.key))) goto done;
    }
    double t0 = clb_now();
    w = clb_cwriter_create_ex(dst_path, config, s.tokenizer, desc, n_out, &enc);
    clb_wipe(enc.key, sizeof enc.key);
    if (!w) {
        rc = COLIBRI_ERR_IO;
        goto done;
    }
    cc.w = w;
    cc.s = &s;
    cc.total = total;
    for (int i = 0; i < n_out; i++) {
        if ((rc = convert_tensor(&cc, i, &s.tensors[order[i]], dt[i]))) {
            clb_err_prefix("%s", dst_path);
            goto done;
        }
    }
    if ((rc = clb_cwriter_finish(w))) goto done;
    rep->seconds = clb_now() - t0;
    rep->bytes_in = total;
    rep->n_tensors = n_out;
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
    clb_pool_free(cc.pool);
    for (int i = 0; cc.rows && i < cc.n_threads; i++) clb_free_aligned(cc.rows[i]);
    for (int i = 0; cc.stage && i < cc.n_threads; i++) clb_free_aligned(cc.stage[i]);
    clb_free(cc.rows);
    clb_free(cc.stage);
    clb_free_aligned(cc.out_buf);
    if (cc.chunk_buf) clb_wipe(cc.chunk_buf, (size_t)cc.chunk_cap);
    clb_free_aligned(cc.chunk_buf);
    clb_free_aligned(cc.scratch);
    clb_codec_free(cc.dec);
    clb_free(desc);
    clb_free(st_names);
    clb_free(order);
    clb_free(dt);
    if (eplan != plan) clb_free(eplan);
    clb_free(plan);
    clb_free(emap);
    clb_source_close(&s);
    return rc;
}
