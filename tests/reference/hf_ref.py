#!/usr/bin/python3
"""Independent numpy float32 implementation of the Hugging Face `transformers` forward
pass (eager attention, causal, batch 1) for the model families colibri supports:

  llama (also mistral / qwen2 / qwen3 dense), mixtral, qwen2_moe, qwen3_moe, olmoe,
  deepseek_v2, deepseek_v3, granitemoe, glm4_moe, ernie4_5_moe, smallthinker (remote code modeling_smallthinker.py), gpt_oss,
  llama4_text (Llama4ForCausalLM, and the text part of Llama4ForConditionalGeneration),
  phimoe (Phi-3.5-MoE: LayerNorm, sparsemixer, LongRoPE).

It reads an HF directory (config.json + model.safetensors, or shards with
model.safetensors.index.json; F32/F16/BF16) and computes raw logits for every position.
Semantics follow transformers' modeling_<family>.py / modeling_rope_utils.py; the few
places where HF versions disagree are noted at the function concerned and in
tests/reference/README.md.

Usage:
  hf_ref.py HF_DIR --tokens 1,2,3 --out logits.bin [--greedy N]
            [--weights-dtype f32|f16|bf16|q8_0|q4_0] [--expert-weights-dtype T]
            [--act-quant q8_0] [--full-out FILE]
--out writes float32 little-endian [n_tokens][n_vocab]. --greedy N prints N greedy
continuation ids on stdout (each step recomputed from scratch over the whole sequence,
argmax with ties to the lowest id). --full-out writes the teacher-forced logits of
tokens + greedy ids ([n_tokens + N][n_vocab]).
"""
import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quant  # noqa: E402
import safetensors_np  # noqa: E402

F32 = np.float32


# ----------------------------------------------------------------------------- model

class Model:
    """config (dict) + tensors (name -> float32 ndarray) + per-tensor storage type."""

    def __init__(self, config, tensors, qtypes=None, act_quant=None):
        self.cfg = config
        self.t = tensors
        self.family = config.get("model_type")
        if self.family not in FAMILIES:
            raise ValueError(f"unsupported model_type {self.family!r}; known: {sorted(FAMILIES)}")
        self.qtypes = qtypes or {}
        self.act_quant = act_quant
        if self.family == "gpt_oss":
            gpt_oss_defaults(self)
        if self.family == "llama4_text":
            llama4_defaults(self)

    def w(self, name):
        try:
            return self.t[name]
        except KeyError:
            raise KeyError(f"tensor {name} missing from the checkpoint") from None

    def has(self, name):
        return name in self.t

    def get(self, key, default=None):
        v = self.cfg.get(key, default)
        return default if v is None else v


def storage_types(tensors, weights_dtype=None, expert_dtype=None):
    """{name: dtype} for every tensor colibri stores as something other than f32 (the
    rule of quant.quantizable; routed experts take expert_dtype when given; q8_0/q4_0
    tensors whose rows are not a multiple of 32 stay f32)."""
    qtypes = {}
    for name, a in tensors.items():
        t = expert_dtype if (expert_dtype and quant.is_routed_expert(name)) else weights_dtype
        if t in (None, "f32") or not quant.quantizable(name, a.shape):
            continue
        if t in ("q8_0", "q4_0") and a.shape[-1] % quant.QK:
            continue
        qtypes[name] = t
    return qtypes


def quantized_model(cfg, tensors, weights_dtype=None, expert_dtype=None, act_quant=None, log=None):
    """Model on float32 tensors round-tripped through weights_dtype (routed experts through
    expert_dtype if given), as colibri convert --dtype / --expert-dtype stores them.
    act_quant="q8_0": Q8_0 activations in every product with a q8_0/q4_0 weight."""
    qtypes = storage_types(tensors, weights_dtype, expert_dtype)
    if qtypes:
        tensors = quant.apply_weights_dtype(tensors, weights_dtype, expert_dtype, log=log)
    return Model(cfg, tensors, qtypes, act_quant)


def load_model(hf_dir, weights_dtype=None, expert_dtype=None, act_quant=None, log=None):
    with open(os.path.join(hf_dir, "config.json")) as f:
        cfg = json.load(f)
    tensors = safetensors_np.load_dir(hf_dir)
    tensors = {k: v.astype(F32) for k, v in tensors.items()}
    if cfg.get("model_type") == "llama4":  # Llama4ForConditionalGeneration: its text model
        cfg, tensors = llama4_text_part(cfg, tensors)
    return quantized_model(cfg, tensors, weights_dtype, expert_dtype, act_quant, log)


# ----------------------------------------------------------------------------- basics
#
# Rounding policy. Every tensor the HF code holds in float32 is float32 here too, but each
# operation producing one is evaluated in float64 and rounded once: products and sums
# (linear layers, attention scores and value sums) accumulate in float64, exp / sqrt /
# cos / sin are float64 functions rounded to float32 (numpy's own float32 exp is off by
# an ulp on ~40 % of inputs), RoPE frequencies and angles are float64. For float weights
# this is the HF computation up to ~1e-7 relative. For quantized weights it is what makes
# the reference usable at all: a Q8_0 activation rounding is a step function (its fp16
# scale amax/127 and roundf(x/d) jump at boundaries), so a 1-ulp difference in its input
# can change a whole 32-value block and, through later layers and the KV cache, every
# following logit by ~1 %. Computing each input as exactly as possible leaves only the
# engine's own few-ulp errors to fall on a boundary (tests/reference/README.md).

F64 = np.float64


def exp32(x):
    """float32 exp, correctly rounded (float64 exp, one rounding)."""
    return np.exp(np.asarray(x, dtype=F32).astype(F64)).astype(F32)


def rmsnorm(x, w, eps):
    """w * (x * s), s = 1/sqrt(mean(x^2) + eps) evaluated in float64 and rounded once."""
    x = x.astype(F32)
    x64 = x.astype(F64)
    var = np.mean(x64 * x64, axis=-1, keepdims=True)
    s = (1.0 / np.sqrt(var + float(eps))).astype(F32)
    return (w * (x * s)).astype(F32)


def layernorm(x, w, b, eps):
    """torch.nn.LayerNorm (biased variance): (x - mean) * rstd * w + b, mean and rstd
    evaluated in float64 and rounded once."""
    x = x.astype(F32)
    x64 = x.astype(F64)
    mean = np.mean(x64, axis=-1, keepdims=True)
    var = np.mean((x64 - mean) ** 2, axis=-1, keepdims=True)
    rstd = (1.0 / np.sqrt(var + float(eps))).astype(F32)
    return ((x - mean.astype(F32)) * rstd * w + b).astype(F32)


def block_norm(m, x, prefix, eps):
    """A decoder layer's or the final norm: nn.LayerNorm with its bias for Phi-3.5-MoE,
    RMSNorm for every other family."""
    if m.family == "phimoe":
        return layernorm(x, m.w(prefix + ".weight"), m.w(prefix + ".bias"), eps)
    return rmsnorm(x, m.w(prefix + ".weight"), eps)


def silu(x):
    with np.errstate(over="ignore"):
        return (x / (F32(1.0) + exp32(-x))).astype(F32)


def sigmoid(x):
    with np.errstate(over="ignore"):
        return (F32(1.0) / (F32(1.0) + exp32(-x))).astype(F32)


def softmax(x, axis=-1):
    x = x.astype(F32)
    m = np.max(x, axis=axis, keepdims=True)
    e = exp32(x - m)
    return (e.astype(F64) / np.sum(e, axis=axis, keepdims=True, dtype=F64)).astype(F32)


def matmul(a, b):
    """float32 a @ b accumulated in float64, rounded once."""
    return (np.asarray(a, dtype=F32).astype(F64) @ np.asarray(b, dtype=F32).astype(F64)).astype(F32)


def act_fn(cfg):
    a = cfg.get("hidden_act", "silu")
    if a not in ("silu", "swish"):
        raise ValueError(f"hidden_act {a!r} not supported (silu only)")
    return silu


def linear(m, x, name, wmat=None, bias_name=None):
    """x [n][in] @ W[out][in]^T (+ bias). With --act-quant q8_0, the activation side of a
    q8_0/q4_0 weight is rounded through Q8_0 blocks first (what ggml-style integer dot
    products compute)."""
    W = m.w(name) if wmat is None else wmat
    if m.act_quant == "q8_0" and m.qtypes.get(name) in ("q8_0", "q4_0"):
        x = quant.qdq(x, "q8_0")
    y = matmul(x, W.T)
    if bias_name is not None and m.has(bias_name):
        y = y + m.w(bias_name)
    return y


# ----------------------------------------------------------------------------- RoPE

def _default_inv_freq(base, dim):
    # torch: 1.0 / (base ** (arange(0, dim, 2).float() / dim)); kept in float64 here (the
    # float32 rounding of a frequency moves the angle at position p by ~p * 3e-8 rad)
    return 1.0 / (F64(base) ** (np.arange(0, dim, 2, dtype=np.int64).astype(F64) / dim))


def _get_mscale(scale, mscale=1.0):
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def rope_params(cfg, dim, seq_len):
    """(inv_freq float64 [dim/2], attention_factor) for rope_scaling types
    default / linear / dynamic / yarn / llama3, as modeling_rope_utils.py defines them."""
    base = cfg.get("rope_theta", 10000.0) or 10000.0
    rs = cfg.get("rope_scaling") or {}
    rtype = rs.get("rope_type", rs.get("type", "default")) if rs else "default"
    if rtype == "default":
        return _default_inv_freq(base, dim), 1.0
    if rtype == "linear":
        return _default_inv_freq(base, dim) / float(rs["factor"]), 1.0
    if rtype == "dynamic":
        # dynamic_rope_update: frequencies are recomputed when the sequence grows past
        # max_position_embeddings (seq_len = max position + 1); below it they are default.
        maxp = cfg["max_position_embeddings"]
        factor = rs["factor"]
        sl = seq_len if seq_len > maxp else maxp
        b = base * ((factor * sl / maxp) - (factor - 1)) ** (dim / (dim - 2))
        return _default_inv_freq(b, dim), 1.0
    if rtype == "llama3":
        inv = _default_inv_freq(base, dim)
        factor = rs["factor"]
        lo, hi = rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        lo_wl, hi_wl = old / lo, old / hi
        wl = 2 * math.pi / inv
        inv_l = np.where(wl > lo_wl, inv / factor, inv)
        smooth = (old / wl - lo) / (hi - lo)
        smoothed = (1 - smooth) * inv_l / factor + smooth * inv_l
        medium = ~(wl < hi_wl) & ~(wl > lo_wl)
        return np.where(medium, smoothed, inv_l), 1.0
    if rtype == "yarn":
        # factor is rope_scaling.factor (DeepSeek's own code and transformers >= 5; the
        # 4.5x releases recomputed it as max_position_embeddings / original_max_position_
        # embeddings, which is the same number for every real config and every config
        # gen_model.py writes).
        factor = rs["factor"]
        orig = rs.get("original_max_position_embeddings") or cfg["max_position_embeddings"]
        att = rs.get("attention_factor")
        mscale, mscale_all = rs.get("mscale"), rs.get("mscale_all_dim")
        if att is None:
            if mscale and mscale_all:
                att = _get_mscale(factor, mscale) / _get_mscale(factor, mscale_all)
            else:
                att = _get_mscale(factor)
        beta_fast = rs.get("beta_fast") or 32
        beta_slow = rs.get("beta_slow") or 1
        truncate = rs.get("truncate", True)

        def corr_dim(nrot):
            return (dim * math.log(orig / (nrot * 2 * math.pi))) / (2 * math.log(base))

        low, high = corr_dim(beta_fast), corr_dim(beta_slow)
        if truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        ramp = np.clip((np.arange(dim // 2, dtype=F64) - low) / (high - low), 0, 1)
        pos_freqs = F64(base) ** (np.arange(0, dim, 2).astype(F64) / dim)
        extra = 1.0 / pos_freqs
        inter = 1.0 / (factor * pos_freqs)
        ext_factor = 1.0 - ramp
        inv = inter * (1.0 - ext_factor) + extra * ext_factor
        return inv, float(att)
    if rtype == "longrope":
        return longrope_params(cfg, rs, base, dim, seq_len)
    raise ValueError(f"rope_scaling type {rtype!r} not supported")


def longrope_params(cfg, rs, base, dim, seq_len):
    """_compute_longrope_parameters: inv_freq = 1 / (ext * base^(2i/dim)), ext = long_factor
    when seq_len > original_max_position_embeddings, else short_factor; attention factor
    rope_scaling.attention_factor, else sqrt(1 + ln(factor) / ln(original)) with factor =
    rope_scaling.factor or max_position_embeddings / original (1 when factor <= 1).
    PhimoeRotaryEmbedding replaces it by long_mscale / short_mscale by the same rule."""
    orig = rs.get("original_max_position_embeddings") or cfg.get("original_max_position_embeddings") \
        or cfg["max_position_embeddings"]
    factor = rs.get("factor") or cfg["max_position_embeddings"] / orig
    att = rs.get("attention_factor")
    if att is None:
        att = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(orig))
    lng = bool(seq_len and seq_len > orig)
    ext = np.asarray(rs["long_factor"] if lng else rs["short_factor"], dtype=F32).astype(F64)
    if ext.shape != (dim // 2,):
        raise ValueError(f"longrope factors must have {dim // 2} entries")
    ms = rs.get("long_mscale" if lng else "short_mscale")
    if cfg.get("model_type") == "phimoe" and ms is not None:
        att = ms
    return _default_inv_freq(base, dim) / ext, float(att)


def rope_cos_sin(inv_freq, n, att):
    """float32 cos/sin [n][dim/2] of the float64 angles p * inv_freq, times att."""
    freqs = np.arange(n, dtype=F64)[:, None] * np.asarray(inv_freq, dtype=F64)[None, :]
    cos = (np.cos(freqs).astype(F32) * F32(att)).astype(F32)
    sin = (np.sin(freqs).astype(F32) * F32(att)).astype(F32)
    return cos, sin


def rope_half(x, cos, sin):
    """HF rotate_half convention: pairs (i, i + d/2). x [n][h][d], cos/sin [n][d/2]."""
    d2 = x.shape[-1] // 2
    x1, x2 = x[..., :d2], x[..., d2:]
    c, s = cos[:, None, :], sin[:, None, :]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1).astype(F32)


def rope_interleaved(x, cos, sin):
    """Adjacent pairs (2i, 2i+1) (DeepSeek's complex / rope_interleave form). The HF code
    de-interleaves then uses rotate_half, which permutes the output dims identically for
    q and k; attention scores are the same."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    c, s = cos[:, None, :], sin[:, None, :]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x1 * c + x0 * s
    return out.astype(F32)


# ----------------------------------------------------------------------------- attention

def attend(q, k, v, scale, window=None, sinks=None, chunk=None):
    """q [n][H][dq], k [n][Hkv][dq], v [n][Hkv][dv] -> [n][H*dv]; causal, eager.
    window: keys k > q - window only (masking_utils.sliding_window_overlay); chunk: keys of
    the query's chunk only (chunked_overlay); sinks [H]: a logit per head appended to every
    row of scores before the softmax and dropped after it (gpt-oss eager_attention_forward:
    cat([scores, sink]) - max, softmax, [..., :-1])."""
    n, H, _ = q.shape
    Hk = k.shape[1]
    g = H // Hk
    mask = np.triu(np.ones((n, n), dtype=bool), 1)
    idx = np.arange(n)
    if window:
        mask |= (idx[None, :] <= idx[:, None] - window)
    if chunk:
        mask |= (idx[None, :] // chunk != idx[:, None] // chunk)
    out = np.empty((n, H, v.shape[2]), dtype=F32)
    for h in range(H):
        kh = h // g
        s = (matmul(q[:, h, :], k[:, kh, :].T) * F32(scale)).astype(F32)
        s[mask] = -np.inf
        if sinks is not None:
            s = np.concatenate([s, np.full((n, 1), sinks[h], dtype=F32)], axis=1)
            p = softmax(s, axis=-1)[:, :-1]
        else:
            p = softmax(s, axis=-1)
        out[:, h, :] = matmul(p, v[:, kh, :])
    return out.reshape(n, H * v.shape[2])


def _attn_pattern(m, layer):
    if m.family == "gpt_oss":  # GptOssConfig: layer_types default to sliding on even layers
        lt = m.cfg.get("layer_types") or ["sliding_attention" if (i + 1) % 2 else "full_attention"
                                           for i in range(m.cfg["num_hidden_layers"])]
        return (m.cfg.get("sliding_window", 128), None) if lt[layer] == "sliding_attention" else (None, None)
    return _attn_pattern_hf(m, layer)


def _attn_pattern_hf(m, layer):
    """(window, chunk) of a layer as transformers derives it. Llama has no sliding window.
    Qwen: sliding_window counts only with use_sliding_window, and by default applies to the
    layers >= max_window_layers (their config classes derive layer_types so); Mistral /
    Mixtral: to every layer. config.layer_types, when given, says per layer
    (sliding_attention with no sliding_window is full attention, as in HF)."""
    cfg = m.cfg
    if m.family == "llama":
        return None, None
    if m.family == "smallthinker":  # SmallThinkerAttention: sliding_window_layout / _size
        swl = cfg.get("sliding_window_layout")
        return (cfg.get("sliding_window_size", 4096) if swl and swl[layer] else None), None
    qwen = m.family in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe")
    sw = cfg.get("sliding_window")
    if qwen and not cfg.get("use_sliding_window"):
        sw = None
    lt = cfg.get("layer_types")
    if lt:
        kind = lt[layer]
        if kind == "sliding_attention":
            return sw, None
        if kind == "chunked_attention":
            return None, cfg.get("attention_chunk_size")
        return None, None
    if qwen:
        return (sw, None) if layer >= cfg.get("max_window_layers", 28) else (None, None)
    return sw, None


def attn_standard(m, x, L, rope):
    if m.family == "llama4_text":
        return llama4_attn(m, x, L, rope)
    cfg = m.cfg
    p = f"model.layers.{L}.self_attn."
    H = cfg["num_attention_heads"]
    Hk = cfg.get("num_key_value_heads") or H
    if m.family == "granitemoe":
        hd = cfg["hidden_size"] // H
    else:
        hd = cfg.get("head_dim") or cfg["hidden_size"] // H
    n = x.shape[0]
    eps = cfg.get("rms_norm_eps", 1e-6)
    q = linear(m, x, p + "q_proj.weight", bias_name=p + "q_proj.bias")
    k = linear(m, x, p + "k_proj.weight", bias_name=p + "k_proj.bias")
    v = linear(m, x, p + "v_proj.weight", bias_name=p + "v_proj.bias")
    if m.family == "olmoe":  # RMSNorm over the whole projection, before the head split
        q = rmsnorm(q, m.w(p + "q_norm.weight"), eps)
        k = rmsnorm(k, m.w(p + "k_norm.weight"), eps)
        clip = cfg.get("clip_qkv")
        if clip is not None:
            q, k, v = (np.clip(t, -clip, clip).astype(F32) for t in (q, k, v))
    q = q.reshape(n, H, hd)
    k = k.reshape(n, Hk, hd)
    v = v.reshape(n, Hk, hd)
    if m.family in ("qwen3_moe", "qwen3") or (m.family == "glm4_moe" and cfg.get("use_qk_norm")):
        q = rmsnorm(q, m.w(p + "q_norm.weight"), eps)  # per-head RMSNorm over head_dim
        k = rmsnorm(k, m.w(p + "k_norm.weight"), eps)
    cos, sin = rope
    rd = 2 * cos.shape[-1]
    if m.family == "smallthinker" and not (cfg.get("rope_layout") or [1] * (L + 1))[L]:
        pass  # a NoPE layer: position_embeddings None
    elif rd < hd:  # partial rotary (apply_rotary_pos_emb): the first rd dims rotate, the rest pass
        q = np.concatenate([rope_half(q[..., :rd], cos, sin), q[..., rd:]], axis=-1)
        k = np.concatenate([rope_half(k[..., :rd], cos, sin), k[..., rd:]], axis=-1)
    elif m.family == "ernie4_5_moe":  # its apply_rotary_pos_emb rotates adjacent pairs
        q = rope_interleaved(q, cos, sin)
        k = rope_interleaved(k, cos, sin)
    else:
        q = rope_half(q, cos, sin)
        k = rope_half(k, cos, sin)
    scale = cfg["attention_multiplier"] if m.family == "granitemoe" else hd ** -0.5
    window, chunk = _attn_pattern(m, L)
    sinks = m.w(p + "sinks") if m.has(p + "sinks") else None
    o = attend(q, k, v, scale, window, sinks, chunk)
    return linear(m, o, p + "o_proj.weight", bias_name=p + "o_proj.bias")


def mla_softmax_scale(cfg):
    """qk_head_dim^-0.5, times mscale(factor, mscale_all_dim)^2 when rope_scaling has a
    non-zero mscale_all_dim (DeepseekV3Attention; DeepSeek-V2's own code does the same)."""
    qk = cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]
    scale = qk ** -0.5
    rs = cfg.get("rope_scaling")
    if rs:
        mad = rs.get("mscale_all_dim", 0)
        if mad:
            ms = _get_mscale(rs["factor"], mad)
            scale = scale * ms * ms
    return scale


def attn_mla(m, x, L, rope):
    cfg = m.cfg
    p = f"model.layers.{L}.self_attn."
    H = cfg["num_attention_heads"]
    nope, rd, vd = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    r = cfg["kv_lora_rank"]
    n = x.shape[0]
    if cfg.get("q_lora_rank") is None:
        q = linear(m, x, p + "q_proj.weight")
    else:  # q_a_layernorm / kv_a_layernorm use the RMSNorm default eps 1e-6
        qa = linear(m, x, p + "q_a_proj.weight", bias_name=p + "q_a_proj.bias")
        q = linear(m, rmsnorm(qa, m.w(p + "q_a_layernorm.weight"), 1e-6), p + "q_b_proj.weight")
    q = q.reshape(n, H, nope + rd)
    q_nope, q_rot = q[..., :nope], q[..., nope:]
    ckv = linear(m, x, p + "kv_a_proj_with_mqa.weight", bias_name=p + "kv_a_proj_with_mqa.bias")
    c, k_rot = ckv[:, :r], ckv[:, r:]
    kv = linear(m, rmsnorm(c, m.w(p + "kv_a_layernorm.weight"), 1e-6), p + "kv_b_proj.weight")
    kv = kv.reshape(n, H, nope + vd)
    k_nope, v = kv[..., :nope], kv[..., nope:]
    cos, sin = rope
    interleave = True if m.family == "deepseek_v2" else cfg.get("rope_interleave", True)
    rot = rope_interleaved if interleave else rope_half
    q_rot = rot(np.ascontiguousarray(q_rot), cos, sin)
    k_rot = rot(k_rot.reshape(n, 1, rd), cos, sin)
    qs = np.concatenate([q_nope, q_rot], axis=-1)
    ks = np.concatenate([k_nope, np.broadcast_to(k_rot, (n, H, rd))], axis=-1)
    o = attend(qs, ks, np.ascontiguousarray(v), mla_softmax_scale(cfg))
    return linear(m, o, p + "o_proj.weight", bias_name=p + "o_proj.bias")


# ----------------------------------------------------------------------------- FFN / MoE

def mlp(m, x, prefix, names=("gate_proj", "up_proj", "down_proj")):
    """down(act(gate(x)) * up(x)); biases used when the checkpoint has them (mlp_bias)."""
    act = act_fn(m.cfg)
    g, u, d = (prefix + nm for nm in names)
    h = act(linear(m, x, g + ".weight", bias_name=g + ".bias")) * linear(m, x, u + ".weight", bias_name=u + ".bias")
    return linear(m, h.astype(F32), d + ".weight", bias_name=d + ".bias")


def _margin_desc(scores, k, eligible=None):
    """scores [n][E]: gap between the k-th and (k+1)-th largest (eligible) score."""
    s = scores.astype(np.float64)
    if eligible is not None:
        s = np.where(eligible, s, -np.inf)
    srt = -np.sort(-s, axis=1)
    if k >= srt.shape[1] or not np.isfinite(srt[:, k]).any():
        return np.full(s.shape[0], np.inf)
    gap = srt[:, k - 1] - srt[:, k]
    return np.where(np.isfinite(gap), gap, np.inf)


def _topk(scores, k):
    # descending, ties to the lowest index (stable)
    return np.argsort(-scores.astype(np.float64), axis=1, kind="stable")[:, :k]


def route_softmax_topk(logits, k, norm):
    """Mixtral / Qwen-MoE / OLMoE: softmax over all experts in float32, top-k,
    optional renormalisation over the selected."""
    probs = softmax(logits.astype(F32), axis=-1)
    idx = _topk(probs, k)
    w = np.take_along_axis(probs, idx, axis=1)
    if norm:
        w = (w / np.sum(w, axis=1, keepdims=True, dtype=F32)).astype(F32)
    return idx, w.astype(F32), _margin_desc(probs, k)


def route_granite(logits, k):
    """GraniteMoe: top-k on the logits, softmax over those k logits."""
    idx = _topk(logits, k)
    w = softmax(np.take_along_axis(logits, idx, axis=1), axis=-1)
    return idx, w, _margin_desc(softmax(logits, axis=-1), k)


def route_deepseek(m, logits, L):
    cfg = m.cfg
    E = cfg["n_routed_experts"]
    k = cfg["num_experts_per_tok"]
    v3 = m.family == "deepseek_v3"
    scoring = cfg.get("scoring_func") or ("sigmoid" if v3 else "softmax")
    method = cfg.get("topk_method") or ("noaux_tc" if v3 else "greedy")
    if scoring == "softmax":
        scores = softmax(logits.astype(F32), axis=-1)
    elif scoring == "sigmoid":
        scores = sigmoid(logits.astype(F32))
    else:
        raise ValueError(f"scoring_func {scoring!r} not supported")
    n = scores.shape[0]
    choice = scores
    bias_name = f"model.layers.{L}.mlp.gate.e_score_correction_bias"
    if method == "noaux_tc" and m.has(bias_name):
        choice = (scores + m.w(bias_name)[None, :]).astype(F32)
    eligible = None
    margins = []
    if method in ("group_limited_greedy", "noaux_tc") and (cfg.get("n_group") or 1) > 1:
        ng, tg = cfg["n_group"], cfg["topk_group"]
        grouped = choice.reshape(n, ng, E // ng)
        if method == "group_limited_greedy":
            gscore = grouped.max(axis=-1)
        else:  # sum of the two best scores of each group
            gscore = -np.sort(-grouped, axis=-1)[:, :, :2].sum(axis=-1, dtype=F32)
        gidx = _topk(gscore, tg)
        gmask = np.zeros((n, ng), dtype=bool)
        np.put_along_axis(gmask, gidx, True, axis=1)
        eligible = np.repeat(gmask, E // ng, axis=1)
        margins.append(_margin_desc(gscore, tg))
    elif method not in ("greedy", "group_limited_greedy", "noaux_tc"):
        raise ValueError(f"topk_method {method!r} not supported")
    masked = choice if eligible is None else np.where(eligible, choice, -np.inf)
    idx = _topk(masked, k)
    margins.append(_margin_desc(choice, k, eligible))
    w = np.take_along_axis(scores, idx, axis=1).astype(F32)
    if k > 1 and cfg.get("norm_topk_prob", v3):
        w = (w / (np.sum(w, axis=1, keepdims=True, dtype=F32) + F32(1e-20))).astype(F32)
    w = (w * F32(cfg.get("routed_scaling_factor", 1.0))).astype(F32)
    return idx, w, np.minimum.reduce(margins)


def route_glm4_moe(m, logits, L):
    """Glm4MoeMoE.route_tokens_to_experts: sigmoid scores; the correction bias for the
    choice only; groups scored by their two best choices, the topk_group best kept, the
    others' choices set to 0.0 (masked_fill, not -inf); top-k on the choice; weights are the
    plain scores, renormalised (+1e-20, whatever k) when norm_topk_prob, times
    routed_scaling_factor."""
    cfg = m.cfg
    E, k = cfg["n_routed_experts"], cfg["num_experts_per_tok"]
    scores = sigmoid(logits.astype(F32))
    n = scores.shape[0]
    choice = (scores + m.w(f"model.layers.{L}.mlp.gate.e_score_correction_bias")[None, :]).astype(F32)
    ng, tg = cfg.get("n_group") or 1, cfg.get("topk_group") or 1
    grouped = choice.reshape(n, ng, E // ng)
    gscore = -np.sort(-grouped, axis=-1)[:, :, :2].sum(axis=-1, dtype=F32)
    gidx = _topk(gscore, tg)
    gmask = np.zeros((n, ng), dtype=bool)
    np.put_along_axis(gmask, gidx, True, axis=1)
    eligible = np.repeat(gmask, E // ng, axis=1)
    masked = np.where(eligible, choice, F32(0.0)).astype(F32)
    idx = _topk(masked, k)
    margins = [_margin_desc(masked, k)]
    if ng > 1 and tg < ng:
        margins.append(_margin_desc(gscore, tg))
    w = np.take_along_axis(scores, idx, axis=1).astype(F32)
    if cfg.get("norm_topk_prob", True):
        w = (w / (np.sum(w, axis=1, keepdims=True, dtype=F32) + F32(1e-20))).astype(F32)
    w = (w * F32(cfg.get("routed_scaling_factor", 1.0))).astype(F32)
    return idx, w, np.minimum.reduce(margins)


def route_ernie(m, logits, L):
    """Ernie4_5_MoeSparseMoeBlock: softmax over all experts; top-k of softmax +
    moe_statics.e_score_correction_bias; weights the softmax values divided by
    clamp(their sum, min=moe_norm_min)."""
    cfg = m.cfg
    k = cfg["moe_k"]
    probs = softmax(logits.astype(F32), axis=-1)
    bias = m.w(f"model.layers.{L}.mlp.moe_statics.e_score_correction_bias").reshape(-1)
    choice = (probs + bias[None, :]).astype(F32)
    idx = _topk(choice, k)
    w = np.take_along_axis(probs, idx, axis=1).astype(F32)
    den = np.maximum(np.sum(w, axis=1, keepdims=True, dtype=F32), F32(cfg.get("moe_norm_min", 1e-12)))
    return idx, (w / den).astype(F32), _margin_desc(choice, k)


def route_smallthinker(m, logits):
    """SmallThinkerMoeBlock: top-k of the router logits, then softmax over those k
    (moe_primary_router_apply_softmax) or their sigmoids divided by their sum."""
    cfg = m.cfg
    k = cfg["moe_num_active_primary_experts"]
    idx = _topk(logits, k)
    sel = np.take_along_axis(logits, idx, axis=1).astype(F32)
    if cfg.get("moe_primary_router_apply_softmax", False):
        w = softmax(sel, axis=-1)
    else:
        sg = sigmoid(sel)
        w = (sg / np.sum(sg, axis=1, keepdims=True, dtype=F32)).astype(F32)
    return idx, w, _margin_desc(sigmoid(logits), k)


def route_sparsemixer(logits, jitter, k):
    """modeling_phimoe.sparsemixer in eval mode (top_k 2 only there): per step, the best
    logit m among the experts not chosen yet (ties: the first), every logit s with
    (m - s) / max(|s|, m) > 2 * jitter masked out (the chosen ones too), softmax over the
    rest, the chosen expert's probability there as its weight. Margin: the smallest gap
    between a chosen logit and the next one, and between a ratio and 2 * jitter."""
    if k != 2:
        raise ValueError("sparsemixer: top_k must be 2")
    s = logits.astype(F32)
    n = s.shape[0]
    rows = np.arange(n)
    masked = s.copy()
    idx = np.zeros((n, k), dtype=np.int64)
    w = np.zeros((n, k), dtype=F32)
    margins = []
    for j in range(k):
        mx = masked.max(axis=1, keepdims=True)
        sel = np.argmax(masked, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = ((mx - s) / np.maximum(np.abs(s), mx)).astype(F32)
        drop = ratio > F32(2 * jitter)
        p = softmax(np.where(drop, F32(-np.inf), masked).astype(F32), axis=-1)
        idx[:, j], w[:, j] = sel, p[rows, sel]
        live = np.isfinite(masked)
        margins.append(_margin_desc(masked, 1))
        gap = np.where(live & np.isfinite(ratio), np.abs(ratio.astype(F64) - 2 * jitter), np.inf)
        margins.append(gap.min(axis=1))
        masked[rows, sel] = -np.inf
    return idx, w, np.minimum.reduce(margins)


def moe_combine(m, x, idx, w, expert_fn):
    out = np.zeros_like(x, dtype=F32)
    for e in np.unique(idx):
        rows, slot = np.nonzero(idx == e)
        y = expert_fn(int(e), x[rows])
        out[rows] += (y * w[rows, slot][:, None]).astype(F32)
    return out


def ffn(m, x, L, trace=None):
    cfg = m.cfg
    fam = m.family
    p = f"model.layers.{L}."

    def record(idx, margin):
        if trace is not None:
            trace[L] = {"idx": idx, "margin": margin}

    if fam in ("llama", "mistral", "qwen2", "qwen3"):
        return mlp(m, x, p + "mlp.")
    if fam == "mixtral":
        pre = p + "block_sparse_moe."
        logits = linear(m, x, pre + "gate.weight")
        idx, w, mg = route_softmax_topk(logits, cfg["num_experts_per_tok"], True)
        record(idx, mg)
        return moe_combine(m, x, idx, w, lambda e, xs: mlp(m, xs, f"{pre}experts.{e}.", ("w1", "w3", "w2")))
    if fam in ("qwen2_moe", "qwen3_moe"):
        sparse = (L not in (cfg.get("mlp_only_layers") or [])) and cfg.get("num_experts", 0) > 0 \
            and (L + 1) % (cfg.get("decoder_sparse_step") or 1) == 0
        if not sparse:
            return mlp(m, x, p + "mlp.")
        logits = linear(m, x, p + "mlp.gate.weight")
        idx, w, mg = route_softmax_topk(logits, cfg["num_experts_per_tok"], cfg.get("norm_topk_prob", False))
        record(idx, mg)
        out = moe_combine(m, x, idx, w, lambda e, xs: mlp(m, xs, f"{p}mlp.experts.{e}."))
        if fam == "qwen2_moe" and m.has(p + "mlp.shared_expert.gate_proj.weight"):
            sh = mlp(m, x, p + "mlp.shared_expert.")
            gate = sigmoid(linear(m, x, p + "mlp.shared_expert_gate.weight"))
            out = (out + gate * sh).astype(F32)
        return out
    if fam == "olmoe":
        logits = linear(m, x, p + "mlp.gate.weight")
        idx, w, mg = route_softmax_topk(logits, cfg["num_experts_per_tok"], cfg.get("norm_topk_prob", False))
        record(idx, mg)
        return moe_combine(m, x, idx, w, lambda e, xs: mlp(m, xs, f"{p}mlp.experts.{e}."))
    if fam in ("deepseek_v2", "deepseek_v3", "glm4_moe"):  # glm4_moe has no moe_layer_freq
        freq = (cfg.get("moe_layer_freq") or 1) if fam != "glm4_moe" else 1
        is_moe = cfg.get("n_routed_experts") and L >= (cfg.get("first_k_dense_replace") or 0) and L % freq == 0
        if not is_moe:
            return mlp(m, x, p + "mlp.")
        logits = linear(m, x, p + "mlp.gate.weight")
        route = route_glm4_moe if fam == "glm4_moe" else route_deepseek
        idx, w, mg = route(m, logits, L)
        record(idx, mg)
        out = moe_combine(m, x, idx, w, lambda e, xs: mlp(m, xs, f"{p}mlp.experts.{e}."))
        if cfg.get("n_shared_experts"):
            out = (out + mlp(m, x, p + "mlp.shared_experts.")).astype(F32)
        return out
    if fam == "ernie4_5_moe":
        start, step = cfg.get("moe_layer_start_index", 1), cfg.get("moe_layer_interval", 1)
        end = cfg.get("moe_layer_end_index", -1)
        end = cfg["num_hidden_layers"] - 1 if end == -1 else end
        if not ((L + 1) % step == 0 and start <= L <= end):
            return mlp(m, x, p + "mlp.")
        logits = linear(m, x, p + "mlp.gate.weight")
        idx, w, mg = route_ernie(m, logits, L)
        record(idx, mg)
        out = moe_combine(m, x, idx, w, lambda e, xs: mlp(m, xs, f"{p}mlp.experts.{e}."))
        if cfg.get("moe_num_shared_experts", 2):
            out = (out + mlp(m, x, p + "mlp.shared_experts.")).astype(F32)
        return out
    if fam == "smallthinker":  # the router reads the layer's input (m.router_input), before attention
        pre = p + "block_sparse_moe."
        logits = linear(m, m.router_input, pre + "primary_router.weight")
        idx, w, mg = route_smallthinker(m, logits)
        record(idx, mg)

        def expert(e, xs):  # up * relu(gate), then down
            q = f"{pre}experts.{e}."
            g = linear(m, xs, q + "gate.weight")
            hh = (linear(m, xs, q + "up.weight") * np.maximum(g, F32(0))).astype(F32)
            return linear(m, hh, q + "down.weight")
        return moe_combine(m, x, idx, w, expert)
    if fam == "gpt_oss":
        return gpt_oss_ffn(m, x, L, record)
    if fam == "llama4_text":
        return llama4_ffn(m, x, L, record)
    if fam == "phimoe":
        pre = p + "block_sparse_moe."
        logits = linear(m, x, pre + "gate.weight")
        idx, w, mg = route_sparsemixer(logits, cfg.get("router_jitter_noise", 0.01), cfg["num_experts_per_tok"])
        record(idx, mg)
        return moe_combine(m, x, idx, w, lambda e, xs: mlp(m, xs, f"{pre}experts.{e}.", ("w1", "w3", "w2")))
    if fam == "granitemoe":
        return stacked_glu_moe(m, x, p + "block_sparse_moe.", cfg["num_experts_per_tok"], act_fn(cfg), record)
    raise ValueError(fam)


def stacked_glu_moe(m, x, pre, k, act, record):
    """GraniteMoE / JetMoE experts: router.layer (top-k of the logits, softmax over those
    k), input_linear [E][2 ff][h] whose first half is the gate (act(first) * second), and
    output_linear [E][h][ff]."""
    logits = linear(m, x, pre + "router.layer.weight")
    idx, w, mg = route_granite(logits, k)
    record(idx, mg)
    wi, wo = m.w(pre + "input_linear.weight"), m.w(pre + "output_linear.weight")
    ff = wi.shape[1] // 2

    def expert(e, xs):
        hh = linear(m, xs, pre + "input_linear.weight", wmat=wi[e])
        hh = (act(hh[:, :ff]) * hh[:, ff:]).astype(F32)
        return linear(m, hh, pre + "output_linear.weight", wmat=wo[e])
    return moe_combine(m, x, idx, w, expert)


FAMILIES = {"llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen2_moe", "qwen3_moe", "olmoe",
            "deepseek_v2", "deepseek_v3", "granitemoe", "glm4_moe", "ernie4_5_moe",
            "smallthinker", "gpt_oss", "llama4_text", "phimoe",
            "jetmoe"}


# ----------------------------------------------------------------------------- JetMoE
#
# modeling_jetmoe.py / configuration_jetmoe.py: num_attention_heads = num_key_value_heads *
# num_experts_per_tok, head_dim = kv_channels (attribute_map; the rotary dims too);
# JetMoeTopKGating: top-k of the router logits, softmax over those k. Attention (MoA):
# kv_proj [2 kvp][h] -> chunk(2): keys first, then values; each selected expert's
# input_linear [E][kvp][h] gives the queries of slot s (experts.map: [n][top_k][kvp], in
# top-k order), viewed as heads s * n_kv + j; keys and values .repeat(1, top_k, 1, 1), so
# head h reads K/V head h % n_kv (not repeat_interleave); rope on q and k; scale
# kv_channels^-0.5; the output [n][top_k][kvp] of slot s goes through that expert's
# output_linear [E][h][kvp], times its gate, summed, plus experts.bias [h]. MoE FFN:
# input_linear [E][2 ff][h], chunk(2): activation(first) * second, output_linear, gates,
# summed, plus mlp.bias [h]. JetMoeBlock's two RMSNorms take the default eps 1e-6; only the
# final norm reads rms_norm_eps.

def _jetmoe_act(cfg):
    a = cfg.get("activation_function", "silu")
    if a not in ("silu", "swish"):
        raise ValueError(f"activation_function {a!r} not supported (silu only)")
    return silu


def jetmoe_attention(m, x, L, rope, trace):
    cfg = m.cfg
    p = f"model.layers.{L}.self_attention."
    k, Hk, hd = cfg["num_experts_per_tok"], cfg["num_key_value_heads"], cfg["kv_channels"]
    kvp, n = Hk * hd, x.shape[0]
    logits = linear(m, x, p + "experts.router.layer.weight")
    idx, w, mg = route_granite(logits, k)
    if trace is not None:
        trace.setdefault(L, {})["margin_attn"] = mg
    wi, wo = m.w(p + "experts.input_linear.weight"), m.w(p + "experts.output_linear.weight")
    q = np.zeros((n, k, kvp), dtype=F32)
    for e in np.unique(idx):
        rows, slot = np.nonzero(idx == e)
        q[rows, slot] = linear(m, x[rows], p + "experts.input_linear.weight", wmat=wi[e])
    kv = linear(m, x, p + "kv_proj.weight")
    keys, vals = kv[:, :kvp].reshape(n, Hk, hd), kv[:, kvp:].reshape(n, Hk, hd)
    q = q.reshape(n, k * Hk, hd)  # head s * Hk + j
    cos, sin = rope
    q, keys = rope_half(q, cos, sin), rope_half(keys, cos, sin)
    keys, vals = np.tile(keys, (1, k, 1)), np.tile(vals, (1, k, 1))  # .repeat(1, top_k, 1, 1)
    o = attend(q, keys, vals, hd ** -0.5).reshape(n, k, kvp)
    out = np.zeros((n, cfg["hidden_size"]), dtype=F32)
    for e in np.unique(idx):
        rows, slot = np.nonzero(idx == e)
        y = linear(m, o[rows, slot], p + "experts.output_linear.weight", wmat=wo[e])
        np.add.at(out, rows, (y * w[rows, slot][:, None]).astype(F32))
    return (out + m.w(p + "experts.bias")).astype(F32)


def jetmoe_ffn(m, x, L, trace):
    p = f"model.layers.{L}.mlp."

    def record(idx, mg):
        if trace is not None:
            trace.setdefault(L, {}).update(idx=idx, margin=mg)
    out = stacked_glu_moe(m, x, p, m.cfg["num_experts_per_tok"], _jetmoe_act(m.cfg), record)
    return (out + m.w(p + "bias")).astype(F32)


# ----------------------------------------------------------------------------- gpt-oss
#
# modeling_gpt_oss.py: q/k/v/o biases, sinks, layer_types (sliding / full), YaRN (default
# truncate=false), router F.linear with bias -> top-k of the logits -> softmax over those k;
# experts gate_up = x @ gate_up_proj[e] + bias ([E, hidden, 2 ff], gate = [..., ::2], up =
# [..., 1::2]), gate.clamp(max=limit), up.clamp(-limit, limit), glu = gate * sigmoid(gate *
# alpha), (up + 1) * glu @ down_proj[e] ([E, ff, hidden]) + down bias, times the weight.

FP4_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=F32)


def mxfp4_dequant(blocks, scales):
    """transformers' convert_moe_packed_tensors: blocks [E][rows][G][16] (low nibble = even
    element), scales [E][rows][G] (E8M0, bias 127) -> float32 [E][G * 32][rows] (x @ W layout)."""
    blocks = np.asarray(blocks).astype(np.uint8)
    scales = np.asarray(scales).astype(np.int32) - 127
    E, R, G, B = blocks.shape
    out = np.empty((E, R, G, 2 * B), dtype=F32)
    out[..., 0::2] = FP4_VALUES[blocks & 0x0F]
    out[..., 1::2] = FP4_VALUES[blocks >> 4]
    out = np.ldexp(out, scales[..., None]).astype(F32)
    return out.reshape(E, R, G * 2 * B).transpose(0, 2, 1).copy()


def gpt_oss_defaults(m):
    # copies: what the caller holds (and gen_model.py writes) stays as it was
    m.cfg = c = dict(m.cfg)
    m.t = dict(m.t)
    if c.get("rope_theta") is None:
        c["rope_theta"] = 150000.0
    if not c.get("rope_scaling"):
        c["rope_scaling"] = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                             "truncate": False, "original_max_position_embeddings": 4096}
    m.mxfp4 = set()
    for L in range(c["num_hidden_layers"]):
        for w in ("gate_up_proj", "down_proj"):
            n = f"model.layers.{L}.mlp.experts.{w}"
            if n + "_blocks" in m.t and n not in m.t:
                m.t[n] = mxfp4_dequant(m.t[n + "_blocks"], m.t[n + "_scales"])
                m.mxfp4.add(n)


def gpt_oss_ffn(m, x, L, record):
    cfg = m.cfg
    p = f"model.layers.{L}.mlp."
    logits = linear(m, x, p + "router.weight", bias_name=p + "router.bias")
    idx, w, mg = route_granite(logits, cfg["num_experts_per_tok"])
    record(idx, mg)
    gu_n, dn_n = p + "experts.gate_up_proj", p + "experts.down_proj"
    gu, gub, dn, dnb = m.w(gu_n), m.w(gu_n + "_bias"), m.w(dn_n), m.w(dn_n + "_bias")
    alpha, limit = F32(cfg.get("swiglu_alpha", 1.702)), F32(cfg.get("swiglu_limit", 7.0))

    def aq(v, name):  # Q8_0 activations before an MXFP4 product (what colibri's kernels do)
        return quant.qdq(v, "q8_0") if m.act_quant == "q8_0" and name in m.mxfp4 else v

    def expert(e, xs):
        h = (matmul(aq(xs, gu_n), gu[e]) + gub[e]).astype(F32)
        gate, up = h[:, 0::2], h[:, 1::2]
        gate = np.minimum(gate, limit)
        up = np.clip(up, -limit, limit)
        glu = (gate * sigmoid((gate * alpha).astype(F32))).astype(F32)
        hh = ((up + F32(1)) * glu).astype(F32)
        return (matmul(aq(hh, dn_n), dn[e]) + dnb[e]).astype(F32)
    return moe_combine(m, x, idx, w, expert)


# ----------------------------------------------------------------------------- Llama-4
#
# modeling_llama4.py / configuration_llama4.py (Llama4TextConfig.__post_init__):
# no_rope_layers[l] = 1 rotates (default: (l + 1) % no_rope_layer_interval != 0);
# moe_layers default range(interleave_moe_layer_step - 1, n_layers, step); layer_types
# default "chunked_attention" on the rotating layers, else "full_attention". Attention: q/k/v
# (and o) biases with attention_bias; rope on adjacent pairs (view_as_complex) times the
# rope's attention_scaling; then, on rotating layers with use_qk_norm, L2 norm of each head
# x * rsqrt(mean(x^2) + rms_norm_eps) without a weight; on NoPE layers with
# attn_temperature_tuning, q *= log1p(floor((pos + 1) / floor_scale)) * attn_scale + 1.
# MoE: top-k of the router logits, sigmoid of those (the others -inf -> 0), each expert fed
# x * score (the weight on the input), gate_up_proj [E][hidden][2 ff] used as x @ W with gate
# = first half, up = second half (chunk(2)); plus the ungated shared expert of
# intermediate_size. Dense layers: an MLP of intermediate_size_mlp.

def llama4_text_part(cfg, tensors):
    """Llama4ForConditionalGeneration: text_config, and the language_model.* tensors
    without that prefix (language_model.model.X -> model.X, language_model.lm_head -> lm_head);
    the vision tower and projector are not part of the text forward pass."""
    tc = dict(cfg["text_config"])
    tc.setdefault("model_type", "llama4_text")
    pre = "language_model."
    return tc, {k[len(pre):]: v for k, v in tensors.items() if k.startswith(pre)}


def llama4_defaults(m):
    m.cfg = c = dict(m.cfg)
    n = c["num_hidden_layers"]
    if c.get("rope_theta") is None:
        c["rope_theta"] = 500000.0
    iv = c.get("no_rope_layer_interval", 4)
    if not c.get("no_rope_layers"):  # None or [] -> the default (the config class's `or`)
        c["no_rope_layers"] = [int((L + 1) % iv != 0) for L in range(n)]
    if c.get("moe_layers") is None:
        step = c.get("interleave_moe_layer_step", 1)
        c["moe_layers"] = list(range(step - 1, n, step))
    if c.get("layer_types") is None:
        c["layer_types"] = ["chunked_attention" if r else "full_attention" for r in c["no_rope_layers"]]
    for k, v in (("use_qk_norm", True), ("attn_temperature_tuning", True), ("floor_scale", 8192),
                 ("attn_scale", 0.1), ("attention_chunk_size", 8192), ("intermediate_size_mlp", 16384),
                 ("head_dim", c["hidden_size"] // c["num_attention_heads"])):
        if k not in c:
            c[k] = v


def llama4_attn(m, x, L, rope):
    cfg = m.cfg
    p = f"model.layers.{L}.self_attn."
    H = cfg["num_attention_heads"]
    Hk = cfg.get("num_key_value_heads") or H
    hd = cfg["head_dim"]
    n = x.shape[0]
    q = linear(m, x, p + "q_proj.weight", bias_name=p + "q_proj.bias").reshape(n, H, hd)
    k = linear(m, x, p + "k_proj.weight", bias_name=p + "k_proj.bias").reshape(n, Hk, hd)
    v = linear(m, x, p + "v_proj.weight", bias_name=p + "v_proj.bias").reshape(n, Hk, hd)
    use_rope = cfg["no_rope_layers"][L]
    if use_rope:
        cos, sin = rope
        q = rope_interleaved(q, cos, sin)
        k = rope_interleaved(k, cos, sin)
        if cfg["use_qk_norm"]:  # Llama4TextL2Norm, after the rotation
            eps = cfg.get("rms_norm_eps", 1e-5)
            q = rmsnorm(q, F32(1.0), eps)
            k = rmsnorm(k, F32(1.0), eps)
    elif cfg["attn_temperature_tuning"]:
        pos = np.arange(n, dtype=F32)
        sc = (np.log1p(np.floor((pos + F32(1.0)) / F32(cfg["floor_scale"])).astype(F64)).astype(F32)
              * F32(cfg["attn_scale"]) + F32(1.0)).astype(F32)
        q = (q * sc[:, None, None]).astype(F32)
    chunk = cfg["attention_chunk_size"] if cfg["layer_types"][L] == "chunked_attention" else None
    if cfg["layer_types"][L] == "chunked_attention" and not chunk:
        raise ValueError("chunked_attention without attention_chunk_size")
    o = attend(q, k, v, hd ** -0.5, chunk=chunk)
    return linear(m, o, p + "o_proj.weight", bias_name=p + "o_proj.bias")


def llama4_ffn(m, x, L, record):
    cfg = m.cfg
    p = f"model.layers.{L}.feed_forward."
    if L not in cfg["moe_layers"]:
        return mlp(m, x, p)
    k = cfg["num_experts_per_tok"]
    logits = linear(m, x, p + "router.weight")
    idx = _topk(logits, k)
    w = sigmoid(np.take_along_axis(logits, idx, axis=1).astype(F32))
    record(idx, _margin_desc(sigmoid(logits), k))
    gu_n, dn_n = p + "experts.gate_up_proj", p + "experts.down_proj"
    gu, dn = m.w(gu_n), m.w(dn_n)
    ff = gu.shape[2] // 2
    act = act_fn(cfg)
    out = mlp(m, x, p + "shared_expert.")
    for e in np.unique(idx):
        rows, slot = np.nonzero(idx == e)
        xin = (x[rows] * w[rows, slot][:, None]).astype(F32)  # the routing weight scales the input
        h = matmul(xin, gu[e])
        hh = (h[:, ff:] * act(h[:, :ff])).astype(F32)
        out[rows] = (out[rows] + matmul(hh, dn[e])).astype(F32)
    return out


# ----------------------------------------------------------------------------- forward

def rope_dim(m):
    cfg = m.cfg
    if m.family in ("deepseek_v2", "deepseek_v3"):
        return cfg["qk_rope_head_dim"]
    if m.family == "granitemoe":
        return cfg["hidden_size"] // cfg["num_attention_heads"]
    if m.family == "jetmoe":
        return cfg["kv_channels"]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    prf = cfg.get("partial_rotary_factor")
    if prf is None:  # Glm4MoeConfig's default is 0.5
        prf = 0.5 if m.family == "glm4_moe" else 1.0
    return int(hd * prf)


def forward(m, tokens, trace=None, upto_layer=None):
    """tokens: list of ids -> logits float32 [n][vocab]. trace (dict) receives per MoE
    layer {"idx", "margin"}; with upto_layer set, stops after that layer's FFN (returns
    None)."""
    cfg = m.cfg
    tokens = np.asarray(tokens, dtype=np.int64)
    V = cfg["vocab_size"]
    if tokens.size == 0 or tokens.min() < 0 or tokens.max() >= V:
        raise ValueError(f"token ids must be in [0, {V})")
    n = len(tokens)
    emb = m.w("model.embed_tokens.weight")
    x = emb[tokens].astype(F32)
    granite = m.family == "granitemoe"
    if granite:
        x = (x * F32(cfg.get("embedding_multiplier", 1.0))).astype(F32)
    resm = F32(cfg.get("residual_multiplier", 1.0)) if granite else None
    inv, att = rope_params(cfg, rope_dim(m), n)
    rope = rope_cos_sin(inv, n, att)
    eps = cfg.get("rms_norm_eps", 1e-6)
    mla = m.family in ("deepseek_v2", "deepseek_v3")
    for L in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{L}."
        if m.family == "jetmoe":  # JetMoeBlock: its norms at the default eps
            h = rmsnorm(x, m.w(p + "input_layernorm.weight"), 1e-6)
            x = (x + jetmoe_attention(m, h, L, rope, trace)).astype(F32)
            h = rmsnorm(x, m.w(p + "post_attention_layernorm.weight"), 1e-6)
            x = (x + jetmoe_ffn(m, h, L, trace)).astype(F32)
            if upto_layer is not None and L >= upto_layer:
                return None
            continue
        m.router_input = x  # SmallThinker's router reads the layer's input
        h = block_norm(m, x, p + "input_layernorm", eps)
        a = attn_mla(m, h, L, rope) if mla else attn_standard(m, h, L, rope)
        x = (x + (a * resm if granite else a)).astype(F32)
        h = block_norm(m, x, p + "post_attention_layernorm", eps)
        f = ffn(m, h, L, trace)
        x = (x + (f * resm if granite else f)).astype(F32)
        if upto_layer is not None and L >= upto_layer:
            return None
    x = block_norm(m, x, "model.norm", eps)
    head = "lm_head.weight" if m.has("lm_head.weight") else "model.embed_tokens.weight"
    if head != "lm_head.weight" and cfg.get("tie_word_embeddings") is False:
        raise KeyError("lm_head.weight missing and tie_word_embeddings is false")
    logits = linear(m, x, head, bias_name="lm_head.bias")
    if granite:
        logits = (logits / F32(cfg.get("logits_scaling", 1.0))).astype(F32)
    return logits.astype(F32)


def greedy(m, tokens, n_gen):
    seq = list(tokens)
    out = []
    for _ in range(n_gen):
        nxt = int(np.argmax(forward(m, seq)[-1]))
        out.append(nxt)
        seq.append(nxt)
    return out


def parse_tokens(s):
    s = s.replace(",", " ").split()
    return [int(t) for t in s]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("hf_dir")
    ap.add_argument("--tokens", help="ids separated by commas or spaces")
    ap.add_argument("--tokens-file", help="file with ids separated by spaces/commas")
    ap.add_argument("--out", help="write teacher-forced logits float32 [n][vocab]")
    ap.add_argument("--greedy", type=int, default=0, help="print N greedy ids")
    ap.add_argument("--full-out", help="write logits of tokens + greedy ids")
    ap.add_argument("--weights-dtype", default="f32", choices=["f32", "f16", "bf16", "q8_0", "q4_0"])
    ap.add_argument("--expert-weights-dtype", default=None, choices=["f32", "f16", "bf16", "q8_0", "q4_0"])
    ap.add_argument("--act-quant", default=None, choices=["q8_0"],
                    help="round activations through Q8_0 before q8_0/q4_0 weight products")
    a = ap.parse_args(argv)
    if a.tokens is None and a.tokens_file is None:
        ap.error("--tokens or --tokens-file is required")
    toks = parse_tokens(a.tokens if a.tokens is not None else open(a.tokens_file).read())
    m = load_model(a.hf_dir, a.weights_dtype, a.expert_weights_dtype, a.act_quant,
                   log=lambda s: print(s, file=sys.stderr))
    if a.out:
        forward(m, toks).astype("<f4").tofile(a.out)
    if a.greedy or a.full_out:
        g = greedy(m, toks, a.greedy)
        print(" ".join(str(i) for i in g))
        if a.full_out:
            forward(m, toks + g).astype("<f4").tofile(a.full_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
