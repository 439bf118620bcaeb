#!/bin/sh
# End-to-end F32 oracle test against the llama.cpp fixtures (tests/fixtures/ORACLE-README.md).
# For mixtral and llama-dense:
#   1. colibri convert hf/ -> f32 .colibri
#   2. colibri run the 40 tokens of tokens.txt, -n 24, --dump-logits:
#        every row: max |diff| <= 1e-4 x max |logit of that row| vs logits-f32.bin
#        the 24 greedy ids == greedy-f32.txt exactly
#   3. colibri run tokens + greedy-f32 (64 tokens) teacher-forced, --dump-logits:
#        rows 40..63 vs decode-logits-f32.bin (llama.cpp's single-token KV-cache decode
#        steps), same bound.
# (The numpy reference itself meets 1e-5 on all of these: reference_selfcheck.sh.)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/reference/it_lib.sh"
need_colibri
TOL=${FIXTURE_TOL:-1e-4}
THREADS=${THREADS:-2}

for f in mixtral llama-dense; do
    d="$FX/$f"
    echo "== $f"
    model="$WORK/$f-f32.colibri"
    colibri_convert "$d/hf" "$model" --dtype f32 || continue
    toks=$(csv "$(cat "$d/tokens.txt")")
    if colibri_run "$WORK/$f.ids" -m "$model" --tokens "$toks" -n 24 --threads "$THREADS" \
        --dump-logits "$WORK/$f.logits"; then
        check "$PYTHON" "$REF/compare.py" logits "$WORK/$f.logits" "$d/logits-f32.bin" --vocab 512 \
            --max-rel-row "$TOL" --min-argmax 1 --label "$f prompt logits vs llama.cpp logits-f32"
        check "$PYTHON" "$REF/compare.py" greedy "$WORK/$f.ids" "$d/greedy-f32.txt" \
            --label "$f greedy (-n 24) vs greedy-f32"
    fi
    full=$(csv "$(cat "$d/tokens.txt") $(cat "$d/greedy-f32.txt")")
    if colibri_run "$WORK/$f-full.ids" -m "$model" --tokens "$full" -n 1 --threads "$THREADS" \
        --dump-logits "$WORK/$f-full.logits"; then
        check "$PYTHON" "$REF/compare.py" logits "$WORK/$f-full.logits" "$d/logits-f32.bin" --vocab 512 \
            --got-rows 0:40 --max-rel-row "$TOL" --min-argmax 1 \
            --label "$f 64-token run, rows 0..39 vs logits-f32"
        check "$PYTHON" "$REF/compare.py" logits "$WORK/$f-full.logits" "$d/decode-logits-f32.bin" --vocab 512 \
            --got-rows 40:64 --max-rel-row "$TOL" --min-argmax 1 \
            --label "$f 64-token run, rows 40..63 vs decode-logits-f32"
    fi
done

finish fixtures_oracle
