/* kv_cache.c — layout, writes and bookkeeping of the KV cache (kv_cache.h). */
#include <string.h>

#include "core/common.h"
#include "kernels/kernels.h"
#include "nn/kv_cache.h"

bool clb_kv_type_ok(int t) {
    return t == CLB_DT_F32 || t == CLB_DT_F16 || t == CLB_DT_BF16 || t == CLB_DT_Q8_0 || t == CLB_DT_Q4_0;
}

static int row_bytes(int type, int64_t n, const char *what, uint64_t *out) {
    if (!clb_row_bytes(type, n, out))
        return clb_err(COLIBRI_ERR_UNSUPPORTED, "cache type %s needs rows of a multiple of %d values; this model's %s rows have %lld",
                       clb_dtype_name(type), clb_type(type) ? clb_type(type)->block_size : 1, what, (long long)n);
    return COLIBRI_OK;
}

int clb_kv_init(clb_kv_cache *c, const clb_hparams *hp, const clb_kv_params *p) {
    memset(c, 0, sizeof *c);
    if (!clb_kv_type_ok(p->k_type) || !clb_kv_type_ok(p->v_type))
        return clb_err(COLIBRI_ERR_UNSUPPORTED, "cache type %s is not one of f32, f16, bf16, q8_0, q4_0",
                       clb_dtype_name(clb_kv_type_ok(p->k_type) ? p->v_type : p->k_type));
    c->n_seq = p->n_seq;
    c->n_layer = hp->n_layer;
    c->max_seq = p->max_seq;
    c->k_type = p->k_type;
    c->v_type = p->v_type;
    c->layers = clb_calloc((size_t)hp->n_layer, sizeof *c->layers);
    c->lo = clb_calloc((size_t)p->n_seq * (size_t)hp->n_layer, sizeof *c->lo);
    if (!c->layers || !c->lo) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    uint64_t off = 0;
    for (int l = 0; l < hp->n_layer; l++) {
        clb_kv_layer *L = &c->layers[l];
        const clb_attn_layer a = clb_hparams_attn_layer(hp, l);
        const bool latent = hp->attn_kind == CLB_ATTN_MLA && p->mla_latent;
        L->window = a.window;
        L->chunk = a.chunk;
        L->n_head = latent ? 1 : hp->n_head_kv;
        L->k_dim = latent ? hp->kv_lora_rank + hp->n_rot : hp->head_dim;
        L->v_dim = latent ? hp->kv_lora_rank : hp->head_dim_v;
        L->v_in_k = latent;
        int rc;
        if ((rc = row_bytes(p->k_type, L->k_dim, latent ? "latent" : "key", &L->k_row))) return rc;
        if (!latent && (rc = row_bytes(p->v_type, L->v_dim, "value", &L->v_row))) return rc;
        if (latent && (rc = row_bytes(p->k_type, L->v_dim, "latent", &L->v_row))) return rc;
        const int64_t reach = a.window ? a.window : a.chunk;
        const int64_t ring = (int64_t)clb_align_up((uint64_t)(reach + p->n_batch - 1), CLB_KV_TILE);
        L->ring = reach > 0 && ring < p->max_seq;
        L->slots = L->ring ? (int32_t)ring : p->max_seq;
        c->any_ring |= L->ring;
        uint64_t kb, vb;
        if (!clb_mul_u64((uint64_t)L->n_head * (uint64_t)L->slots, L->k_row, &kb) ||
            !clb_mul_u64((uint64_t)L->n_head * (uint64_t)L->slots, latent ? 0 : L->v_row, &vb) ||
            !clb_add_u64(off, clb_align_up(kb, 64), &off))
            return clb_err(COLIBRI_ERR_ARG, "KV cache of max_seq_len %d is too large", p->max_seq);
        L->k_off = off - clb_align_up(kb, 64);
        L->v_off = off;
        if (!clb_add_u64(off, clb_align_up(vb, 64), &off))
            return clb_err(COLIBRI_ERR_ARG, "KV cache of max_seq_len %d is too large", p->max_seq);
    }
    c->seq_bytes = off;
    uint64_t total;
    if (!clb_mul_u64(off, (uint64_t)p->n_seq, &total) || total > ((uint64_t)1 << 41) || total > SIZE_MAX)
        return clb_err(COLIBRI_ERR_ARG, "KV cache for %d sequence(s) of max_seq_len %d is too large", p->n_seq, p->max_seq);
    c->data = clb_alloc_aligned((size_t)total);
    if (!c->data)
        return clb_err(COLIBRI_ERR_NOMEM, "cannot allocate the KV cache (%llu bytes)", (unsigned long long)total);
    return COLIBRI_OK;
}

void clb_kv_free(clb_kv_cache *c) {
    if (!c) return;
    clb_free_aligned(c->data);
    clb_free(c->layers);
    clb_free(c->lo);
    memset(c, 0, sizeof *c);
}

uint64_t clb_kv_bytes_per_pos(const clb_kv_cache *c) {
    uint64_t b = 0;
    for (int l = 0; l < c->n_layer; l++) {
        const clb_kv_layer *L = &c->layers[l];
        b += (uint64_t)L->n_head * (L->k_row + (L->v_in_k ? 0 : L->v_row));
    }
    return b;
}

static void store_row(int type, const float *x, void *dst, int64_t n) {
    if (type == CLB_DT_F32) memcpy(dst, x, sizeof(float) * (size_t)n);
    else clb_quantize_row_ref((clb_dtype)type, x, dst, n);
}

void clb_kv_write(clb_kv_cache *c, int seq, int l, int64_t pos, const float *k, const float *v) {
    const clb_kv_layer *L = &c->layers[l];
    for (int h = 0; h < L->n_head; h++) {
        store_row(c->k_type, k + (int64_t)h * L->k_dim, clb_kv_krow(c, seq, l, h, pos), L->k_dim);
        if (!L->v_in_k) store_row(c->v_type, v + (int64_t)h * L->v_dim, clb_kv_vrow(c, seq, l, h, pos), L->v_dim);
    }
    int32_t *lo = &c->lo[(int64_t)seq * c->n_layer + l];
    if (L->ring && pos + 1 - L->slots > *lo) *lo = (int32_t)(pos + 1 - L->slots);
}

int64_t clb_kv_first(const clb_kv_cache *c, int seq, int l, int64_t pos) {
    const clb_kv_layer *L = &c->layers[l];
    int64_t first = 0;
    if (L->window > 0) first = pos - L->window + 1;
    else if (L->chunk > 0) first = pos / L->chunk * L->chunk;
    const int64_t lo = c->lo[(int64_t)seq * c->n_layer + l];
    return CLB_MAX(first, CLB_MAX(lo, 0));
}

int32_t clb_kv_keepable(const clb_kv_cache *c, int seq, int32_t n) {
    for (int l = 0; l < c->n_layer; l++) {
        const clb_kv_layer *L = &c->layers[l];
        if (!L->ring || n == 0) continue;
        const int64_t lo = c->lo[(int64_t)seq * c->n_layer + l];
        const int64_t need = L->window > 0 ? CLB_MAX((int64_t)n - L->window + 1, 0) : (int64_t)n / L->chunk * L->chunk;
        if (lo > need) return 0;
    }
    return n;
}

void clb_kv_clear(clb_kv_cache *c, int seq) {
    for (int l = 0; l < c->n_layer; l++) c->lo[(int64_t)seq * c->n_layer + l] = 0;
}
