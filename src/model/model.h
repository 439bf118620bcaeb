/* model.h — hyper-parameters, architecture descriptors and the bound model.
 *
 * A family is data (arch.c): which config keys set which hyper-parameter, which pieces a
 * layer uses, how the router scores and selects, and how tensor names map. The engine reads
 * the resulting clb_hparams fields and never branches on a family's name.
 *
 * Canonical tensor names are GGUF's ("blk.3.attn_q.weight"); routed experts are per-expert
 * tensors "blk.L.ffn_{gate,up,down}.E.weight" (GGUF's stacked *_exps tensors are sliced).
 */
#ifndef CLB_MODEL_H
#define CLB_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "format/tensor.h"

typedef enum { CLB_ROPE_NEOX = 0, CLB_ROPE_NORM = 1 } clb_rope_style; /* rotate-half / adjacent pairs */
typedef enum { CLB_QKNORM_NONE = 0, CLB_QKNORM_HEAD = 1, CLB_QKNORM_FULL = 2 } clb_qknorm;
/* SPARSEMIXER: Phi-3.5-MoE's eval-mode sparsemixer (router.c): for each of the top-k steps,
   the best remaining logit m, the logits s with (m - s) / max(|s|, m) > 2 * router_jitter
   masked out, softmax over what is left, weight = the chosen expert's probability there. */
typedef enum { CLB_SCORE_SOFTMAX = 0, CLB_SCORE_SIGMOID = 1, CLB_SCORE_SPARSEMIXER = 2 } clb_router_score;
/* The block norms (attn_norm, ffn_norm, output_norm): RMSNorm, or LayerNorm with a bias
   (tensors *_norm.bias, required), both with norm_eps. */
typedef enum { CLB_NORM_RMS = 0, CLB_NORM_LAYER = 1 } clb_norm_kind;
typedef enum { CLB_ATTN_GQA = 0, CLB_ATTN_MLA = 1 } clb_attn_kind;
/* The gate's activation in a gated FFN: silu(g) * u (SwiGLU), max(g, 0) * u (ReGLU,
   SmallThinker's experts), or gpt-oss's clamped SwiGLU g' = min(g, limit),
   u' = clamp(u, -limit, limit), g' * sigmoid(alpha * g') * (u' + 1). */
typedef enum { CLB_ACT_SILU = 0, CLB_ACT_RELU = 1, CLB_ACT_SWIGLU_CLAMP = 2 } clb_ffn_act;
typedef enum {
    CLB_ROPE_SCALING_NONE = 0,
    CLB_ROPE_SCALING_LINEAR = 1,
    CLB_ROPE_SCALING_DYNAMIC = 2,
    CLB_ROPE_SCALING_YARN = 3,
    CLB_ROPE_SCALING_LLAMA3 = 4,
    CLB_ROPE_SCALING_FREQS = 5, /* per-pair divisors in the tensor rope_freqs.weight (GGUF llama3) */
    CLB_ROPE_SCALING_LONGROPE = 6 /* per-pair divisors rope_ext: short, or long when the context
                                     (max_seq_len) exceeds rope_orig_ctx; cos/sin times that
                                     set's mscale */
} clb_rope_scaling;

#define CLB_MAX_LAYERS 1024
#define CLB_MAX_CONTEXT (1 << 30) /* positions a model may state (max_position_embeddings, context_length) */

/* Per-layer attention variants: the place where families that mix attention kinds
 * (gpt-oss: sinks + alternating sliding/full layers; Mistral-style windows; Gemma-style
 * interleaving; Llama-4 chunked attention and NoPE layers) say what each layer does.
 * src/nn/attention.c computes every combination; a layer with a window or a chunk keeps
 * only the positions it can still reach in its KV cache (src/nn/kv_cache.c). All zero is
 * plain causal attention with rotary embeddings. */
typedef struct clb_attn_layer {
    int32_t window; /* > 0: sliding window, a query at position p sees keys k with
                       p - window < k <= p (HF sliding_window_overlay); 0 = all earlier keys */
    int32_t chunk;  /* > 0: chunked attention, keys k with k / chunk == p / chunk and k <= p
                       (HF chunked_overlay, Llama-4 attention_chunk_size); 0 = off */
    bool no_rope;   /* q and k are not rotated on this layer (Llama-4 NoPE layers) */
    bool sinks;     /* a learned logit per head joins every softmax as an extra term with no
                       value (gpt-oss): tensor blk.L.attn_sinks.weight [n_head] f32, required
                       when set (a layer also gets sinks when the file has that tensor) */
    bool qk_l2;     /* after rope, every head of q and k is scaled by 1 / sqrt(mean(x^2) +
                       norm_eps), no weight (Llama-4's L2 norm on its rope layers; GQA only) */
    bool temp_tune; /* q of the token at position p is scaled by log(floor((p + 1) /
                       attn_temp_floor) + 1) * attn_temp_scale + 1 (Llama-4's attention
                       temperature tuning on its NoPE layers; GQA only) */
} clb_attn_layer;

typedef struct clb_hparams {
    char arch[32];          /* descriptor name: "llama", "mixtral", ... */
    int n_vocab;
    int n_embd;             /* hidden size */
    int n_layer;
    int n_nextn;            /* multi-token-prediction layers stored after the last (skipped; not in .colibri) */
    int n_head, n_head_kv;
    int head_dim;           /* q/k head dim */
    int head_dim_v;         /* v head dim (== head_dim except MLA) */
    int n_rot;              /* rotary dims per head (== head_dim except partial rope / MLA) */
    int n_ff;               /* dense FFN width */
    int n_expert, n_expert_used;
    int n_ff_exp;           /* routed expert FFN width */
    int n_shared_exp;       /* shared experts (their FFN is n_ff_shexp wide in total) */
    int n_ff_shexp;
    bool shexp_gate;        /* shared expert output scaled by sigmoid(w . x) */
    int first_dense;        /* layers [0, first_dense) use the dense FFN */
    int moe_step;           /* MoE on layers where (l + 1) % moe_step == 0 (qwen2: decoder_sparse_step) */
    uint8_t *dense_layers;  /* [n_layer] 1 = dense FFN (mlp_only_layers etc.); owned */
    clb_attn_layer *attn_layers; /* [n_layer] attention variant of each layer; owned, NULL = all plain */
    float norm_eps;
    float rope_theta;
    int rope_style;         /* clb_rope_style */
    int rope_scaling;       /* clb_rope_scaling */
    float rope_factor, rope_orig_ctx, rope_beta_fast, rope_beta_slow, rope_mscale, rope_mscale_all_dim;
    float rope_low_freq_factor, rope_high_freq_factor; /* llama3 */
    float rope_attn_factor; /* YaRN attention_factor when the config gives it; 0 = derived */
    bool rope_yarn_exact;   /* YaRN truncate=false: the correction range is not rounded to whole dims */
    float *rope_ext;        /* LONGROPE: [2][rope_ext_n] short then long divisors; owned */
    int rope_ext_n;         /* == n_rot / 2 */
    float rope_short_mscale, rope_long_mscale; /* LONGROPE attention factors of each set */
    int max_pos;
    bool tie_embd;
    bool out_bias;          /* the LM head has a bias (output.bias [n_vocab]) */
    int norm_kind;          /* clb_norm_kind */
    bool qkv_bias, o_bias;
    int qk_norm;            /* clb_qknorm */
    int attn_kind;          /* clb_attn_kind */
    float clip_qkv;         /* clamp q, k, v to [-c, c] (OLMoE clip_qkv); 0 = off */
    int rope_offset;        /* first rotated dim of each head (MLA: after the no-rope part) */
    int q_lora_rank, kv_lora_rank; /* MLA */
    int ffn_act;            /* clb_ffn_act of every gated FFN (dense, shared and routed experts) */
    /* router */
    bool router_pre_attn;   /* the router reads the layer's input, before attention (SmallThinker) */
    int router_score;       /* clb_router_score */
    float router_jitter;    /* SPARSEMIXER's masking threshold (HF router_jitter_noise) */
    bool norm_topk;         /* renormalise the selected weights to sum 1 */
    float norm_min;         /* ... dividing by at least this (ERNIE moe_norm_min; 0 = off) */
    float routed_scale;     /* multiplies the routed experts' sum (1 = none) */
    int n_group, topk_group; /* group-limited selection (0 = off) */
    int group_score;        /* a group's score: 0 = its best expert, 1 = sum of its best two */
    bool score_bias;        /* e_score_correction_bias added for selection only */
    bool moe_bias;          /* router logits and every expert projection have biases (gpt-oss):
                               blk.L.ffn_gate_inp.bias [n_expert], blk.L.ffn_{gate,up}_exps.bias
                               [n_expert][n_ff_exp], blk.L.ffn_down_exps.bias [n_expert][n_embd] */
    float act_alpha, act_limit; /* CLB_ACT_SWIGLU_CLAMP's sigmoid gain and clamp */
    bool moe_weight_on_input; /* a routed expert is fed x * weight (its output is not scaled):
                                 Llama-4; the gate and up outputs are scaled instead, which is
                                 the same for bias-free projections (refused with moe_bias) */
    float attn_temp_floor, attn_temp_scale; /* clb_attn_layer.temp_tune (Llama-4 floor_scale, attn_scale) */
    /* mixture of attention heads (JetMoE's MoA; 0 = plain attention): every layer's
       attention has n_attn_exp routed experts, each a query projection blk.L.attn_q.E.weight
       [n_head_kv * head_dim][n_embd] and an output projection blk.L.attn_output.E.weight
       [n_embd][n_head_kv * head_dim_v], routed by blk.L.attn_gate_inp.weight (top-k of the
       logits, softmax over those k); the n_attn_exp_used selected experts' queries are the
       n_head = n_attn_exp_used * n_head_kv heads (slot s, K/V head j), their outputs go
       through their own output projections, weighted and summed (+ attn_output.bias when
       o_bias). They live in the expert store beside the FFN experts (sub-layer 1). */
    int n_attn_exp, n_attn_exp_used;
    bool ffn_out_bias;      /* blk.L.ffn_out.bias [n_embd] added to the MoE FFN's output (JetMoE) */
    float norm_eps_layer;   /* eps of the layers' RMSNorms when it is not the final norm's
                               (JetMoE: JetMoeRMSNorm's default 1e-6); 0 = norm_eps */
    /* scaling (granite); 0 means "not set" */
    float embd_mult, resid_mult, attn_mult, logit_div;
    int bos_id, eos_id;
} clb_hparams;

/* A weight as the kernels see it: rows x cols of dtype, row-major. Vectors have rows == 1. */
typedef struct clb_weight {
    const void *data;
    int dtype;
    int64_t rows, cols;
    uint64_t row_bytes;
    /* leading rows computed 16 at a time by the kernel table's packed kernels (kernels.h;
       0: none), and whether their bytes are interleaved in memory (else row-major) */
    int64_t packed_rows;
    bool interleaved;
} clb_weight;

typedef struct clb_expert_w {
    clb_weight gate, up, down; /* gate/up: [n_ff_exp][n_embd], down: [n_embd][n_ff_exp] */
} clb_expert_w;

typedef struct clb_layer {
    clb_weight attn_norm, attn_norm_b;  /* [n_embd] f32; the bias with CLB_NORM_LAYER */
    clb_weight wq, wk, wv, wo;          /* wq [n_head*hd][n_embd], wk/wv [n_kv*hd][n_embd], wo [n_embd][n_head*hdv] */
    clb_weight bq, bk, bv, bo;          /* optional biases (data NULL when absent) */
    clb_weight q_norm, k_norm;          /* optional: [head_dim] (HEAD) or [n_head*hd] (FULL) */
    clb_weight sinks;                   /* optional: [n_head] f32 sink logits (clb_attn_layer.sinks) */
    /* MLA (attn_kind == MLA) */
    clb_weight wq_a, q_a_norm, wq_b;    /* q_lora_rank > 0: q = wq_b(norm(wq_a x)); else wq */
    clb_weight wkv_a, kv_a_norm, wkv_b; /* [kv_lora_rank + n_rot][n_embd], [kv_lora_rank], [n_head*(nope+hdv)][kv_lora_rank] */
    /* MLA split as today's llama.cpp writes it (either or both of these and wkv_b present):
       wk_b [n_head*kv_lora_rank][nope] (W_uk^T per head), wv_b [n_head*hdv][kv_lora_rank] (W_uv) */
    clb_weight wk_b, wv_b;
    clb_weight ffn_norm, ffn_norm_b;    /* [n_embd] f32; the bias with CLB_NORM_LAYER */
    bool is_moe;
    clb_weight ffn_gate, ffn_up, ffn_down;      /* dense FFN */
    clb_weight router;                          /* [n_expert][n_embd] f32 */
    clb_weight router_bias;                     /* [n_expert] f32, e_score_correction_bias */
    clb_weight router_b;                        /* optional [n_expert] f32 added to the router logits */
    clb_weight exp_gate_b, exp_up_b, exp_down_b; /* optional [n_expert][rows] f32 expert biases */
    clb_weight sh_gate, sh_up, sh_down;         /* shared expert(s), merged */
    clb_weight sh_gate_inp;                     /* [1][n_embd] */
    clb_weight ffn_out_b;                       /* optional [n_embd] f32 (hp->ffn_out_bias) */
    clb_weight attn_router;                     /* [n_attn_exp][n_embd] (hp->n_attn_exp > 0) */
} clb_layer;

/* ---- descriptors (arch.c) ---- */

typedef struct clb_arch_desc clb_arch_desc;

/* Finds the descriptor for an HF config (architectures[0] / model_type); NULL + error
   naming the architecture when unsupported. */
const clb_arch_desc *clb_arch_from_hf(const cJSON *config);
const clb_arch_desc *clb_arch_from_gguf_name(const char *gguf_arch);
const clb_arch_desc *clb_arch_by_name(const char *name);
const char *clb_arch_name(const clb_arch_desc *d);
/* The family's general.architecture in GGUF files ("llama" for mixtral, ...). */
const char *clb_arch_gguf_name(const clb_arch_desc *d);
/* The canonical suffix of a tensor this family's GGUF files name differently (the part
   after "blk.L."), or NULL. */
const char *clb_arch_gguf_rename(const clb_arch_desc *d, const char *suffix);
/* An HF tensor name as the family's text model names it: past the text prefix of a
   multimodal checkpoint (Llama4ForConditionalGeneration's "language_model."), else hf. */
const char *clb_arch_hf_text_name(const clb_arch_desc *d, const char *hf);
/* true for an HF tensor the family's modeling code ignores on load (ERNIE's model.mtp_*,
   the vision tower of a multimodal checkpoint). */
bool clb_arch_hf_ignored(const clb_arch_desc *d, const char *hf);
/* Comma-separated list of supported HF architectures (for error messages / docs). */
const char *clb_arch_supported_list(void);

/* Sets the family's fixed semantics on hp (GGUF files state only sizes): architecture name,
   q/k norm kind, rope style, router scoring and normalisation, multipliers. */
void clb_arch_gguf_defaults(const clb_arch_desc *d, clb_hparams *hp);
/* The family's per-layer layout in a GGUF file of hp->n_layer layers, from
   `window` = <arch>.attention.sliding_window and `moe_step` = <arch>.interleave_moe_layer_step
   (-1 when absent) and hp as read so far: gpt-oss sliding on even layers, sinks everywhere;
   llama4 its chunked / NoPE layers, q/k L2 norm, temperature tuning and shared expert
   (checking the routers against the step); nothing for the families without a fixed
   pattern. */
int clb_arch_gguf_layers(const clb_arch_desc *d, int window, int moe_step, clb_hparams *hp);
/* Fills hp from an HF config.json; unsupported options are errors naming the key. */
int clb_hparams_from_hf(const clb_arch_desc *d, const cJSON *config, clb_hparams *hp);
/* The .colibri "config" object: our canonical keys (written by convert, read by the loader). */
cJSON *clb_hparams_to_json(const clb_hparams *hp);
int clb_hparams_from_json(const cJSON *j, clb_hparams *hp);
/* Checks internal consistency (positive sizes, heads divide, k <= n_expert, ...). */
int clb_hparams_validate(const clb_hparams *hp);
void clb_hparams_free(clb_hparams *hp);
/* Is layer l an MoE layer? */
bool clb_hparams_layer_is_moe(const clb_hparams *hp, int l);
/* Layer l's attention variant (all zero when hp->attn_layers is NULL). */
clb_attn_layer clb_hparams_attn_layer(const clb_hparams *hp, int l);
/* hp->attn_layers, allocated (all plain) when still NULL; NULL when out of memory. */
clb_attn_layer *clb_hparams_attn_layers(clb_hparams *hp);

/* Maps an HF tensor name to the canonical name. Returns false for names the family does
   not use (e.g. rotary_emb.inv_freq), which the caller reports or skips. *layer / *expert
   receive the indices (-1 when none). */
bool clb_arch_map_hf_name(const clb_arch_desc *d, const char *hf, char *out, size_t cap,
                          int *layer, int *expert);

/* HF tensors that hold every expert of a layer at once (GraniteMoE): input_linear is
   [n_expert][2 * ff][n_embd] with gate rows first, then up rows; output_linear is
   [n_expert][n_embd][ff]. Returns the kind and sets *layer. */
enum { CLB_STACKED_NONE = 0, CLB_STACKED_GATE_UP = 1, CLB_STACKED_DOWN = 2 };
/* gpt-oss's experts (x @ W layout, gate and up interleaved: gate = [..., ::2], up = [..., 1::2]):
   GU_COLS gate_up_proj [n_expert][n_embd][2 * ff]; DOWN_COLS down_proj [n_expert][ff][n_embd];
   GU_HALVES: as GU_COLS with gate = [..., :ff], up = [..., ff:] (Llama-4's chunk(2));
   GU_BIAS gate_up_proj_bias [n_expert][2 * ff]; the MXFP4 forms *_blocks [n_expert][rows][cols / 32][16]
   (rows = 2 * ff interleaved, or n_embd) with *_scales [n_expert][rows][cols / 32] (SCALES: read
   with its blocks). The source repacks them as per-expert [rows][cols] tensors. */
enum {
    CLB_STACKED_GU_COLS = 3,
    CLB_STACKED_DOWN_COLS = 4,
    CLB_STACKED_GU_BIAS = 5,
    CLB_STACKED_GU_MXFP4 = 6,
    CLB_STACKED_DOWN_MXFP4 = 7,
    CLB_STACKED_SCALES = 8,
    CLB_STACKED_GU_HALVES = 9,
    /* JetMoE: ATTN_Q self_attention.experts.input_linear [n_attn_exp][n_kv * hd][n_embd],
       ATTN_OUT output_linear [n_attn_exp][n_embd][n_kv * hd] (per-expert slices), and KV
       kv_proj [2 * n_kv * hd][n_embd] (keys' rows, then values': attn_k / attn_v) */
    CLB_STACKED_ATTN_Q = 10,
    CLB_STACKED_ATTN_OUT = 11,
    CLB_STACKED_KV = 12
};
int clb_arch_hf_stacked(const char *hf, int *layer);

#endif
