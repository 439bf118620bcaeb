"""Tiny GGUF v2/v3 reader (metadata + raw tensor bytes) for cross-checks in tests.
Returns raw block bytes; dequantisation of Q8_0 / Q4_0 / F32 / F16 is provided."""
import struct

import numpy as np

GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q8_0 = 0, 1, 2, 8
_BLOCK = {GGML_F32: (1, 4), GGML_F16: (1, 2), GGML_Q4_0: (32, 18), GGML_Q8_0: (32, 34),
          14: (256, 210), 12: (256, 144), 13: (256, 176), 10: (256, 84), 11: (256, 110)}
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
    buf = open(path, "rb").read()
    r = _R(buf)
    if r.take(4) != b"GGUF":
        raise ValueError(f"{path}: not GGUF")
    ver = r.u("<I")
    if ver not in (2, 3):
        raise ValueError(f"{path}: GGUF version {ver}")
    nt, nkv = r.u("<Q"), r.u("<Q")
    kv = {}
    for _ in range(nkv):
        k = r.s()
        kv[k] = r.val(r.u("<I"))
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
    return kv, out


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


def tensor_f32(t):
    """numpy array (shape = reversed ne) of an F32/F16/Q8_0/Q4_0 tensor, dequantised."""
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
    raise ValueError(f"type {t['type']} not supported here")
