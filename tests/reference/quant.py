"""numpy Q8_0 / Q4_0 (GGUF block layouts, 32 values a block) quantize -> dequantize,
following the rules of ggml's reference quantizers, plus f16/bf16 rounding.

Q8_0 block: fp16 d, 32 x int8 q.   d = amax / 127, id = 1/d (0 if d == 0),
            q = roundf(x * id) (half away from zero); value = q * fp16(d).
Q4_0 block: fp16 d, 16 bytes of nibbles.  max = the element with the largest |x|
            (first one on ties, signed), d = max / -8, id = 1/d (0 if d == 0),
            q = min(15, (int8)(x * id + 8.5f)) (truncation toward zero);
            value = (q - 8) * fp16(d).
All intermediate arithmetic is float32 like the C code; d is rounded to fp16 (nearest
even) for storage and the dequantized value uses the rounded d.

Which tensors colibri quantizes (weights_policy): every tensor with >= 2 non-unit
dimensions, except norms and routers (mixtral/qwen/olmoe/deepseek `gate`, granite
`router.layer`, qwen2-moe `shared_expert_gate`); embeddings and lm_head included. The
row (last, "in_features") dimension is blocked; it must be a multiple of 32 (other
tensors are left in float32 and reported).
"""
import numpy as np

from safetensors_np import round_bf16

QK = 32


def _roundf(v):
    """C roundf on float32 values (half away from zero), computed exactly in float64."""
    v64 = v.astype(np.float64)
    return np.sign(v64) * np.floor(np.abs(v64) + 0.5)


def _blocks(x):
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.shape[-1] % QK != 0:
        raise ValueError(f"row length {x.shape[-1]} is not a multiple of {QK}")
    return x.reshape(-1, QK)


def quantize_q8_0(x):
    """Returns (d_fp16 [nb], q int8 [nb][32]) for a float32 array whose last dim % 32 == 0."""
    b = _blocks(x)
    amax = np.max(np.abs(b), axis=1)
    d = (amax / np.float32(127.0)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, np.float32(1.0) / np.where(d != 0, d, 1), 0).astype(np.float32)
    q = _roundf((b * idv[:, None]).astype(np.float32)).astype(np.int8)
    return d.astype(np.float16), q


def dequantize_q8_0(d16, q, shape):
    return (q.astype(np.float32) * d16.astype(np.float32)[:, None]).reshape(shape)


def quantize_q4_0(x):
    """Returns (d_fp16 [nb], q uint8 [nb][32] in 0..15, element order) ."""
    b = _blocks(x)
    idx = np.argmax(np.abs(b), axis=1)  # first maximal |x|, like the strict '<' scan
    mx = b[np.arange(b.shape[0]), idx]
    d = (mx / np.float32(-8.0)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, np.float32(1.0) / np.where(d != 0, d, 1), 0).astype(np.float32)
    v = ((b * idv[:, None]).astype(np.float32) + np.float32(8.5)).astype(np.float32)
    qi = np.trunc(v.astype(np.float64))
    qi = np.clip(qi, -128, 127)  # (int8_t) conversion; in range for |x*id| <= 8
    q = np.minimum(15, qi).astype(np.int32)
    if (q < 0).any():
        raise AssertionError("q4_0: negative nibble (not reachable for finite input)")
    return d.astype(np.float16), q.astype(np.uint8)


def dequantize_q4_0(d16, q, shape):
    return ((q.astype(np.float32) - np.float32(8.0)) * d16.astype(np.float32)[:, None]).reshape(shape)


def qdq(x, dtype):
    """Round-trips a float32 array through dtype: f32 (identity), f16, bf16, q8_0, q4_0."""
    x = np.asarray(x, dtype=np.float32)
    if dtype in (None, "f32"):
        return x
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "bf16":
        return round_bf16(x)
    if dtype == "q8_0":
        d, q = quantize_q8_0(x)
        return dequantize_q8_0(d, q, x.shape)
    if dtype == "q4_0":
        d, q = quantize_q4_0(x)
        return dequantize_q4_0(d, q, x.shape)
    raise ValueError(f"unknown dtype {dtype}")


def quantize_act_q8_0(x):
    """Activation rows -> (d float32 (fp16-rounded) [rows][nb], q int8 [rows][nb][32]),
    like ggml's quantize_row_q8_0 used for the activation side of q8_0/q4_0 dot products."""
    x = np.asarray(x, dtype=np.float32)
    rows = x.reshape(-1, x.shape[-1])
    d16, q = quantize_q8_0(rows)
    nb = rows.shape[1] // QK
    return d16.astype(np.float32).reshape(rows.shape[0], nb), q.reshape(rows.shape[0], nb, QK)


_ROUTER_SUFFIXES = (
    "block_sparse_moe.gate.weight",  # mixtral
    "mlp.gate.weight",  # qwen2/3-moe, olmoe, deepseek
    "router.layer.weight",  # granitemoe
    "shared_expert_gate.weight",  # qwen2-moe (a [1, hidden] gate, 1-D for GGUF)
)

_EXPERT_MARKERS = (".experts.", "input_linear.weight", "output_linear.weight")


def is_router(name):
    return name.endswith(_ROUTER_SUFFIXES)


def is_routed_expert(name):
    return any(m in name for m in _EXPERT_MARKERS) and "shared_expert" not in name


def quantizable(name, shape):
    """True for tensors colibri stores in the requested dtype (see module doc)."""
    if is_router(name):
        return False
    if "norm" in name or name.endswith(".bias") or "e_score_correction_bias" in name:
        return False
    return sum(1 for s in shape if s > 1) >= 2


def apply_weights_dtype(tensors, dtype, expert_dtype=None, log=None):
    """Returns a new dict with quantizable tensors round-tripped through dtype (routed
    expert tensors through expert_dtype if given)."""
    out = {}
    skipped = []
    for name, a in tensors.items():
        t = expert_dtype if (expert_dtype and is_routed_expert(name)) else dtype
        if t in (None, "f32") or not quantizable(name, a.shape):
            out[name] = a
            continue
        if t in ("q8_0", "q4_0") and a.shape[-1] % QK != 0:
            skipped.append(name)
            out[name] = a
            continue
        out[name] = qdq(a, t)
    if skipped and log:
        log(f"quant: left in f32 (row length not a multiple of 32): {', '.join(skipped[:4])}"
            + (" ..." if len(skipped) > 4 else ""))
    return out
