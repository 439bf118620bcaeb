#!/bin/sh
# The bundled model (models/colibri-tiny.colibri, docs/MODEL.md) through the CLI: it verifies,
# generates English-like text, chats with piped input, and its perplexity on the held-out text
# agrees with the training script's own evaluation (models/colibri-tiny.eval.json) within 1%.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/reference/it_lib.sh"
need_colibri
M="$ROOT/models/colibri-tiny.colibri"
EVAL="$ROOT/models/colibri-tiny.eval.json"
HELD="$ROOT/models/colibri-tiny.heldout.txt"
[ -f "$M" ] || { echo "FAIL: $M is missing"; exit 1; }
size=$(stat -c %s "$M")
[ "$size" -le $((16 * 1024 * 1024)) ] || fail "model is $size bytes (limit 16 MiB)"
"$COLIBRI" verify "$M" >/dev/null 2>"$WORK/err" || fail "verify: $(cat "$WORK/err")"

# generation: mostly letters, spaces and punctuation, several distinct words
"$COLIBRI" run -m "$M" -p "The" -n 48 --seed 7 >"$WORK/gen.txt" 2>"$WORK/err" || fail "run -p: $(cat "$WORK/err")"
echo "generated: $(head -c 300 "$WORK/gen.txt")"
"$PYTHON" - "$WORK/gen.txt" <<'PY' || fail "generated text does not look like English"
import sys, re
t = open(sys.argv[1], encoding='utf-8').read()
words = re.findall(r"[A-Za-z]+", t)
letters = sum(c.isalpha() or c.isspace() or c in ",.;:'\"!?-()" for c in t)
assert len(words) >= 10 and len(set(words)) >= 8, (len(words), len(set(words)))
assert letters >= 0.9 * len(t), letters / max(1, len(t))
PY
# same seed, same text; greedy is reproducible too
"$COLIBRI" run -m "$M" -p "The" -n 48 --seed 7 >"$WORK/gen2.txt" 2>/dev/null
cmp -s "$WORK/gen.txt" "$WORK/gen2.txt" || fail "the same seed gave different text"

# the output reads as text: the prompt, then its continuation; the timings on a line of their
# own on stderr even when both streams go to one file (issue 12)
"$COLIBRI" run -m "$M" -p "Once upon a time" -n 16 --seed 7 >"$WORK/both.txt" 2>&1 || fail "run -p (one stream) failed"
head -c 16 "$WORK/both.txt" | grep -qx "Once upon a time" || fail "run -p does not start with the prompt: $(head -c 80 "$WORK/both.txt")"
[ "$(grep -c '^colibri: prompt [0-9]* tokens' "$WORK/both.txt")" -eq 1 ] ||
    fail "the timing line is not a line of its own: $(tail -c 200 "$WORK/both.txt")"
"$COLIBRI" run -m "$M" -p "Once upon a time" -n 16 --seed 7 >"$WORK/out.txt" 2>"$WORK/err.txt"
grep -q "tok/s" "$WORK/out.txt" && fail "timings on stdout"
grep -q "tok/s" "$WORK/err.txt" || fail "no timings on stderr"
"$COLIBRI" run -m "$M" -p "Once upon a time" -n 16 --seed 7 --no-display-prompt >"$WORK/cont.txt" 2>/dev/null
# the continuation alone is the same text without the prompt (its leading space kept)
"$PYTHON" - "$WORK/out.txt" "$WORK/cont.txt" <<'PY' || fail "--no-display-prompt is not the continuation of the echoed run"
import sys
full, cont = (open(p, encoding="utf-8").read() for p in sys.argv[1:3])
assert full == "Once upon a time" + cont, (full[:60], cont[:60])
PY
# special tokens written in a prompt are tokens unless --no-parse-special (llama.cpp's names)
ids=$("$COLIBRI" tokenize -m "$M" --text "<|im_start|>user")
set -- $ids
[ "$#" -ge 2 ] && [ "$1" = "$("$COLIBRI" tokenize -m "$M" --text "<|im_start|>")" ] || fail "tokenize did not parse <|im_start|>: $ids"
noparse=$("$COLIBRI" tokenize -m "$M" --text "<|im_start|>user" --no-parse-special)
[ "$(echo "$noparse" | wc -w)" -gt "$#" ] || fail "--no-parse-special still parsed it: $noparse"
"$COLIBRI" run -m "$M" -p "<|im_start|>user" -n 2 --no-parse-special >/dev/null 2>&1 || fail "run --no-parse-special failed"

# chat with piped input: one answer per line, /reset, end of input ends the program
printf 'Tell me about the city.\n/reset\nWhat did he say?\n' | "$COLIBRI" chat -m "$M" -n 24 --seed 3 \
    >"$WORK/chat.txt" 2>"$WORK/chat.err" || fail "chat exited with an error: $(cat "$WORK/chat.err")"
[ "$(grep -c . "$WORK/chat.txt")" -ge 1 ] || fail "chat printed nothing"
grep -q "conversation reset" "$WORK/chat.err" || fail "chat did not acknowledge /reset"

# perplexity vs the training script's evaluation (same definition, docs/MODEL.md)
if [ -z "${SANITIZE:-}" ]; then
    ctx=$("$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['ctx'])" "$EVAL")
    "$COLIBRI" perplexity -m "$M" -f "$HELD" --ctx "$ctx" >"$WORK/ppl.txt" 2>"$WORK/err" || fail "perplexity: $(tail -1 "$WORK/err")"
    cat "$WORK/ppl.txt"
    "$PYTHON" - "$WORK/ppl.txt" "$EVAL" <<'PY' || fail "perplexity disagrees with the training script"
import json, re, sys
got = float(re.search(r"perplexity: ([0-9.]+)", open(sys.argv[1]).read()).group(1))
ev = json.load(open(sys.argv[2]))
want = ev.get('heldout_ppl_q8_0', ev['heldout_ppl'])
print('colibri %.4f, training script %.4f, difference %.3f%%' % (got, want, 100 * abs(got - want) / want))
assert abs(got - want) <= 0.01 * want
PY
    # what each KV cache type costs against f32 caches (docs/ATTENTION.md's goals: perplexity
    # within 0.1 % for f16, 0.5 % for q8_0); f32 itself (plain path) must be exactly 0
    for t in f32 f16 q8_0 q4_0; do
        "$COLIBRI" perplexity -m "$M" -f "$HELD" --ctx "$ctx" --chunks 60 -ctk $t -ctv $t --kl-divergence \
            >"$WORK/kl.$t" 2>"$WORK/err" || fail "perplexity --kl-divergence -ctk $t: $(tail -1 "$WORK/err")"
    done
    "$PYTHON" - "$WORK"/kl.f32 "$WORK"/kl.f16 "$WORK"/kl.q8_0 "$WORK"/kl.q4_0 <<'PY' || fail "KV cache types: perplexity / KL out of bounds"
import re, sys
r = {}
for path, t in zip(sys.argv[1:], ["f32", "f16", "q8_0", "q4_0"]):
    s = open(path).read()
    ppl = float(re.search(r"^perplexity: ([0-9.]+)", s, re.M).group(1))
    m = re.search(r"f32 reference: perplexity ([0-9.]+) \(([-+0-9.]+) %\); KL divergence mean (\S+) max (\S+); "
                  r"argmax agreement ([0-9.]+) %", s)
    r[t] = (ppl, float(m.group(1)), float(m.group(3)), float(m.group(5)))
    print("%-5s ppl %.4f (f32 %.4f, %+.4f %%) KL mean %.3g argmax %.2f %%" % (t, ppl, r[t][1], 100 * (ppl / r[t][1] - 1),
                                                                           r[t][2], r[t][3]))
ref = r["f32"][0]
assert r["f32"][1:] == (ref, 0.0, 100.0), "f32 against itself is not exact"
for t in ["f16", "q8_0", "q4_0"]:
    assert abs(r[t][1] - ref) <= 1e-4 * ref, "%s: the reference perplexity moved" % t
assert abs(r["f16"][0] / ref - 1) <= 0.001 and abs(r["q8_0"][0] / ref - 1) <= 0.005
assert 0 < r["f16"][2] < r["q8_0"][2] < r["q4_0"][2] < 0.05, "KL not ordered by precision"
assert r["q4_0"][3] >= 90
PY
fi
finish bundled_model
