#!/bin/sh
# gpt-oss (GptOssForCausalLM) on random tiny configurations generated as Hugging Face
# directories (tests/reference/gen_model.py --family gpt_oss): q/k/v/o biases, attention
# sinks, layer_types sliding/full (given, or GptOssConfig's default alternation), YaRN with
# truncate false (stated, or the config class's default), head_dim independent of hidden,
# a router with a bias (top-k of the logits, softmax over those k), expert biases, gate and
# up interleaved in one stacked tensor, the clamped SwiGLU (swiglu_limit small enough that
# the clamp is reached). Experts in float (x @ W layout, f32 and bf16) and as the published
# MXFP4 *_blocks / *_scales, which stay MXFP4 in .colibri. Each runs from the directory and
# from its .colibri and must match tests/reference/hf_ref.py within 1e-5 x max |logit| per
# row, greedy ids identical (MXFP4: against the reference with Q8_0 activations before the
# MXFP4 products, what the kernels compute). The same models as GGUF files named the way
# llama.cpp names gpt-oss, and those converted to .colibri.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/reference/it_lib.sh"
need_colibri
TOL=${GPT_OSS_TOL:-1e-5}
NGEN=8
GEN="$PYTHON $REF/gen_model.py"

# one NAME "GEN ARGS" "RUN ARGS" [REF ARGS]
one() {
    name=$1 dir="$WORK/$1" gargs=$2 rargs=$3 refargs=${4:-}
    echo "== $name: $gargs | run $rargs $refargs"
    # shellcheck disable=SC2086
    $GEN --family gpt_oss --out "$dir" --margin-greedy $NGEN $gargs >"$WORK/gen.log" 2>&1 \
        || { fail "$name: gen_model failed: $(tail -2 "$WORK/gen.log")"; return; }
    toks=$(csv "$(cat "$dir/tokens.txt")")
    # shellcheck disable=SC2086
    "$PYTHON" "$REF/hf_ref.py" "$dir" --tokens "$toks" --out "$WORK/$name.ref" --greedy $NGEN $refargs \
        >"$WORK/$name.ref.ids" || { fail "$name: hf_ref failed"; return; }
    colibri_convert "$dir" "$WORK/$name.colibri" || return
    for m in "$dir" "$WORK/$name.colibri"; do
        # shellcheck disable=SC2086
        colibri_run "$WORK/$name.ids" $F32KV -m "$m" --tokens "$toks" -n $NGEN --threads 2 \
            --dump-logits "$WORK/$name.logits" $rargs || continue
        check "$PYTHON" "$REF/compare.py" logits "$WORK/$name.logits" "$WORK/$name.ref" --vocab 160 \
            --max-rel-row "$TOL" --min-argmax 1 --label "$name ($(basename "$m")) vs hf_ref"
        check "$PYTHON" "$REF/compare.py" greedy "$WORK/$name.ids" "$WORK/$name.ref.ids" --label "$name greedy"
    done
}

S="--hidden 64 --heads 4 --kv-heads 2 --vocab 160 --swiglu-limit 1.5"
# float experts: head_dim 24 (not hidden / heads), windows that wrap the ring cache
one f32-swa "--seed 51 $S --layers 3 --head-dim 24 --experts 6 --top-k 2 --ff 32 --sliding-window 5 --n-tokens 56" "--batch 4"
one bf16-types "--seed 53 $S --dtype bf16 --layers 3 --experts 5 --top-k 3 --ff 32 --sliding-window 7 --layer-types full,sliding --n-tokens 40" ""
# the config class's defaults (no rope_theta / rope_scaling: YaRN factor 32, truncate false)
one f32-defaults "--seed 54 $S --layers 2 --experts 4 --top-k 1 --ff 32 --sliding-window 6 --gpt-oss-rope default --n-tokens 32" "--batch 7"
# MXFP4 experts as published; the float reference shows the Q8_0 activations' share
one mxfp4 "--seed 52 $S --layers 2 --experts 5 --top-k 2 --ff 64 --sliding-window 6 --mxfp4 --n-tokens 40" "--batch 3" "--act-quant q8_0"
if [ -f "$WORK/mxfp4.colibri" ]; then
    "$COLIBRI" inspect "$WORK/mxfp4.colibri" >"$WORK/mxfp4.inspect" 2>&1
    n=$(grep -c 'ffn_\(gate\|up\|down\)\.[0-9]*\.weight *mxfp4' "$WORK/mxfp4.inspect")
    [ "$n" -eq 30 ] || fail "mxfp4.colibri: $n of 30 expert tensors are MXFP4: $(grep 'ffn_gate.0.weight' "$WORK/mxfp4.inspect")"
    toks=$(csv "$(cat "$WORK/mxfp4/tokens.txt")")
    "$PYTHON" "$REF/hf_ref.py" "$WORK/mxfp4" --tokens "$toks" --out "$WORK/mxfp4.plain.ref" >/dev/null \
        && "$PYTHON" "$REF/compare.py" logits "$WORK/mxfp4.logits" "$WORK/mxfp4.plain.ref" --vocab 160 \
            --label "mxfp4 (info) vs hf_ref with f32 activations"
fi

# GGUF files as llama.cpp names them (tests/reference/hf_to_gguf.py, ik_llama.cpp's
# create_openai_moe_tensors): the same models converted, MXFP4 experts still MXFP4. A GGUF
# carries neither swiglu_limit (llama.cpp: 7) nor layer_types (sliding on even layers): the
# reference runs on the config those semantics describe (--effective-config). Then
# GGUF -> .colibri keeps every tensor byte-exact and gives the same figures.
H2G="$PYTHON $REF/hf_to_gguf.py"
gguf_case() { # NAME [REF ARGS]
    name=$1 refargs=${2:-} dir="$WORK/$1"
    [ -f "$dir/config.json" ] || return
    echo "== $name as GGUF"
    gguf="$WORK/$name.gguf" refdir="$WORK/$name-eff"
    $H2G "$dir" "$gguf" --effective-config "$WORK/$name.eff.json" >/dev/null 2>"$WORK/h2g.err" \
        || { fail "$name: hf_to_gguf failed: $(tail -2 "$WORK/h2g.err")"; return; }
    sed 's/^/   /' "$WORK/h2g.err"
    rm -rf "$refdir"; mkdir -p "$refdir"
    cp "$WORK/$name.eff.json" "$refdir/config.json"
    ln -s "$dir/model.safetensors" "$refdir/"
    toks=$(csv "$(cat "$dir/tokens.txt")")
    # shellcheck disable=SC2086
    "$PYTHON" "$REF/hf_ref.py" "$refdir" --tokens "$toks" --out "$WORK/$name.gref" --greedy $NGEN $refargs \
        >"$WORK/$name.gref.ids" || { fail "$name: hf_ref (GGUF semantics) failed"; return; }
    models=$gguf
    if colibri_convert "$gguf" "$WORK/$name.g.colibri"; then
        check "$PYTHON" "$REF/gguf_np.py" colibri-bytes "$gguf" "$WORK/$name.g.colibri"
        models="$models $WORK/$name.g.colibri"
    fi
    for m in $models; do
        colibri_run "$WORK/$name.gids" $F32KV -m "$m" --tokens "$toks" -n $NGEN --threads 2 \
            --dump-logits "$WORK/$name.glogits" || continue
        check "$PYTHON" "$REF/compare.py" logits "$WORK/$name.glogits" "$WORK/$name.gref" --vocab 160 \
            --max-rel-row "$TOL" --min-argmax 1 --label "$name ($(basename "$m")) vs hf_ref"
        check "$PYTHON" "$REF/compare.py" greedy "$WORK/$name.gids" "$WORK/$name.gref.ids" --label "$name GGUF greedy"
    done
}
gguf_case f32-swa
gguf_case f32-defaults
gguf_case mxfp4 "--act-quant q8_0"
if [ -f "$WORK/mxfp4.g.colibri" ]; then
    n=$("$COLIBRI" inspect "$WORK/mxfp4.g.colibri" 2>&1 | grep -c 'ffn_\(gate\|up\|down\)\.[0-9]*\.weight *mxfp4')
    [ "$n" -eq 30 ] || fail "mxfp4.g.colibri: $n of 30 expert tensors are MXFP4"
fi

# bad input: a missing scales tensor, a limit that is not a number, truncate not a bool
bad() { # NAME SED-OR-PYTHON EXPECTED
    rm -rf "$WORK/bad"; cp -r "$WORK/$1" "$WORK/bad"
    "$PYTHON" -c "$2" "$WORK/bad" || { fail "bad $1: edit failed"; return; }
    if "$COLIBRI" convert "$WORK/bad" -o "$WORK/bad.colibri" 2>"$WORK/err"; then fail "bad $1 accepted ($3)"
    else grep -q "$3" "$WORK/err" || fail "bad $1: the refusal does not say '$3': $(cat "$WORK/err")"; fi
}
if [ -d "$WORK/mxfp4" ]; then
    bad mxfp4 "
import sys, json; sys.path.insert(0, '$REF'); import safetensors_np as st
d = sys.argv[1]; t = st.load(d + '/model.safetensors'); del t['model.layers.1.mlp.experts.down_proj_scales']
t = {k: (v.astype('uint8') if k.endswith(('_blocks', '_scales')) else v) for k, v in t.items()}
st.save(d + '/model.safetensors', t)" "down_proj_scales"
fi
if [ -d "$WORK/f32-swa" ]; then
    bad f32-swa "
import sys, json; p = sys.argv[1] + '/config.json'; c = json.load(open(p)); c['swiglu_limit'] = 'x'; json.dump(c, open(p, 'w'))" "swiglu_limit"
    bad f32-swa "
import sys, json; p = sys.argv[1] + '/config.json'; c = json.load(open(p)); c['rope_scaling']['truncate'] = 3; json.dump(c, open(p, 'w'))" "truncate"
fi
finish gpt_oss
