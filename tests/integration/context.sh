#!/bin/sh
# The context through the CLI (docs/ATTENTION.md): --prompt-cache saves and restores an
# evaluated prompt (the continuation is the same as without it; another model, cache type or
# a damaged file is a one-line error), and a full context shifts instead of failing (run,
# chat) or stops cleanly with --no-context-shift.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/reference/it_lib.sh"
need_colibri
M="$ROOT/models/colibri-tiny.colibri"
P="Once upon a time there was a little girl who lived in a small village near the forest."
PC="$WORK/prompt.state"

# 1. text prompt: fresh, then saving, then restoring: the same greedy text
"$COLIBRI" run -m "$M" -p "$P" -n 24 --temp 0 >"$WORK/fresh.txt" 2>"$WORK/err" || fail "fresh run: $(cat "$WORK/err")"
"$COLIBRI" run -m "$M" -p "$P" -n 24 --temp 0 --prompt-cache "$PC" >"$WORK/save.txt" 2>"$WORK/err.save" ||
    fail "saving run: $(cat "$WORK/err.save")"
grep -q "prompt cache .*saved" "$WORK/err.save" || fail "no state saved: $(cat "$WORK/err.save")"
[ -s "$PC" ] || fail "no state file"
"$COLIBRI" run -m "$M" -p "$P" -n 24 --temp 0 --prompt-cache "$PC" >"$WORK/load.txt" 2>"$WORK/err.load" ||
    fail "restoring run: $(cat "$WORK/err.load")"
grep -q "tokens reused" "$WORK/err.load" || fail "state not reused: $(cat "$WORK/err.load")"
grep -q "saved" "$WORK/err.load" && fail "an unchanged state was written again"
cmp -s "$WORK/fresh.txt" "$WORK/save.txt" || fail "saving changed the text"
cmp -s "$WORK/fresh.txt" "$WORK/load.txt" || fail "the restored prompt gave other text: $(cat "$WORK/load.txt")"
# a longer prompt with the same start reuses the prefix and saves again
"$COLIBRI" run -m "$M" -p "$P And then" -n 8 --temp 0 --prompt-cache "$PC" >/dev/null 2>"$WORK/err" ||
    fail "prefix run: $(cat "$WORK/err")"
grep -q "saved" "$WORK/err" && grep -q "tokens reused" "$WORK/err" || fail "prefix not reused and saved: $(cat "$WORK/err")"

# 2. token ids: the same greedy ids with and without the cache
toks=1,100,200,300,400,500,600,700,800,900,1000,1100
"$COLIBRI" run -m "$M" --tokens "$toks" -n 12 >"$WORK/ids0" 2>/dev/null
"$COLIBRI" run -m "$M" --tokens "$toks" -n 12 --prompt-cache "$WORK/ids.state" >"$WORK/ids1" 2>/dev/null
"$COLIBRI" run -m "$M" --tokens "$toks" -n 12 --prompt-cache "$WORK/ids.state" >"$WORK/ids2" 2>"$WORK/err"
cmp -s "$WORK/ids0" "$WORK/ids1" && cmp -s "$WORK/ids0" "$WORK/ids2" || fail "ids differ with the prompt cache"
grep -q "11 of the prompt's 12 tokens reused" "$WORK/err" || fail "ids: not reused: $(cat "$WORK/err")"

# 3. refusals: one 'colibri: ...' line naming the cause, status 1
refuse() { # PATTERN ARGS...
    pat=$1; shift
    if "$COLIBRI" run "$@" >/dev/null 2>"$WORK/err"; then fail "accepted: $*"; return; fi
    [ "$(wc -l <"$WORK/err")" -eq 1 ] && grep -q "$pat" "$WORK/err" || fail "refusal of [$*] unclear: $(cat "$WORK/err")"
}
refuse "cache" -m "$M" --tokens "$toks" -n 2 -ctk q8_0 --prompt-cache "$WORK/ids.state"
refuse "another model" -m "$FX/mixtral/model-f32.gguf" --tokens 1,2,3 -n 2 --prompt-cache "$WORK/ids.state"
head -c 2000 "$WORK/ids.state" >"$WORK/trunc.state"
refuse "truncated" -m "$M" --tokens "$toks" -n 2 --prompt-cache "$WORK/trunc.state"
cp "$WORK/ids.state" "$WORK/bad.state"
printf 'X' | dd of="$WORK/bad.state" bs=1 seek=3000 conv=notrunc 2>/dev/null
refuse "checksum" -m "$M" --tokens "$toks" -n 2 --prompt-cache "$WORK/bad.state"
printf 'not a state' >"$WORK/junk.state"
refuse "not a colibri state" -m "$M" --tokens "$toks" -n 2 --prompt-cache "$WORK/junk.state"

# 4. a full context: run -p shifts and keeps generating; --no-context-shift stops, status 0
"$COLIBRI" run -m "$M" -p "$P" -n 80 --temp 0 --max-seq-len 40 --keep 4 >"$WORK/shift.txt" 2>"$WORK/err" ||
    fail "run with a context shift: $(cat "$WORK/err")"
grep -q "generated 80 tokens" "$WORK/err" || fail "shift: not 80 tokens: $(cat "$WORK/err")"
"$COLIBRI" run -m "$M" -p "$P" -n 80 --temp 0 --max-seq-len 40 --no-context-shift >/dev/null 2>"$WORK/err" ||
    fail "--no-context-shift: $(cat "$WORK/err")"
grep -q "context is full" "$WORK/err" || fail "--no-context-shift: no message: $(cat "$WORK/err")"
# chat: a conversation longer than the context goes on
printf 'Tell me about the city.\nWhat did he say then?\nAnd after that?\nWhy?\n' |
    "$COLIBRI" chat -m "$M" -n 30 --temp 0 --max-seq-len 64 >"$WORK/chat.txt" 2>"$WORK/chat.err" ||
    fail "chat with a context shift: $(cat "$WORK/chat.err")"
[ "$(grep -c . "$WORK/chat.txt")" -ge 4 ] || fail "chat: $(grep -c . "$WORK/chat.txt") answers"
grep -q "no longer fits" "$WORK/chat.err" && fail "chat refused a turn with context shift on"
finish context
