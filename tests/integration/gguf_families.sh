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
#   3. DeepSeek in today's llama.cpp layout (hf_to_gguf.py --mla-split): against hf_ref and
#      bit-identical to the unsplit file, k_b / v_b quantized, ik_llama.cpp's layout, and
#      inconsistent split files refused in one line.
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
    vocab=$("$PYTHON" -c "import json,sys; c=json.load(open(sys.argv[1])); print(c.get('text_config', c)['vocab_size'])" "$dir/config.json")
    models=$gguf
    if colibri_convert "$gguf" "$WORK/$name.colibri"; then
        check $GNP colibri-bytes "$gguf" "$WORK/$name.colibri"
        models="$models $WORK/$name.colibri"
    fi
    for m in $models; do
        colibri_run "$WORK/$name.ids" $F32KV -m "$m" --tokens "$toks" -n $NGEN --threads 2 --dump-logits "$WORK/$name.logits" \
            ${CASE_RUN:-} || continue
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

# Phi-3.5-MoE from llama.cpp's phimoe layout, read with HF's semantics (LayerNorm with biases,
# sparsemixer top-2, LongRoPE; llama.cpp itself runs RMSNorm and softmax routing on these
# files): the cases of families.sh, LongRoPE's factors from rope_factors_short / _long.weight
# and one rope.scaling.attn_factor for both sets (the reference runs on that attention factor
# and router_jitter_noise 0.01, what the file can say); the short set (context 64 = original),
# the long set with a sliding window of 8 on every layer (attention.sliding_window) and no
# bias on the LM head, and a file without LongRoPE
CASE_RUN="--max-seq-len 64"
case_ phimoe-short --family phimoe --seed 51 --layers 3 --hidden 64 --heads 4 --kv-heads 2 --experts 6 \
    --top-k 2 --ff 32 --router-jitter 0.3 --longrope-orig 64 --max-pos 256 --vocab 192
CASE_RUN=
case_ phimoe-long --family phimoe --seed 52 --layers 2 --hidden 64 --heads 4 --kv-heads 1 --experts 8 \
    --top-k 2 --ff 48 --longrope-orig 16 --max-pos 512 --arch-name PhiMoEForCausalLM --lm-head-bias 0 --vocab 160 \
    --sliding-window 8
case_ phimoe-plain --family phimoe --seed 54 --layers 2 --hidden 64 --heads 4 --kv-heads 4 --experts 4 \
    --top-k 2 --ff 32 --max-pos 128 --vocab 160
# broken LongRoPE in a phimoe file: one line naming what is wrong
for bad in "noshort:tensor 'rope_factors_long.weight' without 'rope_factors_short.weight'" \
    "short3:tensor 'rope_factors_short.weight' must be 8 F32 numbers" \
    "noorig:LongRoPE factors without phimoe.rope.scaling.original_context_length" \
    "att0:phimoe.rope.scaling.attn_factor -1 out of range"; do
    [ -f "$WORK/phimoe-long.gguf" ] || break
    "$PYTHON" - "$REF" "$WORK/phimoe-long.gguf" "$WORK/bad.gguf" "${bad%%:*}" <<'EOF2'
import sys
sys.path.insert(0, sys.argv[1])
import gguf_np as G
kv, ty, t = G.read_typed(sys.argv[2])
what, orig = sys.argv[4], "phimoe.rope.scaling.original_context_length"
items = [(k, ty[k], -1.0 if what == "att0" and k.endswith("attn_factor") else kv[k])
         for k in kv if not (what == "noorig" and k == orig)]
ts = [(n, G.tensor_f32(x)[:3] if what == "short3" and n == "rope_factors_short.weight" else G.tensor_f32(x))
      for n, x in t.items() if not (what == "noshort" and n == "rope_factors_short.weight")]
G.write(sys.argv[3], items, ts)
EOF2
    expect_clean_error "${bad#*:}" run -m "$WORK/bad.gguf" --tokens 1,2 -n 1
done

# DeepSeek in today's llama.cpp layout (hf_to_gguf.py --mla-split: attn_k_b [H][rank][nope] and
# attn_v_b [H][v][rank] instead of attn_kv_b, head_count_kv 1, key_length / value_length the
# latent's widths, key_length_mla / value_length_mla the heads'), from the HF directories of
# the cases above: against hf_ref within the same bounds, and bit-identical logits to the
# unsplit file of the same model with --mla latent (k_b / v_b used as they are) and --mla
# decompressed (W_uk transposed from k_b), also through `colibri convert`.
for name in dsv2-q dsv2-noq dsv3; do
    [ -f "$WORK/$name.ref" ] || continue
    dir="$WORK/$name"; sp="$WORK/$name.split.gguf"
    echo "== $name, split MLA layout"
    $H2G "$dir" "$sp" --mla-split >/dev/null 2>"$WORK/h2g.err" || { fail "$name: hf_to_gguf --mla-split failed"; continue; }
    toks=$(csv "$(cat "$dir/tokens.txt")")
    vocab=$("$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['vocab_size'])" "$dir/config.json")
    models=$sp
    if colibri_convert "$sp" "$WORK/$name.split.colibri"; then
        check $GNP colibri-bytes "$sp" "$WORK/$name.split.colibri"
        models="$models $WORK/$name.split.colibri"
    fi
    for mode in latent decompressed; do
        colibri_run "$WORK/$name.fused.ids" $F32KV --mla $mode -m "$WORK/$name.gguf" --tokens "$toks" -n $NGEN \
            --threads 2 --dump-logits "$WORK/$name.fused.logits" || continue
        for m in $models; do
            colibri_run "$WORK/$name.sp.ids" $F32KV --mla $mode -m "$m" --tokens "$toks" -n $NGEN --threads 2 \
                --dump-logits "$WORK/$name.sp.logits" || continue
            check "$PYTHON" "$REF/compare.py" logits "$WORK/$name.sp.logits" "$WORK/$name.ref" --vocab "$vocab" \
                --max-rel-row "$TOL" --min-argmax 1 --label "$name split ($(basename "$m"), --mla $mode) vs hf_ref"
            check "$PYTHON" "$REF/compare.py" greedy "$WORK/$name.sp.ids" "$WORK/$name.ref.ids" --label "$name split greedy"
            cmp -s "$WORK/$name.sp.logits" "$WORK/$name.fused.logits" ||
                fail "$name: split ($(basename "$m"), --mla $mode) logits differ from the unsplit file's"
        done
    done
done

# The split k_b / v_b quantized, on a V3 with q_lora: Q8_0 and Q4_0 (rows of nope 32 and rank
# 64, multiples of 32), and q4_k on a rank-256 model (v_b's rows as Q4_K super-blocks, k_b's
# rows of nope 32 as Q5_0, llama-quantize's fallback for rows Q4_K cannot hold); against hf_ref
# on the weights the file holds (kv_b_proj rebuilt from the dequantised k_b / v_b); the bound
# leaves room for colibri's Q8_0 activations of the quantized products (the queries into
# W_uk^T, the latent outputs into W_uv; the latent into v_b when decompressed), which hf_ref
# does not round (observed rms/std ~0.005). The models' router and greedy margins hold for f32
# weights only, so a quantized variant can meet a near tie (Q4_0 at rank 256 with seed 40 flips
# one token's experts: one row off by 2.6 std, the rest within 0.02); these seeds have none.
for spec in "64 q8_0 q4_0" "256 q4_k"; do
set -- $spec
q=dsv3-kbq-r$1
$GEN --out "$WORK/$q" --family deepseek_v3 --seed 40 --layers 2 --hidden 64 --heads 4 --experts 6 --top-k 2 --ff 32 \
    --dense-ff 64 --first-dense 1 --shared-experts 1 --q-lora-rank 32 --kv-lora-rank $1 --qk-nope 32 --qk-rope 16 \
    --v-head-dim 32 --vocab 160 --n-tokens 24 --margin-greedy $NGEN >"$WORK/gen.log" 2>&1 || fail "$q: gen_model failed"
toks=$(csv "$(cat "$WORK/$q/tokens.txt")")
shift
for t in "$@"; do
    echo "== $q: k_b / v_b $t"
    $H2G "$WORK/$q" "$WORK/$q-$t.gguf" --mla-split --mla-split-type $t >/dev/null || { fail "$q $t: hf_to_gguf failed"; continue; }
    "$PYTHON" - "$REF" "$WORK/$q-$t.gguf" "$WORK/$q" "$WORK/$q-$t.hf" $t <<'EOF2' || { fail "$q $t: dequantised HF directory"; continue; }
import os, shutil, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import gguf_np as G
import safetensors_np as S
_, _, t = G.read_typed(sys.argv[2])
src, out = sys.argv[3], sys.argv[4]
want = {"q8_0": (8, 8), "q4_0": (2, 2), "q4_k": (6, 12)}[sys.argv[5]]  # ggml types of k_b, v_b
got = {(t[n]["type"], t[n.replace("k_b", "v_b")]["type"]) for n in t if "attn_k_b" in n}
if got != {want}:
    sys.exit(f"k_b / v_b types {sorted(got)}, expected {want}")
os.makedirs(out, exist_ok=True)
shutil.copy(os.path.join(src, "config.json"), out)
W = {k: np.asarray(v, dtype=np.float32) for k, v in S.load_dir(src).items()}
for name in W:
    if name.endswith("self_attn.kv_b_proj.weight"):
        L = name.split(".")[2]
        kb = G.tensor_f32(t[f"blk.{L}.attn_k_b.weight"])  # [H][rank][nope]
        vb = G.tensor_f32(t[f"blk.{L}.attn_v_b.weight"])  # [H][v][rank]
        W[name] = np.concatenate([kb.transpose(0, 2, 1), vb], axis=1).reshape(-1, kb.shape[1])
S.save(os.path.join(out, "model.safetensors"), W)
EOF2
    "$PYTHON" "$REF/hf_ref.py" "$WORK/$q-$t.hf" --tokens "$toks" --out "$WORK/$q-$t.ref" --greedy $NGEN \
        >"$WORK/$q-$t.ref.ids" || { fail "$q $t: hf_ref failed"; continue; }
    for mode in latent decompressed; do
        colibri_run "$WORK/$q.ids" $F32KV --mla $mode -m "$WORK/$q-$t.gguf" --tokens "$toks" -n $NGEN --threads 2 \
            --dump-logits "$WORK/$q.logits" || continue
        check "$PYTHON" "$REF/compare.py" logits "$WORK/$q.logits" "$WORK/$q-$t.ref" --vocab 160 --rms-std 0.02 \
            --min-argmax 1 --label "$q $t (--mla $mode) vs hf_ref on its weights"
        check "$PYTHON" "$REF/compare.py" greedy "$WORK/$q.ids" "$WORK/$q-$t.ref.ids" --label "$q $t greedy"
    done
done
done

# ik_llama.cpp's converter writes attn_kv_b and 2-D attn_k_b [H x rank][nope] / attn_v_b
# [H x v][rank] side by side, with the unsplit keys: the latent cache then runs on k_b / v_b
# (bit-identical to the split file), decompressed on kv_b (bit-identical to the unsplit one).
# Then inconsistent split files, each refused in one line: a k_b without its v_b, k_b stored
# [H][nope][rank], key_length_mla without value_length_mla, key_length not the latent's
# width, key_length_mla disagreeing with the tensors.
if [ -f "$WORK/dsv3.split.gguf" ]; then
    for v in ik no-vb kb-t one-mla latent-kl bad-mla; do
        "$PYTHON" - "$REF" "$WORK/dsv3.split.gguf" "$WORK/dsv3.gguf" "$WORK/dsv3-$v.gguf" "$v" <<'EOF2' || fail "dsv3 $v: GGUF surgery"
import sys
sys.path.insert(0, sys.argv[1])
import gguf_np as G
split, fused, out, v = sys.argv[2:6]
kv, ty, t = G.read_typed(split)
keys = list(kv)
ts = [(n, G.tensor_f32(x)) for n, x in t.items()]
A = "deepseek2.attention."
if v == "ik":
    kv, ty, ft = G.read_typed(fused)
    keys = list(kv)
    ts = [(n, G.tensor_f32(x)) for n, x in ft.items()]
    ts += [(n, a.reshape(-1, a.shape[-1])) for n, a in ((n, G.tensor_f32(x)) for n, x in t.items()) if "_b.weight" in n
           and ("attn_k_b" in n or "attn_v_b" in n)]
elif v == "no-vb":
    ts = [(n, a) for n, a in ts if n != "blk.0.attn_v_b.weight"]
elif v == "kb-t":
    ts = [(n, a.transpose(0, 2, 1) if n == "blk.1.attn_k_b.weight" else a) for n, a in ts]
elif v == "one-mla":
    keys.remove(A + "value_length_mla")
elif v == "latent-kl":
    kv[A + "key_length"] += 1
elif v == "bad-mla":
    kv[A + "key_length_mla"] += 8
G.write(out, [(k, ty[k], kv[k]) for k in keys], ts)
EOF2
    done
    toks=$(csv "$(cat "$WORK/dsv3/tokens.txt")")
    for mode in latent decompressed; do
        ref=$([ $mode = latent ] && echo split.gguf || echo gguf)
        for m in dsv3-ik.gguf "dsv3.$ref"; do
            colibri_run "$WORK/ik.ids" $F32KV --mla $mode -m "$WORK/$m" --tokens "$toks" -n 2 --threads 2 \
                --dump-logits "$WORK/$m.$mode.logits" || continue 2
        done
        cmp -s "$WORK/dsv3-ik.gguf.$mode.logits" "$WORK/dsv3.$ref.$mode.logits" ||
            fail "dsv3 in ik_llama.cpp's layout (--mla $mode): logits differ from dsv3.$ref's"
    done
    expect_clean_error "attn_k_b.weight' without 'blk.0.attn_v_b.weight" run -m "$WORK/dsv3-no-vb.gguf" --tokens 1,2 -n 1
    expect_clean_error "'blk.1.attn_k_b.weight' has shape \[4,16,32\]" run -m "$WORK/dsv3-kb-t.gguf" --tokens 1,2 -n 1
    expect_clean_error "key_length_mla without value_length_mla" run -m "$WORK/dsv3-one-mla.gguf" --tokens 1,2 -n 1
    expect_clean_error "not the latent widths" run -m "$WORK/dsv3-latent-kl.gguf" --tokens 1,2 -n 1
    expect_clean_error "key_length_mla 32 / value_length_mla 16 disagree with the tensors" \
        run -m "$WORK/dsv3-bad-mla.gguf" --tokens 1,2 -n 1
fi

# Llama-4 as llama.cpp's converter writes it (llama4: HF's q/k rows, stacked experts, the
# routers' layers from interleave_moe_layer_step) and its loader reads it: what the file
# cannot carry is fixed in llama.cpp's code with Llama4TextConfig's defaults (chunks of
# 8192 on three layers of four, NoPE on the fourth with temperature tuning floor 8192 /
# scale 0.1, q/k L2 norm unless 128 experts). llama4-gguf has that layout (top-1 of 4
# experts, MoE on odd layers, llama3 rope scaling: rope_freqs.weight); llama4-gguf-cond the
# Llama4ForConditionalGeneration layout with values a GGUF cannot carry (chunk 6, no q/k
# norm: the reference runs on llama.cpp's reading, chunk 8192 and the norm on);
# llama4-gguf-full every layer full_attention (attention.sliding_window 0: rope on every
# layer, no chunk). Each GGUF's hyper-parameters (per-layer chunk, NoPE, q/k norm,
# temperature tuning, dense layers) must equal those of the HF directory the reference ran.
same_hparams() { # A.colibri B.colibri LABEL: the two files' "config" objects are equal (llama3
    # rope scaling, rope_freqs.weight in a GGUF and its parameters in HF, is left to the logits)
    "$PYTHON" - "$REF" "$@" <<'EOF2' || fail "$3: hyper-parameters differ"
import sys
sys.path.insert(0, sys.argv[1])
import gguf_np as G
a, b = (G.read_colibri(p)[0]["config"] for p in sys.argv[2:4])
if a.get("rope_scaling") == 5:  # CLB_ROPE_SCALING_FREQS
    for k in ("rope_scaling", "rope_factor", "rope_low_freq_factor", "rope_high_freq_factor", "rope_orig_ctx"):
        a.pop(k, None), b.pop(k, None)
d = {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
print(f"{sys.argv[4]}: hyper-parameters {'equal' if not d else 'differ: ' + str(d)}")
sys.exit(1 if d else 0)
EOF2
}
llama4_case() { # NAME GEN_ARGS...
    case_ "$@"
    [ -f "$WORK/$1.colibri" ] || return
    colibri_convert "$refdir" "$WORK/$1-hf.colibri" --dtype f32 && same_hparams "$WORK/$1.colibri" "$WORK/$1-hf.colibri" "$1"
}
llama4_case llama4-gguf --family llama4 --seed 61 --layers 4 --hidden 64 --heads 4 --kv-heads 2 --head-dim 16 \
    --experts 4 --top-k 1 --ff 32 --dense-ff 96 --sparse-step 2 --qk-norm 1 --attention-bias 0 --vocab 192 --max-pos 512 \
    --rope-scaling '{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}'
llama4_case llama4-gguf-cond --family llama4 --conditional --seed 62 --layers 4 --hidden 64 --heads 4 --kv-heads 1 \
    --head-dim 24 --experts 5 --top-k 2 --ff 32 --dense-ff 64 --sparse-step 1 --chunk 6 --qk-norm 0 \
    --attention-bias 0 --vocab 160
llama4_case llama4-gguf-full --family llama4 --seed 63 --layers 4 --hidden 64 --heads 4 --kv-heads 2 --head-dim 16 \
    --experts 3 --top-k 1 --ff 32 --dense-ff 64 --sparse-step 2 --layer-types full --qk-norm 1 --attention-bias 0 \
    --vocab 160
# The fixed chunk and temperature tuning at work: a prompt of 8200 tokens crosses position
# 8192, where the chunked layers start a new chunk and the NoPE layer's q scale leaves 1
# (llama4-gguf-long: 2 experts, both chosen, so that the long prompt has no routing
# near-ties). Teacher-forced logits of every position against hf_ref (one forward pass of
# numpy, the slowest step here); argmax may differ on a near-tied row. The check has teeth:
# the same model from its HF directory with chunks of 16384 and no temperature tuning agrees
# with the reference before position 8191 and not after.
# (The sanitizer build runs the short cases only: this one's two minutes are numpy's.)
name=llama4-gguf-long dir="$WORK/llama4-gguf-long"
echo "== $name: 8200 tokens"
if [ "${BUILD%-san*}" != "${BUILD:-}" ]; then
    echo "$name: skipped in the sanitizer build ($BUILD)"
elif $GEN --out "$dir" --n-tokens 24 --family llama4 --seed 64 --layers 4 --hidden 32 --heads 2 --kv-heads 1 \
        --head-dim 16 --experts 2 --top-k 2 --ff 16 --dense-ff 32 --sparse-step 2 --qk-norm 1 --attention-bias 0 \
        --vocab 64 --max-pos 16384 >"$WORK/gen.log" 2>&1 && $H2G "$dir" "$WORK/$name.gguf" >/dev/null; then
    toks=$("$PYTHON" -c "import numpy as np; r = np.random.default_rng(64); print(','.join(map(str, [1] + list(r.integers(3, 64, 8199)))))")
    "$PYTHON" "$REF/hf_ref.py" "$dir" --tokens "$toks" --out "$WORK/$name.ref" || fail "$name: hf_ref failed"
    long_run() { # MODEL LABEL ROWS COMPARE-ARGS...: teacher-forced logits of MODEL vs hf_ref
        _m=$1 _l=$2 _r=$3; shift 3
        colibri_run "$WORK/$name.ids" $F32KV -m "$_m" --tokens "$toks" -n 1 --max-seq-len 8256 --threads 2 \
            --dump-logits "$WORK/$name.logits" || return 2
        "$PYTHON" "$REF/compare.py" logits "$WORK/$name.logits" "$WORK/$name.ref" --vocab 64 --got-rows "$_r" \
            --ref-rows "$_r" --label "$_l" "$@"
    }
    check long_run "$WORK/$name.gguf" "$name vs hf_ref" 0:8200 --max-rel-row "$TOL" --min-argmax 0.999
    rm -rf "$dir-off"; cp -r "$dir" "$dir-off"
    "$PYTHON" -c "import json, sys; c = json.load(open(sys.argv[1])); \
c.update(attention_chunk_size=16384, attn_temperature_tuning=False); json.dump(c, open(sys.argv[1], 'w'))" "$dir-off/config.json"
    check long_run "$dir-off" "$name without chunks / tuning, positions < 8191" 0:8191 --max-rel-row "$TOL"
    long_run "$dir-off" "$name without chunks / tuning, positions >= 8191 (must differ)" 8191: --max-rel-row "$TOL" \
        && fail "$name: positions past 8191 agree without chunks or temperature tuning"
else
    fail "$name: gen_model / hf_to_gguf failed: $(tail -2 "$WORK/gen.log")"
fi

# llama4 files llama.cpp would read otherwise than they say are refused by name: a
# sliding_window other than 0 (llama.cpp runs chunks of 8192 whatever it is), routers on
# other layers than interleave_moe_layer_step makes MoE, no step at all
for bad in "sliding_window:llama4.attention.sliding_window 4096 is not supported" \
    "step1:blk.0 has no router (ffn_gate_inp) but llama4.interleave_moe_layer_step 1 makes it MoE" \
    "nostep:llama4.interleave_moe_layer_step is missing"; do
    [ -f "$WORK/llama4-gguf.gguf" ] || break
    "$PYTHON" - "$REF" "$WORK/llama4-gguf.gguf" "$WORK/bad.gguf" "${bad%%:*}" <<'EOF2'
import sys
sys.path.insert(0, sys.argv[1])
import gguf_np as G
kv, ty, t = G.read_typed(sys.argv[2])
what, step = sys.argv[4], "llama4.interleave_moe_layer_step"
items = [(k, ty[k], 1 if what == "step1" and k == step else kv[k]) for k in kv if not (what == "nostep" and k == step)]
if what == "sliding_window":
    items.append(("llama4.attention.sliding_window", G.T_U32, 4096))
G.write(sys.argv[3], items, [(n, G.tensor_f32(x)) for n, x in t.items()])
EOF2
    expect_clean_error "${bad#*:}" run -m "$WORK/bad.gguf" --tokens 1,2 -n 1
done

# SmallThinker from llama.cpp's smallthinker layout: the router on the layer's input before
# attention, ReGLU experts renormalised, expert_gating_func sigmoid or softmax; the file keeps
# no rope_layout / sliding_window_layout, so with attention.sliding_window layers 0, 4, ...
# are full attention without rope and the others slide (the window the file's, 6 of 24
# tokens; llama.cpp would run 4096), without it rope on every layer. st-gguf has the
# published layout (the reference runs the HF config itself); st-gguf-other another layout
# (the reference runs the file's, reported by the converter); st-gguf-sm softmax, no window.
case_ st-gguf --family smallthinker --seed 38 --layers 5 --hidden 64 --heads 4 --kv-heads 2 --head-dim 16 \
    --experts 8 --top-k 2 --ff 32 --nope-layers 0,4 --swa-layers 1,2,3 --sliding-window 6 --tie 1 --vocab 192
case_ st-gguf-other --family smallthinker --seed 36 --layers 3 --hidden 64 --heads 4 --kv-heads 2 \
    --head-dim 16 --experts 8 --top-k 2 --ff 32 --nope-layers 1 --swa-layers 2 --sliding-window 6 --tie 1 --vocab 192
grep -q "smallthinker: rope_layout .* cannot be stored" "$WORK/h2g.err" \
    || fail "st-gguf-other: the converter did not report the layout it cannot store"
case_ st-gguf-sm --family smallthinker --seed 37 --layers 2 --hidden 64 --heads 4 --kv-heads 1 \
    --experts 6 --top-k 3 --ff 48 --router-softmax 1 --tie 0 --vocab 160
finish gguf_families
