#!/usr/bin/python3
"""hf_to_gguf.py — what llama.cpp's convert_hf_to_gguf.py writes for the families colibri
supports, re-implemented in numpy (no torch, no gguf-py) so tests can produce GGUF files
named and laid out exactly the way llama.cpp names them.

  hf_to_gguf.py HF_DIR OUT.gguf [--effective-config OUT_CONFIG.json] [--name NAME]
                [--mla-split [--mla-split-type f32|q8_0|q4_0]]

Every tensor is written F32 (convert_hf_to_gguf.py --outtype f32). The layout follows
llama.cpp at commit c392e5094deaf2d1a7c18683214f007fad3fe42b (February 2025), the commit
the fixtures in tests/fixtures were made with: in particular DeepSeek's attn_kv_b is stored
unsplit (later converters split it into attn_k_b / attn_v_b) and head_count_kv is the
config's num_key_value_heads. Qwen3-MoE did not exist at that commit; it is written as the
later converter does (Qwen2MoeModel with architecture qwen3moe). The later converter's
expert_group_count / expert_group_used_count (n_group / topk_group) are written too: at
c392e50 group-limited routing was silently dropped.

| HF class | general.architecture | notes |
|---|---|---|
| LlamaForCausalLM, MistralForCausalLM, MixtralForCausalLM | llama | Q/K rows permuted (LlamaModel.permute); experts w1/w3/w2 stacked as ffn_gate/up/down_exps; vocab_size, rope.dimension_count; linear rope scaling as keys, llama3 rope scaling as the rope_freqs.weight tensor |
| Qwen2MoeForCausalLM | qwen2moe | expert_count, expert_feed_forward_length, expert_shared_feed_forward_length; *_shexp, ffn_gate_inp_shexp |
| Qwen3MoeForCausalLM | qwen3moe | as qwen2moe; key_length / value_length from head_dim; per-head attn_q_norm / attn_k_norm |
| OlmoeForCausalLM | olmoe | attention.layer_norm_rms_epsilon 1e-5; full-width attn_q_norm / attn_k_norm |
| DeepseekV2ForCausalLM, DeepseekV3ForCausalLM | deepseek2 | leading_dense_block_count, q/kv_lora_rank, key_length = nope + rope, value_length, expert_shared_count, expert_weights_scale / _norm, expert_gating_func (1 softmax, 2 sigmoid), rope.dimension_count = qk_rope_head_dim, yarn keys incl. yarn_log_multiplier = 0.1 mscale_all_dim; MLA tensors attn_q or attn_q_a / attn_q_a_norm / attn_q_b, attn_kv_a_mqa, attn_kv_a_norm, attn_kv_b; exp_probs_b.bias |
| GptOssForCausalLM | gpt-oss | as llama.cpp's loader names it (convert_gpt_oss); MXFP4 experts stay MXFP4 |
| GraniteMoeForCausalLM | granitemoe | llama keys (head_dim ignored) + attention.scale, embedding_scale, residual_scale, logit_scale; input_linear split into ffn_gate_exps / ffn_up_exps, output_linear = ffn_down_exps; Q/K permuted |
| Glm4MoeForCausalLM | glm4moe | as ik_llama.cpp's Glm4MoeModel: block_count = num_hidden_layers + num_nextn_predict_layers (the MTP layer kept, its own tensors as blk.L.nextn.*), nextn_predict_layers, rope.dimension_count = head_dim x partial_rotary_factor, expert_count / _feed_forward_length / _shared_count, leading_dense_block_count, expert_gating_func 2, expert_weights_scale / _norm; the FFN norm is post_attention_norm; exp_probs_b.bias |
| Llama4ForCausalLM, Llama4ForConditionalGeneration | llama4 | as llama.cpp's Llama4Model (a LlamaModel with undo_permute off: Q/K rows as HF stores them): text_config merged over the top level, language_model. stripped, the vision tower skipped; feed_forward_length = intermediate_size_mlp, expert_feed_forward_length = intermediate_size, interleave_moe_layer_step, attention.sliding_window 0 when every layer_types entry is full_attention; gate_up_proj split into ffn_gate_exps / ffn_up_exps, *_shexp, dense ffn_*; llama3 rope scaling as rope_freqs.weight |
| PhimoeForCausalLM, PhiMoEForCausalLM | phimoe | as llama.cpp's PhiMoeModel (Phi3MiniModel's keys, not the base class's): context_length, rope.scaling.original_context_length, rope.dimension_count = hidden / heads, attention.sliding_window (0 when none), expert_count / expert_used_count; Q/K not permuted; LayerNorm biases, q/k/v/o biases, output_norm.bias, output.bias; LongRoPE as rope_factors_long / rope_factors_short.weight + rope.scaling.attn_factor (the config's short_mscale / long_mscale and router_jitter_noise are not stored) |
| SmallThinkerForCausalLM | smallthinker | as llama.cpp's SmallThinkerModel: expert_count / expert_used_count, expert_feed_forward_length = feed_forward_length = moe_ffn_hidden_size, expert_gating_func (1 softmax, 2 sigmoid), attention.sliding_window when any layer slides; Q/K not permuted; primary_router as ffn_gate_inp, experts gate/up/down stacked; rope_layout / sliding_window_layout not stored (the loader's layout: layers 0, 4, 8... full attention without rope, the others sliding) |
| Ernie4_5_MoeForCausalLM | ernie4_5-moe | as ik_llama.cpp's Ernie4_5MoeModel: expert_count = moe_num_experts, expert_used_count = moe_k, interleave_moe_layer_step, leading_dense_block_count = moe_layer_start_index, expert_shared_count, expert_shared_feed_forward_length = intermediate_size / num_key_value_heads; model.mtp_* skipped; moe_statics bias as exp_probs_b.bias |

What a GGUF cannot carry: llama.cpp hard-codes some semantics per architecture (qwen2moe
and olmoe never renormalise the top-k weights, qwen3moe always does; olmoe has no
clip_qkv; deepseek2 has no moe_layer_freq; llama4 has chunks of 8192 on the rope layers,
NoPE on every 4th, temperature tuning floor 8192 / scale 0.1, the q/k norm unless 128
experts). Such config values are reported on stderr
("note: ...") and --effective-config writes the config.json that describes what llama.cpp
computes from the file (the value replaced by llama.cpp's), so a reference can be run on
the same semantics. The tokenizer section is a minimal SentencePiece-style vocabulary
(tokenizer.ggml.model "llama") of vocab_size tokens: <unk>, <s>, </s>, byte tokens when the
vocabulary has room for all 256, then filler pieces.

--mla-split writes DeepSeek's MLA as today's llama.cpp converter does (DeepseekV2Model
since its MLA rework, 2025): kv_b_proj viewed as [num_key_value_heads][nope + v][rank] and
cut into blk.L.attn_k_b.weight = the nope rows transposed, [H][rank][nope] (ne {nope, rank,
H}), and blk.L.attn_v_b.weight = the v rows, [H][v][rank] (ne {rank, v, H}); no attn_kv_b;
head_count_kv 1; key_length = kv_lora_rank + qk_rope_head_dim, value_length = kv_lora_rank
(the latent "KV head"), key_length_mla = qk_nope_head_dim + qk_rope_head_dim,
value_length_mla = v_head_dim. --mla-split-type stores those two tensors as Q8_0 / Q4_0
blocks (what llama-quantize may make of them; rows must be multiples of 32), or q4_k: Q4_K
where the rows are multiples of 256, else Q5_0 (llama-quantize's fallback for Q4_K).

Deliberate differences from c392e50 (each changes nothing for real checkpoints):
* llama3 rope factors take original_max_position_embeddings from rope_scaling (where HF
  puts it; c392e50 looked at the top level of config.json and defaulted to 8192).
* OLMoE: c392e50 adds attention.layer_norm_rms_epsilon = 1e-5 after the base class already
  wrote the config's rms_norm_eps, a duplicate key its GGUFWriter rejects; here the
  config's value is written (1e-5 when absent), which is the same for OLMoE checkpoints.
* DeepSeek n_shared_experts null: written as expert_shared_count 0 (c392e50 fails).
"""
import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_np as G  # noqa: E402
import quant  # noqa: E402
import safetensors_np  # noqa: E402

ARCH = {
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "llama", "MixtralForCausalLM": "llama",
    "Qwen2MoeForCausalLM": "qwen2moe", "Qwen3MoeForCausalLM": "qwen3moe", "OlmoeForCausalLM": "olmoe",
    "DeepseekV2ForCausalLM": "deepseek2", "DeepseekV3ForCausalLM": "deepseek2",
    "GraniteMoeForCausalLM": "granitemoe", "Glm4MoeForCausalLM": "glm4moe",
    "Ernie4_5_MoeForCausalLM": "ernie4_5-moe", "GptOssForCausalLM": "gpt-oss",
    "Llama4ForCausalLM": "llama4", "Llama4ForConditionalGeneration": "llama4",
    "PhimoeForCausalLM": "phimoe", "PhiMoEForCausalLM": "phimoe",
    "SmallThinkerForCausalLM": "smallthinker",
}

# HF name (after "model.layers.N.") -> GGUF name (after "blk.N."); tensor_mapping.py facts
LAYER_NAMES = {
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "self_attn.q_a_proj": "attn_q_a",
    "self_attn.q_a_layernorm": "attn_q_a_norm",
    "self_attn.q_b_proj": "attn_q_b",
    "self_attn.kv_a_proj_with_mqa": "attn_kv_a_mqa",
    "self_attn.kv_a_layernorm": "attn_kv_a_norm",
    "self_attn.kv_b_proj": "attn_kv_b",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "block_sparse_moe.gate": "ffn_gate_inp",
    "block_sparse_moe.router.layer": "ffn_gate_inp",
    "block_sparse_moe.primary_router": "ffn_gate_inp",  # SmallThinker
    "mlp.gate": "ffn_gate_inp",
    "mlp.gate.e_score_correction": "exp_probs_b",
    "mlp.moe_statics.e_score_correction": "exp_probs_b",  # ERNIE
    "mlp.shared_expert_gate": "ffn_gate_inp_shexp",
    "mlp.shared_expert.gate_proj": "ffn_gate_shexp",
    "mlp.shared_expert.up_proj": "ffn_up_shexp",
    "mlp.shared_expert.down_proj": "ffn_down_shexp",
    "mlp.shared_experts.gate_proj": "ffn_gate_shexp",
    "mlp.shared_experts.up_proj": "ffn_up_shexp",
    "mlp.shared_experts.down_proj": "ffn_down_shexp",
    "block_sparse_moe.output_linear": "ffn_down_exps",
}
# glm4moe (Glm4MoeModel): its FFN norm is post_attention_norm; the multi-token-prediction
# layers after the last are kept, their own tensors under nextn.
GLM_NAMES = {"post_attention_layernorm": "post_attention_norm", "eh_proj": "nextn.eh_proj",
             "enorm": "nextn.enorm", "hnorm": "nextn.hnorm", "shared_head.norm": "nextn.shared_head_norm",
             "shared_head.head": "nextn.shared_head_head", "embed_tokens": "nextn.embed_tokens"}
GLOBAL_NAMES = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
                "lm_head.weight": "output.weight", "model.norm.bias": "output_norm.bias", "lm_head.bias": "output.bias"}


def note(msg):
    print(f"hf_to_gguf: note: {msg}", file=sys.stderr)


def permute(w, n_head, n_head_kv):
    """LlamaModel.permute: within each head, rows (i, i + d/2) become adjacent (2i, 2i+1)."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


class KV:
    def __init__(self, arch):
        self.arch = arch
        self.items = []
        self.keys = set()

    def add(self, key, t, v):
        key = key.replace("{arch}", self.arch)
        if key in self.keys:
            raise SystemExit(f"hf_to_gguf: duplicate key {key}")
        self.keys.add(key)
        self.items.append((key, t, v))

    def u32(self, k, v):
        self.add(k, G.T_U32, int(v))

    def f32(self, k, v):
        self.add(k, G.T_F32, float(v))


def base_params(kv, c, ftype=0):
    """Model.set_gguf_parameters (base class)."""
    kv.u32("{arch}.block_count", c["num_hidden_layers"])
    if c.get("max_position_embeddings") is not None:
        kv.u32("{arch}.context_length", c["max_position_embeddings"])
    kv.u32("{arch}.embedding_length", c["hidden_size"])
    if c.get("intermediate_size") is not None:
        kv.u32("{arch}.feed_forward_length", c["intermediate_size"])
    kv.u32("{arch}.attention.head_count", c["num_attention_heads"])
    if c.get("num_key_value_heads") is not None:
        kv.u32("{arch}.attention.head_count_kv", c["num_key_value_heads"])
    if c.get("rope_theta") is not None:
        kv.f32("{arch}.rope.freq_base", c["rope_theta"])
    if c.get("rms_norm_eps") is not None:
        kv.f32("{arch}.attention.layer_norm_rms_epsilon", c["rms_norm_eps"])
    if c.get("num_local_experts") is not None:
        kv.u32("{arch}.expert_count", c["num_local_experts"])
    if c.get("num_experts_per_tok") is not None:
        kv.u32("{arch}.expert_used_count", c["num_experts_per_tok"])
    if c.get("n_group") is not None:  # later converters
        kv.u32("{arch}.expert_group_count", c["n_group"])
    if c.get("topk_group") is not None:
        kv.u32("{arch}.expert_group_used_count", c["topk_group"])
    if c.get("head_dim") is not None:
        kv.u32("{arch}.attention.key_length", c["head_dim"])
        kv.u32("{arch}.attention.value_length", c["head_dim"])
    kv.u32("general.file_type", ftype)


def rope_type(rs):
    return (rs.get("rope_type") or rs.get("type") or "").lower() if isinstance(rs, dict) else ""


def llama_params(kv, c):
    """LlamaModel.set_gguf_parameters (llama, mixtral, granite)."""
    kv.u32("{arch}.vocab_size", c["vocab_size"])
    rope_dim = c["head_dim"] if "head_dim" in c else c["hidden_size"] // c["num_attention_heads"]
    kv.u32("{arch}.rope.dimension_count", rope_dim)
    rs = c.get("rope_scaling")
    rt = rope_type(rs)
    if rt == "linear" and "factor" in rs:
        kv.add("{arch}.rope.scaling.type", G.T_STR, "linear")
        kv.f32("{arch}.rope.scaling.factor", rs["factor"])
    elif rt not in ("", "default", "linear", "llama3"):
        note(f"rope_scaling type '{rt}' is not written by llama.cpp's converter for this family (dropped)")


def llama3_rope_freqs(c):
    """LlamaModel.generate_extra_tensors: rope_freqs.weight, per rotary pair the divisor of
    the frequency (1, factor, or the smooth blend)."""
    rs = c["rope_scaling"]
    base = c.get("rope_theta", 10000.0)
    dim = c.get("head_dim", c["hidden_size"] // c["num_attention_heads"])
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    factor = rs.get("factor", 8.0)
    lo, hi = rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0)
    old = rs.get("original_max_position_embeddings", c.get("original_max_position_embeddings", 8192))
    lo_wl, hi_wl = old / lo, old / hi
    out = []
    for f in freqs:
        wl = 2 * math.pi / f
        if wl < hi_wl:
            out.append(1.0)
        elif wl > lo_wl:
            out.append(factor)
        else:
            smooth = (old / wl - lo) / (hi - lo)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def mla_split(a, c):
    """DeepseekV2Model.modify_tensors (today's llama.cpp): kv_b_proj -> (k_b, v_b)."""
    n_head_kv = c.get("num_key_value_heads") or c["num_attention_heads"]
    nope, vd = c["qk_nope_head_dim"], c["v_head_dim"]
    if a.shape[0] != n_head_kv * (nope + vd):
        raise SystemExit(f"hf_to_gguf: kv_b_proj has {a.shape[0]} rows, not {n_head_kv} x ({nope} + {vd})")
    kv_b = a.reshape(n_head_kv, nope + vd, a.shape[-1])
    return np.ascontiguousarray(kv_b[:, :nope, :].transpose(0, 2, 1)), np.ascontiguousarray(kv_b[:, nope:, :])


def ggml_blocks(a, dtype):
    """(raw block bytes, ggml type) of a float32 array as Q8_0 / Q4_0 / Q5_0 / Q4_K (rows along
    the last dim). Q5_0 and Q4_K are valid blocks near the input (a plain min / max fit, not
    ggml's search): the reference runs on what the file holds, dequantised by gguf_np."""
    if dtype == "q5_0":
        b = np.ascontiguousarray(a, dtype=np.float32).reshape(-1, 32)
        mx = b[np.arange(b.shape[0]), np.argmax(np.abs(b), axis=1)]
        d = (mx / np.float32(-16.0)).astype(np.float16)
        df = d.astype(np.float32)
        q = np.clip(np.round(b / np.where(df != 0, df, 1)[:, None]) + 16, 0, 31).astype(np.uint32)
        qh = ((q >> 4) << np.arange(32, dtype=np.uint32)).sum(axis=1).astype("<u4")
        qs = ((q[:, :16] & 15) | ((q[:, 16:] & 15) << 4)).astype(np.uint8)
        return np.concatenate([d.astype("<f2").view(np.uint8).reshape(-1, 2), qh.view(np.uint8).reshape(-1, 4), qs],
                              axis=1), G.GGML_Q5_0
    if dtype == "q4_k":
        b = np.ascontiguousarray(a, dtype=np.float32).reshape(-1, 8, 32)
        lo = np.minimum(b.min(axis=2), 0)  # x = sc * q - m, m = -lo >= 0
        sc = (b.max(axis=2) - lo) / 15
        d = (sc.max(axis=1) / 63).astype(np.float16)
        dm = (-lo.min(axis=1) / 63).astype(np.float16)
        df, dmf = d.astype(np.float32)[:, None], dm.astype(np.float32)[:, None]
        isc = np.clip(np.round(sc / np.where(df != 0, df, 1)), 0, 63).astype(np.uint8)
        imn = np.clip(np.round(-lo / np.where(dmf != 0, dmf, 1)), 0, 63).astype(np.uint8)
        step = (df * isc)[:, :, None]
        q = np.clip(np.round((b + (dmf * imn)[:, :, None]) / np.where(step != 0, step, 1)), 0, 15).astype(np.uint8)
        s = np.zeros((b.shape[0], 12), np.uint8)  # ggml's get_scale_min_k4 packing
        s[:, 0:4] = isc[:, 0:4] | ((isc[:, 4:8] >> 4) << 6)
        s[:, 4:8] = imn[:, 0:4] | ((imn[:, 4:8] >> 4) << 6)
        s[:, 8:12] = (isc[:, 4:8] & 15) | ((imn[:, 4:8] & 15) << 4)
        qs = (q[:, 0::2, :] | (q[:, 1::2, :] << 4)).reshape(-1, 128)  # 64 values: low nibbles, then high
        return np.concatenate([d.astype("<f2").view(np.uint8).reshape(-1, 2),
                               dm.astype("<f2").view(np.uint8).reshape(-1, 2), s, qs], axis=1), G.GGML_Q4_K
    if dtype == "q8_0":
        d, q = quant.quantize_q8_0(a)
        return np.concatenate([d.astype("<f2").view(np.uint8).reshape(-1, 2), q.view(np.uint8)], axis=1), G.GGML_Q8_0
    d, q = quant.quantize_q4_0(a)
    qs = (q[:, :16] | (q[:, 16:] << 4)).astype(np.uint8)
    return np.concatenate([d.astype("<f2").view(np.uint8).reshape(-1, 2), qs], axis=1), G.GGML_Q4_0


def convert(hf_dir, name=None, split=False, split_type="f32"):
    """-> (kv items, [(gguf name, float32 ndarray)], effective config, notes)"""
    with open(os.path.join(hf_dir, "config.json")) as f:
        c = json.load(f)
    hf_arch = (c.get("architectures") or [None])[0]
    if hf_arch not in ARCH:
        raise SystemExit(f"hf_to_gguf: unsupported architecture {hf_arch!r}")
    arch = ARCH[hf_arch]
    eff = dict(c)
    W = safetensors_np.load_dir(hf_dir)
    kv = KV(arch)
    kv.add("general.architecture", G.T_STR, arch)
    kv.add("general.type", G.T_STR, "model")
    kv.add("general.name", G.T_STR, name or os.path.basename(os.path.normpath(hf_dir)))
    if arch == "llama4":
        return convert_llama4(c, W, kv, eff)
    H = c["num_attention_heads"]
    Hkv = c.get("num_key_value_heads")
    llama_like = arch in ("llama", "granitemoe")

    # ---- metadata ----
    if arch == "granitemoe":
        if c.get("head_dim") is not None:
            note("granite: head_dim ignored (as GraniteModel)")
        cc = {k: v for k, v in c.items() if k != "head_dim"}
        base_params(kv, cc)
        llama_params(kv, cc)
        for hk, gk in (("attention_multiplier", "attention.scale"), ("embedding_multiplier", "embedding_scale"),
                       ("residual_multiplier", "residual_scale"), ("logits_scaling", "logit_scale")):
            if c.get(hk):
                kv.f32("{arch}." + gk, c[hk])
    elif arch == "llama":
        base_params(kv, c)
        llama_params(kv, c)
    elif arch in ("qwen2moe", "qwen3moe"):
        base_params(kv, c)
        if c.get("num_experts") is not None:
            kv.u32("{arch}.expert_count", c["num_experts"])
        if c.get("moe_intermediate_size") is not None:
            kv.u32("{arch}.expert_feed_forward_length", c["moe_intermediate_size"])
        if c.get("shared_expert_intermediate_size") is not None:
            kv.u32("{arch}.expert_shared_feed_forward_length", c["shared_expert_intermediate_size"])
        rs = c.get("rope_scaling") or {}
        if arch == "qwen3moe" and rope_type(rs) == "yarn" and "factor" in rs:
            kv.add("{arch}.rope.scaling.type", G.T_STR, "yarn")
            kv.f32("{arch}.rope.scaling.factor", rs["factor"])
            kv.u32("{arch}.rope.scaling.original_context_length", rs["original_max_position_embeddings"])
        elif rope_type(rs) not in ("", "default"):
            note(f"rope_scaling '{rope_type(rs)}' is not written for {arch} (dropped)")
        want = arch == "qwen3moe"  # llama.cpp: qwen2moe never renormalises, qwen3moe always
        if bool(c.get("norm_topk_prob", False)) != want:
            note(f"{arch}: norm_topk_prob={c.get('norm_topk_prob')} cannot be stored; llama.cpp uses {want}")
            eff["norm_topk_prob"] = want
    elif arch == "olmoe":
        base_params(kv, c)
        if c.get("rms_norm_eps") is None:
            kv.f32("{arch}.attention.layer_norm_rms_epsilon", 1e-5)
        if c.get("num_experts") is not None:
            kv.u32("{arch}.expert_count", c["num_experts"])
        if c.get("norm_topk_prob"):
            note("olmoe: norm_topk_prob=true cannot be stored; llama.cpp never renormalises")
            eff["norm_topk_prob"] = False
        if c.get("clip_qkv"):
            note("olmoe: clip_qkv is not written by llama.cpp's converter")
            eff["clip_qkv"] = None
    elif arch == "deepseek2":
        base_params(kv, dict(c, num_key_value_heads=1) if split else c)
        kv.u32("{arch}.leading_dense_block_count", c["first_k_dense_replace"])
        kv.u32("{arch}.vocab_size", c["vocab_size"])
        if c.get("q_lora_rank") is not None:
            kv.u32("{arch}.attention.q_lora_rank", c["q_lora_rank"])
        kv.u32("{arch}.attention.kv_lora_rank", c["kv_lora_rank"])
        if split:  # MQA over the latent: one "KV head" of the latent's widths
            kv.u32("{arch}.attention.key_length", c["kv_lora_rank"] + c["qk_rope_head_dim"])
            kv.u32("{arch}.attention.value_length", c["kv_lora_rank"])
            kv.u32("{arch}.attention.key_length_mla", c["qk_nope_head_dim"] + c["qk_rope_head_dim"])
            kv.u32("{arch}.attention.value_length_mla", c["v_head_dim"])
        else:
            kv.u32("{arch}.attention.key_length", c["qk_nope_head_dim"] + c["qk_rope_head_dim"])
            kv.u32("{arch}.attention.value_length", c["v_head_dim"])
        kv.u32("{arch}.expert_feed_forward_length", c["moe_intermediate_size"])
        kv.u32("{arch}.expert_count", c["n_routed_experts"])
        kv.u32("{arch}.expert_shared_count", c.get("n_shared_experts") or 0)
        v3 = hf_arch == "DeepseekV3ForCausalLM"
        kv.f32("{arch}.expert_weights_scale", c.get("routed_scaling_factor", 2.5 if v3 else 1.0))
        kv.add("{arch}.expert_weights_norm", G.T_BOOL, bool(c.get("norm_topk_prob", v3)))
        sf = c.get("scoring_func", "sigmoid" if v3 else "softmax")
        if sf not in ("softmax", "sigmoid"):
            raise SystemExit(f"hf_to_gguf: unsupported scoring_func {sf!r}")
        kv.u32("{arch}.expert_gating_func", 2 if sf == "sigmoid" else 1)
        kv.u32("{arch}.rope.dimension_count", c["qk_rope_head_dim"])
        rs = c.get("rope_scaling")
        if isinstance(rs, dict) and "factor" in rs and rope_type(rs) == "yarn":
            kv.add("{arch}.rope.scaling.type", G.T_STR, "yarn")
            kv.f32("{arch}.rope.scaling.factor", rs["factor"])
            kv.u32("{arch}.rope.scaling.original_context_length", rs["original_max_position_embeddings"])
            kv.f32("{arch}.rope.scaling.yarn_log_multiplier", 0.1 * rs["mscale_all_dim"])
        elif rope_type(rs) not in ("", "default"):
            note(f"rope_scaling '{rope_type(rs)}' is not written for deepseek2 (dropped)")
        if c.get("moe_layer_freq", 1) != 1:
            note("deepseek2: moe_layer_freq != 1 cannot be stored")

    elif arch == "glm4moe":
        nextn = c.get("num_nextn_predict_layers") or 0
        base_params(kv, dict(c, num_hidden_layers=c["num_hidden_layers"] + nextn))
        hd = c.get("head_dim") or c["hidden_size"] // H
        kv.u32("{arch}.rope.dimension_count", int(hd * c.get("partial_rotary_factor", 0.5)))
        kv.u32("{arch}.expert_count", c["n_routed_experts"])
        kv.u32("{arch}.expert_feed_forward_length", c["moe_intermediate_size"])
        if c.get("n_shared_experts") is not None:
            kv.u32("{arch}.expert_shared_count", c["n_shared_experts"])
        if c.get("first_k_dense_replace") is not None:
            kv.u32("{arch}.leading_dense_block_count", c["first_k_dense_replace"])
        kv.u32("{arch}.expert_gating_func", 2)
        if c.get("routed_scaling_factor") is not None:
            kv.f32("{arch}.expert_weights_scale", c["routed_scaling_factor"])
        if c.get("norm_topk_prob") is not None:
            kv.add("{arch}.expert_weights_norm", G.T_BOOL, bool(c["norm_topk_prob"]))
        if c.get("num_nextn_predict_layers") is not None:
            kv.u32("{arch}.nextn_predict_layers", nextn)
        if rope_type(c.get("rope_scaling")) not in ("", "default"):
            note(f"rope_scaling '{rope_type(c.get('rope_scaling'))}' is not written for glm4moe (dropped)")

    elif arch == "ernie4_5-moe":  # Ernie4_5MoeModel
        base_params(kv, c)
        kv.u32("{arch}.expert_count", c["moe_num_experts"])
        kv.u32("{arch}.expert_used_count", c["moe_k"])
        kv.u32("{arch}.interleave_moe_layer_step", c["moe_layer_interval"])
        kv.u32("{arch}.leading_dense_block_count", c["moe_layer_start_index"])
        kv.u32("{arch}.expert_feed_forward_length", c["moe_intermediate_size"])
        n_sh = c.get("moe_num_shared_experts")
        if n_sh is not None:
            kv.u32("{arch}.expert_shared_count", n_sh)
            if n_sh > 0:  # as that converter computes it; readers use count x expert width
                kv.u32("{arch}.expert_shared_feed_forward_length", c["intermediate_size"] // c["num_key_value_heads"])
        if c.get("moe_norm_min", 1e-12) != 1e-12:
            note("ernie4_5-moe: moe_norm_min cannot be stored; llama.cpp divides by the plain sum")
            eff["moe_norm_min"] = 1e-12
        if c.get("moe_layer_end_index", -1) not in (-1, c["num_hidden_layers"] - 1):
            note("ernie4_5-moe: moe_layer_end_index is not written (the layers' tensors say which are MoE)")

    elif arch == "phimoe":
        extra_phi = phimoe_params(kv, c, eff)

    elif arch == "smallthinker":
        smallthinker_params(kv, c, eff)

    if arch == "gpt-oss":
        return convert_gpt_oss(c, W, kv, eff)

    # ---- tensors ----
    out = []
    extra = []
    if arch == "llama" and rope_type(c.get("rope_scaling")) == "llama3":
        extra.append(("rope_freqs.weight", llama3_rope_freqs(c)))
    if arch == "phimoe":
        extra += extra_phi
    experts = {}  # (layer, kind) -> {expert: array}
    for hf in sorted(W, key=_order):
        a = np.asarray(W[hf], dtype=np.float32)
        if hf in GLOBAL_NAMES:
            out.append((GLOBAL_NAMES[hf], a))
            continue
        parts = hf.split(".")
        if arch == "ernie4_5-moe" and hf.startswith("model.mtp_"):  # MTP weights: skipped
            continue
        if parts[:2] != ["model", "layers"] or not parts[2].isdecimal():
            raise SystemExit(f"hf_to_gguf: cannot map tensor {hf!r}")
        L = int(parts[2])
        if L >= c["num_hidden_layers"] and arch != "glm4moe":  # DeepSeek MTP layers
            continue
        rest = ".".join(parts[3:])
        if rest.endswith("e_score_correction_bias"):
            rest = rest.replace("e_score_correction_bias", "e_score_correction.bias")
        stem, _, suffix = rest.rpartition(".")
        if llama_like and stem in ("self_attn.q_proj", "self_attn.k_proj"):
            a = permute(a, H, H if stem == "self_attn.q_proj" else Hkv)
        # per-expert tensors, stacked with the expert index outermost
        ex = _expert_part(stem)
        if ex is not None:
            e, kind = ex
            experts.setdefault((L, kind), {})[e] = a
            continue
        if stem == "block_sparse_moe.input_linear":  # granite [E][2 ff][hidden]
            ff = c["intermediate_size"]
            if a.shape[-2] != 2 * ff:
                raise SystemExit(f"hf_to_gguf: {hf}: merged FFN must be 2 * intermediate_size")
            out.append((f"blk.{L}.ffn_gate_exps.weight", a[..., :ff, :]))
            out.append((f"blk.{L}.ffn_up_exps.weight", a[..., ff:, :]))
            continue
        if arch == "glm4moe" and stem in GLM_NAMES:
            out.append((f"blk.{L}.{GLM_NAMES[stem]}.{suffix}", a))
            continue
        if stem not in LAYER_NAMES:
            raise SystemExit(f"hf_to_gguf: cannot map tensor {hf!r}")
        if split and stem == "self_attn.kv_b_proj":
            for kind, t in zip(("attn_k_b", "attn_v_b"), mla_split(a, c)):
                if split_type == "f32":
                    out.append((f"blk.{L}.{kind}.weight", t))
                else:
                    # q4_k as llama-quantize makes it: rows not a multiple of 256 (k_b's nope rows
                    # in these tiny models) fall back to Q5_0
                    ty = "q5_0" if split_type == "q4_k" and t.shape[-1] % 256 else split_type
                    raw, gtype = ggml_blocks(t, ty)
                    out.append((f"blk.{L}.{kind}.weight", raw, gtype, t.shape))
            continue
        out.append((f"blk.{L}.{LAYER_NAMES[stem]}.{suffix}", a))
    n_exp = (c.get("num_local_experts") or c.get("num_experts") or c.get("n_routed_experts") or c.get("moe_num_experts")
             or c.get("moe_num_primary_experts"))
    for (L, kind), d in sorted(experts.items()):
        if sorted(d) != list(range(n_exp)):
            raise SystemExit(f"hf_to_gguf: layer {L} {kind}: experts {sorted(d)} of {n_exp}")
        out.append((f"blk.{L}.{kind}.weight", np.stack([d[e] for e in range(n_exp)], axis=0)))
    tensors = extra + out
    names = [t[0] for t in tensors]
    if len(set(names)) != len(names):
        raise SystemExit("hf_to_gguf: duplicate tensor names")
    add_vocab(kv, c["vocab_size"], c)
    kv.u32("general.quantization_version", 2)
    return kv.items, tensors, eff


def phimoe_params(kv, c, eff):
    """PhiMoeModel = Phi3MiniModel.set_gguf_parameters (which does not call the base class)
    + expert_used_count / expert_count; Phi3MiniModel.generate_extra_tensors: with a
    longrope (or su) rope_scaling, rope_factors_long / rope_factors_short.weight and
    rope.scaling.attn_factor = sqrt(1 + ln(scale) / ln(original)), scale = max_position /
    original (1 when <= 1). -> the extra tensors (written first).
    Not in the file: rope_scaling short_mscale / long_mscale (the attn_factor runs instead)
    and router_jitter_noise (a reader assumes PhimoeConfig's 0.01)."""
    H = c["num_attention_heads"]
    if "original_max_position_embeddings" not in c:
        raise SystemExit("hf_to_gguf: phimoe needs original_max_position_embeddings (Phi3MiniModel)")
    max_pos, orig = c["max_position_embeddings"], c["original_max_position_embeddings"]
    rope_dims = c["hidden_size"] // H
    kv.u32("{arch}.context_length", max_pos)
    kv.u32("{arch}.rope.scaling.original_context_length", orig)
    kv.u32("{arch}.embedding_length", c["hidden_size"])
    kv.u32("{arch}.feed_forward_length", c["intermediate_size"])
    kv.u32("{arch}.block_count", c["num_hidden_layers"])
    kv.u32("{arch}.attention.head_count", H)
    kv.u32("{arch}.attention.head_count_kv", c["num_key_value_heads"])
    kv.f32("{arch}.attention.layer_norm_rms_epsilon", c["rms_norm_eps"])
    kv.u32("{arch}.rope.dimension_count", rope_dims)
    kv.f32("{arch}.rope.freq_base", c["rope_theta"])
    kv.u32("general.file_type", 0)
    kv.u32("{arch}.attention.sliding_window", c.get("sliding_window") or 0)
    kv.u32("{arch}.expert_used_count", c["num_experts_per_tok"])
    kv.u32("{arch}.expert_count", c["num_local_experts"])
    if c.get("router_jitter_noise", 0.01) != 0.01:
        note(f"phimoe: router_jitter_noise {c['router_jitter_noise']} cannot be stored; readers assume 0.01")
        eff["router_jitter_noise"] = 0.01
    rs = c.get("rope_scaling")
    if rs is None:
        return []
    t = (rs.get("type") or "").lower()
    if t not in ("su", "longrope"):
        raise SystemExit(f"hf_to_gguf: phimoe rope_scaling type {t!r} (the converter writes LongRoPE only)")
    scale = max_pos / orig
    att = math.sqrt(1 + math.log(scale) / math.log(orig)) if scale > 1.0 else 1.0
    kv.f32("{arch}.rope.scaling.attn_factor", att)
    lf, sf = rs.get("long_factor"), rs.get("short_factor")
    if lf is None or sf is None or len(lf) != len(sf) or len(lf) != rope_dims / 2:
        raise SystemExit(f"hf_to_gguf: rope long / short factors must list {rope_dims // 2} numbers")
    att32 = float(np.float32(att))
    if rs.get("short_mscale", att32) != att32 or rs.get("long_mscale", att32) != att32:
        note(f"phimoe: rope_scaling short_mscale {rs.get('short_mscale')} / long_mscale {rs.get('long_mscale')} "
             f"cannot be stored; the file's attn_factor {att32} applies to both sets")
    eff["rope_scaling"] = dict(rs, short_mscale=att32, long_mscale=att32)
    return [("rope_factors_long.weight", np.array(lf, dtype=np.float32)),
            ("rope_factors_short.weight", np.array(sf, dtype=np.float32))]


def smallthinker_params(kv, c, eff):
    """SmallThinkerModel.set_gguf_parameters: the base keys, expert_count /
    expert_used_count (moe_num_primary_experts / moe_num_active_primary_experts),
    expert_feed_forward_length and feed_forward_length = moe_ffn_hidden_size,
    expert_gating_func 1 (softmax) with moe_primary_router_apply_softmax, else 2
    (sigmoid), attention.sliding_window = sliding_window_size when any
    sliding_window_layout entry is set. rope_layout and sliding_window_layout are not
    stored: llama.cpp's loader makes every 4th layer from 0 full attention without rope
    and the others sliding when the window key is there, else rope everywhere, no window
    (--effective-config says so when the config's layout is another)."""
    base_params(kv, c)
    kv.u32("{arch}.expert_count", c["moe_num_primary_experts"])
    kv.u32("{arch}.expert_used_count", c["moe_num_active_primary_experts"])
    kv.u32("{arch}.expert_feed_forward_length", c["moe_ffn_hidden_size"])
    if c.get("intermediate_size") is None:
        kv.u32("{arch}.feed_forward_length", c["moe_ffn_hidden_size"])
    kv.u32("{arch}.expert_gating_func", 1 if c.get("moe_primary_router_apply_softmax") else 2)
    if rope_type(c.get("rope_scaling")) not in ("", "default"):
        note(f"rope_scaling '{rope_type(c.get('rope_scaling'))}' is not written for smallthinker (dropped)")
    L = c["num_hidden_layers"]
    swa = any(c.get("sliding_window_layout") or [])
    if swa:
        kv.u32("{arch}.attention.sliding_window", c.get("sliding_window_size") or 4096)
    rope = [0 if swa and i % 4 == 0 else 1 for i in range(L)]
    layout = [1 if swa and i % 4 else 0 for i in range(L)]
    if list(c.get("rope_layout") or [1] * L) != rope or list(c.get("sliding_window_layout") or [0] * L) != layout:
        note(f"smallthinker: rope_layout {c.get('rope_layout')} / sliding_window_layout "
             f"{c.get('sliding_window_layout')} cannot be stored; a reader uses {rope} / {layout}")
        eff["rope_layout"], eff["sliding_window_layout"] = rope, layout


GGML_MXFP4 = 39


def mxfp4_ggml(blocks, scales):
    """HF MXFP4 [E][rows][G][16] (element 2j low nibble of byte j, 2j+1 high) + E8M0 scales
    [E][rows][G] -> ggml block_mxfp4 bytes [E][rows][G * 17] (e, then qs[j] = element j | element
    j + 16 << 4), what llama.cpp's converter writes for gpt-oss."""
    b = np.asarray(blocks).astype(np.uint8)
    nib = np.empty(b.shape[:-1] + (32,), dtype=np.uint8)
    nib[..., 0::2] = b & 0x0F
    nib[..., 1::2] = b >> 4
    qs = nib[..., :16] | (nib[..., 16:] << 4)
    out = np.concatenate([np.asarray(scales).astype(np.uint8)[..., None], qs], axis=-1)
    return out.reshape(b.shape[0], b.shape[1], -1)


def convert_gpt_oss(c, W, kv, eff):
    """gpt-oss as llama.cpp names it (ik_llama.cpp create_openai_moe_tensors): post_attention_norm
    for the FFN norm, attn_sinks, ffn_gate_inp weight + bias, gate and up de-interleaved into
    ffn_gate_exps / ffn_up_exps ([E][ff][hidden]) with their biases, ffn_down_exps; MXFP4 experts
    stay MXFP4 (repacked), everything else F32. Keys: the base ones, expert_feed_forward_length,
    attention.sliding_window, rope.dimension_count, YaRN rope.scaling.*. A GGUF carries no
    layer_types (llama.cpp: sliding on even layers) and no truncate."""
    base_params(kv, c)
    hd = c.get("head_dim") or 64
    kv.u32("{arch}.expert_feed_forward_length", c["intermediate_size"])
    kv.u32("{arch}.attention.sliding_window", c.get("sliding_window") or 128)
    kv.u32("{arch}.rope.dimension_count", hd)
    if "head_dim" not in c:
        kv.u32("{arch}.attention.key_length", hd)
        kv.u32("{arch}.attention.value_length", hd)
    rs = c.get("rope_scaling") or {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096}
    if rope_type(rs) == "yarn":
        kv.add("{arch}.rope.scaling.type", G.T_STR, "yarn")
        kv.f32("{arch}.rope.scaling.factor", rs["factor"])
        kv.u32("{arch}.rope.scaling.original_context_length", rs["original_max_position_embeddings"])
    if c.get("rope_theta") is None:
        kv.f32("{arch}.rope.freq_base", 150000.0)
    for k, d in (("swiglu_limit", 7.0), ("swiglu_alpha", 1.702)):  # llama.cpp: constants of SWIGLU_OAI
        if c.get(k, d) != d:
            note(f"gpt-oss: {k}={c[k]} cannot be stored; llama.cpp uses {d}")
            eff[k] = d
    lt = c.get("layer_types")
    if lt and any((t == "sliding_attention") != (i % 2 == 0) for i, t in enumerate(lt)):
        note("gpt-oss: layer_types other than sliding on even layers cannot be stored")
        eff["layer_types"] = None
    out = []
    for hf in sorted(W, key=_order):
        if hf in GLOBAL_NAMES:
            out.append((GLOBAL_NAMES[hf], np.asarray(W[hf], dtype=np.float32)))
            continue
        p = hf.split(".")
        L, rest = int(p[2]), ".".join(p[3:])
        b = f"blk.{L}."
        a = W[hf]
        names = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "post_attention_norm.weight",
                 "self_attn.sinks": "attn_sinks.weight", "mlp.router.weight": "ffn_gate_inp.weight",
                 "mlp.router.bias": "ffn_gate_inp.bias", "mlp.experts.down_proj_bias": "ffn_down_exps.bias"}
        for n, g in (("q", "attn_q"), ("k", "attn_k"), ("v", "attn_v"), ("o", "attn_output")):
            names[f"self_attn.{n}_proj.weight"] = g + ".weight"
            names[f"self_attn.{n}_proj.bias"] = g + ".bias"
        if rest in names:
            out.append((b + names[rest], np.asarray(a, dtype=np.float32)))
        elif rest == "mlp.experts.gate_up_proj":  # [E][hidden][2 ff] (x @ W)
            a = np.asarray(a, dtype=np.float32).transpose(0, 2, 1)
            out += [(b + "ffn_gate_exps.weight", a[:, 0::2]), (b + "ffn_up_exps.weight", a[:, 1::2])]
        elif rest == "mlp.experts.gate_up_proj_bias":
            a = np.asarray(a, dtype=np.float32)
            out += [(b + "ffn_gate_exps.bias", a[:, 0::2]), (b + "ffn_up_exps.bias", a[:, 1::2])]
        elif rest == "mlp.experts.down_proj":  # [E][ff][hidden]
            out.append((b + "ffn_down_exps.weight", np.asarray(a, dtype=np.float32).transpose(0, 2, 1)))
        elif rest.endswith("_blocks"):
            q = mxfp4_ggml(a, W[hf.replace("_blocks", "_scales")])
            E, R = q.shape[0], q.shape[1]
            cols = a.shape[2] * 32
            if rest == "mlp.experts.gate_up_proj_blocks":
                out += [(b + "ffn_gate_exps.weight", q[:, 0::2], GGML_MXFP4, (E, R // 2, cols)),
                        (b + "ffn_up_exps.weight", q[:, 1::2], GGML_MXFP4, (E, R // 2, cols))]
            else:
                out.append((b + "ffn_down_exps.weight", q, GGML_MXFP4, (E, R, cols)))
        elif rest.endswith("_scales"):
            continue
        else:
            raise SystemExit(f"hf_to_gguf: cannot map tensor {hf!r}")
    add_vocab(kv, c["vocab_size"], c)
    kv.u32("general.quantization_version", 2)
    return kv.items, out, eff


def llama4_layout_fixed(tc):
    """What llama.cpp's llama4 loader fixes in code, against what the text config tc means
    (Llama4TextConfig's defaults and __post_init__): {key: llama.cpp's value} for each value
    that differs and matters. llama.cpp: chunks of 8192 on the rope layers, NoPE on every 4th
    with temperature tuning (floor 8192, scale 0.1), q/k L2 norm unless 128 experts, MoE on
    every interleave_moe_layer_step-th layer; with attention.sliding_window 0 (the converter
    writes it when every layer_types entry is full_attention) no chunk and rope everywhere."""
    n, step = tc["num_hidden_layers"], tc["interleave_moe_layer_step"]
    full = bool(tc.get("layer_types")) and all(t == "full_attention" for t in tc["layer_types"])
    interval = tc.get("no_rope_layer_interval", 4)
    rope = tc.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(n)]
    hf = {"no_rope_layers": rope,
          "layer_types": tc.get("layer_types") or ["chunked_attention" if r else "full_attention" for r in rope],
          "moe_layers": tc["moe_layers"] if tc.get("moe_layers") is not None else list(range(step - 1, n, step)),
          "use_qk_norm": tc.get("use_qk_norm", True)}
    cpp_rope = [1] * n if full else [int((i + 1) % 4 != 0) for i in range(n)]
    cpp = {"no_rope_layers": cpp_rope,
           "layer_types": ["full_attention" if full or not r else "chunked_attention" for r in cpp_rope],
           "moe_layers": list(range(step - 1, n, step)),
           "use_qk_norm": tc.get("num_local_experts") != 128}
    if "chunked_attention" in hf["layer_types"]:
        hf["attention_chunk_size"], cpp["attention_chunk_size"] = tc.get("attention_chunk_size", 8192), 8192
    if 0 in hf["no_rope_layers"] and tc.get("attn_temperature_tuning", True):
        hf.update(floor_scale=tc.get("floor_scale", 8192), attn_scale=tc.get("attn_scale", 0.1))
        cpp.update(floor_scale=8192, attn_scale=0.1)
    if 0 in hf["no_rope_layers"] and not tc.get("attn_temperature_tuning", True):
        hf["attn_temperature_tuning"], cpp["attn_temperature_tuning"] = tc["attn_temperature_tuning"], True
    out = {}
    for k, v in cpp.items():
        if hf.get(k, v) != v:
            note(f"llama4: {k}={hf[k]} cannot be stored; llama.cpp uses {v}")
            out[k] = v
    return out


def convert_llama4(c, W, kv, eff):
    """Llama-4 as llama.cpp's converter writes it (Llama4Model): the text config merged over
    the top level (TextModel), LlamaModel's keys with feed_forward_length =
    intermediate_size_mlp, plus interleave_moe_layer_step, expert_feed_forward_length and
    attention.sliding_window 0 when every layer is full_attention; Q/K not permuted
    (undo_permute = False: HF's rotation already pairs adjacent dims); the stacked experts
    transposed to [E][out][in], gate_up_proj split in halves (gate first); the vision tower
    and projector skipped; llama3 rope factors as rope_freqs.weight."""
    tc = dict(c, **c["text_config"]) if isinstance(c.get("text_config"), dict) else dict(c)
    p = dict(tc, intermediate_size=tc["intermediate_size_mlp"])
    base_params(kv, p)
    llama_params(kv, p)
    kv.u32("{arch}.interleave_moe_layer_step", tc["interleave_moe_layer_step"])
    kv.u32("{arch}.expert_feed_forward_length", tc["intermediate_size"])
    lt = tc.get("layer_types")
    if lt and all(t == "full_attention" for t in lt):
        kv.u32("{arch}.attention.sliding_window", 0)
    fixed = llama4_layout_fixed(tc)
    if tc.get("attention_bias"):
        note("llama4: llama.cpp's llama4 loader reads no attention biases (the file has them; colibri reads them)")
    if isinstance(c.get("text_config"), dict):
        eff["text_config"] = dict(c["text_config"], **fixed)
    else:
        eff.update(fixed)
    out = []
    if rope_type(tc.get("rope_scaling")) == "llama3":
        out.append(("rope_freqs.weight", llama3_rope_freqs(tc)))
    ffn = {"router": "ffn_gate_inp", "shared_expert.gate_proj": "ffn_gate_shexp",
           "shared_expert.up_proj": "ffn_up_shexp", "shared_expert.down_proj": "ffn_down_shexp",
           "gate_proj": "ffn_gate", "up_proj": "ffn_up", "down_proj": "ffn_down"}
    for hf in sorted(W, key=lambda n: _order(n.removeprefix("language_model."))):
        if hf.startswith(("vision_model.", "multi_modal_projector.")):
            continue
        name = hf.removeprefix("language_model.")
        a = np.asarray(W[hf], dtype=np.float32)
        if name in GLOBAL_NAMES:
            out.append((GLOBAL_NAMES[name], a))
            continue
        parts = name.split(".")
        if parts[:2] != ["model", "layers"] or not parts[2].isdecimal():
            raise SystemExit(f"hf_to_gguf: cannot map tensor {hf!r}")
        b = f"blk.{parts[2]}."
        rest = ".".join(parts[3:])
        stem, _, suffix = rest.rpartition(".")
        if rest == "feed_forward.experts.gate_up_proj":  # [E][hidden][2 ff] (x @ W) -> [E][2 ff][hidden]
            a = a.transpose(0, 2, 1)
            ff = a.shape[1] // 2
            out += [(b + "ffn_gate_exps.weight", a[:, :ff]), (b + "ffn_up_exps.weight", a[:, ff:])]
        elif rest == "feed_forward.experts.down_proj":  # [E][ff][hidden] -> [E][hidden][ff]
            out.append((b + "ffn_down_exps.weight", a.transpose(0, 2, 1)))
        elif stem.startswith("feed_forward.") and stem[13:] in ffn:
            out.append((b + ffn[stem[13:]] + "." + suffix, a))
        elif stem in LAYER_NAMES and stem.startswith(("self_attn.", "input_", "post_attention_")):
            out.append((b + LAYER_NAMES[stem] + "." + suffix, a))
        else:
            raise SystemExit(f"hf_to_gguf: cannot map tensor {hf!r}")
    add_vocab(kv, tc["vocab_size"], tc)
    kv.u32("general.quantization_version", 2)
    return kv.items, out, eff


def _order(n):
    """global tensors first, then by layer (numeric), then by name"""
    p = n.split(".")
    if p[:2] == ["model", "layers"] and p[2].isdecimal():
        return (1, int(p[2]), n)
    return (0, 0, n)


_EXPERT_KIND = {"w1": "ffn_gate_exps", "w3": "ffn_up_exps", "w2": "ffn_down_exps",
                "gate_proj": "ffn_gate_exps", "up_proj": "ffn_up_exps", "down_proj": "ffn_down_exps",
                "gate": "ffn_gate_exps", "up": "ffn_up_exps", "down": "ffn_down_exps"}  # SmallThinker


def _expert_part(stem):
    """'block_sparse_moe.experts.3.w1' / 'mlp.experts.3.gate_proj' -> (3, 'ffn_gate_exps')"""
    p = stem.split(".")
    if len(p) == 4 and p[0] in ("block_sparse_moe", "mlp") and p[1] == "experts" and p[2].isdecimal() \
            and p[3] in _EXPERT_KIND:
        return int(p[2]), _EXPERT_KIND[p[3]]
    return None


def add_vocab(kv, n, c):
    """Minimal SentencePiece-style vocabulary of n tokens."""
    toks, scores, types = ["<unk>", "<s>", "</s>"], [0.0, 0.0, 0.0], [2, 3, 3]
    if n >= 3 + 256:
        toks += [f"<0x{b:02X}>" for b in range(256)]
        scores += [0.0] * 256
        types += [6] * 256
    i = 0
    while len(toks) < n:
        i += 1
        toks.append(f"\u2581t{i}")
        scores.append(-float(i))
        types.append(1)
    toks, scores, types = toks[:n], scores[:n], types[:n]
    kv.add("tokenizer.ggml.model", G.T_STR, "llama")
    kv.add("tokenizer.ggml.pre", G.T_STR, "default")
    kv.add("tokenizer.ggml.tokens", (G.T_ARR, G.T_STR), toks)
    kv.add("tokenizer.ggml.scores", (G.T_ARR, G.T_F32), scores)
    kv.add("tokenizer.ggml.token_type", (G.T_ARR, G.T_I32), types)
    for key, hk, d in (("bos_token_id", "bos_token_id", 1), ("eos_token_id", "eos_token_id", 2)):
        v = c.get(hk, d)
        if isinstance(v, list):
            v = v[0]
        if v is not None and 0 <= v < n:
            kv.u32("tokenizer.ggml." + key, v)
    kv.u32("tokenizer.ggml.unknown_token_id", 0)
    kv.add("tokenizer.ggml.add_bos_token", G.T_BOOL, True)
    kv.add("tokenizer.ggml.add_eos_token", G.T_BOOL, False)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("hf_dir")
    ap.add_argument("out")
    ap.add_argument("--name", help="general.name (default: the directory name)")
    ap.add_argument("--effective-config", help="write the config.json llama.cpp's semantics of the file describe")
    ap.add_argument("--mla-split", action="store_true",
                    help="DeepSeek: attn_k_b / attn_v_b and the *_length_mla keys (today's llama.cpp layout)")
    ap.add_argument("--mla-split-type", choices=("f32", "q8_0", "q4_0", "q4_k"), default="f32",
                    help="the type of attn_k_b / attn_v_b with --mla-split")
    a = ap.parse_args()
    with open(os.path.join(a.hf_dir, "config.json")) as f:
        if a.mla_split and ARCH.get((json.load(f).get("architectures") or [None])[0]) != "deepseek2":
            raise SystemExit("hf_to_gguf: --mla-split is for DeepSeek-V2/V3 models")
    kv, tensors, eff = convert(a.hf_dir, a.name, a.mla_split, a.mla_split_type)
    G.write(a.out, kv, tensors)
    n_bytes = sum(t[1].nbytes for t in tensors)
    print(f"hf_to_gguf: {a.out}: {len(kv)} keys, {len(tensors)} tensors, {n_bytes} bytes of tensor data")
    if a.effective_config:
        with open(a.effective_config, "w") as f:
            json.dump(eff, f, indent=2)


if __name__ == "__main__":
    main()
