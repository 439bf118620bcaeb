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
    c->k = p->k;
    c->layers = clb_calloc((size_t)hp->n_layer, sizeof *c->layers);
    c->lo = clb_calloc((size_t)p->n_seq * (size_t)hp->n_layer, sizeof *c->lo);
    if (!c->layers || !c->lo) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    uint64_t off = 0;
    int64_t max_pad = 0;
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
        L->rope = !a.no_rope;
        L->rope_off = latent ? 0 : hp->attn_kind == CLB_ATTN_MLA ? hp->rope_offset : 0; /* latent: set below */
        const int64_t bk = clb_type(p->k_type)->block_size, bv = clb_type(p->v_type)->block_size;
        if (latent) {
            L->k_seg = hp->kv_lora_rank;
            L->v_pad = (int32_t)clb_align_up((uint64_t)hp->kv_lora_rank, (uint64_t)bk);
            L->k_pad = L->v_pad + (int32_t)clb_align_up((uint64_t)hp->n_rot, (uint64_t)bk);
            L->rope_off = L->v_pad;
        } else {
            L->k_pad = (int32_t)clb_align_up((uint64_t)L->k_dim, (uint64_t)bk);
            L->v_pad = (int32_t)clb_align_up((uint64_t)L->v_dim, (uint64_t)bv);
        }
        max_pad = CLB_MAX(max_pad, CLB_MAX(L->k_pad, L->v_pad));
        int rc;
        if ((rc = row_bytes(p->k_type, L->k_pad, latent ? "latent" : "key", &L->k_row))) return rc;
        if ((rc = row_bytes(latent ? p->k_type : p->v_type, L->v_pad, "value", &L->v_row))) return rc;
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
    if (!(c->pad = clb_calloc((size_t)max_pad, sizeof(float)))) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
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
    clb_free(c->pad);
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

/* A row of n floats into the cache's format: the kernel table's quantizer (F16C, NEON) when
   it has one for the type, the same bytes as the reference's (at decode the reference f16
   conversion of each new K/V row was ~1 % of the step, on the evaluating thread alone). */
static void quant_row(const clb_kv_cache *c, int type, const float *x, void *dst, int64_t n) {
    if (type == CLB_DT_F32) memcpy(dst, x, sizeof(float) * (size_t)n);
    else if (c->k && c->k->quantize[type]) c->k->quantize[type](x, dst, n);
    else clb_quantize_row_ref((clb_dtype)type, x, dst, n);
}

/* n values of x (or, with a second segment, n of x then n2 of x2 at offset at) into a row of
   `pad` elements of type `type`, zeros elsewhere */
static void store_row(clb_kv_cache *c, int type, const float *x, int64_t n, const float *x2, int64_t at, int64_t n2,
                      int64_t pad, void *dst) {
    if (n == pad && !x2) {
        quant_row(c, type, x, dst, n);
        return;
    }
    memset(c->pad, 0, sizeof(float) * (size_t)pad);
    memcpy(c->pad, x, sizeof(float) * (size_t)n);
    if (x2) memcpy(c->pad + at, x2, sizeof(float) * (size_t)n2);
    quant_row(c, type, c->pad, dst, pad);
}

void clb_kv_write(clb_kv_cache *c, int seq, int l, int64_t pos, const float *k, const float *v) {
    const clb_kv_layer *L = &c->layers[l];
    for (int h = 0; h < L->n_head; h++) {
        const float *kh = k + (int64_t)h * L->k_dim;
        if (L->k_seg)
            store_row(c, c->k_type, kh, L->k_seg, kh + L->k_seg, L->v_pad, L->k_dim - L->k_seg, L->k_pad,
                      clb_kv_krow(c, seq, l, h, pos));
        else
            store_row(c, c->k_type, kh, L->k_dim, NULL, 0, 0, L->k_pad, clb_kv_krow(c, seq, l, h, pos));
        if (!L->v_in_k)
            store_row(c, c->v_type, v + (int64_t)h * L->v_dim, L->v_dim, NULL, 0, 0, L->v_pad,
                      clb_kv_vrow(c, seq, l, h, pos));
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

/* rotates the rope dims of the K rows of positions [p0, p1) by -d */
static void rerotate(clb_kv_cache *c, const clb_rope *rope, int n_rot, int seq, int l, int64_t p0, int64_t p1, int32_t d) {
    const clb_kv_layer *L = &c->layers[l];
    if (!L->rope || d == 0) return;
    for (int h = 0; h < L->n_head; h++)
        for (int64_t p = p0; p < p1; p++) {
            uint8_t *row = clb_kv_krow(c, seq, l, h, p);
            float *x = c->k_type == CLB_DT_F32 ? (float *)row : c->pad;
            if (x == c->pad) clb_dequantize_row_ref((clb_dtype)c->k_type, row, x, L->k_pad);
            clb_rope_shift(rope, x + L->rope_off, 1, n_rot, 0, -d);
            if (x == c->pad) quant_row(c, c->k_type, x, row, L->k_pad);
        }
}

/* a ring's rows cycled left by k (new slot i = old slot i + k) in place: three reversals */
static void ring_reverse(uint8_t *base, uint64_t rb, int64_t a, int64_t b, uint8_t *tmp) {
    for (b--; a < b; a++, b--) {
        memcpy(tmp, base + (uint64_t)a * rb, rb);
        memcpy(base + (uint64_t)a * rb, base + (uint64_t)b * rb, rb);
        memcpy(base + (uint64_t)b * rb, tmp, rb);
    }
}
static void ring_rotate(uint8_t *base, uint64_t rb, int64_t slots, int64_t k, uint8_t *tmp) {
    if (k % slots == 0) return;
    k %= slots;
    ring_reverse(base, rb, 0, k, tmp);
    ring_reverse(base, rb, k, slots, tmp);
    ring_reverse(base, rb, 0, slots, tmp);
}

void clb_kv_shift(clb_kv_cache *c, const clb_rope *rope, int n_rot, int seq, int32_t n, int32_t keep, int32_t d) {
    uint8_t *tmp = (uint8_t *)c->pad; /* a row's bytes fit in k_pad floats */
    for (int l = 0; l < c->n_layer; l++) {
        const clb_kv_layer *L = &c->layers[l];
        int32_t *lo = &c->lo[(int64_t)seq * c->n_layer + l];
        for (int h = 0; h < L->n_head; h++) {
            uint8_t *kb = clb_kv_krow(c, seq, l, h, 0), *vb = L->v_in_k ? NULL : clb_kv_vrow(c, seq, l, h, 0);
            if (L->ring) {
                ring_rotate(kb, L->k_row, L->slots, d, tmp);
                if (vb) ring_rotate(vb, L->v_row, L->slots, d, tmp);
                continue;
            }
            memmove(kb + (uint64_t)keep * L->k_row, kb + (uint64_t)(keep + d) * L->k_row, (uint64_t)(n - keep - d) * L->k_row);
            if (vb)
                memmove(vb + (uint64_t)keep * L->v_row, vb + (uint64_t)(keep + d) * L->v_row,
                        (uint64_t)(n - keep - d) * L->v_row);
        }
        int64_t first = keep;
        if (L->ring) {
            *lo = (int32_t)CLB_MAX((int64_t)*lo - d, (int64_t)keep);
            first = *lo;
        }
        rerotate(c, rope, n_rot, seq, l, first, n - d, d);
    }
}

void clb_kv_clear(clb_kv_cache *c, int seq) {
    for (int l = 0; l < c->n_layer; l++) c->lo[(int64_t)seq * c->n_layer + l] = 0;
}
