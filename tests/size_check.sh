#!/bin/sh
# tests/size_check.sh BINARY — `make size-check`: the minimal static binary (make static
# MINIMAL=1) is within SIZE_BUDGET bytes, gives the same ids as the full tool (COLIBRI) on the
# bundled model, and refuses a compressed .colibri at open with one line. RUNNER: qemu for a
# cross build.
set -u
bin=$1
budget=${SIZE_BUDGET:-1000000}
RUNNER=${RUNNER:-}
M=models/colibri-tiny.colibri
work=$(mktemp -d "${TMPDIR:-/tmp}/colibri-size.XXXXXX")
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
size=$(stat -c %s "$bin")
echo "size-check: $bin is $size bytes (budget $budget)"
[ "$size" -le "$budget" ] || fail "$bin: $size bytes, over the budget of $budget"
# shellcheck disable=SC2086 # RUNNER: a command and its options, or nothing
$RUNNER "$bin" run -m "$M" --tokens 1,50,60,70 -n 16 -t 2 >"$work/min.txt" 2>"$work/min.err" || fail "minimal run: $(cat "$work/min.err")"
# shellcheck disable=SC2086
$RUNNER "$COLIBRI" run -m "$M" --tokens 1,50,60,70 -n 16 -t 2 >"$work/full.txt" 2>"$work/full.err" || fail "full run: $(cat "$work/full.err")"
[ -s "$work/min.txt" ] && cmp -s "$work/min.txt" "$work/full.txt" || fail "minimal and full ids differ: $(cat "$work/min.txt") / $(cat "$work/full.txt")"
# shellcheck disable=SC2086
$RUNNER "$COLIBRI" convert "$M" -o "$work/z.colibri" --compress zstd >/dev/null 2>"$work/conv.err" || fail "convert: $(cat "$work/conv.err")"
# shellcheck disable=SC2086
$RUNNER "$bin" run -m "$work/z.colibri" --tokens 1,2 -n 1 >/dev/null 2>"$work/z.err"
st=$?
[ "$st" -eq 1 ] || fail "a compressed file: exit status $st (want 1)"
[ "$(grep -c . "$work/z.err")" -eq 1 ] && grep -q 'compressed .colibri file (version 2); this minimal build has no codecs' "$work/z.err" ||
    fail "a compressed file: $(cat "$work/z.err")"
# shellcheck disable=SC2086
$RUNNER "$bin" run -m "$M" -p hello >/dev/null 2>"$work/p.err" && fail "minimal run -p succeeded"
grep -q 'needs --tokens\|unknown option' "$work/p.err" || fail "minimal run -p: $(cat "$work/p.err")"
[ "$fails" -eq 0 ] && echo "size-check: passed"
[ "$fails" -eq 0 ]
