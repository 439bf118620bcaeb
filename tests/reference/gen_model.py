#!/usr/bin/python3
"""Generates a tiny random Hugging Face model directory (config.json with the real HF key
names, model.safetensors with HF tensor names and [out, in] layouts) for one of:
  llama, mixtral, qwen2_moe, qwen3_moe, olmoe, deepseek_v2, deepseek_v3, granitemoe, glm4_moe, ernie4_5_moe, smallthinker,
  gpt_oss, llama4 (model_type llama4_text; --conditional: the Llama4ForConditionalGeneration layout).

  gen_model.py --family mixtral --out DIR [--seed 1] [--dtype f32|f16|bf16] [--shards N]
               [--layers 2] [--hidden 128] [--heads 4] [--kv-heads 2] [--head-dim D]
               [--experts 8] [--top-k 2] [--ff 64] [--vocab 256] ... (see --help)

Weight init as in tests/fixtures (ORACLE-README.md): embeddings std 1, linear layers std
1/sqrt(fan_in), untied lm_head std 2/sqrt(fan_in), norm weights 1 + N(0, 0.1^2), biases
std 0.1, router weights std 2/sqrt(fan_in), e_score_correction_bias std 0.1. Values are
rounded to --dtype before anything is computed on them.

Router margin re-draw: layer by layer, a layer's router (and correction bias) is re-drawn
until every top-k decision (and top-k-group decision) on the token list has a margin
>= --margin between the k-th and (k+1)-th score (softmax probability; sigmoid score for
sigmoid routers), so f32 routing is not decided by rounding. --margin-greedy N extends
the checked sequence with the model's own N-token greedy continuation; --margin-dtypes
also requires the margins on the weights round-tripped through those dtypes (with
Q8_0 activations for q8_0/q4_0), so quantized comparisons see the same experts. A
variant is T (every quantizable tensor) or DENSE+EXPERTS (routed experts in EXPERTS,
the rest in DENSE: colibri convert --dtype DENSE --expert-dtype EXPERTS), e.g.
--margin-dtypes q8_0,q4_0,q8_0+q4_0. The variants are built by hf_ref.quantized_model,
the same code as hf_ref.py --weights-dtype/--expert-weights-dtype/--act-quant.

Also writes tokens.txt (the token list: BOS 1 then uniform ids in [3, vocab)) and
meta.json (seed, dims, re-draws, achieved margins, smallest top1-top2 logit gap, greedy).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_ref  # noqa: E402
import quant  # noqa: E402
import safetensors_np  # noqa: E402

ARCH = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "mixtral": "MixtralForCausalLM", "qwen2_moe": "Qwen2MoeForCausalLM",
        "qwen3_moe": "Qwen3MoeForCausalLM", "olmoe": "OlmoeForCausalLM", "deepseek_v2": "DeepseekV2ForCausalLM",
        "deepseek_v3": "DeepseekV3ForCausalLM", "granitemoe": "GraniteMoeForCausalLM",
        "glm4_moe": "Glm4MoeForCausalLM", "ernie4_5_moe": "Ernie4_5_MoeForCausalLM",
        "smallthinker": "SmallThinkerForCausalLM", "gpt_oss": "GptOssForCausalLM", "llama4": "Llama4ForCausalLM",
        "phimoe": "PhimoeForCausalLM",
        "jetmoe": "JetMoeForCausalLM"}


def build_config(a):
    f = a.family
    H, Hk = a.heads, a.kv_heads if a.kv_heads else a.heads
    c = {"architectures": [ARCH[f]], "model_type": f, "vocab_size": a.vocab, "hidden_size": a.hidden,
         "num_hidden_layers": a.layers, "num_attention_heads": H, "num_key_value_heads": Hk,
         "hidden_act": "silu", "max_position_embeddings": a.max_pos, "rms_norm_eps": a.eps,
         "rope_theta": a.rope_theta, "initializer_range": 0.02, "use_cache": True, "bos_token_id": 1,
         "eos_token_id": 2, "pad_token_id": None, "attention_dropout": 0.0,
         "tie_word_embeddings": bool(a.tie), "torch_dtype": {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[a.dtype],
         "transformers_version": "4.48.0"}
    rope_scaling = json.loads(a.rope_scaling) if a.rope_scaling else None
    if a.yarn:
        orig = a.max_pos
        rope_scaling = {"type": "yarn", "factor": float(a.yarn), "original_max_position_embeddings": orig,
                        "beta_fast": 32, "beta_slow": 1, "mscale": a.mscale, "mscale_all_dim": a.mscale_all_dim}
        c["max_position_embeddings"] = int(orig * a.yarn)  # keeps factor == max_pos / original
    c["rope_scaling"] = rope_scaling
    if rope_scaling and rope_scaling.get("original_max_position_embeddings") and \
            rope_scaling.get("rope_type", rope_scaling.get("type")) == "longrope":
        # older transformers read it from the config itself (Phi3Config / PhimoeConfig set both)
        c["original_max_position_embeddings"] = rope_scaling["original_max_position_embeddings"]
    ff, E, k = a.ff, a.experts, a.top_k
    dense_ff = a.dense_ff or 2 * ff
    if f in ("llama", "mistral"):
        c.update(intermediate_size=ff, attention_bias=False, mlp_bias=False, pretraining_tp=1)
        c["head_dim"] = a.head_dim or a.hidden // H
        if f == "mistral":
            c["sliding_window"] = a.sliding_window or None
    elif f == "mixtral":
        c.update(intermediate_size=ff, num_local_experts=E, num_experts_per_tok=k, sliding_window=a.sliding_window or None,
                 router_jitter_noise=0.0, output_router_logits=False, router_aux_loss_coef=0.02)
        if a.head_dim:
            c["head_dim"] = a.head_dim
    elif f == "qwen2_moe":
        c.update(intermediate_size=dense_ff, moe_intermediate_size=ff, shared_expert_intermediate_size=a.shared_ff or 2 * ff,
                 num_experts=E, num_experts_per_tok=k, norm_topk_prob=bool(a.norm_topk_prob if a.norm_topk_prob is not None else 0),
                 decoder_sparse_step=a.sparse_step, mlp_only_layers=a.mlp_only_layers, qkv_bias=True,
                 use_sliding_window=False, sliding_window=a.max_pos, max_window_layers=a.layers,
                 output_router_logits=False, router_aux_loss_coef=0.001)
    elif f == "qwen3_moe":
        c.update(intermediate_size=dense_ff, moe_intermediate_size=ff, num_experts=E, num_experts_per_tok=k,
                 norm_topk_prob=bool(a.norm_topk_prob if a.norm_topk_prob is not None else 1),
                 decoder_sparse_step=a.sparse_step, mlp_only_layers=a.mlp_only_layers, attention_bias=False,
                 head_dim=a.head_dim or a.hidden // H, use_sliding_window=False, sliding_window=None,
                 max_window_layers=a.layers, output_router_logits=False, router_aux_loss_coef=0.001)
    elif f == "olmoe":
        if a.head_dim and a.head_dim != a.hidden // H:
            raise SystemExit("olmoe: head_dim is hidden / heads")
        c.update(intermediate_size=ff, num_experts=E, num_experts_per_tok=k,
                 norm_topk_prob=bool(a.norm_topk_prob if a.norm_topk_prob is not None else 0),
                 clip_qkv=None, attention_bias=False, output_router_logits=False, router_aux_loss_coef=0.01)
    elif f in ("deepseek_v2", "deepseek_v3"):
        v3 = f == "deepseek_v3"
        c["num_key_value_heads"] = H
        c.update(intermediate_size=dense_ff, moe_intermediate_size=ff, n_routed_experts=E,
                 n_shared_experts=a.shared_experts if a.shared_experts else None, num_experts_per_tok=k,
                 first_k_dense_replace=a.first_dense, moe_layer_freq=1,
                 routed_scaling_factor=a.routed_scaling if a.routed_scaling is not None else (2.5 if v3 else 1.0),
                 scoring_func=a.scoring or ("sigmoid" if v3 else "softmax"),
                 topk_method=a.topk_method or ("noaux_tc" if v3 else ("group_limited_greedy" if a.n_group > 1 else "greedy")),
                 n_group=a.n_group, topk_group=a.topk_group or a.n_group,
                 norm_topk_prob=bool(a.norm_topk_prob if a.norm_topk_prob is not None else (1 if v3 else 0)),
                 q_lora_rank=a.q_lora_rank if a.q_lora_rank else None, kv_lora_rank=a.kv_lora_rank,
                 qk_nope_head_dim=a.qk_nope, qk_rope_head_dim=a.qk_rope, v_head_dim=a.v_head_dim,
                 attention_bias=False, aux_loss_alpha=0.001, seq_aux=True)
        if v3:
            c["rope_interleave"] = True
        if not v3 and c["norm_topk_prob"] and c["routed_scaling_factor"] != 1.0:
            raise SystemExit("deepseek_v2: norm_topk_prob with routed_scaling_factor != 1 is ambiguous "
                             "(DeepSeek's code scales only unnormalised weights); not generated")
        if E % a.n_group:
            raise SystemExit("n_routed_experts must be a multiple of n_group")
    elif f == "glm4_moe":  # GLM-4.5: DeepSeek-V3's router over GQA with partial rope
        c.update(intermediate_size=dense_ff, moe_intermediate_size=ff, n_routed_experts=E,
                 n_shared_experts=a.shared_experts, num_experts_per_tok=k, first_k_dense_replace=a.first_dense,
                 routed_scaling_factor=a.routed_scaling if a.routed_scaling is not None else 2.5,
                 n_group=a.n_group, topk_group=a.topk_group or a.n_group,
                 norm_topk_prob=bool(a.norm_topk_prob if a.norm_topk_prob is not None else 1),
                 head_dim=a.head_dim or a.hidden // H, partial_rotary_factor=a.partial_rotary,
                 attention_bias=bool(a.attention_bias), use_qk_norm=bool(a.qk_norm),
                 num_nextn_predict_layers=a.nextn)
        if E % a.n_group:
            raise SystemExit("n_routed_experts must be a multiple of n_group")
    elif f == "ernie4_5_moe":  # ERNIE-4.5: moe_* keys, softmax + correction bias, clamped renormalisation
        c.update(intermediate_size=dense_ff, moe_intermediate_size=ff, moe_num_experts=E, moe_k=k,
                 moe_num_shared_experts=a.shared_experts, moe_layer_start_index=a.first_dense,
                 moe_layer_end_index=a.moe_end, moe_layer_interval=a.sparse_step, moe_norm_min=a.norm_min,
                 use_bias=False, head_dim=a.head_dim or a.hidden // H, rope_theta=a.rope_theta,
                 num_nextn_predict_layers=a.nextn)
    elif f == "smallthinker":  # router before attention, ReGLU experts, NoPE / sliding layers by layout
        del c["hidden_act"]
        nope = [int(x) for x in a.nope_layers.split(",") if x] if a.nope_layers else []
        swl = [int(x) for x in a.swa_layers.split(",") if x] if a.swa_layers else []
        c.update(moe_num_primary_experts=E, moe_ffn_hidden_size=ff, moe_num_active_primary_experts=k,
                 moe_primary_router_apply_softmax=bool(a.router_softmax), head_dim=a.head_dim or a.hidden // H,
                 rope_layout=[0 if L in nope else 1 for L in range(a.layers)],
                 sliding_window_layout=[1 if L in swl else 0 for L in range(a.layers)],
                 sliding_window_size=a.sliding_window or 4096, norm_topk_prob=True)
    elif f == "granitemoe":
        c.update(intermediate_size=ff, num_local_experts=E, num_experts_per_tok=k, attention_bias=False,
                 embedding_multiplier=a.embedding_multiplier, residual_multiplier=a.residual_multiplier,
                 attention_multiplier=a.attention_multiplier, logits_scaling=a.logits_scaling,
                 position_embedding_type="rope", output_router_logits=False, router_aux_loss_coef=0.001)
        if a.head_dim and a.head_dim != a.hidden // H:
            raise SystemExit("granitemoe: head_dim is hidden / heads")
    elif f == "gpt_oss":
        c.update(intermediate_size=ff, num_local_experts=E, num_experts_per_tok=k, attention_bias=True,
                 head_dim=a.head_dim or 64, sliding_window=a.sliding_window or 128, swiglu_limit=a.swiglu_limit,
                 output_router_logits=False, router_aux_loss_coef=0.9)
        if a.gpt_oss_rope == "yarn":  # as the published config.json states it
            c["rope_scaling"] = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                 "truncate": False, "original_max_position_embeddings": 4096}
            c["rope_theta"] = 150000.0
        elif a.gpt_oss_rope == "default":  # GptOssConfig's defaults: YaRN, theta 150000
            c.pop("rope_theta", None)
            c.pop("rope_scaling", None)
        if a.hidden % 32 or ff % 32:
            raise SystemExit("gpt_oss: hidden and ff must be multiples of 32 (MXFP4 blocks)")
    elif f == "llama4":
        llama4_config(a, c)
    elif f == "phimoe":
        phimoe_config(a, c)
    elif f == "jetmoe":  # JetMoeConfig: num_attention_heads = num_key_value_heads * num_experts_per_tok
        del c["hidden_act"]
        c.update(kv_channels=a.head_dim or 16, intermediate_size=ff, num_local_experts=E, num_experts_per_tok=k,
                 num_attention_heads=Hk * k, activation_function="silu", output_router_logits=False,
                 aux_loss_coef=0.01)
    if a.sliding_window and f in ("qwen2_moe", "qwen3_moe"):
        c.update(use_sliding_window=True, sliding_window=a.sliding_window,
                 max_window_layers=a.max_window_layers if a.max_window_layers is not None else 0)
    if a.layer_types:
        kinds = {"full": "full_attention", "sliding": "sliding_attention", "chunked": "chunked_attention"}
        lt = [kinds[x] for x in a.layer_types.split(",")]
        c["layer_types"] = (lt * a.layers)[:a.layers]
        if a.chunk:
            c["attention_chunk_size"] = a.chunk
    if a.sinks:
        c["attention_sinks"] = True  # for the reader of config.json only: the tensors carry them
    return c


# ---- Llama-4 (Llama4TextConfig keys; the layer layout as its __post_init__ derives it) ----

def llama4_config(a, c):
    n = a.layers
    c["model_type"] = "llama4_text"
    c.update(intermediate_size=a.ff, intermediate_size_mlp=a.dense_ff or 2 * a.ff, num_local_experts=a.experts,
             num_experts_per_tok=a.top_k, head_dim=a.head_dim or a.hidden // a.heads,
             attention_bias=bool(a.attention_bias), use_qk_norm=bool(a.qk_norm),
             interleave_moe_layer_step=a.sparse_step, no_rope_layer_interval=a.nope_interval,
             attention_chunk_size=a.chunk or 8192, attn_temperature_tuning=a.temp_tuning,
             floor_scale=a.floor_scale, attn_scale=a.attn_scale, router_aux_loss_coef=0.001,
             router_jitter_noise=0.0, output_router_logits=False)
    if a.temp_tuning in (0, 1):
        c["attn_temperature_tuning"] = bool(a.temp_tuning)
    if a.nope_layers is not None:  # explicit no_rope_layers (1 = rope), else derived from the interval
        nope = [int(x) for x in a.nope_layers.split(",") if x]
        c["no_rope_layers"] = [0 if L in nope else 1 for L in range(n)]
    if a.moe_layers is not None:
        c["moe_layers"] = [int(x) for x in a.moe_layers.split(",") if x]


def llama4_moe_layers(c):
    if c.get("moe_layers") is not None:
        return c["moe_layers"]
    step = c["interleave_moe_layer_step"]
    return list(range(step - 1, c["num_hidden_layers"], step))


def llama4_ffn_shapes(c, L, p, s, mlp):
    h = c["hidden_size"]
    if L not in llama4_moe_layers(c):
        mlp(p, c["intermediate_size_mlp"])
        return
    E, ff = c["num_local_experts"], c["intermediate_size"]
    s[p + "router.weight"] = ((E, h), "router")
    s[p + "experts.gate_up_proj"] = ((E, h, 2 * ff), "xw")  # x @ W, gate = first half
    s[p + "experts.down_proj"] = ((E, ff, h), "xw")
    mlp(p + "shared_expert.", ff)


def llama4_conditional(cfg, tensors, rng):
    """The Llama4ForConditionalGeneration layout: the text config under text_config, the
    text weights under language_model., plus a (tiny, unused) vision tower and projector."""
    h = cfg["hidden_size"]
    outer = {"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
             "text_config": dict(cfg, architectures=None), "tie_word_embeddings": cfg["tie_word_embeddings"],
             "vision_config": {"model_type": "llama4_vision_model", "hidden_size": 16, "num_hidden_layers": 1},
             "boi_token_index": 200080, "eoi_token_index": 200081, "image_token_index": 200092,
             "transformers_version": cfg["transformers_version"]}
    del outer["text_config"]["architectures"]
    t = {"language_model." + k: v for k, v in tensors.items()}
    t["vision_model.patch_embedding.linear.weight"] = rng.standard_normal((16, 48)).astype(np.float32)
    t["multi_modal_projector.linear_1.weight"] = rng.standard_normal((h, 16)).astype(np.float32)
    return outer, t


def phimoe_config(a, c):
    """Phi-3.5-MoE (PhimoeConfig): Mixtral's experts, LayerNorm with biases, q/k/v/o and LM
    head biases, sparsemixer routing (top-2) with router_jitter_noise, LongRoPE with random
    short / long factors of head_dim / 2 entries and short_mscale / long_mscale."""
    hd = a.hidden // a.heads
    if a.head_dim and a.head_dim != hd:
        raise SystemExit("phimoe: head_dim is hidden / heads")
    c["architectures"] = [a.arch_name or "PhimoeForCausalLM"]
    c.update(intermediate_size=a.ff, num_local_experts=a.experts, num_experts_per_tok=a.top_k,
             router_jitter_noise=a.router_jitter, input_jitter_noise=0.01, attention_bias=True,
             lm_head_bias=bool(a.lm_head_bias), sliding_window=a.sliding_window or None,
             output_router_logits=False, router_aux_loss_coef=0.0,
             original_max_position_embeddings=a.max_pos)  # the published config states it
    if a.longrope_orig:
        frng = np.random.default_rng(a.seed + 31)
        orig = a.longrope_orig
        c["rope_scaling"] = {"type": "longrope", "original_max_position_embeddings": orig,
                             "short_factor": [float(x) for x in np.round(1 + frng.random(hd // 2), 4)],
                             "long_factor": [float(x) for x in np.round(1 + 8 * frng.random(hd // 2), 4)],
                             "short_mscale": a.short_mscale, "long_mscale": a.long_mscale}
        c["original_max_position_embeddings"] = orig


def tensor_shapes(c):
    """{name: (shape, kind)}; kind in embed/linear/lm_head/norm/bias/router/ebias."""
    f = c["model_type"]
    h, H, Hk, V = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["vocab_size"]
    s = {"model.embed_tokens.weight": ((V, h), "embed"), "model.norm.weight": ((h,), "norm")}
    if not c["tie_word_embeddings"]:
        s["lm_head.weight"] = ((V, h), "lm_head")
    hd = c.get("head_dim") or c.get("kv_channels") or h // H
    for L in range(c["num_hidden_layers"]):
        p = f"model.layers.{L}."
        s[p + "input_layernorm.weight"] = ((h,), "norm")
        s[p + "post_attention_layernorm.weight"] = ((h,), "norm")
        a = p + "self_attn."
        if f == "jetmoe":
            jetmoe_shapes(s, c, p)
            continue
        if f in ("deepseek_v2", "deepseek_v3"):
            nope, rd, vd, r = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"], c["kv_lora_rank"]
            if c["q_lora_rank"]:
                s[a + "q_a_proj.weight"] = ((c["q_lora_rank"], h), "linear")
                s[a + "q_a_layernorm.weight"] = ((c["q_lora_rank"],), "norm")
                s[a + "q_b_proj.weight"] = ((H * (nope + rd), c["q_lora_rank"]), "linear")
            else:
                s[a + "q_proj.weight"] = ((H * (nope + rd), h), "linear")
            s[a + "kv_a_proj_with_mqa.weight"] = ((r + rd, h), "linear")
            s[a + "kv_a_layernorm.weight"] = ((r,), "norm")
            s[a + "kv_b_proj.weight"] = ((H * (nope + vd), r), "linear")
            s[a + "o_proj.weight"] = ((h, H * vd), "linear")
        else:
            s[a + "q_proj.weight"] = ((H * hd, h), "linear")
            s[a + "k_proj.weight"] = ((Hk * hd, h), "linear")
            s[a + "v_proj.weight"] = ((Hk * hd, h), "linear")
            s[a + "o_proj.weight"] = ((h, H * hd), "linear")
            if f == "qwen2_moe":
                s[a + "q_proj.bias"] = ((H * hd,), "bias")
                s[a + "k_proj.bias"] = ((Hk * hd,), "bias")
                s[a + "v_proj.bias"] = ((Hk * hd,), "bias")
            if f == "qwen3_moe":
                s[a + "q_norm.weight"] = ((hd,), "norm")
                s[a + "k_norm.weight"] = ((hd,), "norm")
            if f == "olmoe":
                s[a + "q_norm.weight"] = ((H * hd,), "norm")
                s[a + "k_norm.weight"] = ((Hk * hd,), "norm")
            if f in ("gpt_oss", "phimoe"):
                for n, rows in (("q", H * hd), ("k", Hk * hd), ("v", Hk * hd), ("o", h)):
                    s[a + n + "_proj.bias"] = ((rows,), "bias")
            if c.get("attention_sinks") or f == "gpt_oss":
                s[a + "sinks"] = ((H,), "sink")
            if f == "llama4_text" and c["attention_bias"]:  # q/k/v and o
                for n, rows in (("q", H * hd), ("k", Hk * hd), ("v", Hk * hd), ("o", h)):
                    s[a + n + "_proj.bias"] = ((rows,), "bias")
            if f == "glm4_moe":
                if c["attention_bias"]:  # q/k/v only; o_proj has none
                    s[a + "q_proj.bias"] = ((H * hd,), "bias")
                    s[a + "k_proj.bias"] = ((Hk * hd,), "bias")
                    s[a + "v_proj.bias"] = ((Hk * hd,), "bias")
                if c["use_qk_norm"]:
                    s[a + "q_norm.weight"] = ((hd,), "norm")
                    s[a + "k_norm.weight"] = ((hd,), "norm")

        def mlp(prefix, ff, names=("gate_proj", "up_proj", "down_proj")):
            s[prefix + names[0] + ".weight"] = ((ff, h), "linear")
            s[prefix + names[1] + ".weight"] = ((ff, h), "linear")
            s[prefix + names[2] + ".weight"] = ((h, ff), "linear")

        if f in ("llama", "mistral"):
            mlp(p + "mlp.", c["intermediate_size"])
        elif f in ("mixtral", "phimoe"):
            E = c["num_local_experts"]
            s[p + "block_sparse_moe.gate.weight"] = ((E, h), "router")
            for e in range(E):
                mlp(f"{p}block_sparse_moe.experts.{e}.", c["intermediate_size"], ("w1", "w3", "w2"))
        elif f in ("qwen2_moe", "qwen3_moe"):
            sparse = L not in c["mlp_only_layers"] and (L + 1) % c["decoder_sparse_step"] == 0
            if not sparse:
                mlp(p + "mlp.", c["intermediate_size"])
                continue
            E = c["num_experts"]
            s[p + "mlp.gate.weight"] = ((E, h), "router")
            for e in range(E):
                mlp(f"{p}mlp.experts.{e}.", c["moe_intermediate_size"])
            if f == "qwen2_moe":
                mlp(p + "mlp.shared_expert.", c["shared_expert_intermediate_size"])
                s[p + "mlp.shared_expert_gate.weight"] = ((1, h), "linear")
        elif f == "olmoe":
            E = c["num_experts"]
            s[p + "mlp.gate.weight"] = ((E, h), "router")
            for e in range(E):
                mlp(f"{p}mlp.experts.{e}.", c["intermediate_size"])
        elif f in ("deepseek_v2", "deepseek_v3"):
            if L < c["first_k_dense_replace"]:
                mlp(p + "mlp.", c["intermediate_size"])
                continue
            E = c["n_routed_experts"]
            s[p + "mlp.gate.weight"] = ((E, h), "router")
            if f == "deepseek_v3":
                s[p + "mlp.gate.e_score_correction_bias"] = ((E,), "ebias")
            for e in range(E):
                mlp(f"{p}mlp.experts.{e}.", c["moe_intermediate_size"])
            if c["n_shared_experts"]:
                mlp(p + "mlp.shared_experts.", c["moe_intermediate_size"] * c["n_shared_experts"])
        elif f == "glm4_moe":
            if L < c["first_k_dense_replace"]:
                mlp(p + "mlp.", c["intermediate_size"])
                continue
            E = c["n_routed_experts"]
            s[p + "mlp.gate.weight"] = ((E, h), "router")
            s[p + "mlp.gate.e_score_correction_bias"] = ((E,), "ebias")
            for e in range(E):
                mlp(f"{p}mlp.experts.{e}.", c["moe_intermediate_size"])
            if c["n_shared_experts"]:
                mlp(p + "mlp.shared_experts.", c["moe_intermediate_size"] * c["n_shared_experts"])
        elif f == "ernie4_5_moe":
            end = c["moe_layer_end_index"] if c["moe_layer_end_index"] != -1 else c["num_hidden_layers"] - 1
            if not ((L + 1) % c["moe_layer_interval"] == 0 and c["moe_layer_start_index"] <= L <= end):
                mlp(p + "mlp.", c["intermediate_size"])
                continue
            E = c["moe_num_experts"]
            s[p + "mlp.gate.weight"] = ((E, h), "router")
            s[p + "mlp.moe_statics.e_score_correction_bias"] = ((1, E), "ebias")
            for e in range(E):
                mlp(f"{p}mlp.experts.{e}.", c["moe_intermediate_size"])
            if c["moe_num_shared_experts"]:
                mlp(p + "mlp.shared_experts.", c["moe_intermediate_size"] * c["moe_num_shared_experts"])
        elif f == "smallthinker":
            E = c["moe_num_primary_experts"]
            b = p + "block_sparse_moe."
            s[b + "primary_router.weight"] = ((E, h), "router")
            for e in range(E):
                mlp(f"{b}experts.{e}.", c["moe_ffn_hidden_size"], ("gate", "up", "down"))
        elif f == "gpt_oss":
            E, ff = c["num_local_experts"], c["intermediate_size"]
            s[p + "mlp.router.weight"] = ((E, h), "router")
            s[p + "mlp.router.bias"] = ((E,), "bias")
            x = p + "mlp.experts."
            if c.get("_mxfp4"):  # published form: [E][out][in / 32][16] nibbles + E8M0 scales
                s[x + "gate_up_proj_blocks"] = ((E, 2 * ff, h // 32, 16), "fp4")
                s[x + "gate_up_proj_scales"] = ((E, 2 * ff, h // 32), "e8m0")
                s[x + "down_proj_blocks"] = ((E, h, ff // 32, 16), "fp4")
                s[x + "down_proj_scales"] = ((E, h, ff // 32), "e8m0")
            else:  # x @ W layout
                s[x + "gate_up_proj"] = ((E, h, 2 * ff), "xw")
                s[x + "down_proj"] = ((E, ff, h), "xw")
            s[x + "gate_up_proj_bias"] = ((E, 2 * ff), "bias")
            s[x + "down_proj_bias"] = ((E, h), "bias")
        elif f == "llama4_text":
            llama4_ffn_shapes(c, L, p + "feed_forward.", s, mlp)
        elif f == "granitemoe":
            E, ff = c["num_local_experts"], c["intermediate_size"]
            b = p + "block_sparse_moe."
            s[b + "router.layer.weight"] = ((E, h), "router")
            s[b + "input_linear.weight"] = ((E, 2 * ff, h), "linear")
            s[b + "output_linear.weight"] = ((E, h, ff), "linear")
    if f == "phimoe":  # nn.LayerNorm biases, lm_head_bias
        s["model.norm.bias"] = ((h,), "bias")
        for L in range(c["num_hidden_layers"]):
            for nm in ("input_layernorm", "post_attention_layernorm"):
                s[f"model.layers.{L}.{nm}.bias"] = ((h,), "bias")
        if c.get("lm_head_bias"):
            s["lm_head.bias"] = ((V,), "bias")
    if f == "ernie4_5_moe" and c.get("num_nextn_predict_layers"):  # ERNIE's MTP weights (model.mtp_*), ignored on load
        s["model.mtp_emb_norm.0.weight"] = ((h,), "norm")
        s["model.mtp_hidden_norm.0.weight"] = ((h,), "norm")
        s["model.mtp_linear_proj.0.weight"] = ((h, 2 * h), "linear")
        s["model.mtp_block.0.input_layernorm.weight"] = ((h,), "norm")
        s["model.mtp_block.0.self_attn.q_proj.weight"] = ((H * hd, h), "linear")
    # multi-token-prediction layers after the last (GLM-4.5's num_nextn_predict_layers): a
    # decoder layer plus its projections, in the checkpoint but unused at inference
    for L in range(c["num_hidden_layers"], c["num_hidden_layers"] + (c.get("num_nextn_predict_layers") or 0)
                   * (f == "glm4_moe")):
        p = f"model.layers.{L}."
        for nm in ("input_layernorm", "post_attention_layernorm", "enorm", "hnorm", "shared_head.norm"):
            s[p + nm + ".weight"] = ((h,), "norm")
        s[p + "eh_proj.weight"] = ((h, 2 * h), "linear")
        for nm, shp in (("q_proj", (H * hd, h)), ("k_proj", (Hk * hd, h)), ("v_proj", (Hk * hd, h)),
                        ("o_proj", (h, H * hd))):
            s[p + "self_attn." + nm + ".weight"] = (shp, "linear")
            if c.get("attention_bias") and nm != "o_proj":
                s[p + "self_attn." + nm + ".bias"] = ((shp[0],), "bias")
        if c.get("use_qk_norm"):
            s[p + "self_attn.q_norm.weight"] = ((hd,), "norm")
            s[p + "self_attn.k_norm.weight"] = ((hd,), "norm")
        E = c["n_routed_experts"]
        s[p + "mlp.gate.weight"] = ((E, h), "linear")  # not a "router": no margin to keep
        s[p + "mlp.gate.e_score_correction_bias"] = ((E,), "ebias")
        for e in range(E):
            mlp(f"{p}mlp.experts.{e}.", c["moe_intermediate_size"])
        if c.get("n_shared_experts"):
            mlp(p + "mlp.shared_experts.", c["moe_intermediate_size"] * c["n_shared_experts"])
    return s


def jetmoe_shapes(s, c, p):
    """JetMoE (modeling_jetmoe.py): mixture of attention heads (a shared kv_proj, E experts
    of a query and an output projection, ParallelExperts [E][out][in]) and a MoE FFN
    (input_linear [E][2 ff][h]: gate rows then up rows), each with a router and a bias."""
    h, E, ff = c["hidden_size"], c["num_local_experts"], c["intermediate_size"]
    kvp = c["kv_channels"] * c["num_key_value_heads"]
    a = p + "self_attention."
    s[a + "kv_proj.weight"] = ((2 * kvp, h), "linear")
    s[a + "experts.router.layer.weight"] = ((E, h), "router")
    s[a + "experts.input_linear.weight"] = ((E, kvp, h), "linear")
    s[a + "experts.output_linear.weight"] = ((E, h, kvp), "linear")
    s[a + "experts.bias"] = ((h,), "bias")
    s[p + "mlp.router.layer.weight"] = ((E, h), "router")
    s[p + "mlp.input_linear.weight"] = ((E, 2 * ff, h), "linear")
    s[p + "mlp.output_linear.weight"] = ((E, h, ff), "linear")
    s[p + "mlp.bias"] = ((h,), "bias")


def draw(rng, shape, kind):
    if kind == "embed":
        return rng.standard_normal(shape)
    if kind == "norm":
        return 1.0 + 0.1 * rng.standard_normal(shape)
    if kind in ("bias", "ebias"):
        return 0.1 * rng.standard_normal(shape)
    if kind == "sink":  # gpt-oss-like sink logits, of the order of the scores
        return rng.standard_normal(shape)
    if kind == "xw":  # [E][in][out] (used as x @ W): fan-in is the middle dimension
        return rng.standard_normal(shape) / np.sqrt(shape[-2])
    if kind == "fp4":  # random nibbles: every FP4 code, both signs
        return rng.integers(0, 256, shape).astype(np.uint8)
    if kind == "e8m0":  # 2^-6 .. 2^-3: weights of std ~ 1/sqrt(fan-in) for the tiny widths
        return rng.integers(121, 125, shape).astype(np.uint8)
    std = (2.0 if kind in ("lm_head", "router") else 1.0) / np.sqrt(shape[-1])
    return std * rng.standard_normal(shape)


def rounder(dtype):
    return lambda x: x if np.asarray(x).dtype == np.uint8 else quant.qdq(np.asarray(x, dtype=np.float32), dtype)


WEIGHT_DTYPES = ("f32", "f16", "bf16", "q8_0", "q4_0")


def parse_margin_dtypes(s):
    """'q8_0,q4_0,q8_0+q4_0' -> [(dense, experts)]: a variant is a weight dtype, or
    DENSE+EXPERTS (colibri convert --dtype DENSE --expert-dtype EXPERTS)."""
    out = []
    for item in (x.strip() for x in s.split(",")):
        if not item:
            continue
        parts = item.split("+")
        if len(parts) > 2 or any(p not in WEIGHT_DTYPES for p in parts):
            raise argparse.ArgumentTypeError(f"margin dtype {item!r}: expected T or DENSE+EXPERTS, "
                                             f"T one of {', '.join(WEIGHT_DTYPES)}")
        out.append((parts[0], parts[1] if len(parts) == 2 else None))
    return out


def variant_models(cfg, tensors, dtypes):
    """The f32 model plus one hf_ref model per (dense, experts) dtype pair, built exactly as
    hf_ref.py --weights-dtype DENSE [--expert-weights-dtype EXPERTS] --act-quant q8_0 builds
    it (Q8_0 activations only where a q8_0/q4_0 weight is used)."""
    out = [("f32-as-stored", hf_ref.Model(cfg, tensors))]
    for dt, edt in dtypes:
        m = hf_ref.quantized_model(cfg, tensors, dt, edt)
        if any(t in ("q8_0", "q4_0") for t in m.qtypes.values()):
            m.act_quant = "q8_0"
        out.append((dt + ("+" + edt if edt else ""), m))
    return out


def layer_margin(variants, seq, L, key="margin"):
    """key: the router's margin in the trace ("margin", or "margin_attn" for JetMoE's
    attention router)."""
    worst = np.inf
    for _, m in variants:
        trace = {}
        hf_ref.forward(m, seq, trace, upto_layer=L)
        worst = min(worst, float(np.min(trace[L][key])))
    return worst


def router_key(name):
    """(margin key in the trace, key in meta.json) of a router tensor: an attention
    router's (JetMoE self_attention.experts.router) is checked apart from the FFN's."""
    L = name.split(".")[2]
    return ("margin_attn", L + ".attn") if ".self_attention." in name else ("margin", L)


def margin_redraw(cfg, tensors, shapes, rng, rnd, seq, a, redraws, margins):
    # routers (and correction biases) are never quantized, so the variants' other
    # tensors are computed once and only the redrawn ones are swapped in
    variants = variant_models(cfg, tensors, a.margin_dtypes)
    # layer by layer, an attention router (which the FFN router's input depends on) first
    routers = sorted((int(n.split(".")[2]), ".self_attention." not in n, n) for n, (_, k) in shapes.items()
                     if k == "router")
    for L, _, rname in routers:
        mkey, tag = router_key(rname)
        bname = rname.replace("gate.weight", "gate.e_score_correction_bias")
        tries = 0
        while True:
            mg = layer_margin(variants, seq, L, mkey)
            if mg >= a.margin:
                break
            tries += 1
            if tries > a.max_redraws:
                raise SystemExit(f"layer {L}: no router draw with margin >= {a.margin} after {a.max_redraws} re-draws "
                                 f"(best so far {mg:.3g}); use another --seed or fewer tokens")
            new = {rname: rnd(draw(rng, *shapes[rname]))}
            if bname in shapes:
                new[bname] = rnd(draw(rng, *shapes[bname]))
            tensors.update(new)
            for _, m in variants:
                m.t.update(new)
        redraws[tag] = redraws.get(tag, 0) + tries
        margins[tag] = mg


def write_model(out, cfg, tensors, dtype, shards):
    os.makedirs(out, exist_ok=True)
    for fn in os.listdir(out):
        if fn.endswith(".safetensors") or fn == "model.safetensors.index.json":
            os.remove(os.path.join(out, fn))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    names = sorted(tensors)
    if shards <= 1:
        safetensors_np.save(os.path.join(out, "model.safetensors"), tensors, dtype)
        return
    esz = 4 if dtype == "f32" else 2
    total = sum(tensors[n].size * esz for n in names)
    groups, cur, acc = [], [], 0
    for n in names:
        cur.append(n)
        acc += tensors[n].size * esz
        if acc >= total * (len(groups) + 1) / shards and len(groups) < shards - 1:
            groups.append(cur)
            cur = []
    groups.append(cur)
    while len(groups) < shards:  # more shards than natural cut points: split the largest
        big = max(range(len(groups)), key=lambda i: len(groups[i]))
        g = groups.pop(big)
        if len(g) < 2:
            raise SystemExit("too many shards for this few tensors")
        groups[big:big] = [g[:len(g) // 2], g[len(g) // 2:]]
    wm = {}
    for i, g in enumerate(groups):
        fn = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        safetensors_np.save(os.path.join(out, fn), {n: tensors[n] for n in g}, dtype)
        wm.update({n: fn for n in g})
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f, indent=2)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", required=True, choices=sorted(ARCH))
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"])
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=0)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--ff", type=int, default=64, help="FFN width (routed expert width for MoE)")
    ap.add_argument("--dense-ff", type=int, default=0, help="dense-layer FFN width (qwen/deepseek; default 2*ff)")
    ap.add_argument("--shared-ff", type=int, default=0, help="qwen2_moe shared expert width (default 2*ff)")
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--max-pos", type=int, default=4096)
    ap.add_argument("--eps", type=float, default=1e-5)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--rope-scaling", help="JSON for config.rope_scaling")
    ap.add_argument("--yarn", type=float, default=0, help="YaRN factor (DeepSeek style, with mscale)")
    ap.add_argument("--mscale", type=float, default=0.707)
    ap.add_argument("--mscale-all-dim", type=float, default=0.707)
    ap.add_argument("--tie", type=int, default=None, help="tie_word_embeddings 0/1 (default 1 for granitemoe)")
    ap.add_argument("--norm-topk-prob", type=int, default=None)
    ap.add_argument("--sparse-step", type=int, default=1)
    ap.add_argument("--mlp-only-layers", type=lambda s: [int(x) for x in s.split(",") if x], default=[])
    ap.add_argument("--first-dense", type=int, default=1)
    ap.add_argument("--partial-rotary", type=float, default=0.5, help="glm4_moe: partial_rotary_factor")
    ap.add_argument("--attention-bias", type=int, default=1, help="glm4_moe: attention_bias (q/k/v)")
    ap.add_argument("--qk-norm", type=int, default=0, help="glm4_moe: use_qk_norm")
    ap.add_argument("--nextn", type=int, default=0,
                    help="glm4_moe: num_nextn_predict_layers (MTP tensors); ernie4_5_moe: model.mtp_* tensors")
    ap.add_argument("--moe-end", type=int, default=-1, help="ernie4_5_moe: moe_layer_end_index")
    ap.add_argument("--norm-min", type=float, default=1e-12, help="ernie4_5_moe: moe_norm_min")
    ap.add_argument("--router-softmax", type=int, default=0, help="smallthinker: moe_primary_router_apply_softmax")
    ap.add_argument("--nope-layers", help="smallthinker: layers with rope_layout 0, e.g. 1,3")
    ap.add_argument("--swa-layers", help="smallthinker: layers with sliding_window_layout 1 (--sliding-window size)")
    ap.add_argument("--shared-experts", type=int, default=1)
    ap.add_argument("--n-group", type=int, default=1)
    ap.add_argument("--topk-group", type=int, default=0)
    ap.add_argument("--topk-method", choices=["greedy", "group_limited_greedy", "noaux_tc"])
    ap.add_argument("--scoring", choices=["softmax", "sigmoid"])
    ap.add_argument("--routed-scaling", type=float)
    ap.add_argument("--q-lora-rank", type=int, default=0)
    ap.add_argument("--kv-lora-rank", type=int, default=32)
    ap.add_argument("--qk-nope", type=int, default=32)
    ap.add_argument("--qk-rope", type=int, default=16)
    ap.add_argument("--v-head-dim", type=int, default=32)
    ap.add_argument("--embedding-multiplier", type=float, default=2.0)
    ap.add_argument("--residual-multiplier", type=float, default=0.5)
    ap.add_argument("--attention-multiplier", type=float, default=0.0, help="default 1/head_dim")
    ap.add_argument("--logits-scaling", type=float, default=2.0)
    ap.add_argument("--sliding-window", type=int, default=0,
                    help="mistral / mixtral: sliding_window; qwen*_moe: with use_sliding_window")
    ap.add_argument("--max-window-layers", type=int, default=None, help="qwen*_moe: first windowed layer (default 0)")
    ap.add_argument("--layer-types", help="per-layer pattern, repeated: e.g. sliding,full or full,chunked")
    ap.add_argument("--chunk", type=int, default=0, help="attention_chunk_size for chunked layers")
    ap.add_argument("--sinks", action="store_true", help="a learned sink logit per head (self_attn.sinks)")
    ap.add_argument("--mxfp4", action="store_true", help="gpt_oss: experts as MXFP4 *_blocks / *_scales (U8)")
    ap.add_argument("--swiglu-limit", type=float, default=7.0, help="gpt_oss: swiglu_limit")
    ap.add_argument("--gpt-oss-rope", choices=["yarn", "default", "args"], default="yarn",
                    help="gpt_oss: the published YaRN (truncate false), the config class's default (keys "
                         "omitted), or --rope-theta / --rope-scaling / --yarn")
    ap.add_argument("--nope-interval", type=int, default=4, help="llama4: no_rope_layer_interval")
    ap.add_argument("--moe-layers", help="llama4: explicit moe_layers, e.g. 0,2 (else --sparse-step)")
    ap.add_argument("--temp-tuning", type=int, default=1,
                    help="llama4: attn_temperature_tuning (0/1 written as a boolean, other values as the number)")
    ap.add_argument("--floor-scale", type=int, default=8192, help="llama4: floor_scale")
    ap.add_argument("--attn-scale", type=float, default=0.1, help="llama4: attn_scale")
    ap.add_argument("--conditional", action="store_true",
                    help="llama4: write the Llama4ForConditionalGeneration layout (text_config, language_model.*)")
    ap.add_argument("--router-jitter", type=float, default=0.01, help="phimoe: router_jitter_noise")
    ap.add_argument("--lm-head-bias", type=int, default=1, help="phimoe: lm_head_bias")
    ap.add_argument("--longrope-orig", type=int, default=0,
                    help="phimoe: LongRoPE with this original_max_position_embeddings (0: no rope_scaling)")
    ap.add_argument("--short-mscale", type=float, default=1.1)
    ap.add_argument("--long-mscale", type=float, default=1.3)
    ap.add_argument("--arch-name", help="phimoe: architectures[0] (PhimoeForCausalLM or PhiMoEForCausalLM)")
    ap.add_argument("--tokens", help="token list for the margin check (default: BOS + random)")
    ap.add_argument("--n-tokens", type=int, default=40)
    ap.add_argument("--margin", type=float, default=1e-3)
    ap.add_argument("--margin-greedy", type=int, default=0)
    ap.add_argument("--margin-dtypes", type=parse_margin_dtypes, default=[],
                    help="also require the margins for these weight variants: T or DENSE+EXPERTS, "
                         "comma separated (q8_0,q4_0,q8_0+q4_0)")
    ap.add_argument("--max-redraws", type=int, default=400)
    ap.add_argument("--meta-greedy", type=int, default=24, help="greedy ids recorded in meta.json")
    a = ap.parse_args(argv)
    if a.tie is None:
        a.tie = 1 if a.family == "granitemoe" else 0
    if a.family == "granitemoe" and not a.attention_multiplier:
        a.attention_multiplier = 1.0 / (a.hidden // a.heads)

    cfg = build_config(a)
    if a.mxfp4:
        cfg["_mxfp4"] = True
    shapes = tensor_shapes(cfg)
    cfg.pop("_mxfp4", None)
    if a.mxfp4:  # as the published checkpoints say it
        cfg["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
            "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    rng = np.random.default_rng(a.seed)
    rnd = rounder(a.dtype)
    tensors = {n: rnd(draw(rng, *shapes[n])) for n in sorted(shapes)}
    if a.tokens:
        toks = hf_ref.parse_tokens(a.tokens)
    else:
        trng = np.random.default_rng(a.seed + 7919)
        toks = [1] + [int(t) for t in trng.integers(3, a.vocab, a.n_tokens - 1)]
    redraws, margins = {}, {}
    seq = list(toks)
    for _ in range(6):
        margin_redraw(cfg, tensors, shapes, rng, rnd, seq, a, redraws, margins)
        if not a.margin_greedy:
            break
        g = hf_ref.greedy(hf_ref.Model(cfg, tensors), toks, a.margin_greedy)
        full = list(toks) + g
        variants = variant_models(cfg, tensors, a.margin_dtypes)
        final = {t: layer_margin(variants, full, int(t.split(".")[0]), "margin_attn" if t.endswith(".attn") else "margin")
                 for t in margins}
        seq = full
        if all(v >= a.margin for v in final.values()):
            margins.update(final)
            break
    else:
        raise SystemExit("margins on the greedy continuation did not settle; try another --seed")

    if a.conditional:
        wcfg, wt = llama4_conditional(cfg, tensors, rng)
        write_model(a.out, wcfg, wt, a.dtype, a.shards)
    else:
        write_model(a.out, cfg, tensors, a.dtype, a.shards)
    # re-load from disk: what the tests see
    m = hf_ref.load_model(a.out)
    logits = hf_ref.forward(m, toks)
    srt = -np.sort(-logits.astype(np.float64), axis=1)
    gap = float(np.min(srt[:, 0] - srt[:, 1]))
    g = hf_ref.greedy(m, toks, a.meta_greedy)
    with open(os.path.join(a.out, "tokens.txt"), "w") as f:
        f.write(" ".join(map(str, toks)) + "\n")
    meta = {"family": a.family, "seed": a.seed, "dtype": a.dtype, "shards": a.shards, "n_tokens": len(toks),
            "n_params": int(sum(t.size for t in tensors.values())), "router_redraws_per_layer": redraws,
            "min_routing_margin_per_layer": margins, "margin_checked_on": len(seq),
            "margin_dtypes": [d + ("+" + e if e else "") for d, e in a.margin_dtypes],
            "min_top1_top2_logit_gap_prompt": gap, "greedy": g,
            "args": dict(vars(a), margin_dtypes=[d + ("+" + e if e else "") for d, e in a.margin_dtypes])}
    with open(os.path.join(a.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"{a.out}: {a.family} {meta['n_params']} params, redraws {redraws}, margins "
          + ", ".join(f"{k}:{v:.2g}" for k, v in margins.items()) + f", min logit gap {gap:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
