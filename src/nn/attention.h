/* attention.h — the attention block of a layer (projections, q/k norms, rotary embedding,
 * KV cache, attention itself, output projection) for a batch of tokens of any sequences.
 *
 * What a layer computes is data: hp->attn_kind (GQA or MLA) and the layer's clb_attn_layer
 * (sliding window, chunk, NoPE, sinks). Every token carries its sequence and position; the
 * cache (kv_cache.h) keeps each sequence's rows apart, so a sequence's results do not
 * depend on what shares its batch. The results do not depend on the thread count either:
 * every value is computed by one thread in a fixed order. */
#ifndef CLB_ATTENTION_H
#define CLB_ATTENTION_H

#include <stdint.h>

#include "core/arena.h"
#include "core/threadpool.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "nn/kv_cache.h"
#include "nn/ops.h"

typedef struct clb_attn {
    const clb_hparams *hp;
    const clb_kernels *k;
    const clb_mm_ctx *mm;
    const clb_rope *rope;
    clb_pool *pool;
    clb_kv_cache kv;
    int n_batch, n_threads, max_seq;
    /* activations (clb_attn_carve); B = n_batch */
    float *q;       /* [B][n_head * head_dim] */
    float *kv_k;    /* [B][n_head_kv * head_dim] new keys */
    float *kv_v;    /* [B][n_head_kv * head_dim_v] new values */
    float *att;     /* [B][n_head * head_dim_v] attention output, before the output projection */
    float *mla_qa;  /* [B][q_lora_rank] (MLA) */
    float *mla_ckv; /* [B][kv_lora_rank + n_rot] (MLA) latent + shared rope key */
    float *mla_kvb; /* [B][n_head * (nope + head_dim_v)] (MLA) decompressed K/V */
    float *scores;  /* plain: [n_threads][n_head / n_kv][max_seq] scores of one (token, K/V head) */
    /* flash attention (attention.c) */
    bool flash;         /* flash attention (else the plain path, f32 caches only) */
    uint8_t *qq;        /* [B][n_head][qrow] queries in the key type's query format */
    uint64_t qrow;      /* bytes of one of them */
    int32_t *order;     /* [B] the batch's tokens sorted by sequence (stable) */
    void *tiles;        /* [B * n_head] query tiles of the current layer */
    float *work;        /* [n_threads][work_floats] per-thread tiles and states */
    size_t work_floats;
    float *part;        /* [part_floats] key-split partial states (decoding at long context) */
    size_t part_floats;
    /* MLA with the latent cached (kv.layers[l].v_in_k): the up-projections absorbed per head */
    clb_weight *wuk;    /* [n_layer][n_head] W_uk^T [kv_lora_rank][nope]: k_b's, else from kv_b (mla_weights) */
    clb_weight *wuv;    /* [n_layer][n_head] W_uv [head_dim_v][kv_lora_rank]: v_b's, else kv_b's rows */
    /* MLA decompressed from a split file without kv_b: W_uk built from k_b (mla_weights) */
    clb_weight *wkb;    /* [n_layer] W_uk [n_head * nope][kv_lora_rank], data NULL where kv_b serves */
    uint8_t *mla_w;     /* the bytes of what mla_weights built */
    float *q_abs;       /* [B][n_head][k_pad] absorbed queries: [W_uk^T q_nope, 0.., q_pe, 0..] */
    float *o_lat;       /* [B][n_head][kv_lora_rank] attention output in the latent space */
    clb_mm_job *jobs;   /* [n_head] per-head products */
} clb_attn;

/* Attention settings of colibri_params, resolved (clb_attn_init). */
typedef struct clb_attn_params {
    clb_kv_params kv;
    int flash;          /* 1 on, -1 off (f32 caches only), 0 auto: flash unless both caches are f32 */
} clb_attn_params;

/* Lays out the KV cache (kv_cache.h) and records the context; buffers come later
   (clb_attn_carve). mm, rope and pool stay the caller's. */
int clb_attn_init(clb_attn *a, const clb_hparams *hp, const clb_layer *layers, const clb_kernels *k,
                  const clb_mm_ctx *mm, const clb_rope *rope, clb_pool *pool, int n_threads, int n_batch,
                  const clb_attn_params *ap);
/* Bytes of the matrix-product scratch (clb_mm_ctx.qbuf) the attention needs beyond one product. */
uint64_t clb_attn_qbuf_bytes(const clb_attn *a);
void clb_attn_free(clb_attn *a);
/* Takes the activation buffers from the arena (called twice: sizing, then handing out). */
void clb_attn_carve(clb_attn *a, clb_arena *ar);

/* The attention block of layer l for n tokens: xn [n][n_embd] is the normed input, token t
   is position pos[t] of sequence seq[t] (the tokens of one sequence at consecutive positions,
   in order); writes their K/V rows into the cache and y [n][n_embd] = the output projection
   of the attention (before the residual). */
void clb_attn_forward(clb_attn *a, const clb_layer *L, int l, const float *xn, int n, const int32_t *seq,
                      const int32_t *pos, float *y);
/* The same up to the output projection, for a caller that computes the queries and the
   output itself (a mixture of attention heads, hp->n_attn_exp): it has written a->q [n]
   [n_head * head_dim] (unrotated); K/V come from xn; the result is a->att [n][n_head *
   head_dim_v]. Query head h attends with K/V head h / (n_head / n_head_kv). */
void clb_attn_forward_heads(clb_attn *a, const clb_layer *L, int l, const float *xn, int n, const int32_t *seq,
                            const int32_t *pos);

#endif
