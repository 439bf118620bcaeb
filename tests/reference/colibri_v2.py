#!/usr/bin/python3
"""Encoded .colibri files (version 2, docs/FORMAT.md) for the tamper tests.

  colibri_v2.py tamper IN.colibri OUT.colibri CASE [--fix-crc]
      writes OUT = IN with one change; with --fix-crc every CRC32 the change touches is
      recomputed (header, metadata, data section, the chunk's), as an attacker would, so
      only the authentication can catch it. CASEs (`colibri_v2.py cases IN` lists those
      that apply to IN):
        header-flags header-segsize header-codec header-datasize header-count
        salt key-check clear-json sealed-body sealed-tag meta-length
        dense-first dense-last dense-vector expert-first expert-last tag-dense tag-expert
        padding swap-experts swap-segments move-chunk truncate-data truncate-meta truncate-header
  colibri_v2.py info IN.colibri
      prints the header fields and the chunk table.
  colibri_v2.py decode IN.colibri PLAIN.colibri [--key KEYFILE]
      decodes every segment of IN as docs/FORMAT.md says, written from the document and not
      from colibri's code (HKDF-SHA256 and AES-256-GCM of python3-cryptography, zlib, the zstd
      command): the key check, the sealed metadata with its associated data, each segment's
      nonce (chunk, segment) and its chunk's associated data, raw / compressed / byte-split
      segments; then every tensor's plain bytes and CRC32, the chunk CRCs, the configuration
      and the tokenizer must equal those of the version 1 file PLAIN.
"""
import json
import struct
import sys
import zlib

HDR = 128


def crc(b):
    return zlib.crc32(b) & 0xFFFFFFFF


class V2:
    def __init__(self, buf):
        self.b = bytearray(buf)
        b = self.b
        if b[:8] != b"COLIBRI\0" or struct.unpack_from("<I", b, 8)[0] != 2:
            raise SystemExit("not a version 2 .colibri file")
        (self.flags,) = struct.unpack_from("<I", b, 12)
        self.meta_off, self.meta_size, self.data_off, self.data_size, self.count = struct.unpack_from("<QQQQQ", b, 16)
        self.clear_len = struct.unpack_from("<Q", b, self.meta_off)[0]
        self.clear = json.loads(bytes(b[self.meta_off + 8:self.meta_off + 8 + self.clear_len]))
        self.encrypted = bool(self.flags & 2)
        if self.encrypted:
            p = self.meta_off + 8 + self.clear_len
            self.sealed_off = p + 8
            self.sealed_len = struct.unpack_from("<Q", b, p)[0]
        self.chunks = []
        for c in self.clear["chunks"]:
            segs, o = [], self.data_off + c["offset"]
            for s in c["segments"]:
                segs.append((o, s))
                o += s
            self.chunks.append({"offset": self.data_off + c["offset"], "stored": o - self.data_off - c["offset"],
                                "segs": segs, "plain": c["plain"]})
        self.model = self.clear if not self.encrypted else None

    def fix_crcs(self):
        b = self.b
        # chunk CRCs live in the clear JSON: rewrite it when one changed (same width: 8 hex digits)
        changed = False
        for i, c in enumerate(self.chunks):
            v = "%08x" % crc(bytes(b[c["offset"]:c["offset"] + c["stored"]]))
            if self.clear["chunks"][i]["crc32"] != v:
                old = ('"crc32":"%s"' % self.clear["chunks"][i]["crc32"]).encode()
                text = bytes(b[self.meta_off + 8:self.meta_off + 8 + self.clear_len])
                k = text.find(old, text.find(b'"offset":%d,' % self.clear["chunks"][i]["offset"]))
                if k >= 0:
                    b[self.meta_off + 8 + k + 9:self.meta_off + 8 + k + 17] = v.encode()
                    changed = True
        if changed:
            self.__init__(bytes(b))
            b = self.b
        struct.pack_into("<I", b, 64, crc(bytes(b[self.data_off:self.data_off + self.data_size])))
        struct.pack_into("<I", b, 56, crc(bytes(b[self.meta_off:self.meta_off + self.meta_size])))
        struct.pack_into("<I", b, 124, crc(bytes(b[:124])))


def dense_and_expert_chunks(v):
    """Chunks by kind, from their alignment: experts start on 4096-byte boundaries and come
    after every dense chunk (the layout of the format)."""
    n = len(v.chunks)
    first_expert = n
    for i in range(n - 1, -1, -1):
        if (v.chunks[i]["offset"] - v.data_off) % 4096 == 0 and all(
                (v.chunks[j]["offset"] - v.data_off) % 4096 == 0 for j in range(i, n)):
            first_expert = i
        else:
            break
    return list(range(first_expert)), list(range(first_expert, n))


def flip(b, off, mask=0x01):
    b[off] ^= mask


def apply(v, case):
    b = v.b
    dense, experts = dense_and_expert_chunks(v)
    if case == "header-flags":
        b[12] ^= 0x01
    elif case == "header-segsize":
        struct.pack_into("<I", b, 68, struct.unpack_from("<I", b, 68)[0] * 2)
    elif case == "header-codec":
        b[72] ^= 0x03
    elif case == "header-datasize":
        struct.pack_into("<Q", b, 40, v.data_size - 1)
    elif case == "header-count":
        struct.pack_into("<Q", b, 48, v.count - 1)
    elif case == "salt":
        flip(b, 76 + 5)
    elif case == "key-check":
        flip(b, 108 + 3)
    elif case == "clear-json":  # a chunk's split16 false -> true (same width: a space)
        text = bytes(b[v.meta_off + 8:v.meta_off + 8 + v.clear_len])
        k = text.find(b'"split16":false')
        if k < 0:
            raise SystemExit("no chunk with split16 false")
        b[v.meta_off + 8 + k + 10:v.meta_off + 8 + k + 15] = b"true "
    elif case == "sealed-body":
        flip(b, v.sealed_off + 10)
    elif case == "sealed-tag":
        flip(b, v.sealed_off + v.sealed_len - 3)
    elif case == "meta-length":
        struct.pack_into("<Q", b, v.meta_off, v.clear_len + 1)
    elif case in ("dense-first", "dense-last", "dense-vector", "tag-dense"):
        ci = {"dense-first": dense[0], "dense-last": dense[-1]}.get(case, dense[len(dense) // 2])
        if case == "dense-vector":  # the smallest dense chunk: a norm vector
            ci = min(dense, key=lambda i: v.chunks[i]["plain"])
        o, n = v.chunks[ci]["segs"][0]
        flip(b, o + n - 1 if case == "tag-dense" else o + n // 3)
    elif case in ("expert-first", "expert-last", "tag-expert"):
        ci = experts[0] if case == "expert-first" else experts[-1]
        o, n = v.chunks[ci]["segs"][-1]
        flip(b, o + n - 5 if case == "tag-expert" else o + 1)
    elif case == "padding":  # a byte between two chunks
        for i in range(1, len(v.chunks)):
            a = v.chunks[i - 1]["offset"] + v.chunks[i - 1]["stored"]
            if v.chunks[i]["offset"] > a:
                flip(b, a)
                break
        else:
            raise SystemExit("no padding in this file")
    elif case == "swap-experts":  # two expert chunks trade places (their common length)
        x, y = v.chunks[experts[0]], v.chunks[experts[-1]]
        n = min(x["stored"], y["stored"])
        bx = bytes(b[x["offset"]:x["offset"] + n])
        b[x["offset"]:x["offset"] + n] = b[y["offset"]:y["offset"] + n]
        b[y["offset"]:y["offset"] + n] = bx
    elif case == "swap-segments":  # two segments of one chunk, of one stored length, trade places
        ci = next((i for i in experts if len(v.chunks[i]["segs"]) > 1 and
                   v.chunks[i]["segs"][0][1] == v.chunks[i]["segs"][1][1]), None)
        if ci is None:
            raise SystemExit("no chunk with two segments of one stored length")
        (o0, n), (o1, _) = v.chunks[ci]["segs"][:2]
        s0 = bytes(b[o0:o0 + n])
        b[o0:o0 + n] = b[o1:o1 + n]
        b[o1:o1 + n] = s0
    elif case == "move-chunk":  # the first expert's bytes copied over the second's
        x, y = v.chunks[experts[0]], v.chunks[experts[1]]
        n = min(x["stored"], y["stored"])
        b[y["offset"]:y["offset"] + n] = b[x["offset"]:x["offset"] + n]
    elif case == "truncate-data":
        del b[v.data_off + v.data_size // 2:]
    elif case == "truncate-meta":
        del b[v.meta_off + v.meta_size - 7:]
    elif case == "truncate-header":
        del b[100:]
    else:
        raise SystemExit(f"unknown case {case}")


CASES = ["header-flags", "header-segsize", "header-codec", "header-datasize", "header-count", "salt", "key-check",
         "clear-json", "sealed-body", "sealed-tag", "meta-length", "dense-first", "dense-last", "dense-vector",
         "expert-first", "expert-last", "tag-dense", "tag-expert", "padding", "swap-experts", "swap-segments", "move-chunk",
         "truncate-data", "truncate-meta", "truncate-header"]


def read_key(path):
    raw = open(path, "rb").read()
    if len(raw) == 32:
        return raw
    txt = raw.strip()
    if len(txt) != 64:
        raise SystemExit(f"{path}: not a key")
    return bytes.fromhex(txt.decode())


def unzstd(body):
    import subprocess
    r = subprocess.run(["zstd", "-d", "-c", "-q"], input=bytes(body), capture_output=True)
    if r.returncode != 0:
        raise SystemExit("zstd -d failed: " + r.stderr.decode(errors="replace").strip())
    return r.stdout


def decode(path, plain_path, key_path):
    import gguf_np  # the version 1 reader of the other reference tools
    v = V2(open(path, "rb").read())
    b = v.b
    seg_size, codec = struct.unpack_from("<I", b, 68)[0], b[72]
    bad = []
    okm = None
    if v.encrypted:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF
        okm = HKDF(algorithm=hashes.SHA256(), length=52, salt=bytes(b[76:108]),
                   info=b"colibri v2 aes-256-gcm").derive(read_key(key_path))
        if okm[36:52] != bytes(b[108:124]):
            raise SystemExit(f"{path}: the key check differs (wrong key?)")
        gcm, prefix = AESGCM(okm[:32]), okm[32:36]
        hdr = bytearray(b[:128])
        hdr[56:60] = hdr[124:128] = b"\0" * 4
        aad = bytes(hdr) + struct.pack("<Q", v.clear_len) + bytes(b[v.meta_off + 8:v.meta_off + 8 + v.clear_len])
        sealed = bytes(b[v.sealed_off:v.sealed_off + v.sealed_len])
        model = json.loads(gcm.decrypt(prefix + struct.pack("<II", 0xFFFFFFFF, 0), sealed, aad))
    else:
        model = v.clear
    ref_meta, ref = gguf_np.read_colibri(plain_path)
    for k in ("config", "tokenizer"):
        if model.get(k) != ref_meta.get(k):
            bad.append(f"the {k} differs from {plain_path}'s")
    members = {}
    for t in model["tensors"]:
        members.setdefault(t["chunk"], []).append(t)
    n_seg = 0
    for ci, c in enumerate(v.chunks):
        cc = v.clear["chunks"][ci]
        stored = bytes(b[c["offset"]:c["offset"] + c["stored"]])
        if "%08x" % crc(stored) != cc["crc32"]:
            bad.append(f"chunk {ci}: stored bytes crc32 {crc(stored):08x}, the table says {cc['crc32']}")
        ts = sorted(members.get(ci, []), key=lambda t: t["offset"])
        aad = b"".join(struct.pack("<I", len(t["name"].encode())) + t["name"].encode() for t in ts)
        aad += struct.pack("<Q", c["plain"])
        out = bytearray()
        for si, (o, n) in enumerate(c["segs"]):
            want = min(seg_size, c["plain"] - si * seg_size)
            body = bytes(b[o:o + n])
            if v.encrypted:
                body = gcm.decrypt(prefix + struct.pack("<II", ci, si), body, aad)
            if len(body) != want:  # compressed (else raw)
                body = unzstd(body) if codec == 1 else zlib.decompress(body) if codec == 2 else None
                if body is None or len(body) != want:
                    raise SystemExit(f"{path}: chunk {ci} segment {si} does not decode to {want} bytes")
                if cc["split16"]:
                    h = want // 2
                    j = bytearray(want)
                    j[0::2], j[1::2] = body[:h], body[h:]
                    body = bytes(j)
            out += body
            n_seg += 1
        for t in ts:
            data = bytes(out[t["offset"]:t["offset"] + t["size"]])
            r = ref.get(t["name"])
            if r is None:
                bad.append(f"{t['name']}: not in {plain_path}")
            elif data != r["data"] or t["dtype"] != r["dtype"] or list(t["shape"]) != list(r["shape"]):
                bad.append(f"{t['name']} (chunk {ci}): decodes to other bytes, dtype or shape than in {plain_path}")
            if "%08x" % crc(data) != t["crc32"]:
                bad.append(f"{t['name']}: plain crc32 {crc(data):08x}, the table says {t['crc32']}")
    if len(model["tensors"]) != len(ref):
        bad.append(f"{len(model['tensors'])} tensors, {plain_path} has {len(ref)}")
    for m in bad[:10]:
        print(f"FAIL: {path}: {m}")
    if bad:
        return 1
    print(f"{path}: {len(model['tensors'])} tensors in {len(v.chunks)} chunks, {n_seg} segments "
          f"({'aes-256-gcm, ' if v.encrypted else ''}{['none', 'zstd', 'zlib'][codec]}, segments of {seg_size}) "
          f"decoded as docs/FORMAT.md says: identical to {plain_path}")
    return 0


def main(argv):
    if len(argv) >= 4 and argv[0] == "tamper":
        v = V2(open(argv[1], "rb").read())
        apply(v, argv[3])
        if "--fix-crc" in argv and not argv[3].startswith("truncate"):
            v.fix_crcs()
        open(argv[2], "wb").write(v.b)
        return 0
    if len(argv) == 2 and argv[0] == "cases":
        v = V2(open(argv[1], "rb").read())
        enc_only = {"salt", "key-check", "sealed-body", "sealed-tag", "tag-dense", "tag-expert"}
        for c in CASES:
            if c in enc_only and not v.encrypted:
                continue
            if c == "swap-segments" and not any(len(k["segs"]) > 1 and k["segs"][0][1] == k["segs"][1][1]
                                                for k in v.chunks):
                continue
            print(c)
        return 0
    if len(argv) == 2 and argv[0] == "info":
        v = V2(open(argv[1], "rb").read())
        print(f"flags {v.flags} meta {v.meta_off}+{v.meta_size} data {v.data_off}+{v.data_size} chunks {v.count}")
        for i, c in enumerate(v.chunks):
            print(i, c["offset"], c["stored"], c["plain"], len(c["segs"]))
        return 0
    if len(argv) in (3, 5) and argv[0] == "decode":
        key = argv[4] if len(argv) == 5 and argv[3] == "--key" else None
        return decode(argv[1], argv[2], key)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
