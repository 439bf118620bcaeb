/* kv_cache.h — the KV cache: what each layer keeps of every sequence, and where.
 *
 * Layout: one region per sequence, in it per layer a K block and a V block, each
 * [n_head][slots][row] — the rows of one head are contiguous, so attention streams them.
 * A row is one position of one head in the cache's element type (f32, f16, bf16, q8_0,
 * q4_0: ggml's block layouts, kernels.h).
 *
 * A layer whose attention reaches back at most `reach` positions (a sliding window or
 * chunked attention, clb_attn_layer) keeps only what it can still see: a ring of `slots`
 * rows, position p in slot p % slots, slots = reach + n_batch - 1 rounded up to the
 * attention tile (the tokens of one batch are written before any of them attends, so the
 * earliest one's window must survive the latest one's write). When that is not smaller
 * than max_seq the layer keeps every position like the others. lo[seq][layer] is the
 * lowest position a ring still holds.
 *
 * MLA with the latent cached (DeepSeek-V2/V3): one head whose K row is [latent (kv_lora_rank)
 * | shared rope key (n_rot)] and whose V is the latent itself, read from the K row
 * (v_in_k): nothing is stored twice. */
#ifndef CLB_KV_CACHE_H
#define CLB_KV_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"
#include "nn/ops.h"

#define CLB_KV_TILE 32 /* positions per attention key tile; ring sizes are multiples of it */

typedef struct clb_kv_layer {
    int32_t slots;         /* rows per head: max_seq, or the ring size */
    bool ring;             /* position p lives in slot p % slots */
    int32_t window, chunk; /* the layer's clb_attn_layer window / chunk (0 = off) */
    int32_t n_head;        /* cached heads */
    int32_t k_dim, v_dim;  /* elements of a K / V row */
    int32_t k_pad, v_pad;  /* elements stored per row: rounded up to the type's block of 32
                              for q8_0 / q4_0 (zeros after the values, which change no dot
                              product), so any head size can use any type */
    int32_t k_seg;         /* MLA latent: the latent's elements; a K row is [latent, zeros to
                              v_pad, rope key, zeros to k_pad]; 0 for other layers */
    bool v_in_k;           /* V is the first v_pad elements of the K row (MLA latent) */
    bool rope;             /* K rows hold rotated dims (a context shift re-rotates them) ... */
    int32_t rope_off;      /* ... n_rot of them from this element of the row */
    uint64_t k_row, v_row; /* bytes per row */
    uint64_t k_off, v_off; /* the layer's K and V blocks in a sequence's region */
} clb_kv_layer;

typedef struct clb_kv_params {
    int n_seq, max_seq, n_batch;
    int k_type, v_type;    /* clb_dtype: F32, F16, BF16, Q8_0 or Q4_0 */
    bool mla_latent;       /* MLA layers cache the latent (else K and V decompressed per head) */
    const struct clb_kernels *k; /* its quantizers write the rows (NULL: the reference ones;
                                    both give the same bytes, test_kernels checks it) */
} clb_kv_params;

typedef struct clb_kv_cache {
    int n_seq, n_layer, max_seq;
    int k_type, v_type;
    clb_kv_layer *layers;  /* [n_layer] */
    uint64_t seq_bytes;    /* one sequence's region */
    uint8_t *data;         /* [n_seq][seq_bytes], 64-byte aligned */
    int32_t *lo;           /* [n_seq][n_layer] */
    bool any_ring;
    float *pad;            /* [max k_pad, v_pad] scratch of the writes */
    const struct clb_kernels *k; /* clb_kv_params.k */
} clb_kv_cache;

/* Lays out and allocates the cache (pages are touched only when written). Errors name the
   type or size at fault (a type whose blocks do not divide a head's row, a cache too large). */
int clb_kv_init(clb_kv_cache *c, const clb_hparams *hp, const clb_kv_params *p);
void clb_kv_free(clb_kv_cache *c);
/* Bytes the cache holds per position of one sequence, summed over layers (K + V). */
uint64_t clb_kv_bytes_per_pos(const clb_kv_cache *c);
/* The cache's element types accepted by clb_kv_init. */
bool clb_kv_type_ok(int dtype);

static inline uint64_t clb_kv_slot(const clb_kv_layer *L, int64_t pos) {
    return L->ring ? (uint64_t)(pos % L->slots) : (uint64_t)pos;
}
/* The K / V row of position pos of head h of layer l of sequence seq. */
static inline uint8_t *clb_kv_krow(const clb_kv_cache *c, int seq, int l, int h, int64_t pos) {
    const clb_kv_layer *L = &c->layers[l];
    return c->data + (uint64_t)seq * c->seq_bytes + L->k_off +
           ((uint64_t)h * (uint64_t)L->slots + clb_kv_slot(L, pos)) * L->k_row;
}
static inline uint8_t *clb_kv_vrow(const clb_kv_cache *c, int seq, int l, int h, int64_t pos) {
    const clb_kv_layer *L = &c->layers[l];
    if (L->v_in_k) return clb_kv_krow(c, seq, l, h, pos);
    return c->data + (uint64_t)seq * c->seq_bytes + L->v_off +
           ((uint64_t)h * (uint64_t)L->slots + clb_kv_slot(L, pos)) * L->v_row;
}
/* Row strides between consecutive slots of one head. */
static inline uint64_t clb_kv_kstride(const clb_kv_cache *c, int l) { return c->layers[l].k_row; }
static inline uint64_t clb_kv_vstride(const clb_kv_cache *c, int l) {
    return c->layers[l].v_in_k ? c->layers[l].k_row : c->layers[l].v_row;
}

/* Stores K (and V) rows of n_head heads of one position: k [n_head][k_dim], v [n_head][v_dim]
   f32 (MLA latent: k = [latent | rope key]), converted to the cache's types and padded;
   v is ignored for a v_in_k layer. */
void clb_kv_write(clb_kv_cache *c, int seq, int l, int64_t pos, const float *k, const float *v);
/* The lowest position a query at pos of layer l may see (window, chunk, what a ring holds). */
int64_t clb_kv_first(const clb_kv_cache *c, int seq, int l, int64_t pos);
/* After a sequence is cut to n positions: how many it can keep such that every layer still
   holds what the next query reaches (n, or 0 when a ring has already dropped part of it). */
int32_t clb_kv_keepable(const clb_kv_cache *c, int seq, int32_t n);
/* Context shift of sequence seq holding n positions: positions [keep, keep + d) are dropped,
   [keep + d, n) move down by d and their keys are rotated back by d. A layer keeping only
   its window loses what it held of [0, keep) (a window that reached back into the kept
   prefix sees less of it), as llama.cpp's cache does. */
void clb_kv_shift(clb_kv_cache *c, const clb_rope *rope, int n_rot, int seq, int32_t n, int32_t keep, int32_t d);
/* Forgets everything of sequence seq (its rings start empty). */
void clb_kv_clear(clb_kv_cache *c, int seq);

#endif
