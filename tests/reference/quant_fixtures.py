#!/usr/bin/python3
"""llama-quantize fixtures (tests/fixtures/quant/README.md) against colibri convert.

  quant_fixtures.py blocks Q.gguf OUT.colibri
      every tensor of the llama-quantize output Q.gguf (each expert slice of a stacked
      ffn_*_exps tensor) must have the same type and the same bytes in OUT.colibri, which
      `colibri convert` wrote from the Hugging Face directory of the same weights. For GGUF
      architecture "llama" the rows of attn_q / attn_k are compared after the permutation
      convert_hf_to_gguf.py applies (colibri keeps the HF row order and rotates accordingly);
      a block depends on its row only, so the blocks must still be byte-identical.
  quant_fixtures.py types TYPES.json MODEL MIX OUT.colibri
      the type of every tensor of OUT.colibri must be the one llama-quantize chose for that
      model and mix (TYPES.json records them for every model and mix of the fixtures).
  quant_fixtures.py record TYPES.json MODEL MIX Q.gguf
      adds Q.gguf's tensor types to TYPES.json (used by tools/gen_quant_fixtures.sh).
Exit status 0 when everything matches; one line per difference otherwise.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_np  # noqa: E402

_STACKED = ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps")


def gguf_to_colibri_names(name, t):
    """[(colibri name, byte range of t['data'])] for one GGUF tensor."""
    parts = name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[2] in _STACKED and parts[3] == "weight":
        n_exp = t["ne"][2]
        sl = len(t["data"]) // n_exp
        return [(f"blk.{parts[1]}.{parts[2][:-5]}.{e}.weight", (e * sl, (e + 1) * sl)) for e in range(n_exp)]
    return [(name, (0, len(t["data"])))]


def permutation(rows, n_head):
    return np.arange(rows).reshape(n_head, 2, rows // n_head // 2).swapaxes(1, 2).reshape(-1)


def cmd_blocks(gguf_path, col_path):
    kv, gt = gguf_np.read(gguf_path)
    meta, ct = gguf_np.read_colibri(col_path)
    cfg = meta["config"]
    llama_arch = kv.get("general.architecture") == "llama"
    bad, n, nbytes, counts = [], 0, 0, {}
    for name, t in gt.items():
        tname = gguf_np.TYPE_NAMES.get(t["type"], f"type{t['type']}")
        for cname, (a, b) in gguf_to_colibri_names(name, t):
            c = ct.get(cname)
            n += 1
            if c is None:
                bad.append(f"{cname}: missing")
                continue
            if c["dtype"] != tname:
                bad.append(f"{cname}: {c['dtype']}, llama-quantize wrote {tname}")
                continue
            ref, got = t["data"][a:b], c["data"]
            if llama_arch and (name.endswith("attn_q.weight") or name.endswith("attn_k.weight")):
                rows = c["shape"][0]
                heads = cfg["n_head"] if name.endswith("attn_q.weight") else cfg["n_head_kv"]
                rb = len(got) // rows
                got = np.frombuffer(got, np.uint8).reshape(rows, rb)[permutation(rows, heads)].tobytes()
            if got != ref:
                rb = len(ref) // max(1, t["ne"][1] if len(t["ne"]) > 1 else 1)
                diff = next(i for i in range(len(ref)) if ref[i] != got[i])
                bad.append(f"{cname} ({tname}): bytes differ from llama-quantize's, first at byte {diff} "
                           f"(row {diff // rb if rb else 0})")
            counts[tname] = counts.get(tname, 0) + 1
            nbytes += len(ref)
    summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    print(f"blocks {os.path.basename(gguf_path)} vs {os.path.basename(col_path)}: {n} tensors ({summary}), "
          f"{nbytes} bytes, {len(bad)} differences")
    for b in bad[:20]:
        print("  DIFF", b)
    return 1 if bad else 0


def cmd_types(types_path, model, mix, col_path):
    want = json.load(open(types_path))[model][mix]
    meta, _ = gguf_np.read_colibri(col_path)
    got = {t["name"]: t["dtype"] for t in meta["tensors"]}
    bad = []
    for name, tname in want.items():
        if name.split(".")[2:3] and name.split(".")[2] in _STACKED:
            parts = name.split(".")
            names = [k for k in got if k.startswith(f"blk.{parts[1]}.{parts[2][:-5]}.")]
            if not names:
                bad.append(f"{name}: no expert tensors")
        else:
            names = [name]
        for k in names:
            if got.get(k) != tname:
                bad.append(f"{k}: {got.get(k)}, llama-quantize chose {tname}")
    print(f"types {model} {mix}: {len(want)} GGUF tensors, {len(bad)} differences")
    for b in bad[:20]:
        print("  DIFF", b)
    return 1 if bad else 0


def cmd_record(types_path, model, mix, gguf_path):
    data = json.load(open(types_path)) if os.path.exists(types_path) else {}
    _, gt = gguf_np.read(gguf_path)
    data.setdefault(model, {})[mix] = {k: gguf_np.TYPE_NAMES[v["type"]] for k, v in sorted(gt.items())}
    with open(types_path, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    return 0


def main(argv):
    if len(argv) == 3 and argv[0] == "blocks":
        return cmd_blocks(argv[1], argv[2])
    if len(argv) == 5 and argv[0] == "types":
        return cmd_types(*argv[1:])
    if len(argv) == 5 and argv[0] == "record":
        return cmd_record(*argv[1:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
