#!/bin/sh
# End-to-end F32 oracle test against the llama.cpp fixtures (tests/fixtures/ORACLE-README.md).
# For mixtral, llama-dense, qwen2moe and olmoe, from .colibri, HF directory and GGUF:
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

# every fixture, from the converted HF directory, the HF directory itself and the GGUF file
for fx in mixtral llama-dense qwen2moe olmoe; do
  d="$FX/$fx"
  colibri_convert "$d/hf" "$WORK/$fx-f32.colibri" --dtype f32 || continue
  for src in colibri hf gguf; do
    case $src in colibri) model="$WORK/$fx-f32.colibri" ;; hf) model="$d/hf" ;; gguf) model="$d/model-f32.gguf" ;; esac
    f="$fx-$src"
    echo "== $fx from $src"
    toks=$(csv "$(cat "$d/tokens.txt")")
    if colibri_run "$WORK/$f.ids" $F32KV -m "$model" --tokens "$toks" -n 24 --threads "$THREADS" \
        --dump-logits "$WORK/$f.logits"; then
        check "$PYTHON" "$REF/compare.py" logits "$WORK/$f.logits" "$d/logits-f32.bin" --vocab 512 \
            --max-rel-row "$TOL" --min-argmax 1 --label "$f prompt logits vs llama.cpp logits-f32"
        check "$PYTHON" "$REF/compare.py" greedy "$WORK/$f.ids" "$d/greedy-f32.txt" \
            --label "$f greedy (-n 24) vs greedy-f32"
    fi
    full=$(csv "$(cat "$d/tokens.txt") $(cat "$d/greedy-f32.txt")")
    if colibri_run "$WORK/$f-full.ids" $F32KV -m "$model" --tokens "$full" -n 1 --threads "$THREADS" \
        --dump-logits "$WORK/$f-full.logits"; then
        check "$PYTHON" "$REF/compare.py" logits "$WORK/$f-full.logits" "$d/logits-f32.bin" --vocab 512 \
            --got-rows 0:40 --max-rel-row "$TOL" --min-argmax 1 \
            --label "$f 64-token run, rows 0..39 vs logits-f32"
        check "$PYTHON" "$REF/compare.py" logits "$WORK/$f-full.logits" "$d/decode-logits-f32.bin" --vocab 512 \
            --got-rows 40:64 --max-rel-row "$TOL" --min-argmax 1 \
            --label "$f 64-token run, rows 40..63 vs decode-logits-f32"
    fi
  done
done

finish fixtures_oracle
