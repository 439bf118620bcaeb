/* source.c — .colibri and Hugging Face sources (GGUF: source_gguf.c). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "format/container.h"
#include "format/safetensors.h"
#include "kernels/kernels.h"
#include "model/source.h"
#include "model/source_impl.h"

static int cmp_tensor(const void *a, const void *b) {
    return strcmp(((const clb_src_tensor *)a)->name, ((const clb_src_tensor *)b)->name);
}

int clb_source_finish_table(clb_source *s) {
    qsort(s->tensors, (size_t)s->n_tensors, sizeof *s->tensors, cmp_tensor);
    for (int i = 1; i < s->n_tensors; i++)
        if (strcmp(s->tensors[i - 1].name, s->tensors[i].name) == 0)
            return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s' appears twice", s->path, s->tensors[i].name);
    return COLIBRI_OK;
}

const clb_src_tensor *clb_source_find(const clb_source *s, const char *name) {
    clb_src_tensor key;
    snprintf(key.name, sizeof key.name, "%s", name);
    return bsearch(&key, s->tensors, (size_t)s->n_tensors, sizeof *s->tensors, cmp_tensor);
}

const clb_container *clb_source_container(const clb_source *s) {
    return s && s->kind == CLB_SRC_COLIBRI ? s->impl : NULL;
}

void clb_source_sizes(const clb_source *s, uint64_t *dense_bytes, uint64_t *expert_bytes) {
    uint64_t d = 0, e = 0;
    for (int i = 0; i < s->n_tensors; i++) {
        if (s->tensors[i].expert >= 0) e += s->tensors[i].size;
        else d += s->tensors[i].size;
    }
    if (dense_bytes) *dense_bytes = d;
    if (expert_bytes) *expert_bytes = e;
}

/* ---- .colibri ---- */

static int open_colibri(const char *path, clb_source *s) {
    clb_container *c = clb_calloc(1, sizeof *c);
    if (!c) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    int rc = s->has_io ? clb_container_open_io(&s->io, s->io_stream, c) : clb_container_open(path, c);
    if (rc) {
        clb_free(c);
        return rc;
    }
    s->impl = c;
    if ((rc = clb_hparams_from_json(c->config, &s->hp))) {
        clb_err_prefix("%s", path);
        return rc;
    }
    if (c->tokenizer) { /* moved, not copied: a vocabulary's nodes are most of the metadata */
        cJSON *root = c->model ? c->model : c->meta; /* an encrypted file's sealed model JSON, else the clear one */
        s->tokenizer = cJSON_DetachItemViaPointer(root, (cJSON *)c->tokenizer);
        c->tokenizer = NULL;
    }
    s->tensors = clb_calloc((size_t)(c->n_tensors ? c->n_tensors : 1), sizeof *s->tensors);
    if (!s->tensors) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    for (int i = 0; i < c->n_tensors; i++) {
        const clb_tensor *t = &c->tensors[i];
        clb_src_tensor *o = &s->tensors[i];
        if (strlen(t->name) >= sizeof o->name)
            return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor name '%.40s...' too long", path, t->name);
        snprintf(o->name, sizeof o->name, "%s", t->name);
        o->dtype = t->dtype;
        o->n_dims = t->n_dims;
        memcpy(o->shape, t->shape, sizeof o->shape);
        o->data = t->data;
        o->size = t->size;
        o->layer = t->layer;
        o->expert = t->expert;
        o->fd = c->map.fd;
        o->io = c->map.io;
        o->streamed = c->map.io && !t->data && t->expert >= 0 && c->version != CLB_CONTAINER_VERSION_ENC;
        o->file_offset = t->offset;
        if (c->version == CLB_CONTAINER_VERSION_ENC) {
            o->deferred = t->data == NULL;
            o->chunk = t->chunk;
            o->chunk_off = t->chunk_off;
            o->file_offset = c->chunks[t->chunk].offset; /* where its stored chunk starts */
        }
    }
    s->n_tensors = c->n_tensors;
    return clb_source_finish_table(s);
}

/* ---- Hugging Face directory ---- */

static cJSON *parse_or_null(const char *text) { return text ? cJSON_Parse(text) : NULL; }

/* A [n_expert][rows][cols] HF tensor as per-expert 2-D slices (GATE_UP splits each
   expert's rows in two halves, gate first; ATTN_Q / ATTN_OUT hold the attention experts), or
   JetMoE's kv_proj [2 * rows][cols] as attn_k and attn_v (KV: no expert). No bytes are copied. */
static int split_stacked(clb_source *s, const clb_tensor *t, int kind, int L, int fd, int *n) {
    const bool kv = kind == CLB_STACKED_KV, attn = kind == CLB_STACKED_ATTN_Q || kind == CLB_STACKED_ATTN_OUT;
    const int ne = kv ? 1 : attn ? s->hp.n_attn_exp : s->hp.n_expert, parts = kind == CLB_STACKED_GATE_UP || kv ? 2 : 1;
    const int dims = kv ? 2 : 3;
    const int64_t lead = kv ? 1 : t->shape[0], r0 = t->shape[dims - 2];
    if (t->n_dims != dims || lead != ne || ne <= 0 || r0 % parts)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s' should be %s%s", s->path, t->name,
                       kv ? "[2 x K/V rows][cols]" : "[experts][rows][cols]", parts == 2 ? " with an even row count" : "");
    const int64_t rows = r0 / parts, cols = t->shape[dims - 1];
    const uint64_t part_bytes = t->size / (uint64_t)ne / (uint64_t)parts;
    const char *names[2];
    switch (kind) {
    case CLB_STACKED_GATE_UP: names[0] = "ffn_gate", names[1] = "ffn_up"; break;
    case CLB_STACKED_KV: names[0] = "attn_k", names[1] = "attn_v"; break;
    case CLB_STACKED_ATTN_Q: names[0] = "attn_q"; break;
    case CLB_STACKED_ATTN_OUT: names[0] = "attn_output"; break;
    default: names[0] = "ffn_down"; break;
    }
    for (int e = 0; e < ne; e++)
        for (int p = 0; p < parts; p++) {
            clb_src_tensor *o = &s->tensors[(*n)++];
            if (kv) snprintf(o->name, sizeof o->name, "blk.%d.%s.weight", L, names[p]);
            else snprintf(o->name, sizeof o->name, "blk.%d.%s.%d.weight", L, names[p], e);
            o->dtype = t->dtype;
            o->n_dims = 2;
            o->shape[0] = rows;
            o->shape[1] = cols;
            uint64_t off = ((uint64_t)e * (uint64_t)parts + (uint64_t)p) * part_bytes;
            o->data = t->data + off;
            o->size = part_bytes;
            o->layer = L;
            o->expert = kv ? -1 : e;
            o->fd = fd;
            o->file_offset = t->offset + off;
        }
    return COLIBRI_OK;
}

/* ---- gpt-oss's stacked experts (clb_arch_hf_stacked kinds GU_* / DOWN_* / SCALES) ----
 * (also Llama-4's: GU_HALVES, gate and up as the two halves of out, and DOWN_COLS)
 * Published as x @ W ([in][out], gate and up interleaved along out) in bf16, or as MXFP4
 * *_blocks / *_scales in [out][in] order. Each becomes per-expert [out][in] tensors in
 * source-owned buffers: float ones transposed element by element, MXFP4 ones repacked
 * block by block into the kernels' MXFP4 layout (no float detour; the values are the same). */

struct clb_src_owned {
    struct clb_src_owned *next;
    void *p;
};

static uint8_t *src_own(clb_source *s, uint64_t bytes) {
    struct clb_src_owned *o = clb_calloc(1, sizeof *o);
    if (!o || bytes > SIZE_MAX) {
        clb_free(o);
        return NULL;
    }
    if (!(o->p = clb_alloc_aligned((size_t)(bytes ? bytes : 1)))) {
        clb_free(o);
        return NULL;
    }
    o->next = s->owned;
    s->owned = o;
    return o->p;
}

static void add_owned(clb_source *s, int *n, const char *name, int dtype, int64_t rows, int64_t cols,
                      const uint8_t *data, uint64_t size, int L, int E) {
    clb_src_tensor *o = &s->tensors[(*n)++];
    snprintf(o->name, sizeof o->name, "%s", name);
    o->dtype = dtype;
    o->n_dims = 2;
    o->shape[0] = rows;
    o->shape[1] = cols;
    o->data = data;
    o->size = size;
    o->layer = L;
    o->expert = E;
    o->fd = -1; /* only in memory: the bounded expert pool cannot read these from a file */
}

static int float_size(int dtype) {
    return dtype == CLB_DT_F32 ? 4 : (dtype == CLB_DT_BF16 || dtype == CLB_DT_F16) ? 2 : 0;
}

/* One HF MXFP4 row (g blocks: 16 bytes of nibbles, element 2j in the low nibble of byte j
   and 2j + 1 in its high one, and one E8M0 exponent each) as g kernel blocks (exponent,
   then element j in the low nibble of qs[j] and j + 16 in its high one). */
static void repack_mxfp4_row(const uint8_t *blk, const uint8_t *scl, int64_t g, uint8_t *out) {
    for (int64_t b = 0; b < g; b++, blk += 16, out += 17) {
        uint8_t nib[32];
        for (int j = 0; j < 16; j++) {
            nib[2 * j] = blk[j] & 0xF;
            nib[2 * j + 1] = blk[j] >> 4;
        }
        out[0] = scl[b];
        for (int j = 0; j < 16; j++) out[1 + j] = (uint8_t)(nib[j] | nib[j + 16] << 4);
    }
}

static int split_gpt_oss(clb_source *s, const clb_hf_dir *d, const clb_tensor *t, int kind, int L, int *n) {
    const int ne = s->hp.n_expert;
    char name[96];
    if (kind == CLB_STACKED_SCALES) return COLIBRI_OK; /* read with its blocks */
    if (ne <= 0 || t->n_dims < 2 || t->shape[0] != ne)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s' should hold %d experts", s->path, t->name, ne);
    if (kind == CLB_STACKED_GU_BIAS) { /* [E][2 ff] -> gate [E][ff], up [E][ff] */
        const int es = float_size(t->dtype);
        if (t->n_dims != 2 || t->shape[1] % 2 || !es)
            return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s' should be a float [%d][2 * ff]", s->path, t->name, ne);
        const int64_t ff = t->shape[1] / 2;
        const uint64_t half = (uint64_t)ne * (uint64_t)ff * (uint64_t)es;
        uint8_t *buf = src_own(s, 2 * half);
        if (!buf) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
        for (int64_t i = 0; i < (int64_t)ne * ff; i++)
            for (int p = 0; p < 2; p++) memcpy(buf + p * half + (uint64_t)i * es, t->data + (uint64_t)(2 * i + p) * es, (size_t)es);
        snprintf(name, sizeof name, "blk.%d.ffn_gate_exps.bias", L);
        add_owned(s, n, name, t->dtype, ne, ff, buf, half, L, -1);
        snprintf(name, sizeof name, "blk.%d.ffn_up_exps.bias", L);
        add_owned(s, n, name, t->dtype, ne, ff, buf + half, half, L, -1);
        return COLIBRI_OK;
    }
    const bool gu = kind == CLB_STACKED_GU_COLS || kind == CLB_STACKED_GU_MXFP4 || kind == CLB_STACKED_GU_HALVES;
    const bool halves = kind == CLB_STACKED_GU_HALVES; /* gate = [..., :ff], up = [..., ff:] (Llama-4) */
    int64_t rows, cols; /* of the per-expert [out][in] tensor as stored (gate and up interleaved) */
    const clb_tensor *sc = NULL;
    int dtype, es = 0;
    if (kind == CLB_STACKED_GU_MXFP4 || kind == CLB_STACKED_DOWN_MXFP4) {
        char sn[160];
        const size_t len = strlen(t->name);
        snprintf(sn, sizeof sn, "%.*s_scales", (int)(len - strlen("_blocks")), t->name);
        sc = clb_hf_find(d, sn);
        if (t->dtype != CLB_ST_U8 || t->n_dims != 4 || t->shape[3] != 16)
            return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s' should be U8 [%d][rows][cols / 32][16]", s->path, t->name, ne);
        if (!sc) return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s' has no '%s'", s->path, t->name, sn);
        if (sc->dtype != CLB_ST_U8 || sc->n_dims != 3 || sc->shape[0] != ne || sc->shape[1] != t->shape[1] ||
            sc->shape[2] != t->shape[2])
            return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s' should be U8 [%d][%lld][%lld]", s->path, sn, ne,
                           (long long)t->shape[1], (long long)t->shape[2]);
        rows = t->shape[1];
        cols = t->shape[2] * 32;
        dtype = CLB_DT_MXFP4;
    } else {
        es = float_size(t->dtype);
        if (t->n_dims != 3 || !es)
            return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s' should be a float [%d][in][out]", s->path, t->name, ne);
        rows = t->shape[2];
        cols = t->shape[1];
        dtype = t->dtype;
    }
    if (gu && rows % 2)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s' holds gate and up: needs an even width", s->path, t->name);
    uint64_t rb;
    if (!clb_row_bytes(dtype, cols, &rb)) return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s': bad width", s->path, t->name);
    const int parts = gu ? 2 : 1;
    const int64_t prow = rows / parts; /* rows of each output tensor */
    const uint64_t pbytes = rb * (uint64_t)prow;
    uint8_t *buf = src_own(s, pbytes * (uint64_t)parts * (uint64_t)ne);
    if (!buf) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    for (int e = 0; e < ne; e++)
        for (int p = 0; p < parts; p++) {
            uint8_t *o = buf + ((uint64_t)e * (uint64_t)parts + (uint64_t)p) * pbytes;
            for (int64_t r = 0; r < prow; r++) {
                /* source row: gate even, up odd (interleaved), or the two halves */
                const int64_t sr = halves ? p * prow + r : r * parts + p;
                if (dtype == CLB_DT_MXFP4) {
                    const int64_t g = cols / 32;
                    repack_mxfp4_row(t->data + ((uint64_t)e * (uint64_t)rows + (uint64_t)sr) * (uint64_t)g * 16,
                                     sc->data + ((uint64_t)e * (uint64_t)rows + (uint64_t)sr) * (uint64_t)g, g,
                                     o + rb * (uint64_t)r);
                } else { /* W[e][c][sr] for every c */
                    for (int64_t c = 0; c < cols; c++)
                        memcpy(o + (rb * (uint64_t)r) + (uint64_t)c * es,
                               t->data + (((uint64_t)e * (uint64_t)cols + (uint64_t)c) * (uint64_t)rows + (uint64_t)sr) * es,
                               (size_t)es);
                }
            }
            static const char *const kinds[3] = {"ffn_gate", "ffn_up", "ffn_down"};
            snprintf(name, sizeof name, "blk.%d.%s.%d.weight", L, kinds[gu ? p : 2], e);
            add_owned(s, n, name, dtype, prow, cols, o, pbytes, L, e);
        }
    return COLIBRI_OK;
}

static int open_hf(const char *path, clb_source *s) {
    clb_hf_dir *d = clb_calloc(1, sizeof *d);
    if (!d) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    int rc = clb_hf_open(path, d);
    if (rc) {
        clb_free(d);
        return rc;
    }
    s->impl = d;
    const clb_arch_desc *desc = clb_arch_from_hf(d->config);
    if (!desc) {
        clb_err_prefix("%s", path);
        return COLIBRI_ERR_UNSUPPORTED;
    }
    if ((rc = clb_hparams_from_hf(desc, d->config, &s->hp))) {
        clb_err_prefix("%s", path);
        return rc;
    }
    if (d->tokenizer_json) {
        cJSON *tj = parse_or_null(d->tokenizer_json);
        if (!tj) return clb_err(COLIBRI_ERR_FORMAT, "%s: tokenizer.json is not valid JSON", path);
        cJSON *hf = cJSON_CreateObject();
        cJSON_AddItemToObject(hf, "tokenizer_json", tj);
        cJSON *tc = parse_or_null(d->tokenizer_config);
        if (d->tokenizer_config && !tc) {
            cJSON_Delete(hf);
            return clb_err(COLIBRI_ERR_FORMAT, "%s: tokenizer_config.json is not valid JSON", path);
        }
        cJSON_AddItemToObject(hf, "tokenizer_config", tc ? tc : cJSON_CreateNull());
        s->tokenizer = cJSON_CreateObject();
        cJSON_AddItemToObject(s->tokenizer, "hf", hf);
    }
    /* stacked expert tensors (GraniteMoE) become per-expert slices: up to 2 * n_expert */
    const int ne = s->hp.n_expert;
    size_t cap = 0;
    for (int i = 0; i < d->n_tensors; i++) {
        int L;
        cap += clb_arch_hf_stacked(clb_arch_hf_text_name(desc, d->tensors[i].name), &L)
                   ? 2 * (size_t)CLB_MAX(CLB_MAX(ne, s->hp.n_attn_exp), 1)
                   : 1;
    }
    s->tensors = clb_calloc(cap ? cap : 1, sizeof *s->tensors);
    if (!s->tensors) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    int n = 0;
    for (int i = 0; i < d->n_tensors; i++) {
        const clb_tensor *t = &d->tensors[i];
        const char *name = clb_arch_hf_text_name(desc, t->name); /* the text model's name */
        int L = -1, E = -1;
        int stacked = clb_arch_hf_stacked(name, &L);
        if (stacked >= CLB_STACKED_GU_COLS && stacked <= CLB_STACKED_GU_HALVES) {
            if ((rc = split_gpt_oss(s, d, t, stacked, L, &n))) return rc;
            continue;
        }
        if (stacked) {
            if ((rc = split_stacked(s, t, stacked, L, d->maps[t->file_index].fd, &n))) return rc;
            continue;
        }
        clb_src_tensor *o = &s->tensors[n];
        /* the multi-token-prediction layers after the last (num_nextn_predict_layers) */
        static const char layers[] = "model.layers.";
        if (s->hp.n_nextn > 0 && !strncmp(name, layers, sizeof layers - 1) && name[sizeof layers - 1] >= '0' &&
            name[sizeof layers - 1] <= '9') { /* no sscanf: it would bring 35 KB of glibc into the minimal build */
            char *end;
            const long ml = strtol(name + sizeof layers - 1, &end, 10);
            if (*end == '.' && ml >= s->hp.n_layer && ml < (long)s->hp.n_layer + s->hp.n_nextn) continue;
        }
        if (clb_arch_hf_ignored(desc, name)) continue;
        if (!clb_arch_map_hf_name(desc, name, o->name, sizeof o->name, &L, &E)) {
            /* buffers such as rotary_emb.inv_freq carry no weights */
            if (strstr(t->name, "rotary_emb.inv_freq")) continue;
            return clb_err(COLIBRI_ERR_UNSUPPORTED, "%s: tensor '%s' is not used by architecture %s", path,
                           t->name, clb_arch_name(desc));
        }
        o->dtype = t->dtype;
        o->n_dims = t->n_dims;
        memcpy(o->shape, t->shape, sizeof o->shape);
        o->data = t->data;
        o->size = t->size;
        o->layer = L;
        o->expert = E;
        o->fd = d->maps[t->file_index].fd;
        o->file_offset = t->offset;
        n++;
    }
    s->n_tensors = n;
    return clb_source_finish_table(s);
}

int clb_source_open(const char *path, clb_source *out) {
    memset(out, 0, sizeof *out);
    if (!path || !*path) return clb_err(COLIBRI_ERR_ARG, "no model path given");
    out->path = clb_strdup(path);
    int rc;
    if (clb_is_dir(path)) {
        out->kind = CLB_SRC_HF;
        rc = open_hf(path, out);
    } else {
        clb_map m;
        if ((rc = clb_map_open(path, &m))) {
            clb_source_close(out);
            return rc;
        }
        char magic[8] = {0};
        if (m.size >= 8) memcpy(magic, m.data, 8);
        clb_map_close(&m);
        if (memcmp(magic, "COLIBRI", 8) == 0) {
            out->kind = CLB_SRC_COLIBRI;
            rc = open_colibri(path, out);
        } else if (memcmp(magic, "GGUF", 4) == 0) {
            out->kind = CLB_SRC_GGUF;
            rc = clb_source_open_gguf(path, out);
        } else {
            rc = clb_err(COLIBRI_ERR_FORMAT,
                         "%s: not a model file (expected a .colibri or .gguf file or a Hugging Face "
                         "directory; the first bytes are neither COLIBRI nor GGUF)",
                         path);
        }
    }
    if (rc) clb_source_close(out);
    return rc;
}

int clb_source_open_io(const clb_io *io, bool stream, clb_source *out) {
    memset(out, 0, sizeof *out);
    if (!io || !io->read) return clb_err(COLIBRI_ERR_ARG, "a source needs a read callback");
    out->io = *io;
    out->has_io = true;
    out->io_stream = stream && !io->map;
    int rc = COLIBRI_OK;
    if (!(out->path = clb_strdup(io->name))) rc = clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    char magic[8] = {0};
    if (!rc && io->size < 8)
        rc = clb_err(COLIBRI_ERR_FORMAT, "%s: %llu bytes: too short for a model file", io->name,
                     (unsigned long long)io->size);
    if (!rc) rc = clb_io_read(&out->io, 0, 8, magic);
    if (rc) {
    } else if (memcmp(magic, "COLIBRI", 8) == 0) {
        out->kind = CLB_SRC_COLIBRI;
        rc = open_colibri(out->path, out);
    } else if (memcmp(magic, "GGUF", 4) == 0) {
        out->kind = CLB_SRC_GGUF;
        rc = out->io_stream ? clb_err(COLIBRI_ERR_UNSUPPORTED,
                                      "%s: a GGUF file is read whole through a source callback: the bounded mode "
                                      "(experts read on demand) needs a .colibri file (colibri convert) or a map callback",
                                      io->name)
                            : clb_source_open_gguf(out->path, out);
    } else {
        rc = clb_err(COLIBRI_ERR_FORMAT, "%s: not a model file (the first bytes are neither COLIBRI nor GGUF)",
                     io->name);
    }
    if (rc) clb_source_close(out);
    return rc;
}

void clb_source_close(clb_source *s) {
    if (!s) return;
    if (s->impl) {
        if (s->kind == CLB_SRC_COLIBRI) clb_container_close(s->impl);
        else if (s->kind == CLB_SRC_HF) clb_hf_close(s->impl);
        else clb_source_close_gguf(s);
        clb_free(s->impl);
    }
    while (s->owned) {
        struct clb_src_owned *next = s->owned->next;
        clb_free_aligned(s->owned->p);
        clb_free(s->owned);
        s->owned = next;
    }
    clb_hparams_free(&s->hp);
    clb_free(s->tensors);
    cJSON_Delete(s->tokenizer);
    clb_free(s->path);
    memset(s, 0, sizeof *s);
}
