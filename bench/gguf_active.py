#!/usr/bin/python3
"""gguf_active.py — bytes a GGUF model reads per decoded token, from its header alone.

    /usr/bin/python3 bench/gguf_active.py MODEL.gguf [--json]

active bytes per token = every dense tensor's bytes (attention, norms, router, output head)
                       + k / n_expert of each stacked expert tensor (blk.N.ffn_*_exps)
                       + one row of the token embedding (the lookup reads a single row).
k and n_expert come from <arch>.expert_used_count / <arch>.expert_count.  Shared-expert
tensors (ffn_*_shexp) count as dense.  Only the header is read (tensor data is not touched).
"""
import json
import struct
import sys

# ggml type id -> (weights per block, bytes per block)
TYPES = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 9: (32, 36),
         10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 15: (256, 292),
         20: (32, 18), 23: (256, 136), 30: (1, 2), 39: (32, 17)}


class Reader:
    def __init__(self, f):
        self.f = f

    def take(self, n):
        b = self.f.read(n)
        if len(b) != n:
            raise SystemExit("gguf_active: truncated header")
        return b

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def s(self):
        n = self.u64()
        if n > 1 << 24:
            raise SystemExit("gguf_active: string of %d bytes" % n)
        return self.take(n).decode("utf-8", "replace")

    SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}

    def value(self, t):
        if t in self.SCALAR:
            fmt = self.SCALAR[t]
            return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]
        if t == 8:
            return self.s()
        if t == 9:
            et, n = self.u32(), self.u64()
            if et in self.SCALAR:  # skip numeric arrays without decoding them
                self.take(struct.calcsize(self.SCALAR[et]) * n)
                return None
            return [self.value(et) for _ in range(n)] if et != 8 else [self.s() for _ in range(n)]
        raise SystemExit("gguf_active: unknown metadata type %d" % t)


def analyse(path):
    with open(path, "rb") as f:
        r = Reader(f)
        if r.take(4) != b"GGUF":
            raise SystemExit("gguf_active: %s is not a GGUF file" % path)
        ver = r.u32()
        if ver not in (2, 3):
            raise SystemExit("gguf_active: GGUF version %d" % ver)
        n_t, n_kv = r.u64(), r.u64()
        kv = {}
        for _ in range(n_kv):
            k = r.s()
            kv[k] = r.value(r.u32())
        tensors = []
        for _ in range(n_t):
            name = r.s()
            nd = r.u32()
            dims = [r.u64() for _ in range(nd)]
            t = r.u32()
            r.u64()
            if t not in TYPES:
                raise SystemExit("gguf_active: tensor %s has unknown type %d" % (name, t))
            bs, bb = TYPES[t]
            n = 1
            for d in dims:
                n *= d
            tensors.append((name, dims, n // bs * bb))
    arch = kv.get("general.architecture", "")
    n_exp = kv.get(arch + ".expert_count", 0) or 0
    k = kv.get(arch + ".expert_used_count", 0) or 0
    total = dense = expert = embd_row = 0
    for name, dims, nb in tensors:
        total += nb
        if name.endswith("_exps.weight") and n_exp:
            expert += nb
        elif name == "token_embd.weight":
            embd_row = nb // dims[-1]
        else:
            dense += nb
    active = dense + (expert * k // n_exp if n_exp else 0) + embd_row
    return dict(model=path, arch=arch, n_expert=n_exp, n_expert_used=k, file_tensor_bytes=total,
                dense_bytes=dense, expert_bytes=expert, active_bytes_per_token=active)


def main():
    args = [a for a in sys.argv[1:] if a != "--json"]
    if len(args) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    a = analyse(args[0])
    if "--json" in sys.argv:
        print(json.dumps(a))
    else:
        for key, v in a.items():
            print("%-24s %s" % (key, v if not isinstance(v, int) or v < 1 << 20 else "%d (%.1f MiB)" % (v, v / 2**20)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
