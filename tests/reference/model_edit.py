"""Rewrites the metadata of a model file, keeping its tensors, to make hostile inputs that
are otherwise well formed (valid CRCs, valid offsets). Used by tests/integration/bad_input.sh.

  model_edit.py gguf IN OUT KEY=TYPE:VALUE ...   set a GGUF key (TYPE u32 i32 u64 i64 f32 f64
                                                 str bool); KEY=- deletes it
  model_edit.py gguf-tokens IN OUT N             keep the first N entries of the
                                                 tokenizer.ggml.* arrays of one entry per token
  model_edit.py gguf-nan IN OUT TENSOR           the first 4 floats of an F32 tensor made NaN
  model_edit.py colibri IN OUT KEY=JSON ...      set a key of a .colibri file's "config" object
                                                 (version 1), CRCs recomputed
"""
import json
import struct
import sys
import zlib

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import gguf_np  # noqa: E402

TYPES = {"u32": 4, "i32": 5, "f32": 6, "bool": 7, "str": 8, "u64": 10, "i64": 11, "f64": 12}


def gguf_parse(buf):
    r = gguf_np._R(buf)
    if r.take(4) != b"GGUF":
        raise SystemExit("not GGUF")
    ver = r.u("<I")
    nt, nkv = r.u("<Q"), r.u("<Q")
    kv = []
    for _ in range(nkv):
        k = r.s()
        t = r.u("<I")
        start = r.o
        et = None
        if t == 9:
            et = struct.unpack("<I", buf[r.o:r.o + 4])[0]
        v = r.val(t)
        kv.append([k, t, et, v, buf[start:r.o]])
    infos_start = r.o
    for _ in range(nt):
        r.s()
        nd = r.u("<I")
        r.take(8 * nd + 12)
    infos = buf[infos_start:r.o]
    align = dict((k, v) for k, _, _, v, _ in kv).get("general.alignment", 32)
    data = (r.o + align - 1) // align * align
    return ver, nt, kv, infos, align, buf[data:]


def gguf_write(path, ver, nt, kv, infos, align, data):
    head = [b"GGUF", struct.pack("<IQQ", ver, nt, len(kv))]
    for k, t, _, _, raw in kv:
        head += [gguf_np._str(k), struct.pack("<I", t), raw]
    head.append(infos)
    h = b"".join(head)
    h += b"\0" * ((-len(h)) % align)
    open(path, "wb").write(h + data)


def cmd_gguf(src, dst, edits):
    ver, nt, kv, infos, align, data = gguf_parse(open(src, "rb").read())
    for e in edits:
        k, spec = e.split("=", 1)
        kv = [x for x in kv if x[0] != k]
        if spec == "-":
            continue
        ty, val = spec.split(":", 1)
        t = TYPES[ty]
        v = val if ty == "str" else (val == "true") if ty == "bool" else float(val) if ty[0] == "f" else int(val)
        kv.append([k, t, None, v, gguf_np._val(t, v)])
    gguf_write(dst, ver, nt, kv, infos, align, data)


def cmd_gguf_tokens(src, dst, n):
    ver, nt, kv, infos, align, data = gguf_parse(open(src, "rb").read())
    for x in kv:
        if x[0] in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
            x[3] = x[3][:n]
            x[4] = gguf_np._val((9, x[2]), x[3])
        if x[0] == "tokenizer.ggml.merges":
            x[3] = []
            x[4] = gguf_np._val((9, x[2]), [])
    gguf_write(dst, ver, nt, kv, infos, align, data)


def cmd_gguf_nan(src, dst, name):
    buf = bytearray(open(src, "rb").read())
    ver, nt, kv, infos, align, data = gguf_parse(bytes(buf))
    r = gguf_np._R(infos)
    for _ in range(nt):
        n = r.s()
        nd = r.u("<I")
        r.take(8 * nd)
        t, off = r.u("<I"), r.u("<Q")
        if n == name:
            if t != 0:
                raise SystemExit(f"{name} is not F32")
            at = len(buf) - len(data) + off
            buf[at:at + 16] = struct.pack("<4I", *[0x7fc00000] * 4)
            open(dst, "wb").write(buf)
            return
    raise SystemExit(f"no tensor {name}")


def cmd_colibri(src, dst, edits):
    b = bytearray(open(src, "rb").read())
    mo, ms, do = struct.unpack("<QQQ", b[16:40])
    n, = struct.unpack("<Q", b[mo:mo + 8])
    j = json.loads(b[mo + 8:mo + 8 + n])
    for e in edits:
        k, v = e.split("=", 1)
        j["config"][k] = json.loads(v)
    # 1e39 stays a literal the reader parses (json.dumps would write Infinity for inf)
    raw = json.dumps(j, separators=(",", ":"), ensure_ascii=False).encode()  # UTF-8 as written, not \\u escapes
    meta = struct.pack("<Q", len(raw)) + raw
    if mo + len(meta) > do:
        raise SystemExit("the edited metadata does not fit before the data section")
    b[mo:do] = meta + b"\0" * (do - mo - len(meta))
    struct.pack_into("<Q", b, 24, len(meta))
    struct.pack_into("<I", b, 56, zlib.crc32(meta))
    struct.pack_into("<I", b, 124, zlib.crc32(bytes(b[0:124])))
    open(dst, "wb").write(b)


def main(argv):
    if len(argv) < 4:
        raise SystemExit(__doc__)
    cmd, src, dst = argv[1:4]
    if cmd == "gguf":
        cmd_gguf(src, dst, argv[4:])
    elif cmd == "gguf-tokens":
        cmd_gguf_tokens(src, dst, int(argv[4]))
    elif cmd == "gguf-nan":
        cmd_gguf_nan(src, dst, argv[4])
    elif cmd == "colibri":
        cmd_colibri(src, dst, argv[4:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
