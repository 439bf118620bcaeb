/* attention.c — the attention block (attention.h): projections, norms, rope, KV cache,
 * attention, output projection. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "core/common.h"
#include "nn/attention.h"

int clb_attn_init(clb_attn *a, const clb_hparams *hp, const clb_kernels *k, const clb_mm_ctx *mm,
                  const clb_rope *rope, clb_pool *pool, int n_threads, int n_batch, const clb_kv_params *kp) {
    memset(a, 0, sizeof *a);
    a->hp = hp;
    a->k = k;
    a->mm = mm;
    a->rope = rope;
    a->pool = pool;
    a->n_threads = n_threads;
    a->n_batch = n_batch;
    a->max_seq = kp->max_seq;
    return clb_kv_init(&a->kv, hp, kp);
}

void clb_attn_free(clb_attn *a) {
    if (a) clb_kv_free(&a->kv);
}

void clb_attn_carve(clb_attn *a, clb_arena *ar) {
    const clb_hparams *hp = a->hp;
    const size_t B = (size_t)a->n_batch, F = sizeof(float);
    const size_t qd = (size_t)hp->n_head * hp->head_dim, kd = (size_t)hp->n_head_kv * hp->head_dim;
    const size_t vd = (size_t)hp->n_head_kv * hp->head_dim_v, od = (size_t)hp->n_head * hp->head_dim_v;
    a->q = clb_arena_take(ar, B * qd * F);
    a->kv_k = clb_arena_take(ar, B * kd * F);
    a->kv_v = clb_arena_take(ar, B * vd * F);
    a->att = clb_arena_take(ar, B * od * F);
    if (hp->attn_kind == CLB_ATTN_MLA) {
        const size_t nope = (size_t)(hp->head_dim - hp->n_rot);
        a->mla_qa = clb_arena_take(ar, B * (size_t)CLB_MAX(hp->q_lora_rank, 1) * F);
        a->mla_ckv = clb_arena_take(ar, B * (size_t)(hp->kv_lora_rank + hp->n_rot) * F);
        a->mla_kvb = clb_arena_take(ar, B * (size_t)hp->n_head * (nope + (size_t)hp->head_dim_v) * F);
    }
    const size_t group = (size_t)(hp->n_head_kv > 0 ? CLB_MAX(hp->n_head / hp->n_head_kv, 1) : 1);
    a->scores = clb_arena_take(ar, (size_t)a->n_threads * group * (size_t)a->max_seq * F);
}

/* ---- plain attention: every score of a (token, K/V head), softmax, weighted sum ---- */

typedef struct plain_task {
    const clb_attn *a;
    const clb_layer *L;
    int layer, n_tok;
    const int32_t *seq, *pos;
    atomic_llong next; /* the next (token, K/V head) unit to take */
} plain_task;

/* softmax over x[0..n) with one more logit `sink` in the denominator (no value) */
static void softmax_sink(float *x, int64_t n, float sink) {
    float mx = sink;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = expf(sink - mx);
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

/* One (token, K/V head) unit at a time, for the query heads that share that K/V head
   (grouped-query attention): scores over the positions the layer lets the token see,
   softmax, weighted sum of values. Each cached key and value row is loaded once for the
   whole group and reused from L1 by its query heads. Threads take units from a shared
   counter (in a causal batch the later tokens cost more). f32 rows only. */
static void plain_run(void *arg, int ith, int nth) {
    plain_task *t = arg;
    (void)nth;
    const clb_attn *a = t->a;
    const clb_hparams *hp = a->hp;
    const clb_kv_cache *kv = &a->kv;
    const int l = t->layer;
    const clb_kv_layer *KL = &kv->layers[l];
    const int hd = KL->k_dim, hdv = KL->v_dim, nkv = KL->n_head, group = hp->n_head / nkv;
    const float scale = hp->attn_mult > 0 ? hp->attn_mult : 1.0f / sqrtf((float)hp->head_dim);
    const float *sinks = t->L->sinks.data;
    const int64_t ms = a->max_seq;
    float *sc = a->scores + (int64_t)ith * group * ms; /* [group][max_seq] */
    const clb_vec_dot_fn dot = a->k->vec_dot[CLB_DT_F32];
    const int64_t n_units = (int64_t)t->n_tok * nkv;
    for (int64_t u; (u = atomic_fetch_add_explicit(&t->next, 1, memory_order_relaxed)) < n_units;) {
        const int tok = (int)(u / nkv), g = (int)(u % nkv), h0 = g * group, s = t->seq[tok];
        const int64_t pos = t->pos[tok], first = clb_kv_first(kv, s, l, pos), m = pos - first + 1;
        const float *q0 = a->q + (int64_t)tok * hp->n_head * hd + (int64_t)h0 * hd;
        for (int64_t j = first; j <= pos; j++) {
            const float *kj = (const float *)clb_kv_krow(kv, s, l, g, j);
            for (int i = 0; i < group; i++) {
                float v;
                dot(hd, &v, kj, q0 + (int64_t)i * hd);
                sc[(int64_t)i * ms + (j - first)] = v * scale;
            }
        }
        float *out0 = a->att + (int64_t)tok * hp->n_head * hdv + (int64_t)h0 * hdv;
        for (int i = 0; i < group; i++) {
            if (sinks) softmax_sink(sc + (int64_t)i * ms, m, sinks[h0 + i]);
            else clb_softmax(sc + (int64_t)i * ms, m);
            memset(out0 + (int64_t)i * hdv, 0, sizeof(float) * (size_t)hdv);
        }
        for (int64_t j = first; j <= pos; j++) {
            const float *vj = (const float *)clb_kv_vrow(kv, s, l, g, j);
            for (int i = 0; i < group; i++) a->k->axpy_f32(hdv, sc[(int64_t)i * ms + (j - first)], vj, out0 + (int64_t)i * hdv);
        }
    }
}

/* ---- projections ---- */

static void add_bias(float *y, const clb_weight *b, int n_tok, int64_t stride) {
    if (!b->data) return;
    const float *bv = b->data;
    for (int t = 0; t < n_tok; t++)
        for (int64_t i = 0; i < b->cols; i++) y[(int64_t)t * stride + i] += bv[i];
}

static void clamp(float *x, int64_t n, float c) {
    for (int64_t i = 0; i < n; i++) x[i] = x[i] > c ? c : x[i] < -c ? -c : x[i];
}

/* q [n][n_head*hd], k [n][n_kv*hd], v [n][n_kv*hdv] from the normed input; k rotated. */
static void project_gqa(clb_attn *a, const clb_layer *L, const float *xn, int n, const int32_t *pos, bool rope) {
    const clb_hparams *hp = a->hp;
    const int64_t E = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim;
    const int64_t kd = (int64_t)hp->n_head_kv * hp->head_dim, vd = (int64_t)hp->n_head_kv * hp->head_dim_v;
    clb_matmul(a->mm, &L->wq, xn, E, n, a->q, qd);
    if (kd == vd) {
        clb_matmul2(a->mm, &L->wk, &L->wv, xn, E, n, a->kv_k, a->kv_v, kd);
    } else {
        clb_matmul(a->mm, &L->wk, xn, E, n, a->kv_k, kd);
        clb_matmul(a->mm, &L->wv, xn, E, n, a->kv_v, vd);
    }
    add_bias(a->q, &L->bq, n, qd);
    add_bias(a->kv_k, &L->bk, n, kd);
    add_bias(a->kv_v, &L->bv, n, vd);
    for (int t = 0; t < n; t++) {
        float *qt = a->q + t * qd, *kt = a->kv_k + t * kd;
        if (hp->qk_norm == CLB_QKNORM_FULL) {
            clb_rmsnorm(qt, qt, L->q_norm.data, qd, hp->norm_eps);
            clb_rmsnorm(kt, kt, L->k_norm.data, kd, hp->norm_eps);
        } else if (hp->qk_norm == CLB_QKNORM_HEAD) {
            for (int h = 0; h < hp->n_head; h++)
                clb_rmsnorm(qt + h * hp->head_dim, qt + h * hp->head_dim, L->q_norm.data, hp->head_dim, hp->norm_eps);
            for (int h = 0; h < hp->n_head_kv; h++)
                clb_rmsnorm(kt + h * hp->head_dim, kt + h * hp->head_dim, L->k_norm.data, hp->head_dim, hp->norm_eps);
        }
        if (hp->clip_qkv > 0) { /* OLMoE: after the q/k norms, before rope */
            clamp(qt, qd, hp->clip_qkv);
            clamp(kt, kd, hp->clip_qkv);
            clamp(a->kv_v + t * vd, vd, hp->clip_qkv);
        }
        if (rope) clb_rope_apply(a->rope, kt, hp->n_head_kv, hp->head_dim, 0, pos[t]);
    }
}

/* Multi-head latent attention (DeepSeek-V2/V3): q from a low-rank projection (or directly),
   K/V decompressed per head from the kv_lora_rank latent; the rope part of K is one
   vector shared by all heads. */
static void project_mla(clb_attn *a, const clb_layer *L, const float *xn, int n, const int32_t *pos) {
    const clb_hparams *hp = a->hp;
    const int64_t E = hp->n_embd, H = hp->n_head, hd = hp->head_dim, hdv = hp->head_dim_v, rot = hp->n_rot;
    const int64_t nope = hd - rot, r = hp->kv_lora_rank, qd = H * hd, ckv_w = r + rot, kvb_w = H * (nope + hdv);
    const float eps = 1e-6f; /* q_a_layernorm / kv_a_layernorm: RMSNorm's default eps in the HF code */
    if (hp->q_lora_rank > 0) {
        const int64_t qr = hp->q_lora_rank;
        clb_matmul(a->mm, &L->wq_a, xn, E, n, a->mla_qa, qr);
        for (int t = 0; t < n; t++) clb_rmsnorm(a->mla_qa + t * qr, a->mla_qa + t * qr, L->q_a_norm.data, qr, eps);
        clb_matmul(a->mm, &L->wq_b, a->mla_qa, qr, n, a->q, qd);
    } else {
        clb_matmul(a->mm, &L->wq, xn, E, n, a->q, qd);
    }
    clb_matmul(a->mm, &L->wkv_a, xn, E, n, a->mla_ckv, ckv_w);
    for (int t = 0; t < n; t++) {
        float *c = a->mla_ckv + t * ckv_w;
        clb_rmsnorm(c, c, L->kv_a_norm.data, r, eps);              /* the latent */
        clb_rope_apply(a->rope, c + r, 1, (int)rot, 0, pos[t]); /* the shared rope key */
    }
    clb_matmul(a->mm, &L->wkv_b, a->mla_ckv, ckv_w, n, a->mla_kvb, kvb_w);
    for (int t = 0; t < n; t++) {
        const float *kvb = a->mla_kvb + t * kvb_w, *kpe = a->mla_ckv + t * ckv_w + r;
        for (int64_t h = 0; h < H; h++) {
            float *k = a->kv_k + t * H * hd + h * hd, *v = a->kv_v + t * H * hdv + h * hdv;
            memcpy(k, kvb + h * (nope + hdv), sizeof(float) * (size_t)nope);
            memcpy(k + nope, kpe, sizeof(float) * (size_t)rot);
            memcpy(v, kvb + h * (nope + hdv) + nope, sizeof(float) * (size_t)hdv);
        }
    }
}

void clb_attn_forward(clb_attn *a, const clb_layer *L, int l, const float *xn, int n, const int32_t *seq,
                      const int32_t *pos, float *y) {
    const clb_hparams *hp = a->hp;
    const clb_attn_layer al = clb_hparams_attn_layer(hp, l);
    const int64_t E = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim;
    const int64_t kd = (int64_t)hp->n_head_kv * hp->head_dim, vd = (int64_t)hp->n_head_kv * hp->head_dim_v;
    if (hp->attn_kind == CLB_ATTN_MLA) project_mla(a, L, xn, n, pos);
    else project_gqa(a, L, xn, n, pos, !al.no_rope);
    for (int t = 0; t < n; t++) {
        if (!al.no_rope) clb_rope_apply(a->rope, a->q + t * qd, hp->n_head, hp->head_dim, hp->rope_offset, pos[t]);
        clb_kv_write(&a->kv, seq[t], l, pos[t], a->kv_k + t * kd, a->kv_v + t * vd);
    }
    plain_task pt = {.a = a, .L = L, .layer = l, .n_tok = n, .seq = seq, .pos = pos};
    atomic_init(&pt.next, 0);
    clb_pool_run(a->pool, plain_run, &pt);
    const int64_t od = (int64_t)hp->n_head * hp->head_dim_v;
    clb_matmul(a->mm, &L->wo, a->att, od, n, y, E);
    add_bias(y, &L->bo, n, E);
}
