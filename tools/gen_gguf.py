#!/usr/bin/python3
"""gen_gguf.py — random-weight GGUF v3 files with the real shapes of MoE models, for
speed tests (colibri and llama.cpp / ik_llama.cpp load the same file).

    /usr/bin/python3 tools/gen_gguf.py --model mixtral --dtype q4_0 [--layers 4] [-o FILE]
    /usr/bin/python3 tools/gen_gguf.py --list

Models (shapes as the published configs; --layers cuts the depth):
    olmoe     arch olmoe:    OLMoE-1B-7B, 16 layers, hidden 2048, 64 experts top-8, expert ff 1024,
                             16 heads, full-width q/k norm, vocab 50304
    qwen3moe  arch qwen3moe: Qwen3-30B-A3B, 48 layers (default cut: 16), hidden 2048,
                             128 experts top-8, expert ff 768, 32 heads / 4 kv, head_dim 128,
                             per-head q/k norm, vocab 151936
    mixtral   arch llama:    Mixtral-8x7B, 32 layers (default cut: 4), hidden 4096, 8 experts
                             top-2, ff 14336, 32 heads / 8 kv, vocab 32000
    dsv2lite  arch deepseek2: DeepSeek-V2-Lite, 27 layers (default cut: 4), hidden 2048, MLA
                             (16 heads, kv_lora_rank 512, qk nope 128 + rope 64, v 128, no q
                             lora), layer 0 dense (ff 10944), then 64 experts top-6 (ff 1408)
                             + 2 shared, vocab 102400 (attn_kv_b layout, no YaRN)
    gptoss20b arch gpt-oss:  gpt-oss-20b, 24 layers (default cut: 8), hidden 2880, 32 experts
                             top-4, expert ff 2880 in MXFP4 (whatever --dtype says: the dense
                             tensors take it), 64 heads / 8 kv, head_dim 64, q/k/v/o biases,
                             attention sinks, sliding window 128 on even layers, YaRN x32,
                             router and expert biases, vocab 201088

dtypes: f16 holds the random floats themselves (a convert / quantize input); q4_0 and q8_0
blocks come from the ggml reference quantizers applied to random floats; q4_k blocks are
random nibbles with scales and mins that make the weights zero-mean (valid blocks, not a
fit of any data).  Norm weights and the router (ffn_gate_inp) stay f32, as llama.cpp's
quantizer leaves them.  A minimal SentencePiece vocabulary (<unk>, <s>, </s>, the 256 <0xXX> byte
tokens, then filler pieces) makes the files loadable by llama.cpp and colibri.

The file is written streaming, one chunk of one tensor at a time (never the whole file in
memory); large tensors are cut at random offsets from a 32 Mi-value pool of such
blocks (see BlockPool).  Output goes under /tmp/colibri-bench/ unless -o says otherwise.
"""
import argparse
import os
import struct
import sys
import time

import numpy as np

ALIGN = 32
OUT_DIR = "/tmp/colibri-bench"

# GGUF metadata value types
T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)

# ggml types: id, weights per block, bytes per block
DTYPES = {
    "f32": (0, 1, 4),
    "f16": (1, 1, 2),
    "q4_0": (2, 32, 18),
    "q8_0": (8, 32, 34),
    "q4_k": (12, 256, 144),
    "mxfp4": (39, 32, 17),
}

MODELS = {
    "olmoe": dict(arch="olmoe", layers=16, full_layers=16, hidden=2048, heads=16, kv_heads=16,
                  head_dim=128, ff=1024, experts=64, top_k=8, vocab=50304, ctx=4096,
                  qk_norm="full", rope_base=10000.0, eps=1e-5, expert_ff_key=False),
    "qwen3moe": dict(arch="qwen3moe", layers=16, full_layers=48, hidden=2048, heads=32, kv_heads=4,
                     head_dim=128, ff=768, experts=128, top_k=8, vocab=151936, ctx=40960,
                     qk_norm="head", rope_base=1000000.0, eps=1e-6, expert_ff_key=True),
    "mixtral": dict(arch="llama", layers=4, full_layers=32, hidden=4096, heads=32, kv_heads=8,
                    head_dim=128, ff=14336, experts=8, top_k=2, vocab=32000, ctx=32768,
                    qk_norm=None, rope_base=1000000.0, eps=1e-5, expert_ff_key=False),
    "dsv2lite": dict(arch="deepseek2", layers=4, full_layers=27, hidden=2048, heads=16, kv_heads=16,
                     head_dim=192, ff=1408, experts=64, top_k=6, vocab=102400, ctx=32768,
                     qk_norm=None, rope_base=10000.0, eps=1e-6, expert_ff_key=True,
                     mla=dict(kv_lora_rank=512, nope=128, rope=64, v=128), dense_ff=10944,
                     first_dense=1, shared=2),
    "gptoss20b": dict(arch="gpt-oss", layers=8, full_layers=24, hidden=2880, heads=64, kv_heads=8,
                      head_dim=64, ff=2880, experts=32, top_k=4, vocab=201088, ctx=131072,
                      qk_norm=None, rope_base=150000.0, eps=1e-5, expert_ff_key=True,
                      gpt_oss=dict(window=128, yarn_factor=32.0, yarn_orig=4096), expert_dtype="mxfp4"),
}


# ---- metadata encoding ------------------------------------------------------------------

def enc_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def enc_kv(key, vtype, value):
    out = enc_str(key) + struct.pack("<I", vtype)
    if vtype == T_STR:
        return out + enc_str(value)
    if vtype == T_ARR:
        etype, items = value
        out += struct.pack("<IQ", etype, len(items))
        if etype == T_STR:
            return out + b"".join(enc_str(s) for s in items)
        fmt = {T_F32: "<f", T_I32: "<i", T_U32: "<I"}[etype]
        return out + np.asarray(items, dtype=np.dtype(fmt)).tobytes()
    fmt = {T_U32: "<I", T_I32: "<i", T_F32: "<f", T_BOOL: "<?", T_U64: "<Q", T_U8: "<B"}[vtype]
    return out + struct.pack(fmt, value)


def vocab(n):
    """SentencePiece-style vocabulary: tokens, scores, token types."""
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    types = [2, 3, 3] + [6] * 256  # UNKNOWN, CONTROL, CONTROL, BYTE
    letters = "abcdefghijklmnopqrstuvwxyz"
    i = 0
    while len(toks) < n:
        # unique printable pieces: "▁" + base-26 spelling of i
        s, v = "", i
        while True:
            s = letters[v % 26] + s
            v //= 26
            if v == 0:
                break
        toks.append("\u2581" + s)
        types.append(1)
        i += 1
    scores = [0.0] * 259 + [-float(j) for j in range(n - 259)]
    return toks[:n], scores[:n], types[:n]


# ---- quantizers (ggml's reference rules, on random floats) ------------------------------

def quant_q8_0(x):
    """x: float32 [nb, 32] -> bytes of nb Q8_0 blocks (d fp16, 32 x int8)."""
    amax = np.abs(x).max(axis=1)
    d = amax / 127.0
    idv = np.where(d != 0, 1.0 / np.where(d != 0, d, 1), 0).astype(np.float32)
    q = np.round(x * idv[:, None])  # numpy rounds half to even; ties are measure-zero here
    q = np.clip(q, -127, 127).astype(np.int8)
    out = np.empty((x.shape[0], 34), dtype=np.uint8)
    out[:, 0:2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out


def quant_q4_0(x):
    """x: float32 [nb, 32] -> nb Q4_0 blocks: d = max/-8 (max = signed value of largest
    magnitude), q = min(15, trunc(x/d + 8.5)); byte j = q[j] | q[j+16] << 4."""
    idx = np.abs(x).argmax(axis=1)
    mx = x[np.arange(x.shape[0]), idx]
    d = mx / -8.0
    idv = np.where(d != 0, 1.0 / np.where(d != 0, d, 1), 0).astype(np.float32)
    q = np.minimum(15, (x * idv[:, None] + 8.5).astype(np.int8)).astype(np.uint8)
    out = np.empty((x.shape[0], 18), dtype=np.uint8)
    out[:, 0:2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out


def random_mxfp4(rng, nb, scale):
    """nb MXFP4 blocks: random nibbles (every E2M1 code, both signs, mean magnitude 2.3 before
    the scale) and E8M0 exponents of 2^-1 .. 2^1 times the one that makes their uniform-like
    spread about `scale`."""
    out = rng.integers(0, 256, size=(nb, 17), dtype=np.uint8)
    e0 = 127 + int(np.round(np.log2(scale / 2.3)))
    out[:, 0] = rng.integers(e0 - 1, e0 + 2, size=nb).astype(np.uint8)
    return out


def random_q4_k(rng, nb, scale):
    """nb random-but-valid Q4_K super-blocks of zero-mean weights: random nibbles q, random
    6-bit sub-block scales sc in 32..63, dmin = 8 d and mins m = round(sc * 7.5 / 8), so that
    x = d sc q - dmin m = d sc (q - 7.5) + d (7.5 sc - 8 m) has a mean of at most 4 d per
    sub-block (either sign) against a spread of about 220 d, like the ggml quantizers' output
    on zero-mean data.  (Random mins would give every weight the same positive mean: every
    projection would add one token-independent direction to the hidden state, and the router
    would choose the same experts for every token.)  The spread matches q4_0's uniform
    [-scale, scale]."""
    out = rng.integers(0, 256, size=(nb, 144), dtype=np.uint8)
    d = ((rng.random(nb, dtype=np.float32) * 0.5 + 0.5) * (scale / 285.0)).astype(np.float16)
    dmin = (d.astype(np.float32) * 8).astype(np.float16)
    sc = rng.integers(32, 64, size=(nb, 8)).astype(np.uint8)
    m = np.round(sc.astype(np.float32) * (7.5 / 8.0)).astype(np.uint8)
    q = np.empty((nb, 12), dtype=np.uint8)  # ggml's packing of 8 6-bit scales and mins
    q[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    q[:, 4:8] = (m[:, 0:4] & 63) | ((m[:, 4:8] >> 4) << 6)
    q[:, 8:12] = (sc[:, 4:8] & 0xF) | ((m[:, 4:8] & 0xF) << 4)
    out[:, 0:2] = d.view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = dmin.view(np.uint8).reshape(-1, 2)
    out[:, 4:16] = q
    return out


class BlockPool:
    """A pool of freshly quantized random blocks per (dtype, scale); tensors are cut from it
    at random block offsets.  Quantizing every weight of a multi-GiB file in numpy costs
    about a minute per GiB on this class of machine; slicing a 32 Mi-value pool writes at
    disk speed and the weights stay random-looking (no two tensors share an offset pattern)."""

    POOL_ELEMS = 1 << 25

    def __init__(self, rng):
        self.rng = rng
        self.pools = {}

    def get(self, dtype, scale):
        key = (dtype, scale)
        if key not in self.pools:
            _, bs, bb = DTYPES[dtype]
            blocks = b"".join(fresh_chunks(self.rng, dtype, self.POOL_ELEMS, scale))
            self.pools[key] = np.frombuffer(blocks, dtype=np.uint8).reshape(-1, bb)
        return self.pools[key]

    def chunks(self, dtype, n_elems, scale, chunk_blocks=1 << 18):
        pool = self.get(dtype, scale)
        _, bs, _ = DTYPES[dtype]
        left = n_elems // bs
        while left:
            n = min(chunk_blocks, left, pool.shape[0])
            start = int(self.rng.integers(0, pool.shape[0] - n + 1))
            yield pool[start:start + n].tobytes()
            left -= n


def fresh_chunks(rng, dtype, n_elems, scale, chunk_elems=1 << 22):
    """Yields the bytes of n_elems freshly drawn values in chunks."""
    _, bs, _ = DTYPES[dtype]
    done = 0
    while done < n_elems:
        n = min(chunk_elems, n_elems - done)
        if dtype == "q4_k":
            yield random_q4_k(rng, n // bs, scale).tobytes()
        elif dtype == "mxfp4":
            yield random_mxfp4(rng, n // bs, scale).tobytes()
        else:
            x = (rng.random(n, dtype=np.float32) * 2.0 - 1.0) * scale
            if dtype == "f32":
                yield x.astype("<f4").tobytes()
            elif dtype == "f16":
                yield x.astype("<f2").tobytes()
            elif dtype == "q8_0":
                yield quant_q8_0(x.reshape(-1, 32)).tobytes()
            elif dtype == "q4_0":
                yield quant_q4_0(x.reshape(-1, 32)).tobytes()
        done += n


# ---- model layout -----------------------------------------------------------------------

# The token embeddings' scale.  With random weights attention is nearly uniform, so its output
# is about the mean of the context's values: alike for streams that share a prompt prefix, and
# it accumulates over the layers far above 0.05-scale embeddings.  The residual stream, and with
# it the router's choice, then hardly depended on the token: 4 sampled streams of the 16-layer
# qwen3moe q4_k file chose 13.5 distinct experts per layer and step (scale 1: 18.5), where
# independent tokens choose 128 (1 - (1 - 8/128)^4) = 29.  At scale 8 the token's identity
# carries through the layers as in a trained model's routing: 32 per layer and step (the
# prompt steps' union counted in).
EMBD_SCALE = 8.0

def layout_mla(m, wdt):
    """DeepSeek-V2 layout (llama.cpp's deepseek2 names, attn_kv_b not split)."""
    H, E, F, V, A = m["hidden"], m["experts"], m["ff"], m["vocab"], m["mla"]
    nh, r, nope, rope, v = m["heads"], A["kv_lora_rank"], A["nope"], A["rope"], A["v"]
    t = [("token_embd.weight", [H, V], wdt, EMBD_SCALE)]
    for i in range(m["layers"]):
        b = "blk.%d." % i
        t.append((b + "attn_norm.weight", [H], "f32", "ones"))
        t.append((b + "attn_q.weight", [H, nh * (nope + rope)], wdt, 0.03))
        t.append((b + "attn_kv_a_mqa.weight", [H, r + rope], wdt, 0.03))
        t.append((b + "attn_kv_a_norm.weight", [r], "f32", "ones"))
        t.append((b + "attn_kv_b.weight", [r, nh * (nope + v)], wdt, 0.03))
        t.append((b + "attn_output.weight", [nh * v, H], wdt, 0.03))
        t.append((b + "ffn_norm.weight", [H], "f32", "ones"))
        if i < m["first_dense"]:
            t.append((b + "ffn_gate.weight", [H, m["dense_ff"]], wdt, 0.03))
            t.append((b + "ffn_up.weight", [H, m["dense_ff"]], wdt, 0.03))
            t.append((b + "ffn_down.weight", [m["dense_ff"], H], wdt, 0.03))
            continue
        t.append((b + "ffn_gate_inp.weight", [H, E], "f32", 0.05))
        t.append((b + "ffn_gate_exps.weight", [H, F, E], wdt, 0.03))
        t.append((b + "ffn_up_exps.weight", [H, F, E], wdt, 0.03))
        t.append((b + "ffn_down_exps.weight", [F, H, E], wdt, 0.03))
        t.append((b + "ffn_gate_shexp.weight", [H, F * m["shared"]], wdt, 0.03))
        t.append((b + "ffn_up_shexp.weight", [H, F * m["shared"]], wdt, 0.03))
        t.append((b + "ffn_down_shexp.weight", [F * m["shared"], H], wdt, 0.03))
    t.append(("output_norm.weight", [H], "f32", "ones"))
    t.append(("output.weight", [H, V], wdt, 0.03))
    return t


def layout_gpt_oss(m, wdt):
    """gpt-oss as llama.cpp names it: attention with biases and sinks, the FFN norm as
    post_attention_norm, router and expert biases; experts in m["expert_dtype"]."""
    H, E, F, V = m["hidden"], m["experts"], m["ff"], m["vocab"]
    qd, kvd, xdt = m["heads"] * m["head_dim"], m["kv_heads"] * m["head_dim"], m["expert_dtype"]
    t = [("token_embd.weight", [H, V], wdt, EMBD_SCALE)]
    for i in range(m["layers"]):
        b = "blk.%d." % i
        t.append((b + "attn_norm.weight", [H], "f32", "ones"))
        for n, rows, cols in (("attn_q", qd, H), ("attn_k", kvd, H), ("attn_v", kvd, H), ("attn_output", H, qd)):
            t.append((b + n + ".weight", [cols, rows], wdt, 0.03))
            t.append((b + n + ".bias", [rows], "f32", 0.03))
        t.append((b + "attn_sinks.weight", [m["heads"]], "f32", 1.0))
        t.append((b + "post_attention_norm.weight", [H], "f32", "ones"))
        t.append((b + "ffn_gate_inp.weight", [H, E], "f32", 0.05))
        t.append((b + "ffn_gate_inp.bias", [E], "f32", 0.05))
        t.append((b + "ffn_gate_exps.weight", [H, F, E], xdt, 0.03))
        t.append((b + "ffn_up_exps.weight", [H, F, E], xdt, 0.03))
        t.append((b + "ffn_down_exps.weight", [F, H, E], xdt, 0.03))
        t.append((b + "ffn_gate_exps.bias", [F, E], "f32", 0.03))
        t.append((b + "ffn_up_exps.bias", [F, E], "f32", 0.03))
        t.append((b + "ffn_down_exps.bias", [H, E], "f32", 0.03))
    t.append(("output_norm.weight", [H], "f32", "ones"))
    t.append(("output.weight", [H, V], wdt, 0.03))
    return t


def layout(m, wdt):
    """List of (name, dims (ne0 first), dtype, init) — init: 'ones' or a uniform scale."""
    if "mla" in m:
        return layout_mla(m, wdt)
    if "gpt_oss" in m:
        return layout_gpt_oss(m, wdt)
    H, E, F, V = m["hidden"], m["experts"], m["ff"], m["vocab"]
    qd, kvd = m["heads"] * m["head_dim"], m["kv_heads"] * m["head_dim"]
    t = [("token_embd.weight", [H, V], wdt, EMBD_SCALE)]
    for i in range(m["layers"]):
        b = "blk.%d." % i
        t.append((b + "attn_norm.weight", [H], "f32", "ones"))
        t.append((b + "attn_q.weight", [H, qd], wdt, 0.03))
        t.append((b + "attn_k.weight", [H, kvd], wdt, 0.03))
        t.append((b + "attn_v.weight", [H, kvd], wdt, 0.03))
        t.append((b + "attn_output.weight", [qd, H], wdt, 0.03))
        if m["qk_norm"] == "full":
            t.append((b + "attn_q_norm.weight", [qd], "f32", "ones"))
            t.append((b + "attn_k_norm.weight", [kvd], "f32", "ones"))
        elif m["qk_norm"] == "head":
            t.append((b + "attn_q_norm.weight", [m["head_dim"]], "f32", "ones"))
            t.append((b + "attn_k_norm.weight", [m["head_dim"]], "f32", "ones"))
        t.append((b + "ffn_norm.weight", [H], "f32", "ones"))
        t.append((b + "ffn_gate_inp.weight", [H, E], "f32", 0.05))
        t.append((b + "ffn_gate_exps.weight", [H, F, E], wdt, 0.03))
        t.append((b + "ffn_up_exps.weight", [H, F, E], wdt, 0.03))
        t.append((b + "ffn_down_exps.weight", [F, H, E], wdt, 0.03))
    t.append(("output_norm.weight", [H], "f32", "ones"))
    t.append(("output.weight", [H, V], wdt, 0.03))
    return t


def metadata(m, wdt, name):
    a = m["arch"]
    toks, scores, types = vocab(m["vocab"])
    ftype = {"f16": 1, "q4_0": 2, "q8_0": 7, "q4_k": 15}[wdt]  # LLAMA_FTYPE_MOSTLY_*
    if m.get("expert_dtype") == "mxfp4":
        ftype = 38  # LLAMA_FTYPE_MOSTLY_MXFP4_MOE
    kv = [
        ("general.architecture", T_STR, a),
        ("general.name", T_STR, name),
        ("general.file_type", T_U32, ftype),
        ("general.alignment", T_U32, ALIGN),
        (a + ".context_length", T_U32, m["ctx"]),
        (a + ".embedding_length", T_U32, m["hidden"]),
        (a + ".block_count", T_U32, m["layers"]),
        (a + ".feed_forward_length", T_U32, m["ff"]),
        (a + ".attention.head_count", T_U32, m["heads"]),
        (a + ".attention.head_count_kv", T_U32, m["kv_heads"]),
        (a + ".attention.key_length", T_U32, m["head_dim"]),
        (a + ".attention.value_length", T_U32, m["head_dim"]),
        (a + ".attention.layer_norm_rms_epsilon", T_F32, m["eps"]),
        (a + ".rope.freq_base", T_F32, m["rope_base"]),
        (a + ".rope.dimension_count", T_U32, m["head_dim"]),
        (a + ".expert_count", T_U32, m["experts"]),
        (a + ".expert_used_count", T_U32, m["top_k"]),
        (a + ".vocab_size", T_U32, m["vocab"]),
    ]
    if m["expert_ff_key"]:
        kv.append((a + ".expert_feed_forward_length", T_U32, m["ff"]))
    if "mla" in m:
        A = m["mla"]
        kv = [x for x in kv if x[0] not in (a + ".attention.value_length", a + ".rope.dimension_count",
                                            a + ".feed_forward_length")]
        kv += [(a + ".attention.value_length", T_U32, A["v"]), (a + ".rope.dimension_count", T_U32, A["rope"]),
               (a + ".attention.kv_lora_rank", T_U32, A["kv_lora_rank"]),
               (a + ".feed_forward_length", T_U32, m["dense_ff"]),
               (a + ".leading_dense_block_count", T_U32, m["first_dense"]),
               (a + ".expert_shared_count", T_U32, m["shared"]), (a + ".expert_weights_scale", T_F32, 1.0),
               (a + ".expert_weights_norm", T_BOOL, False), (a + ".expert_gating_func", T_U32, 1)]
    if "gpt_oss" in m:
        G = m["gpt_oss"]
        kv += [(a + ".attention.sliding_window", T_U32, G["window"]), (a + ".rope.scaling.type", T_STR, "yarn"),
               (a + ".rope.scaling.factor", T_F32, G["yarn_factor"]),
               (a + ".rope.scaling.original_context_length", T_U32, G["yarn_orig"])]
    kv += [
        ("tokenizer.ggml.model", T_STR, "llama"),
        ("tokenizer.ggml.tokens", T_ARR, (T_STR, toks)),
        ("tokenizer.ggml.scores", T_ARR, (T_F32, scores)),
        ("tokenizer.ggml.token_type", T_ARR, (T_I32, types)),
        ("tokenizer.ggml.bos_token_id", T_U32, 1),
        ("tokenizer.ggml.eos_token_id", T_U32, 2),
        ("tokenizer.ggml.unknown_token_id", T_U32, 0),
        ("tokenizer.ggml.add_bos_token", T_BOOL, True),
        ("tokenizer.ggml.add_eos_token", T_BOOL, False),
    ]
    return kv


def nbytes(dims, dt):
    _, bs, bb = DTYPES[dt]
    n = 1
    for d in dims:
        n *= d
    if dims[0] % bs:
        raise SystemExit("gen_gguf: row of %d values is not a multiple of the %s block (%d)" % (dims[0], dt, bs))
    return n // bs * bb, n


def align(x):
    return (x + ALIGN - 1) // ALIGN * ALIGN


def write(path, m, wdt, name, seed):
    tensors = layout(m, wdt)
    kv = metadata(m, wdt, name)
    infos, offsets, off = [], [], 0
    for tname, dims, dt, _ in tensors:
        nb, _ = nbytes(dims, dt)
        offsets.append(off)
        infos.append(enc_str(tname) + struct.pack("<I", len(dims)) + struct.pack("<%dQ" % len(dims), *dims)
                     + struct.pack("<IQ", DTYPES[dt][0], off))
        off = align(off + nb)
    total = off
    rng = np.random.default_rng(seed)
    pool = BlockPool(rng)
    tmp = path + ".part"
    t0 = time.time()
    with open(tmp, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv)))
        for k, t, v in kv:
            f.write(enc_kv(k, t, v))
        for b in infos:
            f.write(b)
        f.write(b"\0" * (align(f.tell()) - f.tell()))
        base = f.tell()
        for (tname, dims, dt, init), o in zip(tensors, offsets):
            assert f.tell() == base + o, tname
            nb, n = nbytes(dims, dt)
            if init == "ones":
                f.write(np.ones(n, dtype="<f4").tobytes())
            else:
                w = 0
                small = n <= BlockPool.POOL_ELEMS // 4 or dt == "f32"
                gen = fresh_chunks(rng, dt, n, init) if small else pool.chunks(dt, n, init)
                for c in gen:
                    f.write(c)
                    w += len(c)
                assert w == nb, tname
            f.write(b"\0" * (align(f.tell()) - f.tell()))
        assert f.tell() == base + total
    os.replace(tmp, path)
    return base + total, time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=sorted(MODELS))
    ap.add_argument("--dtype", choices=["q4_0", "q8_0", "q4_k", "f16"], default="q4_0",
                    help="weight type (gptoss20b: of the dense tensors; its experts are MXFP4)")
    ap.add_argument("--layers", type=int, help="number of layers (default: the model's bench cut)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("-o", "--output", help="output file (default %s/<model>-L<layers>-<dtype>.gguf)" % OUT_DIR)
    ap.add_argument("--force", action="store_true", help="overwrite an existing file")
    ap.add_argument("--list", action="store_true", help="print the models and their sizes")
    a = ap.parse_args()
    if a.list or not a.model:
        for k, m in MODELS.items():
            for dt in ("q4_0", "q8_0", "q4_k"):
                if any(d[0] % DTYPES[t][1] for _, d, t, _ in layout(m, dt)):
                    continue  # rows this block size does not divide (DeepSeek's dense ff with q4_k)
                tot = sum(nbytes(d, t)[0] for _, d, t, _ in layout(m, dt))
                print("%-9s %-5s layers %2d  %.2f GiB" % (k, dt, m["layers"], tot / 2**30))
        return 0
    m = dict(MODELS[a.model])
    if a.layers:
        if a.layers < 1:
            raise SystemExit("gen_gguf: --layers must be >= 1")
        m["layers"] = a.layers
    path = a.output or os.path.join(OUT_DIR, "%s-L%d-%s.gguf" % (a.model, m["layers"], a.dtype))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if os.path.exists(path) and not a.force:
        print("%s exists (use --force to rewrite)" % path)
        return 0
    name = "%s-random-%dL-%s" % (a.model, m["layers"], a.dtype)
    size, secs = write(path, m, a.dtype, name, a.seed)
    print("%s: %.2f GiB in %.0f s" % (path, size / 2**30, secs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
