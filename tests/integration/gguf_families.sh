#!/bin/sh
# Every family from GGUF files named and laid out the way llama.cpp's convert_hf_to_gguf.py
# writes them (tests/reference/hf_to_gguf.py, llama.cpp c392e50 layout).
#   1. The converter itself: on the four fixtures with a llama.cpp-made model-f32.gguf
#      (mixtral, llama-dense, qwen2moe, olmoe), every tensor (name, type, ne, bytes) and
#      every general.architecture / <arch>.* / general.file_type key equals the fixture's.
#   2. The cases of families.sh (same shapes, same seeds): the HF directory converted to
#      GGUF, run with `colibri run -m X.gguf` and compared with the numpy reference
#      (hf_ref.py): max |diff| <= 1e-4 x max |logit| per row, all argmax, greedy ids equal;
#      then `colibri convert X.gguf -o X.colibri` must keep every tensor byte-exact (stacked
#      *_exps tensors: each expert slice) and X.colibri must give the same figures.
#      Where llama.cpp's GGUF cannot carry a config value (qwen2moe's norm_topk_prob=true:
#      llama.cpp never renormalises), the reference runs on the config llama.cpp's semantics
#      describe (hf_to_gguf.py --effective-config), so colibri is held to llama.cpp's reading.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/reference/it_lib.sh"
need_colibri
TOL=${FLOAT_TOL:-1e-4}
NGEN=8
GEN="$PYTHON $REF/gen_model.py"
H2G="$PYTHON $REF/hf_to_gguf.py"
GNP="$PYTHON $REF/gguf_np.py"

# 1. converter vs llama.cpp's own output on the fixtures
for f in mixtral llama-dense qwen2moe olmoe; do
    echo "== converter: $f"
    $H2G "$FX/$f/hf" "$WORK/fx-$f.gguf" --name "$f" >/dev/null || { fail "hf_to_gguf $f failed"; continue; }
    arch=$("$PYTHON" -c "import sys; sys.path.insert(0, sys.argv[1]); import gguf_np; \
print(gguf_np.read(sys.argv[2])[0]['general.architecture'])" "$REF" "$FX/$f/model-f32.gguf")
    check $GNP diff "$WORK/fx-$f.gguf" "$FX/$f/model-f32.gguf" --tensors \
        --prefix "$arch.,general.file_type,general.type,general.quantization_version"
done
# the check has teeth: a file with one permuted tensor and one changed key is caught
"$PYTHON" - "$REF" "$WORK/fx-mixtral.gguf" "$WORK/fx-bad.gguf" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
import gguf_np as G
import numpy as np
kv, ty, t = G.read_typed(sys.argv[2])
items = [(k, ty[k], kv[k] + 1 if k == "llama.expert_used_count" else kv[k]) for k in kv]
ts = []
for n, x in t.items():
    a = G.tensor_f32(x)
    ts.append((n, a[::-1] if n == "blk.0.attn_q.weight" else a))
G.write(sys.argv[3], items, ts)
EOF
if $GNP diff "$WORK/fx-bad.gguf" "$FX/mixtral/model-f32.gguf" --tensors >"$WORK/bad.out"; then
    fail "gguf_np diff missed a changed key and a permuted tensor"
else
    n=$(grep -c DIFF "$WORK/bad.out"); [ "$n" -eq 2 ] || fail "gguf_np diff reported $n differences, expected 2"
fi

# 2. every family from GGUF, and GGUF -> .colibri
case_() {
    name=$1; shift
    dir="$WORK/$name"
    echo "== $name: $*"
    $GEN --out "$dir" --n-tokens 24 --margin-greedy $NGEN "$@" >"$WORK/gen.log" 2>&1 \
        || { fail "$name: gen_model failed: $(tail -2 "$WORK/gen.log")"; return; }
    gguf="$WORK/$name.gguf"
    $H2G "$dir" "$gguf" --effective-config "$WORK/$name.eff.json" >/dev/null 2>"$WORK/h2g.err" \
        || { fail "$name: hf_to_gguf failed: $(tail -2 "$WORK/h2g.err")"; return; }
    refdir=$dir
    if ! "$PYTHON" -c "import json,sys; sys.exit(json.load(open(sys.argv[1])) != json.load(open(sys.argv[2])))" \
        "$dir/config.json" "$WORK/$name.eff.json"; then
        sed 's/^/   /' "$WORK/h2g.err"
        refdir="$WORK/$name-eff"
        rm -rf "$refdir"; mkdir -p "$refdir"
        cp "$WORK/$name.eff.json" "$refdir/config.json"
        for s in "$dir"/*.safetensors*; do ln -s "$s" "$refdir/"; done
    fi
    toks=$(csv "$(cat "$dir/tokens.txt")")
    "$PYTHON" "$REF/hf_ref.py" "$refdir" --tokens "$toks" --out "$WORK/$name.ref" --greedy $NGEN >"$WORK/$name.ref.ids" \
        || { fail "$name: hf_ref failed"; return; }
    vocab=$("$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['vocab_size'])" "$dir/config.json")
    models=$gguf
    if colibri_convert "$gguf" "$WORK/$name.colibri"; then
        check $GNP colibri-bytes "$gguf" "$WORK/$name.colibri"
        models="$models $WORK/$name.colibri"
    fi
    for m in $models; do
        colibri_run "$WORK/$name.ids" $F32KV -m "$m" --tokens "$toks" -n $NGEN --threads 2 --dump-logits "$WORK/$name.logits" || continue
        check "$PYTHON" "$REF/compare.py" logits "$WORK/$name.logits" "$WORK/$name.ref" --vocab "$vocab" \
            --max-rel-row "$TOL" --min-argmax 1 --label "$name ($(basename "$m")) vs hf_ref"
        check "$PYTHON" "$REF/compare.py" greedy "$WORK/$name.ids" "$WORK/$name.ref.ids" --label "$name greedy"
    done
}

. "$ROOT/tests/reference/family_cases.sh"
# beyond families.sh: mixtral (3 experts, linear rope scaling: llama.rope.scaling.* keys) and
# qwen3moe with YaRN (rope.scaling.type/factor/original_context_length, as later converters)
case_ mixtral --family mixtral --seed 30 --layers 2 --hidden 64 --heads 4 --kv-heads 2 --experts 3 \
    --top-k 2 --ff 48 --vocab 160 --rope-scaling '{"type": "linear", "factor": 2.0}'
case_ qwen3moe-yarn --family qwen3_moe --seed 31 --layers 2 --hidden 64 --heads 4 --kv-heads 2 --head-dim 16 \
    --experts 6 --top-k 2 --ff 32 --vocab 160 --max-pos 256 \
    --rope-scaling '{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}'

# GGUF layouts colibri does not read are refused by name: SmallThinker's (llama.cpp's
# "smallthinker") and Phi-3.5-MoE's (llama.cpp's "phimoe": RMSNorm and softmax routing)
for arch in smallthinker phimoe; do
    [ -f "$WORK/glm45.gguf" ] || break
    "$PYTHON" - "$REF" "$WORK/glm45.gguf" "$WORK/st.gguf" "$arch" <<'EOF2'
import sys
sys.path.insert(0, sys.argv[1])
import gguf_np as G
kv, ty, t = G.read_typed(sys.argv[2])
a = sys.argv[4]
items = [(k.replace("glm4moe.", a + "."), ty[k], a if k == "general.architecture" else kv[k]) for k in kv]
G.write(sys.argv[3], items, [(n, G.tensor_f32(x)) for n, x in t.items()])
EOF2
    if "$COLIBRI" run -m "$WORK/st.gguf" --tokens 1,2 -n 1 >/dev/null 2>"$WORK/err"; then fail "$arch GGUF accepted"
    else grep -q "'$arch' is not supported" "$WORK/err" || fail "$arch GGUF refusal does not name it: $(cat "$WORK/err")"; fi
done
finish gguf_families
