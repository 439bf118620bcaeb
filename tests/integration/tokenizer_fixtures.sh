#!/bin/sh
# Tokenizer oracle test: drives `$COLIBRI tokenize` over EVERY case of the public fixtures in
# tests/fixtures/tokenizers (see its README.md):
#   llama2/, qwen3/, wordpiece/, wordlevel/, unigram/ cases.jsonl: ids (added tokens parsed,
#     nothing added), ids_special (BOS/EOS as the files say), decoded (decode of ids, special
#     tokens kept), decoded_skip (decode of ids_special without special tokens);
#   unigram/vocab-t5.gguf: the same SentencePiece model as a GGUF "t5" vocabulary vs
#     SentencePiece's own ids;
#   llamacpp-suite/*.gguf: every .inp input against its .out line (no BOS, no special parsing);
#   gpt-oss/cases.jsonl (o200k, from tokenizer.json.xz): ids, ids_special, ids_nospecial (special
#     tokens left as text), decoded, decoded_skip; gpt-oss/decode.jsonl: ids cutting characters.
# Prints "N/M cases passed" per file and check; exits non-zero on any mismatch.
# Env: COLIBRI (the CLI), PYTHON (default /usr/bin/python3), WORK (scratch dir, optional).
set -eu
COLIBRI=${COLIBRI:-build/colibri}
PYTHON=${PYTHON:-/usr/bin/python3}
FIX=${FIX:-tests/fixtures/tokenizers}
WORK=${WORK:-${TMPDIR:-/tmp}/colibri-tokfix.$$}
mkdir -p "$WORK"

exec "$PYTHON" - "$COLIBRI" "$FIX" "$WORK" <<'EOF'
import json, lzma, os, shutil, subprocess, sys

colibri, fix, work = sys.argv[1], sys.argv[2], sys.argv[3]
failed = 0
total_files = 0

def run(tok, lines, *flags):
    """Feeds JSON lines to `colibri tokenize --jsonl`, returns the output lines."""
    inp = "".join(json.dumps(l, ensure_ascii=False) + "\n" for l in lines).encode("utf-8")
    p = subprocess.run([colibri, "tokenize", "--tokenizer", tok, "--jsonl", *flags],
                       input=inp, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        print("  colibri tokenize failed (exit %d): %s" % (p.returncode, p.stderr.decode(errors="replace").strip()))
        return None
    out = p.stdout.decode("utf-8", errors="surrogateescape").split("\n")
    if out and out[-1] == "":
        out.pop()
    return out

def ids_of(line):
    return [int(x) for x in line.split()] if line.strip() else []

def report(name, got, want, texts, fmt):
    global failed
    if got is None or len(got) != len(want):
        print("%s: 0/%d cases passed (bad output: %s lines)" % (name, len(want), "no" if got is None else len(got)))
        failed += 1
        return
    bad = [i for i in range(len(want)) if got[i] != want[i]]
    print("%s: %d/%d cases passed" % (name, len(want) - len(bad), len(want)))
    for i in bad[:5]:
        print("  case %d text=%r\n    want %s\n    got  %s" % (i, texts[i][:120], fmt(want[i]), fmt(got[i])))
    if bad:
        failed += 1

def check_cases(name):
    """ids (added tokens parsed, nothing added), ids_special, decoded of <name>/cases.jsonl;
    returns the cases and the output of decoding ids_special with --skip-special."""
    global total_files
    d = os.path.join(fix, name)
    tok = os.path.join(d, "tokenizer.json")
    cases = [json.loads(l) for l in open(os.path.join(d, "cases.jsonl"), encoding="utf-8")]
    texts = [c["text"] for c in cases]
    total_files += 1
    out = run(tok, texts)
    report(name + "/cases.jsonl ids", None if out is None else [ids_of(l) for l in out],
           [c["ids"] for c in cases], texts, str)
    out = run(tok, texts, "--special")
    report(name + "/cases.jsonl ids_special", None if out is None else [ids_of(l) for l in out],
           [c["ids_special"] for c in cases], texts, str)
    out = run(tok, [c["ids"] for c in cases], "--decode")
    report(name + "/cases.jsonl decoded", None if out is None else [json.loads(l) for l in out],
           [c["decoded"] for c in cases], texts, repr)
    return cases, texts, run(tok, [c["ids_special"] for c in cases], "--decode", "--skip-special")

for name in ("llama2", "qwen3"):
    cases, texts, out = check_cases(name)
    want = [c["decoded"] for c in cases]
    # skip_special on ids_special: the BOS goes away; identical to decoding ids when ids hold
    # no special token themselves
    sel = [i for i, c in enumerate(cases) if not any(x in (0, 1, 2) for x in c["ids"])] if name == "llama2" \
        else [i for i, c in enumerate(cases) if not any(x >= 151643 for x in c["ids"])]
    if out is not None and len(out) == len(cases):
        got = [json.loads(out[i]) for i in sel]
        report(name + "/cases.jsonl decoded (skip_special)", got, [want[i] for i in sel],
               [texts[i] for i in sel], repr)
    else:
        report(name + "/cases.jsonl decoded (skip_special)", None, sel, texts, repr)

# qwen3 chat.jsonl: the rendered conversations tokenize to rendered_ids
chat = [json.loads(l) for l in open(os.path.join(fix, "qwen3", "chat.jsonl"), encoding="utf-8")]
out = run(os.path.join(fix, "qwen3", "tokenizer.json"), [c["rendered"] for c in chat])
report("qwen3/chat.jsonl rendered_ids", None if out is None else [ids_of(l) for l in out],
       [c["rendered_ids"] for c in chat], [c["id"] for c in chat], str)

# wordpiece/, wordlevel/, unigram/ (ids from Hugging Face's Rust tokenizers, see the README)
for name in ("wordpiece", "wordlevel", "unigram"):
    cases, texts, out = check_cases(name)
    report(name + "/cases.jsonl decoded_skip", None if out is None else [json.loads(l) for l in out],
           [c["decoded_skip"] for c in cases], texts, repr)

# gpt-oss/ (o200k: byte-level BPE, ignore_merges, the o200k regex, harmony special tokens; ids
# from Hugging Face's tokenizers): tokenizer.json is committed xz-compressed, unpacked here with
# Python's lzma beside a copy of tokenizer_config.json and loaded from there like any other
oss = os.path.join(fix, "gpt-oss")
oss_work = os.path.join(work, "gpt-oss")
os.makedirs(oss_work, exist_ok=True)
oss_tok = os.path.join(oss_work, "tokenizer.json")
with lzma.open(os.path.join(oss, "tokenizer.json.xz")) as f, open(oss_tok, "wb") as o:
    shutil.copyfileobj(f, o)
shutil.copy(os.path.join(oss, "tokenizer_config.json"), oss_work)
oss_cases = [json.loads(l) for l in open(os.path.join(oss, "cases.jsonl"), encoding="utf-8")]
oss_texts = [c["text"] for c in oss_cases]
total_files += 1
for field, flags in (("ids", ()), ("ids_special", ("--special",)), ("ids_nospecial", ("--no-parse-special",))):
    out = run(oss_tok, oss_texts, *flags)
    report("gpt-oss/cases.jsonl " + field, None if out is None else [ids_of(l) for l in out],
           [c[field] for c in oss_cases], oss_texts, str)
for field, flags in (("decoded", ()), ("decoded_skip", ("--skip-special",))):
    out = run(oss_tok, [c["ids"] for c in oss_cases], "--decode", *flags)
    report("gpt-oss/cases.jsonl " + field, None if out is None else [json.loads(l) for l in out],
           [c[field] for c in oss_cases], oss_texts, repr)
dec = [json.loads(l) for l in open(os.path.join(oss, "decode.jsonl"), encoding="utf-8")]
out = run(oss_tok, [d["ids"] for d in dec], "--decode")
report("gpt-oss/decode.jsonl decoded", None if out is None else [json.loads(l) for l in out],
       [d["decoded"] for d in dec], [str(d["ids"]) for d in dec], repr)

# the same SentencePiece model as llama.cpp's GGUF "t5" vocabulary, against SentencePiece itself
# (texts with user-defined pieces: SentencePiece prefixes the whole text once, llama.cpp each
# fragment between them, as tokenizers does: there the expected ids are tokenizers')
spm_cases = [json.loads(l) for l in open(os.path.join(fix, "unigram", "spm-cases.jsonl"), encoding="utf-8")]
hf_ids = {c["text"]: c["ids"] for c in (json.loads(l) for l in open(os.path.join(fix, "unigram", "cases.jsonl"), encoding="utf-8"))}
want = [hf_ids[c["text"]] if c.get("user_defined") else c["ids"] for c in spm_cases]
total_files += 1
out = run(os.path.join(fix, "unigram", "vocab-t5.gguf"), [c["text"] for c in spm_cases], "--no-parse-special")
report("unigram/vocab-t5.gguf vs spm-cases.jsonl", None if out is None else [ids_of(l) for l in out],
       want, [c["text"] for c in spm_cases], str)

suite = os.path.join(fix, "llamacpp-suite")
for vocab in sorted(f for f in os.listdir(suite) if f.endswith(".gguf")):
    path = os.path.join(suite, vocab)
    raw = open(path + ".inp", "rb").read().decode("utf-8")
    sep = "\n__ggml_vocab_test__\n"
    inputs, pos = [], 0
    while True:
        k = raw.find(sep, pos)
        if k < 0:
            break
        inputs.append(raw[pos:k])
        pos = k + len(sep)
    want = [ids_of(l) for l in open(path + ".out", encoding="utf-8").read().split("\n")[:len(inputs)]]
    total_files += 1
    out = run(path, inputs, "--no-parse-special")
    report("llamacpp-suite/" + vocab, None if out is None else [ids_of(l) for l in out], want, inputs, str)

# throughput (informational): a ~2 MB English-like text made from the cases and their words
import random
rnd = random.Random(7)
words = " ".join(texts).split()
paras, size = [], 0
while size < 2000000:
    p = " ".join(rnd.choice(words) for _ in range(rnd.randint(20, 120)))
    if rnd.random() < 0.1:
        p = rnd.choice(texts)
    paras.append(p)
    size += len(p.encode("utf-8")) + 1
bench = os.path.join(work, "bench.txt")
open(bench, "w", encoding="utf-8").write("\n".join(paras))
for name, path in (("llama2", os.path.join(fix, "llama2", "tokenizer.json")),
                   ("qwen3", os.path.join(fix, "qwen3", "tokenizer.json")), ("gpt-oss", oss_tok)):
    p = subprocess.run([colibri, "tokenize", "--tokenizer", path,
                        "--bench", bench], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    print("%s %s" % (name, p.stdout.decode(errors="replace").strip()))
    if p.returncode != 0:
        failed += 1

os.remove(bench)
shutil.rmtree(oss_work)
print("tokenizer fixtures: %s" % ("all passed" if not failed else "%d checks FAILED" % failed))
sys.exit(1 if failed else 0)
EOF
