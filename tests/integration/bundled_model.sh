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
fi
finish bundled_model
