#!/bin/sh
# colibri vs the numpy HF reference on generated models, for every weight dtype `convert`
# writes. Models (tests/reference/gen_model.py, fixed seeds):
#   mx  Mixtral-like: 2 layers, hidden 128, 4 heads / 2 KV heads (head_dim 32), 8 experts
#       top-2, expert ff 128, vocab 256; routers re-drawn until every top-2 decision on the
#       prompt + 16-token continuation has a margin >= 1e-3 for the f32, q8_0, q4_0 and
#       q8_0-dense + q4_0-experts weights (reference with Q8_0 activations), i.e. for every
#       variant tested below.
#   ll  dense llama: 2 layers, hidden 128, GQA 4/2, ff 256, vocab 256, untied head.
#   sh  Mixtral-like stored as BF16 in 3 safetensors shards (model.safetensors.index.json);
#       margins for f32 and q8_0 (its tested variants).
# For each (model, dtype): colibri convert --dtype T, colibri run prompt -n 16
# --dump-logits, and hf_ref.py on the weights round-tripped through T (quant.py; for
# q8_0/q4_0 also with activations rounded through Q8_0 blocks, as colibri's integer dot
# products do). Bounds (see tests/reference/README.md, "Tolerances"):
#   f32 / f16 / bf16   max |diff| per row <= 1e-4 x max |logit| of the row, all argmax
#                      equal, greedy ids equal
#   q8_0 / q4_0        the first Q_LEAD_ROWS rows each within Q_LEAD_REL (per-row max rel);
#                      all rows: rms(diff)/std(ref logits) <= Q_RMS_STD, per-row max rel <=
#                      Q_MAX_REL, argmax agreement >= Q_ARGMAX; greedy ids reported only.
#                      Run once with the default kernels and once with COLIBRI_ISA=generic
#                      (Q_ISAS).
# Why two tiers. A Q8_0 activation rounding is a step function, so a few-ulp difference
# in its input (any two float32 implementations have them) occasionally falls on a step
# (fp16 scale or roundf boundary) and changes a 32-value block; through later layers and
# the KV cache that moves the logits of that and all later rows by ~1 % -- as much as
# skipping activation quantization altogether (vs the f32-activation reference: rms_std
# ~0.011, max_rel_row ~0.018). Measured with this script (hf_ref evaluates every op in
# float64 and rounds once; x86-64, avx2 and generic kernels): 10 of the 12 quantized
# (case, kernel set) runs agree on every row to max_rel_row <= 1.6e-7, rms_std <= 7e-8;
# in one run per kernel set such a flip happens at row 17 (avx2: mx-q4_0, max_rel_row
# 0.0125, rms_std 0.0050, argmax 32/32; generic: ll-q4_0, max_rel_row 0.0037, rms_std
# 0.0010, argmax 32/32), and colibri's two kernel sets differ from each other by the
# same amount there (0.07 / 0.03 max_abs). So:
#   Q_LEAD_REL 1e-6 on the first 8 rows (~6x the worst clean figure; a flip or a real
#     quantization slip -- skipped activation rounding, wrong block layout or scale
#     rounding, wrong dtype for a tensor -- is >= 1e-3, already at row 0);
#   Q_MAX_REL 0.03 and Q_RMS_STD 0.012 (2.4x the worst flip figures) on all rows: bound
#     the damage a flip may do; a different expert shows as >= 0.1.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/reference/it_lib.sh"
need_colibri
FTOL=${FLOAT_TOL:-1e-4}
Q_RMS_STD=${Q_RMS_STD:-0.012}
Q_MAX_REL=${Q_MAX_REL:-0.03}
Q_ARGMAX=${Q_ARGMAX:-0.95}
Q_LEAD_REL=${Q_LEAD_REL:-1e-6}
Q_LEAD_ROWS=${Q_LEAD_ROWS:-8}
Q_ISAS=${Q_ISAS:-"default generic"}
NGEN=16
THREADS=${THREADS:-2}
GEN="$PYTHON $REF/gen_model.py"

echo "== generating models in $WORK"
$GEN --family mixtral --out "$WORK/mx" --seed 11 --layers 2 --hidden 128 --heads 4 --kv-heads 2 \
    --head-dim 32 --experts 8 --top-k 2 --ff 128 --vocab 256 --n-tokens 32 \
    --margin-greedy $NGEN --margin-dtypes q8_0,q4_0,q8_0+q4_0 || { echo "FAIL: gen_model mixtral"; exit 1; }
$GEN --family llama --out "$WORK/ll" --seed 12 --layers 2 --hidden 128 --heads 4 --kv-heads 2 \
    --ff 256 --vocab 256 --n-tokens 32 || { echo "FAIL: gen_model llama"; exit 1; }
$GEN --family mixtral --out "$WORK/sh" --seed 13 --dtype bf16 --shards 3 --layers 2 --hidden 128 \
    --heads 4 --kv-heads 2 --experts 8 --top-k 2 --ff 128 --vocab 256 --n-tokens 32 \
    --margin-greedy $NGEN --margin-dtypes q8_0 || { echo "FAIL: gen_model sharded bf16"; exit 1; }

# one_case MODEL_NAME DTYPE [EXPERT_DTYPE]
one_case() {
    name=$1; dt=$2; edt=${3:-}
    dir="$WORK/$name"
    tag="$name-$dt${edt:+-experts-$edt}"
    toks=$(csv "$(cat "$dir/tokens.txt")")
    echo "== $tag"
    refargs="--weights-dtype $dt"
    convargs="--dtype $dt"
    if [ -n "$edt" ]; then
        refargs="$refargs --expert-weights-dtype $edt"
        convargs="$convargs --expert-dtype $edt"
    fi
    quantized=0
    case "$dt$edt" in *q8_0*|*q4_0*) quantized=1 ;; esac
    if [ "$quantized" -eq 1 ]; then
        # shellcheck disable=SC2086
        "$PYTHON" "$REF/hf_ref.py" "$dir" --tokens "$toks" $refargs --out "$WORK/$tag.plain.ref" >/dev/null \
            || { fail "$tag: hf_ref.py failed"; return; }
        refargs="$refargs --act-quant q8_0"
    fi
    # shellcheck disable=SC2086
    "$PYTHON" "$REF/hf_ref.py" "$dir" --tokens "$toks" $refargs --out "$WORK/$tag.ref" --greedy $NGEN \
        >"$WORK/$tag.ref.ids" || { fail "$tag: hf_ref.py failed"; return; }
    # shellcheck disable=SC2086
    colibri_convert "$dir" "$WORK/$tag.colibri" $convargs || return
    if [ "$quantized" -eq 0 ]; then
        colibri_run "$WORK/$tag.ids" $F32KV -m "$WORK/$tag.colibri" --tokens "$toks" -n $NGEN --threads "$THREADS" \
            --dump-logits "$WORK/$tag.logits" || return
        check "$PYTHON" "$REF/compare.py" logits "$WORK/$tag.logits" "$WORK/$tag.ref" --vocab 256 \
            --max-rel-row "$FTOL" --min-argmax 1 --label "$tag logits vs hf_ref"
        check "$PYTHON" "$REF/compare.py" greedy "$WORK/$tag.ids" "$WORK/$tag.ref.ids" --label "$tag greedy vs hf_ref"
        return
    fi
    for isa in $Q_ISAS; do
        run="$tag"
        if [ "$isa" = default ]; then
            colibri_run "$WORK/$run.ids" $F32KV -m "$WORK/$tag.colibri" --tokens "$toks" -n $NGEN \
                --threads "$THREADS" --dump-logits "$WORK/$run.logits" || continue
        else
            run="$tag-$isa"
            export COLIBRI_ISA="$isa"
            colibri_run "$WORK/$run.ids" $F32KV -m "$WORK/$tag.colibri" --tokens "$toks" -n $NGEN \
                --threads "$THREADS" --dump-logits "$WORK/$run.logits"
            st=$?
            unset COLIBRI_ISA
            [ "$st" -eq 0 ] || continue
        fi
        check "$PYTHON" "$REF/compare.py" logits "$WORK/$run.logits" "$WORK/$tag.ref" --vocab 256 \
            --lead-rel "$Q_LEAD_REL" --lead-rows "$Q_LEAD_ROWS" \
            --rms-std "$Q_RMS_STD" --max-rel-row "$Q_MAX_REL" --min-argmax "$Q_ARGMAX" \
            --label "$run logits vs hf_ref (Q8_0 activations)"
        # information only: float-activation reference, and the greedy ids
        "$PYTHON" "$REF/compare.py" logits "$WORK/$run.logits" "$WORK/$tag.plain.ref" --vocab 256 \
            --label "$run (info) vs hf_ref with f32 activations"
        "$PYTHON" "$REF/compare.py" greedy "$WORK/$run.ids" "$WORK/$tag.ref.ids" --label "$run (info) greedy" || true
    done
}

for dt in f32 f16 bf16 q8_0 q4_0; do
    one_case mx $dt
    one_case ll $dt
done
one_case mx q8_0 q4_0
for dt in f32 bf16 q8_0; do
    one_case sh $dt
done

finish reference_dtypes
