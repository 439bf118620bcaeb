"""Byte-level BPE tokenizer (GPT-2 style), trained and applied in pure Python.

Used by tools/train_tiny_moe.py to build the tokenizer of the bundled tiny model and to export it
as a Hugging Face `tokenizer.json`.  No third-party code: the byte-to-unicode table, the
pre-tokenizer and the merge loop are written from their published descriptions.

Pre-tokenizer
    The split is exactly the one of the GPT-2 regular expression

        PRETOKENIZE_REGEX = 's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+

    (stored verbatim in tokenizer.json as a Split pre-tokenizer).  Python's `re` has no \\p{..},
    so `pretokenize()` implements the same leftmost-first alternation by hand, with
        \\p{L}  = Unicode general category L*   (unicodedata.category(c)[0] == 'L')
        \\p{N}  = Unicode general category N*
        \\s     = the Unicode White_Space property (WHITE_SPACE below)
    `tools/check_tokenizer.mjs` checks the equivalence against a real regex engine.

Byte level
    Every pre-token is UTF-8 encoded and each byte is mapped to a printable code point with the
    GPT-2 table (`bytes_to_unicode`): printable Latin-1 bytes map to themselves, the other 68 bytes
    to U+0100.. in increasing byte order.  Token strings in the vocabulary are strings over that
    alphabet (so a leading space shows as 'Ġ', a newline as 'Ċ').

Vocabulary layout (ids)
    0..255                 the 256 single bytes, id == byte value
    256..256+n_merges-1    one token per merge, in merge order (rank r creates id 256+r)
    then the special tokens (SPECIAL_TOKENS order)

Encoding a pre-token: start from its bytes; repeatedly take the adjacent pair with the lowest
merge rank and merge all of its occurrences left to right; stop when no adjacent pair has a
rank.  This is what the Hugging Face BPE model does with the same merges.
"""

import collections
import heapq
import json
import unicodedata

PRETOKENIZE_REGEX = (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+"
                     r"|\s+(?!\S)|\s+")

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]

# Unicode White_Space property (what \s means for a Unicode regex engine).
WHITE_SPACE = frozenset([0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680,
                         0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007,
                         0x2008, 0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000])

CONTRACTIONS = ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d")

_CLASS_CACHE = {}


def char_class(ch):
    """'S' whitespace, 'L' letter, 'N' number, 'O' anything else."""
    c = _CLASS_CACHE.get(ch)
    if c is None:
        if ord(ch) in WHITE_SPACE:
            c = "S"
        else:
            cat = unicodedata.category(ch)[0]
            c = cat if cat in ("L", "N") else "O"
        _CLASS_CACHE[ch] = c
    return c


def pretokenize(text):
    """Split `text` exactly like PRETOKENIZE_REGEX (leftmost-first alternation, greedy)."""
    out = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "'":
            hit = None
            for s in CONTRACTIONS:
                if text.startswith(s, i):
                    hit = s
                    break
            if hit is not None:
                out.append(hit)
                i += len(hit)
                continue
        cls = char_class(ch)
        if cls != "S" or (ch == " " and i + 1 < n and char_class(text[i + 1]) != "S"):
            # ' ?\p{L}+' | ' ?\p{N}+' | ' ?[^\s\p{L}\p{N}]+': an optional U+0020 then a run of
            # one class.  A leading space only binds when the next char is not whitespace.
            start = i
            if cls == "S":
                i += 1
                cls = char_class(text[i])
            j = i + 1
            while j < n and char_class(text[j]) == cls:
                j += 1
            out.append(text[start:j])
            i = j
            continue
        # whitespace run
        j = i + 1
        while j < n and char_class(text[j]) == "S":
            j += 1
        if j == n or j - i == 1:
            # '\s+(?!\S)' takes the run up to the end of text; a single whitespace char followed
            # by non-whitespace fails that alternative and '\s+' takes it.
            out.append(text[i:j])
            i = j
        else:
            # '\s+(?!\S)' backtracks one char so that the last whitespace char stays for the
            # next token (typically ' word').
            out.append(text[i:j - 1])
            i = j - 1
    return out


def bytes_to_unicode():
    """GPT-2 byte -> printable unicode char table (list of 256 chars, index = byte)."""
    keep = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1))
            + list(range(ord("\xae"), ord("\xff") + 1)))
    keep_set = set(keep)
    table = [None] * 256
    extra = 0
    for b in range(256):
        if b in keep_set:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_CHARS = bytes_to_unicode()
CHAR_BYTES = {c: b for b, c in enumerate(BYTE_CHARS)}


class BPETokenizer:
    def __init__(self, merges):
        """merges: list of (left_id, right_id); merge r creates id 256 + r."""
        self.merges = list(merges)
        self.token_bytes = [bytes([b]) for b in range(256)]
        for a, b in self.merges:
            self.token_bytes.append(self.token_bytes[a] + self.token_bytes[b])
        self.ranks = {pair: r for r, pair in enumerate(self.merges)}
        self.n_bpe = 256 + len(self.merges)
        self.special = {s: self.n_bpe + k for k, s in enumerate(SPECIAL_TOKENS)}
        self.vocab_size = self.n_bpe + len(SPECIAL_TOKENS)
        self._cache = {}

    @property
    def bos_id(self):
        return self.special["<|endoftext|>"]

    def token_str(self, tid):
        if tid >= self.n_bpe:
            return SPECIAL_TOKENS[tid - self.n_bpe]
        return "".join(BYTE_CHARS[b] for b in self.token_bytes[tid])

    def _bpe(self, piece):
        ids = self._cache.get(piece)
        if ids is not None:
            return ids
        syms = list(piece.encode("utf-8"))
        ranks = self.ranks
        while len(syms) > 1:
            best = None
            best_rank = None
            for k in range(len(syms) - 1):
                r = ranks.get((syms[k], syms[k + 1]))
                if r is not None and (best_rank is None or r < best_rank):
                    best_rank = r
                    best = (syms[k], syms[k + 1])
            if best is None:
                break
            new_id = 256 + best_rank
            merged = []
            k = 0
            while k < len(syms):
                if k + 1 < len(syms) and syms[k] == best[0] and syms[k + 1] == best[1]:
                    merged.append(new_id)
                    k += 2
                else:
                    merged.append(syms[k])
                    k += 1
            syms = merged
        self._cache[piece] = syms
        return syms

    def encode(self, text, bos=False):
        """Token ids of `text`; special-token strings in the text map to their ids (as the
        added_tokens of tokenizer.json do); bos=True prepends <|endoftext|>."""
        ids = [self.bos_id] if bos else []
        pos = 0
        while pos < len(text):
            nxt = None
            for s, sid in self.special.items():
                k = text.find(s, pos)
                if k >= 0 and (nxt is None or k < nxt[0]):
                    nxt = (k, s, sid)
            end = nxt[0] if nxt else len(text)
            for piece in pretokenize(text[pos:end]):
                ids.extend(self._bpe(piece))
            if nxt is None:
                break
            ids.append(nxt[2])
            pos = nxt[0] + len(nxt[1])
        return ids

    def decode(self, ids):
        out = bytearray()
        for t in ids:
            if t >= self.n_bpe:
                out += SPECIAL_TOKENS[t - self.n_bpe].encode("utf-8")
            else:
                out += self.token_bytes[t]
        return out.decode("utf-8", errors="replace")

    # ---------------------------------------------------------------- HF export
    def to_hf_json(self):
        vocab = {self.token_str(t): t for t in range(self.vocab_size)}
        assert len(vocab) == self.vocab_size, "duplicate token strings"
        merges = [self.token_str(a) + " " + self.token_str(b) for a, b in self.merges]
        added = [{"id": sid, "content": s, "single_word": False, "lstrip": False,
                  "rstrip": False, "normalized": False, "special": True}
                 for s, sid in self.special.items()]
        bos = "<|endoftext|>"
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": added,
            "normalizer": None,
            "pre_tokenizer": {
                "type": "Sequence",
                "pretokenizers": [
                    {"type": "Split", "pattern": {"Regex": PRETOKENIZE_REGEX},
                     "behavior": "Isolated", "invert": False},
                    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                     "use_regex": False},
                ],
            },
            "post_processor": {
                "type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": bos, "type_id": 0}},
                           {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": bos, "type_id": 0}},
                         {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": bos, "type_id": 1}},
                         {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {bos: {"id": bos, "ids": [self.bos_id], "tokens": [bos]}},
            },
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                        "use_regex": True},
            "model": {
                "type": "BPE",
                "dropout": None,
                "unk_token": None,
                "continuing_subword_prefix": None,
                "end_of_word_suffix": None,
                "fuse_unk": False,
                "byte_fallback": False,
                "ignore_merges": False,
                "vocab": vocab,
                "merges": merges,
            },
        }

    def save_json(self, path):
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_hf_json(), f, ensure_ascii=False, indent=1)
            f.write("\n")


def train_bpe(texts, vocab_size, log=print):
    """Learn vocab_size - 256 - len(SPECIAL_TOKENS) merges from an iterable of texts.

    Deterministic: the most frequent adjacent pair (counted over pre-token types weighted by
    frequency, never across pre-token boundaries) is merged; ties go to the smallest
    (left_id, right_id)."""
    n_merges = vocab_size - 256 - len(SPECIAL_TOKENS)
    word_counts = collections.Counter()
    for t in texts:
        word_counts.update(pretokenize(t))
    words = [list(w.encode("utf-8")) for w in word_counts]
    counts = list(word_counts.values())
    log(f"bpe: {sum(counts)} pre-tokens, {len(words)} types, {n_merges} merges to learn")

    pair_count = collections.defaultdict(int)
    pair_words = collections.defaultdict(set)
    for wi, w in enumerate(words):
        c = counts[wi]
        for k in range(len(w) - 1):
            p = (w[k], w[k + 1])
            pair_count[p] += c
            pair_words[p].add(wi)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)

    merges = []
    while len(merges) < n_merges and heap:
        negc, p = heapq.heappop(heap)
        cur = pair_count.get(p, 0)
        if cur != -negc:
            continue  # stale entry; the current count has its own entry
        if cur < 2:
            break
        new_id = 256 + len(merges)
        merges.append(p)
        changed = set()
        for wi in list(pair_words[p]):
            w = words[wi]
            c = counts[wi]
            for k in range(len(w) - 1):
                q = (w[k], w[k + 1])
                pair_count[q] -= c
                changed.add(q)
                pair_words[q].discard(wi)
            merged = []
            k = 0
            while k < len(w):
                if k + 1 < len(w) and w[k] == p[0] and w[k + 1] == p[1]:
                    merged.append(new_id)
                    k += 2
                else:
                    merged.append(w[k])
                    k += 1
            words[wi] = merged
            for k in range(len(merged) - 1):
                q = (merged[k], merged[k + 1])
                pair_count[q] += c
                changed.add(q)
                pair_words[q].add(wi)
        for q in changed:
            c = pair_count[q]
            if c > 0:
                heapq.heappush(heap, (-c, q))
            else:
                pair_count.pop(q, None)
                pair_words.pop(q, None)
        if len(merges) % 500 == 0:
            log(f"bpe: {len(merges)} merges, last count {cur}")
    if len(merges) < n_merges:
        raise RuntimeError(f"only {len(merges)} merges could be learned")
    return BPETokenizer(merges)
