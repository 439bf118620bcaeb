#!/bin/sh
# Issue 18, quantization in convert: Hugging Face directory -> colibri convert --mix M ->
# .colibri, block for block against llama.cpp's own llama-quantize output for the same
# weights (tests/fixtures/quant/README.md): every tensor of every stored llama-quantize file
# must come out with the same type and the same bytes. (The type choice of every mix on
# every fixture model is checked in the unit test test_mix against quant/types.json.)
# Also: the bytes do not depend on --threads; single types (--dtype q2_k ... mxfp4) and
# mixes load and decode; bad mix / dtype arguments fail with one clear line.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/reference/it_lib.sh"
need_colibri
Q="$FX/quant"
QF="$REF/quant_fixtures.py"
n=0
for g in "$Q"/*.gguf "$FX"/mixtral/model-q4_k_m.gguf "$FX"/mixtral/model-q6_k.gguf "$FX"/mixtral/model-q4_0.gguf; do
    base=$(basename "$g" .gguf)
    case $base in
        *-MXFP4) continue ;; # ik_llama.cpp's --pure file, below
        model-*) model=mixtral; mix=$(echo "${base#model-}" | tr a-z A-Z) ;;
        *) model=${base%-*}; mix=${base##*-} ;;
    esac
    out="$WORK/$model-$mix.colibri"
    colibri_convert "$FX/$model/hf" "$out" --mix "$mix" --threads 2 || continue
    check "$PYTHON" "$QF" blocks "$g" "$out"
    n=$((n + 1))
done
# MXFP4 (not in the llama.cpp commit above): ik_llama.cpp's llama-quantize --pure writes
# every 2-D tensor MXFP4; colibri convert --dtype mxfp4 must give the same bytes
colibri_convert "$FX/mixtral/hf" "$WORK/mixtral-MXFP4.colibri" --dtype mxfp4 --threads 2 &&
    check "$PYTHON" "$QF" blocks "$Q/mixtral-MXFP4.gguf" "$WORK/mixtral-MXFP4.colibri"
[ "$n" -ge 18 ] || fail "only $n llama-quantize files compared"

# thread count never changes a byte
colibri_convert "$FX/mixtral/hf" "$WORK/t1.colibri" --mix Q3_K_M --threads 1 &&
    { cmp -s "$WORK/t1.colibri" "$WORK/mixtral-Q3_K_M.colibri" || fail "--threads 1 and --threads 2 give different files"; }

# single types and mixes run: greedy decode, finite logits, the file verifies
toks=$(csv "$(cat "$FX/mixtral/tokens.txt")")
# (bounds: rms(colibri - f32) / std(f32); uncorrelated logits would give about 1.4)
for d in q2_k:0.8 q3_k:0.5 iq4_nl:0.35 iq4_xs:0.35 mxfp4:0.4 Q5_K_S:0.2; do
    lim=${d#*:}; d=${d%:*}
    colibri_convert "$FX/mixtral/hf" "$WORK/d-$d.colibri" --dtype "$d" || continue
    "$COLIBRI" verify "$WORK/d-$d.colibri" >/dev/null 2>&1 || fail "$d: verify failed"
    colibri_run "$WORK/d-$d.ids" -m "$WORK/d-$d.colibri" --tokens "$toks" -n 4 --dump-logits "$WORK/d-$d.logits" || continue
    check "$PYTHON" "$REF/compare.py" logits "$WORK/d-$d.logits" "$FX/mixtral/logits-f32.bin" --vocab 512 \
        --rms-std "$lim" --label "--dtype $d vs llama.cpp f32"
done
# a mix on a model whose rows do not fit 256-blocks takes llama.cpp's fallbacks and runs
colibri_convert "$FX/olmoe/hf" "$WORK/olmoe-q4km.colibri" --dtype Q4_K_M &&
    colibri_run "$WORK/olmoe.ids" -m "$WORK/olmoe-q4km.colibri" --tokens 1,5,9 -n 2

expect_clean_error "importance matrix" convert "$FX/mixtral/hf" -o "$WORK/x.colibri" --mix Q2_K_S
expect_clean_error "unknown mix" convert "$FX/mixtral/hf" -o "$WORK/x.colibri" --mix Q4_K_X
expect_clean_error "unknown dtype" convert "$FX/mixtral/hf" -o "$WORK/x.colibri" --dtype q4_k_x
expect_clean_error "not both" convert "$FX/mixtral/hf" -o "$WORK/x.colibri" --mix Q6_K --dtype q8_0
expect_clean_error "activation-only" convert "$FX/mixtral/hf" -o "$WORK/x.colibri" --dtype q8_k
[ ! -e "$WORK/x.colibri" ] || fail "a failed convert left $WORK/x.colibri behind"
finish quant_mixes
