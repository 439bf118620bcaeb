/* mix.c — llama.cpp's quantization mixes (mix.h).
 *
 * llama-quantize walks the tensors sorted by layer, then name ("blk.%d." parsed; tensors
 * outside the layer stack first) and picks each tensor's type from its name, its first
 * dimension, the model's expert count and GQA ratio, and counters of the attn_v / ffn_down
 * tensors seen so far. The rules below are that function's, restricted to the mixes that
 * need no importance matrix and to the architectures Colibri runs (there is no Falcon here,
 * so its branches are left out). Canonical tensor names are GGUF's, and a routed expert's
 * "blk.L.ffn_down.E.weight" matches the same rules as GGUF's stacked "ffn_down_exps" (for
 * models with experts the layer comes from the name, not from a counter).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "model/mix.h"

typedef struct mix_name {
    const char *name;
    int mix;
    bool is_type; /* also the name of a single type (not accepted where strict) */
} mix_name;

static const mix_name MIXES[] = {
    {"F32", CLB_MIX_F32, true},        {"F16", CLB_MIX_F16, true},        {"BF16", CLB_MIX_BF16, true},
    {"Q4_0", CLB_MIX_Q4_0, true},      {"Q4_1", CLB_MIX_Q4_1, true},      {"Q5_0", CLB_MIX_Q5_0, true},
    {"Q5_1", CLB_MIX_Q5_1, true},      {"Q8_0", CLB_MIX_Q8_0, true},      {"Q2_K", CLB_MIX_Q2_K, true},
    {"Q3_K_S", CLB_MIX_Q3_K_S, false}, {"Q3_K_M", CLB_MIX_Q3_K_M, false}, {"Q3_K_L", CLB_MIX_Q3_K_L, false},
    {"Q3_K", CLB_MIX_Q3_K_M, true},    {"Q4_K_S", CLB_MIX_Q4_K_S, false}, {"Q4_K_M", CLB_MIX_Q4_K_M, false},
    {"Q4_K", CLB_MIX_Q4_K_M, true},    {"Q5_K_S", CLB_MIX_Q5_K_S, false}, {"Q5_K_M", CLB_MIX_Q5_K_M, false},
    {"Q5_K", CLB_MIX_Q5_K_M, true},    {"Q6_K", CLB_MIX_Q6_K, true},      {"IQ4_NL", CLB_MIX_IQ4_NL, true},
    {"IQ4_XS", CLB_MIX_IQ4_XS, true},
};

static bool name_eq(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (toupper((unsigned char)*a) != toupper((unsigned char)*b)) return false;
    return !*a && !*b;
}

int clb_mix_from_name(const char *name, bool strict) {
    if (!name) return CLB_MIX_NONE;
    for (size_t i = 0; i < CLB_ARRAY_LEN(MIXES); i++)
        if (name_eq(name, MIXES[i].name) && !(strict && MIXES[i].is_type)) return MIXES[i].mix;
    static const char *const imatrix_only[] = {"Q2_K_S", "IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M",
                                               "IQ3_XXS", "IQ3_XS", "IQ3_S", "IQ3_M", "TQ1_0", "TQ2_0"};
    for (size_t i = 0; i < CLB_ARRAY_LEN(imatrix_only); i++)
        if (name_eq(name, imatrix_only[i]))
            return clb_err(COLIBRI_ERR_UNSUPPORTED,
                           "mix %s is not available: it needs an importance matrix or types this build does not write",
                           imatrix_only[i]),
                   CLB_MIX_NONE;
    clb_err(COLIBRI_ERR_ARG,
            "unknown mix '%s' (mixes: Q2_K, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, IQ4_NL, "
            "IQ4_XS, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, F16, BF16, F32)",
            name);
    return CLB_MIX_NONE;
}

const char *clb_mix_name(int mix) {
    for (size_t i = 0; i < CLB_ARRAY_LEN(MIXES); i++) /* the _M mixes come before their aliases */
        if (MIXES[i].mix == mix) return MIXES[i].name;
    return "?";
}

/* The mix's base type (llama_model_quantize_impl's default_type). */
static int base_type(int mix) {
    switch (mix) {
    case CLB_MIX_F32: return CLB_DT_F32;
    case CLB_MIX_F16: return CLB_DT_F16;
    case CLB_MIX_BF16: return CLB_DT_BF16;
    case CLB_MIX_Q4_0: return CLB_DT_Q4_0;
    case CLB_MIX_Q4_1: return CLB_DT_Q4_1;
    case CLB_MIX_Q5_0: return CLB_DT_Q5_0;
    case CLB_MIX_Q5_1: return CLB_DT_Q5_1;
    case CLB_MIX_Q8_0: return CLB_DT_Q8_0;
    case CLB_MIX_Q2_K: return CLB_DT_Q2_K;
    case CLB_MIX_Q3_K_S: case CLB_MIX_Q3_K_M: case CLB_MIX_Q3_K_L: return CLB_DT_Q3_K;
    case CLB_MIX_Q4_K_S: case CLB_MIX_Q4_K_M: return CLB_DT_Q4_K;
    case CLB_MIX_Q5_K_S: case CLB_MIX_Q5_K_M: return CLB_DT_Q5_K;
    case CLB_MIX_Q6_K: return CLB_DT_Q6_K;
    case CLB_MIX_IQ4_NL: return CLB_DT_IQ4_NL;
    case CLB_MIX_IQ4_XS: return CLB_DT_IQ4_XS;
    default: return -1;
    }
}

static int layer_of(const char *name) {
    int l = -1;
    if (sscanf(name, "blk.%d.", &l) != 1) return -1;
    return l;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

/* llama-quantize's "is this tensor quantized at all" test. ggml counts dimensions without
   the trailing (numpy: leading) ones, so a [1][n] gate is a vector there. */
static bool quantizable(const clb_src_tensor *t) {
    const char *n = t->name;
    int dims = t->n_dims, lead = 0;
    while (lead < dims - 1 && t->shape[lead] == 1) lead++;
    if (!ends_with(n, "weight") || dims - lead < 2) return false;
    static const char *const never[] = {"_norm.weight", "ffn_gate_inp.weight", "ssm_conv1d.weight", "attn_rel_b.weight",
                                        "time_mix_first.weight", "time_mix_w1.weight", "time_mix_w2.weight",
                                        "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
                                        "time_mix_lerp_fused.weight"};
    for (size_t i = 0; i < CLB_ARRAY_LEN(never); i++)
        if (strstr(n, never[i])) return false;
    return strcmp(n, "position_embd.weight") != 0 && strcmp(n, "token_types.weight") != 0;
}

typedef struct mix_state {
    int mix;
    int n_expert, n_gqa, n_layer;
    bool is_70b, has_output;
    int n_attention_wv, i_attention_wv, i_ffn_down;
    int n_fallback;
} mix_state;

static bool use_more_bits(int i_layer, int n_layers) {
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

static int block_size(int dtype) { return clb_type(dtype) ? clb_type(dtype)->block_size : 1; }

/* llama_tensor_get_type for one tensor whose name contains nothing an imatrix-only mix
   would look at. */
static int tensor_type(mix_state *q, const clb_src_tensor *t, int new_type) {
    const char *name = t->name;
    const int mix = q->mix;
    const int64_t nx = t->shape[t->n_dims - 1]; /* ggml's ne[0] */
    const bool is_output = strcmp(name, "output.weight") == 0;
    if (is_output || (!q->has_output && strcmp(name, "token_embd.weight") == 0)) {
        if (nx % block_size(new_type) != 0) new_type = CLB_DT_Q8_0;
        else if (new_type != CLB_DT_Q8_0) new_type = CLB_DT_Q6_K;
    } else if (strcmp(name, "token_embd.weight") == 0) {
        /* only the IQ1/IQ2/IQ3/TQ mixes change the embeddings */
    } else if (strstr(name, "attn_v.weight")) {
        if (mix == CLB_MIX_Q2_K) new_type = q->n_gqa >= 4 ? CLB_DT_Q4_K : CLB_DT_Q3_K;
        else if (mix == CLB_MIX_Q3_K_M) new_type = q->i_attention_wv < 2 ? CLB_DT_Q5_K : CLB_DT_Q4_K;
        else if (mix == CLB_MIX_Q3_K_L) new_type = CLB_DT_Q5_K;
        else if ((mix == CLB_MIX_IQ4_NL || mix == CLB_MIX_IQ4_XS) && q->n_gqa >= 4) new_type = CLB_DT_Q5_K;
        else if ((mix == CLB_MIX_Q4_K_M || mix == CLB_MIX_Q5_K_M) && use_more_bits(q->i_attention_wv, q->n_attention_wv))
            new_type = CLB_DT_Q6_K;
        else if (mix == CLB_MIX_Q4_K_S && q->i_attention_wv < 4) new_type = CLB_DT_Q5_K;
        if (q->is_70b && (new_type == CLB_DT_Q3_K || new_type == CLB_DT_Q4_K)) new_type = CLB_DT_Q5_K;
        if (q->n_expert == 8) new_type = CLB_DT_Q8_0;
        q->i_attention_wv++;
    } else if (strstr(name, "attn_k.weight")) {
        if (q->n_expert == 8) new_type = CLB_DT_Q8_0;
    } else if (strstr(name, "attn_q.weight")) {
        /* only IQ3_XS / IQ3_XXS change it */
    } else if (strstr(name, "ffn_down")) {
        int i_layer = q->n_expert > 1 ? layer_of(name) : q->i_ffn_down, n_layer = q->n_layer;
        if (mix == CLB_MIX_Q2_K) new_type = CLB_DT_Q3_K;
        else if (mix == CLB_MIX_Q3_K_M) new_type = i_layer < n_layer / 16 ? CLB_DT_Q5_K : CLB_DT_Q4_K;
        else if (mix == CLB_MIX_Q3_K_L) new_type = CLB_DT_Q5_K;
        else if (mix == CLB_MIX_Q4_K_M) {
            if (use_more_bits(i_layer, n_layer)) new_type = CLB_DT_Q6_K;
        } else if (i_layer < n_layer / 8 && (mix == CLB_MIX_IQ4_NL || mix == CLB_MIX_IQ4_XS))
            new_type = CLB_DT_Q5_K;
        else if (mix == CLB_MIX_Q5_K_M && use_more_bits(i_layer, n_layer)) new_type = CLB_DT_Q6_K;
        else if (mix == CLB_MIX_Q4_K_S && i_layer < n_layer / 8) new_type = CLB_DT_Q5_K;
        q->i_ffn_down++;
    } else if (strstr(name, "attn_output.weight")) {
        if (q->n_expert == 8) {
            if (mix == CLB_MIX_Q2_K || mix == CLB_MIX_Q3_K_S || mix == CLB_MIX_Q3_K_M || mix == CLB_MIX_IQ4_NL ||
                mix == CLB_MIX_Q4_K_S || mix == CLB_MIX_Q4_K_M || mix == CLB_MIX_IQ4_XS)
                new_type = CLB_DT_Q5_K;
        } else {
            if (mix == CLB_MIX_Q2_K) new_type = CLB_DT_Q3_K;
            else if (mix == CLB_MIX_Q3_K_M) new_type = CLB_DT_Q4_K;
            else if (mix == CLB_MIX_Q3_K_L) new_type = CLB_DT_Q5_K;
        }
    } else if (strstr(name, "attn_qkv.weight")) {
        if (mix == CLB_MIX_Q3_K_M || mix == CLB_MIX_Q3_K_L) new_type = CLB_DT_Q4_K;
        else if (mix == CLB_MIX_Q4_K_M) new_type = CLB_DT_Q5_K;
        else if (mix == CLB_MIX_Q5_K_M) new_type = CLB_DT_Q6_K;
    }
    /* ffn_gate / ffn_up: only IQ3_XS changes them */
    if (nx % block_size(new_type) != 0) {
        switch (new_type) {
        case CLB_DT_Q2_K: case CLB_DT_Q3_K: case CLB_DT_IQ4_XS: new_type = CLB_DT_IQ4_NL; break;
        case CLB_DT_Q4_K: new_type = CLB_DT_Q5_0; break;
        case CLB_DT_Q5_K: new_type = CLB_DT_Q5_1; break;
        case CLB_DT_Q6_K: new_type = CLB_DT_Q8_0; break;
        default: new_type = CLB_DT_F16; break; /* llama.cpp throws; f16 keeps the file writable */
        }
        if (nx % block_size(new_type) != 0) new_type = CLB_DT_F16;
        q->n_fallback++;
    }
    return new_type;
}

typedef struct sort_key {
    int layer, idx;
    const char *name;
} sort_key;

static int cmp_key(const void *a, const void *b) {
    const sort_key *x = a, *y = b;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return strcmp(x->name, y->name);
}

int clb_mix_plan(const clb_source *s, int mix, int *types, int *n_fallback) {
    const int base = base_type(mix);
    if (base < 0) return clb_err(COLIBRI_ERR_ARG, "unknown mix %d", mix);
    const int n = s->n_tensors;
    sort_key *k = clb_malloc((size_t)(n > 0 ? n : 1) * sizeof *k);
    if (!k) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    mix_state q = {.mix = mix, .n_expert = s->hp.n_expert, .n_layer = s->hp.n_layer};
    q.n_gqa = s->hp.n_head_kv > 0 ? s->hp.n_head / s->hp.n_head_kv : 0;
    const char *g = clb_arch_gguf_name(clb_arch_by_name(s->hp.arch));
    /* llama.cpp's LLM_TYPE_70B: 80-layer llama (GQA, not 8 experts) and qwen2 */
    q.is_70b = s->hp.n_layer == 80 && ((strcmp(g, "llama") == 0 && s->hp.n_expert != 8 &&
                                        s->hp.n_head != s->hp.n_head_kv) ||
                                       strcmp(g, "qwen2") == 0);
    for (int i = 0; i < n; i++) {
        const char *nm = s->tensors[i].name;
        k[i] = (sort_key){layer_of(nm), i, nm};
        if (strstr(nm, "attn_v.weight") || strstr(nm, "attn_qkv.weight") || strstr(nm, "attn_kv_b.weight"))
            q.n_attention_wv++;
        else if (strcmp(nm, "output.weight") == 0)
            q.has_output = true;
        if (s->hp.n_expert > 1 && strncmp(nm, "blk.", 4) == 0 && k[i].layer < 0) {
            clb_free(k);
            return clb_err(COLIBRI_ERR_FORMAT, "%s: cannot tell the layer of tensor '%s'", s->path, nm);
        }
    }
    qsort(k, (size_t)n, sizeof *k, cmp_key);
    for (int j = 0; j < n; j++) {
        const clb_src_tensor *t = &s->tensors[k[j].idx];
        if (!quantizable(t)) {
            types[k[j].idx] = -1;
            continue;
        }
        bool quantized_base = clb_type(base)->is_quantized;
        types[k[j].idx] = quantized_base ? tensor_type(&q, t, base) : base;
    }
    clb_free(k);
    if (n_fallback) *n_fallback = q.n_fallback;
    return COLIBRI_OK;
}
