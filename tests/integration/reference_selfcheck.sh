#!/bin/sh
# Validates the numpy reference (tests/reference/) against the llama.cpp oracle fixtures;
# needs no C code. For each of mixtral, llama-dense, qwen2moe, olmoe:
#   - hf_ref.py logits of tokens.txt vs ref-numpy-f32.bin and vs logits-f32.bin
#     (max |diff| per row <= 1e-5 x max |logit| of that row),
#   - its greedy continuation (recomputed from scratch each step) == greedy-f32.txt,
#   - teacher-forced logits of tokens + greedy, rows 40..63, vs decode-logits-f32.bin.
# Then quant.py's Q8_0 / Q4_0 blocks vs llama-quantize's (mixtral q8_0 / q4_0 GGUFs), and
# test_reference.py (safetensors, gen_model.py families, routing / RoPE details).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$WORK"
REF="$ROOT/tests/reference"
FX="$ROOT/tests/fixtures"
TOL=1e-5
fail=0

for f in mixtral llama-dense qwen2moe olmoe; do
    d="$FX/$f"
    toks=$(cat "$d/tokens.txt")
    g=$("$PYTHON" "$REF/hf_ref.py" "$d/hf" --tokens "$toks" --out "$WORK/$f.bin" \
        --greedy 24 --full-out "$WORK/$f-full.bin") || { echo "FAIL $f: hf_ref.py failed"; fail=1; continue; }
    "$PYTHON" "$REF/compare.py" logits "$WORK/$f.bin" "$d/ref-numpy-f32.bin" --vocab 512 \
        --max-rel-row $TOL --min-argmax 1 --label "$f vs ref-numpy-f32" || fail=1
    "$PYTHON" "$REF/compare.py" logits "$WORK/$f.bin" "$d/logits-f32.bin" --vocab 512 \
        --max-rel-row $TOL --min-argmax 1 --label "$f vs llama.cpp logits-f32" || fail=1
    "$PYTHON" "$REF/compare.py" greedy "$g" "$d/greedy-f32.txt" --label "$f greedy vs greedy-f32" || fail=1
    "$PYTHON" "$REF/compare.py" logits "$WORK/$f-full.bin" "$d/decode-logits-f32.bin" --vocab 512 \
        --got-rows 40:64 --max-rel-row $TOL --min-argmax 1 --label "$f rows 40..63 vs decode-logits-f32" || fail=1
done

"$PYTHON" "$REF/check_quant_fixtures.py" "$FX/mixtral" || fail=1
"$PYTHON" "$REF/test_reference.py" || fail=1

if [ "$fail" -ne 0 ]; then
    echo "reference_selfcheck: FAILED (the numpy reference disagrees with the llama.cpp fixtures)"
    exit 1
fi
echo "reference_selfcheck: OK"
