#!/bin/sh
# Every architecture family on random tiny configurations, including shapes no fixture
# covers (head_dim != hidden/heads, odd expert counts, top-1, leading dense layers, sparse
# steps, group-limited routing, MLA with and without q_lora, YaRN, multipliers): generated
# as Hugging Face directories (tests/reference/gen_model.py), converted to .colibri (f32)
# and run from the directory directly; logits must match the numpy reference
# (tests/reference/hf_ref.py) within 1e-4 x max |logit| per row, greedy ids identical.
# Also: unsupported options are refused with the option named.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/reference/it_lib.sh"
need_colibri
TOL=${FLOAT_TOL:-1e-4}
NGEN=8
GEN="$PYTHON $REF/gen_model.py"

# case NAME GEN_ARGS... (CASE_RUN: extra colibri run options)
case_() {
    name=$1; shift
    dir="$WORK/$name"
    echo "== $name: $*"
    $GEN --out "$dir" --n-tokens 24 --margin-greedy $NGEN "$@" >"$WORK/gen.log" 2>&1 \
        || { fail "$name: gen_model failed: $(tail -2 "$WORK/gen.log")"; return; }
    toks=$(csv "$(cat "$dir/tokens.txt")")
    "$PYTHON" "$REF/hf_ref.py" "$dir" --tokens "$toks" --out "$WORK/$name.ref" --greedy $NGEN >"$WORK/$name.ref.ids" \
        || { fail "$name: hf_ref failed"; return; }
    colibri_convert "$dir" "$WORK/$name.colibri" --dtype f32 || return
    for m in "$WORK/$name.colibri" "$dir"; do
        # shellcheck disable=SC2086
        colibri_run "$WORK/$name.ids" $F32KV -m "$m" --tokens "$toks" -n $NGEN --threads 2 --dump-logits "$WORK/$name.logits" \
            ${CASE_RUN:-} || continue
        vocab=$("$PYTHON" -c "import json,sys; c=json.load(open(sys.argv[1])); print(c.get('text_config', c)['vocab_size'])" "$dir/config.json")
        check "$PYTHON" "$REF/compare.py" logits "$WORK/$name.logits" "$WORK/$name.ref" --vocab "$vocab" \
            --max-rel-row "$TOL" --min-argmax 1 --label "$name ($(basename "$m")) vs hf_ref"
        check "$PYTHON" "$REF/compare.py" greedy "$WORK/$name.ids" "$WORK/$name.ref.ids" --label "$name greedy"
    done
}

. "$ROOT/tests/reference/family_cases.sh"
# SmallThinker (its GGUF files: tests/integration/gguf_families.sh): the router reads
# the layer's input before attention, ReGLU experts, sigmoid-renormalised or softmax top-k,
# NoPE and sliding-window layers by rope_layout / sliding_window_layout, tied embeddings
case_ smallthinker --family smallthinker --seed 36 --layers 3 --hidden 64 --heads 4 --kv-heads 2 --head-dim 16 \
    --experts 8 --top-k 2 --ff 32 --nope-layers 1 --swa-layers 2 --sliding-window 6 --tie 1 --vocab 192
case_ smallthinker-sm --family smallthinker --seed 37 --layers 2 --hidden 64 --heads 4 --kv-heads 1 \
    --experts 6 --top-k 3 --ff 48 --router-softmax 1 --tie 0 --vocab 160
# Llama-4 from its HF directory (its GGUF files: tests/integration/gguf_families.sh): MoE
# every interleave_moe_layer_step-th layer (dense layers of intermediate_size_mlp), top-k
# sigmoid router whose weight scales the expert input, stacked gate_up_proj split in halves,
# ungated shared expert; rope of adjacent pairs with L2 q/k norm after it, chunked attention
# on the rope layers (chunk 8 of 24 tokens), NoPE layers with temperature tuning (floor_scale
# 4). llama4-cond: the Llama4ForConditionalGeneration layout (text_config, language_model.*
# weights, a vision tower skipped), explicit moe_layers / no_rope_layers, top-2, no q/k norm,
# llama3 rope scaling, attn_temperature_tuning given as a number as the published configs do.
case_ llama4 --family llama4 --seed 41 --layers 4 --hidden 64 --heads 4 --kv-heads 2 --head-dim 16 \
    --experts 4 --top-k 1 --ff 32 --dense-ff 96 --sparse-step 2 --chunk 8 --floor-scale 4 --attn-scale 0.3 \
    --qk-norm 1 --attention-bias 1 --vocab 192
case_ llama4-cond --family llama4 --conditional --seed 42 --layers 4 --hidden 64 --heads 4 --kv-heads 1 \
    --head-dim 24 --experts 5 --top-k 2 --ff 32 --dense-ff 64 --moe-layers 0,2 --nope-layers 1 --chunk 6 \
    --floor-scale 3 --attn-scale 0.5 --temp-tuning 4 --qk-norm 0 --attention-bias 0 --vocab 160 --max-pos 512 \
    --rope-scaling '{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}'

# Phi-3.5-MoE (its GGUF layout: gguf_families.sh): LayerNorm with biases,
# q/k/v/o and LM head biases, sparsemixer top-2 (a wide router_jitter_noise, so that the
# masked softmax mixes several experts, then the published 0.01), LongRoPE with short_mscale /
# long_mscale. HF picks the short factors while the sequence stays within
# original_max_position_embeddings, colibri by the context (--max-seq-len): the short set
# with a context of 64 = original, the long set with a 24-token prompt past an original of 16
# and the default context; the architecture name as the published config.json spells it.
CASE_RUN="--max-seq-len 64"
case_ phimoe-short --family phimoe --seed 51 --layers 3 --hidden 64 --heads 4 --kv-heads 2 --experts 6 \
    --top-k 2 --ff 32 --router-jitter 0.3 --longrope-orig 64 --max-pos 256 --vocab 192
CASE_RUN=
# a state saved with the short set is not reused by an engine on the long set
if [ -f "$WORK/phimoe-short/config.json" ]; then
    toks=$(csv "$(cat "$WORK/phimoe-short/tokens.txt")"); rm -f "$WORK/phimoe.state"
    colibri_run "$WORK/phimoe.pc.ids" -m "$WORK/phimoe-short" --tokens "$toks" -n 1 --max-seq-len 64 \
        --prompt-cache "$WORK/phimoe.state"
    if "$COLIBRI" run -m "$WORK/phimoe-short" --tokens "$toks" -n 1 --prompt-cache "$WORK/phimoe.state" \
        >/dev/null 2>"$WORK/err"; then fail "phimoe: a short-set state loaded by a long-set engine"
    else grep -q "rotary embedding" "$WORK/err" || fail "phimoe state refusal does not say why: $(cat "$WORK/err")"; fi
fi
case_ phimoe-long --family phimoe --seed 52 --layers 2 --hidden 64 --heads 4 --kv-heads 1 --experts 8 \
    --top-k 2 --ff 48 --longrope-orig 16 --max-pos 512 --arch-name PhiMoEForCausalLM --lm-head-bias 0 --vocab 160
# LongRoPE on a dense Llama (the attention factor derived from max_position / original)
case_ llama-longrope --family llama --seed 53 --layers 2 --hidden 64 --heads 4 --kv-heads 2 --ff 96 --vocab 160 \
    --max-pos 512 --rope-scaling '{"rope_type": "longrope", "original_max_position_embeddings": 16, "short_factor": [1.1, 1.3, 1.2, 1.9, 1.5, 1.05, 1.7, 1.4], "long_factor": [4.2, 1.6, 6.8, 2.5, 3.3, 5.9, 1.2, 2.7]}'

# JetMoE (HF directory only: no GGUF layout exists): mixture of attention heads (routed
# query/output projections over a shared kv_proj, K/V repeated per top-k slot) and a MoE FFN,
# stacked ParallelExperts, output biases, block norms at eps 1e-6 (a large rms_norm_eps, read
# by the final norm only, makes the difference show); top-3 of 5 with one K/V head untied
case_ jetmoe --family jetmoe --seed 41 --layers 3 --hidden 64 --kv-heads 2 --head-dim 16 --experts 4 --top-k 2 \
    --ff 32 --eps 0.05 --tie 1 --vocab 160
case_ jetmoe-k3 --family jetmoe --seed 42 --layers 2 --hidden 64 --kv-heads 1 --head-dim 24 --experts 5 --top-k 3 \
    --ff 48 --vocab 192
# The attention experts live in the expert store with the FFN experts: a bounded pool (two
# slots; a budget just above the dense part) reads both kinds and gives the unbounded
# run's logits bit for bit
for name in jetmoe jetmoe-k3; do
    m="$WORK/$name.colibri"
    [ -f "$m" ] || continue
    toks=$(csv "$(cat "$WORK/$name/tokens.txt")")
    colibri_run "$WORK/$name.u.ids" $F32KV -m "$m" --tokens "$toks" -n $NGEN --dump-logits "$WORK/$name.u" || continue
    "$COLIBRI" run -m "$m" --tokens 1 -n 1 --expert-pool 1 2>"$WORK/err" >/dev/null
    slot=$(sed -n 's/.*fewer than 2 experts of \([0-9]*\) bytes.*/\1/p' "$WORK/err")
    "$COLIBRI" run $F32KV -m "$m" --tokens "$toks" -n 1 --mem-budget 1 2>"$WORK/err" >/dev/null
    dense=$(sed -n 's/.*decoder buffers (\([0-9]*\) bytes).*/\1/p' "$WORK/err")
    [ -n "$slot" ] && [ -n "$dense" ] || { fail "$name: no slot / dense size in: $(cat "$WORK/err")"; continue; }
    for opt in "--expert-pool $((2 * slot + slot / 2)) --direct-io on" "--mem-budget $((dense + 3 * slot))"; do
        # shellcheck disable=SC2086
        colibri_run "$WORK/$name.b.ids" $F32KV -m "$m" --tokens "$toks" -n $NGEN --dump-logits "$WORK/$name.b" $opt || continue
        cmp -s "$WORK/$name.b" "$WORK/$name.u" && cmp -s "$WORK/$name.b.ids" "$WORK/$name.u.ids" ||
            fail "$name: $opt changed the logits"
        grep -q "expert pool [23] slots.* [1-9][0-9]* evictions" "$WORK/run.err" ||
            fail "$name: $opt did not stream both kinds of experts: $(tail -1 "$WORK/run.err")"
        echo "$name $opt: bit-identical to the unbounded run; $(grep 'expert pool' "$WORK/run.err")"
    done
done
# ... also from compressed and encrypted files, where a layer's attention and FFN expert E
# are one chunk (read once, decoded into the slot together)
if [ -f "$WORK/jetmoe.u" ]; then
    toks=$(csv "$(cat "$WORK/jetmoe/tokens.txt")")
    "$COLIBRI" keygen "$WORK/jet.key" >/dev/null 2>&1
    for enc in "--compress zstd" "--encrypt --key-file $WORK/jet.key"; do
        # shellcheck disable=SC2086
        "$COLIBRI" convert "$WORK/jetmoe" -o "$WORK/jet.enc" $enc 2>"$WORK/err" || { fail "jetmoe: convert $enc: $(cat "$WORK/err")"; continue; }
        "$COLIBRI" run -m "$WORK/jet.enc" --key-file "$WORK/jet.key" --tokens 1 -n 1 --expert-pool 1 2>"$WORK/err" >/dev/null
        slot=$(sed -n 's/.*fewer than 2 experts of \([0-9]*\) bytes.*/\1/p' "$WORK/err")
        [ -n "$slot" ] || { fail "jetmoe $enc: no slot size in: $(cat "$WORK/err")"; continue; }
        # shellcheck disable=SC2086
        colibri_run "$WORK/jet.e.ids" $F32KV -m "$WORK/jet.enc" --key-file "$WORK/jet.key" --tokens "$toks" -n $NGEN \
            --dump-logits "$WORK/jet.e" --expert-pool $((2 * slot + slot / 2)) --direct-io on || continue
        cmp -s "$WORK/jet.e" "$WORK/jetmoe.u" && cmp -s "$WORK/jet.e.ids" "$WORK/jetmoe.u.ids" ||
            fail "jetmoe: $enc under a two-slot pool changed the logits"
        grep -q "expert pool 2 slots.* [1-9][0-9]* evictions" "$WORK/run.err" || fail "jetmoe $enc: not streamed: $(tail -1 "$WORK/run.err")"
        echo "jetmoe $enc, two-slot pool: bit-identical to the plain unbounded run"
    done
fi

# dense Qwen2 (q/k/v biases) and Qwen3 (per-head q/k norm): derived from a generated llama
# by renaming the architecture and adding the tensors the family has
derive() { # SRC DST ARCH MODEL_TYPE KIND
    "$PYTHON" - "$@" <<'PY'
import json, sys, numpy as np
sys.path.insert(0, sys.argv[6])
import safetensors_np as st
src, dst, arch, mt, kind = sys.argv[1:6]
t = st.load_dir(src); t = t[0] if isinstance(t, tuple) else t
c = json.load(open(src + '/config.json'))
rng = np.random.default_rng(7)
hd = c.get('head_dim') or c['hidden_size'] // c['num_attention_heads']
for L in range(c['num_hidden_layers']):
    p = 'model.layers.%d.self_attn.' % L
    if kind == 'bias':
        for n in ('q', 'k', 'v'):
            t[p + n + '_proj.bias'] = (0.1 * rng.standard_normal(t[p + n + '_proj.weight'].shape[0])).astype(np.float32)
    else:
        for n in ('q', 'k'):
            t[p + n + '_norm.weight'] = (1 + 0.1 * rng.standard_normal(hd)).astype(np.float32)
c['architectures'] = [arch]; c['model_type'] = mt
c.pop('attention_bias', None)
import os; os.makedirs(dst, exist_ok=True)
st.save(dst + '/model.safetensors', t); json.dump(c, open(dst + '/config.json', 'w'))
open(dst + '/tokens.txt', 'w').write(open(src + '/tokens.txt').read())
PY
}
for fam in qwen2:Qwen2ForCausalLM:bias qwen3:Qwen3ForCausalLM:norm; do
    name=${fam%%:*}; rest=${fam#*:}; arch=${rest%%:*}; kind=${rest#*:}
    dir="$WORK/$name"
    echo "== $name (dense, derived from llama-hd)"
    derive "$WORK/llama-hd" "$dir" "$arch" "$name" "$kind" "$REF" || { fail "$name: derive failed"; continue; }
    toks=$(csv "$(cat "$dir/tokens.txt")")
    "$PYTHON" "$REF/hf_ref.py" "$dir" --tokens "$toks" --out "$WORK/$name.ref" --greedy $NGEN >"$WORK/$name.ref.ids" \
        || { fail "$name: hf_ref failed"; continue; }
    colibri_run "$WORK/$name.ids" $F32KV -m "$dir" --tokens "$toks" -n $NGEN --dump-logits "$WORK/$name.logits" || continue
    check "$PYTHON" "$REF/compare.py" logits "$WORK/$name.logits" "$WORK/$name.ref" --vocab 160 \
        --max-rel-row "$TOL" --min-argmax 1 --label "$name vs hf_ref"
    check "$PYTHON" "$REF/compare.py" greedy "$WORK/$name.ids" "$WORK/$name.ref.ids" --label "$name greedy"
done

# MLA with the latent cached (the default) against K/V decompressed per head, as the model's
# code computes: the same logits within float rounding (1e-5 of each row's largest), for the
# plain path and flash attention, also over 700 positions; then the latent cached in f16 and q8_0 against hf_ref
# (q8_0 bounds leave room for an expert chosen differently: these random routers have
# margins for float32 only).
for name in dsv2-q dsv2-noq dsv3; do
    dir="$WORK/$name"
    [ -f "$dir/config.json" ] || continue
    toks=$(csv "$(cat "$dir/tokens.txt")")
    vocab=$("$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['vocab_size'])" "$dir/config.json")
    colibri_run "$WORK/$name.dec.ids" $F32KV --mla decompressed -m "$dir" --tokens "$toks" -n 1 \
        --dump-logits "$WORK/$name.dec" || continue
    for fa in off on; do
        colibri_run "$WORK/$name.lat.ids" $F32KV --mla latent -fa $fa -m "$dir" --tokens "$toks" -n 1 --batch 7 \
            --dump-logits "$WORK/$name.lat" || continue
        check "$PYTHON" "$REF/compare.py" logits "$WORK/$name.lat" "$WORK/$name.dec" --vocab "$vocab" --max-rel-row 1e-5 \
            --min-argmax 1 --label "$name MLA latent (flash $fa) vs decompressed"
    done
    # 700 positions (keys in 3 chunks of 256): prefill tiles merging chunks, and one token at
    # a time (--batch 1: decode's key split over the threads, then the merge)
    long=$("$PYTHON" -c "import random; r=random.Random(5); print(','.join(str(r.randrange(3, $vocab)) for _ in range(700)))")
    colibri_run "$WORK/$name.ldec.ids" $F32KV --mla decompressed -fa off -m "$dir" --tokens "$long" -n 1 \
        --dump-logits "$WORK/$name.ldec" || continue
    for b in 64 1; do
        colibri_run "$WORK/$name.llat.ids" $F32KV --mla latent -fa on -m "$dir" --tokens "$long" -n 1 --batch $b \
            --threads 2 --dump-logits "$WORK/$name.llat" || continue
        check "$PYTHON" "$REF/compare.py" logits "$WORK/$name.llat" "$WORK/$name.ldec" --vocab "$vocab" --max-rel-row 1e-5 \
            --min-argmax 1 --label "$name MLA latent (flash, batch $b) vs decompressed at 700 positions"
    done
    # the latent cache saved and restored (--prompt-cache): the same greedy continuation
    rm -f "$WORK/$name.state"
    for i in 0 1 2; do
        pc=""; [ $i = 0 ] || pc="--prompt-cache $WORK/$name.state"
        # shellcheck disable=SC2086
        colibri_run "$WORK/$name.pc$i.ids" --mla latent -m "$dir" --tokens "$toks" -n 8 $pc || continue 2
    done
    grep -q "tokens reused" "$WORK/run.err" || fail "$name: the saved latent state was not reused: $(cat "$WORK/run.err")"
    grep -q . "$WORK/$name.pc0.ids" && cmp -s "$WORK/$name.pc0.ids" "$WORK/$name.pc1.ids" &&
        cmp -s "$WORK/$name.pc0.ids" "$WORK/$name.pc2.ids" && [ -s "$WORK/$name.state" ] ||
        fail "$name: the MLA latent prompt cache changed the continuation"
    for t in f16 q8_0; do
        colibri_run "$WORK/$name.$t.ids" -ctk $t --mla latent -m "$dir" --tokens "$toks" -n 1 \
            --dump-logits "$WORK/$name.$t" || continue
        check "$PYTHON" "$REF/compare.py" logits "$WORK/$name.$t" "$WORK/$name.ref" --vocab "$vocab" \
            --rms-std "$([ $t = f16 ] && echo 2e-3 || echo 0.12)" --min-argmax 0.9 --label "$name MLA latent $t vs hf_ref"
    done
done

# Sliding windows, chunked layers and attention sinks (clb_attn_layer): the layer patterns
# HF derives from sliding_window / use_sliding_window / max_window_layers / layer_types, a
# sink logit per head (gpt-oss semantics, here on families that do not ship them, to test
# the mechanism). Long enough prompts and small batches that the windowed layers' ring
# caches wrap several times (ring = window + batch - 1 rounded up to 32 positions).
attn_case() { # NAME "GEN ARGS" "RUN ARGS"
    name=$1 dir="$WORK/$1"
    echo "== $name: $2 | run $3"
    # shellcheck disable=SC2086
    $GEN --out "$dir" --margin-greedy $NGEN $2 >"$WORK/gen.log" 2>&1 \
        || { fail "$name: gen_model failed: $(tail -2 "$WORK/gen.log")"; return; }
    toks=$(csv "$(cat "$dir/tokens.txt")")
    "$PYTHON" "$REF/hf_ref.py" "$dir" --tokens "$toks" --out "$WORK/$name.ref" --greedy $NGEN >"$WORK/$name.ref.ids" \
        || { fail "$name: hf_ref failed"; return; }
    vocab=$("$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['vocab_size'])" "$dir/config.json")
    # shellcheck disable=SC2086
    colibri_run "$WORK/$name.ids" $F32KV -m "$dir" --tokens "$toks" -n $NGEN --threads 2 --dump-logits "$WORK/$name.logits" $3 || return
    check "$PYTHON" "$REF/compare.py" logits "$WORK/$name.logits" "$WORK/$name.ref" --vocab "$vocab" \
        --max-rel-row "$TOL" --min-argmax 1 --label "$name vs hf_ref"
    check "$PYTHON" "$REF/compare.py" greedy "$WORK/$name.ids" "$WORK/$name.ref.ids" --label "$name greedy"
}
SMALL="--layers 2 --hidden 64 --heads 4 --kv-heads 2 --ff 96 --vocab 160"
attn_case mistral-swa "--family mistral --seed 41 $SMALL --sliding-window 5 --n-tokens 72" "--batch 4"
attn_case mistral-swa-sinks "--family mistral --seed 42 $SMALL --sliding-window 9 --sinks --n-tokens 60" "--batch 3"
attn_case mistral-sinks "--family mistral --seed 43 $SMALL --sinks --n-tokens 24" ""
attn_case mistral-chunk "--family mistral --seed 44 $SMALL --layer-types chunked,sliding --chunk 6 --sliding-window 4 --n-tokens 50" "--batch 5"
attn_case qwen3moe-swa "--family qwen3_moe --seed 45 --layers 3 --hidden 64 --heads 4 --kv-heads 2 --experts 6 --top-k 2 --ff 32 --vocab 160 --sliding-window 7 --max-window-layers 1 --sinks --n-tokens 56" "--batch 8"
attn_case qwen3moe-types "--family qwen3_moe --seed 46 --layers 3 --hidden 64 --heads 4 --kv-heads 2 --experts 6 --top-k 2 --ff 32 --vocab 160 --sliding-window 6 --layer-types sliding,full --n-tokens 48" ""
attn_case mixtral-swa "--family mixtral --seed 47 --layers 2 --hidden 64 --heads 4 --kv-heads 2 --experts 4 --top-k 2 --ff 32 --vocab 160 --sliding-window 8 --n-tokens 48" "--batch 2"
# Llama-4's chunked layers over 72 positions in batches of 5: the chunk's ring cache wraps
attn_case llama4-long "--family llama4 --seed 48 --layers 4 --hidden 64 --heads 4 --kv-heads 2 --head-dim 16 --experts 4 --top-k 1 --ff 32 --dense-ff 64 --sparse-step 2 --chunk 8 --floor-scale 4 --attn-scale 0.3 --qk-norm 1 --attention-bias 0 --vocab 160 --n-tokens 72" "--batch 5"

# unsupported options are refused by name
rm -rf "$WORK/bad"; cp -r "$WORK/olmoe" "$WORK/bad"
sed -i 's/"hidden_act": "silu"/"hidden_act": "gelu"/' "$WORK/bad/config.json"
if "$COLIBRI" convert "$WORK/bad" -o "$WORK/bad.colibri" 2>"$WORK/err"; then fail "gelu accepted"
else grep -q "hidden_act 'gelu'" "$WORK/err" || fail "gelu refusal does not name it: $(cat "$WORK/err")"; fi
cp "$WORK/olmoe/config.json" "$WORK/bad/config.json"
sed -i 's/"rope_scaling": null/"rope_scaling": {"rope_type": "longrope", "factor": 2.0}/' "$WORK/bad/config.json"
if grep -q longrope "$WORK/bad/config.json"; then
    if "$COLIBRI" convert "$WORK/bad" -o "$WORK/bad.colibri" 2>"$WORK/err"; then fail "longrope without factors accepted"
    else grep -q "longrope needs short_factor" "$WORK/err" || fail "longrope refusal does not name it: $(cat "$WORK/err")"; fi
fi
# refused SRC WHAT PATTERN: converting SRC fails with PATTERN in the message
refused() {
    if "$COLIBRI" convert "$1" -o "$WORK/bad.colibri" 2>"$WORK/err"; then fail "$2 accepted"
    else grep -q "$3" "$WORK/err" || fail "$2: the refusal does not name $3: $(cat "$WORK/err")"; fi
}
# Phi-3.5-MoE: sparsemixer is defined for top-2 only; LayerNorm needs its biases
if [ -f "$WORK/phimoe-long/config.json" ]; then
    rm -rf "$WORK/bad"; cp -r "$WORK/phimoe-long" "$WORK/bad"
    sed -i 's/"num_experts_per_tok": 2/"num_experts_per_tok": 3/' "$WORK/bad/config.json"
    refused "$WORK/bad" "phimoe: top-3 sparsemixer" "num_experts_per_tok 3"
    cp "$WORK/phimoe-long/config.json" "$WORK/bad/config.json"
    "$PYTHON" - "$WORK/bad" "$REF" <<'PY' || fail "phimoe: could not drop a norm bias"
import sys; sys.path.insert(0, sys.argv[2])
import safetensors_np as st
t = st.load_dir(sys.argv[1]); t = t[0] if isinstance(t, tuple) else t
del t["model.layers.1.post_attention_layernorm.bias"]
st.save(sys.argv[1] + "/model.safetensors", t)
PY
    refused "$WORK/bad" "phimoe: a LayerNorm without its bias" "blk.1.ffn_norm.bias"
fi
# JetMoE: only the silu GLU, and num_attention_heads must be kv heads x top-k
if [ -f "$WORK/jetmoe/config.json" ]; then
    rm -rf "$WORK/bad"; cp -r "$WORK/jetmoe" "$WORK/bad"
    sed -i 's/"activation_function": "silu"/"activation_function": "gelu"/' "$WORK/bad/config.json"
    refused "$WORK/bad" "jetmoe: a gelu GLU" "activation_function 'gelu'"
    cp "$WORK/jetmoe/config.json" "$WORK/bad/config.json"
    sed -i 's/"num_attention_heads": 4/"num_attention_heads": 8/' "$WORK/bad/config.json"
    refused "$WORK/bad" "jetmoe: num_attention_heads 8" "num_attention_heads 8"
fi
# GLM-4.5: the MTP layer's tensors are skipped only because the config says it is one; a
# group count that does not divide the experts is refused by name
if [ -f "$WORK/glm45/config.json" ]; then
    rm -rf "$WORK/bad"; cp -r "$WORK/glm45" "$WORK/bad"
    sed -i 's/"num_nextn_predict_layers": 1/"num_nextn_predict_layers": 0/' "$WORK/bad/config.json"
    if "$COLIBRI" convert "$WORK/bad" -o "$WORK/bad.colibri" 2>"$WORK/err"; then fail "glm4moe: an undeclared layer 3 accepted"
    else grep -q "model.layers.3" "$WORK/err" || fail "glm4moe extra layer refusal does not name it: $(cat "$WORK/err")"; fi
    cp "$WORK/glm45/config.json" "$WORK/bad/config.json"
    sed -i 's/"n_group": 4/"n_group": 3/' "$WORK/bad/config.json"
    if "$COLIBRI" convert "$WORK/bad" -o "$WORK/bad.colibri" 2>"$WORK/err"; then fail "glm4moe: n_group 3 of 8 experts accepted"
    else grep -q "n_group 3" "$WORK/err" || fail "glm4moe n_group refusal does not name it: $(cat "$WORK/err")"; fi
fi
# ERNIE-4.5: biases on every projection (use_bias) are refused by name
if [ -f "$WORK/ernie45/config.json" ]; then
    rm -rf "$WORK/bad"; cp -r "$WORK/ernie45" "$WORK/bad"
    sed -i 's/"use_bias": false/"use_bias": true/' "$WORK/bad/config.json"
    if "$COLIBRI" convert "$WORK/bad" -o "$WORK/bad.colibri" 2>"$WORK/err"; then fail "ernie4_5_moe: use_bias=true accepted"
    else grep -q "use_bias" "$WORK/err" || fail "ernie4_5_moe use_bias refusal does not name it: $(cat "$WORK/err")"; fi
fi
# Llama-4: layer types it has no mask for, and a non-numeric attn_temperature_tuning, are
# refused by name (refused, above).
if [ -f "$WORK/llama4/config.json" ]; then
    rm -rf "$WORK/bad"; cp -r "$WORK/llama4" "$WORK/bad"
    "$PYTHON" -c "import json, sys; c = json.load(open(sys.argv[1])); \
c['layer_types'] = ['sliding_attention'] + ['full_attention'] * (c['num_hidden_layers'] - 1); \
json.dump(c, open(sys.argv[1], 'w'))" "$WORK/bad/config.json"
    refused "$WORK/bad" "llama4: sliding_attention" "layer_types\[0\] 'sliding_attention'"
    cp "$WORK/llama4/config.json" "$WORK/bad/config.json"
    sed -i 's/"attn_temperature_tuning": true/"attn_temperature_tuning": "yes"/' "$WORK/bad/config.json"
    refused "$WORK/bad" "llama4: a string attn_temperature_tuning" "attn_temperature_tuning"
fi
finish families
