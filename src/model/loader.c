/* loader.c — binds canonical tensors to layers and checks their shapes against the
 * hyper-parameters ("shapes that disagree with the config" are reported by tensor name). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/platform.h"
#include "kernels/kernels.h"
#include "model/loader.h"

typedef struct clb_owned owned_block;
struct clb_owned {
    owned_block *next;
    void *p;
};

typedef struct binder {
    clb_model *m;
    uint8_t *used; /* [n_tensors] */
    owned_block *owned;
} binder;

static void *own(binder *b, size_t bytes) {
    owned_block *ob = clb_calloc(1, sizeof *ob);
    if (!ob) return NULL;
    ob->p = clb_alloc_aligned(bytes);
    if (!ob->p) {
        clb_free(ob);
        return NULL;
    }
    ob->next = b->owned;
    b->owned = ob;
    return ob->p;
}

static void shape_str(const clb_src_tensor *t, char *buf, size_t cap) {
    size_t k = 0;
    buf[k++] = '[';
    for (int i = 0; i < t->n_dims && k + 24 < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? "," : "", (long long)t->shape[i]);
    snprintf(buf + k, cap - k, "]");
}

enum { OPTIONAL = 0, REQUIRED = 1 };

/* Binds `name` as a rows x cols matrix (rows == 1: a vector, stored 1-D or [1][n]; heads >
   0: also stored 3-D as [heads][rows / heads][cols]). Vectors are always f32 for the
   engine: other float dtypes are converted once here. */
static int bind_heads(binder *b, const char *name, int64_t heads, int64_t rows, int64_t cols, int required,
                      bool vector, clb_weight *w) {
    clb_model *m = b->m;
    memset(w, 0, sizeof *w);
    const clb_src_tensor *t = clb_source_find(&m->src, name);
    if (!t) {
        if (required) return clb_err(COLIBRI_ERR_FORMAT, "%s: missing tensor '%s'", m->src.path, name);
        return COLIBRI_OK;
    }
    b->used[t - m->src.tensors] = 1;
    int64_t trows = t->n_dims == 1 ? 1 : t->shape[0], tcols = t->shape[t->n_dims - 1];
    bool shape_ok = (t->n_dims == 2 && trows == rows && tcols == cols) ||
                    (t->n_dims == 1 && rows == 1 && tcols == cols) ||
                    (t->n_dims == 3 && heads > 0 && trows == heads && trows * t->shape[1] == rows && tcols == cols);
    if (!shape_ok) {
        char s[96], h[64] = "";
        shape_str(t, s, sizeof s);
        if (heads > 0) snprintf(h, sizeof h, "[%lld,%lld,%lld] or ", (long long)heads, (long long)(rows / heads), (long long)cols);
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s' has shape %s but the config implies %s[%lld,%lld]",
                       m->src.path, name, s, h, (long long)rows, (long long)cols);
    }
    if ((!t->data && !((t->deferred || t->streamed) && t->expert >= 0)) || !clb_dtype_is_weight(t->dtype))
        return clb_err(COLIBRI_ERR_UNSUPPORTED, "%s: tensor '%s' has unsupported type %s", m->src.path, name,
                       clb_dtype_name(t->dtype));
    uint64_t rb;
    if (!clb_row_bytes(t->dtype, cols, &rb) || rb * (uint64_t)rows != t->size)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s' holds %llu bytes, %s x [%lld,%lld] needs %llu",
                       m->src.path, name, (unsigned long long)t->size, clb_dtype_name(t->dtype), (long long)rows,
                       (long long)cols, (unsigned long long)(rb * (uint64_t)rows));
    w->rows = rows;
    w->cols = cols;
    w->dtype = t->dtype;
    w->row_bytes = rb;
    w->data = t->data;
    if (vector && t->dtype != CLB_DT_F32) { /* (rows > 1: a stack of vectors, e.g. expert biases) */
        float *f = own(b, (size_t)(rows * cols) * sizeof(float));
        if (!f) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
        for (int64_t r = 0; r < rows; r++) clb_dequantize_row_ref(t->dtype, t->data + rb * (uint64_t)r, f + r * cols, cols);
        w->data = f;
        w->dtype = CLB_DT_F32;
        w->row_bytes = (uint64_t)cols * sizeof(float);
    } else if ((uintptr_t)t->data % 4 != 0) {
        /* e.g. a safetensors header of odd length: copy so loads are naturally aligned */
        void *p = own(b, (size_t)t->size);
        if (!p) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
        memcpy(p, t->data, (size_t)t->size);
        w->data = p;
    }
    return COLIBRI_OK;
}

static int bind(binder *b, const char *name, int64_t rows, int64_t cols, int required, bool vector,
                clb_weight *w) {
    return bind_heads(b, name, 0, rows, cols, required, vector, w);
}

/* Layer l's MLA up-projections: the fused attn_kv_b, the split attn_k_b / attn_v_b (today's
   llama.cpp: 3-D, one matrix per head) or both (ik_llama.cpp's converter, k_b / v_b 2-D). */
static int bind_mla_kv_b(binder *b, int l) {
    clb_model *m = b->m;
    const clb_hparams *hp = m->hp;
    clb_layer *L = &m->layers[l];
    const int64_t H = hp->n_head, r = hp->kv_lora_rank, nope = hp->head_dim - hp->n_rot, hdv = hp->head_dim_v;
    char kvb[64], kb[64], vb[64];
    snprintf(kvb, sizeof kvb, "blk.%d.attn_kv_b.weight", l);
    snprintf(kb, sizeof kb, "blk.%d.attn_k_b.weight", l);
    snprintf(vb, sizeof vb, "blk.%d.attn_v_b.weight", l);
    const bool fused = clb_source_find(&m->src, kvb) != NULL, has_k = clb_source_find(&m->src, kb) != NULL,
               has_v = clb_source_find(&m->src, vb) != NULL;
    if (has_k != has_v)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s' without '%s' (the split MLA layout needs both)",
                       m->src.path, has_k ? kb : vb, has_k ? vb : kb);
    if (!fused && !has_k)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: missing tensor '%s' (or the split '%s' and '%s')", m->src.path, kvb,
                       kb, vb);
    int rc = bind(b, kvb, H * (nope + hdv), r, fused, false, &L->wkv_b);
    if (!rc && has_k) rc = bind_heads(b, kb, H, H * r, nope, REQUIRED, false, &L->wk_b);
    if (!rc && has_k) rc = bind_heads(b, vb, H, H * hdv, r, REQUIRED, false, &L->wv_b);
    return rc;
}

/* Layer l's attention experts (hp->n_attn_exp): the router, and each expert's query and
   output projections in its store slot (sub-layer CLB_SUB_ATTN; gate = q, down = output). */
static int bind_attn_experts(binder *b, int l) {
    clb_model *m = b->m;
    const clb_hparams *hp = m->hp;
    const int64_t E = hp->n_embd, kvp = (int64_t)hp->n_head_kv * hp->head_dim;
    char n[128];
    int rc;
    snprintf(n, sizeof n, "blk.%d.attn_gate_inp.weight", l);
    if ((rc = bind(b, n, hp->n_attn_exp, E, REQUIRED, false, &m->layers[l].attn_router))) return rc;
    for (int e = 0; e < hp->n_attn_exp; e++) {
        clb_expert_w *w = clb_store_slot(m->store, clb_store_key(hp->n_layer, l, CLB_SUB_ATTN), e);
        if (!w) return clb_err(COLIBRI_ERR_INTERNAL, "expert store slot %d/%d (attention) missing", l, e);
        snprintf(n, sizeof n, "blk.%d.attn_q.%d.weight", l, e);
        if ((rc = bind(b, n, kvp, E, REQUIRED, false, &w->gate))) return rc;
        snprintf(n, sizeof n, "blk.%d.attn_output.%d.weight", l, e);
        if ((rc = bind(b, n, E, kvp, REQUIRED, false, &w->down))) return rc;
    }
    return COLIBRI_OK;
}

/* Routed FFN expert e of layer l into its store slot of sub-layer sub: the expert itself
   (blk.L.ffn_gate.E.weight, ...) or its stand-in (blk.L.ffn_gate_standin.E.weight, ...). */
static int bind_ffn_expert(binder *b, int l, int e, int sub) {
    clb_model *m = b->m;
    const clb_hparams *hp = m->hp;
    const int64_t E = hp->n_embd;
    const char *suffix = sub == CLB_SUB_STANDIN ? "_standin" : "";
    char n[128];
    int rc;
    clb_expert_w *w = clb_store_slot(m->store, clb_store_key(hp->n_layer, l, sub), e);
    if (!w) return clb_err(COLIBRI_ERR_INTERNAL, "expert store slot %d/%d%s missing", l, e, suffix);
    snprintf(n, sizeof n, "blk.%d.ffn_gate%s.%d.weight", l, suffix, e);
    if ((rc = bind(b, n, hp->n_ff_exp, E, REQUIRED, false, &w->gate))) return rc;
    snprintf(n, sizeof n, "blk.%d.ffn_up%s.%d.weight", l, suffix, e);
    if ((rc = bind(b, n, hp->n_ff_exp, E, REQUIRED, false, &w->up))) return rc;
    snprintf(n, sizeof n, "blk.%d.ffn_down%s.%d.weight", l, suffix, e);
    return bind(b, n, E, hp->n_ff_exp, REQUIRED, false, &w->down);
}

static int bind_layer(binder *b, int l) {
    clb_model *m = b->m;
    const clb_hparams *hp = m->hp;
    clb_layer *L = &m->layers[l];
    char n[128];
    int rc;
    const int64_t E = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim, kd = (int64_t)hp->n_head_kv * hp->head_dim,
                  vd = (int64_t)hp->n_head_kv * hp->head_dim_v, od = (int64_t)hp->n_head * hp->head_dim_v;
#define B(suffix, rows, cols, req, vec, dst)                         \
    do {                                                             \
        snprintf(n, sizeof n, "blk.%d." suffix, l);                  \
        if ((rc = bind(b, n, rows, cols, req, vec, dst))) return rc; \
    } while (0)
    const int ln = hp->norm_kind == CLB_NORM_LAYER; /* LayerNorm: its biases are required */
    B("attn_norm.weight", 1, E, REQUIRED, true, &L->attn_norm);
    if (ln) B("attn_norm.bias", 1, E, REQUIRED, true, &L->attn_norm_b);
    if (hp->n_attn_exp > 0) { /* mixture of attention heads: per-expert q and output projections */
        if ((rc = bind_attn_experts(b, l))) return rc;
        goto kv;
    }
    B("attn_output.weight", E, od, REQUIRED, false, &L->wo);
    B("attn_sinks.weight", 1, hp->n_head, clb_hparams_attn_layer(hp, l).sinks, true, &L->sinks);
    if (hp->attn_kind == CLB_ATTN_MLA) {
        const int64_t r = hp->kv_lora_rank;
        if (hp->q_lora_rank > 0) {
            B("attn_q_a.weight", hp->q_lora_rank, E, REQUIRED, false, &L->wq_a);
            B("attn_q_a_norm.weight", 1, hp->q_lora_rank, REQUIRED, true, &L->q_a_norm);
            B("attn_q_b.weight", qd, hp->q_lora_rank, REQUIRED, false, &L->wq_b);
        } else {
            B("attn_q.weight", qd, E, REQUIRED, false, &L->wq);
        }
        B("attn_kv_a_mqa.weight", r + hp->n_rot, E, REQUIRED, false, &L->wkv_a);
        B("attn_kv_a_norm.weight", 1, r, REQUIRED, true, &L->kv_a_norm);
        if ((rc = bind_mla_kv_b(b, l))) return rc;
        goto ffn;
    }
    B("attn_q.weight", qd, E, REQUIRED, false, &L->wq);
kv:
    B("attn_k.weight", kd, E, REQUIRED, false, &L->wk);
    B("attn_v.weight", vd, E, REQUIRED, false, &L->wv);
    if (hp->n_attn_exp == 0) B("attn_q.bias", 1, qd, hp->qkv_bias, true, &L->bq);
    B("attn_k.bias", 1, kd, hp->qkv_bias, true, &L->bk);
    B("attn_v.bias", 1, vd, hp->qkv_bias, true, &L->bv);
    B("attn_output.bias", 1, E, hp->o_bias, true, &L->bo);
    if (hp->qk_norm != CLB_QKNORM_NONE) {
        int64_t qn = hp->qk_norm == CLB_QKNORM_HEAD ? hp->head_dim : qd;
        int64_t kn = hp->qk_norm == CLB_QKNORM_HEAD ? hp->head_dim : kd;
        B("attn_q_norm.weight", 1, qn, REQUIRED, true, &L->q_norm);
        B("attn_k_norm.weight", 1, kn, REQUIRED, true, &L->k_norm);
    }
ffn:
    B("ffn_norm.weight", 1, E, REQUIRED, true, &L->ffn_norm);
    if (ln) B("ffn_norm.bias", 1, E, REQUIRED, true, &L->ffn_norm_b);
    L->is_moe = clb_hparams_layer_is_moe(hp, l);
    if (!L->is_moe) {
        B("ffn_gate.weight", hp->n_ff, E, REQUIRED, false, &L->ffn_gate);
        B("ffn_up.weight", hp->n_ff, E, REQUIRED, false, &L->ffn_up);
        B("ffn_down.weight", E, hp->n_ff, REQUIRED, false, &L->ffn_down);
        return COLIBRI_OK;
    }
    B("ffn_gate_inp.weight", hp->n_expert, E, REQUIRED, false, &L->router);
    B("exp_probs_b.bias", 1, hp->n_expert, hp->score_bias, true, &L->router_bias);
    B("ffn_gate_inp.bias", 1, hp->n_expert, hp->moe_bias, true, &L->router_b);
    B("ffn_gate_exps.bias", hp->n_expert, hp->n_ff_exp, hp->moe_bias, true, &L->exp_gate_b);
    B("ffn_up_exps.bias", hp->n_expert, hp->n_ff_exp, hp->moe_bias, true, &L->exp_up_b);
    B("ffn_down_exps.bias", hp->n_expert, E, hp->moe_bias, true, &L->exp_down_b);
    B("ffn_out.bias", 1, E, hp->ffn_out_bias, true, &L->ffn_out_b);
    if (hp->n_ff_shexp > 0) {
        B("ffn_gate_shexp.weight", hp->n_ff_shexp, E, REQUIRED, false, &L->sh_gate);
        B("ffn_up_shexp.weight", hp->n_ff_shexp, E, REQUIRED, false, &L->sh_up);
        B("ffn_down_shexp.weight", E, hp->n_ff_shexp, REQUIRED, false, &L->sh_down);
        if (hp->shexp_gate) B("ffn_gate_inp_shexp.weight", 1, E, REQUIRED, false, &L->sh_gate_inp);
    }
    for (int e = 0; e < hp->n_expert; e++) {
        if ((rc = bind_ffn_expert(b, l, e, CLB_SUB_FFN))) return rc;
        /* the expert's low-bit stand-in (colibri convert --standin-dtype): the same shapes */
        if (m->standins && (rc = bind_ffn_expert(b, l, e, CLB_SUB_STANDIN))) return rc;
    }
#undef B
    return COLIBRI_OK;
}

int clb_model_load(const char *path, clb_model **out) { return clb_model_load_io(path, NULL, false, out); }

int clb_model_load_io(const char *path, const clb_io *io, bool stream, clb_model **out) {
    *out = NULL;
    clb_model *m = clb_calloc(1, sizeof *m);
    if (!m) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    int rc = io ? clb_source_open_io(io, stream, &m->src) : clb_source_open(path, &m->src);
    if (rc) {
        clb_free(m);
        return rc;
    }
    path = m->src.path;
    m->hp = &m->src.hp;
    const clb_hparams *hp = m->hp;
    binder b = {.m = m};
    b.used = clb_calloc((size_t)(m->src.n_tensors ? m->src.n_tensors : 1), 1);
    m->layers = clb_calloc((size_t)hp->n_layer, sizeof *m->layers);
    /* stand-ins: every routed FFN expert has one, or none has (any stand-in tensor says which) */
    for (int i = 0; i < m->src.n_tensors && !m->standins; i++)
        m->standins = hp->n_expert > 0 && clb_is_standin_name(m->src.tensors[i].name);
    m->store = clb_store_create(hp->n_layer, m->standins ? 3 : hp->n_attn_exp > 0 ? 2 : 1,
                                CLB_MAX(hp->n_expert, hp->n_attn_exp));
    if (!b.used || !m->layers || !m->store) {
        rc = clb_err(COLIBRI_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((rc = bind(&b, "token_embd.weight", hp->n_vocab, hp->n_embd, REQUIRED, false, &m->tok_embd))) goto fail;
    if ((rc = bind(&b, "output_norm.weight", 1, hp->n_embd, REQUIRED, true, &m->output_norm))) goto fail;
    if (hp->norm_kind == CLB_NORM_LAYER &&
        (rc = bind(&b, "output_norm.bias", 1, hp->n_embd, REQUIRED, true, &m->output_norm_b)))
        goto fail;
    if (hp->out_bias && (rc = bind(&b, "output.bias", 1, hp->n_vocab, REQUIRED, true, &m->output_b))) goto fail;
    if (hp->tie_embd) {
        m->output = m->tok_embd;
    } else if ((rc = bind(&b, "output.weight", hp->n_vocab, hp->n_embd, REQUIRED, false, &m->output))) {
        goto fail;
    }
    if (hp->rope_scaling == CLB_ROPE_SCALING_FREQS &&
        (rc = bind(&b, "rope_freqs.weight", 1, hp->n_rot / 2, REQUIRED, true, &m->rope_freqs)))
        goto fail;
    for (int l = 0; l < hp->n_layer; l++)
        if ((rc = bind_layer(&b, l))) goto fail;
    for (int i = 0; i < m->src.n_tensors; i++) {
        if (b.used[i]) continue;
        /* a tied model may still ship the duplicate head */
        if (hp->tie_embd && strcmp(m->src.tensors[i].name, "output.weight") == 0) continue;
        rc = clb_err(COLIBRI_ERR_UNSUPPORTED, "%s: tensor '%s' is not used by the %s architecture as configured",
                     path, m->src.tensors[i].name, hp->arch);
        goto fail;
    }
    clb_source_sizes(&m->src, &m->dense_bytes, &m->expert_bytes);
    clb_free(b.used);
    m->owned = b.owned;
    *out = m;
    return COLIBRI_OK;
fail:
    clb_free(b.used);
    m->owned = b.owned;
    clb_model_free(m);
    return rc;
}

void clb_model_free(clb_model *m) {
    if (!m) return;
    owned_block *ob = m->owned;
    while (ob) {
        owned_block *next = ob->next;
        clb_free_aligned(ob->p);
        clb_free(ob);
        ob = next;
    }
    clb_store_free(m->store);
    clb_unmap(m->pack_copy, m->pack_copy_bytes);
    clb_free(m->layers);
    clb_source_close(&m->src);
    clb_free(m);
}

/* ---- packed dense weights (kernels.h) ---- */

/* The weights every forward pass reaches only through the matrix products. */
static int dense_matmul_weights(clb_model *m, clb_weight **out, int cap) {
    int n = 0;
    for (int l = 0; l < m->hp->n_layer; l++) {
        clb_layer *L = &m->layers[l];
        clb_weight *ws[] = {&L->wq,       &L->wk,     &L->wv,      &L->wo,     &L->wq_a,   &L->wq_b,
                            &L->wkv_a,    &L->wkv_b,  &L->ffn_gate, &L->ffn_up, &L->ffn_down, &L->router,
                            &L->sh_gate,  &L->sh_up,  &L->sh_down};
        for (size_t i = 0; i < CLB_ARRAY_LEN(ws); i++)
            if (ws[i]->data && n < cap) out[n++] = ws[i];
    }
    if (m->output.data != m->tok_embd.data && n < cap) out[n++] = &m->output; /* a tied head is also the embedding */
    return n;
}

/* the source tensor whose bytes in the file's mapping p is (not a loader copy), or NULL */
static clb_src_tensor *in_mapping(clb_model *m, const void *p) {
    for (int i = 0; i < m->src.n_tensors; i++)
        if (m->src.tensors[i].data == p) return &m->src.tensors[i];
    return NULL;
}

int clb_model_pack(clb_model *m, const clb_kernels *k, bool interleave) {
    const int cap = 15 * m->hp->n_layer + 1;
    clb_weight **ws = clb_calloc((size_t)cap, sizeof *ws);
    if (!ws) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    const int n = dense_matmul_weights(m, ws, cap);
    uint64_t copy = 0;
    for (int i = 0; i < n; i++) {
        clb_weight *w = ws[i];
        w->packed_rows = clb_kernels_pack_rows(k, w->dtype, w->cols, w->rows);
        if (!w->packed_rows) {
            ws[i] = NULL;
            continue;
        }
        copy += clb_align_up(w->row_bytes * (uint64_t)w->rows, 64);
    }
    /* interleaved copies when they fit with room to spare; else the kernels read the
       row-major bytes (the same arithmetic, so the same logits) */
    int rc = COLIBRI_OK;
    if (interleave && copy && clb_copy_fits(copy)) {
        /* one mapping for all of them, in huge pages where the kernel gives them */
        if (!(m->pack_copy = clb_map_weights(copy))) rc = clb_err(COLIBRI_ERR_NOMEM, "out of memory for packed weights");
        else m->pack_copy_bytes = copy;
        uint64_t off = 0;
        for (int i = 0; i < n && !rc; i++) {
            clb_weight *w = ws[i];
            if (!w) continue;
            const uint64_t bytes = w->row_bytes * (uint64_t)w->rows;
            uint8_t *dst = m->pack_copy + off;
            off += clb_align_up(bytes, 64);
            clb_pack_rows_to(w->dtype, w->cols, w->rows, w->data, dst);
            clb_src_tensor *st = in_mapping(m, w->data);
            if (st) {
                clb_release_pages(w->data, bytes);
                st->copied = true;
            }
            w->data = dst;
            w->interleaved = true;
        }
    }
    clb_free(ws);
    return rc;
}
