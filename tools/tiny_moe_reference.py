#!/usr/bin/python3
"""Independent numpy forward pass of an exported HF Mixtral directory (no torch).

Reads only config.json, model.safetensors and tokenizer.json, so it checks that the export is
self-contained and gives the numbers an inference engine should reproduce:

    /usr/bin/python3 tools/tiny_moe_reference.py models/colibri-tiny-hf [--chunks N]

Prints the prompt ids, the top-5 next-token logits, a greedy continuation and the chunked
held-out perplexity over the first N chunks (definition in docs/MODEL.md).  With --all, all
chunks are scored and compared with eval.json.
"""

import argparse
import json
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe_tokenizer as bt  # noqa: E402


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        s, e = info["data_offsets"]
        if info["dtype"] != "F32" or 8 + n + e > len(data):
            raise ValueError(f"{name}: bad dtype or range")
        out[name] = np.frombuffer(data, "<f4", (e - s) // 4, 8 + n + s).reshape(info["shape"])
    return out


class Mixtral:
    def __init__(self, d):
        self.c = json.load(open(os.path.join(d, "config.json")))
        self.w = load_safetensors(os.path.join(d, "model.safetensors"))
        c = self.c
        self.hd = c["hidden_size"] // c["num_attention_heads"]
        inv = 1.0 / (c["rope_theta"] ** (np.arange(0, self.hd, 2, dtype=np.float64) / self.hd))
        ang = np.outer(np.arange(c["max_position_embeddings"]), inv)   # [P, hd/2]
        self.cos = np.cos(ang).astype(np.float32)
        self.sin = np.sin(ang).astype(np.float32)

    def rms(self, x, w):
        return x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True)
                           + self.c["rms_norm_eps"]).astype(np.float32) * w

    def rope(self, x):  # x [T, n, hd], rotate-half pairs (i, i + hd/2)
        T, h = x.shape[0], self.hd // 2
        cos, sin = self.cos[:T, None, :], self.sin[:T, None, :]
        a, b = x[..., :h], x[..., h:]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)

    def logits(self, ids):
        """ids: one sequence from position 0 -> logits [T, vocab] (float32)."""
        c, w = self.c, self.w
        T = len(ids)
        H, KV, hd = c["num_attention_heads"], c["num_key_value_heads"], self.hd
        x = w["model.embed_tokens.weight"][ids].astype(np.float32)             # [T, D]
        causal = np.triu(np.full((T, T), -np.inf, dtype=np.float32), 1)
        for L in range(c["num_hidden_layers"]):
            p = f"model.layers.{L}."
            h = self.rms(x, w[p + "input_layernorm.weight"])
            q = self.rope((h @ w[p + "self_attn.q_proj.weight"].T).reshape(T, H, hd))
            k = self.rope((h @ w[p + "self_attn.k_proj.weight"].T).reshape(T, KV, hd))
            v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(T, KV, hd)
            att_out = np.empty((T, H, hd), dtype=np.float32)
            for hh in range(H):
                kv = hh // (H // KV)
                s = q[:, hh] @ k[:, kv].T / math.sqrt(hd) + causal               # [T, T]
                s = np.exp(s - s.max(-1, keepdims=True))
                att_out[:, hh] = (s / s.sum(-1, keepdims=True)) @ v[:, kv]
            x = x + att_out.reshape(T, H * hd) @ w[p + "self_attn.o_proj.weight"].T
            h = self.rms(x, w[p + "post_attention_layernorm.weight"])
            r = h @ w[p + "block_sparse_moe.gate.weight"].T                        # [T, E]
            pr = np.exp(r - r.max(-1, keepdims=True))
            pr /= pr.sum(-1, keepdims=True)
            K = c["num_experts_per_tok"]
            top = np.argsort(-pr, axis=-1, kind="stable")[:, :K]                   # [T, K]
            tw = np.take_along_axis(pr, top, axis=-1)
            tw = tw / tw.sum(-1, keepdims=True)                                    # [T, K]
            y = np.zeros_like(x)
            for e in range(c["num_local_experts"]):
                rows, slot = np.nonzero(top == e)
                if rows.size == 0:
                    continue
                q_ = f"{p}block_sparse_moe.experts.{e}."
                g = h[rows] @ w[q_ + "w1.weight"].T                                # [n, ff]
                u = h[rows] @ w[q_ + "w3.weight"].T
                y[rows] += tw[rows, slot][:, None] * ((g / (1.0 + np.exp(-g)) * u)
                                                      @ w[q_ + "w2.weight"].T)
            x = x + y
        return self.rms(x, w["model.norm.weight"]) @ w["lm_head.weight"].T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--ctx", type=int, default=128)
    ap.add_argument("--chunks", type=int, default=4)
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--prompt", default="The jury said")
    args = ap.parse_args()
    d = args.model_dir
    tj = json.load(open(os.path.join(d, "tokenizer.json"), encoding="utf-8"))
    vocab = tj["model"]["vocab"]
    tok = bt.BPETokenizer([tuple(vocab[s] for s in m.split(" ")) for m in tj["model"]["merges"]])
    m = Mixtral(d)

    ids = tok.encode(args.prompt, bos=True)
    lg = m.logits(ids)[-1]
    top = np.argsort(-lg)[:5]
    print(f"prompt {args.prompt!r} ids {ids}")
    print("top-5 next:", [(int(t), tok.token_str(int(t)), round(float(lg[t]), 4)) for t in top])
    g = list(ids)
    for _ in range(16):
        g.append(int(np.argmax(m.logits(g)[-1])))
    print(f"greedy 16: {g[len(ids):]} {tok.decode(g[len(ids):])!r}")

    text = open(os.path.join(d, "heldout.txt"), encoding="utf-8").read()
    hid = tok.encode(text, bos=True)
    n_chunks = len(hid) // args.ctx
    use = n_chunks if args.all else min(args.chunks, n_chunks)
    nll = 0.0
    for k in range(use):
        ch = hid[k * args.ctx:(k + 1) * args.ctx]
        lg = m.logits(ch).astype(np.float64)[:-1]                                # [ctx-1, V]
        mx = lg.max(-1, keepdims=True)
        lse = (mx[:, 0] + np.log(np.exp(lg - mx).sum(-1)))
        nll += float((lse - lg[np.arange(args.ctx - 1), ch[1:]]).sum())
    ppl = math.exp(nll / (use * (args.ctx - 1)))
    print(f"held-out: {len(hid)} tokens, {n_chunks} chunks of {args.ctx}; "
          f"ppl over the first {use} chunks = {ppl:.4f}")
    ev_path = os.path.join(d, "eval.json")
    if args.all and os.path.exists(ev_path):
        ev = json.load(open(ev_path))
        print(f"eval.json heldout_ppl {ev['heldout_ppl']} (rel diff "
              f"{abs(ppl - ev['heldout_ppl']) / ev['heldout_ppl']:.2e})")


if __name__ == "__main__":
    main()
