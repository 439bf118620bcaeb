#!/usr/bin/python3
"""gen_mixtral_gguf.py — writes a random-weight Mixtral-shaped q4_0 GGUF, streaming.

  /usr/bin/python3 tools/gen_mixtral_gguf.py /tmp/mixtral-4l-q4_0.gguf            # ~3.4 GB
  /usr/bin/python3 tools/gen_mixtral_gguf.py --small /tmp/mixtral-small.gguf      # ~30 MB

Default dimensions are Mixtral-8x7B's (n_embd 4096, n_ff 14336, 32 heads / 8 KV heads,
vocab 32000, 8 experts, top-2) with only 4 layers: 8 experts of ~99 MB per layer. The file
uses llama.cpp's layout (arch "llama", stacked ffn_*_exps tensors, an SPM vocabulary with
byte tokens) so both Colibri and llama.cpp read it. Matrices are q4_0 blocks of random
zero-mean nibbles with one scale per tensor (std about 1/sqrt(cols)); norms are 1, routers f32
Gaussian. Random weights route near-uniformly: the worst case for an expert cache.
Written block by block (never more than ~64 MB in memory). Output belongs under /tmp,
never in the repository.
"""
import argparse
import os
import struct
import sys

import numpy as np

GGML_F32, GGML_Q4_0 = 0, 2
ALIGN = 32


def kv_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


class KV:
    def __init__(self):
        self.items = []

    def add(self, key, vtype, payload):
        self.items.append(kv_str(key) + struct.pack("<I", vtype) + payload)

    def u32(self, k, v):
        self.add(k, 4, struct.pack("<I", v))

    def i32(self, k, v):
        self.add(k, 5, struct.pack("<i", v))

    def f32(self, k, v):
        self.add(k, 6, struct.pack("<f", v))

    def bool(self, k, v):
        self.add(k, 7, struct.pack("<?", v))

    def str(self, k, v):
        self.add(k, 8, kv_str(v))

    def arr(self, k, etype, values):
        if etype == 8:
            body = b"".join(kv_str(v) for v in values)
        else:
            fmt = {5: "<i", 6: "<f"}[etype]
            body = np.asarray(values, dtype=fmt).tobytes()
        self.add(k, 9, struct.pack("<IQ", etype, len(values)) + body)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--small", action="store_true", help="test-sized model (n_embd 512, n_ff 1024, vocab 512)")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args(argv)
    if a.small:
        E, FF, H, HKV, V = 512, 1024, 8, 4, 512
    else:
        E, FF, H, HKV, V = 4096, 14336, 32, 8, 32000
    L, NE, K = a.layers, 8, 2
    hd = E // H
    rng = np.random.default_rng(a.seed)

    kv = KV()
    kv.str("general.architecture", "llama")
    kv.str("general.name", "mixtral-random-%dl" % L)
    kv.u32("llama.block_count", L)
    kv.u32("llama.context_length", 32768)
    kv.u32("llama.embedding_length", E)
    kv.u32("llama.feed_forward_length", FF)
    kv.u32("llama.attention.head_count", H)
    kv.u32("llama.attention.head_count_kv", HKV)
    kv.f32("llama.rope.freq_base", 1e6)
    kv.f32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    kv.u32("llama.expert_count", NE)
    kv.u32("llama.expert_used_count", K)
    kv.u32("llama.vocab_size", V)
    kv.u32("llama.rope.dimension_count", hd)
    kv.u32("general.file_type", 2)
    kv.u32("general.quantization_version", 2)
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % i for i in range(256)]
    toks += ["\u2581t%d" % i for i in range(V - len(toks))]
    ttype = [2, 3, 3] + [6] * 256 + [1] * (V - 259)
    kv.str("tokenizer.ggml.model", "llama")
    kv.arr("tokenizer.ggml.tokens", 8, toks)
    kv.arr("tokenizer.ggml.scores", 6, [0.0] * 259 + [-float(i) for i in range(V - 259)])
    kv.arr("tokenizer.ggml.token_type", 5, ttype)
    kv.u32("tokenizer.ggml.bos_token_id", 1)
    kv.u32("tokenizer.ggml.eos_token_id", 2)
    kv.u32("tokenizer.ggml.unknown_token_id", 0)
    kv.bool("tokenizer.ggml.add_bos_token", True)
    kv.bool("tokenizer.ggml.add_eos_token", False)

    # (name, dtype, ne (ggml order), kind)
    tensors = [("token_embd.weight", GGML_Q4_0, [E, V], "mat"), ("output_norm.weight", GGML_F32, [E], "one"),
               ("output.weight", GGML_Q4_0, [E, V], "mat")]
    for l in range(L):
        p = "blk.%d." % l
        tensors += [(p + "attn_norm.weight", GGML_F32, [E], "one"),
                    (p + "attn_q.weight", GGML_Q4_0, [E, E], "mat"),
                    (p + "attn_k.weight", GGML_Q4_0, [E, HKV * hd], "mat"),
                    (p + "attn_v.weight", GGML_Q4_0, [E, HKV * hd], "mat"),
                    (p + "attn_output.weight", GGML_Q4_0, [E, E], "mat"),
                    (p + "ffn_norm.weight", GGML_F32, [E], "one"),
                    (p + "ffn_gate_inp.weight", GGML_F32, [E, NE], "router"),
                    (p + "ffn_gate_exps.weight", GGML_Q4_0, [E, FF, NE], "mat"),
                    (p + "ffn_down_exps.weight", GGML_Q4_0, [FF, E, NE], "mat"),
                    (p + "ffn_up_exps.weight", GGML_Q4_0, [E, FF, NE], "mat")]

    def nbytes(dt, ne):
        n = int(np.prod(ne))
        return n * 4 if dt == GGML_F32 else n // 32 * 18

    info, off = [], 0
    for name, dt, ne, _ in tensors:
        info.append(kv_str(name) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne) +
                    struct.pack("<IQ", dt, off))
        off += (nbytes(dt, ne) + ALIGN - 1) // ALIGN * ALIGN
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv.items)) + b"".join(kv.items) + b"".join(info)
    pad = (-len(head)) % ALIGN
    total = len(head) + pad + off
    with open(a.out, "wb") as f:
        f.write(head + b"\0" * pad)
        for name, dt, ne, kind in tensors:
            n = nbytes(dt, ne)
            if kind == "one":
                f.write(np.ones(ne[0], dtype="<f4").tobytes())
            elif kind == "router":
                f.write((rng.standard_normal(int(np.prod(ne))) / np.sqrt(ne[0])).astype("<f4").tobytes())
            else:
                d = np.float16(1.0 / (4.32 * np.sqrt(ne[0])))  # std of q - 8 for q in 1..15
                nblk, step = n // 18, 1 << 22
                scale = np.frombuffer(d.tobytes(), dtype=np.uint8)
                for b0 in range(0, nblk, step):
                    m = min(step, nblk - b0)
                    blk = np.empty((m, 18), dtype=np.uint8)
                    blk[:, 0:2] = scale
                    # nibbles uniform in 1..15: q - 8 has mean 0 (a common offset in every
                    # row would make all hidden states alike, and the routing constant)
                    lo = rng.integers(1, 16, size=(m, 16), dtype=np.uint8)
                    hi = rng.integers(1, 16, size=(m, 16), dtype=np.uint8)
                    blk[:, 2:] = lo | (hi << 4)
                    f.write(blk.tobytes())
            f.write(b"\0" * ((-n) % ALIGN))
        assert f.tell() == total, (f.tell(), total)
    per_exp = 3 * E * FF // 32 * 18
    print("%s: %.2f GB, %d layers x %d experts of %.1f MB" % (a.out, total / 1e9, L, NE, per_exp / 1e6),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
