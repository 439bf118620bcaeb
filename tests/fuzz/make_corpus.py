#!/usr/bin/python3
"""make_corpus.py OUT_DIR — writes the GGUF, safetensors and text (tokenizer.json, chat
template, HF config.json, run-time config) fuzz seeds (a few KB each).

Seeds are either synthetic (every GGUF value type, nested arrays, custom alignment, an
unknown tensor type) or shrunk from the repository fixtures: their real keys, tensor names
and dtypes are kept, arrays are cut to a few entries and tensor shapes to one block, so
the fuzzer starts from realistic structure without megabytes of weights. The output is
deterministic. Container seeds are written by gen_container.c (they need the C writer).
Run from the repository root. Standard library only.
"""
import json
import os
import struct
import sys

# GGUF value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
          BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}
# ggml type -> (block size, block bytes) for the types the fixtures use
BLOCKS = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24),
          8: (32, 34), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176),
          14: (256, 210), 30: (1, 2)}


# ---- reading a fixture's GGUF header ----

class Reader:
    def __init__(self, data):
        self.d, self.p = data, 0

    def take(self, n):
        b = self.d[self.p:self.p + n]
        if len(b) != n:
            raise ValueError("truncated")
        self.p += n
        return b

    def unpack(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self):
        return self.take(self.unpack("<Q"))

    def value(self, t):
        if t in SCALAR:
            return self.unpack(SCALAR[t])
        if t == STR:
            return self.string()
        if t == ARR:
            et, n = self.unpack("<I"), self.unpack("<Q")
            return (et, [self.value(et) for _ in range(n)])
        raise ValueError("bad type %d" % t)


def read_gguf(path):
    r = Reader(open(path, "rb").read())
    assert r.take(4) == b"GGUF"
    version, n_t, n_kv = r.unpack("<I"), r.unpack("<Q"), r.unpack("<Q")
    kvs = []
    for _ in range(n_kv):
        k = r.string()
        t = r.unpack("<I")
        kvs.append((k.decode(), t, r.value(t)))
    tensors = []
    for _ in range(n_t):
        name = r.string().decode()
        nd = r.unpack("<I")
        ne = [r.unpack("<Q") for _ in range(nd)]
        tensors.append((name, ne, r.unpack("<I")))
        r.unpack("<Q")
    return version, kvs, tensors


def shrink_value(t, v, n=8):
    if t == ARR:
        et, items = v
        return (et, [shrink_value(et, x, n) for x in items[:n]])
    return v


# ---- writing GGUF ----

def w_str(s):
    if isinstance(s, str):
        s = s.encode()
    return struct.pack("<Q", len(s)) + s


def w_value(t, v):
    if t in SCALAR:
        return struct.pack(SCALAR[t], v)
    if t == STR:
        return w_str(v)
    et, items = v
    return struct.pack("<IQ", et, len(items)) + b"".join(w_value(et, x) for x in items)


def gguf(version, kvs, tensors, alignment=32):
    """kvs: (key, type, value); tensors: (name, ne, ggml_type). Data is a byte pattern."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += w_str(k) + struct.pack("<I", t) + w_value(t, v)
    sizes, off = [], 0
    infos = b""
    for name, ne, typ in tensors:
        bs, bb = BLOCKS.get(typ, (1, 1))
        size = ne[0] // bs * bb
        for x in ne[1:]:
            size *= x
        infos += w_str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", x) for x in ne)
        infos += struct.pack("<IQ", typ, off)
        sizes.append(size)
        off += (size + alignment - 1) // alignment * alignment
    out += infos
    out += b"\0" * (-len(out) % alignment)
    for i, size in enumerate(sizes):
        out += bytes((i * 31 + j * 7) & 0xFF for j in range(size))
        out += b"\0" * (-len(out) % alignment)
    return out


def sample(version, alignment):
    kvs = [("general.architecture", STR, "llama"), ("general.name", STR, "fuzz seed"),
           ("t.u8", U8, 200), ("t.i8", I8, -100), ("t.u16", U16, 60000), ("t.i16", I16, -30000),
           ("t.u32", U32, 4000000000), ("t.i32", I32, -2000000000), ("t.f32", F32, 1.5),
           ("t.bool", BOOL, 1), ("t.u64", U64, 2**63 + 5), ("t.i64", I64, -2**40),
           ("t.f64", F64, -3.25e100),
           ("a.i32", ARR, (I32, [-7, 70000, 3])), ("a.f32", ARR, (F32, [0.25, -2.0])),
           ("a.str", ARR, (STR, ["alpha", "", "gamma"])), ("a.bool", ARR, (BOOL, [0, 1])),
           ("a.nested", ARR, (ARR, [(I16, [1, 2]), (U64, []), (ARR, [(STR, ["x"])])])),
           ("a.empty", ARR, (STR, []))]
    if alignment != 32:
        kvs.insert(1, ("general.alignment", U32, alignment))
    tensors = [("token_embd.weight", [8, 3], 0), ("blk.0.attn_q.weight", [64, 2], 8),
               ("blk.0.ffn_gate_exps.weight", [32, 2, 2], 2), ("output_norm.weight", [8], 1)]
    return gguf(version, kvs, tensors, alignment)


def mini_from_fixture(path, n_tensors=8, n_arr=8):
    version, kvs, tensors = read_gguf(path)
    kvs = [(k, t, shrink_value(t, v, n_arr)) for k, t, v in kvs]
    small = []
    for name, ne, typ in tensors[:n_tensors]:
        bs = BLOCKS.get(typ, (1, 1))[0]
        small.append((name, [bs] + [min(x, 2) for x in ne[1:]], typ))
    align = next((v for k, t, v in kvs if k == "general.alignment"), 32)
    return gguf(version, kvs, small, align)


# ---- safetensors ----

def safetensors(entries, metadata=None):
    """entries: (name, dtype, shape); bytes follow in order."""
    esize = {"F32": 4, "F16": 2, "BF16": 2, "I32": 4, "U8": 1}
    header, off = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dt, shape in entries:
        n = esize[dt]
        for x in shape:
            n *= x
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + bytes((i * 13) & 0xFF for i in range(off))


def mini_safetensors(path, n=8):
    d = open(path, "rb").read()
    hlen = struct.unpack("<Q", d[:8])[0]
    h = json.loads(d[8:8 + hlen])
    entries = [(k, v["dtype"], [min(x, 4) for x in v["shape"]])
               for k, v in h.items() if k != "__metadata__"][:n]
    return safetensors(entries, h.get("__metadata__"))


# ---- text seeds: tokenizer.json (+ NUL + text), chat templates (+ NUL + extra JSON),
# HF config.json, run-time config files; each includes the hostile cases of issue 13 ----

def _tok(model, normalizer=None, post=None, added=None, pre=None, decoder=None):
    return json.dumps({"version": "1.0", "model": model, "added_tokens": added or [],
                       "normalizer": normalizer, "pre_tokenizer": pre, "post_processor": post,
                       "decoder": decoder}).encode()


def text_seeds():
    s = {}
    text = "\0Hello world aab <s> \xe2\x96\x81x 12".encode("utf-8", "surrogateescape")
    bpe = {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "<s>": 3, "h": 4, "e": 5, "l": 6, "o": 7, " ": 8},
           "merges": ["a b"], "byte_fallback": False}
    s["tokenizer/bpe.json"] = _tok(bpe, added=[{"id": 3, "content": "<s>", "special": True}]) + text
    s["tokenizer/bytelevel.json"] = _tok(
        {"type": "BPE", "vocab": {chr(0x100 + i) if i < 33 else chr(i): i for i in range(33, 127)}, "merges": []},
        pre={"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
        decoder={"type": "ByteLevel"}) + text
    s["tokenizer/wordpiece.json"] = _tok(
        {"type": "WordPiece", "vocab": {"[UNK]": 0, "hello": 1, "##lo": 2, "world": 3}, "unk_token": "[UNK]",
         "continuing_subword_prefix": "##", "max_input_chars_per_word": 100},
        normalizer={"type": "BertNormalizer", "lowercase": True}, pre={"type": "BertPreTokenizer"}) + text
    s["tokenizer/wordlevel.json"] = _tok(
        {"type": "WordLevel", "vocab": {"<unk>": 0, "hello": 1, "world": 2}, "unk_token": "<unk>"},
        pre={"type": "Whitespace"}) + text
    s["tokenizer/unigram.json"] = _tok(
        {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0], ["\u2581", -1.0], ["h", -2.0], ["hello", -1.5]]},
        normalizer={"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Replace", "pattern": {"String": " "},
                                                                         "content": "\u2581"}]},
        pre={"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"}) + text
    # issue 13 items 1, 2, 4: a huge id, 40 growing normalizers, a negative post-processor id,
    # several strings of one id
    s["tokenizer/hugeid.json"] = _tok({"type": "BPE", "vocab": {"a": 0, "b": 1073741823}, "merges": []}) + text
    s["tokenizer/grow.json"] = _tok({"type": "BPE", "vocab": {"a": 0}, "merges": []}, normalizer={
        "type": "Sequence", "normalizers": [{"type": "Replace", "pattern": {"String": "a"}, "content": "aa"}] * 40}) + text
    s["tokenizer/negpost.json"] = _tok({"type": "BPE", "vocab": {"a": 0}, "merges": []}, post={
        "type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "X", "type_id": 0}},
                                                 {"Sequence": {"id": "A", "type_id": 0}}], "pair": [],
        "special_tokens": {"X": {"id": "X", "ids": [-1], "tokens": ["X"]}}}) + text
    s["tokenizer/sharedid.json"] = _tok({"type": "BPE", "vocab": {"a": 0, "b": 0, "c": 1}, "merges": []}) + text
    s["tokenizer/fixture.json"] = open("tests/fixtures/llama-dense/hf/tokenizer.json", "rb").read()[:16000]

    # chat templates
    chatml = ("{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
              "'<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
              "{%- endif %}")
    s["chat_template/chatml.jinja"] = chatml.encode()
    s["chat_template/qwen3.jinja"] = json.load(open("tests/fixtures/tokenizers/qwen3/tokenizer_config.json"))[
        "chat_template"].encode() + b"\0" + json.dumps({"enable_thinking": False, "tools": [{"name": "f"}]}).encode()
    s["chat_template/empty.jinja"] = b"{{ '' }}"
    s["chat_template/intmin.jinja"] = (b"{{ (-9223372036854775807 - 1) | abs }}{{ 5 % (-9223372036854775807 - 1) }}"
                                       b"{{ (-9223372036854775807 - 1) is divisibleby(-1) }}")
    s["chat_template/range.jinja"] = (b"{{ range(9223372036854775800, 9223372036854775807, 3) | list }}"
                                      b"{{ [1, 2, 3][1::9223372036854775807] }}{{ 'abc'[::-9223372036854775807 - 1] }}")
    s["chat_template/big.jinja"] = b"{% for i in range(100000) %}{{ 'a b c d e f g ' }}{% endfor %}"
    s["chat_template/macros.jinja"] = (b"{% macro m(x, y=2) %}{{ x ~ y ~ caller() if caller else '' }}{% endmacro %}"
                                       b"{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
                                       b"{{ m.content | trim | upper | replace('A', 'b') }}{% endfor %}{{ ns.n }}"
                                       b"{{ messages | map(attribute='role') | join(',') }}{{ {'a': 1} | tojson }}")

    # HF config.json
    for fam in ("llama-dense", "mixtral", "qwen2moe", "olmoe"):
        s[f"hf_config/{fam}.json"] = open(f"tests/fixtures/{fam}/hf/config.json", "rb").read()
    base = json.load(open("tests/fixtures/llama-dense/hf/config.json"))
    for name, edit in (("rope-linear0", {"rope_scaling": {"rope_type": "linear", "factor": 0}}),
                       ("rope-yarn-neg", {"rope_scaling": {"rope_type": "yarn", "factor": -1}}),
                       ("rope-llama3-ctx0", {"rope_scaling": {"rope_type": "llama3", "factor": 8,
                                                              "original_max_position_embeddings": 0}}),
                       ("ctx-2p31", {"max_position_embeddings": 2 ** 31}),
                       ("heads-string", {"num_attention_heads": "4"})):
        c = dict(base)
        c.update(edit)
        s[f"hf_config/{name}.json"] = json.dumps(c).encode()
    s["hf_config/theta-inf.json"] = json.dumps(base).replace('"rope_theta": 500000.0', '"rope_theta": 1e400').encode()
    mx = json.load(open("tests/fixtures/mixtral/hf/config.json"))
    mx["num_local_experts"] = "8"
    s["hf_config/experts-string.json"] = json.dumps(mx).encode()

    # run-time config files
    s["runtime_config/all.json"] = json.dumps({
        "threads": 2, "max_seq_len": 512, "n_batch": 32, "moe_top_k": 2, "router_temperature": 1.0, "moe_top_p": 0.9,
        "moe_k_min": 1, "moe_k_max": 4, "n_seq": 2, "n_keep": 4, "mem_budget": "1.5GiB", "expert_pool": 1048576,
        "cache_policy": "lfu", "prefetch": True, "direct_io": False, "usage_stats": 1, "io_threads": 2,
        "cache_type_k": "q8_0", "cache_type_v": "f16", "ctx_shift": True, "mla": "latent",
        "flash_attn": "auto"}).encode()
    s["runtime_config/huge.json"] = b'{"threads": 1e20, "io_threads": -1e300, "max_seq_len": 2147483648}'
    s["runtime_config/types.json"] = b'{"n_seq": "2", "mem_budget": "12XB", "ctx_shift": 1}'

    # request bodies of colibri serve: the first byte picks the endpoint (fuzz_serve_request.c)
    chat = {"model": "colibri-tiny", "messages": [{"role": "system", "content": "Be brief."},
                                                 {"role": "user", "content": [{"type": "text", "text": "Hi <s>"}]}],
            "max_tokens": 8, "temperature": 0.7, "top_p": 0.9, "stop": ["\n", "end"], "seed": 3,
            "logprobs": True, "top_logprobs": 3, "stream": True, "stream_options": {"include_usage": True}}
    s["serve_request/chat.bin"] = b"\x00" + json.dumps(chat).encode()
    s["serve_request/chat-min.bin"] = b"\x00" + b'{"messages":[{"role":"user","content":"Once"}]}'
    s["serve_request/completion.bin"] = b"\x01" + json.dumps(
        {"prompt": "Once upon a time", "max_tokens": 4, "logprobs": 2, "echo": False, "stop": "x",
         "presence_penalty": 0.5, "frequency_penalty": -0.5, "top_k": 40, "min_p": 0.05, "ignore_eos": True}).encode()
    s["serve_request/completion-ids.bin"] = b"\x01" + b'{"prompt":[1,50,60,70],"max_tokens":2}'
    s["serve_request/tokenize.bin"] = b"\x02" + b'{"content":"Once upon <s> a time","add_special":true,"parse_special":true}'
    s["serve_request/detokenize.bin"] = b"\x03" + b'{"tokens":[1,50,60,70,2]}'
    return s


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fuzz/corpus"
    seeds = {
        "gguf/sample-v3.gguf": sample(3, 32),
        "gguf/sample-v2-align64.gguf": sample(2, 64),
        "gguf/unknown-type.gguf": gguf(3, [("general.architecture", STR, "llama")],
                                       [("blk.0.iq2.weight", [256, 2], 16),
                                        ("output.weight", [32, 2], 8)]),
        "gguf/mixtral-f32-mini.gguf": mini_from_fixture("tests/fixtures/mixtral/model-f32.gguf"),
        "gguf/mixtral-q4_k_m-mini.gguf":
            mini_from_fixture("tests/fixtures/mixtral/model-q4_k_m.gguf", n_tensors=12),
        "gguf/gpt2-vocab-mini.gguf": mini_from_fixture(
            "tests/fixtures/tokenizers/llamacpp-suite/ggml-vocab-gpt-2.gguf", n_arr=24),
        "safetensors/tiny.safetensors": safetensors(
            [("a.weight", "F32", [2, 3]), ("b.bias", "F16", [4]), ("c", "BF16", [1, 1, 2, 2])]),
        "safetensors/empty.safetensors": safetensors([], {"format": "pt"}),
        "safetensors/mixtral-mini.safetensors":
            mini_safetensors("tests/fixtures/mixtral/hf/model.safetensors"),
    }
    seeds.update(text_seeds())
    for rel, data in seeds.items():
        path = os.path.join(out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
