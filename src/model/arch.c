/* arch.c — architecture descriptors: a family is a table entry, not code.
 *
 * clb_hparams_from_hf reads the keys every family shares, then applies the descriptor's
 * fields (which key holds the expert count, the router's scoring, fixed semantics such as
 * Mixtral's renormalised top-k). Options a family defines but this build cannot compute
 * are refused by name rather than silently ignored. */
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "model/model.h"

/* sliding_window in an HF config: ignored (Llama's code has none), on every layer (Mistral,
   Mixtral), or with use_sliding_window on the layers from max_window_layers on (Qwen); a
   config's layer_types, when the family reads them (not SWA_NONE), say per layer. */
enum { SWA_NONE = 0, SWA_ALL = 1, SWA_QWEN = 2, SWA_ALT = 3 /* even layers (gpt-oss's default layer_types) */ };

struct clb_arch_desc {
    const char *name;
    const char *hf_arch[3];       /* config.json "architectures" entries accepted */
    const char *hf_model_type[3]; /* or "model_type" */
    const char *gguf_arch;        /* general.architecture */
    bool moe;                     /* has routed experts */
    const char *key_n_expert;     /* config key of the routed expert count */
    const char *key_ff_exp;       /* config key of the expert FFN width */
    int router_score;
    bool norm_topk;               /* default of norm_topk_prob */
    bool norm_topk_key;           /* norm_topk_prob is read from the config */
    bool qkv_bias;                /* q/k/v projections always have biases */
    int qk_norm;
    bool shexp;                   /* shared_expert_intermediate_size + sigmoid gate */
    bool sparse_step;             /* decoder_sparse_step / mlp_only_layers */
    bool deepseek;                /* MLA, first_k_dense_replace, moe_layer_freq, shared experts,
                                     scoring_func, topk_method, n_group/topk_group, scaling */
    bool deepseek_v3;             /* sigmoid + correction bias + norm_topk by default */
    bool multipliers;             /* embedding/residual/attention multipliers, logits_scaling */
    bool tie_default;
    int gguf_rope;                /* rope style of this family's GGUF files */
    int swa;                      /* which layers sliding_window applies to (enum below) */
    bool gguf_norm_topk;          /* GGUF files carry no norm_topk_prob: what llama.cpp assumes */
    /* GLM-4.5 style: DeepSeek-V3's router and layer layout over plain GQA attention */
    bool ds_moe;                  /* first_k_dense_replace, n_shared_experts, routed_scaling_factor,
                                     n_group/topk_group; sigmoid + correction bias, no MLA */
    bool qk_norm_key;             /* use_qk_norm enables per-head q/k RMSNorm */
    bool attn_bias_qkv;           /* attention_bias: q/k/v only (o_proj has none) */
    float prf_default;            /* partial_rotary_factor when the config omits it (0 = 1.0) */
    const char *gguf_rename[2][2]; /* {file's tensor suffix, canonical suffix} in this family's GGUF */
    /* ERNIE-4.5 style */
    const char *key_k;            /* config key of the experts per token (NULL: num_experts_per_tok) */
    bool ernie_moe;               /* moe_layer_start_index / end_index / interval, moe_num_shared_experts,
                                     moe_norm_min, softmax + e_score_correction_bias for selection */
    int hf_rope;                  /* rope style of the HF code (CLB_ROPE_NEOX unless set) */
    bool hf_rope_set;
    const char *hf_skip_prefix;   /* HF tensors the modeling code ignores on load (MTP weights) */
    /* SmallThinker style */
    bool smallthinker;            /* router before attention on the layer's input, ReGLU experts,
                                     moe_primary_router_apply_softmax, rope_layout (NoPE layers),
                                     sliding_window_layout + sliding_window_size */
    bool no_gguf;                 /* this family's GGUF files are refused (keys not read) */
    /* gpt-oss's pieces, each usable alone */
    bool moe_bias;                /* router and expert projections have biases (hp->moe_bias) */
    int exp_act;                  /* clb_ffn_act of its gated FFNs (0: SiLU); CLAMP reads swiglu_alpha / swiglu_limit */
    bool sinks;                   /* every layer has attention sinks */
    int window_default;           /* sliding_window when the config omits it */
    float theta_default;          /* rope_theta when the config omits it (0: 10000) */
    const char *rope_default;     /* rope_scaling (JSON) when the config gives none */
    bool gguf_yarn_exact;         /* GGUF files carry no truncate: the family's YaRN is untruncated */
    /* Llama-4 */
    bool llama4;                  /* moe_layers / interleave_moe_layer_step with dense layers of
                                     intermediate_size_mlp, an ungated shared expert, the routing
                                     weight on the expert input; no_rope_layers, layer_types
                                     (chunked on the rope layers), L2 q/k norm, temperature tuning */
    const char *hf_text_config;   /* multimodal checkpoints: the text model's keys under this key */
    const char *hf_text_prefix;   /* ... its tensors under this prefix */
    const char *hf_other_prefix[2]; /* ... and the other modalities' tensors (skipped) */
    /* Phi-3.5-MoE's pieces, each usable alone */
    bool layer_norm;              /* LayerNorm with biases for the block and final norms (CLB_NORM_LAYER) */
    bool sparsemixer;             /* sparsemixer routing (top-2 only) with router_jitter_noise */
    bool lm_head_bias_key;        /* lm_head_bias in the config gives the LM head a bias */
    bool longrope_mscale;         /* rope_scaling short_mscale / long_mscale are LongRoPE's attention factors */
    /* JetMoE style */
    bool jetmoe;                  /* mixture of attention heads (hp->n_attn_exp) over the FFN's expert
                                     count and top-k, kv_channels, activation_function, output biases
                                     of the MoA and the MoE, block norms at eps 1e-6 */
};

static const clb_arch_desc ARCHS[] = {
    {
        .name = "llama",
        .hf_arch = {"LlamaForCausalLM"},
        .hf_model_type = {"llama"},
        .gguf_arch = "llama",
        .gguf_rope = CLB_ROPE_NORM,
    },
    {
        .name = "mistral", /* Llama + sliding_window */
        .hf_arch = {"MistralForCausalLM"},
        .hf_model_type = {"mistral"},
        .gguf_arch = "llama",
        .gguf_rope = CLB_ROPE_NORM,
        .swa = SWA_ALL,
    },
    {
        .name = "qwen2",
        .hf_arch = {"Qwen2ForCausalLM"},
        .hf_model_type = {"qwen2"},
        .gguf_arch = "qwen2",
        .qkv_bias = true,
        .swa = SWA_QWEN,
    },
    {
        .name = "qwen3",
        .hf_arch = {"Qwen3ForCausalLM"},
        .hf_model_type = {"qwen3"},
        .gguf_arch = "qwen3",
        .qk_norm = CLB_QKNORM_HEAD,
        .swa = SWA_QWEN,
    },
    {
        .name = "mixtral",
        .hf_arch = {"MixtralForCausalLM"},
        .hf_model_type = {"mixtral"},
        .gguf_arch = "llama",
        .moe = true,
        .key_n_expert = "num_local_experts",
        .key_ff_exp = "intermediate_size",
        .router_score = CLB_SCORE_SOFTMAX,
        .norm_topk = true, /* softmax over the k selected logits == softmax + renormalise */
        .gguf_rope = CLB_ROPE_NORM,
        .gguf_norm_topk = true,
        .swa = SWA_ALL,
    },
    {
        .name = "qwen2moe",
        .hf_arch = {"Qwen2MoeForCausalLM"},
        .hf_model_type = {"qwen2_moe"},
        .gguf_arch = "qwen2moe",
        .moe = true,
        .key_n_expert = "num_experts",
        .key_ff_exp = "moe_intermediate_size",
        .norm_topk_key = true,
        .qkv_bias = true,
        .shexp = true,
        .sparse_step = true,
        .swa = SWA_QWEN,
    },
    {
        .name = "qwen3moe",
        .hf_arch = {"Qwen3MoeForCausalLM"},
        .hf_model_type = {"qwen3_moe"},
        .gguf_arch = "qwen3moe",
        .moe = true,
        .key_n_expert = "num_experts",
        .key_ff_exp = "moe_intermediate_size",
        .norm_topk_key = true,
        .qk_norm = CLB_QKNORM_HEAD,
        .sparse_step = true,
        .gguf_norm_topk = true,
        .swa = SWA_QWEN,
    },
    {
        .name = "olmoe",
        .hf_arch = {"OlmoeForCausalLM"},
        .hf_model_type = {"olmoe"},
        .gguf_arch = "olmoe",
        .moe = true,
        .key_n_expert = "num_experts",
        .key_ff_exp = "intermediate_size",
        .norm_topk_key = true,
        .qk_norm = CLB_QKNORM_FULL,
    },
    {
        .name = "deepseek2",
        .hf_arch = {"DeepseekV2ForCausalLM"},
        .hf_model_type = {"deepseek_v2"},
        .gguf_arch = "deepseek2",
        .moe = true,
        .key_n_expert = "n_routed_experts",
        .key_ff_exp = "moe_intermediate_size",
        .norm_topk_key = true,
        .deepseek = true,
        .gguf_rope = CLB_ROPE_NORM,
    },
    {
        .name = "deepseek3",
        .hf_arch = {"DeepseekV3ForCausalLM"},
        .hf_model_type = {"deepseek_v3"},
        .gguf_arch = "deepseek2",
        .moe = true,
        .key_n_expert = "n_routed_experts",
        .key_ff_exp = "moe_intermediate_size",
        .router_score = CLB_SCORE_SIGMOID,
        .norm_topk = true,
        .norm_topk_key = true,
        .deepseek = true,
        .deepseek_v3 = true,
        .gguf_rope = CLB_ROPE_NORM,
    },
    {
        .name = "granitemoe",
        .hf_arch = {"GraniteMoeForCausalLM"},
        .hf_model_type = {"granitemoe"},
        .gguf_arch = "granitemoe",
        .moe = true,
        .key_n_expert = "num_local_experts",
        .key_ff_exp = "intermediate_size",
        .norm_topk = true, /* softmax over the top-k logits */
        .multipliers = true,
        .gguf_rope = CLB_ROPE_NORM,
        .gguf_norm_topk = true,
    },
    /* ---- GLM-4.5 / GLM-4.5-Air ---- */
    {
        .name = "glm4moe",
        .hf_arch = {"Glm4MoeForCausalLM"},
        .hf_model_type = {"glm4_moe"},
        .gguf_arch = "glm4moe",
        .moe = true,
        .key_n_expert = "n_routed_experts",
        .key_ff_exp = "moe_intermediate_size",
        .router_score = CLB_SCORE_SIGMOID,
        .norm_topk = true,
        .norm_topk_key = true,
        .ds_moe = true,
        .qk_norm_key = true,
        .attn_bias_qkv = true,
        .prf_default = 0.5f,
        .gguf_norm_topk = true,
        .gguf_rename = {{"post_attention_norm.weight", "ffn_norm.weight"}},
    },
    /* ---- ERNIE-4.5 MoE (ERNIE-4.5-21B-A3B, -300B-A47B) ---- */
    {
        .name = "ernie4_5moe",
        .hf_arch = {"Ernie4_5_MoeForCausalLM"},
        .hf_model_type = {"ernie4_5_moe"},
        .gguf_arch = "ernie4_5-moe",
        .moe = true,
        .key_n_expert = "moe_num_experts",
        .key_ff_exp = "moe_intermediate_size",
        .key_k = "moe_k",
        .router_score = CLB_SCORE_SOFTMAX,
        .norm_topk = true,
        .ernie_moe = true,
        .tie_default = true,
        .hf_rope = CLB_ROPE_NORM, /* adjacent pairs (its apply_rotary_pos_emb interleaves) */
        .hf_rope_set = true,
        .gguf_rope = CLB_ROPE_NORM,
        .gguf_norm_topk = true,
        .hf_skip_prefix = "model.mtp_",
    },
    /* ---- SmallThinker (SmallThinker-4B-A0.6B, -21B-A3B; remote code modeling_smallthinker.py) ---- */
    {
        .name = "smallthinker",
        .hf_arch = {"SmallThinkerForCausalLM"},
        .hf_model_type = {"smallthinker"},
        .gguf_arch = "smallthinker",
        .moe = true,
        .key_n_expert = "moe_num_primary_experts",
        .key_ff_exp = "moe_ffn_hidden_size",
        .key_k = "moe_num_active_primary_experts",
        .norm_topk = true,
        .smallthinker = true,
        .tie_default = true,
        .gguf_norm_topk = true, /* llama.cpp's build_moe_ffn renormalises the top k */
    },
    {
        .name = "gpt-oss", /* GptOssConfig's defaults: layer_types, sliding_window, rope */
        .hf_arch = {"GptOssForCausalLM"},
        .hf_model_type = {"gpt_oss"},
        .gguf_arch = "gpt-oss",
        .moe = true,
        .key_n_expert = "num_local_experts",
        .key_ff_exp = "intermediate_size",
        .norm_topk = true, /* softmax over the top-k router logits */
        .gguf_norm_topk = true,
        .moe_bias = true,
        .exp_act = CLB_ACT_SWIGLU_CLAMP,
        .sinks = true,
        .swa = SWA_ALT,
        .window_default = 128,
        .theta_default = 150000.0f,
        .rope_default = "{\"rope_type\": \"yarn\", \"factor\": 32.0, \"beta_fast\": 32.0, \"beta_slow\": 1.0, "
                        "\"truncate\": false, \"original_max_position_embeddings\": 4096}",
        .gguf_yarn_exact = true,
        .gguf_rename = {{"post_attention_norm.weight", "ffn_norm.weight"}},
    },
    /* ---- Llama-4 (Scout, Maverick): the text model, alone or in Llama4ForConditionalGeneration ---- */
    {
        .name = "llama4",
        .hf_arch = {"Llama4ForCausalLM", "Llama4ForConditionalGeneration"},
        .hf_model_type = {"llama4_text", "llama4"},
        .gguf_arch = "llama4",
        .moe = true,
        .key_n_expert = "num_local_experts",
        .key_ff_exp = "intermediate_size",
        .router_score = CLB_SCORE_SIGMOID, /* sigmoid of the top-k logits, not renormalised */
        .hf_rope = CLB_ROPE_NORM, /* adjacent pairs (view_as_complex) */
        .hf_rope_set = true,
        .gguf_rope = CLB_ROPE_NORM, /* llama.cpp's converter keeps HF's q/k rows (undo_permute off) */
        .theta_default = 500000.0f,
        .llama4 = true,
        .hf_text_config = "text_config",
        .hf_text_prefix = "language_model.",
        .hf_other_prefix = {"vision_model.", "multi_modal_projector."},
    },
    /* ---- Phi-3.5-MoE (modeling_phimoe.py; the published config names PhiMoEForCausalLM) ---- */
    {
        .name = "phimoe",
        .hf_arch = {"PhimoeForCausalLM", "PhiMoEForCausalLM"},
        .hf_model_type = {"phimoe"},
        .gguf_arch = "phimoe",
        .moe = true,
        .key_n_expert = "num_local_experts",
        .key_ff_exp = "intermediate_size",
        .router_score = CLB_SCORE_SPARSEMIXER,
        .swa = SWA_ALL, /* MixtralModel's mask: sliding_window when the config sets one */
        .theta_default = 1e6f, /* PhimoeConfig's rope_theta */
        .layer_norm = true,
        .sparsemixer = true,
        .lm_head_bias_key = true,
        .longrope_mscale = true, /* PhimoeRotaryEmbedding */
    },
    /* ---- JetMoE (jetmoe-8b): mixture of attention heads + MoE FFN ---- */
    {
        .name = "jetmoe",
        .hf_arch = {"JetMoeForCausalLM"},
        .hf_model_type = {"jetmoe"},
        .gguf_arch = "jetmoe",
        .moe = true,
        .key_n_expert = "num_local_experts",
        .key_ff_exp = "intermediate_size",
        .norm_topk = true, /* JetMoeTopKGating: softmax over the top-k logits */
        .tie_default = true,
        .jetmoe = true,
        .no_gguf = true, /* neither llama.cpp nor ik_llama.cpp defines a JetMoE architecture */
    },
};

static bool str_in(const char *s, const char *const *list, int n) {
    for (int i = 0; i < n && list[i]; i++)
        if (strcmp(s, list[i]) == 0) return true;
    return false;
}

const char *clb_arch_supported_list(void) {
    static char buf[512];
    if (buf[0]) return buf;
    for (size_t i = 0; i < CLB_ARRAY_LEN(ARCHS); i++)
        for (int j = 0; j < 3 && ARCHS[i].hf_arch[j]; j++) {
            if (buf[0]) strncat(buf, ", ", sizeof buf - strlen(buf) - 1);
            strncat(buf, ARCHS[i].hf_arch[j], sizeof buf - strlen(buf) - 1);
        }
    return buf;
}

const clb_arch_desc *clb_arch_from_hf(const cJSON *config) {
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(config, "architectures");
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(config, "model_type");
    const char *arch0 = NULL;
    if (cJSON_IsArray(archs) && cJSON_IsString(cJSON_GetArrayItem(archs, 0)))
        arch0 = cJSON_GetArrayItem(archs, 0)->valuestring;
    for (size_t i = 0; i < CLB_ARRAY_LEN(ARCHS); i++) {
        if (arch0 && str_in(arch0, ARCHS[i].hf_arch, 3)) return &ARCHS[i];
    }
    if (!arch0 && cJSON_IsString(mt)) {
        for (size_t i = 0; i < CLB_ARRAY_LEN(ARCHS); i++)
            if (str_in(mt->valuestring, ARCHS[i].hf_model_type, 3)) return &ARCHS[i];
    }
    clb_err(COLIBRI_ERR_UNSUPPORTED, "unsupported architecture '%s' (supported: %s)",
            arch0 ? arch0 : (cJSON_IsString(mt) ? mt->valuestring : "(none given)"),
            clb_arch_supported_list());
    return NULL;
}

const clb_arch_desc *clb_arch_by_name(const char *name) {
    for (size_t i = 0; i < CLB_ARRAY_LEN(ARCHS); i++)
        if (strcmp(ARCHS[i].name, name) == 0) return &ARCHS[i];
    clb_err(COLIBRI_ERR_UNSUPPORTED, "unsupported architecture '%s'", name);
    return NULL;
}

const clb_arch_desc *clb_arch_from_gguf_name(const char *gguf_arch) {
    for (size_t i = 0; i < CLB_ARRAY_LEN(ARCHS); i++)
        if (strcmp(ARCHS[i].gguf_arch, gguf_arch) == 0) {
            if (!ARCHS[i].no_gguf) return &ARCHS[i];
            clb_err(COLIBRI_ERR_UNSUPPORTED,
                    "GGUF architecture '%s' is not supported (convert its Hugging Face directory instead)", gguf_arch);
            return NULL;
        }
    clb_err(COLIBRI_ERR_UNSUPPORTED, "unsupported GGUF architecture '%s'", gguf_arch);
    return NULL;
}

const char *clb_arch_name(const clb_arch_desc *d) { return d ? d->name : "?"; }

static bool has_prefix(const char *s, const char *prefix) {
    return prefix && strncmp(s, prefix, strlen(prefix)) == 0;
}

const char *clb_arch_hf_text_name(const clb_arch_desc *d, const char *hf) {
    return d && has_prefix(hf, d->hf_text_prefix) ? hf + strlen(d->hf_text_prefix) : hf;
}

bool clb_arch_hf_ignored(const clb_arch_desc *d, const char *hf) {
    return d && (has_prefix(hf, d->hf_skip_prefix) || has_prefix(hf, d->hf_other_prefix[0]) ||
                 has_prefix(hf, d->hf_other_prefix[1]));
}

const char *clb_arch_gguf_rename(const clb_arch_desc *d, const char *suffix) {
    for (int i = 0; d && i < 2 && d->gguf_rename[i][0]; i++)
        if (strcmp(suffix, d->gguf_rename[i][0]) == 0) return d->gguf_rename[i][1];
    return NULL;
}
const char *clb_arch_gguf_name(const clb_arch_desc *d) { return d ? d->gguf_arch : "?"; }

void clb_arch_gguf_defaults(const clb_arch_desc *d, clb_hparams *hp) {
    snprintf(hp->arch, sizeof hp->arch, "%s", d->name);
    hp->qk_norm = d->qk_norm;
    hp->rope_style = d->gguf_rope;
    hp->router_score = d->router_score;
    hp->norm_topk = d->gguf_norm_topk;
    hp->routed_scale = 1.0f;
    hp->moe_step = 1;
    if (d->deepseek) hp->attn_kind = CLB_ATTN_MLA;
    if (d->multipliers) hp->embd_mult = hp->resid_mult = hp->attn_mult = hp->logit_div = 1.0f;
    if (d->ernie_moe) hp->norm_min = 1e-12f; /* Ernie4_5_MoeConfig's moe_norm_min (a GGUF has no key) */
    hp->moe_bias = d->moe_bias;
    if (d->exp_act) hp->ffn_act = d->exp_act;
    if (d->exp_act == CLB_ACT_SWIGLU_CLAMP) {
        hp->act_alpha = 1.702f;
        hp->act_limit = 7.0f;
    }
    hp->rope_yarn_exact = d->gguf_yarn_exact;
    if (d->layer_norm) hp->norm_kind = CLB_NORM_LAYER;
    /* a GGUF has no router_jitter_noise: PhimoeConfig's default, Phi-3.5-MoE's value */
    if (d->sparsemixer) hp->router_jitter = 0.01f;
    if (d->smallthinker) { /* expert_gating_func (1 softmax, 2 sigmoid) may override the score */
        hp->router_score = CLB_SCORE_SIGMOID; /* moe_primary_router_apply_softmax's default */
        hp->router_pre_attn = true;
        hp->ffn_act = CLB_ACT_RELU;
    }
}

static int gguf_llama4(int window, int moe_step, clb_hparams *hp);

/* SmallThinker (llama.cpp's loader): with attention.sliding_window > 0, every 4th layer
   from layer 0 is full attention without rope and the others slide (the file stores no
   rope_layout / sliding_window_layout; SmallThinker's configs have this layout); without
   it rope on every layer and no window. llama.cpp replaces the file's window by 4096; the
   file's value is what the HF config said, so it is used. */
static int gguf_smallthinker(int window, clb_hparams *hp) {
    if (window <= 0) return COLIBRI_OK;
    if (!clb_hparams_attn_layers(hp)) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    for (int l = 0; l < hp->n_layer; l++) {
        hp->attn_layers[l].no_rope = l % 4 == 0;
        hp->attn_layers[l].window = l % 4 == 0 ? 0 : window;
    }
    return COLIBRI_OK;
}

int clb_arch_gguf_layers(const clb_arch_desc *d, int window, int moe_step, clb_hparams *hp) {
    if (d && d->llama4) return gguf_llama4(window, moe_step, hp);
    if (d && d->smallthinker) return gguf_smallthinker(window, hp);
    /* attention.sliding_window (0: none) on every layer where the HF family applies the
       config's sliding_window to every layer (Mixtral's mask; llama.cpp's phimoe converter
       writes the key, its llama converter does not) */
    const bool all = d && d->swa == SWA_ALL && window > 0;
    if (!d || (d->swa != SWA_ALT && !d->sinks && !all)) return COLIBRI_OK;
    if (!clb_hparams_attn_layers(hp)) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    for (int l = 0; l < hp->n_layer; l++) {
        if (all) hp->attn_layers[l].window = window;
        if (d->swa == SWA_ALT && l % 2 == 0) hp->attn_layers[l].window = window > 0 ? window : d->window_default;
        if (d->sinks) hp->attn_layers[l].sinks = true;
    }
    return COLIBRI_OK;
}

/* ---- config.json reading ---- */

static const cJSON *key(const cJSON *c, const char *k) { return cJSON_GetObjectItemCaseSensitive(c, k); }

static const char *json_type_name(const cJSON *v) {
    return cJSON_IsString(v) ? "a string" : cJSON_IsBool(v) ? "a boolean" : cJSON_IsArray(v) ? "a list"
         : cJSON_IsObject(v) ? "an object" : cJSON_IsNull(v) ? "null" : "a number";
}

static int get_int(const cJSON *c, const char *k, int def, bool required, int *out) {
    const cJSON *v = key(c, k);
    if (!v || cJSON_IsNull(v)) {
        if (required) return clb_err(COLIBRI_ERR_FORMAT, "config.json: missing '%s'", k);
        *out = def;
        return COLIBRI_OK;
    }
    if (!cJSON_IsNumber(v))
        return clb_err(COLIBRI_ERR_FORMAT, "config.json: '%s' must be an integer, not %s", k, json_type_name(v));
    /* the range before the conversion: (int) of 2^31 is undefined */
    if (!(v->valuedouble >= -(double)INT_MAX && v->valuedouble <= (double)INT_MAX))
        return clb_err(COLIBRI_ERR_FORMAT, "config.json: '%s' = %.17g is out of range (at most %d)", k, v->valuedouble,
                       INT_MAX);
    if (v->valuedouble != (double)(int)v->valuedouble)
        return clb_err(COLIBRI_ERR_FORMAT, "config.json: '%s' = %.17g must be an integer", k, v->valuedouble);
    *out = (int)v->valuedouble;
    return COLIBRI_OK;
}

static int get_float(const cJSON *c, const char *k, float def, float *out) {
    const cJSON *v = key(c, k);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return COLIBRI_OK;
    }
    if (!cJSON_IsNumber(v))
        return clb_err(COLIBRI_ERR_FORMAT, "config.json: '%s' must be a number, not %s", k, json_type_name(v));
    *out = (float)v->valuedouble;
    return COLIBRI_OK;
}

static int get_bool(const cJSON *c, const char *k, bool def, bool *out) {
    const cJSON *v = key(c, k);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return COLIBRI_OK;
    }
    if (!cJSON_IsBool(v))
        return clb_err(COLIBRI_ERR_FORMAT, "config.json: '%s' must be true or false, not %s", k, json_type_name(v));
    *out = cJSON_IsTrue(v);
    return COLIBRI_OK;
}

/* bos/eos may be an int or a list of ints (first is used). */
static int get_token_id(const cJSON *c, const char *k, int *out) {
    const cJSON *v = key(c, k);
    *out = -1;
    if (cJSON_IsArray(v)) v = cJSON_GetArrayItem(v, 0);
    if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= (double)INT_MAX) *out = (int)v->valuedouble;
    return COLIBRI_OK;
}

/* LongRoPE (modeling_rope_utils._compute_longrope_parameters, Phi-3 / Phi-3.5-MoE):
   inv_freq[i] = 1 / (ext[i] * theta^(2i/dim)) with ext = short_factor, or long_factor when
   the sequence is longer than original_max_position_embeddings (rope_scaling's, else the
   config's, else max_position_embeddings); cos and sin times attention_factor, by default
   sqrt(1 + ln(factor) / ln(original)) for factor = rope_scaling.factor or max_position /
   original (1 when factor <= 1); with mscale (Phi-3.5-MoE's rotary embedding)
   short_mscale / long_mscale, when given, replace it for their set. */
static int read_factors(const cJSON *rs, const char *k, int n, float *out) {
    const cJSON *v = key(rs, k);
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != n)
        return clb_err(COLIBRI_ERR_FORMAT, "config.json: rope_scaling longrope %s must list %d numbers", k, n);
    for (int i = 0; i < n; i++) {
        const cJSON *it = cJSON_GetArrayItem(v, i);
        if (!cJSON_IsNumber(it) || !(it->valuedouble > 0 && it->valuedouble < 1e30))
            return clb_err(COLIBRI_ERR_FORMAT, "config.json: rope_scaling longrope %s[%d] must be a positive number", k, i);
        out[i] = (float)it->valuedouble;
    }
    return COLIBRI_OK;
}

static int parse_longrope(const cJSON *rs, const cJSON *c, bool mscale, clb_hparams *hp) {
    int rc, orig = 0;
    float factor = 0, att = 0;
    if ((rc = get_int(c, "original_max_position_embeddings", hp->max_pos, false, &orig)) ||
        (rc = get_int(rs, "original_max_position_embeddings", orig, false, &orig)) ||
        (rc = get_float(rs, "factor", 0.0f, &factor)) || (rc = get_float(rs, "attention_factor", 0.0f, &att)))
        return rc;
    if (mscale && ((rc = get_float(rs, "short_mscale", 0.0f, &hp->rope_short_mscale)) ||
                   (rc = get_float(rs, "long_mscale", 0.0f, &hp->rope_long_mscale))))
        return rc;
    if (orig < 1 || orig > CLB_MAX_CONTEXT)
        return clb_err(COLIBRI_ERR_FORMAT, "config.json: longrope original_max_position_embeddings %d out of range", orig);
    if (factor == 0) factor = (float)hp->max_pos / (float)orig;
    if (!(factor > 0 && att >= 0 && hp->rope_short_mscale >= 0 && hp->rope_long_mscale >= 0))
        return clb_err(COLIBRI_ERR_FORMAT, "config.json: longrope factor / attention_factor / mscale out of range");
    if (att == 0) att = factor <= 1 ? 1.0f : sqrtf(1.0f + logf(factor) / logf((float)orig));
    if (hp->rope_short_mscale == 0) hp->rope_short_mscale = att;
    if (hp->rope_long_mscale == 0) hp->rope_long_mscale = att;
    hp->rope_scaling = CLB_ROPE_SCALING_LONGROPE;
    hp->rope_factor = factor;
    hp->rope_orig_ctx = (float)orig;
    /* partial_rotary_factor is applied later: the lists must fit the rotary dims then
       (clb_hparams_validate); they are read at the length they state */
    const cJSON *sf = key(rs, "short_factor");
    hp->rope_ext_n = cJSON_IsArray(sf) ? cJSON_GetArraySize(sf) : 0;
    if (hp->rope_ext_n < 1 || hp->rope_ext_n > 512)
        return clb_err(COLIBRI_ERR_FORMAT, "config.json: rope_scaling longrope needs short_factor, a list of 1..512 numbers");
    clb_free(hp->rope_ext);
    hp->rope_ext = clb_calloc((size_t)hp->rope_ext_n * 2, sizeof(float));
    if (!hp->rope_ext) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    if ((rc = read_factors(rs, "short_factor", hp->rope_ext_n, hp->rope_ext)) ||
        (rc = read_factors(rs, "long_factor", hp->rope_ext_n, hp->rope_ext + hp->rope_ext_n)))
        return rc;
    return COLIBRI_OK;
}

/* rs: config.rope_scaling, or (transformers >= 5) rope_parameters, or the family's default;
   c: the whole config (longrope reads original_max_position_embeddings there too) */
static int parse_rope_scaling(const clb_arch_desc *d, const cJSON *rs, const cJSON *c, clb_hparams *hp) {
    hp->rope_scaling = CLB_ROPE_SCALING_NONE;
    if (!rs || cJSON_IsNull(rs)) return COLIBRI_OK;
    if (!cJSON_IsObject(rs)) return clb_err(COLIBRI_ERR_FORMAT, "config.json: 'rope_scaling' must be an object");
    const cJSON *t = key(rs, "rope_type");
    if (!cJSON_IsString(t)) t = key(rs, "type");
    if (!cJSON_IsString(t)) return clb_err(COLIBRI_ERR_FORMAT, "config.json: rope_scaling without rope_type");
    const char *ty = t->valuestring;
    if (strcmp(ty, "default") == 0) return COLIBRI_OK;
    int rc = get_float(rs, "factor", 1.0f, &hp->rope_factor);
    if (rc) return rc;
    if (strcmp(ty, "linear") == 0) {
        hp->rope_scaling = CLB_ROPE_SCALING_LINEAR;
    } else if (strcmp(ty, "llama3") == 0) {
        hp->rope_scaling = CLB_ROPE_SCALING_LLAMA3;
        if ((rc = get_float(rs, "low_freq_factor", 1.0f, &hp->rope_low_freq_factor)) ||
            (rc = get_float(rs, "high_freq_factor", 4.0f, &hp->rope_high_freq_factor)) ||
            (rc = get_float(rs, "original_max_position_embeddings", 8192.0f, &hp->rope_orig_ctx)))
            return rc;
    } else if (strcmp(ty, "yarn") == 0) {
        hp->rope_scaling = CLB_ROPE_SCALING_YARN;
        if ((rc = get_float(rs, "beta_fast", 32.0f, &hp->rope_beta_fast)) ||
            (rc = get_float(rs, "beta_slow", 1.0f, &hp->rope_beta_slow)) ||
            (rc = get_float(rs, "mscale", 0.0f, &hp->rope_mscale)) ||
            (rc = get_float(rs, "attention_factor", 0.0f, &hp->rope_attn_factor)) ||
            (rc = get_float(rs, "mscale_all_dim", 0.0f, &hp->rope_mscale_all_dim)) ||
            (rc = get_float(rs, "original_max_position_embeddings", (float)hp->max_pos,
                            &hp->rope_orig_ctx)))
            return rc;
        const cJSON *tr = key(rs, "truncate");
        if (tr && !cJSON_IsNull(tr) && !cJSON_IsBool(tr))
            return clb_err(COLIBRI_ERR_FORMAT, "config.json: rope_scaling truncate must be true or false");
        hp->rope_yarn_exact = cJSON_IsFalse(tr);
    } else if (strcmp(ty, "longrope") == 0) {
        return parse_longrope(rs, c, d->longrope_mscale, hp);
    } else {
        return clb_err(COLIBRI_ERR_UNSUPPORTED, "config.json: rope_scaling type '%s' is not supported", ty);
    }
    return COLIBRI_OK;
}


/* The rope_scaling a config states (rope_scaling, else transformers 5's rope_parameters,
   whose rope_theta also counts), else the family's configuration-class default. */
static int parse_rope_scaling_of(const clb_arch_desc *d, const cJSON *c, clb_hparams *hp) {
    const cJSON *rs = key(c, "rope_scaling");
    if (!rs || cJSON_IsNull(rs)) {
        const cJSON *rp = key(c, "rope_parameters");
        if (cJSON_IsObject(rp)) {
            int rc = get_float(rp, "rope_theta", hp->rope_theta, &hp->rope_theta);
            if (rc) return rc;
            rs = rp;
        }
    }
    if ((!rs || cJSON_IsNull(rs)) && d->rope_default) {
        cJSON *def = cJSON_Parse(d->rope_default);
        if (!def) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
        int rc = parse_rope_scaling(d, def, c, hp);
        cJSON_Delete(def);
        return rc;
    }
    return parse_rope_scaling(d, rs, c, hp);
}

/* Qwen-MoE: MoE on layers with (l + 1) % decoder_sparse_step == 0 that are not in
   mlp_only_layers; the others use the dense MLP of intermediate_size. */
static int parse_sparse_step(const cJSON *c, clb_hparams *hp) {
    int rc = get_int(c, "decoder_sparse_step", 1, false, &hp->moe_step);
    if (rc) return rc;
    if (hp->moe_step < 1) return clb_err(COLIBRI_ERR_FORMAT, "config.json: decoder_sparse_step must be >= 1");
    for (int l = 0; l < hp->n_layer; l++) hp->dense_layers[l] = (l + 1) % hp->moe_step != 0;
    const cJSON *ml = key(c, "mlp_only_layers"), *it;
    if (ml && !cJSON_IsNull(ml) && !cJSON_IsArray(ml))
        return clb_err(COLIBRI_ERR_FORMAT, "config.json: mlp_only_layers must be a list");
    cJSON_ArrayForEach(it, ml) {
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble >= hp->n_layer)
            return clb_err(COLIBRI_ERR_FORMAT, "config.json: mlp_only_layers entry out of range");
        hp->dense_layers[(int)it->valuedouble] = 1;
    }
    return COLIBRI_OK;
}

/* DeepSeek-V2/V3: multi-head latent attention, leading dense layers, shared experts and
   their router variants. */
/* DeepSeek's MoE layout (also GLM-4.5's): leading dense layers, shared experts, routed
   scaling, expert groups. freq: moe_layer_freq (1 for families without the key). */
static int parse_ds_moe_layout(const cJSON *c, clb_hparams *hp, int freq) {
    int rc, n_sh = 0;
    if ((rc = get_int(c, "first_k_dense_replace", 0, false, &hp->first_dense)) ||
        (rc = get_int(c, "n_shared_experts", 0, false, &n_sh)) ||
        (rc = get_float(c, "routed_scaling_factor", 1.0f, &hp->routed_scale)) ||
        (rc = get_int(c, "n_group", 0, false, &hp->n_group)) ||
        (rc = get_int(c, "topk_group", 0, false, &hp->topk_group)))
        return rc;
    if (n_sh < 0 || n_sh > 1024) return clb_err(COLIBRI_ERR_FORMAT, "config.json: n_shared_experts %d out of range", n_sh);
    for (int l = 0; l < hp->n_layer; l++) hp->dense_layers[l] = l < hp->first_dense || l % freq != 0;
    hp->n_shared_exp = n_sh;
    hp->n_ff_shexp = n_sh * hp->n_ff_exp;
    return COLIBRI_OK;
}

static int check_groups(const clb_hparams *hp) {
    if (hp->n_group > 1 && (hp->topk_group < 1 || hp->topk_group > hp->n_group || hp->n_expert % hp->n_group))
        return clb_err(COLIBRI_ERR_FORMAT, "config.json: n_group %d / topk_group %d do not fit %d experts", hp->n_group,
                       hp->topk_group, hp->n_expert);
    return COLIBRI_OK;
}

/* GLM-4.5 (Glm4MoeMoE.route_tokens_to_experts): always sigmoid scores, the correction bias
   for selection, groups scored by their two best, no scoring_func / topk_method keys. */
static int parse_glm_moe(const cJSON *c, clb_hparams *hp) {
    int rc = parse_ds_moe_layout(c, hp, 1);
    if (rc) return rc;
    hp->router_score = CLB_SCORE_SIGMOID;
    hp->group_score = 1;
    hp->score_bias = true;
    return check_groups(hp);
}

/* ERNIE-4.5 (Ernie4_5_MoeDecoderLayer / SparseMoeBlock): MoE on layers l with
   (l + 1) % moe_layer_interval == 0 and start <= l <= end (end -1 = the last); softmax
   scores, e_score_correction_bias (moe_statics) for selection only, the selected weights
   divided by max(their sum, moe_norm_min); moe_num_shared_experts ungated shared experts. */
static int parse_ernie_moe(const cJSON *c, clb_hparams *hp) {
    int rc, start = 1, end = -1, step = 1, n_sh = 2;
    bool use_bias = false;
    if ((rc = get_int(c, "moe_layer_start_index", 1, false, &start)) ||
        (rc = get_int(c, "moe_layer_end_index", -1, false, &end)) ||
        (rc = get_int(c, "moe_layer_interval", 1, false, &step)) ||
        (rc = get_int(c, "moe_num_shared_experts", 2, false, &n_sh)) ||
        (rc = get_float(c, "moe_norm_min", 1e-12f, &hp->norm_min)) || (rc = get_bool(c, "use_bias", false, &use_bias)))
        return rc;
    if (use_bias) return clb_err(COLIBRI_ERR_UNSUPPORTED, "config.json: use_bias=true is not supported");
    if (end == -1) end = hp->n_layer - 1;
    if (step < 1 || start < 0 || end < -1 || n_sh < 0 || n_sh > 1024 || !(hp->norm_min >= 0 && hp->norm_min < 1))
        return clb_err(COLIBRI_ERR_FORMAT,
                       "config.json: moe_layer_interval %d / moe_layer_start_index %d / moe_layer_end_index %d / "
                       "moe_num_shared_experts %d / moe_norm_min %g out of range",
                       step, start, end, n_sh, (double)hp->norm_min);
    for (int l = 0; l < hp->n_layer; l++) hp->dense_layers[l] = !((l + 1) % step == 0 && l >= start && l <= end);
    hp->n_shared_exp = n_sh;
    hp->n_ff_shexp = n_sh * hp->n_ff_exp;
    hp->score_bias = true;
    return COLIBRI_OK;
}

/* SmallThinker (SmallThinkerDecoderLayer / MoeBlock): the primary router reads the layer's
   input (before input_layernorm and attention); top-k of its logits, then softmax over
   those k (moe_primary_router_apply_softmax) or their sigmoids divided by their sum — the
   same as scoring every expert and renormalising the top k; experts up * relu(gate); rope
   only on layers with rope_layout 1; sliding_window_size on layers with
   sliding_window_layout 1. */
static int layout_list(const cJSON *c, const char *k, int n_layer, bool def, uint8_t *out) {
    const cJSON *v = key(c, k);
    for (int l = 0; l < n_layer; l++) out[l] = def;
    if (!v || cJSON_IsNull(v)) return COLIBRI_OK;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != n_layer)
        return clb_err(COLIBRI_ERR_FORMAT, "config.json: '%s' must list the %d layers", k, n_layer);
    for (int l = 0; l < n_layer; l++) {
        const cJSON *it = cJSON_GetArrayItem(v, l);
        if (!cJSON_IsNumber(it) || (it->valuedouble != 0 && it->valuedouble != 1))
            return clb_err(COLIBRI_ERR_FORMAT, "config.json: '%s'[%d] must be 0 or 1", k, l);
        out[l] = it->valuedouble == 1;
    }
    return COLIBRI_OK;
}

static int parse_smallthinker(const cJSON *c, clb_hparams *hp) {
    bool sm = false;
    int rc, sw = 4096;
    uint8_t rope[CLB_MAX_LAYERS], swa[CLB_MAX_LAYERS];
    if ((rc = get_bool(c, "moe_primary_router_apply_softmax", false, &sm)) ||
        (rc = get_int(c, "sliding_window_size", 4096, false, &sw)) ||
        (rc = layout_list(c, "rope_layout", hp->n_layer, true, rope)) ||
        (rc = layout_list(c, "sliding_window_layout", hp->n_layer, false, swa)))
        return rc;
    hp->router_score = sm ? CLB_SCORE_SOFTMAX : CLB_SCORE_SIGMOID;
    hp->norm_topk = true;
    hp->router_pre_attn = true;
    hp->ffn_act = CLB_ACT_RELU;
    bool any = false;
    for (int l = 0; l < hp->n_layer; l++) any |= !rope[l] || swa[l];
    if (!any) return COLIBRI_OK;
    if (sw <= 0) return clb_err(COLIBRI_ERR_FORMAT, "config.json: sliding_window_size %d must be positive", sw);
    if (!clb_hparams_attn_layers(hp)) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    for (int l = 0; l < hp->n_layer; l++) {
        hp->attn_layers[l].no_rope = !rope[l];
        hp->attn_layers[l].window = swa[l] ? sw : 0;
    }
    return COLIBRI_OK;
}

/* Phi-3.5-MoE (PhimoeDecoderLayer / PhimoeSparseMoeBlock): nn.LayerNorm (weight and bias,
   eps rms_norm_eps) for input_layernorm, post_attention_layernorm and the final norm;
   sparsemixer routing, which modeling_phimoe.py defines for top_k 2 only, with
   router_jitter_noise as its threshold (input_jitter_noise acts in training only);
   lm_head_bias. */
static int parse_phimoe_pieces(const clb_arch_desc *d, const cJSON *c, clb_hparams *hp) {
    int rc;
    if (d->layer_norm) hp->norm_kind = CLB_NORM_LAYER;
    if (d->lm_head_bias_key && (rc = get_bool(c, "lm_head_bias", false, &hp->out_bias))) return rc;
    if (!d->sparsemixer) return COLIBRI_OK;
    if ((rc = get_float(c, "router_jitter_noise", 0.01f, &hp->router_jitter))) return rc;
    if (!(hp->router_jitter >= 0 && hp->router_jitter <= 1e3f))
        return clb_err(COLIBRI_ERR_FORMAT, "config.json: router_jitter_noise %g out of range [0, 1000]",
                       (double)hp->router_jitter);
    if (hp->n_expert_used != 2)
        return clb_err(COLIBRI_ERR_UNSUPPORTED,
                       "config.json: num_experts_per_tok %d is not supported with sparsemixer routing (only 2)",
                       hp->n_expert_used);
    return COLIBRI_OK;
}

static int parse_deepseek(const clb_arch_desc *d, const cJSON *c, clb_hparams *hp) {
    int rc, nope = 0, rope = 0, vd = 0, freq = 1;
    hp->attn_kind = CLB_ATTN_MLA;
    if ((rc = get_int(c, "q_lora_rank", 0, false, &hp->q_lora_rank)) ||
        (rc = get_int(c, "kv_lora_rank", 0, true, &hp->kv_lora_rank)) ||
        (rc = get_int(c, "qk_nope_head_dim", 0, true, &nope)) ||
        (rc = get_int(c, "qk_rope_head_dim", 0, true, &rope)) || (rc = get_int(c, "v_head_dim", 0, true, &vd)) ||
        (rc = get_int(c, "moe_layer_freq", 1, false, &freq)))
        return rc;
    if (nope < 0 || rope <= 0 || rope % 2 || vd <= 0 || hp->kv_lora_rank <= 0 || hp->q_lora_rank < 0 || freq < 1)
        return clb_err(COLIBRI_ERR_FORMAT, "config.json: invalid MLA dimensions");
    if ((rc = parse_ds_moe_layout(c, hp, freq))) return rc;
    hp->head_dim = nope + rope;
    hp->head_dim_v = vd;
    hp->n_rot = rope;
    hp->rope_offset = nope;
    hp->n_head_kv = hp->n_head; /* K and V are decompressed per head */
    hp->rope_style = CLB_ROPE_NORM; /* DeepSeek rotates interleaved pairs (rope_interleave) */
    const cJSON *ri = key(c, "rope_interleave");
    if (cJSON_IsFalse(ri) && d->deepseek_v3) hp->rope_style = CLB_ROPE_NEOX;
    const cJSON *sf = key(c, "scoring_func"), *tm = key(c, "topk_method");
    if (cJSON_IsString(sf)) {
        if (!strcmp(sf->valuestring, "softmax")) hp->router_score = CLB_SCORE_SOFTMAX;
        else if (!strcmp(sf->valuestring, "sigmoid")) hp->router_score = CLB_SCORE_SIGMOID;
        else return clb_err(COLIBRI_ERR_UNSUPPORTED, "config.json: scoring_func '%s' is not supported", sf->valuestring);
    }
    const char *method = cJSON_IsString(tm) ? tm->valuestring : d->deepseek_v3 ? "noaux_tc" : "greedy";
    if (!strcmp(method, "greedy")) {
        hp->n_group = hp->topk_group = 0;
    } else if (!strcmp(method, "group_limited_greedy")) {
        hp->group_score = 0;
    } else if (!strcmp(method, "noaux_tc")) {
        hp->group_score = 1;
        hp->score_bias = true;
    } else {
        return clb_err(COLIBRI_ERR_UNSUPPORTED, "config.json: topk_method '%s' is not supported", method);
    }
    if ((rc = check_groups(hp))) return rc;
    /* softmax scale: qk_head_dim^-0.5, times mscale(factor, mscale_all_dim)^2 under YaRN */
    hp->attn_mult = 1.0f / sqrtf((float)hp->head_dim);
    const cJSON *rs = key(c, "rope_scaling");
    if (hp->rope_scaling == CLB_ROPE_SCALING_YARN && cJSON_IsObject(rs)) {
        float mad = 0;
        if ((rc = get_float(rs, "mscale_all_dim", 0.0f, &mad))) return rc;
        if (mad != 0 && hp->rope_factor > 1) {
            float ms = 0.1f * mad * logf(hp->rope_factor) + 1.0f;
            hp->attn_mult *= ms * ms;
        }
    }
    return COLIBRI_OK;
}

/* Llama-4's per-layer attention (rope[l]: a rope layer; chunked[l]: chunked attention of
   `chunk`), the L2 q/k norm on the rope layers and the temperature tuning on the others;
   its ungated shared expert of the expert width, the routing weight on the expert input. */
static int llama4_layers(clb_hparams *hp, const uint8_t *rope, const uint8_t *chunked, int chunk, bool qkn, bool temp) {
    if (!clb_hparams_attn_layers(hp)) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    for (int l = 0; l < hp->n_layer; l++) {
        hp->attn_layers[l].no_rope = !rope[l];
        hp->attn_layers[l].chunk = chunked[l] ? chunk : 0;
        hp->attn_layers[l].qk_l2 = qkn && rope[l];
        hp->attn_layers[l].temp_tune = temp && !rope[l];
    }
    hp->n_shared_exp = 1;
    hp->n_ff_shexp = hp->n_ff_exp;
    hp->moe_weight_on_input = true;
    return COLIBRI_OK;
}

/* Llama-4 (Llama4TextConfig.__post_init__, modeling_llama4.py): MoE on moe_layers, by
   default every interleave_moe_layer_step-th layer from step - 1 on, the others an MLP of
   intermediate_size_mlp; the MoE block is top-k of the router logits, sigmoid of those,
   each expert fed x * its score, plus an ungated shared expert of intermediate_size. Rope
   on the layers with no_rope_layers[l] = 1 (default: (l + 1) % no_rope_layer_interval != 0);
   layer_types default to chunked attention (attention_chunk_size) on those, full on the
   NoPE ones; use_qk_norm: L2 norm of each q/k head after rope, on the rope layers only;
   attn_temperature_tuning (a boolean, or a number whose truth counts, as the published
   configs give it): q scaled on the NoPE layers. Defaults are Llama4TextConfig's. */
static int parse_llama4(const cJSON *c, clb_hparams *hp) {
    int rc, step = 1, interval = 4, chunk = 8192;
    bool qkn = true, temp = true;
    const int n = hp->n_layer;
    uint8_t rope[CLB_MAX_LAYERS], moe[CLB_MAX_LAYERS] = {0}, chunked[CLB_MAX_LAYERS];
    if ((rc = get_int(c, "intermediate_size_mlp", 16384, false, &hp->n_ff)) ||
        (rc = get_int(c, "interleave_moe_layer_step", 1, false, &step)) ||
        (rc = get_int(c, "no_rope_layer_interval", 4, false, &interval)) ||
        (rc = get_int(c, "attention_chunk_size", 8192, false, &chunk)) ||
        (rc = get_bool(c, "use_qk_norm", true, &qkn)) ||
        (rc = get_float(c, "floor_scale", 8192.0f, &hp->attn_temp_floor)) ||
        (rc = get_float(c, "attn_scale", 0.1f, &hp->attn_temp_scale)))
        return rc;
    if (cJSON_IsNull(key(c, "attention_chunk_size"))) chunk = 0;
    if (!key(c, "rms_norm_eps")) hp->norm_eps = 1e-5f;
    if (!key(c, "head_dim")) hp->head_dim = hp->head_dim_v = hp->n_rot = 128;
    const cJSON *tt = key(c, "attn_temperature_tuning");
    if (tt && !cJSON_IsBool(tt) && !cJSON_IsNumber(tt))
        return clb_err(COLIBRI_ERR_FORMAT, "config.json: 'attn_temperature_tuning' must be a boolean or a number");
    if (tt) temp = cJSON_IsNumber(tt) ? tt->valuedouble != 0 : cJSON_IsTrue(tt);
    if (step < 1 || interval < 1 || chunk < 0 || (temp && !(hp->attn_temp_floor >= 1)))
        return clb_err(COLIBRI_ERR_FORMAT,
                       "config.json: interleave_moe_layer_step %d / no_rope_layer_interval %d / "
                       "attention_chunk_size %d / floor_scale %g out of range",
                       step, interval, chunk, (double)hp->attn_temp_floor);
    for (int l = 0; l < n; l++) rope[l] = (l + 1) % interval != 0;
    const cJSON *nr = key(c, "no_rope_layers"), *ml = key(c, "moe_layers"), *it;
    if (cJSON_IsArray(nr) && cJSON_GetArraySize(nr) > 0 && (rc = layout_list(c, "no_rope_layers", n, true, rope)))
        return rc; /* an empty list means the default, as in the config class */
    if (ml && !cJSON_IsNull(ml)) {
        if (!cJSON_IsArray(ml)) return clb_err(COLIBRI_ERR_FORMAT, "config.json: moe_layers must be a list");
        cJSON_ArrayForEach(it, ml) {
            if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble >= n ||
                it->valuedouble != (double)(int)it->valuedouble)
                return clb_err(COLIBRI_ERR_FORMAT, "config.json: moe_layers entry out of range 0..%d", n - 1);
            moe[(int)it->valuedouble] = 1;
        }
    } else {
        for (int l = step - 1; l < n; l += step) moe[l] = 1;
    }
    const cJSON *lt = key(c, "layer_types");
    if (lt && !cJSON_IsNull(lt) && (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != n))
        return clb_err(COLIBRI_ERR_FORMAT, "config.json: layer_types must list the %d layers", n);
    for (int l = 0; l < n; l++) {
        const cJSON *t = cJSON_IsArray(lt) ? cJSON_GetArrayItem(lt, l) : NULL;
        const char *ty = !t ? (rope[l] ? "chunked_attention" : "full_attention") : cJSON_IsString(t) ? t->valuestring : "";
        chunked[l] = !strcmp(ty, "chunked_attention");
        if (!chunked[l] && strcmp(ty, "full_attention"))
            return clb_err(COLIBRI_ERR_UNSUPPORTED, "config.json: layer_types[%d] '%s' is not supported", l, ty);
        if (chunked[l] && chunk <= 0)
            return clb_err(COLIBRI_ERR_FORMAT, "config.json: layer %d is chunked_attention without attention_chunk_size", l);
    }
    for (int l = 0; l < n; l++) hp->dense_layers[l] = !moe[l];
    return llama4_layers(hp, rope, chunked, chunk, qkn, temp);
}

/* Llama-4 GGUF files, read as llama.cpp's llama4 loader reads them (llama-model.cpp,
   ik_llama.cpp's llama-hparams.cpp): the file states the sizes, expert_count,
   expert_feed_forward_length and interleave_moe_layer_step; the rest is fixed in its code,
   with the values Llama4TextConfig takes by default (and the published Scout / Maverick
   configs keep): chunks of 8192 on the rope layers, NoPE on every 4th layer with
   temperature tuning floor 8192 / scale 0.1, the q/k L2 norm unless the model has 128
   experts (llama.cpp: off for its 17B_128E type, Maverick, whose config says
   use_qk_norm false; on for Scout's 16). attention.sliding_window 0 (written when every
   layer_types entry is full_attention) means no chunk and rope on every layer (mainline
   llama.cpp; ik_llama.cpp ignores the key); another value is refused, as llama.cpp would
   run 8192 whatever it says. MoE layers are those with a router, and must be the ones
   the step makes MoE, (l + 1) % step == 0, as llama.cpp loads them. */
static int gguf_llama4(int window, int moe_step, clb_hparams *hp) {
    enum { CHUNK = 8192, NOPE_INTERVAL = 4 };
    const int n = hp->n_layer;
    uint8_t rope[CLB_MAX_LAYERS], chunked[CLB_MAX_LAYERS];
    if (n <= 0 || n > CLB_MAX_LAYERS || !hp->dense_layers) return COLIBRI_OK; /* reported by validation */
    if (hp->n_expert > 0 && moe_step < 1)
        return clb_err(COLIBRI_ERR_FORMAT, "llama4.interleave_moe_layer_step is missing or 0 (llama.cpp requires it)");
    for (int l = 0; hp->n_expert > 0 && l < n; l++)
        if (hp->dense_layers[l] != ((l + 1) % moe_step != 0))
            return clb_err(COLIBRI_ERR_FORMAT, "blk.%d has %s router (ffn_gate_inp) but llama4.interleave_moe_layer_step %d makes it %s",
                           l, hp->dense_layers[l] ? "no" : "a", moe_step, hp->dense_layers[l] ? "MoE" : "dense");
    if (window > 0 && window != CHUNK)
        return clb_err(COLIBRI_ERR_UNSUPPORTED,
                       "llama4.attention.sliding_window %d is not supported (llama.cpp runs llama4 files with chunks of "
                       "%d, or none when the key is 0, whatever it says)",
                       window, CHUNK);
    for (int l = 0; l < n; l++) {
        rope[l] = window == 0 || (l + 1) % NOPE_INTERVAL != 0;
        chunked[l] = window != 0 && rope[l];
    }
    hp->attn_temp_floor = (float)CHUNK; /* floor_scale */
    hp->attn_temp_scale = 0.1f;
    return llama4_layers(hp, rope, chunked, CHUNK, hp->n_expert != 128, true);
}

/* JetMoE (configuration_jetmoe.py, modeling_jetmoe.py): num_attention_heads is
   num_key_value_heads * num_experts_per_tok, head_dim is kv_channels (attribute_map); the
   attention (JetMoeMoA) and the FFN (JetMoeMoE) have num_local_experts experts each, top-k
   num_experts_per_tok, and each an output bias; activation_function is the experts' GLU
   activation; JetMoeBlock's two RMSNorms keep the default eps 1e-6 (only the final norm
   reads rms_norm_eps). Called before the shared keys are read: sets n_head and head_dim. */
static int parse_jetmoe_heads(const cJSON *c, clb_hparams *hp) {
    int rc, kv = 16, k = 2, hd = 128, nh = 0;
    if ((rc = get_int(c, "num_key_value_heads", 16, false, &kv)) || (rc = get_int(c, "num_experts_per_tok", 2, false, &k)) ||
        (rc = get_int(c, "kv_channels", 128, false, &hd)) || (rc = get_int(c, "num_attention_heads", 0, false, &nh)))
        return rc;
    if (kv <= 0 || kv > 1024 || k <= 0 || k > 1024 || hd <= 0 || hd > 1024)
        return clb_err(COLIBRI_ERR_FORMAT, "config.json: num_key_value_heads %d / num_experts_per_tok %d / kv_channels %d out of range",
                       kv, k, hd);
    if (nh && nh != kv * k)
        return clb_err(COLIBRI_ERR_FORMAT,
                       "config.json: num_attention_heads %d is not num_key_value_heads x num_experts_per_tok = %d", nh, kv * k);
    hp->n_head = kv * k;
    hp->n_head_kv = kv;
    hp->head_dim = hd;
    return COLIBRI_OK;
}

static int parse_jetmoe(const cJSON *c, clb_hparams *hp) {
    const cJSON *act = key(c, "activation_function");
    if (act && !cJSON_IsNull(act) && !(cJSON_IsString(act) && strcmp(act->valuestring, "silu") == 0))
        return clb_err(COLIBRI_ERR_UNSUPPORTED, "config.json: activation_function '%s' is not supported (only silu)",
                       cJSON_IsString(act) ? act->valuestring : json_type_name(act));
    hp->n_attn_exp = hp->n_expert;
    hp->n_attn_exp_used = hp->n_expert_used;
    hp->o_bias = true;
    hp->ffn_out_bias = true;
    hp->norm_eps_layer = 1e-6f;
    return COLIBRI_OK;
}

clb_attn_layer clb_hparams_attn_layer(const clb_hparams *hp, int l) {
    clb_attn_layer a = {0};
    if (hp->attn_layers && l >= 0 && l < hp->n_layer) a = hp->attn_layers[l];
    return a;
}

clb_attn_layer *clb_hparams_attn_layers(clb_hparams *hp) {
    if (!hp->attn_layers && hp->n_layer > 0 && hp->n_layer <= CLB_MAX_LAYERS)
        hp->attn_layers = clb_calloc((size_t)hp->n_layer, sizeof *hp->attn_layers);
    return hp->attn_layers;
}

/* Which layers use a sliding window or chunked attention (HF semantics, d->swa):
   config.layer_types when the family reads them ("full_attention", "sliding_attention",
   "chunked_attention"; sliding without a sliding_window is full attention, as in HF), else
   sliding_window on every layer (Mistral, Mixtral) or, with use_sliding_window, on the
   layers from max_window_layers on (Qwen). Families with other per-layer patterns set
   hp->attn_layers themselves. */
static int parse_attn_layers(const clb_arch_desc *d, const cJSON *c, clb_hparams *hp) {
    int rc, sw = 0, chunk = 0, from = 0;
    bool use_sw = d->swa != SWA_QWEN;
    if (d->swa == SWA_NONE) return COLIBRI_OK;
    if ((rc = get_int(c, "sliding_window", d->window_default, false, &sw)) ||
        (rc = get_bool(c, "use_sliding_window", use_sw, &use_sw)) ||
        (rc = get_int(c, "attention_chunk_size", 0, false, &chunk)) ||
        (rc = get_int(c, "max_window_layers", 28, false, &from)))
        return rc;
    if (sw < 0 || chunk < 0) return clb_err(COLIBRI_ERR_FORMAT, "config.json: sliding_window / attention_chunk_size must be positive");
    if (!use_sw) sw = 0;
    if (hp->n_layer <= 0 || hp->n_layer > CLB_MAX_LAYERS) return COLIBRI_OK; /* reported by validation */
    const cJSON *lt = key(c, "layer_types");
    if (lt && !cJSON_IsNull(lt)) {
        if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != hp->n_layer)
            return clb_err(COLIBRI_ERR_FORMAT, "config.json: layer_types must list the %d layers", hp->n_layer);
        if (!clb_hparams_attn_layers(hp)) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
        for (int l = 0; l < hp->n_layer; l++) {
            const cJSON *t = cJSON_GetArrayItem(lt, l);
            const char *ty = cJSON_IsString(t) ? t->valuestring : "";
            if (!strcmp(ty, "full_attention")) continue;
            if (!strcmp(ty, "sliding_attention")) hp->attn_layers[l].window = sw;
            else if (!strcmp(ty, "chunked_attention") && chunk > 0) hp->attn_layers[l].chunk = chunk;
            else return clb_err(COLIBRI_ERR_UNSUPPORTED, "config.json: layer_types[%d] '%s' is not supported", l, ty);
        }
        return COLIBRI_OK;
    }
    if (sw <= 0) return COLIBRI_OK;
    if (!clb_hparams_attn_layers(hp)) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    for (int l = d->swa == SWA_QWEN ? CLB_MAX(from, 0) : 0; l < hp->n_layer; l++)
        if (d->swa != SWA_ALT || l % 2 == 0) hp->attn_layers[l].window = sw;
    return COLIBRI_OK;
}

int clb_hparams_from_hf(const clb_arch_desc *d, const cJSON *c, clb_hparams *hp) {
    int rc;
    memset(hp, 0, sizeof *hp);
    snprintf(hp->arch, sizeof hp->arch, "%s", d->name);
    if (d->hf_text_config && cJSON_IsObject(key(c, d->hf_text_config))) c = key(c, d->hf_text_config);
    if ((rc = get_int(c, "vocab_size", 0, true, &hp->n_vocab)) ||
        (rc = get_int(c, "hidden_size", 0, true, &hp->n_embd)) ||
        (rc = get_int(c, "num_hidden_layers", 0, true, &hp->n_layer)) ||
        (rc = get_int(c, "num_attention_heads", 0, !d->jetmoe, &hp->n_head)) ||
        (rc = get_int(c, "num_key_value_heads", hp->n_head, false, &hp->n_head_kv)) ||
        (rc = get_int(c, "intermediate_size", 0, !d->moe, &hp->n_ff)) ||
        (rc = get_int(c, "max_position_embeddings", 2048, false, &hp->max_pos)) ||
        (rc = get_float(c, "rms_norm_eps", 1e-6f, &hp->norm_eps)) ||
        (rc = get_float(c, "rope_theta", d->theta_default > 0 ? d->theta_default : 10000.0f, &hp->rope_theta)) ||
        (rc = get_bool(c, "tie_word_embeddings", d->tie_default, &hp->tie_embd)))
        return rc;
    if (d->jetmoe && (rc = parse_jetmoe_heads(c, hp))) return rc;
    if (hp->n_head <= 0 || hp->n_embd <= 0)
        return clb_err(COLIBRI_ERR_FORMAT, "config.json: hidden_size and num_attention_heads must be positive");
    if ((rc = get_int(c, "head_dim", d->jetmoe ? hp->head_dim : hp->n_embd / hp->n_head, false, &hp->head_dim))) return rc;
    hp->head_dim_v = hp->head_dim;
    hp->n_rot = hp->head_dim;
    hp->rope_style = d->hf_rope_set ? d->hf_rope : CLB_ROPE_NEOX;
    get_token_id(c, "bos_token_id", &hp->bos_id);
    get_token_id(c, "eos_token_id", &hp->eos_id);
    if ((rc = parse_rope_scaling_of(d, c, hp))) return rc;

    const cJSON *act = key(c, "hidden_act");
    if (cJSON_IsString(act) && strcmp(act->valuestring, "silu") != 0)
        return clb_err(COLIBRI_ERR_UNSUPPORTED, "config.json: hidden_act '%s' is not supported (only silu)",
                       act->valuestring);
    bool b = false;
    if ((rc = get_bool(c, "mlp_bias", false, &b))) return rc;
    if (b) return clb_err(COLIBRI_ERR_UNSUPPORTED, "config.json: mlp_bias=true is not supported");
    bool attn_bias = false;
    if ((rc = get_bool(c, "attention_bias", false, &attn_bias))) return rc;
    hp->qkv_bias = attn_bias || d->qkv_bias;
    hp->o_bias = attn_bias && !d->attn_bias_qkv;
    if ((rc = parse_attn_layers(d, c, hp))) return rc;
    if (d->sinks) {
        if (!clb_hparams_attn_layers(hp)) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
        for (int l = 0; l < hp->n_layer; l++) hp->attn_layers[l].sinks = true;
    }
    hp->moe_bias = d->moe_bias;
    if (d->exp_act) hp->ffn_act = d->exp_act;
    if (d->exp_act == CLB_ACT_SWIGLU_CLAMP &&
        ((rc = get_float(c, "swiglu_alpha", 1.702f, &hp->act_alpha)) ||
         (rc = get_float(c, "swiglu_limit", 7.0f, &hp->act_limit))))
        return rc;
    hp->qk_norm = d->qk_norm;
    if (d->qk_norm_key) {
        bool qkn = false;
        if ((rc = get_bool(c, "use_qk_norm", false, &qkn))) return rc;
        if (qkn) hp->qk_norm = CLB_QKNORM_HEAD;
    }
    /* multi-token-prediction layers after the last (num_nextn_predict_layers: DeepSeek-V3,
       GLM-4.5): HF's inference ignores their weights, and so does colibri */
    if ((rc = get_int(c, "num_nextn_predict_layers", 0, false, &hp->n_nextn))) return rc;
    if (hp->n_nextn < 0 || hp->n_nextn > 64)
        return clb_err(COLIBRI_ERR_FORMAT, "config.json: num_nextn_predict_layers %d out of range 0..64", hp->n_nextn);
    hp->router_score = d->router_score;
    hp->routed_scale = 1.0f;
    hp->norm_topk = d->norm_topk;
    hp->moe_step = 1;
    if (d->moe) {
        if ((rc = get_int(c, d->key_n_expert, 0, true, &hp->n_expert)) ||
            (rc = get_int(c, d->key_k ? d->key_k : "num_experts_per_tok", 0, true, &hp->n_expert_used)) ||
            (rc = get_int(c, d->key_ff_exp, 0, true, &hp->n_ff_exp)))
            return rc;
        if (d->norm_topk_key && (rc = get_bool(c, "norm_topk_prob", d->norm_topk, &hp->norm_topk)))
            return rc;
    }
    float prf = d->prf_default > 0 ? d->prf_default : 1.0f;
    if ((rc = get_float(c, "partial_rotary_factor", prf, &prf))) return rc;
    if (prf <= 0 || prf > 1) return clb_err(COLIBRI_ERR_FORMAT, "config.json: partial_rotary_factor %g out of range", (double)prf);
    hp->n_rot = (int)(hp->head_dim * prf) / 2 * 2;
    if ((rc = get_float(c, "clip_qkv", 0.0f, &hp->clip_qkv))) return rc;
    if (hp->clip_qkv < 0) return clb_err(COLIBRI_ERR_FORMAT, "config.json: clip_qkv must be positive");
    if (hp->n_layer <= 0 || hp->n_layer > CLB_MAX_LAYERS)
        return clb_err(COLIBRI_ERR_FORMAT, "config.json: num_hidden_layers %d out of range", hp->n_layer);
    hp->dense_layers = clb_calloc((size_t)hp->n_layer, 1);
    if (!hp->dense_layers) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    for (int l = 0; l < hp->n_layer; l++) hp->dense_layers[l] = d->moe ? 0 : 1;
    if (d->sparse_step && (rc = parse_sparse_step(c, hp))) return rc;
    if (d->shexp) {
        if ((rc = get_int(c, "shared_expert_intermediate_size", 0, false, &hp->n_ff_shexp))) return rc;
        hp->n_shared_exp = hp->n_ff_shexp > 0;
        hp->shexp_gate = hp->n_ff_shexp > 0;
    }
    if (d->deepseek && (rc = parse_deepseek(d, c, hp))) return rc;
    if (d->ds_moe && (rc = parse_glm_moe(c, hp))) return rc;
    if (d->ernie_moe && (rc = parse_ernie_moe(c, hp))) return rc;
    if (d->smallthinker && (rc = parse_smallthinker(c, hp))) return rc;
    if (d->llama4 && (rc = parse_llama4(c, hp))) return rc;
    if ((rc = parse_phimoe_pieces(d, c, hp))) return rc;
    if (d->jetmoe && (rc = parse_jetmoe(c, hp))) return rc;
    if (d->multipliers) {
        if ((rc = get_float(c, "embedding_multiplier", 1.0f, &hp->embd_mult)) ||
            (rc = get_float(c, "residual_multiplier", 1.0f, &hp->resid_mult)) ||
            (rc = get_float(c, "attention_multiplier", 1.0f, &hp->attn_mult)) ||
            (rc = get_float(c, "logits_scaling", 1.0f, &hp->logit_div)))
            return rc;
        if (hp->embd_mult <= 0 || hp->resid_mult <= 0 || hp->attn_mult <= 0 || hp->logit_div <= 0)
            return clb_err(COLIBRI_ERR_FORMAT, "config.json: multipliers must be positive");
    }
    return clb_hparams_validate(hp);
}

bool clb_hparams_layer_is_moe(const clb_hparams *hp, int l) {
    if (hp->n_expert <= 0 || l < hp->first_dense) return false;
    if (hp->dense_layers && hp->dense_layers[l]) return false;
    return true;
}

int clb_hparams_validate(const clb_hparams *hp) {
#define CHECK(cond, ...) \
    do {                 \
        if (!(cond)) return clb_err(COLIBRI_ERR_FORMAT, __VA_ARGS__); \
    } while (0)
    CHECK(hp->n_vocab > 0 && hp->n_vocab <= (1 << 24), "config: vocab size %d out of range", hp->n_vocab);
    CHECK(hp->n_embd > 0 && hp->n_embd <= (1 << 16), "config: hidden size %d out of range", hp->n_embd);
    CHECK(hp->n_layer > 0 && hp->n_layer <= CLB_MAX_LAYERS, "config: layer count %d out of range", hp->n_layer);
    CHECK(hp->n_head > 0 && hp->n_head <= 1024, "config: head count %d out of range", hp->n_head);
    CHECK(hp->n_head_kv > 0 && hp->n_head % hp->n_head_kv == 0,
          "config: %d attention heads are not a multiple of %d KV heads", hp->n_head, hp->n_head_kv);
    CHECK(hp->head_dim > 0 && hp->head_dim <= 1024 && hp->head_dim % 2 == 0, "config: head dim %d invalid",
          hp->head_dim);
    CHECK(hp->head_dim_v > 0 && hp->head_dim_v <= 1024, "config: value head dim %d invalid", hp->head_dim_v);
    CHECK(hp->n_rot > 0 && hp->n_rot <= hp->head_dim && hp->n_rot % 2 == 0, "config: rotary dims %d invalid",
          hp->n_rot);
    /* every real-valued parameter is finite before any of them is used (1e400 parses as inf) */
    const struct {
        const char *name;
        float v;
    } reals[] = {{"rms_norm_eps", hp->norm_eps}, {"rope_theta", hp->rope_theta},
                 {"rope scaling factor", hp->rope_factor}, {"rope original context", hp->rope_orig_ctx},
                 {"rope beta_fast", hp->rope_beta_fast}, {"rope beta_slow", hp->rope_beta_slow},
                 {"rope mscale", hp->rope_mscale}, {"rope mscale_all_dim", hp->rope_mscale_all_dim},
                 {"rope low_freq_factor", hp->rope_low_freq_factor},
                 {"rope high_freq_factor", hp->rope_high_freq_factor},
                 {"rope attention_factor", hp->rope_attn_factor}, {"clip_qkv", hp->clip_qkv},
                 {"routed scaling factor", hp->routed_scale}, {"embedding multiplier", hp->embd_mult},
                 {"residual multiplier", hp->resid_mult}, {"attention multiplier", hp->attn_mult},
                 {"logits scaling", hp->logit_div}, {"moe_norm_min", hp->norm_min},
                 {"swiglu_alpha", hp->act_alpha}, {"swiglu_limit", hp->act_limit},
                 {"floor_scale", hp->attn_temp_floor}, {"attn_scale", hp->attn_temp_scale},
                 {"router_jitter", hp->router_jitter}, {"rope short_mscale", hp->rope_short_mscale},
                 {"rope long_mscale", hp->rope_long_mscale}};
    for (size_t i = 0; i < CLB_ARRAY_LEN(reals); i++)
        CHECK(isfinite(reals[i].v), "config: %s is %g (must be a finite number)", reals[i].name, (double)reals[i].v);
    CHECK(hp->norm_eps > 0 && hp->norm_eps < 1, "config: rms_norm_eps %g out of range (0, 1)", (double)hp->norm_eps);
    CHECK(hp->rope_theta > 0, "config: rope_theta %g must be positive", (double)hp->rope_theta);
    CHECK(hp->max_pos > 0 && hp->max_pos <= CLB_MAX_CONTEXT,
          "config: max_position_embeddings %d out of range 1..%d", hp->max_pos, CLB_MAX_CONTEXT);
    CHECK(hp->rope_style == CLB_ROPE_NEOX || hp->rope_style == CLB_ROPE_NORM, "config: rope style %d unknown",
          hp->rope_style);
    CHECK(hp->rope_scaling >= CLB_ROPE_SCALING_NONE && hp->rope_scaling <= CLB_ROPE_SCALING_LONGROPE,
          "config: rope scaling type %d unknown", hp->rope_scaling);
    if (hp->rope_scaling == CLB_ROPE_SCALING_LONGROPE) {
        CHECK(hp->rope_ext && hp->rope_ext_n == hp->n_rot / 2,
              "config: longrope short_factor / long_factor list %d numbers, the %d rotary dims need %d", hp->rope_ext_n,
              hp->n_rot, hp->n_rot / 2);
        for (int i = 0; i < 2 * hp->rope_ext_n; i++)
            CHECK(hp->rope_ext[i] > 0 && hp->rope_ext[i] < 1e30f, "config: longrope factor %d (%g) must be positive", i,
                  (double)hp->rope_ext[i]);
        CHECK(hp->rope_orig_ctx >= 1 && hp->rope_orig_ctx <= (float)CLB_MAX_CONTEXT,
              "config: longrope original_max_position_embeddings %g out of range", (double)hp->rope_orig_ctx);
        CHECK(hp->rope_short_mscale > 0 && hp->rope_short_mscale <= 1e3f && hp->rope_long_mscale > 0 &&
                  hp->rope_long_mscale <= 1e3f,
              "config: longrope short_mscale %g / long_mscale %g out of range (0, 1000]", (double)hp->rope_short_mscale,
              (double)hp->rope_long_mscale);
    }
    CHECK(hp->norm_kind == CLB_NORM_RMS || hp->norm_kind == CLB_NORM_LAYER, "config: norm kind %d unknown", hp->norm_kind);
    CHECK(hp->router_score >= CLB_SCORE_SOFTMAX && hp->router_score <= CLB_SCORE_SPARSEMIXER,
          "config: router scoring %d unknown", hp->router_score);
    CHECK(hp->router_jitter >= 0 && hp->router_jitter <= 1e3f, "config: router_jitter %g out of range [0, 1000]",
          (double)hp->router_jitter);
    CHECK(hp->router_score != CLB_SCORE_SPARSEMIXER || hp->n_expert_used == 2,
          "config: sparsemixer routing takes 2 experts per token, not %d", hp->n_expert_used);
    if (hp->rope_scaling != CLB_ROPE_SCALING_NONE && hp->rope_scaling != CLB_ROPE_SCALING_FREQS)
        CHECK(hp->rope_factor > 0 && hp->rope_factor <= 1e6f, "config: rope scaling factor %g out of range (0, 1e6]",
              (double)hp->rope_factor);
    if (hp->rope_scaling == CLB_ROPE_SCALING_LLAMA3 || hp->rope_scaling == CLB_ROPE_SCALING_YARN)
        CHECK(hp->rope_orig_ctx >= 1 && hp->rope_orig_ctx <= (float)CLB_MAX_CONTEXT,
              "config: rope scaling original_max_position_embeddings %g out of range 1..%d", (double)hp->rope_orig_ctx,
              CLB_MAX_CONTEXT);
    if (hp->rope_scaling == CLB_ROPE_SCALING_LLAMA3)
        CHECK(hp->rope_low_freq_factor > 0 && hp->rope_high_freq_factor > hp->rope_low_freq_factor,
              "config: llama3 rope scaling needs 0 < low_freq_factor < high_freq_factor (got %g, %g)",
              (double)hp->rope_low_freq_factor, (double)hp->rope_high_freq_factor);
    if (hp->rope_scaling == CLB_ROPE_SCALING_YARN) {
        CHECK(hp->rope_beta_fast > 0 && hp->rope_beta_slow > 0, "config: yarn beta_fast %g and beta_slow %g must be positive",
              (double)hp->rope_beta_fast, (double)hp->rope_beta_slow);
        CHECK(hp->rope_attn_factor >= 0 && hp->rope_attn_factor <= 1e3f,
              "config: yarn attention_factor %g out of range [0, 1000]", (double)hp->rope_attn_factor);
        CHECK(fabsf(hp->rope_mscale) <= 1e3f && fabsf(hp->rope_mscale_all_dim) <= 1e3f,
              "config: yarn mscale %g / mscale_all_dim %g out of range [-1000, 1000]", (double)hp->rope_mscale,
              (double)hp->rope_mscale_all_dim);
    }
    CHECK(hp->ffn_act == CLB_ACT_SILU || hp->ffn_act == CLB_ACT_RELU || hp->ffn_act == CLB_ACT_SWIGLU_CLAMP,
          "config: FFN activation %d unknown", hp->ffn_act);
    CHECK(hp->norm_min >= 0 && hp->norm_min < 1, "config: moe_norm_min %g out of range [0, 1)", (double)hp->norm_min);
    if (hp->ffn_act == CLB_ACT_SWIGLU_CLAMP)
        CHECK(hp->act_limit > 0 && hp->act_limit <= 1e6f && fabsf(hp->act_alpha) <= 1e3f,
              "config: swiglu_limit %g must be in (0, 1e6] and swiglu_alpha %g in [-1000, 1000]", (double)hp->act_limit,
              (double)hp->act_alpha);
    CHECK(hp->clip_qkv >= 0 && hp->clip_qkv <= 1e6f, "config: clip_qkv %g out of range [0, 1e6]", (double)hp->clip_qkv);
    /* scales multiply activations: 0 means "not set"; larger than 1e4 overflows float soon */
    const struct {
        const char *name;
        float v;
    } scales[] = {{"routed scaling factor", hp->routed_scale}, {"embedding multiplier", hp->embd_mult},
                  {"residual multiplier", hp->resid_mult}, {"attention multiplier", hp->attn_mult},
                  {"logits scaling", hp->logit_div}};
    for (size_t i = 0; i < CLB_ARRAY_LEN(scales); i++)
        CHECK(scales[i].v >= 0 && scales[i].v <= 1e4f, "config: %s %g out of range [0, 1e4]", scales[i].name,
              (double)scales[i].v);
    CHECK(hp->first_dense >= 0 && hp->first_dense <= hp->n_layer, "config: first dense layers %d out of range 0..%d",
          hp->first_dense, hp->n_layer);
    CHECK(hp->n_shared_exp >= 0 && hp->n_shared_exp <= 1024 && hp->n_ff_shexp >= 0 && hp->n_ff_shexp <= (1 << 20),
          "config: shared experts %d of width %d out of range", hp->n_shared_exp, hp->n_ff_shexp);
    CHECK(hp->q_lora_rank >= 0 && hp->q_lora_rank <= (1 << 16) && hp->kv_lora_rank >= 0 && hp->kv_lora_rank <= (1 << 16),
          "config: MLA ranks %d, %d out of range 0..65536", hp->q_lora_rank, hp->kv_lora_rank);
    CHECK(hp->rope_offset >= 0 && hp->rope_offset + hp->n_rot <= hp->head_dim,
          "config: rotary offset %d + %d dims beyond the head dim %d", hp->rope_offset, hp->n_rot, hp->head_dim);
    CHECK(hp->n_group >= 0 && hp->topk_group >= 0 && hp->topk_group <= CLB_MAX(hp->n_group, 0) &&
              (hp->n_group == 0 || (hp->n_expert > 0 && hp->n_expert % hp->n_group == 0)),
          "config: expert groups %d (used %d) do not divide %d experts", hp->n_group, hp->topk_group, hp->n_expert);
    CHECK(hp->n_ff >= 0 && hp->n_ff <= (1 << 20), "config: intermediate size %d out of range", hp->n_ff);
    if (hp->n_expert > 0) {
        CHECK(hp->n_expert <= COLIBRI_STATS_MAX_EXPERTS, "config: %d experts (at most %d supported)",
              hp->n_expert, COLIBRI_STATS_MAX_EXPERTS);
        CHECK(hp->n_expert_used >= 1 && hp->n_expert_used <= hp->n_expert,
              "config: experts per token %d must be in 1..%d", hp->n_expert_used, hp->n_expert);
        CHECK(hp->n_ff_exp > 0 && hp->n_ff_exp <= (1 << 20), "config: expert FFN width %d out of range",
              hp->n_ff_exp);
    }
    CHECK(isfinite(hp->norm_eps_layer) && hp->norm_eps_layer >= 0 && hp->norm_eps_layer < 1,
          "config: layer norm eps %g out of range [0, 1)", (double)hp->norm_eps_layer);
    if (hp->n_attn_exp != 0) {
        CHECK(hp->n_attn_exp > 0 && hp->n_attn_exp <= COLIBRI_STATS_MAX_EXPERTS, "config: %d attention experts (at most %d)",
              hp->n_attn_exp, COLIBRI_STATS_MAX_EXPERTS);
        CHECK(hp->n_attn_exp_used >= 1 && hp->n_attn_exp_used <= hp->n_attn_exp,
              "config: attention experts per token %d must be in 1..%d", hp->n_attn_exp_used, hp->n_attn_exp);
        CHECK(hp->n_head == hp->n_attn_exp_used * hp->n_head_kv && hp->attn_kind == CLB_ATTN_GQA &&
                  hp->head_dim_v == hp->head_dim,
              "config: attention experts need n_head = %d x %d K/V heads (got %d) and plain grouped-query attention",
              hp->n_attn_exp_used, hp->n_head_kv, hp->n_head);
    }
    bool any_dense = false;
    for (int l = 0; l < hp->n_layer; l++)
        if (!clb_hparams_layer_is_moe(hp, l)) any_dense = true;
    CHECK(!any_dense || hp->n_ff > 0, "config: dense FFN layers need intermediate_size > 0");
    CHECK(!(hp->moe_weight_on_input && hp->moe_bias), "config: the routing weight on the expert input needs bias-free experts");
    for (int l = 0; hp->attn_layers && l < hp->n_layer; l++) {
        const clb_attn_layer *a = &hp->attn_layers[l];
        CHECK(a->window >= 0 && a->chunk >= 0, "config: layer %d: negative attention window or chunk", l);
        CHECK(!(a->window && a->chunk), "config: layer %d: both a sliding window and chunked attention", l);
        CHECK(!((a->qk_l2 || a->temp_tune) && hp->attn_kind == CLB_ATTN_MLA),
              "config: layer %d: L2 q/k norm and temperature tuning need GQA attention", l);
        CHECK(!a->temp_tune || (hp->attn_temp_floor >= 1 && fabsf(hp->attn_temp_scale) <= 1e3f),
              "config: layer %d: temperature tuning needs floor_scale >= 1 and |attn_scale| <= 1000 (got %g, %g)", l,
              (double)hp->attn_temp_floor, (double)hp->attn_temp_scale);
    }
#undef CHECK
    return COLIBRI_OK;
}

void clb_hparams_free(clb_hparams *hp) {
    if (!hp) return;
    clb_free(hp->dense_layers);
    hp->dense_layers = NULL;
    clb_free(hp->attn_layers);
    hp->attn_layers = NULL;
    clb_free(hp->rope_ext);
    hp->rope_ext = NULL;
}

/* ---- canonical JSON (.colibri "config") ----
 * One table drives both directions, so a field cannot be written and forgotten on read. */

typedef enum { F_INT, F_FLOAT, F_BOOL } ftype;
typedef struct {
    const char *key;
    ftype t;
    size_t off;
    bool required;
} field;

#define FI(k, m, r) {k, F_INT, offsetof(clb_hparams, m), r}
#define FF(k, m) {k, F_FLOAT, offsetof(clb_hparams, m), false}
#define FB(k, m) {k, F_BOOL, offsetof(clb_hparams, m), false}
static const field FIELDS[] = {
    FI("n_vocab", n_vocab, true), FI("n_embd", n_embd, true), FI("n_layer", n_layer, true),
    FI("n_head", n_head, true), FI("n_head_kv", n_head_kv, true), FI("head_dim", head_dim, true),
    FI("head_dim_v", head_dim_v, true), FI("n_rot", n_rot, true), FI("n_ff", n_ff, false),
    FI("n_expert", n_expert, false), FI("n_expert_used", n_expert_used, false),
    FI("n_ff_exp", n_ff_exp, false), FI("n_shared_exp", n_shared_exp, false),
    FI("n_ff_shexp", n_ff_shexp, false), FB("shexp_gate", shexp_gate), FI("first_dense", first_dense, false),
    FI("moe_step", moe_step, false), FF("norm_eps", norm_eps), FF("rope_theta", rope_theta),
    FI("rope_style", rope_style, false), FI("rope_scaling", rope_scaling, false),
    FF("rope_factor", rope_factor), FF("rope_orig_ctx", rope_orig_ctx), FF("rope_beta_fast", rope_beta_fast),
    FF("rope_beta_slow", rope_beta_slow), FF("rope_mscale", rope_mscale),
    FF("rope_mscale_all_dim", rope_mscale_all_dim), FF("rope_attn_factor", rope_attn_factor), FF("rope_low_freq_factor", rope_low_freq_factor),
    FF("rope_high_freq_factor", rope_high_freq_factor), FI("max_pos", max_pos, true),
    FB("tie_embd", tie_embd), FB("qkv_bias", qkv_bias), FB("o_bias", o_bias), FI("qk_norm", qk_norm, false),
    FI("attn_kind", attn_kind, false), FI("q_lora_rank", q_lora_rank, false),
    FI("kv_lora_rank", kv_lora_rank, false), FI("router_score", router_score, false),
    FI("ffn_act", ffn_act, false), FB("router_pre_attn", router_pre_attn), FB("norm_topk", norm_topk), FF("norm_min", norm_min), FF("routed_scale", routed_scale), FI("n_group", n_group, false),
    FI("topk_group", topk_group, false), FI("group_score", group_score, false), FB("score_bias", score_bias),
    FF("clip_qkv", clip_qkv), FI("rope_offset", rope_offset, false), FF("embd_mult", embd_mult),
    FF("resid_mult", resid_mult), FF("attn_mult", attn_mult), FF("logit_div", logit_div),
    FI("bos_id", bos_id, false), FI("eos_id", eos_id, false),
    FB("rope_yarn_exact", rope_yarn_exact), FB("moe_bias", moe_bias),
    FF("act_alpha", act_alpha), FF("act_limit", act_limit),
    FB("moe_weight_on_input", moe_weight_on_input), FF("attn_temp_floor", attn_temp_floor),
    FF("attn_temp_scale", attn_temp_scale),
    FI("norm_kind", norm_kind, false), FB("out_bias", out_bias), FF("router_jitter", router_jitter),
    FF("rope_short_mscale", rope_short_mscale), FF("rope_long_mscale", rope_long_mscale),
    FI("n_attn_exp", n_attn_exp, false), FI("n_attn_exp_used", n_attn_exp_used, false),
    FB("ffn_out_bias", ffn_out_bias), FF("norm_eps_layer", norm_eps_layer),
};

cJSON *clb_hparams_to_json(const clb_hparams *hp) {
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    cJSON_AddStringToObject(j, "architecture", hp->arch);
    for (size_t i = 0; i < CLB_ARRAY_LEN(FIELDS); i++) {
        const char *p = (const char *)hp + FIELDS[i].off;
        switch (FIELDS[i].t) {
        case F_INT: cJSON_AddNumberToObject(j, FIELDS[i].key, *(const int *)p); break;
        case F_FLOAT: cJSON_AddNumberToObject(j, FIELDS[i].key, (double)*(const float *)p); break;
        case F_BOOL: cJSON_AddBoolToObject(j, FIELDS[i].key, *(const bool *)p); break;
        }
    }
    cJSON *dl = cJSON_AddArrayToObject(j, "dense_layers");
    for (int l = 0; l < hp->n_layer; l++)
        if (hp->dense_layers && hp->dense_layers[l]) cJSON_AddItemToArray(dl, cJSON_CreateNumber(l));
    /* the layers whose attention is not plain: [{"layer": L, "window": W, "chunk": C,
       "no_rope": true, "sinks": true, "qk_l2": true, "temp_tune": true}, ...] (absent when
       every layer is plain) */
    cJSON *al = NULL;
    for (int l = 0; hp->attn_layers && l < hp->n_layer; l++) {
        const clb_attn_layer *a = &hp->attn_layers[l];
        if (!a->window && !a->chunk && !a->no_rope && !a->sinks && !a->qk_l2 && !a->temp_tune) continue;
        if (!al) al = cJSON_AddArrayToObject(j, "attn_layers");
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "layer", l);
        if (a->window) cJSON_AddNumberToObject(o, "window", a->window);
        if (a->chunk) cJSON_AddNumberToObject(o, "chunk", a->chunk);
        if (a->no_rope) cJSON_AddBoolToObject(o, "no_rope", true);
        if (a->sinks) cJSON_AddBoolToObject(o, "sinks", true);
        if (a->qk_l2) cJSON_AddBoolToObject(o, "qk_l2", true);
        if (a->temp_tune) cJSON_AddBoolToObject(o, "temp_tune", true);
        cJSON_AddItemToArray(al, o);
    }
    if (hp->rope_ext && hp->rope_ext_n > 0) /* longrope: [short..., long...] */
        cJSON_AddItemToObject(j, "rope_ext", cJSON_CreateFloatArray(hp->rope_ext, 2 * hp->rope_ext_n));
    return j;
}

static int rope_ext_from_json(const cJSON *re, clb_hparams *hp) {
    if (!re) return COLIBRI_OK;
    const int n = cJSON_IsArray(re) ? cJSON_GetArraySize(re) : 0;
    if (n < 2 || n % 2 || n > 1024) return clb_err(COLIBRI_ERR_FORMAT, "config: rope_ext must be a list of 2..1024 numbers");
    if (!(hp->rope_ext = clb_calloc((size_t)n, sizeof(float)))) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    hp->rope_ext_n = n / 2;
    for (int i = 0; i < n; i++) {
        const cJSON *it = cJSON_GetArrayItem(re, i);
        if (!cJSON_IsNumber(it)) return clb_err(COLIBRI_ERR_FORMAT, "config: rope_ext[%d] is not a number", i);
        hp->rope_ext[i] = (float)it->valuedouble;
    }
    return COLIBRI_OK;
}

static int attn_layers_from_json(const cJSON *al, clb_hparams *hp) {
    const cJSON *it;
    if (!al) return COLIBRI_OK;
    if (!cJSON_IsArray(al)) return clb_err(COLIBRI_ERR_FORMAT, "config: attn_layers must be a list");
    if (!clb_hparams_attn_layers(hp)) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    cJSON_ArrayForEach(it, al) {
        const cJSON *l = key(it, "layer"), *w = key(it, "window"), *c = key(it, "chunk");
        const cJSON *nr = key(it, "no_rope"), *sk = key(it, "sinks"), *l2 = key(it, "qk_l2"), *tt = key(it, "temp_tune");
        if (!cJSON_IsNumber(l) || l->valuedouble < 0 || l->valuedouble >= hp->n_layer ||
            l->valuedouble != (double)(int)l->valuedouble)
            return clb_err(COLIBRI_ERR_FORMAT, "config: attn_layers entry without a valid 'layer'");
        clb_attn_layer *a = &hp->attn_layers[(int)l->valuedouble];
        if ((w && (!cJSON_IsNumber(w) || w->valuedouble < 0 || w->valuedouble > (1 << 30))) ||
            (c && (!cJSON_IsNumber(c) || c->valuedouble < 0 || c->valuedouble > (1 << 30))) ||
            (nr && !cJSON_IsBool(nr)) || (sk && !cJSON_IsBool(sk)) || (l2 && !cJSON_IsBool(l2)) ||
            (tt && !cJSON_IsBool(tt)))
            return clb_err(COLIBRI_ERR_FORMAT, "config: attn_layers entry of layer %d is malformed", (int)l->valuedouble);
        a->window = w ? (int32_t)w->valuedouble : 0;
        a->chunk = c ? (int32_t)c->valuedouble : 0;
        a->no_rope = cJSON_IsTrue(nr);
        a->sinks = cJSON_IsTrue(sk);
        a->qk_l2 = cJSON_IsTrue(l2);
        a->temp_tune = cJSON_IsTrue(tt);
    }
    return COLIBRI_OK;
}

int clb_hparams_from_json(const cJSON *j, clb_hparams *hp) {
    memset(hp, 0, sizeof *hp);
    const cJSON *a = key(j, "architecture");
    if (!cJSON_IsString(a)) return clb_err(COLIBRI_ERR_FORMAT, "config: missing 'architecture'");
    if (!clb_arch_by_name(a->valuestring)) return COLIBRI_ERR_UNSUPPORTED;
    snprintf(hp->arch, sizeof hp->arch, "%s", a->valuestring);
    for (size_t i = 0; i < CLB_ARRAY_LEN(FIELDS); i++) {
        char *p = (char *)hp + FIELDS[i].off;
        const cJSON *v = key(j, FIELDS[i].key);
        if (!v) {
            if (FIELDS[i].required) return clb_err(COLIBRI_ERR_FORMAT, "config: missing '%s'", FIELDS[i].key);
            continue;
        }
        if (FIELDS[i].t == F_BOOL) {
            if (!cJSON_IsBool(v)) return clb_err(COLIBRI_ERR_FORMAT, "config: '%s' must be a boolean", FIELDS[i].key);
            *(bool *)p = cJSON_IsTrue(v);
            continue;
        }
        if (!cJSON_IsNumber(v))
            return clb_err(COLIBRI_ERR_FORMAT, "config: '%s' must be a number, not %s", FIELDS[i].key, json_type_name(v));
        if (FIELDS[i].t == F_INT) {
            if (!(v->valuedouble >= -(double)INT_MAX && v->valuedouble <= (double)INT_MAX))
                return clb_err(COLIBRI_ERR_FORMAT, "config: '%s' = %.17g is out of range (at most %d)", FIELDS[i].key,
                               v->valuedouble, INT_MAX);
            if (v->valuedouble != (double)(int)v->valuedouble)
                return clb_err(COLIBRI_ERR_FORMAT, "config: '%s' must be an integer", FIELDS[i].key);
            *(int *)p = (int)v->valuedouble;
        } else {
            *(float *)p = (float)v->valuedouble;
        }
    }
    if (hp->n_layer <= 0 || hp->n_layer > CLB_MAX_LAYERS)
        return clb_err(COLIBRI_ERR_FORMAT, "config: layer count %d out of range", hp->n_layer);
    hp->dense_layers = clb_calloc((size_t)hp->n_layer, 1);
    if (!hp->dense_layers) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    const cJSON *dl = key(j, "dense_layers"), *it;
    cJSON_ArrayForEach(it, dl) {
        if (!cJSON_IsNumber(it) || !(it->valuedouble >= 0 && it->valuedouble < hp->n_layer)) {
            clb_hparams_free(hp);
            return clb_err(COLIBRI_ERR_FORMAT, "config: dense_layers entry out of range");
        }
        hp->dense_layers[(int)it->valuedouble] = 1;
    }
    int rc = attn_layers_from_json(key(j, "attn_layers"), hp);
    if (!rc) rc = rope_ext_from_json(key(j, "rope_ext"), hp);
    if (!rc) rc = clb_hparams_validate(hp);
    if (rc) clb_hparams_free(hp);
    return rc;
}

/* ---- HF tensor names ----
 * Patterns use {L} (layer) and {E} (expert) placeholders that match decimal integers. */
typedef struct {
    const char *hf, *canon;
} name_map;

static const name_map HF_NAMES[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
    {"model.layers.{L}.input_layernorm.weight", "blk.{L}.attn_norm.weight"},
    {"model.layers.{L}.post_attention_layernorm.weight", "blk.{L}.ffn_norm.weight"},
    {"model.layers.{L}.self_attn.q_proj.weight", "blk.{L}.attn_q.weight"},
    {"model.layers.{L}.self_attn.k_proj.weight", "blk.{L}.attn_k.weight"},
    {"model.layers.{L}.self_attn.v_proj.weight", "blk.{L}.attn_v.weight"},
    {"model.layers.{L}.self_attn.o_proj.weight", "blk.{L}.attn_output.weight"},
    {"model.layers.{L}.self_attn.q_proj.bias", "blk.{L}.attn_q.bias"},
    {"model.layers.{L}.self_attn.k_proj.bias", "blk.{L}.attn_k.bias"},
    {"model.layers.{L}.self_attn.v_proj.bias", "blk.{L}.attn_v.bias"},
    {"model.layers.{L}.self_attn.o_proj.bias", "blk.{L}.attn_output.bias"},
    {"model.layers.{L}.self_attn.q_norm.weight", "blk.{L}.attn_q_norm.weight"},
    {"model.layers.{L}.self_attn.k_norm.weight", "blk.{L}.attn_k_norm.weight"},
    {"model.layers.{L}.self_attn.sinks", "blk.{L}.attn_sinks.weight"},
    {"model.layers.{L}.mlp.gate_proj.weight", "blk.{L}.ffn_gate.weight"},
    {"model.layers.{L}.mlp.up_proj.weight", "blk.{L}.ffn_up.weight"},
    {"model.layers.{L}.mlp.down_proj.weight", "blk.{L}.ffn_down.weight"},
    /* LayerNorm biases (Phi-3.5-MoE) and an LM head bias */
    {"model.norm.bias", "output_norm.bias"},
    {"lm_head.bias", "output.bias"},
    {"model.layers.{L}.input_layernorm.bias", "blk.{L}.attn_norm.bias"},
    {"model.layers.{L}.post_attention_layernorm.bias", "blk.{L}.ffn_norm.bias"},
    /* Mixtral */
    {"model.layers.{L}.block_sparse_moe.gate.weight", "blk.{L}.ffn_gate_inp.weight"},
    {"model.layers.{L}.block_sparse_moe.experts.{E}.w1.weight", "blk.{L}.ffn_gate.{E}.weight"},
    {"model.layers.{L}.block_sparse_moe.experts.{E}.w3.weight", "blk.{L}.ffn_up.{E}.weight"},
    {"model.layers.{L}.block_sparse_moe.experts.{E}.w2.weight", "blk.{L}.ffn_down.{E}.weight"},
    /* SmallThinker */
    {"model.layers.{L}.block_sparse_moe.primary_router.weight", "blk.{L}.ffn_gate_inp.weight"},
    {"model.layers.{L}.block_sparse_moe.experts.{E}.gate.weight", "blk.{L}.ffn_gate.{E}.weight"},
    {"model.layers.{L}.block_sparse_moe.experts.{E}.up.weight", "blk.{L}.ffn_up.{E}.weight"},
    {"model.layers.{L}.block_sparse_moe.experts.{E}.down.weight", "blk.{L}.ffn_down.{E}.weight"},
    /* Qwen-MoE, OLMoE, DeepSeek routed and shared experts */
    {"model.layers.{L}.mlp.shared_expert.gate_proj.weight", "blk.{L}.ffn_gate_shexp.weight"},
    {"model.layers.{L}.mlp.shared_expert.up_proj.weight", "blk.{L}.ffn_up_shexp.weight"},
    {"model.layers.{L}.mlp.shared_expert.down_proj.weight", "blk.{L}.ffn_down_shexp.weight"},
    {"model.layers.{L}.mlp.shared_expert_gate.weight", "blk.{L}.ffn_gate_inp_shexp.weight"},
    {"model.layers.{L}.mlp.shared_experts.gate_proj.weight", "blk.{L}.ffn_gate_shexp.weight"},
    {"model.layers.{L}.mlp.shared_experts.up_proj.weight", "blk.{L}.ffn_up_shexp.weight"},
    {"model.layers.{L}.mlp.shared_experts.down_proj.weight", "blk.{L}.ffn_down_shexp.weight"},
    {"model.layers.{L}.mlp.gate.e_score_correction_bias", "blk.{L}.exp_probs_b.bias"},
    {"model.layers.{L}.mlp.moe_statics.e_score_correction_bias", "blk.{L}.exp_probs_b.bias"}, /* ERNIE [1][E] */
    /* DeepSeek multi-head latent attention */
    {"model.layers.{L}.self_attn.q_a_proj.weight", "blk.{L}.attn_q_a.weight"},
    {"model.layers.{L}.self_attn.q_a_layernorm.weight", "blk.{L}.attn_q_a_norm.weight"},
    {"model.layers.{L}.self_attn.q_b_proj.weight", "blk.{L}.attn_q_b.weight"},
    {"model.layers.{L}.self_attn.kv_a_proj_with_mqa.weight", "blk.{L}.attn_kv_a_mqa.weight"},
    {"model.layers.{L}.self_attn.kv_a_layernorm.weight", "blk.{L}.attn_kv_a_norm.weight"},
    {"model.layers.{L}.self_attn.kv_b_proj.weight", "blk.{L}.attn_kv_b.weight"},
    /* GraniteMoE: stacked experts (split per expert by the source, see clb_arch_hf_stacked) */
    {"model.layers.{L}.block_sparse_moe.router.layer.weight", "blk.{L}.ffn_gate_inp.weight"},
    {"model.layers.{L}.mlp.gate.weight", "blk.{L}.ffn_gate_inp.weight"},
    {"model.layers.{L}.mlp.experts.{E}.gate_proj.weight", "blk.{L}.ffn_gate.{E}.weight"},
    {"model.layers.{L}.mlp.experts.{E}.up_proj.weight", "blk.{L}.ffn_up.{E}.weight"},
    {"model.layers.{L}.mlp.experts.{E}.down_proj.weight", "blk.{L}.ffn_down.{E}.weight"},
    /* gpt-oss: router with a bias; stacked experts (clb_arch_hf_stacked) and their biases */
    {"model.layers.{L}.mlp.router.weight", "blk.{L}.ffn_gate_inp.weight"},
    {"model.layers.{L}.mlp.router.bias", "blk.{L}.ffn_gate_inp.bias"},
    {"model.layers.{L}.mlp.experts.down_proj_bias", "blk.{L}.ffn_down_exps.bias"},
    /* Llama-4: feed_forward is the dense MLP or the MoE block (router, shared expert; the
       stacked experts in clb_arch_hf_stacked) */
    {"model.layers.{L}.feed_forward.gate_proj.weight", "blk.{L}.ffn_gate.weight"},
    {"model.layers.{L}.feed_forward.up_proj.weight", "blk.{L}.ffn_up.weight"},
    {"model.layers.{L}.feed_forward.down_proj.weight", "blk.{L}.ffn_down.weight"},
    {"model.layers.{L}.feed_forward.router.weight", "blk.{L}.ffn_gate_inp.weight"},
    {"model.layers.{L}.feed_forward.shared_expert.gate_proj.weight", "blk.{L}.ffn_gate_shexp.weight"},
    {"model.layers.{L}.feed_forward.shared_expert.up_proj.weight", "blk.{L}.ffn_up_shexp.weight"},
    {"model.layers.{L}.feed_forward.shared_expert.down_proj.weight", "blk.{L}.ffn_down_shexp.weight"},
    /* JetMoE: routers and output biases of the MoA and the MoE (stacked experts and kv_proj:
       clb_arch_hf_stacked) */
    {"model.layers.{L}.self_attention.experts.router.layer.weight", "blk.{L}.attn_gate_inp.weight"},
    {"model.layers.{L}.self_attention.experts.bias", "blk.{L}.attn_output.bias"},
    {"model.layers.{L}.mlp.router.layer.weight", "blk.{L}.ffn_gate_inp.weight"},
    {"model.layers.{L}.mlp.bias", "blk.{L}.ffn_out.bias"},
};

/* Matches s against pattern p; fills L/E. */
static bool match(const char *p, const char *s, int *L, int *E) {
    while (*p) {
        if (p[0] == '{' && (p[1] == 'L' || p[1] == 'E') && p[2] == '}') {
            if (*s < '0' || *s > '9') return false;
            long v = 0;
            int digits = 0;
            while (*s >= '0' && *s <= '9') {
                v = v * 10 + (*s++ - '0');
                if (++digits > 6) return false;
            }
            if (p[1] == 'L') *L = (int)v;
            else *E = (int)v;
            p += 3;
            continue;
        }
        if (*p++ != *s++) return false;
    }
    return *s == 0;
}

static void render(const char *p, int L, int E, char *out, size_t cap) {
    size_t k = 0;
    while (*p && k + 1 < cap) {
        if (p[0] == '{' && (p[1] == 'L' || p[1] == 'E') && p[2] == '}') {
            int n = snprintf(out + k, cap - k, "%d", p[1] == 'L' ? L : E);
            if (n < 0) break;
            k += (size_t)n;
            if (k >= cap) k = cap - 1;
            p += 3;
            continue;
        }
        out[k++] = *p++;
    }
    out[k] = 0;
}

int clb_arch_hf_stacked(const char *hf, int *layer) {
    int L = -1, E = -1;
    if (match("model.layers.{L}.block_sparse_moe.input_linear.weight", hf, &L, &E)) {
        *layer = L;
        return CLB_STACKED_GATE_UP;
    }
    if (match("model.layers.{L}.block_sparse_moe.output_linear.weight", hf, &L, &E)) {
        *layer = L;
        return CLB_STACKED_DOWN;
    }
    static const struct {
        const char *pattern;
        int kind;
    } kinds[] = {
        {"model.layers.{L}.mlp.experts.gate_up_proj", CLB_STACKED_GU_COLS},
        {"model.layers.{L}.mlp.experts.down_proj", CLB_STACKED_DOWN_COLS},
        {"model.layers.{L}.mlp.experts.gate_up_proj_bias", CLB_STACKED_GU_BIAS},
        {"model.layers.{L}.mlp.experts.gate_up_proj_blocks", CLB_STACKED_GU_MXFP4},
        {"model.layers.{L}.mlp.experts.down_proj_blocks", CLB_STACKED_DOWN_MXFP4},
        {"model.layers.{L}.mlp.experts.gate_up_proj_scales", CLB_STACKED_SCALES},
        {"model.layers.{L}.mlp.experts.down_proj_scales", CLB_STACKED_SCALES},
        {"model.layers.{L}.feed_forward.experts.gate_up_proj", CLB_STACKED_GU_HALVES}, /* Llama-4 */
        {"model.layers.{L}.feed_forward.experts.down_proj", CLB_STACKED_DOWN_COLS},
        /* JetMoE */
        {"model.layers.{L}.mlp.input_linear.weight", CLB_STACKED_GATE_UP},
        {"model.layers.{L}.mlp.output_linear.weight", CLB_STACKED_DOWN},
        {"model.layers.{L}.self_attention.experts.input_linear.weight", CLB_STACKED_ATTN_Q},
        {"model.layers.{L}.self_attention.experts.output_linear.weight", CLB_STACKED_ATTN_OUT},
        {"model.layers.{L}.self_attention.kv_proj.weight", CLB_STACKED_KV},
    };
    for (size_t i = 0; i < CLB_ARRAY_LEN(kinds); i++)
        if (match(kinds[i].pattern, hf, &L, &E)) {
            *layer = L;
            return kinds[i].kind;
        }
    return CLB_STACKED_NONE;
}

bool clb_arch_map_hf_name(const clb_arch_desc *d, const char *hf, char *out, size_t cap, int *layer,
                          int *expert) {
    (void)d;
    for (size_t i = 0; i < CLB_ARRAY_LEN(HF_NAMES); i++) {
        int L = -1, E = -1;
        if (match(HF_NAMES[i].hf, hf, &L, &E)) {
            render(HF_NAMES[i].canon, L, E, out, cap);
            *layer = L;
            *expert = E;
            return true;
        }
    }
    return false;
}
