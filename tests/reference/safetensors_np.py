"""Minimal safetensors reader/writer on numpy (no torch, no safetensors package).

Format: 8-byte little-endian header length N, N bytes of JSON header
({name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}),
then the data section; offsets are relative to the start of the data section.
Supported dtypes: F32, F16, BF16 (read as float32), F64, I64, I32 (read as is).
"""
import json
import os
import struct

import numpy as np

_ELEM = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I64": 8, "I32": 4, "U8": 1, "I8": 1}


def bf16_bits_to_f32(u16):
    """uint16 array of bfloat16 bit patterns -> float32 (exact)."""
    return (u16.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16_bits(x):
    """float32 -> uint16 bfloat16 bit patterns, round to nearest even (NaN kept quiet)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    out = rounded.astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        out[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return out


def round_bf16(x):
    """float32 -> float32 holding the nearest bfloat16 value."""
    return bf16_bits_to_f32(f32_to_bf16_bits(x)).reshape(np.shape(x))


def read_header(path):
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: too short for a safetensors header")
        (n,) = struct.unpack("<Q", raw)
        if n > size - 8:
            raise ValueError(f"{path}: header length {n} exceeds file size {size}")
        header = json.loads(f.read(n).decode("utf-8"))
    return header, 8 + n, size


def load(path, names=None):
    """Returns {name: ndarray}; F16/BF16 are widened to float32 exactly."""
    header, data_start, size = read_header(path)
    out = {}
    with open(path, "rb") as f:
        for name, info in header.items():
            if name == "__metadata__":
                continue
            if names is not None and name not in names:
                continue
            dt = info["dtype"]
            if dt not in _ELEM:
                raise ValueError(f"{path}: tensor {name}: unsupported dtype {dt}")
            shape = [int(s) for s in info["shape"]]
            b, e = info["data_offsets"]
            count = int(np.prod(shape)) if shape else 1
            if e - b != count * _ELEM[dt] or data_start + e > size or b > e:
                raise ValueError(f"{path}: tensor {name}: bad data_offsets {b},{e}")
            f.seek(data_start + b)
            buf = f.read(e - b)
            if dt == "F32":
                a = np.frombuffer(buf, dtype="<f4").astype(np.float32)
            elif dt == "F16":
                a = np.frombuffer(buf, dtype="<f2").astype(np.float32)
            elif dt == "BF16":
                a = bf16_bits_to_f32(np.frombuffer(buf, dtype="<u2"))
            elif dt == "F64":
                a = np.frombuffer(buf, dtype="<f8").copy()
            elif dt == "I64":
                a = np.frombuffer(buf, dtype="<i8").copy()
            elif dt == "I32":
                a = np.frombuffer(buf, dtype="<i4").copy()
            elif dt == "U8":
                a = np.frombuffer(buf, dtype="u1").copy()
            else:
                a = np.frombuffer(buf, dtype="i1").copy()
            out[name] = a.reshape(shape)
    return out


def save(path, tensors, dtype="f32", metadata=None):
    """Writes {name: float ndarray} with every tensor stored as dtype (f32|f16|bf16); uint8
    arrays are written as U8."""
    st = {"f32": "F32", "f16": "F16", "bf16": "BF16"}[dtype]
    header = {"__metadata__": dict(metadata or {"format": "pt"})}
    blobs = []
    off = 0
    for name in sorted(tensors):
        if np.asarray(tensors[name]).dtype == np.uint8:  # raw bytes (MXFP4 blocks / scales) stay U8
            raw = np.ascontiguousarray(tensors[name]).tobytes()
            header[name] = {"dtype": "U8", "shape": list(np.shape(tensors[name])), "data_offsets": [off, off + len(raw)]}
            blobs.append(raw)
            off += len(raw)
            continue
        a = np.ascontiguousarray(tensors[name], dtype=np.float32)
        if dtype == "f32":
            raw = a.astype("<f4").tobytes()
        elif dtype == "f16":
            raw = a.astype("<f2").tobytes()
        else:
            raw = f32_to_bf16_bits(a).astype("<u2").tobytes()
        header[name] = {"dtype": st, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((8 - len(hj) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for raw in blobs:
            f.write(raw)
    return off


def load_dir(hf_dir):
    """All tensors of an HF directory: model.safetensors, or the shards named by
    model.safetensors.index.json."""
    index = os.path.join(hf_dir, "model.safetensors.index.json")
    single = os.path.join(hf_dir, "model.safetensors")
    if os.path.exists(index):
        with open(index) as f:
            wm = json.load(f)["weight_map"]
        out = {}
        for shard in sorted(set(wm.values())):
            want = {n for n, s in wm.items() if s == shard}
            got = load(os.path.join(hf_dir, shard), want)
            missing = want - set(got)
            if missing:
                raise ValueError(f"{shard}: index names tensors it lacks: {sorted(missing)[:3]}")
            out.update(got)
        return out
    if os.path.exists(single):
        return load(single)
    raise FileNotFoundError(f"{hf_dir}: no model.safetensors or model.safetensors.index.json")
