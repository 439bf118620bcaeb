"""Tiny GGUF v2/v3 reader and v3 writer (metadata + raw tensor bytes) for cross-checks in
tests, plus a .colibri (docs/FORMAT.md) tensor reader. Returns raw block bytes;
dequantisation of Q8_0 / Q4_0 / Q5_0 / Q4_K / F32 / F16 is provided.

CLI (exit status 1 on a difference, figures printed):
  gguf_np.py diff A.gguf B.gguf [--prefix ARCH.] [--tensors]
        every metadata key starting with --prefix (default: general.architecture + ".")
        equal in type and value, and (--tensors) every tensor equal in name, type, ne, bytes
  gguf_np.py colibri-bytes X.gguf Y.colibri
        every GGUF tensor's bytes equal the .colibri tensor of the same name; a stacked
        blk.L.ffn_{gate,up,down}_exps.weight is compared expert slice by expert slice with
        blk.L.ffn_{gate,up,down}.E.weight; LongRoPE's rope_factors_short / _long.weight equal
        the halves of the .colibri config's rope_ext
"""
import json
import struct
import sys

import numpy as np

GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q5_0, GGML_Q8_0, GGML_Q4_K = 0, 1, 2, 6, 8, 12
_BLOCK = {GGML_F32: (1, 4), GGML_F16: (1, 2), GGML_Q4_0: (32, 18), GGML_Q8_0: (32, 34),
          14: (256, 210), 12: (256, 144), 13: (256, 176), 10: (256, 84), 11: (256, 110),
          3: (32, 20), 6: (32, 22), 7: (32, 24), 20: (32, 18), 23: (256, 136), 30: (1, 2), 39: (32, 17)}
# ggml type ids -> the dtype names of .colibri files
TYPE_NAMES = {0: "f32", 1: "f16", 2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 8: "q8_0", 10: "q2_k", 11: "q3_k",
              12: "q4_k", 13: "q5_k", 14: "q6_k", 20: "iq4_nl", 23: "iq4_xs", 30: "bf16", 39: "mxfp4"}
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class _R:
    def __init__(self, buf):
        self.b = buf
        self.o = 0

    def take(self, n):
        if self.o + n > len(self.b):
            raise ValueError("gguf: truncated")
        v = self.b[self.o:self.o + n]
        self.o += n
        return v

    def u(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def s(self):
        return self.take(self.u("<Q")).decode("utf-8")

    def val(self, t):
        if t in _SCALAR:
            return self.u(_SCALAR[t])
        if t == 8:
            return self.s()
        if t == 9:
            et, n = self.u("<I"), self.u("<Q")
            return [self.val(et) for _ in range(n)]
        raise ValueError(f"gguf: bad value type {t}")


def read(path):
    """-> (kv dict, {name: {"type", "ne", "data" (bytes)}})"""
    kv, _, out = read_typed(path)
    return kv, out


def read_typed(path):
    """-> (kv dict, {key: value type (array: (9, element type))}, tensors as read())"""
    buf = open(path, "rb").read()
    r = _R(buf)
    if r.take(4) != b"GGUF":
        raise ValueError(f"{path}: not GGUF")
    ver = r.u("<I")
    if ver not in (2, 3):
        raise ValueError(f"{path}: GGUF version {ver}")
    nt, nkv = r.u("<Q"), r.u("<Q")
    kv, types = {}, {}
    for _ in range(nkv):
        k = r.s()
        t = r.u("<I")
        if t == 9:
            o = r.o
            types[k] = (9, r.u("<I"))
            r.o = o
        else:
            types[k] = t
        kv[k] = r.val(t)
    infos = []
    for _ in range(nt):
        name = r.s()
        nd = r.u("<I")
        ne = [r.u("<Q") for _ in range(nd)]
        infos.append((name, ne, r.u("<I"), r.u("<Q")))
    align = kv.get("general.alignment", 32)
    start = (r.o + align - 1) // align * align
    out = {}
    for name, ne, t, off in infos:
        bs, ts = _BLOCK[t]
        nel = int(np.prod(ne))
        size = nel // bs * ts
        if start + off + size > len(buf):
            raise ValueError(f"{path}: tensor {name} out of bounds")
        out[name] = {"type": t, "ne": ne, "data": buf[start + off:start + off + size]}
    return kv, types, out


def blocks_q8_0(data):
    a = np.frombuffer(data, dtype=np.uint8).reshape(-1, 34)
    return a[:, :2].copy().view("<f2").reshape(-1), a[:, 2:].copy().view(np.int8)


def blocks_q4_0(data):
    """-> (d fp16 [nb], q uint8 [nb][32]) with element j = low nibble of byte j (j < 16),
    element j + 16 = high nibble of byte j."""
    a = np.frombuffer(data, dtype=np.uint8).reshape(-1, 18)
    d = a[:, :2].copy().view("<f2").reshape(-1)
    qs = a[:, 2:]
    return d, np.concatenate([qs & 0x0F, qs >> 4], axis=1)


def dequant_q5_0(data):
    """[nb][32] floats: d fp16, qh (bit j: element j's fifth bit), qs as Q4_0's nibbles; minus 16."""
    a = np.frombuffer(data, dtype=np.uint8).reshape(-1, 22)
    d = a[:, :2].copy().view("<f2").astype(np.float32)
    qh = a[:, 2:6].copy().view("<u4").astype(np.uint32)
    qs = a[:, 6:]
    lo = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int32)
    hi = ((qh >> np.arange(32, dtype=np.uint32)) & 1).astype(np.int32)
    return ((lo | (hi << 4)) - 16).astype(np.float32) * d


def dequant_q4_k(data):
    """[nb][256] floats of Q4_K super-blocks (d, dmin fp16, 12 bytes of 6-bit scales and mins
    packed as ggml's get_scale_min_k4, 128 bytes: per 64 values the low nibbles then the high)."""
    a = np.frombuffer(data, dtype=np.uint8).reshape(-1, 144)
    d = a[:, 0:2].copy().view("<f2").astype(np.float32).reshape(-1)
    dm = a[:, 2:4].copy().view("<f2").astype(np.float32).reshape(-1)
    s = a[:, 4:16].astype(np.int32)
    sc = np.concatenate([s[:, 0:4] & 63, (s[:, 8:12] & 15) | ((s[:, 0:4] >> 6) << 4)], axis=1)
    mn = np.concatenate([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)], axis=1)
    qs = a[:, 16:].reshape(-1, 4, 32).astype(np.int32)
    q = np.stack([qs & 15, qs >> 4], axis=2).reshape(-1, 8, 32)  # sub-block 2j: low, 2j+1: high
    return (d[:, None, None] * sc[:, :, None] * q - dm[:, None, None] * mn[:, :, None]).reshape(-1, 256)


def tensor_f32(t):
    """numpy array (shape = reversed ne) of an F32/F16/Q8_0/Q4_0/Q5_0/Q4_K tensor, dequantised."""
    shape = list(reversed(t["ne"]))
    if t["type"] == GGML_F32:
        return np.frombuffer(t["data"], dtype="<f4").reshape(shape).astype(np.float32)
    if t["type"] == GGML_F16:
        return np.frombuffer(t["data"], dtype="<f2").reshape(shape).astype(np.float32)
    if t["type"] == GGML_Q8_0:
        d, q = blocks_q8_0(t["data"])
        return (q.astype(np.float32) * d.astype(np.float32)[:, None]).reshape(shape)
    if t["type"] == GGML_Q4_0:
        d, q = blocks_q4_0(t["data"])
        return ((q.astype(np.float32) - 8) * d.astype(np.float32)[:, None]).reshape(shape)
    if t["type"] == GGML_Q5_0:
        return dequant_q5_0(t["data"]).astype(np.float32).reshape(shape)
    if t["type"] == GGML_Q4_K:
        return dequant_q4_k(t["data"]).astype(np.float32).reshape(shape)
    raise ValueError(f"type {t['type']} not supported here")


# ---- writer ----------------------------------------------------------------------------
# GGUF value types
T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
ALIGN = 32


def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _val(t, v):
    if t == T_STR:
        return _str(v)
    if t == T_BOOL:
        return struct.pack("<B", 1 if v else 0)
    if isinstance(t, tuple):  # (T_ARR, element type)
        et = t[1]
        out = [struct.pack("<IQ", et, len(v))]
        if et == T_STR:
            out += [_str(x) for x in v]
        else:
            out.append(np.asarray(v, dtype=_SCALAR[et]).tobytes())
        return b"".join(out)
    return struct.pack(_SCALAR[t], v)


def write(path, kv, tensors):
    """kv: list of (key, type, value), type a T_* or (T_ARR, element T_*), in file order;
    tensors: list of (name, ndarray) written F32 (numpy shape reversed into ne), in order, or
    (name, uint8 blocks, ggml type, numpy shape) written as those bytes.
    GGUF v3, alignment 32 (general.alignment is not written, as llama.cpp's writer)."""
    head = [b"GGUF", struct.pack("<IQQ", 3, len(tensors), len(kv))]
    for k, t, v in kv:
        head.append(_str(k))
        head.append(struct.pack("<I", t[0] if isinstance(t, tuple) else t))
        head.append(_val(t, v))
    blobs, off = [], 0
    for item in tensors:
        name, a = item[0], item[1]
        if len(item) == 4:  # (name, raw uint8 blocks, ggml type, logical numpy shape): a quantized tensor
            raw, gtype, ne = np.ascontiguousarray(a, dtype=np.uint8).tobytes(), item[2], list(reversed(item[3]))
        else:
            raw, gtype, ne = np.ascontiguousarray(a, dtype="<f4").tobytes(), GGML_F32, list(reversed(a.shape))
        head.append(_str(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
                    + struct.pack("<IQ", gtype, off))
        pad = (-len(raw)) % ALIGN
        blobs.append(raw + b"\0" * pad)
        off += len(raw) + pad
    h = b"".join(head)
    h += b"\0" * ((-len(h)) % ALIGN)
    with open(path, "wb") as f:
        f.write(h)
        for b in blobs:
            f.write(b)


# ---- .colibri tensors (docs/FORMAT.md) ---------------------------------------------------

def read_colibri(path):
    """-> (metadata JSON, {name: {"dtype", "shape", "data" (bytes)}})"""
    buf = open(path, "rb").read()
    if len(buf) < 128 or buf[:8] != b"COLIBRI\0":
        raise ValueError(f"{path}: not a .colibri file")
    meta_off, meta_size, data_off, data_size = struct.unpack("<QQQQ", buf[16:48])
    if meta_off + meta_size > len(buf) or data_off + data_size > len(buf) or meta_size < 8:
        raise ValueError(f"{path}: truncated")
    (jl,) = struct.unpack("<Q", buf[meta_off:meta_off + 8])
    meta = json.loads(buf[meta_off + 8:meta_off + 8 + jl].decode("utf-8"))
    out = {}
    for t in meta["tensors"]:
        a, n = data_off + t["offset"], t["size"]
        if a + n > data_off + data_size:
            raise ValueError(f"{path}: tensor {t['name']} out of bounds")
        out[t["name"]] = {"dtype": t["dtype"], "shape": t["shape"], "data": buf[a:a + n]}
    return meta, out


_STACKED = ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps")


GGUF_RENAME = {"glm4moe": {"post_attention_norm.weight": "ffn_norm.weight"},
               "gpt-oss": {"post_attention_norm.weight": "ffn_norm.weight"}}


# LongRoPE factor tensors (llama.cpp's Phi-3 converter): colibri holds them in the config's
# rope_ext, [short..., long...]
_LONGROPE = {"rope_factors_short.weight": 0, "rope_factors_long.weight": 1}


def _cli_colibri_bytes(gguf_path, col_path):
    kv, gt = read(gguf_path)
    meta, ct = read_colibri(col_path)
    bad, n_dense, n_slices, nbytes = [], 0, 0, 0
    # what colibri's loader does with a family's own names (src/model/arch.c gguf_rename)
    # and its multi-token-prediction layers (<arch>.nextn_predict_layers, skipped)
    arch = kv.get("general.architecture")
    nextn = kv.get(f"{arch}.nextn_predict_layers", 0)
    first_mtp = kv.get(f"{arch}.block_count", 0) - nextn
    rename = GGUF_RENAME.get(arch, {})
    for name, t in gt.items():
        parts = name.split(".")
        if nextn and parts[0] == "blk" and int(parts[1]) >= first_mtp:
            continue
        if parts[0] == "blk" and ".".join(parts[2:]) in rename:
            name = f"blk.{parts[1]}.{rename['.'.join(parts[2:])]}"
            parts = name.split(".")
        if len(parts) == 4 and parts[0] == "blk" and parts[2] in _STACKED and parts[3] == "weight":
            n_exp = t["ne"][2]
            sl = len(t["data"]) // n_exp
            for e in range(n_exp):
                cname = f"blk.{parts[1]}.{parts[2][:-5]}.{e}.weight"
                c = ct.get(cname)
                if c is None:
                    bad.append(f"{cname}: missing from {col_path}")
                elif c["data"] != t["data"][e * sl:(e + 1) * sl]:
                    bad.append(f"{cname}: bytes differ from {name} slice {e} ({len(c['data'])} vs {sl} bytes)")
                elif list(c["shape"]) != [t["ne"][1], t["ne"][0]]:
                    bad.append(f"{cname}: shape {c['shape']} vs ne {t['ne'][:2]}")
                n_slices += 1
                nbytes += sl
            continue
        if name in _LONGROPE and name not in ct:
            ext, half, i = meta["config"].get("rope_ext") or [], t["ne"][0], _LONGROPE[name]
            if len(ext) != 2 * half or np.asarray(ext[i * half:(i + 1) * half], dtype="<f4").tobytes() != t["data"]:
                bad.append(f"{name}: not the {('short', 'long')[i]} half of {col_path}'s rope_ext")
            n_dense += 1
            nbytes += len(t["data"])
            continue
        c = ct.get(name)
        if c is None:
            bad.append(f"{name}: missing from {col_path}")
        elif c["data"] != t["data"]:
            bad.append(f"{name}: bytes differ ({c['dtype']} {len(c['data'])} vs GGUF type {t['type']} "
                       f"{len(t['data'])} bytes)")
        elif list(c["shape"]) != list(reversed(t["ne"])):
            bad.append(f"{name}: shape {c['shape']} vs ne {t['ne']}")
        n_dense += 1
        nbytes += len(t["data"])
    print(f"colibri-bytes {gguf_path} -> {col_path}: {n_dense} tensors + {n_slices} expert slices, "
          f"{nbytes} bytes compared, {len(bad)} differences")
    for b in bad[:20]:
        print("  DIFF", b)
    return 1 if bad else 0


def _fmt(v):
    if isinstance(v, list):
        return f"[{len(v)} items]"
    return repr(v)


def _cli_diff(a_path, b_path, prefix, tensors):
    akv, aty, at = read_typed(a_path)
    bkv, bty, bt = read_typed(b_path)
    if prefix is None:
        prefix = akv.get("general.architecture", "") + "."
    pref = ("general.architecture",) + tuple(p for p in prefix.split(",") if p)
    keys = sorted({k for k in list(akv) + list(bkv) if k.startswith(pref)})
    bad = []
    for k in keys:
        if k not in akv or k not in bkv:
            bad.append(f"key {k}: only in {a_path if k in akv else b_path} ({_fmt(akv.get(k, bkv.get(k)))})")
        elif aty[k] != bty[k] or akv[k] != bkv[k]:
            bad.append(f"key {k}: {_fmt(akv[k])} (type {aty[k]}) vs {_fmt(bkv[k])} (type {bty[k]})")
    nt = 0
    if tensors:
        for n in sorted(set(at) | set(bt)):
            if n not in at or n not in bt:
                bad.append(f"tensor {n}: only in {a_path if n in at else b_path}")
                continue
            x, y = at[n], bt[n]
            if x["type"] != y["type"] or x["ne"] != y["ne"]:
                bad.append(f"tensor {n}: type/ne {x['type']} {x['ne']} vs {y['type']} {y['ne']}")
            elif x["data"] != y["data"]:
                d = np.abs(tensor_f32(x).astype(np.float64) - tensor_f32(y).astype(np.float64)).max()
                bad.append(f"tensor {n}: bytes differ (max abs {d:.3g})")
            nt += 1
    print(f"diff {a_path} {b_path}: {len(keys)} keys ({','.join(pref)}*), {nt} tensors compared, "
          f"{len(bad)} differences")
    for b in bad[:30]:
        print("  DIFF", b)
    return 1 if bad else 0


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("diff")
    d.add_argument("a")
    d.add_argument("b")
    d.add_argument("--prefix", help="comma-separated key prefixes (default: '<arch>.')")
    d.add_argument("--tensors", action="store_true")
    c = sub.add_parser("colibri-bytes")
    c.add_argument("gguf")
    c.add_argument("colibri")
    a = ap.parse_args(argv)
    if a.cmd == "diff":
        return _cli_diff(a.a, a.b, a.prefix, a.tensors)
    return _cli_colibri_bytes(a.gguf, a.colibri)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
