/* source_gguf.c — a GGUF file as a model source: `<arch>.*` hyper-parameter keys onto the
 * descriptors' hyper-parameters, and GGUF's stacked 3-D expert tensors
 * (blk.L.ffn_{gate,up,down}_exps.weight, expert index outermost) served as per-expert
 * slices named like the .colibri per-expert tensors. No bytes are copied. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "format/gguf.h"
#include "model/source_impl.h"
#include "text/tokenizer.h"

/* The first key of a wrong type or out of range, reported after the keys are read (a key
   that is present but unusable is an error, never its default). */
static _Thread_local int key_err;

static bool geti(const clb_gguf *g, const char *arch, const char *k, int def, int *out) {
    char key[128];
    int64_t v;
    snprintf(key, sizeof key, "%s.%s", arch, k);
    *out = def;
    if (!clb_gguf_find(g, key)) return false;
    if (!clb_gguf_get_i64(g, key, &v)) {
        if (!key_err) key_err = clb_err(COLIBRI_ERR_FORMAT, "GGUF key '%s' has the wrong type (want an integer)", key);
        return false;
    }
    if (v < 0 || v > CLB_MAX_CONTEXT) {
        if (!key_err)
            key_err = clb_err(COLIBRI_ERR_FORMAT, "GGUF key '%s' = %lld is out of range 0..%d", key, (long long)v,
                              CLB_MAX_CONTEXT);
        return false;
    }
    *out = (int)v;
    return true;
}

static void getf(const clb_gguf *g, const char *arch, const char *k, float def, float *out) {
    char key[128];
    double v;
    snprintf(key, sizeof key, "%s.%s", arch, k);
    *out = def;
    if (!clb_gguf_find(g, key)) return;
    if (!clb_gguf_get_f64(g, key, &v)) {
        int64_t iv; /* an integer where a number is wanted is that number */
        if (clb_gguf_get_i64(g, key, &iv)) {
            *out = (float)iv;
            return;
        }
        if (!key_err) key_err = clb_err(COLIBRI_ERR_FORMAT, "GGUF key '%s' has the wrong type (want a number)", key);
        return;
    }
    *out = (float)v;
}

static bool has_tensor(const clb_gguf *g, const char *fmt, int l) {
    char name[96];
    snprintf(name, sizeof name, fmt, l);
    return clb_gguf_find_tensor(g, name) != NULL;
}

static bool any_layer_has(const clb_gguf *g, const char *fmt, int n_layer) {
    for (int l = 0; l < n_layer; l++)
        if (has_tensor(g, fmt, l)) return true;
    return false;
}

/* DeepSeek's MLA as today's llama.cpp converter writes it (attn_k_b / attn_v_b, no
   attn_kv_b): key_length / value_length are the widths of the cached latent (kv_lora_rank +
   rope, kv_lora_rank, one "KV head"), key_length_mla / value_length_mla the per-head q/k
   (nope + rope) and v widths, which colibri's head_dim / head_dim_v are. Files without the
   _mla keys (the unsplit layout, or ik_llama.cpp's) state the per-head widths directly. */
static int mla_split_lengths(const clb_gguf *g, const char *arch, clb_hparams *hp, const char *path) {
    int k_mla = 0, v_mla = 0;
    const bool hk = geti(g, arch, "attention.key_length_mla", 0, &k_mla);
    const bool hv = geti(g, arch, "attention.value_length_mla", 0, &v_mla);
    if (!hk && !hv) return COLIBRI_OK;
    if (hk != hv)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: %s.attention.%s_length_mla without %s_length_mla", path, arch,
                       hk ? "key" : "value", hk ? "value" : "key");
    if (hp->head_dim != hp->kv_lora_rank + hp->n_rot || hp->head_dim_v != hp->kv_lora_rank)
        return clb_err(COLIBRI_ERR_FORMAT,
                       "%s: %s.attention.key_length %d / value_length %d are not the latent widths %d / %d "
                       "(kv_lora_rank + rope.dimension_count / kv_lora_rank) that key_length_mla implies",
                       path, arch, hp->head_dim, hp->head_dim_v, hp->kv_lora_rank + hp->n_rot, hp->kv_lora_rank);
    /* the widths layer 0's k_b ([H][rank][nope], or 2-D [H x rank][nope]) and v_b ([H][v][rank],
       or [H x v][rank]) have */
    const clb_tensor *kb = clb_gguf_find_tensor(g, "blk.0.attn_k_b.weight");
    const clb_tensor *vb = clb_gguf_find_tensor(g, "blk.0.attn_v_b.weight");
    const int64_t nope = kb && kb->n_dims >= 2 ? kb->shape[kb->n_dims - 1] : k_mla - hp->n_rot;
    const int64_t v = !vb || vb->n_dims < 2 ? v_mla : vb->n_dims == 3 ? vb->shape[1] : vb->shape[0] / CLB_MAX(hp->n_head, 1);
    if (nope + hp->n_rot != k_mla || v != v_mla)
        return clb_err(COLIBRI_ERR_FORMAT,
                       "%s: %s.attention.key_length_mla %d / value_length_mla %d disagree with the tensors "
                       "blk.0.attn_k_b / attn_v_b (nope %lld + rope %d, v %lld)",
                       path, arch, k_mla, v_mla, (long long)nope, hp->n_rot, (long long)v);
    hp->head_dim = k_mla;
    hp->head_dim_v = v_mla;
    return COLIBRI_OK;
}

/* LongRoPE as llama.cpp's Phi-3 / Phi-3.5-MoE converter writes it: no rope.scaling.type;
   the short and long per-pair divisors as rope_factors_short.weight / rope_factors_long.weight
   (F32, rope.dimension_count / 2 each), rope.scaling.original_context_length, and one
   rope.scaling.attn_factor for both sets (absent: sqrt(1 + ln(factor) / ln(original)) for
   factor = context_length / original, 1 when that is <= 1). A config's short_mscale /
   long_mscale (Phi-3.5-MoE's 1.243) do not reach the file: the converter writes that
   default instead, and the file's value is what runs. The two tensors are consumed here
   (clb_source_open_gguf does not list them). */
static const char *const LONGROPE_TENSORS[2] = {"rope_factors_short.weight", "rope_factors_long.weight"};

static int gguf_longrope(const clb_gguf *g, const char *arch, clb_hparams *hp, const char *path) {
    const clb_tensor *t[2] = {clb_gguf_find_tensor(g, LONGROPE_TENSORS[0]), clb_gguf_find_tensor(g, LONGROPE_TENSORS[1])};
    if (!t[0] && !t[1]) return COLIBRI_OK;
    if (!t[0] || !t[1])
        return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s' without '%s' (LongRoPE needs both)", path,
                       LONGROPE_TENSORS[t[0] ? 0 : 1], LONGROPE_TENSORS[t[0] ? 1 : 0]);
    if (hp->rope_scaling != CLB_ROPE_SCALING_NONE)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: %s together with rope scaling type %d", path, LONGROPE_TENSORS[0],
                       hp->rope_scaling);
    const int half = hp->n_rot / 2;
    for (int i = 0; i < 2; i++)
        if (half < 1 || t[i]->dtype != CLB_DT_F32 || t[i]->n_dims != 1 || t[i]->shape[0] != half || !t[i]->data ||
            t[i]->size != (uint64_t)half * sizeof(float))
            return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s' must be %d F32 numbers (%s.rope.dimension_count / 2)",
                           path, LONGROPE_TENSORS[i], half, arch);
    int orig = 0;
    if (!geti(g, arch, "rope.scaling.original_context_length", 0, &orig) || orig < 1)
        return key_err ? key_err
                       : clb_err(COLIBRI_ERR_FORMAT, "%s: LongRoPE factors without %s.rope.scaling.original_context_length",
                                 path, arch);
    const float factor = (float)hp->max_pos / (float)orig;
    float att = 0;
    getf(g, arch, "rope.scaling.attn_factor", 0.0f, &att);
    if (att == 0) att = factor <= 1 ? 1.0f : sqrtf(1.0f + logf(factor) / logf((float)orig));
    if (!(att > 0 && att <= 1e3f))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: %s.rope.scaling.attn_factor %g out of range (0, 1000]", path, arch,
                       (double)att);
    float *ext = clb_calloc((size_t)half * 2, sizeof(float));
    if (!ext) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    for (int i = 0; i < 2; i++) memcpy(ext + i * half, t[i]->data, (size_t)half * sizeof(float)); /* little-endian */
    clb_free(hp->rope_ext);
    hp->rope_ext = ext;
    hp->rope_ext_n = half;
    hp->rope_scaling = CLB_ROPE_SCALING_LONGROPE;
    hp->rope_factor = factor;
    hp->rope_orig_ctx = (float)orig;
    hp->rope_short_mscale = hp->rope_long_mscale = att;
    return COLIBRI_OK;
}

static int hparams_from_gguf(const clb_gguf *g, const char *arch, clb_hparams *hp, const char *path) {
    memset(hp, 0, sizeof *hp);
    key_err = 0;
    const clb_arch_desc *d = clb_arch_from_gguf_name(arch);
    if (!d) {
        clb_err_prefix("%s", path);
        return COLIBRI_ERR_UNSUPPORTED;
    }
    int n_expert = 0, v_int;
    int64_t v;
    bool b;
    geti(g, arch, "expert_count", 0, &n_expert);
    /* GGUF's "llama" holds both dense Llama and Mixtral: experts decide; "deepseek2" holds
       V2 and V3: the gating function decides */
    if (strcmp(arch, "llama") == 0 && n_expert > 0) d = clb_arch_by_name("mixtral");
    if (strcmp(arch, "deepseek2") == 0 && geti(g, arch, "expert_gating_func", 0, &v_int) && v_int == 2)
        d = clb_arch_by_name("deepseek3");
    clb_arch_gguf_defaults(d, hp);
    if (!geti(g, arch, "embedding_length", 0, &hp->n_embd) || !geti(g, arch, "block_count", 0, &hp->n_layer) ||
        !geti(g, arch, "attention.head_count", 0, &hp->n_head))
        return key_err ? (clb_err_prefix("%s", path), key_err) :  clb_err(COLIBRI_ERR_FORMAT, "%s: missing %s.embedding_length, block_count or attention.head_count",
                       path, arch);
    /* block_count includes the multi-token-prediction layers stored last (GLM-4.5's
       nextn_predict_layers); inference skips them as HF does */
    if (geti(g, arch, "nextn_predict_layers", 0, &hp->n_nextn) && (hp->n_nextn > 64 || hp->n_nextn >= hp->n_layer))
        return clb_err(COLIBRI_ERR_FORMAT, "%s: %s.nextn_predict_layers %d out of range (block_count %d)", path, arch,
                       hp->n_nextn, hp->n_layer);
    hp->n_layer -= hp->n_nextn;
    geti(g, arch, "attention.head_count_kv", hp->n_head, &hp->n_head_kv);
    geti(g, arch, "feed_forward_length", 0, &hp->n_ff);
    geti(g, arch, "context_length", 2048, &hp->max_pos);
    int hd = hp->n_head > 0 ? hp->n_embd / hp->n_head : 0;
    geti(g, arch, "attention.key_length", hd, &hp->head_dim);
    geti(g, arch, "attention.value_length", hd, &hp->head_dim_v); /* llama.cpp's default: n_embd / n_head */
    geti(g, arch, "rope.dimension_count", hp->head_dim, &hp->n_rot);
    getf(g, arch, "rope.freq_base", 10000.0f, &hp->rope_theta);
    getf(g, arch, "attention.layer_norm_rms_epsilon", 1e-5f, &hp->norm_eps);
    hp->n_expert = n_expert;
    geti(g, arch, "expert_used_count", 0, &hp->n_expert_used);
    geti(g, arch, "expert_feed_forward_length", hp->n_ff, &hp->n_ff_exp);
    char key[128];
    snprintf(key, sizeof key, "%s.expert_weights_norm", arch);
    if (clb_gguf_get_bool(g, key, &b)) hp->norm_topk = b;
    getf(g, arch, "expert_weights_scale", 1.0f, &hp->routed_scale);
    if (hp->routed_scale == 0) hp->routed_scale = 1.0f;
    if (geti(g, arch, "expert_gating_func", 0, &v_int) && v_int)
        hp->router_score = v_int == 2 ? CLB_SCORE_SIGMOID : CLB_SCORE_SOFTMAX;
    geti(g, arch, "expert_group_count", 0, &hp->n_group);
    geti(g, arch, "expert_group_used_count", 0, &hp->topk_group);
    hp->score_bias = any_layer_has(g, "blk.%d.exp_probs_b.bias", hp->n_layer);
    hp->group_score = hp->score_bias ? 1 : 0;
    /* shared experts: Qwen2-MoE states their width, DeepSeek their count */
    geti(g, arch, "expert_shared_feed_forward_length", 0, &hp->n_ff_shexp);
    if (geti(g, arch, "expert_shared_count", 0, &v_int) && v_int > 0) {
        hp->n_shared_exp = v_int;
        hp->n_ff_shexp = v_int * hp->n_ff_exp;
    }
    /* per-head q/k RMSNorm where the file has it (GLM-4.5's use_qk_norm) */
    const clb_tensor *qn = clb_gguf_find_tensor(g, "blk.0.attn_q_norm.weight");
    if (hp->qk_norm == CLB_QKNORM_NONE && qn && qn->n_dims == 1 && qn->shape[0] == (int64_t)hp->head_dim &&
        hp->attn_kind != CLB_ATTN_MLA)
        hp->qk_norm = CLB_QKNORM_HEAD;
    hp->qkv_bias = has_tensor(g, "blk.%d.attn_q.bias", 0);
    hp->o_bias = has_tensor(g, "blk.%d.attn_output.bias", 0);
    hp->out_bias = clb_gguf_find_tensor(g, "output.bias") != NULL; /* phimoe's lm_head_bias */
    int rc = COLIBRI_OK;
    if (hp->attn_kind == CLB_ATTN_MLA) {
        geti(g, arch, "attention.q_lora_rank", 0, &hp->q_lora_rank);
        geti(g, arch, "attention.kv_lora_rank", 0, &hp->kv_lora_rank);
        geti(g, arch, "leading_dense_block_count", 0, &hp->first_dense);
        if ((rc = mla_split_lengths(g, arch, hp, path))) return rc;
        hp->n_head_kv = hp->n_head;
        hp->rope_offset = hp->head_dim - hp->n_rot;
    }
    if (hp->embd_mult > 0) { /* GraniteMoE */
        getf(g, arch, "embedding_scale", 1.0f, &hp->embd_mult);
        getf(g, arch, "residual_scale", 1.0f, &hp->resid_mult);
        getf(g, arch, "attention.scale", 1.0f, &hp->attn_mult);
        getf(g, arch, "logit_scale", 1.0f, &hp->logit_div);
    }
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    char *rs = clb_gguf_get_str(g, key);
    if (rs && strcmp(rs, "none") != 0) {
        getf(g, arch, "rope.scaling.factor", 1.0f, &hp->rope_factor);
        int orig = hp->max_pos; /* written as an integer by llama.cpp */
        geti(g, arch, "rope.scaling.original_context_length", hp->max_pos, &orig);
        hp->rope_orig_ctx = (float)orig;
        if (strcmp(rs, "linear") == 0) {
            hp->rope_scaling = CLB_ROPE_SCALING_LINEAR;
        } else if (strcmp(rs, "yarn") == 0) {
            hp->rope_scaling = CLB_ROPE_SCALING_YARN;
            hp->rope_beta_fast = 32.0f;
            hp->rope_beta_slow = 1.0f;
            float lm = 0;
            getf(g, arch, "rope.scaling.yarn_log_multiplier", 0.0f, &lm);
            /* llama.cpp stores 0.1 * mscale_all_dim; DeepSeek configs have mscale ==
               mscale_all_dim, so the rope's own attention factor is 1 */
            hp->rope_mscale = hp->rope_mscale_all_dim = lm / 0.1f;
        } else {
            rc = clb_err(COLIBRI_ERR_UNSUPPORTED, "%s: rope scaling '%s' is not supported", path, rs);
        }
    }
    if (!rs) { /* no type: llama.cpp applies a linear factor when one is given */
        float lf = 0;
        getf(g, arch, "rope.scaling.factor", 0.0f, &lf);
        if (lf == 0) getf(g, arch, "rope.scale_linear", 0.0f, &lf);
        if (lf > 0 && lf != 1.0f) {
            hp->rope_scaling = CLB_ROPE_SCALING_LINEAR;
            hp->rope_factor = lf;
        }
    }
    clb_free(rs);
    if (rc || (rc = gguf_longrope(g, arch, hp, path))) return rc;
    /* Llama-3 rope scaling arrives as per-pair frequency divisors in rope_freqs.weight */
    if (clb_gguf_find_tensor(g, "rope_freqs.weight")) {
        if (hp->rope_scaling != CLB_ROPE_SCALING_NONE)
            return clb_err(COLIBRI_ERR_UNSUPPORTED, "%s: rope_freqs.weight together with rope scaling type %d", path,
                           hp->rope_scaling);
        hp->rope_scaling = CLB_ROPE_SCALING_FREQS;
    }
    if (hp->attn_kind == CLB_ATTN_MLA) {
        hp->attn_mult = 1.0f / sqrtf((float)hp->head_dim);
        if (hp->rope_scaling == CLB_ROPE_SCALING_YARN && hp->rope_mscale_all_dim != 0 && hp->rope_factor > 1) {
            float ms = 0.1f * hp->rope_mscale_all_dim * logf(hp->rope_factor) + 1.0f;
            hp->attn_mult *= ms * ms;
        }
    }
    hp->bos_id = clb_gguf_get_i64(g, "tokenizer.ggml.bos_token_id", &v) ? (int)v : -1;
    hp->eos_id = clb_gguf_get_i64(g, "tokenizer.ggml.eos_token_id", &v) ? (int)v : -1;
    const clb_tensor *emb = clb_gguf_find_tensor(g, "token_embd.weight");
    if (!geti(g, arch, "vocab_size", 0, &hp->n_vocab)) {
        int et;
        uint64_t n = clb_gguf_arr_n(g, "tokenizer.ggml.tokens", &et);
        if (n > 0 && n < (1u << 24)) hp->n_vocab = (int)n;
        else if (emb && emb->n_dims == 2) hp->n_vocab = (int)emb->shape[0];
    }
    hp->tie_embd = clb_gguf_find_tensor(g, "output.weight") == NULL;
    /* every output row must be a token the tokenizer can decode (else generation fails
       when one is sampled) */
    int tok_type;
    uint64_t n_tok = clb_gguf_arr_n(g, "tokenizer.ggml.tokens", &tok_type);
    if (!key_err && clb_gguf_find(g, "tokenizer.ggml.tokens") && n_tok < (uint64_t)CLB_MAX(hp->n_vocab, 0))
        return clb_err(COLIBRI_ERR_FORMAT,
                       "%s: the tokenizer has %llu tokens (tokenizer.ggml.tokens), fewer than the model's %d "
                       "vocabulary rows",
                       path, (unsigned long long)n_tok, hp->n_vocab);
    if (key_err) {
        clb_err_prefix("%s", path);
        return key_err;
    }
    if (hp->n_layer <= 0 || hp->n_layer > CLB_MAX_LAYERS)
        return clb_err(COLIBRI_ERR_FORMAT, "%s: layer count %d out of range", path, hp->n_layer);
    hp->dense_layers = clb_calloc((size_t)hp->n_layer, 1);
    if (!hp->dense_layers) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    /* a layer is MoE exactly when it has a router */
    for (int l = 0; l < hp->n_layer; l++)
        hp->dense_layers[l] = n_expert > 0 && !has_tensor(g, "blk.%d.ffn_gate_inp.weight", l);
    hp->shexp_gate = hp->n_ff_shexp > 0 && any_layer_has(g, "blk.%d.ffn_gate_inp_shexp.weight", hp->n_layer);
    if (hp->shexp_gate) hp->n_shared_exp = 1;
    int window, moe_step;
    geti(g, arch, "attention.sliding_window", -1, &window);
    geti(g, arch, "interleave_moe_layer_step", -1, &moe_step);
    if (!key_err) key_err = clb_arch_gguf_layers(d, window, moe_step, hp);
    if (key_err) {
        clb_err_prefix("%s", path);
        return key_err;
    }
    rc = clb_hparams_validate(hp);
    if (rc) clb_err_prefix("%s", path);
    return rc;
}

static int parse_layer(const char *name) {
    if (strncmp(name, "blk.", 4) != 0) return -1;
    char *end;
    long l = strtol(name + 4, &end, 10);
    if (end == name + 4 || *end != '.' || l < 0 || l > CLB_MAX_LAYERS) return -1;
    return (int)l;
}

/* "blk.L.ffn_gate_exps.weight" -> "ffn_gate" when it is a stacked expert tensor */
static const char *stacked_kind(const char *name) {
    static const char *const kinds[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    const char *dot = strchr(name + 4, '.');
    if (!dot) return NULL;
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(kinds[i]);
        if (strncmp(dot + 1, kinds[i], n) == 0 && strcmp(dot + 1 + n, ".weight") == 0) return kinds[i];
    }
    return NULL;
}

int clb_source_open_gguf(const char *path, clb_source *s) {
    clb_gguf *g = clb_calloc(1, sizeof *g);
    if (!g) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    int rc = s->has_io ? clb_gguf_open_io(&s->io, g) : clb_gguf_open(path, g);
    if (rc) {
        clb_free(g);
        return rc;
    }
    s->impl = g;
    char *arch = clb_gguf_get_str(g, "general.architecture");
    if (!arch) return clb_err(COLIBRI_ERR_FORMAT, "%s: no general.architecture", path);
    rc = hparams_from_gguf(g, arch, &s->hp, path);
    clb_free(arch);
    if (rc) return rc;
#ifndef CLB_MINIMAL /* the minimal build has no tokenizer (src/minimal/text_none.c) */
    if (clb_gguf_find(g, "tokenizer.ggml.model")) {
        s->tokenizer = clb_tokenizer_gguf_to_json(g);
        if (!s->tokenizer) {
            clb_err_prefix("%s", path);
            return COLIBRI_ERR_FORMAT;
        }
    }
#endif

    /* count output tensors: stacked ones become n_expert slices */
    int n = 0;
    for (int i = 0; i < g->n_tensors; i++) n += stacked_kind(g->tensors[i].name) ? s->hp.n_expert : 1;
    s->tensors = clb_calloc((size_t)(n ? n : 1), sizeof *s->tensors);
    if (!s->tensors) return clb_err(COLIBRI_ERR_NOMEM, "out of memory");
    int k = 0;
    const clb_arch_desc *desc = clb_arch_by_name(s->hp.arch);
    for (int i = 0; i < g->n_tensors; i++) {
        const clb_tensor *t = &g->tensors[i];
        const char *kind = stacked_kind(t->name);
        int L = parse_layer(t->name);
        if (L >= s->hp.n_layer && s->hp.n_nextn > 0) continue; /* a multi-token-prediction layer */
        if (s->hp.rope_scaling == CLB_ROPE_SCALING_LONGROPE &&
            (!strcmp(t->name, LONGROPE_TENSORS[0]) || !strcmp(t->name, LONGROPE_TENSORS[1])))
            continue; /* held in the hyper-parameters (gguf_longrope) */
        if (strlen(t->name) >= sizeof s->tensors[0].name)
            return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor name '%.40s...' too long", path, t->name);
        if (!kind) {
            clb_src_tensor *o = &s->tensors[k++];
            snprintf(o->name, sizeof o->name, "%s", t->name);
            const char *dot = L >= 0 ? strchr(t->name + 4, '.') : NULL;
            const char *canon = dot ? clb_arch_gguf_rename(desc, dot + 1) : NULL;
            if (canon) snprintf(o->name, sizeof o->name, "blk.%d.%s", L, canon);
            o->dtype = t->dtype;
            o->n_dims = t->n_dims;
            memcpy(o->shape, t->shape, sizeof o->shape);
            o->data = t->data;
            o->size = t->size;
            o->layer = L;
            o->expert = -1;
            o->fd = g->map.fd;
            o->io = g->map.io;
            o->file_offset = t->offset;
            continue;
        }
        if (t->n_dims != 3 || t->shape[0] != s->hp.n_expert)
            return clb_err(COLIBRI_ERR_FORMAT, "%s: tensor '%s' should be [%d experts][rows][cols]", path, t->name,
                           s->hp.n_expert);
        if (!t->data)
            return clb_err(COLIBRI_ERR_UNSUPPORTED, "%s: tensor '%s' has unsupported type %s", path, t->name,
                           clb_dtype_name(t->dtype));
        uint64_t slice = t->size / (uint64_t)s->hp.n_expert;
        for (int e = 0; e < s->hp.n_expert; e++) {
            clb_src_tensor *o = &s->tensors[k++];
            snprintf(o->name, sizeof o->name, "blk.%d.%.*s.%d.weight", L, (int)(strlen(kind) - 5), kind, e);
            o->dtype = t->dtype;
            o->n_dims = 2;
            o->shape[0] = t->shape[1];
            o->shape[1] = t->shape[2];
            o->data = t->data + (uint64_t)e * slice;
            o->size = slice;
            o->layer = L;
            o->expert = e;
            o->fd = g->map.fd;
            o->io = g->map.io;
            o->file_offset = t->offset + (uint64_t)e * slice;
        }
    }
    s->n_tensors = k;
    return clb_source_finish_table(s);
}

void clb_source_close_gguf(clb_source *s) { clb_gguf_close(s->impl); }
