#!/bin/sh
# Every KV cache type against the f32 cache on the llama.cpp fixture models, and flash
# attention against the plain path. The reference is the f32 cache with the plain path
# (-fa off: today's arithmetic, the one the f32 fixtures are checked with). Each run scores
# the 64 teacher-forced positions of tokens.txt + greedy-f32.txt in batches of 16; the
# logit RMS error (over the std of the reference logits) and the argmax agreement are
# printed and bounded:
#   f32, flash attention          max_rel_row <= 1e-5 (float rounding only)
#   f16                           rms_std <= 2e-3, argmax 100 %
#   bf16                          rms_std <= 1e-2, argmax >= 97 %
#   q8_0 (K and V)                rms_std <= 0.08, argmax >= 95 %
#   q8_0 K + f16 V                rms_std <= 0.03, argmax >= 95 %
#   q4_0 (K and V)                rms_std <= 0.15, argmax >= 80 %
# (a cache read with the wrong block layout, scale or type gives rms_std ~ 1). Also with the
# portable kernels (COLIBRI_ISA=generic) for f16 and q8_0. The olmoe fixture's heads of 24
# values are stored padded to a block of 32 in q8_0 / q4_0. The "default" rows take the
# caller's COLIBRI_ISA when set (e.g. COLIBRI_ISA=avx2 to check that table end to end on a
# machine whose best table is another).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/reference/it_lib.sh"
need_colibri

for fx in mixtral llama-dense qwen2moe olmoe; do
    d="$FX/$fx"
    m="$d/model-f32.gguf"
    toks=$(csv "$(cat "$d/tokens.txt") $(cat "$d/greedy-f32.txt")")
    vocab=$("$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['vocab_size'])" "$d/hf/config.json")
    echo "== $fx"
    colibri_run "$WORK/$fx.ref.ids" -m "$m" --tokens "$toks" -n 1 --batch 16 --threads 2 -fa off $F32KV \
        --dump-logits "$WORK/$fx.ref" || continue
    while read -r label isa k v fa bounds; do
        [ "$isa" = default ] && isa=${COLIBRI_ISA:-default}
        # shellcheck disable=SC2086
        COLIBRI_ISA=$isa colibri_run "$WORK/$fx.got.ids" -m "$m" --tokens "$toks" -n 1 --batch 16 --threads 2 \
            -ctk "$k" -ctv "$v" -fa "$fa" --dump-logits "$WORK/$fx.got" || continue
        # shellcheck disable=SC2086
        check "$PYTHON" "$REF/compare.py" logits "$WORK/$fx.got" "$WORK/$fx.ref" --vocab "$vocab" $bounds \
            --label "$fx $label ($isa) vs f32 cache"
    done <<EOF
flash-f32 default f32 f32 on --max-rel-row 1e-5 --min-argmax 1
f16 default f16 f16 auto --rms-std 2e-3 --min-argmax 1
bf16 default bf16 bf16 auto --rms-std 1e-2 --min-argmax 0.97
q8_0 default q8_0 q8_0 auto --rms-std 0.08 --min-argmax 0.95
q8_0-K/f16-V default q8_0 f16 auto --rms-std 0.03 --min-argmax 0.95
q4_0 default q4_0 q4_0 auto --rms-std 0.15 --min-argmax 0.8
f16 generic f16 f16 auto --rms-std 2e-3 --min-argmax 1
q8_0 generic q8_0 q8_0 auto --rms-std 0.08 --min-argmax 0.95
EOF
done

# bad values are refused by name; the plain path refuses quantized caches
for bad in "-ctk q5_1" "-ctv f8" "-fa maybe"; do
    # shellcheck disable=SC2086
    if "$COLIBRI" run -m "$FX/mixtral/model-f32.gguf" --tokens 1,2 -n 1 $bad >/dev/null 2>"$WORK/err"; then
        fail "accepted $bad"
    else
        grep -q "${bad#* }" "$WORK/err" || fail "$bad: the error does not name the value: $(cat "$WORK/err")"
    fi
done
if "$COLIBRI" run -m "$FX/mixtral/model-f32.gguf" --tokens 1,2 -n 1 -fa off -ctk q8_0 >/dev/null 2>"$WORK/err"; then
    fail "-fa off with a q8_0 cache accepted"
else
    grep -q "f32" "$WORK/err" || fail "-fa off refusal unclear: $(cat "$WORK/err")"
fi
finish kv_types
