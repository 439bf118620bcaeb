/* files_api.c — the model-file calls of colibri.h: convert, verify, inspect. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colibri.h"
#include "core/common.h"
#include "format/codec.h"
#include "format/container.h"
#include "model/convert.h"
#include "model/mix.h"
#include "model/source.h"

typedef struct progress_adapter {
    void (*fn)(double, void *);
    void *user;
} progress_adapter;

static void progress_bytes(uint64_t done, uint64_t total, void *user) {
    progress_adapter *a = user;
    a->fn(total ? (double)done / (double)total : 1.0, a->user);
}

/* A dtype argument: a single type, or a mix with a size suffix ("Q4_K_M"). */
static int parse_dtype(const char *what, const char *name, int *dtype, int *mix) {
    clb_dtype d;
    if (clb_dtype_from_name(name, &d) == 0) {
        if (!clb_dtype_can_quantize(d))
            return clb_err(COLIBRI_ERR_ARG, "%s '%s' cannot be written (it is an activation-only format)", what, name);
        *dtype = d;
        return COLIBRI_OK;
    }
    int m = clb_mix_from_name(name, true);
    if (m == CLB_MIX_NONE)
        return clb_err(COLIBRI_ERR_ARG,
                       "unknown %s '%s' (types: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, "
                       "q6_k, iq4_nl, iq4_xs, mxfp4; mixes: Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M)",
                       what, name);
    *mix = m;
    return COLIBRI_OK;
}

/* "zstd", "zstd:LEVEL", "zlib", "zlib:LEVEL", "none". */
static int parse_compress(const char *s, int *codec, int *level) {
    const char *colon = strchr(s, ':');
    size_t n = colon ? (size_t)(colon - s) : strlen(s);
    int lo = 1, hi = 0;
    if (n == 4 && !strncmp(s, "zstd", 4)) *codec = CLB_CODEC_ZSTD, lo = 1, hi = 19;
    else if (n == 4 && !strncmp(s, "zlib", 4)) *codec = CLB_CODEC_ZLIB, lo = 1, hi = 9;
    else if (n == 4 && !strncmp(s, "none", 4) && !colon) *codec = CLB_CODEC_NONE;
    else return clb_err(COLIBRI_ERR_ARG, "unknown compression '%s' (zstd[:1..19], zlib[:1..9] or none)", s);
    *level = 0;
    if (colon) {
        char *end;
        long v = strtol(colon + 1, &end, 10);
        if (end == colon + 1 || *end || v < lo || v > hi)
            return clb_err(COLIBRI_ERR_ARG, "compression level '%s' is not in %d..%d", colon + 1, lo, hi);
        *level = (int)v;
    }
    return COLIBRI_OK;
}

int colibri_convert(const char *src_path, const char *dst_path, const colibri_convert_params *p,
                    uint64_t *bytes_in, uint64_t *bytes_out) {
    if (!src_path || !dst_path) return clb_err(COLIBRI_ERR_ARG, "convert needs a source and a destination");
    clb_convert_opts o = {
        .dtype = -1, .expert_dtype = -1, .mix = CLB_MIX_NONE, .expert_mix = CLB_MIX_NONE, .codec = -1, .standin_dtype = -1};
    progress_adapter pa = {0};
    int rc;
    if (p) {
        if (p->dtype && (rc = parse_dtype("dtype", p->dtype, &o.dtype, &o.mix))) return rc;
        if (p->expert_dtype && (rc = parse_dtype("expert dtype", p->expert_dtype, &o.expert_dtype, &o.expert_mix)))
            return rc;
        if (p->mix) {
            if (o.mix != CLB_MIX_NONE || o.dtype >= 0)
                return clb_err(COLIBRI_ERR_ARG, "give either a mix (%s) or a dtype (%s), not both", p->mix, p->dtype);
            if ((o.mix = clb_mix_from_name(p->mix, false)) == CLB_MIX_NONE) return COLIBRI_ERR_ARG;
        }
        o.expert_dtype_map = p->expert_dtype_map;
        if (p->standin_dtype) {
            int mix = CLB_MIX_NONE;
            if ((rc = parse_dtype("stand-in dtype", p->standin_dtype, &o.standin_dtype, &mix))) return rc;
            if (mix != CLB_MIX_NONE)
                return clb_err(COLIBRI_ERR_ARG, "stand-in dtype '%s' is a mix: give one type (e.g. q2_k)", p->standin_dtype);
        }
        o.n_threads = p->n_threads;
        if (p->compress && (rc = parse_compress(p->compress, &o.codec, &o.level))) return rc;
        o.no_split = p->byte_split < 0;
        o.encrypt = p->encrypt > 0 ? 1 : p->encrypt < 0 ? -1 : 0;
        if (p->segment_bytes &&
            (p->segment_bytes < (1u << 16) || p->segment_bytes > (1u << 26) || (p->segment_bytes & (p->segment_bytes - 1))))
            return clb_err(COLIBRI_ERR_ARG, "segment size %u is not a power of two from 64 KiB to 64 MiB", p->segment_bytes);
        o.seg_size = p->segment_bytes;
        if (p->progress) {
            pa.fn = p->progress;
            pa.user = p->user;
            o.progress = progress_bytes;
            o.user = &pa;
        }
    }
    clb_convert_report rep;
    rc = clb_convert(src_path, dst_path, &o, &rep);
    if (rc == COLIBRI_OK) {
        if (bytes_in) *bytes_in = rep.bytes_in;
        if (bytes_out) *bytes_out = rep.bytes_out;
    }
    return rc;
}

int colibri_verify(const char *path, uint64_t *bytes_checked) { return colibri_verify_ex(path, bytes_checked, NULL); }

int colibri_verify_ex(const char *path, uint64_t *bytes_checked, int *authenticated) {
    clb_container c;
    int rc = clb_container_open_ex(path, CLB_OPEN_NO_DENSE | CLB_OPEN_KEY_OPTIONAL, &c);
    if (rc) return rc;
    rc = clb_container_verify_ex(&c, bytes_checked, authenticated);
    clb_container_close(&c);
    return rc;
}

/* ---- inspect ---- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) return;
        if (b->p && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t ncap = (b->cap ? b->cap * 2 : 4096) + (size_t)k;
        char *np = clb_realloc(b->p, ncap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = ncap;
    }
}

static const char *kind_name(int k) {
    return k == CLB_SRC_COLIBRI ? ".colibri" : k == CLB_SRC_GGUF ? "GGUF" : "Hugging Face directory";
}

static void describe_header(sbuf *b, const clb_container *c) {
    sb_printf(b,
              "header: format version %u, flags 0x%x, metadata at %llu (%llu bytes, crc32 %08x), data at %llu "
              "(%llu bytes, crc32 %08x), header crc32 %08x\n",
              c->version, c->flags, (unsigned long long)c->meta_offset, (unsigned long long)c->meta_size, c->meta_crc,
              (unsigned long long)c->data_offset, (unsigned long long)c->data_size, c->data_crc, c->header_crc);
    if (c->version != CLB_CONTAINER_VERSION_ENC) return;
    uint64_t plain = 0, stored = 0;
    for (int i = 0; i < c->n_chunks; i++) plain += c->chunks[i].plain, stored += c->chunks[i].stored;
    sb_printf(b, "encoding: compression %s, encryption %s, %d chunks in segments of %u bytes, %.2f MiB stored for %.2f "
                 "MiB (ratio %.3f)\n",
              clb_codec_name(c->codec), c->encrypted ? "aes-256-gcm (config, tokenizer, tensor table and data)" : "none",
              c->n_chunks, c->seg_size, stored / 1048576.0, plain / 1048576.0, stored ? (double)plain / (double)stored : 0.0);
}

char *colibri_inspect(const char *path) {
    clb_source s;
    if (clb_source_open(path, &s)) {
        /* an encrypted file without its key: what is clear */
        clb_container c;
        char err[512];
        snprintf(err, sizeof err, "%s", colibri_last_error());
        int rc = clb_container_open_ex(path, CLB_OPEN_NO_DENSE | CLB_OPEN_KEY_OPTIONAL, &c);
        if (rc || !c.locked) { /* not that case: the source's error stands */
            if (!rc) clb_container_close(&c);
            clb_err(COLIBRI_ERR_FORMAT, "%s", err);
            return NULL;
        }
        sbuf b = {0};
        sb_printf(&b, "file: %s (.colibri)\n", path);
        describe_header(&b, &c);
        sb_printf(&b, "encrypted: give its key (--key-file, COLIBRI_KEY_FILE) to see the configuration and tensors\n");
        clb_container_close(&c);
        return b.p;
    }
    sbuf b = {0};
    sb_printf(&b, "file: %s (%s)\n", path, kind_name(s.kind));
    if (s.kind == CLB_SRC_COLIBRI) {
        const clb_container *c = s.impl;
        describe_header(&b, c);
    }
    cJSON *cfg = clb_hparams_to_json(&s.hp);
    char *cfg_s = cfg ? cJSON_PrintUnformatted(cfg) : NULL;
    sb_printf(&b, "config: %s\n", cfg_s ? cfg_s : "?");
    cJSON_free(cfg_s);
    cJSON_Delete(cfg);
    sb_printf(&b, "tokenizer: %s\n", s.tokenizer ? "present" : "none");
    /* tensor table summary by dtype */
    uint64_t by_type_n[CLB_DT_COUNT] = {0}, by_type_b[CLB_DT_COUNT] = {0};
    for (int i = 0; i < s.n_tensors; i++) {
        int d = s.tensors[i].dtype;
        if (d >= 0 && d < CLB_DT_COUNT) {
            by_type_n[d]++;
            by_type_b[d] += s.tensors[i].size;
        }
    }
    uint64_t dense, experts;
    clb_source_sizes(&s, &dense, &experts);
    sb_printf(&b, "tensors: %d (dense %.2f MiB, routed experts %.2f MiB)\n", s.n_tensors, dense / 1048576.0,
              experts / 1048576.0);
    for (int d = 0; d < CLB_DT_COUNT; d++)
        if (by_type_n[d])
            sb_printf(&b, "  %-6s %5llu tensors %10.2f MiB\n", clb_dtype_name(d), (unsigned long long)by_type_n[d],
                      by_type_b[d] / 1048576.0);
    if (s.hp.n_expert > 0) {
        int moe_layers = 0;
        for (int l = 0; l < s.hp.n_layer; l++) moe_layers += clb_hparams_layer_is_moe(&s.hp, l);
        uint64_t per = moe_layers ? experts / ((uint64_t)moe_layers * (uint64_t)s.hp.n_expert) : 0;
        sb_printf(&b, "experts: %d per layer, %d per token, %d MoE layers, %llu bytes per expert (%.2f MiB)\n",
                  s.hp.n_expert, s.hp.n_expert_used, moe_layers, (unsigned long long)per, per / 1048576.0);
    }
    for (int i = 0; i < s.n_tensors; i++) {
        const clb_src_tensor *t = &s.tensors[i];
        sb_printf(&b, "  %-36s %-6s [", t->name, clb_dtype_name(t->dtype));
        for (int k = 0; k < t->n_dims; k++) sb_printf(&b, "%s%lld", k ? "," : "", (long long)t->shape[k]);
        sb_printf(&b, "] %llu bytes", (unsigned long long)t->size);
        if (t->expert >= 0) sb_printf(&b, " layer %d expert %d", t->layer, t->expert);
        sb_printf(&b, "\n");
    }
    clb_source_close(&s);
    if (b.oom) {
        clb_free(b.p);
        clb_err(COLIBRI_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return b.p;
}

void colibri_string_free(char *s) { clb_free(s); }
