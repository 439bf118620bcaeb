#!/usr/bin/python3
"""Checks quant.py against llama-quantize: every Q8_0 / Q4_0 / F32 tensor of the
mixtral fixture GGUFs (model-q8_0.gguf, model-q4_0.gguf) must equal, byte for byte,
quant.py's blocks of the corresponding HF tensor (renamed / permuted / expert-stacked
the way convert_hf_to_gguf.py does for architecture `llama`).

  check_quant_fixtures.py FIXTURE_DIR      (e.g. tests/fixtures/mixtral)
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_np  # noqa: E402
import quant  # noqa: E402
import safetensors_np  # noqa: E402


def permute(w, n_head):
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_for(name, hf, cfg):
    H, Hk = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    E = cfg["num_local_experts"]
    if name == "token_embd.weight":
        return hf["model.embed_tokens.weight"]
    if name == "output.weight":
        return hf["lm_head.weight"]
    if name == "output_norm.weight":
        return hf["model.norm.weight"]
    _, L, rest = name.split(".", 2)
    p = f"model.layers.{L}."
    simple = {"attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
              "attn_norm.weight": "input_layernorm.weight", "ffn_norm.weight": "post_attention_layernorm.weight",
              "ffn_gate_inp.weight": "block_sparse_moe.gate.weight"}
    if rest in simple:
        return hf[p + simple[rest]]
    if rest == "attn_q.weight":
        return permute(hf[p + "self_attn.q_proj.weight"], H)
    if rest == "attn_k.weight":
        return permute(hf[p + "self_attn.k_proj.weight"], Hk)
    w = {"ffn_gate_exps.weight": "w1", "ffn_up_exps.weight": "w3", "ffn_down_exps.weight": "w2"}[rest]
    return np.stack([hf[f"{p}block_sparse_moe.experts.{e}.{w}.weight"] for e in range(E)])


def main():
    fx = sys.argv[1]
    cfg = json.load(open(os.path.join(fx, "hf", "config.json")))
    hf = safetensors_np.load_dir(os.path.join(fx, "hf"))
    fails = 0
    counts = {}
    for variant in ("q8_0", "q4_0"):
        path = os.path.join(fx, f"model-{variant}.gguf")
        if not os.path.exists(path):
            continue
        _, tensors = gguf_np.read(path)
        for name, t in tensors.items():
            ref = hf_for(name, hf, cfg).astype(np.float32)
            if t["type"] == gguf_np.GGML_Q8_0:
                d, q = quant.quantize_q8_0(ref)
                gd, gq = gguf_np.blocks_q8_0(t["data"])
                kind = "Q8_0"
            elif t["type"] == gguf_np.GGML_Q4_0:
                d, q = quant.quantize_q4_0(ref)
                gd, gq = gguf_np.blocks_q4_0(t["data"])
                kind = "Q4_0"
            elif t["type"] == gguf_np.GGML_F32:
                ok = np.array_equal(gguf_np.tensor_f32(t).reshape(ref.shape), ref)
                counts["F32"] = counts.get("F32", 0) + 1
                if not ok:
                    print(f"FAIL {variant} {name}: F32 tensor differs from the HF tensor")
                    fails += 1
                continue
            else:
                continue  # K-quants: not produced by colibri
            counts[kind] = counts.get(kind, 0) + 1
            nd = int(np.sum(d.view(np.uint16) != gd.view(np.uint16)))
            nq = int(np.sum(q != gq))
            if nd or nq:
                print(f"FAIL {variant} {name}: {kind} differs from llama-quantize: {nd} scales, {nq} quants")
                fails += 1
            # the dequantised values from quant.qdq must equal the GGUF's dequantised values
            deq = quant.qdq(ref, kind.lower())
            if not np.array_equal(deq.reshape(-1), gguf_np.tensor_f32(t).reshape(-1)):
                print(f"FAIL {variant} {name}: qdq() differs from the dequantised GGUF tensor")
                fails += 1
    print(f"quant.py vs llama-quantize ({fx}): tensors checked {counts}, failures {fails}")
    return 1 if fails or not counts.get("Q8_0") or not counts.get("Q4_0") else 0


if __name__ == "__main__":
    sys.exit(main())
