/* source.c — .colibri and Hugging Face sources (GGUF: source_gguf.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "format/container.h"
#include "format/safetensors.h"
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
        cJSON *root = c->version == CLB_CONTAINER_VERSION_ENC ? c->model : c->meta;
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

/* A [n_expert][rows][cols] HF tensor as per-expert 2-D slices; GATE_UP splits each
   expert's rows in two halves (gate first). No bytes are copied. */
static int split_stacked(clb_source *s, const clb_tensor *t, int kind, int L, int fd, int *n) {
    const int ne = s->hp.n_expert;
    if (t->n_dims != 3 || t->shape[0] != ne || ne <= 0 || (kind == CLB_STACKED_GATE_UP && t->shape[1] % 2))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s' should be [%d experts][rows][cols]%s", s->path, t->name, ne,
                       kind == CLB_STACKED_GATE_UP ? " with an even row count" : "");
    const int parts = kind == CLB_STACKED_GATE_UP ? 2 : 1;
    const int64_t rows = t->shape[1] / parts, cols = t->shape[2];
    const uint64_t part_bytes = t->size / (uint64_t)ne / (uint64_t)parts;
    static const char *const names[3] = {"ffn_gate", "ffn_up", "ffn_down"};
    for (int e = 0; e < ne; e++)
        for (int p = 0; p < parts; p++) {
            clb_src_tensor *o = &s->tensors[(*n)++];
            snprintf(o->name, sizeof o->name, "blk.%d.%s.%d.weight", L, names[kind == CLB_STACKED_DOWN ? 2 : p], e);
            o->dtype = t->dtype;
            o->n_dims = 2;
            o->shape[0] = rows;
            o->shape[1] = cols;
            uint64_t off = ((uint64_t)e * (uint64_t)parts + (uint64_t)p) * part_bytes;
            o->data = t->data + off;
            o->size = part_bytes;
            o->layer = L;
            o->expert = e;
            o->fd = fd;
            o->file_offset = t->offset + off;
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
        cap += clb_arch_hf_stacked(d->tensors[i].name, &L) ? 2 * (size_t)(ne > 0 ? ne : 1) : 1;
    }
    s->tensors = clb_calloc(cap ? cap : 1, sizeof *s->tensors);
    if (!s->tensors) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    int n = 0;
    for (int i = 0; i < d->n_tensors; i++) {
        const clb_tensor *t = &d->tensors[i];
        int L = -1, E = -1;
        int stacked = clb_arch_hf_stacked(t->name, &L);
        if (stacked) {
            if ((rc = split_stacked(s, t, stacked, L, d->maps[t->file_index].fd, &n))) return rc;
            continue;
        }
        clb_src_tensor *o = &s->tensors[n];
        /* the multi-token-prediction layers after the last (num_nextn_predict_layers) */
        int ml = -1, mlen = 0;
        if (s->hp.n_nextn > 0 && sscanf(t->name, "model.layers.%d.%n", &ml, &mlen) == 1 && mlen > 0 &&
            ml >= s->hp.n_layer && ml < s->hp.n_layer + s->hp.n_nextn)
            continue;
        if (clb_arch_hf_ignored(desc, t->name)) continue;
        if (!clb_arch_map_hf_name(desc, t->name, o->name, sizeof o->name, &L, &E)) {
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
    clb_hparams_free(&s->hp);
    clb_free(s->tensors);
    cJSON_Delete(s->tokenizer);
    clb_free(s->path);
    memset(s, 0, sizeof *s);
}
