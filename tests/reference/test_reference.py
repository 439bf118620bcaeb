#!/usr/bin/python3
"""Self-tests of the numpy reference for what the llama.cpp fixtures do not cover
(run by tests/integration/reference_selfcheck.sh; a few seconds).

  - safetensors round trip (f32/f16/bf16) and sharded == single-file loading
  - bf16 / f16 rounding: nearest-even
  - every gen_model.py family loads, runs, is causal (prefix logits == logits of the
    prefix run alone) and its greedy ids are the argmax of the teacher-forced logits
  - DeepSeek interleaved RoPE == HF's de-interleave + rotate_half, for q.k scores
  - GraniteMoe router (softmax of the top-k logits) == renormalised softmax top-k
  - DeepSeek-V3 noaux_tc routing == a direct per-token loop transcription of
    DeepseekV3TopkRouter (masked_fill 0.0, topk(2).sum group scores)
  - rounding policy: rmsnorm / exp / products are the float64 values rounded once
  - mixed storage (--weights-dtype q8_0 --expert-weights-dtype q4_0): per-tensor dtypes,
    and gen_model.py --margin-dtypes q8_0+q4_0 really protects that variant's routing
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hf_ref  # noqa: E402
import quant  # noqa: E402
import safetensors_np  # noqa: E402

FAILS = []


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
        print("FAIL", msg)


def test_safetensors(tmp):
    rng = np.random.default_rng(0)
    t = {"a": rng.standard_normal((3, 5)).astype(np.float32), "b": rng.standard_normal(7).astype(np.float32)}
    for dt in ("f32", "f16", "bf16"):
        p = os.path.join(tmp, f"x-{dt}.safetensors")
        safetensors_np.save(p, t, dt)
        back = safetensors_np.load(p)
        for k in t:
            exp = {"f32": t[k], "f16": t[k].astype(np.float16).astype(np.float32),
                   "bf16": safetensors_np.round_bf16(t[k])}[dt]
            check(np.array_equal(back[k], exp) and back[k].shape == t[k].shape, f"safetensors {dt} round trip {k}")
    # bf16 nearest-even: 1 + 2^-8 is a tie between 1 and 1 + 2^-7 -> 1 (even)
    x = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8)], dtype=np.float32)
    check(list(safetensors_np.round_bf16(x)) == [1.0, 1 + 2 ** -6, -1.0], "bf16 round to nearest even")


def gen(tmp, family, extra=()):
    out = os.path.join(tmp, family + "-".join(extra).replace("-", ""))
    cmd = [sys.executable, os.path.join(HERE, "gen_model.py"), "--family", family, "--out", out,
           "--n-tokens", "12", "--vocab", "64", "--hidden", "64", "--ff", "32", "--seed", "3"] + list(extra)
    r = subprocess.run(cmd, capture_output=True, text=True)
    check(r.returncode == 0, f"gen_model {family} {extra}: {r.stderr.strip()[-300:]}")
    return out


def test_families(tmp):
    cases = [("llama", ["--tie", "1"]), ("mixtral", []), ("qwen2_moe", ["--mlp-only-layers", "1"]),
             ("qwen3_moe", ["--head-dim", "32", "--sparse-step", "2", "--layers", "3"]), ("olmoe", []),
             ("deepseek_v2", ["--layers", "3", "--n-group", "2", "--topk-group", "1", "--yarn", "4"]),
             ("deepseek_v3", ["--layers", "3", "--n-group", "4", "--topk-group", "2", "--q-lora-rank", "32",
                              "--yarn", "4", "--shared-experts", "2"]),
             ("granitemoe", []), ("mixtral", ["--dtype", "bf16", "--shards", "3"])]
    for fam, extra in cases:
        d = gen(tmp, fam, extra)
        if not os.path.exists(os.path.join(d, "config.json")):
            continue
        m = hf_ref.load_model(d)
        toks = hf_ref.parse_tokens(open(os.path.join(d, "tokens.txt")).read())
        full = hf_ref.forward(m, toks)
        check(full.shape == (len(toks), 64) and np.isfinite(full).all(), f"{fam}: logits shape / finite")
        pre = hf_ref.forward(m, toks[:5])
        check(np.allclose(pre, full[:5], rtol=0, atol=1e-5 * np.abs(full).max()), f"{fam} {extra}: not causal")
        g = hf_ref.greedy(m, toks, 3)
        tf = hf_ref.forward(m, toks + g)
        check([int(np.argmax(tf[len(toks) - 1 + i])) for i in range(3)] == g, f"{fam}: greedy != argmax")
        if "--shards" in extra:
            check(os.path.exists(os.path.join(d, "model.safetensors.index.json"))
                  and len([f for f in os.listdir(d) if f.endswith(".safetensors")]) == 3, "shards written")


def test_rope_interleave():
    rng = np.random.default_rng(1)
    n, d = 6, 16
    q, k = rng.standard_normal((n, 2, d)).astype(np.float32), rng.standard_normal((n, 1, d)).astype(np.float32)
    inv, _ = hf_ref.rope_params({"rope_theta": 10000.0}, d, n)
    cos, sin = hf_ref.rope_cos_sin(inv, n, 1.0)
    a = np.einsum("ihd,jd->hij", hf_ref.rope_interleaved(q, cos, sin), hf_ref.rope_interleaved(k, cos, sin)[:, 0])

    def hf_way(x):  # view(d/2, 2).transpose(-1, -2).reshape(d), then rotate_half
        x = x.reshape(*x.shape[:-1], d // 2, 2).swapaxes(-1, -2).reshape(x.shape)
        return hf_ref.rope_half(x, cos, sin)
    b = np.einsum("ihd,jd->hij", hf_way(q), hf_way(k)[:, 0])
    check(np.allclose(a, b, atol=1e-5), "interleaved rope != HF de-interleave + rotate_half")


def test_granite_router():
    rng = np.random.default_rng(2)
    lg = rng.standard_normal((10, 8)).astype(np.float32)
    i1, w1, _ = hf_ref.route_granite(lg, 3)
    i2, w2, _ = hf_ref.route_softmax_topk(lg, 3, True)
    check(np.array_equal(i1, i2) and np.allclose(w1, w2, atol=1e-6), "granite router != renormalised top-k")


def test_v3_router():
    rng = np.random.default_rng(3)
    E, ng, tg, k, n = 16, 4, 2, 4, 20
    cfg = {"n_routed_experts": E, "num_experts_per_tok": k, "n_group": ng, "topk_group": tg,
           "norm_topk_prob": True, "routed_scaling_factor": 2.5}
    bias = (0.1 * rng.standard_normal(E)).astype(np.float32)
    m = hf_ref.Model({"model_type": "deepseek_v3", **cfg}, {"model.layers.0.mlp.gate.e_score_correction_bias": bias})
    logits = rng.standard_normal((n, E)).astype(np.float32)
    idx, w, _ = hf_ref.route_deepseek(m, logits, 0)
    for t in range(n):
        s = 1 / (1 + np.exp(-logits[t].astype(np.float64)))
        c = s + bias
        gs = [sorted(c[g * 4:(g + 1) * 4])[-2:] for g in range(ng)]
        gsum = [a + b for a, b in gs]
        keep = sorted(range(ng), key=lambda g: -gsum[g])[:tg]
        cm = [c[e] if e // 4 in keep else 0.0 for e in range(E)]
        sel = sorted(range(E), key=lambda e: -cm[e])[:k]
        ww = np.array([s[e] for e in sel])
        ww = ww / (ww.sum() + 1e-20) * 2.5
        check(sorted(sel) == sorted(idx[t].tolist()), f"v3 routing token {t}: {sorted(sel)} vs {sorted(idx[t])}")
        order = np.argsort(idx[t])
        check(np.allclose(np.array(ww)[np.argsort(sel)], w[t][order], atol=1e-5), f"v3 weights token {t}")


def test_rounding():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((50, 128)).astype(np.float32)
    w = (1 + 0.1 * rng.standard_normal(128)).astype(np.float32)
    x64 = x.astype(np.float64)
    s = (1 / np.sqrt(np.mean(x64 * x64, axis=1, keepdims=True) + 1e-5)).astype(np.float32)
    check(np.array_equal(hf_ref.rmsnorm(x, w, 1e-5), (w * (x * s)).astype(np.float32)), "rmsnorm scale not rounded once")
    check(np.array_equal(hf_ref.exp32(x), np.exp(x64).astype(np.float32)), "exp32 not the rounded float64 exp")
    a, b = x[:, :64], x[:, 64:].T
    check(np.array_equal(hf_ref.matmul(a, b), (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)),
          "matmul not accumulated in float64")


def test_mixed_storage(tmp):
    d = gen(tmp, "mixtral", ["--margin-dtypes", "q8_0+q4_0", "--layers", "2"])
    if not os.path.exists(os.path.join(d, "config.json")):
        return
    m = hf_ref.load_model(d, "q8_0", "q4_0", "q8_0")
    qt = m.qtypes
    p = "model.layers.0."
    check(qt.get(p + "block_sparse_moe.experts.3.w2.weight") == "q4_0", "mixed: expert tensor not q4_0")
    check(qt.get(p + "self_attn.o_proj.weight") == "q8_0" and qt.get("lm_head.weight") == "q8_0",
          "mixed: dense tensors not q8_0")
    check(p + "block_sparse_moe.gate.weight" not in qt and p + "input_layernorm.weight" not in qt,
          "mixed: router / norm must stay f32")
    raw = safetensors_np.load_dir(d)
    e = p + "block_sparse_moe.experts.3.w2.weight"
    check(np.array_equal(m.t[e], quant.qdq(raw[e], "q4_0")), "mixed: expert weights not the q4_0 round trip")
    toks = hf_ref.parse_tokens(open(os.path.join(d, "tokens.txt")).read())
    trace = {}
    hf_ref.forward(m, toks, trace)
    worst = min(float(np.min(t["margin"])) for t in trace.values())
    check(worst >= 1e-3, f"mixed: routing margin {worst:.3g} < 1e-3 despite --margin-dtypes q8_0+q4_0")
    r = subprocess.run([sys.executable, os.path.join(HERE, "gen_model.py"), "--family", "mixtral", "--out",
                        os.path.join(tmp, "bad"), "--margin-dtypes", "q8_0+q5_0"], capture_output=True, text=True)
    check(r.returncode != 0 and "q5_0" in r.stderr, "gen_model accepted margin dtype q8_0+q5_0")


def main():
    tmp = tempfile.mkdtemp(prefix="colibri-ref-")
    try:
        test_safetensors(tmp)
        test_rope_interleave()
        test_granite_router()
        test_v3_router()
        test_rounding()
        test_families(tmp)
        test_mixed_storage(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"test_reference: {'FAILED ' + str(len(FAILS)) if FAILS else 'OK'}")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
